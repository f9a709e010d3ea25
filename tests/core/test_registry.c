/* SPDX-License-Identifier: MIT */
/* The registry: validation, create/get/drop, prefix listing, the memory limit. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/bf_registry.h"
#include "tests/check_main.h"

static const struct bf_params small = {.capacity = 1000, .error_rate = 0.01, .expansion = 2};

#define S(x) x, sizeof(x) - 1

START_TEST(name_rules)
{
	char longest[BF_NAME_MAX + 1];
	memset(longest, 'a', sizeof(longest));
	ck_assert(bf_name_valid(longest, BF_NAME_MAX));
	ck_assert(!bf_name_valid(longest, BF_NAME_MAX + 1));
	ck_assert(!bf_name_valid("", 0));
	ck_assert(bf_name_valid(S("a")));
	ck_assert(bf_name_valid(S("../x")));	    /* just a name: never a path */
	ck_assert(bf_name_valid(S("caf\xc3\xa9"))); /* UTF-8 */
	ck_assert(!bf_name_valid(S("a b")));
	ck_assert(!bf_name_valid(S("a\tb")));
	ck_assert(!bf_name_valid(S("a\nb")));
	ck_assert(!bf_name_valid("a\0b", 3));
	ck_assert(!bf_name_valid(S("a\x7f")));
}
END_TEST

START_TEST(create_get_drop)
{
	struct bf_registry *r;
	struct bf_filter *f = NULL, *g = NULL;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_ptr_null(bf_registry_get(r, S("x")));
	ck_assert_int_eq(bf_registry_create(r, S("x"), &small, 1, &f), 0);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(f->name, "x");
	ck_assert_ptr_eq(bf_registry_get(r, S("x")), f);
	ck_assert_int_eq(bf_registry_create(r, S("x"), &small, 2, &g), -EEXIST);
	ck_assert_ptr_eq(g, f);
	ck_assert_uint_eq(bf_registry_count(r), 1);
	/* Everything a filter costs is counted: its structure, its bits with the allocator's
	 * overhead, its entry (issue 17 item 10: only the bits were). */
	ck_assert_uint_ge(bf_filter_cost(f), sizeof(*f) + f->bytes);
	ck_assert_uint_gt(bf_registry_memory(r), bf_filter_cost(f));
	ck_assert_uint_le(bf_registry_memory(r), bf_filter_cost(f) + 128);
	uint64_t one = bf_registry_memory(r);
	bf_registry_set_entry_overhead(r, 1000);
	ck_assert_uint_eq(bf_registry_memory(r), one + 1000);
	ck_assert_int_eq(bf_registry_create(r, S("y"), &small, 1, NULL), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 2 * (one + 1000));
	ck_assert_int_eq(bf_registry_drop(r, S("y")), 0);
	ck_assert_uint_eq(bf_registry_memory(r), one + 1000);
	ck_assert_int_eq(bf_registry_drop(r, S("x")), 0);
	ck_assert_int_eq(bf_registry_drop(r, S("x")), -ENOENT);
	ck_assert_ptr_null(bf_registry_get(r, S("x")));
	ck_assert_uint_eq(bf_registry_count(r), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 0);
	bf_registry_free(r);
}
END_TEST

START_TEST(create_validation_changes_nothing)
{
	struct bf_registry *r;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	struct bf_params p = small;
	ck_assert_int_eq(bf_registry_create(r, S(""), &p, 1, NULL), -EINVAL);
	ck_assert_int_eq(bf_registry_create(r, S("a b"), &p, 1, NULL), -EINVAL);
	p.capacity = 0;
	ck_assert_int_eq(bf_registry_create(r, S("a"), &p, 1, NULL), -EINVAL);
	p = small;
	p.error_rate = 0;
	ck_assert_int_eq(bf_registry_create(r, S("a"), &p, 1, NULL), -EINVAL);
	p.error_rate = 1;
	ck_assert_int_eq(bf_registry_create(r, S("a"), &p, 1, NULL), -EINVAL);
	p = small;
	p.type = 5;
	ck_assert_int_eq(bf_registry_create(r, S("a"), &p, 1, NULL), -EINVAL);
	ck_assert_uint_eq(bf_registry_count(r), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 0);
	bf_registry_free(r);
}
END_TEST

START_TEST(many_names_and_prefix_list)
{
	struct bf_registry *r;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	char name[32];
	for (int i = 0; i < 500; i++) {
		int n = snprintf(name, sizeof(name), "%s:%03d", (i % 2) ? "odd" : "even", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, (uint64_t)i, NULL),
				 0);
	}
	ck_assert_uint_eq(bf_registry_count(r), 500);
	struct bf_filter **list;
	size_t n;
	ck_assert_int_eq(bf_registry_list(r, S("odd:"), &list, &n), 0);
	ck_assert_uint_eq(n, 250);
	ck_assert_str_eq(list[0]->name, "odd:001");
	ck_assert_str_eq(list[249]->name, "odd:499");
	for (size_t i = 1; i < n; i++)
		ck_assert_int_lt(strcmp(list[i - 1]->name, list[i]->name), 0);
	free(list);
	ck_assert_int_eq(bf_registry_list(r, "", 0, &list, &n), 0);
	ck_assert_uint_eq(n, 500);
	ck_assert_str_eq(list[0]->name, "even:000");
	free(list);
	ck_assert_int_eq(bf_registry_list(r, S("none"), &list, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(list);
	/* A name that is a prefix of another sorts first. */
	ck_assert_int_eq(bf_registry_create(r, S("odd:00"), &small, 1, NULL), 0);
	ck_assert_int_eq(bf_registry_list(r, S("odd:00"), &list, &n), 0);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(list[0]->name, "odd:00");
	free(list);
	for (int i = 0; i < 500; i += 3) {
		int k = snprintf(name, sizeof(name), "%s:%03d", (i % 2) ? "odd" : "even", i);
		ck_assert_int_eq(bf_registry_drop(r, name, (size_t)k), 0);
		ck_assert_ptr_null(bf_registry_get(r, name, (size_t)k));
	}
	ck_assert_uint_eq(bf_registry_count(r), 501 - 167);
	bf_registry_free(r);
}
END_TEST

START_TEST(memory_limit_refuses_and_changes_nothing)
{
	struct bf_registry *r;
	struct bf_filter *f;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 1, &f), 0);
	uint64_t one = bf_registry_memory(r);
	bf_registry_set_max_memory(r, 2 * one); /* exactly two filters fit */
	ck_assert_uint_eq(bf_registry_max_memory(r), 2 * one);
	ck_assert_int_eq(bf_registry_create(r, S("b"), &small, 1, NULL), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 2 * one);
	ck_assert_int_eq(bf_registry_create(r, S("c"), &small, 1, NULL), -ENOMEM);
	ck_assert_ptr_null(bf_registry_get(r, S("c")));
	ck_assert_uint_eq(bf_registry_count(r), 2);
	ck_assert_uint_eq(bf_registry_memory(r), 2 * one);
	/* Growth is refused too. */
	uint64_t i = 0;
	char k[32];
	while (f->items < small.capacity) {
		int n = snprintf(k, sizeof(k), "%llu", (unsigned long long)i++);
		ck_assert_int_ge(bf_filter_add(f, k, (size_t)n), 0);
	}
	ck_assert_int_eq(bf_filter_add(f, "one more", 8), -ENOMEM);
	ck_assert_uint_eq(f->nlayers, 1);
	/* Dropping frees room. */
	ck_assert_int_eq(bf_registry_drop(r, S("b")), 0);
	ck_assert_int_eq(bf_registry_create(r, S("c"), &small, 1, NULL), 0);
	bf_registry_free(r);
}
END_TEST

START_TEST(adopt)
{
	struct bf_registry *r;
	struct bf_filter *f, *g;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &f), 0);
	ck_assert_int_eq(bf_registry_adopt(r, S("bad name"), f), -EINVAL);
	ck_assert_int_eq(bf_registry_adopt(r, S("loaded"), f), 0);
	ck_assert_ptr_eq(bf_registry_get(r, S("loaded")), f);
	ck_assert_uint_gt(bf_registry_memory(r), bf_filter_cost(f));
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &g), 0);
	ck_assert_int_eq(bf_registry_adopt(r, S("loaded"), g), -EEXIST);
	bf_registry_set_max_memory(r, bf_registry_memory(r) + bf_filter_cost(g));
	ck_assert_int_eq(bf_registry_adopt(r, S("other"), g), -ENOMEM);
	ck_assert_uint_eq(bf_registry_count(r), 1);
	bf_filter_free(g);
	bf_registry_free(r);
}
END_TEST

/* What a scan saw: how many times each "base:N" name, and anything else. */
static unsigned seen[2000];
static unsigned seen_other;

static void count_seen(void *arg, struct bf_filter *f)
{
	(void)arg;
	unsigned i;
	if (sscanf(f->name, "base:%u", &i) == 1 && i < 2000)
		seen[i]++;
	else
		seen_other++;
}

/* SCAN's cursor: every filter present throughout is visited exactly once, while others are
 * created (the table doubles several times) and dropped between calls; a call does about
 * COUNT filters' work. */
START_TEST(scan_visits_each_once_while_changing)
{
	struct bf_registry *r;
	char name[32];
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
	}
	memset(seen, 0, sizeof(seen));
	seen_other = 0;
	uint64_t cursor = 0;
	unsigned calls = 0, extra = 0;
	do {
		unsigned before = 0;
		for (int i = 0; i < 2000; i++)
			before += seen[i];
		before += seen_other;
		cursor = bf_registry_scan(r, cursor, 10, count_seen, NULL);
		unsigned after = seen_other;
		for (int i = 0; i < 2000; i++)
			after += seen[i];
		/* A call's work is bounded (a bucket's chain may pass COUNT a little). */
		ck_assert_uint_le(after - before, 40);
		calls++;
		/* Meanwhile: 30 new filters, and 10 of the newest dropped. */
		for (int k = 0; k < 30; k++, extra++) {
			int n = snprintf(name, sizeof(name), "new:%u", extra);
			ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL),
					 0);
		}
		for (unsigned k = extra - 10; k < extra; k++) {
			int n = snprintf(name, sizeof(name), "new:%u", k);
			ck_assert_int_eq(bf_registry_drop(r, name, (size_t)n), 0);
		}
	} while (cursor != 0);
	for (int i = 0; i < 2000; i++)
		ck_assert_msg(seen[i] == 1, "base:%d seen %u times", i, seen[i]);
	ck_assert_uint_gt(calls, 100);
	ck_assert_uint_gt(bf_registry_count(r), 2000 + 20 * (calls - 1));
	bf_registry_free(r);
}
END_TEST

/* bf_registry_each visits every filter once; bf_registry_reserve sizes the table at once and
 * loses nothing (every name still found, a SCAN still sees each once). */
START_TEST(each_and_reserve)
{
	struct bf_registry *r;
	char name[32];
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
		if (i == 100)
			bf_registry_reserve(r, 100000);
	}
	bf_registry_reserve(r, 10); /* never shrinks */
	memset(seen, 0, sizeof(seen));
	seen_other = 0;
	bf_registry_each(r, count_seen, NULL);
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_msg(seen[i] == 1, "base:%d seen %u times", i, seen[i]);
		ck_assert_ptr_nonnull(bf_registry_get(r, name, (size_t)n));
	}
	ck_assert_uint_eq(seen_other, 0);
	memset(seen, 0, sizeof(seen));
	uint64_t cursor = 0;
	do
		cursor = bf_registry_scan(r, cursor, 100, count_seen, NULL);
	while (cursor);
	for (int i = 0; i < 2000; i++)
		ck_assert_uint_eq(seen[i], 1);
	bf_registry_free(r);
}
END_TEST

/* Pages in name order: with a prefix, after a name, a limit, and "more" until the last. */
START_TEST(pages_in_name_order)
{
	struct bf_registry *r;
	char name[32];
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 499; i >= 0; i--) {
		int n = snprintf(name, sizeof(name), "%s:%03d", (i % 2) ? "odd" : "even", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
	}
	struct bf_filter **page;
	size_t n, total = 0;
	bool more = true;
	char after[32] = "";
	while (more) {
		ck_assert_int_eq(
		    bf_registry_page(r, S("odd:"), after, strlen(after), 7, &page, &n, &more), 0);
		for (size_t i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "odd:%03zu", 2 * (total + i) + 1);
			ck_assert_str_eq(page[i]->name, name);
		}
		ck_assert(more ? n == 7 : n <= 7);
		total += n;
		if (n)
			snprintf(after, sizeof(after), "%s", page[n - 1]->name);
		free(page);
	}
	ck_assert_uint_eq(total, 250);
	ck_assert_int_eq(bf_registry_page(r, "", 0, S("zzz"), 10, &page, &n, &more), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(!more);
	ck_assert_int_eq(bf_registry_page(r, "", 0, "", 0, 1000, &page, &n, &more), 0);
	ck_assert_uint_eq(n, 500);
	ck_assert(!more);
	ck_assert_str_eq(page[0]->name, "even:000");
	free(page);
	bf_registry_free(r);
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("registry");
	tcase_add_test(tc, name_rules);
	tcase_add_test(tc, create_get_drop);
	tcase_add_test(tc, create_validation_changes_nothing);
	tcase_add_test(tc, many_names_and_prefix_list);
	tcase_add_test(tc, memory_limit_refuses_and_changes_nothing);
	tcase_add_test(tc, adopt);
	tcase_add_test(tc, scan_visits_each_once_while_changing);
	tcase_add_test(tc, pages_in_name_order);
	tcase_add_test(tc, each_and_reserve);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(registry_suite)
