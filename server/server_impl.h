/* SPDX-License-Identifier: MIT */
/*
 * Private to the daemon's two halves: server.c (its life cycle: configuration, token, reload,
 * listeners, signals, timers, start-up and teardown) and conn.c (the text/RESP connections:
 * accept, buffers, parsing, replies, timeouts). Nothing else includes it.
 */
#ifndef BLOSSOMD_SERVER_SERVER_IMPL_H
#define BLOSSOMD_SERVER_SERVER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <uv.h>

#include "conf/config.h"
#include "proto/buf.h"
#include "proto/command.h"
#include "proto/resp.h"
#include "proto/text.h"
#include "server/notify.h"
#include "server/prefault.h"
#include "server/server.h"

struct http_server;
struct srv_snap;

/* One read into the loop's shared buffer. */
#define SRV_READ_SIZE (64 * 1024)
/* Least free space offered to a read into a connection's own buffer. */
#define SRV_READ_MIN (16 * 1024)
/* Most bytes one read into a connection's own buffer takes: a huge command comes in a few
 * ms of parsing at a time, and stops being read for the turn once its slice is over. */
#define SRV_READ_PART (256 * 1024)
/* Buffers up to this size are kept for reuse once empty; bigger ones are released. */
#define SRV_KEEP_BYTES (64 * 1024)
/* Argument arrays and per-command scratch are kept for this many entries after a batch (about
 * 44 KiB); a larger command's are given back once it is done, as Redis trims a client's argv
 * to 1024 entries. */
#define SRV_KEEP_ARGS 1024
/* SRV_MMAP_THRESHOLD: server/prefault.h. */
/* Longest text line read from a client that has not authenticated (when max_line_bytes is
 * larger): `auth TOKEN` needs at most 4101 bytes. Redis's cap on an unauthenticated bulk. */
#define SRV_UNAUTH_LINE PROTO_RESP_UNAUTH_MAX_BULK
/* A RESP command may take max(max_bulk_bytes, this) + 2 * PROTO_RESP_MAX_HEADER bytes. */
#define SRV_RESP_FLOOR (16 * 1024 * 1024)
/* How long a gracefully closed connection may keep sending before it is cut off. */
#define SRV_LINGER_MS 2000
#define SRV_SWEEP_MS  1000
/* Expired filters are dropped this often (lookups drop one at once), at most
 * SRV_EXPIRE_BATCH a time: Redis's active expiry runs 10 times a second too. */
/* Filters looked at per second for cold_interval (a million are gone round in a minute). */
#define SRV_COLD_BATCH	 16384
#define SRV_EXPIRE_MS	 100
#define SRV_EXPIRE_BATCH 10000
#define SRV_BACKLOG	 1024
/* Descriptors kept for listeners, stdio, snapshots and the HTTP server. */
#define SRV_FD_RESERVE 64
/* Shortest interval between two "too many connections" or accept warnings. */
#define SRV_WARN_MS 1000
/* A connection whose replies wait for the log is not read once it holds SRV_HOLD_BYTES of
 * replies, or SRV_HOLD_MARKS runs of held replies (struct srv_conn_mark). */
#define SRV_HOLD_MARKS 1024
#define SRV_HOLD_BYTES (256 * 1024)
/* Marks a connection keeps room for once no reply is held any more. */
#define SRV_KEEP_MARKS 8
/* CLIENT LIST's rbp is the most replies a connection held at once in a period this long
 * (Redis's buf_peak, reset every 5 s). */
#define SRV_PEAK_MS 5000

/* A connection's commands run for at most this long in one turn of the loop; the rest of its
 * input waits for the next turn, and every other connection is served in between (a client's
 * pipeline of thousands of creates held up the others for milliseconds: libuv reads a stream
 * up to 32 times per turn). */
#define SRV_SLICE_NS (500 * 1000)
/* A RESP command of more arguments than this has their pointers set in parts of this many a
 * turn (proto_limits.point_max): a million of them took 13-20 ms in one turn. */
#define SRV_POINT_STEP 65536

/* Bytes of a first word looked at to tell a RESP inline command from the text protocol. */
#define SRV_DETECT_MAX 64

enum conn_proto {
	CONN_UNKNOWN = 0, /* no byte read yet, or the first word is not complete */
	CONN_TEXT,
	CONN_RESP,
};

enum conn_state {
	CONN_OPEN = 0, /* reading and serving */
	CONN_DRAIN,    /* last replies being written; then shutdown (or close after EOF) */
	CONN_LINGER,   /* our side shut down; input discarded until EOF or SRV_LINGER_MS */
	CONN_CLOSING,  /* uv_close() called */
};

/* A run of held replies (struct srv_conn's marks). */
struct srv_conn_mark {
	size_t start, end; /* its bytes in the connection's out */
	uint64_t lsn;	   /* they wait for this LSN to be durable */
	size_t replies;	   /* how many replies (commands) they are */
};

struct srv_conn {
	uv_tcp_t tcp; /* tcp.data points back here */
	struct srv *srv;
	LIST_ENTRY(srv_conn) link; /* in srv->conns from accept until conn_close() */
	/*
	 * Replies held for the log, oldest first: out[marks[i].start, marks[i].end) are
	 * marks[i].replies whole replies, each of a command that acknowledges a change (or owes
	 * a "present" to one) whose record is not durable yet; they go once marks[i].lsn is
	 * durable, and every reply after them waits behind them (out[0, marks[0].start) may go
	 * now). If the log fails first, each of those replies becomes the protocol's log-failure
	 * error, in place (conn_fail_held()). The connection is read meanwhile (see
	 * SRV_HOLD_BYTES), and is in srv->waiting while nmarks > 0.
	 */
	struct srv_conn_mark *marks;
	size_t nmarks, marks_cap;
	bool waiting;
	LIST_ENTRY(srv_conn) wait_link;
	/* Its next command waits for a paged-out filter to load (cmd_ready): it stays unparsed
	 * in `in`, reading stops, and conn_resume_paused() runs it again; in srv->paused. */
	bool paused;
	/* Its slice of the loop's turn ran out (SRV_SLICE_NS) with commands left in `in`:
	 * paused too, but in srv->yielded, run on by the next turn's idle callback. */
	bool yielded;
	uint64_t slice_turn, slice_t0; /* the loop's turn of its slice, and when it began */
	LIST_ENTRY(srv_conn) pause_link;
	bool listed;	  /* accepted under max_connections: counted, listed, session set up */
	bool reading;	  /* uv_read_start() in effect */
	bool writing;	  /* wreq in flight */
	bool repl_link;	  /* a replica's link (repl_primary.c): never idle, its own output limit */
	bool eof;	  /* the client shut down its sending side */
	bool text_skip;	  /* discarding the rest of an over-long line */
	bool mem_refused; /* its input could not grow within max_client_memory */
	bool ended;	  /* conn_finish() called: our side is done; not shown by CLIENT LIST nor
			   * counted by CLIENT KILL (Redis has freed such a client) */
	enum conn_proto proto;
	enum conn_state state;
	uint64_t id;

	/* Unparsed input: the partial command at the front of the stream. NULL while empty
	 * (reads then go to the loop's shared buffer). */
	char *in;
	size_t in_len, in_cap;
	struct proto_resp_state rst;
	struct proto_argv av;
	struct cmd_session sess;

	/* Replies not yet sent. A pending write covers out[0, wlen); nothing is appended
	 * meanwhile (the connection is not read while writing). */
	struct proto_buf out;
	size_t wlen;
	size_t batch_start; /* out.len before the batch being run (conn_out_over()) */
	uv_write_t wreq;
	uv_shutdown_t sreq;
	/* Bytes of the buffers above (input, arguments, session scratch, replies) as last
	 * counted in srv->client_mem (conn_account()). */
	size_t held;

	/* Times in loop milliseconds (uv_now()). */
	uint64_t last_active;	 /* last read, or last progress of a write */
	uint64_t partial_since;	 /* start of the partial command held, 0 if none; restarted
				  * when reading resumes after a write */
	uint64_t write_progress; /* last time the pending write moved */
	size_t write_left;	 /* bytes libuv still held for the pending write then */
	uint64_t write_acked;	 /* bytes the client had acknowledged then (TCP_INFO) */
	uint64_t linger_since;

	char peer[64]; /* "127.0.0.1:40000", "[::1]:40000" */

	/* For CLIENT LIST / INFO (conn_client_get()): when it was accepted (loop ms); while one
	 * of its RESP commands runs, the input from that command on (Redis's qbuf), else 0; the
	 * most replies it held at once since out_peak_at (a new period every SRV_PEAK_MS); our
	 * end of the socket, "" until first asked. */
	uint64_t created;
	size_t qbuf_run;
	/* A command replied in part (cmd_ctx.again) and run on in a later turn: the bytes of the
	 * RESP command (0: none, or parse it again), whose arguments are found again from their
	 * offsets rather than by parsing it again; `part` while the next run is not its first. */
	size_t again_len;
	const char *again_base; /* the input av's pointers point into (the command's first
				 * byte): they are set again only if it moved */
	size_t pointed;		/* av's arguments pointed into again_base so far */
	bool part;
	size_t out_peak;
	uint64_t out_peak_at;
	char local[64];

	/* Pushes (pub/sub messages, keyspace events, MONITOR lines) given while its replies
	 * could not take them (a write in flight, a reply sent in parts, or another connection's
	 * command running): appended to out by conn_flush() once they can, held until push_lsn
	 * is durable. In srv->pushed while push_queued; push_over: its unsent output passed
	 * max_output_bytes (or the buffers max_client_memory): it is closed. In srv->monitors
	 * while sess.monitor. */
	struct proto_buf push;
	uint64_t push_lsn;
	bool push_queued, push_over;
	LIST_ENTRY(srv_conn) push_link;
	LIST_ENTRY(srv_conn) mon_link;
};

struct srv {
	uv_loop_t loop;
	struct config cfg;
	const char *config_path;
	const struct srv_override *ov;
	size_t nov;

	struct bf_registry *reg;
	struct cmd_ctx ctx;
	struct proto_limits lim;
	struct proto_limits lim_unauth; /* lim for a RESP client that has yet to AUTH */
	struct srv_snap *snap;		/* persistence: snapshot.c */
	/* HTTP front end: http.c; NULL when http_port is 0. */
	struct http_server *http;

	uv_tcp_t *listeners;
	size_t nlisteners;
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t sweep;
	uv_timer_t shutdown; /* SHUTDOWN's stop, in a turn of its own; armed once */
	bool shutdown_armed;
	bool shutdown_nosave;	  /* SHUTDOWN NOSAVE: no final checkpoint */
	uv_timer_t expire;	  /* drops the filters whose time came (SRV_EXPIRE_MS) */
	struct srv_notify notify; /* sd_notify watchdog timer */
	bool handles_ready;	  /* signals and timer initialised */

	LIST_HEAD(, srv_conn) conns;
	LIST_HEAD(, srv_conn) waiting;	/* connections whose replies wait for the log */
	LIST_HEAD(, srv_conn) paused;	/* connections whose next command waits for a load */
	LIST_HEAD(, srv_conn) yielded;	/* connections whose slice ran out (srv_conn.yielded) */
	uv_idle_t yield_idle;		/* runs them on; active while the list is not empty */
	LIST_HEAD(, srv_conn) pushed;	/* connections given pushes to send (srv_conn.push) */
	LIST_HEAD(, srv_conn) monitors; /* connections in MONITOR mode */
	uv_idle_t push_idle;		/* sends the pushes; active while pushed is not empty */
	struct srv_conn *running;	/* the connection whose command runs, or NULL */
	uv_check_t turn_check;		/* counts the loop's turns (turn) */
	struct srv_prefault *prefault;	/* from the load on; NULL if it cannot run here */
	uint64_t turn;
	uint64_t yields; /* slices that ran out (/metrics) */
	size_t nconns;
	uint64_t next_id;

	/* Accepting when no connection can be allocated: accept into this and close it. */
	uv_tcp_t reject;
	bool reject_busy;
	uv_stream_t *accept_stalled; /* a listener waiting for reject to close */

	uint64_t warned_full_at, warned_accept_at;
	bool warned_full, warned_accept;
	bool stopping;
	uint64_t conns_rejected, bytes_in, bytes_out; /* text/RESP port, for /metrics */
	/* INFO: next_id and conns_rejected at the last CONFIG RESETSTAT (/metrics' counters
	 * never go back); the commands counted at the last sweep, and their rate since. */
	uint64_t info_conns_base, info_rejected_base;
	uint64_t ops_sample_ms, ops_sample_commands, ops_per_sec;
	uint64_t client_mem; /* sum of every connection's held, against max_client_memory */

	/* The write-ahead log (journal.c); NULL with wal = off. */
	struct wal *wal;
	uv_check_t wal_check;	  /* writes the loop iteration's records */
	uv_prepare_t wal_prepare; /* and those of idle and timer callbacks, before the loop
				   * sleeps in poll */
	bool wal_check_init;
	bool wal_truncate_corrupt; /* --wal-truncate-corrupt: cut a corrupt log at the bad record */
	bool accept_missing_files; /* --accept-missing-files: start without missing segments */
	uint64_t wal_release_ms;   /* last look for segments to delete */
	uint64_t wal_replay_records, wal_replay_ns; /* the replay at start, for /metrics */
	/* An EXEC is under way (cmd_hooks.txn): records are logged as its parts. */
	bool txn_open;
	uint64_t txn_parts;	/* parts logged since it began */
	unsigned char *txn_rec; /* a part's payload, grown as needed */
	size_t txn_rec_cap;

	/* Replication (repl_primary.c, repl_replica.c); NULL with the log off. */
	struct repl *repl;
	struct journal_replay *follow; /* a replica's replay of what its primary sends */

	char *rbuf;  /* shared read buffer, SRV_READ_SIZE bytes */
	char *token; /* from auth_token_file, NUL-terminated; NULL: no auth (ctx.token) */
};

/* conn.c, for server.c: the listeners' connection callback; close one connection (safe to call
 * twice); the once-a-second timeouts of every connection; an address as "host:port". */
void conn_format_addr(const struct sockaddr *sa, char *out, size_t len);
void conn_close(struct srv_conn *c);
void conn_on_accept(uv_stream_t *server, int status);
void conn_sweep(struct srv *s);

/* conn_detect.c: the blank lines ("\r\n", "\n") at the front of data[0, len), bytes to skip;
 * the protocol the first bytes speak (CONN_UNKNOWN while they cannot tell yet). */
size_t conn_blank_prefix(const char *data, size_t len);
enum conn_proto conn_detect(const char *data, size_t len);

/* conn.c: send the replies that waited for LSNs now durable (ctx.durable_lsn). */
void conn_release_waiting(struct srv *s);
/* A page-in ended: the connections it held run their next command again. */
void conn_resume_paused(struct srv *s);
/* conn.c, for replication: the open connection id (or NULL); send n bytes on c (0, or -EBUSY
 * while a write is in flight: nothing appended). */
struct srv_conn *conn_by_id(struct srv *s, uint64_t id);
int conn_send(struct srv_conn *c, const void *p, size_t n);

/* conn.c, for conn_client.c: the loop's time in ms; the bytes c's buffers hold (counted against
 * max_client_memory); end c as CLIENT KILL does (its unsent replies and partial command
 * dropped, then closed as any connection ends). */
uint64_t conn_now(const struct srv *s);
size_t conn_held(const struct srv_conn *c);
void conn_kill(struct srv_conn *c);

/* conn.c, for conn_push.c: bring srv->client_mem up to date with c's buffers; hold
 * out[start, out.len) until lsn is durable; send what may be sent. */
void conn_account(struct srv_conn *c);
void conn_hold(struct srv_conn *c, size_t start, uint64_t lsn);
void conn_flush(struct srv_conn *c);

/*
 * conn_push.c: publish/subscribe and MONITOR over the connections. The command layer's hooks
 * (command.h: push, monitor, monitor_feed), arg the struct srv; conn_push_merge: c's pending
 * pushes into its replies, if they may go now (conn_flush() calls it); conn_push_forget: c
 * ends or closes: it leaves every channel, pattern and the monitors (again: nothing more).
 * conn_push_init: the idle handle.
 */
void conn_push_hook(void *arg, struct cmd_session *to, const char *frame, size_t len, uint64_t lsn);
void conn_monitor_hook(void *arg, struct cmd_session *s, bool on);
void conn_monitor_feed(void *arg, const struct cmd_session *from, size_t argc,
		       const char *const *argv, const size_t *argvlen);
void conn_push_merge(struct srv_conn *c);
void conn_push_forget(struct srv_conn *c);
int conn_push_init(struct srv *s);

/* conn_client.c: the command layer's client hooks (command.h: client_get, client_each,
 * client_kill), arg the struct srv. */
struct cmd_client;
const struct cmd_client *conn_client_get(void *arg, uint64_t self, uint64_t id,
					 struct cmd_client *buf);
void conn_client_each(void *arg, uint64_t self,
		      void (*fn)(void *fnarg, const struct cmd_client *cl), void *fnarg);
size_t conn_client_kill(void *arg, uint64_t self,
			bool (*match)(void *marg, const struct cmd_client *cl), void *marg);

/*
 * journal.c: the daemon's write-ahead log. journal_start: after the snapshots are loaded, open
 * data_dir/wal, replay it into the registry, and log every change from then on (wal = off:
 * nothing); 0, or a negative errno after logging why (the start is refused). journal_stop:
 * write and fdatasync what is left and close the log (its handles close with the loop).
 */
int journal_start(struct srv *s);
void journal_stop(struct srv *s);

/* journal.c: the log's figures for /metrics (left as they are with no log). */
struct metrics_wal;
void journal_metrics(struct srv *s, struct metrics_wal *out);
/*
 * journal.c, for a replica (repl_replica.c): apply a record its primary sent as a replay
 * applies the log's records (a transaction's parts held until its COMMIT), then append it to
 * this log (one that cannot be applied is not logged). 0; -ENOMEM; -EBADMSG with the reason in
 * why (a record this build cannot apply). journal_follow_end: after a batch of records.
 * journal_follow_abort: the link was lost: parts held are dropped, a TXN_ABORT logged.
 */
int journal_follow(struct srv *s, unsigned type, const void *p, size_t len, char *why,
		   size_t whylen);
void journal_follow_end(struct srv *s);
void journal_follow_abort(struct srv *s);

#endif /* BLOSSOMD_SERVER_SERVER_IMPL_H */
