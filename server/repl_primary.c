/* SPDX-License-Identifier: MIT */
/*
 * Replication, the primary's side (server/repl.h): the links of its replicas (REPLCONF, PSYNC),
 * the image a full sync sends (written by a forked child from a copy-on-write view of the
 * registry as of one LSN, as Redis writes its RDB: the loop only forks), the log's records
 * sent as they are appended, the backlog partial syncs go on from, WAIT, INFO replication and
 * ROLE; and the hooks (cmd_repl_ops)
 * REPLICAOF uses to make this process a replica (repl_replica.c).
 */
#include "server/server_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bf_record.h"
#include "core/bf_snapshot.h"
#include "server/log.h"
#include "server/repl_impl.h"

/* Bytes of a filter's body per BODY frame of an image. */
#define REPL_BODY_CHUNK (1u << 20)
/* The image's child writes a PING frame when it has written nothing for this long (ns). */
#define REPL_CHILD_PING_NS (250 * UINT64_C(1000000))
/* How often WAITs look at their timeouts (ms). */
#define REPL_WAIT_MS 10

void repl_new_id(char *id)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[REPL_ID_LEN / 2];

	if (uv_random(NULL, NULL, b, sizeof(b), 0, NULL))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)(uv_hrtime() >> (i % 8));
	for (size_t i = 0; i < sizeof(b); i++) {
		id[2 * i] = hex[b[i] >> 4];
		id[2 * i + 1] = hex[b[i] & 15];
	}
	id[REPL_ID_LEN] = 0;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void frame_head(unsigned char *h, unsigned type, uint64_t lsn, size_t len)
{
	memset(h, 0, REPL_FRAME_HEAD);
	put32(h, (uint32_t)len);
	h[4] = (unsigned char)type;
	put64(h + 8, lsn);
}

/* ---- the image, written by the child ---- */

/* Child: write every byte of iov[0, n) to the non-blocking socket fd. 0 or -1. */
static int child_writev(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			if (errno != EAGAIN && errno != EINTR)
				return -1;
			if (poll(&p, 1, 60000) <= 0)
				return -1;
			continue;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

struct child_ctx {
	int fd, dirfd;
	unsigned delay_ms;
	uint64_t last_ns; /* the last write */
	bool failed;
	char why; /* the status byte of a failure: 'c' a paged-out filter's file changed */
};

/* Child: a PING frame if nothing was written for REPL_CHILD_PING_NS: the replica's
 * repl_timeout counts from its last byte, and reading a large paged-out filter's file, say,
 * writes nothing for a while. */
static void child_ping(struct child_ctx *cx)
{
	unsigned char h[REPL_FRAME_HEAD];

	if (cx->failed || uv_hrtime() - cx->last_ns < REPL_CHILD_PING_NS)
		return;
	frame_head(h, REPL_FRAME_PING, 0, 0);
	struct iovec iov[1] = {{h, sizeof(h)}};
	cx->failed = child_writev(cx->fd, iov, 1) != 0;
	cx->last_ns = uv_hrtime();
}

/* Child: one filter's frames: LOAD (its header), BODY per chunk, EXPIRE. A paged-out one is
 * read from its file (which holds all of it: a filter pages out only once that is durable). */
static void child_filter(void *arg, struct bf_filter *f)
{
	struct child_ctx *cx = arg;
	struct bf_filter *own = NULL;
	unsigned char h[REPL_FRAME_HEAD + 16], *hdr;
	uint64_t gen, off = 0, total;
	char file[BF_SNAPSHOT_NAME_MAX], why[128];

	if (cx->failed || !f->params->persist)
		return;
	for (unsigned t = 0; t < cx->delay_ms; t += 50) {
		usleep(50000);
		child_ping(cx);
	}
	if (f->paged) {
		bf_snapshot_filename(bf_filter_name(f), f->name_len, file);
		if (bf_snapshot_read(cx->dirfd, file, &own, &gen, why, sizeof(why))) {
			cx->failed = true;
			cx->why = 'c'; /* dropped, or renamed, since the fork */
			return;
		}
		/*
		 * The file is read now, not at the fork: the parent may have paged the filter in,
		 * changed it and paged it out again since, and the stream sends those changes
		 * too. Its file then holds a newer LSN than this copy of its stub: the image fails
		 * (the replica syncs again) rather than hold changes past its offset.
		 */
		if (own->lsn != f->lsn) {
			cx->failed = true;
			cx->why = 'c';
			goto out;
		}
		own->id = f->id;
		child_ping(cx);
	}
	const struct bf_filter *g = own ? own : f;
	size_t hlen = bf_snapshot_header_len(g);
	hdr = malloc(hlen);
	if (!hdr) {
		cx->failed = true;
		goto out;
	}
	bf_snapshot_header(g, 0, 0, hdr);
	frame_head(h, BF_REC_LOAD, 0, 8 + hlen);
	put64(h + REPL_FRAME_HEAD, f->id);
	struct iovec iov[2] = {{h, REPL_FRAME_HEAD + 8}, {hdr, hlen}};
	cx->failed = child_writev(cx->fd, iov, 2) != 0;
	free(hdr);
	total = bf_filter_bytes(g);
	while (!cx->failed && off < total) {
		uint64_t n;
		const void *p = bf_filter_body_at(g, off, &n);
		if (n > REPL_BODY_CHUNK)
			n = REPL_BODY_CHUNK;
		frame_head(h, BF_REC_BODY, 0, 16 + n);
		put64(h + REPL_FRAME_HEAD, f->id);
		put64(h + REPL_FRAME_HEAD + 8, off);
		struct iovec b[2] = {{h, REPL_FRAME_HEAD + 16}, {(void *)p, (size_t)n}};
		cx->failed = child_writev(cx->fd, b, 2) != 0;
		off += n;
	}
	if (!cx->failed && bf_filter_expire_ms(f)) {
		frame_head(h, BF_REC_EXPIRE, 0, 16);
		bf_record_expire(f->id, bf_filter_expire_ms(f), h + REPL_FRAME_HEAD);
		struct iovec e[1] = {{h, REPL_FRAME_HEAD + 16}};
		cx->failed = child_writev(cx->fd, e, 1) != 0;
	}
out:
	cx->last_ns = uv_hrtime();
	if (own)
		bf_filter_free(own);
}

/* Child: +FULLRESYNC, the image between its EOF marks, then a status byte; never returns. */
/*
 * Child: keep only stdio, the replica's socket (as fd 3) and the status pipe (4), so that a
 * child outliving a killed primary holds none of its listening sockets; and die with it.
 */
static void child_fds(int *fd, int *status_fd)
{
	int a = fcntl(*fd, F_DUPFD, 10), b = fcntl(*status_fd, F_DUPFD, 10);

	if (a < 0 || b < 0 || dup2(a, 3) < 0 || dup2(b, 4) < 0)
		_exit(1);
	closefrom(5);
	*fd = 3;
	*status_fd = 4;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static void child_run(struct srv *s, int fd, int status_fd, uint64_t start)
{
	struct child_ctx cx;
	char head[160], mark[REPL_EOF_LEN + 1];

	child_fds(&fd, &status_fd);
	cx = (struct child_ctx){.fd = fd, .delay_ms = s->repl->image_delay_ms};
	repl_new_id(mark);
	cx.dirfd = open(s->cfg.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = snprintf(head, sizeof(head), "+FULLRESYNC %s %" PRIu64 "\r\n$EOF:%s\r\n",
			 s->repl->replid, start, mark);
	struct iovec iov[1] = {{head, (size_t)n}};
	cx.failed = child_writev(fd, iov, 1) != 0;
	cx.last_ns = uv_hrtime();
	if (!cx.failed)
		bf_registry_each(s->reg, child_filter, &cx);
	struct iovec end[1] = {{mark, REPL_EOF_LEN}};
	if (!cx.failed)
		cx.failed = child_writev(fd, end, 1) != 0;
	if (!cx.failed)
		(void)!write(status_fd, "k", 1);
	else if (cx.why)
		(void)!write(status_fd, &cx.why, 1);
	_exit(cx.failed ? 1 : 0);
}

/* Fork the child that writes l's image. 0 or a negative errno (the link is dropped). */
static int link_image(struct repl *r, struct repl_link *l)
{
	struct srv *s = r->srv;
	int fd, p[2];

	if (uv_fileno((uv_handle_t *)l->conn, &fd) || pipe2(p, O_CLOEXEC))
		return -EIO;
	l->start = s->ctx.logged_lsn;
	uint64_t t0 = uv_hrtime();
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[0]);
		child_run(s, fd, p[1], l->start);
	}
	close(p[1]);
	l->child = pid;
	l->status_fd = p[0];
	l->state = LINK_IMAGE;
	srv_log(SRV_LOG_NOTICE,
		"replica %s:%u: full sync from offset %" PRIu64 " (child %ld, fork %.1f ms)", l->ip,
		l->port, l->start, (long)pid, (double)(uv_hrtime() - t0) / 1e6);
	return 0;
}

/* l goes. Its image's child, if any, is killed, and reaped by repl_on_child when it has
 * died (never waited for here: the loop would wait on a child stuck in a disk read). */
static void link_free(struct repl *r, struct repl_link *l)
{
	LIST_REMOVE(l, link);
	proto_buf_free(&l->pending);
	if (l->child)
		close(l->status_fd);
	if (l->child > 0) {
		kill(l->child, SIGKILL);
		l->conn = NULL;
		LIST_INSERT_HEAD(&r->reaping, l, link);
		return;
	}
	free(l);
}

/* The killed children that have died are reaped (and their links freed). */
static void reap_killed(struct repl *r)
{
	struct repl_link *l, *next;

	for (l = LIST_FIRST(&r->reaping); l; l = next) {
		next = LIST_NEXT(l, link);
		if (waitpid(l->child, NULL, WNOHANG) == 0)
			continue; /* still dying: the next SIGCHLD */
		LIST_REMOVE(l, link);
		free(l);
	}
}

/* SIGCHLD: an image's child ended: its link goes online, or is closed. */
static void repl_on_child(uv_signal_t *h, int signum)
{
	struct repl *r = h->data;
	struct repl_link *l, *next;
	(void)signum;

	reap_killed(r);
	for (l = LIST_FIRST(&r->links); l; l = next) {
		int st;
		char ok = 0;

		next = LIST_NEXT(l, link);
		if (l->child <= 0 || waitpid(l->child, &st, WNOHANG) != l->child)
			continue;
		l->child = -1;
		bool good = read(l->status_fd, &ok, 1) == 1 && ok == 'k';
		close(l->status_fd);
		l->child = 0;
		if (!good) {
			srv_log(SRV_LOG_WARNING, "replica %s:%u: the full sync failed%s; closing",
				l->ip, l->port,
				ok == 'c' ? " (a paged-out filter changed while its image was "
					    "being written: it will sync again)"
					  : "");
			conn_close(l->conn); /* frees l */
			continue;
		}
		l->state = LINK_ONLINE;
		l->ack_ms = uv_now(&r->srv->loop);
		srv_log(SRV_LOG_NOTICE, "replica %s:%u: image sent; streaming", l->ip, l->port);
	}
	repl_flush(r->srv);
}

/* ---- the stream ---- */

static void link_append(struct repl_link *l, unsigned type, uint64_t lsn, const void *p, size_t len)
{
	unsigned char h[REPL_FRAME_HEAD];

	frame_head(h, type, lsn, len);
	proto_buf_append(&l->pending, h, sizeof(h));
	proto_buf_append(&l->pending, p, len);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Room for n more bytes at the backlog's end: 0 or -ENOMEM. The live frames move to the front
 * only once at least as many dead bytes lie before them, so that each byte appended is moved
 * about once at most (moving them at every append once full took 16 MiB per record). */
static int backlog_room(struct repl_backlog *bl, size_t n)
{
	size_t live = bl->end - bl->start;

	if (bl->end + n <= bl->cap)
		return 0;
	if (bl->start && bl->start >= live) {
		memmove(bl->buf, bl->buf + bl->start, live);
		bl->end = live;
		bl->start = 0;
		if (bl->end + n <= bl->cap)
			return 0;
	}
	size_t cap = bl->cap ? 2 * bl->cap : 65536;
	while (cap < 2 * (live + n))
		cap *= 2;
	unsigned char *p = realloc(bl->buf, cap);
	if (!p)
		return -ENOMEM;
	bl->buf = p;
	bl->cap = cap;
	return 0;
}

/* A record's frame joins the backlog; the oldest go to keep it within limit bytes. One that
 * cannot be kept (too large, out of memory) empties it: what it holds must be consecutive. */
static void backlog_add(struct repl_backlog *bl, uint64_t limit, uint64_t lsn, unsigned type,
			const void *p, size_t len)
{
	size_t n = REPL_FRAME_HEAD + len;

	if (!bl->active)
		return;
	while (bl->end > bl->start && bl->end - bl->start + n > limit) {
		bl->start += REPL_FRAME_HEAD + get32(bl->buf + bl->start);
		bl->first_lsn = bl->end > bl->start ? get64(bl->buf + bl->start + 8) : lsn;
	}
	if (n > limit || backlog_room(bl, n)) {
		bl->start = bl->end = 0;
		bl->first_lsn = lsn + 1;
		return;
	}
	if (bl->end == bl->start)
		bl->first_lsn = lsn;
	frame_head(bl->buf + bl->end, type, lsn, len);
	if (len)
		memcpy(bl->buf + bl->end + REPL_FRAME_HEAD, p, len);
	bl->end += n;
}

/* Where the frame of LSN from starts in the backlog (bl->end: none yet, it is the next), or
 * -ENOENT if the backlog does not reach back that far. */
static int backlog_from(const struct repl_backlog *bl, uint64_t from, uint64_t next, size_t *pos)
{
	size_t at = bl->start;

	if (!bl->active || from < bl->first_lsn || from > next)
		return -ENOENT;
	while (at < bl->end && get64(bl->buf + at + 8) < from)
		at += REPL_FRAME_HEAD + get32(bl->buf + at);
	*pos = at;
	return 0;
}

/* n bytes unsent to one replica are more than repl_output_bytes allows. */
static bool repl_over(const struct srv *s, uint64_t n)
{
	return s->cfg.repl_output_bytes && n > s->cfg.repl_output_bytes;
}

void repl_feed(struct srv *s, uint64_t lsn, unsigned type, const void *p, size_t len)
{
	struct repl_link *l;

	if (!s->repl)
		return;
	backlog_add(&s->repl->bl, s->cfg.repl_backlog_size, lsn, type, p, len);
	LIST_FOREACH(l, &s->repl->links, link)
	if (l->state == LINK_IMAGE || l->state == LINK_ONLINE)
		link_append(l, type, lsn, p, len);
}

void repl_flush(struct srv *s)
{
	struct repl *r = s->repl;
	struct repl_link *l, *next;

	if (!r)
		return;
	if (r->follow)
		repl_follow_flushed(r);
	for (l = LIST_FIRST(&r->links); l; l = next) {
		next = LIST_NEXT(l, link);
		if (l->state == LINK_WAIT_IMAGE && l->conn->out.len == 0 && !l->conn->writing) {
			if (link_image(r, l)) {
				conn_close(l->conn);
				continue;
			}
		}
		if (l->state < LINK_IMAGE || !l->pending.len)
			continue;
		/* Held while the image is sent too: bounded there as well (Redis's
		 * client-output-buffer-limit replica), not by a client's max_output_bytes. */
		if (l->pending.failed || repl_over(s, l->pending.len)) {
			srv_log(SRV_LOG_WARNING, "replica %s:%u: %s; closing (it will resync)",
				l->ip, l->port,
				l->pending.failed ? "out of memory"
				: l->state == LINK_IMAGE
				    ? "records logged during its full sync passed repl_output_bytes"
				    : "behind by repl_output_bytes");
			conn_close(l->conn);
			continue;
		}
		if (l->state != LINK_ONLINE)
			continue;
		/* Taken out first: a failed write closes the connection, which frees l. */
		struct proto_buf b = l->pending;

		proto_buf_init(&l->pending);
		if (conn_send(l->conn, b.data, b.len))
			l->pending = b; /* a write is in flight: nothing was done */
		else
			proto_buf_free(&b);
	}
}

void repl_conn_closed(struct srv *s, struct srv_conn *c)
{
	struct repl_link *l;

	if (!s->repl)
		return;
	LIST_FOREACH(l, &s->repl->links, link)
	if (l->conn == c) {
		if (l->state >= LINK_IMAGE)
			srv_log(SRV_LOG_NOTICE, "replica %s:%u: connection lost", l->ip, l->port);
		link_free(s->repl, l);
		return;
	}
}

void repl_drop_links(struct repl *r)
{
	while (!LIST_EMPTY(&r->links))
		conn_close(LIST_FIRST(&r->links)->conn);
}

/* The link of session id, made if missing (NULL: out of memory, or no such connection). */
static struct repl_link *link_get(struct repl *r, uint64_t id)
{
	struct repl_link *l;
	struct srv_conn *c = conn_by_id(r->srv, id);

	if (!c)
		return NULL;
	LIST_FOREACH(l, &r->links, link)
	if (l->conn == c)
		return l;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->conn = c;
	c->repl_link = true;
	snprintf(l->ip, sizeof(l->ip), "%s", c->peer);
	char *colon = strrchr(l->ip, ':');
	if (colon)
		*colon = 0;
	if (l->ip[0] == '[') {
		memmove(l->ip, l->ip + 1, strlen(l->ip));
		l->ip[strcspn(l->ip, "]")] = 0;
	}
	proto_buf_init(&l->pending);
	LIST_INSERT_HEAD(&r->links, l, link);
	return l;
}

/* Replicas whose acknowledged offset reaches lsn. */
static long long acked(const struct repl *r, uint64_t lsn)
{
	const struct repl_link *l;
	long long n = 0;

	LIST_FOREACH(l, &r->links, link)
	n += l->state == LINK_ONLINE && l->ack >= lsn;
	return n;
}

static void send_getack(struct repl *r)
{
	struct repl_link *l;

	LIST_FOREACH(l, &r->links, link)
	if (l->state == LINK_IMAGE || l->state == LINK_ONLINE)
		link_append(l, REPL_FRAME_GETACK, r->srv->ctx.logged_lsn, NULL, 0);
}

/* ---- the hooks ---- */

static int op_replconf(void *arg, uint64_t self, const char *key, const char *val, size_t vlen,
		       char *err, size_t errlen)
{
	struct srv *s = arg;
	struct repl *r = s->repl;
	long long v = 0;
	bool num = proto_resp_parse_ll(val, vlen, &v);
	struct repl_link *l;
	(void)err, (void)errlen;

	if (!strcmp(key, "ack")) {
		l = link_get(r, self);
		if (l && num && v > 0 && (uint64_t)v > l->ack)
			l->ack = (uint64_t)v;
		if (l)
			l->ack_ms = uv_now(&s->loop);
		if (!LIST_EMPTY(&r->waits))
			conn_resume_paused(s);
		return 1;
	}
	if (!strcmp(key, "getack"))
		return 1;
	if (!strcmp(key, "listening-port") || !strcmp(key, "http-port")) {
		if (!num || v < 0 || v > 65535)
			return -EINVAL;
		l = link_get(r, self);
		if (!l)
			return -ENOMEM;
		*(key[0] == 'l' ? &l->port : &l->http_port) = (unsigned)v;
		return 0;
	}
	if (!strcmp(key, "capa") || !strcmp(key, "ip-address") || !strcmp(key, "rdb-only"))
		return 0;
	return -EINVAL;
}

/* PSYNC replid offset of this history, whose records from offset on the backlog holds: the
 * link goes on from there (+CONTINUE). True if so. */
static bool psync_continue(struct srv *s, struct repl_link *l, const char *replid, size_t idlen,
			   long long off)
{
	struct repl *r = s->repl;
	size_t pos;

	if (idlen != REPL_ID_LEN || memcmp(replid, r->replid, REPL_ID_LEN) || off < 1 ||
	    backlog_from(&r->bl, (uint64_t)off, s->ctx.logged_lsn + 1, &pos))
		return false;
	/* A gap the link could not hold would be cut at once, and asked for again. */
	if (repl_over(s, r->bl.end - pos)) {
		srv_log(SRV_LOG_NOTICE,
			"replica %s:%u: partial sync from offset %lld would send %zu bytes, more "
			"than repl_output_bytes; a full sync instead",
			l->ip, l->port, off, r->bl.end - pos);
		return false;
	}
	proto_buf_append_fmt(&l->pending, "+CONTINUE %s\r\n", r->replid);
	proto_buf_append(&l->pending, r->bl.buf + pos, r->bl.end - pos);
	l->state = LINK_ONLINE;
	l->ack = (uint64_t)off - 1;
	l->ack_ms = uv_now(&s->loop);
	srv_log(SRV_LOG_NOTICE,
		"replica %s:%u: partial sync from offset %lld (%zu bytes of the backlog)", l->ip,
		l->port, off, r->bl.end - pos);
	return true;
}

static int op_psync(void *arg, uint64_t self, const char *replid, size_t idlen, long long off,
		    char *err, size_t errlen)
{
	struct srv *s = arg;
	struct repl_link *l;
	if (s->repl->follow) {
		snprintf(err, errlen, "ERR this replica takes no replicas of its own");
		return -ENOTSUP;
	}
	l = link_get(s->repl, self);
	if (!l) {
		snprintf(err, errlen, "ERR out of memory");
		return -ENOMEM;
	}
	if (l->state != LINK_HANDSHAKE) {
		snprintf(err, errlen, "ERR this connection is a replica's already");
		return -EEXIST;
	}
	if (psync_continue(s, l, replid, idlen, off))
		return 0;
	/* The backlog starts now: it covers whatever the image will not. */
	if (!s->repl->bl.active && s->cfg.repl_backlog_size) {
		s->repl->bl.active = true;
		s->repl->bl.first_lsn = s->ctx.logged_lsn + 1;
	}
	/* The image is forked once the replies before it are sent (repl_flush). */
	l->state = LINK_WAIT_IMAGE;
	return 0;
}

/* The WAITs whose client has left, freed. */
static void waits_forget_gone(struct repl *r)
{
	struct repl_wait *w, *next;

	for (w = LIST_FIRST(&r->waits); w; w = next) {
		next = LIST_NEXT(w, link);
		if (!conn_by_id(r->srv, w->session)) {
			LIST_REMOVE(w, link);
			free(w);
		}
	}
}

/*
 * This process becomes a replica: its WAITs end, as Redis's blocked clients do
 * (disconnectAllBlockedClients): each is marked, its client run again answers -UNBLOCKED
 * (op_wait), and the timer stops. Those whose client left go now.
 */
static void waits_unblock(struct repl *r)
{
	struct repl_wait *w;

	waits_forget_gone(r);
	LIST_FOREACH(w, &r->waits, link)
	w->unblocked = true;
	uv_timer_stop(&r->wait_timer);
	if (!LIST_EMPTY(&r->waits))
		conn_resume_paused(r->srv);
}

static int op_replicaof(void *arg, const char *host, long long port, char *err, size_t errlen)
{
	struct srv *s = arg;
	struct repl *r = s->repl;

	if (!host) {
		if (!r->follow)
			return 0;
		/* A new history: the old one's id and end stay known (PSYNC2's replid2). */
		r->second_offset = repl_follow_offset(r) + 1;
		repl_follow_stop(r);
		memcpy(r->replid2, r->replid, sizeof(r->replid));
		repl_new_id(r->replid);
		s->ctx.replica = false;
		/* The role now, for CONFIG GET and CONFIG REWRITE (read only at a start). */
		s->cfg.replicaof[0] = 0;
		srv_log(SRV_LOG_NOTICE, "MASTER MODE enabled (REPLICAOF NO ONE)");
		return 0;
	}
	if (r->follow && repl_follow_is(r, host, (unsigned)port))
		return 1;
	repl_drop_links(r);
	waits_unblock(r);
	int rc = repl_follow_start(r, host, (unsigned)port);
	if (rc) {
		snprintf(err, errlen, "ERR %s", strerror(-rc));
		return rc;
	}
	s->ctx.replica = true;
	snprintf(s->cfg.replicaof, sizeof(s->cfg.replicaof), "%s %lld", host, port);
	return 0;
}

/* While WAITs are under way: those past their deadline, or whose client left, are answered. */
static void repl_on_wait_timer(uv_timer_t *t)
{
	struct repl *r = t->data;

	waits_forget_gone(r);
	if (LIST_EMPTY(&r->waits))
		uv_timer_stop(t);
	else
		conn_resume_paused(r->srv);
}

static int op_wait(void *arg, uint64_t self, long long n, long long timeout, long long *out)
{
	struct srv *s = arg;
	struct repl *r = s->repl;
	struct repl_wait *w;
	uint64_t now = uv_now(&s->loop);

	LIST_FOREACH(w, &r->waits, link)
	if (w->session == self)
		break;
	if (w && (w->unblocked || r->follow)) {
		bool unblocked = w->unblocked;

		LIST_REMOVE(w, link);
		free(w);
		if (LIST_EMPTY(&r->waits))
			uv_timer_stop(&r->wait_timer);
		if (unblocked)
			return -ECONNRESET;
	}
	if (r->follow)
		return -ENOTSUP;
	uint64_t target = w ? w->target : s->ctx.logged_lsn;
	*out = acked(r, target);
	if (*out >= n || (w && w->deadline_ms && now >= w->deadline_ms) || !conn_by_id(s, self)) {
		if (w) {
			LIST_REMOVE(w, link);
			free(w);
		}
		if (LIST_EMPTY(&r->waits))
			uv_timer_stop(&r->wait_timer);
		return 1;
	}
	if (w)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return 1; /* answered with what is known now */
	*w = (struct repl_wait){.session = self, .target = target, .n = n};
	w->deadline_ms = timeout ? now + (uint64_t)timeout : 0;
	LIST_INSERT_HEAD(&r->waits, w, link);
	send_getack(r);
	if (!uv_is_active((uv_handle_t *)&r->wait_timer))
		uv_timer_start(&r->wait_timer, repl_on_wait_timer, REPL_WAIT_MS, REPL_WAIT_MS);
	return 0;
}

static void op_info(void *arg, struct proto_buf *b)
{
	struct srv *s = arg;
	struct repl *r = s->repl;
	const struct repl_link *l;
	uint64_t now = uv_now(&s->loop);
	unsigned i = 0, n = 0;

	if (r->follow)
		repl_follow_info(r, b);
	else
		proto_buf_append_str(b, "role:master\r\n");
	LIST_FOREACH(l, &r->links, link)
	n += l->state != LINK_HANDSHAKE;
	proto_buf_append_fmt(b, "connected_slaves:%u\r\n", n);
	LIST_FOREACH(l, &r->links, link)
	{
		if (l->state == LINK_HANDSHAKE)
			continue;
		proto_buf_append_fmt(
		    b, "slave%u:ip=%s,port=%u,state=%s,offset=%" PRIu64 ",lag=%" PRIu64 "\r\n", i++,
		    l->ip, l->port,
		    l->state == LINK_ONLINE  ? "online"
		    : l->state == LINK_IMAGE ? "send_bulk"
					     : "wait_bgsave",
		    l->ack, (now - l->ack_ms) / 1000);
	}
	uint64_t off = r->follow ? repl_follow_offset(r) : s->ctx.logged_lsn;
	proto_buf_append_fmt(b,
			     "master_failover_state:no-failover\r\n"
			     "master_replid:%s\r\n"
			     "master_replid2:%s\r\n"
			     "master_repl_offset:%" PRIu64 "\r\n"
			     "second_repl_offset:%lld\r\n"
			     "repl_backlog_active:%d\r\n"
			     "repl_backlog_size:%" PRIu64 "\r\n"
			     "repl_backlog_first_byte_offset:%" PRIu64 "\r\n"
			     "repl_backlog_histlen:%zu\r\n",
			     r->replid, r->replid2, off,
			     r->second_offset ? (long long)r->second_offset : -1LL, r->bl.active,
			     s->cfg.repl_backlog_size, r->bl.active ? r->bl.first_lsn : 0,
			     r->bl.end - r->bl.start);
}

static void op_role(void *arg, struct proto_buf *out, int resp)
{
	struct srv *s = arg;
	struct repl *r = s->repl;
	const struct repl_link *l;
	size_t n = 0;
	(void)resp;

	if (r->follow) {
		repl_follow_role(r, out);
		return;
	}
	LIST_FOREACH(l, &r->links, link)
	n += l->state == LINK_ONLINE;
	proto_resp_array(out, 3);
	proto_resp_bulk_str(out, "master");
	proto_resp_integer(out, (int64_t)s->ctx.logged_lsn);
	proto_resp_array(out, n);
	LIST_FOREACH(l, &r->links, link)
	{
		char num[24];

		if (l->state != LINK_ONLINE)
			continue;
		proto_resp_array(out, 3);
		proto_resp_bulk_str(out, l->ip);
		snprintf(num, sizeof(num), "%u", l->port);
		proto_resp_bulk_str(out, num);
		snprintf(num, sizeof(num), "%" PRIu64, l->ack);
		proto_resp_bulk_str(out, num);
	}
}

static const struct cmd_repl_ops repl_ops = {
    .replicaof = op_replicaof,
    .replconf = op_replconf,
    .psync = op_psync,
    .wait = op_wait,
    .info = op_info,
    .role = op_role,
};

/* Each second: a PING frame to every replica (its LSN the offset), and the replica's ACK. */
static void repl_on_tick(uv_timer_t *t)
{
	struct repl *r = t->data;
	struct repl_link *l, *next;
	uint64_t now = uv_now(&r->srv->loop), limit = (uint64_t)r->srv->cfg.repl_timeout * 1000;

	for (l = LIST_FIRST(&r->links); l; l = next) {
		next = LIST_NEXT(l, link);
		if (l->state == LINK_ONLINE && limit && now - l->ack_ms > limit) {
			srv_log(SRV_LOG_WARNING, "replica %s:%u: no ACK for repl_timeout; closing",
				l->ip, l->port);
			conn_close(l->conn);
			continue;
		}
		if (l->state == LINK_ONLINE || l->state == LINK_IMAGE)
			link_append(l, REPL_FRAME_PING, r->srv->ctx.logged_lsn, NULL, 0);
	}
	reap_killed(r); /* in case a SIGCHLD was missed */
	if (r->follow)
		repl_follow_tick(r);
	repl_flush(r->srv);
}

static void repl_on_close(uv_handle_t *h)
{
	struct repl *r = h->data;

	if (--r->handles == 0)
		free(r);
}

int repl_start(struct srv *s)
{
	struct repl *r;

	if (!s->wal)
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->srv = s;
	repl_new_id(r->replid);
	memset(r->replid2, '0', REPL_ID_LEN);
	LIST_INIT(&r->links);
	LIST_INIT(&r->reaping);
	LIST_INIT(&r->waits);
	const char *delay = getenv(REPL_IMAGE_DELAY_ENV);
	r->image_delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
	uv_timer_init(&s->loop, &r->tick);
	uv_timer_init(&s->loop, &r->wait_timer);
	uv_signal_init(&s->loop, &r->sigchld);
	r->tick.data = r->wait_timer.data = r->sigchld.data = r;
	r->handles = 3;
	uv_timer_start(&r->tick, repl_on_tick, 1000, 1000);
	uv_signal_start(&r->sigchld, repl_on_child, SIGCHLD);
	s->repl = r;
	s->ctx.hooks.repl = &repl_ops;
	if (s->cfg.replicaof[0]) {
		char host[256];
		unsigned port;

		/* conf_set checked its form. */
		if (sscanf(s->cfg.replicaof, "%255s %u", host, &port) == 2) {
			int rc = repl_follow_start(r, host, port);
			if (rc)
				srv_log(SRV_LOG_ERR, "replicaof %s: %s", s->cfg.replicaof,
					strerror(-rc));
			s->ctx.replica = !rc;
			return rc;
		}
	}
	return 0;
}

void repl_stop(struct srv *s)
{
	struct repl *r = s->repl;
	struct repl_wait *w;
	struct repl_link *l;

	if (!r)
		return;
	s->ctx.hooks.repl = NULL;
	repl_follow_stop(r);
	journal_follow_abort(s);
	while (!LIST_EMPTY(&r->links))
		link_free(r, LIST_FIRST(&r->links));
	/* The loop is ending: the children killed are waited for (SIGKILL, so at once). */
	while ((l = LIST_FIRST(&r->reaping))) {
		LIST_REMOVE(l, link);
		waitpid(l->child, NULL, 0);
		free(l);
	}
	while ((w = LIST_FIRST(&r->waits))) {
		LIST_REMOVE(w, link);
		free(w);
	}
	free(r->bl.buf);
	r->bl = (struct repl_backlog){0};
	s->repl = NULL;
	uv_close((uv_handle_t *)&r->tick, repl_on_close);
	uv_close((uv_handle_t *)&r->wait_timer, repl_on_close);
	uv_close((uv_handle_t *)&r->sigchld, repl_on_close);
}
