/* SPDX-License-Identifier: MIT */
/* The sizing model against textbook Bloom numbers and known blocked-filter values. */
#include <check.h>
#include <errno.h>
#include <math.h>

#include "core/bf_layer.h"
#include "core/bf_model.h"
#include "tests/check_main.h"

START_TEST(textbook_bits_per_key)
{
	/* -ln p / ln^2 2 */
	ck_assert_double_eq_tol(bf_model_standard_bits_per_key(1e-2), 9.585, 1e-3);
	ck_assert_double_eq_tol(bf_model_standard_bits_per_key(1e-3), 14.378, 1e-3);
	ck_assert_double_eq_tol(bf_model_standard_bits_per_key(1e-4), 19.170, 1e-3);
	/* (1 - e^(-k/bpk))^k at the optimum: 9.585 bits, k = 7 gives about 1 %. */
	ck_assert_double_eq_tol(bf_model_standard_fpr(9.585, 7), 0.01004, 1e-5);
	ck_assert_double_eq_tol(bf_model_standard_fpr(10, 7), 0.00819, 1e-5);
}
END_TEST

/* Bits per key a geometry needs for rate p (continuous, by bisection on keys per block). */
static double bits_per_key(struct bf_geometry g, unsigned b, double p)
{
	double block_bits = g.words * g.slots * (g.slots == 16 ? 4 : 1);
	double lo = 0.1, hi = 400;
	for (int i = 0; i < 80; i++) {
		double mid = (lo + hi) / 2;
		if (bf_model_fpr(g, b, block_bits / mid) <= p)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

START_TEST(split_block_known_values)
{
	/* 256-bit split block, k = 8: 10.53 bits/key gives ~1 % (DESIGN.md §3). */
	ck_assert_double_eq_tol(bf_model_fpr(BF_GEOMETRY_SPLIT256, 1, 256 / 10.53), 0.01, 1e-4);
	ck_assert_double_eq_tol(bits_per_key(BF_GEOMETRY_SPLIT256, 1, 1e-2), 10.53, 0.01);
	ck_assert_double_eq_tol(bits_per_key(BF_GEOMETRY_SPLIT256, 1, 1e-3), 16.89, 0.01);
	ck_assert_double_eq_tol(bits_per_key(BF_GEOMETRY_SPLIT256, 1, 1e-4), 26.34, 0.01);
	/* The textbook formula undersizes a blocked filter: at 9.585 bits/key it gives ~1.46 %. */
	ck_assert_double_gt(bf_model_fpr(BF_GEOMETRY_SPLIT256, 1, 256 / 9.585), 0.014);
}
END_TEST

START_TEST(sectorized_known_values)
{
	ck_assert_double_eq_tol(bits_per_key(BF_GEOMETRY_SECTOR512, 1, 1e-2), 10.10, 0.01);
	ck_assert_double_eq_tol(bits_per_key(BF_GEOMETRY_SECTOR512, 1, 1e-3), 15.72, 0.01);
	/* With b = 2 bits per word the model counts coinciding positions, so it needs a hair
	 * more than the 22.80 of a model that assumes them distinct. */
	ck_assert_double_le(bits_per_key(BF_GEOMETRY_SECTOR512, 2, 1e-4), 22.90);
	ck_assert_double_ge(bits_per_key(BF_GEOMETRY_SECTOR512, 2, 1e-4), 22.80);
}
END_TEST

START_TEST(fpr_is_monotone_in_load)
{
	double prev = 0;
	for (double lam = 1; lam < 200; lam += 1) {
		double f = bf_model_fpr(BF_GEOMETRY_SECTOR512, 1, lam);
		ck_assert_double_ge(f, prev);
		ck_assert_double_le(f, 1);
		prev = f;
	}
	ck_assert_double_eq(bf_model_fpr(BF_GEOMETRY_SECTOR512, 1, 0), 0);
}
END_TEST

START_TEST(size_is_smallest_that_meets_target)
{
	static const double targets[] = {0.1, 0.01, 0.001, 1e-4, 1e-6};
	for (unsigned t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
		uint64_t n;
		unsigned b;
		double p = targets[t];
		ck_assert_int_eq(
		    bf_model_size(BF_GEOMETRY_SECTOR512, 1000000, p, UINT64_MAX, &n, &b), 0);
		ck_assert_double_le(bf_model_fpr(BF_GEOMETRY_SECTOR512, b, 1e6 / n), p);
		ck_assert_double_gt(bf_model_fpr(BF_GEOMETRY_SECTOR512, b, 1e6 / (n - 1)), p);
		/* No other b does better. */
		for (unsigned k = 1; k <= BF_MODEL_MAX_B; k++)
			ck_assert_double_gt(bf_model_fpr(BF_GEOMETRY_SECTOR512, k, 1e6 / (n - 1)),
					    p);
	}
}
END_TEST

/* Both layouts, small to large capacities, loose to tight targets: the answer is the
 * smallest block count, whatever the textbook first guess was; max_blocks is exact. */
START_TEST(size_is_smallest_over_a_grid)
{
	const struct bf_geometry gs[] = {BF_GEOMETRY_SECTOR512, BF_GEOMETRY_COUNT512};
	static const double targets[] = {0.5, 0.1, 0.0125, 1e-3, 3e-5, 1e-7};
	static const uint64_t caps[] = {1, 7, 100, 1000, 4096, 123457, 10000000, 3000000000};
	for (unsigned g = 0; g < 2; g++)
		for (unsigned t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
			for (unsigned c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
				uint64_t n, n2, cap = caps[c];
				unsigned b, b2;
				double p = targets[t];
				ck_assert_int_eq(bf_model_size(gs[g], cap, p, UINT64_MAX, &n, &b),
						 0);
				ck_assert_double_le(bf_model_fpr(gs[g], b, (double)cap / n), p);
				for (unsigned k = 1; n > 1 && k <= BF_MODEL_MAX_B; k++)
					ck_assert_double_gt(
					    bf_model_fpr(gs[g], k, (double)cap / (n - 1)), p);
				ck_assert_int_eq(bf_model_size(gs[g], cap, p, n, &n2, &b2), 0);
				ck_assert_uint_eq(n2, n);
				ck_assert_uint_eq(b2, b);
				if (n > 1)
					ck_assert_int_eq(
					    bf_model_size(gs[g], cap, p, n - 1, &n2, &b2), -E2BIG);
			}
}
END_TEST

START_TEST(size_at_one_percent)
{
	uint64_t n;
	unsigned b;
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 10000000, 0.01, UINT64_MAX, &n, &b),
			 0);
	ck_assert_uint_eq(b, 1);
	double bpk = n * 512.0 / 1e7;
	ck_assert_double_le(bpk, 10.11);
	ck_assert_double_ge(bpk, 10.09);
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 1e6, 1e-6, UINT64_MAX, &n, &b), 0);
	ck_assert_uint_eq(b, 2);
}
END_TEST

START_TEST(size_errors)
{
	uint64_t n = 7;
	unsigned b = 7;
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 0, 0.01, UINT64_MAX, &n, &b),
			 -EINVAL);
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 10, 0, UINT64_MAX, &n, &b), -EINVAL);
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 10, 1, UINT64_MAX, &n, &b), -EINVAL);
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 10, NAN, UINT64_MAX, &n, &b),
			 -EINVAL);
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 1000000, 0.01, 1000, &n, &b), -E2BIG);
	ck_assert_uint_eq(n, 7);
	ck_assert_uint_eq(b, 7);
	/* Capacity 1 fits one block. */
	ck_assert_int_eq(bf_model_size(BF_GEOMETRY_SECTOR512, 1, 0.01, UINT64_MAX, &n, &b), 0);
	ck_assert_uint_eq(n, 1);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("model");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, textbook_bits_per_key);
	tcase_add_test(tc, split_block_known_values);
	tcase_add_test(tc, sectorized_known_values);
	tcase_add_test(tc, fpr_is_monotone_in_load);
	tcase_add_test(tc, size_is_smallest_that_meets_target);
	tcase_add_test(tc, size_is_smallest_over_a_grid);
	tcase_add_test(tc, size_at_one_percent);
	tcase_add_test(tc, size_errors);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(model_suite)
