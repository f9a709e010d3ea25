/* SPDX-License-Identifier: MIT */
/* The registry: validation, create/get/drop, rename, prefix listing, the memory limit, the expiry
 * heap. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_registry.h"
#include "tests/check_main.h"

/* Its place in its registry's expiry heap (0: none). */
#define EXPIRE_POS(f) ((f)->rare ? (f)->rare->expire_pos : 0u)

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
	/* A filter made first holds the params' shared copy (and is charged it), so that those
	 * below cost alike. */
	ck_assert_int_eq(bf_registry_create(r, S("holder"), &small, 0, NULL), 0);
	uint64_t base = bf_registry_memory(r);
	ck_assert_ptr_null(bf_registry_get(r, S("x")));
	ck_assert_int_eq(bf_registry_create(r, S("x"), &small, 1, &f), 0);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(bf_filter_name(f), "x");
	ck_assert_ptr_eq(bf_registry_get(r, S("x")), f);
	ck_assert_int_eq(bf_registry_create(r, S("x"), &small, 2, &g), -EEXIST);
	ck_assert_ptr_eq(g, f);
	ck_assert_uint_eq(bf_registry_count(r), 2);
	/* Everything a filter costs is counted: its structure, its bits with the allocator's
	 * overhead, its entry (issue 17 item 10: only the bits were). */
	ck_assert_uint_ge(bf_filter_cost(f), sizeof(*f) + bf_filter_bytes(f));
	uint64_t one = bf_registry_memory(r) - base;
	ck_assert_uint_gt(one, bf_filter_cost(f));
	ck_assert_uint_le(one, bf_filter_cost(f) + 128);
	bf_registry_set_entry_overhead(r, 1000);
	ck_assert_uint_eq(bf_registry_memory(r), 2 * 1000 + base + one);
	ck_assert_int_eq(bf_registry_create(r, S("y"), &small, 1, NULL), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 3 * 1000 + base + 2 * one);
	ck_assert_int_eq(bf_registry_drop(r, S("y")), 0);
	ck_assert_uint_eq(bf_registry_memory(r), 2 * 1000 + base + one);
	ck_assert_int_eq(bf_registry_drop(r, S("x")), 0);
	ck_assert_int_eq(bf_registry_drop(r, S("x")), -ENOENT);
	ck_assert_ptr_null(bf_registry_get(r, S("x")));
	ck_assert_uint_eq(bf_registry_count(r), 1);
	ck_assert_uint_eq(bf_registry_memory(r), 1000 + base);
	ck_assert_int_eq(bf_registry_drop(r, S("holder")), 0);
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
	ck_assert_str_eq(bf_filter_name(list[0]), "odd:001");
	ck_assert_str_eq(bf_filter_name(list[249]), "odd:499");
	for (size_t i = 1; i < n; i++)
		ck_assert_int_lt(strcmp(bf_filter_name(list[i - 1]), bf_filter_name(list[i])), 0);
	free(list);
	ck_assert_int_eq(bf_registry_list(r, "", 0, &list, &n), 0);
	ck_assert_uint_eq(n, 500);
	ck_assert_str_eq(bf_filter_name(list[0]), "even:000");
	free(list);
	ck_assert_int_eq(bf_registry_list(r, S("none"), &list, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(list);
	/* A name that is a prefix of another sorts first. */
	ck_assert_int_eq(bf_registry_create(r, S("odd:00"), &small, 1, NULL), 0);
	ck_assert_int_eq(bf_registry_list(r, S("odd:00"), &list, &n), 0);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(bf_filter_name(list[0]), "odd:00");
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
	/* The params' shared copy is held (and charged) here: the filters below cost alike. */
	ck_assert_int_eq(bf_registry_create(r, S("holder"), &small, 0, NULL), 0);
	uint64_t base = bf_registry_memory(r);
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 1, &f), 0);
	uint64_t one = bf_registry_memory(r) - base;
	bf_registry_set_max_memory(r, base + 2 * one); /* exactly two filters fit */
	ck_assert_uint_eq(bf_registry_max_memory(r), base + 2 * one);
	ck_assert_int_eq(bf_registry_create(r, S("b"), &small, 1, NULL), 0);
	ck_assert_uint_eq(bf_registry_memory(r), base + 2 * one);
	ck_assert_int_eq(bf_registry_create(r, S("c"), &small, 1, NULL), -ENOMEM);
	ck_assert_ptr_null(bf_registry_get(r, S("c")));
	ck_assert_uint_eq(bf_registry_count(r), 3);
	ck_assert_uint_eq(bf_registry_memory(r), base + 2 * one);
	/* Growth is refused too. */
	uint64_t i = 0;
	char k[32];
	while (bf_filter_items(f) < small.capacity) {
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

/* What a release function was handed. */
static struct bf_filter *released;

static void keep_released(void *arg, struct bf_filter *f)
{
	(void)arg;
	released = f;
}

/*
 * With a release function, a dropped filter is handed over instead of freed: it is out of the
 * registry at once, and its cost stays charged (a new filter may not take memory still held)
 * until the owner frees it, its blocks taken out and freed first (as the server does on its
 * threadpool).
 */
START_TEST(release_keeps_cost_until_freed)
{
	struct bf_registry *r;
	struct bf_filter *f;
	struct bf_layer blocks[BF_MAX_LAYERS];
	unsigned n;

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_registry_create(r, S("holder"), &small, 0, NULL), 0);
	uint64_t base = bf_registry_memory(r);
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 1, &f), 0);
	uint64_t one = bf_registry_memory(r) - base;
	ck_assert_int_ge(bf_filter_add(f, "k", 1), 0);
	bf_registry_set_max_memory(r, base + one); /* exactly one more fits */
	bf_registry_set_release(r, keep_released, NULL);
	released = NULL;
	ck_assert_int_eq(bf_registry_drop(r, S("a")), 0);
	ck_assert_ptr_eq(released, f);
	ck_assert_ptr_null(bf_registry_get(r, S("a")));
	ck_assert_uint_eq(bf_registry_count(r), 1);
	/* Only the registry's entry is given back: the filter's cost is still held. */
	ck_assert_uint_eq(bf_registry_memory(r), base + bf_filter_cost(f));
	ck_assert_int_eq(bf_registry_create(r, S("b"), &small, 1, NULL), -ENOMEM);
	n = bf_filter_take_blocks(f, blocks);
	ck_assert_uint_eq(n, 1);
	ck_assert_ptr_nonnull(blocks[0].blocks);
	ck_assert_ptr_null(bf_filter_layers(f)[0].blocks);
	ck_assert_uint_eq(bf_registry_memory(r), base + bf_filter_cost(f)); /* unchanged */
	bf_layer_free(&blocks[0]);
	bf_filter_free(f);
	ck_assert_uint_eq(bf_registry_memory(r), base);
	ck_assert_int_eq(bf_registry_create(r, S("b"), &small, 1, NULL), 0);
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
	ck_assert_ptr_eq(bf_filter_budget(f), bf_filter_budget(bf_registry_get(r, S("loaded"))));
	ck_assert_ptr_nonnull(bf_filter_budget(f));
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &g), 0);
	ck_assert_int_eq(bf_registry_adopt(r, S("loaded"), g), -EEXIST);
	/* What an adoption charges: g and its entry (the params' copy is f's). */
	uint64_t before = bf_registry_memory(r);
	ck_assert_int_eq(bf_registry_adopt(r, S("other"), g), 0);
	uint64_t charge = bf_registry_memory(r) - before;
	ck_assert_uint_eq(charge, bf_registry_charge(r, g));
	ck_assert_int_eq(bf_registry_drop(r, S("other")), 0);
	ck_assert_uint_eq(bf_registry_memory(r), before);
	/* A byte short: refused, and nothing changes (g stays outside, charged to nothing). */
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &g), 0);
	bf_registry_set_max_memory(r, before + charge - 1);
	ck_assert_int_eq(bf_registry_adopt(r, S("other"), g), -ENOMEM);
	ck_assert_uint_eq(bf_registry_count(r), 1);
	ck_assert_ptr_null(bf_registry_get(r, S("other")));
	ck_assert_uint_eq(bf_registry_memory(r), before);
	ck_assert_ptr_null(bf_filter_budget(g));
	/* Exactly enough: taken. */
	bf_registry_set_max_memory(r, before + charge);
	ck_assert_int_eq(bf_registry_adopt(r, S("other"), g), 0);
	ck_assert_uint_eq(bf_registry_memory(r), before + charge);
	ck_assert_uint_eq(bf_registry_count(r), 2);
	bf_registry_free(r);
}
END_TEST

/* Ids run out at BF_ID_MAX: the create that would pass it is refused and changes nothing. */
START_TEST(ids_run_out_at_the_largest)
{
	struct bf_registry *r;
	struct bf_filter *f, *g;
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &f), 0);
	f->id = BF_ID_MAX - 1; /* as a load's */
	ck_assert_int_eq(bf_registry_adopt(r, S("loaded"), f), 0);
	ck_assert_int_eq(bf_registry_create(r, S("last"), &small, 1, &g), 0);
	ck_assert_uint_eq(g->id, BF_ID_MAX);
	uint64_t used = bf_registry_memory(r);
	ck_assert_int_eq(bf_registry_create(r, S("past"), &small, 1, NULL), -ENOMEM);
	ck_assert_ptr_null(bf_registry_get(r, S("past")));
	ck_assert_uint_eq(bf_registry_count(r), 2);
	ck_assert_uint_eq(bf_registry_memory(r), used);
	/* A load's filter that has its id is still taken; one that needs a new one is not. */
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &g), 0);
	ck_assert_int_eq(bf_registry_adopt(r, S("new"), g), -ENOMEM);
	g->id = 7;
	ck_assert_int_eq(bf_registry_adopt(r, S("new"), g), 0);
	ck_assert_uint_eq(bf_registry_count(r), 3);
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
	if (sscanf(bf_filter_name(f), "base:%u", &i) == 1 && i < 2000)
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

/*
 * The table doubles a few buckets per change (incremental rehash): while it does, every live
 * name is found, dropped ones are not, renames move across both tables, and each/list see each
 * filter once. Checked after every change from just before the 1024-bucket table fills until
 * well after its successor has taken everything over.
 */
START_TEST(changes_during_a_rehash)
{
	static bool live[1600];
	struct bf_registry *r;
	char name[32];
	int n;

	memset(live, 0, sizeof(live));
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < 1000; i++) {
		n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
		live[i] = true;
	}
	for (int i = 1000; i < 1600; i++) {
		n = snprintf(name, sizeof(name), "base:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, NULL), 0);
		live[i] = true;
		if (i % 3 == 0) { /* drop an older one */
			n = snprintf(name, sizeof(name), "base:%d", i - 700);
			ck_assert_int_eq(bf_registry_drop(r, name, (size_t)n), 0);
			live[i - 700] = false;
		}
		if (i % 7 == 0 && live[i - 500]) { /* rename one away and back */
			char other[32];
			int m = snprintf(other, sizeof(other), "moved:%d", i);
			n = snprintf(name, sizeof(name), "base:%d", i - 500);
			struct bf_filter *f = bf_registry_get(r, name, (size_t)n);
			ck_assert_ptr_nonnull(f);
			ck_assert_int_eq(bf_registry_rename(r, f, other, (size_t)m), 0);
			ck_assert_ptr_eq(bf_registry_get(r, other, (size_t)m), f);
			ck_assert_int_eq(bf_registry_rename(r, f, name, (size_t)n), 0);
		}
		size_t count = 0;
		for (int k = 0; k <= i; k++) {
			n = snprintf(name, sizeof(name), "base:%d", k);
			bool found = bf_registry_get(r, name, (size_t)n) != NULL;
			ck_assert_msg(found == live[k], "after %d: base:%d %s", i, k,
				      live[k] ? "lost" : "still there");
			count += live[k];
		}
		ck_assert_uint_eq(bf_registry_count(r), count);
		if (i % 50 == 0) {
			memset(seen, 0, sizeof(seen));
			seen_other = 0;
			bf_registry_each(r, count_seen, NULL);
			for (int k = 0; k <= i; k++)
				ck_assert_uint_eq(seen[k], live[k]);
			ck_assert_uint_eq(seen_other, 0);
			struct bf_filter **list;
			size_t len;
			ck_assert_int_eq(bf_registry_list(r, "base:", 5, &list, &len), 0);
			ck_assert_uint_eq(len, count);
			free(list);
		}
	}
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
			ck_assert_str_eq(bf_filter_name(page[i]), name);
		}
		ck_assert(more ? n == 7 : n <= 7);
		total += n;
		if (n)
			snprintf(after, sizeof(after), "%s", bf_filter_name(page[n - 1]));
		free(page);
	}
	ck_assert_uint_eq(total, 250);
	ck_assert_int_eq(bf_registry_page(r, "", 0, S("zzz"), 10, &page, &n, &more), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(!more);
	ck_assert_int_eq(bf_registry_page(r, "", 0, "", 0, 1000, &page, &n, &more), 0);
	ck_assert_uint_eq(n, 500);
	ck_assert(!more);
	ck_assert_str_eq(bf_filter_name(page[0]), "even:000");
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
		if (!strcmp(scan_names[i], bf_filter_name(f))) {
			scan_counts[i]++;
			return;
		}
	ck_assert_uint_lt(nscan, 64);
	snprintf(scan_names[nscan], sizeof(scan_names[nscan]), "%s", bf_filter_name(f));
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
	ck_assert_str_eq(bf_filter_name(f), to);
	ck_assert_uint_eq(f->name_len, strlen(to));
	/* A name that fits the room the filter was made with (its first name's) lives there,
	 * just past the structure; a longer one on the heap. */
	if (strlen(to) < f->name_room)
		ck_assert_ptr_eq(bf_filter_name(f), (char *)(f + 1));
	else
		ck_assert_ptr_ne(bf_filter_name(f), (char *)(f + 1));
	ck_assert_uint_eq(bf_registry_count(r), count);
	/* f had no rare part: a name longer than the room made one, which keeps that name and
	 * stays, charged, once the name is short again. */
	ck_assert_uint_eq(bf_registry_memory(r),
			  memory + (f->rare ? sizeof(struct bf_filter_rare) + 16 : 0));
	ck_assert_int_eq(bf_filter_check(f, S("key")), 1);
	ck_assert_uint_eq(scan_count_of(r, to), 1);
	ck_assert_uint_eq(scan_count_of(r, from), 0);
}

/*
 * RENAME: the filter is found under its new name only, with its id, keys and count unchanged,
 * and its memory too but for the rare part a name longer than its room makes, from and to names
 * that fit the room it was made with (its own allocation's) and longer ones (heap), across that
 * room's edge and up to 200 bytes; a SCAN and a listing find it under the new name. A name taken
 * (another filter's, or its own), a bad name, or a filter of another registry changes nothing.
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
	ck_assert_int_eq(bf_registry_create(r, n23, 23, &small, 1, &f), 0);
	ck_assert_uint_eq(f->name_room, 24);
	ck_assert_ptr_eq(bf_filter_name(f), (char *)(f + 1));
	ck_assert_int_eq(bf_registry_rename(r, f, S("a")), 0);
	ck_assert_int_eq(bf_filter_add(f, S("key")), 1);
	ck_assert_int_eq(bf_registry_create(r, S("other"), &small, 2, &g), 0);
	/* Enough others that the table has grown past its first size. */
	for (int i = 0; i < 40; i++) {
		char name[16];
		int k = snprintf(name, sizeof(name), "pad:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)k, &small, 1, NULL), 0);
	}
	ck_assert_ptr_null(f->rare);
	uint64_t id = f->id, mem = bf_registry_memory(r), items = bf_filter_items(f);
	size_t count = bf_registry_count(r);

	/* Made as n23, room 24: short -> short -> heap (24) -> heap (200) -> own room (23) ->
	 * heap (32) -> short */
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
	ck_assert_uint_eq(bf_filter_items(f), items);

	/* The old name is free again: a new filter may take it. */
	ck_assert_int_eq(bf_registry_create(r, S("a"), &small, 3, NULL), 0);
	ck_assert_ptr_ne(bf_registry_get(r, S("a")), f);
	ck_assert_int_eq(bf_registry_drop(r, S("a")), 0);

	/* Taken: by another filter, or by f itself. Nothing changes. */
	ck_assert_int_eq(bf_registry_rename(r, f, S("other")), -EEXIST);
	ck_assert_int_eq(bf_registry_rename(r, f, S("c")), -EEXIST);
	ck_assert_ptr_eq(bf_registry_get(r, S("other")), g);
	ck_assert_ptr_eq(bf_registry_get(r, S("c")), f);
	ck_assert_str_eq(bf_filter_name(f), "c");
	ck_assert_str_eq(bf_filter_name(g), "other");

	/* Bad names: empty, a space, a control byte, a NUL, 201 bytes. Nothing changes. */
	ck_assert_int_eq(bf_registry_rename(r, f, "", 0), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, S("a b")), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, S("a\nb")), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, "a\0b", 3), -EINVAL);
	ck_assert_int_eq(bf_registry_rename(r, f, n201, BF_NAME_MAX + 1), -EINVAL);
	ck_assert_ptr_eq(bf_registry_get(r, S("c")), f);
	ck_assert_str_eq(bf_filter_name(f), "c");
	ck_assert_uint_eq(bf_registry_count(r), count);
	ck_assert_uint_eq(bf_registry_memory(r), mem + sizeof(struct bf_filter_rare) + 16);

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
	ck_assert_str_eq(bf_filter_name(z), "c");
	bf_registry_free(r2);

	/* The listing sorts it by its new name. */
	ck_assert_int_eq(bf_registry_rename(r, f, S("pad:0x")), 0);
	ck_assert_int_eq(bf_registry_list(r, S("pad:0"), &list, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(bf_filter_name(list[0]), "pad:0");
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

/* ---- the expiry heap ---- */

/* An assertion that costs nothing when it holds: each of Check's own writes a mark to the
 * parent process, and the random test below makes millions. */
#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond);                      \
	} while (0)

/* A small deterministic generator (xorshift64*), so that a failure repeats. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* The brute-force model: one slot per name "e:<i>", the filter it holds (NULL: none) and the
 * time it expires at (0: never). */
#define MODEL_N 200
static struct bf_filter *model_f[MODEL_N];
static uint64_t model_ms[MODEL_N];

/* The expiry the model holds for f (f must be in it). */
static uint64_t model_of(const struct bf_filter *f)
{
	for (int i = 0; i < MODEL_N; i++)
		if (model_f[i] == f)
			return model_ms[i];
	ck_abort_msg("filter %s is not in the model", bf_filter_name(f));
	return 0;
}

/* The registry agrees with the model: every filter's expire_ms, and expire_pos set exactly for
 * those that expire; the count and sum of the expiring; the next one is one of the earliest. */
static void assert_model(const struct bf_registry *r)
{
	size_t n = 0, count = 0;
	uint64_t sum = 0, min = 0, got_sum = 1;

	for (int i = 0; i < MODEL_N; i++) {
		const struct bf_filter *f = model_f[i];

		if (!f)
			continue;
		count++;
		/* Checked without an assertion per filter (each one costs Check a write). */
		if (bf_filter_expire_ms(f) != model_ms[i] ||
		    (EXPIRE_POS(f) != 0) != (model_ms[i] != 0))
			ck_abort_msg("%s: expire_ms %llu (the model: %llu), expire_pos %u",
				     bf_filter_name(f), (unsigned long long)bf_filter_expire_ms(f),
				     (unsigned long long)model_ms[i], (unsigned)EXPIRE_POS(f));
		if (!model_ms[i])
			continue;
		n++;
		sum += model_ms[i];
		if (!min || model_ms[i] < min)
			min = model_ms[i];
	}
	REQUIRE(bf_registry_count(r) == count);
	REQUIRE(bf_registry_expiring(r, &got_sum) == n);
	REQUIRE(bf_registry_expiring(r, NULL) == n);
	REQUIRE(got_sum == sum);
	if (!n) {
		REQUIRE(!bf_registry_next_expiring(r));
		return;
	}
	const struct bf_filter *next = bf_registry_next_expiring(r);
	REQUIRE(next);
	REQUIRE(bf_filter_expire_ms(next) == min);
	REQUIRE(model_of(next) == min);
}

/*
 * Take every expiring filter out in heap order (as the server's timer does, but with
 * set_expire 0 instead of a drop): the times come out sorted, each filter once, exactly the
 * model's; then put them all back as they were.
 */
static void assert_heap_order(struct bf_registry *r)
{
	struct bf_filter *out[MODEL_N];
	uint64_t when[MODEL_N], last = 0;
	size_t n = 0, want = bf_registry_expiring(r, NULL);
	struct bf_filter *f;

	while ((f = bf_registry_next_expiring(r))) {
		REQUIRE(n < MODEL_N);
		REQUIRE(bf_filter_expire_ms(f) >= last);
		REQUIRE(bf_filter_expire_ms(f) == model_of(f));
		for (size_t k = 0; k < n; k++)
			if (out[k] == f)
				ck_abort_msg("%s comes out of the heap twice", bf_filter_name(f));
		last = bf_filter_expire_ms(f);
		out[n] = f;
		when[n++] = bf_filter_expire_ms(f);
		REQUIRE(bf_registry_set_expire(r, f, 0) == 0);
		REQUIRE(bf_filter_expire_ms(f) == 0);
		REQUIRE(EXPIRE_POS(f) == 0);
		REQUIRE(bf_registry_expiring(r, NULL) == want - n);
	}
	REQUIRE(n == want);
	REQUIRE(bf_registry_expiring(r, &last) == 0);
	REQUIRE(last == 0);
	/* Back in reverse order: each one put back is the earliest so far (heap_up to the top). */
	for (size_t k = n; k-- > 0;)
		REQUIRE(bf_registry_set_expire(r, out[k], when[k]) == 0);
	assert_model(r);
}

static struct bf_filter *model_create(struct bf_registry *r, int i, bool loaded, uint64_t ms)
{
	char name[32];
	int len = snprintf(name, sizeof(name), "e:%d", i);
	struct bf_filter *f;

	if (loaded) {
		/* A filter loaded from a checkpoint comes with its expiry. */
		REQUIRE(bf_filter_new(&small, (uint64_t)i, NULL, &f) == 0);
		ck_assert_int_eq(bf_filter_set_expiry(f, ms), 0);
		REQUIRE(bf_registry_adopt(r, name, (size_t)len, f) == 0);
	} else {
		REQUIRE(bf_registry_create(r, name, (size_t)len, &small, 1, &f) == 0);
		REQUIRE(bf_filter_expire_ms(f) == 0);
		REQUIRE(EXPIRE_POS(f) == 0);
		if (ms)
			REQUIRE(bf_registry_set_expire(r, f, ms) == 0);
	}
	model_f[i] = f;
	model_ms[i] = ms;
	return f;
}

/*
 * The heap against a brute-force model under 20,000 random operations on 200 names: expiries
 * set, cleared, moved earlier and later (times from a small range, so many are equal), set to
 * what they are, filters dropped (expiring or not, the earliest too), created and adopted with
 * an expiry, renamed (the heap keeps the filter). After each: count, sum, the earliest; every
 * 500: the whole order, by taking every filter out and putting it back.
 */
START_TEST(expiry_heap_random_against_model)
{
	struct bf_registry *r;
	char name[32];

	rng_state = 0x9e3779b97f4a7c15ULL + (uint64_t)_i;
	memset(model_f, 0, sizeof(model_f));
	memset(model_ms, 0, sizeof(model_ms));
	REQUIRE(bf_registry_new(0, &r) == 0);
	assert_model(r);
	for (int i = 0; i < MODEL_N; i += 2)
		model_create(r, i, i % 4 == 0, i % 3 ? 1000 + rng() % 500 : 0);
	assert_model(r);
	assert_heap_order(r);

	for (int op = 0; op < 20000; op++) {
		int i = (int)(rng() % MODEL_N);
		struct bf_filter *f = model_f[i];
		unsigned what = (unsigned)(rng() % 100);
		/* Times in a small range: ties are common. */
		uint64_t ms = 1 + rng() % 300;

		if (!f) {
			model_create(r, i, what < 50, what % 3 ? ms : 0);
		} else if (what < 40) {
			/* Set, or move (earlier, later, or to the same time). */
			REQUIRE(bf_registry_set_expire(r, f, ms) == 0);
			model_ms[i] = ms;
		} else if (what < 48) {
			REQUIRE(bf_registry_set_expire(r, f, model_ms[i]) == 0);
		} else if (what < 65) {
			REQUIRE(bf_registry_set_expire(r, f, 0) == 0);
			model_ms[i] = 0;
		} else if (what < 75) {
			/* Drop the earliest, as the server's timer does. */
			struct bf_filter *next = bf_registry_next_expiring(r);
			if (next) {
				int k = 0;
				while (model_f[k] != next)
					k++;
				REQUIRE(bf_registry_drop(r, bf_filter_name(next), next->name_len) ==
					0);
				model_f[k] = NULL;
				model_ms[k] = 0;
			}
		} else if (what < 90) {
			int len = snprintf(name, sizeof(name), "e:%d", i);
			REQUIRE(bf_registry_drop(r, name, (size_t)len) == 0);
			model_f[i] = NULL;
			model_ms[i] = 0;
		} else {
			/* Renamed to a free name: the same filter, its place in the heap kept. */
			int k = (int)(rng() % MODEL_N);
			if (!model_f[k]) {
				int len = snprintf(name, sizeof(name), "e:%d", k);
				REQUIRE(bf_registry_rename(r, f, name, (size_t)len) == 0);
				model_f[k] = f;
				model_ms[k] = model_ms[i];
				model_f[i] = NULL;
				model_ms[i] = 0;
			}
		}
		assert_model(r);
		if (op % 500 == 499)
			assert_heap_order(r);
	}
	assert_heap_order(r);
	/* Freed with filters still expiring (ASan and valgrind see the rest). */
	REQUIRE(bf_registry_expiring(r, NULL) > 0);
	bf_registry_free(r);
}
END_TEST

/*
 * Adopt takes a filter's expire_ms as it is (whatever expire_pos it came with); an adopt
 * refused (a name taken, the memory limit) leaves the heap as it was and the filter out of it;
 * drop takes it out, the earliest or not; set_expire 0 on a filter that never expired is
 * nothing; growth past the heap's first allocation and back; free with expiring filters.
 */
START_TEST(expiry_adopt_drop_free)
{
	struct bf_registry *r;
	struct bf_filter *f, *g, *h, *x;
	uint64_t sum;

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_ptr_null(bf_registry_next_expiring(r));
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 0);
	ck_assert_uint_eq(sum, 0);

	/* A loaded filter with an expiry, and a stale expire_pos from another registry. */
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &f), 0);
	ck_assert_int_eq(bf_filter_set_expiry(f, 5000), 0);
	ck_assert_int_eq(bf_filter_rare_get(f), 0);
	f->rare->expire_pos = 77;
	ck_assert_int_eq(bf_registry_adopt(r, S("f"), f), 0);
	ck_assert_uint_eq(EXPIRE_POS(f), 1);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 1);
	ck_assert_uint_eq(sum, 5000);

	/* One without an expiry stays out, even with a stale expire_pos. */
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &g), 0);
	ck_assert_int_eq(bf_filter_rare_get(g), 0);
	g->rare->expire_pos = 3;
	ck_assert_int_eq(bf_registry_adopt(r, S("g"), g), 0);
	ck_assert_uint_eq(EXPIRE_POS(g), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 1);
	/* Clearing an expiry that is not there: nothing. */
	ck_assert_int_eq(bf_registry_set_expire(r, g, 0), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 1);
	ck_assert_uint_eq(EXPIRE_POS(g), 0);

	/* Refused adopts (name taken; over the memory limit) leave the heap alone. */
	ck_assert_int_eq(bf_filter_new(&small, 1, NULL, &x), 0);
	ck_assert_int_eq(bf_filter_set_expiry(x, 1000), 0);
	ck_assert_int_eq(bf_registry_adopt(r, S("f"), x), -EEXIST);
	ck_assert_uint_eq(EXPIRE_POS(x), 0);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 1);
	ck_assert_uint_eq(sum, 5000);
	ck_assert_int_eq(bf_registry_adopt(r, S("bad name"), x), -EINVAL);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 1);
	bf_registry_set_max_memory(r, bf_registry_memory(r) + 1);
	ck_assert_int_eq(bf_registry_adopt(r, S("x"), x), -ENOMEM);
	ck_assert_uint_eq(EXPIRE_POS(x), 0);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 1);
	ck_assert_uint_eq(sum, 5000);
	bf_registry_set_max_memory(r, 0);
	/* Adopted now, earlier than f: the first. */
	ck_assert_int_eq(bf_registry_adopt(r, S("x"), x), 0);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), x);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 2);
	ck_assert_uint_eq(sum, 6000);

	/* A first expiry takes memory (the filter's rare part): at the limit it is refused and
	 * changes nothing. */
	struct bf_filter *y;
	ck_assert_int_eq(bf_registry_create(r, S("y"), &small, 1, &y), 0);
	ck_assert_ptr_null(y->rare);
	uint64_t mem = bf_registry_memory(r);
	bf_registry_set_max_memory(r, mem);
	ck_assert_int_eq(bf_registry_set_expire(r, y, 7000), -ENOMEM);
	ck_assert_ptr_null(y->rare);
	ck_assert_uint_eq(bf_filter_expire_ms(y), 0);
	ck_assert_uint_eq(bf_registry_memory(r), mem);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 2);
	bf_registry_set_max_memory(r, 0);
	ck_assert_int_eq(bf_registry_set_expire(r, y, 7000), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 3);
	ck_assert_uint_gt(bf_registry_memory(r), mem);
	ck_assert_int_eq(bf_registry_drop(r, S("y")), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 2);

	/* Dropped: the earliest, then one without an expiry, then the last. */
	ck_assert_int_eq(bf_registry_drop(r, S("x")), 0);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), f);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 1);
	ck_assert_uint_eq(sum, 5000);
	ck_assert_int_eq(bf_registry_drop(r, S("g")), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, NULL), 1);
	ck_assert_int_eq(bf_registry_drop(r, S("f")), 0);
	ck_assert_ptr_null(bf_registry_next_expiring(r));
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 0);
	ck_assert_uint_eq(sum, 0);

	/* Past the heap's first allocation (16) and down again, a drop from the middle. */
	for (int i = 0; i < 100; i++) {
		char name[16];
		int n = snprintf(name, sizeof(name), "h:%d", i);
		ck_assert_int_eq(bf_registry_create(r, name, (size_t)n, &small, 1, &h), 0);
		ck_assert_int_eq(bf_registry_set_expire(r, h, 100000 - (uint64_t)i), 0);
		ck_assert_ptr_eq(bf_registry_next_expiring(r), h);
	}
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 100);
	ck_assert_uint_eq(sum, 100 * 100000 - 99 * 100 / 2);
	ck_assert_int_eq(bf_registry_drop(r, S("h:50")), 0);
	ck_assert_uint_eq(bf_registry_expiring(r, &sum), 99);
	ck_assert_uint_eq(sum, 100 * 100000 - 99 * 100 / 2 - (100000 - 50));
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_next_expiring(r)), 100000 - 99);
	/* The latest made the earliest, and back. */
	h = bf_registry_get(r, S("h:0"));
	ck_assert_int_eq(bf_registry_set_expire(r, h, 1), 0);
	ck_assert_ptr_eq(bf_registry_next_expiring(r), h);
	ck_assert_int_eq(bf_registry_set_expire(r, h, 100000), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(bf_registry_next_expiring(r)), 100000 - 99);
	/* A clone (what a checkpoint writes) carries the time, not the place. */
	ck_assert_int_eq(bf_filter_clone(h, &g), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 100000);
	bf_filter_detach(g);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 0);
	bf_filter_free(g);
	/* Freed with 99 filters expiring. */
	bf_registry_free(r);
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Listings stay in name order through creates, renames and drops in random order: the whole
 * list, and pages of 37 from every `after`, against a sorted reference. */
START_TEST(listing_follows_renames_and_drops)
{
	enum { M = 3000 };
	static char ref[M][16];
	static bool live[M];
	struct bf_registry *r;
	struct bf_filter *f, **list;
	unsigned seed = 7;
	size_t n;

	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	for (int i = 0; i < M; i++) {
		snprintf(ref[i], sizeof(ref[i]), "f%d", (i * 1237) % M);
		ck_assert_int_eq(bf_registry_create(r, ref[i], strlen(ref[i]), &small, 1, NULL), 0);
		live[i] = true;
	}
	for (int round = 0; round < 2 * M; round++) {
		int i = rand_r(&seed) % M;
		char to[16];

		if (!live[i])
			continue;
		f = bf_registry_get(r, ref[i], strlen(ref[i]));
		ck_assert_ptr_nonnull(f);
		if (round % 3 == 0) {
			ck_assert_int_eq(bf_registry_drop(r, ref[i], strlen(ref[i])), 0);
			live[i] = false;
			continue;
		}
		snprintf(to, sizeof(to), "g%d", rand_r(&seed) % 100000);
		if (bf_registry_rename(r, f, to, strlen(to)) == 0)
			memcpy(ref[i], to, sizeof(to));
	}
	/* The reference: the live names, sorted. */
	static const char *want[M];
	size_t nw = 0;
	for (int i = 0; i < M; i++)
		if (live[i])
			want[nw++] = ref[i];
	qsort(want, nw, sizeof(*want), cmp_str);
	ck_assert_int_eq(bf_registry_list(r, "", 0, &list, &n), 0);
	ck_assert_uint_eq(n, nw);
	for (size_t k = 0; k < n; k++)
		ck_assert_str_eq(bf_filter_name(list[k]), want[k]);
	free(list);
	/* Pages of 37, each from the last name of the one before. */
	const char *after = "";
	size_t k = 0;
	bool more = true;
	while (more) {
		ck_assert_int_eq(
		    bf_registry_page(r, "", 0, after, strlen(after), 37, &list, &n, &more), 0);
		for (size_t j = 0; j < n; j++, k++)
			ck_assert_str_eq(bf_filter_name(list[j]), want[k]);
		after = n ? want[k - 1] : after;
		free(list);
	}
	ck_assert_uint_eq(k, nw);
	bf_registry_free(r);
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("registry");
	/* changes_during_a_rehash checks about a million lookups: 1-2 s alone, past Check's
	 * default 4 s beside other suites on a busy 2-core machine, and 25-37 s under ASan. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, name_rules);
	tcase_add_test(tc, create_get_drop);
	tcase_add_test(tc, create_validation_changes_nothing);
	tcase_add_test(tc, many_names_and_prefix_list);
	tcase_add_test(tc, memory_limit_refuses_and_changes_nothing);
	tcase_add_test(tc, adopt);
	tcase_add_test(tc, ids_run_out_at_the_largest);
	tcase_add_test(tc, scan_visits_each_once_while_changing);
	tcase_add_test(tc, changes_during_a_rehash);
	tcase_add_test(tc, pages_in_name_order);
	tcase_add_test(tc, each_and_reserve);
	tcase_add_test(tc, rename_filter);
	tcase_add_test(tc, scan_while_renaming);
	tcase_add_test(tc, listing_follows_renames_and_drops);
	tcase_add_loop_test(tc, expiry_heap_random_against_model, 0, 3);
	tcase_add_test(tc, expiry_adopt_drop_free);
	tcase_add_test(tc, release_keeps_cost_until_freed);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(registry_suite)
