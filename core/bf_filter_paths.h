/*
 * Template of the filter's lookup paths, included twice by bf_filter.c: once for the scalar
 * kernels and once compiled for AVX2, so each path inlines its kernel, the hash and the chain
 * walk into one function. Define before including:
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
		const struct bf_layer *l = &f->layers[i];
		hit |= l->counting ? bf_layer_check(l, h) : KERNEL_CHECK(l, h);
	}
	return hit;
}

PATH_ATTR static bool PATH(check_key)(struct bf_filter *f, const void *key, size_t len)
{
	bool hit = PATH(chain_check)(f, bf_hash_key(key, len, f->seed));
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
