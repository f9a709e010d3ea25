/* SPDX-License-Identifier: MIT */
/*
 * The daemon proper: one libuv loop that owns the registry of filters, the TCP listeners for
 * the text and RESP protocols (one port, the protocol decided by each connection's first byte:
 * '*' is RESP, anything else the bloomd text protocol), the connections, a once-a-second
 * sweep for timeouts, and the signals (SIGTERM/SIGINT stop, SIGHUP re-reads the config file).
 *
 * Lifecycle (see main.c):
 *
 *	srv_config_read(path, overrides, n, &cfg, err, sizeof(err));
 *	srv_new(&opts, &s);     -- binds every listener; nothing is served yet
 *	srv_run(s);             -- serves until SIGTERM/SIGINT or srv_stop()
 *	srv_free(s);            -- closes what is left, uv_loop_close(), frees
 *
 * Connections. Input is parsed as soon as it arrives and every complete command in it runs;
 * the replies of that whole batch go out with one write. While a write is pending the
 * connection is not read (so a client that never reads its replies holds at most one batch of
 * output, and is closed once that write has made no progress for request_timeout seconds).
 * A batch whose output passes max_output_bytes closes the connection. Buffers are kept and
 * reused up to a small size: after each batch, input and output buffers over 64 KiB are
 * released once empty (input of a partial command shrinks back to 64 KiB when it fits), and
 * argument arrays and per-command scratch go back to 1024 entries, so an idle connection holds
 * little whatever it sent before. Reads with no partial command pending land in one buffer
 * shared by the loop. All connections' buffers together are bounded by max_client_memory:
 * checked before an input buffer grows and after each command, the connection that would pass
 * it gets "-ERR client buffers would pass max_client_memory; closing" (text: "Client Error:
 * Client buffers would pass max_client_memory") and is closed once that is written.
 *
 * Limits and errors, each closing only the connection at fault:
 *   text: a line over max_line_bytes gets "Client Error: Line too long\n", the rest of that
 *         line is discarded (across reads) and the next line is served.
 *   RESP: a protocol error (malformed frame, bulk over max_bulk_bytes, more than max_args
 *         elements) gets "-ERR Protocol error: ...\r\n" and the connection is closed once the
 *         reply is written. One command may occupy at most max(max_bulk_bytes, 16 MiB) plus
 *         128 KiB of input ("-ERR Protocol error: command too large", then closed).
 *   before AUTH (auth_token_file set): RESP commands of at most 10 elements and bulks of at
 *         most 16384 bytes, as Redis 7.0 ("-ERR Protocol error: unauthenticated multibulk
 *         length" / "... bulk length", then closed); text lines of at most 16384 bytes
 *         ("Client Error: Unauthenticated line too long\n", then closed).
 *   more than max_connections open: the new connection is accepted and closed at once (a
 *         warning is logged at most once a second).
 *   idle_timeout: no input for that long closes the connection; request_timeout: a partial
 *         command held that long closes it.
 * A graceful close (after QUIT or a protocol error) shuts down the sending side, then discards
 * input for up to 2 seconds until the client closes, so the last reply is not lost to a reset.
 */
#ifndef BLOSSOMD_SERVER_SERVER_H
#define BLOSSOMD_SERVER_SERVER_H

#include <stddef.h>

#include "conf/config.h"

struct srv;

/* One setting given on the command line: it overrides the file, at start and on reload. */
struct srv_override {
	const char *flag;  /* as typed, for messages: "--port" */
	const char *key;   /* the config key: "port" */
	const char *value; /* the flag's argument */
};

struct srv_options {
	const struct config *config; /* validated (srv_config_read()); copied by srv_new() */
	/* The file SIGHUP re-reads, or NULL (SIGHUP then only logs that there is nothing to
	 * read). Must stay valid until srv_free(), as must overrides. */
	const char *config_path;
	const struct srv_override *overrides;
	size_t noverrides;
	const char *version; /* reported by INFO and HELLO; must outlive the server */
	/* --wal-truncate-corrupt: a corrupt record in the log is cut there (what follows is lost)
	 * instead of refusing to start. */
	bool wal_truncate_corrupt;
	/* --accept-missing-files: missing segments at the start of the log are reported and
	 * started without, instead of refusing to start. */
	bool accept_missing_files;
};

/*
 * Build a configuration: defaults, then the file at path (NULL: none), then the overrides in
 * order, then conf_validate(). Returns 0 with *out filled, or a negative errno with *out
 * unspecified and the reason in err: conf_load()'s message ("PATH:LINE: ..." or
 * "PATH: cannot open: ..."), "--port: bad value for port: 'x'" for a bad flag, or
 * conf_validate()'s message.
 */
int srv_config_read(const char *path, const struct srv_override *ov, size_t nov, struct config *out,
		    char *err, size_t errlen);

/*
 * Create the server: the loop, the registry, the signal handlers and the sweep timer, and bind
 * a listener on port for every address in bind. Refuses (-EPERM) to listen on a non-loopback
 * address when auth_token_file is empty. Raises the open-file limit towards max_connections.
 * Every failure is logged with its reason ("bind 127.0.0.1:8673: address already in use") and
 * undoes the steps before it.
 * Returns 0 with *out set, or a negative errno (-ENOMEM, -EPERM, a libuv UV_E* code).
 */
int srv_new(const struct srv_options *opt, struct srv **out);

/*
 * What a start refuses before it opens anything, checked from the configuration alone: a
 * public bind address without auth_token_file, and a missing or weak token. --test-config and
 * srv_new() both use it. Returns 0, or a negative errno after logging why.
 */
int srv_config_check_start(const struct config *cfg);

/* Serve until stopped (signal or srv_stop()). Returns 0 after a clean stop, or -EIO if a
 * filter's final snapshot failed (main exits 1, so systemd and scripts see the loss). */
int srv_run(struct srv *s);

/* Begin a clean stop: stop accepting, close every connection and handle; srv_run() then
 * returns once all of them are closed. Safe to call more than once. */
void srv_stop(struct srv *s);

/*
 * Close anything still open, close the loop and free everything. Returns 0, or UV_EBUSY if
 * uv_loop_close() found handles or requests still alive (a bug; it is logged and the loop's
 * memory is leaked rather than freed while in use). NULL is ignored (returns 0).
 */
int srv_free(struct srv *s);

#endif /* BLOSSOMD_SERVER_SERVER_H */
