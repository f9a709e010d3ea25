/* SPDX-License-Identifier: MIT */
/*
 * Transactions' state in the command layer (Redis's MULTI / EXEC / WATCH): a session's queue of
 * commands (copies of their arguments, within multi_max_commands and multi_max_bytes) and the
 * names it WATCHes. Every WATCH is also on the context's list, so a change to a filter
 * (cmd_watch_touch, called by the command layer) marks the sessions that WATCH its name, as
 * Redis's touchWatchedKey does. The RESP commands over this are in proto/resp_multi.c.
 */
#include "proto/command.h"
#include "proto/client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One WATCHed name of one session: on its session's list and on the context's. */
struct cmd_watch {
	struct cmd_watch *next, *prev; /* cmd_ctx.watches */
	struct cmd_watch *snext;       /* cmd_multi.watches */
	struct cmd_multi *m;
	size_t len;
	char name[];
};

/* One queued command: its arguments follow it (argv, argvlen, then the bytes). */
struct cmd_queued {
	size_t argc;
	const char **argv;
	size_t *argvlen;
};

struct cmd_multi {
	struct cmd_ctx *ctx;
	bool active;  /* MULTI was sent: commands are queued */
	bool flagged; /* a command was refused at queue time: EXEC aborts */
	bool dirty;   /* a WATCHed filter changed */
	bool running; /* EXEC runs the queue */
	struct cmd_watch *watches;
	struct cmd_queued **q;
	size_t n, cap, bytes;
	size_t mem; /* bytes the queued commands take (CLIENT LIST's multi-mem) */
};

static struct cmd_multi *multi_get(struct cmd_ctx *c, struct cmd_session *s)
{
	if (!s->multi) {
		s->multi = calloc(1, sizeof(*s->multi));
		if (s->multi)
			s->multi->ctx = c;
	}
	return s->multi;
}

int cmd_multi_begin(struct cmd_ctx *c, struct cmd_session *s)
{
	struct cmd_multi *m = multi_get(c, s);

	if (!m)
		return -ENOMEM;
	if (m->active)
		return -EEXIST;
	m->active = true;
	m->flagged = false;
	return 0;
}

bool cmd_multi_active(const struct cmd_session *s)
{
	return s->multi && s->multi->active;
}

int cmd_multi_queue(struct cmd_ctx *c, struct cmd_session *s, size_t argc, const char *const *argv,
		    const size_t *argvlen)
{
	struct cmd_multi *m = s->multi;
	size_t bytes = 0;

	for (size_t i = 0; i < argc; i++)
		bytes += argvlen[i];
	if (c->multi_max_commands && m->n >= c->multi_max_commands)
		return -E2BIG;
	if (c->multi_max_bytes && bytes > c->multi_max_bytes - m->bytes)
		return -EMSGSIZE;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 8;
		struct cmd_queued **q = realloc(m->q, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		m->q = q;
		m->cap = cap;
	}
	size_t head = sizeof(struct cmd_queued) + argc * (sizeof(char *) + sizeof(size_t));
	struct cmd_queued *e = malloc(head + bytes + argc);

	if (!e)
		return -ENOMEM;
	e->argc = argc;
	e->argv = (const char **)(void *)(e + 1);
	e->argvlen = (size_t *)(void *)(e->argv + argc);
	char *p = (char *)e + head;
	for (size_t i = 0; i < argc; i++) {
		memcpy(p, argv[i], argvlen[i]);
		p[argvlen[i]] = '\0'; /* as the parser leaves them */
		e->argv[i] = p;
		e->argvlen[i] = argvlen[i];
		p += argvlen[i] + 1;
	}
	m->q[m->n++] = e;
	m->bytes += bytes;
	m->mem += head + bytes + argc;
	return 0;
}

void cmd_multi_running(struct cmd_session *s)
{
	if (s->multi) {
		s->multi->active = false;
		s->multi->running = true;
	}
	/* As Redis's execCommand: the WATCHes have done their work once the queue runs. */
	cmd_unwatch(s);
}

void cmd_multi_flag(struct cmd_session *s)
{
	if (cmd_multi_active(s))
		s->multi->flagged = true;
}

bool cmd_multi_flagged(const struct cmd_session *s)
{
	return cmd_multi_active(s) && s->multi->flagged;
}

size_t cmd_multi_count(const struct cmd_session *s)
{
	return cmd_multi_active(s) ? s->multi->n : 0;
}

void cmd_multi_get(const struct cmd_session *s, size_t i, size_t *argc, const char *const **argv,
		   const size_t **argvlen)
{
	const struct cmd_queued *e = s->multi->q[i];

	*argc = e->argc;
	*argv = e->argv;
	*argvlen = e->argvlen;
}

void cmd_multi_discard(struct cmd_session *s)
{
	struct cmd_multi *m = s->multi;

	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->q[i]);
	free(m->q);
	m->q = NULL;
	m->n = m->cap = m->bytes = m->mem = 0;
	m->active = m->flagged = m->running = false;
	cmd_unwatch(s);
}

int cmd_watch(struct cmd_ctx *c, struct cmd_session *s, const char *name, size_t len)
{
	struct cmd_multi *m = multi_get(c, s);
	struct cmd_watch *w;

	if (!m)
		return -ENOMEM;
	for (w = m->watches; w; w = w->snext)
		if (w->len == len && memcmp(w->name, name, len) == 0)
			return 0;
	w = malloc(sizeof(*w) + len);
	if (!w)
		return -ENOMEM;
	memcpy(w->name, name, len);
	w->len = len;
	w->m = m;
	w->snext = m->watches;
	m->watches = w;
	w->prev = NULL;
	w->next = c->watches;
	if (c->watches)
		c->watches->prev = w;
	c->watches = w;
	return 0;
}

bool cmd_watch_changed(struct cmd_ctx *c, const struct cmd_session *s)
{
	const struct cmd_multi *m = s->multi;
	uint64_t now = cmd_now_ms();

	if (!m)
		return false;
	if (m->dirty)
		return true;
	/* As Redis 7.0's isWatchedKeyExpired: one whose time came since (a WATCH of an expired
	 * one dropped it first) is a change, even if nothing dropped it yet. */
	for (const struct cmd_watch *w = m->watches; w; w = w->snext) {
		const struct bf_filter *f = bf_registry_get(c->reg, w->name, w->len);

		if (f && cmd_expired(f, now))
			return true;
	}
	return false;
}

void cmd_unwatch(struct cmd_session *s)
{
	struct cmd_multi *m = s->multi;

	if (!m)
		return;
	while (m->watches) {
		struct cmd_watch *w = m->watches;

		m->watches = w->snext;
		if (w->prev)
			w->prev->next = w->next;
		else
			m->ctx->watches = w->next;
		if (w->next)
			w->next->prev = w->prev;
		free(w);
	}
	m->dirty = false;
}

void cmd_watch_touch_slow(struct cmd_ctx *c, const char *name, size_t len)
{
	for (struct cmd_watch *w = c->watches; w; w = w->next)
		if (w->len == len && memcmp(w->name, name, len) == 0)
			w->m->dirty = true;
}

void cmd_multi_client(const struct cmd_session *s, struct cmd_client *cl)
{
	const struct cmd_multi *m = s->multi;

	/* As Redis: a transaction's fields stay while EXEC runs it (its WATCHes are gone). */
	bool in = m && (m->active || m->running);

	cl->multi = in ? (long long)m->n : -1;
	cl->multi_mem = in ? m->mem : 0;
	cl->watch = 0;
	for (const struct cmd_watch *w = m ? m->watches : NULL; w; w = w->snext)
		cl->watch++;
	cl->dirty = m && m->dirty;
}

void cmd_multi_free(struct cmd_session *s)
{
	if (!s->multi)
		return;
	cmd_multi_discard(s);
	free(s->multi);
	s->multi = NULL;
}
