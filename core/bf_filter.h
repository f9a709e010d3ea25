/* SPDX-License-Identifier: MIT */
/*
 * A filter: a chain of layers that grows when full (scalable), or a single layer that refuses
 * new keys when full (non-scaling). Plain or counting. Not thread-safe: one owner at a time.
 */
#ifndef BF_FILTER_H
#define BF_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_layer.h"

/* Layers a scalable filter may have (RedisBloom has no bound; max_memory usually comes first:
 * with expansion 2 the 60th layer alone holds 2^59 times the first). */
#define BF_MAX_LAYERS	 1024
#define BF_NAME_MAX	 200
#define BF_MAX_EXPANSION 32768 /* RedisBloom's */

/* The smallest error a layer of a chain is given (deep layers of a long chain would otherwise
 * underflow): the model sizes correctly down to here. */
#define BF_LAYER_MIN_ERROR (1e-12 / 4294967296.0)

/*
 * Smallest error rate a filter may be created with. Below it the blocked layout (at most 64
 * positions per key in one 512-bit block) needs over 160 bits per key, 8x the textbook size,
 * growing without bound (1e-52 asked 1.8 Gbit for one key); a user asking for less almost
 * always meant something else. Layers of a scalable chain go below it (halving per layer), which
 * the model sizes correctly down to 1e-12 / 2^32.
 */
#define BF_MIN_ERROR_RATE 1e-12

enum bf_type {
	BF_TYPE_BLOOM = 0,
	BF_TYPE_COUNTING = 1,
};

struct bf_params {
	uint64_t capacity; /* keys the first layer holds, >= 1 */
	double error_rate; /* promised rate of the whole chain at capacity, 0 < p < 1 */
	enum bf_type type;
	uint32_t expansion; /* growth factor of each new layer; 0 = non-scaling (fixed size) */
	bool persist;	    /* false: memory only, never snapshotted */
	/*
	 * How a scalable chain shares out error_rate: the first layer is given the share a
	 * (`first`) of it, layer i >= 1 error_rate * (1 - a) * (1 - r) * r^(i-1), with r the
	 * tightening ratio: the layers' errors sum to error_rate. Files and records written before
	 * `first` existed had a = 0.5 (and r = 0.5 before the ratio existed: halving). 0 in a
	 * create's params: chosen (BF_FIRST_SHARE, bf_filter_choose_ratio); a filter always
	 * has its own, 0 < a < 1 and 0 < r < 1, kept with it so that a later change of the rule
	 * never changes a filter that exists.
	 */
	double ratio;
	double first;
};

/* Shared accounting of the bytes all filters hold against a limit (0 = no limit). */
struct bf_budget {
	uint64_t limit;
	uint64_t used;
};

/* Reserve bytes: 0, or -ENOMEM if that would pass the limit (nothing changes). */
int bf_budget_reserve(struct bf_budget *b, uint64_t bytes);
/* Bytes that could still be reserved (UINT64_MAX with no budget or no limit). */
uint64_t bf_budget_room(const struct bf_budget *b);
void bf_budget_release(struct bf_budget *b, uint64_t bytes);

/*
 * A filter's counters of checks and sets (its deletes are in struct bf_filter_rare), read with
 * bf_filter_stat. Each is 64 bits: the low 16 in struct bf_stats, the rest in the rare part
 * (stat_hi), which the first carry makes (a counter whose carry finds no memory stays at its
 * highest until one does): a filter pays 10 bytes for them, not 40, and one checked or set
 * 65,536 times, which pays for a rare part, is not a small filter's cost any more. The totals are
 * not stored: checks are check_hits + check_misses, sets set_hits + set_misses + set_fails
 * (bf_filter_checks, bf_filter_sets), deletes delete_hits + delete_misses (bf_filter_deletes).
 * Snapshots keep all nine counters (BF_STATS_WORDS, in the order bf_filter_stats_encode writes
 * them), as the files always did.
 */
enum bf_stat {
	BF_STAT_CHECK_HITS,
	BF_STAT_CHECK_MISSES,
	BF_STAT_SET_HITS, /* the key was new */
	BF_STAT_SET_MISSES,
	BF_STAT_SET_FAILS, /* adds to a plain filter refused (full, or out of memory) */
	BF_STAT_N
};

struct bf_stats {
	uint16_t lo[BF_STAT_N];
};

/*
 * What most filters never need: an expiry, deletes (a counting filter's), paging. Allocated
 * when first needed (bf_filter_rare_get), charged to the filter's budget, freed with it: a
 * counting filter always has it, and so does one that has an expiry or has been paged out.
 */
struct bf_filter_rare {
	/* Its name when it does not fit the room in its own allocation (renamed to a longer one:
	 * see bf_filter_name), else NULL. */
	char *name;
	uint64_t expire_ms; /* Unix time in ms at which it expires (Redis's EXPIRE); 0: never.
			     * Set only through bf_registry_set_expire */
	uint64_t delete_hits, delete_misses;
	uint32_t expire_pos; /* its place in its registry's expiry heap, from 1; 0: none */
	uint32_t page_ins, page_outs;
	uint16_t paged_layers;	     /* paged out: the layers it had (capacity, info) */
	uint64_t stat_hi[BF_STAT_N]; /* its counters but their low 16 bits (struct bf_stats),
				      * shifted down */
};

/* The counters as snapshots hold them: checks, check_hits, check_misses, sets, set_hits,
 * set_misses, deletes, delete_hits, delete_misses. */
#define BF_STATS_WORDS 9

/*
 * Outside core/ every field is read-only, and layers (their blocks, their number) are
 * not touched at all: core builds, copies, encodes and decodes filters (bf_filter_copy_*,
 * bf_filter_body_*, bf_snapshot_*). Read the layer count with bf_filter_nlayers().
 */
struct bf_filter {
	/* Eight-byte fields first, then the narrower ones, so that the structure has no holes:
	 * with a million small filters every byte here is a megabyte. */
	/* Its name is not kept here (bf_filter_name): nor is its layer table (bf_filter_layers).
	 * The registry's own (core/bf_registry.c): the next filter in f's bucket of its hash
	 * table, of which f is itself the entry. A copy does not carry it. */
	struct bf_filter *reg_next;
	/* One copy shared by every filter whose params are the same (a million filters made by
	 * one BF.RESERVE line hold one): set only by bf_filter_set_params, read only. */
	const struct bf_params *params;
	uint64_t seed;
	/* Names the filter in log records (1 to BF_ID_MAX); given by the registry, kept by
	 * snapshots. Its name's length and room share the word. */
	uint64_t id : 48;
	uint64_t name_len : 8;	/* at most BF_NAME_MAX */
	uint64_t name_room : 8; /* bytes for a name just past the structure (bf_filter_alloc) */
	uint64_t lsn;		/* log sequence number of the last logged change to it (0: none) */
	/* Its items and bytes are its layers' (bf_filter_items, bf_filter_bytes): not kept. */
	/* Bumped by every mutation, for snapshot scheduling: changed since a cut c if changes !=
	 * c (it wraps after 2^48, a year of ten million adds a second to one filter). */
	uint64_t changes : 48;
	uint64_t nlayers : 16;	     /* layers in use, at most BF_MAX_LAYERS */
	struct bf_filter_rare *rare; /* NULL until needed: see struct bf_filter_rare */
	/* Its budget is not kept here: its params' shared copy names it (bf_filter_budget). */
	void *owner; /* the owner's own per-filter data (the server's snapshot entry); core never
		      * reads it, and a copy does not carry it */
	/*
	 * Its layers (bf_filter_layers): layer0 while there is room for one (most filters never
	 * grow: a heap array of one would cost a second allocation), else `table`, a heap array
	 * of layers_cap.
	 */
	union {
		struct bf_layer layer0;
		struct bf_layer *table; /* layers_cap > 1 */
		/* Paged out (no layer): the items, bytes and false-positive estimate it had,
		 * which its layers give otherwise. */
		struct {
			uint64_t items, bytes;
			double fpr;
		} paged_counts;
	};
	uint32_t used_s;	  /* when it was last used, in the owner's clock (cold_interval) */
	struct bf_stats stats;	  /* 16-bit low parts, beside the other narrow fields */
	uint16_t layers_cap : 14; /* layers allocated (bf_filter_layers_reserve) */
	/* bloomd's close: paged out, its layers only on disk (nlayers 0; bytes, items and stats
	 * kept), loaded again on its next use (bf_filter_page_out / bf_filter_page_in). */
	bool paged : 1;
	/* Its params were new when it was given them: their shared copy is part of its cost
	 * (bf_filter_cost), even once other filters hold it too. */
	bool params_charged : 1;
};

/*
 * Its name, NUL-terminated (for logs; name_len is authoritative): just past the structure, in
 * its own allocation, when it fits the room there (name_len < name_room), else rare->name.
 */
static inline const char *bf_filter_name(const struct bf_filter *f)
{
	return f->name_len < f->name_room ? (const char *)(f + 1) : f->rare->name;
}

/* Its layer table: entries 0 to nlayers - 1 are its layers, the oldest first. Writable in core
 * only (as every field). */
static inline struct bf_layer *bf_filter_layers(const struct bf_filter *f)
{
	return f->layers_cap > 1 ? f->table : (struct bf_layer *)&f->layer0;
}

_Static_assert(BF_MAX_LAYERS < (1 << 14) && BF_NAME_MAX < UINT8_MAX,
	       "nlayers, layers_cap, name_len and name_room are narrow");

/* A small filter's fixed cost is mostly this structure (bench/filter-cost): keep it at 104
 * bytes, 13 words, on 64-bit machines. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct bf_filter) == 104,
	       "struct bf_filter grew: a million filters pay for every byte");

/* The largest id a filter can have: a registry refuses creates past it (a million a second
 * for 8 years), and a snapshot or log record naming a larger one is corrupt. */
#define BF_ID_MAX ((UINT64_C(1) << 48) - 1)

/* Adds that changed it (every add, if counting), minus deletes: the sum of its layers' counts
 * (a paged-out filter's, as it was). */
static inline uint64_t bf_filter_items(const struct bf_filter *f)
{
	uint64_t n = 0;

	if (f->paged)
		return f->paged_counts.items;
	for (unsigned i = 0; i < f->nlayers; i++)
		n += bf_filter_layers(f)[i].items;
	return n;
}

/* The bits: the sum of its layers' sizes (a paged-out filter's, as it was; bf_filter_cost is
 * the memory). */
static inline uint64_t bf_filter_bytes(const struct bf_filter *f)
{
	uint64_t n = 0;

	if (f->paged)
		return f->paged_counts.bytes;
	for (unsigned i = 0; i < f->nlayers; i++)
		n += bf_layer_bytes(&bf_filter_layers(f)[i]);
	return n;
}

/* Its counter i (enum bf_stat), and the totals of its checks and sets. */
static inline uint64_t bf_filter_stat(const struct bf_filter *f, enum bf_stat i)
{
	return (f->rare ? f->rare->stat_hi[i] << 16 : 0) | f->stats.lo[i];
}

static inline uint64_t bf_filter_checks(const struct bf_filter *f)
{
	return bf_filter_stat(f, BF_STAT_CHECK_HITS) + bf_filter_stat(f, BF_STAT_CHECK_MISSES);
}

static inline uint64_t bf_filter_sets(const struct bf_filter *f)
{
	return bf_filter_stat(f, BF_STAT_SET_HITS) + bf_filter_stat(f, BF_STAT_SET_MISSES) +
	       bf_filter_stat(f, BF_STAT_SET_FAILS);
}

/* Its expiry (Unix time in ms; 0: none), deletes and paging counts. */
static inline uint64_t bf_filter_expire_ms(const struct bf_filter *f)
{
	return f->rare ? f->rare->expire_ms : 0;
}

static inline uint64_t bf_filter_delete_hits(const struct bf_filter *f)
{
	return f->rare ? f->rare->delete_hits : 0;
}

static inline uint64_t bf_filter_delete_misses(const struct bf_filter *f)
{
	return f->rare ? f->rare->delete_misses : 0;
}

static inline uint64_t bf_filter_deletes(const struct bf_filter *f)
{
	return bf_filter_delete_hits(f) + bf_filter_delete_misses(f);
}

static inline uint32_t bf_filter_page_ins(const struct bf_filter *f)
{
	return f->rare ? f->rare->page_ins : 0;
}

static inline uint32_t bf_filter_page_outs(const struct bf_filter *f)
{
	return f->rare ? f->rare->page_outs : 0;
}

/* The budget f's cost is charged to (NULL: none). Filters of one registry share one: it is
 * kept with their shared params (a filter's params and budget are one copy, one pointer). */
struct bf_budget *bf_filter_budget(const struct bf_filter *f);

/*
 * Core only: charge f (which has params and no budget) and `extra` bytes to budget b, which f
 * then has. 0, or -ENOMEM (allocation or b's limit; nothing changed).
 */
int bf_filter_join_budget(struct bf_filter *f, struct bf_budget *b, uint64_t extra);

/* Core only: f->rare, allocated and charged to f's budget if f had none. 0 or -ENOMEM. */
int bf_filter_rare_get(struct bf_filter *f);

/* Core only: set f's expiry, and nothing else (a load's, before a registry adopts it); a
 * registry's filters change theirs through bf_registry_set_expire, which keeps its expiry heap
 * in order. 0 or -ENOMEM (unchanged). */
int bf_filter_set_expiry(struct bf_filter *f, uint64_t expire_ms);

/* Its counters as snapshots hold them (BF_STATS_WORDS words). */
void bf_filter_stats_encode(const struct bf_filter *f, uint64_t out[BF_STATS_WORDS]);
/*
 * Core only: set f's counters from a snapshot's words (the totals read are not kept: sets
 * beyond hits and misses are set_fails; checks and deletes are their hits and misses again).
 * 0, or -ENOMEM: deletes to keep and no room for f->rare (nothing changed).
 */
int bf_filter_stats_decode(struct bf_filter *f, const uint64_t in[BF_STATS_WORDS]);

/* Its layers (those it had, while paged out). */
static inline unsigned bf_filter_nlayers(const struct bf_filter *f)
{
	return f->paged ? f->rare->paged_layers : f->nlayers;
}

/*
 * Core only: a zeroed filter with an empty name, no layers, no budget, and room for a name of
 * up to name_len bytes in its own allocation (a longer one takes a heap block of its own);
 * NULL if out of memory. Free it with bf_filter_free.
 */
struct bf_filter *bf_filter_alloc(size_t name_len);

/*
 * Core only: give f the params *p (replacing any it had), shared with the filters that have
 * the same; f is charged their copy if it is the first to hold it. 0 or -ENOMEM (allocation or
 * f's budget; nothing changed). bf_filter_free gives them back.
 */
int bf_filter_set_params(struct bf_filter *f, const struct bf_params *p);

/* Core only: give f the name name[0, len) (len <= BF_NAME_MAX). 0 or -ENOMEM (unchanged). */
int bf_filter_set_name(struct bf_filter *f, const char *name, size_t len);

/*
 * Room in *fp's own allocation for a name of len bytes (len <= BF_NAME_MAX), before it is
 * adopted under it (a copy made elsewhere, named anew): a longer name would need the rare part
 * and a heap block. *fp may move, so only while nothing else points to it (no budget yet).
 * Keeps its name. 0, -EINVAL (it has a budget) or -ENOMEM (unchanged).
 */
int bf_filter_name_room(struct bf_filter **fp, size_t len);

/*
 * Core only: make room for n layers (n <= BF_MAX_LAYERS) in its table (bf_filter_layers), which
 * may move (room for one is f->layer0; for more, a heap array); the new entries are zeroed. 0 or
 * -ENOMEM (nothing changed).
 */
int bf_filter_layers_reserve(struct bf_filter *f, unsigned n);

/* Forget the id, LSN and expiry a filter had elsewhere (a copy from another instance): a
 * registry then gives it a new id when it adopts it. */
static inline void bf_filter_detach(struct bf_filter *f)
{
	f->id = 0;
	f->lsn = 0;
	if (f->rare)
		f->rare->expire_ms = 0;
}

/*
 * Check params: capacity >= 1, 0 < error_rate < 1, type known, expansion <= BF_MAX_EXPANSION
 * (expansion 1 is allowed, as in RedisBloom: equal-size layers with tightening error), first
 * and ratio each 0 (to be chosen) or in (0, 1).
 * Returns 0, -EINVAL, or -EDOM for an error rate in (0, BF_MIN_ERROR_RATE).
 */
int bf_params_validate(const struct bf_params *p);

/*
 * Create a filter with its first layer, charging its cost to budget (may be NULL).
 * Returns 0 with *out set; -EINVAL or -EDOM (bad params, as bf_params_validate), -ENOMEM
 * (budget or allocation; a layer the budget could never hold is refused before it is sized, so
 * a huge capacity costs no sizing work). Nothing is charged on failure.
 */
int bf_filter_new(const struct bf_params *p, uint64_t seed, struct bf_budget *budget,
		  struct bf_filter **out);
/* The same, named name[0, len) (len <= BF_NAME_MAX), the name in the filter's allocation. */
int bf_filter_new_named(const struct bf_params *p, const char *name, size_t len, uint64_t seed,
			struct bf_budget *budget, struct bf_filter **out);

/* Free the filter and release its cost from its budget. NULL is ignored. */
void bf_filter_free(struct bf_filter *f);

/*
 * For a filter that is being freed, whose memory takes long to give back (a GiB of written
 * pages takes about 0.3 s to unmap): its layers' blocks move to out[0, n) (n returned, out has
 * room for f->nlayers), to be freed with bf_layer_free on any thread (they share nothing with
 * f or its registry). f keeps their sizes and so its cost, without the memory: it may only be
 * freed (bf_filter_free, which releases the whole cost, so call it once out's are freed).
 */
unsigned bf_filter_take_blocks(struct bf_filter *f, struct bf_layer *out);

/*
 * The memory this filter holds, as charged to its budget: its structure and its layers with
 * the allocator's overhead (bf_layer_cost), not only the bits (f->bytes). A budget's limit
 * therefore bounds what many small filters really take.
 */
uint64_t bf_filter_cost(const struct bf_filter *f);

/*
 * The key's hash under this filter's seed. The log records it instead of the key's bytes, and
 * bf_filter_add_hash / bf_filter_delete_hash replay it: they do exactly what bf_filter_add /
 * bf_filter_delete do for a key with that hash.
 */
struct bf_hash bf_filter_hash(const struct bf_filter *f, const void *key, size_t len);
int bf_filter_add_hash(struct bf_filter *f, struct bf_hash h);
int bf_filter_delete_hash(struct bf_filter *f, struct bf_hash h);

/* 1 if the key may be present, 0 if certainly absent. Counts a check. */
int bf_filter_check(struct bf_filter *f, const void *key, size_t len);

/*
 * Add a key. Returns 1 if it was new, 0 if it was already present (a plain filter does not
 * change; a counting filter counts the add again, in the layer that holds the key, so it takes
 * one delete per add),
 * -ENOSPC if the filter is full and cannot grow (non-scaling, or 32 layers), -ENOMEM if
 * growing would pass the budget or allocation failed. On error nothing changes.
 */
int bf_filter_add(struct bf_filter *f, const void *key, size_t len);

/*
 * Counting filters: remove a key. Returns 1 if removed; 0 if it was not present (nothing
 * changes); -ENOTUNIQ if it tests present in more than one layer (nothing changes); -ENOTSUP
 * for a plain filter.
 *
 * Why -ENOTUNIQ: every add of a key goes to one layer (the newest layer in which it already
 * tests present, else the newest layer), so a key that was added and not deleted tests present
 * in its own layer; if it tests present in another one too, that one is a false positive, and
 * decrementing the wrong layer would zero counters of keys that were never deleted (a false
 * negative). Refusing keeps the promise: a key added and not deleted is never reported absent.
 * It happens with about the probability of a false positive in the other layers, never with a
 * single (non-scaling) layer. As in any counting filter, deleting a key that was never added
 * but tests present is the caller's error and may remove others.
 */
int bf_filter_delete(struct bf_filter *f, const void *key, size_t len);

/* How many layers the key tests present in (counts no check); for tests and diagnostics. */
unsigned bf_filter_layers_with(const struct bf_filter *f, const void *key, size_t len);

/*
 * Batch forms: hash every key first and prefetch its blocks, then probe.
 * check: out[i] = 0/1 for each of n keys.
 * add: out[i] as bf_filter_add; stops at the first error and returns the number of keys
 * processed (including the failed one), so out[0..ret) is meaningful; returns n on success.
 * hashes, if not NULL, receives each processed key's bf_filter_hash (for the log).
 */
void bf_filter_check_batch(struct bf_filter *f, size_t n, const void *const *keys,
			   const size_t *lens, int *out);
size_t bf_filter_add_batch(struct bf_filter *f, size_t n, const void *const *keys,
			   const size_t *lens, int *out, struct bf_hash *hashes);

/*
 * Deep copy of a filter (name, params, seed, layers, stats) charged to no budget, e.g. an exact
 * cut for a snapshot written while the original goes on. Returns 0 or -ENOMEM.
 */
int bf_filter_clone(const struct bf_filter *f, struct bf_filter **out);

/*
 * A copy in phases, for a snapshot of a large filter taken in slices while the original goes
 * on serving (a plain filter's copy stays valid if the bits copied later are newer: setting a
 * bit twice changes nothing). None of these is charged to a budget.
 *
 * bf_filter_copy_new: a filter of f's geometry (blocks zero) with f's metadata. 0 or -ENOMEM.
 * bf_filter_copy_grow: allocate the layers f gained since c was made, so c has f's geometry
 *   again. 0, or -ENOMEM (c keeps the layers it had).
 * bf_filter_copy_meta: everything but the blocks (name, parameters, seed, id, lsn, and the
 *   counts of bf_filter_copy_counts), as f has them now: the cut a snapshot records. 0, or
 *   -ENOMEM (a long name could not be copied).
 * bf_filter_copy_counts: the stats and the item counts of the layers c has (c->items their sum)
 *   as f has them now, for the end of a sliced copy (never fewer than the bits copied hold). If
 *   f grew since c's layers were allocated, its new layers are the next copy's.
 * bf_filter_copy_body: copy bytes [off, off + n) of f's body (bf_filter_body_at) into c's, across
 *   layers; the range is clipped to the body. Returns the bytes copied.
 * bf_filter_prefault: write every block of c once (zeros), so that later copies into a fresh
 *   copy do not take page faults (e.g. on a worker thread, before the loop copies).
 */
int bf_filter_copy_new(const struct bf_filter *f, struct bf_filter **out);
int bf_filter_copy_grow(struct bf_filter *c, const struct bf_filter *f);
int bf_filter_copy_meta(struct bf_filter *c, const struct bf_filter *f);
void bf_filter_copy_counts(struct bf_filter *c, const struct bf_filter *f);
uint64_t bf_filter_copy_body(struct bf_filter *c, const struct bf_filter *f, uint64_t off,
			     uint64_t n);
void bf_filter_prefault(struct bf_filter *c);

/*
 * A filter's body: its layers' blocks as one run of bytes, layer 0 first (what follows a
 * snapshot header). For copying a filter in slices (BF.SCANDUMP / BF.LOADCHUNK).
 *
 * bf_filter_body_at: the bytes from offset off to the end of the layer holding it, as a
 * pointer and *len; NULL (and *len 0) at or past the end of the body.
 * bf_filter_body_write: copy len bytes to offset off. Returns 0; -ERANGE if off is at or past
 * the end of the body; -EMSGSIZE if the bytes would run past the end of off's layer. On error
 * nothing changes.
 */
const void *bf_filter_body_at(const struct bf_filter *f, uint64_t off, uint64_t *len);
int bf_filter_body_write(struct bf_filter *f, uint64_t off, const void *data, size_t len);

/*
 * A digest of what f holds (DEBUG DIGEST-VALUE; replicas compare it with their primary's):
 * XXH3 over its parameters, seed, id, name, expiry, its layers' geometry and item counts, and
 * its body, into out[BF_DIGEST_BYTES]. Bookkeeping that differs between two copies of the same
 * filter (its LSN, the stats of reads) is left out. f must be in memory (not paged out).
 */
#define BF_DIGEST_BYTES 20
void bf_filter_digest(const struct bf_filter *f, unsigned char *out);

/*
 * The first layer's share of a new chain's error rate: BF_FIRST_SHARE. By the sizing model
 * (bench/chains), a fifth is the share that takes the fewest bits per key averaged
 * over chains that end anywhere from 1 to 20 times their first layer (log-uniformly), at every
 * error rate from 0.1 to 0.0001 with expansion 2; a half (the share before) costs 8 % more bits
 * at 20 times and saves 16 % on a chain that never grows.
 */
#define BF_FIRST_SHARE 0.2

/*
 * Bits per key, by the sizing model, of a scalable chain of these params (first share and ratio
 * set) holding `keys` keys, its layers filled in turn; HUGE_VAL if a layer cannot be sized.
 */
double bf_filter_chain_bits(const struct bf_params *p, uint64_t keys);

/*
 * The tightening ratio the model says needs the fewest bits per key for a chain of this type,
 * error rate, expansion and first share grown to 20 times its first layer (RedisBloom's 0.5 is
 * dear for a blocked layout: 0.7 for expansion 2 at 1 %). One of 0.50, 0.55, ... 0.95; 0.5 for
 * a non-scaling filter (it has one layer). Cached per (type, error rate, expansion, share).
 */
double bf_filter_choose_ratio(enum bf_type type, double error_rate, uint32_t expansion,
			      double first);

/*
 * Page f out (bloomd's close; its owner has its layers on disk): its layers are freed and
 * their cost released from its budget; everything else stays. Counts a page-out. 0, or
 * -ENOMEM: no room for f->rare, where a paged filter keeps its layer count (nothing changed).
 */
int bf_filter_page_out(struct bf_filter *f);

/*
 * Page f in: take the layers of copy, read from f's snapshot (same id, seed and parameters;
 * no budget), charging them to f's budget. 0 (copy is freed, a page-in counted), -EINVAL (copy
 * is not f's), -ENOMEM (the budget cannot hold it; nothing changes, copy is the caller's).
 */
int bf_filter_page_in(struct bf_filter *f, struct bf_filter *copy);

/* Capacity and error target of layer i of a filter with these params (what its layer i was
 * sized for: a layer does not keep them). */
void bf_filter_layer_target(const struct bf_params *p, unsigned i, uint64_t *cap, double *err);
/* The capacity alone: keys layer i takes before the chain grows (saturating). */
uint64_t bf_filter_layer_capacity(const struct bf_params *p, unsigned i);

/* Capacity of the whole chain as built so far (sum of layer capacities). */
uint64_t bf_filter_capacity(const struct bf_filter *f);

/* Model estimate of the chain's current false-positive rate: 1 - prod(1 - fpr_i) (a paged-out
 * filter's, as it was). */
double bf_filter_fpr(const struct bf_filter *f);

#endif
