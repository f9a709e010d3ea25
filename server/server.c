/* SPDX-License-Identifier: MIT */
/*
 * The libuv loop, listeners, connections, timeouts, signals and reload; see server.h for the
 * behaviour. Everything here runs on the loop thread.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "snapshot.h"
#include "proto/buf.h"
#include "proto/command.h"
#include "proto/resp.h"
#include "proto/text.h"
#include "proto/resp_cmd.h"
#include "proto/text_cmd.h"

/* One read into the loop's shared buffer. */
#define SRV_READ_SIZE (64 * 1024)
/* Least free space offered to a read into a connection's own buffer. */
#define SRV_READ_MIN (16 * 1024)
/* Buffers up to this size are kept for reuse once empty; bigger ones are released. */
#define SRV_KEEP_BYTES (64 * 1024)
/* Argument arrays and per-command scratch are kept for this many entries after a batch (about
 * 44 KiB); a larger command's are given back once it is done, as Redis trims a client's argv
 * to 1024 entries. */
#define SRV_KEEP_ARGS 1024
/* Blocks from this size up get a mapping of their own, which free() gives back (glibc). */
#define SRV_MMAP_THRESHOLD (128 * 1024)
/* Longest text line read from a client that has not authenticated (when max_line_bytes is
 * larger): `auth TOKEN` needs at most 4101 bytes. Redis's cap on an unauthenticated bulk. */
#define SRV_UNAUTH_LINE PROTO_RESP_UNAUTH_MAX_BULK
/* A RESP command may take max(max_bulk_bytes, this) + 2 * PROTO_RESP_MAX_HEADER bytes. */
#define SRV_RESP_FLOOR (16 * 1024 * 1024)
/* How long a gracefully closed connection may keep sending before it is cut off. */
#define SRV_LINGER_MS 2000
#define SRV_SWEEP_MS  1000
#define SRV_BACKLOG   1024
/* Descriptors kept for listeners, stdio, snapshots and the HTTP server. */
#define SRV_FD_RESERVE 64
/* Shortest interval between two "too many connections" or accept warnings. */
#define SRV_WARN_MS 1000

enum conn_proto {
	CONN_UNKNOWN = 0, /* no byte read yet */
	CONN_TEXT,
	CONN_RESP,
};

enum conn_state {
	CONN_OPEN = 0, /* reading and serving */
	CONN_DRAIN,    /* last replies being written; then shutdown (or close after EOF) */
	CONN_LINGER,   /* our side shut down; input discarded until EOF or SRV_LINGER_MS */
	CONN_CLOSING,  /* uv_close() called */
};

struct srv_conn {
	uv_tcp_t tcp; /* tcp.data points back here */
	struct srv *srv;
	struct srv_conn *prev, *next; /* in srv->conns from accept until conn_close() */
	bool listed;	  /* accepted under max_connections: counted, listed, session set up */
	bool reading;	  /* uv_read_start() in effect */
	bool writing;	  /* wreq in flight */
	bool eof;	  /* the client shut down its sending side */
	bool text_skip;	  /* discarding the rest of an over-long line */
	bool mem_refused; /* its input could not grow within max_client_memory */
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

	/* Replies of the current batch; written with one write, not touched while writing. */
	struct proto_buf out;
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
	struct srv_notify notify; /* sd_notify watchdog timer */
	bool handles_ready;	  /* signals and timer initialised */

	struct srv_conn *conns; /* list head */
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
	uint64_t client_mem; /* sum of every connection's held, against max_client_memory */

	char *rbuf;  /* shared read buffer, SRV_READ_SIZE bytes */
	char *token; /* from auth_token_file, NUL-terminated; NULL: no auth (ctx.token) */
};

static void conn_close(struct srv_conn *c);
static void conn_flush(struct srv_conn *c);
static void conn_read_start(struct srv_conn *c);

/* ---------------------------------------------------------------------------------------- */
/* Configuration */

int srv_config_read(const char *path, const struct srv_override *ov, size_t nov, struct config *out,
		    char *err, size_t errlen)
{
	char msg[512];
	int rc;

	conf_defaults(out);
	if (path) {
		rc = conf_load(out, path, err, errlen);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < nov; i++) {
		rc = conf_set(out, ov[i].key, ov[i].value, msg, sizeof(msg));
		if (rc) {
			snprintf(err, errlen, "%s: %s", ov[i].flag, msg);
			return rc;
		}
	}
	return conf_validate(out, err, errlen);
}

/* Apply the settings that the command layer and the parsers read. */
static void srv_apply_limits(struct srv *s)
{
	const struct config *c = &s->cfg;

	s->ctx.default_capacity = c->default_capacity;
	s->ctx.default_error_rate = c->default_error_rate;
	s->ctx.max_key_bytes = c->max_key_bytes;
	s->ctx.max_args = c->max_args;
	s->lim.max_bulk_bytes = c->max_bulk_bytes;
	s->lim.max_args = c->max_args;
	s->lim.max_line_bytes = c->max_line_bytes;
	s->lim_unauth = s->lim;
	s->lim_unauth.unauthenticated = true;
	bf_registry_set_max_memory(s->reg, c->max_memory);
	srv_log_set_level(c->log_level);
}

/* Make room for max_connections descriptors: raise the soft limit as far as the hard one. */
static void srv_raise_fd_limit(const struct srv *s)
{
	rlim_t want = (rlim_t)s->cfg.max_connections + SRV_FD_RESERVE;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rlim_t cur =
		    rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;

		if (cur > rl.rlim_cur) {
			rl.rlim_cur = cur;
			if (setrlimit(RLIMIT_NOFILE, &rl))
				getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
		srv_log(SRV_LOG_WARNING,
			"open-file limit %" PRIu64 " allows fewer connections than max_connections "
			"(%" PRIu32 ")",
			(uint64_t)rl.rlim_cur, s->cfg.max_connections);
}

/* True if every address in the comma-separated list is a loopback address. */
static bool srv_bind_is_loopback(const char *bind, char *first_public, size_t len)
{
	char list[sizeof(((struct config *)0)->bind)];
	char *save = NULL;

	snprintf(list, sizeof(list), "%s", bind);
	for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		struct in_addr a4;
		struct in6_addr a6;

		if (inet_pton(AF_INET, a, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127)
			continue;
		if (inet_pton(AF_INET6, a, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6))
			continue;
		snprintf(first_public, len, "%s", a);
		return false;
	}
	return true;
}

#define SRV_LOG_CHANGE_U64(field)                                                                  \
	do {                                                                                       \
		if (old->field != nc->field)                                                       \
			srv_log(SRV_LOG_INFO, "reload: " #field " %" PRIu64 " -> %" PRIu64,        \
				(uint64_t)old->field, (uint64_t)nc->field);                        \
	} while (0)

#define SRV_RESTART_U64(field)                                                                     \
	do {                                                                                       \
		if (old->field != nc->field) {                                                     \
			srv_log(SRV_LOG_WARNING,                                                   \
				"reload: " #field " changed (%" PRIu64 " -> %" PRIu64              \
				"); restart blossomd to apply it",                                 \
				(uint64_t)old->field, (uint64_t)nc->field);                        \
			nc->field = old->field;                                                    \
		}                                                                                  \
	} while (0)

#define SRV_RESTART_STR(field)                                                                     \
	do {                                                                                       \
		if (strcmp(old->field, nc->field)) {                                               \
			srv_log(SRV_LOG_WARNING,                                                   \
				"reload: " #field " changed ('%s' -> '%s'); restart blossomd to "  \
				"apply it",                                                        \
				old->field, nc->field);                                            \
			memcpy(nc->field, old->field, sizeof(nc->field));                          \
		}                                                                                  \
	} while (0)

/* ---------------------------------------------------------------------------------------- */
/* Authentication token */

#define SRV_TOKEN_MIN 32
#define SRV_TOKEN_MAX 4096

/*
 * Read the token from path: the whole file less one trailing newline ("\n" or "\r\n"), at
 * least SRV_TOKEN_MIN bytes, printable ASCII without spaces (so that it survives the text
 * protocol and an HTTP header unchanged). *out is malloc'd and NUL-terminated. 0 or a negative
 * errno, logged with what (the caller's context).
 */
static int srv_token_read(const char *path, const char *what, char **out, size_t *outlen)
{
	char *buf;
	size_t len = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		srv_log(SRV_LOG_ERR, "%sauth_token_file %s: %s", what, path, strerror(-rc));
		return rc;
	}
	buf = malloc(SRV_TOKEN_MAX + 3);
	if (!buf) {
		close(fd);
		srv_log(SRV_LOG_ERR, "%sout of memory", what);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, SRV_TOKEN_MAX + 3 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			srv_log(SRV_LOG_ERR, "%sauth_token_file %s: %s", what, path, strerror(-rc));
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == SRV_TOKEN_MAX + 3)
			break;
	}
	close(fd);
	fd = -1;
	if (len && buf[len - 1] == '\n') {
		len--;
		if (len && buf[len - 1] == '\r')
			len--;
	}
	if (len > SRV_TOKEN_MAX) {
		srv_log(SRV_LOG_ERR, "%sauth_token_file %s: token longer than %d bytes", what, path,
			SRV_TOKEN_MAX);
		rc = -EINVAL;
		goto fail;
	}
	if (len < SRV_TOKEN_MIN) {
		srv_log(SRV_LOG_ERR,
			"%sauth_token_file %s: token is %zu bytes, at least %d are required", what,
			path, len, SRV_TOKEN_MIN);
		rc = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < len; i++) {
		if (buf[i] < '!' || buf[i] > '~') {
			srv_log(SRV_LOG_ERR,
				"%sauth_token_file %s: the token may hold only printable ASCII "
				"without spaces (byte %zu is not)",
				what, path, i);
			rc = -EINVAL;
			goto fail;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;

fail:
	if (fd >= 0)
		close(fd);
	explicit_bzero(buf, SRV_TOKEN_MAX + 3);
	free(buf);
	return rc;
}

int srv_token_check(const char *path)
{
	char *token;
	size_t len;
	int rc = srv_token_read(path, "", &token, &len);

	if (rc == 0) {
		explicit_bzero(token, len);
		free(token);
	}
	return rc;
}

/* Install token (may be NULL) as the server's, wiping the old one. */
static void srv_token_set(struct srv *s, char *token, size_t len)
{
	if (s->token) {
		explicit_bzero(s->token, s->ctx.token_len);
		free(s->token);
	}
	s->token = token;
	s->ctx.token = token;
	s->ctx.token_len = token ? len : 0;
}

/* SIGHUP: re-read the file (with the command-line overrides) and apply what can change live. */
static void srv_reload(struct srv *s)
{
	struct config ncfg, *nc = &ncfg;
	const struct config *old = &s->cfg;
	char err[768], pub[64], *token = NULL;
	size_t token_len = 0;
	int rc;

	if (!s->config_path) {
		srv_log(SRV_LOG_NOTICE, "SIGHUP: started without --config, nothing to re-read");
		return;
	}
	srv_log(SRV_LOG_INFO, "reloading configuration from %s", s->config_path);
	rc = srv_config_read(s->config_path, s->ov, s->nov, nc, err, sizeof(err));
	if (rc) {
		srv_log(SRV_LOG_ERR, "reload failed: %s; keeping the old configuration", err);
		return;
	}
	if (!nc->auth_token_file[0] && !srv_bind_is_loopback(old->bind, pub, sizeof(pub))) {
		srv_log(SRV_LOG_ERR,
			"reload failed: auth_token_file must stay set while listening on %s; "
			"keeping the old configuration",
			pub);
		return;
	}
	/* The token is re-read even when the path is unchanged: SIGHUP is how it is rotated. */
	if (nc->auth_token_file[0] &&
	    srv_token_read(nc->auth_token_file,
			   "reload failed (keeping the old configuration): ", &token, &token_len))
		return;

	/* Bound at start: kept until a restart. */
	SRV_RESTART_STR(bind);
	SRV_RESTART_U64(port);
	SRV_RESTART_U64(http_port);
	SRV_RESTART_STR(data_dir);

	SRV_LOG_CHANGE_U64(snapshot_interval);
	SRV_LOG_CHANGE_U64(default_capacity);
	if (old->default_error_rate != nc->default_error_rate)
		srv_log(SRV_LOG_INFO, "reload: default_error_rate %g -> %g",
			old->default_error_rate, nc->default_error_rate);
	SRV_LOG_CHANGE_U64(max_memory);
	SRV_LOG_CHANGE_U64(max_line_bytes);
	SRV_LOG_CHANGE_U64(max_bulk_bytes);
	SRV_LOG_CHANGE_U64(max_args);
	SRV_LOG_CHANGE_U64(max_key_bytes);
	SRV_LOG_CHANGE_U64(max_body_bytes);
	SRV_LOG_CHANGE_U64(max_connections);
	SRV_LOG_CHANGE_U64(idle_timeout);
	SRV_LOG_CHANGE_U64(request_timeout);
	SRV_LOG_CHANGE_U64(max_output_bytes);
	SRV_LOG_CHANGE_U64(max_client_memory);
	if (old->log_level != nc->log_level)
		srv_log(SRV_LOG_INFO, "reload: log_level %s -> %s",
			conf_log_level_name(old->log_level), conf_log_level_name(nc->log_level));
	if (strcmp(old->auth_token_file, nc->auth_token_file))
		srv_log(SRV_LOG_INFO, "reload: auth_token_file '%s' -> '%s'", old->auth_token_file,
			nc->auth_token_file);

	if (!token != !s->token)
		srv_log(SRV_LOG_NOTICE, "reload: authentication %s",
			token ? "enabled" : "disabled");
	else if (token)
		srv_log(SRV_LOG_INFO, "reload: auth token re-read from %s", nc->auth_token_file);
	srv_token_set(s, token, token_len);

	s->cfg = *nc;
	srv_apply_limits(s);
	if (nc->max_connections > old->max_connections)
		srv_raise_fd_limit(s);
	srv_log(SRV_LOG_NOTICE, "configuration reloaded from %s", s->config_path);
}

/* ---------------------------------------------------------------------------------------- */
/* Command-layer hooks */

/* 64 random bits for a filter seed: getrandom(2), or a mix of clock and counter without it. */
static uint64_t srv_seed(void *arg)
{
	static uint64_t counter;
	struct timespec ts;
	uint64_t v;

	(void)arg;
	for (;;) {
		ssize_t n = getrandom(&v, sizeof(v), 0);

		if (n == (ssize_t)sizeof(v))
			return v;
		if (n < 0 && errno != EINTR)
			break;
	}
	/* splitmix64 of the time and a counter: distinct per filter, never fails. */
	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
	    ++counter * 0x9e3779b97f4a7c15u;
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9u;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebu;
	return v ^ (v >> 31);
}

/* Persistence hooks: see snapshot.h. */
static int srv_flush(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;

	return srv_snap_flush(s->snap, f);
}

static void srv_created(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;

	srv_snap_created(s->snap, f);
}

static void srv_dropping(void *arg, struct bf_filter *f, bool remove_file)
{
	struct srv *s = arg;

	srv_snap_dropping(s->snap, f, remove_file);
}

/* HTTP front-end hooks: see http.h. */
static const char *srv_http_not_ready(void *arg)
{
	struct srv *s = arg;
	struct srv_snap_status st;

	if (s->stopping)
		return "shutting down";
	srv_snap_get_status(s->snap, &st);
	if (st.failing)
		return "snapshot writes are failing; see the server log";
	return NULL;
}

static void srv_http_stats(void *arg, struct metrics_server *out)
{
	struct srv *s = arg;
	struct srv_snap_status st;

	out->tcp = (struct metrics_conns){.open = s->nconns,
					  .accepted = s->next_id,
					  .rejected = s->conns_rejected,
					  .bytes_in = s->bytes_in,
					  .bytes_out = s->bytes_out};
	srv_snap_get_status(s->snap, &st);
	out->persist = (struct metrics_persist){.enabled = true,
						.loaded = st.loaded,
						.set_aside = st.set_aside,
						.saves = st.saves,
						.saved_bytes = st.saved_bytes,
						.failures = st.failures,
						.last_success_unix = st.last_success_unix,
						.last_failure_unix = st.last_failure_unix,
						.failing = st.failing,
						.dirty = st.dirty,
						.in_progress = st.in_progress};
}

static int srv_http_start(struct srv *s)
{
	struct http_server_options o = {.loop = &s->loop,
					.cfg = &s->cfg,
					.cmd = &s->ctx,
					.version = s->ctx.version,
					.arg = s,
					.not_ready = srv_http_not_ready,
					.server_stats = srv_http_stats};

	return http_server_start(&o, &s->http);
}

/* Stop HTTP before the handles are closed: its poll handle must go before MHD's epoll fd. */
static void srv_http_stop(struct srv *s)
{
	http_server_stop(s->http);
	s->http = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Connections */

static uint64_t srv_now(const struct srv *s)
{
	return uv_now(&s->loop);
}

/* Rate-limited warning: true at most once per SRV_WARN_MS for each (at, warned) pair. */
static bool srv_warn_due(const struct srv *s, uint64_t *at, bool *warned)
{
	uint64_t now = srv_now(s);

	if (*warned && now - *at < SRV_WARN_MS)
		return false;
	*at = now;
	*warned = true;
	return true;
}

static void srv_format_addr(const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		uv_ip4_name(a, host, sizeof(host));
		snprintf(out, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		uv_ip6_name(a, host, sizeof(host));
		snprintf(out, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	} else {
		snprintf(out, len, "?");
	}
}

/* Largest input a connection may hold for one partial command, plus room for a read. */
static size_t conn_in_limit(const struct srv_conn *c)
{
	const struct srv *s = c->srv;
	size_t bulk =
	    s->cfg.max_bulk_bytes > SRV_RESP_FLOOR ? s->cfg.max_bulk_bytes : SRV_RESP_FLOOR;

	if (c->proto == CONN_RESP)
		return bulk + 2 * PROTO_RESP_MAX_HEADER + SRV_READ_MIN;
	return (size_t)s->cfg.max_line_bytes + 2 + SRV_READ_MIN;
}

/* The RESP command-size cap (see server.h). */
static size_t srv_resp_max(const struct srv *s)
{
	size_t bulk =
	    s->cfg.max_bulk_bytes > SRV_RESP_FLOOR ? s->cfg.max_bulk_bytes : SRV_RESP_FLOOR;

	return bulk + 2 * PROTO_RESP_MAX_HEADER;
}

/* Bytes allocated for the connection's buffers: input, argument arrays, session scratch and
 * replies. */
static size_t conn_held(const struct srv_conn *c)
{
	const struct cmd_session *ss = &c->sess;
	size_t n = c->in_cap + c->out.cap;

	if (c->listed)
		n += proto_argv_bytes(&c->av) +
		     ss->scratch_cap *
			 (sizeof(*ss->keys) + sizeof(*ss->lens) + sizeof(*ss->results));
	return n;
}

/* Bring srv->client_mem up to date with what c holds now. */
static void conn_account(struct srv_conn *c)
{
	size_t now = conn_held(c);

	c->srv->client_mem -= c->held;
	c->srv->client_mem += now;
	c->held = now;
}

/* Whether the buffers of all connections together are past max_client_memory. */
static bool srv_client_mem_over(const struct srv *s)
{
	return s->cfg.max_client_memory && s->client_mem > s->cfg.max_client_memory;
}

/*
 * Grow the connection's input buffer to at least want bytes. 0, -ENOMEM, or -ENOBUFS when
 * the growth would take all connections' buffers past max_client_memory (c->mem_refused is
 * then set; nothing changes).
 */
static int conn_in_reserve(struct srv_conn *c, size_t want)
{
	const struct srv *s = c->srv;
	uint64_t max = s->cfg.max_client_memory;
	size_t cap, limit;
	char *p;

	if (c->in_cap >= want)
		return 0;
	cap = c->in_cap * 2 > want ? c->in_cap * 2 : want;
	limit = conn_in_limit(c);
	if (cap > limit)
		cap = want > limit ? want : limit;
	conn_account(c);
	/* Checked before the allocation: a client that announces a large bulk and then sends
	 * slowly (or not at all) would otherwise hold it for nothing. */
	if (max && s->client_mem - c->in_cap + cap > max) {
		cap = want;
		if (s->client_mem - c->in_cap + cap > max) {
			c->mem_refused = true;
			return -ENOBUFS;
		}
	}
	p = realloc(c->in, cap);
	if (!p)
		return -ENOMEM;
	c->in = p;
	c->in_cap = cap;
	conn_account(c);
	return 0;
}

static void conn_in_release(struct srv_conn *c)
{
	free(c->in);
	c->in = NULL;
	c->in_len = 0;
	c->in_cap = 0;
	conn_account(c);
}

/*
 * After a batch: give back what a large command left behind, so an idle connection holds
 * small buffers whatever it sent before. The input of a partial command and the arguments it
 * has so far stay (they are in use); the replies are trimmed once written (conn_out_done()).
 */
static void conn_trim(struct srv_conn *c)
{
	if (c->in_cap > SRV_KEEP_BYTES && c->in_len) {
		size_t want = c->in_len + SRV_READ_MIN;

		if (c->proto == CONN_RESP && proto_resp_need(&c->rst) > want)
			want = proto_resp_need(&c->rst);
		if (want <= SRV_KEEP_BYTES) {
			char *p = realloc(c->in, SRV_KEEP_BYTES);

			if (p) {
				c->in = p;
				c->in_cap = SRV_KEEP_BYTES;
			}
		}
	}
	proto_resp_trim(&c->rst, &c->av, SRV_KEEP_ARGS);
	/* The scratch arrays only live during one command; cmd_session_free() releases them
	 * and nothing else of the session (command.c). */
	if (c->sess.scratch_cap > SRV_KEEP_ARGS)
		cmd_session_free(&c->sess);
	conn_account(c);
}

static void conn_on_close(uv_handle_t *h)
{
	struct srv_conn *c = h->data;

	c->srv->client_mem -= c->held;
	if (c->listed) {
		proto_argv_free(&c->av);
		cmd_session_free(&c->sess);
	}
	free(c->in);
	proto_buf_free(&c->out);
	free(c);
}

/*
 * Close the connection: it leaves the list and frees its max_connections slot now (a client
 * accepted later in the same loop iteration may have it), the memory goes in the callback.
 * Safe while walking the list when the next entry was taken first.
 */
static void conn_close(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	if (c->listed) {
		if (c->prev)
			c->prev->next = c->next;
		else
			s->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		s->nconns--;
		srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s) closed", c->id, c->peer);
	}
	c->state = CONN_CLOSING;
	c->reading = false;
	uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

static void conn_read_stop(struct srv_conn *c)
{
	if (c->reading) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
	struct srv_conn *c = req->data;

	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	c->state = CONN_LINGER;
	c->linger_since = srv_now(c->srv);
	conn_read_start(c);
}

/* All replies are written and the connection ends: close at once if the client already shut
 * down its side, else shut down ours and linger so the last reply is not lost to a reset. */
static void conn_finish(struct srv_conn *c)
{
	conn_read_stop(c);
	if (c->eof || c->srv->stopping) {
		conn_close(c);
		return;
	}
	c->sreq.data = c;
	if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, conn_on_shutdown))
		conn_close(c);
}

/* The output buffer after a write: kept for reuse unless it grew large. */
static void conn_out_done(struct srv_conn *c)
{
	if (c->out.cap > SRV_KEEP_BYTES)
		proto_buf_free(&c->out);
	else
		proto_buf_reset(&c->out);
	conn_account(c);
}

static void conn_on_write(uv_write_t *req, int status)
{
	struct srv_conn *c = req->data;

	c->writing = false;
	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	if (status < 0) {
		srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): write: %s", c->id, c->peer,
			uv_strerror(status));
		conn_close(c);
		return;
	}
	c->last_active = srv_now(c->srv);
	conn_out_done(c);
	if (c->state == CONN_DRAIN) {
		conn_finish(c);
		return;
	}
	/* The client could not finish its command while it was not read: its clock restarts. */
	if (c->partial_since)
		c->partial_since = c->last_active;
	conn_read_start(c);
}

/*
 * Whether the pending write moved since the last look (which this one becomes): libuv handed
 * more of it to the kernel, or the client acknowledged more bytes (TCP_INFO), so a client
 * draining megabytes held in the kernel's buffers counts as reading while libuv's queue waits.
 */
static bool conn_out_moved(struct srv_conn *c)
{
	size_t left = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
	bool moved = left < c->write_left;
	uint64_t in, acked;
	uv_os_fd_t fd;

	c->write_left = left;
	if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
	    metrics_tcp_bytes(fd, &in, &acked) == 0) {
		moved = moved || acked > c->write_acked;
		c->write_acked = acked;
	}
	return moved;
}

/* Send the batch's replies: as much as the socket takes now, the rest with one uv_write(),
 * during which the connection is not read. */
static void conn_flush(struct srv_conn *c)
{
	uv_stream_t *st = (uv_stream_t *)&c->tcp;
	uv_buf_t b;
	int n;

	if (c->out.failed) {
		srv_log(SRV_LOG_ERR, "client %" PRIu64 " (%s): out of memory for replies; closing",
			c->id, c->peer);
		conn_close(c);
		return;
	}
	if (c->out.len == 0) {
		if (c->state == CONN_DRAIN)
			conn_finish(c);
		return;
	}
	b.base = c->out.data;
	b.len = c->out.len;
	c->srv->bytes_out += b.len;
	n = uv_try_write(st, &b, 1);
	if (n >= 0 && (size_t)n == c->out.len) {
		c->last_active = srv_now(c->srv);
		conn_out_done(c);
		if (c->state == CONN_DRAIN)
			conn_finish(c);
		return;
	}
	if (n < 0 && n != UV_EAGAIN) {
		srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): write: %s", c->id, c->peer,
			uv_strerror(n));
		conn_close(c);
		return;
	}
	if (n < 0)
		n = 0;
	b.base = c->out.data + n;
	b.len = c->out.len - (size_t)n;
	c->wreq.data = c;
	if (uv_write(&c->wreq, st, &b, 1, conn_on_write)) {
		conn_close(c);
		return;
	}
	c->writing = true;
	c->write_left = b.len;
	c->write_acked = 0;
	conn_out_moved(c);
	c->write_progress = srv_now(c->srv);
	conn_read_stop(c);
}

/* The replies to a client whose buffers would pass max_client_memory (ours; Redis's
 * maxmemory-clients closes without a word). */
#define SRV_ERR_CLIENT_MEM_RESP "client buffers would pass max_client_memory; closing"
#define SRV_ERR_CLIENT_MEM_TEXT "Client Error: Client buffers would pass max_client_memory\n"

/* All connections' buffers would pass max_client_memory because of c's: say so, and close it
 * once that is written (its partial command, if any, is dropped). */
static void conn_mem_refuse(struct srv_conn *c)
{
	struct srv *s = c->srv;

	srv_log(SRV_LOG_INFO,
		"client %" PRIu64 " (%s): client buffers would pass max_client_memory (%" PRIu64
		"); closing",
		c->id, c->peer, s->cfg.max_client_memory);
	if (c->proto == CONN_RESP)
		proto_resp_error_str(&c->out, SRV_ERR_CLIENT_MEM_RESP);
	else
		proto_buf_append_str(&c->out, SRV_ERR_CLIENT_MEM_TEXT);
	s->ctx.errors++;
	c->state = CONN_DRAIN;
}

/* After a command: refuse c if its buffers took the total past max_client_memory. */
static void conn_mem_check(struct srv_conn *c)
{
	conn_account(c);
	if (srv_client_mem_over(c->srv))
		conn_mem_refuse(c);
}

/* Too much output for one batch: the client is not keeping up (or asked for too much). */
static bool conn_out_over(struct srv_conn *c)
{
	if ((uint64_t)c->out.len <= c->srv->cfg.max_output_bytes)
		return false;
	srv_log(SRV_LOG_INFO,
		"client %" PRIu64 " (%s): replies passed max_output_bytes (%" PRIu64 "); closing",
		c->id, c->peer, c->srv->cfg.max_output_bytes);
	return true;
}

/*
 * Run every complete text command in data[0..len). *used receives the bytes consumed, *done
 * whether a command (or the discarding of an over-long line) was completed. Returns 0, or -1
 * if the connection must be closed at once.
 */
static int conn_process_text(struct srv_conn *c, const char *data, size_t len, size_t *used,
			     bool *done)
{
	struct srv *s = c->srv;
	size_t off = 0;

	while (off < len && c->state == CONN_OPEN) {
		const char *line;
		size_t linelen, max = s->lim.max_line_bytes;
		/* Before AUTH only short lines (Redis: 16 KiB bulks); a longer one is an error
		 * that closes the connection, as Redis closes it. */
		bool unauth = !cmd_session_authed(&s->ctx, &c->sess) && max > SRV_UNAUTH_LINE;
		ssize_t n;

		if (c->text_skip) {
			bool end;

			off += proto_text_skip(data + off, len - off, &end);
			if (!end)
				break;
			c->text_skip = false;
			*done = true;
			continue;
		}
		if (unauth)
			max = SRV_UNAUTH_LINE;
		n = proto_text_line(data + off, len - off, max, &line, &linelen);
		if (n == 0)
			break;
		if (n < 0 && unauth) {
			proto_buf_append_str(&c->out,
					     "Client Error: Unauthenticated line too long\n");
			s->ctx.errors++;
			c->state = CONN_DRAIN;
			break;
		}
		if (n < 0) {
			proto_buf_append_str(&c->out, "Client Error: Line too long\n");
			s->ctx.errors++;
			c->text_skip = true;
			continue;
		}
		text_cmd_exec(&s->ctx, &c->sess, line, linelen, &c->out);
		off += (size_t)n;
		*done = true;
		if (c->sess.close_after)
			c->state = CONN_DRAIN;
		if (conn_out_over(c))
			return -1;
		conn_mem_check(c);
	}
	*used = off;
	return 0;
}

/* As conn_process_text() for RESP. A protocol error appends its reply and sets CONN_DRAIN. */
static int conn_process_resp(struct srv_conn *c, const char *data, size_t len, size_t *used,
			     bool *done)
{
	struct srv *s = c->srv;
	size_t off = 0;

	while (off < len && c->state == CONN_OPEN) {
		const char *msg = NULL;
		/* Chosen per command: once a client AUTHs, its next command has the full limits. */
		const struct proto_limits *lim =
		    cmd_session_authed(&s->ctx, &c->sess) ? &s->lim : &s->lim_unauth;
		ssize_t n = proto_resp_parse(&c->rst, data + off, len - off, lim, &c->av, &msg);

		if (n > 0) {
			if (c->av.argc)
				resp_cmd_exec(&s->ctx, &c->sess, &c->av, &c->out);
			off += (size_t)n;
			*done = true;
			if (c->sess.close_after)
				c->state = CONN_DRAIN;
			if (conn_out_over(c))
				return -1;
			conn_mem_check(c);
			continue;
		}
		if (n == 0) {
			if (proto_resp_need(&c->rst) > srv_resp_max(s)) {
				msg = "Protocol error: command too large";
				n = -EPROTO;
			} else {
				break;
			}
		}
		if (n == -EPROTO) {
			srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): %s", c->id, c->peer, msg);
			proto_resp_error_str(&c->out, msg);
			s->ctx.errors++;
			c->state = CONN_DRAIN;
			break;
		}
		srv_log(SRV_LOG_ERR, "client %" PRIu64 " (%s): out of memory parsing a command",
			c->id, c->peer);
		return -1;
	}
	*used = off;
	return 0;
}

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct srv_conn *c = h->data;
	size_t want;

	(void)suggested;
	/* Nothing pending (or only discarding): read into the shared buffer; a connection that
	 * is between commands then holds no input memory at all. */
	if (c->in_len == 0 || c->state != CONN_OPEN) {
		*buf = uv_buf_init(c->srv->rbuf, SRV_READ_SIZE);
		return;
	}
	want = c->in_len + SRV_READ_MIN;
	if (c->proto == CONN_RESP) {
		size_t need = proto_resp_need(&c->rst);

		if (need > want)
			want = need;
	}
	if (conn_in_reserve(c, want)) {
		*buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS (c->mem_refused says why) */
		return;
	}
	buf->base = c->in + c->in_len;
	buf->len = c->in_cap - c->in_len;
}

static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct srv_conn *c = st->data;
	struct srv *s = c->srv;
	const char *data;
	size_t len, used = 0, tail, held0;
	bool done = false, shared;
	int rc;

	if (nread == 0)
		return;
	if (c->state != CONN_OPEN) {
		/* Lingering: input is dropped; the client's EOF (or an error) ends it. */
		if (nread < 0)
			conn_close(c);
		return;
	}
	if (nread == UV_ENOBUFS && c->mem_refused) {
		/* Reading is stopped while a write is pending, so the reply can be appended. */
		conn_mem_refuse(c);
		conn_in_release(c);
		conn_read_stop(c);
		conn_flush(c);
		return;
	}
	if (nread < 0) {
		c->reading = false;
		if (nread == UV_EOF) {
			c->eof = true;
		} else {
			srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): read: %s", c->id, c->peer,
				uv_strerror((int)nread));
			if (nread == UV_ENOBUFS)
				srv_log(SRV_LOG_ERR,
					"client %" PRIu64 " (%s): out of memory for input; closing",
					c->id, c->peer);
		}
		/* Replies still being written go out first; the partial command is dropped. */
		if (nread == UV_EOF && c->writing) {
			uv_read_stop(st);
			c->state = CONN_DRAIN;
			return;
		}
		conn_close(c);
		return;
	}

	c->last_active = srv_now(s);
	s->bytes_in += (uint64_t)nread;
	held0 = c->held;
	shared = buf->base == s->rbuf;
	if (shared) {
		data = s->rbuf;
		len = (size_t)nread;
	} else {
		c->in_len += (size_t)nread;
		data = c->in;
		len = c->in_len;
	}
	if (c->proto == CONN_UNKNOWN)
		c->proto = data[0] == '*' ? CONN_RESP : CONN_TEXT;

	if (c->proto == CONN_RESP)
		rc = conn_process_resp(c, data, len, &used, &done);
	else
		rc = conn_process_text(c, data, len, &used, &done);
	if (rc) {
		conn_close(c);
		return;
	}

	/* Keep the partial command at the front of the connection's own buffer. */
	tail = c->state == CONN_OPEN ? len - used : 0;
	if (shared) {
		if (tail) {
			size_t want = tail + SRV_READ_MIN;
			int rrc;

			if (c->proto == CONN_RESP && proto_resp_need(&c->rst) > want)
				want = proto_resp_need(&c->rst);
			rrc = conn_in_reserve(c, want);
			if (rrc == -ENOBUFS) {
				conn_mem_refuse(c);
				tail = 0;
			} else if (rrc) {
				srv_log(SRV_LOG_ERR,
					"client %" PRIu64 " (%s): out of memory for input; closing",
					c->id, c->peer);
				conn_close(c);
				return;
			} else {
				memcpy(c->in, data + used, tail);
			}
		}
	} else if (tail && used) {
		memmove(c->in, c->in + used, tail);
	}
	c->in_len = tail;
	if (tail == 0 && c->in_cap > SRV_KEEP_BYTES)
		conn_in_release(c);
	conn_trim(c);
	/* What the partial command holds now (its input, its arguments so far) must fit too. */
	if (c->state == CONN_OPEN && c->held > held0 && srv_client_mem_over(s)) {
		conn_mem_refuse(c);
		conn_in_release(c);
	}

	/* request_timeout counts from the first byte of the command still incomplete. */
	if (!tail && !c->text_skip)
		c->partial_since = 0;
	else if (done || !c->partial_since)
		c->partial_since = c->last_active;

	if (c->state == CONN_DRAIN)
		conn_read_stop(c);
	conn_flush(c);
}

static void conn_read_start(struct srv_conn *c)
{
	int rc;

	if (c->reading)
		return;
	rc = uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read);
	if (rc) {
		srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): read: %s", c->id, c->peer,
			uv_strerror(rc));
		conn_close(c);
		return;
	}
	c->reading = true;
}

static void srv_on_connection(uv_stream_t *server, int status);

static void srv_on_reject_closed(uv_handle_t *h)
{
	struct srv *s = h->data;
	uv_stream_t *server = s->accept_stalled;

	s->reject_busy = false;
	s->accept_stalled = NULL;
	if (server && !s->stopping && !uv_is_closing((uv_handle_t *)server))
		srv_on_connection(server, 0);
}

/* No memory for a connection: accept it into the spare handle and close it, so the listener
 * does not stall (libuv stops watching a listener until its pending connection is taken). */
static void srv_reject_nomem(struct srv *s, uv_stream_t *server)
{
	if (srv_warn_due(s, &s->warned_accept_at, &s->warned_accept))
		srv_log(SRV_LOG_ERR, "out of memory for a new connection; refusing it");
	if (s->reject_busy) {
		s->accept_stalled = server;
		return;
	}
	if (uv_tcp_init(&s->loop, &s->reject))
		return;
	s->reject.data = s;
	s->reject_busy = true;
	uv_accept(server, (uv_stream_t *)&s->reject);
	uv_close((uv_handle_t *)&s->reject, srv_on_reject_closed);
}

static void srv_on_connection(uv_stream_t *server, int status)
{
	struct srv *s = server->data;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct srv_conn *c;
	int rc;

	if (status < 0) {
		if (srv_warn_due(s, &s->warned_accept_at, &s->warned_accept))
			srv_log(SRV_LOG_WARNING, "accept: %s", uv_strerror(status));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		srv_reject_nomem(s, server);
		return;
	}
	c->srv = s;
	rc = uv_tcp_init(&s->loop, &c->tcp);
	if (rc) {
		free(c);
		srv_reject_nomem(s, server);
		return;
	}
	c->tcp.data = c;
	rc = uv_accept(server, (uv_stream_t *)&c->tcp);
	if (rc) {
		if (srv_warn_due(s, &s->warned_accept_at, &s->warned_accept))
			srv_log(SRV_LOG_WARNING, "accept: %s", uv_strerror(rc));
		conn_close(c);
		return;
	}
	if (s->stopping || s->nconns >= s->cfg.max_connections) {
		/* The protocol is not known yet, so no error reply: just close. */
		s->conns_rejected++;
		if (srv_warn_due(s, &s->warned_full_at, &s->warned_full))
			srv_log(SRV_LOG_WARNING,
				"max_connections (%" PRIu32 ") reached; refusing new connections",
				s->cfg.max_connections);
		conn_close(c);
		return;
	}

	c->id = ++s->next_id;
	c->listed = true;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	proto_resp_state_init(&c->rst);
	proto_argv_init(&c->av);
	proto_buf_init(&c->out);
	cmd_session_init(&c->sess, c->id);
	c->last_active = srv_now(s);
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0)
		srv_format_addr((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "?");
	uv_tcp_nodelay(&c->tcp, 1);
	uv_tcp_keepalive(&c->tcp, 1, 300);
	srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s) connected", c->id, c->peer);
	conn_read_start(c);
}

/* ---------------------------------------------------------------------------------------- */
/* Timers and signals */

/* Once a second: end lingering closes, stalled writes, partial commands held too long and
 * idle connections. */
static void srv_on_sweep(uv_timer_t *t)
{
	struct srv *s = t->data;
	const struct config *cfg = &s->cfg;
	uint64_t now = srv_now(s);
	uint64_t idle_ms = (uint64_t)cfg->idle_timeout * 1000;
	uint64_t req_ms = (uint64_t)cfg->request_timeout * 1000;
	/* A client not reading its replies gets request_timeout (else idle_timeout) to resume. */
	uint64_t stall_ms = req_ms ? req_ms : idle_ms;
	struct srv_conn *c, *next;

	for (c = s->conns; c; c = next) {
		next = c->next;
		if (c->state == CONN_LINGER) {
			if (now - c->linger_since >= SRV_LINGER_MS)
				conn_close(c);
			continue;
		}
		if (c->writing) {
			if (conn_out_moved(c)) {
				c->write_progress = now;
				c->last_active = now;
			} else if (stall_ms && now - c->write_progress >= stall_ms) {
				srv_log(SRV_LOG_INFO,
					"client %" PRIu64 " (%s): not reading its replies; closing",
					c->id, c->peer);
				conn_close(c);
				continue;
			}
		}
		/* While a write is pending the client is not read, so it cannot finish. */
		if (req_ms && c->partial_since && !c->writing && now - c->partial_since >= req_ms) {
			srv_log(SRV_LOG_INFO,
				"client %" PRIu64 " (%s): command incomplete after request_timeout "
				"(%" PRIu32 " s); closing",
				c->id, c->peer, cfg->request_timeout);
			conn_close(c);
			continue;
		}
		if (idle_ms && !c->writing && now - c->last_active >= idle_ms) {
			srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): idle; closing", c->id,
				c->peer);
			conn_close(c);
		}
	}
}

/* READY=1 for the service manager, with what is served as its status line. */
static void srv_notify_serving(const struct srv *s)
{
	size_t n = bf_registry_count(s->reg);

	if (s->http)
		srv_notify_ready("serving %zu filter%s on %s port %u, HTTP port %u", n,
				 n == 1 ? "" : "s", s->cfg.bind, (unsigned)s->cfg.port,
				 (unsigned)s->cfg.http_port);
	else
		srv_notify_ready("serving %zu filter%s on %s port %u", n, n == 1 ? "" : "s",
				 s->cfg.bind, (unsigned)s->cfg.port);
}

static void srv_on_signal(uv_signal_t *h, int signum)
{
	struct srv *s = h->data;

	if (signum == SIGHUP) {
		srv_notify_reloading();
		srv_reload(s);
		srv_notify_serving(s);
		return;
	}
	srv_log(SRV_LOG_NOTICE, "%s received; shutting down",
		signum == SIGINT ? "SIGINT" : "SIGTERM");
	srv_stop(s);
}

/* Close a handle that is not closing yet: a connection through its own path (which frees
 * it), anything else (embedded in struct srv) with no callback. */
static void srv_walk_close(uv_handle_t *h, void *arg)
{
	struct srv *s = arg;

	if (uv_is_closing(h))
		return;
	if (h->type == UV_TCP && h->data != s) {
		conn_close(h->data);
		return;
	}
	uv_close(h, NULL);
}

void srv_stop(struct srv *s)
{
	if (s->stopping)
		return;
	s->stopping = true;
	srv_notify_stopping();
	/* Dirty filters are written on the threadpool; their requests keep the loop running
	 * after every handle below is closed. */
	srv_snap_shutdown(s->snap);
	srv_http_stop(s);
	uv_walk(&s->loop, srv_walk_close, s);
}

/* ---------------------------------------------------------------------------------------- */
/* Start-up and teardown */

static int srv_signals_init(struct srv *s)
{
	struct {
		uv_signal_t *h;
		int signum;
	} sig[] = {{&s->sig_term, SIGTERM}, {&s->sig_int, SIGINT}, {&s->sig_hup, SIGHUP}};
	int rc;

	for (size_t i = 0; i < sizeof(sig) / sizeof(sig[0]); i++) {
		rc = uv_signal_init(&s->loop, sig[i].h);
		if (rc)
			return rc;
		sig[i].h->data = s;
		rc = uv_signal_start(sig[i].h, srv_on_signal, sig[i].signum);
		if (rc)
			return rc;
	}
	rc = uv_timer_init(&s->loop, &s->sweep);
	if (rc)
		return rc;
	s->sweep.data = s;
	return uv_timer_start(&s->sweep, srv_on_sweep, SRV_SWEEP_MS, SRV_SWEEP_MS);
}

/* Bind and listen on port for every address in bind. Logs and returns the first failure. */
static int srv_listen_all(struct srv *s)
{
	char list[sizeof(s->cfg.bind)], where[INET6_ADDRSTRLEN + 16];
	char *save = NULL;
	size_t n = 1;
	int rc;

	for (const char *p = s->cfg.bind; *p; p++)
		n += *p == ',';
	s->listeners = calloc(n, sizeof(*s->listeners));
	if (!s->listeners)
		return -ENOMEM;
	snprintf(list, sizeof(list), "%s", s->cfg.bind);
	for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		union {
			struct sockaddr sa;
			struct sockaddr_in in4;
			struct sockaddr_in6 in6;
		} addr;
		uv_tcp_t *t = &s->listeners[s->nlisteners];
		unsigned flags = 0;

		if (uv_ip4_addr(a, s->cfg.port, &addr.in4) != 0) {
			rc = uv_ip6_addr(a, s->cfg.port, &addr.in6);
			if (rc) {
				srv_log(SRV_LOG_ERR, "bind %s: not an IPv4 or IPv6 address", a);
				return rc;
			}
			/* "::" must not also take the IPv4 port another listener may want. */
			flags = UV_TCP_IPV6ONLY;
		}
		srv_format_addr(&addr.sa, where, sizeof(where));
		rc = uv_tcp_init(&s->loop, t);
		if (rc) {
			srv_log(SRV_LOG_ERR, "listen %s: %s", where, uv_strerror(rc));
			return rc;
		}
		t->data = s;
		s->nlisteners++;
		/* libuv sets SO_REUSEADDR; a bind error may only show at listen time. */
		rc = uv_tcp_bind(t, &addr.sa, flags);
		if (!rc)
			rc = uv_listen((uv_stream_t *)t, SRV_BACKLOG, srv_on_connection);
		if (rc) {
			srv_log(SRV_LOG_ERR, "bind %s: %s", where, uv_strerror(rc));
			return rc;
		}
		srv_log(SRV_LOG_NOTICE, "listening on %s (text and RESP)", where);
	}
	return 0;
}

/* Close every handle left and run the loop until their callbacks have run. */
static void srv_drain_loop(struct srv *s)
{
	srv_http_stop(s);
	uv_walk(&s->loop, srv_walk_close, s);
	uv_run(&s->loop, UV_RUN_DEFAULT);
}

int srv_new(const struct srv_options *opt, struct srv **out)
{
	char pub[64];
	struct srv *s;
	int rc;

#ifdef M_MMAP_THRESHOLD
	/*
	 * glibc raises its mmap threshold to the largest block freed so far (up to 32 MiB); from
	 * then on large buffers come from the heap, and their pages stay with the process after
	 * free(): 20 connections that had each run one 1M-key command and gone idle kept 48 MB.
	 * A fixed threshold keeps every large buffer (and filter) in a mapping of its own, which
	 * free() returns to the system.
	 */
	mallopt(M_MMAP_THRESHOLD, SRV_MMAP_THRESHOLD);
#endif
	s = calloc(1, sizeof(*s));
	if (!s) {
		srv_log(SRV_LOG_ERR, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *opt->config;
	s->config_path = opt->config_path;
	s->ov = opt->overrides;
	s->nov = opt->noverrides;

	if (!s->cfg.auth_token_file[0] && !srv_bind_is_loopback(s->cfg.bind, pub, sizeof(pub))) {
		srv_log(SRV_LOG_ERR,
			"refusing to listen on %s without auth_token_file: anyone on the network "
			"could use it",
			pub);
		rc = -EPERM;
		goto fail_free;
	}
	if (s->cfg.auth_token_file[0]) {
		char *token;
		size_t len;

		/* Running without the protection the operator asked for would be worse than not
		 * running: an unreadable or weak token refuses the start. */
		rc = srv_token_read(s->cfg.auth_token_file, "refusing to start: ", &token, &len);
		if (rc)
			goto fail_free;
		srv_token_set(s, token, len);
	}

	rc = uv_loop_init(&s->loop);
	if (rc) {
		srv_log(SRV_LOG_ERR, "uv_loop_init: %s", uv_strerror(rc));
		goto fail_free;
	}
	s->rbuf = malloc(SRV_READ_SIZE);
	if (!s->rbuf) {
		srv_log(SRV_LOG_ERR, "out of memory");
		rc = -ENOMEM;
		goto fail_loop;
	}
	rc = bf_registry_new(s->cfg.max_memory, &s->reg);
	if (rc) {
		srv_log(SRV_LOG_ERR, "registry: %s", strerror(-rc));
		goto fail_rbuf;
	}
	s->ctx.reg = s->reg;
	s->ctx.default_expansion = 2;
	s->ctx.hooks.arg = s;
	s->ctx.hooks.seed = srv_seed;
	s->ctx.hooks.flush = srv_flush;
	s->ctx.hooks.created = srv_created;
	s->ctx.hooks.dropping = srv_dropping;
	s->ctx.started_unix = (uint64_t)time(NULL);
	s->ctx.version = opt->version;
	srv_apply_limits(s);
	srv_raise_fd_limit(s);

	rc = srv_signals_init(s);
	if (rc) {
		srv_log(SRV_LOG_ERR, "signals: %s", uv_strerror(rc));
		goto fail_handles;
	}
	rc = srv_notify_init(&s->notify, &s->loop);
	if (rc)
		goto fail_handles;
	srv_notify_status("loading snapshots from %s", s->cfg.data_dir);
	/* Every snapshot is loaded before the first client can connect. */
	rc = srv_snap_new(&s->loop, &s->cfg, &s->ctx, &s->snap);
	if (rc)
		goto fail_handles;
	rc = srv_listen_all(s);
	if (rc)
		goto fail_handles;
	rc = srv_http_start(s);
	if (rc)
		goto fail_handles;

	srv_log(SRV_LOG_NOTICE, "blossomd %s ready (pid %ld)", opt->version, (long)getpid());
	srv_notify_serving(s);
	*out = s;
	return 0;

fail_handles:
	srv_drain_loop(s);
	srv_snap_free(s->snap);
	free(s->listeners);
	bf_registry_free(s->reg);
fail_rbuf:
	free(s->rbuf);
fail_loop:
	if (uv_loop_close(&s->loop)) {
		srv_log(SRV_LOG_CRIT, "uv_loop_close: handles left open");
		return rc; /* s leaks: the loop may still point into it */
	}
fail_free:
	srv_token_set(s, NULL, 0);
	free(s);
	return rc;
}

int srv_run(struct srv *s)
{
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return srv_snap_final_failed(s->snap) ? -EIO : 0;
}

static void srv_walk_report(uv_handle_t *h, void *arg)
{
	(void)arg;
	srv_log(SRV_LOG_CRIT, "handle still open at exit: %s%s", uv_handle_type_name(h->type),
		uv_is_closing(h) ? " (closing)" : "");
}

int srv_free(struct srv *s)
{
	int rc;

	if (!s)
		return 0;
	s->stopping = true;
	srv_drain_loop(s);
	rc = uv_loop_close(&s->loop);
	if (rc) {
		uv_walk(&s->loop, srv_walk_report, NULL);
		srv_log(SRV_LOG_CRIT, "uv_loop_close: %s", uv_strerror(rc));
		return rc;
	}
	free(s->listeners);
	srv_snap_free(s->snap);
	bf_registry_free(s->reg);
	free(s->rbuf);
	srv_token_set(s, NULL, 0);
	free(s);
	srv_log(SRV_LOG_NOTICE, "stopped");
	return 0;
}
