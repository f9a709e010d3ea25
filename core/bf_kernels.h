/* SPDX-License-Identifier: MIT */
/*
 * The plain layer's probe kernels, inline so the filter's hot paths can compile them into
 * their own scalar and AVX2 variants (a call per probe costs more than the probe when the
 * block is in cache). Internal to core/. The AVX2 kernels set exactly the scalar ones' bits.
 */
#ifndef BF_KERNELS_H
#define BF_KERNELS_H

#include "core/bf_layer.h"
#include "core/bf_model.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define BF_HAVE_AVX2() __builtin_cpu_supports("avx2")
#else
#define BF_HAVE_AVX2() 0
#endif

/*
 * Odd 32-bit multipliers, one row per round (b <= 8), one column per word. The position of a
 * key in word w for round r is the top bits of (h32(r) * bf_salt[r][w]) mod 2^32.
 */
static const uint32_t bf_salt[BF_MODEL_MAX_B][BF_BLOCK_WORDS] __attribute__((aligned(32))) = {
    {0x4abea221U, 0x23148989U, 0x609dfe03U, 0xdeb12801U, 0x6c442cb7U, 0xc7e4f8c5U, 0xf8fba7e5U,
     0x3cdb9eebU},
    {0xf9520069U, 0xe116868bU, 0xa2023cbdU, 0xa37b51b9U, 0x524f3905U, 0x6ca3b277U, 0x5104e85bU,
     0x9fd533b3U},
    {0x50ab4b57U, 0x80fe62c5U, 0xa6bcedc7U, 0x332c7c89U, 0x20bd47dbU, 0xe0bb7c4fU, 0x434a346dU,
     0x60416d7fU},
    {0xe0e10a5fU, 0xd064e22fU, 0x07df3af3U, 0x89ea30e5U, 0xcc6c522bU, 0x4e37087dU, 0x9f51f27bU,
     0xcee481ebU},
    {0x3c59a1f1U, 0x651ea4dbU, 0x8fc01ac7U, 0xa31b717dU, 0x9797d3a3U, 0xc4ac1881U, 0x42c28a7dU,
     0x64327351U},
    {0xd9e9c06dU, 0x46524825U, 0x62a51617U, 0xc53f2b3bU, 0x94b9c33fU, 0x2447e8abU, 0x2a1a245fU,
     0x7d7b3b99U},
    {0x4536912fU, 0x6cf9881bU, 0x99f932dbU, 0xaf93e7f1U, 0x1e7f46abU, 0x3eddb4a1U, 0x14554799U,
     0xef84bde3U},
    {0x1fefb567U, 0xc7bf19f1U, 0x3d4a8ec5U, 0xba62dccbU, 0xf530844bU, 0x4d57959dU, 0xfe90b68fU,
     0xa696fbd3U},
};

/* Round r hashes with alternating halves of the low 64 bits. */
static inline uint32_t bf_round_hash(struct bf_hash h, unsigned r)
{
	return (r & 1) ? (uint32_t)(h.lo >> 32) : (uint32_t)h.lo;
}

static inline unsigned bf_bit_index(struct bf_hash h, unsigned r, unsigned w)
{
	return (bf_round_hash(h, r) * bf_salt[r][w]) >> 26; /* 0..63 */
}

static inline bool bf_kernel_check_scalar(const struct bf_layer *l, struct bf_hash h)
{
	const uint64_t *blk = bf_layer_block(l, h);

	for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
		uint64_t mask = 0;
		for (unsigned r = 0; r < l->b; r++)
			mask |= UINT64_C(1) << bf_bit_index(h, r, w);
		if ((blk[w] & mask) != mask)
			return false;
	}
	return true;
}

static inline bool bf_kernel_add_scalar(struct bf_layer *l, struct bf_hash h)
{
	uint64_t *blk = bf_layer_block(l, h);
	uint64_t changed = 0;

	for (unsigned w = 0; w < BF_BLOCK_WORDS; w++) {
		uint64_t mask = 0;
		for (unsigned r = 0; r < l->b; r++)
			mask |= UINT64_C(1) << bf_bit_index(h, r, w);
		changed |= mask & ~blk[w];
		blk[w] |= mask;
	}
	return changed != 0;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static inline void
bf_avx2_masks(const struct bf_layer *l, struct bf_hash h, __m256i *m0, __m256i *m1)
{
	const __m256i one = _mm256_set1_epi64x(1);
	__m256i a = _mm256_setzero_si256(), c = _mm256_setzero_si256();

	for (unsigned r = 0; r < l->b; r++) {
		__m256i s = _mm256_load_si256((const __m256i *)bf_salt[r]);
		__m256i idx = _mm256_srli_epi32(
		    _mm256_mullo_epi32(_mm256_set1_epi32((int)bf_round_hash(h, r)), s), 26);
		__m256i lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(idx));
		__m256i hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(idx, 1));
		a = _mm256_or_si256(a, _mm256_sllv_epi64(one, lo));
		c = _mm256_or_si256(c, _mm256_sllv_epi64(one, hi));
	}
	*m0 = a;
	*m1 = c;
}

__attribute__((target("avx2"))) static inline bool bf_kernel_check_avx2(const struct bf_layer *l,
									struct bf_hash h)
{
	const __m256i *blk = (const __m256i *)bf_layer_block(l, h);
	__m256i m0, m1;

	bf_avx2_masks(l, h, &m0, &m1);
	return _mm256_testc_si256(_mm256_load_si256(blk), m0) &
	       _mm256_testc_si256(_mm256_load_si256(blk + 1), m1);
}

__attribute__((target("avx2"))) static inline bool bf_kernel_add_avx2(struct bf_layer *l,
								      struct bf_hash h)
{
	__m256i *blk = (__m256i *)bf_layer_block(l, h);
	__m256i m0, m1;

	bf_avx2_masks(l, h, &m0, &m1);
	__m256i b0 = _mm256_load_si256(blk), b1 = _mm256_load_si256(blk + 1);
	bool present = _mm256_testc_si256(b0, m0) & _mm256_testc_si256(b1, m1);
	_mm256_store_si256(blk, _mm256_or_si256(b0, m0));
	_mm256_store_si256(blk + 1, _mm256_or_si256(b1, m1));
	return !present;
}

#endif

#endif
