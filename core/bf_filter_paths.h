/* SPDX-License-Identifier: MIT */
/*
 * Template of the filter's lookup paths, included twice by bf_filter.c: once for the scalar
 * kernels and once compiled for AVX2, so each path inlines its kernel and the hash into one
 * function. Define before including:
 *   PATH(name)   the function name with the variant's suffix
 *   PATH_ATTR    the variant's function attributes
 *   KERNEL_CHECK the plain layer's inline check kernel
 */

/*
 * Every layer is probed and the answers OR'ed, with no branch on a probe's result: such a
 * branch mispredicts on a mix of hits and misses, and each misprediction waits for the cache
 * miss under it, so the CPU could no longer overlap the misses of consecutive lookups.
 */
PATH_ATTR static inline bool PATH(chain_check)(const struct bf_filter *f, struct bf_hash h)
{
	bool hit = false;

	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		hit |= l->counting ? bf_layer_check(l, h) : KERNEL_CHECK(l, h);
	}
	return hit;
}

/* Out of line, so the chain walk's registers do not weigh on check_key's fast path. */
PATH_ATTR static __attribute__((noinline)) bool PATH(chain_check_cold)(const struct bf_filter *f,
								       struct bf_hash h)
{
	return PATH(chain_check)(f, h);
}

/*
 * The single-key lookup. The caller's next lookup does not depend on this one, so the CPU runs
 * ahead into it while this one waits for memory, but only as far as its out-of-order window
 * reaches (on Zen 4 a 320-entry reorder buffer and 224 integer registers): the window fills up
 * behind the oldest cache miss, so the instructions per lookup, not the memory, decide how many
 * misses overlap. Hence a one-layer plain filter (every non-scaling one, and a scaling one until
 * it first grows) probes its layer inline, without the chain loop, and the hash's short-key
 * branch is inlined (bf_hash_key): about 125 instructions per lookup instead of 190.
 */
PATH_ATTR static __attribute__((noinline)) int PATH(check_key)(struct bf_filter *f, const void *key,
							       size_t len)
{
	struct bf_hash h = bf_hash_key(key, len, f->seed);
	const struct bf_layer *l = &f->layer0; /* its layer if it has room for one only */
	bool hit;

	if (f->nlayers == 1 && f->layers_cap == 1 && !l->counting)
		hit = KERNEL_CHECK(l, h);
	else
		hit = PATH(chain_check_cold)(f, h);
	count_check(f, hit);
	return hit;
}

/*
 * Hash keys PREFETCH_AHEAD places ahead of the probe and prefetch their blocks, so the probes
 * find their cache lines loaded.
 */
PATH_ATTR static void PATH(check_batch)(struct bf_filter *f, size_t n, const void *const *keys,
					const size_t *lens, int *out)
{
	struct bf_hash ring[PREFETCH_AHEAD];
	size_t ahead = n < PREFETCH_AHEAD ? n : PREFETCH_AHEAD;

	for (size_t i = 0; i < ahead; i++)
		ring[i] = hash_and_prefetch(f, keys[i], lens[i]);
	for (size_t i = 0; i < n; i++) {
		struct bf_hash h = ring[i % PREFETCH_AHEAD];
		if (i + PREFETCH_AHEAD < n)
			ring[i % PREFETCH_AHEAD] = hash_and_prefetch(f, keys[i + PREFETCH_AHEAD],
								     lens[i + PREFETCH_AHEAD]);
		bool hit = PATH(chain_check)(f, h);
		count_check(f, hit);
		out[i] = hit;
	}
}
