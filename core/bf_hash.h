/* SPDX-License-Identifier: MIT */
/* One XXH3-128 call per key: the high half picks the block, the low half the bits inside it. */
#ifndef BF_HASH_H
#define BF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct bf_hash {
	uint64_t lo; /* derives the in-block positions */
	uint64_t hi; /* picks the block (multiply-shift over the block count) */
};

/*
 * Hash len bytes at key (key may be NULL when len is 0) with the filter's seed: the value of
 * XXH3_128bits_withSeed. Keys of up to 16 bytes go straight to the branch that function takes
 * for them (XXH3_128bits_internal's first case), which is small enough to inline. GCC keeps the
 * whole function out of line, and the call with its register saves added some 17 instructions to
 * a lookup of about 125: fewer instructions per lookup let the CPU overlap more lookups' misses
 * (see check_key in bf_filter_paths.h).
 */
static inline struct bf_hash bf_hash_key(const void *key, size_t len, uint64_t seed)
{
	XXH128_hash_t h = len <= 16 ? XXH3_len_0to16_128b(len ? key : "", len, XXH3_kSecret, seed)
				    : XXH3_128bits_withSeed(key, len, seed);
	return (struct bf_hash){.lo = h.low64, .hi = h.high64};
}

#endif
