/* SPDX-License-Identifier: MIT */
/*
 * The RESP front end as a conversation: argument vectors in, the exact reply bytes out, with a
 * real registry. Expected bytes are RedisBloom's and Redis 7.0.15's (the generic ones were
 * captured from redis-server 7.0.15 itself).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "core/bf_snapshot.h"
#include "proto/client.h"
#include "proto/command.h"
#include "proto/resp_cmd.h"
#include "tests/cmd_fixture.h"

static struct bf_registry *reg;
static struct cmd_ctx ctx;
static struct cmd_session sess;
static struct proto_buf out;
static struct proto_argv av;
static int flushes, flush_rc, created;
static uint64_t seeds;

static int flush_hook(void *arg, struct bf_filter *f, uint64_t *ticket)
{
	(void)arg;
	(void)f;
	(void)ticket;
	flushes++;
	return flush_rc;
}

static void created_hook(void *arg, struct bf_filter *f)
{
	(void)arg;
	(void)f;
	created++;
}

static uint64_t seed_hook(void *arg)
{
	(void)arg;
	return 0x9e3779b97f4a7c15ULL * ++seeds;
}

static void setup_limit(uint64_t max_memory)
{
	cmd_fixture_init(&ctx, max_memory, 16, 1024);
	ctx.hooks =
	    (struct cmd_hooks){.flush = flush_hook, .created = created_hook, .seed = seed_hook};
	ctx.started_unix = 1000;
	ctx.last_save_unix = 1234567890;
	reg = ctx.reg;
	cmd_session_init(&sess, 7);
	proto_buf_init(&out);
	proto_argv_init(&av);
	flushes = flush_rc = created = 0;
	seeds = 0;
}

static void setup(void)
{
	setup_limit(0);
}

static void teardown(void)
{
	proto_argv_free(&av);
	proto_buf_free(&out);
	cmd_session_free(&sess);
	cmd_ctx_free(&ctx); /* a test with a log hook has a record scratch */
	cmd_fixture_free(&ctx);
}

/* ---------------------------------------------------------------------------------------- */
/* Conversation helpers */

/* Run one command of n binary arguments; the reply is in `out`. */
static void runv(size_t n, const char *const *args, const size_t *lens)
{
	ck_assert_int_eq(proto_argv_reserve(&av, n), 0);
	av.maxlen2 = 0;
	for (size_t i = 0; i < n; i++) {
		av.argv[i] = args[i];
		av.argvlen[i] = lens[i];
		if (i >= 2 && lens[i] > av.maxlen2)
			av.maxlen2 = lens[i]; /* as the parser sets it */
	}
	av.argc = n;
	proto_buf_reset(&out);
	resp_cmd_exec(&ctx, &sess, &av, &out);
	ck_assert(!out.failed);
}

/* Run one command of NUL-terminated arguments (the list ends with NULL). */
static void run(const char *first, ...)
{
	const char *args[64];
	size_t lens[64], n = 0;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		ck_assert_uint_lt(n, 64);
		args[n] = a;
		lens[n++] = strlen(a);
	}
	va_end(ap);
	runv(n, args, lens);
}

/* The reply with control bytes escaped, for failure messages. */
static const char *shown(const char *p, size_t n)
{
	static char buf[8192];
	size_t k = 0;

	for (size_t i = 0; i < n && k + 8 < sizeof(buf); i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\r')
			k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\r");
		else if (ch == '\n')
			k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\n");
		else if (ch < 0x20 || ch >= 0x7f)
			k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", ch);
		else
			buf[k++] = (char)ch;
	}
	buf[k] = '\0';
	return buf;
}

static void expect_bytes(const char *want, size_t n)
{
	if (out.len != n || memcmp(out.data, want, n) != 0) {
		char w[8192];
		snprintf(w, sizeof(w), "%s", shown(want, n));
		ck_abort_msg("reply: got \"%s\" want \"%s\"", shown(out.data, out.len), w);
	}
}

/* The reply to the command is exactly the string literal `want`. */
#define SAYS(want, ...)                                                                            \
	do {                                                                                       \
		run(__VA_ARGS__, NULL);                                                            \
		expect_bytes(want, sizeof(want) - 1);                                              \
	} while (0)

/* The reply to the command starts with the string literal `prefix`. */
#define STARTS(prefix, ...)                                                                        \
	do {                                                                                       \
		run(__VA_ARGS__, NULL);                                                            \
		ck_assert_msg(out.len >= sizeof(prefix) - 1 &&                                     \
				  memcmp(out.data, prefix, sizeof(prefix) - 1) == 0,               \
			      "reply \"%s\"", shown(out.data, out.len));                           \
	} while (0)

static bool reply_has(const char *needle)
{
	size_t n = strlen(needle);
	for (size_t i = 0; i + n <= out.len; i++)
		if (memcmp(out.data + i, needle, n) == 0)
			return true;
	return false;
}

static struct bf_filter *filter(const char *name)
{
	return bf_registry_get(reg, name, strlen(name));
}

static const char OOM[] = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

/* ---------------------------------------------------------------------------------------- */
/* BF.RESERVE */

START_TEST(reserve_ok_and_exists)
{
	SAYS("+OK\r\n", "BF.RESERVE", "f", "0.001", "5000");
	struct bf_filter *f = filter("f");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->params->capacity, 5000);
	ck_assert(f->params->error_rate == 0.001);
	ck_assert_uint_eq(f->params->expansion, 2);
	ck_assert_int_eq(f->params->type, BF_TYPE_BLOOM);
	ck_assert(f->params->persist);
	ck_assert_int_eq(created, 1);
	SAYS("-ERR item exists\r\n", "BF.RESERVE", "f", "0.01", "100");
	SAYS("+OK\r\n", "bf.reserve", "g", "0.01", "100", "EXPANSION", "4");
	ck_assert_uint_eq(filter("g")->params->expansion, 4);
	SAYS("+OK\r\n", "Bf.Reserve", "h", "0.01", "100", "nonscaling");
	ck_assert_uint_eq(filter("h")->params->expansion, 0);
	SAYS("+OK\r\n", "BF.RESERVE", "i", "0.01", "100", "EXPANSION", "0");
	ck_assert_uint_eq(filter("i")->params->expansion, 0);
	SAYS("+OK\r\n", "BF.RESERVE", "j", "0.01", "100", "NONSCALING", "EXPANSION", "0");
	SAYS("+OK\r\n", "BF.RESERVE", "k", "0.01", "100", "COUNTING", "EXPANSION", "1");
	ck_assert_int_eq(filter("k")->params->type, BF_TYPE_COUNTING);
	ck_assert_uint_eq(filter("k")->params->expansion, 1);
	SAYS("+OK\r\n", "BF.RESERVE", "m", "0.5", "1", "EXPANSION", "1024");
	ck_assert(filter("m")->params->error_rate == 0.5); /* not capped to 0.25 */
	SAYS("+OK\r\n", "BF.RESERVE", "n", "0x1p-7", "100");
	ck_assert(filter("n")->params->error_rate == 0.0078125);
	/* The largest capacity passes validation (and then meets the memory limit). */
	bf_registry_set_max_memory(reg, 1 << 20);
	SAYS("-OOM command not allowed when used memory > 'maxmemory'.\r\n", "BF.RESERVE", "l",
	     "0.01", "1073741824", "NONSCALING", "COUNTING");
	SAYS(":8\r\n", "DBSIZE");
	ck_assert_int_eq(created, 8);
}
END_TEST

START_TEST(reserve_errors)
{
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", "x", "100");
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", "nan", "100");
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", " 0.1", "100");
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", "0.1 ", "100");
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", "", "100");
	SAYS("-ERR bad error rate\r\n", "BF.RESERVE", "f", "1e-400", "100");
	/* Issue 17 item 3: 1e-52 reserved 292 MB for one key, 1e-54 answered OOM. */
	SAYS("-ERR error rate below 1e-12 is not supported\r\n", "BF.RESERVE", "f", "1e-52", "1");
	SAYS("-ERR error rate below 1e-12 is not supported\r\n", "BF.RESERVE", "f", "1e-54", "1");
	SAYS("-ERR error rate below 1e-12 is not supported\r\n", "BF.RESERVE", "f", "9.99e-13",
	     "1");
	SAYS("-ERR error rate below 1e-12 is not supported\r\n", "BF.INSERT", "f", "ERROR", "1e-20",
	     "ITEMS", "a");
	SAYS(":0\r\n", "DBSIZE");
	SAYS("-ERR error rate must be in the range (0.000000, 1.000000)\r\n", "BF.RESERVE", "f",
	     "0", "100");
	SAYS("-ERR error rate must be in the range (0.000000, 1.000000)\r\n", "BF.RESERVE", "f",
	     "1", "100");
	SAYS("-ERR error rate must be in the range (0.000000, 1.000000)\r\n", "BF.RESERVE", "f",
	     "-0.5", "100");
	SAYS("-ERR error rate must be in the range (0.000000, 1.000000)\r\n", "BF.RESERVE", "f",
	     "inf", "100");
	SAYS("-ERR bad capacity\r\n", "BF.RESERVE", "f", "0.01", "x");
	SAYS("-ERR bad capacity\r\n", "BF.RESERVE", "f", "0.01", "1.5");
	SAYS("-ERR bad capacity\r\n", "BF.RESERVE", "f", "0.01", "0100");
	SAYS("-ERR bad capacity\r\n", "BF.RESERVE", "f", "0.01", "+100");
	SAYS("-ERR bad capacity\r\n", "BF.RESERVE", "f", "0.01", "99999999999999999999");
	SAYS("-ERR capacity must be in the range [1, 1073741824]\r\n", "BF.RESERVE", "f", "0.01",
	     "0");
	SAYS("-ERR capacity must be in the range [1, 1073741824]\r\n", "BF.RESERVE", "f", "0.01",
	     "-5");
	SAYS("-ERR capacity must be in the range [1, 1073741824]\r\n", "BF.RESERVE", "f", "0.01",
	     "1073741825");
	SAYS("-ERR no expansion\r\n", "BF.RESERVE", "f", "0.01", "100", "EXPANSION");
	SAYS("-ERR no expansion\r\n", "BF.RESERVE", "f", "0.01", "100", "NONSCALING", "EXPANSION");
	SAYS("-ERR bad expansion\r\n", "BF.RESERVE", "f", "0.01", "100", "EXPANSION", "x");
	SAYS("-ERR bad expansion\r\n", "BF.RESERVE", "f", "0.01", "100", "EXPANSION", "NONSCALING");
	SAYS("-Nonscaling filters cannot expand\r\n", "BF.RESERVE", "f", "0.01", "100",
	     "NONSCALING", "EXPANSION", "2");
	SAYS("-Nonscaling filters cannot expand\r\n", "BF.RESERVE", "f", "0.01", "100", "EXPANSION",
	     "2", "NONSCALING");
	SAYS("-ERR expansion must be in the range [0, 32768]\r\n", "BF.RESERVE", "f", "0.01", "100",
	     "EXPANSION", "32769");
	SAYS("-ERR expansion must be in the range [0, 32768]\r\n", "BF.RESERVE", "f", "0.01", "100",
	     "EXPANSION", "-1");
	SAYS("-ERR syntax error\r\n", "BF.RESERVE", "f", "0.01", "100", "NONSCALLING");
	SAYS("-ERR syntax error\r\n", "BF.RESERVE", "f", "0.01", "100", "2");
	SAYS("-ERR bad filter name\r\n", "BF.RESERVE", "a b", "0.01", "100");
	SAYS("-ERR bad filter name\r\n", "BF.RESERVE", "", "0.01", "100");
	SAYS("-ERR wrong number of arguments for 'bf.reserve' command\r\n", "BF.RESERVE", "f",
	     "0.01");
	SAYS("-ERR wrong number of arguments for 'bf.reserve' command\r\n", "BF.RESERVE", "f",
	     "0.01", "100", "NONSCALING", "COUNTING", "EXPANSION", "2", "x");
	SAYS(":0\r\n", "DBSIZE");
	ck_assert_int_eq(created, 0);
	/* The smallest rate: one key in one block. */
	SAYS("+OK\r\n", "BF.RESERVE", "t", "1e-12", "1");
	ck_assert_uint_eq(bf_filter_bytes(filter("t")), 64);
}
END_TEST

START_TEST(reserve_name_edge)
{
	char name[BF_NAME_MAX + 2];
	memset(name, 'n', sizeof(name));
	name[BF_NAME_MAX] = '\0';
	SAYS("+OK\r\n", "BF.RESERVE", name, "0.01", "100");
	name[BF_NAME_MAX] = 'n';
	name[BF_NAME_MAX + 1] = '\0';
	SAYS("-ERR bad filter name\r\n", "BF.RESERVE", name, "0.01", "100");
	SAYS("-ERR bad filter name\r\n", "BF.ADD", name, "x");
	SAYS(":0\r\n", "BF.EXISTS", name, "x");
	SAYS(":1\r\n", "DBSIZE");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* BF.ADD, BF.MADD, BF.EXISTS, BF.MEXISTS, BF.CARD */

START_TEST(add_autocreates_with_defaults)
{
	SAYS(":1\r\n", "BF.ADD", "auto", "hello");
	struct bf_filter *f = filter("auto");
	ck_assert_ptr_nonnull(f);
	/* RedisBloom's defaults (capacity 100, error 0.01, expansion 2), not the config's
	 * default_capacity, which HTTP uses. */
	ck_assert_uint_eq(f->params->capacity, 100);
	ck_assert(f->params->error_rate == 0.01);
	SAYS("*1\r\n:100\r\n", "BF.INFO", "auto", "CAPACITY");
	SAYS("*1\r\n:2\r\n", "BF.INFO", "auto", "EXPANSION");
	ck_assert_uint_eq(f->params->expansion, 2);
	ck_assert_int_eq(f->params->type, BF_TYPE_BLOOM);
	ck_assert(f->params->persist);
	ck_assert_uint_eq(f->seed, 0x9e3779b97f4a7c15ULL);
	ck_assert_int_eq(created, 1);
	SAYS(":0\r\n", "BF.ADD", "auto", "hello");
	SAYS(":1\r\n", "bf.add", "auto", "");
	SAYS(":0\r\n", "BF.ADD", "auto", "");
	SAYS(":1\r\n", "BF.EXISTS", "auto", "hello");
	SAYS(":1\r\n", "BF.EXISTS", "auto", "");
	SAYS(":0\r\n", "BF.EXISTS", "auto", "nope");
	SAYS(":0\r\n", "BF.EXISTS", "missing", "hello");
	SAYS(":2\r\n", "BF.CARD", "auto");
	SAYS(":0\r\n", "BF.CARD", "missing");
	ck_assert_int_eq(created, 1);
}
END_TEST

START_TEST(madd_mexists)
{
	SAYS("*3\r\n:1\r\n:1\r\n:0\r\n", "BF.MADD", "m", "a", "b", "a");
	SAYS("*4\r\n:1\r\n:0\r\n:1\r\n:0\r\n", "BF.MEXISTS", "m", "a", "zz", "b", "yy");
	SAYS("*2\r\n:0\r\n:0\r\n", "BF.MEXISTS", "missing", "a", "b");
	SAYS(":2\r\n", "BF.CARD", "m");
	SAYS("*1\r\n:1\r\n", "BF.MADD", "m", "c");
	ck_assert_ptr_null(filter("missing"));
}
END_TEST

START_TEST(binary_items)
{
	const char *a1[] = {"BF.ADD", "bin", "a\0b"};
	const size_t l1[] = {6, 3, 3};
	runv(3, a1, l1);
	expect_bytes(":1\r\n", 4);
	const char *a2[] = {"BF.EXISTS", "bin", "a\0c"};
	const size_t l2[] = {9, 3, 3};
	runv(3, a2, l2);
	expect_bytes(":0\r\n", 4);
	const char *a3[] = {"BF.EXISTS", "bin", "a"};
	const size_t l3[] = {9, 3, 1};
	runv(3, a3, l3);
	expect_bytes(":0\r\n", 4);
	runv(3, a1, l1);
	expect_bytes(":0\r\n", 4);
}
END_TEST

START_TEST(resp3_booleans)
{
	STARTS("%7\r\n", "HELLO", "3");
	ck_assert_int_eq(sess.resp, 3);
	SAYS("#t\r\n", "BF.ADD", "b", "x");
	SAYS("#f\r\n", "BF.ADD", "b", "x");
	SAYS("*2\r\n#f\r\n#t\r\n", "BF.MADD", "b", "x", "y");
	SAYS("#t\r\n", "BF.EXISTS", "b", "y");
	SAYS("#f\r\n", "BF.EXISTS", "missing", "y");
	SAYS("*3\r\n#t\r\n#f\r\n#t\r\n", "BF.MEXISTS", "b", "x", "z", "y");
	SAYS("*1\r\n#f\r\n", "BF.MEXISTS", "missing", "x");
	SAYS("*2\r\n#t\r\n#f\r\n", "BF.INSERT", "b", "ITEMS", "z", "z");
	SAYS(":3\r\n", "BF.CARD", "b");
}
END_TEST

START_TEST(nonscaling_full)
{
	/* Capacity 3: the fourth distinct item does not fit. */
	SAYS("+OK\r\n", "BF.RESERVE", "n", "0.001", "3", "NONSCALING");
	SAYS("*5\r\n:1\r\n:1\r\n:0\r\n:1\r\n-ERR non scaling filter is full\r\n", "BF.MADD", "n",
	     "a", "b", "a", "c", "d", "e");
	SAYS("-ERR non scaling filter is full\r\n", "BF.ADD", "n", "d");
	SAYS(":0\r\n", "BF.ADD", "n", "a"); /* present: not refused */
	SAYS("*2\r\n:0\r\n-ERR non scaling filter is full\r\n", "BF.INSERT", "n", "ITEMS", "b",
	     "zz", "a");
	SAYS(":3\r\n", "BF.CARD", "n");
	SAYS(":0\r\n", "BF.EXISTS", "n", "d");
	SAYS(":0\r\n", "BF.EXISTS", "n", "e");
	ck_assert_uint_eq(filter("n")->nlayers, 1);
	ck_assert_uint_eq(ctx.errors, 3);
}
END_TEST

START_TEST(item_length_edge)
{
	/* max_key_bytes is 16. */
	SAYS(":1\r\n", "BF.ADD", "e", "0123456789abcdef");
	SAYS("-ERR item too long\r\n", "BF.ADD", "e", "0123456789abcdefX");
	SAYS(":1\r\n", "BF.EXISTS", "e", "0123456789abcdef");
	SAYS("-ERR item too long\r\n", "BF.EXISTS", "e", "0123456789abcdefX");
	SAYS("-ERR item too long\r\n", "BF.MEXISTS", "e", "a", "0123456789abcdefX");
	/* Refused before anything changes: no auto-create, no partial add. */
	SAYS("-ERR item too long\r\n", "BF.ADD", "new", "0123456789abcdefX");
	SAYS("-ERR item too long\r\n", "BF.MADD", "e", "fresh", "0123456789abcdefX");
	SAYS("-ERR item too long\r\n", "BF.INSERT", "new2", "ITEMS", "0123456789abcdefX");
	SAYS(":0\r\n", "EXISTS", "new", "new2");
	SAYS(":0\r\n", "BF.EXISTS", "e", "fresh");
	SAYS(":1\r\n", "BF.CARD", "e");
	SAYS("+OK\r\n", "BF.RESERVE", "cnt", "0.01", "100", "COUNTING");
	SAYS("-ERR item too long\r\n", "BF.DEL", "cnt", "0123456789abcdefX");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* BF.INSERT */

START_TEST(insert_options)
{
	SAYS("*2\r\n:1\r\n:1\r\n", "BF.INSERT", "i", "CAPACITY", "500", "ERROR", "0.001",
	     "EXPANSION", "4", "ITEMS", "a", "b");
	struct bf_filter *f = filter("i");
	ck_assert_uint_eq(f->params->capacity, 500);
	ck_assert(f->params->error_rate == 0.001);
	ck_assert_uint_eq(f->params->expansion, 4);
	/* Options of an existing filter are ignored, as in RedisBloom. */
	SAYS("*1\r\n:0\r\n", "BF.INSERT", "i", "CAPACITY", "7", "NONSCALING", "ITEMS", "a");
	ck_assert_uint_eq(f->params->capacity, 500);
	SAYS("*1\r\n:1\r\n", "bf.insert", "ns", "nonscaling", "items", "a");
	ck_assert_uint_eq(filter("ns")->params->expansion, 0);
	SAYS("*1\r\n:1\r\n", "BF.INSERT", "ns2", "EXPANSION", "0", "ITEMS", "a");
	ck_assert_uint_eq(filter("ns2")->params->expansion, 0);
	SAYS("*1\r\n:1\r\n", "BF.INSERT", "ns3", "EXPANSION", "3", "NONSCALING", "ITEMS", "a");
	ck_assert_uint_eq(filter("ns3")->params->expansion, 0);
	SAYS("*1\r\n:1\r\n", "BF.INSERT", "cnt", "COUNTING", "ITEMS", "a");
	ck_assert_int_eq(filter("cnt")->params->type, BF_TYPE_COUNTING);
	SAYS("*1\r\n:1\r\n", "BF.INSERT", "dflt", "ITEMS", "a");
	ck_assert_uint_eq(filter("dflt")->params->capacity, 100);
	ck_assert(filter("dflt")->params->error_rate == 0.01);
	/* Item words after ITEMS are items, even when they look like options. */
	SAYS("*2\r\n:1\r\n:1\r\n", "BF.INSERT", "w", "ITEMS", "NOCREATE", "ITEMS");
	SAYS(":1\r\n", "BF.EXISTS", "w", "NOCREATE");
}
END_TEST

START_TEST(insert_nocreate)
{
	SAYS("-ERR not found\r\n", "BF.INSERT", "nc", "NOCREATE", "ITEMS", "a");
	SAYS(":0\r\n", "EXISTS", "nc");
	SAYS(":1\r\n", "BF.ADD", "nc", "a");
	SAYS("*2\r\n:0\r\n:1\r\n", "BF.INSERT", "nc", "NOCREATE", "ITEMS", "a", "b");
}
END_TEST

START_TEST(insert_errors)
{
	SAYS("-Bad error rate\r\n", "BF.INSERT", "f", "ERROR", "x", "ITEMS", "a");
	SAYS("-Bad error rate\r\n", "BF.INSERT", "f", "ERROR", "0", "ITEMS", "a");
	SAYS("-Bad error rate\r\n", "BF.INSERT", "f", "ERROR", "1", "ITEMS", "a");
	SAYS("-Bad capacity\r\n", "BF.INSERT", "f", "CAPACITY", "0", "ITEMS", "a");
	SAYS("-Bad capacity\r\n", "BF.INSERT", "f", "CAPACITY", "x", "ITEMS", "a");
	SAYS("-Bad capacity\r\n", "BF.INSERT", "f", "CAPACITY", "1073741825", "ITEMS", "a");
	SAYS("-Bad expansion\r\n", "BF.INSERT", "f", "EXPANSION", "x", "ITEMS", "a");
	SAYS("-Bad expansion\r\n", "BF.INSERT", "f", "EXPANSION", "-1", "ITEMS", "a");
	SAYS("-Bad expansion\r\n", "BF.INSERT", "f", "EXPANSION", "32769", "ITEMS", "a");
	SAYS("-Unknown argument received\r\n", "BF.INSERT", "f", "BOGUS", "ITEMS", "a");
	SAYS("-ERR wrong number of arguments for 'bf.insert' command\r\n", "BF.INSERT", "f",
	     "ITEMS");
	SAYS("-ERR wrong number of arguments for 'bf.insert' command\r\n", "BF.INSERT", "f",
	     "CAPACITY", "10", "NONSCALING");
	SAYS("-ERR wrong number of arguments for 'bf.insert' command\r\n", "BF.INSERT", "f",
	     "NONSCALING", "ERROR");
	SAYS("-ERR wrong number of arguments for 'bf.insert' command\r\n", "BF.INSERT", "f",
	     "NOCREATE", "CAPACITY");
	SAYS("-ERR wrong number of arguments for 'bf.insert' command\r\n", "BF.INSERT", "f",
	     "ITEMS");
	SAYS("-ERR bad filter name\r\n", "BF.INSERT", "a b", "ITEMS", "x");
	SAYS(":0\r\n", "DBSIZE");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* BF.INFO */

/* Expected full BF.INFO reply of filter f. */
static const char *info_reply(const struct bf_filter *f, int resp)
{
	static char buf[512];
	char exp[32];

	if (f->params->expansion)
		snprintf(exp, sizeof(exp), ":%u\r\n", f->params->expansion);
	else
		snprintf(exp, sizeof(exp), "%s", resp == 3 ? "_\r\n" : "$-1\r\n");
	snprintf(buf, sizeof(buf),
		 "%s+Capacity\r\n:%llu\r\n+Size\r\n:%llu\r\n+Number of filters\r\n:%u\r\n"
		 "+Number of items inserted\r\n:%llu\r\n+Expansion rate\r\n%s",
		 resp == 3 ? "%5\r\n" : "*10\r\n", (unsigned long long)bf_filter_capacity(f),
		 (unsigned long long)bf_filter_bytes(f), f->nlayers,
		 (unsigned long long)bf_filter_items(f), exp);
	return buf;
}

static void expect_str(const char *want)
{
	expect_bytes(want, strlen(want));
}

START_TEST(info_resp2)
{
	char want[128];

	SAYS("+OK\r\n", "BF.RESERVE", "f", "0.01", "100");
	SAYS("*3\r\n:1\r\n:1\r\n:1\r\n", "BF.MADD", "f", "a", "b", "c");
	struct bf_filter *f = filter("f");
	run("BF.INFO", "f", NULL);
	expect_str(info_reply(f, 2));
	run("BF.INFO", "f", "CAPACITY", NULL);
	expect_str("*1\r\n:100\r\n");
	run("bf.info", "f", "size", NULL);
	snprintf(want, sizeof(want), "*1\r\n:%llu\r\n", (unsigned long long)bf_filter_bytes(f));
	expect_str(want);
	ck_assert_uint_gt(bf_filter_bytes(f), 0);
	SAYS("*1\r\n:1\r\n", "BF.INFO", "f", "Filters");
	SAYS("*1\r\n:3\r\n", "BF.INFO", "f", "ITEMS");
	SAYS("*1\r\n:2\r\n", "BF.INFO", "f", "EXPANSION");
	SAYS("-Invalid information value\r\n", "BF.INFO", "f", "bogus");
	SAYS("-ERR not found\r\n", "BF.INFO", "missing");
	SAYS("-ERR not found\r\n", "BF.INFO", "missing", "CAPACITY");
	SAYS("-ERR wrong number of arguments for 'bf.info' command\r\n", "BF.INFO", "f", "a", "b");

	/* Grown: two layers, capacity 100 + 200. */
	for (int i = 0; i < 150; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		run("BF.ADD", "f", k, NULL);
	}
	ck_assert_uint_eq(f->nlayers, 2);
	SAYS("*1\r\n:300\r\n", "BF.INFO", "f", "CAPACITY");
	SAYS("*1\r\n:2\r\n", "BF.INFO", "f", "FILTERS");
	run("BF.INFO", "f", NULL);
	expect_str(info_reply(f, 2));

	SAYS("+OK\r\n", "BF.RESERVE", "ns", "0.01", "100", "NONSCALING");
	SAYS("*1\r\n$-1\r\n", "BF.INFO", "ns", "EXPANSION");
	run("BF.INFO", "ns", NULL);
	expect_str(info_reply(filter("ns"), 2));
	ck_assert(reply_has("+Expansion rate\r\n$-1\r\n"));
}
END_TEST

START_TEST(info_resp3)
{
	char want[128];

	STARTS("%7\r\n", "HELLO", "3");
	SAYS("+OK\r\n", "BF.RESERVE", "f", "0.01", "100", "EXPANSION", "3");
	SAYS("*2\r\n#t\r\n#t\r\n", "BF.MADD", "f", "a", "b");
	struct bf_filter *f = filter("f");
	run("BF.INFO", "f", NULL);
	expect_str(info_reply(f, 3));
	ck_assert(reply_has("%5\r\n+Capacity\r\n:100\r\n+Size\r\n"));
	ck_assert(reply_has("+Number of filters\r\n:1\r\n+Number of items inserted\r\n:2\r\n"
			    "+Expansion rate\r\n:3\r\n"));
	SAYS("%1\r\n+Capacity\r\n:100\r\n", "BF.INFO", "f", "capacity");
	snprintf(want, sizeof(want), "%%1\r\n+Size\r\n:%llu\r\n",
		 (unsigned long long)bf_filter_bytes(f));
	run("BF.INFO", "f", "SIZE", NULL);
	expect_str(want);
	SAYS("%1\r\n+Number of filters\r\n:1\r\n", "BF.INFO", "f", "FILTERS");
	SAYS("%1\r\n+Number of items inserted\r\n:2\r\n", "BF.INFO", "f", "ITEMS");
	SAYS("%1\r\n+Expansion rate\r\n:3\r\n", "BF.INFO", "f", "EXPANSION");
	SAYS("+OK\r\n", "BF.RESERVE", "ns", "0.01", "100", "NONSCALING");
	SAYS("%1\r\n+Expansion rate\r\n_\r\n", "BF.INFO", "ns", "EXPANSION");
	run("BF.INFO", "ns", NULL);
	expect_str(info_reply(filter("ns"), 3));
	ck_assert(reply_has("+Expansion rate\r\n_\r\n"));
	SAYS("-Invalid information value\r\n", "BF.INFO", "f", "x");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* BF.DEL (extension) */

START_TEST(del_counting)
{
	SAYS("+OK\r\n", "BF.RESERVE", "c", "0.01", "100", "COUNTING");
	SAYS(":1\r\n", "BF.ADD", "c", "x");
	SAYS(":0\r\n", "BF.ADD", "c", "x"); /* counted again: takes two deletes */
	SAYS(":2\r\n", "BF.CARD", "c");
	SAYS(":1\r\n", "BF.DEL", "c", "x");
	SAYS(":1\r\n", "BF.EXISTS", "c", "x");
	SAYS(":1\r\n", "BF.DEL", "c", "x");
	SAYS(":0\r\n", "BF.EXISTS", "c", "x");
	SAYS(":0\r\n", "BF.DEL", "c", "x");
	SAYS(":0\r\n", "BF.CARD", "c");
	SAYS("-ERR not found\r\n", "BF.DEL", "missing", "x");
	SAYS(":1\r\n", "BF.ADD", "plain", "x");
	SAYS("-ERR not a counting filter\r\n", "BF.DEL", "plain", "x");
	SAYS(":1\r\n", "BF.EXISTS", "plain", "x");
	SAYS("-ERR wrong number of arguments for 'bf.del' command\r\n", "BF.DEL", "c");
	STARTS("%7\r\n", "HELLO", "3");
	SAYS("#t\r\n", "BF.ADD", "c", "y");
	SAYS("#t\r\n", "BF.DEL", "c", "y");
	SAYS("#f\r\n", "BF.DEL", "c", "y");
}
END_TEST

/*
 * A key that tests present in two layers of a scalable counting filter: deleting it could take
 * another key's counts, so BF.DEL refuses and changes nothing (issue 17 item 2). At a 50 %
 * rate with layers of 4 keys, most old keys are ambiguous once the filter has grown.
 */
START_TEST(del_ambiguous_refused)
{
	char k[16];
	int refused = -1;

	SAYS("+OK\r\n", "BF.RESERVE", "c", "0.5", "4", "COUNTING");
	for (int i = 0; i < 64; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		run("BF.ADD", "c", k, NULL);
	}
	ck_assert_uint_ge(filter("c")->nlayers, 3);
	for (int i = 0; i < 64 && refused < 0; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		run("BF.DEL", "c", k, NULL);
		if (out.len > 0 && out.data[0] == '-')
			refused = i;
		else
			run("BF.ADD", "c", k, NULL); /* put it back: every key stays in */
	}
	ck_assert_int_ge(refused, 0);
	snprintf(k, sizeof(k), "k%d", refused);
	uint64_t items = bf_filter_items(filter("c"));
	SAYS("-ERR item is in more than one sub-filter, not deleted\r\n", "BF.DEL", "c", k);
	SAYS(":1\r\n", "BF.EXISTS", "c", k);
	ck_assert_uint_eq(bf_filter_items(filter("c")), items);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* BF.SCANDUMP / BF.LOADCHUNK */

/* One chunk of a dump, copied out of the reply. */
struct chunk {
	long long iter;
	char *data;
	size_t len;
};

/* Parse "*2\r\n:<iter>\r\n$<len>\r\n<data>\r\n" from out. */
static struct chunk parse_chunk(void)
{
	struct chunk ch = {0};
	char *p = out.data, *end = out.data + out.len;

	ck_assert_msg(out.len > 4 && memcmp(p, "*2\r\n:", 5) == 0, "reply \"%s\"",
		      shown(out.data, out.len < 200 ? out.len : 200));
	p += 5;
	ch.iter = strtoll(p, &p, 10);
	ck_assert(memcmp(p, "\r\n$", 3) == 0);
	p += 3;
	ch.len = (size_t)strtoull(p, &p, 10);
	ck_assert(memcmp(p, "\r\n", 2) == 0);
	p += 2;
	ck_assert(p + ch.len + 2 == end);
	ch.data = malloc(ch.len ? ch.len : 1);
	ck_assert_ptr_nonnull(ch.data);
	memcpy(ch.data, p, ch.len);
	return ch;
}

/* Dump filter src into a malloc'd array of chunks (the header first), count in *n. */
static struct chunk *dump(const char *src, size_t *n)
{
	struct chunk *v = NULL;
	size_t k = 0;
	long long iter = 0;

	for (;;) {
		char it[32];
		snprintf(it, sizeof(it), "%lld", iter);
		run("BF.SCANDUMP", src, it, NULL);
		struct chunk ch = parse_chunk();
		if (ch.iter == 0) {
			ck_assert_uint_eq(ch.len, 0);
			free(ch.data);
			break;
		}
		v = realloc(v, (k + 1) * sizeof(*v));
		ck_assert_ptr_nonnull(v);
		v[k++] = ch;
		iter = ch.iter;
	}
	*n = k;
	return v;
}

static void load(const char *dst, const struct chunk *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char it[32];
		snprintf(it, sizeof(it), "%lld", v[i].iter);
		const char *args[] = {"BF.LOADCHUNK", dst, it, v[i].data};
		const size_t lens[] = {12, strlen(dst), strlen(it), v[i].len};
		runv(4, args, lens);
		expect_bytes("+OK\r\n", 5);
	}
}

static void free_chunks(struct chunk *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].data);
	free(v);
}

/* Both filters answer every probe the same, and say what their info says. */
static void same_answers(const char *a, const char *b, size_t nkeys)
{
	struct bf_filter *fa = filter(a), *fb = filter(b);
	char key[32];

	ck_assert_ptr_nonnull(fa);
	ck_assert_ptr_nonnull(fb);
	for (size_t i = 0; i < 2 * nkeys; i++) {
		int n = snprintf(key, sizeof(key), "key-%zu", i);
		ck_assert_int_eq(bf_filter_check(fa, key, (size_t)n),
				 bf_filter_check(fb, key, (size_t)n));
	}
	char info_a[512];
	run("BF.INFO", a, NULL);
	ck_assert_uint_lt(out.len, sizeof(info_a));
	memcpy(info_a, out.data, out.len);
	size_t la = out.len;
	run("BF.INFO", b, NULL);
	expect_bytes(info_a, la);
	ck_assert_uint_eq(fa->seed, fb->seed);
	ck_assert_int_eq(fa->params->type, fb->params->type);
	ck_assert_uint_eq(fa->params->persist, fb->params->persist);
	for (unsigned l = 0; l < fa->nlayers; l++) {
		ck_assert_uint_eq(bf_filter_layers(fa)[l].items, bf_filter_layers(fb)[l].items);
		ck_assert_mem_eq(bf_filter_layers(fa)[l].blocks, bf_filter_layers(fb)[l].blocks,
				 bf_layer_bytes(&bf_filter_layers(fa)[l]));
	}
}

START_TEST(dump_roundtrip_100k)
{
	enum { N = 100000 };
	char key[32];

	/* Made first, "held" holds the params' shared copy (and is charged it): src and its copy
	 * then cost alike. */
	SAYS("+OK\r\n", "BF.RESERVE", "held", "0.01", "10000");
	uint64_t held = bf_registry_memory(reg);
	SAYS("+OK\r\n", "BF.RESERVE", "src", "0.01", "10000");
	struct bf_filter *src = filter("src");
	for (size_t i = 0; i < N; i++) {
		int n = snprintf(key, sizeof(key), "key-%zu", i);
		ck_assert_int_ge(bf_filter_add(src, key, (size_t)n), 0);
	}
	ck_assert_uint_ge(src->nlayers, 3);

	size_t n;
	struct chunk *v = dump("src", &n);
	ck_assert_uint_eq(v[0].iter, 1);
	ck_assert_uint_ge(n, 1 + src->nlayers);
	created = 0;
	uint64_t mem = bf_registry_memory(reg);
	load("copy", v, n);
	ck_assert_int_eq(created, 1);
	/* As src cost: their names fit pieces of one size (core/bf_pool.h). */
	ck_assert_uint_eq(bf_registry_memory(reg) - mem, mem - held);
	ck_assert_ptr_eq(bf_filter_name(filter("copy")), (const char *)(filter("copy") + 1));
	same_answers("src", "copy", N);
	for (size_t i = 0; i < N; i++) {
		int k = snprintf(key, sizeof(key), "key-%zu", i);
		ck_assert_int_eq(bf_filter_check(filter("copy"), key, (size_t)k), 1);
	}
	SAYS(":1\r\n", "BF.EXISTS", "copy", "key-99999");
	ck_assert_uint_eq(bf_filter_cost(filter("copy")), bf_filter_cost(src));

	/* The copy keeps working as a filter: it grows like the source. */
	for (size_t i = N; i < 2 * N; i++) {
		int k = snprintf(key, sizeof(key), "key-%zu", i);
		ck_assert_int_eq(bf_filter_add(filter("copy"), key, (size_t)k),
				 bf_filter_add(src, key, (size_t)k));
	}
	same_answers("src", "copy", N);

	/* A header on an existing name is a data chunk there, and a bad one. */
	const char *args[] = {"BF.LOADCHUNK", "copy", "1", v[0].data};
	const size_t lens[] = {12, 4, 1, v[0].len};
	runv(4, args, lens);
	expect_str("-ERR received bad data\r\n");
	free_chunks(v, n);
}
END_TEST

START_TEST(dump_roundtrip_kinds)
{
	char key[32];

	/* Counting, non-scaling, memory-only, and a fresh empty one. */
	SAYS("+OK\r\n", "BF.RESERVE", "c", "0.001", "3000", "COUNTING", "EXPANSION", "3");
	SAYS("+OK\r\n", "BF.RESERVE", "ns", "0.05", "5000", "NONSCALING");
	SAYS("+OK\r\n", "BF.RESERVE", "empty", "0.01", "10");
	struct bf_params mem = *filter("ns")->params;
	mem.persist = false;
	ck_assert_int_eq(bf_filter_set_params(filter("ns"), &mem), 0);
	for (int i = 0; i < 10000; i++) {
		int n = snprintf(key, sizeof(key), "key-%d", i);
		ck_assert_int_ge(bf_filter_add(filter("c"), key, (size_t)n), 0);
		if (i < 5000)
			bf_filter_add(filter("ns"), key, (size_t)n);
	}
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "key-%d", i);
		ck_assert_int_eq(bf_filter_delete(filter("c"), key, (size_t)n), 1);
	}
	const char *names[][2] = {{"c", "c2"}, {"ns", "ns2"}, {"empty", "empty2"}};
	for (size_t k = 0; k < 3; k++) {
		size_t n;
		struct chunk *v = dump(names[k][0], &n);
		load(names[k][1], v, n);
		same_answers(names[k][0], names[k][1], 10000);
		free_chunks(v, n);
	}
	ck_assert(!filter("ns2")->params->persist);
	ck_assert_int_eq(filter("c2")->params->type, BF_TYPE_COUNTING);
	SAYS(":1\r\n", "BF.DEL", "c2", "key-5000");
	SAYS("*1\r\n$-1\r\n", "BF.INFO", "ns2", "EXPANSION");
}
END_TEST

START_TEST(scandump_edges)
{
	SAYS("-ERR not found\r\n", "BF.SCANDUMP", "missing", "0");
	SAYS(":1\r\n", "BF.ADD", "f", "x");
	SAYS("-Second argument must be numeric\r\n", "BF.SCANDUMP", "f", "x");
	SAYS("-Second argument must be numeric\r\n", "BF.SCANDUMP", "f", "1.0");
	SAYS("*2\r\n:0\r\n$0\r\n\r\n", "BF.SCANDUMP", "f", "-1");
	SAYS("*2\r\n:0\r\n$0\r\n\r\n", "BF.SCANDUMP", "f", "999999999");
	SAYS("-ERR wrong number of arguments for 'bf.scandump' command\r\n", "BF.SCANDUMP", "f");
	/* The data of a one-layer filter comes in one chunk ending at 1 + its bytes. */
	struct bf_filter *f = filter("f");
	run("BF.SCANDUMP", "f", "1", NULL);
	struct chunk ch = parse_chunk();
	ck_assert_int_eq(ch.iter, 1 + (long long)bf_filter_bytes(f));
	ck_assert_uint_eq(ch.len, bf_filter_bytes(f));
	ck_assert_mem_eq(ch.data, bf_filter_layers(f)[0].blocks, bf_filter_bytes(f));
	free(ch.data);
	/* A chunk can start anywhere inside a layer. */
	run("BF.SCANDUMP", "f", "65", NULL);
	ch = parse_chunk();
	ck_assert_int_eq(ch.iter, 1 + (long long)bf_filter_bytes(f));
	ck_assert_uint_eq(ch.len, bf_filter_bytes(f) - 64);
	free(ch.data);
}
END_TEST

START_TEST(loadchunk_data_errors)
{
	SAYS("+OK\r\n", "BF.RESERVE", "f", "0.01", "1000");
	struct bf_filter *f = filter("f");
	size_t bytes = bf_filter_bytes(f);
	char it[32], *zeros = calloc(1, bytes + 64);
	ck_assert_ptr_nonnull(zeros);

	SAYS("-ERR Second argument must be numeric\r\n", "BF.LOADCHUNK", "f", "x", "data");
	SAYS("-ERR not found\r\n", "BF.LOADCHUNK", "missing", "5", "data");
	SAYS("-ERR received bad data\r\n", "BF.LOADCHUNK", "f", "0", "data");
	SAYS("-ERR received bad data\r\n", "BF.LOADCHUNK", "f", "-3", "data");
	SAYS("-ERR received bad data\r\n", "BF.LOADCHUNK", "f", "3", "data");
	SAYS("-ERR invalid offset - no link found\r\n", "BF.LOADCHUNK", "f", "4", "data");
	SAYS("+OK\r\n", "BF.LOADCHUNK", "f", "5", "data");
	/* Past the last layer. */
	snprintf(it, sizeof(it), "%zu", bytes + 1 + 4);
	SAYS("-ERR invalid offset - no link found\r\n", "BF.LOADCHUNK", "f", it, "data");
	/* Longer than what is left of its layer. */
	snprintf(it, sizeof(it), "%zu", bytes + 2);
	const char *args[] = {"BF.LOADCHUNK", "f", it, zeros};
	size_t lens[] = {12, 1, strlen(it), bytes + 1};
	runv(4, args, lens);
	expect_str("-ERR invalid chunk - Too big for current filter\r\n");
	/* A chunk that fits exactly is taken; an empty one at a valid offset too. */
	SAYS(":1\r\n", "BF.ADD", "f", "x");
	snprintf(it, sizeof(it), "%zu", bytes + 1);
	lens[2] = strlen(it);
	lens[3] = bytes;
	runv(4, args, lens);
	expect_str("+OK\r\n");
	SAYS(":0\r\n", "BF.EXISTS", "f", "x"); /* the zeros replaced the bits */
	SAYS("+OK\r\n", "BF.LOADCHUNK", "f", "1", "");
	SAYS("-ERR wrong number of arguments for 'bf.loadchunk' command\r\n", "BF.LOADCHUNK", "f",
	     "1");
	free(zeros);
}
END_TEST

/* The header of filter f, as SCANDUMP gives it. */
static struct chunk header_of(const char *name)
{
	run("BF.SCANDUMP", name, "0", NULL);
	struct chunk ch = parse_chunk();
	ck_assert_int_eq(ch.iter, 1);
	return ch;
}

/* Load header h (len bytes) as "dst"; the reply must start with prefix and nothing change. */
static void header_refused(const void *h, size_t len, const char *prefix)
{
	size_t before = bf_registry_count(reg);
	uint64_t mem = bf_registry_memory(reg);
	const char *args[] = {"BF.LOADCHUNK", "dst", "1", h};
	const size_t lens[] = {12, 3, 1, len};

	runv(4, args, lens);
	ck_assert_msg(out.len >= strlen(prefix) && memcmp(out.data, prefix, strlen(prefix)) == 0,
		      "reply \"%s\" for a %zu-byte header", shown(out.data, out.len), len);
	ck_assert_uint_eq(bf_registry_count(reg), before);
	ck_assert_uint_eq(bf_registry_memory(reg), mem);
	ck_assert_ptr_null(filter("dst"));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The header checksum: XXH3-64 of the bytes before it (core/bf_snapshot.h). */
#define HEADER_SUM 1688

/* Rewrite the checksum after a deliberate change, so the field checks themselves are hit. */
static void reseal(unsigned char *h)
{
	put64(h + HEADER_SUM, XXH3_64bits(h, HEADER_SUM));
}

/*
 * The header chunk is the snapshot header, judged by the snapshot reader's rules: every
 * truncation, flipped bit and inconsistent field is refused, and nothing changes.
 */
START_TEST(loadchunk_corrupt_headers)
{
	char key[16];

	SAYS("+OK\r\n", "BF.RESERVE", "src", "0.01", "100");
	for (int i = 0; i < 500; i++) {
		int n = snprintf(key, sizeof(key), "k%d", i);
		bf_filter_add(filter("src"), key, (size_t)n);
	}
	ck_assert_uint_eq(filter("src")->nlayers, 3);
	struct chunk hc = header_of("src");
	unsigned char *h = (unsigned char *)hc.data, *m = malloc(hc.len + 64);
	size_t len = hc.len;
	ck_assert_uint_eq(len, BF_SNAPSHOT_HEADER_LEN);
	ck_assert_ptr_nonnull(m);

	/* Resealing an untouched copy changes nothing (so the refusals below are the fields'). */
	memcpy(m, h, len);
	reseal(m);
	ck_assert_mem_eq(m, h, len);
	/* Truncations and one extra byte. */
	for (size_t n = 0; n < len; n += n < HEADER_SUM + 16 ? 1 : 97)
		header_refused(h, n, "-ERR received bad data\r\n");
	memcpy(m, h, len);
	m[len] = 0;
	header_refused(m, len + 1, "-ERR received bad data\r\n");
	/* Every single flipped bit. */
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(m, h, len);
			m[i] ^= (unsigned char)(1u << bit);
			header_refused(m, len, "-ERR received bad data\r\n");
		}
	}
	/* Fields that are wrong although the checksum is right. */
	static const struct {
		size_t off;
		uint64_t val;
		unsigned bytes;
	} bad[] = {
	    {8, 5, 4},				  /* format version */
	    {12, 8192, 4},			  /* header length */
	    {16, 2, 4},				  /* type */
	    {20, 0, 4},				  /* expansion 0 with three layers */
	    {20, 3, 4},				  /* expansion that does not match the layers */
	    {20, 2000, 4},			  /* expansion out of range */
	    {24, 0, 8},				  /* capacity 0 */
	    {24, 101, 8},			  /* capacity vs layers */
	    {32, 0x7ff8000000000000ULL, 8},	  /* error rate NaN */
	    {32, 0x3ff0000000000000ULL, 8},	  /* error rate 1 */
	    {32, 0, 8},				  /* error rate 0 */
	    {48, 2, 4},				  /* persist flag */
	    {52, 0, 4},				  /* no layers */
	    {52, 2, 4},				  /* layer count vs the layer table */
	    {52, 33, 4},			  /* too many layers */
	    {56, 5, 8},				  /* total items vs the layers' (issue 17 item 6) */
	    {72, 64, 8},			  /* body length */
	    {160, 0, 4},			  /* empty name */
	    {160, 201, 4},			  /* name too long */
	    {164, ' ', 1},			  /* name with a space */
	    {200, 1, 1},			  /* name padding */
	    {368, 1, 8},			  /* layer 0 blocks */
	    {368 + 8, 99, 8},			  /* layer 0 capacity */
	    {368 + 16, 101, 8},			  /* layer 0 items above capacity */
	    {368 + 24, 0x3f847ae147ae147bULL, 8}, /* layer 0 error rate (0.01 for 0.002) */
	    {368 + 32, 0, 1},			  /* layer 0 b */
	    {368 + 32, 9, 1},			  /* layer 0 b */
	    {368 + 33, 1, 1},			  /* layer 0 counting */
	    {368 + 34, 1, 1},			  /* layer 0 padding */
	    {368 + 40 + 8, 400, 8},		  /* layer 1 capacity */
	    {368 + 80 + 0, 0xffffffffffULL, 8},	  /* layer 2 blocks */
	    {368 + 120, 1, 8},			  /* unused layer 3 */
	    {8, 1, 4},				  /* version 1: its checksum is elsewhere */
	    {8, 2, 4},				  /* version 2: so is its checksum */
	    {8, 3, 4},				  /* version 3: and its */
	    {1680, 0x3fe0000000000000ULL, 8},	  /* first share 0.5: not the layers' */
	    {HEADER_SUM + 8, 1, 1},		  /* padding after the checksum */
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(m, h, len);
		for (unsigned b = 0; b < bad[k].bytes; b++)
			m[bad[k].off + b] = (unsigned char)(bad[k].val >> (8 * b));
		reseal(m);
		header_refused(m, len, "-ERR received bad data\r\n");
	}
	/* Random garbage of header length, sealed or not. */
	uint64_t x = 88172645463325252ULL;
	for (int r = 0; r < 2000; r++) {
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			m[i] = (unsigned char)x;
		}
		if (r & 1)
			memcpy(m, "BLOSSOM\0\x01\0\0\0\0\x10\0\0", 16);
		if (r & 2)
			reseal(m);
		header_refused(m, len, "-ERR received bad data\r\n");
	}
	/* A sound header whose layers pass max_memory: refused as a memory problem. */
	bf_registry_set_max_memory(reg, bf_registry_memory(reg) + 1000);
	header_refused(h, len, OOM);
	bf_registry_set_max_memory(reg, 0);

	/* The untouched header still loads, and a bad name is refused. */
	const char *args[] = {"BF.LOADCHUNK", "a b", "1", hc.data};
	const size_t lens[] = {12, 3, 1, len};
	runv(4, args, lens);
	expect_str("-ERR bad filter name\r\n");
	const char *ok[] = {"BF.LOADCHUNK", "dst", "1", hc.data};
	const size_t oklens[] = {12, 3, 1, len};
	runv(4, ok, oklens);
	expect_str("+OK\r\n");
	ck_assert_uint_eq(filter("dst")->nlayers, 3);
	ck_assert_uint_eq(bf_filter_items(filter("dst")), bf_filter_items(filter("src")));
	ck_assert_str_eq(bf_filter_name(filter("dst")), "dst");
	free(m);
	free(hc.data);
}
END_TEST

/*
 * Issue 17 item 6: whatever LOADCHUNK accepts, the snapshot reader accepts at the next start.
 * A counting filter whose old layer counts re-adds past its capacity, copied over RESP, then
 * written and read as a snapshot file.
 */
START_TEST(loadchunk_copy_survives_snapshot)
{
	char key[32], dir[] = "/tmp/blossomd-test-dump-XXXXXX", why[256];
	struct bf_filter *back;
	uint64_t gen;
	size_t n;

	SAYS("+OK\r\n", "BF.RESERVE", "src", "0.01", "100", "COUNTING");
	for (int i = 0; i < 300; i++) {
		int k = snprintf(key, sizeof(key), "k%d", i % 150);
		ck_assert_int_ge(bf_filter_add(filter("src"), key, (size_t)k), 0);
	}
	ck_assert_uint_gt(bf_filter_layers(filter("src"))[0].items,
			  bf_filter_layer_capacity(filter("src")->params, 0));
	struct chunk *v = dump("src", &n);
	load("dst", v, n);
	free_chunks(v, n);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(bf_snapshot_write(filter("dst"), 1, dfd, "dst.bsnap", NULL), 0);
	int rc = bf_snapshot_read(dfd, "dst.bsnap", &back, &gen, why, sizeof(why));
	ck_assert_msg(rc == 0, "the reader refused a loaded copy: %s", why);
	ck_assert_uint_eq(bf_filter_items(back), bf_filter_items(filter("src")));
	ck_assert_uint_eq(bf_filter_bytes(back), bf_filter_bytes(filter("src")));
	bf_filter_free(back);
	unlinkat(dfd, "dst.bsnap", 0);
	close(dfd);
	rmdir(dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The memory limit */

START_TEST(memory_limit_refusals)
{
	/* A limit that holds one default filter (capacity 1000) and a bit: what one costs,
	 * structure and bookkeeping included, measured on a registry without a limit (under a
	 * name as long as the ones below: the name is part of the cost). */
	SAYS(":1\r\n", "BF.ADD", "p", "x");
	uint64_t one = bf_registry_memory(reg);
	teardown();
	setup_limit(one + one / 2);

	SAYS(":1\r\n", "BF.ADD", "a", "x");
	uint64_t mem = bf_registry_memory(reg);
	ck_assert_uint_eq(mem, one);
	SAYS(OOM, "BF.ADD", "b", "x");
	SAYS(OOM, "BF.RESERVE", "c", "0.0001", "100000");
	SAYS(OOM, "BF.INSERT", "d", "ITEMS", "x");
	SAYS(OOM, "BF.MADD", "e", "x", "y");
	SAYS(":1\r\n", "DBSIZE");
	ck_assert_uint_eq(bf_registry_memory(reg), mem);
	ck_assert_int_eq(created, 1);

	/* Growth that would pass the limit: the array ends with the refusal, earlier items stay,
	 * the refused item is not added, and no layer is added. */
	struct bf_filter *f = filter("a");
	char key[16];
	int i = 0;
	while (bf_filter_layers(f)[0].items < bf_filter_layer_capacity(f->params, 0)) {
		int n = snprintf(key, sizeof(key), "fill%d", i++);
		ck_assert_int_ge(bf_filter_add(f, key, (size_t)n), 0);
	}
	uint64_t items = bf_filter_items(f);
	SAYS("*2\r\n:0\r\n-OOM command not allowed when used memory > 'maxmemory'.\r\n", "BF.MADD",
	     "a", "x", "new-one", "new-two");
	ck_assert_uint_eq(bf_filter_items(f), items);
	ck_assert_uint_eq(f->nlayers, 1);
	SAYS(OOM, "BF.ADD", "a", "new-two");
	SAYS(":0\r\n", "BF.EXISTS", "a", "new-one");
	ck_assert_uint_eq(bf_registry_memory(reg), mem);

	/* A first expiry takes a little memory: at the limit it is refused, changing nothing. */
	bf_registry_set_max_memory(reg, mem);
	SAYS(OOM, "EXPIRE", "a", "100");
	SAYS(":-1\r\n", "TTL", "a");
	ck_assert_uint_eq(bf_registry_memory(reg), mem);
	bf_registry_set_max_memory(reg, 0);
	SAYS(":1\r\n", "EXPIRE", "a", "100");
	SAYS(":100\r\n", "TTL", "a");
	SAYS(":1\r\n", "PERSIST", "a");

	/* A dump that does not fit is refused before anything is allocated. */
	bf_registry_set_max_memory(reg, 0);
	SAYS("+OK\r\n", "BF.RESERVE", "big", "0.001", "5000");
	struct chunk hc = header_of("big");
	SAYS(":1\r\n", "DEL", "big");
	bf_registry_set_max_memory(reg, one + one / 2);
	header_refused(hc.data, hc.len, OOM);
	free(hc.data);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Connection basics */

START_TEST(ping_echo_quit)
{
	SAYS("+PONG\r\n", "PING");
	SAYS("+PONG\r\n", "ping");
	SAYS("$2\r\nhi\r\n", "PING", "hi");
	SAYS("$0\r\n\r\n", "PING", "");
	SAYS("-ERR wrong number of arguments for 'ping' command\r\n", "PING", "a", "b");
	SAYS("$1\r\nx\r\n", "ECHO", "x");
	SAYS("-ERR wrong number of arguments for 'echo' command\r\n", "ECHO");
	SAYS("-ERR wrong number of arguments for 'echo' command\r\n", "EcHo", "a", "b");
	ck_assert(!sess.close_after);
	SAYS("+OK\r\n", "QUIT", "x");
	ck_assert(sess.close_after);
}
END_TEST

#define HELLO2 "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n"
#define HELLO3 "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n"
/* MODULE LIST's one module, RedisBloom's name and version: a map, an array of pairs in RESP2. */
#define BF_MODULE_BODY                                                                             \
	"$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20612\r\n$4\r\npath\r\n$0\r\n\r\n$4\r\nargs\r\n*" \
	"0\r\n"
#define BF_MODULE2 "*1\r\n*8\r\n" BF_MODULE_BODY
#define BF_MODULE3 "*1\r\n%4\r\n" BF_MODULE_BODY
#define HELLO_REST(proto)                                                                          \
	"$5\r\nproto\r\n:" proto "\r\n$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"       \
	"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n"

START_TEST(hello)
{
	SAYS(HELLO2 HELLO_REST("2") BF_MODULE2, "HELLO");
	SAYS(HELLO2 HELLO_REST("2") BF_MODULE2, "HELLO", "2");
	SAYS("-NOPROTO unsupported protocol version\r\n", "HELLO", "4");
	SAYS("-NOPROTO unsupported protocol version\r\n", "HELLO", "1");
	SAYS("-NOPROTO unsupported protocol version\r\n", "HELLO", "-1");
	SAYS("-ERR Protocol version is not an integer or out of range\r\n", "HELLO", "x");
	SAYS("-ERR Protocol version is not an integer or out of range\r\n", "HELLO", "03");
	SAYS("-ERR Syntax error in HELLO option 'AUTH'\r\n", "HELLO", "3", "AUTH", "default");
	SAYS("-ERR Syntax error in HELLO option 'foo'\r\n", "HELLO", "3", "foo");
	SAYS("-WRONGPASS invalid username-password pair or user is disabled.\r\n", "HELLO", "3",
	     "AUTH", "alice", "pw");
	SAYS("-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
	     "HELLO", "3", "SETNAME", "a b");
	/* Name errors come before credentials, as in Redis. */
	SAYS("-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
	     "HELLO", "3", "AUTH", "alice", "pw", "SETNAME", "a b");
	ck_assert_int_eq(sess.resp, 2);
	ck_assert_str_eq(sess.name, "");
	SAYS(HELLO3 HELLO_REST("3") BF_MODULE3, "hello", "3", "auth", "default", "anything",
	     "setname", "nm");
	ck_assert_int_eq(sess.resp, 3);
	SAYS("$2\r\nnm\r\n", "CLIENT", "GETNAME");
	SAYS(HELLO3 HELLO_REST("3") BF_MODULE3, "HELLO");
	SAYS("+PONG\r\n", "PING");
	SAYS(HELLO2 HELLO_REST("2") BF_MODULE2, "HELLO", "2");
	ck_assert_int_eq(sess.resp, 2);
}
END_TEST

#define TOKEN	  "0123456789abcdef0123456789abcdef"
#define NOAUTH	  "-NOAUTH Authentication required.\r\n"
#define WRONGPASS "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

/* With a token: only AUTH, HELLO, PING and QUIT before AUTH; three failures close. */
START_TEST(auth_with_token)
{
	ctx.token = TOKEN;
	ctx.token_len = strlen(TOKEN);
	SAYS("+PONG\r\n", "PING");
	SAYS(NOAUTH, "BF.ADD", "f", "k");
	SAYS(NOAUTH, "BF.EXISTS", "f");	    /* before the arity check */
	SAYS(NOAUTH, "nosuchcommand", "x"); /* before the unknown-command error */
	SAYS(NOAUTH, "CLIENT", "ID");
	SAYS("-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
	     "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
	     "select the RESP protocol version at the same time\r\n",
	     "HELLO", "3");
	ck_assert_int_eq(sess.resp, 2);
	SAYS("-ERR wrong number of arguments for 'auth' command\r\n", "AUTH");
	SAYS("-ERR syntax error\r\n", "AUTH", "a", "b", "c");
	ck_assert_uint_eq(sess.auth_failures, 0);
	SAYS(WRONGPASS, "AUTH", TOKEN "x");
	SAYS(WRONGPASS, "HELLO", "3", "AUTH", "alice", TOKEN);
	ck_assert(!sess.close_after);
	ck_assert_uint_eq(sess.auth_failures, 2);
	ck_assert_int_eq(sess.resp, 2);
	SAYS("+OK\r\n", "AUTH", TOKEN);
	ck_assert(sess.authed);
	SAYS(":1\r\n", "BF.ADD", "f", "k");
	/* A failure after success keeps the session authenticated but still counts. */
	SAYS(WRONGPASS, "AUTH", "default", "");
	ck_assert(sess.close_after);
	SAYS(":1\r\n", "BF.EXISTS", "f", "k");

	cmd_session_free(&sess);
	cmd_session_init(&sess, 7);
	SAYS(HELLO3 HELLO_REST("3") BF_MODULE3, "HELLO", "3", "AUTH", "default", TOKEN);
	ck_assert(sess.authed);
	ck_assert_int_eq(sess.resp, 3);

	cmd_session_free(&sess);
	cmd_session_init(&sess, 7);
	SAYS(WRONGPASS, "AUTH", "x");
	SAYS(WRONGPASS, "AUTH", "default", "x");
	ck_assert(!sess.close_after);
	SAYS(WRONGPASS, "AUTH", TOKEN "\n");
	ck_assert(sess.close_after);
	ck_assert(!sess.authed);
	SAYS("+OK\r\n", "QUIT");
}
END_TEST

START_TEST(auth_select)
{
	SAYS("-ERR AUTH <password> called without any password configured for the default user. "
	     "Are you sure your configuration is correct?\r\n",
	     "AUTH", "x");
	SAYS("+OK\r\n", "AUTH", "default", "x");
	SAYS("-WRONGPASS invalid username-password pair or user is disabled.\r\n", "AUTH", "a",
	     "b");
	SAYS("-ERR syntax error\r\n", "AUTH", "a", "b", "c");
	SAYS("-ERR wrong number of arguments for 'auth' command\r\n", "AUTH");
	SAYS("+OK\r\n", "SELECT", "0");
	SAYS("-ERR DB index is out of range\r\n", "SELECT", "1");
	SAYS("-ERR DB index is out of range\r\n", "SELECT", "-1");
	SAYS("-ERR value is not an integer or out of range\r\n", "SELECT", "x");
	SAYS("-ERR value is not an integer or out of range\r\n", "SELECT", "00");
	SAYS("-ERR value is not an integer or out of range\r\n", "SELECT", " 0");
	SAYS("-ERR wrong number of arguments for 'select' command\r\n", "SELECT");
}
END_TEST

START_TEST(client)
{
	SAYS("$-1\r\n", "CLIENT", "GETNAME");
	SAYS("+OK\r\n", "CLIENT", "SETNAME", "ab");
	SAYS("$2\r\nab\r\n", "client", "getname");
	SAYS("-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
	     "CLIENT", "SETNAME", "a b");
	SAYS("-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
	     "CLIENT", "SETNAME", "a\nb");
	SAYS("$2\r\nab\r\n", "CLIENT", "GETNAME");
	char name[65];
	memset(name, 'n', 64);
	name[63] = '\0';
	SAYS("+OK\r\n", "CLIENT", "SETNAME", name);
	name[63] = 'n';
	name[64] = '\0';
	SAYS("-ERR Client names longer than 63 bytes are not supported\r\n", "CLIENT", "SETNAME",
	     name);
	SAYS("+OK\r\n", "CLIENT", "SETNAME", "");
	SAYS("$-1\r\n", "CLIENT", "GETNAME");
	SAYS(":7\r\n", "CLIENT", "ID");
	SAYS("+OK\r\n", "CLIENT", "SETINFO", "LIB-NAME", "redis-py");
	SAYS("+OK\r\n", "CLIENT", "SETINFO", "lib-ver", "5.0.1");
	SAYS("-ERR Unrecognized option 'x'\r\n", "CLIENT", "SETINFO", "x", "y");
	SAYS("-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n", "CLIENT", "FOO");
	SAYS("-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n", "client", "foo", "bar");
	SAYS("-ERR wrong number of arguments for 'client' command\r\n", "CLIENT");
	SAYS("-ERR wrong number of arguments for 'client|setname' command\r\n", "CLIENT",
	     "SETNAME");
	SAYS("-ERR wrong number of arguments for 'client|getname' command\r\n", "CLIENT", "GETNAME",
	     "x");
	STARTS("*35\r\n+CLIENT <subcommand>", "CLIENT", "HELP");
	STARTS("%7\r\n", "HELLO", "3");
	SAYS("_\r\n", "CLIENT", "GETNAME");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* CLIENT LIST / INFO / KILL */

/* The line of the session (id 7) as CLIENT LIST / INFO show it with no server (no hooks). */
static const char *self_line(const char *cmd, const char *name, int resp)
{
	static char buf[512];

	snprintf(
	    buf, sizeof(buf),
	    "id=7 addr=?:0 laddr=?:0 fd=-1 name=%s age=0 idle=0 flags=N db=0 sub=0 psub=0 "
	    "ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 "
	    "oll=0 omem=0 tot-mem=0 events= cmd=%s user=default redir=-1 resp=%d\n",
	    name, cmd, resp);
	return buf;
}

/* The reply is the bulk string (RESP3: verbatim "txt") of text. */
static void expect_text(const char *text, int resp)
{
	char want[4096];
	int n;

	if (resp == 3)
		n = snprintf(want, sizeof(want), "=%zu\r\ntxt:%s\r\n", strlen(text) + 4, text);
	else
		n = snprintf(want, sizeof(want), "$%zu\r\n%s\r\n", strlen(text), text);
	ck_assert(n > 0 && (size_t)n < sizeof(want));
	expect_bytes(want, (size_t)n);
}

START_TEST(client_list_info_alone)
{
	char two[1024];

	run("CLIENT", "INFO", NULL);
	expect_text(self_line("client|info", "", 2), 2);
	run("client", "list", NULL);
	expect_text(self_line("client|list", "", 2), 2);
	SAYS("+OK\r\n", "CLIENT", "SETNAME", "worker-1");
	run("CLIENT", "LIST", "TYPE", "normal", NULL);
	expect_text(self_line("client|list", "worker-1", 2), 2);
	run("CLIENT", "LIST", "ID", "7", NULL);
	expect_text(self_line("client|list", "worker-1", 2), 2);
	/* Redis: each id in the order given, twice if given twice; an id of none, nothing. */
	snprintf(two, sizeof(two), "%s", self_line("client|list", "worker-1", 2));
	strcat(two, self_line("client|list", "worker-1", 2));
	run("CLIENT", "LIST", "ID", "7", "8", "-3", "7", NULL);
	expect_text(two, 2);
	SAYS("$0\r\n\r\n", "CLIENT", "LIST", "ID", "8");
	SAYS("$0\r\n\r\n", "CLIENT", "LIST", "TYPE", "master");
	SAYS("$0\r\n\r\n", "CLIENT", "LIST", "TYPE", "REPLICA");
	SAYS("$0\r\n\r\n", "CLIENT", "LIST", "type", "slave");
	SAYS("$0\r\n\r\n", "CLIENT", "LIST", "TYPE", "pubsub");
	STARTS("%7\r\n", "HELLO", "3");
	run("CLIENT", "INFO", NULL);
	expect_text(self_line("client|info", "worker-1", 3), 3);
	run("CLIENT", "LIST", NULL);
	expect_text(self_line("client|list", "worker-1", 3), 3);
	SAYS("=4\r\ntxt:\r\n", "CLIENT", "LIST", "TYPE", "pubsub");
}
END_TEST

/* The transaction fields as Redis 7.4 prints them: watch= counts the WATCHed names, d marks
 * one changed; in a running EXEC, flags=x and multi= the commands queued, the WATCHes gone. */
START_TEST(client_info_multi_watch)
{
	static const char line[] =
	    "id=7 addr=?:0 laddr=?:0 fd=-1 name= age=0 idle=0 flags=%s db=0 sub=0 psub=0 ssub=0 "
	    "multi=%s watch=%s qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=%s rbs=0 rbp=0 obl=0 oll=0 "
	    "omem=0 tot-mem=0 events= cmd=client|info user=default redir=-1 resp=2\n";
	char text[512], want[1024];
	int n;

	SAYS("+OK\r\n", "WATCH", "a", "b", "a");
	snprintf(text, sizeof(text), line, "N", "-1", "2", "0");
	run("CLIENT", "INFO", NULL);
	expect_text(text, 2);
	SAYS(":1\r\n", "BF.ADD", "a", "x");
	snprintf(text, sizeof(text), line, "d", "-1", "2", "0");
	run("CLIENT", "INFO", NULL);
	expect_text(text, 2);
	SAYS("+OK\r\n", "UNWATCH");
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "CLIENT", "INFO");
	SAYS("+QUEUED\r\n", "PING");
	/* Each queued command: its header (24 bytes), a pointer and a length per argument, the
	 * arguments NUL-terminated: 24 + 32 + 12 for CLIENT INFO, 24 + 16 + 5 for PING. */
	snprintf(text, sizeof(text), line, "x", "2", "0", "113");
	n = snprintf(want, sizeof(want), "*2\r\n$%zu\r\n%s\r\n+PONG\r\n", strlen(text), text);
	run("EXEC", NULL);
	expect_bytes(want, (size_t)n);
	snprintf(text, sizeof(text), line, "N", "-1", "0", "0");
	run("CLIENT", "INFO", NULL);
	expect_text(text, 2);
}
END_TEST

/* Redis 7.0's errors for CLIENT LIST / INFO / KILL (networking.c, clientCommand). */
START_TEST(client_list_kill_errors)
{
	SAYS("-ERR Unknown client type 'bogus'\r\n", "CLIENT", "LIST", "TYPE", "bogus");
	SAYS("-ERR Invalid client ID\r\n", "CLIENT", "LIST", "ID", "x");
	SAYS("-ERR Invalid client ID\r\n", "CLIENT", "LIST", "ID", "7", "+8");
	SAYS("-ERR syntax error\r\n", "CLIENT", "LIST", "ID");
	SAYS("-ERR syntax error\r\n", "CLIENT", "LIST", "TYPE");
	SAYS("-ERR syntax error\r\n", "CLIENT", "LIST", "TYPE", "normal", "x");
	SAYS("-ERR syntax error\r\n", "CLIENT", "LIST", "foo", "bar");
	SAYS("-ERR wrong number of arguments for 'client|info' command\r\n", "CLIENT", "INFO", "x");
	SAYS("-ERR wrong number of arguments for 'client|kill' command\r\n", "CLIENT", "KILL");
	SAYS("-ERR syntax error\r\n", "CLIENT", "KILL", "id", "10", "wrong_arg");
	SAYS("-ERR client-id should be greater than 0\r\n", "CLIENT", "KILL", "id", "str");
	SAYS("-ERR client-id should be greater than 0\r\n", "CLIENT", "KILL", "id", "-1");
	SAYS("-ERR client-id should be greater than 0\r\n", "CLIENT", "KILL", "ID", "0");
	SAYS("-ERR Unknown client type 'wrong_type'\r\n", "CLIENT", "KILL", "type", "wrong_type");
	SAYS("-ERR No such user 'wrong_user'\r\n", "CLIENT", "KILL", "user", "wrong_user");
	SAYS("-ERR No such user 'DEFAULT'\r\n", "CLIENT", "KILL", "USER", "DEFAULT");
	SAYS("-ERR syntax error\r\n", "CLIENT", "KILL", "skipme", "yes_or_no");
	SAYS("-ERR syntax error\r\n", "CLIENT", "KILL", "nope", "x");
	SAYS("-ERR syntax error\r\n", "CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME");
	/* Options are checked in order: the first bad one answers. */
	SAYS("-ERR client-id should be greater than 0\r\n", "CLIENT", "KILL", "ID", "x", "TYPE",
	     "bogus");
	SAYS("-ERR No such client\r\n", "CLIENT", "KILL", "1.2.3.4:5");
	SAYS(":0\r\n", "CLIENT", "KILL", "ADDR", "1.2.3.4:5");
	ck_assert(!sess.close_after);
	/* The session itself: SKIPME yes by default, so nothing. */
	SAYS(":0\r\n", "CLIENT", "KILL", "ID", "7");
	SAYS(":0\r\n", "CLIENT", "KILL", "TYPE", "normal", "USER", "default");
	SAYS(":0\r\n", "CLIENT", "KILL", "ID", "7", "SKIPME", "no", "TYPE", "pubsub");
	ck_assert(!sess.close_after);
	ck_assert_uint_eq(ctx.errors, 21);
}
END_TEST

START_TEST(client_kill_self_alone)
{
	SAYS(":1\r\n", "CLIENT", "KILL", "ID", "7", "SKIPME", "NO");
	ck_assert(sess.close_after);
}
END_TEST

/* The old form may name the session itself: +OK, then it closes. */
START_TEST(client_kill_self_old_form)
{
	SAYS("+OK\r\n", "CLIENT", "KILL", "?:0");
	ck_assert(sess.close_after);
}
END_TEST

/* The last command's name, as Redis's lastcmd: NULL after an unknown one. */
START_TEST(client_last_cmd)
{
	ck_assert_ptr_null(sess.last_cmd);
	SAYS("+PONG\r\n", "PING");
	ck_assert_str_eq(sess.last_cmd, "ping");
	run("NOSUCH", NULL);
	ck_assert_ptr_null(sess.last_cmd);
	run("CLIENT", "GETNAME", NULL);
	ck_assert_str_eq(sess.last_cmd, "client|getname");
	run("CLIENT", "NOSUCH", NULL);
	ck_assert_ptr_null(sess.last_cmd);
	run("CLIENT", NULL);
	ck_assert_str_eq(sess.last_cmd, "client");
	run("BF.ADD", "f", "x", NULL);
	ck_assert_str_eq(sess.last_cmd, "bf.add");
}
END_TEST

/* Three connections as a server would show them: the session (7) and two others. */
static struct cmd_client fakes[3];
static bool fake_closed[3];

static void fakes_init(void)
{
	fakes[0] = (struct cmd_client){.id = 7,
				       .addr = "10.0.0.1:1000",
				       .laddr = "127.0.0.1:6379",
				       .fd = 10,
				       .name = "",
				       .resp = 2,
				       .cmd = "client|list",
				       .multi = -1,
				       .reading = true};
	fakes[1] = (struct cmd_client){.id = 8,
				       .addr = "10.0.0.2:2000",
				       .laddr = "127.0.0.1:6379",
				       .fd = 11,
				       .name = "worker",
				       .resp = 3,
				       .cmd = "bf.add",
				       .multi = 2,
				       .watch = 1,
				       .dirty = true,
				       .multi_mem = 40,
				       .age = 5,
				       .idle = 2,
				       .closing = true,
				       .reading = true,
				       .writing = true,
				       .qbuf = 3,
				       .qbuf_free = 100,
				       .argv_mem = 4,
				       .rbs = 16384,
				       .rbp = 20,
				       .obl = 10,
				       .omem = 16384,
				       .tot_mem = 20000};
	fakes[2] = (struct cmd_client){.id = 9,
				       .addr = "[::1]:3000",
				       .laddr = "[::1]:6380",
				       .fd = 12,
				       .name = "",
				       .resp = 2,
				       .multi = -1};
	memset(fake_closed, 0, sizeof(fake_closed));
}

static const struct cmd_client *fake_get(void *arg, uint64_t self, uint64_t id,
					 struct cmd_client *buf)
{
	(void)arg;
	for (size_t i = 0; i < 3; i++) {
		if (fakes[i].id == id && !fake_closed[i]) {
			*buf = fakes[i];
			buf->self = id == self;
			return buf;
		}
	}
	return NULL;
}

static void fake_each(void *arg, uint64_t self, void (*fn)(void *, const struct cmd_client *),
		      void *fnarg)
{
	struct cmd_client cl;

	for (size_t i = 0; i < 3; i++)
		if (fake_get(arg, self, fakes[i].id, &cl))
			fn(fnarg, &cl);
}

static size_t fake_kill(void *arg, uint64_t self, bool (*match)(void *, const struct cmd_client *),
			void *marg)
{
	struct cmd_client cl;
	size_t n = 0;

	for (size_t i = 0; i < 3; i++) {
		if (!fake_get(arg, self, fakes[i].id, &cl) || !match(marg, &cl))
			continue;
		ck_assert_uint_ne(cl.id, self); /* the session is never accepted */
		fake_closed[i] = true;
		n++;
	}
	return n;
}

static void setup_fakes(void)
{
	setup();
	fakes_init();
	ctx.hooks.client_get = fake_get;
	ctx.hooks.client_each = fake_each;
	ctx.hooks.client_kill = fake_kill;
}

#define FAKE7                                                                                      \
	"id=7 addr=10.0.0.1:1000 laddr=127.0.0.1:6379 fd=10 name= age=0 idle=0 flags=N db=0 "      \
	"sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 "    \
	"rbp=0 "                                                                                   \
	"obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client|list user=default redir=-1 resp=2\n"
#define FAKE8                                                                                      \
	"id=8 addr=10.0.0.2:2000 laddr=127.0.0.1:6379 fd=11 name=worker age=5 idle=2 flags=xdc "   \
	"db=0 sub=0 psub=0 ssub=0 multi=2 watch=1 qbuf=3 qbuf-free=100 argv-mem=4 multi-mem=40 "   \
	"rbs=16384 "                                                                               \
	"rbp=20 obl=10 oll=0 omem=16384 tot-mem=20000 events=rw cmd=bf.add user=default "          \
	"redir=-1 resp=3\n"
#define FAKE9                                                                                      \
	"id=9 addr=[::1]:3000 laddr=[::1]:6380 fd=12 name= age=0 idle=0 flags=N db=0 sub=0 "       \
	"psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 "    \
	"obl=0 "                                                                                   \
	"oll=0 omem=0 tot-mem=0 events= cmd=NULL user=default redir=-1 resp=2\n"

START_TEST(client_with_hooks)
{
	run("CLIENT", "LIST", NULL);
	expect_text(FAKE7 FAKE8 FAKE9, 2);
	run("CLIENT", "LIST", "ID", "9", "8", "99", "9", NULL);
	expect_text(FAKE9 FAKE8 FAKE9, 2);
	run("CLIENT", "LIST", "TYPE", "Normal", NULL);
	expect_text(FAKE7 FAKE8 FAKE9, 2);
	run("CLIENT", "INFO", NULL);
	expect_text(FAKE7, 2);

	/* Addresses are compared whole. */
	SAYS(":0\r\n", "CLIENT", "KILL", "ADDR", "10.0.0.2:200");
	SAYS(":0\r\n", "CLIENT", "KILL", "ADDR", "10.0.0.2:2000", "LADDR", "127.0.0.1:6380");
	SAYS(":1\r\n", "CLIENT", "KILL", "ADDR", "10.0.0.2:2000", "LADDR", "127.0.0.1:6379");
	ck_assert(fake_closed[1] && !fake_closed[2]);
	SAYS("-ERR No such client\r\n", "CLIENT", "KILL", "10.0.0.2:2000");
	SAYS("+OK\r\n", "CLIENT", "KILL", "[::1]:3000");
	ck_assert(fake_closed[2]);
	run("CLIENT", "LIST", NULL);
	expect_text(FAKE7, 2);
	ck_assert(!sess.close_after);

	/* A later option of the same name wins, as in Redis. */
	fakes_init();
	SAYS(":1\r\n", "CLIENT", "KILL", "ID", "8", "ID", "9");
	ck_assert(!fake_closed[1] && fake_closed[2]);
	fakes_init();
	SAYS(":0\r\n", "CLIENT", "KILL", "TYPE", "normal", "TYPE", "master");
	SAYS(":2\r\n", "CLIENT", "KILL", "TYPE", "master", "TYPE", "normal");
	ck_assert(fake_closed[1] && fake_closed[2] && !sess.close_after);
	fakes_init();
	SAYS(":2\r\n", "CLIENT", "KILL", "LADDR", "127.0.0.1:6379", "SKIPME", "no");
	ck_assert(fake_closed[1] && !fake_closed[2] && sess.close_after);
}
END_TEST

START_TEST(client_kill_all_with_hooks)
{
	SAYS(":3\r\n", "CLIENT", "KILL", "USER", "default", "SKIPME", "no");
	ck_assert(fake_closed[1] && fake_closed[2] && sess.close_after);
}
END_TEST

/* A key spec at index 1, range (0, 1, 0), with flags (RESP2). */
#define KEY1_SPEC(flags)                                                                           \
	"*6\r\n$5\r\nflags\r\n" flags "$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n" \
	"$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\n"   \
	"range\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$"             \
	"5\r\nlimit\r\n"                                                                           \
	":0\r\n"
#define RO_KEY1 "*1\r\n" KEY1_SPEC("*1\r\n+RO\r\n")

/* Redis 7.0.15's replies, byte for byte (a live redis-server's), and RedisBloom's BF.ADD. */
#define BF_ADD_INFO2                                                                               \
	"*10\r\n$6\r\nbf.add\r\n:3\r\n*3\r\n+write\r\n+denyoom\r\n+module\r\n:1\r\n:1\r\n:1\r\n*"  \
	"2\r\n"                                                                                    \
	"+@write\r\n+@bloom\r\n*0\r\n*1\r\n" KEY1_SPEC("*1\r\n+RW\r\n") "*0\r\n"
#define BF_ADD_DOCS2                                                                               \
	"*2\r\n$6\r\nbf.add\r\n*12\r\n$7\r\nsummary\r\n$30\r\nAdds an item to a Bloom Filter\r\n"  \
	"$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nmodule\r\n$10\r\ncomplexity\r\n$"      \
	"73\r\n"                                                                                   \
	"O(k), where k is the number of hash functions used by the last sub-filter\r\n$6\r\n"      \
	"module\r\n$2\r\nbf\r\n$9\r\narguments\r\n*2\r\n*6\r\n$4\r\nname\r\n$3\r\nkey\r\n$"        \
	"4\r\ntype\r\n"                                                                            \
	"$3\r\nkey\r\n$14\r\nkey_spec_index\r\n:0\r\n*4\r\n$4\r\nname\r\n$4\r\nitem\r\n$"          \
	"4\r\ntype\r\n"                                                                            \
	"$6\r\nstring\r\n"
#define DEL_INFO2                                                                                  \
	"*1\r\n*10\r\n$3\r\ndel\r\n:-2\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@keyspace\r\n" \
	"+@write\r\n+@slow\r\n*2\r\n$26\r\nrequest_policy:multi_shard\r\n$23\r\nresponse_policy:"  \
	"agg_sum\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RM\r\n+delete\r\n$12\r\nbegin_search\r\n*"   \
	"4\r\n"                                                                                    \
	"$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_"        \
	"keys\r\n"                                                                                 \
	"*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\n"    \
	"keystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
#define RENAME_INFO2                                                                               \
	"*1\r\n*10\r\n$6\r\nrename\r\n:3\r\n*1\r\n+write\r\n:1\r\n:2\r\n:1\r\n*3\r\n+@"            \
	"keyspace\r\n"                                                                             \
	"+@write\r\n+@slow\r\n*0\r\n*2\r\n*6\r\n$5\r\nflags\r\n*3\r\n+RW\r\n+access\r\n+"          \
	"delete\r\n"                                                                               \
	"$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$"          \
	"5\r\nindex\r\n"                                                                           \
	":1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\n"   \
	"lastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*6\r\n$5\r\nflags\r\n*2\r\n" \
	"+OW\r\n+update\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$"            \
	"4\r\nspec\r\n"                                                                            \
	"*2\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$"       \
	"4\r\nspec\r\n"                                                                            \
	"*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
#define PING_DOCS2                                                                                 \
	"*2\r\n$4\r\nping\r\n*10\r\n$7\r\nsummary\r\n$15\r\nPing the "                             \
	"server\r\n$5\r\nsince\r\n$5\r\n"                                                          \
	"1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$9\r\n"   \
	"arguments\r\n*1\r\n*6\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n$"  \
	"5\r\n"                                                                                    \
	"flags\r\n*1\r\n+optional\r\n"
#define RENAME_INFO3                                                                               \
	"*1\r\n*10\r\n$6\r\nrename\r\n:3\r\n~1\r\n+write\r\n:1\r\n:2\r\n:1\r\n~3\r\n+@"            \
	"keyspace\r\n"                                                                             \
	"+@write\r\n+@slow\r\n~0\r\n~2\r\n%3\r\n$5\r\nflags\r\n~3\r\n+RW\r\n+access\r\n+"          \
	"delete\r\n"                                                                               \
	"$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$"          \
	"5\r\nindex\r\n"                                                                           \
	":1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\n"   \
	"lastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n%3\r\n$5\r\nflags\r\n~2\r\n" \
	"+OW\r\n+update\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$"            \
	"4\r\nspec\r\n"                                                                            \
	"%1\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$"       \
	"4\r\nspec\r\n"                                                                            \
	"%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n"
#define EXPIRE_DOCS3                                                                               \
	"%1\r\n$6\r\nexpire\r\n%6\r\n$7\r\nsummary\r\n$35\r\nSet a key's time to live in "         \
	"seconds\r\n"                                                                              \
	"$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$7\r\ngeneric\r\n$10\r\ncomplexity\r\n$"     \
	"4\r\n"                                                                                    \
	"O(1)\r\n$7\r\nhistory\r\n~1\r\n*2\r\n$5\r\n7.0.0\r\n$41\r\nAdded options: `NX`, `XX`, "   \
	"`GT` "                                                                                    \
	"and "                                                                                     \
	"`LT`.\r\n$9\r\narguments\r\n*3\r\n%3\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\n"  \
	"key\r\n$14\r\nkey_spec_index\r\n:0\r\n%2\r\n$4\r\nname\r\n$7\r\nseconds\r\n$"             \
	"4\r\ntype\r\n"                                                                            \
	"$7\r\ninteger\r\n%5\r\n$4\r\nname\r\n$9\r\ncondition\r\n$4\r\ntype\r\n$5\r\noneof\r\n$"   \
	"5\r\n"                                                                                    \
	"since\r\n$5\r\n7.0.0\r\n$5\r\nflags\r\n~1\r\n+optional\r\n$9\r\narguments\r\n*4\r\n%"     \
	"3\r\n"                                                                                    \
	"$4\r\nname\r\n$2\r\nnx\r\n$4\r\ntype\r\n$10\r\npure-token\r\n$5\r\ntoken\r\n$"            \
	"2\r\nNX\r\n%3\r\n"                                                                        \
	"$4\r\nname\r\n$2\r\nxx\r\n$4\r\ntype\r\n$10\r\npure-token\r\n$5\r\ntoken\r\n$"            \
	"2\r\nXX\r\n%3\r\n"                                                                        \
	"$4\r\nname\r\n$2\r\ngt\r\n$4\r\ntype\r\n$10\r\npure-token\r\n$5\r\ntoken\r\n$"            \
	"2\r\nGT\r\n%3\r\n"                                                                        \
	"$4\r\nname\r\n$2\r\nlt\r\n$4\r\ntype\r\n$10\r\npure-token\r\n$5\r\ntoken\r\n$2\r\nLT\r\n"

/*
 * A call of every command and subcommand, and the filter names in it: the arguments the
 * command's syntax makes filter names (Redis's and RedisBloom's documentation). keys is a
 * space-separated list of argument indexes; "" for a command without keys.
 */
static const struct {
	const char *name; /* as COMMAND LIST names it */
	const char *call[8];
	const char *keys;
} key_calls[] = {
    {"bf.add", {"BF.ADD", "f", "i"}, "1"},
    {"bf.exists", {"BF.EXISTS", "f", "i"}, "1"},
    {"bf.madd", {"BF.MADD", "f", "a", "b"}, "1"},
    {"bf.mexists", {"BF.MEXISTS", "f", "a", "b"}, "1"},
    {"bf.insert", {"BF.INSERT", "f", "CAPACITY", "10", "ITEMS", "a", "b"}, "1"},
    {"bf.reserve", {"BF.RESERVE", "f", "0.01", "100", "COUNTING"}, "1"},
    {"bf.info", {"BF.INFO", "f", "CAPACITY"}, "1"},
    {"bf.card", {"BF.CARD", "f"}, "1"},
    {"bf.del", {"BF.DEL", "f", "i"}, "1"},
    {"bf.scandump", {"BF.SCANDUMP", "f", "0"}, "1"},
    {"bf.loadchunk", {"BF.LOADCHUNK", "f", "1", "x"}, "1"},
    {"bf.debug", {"BF.DEBUG", "f"}, "1"},
    {"ping", {"PING", "x"}, ""},
    {"echo", {"ECHO", "x"}, ""},
    {"quit", {"QUIT"}, ""},
    {"hello", {"HELLO", "3"}, ""},
    {"auth", {"AUTH", "x"}, ""},
    {"select", {"SELECT", "0"}, ""},
    {"client", {"CLIENT"}, ""},
    {"client|setname", {"CLIENT", "SETNAME", "x"}, ""},
    {"client|getname", {"CLIENT", "GETNAME"}, ""},
    {"client|id", {"CLIENT", "ID"}, ""},
    {"client|list", {"CLIENT", "LIST", "ID", "1"}, ""},
    {"client|info", {"CLIENT", "INFO"}, ""},
    {"client|kill", {"CLIENT", "KILL", "ID", "1"}, ""},
    {"client|setinfo", {"CLIENT", "SETINFO", "LIB-NAME", "x"}, ""},
    {"client|help", {"CLIENT", "HELP"}, ""},
    {"command", {"COMMAND"}, ""},
    {"command|count", {"COMMAND", "COUNT"}, ""},
    {"command|docs", {"COMMAND", "DOCS", "x"}, ""},
    {"command|getkeys", {"COMMAND", "GETKEYS", "DEL", "x"}, ""},
    {"command|getkeysandflags", {"COMMAND", "GETKEYSANDFLAGS", "DEL", "x"}, ""},
    {"command|info", {"COMMAND", "INFO", "x"}, ""},
    {"command|list", {"COMMAND", "LIST"}, ""},
    {"command|help", {"COMMAND", "HELP"}, ""},
    {"config", {"CONFIG"}, ""},
    {"config|get", {"CONFIG", "GET", "x"}, ""},
    {"config|set", {"CONFIG", "SET", "x", "y"}, ""},
    {"config|resetstat", {"CONFIG", "RESETSTAT"}, ""},
    {"config|rewrite", {"CONFIG", "REWRITE"}, ""},
    {"config|help", {"CONFIG", "HELP"}, ""},
    {"info", {"INFO", "x"}, ""},
    {"dbsize", {"DBSIZE"}, ""},
    {"exists", {"EXISTS", "a", "b", "c"}, "1 2 3"},
    {"del", {"DEL", "a", "b"}, "1 2"},
    {"unlink", {"UNLINK", "a", "b"}, "1 2"},
    {"type", {"TYPE", "a"}, "1"},
    {"keys", {"KEYS", "*"}, ""},
    {"scan", {"SCAN", "0", "MATCH", "x"}, ""},
    {"save", {"SAVE"}, ""},
    {"bgsave", {"BGSAVE"}, ""},
    {"lastsave", {"LASTSAVE"}, ""},
    {"flushall", {"FLUSHALL"}, ""},
    {"flushdb", {"FLUSHDB"}, ""},
    {"memory", {"MEMORY"}, ""},
    {"memory|usage", {"MEMORY", "USAGE", "a", "SAMPLES", "5"}, "2"},
    {"memory|help", {"MEMORY", "HELP"}, ""},
    {"rename", {"RENAME", "a", "b"}, "1 2"},
    {"renamenx", {"RENAMENX", "a", "b"}, "1 2"},
    {"expire", {"EXPIRE", "a", "10", "NX"}, "1"},
    {"pexpire", {"PEXPIRE", "a", "10"}, "1"},
    {"expireat", {"EXPIREAT", "a", "10"}, "1"},
    {"pexpireat", {"PEXPIREAT", "a", "10"}, "1"},
    {"ttl", {"TTL", "a"}, "1"},
    {"pttl", {"PTTL", "a"}, "1"},
    {"expiretime", {"EXPIRETIME", "a"}, "1"},
    {"pexpiretime", {"PEXPIRETIME", "a"}, "1"},
    {"persist", {"PERSIST", "a"}, "1"},
    {"multi", {"MULTI"}, ""},
    {"exec", {"EXEC"}, ""},
    {"discard", {"DISCARD"}, ""},
    {"watch", {"WATCH", "a", "b"}, "1 2"},
    {"unwatch", {"UNWATCH"}, ""},
    {"module", {"MODULE"}, ""},
    {"module|list", {"MODULE", "LIST"}, ""},
    {"module|help", {"MODULE", "HELP"}, ""},
    {"object", {"OBJECT"}, ""},
    {"object|encoding", {"OBJECT", "ENCODING", "a"}, "2"},
    {"object|freq", {"OBJECT", "FREQ", "a"}, "2"},
    {"object|idletime", {"OBJECT", "IDLETIME", "a"}, "2"},
    {"object|refcount", {"OBJECT", "REFCOUNT", "a"}, "2"},
    {"object|help", {"OBJECT", "HELP"}, ""},
    {"wait", {"WAIT", "0", "0"}, ""},
    {"debug", {"DEBUG", "SLEEP", "0"}, ""},
    {"shutdown", {"SHUTDOWN", "NOSAVE"}, ""},
    {"subscribe", {"SUBSCRIBE", "ch"}, ""},
    {"unsubscribe", {"UNSUBSCRIBE", "ch"}, ""},
    {"psubscribe", {"PSUBSCRIBE", "c*"}, ""},
    {"punsubscribe", {"PUNSUBSCRIBE", "c*"}, ""},
    {"publish", {"PUBLISH", "ch", "m"}, ""},
    {"pubsub", {"PUBSUB"}, ""},
    {"pubsub|channels", {"PUBSUB", "CHANNELS"}, ""},
    {"pubsub|numsub", {"PUBSUB", "NUMSUB", "ch"}, ""},
    {"pubsub|numpat", {"PUBSUB", "NUMPAT"}, ""},
    {"pubsub|shardchannels", {"PUBSUB", "SHARDCHANNELS"}, ""},
    {"pubsub|shardnumsub", {"PUBSUB", "SHARDNUMSUB", "ch"}, ""},
    {"pubsub|help", {"PUBSUB", "HELP"}, ""},
    {"monitor", {"MONITOR"}, ""},
    {"reset", {"RESET"}, ""},
    {"replicaof", {"REPLICAOF", "NO", "ONE"}, ""},
    {"slaveof", {"SLAVEOF", "NO", "ONE"}, ""},
    {"replconf", {"REPLCONF", "ACK", "0"}, ""},
    {"psync", {"PSYNC", "?", "-1"}, ""},
    {"role", {"ROLE"}, ""},
};

/* COMMAND GETKEYS of call (argc words) into out. */
static void getkeys_of(const char *const *call, size_t argc)
{
	const char *args[16] = {"COMMAND", "GETKEYS"};
	size_t lens[16];

	for (size_t i = 0; i < argc; i++)
		args[2 + i] = call[i];
	for (size_t i = 0; i < argc + 2; i++)
		lens[i] = strlen(args[i]);
	runv(argc + 2, args, lens);
}

/*
 * Issue 32: cluster clients find a command's filter with COMMAND GETKEYS (or the key specs it
 * reads). Every command COMMAND LIST names has a call above, and GETKEYS of it answers that
 * call's filter names, in order; a command without keys says so.
 */
START_TEST(command_getkeys_every_command)
{
	char names[8192], want[512];
	size_t nnames = 0, listed;

	run("COMMAND", "LIST", NULL);
	ck_assert(out.len < sizeof(names));
	memcpy(names, out.data, out.len);
	names[out.len] = '\0';
	listed = strtoul(names + 1, NULL, 10);
	for (char *p = strstr(names, "\r\n$"); p; p = strstr(p + 1, "\r\n$")) {
		char *name = strstr(p + 3, "\r\n") + 2, *end = strstr(name, "\r\n");
		size_t k = 0, argc = 0;
		int n = 0;

		while (k < sizeof(key_calls) / sizeof(key_calls[0]) &&
		       ((size_t)(end - name) != strlen(key_calls[k].name) ||
			memcmp(key_calls[k].name, name, (size_t)(end - name))))
			k++;
		ck_assert_msg(k < sizeof(key_calls) / sizeof(key_calls[0]),
			      "no call of '%.*s' to check its keys with", (int)(end - name), name);
		nnames++;
		while (key_calls[k].call[argc])
			argc++;
		getkeys_of(key_calls[k].call, argc);
		if (argc == 1) {
			/* Redis 7.0's COMMAND GETKEYS wants at least two words (arity -4). */
			static const char arity[] =
			    "-ERR wrong number of arguments for 'command|getkeys' command\r\n";
			ck_assert(!*key_calls[k].keys);
			expect_bytes(arity, sizeof(arity) - 1);
			continue;
		}
		if (!*key_calls[k].keys) {
			expect_bytes("-ERR The command has no key arguments\r\n", 39);
			continue;
		}
		for (const char *q = key_calls[k].keys; *q; q++)
			n += *q != ' ';
		size_t len = (size_t)snprintf(want, sizeof(want), "*%d\r\n", n);
		for (const char *q = key_calls[k].keys; *q; q++) {
			const char *arg;
			if (*q == ' ')
				continue;
			arg = key_calls[k].call[*q - '0'];
			len += (size_t)snprintf(want + len, sizeof(want) - len, "$%zu\r\n%s\r\n",
						strlen(arg), arg);
		}
		expect_bytes(want, len);
	}
	ck_assert_uint_eq(nnames, listed);
	ck_assert_uint_eq(nnames, sizeof(key_calls) / sizeof(key_calls[0]));
	/* COMMAND describes every command the table serves, and no other. */
	run("COMMAND", "COUNT", NULL);
	size_t k = 0;
	while (resp_cmd_name_at(k))
		k++;
	snprintf(want, sizeof(want), ":%zu\r\n", k);
	expect_bytes(want, strlen(want));
	for (k = 0; resp_cmd_name_at(k); k++) {
		const char *name = resp_cmd_name_at(k);
		char head[64];
		int n =
		    snprintf(head, sizeof(head), "*1\r\n*10\r\n$%zu\r\n%s\r\n", strlen(name), name);

		run("COMMAND", "INFO", name, NULL);
		ck_assert_msg(out.len > (size_t)n && memcmp(out.data, head, (size_t)n) == 0,
			      "COMMAND INFO %s", name);
	}
}
END_TEST

/* The commands that create their filter create the one GETKEYS names, and no other. */
START_TEST(command_getkeys_is_the_filter)
{
	static const char *const creators[] = {"bf.add", "bf.madd", "bf.insert", "bf.reserve"};

	for (size_t c = 0; c < 4; c++) {
		size_t k = 0, argc = 0;
		const char *exists[9] = {"EXISTS"};
		size_t lens[9] = {6};

		while (strcmp(key_calls[k].name, creators[c]))
			k++;
		while (key_calls[k].call[argc])
			argc++;
		run("FLUSHALL", NULL);
		{
			size_t l[8];
			for (size_t i = 0; i < argc; i++)
				l[i] = strlen(key_calls[k].call[i]);
			runv(argc, key_calls[k].call, l);
		}
		/* Only argument 1 (the key) names a filter now. */
		for (size_t i = 1; i < argc; i++) {
			exists[1] = key_calls[k].call[i];
			lens[1] = strlen(exists[1]);
			runv(2, exists, lens);
			expect_bytes(i == 1 ? ":1\r\n" : ":0\r\n", 4);
		}
	}
}
END_TEST

START_TEST(command_and_config)
{
	run("COMMAND", "COUNT", NULL);
	ck_assert(out.len > 3 && out.data[0] == ':');
	long long count = strtoll(out.data + 1, NULL, 10);
	ck_assert_int_ge(count, 30);
	char want[32];
	snprintf(want, sizeof(want), "*%lld\r\n", count);
	run("COMMAND", NULL);
	ck_assert_mem_eq(out.data, want, strlen(want));
	/* LIST names the subcommands too, after their container. */
	run("COMMAND", "LIST", NULL);
	ck_assert(reply_has("$10\r\nbf.reserve\r\n"));
	ck_assert(reply_has("$6\r\nclient\r\n$14\r\nclient|setname\r\n"));
	ck_assert(reply_has("$14\r\nconfig|rewrite\r\n"));
	SAYS("*2\r\n" BF_ADD_INFO2 "$-1\r\n", "COMMAND", "INFO", "BF.ADD", "nosuch");
	SAYS(DEL_INFO2, "COMMAND", "INFO", "del");
	SAYS(RENAME_INFO2, "COMMAND", "INFO", "rename");
	SAYS(PING_DOCS2, "COMMAND", "DOCS", "nosuch", "ping");
	SAYS("*0\r\n", "COMMAND", "DOCS", "get");
	SAYS(BF_ADD_DOCS2, "COMMAND", "DOCS", "bf.add");
	run("COMMAND", "DOCS", NULL);
	ck_assert(reply_has("$10\r\nbf.reserve\r\n*12\r\n$7\r\nsummary\r\n$26\r\nCreates a new "
			    "Bloom Filter\r\n"));
	SAYS("*2\r\n$9\r\nbf.insert\r\n$6\r\nbf.del\r\n", "COMMAND", "LIST", "FILTERBY", "PATTERN",
	     "bf.[id]*[lt]");
	SAYS("*1\r\n$14\r\nconfig|rewrite\r\n", "COMMAND", "LIST", "filterby", "pattern",
	     "CONFIG*w*");
	SAYS("*1\r\n$6\r\nconfig\r\n", "COMMAND", "LIST", "FILTERBY", "PATTERN", "confi?");
	SAYS("*0\r\n", "COMMAND", "LIST", "FILTERBY", "MODULE", "nosuch");
	run("COMMAND", "LIST", "FILTERBY", "MODULE", "bf", NULL);
	ck_assert_mem_eq(out.data, "*12\r\n", 5);
	STARTS("*22\r\n$11\r\nclient|list\r\n$11\r\nclient|kill\r\n", "COMMAND", "LIST", "FILTERBY",
	       "ACLCAT", "dangerous");
	SAYS("*0\r\n", "COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch");
	SAYS("-ERR syntax error\r\n", "COMMAND", "LIST", "FILTERBY", "NAME", "x");
	SAYS("-ERR syntax error\r\n", "COMMAND", "LIST", "FILTERBY", "PATTERN", "x", "y");
	SAYS("*2\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n*2\r\n$1\r\nb\r\n*2\r\n"
	     "+OW\r\n+update\r\n",
	     "COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b");
	SAYS("-ERR Invalid command specified\r\n", "COMMAND", "GETKEYS", "nosuch", "a");
	SAYS("-ERR Invalid command specified\r\n", "COMMAND", "GETKEYS", "object", "nosuch", "a");
	SAYS("-ERR The command has no key arguments\r\n", "COMMAND", "GETKEYS", "client", "list");
	SAYS("-ERR Invalid number of arguments specified for command\r\n", "COMMAND", "GETKEYS",
	     "rename", "a");
	SAYS("-ERR wrong number of arguments for 'command|getkeys' command\r\n", "COMMAND",
	     "GETKEYS", "del");
	STARTS("*21\r\n+COMMAND <subcommand>", "COMMAND", "HELP");
	SAYS("-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n", "COMMAND", "FOO");
	SAYS("-ERR wrong number of arguments for 'command|count' command\r\n", "COMMAND", "COUNT",
	     "x");
	SAYS("-ERR syntax error\r\n", "COMMAND", "LIST", "x");
	SAYS("*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n\r\n", "CONFIG", "GET",
	     "save", "appendonly");
	SAYS("*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n", "CONFIG", "GET", "MAXMEM*");
	SAYS("*0\r\n", "CONFIG", "GET", "nosuch");
	run("CONFIG", "GET", "*", NULL);
	ck_assert(out.len > 3 && memcmp(out.data, "*16\r\n", 5) == 0);
	SAYS("-ERR CONFIG SET is not available\r\n", "CONFIG", "SET", "a", "b");
	SAYS("-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n", "CONFIG", "FOO", "a", "b");
	SAYS("-ERR wrong number of arguments for 'config|get' command\r\n", "CONFIG", "GET");
	SAYS("-ERR wrong number of arguments for 'config' command\r\n", "CONFIG");
	STARTS("%7\r\n", "HELLO", "3");
	SAYS("%1\r\n$4\r\nsave\r\n$0\r\n\r\n", "CONFIG", "GET", "save");
	SAYS(RENAME_INFO3, "COMMAND", "INFO", "rename");
	SAYS(EXPIRE_DOCS3, "COMMAND", "DOCS", "expire");
	SAYS("*1\r\n_\r\n", "COMMAND", "INFO", "nosuch");
	SAYS("%0\r\n", "COMMAND", "DOCS", "nosuch");
	SAYS("*2\r\n*2\r\n$1\r\na\r\n~3\r\n+RW\r\n+access\r\n+delete\r\n*2\r\n$1\r\nb\r\n~2\r\n"
	     "+OW\r\n+update\r\n",
	     "COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b");
}
END_TEST

START_TEST(info_command)
{
	SAYS("$12\r\n# Keyspace\r\n\r\n", "INFO", "keyspace");
	SAYS("$0\r\n\r\n", "INFO", "nosuch");
	SAYS(":1\r\n", "BF.ADD", "f", "x");
	SAYS("$44\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n", "INFO", "KEYSPACE");
	run("INFO", NULL);
	ck_assert_mem_eq(out.data, "$", 1);
	ck_assert(reply_has("\r\n# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
			    "blossomd_version:0.1.0\r\n"));
	ck_assert(reply_has("\r\n\r\n# Persistence\r\nloading:0\r\nasync_loading:0\r\n"
			    "rdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\n"
			    "rdb_last_save_time:1234567890\r\nrdb_last_bgsave_status:ok\r\n"
			    "aof_enabled:0\r\naof_rewrite_in_progress:0\r\n"
			    "aof_rewrite_scheduled:0\r\n\r\n"));
	ck_assert(reply_has("\r\n\r\n# Replication\r\nrole:master\r\n"));
	ck_assert(reply_has("\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n"));
	ck_assert(reply_has("\r\nmaxmemory:0\r\n"));
	char used[64];
	snprintf(used, sizeof(used), "\r\nused_memory:%llu\r\n",
		 (unsigned long long)bf_registry_memory(reg));
	ck_assert(reply_has(used));
	run("INFO", "server", "stats", NULL);
	ck_assert(reply_has("# Server\r\n"));
	ck_assert(reply_has("\r\n\r\n# Stats\r\ntotal_connections_received:0\r\n"
			    "total_commands_processed:"));
	ck_assert(!reply_has("# Keyspace"));
	STARTS("%7\r\n", "HELLO", "3");
	SAYS("=48\r\ntxt:# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n", "INFO", "keyspace");
}
END_TEST

/* A server's figures (cmd_hooks.server_info), as server.c reports them. */
static struct cmd_server_info fake_info;
static int resets;

static void fake_server_info(void *arg, struct cmd_server_info *o)
{
	(void)arg;
	*o = fake_info;
}

static void fake_reset_stats(void *arg)
{
	(void)arg;
	resets++;
	fake_info.total_connections = fake_info.rejected_connections = 0;
}

/* INFO's clients, cpu, stats, persistence and replication sections and CONFIG GET over the
 * server's figures; CONFIG RESETSTAT. */
START_TEST(info_sections_with_hooks)
{
	fake_info = (struct cmd_server_info){.connected_clients = 3,
					     .total_connections = 12,
					     .rejected_connections = 2,
					     .maxclients = 10000,
					     .ops_per_sec = 41,
					     .cpu_sys = 0.25,
					     .cpu_user = 1.5,
					     .idle_timeout = 300,
					     .snapshot_interval = 5,
					     .dirty = 4,
					     .wal = true,
					     .wal_fsync = 1,
					     .wal_bytes = 8192};
	ctx.hooks.server_info = fake_server_info;
	ctx.hooks.reset_stats = fake_reset_stats;
	resets = 0;
	SAYS("$69\r\n# Clients\r\nconnected_clients:3\r\nmaxclients:10000\r\nblocked_clients:0\r\n"
	     "\r\n",
	     "INFO", "clients");
	SAYS("$54\r\n# CPU\r\nused_cpu_sys:0.250000\r\nused_cpu_user:1.500000\r\n\r\n", "INFO",
	     "cpu");
	SAYS("$48\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n", "INFO",
	     "replication");
	SAYS("$274\r\n# Persistence\r\nloading:0\r\nasync_loading:0\r\n"
	     "rdb_changes_since_last_save:4\r\nrdb_bgsave_in_progress:0\r\n"
	     "rdb_last_save_time:1234567890\r\nrdb_last_bgsave_status:ok\r\naof_enabled:1\r\n"
	     "aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_write_status:ok\r\n"
	     "aof_current_size:8192\r\n\r\n",
	     "INFO", "persistence");
	/* Two keys checked, one found; total_commands_processed counts the INFO asking too. */
	SAYS(":1\r\n", "BF.ADD", "f", "a");
	SAYS("*2\r\n:1\r\n:0\r\n", "BF.MEXISTS", "f", "a", "b");
	SAYS("-ERR unknown command 'GET', with args beginning with: \r\n", "GET");
	SAYS("$251\r\n# Stats\r\ntotal_connections_received:12\r\ntotal_commands_processed:8\r\n"
	     "instantaneous_ops_per_sec:41\r\nrejected_connections:2\r\nexpired_keys:0\r\n"
	     "evicted_keys:0\r\nkeyspace_hits:1\r\nkeyspace_misses:1\r\npubsub_channels:0\r\n"
	     "pubsub_patterns:0\r\ntotal_error_replies:1\r\n\r\n",
	     "INFO", "stats");
	SAYS("*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$4\r\nsave\r\n$3\r\n5 1\r\n", "CONFIG", "GET",
	     "save", "appendonly");
	SAYS("*6\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"
	     "$7\r\ntimeout\r\n$3\r\n300\r\n",
	     "CONFIG", "GET", "appendfsync", "maxclients", "timeout");
	/* RESETSTAT: the counters start again; what INFO shows counts from there. */
	SAYS("+OK\r\n", "CONFIG", "RESETSTAT");
	ck_assert_int_eq(resets, 1);
	SAYS("-ERR wrong number of arguments for 'config|resetstat' command\r\n", "CONFIG",
	     "RESETSTAT", "x");
	run("INFO", "stats", NULL);
	ck_assert(reply_has("\r\ntotal_connections_received:0\r\ntotal_commands_processed:2\r\n"));
	ck_assert(reply_has("\r\nrejected_connections:0\r\n"));
	ck_assert(reply_has("\r\nkeyspace_hits:0\r\nkeyspace_misses:0\r\npubsub_channels:"
			    "0\r\npubsub_patterns:0\r\ntotal_error_replies:1\r\n"));
	/* Checkpoints off and no log: save is "", appendonly no. */
	fake_info.snapshot_interval = 0;
	fake_info.wal = false;
	fake_info.wal_fsync = 2;
	SAYS("*6\r\n$11\r\nappendfsync\r\n$2\r\nno\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$"
	     "4\r\nsave\r\n"
	     "$0\r\n\r\n",
	     "CONFIG", "GET", "save", "append*");
	STARTS("%7\r\n", "HELLO", "3");
	SAYS("%2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n\r\n", "CONFIG", "GET",
	     "save", "appendonly");
	SAYS("=52\r\ntxt:# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n", "INFO",
	     "replication");
}
END_TEST

/* CONFIG SET's server hook: records what it was given, answers fake_set_rc at pair 1. */
static char fake_set[256];
static int fake_set_rc;

static int fake_config_set(void *arg, size_t n, const char *const *keys, const char *const *vals,
			   size_t *bad, char *err, size_t errlen)
{
	(void)arg;
	fake_set[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(fake_set);
		snprintf(fake_set + len, sizeof(fake_set) - len, "%s=%s;", keys[i], vals[i]);
	}
	*bad = 1;
	snprintf(err, errlen, "bad value for %s: '%s'", keys[1 % n], vals[1 % n]);
	return fake_set_rc;
}

/* CONFIG SET: Redis's names mapped to blossomd's keys and values, Redis's errors, all or
 * nothing (the server's hook applies them). */
START_TEST(config_set)
{
	ctx.hooks.config_set = fake_config_set;
	fake_set_rc = 0;
	SAYS("+OK\r\n", "CONFIG", "SET", "maxmemory", "1mb", "MaxClients", "5", "timeout", "0");
	ck_assert_str_eq(fake_set, "max_memory=1048576;max_connections=5;idle_timeout=0;");
	SAYS("+OK\r\n", "CONFIG", "SET", "maxmemory", "2k", "save", "10 1", "loglevel", "verbose");
	ck_assert_str_eq(fake_set, "max_memory=2000;snapshot_interval=10;log_level=info;");
	SAYS("+OK\r\n", "CONFIG", "SET", "save", "", "max_key_bytes", "1K");
	ck_assert_str_eq(fake_set, "snapshot_interval=0;max_key_bytes=1K;");
	fake_set[0] = '\0';
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save "
	     "parameters\r\n",
	     "CONFIG", "SET", "save", "x");
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save "
	     "parameters (blossomd checkpoints after any change: \"SECONDS 1\")\r\n",
	     "CONFIG", "SET", "save", "3600 1 300 100");
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be "
	     "a memory value\r\n",
	     "CONFIG", "SET", "maxmemory", "1xb");
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'max_memory') - duplicate "
	     "parameter\r\n",
	     "CONFIG", "SET", "maxmemory", "1", "max_memory", "2");
	ck_assert_str_eq(fake_set, ""); /* refused before the server saw any */
	SAYS("-ERR wrong number of arguments for 'config|set' command\r\n", "CONFIG", "SET",
	     "timeout");
	SAYS("-ERR wrong number of arguments for 'config|set' command\r\n", "CONFIG", "SET",
	     "timeout", "1", "maxclients");
	/* The server's answers, about the pair it names. */
	fake_set_rc = -ENOENT;
	SAYS("-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n", "CONFIG",
	     "SET", "timeout", "1", "nosuch", "2");
	fake_set_rc = -EPERM;
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable "
	     "config\r\n",
	     "CONFIG", "SET", "timeout", "1", "port", "2");
	ck_assert_str_eq(fake_set, "idle_timeout=1;port=2;");
	fake_set_rc = -EINVAL;
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'maxclients') - bad value for "
	     "max_connections: 'x'\r\n",
	     "CONFIG", "SET", "timeout", "1", "maxclients", "x");
	SAYS("-ERR CONFIG SET failed (possibly related to argument 'appendonly') - bad value for "
	     "wal: 'no'\r\n",
	     "CONFIG", "SET", "save", "", "appendonly", "no");
	ck_assert_str_eq(fake_set, "snapshot_interval=0;wal=no;");
}
END_TEST

static int rewrite_rc;

static int fake_rewrite(void *arg, char *err, size_t errlen)
{
	(void)arg;
	snprintf(err, errlen, "cannot create a temporary file in /etc: Permission denied");
	return rewrite_rc;
}

/* CONFIG REWRITE: Redis 7.0's replies (configRewriteCommand). */
START_TEST(config_rewrite_command)
{
	SAYS("-ERR The server is running without a config file\r\n", "CONFIG", "REWRITE");
	ctx.hooks.config_rewrite = fake_rewrite;
	rewrite_rc = -EBADF;
	SAYS("-ERR The server is running without a config file\r\n", "config", "rewrite");
	rewrite_rc = -EACCES;
	SAYS("-ERR Rewriting config file: Permission denied\r\n", "CONFIG", "REWRITE");
	rewrite_rc = 0;
	SAYS("+OK\r\n", "CONFIG", "REWRITE");
	SAYS("-ERR wrong number of arguments for 'config|rewrite' command\r\n", "CONFIG", "REWRITE",
	     "x");
	run("CONFIG", "HELP", NULL);
	ck_assert(reply_has("+REWRITE\r\n+    Rewrite the configuration file.\r\n+HELP\r\n"
			    "+    Prints this help.\r\n"));
}
END_TEST

static int shutdowns, shutdown_rc;
static bool shutdown_nosave;

static int fake_shutdown(void *arg, bool nosave)
{
	(void)arg;
	shutdowns++;
	shutdown_nosave = nosave;
	return shutdown_rc;
}

/* SHUTDOWN: Redis's flag checks; then no reply, the connection closes and the server stops. */
START_TEST(shutdown_command)
{
	SAYS("-ERR Errors trying to SHUTDOWN. Check logs.\r\n", "SHUTDOWN");
	ctx.hooks.shutdown = fake_shutdown;
	shutdowns = shutdown_rc = 0;
	SAYS("-ERR No shutdown in progress.\r\n", "SHUTDOWN", "ABORT");
	SAYS("-ERR syntax error\r\n", "SHUTDOWN", "ABORT", "NOW");
	SAYS("-ERR syntax error\r\n", "SHUTDOWN", "SAVE", "NOSAVE");
	SAYS("-ERR syntax error\r\n", "SHUTDOWN", "LATER");
	ck_assert_int_eq(shutdowns, 0);
	ck_assert(!sess.close_after);
	shutdown_rc = -ENOMEM;
	SAYS("-ERR Errors trying to SHUTDOWN. Check logs.\r\n", "SHUTDOWN", "NOSAVE");
	ck_assert(!sess.close_after);
	shutdown_rc = 0;
	SAYS("", "shutdown", "nosave", "now", "force");
	ck_assert_int_eq(shutdowns, 2);
	ck_assert(sess.close_after && shutdown_nosave);
	/* SAVE and no flag: the final checkpoint is written. */
	sess.close_after = false;
	SAYS("", "SHUTDOWN", "SAVE");
	ck_assert(sess.close_after && !shutdown_nosave);
	sess.close_after = false;
	shutdown_nosave = true;
	SAYS("", "SHUTDOWN", "NOW");
	ck_assert(sess.close_after && !shutdown_nosave);
}
END_TEST

/* Replication without the server's hooks (no log): ROLE, REPLICAOF's refusal; a replica's
 * -READONLY, queued writes flagged; DEBUG DIGEST-VALUE follows what a filter holds, not its
 * reads. */
START_TEST(replication_commands)
{
	char dg[64];

	SAYS("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", "ROLE");
	SAYS("-ERR replication is not available (the write-ahead log is off)\r\n", "REPLICAOF",
	     "no", "one");
	SAYS("-ERR wrong number of arguments for 'slaveof' command\r\n", "SLAVEOF", "x");
	SAYS("-ERR Invalid master port\r\n", "REPLICAOF", "127.0.0.1", "65536");
	SAYS("-ERR syntax error\r\n", "REPLCONF", "listening-port");
	SAYS("-ERR Unrecognized REPLCONF option: foo\r\n", "REPLCONF", "foo", "1");
	SAYS("+OK\r\n", "REPLCONF", "capa", "psync2");

	SAYS("*1\r\n+0000000000000000000000000000000000000000\r\n", "DEBUG", "DIGEST-VALUE",
	     "nosuch");
	SAYS("*0\r\n", "DEBUG", "DIGEST-VALUE");
	SAYS(":1\r\n", "BF.ADD", "g", "a");
	run("DEBUG", "DIGEST-VALUE", "g", NULL);
	ck_assert_uint_eq(out.len, 4 + 1 + 40 + 2);
	snprintf(dg, sizeof(dg), "%.*s", (int)out.len, out.data);
	SAYS(":1\r\n", "BF.EXISTS", "g", "a");
	run("DEBUG", "DIGEST-VALUE", "g", NULL);
	expect_bytes(dg, strlen(dg));
	SAYS(":1\r\n", "BF.ADD", "g", "b");
	run("DEBUG", "DIGEST-VALUE", "g", NULL);
	ck_assert(out.len == strlen(dg) && memcmp(out.data, dg, out.len));

	ctx.replica = true;
	SAYS("-READONLY You can't write against a read only replica.\r\n", "BF.ADD", "g", "c");
	SAYS("-READONLY You can't write against a read only replica.\r\n", "DEL", "g");
	SAYS(":1\r\n", "BF.EXISTS", "g", "a");
	SAYS("+OK\r\n", "MULTI");
	SAYS("-READONLY You can't write against a read only replica.\r\n", "BF.ADD", "g", "c");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	ctx.replica = false;
	SAYS(":1\r\n", "BF.ADD", "g", "c");
}
END_TEST

/* MODULE LIST / HELP, OBJECT, WAIT, DEBUG SLEEP, BF.DEBUG and their COMMAND INFO entries. */
START_TEST(admin_commands)
{
	SAYS(BF_MODULE2, "MODULE", "LIST");
	SAYS(BF_MODULE2, "module", "list");
	STARTS("*5\r\n+MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n",
	       "MODULE", "HELP");
	SAYS("-ERR wrong number of arguments for 'module|list' command\r\n", "MODULE", "LIST", "x");
	SAYS("-ERR blossomd does not load modules: the BF.* family is built in\r\n", "MODULE",
	     "LOAD", "/x.so");
	SAYS("-ERR unknown subcommand 'FOO'. Try MODULE HELP.\r\n", "MODULE", "FOO");
	SAYS("-ERR wrong number of arguments for 'module' command\r\n", "MODULE");

	SAYS(":1\r\n", "BF.ADD", "f", "a");
	SAYS("$3\r\nraw\r\n", "OBJECT", "ENCODING", "f");
	SAYS("$-1\r\n", "OBJECT", "ENCODING", "nosuch");
	SAYS(":1\r\n", "OBJECT", "refcount", "f");
	SAYS(":0\r\n", "OBJECT", "IDLETIME", "f");
	ctx.now_s += 7;
	SAYS(":7\r\n", "OBJECT", "IDLETIME", "f");
	SAYS("-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please "
	     "note that when switching between policies at runtime LRU and LFU data will take some "
	     "time to adjust.\r\n",
	     "OBJECT", "FREQ", "f");
	SAYS("$-1\r\n", "OBJECT", "FREQ", "nosuch");
	SAYS("-ERR wrong number of arguments for 'object|refcount' command\r\n", "OBJECT",
	     "REFCOUNT");
	SAYS("-ERR wrong number of arguments for 'object|encoding' command\r\n", "OBJECT",
	     "ENCODING", "f", "g");
	SAYS("-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n", "OBJECT", "FOO", "f");
	STARTS("*15\r\n+OBJECT <subcommand>", "OBJECT", "HELP");

	SAYS(":0\r\n", "WAIT", "0", "0");
	SAYS(":0\r\n", "WAIT", "1", "100");
	SAYS("-ERR value is not an integer or out of range\r\n", "WAIT", "x", "0");
	SAYS("-ERR timeout is not an integer or out of range\r\n", "WAIT", "1", "x");
	SAYS("-ERR timeout is negative\r\n", "WAIT", "1", "-1");
	SAYS("-ERR wrong number of arguments for 'wait' command\r\n", "WAIT", "1");

	SAYS("+OK\r\n", "DEBUG", "SLEEP", "0");
	SAYS("+OK\r\n", "DEBUG", "sleep", "0.01");
	SAYS("+OK\r\n", "DEBUG", "SLEEP", "-1");
	SAYS("-ERR value is not a valid float\r\n", "DEBUG", "SLEEP", "x");
	SAYS("-ERR value is not a valid float\r\n", "DEBUG", "SLEEP", "inf");
	SAYS("-ERR unknown subcommand 'RELOAD'. Try DEBUG HELP.\r\n", "DEBUG", "RELOAD");
	SAYS("-ERR unknown subcommand 'SLEEP'. Try DEBUG HELP.\r\n", "DEBUG", "SLEEP");

	/* RedisBloom's BF.DEBUG lines: the items, then each layer, oldest first. */
	SAYS("+OK\r\n", "BF.RESERVE", "d", "0.01", "2");
	SAYS("*3\r\n:1\r\n:1\r\n:1\r\n", "BF.MADD", "d", "a", "b", "c");
	SAYS("*3\r\n$6\r\nsize:3\r\n"
	     "$70\r\nbytes:64 bits:512 hashes:8 hashwidth:128 capacity:2 size:2 ratio:0.002\r\n"
	     "$71\r\nbytes:64 bits:512 hashes:8 hashwidth:128 capacity:4 size:1 ratio:0.0024\r\n",
	     "BF.DEBUG", "d");
	SAYS("+OK\r\n", "BF.RESERVE", "cd", "0.01", "100", "NONSCALING", "COUNTING");
	SAYS("*2\r\n$6\r\nsize:0\r\n"
	     "$73\r\nbytes:576 bits:1152 hashes:8 hashwidth:128 capacity:100 size:0 ratio:0.01\r\n",
	     "BF.DEBUG", "cd");
	SAYS("-ERR not found\r\n", "BF.DEBUG", "nosuch");
	SAYS("-ERR wrong number of arguments for 'bf.debug' command\r\n", "BF.DEBUG", "d", "x");

	SAYS("*2\r\n*10\r\n$4\r\nwait\r\n:3\r\n*1\r\n+noscript\r\n:0\r\n:0\r\n:0\r\n*2\r\n"
	     "+@slow\r\n+@connection\r\n*2\r\n$25\r\nrequest_policy:all_shards\r\n$23\r\n"
	     "response_policy:agg_min\r\n*0\r\n*0\r\n"
	     "*10\r\n$8\r\nbf.debug\r\n:2\r\n*3\r\n+readonly\r\n+module\r\n+fast\r\n:1\r\n:1\r\n"
	     ":1\r\n*2\r\n+@read\r\n+@bloom\r\n*1\r\n$10\r\ndont_cache\r\n" RO_KEY1 "*0\r\n",
	     "COMMAND", "INFO", "wait", "BF.DEBUG");

	/* RESP3: MODULE LIST's entry is a map, a missing key's OBJECT answer a null. */
	STARTS("%7\r\n", "HELLO", "3");
	SAYS(BF_MODULE3, "MODULE", "LIST");
	SAYS("_\r\n", "OBJECT", "ENCODING", "nosuch");
	SAYS("$3\r\nraw\r\n", "OBJECT", "ENCODING", "f");
	SAYS(":0\r\n", "WAIT", "0", "0");
	SAYS("*2\r\n$6\r\nsize:0\r\n"
	     "$73\r\nbytes:576 bits:1152 hashes:8 hashwidth:128 capacity:100 size:0 ratio:0.01\r\n",
	     "BF.DEBUG", "cd");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Keyspace commands */

START_TEST(keyspace)
{
	SAYS(":0\r\n", "DBSIZE");
	SAYS("*0\r\n", "KEYS", "*");
	SAYS("*2\r\n$1\r\n0\r\n*0\r\n", "SCAN", "0");
	SAYS(":1\r\n", "BF.ADD", "k1", "x");
	SAYS(":1\r\n", "BF.ADD", "k2", "x");
	SAYS(":1\r\n", "BF.ADD", "other", "x");
	SAYS(":1\r\n", "BF.ADD", "a*b", "x");
	SAYS(":4\r\n", "DBSIZE");
	SAYS(":3\r\n", "EXISTS", "k1", "k1", "k2", "zz");
	SAYS("+MBbloom--\r\n", "TYPE", "k1");
	SAYS("+none\r\n", "TYPE", "zz");
	SAYS("*4\r\n$3\r\na*b\r\n$2\r\nk1\r\n$2\r\nk2\r\n$5\r\nother\r\n", "KEYS", "*");
	SAYS("*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n", "KEYS", "k*");
	SAYS("*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n", "KEYS", "[a-k]?");
	SAYS("*1\r\n$2\r\nk2\r\n", "KEYS", "k[^1]");
	SAYS("*1\r\n$2\r\nk1\r\n", "KEYS", "k[!1]"); /* Redis has no '!' negation */
	SAYS("*1\r\n$3\r\na*b\r\n", "KEYS", "a\\*b");
	SAYS("*1\r\n$3\r\na*b\r\n", "KEYS", "a*b");
	SAYS("*1\r\n$5\r\nother\r\n", "KEYS", "*t*e?");
	SAYS("*0\r\n", "KEYS", "K*");
	SAYS("*1\r\n$2\r\nk2\r\n", "KEYS", "[k]2");
	SAYS("*1\r\n$2\r\nk2\r\n", "KEYS", "k[2");
	/* A pattern with no wildcard is a name: not the names it is a prefix of. */
	SAYS("*1\r\n$2\r\nk1\r\n", "KEYS", "k1");
	SAYS("*0\r\n", "KEYS", "k");
	SAYS("*1\r\n$2\r\nk1\r\n", "KEYS", "k1*");
	/* In the registry's hash order, as Redis's SCAN is. */
	SAYS("*2\r\n$1\r\n0\r\n*2\r\n$2\r\nk2\r\n$2\r\nk1\r\n", "SCAN", "0", "MATCH", "k*", "COUNT",
	     "10");
	SAYS("*2\r\n$1\r\n0\r\n*1\r\n$2\r\nk1\r\n", "scan", "0", "match", "k1", "type",
	     "mbbloom--");
	SAYS("*2\r\n$1\r\n0\r\n*0\r\n", "SCAN", "0", "TYPE", "string");
	SAYS("-ERR invalid cursor\r\n", "SCAN", "x");
	SAYS("-ERR invalid cursor\r\n", "SCAN", " 0");
	SAYS("*2\r\n$1\r\n0\r\n*1\r\n$5\r\nother\r\n", "SCAN", "", "MATCH", "o*");
	SAYS("-ERR invalid cursor\r\n", "SCAN", "18446744073709551616");
	SAYS("-ERR syntax error\r\n", "SCAN", "0", "COUNT", "0");
	SAYS("-ERR value is not an integer or out of range\r\n", "SCAN", "0", "COUNT", "x");
	SAYS("-ERR syntax error\r\n", "SCAN", "0", "MATCH");
	SAYS("-ERR syntax error\r\n", "SCAN", "0", "FOO", "x");
	SAYS(":1\r\n", "DEL", "k1", "k1");
	SAYS(":2\r\n", "UNLINK", "k2", "other", "zz");
	SAYS(":1\r\n", "DBSIZE");
	SAYS("-ERR wrong number of arguments for 'del' command\r\n", "DEL");
	SAYS("-ERR wrong number of arguments for 'exists' command\r\n", "EXISTS");
	SAYS("-ERR wrong number of arguments for 'keys' command\r\n", "KEYS");
	SAYS("-ERR wrong number of arguments for 'type' command\r\n", "TYPE");
	SAYS("-ERR wrong number of arguments for 'dbsize' command\r\n", "DBSIZE", "x");
}
END_TEST

/* MEMORY USAGE key [SAMPLES count]: what max_memory charges the filter; Redis 7's errors. */
START_TEST(memory_usage)
{
	char want[64];

	SAYS(":1\r\n", "BF.ADD", "m", "x");
	const struct bf_filter *f = bf_registry_get(ctx.reg, "m", 1);
	ck_assert_ptr_nonnull(f);
	uint64_t charged = bf_registry_charge(ctx.reg, f);
	ck_assert_uint_gt(charged, bf_filter_bytes(f));
	snprintf(want, sizeof(want), ":%llu\r\n", (unsigned long long)charged);
	run("MEMORY", "USAGE", "m", NULL);
	expect_str(want);
	run("memory", "usage", "m", "SAMPLES", "5", NULL);
	expect_str(want);
	run("MEMORY", "USAGE", "m", "samples", "0", NULL);
	expect_str(want);
	SAYS("$-1\r\n", "MEMORY", "USAGE", "nope");
	SAYS("-ERR value is not an integer or out of range\r\n", "MEMORY", "USAGE", "m", "SAMPLES",
	     "x");
	SAYS("-ERR syntax error\r\n", "MEMORY", "USAGE", "m", "SAMPLES", "-1");
	SAYS("-ERR syntax error\r\n", "MEMORY", "USAGE", "m", "SAMPLES");
	SAYS("-ERR syntax error\r\n", "MEMORY", "USAGE", "m", "FOO");
	SAYS("-ERR unknown subcommand 'USAGE'. Try MEMORY HELP.\r\n", "MEMORY", "USAGE");
	SAYS("-ERR unknown subcommand 'doctor'. Try MEMORY HELP.\r\n", "MEMORY", "doctor");
	SAYS("-ERR wrong number of arguments for 'memory' command\r\n", "MEMORY");
}
END_TEST

/* FLUSHALL and FLUSHDB [ASYNC|SYNC] (Redis 7's replies, checked against redis-server 7.0):
 * every filter gone; a bad argument is a syntax error and changes nothing. */
START_TEST(flushall_flushdb)
{
	SAYS("+OK\r\n", "FLUSHALL");
	SAYS(":1\r\n", "BF.ADD", "a", "x");
	SAYS(":1\r\n", "BF.ADD", "b", "x");
	SAYS("-ERR syntax error\r\n", "FLUSHALL", "LATER");
	SAYS("-ERR syntax error\r\n", "FLUSHDB", "ASYNC", "SYNC");
	SAYS("-ERR syntax error\r\n", "flushdb", "x");
	SAYS(":2\r\n", "DBSIZE");
	SAYS("+OK\r\n", "FLUSHALL");
	SAYS(":0\r\n", "DBSIZE");
	SAYS(":0\r\n", "BF.EXISTS", "a", "x");
	SAYS(":1\r\n", "BF.ADD", "a", "x");
	SAYS("+OK\r\n", "flushdb", "async");
	SAYS(":0\r\n", "DBSIZE");
	SAYS(":1\r\n", "BF.ADD", "c", "x");
	SAYS("+OK\r\n", "FLUSHALL", "sync");
	SAYS("*0\r\n", "KEYS", "*");
	SAYS("+OK\r\n", "FLUSHDB");
}
END_TEST

START_TEST(glob_backtracking)
{
	char name[BF_NAME_MAX + 1];
	memset(name, 'a', BF_NAME_MAX);
	name[BF_NAME_MAX] = '\0';
	SAYS(":1\r\n", "BF.ADD", name, "x");
	/* Exponential for a naive matcher; linear here. */
	SAYS("*0\r\n", "KEYS", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
	run("KEYS", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a", NULL);
	ck_assert(memcmp(out.data, "*1\r\n", 4) == 0);
}
END_TEST

static int bgsaves, bgsave_rc;

static int bgsave_hook(void *arg)
{
	(void)arg;
	bgsaves++;
	return bgsave_rc;
}

START_TEST(save_commands)
{
	SAYS("+OK\r\n", "SAVE");
	/* Without a background hook, BGSAVE flushes before it answers. */
	SAYS("+Background saving started\r\n", "BGSAVE");
	SAYS("+Background saving started\r\n", "BGSAVE", "SCHEDULE");
	SAYS("-ERR syntax error\r\n", "BGSAVE", "x");
	ck_assert_int_eq(flushes, 3);
	flush_rc = -EIO;
	SAYS("-ERR snapshot failed, see the server log\r\n", "SAVE");
	SAYS("-ERR snapshot failed, see the server log\r\n", "BGSAVE");
	/* With one (the daemon's), it starts the cycle and answers at once, as Redis. */
	ctx.hooks.bgsave = bgsave_hook;
	bgsaves = bgsave_rc = 0;
	SAYS("+Background saving started\r\n", "BGSAVE");
	bgsave_rc = -EBUSY;
	SAYS("-ERR Background save already in progress\r\n", "BGSAVE");
	SAYS("-ERR Background save already in progress\r\n", "BGSAVE", "SCHEDULE");
	SAYS("-ERR syntax error\r\n", "BGSAVE", "x");
	ck_assert_int_eq(bgsaves, 3);
	ck_assert_int_eq(flushes, 5);
	SAYS(":1234567890\r\n", "LASTSAVE");
	SAYS("-ERR wrong number of arguments for 'lastsave' command\r\n", "LASTSAVE", "x");
	SAYS("-ERR wrong number of arguments for 'save' command\r\n", "SAVE", "x");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Generic errors */

START_TEST(arity_errors)
{
	static const struct {
		const char *typed, *name;
	} cmds[] = {
	    {"BF.ADD", "bf.add"},
	    {"bf.Madd", "bf.madd"},
	    {"BF.EXISTS", "bf.exists"},
	    {"BF.MEXISTS", "bf.mexists"},
	    {"BF.INSERT", "bf.insert"},
	    {"BF.RESERVE", "bf.reserve"},
	    {"BF.INFO", "bf.info"},
	    {"BF.CARD", "bf.card"},
	    {"BF.DEL", "bf.del"},
	    {"BF.SCANDUMP", "bf.scandump"},
	    {"BF.LOADCHUNK", "bf.loadchunk"},
	};
	char want[128];

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		snprintf(want, sizeof(want), "-ERR wrong number of arguments for '%s' command\r\n",
			 cmds[i].name);
		run(cmds[i].typed, NULL);
		expect_str(want);
		run(cmds[i].typed, "f", NULL);
		if (strcmp(cmds[i].name, "bf.info") && strcmp(cmds[i].name, "bf.card"))
			expect_str(want);
	}
	SAYS("-ERR wrong number of arguments for 'bf.add' command\r\n", "Bf.AdD", "f", "a", "b");
	SAYS("-ERR wrong number of arguments for 'bf.exists' command\r\n", "BF.EXISTS", "f", "a",
	     "b");
	SAYS("-ERR wrong number of arguments for 'bf.card' command\r\n", "BF.CARD", "f", "x");
	SAYS("-ERR wrong number of arguments for 'type' command\r\n", "TYPE", "a", "b");
}
END_TEST

START_TEST(unknown_commands)
{
	SAYS("-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n", "foo", "a", "b");
	SAYS("-ERR unknown command 'foo', with args beginning with: \r\n", "foo");
	SAYS("-ERR unknown command 'FLUSHEVERYTHING', with args beginning with: \r\n",
	     "FLUSHEVERYTHING");
	SAYS("-ERR unknown command 'BF.ADDX', with args beginning with: 'f' \r\n", "BF.ADDX", "f");
	SAYS("-ERR unknown command '', with args beginning with: \r\n", "");
	SAYS("-ERR unknown command 'foo', with args beginning with: 'a  b' \r\n", "foo", "a\r\nb");
	/* Each argument shown up to its first NUL, as Redis's "%s" does. */
	const char *a1[] = {"foo", "a\0b", "c"};
	const size_t l1[] = {3, 3, 1};
	runv(3, a1, l1);
	expect_str("-ERR unknown command 'foo', with args beginning with: 'a' 'c' \r\n");
	const char *a2[] = {"f\0oo", "x"};
	const size_t l2[] = {4, 1};
	runv(2, a2, l2);
	expect_str("-ERR unknown command 'f', with args beginning with: 'x' \r\n");
	/* About 128 bytes of arguments, as captured from redis-server 7.0.15. */
	char a[101], b[101], name[201];
	memset(a, 'a', 100);
	a[100] = '\0';
	memset(b, 'b', 100);
	b[100] = '\0';
	run("foo", a, b, NULL);
	expect_str("-ERR unknown command 'foo', with args beginning with: "
		   "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		   "aaaaaaaaaaaaaaaaaaaaaaa' 'bbbbbbbbbbbbbbbbbbbbbbbbb' \r\n");
	const char *many[51];
	size_t lens[51];
	many[0] = "foo";
	lens[0] = 3;
	for (int i = 1; i < 51; i++) {
		many[i] = "x";
		lens[i] = 1;
	}
	runv(51, many, lens);
	expect_str("-ERR unknown command 'foo', with args beginning with: 'x' 'x' 'x' 'x' 'x' 'x' "
		   "'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' "
		   "'x' 'x' 'x' 'x' 'x' 'x' 'x' \r\n");
	memset(name, 'f', 200);
	name[200] = '\0';
	run(name, NULL);
	expect_str("-ERR unknown command "
		   "'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
		   "ffffffffffffffffffffffffffffffffffffffffffffffffffff', with args beginning "
		   "with: \r\n");
}
END_TEST

START_TEST(counters)
{
	ck_assert_uint_eq(ctx.commands, 0);
	ck_assert_uint_eq(ctx.errors, 0);
	run("PING", NULL);
	run("BF.ADD", "f", "x", NULL);
	ck_assert_uint_eq(ctx.commands, 2);
	ck_assert_uint_eq(ctx.errors, 0);
	run("nosuch", NULL);
	run("BF.ADD", NULL);
	run("BF.INFO", "missing", NULL);
	ck_assert_uint_eq(ctx.commands, 5);
	ck_assert_uint_eq(ctx.errors, 3);
	/* An error element inside an array counts too. */
	run("BF.RESERVE", "n", "0.01", "1", "NONSCALING", NULL);
	run("BF.MADD", "n", "a", "b", NULL);
	ck_assert_uint_eq(ctx.commands, 7);
	ck_assert_uint_eq(ctx.errors, 4);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* MULTI / EXEC / DISCARD / WATCH (replies captured from redis-server 7.0.15) */

/* A fake log: records' types in order, with begin/end of transactions as 'B' and 'E'. */
static char logged_kinds[64];
static size_t nlogged;
static uint64_t next_lsn;

static uint64_t fake_log(void *arg, int type, const void *payload, size_t len)
{
	(void)arg;
	(void)payload;
	(void)len;
	if (nlogged + 1 < sizeof(logged_kinds))
		logged_kinds[nlogged++] = (char)('0' + type);
	return ++next_lsn;
}

static int fake_bgsave(void *arg)
{
	(void)arg;
	if (nlogged + 1 < sizeof(logged_kinds))
		logged_kinds[nlogged++] = 'S';
	return 0;
}

static uint64_t fake_txn(void *arg, bool end)
{
	(void)arg;
	if (nlogged + 1 < sizeof(logged_kinds))
		logged_kinds[nlogged++] = end ? 'E' : 'B';
	return end ? ++next_lsn : 0;
}

START_TEST(multi_exec_runs_queue)
{
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "a");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "a");
	SAYS("+QUEUED\r\n", "bf.exists", "f", "a");
	SAYS("+QUEUED\r\n", "BF.MADD", "f", "b", "c");
	SAYS("+QUEUED\r\n", "BF.RESERVE", "f", "0.01", "100");
	SAYS("+QUEUED\r\n", "PING");
	/* Nothing ran while queued, nor was counted. */
	ck_assert_ptr_null(filter("f"));
	ck_assert_uint_eq(ctx.commands, 1);
	/* One reply per command; one failing at run time is an error in its place. */
	SAYS("*6\r\n:1\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n-ERR item exists\r\n+PONG\r\n", "EXEC");
	ck_assert_uint_eq(ctx.commands, 8); /* MULTI, EXEC and the six */
	ck_assert_ptr_nonnull(filter("f"));
	SAYS("-ERR EXEC without MULTI\r\n", "EXEC");
	/* An empty transaction. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("*0\r\n", "EXEC");
	/* RESP3: the same replies in RESP3 form. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "HELLO", "3");
	SAYS("+QUEUED\r\n", "BF.EXISTS", "f", "zz");
	run("EXEC", NULL);
	ck_assert(reply_has("#f\r\n"));
	ck_assert_int_eq(sess.resp, 3);
}
END_TEST

START_TEST(multi_errors)
{
	SAYS("-ERR EXEC without MULTI\r\n", "EXEC");
	SAYS("-ERR DISCARD without MULTI\r\n", "DISCARD");
	SAYS("-ERR wrong number of arguments for 'watch' command\r\n", "WATCH");
	SAYS("-ERR wrong number of arguments for 'unwatch' command\r\n", "UNWATCH", "x");
	SAYS("-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' "
	     "command\r\n",
	     "EXEC", "x");
	SAYS("+OK\r\n", "MULTI");
	/* Neither of these two aborts the transaction. */
	SAYS("-ERR MULTI calls can not be nested\r\n", "MULTI");
	SAYS("-ERR WATCH inside MULTI is not allowed\r\n", "WATCH", "f");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "a");
	SAYS("*1\r\n:1\r\n", "EXEC");
	/* DISCARD drops the queue. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "a");
	SAYS("+OK\r\n", "DISCARD");
	ck_assert_ptr_null(filter("g"));
	SAYS("-ERR EXEC without MULTI\r\n", "EXEC");
	/* An EXEC with arguments inside MULTI ends the transaction with its reason. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "a");
	SAYS("-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' "
	     "command\r\n",
	     "EXEC", "x");
	ck_assert_ptr_null(filter("g"));
	SAYS("-ERR EXEC without MULTI\r\n", "EXEC");
}
END_TEST

START_TEST(multi_execabort)
{
	/* A command refused at queue time aborts the whole transaction: nothing applies. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "a");
	SAYS("-ERR wrong number of arguments for 'bf.add' command\r\n", "BF.ADD", "f");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "b");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	ck_assert_ptr_null(filter("f"));
	SAYS("-ERR EXEC without MULTI\r\n", "EXEC");
	SAYS("+OK\r\n", "MULTI");
	SAYS("-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n", "NOPE", "x");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	/* SAVE is not allowed inside; BGSAVE is queued. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("-ERR Command not allowed inside a transaction\r\n", "SAVE");
	SAYS("+QUEUED\r\n", "BGSAVE");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	ck_assert_int_eq(flushes, 0);
}
END_TEST

START_TEST(multi_limits)
{
	ctx.multi_max_commands = 2;
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "a");
	SAYS("+QUEUED\r\n", "BF.ADD", "f", "b");
	SAYS("*2\r\n:1\r\n:1\r\n", "EXEC");
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "a");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "b");
	SAYS("-ERR MULTI queue is full (multi_max_commands is 2)\r\n", "BF.ADD", "g", "c");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	ck_assert_ptr_null(filter("g"));
	/* Bytes: the arguments' bytes, "BF.ADD" "g" "a" being 8. */
	ctx.multi_max_commands = 0;
	ctx.multi_max_bytes = 16;
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "a");
	SAYS("+QUEUED\r\n", "BF.ADD", "g", "b");
	SAYS("*2\r\n:1\r\n:1\r\n", "EXEC");
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "h", "a");
	SAYS("+QUEUED\r\n", "BF.ADD", "h", "b");
	SAYS("-ERR MULTI queue is full (multi_max_bytes is 16)\r\n", "BF.ADD", "h", "c");
	SAYS("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC");
	ck_assert_ptr_null(filter("h"));
}
END_TEST

/* WATCH f, then `change` on another session, then MULTI/EXEC: the null reply, nothing run. */
static void expect_watch_abort(const char *const *change, size_t n, bool aborts)
{
	struct cmd_session other, mine;
	size_t lens[8];

	for (size_t i = 0; i < n; i++)
		lens[i] = strlen(change[i]);
	SAYS("+OK\r\n", "WATCH", "f", "zz");
	cmd_session_init(&other, 8);
	mine = sess;
	sess = other;
	runv(n, change, lens);
	other = sess;
	sess = mine;
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "BF.ADD", "t", "x");
	run("EXEC", NULL);
	if (aborts)
		ck_assert_msg(out.len == 5 && !memcmp(out.data, "*-1\r\n", 5), "%s %s: %s",
			      change[0], change[1], shown(out.data, out.len));
	else
		ck_assert_msg(out.len == 8 && !memcmp(out.data, "*1\r\n:1\r\n", 8), "%s %s: %s",
			      change[0], change[1], shown(out.data, out.len));
	ck_assert_msg(!!filter("t") == !aborts, "%s", change[0]);
	cmd_session_free(&other);
	run("DEL", "t", NULL);
}

START_TEST(watch_conflicts)
{
	static const char *const add[] = {"BF.ADD", "f", "a"};
	static const char *const again[] = {"BF.ADD", "f", "a"}; /* sets no bit: still a change */
	static const char *const exists[] = {"BF.EXISTS", "f", "a"};
	static const char *const other[] = {"BF.ADD", "g", "a"};
	static const char *const create[] = {"BF.RESERVE", "zz", "0.01", "100"};
	static const char *const expire[] = {"EXPIRE", "f", "1000"};
	static const char *const rename_to[] = {"RENAME", "g", "zz"};
	static const char *const rename_from[] = {"RENAME", "zz", "y"};
	static const char *const del[] = {"DEL", "f"};
	static const char *const flush[] = {"FLUSHALL"};

	expect_watch_abort(add, 3, true); /* creates f */
	expect_watch_abort(again, 3, true);
	expect_watch_abort(exists, 3, false);
	expect_watch_abort(other, 3, false);
	expect_watch_abort(create, 4, true); /* watched while missing, then created */
	expect_watch_abort(expire, 3, true);
	expect_watch_abort(rename_to, 3, true);
	expect_watch_abort(rename_from, 3, true);
	expect_watch_abort(del, 2, true);
	expect_watch_abort(del, 2, false); /* f is gone: the DEL changed nothing */
	run("BF.ADD", "f", "a", NULL);
	expect_watch_abort(flush, 1, true);
}
END_TEST

START_TEST(watch_resp3_unwatch_discard)
{
	SAYS("+OK\r\n", "WATCH", "f");
	SAYS(":1\r\n", "BF.ADD", "f", "a"); /* its own change counts too, as in Redis */
	SAYS("+OK\r\n", "UNWATCH");
	SAYS("+OK\r\n", "MULTI");
	SAYS("*0\r\n", "EXEC");
	/* RESP3's null. */
	run("HELLO", "3", NULL);
	SAYS("+OK\r\n", "WATCH", "f");
	SAYS("#f\r\n", "BF.ADD", "f", "a");
	SAYS("+OK\r\n", "MULTI");
	SAYS("+QUEUED\r\n", "PING");
	SAYS("_\r\n", "EXEC");
	/* EXEC and DISCARD end every WATCH. */
	SAYS("+OK\r\n", "MULTI");
	SAYS("*0\r\n", "EXEC");
	SAYS("+OK\r\n", "WATCH", "f");
	SAYS("+OK\r\n", "MULTI");
	SAYS("+OK\r\n", "DISCARD");
	SAYS("#f\r\n", "BF.ADD", "f", "a");
	SAYS("+OK\r\n", "MULTI");
	SAYS("*0\r\n", "EXEC");
	/* A WATCHed filter whose time comes before EXEC aborts it, dropped or not yet. */
	SAYS(":1\r\n", "PEXPIRE", "f", "20");
	SAYS("+OK\r\n", "WATCH", "f");
	usleep(30000);
	SAYS("+OK\r\n", "MULTI");
	SAYS("_\r\n", "EXEC");
	/* A session's end forgets its WATCHes. */
	SAYS("+OK\r\n", "WATCH", "a", "b", "a");
	ck_assert_ptr_nonnull(ctx.watches);
	cmd_session_free(&sess);
	ck_assert_ptr_null(ctx.watches);
	cmd_session_init(&sess, 7);
}
END_TEST

START_TEST(multi_is_one_log_unit)
{
	ctx.hooks.log = fake_log;
	ctx.hooks.txn = fake_txn;
	nlogged = 0;
	next_lsn = 0;
	run("MULTI", NULL);
	run("BF.ADD", "f", "a", NULL);
	run("BF.MADD", "f", "b", "c", NULL);
	run("BF.EXISTS", "f", "a", NULL);
	ck_assert_uint_eq(nlogged, 0);
	ctx.wait_lsn = 0;
	SAYS("*3\r\n:1\r\n*2\r\n:1\r\n:1\r\n:1\r\n", "EXEC");
	logged_kinds[nlogged] = '\0';
	/* CREATE, ADD, ADD between the transaction's begin and end. */
	ck_assert_str_eq(logged_kinds, "B122E");
	/* The reply waits for the end's LSN. */
	ck_assert_uint_eq(ctx.wait_lsn, 4);
	/* A BGSAVE inside starts its cycle once the transaction has ended, never inside it. */
	ctx.hooks.bgsave = fake_bgsave;
	nlogged = 0;
	run("MULTI", NULL);
	run("BF.ADD", "f", "s1", NULL);
	run("BGSAVE", NULL);
	run("BF.ADD", "f", "s2", NULL);
	SAYS("*3\r\n:1\r\n+Background saving started\r\n:1\r\n", "EXEC");
	logged_kinds[nlogged] = '\0';
	ck_assert_str_eq(logged_kinds, "B22ES");
	/* One running already: the error in its place. */
	ctx.save_in_progress = true;
	run("MULTI", NULL);
	run("BGSAVE", NULL);
	SAYS("*1\r\n-ERR Background save already in progress\r\n", "EXEC");
	ctx.save_in_progress = false;
	/* A transaction that fails at queue time logs nothing. */
	nlogged = 0;
	run("MULTI", NULL);
	run("BF.ADD", "f", "q", NULL);
	run("NOPE", NULL);
	run("EXEC", NULL);
	ck_assert_uint_eq(nlogged, 0);
	ck_assert_int_eq(bf_filter_check(filter("f"), "q", 1), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */

static Suite *resp_cmd_suite(void)
{
	Suite *s = suite_create("proto-resp-cmd");
	TCase *bf = tcase_create("bf");
	TCase *dumps = tcase_create("dump");
	TCase *conn = tcase_create("connection");
	TCase *gen = tcase_create("generic");
	TCase *clients = tcase_create("clients");
	TCase *multi = tcase_create("multi");

	tcase_add_checked_fixture(bf, setup, teardown);
	tcase_add_test(bf, reserve_ok_and_exists);
	tcase_add_test(bf, reserve_errors);
	tcase_add_test(bf, reserve_name_edge);
	tcase_add_test(bf, add_autocreates_with_defaults);
	tcase_add_test(bf, madd_mexists);
	tcase_add_test(bf, binary_items);
	tcase_add_test(bf, resp3_booleans);
	tcase_add_test(bf, nonscaling_full);
	tcase_add_test(bf, item_length_edge);
	tcase_add_test(bf, insert_options);
	tcase_add_test(bf, insert_nocreate);
	tcase_add_test(bf, insert_errors);
	tcase_add_test(bf, info_resp2);
	tcase_add_test(bf, info_resp3);
	tcase_add_test(bf, del_counting);
	tcase_add_test(bf, del_ambiguous_refused);
	tcase_add_test(bf, memory_limit_refusals);
	suite_add_tcase(s, bf);

	tcase_add_checked_fixture(dumps, setup, teardown);
	tcase_add_test(dumps, dump_roundtrip_100k);
	tcase_add_test(dumps, dump_roundtrip_kinds);
	tcase_add_test(dumps, scandump_edges);
	tcase_add_test(dumps, loadchunk_data_errors);
	tcase_add_test(dumps, loadchunk_corrupt_headers);
	tcase_add_test(dumps, loadchunk_copy_survives_snapshot);
	tcase_set_timeout(dumps, 120);
	suite_add_tcase(s, dumps);

	tcase_add_checked_fixture(conn, setup, teardown);
	tcase_add_test(conn, ping_echo_quit);
	tcase_add_test(conn, hello);
	tcase_add_test(conn, auth_select);
	tcase_add_test(conn, auth_with_token);
	tcase_add_test(conn, client);
	tcase_add_test(conn, client_list_info_alone);
	tcase_add_test(conn, client_info_multi_watch);
	tcase_add_test(conn, client_list_kill_errors);
	tcase_add_test(conn, client_kill_self_alone);
	tcase_add_test(conn, client_kill_self_old_form);
	tcase_add_test(conn, client_last_cmd);
	tcase_add_test(conn, command_and_config);
	tcase_add_test(conn, command_getkeys_every_command);
	tcase_add_test(conn, command_getkeys_is_the_filter);
	tcase_add_test(conn, info_command);
	tcase_add_test(conn, info_sections_with_hooks);
	tcase_add_test(conn, admin_commands);
	tcase_add_test(conn, replication_commands);
	tcase_add_test(conn, config_set);
	tcase_add_test(conn, shutdown_command);
	tcase_add_test(conn, config_rewrite_command);
	suite_add_tcase(s, conn);

	/* CLIENT LIST / INFO / KILL over a server's hooks (three fake connections). */
	tcase_add_checked_fixture(clients, setup_fakes, teardown);
	tcase_add_test(clients, client_with_hooks);
	tcase_add_test(clients, client_kill_all_with_hooks);
	suite_add_tcase(s, clients);

	tcase_add_checked_fixture(gen, setup, teardown);
	tcase_add_test(gen, keyspace);
	tcase_add_test(gen, flushall_flushdb);
	tcase_add_test(gen, memory_usage);
	tcase_add_test(gen, glob_backtracking);
	tcase_add_test(gen, save_commands);
	tcase_add_test(gen, arity_errors);
	tcase_add_test(gen, unknown_commands);
	tcase_add_test(gen, counters);
	suite_add_tcase(s, gen);

	tcase_add_checked_fixture(multi, setup, teardown);
	tcase_add_test(multi, multi_exec_runs_queue);
	tcase_add_test(multi, multi_errors);
	tcase_add_test(multi, multi_execabort);
	tcase_add_test(multi, multi_limits);
	tcase_add_test(multi, watch_conflicts);
	tcase_add_test(multi, watch_resp3_unwatch_discard);
	tcase_add_test(multi, multi_is_one_log_unit);
	suite_add_tcase(s, multi);
	return s;
}

CHECK_MAIN(resp_cmd_suite)
