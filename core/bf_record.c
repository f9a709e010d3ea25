/* SPDX-License-Identifier: MIT */
/* Log record payloads; see bf_record.h for the layouts. */
#include "core/bf_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_registry.h"
#include "core/bf_snapshot.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the log's records are little-endian"
#endif

static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

size_t bf_record_create(const struct bf_filter *f, unsigned char *buf)
{
	uint32_t expansion = f->params->expansion;

	put64(buf, f->id);
	put64(buf + 8, f->seed);
	put64(buf + 16, f->params->capacity);
	memcpy(buf + 24, &f->params->error_rate, 8);
	memcpy(buf + 32, &expansion, 4);
	buf[36] = (unsigned char)f->params->type;
	buf[37] = f->params->persist;
	buf[38] = (unsigned char)f->name_len;
	memcpy(buf + 39, bf_filter_name(f), f->name_len);
	memcpy(buf + 39 + f->name_len, &f->params->ratio, 8);
	memcpy(buf + 47 + f->name_len, &f->params->first, 8);
	return 39 + f->name_len + 16;
}

size_t bf_record_rename(uint64_t id, const char *name, size_t len, unsigned char *buf)
{
	put64(buf, id);
	buf[8] = (unsigned char)len;
	memcpy(buf + 9, name, len);
	return 9 + len;
}

/* A record's filter id, at p: false if it is none a filter can have (0, or past BF_ID_MAX). */
static bool read_id(const unsigned char *p, uint64_t *id)
{
	*id = get64(p);
	return *id && *id <= BF_ID_MAX;
}

size_t bf_record_expire(uint64_t id, uint64_t expire_ms, unsigned char *buf)
{
	put64(buf, id);
	put64(buf + 8, expire_ms);
	return 16;
}

int bf_record_read_expire(const unsigned char *p, size_t len, uint64_t *id, uint64_t *expire_ms)
{
	if (len != 16 || !read_id(p, id))
		return -EINVAL;
	*expire_ms = get64(p + 8);
	return 0;
}

size_t bf_record_id(uint64_t id, unsigned char *buf)
{
	put64(buf, id);
	return 8;
}

void bf_record_put_hash(struct bf_hash h, unsigned char *buf)
{
	put64(buf, h.lo);
	put64(buf + 8, h.hi);
}

struct bf_hash bf_record_get_hash(const unsigned char *p)
{
	return (struct bf_hash){.lo = get64(p), .hi = get64(p + 8)};
}

int bf_record_read_create(const unsigned char *p, size_t len, struct bf_record_create *out)
{
	uint32_t expansion;

	if (len < 39 || (len != 39 + (size_t)p[38] && len != 39 + (size_t)p[38] + 8 &&
			 len != 39 + (size_t)p[38] + 16))
		return -EINVAL;
	out->id = get64(p);
	out->seed = get64(p + 8);
	out->params.capacity = get64(p + 16);
	memcpy(&out->params.error_rate, p + 24, 8);
	memcpy(&expansion, p + 32, 4);
	out->params.expansion = expansion;
	out->params.type = p[36] == BF_TYPE_COUNTING ? BF_TYPE_COUNTING : BF_TYPE_BLOOM;
	out->params.persist = p[37] != 0;
	out->name_len = p[38];
	memcpy(out->name, p + 39, out->name_len);
	out->name[out->name_len] = '\0';
	out->params.ratio = 0.5;
	out->params.first = 0.5;
	if (len > 39 + out->name_len)
		memcpy(&out->params.ratio, p + 39 + out->name_len, 8);
	if (len > 47 + out->name_len)
		memcpy(&out->params.first, p + 47 + out->name_len, 8);
	if (!out->id || out->id > BF_ID_MAX || p[36] > BF_TYPE_COUNTING || p[37] > 1 ||
	    !(out->params.ratio > 0) || !(out->params.first > 0) ||
	    !bf_name_valid(out->name, out->name_len) || bf_params_validate(&out->params))
		return -EINVAL;
	return 0;
}

int bf_record_read_keys(const unsigned char *p, size_t len, uint64_t *id,
			const unsigned char **hashes, size_t *n)
{
	if (len < BF_RECORD_KEYS_HEAD + BF_RECORD_HASH_BYTES ||
	    (len - BF_RECORD_KEYS_HEAD) % BF_RECORD_HASH_BYTES || !read_id(p, id))
		return -EINVAL;
	*hashes = p + BF_RECORD_KEYS_HEAD;
	*n = (len - BF_RECORD_KEYS_HEAD) / BF_RECORD_HASH_BYTES;
	return 0;
}

int bf_record_read_id(const unsigned char *p, size_t len, uint64_t *id)
{
	if (len != 8 || !read_id(p, id))
		return -EINVAL;
	return 0;
}

int bf_record_read_rename(const unsigned char *p, size_t len, uint64_t *id, const char **name,
			  size_t *name_len)
{
	if (len < 9 || len != 9 + (size_t)p[8] || !read_id(p, id))
		return -EINVAL;
	*name = (const char *)p + 9;
	*name_len = p[8];
	return bf_name_valid(*name, *name_len) ? 0 : -EINVAL;
}

int bf_record_read_blob(const unsigned char *p, size_t len, int type, uint64_t *id, uint64_t *off,
			const unsigned char **data, size_t *dlen)
{
	size_t head = type == BF_REC_BODY ? 16 : 8;

	if (len < head || !read_id(p, id))
		return -EINVAL;
	if (off)
		*off = type == BF_REC_BODY ? get64(p + 8) : 0;
	*data = p + head;
	*dlen = len - head;
	return 0;
}

/* ---- replay ---- */

/*
 * Open addressing by id; id 0 marks a free slot. The filters the replay created, renamed or
 * dropped (a NULL filter: the owner's lookup is not asked about it again), or every filter of
 * the registry when there is no lookup (index_build).
 */
struct slot {
	uint64_t id;
	struct bf_filter *f;
	bool gone; /* renamed to a name a newer checkpoint's filter holds (replay_rename) */
};

struct bf_replay {
	struct bf_registry *reg;
	bf_replay_lookup_fn lookup;
	bf_replay_dropping_fn dropping;
	bf_replay_created_fn created;
	bf_replay_renamed_fn renamed;
	void *arg;
	struct slot *slots;
	size_t cap, used; /* used: slots with an id, dropped ones included */
	struct bf_replay_stats st;
	bool indexed; /* index_build() ran */
};

static struct slot *slot_of(const struct bf_replay *rp, uint64_t id)
{
	size_t mask = rp->cap - 1, i = (size_t)(id * 0x9e3779b97f4a7c15ULL) & mask;

	while (rp->slots[i].id && rp->slots[i].id != id)
		i = (i + 1) & mask;
	return &rp->slots[i];
}

/* Room for n more ids: after it, n slots are taken without growing. 0, or -ENOMEM (nothing
 * changed). */
static int index_room(struct bf_replay *rp, size_t n)
{
	struct slot *old = rp->slots;
	size_t ocap = rp->cap, cap = ocap ? ocap : 64;

	if (2 * (rp->used + n) <= ocap)
		return 0;
	while (cap < 2 * (rp->used + n))
		cap *= 2;
	rp->slots = calloc(cap, sizeof(*rp->slots));
	if (!rp->slots) {
		rp->slots = old;
		return -ENOMEM;
	}
	rp->cap = cap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].id)
			*slot_of(rp, old[i].id) = old[i];
	free(old);
	return 0;
}

/* The slot of id, taken for f if id had none. NULL if out of memory (nothing changed); never
 * NULL for an id that has one. */
static struct slot *index_get(struct bf_replay *rp, uint64_t id, struct bf_filter *f)
{
	struct slot *s;

	if (rp->cap && (s = slot_of(rp, id))->id)
		return s;
	if (index_room(rp, 1))
		return NULL;
	s = slot_of(rp, id);
	*s = (struct slot){.id = id, .f = f};
	rp->used++;
	return s;
}

/* f joins the index (not gone). 0 or -ENOMEM. */
static int index_put(struct bf_replay *rp, struct bf_filter *f)
{
	struct slot *s = index_get(rp, f->id, f);

	if (!s)
		return -ENOMEM;
	s->f = f;
	s->gone = false;
	return 0;
}

static void index_visit(void *arg, struct bf_filter *f)
{
	(void)index_put(arg, f); /* index_build made room for every filter */
}

int bf_replay_new(struct bf_registry *r, bf_replay_lookup_fn lookup, bf_replay_dropping_fn dropping,
		  bf_replay_created_fn created, bf_replay_renamed_fn renamed, void *arg,
		  struct bf_replay **out)
{
	struct bf_replay *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return -ENOMEM;
	rp->reg = r;
	rp->lookup = lookup;
	rp->dropping = dropping;
	rp->created = created;
	rp->renamed = renamed;
	rp->arg = arg;
	*out = rp;
	return 0;
}

/* Without a lookup: every filter by id, in one unsorted pass, before the first record is
 * applied (a start with nothing to replay builds none). 0 or -ENOMEM. */
static int index_build(struct bf_replay *rp)
{
	if (rp->indexed)
		return 0;
	/* Room for every filter there is at once (no rehash per doubling). */
	if (index_room(rp, bf_registry_count(rp->reg)))
		return -ENOMEM;
	bf_registry_each(rp->reg, index_visit, rp);
	rp->indexed = true;
	return 0;
}

void bf_replay_free(struct bf_replay *rp)
{
	if (!rp)
		return;
	free(rp->slots);
	free(rp);
}

size_t bf_replay_indexed(const struct bf_replay *rp)
{
	return rp->used;
}

void bf_replay_stats(const struct bf_replay *rp, struct bf_replay_stats *out)
{
	*out = rp->st;
}

static int bad(char *why, size_t whylen, const char *what)
{
	if (why && whylen)
		snprintf(why, whylen, "%s", what);
	return -EINVAL;
}

/* The live filter with this id, or NULL: the index knows what the replay changed, the owner
 * what was loaded. */
static struct bf_filter *find(const struct bf_replay *rp, uint64_t id)
{
	if (rp->cap) {
		const struct slot *s = slot_of(rp, id);

		if (s->id)
			return s->f;
	}
	return rp->lookup ? rp->lookup(rp->arg, id) : NULL;
}

/* Drop g, a filter of the registry, as a replayed record says (remove_file: DROP). 0, or
 * -ENOMEM (nothing changed): its id is marked dropped first, so that the owner's lookup, which
 * may still know it, is not asked about it again. Cannot fail if g's id has a slot. */
static int replay_drop(struct bf_replay *rp, struct bf_filter *g, bool remove_file)
{
	struct slot *s = index_get(rp, g->id, g);
	char name[BF_NAME_MAX + 1];
	size_t nlen = g->name_len;

	if (!s)
		return -ENOMEM;
	if (s->f == g)
		s->f = NULL;
	memcpy(name, bf_filter_name(g), nlen);
	if (rp->dropping)
		rp->dropping(rp->arg, g, remove_file);
	bf_registry_drop(rp->reg, name, nlen);
	return 0;
}

/*
 * Whether a filter created at lsn may take name: 1, 0, or -ENOMEM. Another filter holding it
 * came from a checkpoint: one newer than lsn means this create was of an earlier filter of that
 * name, dropped since (0: skip it); an older one was cleared (forgotten, its file kept) before
 * this create, which replaces it, as it did when it ran.
 */
static int name_free(struct bf_replay *rp, uint64_t lsn, const char *name, size_t len)
{
	struct bf_filter *g = bf_registry_get(rp->reg, name, len);

	if (!g)
		return 1;
	if (g->lsn >= lsn)
		return 0;
	/* A filter renamed away from the name (marked gone) is dropped for good; another one was
	 * cleared. */
	const struct slot *s = rp->cap ? slot_of(rp, g->id) : NULL;
	int rc = replay_drop(rp, g, s && s->f == g && s->gone);
	return rc ? rc : 1;
}

static int replay_create(struct bf_replay *rp, uint64_t lsn, const unsigned char *p, size_t len,
			 char *why, size_t whylen)
{
	struct bf_record_create c;
	struct bf_filter *f;

	if (bf_record_read_create(p, len, &c))
		return bad(why, whylen, "malformed CREATE record");
	if (find(rp, c.id)) {
		rp->st.skipped++; /* its checkpoint is newer */
		return 0;
	}
	int rc = name_free(rp, lsn, c.name, c.name_len);
	if (rc <= 0) {
		rp->st.skipped += !rc;
		return rc;
	}
	rc = bf_filter_new_named(&c.params, c.name, c.name_len, c.seed, NULL, &f);
	if (rc)
		return rc == -ENOMEM ? rc : bad(why, whylen, "CREATE with bad parameters");
	f->id = c.id;
	f->lsn = lsn;
	rc = bf_registry_adopt(rp->reg, c.name, c.name_len, f);
	if (!rc)
		rc = index_put(rp, f);
	if (rc) {
		if (bf_registry_get(rp->reg, c.name, c.name_len) == f)
			bf_registry_drop(rp->reg, c.name, c.name_len);
		else
			bf_filter_free(f);
		return rc == -ENOMEM ? rc : bad(why, whylen, "CREATE cannot be applied");
	}
	if (rp->created)
		rp->created(rp->arg, f);
	rp->st.applied++;
	return 0;
}

static int replay_load(struct bf_replay *rp, uint64_t lsn, const unsigned char *p, size_t len,
		       char *why, size_t whylen)
{
	struct bf_snapshot_info info;
	const unsigned char *h;
	struct bf_filter *f;
	uint64_t id;
	size_t hlen;

	if (bf_record_read_blob(p, len, BF_REC_LOAD, &id, NULL, &h, &hlen))
		return bad(why, whylen, "malformed LOAD record");
	if (find(rp, id)) {
		rp->st.skipped++;
		return 0;
	}
	int rc = bf_snapshot_decode(h, hlen, UINT64_MAX, &f, &info, why, whylen);
	if (rc)
		return rc == -ENOMEM ? rc : bad(why, whylen, "LOAD record with a bad header");
	f->id = id;
	f->lsn = lsn;
	char name[BF_NAME_MAX + 1];
	size_t nlen = f->name_len;
	memcpy(name, bf_filter_name(f), nlen);
	rc = name_free(rp, lsn, name, nlen);
	if (rc <= 0) {
		bf_filter_free(f);
		rp->st.skipped += !rc;
		return rc;
	}
	rc = bf_registry_adopt(rp->reg, name, nlen, f);
	if (!rc)
		rc = index_put(rp, f);
	if (rc) {
		if (bf_registry_get(rp->reg, name, nlen) == f)
			bf_registry_drop(rp->reg, name, nlen);
		else
			bf_filter_free(f);
		return rc;
	}
	if (rp->created)
		rp->created(rp->arg, f);
	rp->st.applied++;
	return 0;
}

struct flush_list {
	struct bf_filter **v;
	size_t n, cap;
	uint64_t before;
	bool failed;
};

static void flush_visit(void *arg, struct bf_filter *f)
{
	struct flush_list *l = arg;

	if (f->lsn >= l->before)
		return; /* created (or changed) after the FLUSHALL: a checkpoint's, newer */
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct bf_filter **v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->failed = true;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = f;
}

/* FLUSHALL at lsn: drop every filter whose last change is older. */
static int replay_flushall(struct bf_replay *rp, uint64_t lsn)
{
	struct flush_list l = {.before = lsn};

	bf_registry_each(rp->reg, flush_visit, &l);
	/* Room to mark every one dropped: none of the drops below runs out of memory. */
	int rc = l.failed ? -ENOMEM : index_room(rp, l.n);
	for (size_t i = 0; i < l.n && !rc; i++)
		rc = replay_drop(rp, l.v[i], true);
	free(l.v);
	if (!rc)
		rp->st.applied++;
	return rc;
}

/*
 * RENAME at lsn of f (whose checkpoint is older) to name: a filter holding the name whose last
 * change is older was replaced by it, and is dropped. One whose last change is newer came from
 * a checkpoint taken after f lost the name again: renamed away (a later RENAME record of f
 * names it) or replaced by another filter (a record a checkpoint holds, skipped). f keeps its
 * old name until then, marked gone: bf_replay_finish drops it if no later RENAME came.
 */
static int replay_rename(struct bf_replay *rp, uint64_t lsn, struct bf_filter *f, const char *name,
			 size_t len, char *why, size_t whylen)
{
	struct bf_filter *g = bf_registry_get(rp->reg, name, len);
	/* Room for f's slot and g's: neither index_get nor the drop below runs out of memory. */
	int rc = index_room(rp, 2);

	if (rc)
		return rc;
	/* f has the name already: loaded from a file renamed to it, whose header is older. An
	 * earlier RENAME skipped may have marked it gone: this one names it. */
	if (g == f) {
		index_get(rp, f->id, f)->gone = false;
		rp->st.skipped++;
		return 0;
	}
	if (g && g->lsn >= lsn) {
		index_get(rp, f->id, f)->gone = true;
		rp->st.skipped++;
		return 0;
	}
	if (g && (rc = replay_drop(rp, g, true)))
		return rc;
	index_get(rp, f->id, f)->gone = false;
	char from[BF_NAME_MAX];
	size_t from_len = f->name_len;
	memcpy(from, bf_filter_name(f), from_len);
	rc = bf_registry_rename(rp->reg, f, name, len);
	if (rc)
		return rc == -ENOMEM ? rc : bad(why, whylen, "RENAME cannot be applied");
	f->lsn = lsn;
	if (rp->renamed)
		rp->renamed(rp->arg, f, from, from_len);
	rp->st.applied++;
	return 0;
}

/*
 * A RENAME at lsn of f to name that f's checkpoint already holds (or of a filter gone since,
 * f NULL): it still dropped the filter that held the name then. One that holds it now with an older
 * state (rebuilt from older records of this log, or loaded from a file not yet removed) is that
 * filter: dropped for good. 0 or -ENOMEM.
 */
static int replay_renamed_over(struct bf_replay *rp, uint64_t lsn, const struct bf_filter *f,
			       const char *name, size_t len)
{
	struct bf_filter *g = bf_registry_get(rp->reg, name, len);
	int rc;

	if (!g || g == f || g->lsn >= lsn)
		return 0;
	rc = index_room(rp, 1);
	return rc ? rc : replay_drop(rp, g, true);
}

/*
 * Apply to f the ADD, DELETE, BODY, RENAME, EXPIRE, DROP or CLEAR record at lsn, newer than f's
 * state (lsn > f->lsn): data and n are its keys, bytes or name, off its BODY offset or EXPIRE
 * time. 0, -ENOMEM, or -EINVAL with why set (bad()).
 */
static int replay_change(struct bf_replay *rp, uint64_t lsn, struct bf_filter *f, int type,
			 const unsigned char *data, size_t n, uint64_t off, char *why,
			 size_t whylen)
{
	int rc;

	switch (type) {
	case BF_REC_ADD:
		for (size_t i = 0; i < n; i++) {
			rc = bf_filter_add_hash(f, bf_record_get_hash(data + 16 * i));
			if (rc < 0)
				return rc == -ENOMEM ? rc
						     : bad(why, whylen, "ADD cannot be applied");
		}
		rp->st.keys += n;
		break;
	case BF_REC_DELETE:
		/* A delete the log holds was refused or done exactly so before; its outcome is
		 * the same now (same state, same hash), so the result is not checked. */
		for (size_t i = 0; i < n; i++)
			bf_filter_delete_hash(f, bf_record_get_hash(data + 16 * i));
		rp->st.keys += n;
		break;
	case BF_REC_BODY:
		if (bf_filter_body_write(f, off, data, n))
			return bad(why, whylen, "BODY outside its filter");
		break;
	case BF_REC_RENAME:
		return replay_rename(rp, lsn, f, (const char *)data, n, why, whylen);
	case BF_REC_EXPIRE:
		/* A filter expired by now is dropped once the replay is done, as a live one is
		 * when it is due. */
		if (bf_registry_set_expire(rp->reg, f, off))
			return -ENOMEM;
		f->changes++;
		break;
	default:
		rc = replay_drop(rp, f, type == BF_REC_DROP);
		rp->st.applied += !rc;
		return rc;
	}
	f->lsn = lsn;
	rp->st.applied++;
	return 0;
}

int bf_replay_apply(struct bf_replay *rp, uint64_t lsn, int type, const unsigned char *p,
		    size_t len, char *why, size_t whylen)
{
	const unsigned char *data = NULL;
	struct bf_filter *f;
	uint64_t id, off = 0;
	size_t n = 0;
	int rc;

	if (!rp->lookup && index_build(rp))
		return -ENOMEM;
	switch (type) {
	case BF_REC_CREATE:
		return replay_create(rp, lsn, p, len, why, whylen);
	case BF_REC_LOAD:
		return replay_load(rp, lsn, p, len, why, whylen);
	case BF_REC_ADD:
	case BF_REC_DELETE:
		if (bf_record_read_keys(p, len, &id, &data, &n))
			return bad(why, whylen, "malformed ADD or DELETE record");
		break;
	case BF_REC_DROP:
	case BF_REC_CLEAR:
		if (bf_record_read_id(p, len, &id))
			return bad(why, whylen, "malformed DROP or CLEAR record");
		break;
	case BF_REC_BODY:
		if (bf_record_read_blob(p, len, type, &id, &off, &data, &n))
			return bad(why, whylen, "malformed BODY record");
		break;
	case BF_REC_FLUSHALL:
		if (len)
			return bad(why, whylen, "malformed FLUSHALL record");
		return replay_flushall(rp, lsn);
	case BF_REC_RENAME:
		if (bf_record_read_rename(p, len, &id, (const char **)&data, &n))
			return bad(why, whylen, "malformed RENAME record");
		break;
	case BF_REC_EXPIRE:
		if (bf_record_read_expire(p, len, &id, &off))
			return bad(why, whylen, "malformed EXPIRE record");
		break;
	default:
		return bad(why, whylen, "unknown record type");
	}
	f = find(rp, id);
	if (!f) {
		/* Gone since (its later drop is in the log, or was checkpointed): the rename
		 * still dropped the filter that held the name then. */
		if (type == BF_REC_RENAME &&
		    (rc = replay_renamed_over(rp, lsn, NULL, (const char *)data, n)))
			return rc;
		rp->st.unknown++;
		return 0;
	}
	if (lsn <= f->lsn) {
		if (type == BF_REC_RENAME &&
		    (rc = replay_renamed_over(rp, lsn, f, (const char *)data, n)))
			return rc;
		rp->st.skipped++;
		return 0;
	}
	return replay_change(rp, lsn, f, type, data, n, off, why, whylen);
}

void bf_replay_finish(struct bf_replay *rp)
{
	for (size_t i = 0; i < rp->cap; i++) {
		if (rp->slots[i].f && rp->slots[i].gone) {
			(void)replay_drop(rp, rp->slots[i].f, true); /* it has a slot */
			rp->st.applied++;
		}
	}
}
