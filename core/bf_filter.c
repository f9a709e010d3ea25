/* SPDX-License-Identifier: MIT */
/* Filters: the scalable chain of layers, plain or counting; see bf_filter.h. */
#include "core/bf_filter.h"
#include "core/bf_kernels.h"
#include "core/bf_pool.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Keys hashed and prefetched together by the batch forms. */
#define BATCH 32

int bf_budget_reserve(struct bf_budget *b, uint64_t bytes)
{
	if (!b)
		return 0;
	if (b->limit && (bytes > b->limit || b->used > b->limit - bytes))
		return -ENOMEM;
	b->used += bytes;
	return 0;
}

uint64_t bf_budget_room(const struct bf_budget *b)
{
	if (!b || !b->limit)
		return UINT64_MAX;
	return b->used < b->limit ? b->limit - b->used : 0;
}

void bf_budget_release(struct bf_budget *b, uint64_t bytes)
{
	if (b)
		b->used -= bytes;
}

int bf_params_validate(const struct bf_params *p)
{
	if (p->capacity < 1 || !(p->error_rate > 0 && p->error_rate < 1))
		return -EINVAL;
	if (p->error_rate < BF_MIN_ERROR_RATE)
		return -EDOM;
	if (p->type != BF_TYPE_BLOOM && p->type != BF_TYPE_COUNTING)
		return -EINVAL;
	if (p->expansion > BF_MAX_EXPANSION)
		return -EINVAL;
	if (!(p->ratio >= 0 && p->ratio < 1) || !(p->first >= 0 && p->first < 1))
		return -EINVAL;
	return 0;
}

/* The capacity of the layer after one of capacity c (saturating); c itself if non-scaling. */
static uint64_t next_capacity(const struct bf_params *p, uint64_t c)
{
	uint32_t x = p->expansion;

	return !x ? c : c > UINT64_MAX / x ? UINT64_MAX : c * x;
}

uint64_t bf_filter_layer_capacity(const struct bf_params *p, unsigned i)
{
	uint64_t c = p->capacity;

	for (unsigned k = 0; p->expansion && k < i; k++)
		c = next_capacity(p, c);
	return c;
}

void bf_filter_layer_target(const struct bf_params *p, unsigned i, uint64_t *cap, double *err)
{
	*cap = bf_filter_layer_capacity(p, i);
	if (p->expansion == 0) {
		*err = p->error_rate;
		return;
	}
	/* Layer i: capacity * expansion^i; error * a for the first, then error * (1 - a) *
	 * (1 - r) * r^(i-1): the chain stays under error (bar the floor, which a chain reaches
	 * only after hundreds of layers). */
	double a = p->first > 0 ? p->first : BF_FIRST_SHARE;
	double r = p->ratio > 0 ? p->ratio : 0.5;
	*err = i == 0 ? p->error_rate * a : p->error_rate * (1 - a) * (1 - r) * pow(r, i - 1);
	if (*err < BF_LAYER_MIN_ERROR)
		*err = BF_LAYER_MIN_ERROR;
}

/* bf_filter_choose_ratio's answers, as bf_layer_plan's: per thread, overwritten on collision. */
#define RATIO_CACHE 64
static _Thread_local struct ratio_entry {
	double error_rate, first, ratio;
	uint32_t expansion;
	enum bf_type type;
	bool used;
} ratio_cache[RATIO_CACHE];

double bf_filter_chain_bits(const struct bf_params *p, uint64_t keys)
{
	uint64_t held = 0, bits = 0, cap, nblocks;
	unsigned b;
	double err;

	for (unsigned i = 0; held < keys; i++) {
		bf_filter_layer_target(p, i, &cap, &err);
		if (bf_layer_plan(p->type == BF_TYPE_COUNTING, cap, err, &nblocks, &b))
			return HUGE_VAL;
		bits += nblocks * BF_BLOCK_BYTES * 8;
		held += cap;
	}
	return (double)bits / (double)keys;
}

double bf_filter_choose_ratio(enum bf_type type, double error_rate, uint32_t expansion,
			      double first)
{
	uint64_t bits;
	double best = 0.5, least = HUGE_VAL;

	if (expansion == 0)
		return 0.5;
	memcpy(&bits, &error_rate, sizeof(bits));
	struct ratio_entry *e =
	    &ratio_cache[((bits * 0x9e3779b97f4a7c15ull) ^ expansion ^ type) % RATIO_CACHE];
	if (e->used && e->error_rate == error_rate && e->expansion == expansion &&
	    e->type == type && e->first == first)
		return e->ratio;
	for (int k = 0; k < 10; k++) {
		struct bf_params p = {.capacity = 10000,
				      .error_rate = error_rate,
				      .type = type,
				      .expansion = expansion,
				      .ratio = (10 + k) / 20.0,
				      .first = first};
		double cost = bf_filter_chain_bits(&p, 200000);
		if (cost < least) {
			least = cost;
			best = p.ratio;
		}
	}
	*e = (struct ratio_entry){error_rate, first, best, expansion, type, true};
	return best;
}

/* The heap array that holds a filter's layer entries once it has more than one (one is
 * f->layer0, inside the structure), with its allocation header. */
static uint64_t table_cost(unsigned nlayers)
{
	return nlayers > 1 ? nlayers * sizeof(struct bf_layer) + 16 : 0;
}

/*
 * Params shared by the filters that have them alike (f->params points at .p): a million
 * filters made with one BF.RESERVE line hold one copy, not 48 bytes each. Counted; a shape goes
 * when its last filter does, and the table with its last shape (nothing is left at exit).
 * The filter that makes a shape is charged it; one its maker left to others is charged to none
 * (at most one shape per distinct params, against a filter's 200 bytes and more).
 * Filters are made and freed on the loop and on the threadpool (loads, copies), hence the lock.
 */
struct shape {
	struct bf_params p; /* first: f->params is &shape->p; padding zeroed (hashed as bytes) */
	/* The budget its filters are charged to (bf_filter_budget), part of its key: a filter
	 * keeps no pointer of its own to it. */
	struct bf_budget *budget;
	struct shape *next; /* in its bucket */
	uint64_t hash;
	size_t refs;
};

static struct {
	pthread_mutex_t mu;
	struct shape **buckets; /* nbuckets, a power of two, or NULL with no shape */
	size_t nbuckets, count;
} shapes = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Double the buckets once shapes outnumber them (nothing happens if that cannot be had). */
static void shapes_grow(void)
{
	size_t n = shapes.nbuckets ? shapes.nbuckets * 2 : 16;
	struct shape **b = calloc(n, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < shapes.nbuckets; i++)
		for (struct shape *s = shapes.buckets[i], *next; s; s = next) {
			next = s->next;
			s->next = b[s->hash & (n - 1)];
			b[s->hash & (n - 1)] = s;
		}
	free(shapes.buckets);
	shapes.buckets = b;
	shapes.nbuckets = n;
}

/* What a shape takes from the heap, charged to the filter that made it (params_charged). */
#define SHAPE_COST (sizeof(struct shape) + 16)
/* What a filter's rare part takes from the heap, charged to it. */
#define RARE_COST (sizeof(struct bf_filter_rare) + 16)

/* The filter's own allocation, a pool's piece: the structure (its first layer's entry,
 * f->layer0, included) and the room for its name just past it; and its params' shared copy if
 * it made it, and its rare part. */
static uint64_t struct_cost(const struct bf_filter *f)
{
	return sizeof(*f) + f->name_room + (f->params_charged ? SHAPE_COST : 0) +
	       (f->rare ? RARE_COST : 0);
}

int bf_filter_set_expiry(struct bf_filter *f, uint64_t expire_ms)
{
	if (expire_ms && bf_filter_rare_get(f))
		return -ENOMEM;
	if (f->rare)
		f->rare->expire_ms = expire_ms;
	return 0;
}

int bf_filter_rare_get(struct bf_filter *f)
{
	if (f->rare)
		return 0;
	if (bf_budget_reserve(bf_filter_budget(f), RARE_COST))
		return -ENOMEM;
	f->rare = calloc(1, sizeof(*f->rare));
	if (!f->rare) {
		bf_budget_release(bf_filter_budget(f), RARE_COST);
		return -ENOMEM;
	}
	return 0;
}

struct bf_budget *bf_filter_budget(const struct bf_filter *f)
{
	return f->params ? ((const struct shape *)(const void *)f->params)->budget : NULL;
}

/* The shared copy of *p under budget b with one more holder (*made: it is new); NULL if out
 * of memory. */
static const struct bf_params *shape_get(const struct bf_params *p, struct bf_budget *b, bool *made)
{
	struct bf_params key;

	memset(&key, 0, sizeof(key));
	key.capacity = p->capacity;
	key.error_rate = p->error_rate;
	key.type = p->type;
	key.expansion = p->expansion;
	key.persist = p->persist;
	key.ratio = p->ratio;
	key.first = p->first;
	uint64_t hash = XXH3_64bits_withSeed(&key, sizeof(key), (uint64_t)(uintptr_t)b);
	struct shape *s = NULL;

	*made = false;
	pthread_mutex_lock(&shapes.mu);
	if (shapes.count >= shapes.nbuckets)
		shapes_grow();
	if (shapes.nbuckets) {
		struct shape **head = &shapes.buckets[hash & (shapes.nbuckets - 1)];
		for (s = *head; s; s = s->next)
			if (s->hash == hash && s->budget == b && !memcmp(&s->p, &key, sizeof(key)))
				break;
		if (!s && (s = malloc(sizeof(*s)))) {
			*made = true;
			*s = (struct shape){.budget = b, .next = *head, .hash = hash};
			memcpy(&s->p, &key, sizeof(key));
			*head = s;
			shapes.count++;
		}
		if (s)
			s->refs++;
	}
	pthread_mutex_unlock(&shapes.mu);
	return s ? &s->p : NULL;
}

static void shape_put(const struct bf_params *p)
{
	if (!p)
		return;
	struct shape *s = (struct shape *)(uintptr_t)p;

	pthread_mutex_lock(&shapes.mu);
	if (--s->refs == 0) {
		struct shape **at = &shapes.buckets[s->hash & (shapes.nbuckets - 1)];
		while (*at != s)
			at = &(*at)->next;
		*at = s->next;
		free(s);
		if (--shapes.count == 0) {
			free(shapes.buckets);
			shapes.buckets = NULL;
			shapes.nbuckets = 0;
		}
	}
	pthread_mutex_unlock(&shapes.mu);
}

/*
 * Give f the shared copy of *p under budget b, charging b the copy if it is new and `charge`
 * (else the caller charges it with the rest of f's cost). 0 or -ENOMEM (nothing changed).
 */
static int set_shape(struct bf_filter *f, const struct bf_params *p, struct bf_budget *b,
		     bool charge)
{
	struct bf_budget *was = bf_filter_budget(f);
	bool made;
	const struct bf_params *s = shape_get(p, b, &made);

	if (!s)
		return -ENOMEM;
	charge = charge && made;
	if (charge && bf_budget_reserve(b, SHAPE_COST)) {
		shape_put(s);
		return -ENOMEM;
	}
	/* A counting filter counts its deletes in f->rare. */
	if (s->type == BF_TYPE_COUNTING && bf_filter_rare_get(f)) {
		if (charge)
			bf_budget_release(b, SHAPE_COST);
		shape_put(s);
		return -ENOMEM;
	}
	if (f->params_charged)
		bf_budget_release(was, SHAPE_COST);
	shape_put(f->params);
	f->params = s;
	f->params_charged = made;
	return 0;
}

int bf_filter_set_params(struct bf_filter *f, const struct bf_params *p)
{
	return set_shape(f, p, bf_filter_budget(f), true);
}

int bf_filter_join_budget(struct bf_filter *f, struct bf_budget *b, uint64_t extra)
{
	bool made;

	if (!f->params || bf_filter_budget(f))
		return -EINVAL;
	const struct bf_params *s = shape_get(f->params, b, &made);
	if (!s)
		return -ENOMEM;
	/* Its cost under b: the same but for the shared copy, charged to f if f makes it. */
	uint64_t cost = bf_filter_cost(f) - (f->params_charged ? SHAPE_COST : 0) +
			(made ? SHAPE_COST : 0) + extra;
	if (bf_budget_reserve(b, cost)) {
		shape_put(s);
		return -ENOMEM;
	}
	shape_put(f->params);
	f->params = s;
	f->params_charged = made;
	return 0;
}

/* The room for a name in f's own allocation. */
static char *name_tail(struct bf_filter *f)
{
	return (char *)(f + 1);
}

/*
 * A filter's own allocation (the structure and the room for its name just past it) is a piece
 * of a pool (core/bf_pool.h), one per size in steps of 8 bytes: no allocator header, and the
 * room for the name is what the piece has past the structure.
 */
#define FILTER_STEP  8
#define FILTER_POOLS ((sizeof(struct bf_filter) + BF_NAME_MAX + 1) / FILTER_STEP + 2)
#define FP(i)	     {.size = (i)*FILTER_STEP, .align = FILTER_STEP},
#define FP8(i)	     FP(i) FP(i + 1) FP(i + 2) FP(i + 3) FP(i + 4) FP(i + 5) FP(i + 6) FP(i + 7)
_Static_assert(_Alignof(struct bf_filter) <= FILTER_STEP, "a filter's piece is aligned enough");
_Static_assert(FILTER_POOLS <= 48, "filter_pools lists enough sizes");
_Static_assert((FILTER_POOLS * FILTER_STEP) - sizeof(struct bf_filter) <= UINT8_MAX,
	       "name_room holds the room past the structure");

static struct bf_pool filter_pools[48] = {FP8(0) FP8(8) FP8(16) FP8(24) FP8(32) FP8(40)};

/* The pool of pieces for a structure with room for a name of name_len bytes. */
static struct bf_pool *filter_pool(size_t name_len)
{
	size_t room = name_len < BF_NAME_MAX ? name_len + 1 : BF_NAME_MAX + 1;

	return &filter_pools[(sizeof(struct bf_filter) + room + FILTER_STEP - 1) / FILTER_STEP];
}

struct bf_filter *bf_filter_alloc(size_t name_len)
{
	struct bf_pool *p = filter_pool(name_len);
	struct bf_filter *f = bf_pool_get(p);

	if (f) /* and the name there is empty */
		f->name_room = (uint8_t)(p->size - sizeof(*f));
	return f;
}

int bf_filter_set_name(struct bf_filter *f, const char *name, size_t len)
{
	char *to = name_tail(f), *was = f->rare ? f->rare->name : NULL;

	/* Too long for the room: a heap block of its own, which the rare part keeps. */
	if (len >= f->name_room) {
		if (bf_filter_rare_get(f))
			return -ENOMEM;
		to = malloc(len + 1);
		if (!to)
			return -ENOMEM;
	}
	memmove(to, name, len);
	to[len] = '\0';
	if (f->rare)
		f->rare->name = to == name_tail(f) ? NULL : to;
	free(was);
	f->name_len = (uint8_t)len;
	return 0;
}

int bf_filter_name_room(struct bf_filter **fp, size_t len)
{
	struct bf_filter *f = *fp;
	char name[BF_NAME_MAX + 1];
	size_t nlen = f->name_len;

	if (bf_filter_budget(f))
		return -EINVAL;
	if (len < f->name_room || len > BF_NAME_MAX)
		return 0;
	/* Nothing in the structure points into it: it may move. */
	memcpy(name, bf_filter_name(f), nlen);
	f = bf_filter_alloc(len);
	if (!f)
		return -ENOMEM;
	uint8_t room = f->name_room;
	memcpy(f, *fp, sizeof(*f));
	f->name_room = room;
	bf_pool_put(*fp);
	*fp = f;
	/* A name in the rare part fits now: into the room, which cannot fail. */
	if (nlen < f->name_room)
		bf_filter_set_name(f, name, nlen);
	return 0;
}

int bf_filter_layers_reserve(struct bf_filter *f, unsigned n)
{
	if (n <= f->layers_cap)
		return 0;
	if (n > BF_MAX_LAYERS)
		return -ENOMEM;
	if (n == 1) {
		memset(&f->layer0, 0, sizeof(f->layer0));
		f->layers_cap = 1;
		return 0;
	}
	unsigned cap = f->layers_cap * 2 > n ? f->layers_cap * 2 : n;
	if (cap > BF_MAX_LAYERS)
		cap = BF_MAX_LAYERS;
	bool inside = f->layers_cap <= 1;
	struct bf_layer *l = realloc(inside ? NULL : f->table, cap * sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (inside && f->layers_cap)
		l[0] = f->layer0;
	memset(l + f->layers_cap, 0, (cap - f->layers_cap) * sizeof(*l));
	f->table = l; /* in layer0's place, copied into l[0] if it was in use */
	f->layers_cap = (uint16_t)cap;
	return 0;
}

/* Free the layer table (not the layers' blocks): f has no layers after. */
static void layers_release(struct bf_filter *f)
{
	if (f->layers_cap > 1)
		free(f->table);
	memset(&f->layer0, 0, sizeof(f->layer0));
	f->layers_cap = 0;
}

/*
 * Append layer number f->nlayers, charging the budget its cost plus `extra` (the structure's,
 * with the first layer) in one reservation. Returns 0 or a negative errno; nothing is charged
 * on error.
 */
static int grow(struct bf_filter *f, uint64_t extra)
{
	uint64_t cap, nblocks;
	unsigned b;
	double err;

	if (f->nlayers == BF_MAX_LAYERS)
		return -ENOSPC;
	bf_filter_layer_target(f->params, f->nlayers, &cap, &err);
	bool counting = f->params->type == BF_TYPE_COUNTING;
	/*
	 * No layer meets (cap, err) in fewer than cap * log2(1/err) bits (the information bound;
	 * four bits per position if counting). Refuse what the budget or the largest layer could
	 * never hold before the model runs: sizing a capacity of 2^64 is work for nothing.
	 */
	double least = (double)cap * -log2(err) / 8 * (counting ? 4 : 1);
	if (least + (double)extra > (double)bf_budget_room(bf_filter_budget(f)) ||
	    least > (double)BF_LAYER_MAX_BLOCKS * BF_BLOCK_BYTES)
		return -ENOMEM;
	int rc = bf_layer_plan(counting, cap, err, &nblocks, &b);
	if (rc)
		return rc == -E2BIG ? -ENOMEM : rc;
	uint64_t bytes = nblocks * BF_BLOCK_BYTES;
	if (bf_filter_layers_reserve(f, f->nlayers + 1))
		return -ENOMEM;
	uint64_t charge =
	    bf_layer_cost(bytes) + table_cost(f->nlayers + 1) - table_cost(f->nlayers) + extra;
	rc = bf_budget_reserve(bf_filter_budget(f), charge);
	if (rc)
		return rc;
	rc = bf_layer_alloc(&bf_filter_layers(f)[f->nlayers], counting, nblocks, b);
	if (rc) {
		bf_budget_release(bf_filter_budget(f), charge);
		return rc == -E2BIG ? -ENOMEM : rc;
	}
	f->nlayers++;
	return 0;
}

/* Free f and all it holds, releasing nothing from its budget. */
static void destroy(struct bf_filter *f)
{
	for (unsigned i = 0; i < f->nlayers; i++)
		bf_layer_free(&bf_filter_layers(f)[i]);
	layers_release(f);
	shape_put(f->params);
	if (f->rare)
		free(f->rare->name);
	free(f->rare);
	bf_pool_put(f);
}

int bf_filter_new(const struct bf_params *p, uint64_t seed, struct bf_budget *budget,
		  struct bf_filter **out)
{
	return bf_filter_new_named(p, "", 0, seed, budget, out);
}

int bf_filter_new_named(const struct bf_params *p, const char *name, size_t len, uint64_t seed,
			struct bf_budget *budget, struct bf_filter **out)
{
	int rc = bf_params_validate(p);
	if (rc)
		return rc;

	struct bf_filter *f = bf_filter_alloc(len);
	if (!f)
		return -ENOMEM;
	bf_filter_set_name(f, name, len); /* into its own room: cannot fail */
	struct bf_params own = *p;
	if (!own.first)
		own.first = BF_FIRST_SHARE;
	if (!own.ratio)
		own.ratio = bf_filter_choose_ratio(p->type, p->error_rate, p->expansion, own.first);
	if (set_shape(f, &own, budget, false)) {
		destroy(f);
		return -ENOMEM;
	}
	f->seed = seed;
	rc = grow(f, struct_cost(f));
	if (rc) {
		destroy(f); /* nothing was charged */
		return rc;
	}
	*out = f;
	return 0;
}

int bf_filter_page_out(struct bf_filter *f)
{
	if (bf_filter_rare_get(f))
		return -ENOMEM;

	uint64_t cost = bf_filter_cost(f), items = bf_filter_items(f), bytes = bf_filter_bytes(f);
	double fpr = bf_filter_fpr(f);

	for (unsigned i = 0; i < f->nlayers; i++)
		bf_layer_free(&bf_filter_layers(f)[i]);
	layers_release(f);
	f->rare->paged_layers = f->nlayers;
	f->nlayers = 0;
	/* In the first layer's place, which it no longer has. */
	f->paged_counts.items = items;
	f->paged_counts.bytes = bytes;
	f->paged_counts.fpr = fpr;
	bf_budget_release(bf_filter_budget(f), cost - bf_filter_cost(f));
	f->paged = true;
	f->rare->page_outs++;
	return 0;
}

int bf_filter_page_in(struct bf_filter *f, struct bf_filter *copy)
{
	if (!f->paged || copy->id != f->id || copy->seed != f->seed ||
	    copy->params->capacity != f->params->capacity ||
	    copy->params->error_rate != f->params->error_rate ||
	    copy->params->expansion != f->params->expansion ||
	    copy->params->type != f->params->type || copy->params->first != f->params->first ||
	    copy->params->ratio != f->params->ratio || bf_filter_bytes(copy) != bf_filter_bytes(f))
		return -EINVAL;
	uint64_t more = bf_filter_cost(copy) - struct_cost(copy);
	if (bf_budget_reserve(bf_filter_budget(f), more))
		return -ENOMEM;
	/* copy's layer table moves into f: its layer0 (with its one layer) or its heap table. */
	f->layer0 = copy->layer0;
	f->layers_cap = copy->layers_cap;
	f->nlayers = copy->nlayers;
	memset(&copy->layer0, 0, sizeof(copy->layer0));
	copy->layers_cap = copy->nlayers = 0;
	bf_filter_free(copy);
	f->paged = false;
	f->rare->page_ins++;
	return 0;
}

void bf_filter_free(struct bf_filter *f)
{
	if (!f)
		return;
	bf_budget_release(bf_filter_budget(f), bf_filter_cost(f));
	destroy(f);
}

unsigned bf_filter_take_blocks(struct bf_filter *f, struct bf_layer *out)
{
	unsigned n = f->nlayers;

	for (unsigned i = 0; i < n; i++) {
		out[i] = bf_filter_layers(f)[i];
		bf_filter_layers(f)[i].blocks = NULL; /* its size stays: so does its cost */
	}
	return n;
}

uint64_t bf_filter_cost(const struct bf_filter *f)
{
	uint64_t c = struct_cost(f) + table_cost(f->nlayers);

	for (unsigned i = 0; i < f->nlayers; i++)
		c += bf_layer_cost(bf_layer_bytes(&bf_filter_layers(f)[i]));
	return c;
}

void bf_filter_stats_encode(const struct bf_filter *f, uint64_t out[BF_STATS_WORDS])
{
	out[0] = bf_filter_checks(f);
	out[1] = bf_filter_stat(f, BF_STAT_CHECK_HITS);
	out[2] = bf_filter_stat(f, BF_STAT_CHECK_MISSES);
	out[3] = bf_filter_sets(f);
	out[4] = bf_filter_stat(f, BF_STAT_SET_HITS);
	out[5] = bf_filter_stat(f, BF_STAT_SET_MISSES);
	out[6] = bf_filter_deletes(f);
	out[7] = bf_filter_delete_hits(f);
	out[8] = bf_filter_delete_misses(f);
}

int bf_filter_stats_decode(struct bf_filter *f, const uint64_t in[BF_STATS_WORDS])
{
	uint64_t counted = in[4] + in[5];
	uint64_t v[BF_STAT_N] = {
	    [BF_STAT_CHECK_HITS] = in[1],
	    [BF_STAT_CHECK_MISSES] = in[2],
	    [BF_STAT_SET_HITS] = in[4],
	    [BF_STAT_SET_MISSES] = in[5],
	    [BF_STAT_SET_FAILS] = in[3] > counted ? in[3] - counted : 0,
	};
	bool high = false;

	for (int i = 0; i < BF_STAT_N; i++)
		high = high || v[i] > UINT16_MAX;
	if ((in[7] || in[8] || high) && bf_filter_rare_get(f))
		return -ENOMEM;
	for (int i = 0; i < BF_STAT_N; i++) {
		f->stats.lo[i] = (uint16_t)v[i];
		if (f->rare)
			f->rare->stat_hi[i] = v[i] >> 16;
	}
	if (f->rare) {
		f->rare->delete_hits = in[7];
		f->rare->delete_misses = in[8];
	}
	return 0;
}

/* Counter i's low 16 bits wrapped: carry into the rest, in the rare part (made now if need be;
 * if it cannot be, the counter stays at its highest until a later carry finds the memory). */
static __attribute__((noinline, cold)) void stat_carry(struct bf_filter *f, enum bf_stat i)
{
	if (bf_filter_rare_get(f) || f->rare->stat_hi[i] == UINT64_MAX >> 16)
		f->stats.lo[i] = UINT16_MAX;
	else
		f->rare->stat_hi[i]++;
}

static inline void stat_add(struct bf_filter *f, enum bf_stat i)
{
	if (__builtin_expect(++f->stats.lo[i] == 0, 0))
		stat_carry(f, i);
}

/* Branch-free on the answer, for the reason given in bf_filter_paths.h (the carry's branch is
 * all but never taken). */
static inline void count_check(struct bf_filter *f, bool hit)
{
	stat_add(f, (enum bf_stat)(BF_STAT_CHECK_HITS + !hit));
}

/*
 * Hash a key and prefetch its block in every layer. The empty asm keeps the two hash halves
 * in registers: without it GCC stores them as two 8-byte halves and reloads 16 bytes for the
 * prefetch address, a store-forwarding stall that costs more than the probe.
 */
static inline struct bf_hash hash_and_prefetch(const struct bf_filter *f, const void *key,
					       size_t len)
{
	struct bf_hash h = bf_hash_key(key, len, f->seed);
	__asm__("" : "+r"(h.lo), "+r"(h.hi));
	for (unsigned l = 0; l < f->nlayers; l++)
		bf_layer_prefetch(&bf_filter_layers(f)[l], h);
	return h;
}

#define PREFETCH_AHEAD 16

#define PATH(name)   name##_scalar
#define PATH_ATTR    /* none */
#define KERNEL_CHECK bf_kernel_check_scalar
#include "core/bf_filter_paths.h"
#undef PATH
#undef PATH_ATTR
#undef KERNEL_CHECK

#if defined(__x86_64__)
#define PATH(name)   name##_avx2
#define PATH_ATTR    __attribute__((target("avx2")))
#define KERNEL_CHECK bf_kernel_check_avx2
#include "core/bf_filter_paths.h"
#undef PATH
#undef PATH_ATTR
#undef KERNEL_CHECK
#define USE_AVX2() BF_HAVE_AVX2()
#else
#define USE_AVX2()			0
#define check_key_avx2(f, key, len)	check_key_scalar(f, key, len)
#define check_batch_avx2(f, n, k, l, o) check_batch_scalar(f, n, k, l, o)
#endif

/*
 * A test and a tail jump: check_key returns int and is kept out of line, so neither variant's
 * register saves land here.
 */
int bf_filter_check(struct bf_filter *f, const void *key, size_t len)
{
	return USE_AVX2() ? check_key_avx2(f, key, len) : check_key_scalar(f, key, len);
}

void bf_filter_check_batch(struct bf_filter *f, size_t n, const void *const *keys,
			   const size_t *lens, int *out)
{
	if (USE_AVX2())
		check_batch_avx2(f, n, keys, lens, out);
	else
		check_batch_scalar(f, n, keys, lens, out);
}

/*
 * Counting filters keep all of a key's adds in one layer, so that a delete knows where to take
 * it from: a key already present in some layer (newest first) is counted there again, and only
 * a key present nowhere goes to the newest layer. (Counting it into the newest layer as well
 * would leave two layers holding it, and every later delete ambiguous.)
 */
static int add_counting(struct bf_filter *f, struct bf_hash h)
{
	struct bf_layer *l = NULL;

	for (unsigned i = f->nlayers; i-- > 0 && !l;)
		if (bf_layer_check(&bf_filter_layers(f)[i], h))
			l = &bf_filter_layers(f)[i];
	if (!l) {
		l = &bf_filter_layers(f)[f->nlayers - 1];
		if (l->items >= bf_filter_layer_capacity(f->params, f->nlayers - 1)) {
			if (f->params->expansion == 0)
				return -ENOSPC;
			int rc = grow(f, 0);
			if (rc)
				return rc;
			l = &bf_filter_layers(f)[f->nlayers - 1];
		}
	}
	bool is_new = bf_layer_add(l, h);
	l->items++;
	f->changes++;
	stat_add(f, (enum bf_stat)(BF_STAT_SET_HITS + !is_new));
	return is_new;
}

static int add_hashed(struct bf_filter *f, struct bf_hash h)
{
	if (f->params->type == BF_TYPE_COUNTING)
		return add_counting(f, h);

	struct bf_layer *ls = bf_filter_layers(f), *top = &ls[f->nlayers - 1];
	bool full = top->items >= bf_filter_layer_capacity(f->params, f->nlayers - 1);
	bool present = false;
	int rc;

	/* Older layers first; the top layer's add itself tells, unless it is full. */
	for (unsigned i = 0; i + 1 < f->nlayers && !present; i++)
		present = bf_layer_check(&ls[i], h);
	if (!present && full)
		present = bf_layer_check(top, h);
	if (present)
		goto duplicate;

	if (full) {
		rc = f->params->expansion == 0 ? -ENOSPC : grow(f, 0);
		if (rc) {
			stat_add(f, BF_STAT_SET_FAILS);
			return rc;
		}
		top = &bf_filter_layers(f)[f->nlayers - 1];
	}
	if (!bf_layer_add(top, h))
		goto duplicate;
	top->items++;
	f->changes++;
	stat_add(f, BF_STAT_SET_HITS);
	return 1;
duplicate:
	stat_add(f, BF_STAT_SET_MISSES);
	return 0;
}

int bf_filter_add(struct bf_filter *f, const void *key, size_t len)
{
	return add_hashed(f, bf_hash_key(key, len, f->seed));
}

struct bf_hash bf_filter_hash(const struct bf_filter *f, const void *key, size_t len)
{
	return bf_hash_key(key, len, f->seed);
}

int bf_filter_add_hash(struct bf_filter *f, struct bf_hash h)
{
	return add_hashed(f, h);
}

int bf_filter_delete(struct bf_filter *f, const void *key, size_t len)
{
	return bf_filter_delete_hash(f, bf_hash_key(key, len, f->seed));
}

int bf_filter_delete_hash(struct bf_filter *f, struct bf_hash h)
{
	if (f->params->type != BF_TYPE_COUNTING)
		return -ENOTSUP;

	struct bf_layer *l = NULL;

	for (unsigned i = 0; i < f->nlayers; i++) {
		if (!bf_layer_check(&bf_filter_layers(f)[i], h))
			continue;
		if (l) {
			/* One of the two is a false positive, and taking the key out of that one
			 * would zero other keys' counters: refuse rather than guess. */
			f->rare->delete_misses++;
			return -ENOTUNIQ;
		}
		l = &bf_filter_layers(f)[i];
	}
	if (!l) {
		f->rare->delete_misses++;
		return 0;
	}
	bf_layer_delete(l, h);
	if (l->items)
		l->items--;
	f->changes++;
	f->rare->delete_hits++;
	return 1;
}

unsigned bf_filter_layers_with(const struct bf_filter *f, const void *key, size_t len)
{
	struct bf_hash h = bf_hash_key(key, len, f->seed);
	unsigned n = 0;

	for (unsigned i = 0; i < f->nlayers; i++)
		n += bf_layer_check(&bf_filter_layers(f)[i], h);
	return n;
}

size_t bf_filter_add_batch(struct bf_filter *f, size_t n, const void *const *keys,
			   const size_t *lens, int *out, struct bf_hash *hashes)
{
	struct bf_hash h[BATCH];

	for (size_t base = 0; base < n; base += BATCH) {
		size_t m = n - base < BATCH ? n - base : BATCH;
		for (size_t i = 0; i < m; i++)
			h[i] = hash_and_prefetch(f, keys[base + i], lens[base + i]);
		for (size_t i = 0; i < m; i++) {
			if (hashes)
				hashes[base + i] = h[i];
			out[base + i] = add_hashed(f, h[i]);
			if (out[base + i] < 0)
				return base + i + 1;
		}
	}
	return n;
}

/* The layer holding body byte off, with *in = the offset inside it; NULL past the end. */
static struct bf_layer *body_layer(const struct bf_filter *f, uint64_t off, uint64_t *in)
{
	for (unsigned i = 0; i < f->nlayers; i++) {
		uint64_t n = bf_layer_bytes(&bf_filter_layers(f)[i]);
		if (off < n) {
			*in = off;
			return (struct bf_layer *)&bf_filter_layers(f)[i];
		}
		off -= n;
	}
	return NULL;
}

const void *bf_filter_body_at(const struct bf_filter *f, uint64_t off, uint64_t *len)
{
	uint64_t in;
	const struct bf_layer *l = body_layer(f, off, &in);

	*len = l ? bf_layer_bytes(l) - in : 0;
	return l ? (const char *)l->blocks + in : NULL;
}

int bf_filter_body_write(struct bf_filter *f, uint64_t off, const void *data, size_t len)
{
	uint64_t in;
	struct bf_layer *l = body_layer(f, off, &in);

	if (!l)
		return -ERANGE;
	if (len > bf_layer_bytes(l) - in)
		return -EMSGSIZE;
	memcpy((char *)l->blocks + in, data, len);
	f->changes++;
	return 0;
}

void bf_filter_digest(const struct bf_filter *f, unsigned char *out)
{
	XXH3_state_t st;
	uint64_t head[8] = {f->params->capacity,    f->params->type, f->params->expansion,
			    f->params->persist,	    f->seed,	     f->id,
			    bf_filter_expire_ms(f), f->nlayers};
	double rates[3] = {f->params->error_rate, f->params->ratio, f->params->first};
	uint64_t off = 0, n;
	const void *p;

	XXH3_128bits_reset(&st);
	XXH3_128bits_update(&st, head, sizeof(head));
	XXH3_128bits_update(&st, rates, sizeof(rates));
	XXH3_128bits_update(&st, bf_filter_name(f), f->name_len);
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		uint64_t geo[4] = {l->nblocks, l->items, l->b, l->counting};

		XXH3_128bits_update(&st, geo, sizeof(geo));
	}
	while ((p = bf_filter_body_at(f, off, &n))) {
		XXH3_128bits_update(&st, p, (size_t)n);
		off += n;
	}
	XXH128_hash_t h = XXH3_128bits_digest(&st);
	uint64_t tail = XXH3_64bits_withSeed(&h, sizeof(h), 1);
	memcpy(out, &h.high64, 8);
	memcpy(out + 8, &h.low64, 8);
	memcpy(out + 16, &tail, 4);
}

int bf_filter_copy_grow(struct bf_filter *c, const struct bf_filter *f)
{
	if (bf_filter_layers_reserve(c, f->nlayers))
		return -ENOMEM;
	for (unsigned i = c->nlayers; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		int rc = bf_layer_alloc(&bf_filter_layers(c)[i], l->counting, l->nblocks, l->b);
		if (rc)
			return -ENOMEM;
		c->nlayers = (uint16_t)(i + 1);
	}
	return 0;
}

int bf_filter_copy_meta(struct bf_filter *c, const struct bf_filter *f)
{
	if (bf_filter_set_name(c, bf_filter_name(f), f->name_len))
		return -ENOMEM;
	if (bf_filter_set_params(c, f->params))
		return -ENOMEM;
	c->seed = f->seed;
	c->id = f->id;
	c->lsn = f->lsn;
	if (f->rare) {
		if (bf_filter_rare_get(c))
			return -ENOMEM;
		c->rare->expire_ms = f->rare->expire_ms;
		c->rare->page_ins = f->rare->page_ins;
		c->rare->page_outs = f->rare->page_outs;
	}
	c->changes = f->changes;
	bf_filter_copy_counts(c, f);
	return 0;
}

void bf_filter_copy_counts(struct bf_filter *c, const struct bf_filter *f)
{
	c->stats = f->stats;
	/* f's rare part may be younger than c (a carry since bf_filter_copy_meta): best effort. */
	if (f->rare && !c->rare)
		(void)bf_filter_rare_get(c);
	if (c->rare && f->rare) {
		c->rare->delete_hits = f->rare->delete_hits;
		c->rare->delete_misses = f->rare->delete_misses;
		memcpy(c->rare->stat_hi, f->rare->stat_hi, sizeof(c->rare->stat_hi));
	}
	/* The layers c has (f may have grown since): the counts of those. */
	for (unsigned i = 0; i < c->nlayers && i < f->nlayers; i++)
		bf_filter_layers(c)[i].items = bf_filter_layers(f)[i].items;
}

int bf_filter_copy_new(const struct bf_filter *f, struct bf_filter **out)
{
	struct bf_filter *c = bf_filter_alloc(f->name_len);

	if (!c)
		return -ENOMEM;
	if (bf_filter_copy_grow(c, f) || bf_filter_copy_meta(c, f)) {
		bf_filter_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

uint64_t bf_filter_copy_body(struct bf_filter *c, const struct bf_filter *f, uint64_t off,
			     uint64_t n)
{
	uint64_t done = 0;

	while (done < n) {
		uint64_t in, len;
		struct bf_layer *to = body_layer(c, off + done, &in);
		const void *from = bf_filter_body_at(f, off + done, &len);
		if (!to || !from)
			break;
		if (len > n - done)
			len = n - done;
		memcpy((char *)to->blocks + in, from, (size_t)len);
		done += len;
	}
	return done;
}

void bf_filter_prefault(struct bf_filter *c)
{
	for (unsigned i = 0; i < c->nlayers; i++)
		memset(bf_filter_layers(c)[i].blocks, 0, bf_layer_bytes(&bf_filter_layers(c)[i]));
}

int bf_filter_clone(const struct bf_filter *f, struct bf_filter **out)
{
	int rc = bf_filter_copy_new(f, out);

	if (!rc)
		bf_filter_copy_body(*out, f, 0, bf_filter_bytes(f));
	return rc;
}

uint64_t bf_filter_capacity(const struct bf_filter *f)
{
	/* Paged out: what its layers held. */
	unsigned n = bf_filter_nlayers(f);
	uint64_t c = 0, cap = f->params->capacity;

	for (unsigned i = 0; i < n; i++) {
		c = cap > UINT64_MAX - c ? UINT64_MAX : c + cap;
		cap = next_capacity(f->params, cap);
	}
	return c;
}

double bf_filter_fpr(const struct bf_filter *f)
{
	/* 1 - prod(1 - p_i), kept accurate for tiny p_i (1 - (1 - 1e-19) is 0 in doubles). */
	double log_pass = 0;

	if (f->paged)
		return f->paged_counts.fpr;
	for (unsigned i = 0; i < f->nlayers; i++)
		log_pass += log1p(-bf_layer_fpr(&bf_filter_layers(f)[i]));
	return log_pass == 0 ? 0 : -expm1(log_pass); /* -expm1(0) is -0, printed "-0" */
}
