/* SPDX-License-Identifier: MIT */
/* The name-ordered index: order, seek, duplicates, removal and merging, against a sorted
 * reference under random inserts and removals. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_index.h"
#include "tests/check_main.h"

#define N 20000

static struct bf_filter fs[N];
static char names[N][16];

/* f named name (kept by the caller), as a filter renamed to a name longer than its room: the
 * index reads names through bf_filter_name() only. */
static void name_it(struct bf_filter *f, char *name)
{
	static struct bf_filter_rare rares[2 * N + 5];
	static size_t used;

	if (!f->rare) {
		ck_assert_uint_lt(used, sizeof(rares) / sizeof(rares[0]));
		f->rare = &rares[used++];
	}
	f->rare->name = name;
	f->name_room = 0;
	f->name_len = (uint8_t)strlen(name);
}

/* fs[i] named "n<perm(i)>" with a length that varies, so prefixes of other names occur. */
static void make(void)
{
	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "n%zu", (i * 7919) % N);
		name_it(&fs[i], names[i]);
	}
}

static int by_name(const void *a, const void *b)
{
	const struct bf_filter *x = *(struct bf_filter *const *)a,
			       *y = *(struct bf_filter *const *)b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(bf_filter_name(x), bf_filter_name(y), n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* The index walks exactly ref[0, n), sorted. */
static void same_as(const struct bf_index *ix, struct bf_filter **ref, size_t n)
{
	struct bf_index_pos p = {0, 0};
	struct bf_filter *f;
	size_t k = 0;

	qsort(ref, n, sizeof(*ref), by_name);
	ck_assert_uint_eq(ix->count, n);
	while ((f = bf_index_next(ix, &p))) {
		ck_assert_uint_lt(k, n);
		ck_assert_ptr_eq(f, ref[k]);
		k++;
	}
	ck_assert_uint_eq(k, n);
}

static void shuffle(size_t *a, size_t n, unsigned *seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(seed) % (i + 1), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

START_TEST(random_inserts_and_removals)
{
	static size_t order[N];
	static struct bf_filter *ref[N];
	struct bf_index ix = {0};
	unsigned seed = 13;
	size_t n = 0;

	make();
	for (size_t i = 0; i < N; i++)
		order[i] = i;
	shuffle(order, N, &seed);
	for (size_t i = 0; i < N; i++) {
		ck_assert_int_eq(bf_index_insert(&ix, &fs[order[i]]), 0);
		ref[n++] = &fs[order[i]];
	}
	same_as(&ix, ref, n);
	/* Random order: leaves about 70 % full (between half and full). */
	ck_assert_uint_le(ix.nleaves, N / (BF_INDEX_LEAF / 2) + 1);
	ck_assert_uint_ge(ix.nleaves, N / BF_INDEX_LEAF);
	/* Every name once: a second insert of any is refused and changes nothing. */
	struct bf_filter dup = fs[5];
	ck_assert_int_eq(bf_index_insert(&ix, &dup), -EEXIST);
	ck_assert_int_eq(bf_index_remove(&ix, &dup), -ENOENT); /* same name, another filter */
	ck_assert_uint_eq(ix.count, N);
	/* Remove three quarters in random order; the rest stay in order and leaves merge. */
	shuffle(order, N, &seed);
	for (size_t i = 0; i < N * 3 / 4; i++)
		ck_assert_int_eq(bf_index_remove(&ix, &fs[order[i]]), 0);
	ck_assert_int_eq(bf_index_remove(&ix, &fs[order[0]]), -ENOENT);
	n = 0;
	for (size_t i = N * 3 / 4; i < N; i++)
		ref[n++] = &fs[order[i]];
	same_as(&ix, ref, n);
	ck_assert_uint_le(ix.nleaves, n / (BF_INDEX_LEAF / 4) + 2);
	/* And back in. */
	for (size_t i = 0; i < N * 3 / 4; i++)
		ck_assert_int_eq(bf_index_insert(&ix, &fs[order[i]]), 0);
	for (size_t i = 0; i < N; i++)
		ref[i] = &fs[i];
	same_as(&ix, ref, N);
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(bf_index_remove(&ix, &fs[i]), 0);
	ck_assert_uint_eq(ix.count, 0);
	ck_assert_uint_eq(ix.nleaves, 0);
	bf_index_clear(&ix);
}
END_TEST

START_TEST(in_order_fills_leaves)
{
	static struct bf_filter *ref[N];
	struct bf_index ix = {0};

	make();
	for (size_t i = 0; i < N; i++)
		ref[i] = &fs[i];
	qsort(ref, N, sizeof(*ref), by_name);
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(bf_index_insert(&ix, ref[i]), 0);
	ck_assert_uint_eq(ix.nleaves, (N + BF_INDEX_LEAF - 1) / BF_INDEX_LEAF);
	bf_index_clear(&ix);
	/* Descending too. */
	for (size_t i = N; i-- > 0;)
		ck_assert_int_eq(bf_index_insert(&ix, ref[i]), 0);
	ck_assert_uint_eq(ix.nleaves, (N + BF_INDEX_LEAF - 1) / BF_INDEX_LEAF);
	same_as(&ix, ref, N);
	bf_index_clear(&ix);
}
END_TEST

START_TEST(seek)
{
	struct bf_index ix = {0};
	struct bf_index_pos p = bf_index_seek(&ix, "a", 1, true);
	static struct bf_filter f[5];
	static const char *const nm[5] = {"b", "ba", "bb", "c", "d\xc3\xa9"};

	ck_assert_ptr_null(bf_index_next(&ix, &p)); /* empty */
	for (int i = 4; i >= 0; i--) {
		name_it(&f[i], (char *)nm[i]);
		ck_assert_int_eq(bf_index_insert(&ix, &f[i]), 0);
	}
	p = bf_index_seek(&ix, "a", 1, false);
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[0]);
	p = bf_index_seek(&ix, "b", 1, true);
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[0]);
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[1]);
	p = bf_index_seek(&ix, "b", 1, false); /* strictly after "b": its extensions first */
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[1]);
	p = bf_index_seek(&ix, "bab", 3, true);
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[2]);
	p = bf_index_seek(&ix, "d", 1, false); /* bytes >= 0x80 sort last */
	ck_assert_ptr_eq(bf_index_next(&ix, &p), &f[4]);
	ck_assert_ptr_null(bf_index_next(&ix, &p));
	p = bf_index_seek(&ix, "e", 1, true);
	ck_assert_ptr_null(bf_index_next(&ix, &p));
	bf_index_clear(&ix);
}
END_TEST

/*
 * Deferred inserts (a start's load): inserts and removals batched, then sorted at once. Names
 * that share their first 8 bytes (the sort's key) and names that are prefixes of others; a
 * removed filter's memory inserted again under another name, removed, inserted again (as a
 * freed filter's memory is reused by the next one loaded); a name batched twice.
 */
START_TEST(deferred)
{
	static struct bf_filter f[N], *ref[N];
	static char nm[N][32];
	static size_t order[N];
	struct bf_index ix = {0};
	unsigned seed = 7;
	size_t n = 0;

	for (size_t i = 0; i < N; i++) {
		snprintf(nm[i], sizeof(nm[i]), i % 3 ? "n%zu" : "abcdefgh%zu", (i * 7919) % N);
		if (i == 3)
			snprintf(nm[i], sizeof(nm[i]), "abcdefgh"); /* a prefix of the others */
		name_it(&f[i], nm[i]);
		order[i] = i;
	}
	shuffle(order, N, &seed);
	/* A few in the leaves before the batch begins. */
	for (size_t i = 0; i < 100; i++)
		ck_assert_int_eq(bf_index_insert(&ix, &f[order[i]]), 0);
	bf_index_defer(&ix);
	for (size_t i = 100; i < N; i++)
		ck_assert_int_eq(bf_index_insert(&ix, &f[order[i]]), 0);
	ck_assert_uint_eq(ix.count, N);
	/* Out: 50 of the leaves' and 2000 batched; 500 of the batched back under a new name,
	 * of which 100 out again and back under a third. */
	for (size_t i = 0; i < 50; i++)
		ck_assert_int_eq(bf_index_remove(&ix, &f[order[i]]), 0);
	for (size_t i = 100; i < 2100; i++)
		ck_assert_int_eq(bf_index_remove(&ix, &f[order[i]]), 0);
	for (size_t i = 100; i < 600; i++) {
		struct bf_filter *g = &f[order[i]];

		snprintf(nm[order[i]], sizeof(nm[0]), "zzzzzzzz-again-%zu", i);
		name_it(g, nm[order[i]]);
		ck_assert_int_eq(bf_index_insert(&ix, g), 0);
	}
	for (size_t i = 100; i < 200; i++) {
		struct bf_filter *g = &f[order[i]];

		ck_assert_int_eq(bf_index_remove(&ix, g), 0);
		snprintf(nm[order[i]], sizeof(nm[0]), "m-third-%zu", i);
		name_it(g, nm[order[i]]);
		ck_assert_int_eq(bf_index_insert(&ix, g), 0);
	}
	ck_assert_int_eq(bf_index_flush(&ix), 0);
	ck_assert(!ix.deferring);
	for (size_t i = 50; i < 100; i++)
		ref[n++] = &f[order[i]];
	for (size_t i = 100; i < 600; i++)
		ref[n++] = &f[order[i]];
	for (size_t i = 2100; i < N; i++)
		ref[n++] = &f[order[i]];
	same_as(&ix, ref, n);
	bf_index_clear(&ix);

	/* Into an empty index: whole leaves. A name batched twice is indexed once. */
	static struct bf_filter twin;
	bf_index_defer(&ix);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(bf_index_insert(&ix, ref[i]), 0);
	twin = *ref[n / 2];
	ck_assert_int_eq(bf_index_insert(&ix, &twin), 0);
	ck_assert_int_eq(bf_index_flush(&ix), -EEXIST);
	ck_assert_uint_eq(ix.nleaves, (n + BF_INDEX_LEAF - 1) / BF_INDEX_LEAF);
	struct bf_index_pos p = bf_index_seek(&ix, bf_filter_name(&twin), twin.name_len, true);
	struct bf_filter *g = bf_index_next(&ix, &p);
	ck_assert(g == &twin || g == ref[n / 2]);
	if (g == &twin) /* either may stay */
		ref[n / 2] = &twin;
	same_as(&ix, ref, n);
	/* One by one again after the flush. */
	ck_assert_int_eq(bf_index_insert(&ix, g == &twin ? ref[0] : &twin), -EEXIST);
	bf_index_clear(&ix);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("index");

	tcase_add_test(tc, random_inserts_and_removals);
	tcase_add_test(tc, in_order_fills_leaves);
	tcase_add_test(tc, seek);
	tcase_add_test(tc, deferred);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(suite)
