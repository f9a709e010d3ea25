/* SPDX-License-Identifier: MIT */
/*
 * The filters in name order (bytes compared as unsigned, a prefix first): what a listing by
 * name needs (HTTP's pages with `after`, /metrics' first filters, text `list`, KEYS) without a
 * sort of every filter nor a pass over them. Two levels: sorted leaves of up to
 * BF_INDEX_LEAF filter pointers, and a sorted array of the leaves, searched by each leaf's
 * first name. Finding a name takes O(log n) comparisons; an insert or removal moves at most a
 * leaf's pointers, plus, when a leaf splits or goes, the array of leaves (about 10,000 pointers
 * at a million filters). Names that arrive in order fill leaves whole; in random order they are
 * about 70 % full (splits halve a leaf, removals merge one less than a quarter full into a
 * neighbour with room): 9 to 12 bytes per filter.
 *
 * The index holds pointers only: a filter is removed before it is freed, and before its name
 * changes (then inserted again under the new name).
 */
#ifndef BF_INDEX_H
#define BF_INDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/bf_filter.h"

#define BF_INDEX_LEAF 128

struct bf_index_leaf;
struct bf_index_item;
struct bf_index_gone;

struct bf_index {
	struct bf_index_leaf **leaves; /* sorted by their first filter's name; none is empty */
	size_t nleaves, cap;
	size_t count;
	struct bf_index_leaf *spare; /* bf_index_reserve()'s */
	/* Between bf_index_defer() and bf_index_flush(): the filters inserted, not yet in the
	 * leaves (in order of insertion), and the removals since, each with the number of
	 * inserts before it. */
	bool deferring;
	struct bf_index_item *batch;
	size_t nbatch, batch_cap;
	struct bf_index_gone *gone;
	size_t ngone, gone_cap;
};

/* A place in the index: leaf `leaf`, slot `i`. Valid until the index next changes. */
struct bf_index_pos {
	size_t leaf, i;
};

/* Free the index's own memory (not the filters). A zeroed struct bf_index is an empty index. */
void bf_index_clear(struct bf_index *ix);

/* Add f under its name: 0, -EEXIST (a filter of that name is there), -ENOMEM (nothing
 * changed). */
int bf_index_insert(struct bf_index *ix, struct bf_filter *f);

/* Make sure the next insert cannot fail for want of memory: 0 or -ENOMEM. */
int bf_index_reserve(struct bf_index *ix);

/* Remove f (found by its name; the one with that name must be f): 0 or -ENOENT. */
int bf_index_remove(struct bf_index *ix, const struct bf_filter *f);

/*
 * Loading many filters at once: from now until bf_index_flush(), an insert only appends f to a
 * batch (-ENOMEM is its only failure; the caller guarantees that no two filters of the index
 * share a name, which is not checked), and a removal notes it; the flush sorts the batch and
 * fills the leaves whole, in one pass. A million names in random order take one radix sort
 * rather than a million binary searches and shifts. Seek and next see no batched filter until
 * the flush.
 */
void bf_index_defer(struct bf_index *ix);
/* Put what was batched since bf_index_defer() into the leaves; inserts go one by one again.
 * 0, -EEXIST (filters batched share a name: one of them is indexed, the others are not),
 * or -ENOMEM (the batch is indexed as far as memory allowed). */
int bf_index_flush(struct bf_index *ix);
/* The first place whose filter's name sorts after name[0, len) (or at it, if `at` and there is
 * one of that name). */
struct bf_index_pos bf_index_seek(const struct bf_index *ix, const char *name, size_t len, bool at);

/* The filter at *p, moving *p to the next; NULL at the end. */
struct bf_filter *bf_index_next(const struct bf_index *ix, struct bf_index_pos *p);

#endif
