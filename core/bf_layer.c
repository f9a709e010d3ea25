/* SPDX-License-Identifier: MIT */
/* One layer of a filter: its geometry and sizing, its blocks' memory, and the probes (over
 * bf_kernels.h's scalar and AVX2 kernels); see bf_layer.h. */
#include "core/bf_kernels.h"
#include "core/bf_layer_impl.h"
#include "core/bf_model.h"
#include "core/bf_pool.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Layers at least this large come from mmap: page-aligned, zero pages until first written. */
#define MMAP_THRESHOLD (2u << 20)

static inline unsigned counter_index(struct bf_hash h, unsigned r, unsigned w)
{
	return (bf_round_hash(h, r) * bf_salt[r][w]) >> 28; /* 0..15 */
}

static struct bf_geometry geometry(bool counting)
{
	return counting ? BF_GEOMETRY_COUNT512 : BF_GEOMETRY_SECTOR512;
}

/*
 * Sizing runs the model (pow, lgamma: about 100 us), and most creates repeat a geometry
 * already seen (a filter per user, per day: the same capacity and error rate). A small
 * direct-mapped cache per thread remembers recent answers; the model is deterministic, so a
 * hit is exactly what it would compute.
 */
#define PLAN_CACHE 64

struct plan_entry {
	uint64_t capacity, error_bits, nblocks;
	unsigned b;
	int rc;
	bool counting, used;
};

static _Thread_local struct plan_entry plan_cache[PLAN_CACHE];

int bf_layer_plan(bool counting, uint64_t capacity, double error_rate, uint64_t *nblocks,
		  unsigned *b)
{
	uint64_t bits;
	memcpy(&bits, &error_rate, sizeof(bits));
	uint64_t h = (capacity * 0x9e3779b97f4a7c15ull) ^ (bits * 0xc2b2ae3d27d4eb4full) ^ counting;
	struct plan_entry *e = &plan_cache[(h >> 32) % PLAN_CACHE];

	if (!e->used || e->capacity != capacity || e->error_bits != bits ||
	    e->counting != counting) {
		uint64_t nb = 0;
		unsigned bb = 0;
		int rc = bf_model_size(geometry(counting), capacity, error_rate,
				       BF_LAYER_MAX_BLOCKS, &nb, &bb);
		*e = (struct plan_entry){capacity, bits, nb, bb, rc, counting, true};
	}
	if (e->rc)
		return e->rc;
	*nblocks = e->nblocks;
	*b = e->b;
	return 0;
}

/*
 * Zeroed anonymous memory aligned to 2 MiB and advised for huge pages: random probes over a
 * large layer miss the TLB on 4 KiB pages, and only an aligned range can be backed by huge
 * ones (with transparent huge pages set to "madvise", nothing else gets them). Returns NULL
 * on failure. bf_layer_free unmaps exactly [mem, mem + bytes).
 */
static void *map_huge(size_t bytes)
{
	const size_t huge = 2u << 20;
	size_t len = bytes + huge;
	char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	char *mem = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
	if (mem > raw)
		munmap(raw, (size_t)(mem - raw));
	size_t tail = (size_t)(raw + len - (mem + bytes));
	if (tail)
		munmap(mem + bytes, tail);
	madvise(mem, bytes, MADV_HUGEPAGE);
	return mem;
}

/*
 * Small layers (at most POOL_MAX_BLOCKS blocks: a filter per user is one of these) come from
 * pools (core/bf_pool.h), one per size: a million small filters then cost their bits and
 * nothing else; malloc would add its header and up to 48 bytes of alignment to each (64 bytes
 * on 192, bench/filter-cost), and glibc's aligned_alloc leaves the ends it cuts off unused (112
 * bytes).
 */
#define POOL_MAX_BLOCKS 8
#define LAYER_POOL(n)	[n] = {.size = (n)*BF_BLOCK_BYTES, .align = BF_BLOCK_BYTES}

static struct bf_pool pools[POOL_MAX_BLOCKS + 1] = {
    LAYER_POOL(1), LAYER_POOL(2), LAYER_POOL(3), LAYER_POOL(4),
    LAYER_POOL(5), LAYER_POOL(6), LAYER_POOL(7), LAYER_POOL(8),
};

/*
 * Zeroed heap memory for a layer too large for a pool and too small to map, aligned to a
 * block (a probe reads one cache line). Not aligned_alloc, for the ends it leaves: malloc
 * gives up to 48 bytes more, and *off is how far within the blocks start, for free. NULL if
 * out of memory.
 */
static void *heap_blocks(size_t bytes, uint8_t *off)
{
	const size_t slack = BF_BLOCK_BYTES - _Alignof(max_align_t);
	char *raw = malloc(bytes + slack);
	if (!raw)
		return NULL;
	char *mem =
	    (char *)(((uintptr_t)raw + BF_BLOCK_BYTES - 1) & ~(uintptr_t)(BF_BLOCK_BYTES - 1));
	*off = (uint8_t)(mem - raw);
	memset(mem, 0, bytes);
	return mem;
}

uint64_t bf_layer_cost(uint64_t bytes)
{
	const uint64_t page = 4096;

	if (bytes >= MMAP_THRESHOLD)
		return (bytes + page - 1) / page * page;
	if (bytes <= POOL_MAX_BLOCKS * BF_BLOCK_BYTES)
		return bytes;	       /* a slab's header and tail: under 1 % of it */
	return bytes + BF_BLOCK_BYTES; /* heap_blocks: malloc's header and the slack to align */
}

int bf_layer_alloc(struct bf_layer *l, bool counting, uint64_t nblocks, unsigned b)
{
	if (nblocks == 0 || nblocks > BF_LAYER_MAX_BLOCKS || b == 0 || b > BF_MODEL_MAX_B)
		return -EINVAL;
	size_t bytes = nblocks * BF_BLOCK_BYTES;
	bool mapped = bytes >= MMAP_THRESHOLD;
	uint8_t off = 0;
	void *mem = mapped			 ? map_huge(bytes)
		    : nblocks <= POOL_MAX_BLOCKS ? bf_pool_get(&pools[nblocks])
						 : heap_blocks(bytes, &off);
	if (!mem)
		return -ENOMEM;

	*l = (struct bf_layer){
	    .blocks = mem,
	    .nblocks = nblocks,
	    .b = (uint8_t)b,
	    .counting = counting,
	    .mapped = mapped,
	    .align_off = off,
	};
	return 0;
}

int bf_layer_init(struct bf_layer *l, bool counting, uint64_t capacity, double error_rate)
{
	uint64_t nblocks;
	unsigned b;
	int rc = bf_layer_plan(counting, capacity, error_rate, &nblocks, &b);
	if (rc)
		return rc;
	return bf_layer_alloc(l, counting, nblocks, b);
}

void bf_layer_free(struct bf_layer *l)
{
	if (!l->blocks)
		return;
	if (l->mapped)
		munmap(l->blocks, bf_layer_bytes(l));
	else if (l->nblocks <= POOL_MAX_BLOCKS)
		bf_pool_put(l->blocks);
	else
		free((char *)l->blocks - l->align_off);
	l->blocks = NULL;
}

/* ---- plain layer: the kernels of bf_kernels.h, exported for tests ---- */

bool bf_layer_check_scalar(const struct bf_layer *l, struct bf_hash h)
{
	return bf_kernel_check_scalar(l, h);
}

bool bf_layer_add_scalar(struct bf_layer *l, struct bf_hash h)
{
	return bf_kernel_add_scalar(l, h);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) bool bf_layer_check_avx2(const struct bf_layer *l, struct bf_hash h)
{
	return bf_kernel_check_avx2(l, h);
}

__attribute__((target("avx2"))) bool bf_layer_add_avx2(struct bf_layer *l, struct bf_hash h)
{
	return bf_kernel_add_avx2(l, h);
}
#endif

bool bf_layer_have_avx2(void)
{
	return BF_HAVE_AVX2();
}

/* ---- counting layer ---- */

/* The distinct counter indices of round 0..b-1 in word w; returns how many. */
static unsigned counter_positions(const struct bf_layer *l, struct bf_hash h, unsigned w,
				  unsigned pos[BF_MODEL_MAX_B])
{
	unsigned n = 0;

	for (unsigned r = 0; r < l->b; r++) {
		unsigned p = counter_index(h, r, w);
		bool dup = false;
		for (unsigned i = 0; i < n; i++)
			dup |= pos[i] == p;
		if (!dup)
			pos[n++] = p;
	}
	return n;
}

static inline unsigned counter_get(uint64_t word, unsigned i)
{
	return (word >> (4 * i)) & 15;
}

static bool counting_check(const struct bf_layer *l, struct bf_hash h)
{
	const uint64_t *blk = bf_layer_block(l, h);
	unsigned pos[BF_MODEL_MAX_B];

	for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
		unsigned n = counter_positions(l, h, w, pos);
		for (unsigned i = 0; i < n; i++)
			if (counter_get(blk[w], pos[i]) == 0)
				return false;
	}
	return true;
}

static bool counting_add(struct bf_layer *l, struct bf_hash h)
{
	uint64_t *blk = bf_layer_block(l, h);
	unsigned pos[BF_MODEL_MAX_B];
	bool was_zero = false;

	for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
		unsigned n = counter_positions(l, h, w, pos);
		for (unsigned i = 0; i < n; i++) {
			unsigned c = counter_get(blk[w], pos[i]);
			was_zero |= c == 0;
			if (c < 15)
				blk[w] += UINT64_C(1) << (4 * pos[i]);
		}
	}
	return was_zero;
}

bool bf_layer_delete(struct bf_layer *l, struct bf_hash h)
{
	if (!l->counting || !counting_check(l, h))
		return false;

	uint64_t *blk = bf_layer_block(l, h);
	unsigned pos[BF_MODEL_MAX_B];
	for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
		unsigned n = counter_positions(l, h, w, pos);
		for (unsigned i = 0; i < n; i++)
			if (counter_get(blk[w], pos[i]) < 15)
				blk[w] -= UINT64_C(1) << (4 * pos[i]);
	}
	return true;
}

/* ---- dispatch ---- */

bool bf_layer_check(const struct bf_layer *l, struct bf_hash h)
{
	if (l->counting)
		return counting_check(l, h);
#if defined(__x86_64__)
	if (BF_HAVE_AVX2())
		return bf_layer_check_avx2(l, h);
#endif
	return bf_kernel_check_scalar(l, h);
}

bool bf_layer_add(struct bf_layer *l, struct bf_hash h)
{
	if (l->counting)
		return counting_add(l, h);
#if defined(__x86_64__)
	if (BF_HAVE_AVX2())
		return bf_layer_add_avx2(l, h);
#endif
	return bf_kernel_add_scalar(l, h);
}

double bf_layer_fpr(const struct bf_layer *l)
{
	return bf_model_fpr(geometry(l->counting), l->b, (double)l->items / l->nblocks);
}

uint64_t bf_layer_popcount(const struct bf_layer *l)
{
	uint64_t n = 0, words = (uint64_t)l->nblocks * BF_BLOCK_WORDS;

	for (uint64_t i = 0; i < words; i++) {
		uint64_t w = l->blocks[i];
		if (!l->counting) {
			n += (uint64_t)__builtin_popcountll(w);
			continue;
		}
		for (unsigned c = 0; c < 16; c++)
			n += counter_get(w, c) != 0;
	}
	return n;
}
