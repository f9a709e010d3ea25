/* SPDX-License-Identifier: MIT */
/*
 * The libuv loop, listeners, connections, timeouts, signals and reload; see server.h for the
 * behaviour. Everything here runs on the loop thread.
 */
#include "server/server_impl.h"

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

#include "server/http.h"
#include "server/log.h"
#include "server/repl.h"
#include "server/metrics.h"
#include "server/prefault.h"
#include "server/snapshot.h"
#include "server/wal.h"
#include "proto/buf.h"
#include "proto/command.h"
#include "proto/pubsub.h"
#include "proto/resp.h"
#include "proto/text.h"

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

	s->ctx.defaults[CMD_PEER_HTTP] =
	    (struct cmd_defaults){c->default_capacity, c->default_error_rate};
	s->ctx.defaults[CMD_PEER_TEXT] =
	    (struct cmd_defaults){c->text_default_capacity, c->text_default_error_rate};
	s->ctx.defaults[CMD_PEER_RESP] =
	    (struct cmd_defaults){c->resp_default_capacity, c->resp_default_error_rate};
	s->ctx.max_key_bytes = c->max_key_bytes;
	s->ctx.max_args = c->max_args;
	s->ctx.multi_max_commands = c->multi_max_commands;
	s->ctx.multi_max_bytes = c->multi_max_bytes;
	s->ctx.max_channel_bytes = c->max_channel_bytes;
	s->ctx.notify =
	    pubsub_notify_parse(c->notify_keyspace_events, strlen(c->notify_keyspace_events));
	if (s->ctx.notify < 0) /* not reached: the config's check takes only these letters */
		s->ctx.notify = 0;
	s->lim.max_bulk_bytes = c->max_bulk_bytes;
	s->lim.max_args = c->max_args;
	s->lim.max_line_bytes = c->max_line_bytes;
	s->lim.point_max = SRV_POINT_STEP;
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

#define SRV_LOG_CHANGE_RATE(field)                                                                 \
	do {                                                                                       \
		if (old->field != nc->field)                                                       \
			srv_log(SRV_LOG_INFO, "reload: " #field " %g -> %g", old->field,           \
				nc->field);                                                        \
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

int srv_config_check_start(const struct config *cfg)
{
	char pub[64];

	if (!cfg->auth_token_file[0] && !srv_bind_is_loopback(cfg->bind, pub, sizeof(pub))) {
		srv_log(SRV_LOG_ERR,
			"refusing to listen on %s without auth_token_file: anyone on the network "
			"could use it",
			pub);
		return -EPERM;
	}
	if (cfg->auth_token_file[0]) {
		char *token;
		size_t len;
		int rc = srv_token_read(cfg->auth_token_file, "refusing to start: ", &token, &len);

		if (rc)
			return rc;
		explicit_bzero(token, len);
		free(token);
	}
	return 0;
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
	/* The log was opened with these. */
	SRV_RESTART_U64(wal);
	SRV_RESTART_U64(wal_fsync);
	SRV_RESTART_U64(wal_segment_bytes);
	SRV_LOG_CHANGE_U64(wal_max_bytes);

	SRV_LOG_CHANGE_U64(snapshot_interval);
	SRV_LOG_CHANGE_U64(default_capacity);
	SRV_LOG_CHANGE_RATE(default_error_rate);
	SRV_LOG_CHANGE_U64(text_default_capacity);
	SRV_LOG_CHANGE_RATE(text_default_error_rate);
	SRV_LOG_CHANGE_U64(resp_default_capacity);
	SRV_LOG_CHANGE_RATE(resp_default_error_rate);
	SRV_LOG_CHANGE_U64(max_memory);
	SRV_LOG_CHANGE_U64(max_line_bytes);
	SRV_LOG_CHANGE_U64(max_bulk_bytes);
	SRV_LOG_CHANGE_U64(max_args);
	SRV_LOG_CHANGE_U64(multi_max_commands);
	SRV_LOG_CHANGE_U64(multi_max_bytes);
	SRV_LOG_CHANGE_U64(max_key_bytes);
	SRV_LOG_CHANGE_U64(max_body_bytes);
	SRV_LOG_CHANGE_U64(max_connections);
	SRV_LOG_CHANGE_U64(idle_timeout);
	SRV_LOG_CHANGE_U64(request_timeout);
	SRV_LOG_CHANGE_U64(max_output_bytes);
	SRV_LOG_CHANGE_U64(max_client_memory);
	SRV_LOG_CHANGE_U64(max_channel_bytes);
	if (strcmp(old->notify_keyspace_events, nc->notify_keyspace_events))
		srv_log(SRV_LOG_INFO, "reload: notify_keyspace_events '%s' -> '%s'",
			old->notify_keyspace_events, nc->notify_keyspace_events);
	SRV_LOG_CHANGE_U64(log_create_bytes);
	SRV_LOG_CHANGE_U64(log_progress_bytes);
	SRV_LOG_CHANGE_U64(log_progress_interval);
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
/*
 * A new filter's seed: random bytes from the kernel, fetched SEED_POOL at a time (one
 * getrandom per filter was a seventh of the loop's time during pipelined creates on a VM whose
 * system calls are dear; bench/many-filters). Per thread; a seed is never handed out twice.
 */
#define SEED_POOL 256

static uint64_t srv_seed(void *arg)
{
	static _Thread_local uint64_t pool[SEED_POOL];
	static _Thread_local size_t left;
	static uint64_t counter;
	struct timespec ts;
	uint64_t v;

	(void)arg;
	while (!left) {
		ssize_t n = getrandom(pool, sizeof(pool), 0);

		if (n >= (ssize_t)sizeof(v)) {
			left = (size_t)n / sizeof(v);
			break;
		}
		if (n < 0 && errno != EINTR)
			goto fallback;
	}
	v = pool[--left];
	return v;
fallback:
	/* splitmix64 of the time and a counter: distinct per filter, never fails. */
	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
	    ++counter * 0x9e3779b97f4a7c15u;
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9u;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebu;
	return v ^ (v >> 31);
}

/* Persistence hooks: see snapshot.h. */
static int srv_flush(void *arg, struct bf_filter *f, uint64_t *ticket)
{
	struct srv *s = arg;

	return srv_snap_flush(s->snap, f, ticket);
}

static int srv_bgsave(void *arg)
{
	struct srv *s = arg;

	return srv_snap_bgsave(s->snap);
}

/* A new filter; one of log_create_bytes or more is logged, as its memory and its first
 * checkpoint's write are large enough to notice. */
static void srv_created(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;
	uint64_t bytes = bf_filter_bytes(f);

	if (s->cfg.log_create_bytes && bytes >= s->cfg.log_create_bytes)
		srv_log(SRV_LOG_INFO,
			"created filter '%s': %" PRIu64 " bytes (%.1f MiB) of bits for %" PRIu64
			" keys at %g%s",
			bf_filter_name(f), bytes, bytes / 1048576.0, bf_filter_capacity(f),
			f->params->error_rate,
			f->params->persist ? "; its first checkpoint writes as much" : "");
	srv_snap_created(s->snap, f);
}

/*
 * Log first: a drop's, FLUSHALL's or RENAME's record (appended just before these hooks run) goes
 * to the log file before a file is removed or a checkpoint holding the change is written. Else a
 * SIGKILL between them left the files gone without the record: the packed filters of a FLUSHALL
 * came back while the others were gone, and a checkpoint held an LSN the log never reached.
 * Also when the log is switching segments, or its segment is full (wal_flush() would only
 * start the switch): the record was written after the files were gone (found by crashsim,
 * seeds 3003 to 3012).
 */
static void srv_log_first(struct srv *s)
{
	if (s->wal)
		(void)wal_write_now(s->wal);
}

static void srv_renamed(void *arg, struct bf_filter *f, const char *from, size_t from_len)
{
	struct srv *s = arg;

	srv_log_first(s);
	/* A failure is logged; the next cycle retries. */
	(void)srv_snap_renamed(s->snap, f, from, from_len);
}

static int srv_page_in(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;

	return srv_snap_page_in(s->snap, f);
}

static int srv_page_out(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;

	return srv_snap_page_out(s->snap, f);
}

/* A page-in ended: what waited for it runs again. */
static void srv_paged_in(void *arg)
{
	struct srv *s = arg;

	conn_resume_paused(s);
	if (s->http)
		http_resume_paged(s->http);
}

/*
 * A dropped filter (DEL, drop, FLUSHALL, an expiry, RENAME over it): one of at least
 * SRV_RELEASE_LATER bytes has its layers unmapped on the threadpool, since a GiB of written
 * pages took the loop 0.37 s to give back; the rest of it is freed, and its whole cost released
 * from max_memory, once they are (so a new filter never gets memory the process still holds).
 */
#define SRV_RELEASE_LATER (16u << 20)

struct srv_release {
	uv_work_t req;
	struct bf_filter *f;
	unsigned n;
	struct bf_layer layers[];
};

static void srv_release_work(uv_work_t *req)
{
	struct srv_release *r = req->data;

	for (unsigned i = 0; i < r->n; i++)
		bf_layer_free(&r->layers[i]);
}

static void srv_release_after(uv_work_t *req, int status)
{
	struct srv_release *r = req->data;

	(void)status; /* cancelled: the blocks are freed here instead */
	srv_release_work(req);
	bf_filter_free(r->f);
	free(r);
}

static void srv_release(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;
	struct srv_release *r;

	if (f->paged || bf_filter_bytes(f) < SRV_RELEASE_LATER ||
	    !(r = malloc(sizeof(*r) + f->nlayers * sizeof(r->layers[0])))) {
		bf_filter_free(f);
		return;
	}
	r->req.data = r;
	r->f = f;
	r->n = bf_filter_take_blocks(f, r->layers);
	if (uv_queue_work(&s->loop, &r->req, srv_release_work, srv_release_after)) {
		srv_release_work(&r->req);
		bf_filter_free(f);
		free(r);
	}
}

static int srv_dropping(void *arg, struct bf_filter *f, bool remove_file)
{
	struct srv *s = arg;

	srv_log_first(s);
	return srv_snap_dropping(s->snap, f, remove_file);
}

/* HTTP front-end hooks: see http.h. */
static const char *srv_http_not_ready(void *arg)
{
	struct srv *s = arg;
	struct srv_snap_status st;

	if (s->stopping)
		return "shutting down";
	if (s->ctx.log_failed)
		return "the write-ahead log cannot write: changes are refused; see the server log";
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
	out->yields = s->yields;
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
	journal_metrics(s, &out->wal);
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
/* Timers and signals */

/* Once a second: the connections' timeouts (conn_sweep), the coarse clock filters' use is
 * stamped with, and cold filters paged out (cold_interval). */
static void srv_on_sweep(uv_timer_t *t)
{
	struct srv *s = t->data;

	uint64_t now = uv_now(&s->loop);

	conn_sweep(s);
	/* INFO's instantaneous_ops_per_sec: the commands of the last second. */
	if (now > s->ops_sample_ms)
		s->ops_per_sec =
		    (s->ctx.commands - s->ops_sample_commands) * 1000 / (now - s->ops_sample_ms);
	s->ops_sample_ms = now;
	s->ops_sample_commands = s->ctx.commands;
	s->ctx.now_s = (uint32_t)(now / 1000);
	/* A replica holds what its primary sends; paging it out is left to the primary's. */
	if (!s->ctx.replica)
		srv_snap_cold(s->snap, s->ctx.now_s, s->cfg.cold_interval, SRV_COLD_BATCH);
}

/* Ten times a second: the filters whose time came (cmd_expire_due). */
static void srv_on_expire(uv_timer_t *t)
{
	struct srv *s = t->data;

	/* A replica's filters expire when its primary's DROP comes (as Redis's replicas). */
	if (!s->ctx.replica)
		cmd_expire_due(&s->ctx, cmd_now_ms(), SRV_EXPIRE_BATCH);
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
	srv_snap_shutdown(s->snap, !s->shutdown_nosave);
	srv_http_stop(s);
	repl_stop(s);
	journal_stop(s);
	uv_walk(&s->loop, srv_walk_close, s);
}

/* ---------------------------------------------------------------------------------------- */
/* Start-up and teardown */

/* After each turn's I/O: a connection's next slice begins in the next turn (conn_feed()), and
 * the heap's new memory, if it grew, is faulted in off the loop (prefault.h). */
static void srv_on_turn(uv_check_t *h)
{
	struct srv *s = h->data;

	s->turn++;
	srv_prefault_poke(s->prefault);
}

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
	rc = uv_timer_start(&s->sweep, srv_on_sweep, SRV_SWEEP_MS, SRV_SWEEP_MS);
	if (rc)
		return rc;
	rc = uv_idle_init(&s->loop, &s->yield_idle);
	if (rc)
		return rc;
	s->yield_idle.data = s;
	rc = conn_push_init(s);
	if (rc)
		return rc;
	rc = uv_check_init(&s->loop, &s->turn_check);
	if (rc)
		return rc;
	s->turn_check.data = s;
	rc = uv_check_start(&s->turn_check, srv_on_turn);
	if (rc)
		return rc;
	uv_unref((uv_handle_t *)&s->turn_check);
	rc = uv_timer_init(&s->loop, &s->expire);
	if (rc)
		return rc;
	s->expire.data = s;
	return uv_timer_start(&s->expire, srv_on_expire, SRV_EXPIRE_MS, SRV_EXPIRE_MS);
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
		conn_format_addr(&addr.sa, where, sizeof(where));
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
			rc = uv_listen((uv_stream_t *)t, SRV_BACKLOG, conn_on_accept);
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

/*
 * glibc raises its mmap threshold to the largest block freed so far (up to 32 MiB); from then
 * on large buffers come from the heap, and their pages stay with the process after free(): 20
 * connections that had each run one 1M-key command and gone idle kept 48 MB. A fixed
 * threshold keeps every large buffer (and filter) in a mapping of its own, which free()
 * returns to the system.
 */
static void srv_malloc_tune(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, SRV_MMAP_THRESHOLD);
#endif
}

/*
 * Read auth_token_file, if set, into s. Running without the protection the operator asked for
 * would be worse than not running: an unreadable or weak token refuses the start (returns its
 * error, logged).
 */
static int srv_start_token(struct srv *s)
{
	char *token;
	size_t len;
	int rc;

	if (!s->cfg.auth_token_file[0])
		return 0;
	rc = srv_token_read(s->cfg.auth_token_file, "refusing to start: ", &token, &len);
	if (rc)
		return rc;
	srv_token_set(s, token, len);
	return 0;
}

/* A zeroed server holding opt's configuration and overrides; NULL (logged) without memory. */
static struct srv *srv_alloc(const struct srv_options *opt)
{
	struct srv *s = calloc(1, sizeof(*s));

	if (!s) {
		srv_log(SRV_LOG_ERR, "out of memory");
		return NULL;
	}
	s->cfg = *opt->config;
	s->config_path = opt->config_path;
	s->ov = opt->overrides;
	s->nov = opt->noverrides;
	return s;
}

/* INFO's and CONFIG GET's figures of the process (cmd_hooks.server_info). */
static void srv_server_info(void *arg, struct cmd_server_info *out)
{
	struct srv *s = arg;
	struct srv_snap_status st;
	struct metrics_wal w = {0};
	struct rusage ru;

	out->connected_clients = s->nconns;
	out->total_connections = s->next_id - s->info_conns_base;
	out->rejected_connections = s->conns_rejected - s->info_rejected_base;
	out->maxclients = s->cfg.max_connections;
	out->ops_per_sec = s->ops_per_sec;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		out->cpu_sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		out->cpu_user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	}
	out->idle_timeout = s->cfg.idle_timeout;
	out->snapshot_interval = s->cfg.snapshot_interval;
	srv_snap_get_status(s->snap, &st);
	out->dirty = st.dirty;
	out->wal = s->wal != NULL;
	out->wal_fsync = s->cfg.wal_fsync;
	journal_metrics(s, &w);
	out->wal_bytes = w.bytes;
}

/* CONFIG RESETSTAT: INFO's connection counters start again from 0. */
static void srv_reset_stats(void *arg)
{
	struct srv *s = arg;

	s->info_conns_base = s->next_id;
	s->info_rejected_base = s->conns_rejected;
}

/* CONFIG SET (cmd_hooks.config_set): the keys srv_reload() applies live, as it applies them. */
static int srv_config_set(void *arg, size_t n, const char *const *keys, const char *const *vals,
			  size_t *bad, char *err, size_t errlen)
{
	struct srv *s = arg;
	struct config nc = s->cfg;
	uint32_t old_conns = s->cfg.max_connections;
	char none[1];

	for (size_t i = 0; i < n; i++) {
		*bad = i;
		/* A known key only a restart changes (conf_key_live lists them). */
		if (!conf_key_live(keys[i]) && conf_format(&nc, keys[i], none, sizeof(none)) == 0)
			return -EPERM;
		if (conf_set(&nc, keys[i], vals[i], err, errlen))
			return strncmp(err, "unknown key", 11) ? -EINVAL : -ENOENT;
	}
	*bad = 0;
	if (conf_validate(&nc, err, errlen))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		srv_log(SRV_LOG_NOTICE, "CONFIG SET %s %s", keys[i], vals[i]);
	s->cfg = nc;
	srv_apply_limits(s);
	if (nc.max_connections > old_conns)
		srv_raise_fd_limit(s);
	return 0;
}

/* CONFIG REWRITE (cmd_hooks.config_rewrite): the live keys into the file started with. Runs on
 * the loop (a small file: a write and two fsyncs), as Redis's does. */
static int srv_config_rewrite(void *arg, char *err, size_t errlen)
{
	struct srv *s = arg;
	int rc;

	if (!s->config_path)
		return -EBADF;
	rc = conf_rewrite(s->config_path, &s->cfg, err, errlen);
	if (rc)
		srv_log(SRV_LOG_WARNING, "CONFIG REWRITE of %s failed: %s", s->config_path, err);
	else
		srv_log(SRV_LOG_NOTICE, "CONFIG REWRITE: %s written", s->config_path);
	return rc;
}

static void srv_on_shutdown(uv_timer_t *t)
{
	srv_stop(t->data);
}

/* SHUTDOWN (cmd_hooks.shutdown): the stop closes every connection, the asking one too, so it
 * runs from a timer, not inside the command. */
static int srv_shutdown(void *arg, bool nosave)
{
	struct srv *s = arg;
	int rc;

	if (s->shutdown_armed || s->stopping)
		return 0;
	rc = uv_timer_init(&s->loop, &s->shutdown);
	if (rc)
		return rc;
	s->shutdown.data = s;
	rc = uv_timer_start(&s->shutdown, srv_on_shutdown, 0, 0);
	if (rc) {
		uv_close((uv_handle_t *)&s->shutdown, NULL);
		return rc;
	}
	s->shutdown_armed = true;
	s->shutdown_nosave = nosave;
	if (!nosave)
		srv_log(SRV_LOG_NOTICE, "SHUTDOWN received; shutting down");
	else if (s->wal)
		srv_log(SRV_LOG_NOTICE, "SHUTDOWN NOSAVE received; shutting down without the final "
					"checkpoint (the next start replays the write-ahead log)");
	else
		srv_log(SRV_LOG_WARNING,
			"SHUTDOWN NOSAVE received; shutting down without the final checkpoint: "
			"with wal = off, changes since the last checkpoint are lost");
	return 0;
}

/* Wire the command layer's context to the registry and to this server's hooks. */
static void srv_ctx_init(struct srv *s, const struct srv_options *opt)
{
	s->ctx.reg = s->reg;
	s->ctx.default_expansion = 2;
	s->ctx.hooks.arg = s;
	s->ctx.hooks.seed = srv_seed;
	s->ctx.hooks.flush = srv_flush;
	s->ctx.hooks.bgsave = srv_bgsave;
	s->ctx.hooks.created = srv_created;
	s->ctx.hooks.dropping = srv_dropping;
	s->ctx.hooks.client_get = conn_client_get;
	s->ctx.hooks.client_each = conn_client_each;
	s->ctx.hooks.client_kill = conn_client_kill;
	s->ctx.hooks.renamed = srv_renamed;
	s->ctx.hooks.page_in = srv_page_in;
	s->ctx.hooks.page_out = srv_page_out;
	s->ctx.hooks.server_info = srv_server_info;
	s->ctx.hooks.reset_stats = srv_reset_stats;
	s->ctx.hooks.config_set = srv_config_set;
	s->ctx.hooks.config_rewrite = srv_config_rewrite;
	s->ctx.hooks.shutdown = srv_shutdown;
	s->ctx.hooks.push = conn_push_hook;
	s->ctx.hooks.monitor = conn_monitor_hook;
	s->ctx.hooks.monitor_feed = conn_monitor_feed;
	s->ctx.started_unix = (uint64_t)time(NULL);
	s->ctx.version = opt->version;
}

/*
 * The start's recovery, before the first client can connect: load every snapshot, replay the
 * write-ahead log over them, end the load (the replay found the filters it needed by id
 * there), then drop what expired while the daemon was down. Returns 0 or the first failing
 * step's error; the caller then frees what was set up (s->prefault, s->snap, the log).
 */
static int srv_recover(struct srv *s, const struct srv_options *opt)
{
	int rc;

	srv_notify_status("loading snapshots from %s", s->cfg.data_dir);
	s->ctx.now_s = (uint32_t)(uv_now(&s->loop) / 1000);
	/* From here on: the load is most of a start's new memory (prefault.h). */
	s->prefault = srv_prefault_start();
	rc = srv_snap_new(&s->loop, &s->cfg, &s->ctx, s->prefault, opt->accept_missing_files,
			  &s->snap);
	if (rc)
		return rc;
	srv_snap_set_paged_in(s->snap, srv_paged_in, s);
	s->wal_truncate_corrupt = opt->wal_truncate_corrupt;
	s->accept_missing_files = opt->accept_missing_files;
	srv_notify_status("replaying the write-ahead log");
	rc = journal_start(s);
	if (rc)
		return rc;
	rc = srv_snap_load_end(s->snap);
	if (rc)
		return rc;
	srv_prefault_settle(s->prefault);
	cmd_expire_due(&s->ctx, cmd_now_ms(), 0);
	return 0;
}

int srv_new(const struct srv_options *opt, struct srv **out)
{
	struct srv *s;
	int rc;

	srv_malloc_tune();
	s = srv_alloc(opt);
	if (!s)
		return -ENOMEM;
	rc = srv_config_check_start(&s->cfg);
	if (!rc)
		rc = srv_start_token(s);
	if (rc)
		goto fail_free;

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
	srv_ctx_init(s, opt);
	srv_apply_limits(s);
	srv_raise_fd_limit(s);

	rc = srv_signals_init(s);
	if (rc) {
		srv_log(SRV_LOG_ERR, "signals: %s", uv_strerror(rc));
		goto fail_handles;
	}
	rc = srv_notify_init(&s->notify, &s->loop);
	if (!rc)
		rc = srv_recover(s, opt);
	if (!rc)
		rc = srv_listen_all(s);
	if (!rc)
		rc = srv_http_start(s);
	if (!rc)
		rc = repl_start(s);
	if (rc)
		goto fail_handles;

	/* Not before: a drop during the load or the log's replay frees at once (the loop does
	 * not run yet, and the budget must be free for what is loaded after it). */
	bf_registry_set_release(s->reg, srv_release, s);
	srv_log(SRV_LOG_NOTICE, "blossomd %s ready (pid %ld)", opt->version, (long)getpid());
	srv_notify_serving(s);
	*out = s;
	return 0;

fail_handles:
	repl_stop(s);
	journal_stop(s);
	srv_drain_loop(s);
	srv_snap_free(s->snap);
	srv_prefault_stop(s->prefault);
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
	srv_prefault_stop(s->prefault);
	bf_registry_free(s->reg);
	cmd_ctx_free(&s->ctx);
	free(s->rbuf);
	srv_token_set(s, NULL, 0);
	free(s);
	srv_log(SRV_LOG_NOTICE, "stopped");
	return 0;
}
