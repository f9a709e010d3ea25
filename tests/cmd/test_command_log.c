/* SPDX-License-Identifier: MIT */
/*
 * The command layer and the write-ahead log: every change to a persistent filter is logged
 * before its reply, replies wait for the LSN they depend on, a failing log refuses changes
 * (and changes nothing), and the records replayed onto an empty registry rebuild the filters
 * exactly (the commands run over the text and RESP front ends).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_record.h"
#include "proto/resp_cmd.h"
#include "proto/text_cmd.h"
#include "tests/check_main.h"
#include "tests/cmd_fixture.h"

static struct cmd_ctx ctx;
static struct cmd_session sess;
static struct proto_buf out;

struct rec {
	int type;
	unsigned char *p;
	size_t len;
};
static struct rec recs[4096];
static size_t nrecs;
static bool log_full;

static uint64_t log_hook(void *arg, int type, const void *p, size_t len)
{
	(void)arg;
	if (log_full || nrecs == sizeof(recs) / sizeof(recs[0]))
		return 0;
	recs[nrecs].type = type;
	recs[nrecs].p = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(recs[nrecs].p);
	memcpy(recs[nrecs].p, p, len);
	recs[nrecs].len = len;
	return ++nrecs;
}

static void setup(void)
{
	cmd_fixture_init(&ctx, 0, 64, 1024);
	ctx.hooks.log = log_hook;
	cmd_session_init(&sess, 1);
	proto_buf_init(&out);
	nrecs = 0;
	log_full = false;
}

static void teardown(void)
{
	for (size_t i = 0; i < nrecs; i++)
		free(recs[i].p);
	proto_buf_free(&out);
	cmd_session_free(&sess);
	cmd_ctx_free(&ctx);
	cmd_fixture_free(&ctx);
}

static const char *say(const char *line)
{
	static char copy[8192];

	proto_buf_reset(&out);
	text_cmd_exec(&ctx, &sess, line, strlen(line), &out);
	ck_assert_uint_lt(out.len, sizeof(copy));
	memcpy(copy, out.data, out.len);
	copy[out.len] = '\0';
	return copy;
}

#define SAYS(line, expect) ck_assert_str_eq(say(line), expect)

static const char *resp(const char *a0, const char *a1, const char *a2, const char *a3)
{
	static char copy[8192];
	struct proto_argv av;
	const char *a[] = {a0, a1, a2, a3};

	proto_argv_init(&av);
	ck_assert_int_eq(proto_argv_reserve(&av, 4), 0);
	for (size_t i = 0; i < 4 && a[i]; i++) {
		av.argv[i] = a[i];
		av.argvlen[i] = strlen(a[i]);
		av.argc = i + 1;
	}
	proto_buf_reset(&out);
	resp_cmd_exec(&ctx, &sess, &av, &out);
	proto_argv_free(&av);
	memcpy(copy, out.data, out.len);
	copy[out.len] = '\0';
	return copy;
}

START_TEST(changes_are_logged_and_replies_wait)
{
	SAYS("create f capacity=100", "Done\n");
	ck_assert_uint_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].type, BF_REC_CREATE);
	ck_assert_uint_eq(ctx.wait_lsn, 1);

	ctx.wait_lsn = 0;
	ctx.durable_lsn = 1;
	SAYS("set f k", "Yes\n");
	ck_assert_uint_eq(nrecs, 2);
	ck_assert_int_eq(recs[1].type, BF_REC_ADD);
	ck_assert_uint_eq(recs[1].len, 8 + 16);
	ck_assert_uint_eq(ctx.wait_lsn, 2);

	/* A duplicate changes nothing (not logged) but its "No" owes to LSN 2. */
	ctx.wait_lsn = 0;
	SAYS("set f k", "No\n");
	ck_assert_uint_eq(nrecs, 2);
	ck_assert_uint_eq(ctx.wait_lsn, 2);

	/* A check: "absent" never waits; "present" waits while the change is not durable. */
	ctx.wait_lsn = 0;
	SAYS("check f other", "No\n");
	ck_assert_uint_eq(ctx.wait_lsn, 0);
	SAYS("check f k", "Yes\n");
	ck_assert_uint_eq(ctx.wait_lsn, 2);
	ctx.wait_lsn = 0;
	ctx.durable_lsn = 2;
	SAYS("check f k", "Yes\n");
	ck_assert_uint_eq(ctx.wait_lsn, 0);

	/* A memory-only filter is never logged, and its replies never wait. */
	SAYS("create m in_memory=1", "Done\n");
	SAYS("set m k", "Yes\n");
	ck_assert_uint_eq(nrecs, 2);
	ck_assert_uint_eq(ctx.wait_lsn, 0);

	SAYS("drop f", "Done\n");
	ck_assert_int_eq(recs[2].type, BF_REC_DROP);
	ck_assert_uint_eq(ctx.wait_lsn, 3);
}
END_TEST

/* While the log cannot write, every change is refused with each protocol's words, and nothing
 * changes; reads go on. */
START_TEST(failed_log_refuses_changes)
{
	SAYS("create f type=counting", "Done\n");
	SAYS("set f k", "Yes\n");
	size_t before = nrecs;
	uint64_t items = bf_filter_items(bf_registry_get(ctx.reg, "f", 1));

	ctx.log_failed = true;
	SAYS("set f k2", "Internal Error\n");
	SAYS("bulk f a b", "Internal Error\n");
	SAYS("delete f k", "Internal Error\n");
	SAYS("create g", "Internal Error\n");
	SAYS("drop f", "Internal Error\n");
	SAYS("check f k", "Yes\n");
	ck_assert_str_eq(resp("BF.ADD", "f", "x", NULL),
			 "-MISCONF blossomd cannot write its write-ahead log; commands that change "
			 "filters are refused until it can (see the server log)\r\n");
	ck_assert_str_eq(resp("BF.EXISTS", "f", "k", NULL), ":1\r\n");
	/* A memory-only filter needs no log. */
	SAYS("create m in_memory=1", "Done\n");
	SAYS("set m k", "Yes\n");

	ck_assert_uint_eq(nrecs, before);
	ck_assert_uint_eq(bf_filter_items(bf_registry_get(ctx.reg, "f", 1)), items);
	ck_assert_ptr_null(bf_registry_get(ctx.reg, "g", 1));
	ctx.log_failed = false;
	SAYS("set f k2", "Yes\n");
	ck_assert_uint_eq(nrecs, before + 1);
}
END_TEST

/* Without a log (wal = off) nothing waits, also for a filter whose snapshot carries an LSN. */
START_TEST(no_log_nothing_waits)
{
	ctx.hooks.log = NULL;
	SAYS("create f", "Done\n");
	SAYS("set f k", "Yes\n");
	struct bf_filter *f = bf_registry_get(ctx.reg, "f", 1);
	f->lsn = 77; /* as loaded from a snapshot written while the log was on */
	SAYS("check f k", "Yes\n");
	SAYS("set f k2", "Yes\n");
	ck_assert_uint_eq(ctx.wait_lsn, 0);
	ck_assert_uint_eq(nrecs, 0);
}
END_TEST

/* A record the log cannot take (out of memory) is never acknowledged as done. */
START_TEST(append_failure_is_an_error)
{
	log_full = true;
	SAYS("create f", "Internal Error\n");
	ck_assert_ptr_null(bf_registry_get(ctx.reg, "f", 1));
}
END_TEST

static void dropping(void *arg, struct bf_filter *f, bool remove_file)
{
	(void)arg;
	(void)f;
	(void)remove_file;
}

/* Plain and counting filters through many commands, then the records replayed onto an empty
 * registry: the same filters, bit for bit and count for count. */
START_TEST(replay_rebuilds_the_filters)
{
	char line[256];

	SAYS("create p capacity=50 prob=0.01", "Done\n");
	SAYS("create c capacity=50 prob=0.01 type=counting", "Done\n");
	SAYS("create gone", "Done\n");
	for (int i = 0; i < 400; i++) {
		snprintf(line, sizeof(line), "bulk p k%d x%d y%d", i, i, i % 7);
		say(line);
		snprintf(line, sizeof(line), "bulk c k%d k%d x%d", i, i % 13, i);
		say(line);
		if (i % 3 == 0) {
			snprintf(line, sizeof(line), "delete c k%d", i);
			say(line);
		}
	}
	SAYS("drop gone", "Done\n");
	resp("BF.ADD", "auto", "one", NULL); /* a RESP auto-create */

	struct bf_registry *r;
	struct bf_replay *rp;
	char why[128];
	ck_assert_int_eq(bf_registry_new(0, &r), 0);
	ck_assert_int_eq(bf_replay_new(r, NULL, dropping, NULL, NULL, NULL, &rp), 0);
	for (size_t i = 0; i < nrecs; i++)
		ck_assert_int_eq(bf_replay_apply(rp, i + 1, recs[i].type, recs[i].p, recs[i].len,
						 why, sizeof(why)),
				 0);
	bf_replay_free(rp);

	ck_assert_uint_eq(bf_registry_count(r), bf_registry_count(ctx.reg));
	const char *names[] = {"p", "c", "auto"};
	for (size_t k = 0; k < 3; k++) {
		const struct bf_filter *f = bf_registry_get(ctx.reg, names[k], strlen(names[k]));
		const struct bf_filter *g = bf_registry_get(r, names[k], strlen(names[k]));
		ck_assert_ptr_nonnull(g);
		ck_assert_uint_eq(bf_filter_items(f), bf_filter_items(g));
		ck_assert_uint_eq(f->nlayers, g->nlayers);
		ck_assert_uint_eq(f->id, g->id);
		for (unsigned l = 0; l < f->nlayers; l++)
			ck_assert_mem_eq(bf_filter_layers(f)[l].blocks,
					 bf_filter_layers(g)[l].blocks,
					 bf_layer_bytes(&bf_filter_layers(f)[l]));
	}
	ck_assert_uint_ge(bf_registry_get(r, "p", 1)->nlayers, 4);
	bf_registry_free(r);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("command-log");
	TCase *tc = tcase_create("log");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, changes_are_logged_and_replies_wait);
	tcase_add_test(tc, failed_log_refuses_changes);
	tcase_add_test(tc, append_failure_is_an_error);
	tcase_add_test(tc, no_log_nothing_waits);
	tcase_add_test(tc, replay_rebuilds_the_filters);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(log_suite)
