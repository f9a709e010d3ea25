/* SPDX-License-Identifier: MIT */
/* The text protocol as a conversation: each line in, the exact reply bytes out. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/check_main.h"
#include "tests/cmd_fixture.h"
#include "proto/text_cmd.h"

static struct bf_registry *reg;
static struct cmd_ctx ctx;
static struct cmd_session sess;
static struct proto_buf out;
static int flushes;
static struct bf_filter *flushed;
static int page_ins_started; /* close_pages_out_and_next_use_pages_in */

static int flush_hook(void *arg, struct bf_filter *f, uint64_t *ticket)
{
	(void)arg;
	(void)ticket;
	flushes++;
	flushed = f;
	return 0;
}

static void setup(void)
{
	cmd_fixture_init(&ctx, 0, 16, 8);
	ctx.hooks.flush = flush_hook;
	reg = ctx.reg;
	cmd_session_init(&sess, 1);
	proto_buf_init(&out);
	flushes = 0;
	page_ins_started = 0;
	flushed = NULL;
}

static void teardown(void)
{
	proto_buf_free(&out);
	cmd_session_free(&sess);
	cmd_fixture_free(&ctx);
}

/* Send one line (without "\n"), return the reply as a NUL-terminated string. */
static const char *say(const char *line)
{
	static char copy[8192];
	proto_buf_reset(&out);
	text_cmd_exec(&ctx, &sess, line, strlen(line), &out);
	ck_assert(!out.failed);
	ck_assert_uint_lt(out.len, sizeof(copy));
	memcpy(copy, out.data, out.len);
	copy[out.len] = '\0';
	return copy;
}

#define SAYS(line, expect) ck_assert_str_eq(say(line), expect)

START_TEST(create_set_check)
{
	SAYS("create foo", "Done\n");
	SAYS("create foo", "Exists\n");
	/* bloomd's defaults: capacity 100000 at 0.0001 (not RESP's or HTTP's). */
	ck_assert_ptr_nonnull(strstr(say("info foo"), "\ncapacity 100000\n"));
	ck_assert_ptr_nonnull(strstr(say("info foo"), "\nprobability 0.000100\n"));
	SAYS("set foo bar", "Yes\n");
	SAYS("set foo bar", "No\n");
	SAYS("s foo baz", "Yes\n");
	SAYS("check foo bar", "Yes\n");
	SAYS("c foo nope", "No\n");
	SAYS("check nope bar", "Filter does not exist\n");
	SAYS("set nope bar", "Filter does not exist\n");
}
END_TEST

START_TEST(single_key_is_rest_of_line)
{
	SAYS("create f", "Done\n");
	SAYS("set f key with spaces", "Yes\n");
	SAYS("check f key with spaces", "Yes\n");
	SAYS("check f key", "No\n");
	SAYS("check f with", "No\n");
	/* The key starts right after the single space that follows the name. */
	SAYS("set f  lead", "Yes\n");
	SAYS("check f lead", "No\n");
	SAYS("check f  lead", "Yes\n");
}
END_TEST

START_TEST(multi_and_bulk)
{
	SAYS("create f", "Done\n");
	SAYS("bulk f a b c", "Yes Yes Yes\n");
	SAYS("b f a d", "No Yes\n");
	SAYS("multi f a x b y", "Yes No Yes No\n");
	SAYS("m f d", "Yes\n");
	SAYS("m f  a   b ", "Yes Yes\n"); /* runs of spaces separate */
	SAYS("multi nope a", "Filter does not exist\n");
	SAYS("multi f", "Client Error: Must provide filter name and key\n");
	SAYS("bulk f ", "Client Error: Must provide filter name and key\n");
	SAYS("bulk f 1 2 3 4 5 6 7 8", "Yes Yes Yes Yes Yes Yes Yes Yes\n"); /* max_args 8 */
	SAYS("bulk f 1 2 3 4 5 6 7 8 9", "Client Error: Too many arguments\n");
	SAYS("check f 9", "No\n"); /* nothing of the refused line was added */
}
END_TEST

START_TEST(missing_arguments)
{
	SAYS("check", "Client Error: Must provide filter name and key\n");
	SAYS("check f", "Client Error: Must provide filter name and key\n");
	SAYS("check f ", "Client Error: Must provide filter name and key\n");
	SAYS("set", "Client Error: Must provide filter name and key\n");
	SAYS("create", "Client Error: Must provide filter name\n");
	SAYS("create ", "Client Error: Must provide filter name\n");
	SAYS("drop", "Client Error: Must provide filter name\n");
	SAYS("info", "Client Error: Must provide filter name\n");
	SAYS("close", "Client Error: Must provide filter name\n");
	SAYS("clear", "Client Error: Must provide filter name\n");
	SAYS("drop a b", "Client Error: Unexpected arguments\n");
	SAYS("info a b", "Client Error: Unexpected arguments\n");
	SAYS("flush a b", "Client Error: Unexpected arguments\n");
	SAYS("list a b", "Client Error: Unexpected arguments\n");
}
END_TEST

START_TEST(unknown_commands)
{
	SAYS("", "Client Error: Command not supported\n");
	SAYS("CHECK f k", "Client Error: Command not supported\n"); /* bloomd is case-sensitive */
	SAYS("frobnicate", "Client Error: Command not supported\n");
	SAYS("\x01\x02\xff", "Client Error: Command not supported\n");
	SAYS("ping", "PONG\n");
	ck_assert(!sess.close_after);
	SAYS("quit", "");
	ck_assert(sess.close_after);
}
END_TEST

#define TOKEN "0123456789abcdef0123456789abcdef"

/* With a token: only auth, ping and quit before auth; three failures close. */
START_TEST(auth_with_token)
{
	SAYS("auth x", "Client Error: Authentication is not configured\n");
	ctx.token = TOKEN;
	ctx.token_len = strlen(TOKEN);
	SAYS("ping", "PONG\n");
	SAYS("create f", "Client Error: Authentication required\n");
	SAYS("list", "Client Error: Authentication required\n");
	SAYS("", "Client Error: Authentication required\n");
	SAYS("frobnicate", "Client Error: Authentication required\n");
	SAYS("auth", "Client Error: Invalid token\n");
	SAYS("auth " TOKEN " ", "Client Error: Invalid token\n");
	ck_assert(!sess.close_after);
	SAYS("auth " TOKEN, "Done\n");
	ck_assert(sess.authed);
	SAYS("create f", "Done\n");
	SAYS("check f k", "No\n");

	/* The extension commands in any case (bloomd's own stay lowercase). */
	cmd_session_free(&sess);
	cmd_session_init(&sess, 3);
	SAYS("PING", "PONG\n");
	SAYS("Ping", "PONG\n");
	SAYS("CHECK f k", "Client Error: Authentication required\n");
	SAYS("AUTH " TOKEN, "Done\n");
	SAYS("CHECK f k", "Client Error: Command not supported\n");
	SAYS("set f k", "Yes\n");
	SAYS("DELETE f k", "Client Error: Not a counting filter\n");
	SAYS("D f k", "Client Error: Not a counting filter\n");
	ck_assert(!sess.close_after);
	SAYS("QUIT", "");
	ck_assert(sess.close_after);

	cmd_session_free(&sess);
	cmd_session_init(&sess, 2);
	SAYS("auth 0123456789abcdef0123456789abcdeF", "Client Error: Invalid token\n");
	SAYS("auth 0123456789abcdef0123456789abcde", "Client Error: Invalid token\n");
	ck_assert(!sess.close_after);
	SAYS("auth  " TOKEN, "Client Error: Invalid token\n"); /* the token is the rest */
	ck_assert(sess.close_after);
	ck_assert(!sess.authed);
	SAYS("check f k", "Client Error: Authentication required\n");
}
END_TEST

/* cmd_auth_check itself: exact bytes only, whatever the lengths. */
START_TEST(auth_check_compare)
{
	ck_assert(!cmd_auth_check(&ctx, &sess, "", 0)); /* no token: never */
	ck_assert_uint_eq(sess.auth_failures, 0);
	ctx.token = TOKEN;
	ctx.token_len = strlen(TOKEN);
	ck_assert(!cmd_auth_check(&ctx, &sess, "", 0));
	ck_assert(!cmd_auth_check(&ctx, &sess, TOKEN "\0", strlen(TOKEN) + 1));
	ck_assert(!sess.authed);
	ck_assert(cmd_auth_check(&ctx, &sess, TOKEN, strlen(TOKEN)));
	ck_assert(sess.authed);
	ck_assert_uint_eq(sess.auth_failures, 2);
	ck_assert(!sess.close_after);
}
END_TEST

START_TEST(create_options)
{
	SAYS("create a capacity=5000 prob=0.001", "Done\n");
	struct bf_filter *f = bf_registry_get(reg, "a", 1);
	ck_assert_uint_eq(f->params->capacity, 5000);
	ck_assert_double_eq(f->params->error_rate, 0.001);
	ck_assert(f->params->persist);
	ck_assert_uint_eq(f->params->expansion, 2);

	SAYS("create b in_memory", "Done\n"); /* bare in_memory means in_memory=1 */
	ck_assert(!bf_registry_get(reg, "b", 1)->params->persist);
	SAYS("create c in_memory=0", "Done\n");
	ck_assert(bf_registry_get(reg, "c", 1)->params->persist);
	SAYS("create d type=counting expansion=4", "Done\n");
	f = bf_registry_get(reg, "d", 1);
	ck_assert_int_eq(f->params->type, BF_TYPE_COUNTING);
	ck_assert_uint_eq(f->params->expansion, 4);
	SAYS("create e nonscaling=1 capacity=1", "Done\n");
	ck_assert_uint_eq(bf_registry_get(reg, "e", 1)->params->expansion, 0);
	SAYS("create g nonscaling", "Done\n");
	ck_assert_uint_eq(bf_registry_get(reg, "g", 1)->params->expansion, 0);
	/* expansion=0 means non-scaling, as on RESP and HTTP (it used to be refused here). */
	SAYS("create h expansion=0", "Done\n");
	ck_assert_uint_eq(bf_registry_get(reg, "h", 1)->params->expansion, 0);
	SAYS("create i nonscaling expansion=0", "Done\n");
	SAYS("create j expansion=32768", "Done\n");
}
END_TEST

/* Issue 17 item 3: the smallest error rate, and a capacity no memory could hold answered at
 * once (it took 2.6 s of sizing on the loop). */
START_TEST(create_rate_floor_and_huge_capacity)
{
	struct timespec t0, t1;

	SAYS("create t prob=1e-12", "Done\n");
	SAYS("create x prob=9.9e-13", "Client Error: Error rate below 1e-12 is not supported\n");
	SAYS("create x prob=1e-52", "Client Error: Error rate below 1e-12 is not supported\n");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 3; i++) {
		SAYS("create x capacity=18446744073709551615", "Client Error: Not enough memory\n");
		SAYS("create x capacity=18446744073709551615 type=counting prob=0.9",
		     "Client Error: Not enough memory\n");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	ck_assert_msg(ms < 100, "six refusals took %.1f ms", ms);
	ck_assert_uint_eq(bf_registry_count(reg), 1);
}
END_TEST

START_TEST(create_bad_options_change_nothing)
{
	static const char *const bad[] = {
	    "create x capacity=0",
	    "create x capacity=-1",
	    "create x capacity=abc",
	    "create x capacity=",
	    "create x capacity=1e3",
	    "create x prob=0",
	    "create x prob=1",
	    "create x prob=1.5",
	    "create x prob=nan",
	    "create x prob=0.01x",
	    "create x in_memory=2",
	    "create x in_memory=yes",
	    "create x type=cuckoo",
	    "create x expansion=32769",
	    "create x expansion=99999",
	    "create x nonscaling=1 expansion=4",
	    "create x expansion=2 nonscaling",
	    "create x bogus=1",
	    "create x capacityy=10",
	    "create x nonscaling=2",
	    "create x capacity=99999999999999999999999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(strcmp(say(bad[i]), "Client Error: Bad arguments\n") == 0, "%s -> %s",
			      bad[i], say(bad[i]));
	ck_assert_uint_eq(bf_registry_count(reg), 0);
	SAYS("create bad\x7fname", "Client Error: Bad filter name\n");
	char longname[256] = "create ";
	memset(longname + 7, 'n', 201);
	SAYS(longname, "Client Error: Bad filter name\n");
	longname[7 + 200] = '\0';
	SAYS(longname, "Done\n");		   /* 200 bytes: the limit */
	SAYS("create ../../etc/passwd", "Done\n"); /* a name, never a path */
}
END_TEST

START_TEST(list_and_prefix)
{
	SAYS("list", "START\nEND\n");
	SAYS("create foo capacity=1000 prob=0.01", "Done\n");
	SAYS("create bar capacity=1000 prob=0.001", "Done\n");
	SAYS("create foobar capacity=1000 prob=0.01", "Done\n");
	SAYS("set foo k", "Yes\n");
	const struct bf_filter *foo = bf_registry_get(reg, "foo", 3);
	const struct bf_filter *bar = bf_registry_get(reg, "bar", 3);
	char expect[512];
	snprintf(expect, sizeof(expect),
		 "START\nbar 0.001000 %llu 1000 0\nfoo 0.010000 %llu 1000 1\nfoobar 0.010000 %llu "
		 "1000 0\nEND\n",
		 (unsigned long long)bf_filter_bytes(bar), (unsigned long long)bf_filter_bytes(foo),
		 (unsigned long long)bf_filter_bytes(foo));
	SAYS("list", expect);
	snprintf(expect, sizeof(expect),
		 "START\nfoo 0.010000 %llu 1000 1\nfoobar 0.010000 %llu 1000 0\nEND\n",
		 (unsigned long long)bf_filter_bytes(foo),
		 (unsigned long long)bf_filter_bytes(foo));
	SAYS("list foo", expect);
	SAYS("list zzz", "START\nEND\n");
}
END_TEST

START_TEST(drop_close_clear)
{
	SAYS("create a", "Done\n");
	SAYS("create b", "Done\n");
	SAYS("close a", "Done\n"); /* no server to page it out: it stays in memory */
	SAYS("check a k", "No\n");
	SAYS("drop a", "Done\n");
	SAYS("drop a", "Filter does not exist\n");
	SAYS("check a k", "Filter does not exist\n");
	/* bloomd's clear forgets only a closed ("proxied") filter. */
	SAYS("clear b", "Filter is not proxied. Close it first.\n");
	SAYS("clear nope", "Filter does not exist\n");
	ck_assert_uint_eq(bf_registry_count(reg), 1);
}
END_TEST

/* The server's paging, played by the test: page_out keeps a copy, page_in takes it back. */
static struct bf_filter *paged_copy;

static int page_out_hook(void *arg, struct bf_filter *f)
{
	(void)arg;
	ck_assert_int_eq(bf_filter_clone(f, &paged_copy), 0);
	ck_assert_int_eq(bf_filter_page_out(f), 0);
	return 0;
}

static int page_in_hook(void *arg, struct bf_filter *f)
{
	(void)arg;
	page_ins_started++;
	ck_assert_int_eq(bf_filter_page_in(f, paged_copy), 0);
	paged_copy = NULL;
	return 0; /* "loading": the command runs again */
}

/*
 * bloomd's close and clear: a closed filter stays listed, shows in_memory 0 and its counts,
 * and is loaded again by the next command on its keys, which the front end runs again (no
 * reply the first time; cmd_ctx.paging says which filter). clear forgets a closed one.
 */
START_TEST(close_pages_out_and_next_use_pages_in)
{
	ctx.hooks.page_out = page_out_hook;
	ctx.hooks.page_in = page_in_hook;
	SAYS("create f capacity=1000 prob=0.01", "Done\n");
	SAYS("set f before", "Yes\n");
	/* One false-positive estimate whichever state the filter is in (it was 0 once closed). */
	char fpr_line[64];
	const char *open_info = say("info f"), *at = strstr(open_info, "\nfpr_estimate ");
	ck_assert_ptr_nonnull(at);
	snprintf(fpr_line, sizeof(fpr_line), "%.*s", (int)strcspn(at + 1, "\n") + 2, at);
	ck_assert_str_ne(fpr_line, "\nfpr_estimate 0\n");
	SAYS("close f", "Done\n");
	struct bf_filter *f = bf_registry_get(reg, "f", 1);
	ck_assert(f->paged);
	ck_assert_uint_eq(f->nlayers, 0);
	const char *info = say("info f");
	ck_assert_ptr_nonnull(strstr(info, "\nin_memory 0\npage_ins 0\npage_outs 1\n"));
	ck_assert_msg(strstr(info, fpr_line), "%s not in %s", fpr_line, info);
	ck_assert_ptr_nonnull(strstr(info, "\nsize 1\n"));
	ck_assert_ptr_nonnull(strstr(say("list"), "f 0.010000 "));
	ctx.paging = NULL;
	SAYS("check f before", "");
	ck_assert_ptr_eq(ctx.paging, f);
	ck_assert_int_eq(page_ins_started, 1);
	ctx.paging = NULL;
	SAYS("check f before", "Yes\n");
	ck_assert_ptr_null(ctx.paging);
	ck_assert_ptr_nonnull(strstr(say("info f"), "\nin_memory 1\npage_ins 1\npage_outs 1\n"));
	SAYS("close f", "Done\n");
	SAYS("clear f", "Done\n");
	SAYS("check f before", "Filter does not exist\n");
	bf_filter_free(paged_copy);
	paged_copy = NULL;
}
END_TEST

START_TEST(info_fields)
{
	SAYS("create f capacity=1000 prob=0.01", "Done\n");
	SAYS("set f a", "Yes\n");
	SAYS("set f a", "No\n");
	SAYS("check f a", "Yes\n");
	SAYS("check f b", "No\n");
	const struct bf_filter *f = bf_registry_get(reg, "f", 1);
	char expect[1024];
	snprintf(expect, sizeof(expect),
		 "START\ncapacity 1000\nchecks 2\ncheck_hits 1\ncheck_misses 1\nin_memory 1\n"
		 "page_ins 0\npage_outs 0\nprobability 0.010000\nsets 2\nset_hits 1\n"
		 "set_misses 1\nsize 1\nstorage %llu\ntype bloom\npersist 1\n"
		 "initial_capacity 1000\nexpansion 2\nlayers 1\nfpr_estimate %.6g\n"
		 "deletes 0\ndelete_hits 0\ndelete_misses 0\nttl -1\nEND\n",
		 (unsigned long long)bf_filter_bytes(f), bf_filter_fpr(f));
	SAYS("info f", expect);
	SAYS("info nope", "Filter does not exist\n");
	/* An empty filter's estimate is 0, not "-0" (issue 17 item 11). */
	SAYS("create e", "Done\n");
	ck_assert_ptr_nonnull(strstr(say("info e"), "\nfpr_estimate 0\n"));
}
END_TEST

START_TEST(flush)
{
	SAYS("create f", "Done\n");
	SAYS("flush", "Done\n");
	ck_assert_int_eq(flushes, 1);
	ck_assert_ptr_null(flushed);
	SAYS("flush f", "Done\n");
	ck_assert_int_eq(flushes, 2);
	ck_assert_ptr_eq(flushed, bf_registry_get(reg, "f", 1));
	SAYS("flush nope", "Filter does not exist\n");
	ck_assert_int_eq(flushes, 2);
}
END_TEST

START_TEST(counting_delete)
{
	SAYS("create cf type=counting", "Done\n");
	SAYS("set cf k", "Yes\n");
	SAYS("delete cf k", "Yes\n");
	SAYS("check cf k", "No\n");
	SAYS("d cf k", "No\n");
	SAYS("create plain", "Done\n");
	SAYS("set plain k", "Yes\n");
	SAYS("delete plain k", "Client Error: Not a counting filter\n");
	SAYS("check plain k", "Yes\n");
	SAYS("delete nope k", "Filter does not exist\n");
}
END_TEST

/* A key that tests present in two layers is not deleted (issue 17 item 2). */
START_TEST(counting_delete_ambiguous)
{
	char line[64], k[16];
	int found = -1;

	SAYS("create cf type=counting capacity=4 prob=0.5", "Done\n");
	for (int i = 0; i < 500; i++) {
		snprintf(line, sizeof(line), "set cf k%d", i);
		say(line);
	}
	struct bf_filter *f = bf_registry_get(reg, "cf", 2);
	ck_assert_uint_ge(f->nlayers, 3);
	for (int i = 0; i < 500 && found < 0; i++) {
		int n = snprintf(k, sizeof(k), "k%d", i);
		if (bf_filter_layers_with(f, k, (size_t)n) > 1)
			found = i;
	}
	ck_assert_int_ge(found, 0);
	uint64_t items = bf_filter_items(f);
	snprintf(line, sizeof(line), "delete cf k%d", found);
	SAYS(line, "Client Error: Key is in more than one layer, not deleted\n");
	snprintf(line, sizeof(line), "check cf k%d", found);
	SAYS(line, "Yes\n");
	ck_assert_uint_eq(bf_filter_items(f), items);
}
END_TEST

START_TEST(key_limit_edge)
{
	SAYS("create f", "Done\n");
	SAYS("set f 0123456789abcdef", "Yes\n"); /* 16 bytes: max_key_bytes */
	SAYS("set f 0123456789abcdefg", "Client Error: Key too long\n");
	SAYS("check f 0123456789abcdefg", "Client Error: Key too long\n");
	SAYS("bulk f a 0123456789abcdefg", "Client Error: Key too long\n");
	SAYS("check f a", "No\n"); /* the refused bulk added nothing */
}
END_TEST

START_TEST(full_nonscaling)
{
	SAYS("create f capacity=2 nonscaling", "Done\n");
	SAYS("bulk f a b", "Yes Yes\n");
	SAYS("set f a", "No\n");
	SAYS("set f c", "Client Error: Filter is full\n");
	SAYS("bulk f d e", "Client Error: Filter is full\n");
	SAYS("check f c", "No\n");
}
END_TEST

START_TEST(memory_limit)
{
	/* Room for one filter of capacity 1 (its structure, block and entry), not for two. */
	SAYS("create probe capacity=1", "Done\n");
	uint64_t one = bf_registry_memory(reg);
	SAYS("drop probe", "Done\n");
	bf_registry_set_max_memory(reg, one + one / 2);
	SAYS("create big capacity=100000", "Client Error: Not enough memory\n");
	SAYS("list", "START\nEND\n");
	SAYS("create small capacity=1", "Done\n");
	SAYS("create small2 capacity=1", "Client Error: Not enough memory\n");
}
END_TEST

START_TEST(binary_keys)
{
	SAYS("create f", "Done\n");
	static const char line[] = "set f a\0b";
	proto_buf_reset(&out);
	text_cmd_exec(&ctx, &sess, line, sizeof(line) - 1, &out);
	ck_assert_uint_eq(out.len, 4);
	ck_assert_mem_eq(out.data, "Yes\n", 4);
	SAYS("check f a", "No\n"); /* the key is not cut at the NUL */
	static const char chk[] = "check f a\0b";
	proto_buf_reset(&out);
	text_cmd_exec(&ctx, &sess, chk, sizeof(chk) - 1, &out);
	ck_assert_mem_eq(out.data, "Yes\n", 4);
}
END_TEST

static Suite *text_suite(void)
{
	Suite *s = suite_create("cmd-text");
	TCase *tc = tcase_create("conversation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, create_set_check);
	tcase_add_test(tc, single_key_is_rest_of_line);
	tcase_add_test(tc, multi_and_bulk);
	tcase_add_test(tc, missing_arguments);
	tcase_add_test(tc, unknown_commands);
	tcase_add_test(tc, auth_with_token);
	tcase_add_test(tc, auth_check_compare);
	tcase_add_test(tc, create_options);
	tcase_add_test(tc, create_bad_options_change_nothing);
	tcase_add_test(tc, create_rate_floor_and_huge_capacity);
	tcase_add_test(tc, list_and_prefix);
	tcase_add_test(tc, drop_close_clear);
	tcase_add_test(tc, close_pages_out_and_next_use_pages_in);
	tcase_add_test(tc, info_fields);
	tcase_add_test(tc, flush);
	tcase_add_test(tc, counting_delete);
	tcase_add_test(tc, counting_delete_ambiguous);
	tcase_add_test(tc, key_limit_edge);
	tcase_add_test(tc, full_nonscaling);
	tcase_add_test(tc, memory_limit);
	tcase_add_test(tc, binary_keys);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(text_suite)
