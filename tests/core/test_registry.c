/* SPDX-License-Identifier: MIT */
/* The registry: validation, create/get/drop, rename, prefix listing, the memory limit. */
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

/* Every name a full SCAN visits, each as often as it is seen (a small table of names). */
static char scan_names[64][BF_NAME_MAX + 1];
static unsigned scan_counts[64], nscan;

static void note_name(void *arg, struct bf_filter *f)
{
	(void)arg;
	for (unsigned i = 0; i < nscan; i++)
		if (!strcmp(scan_names[i], f->name)) {
			scan_counts[i]++;
			return;
		}
	ck_assert_uint_lt(nscan, 64);
	snprintf(scan_names[nscan], sizeof(scan_names[nscan]), "%s", f->name);
	scan_counts[nscan++] = 1;
}

/* How often a complete SCAN of r visits name (0: never). */
static unsigned scan_count_of(struct bf_registry *r, const char *name)
{
	uint64_t cursor = 0;

	nscan = 0;
	do
		cursor = bf_registry_scan(r, cursor, 3, note_name, NULL);
	while (cursor);
	for (unsigned i = 0; i < nscan; i++)
		if (!strcmp(scan_names[i], name))
			return scan_counts[i];
	return 0;
}

/* f renamed from `from` to `to`: found under `to` only, the same filter with its keys. */
static void assert_renamed(struct bf_registry *r, struct bf_filter *f, const char *from,
			   const char *to, size_t count, uint64_t memory)
{
	ck_assert_ptr_eq(bf_registry_get(r, to, strlen(to)), f);
	ck_assert_ptr_null(bf_registry_get(r, from, strlen(from)));
	ck_assert_str_eq(f->name, to);
	ck_assert_uint_eq(f->name_len, strlen(to));
	/* A name shorter than the inline buffer lives in it; a longer one on the heap. */
	if (strlen(to) < sizeof(f->name_buf))
		ck_assert_ptr_eq(f->name, f->name_buf);
	else
		ck_assert_ptr_ne(f->name, f->name_buf);
	ck_assert_uint_eq(bf_registry_count(r), count);
	ck_assert_uint_eq(bf_registry_memory(r), memory);
	ck_assert_int_eq(bf_filter_check(f, S("key")), 1);
	ck_assert_uint_eq(scan_count_of(r, to), 1);
	ck_assert_uint_eq(scan_count_of(r, from), 0);
}

/*
 * RENAME: the filter is found under its new name only, with its id, keys, count and memory
 * unchanged, from and to short (inline) and long (heap) names, across the inline boundary (23
 * and 24 bytes) and up to 200 bytes; a SCAN and a listing find it under the new name. A name
 * taken (another filter's, or its own), a bad name, or a filter of another registry changes
 * nothing.
 */
START_TEST(rename_filter)
{
	struct bf_registry *r, *r2;
	struct bf_filter *f, *g, *z, **list;
	char n23[24], n24[25], n200[BF_NAME_MAX + 1], n201[BF_NAME_MAX + 2];
	size_t n;

	memset(n23, 'i', 23);
	n23[23] = '\0';
	memset(n24, 'h', 24);
	n24[24] = '\0';
	memset(n200, 'm', BF_NAME_MAX);
	n200[BF_NAME_MAX] = '\0';
	memset(n201, 'x', BF_NAME_MAX + 1);
	n201[BF_NAME_MAX + 1] = '\0';

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 1, &f), 0);
	ck_assert_int_eq(bf_filter_add(f, S("key")), 1);
	ck_assert_int_eq(bf_registry_create(r, S("other"), &small, 2, &g), 0);
	/* Enough others that the table has grown past its first size. */
	for (int i = 0; i < 40; i++) {
		char name[16];
		int k = snprintf(name, sizeof(name), "pad:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)k, &small, 1, NULL), 0);
	}
	uint64_t id = f->id, mem = bf_registry_memory(r), items = f->items;
	size_t count = bf_registry_count(r);

	/* short -> short -> heap (24) -> heap (200) -> inline (23) -> heap -> short */
	ck_assert_int_eq(bf_registry_rename(r, f, S("b")), 0);
	assert_renamed(r, f, "a", "b", count, mem);
	ck_assert_int_eq(bf_registry_rename(r, f, n24, 24), 0);
	assert_renamed(r, f, "b", n24, count, mem);
	ck_assert_int_eq(bf_registry_rename(r, f, n200, BF_NAME_MAX), 0);
	assert_renamed(r, f, n24, n200, count, mem);
	ck_assert_int_eq(bf_registry_rename(r, f, n23, 23), 0);
	assert_renamed(r, f, n200, n23, count, mem);
	ck_assert_int_eq(bf_registry_rename(r, f, S("a-name-of-thirty-two-bytes-long")), 0);
	assert_renamed(r, f, n23, "a-name-of-thirty-two-bytes-long", count, mem);
	ck_assert_int_eq(bf_registry_rename(r, f, S("c")), 0);
	assert_renamed(r, f, "a-name-of-thirty-two-bytes-long", "c", count, mem);
	ck_assert_uint_eq(f->id, id);
	ck_assert_uint_eq(f->items, items);

	/* The old name is free again: a new filter may take it. */
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 3, NULL), 0);
	ck_assert_ptr_ne(bf_registry_get(r, S("a")), f);
	ck_assert_int_eq(bf_registry_drop(r, S("a")), 0);

	/* Taken: by another filter, or by f itself. Nothing changes. */
	ck_assert_int_eq(bf_registry_rename(r, f, S("other")), -EEXIST);
	ck_assert_int_eq(bf_registry_rename(r, f, S("c")), -EEXIST);
	ck_assert_ptr_eq(bf_registry_get(r, S("other")), g);
	ck_assert_ptr_eq(bf_registry_get(r, S("c")), f);
	ck_assert_str_eq(f->name, "c");
	ck_assert_str_eq(g->name, "other");

	/* Bad names: empty, a space, a control byte, a NUL, 201 bytes. Nothing changes. */
	ck_assert_int_eq(bf_registry_rename(r, f, "", 0), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, S("a b")), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, S("a\nb")), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, "a\0b", 3), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, n201, BF_NAME_MAX + 1), -EINVAL);
	ck_assert_ptr_eq(bf_registry_get(r, S("c")), f);
	ck_assert_str_eq(f->name, "c");
	ck_assert_uint_eq(bf_registry_count(r), count);
	ck_assert_uint_eq(bf_registry_memory(r), mem);

	/* A filter of another registry, even one under a name this one holds. */
	ck_assert_int_eq(bf_registry_new(0, &r2), 0);
	ck_assert_int_eq(bf_registry_create(r2, S("z"), &small, 1, &z), 0);
	ck_assert_int_eq(bf_registry_rename(r, z, S("q")), -ENOENT);
	ck_assert_ptr_null(bf_registry_get(r, S("q")));
	ck_assert_int_eq(bf_registry_drop(r2, S("z")), 0);
	ck_assert_int_eq(bf_registry_create(r2, S("c"), &small, 1, &z), 0);
	ck_assert_int_eq(bf_registry_rename(r, z, S("q")), -ENOENT);
	ck_assert_ptr_null(bf_registry_get(r, S("q")));
	ck_assert_ptr_eq(bf_registry_get(r2, S("c")), z);
	ck_assert_str_eq(z->name, "c");
	bf_registry_free(r2);

	/* The listing sorts it by its new name. */
	ck_assert_int_eq(bf_registry_rename(r, f, S("pad:0x")), 0);
	ck_assert_int_eq(bf_registry_list(r, S("pad:0"), &list, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0]->name, "pad:0");
	ck_assert_ptr_eq(list[1], f);
	free(list);

	/* Dropped under its new name, all it cost is released. */
	ck_assert_int_eq(bf_registry_drop(r, S("pad:0x")), 0);
	ck_assert_uint_eq(bf_registry_count(r), count - 1);
	ck_assert_int_eq(bf_registry_drop(r, S("other")), 0);
	for (int i = 0; i < 40; i++) {
		char name[16];
		int k = snprintf(name, sizeof(name), "pad:%d", i);
		ck_assert_int_eq(bf_registry_drop(r, name, (size_t)k), 0);
	}
	ck_assert_uint_eq(bf_registry_memory(r), 0);
	bf_registry_free(r);
}
END_TEST

/* A SCAN over filters present throughout still visits each once while others are renamed back
 * and forth (long and short names) between its calls, and the table grows meanwhile. */
START_TEST(scan_while_renaming)
{
	struct bf_registry *r;
	struct bf_filter *moving[20];
	char name[64];

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
	}
	for (int i = 0; i < 20; i++) {
		int n = snprintf(name, sizeof(name), "mv:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, &moving[i]), 0);
	}
	memset(seen, 0, sizeof(seen));
	seen_other = 0;
	uint64_t cursor = 0;
	unsigned round = 0;
	do {
		cursor = bf_registry_scan(r, cursor, 10, count_seen, NULL);
		for (int i = 0; i < 20; i++) {
			int n =
			    snprintf(name, sizeof(name),
				     round % 2 ? "mv:%d" : "moving-filter-with-a-long-name:%d", i);
			ck_assert_int_eq(bf_registry_rename(r, moving[i], name, (size_t)n), 0);
			ck_assert_ptr_eq(bf_registry_get(r, name, (size_t)n), moving[i]);
		}
		/* The table doubles a few times meanwhile. */
		for (int k = 0; k < 20; k++) {
			int n = snprintf(name, sizeof(name), "new:%u:%d", round, k);
			ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL),
					 0);
		}
		round++;
	} while (cursor != 0);
	for (int i = 0; i < 2000; i++)
		ck_assert_msg(seen[i] == 1, "base:%d seen %u times", i, seen[i]);
	ck_assert_uint_eq(bf_registry_count(r), 2020 + 20 * round);
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
	tcase_add_test(tc, rename_filter);
	tcase_add_test(tc, scan_while_renaming);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(registry_suite)
