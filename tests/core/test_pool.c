/* SPDX-License-Identifier: MIT */
/*
 * Pools of same-size pieces (core/bf_pool.h): pieces of three pools interleaved, each with its
 * own bytes, given back in random order and taken again; none overlaps another (each keeps its
 * pattern) and each is aligned and zeroed when given; once all are back, so is every slab and the
 * list of them.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_pool.h"
#include "tests/check_main.h"

#define N 30000

static struct bf_pool pools[3] = {
    {.size = 192, .align = 64},
    {.size = 144, .align = 8},
    {.size = 344, .align = 8},
};

static struct {
	unsigned char *p;
	struct bf_pool *pool;
	unsigned char mark;
} held[N];

static void take(size_t i, unsigned *seed)
{
	struct bf_pool *pool = &pools[rand_r(seed) % 3];
	unsigned char *p = bf_pool_get(pool);

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % pool->align, 0);
	static const unsigned char zero[512];
	ck_assert(memcmp(p, zero, pool->size) == 0);
	held[i].p = p;
	held[i].pool = pool;
	held[i].mark = (unsigned char)(1 + rand_r(seed) % 255);
	memset(p, held[i].mark, pool->size);
}

static void check_held(void)
{
	for (size_t i = 0; i < N; i++) {
		if (!held[i].p)
			continue;
		unsigned char want[512];

		memset(want, held[i].mark, held[i].pool->size);
		if (memcmp(held[i].p, want, held[i].pool->size))
			ck_abort_msg("piece %zu (of %u bytes) overwritten", i, held[i].pool->size);
	}
}

START_TEST(pieces)
{
	unsigned seed = 11;
	ck_assert_uint_eq(bf_pool_slabs(), 0);

	for (size_t i = 0; i < N; i++)
		take(i, &seed);
	check_held();
	/* 30,000 pieces of 144 to 344 bytes: about 230 slabs of 32 KiB. */
	ck_assert_uint_gt(bf_pool_slabs(), 200);
	ck_assert_uint_lt(bf_pool_slabs(), 260);
	/* Back in random order, half of them, then taken again (from the pieces given back). */
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < N; i++)
			if (rand_r(&seed) % 2) {
				bf_pool_put(held[i].p);
				held[i].p = NULL;
			}
		check_held();
		for (size_t i = 0; i < N; i++)
			if (!held[i].p)
				take(i, &seed);
		check_held();
	}
	bf_pool_put(NULL);
	for (size_t i = 0; i < N; i++)
		bf_pool_put(held[i].p);
	ck_assert_uint_eq(bf_pool_slabs(), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_ptr_null(pools[i].room);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, pieces);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(pool_suite)
