/* SPDX-License-Identifier: MIT */
/*
 * CLIENT LIST / INFO / KILL: the command layer's client hooks (command.h: client_get,
 * client_each, client_kill) over the text/RESP connections of conn.c. Each connection is
 * described as proto/client.h's struct cmd_client; the killing itself is conn_kill()'s.
 */
#include "server/server_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/log.h"
#include "proto/client.h"
#include "proto/pubsub.h"

/* Our end of c's socket as "host:port", found once (Redis's laddr; "?:0" if unknown). */
static const char *conn_local(struct srv_conn *c)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);

	if (c->local[0])
		return c->local;
	if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0)
		conn_format_addr((struct sockaddr *)&ss, c->local, sizeof(c->local));
	if (!c->local[0] || strcmp(c->local, "?") == 0)
		snprintf(c->local, sizeof(c->local), "?:0");
	return c->local;
}

/*
 * The facts of c (proto/client.h). Real: id, addresses, fd, name, protocol version, last RESP
 * command (none for a text-protocol client), age and idle (loop time, in seconds), whether it
 * is read or written, qbuf (its partial command; for self, while its command runs, that
 * command and the input after it, as Redis counts), argv-mem (the arguments of the command
 * running or being parsed), tot-mem (its buffers as counted against max_client_memory, and
 * its own structure). Approximated, with Redis's meaning kept: qbuf-free is the room left in
 * its own input buffer (0 while it has none: reads then go to the loop's shared buffer); rbs
 * the capacity of its one reply buffer; rbp the most replies it held at once this
 * SRV_PEAK_MS period; obl the replies not yet sent; omem that buffer's capacity while it
 * holds unsent replies, else 0.
 */
static void conn_client_fill(struct srv_conn *c, uint64_t self, struct cmd_client *cl)
{
	uint64_t now = conn_now(c->srv);
	size_t nargs = c->qbuf_run ? c->av.argc : c->rst.got;
	uint64_t argv_mem = 0;
	uv_os_fd_t fd;

	for (size_t i = 0; i < nargs; i++)
		argv_mem += c->av.argvlen[i];
	if (uv_fileno((uv_handle_t *)&c->tcp, &fd))
		fd = -1;
	*cl = (struct cmd_client){
	    .id = c->id,
	    .self = c->id == self,
	    .addr = strcmp(c->peer, "?") ? c->peer : "?:0",
	    .laddr = conn_local(c),
	    .fd = fd,
	    .name = c->sess.name,
	    .resp = c->sess.resp,
	    .cmd = c->sess.last_cmd,
	    .age = (now - c->created) / 1000,
	    .idle = (now - c->last_active) / 1000,
	    .closing = c->state != CONN_OPEN || c->sess.close_after,
	    .sub = pubsub_session_count(&c->sess, false),
	    .psub = pubsub_session_count(&c->sess, true),
	    .monitor = c->sess.monitor,
	    .reading = c->reading,
	    .writing = c->writing,
	    .qbuf = c->qbuf_run ? c->qbuf_run : c->in_len,
	    .qbuf_free = c->in_cap - c->in_len,
	    .argv_mem = argv_mem,
	    .rbs = c->out.cap,
	    .rbp = now - c->out_peak_at < SRV_PEAK_MS && c->out_peak > c->out.len ? c->out_peak
										  : c->out.len,
	    .obl = c->out.len,
	    .omem = c->out.len ? c->out.cap : 0,
	    .tot_mem = conn_held(c) + sizeof(*c),
	};
	cmd_multi_client(&c->sess, cl);
}

const struct cmd_client *conn_client_get(void *arg, uint64_t self, uint64_t id,
					 struct cmd_client *buf)
{
	struct srv *s = arg;
	struct srv_conn *c;

	LIST_FOREACH(c, &s->conns, link)
	{
		if (c->id == id && !c->ended) {
			conn_client_fill(c, self, buf);
			return buf;
		}
	}
	return NULL;
}

void conn_client_each(void *arg, uint64_t self,
		      void (*fn)(void *fnarg, const struct cmd_client *cl), void *fnarg)
{
	struct srv *s = arg;
	struct srv_conn *c, **v;
	struct cmd_client cl;
	size_t n = 0;

	/* The list is newest first; Redis lists oldest first. Without memory for the reversal,
	 * newest first. */
	v = s->nconns ? malloc(s->nconns * sizeof(*v)) : NULL;
	LIST_FOREACH(c, &s->conns, link)
	{
		if (c->ended)
			continue;
		if (v) {
			v[n++] = c;
			continue;
		}
		conn_client_fill(c, self, &cl);
		fn(fnarg, &cl);
	}
	while (n--) {
		conn_client_fill(v[n], self, &cl);
		fn(fnarg, &cl);
	}
	free(v);
}

size_t conn_client_kill(void *arg, uint64_t self,
			bool (*match)(void *marg, const struct cmd_client *cl), void *marg)
{
	struct srv *s = arg;
	struct srv_conn *c, *next;
	struct cmd_client cl;
	size_t n = 0;

	/* conn_kill() may close c at once (it leaves the list): the next one is taken first. */
	for (c = LIST_FIRST(&s->conns); c; c = next) {
		next = LIST_NEXT(c, link);
		if (c->ended)
			continue;
		conn_client_fill(c, self, &cl);
		if (!match(marg, &cl) || c->id == self)
			continue;
		srv_log(SRV_LOG_DEBUG, "client %" PRIu64 " (%s): killed by client %" PRIu64, c->id,
			c->peer, self);
		conn_kill(c);
		n++;
	}
	if (n)
		srv_log(SRV_LOG_INFO, "client %" PRIu64 ": CLIENT KILL closed %zu connection%s",
			self, n, n == 1 ? "" : "s");
	return n;
}
