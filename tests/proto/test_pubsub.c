/* SPDX-License-Identifier: MIT */
/*
 * Publish/subscribe, keyspace notifications and MONITOR in the command layer (proto/pubsub.c,
 * proto/resp_pubsub.c): the registry and its matching, then RESP conversations with several
 * sessions whose pushes a fake server hook collects, byte for byte. Expected bytes were
 * captured from redis-server 7.0.15 (the events of a filter's own kind, bf.*, are ours:
 * RedisBloom sends none).
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check_main.h"
#include "proto/command.h"
#include "proto/pubsub.h"
#include "proto/resp_cmd.h"
#include "proto/text_cmd.h"
#include "tests/cmd_fixture.h"

#define NSESS 3

static struct cmd_ctx ctx;
static struct cmd_session sess[NSESS];
static struct proto_buf pushed[NSESS]; /* what the fake server delivered to each session */
static uint64_t pushed_lsn[NSESS];
static struct proto_buf out;
static struct proto_argv av;

static int sess_index(const struct cmd_session *s)
{
	for (int i = 0; i < NSESS; i++)
		if (&sess[i] == s)
			return i;
	ck_abort_msg("push to an unknown session");
	return -1;
}

static void push_hook(void *arg, struct cmd_session *to, const char *frame, size_t len,
		      uint64_t lsn)
{
	int i = sess_index(to);

	(void)arg;
	proto_buf_append(&pushed[i], frame, len);
	if (lsn > pushed_lsn[i])
		pushed_lsn[i] = lsn;
}

static void monitor_hook(void *arg, struct cmd_session *s, bool on)
{
	(void)arg;
	if (on != s->monitor) {
		s->monitor = on;
		ctx.monitors += on ? 1 : (size_t)-1;
	}
}

/* As the server's: a line with a fixed time and address, to every monitor. */
static void feed_hook(void *arg, const struct cmd_session *from, size_t argc,
		      const char *const *argv, const size_t *argvlen)
{
	struct proto_buf line;

	(void)arg;
	(void)from;
	proto_buf_init(&line);
	pubsub_monitor_line(&line, 1700000000123456ULL, "127.0.0.1:50000", argc, argv, argvlen);
	for (int i = 0; i < NSESS; i++)
		if (sess[i].monitor)
			push_hook(NULL, &sess[i], line.data, line.len, 0);
	proto_buf_free(&line);
}

/* CONFIG SET's server side: accepts what the command layer passes on. */
static int config_set_hook(void *arg, size_t n, const char *const *keys, const char *const *vals,
			   size_t *bad, char *err, size_t errlen)
{
	(void)arg;
	(void)n;
	(void)keys;
	(void)vals;
	(void)bad;
	(void)err;
	(void)errlen;
	return 0;
}

static void setup(void)
{
	cmd_fixture_init(&ctx, 0, 1024, 1024);
	ctx.hooks = (struct cmd_hooks){.push = push_hook,
				       .monitor = monitor_hook,
				       .monitor_feed = feed_hook,
				       .config_set = config_set_hook};
	ctx.max_channel_bytes = 64;
	for (int i = 0; i < NSESS; i++) {
		cmd_session_init(&sess[i], (uint64_t)i + 1);
		proto_buf_init(&pushed[i]);
		pushed_lsn[i] = 0;
	}
	proto_buf_init(&out);
	proto_argv_init(&av);
}

static void teardown(void)
{
	for (int i = 0; i < NSESS; i++) {
		cmd_session_free(&sess[i]);
		proto_buf_free(&pushed[i]);
	}
	proto_buf_free(&out);
	proto_argv_free(&av);
	cmd_ctx_free(&ctx);
	cmd_fixture_free(&ctx);
}

/* Run one command of NUL-terminated arguments (ending with NULL) as session i. */
static void run(int i, const char *first, ...)
{
	const char *args[32];
	size_t lens[32], n = 0;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		args[n] = a;
		lens[n++] = strlen(a);
	}
	va_end(ap);
	ck_assert_int_eq(proto_argv_reserve(&av, n), 0);
	for (size_t k = 0; k < n; k++) {
		av.argv[k] = args[k];
		av.argvlen[k] = lens[k];
	}
	av.argc = n;
	av.maxlen2 = 0;
	proto_buf_reset(&out);
	resp_cmd_exec(&ctx, &sess[i], &av, &out);
	ck_assert(!out.failed);
}

static void expect(const struct proto_buf *b, const char *want)
{
	size_t n = strlen(want);

	ck_assert_msg(b->len == n && (n == 0 || memcmp(b->data, want, n) == 0),
		      "got %zu bytes \"%.*s\", want \"%s\"", b->len, (int)b->len,
		      b->data ? b->data : "", want);
}

/* The reply to session i's command is want. */
#define SAYS(i, want, ...)                                                                         \
	do {                                                                                       \
		run(i, __VA_ARGS__, NULL);                                                         \
		expect(&out, want);                                                                \
	} while (0)

/* What session i was pushed since the last look is want. */
static void got(int i, const char *want)
{
	expect(&pushed[i], want);
	proto_buf_reset(&pushed[i]);
}

/* ---------------------------------------------------------------------------------------- */
/* The registry */

START_TEST(registry_counts_and_order)
{
	struct pubsub *ps;

	ck_assert_int_eq(pubsub_new(&ps), 0);
	ck_assert_uint_eq(pubsub_session_bytes(&sess[0]), 0);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[0], false, "a", 1), 1);
	size_t one = pubsub_session_bytes(&sess[0]);
	ck_assert_uint_gt(one, 0);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[0], false, "a", 1), 0);
	ck_assert_uint_eq(pubsub_session_bytes(&sess[0]), one);
	/* A longer name costs more; a pattern more again (its compiled tokens). */
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[2], false, "0123456789", 10), 1);
	ck_assert_uint_eq(pubsub_session_bytes(&sess[2]), one + 9);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[2], true, "0123456789", 10), 1);
	ck_assert_uint_gt(pubsub_session_bytes(&sess[2]), one + 9 + 10 * 40);
	pubsub_session_end(&sess[2]);
	ck_assert_uint_eq(pubsub_session_bytes(&sess[2]), 0);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[1], false, "a", 1), 1);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[0], true, "a*", 2), 1);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[1], true, "a*", 2), 1);
	ck_assert_int_eq(pubsub_subscribe(ps, &sess[1], true, "b?", 2), 1);
	ck_assert_uint_eq(pubsub_numsub(ps, "a", 1), 2);
	ck_assert_uint_eq(pubsub_numsub(ps, "b", 1), 0);
	ck_assert_uint_eq(pubsub_nchannels(ps), 1);
	ck_assert_uint_eq(pubsub_npatterns(ps), 2); /* distinct patterns, as Redis 7.0 */
	ck_assert_uint_eq(pubsub_session_count(&sess[1], true), 2);
	ck_assert_int_eq(pubsub_unsubscribe(ps, &sess[1], false, "zz", 2), 0);
	ck_assert_int_eq(pubsub_unsubscribe(ps, &sess[1], false, "a", 1), 1);
	ck_assert_uint_eq(pubsub_numsub(ps, "a", 1), 1);
	/* Its last subscriber gone, a channel is gone. */
	ck_assert_int_eq(pubsub_unsubscribe(ps, &sess[0], false, "a", 1), 1);
	ck_assert_uint_gt(pubsub_session_bytes(&sess[0]), 0); /* its pattern */
	ck_assert_uint_eq(pubsub_nchannels(ps), 0);
	pubsub_session_end(&sess[1]);
	ck_assert_ptr_null(sess[1].pubsub);
	ck_assert_uint_eq(pubsub_npatterns(ps), 1);
	/* A session with patterns left when the registry goes is ended with it. */
	pubsub_free(ps);
	ck_assert_ptr_null(sess[0].pubsub);
}
END_TEST

static void collect(void *arg, struct cmd_session *to, const char *frame, size_t len)
{
	(void)arg;
	proto_buf_append(&pushed[sess_index(to)], frame, len);
}

START_TEST(registry_publish_frames_and_glob)
{
	struct pubsub *ps;

	ck_assert_int_eq(pubsub_new(&ps), 0);
	sess[1].resp = 3;
	pubsub_subscribe(ps, &sess[0], false, "news", 4);
	pubsub_subscribe(ps, &sess[0], true, "n[a-e]w?", 8);
	pubsub_subscribe(ps, &sess[1], true, "*", 1);
	pubsub_subscribe(ps, &sess[2], true, "x\\*", 3);
	ck_assert_uint_eq(pubsub_publish(ps, "news", 4, "hi", 2, collect, NULL), 3);
	got(0, "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
	       "*4\r\n$8\r\npmessage\r\n$8\r\nn[a-e]w?\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
	got(1, ">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
	got(2, "");
	/* Binary channels and messages; an escaped '*' is a literal. */
	ck_assert_uint_eq(pubsub_publish(ps, "x*", 2, "\0\r\n", 3, collect, NULL), 2);
	{
		static const char want[] =
		    "*4\r\n$8\r\npmessage\r\n$3\r\nx\\*\r\n$2\r\nx*\r\n$3\r\n\0\r\n\r\n";
		ck_assert_uint_eq(pushed[2].len, sizeof(want) - 1);
		ck_assert_mem_eq(pushed[2].data, want, sizeof(want) - 1);
		proto_buf_reset(&pushed[2]);
	}
	ck_assert_uint_eq(pubsub_publish(ps, "xy", 2, "m", 1, collect, NULL), 1);
	got(2, "");
	pubsub_free(ps);
}
END_TEST

START_TEST(notify_flags_as_redis)
{
	char buf[16];

	ck_assert_int_eq(pubsub_notify_parse("", 0), 0);
	ck_assert_int_eq(pubsub_notify_parse("KEA", 3),
			 PUBSUB_NOTIFY_KEYSPACE | PUBSUB_NOTIFY_KEYEVENT | PUBSUB_NOTIFY_ALL);
	ck_assert_int_eq(pubsub_notify_parse("Kq", 2), -1);
	ck_assert_int_eq(pubsub_notify_parse("k", 1), -1); /* case matters */
	/* Redis's CONFIG GET forms (captured): A first, n dropped beside A, m last. */
	pubsub_notify_format(pubsub_notify_parse("KEAn", 4), buf);
	ck_assert_str_eq(buf, "AKE");
	pubsub_notify_format(pubsub_notify_parse("mEgx", 4), buf);
	ck_assert_str_eq(buf, "gxEm");
	pubsub_notify_format(pubsub_notify_parse("Ag$lshzxeKEtmdn", 15), buf);
	ck_assert_str_eq(buf, "AKEm");
	pubsub_notify_format(0, buf);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(monitor_line_quotes_as_sdscatrepr)
{
	const char *argv[] = {"SET", "k", "a\"b\\\x01\n\xff \r\t\a\b"};
	const size_t lens[] = {3, 1, 12};

	pubsub_monitor_line(&out, 1700000000000042ULL, "[::1]:7", 3, argv, lens);
	expect(&out, "+1700000000.000042 [0 [::1]:7] \"SET\" \"k\" "
		     "\"a\\\"b\\\\\\x01\\n\\xff \\r\\t\\a\\b\"\r\n");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* RESP conversations (bytes captured from redis-server 7.0.15) */

START_TEST(subscribe_resp2_conversation)
{
	SAYS(0,
	     "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
	     "SUBSCRIBE", "a", "b");
	SAYS(0, "*2\r\n$4\r\npong\r\n$0\r\n\r\n", "PING");
	SAYS(0, "*2\r\n$4\r\npong\r\n$1\r\nx\r\n", "PING", "x");
	SAYS(0,
	     "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
	     "RESET are allowed in this context\r\n",
	     "GET", "k");
	SAYS(0,
	     "-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
	     "QUIT / RESET are allowed in this context\r\n",
	     "CLIENT", "LIST");
	SAYS(0,
	     "-ERR Can't execute 'bf.add': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
	     "RESET are allowed in this context\r\n",
	     "BF.ADD", "f", "k");
	/* Oldest first (Redis: its hash table's order). */
	SAYS(0,
	     "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:"
	     "0\r\n",
	     "UNSUBSCRIBE");
	SAYS(0, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n", "UNSUBSCRIBE");
	SAYS(0, "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n", "PUNSUBSCRIBE");
	SAYS(0, "+PONG\r\n", "PING");
	ck_assert_ptr_null(sess[0].pubsub);
}
END_TEST

START_TEST(psubscribe_counts_channels_and_patterns)
{
	SAYS(0,
	     "*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:1\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nb?\r\n:"
	     "2\r\n",
	     "PSUBSCRIBE", "a*", "b?");
	SAYS(0, "*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:2\r\n", "PSUBSCRIBE", "a*");
	SAYS(0, "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:3\r\n", "SUBSCRIBE", "x");
	SAYS(0,
	     "*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:2\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nb?"
	     "\r\n"
	     ":1\r\n",
	     "PUNSUBSCRIBE");
	SAYS(0,
	     "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\ny\r\n:"
	     "0\r\n",
	     "UNSUBSCRIBE", "x", "y");
}
END_TEST

START_TEST(publish_and_pubsub_introspection)
{
	SAYS(0, "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "SUBSCRIBE", "ch");
	run(0, "PSUBSCRIBE", "c*", "x?", NULL);
	SAYS(1, ":2\r\n", "PUBLISH", "ch", "hello");
	got(0, "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"
	       "*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$5\r\nhello\r\n");
	SAYS(1, ":1\r\n", "PUBLISH", "xy", "m");
	got(0, "*4\r\n$8\r\npmessage\r\n$2\r\nx?\r\n$2\r\nxy\r\n$1\r\nm\r\n");
	SAYS(1, ":0\r\n", "PUBLISH", "zz", "m");
	got(0, "");
	SAYS(1, "*4\r\n$2\r\nch\r\n:1\r\n$2\r\nzz\r\n:0\r\n", "PUBSUB", "NUMSUB", "ch", "zz");
	SAYS(1, "*0\r\n", "PUBSUB", "NUMSUB");
	SAYS(1, ":2\r\n", "PUBSUB", "NUMPAT");
	SAYS(1, "*1\r\n$2\r\nch\r\n", "PUBSUB", "CHANNELS");
	SAYS(1, "*0\r\n", "PUBSUB", "CHANNELS", "x*");
	SAYS(1, "*1\r\n$2\r\nch\r\n", "pubsub", "channels", "c?");
	SAYS(1, "*0\r\n", "PUBSUB", "SHARDCHANNELS");
	SAYS(1, "*2\r\n$1\r\na\r\n:0\r\n", "PUBSUB", "SHARDNUMSUB", "a");
	SAYS(1, "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n", "PUBSUB",
	     "NUMPAT", "x");
	SAYS(1,
	     "-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB "
	     "HELP.\r\n",
	     "PUBSUB", "CHANNELS", "a", "b");
	SAYS(1, "-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n", "PUBSUB", "FOO");
	SAYS(1, "-ERR wrong number of arguments for 'pubsub|help' command\r\n", "PUBSUB", "HELP",
	     "x");
	SAYS(1, "-ERR wrong number of arguments for 'pubsub' command\r\n", "PUBSUB");
	SAYS(1, "-ERR wrong number of arguments for 'publish' command\r\n", "PUBLISH", "a");
	SAYS(1, "-ERR wrong number of arguments for 'subscribe' command\r\n", "SUBSCRIBE");
	SAYS(1, "-ERR wrong number of arguments for 'psubscribe' command\r\n", "PSUBSCRIBE");
}
END_TEST

START_TEST(resp3_pushes_and_no_restriction)
{
	sess[0].resp = 3;
	SAYS(0, ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", "SUBSCRIBE", "a");
	SAYS(0, "+PONG\r\n", "PING");
	SAYS(0, "$1\r\nx\r\n", "ECHO", "x");
	/* Its own PUBLISH: the message is pushed (the server puts it before this reply). */
	SAYS(0, ":1\r\n", "PUBLISH", "a", "me");
	got(0, ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nme\r\n");
	SAYS(0, ">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n", "UNSUBSCRIBE");
	SAYS(0, ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n", "UNSUBSCRIBE");
	SAYS(0, ">3\r\n$12\r\npunsubscribe\r\n_\r\n:0\r\n", "PUNSUBSCRIBE");
}
END_TEST

START_TEST(multi_subscribe_and_monitor)
{
	SAYS(0, "+OK\r\n", "MULTI");
	SAYS(0, "+QUEUED\r\n", "SUBSCRIBE", "a");
	SAYS(0, "*1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", "EXEC");
	SAYS(0, "+RESET\r\n", "RESET");
	ck_assert_ptr_null(sess[0].pubsub);
	SAYS(0, "+PONG\r\n", "PING");
	SAYS(0, "+OK\r\n", "MULTI");
	SAYS(0, "+QUEUED\r\n", "MONITOR");
	SAYS(0, "*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n", "EXEC");
	ck_assert(!sess[0].monitor);
	/* RESET is not queued: it ends the transaction at once. */
	SAYS(0, "+OK\r\n", "MULTI");
	SAYS(0, "+QUEUED\r\n", "PING");
	SAYS(0, "+RESET\r\n", "RESET");
	SAYS(0, "-ERR EXEC without MULTI\r\n", "EXEC");
}
END_TEST

START_TEST(channel_length_limit)
{
	char at[65], over[66];

	memset(at, 'c', 64);
	at[64] = '\0';
	memset(over, 'c', 65);
	over[65] = '\0';
	run(0, "SUBSCRIBE", at, NULL);
	ck_assert_uint_eq(pubsub_session_count(&sess[0], false), 1);
	SAYS(0,
	     "-ERR channel longer than max_channel_bytes (64)\r\n"
	     "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
	     "SUBSCRIBE", over, "b");
	SAYS(0, "-ERR channel longer than max_channel_bytes (64)\r\n", "PSUBSCRIBE", over);
	SAYS(1, "-ERR channel longer than max_channel_bytes (64)\r\n", "PUBLISH", over, "m");
	SAYS(1, ":1\r\n", "PUBLISH", at, "m");
}
END_TEST

START_TEST(monitor_shows_commands_as_redis)
{
	SAYS(0, "+OK\r\n", "MONITOR");
	SAYS(0, "", "MONITOR"); /* a second one is ignored, with no reply */
	ck_assert_uint_eq(ctx.monitors, 1);
	run(1, "BF.ADD", "f", "k", NULL);
	run(1, "AUTH", "x", NULL);
	run(1, "HELLO", "3", "AUTH", "a", "b", NULL);
	run(1, "CONFIG", "GET", "x", NULL); /* admin: not shown */
	run(1, "CLIENT", "LIST", NULL);	    /* admin */
	run(1, "CLIENT", "ID", NULL);
	run(1, "GET", NULL);		/* unknown: not shown */
	run(1, "PING", "a", "b", NULL); /* refused for its arity: not shown */
	run(1, "SAVE", NULL);
	run(1, "LASTSAVE", NULL);
	got(0, "+1700000000.123456 [0 127.0.0.1:50000] \"BF.ADD\" \"f\" \"k\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"AUTH\" \"(redacted)\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"HELLO\" \"3\" \"AUTH\" \"(redacted)\" "
	       "\"(redacted)\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"CLIENT\" \"ID\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"LASTSAVE\"\r\n");
	/* A transaction: MULTI, its commands when EXEC runs them, then EXEC. */
	run(1, "MULTI", NULL);
	run(1, "BF.ADD", "f", "j", NULL);
	got(0, "+1700000000.123456 [0 127.0.0.1:50000] \"MULTI\"\r\n");
	run(1, "EXEC", NULL);
	got(0, "+1700000000.123456 [0 127.0.0.1:50000] \"BF.ADD\" \"f\" \"j\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"EXEC\"\r\n");
	/* The text protocol: its words as sent; auth's token redacted; unknown lines hidden. */
	text_cmd_exec(&ctx, &sess[2], "set f a b", 9, &out);
	text_cmd_exec(&ctx, &sess[2], "auth secret", 11, &out);
	text_cmd_exec(&ctx, &sess[2], "bogus x", 7, &out);
	got(0, "+1700000000.123456 [0 127.0.0.1:50000] \"set\" \"f\" \"a\" \"b\"\r\n"
	       "+1700000000.123456 [0 127.0.0.1:50000] \"auth\" \"(redacted)\"\r\n");
	SAYS(0, "+RESET\r\n", "RESET");
	ck_assert_uint_eq(ctx.monitors, 0);
	run(1, "PING", NULL);
	got(0, "");
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Keyspace notifications */

/* Session 0 listens on every keyspace and keyevent channel. */
static void listen_all(void)
{
	run(0, "PSUBSCRIBE", "__key*", NULL);
}

/* The two pmessages of one event on name. */
static void event(struct proto_buf *b, const char *name, const char *ev)
{
	proto_buf_append_fmt(b,
			     "*4\r\n$8\r\npmessage\r\n$6\r\n__key*\r\n$%zu\r\n__keyspace@0__:%s\r\n"
			     "$%zu\r\n%s\r\n",
			     15 + strlen(name), name, strlen(ev), ev);
	proto_buf_append_fmt(b,
			     "*4\r\n$8\r\npmessage\r\n$6\r\n__key*\r\n$%zu\r\n__keyevent@0__:%s\r\n"
			     "$%zu\r\n%s\r\n",
			     15 + strlen(ev), ev, strlen(name), name);
}

/* Session 0 was pushed exactly the events given as (name, event) pairs, NULL-ended. */
static void events(const char *name, ...)
{
	struct proto_buf want;
	va_list ap;

	proto_buf_init(&want);
	va_start(ap, name);
	for (const char *n = name; n; n = va_arg(ap, const char *))
		event(&want, n, va_arg(ap, const char *));
	va_end(ap);
	proto_buf_append_char(&want, '\0');
	got(0, want.data);
	proto_buf_free(&want);
}

START_TEST(keyspace_events_off_by_default)
{
	listen_all();
	proto_buf_reset(&pushed[0]);
	run(1, "BF.ADD", "f", "k", NULL);
	run(1, "DEL", "f", NULL);
	got(0, "");
}
END_TEST

START_TEST(keyspace_events_of_every_change)
{
	ctx.notify = pubsub_notify_parse("KEAn", 4);
	listen_all();
	proto_buf_reset(&pushed[0]);
	run(1, "BF.RESERVE", "a", "0.01", "100", NULL);
	events("a", "new", "a", "bf.reserve", NULL);
	run(1, "BF.ADD", "a", "x", NULL);
	events("a", "bf.add", NULL);
	run(1, "BF.ADD", "a", "x", NULL); /* nothing changed: no event, as Redis's SADD */
	events(NULL);
	run(1, "BF.MADD", "b", "x", "y", NULL); /* auto-create */
	events("b", "new", "b", "bf.reserve", "b", "bf.add", NULL);
	/* RENAME over an existing filter: Redis's order, and no del for the one replaced. */
	run(1, "RENAME", "a", "b", NULL);
	events("b", "new", "a", "rename_from", "b", "rename_to", NULL);
	run(1, "EXPIRE", "b", "100", NULL);
	events("b", "expire", NULL);
	run(1, "PERSIST", "b", NULL);
	events("b", "persist", NULL);
	run(1, "PERSIST", "b", NULL);
	events(NULL);
	run(1, "BF.RESERVE", "c", "0.01", "100", "COUNTING", NULL);
	run(1, "BF.ADD", "c", "k", NULL);
	run(1, "BF.DEL", "c", "k", NULL);
	run(1, "BF.DEL", "c", "k", NULL); /* absent: nothing deleted */
	events("c", "new", "c", "bf.reserve", "c", "bf.add", "c", "bf.del", NULL);
	run(1, "EXPIRE", "c", "-1", NULL); /* a time past: deleted, as Redis */
	events("c", "del", NULL);
	run(1, "DEL", "b", NULL);
	events("b", "del", NULL);
	run(1, "FLUSHALL", NULL); /* Redis sends none for FLUSHALL */
	events(NULL);
}
END_TEST

START_TEST(keyspace_events_from_text_and_expiry)
{
	struct proto_buf r;

	proto_buf_init(&r);
	ctx.notify = pubsub_notify_parse("Exgd", 4); /* keyevent channels only */
	run(0, "SUBSCRIBE", "__keyevent@0__:bf.add", "__keyevent@0__:expired", "__keyevent@0__:del",
	    NULL);
	proto_buf_reset(&pushed[0]);
	text_cmd_exec(&ctx, &sess[1], "create t", 8, &r);
	text_cmd_exec(&ctx, &sess[1], "set t k", 7, &r);
	text_cmd_exec(&ctx, &sess[1], "drop t", 6, &r);
	got(0, "*3\r\n$7\r\nmessage\r\n$21\r\n__keyevent@0__:bf.add\r\n$1\r\nt\r\n"
	       "*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:del\r\n$1\r\nt\r\n");
	run(1, "BF.ADD", "e", "k", NULL);
	run(1, "PEXPIREAT", "e", "1", NULL);
	proto_buf_reset(&pushed[0]);
	/* Set to expire in the past: a del, not an expiry. A filter whose time comes expires. */
	run(1, "BF.ADD", "g", "k", NULL);
	run(1, "PEXPIRE", "g", "100000", NULL);
	proto_buf_reset(&pushed[0]);
	cmd_expire_due(&ctx, cmd_now_ms() + 200000, 0);
	got(0, "*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$1\r\ng\r\n");
	/* Without K or E, classes alone send nothing. */
	ctx.notify = pubsub_notify_parse("A", 1);
	run(1, "BF.ADD", "h", "k", NULL);
	got(0, "");
	proto_buf_free(&r);
}
END_TEST

START_TEST(config_notify_keyspace_events)
{
	SAYS(0, "*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n", "CONFIG", "GET",
	     "notify-keyspace-events");
	ctx.notify = pubsub_notify_parse("KEAn", 4);
	SAYS(0, "*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n", "CONFIG", "GET",
	     "notify-keyspace-events");
	SAYS(0,
	     "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - "
	     "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n",
	     "CONFIG", "SET", "notify-keyspace-events", "Q");
}
END_TEST

START_TEST(client_list_and_info_fields)
{
	run(0, "SUBSCRIBE", "a", "b", NULL);
	run(0, "PSUBSCRIBE", "p*", NULL);
	sess[0].resp = 3; /* to ask while subscribed */
	run(0, "CLIENT", "INFO", NULL);
	ck_assert_msg(strstr(out.data, " flags=P db=0 sub=2 psub=1 ssub=0 "), "%.*s", (int)out.len,
		      out.data);
	run(1, "MONITOR", NULL);
	run(1, "CLIENT", "INFO", NULL);
	ck_assert(strstr(out.data, " flags=O db=0 sub=0 psub=0 ssub=0 "));
	run(1, "INFO", "stats", NULL);
	ck_assert(strstr(out.data, "\r\npubsub_channels:2\r\npubsub_patterns:1\r\n"));
}
END_TEST

static Suite *pubsub_suite(void)
{
	Suite *s = suite_create("pubsub");
	TCase *t = tcase_create("registry");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, registry_counts_and_order);
	tcase_add_test(t, registry_publish_frames_and_glob);
	tcase_add_test(t, notify_flags_as_redis);
	tcase_add_test(t, monitor_line_quotes_as_sdscatrepr);
	suite_add_tcase(s, t);

	t = tcase_create("resp");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, subscribe_resp2_conversation);
	tcase_add_test(t, psubscribe_counts_channels_and_patterns);
	tcase_add_test(t, publish_and_pubsub_introspection);
	tcase_add_test(t, resp3_pushes_and_no_restriction);
	tcase_add_test(t, multi_subscribe_and_monitor);
	tcase_add_test(t, channel_length_limit);
	tcase_add_test(t, monitor_shows_commands_as_redis);
	suite_add_tcase(s, t);

	t = tcase_create("keyspace");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, keyspace_events_off_by_default);
	tcase_add_test(t, keyspace_events_of_every_change);
	tcase_add_test(t, keyspace_events_from_text_and_expiry);
	tcase_add_test(t, config_notify_keyspace_events);
	tcase_add_test(t, client_list_and_info_fields);
	suite_add_tcase(s, t);
	return s;
}

CHECK_MAIN(pubsub_suite)
