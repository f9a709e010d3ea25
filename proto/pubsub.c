/* SPDX-License-Identifier: MIT */
/*
 * The publish/subscribe registry (see pubsub.h): channels and patterns, each an entry of a
 * hash table with the sessions subscribed to it in subscription order; each session's own
 * list of its entries. Facts from Redis 7.0.15's pubsub.c and notify.c, not its code: a
 * subscription count is channels plus patterns; NUMPAT counts distinct patterns; a message
 * goes to channel subscribers first, then to each matching pattern's.
 */
#include "proto/pubsub.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "proto/command.h"
#include "proto/glob.h"
#include "proto/resp.h"

/* A channel or a pattern, with its subscribers. */
struct ps_entry {
	struct ps_entry *hnext;	      /* its hash bucket's chain */
	struct ps_entry *prev, *next; /* every entry of its table, oldest first */
	struct glob *g;		      /* a pattern's compiled form; NULL for a channel */
	struct cmd_session **subs;
	size_t nsubs, cap;
	size_t len;
	char name[];
};

struct ps_table {
	struct ps_entry **b;
	size_t nb, n;
	struct ps_entry *first, *last;
};

struct pubsub {
	struct ps_table chans, pats;
	struct proto_buf frame[2]; /* a message as RESP2 and as RESP3 */
};

/* One session's subscriptions (cmd_session.pubsub), each kind oldest first. */
struct pubsub_session {
	struct pubsub *ps;
	struct ps_entry **e[2]; /* [0] channels, [1] patterns */
	size_t n[2], cap[2];
	size_t bytes; /* what its subscriptions cost (ps_cost), its arrays too */
};

/* What one subscription to e costs its session, as charged against max_client_memory: all of
 * e (shared entries are charged to each subscriber: a bound, not a share), its name, a
 * compiled pattern's tokens (at most 40 bytes a pattern byte: glob.h), and two pointers. */
static size_t ps_cost(const struct ps_entry *e)
{
	return sizeof(*e) + e->len * (e->g ? 41 : 1) + 2 * sizeof(void *);
}

/* ---- notify-keyspace-events ---- */

int pubsub_notify_parse(const char *s, size_t n)
{
	static const struct {
		char c;
		int bit;
	} map[] = {
	    {'A', PUBSUB_NOTIFY_ALL},	   {'g', PUBSUB_NOTIFY_GENERIC},
	    {'$', PUBSUB_NOTIFY_STRING},   {'l', PUBSUB_NOTIFY_LIST},
	    {'s', PUBSUB_NOTIFY_SET},	   {'h', PUBSUB_NOTIFY_HASH},
	    {'z', PUBSUB_NOTIFY_ZSET},	   {'x', PUBSUB_NOTIFY_EXPIRED},
	    {'e', PUBSUB_NOTIFY_EVICTED},  {'K', PUBSUB_NOTIFY_KEYSPACE},
	    {'E', PUBSUB_NOTIFY_KEYEVENT}, {'t', PUBSUB_NOTIFY_STREAM},
	    {'m', PUBSUB_NOTIFY_KEY_MISS}, {'d', PUBSUB_NOTIFY_MODULE},
	    {'n', PUBSUB_NOTIFY_NEW},
	};
	int flags = 0;

	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		while (k < sizeof(map) / sizeof(map[0]) && map[k].c != s[i])
			k++;
		if (k == sizeof(map) / sizeof(map[0]))
			return -1;
		flags |= map[k].bit;
	}
	return flags;
}

size_t pubsub_notify_format(int flags, char out[16])
{
	static const struct {
		char c;
		int bit;
	} classes[] = {
	    {'g', PUBSUB_NOTIFY_GENERIC}, {'$', PUBSUB_NOTIFY_STRING},	{'l', PUBSUB_NOTIFY_LIST},
	    {'s', PUBSUB_NOTIFY_SET},	  {'h', PUBSUB_NOTIFY_HASH},	{'z', PUBSUB_NOTIFY_ZSET},
	    {'x', PUBSUB_NOTIFY_EXPIRED}, {'e', PUBSUB_NOTIFY_EVICTED}, {'t', PUBSUB_NOTIFY_STREAM},
	    {'d', PUBSUB_NOTIFY_MODULE},  {'n', PUBSUB_NOTIFY_NEW},
	};
	size_t n = 0;

	if ((flags & PUBSUB_NOTIFY_ALL) == PUBSUB_NOTIFY_ALL) {
		out[n++] = 'A';
		/* Redis prints n only without A (its else branch): kept. */
	} else {
		for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++)
			if (flags & classes[k].bit)
				out[n++] = classes[k].c;
	}
	if (flags & PUBSUB_NOTIFY_KEYSPACE)
		out[n++] = 'K';
	if (flags & PUBSUB_NOTIFY_KEYEVENT)
		out[n++] = 'E';
	if (flags & PUBSUB_NOTIFY_KEY_MISS)
		out[n++] = 'm';
	out[n] = '\0';
	return n;
}

/* ---- the tables ---- */

static uint64_t ps_hash(const char *p, size_t n)
{
	return XXH3_64bits(p, n);
}

static struct ps_entry *ps_find(const struct ps_table *t, const char *name, size_t len)
{
	struct ps_entry *e;

	if (!t->nb)
		return NULL;
	for (e = t->b[ps_hash(name, len) & (t->nb - 1)]; e; e = e->hnext)
		if (e->len == len && memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

/* Room for one more entry: the buckets double once there are as many entries. */
static int ps_grow(struct ps_table *t)
{
	size_t nb = t->nb ? t->nb * 2 : 16;
	struct ps_entry **b;

	if (t->n < t->nb)
		return 0;
	b = calloc(nb, sizeof(*b));
	if (!b)
		return t->nb ? 0 : -ENOMEM; /* a longer chain will do */
	for (struct ps_entry *e = t->first; e; e = e->next) {
		size_t i = ps_hash(e->name, e->len) & (nb - 1);

		e->hnext = b[i];
		b[i] = e;
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

static struct ps_entry *ps_add(struct ps_table *t, const char *name, size_t len, bool pattern)
{
	struct ps_entry *e;
	size_t i;

	if (ps_grow(t))
		return NULL;
	e = calloc(1, sizeof(*e) + len);
	if (!e)
		return NULL;
	if (pattern && glob_compile(name, len, false, &e->g)) {
		free(e);
		return NULL;
	}
	memcpy(e->name, name, len);
	e->len = len;
	i = ps_hash(name, len) & (t->nb - 1);
	e->hnext = t->b[i];
	t->b[i] = e;
	e->prev = t->last;
	if (t->last)
		t->last->next = e;
	else
		t->first = e;
	t->last = e;
	t->n++;
	return e;
}

static void ps_remove(struct ps_table *t, struct ps_entry *e)
{
	struct ps_entry **pp = &t->b[ps_hash(e->name, e->len) & (t->nb - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		t->first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		t->last = e->prev;
	t->n--;
	glob_free(e->g);
	free(e->subs);
	free(e);
}

/* Grow an array of pointers to hold one more. 0 or -ENOMEM. */
static int ps_room(void *arr, size_t n, size_t *cap)
{
	void ***a = arr;
	size_t ncap;
	void **p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 4;
	p = realloc(*a, ncap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	*a = p;
	*cap = ncap;
	return 0;
}

/* Remove the pointer p from a[0, *n), keeping the order. */
static void ps_drop_ptr(void **a, size_t *n, const void *p)
{
	size_t i = 0;

	while (i < *n && a[i] != p)
		i++;
	if (i == *n)
		return;
	memmove(a + i, a + i + 1, (*n - i - 1) * sizeof(*a));
	(*n)--;
}

int pubsub_new(struct pubsub **out)
{
	struct pubsub *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return -ENOMEM;
	proto_buf_init(&ps->frame[0]);
	proto_buf_init(&ps->frame[1]);
	*out = ps;
	return 0;
}

static void ps_table_end(struct ps_table *t)
{
	/* Every entry has a subscriber: ending its first one's session takes that one off
	 * every entry, and an entry with none left goes. */
	while (t->first)
		pubsub_session_end(t->first->subs[0]);
	free(t->b);
}

void pubsub_free(struct pubsub *ps)
{
	if (!ps)
		return;
	ps_table_end(&ps->chans);
	ps_table_end(&ps->pats);
	proto_buf_free(&ps->frame[0]);
	proto_buf_free(&ps->frame[1]);
	free(ps);
}

/* ---- subscriptions ---- */

static struct ps_table *ps_table_of(struct pubsub *ps, bool pattern)
{
	return pattern ? &ps->pats : &ps->chans;
}

/* A session left with no subscription holds nothing (cmd_session.pubsub NULL again). */
static void ps_session_idle(struct cmd_session *s)
{
	struct pubsub_session *me = s->pubsub;

	if (me->n[0] || me->n[1])
		return;
	free(me->e[0]);
	free(me->e[1]);
	free(me);
	s->pubsub = NULL;
}

int pubsub_subscribe(struct pubsub *ps, struct cmd_session *s, bool pattern, const char *name,
		     size_t len)
{
	struct ps_table *t = ps_table_of(ps, pattern);
	struct ps_entry *e = ps_find(t, name, len);
	struct pubsub_session *me = s->pubsub;
	bool fresh = false;

	if (e)
		for (size_t i = 0; i < e->nsubs; i++)
			if (e->subs[i] == s)
				return 0;
	if (pattern && len > GLOB_MAX_PATTERN)
		return -E2BIG;
	if (!me) {
		me = calloc(1, sizeof(*me));
		if (!me)
			return -ENOMEM;
		me->ps = ps;
		s->pubsub = me;
	}
	if (ps_room(&me->e[pattern], me->n[pattern], &me->cap[pattern]))
		goto nomem;
	if (!e) {
		e = ps_add(t, name, len, pattern);
		if (!e)
			goto nomem;
		fresh = true;
	}
	if (ps_room(&e->subs, e->nsubs, &e->cap)) {
		if (fresh)
			ps_remove(t, e);
		goto nomem;
	}
	e->subs[e->nsubs++] = s;
	me->e[pattern][me->n[pattern]++] = e;
	me->bytes += ps_cost(e);
	return 1;
nomem:
	ps_session_idle(s);
	return -ENOMEM;
}

/* s leaves entry e of table t (e is one of s's). */
static void ps_leave(struct ps_table *t, struct cmd_session *s, struct ps_entry *e)
{
	s->pubsub->bytes -= ps_cost(e);
	ps_drop_ptr((void **)e->subs, &e->nsubs, s);
	if (!e->nsubs)
		ps_remove(t, e);
}

int pubsub_unsubscribe(struct pubsub *ps, struct cmd_session *s, bool pattern, const char *name,
		       size_t len)
{
	struct pubsub_session *me = s->pubsub;
	struct ps_table *t = ps_table_of(ps, pattern);
	struct ps_entry *e;

	if (!me || !(e = ps_find(t, name, len)))
		return 0;
	for (size_t i = 0; i < me->n[pattern]; i++) {
		if (me->e[pattern][i] == e) {
			memmove(me->e[pattern] + i, me->e[pattern] + i + 1,
				(me->n[pattern] - i - 1) * sizeof(e));
			me->n[pattern]--;
			ps_leave(t, s, e);
			ps_session_idle(s);
			return 1;
		}
	}
	return 0;
}

size_t pubsub_unsubscribe_all(struct cmd_session *s, bool pattern,
			      void (*fn)(void *arg, const char *name, size_t len, size_t left),
			      void *arg)
{
	struct pubsub_session *me = s->pubsub;
	size_t n, other;

	if (!me || !me->n[pattern])
		return 0;
	n = me->n[pattern];
	other = me->n[!pattern];
	for (size_t i = 0; i < n; i++) {
		struct ps_entry *e = me->e[pattern][i];

		/* The reply names it before it may be freed. */
		if (fn)
			fn(arg, e->name, e->len, other + n - i - 1);
		ps_leave(ps_table_of(me->ps, pattern), s, e);
	}
	me->n[pattern] = 0;
	ps_session_idle(s);
	return n;
}

void pubsub_session_end(struct cmd_session *s)
{
	struct pubsub_session *me = s->pubsub;

	if (!me)
		return;
	pubsub_unsubscribe_all(s, false, NULL, NULL);
	if (s->pubsub)
		pubsub_unsubscribe_all(s, true, NULL, NULL);
}

size_t pubsub_session_count(const struct cmd_session *s, bool pattern)
{
	return s->pubsub ? s->pubsub->n[pattern] : 0;
}

size_t pubsub_session_bytes(const struct cmd_session *s)
{
	const struct pubsub_session *me = s->pubsub;

	if (!me)
		return 0;
	return sizeof(*me) + (me->cap[0] + me->cap[1]) * sizeof(void *) + me->bytes;
}

/* ---- publishing ---- */

/* The frame of a message (pat NULL) or a pmessage, in ps->frame[0] (RESP2) and [1] (RESP3).
 * False if out of memory. */
static bool ps_frames(struct pubsub *ps, const struct ps_entry *pat, const char *ch, size_t clen,
		      const char *msg, size_t mlen)
{
	for (int v = 0; v < 2; v++) {
		struct proto_buf *b = &ps->frame[v];

		proto_buf_reset(b);
		b->failed = false;
		proto_buf_append_char(b, v ? '>' : '*');
		proto_buf_append_u64(b, pat ? 4 : 3);
		proto_buf_append(b, "\r\n", 2);
		if (pat) {
			proto_resp_bulk(b, "pmessage", 8);
			proto_resp_bulk(b, pat->name, pat->len);
		} else {
			proto_resp_bulk(b, "message", 7);
		}
		proto_resp_bulk(b, ch, clen);
		proto_resp_bulk(b, msg, mlen);
		if (b->failed)
			return false;
	}
	return true;
}

static size_t ps_deliver(struct pubsub *ps, const struct ps_entry *e, pubsub_deliver_fn fn,
			 void *arg)
{
	for (size_t i = 0; i < e->nsubs; i++) {
		struct cmd_session *to = e->subs[i];
		const struct proto_buf *b = &ps->frame[to->resp >= 3];

		fn(arg, to, b->data, b->len);
	}
	return e->nsubs;
}

size_t pubsub_publish(struct pubsub *ps, const char *ch, size_t clen, const char *msg, size_t mlen,
		      pubsub_deliver_fn fn, void *arg)
{
	const struct ps_entry *e;
	size_t n = 0;

	if (!ps)
		return 0;
	e = ps_find(&ps->chans, ch, clen);
	if (e && ps_frames(ps, NULL, ch, clen, msg, mlen))
		n += ps_deliver(ps, e, fn, arg);
	for (e = ps->pats.first; e; e = e->next)
		if (glob_match(e->g, ch, clen) && ps_frames(ps, e, ch, clen, msg, mlen))
			n += ps_deliver(ps, e, fn, arg);
	return n;
}

size_t pubsub_numsub(const struct pubsub *ps, const char *ch, size_t len)
{
	const struct ps_entry *e = ps ? ps_find(&ps->chans, ch, len) : NULL;

	return e ? e->nsubs : 0;
}

size_t pubsub_npatterns(const struct pubsub *ps)
{
	return ps ? ps->pats.n : 0;
}

size_t pubsub_nchannels(const struct pubsub *ps)
{
	return ps ? ps->chans.n : 0;
}

void pubsub_each_channel(const struct pubsub *ps,
			 void (*fn)(void *arg, const char *name, size_t len), void *arg)
{
	if (!ps)
		return;
	for (const struct ps_entry *e = ps->chans.first; e; e = e->next)
		fn(arg, e->name, e->len);
}

/* ---- MONITOR ---- */

void pubsub_repr(struct proto_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	proto_buf_append_char(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[4] = {'\\', 0, 0, 0};
		size_t elen = 2;

		switch (c) {
		case '\\':
		case '"':
			esc[1] = (char)c;
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		case '\a':
			esc[1] = 'a';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		default:
			if (c >= 0x20 && c < 0x7f) {
				proto_buf_append_char(b, (char)c);
				continue;
			}
			esc[1] = 'x';
			esc[2] = hex[c >> 4];
			esc[3] = hex[c & 15];
			elen = 4;
		}
		proto_buf_append(b, esc, elen);
	}
	proto_buf_append_char(b, '"');
}

void pubsub_monitor_line(struct proto_buf *b, uint64_t usec, const char *addr, size_t argc,
			 const char *const *argv, const size_t *argvlen)
{
	proto_buf_append_fmt(b, "+%" PRIu64 ".%06" PRIu64 " [0 %s] ", usec / 1000000,
			     usec % 1000000, addr);
	for (size_t i = 0; i < argc; i++) {
		if (i)
			proto_buf_append_char(b, ' ');
		pubsub_repr(b, argv[i], argvlen[i]);
	}
	proto_buf_append(b, "\r\n", 2);
}

/* ---- the command layer's side ---- */

static void cmd_push(void *arg, struct cmd_session *to, const char *frame, size_t len)
{
	struct cmd_ctx *c = arg;

	c->hooks.push(c->hooks.arg, to, frame, len, c->wait_lsn);
}

size_t cmd_publish(struct cmd_ctx *c, const char *ch, size_t clen, const char *msg, size_t mlen)
{
	if (!c->hooks.push)
		return 0;
	return pubsub_publish(c->pubsub, ch, clen, msg, mlen, cmd_push, c);
}

/* Longest event name sent (bf.reserve, rename_from, ...), with room to spare. */
#define PUBSUB_EVENT_MAX 32

void cmd_notify_slow(struct cmd_ctx *c, int cls, const char *event, const char *name, size_t len)
{
	/* "__keyspace@0__:" and a name of at most BF_NAME_MAX bytes, or "__keyevent@0__:" and
	 * an event name. */
	char ch[16 + BF_NAME_MAX + PUBSUB_EVENT_MAX];
	size_t elen = strlen(event);

	(void)cls;
	if (len > BF_NAME_MAX || elen > PUBSUB_EVENT_MAX)
		return;
	if (c->notify & PUBSUB_NOTIFY_KEYSPACE) {
		memcpy(ch, "__keyspace@0__:", 15);
		memcpy(ch + 15, name, len);
		cmd_publish(c, ch, 15 + len, event, elen);
	}
	if (c->notify & PUBSUB_NOTIFY_KEYEVENT) {
		memcpy(ch, "__keyevent@0__:", 15);
		memcpy(ch + 15, event, elen);
		cmd_publish(c, ch, 15 + elen, name, len);
	}
}
