/* SPDX-License-Identifier: MIT */
/* The shared command layer: the operations every front end calls, and their error kinds. */
#include "proto/command.h"

#include "core/bf_record.h"
#include "core/bf_snapshot.h"
#include "proto/pubsub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cmd_session_init(struct cmd_session *s, uint64_t id)
{
	memset(s, 0, sizeof(*s));
	s->resp = 2;
	s->id = id;
}

void cmd_session_trim(struct cmd_session *s)
{
	free(s->keys);
	free(s->lens);
	free(s->results);
	s->keys = NULL;
	s->lens = NULL;
	s->results = NULL;
	s->scratch_cap = 0;
}

void cmd_session_end_listing(struct cmd_session *s)
{
	if (s->listing) {
		proto_buf_free(&s->listing->names);
		free(s->listing);
		s->listing = NULL;
	}
}

void cmd_session_free(struct cmd_session *s)
{
	cmd_session_trim(s);
	cmd_session_end_listing(s);
	cmd_multi_free(s);
	pubsub_session_end(s);
}

int cmd_session_reserve(struct cmd_session *s, size_t n)
{
	if (n <= s->scratch_cap)
		return 0;
	size_t cap = s->scratch_cap ? s->scratch_cap : 64;
	while (cap < n)
		cap *= 2;
	const void **k = realloc(s->keys, cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	s->keys = k;
	size_t *l = realloc(s->lens, cap * sizeof(*l));
	if (!l)
		return -ENOMEM;
	s->lens = l;
	int *r = realloc(s->results, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	s->results = r;
	s->scratch_cap = cap;
	return 0;
}

bool cmd_token_equal(const void *token, size_t token_len, const void *p, size_t n)
{
	const unsigned char *a = token, *b = p;
	size_t max = n > token_len ? n : token_len;
	volatile unsigned char diff = (unsigned char)(n != token_len);

	for (size_t i = 0; i < max; i++) {
		unsigned char x = i < token_len ? a[i] : 0, y = i < n ? b[i] : 0;
		diff |= (unsigned char)(x ^ y);
	}
	return diff == 0;
}

bool cmd_auth_check(const struct cmd_ctx *c, struct cmd_session *s, const void *p, size_t n)
{
	if (!c->token)
		return false;
	if (cmd_token_equal(c->token, c->token_len, p, n)) {
		s->authed = true;
		return true;
	}
	if (++s->auth_failures >= CMD_AUTH_MAX_FAILURES)
		s->close_after = true;
	return false;
}

enum cmd_status cmd_status_from_errno(int rc)
{
	switch (rc) {
	case 0:
		return CMD_OK;
	case -ENOENT:
		return CMD_NOT_FOUND;
	case -EEXIST:
		return CMD_EXISTS;
	case -EINVAL:
		return CMD_BAD_ARGS;
	case -EDOM:
		return CMD_RATE_TOO_LOW;
	case -ENOSPC:
		return CMD_FULL;
	case -ENOMEM:
	case -E2BIG:
		return CMD_NO_MEMORY;
	case -ENOTSUP:
		return CMD_NOT_COUNTING;
	case -ENOTUNIQ:
		return CMD_AMBIGUOUS;
	case -EROFS:
		return CMD_LOG_FAILED;
	default:
		return CMD_INTERNAL;
	}
}

/* A filter was made (create, an add's auto-create, BF.LOADCHUNK's header): Redis's "new" for
 * the key, then the filter type's own event (RedisBloom sends none: see doc/protocols.md). */
static void cmd_notify_created(struct cmd_ctx *c, const char *name, size_t len)
{
	cmd_notify(c, PUBSUB_NOTIFY_NEW, "new", name, len);
	cmd_notify(c, PUBSUB_NOTIFY_MODULE, "bf.reserve", name, len);
}

/* ---- the write-ahead log ---- */

/* Whether changes to f are logged (a memory-only filter is not: it never survives a restart). */
static bool logged(const struct cmd_ctx *c, const struct bf_filter *f)
{
	return c->hooks.log && f->params->persist;
}

/* The replies built from now on wait for lsn to be durable (if it is not yet). */
static void wait_for(struct cmd_ctx *c, uint64_t lsn)
{
	/* Without a log nothing is waited for (a filter loaded from a snapshot written while the
	 * log was on still carries its LSN). */
	if (c->hooks.log && lsn > c->durable_lsn && lsn > c->wait_lsn)
		c->wait_lsn = lsn;
}

/* Room for n bytes of record payload in c->rec. 0 or -ENOMEM. */
static int rec_reserve(struct cmd_ctx *c, size_t n)
{
	if (n <= c->rec_cap)
		return 0;
	size_t cap = c->rec_cap ? c->rec_cap : 4096;
	while (cap < n)
		cap *= 2;
	unsigned char *p = realloc(c->rec, cap);
	if (!p)
		return -ENOMEM;
	c->rec = p;
	c->rec_cap = cap;
	return 0;
}

/* Log a record about f (its payload is c->rec[0..len)): f->lsn becomes its LSN and the replies
 * wait for it. 0, or -ENOMEM if the log could not take it. */
static int log_change(struct cmd_ctx *c, struct bf_filter *f, int type, const void *p, size_t len)
{
	uint64_t lsn = c->hooks.log(c->hooks.arg, type, p, len);

	if (!lsn)
		return -ENOMEM;
	f->lsn = lsn;
	wait_for(c, lsn);
	return 0;
}

/* ADD or DELETE of the keys whose hashes are at c->rec + 8, n of them. */
static int log_keys(struct cmd_ctx *c, struct bf_filter *f, int type, size_t n)
{
	if (!n)
		return 0;
	bf_record_id(f->id, c->rec);
	return log_change(c, f, type, c->rec, BF_RECORD_KEYS_HEAD + BF_RECORD_HASH_BYTES * n);
}

void cmd_ctx_free(struct cmd_ctx *c)
{
	free(c->rec);
	c->rec = NULL;
	c->rec_cap = 0;
	pubsub_free(c->pubsub);
	c->pubsub = NULL;
}

struct bf_params cmd_default_params(const struct cmd_ctx *c, enum cmd_peer peer)
{
	return (struct bf_params){
	    .capacity = c->defaults[peer].capacity,
	    .error_rate = c->defaults[peer].error_rate,
	    .type = BF_TYPE_BLOOM,
	    .expansion = c->default_expansion,
	    .persist = true,
	};
}

enum cmd_status cmd_create(struct cmd_ctx *c, const char *name, size_t len,
			   const struct bf_params *p, struct bf_filter **out)
{
	c->ops[CMD_OP_CREATE]++;
	if (!bf_name_valid(name, len))
		return CMD_BAD_NAME;
	if (c->hooks.log && p->persist && c->log_failed)
		return CMD_LOG_FAILED;
	cmd_lookup(c, name, len); /* an expired filter of that name goes first */
	uint64_t seed = c->hooks.seed ? c->hooks.seed(c->hooks.arg) : 0;
	struct bf_filter *f;
	int rc = bf_registry_create(c->reg, name, len, p, seed, &f);
	if (rc)
		return cmd_status_from_errno(rc);
	if (logged(c, f)) {
		unsigned char rec[BF_RECORD_CREATE_MAX];
		if (log_change(c, f, BF_REC_CREATE, rec, bf_record_create(f, rec))) {
			bf_registry_drop(c->reg, name, len);
			return CMD_INTERNAL;
		}
	}
	if (c->hooks.created)
		c->hooks.created(c->hooks.arg, f);
	cmd_watch_touch(c, name, len);
	cmd_notify_created(c, name, len);
	if (out)
		*out = f;
	return CMD_OK;
}

enum cmd_status cmd_ready(struct cmd_ctx *c, const char *name, size_t len)
{
	struct bf_filter *f = cmd_lookup(c, name, len);

	if (!f || !f->paged)
		return CMD_OK;
	if (!c->hooks.page_in || c->hooks.page_in(c->hooks.arg, f))
		return CMD_PAGED_OUT;
	c->paging = f;
	return CMD_OK;
}

uint64_t cmd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* f's time has come: it goes as a drop goes. The drop is logged (as Redis propagates a DEL),
 * so a start does not build it again to drop it again; if the log cannot take it, the start
 * drops it then, since its time is in the log too. No reply waits for that record. */
static void expire_now(struct cmd_ctx *c, struct bf_filter *f)
{
	char name[BF_NAME_MAX];
	size_t len = f->name_len;

	if (logged(c, f) && !c->log_failed) {
		unsigned char rec[8];

		c->hooks.log(c->hooks.arg, BF_REC_DROP, rec, bf_record_id(f->id, rec));
	}
	memcpy(name, bf_filter_name(f), len);
	c->expired++;
	cmd_watch_touch(c, name, len);
	if (c->hooks.dropping)
		c->hooks.dropping(c->hooks.arg, f, true);
	bf_registry_drop(c->reg, name, len);
	cmd_notify(c, PUBSUB_NOTIFY_EXPIRED, "expired", name, len);
}

struct bf_filter *cmd_lookup(struct cmd_ctx *c, const char *name, size_t len)
{
	struct bf_filter *f = bf_registry_get(c->reg, name, len);

	if (f && bf_filter_expire_ms(f) && bf_filter_expire_ms(f) <= cmd_now_ms()) {
		expire_now(c, f);
		return NULL;
	}
	return f;
}

uint64_t cmd_expire_due(struct cmd_ctx *c, uint64_t now_ms, size_t max)
{
	struct bf_filter *f;
	size_t n = 0;

	while ((f = bf_registry_next_expiring(c->reg)) && bf_filter_expire_ms(f) <= now_ms &&
	       (!max || n++ < max))
		expire_now(c, f);
	return f ? bf_filter_expire_ms(f) : 0;
}

enum cmd_status cmd_set_expire(struct cmd_ctx *c, struct bf_filter *f, uint64_t expire_ms)
{
	bool had = bf_filter_expire_ms(f) != 0;

	if (f->paged && expire_ms != bf_filter_expire_ms(f) &&
	    !(expire_ms && expire_ms <= cmd_now_ms()))
		return CMD_PAGED_OUT; /* its checkpoint would be written again */
	if (expire_ms && expire_ms <= cmd_now_ms())
		return cmd_drop(c, bf_filter_name(f), f->name_len, true);
	if (logged(c, f)) {
		unsigned char rec[16];

		if (c->log_failed)
			return CMD_LOG_FAILED;
		if (log_change(c, f, BF_REC_EXPIRE, rec, bf_record_expire(f->id, expire_ms, rec)))
			return CMD_INTERNAL;
	}
	/* Only memory can fail (the expiry heap's growth; a first expiry's room in the filter,
	 * under max_memory); a logged change is then undone by a second record. */
	if (bf_registry_set_expire(c->reg, f, expire_ms)) {
		unsigned char rec[16];

		if (logged(c, f))
			log_change(c, f, BF_REC_EXPIRE, rec,
				   bf_record_expire(f->id, bf_filter_expire_ms(f), rec));
		return CMD_NO_MEMORY;
	}
	f->changes++;
	cmd_watch_touch(c, bf_filter_name(f), f->name_len);
	/* PERSIST of a filter with no expiry changes nothing: no event, as in Redis. */
	if (expire_ms || had)
		cmd_notify(c, PUBSUB_NOTIFY_GENERIC, expire_ms ? "expire" : "persist",
			   bf_filter_name(f), f->name_len);
	return CMD_OK;
}

enum cmd_status cmd_drop(struct cmd_ctx *c, const char *name, size_t len, bool remove_file)
{
	c->ops[CMD_OP_DROP]++;
	struct bf_filter *f = cmd_lookup(c, name, len);
	if (!f)
		return CMD_NOT_FOUND;
	/* A clear only forgets the filter here: its file stays, and a restart loads it again
	 * with every logged change (bloomd's clear). Only a drop is a change to log. */
	if (remove_file && logged(c, f)) {
		unsigned char rec[8];
		if (c->log_failed)
			return CMD_LOG_FAILED;
		uint64_t lsn =
		    c->hooks.log(c->hooks.arg, BF_REC_DROP, rec, bf_record_id(f->id, rec));
		if (!lsn)
			return CMD_INTERNAL;
		wait_for(c, lsn);
	}
	if (c->hooks.dropping && c->hooks.dropping(c->hooks.arg, f, remove_file) && !remove_file)
		return CMD_INTERNAL;
	cmd_watch_touch(c, name, len);
	/* Before the drop: name may be the filter's own (an EXPIRE into the past). */
	cmd_notify(c, PUBSUB_NOTIFY_GENERIC, "del", name, len);
	return cmd_status_from_errno(bf_registry_drop(c->reg, name, len));
}

struct all_filters {
	struct bf_filter **v;
	size_t n;
	bool persistent;
};

static void all_visit(void *arg, struct bf_filter *f)
{
	struct all_filters *a = arg;

	a->v[a->n++] = f;
	a->persistent = a->persistent || f->params->persist;
}

enum cmd_status cmd_flushall(struct cmd_ctx *c, uint64_t *dropped)
{
	struct all_filters a = {.n = 0};
	size_t count = bf_registry_count(c->reg);

	if (dropped)
		*dropped = 0;
	if (!count)
		return CMD_OK;
	a.v = malloc(count * sizeof(*a.v));
	if (!a.v)
		return CMD_INTERNAL;
	bf_registry_each(c->reg, all_visit, &a);
	if (c->hooks.log && a.persistent) {
		if (c->log_failed) {
			free(a.v);
			return CMD_LOG_FAILED;
		}
		uint64_t lsn = c->hooks.log(c->hooks.arg, BF_REC_FLUSHALL, NULL, 0);
		if (!lsn) {
			free(a.v);
			return CMD_INTERNAL;
		}
		wait_for(c, lsn);
	}
	for (size_t i = 0; i < a.n; i++) {
		struct bf_filter *f = a.v[i];
		char name[BF_NAME_MAX];
		size_t len = f->name_len;

		memcpy(name, bf_filter_name(f), len);
		c->ops[CMD_OP_DROP]++;
		cmd_watch_touch(c, name, len);
		if (c->hooks.dropping)
			c->hooks.dropping(c->hooks.arg, f, true);
		bf_registry_drop(c->reg, name, len);
	}
	if (dropped)
		*dropped = a.n;
	free(a.v);
	return CMD_OK;
}

enum cmd_status cmd_rename(struct cmd_ctx *c, const char *from, size_t flen, const char *to,
			   size_t tlen, bool nx)
{
	struct bf_filter *f = cmd_lookup(c, from, flen), *t;
	unsigned char rec[BF_RECORD_RENAME_MAX];
	char old[BF_NAME_MAX];
	uint64_t lsn = 0;

	if (!f)
		return CMD_NOT_FOUND;
	/* from may be f's own name (HTTP's rename), which the rename frees: the events and the
	 * hooks after it read this copy. */
	memcpy(old, from, flen);
	from = old;
	if (!bf_name_valid(to, tlen))
		return CMD_BAD_NAME;
	t = cmd_lookup(c, to, tlen);
	if (t == f)
		return nx ? CMD_EXISTS : CMD_OK;
	if (t && nx)
		return CMD_EXISTS;
	if (f->paged)
		return CMD_PAGED_OUT; /* its checkpoint is written under the new name */
	if ((logged(c, f) || (t && logged(c, t))) && c->log_failed)
		return CMD_LOG_FAILED;
	/* One record: its replay drops the filter holding the name, as here. A memory-only
	 * filter renamed over a persistent one leaves only that one's drop to log. */
	if (logged(c, f))
		lsn = c->hooks.log(c->hooks.arg, BF_REC_RENAME, rec,
				   bf_record_rename(f->id, to, tlen, rec));
	else if (t && logged(c, t))
		lsn = c->hooks.log(c->hooks.arg, BF_REC_DROP, rec, bf_record_id(t->id, rec));
	if ((logged(c, f) || (t && logged(c, t))) && !lsn)
		return CMD_INTERNAL;
	if (t) {
		c->ops[CMD_OP_DROP]++;
		if (c->hooks.dropping)
			c->hooks.dropping(c->hooks.arg, t, true);
		bf_registry_drop(c->reg, to, tlen);
	}
	/* Only a name's allocation can fail now (one of at most 200 bytes). */
	if (bf_registry_rename(c->reg, f, to, tlen))
		return CMD_INTERNAL;
	if (lsn && logged(c, f))
		f->lsn = lsn;
	f->changes++;
	cmd_watch_touch(c, from, flen);
	cmd_watch_touch(c, to, tlen);
	if (lsn)
		wait_for(c, lsn);
	/* Redis's order: the new key ("new"), then rename_from and rename_to. */
	cmd_notify(c, PUBSUB_NOTIFY_NEW, "new", to, tlen);
	cmd_notify(c, PUBSUB_NOTIFY_GENERIC, "rename_from", from, flen);
	cmd_notify(c, PUBSUB_NOTIFY_GENERIC, "rename_to", to, tlen);
	if (c->hooks.renamed)
		c->hooks.renamed(c->hooks.arg, f, from, flen);
	return CMD_OK;
}

enum cmd_status cmd_check_capacity(uint64_t capacity)
{
	return capacity >= 1 ? CMD_OK : CMD_BAD_ARGS;
}

enum cmd_status cmd_check_error_rate(double error_rate)
{
	if (!(error_rate > 0 && error_rate < 1))
		return CMD_BAD_ARGS;
	return error_rate < BF_MIN_ERROR_RATE ? CMD_RATE_TOO_LOW : CMD_OK;
}

enum cmd_status cmd_check_expansion(uint64_t expansion)
{
	return expansion <= BF_MAX_EXPANSION ? CMD_OK : CMD_BAD_ARGS;
}

bool cmd_keys_fit(const struct cmd_ctx *c, size_t n, const size_t *lens)
{
	for (size_t i = 0; i < n; i++)
		if (lens[i] > c->max_key_bytes)
			return false;
	return true;
}

/* One "bf.add" for a call of cmd_add that changed f (out[0, k) its answers): a key that was new,
 * or any add to a counting filter (it counts repeats); as Redis's SADD, nothing for a call that
 * changed nothing. */
static void cmd_notify_added(struct cmd_ctx *c, struct bf_filter *f, const int *out, size_t k)
{
	bool counting = f->params->type == BF_TYPE_COUNTING;

	if (!(c->notify & PUBSUB_NOTIFY_MODULE))
		return;
	for (size_t i = 0; i < k; i++) {
		if (out[i] == 1 || (counting && out[i] == 0)) {
			cmd_notify(c, PUBSUB_NOTIFY_MODULE, "bf.add", bf_filter_name(f),
				   f->name_len);
			return;
		}
	}
}

enum cmd_status cmd_add(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			const size_t *lens, int *out, size_t *done)
{
	*done = 0;
	c->ops[CMD_OP_ADD]++;
	c->keys[CMD_OP_ADD] += n;
	if (f->paged)
		return CMD_PAGED_OUT;
	f->used_s = c->now_s;
	/* Any add is a change to a WATCH, as a write command in Redis, new bits or not. */
	cmd_watch_touch(c, bf_filter_name(f), f->name_len);
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	if (n == 0)
		return CMD_OK;
	if (!logged(c, f)) {
		size_t k = n == 1 ? (out[0] = bf_filter_add(f, keys[0], lens[0]), 1)
				  : bf_filter_add_batch(f, n, keys, lens, out, NULL);
		cmd_notify_added(c, f, out, k);
		if (out[k - 1] < 0) {
			*done = k - 1;
			return cmd_status_from_errno(out[k - 1]);
		}
		*done = n;
		return CMD_OK;
	}
	if (c->log_failed)
		return CMD_LOG_FAILED;
	if (rec_reserve(c, BF_RECORD_KEYS_HEAD + BF_RECORD_HASH_BYTES * n))
		return CMD_INTERNAL;
	/* The hashes land in the record (struct bf_hash is its little-endian lo, hi); then only
	 * the keys that changed the filter stay: a plain filter's new keys, every add of a
	 * counting filter's (it counts repeats). */
	struct bf_hash *h = (struct bf_hash *)(void *)(c->rec + BF_RECORD_KEYS_HEAD);
	bool counting = f->params->type == BF_TYPE_COUNTING;
	size_t k = bf_filter_add_batch(f, n, keys, lens, out, h), m = 0;
	for (size_t i = 0; i < k; i++)
		if (out[i] == 1 || (counting && out[i] == 0))
			h[m++] = h[i];
	if (log_keys(c, f, BF_REC_ADD, m))
		return CMD_INTERNAL;
	cmd_notify_added(c, f, out, k);
	/* An answer of "already present" may owe it to a change not yet durable. */
	wait_for(c, f->lsn);
	if (out[k - 1] < 0) {
		*done = k - 1;
		return cmd_status_from_errno(out[k - 1]);
	}
	*done = n;
	return CMD_OK;
}

enum cmd_status cmd_check(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			  const size_t *lens, int *out)
{
	c->ops[CMD_OP_CHECK]++;
	c->keys[CMD_OP_CHECK] += n;
	if (f->paged)
		return CMD_PAGED_OUT;
	f->used_s = c->now_s;
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	if (n == 1)
		out[0] = bf_filter_check(f, keys[0], lens[0]);
	else
		bf_filter_check_batch(f, n, keys, lens, out);
	size_t hits = 0;
	for (size_t i = 0; i < n; i++)
		hits += out[i] == 1;
	c->check_hits += hits;
	c->check_misses += n - hits;
	/* A "present" may owe it to a change not yet durable: then the reply waits for it. An
	 * all-"absent" answer, or one about a filter whose changes are all durable, never waits.
	 * Nor does any while the log cannot write: the wait would end only in the log-failure
	 * error, and reads are served from memory then, as Redis serves them under MISCONF (a
	 * change that ran before the failure is in the log's buffer, written at the recovery). */
	if (c->hooks.log && !c->log_failed && f->lsn > c->durable_lsn) {
		for (size_t i = 0; i < n; i++) {
			if (out[i] == 1) {
				wait_for(c, f->lsn);
				break;
			}
		}
	}
	return CMD_OK;
}

enum cmd_status cmd_delete(struct cmd_ctx *c, struct bf_filter *f, size_t n,
			   const void *const *keys, const size_t *lens, int *out, size_t *done)
{
	*done = 0;
	c->ops[CMD_OP_DELETE]++;
	c->keys[CMD_OP_DELETE] += n;
	if (f->paged)
		return CMD_PAGED_OUT;
	f->used_s = c->now_s;
	if (f->params->type != BF_TYPE_COUNTING)
		return CMD_NOT_COUNTING;
	cmd_watch_touch(c, bf_filter_name(f), f->name_len);
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	bool log = logged(c, f);
	if (log && c->log_failed)
		return CMD_LOG_FAILED;
	if (log && rec_reserve(c, BF_RECORD_KEYS_HEAD + BF_RECORD_HASH_BYTES * n))
		return CMD_INTERNAL;
	enum cmd_status st = CMD_OK;
	size_t i, m = 0;
	for (i = 0; i < n; i++) {
		struct bf_hash h = bf_filter_hash(f, keys[i], lens[i]);
		out[i] = bf_filter_delete_hash(f, h);
		if (out[i] < 0) {
			st = cmd_status_from_errno(out[i]);
			break;
		}
		if (log && out[i] == 1)
			bf_record_put_hash(h, c->rec + BF_RECORD_KEYS_HEAD +
						  BF_RECORD_HASH_BYTES * m++);
	}
	*done = i;
	if (log) {
		if (log_keys(c, f, BF_REC_DELETE, m))
			return CMD_INTERNAL;
		wait_for(c, f->lsn);
	}
	for (size_t k = 0; k < i; k++) {
		if (out[k] == 1) {
			cmd_notify(c, PUBSUB_NOTIFY_MODULE, "bf.del", bf_filter_name(f),
				   f->name_len);
			break;
		}
	}
	return st;
}

enum cmd_status cmd_load_header(struct cmd_ctx *c, const char *name, size_t len,
				const unsigned char *h, size_t hlen)
{
	uint64_t limit = bf_registry_max_memory(c->reg), used = bf_registry_memory(c->reg);
	struct bf_snapshot_info info;
	struct bf_filter *f;

	c->ops[CMD_OP_CREATE]++;
	if (!bf_name_valid(name, len))
		return CMD_BAD_NAME;
	if (cmd_lookup(c, name, len))
		return CMD_EXISTS;
	int rc = bf_snapshot_decode(h, hlen,
				    !limit	   ? UINT64_MAX
				    : used < limit ? limit - used
						   : 0,
				    &f, &info, NULL, 0);
	if (rc)
		return rc == -ENOMEM ? CMD_NO_MEMORY : CMD_BAD_ARGS;
	if (c->hooks.log && f->params->persist && c->log_failed) {
		bf_filter_free(f);
		return CMD_LOG_FAILED;
	}
	bf_filter_detach(f); /* a copy: a new filter here, with an id of this instance's */
	rc = bf_filter_name_room(&f, len);
	if (!rc)
		rc = bf_registry_adopt(c->reg, name, len, f);
	if (rc) {
		bf_filter_free(f);
		return cmd_status_from_errno(rc);
	}
	f->changes++;
	if (logged(c, f)) {
		/* The header as this filter has it now (its name here and its id), not the chunk
		 * as sent: replay names the filter from it. */
		size_t rlen = BF_RECORD_KEYS_HEAD + bf_snapshot_header_len(f);
		if (rec_reserve(c, rlen)) {
			bf_registry_drop(c->reg, name, len);
			return CMD_INTERNAL;
		}
		bf_record_id(f->id, c->rec);
		bf_snapshot_header(f, 0, 0, c->rec + BF_RECORD_KEYS_HEAD);
		if (log_change(c, f, BF_REC_LOAD, c->rec, rlen)) {
			bf_registry_drop(c->reg, name, len);
			return CMD_INTERNAL;
		}
	}
	if (c->hooks.created)
		c->hooks.created(c->hooks.arg, f);
	cmd_watch_touch(c, name, len);
	cmd_notify_created(c, name, len);
	return CMD_OK;
}

int cmd_load_body(struct cmd_ctx *c, struct bf_filter *f, uint64_t off, const void *data,
		  size_t len)
{
	uint64_t room;

	if (!bf_filter_body_at(f, off, &room))
		return -ERANGE;
	if (len > room)
		return -EMSGSIZE;
	if (logged(c, f)) {
		if (c->log_failed)
			return -EROFS;
		if (rec_reserve(c, 16 + len))
			return -ENOMEM;
		bf_record_id(f->id, c->rec);
		memcpy(c->rec + 8, &off, 8);
		memcpy(c->rec + 16, data, len);
	}
	int rc = bf_filter_body_write(f, off, data, len);
	if (!rc)
		cmd_watch_touch(c, bf_filter_name(f), f->name_len);
	if (rc || !logged(c, f))
		return rc;
	return log_change(c, f, BF_REC_BODY, c->rec, 16 + len);
}

enum cmd_status cmd_run_keys(struct cmd_ctx *c, struct cmd_session *s, struct bf_filter *f,
			     enum cmd_key_op op, size_t n, size_t *done)
{
	enum cmd_status st;

	switch (op) {
	case CMD_KEYS_ADD:
		return cmd_add(c, f, n, s->keys, s->lens, s->results, done);
	case CMD_KEYS_CHECK:
		st = cmd_check(c, f, n, s->keys, s->lens, s->results);
		*done = st == CMD_OK ? n : 0;
		return st;
	default:
		return cmd_delete(c, f, n, s->keys, s->lens, s->results, done);
	}
}

bool cmd_slice_keys(struct cmd_ctx *c, struct cmd_session *s, struct bf_filter *f,
		    enum cmd_key_op op, size_t n, const void *const *keys, const size_t *lens)
{
	struct cmd_slice *sl = &s->slice;
	size_t from = sl->done, k = n - from < CMD_KEY_STEP ? n - from : CMD_KEY_STEP, done = 0;

	if (!sl->active) {
		sl->active = true;
		sl->id = f ? f->id : 0;
	} else if (f && f->id != sl->id) {
		f = NULL; /* dropped, or renamed away, between two calls: not this command's */
	}
	if (!f && op == CMD_KEYS_CHECK) {
		memset(s->results + from, 0, (n - from) * sizeof(*s->results));
		sl->done = n;
		sl->answered = true;
		return true;
	}
	if (!f) {
		sl->st = CMD_NOT_FOUND;
	} else if (op == CMD_KEYS_CHECK) {
		sl->st = cmd_check(c, f, k, keys + from, lens + from, s->results + from);
		done = sl->st == CMD_OK ? k : 0;
	} else if (op == CMD_KEYS_ADD) {
		sl->st = cmd_add(c, f, k, keys + from, lens + from, s->results + from, &done);
	} else {
		sl->st = cmd_delete(c, f, k, keys + from, lens + from, s->results + from, &done);
	}
	sl->done += done;
	if (c->wait_lsn > sl->wait_lsn)
		sl->wait_lsn = c->wait_lsn;
	if (sl->st == CMD_OK && sl->done < n) {
		c->again = true;
		return false;
	}
	sl->answered = true;
	return true;
}

int cmd_slice_replies(struct cmd_ctx *c, struct cmd_session *s, size_t *from, size_t *to)
{
	struct cmd_slice *sl = &s->slice;
	size_t left = sl->done - sl->sent;

	*from = sl->sent;
	if (c->hooks.log && c->log_failed && sl->wait_lsn > c->durable_lsn) {
		*to = *from;
		return -1;
	}
	*to = sl->sent + (left < CMD_REPLY_STEP ? left : CMD_REPLY_STEP);
	sl->sent = *to;
	/* Every part waits for the newest record of the whole command: the first part alone
	 * would do (the rest queue behind it), but a part is never sent ahead of its keys. */
	wait_for(c, sl->wait_lsn);
	if (sl->sent < sl->done) {
		c->again = true;
		return 0;
	}
	return 1;
}

void cmd_slice_end(struct cmd_session *s)
{
	memset(&s->slice, 0, sizeof(s->slice));
}

enum cmd_status cmd_flush(struct cmd_ctx *c, struct bf_filter *f, uint64_t *ticket)
{
	uint64_t none = 0;
	int rc;

	if (!c->hooks.flush)
		return CMD_OK;
	rc = c->hooks.flush(c->hooks.arg, f, ticket ? ticket : &none);
	if (rc == -EINPROGRESS) {
		c->write_wait = true; /* counted when it is answered */
		return CMD_OK;
	}
	c->ops[CMD_OP_FLUSH]++;
	return rc == 0 ? CMD_OK : CMD_INTERNAL;
}
