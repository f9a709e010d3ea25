/* SPDX-License-Identifier: MIT */
/*
 * The sizing model: exact false-positive rate of a cache-line-blocked Bloom filter from the
 * Poisson distribution of block loads, and the smallest layer that meets a target rate.
 *
 * A block is `words` words of `slots` slots each; every key sets `b` slots (chosen uniformly,
 * independently, so they may coincide) in every word of one block. The three layouts used by
 * blossomd and its tests:
 *   sectorized 512 (the plain layer):  words 8, slots 64, b = 1..8  (k = 8b)
 *   counting 512 (4-bit counters):     words 8, slots 16, b = 1..8
 *   split block 256 (reference only):  words 8, slots 32, b = 1
 */
#ifndef BF_MODEL_H
#define BF_MODEL_H

#include <stdint.h>

struct bf_geometry {
	unsigned words; /* words per block */
	unsigned slots; /* slots per word */
};

#define BF_GEOMETRY_SECTOR512 ((struct bf_geometry){.words = 8, .slots = 64})
#define BF_GEOMETRY_COUNT512  ((struct bf_geometry){.words = 8, .slots = 16})
#define BF_GEOMETRY_SPLIT256  ((struct bf_geometry){.words = 8, .slots = 32})

/* Largest b the model and the layers support. */
#define BF_MODEL_MAX_B 8

/*
 * False-positive rate of one blocked layer holding keys_per_block keys per block on average,
 * with b slots per word per key. Returns a probability in [0, 1]; 0 when keys_per_block <= 0.
 */
double bf_model_fpr(struct bf_geometry g, unsigned b, double keys_per_block);

/* Textbook standard Bloom filter: rate with bits_per_key bits and k hashes, (1 - e^(-k/bpk))^k. */
double bf_model_standard_fpr(double bits_per_key, unsigned k);

/* Textbook optimum bits per key for rate p: -ln p / ln^2 2. */
double bf_model_standard_bits_per_key(double p);

/*
 * Smallest block count (and the b that achieves it, the smaller b on a tie) such that a layer
 * of geometry g holding `capacity` keys has a modelled rate <= error_rate.
 * Returns 0 with *nblocks and *b set; -EINVAL if capacity is 0 or error_rate is not in (0, 1);
 * -E2BIG if more than max_blocks blocks would be needed.
 */
int bf_model_size(struct bf_geometry g, uint64_t capacity, double error_rate, uint64_t max_blocks,
		  uint64_t *nblocks, unsigned *b);

#endif
