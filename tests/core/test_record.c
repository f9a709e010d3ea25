/* SPDX-License-Identifier: MIT */
/*
 * Log record payloads and replay: a registry restored from a checkpoint plus the records logged
 * after it must equal the registry that logged them (same filters, same bits, same counts), for
 * plain and counting filters, with creates, drops, clears, loads, renames and expiry times among
 * the changes.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_record.h"
#include "core/bf_registry.h"
#include "core/bf_snapshot.h"
#include "tests/check_main.h"

/* Its place in its registry's expiry heap (0: none). */
#define EXPIRE_POS(f) ((f)->rare ? (f)->rare->expire_pos : 0u)

/* The log of one test: records kept in memory, in LSN order (LSN = index + 1). */
struct rec {
	int type;
	unsigned char *p;
	size_t len;
};
static struct rec log_[4096];
static size_t nlog;

static uint64_t logged(int type, const unsigned char *p, size_t len)
{
	ck_assert_uint_lt(nlog, sizeof(log_) / sizeof(log_[0]));
	log_[nlog].type = type;
	log_[nlog].p = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(log_[nlog].p);
	memcpy(log_[nlog].p, p, len);
	log_[nlog].len = len;
	return ++nlog;
}

static void log_free(void)
{
	for (size_t i = 0; i < nlog; i++)
		free(log_[i].p);
	nlog = 0;
}

/* What the command layer does: apply to the live registry, then log the change. */
static struct bf_filter *create(struct bf_registry *r, const char *name, struct bf_params p,
				uint64_t seed)
{
	unsigned char buf[BF_RECORD_CREATE_MAX];
	struct bf_filter *f;

	ck_assert_int_eq(bf_registry_create(r, name, strlen(name), &p, seed, &f), 0);
	f->lsn = logged(BF_REC_CREATE, buf, bf_record_create(f, buf));
	return f;
}

static void keys(struct bf_filter *f, int type, const char *prefix, int from, int to)
{
	unsigned char buf[8 + 16 * 64];
	size_t len = bf_record_id(f->id, buf), n = 0;
	char k[32];

	for (int i = from; i < to; i++) {
		int kl = snprintf(k, sizeof(k), "%s%d", prefix, i);
		struct bf_hash h = bf_filter_hash(f, k, (size_t)kl);
		int rc =
		    type == BF_REC_ADD ? bf_filter_add_hash(f, h) : bf_filter_delete_hash(f, h);
		/* Logged: adds that changed the filter (all of a counting filter's), deletes done.
		 */
		if (rc == 1 ||
		    (rc == 0 && type == BF_REC_ADD && f->params->type == BF_TYPE_COUNTING)) {
			bf_record_put_hash(h, buf + len);
			len += 16;
			n++;
		}
		if (n == 64 || (i + 1 == to && n)) {
			f->lsn = logged(type, buf, len);
			len = bf_record_id(f->id, buf);
			n = 0;
		}
	}
}

static void drop(struct bf_registry *r, const char *name, int type)
{
	unsigned char buf[8];
	struct bf_filter *f = bf_registry_get(r, name, strlen(name));

	ck_assert_ptr_nonnull(f);
	logged(type, buf, bf_record_id(f->id, buf));
	ck_assert_int_eq(bf_registry_drop(r, name, strlen(name)), 0);
}

/* What cmd_rename does: log one RENAME (its replay also drops a filter holding the new name),
 * drop that filter, rename. */
static void rename_(struct bf_registry *r, const char *from, const char *to)
{
	unsigned char buf[BF_RECORD_RENAME_MAX];
	struct bf_filter *f = bf_registry_get(r, from, strlen(from));

	ck_assert_ptr_nonnull(f);
	uint64_t lsn = logged(BF_REC_RENAME, buf, bf_record_rename(f->id, to, strlen(to), buf));
	if (bf_registry_get(r, to, strlen(to)))
		ck_assert_int_eq(bf_registry_drop(r, to, strlen(to)), 0);
	ck_assert_int_eq(bf_registry_rename(r, f, to, strlen(to)), 0);
	f->lsn = lsn;
}

/* What cmd_set_expire does for a time in the future (or 0: PERSIST): log one EXPIRE, set the
 * time (the registry's heap), the filter's lsn the record's. */
static void expire_(struct bf_registry *r, const char *name, uint64_t expire_ms)
{
	unsigned char buf[16];
	struct bf_filter *f = bf_registry_get(r, name, strlen(name));

	ck_assert_ptr_nonnull(f);
	uint64_t lsn = logged(BF_REC_EXPIRE, buf, bf_record_expire(f->id, expire_ms, buf));
	ck_assert_int_eq(bf_registry_set_expire(r, f, expire_ms), 0);
	f->lsn = lsn;
}

/* Add to checkpoint registry c a copy of f as it is now (filters are written one at a time, so
 * the checkpoints loaded at a start may be of different moments). */
static void checkpoint_one(struct bf_registry *c, const struct bf_filter *f)
{
	struct bf_filter *g;

	ck_assert_int_eq(bf_filter_clone(f, &g), 0);
	ck_assert_int_eq(bf_registry_adopt(c, bf_filter_name(f), f->name_len, g), 0);
	ck_assert_uint_eq(g->id, f->id);
	ck_assert_uint_eq(g->lsn, f->lsn);
}

/* A checkpoint of every filter of r: clones (the copies a snapshot writes) in a new registry. */
static struct bf_registry *checkpoint(struct bf_registry *r)
{
	struct bf_registry *c;
	struct bf_filter **list, *g;
	size_t n;

	ck_assert_int_eq(bf_registry_new(0, &c), 0);
	ck_assert_int_eq(bf_registry_list(r, "", 0, &list, &n), 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(bf_filter_clone(list[i], &g), 0);
		ck_assert_int_eq(
		    bf_registry_adopt(c, bf_filter_name(list[i]), list[i]->name_len, g), 0);
		ck_assert_uint_eq(g->id, list[i]->id);
	}
	free(list);
	return c;
}

static int drops_seen;
static void dropping(void *arg, struct bf_filter *f, bool remove_file)
{
	(void)arg;
	(void)f;
	drops_seen += remove_file ? 10 : 1;
}

static int renames_seen;
static char renamed_to[BF_NAME_MAX + 1], renamed_from[BF_NAME_MAX + 1];
static void renamed(void *arg, struct bf_filter *f, const char *from, size_t from_len)
{
	(void)arg;
	renames_seen++;
	snprintf(renamed_to, sizeof(renamed_to), "%s", bf_filter_name(f));
	snprintf(renamed_from, sizeof(renamed_from), "%.*s", (int)from_len, from);
}

/*
 * The owner's table by id, as the server keeps it from its load (srv_snap_loaded): the
 * filters there were when the replay began. Every case runs twice: with it (with_lookup), and
 * without (the replay indexes the registry itself). The replay must never ask it about a
 * filter it dropped: the owner may still answer with the freed filter.
 */
static bool with_lookup;
static struct loaded {
	uint64_t id;
	struct bf_filter *f;
	bool dropped;
} * loaded_;
static size_t nloaded, lookups;
static bf_replay_dropping_fn dropping_next;

static void loaded_visit(void *arg, struct bf_filter *f)
{
	(void)arg;
	loaded_[nloaded++] = (struct loaded){.id = f->id, .f = f};
}

static struct bf_filter *lookup(void *arg, uint64_t id)
{
	(void)arg;
	lookups++;
	for (size_t i = 0; i < nloaded; i++) {
		if (loaded_[i].id == id) {
			ck_assert_msg(!loaded_[i].dropped,
				      "asked about filter %llu, which the replay dropped",
				      (unsigned long long)id);
			return loaded_[i].f;
		}
	}
	return NULL;
}

static void dropping_marked(void *arg, struct bf_filter *f, bool remove_file)
{
	for (size_t i = 0; i < nloaded; i++)
		if (loaded_[i].f == f)
			loaded_[i].dropped = true;
	if (dropping_next)
		dropping_next(arg, f, remove_file);
}

/* A replay onto r, with the owner's table or without (with_lookup). */
static struct bf_replay *replay_new(struct bf_registry *r, bf_replay_dropping_fn dropping_fn,
				    bf_replay_renamed_fn renamed_fn)
{
	struct bf_replay *rp;

	nloaded = lookups = 0;
	dropping_next = dropping_fn;
	loaded_ = calloc(bf_registry_count(r) + 1, sizeof(*loaded_));
	ck_assert_ptr_nonnull(loaded_);
	bf_registry_each(r, loaded_visit, NULL);
	ck_assert_int_eq(bf_replay_new(r, with_lookup ? lookup : NULL, dropping_marked, NULL,
				       renamed_fn, NULL, &rp),
			 0);
	return rp;
}

static void replay_end(struct bf_replay *rp)
{
	bf_replay_free(rp);
	free(loaded_);
	loaded_ = NULL;
	nloaded = 0;
}

/* Replay every record after `from` (an LSN) onto c; returns the stats. */
static struct bf_replay_stats replay(struct bf_registry *c, uint64_t from)
{
	struct bf_replay *rp;
	struct bf_replay_stats st;
	char why[128] = "";

	rp = replay_new(c, dropping, renamed);
	for (size_t i = from; i < nlog; i++) {
		int rc = bf_replay_apply(rp, i + 1, log_[i].type, log_[i].p, log_[i].len, why,
					 sizeof(why));
		ck_assert_msg(rc == 0, "record %zu: %d %s", i + 1, rc, why);
	}
	bf_replay_finish(rp);
	bf_replay_stats(rp, &st);
	replay_end(rp);
	return st;
}

static void assert_same_registry(struct bf_registry *a, struct bf_registry *b)
{
	struct bf_filter **la, **lb;
	size_t na, nb;

	ck_assert_int_eq(bf_registry_list(a, "", 0, &la, &na), 0);
	ck_assert_int_eq(bf_registry_list(b, "", 0, &lb, &nb), 0);
	ck_assert_uint_eq(na, nb);
	/* The same expiry times, kept by both registries' heaps. */
	uint64_t sa, sb;
	ck_assert_uint_eq(bf_registry_expiring(a, &sa), bf_registry_expiring(b, &sb));
	ck_assert_uint_eq(sa, sb);
	for (size_t i = 0; i < na; i++) {
		const struct bf_filter *f = la[i], *g = lb[i];
		ck_assert_str_eq(bf_filter_name(f), bf_filter_name(g));
		ck_assert_uint_eq(f->id, g->id);
		ck_assert_uint_eq(bf_filter_expire_ms(f), bf_filter_expire_ms(g));
		ck_assert_uint_eq(EXPIRE_POS(f) != 0, EXPIRE_POS(g) != 0);
		ck_assert_uint_eq(f->seed, g->seed);
		ck_assert_uint_eq(bf_filter_items(f), bf_filter_items(g));
		ck_assert_uint_eq(f->nlayers, g->nlayers);
		for (unsigned l = 0; l < f->nlayers; l++) {
			ck_assert_uint_eq(bf_filter_layers(f)[l].items,
					  bf_filter_layers(g)[l].items);
			ck_assert_mem_eq(bf_filter_layers(f)[l].blocks,
					 bf_filter_layers(g)[l].blocks,
					 bf_layer_bytes(&bf_filter_layers(f)[l]));
		}
	}
	free(la);
	free(lb);
}

START_TEST(create_round_trip_and_malformed)
{
	struct bf_registry *r;
	struct bf_record_create c;
	unsigned char buf[BF_RECORD_CREATE_MAX + 1];
	struct bf_params p = {777, 0.003, BF_TYPE_COUNTING, 5, false, 0, 0};

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	struct bf_filter *f = create(r, "caf\xc3\xa9:1", p, 99);
	size_t len = bf_record_create(f, buf);
	ck_assert_int_eq(bf_record_read_create(buf, len, &c), 0);
	ck_assert_uint_eq(c.id, f->id);
	ck_assert_uint_eq(c.seed, 99);
	ck_assert_str_eq(c.name, "caf\xc3\xa9:1");
	ck_assert_uint_eq(c.params.capacity, 777);
	ck_assert_double_eq(c.params.error_rate, 0.003);
	ck_assert_int_eq(c.params.type, BF_TYPE_COUNTING);
	ck_assert_uint_eq(c.params.expansion, 5);
	ck_assert(!c.params.persist);
	ck_assert_double_eq(c.params.ratio, f->params->ratio);
	ck_assert_double_eq(c.params.first, BF_FIRST_SHARE);
	/* Records written before the first share (ending at the ratio) and before the ratio
	 * (ending at the name) read as the chain they made: a half each. */
	ck_assert_int_eq(bf_record_read_create(buf, len - 8, &c), 0);
	ck_assert_double_eq(c.params.ratio, f->params->ratio);
	ck_assert_double_eq(c.params.first, 0.5);
	ck_assert_int_eq(bf_record_read_create(buf, len - 16, &c), 0);
	ck_assert_double_eq(c.params.ratio, 0.5);
	ck_assert_double_eq(c.params.first, 0.5);
	ck_assert_int_eq(bf_record_read_create(buf, len - 1, &c), -EINVAL);
	ck_assert_int_eq(bf_record_read_create(buf, len + 1, &c), -EINVAL);
	buf[36] = 7; /* type */
	ck_assert_int_eq(bf_record_read_create(buf, len, &c), -EINVAL);
	buf[36] = 1;
	memset(buf, 0, 8); /* id 0 */
	ck_assert_int_eq(bf_record_read_create(buf, len, &c), -EINVAL);
	bf_record_id(BF_ID_MAX + 1, buf); /* past the largest id */
	ck_assert_int_eq(bf_record_read_create(buf, len, &c), -EINVAL);
	bf_record_id(BF_ID_MAX, buf);
	ck_assert_int_eq(bf_record_read_create(buf, len, &c), 0);
	ck_assert_uint_eq(c.id, BF_ID_MAX);

	uint64_t id;
	const unsigned char *h;
	size_t n;
	ck_assert_int_eq(bf_record_read_keys(buf, 8, &id, &h, &n), -EINVAL);
	bf_record_id(5, buf);
	ck_assert_int_eq(bf_record_read_keys(buf, 8 + 16, &id, &h, &n), 0);
	ck_assert_uint_eq(id, 5);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(bf_record_read_keys(buf, 8 + 17, &id, &h, &n), -EINVAL);
	ck_assert_int_eq(bf_record_read_id(buf, 9, &id), -EINVAL);
	ck_assert_int_eq(bf_record_read_id(buf, 8, &id), 0);
	bf_record_id(BF_ID_MAX + 1, buf);
	ck_assert_int_eq(bf_record_read_id(buf, 8, &id), -EINVAL);
	ck_assert_int_eq(bf_record_read_keys(buf, 8 + 16, &id, &h, &n), -EINVAL);
	bf_registry_free(r);
	log_free();
}
END_TEST

/*
 * Changes before and after a checkpoint, on plain and counting filters that grow, plus drops,
 * clears and creates after it: checkpoint + replay of the records after it = the live state;
 * and replaying from the start onto the checkpoint skips what it holds (same result).
 */
START_TEST(replay_equals_live)
{
	struct bf_registry *live, *ck;
	struct bf_params plain = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	struct bf_params counting = {100, 0.01, BF_TYPE_COUNTING, 2, true, 0, 0};

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *a = create(live, "a", plain, 1);
	struct bf_filter *b = create(live, "b", counting, 2);
	create(live, "gone", plain, 3);
	create(live, "cleared", plain, 4);
	keys(a, BF_REC_ADD, "k", 0, 150);
	keys(b, BF_REC_ADD, "k", 0, 150);
	keys(b, BF_REC_ADD, "k", 0, 20); /* counted twice */
	ck = checkpoint(live);
	uint64_t cut = nlog;

	keys(a, BF_REC_ADD, "k", 150, 900);
	keys(b, BF_REC_ADD, "k", 150, 700);
	keys(b, BF_REC_DELETE, "k", 0, 300);
	drop(live, "gone", BF_REC_DROP);
	drop(live, "cleared", BF_REC_CLEAR);
	struct bf_filter *c = create(live, "c", counting, 5);
	keys(c, BF_REC_ADD, "x", 0, 500);
	keys(c, BF_REC_DELETE, "x", 0, 100);
	ck_assert_uint_ge(a->nlayers, 4);
	ck_assert_uint_ge(b->nlayers, 3);

	drops_seen = 0;
	struct bf_replay_stats st = replay(ck, cut);
	ck_assert_int_eq(drops_seen, 11);
	ck_assert_uint_eq(st.applied, nlog - cut);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* From the very first record: what the checkpoint holds is skipped, not applied twice;
	 * only the two filters it does not hold come and go again (two creates, a drop, a clear).
	 */
	ck = checkpoint(live);
	st = replay(ck, 0);
	ck_assert_uint_eq(st.applied, 4);
	ck_assert_uint_eq(st.keys, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* From nothing at all: the whole log rebuilds the live registry. */
	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	st = replay(ck, 0);
	ck_assert_uint_eq(st.unknown, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/* A LOAD (BF.LOADCHUNK's header) and BODY chunks replay into the same filter. */
START_TEST(replay_load_and_body)
{
	struct bf_registry *src, *live, *ck;
	struct bf_params p = {1000, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	unsigned char buf[8 + BF_SNAPSHOT_HEADER_LEN];
	struct bf_snapshot_info info;
	struct bf_filter *s, *f;

	ck_assert_int_eq(bf_registry_new(0, &src), 0);
	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	ck_assert_int_eq(bf_registry_create(src, "s", 1, &p, 7, &s), 0);
	keys(s, BF_REC_ADD, "k", 0, 3000);
	log_free();

	bf_snapshot_header(s, 0, 0, buf + 8);
	ck_assert_int_eq(
	    bf_snapshot_decode(buf + 8, BF_SNAPSHOT_HEADER_LEN, UINT64_MAX, &f, &info, NULL, 0), 0);
	bf_filter_detach(f);
	ck_assert_int_eq(bf_registry_adopt(live, "s", 1, f), 0);
	bf_record_id(f->id, buf);
	f->lsn = logged(BF_REC_LOAD, buf, sizeof(buf));
	for (uint64_t off = 0; off < bf_filter_bytes(s); off += 1000) {
		uint64_t len;
		const void *part = bf_filter_body_at(s, off, &len);
		unsigned char chunk[16 + 1000];
		len = len < 1000 ? len : 1000;
		bf_record_id(f->id, chunk);
		memcpy(chunk + 8, &off, 8);
		memcpy(chunk + 16, part, len);
		ck_assert_int_eq(bf_filter_body_write(f, off, part, len), 0);
		f->lsn = logged(BF_REC_BODY, chunk, 16 + len);
		off -= 1000 - len;
	}
	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	replay(ck, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	bf_registry_free(src);
	log_free();
}
END_TEST

/* A name dropped and created again: replaying from before the drop onto a checkpoint of the
 * new filter skips the old one's records; a cleared filter's name created again replaces it. */
START_TEST(replay_same_name_again)
{
	struct bf_registry *live, *ck;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *a = create(live, "x", p, 1);
	keys(a, BF_REC_ADD, "old", 0, 50);
	drop(live, "x", BF_REC_DROP);
	struct bf_filter *b = create(live, "x", p, 2);
	keys(b, BF_REC_ADD, "new", 0, 50);
	ck = checkpoint(live);
	struct bf_replay_stats st = replay(ck, 0);
	ck_assert_uint_eq(st.applied, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* "y" cleared (its checkpoint kept), then created again: the new one replaces it. */
	struct bf_filter *y = create(live, "y", p, 3);
	keys(y, BF_REC_ADD, "a", 0, 10);
	ck = checkpoint(live);
	uint64_t cut = nlog;
	ck_assert_int_eq(bf_registry_drop(live, "y", 1), 0); /* a clear logs nothing */
	y = create(live, "y", p, 4);
	keys(y, BF_REC_ADD, "b", 0, 10);
	drops_seen = 0;
	replay(ck, cut);
	ck_assert_int_eq(drops_seen, 1);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/*
 * FLUSHALL: on replay, every filter whose last change is older than the record is dropped
 * (with the dropping hook, as a drop); one created after it, even if its checkpoint holds it,
 * stays. A FLUSHALL with a payload is malformed.
 */
START_TEST(replay_flushall)
{
	struct bf_registry *live, *ck;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	char why[128];

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *a = create(live, "a", p, 1);
	keys(a, BF_REC_ADD, "k", 0, 20);
	create(live, "b", p, 2);
	ck = checkpoint(live);
	uint64_t cut = nlog;
	/* FLUSHALL, as cmd_flushall does it: the record, then every filter gone. */
	logged(BF_REC_FLUSHALL, (const unsigned char *)"", 0);
	ck_assert_int_eq(bf_registry_drop(live, "a", 1), 0);
	ck_assert_int_eq(bf_registry_drop(live, "b", 1), 0);
	struct bf_filter *c = create(live, "c", p, 3);
	keys(c, BF_REC_ADD, "k", 0, 5);
	drops_seen = 0;
	replay(ck, cut);
	ck_assert_int_eq(drops_seen, 20); /* a and b, dropped with their files */
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* A checkpoint taken after the FLUSHALL (c in it) replays the whole log to the same. */
	ck = checkpoint(live);
	replay(ck, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	struct bf_replay *rp;
	unsigned char one = 0;
	rp = replay_new(live, NULL, NULL);
	ck_assert_int_eq(bf_replay_apply(rp, 1000, BF_REC_FLUSHALL, &one, 1, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "malformed FLUSHALL record");
	ck_assert_uint_eq(bf_registry_count(live), 1);
	replay_end(rp);
	bf_registry_free(live);
	log_free();
}
END_TEST

/* A RENAME payload: u64 id, u8 name length, the name; every length that does not add up, a
 * zero id and a name a filter may not have are refused. */
START_TEST(rename_round_trip_and_malformed)
{
	unsigned char buf[BF_RECORD_RENAME_MAX + 64];
	char n200[BF_NAME_MAX + 1];
	const char *name;
	uint64_t id;
	size_t len, nlen;

	len = bf_record_rename(42, "new:name", 8, buf);
	ck_assert_uint_eq(len, 8 + 1 + 8);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), 0);
	ck_assert_uint_eq(id, 42);
	ck_assert_uint_eq(nlen, 8);
	ck_assert_ptr_eq(name, (const char *)buf + 9); /* points into the payload */
	ck_assert_mem_eq(name, "new:name", 8);
	/* One byte short or over, only the head, less than the head, nothing. */
	ck_assert_int_eq(bf_record_read_rename(buf, len - 1, &id, &name, &nlen), -EINVAL);
	ck_assert_int_eq(bf_record_read_rename(buf, len + 1, &id, &name, &nlen), -EINVAL);
	ck_assert_int_eq(bf_record_read_rename(buf, 9, &id, &name, &nlen), -EINVAL);
	ck_assert_int_eq(bf_record_read_rename(buf, 8, &id, &name, &nlen), -EINVAL);
	ck_assert_int_eq(bf_record_read_rename(buf, 0, &id, &name, &nlen), -EINVAL);

	/* The longest name fills BF_RECORD_RENAME_MAX. */
	memset(n200, 'n', BF_NAME_MAX);
	n200[BF_NAME_MAX] = '\0';
	len = bf_record_rename(BF_ID_MAX, n200, BF_NAME_MAX, buf);
	ck_assert_uint_eq(len, BF_RECORD_RENAME_MAX);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), 0);
	ck_assert_uint_eq(id, BF_ID_MAX);
	ck_assert_uint_eq(nlen, BF_NAME_MAX);
	ck_assert_mem_eq(name, n200, BF_NAME_MAX);

	/* A length byte of 201 with 201 bytes: a name too long. */
	memset(buf + 9, 'x', 201);
	buf[8] = 201;
	ck_assert_int_eq(bf_record_read_rename(buf, 9 + 201, &id, &name, &nlen), -EINVAL);
	/* An empty name (length byte 0, nothing after). */
	buf[8] = 0;
	ck_assert_int_eq(bf_record_read_rename(buf, 9, &id, &name, &nlen), -EINVAL);
	/* Names no filter may have. */
	len = bf_record_rename(7, "a b", 3, buf);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), -EINVAL);
	len = bf_record_rename(7, "a\0b", 3, buf);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), -EINVAL);
	/* Id 0 is no filter's, nor one past BF_ID_MAX. */
	len = bf_record_rename(0, "ok", 2, buf);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), -EINVAL);
	len = bf_record_rename(BF_ID_MAX + 1, "ok", 2, buf);
	ck_assert_int_eq(bf_record_read_rename(buf, len, &id, &name, &nlen), -EINVAL);

	/* A malformed RENAME stops a replay and changes nothing. */
	struct bf_registry *r;
	struct bf_replay *rp;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	struct bf_filter *f;
	char why[128] = "";

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, "a", 1, &p, 1, &f), 0);
	rp = replay_new(r, NULL, NULL);
	len = bf_record_rename(f->id, "b", 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 10, BF_REC_RENAME, buf, len + 1, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "malformed RENAME record");
	len = bf_record_rename(f->id, "b c", 3, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 11, BF_REC_RENAME, buf, len, why, sizeof(why)),
			 -EINVAL);
	ck_assert_ptr_eq(bf_registry_get(r, "a", 1), f);
	ck_assert_uint_eq(f->lsn, 0);
	replay_end(rp);
	bf_registry_free(r);
}
END_TEST

/*
 * RENAMEs among the changes after a checkpoint: to a long (heap) name and back to a short one,
 * keys added under the new name, a rename over an existing filter (dropped with its files) and
 * the old name created again. Checkpoint + replay = live; the whole log onto nothing = live;
 * a checkpoint taken after them all skips every one (its filters are newer).
 */
START_TEST(replay_rename)
{
	struct bf_registry *live, *ck;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	const char *lng = "a-name-longer-than-the-inline-buffer:0123456789";

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *a = create(live, "a", p, 1);
	keys(a, BF_REC_ADD, "a", 0, 100);
	struct bf_filter *old = create(live, "old", p, 2);
	keys(old, BF_REC_ADD, "old", 0, 100);
	struct bf_filter *k = create(live, "keep", p, 3);
	keys(k, BF_REC_ADD, "keep", 0, 10);
	ck = checkpoint(live);
	struct bf_registry *ck0 = checkpoint(live);
	uint64_t cut = nlog;

	rename_(live, "a", lng);
	keys(a, BF_REC_ADD, "long", 0, 50);
	rename_(live, lng, "b");
	keys(a, BF_REC_ADD, "b", 0, 50);
	/* Over "old" (older than the record): one record drops it and renames. */
	rename_(live, "b", "old");
	ck_assert_ptr_eq(bf_registry_get(live, "old", 3), a);
	/* The first name taken again by a new filter. */
	struct bf_filter *a2 = create(live, "a", p, 4);
	keys(a2, BF_REC_ADD, "new-a", 0, 20);
	rename_(live, "keep", "kept");
	ck_assert_uint_eq(bf_registry_count(live), 3);

	drops_seen = renames_seen = 0;
	struct bf_replay_stats st = replay(ck, cut);
	ck_assert_int_eq(drops_seen, 10); /* "old", with its files */
	ck_assert_int_eq(renames_seen, 4);
	ck_assert_str_eq(renamed_to, "kept");
	ck_assert_str_eq(renamed_from, "keep");
	ck_assert_uint_eq(st.applied, nlog - cut);
	ck_assert_uint_eq(st.skipped + st.unknown, 0);
	assert_same_registry(live, ck);
	ck_assert_uint_eq(bf_registry_get(ck, "old", 3)->lsn, a->lsn);
	bf_registry_free(ck);

	/* The whole log onto nothing: the old filter's records before the rename apply, then
	 * the rename drops it. */
	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	drops_seen = renames_seen = 0;
	st = replay(ck, 0);
	ck_assert_int_eq(drops_seen, 10);
	ck_assert_int_eq(renames_seen, 4);
	ck_assert_uint_eq(st.unknown, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* From the first record onto the checkpoint: what it holds is skipped, the rest as from
	 * the cut. */
	drops_seen = renames_seen = 0;
	st = replay(ck0, 0);
	ck_assert_uint_eq(st.skipped, cut);
	ck_assert_uint_eq(st.applied, nlog - cut);
	ck_assert_int_eq(drops_seen, 10);
	ck_assert_int_eq(renames_seen, 4);
	assert_same_registry(live, ck0);
	bf_registry_free(ck0);

	/* A checkpoint of the end: every record is older than its filter (or of the dropped
	 * filter, which no longer exists): nothing applies, nothing is renamed or dropped. */
	ck = checkpoint(live);
	drops_seen = renames_seen = 0;
	st = replay(ck, 0);
	ck_assert_uint_eq(st.applied, 0);
	ck_assert_int_eq(drops_seen, 0);
	ck_assert_int_eq(renames_seen, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/*
 * The holder of the new name newer than the RENAME: its checkpoint was taken after the renamed
 * filter gave the name up again and a new filter took it. The rename is skipped (the filter keeps
 * its old name, the holder stays), and a later RENAME of the filter names it. Checkpoints of
 * different moments: the renamed filter's from before its renames, the holder's from the end.
 */
START_TEST(replay_rename_holder_newer)
{
	struct bf_registry *live, *ck;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	struct bf_filter *f = create(live, "a", p, 1);
	keys(f, BF_REC_ADD, "f", 0, 100);
	checkpoint_one(ck, f);
	rename_(live, "a", "b");
	keys(f, BF_REC_ADD, "fb", 0, 10);
	rename_(live, "b", "c");
	struct bf_filter *g = create(live, "b", p, 2);
	keys(g, BF_REC_ADD, "g", 0, 100);
	checkpoint_one(ck, g);
	/* f's first name, taken by a new filter after f left it. */
	struct bf_filter *h = create(live, "a", p, 3);
	keys(h, BF_REC_ADD, "h", 0, 10);

	drops_seen = renames_seen = 0;
	struct bf_replay_stats st = replay(ck, 0);
	ck_assert_int_eq(drops_seen, 0); /* g, newer, is never dropped */
	ck_assert_int_eq(renames_seen, 1);
	ck_assert_str_eq(renamed_to, "c");
	ck_assert_str_eq(renamed_from, "a"); /* its name in the checkpoint: "b" was skipped */
	ck_assert_uint_eq(st.unknown, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/*
 * One RENAME at a time against a registry as loaded: skipped when the holder is newer, when the
 * filter's own checkpoint is newer (lsn <= filter's), when the name is already its own; applied
 * (the older holder dropped with its files, the renamed hook called, the filter's lsn the
 * record's) otherwise; an unknown id is counted as unknown.
 */
START_TEST(replay_rename_one_by_one)
{
	struct bf_registry *r;
	struct bf_replay *rp;
	struct bf_replay_stats st;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	unsigned char buf[BF_RECORD_RENAME_MAX];
	struct bf_filter *f, *g;
	char why[128] = "";
	size_t len;

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, "a", 1, &p, 1, &f), 0);
	ck_assert_int_eq(bf_registry_create(r, "b", 1, &p, 2, &g), 0);
	ck_assert_int_eq(bf_filter_add(f, "key", 3), 1);
	f->lsn = 5;
	g->lsn = 20;
	drops_seen = renames_seen = 0;
	rp = replay_new(r, dropping, renamed);
	len = bf_record_rename(f->id, "b", 1, buf);

	/* g's last change (20) is newer than the record (10). */
	ck_assert_int_eq(bf_replay_apply(rp, 10, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_eq(bf_registry_get(r, "a", 1), f);
	ck_assert_ptr_eq(bf_registry_get(r, "b", 1), g);
	ck_assert_uint_eq(f->lsn, 5);
	/* Equal is newer too: g's checkpoint holds LSN 20. */
	ck_assert_int_eq(bf_replay_apply(rp, 20, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_eq(bf_registry_get(r, "b", 1), g);
	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.skipped, 2);
	ck_assert_uint_eq(st.applied, 0);
	ck_assert_int_eq(drops_seen + renames_seen, 0);

	/* Older than f's checkpoint (5): skipped, even though the name is free. */
	len = bf_record_rename(f->id, "z", 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 5, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_int_eq(bf_replay_apply(rp, 3, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_null(bf_registry_get(r, "z", 1));
	ck_assert_ptr_eq(bf_registry_get(r, "a", 1), f);

	/* Newer than g: g is dropped (with its files), f takes the name. */
	len = bf_record_rename(f->id, "b", 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 30, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_eq(bf_registry_get(r, "b", 1), f);
	ck_assert_ptr_null(bf_registry_get(r, "a", 1));
	ck_assert_uint_eq(bf_registry_count(r), 1);
	ck_assert_uint_eq(f->lsn, 30);
	ck_assert_int_eq(bf_filter_check(f, "key", 3), 1);
	ck_assert_int_eq(drops_seen, 10);
	ck_assert_int_eq(renames_seen, 1);
	ck_assert_str_eq(renamed_to, "b");
	ck_assert_str_eq(renamed_from, "a");

	/* To the name it has: nothing to do. */
	ck_assert_int_eq(bf_replay_apply(rp, 31, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_eq(bf_registry_get(r, "b", 1), f);
	ck_assert_int_eq(renames_seen, 1);

	/* A filter neither loaded nor created: unknown. */
	len = bf_record_rename(f->id + 100, "q", 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 40, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_null(bf_registry_get(r, "q", 1));
	/* g's id, now that g is gone: unknown too. */
	len = bf_record_rename(2, "q", 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 41, BF_REC_RENAME, buf, len, why, sizeof(why)), 0);
	ck_assert_ptr_null(bf_registry_get(r, "q", 1));

	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.applied, 1);
	ck_assert_uint_eq(st.skipped, 5);
	ck_assert_uint_eq(st.unknown, 2);
	replay_end(rp);
	bf_registry_free(r);
}
END_TEST

/*
 * The swap done two to four times (users:new renamed over users, a new users:new, renamed over
 * users again, ...), with the checkpoint a rename writes at once: only the last users:new's,
 * newer than every record. The replay must give what was live: users (the last one) and
 * nothing else; no earlier users:new, replaced by a later RENAME (whose record its checkpoint
 * holds), may come back under its first name. And every filter the replay drops is dropped
 * with its files: the log holds no CLEAR, so none may be dropped as cleared (which tells the
 * owner to keep its checkpoint, and to write a packed one as a file of its own).
 */
START_TEST(replay_rename_replaced_again)
{
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};

	for (int rounds = 2; rounds <= 4; rounds++) {
		struct bf_registry *live, *ck;

		ck_assert_int_eq(bf_registry_new(0, &live), 0);
		ck_assert_int_eq(bf_registry_new(0, &ck), 0);
		struct bf_filter *u = create(live, "users", p, 1);
		keys(u, BF_REC_ADD, "k0:", 0, 1);
		for (int round = 1; round <= rounds; round++) {
			char tag[8];
			struct bf_filter *n = create(live, "users:new", p, (uint64_t)round + 1);

			snprintf(tag, sizeof(tag), "k%d:", round);
			keys(n, BF_REC_ADD, tag, 0, 1);
			rename_(live, "users:new", "users");
		}
		checkpoint_one(ck, bf_registry_get(live, "users", 5));

		drops_seen = 0;
		replay(ck, 0);
		ck_assert_msg(bf_registry_get(ck, "users:new", 9) == NULL,
			      "%d swaps: an earlier users:new is back after the replay", rounds);
		assert_same_registry(live, ck);
		ck_assert_msg(drops_seen % 10 == 0,
			      "%d swaps: %d filters dropped as cleared (their files kept) by a "
			      "replay of a log with no CLEAR",
			      rounds, drops_seen % 10);
		bf_registry_free(ck);
		bf_registry_free(live);
		log_free();
	}
}
END_TEST

/*
 * An EXPIRE payload: u64 id, u64 expire_ms (0: PERSIST). Any other length and id 0 are refused;
 * every time is one (0, 1, a time long past, UINT64_MAX).
 */
START_TEST(expire_round_trip_and_malformed)
{
	static const uint64_t times[] = {0, 1, 1700000000123ULL, UINT64_MAX};
	unsigned char buf[32];
	uint64_t id, ms;

	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		memset(buf, 0xee, sizeof(buf));
		ck_assert_uint_eq(bf_record_expire(42 + i, times[i], buf), 16);
		ck_assert_uint_eq(buf[16], 0xee); /* nothing written past it */
		id = ms = 12345;
		ck_assert_int_eq(bf_record_read_expire(buf, 16, &id, &ms), 0);
		ck_assert_uint_eq(id, 42 + i);
		ck_assert_uint_eq(ms, times[i]);
	}
	/* Little-endian, id first. */
	bf_record_expire(0x0102030405060708ULL, 0x1112131415161718ULL, buf);
	ck_assert_uint_eq(buf[0], 0x08);
	ck_assert_uint_eq(buf[7], 0x01);
	ck_assert_uint_eq(buf[8], 0x18);
	ck_assert_uint_eq(buf[15], 0x11);

	/* Every length but 16. */
	bf_record_expire(7, 1000, buf);
	for (size_t len = 0; len < sizeof(buf); len++)
		if (len != 16)
			ck_assert_msg(bf_record_read_expire(buf, len, &id, &ms) == -EINVAL,
				      "an EXPIRE of %zu bytes was read", len);
	/* Id 0 is no filter's. */
	bf_record_expire(0, 1000, buf);
	ck_assert_int_eq(bf_record_read_expire(buf, 16, &id, &ms), -EINVAL);

	/* A malformed EXPIRE stops a replay, with its reason, and changes nothing. */
	struct bf_registry *r;
	struct bf_replay *rp;
	struct bf_replay_stats st;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	struct bf_filter *f;
	char why[128] = "";

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, "a", 1, &p, 1, &f), 0);
	rp = replay_new(r, NULL, NULL);
	bf_record_expire(f->id, 5000, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 10, BF_REC_EXPIRE, buf, 15, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "malformed EXPIRE record");
	why[0] = '\0';
	ck_assert_int_eq(bf_replay_apply(rp, 11, BF_REC_EXPIRE, buf, 17, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "malformed EXPIRE record");
	bf_record_expire(0, 5000, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 12, BF_REC_EXPIRE, buf, 16, why, sizeof(why)),
			 -EINVAL);
	ck_assert_uint_eq(bf_filter_expire_ms(f), 0);
	ck_assert_uint_eq(f->lsn, 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 0);
	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.applied + st.skipped + st.unknown, 0);
	replay_end(rp);
	bf_registry_free(r);
}
END_TEST

/*
 * EXPIRE records among the changes after a checkpoint: a time set, moved, cleared (PERSIST)
 * and set again; one set before the checkpoint and kept by it; an expiring filter renamed (it
 * keeps its time), renamed over another expiring one, dropped, and flushed; a time long past
 * (the replay keeps it: the server drops what is due once the replay is done). Checkpoint +
 * replay = live, times and heap included; the whole log onto nothing = live; a checkpoint of
 * the end skips every record.
 */
START_TEST(replay_expire)
{
	struct bf_registry *live, *ck, *ck0;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	struct bf_replay_stats st;

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *a = create(live, "a", p, 1);
	keys(a, BF_REC_ADD, "a", 0, 20);
	create(live, "b", p, 2);
	create(live, "c", p, 3);
	create(live, "d", p, 4);
	create(live, "e", p, 5);
	create(live, "kept", p, 6);
	expire_(live, "kept", 9000000000000ULL); /* the checkpoint holds it */
	expire_(live, "e", 5000000000000ULL);
	ck = checkpoint(live);
	ck0 = checkpoint(live);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "kept", 4)), 9000000000000ULL);
	ck_assert_uint_eq(bf_registry_expiring(ck, NULL), 2);
	uint64_t cut = nlog;

	expire_(live, "a", 4000000000000ULL);
	expire_(live, "a", 3000000000000ULL); /* earlier */
	expire_(live, "a", 8000000000000ULL); /* later */
	keys(a, BF_REC_ADD, "a", 20, 40);
	expire_(live, "b", 2000000000000ULL);
	expire_(live, "b", 0); /* PERSIST */
	expire_(live, "c", 2000000000000ULL);
	expire_(live, "c", 0);
	expire_(live, "c", 7000000000000ULL);
	expire_(live, "d", 1); /* long past: kept by the replay as it was logged */
	rename_(live, "a", "a2");
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(live, "a2", 2)), 8000000000000ULL);
	rename_(live, "c", "e"); /* over an expiring filter: e's time goes with it */
	drop(live, "kept", BF_REC_DROP);
	struct bf_filter *n = create(live, "new", p, 7);
	keys(n, BF_REC_ADD, "n", 0, 5);
	expire_(live, "new", 6000000000000ULL);
	ck_assert_uint_eq(bf_registry_expiring(live, NULL), 4); /* a2, d, e, new */

	drops_seen = renames_seen = 0;
	st = replay(ck, cut);
	ck_assert_uint_eq(st.applied, nlog - cut);
	ck_assert_uint_eq(st.skipped + st.unknown, 0);
	ck_assert_int_eq(drops_seen, 20); /* e (renamed over) and kept, with their files */
	assert_same_registry(live, ck);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "a2", 2)), 8000000000000ULL);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "b", 1)), 0);
	ck_assert_uint_eq(EXPIRE_POS(bf_registry_get(ck, "b", 1)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "e", 1)), 7000000000000ULL);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "d", 1)), 1);
	ck_assert_ptr_eq(bf_registry_next_expiring(ck), bf_registry_get(ck, "d", 1));
	bf_registry_free(ck);

	/* The whole log onto nothing. */
	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	st = replay(ck, 0);
	ck_assert_uint_eq(st.unknown, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* From the first record onto the checkpoint: what it holds is skipped (its EXPIREs too). */
	st = replay(ck0, 0);
	ck_assert_uint_eq(st.skipped, cut);
	ck_assert_uint_eq(st.applied, nlog - cut);
	assert_same_registry(live, ck0);
	bf_registry_free(ck0);

	/* A checkpoint of the end: every EXPIRE of a filter it holds is older than the filter and
	 * skipped; only the dropped "kept" comes and goes again (its CREATE, EXPIRE and DROP). */
	ck = checkpoint(live);
	drops_seen = 0;
	st = replay(ck, 0);
	ck_assert_uint_eq(st.applied, 3);
	ck_assert_int_eq(drops_seen, 10);
	assert_same_registry(live, ck);
	bf_registry_free(ck);

	/* FLUSHALL drops expiring filters too: the heap is empty after the replay. */
	logged(BF_REC_FLUSHALL, (const unsigned char *)"", 0);
	ck = checkpoint(live);
	replay(ck, 0);
	ck_assert_uint_eq(bf_registry_count(ck), 0);
	ck_assert_ptr_null(bf_registry_next_expiring(ck));
	ck_assert_uint_eq(bf_registry_expiring(ck, NULL), 0);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/*
 * One EXPIRE at a time against a registry as loaded: skipped when the filter's checkpoint is as
 * new or newer (record lsn <= filter's lsn: its time stays, whatever the record says), applied
 * otherwise (the time set or cleared, the filter's lsn the record's); unknown for an id no
 * filter has.
 */
START_TEST(replay_expire_one_by_one)
{
	struct bf_registry *r;
	struct bf_replay *rp;
	struct bf_replay_stats st;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	unsigned char buf[16];
	struct bf_filter *f, *g;
	char why[128] = "";

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, "f", 1, &p, 1, &f), 0);
	ck_assert_int_eq(bf_registry_create(r, "g", 1, &p, 2, &g), 0);
	/* As loaded from checkpoints: f's of LSN 20 with a time, g's of LSN 5 without. */
	f->lsn = 20;
	ck_assert_int_eq(bf_registry_set_expire(r, f, 7000), 0);
	g->lsn = 5;
	rp = replay_new(r, NULL, NULL);

	/* Older than f's checkpoint, and as old: skipped, PERSIST included. */
	bf_record_expire(f->id, 1000, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 10, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_int_eq(bf_replay_apply(rp, 20, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	bf_record_expire(f->id, 0, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 19, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(f), 7000);
	ck_assert_uint_eq(f->lsn, 20);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.skipped, 3);
	ck_assert_uint_eq(st.applied, 0);

	/* Newer: applied. g gets a time earlier than f's: it is the next to expire. */
	bf_record_expire(g->id, 3000, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 21, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 3000);
	ck_assert_uint_eq(g->lsn, 21);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), g);
	/* f's time moved past g's, then cleared. */
	bf_record_expire(f->id, 2000, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 22, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(f), 2000);
	ck_assert_uint_eq(f->lsn, 22);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	bf_record_expire(f->id, 0, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 23, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(f), 0);
	ck_assert_uint_eq(EXPIRE_POS(f), 0);
	ck_assert_uint_eq(f->lsn, 23);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), g);
	uint64_t sum;
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 1);
	ck_assert_uint_eq(sum, 3000);

	/* An id no filter has: unknown, nothing changes. */
	bf_record_expire(g->id + 100, 1, buf);
	ck_assert_int_eq(bf_replay_apply(rp, 24, BF_REC_EXPIRE, buf, 16, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 1);

	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.applied, 3);
	ck_assert_uint_eq(st.skipped, 3);
	ck_assert_uint_eq(st.unknown, 1);
	replay_end(rp);
	/* Freed with g still expiring. */
	bf_registry_free(r);
}
END_TEST

/*
 * A filter that expired while the daemon ran is dropped without a record (the start drops it
 * again from what the log says), and its name may be taken by a new filter: the replay brings
 * the old filter back with its time long past, then the new filter's CREATE replaces it; the
 * new one's own time applies to it alone.
 */
START_TEST(replay_expired_then_created_again)
{
	struct bf_registry *live, *ck;
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};

	ck_assert_int_eq(bf_registry_new(0, &live), 0);
	struct bf_filter *old = create(live, "x", p, 1);
	keys(old, BF_REC_ADD, "old", 0, 10);
	expire_(live, "x", 1000);
	create(live, "other", p, 2);
	ck = checkpoint(live);
	uint64_t cut = nlog;
	/* Expired: dropped, nothing logged (cmd_expire_due). */
	ck_assert_int_eq(bf_registry_drop(live, "x", 1), 0);
	struct bf_filter *x = create(live, "x", p, 3);
	keys(x, BF_REC_ADD, "new", 0, 10);
	expire_(live, "x", 9000000000000ULL);

	replay(ck, cut);
	assert_same_registry(live, ck);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_get(ck, "x", 1)), 9000000000000ULL);
	ck_assert_uint_eq(bf_registry_expiring(ck, NULL), 1);
	bf_registry_free(ck);

	ck_assert_int_eq(bf_registry_new(0, &ck), 0);
	replay(ck, 0);
	assert_same_registry(live, ck);
	bf_registry_free(ck);
	bf_registry_free(live);
	log_free();
}
END_TEST

/* With the owner's table, the replay asks it only about the filters its records name (a start
 * after a checkpoint, with a short log, does not index every filter), applies a record newer
 * than the filter's checkpoint, and never asks again about a filter it dropped. */
START_TEST(replay_asks_only_what_records_name)
{
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	unsigned char buf[BF_RECORD_KEYS_HEAD + BF_RECORD_HASH_BYTES];
	struct bf_filter *f, *x = NULL;
	struct bf_replay_stats st;
	struct bf_registry *r;
	struct bf_replay *rp;
	char name[16], why[128] = "";

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, strlen(name), &p, (uint64_t)i, &f), 0);
		f->lsn = 10; /* as loaded from a checkpoint that holds LSN 10 */
		x = i == 7 ? f : x;
	}
	rp = replay_new(r, NULL, NULL);
	bf_record_id(x->id, buf);
	bf_record_put_hash(bf_filter_hash(x, "k", 1), buf + BF_RECORD_KEYS_HEAD);
	ck_assert_int_eq(bf_replay_apply(rp, 9, BF_REC_ADD, buf, sizeof(buf), why, sizeof(why)), 0);
	ck_assert_int_eq(bf_filter_check(x, "k", 1), 0);
	ck_assert_int_eq(bf_replay_apply(rp, 11, BF_REC_ADD, buf, sizeof(buf), why, sizeof(why)),
			 0);
	ck_assert_int_eq(bf_filter_check(x, "k", 1), 1);
	ck_assert_uint_eq(x->lsn, 11);
	/* Dropped, then named again (only a damaged log does that): an unknown filter. */
	ck_assert_int_eq(
	    bf_replay_apply(rp, 12, BF_REC_DROP, buf, BF_RECORD_KEYS_HEAD, why, sizeof(why)), 0);
	ck_assert_ptr_null(bf_registry_get(r, "f7", 2));
	ck_assert_int_eq(bf_replay_apply(rp, 13, BF_REC_ADD, buf, sizeof(buf), why, sizeof(why)),
			 0);
	bf_replay_finish(rp);
	bf_replay_stats(rp, &st);
	ck_assert_uint_eq(st.applied, 2);
	ck_assert_uint_eq(st.skipped, 1);
	ck_assert_uint_eq(st.unknown, 1);
	ck_assert_uint_eq(bf_registry_count(r), 99);
	/* Asked about x for each record but the last, which the replay knew to be dropped. */
	ck_assert_uint_eq(lookups, with_lookup ? 3 : 0);
	replay_end(rp);
	bf_registry_free(r);
}
END_TEST

static void lookup_on(void)
{
	with_lookup = true;
}

static void lookup_off(void)
{
	with_lookup = false;
}

static Suite *record_suite(void)
{
	Suite *s = suite_create("record");

	/* Replays index the registry themselves ("record"), or ask the owner's table by id
	 * ("record_lookup", as the server's start does). */
	for (int k = 0; k < 2; k++) {
		TCase *tc = tcase_create(k ? "record_lookup" : "record");

		tcase_add_checked_fixture(tc, k ? lookup_on : lookup_off, NULL);
		tcase_add_test(tc, create_round_trip_and_malformed);
		tcase_add_test(tc, replay_equals_live);
		tcase_add_test(tc, replay_load_and_body);
		tcase_add_test(tc, replay_same_name_again);
		tcase_add_test(tc, replay_flushall);
		tcase_add_test(tc, rename_round_trip_and_malformed);
		tcase_add_test(tc, replay_rename);
		tcase_add_test(tc, replay_rename_holder_newer);
		tcase_add_test(tc, replay_rename_one_by_one);
		tcase_add_test(tc, replay_rename_replaced_again);
		tcase_add_test(tc, expire_round_trip_and_malformed);
		tcase_add_test(tc, replay_expire);
		tcase_add_test(tc, replay_expire_one_by_one);
		tcase_add_test(tc, replay_expired_then_created_again);
		tcase_add_test(tc, replay_asks_only_what_records_name);
		suite_add_tcase(s, tc);
	}
	return s;
}

CHECK_MAIN(record_suite)
