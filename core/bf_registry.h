/* SPDX-License-Identifier: MIT */
/*
 * The registry of named filters, with the memory budget they share. Names are 1..200 bytes of
 * printable non-space characters (bytes 0x21-0x7e and >= 0x80 for UTF-8).
 */
#ifndef BF_REGISTRY_H
#define BF_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_filter.h"

struct bf_registry;

/* True if name[0..len) is a valid filter name. */
bool bf_name_valid(const char *name, size_t len);

/* New empty registry with a memory limit in bytes (0 = none). Returns 0 or -ENOMEM. */
int bf_registry_new(uint64_t max_memory, struct bf_registry **out);

/* Free every filter and the registry. NULL is ignored. */
void bf_registry_free(struct bf_registry *r);

/*
 * Create a filter, with the next unused id. Returns 0 with *out (may be NULL) set to it; -EINVAL
 * for a bad name or bad params; -EEXIST if the name is taken (*out, if given, is set to the
 * existing filter); -ENOMEM if it would pass max_memory or allocation failed. On error nothing
 * changes.
 */
int bf_registry_create(struct bf_registry *r, const char *name, size_t len,
		       const struct bf_params *p, uint64_t seed, struct bf_filter **out);

/*
 * Insert a filter built elsewhere without a budget (e.g. loaded from a snapshot); its cost is
 * then charged to the registry's budget. It keeps a non-zero id (a checkpoint's, which the log
 * names; later new filters get higher ids) and gets a new one if its id is 0. Returns 0, -EINVAL
 * (bad name, or f already has a budget), -EEXIST, -ENOMEM. On success the registry owns f; on error
 * the caller still does.
 */
int bf_registry_adopt(struct bf_registry *r, const char *name, size_t len, struct bf_filter *f);

/*
 * The same under a name no client can give or see as valid (BF_HIDDEN_NAME: a control byte, then
 * f's id in hex), which f is given: a start's filter whose name is known only once the log's
 * replay renames it (a checkpoint file renamed as metadata holds its name before the RENAME).
 * f must have an id. bf_registry_rename gives it a name.
 */
int bf_registry_adopt_hidden(struct bf_registry *r, struct bf_filter *f);
/* The filter of this id still under the hidden name bf_registry_adopt_hidden gave it, or NULL. */
struct bf_filter *bf_registry_get_hidden(const struct bf_registry *r, uint64_t id);
/* f's name is one bf_registry_adopt_hidden gave it. */
bool bf_registry_hidden(const struct bf_filter *f);
#define BF_HIDDEN_NAME '\x01'

/* A hint ahead of a lookup or adopt of name (many in a row, a start's load): its bucket is
 * fetched into the cache meanwhile. */
void bf_registry_prefetch(const struct bf_registry *r, const char *name, size_t len);

/* The filter with this name, or NULL. */
struct bf_filter *bf_registry_get(const struct bf_registry *r, const char *name, size_t len);

/*
 * Give f, a filter of r, the name name[0, len): 0; -EINVAL (bad name), -EEXIST (taken: drop the
 * other first), -ENOENT (f is not r's), -ENOMEM. On error nothing changes. A SCAN running across
 * it may visit f under both names, or neither (as Redis's RENAME).
 */
int bf_registry_rename(struct bf_registry *r, struct bf_filter *f, const char *name, size_t len);

/*
 * Expiry (Redis's EXPIRE): f, a filter of r, expires at Unix time expire_ms (0: never). The
 * registry keeps its expiring filters by time (adopt takes a filter's expire_ms as it is; drop
 * forgets it); nothing expires by itself: the owner drops what is due. 0, or -ENOMEM (nothing
 * changed).
 */
int bf_registry_set_expire(struct bf_registry *r, struct bf_filter *f, uint64_t expire_ms);
/* The filter that expires first, or NULL if none expires. */
struct bf_filter *bf_registry_next_expiring(const struct bf_registry *r);
/* How many filters expire, and (sum_ms may be NULL) the sum of their expire_ms. */
size_t bf_registry_expiring(const struct bf_registry *r, uint64_t *sum_ms);

/* Remove and free a filter (or hand it to the release function). Returns 0 or -ENOENT. */
int bf_registry_drop(struct bf_registry *r, const char *name, size_t len);

/*
 * From now on a filter dropped (bf_registry_drop) is handed to fn, which owns it and frees it
 * with bf_filter_free, on the registry's thread, when it likes (its cost stays charged to the
 * registry's budget until then, so the registry must outlive it); NULL: freed at once, the
 * default. bf_registry_free frees its filters itself.
 */
void bf_registry_set_release(struct bf_registry *r, void (*fn)(void *arg, struct bf_filter *f),
			     void *arg);

/*
 * The filters whose name starts with prefix (plen 0: all), sorted by name, as a malloc'd
 * array the caller frees (the filters stay owned by the registry): read off the name index, no
 * sort. Returns 0 with *out and *n set (*out is NULL when *n is 0), or -ENOMEM.
 */
int bf_registry_list(const struct bf_registry *r, const char *prefix, size_t plen,
		     struct bf_filter ***out, size_t *n);

/* The bytes f is charged against max_memory here: its own cost and its share of the buckets. */
uint64_t bf_registry_charge(const struct bf_registry *r, const struct bf_filter *f);

/* Call fn for every filter, in no particular order; fn must not add or drop filters. */
void bf_registry_each(const struct bf_registry *r, void (*fn)(void *arg, struct bf_filter *f),
		      void *arg);

/* How many times a filter joined or left r: equal at two moments, every filter of r is the
 * same object (a by-id index of them is still good; a rename keeps the object). */
uint64_t bf_registry_changes(const struct bf_registry *r);

/* Size the table for n filters at once (before adopting many: no rehash per doubling). Best
 * effort. */
void bf_registry_reserve(struct bf_registry *r, size_t n);

/*
 * Loading many filters at once (the start): from bf_registry_defer_names() on, created and
 * adopted filters join the name index (listings) only at bf_registry_index_names(), sorted
 * once, not one by one (see bf_index_defer). Until then listings, pages and walks by name do
 * not see them; lookups by name and everything else do. 0 or -ENOMEM (some filters are missing
 * from listings).
 */
void bf_registry_defer_names(struct bf_registry *r);
int bf_registry_index_names(struct bf_registry *r);

/*
 * Redis's SCAN over the filters: from cursor (0 to start), call fn for every filter of the
 * next buckets, in reverse-binary order of bucket index, until at least count were visited or
 * every bucket was; returns the cursor to go on from, 0 once the scan is complete. A filter
 * present from the first call to the last is visited exactly once, however many filters are
 * created or dropped in between (the table only grows, and growth keeps the order); one
 * created or dropped meanwhile may or may not be. Each call does O(count) work (plus empty
 * buckets: at most 10 * count are looked at).
 */
uint64_t bf_registry_scan(const struct bf_registry *r, uint64_t cursor, size_t count,
			  void (*fn)(void *arg, struct bf_filter *f), void *arg);

/*
 * One page of bf_registry_list: the first `limit` (>= 1) filters in name order whose name
 * starts with prefix (plen 0: all) and sorts after after[0, alen) (alen 0: from the start), as
 * a malloc'd array the caller frees; *more says whether others follow. Read off the registry's
 * name index (core/bf_index.h): O(log n + limit), however many filters there are. 0, or
 * -ENOMEM.
 */
int bf_registry_page(const struct bf_registry *r, const char *prefix, size_t plen,
		     const char *after, size_t alen, size_t limit, struct bf_filter ***out,
		     size_t *n, bool *more);

/*
 * Call fn for up to `limit` filters in name order whose name starts with prefix (plen 0: all)
 * and sorts after after[0, alen) (alen 0: from the start); true if more follow. Allocates
 * nothing: cannot fail. fn must not create, drop or rename filters.
 */
bool bf_registry_walk(const struct bf_registry *r, const char *prefix, size_t plen,
		      const char *after, size_t alen, size_t limit,
		      void (*fn)(void *arg, struct bf_filter *f), void *arg);

size_t bf_registry_count(const struct bf_registry *r);

/* Memory held by all filters (their cost, entries and the owner's overhead: what the limit
 * bounds), and the limit (0 = none). */
uint64_t bf_registry_memory(const struct bf_registry *r);
uint64_t bf_registry_max_memory(const struct bf_registry *r);

/*
 * Bytes the owner keeps per filter (its own bookkeeping), charged to the budget with every
 * filter besides the filter's cost (bf_filter_cost) and the registry's entry. Default 0.
 */
void bf_registry_set_entry_overhead(struct bf_registry *r, uint64_t bytes);

/* Change the limit (e.g. on config reload); existing filters stay even if above it. */
void bf_registry_set_max_memory(struct bf_registry *r, uint64_t max_memory);

#endif
