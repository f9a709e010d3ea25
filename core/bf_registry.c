/* SPDX-License-Identifier: MIT */
/* The registry of named filters and their shared memory budget; see bf_registry.h. */
#include "core/bf_registry.h"

#include "core/bf_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Open hashing with chains; the table doubles when it holds more filters than buckets. The
 * doubling is incremental, as Redis's dict rehashes: a second table twice as large takes the
 * new entries, and each change moves REHASH_STEP buckets of the old one over (a million
 * filters are never moved in one go on the loop: that was ~30 ms). Lookups look in both.
 *
 * The chains are intrusive: a filter is its own entry (f->reg_next), so a filter costs the
 * registry no allocation of its own, only its share of the buckets. Its name's hash is not
 * kept: a move to the larger table hashes the name again (a rehash moves each filter once).
 */
#define REHASH_STEP 4

/* A filter's share of the buckets (load factor <= 1, so at most two pointers per filter after
 * a rehash doubles them) and of the name index (leaves at least half full on average: two
 * pointers). */
#define REGISTRY_ENTRY_COST (4 * sizeof(struct bf_filter *))

struct bf_registry {
	struct bf_budget budget;
	uint64_t entry_cost; /* charged per filter beyond the filter's own cost */
	uint64_t next_id;    /* the id the next new filter gets */
	/* t[0], and while rehashing (rehash_pos <= t[0].n) t[1], into which t[0]'s buckets
	 * below rehash_pos have moved. */
	struct table {
		struct bf_filter **b;
		size_t n; /* power of two */
	} t[2];
	size_t rehash_pos; /* SIZE_MAX: not rehashing */
	size_t count;
	uint64_t changes;      /* filters inserted and taken out, ever (bf_registry_changes) */
	struct bf_index names; /* every filter, by name (listings) */
	/* The filters that expire, a binary min-heap by expire_ms (heap[i - 1] has
	 * expire_pos i), and the sum of their expire_ms (INFO's avg_ttl). */
	struct bf_filter **heap;
	size_t nheap, heap_cap;
	uint64_t expire_sum;
	void (*release)(void *arg, struct bf_filter *f); /* bf_registry_set_release */
	void *release_arg;
};

bool bf_name_valid(const char *name, size_t len)
{
	if (len < 1 || len > BF_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c <= 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

/* ---- the expiry heap ---- */

static void heap_set(struct bf_registry *r, size_t i, struct bf_filter *f)
{
	r->heap[i] = f;
	f->rare->expire_pos = (uint32_t)(i + 1);
}

static void heap_up(struct bf_registry *r, size_t i)
{
	struct bf_filter *f = r->heap[i];

	while (i) {
		size_t parent = (i - 1) / 2;
		if (r->heap[parent]->rare->expire_ms <= f->rare->expire_ms)
			break;
		heap_set(r, i, r->heap[parent]);
		i = parent;
	}
	heap_set(r, i, f);
}

static void heap_down(struct bf_registry *r, size_t i)
{
	struct bf_filter *f = r->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= r->nheap)
			break;
		if (c + 1 < r->nheap &&
		    r->heap[c + 1]->rare->expire_ms < r->heap[c]->rare->expire_ms)
			c++;
		if (f->rare->expire_ms <= r->heap[c]->rare->expire_ms)
			break;
		heap_set(r, i, r->heap[c]);
		i = c;
	}
	heap_set(r, i, f);
}

/* Take f (in the heap) out of it. */
static void heap_remove(struct bf_registry *r, struct bf_filter *f)
{
	size_t i = f->rare->expire_pos - 1;
	struct bf_filter *last = r->heap[--r->nheap];

	r->expire_sum -= f->rare->expire_ms;
	f->rare->expire_pos = 0;
	if (last == f)
		return;
	heap_set(r, i, last);
	heap_down(r, i);
	heap_up(r, last->rare->expire_pos - 1);
}

/* Put f (f->rare->expire_ms set, not in the heap) in it. 0 or -ENOMEM. */
static int heap_add(struct bf_registry *r, struct bf_filter *f)
{
	if (r->nheap == r->heap_cap) {
		size_t cap = r->heap_cap ? 2 * r->heap_cap : 16;
		struct bf_filter **h = realloc(r->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		r->heap = h;
		r->heap_cap = cap;
	}
	r->expire_sum += f->rare->expire_ms;
	heap_set(r, r->nheap++, f);
	heap_up(r, r->nheap - 1);
	return 0;
}

int bf_registry_set_expire(struct bf_registry *r, struct bf_filter *f, uint64_t expire_ms)
{
	struct bf_filter_rare *x = f->rare;

	if (x && x->expire_pos) {
		if (!expire_ms) {
			heap_remove(r, f);
			x->expire_ms = 0;
			return 0;
		}
		r->expire_sum = r->expire_sum - x->expire_ms + expire_ms;
		x->expire_ms = expire_ms;
		heap_down(r, x->expire_pos - 1);
		heap_up(r, x->expire_pos - 1);
		return 0;
	}
	if (!expire_ms)
		return 0;
	int rc = bf_filter_set_expiry(f, expire_ms);
	if (rc)
		return rc;
	rc = heap_add(r, f);
	if (rc)
		f->rare->expire_ms = 0;
	return rc;
}

struct bf_filter *bf_registry_next_expiring(const struct bf_registry *r)
{
	return r->nheap ? r->heap[0] : NULL;
}

size_t bf_registry_expiring(const struct bf_registry *r, uint64_t *sum_ms)
{
	if (sum_ms)
		*sum_ms = r->expire_sum;
	return r->nheap;
}

static uint64_t name_hash(const char *name, size_t len)
{
	return XXH3_64bits(name, len);
}

int bf_registry_new(uint64_t max_memory, struct bf_registry **out)
{
	struct bf_registry *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->t[0].n = 64;
	r->t[0].b = calloc(r->t[0].n, sizeof(*r->t[0].b));
	r->rehash_pos = SIZE_MAX;
	if (!r->t[0].b) {
		free(r);
		return -ENOMEM;
	}
	r->budget.limit = max_memory;
	r->entry_cost = REGISTRY_ENTRY_COST;
	r->next_id = 1;
	*out = r;
	return 0;
}

void bf_registry_free(struct bf_registry *r)
{
	if (!r)
		return;
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < r->t[k].n; i++) {
			for (struct bf_filter *f = r->t[k].b[i], *next; f; f = next) {
				next = f->reg_next;
				bf_filter_free(f);
			}
		}
		free(r->t[k].b);
	}
	bf_index_clear(&r->names);
	free(r->heap);
	free(r);
}

static bool rehashing(const struct bf_registry *r)
{
	return r->rehash_pos != SIZE_MAX;
}

/* The bucket of hash: in t[1] if t[0]'s bucket has moved there. */
static struct bf_filter **bucket(const struct bf_registry *r, uint64_t hash)
{
	size_t i = hash & (r->t[0].n - 1);

	if (rehashing(r) && i < r->rehash_pos)
		return &r->t[1].b[hash & (r->t[1].n - 1)];
	return &r->t[0].b[i];
}

static struct bf_filter **find(const struct bf_registry *r, const char *name, size_t len,
			       uint64_t hash)
{
	struct bf_filter **pp = bucket(r, hash);

	for (; *pp; pp = &(*pp)->reg_next) {
		const struct bf_filter *f = *pp;
		if (f->name_len == len && memcmp(bf_filter_name(f), name, len) == 0)
			break;
	}
	return pp;
}

/* Move up to steps buckets of t[0] over to t[1]; t[1] becomes t[0] once all have moved. */
static void rehash_step(struct bf_registry *r, size_t steps)
{
	if (!rehashing(r))
		return;
	for (; steps && r->rehash_pos < r->t[0].n; steps--, r->rehash_pos++) {
		struct bf_filter **from = &r->t[0].b[r->rehash_pos];

		for (struct bf_filter *f = *from, *next; f; f = next) {
			uint64_t hash = name_hash(bf_filter_name(f), f->name_len);
			struct bf_filter **to = &r->t[1].b[hash & (r->t[1].n - 1)];

			next = f->reg_next;
			f->reg_next = *to;
			*to = f;
		}
		*from = NULL;
	}
	if (r->rehash_pos == r->t[0].n) {
		free(r->t[0].b);
		r->t[0] = r->t[1];
		r->t[1] = (struct table){NULL, 0};
		r->rehash_pos = SIZE_MAX;
	}
}

/* Begin moving to a table of n buckets (a power of two, more than now). */
static void rehash_begin(struct bf_registry *r, size_t n)
{
	struct bf_filter **b;

	if (rehashing(r))
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return; /* chains just get longer */
	r->t[1] = (struct table){b, n};
	r->rehash_pos = 0;
}

void bf_registry_reserve(struct bf_registry *r, size_t n)
{
	rehash_step(r, SIZE_MAX);
	size_t want = r->t[0].n;

	while (want < n && want < ((size_t)1 << 40))
		want *= 2;
	if (want > r->t[0].n) {
		rehash_begin(r, want);
		rehash_step(r, SIZE_MAX); /* at start: all at once */
	}
}

void bf_registry_defer_names(struct bf_registry *r)
{
	bf_index_defer(&r->names);
}

int bf_registry_index_names(struct bf_registry *r)
{
	int rc = bf_index_flush(&r->names);

	/* The registry lets no two filters share a name: -EEXIST cannot happen. */
	return rc == -ENOMEM ? rc : 0;
}

uint64_t bf_registry_charge(const struct bf_registry *r, const struct bf_filter *f)
{
	return bf_filter_cost(f) + r->entry_cost;
}

void bf_registry_each(const struct bf_registry *r, void (*fn)(void *arg, struct bf_filter *f),
		      void *arg)
{
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < r->t[k].n; i++)
			for (struct bf_filter *f = r->t[k].b[i], *next; f; f = next) {
				next = f->reg_next;
				fn(arg, f);
			}
}

void bf_registry_prefetch(const struct bf_registry *r, const char *name, size_t len)
{
	__builtin_prefetch(bucket(r, name_hash(name, len)));
}

struct bf_filter *bf_registry_get(const struct bf_registry *r, const char *name, size_t len)
{
	return *find(r, name, len, name_hash(name, len));
}

/* Link f under name; the name was validated and is absent. */
static int insert(struct bf_registry *r, const char *name, size_t len, uint64_t hash,
		  struct bf_filter *f)
{
	if ((f->name_len != len || memcmp(bf_filter_name(f), name, len)) &&
	    bf_filter_set_name(f, name, len))
		return -ENOMEM;
	if (bf_index_insert(&r->names, f))
		return -ENOMEM;
	rehash_step(r, REHASH_STEP);
	struct bf_filter **head = bucket(r, hash);
	f->reg_next = *head;
	*head = f;
	/* Doubled when full; REHASH_STEP buckets per insert move the old table over long before
	 * the new one is full in turn. */
	r->changes++;
	if (++r->count > r->t[0].n && !rehashing(r))
		rehash_begin(r, r->t[0].n * 2);
	return 0;
}

/* Take *pp (an inserted filter, from find) out of the table and the name index: insert
 * undone. Returns it. */
static struct bf_filter *unlink_filter(struct bf_registry *r, struct bf_filter **pp)
{
	struct bf_filter *f = *pp;

	*pp = f->reg_next;
	bf_index_remove(&r->names, f);
	r->count--;
	r->changes++;
	return f;
}

int bf_registry_create(struct bf_registry *r, const char *name, size_t len,
		       const struct bf_params *p, uint64_t seed, struct bf_filter **out)
{
	if (!bf_name_valid(name, len))
		return -EINVAL;
	uint64_t hash = name_hash(name, len);
	struct bf_filter *found = *find(r, name, len, hash);
	if (found) {
		if (out)
			*out = found;
		return -EEXIST;
	}

	struct bf_filter *f;
	if (r->next_id > BF_ID_MAX)
		return -ENOMEM; /* out of ids: as good as out of memory */
	int rc = bf_budget_reserve(&r->budget, r->entry_cost);
	if (rc)
		return rc;
	rc = bf_filter_new_named(p, name, len, seed, &r->budget, &f);
	if (rc) {
		bf_budget_release(&r->budget, r->entry_cost);
		return rc;
	}
	rc = insert(r, name, len, hash, f);
	if (rc) {
		bf_filter_free(f);
		bf_budget_release(&r->budget, r->entry_cost);
		return rc;
	}
	f->id = r->next_id++;
	if (out)
		*out = f;
	return 0;
}

/* bf_registry_adopt of a name checked by the caller. */
static int adopt(struct bf_registry *r, const char *name, size_t len, struct bf_filter *f)
{
	if (bf_filter_budget(f))
		return -EINVAL;
	if (!f->id && r->next_id > BF_ID_MAX)
		return -ENOMEM;
	uint64_t hash = name_hash(name, len);
	if (*find(r, name, len, hash))
		return -EEXIST;
	/* A name longer than f's room is kept by its rare part: made now, so that its cost is
	 * charged with f's (f has no budget yet). */
	if (len >= f->name_room && bf_filter_rare_get(f))
		return -ENOMEM;
	if (f->rare)
		f->rare->expire_pos = 0;
	int rc = bf_filter_expire_ms(f) ? heap_add(r, f) : 0;
	if (!rc)
		rc = insert(r, name, len, hash, f);
	/* Last, as it cannot be undone: f and its share of the registry charged to the registry's
	 * budget, which f then has. */
	if (!rc && (rc = bf_filter_join_budget(f, &r->budget, r->entry_cost)))
		unlink_filter(r, find(r, name, len, hash));
	if (rc) {
		if (f->rare && f->rare->expire_pos)
			heap_remove(r, f);
		return rc;
	}
	if (!f->id)
		f->id = r->next_id++;
	else if (f->id >= r->next_id)
		r->next_id = f->id + 1;
	return 0;
}

int bf_registry_adopt(struct bf_registry *r, const char *name, size_t len, struct bf_filter *f)
{
	return bf_name_valid(name, len) ? adopt(r, name, len, f) : -EINVAL;
}

/* The hidden name of id: 17 bytes and a NUL. */
static size_t hidden_name(uint64_t id, char out[18])
{
	return (size_t)snprintf(out, 18, "%c%016" PRIx64, BF_HIDDEN_NAME, id);
}

int bf_registry_adopt_hidden(struct bf_registry *r, struct bf_filter *f)
{
	char name[18];
	size_t len;

	if (!f->id)
		return -EINVAL;
	len = hidden_name(f->id, name);
	if (bf_filter_set_name(f, name, len))
		return -ENOMEM;
	return adopt(r, bf_filter_name(f), f->name_len, f);
}

struct bf_filter *bf_registry_get_hidden(const struct bf_registry *r, uint64_t id)
{
	char name[18];
	size_t len = hidden_name(id, name);

	return bf_registry_get(r, name, len);
}

bool bf_registry_hidden(const struct bf_filter *f)
{
	return f->name_len == 17 && bf_filter_name(f)[0] == BF_HIDDEN_NAME;
}

int bf_registry_drop(struct bf_registry *r, const char *name, size_t len)
{
	rehash_step(r, REHASH_STEP);
	struct bf_filter **pp = find(r, name, len, name_hash(name, len));
	if (!*pp)
		return -ENOENT;
	struct bf_filter *f = unlink_filter(r, pp);
	if (f->rare && f->rare->expire_pos)
		heap_remove(r, f);
	bf_budget_release(&r->budget, r->entry_cost);
	if (r->release)
		r->release(r->release_arg, f);
	else
		bf_filter_free(f);
	return 0;
}

void bf_registry_set_release(struct bf_registry *r, void (*fn)(void *arg, struct bf_filter *f),
			     void *arg)
{
	r->release = fn;
	r->release_arg = arg;
}

int bf_registry_rename(struct bf_registry *r, struct bf_filter *f, const char *name, size_t len)
{
	if (!bf_name_valid(name, len))
		return -EINVAL;
	uint64_t hash = name_hash(name, len);
	if (*find(r, name, len, hash))
		return -EEXIST;
	struct bf_filter **pp =
	    find(r, bf_filter_name(f), f->name_len, name_hash(bf_filter_name(f), f->name_len));
	if (*pp != f)
		return -ENOENT;
	/* Out of the index while the name changes; back in (under the new name, or the old one
	 * if that failed) with memory reserved first. */
	int rc = bf_index_reserve(&r->names);
	if (rc)
		return rc;
	bf_index_remove(&r->names, f);
	rc = bf_filter_set_name(f, name, len);
	bf_index_insert(&r->names, f);
	if (rc)
		return rc;
	*pp = f->reg_next;
	struct bf_filter **head = bucket(r, hash);
	f->reg_next = *head;
	*head = f;
	return 0;
}

static bool has_prefix(const struct bf_filter *f, const char *prefix, size_t plen)
{
	return f->name_len >= plen && memcmp(bf_filter_name(f), prefix, plen) == 0;
}

int bf_registry_list(const struct bf_registry *r, const char *prefix, size_t plen,
		     struct bf_filter ***out, size_t *n)
{
	struct bf_index_pos p = bf_index_seek(&r->names, prefix, plen, true);
	struct bf_filter **list = NULL, *f;
	size_t k = 0, cap = 0;

	while ((f = bf_index_next(&r->names, &p)) && has_prefix(f, prefix, plen)) {
		if (k == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct bf_filter **nl = realloc(list, ncap * sizeof(*nl));
			if (!nl) {
				free(list);
				return -ENOMEM;
			}
			list = nl;
			cap = ncap;
		}
		list[k++] = f;
	}
	*out = list;
	*n = k;
	return 0;
}

static uint64_t rev64(uint64_t v)
{
	v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
	v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
	v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
	return __builtin_bswap64(v);
}

/* Call fn for the filters of bucket i of table t; how many. */
static size_t scan_bucket(const struct table *t, uint64_t i, void (*fn)(void *, struct bf_filter *),
			  void *arg)
{
	size_t n = 0;

	for (struct bf_filter *f = t->b[i & (t->n - 1)], *next; f; f = next, n++) {
		next = f->reg_next;
		fn(arg, f);
	}
	return n;
}

/* The cursor after v, counting the bits of mask with their order reversed: with a table twice
 * as large, the buckets a smaller one's bucket split into come right after it. */
static uint64_t scan_next(uint64_t v, uint64_t mask)
{
	v |= ~mask;
	v = rev64(v);
	v++;
	return rev64(v);
}

uint64_t bf_registry_scan(const struct bf_registry *r, uint64_t cursor, size_t count,
			  void (*fn)(void *arg, struct bf_filter *f), void *arg)
{
	uint64_t v = cursor;
	size_t seen = 0, looked = 0;

	if (count == 0)
		count = 1;
	do {
		if (!rehashing(r)) {
			seen += scan_bucket(&r->t[0], v, fn, arg);
			v = scan_next(v, r->t[0].n - 1);
			continue;
		}
		/* Both tables, as Redis's dictScan: the smaller one's bucket, then every bucket
		 * of the larger one it expands to (an entry is in one of them). */
		const struct table *small = &r->t[0], *large = &r->t[1];
		if (small->n > large->n) {
			small = &r->t[1];
			large = &r->t[0];
		}
		uint64_t m0 = small->n - 1, m1 = large->n - 1;
		seen += scan_bucket(small, v, fn, arg);
		do {
			seen += scan_bucket(large, v, fn, arg);
			v = scan_next(v, m1);
		} while (v & (m0 ^ m1));
	} while (v && seen < count && ++looked < 10 * count);
	return v;
}

/* Name order of prefix[0, plen) against name[0, len). */
static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = memcmp(a, b, n);
	if (c)
		return c;
	return (alen > blen) - (alen < blen);
}

/* Where a listing from prefix and after starts: the later of just after `after` and the first
 * name with the prefix. */
static struct bf_index_pos list_start(const struct bf_registry *r, const char *prefix, size_t plen,
				      const char *after, size_t alen)
{
	if (alen && bytes_cmp(after, alen, prefix, plen) >= 0)
		return bf_index_seek(&r->names, after, alen, false);
	return bf_index_seek(&r->names, prefix, plen, true);
}

bool bf_registry_walk(const struct bf_registry *r, const char *prefix, size_t plen,
		      const char *after, size_t alen, size_t limit,
		      void (*fn)(void *arg, struct bf_filter *f), void *arg)
{
	struct bf_index_pos p = list_start(r, prefix, plen, after, alen);
	struct bf_filter *f;

	while ((f = bf_index_next(&r->names, &p)) && has_prefix(f, prefix, plen)) {
		if (!limit--)
			return true;
		fn(arg, f);
	}
	return false;
}

int bf_registry_page(const struct bf_registry *r, const char *prefix, size_t plen,
		     const char *after, size_t alen, size_t limit, struct bf_filter ***out,
		     size_t *n, bool *more)
{
	struct bf_index_pos p;
	struct bf_filter **h, *f;
	size_t cap = limit < r->count ? limit : r->count, k = 0;

	*out = NULL;
	*n = 0;
	*more = false;
	if (limit == 0 || cap == 0)
		return 0;
	p = list_start(r, prefix, plen, after, alen);
	h = malloc(cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	while ((f = bf_index_next(&r->names, &p)) && has_prefix(f, prefix, plen)) {
		if (k == cap) {
			*more = true;
			break;
		}
		h[k++] = f;
	}
	if (k == 0) {
		free(h);
		return 0;
	}
	*out = h;
	*n = k;
	return 0;
}

uint64_t bf_registry_changes(const struct bf_registry *r)
{
	return r->changes;
}

size_t bf_registry_count(const struct bf_registry *r)
{
	return r->count;
}

uint64_t bf_registry_memory(const struct bf_registry *r)
{
	return r->budget.used;
}

uint64_t bf_registry_max_memory(const struct bf_registry *r)
{
	return r->budget.limit;
}

void bf_registry_set_entry_overhead(struct bf_registry *r, uint64_t bytes)
{
	r->budget.used -= r->count * r->entry_cost;
	r->entry_cost = REGISTRY_ENTRY_COST + bytes;
	r->budget.used += r->count * r->entry_cost;
}

void bf_registry_set_max_memory(struct bf_registry *r, uint64_t max_memory)
{
	r->budget.limit = max_memory;
}
