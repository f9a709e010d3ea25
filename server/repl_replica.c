/* SPDX-License-Identifier: MIT */
/*
 * Replication, the replica's side (server/repl.h): the link to the primary on the loop (connect,
 * Redis's handshake pipelined, PSYNC), the image and the stream applied through the log's
 * replay path, then appended to this daemon's own log (journal_follow), REPLCONF ACK
 * each second and on GETACK, and a new attempt a second after the link is lost.
 */
#include "server/server_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_record.h"
#include "server/log.h"
#include "server/repl_impl.h"
#include "server/wal.h"

#define FOLLOW_RETRY_MS 1000

/* One attempt's connection; freed when its handle has closed. */
struct fconn {
	uv_tcp_t tcp;
	uv_connect_t creq;
	struct repl_follow *fw; /* NULL once abandoned */
	char *buf;
	size_t len, cap;
	unsigned replies; /* handshake replies read */
	char mark[REPL_EOF_LEN];
	bool marked; /* the image's opening line was read */
};

struct repl_follow {
	struct repl *r;
	char host[256];
	unsigned port;
	enum { F_CONNECT, F_CONNECTING, F_HANDSHAKE, F_TRANSFER, F_CONNECTED } state;
	struct fconn *fc;
	uv_timer_t retry;
	uint64_t offset;  /* applied: the primary's LSN */
	uint64_t written; /* of those, written to this daemon's log */
	/* Of those, the newest outside a transaction (the parts of one are dropped when the
	 * link is lost): a new link goes on from the next (PSYNC replid safe+1) once a sync
	 * of this history was whole (known). */
	uint64_t safe;
	bool known, in_txn;
	bool ack_now; /* GETACK came: acknowledge after the next write */
	uint64_t last_io_ms, down_since_ms;
};

/* The handshake's replies, in order (they are pipelined). */
enum { HS_PING, HS_AUTH, HS_PORT, HS_HTTP, HS_CAPA, HS_PSYNC, HS_COUNT };

static struct srv *srv_of(const struct repl_follow *fw)
{
	return fw->r->srv;
}

struct fwrite {
	uv_write_t req;
	char data[];
};

static void fconn_on_write(uv_write_t *req, int status)
{
	(void)status; /* a failed write shows as a read error */
	free(req);
}

static void fconn_send(struct fconn *fc, const char *p, size_t n)
{
	struct fwrite *w = malloc(sizeof(*w) + n);

	if (!w)
		return;
	memcpy(w->data, p, n);
	uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
	if (uv_write(&w->req, (uv_stream_t *)&fc->tcp, &b, 1, fconn_on_write))
		free(w);
}

static void fconn_on_close(uv_handle_t *h)
{
	struct fconn *fc = h->data;

	free(fc->buf);
	free(fc);
}

static void follow_retry_cb(uv_timer_t *t);

/* The link is lost (or given up): close it, and try again in a second unless stopping. */
static void follow_lost(struct repl_follow *fw, const char *why)
{
	struct srv *s = srv_of(fw);

	if (fw->fc) {
		fw->fc->fw = NULL;
		if (!uv_is_closing((uv_handle_t *)&fw->fc->tcp))
			uv_close((uv_handle_t *)&fw->fc->tcp, fconn_on_close);
		fw->fc = NULL;
	}
	if (why)
		srv_log(SRV_LOG_WARNING, "replication: primary %s:%u: %s; retrying", fw->host,
			fw->port, why);
	journal_follow_abort(s);
	fw->offset = fw->written = fw->safe;
	fw->in_txn = false;
	if (fw->state == F_CONNECTED)
		fw->down_since_ms = uv_now(&s->loop);
	fw->state = F_CONNECT;
	uv_timer_start(&fw->retry, follow_retry_cb, FOLLOW_RETRY_MS, 0);
}

static void follow_send_ack(struct repl_follow *fw)
{
	char msg[96];
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, fw->written);
	int m = snprintf(msg, sizeof(msg), "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$%d\r\n%s\r\n", n,
			 num);

	if (fw->fc && fw->state == F_CONNECTED)
		fconn_send(fw->fc, msg, (size_t)m);
	fw->ack_now = false;
}

/* A RESP command of argc words into b. */
static void put_cmd(struct proto_buf *b, int argc, const char *const *argv)
{
	proto_buf_append_fmt(b, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++)
		proto_buf_append_fmt(b, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
}

/* Connected: the whole handshake at once; the replies are read in order. */
static void follow_handshake(struct repl_follow *fw)
{
	struct srv *s = srv_of(fw);
	struct proto_buf b;
	char port[16], http[16], from[24];

	snprintf(port, sizeof(port), "%u", (unsigned)s->cfg.port);
	snprintf(http, sizeof(http), "%u", (unsigned)s->cfg.http_port);
	proto_buf_init(&b);
	put_cmd(&b, 1, (const char *const[]){"PING"});
	if (s->cfg.primary_auth[0])
		put_cmd(&b, 2, (const char *const[]){"AUTH", s->cfg.primary_auth});
	put_cmd(&b, 3, (const char *const[]){"REPLCONF", "listening-port", port});
	/* Ours: a Redis primary answers an error, which is ignored. */
	put_cmd(&b, 3, (const char *const[]){"REPLCONF", "http-port", http});
	put_cmd(&b, 5, (const char *const[]){"REPLCONF", "capa", "eof", "capa", "psync2"});
	snprintf(from, sizeof(from), "%" PRIu64, fw->safe + 1);
	if (fw->known)
		put_cmd(&b, 3, (const char *const[]){"PSYNC", fw->r->replid, from});
	else
		put_cmd(&b, 3, (const char *const[]){"PSYNC", "?", "-1"});
	if (!b.failed)
		fconn_send(fw->fc, b.data, b.len);
	proto_buf_free(&b);
	fw->fc->replies = 0;
	fw->state = F_HANDSHAKE;
}

/* +CONTINUE [replid]: the primary goes on from safe + 1. A new replid (the primary was
 * promoted) is taken, the old one kept as replid2, as Redis does. 0. */
static int follow_continue(struct repl_follow *fw, const char *rest)
{
	struct repl *r = fw->r;
	char id[REPL_ID_LEN + 1];

	if (sscanf(rest, " %40s", id) == 1 && strlen(id) == REPL_ID_LEN && strcmp(id, r->replid)) {
		memcpy(r->replid2, r->replid, sizeof(r->replid2));
		r->second_offset = fw->safe + 1;
		memcpy(r->replid, id, sizeof(id));
	}
	fw->state = F_CONNECTED;
	srv_log(SRV_LOG_NOTICE, "replication: partial sync from %s:%u at offset %" PRIu64, fw->host,
		fw->port, fw->safe + 1);
	return 0;
}

/* One handshake reply line (without its CRLF). 0, or -1 with the link given up. */
static int follow_reply(struct repl_follow *fw, const char *line, size_t n)
{
	struct srv *s = srv_of(fw);
	struct fconn *fc = fw->fc;
	unsigned step = fc->replies++;
	char what[160];

	if (step >= HS_AUTH && !s->cfg.primary_auth[0])
		step++; /* no AUTH was sent */
	snprintf(what, sizeof(what), "%.*s", (int)(n < 120 ? n : 120), line);
	switch (step) {
	case HS_PING:
		if (line[0] == '+' || !strncmp(line, "-NOAUTH", 7) || !strncmp(line, "-NOPERM", 7))
			return 0;
		break;
	case HS_AUTH:
		if (line[0] == '+')
			return 0;
		break;
	case HS_PORT:
	case HS_HTTP:
	case HS_CAPA:
		return 0; /* as Redis: not critical */
	default:
		if (!strncmp(line, "+FULLRESYNC ", 12)) {
			char id[REPL_ID_LEN + 1];
			unsigned long long off;

			if (sscanf(what + 12, "%40s %llu", id, &off) != 2)
				break;
			memcpy(fw->r->replid, id, sizeof(id));
			fw->offset = fw->written = fw->safe = off;
			fw->known = false;
			fw->state = F_TRANSFER;
			srv_log(SRV_LOG_NOTICE,
				"replication: full sync from %s:%u, replid %s offset %llu",
				fw->host, fw->port, id, off);
			/* What this replica held is replaced by the image. */
			if (journal_follow(s, BF_REC_FLUSHALL, NULL, 0, what, sizeof(what)))
				break;
			return 0;
		}
		if (!strncmp(line, "+CONTINUE", 9))
			return follow_continue(fw, what + 9);
		break;
	}
	char why[200];
	snprintf(why, sizeof(why), "handshake: %s", what);
	follow_lost(fw, why);
	return -1;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* One frame. 0, or -1 with the link given up. */
static int follow_frame(struct repl_follow *fw, unsigned type, uint64_t lsn, const void *p,
			size_t len)
{
	char why[256];

	if (type == REPL_FRAME_GETACK) {
		fw->ack_now = true;
		return 0;
	}
	if (type == REPL_FRAME_PING) {
		/* Every record before it came before it; never inside a transaction. */
		if (fw->state == F_CONNECTED && !fw->in_txn && lsn > fw->offset)
			fw->offset = fw->safe = lsn;
		return 0;
	}
	if (journal_follow(srv_of(fw), type, p, len, why, sizeof(why))) {
		srv_log(SRV_LOG_ERR,
			"replication: a record from the primary (type %u) cannot be "
			"applied: %s; syncing in full",
			type, why);
		/* Asking for the same record again would fail the same way, forever: a full
		 * sync replaces what this replica holds instead. */
		fw->known = false;
		follow_lost(fw, "apply failed");
		return -1;
	}
	if (fw->state != F_CONNECTED)
		return 0; /* the image: its frames have no LSN */
	fw->in_txn = type == BF_REC_TXN_PART;
	if (lsn > fw->offset)
		fw->offset = lsn;
	if (!fw->in_txn)
		fw->safe = fw->offset;
	return 0;
}

/* What fc->buf[0, len) holds that is whole, consumed. */
static void follow_parse(struct repl_follow *fw)
{
	struct fconn *fc = fw->fc;
	size_t at = 0;

	while (fw->fc == fc) {
		const char *b = fc->buf + at;
		size_t left = fc->len - at;

		if (fw->state == F_HANDSHAKE || (fw->state == F_TRANSFER && !fc->marked)) {
			const char *nl = memchr(b, '\n', left);
			if (!nl)
				break;
			size_t n = (size_t)(nl - b);
			size_t ln = n && b[n - 1] == '\r' ? n - 1 : n;
			at += n + 1;
			if (fw->state == F_TRANSFER) {
				if (ln != 5 + REPL_EOF_LEN || memcmp(b, "$EOF:", 5)) {
					follow_lost(fw, "no image after +FULLRESYNC");
					return;
				}
				memcpy(fc->mark, b + 5, REPL_EOF_LEN);
				fc->marked = true;
			} else if (follow_reply(fw, b, ln)) {
				return;
			}
			continue;
		}
		if (left < REPL_FRAME_HEAD)
			break;
		uint32_t len = get32((const unsigned char *)b);
		if (fw->state == F_TRANSFER && len > WAL_MAX_PAYLOAD) {
			if (left < REPL_EOF_LEN)
				break;
			if (memcmp(b, fc->mark, REPL_EOF_LEN)) {
				follow_lost(fw, "bad image");
				return;
			}
			at += REPL_EOF_LEN;
			fw->state = F_CONNECTED;
			fw->known = true;
			srv_log(SRV_LOG_NOTICE, "replication: image loaded; following %s:%u",
				fw->host, fw->port);
			continue;
		}
		if (len > WAL_MAX_PAYLOAD) {
			follow_lost(fw, "bad frame");
			return;
		}
		if (left < REPL_FRAME_HEAD + (size_t)len)
			break;
		const unsigned char *h = (const unsigned char *)b;
		at += REPL_FRAME_HEAD + len;
		if (follow_frame(fw, h[4], get64(h + 8), h + REPL_FRAME_HEAD, len))
			return;
	}
	if (fw->fc == fc) {
		memmove(fc->buf, fc->buf + at, fc->len - at);
		fc->len -= at;
	}
}

static void fconn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct fconn *fc = h->data;
	(void)suggested;

	if (fc->cap - fc->len < 65536) {
		size_t cap = fc->cap ? fc->cap * 2 : 131072;
		char *p = realloc(fc->buf, cap);
		if (!p) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		fc->buf = p;
		fc->cap = cap;
	}
	*buf = uv_buf_init(fc->buf + fc->len, (unsigned)(fc->cap - fc->len));
}

static void fconn_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct fconn *fc = st->data;
	struct repl_follow *fw = fc->fw;
	(void)buf;

	if (!fw)
		return;
	if (n < 0) {
		follow_lost(fw, n == UV_EOF ? "connection closed" : uv_strerror((int)n));
		return;
	}
	fc->len += (size_t)n;
	fw->last_io_ms = uv_now(&srv_of(fw)->loop);
	follow_parse(fw);
	journal_follow_end(srv_of(fw));
}

static void fconn_on_connect(uv_connect_t *req, int status)
{
	struct fconn *fc = req->data;
	struct repl_follow *fw = fc->fw;

	if (!fw)
		return;
	if (status < 0) {
		follow_lost(fw, uv_strerror(status));
		return;
	}
	fw->last_io_ms = uv_now(&srv_of(fw)->loop);
	uv_read_start((uv_stream_t *)&fc->tcp, fconn_on_alloc, fconn_on_read);
	follow_handshake(fw);
}

/* A numeric address for host ("localhost" is 127.0.0.1). 0 or -EINVAL. */
static int follow_addr(const char *host, unsigned port, struct sockaddr_storage *sa)
{
	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	if (!uv_ip4_addr(host, (int)port, (struct sockaddr_in *)sa))
		return 0;
	if (!uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)sa))
		return 0;
	return -EINVAL;
}

static void follow_connect(struct repl_follow *fw)
{
	struct srv *s = srv_of(fw);
	struct sockaddr_storage sa;
	struct fconn *fc;

	if (follow_addr(fw->host, fw->port, &sa) || !(fc = calloc(1, sizeof(*fc)))) {
		follow_lost(fw, "bad address or out of memory");
		return;
	}
	uv_tcp_init(&s->loop, &fc->tcp);
	fc->tcp.data = fc;
	fc->creq.data = fc;
	fc->fw = fw;
	fw->fc = fc;
	fw->state = F_CONNECTING;
	fw->last_io_ms = uv_now(&s->loop);
	if (uv_tcp_connect(&fc->creq, &fc->tcp, (struct sockaddr *)&sa, fconn_on_connect))
		follow_lost(fw, "connect failed");
}

static void follow_retry_cb(uv_timer_t *t)
{
	struct repl_follow *fw = t->data;

	follow_connect(fw);
}

static void follow_on_timer_close(uv_handle_t *h)
{
	free(h->data);
}

int repl_follow_start(struct repl *r, const char *host, unsigned port)
{
	struct srv *s = r->srv;
	struct sockaddr_storage sa;
	struct repl_follow *fw;

	if (follow_addr(host, port, &sa))
		return -EINVAL;
	repl_follow_stop(r);
	fw = calloc(1, sizeof(*fw));
	if (!fw)
		return -ENOMEM;
	fw->r = r;
	snprintf(fw->host, sizeof(fw->host), "%s", host);
	fw->port = port;
	uv_timer_init(&s->loop, &fw->retry);
	fw->retry.data = fw;
	r->follow = fw;
	srv_log(SRV_LOG_NOTICE, "replication: following %s:%u", host, port);
	follow_connect(fw);
	return 0;
}

void repl_follow_stop(struct repl *r)
{
	struct repl_follow *fw = r->follow;

	if (!fw)
		return;
	if (fw->fc) {
		fw->fc->fw = NULL;
		uv_close((uv_handle_t *)&fw->fc->tcp, fconn_on_close);
	}
	journal_follow_abort(r->srv);
	r->follow = NULL;
	uv_close((uv_handle_t *)&fw->retry, follow_on_timer_close);
}

bool repl_follow_is(const struct repl *r, const char *host, unsigned port)
{
	return r->follow && r->follow->port == port && !strcasecmp(r->follow->host, host);
}

void repl_follow_tick(struct repl *r)
{
	struct repl_follow *fw = r->follow;
	uint64_t limit = (uint64_t)srv_of(fw)->cfg.repl_timeout * 1000;

	if (fw->fc && limit && uv_now(&srv_of(fw)->loop) - fw->last_io_ms > limit) {
		follow_lost(fw, "no byte for repl_timeout");
		return;
	}
	if (fw->state == F_CONNECTED)
		follow_send_ack(fw);
}

void repl_follow_flushed(struct repl *r)
{
	struct repl_follow *fw = r->follow;

	/* What was applied before the log's write of this turn is in this daemon's log, unless
	 * the log cannot write (then nothing more is acknowledged until it can). */
	if (fw->state == F_CONNECTED && !srv_of(fw)->ctx.log_failed) {
		fw->written = fw->offset;
		if (fw->ack_now)
			follow_send_ack(fw);
	}
}

uint64_t repl_follow_offset(const struct repl *r)
{
	return r->follow->offset;
}

void repl_follow_info(const struct repl *r, struct proto_buf *b)
{
	const struct repl_follow *fw = r->follow;
	uint64_t now = uv_now(&r->srv->loop);
	bool up = fw->state == F_CONNECTED;

	proto_buf_append_fmt(b,
			     "role:slave\r\nmaster_host:%s\r\nmaster_port:%u\r\n"
			     "master_link_status:%s\r\nmaster_last_io_seconds_ago:%d\r\n"
			     "master_sync_in_progress:%d\r\nslave_read_repl_offset:%" PRIu64
			     "\r\nslave_repl_offset:%" PRIu64 "\r\n",
			     fw->host, fw->port, up ? "up" : "down",
			     up ? (int)((now - fw->last_io_ms) / 1000) : -1,
			     fw->state == F_TRANSFER, fw->offset, fw->offset);
	/* As Redis: -1 until a link was up and then lost. */
	if (!up)
		proto_buf_append_fmt(b, "master_link_down_since_seconds:%lld\r\n",
				     fw->down_since_ms ? (long long)(now - fw->down_since_ms) / 1000
						       : -1LL);
	proto_buf_append_fmt(b, "slave_priority:%u\r\nslave_read_only:1\r\nreplica_announced:1\r\n",
			     (unsigned)srv_of(fw)->cfg.replica_priority);
}

void repl_follow_role(const struct repl *r, struct proto_buf *out)
{
	static const char *const state[] = {"connect", "connecting", "handshake", "sync",
					    "connected"};
	const struct repl_follow *fw = r->follow;

	proto_resp_array(out, 5);
	proto_resp_bulk_str(out, "slave");
	proto_resp_bulk_str(out, fw->host);
	proto_resp_integer(out, fw->port);
	proto_resp_bulk_str(out, state[fw->state]);
	/* As Redis 7.0: -1 until the sync is done (it has no primary client before). */
	proto_resp_integer(out, fw->state == F_CONNECTED ? (int64_t)fw->offset : -1);
}
