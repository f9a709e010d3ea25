/* SPDX-License-Identifier: MIT */
/*
 * The text/RESP connections (see server.h for their rules): accept under max_connections,
 * input buffers and the loop's shared read buffer, parsing and running every complete command
 * of a read, one write per batch of replies, max_output_bytes and max_client_memory, graceful
 * close, and the once-a-second timeouts.
 */
#include "server/server_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/log.h"
#include "server/repl.h"
#include "server/metrics.h"
#include "proto/pubsub.h"
#include "proto/resp_cmd.h"
#include "proto/text_cmd.h"

static void conn_read_start(struct srv_conn *c);
static void conn_unhold(struct srv_conn *c);
static void conn_feed(struct srv_conn *c, const char *data, size_t len, bool shared);
static void conn_on_yield(uv_idle_t *h);

uint64_t conn_now(const struct srv *s)
{
	return uv_now(&s->loop);
}

/* Rate-limited warning: true at most once per SRV_WARN_MS for each (at, warned) pair. */
static bool conn_warn_due(const struct srv *s, uint64_t *at, bool *warned)
{
	uint64_t now = conn_now(s);

	if (*warned && now - *at < SRV_WARN_MS)
		return false;
	*at = now;
	*warned = true;
	return true;
}

void conn_format_addr(const struct sockaddr *sa, char *out, size_t len)
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
static size_t conn_resp_max(const struct srv *s)
{
	size_t bulk =
	    s->cfg.max_bulk_bytes > SRV_RESP_FLOOR ? s->cfg.max_bulk_bytes : SRV_RESP_FLOOR;

	return bulk + 2 * PROTO_RESP_MAX_HEADER;
}

/* Bytes allocated for the connection's buffers: input, argument arrays, session scratch and
 * replies. */
size_t conn_held(const struct srv_conn *c)
{
	const struct cmd_session *ss = &c->sess;
	size_t n = c->in_cap + c->out.cap + c->push.cap + c->marks_cap * sizeof(*c->marks) +
		   pubsub_session_bytes(&c->sess);

	if (c->listed)
		n += proto_argv_bytes(&c->av) +
		     ss->scratch_cap *
			 (sizeof(*ss->keys) + sizeof(*ss->lens) + sizeof(*ss->results));
	return n;
}

/* Bring srv->client_mem up to date with what c holds now. */
void conn_account(struct srv_conn *c)
{
	size_t now = conn_held(c);

	c->srv->client_mem -= c->held;
	c->srv->client_mem += now;
	c->held = now;
}

/* Whether the buffers of all connections together are past max_client_memory. */
static bool conn_mem_over(const struct srv *s)
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
	/* The scratch arrays only live during one command; one run on in a later turn keeps
	 * its arguments and its answers so far. */
	if (c->sess.slice.active || c->again_len) {
		conn_account(c);
		return;
	}
	proto_resp_trim(&c->rst, &c->av, SRV_KEEP_ARGS);
	if (c->sess.scratch_cap > SRV_KEEP_ARGS)
		cmd_session_trim(&c->sess);
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
	free(c->marks);
	proto_buf_free(&c->out);
	proto_buf_free(&c->push);
	free(c);
}

/*
 * Close the connection: it leaves the list and frees its max_connections slot now (a client
 * accepted later in the same loop iteration may have it), the memory goes in the callback.
 * Safe while walking the list when the next entry was taken first.
 */
void conn_close(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	repl_conn_closed(s, c);
	conn_unhold(c);
	if (c->paused) {
		LIST_REMOVE(c, pause_link);
		c->paused = c->yielded = false;
	}
	if (c->listed) {
		conn_push_forget(c);
		LIST_REMOVE(c, link);
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
	c->linger_since = conn_now(c->srv);
	conn_read_start(c);
}

/* All replies are written and the connection ends: close at once if the client already shut
 * down its side, else shut down ours and linger so the last reply is not lost to a reset. */
static void conn_finish(struct srv_conn *c)
{
	c->ended = true;
	conn_push_forget(c); /* it hears no more: its channels go now, not after its linger */
	conn_read_stop(c);
	if (c->eof || c->srv->stopping) {
		conn_close(c);
		return;
	}
	c->sreq.data = c;
	if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, conn_on_shutdown))
		conn_close(c);
}

/* n bytes of replies were written: drop them (an emptied buffer is kept for reuse unless it
 * grew large); held replies move to the front with their marks. */
static void conn_out_sent(struct srv_conn *c, size_t n)
{
	if (n < c->out.len) {
		memmove(c->out.data, c->out.data + n, c->out.len - n);
		c->out.len -= n;
		for (size_t i = 0; i < c->nmarks; i++) {
			c->marks[i].start -= n;
			c->marks[i].end -= n;
		}
	} else if (c->out.cap > SRV_KEEP_BYTES) {
		proto_buf_free(&c->out);
	} else {
		proto_buf_reset(&c->out);
	}
	conn_account(c);
}

/* Whether the connection may be read: open, no write pending, not holding too much. */
static bool conn_may_read(const struct srv_conn *c)
{
	return c->state == CONN_OPEN && !c->writing && !c->paused &&
	       !(c->nmarks && c->out.len >= SRV_HOLD_BYTES) && c->nmarks < SRV_HOLD_MARKS &&
	       !uv_is_closing((const uv_handle_t *)&c->tcp);
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
	c->last_active = conn_now(c->srv);
	conn_out_sent(c, c->wlen);
	/* Replies held for the log may have been released meanwhile. */
	conn_flush(c);
	/* Commands that waited for the write run on in the next turn (conn_on_yield()). */
	if (c->yielded)
		uv_idle_start(&c->srv->yield_idle, conn_on_yield);
	if (!conn_may_read(c))
		return;
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

/* Leave srv->waiting (no reply is held any more). The marks' memory goes once it is large. */
static void conn_unhold(struct srv_conn *c)
{
	c->nmarks = 0;
	if (c->marks_cap > SRV_KEEP_MARKS) {
		free(c->marks);
		c->marks = NULL;
		c->marks_cap = 0;
	}
	if (c->waiting) {
		LIST_REMOVE(c, wait_link);
		c->waiting = false;
	}
}

/*
 * Hold the reply of the command just run, out[start, out.len), until lsn is durable (it also
 * follows every reply held before it). Adjacent held replies share a mark when they come from
 * the same batch (their records went to the log in one write, so they share its fate) or when
 * the mark already waits as long. Out of memory for a mark: c->out.failed (the connection is
 * closed, nothing of it sent).
 */
void conn_hold(struct srv_conn *c, size_t start, uint64_t lsn)
{
	struct srv_conn_mark *m = c->nmarks ? &c->marks[c->nmarks - 1] : NULL;

	/* A later part of one command's reply joins its first part's mark: one reply, which
	 * becomes one error if the log fails. */
	if (m && m->end == start && c->part) {
		m->end = c->out.len;
		if (lsn > m->lsn)
			m->lsn = lsn;
		return;
	}
	if (m && m->end == start && (m->start >= c->batch_start || m->lsn >= lsn)) {
		m->end = c->out.len;
		m->replies++;
		if (lsn > m->lsn)
			m->lsn = lsn;
		return;
	}
	if (c->nmarks == c->marks_cap) {
		size_t cap = c->marks_cap ? c->marks_cap * 2 : SRV_KEEP_MARKS;
		struct srv_conn_mark *p = realloc(c->marks, cap * sizeof(*p));

		if (!p) {
			c->out.failed = true;
			return;
		}
		c->marks = p;
		c->marks_cap = cap;
		conn_account(c);
	}
	c->marks[c->nmarks] = (struct srv_conn_mark){start, c->out.len, lsn, 1};
	if (c->nmarks++ == 0) {
		c->waiting = true;
		LIST_INSERT_HEAD(&c->srv->waiting, c, wait_link);
	}
}

/* After one command: hold its reply if it must wait for the log (cmd_ctx.wait_lsn). */
static void conn_hold_reply(struct srv_conn *c, size_t start)
{
	const struct cmd_ctx *ctx = &c->srv->ctx;

	if (ctx->wait_lsn > ctx->durable_lsn && c->out.len > start)
		conn_hold(c, start, ctx->wait_lsn);
}

/*
 * The log cannot write (cmd_ctx.log_failed): the records the held replies wait for are not
 * durable, nor will they be before the log recovers, so none of those replies may go. Each
 * becomes the protocol's log-failure error, the one a change gets while the log fails ("Internal
 * Error", -MISCONF), in its place, so the replies keep their order; replies not held are sent
 * as they are. What a held reply acknowledged stays unacknowledged: the change is in memory
 * and in the log's buffer, and is logged when the log recovers (a Bloom filter's add cannot
 * be taken back). A "present" held for such a change becomes the error too, never an
 * "absent". Marks the log made durable meanwhile go as they are. Only while no write is in
 * flight (conn_flush()). Out of memory: c->out.failed.
 */
static void conn_fail_held(struct srv_conn *c)
{
	struct srv *s = c->srv;
	uint64_t durable = s->ctx.durable_lsn;
	struct proto_buf err, out;
	size_t from = 0;

	proto_buf_init(&err);
	if (c->proto == CONN_RESP)
		resp_cmd_log_failed(&err);
	else
		text_cmd_log_failed(&err);
	proto_buf_init(&out);
	for (size_t i = 0; i < c->nmarks; i++) {
		const struct srv_conn_mark *m = &c->marks[i];

		if (m->lsn <= durable)
			continue;
		proto_buf_append(&out, c->out.data + from, m->start - from);
		for (size_t k = 0; k < m->replies; k++)
			proto_buf_append(&out, err.data, err.len);
		s->ctx.errors += m->replies;
		from = m->end;
	}
	proto_buf_append(&out, c->out.data + from, c->out.len - from);
	if (out.failed || err.failed) {
		proto_buf_free(&out);
		c->out.failed = true;
	} else {
		proto_buf_free(&c->out);
		c->out = out;
	}
	proto_buf_free(&err);
	conn_unhold(c);
	conn_account(c);
}

/* How many bytes of replies may be sent now: those before the first mark the log has not
 * made durable, or all of them once no mark is left. */
static size_t conn_sendable(struct srv_conn *c)
{
	uint64_t durable = c->srv->ctx.durable_lsn;
	size_t i = 0;

	if (c->nmarks && c->srv->ctx.log_failed)
		conn_fail_held(c);
	while (i < c->nmarks && c->marks[i].lsn <= durable)
		i++;
	if (i == c->nmarks) {
		conn_unhold(c);
		return c->out.len;
	}
	memmove(c->marks, c->marks + i, (c->nmarks - i) * sizeof(c->marks[0]));
	c->nmarks -= i;
	return c->marks[0].start;
}

/* Note the replies held now in the peak of the current SRV_PEAK_MS period (CLIENT LIST's
 * rbp), starting a new period if that one is over. */
static void conn_note_peak(struct srv_conn *c)
{
	uint64_t now = conn_now(c->srv);

	if (now - c->out_peak_at >= SRV_PEAK_MS) {
		c->out_peak = 0;
		c->out_peak_at = now;
	}
	if (c->out.len > c->out_peak)
		c->out_peak = c->out.len;
}

/* Send the replies that may go (conn_sendable()): as much as the socket takes now, the rest
 * with one uv_write(), during which the connection is not read. A draining connection ends
 * once everything is sent. */
void conn_flush(struct srv_conn *c)
{
	uv_stream_t *st = (uv_stream_t *)&c->tcp;
	uv_buf_t b;
	size_t len;
	int n;

	if (c->writing || uv_is_closing((uv_handle_t *)st))
		return;
	conn_push_merge(c);
	if (c->out.failed) {
		srv_log(SRV_LOG_ERR, "client %" PRIu64 " (%s): out of memory for replies; closing",
			c->id, c->peer);
		conn_close(c);
		return;
	}
	conn_note_peak(c);
	len = conn_sendable(c);
	if (c->out.failed) {
		srv_log(SRV_LOG_ERR, "client %" PRIu64 " (%s): out of memory for replies; closing",
			c->id, c->peer);
		conn_close(c);
		return;
	}
	if (len == 0) {
		if (c->state == CONN_DRAIN && c->out.len == 0)
			conn_finish(c);
		return;
	}
	b.base = c->out.data;
	b.len = len;
	c->srv->bytes_out += b.len;
	n = uv_try_write(st, &b, 1);
	if (n >= 0 && (size_t)n == len) {
		c->last_active = conn_now(c->srv);
		conn_out_sent(c, len);
		if (c->state == CONN_DRAIN && c->out.len == 0)
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
	b.len = len - (size_t)n;
	c->wlen = len;
	c->wreq.data = c;
	if (uv_write(&c->wreq, st, &b, 1, conn_on_write)) {
		conn_close(c);
		return;
	}
	c->writing = true;
	c->write_left = b.len;
	c->write_acked = 0;
	conn_out_moved(c);
	c->write_progress = conn_now(c->srv);
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
	if (conn_mem_over(c->srv))
		conn_mem_refuse(c);
}

/* Too much output for one batch (replies held for the log before it do not count): the
 * client is not keeping up (or asked for too much). */
static bool conn_out_over(struct srv_conn *c)
{
	if ((uint64_t)(c->out.len - c->batch_start) <= c->srv->cfg.max_output_bytes)
		return false;
	srv_log(SRV_LOG_INFO,
		"client %" PRIu64 " (%s): replies passed max_output_bytes (%" PRIu64 "); closing",
		c->id, c->peer, c->srv->cfg.max_output_bytes);
	return true;
}

/*
 * Has the connection being fed used up its slice of the loop's turn (SRV_SLICE_NS)? Only if the
 * rest of its input, `rest` bytes at data, can wait in its own buffer within max_client_memory
 * (input read into the shared buffer is copied there).
 */
static bool conn_slice_over(const struct srv_conn *c, const char *data, size_t rest)
{
	const struct srv *s = c->srv;
	uint64_t max = s->cfg.max_client_memory;
	size_t want = rest + SRV_READ_MIN;

	if (uv_hrtime() - c->slice_t0 < SRV_SLICE_NS)
		return false;
	return data != s->rbuf || !max || c->in_cap >= want ||
	       s->client_mem - c->in_cap + want <= max;
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

		if (*done && conn_slice_over(c, data + off, len - off)) {
			c->yielded = true;
			break;
		}
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
		if (linelen == 0) {
			off += (size_t)n; /* a blank line: ignored, as RESP ignores it */
			continue;
		}
		size_t start = c->out.len;

		s->ctx.paging = NULL;
		s->ctx.write_wait = false;
		s->ctx.wait_lsn = 0;
		s->running = c;
		text_cmd_exec(&s->ctx, &c->sess, line, linelen, &c->out);
		s->running = NULL;
		if (s->ctx.paging || s->ctx.write_wait) {
			/* The line stays unread: run again once loaded, or written. */
			c->paused = true;
			break;
		}
		if (s->ctx.again) {
			/* Replied in part: the line stays unread, run on in the next turn. */
			s->ctx.again = false;
			conn_hold_reply(c, start);
			c->part = true;
			c->yielded = true;
			break;
		}
		conn_hold_reply(c, start);
		c->part = false;
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

/*
 * Point the arguments of the command run on (again_len) into its input at cmd: from their
 * offsets, SRV_POINT_STEP a call, from the first again if the input moved since. True while
 * some are left (the connection yields; the next turn goes on).
 */
static bool conn_point(struct srv_conn *c, const char *cmd)
{
	struct proto_argv *av = &c->av;
	size_t end;

	if (c->again_base != cmd) {
		c->again_base = cmd;
		c->pointed = 0;
	}
	end = av->argc - c->pointed > SRV_POINT_STEP ? c->pointed + SRV_POINT_STEP : av->argc;
	for (size_t i = c->pointed; i < end; i++)
		av->argv[i] = cmd + av->argoff[i];
	c->pointed = end;
	return end < av->argc;
}

/*
 * The next RESP command at p[0, left): its length (> 0) with c->av set, 0 if it is incomplete,
 * or a negative errno (-EPROTO with *msg its reply). *yield: it waits for later turns (its
 * arguments' pointers are set SRV_POINT_STEP a turn), and 0 is returned.
 */
static ssize_t conn_resp_next(struct srv_conn *c, const char *p, size_t left,
			      const struct proto_limits *lim, const char **msg, bool *yield)
{
	ssize_t n;

	*yield = false;
	if (c->again_len && c->again_len <= left) {
		/* Run on: parsed already, its arguments are where they were from its first byte
		 * (a million-key command is not parsed 60 times), pointed at again only if the
		 * input moved, SRV_POINT_STEP of them a turn. */
		if (conn_point(c, p)) {
			*yield = true;
			return 0;
		}
		n = (ssize_t)c->again_len;
	} else {
		n = proto_resp_parse(&c->rst, p, left, lim, &c->av, msg);
		c->again_base = p;
		c->pointed = c->av.argc;
		if (n > 0 && c->av.argv_unset) {
			/* Its pointers are set in later turns, then it runs. */
			c->again_len = (size_t)n;
			c->again_base = NULL;
			*yield = true;
			return 0;
		}
	}
	c->again_len = 0;
	return n;
}

enum conn_ran {
	CONN_RAN_NEXT, /* replied: on to the next command */
	CONN_RAN_STOP, /* paused (a load, a write) or replied in part: stop this read here */
	CONN_RAN_FAIL, /* replied, but the connection must go (its output is over its bound) */
};

/* Run the command of n bytes parsed at p (the read's rest: left bytes). */
static enum conn_ran conn_resp_run(struct srv_conn *c, const char *p, size_t left, size_t n)
{
	struct srv *s = c->srv;
	size_t start = c->out.len;

	c->qbuf_run = left; /* for CLIENT LIST / INFO of itself */
	s->ctx.paging = NULL;
	s->ctx.write_wait = false;
	s->ctx.wait_lsn = 0;
	s->running = c;
	if (c->av.argc)
		resp_cmd_exec(&s->ctx, &c->sess, &c->av, &c->out);
	s->running = NULL;
	c->qbuf_run = 0;
	if (s->ctx.paging || s->ctx.write_wait) {
		c->paused = true; /* parsed again once loaded, or written */
		return CONN_RAN_STOP;
	}
	if (s->ctx.again) {
		/* Replied in part: run on in the next turn. An inline command (no offsets kept)
		 * is parsed again. */
		s->ctx.again = false;
		conn_hold_reply(c, start);
		c->part = true;
		if (p[0] == '*')
			c->again_len = n;
		c->yielded = true;
		return CONN_RAN_STOP;
	}
	conn_hold_reply(c, start);
	c->part = false;
	if (c->sess.close_after)
		c->state = CONN_DRAIN;
	if (conn_out_over(c))
		return CONN_RAN_FAIL;
	conn_mem_check(c);
	return CONN_RAN_NEXT;
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
		bool yield;
		ssize_t n;

		if (*done && conn_slice_over(c, data + off, len - off)) {
			c->yielded = true;
			break;
		}
		n = conn_resp_next(c, data + off, len - off, lim, &msg, &yield);
		if (yield) {
			c->yielded = true;
			break;
		}
		if (n > 0) {
			enum conn_ran r = conn_resp_run(c, data + off, len - off, (size_t)n);

			if (r == CONN_RAN_STOP)
				break;
			off += (size_t)n;
			*done = true;
			if (r == CONN_RAN_FAIL)
				return -1;
			continue;
		}
		if (n == 0) {
			if (proto_resp_need(&c->rst) > conn_resp_max(s)) {
				msg = "Protocol error: command too large";
				n = -EPROTO;
			} else {
				/* Incomplete: a huge command's rest is read in later turns once
				 * this one's slice is over (its parsing is the cost). */
				if (uv_hrtime() - c->slice_t0 >= SRV_SLICE_NS)
					c->yielded = true;
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
	if (buf->len > SRV_READ_PART)
		buf->len = SRV_READ_PART;
}

static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct srv_conn *c = st->data;
	struct srv *s = c->srv;
	const char *data;
	size_t len;
	bool shared;

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
		/* Replies still being written or held for the log go out first; the partial
		 * command is dropped. */
		if (nread == UV_EOF && (c->writing || c->nmarks)) {
			uv_read_stop(st);
			c->state = CONN_DRAIN;
			return;
		}
		conn_close(c);
		return;
	}

	c->last_active = conn_now(s);
	s->bytes_in += (uint64_t)nread;
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
		c->proto = conn_detect(data, len);
	conn_feed(c, data, len, shared);
}

/*
 * Run the commands in data[0, len) (the shared read buffer, or the connection's own input),
 * keep the partial command (or the one waiting for a load) in the connection's own buffer,
 * then hold or send the replies.
 */
static void conn_feed(struct srv_conn *c, const char *data, size_t len, bool shared)
{
	struct srv *s = c->srv;
	size_t used = 0, tail, held0 = c->held;
	bool done = false;
	int rc;

	c->batch_start = c->out.len;
	/* One slice per turn of the loop, however many reads libuv makes in it. */
	if (c->slice_turn != s->turn) {
		c->slice_turn = s->turn;
		c->slice_t0 = uv_hrtime();
	}
	if (c->proto == CONN_UNKNOWN) {
		/* The first word goes on in the next read: keep it, drop the blank lines before. */
		used = conn_blank_prefix(data, len);
		rc = 0;
	} else if (c->proto == CONN_RESP)
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
	if (c->state == CONN_OPEN && c->held > held0 && conn_mem_over(s)) {
		conn_mem_refuse(c);
		conn_in_release(c);
	}

	/* request_timeout counts from the first byte of the command still incomplete. */
	if (!tail && !c->text_skip)
		c->partial_since = 0;
	else if (done || !c->partial_since)
		c->partial_since = c->last_active;

	/* Replies acknowledging a change (or owing a "present" to one) were held as their
	 * commands ran (conn_hold_reply()): they go out once the log has it, and the replies
	 * after them wait behind them; the connection is read on meanwhile. */
	conn_flush(c);
	if (c->state != CONN_OPEN) {
		c->paused = c->yielded = false;
	} else if (c->yielded) {
		c->paused = true;
		LIST_INSERT_HEAD(&s->yielded, c, pause_link);
		uv_idle_start(&s->yield_idle, conn_on_yield);
		s->yields++;
	} else if (c->paused) {
		LIST_INSERT_HEAD(&s->paused, c, pause_link);
	}
	if (!conn_may_read(c))
		conn_read_stop(c);
}

/* A paused connection (slice over, or waiting for a load) runs on: its input from the waiting
 * command on is in its own buffer. */
static void conn_run_on(struct srv_conn *c)
{
	c->paused = c->yielded = false;
	conn_feed(c, c->in, c->in_len, false);
	if (!c->paused && !c->reading && conn_may_read(c))
		conn_read_start(c);
}

/* Each connection whose slice ran out in the last turn runs on from where it stopped. */
static void conn_on_yield(uv_idle_t *h)
{
	struct srv *s = h->data;
	LIST_HEAD(, srv_conn) todo = LIST_HEAD_INITIALIZER(todo);
	struct srv_conn *c;

	uv_idle_stop(h);
	while ((c = LIST_FIRST(&s->yielded))) {
		LIST_REMOVE(c, pause_link);
		LIST_INSERT_HEAD(&todo, c, pause_link);
	}
	while ((c = LIST_FIRST(&todo))) {
		LIST_REMOVE(c, pause_link);
		if (c->writing) {
			/* Its replies are being written from out, which a command's reply may move:
			 * it runs on once the write has ended (conn_on_write() starts this again).
			 */
			LIST_INSERT_HEAD(&s->yielded, c, pause_link);
			continue;
		}
		conn_run_on(c);
	}
}

/* Replication (repl_primary.c): the open connection of this id, or NULL. */
struct srv_conn *conn_by_id(struct srv *s, uint64_t id)
{
	struct srv_conn *c;

	LIST_FOREACH(c, &s->conns, link)
	if (c->id == id && c->state == CONN_OPEN)
		return c;
	return NULL;
}

/* Replication: append n bytes to what c sends and send them. -EBUSY while a write is in
 * flight (nothing is appended then: the write covers the buffer). */
int conn_send(struct srv_conn *c, const void *p, size_t n)
{
	if (c->writing)
		return -EBUSY;
	proto_buf_append(&c->out, p, n);
	conn_account(c);
	conn_flush(c);
	return 0;
}

void conn_resume_paused(struct srv *s)
{
	LIST_HEAD(, srv_conn) todo = LIST_HEAD_INITIALIZER(todo);
	struct srv_conn *c;

	/* Each once: one that waits again (for another filter) goes back in s->paused. */
	while ((c = LIST_FIRST(&s->paused))) {
		LIST_REMOVE(c, pause_link);
		LIST_INSERT_HEAD(&todo, c, pause_link);
	}
	while ((c = LIST_FIRST(&todo))) {
		LIST_REMOVE(c, pause_link);
		if (c->writing) {
			/* As in conn_on_yield(): not while its replies are being written. */
			c->yielded = true;
			LIST_INSERT_HEAD(&s->yielded, c, pause_link);
			continue;
		}
		conn_run_on(c);
	}
}

void conn_release_waiting(struct srv *s)
{
	struct srv_conn *c, *next;

	for (c = LIST_FIRST(&s->waiting); c; c = next) {
		next = LIST_NEXT(c, wait_link);
		/* A failed log releases every held reply (as its error: conn_fail_held()). */
		if ((c->marks[0].lsn > s->ctx.durable_lsn && !s->ctx.log_failed) || c->writing)
			continue;
		conn_flush(c);
		if (!c->reading && conn_may_read(c))
			conn_read_start(c);
	}
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

void conn_on_accept(uv_stream_t *server, int status);

static void conn_on_reject_closed(uv_handle_t *h)
{
	struct srv *s = h->data;
	uv_stream_t *server = s->accept_stalled;

	s->reject_busy = false;
	s->accept_stalled = NULL;
	if (server && !s->stopping && !uv_is_closing((uv_handle_t *)server))
		conn_on_accept(server, 0);
}

/* No memory for a connection: accept it into the spare handle and close it, so the listener
 * does not stall (libuv stops watching a listener until its pending connection is taken). */
static void conn_reject_nomem(struct srv *s, uv_stream_t *server)
{
	if (conn_warn_due(s, &s->warned_accept_at, &s->warned_accept))
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
	uv_close((uv_handle_t *)&s->reject, conn_on_reject_closed);
}

void conn_on_accept(uv_stream_t *server, int status)
{
	struct srv *s = server->data;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct srv_conn *c;
	int rc;

	if (status < 0) {
		if (conn_warn_due(s, &s->warned_accept_at, &s->warned_accept))
			srv_log(SRV_LOG_WARNING, "accept: %s", uv_strerror(status));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		conn_reject_nomem(s, server);
		return;
	}
	c->srv = s;
	rc = uv_tcp_init(&s->loop, &c->tcp);
	if (rc) {
		free(c);
		conn_reject_nomem(s, server);
		return;
	}
	c->tcp.data = c;
	rc = uv_accept(server, (uv_stream_t *)&c->tcp);
	if (rc) {
		if (conn_warn_due(s, &s->warned_accept_at, &s->warned_accept))
			srv_log(SRV_LOG_WARNING, "accept: %s", uv_strerror(rc));
		conn_close(c);
		return;
	}
	if (s->stopping || s->nconns >= s->cfg.max_connections) {
		/* The protocol is not known yet, so no error reply: just close. */
		s->conns_rejected++;
		if (conn_warn_due(s, &s->warned_full_at, &s->warned_full))
			srv_log(SRV_LOG_WARNING,
				"max_connections (%" PRIu32 ") reached; refusing new connections",
				s->cfg.max_connections);
		conn_close(c);
		return;
	}

	c->id = ++s->next_id;
	c->listed = true;
	LIST_INSERT_HEAD(&s->conns, c, link);
	s->nconns++;
	proto_resp_state_init(&c->rst);
	proto_argv_init(&c->av);
	proto_buf_init(&c->out);
	cmd_session_init(&c->sess, c->id);
	c->last_active = conn_now(s);
	c->created = c->last_active;
	c->out_peak_at = c->last_active;
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0)
		conn_format_addr((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "?");
	uv_tcp_nodelay(&c->tcp, 1);
	uv_tcp_keepalive(&c->tcp, 1, 300);
	srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s) connected", c->id, c->peer);
	conn_read_start(c);
}

/* Once a second: end lingering closes, stalled writes, partial commands held too long and
 * idle connections. */
void conn_sweep(struct srv *s)
{
	const struct config *cfg = &s->cfg;
	uint64_t now = conn_now(s);
	uint64_t idle_ms = (uint64_t)cfg->idle_timeout * 1000;
	uint64_t req_ms = (uint64_t)cfg->request_timeout * 1000;
	/* A client not reading its replies gets request_timeout (else idle_timeout) to resume. */
	uint64_t stall_ms = req_ms ? req_ms : idle_ms;
	struct srv_conn *c, *next;

	for (c = LIST_FIRST(&s->conns); c; c = next) {
		next = LIST_NEXT(c, link);
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
		/* A subscriber or a monitor only listens, and a replica's link is silent while its
		 * image is written by a child: never idle, as in Redis (repl_timeout applies). */
		if (idle_ms && !c->writing && now - c->last_active >= idle_ms && !c->sess.pubsub &&
		    !c->sess.monitor && !c->repl_link) {
			srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): idle; closing", c->id,
				c->peer);
			conn_close(c);
		}
	}
}

/*
 * CLIENT KILL of c by another connection. As Redis's freeClient, what c has not been sent
 * and its partial command are dropped; then c ends as any connection ends (conn_finish(): our
 * side shut down, its input dropped until its EOF or SRV_LINGER_MS), so the client reads EOF
 * rather than a reset, and c is no longer shown. One draining, or with a write in flight
 * (whose buffer libuv holds until the callback), is closed at once.
 */
void conn_kill(struct srv_conn *c)
{
	if (c->writing || c->state != CONN_OPEN) {
		conn_close(c);
		return;
	}
	conn_unhold(c);
	proto_buf_free(&c->out);
	conn_in_release(c);
	c->text_skip = false;
	c->partial_since = 0;
	c->state = CONN_DRAIN;
	conn_finish(c);
}
