/* SPDX-License-Identifier: MIT */
/*
 * One layer: a cache-line-blocked Bloom filter (sectorized, 8 x 64-bit words per 64-byte block,
 * b bits per word, k = 8b), or its counting variant (the same 64-byte blocks holding 8 words of
 * 16 four-bit saturating counters, b counters per word). A key touches exactly one cache line.
 */
#ifndef BF_LAYER_H
#define BF_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_hash.h"

#define BF_BLOCK_BYTES 64
#define BF_BLOCK_WORDS 8

/* Layers larger than this are sized with the model's max_blocks (1 TiB of blocks). */
#define BF_LAYER_MAX_BLOCKS (UINT64_C(1) << 34)
_Static_assert(BF_LAYER_MAX_BLOCKS < (UINT64_C(1) << 40), "struct bf_layer's nblocks holds it");

struct bf_layer {
	uint64_t *blocks; /* nblocks * 8 words, 64-byte aligned, zeroed at init */
	uint64_t items;	  /* keys added to this layer (adds that reported "new") */
	/* Its capacity and its error target at capacity are not kept: its filter's params give
	 * them (bf_filter_layer_target), as they gave its size. The rest shares one word (the
	 * first layer's entry is inside every filter's structure). */
	uint64_t nblocks : 40; /* at most BF_LAYER_MAX_BLOCKS */
	uint64_t b : 8;	       /* positions per word */
	uint64_t counting : 1; /* a counting layer */
	uint64_t mapped : 1;   /* blocks come from mmap (large layers) rather than the heap */
	uint64_t
	    align_off : 14; /* heap layers: blocks - the pointer malloc gave (bf_layer_alloc) */
};

/*
 * Size a layer from the model and allocate its zeroed blocks.
 * Returns 0; -EINVAL for capacity 0 or error_rate outside (0, 1); -E2BIG if the layer would
 * exceed BF_LAYER_MAX_BLOCKS; -ENOMEM if allocation fails. On error *l is untouched.
 */
int bf_layer_init(struct bf_layer *l, bool counting, uint64_t capacity, double error_rate);

/*
 * The geometry bf_layer_init would allocate (block count and positions per word), without
 * allocating. Same returns. Recent answers are cached per thread (the model is slow and
 * deterministic).
 */
int bf_layer_plan(bool counting, uint64_t capacity, double error_rate, uint64_t *nblocks,
		  unsigned *b);

/*
 * Allocate a zeroed layer of a known geometry (e.g. from a snapshot or a copy). Returns 0,
 * -EINVAL (nblocks 0 or over BF_LAYER_MAX_BLOCKS, b outside 1..8), -ENOMEM.
 */
int bf_layer_alloc(struct bf_layer *l, bool counting, uint64_t nblocks, unsigned b);

/*
 * What bf_layer_alloc really takes for `bytes` of blocks: the heap's header and alignment slack
 * for a small layer, whole pages (and the 2 MiB alignment it unmaps) for a mapped one. This is
 * what a memory budget must count, not the bare bytes.
 */
uint64_t bf_layer_cost(uint64_t bytes);

/* Release the blocks; safe on a zeroed layer. */
void bf_layer_free(struct bf_layer *l);

static inline size_t bf_layer_bytes(const struct bf_layer *l)
{
	return (size_t)l->nblocks * BF_BLOCK_BYTES;
}

/* The block a hash maps to (multiply-shift, never modulo). */
static inline uint64_t *bf_layer_block(const struct bf_layer *l, struct bf_hash h)
{
	__extension__ typedef unsigned __int128 u128;
	return l->blocks + (uint64_t)(((u128)h.hi * l->nblocks) >> 64) * BF_BLOCK_WORDS;
}

static inline void bf_layer_prefetch(const struct bf_layer *l, struct bf_hash h)
{
	__builtin_prefetch(bf_layer_block(l, h));
}

/* True if every position of h is set (plain) or non-zero (counting). */
bool bf_layer_check(const struct bf_layer *l, struct bf_hash h);

/*
 * Set the key's positions. Plain: returns true if any bit changed. Counting: increments each
 * distinct position (saturating at 15) and returns true if any of them was zero before; a
 * key added twice needs two deletes, as in any counting Bloom filter.
 * Does not touch l->items; the chain decides what counts as a new key.
 */
bool bf_layer_add(struct bf_layer *l, struct bf_hash h);

/*
 * Counting only: if every position is non-zero, decrement each distinct one (a saturated
 * counter stays 15) and return true; otherwise change nothing and return false.
 */
bool bf_layer_delete(struct bf_layer *l, struct bf_hash h);

/* Model estimate of this layer's current false-positive rate from its item count. */
double bf_layer_fpr(const struct bf_layer *l);

/* Bits set (plain) or counters non-zero (counting); for tests and stats. */
uint64_t bf_layer_popcount(const struct bf_layer *l);

#endif
