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

/* Hash len bytes at key (key may be NULL when len is 0) with the filter's seed. */
static inline struct bf_hash bf_hash_key(const void *key, size_t len, uint64_t seed)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(len ? key : "", len, seed);
	return (struct bf_hash){ .lo = h.low64, .hi = h.high64 };
}

#endif
