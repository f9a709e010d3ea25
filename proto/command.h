/* SPDX-License-Identifier: MIT */
/*
 * The one command layer all front ends share. A front end (text, RESP, HTTP) turns bytes into
 * a call here, and the typed result back into its own reply bytes; rules about names, keys,
 * limits, defaults and error kinds live here once.
 *
 * Threading: everything runs on the server's loop thread; nothing here locks.
 */
#ifndef BLOSSOMD_PROTO_COMMAND_H
#define BLOSSOMD_PROTO_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_registry.h"
#include "proto/buf.h"

struct cmd_session;
struct pubsub;
struct pubsub_session;

/* What went wrong, independent of any protocol; each front end has its own words for it. */
enum cmd_status {
	CMD_OK = 0,
	CMD_NOT_FOUND,	  /* no filter of that name */
	CMD_EXISTS,	  /* create: the name is taken */
	CMD_BAD_NAME,	  /* the name breaks the naming rules */
	CMD_BAD_ARGS,	  /* parameters out of range or malformed */
	CMD_RATE_TOO_LOW, /* error rate under BF_MIN_ERROR_RATE */
	CMD_KEY_TOO_LONG, /* a key over max_key_bytes */
	CMD_FULL,	  /* non-scaling filter (or 32 layers) full */
	CMD_NO_MEMORY,	  /* max_memory would be passed, or allocation failed */
	CMD_NOT_COUNTING, /* delete on a plain filter */
	CMD_AMBIGUOUS,	  /* delete: the key tests present in more than one layer */
	CMD_LOG_FAILED,	  /* the write-ahead log cannot write: changes are refused */
	CMD_PAGED_OUT,	  /* the filter is paged out and could not be loaded (see the log) */
	CMD_INTERNAL,	  /* anything else */
};

/* The command-layer operations, counted in cmd_ctx.ops / .keys for /metrics. */
enum cmd_op {
	CMD_OP_CREATE = 0,
	CMD_OP_DROP, /* drop and clear */
	CMD_OP_ADD,
	CMD_OP_CHECK,
	CMD_OP_DELETE,
	CMD_OP_FLUSH,
	CMD_OP_COUNT,
};

/* The protocol a command came in on, where its defaults differ (cmd_ctx.defaults). */
enum cmd_peer {
	CMD_PEER_TEXT = 0, /* bloomd's defaults */
	CMD_PEER_RESP,	   /* RedisBloom's */
	CMD_PEER_HTTP,	   /* the config's default_* */
	CMD_PEER_COUNT,
};

/* The process's figures INFO and CONFIG GET report (cmd_hooks.server_info). */
struct cmd_server_info {
	uint64_t connected_clients;    /* open text/RESP connections */
	uint64_t total_connections;    /* accepted since start (or CONFIG RESETSTAT) */
	uint64_t rejected_connections; /* closed at once: max_connections reached */
	uint64_t maxclients;	       /* max_connections */
	uint64_t ops_per_sec;	       /* commands in the last second */
	double cpu_sys, cpu_user;      /* seconds of CPU the process used */
	uint64_t idle_timeout;	       /* seconds, 0 = none (CONFIG GET timeout) */
	uint32_t snapshot_interval;    /* seconds between checkpoints, 0 = none (save) */
	uint64_t dirty;		       /* persistent filters with changes no checkpoint holds */
	bool wal;		       /* the write-ahead log is on (aof_enabled, appendonly) */
	int wal_fsync;		       /* 0 always, 1 everysec, 2 no (appendfsync) */
	uint64_t wal_bytes;	       /* bytes of the log's segments (aof_current_size) */
};

/* Hooks the server provides; any may be NULL. */
struct cmd_hooks {
	void *arg;
	/* A filter was created / is about to be dropped (remove_file: drop, not clear). A clear
	 * may be refused (a negative errno: the filter stays, an internal error is reported);
	 * a drop may not. */
	void (*created)(void *arg, struct bf_filter *f);
	int (*dropping)(void *arg, struct bf_filter *f, bool remove_file);
	/* flush: make the filter's (or, with f NULL, every dirty filter's) snapshot durable.
	 * Returns 0 when done; -EINPROGRESS while it is written in the background (the command
	 * runs again, with the same *ticket, once the server calls back, as for a load: see
	 * cmd_flush); another negative errno is reported as an internal error. *ticket is the
	 * command's: 0 on its first call, 0 again once it is answered. */
	int (*flush)(void *arg, struct bf_filter *f, uint64_t *ticket);
	/* bgsave: start writing every dirty filter's snapshot in the background and return at
	 * once: 0, or -EBUSY if a snapshot cycle is running already. NULL: flush instead. */
	int (*bgsave)(void *arg);
	/* 64 random bits for a new filter's seed. */
	uint64_t (*seed)(void *arg);
	/*
	 * The write-ahead log; NULL: no log. Append one record (core/bf_record.h payload) and
	 * return its LSN, or 0 if it could not be appended (out of memory). Called for every
	 * change to a persistent filter, after the change is made in memory and before the reply.
	 */
	uint64_t (*log)(void *arg, int type, const void *payload, size_t len);
	/*
	 * A transaction (EXEC) begins (end false) or ends (end true): the records logged in
	 * between are one unit, which a replay applies whole or not at all. The end returns the
	 * LSN the transaction's replies must wait for (0: nothing was logged, or the end could not
	 * be logged). NULL with the log: no unit (a test's log).
	 */
	uint64_t (*txn)(void *arg, bool end);
	/* f was renamed (RENAME) from the name from[0, from_len) (f->name is the new one): the
	 * owner moves its own bookkeeping (the checkpoint's file). */
	void (*renamed)(void *arg, struct bf_filter *f, const char *from, size_t from_len);
	/* f is paged out (bloomd's close): start loading it (at most one load per filter runs).
	 * 0, or a negative errno: it cannot be loaded (the command is answered with an error). */
	int (*page_in)(void *arg, struct bf_filter *f);
	/* bloomd's close: make f's snapshot durable and page it out. 0; -ENOTSUP (memory-only:
	 * it stays in memory); -EINPROGRESS (being written: the command runs again once the
	 * server calls back, as for a load); another negative errno (it stays in memory). */
	int (*page_out)(void *arg, struct bf_filter *f);
	/* ---- client hooks (CLIENT LIST / INFO / KILL) ---- */
	/*
	 * The connections of the text/RESP port, as struct cmd_client (proto/client.h) facts;
	 * self is the asking session's id (its own facts are then live: its running command and
	 * what follows it is its unparsed input). Facts and their strings are valid until the
	 * connection runs a command or closes. client_get comes first: its return type declares
	 * struct cmd_client for the two after it. NULL: the asking session is the only one known.
	 *
	 * client_get: the facts of connection id into *buf: buf, or NULL if there is none.
	 * client_each: fn with the facts of every connection, oldest first.
	 * client_kill: close every connection other than self that match accepts (self is
	 * offered to match too, and left open: closing it is the caller's business); each ends
	 * as a connection ends, what it has not been sent dropped. Returns the number closed.
	 */
	const struct cmd_client *(*client_get)(void *arg, uint64_t self, uint64_t id,
					       struct cmd_client *buf);
	void (*client_each)(void *arg, uint64_t self,
			    void (*fn)(void *fnarg, const struct cmd_client *cl), void *fnarg);
	size_t (*client_kill)(void *arg, uint64_t self,
			      bool (*match)(void *marg, const struct cmd_client *cl), void *marg);
	/* The process's figures for INFO and CONFIG GET into *out (zeroed by the caller). NULL:
	 * they stay zero. */
	void (*server_info)(void *arg, struct cmd_server_info *out);
	/* ---- publish/subscribe and MONITOR (proto/pubsub.h) ---- */
	/*
	 * push: append frame[0, len) (a message, a keyspace event, a MONITOR line) to the
	 * output of session `to`, after the replies it has been given, in its own order; never
	 * closes or unsubscribes anyone while called (a connection over its output limit is
	 * closed later). lsn: the frame tells of a change whose record must be durable before it
	 * is sent (0: none). NULL: nothing is delivered.
	 */
	void (*push)(void *arg, struct cmd_session *to, const char *frame, size_t len,
		     uint64_t lsn);
	/* MONITOR: session s starts (on true) or stops being shown every command; the server
	 * keeps cmd_ctx.monitors. monitor_feed: show the command from session `from` (argv as
	 * run) to every monitor. */
	void (*monitor)(void *arg, struct cmd_session *s, bool on);
	void (*monitor_feed)(void *arg, const struct cmd_session *from, size_t argc,
			     const char *const *argv, const size_t *argvlen);
	/* CONFIG RESETSTAT: the server's own counters (connections received, rejected) to 0. */
	void (*reset_stats)(void *arg);
	/*
	 * CONFIG SET: set the n config keys keys[i] (blossomd's INI names, NUL-terminated) to
	 * vals[i], all or none, and apply them as SIGHUP applies a re-read file. 0; or, with
	 * *bad the index of the pair at fault and nothing changed: -ENOENT (no such key), -EPERM
	 * (a key only a restart changes: bind, port, http_port, data_dir, the log's, the token
	 * file), -EINVAL (a bad value, or a rule across keys broken; err says which).
	 */
	int (*config_set)(void *arg, size_t n, const char *const *keys, const char *const *vals,
			  size_t *bad, char *err, size_t errlen);
	/*
	 * CONFIG REWRITE: write the live keys' values into the config file the daemon was
	 * started with (conf_rewrite, conf/config.h). 0; -EBADF: started without one; another
	 * negative errno: the file could not be written (err says which step; it is unchanged).
	 */
	int (*config_rewrite)(void *arg, char *err, size_t errlen);
	/* SHUTDOWN: stop the daemon as SIGTERM does (changed filters written, the log closed),
	 * once the command's turn of the loop is over; nosave: without writing the changed
	 * filters (the log keeps what it holds). 0, or a negative errno (it keeps running).
	 */
	int (*shutdown)(void *arg, bool nosave);
	/* Replication (server/repl*.c, proto/resp_repl.c); NULL: a primary with no replicas. */
	const struct cmd_repl_ops *repl;
};

/*
 * Replication's hooks (doc/replication.md), all called with cmd_hooks.arg; self is the asking
 * session's id. Offsets are the primary's LSNs.
 *
 * replicaof: follow host:port (host NULL: REPLICAOF NO ONE). 0 (+OK), 1 (already following
 *   it), or a negative errno with the reason in err.
 * replconf: REPLCONF key value from self: 0 (+OK), 1 (no reply: ACK), -EINVAL (err set).
 * psync: self becomes a replica link, sent +FULLRESYNC and what follows by the server: 0 (no
 *   reply here), or a negative errno with err (the reply is that error).
 * wait: WAIT numreplicas timeout_ms on self's behalf: 1 with *acked once answered, 0 while it
 *   waits (the front end holds the command, cmd_ctx.write_wait, and runs it again);
 *   -ENOTSUP on a replica; -ECONNRESET when this process became a replica while it waited.
 * info: INFO's replication fields (after its header); role: ROLE's reply.
 */
struct cmd_repl_ops {
	int (*replicaof)(void *arg, const char *host, long long port, char *err, size_t errlen);
	int (*replconf)(void *arg, uint64_t self, const char *key, const char *val, size_t vlen,
			char *err, size_t errlen);
	int (*psync)(void *arg, uint64_t self, const char *replid, size_t idlen, long long offset,
		     char *err, size_t errlen);
	int (*wait)(void *arg, uint64_t self, long long numreplicas, long long timeout_ms,
		    long long *acked);
	void (*info)(void *arg, struct proto_buf *b);
	void (*role)(void *arg, struct proto_buf *out, int resp);
};

/* Shared state of the command layer: the registry, the defaults and limits from the config. */
struct cmd_ctx {
	struct bf_registry *reg;
	/* Parameters of a filter created without them, per protocol (enum cmd_peer). */
	struct cmd_defaults {
		uint64_t capacity;
		double error_rate;
	} defaults[CMD_PEER_COUNT];
	uint32_t default_expansion; /* 2 */
	size_t max_key_bytes;
	size_t max_args;
	/* A MULTI's queue: at most this many commands, and this many bytes of arguments (0: no
	 * bound; the config's multi_max_commands, multi_max_bytes). */
	size_t multi_max_commands, multi_max_bytes;
	/* WATCHed names of every session (proto/multi.c); NULL: none, and a change costs nothing
	 * more. */
	struct cmd_watch *watches;
	/* An EXEC runs its queue: a BGSAVE in it starts the snapshot cycle only once the
	 * transaction has ended (bgsave_after), so that no checkpoint is cut inside it. */
	bool in_exec, bgsave_after;
	struct cmd_hooks hooks;
	/* Publish/subscribe: the channels and patterns (NULL until the first subscription);
	 * notify-keyspace-events' classes (enum pubsub_notify; 0: none are sent); sessions in
	 * MONITOR mode (0: no command is formatted for them). */
	struct pubsub *pubsub;
	int notify;
	size_t monitors;
	/* Longest channel or pattern SUBSCRIBE, PSUBSCRIBE and PUBLISH take (0: any; the
	 * config's max_channel_bytes). */
	size_t max_channel_bytes;
	/* Server-wide counters the front ends update. */
	uint64_t commands, errors;
	/* Of commands, those each protocol sent (enum cmd_peer: text, RESP, HTTP). */
	uint64_t peer_commands[CMD_PEER_COUNT];
	uint64_t expired; /* filters dropped because their time came (INFO's expired_keys) */
	/* Keys checked (cmd_check) found maybe present / absent (INFO's keyspace_hits/misses). */
	uint64_t check_hits, check_misses;
	/* The counters above at the last CONFIG RESETSTAT: INFO shows what came since (the
	 * counters themselves never go back: /metrics exports them). */
	struct cmd_stat_base {
		uint64_t commands, errors, expired, check_hits, check_misses;
	} stat_base;
	/* Calls of each cmd_* operation below, and the keys they were given (add, check,
	 * delete), whichever front end made them. */
	uint64_t ops[CMD_OP_COUNT], keys[CMD_OP_COUNT];
	uint64_t started_unix; /* for uptime in INFO */
	uint64_t last_save_unix;
	/* A snapshot cycle is running; the last one that ended had a failure (INFO). */
	bool save_in_progress, last_save_failed;
	const char *version;
	/* Shared secret text and RESP clients must AUTH with (and HTTP's Bearer token): token_len
	 * bytes, NUL-terminated; NULL = no authentication. Owned by the server. */
	const char *token;
	size_t token_len;
	/*
	 * The log's state, kept current by the server: the newest LSN durable, and whether the log
	 * cannot write (every change to a persistent filter is then refused, CMD_LOG_FAILED).
	 */
	uint64_t durable_lsn;
	bool log_failed;
	/* A replica (REPLICAOF): clients' changes are refused (RESP's -READONLY). */
	bool replica;
	/* The newest LSN appended to the log (0: none): a checkpoint cut now holds every change
	 * up to it, so a replay of what it holds starts after it. */
	uint64_t logged_lsn;
	/*
	 * The replies built since the front end last set this to 0 must not be sent before
	 * durable_lsn reaches it: the LSN of each change they acknowledge, and of the last change
	 * to a filter a "present" answer may owe to a change not yet durable.
	 */
	uint64_t wait_lsn;
	/*
	 * Set by cmd_ready: the command was not run, since its filter is paged out and loading;
	 * the front end holds the command and runs it again once the filter is in memory (the
	 * server calls back). Reset by the front end.
	 */
	struct bf_filter *paging;
	/*
	 * Set by cmd_flush: the command was not answered, since what it flushes is being
	 * written in the background; as with paging, the front end holds the command and runs
	 * it again (with the same flush ticket) once the server calls back. Reset by the front
	 * end.
	 */
	bool write_wait;
	/*
	 * Set by a command that has replied only in part (a listing of more than CMD_LIST_STEP
	 * filters): the front end keeps it unread and runs it again, with the same arguments, in
	 * a later turn of its loop, and it goes on from where it stopped (cmd_session.listing).
	 * Reset by the front end.
	 */
	bool again;
	/* The server's coarse clock, seconds: what a filter's used_s is set from. */
	uint32_t now_s;
	/* Scratch for a record's payload, grown as needed. */
	unsigned char *rec;
	size_t rec_cap;
};

/* Filters a listing (text list, KEYS) looks at per call, and bytes of KEYS' collected reply
 * sent per call: at a million filters a listing runs in about a thousand calls of a fraction
 * of a millisecond each, with the loop serving others in between. */
#define CMD_LIST_STEP  1024
#define CMD_LIST_BYTES (256 * 1024)

/* A listing that spans calls (cmd_ctx.again): where it stopped, and for KEYS, the names found
 * so far (the reply's length comes first, so they are sent once all are found). */
struct cmd_listing {
	char after[BF_NAME_MAX]; /* the last name looked at */
	size_t alen;
	size_t count;		/* KEYS: names in `names` */
	struct proto_buf names; /* KEYS: their bulk strings */
	size_t sent;		/* KEYS: bytes of `names` sent; SIZE_MAX while finding them */
};

/*
 * A multi-key command (BF.MADD, BF.MEXISTS, BF.INSERT, text multi and bulk) runs over several
 * calls (cmd_ctx.again) so that none holds the loop much more than a few ms, whatever its
 * size: its keys CMD_KEY_STEP at a time (each step one log record), then its replies
 * CMD_REPLY_STEP at a time. The replies wait for the newest record any of them owes itself
 * to, so none is sent before every key it answers for is logged. A million-key BF.MADD takes
 * 62 calls of about 4 ms.
 */
#define CMD_KEY_STEP   16384
#define CMD_REPLY_STEP 65536

/* Where a multi-key command that spans calls stands (cmd_session.slice). */
struct cmd_slice {
	bool active;   /* a command is under way: it is run again with the same arguments */
	bool answered; /* every key is answered, or one stopped it: replies are being written */
	uint64_t id;   /* its filter's id (0: none): another one under the name ends it */
	size_t done;   /* keys answered (results in cmd_session.results) */
	size_t sent;   /* replies written */
	enum cmd_status st; /* CMD_OK, or why it stopped at key `done` */
	uint64_t wait_lsn;  /* the newest LSN an answer owes itself to */
};

/* Failed AUTH attempts after which a connection is closed. */
#define CMD_AUTH_MAX_FAILURES 3

/* Per connection state. */
struct cmd_session {
	int resp;		/* RESP protocol version, 2 or 3 */
	bool close_after;	/* QUIT: close once the replies are written */
	uint64_t id;		/* client id (CLIENT ID, HELLO) */
	char name[64];		/* CLIENT SETNAME */
	bool authed;		/* AUTH succeeded (only matters when cmd_ctx.token is set) */
	unsigned auth_failures; /* failed AUTH attempts; CMD_AUTH_MAX_FAILURES closes */
	/* Scratch arrays reused by multi-key commands, grown as needed: no allocation per
	 * command once a connection has seen its largest one. */
	const void **keys;
	size_t *lens;
	int *results;
	size_t scratch_cap;
	/* The lower-case name of the last RESP command run, with its subcommand where known
	 * ("client|list"); NULL before the first, or after an unknown one (CLIENT LIST's cmd=). */
	const char *last_cmd;
	struct cmd_listing *listing; /* a listing under way, or NULL */
	struct cmd_slice slice;	     /* a multi-key command under way */
	uint64_t flush_ticket;	     /* a flush or SAVE waiting for its write (cmd_flush) */
	struct cmd_multi *multi;     /* MULTI's queue and WATCHed names (proto/multi.c), or NULL */
	/* Its channels and patterns (proto/pubsub.c), or NULL; MONITOR was sent (every command
	 * run is shown to it, cmd_hooks.monitor). */
	struct pubsub_session *pubsub;
	bool monitor;
};

void cmd_session_init(struct cmd_session *s, uint64_t id);
/* Free what the session holds (also its transaction and its WATCHes). */
void cmd_session_free(struct cmd_session *s);
/* Free its scratch arrays only (they are grown again as needed). */
void cmd_session_trim(struct cmd_session *s);
/* End the listing under way, if any. */
void cmd_session_end_listing(struct cmd_session *s);

/* Make room for n keys in the session's scratch arrays. 0 or -ENOMEM. */
int cmd_session_reserve(struct cmd_session *s, size_t n);

/* Whether s may run commands other than AUTH, PING and QUIT. */
static inline bool cmd_session_authed(const struct cmd_ctx *c, const struct cmd_session *s)
{
	return !c->token || s->authed;
}

/*
 * Check a presented token against c->token in constant time (every byte of the longer of the
 * two is compared, whatever matches). Success marks s authenticated; failure counts, and the
 * CMD_AUTH_MAX_FAILURES-th sets s->close_after. With no token configured: false.
 */
bool cmd_auth_check(const struct cmd_ctx *c, struct cmd_session *s, const void *p, size_t n);

/*
 * Compare a presented secret with the token in time that depends only on the longer of the two
 * lengths, never on where they differ. True if they are equal.
 */
bool cmd_token_equal(const void *token, size_t token_len, const void *p, size_t n);

/*
 * Parameter rules, once for every front end (each parses its own syntax, calls these in the
 * order its peer checks, and words the status): capacity >= 1; 0 < error rate < 1 (CMD_BAD_ARGS)
 * and not below BF_MIN_ERROR_RATE (CMD_RATE_TOO_LOW); expansion 0 (non-scaling) to
 * BF_MAX_EXPANSION. A front end with a tighter limit of its peer's (RESP's capacity) adds it.
 */
enum cmd_status cmd_check_capacity(uint64_t capacity);
enum cmd_status cmd_check_error_rate(double error_rate);
enum cmd_status cmd_check_expansion(uint64_t expansion);

/* True if every one of n keys fits max_key_bytes. */
bool cmd_keys_fit(const struct cmd_ctx *c, size_t n, const size_t *lens);

/* Map a negative errno from core to a status. */
enum cmd_status cmd_status_from_errno(int rc);

/*
 * Create a filter (params already validated by the caller's parser, defaults applied).
 * CMD_OK, CMD_EXISTS, CMD_BAD_NAME, CMD_BAD_ARGS, CMD_RATE_TOO_LOW, CMD_NO_MEMORY. Calls
 * hooks.created.
 */
enum cmd_status cmd_create(struct cmd_ctx *c, const char *name, size_t len,
			   const struct bf_params *p, struct bf_filter **out);

/* Parameters of a filter created with no parameters over protocol peer (defaults from the
 * config). */
struct bf_params cmd_default_params(const struct cmd_ctx *c, enum cmd_peer peer);

/*
 * Expiry (Redis's EXPIRE family). A filter whose time has come is gone: every lookup through
 * cmd_lookup drops it first (files removed, as by drop), and the server drops the others when
 * they are due (cmd_expire_due). The time a filter expires at is logged (an EXPIRE record) and
 * kept in its checkpoint; when it expires, a DROP is logged, as Redis logs a DEL. Listings
 * (KEYS, SCAN, list, GET /v1/filters) leave out a filter whose time has come (cmd_expired).
 */

/*
 * Whether a command may run now on the filter named name[0, len): CMD_OK if there is none, or
 * it is in memory; CMD_PAGED_OUT if it is paged out and cannot be loaded (the front end answers
 * that error and does not run the command); CMD_OK with c->paging set if it is paged out and
 * loading (the front end runs the command again later). Every command that reads or changes a
 * filter's keys or layers asks.
 */
enum cmd_status cmd_ready(struct cmd_ctx *c, const char *name, size_t len);

/* The time now, Unix ms (CLOCK_REALTIME). */
uint64_t cmd_now_ms(void);

/* Whether f's time has come by now_ms (it is dropped at its next lookup, or by the timer). */
static inline bool cmd_expired(const struct bf_filter *f, uint64_t now_ms)
{
	return bf_filter_expire_ms(f) && bf_filter_expire_ms(f) <= now_ms;
}

/* The filter named name[0, len), or NULL (none, or expired: then it is dropped now). */
struct bf_filter *cmd_lookup(struct cmd_ctx *c, const char *name, size_t len);

/*
 * Drop the filters due by now_ms, at most max of them (0: all). Returns the time the next one
 * is due (0: none expires), for the server's timer.
 */
uint64_t cmd_expire_due(struct cmd_ctx *c, uint64_t now_ms, size_t max);

/*
 * f expires at expire_ms (Unix ms; 0: never, PERSIST). A time not after now drops f at once
 * (logged as a drop), as Redis deletes a key given a time in the past. CMD_OK, CMD_LOG_FAILED,
 * CMD_NO_MEMORY (a first expiry takes a little memory), CMD_INTERNAL; nothing changes on
 * error.
 */
enum cmd_status cmd_set_expire(struct cmd_ctx *c, struct bf_filter *f, uint64_t expire_ms);

/* Drop (remove_file true) or clear (false) a filter. CMD_OK or CMD_NOT_FOUND. */
enum cmd_status cmd_drop(struct cmd_ctx *c, const char *name, size_t len, bool remove_file);

/*
 * Drop every filter (Redis's FLUSHALL): one FLUSHALL record in the log first (if a persistent
 * filter exists), so a crash never leaves half of it; files removed as by drop. *dropped (may
 * be NULL) counts them. CMD_OK, CMD_LOG_FAILED (nothing changed), CMD_INTERNAL (no memory).
 */
enum cmd_status cmd_flushall(struct cmd_ctx *c, uint64_t *dropped);

/*
 * Redis's RENAME (nx false) and RENAMENX (nx true) of filter from[0, flen) to to[0, tlen).
 * A filter already named to is replaced (dropped, its files removed) in the same logged
 * change, so a check never finds to missing or empty; nx refuses instead. The filter keeps
 * everything else (keys, parameters, expiry). CMD_OK (also from == to, without nx),
 * CMD_NOT_FOUND (no filter from), CMD_EXISTS (nx, and to is taken or is from), CMD_BAD_NAME,
 * CMD_LOG_FAILED, CMD_INTERNAL; nothing changes on error.
 */
enum cmd_status cmd_rename(struct cmd_ctx *c, const char *from, size_t flen, const char *to,
			   size_t tlen, bool nx);

/*
 * Add n keys to f (keys/lens arrays; out[i] = 1 new, 0 present). Stops at the first key that
 * cannot be added and returns its status (CMD_FULL, CMD_NO_MEMORY, CMD_KEY_TOO_LONG) with *done
 * = the number of keys answered before it; CMD_OK with *done = n otherwise. Keys are checked
 * against max_key_bytes before anything is added.
 */
enum cmd_status cmd_add(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			const size_t *lens, int *out, size_t *done);

/* Check n keys (out[i] = 0/1). CMD_OK or CMD_KEY_TOO_LONG (nothing checked). */
enum cmd_status cmd_check(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			  const size_t *lens, int *out);

/*
 * Delete n keys from a counting filter (out[i] = 1 removed, 0 absent). CMD_NOT_COUNTING and
 * CMD_KEY_TOO_LONG change nothing. Stops at the first key that tests present in more than one
 * layer (see bf_filter_delete) and returns CMD_AMBIGUOUS with *done = the keys answered before
 * it (those are deleted; it and the keys after it are not); CMD_OK with *done = n otherwise.
 */
enum cmd_status cmd_delete(struct cmd_ctx *c, struct bf_filter *f, size_t n,
			   const void *const *keys, const size_t *lens, int *out, size_t *done);

/* The three key operations, for a front end that chooses one at run time. */
enum cmd_key_op { CMD_KEYS_ADD, CMD_KEYS_CHECK, CMD_KEYS_DELETE };

/*
 * Run op over the session's n keys (s->keys, s->lens) with the answers in s->results: returns
 * and *done as cmd_add, cmd_check (*done = n, or 0 with an error) or cmd_delete.
 */
enum cmd_status cmd_run_keys(struct cmd_ctx *c, struct cmd_session *s, struct bf_filter *f,
			     enum cmd_key_op op, size_t n, size_t *done);

/*
 * One call's share of a multi-key command (struct cmd_slice): op over the keys from
 * s->slice.done on, at most CMD_KEY_STEP of them (keys[i], lens[i] for i < n; only those of
 * this share are read), answers in s->results. f is the command's filter, or NULL when it has
 * none (a check answers "absent" to the rest; an add stops with CMD_NOT_FOUND), also when the
 * filter under its name is no longer the one it started on. Returns true once every key is
 * answered or one stopped it (s->slice.st at key s->slice.done): the replies are written next
 * (cmd_slice_replies); false with c->again set while keys remain. The first call needs
 * cmd_session_reserve(s, n).
 */
bool cmd_slice_keys(struct cmd_ctx *c, struct cmd_session *s, struct bf_filter *f,
		    enum cmd_key_op op, size_t n, const void *const *keys, const size_t *lens);

/*
 * The part of the replies this call writes, [*from, *to) of s->slice.done (the front end
 * writes the reply's head too when *from is 0), made to wait for the log (c->wait_lsn).
 * Returns 1 if it is the last part: the front end writes s->slice.st's error after it if that
 * is not CMD_OK, then calls cmd_slice_end; 0 if more follow (c->again set); -1 if the log
 * cannot write what the answers owe themselves to: the first part is then the log-failure
 * error in place of the whole reply, and a later part writes nothing (the parts before were
 * held for the log in one place, and become that one error); then cmd_slice_end.
 */
int cmd_slice_replies(struct cmd_ctx *c, struct cmd_session *s, size_t *from, size_t *to);

/* The multi-key command is over (or abandoned): the next one starts afresh. */
void cmd_slice_end(struct cmd_session *s);

/*
 * BF.LOADCHUNK's two halves, logged like any change. cmd_load_header: a new filter named name
 * from a dump's header chunk (core/bf_snapshot.h), within max_memory: CMD_OK, CMD_BAD_NAME,
 * CMD_BAD_ARGS (the header is refused by the snapshot reader's rules), CMD_NO_MEMORY,
 * CMD_EXISTS, CMD_LOG_FAILED, CMD_INTERNAL. cmd_load_body: len bytes at offset off of f's body:
 * 0, -ERANGE (off is past the body), -EMSGSIZE (the bytes run past off's layer), -EROFS (the
 * log cannot write) or -ENOMEM (the record could not be appended); nothing changes on error.
 */
enum cmd_status cmd_load_header(struct cmd_ctx *c, const char *name, size_t len,
				const unsigned char *h, size_t hlen);
int cmd_load_body(struct cmd_ctx *c, struct bf_filter *f, uint64_t off, const void *data,
		  size_t len);

/*
 * Transactions (Redis's MULTI / EXEC / WATCH; proto/multi.c). A session's transaction queues
 * commands (copies of their arguments) until EXEC runs them as one unit; WATCH names filters
 * whose change since makes EXEC refuse to run.
 *
 * cmd_multi_begin: start queueing (0, -EEXIST if already, -ENOMEM). cmd_multi_active: whether
 * s queues. cmd_multi_queue: queue a copy of av: 0; -E2BIG past multi_max_commands,
 * -EMSGSIZE past multi_max_bytes, -ENOMEM (nothing queued). cmd_multi_flag: a command was
 * refused at queue time: EXEC will abort. cmd_multi_flagged: whether one was. cmd_multi_count
 * and cmd_multi_get: the queued commands (av's arrays are the queue's; valid until it ends).
 * cmd_multi_discard: end the transaction and every WATCH of s.
 */
struct proto_argv;
int cmd_multi_begin(struct cmd_ctx *c, struct cmd_session *s);
bool cmd_multi_active(const struct cmd_session *s);
int cmd_multi_queue(struct cmd_ctx *c, struct cmd_session *s, size_t argc, const char *const *argv,
		    const size_t *argvlen);
void cmd_multi_flag(struct cmd_session *s);
bool cmd_multi_flagged(const struct cmd_session *s);
size_t cmd_multi_count(const struct cmd_session *s);
void cmd_multi_get(const struct cmd_session *s, size_t i, size_t *argc, const char *const **argv,
		   const size_t **argvlen);
void cmd_multi_discard(struct cmd_session *s);
/* EXEC runs the queue: commands run from now on instead of being queued (the queue stays until
 * cmd_multi_discard). */
void cmd_multi_running(struct cmd_session *s);
/* Free s's transaction state (cmd_session_free calls it). */
void cmd_multi_free(struct cmd_session *s);
/* CLIENT LIST's transaction fields of s into cl (multi, watch, dirty, multi_mem). */
struct cmd_client;
void cmd_multi_client(const struct cmd_session *s, struct cmd_client *cl);

/*
 * WATCH name[0, len) for s: 0 or -ENOMEM. cmd_watch_changed: whether a WATCHed filter of s
 * changed (or its time came) since it was WATCHed. cmd_unwatch: forget every WATCH of s.
 * cmd_watch_touch: the filter named name[0, len) changed (any write command on it, its drop,
 * expiry, rename from or to it): every session WATCHing it is marked. The command layer calls
 * it on every change; cheap when nothing is WATCHed.
 */
int cmd_watch(struct cmd_ctx *c, struct cmd_session *s, const char *name, size_t len);
bool cmd_watch_changed(struct cmd_ctx *c, const struct cmd_session *s);
void cmd_unwatch(struct cmd_session *s);
void cmd_watch_touch_slow(struct cmd_ctx *c, const char *name, size_t len);
static inline void cmd_watch_touch(struct cmd_ctx *c, const char *name, size_t len)
{
	if (c->watches)
		cmd_watch_touch_slow(c, name, len);
}

/*
 * Keyspace notifications (Redis's notifyKeyspaceEvent): the event `event` of class `cls`
 * (enum pubsub_notify) on the filter named name[0, len), published on __keyspace@0__:<name>
 * and __keyevent@0__:<event> as notify-keyspace-events (c->notify) asks. Every change the
 * command layer makes calls it, whichever protocol asked for the change; it costs a test when
 * notifications are off.
 */
void cmd_notify_slow(struct cmd_ctx *c, int cls, const char *event, const char *name, size_t len);
static inline void cmd_notify(struct cmd_ctx *c, int cls, const char *event, const char *name,
			      size_t len)
{
	if ((c->notify & cls) && c->pubsub)
		cmd_notify_slow(c, cls, event, name, len);
}

/* PUBLISH ch msg through c->hooks.push: the number of deliveries. */
size_t cmd_publish(struct cmd_ctx *c, const char *ch, size_t clen, const char *msg, size_t mlen);

/* Free what the command layer allocated in c (the record scratch, the pub/sub registry). */
void cmd_ctx_free(struct cmd_ctx *c);

/*
 * flush one filter (f) or all (NULL) through the server hook. CMD_OK or CMD_INTERNAL; CMD_OK
 * with c->write_wait set: not answered yet, the write runs in the background (the front end
 * runs the command again, with the same *ticket, after the server's callback). *ticket is the
 * command's own (cmd_session.flush_ticket, or the HTTP request's): 0 when it first runs.
 */
enum cmd_status cmd_flush(struct cmd_ctx *c, struct bf_filter *f, uint64_t *ticket);

#endif
