/* SPDX-License-Identifier: MIT */
/*
 * blossomd configuration: the settings of one daemon, their defaults, the INI file that sets
 * them (libinih, one section [blossomd]) and the checks that keep them sane.
 *
 * Intended order of use (flags override the file):
 *	conf_defaults(&c);
 *	conf_load(&c, path, err, sizeof(err));        -- optional
 *	conf_set(&c, "port", optarg, err, sizeof(err)); -- one per command-line flag
 *	conf_validate(&c, err, sizeof(err));
 *
 * Every error message is one line without a trailing newline, written into the caller's
 * buffer (err, errlen) and truncated to fit; err may be NULL when errlen is 0. On success the
 * buffer is left untouched.
 */
#ifndef BLOSSOMD_CONF_CONFIG_H
#define BLOSSOMD_CONF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The INI section that holds every key. */
#define CONF_SECTION "blossomd"

struct config {
	char bind[256];		      /* comma-separated IPv4/IPv6 literals, default "127.0.0.1" */
	uint16_t port;		      /* text + RESP port, default 8673, 1..65535 */
	uint16_t http_port;	      /* HTTP port, default 8674; 0 disables HTTP */
	char data_dir[4096];	      /* snapshot directory, default "/var/lib/blossomd" */
	uint32_t snapshot_interval;   /* seconds, default 5; 0 disables periodic snapshots */
	uint32_t cold_interval;	      /* seconds unused after which a filter is paged out
				       * (bloomd's), default 3600; 0 = never */
	uint64_t snapshot_pack_bytes; /* filters of at most this many bytes of bits share pack
				       * files, default 64 KiB; 0 = a file per filter */
	int wal;		      /* write-ahead log: 1 on (default), 0 off */
	int wal_fsync;		      /* 0 always (default), 1 everysec, 2 no (enum wal_fsync) */
	uint64_t wal_segment_bytes;   /* log segment size, default 64 MiB, >= 4096 */
	uint64_t wal_max_bytes;	      /* log size that triggers early checkpoints, default 1 GiB;
				       * 0 = none */
	/* Parameters of a filter created without them, per protocol, each following the peer a
	 * user of that protocol comes from: HTTP (default_*), text (bloomd: 100000 at 0.0001)
	 * and RESP auto-create (RedisBloom: 100 at 0.01). Capacity >= 1, 0 < rate < 1. */
	uint64_t default_capacity;	/* HTTP, default 100000 */
	double default_error_rate;	/* HTTP, default 0.01 */
	uint64_t text_default_capacity; /* default 100000 */
	double text_default_error_rate; /* default 0.0001 */
	uint64_t resp_default_capacity; /* default 100 */
	double resp_default_error_rate; /* default 0.01 */
	uint64_t max_memory;		/* bytes for all filters, default 4 GiB; 0 = no limit */
	uint32_t max_line_bytes;	/* text protocol line, default 1 MiB */
	uint32_t max_bulk_bytes;	/* RESP bulk string, default 64 MiB */
	uint32_t max_args;		/* arguments per command (RESP and text), default 1048576 */
	uint32_t multi_max_commands;	/* commands a MULTI queues, default 100000 */
	uint64_t multi_max_bytes;	/* bytes of their arguments, default 16 MiB */
	uint32_t max_key_bytes;	    /* default 64 KiB, <= max_line_bytes and <= max_bulk_bytes */
	uint64_t max_body_bytes;    /* HTTP request body, default 16 MiB */
	uint64_t max_gzip_bytes;    /* a gzip'd streamed add decodes to, default 64 GiB */
	uint32_t max_gzip_ratio;    /* its decoded per compressed byte, default 100 */
	uint32_t max_connections;   /* default 10000 */
	uint32_t idle_timeout;	    /* seconds, default 300; 0 = none */
	uint32_t request_timeout;   /* seconds a partial command/request may take, default 30;
				     * 0 = none */
	uint64_t max_output_bytes;  /* unsent output per connection before it is closed,
				     * default 64 MiB */
	uint64_t max_client_memory; /* buffers of all text/RESP connections together (input,
				     * arguments, scratch, replies), default 1 GiB; 0 = no
				     * limit */
	uint32_t max_channel_bytes; /* longest pub/sub channel or pattern, default 1 KiB */
	char notify_keyspace_events[32]; /* Redis's classes (letters of Ag$lshzxeKEtmdn),
					  * default "" (no keyspace notifications) */
	int log_level;		    /* syslog priority 0 (emerg) .. 7 (debug), default 6 (info) */
	uint64_t log_create_bytes;  /* a create of a filter this large or larger is logged at
				     * info, default 256 MiB; 0 = never */
	char auth_token_file[4096]; /* file holding the token; default "" (no auth) */

	/* A checkpoint's write or a start's load of this many bytes or more logs its progress at
	 * info, default 256 MiB; 0 = never. A line every log_progress_interval seconds, default
	 * 5; 0 = one each 16 MiB. */
	uint64_t log_progress_bytes;
	uint32_t log_progress_interval;

	char replicaof[300];	    /* "HOST PORT": start as a replica of it; default "" */
	char primary_auth[256];	    /* the token a replica AUTHs with; default "" (none) */
	uint32_t repl_timeout;	    /* seconds a link between primary and replica may be silent
				     * before it is dropped (the replica tries again); default 60;
				     * 0 = never */
	uint64_t repl_backlog_size; /* bytes of the newest records a primary keeps for replicas
				     * that reconnect (partial sync); default 16 MiB; 0 = none */
	uint64_t repl_output_bytes; /* unsent records a primary holds for one replica (during its
				     * image, or a partial sync's gap) before it drops the link or
				     * syncs it in full; default 256 MiB; 0 = no limit */
	uint32_t replica_priority;  /* INFO's slave_priority (Sentinel promotes the lowest; 0 =
				     * never), default 100 */
};

/*
 * Fill c with the defaults listed above. Every byte of c is written (padding zeroed), so two
 * default configs compare equal with memcmp. Cannot fail.
 */
void conf_defaults(struct config *c);

/*
 * Parse the INI file at path into c, which the caller has filled with defaults or with a
 * previous config; keys the file does not mention keep their value in c. All keys must be in
 * the section [blossomd]; a key before any section header, any other section header (even one
 * with no keys), an unknown key, a bad value, a line longer than libinih's limit (199 bytes,
 * comment lines excepted) or a line libinih cannot parse is an error, and parsing stops at the
 * first one. A key given twice takes its last value. Leading whitespace is ignored (indented
 * keys are fine; libinih's multi-line continuation is therefore not available). Comments are
 * lines starting with '#' or ';', or " ;" after a value.
 *
 * Each value is checked as conf_set() checks it; cross-field rules are not (call
 * conf_validate() once command-line flags have been applied too).
 *
 * Returns:
 *   0        c holds the result; err untouched.
 *   -EINVAL  bad content; c unchanged; err like "PATH:12: unknown key 'foo'",
 *            "PATH:7: bad value for max_memory: '12Q'", "PATH:3: unknown section 'x'",
 *            "PATH:2: key 'port' before the [blossomd] section header",
 *            "PATH:5: syntax error (expected '[section]' or 'key = value')",
 *            "PATH:9: line too long (max 199 bytes)", "PATH:4: line contains a NUL byte".
 *   -errno   the file cannot be opened or read (a directory gives -EISDIR); c unchanged;
 *            err like "PATH: cannot open: No such file or directory" or
 *            "PATH: cannot read: Input/output error".
 *   -ENOMEM  out of memory; c unchanged; err "PATH: out of memory".
 */
int conf_load(struct config *c, const char *path, char *err, size_t errlen);

/*
 * Check c as a whole: every field within the range conf_set() accepts (port >= 1,
 * 0 < default_error_rate < 1, default_capacity >= 1, size limits >= 1, log_level 0..7, bind a
 * non-empty list of address literals, data_dir non-empty, strings NUL-terminated), and the
 * cross-field rules: max_key_bytes <= max_line_bytes, max_key_bytes <= max_bulk_bytes, and
 * http_port != port unless http_port is 0.
 *
 * Returns 0 (err untouched) or -EINVAL with the first problem in err, e.g.
 * "bad value for port: '0' (must be between 1 and 65535)" or
 * "max_key_bytes (2097152) must not exceed max_line_bytes (1048576)".
 */
int conf_validate(const struct config *c, char *err, size_t errlen);

/*
 * Set the key named key (exact, case-sensitive INI name, e.g. "http_port") from the string
 * value, as found in the file or on the command line. Value syntax by key:
 *   counts, ports, seconds   decimal digits only ("0".."N"; no sign, spaces or "0x")
 *   byte sizes               decimal digits with an optional suffix k/K, m/M, g/G (x1024^n):
 *                            max_memory, max_line_bytes, max_bulk_bytes, max_key_bytes,
 *                            max_body_bytes, max_gzip_bytes, max_output_bytes,
 *                            max_client_memory, log_create_bytes, log_progress_bytes,
 *                            max_channel_bytes
 *   default_error_rate       a decimal number, 0 < p < 1 ("0.01", "1e-3")
 *   log_level                emerg alert crit err error warning notice info debug
 *                            (any case) or one digit 0-7
 *   bind                     comma-separated IPv4/IPv6 literals, no spaces ("127.0.0.1,::1")
 *   data_dir                 any non-empty string; auth_token_file any string ("" = no auth)
 *   notify_keyspace_events   letters of Redis's classes Ag$lshzxeKEtmdn, any order, or ""
 *
 * Returns 0, or -EINVAL with c unchanged and err like "unknown key 'x'",
 * "bad value for port: 'x'", "bad value for port: '0' (must be between 1 and 65535)" or
 * "bad value for data_dir: too long (max 4095 bytes)". key and value must not be NULL.
 */
int conf_set(struct config *c, const char *key, const char *value, char *err, size_t errlen);

/*
 * The syslog name of a priority: 0 "emerg", 1 "alert", 2 "crit", 3 "err", 4 "warning",
 * 5 "notice", 6 "info", 7 "debug". Returns NULL for any other level.
 */
const char *conf_log_level_name(int level);

/*
 * Whether key (an INI name) is one a running daemon changes (CONFIG SET, SIGHUP): every key
 * but bind, port, http_port, data_dir, wal, wal_fsync, wal_segment_bytes and auth_token_file,
 * which need a restart. False for an unknown key.
 */
bool conf_key_live(const char *key);

/* The name of the i-th key (0, 1, ...), in the order of the table; NULL past the last. */
const char *conf_key_at(size_t i);

/*
 * key's value in c as a file or conf_set() takes it, into buf (cut to len): a byte size in
 * the largest unit that divides it ("4g", "64k", "1000"), a rate in the shortest form that
 * reads back the same ("0.01"), a log level or choice by its name ("info", "on"). 0, or
 * -ENOENT for an unknown key.
 */
int conf_format(const struct config *c, const char *key, char *buf, size_t len);

/*
 * CONFIG REWRITE: rewrite the INI file at path (a symbolic link is followed: the file it
 * names is rewritten) so that every live key (conf_key_live) has c's value, keeping every
 * other byte: comments, blank lines, the order of lines, the restart-only keys' lines. A live
 * key's last line is replaced in place (its indentation, the spacing around '=' and a
 * comment after the value kept), and left as it is when it already reads as c's value;
 * earlier lines of the same key are left alone (the last one is the one that counts). A live
 * key the file lacks is appended, if c's value is not its default, after the line
 * "# Generated by CONFIG REWRITE" (added once, as Redis does; a "[blossomd]" header too if
 * the file has none). A missing file is written new. Crash-safe: a temporary file in the same
 * directory, fsync, rename over the file, fsync of the directory; the file keeps its mode.
 *
 * Returns 0; or a negative errno with the old file untouched and err like
 * "cannot create a temporary file in /etc/blossomd: Permission denied" (the failing step,
 * its path and the reason).
 */
int conf_rewrite(const char *path, const struct config *c, char *err, size_t errlen);

#endif /* BLOSSOMD_CONF_CONFIG_H */
