/* SPDX-License-Identifier: MIT */
/* The layer kernels: scalar and AVX2 set identical bits; counting semantics. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core/bf_layer_impl.h"
#include "tests/check_main.h"

static struct bf_hash hash_u64(uint64_t i)
{
	return bf_hash_key(&i, sizeof(i), 42);
}

START_TEST(scalar_and_avx2_set_identical_bits)
{
	if (!bf_layer_have_avx2())
		return; /* nothing to compare on this CPU */
#if defined(__x86_64__)
	/* b = 1 at 1e-2, b = 2 at 1e-6: cover both kernels' round loops. */
	static const double rates[] = {1e-2, 1e-6};
	for (unsigned t = 0; t < 2; t++) {
		struct bf_layer a, v;
		ck_assert_int_eq(bf_layer_init(&a, false, 20000, rates[t]), 0);
		ck_assert_int_eq(bf_layer_init(&v, false, 20000, rates[t]), 0);
		unsigned differ = 0;
		for (uint64_t i = 0; i < 20000; i++) {
			struct bf_hash h = hash_u64(i);
			differ += bf_layer_add_scalar(&a, h) != bf_layer_add_avx2(&v, h);
		}
		ck_assert_uint_eq(differ, 0);
		ck_assert_mem_eq(a.blocks, v.blocks, bf_layer_bytes(&a));
		for (uint64_t i = 0; i < 100000; i++) {
			struct bf_hash h = hash_u64(i);
			differ += bf_layer_check_scalar(&a, h) != bf_layer_check_avx2(&v, h);
		}
		ck_assert_uint_eq(differ, 0);
		bf_layer_free(&a);
		bf_layer_free(&v);
	}
#endif
}
END_TEST

START_TEST(hash_is_xxh3_128_with_seed)
{
	/* bf_hash_key takes a shortcut into xxhash for short keys; it must equal the real thing. */
	unsigned char key[300];
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(i * 131 + 7);
	unsigned differ = 0;
	for (uint64_t seed = 0; seed < 50; seed++) {
		for (size_t len = 0; len <= sizeof(key); len++) {
			XXH128_hash_t want =
			    XXH3_128bits_withSeed(key, len, seed * 0x9e3779b97f4a7c15u);
			struct bf_hash got = bf_hash_key(key, len, seed * 0x9e3779b97f4a7c15u);
			differ += got.lo != want.low64 || got.hi != want.high64;
		}
	}
	ck_assert_uint_eq(differ, 0);
}
END_TEST

START_TEST(add_reports_change_and_sets_k_bits)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, false, 1000, 0.01), 0);
	ck_assert_uint_eq(l.b, 1);
	struct bf_hash h = hash_u64(1);
	ck_assert(!bf_layer_check(&l, h));
	ck_assert(bf_layer_add(&l, h));
	ck_assert(bf_layer_check(&l, h));
	ck_assert(!bf_layer_add(&l, h));
	ck_assert_uint_eq(bf_layer_popcount(&l), 8); /* one bit in each of the 8 words */
	bf_layer_free(&l);
	bf_layer_free(&l); /* idempotent */
}
END_TEST

START_TEST(large_layer_is_mapped_and_zero)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, false, 10000000, 0.01), 0);
	ck_assert(l.mapped);
	ck_assert_uint_eq((uintptr_t)l.blocks % 64, 0);
	ck_assert(!bf_layer_check(&l, hash_u64(5)));
	ck_assert(bf_layer_add(&l, hash_u64(5)));
	ck_assert(bf_layer_check(&l, hash_u64(5)));
	bf_layer_free(&l);
}
END_TEST

/* Small layers come from pools and middling ones from malloc, aligned within: every size lands
 * on a block boundary (the AVX2 kernels load aligned), starts zeroed even where a freed layer
 * was, and frees what it was given (ASan and valgrind see). */
START_TEST(small_layers_are_aligned_and_zero)
{
	struct bf_layer l[64];

	for (unsigned i = 0; i < 64; i++) {
		unsigned nblocks = 1 + i % 12;

		ck_assert_int_eq(bf_layer_alloc(&l[i], i % 2, nblocks, 8), 0);
		ck_assert(!l[i].mapped);
		ck_assert_uint_eq((uintptr_t)l[i].blocks % 64, 0);
		ck_assert_uint_le(l[i].align_off, 48);
		for (size_t w = 0; w < nblocks * BF_BLOCK_WORDS; w++)
			ck_assert_uint_eq(l[i].blocks[w], 0);
		memset(l[i].blocks, 0xff, bf_layer_bytes(&l[i]));
		if (i % 3 == 0)
			bf_layer_free(&l[i]); /* its piece is handed out again, zeroed */
	}
	for (unsigned i = 0; i < 64; i++)
		bf_layer_free(&l[i]);
}
END_TEST

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* A small filter costs its bits: 20,000 layers of 192 bytes take under 200 bytes each from the
 * heap (malloc's own header and alignment would make it 256), and dropping them all, in any
 * order, gives it back (a pool's slab is freed once empty): what stays is the allocator's own
 * caches of small free chunks, which mallinfo2 counts as in use, far under a tenth. */
#define MANY 20000
START_TEST(pooled_layers_cost_their_bits_and_are_given_back)
{
	struct bf_layer *l = calloc(MANY, sizeof(*l));
	ck_assert_ptr_nonnull(l);
	size_t h0 = heap_in_use();

	for (unsigned i = 0; i < MANY; i++)
		ck_assert_int_eq(bf_layer_alloc(&l[i], false, 3, 8), 0);
	size_t took = heap_in_use() - h0;
	bool measured = took != 0; /* under valgrind mallinfo2 says 0: its leak check tells */
	if (measured) {
		ck_assert_uint_ge(took / MANY, 192);
		ck_assert_uint_lt(took / MANY, 200);
	}
	for (unsigned i = 0; i < MANY; i += 2)
		bf_layer_free(&l[i]);
	for (unsigned i = MANY - 1; i < MANY; i -= 2)
		bf_layer_free(&l[i]);
	if (measured)
		ck_assert_uint_lt(heap_in_use() - h0, took / 10);
	free(l);
}
END_TEST

/* Layers are made and freed on the loop and on the threadpool at once: two threads sharing the
 * pools neither lose nor share a piece. */
static void *churn(void *arg)
{
	uintptr_t tag = (uintptr_t)arg;
	struct bf_layer l[256];

	for (unsigned round = 0; round < 40; round++) {
		for (unsigned i = 0; i < 256; i++) {
			if (bf_layer_alloc(&l[i], false, 1 + i % 4, 8))
				return (void *)1;
			for (size_t w = 0; w < (size_t)l[i].nblocks * BF_BLOCK_WORDS; w++)
				l[i].blocks[w] = tag;
		}
		for (unsigned i = 0; i < 256; i++) {
			for (size_t w = 0; w < (size_t)l[i].nblocks * BF_BLOCK_WORDS; w++)
				if (l[i].blocks[w] != tag)
					return (void *)2;
			bf_layer_free(&l[i]);
		}
	}
	return NULL;
}

START_TEST(pools_are_shared_by_threads)
{
	pthread_t t[2];
	void *rc;

	for (uintptr_t i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(t[i], &rc), 0);
		ck_assert_ptr_null(rc);
	}
}
END_TEST

START_TEST(init_errors_leave_layer_untouched)
{
	struct bf_layer l, before;
	memset(&l, 0xab, sizeof(l));
	before = l;
	ck_assert_int_eq(bf_layer_init(&l, false, 0, 0.01), -EINVAL);
	ck_assert_int_eq(bf_layer_init(&l, false, 10, 1.5), -EINVAL);
	ck_assert_int_eq(bf_layer_init(&l, false, UINT64_MAX, 0.01), -E2BIG);
	ck_assert_mem_eq(&l, &before, sizeof(l));
}
END_TEST

START_TEST(counting_add_delete)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, true, 1000, 0.01), 0);
	struct bf_hash h = hash_u64(7);
	ck_assert(!bf_layer_delete(&l, h)); /* absent: refused */
	ck_assert_uint_eq(bf_layer_popcount(&l), 0);
	ck_assert(bf_layer_add(&l, h));
	ck_assert(!bf_layer_add(&l, h)); /* present: reported so, but counted again */
	ck_assert(bf_layer_check(&l, h));
	ck_assert(bf_layer_delete(&l, h));
	ck_assert(bf_layer_check(&l, h)); /* added twice: one delete leaves it */
	ck_assert(bf_layer_delete(&l, h));
	ck_assert(!bf_layer_check(&l, h));
	ck_assert(!bf_layer_delete(&l, h));
	ck_assert_uint_eq(bf_layer_popcount(&l), 0);
	bf_layer_free(&l);
}
END_TEST

START_TEST(counting_saturates_and_never_decrements_15)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, true, 1, 0.5), 0);
	ck_assert_uint_eq(l.nblocks, 1);
	ck_assert_uint_eq(l.b, 1);
	struct bf_hash h = hash_u64(9);

	/* Learn the key's counter in each word from a fresh add. */
	ck_assert(bf_layer_add(&l, h));
	uint64_t mine[8];
	memcpy(mine, l.blocks, sizeof(mine));
	for (unsigned w = 0; w < 8; w++)
		ck_assert_uint_eq(__builtin_popcountll(mine[w]), 1); /* one counter at 1 */

	/* Every counter at 15 except the key's counter in word 0, at 0. */
	for (unsigned w = 0; w < 8; w++)
		l.blocks[w] = UINT64_MAX;
	l.blocks[0] &= ~(mine[0] * 15);
	ck_assert(!bf_layer_check(&l, h));
	ck_assert(bf_layer_add(&l, h));
	ck_assert_uint_eq(l.blocks[0], UINT64_MAX - mine[0] * 14); /* 0 -> 1, the rest stay 15 */
	for (unsigned w = 1; w < 8; w++)
		ck_assert_uint_eq(l.blocks[w], UINT64_MAX); /* saturated: not wrapped */

	/* Delete: 1 -> 0, saturated counters are never decremented. */
	ck_assert(bf_layer_delete(&l, h));
	ck_assert_uint_eq(l.blocks[0], UINT64_MAX & ~(mine[0] * 15));
	for (unsigned w = 1; w < 8; w++)
		ck_assert_uint_eq(l.blocks[w], UINT64_MAX);
	ck_assert(!bf_layer_check(&l, h));
	ck_assert(!bf_layer_delete(&l, h)); /* now absent: refused, nothing changes */
	ck_assert_uint_eq(l.blocks[0], UINT64_MAX & ~(mine[0] * 15));
	bf_layer_free(&l);
}
END_TEST

START_TEST(counting_delete_one_of_two_sharing_counters)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, true, 1, 0.5), 0);
	struct bf_hash a = hash_u64(1), b = hash_u64(2);
	ck_assert(bf_layer_add(&l, a));
	ck_assert(bf_layer_add(&l, b));
	ck_assert(bf_layer_delete(&l, a));
	ck_assert(bf_layer_check(&l, b)); /* b's counters survive a's delete */
	ck_assert(bf_layer_delete(&l, b));
	ck_assert_uint_eq(bf_layer_popcount(&l), 0);
	bf_layer_free(&l);
}
END_TEST

START_TEST(plain_layer_refuses_delete)
{
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, false, 10, 0.01), 0);
	ck_assert(bf_layer_add(&l, hash_u64(3)));
	ck_assert(!bf_layer_delete(&l, hash_u64(3)));
	ck_assert(bf_layer_check(&l, hash_u64(3)));
	bf_layer_free(&l);
}
END_TEST

/* The sizing cache answers exactly as the model does, errors included, whatever was asked
 * in between (entries evicted and refilled). */
START_TEST(plan_cache_matches_the_model)
{
	uint64_t nb[2][300];
	unsigned b[2][300];
	int rc[2][300];

	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 300; i++) {
			bool counting = i % 3 == 0;
			uint64_t cap = i % 7 == 0 ? 0 : 1 + (uint64_t)i * 37;
			double err = i % 2 ? 0.01 : 0.001 / (1 + i % 5);
			nb[pass][i] = 0;
			b[pass][i] = 0;
			rc[pass][i] = bf_layer_plan(counting, cap, err, &nb[pass][i], &b[pass][i]);
		}
	for (int i = 0; i < 300; i++) {
		ck_assert_int_eq(rc[0][i], rc[1][i]);
		ck_assert_int_eq(rc[0][i], i % 7 == 0 ? -EINVAL : 0);
		ck_assert_uint_eq(nb[0][i], nb[1][i]);
		ck_assert_uint_eq(b[0][i], b[1][i]);
	}
	/* And as bf_layer_init sizes a layer. */
	struct bf_layer l;
	ck_assert_int_eq(bf_layer_init(&l, false, 1 + 5 * 37, 0.01), 0);
	ck_assert_uint_eq(l.nblocks, nb[0][5]);
	ck_assert_uint_eq(l.b, b[0][5]);
	bf_layer_free(&l);
}
END_TEST

static Suite *layer_suite(void)
{
	Suite *s = suite_create("layer");
	TCase *tc = tcase_create("layer");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, scalar_and_avx2_set_identical_bits);
	tcase_add_test(tc, hash_is_xxh3_128_with_seed);
	tcase_add_test(tc, add_reports_change_and_sets_k_bits);
	tcase_add_test(tc, large_layer_is_mapped_and_zero);
	tcase_add_test(tc, small_layers_are_aligned_and_zero);
	tcase_add_test(tc, pooled_layers_cost_their_bits_and_are_given_back);
	tcase_add_test(tc, pools_are_shared_by_threads);
	tcase_add_test(tc, init_errors_leave_layer_untouched);
	tcase_add_test(tc, counting_add_delete);
	tcase_add_test(tc, counting_saturates_and_never_decrements_15);
	tcase_add_test(tc, counting_delete_one_of_two_sharing_counters);
	tcase_add_test(tc, plain_layer_refuses_delete);
	tcase_add_test(tc, plan_cache_matches_the_model);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(layer_suite)
