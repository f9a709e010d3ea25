/* SPDX-License-Identifier: MIT */
/*
 * Publish/subscribe and MONITOR over the text/RESP connections: the command layer's push,
 * monitor and monitor_feed hooks (proto/command.h). A push (a message, a keyspace event, a
 * MONITOR line) to the connection whose command is running goes straight into its replies,
 * before that command's own reply, as Redis sends a keyspace event before the reply of the
 * command that caused it; any other connection keeps it in its own pending buffer, which an
 * idle handle (or its next flush) appends to its replies once nothing is being written from
 * them and no reply is half sent. A push that tells of a change waits for the log as the
 * change's own reply does.
 *
 * A slow subscriber is bounded as any client is: once its unsent output passes
 * max_output_bytes, or the buffers of all connections pass max_client_memory, it is closed
 * (Redis's client-output-buffer-limit for pubsub clients closes it the same way), after the
 * publishing command is done: nobody leaves a channel while a message is being delivered.
 */
#include "server/server_impl.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <sys/time.h>

#include "server/log.h"
#include "proto/pubsub.h"

static struct srv_conn *conn_of(struct cmd_session *s)
{
	return (struct srv_conn *)(void *)((char *)s - offsetof(struct srv_conn, sess));
}

static void conn_on_push(uv_idle_t *h)
{
	struct srv *s = h->data;
	struct srv_conn *c;

	uv_idle_stop(h);
	while ((c = LIST_FIRST(&s->pushed))) {
		LIST_REMOVE(c, push_link);
		c->push_queued = false;
		if (c->push_over) {
			srv_log(SRV_LOG_INFO,
				"client %" PRIu64 " (%s): unsent output passed max_output_bytes "
				"(%" PRIu64 ") or max_client_memory; closing",
				c->id, c->peer, s->cfg.max_output_bytes);
			conn_close(c);
			continue;
		}
		conn_flush(c);
	}
}

int conn_push_init(struct srv *s)
{
	int rc = uv_idle_init(&s->loop, &s->push_idle);

	s->push_idle.data = s;
	return rc;
}

static void conn_push_queue(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (c->push_queued)
		return;
	c->push_queued = true;
	LIST_INSERT_HEAD(&s->pushed, c, push_link);
	uv_idle_start(&s->push_idle, conn_on_push);
}

/* Whether c holds more than a slow client may: it is then closed (conn_on_push()). */
static bool conn_push_over(struct srv_conn *c)
{
	const struct srv *s = c->srv;

	return c->push.failed || c->out.len + c->push.len > s->cfg.max_output_bytes ||
	       (s->cfg.max_client_memory && s->client_mem > s->cfg.max_client_memory);
}

static void conn_push(struct srv_conn *c, const char *frame, size_t len, uint64_t lsn)
{
	if (c->state != CONN_OPEN || c->push_over || c->sess.close_after)
		return;
	if (c == c->srv->running && !c->writing) {
		/* Before its command's reply, which is held with it if it must wait. */
		proto_buf_append(&c->out, frame, len);
		conn_account(c);
		return;
	}
	proto_buf_append(&c->push, frame, len);
	if (lsn > c->push_lsn)
		c->push_lsn = lsn;
	conn_account(c);
	if (conn_push_over(c)) {
		c->push_over = true;
		proto_buf_free(&c->push);
		conn_account(c);
	}
	conn_push_queue(c);
}

void conn_push_hook(void *arg, struct cmd_session *to, const char *frame, size_t len, uint64_t lsn)
{
	(void)arg;
	conn_push(conn_of(to), frame, len, lsn);
}

void conn_push_merge(struct srv_conn *c)
{
	size_t start = c->out.len;

	if (!c->push.len || c->writing || c->part)
		return;
	proto_buf_append(&c->out, c->push.data, c->push.len);
	if (c->push_lsn > c->srv->ctx.durable_lsn)
		conn_hold(c, start, c->push_lsn);
	if (c->push.cap > SRV_KEEP_BYTES)
		proto_buf_free(&c->push);
	else
		proto_buf_reset(&c->push);
	c->push_lsn = 0;
	conn_account(c);
}

void conn_monitor_hook(void *arg, struct cmd_session *sess, bool on)
{
	struct srv *s = arg;
	struct srv_conn *c = conn_of(sess);

	if (on == sess->monitor)
		return;
	sess->monitor = on;
	if (on) {
		LIST_INSERT_HEAD(&s->monitors, c, mon_link);
		s->ctx.monitors++;
	} else {
		LIST_REMOVE(c, mon_link);
		s->ctx.monitors--;
	}
}

void conn_monitor_feed(void *arg, const struct cmd_session *from, size_t argc,
		       const char *const *argv, const size_t *argvlen)
{
	struct srv *s = arg;
	const struct srv_conn *src = conn_of((struct cmd_session *)from);
	struct proto_buf line;
	struct timeval tv;
	struct srv_conn *c, *next;

	gettimeofday(&tv, NULL);
	proto_buf_init(&line);
	pubsub_monitor_line(&line, (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec,
			    strcmp(src->peer, "?") ? src->peer : "?:0", argc, argv, argvlen);
	for (c = LIST_FIRST(&s->monitors); !line.failed && c; c = next) {
		next = LIST_NEXT(c, mon_link);
		conn_push(c, line.data, line.len, 0);
	}
	proto_buf_free(&line);
}

void conn_push_forget(struct srv_conn *c)
{
	if (c->push_queued) {
		LIST_REMOVE(c, push_link);
		c->push_queued = false;
	}
	conn_monitor_hook(c->srv, &c->sess, false);
	pubsub_session_end(&c->sess);
}
