/* SPDX-License-Identifier: MIT */
/*
 * Pools of same-size pieces without a header each, for what core makes by the million: a small
 * layer's blocks (bf_layer.c) and a filter's own allocation (bf_filter.c). A piece comes from a
 * slab of BF_POOL_SLAB_BYTES, a plain heap block whose first bytes are its header and whose
 * rest is cut into pieces; an empty slab goes back to the heap at once. malloc would give each
 * piece an 8-byte header and round it up to 16 bytes (and to 64 with aligned_alloc's ends).
 *
 * The slabs of every pool are listed by address, so that a piece given back finds its slab by
 * a binary search (a piece goes back when its filter goes: rarely). Slabs aligned to their size,
 * for a piece to find its slab from its own address, would make the heap advance in whole
 * multiples of that size: what is allocated between them fills the gaps only as far as it
 * happens to (bench/filter-cost: 394 bytes of heap per filter with a structure of 176 bytes
 * and the same with one of 160, 16 of which free).
 *
 * Thread-safe (layers and filters are made on the loop and on the threadpool): one lock, held
 * for a few instructions, and for a move of the slab list when a slab comes or goes.
 */
#ifndef BF_POOL_H
#define BF_POOL_H

#include <stddef.h>
#include <stdint.h>

#define BF_POOL_SLAB_BYTES (32u << 10)

struct bf_pool_slab;

/* One size of pieces. Define it statically with size and align set; the rest is the pool's. */
struct bf_pool {
	uint32_t size;		   /* bytes per piece, a multiple of align */
	uint32_t align;		   /* 8 to 64, a power of two */
	struct bf_pool_slab *room; /* its slabs with a piece free */
};

/* A zeroed piece of p->size bytes aligned to p->align; NULL if out of memory. */
void *bf_pool_get(struct bf_pool *p);

/* Give back a piece bf_pool_get gave (of any pool). NULL is ignored. */
void bf_pool_put(void *piece);

/* The slabs of all pools there are now (the list of them is freed with the last). */
size_t bf_pool_slabs(void);

#endif
