/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of proto/resp: the RESP2/RESP3 reply encoder (exact bytes) and the resumable
 * command parser (pipelining, commands split at every byte and in random fragments, binary
 * data, every protocol error with its exact text, limits at their edge).
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/resp.h"

/* ---------------------------------------------------------------------------------------- */
/* Helpers */

#define WIRE(lit) lit, sizeof(lit) - 1

/* b holds exactly the bytes of the string literal lit. */
#define ck_assert_buf(b, lit)                                                                      \
	do {                                                                                       \
		ck_assert(!(b)->failed);                                                           \
		ck_assert_uint_eq((b)->len, sizeof(lit) - 1);                                      \
		ck_assert_mem_eq((b)->data, lit, sizeof(lit) - 1);                                 \
	} while (0)

struct arg {
	const char *p;
	size_t n;
};

#define ARG(lit)                                                                                   \
	{                                                                                          \
		lit, sizeof(lit) - 1                                                               \
	}

#define MAX_TEST_ARGS 8

struct parse_case {
	const char *wire;
	size_t len;
	size_t argc;
	struct arg args[MAX_TEST_ARGS];
};

/* Valid commands, each parsed alone and also concatenated into one pipelined stream. */
static const struct parse_case valid_cases[] = {
    {WIRE("*1\r\n$4\r\nPING\r\n"), 1, {ARG("PING")}},
    {WIRE("*3\r\n$6\r\nBF.ADD\r\n$3\r\nflt\r\n$5\r\nhello\r\n"),
     3,
     {ARG("BF.ADD"), ARG("flt"), ARG("hello")}},
    {WIRE("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"), 2, {ARG("ECHO"), ARG("")}},
    /* Binary-safe bulks: NUL, CR, LF and "\r\n" inside the data. */
    {WIRE("*2\r\n$4\r\nECHO\r\n$8\r\na\0b\r\nc\rd\r\n"), 2, {ARG("ECHO"), ARG("a\0b\r\nc\rd")}},
    {WIRE("*1\r\n$2\r\n\r\n\r\n"), 1, {ARG("\r\n")}},
    {WIRE("*1\r\n$1\r\n$\r\n"), 1, {ARG("$")}},
    {WIRE("*1\r\n$1\r\n*\r\n"), 1, {ARG("*")}},
    {WIRE("*0\r\n"), 0, {{NULL, 0}}},
    {WIRE("*-1\r\n"), 0, {{NULL, 0}}},
    {WIRE("*-100\r\n"), 0, {{NULL, 0}}},
    {WIRE("*5\r\n$5\r\nBF.MA\r\n$1\r\nf\r\n$2\r\nk1\r\n$10\r\n0123456789\r\n$0\r\n\r\n"),
     5,
     {ARG("BF.MA"), ARG("f"), ARG("k1"), ARG("0123456789"), ARG("")}},
    {WIRE("*1\r\n$12\r\n000000000012\r\n"), 1, {ARG("000000000012")}},
};

#define N_VALID (sizeof(valid_cases) / sizeof(valid_cases[0]))

static struct proto_limits test_limits(void)
{
	struct proto_limits lim = {
	    .max_bulk_bytes = 1024 * 1024,
	    .max_args = 1024,
	    .max_line_bytes = 4096,
	};
	return lim;
}

/* av holds exactly the arguments of c. */
static void check_argv(const struct proto_argv *av, const struct parse_case *c)
{
	size_t i;

	ck_assert_uint_eq(av->argc, c->argc);
	for (i = 0; i < c->argc; i++) {
		ck_assert_uint_eq(av->argvlen[i], c->args[i].n);
		if (c->args[i].n)
			ck_assert_mem_eq(av->argv[i], c->args[i].p, c->args[i].n);
	}
}

/* A heap copy of p[0..n) in a fresh allocation, so a buffer "moves" between parse calls and a
 * stale pointer kept by the parser would be caught by ASan. */
static char *fresh_copy(const char *p, size_t n)
{
	char *q = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(q);
	if (n)
		memcpy(q, p, n);
	return q;
}

/*
 * Parse wire[0..len) in one call with fresh state. The state is static because an error
 * message may live in its errbuf, which must outlive this call (until the next one).
 */
static ssize_t parse_once(const char *wire, size_t len, const struct proto_limits *lim,
			  struct proto_argv *av, const char **msg)
{
	static struct proto_resp_state st;

	proto_resp_state_init(&st);
	return proto_resp_parse(&st, wire, len, lim, av, msg);
}

/* xorshift64*: deterministic fragments without libc's global rand() state. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Encoder: exact bytes in RESP2 and RESP3 */

START_TEST(test_enc_simple)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_ok(&b);
	ck_assert_buf(&b, "+OK\r\n");
	proto_buf_reset(&b);
	proto_resp_simple(&b, WIRE("PONG"));
	ck_assert_buf(&b, "+PONG\r\n");
	proto_buf_reset(&b);
	proto_resp_simple(&b, WIRE("a\r\nb\nc"));
	ck_assert_buf(&b, "+a  b c\r\n");
	proto_buf_reset(&b);
	proto_resp_simple(&b, NULL, 0);
	ck_assert_buf(&b, "+\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_error)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_error_str(&b, "not found");
	ck_assert_buf(&b, "-ERR not found\r\n");
	proto_buf_reset(&b);
	proto_resp_error_str(&b, "-WRONGTYPE Operation against a key holding the wrong kind");
	ck_assert_buf(&b, "-WRONGTYPE Operation against a key holding the wrong kind\r\n");
	proto_buf_reset(&b);
	proto_resp_error(&b, WIRE("bad\r\nthing\r"));
	ck_assert_buf(&b, "-ERR bad  thing \r\n");
	proto_buf_reset(&b);
	proto_resp_error(&b, NULL, 0);
	ck_assert_buf(&b, "-ERR \r\n");
	proto_buf_reset(&b);
	/* The parser's messages go out as Redis sends them. */
	proto_resp_error_str(&b, "Protocol error: expected '$', got '\r'");
	ck_assert_buf(&b, "-ERR Protocol error: expected '$', got ' '\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_error_fmt)
{
	struct proto_buf b;
	char longname[600];

	proto_buf_init(&b);
	proto_resp_error_fmt(&b, "wrong number of arguments for '%s' command", "bf.add");
	ck_assert_buf(&b, "-ERR wrong number of arguments for 'bf.add' command\r\n");
	proto_buf_reset(&b);
	proto_resp_error_fmt(&b, "-NOAUTH %s", "Authentication required.");
	ck_assert_buf(&b, "-NOAUTH Authentication required.\r\n");
	proto_buf_reset(&b);
	proto_resp_error_fmt(&b, "unknown command '%s'", "a\r\nb");
	ck_assert_buf(&b, "-ERR unknown command 'a  b'\r\n");
	proto_buf_reset(&b);
	proto_resp_error_fmt(&b, "%s", "");
	ck_assert_buf(&b, "-ERR \r\n");
	/* Appended after other replies, and longer than the free space. */
	proto_buf_reset(&b);
	proto_resp_ok(&b);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	proto_resp_error_fmt(&b, "-X %s", longname);
	ck_assert_uint_eq(b.len, 5 + 3 + sizeof(longname) - 1 + 2);
	ck_assert_mem_eq(b.data, "+OK\r\n-X nnn", 11);
	ck_assert_mem_eq(b.data + b.len - 3, "n\r\n", 3);
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_integer)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_integer(&b, 0);
	proto_resp_integer(&b, 1);
	proto_resp_integer(&b, -1);
	proto_resp_integer(&b, INT64_MAX);
	proto_resp_integer(&b, INT64_MIN);
	ck_assert_buf(&b, ":0\r\n:1\r\n:-1\r\n:9223372036854775807\r\n:-9223372036854775808\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_bulk)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_bulk_str(&b, "hello");
	ck_assert_buf(&b, "$5\r\nhello\r\n");
	proto_buf_reset(&b);
	proto_resp_bulk(&b, NULL, 0);
	ck_assert_buf(&b, "$0\r\n\r\n");
	proto_buf_reset(&b);
	proto_resp_bulk(&b, WIRE("a\0\r\nb"));
	ck_assert_buf(&b, "$5\r\na\0\r\nb\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_null)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_null(&b, 2);
	proto_resp_null_array(&b, 2);
	ck_assert_buf(&b, "$-1\r\n*-1\r\n");
	proto_buf_reset(&b);
	proto_resp_null(&b, 3);
	proto_resp_null_array(&b, 3);
	ck_assert_buf(&b, "_\r\n_\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_aggregates)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_array(&b, 0);
	proto_resp_array(&b, 3);
	proto_resp_map(&b, 2, 2);
	proto_resp_set(&b, 2, 3);
	ck_assert_buf(&b, "*0\r\n*3\r\n*4\r\n*3\r\n");
	proto_buf_reset(&b);
	proto_resp_array(&b, 12345);
	proto_resp_map(&b, 3, 2);
	proto_resp_map(&b, 3, 0);
	proto_resp_set(&b, 3, 3);
	ck_assert_buf(&b, "*12345\r\n%2\r\n%0\r\n~3\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_bool)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_bool(&b, 2, true);
	proto_resp_bool(&b, 2, false);
	ck_assert_buf(&b, ":1\r\n:0\r\n");
	proto_buf_reset(&b);
	proto_resp_bool(&b, 3, true);
	proto_resp_bool(&b, 3, false);
	ck_assert_buf(&b, "#t\r\n#f\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_double)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_double(&b, 3, 1.5);
	proto_resp_double(&b, 3, 0.1);
	proto_resp_double(&b, 3, -2);
	proto_resp_double(&b, 3, 0.01);
	proto_resp_double(&b, 3, 1e21);
	proto_resp_double(&b, 3, INFINITY);
	proto_resp_double(&b, 3, -INFINITY);
	proto_resp_double(&b, 3, NAN);
	ck_assert_buf(&b, ",1.5\r\n,0.10000000000000001\r\n,-2\r\n,0.01\r\n,1e+21\r\n"
			  ",inf\r\n,-inf\r\n,nan\r\n");
	proto_buf_reset(&b);
	proto_resp_double(&b, 2, 1.5);
	proto_resp_double(&b, 2, 0.1);
	proto_resp_double(&b, 2, INFINITY);
	proto_resp_double(&b, 2, -INFINITY);
	proto_resp_double(&b, 2, -NAN);
	ck_assert_buf(&b, "$3\r\n1.5\r\n$19\r\n0.10000000000000001\r\n$3\r\ninf\r\n$4\r\n-inf\r\n"
			  "$3\r\nnan\r\n");
	proto_buf_reset(&b);
	proto_resp_double(&b, 2, -2.2250738585072014e-308);
	ck_assert_buf(&b, "$24\r\n-2.2250738585072014e-308\r\n");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_verbatim)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_verbatim(&b, 3, "txt", WIRE("hello"));
	ck_assert_buf(&b, "=9\r\ntxt:hello\r\n");
	proto_buf_reset(&b);
	proto_resp_verbatim(&b, 3, "mkd", WIRE("a\r\nb"));
	ck_assert_buf(&b, "=8\r\nmkd:a\r\nb\r\n");
	proto_buf_reset(&b);
	proto_resp_verbatim(&b, 2, "txt", WIRE("hello"));
	ck_assert_buf(&b, "$5\r\nhello\r\n");
	proto_buf_reset(&b);
	proto_resp_verbatim(&b, 3, "txt", NULL, 0);
	ck_assert_buf(&b, "=4\r\ntxt:\r\n");
	proto_buf_free(&b);
}
END_TEST

/* A whole reply as BF.INFO gives it, in both versions. */
START_TEST(test_enc_info_reply)
{
	struct proto_buf b;
	int resp;

	proto_buf_init(&b);
	for (resp = 2; resp <= 3; resp++) {
		proto_buf_reset(&b);
		proto_resp_map(&b, resp, 2);
		proto_resp_simple(&b, WIRE("Capacity"));
		proto_resp_integer(&b, 100);
		proto_resp_simple(&b, WIRE("Size"));
		proto_resp_integer(&b, 240);
		if (resp == 2)
			ck_assert_buf(&b, "*4\r\n+Capacity\r\n:100\r\n+Size\r\n:240\r\n");
		else
			ck_assert_buf(&b, "%2\r\n+Capacity\r\n:100\r\n+Size\r\n:240\r\n");
	}
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_enc_failed_buffer_stays_put)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_resp_ok(&b);
	ck_assert_int_eq(proto_buf_reserve(&b, SIZE_MAX), -ENOMEM);
	proto_resp_integer(&b, 5);
	proto_resp_bulk_str(&b, "x");
	proto_resp_error_fmt(&b, "%s", "y");
	proto_resp_double(&b, 3, 1.0);
	proto_resp_verbatim(&b, 3, "txt", WIRE("z"));
	ck_assert(b.failed);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_mem_eq(b.data, "+OK\r\n", 5);
	proto_buf_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Parser: valid input */

START_TEST(test_parse_each)
{
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	const char *msg = "unset";
	size_t i;

	proto_argv_init(&av);
	for (i = 0; i < N_VALID; i++) {
		const struct parse_case *c = &valid_cases[i];

		ck_assert_int_eq(parse_once(c->wire, c->len, &lim, &av, &msg), (ssize_t)c->len);
		ck_assert_ptr_null(msg);
		check_argv(&av, c);
		/* Zero copy: arguments point into the input. */
		if (c->argc)
			ck_assert(av.argv[0] > c->wire && av.argv[0] < c->wire + c->len);
	}
	proto_argv_free(&av);
}
END_TEST

/* A command of more elements than point_max is complete with argv[] left to the caller (the
 * daemon sets it in parts, a turn each): argc, lengths and offsets as usual; at point_max or
 * fewer the pointers are set. maxlen2 is the longest argument from the third on. */
START_TEST(test_parse_point_max)
{
	static const char wire[] = "*5\r\n$7\r\nBF.MADD\r\n$10\r\nlongername\r\n$1\r\na\r\n"
				   "$3\r\nbcd\r\n$2\r\nef\r\n";
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	const char *msg = NULL;
	size_t len = sizeof(wire) - 1;

	proto_argv_init(&av);
	lim.point_max = 4;
	ck_assert_int_eq(parse_once(wire, len, &lim, &av, &msg), (ssize_t)len);
	ck_assert(av.argv_unset);
	ck_assert_uint_eq(av.argc, 5);
	ck_assert_uint_eq(av.maxlen2, 3);
	ck_assert_uint_eq(av.argvlen[3], 3);
	ck_assert(!memcmp(wire + av.argoff[3], "bcd", 3));
	ck_assert(!memcmp(wire + av.argoff[4], "ef", 2));
	lim.point_max = 5;
	ck_assert_int_eq(parse_once(wire, len, &lim, &av, &msg), (ssize_t)len);
	ck_assert(!av.argv_unset);
	ck_assert_ptr_eq(av.argv[3], wire + av.argoff[3]);
	ck_assert_uint_eq(av.maxlen2, 3);
	proto_argv_free(&av);
}
END_TEST

START_TEST(test_parse_pipeline)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_buf in;
	struct proto_argv av;
	size_t i, off = 0;
	ssize_t n;

	proto_buf_init(&in);
	for (i = 0; i < N_VALID; i++)
		proto_buf_append(&in, valid_cases[i].wire, valid_cases[i].len);
	proto_argv_init(&av);
	proto_resp_state_init(&st);
	for (i = 0; i < N_VALID; i++) {
		n = proto_resp_parse(&st, in.data + off, in.len - off, &lim, &av, NULL);
		ck_assert_int_eq(n, (ssize_t)valid_cases[i].len);
		check_argv(&av, &valid_cases[i]);
		off += (size_t)n;
	}
	ck_assert_uint_eq(off, in.len);
	ck_assert_int_eq(proto_resp_parse(&st, in.data + off, 0, &lim, &av, NULL), 0);
	ck_assert_uint_eq(proto_resp_need(&st), 1);
	proto_argv_free(&av);
	proto_buf_free(&in);
}
END_TEST

/*
 * Each command split in two at every byte: the first part (in its own allocation) gives 0, the
 * whole command (in another allocation) then gives the same argv as in one piece.
 */
START_TEST(test_parse_split_every_byte)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	size_t i, k;

	proto_argv_init(&av);
	for (i = 0; i < N_VALID; i++) {
		const struct parse_case *c = &valid_cases[i];

		for (k = 0; k < c->len; k++) {
			char *a = fresh_copy(c->wire, k), *full;

			proto_resp_state_init(&st);
			ck_assert_int_eq(proto_resp_parse(&st, a, k, &lim, &av, NULL), 0);
			ck_assert_uint_eq(av.argc, 0);
			ck_assert_uint_gt(proto_resp_need(&st), k);
			ck_assert_uint_le(proto_resp_need(&st), c->len);
			free(a);
			full = fresh_copy(c->wire, c->len);
			ck_assert_int_eq(proto_resp_parse(&st, full, c->len, &lim, &av, NULL),
					 (ssize_t)c->len);
			check_argv(&av, c);
			free(full);
		}
	}
	proto_argv_free(&av);
}
END_TEST

/* Each command fed one byte at a time, the state carried across calls and the buffer moved
 * before every call. */
START_TEST(test_parse_byte_by_byte)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	size_t i, k;

	proto_argv_init(&av);
	for (i = 0; i < N_VALID; i++) {
		const struct parse_case *c = &valid_cases[i];

		proto_resp_state_init(&st);
		for (k = 0; k <= c->len; k++) {
			char *a = fresh_copy(c->wire, k);
			ssize_t n = proto_resp_parse(&st, a, k, &lim, &av, NULL);

			if (k < c->len) {
				ck_assert_int_eq(n, 0);
				ck_assert_uint_gt(proto_resp_need(&st), k);
				ck_assert_uint_le(proto_resp_need(&st), c->len);
			} else {
				ck_assert_int_eq(n, (ssize_t)c->len);
				check_argv(&av, c);
			}
			free(a);
		}
	}
	proto_argv_free(&av);
}
END_TEST

/* A caller that only parses again once proto_resp_need() bytes are in gets the same result. */
START_TEST(test_parse_need_driven)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	size_t i, have, calls;
	ssize_t n;

	proto_argv_init(&av);
	for (i = 0; i < N_VALID; i++) {
		const struct parse_case *c = &valid_cases[i];

		proto_resp_state_init(&st);
		have = 0;
		calls = 0;
		for (;;) {
			n = proto_resp_parse(&st, c->wire, have, &lim, &av, NULL);
			calls++;
			if (n != 0)
				break;
			ck_assert_uint_le(proto_resp_need(&st), c->len);
			have = proto_resp_need(&st);
		}
		ck_assert_int_eq(n, (ssize_t)c->len);
		check_argv(&av, c);
		ck_assert_uint_le(calls, c->len + 1);
	}
	proto_argv_free(&av);
}
END_TEST

/*
 * The whole pipelined stream cut into random fragments, as a connection reads it: the read
 * buffer grows (and moves) with each fragment, complete commands are taken from its front.
 */
START_TEST(test_parse_random_fragments)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_buf in;
	struct proto_argv av;
	uint64_t seed = 0x9E3779B97F4A7C15ULL;
	int round;
	size_t i;

	proto_buf_init(&in);
	for (round = 0; round < 20; round++) {
		for (i = 0; i < N_VALID; i++)
			proto_buf_append(&in, valid_cases[i].wire, valid_cases[i].len);
	}
	proto_argv_init(&av);
	for (round = 0; round < 200; round++) {
		char *rbuf = NULL;
		size_t rlen = 0, fed = 0, next = 0;

		proto_resp_state_init(&st);
		while (fed < in.len) {
			size_t frag = 1 + (size_t)(rng_next(&seed) % (round < 100 ? 7 : 97));
			char *nb;
			ssize_t n;

			if (frag > in.len - fed)
				frag = in.len - fed;
			nb = malloc(rlen + frag);
			ck_assert_ptr_nonnull(nb);
			if (rlen)
				memcpy(nb, rbuf, rlen);
			memcpy(nb + rlen, in.data + fed, frag);
			free(rbuf);
			rbuf = nb;
			rlen += frag;
			fed += frag;
			for (;;) {
				n = proto_resp_parse(&st, rbuf, rlen, &lim, &av, NULL);
				ck_assert_int_ge(n, 0);
				if (n == 0)
					break;
				check_argv(&av, &valid_cases[next % N_VALID]);
				next++;
				memmove(rbuf, rbuf + n, rlen - (size_t)n);
				rlen -= (size_t)n;
			}
		}
		ck_assert_uint_eq(next, 20 * N_VALID);
		ck_assert_uint_eq(rlen, 0);
		free(rbuf);
	}
	proto_argv_free(&av);
	proto_buf_free(&in);
}
END_TEST

/* Encoder output parses back to the same arguments (all 256 byte values). */
START_TEST(test_parse_roundtrip)
{
	struct proto_limits lim = test_limits();
	struct proto_buf out;
	struct proto_argv av;
	char bytes[256];
	size_t i;

	for (i = 0; i < sizeof(bytes); i++)
		bytes[i] = (char)i;
	proto_buf_init(&out);
	proto_argv_init(&av);
	proto_resp_array(&out, 100);
	for (i = 0; i < 100; i++)
		proto_resp_bulk(&out, bytes + i, 156);
	ck_assert_int_eq(parse_once(out.data, out.len, &lim, &av, NULL), (ssize_t)out.len);
	ck_assert_uint_eq(av.argc, 100);
	for (i = 0; i < 100; i++) {
		ck_assert_uint_eq(av.argvlen[i], 156);
		ck_assert_mem_eq(av.argv[i], bytes + i, 156);
	}
	proto_argv_free(&av);
	proto_buf_free(&out);
}
END_TEST

/* Once the arrays have grown, parsing the same shape again allocates nothing. */
START_TEST(test_parse_argv_reused)
{
	struct proto_limits lim = test_limits();
	struct proto_buf out;
	struct proto_argv av;
	const char **argv;
	size_t i, cap;

	proto_buf_init(&out);
	proto_argv_init(&av);
	proto_resp_array(&out, 300);
	for (i = 0; i < 300; i++)
		proto_resp_bulk_str(&out, "k");
	ck_assert_int_eq(parse_once(out.data, out.len, &lim, &av, NULL), (ssize_t)out.len);
	ck_assert_uint_eq(av.argc, 300);
	ck_assert_uint_ge(av.cap, 300);
	argv = av.argv;
	cap = av.cap;
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(parse_once(out.data, out.len, &lim, &av, NULL), (ssize_t)out.len);
		ck_assert_ptr_eq(av.argv, argv);
		ck_assert_uint_eq(av.cap, cap);
	}
	ck_assert_int_eq(proto_argv_reserve(&av, 10), 0);
	ck_assert_ptr_eq(av.argv, argv);
	ck_assert_int_eq(proto_argv_reserve(&av, SIZE_MAX), -ENOMEM);
	ck_assert_uint_eq(av.cap, cap);
	proto_argv_free(&av);
	ck_assert_ptr_null(av.argv);
	ck_assert_uint_eq(av.cap, 0);
	proto_buf_free(&out);
}
END_TEST

START_TEST(test_parse_need)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;

	proto_argv_init(&av);
	proto_resp_state_init(&st);
	ck_assert_uint_eq(proto_resp_need(&st), 1);
	/* Waiting for bulk data: the exact end of the bulk, CRLF included (4 + 5 + 10 + 2). */
	ck_assert_int_eq(proto_resp_parse(&st, WIRE("*1\r\n$10\r\nab"), &lim, &av, NULL), 0);
	ck_assert_uint_eq(proto_resp_need(&st), 21);
	/* Waiting for a line end: one more byte. */
	proto_resp_state_init(&st);
	ck_assert_int_eq(proto_resp_parse(&st, WIRE("*1\r\n$1"), &lim, &av, NULL), 0);
	ck_assert_uint_eq(proto_resp_need(&st), 7);
	/* '\r' seen, '\n' not yet. */
	proto_resp_state_init(&st);
	ck_assert_int_eq(proto_resp_parse(&st, WIRE("*1\r\n$1\r"), &lim, &av, NULL), 0);
	ck_assert_uint_eq(proto_resp_need(&st), 8);
	proto_resp_state_init(&st);
	ck_assert_int_eq(proto_resp_parse(&st, WIRE("*2"), &lim, &av, NULL), 0);
	ck_assert_uint_eq(proto_resp_need(&st), 3);
	proto_argv_free(&av);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Parser: limits */

START_TEST(test_limit_bulk_edge)
{
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	const char *msg;

	lim.max_bulk_bytes = 5;
	proto_argv_init(&av);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$5\r\nabcde\r\n"), &lim, &av, &msg), 15);
	ck_assert_uint_eq(av.argvlen[0], 5);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$6\r\nabcdef\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid bulk length");
	/* Refused on the header alone, before any data arrives. */
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$6\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid bulk length");
	lim.max_bulk_bytes = 0;
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$0\r\n\r\n"), &lim, &av, &msg), 10);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$1\r\n"), &lim, &av, &msg), -EPROTO);
	proto_argv_free(&av);
}
END_TEST

START_TEST(test_limit_args_edge)
{
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	const char *msg;

	lim.max_args = 3;
	proto_argv_init(&av);
	ck_assert_int_eq(
	    parse_once(WIRE("*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"), &lim, &av, &msg), 25);
	ck_assert_uint_eq(av.argc, 3);
	ck_assert_int_eq(
	    parse_once(WIRE("*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"), &lim, &av, &msg),
	    -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid multibulk length");
	/* Refused on the count line alone. */
	ck_assert_int_eq(parse_once(WIRE("*4\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid multibulk length");
	/* Empty commands are not limited. */
	lim.max_args = 0;
	ck_assert_int_eq(parse_once(WIRE("*0\r\n"), &lim, &av, &msg), 4);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n"), &lim, &av, &msg), -EPROTO);
	proto_argv_free(&av);
}
END_TEST

/* Before AUTH: Redis 7.0's caps (10 elements, 16384-byte bulks) with its own error texts,
 * checked after the configured limits (which keep their own error), and only then. */
START_TEST(test_limit_unauthenticated)
{
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	static char wire[32 + PROTO_RESP_UNAUTH_MAX_BULK];
	const char *msg;
	size_t n;

	ck_assert_int_eq(PROTO_RESP_UNAUTH_MAX_ARGS, 10);
	ck_assert_int_eq(PROTO_RESP_UNAUTH_MAX_BULK, 16384);
	lim.max_bulk_bytes = 1 << 20;
	lim.max_args = 1 << 20;
	lim.unauthenticated = true;
	proto_argv_init(&av);
	ck_assert_int_eq(parse_once(WIRE("*10\r\n"), &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(WIRE("*11\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: unauthenticated multibulk length");
	ck_assert_int_eq(parse_once(WIRE("*1000000\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: unauthenticated multibulk length");
	ck_assert_int_eq(parse_once(WIRE("*-1\r\n"), &lim, &av, &msg), 5);
	/* A bulk of exactly 16384 bytes is read; one more is refused on its header. */
	n = (size_t)snprintf(wire, sizeof(wire), "*1\r\n$16384\r\n");
	memset(wire + n, 'x', 16384);
	memcpy(wire + n + 16384, "\r\n", 2);
	ck_assert_int_eq(parse_once(wire, n + 16386, &lim, &av, &msg), (ssize_t)(n + 16386));
	ck_assert_uint_eq(av.argvlen[0], 16384);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$16385\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: unauthenticated bulk length");
	/* The configured limits come first, with their own words. */
	lim.max_args = 5;
	ck_assert_int_eq(parse_once(WIRE("*11\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid multibulk length");
	lim.max_bulk_bytes = 100;
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$16385\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid bulk length");
	/* Authenticated: no such caps. */
	lim = test_limits();
	ck_assert_int_eq(parse_once(WIRE("*11\r\n"), &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$16385\r\n"), &lim, &av, &msg), 0);
	proto_argv_free(&av);
}
END_TEST

/*
 * proto_resp_trim(): after a large command the arrays go back to `keep` entries; while a
 * command is half parsed its elements so far are kept, and it completes correctly.
 */
START_TEST(test_trim)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	char *wire = malloc(5000 * 7 + 16);
	size_t n, half;
	const char *msg;

	ck_assert_ptr_nonnull(wire);
	lim.max_args = 5000;
	n = (size_t)sprintf(wire, "*5000\r\n");
	for (int i = 0; i < 5000; i++)
		n += (size_t)sprintf(wire + n, "$1\r\n%c\r\n", 'a' + i % 26);
	proto_argv_init(&av);
	proto_resp_state_init(&st);
	ck_assert_int_eq(proto_resp_parse(&st, wire, n, &lim, &av, &msg), (ssize_t)n);
	ck_assert_uint_ge(av.cap, 5000);
	proto_resp_trim(&st, &av, 1024);
	ck_assert_uint_eq(av.cap, 1024);
	ck_assert_uint_eq(proto_argv_bytes(&av), 1024 * 3 * sizeof(size_t));
	ck_assert_uint_eq(av.argc, 0);
	/* Smaller than keep: nothing to do. */
	proto_resp_trim(&st, &av, 4096);
	ck_assert_uint_eq(av.cap, 1024);

	/* Half of it, trimmed to 8, then the rest: the 2500 elements so far are kept. */
	half = 7 + 2500 * 7;
	ck_assert_int_eq(proto_resp_parse(&st, wire, half, &lim, &av, &msg), 0);
	proto_resp_trim(&st, &av, 8);
	ck_assert_uint_ge(av.cap, 2500);
	ck_assert_uint_lt(av.cap, 4096);
	ck_assert_int_eq(proto_resp_parse(&st, wire, n, &lim, &av, &msg), (ssize_t)n);
	ck_assert_uint_eq(av.argc, 5000);
	for (size_t i = 0; i < 5000; i++) {
		ck_assert_uint_eq(av.argvlen[i], 1);
		ck_assert_int_eq(av.argv[i][0], 'a' + (int)(i % 26));
	}
	proto_resp_trim(&st, &av, 0);
	ck_assert_uint_eq(av.cap, 8); /* never below the first allocation's size */
	proto_argv_free(&av);
	free(wire);
}
END_TEST

/* Declared lengths cost nothing until the bytes arrive: with no bulk limit at all, a 2^63-1
 * byte bulk is accepted as a header and the parser merely says how much it still needs. */
START_TEST(test_limit_huge_declared)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	const char *msg;

	lim.max_bulk_bytes = SIZE_MAX;
	lim.max_args = SIZE_MAX;
	proto_argv_init(&av);
	proto_resp_state_init(&st);
	ck_assert_int_eq(
	    proto_resp_parse(&st, WIRE("*1\r\n$9223372036854775807\r\nabc"), &lim, &av, &msg), 0);
	ck_assert_uint_eq(proto_resp_need(&st), (size_t)26 + 9223372036854775807ULL + 2);
	ck_assert_uint_eq(av.cap, 0);
	proto_resp_state_init(&st);
	ck_assert_int_eq(
	    proto_resp_parse(&st, WIRE("*9223372036854775807\r\n$1\r\na\r\n"), &lim, &av, &msg), 0);
	ck_assert_uint_le(av.cap, 8);
	ck_assert_int_eq(parse_once(WIRE("*1\r\n$9223372036854775808\r\n"), &lim, &av, &msg),
			 -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid bulk length");
	ck_assert_int_eq(parse_once(WIRE("*9223372036854775808\r\n"), &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: invalid multibulk length");
	proto_argv_free(&av);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Parser: protocol errors, exact texts */

struct error_case {
	const char *wire;
	size_t len;
	const char *msg;
};

#define MBULK_LEN "Protocol error: invalid multibulk length"
#define BULK_LEN  "Protocol error: invalid bulk length"
#define BULK_CRLF "Protocol error: expected CRLF after bulk data"

static const struct error_case error_cases[] = {
    /* Inline commands (Redis's sdssplitargs rules). */
    {WIRE("SET \"a\r\n"), "Protocol error: unbalanced quotes in request"},
    {WIRE("SET 'a\r\n"), "Protocol error: unbalanced quotes in request"},
    {WIRE("SET \"a\"b\r\n"), "Protocol error: unbalanced quotes in request"},
    {WIRE("SET 'a'b\n"), "Protocol error: unbalanced quotes in request"},
    {WIRE("ECHO a\"b c\"d\r\n"), "Protocol error: unbalanced quotes in request"},
    {WIRE("SET \"a\\\"\r\n"), "Protocol error: unbalanced quotes in request"},
    /* Redis's own test: "Wrong multibulk payload header". */
    {WIRE("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"), "Protocol error: expected '$', got 'f'"},
    {WIRE("*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'"},
    {WIRE("*1\r\n*1\r\n"), "Protocol error: expected '$', got '*'"},
    {WIRE("*1\r\n\r\n"), "Protocol error: expected '$', got '\r'"},
    /* As in Redis, a NUL byte ends the formatted message. */
    {WIRE("*1\r\n\0\r\n"), "Protocol error: expected '$', got '"},
    {WIRE("*x\r\n"), MBULK_LEN},
    {WIRE("*\r\n"), MBULK_LEN},
    {WIRE("*+1\r\n"), MBULK_LEN},
    {WIRE("*01\r\n"), MBULK_LEN},
    {WIRE("*-0\r\n"), MBULK_LEN},
    {WIRE("*-\r\n"), MBULK_LEN},
    {WIRE("* 1\r\n"), MBULK_LEN},
    {WIRE("*1 \r\n"), MBULK_LEN},
    {WIRE("*1\rX"), MBULK_LEN},
    {WIRE("*1\r\r\n"), MBULK_LEN},
    {WIRE("*1\n\r\n"), MBULK_LEN},
    {WIRE("*9999999999999999999999\r\n"), MBULK_LEN},
    {WIRE("*18446744073709551616\r\n"), MBULK_LEN},
    {WIRE("*1025\r\n"), MBULK_LEN},
    {WIRE("*1\r\n$x\r\n"), BULK_LEN},
    {WIRE("*1\r\n$\r\n"), BULK_LEN},
    {WIRE("*1\r\n$-1\r\n"), BULK_LEN},
    {WIRE("*1\r\n$-5\r\n"), BULK_LEN},
    {WIRE("*1\r\n$-0\r\n"), BULK_LEN},
    {WIRE("*1\r\n$+1\r\n"), BULK_LEN},
    {WIRE("*1\r\n$01\r\n"), BULK_LEN},
    {WIRE("*1\r\n$1 \r\n"), BULK_LEN},
    {WIRE("*1\r\n$ 1\r\n"), BULK_LEN},
    {WIRE("*1\r\n$1\rX"), BULK_LEN},
    {WIRE("*1\r\n$9999999999999999999999\r\n"), BULK_LEN},
    {WIRE("*1\r\n$-9999999999999999999999\r\n"), BULK_LEN},
    {WIRE("*2\r\n$1\r\na\r\n$1048577\r\n"), BULK_LEN},
    {WIRE("*1\r\n$3\r\nfooXY"), BULK_CRLF},
    {WIRE("*1\r\n$3\r\nfoo\rX"), BULK_CRLF},
    {WIRE("*1\r\n$3\r\nfoo\n\r"), BULK_CRLF},
    {WIRE("*1\r\n$3\r\nfoob\r\n"), BULK_CRLF},
    {WIRE("*2\r\n$3\r\nfoo\r\n$0\r\nX\r\n"), BULK_CRLF},
};

#define N_ERRORS (sizeof(error_cases) / sizeof(error_cases[0]))

START_TEST(test_errors_exact)
{
	struct proto_limits lim = test_limits();
	const struct error_case *c = &error_cases[_i];
	struct proto_argv av;
	const char *msg = NULL;

	proto_argv_init(&av);
	ck_assert_int_eq(parse_once(c->wire, c->len, &lim, &av, &msg), -EPROTO);
	ck_assert_ptr_nonnull(msg);
	ck_assert_str_eq(msg, c->msg);
	ck_assert_uint_eq(av.argc, 0);
	proto_argv_free(&av);
}
END_TEST

/* Every prefix of a bad command gives 0 or the same error, fed whole or byte by byte. */
START_TEST(test_errors_every_prefix)
{
	struct proto_limits lim = test_limits();
	const struct error_case *c = &error_cases[_i];
	struct proto_resp_state st;
	struct proto_argv av;
	const char *msg;
	size_t k;
	ssize_t n;

	proto_argv_init(&av);
	for (k = 0; k <= c->len; k++) {
		char *a = fresh_copy(c->wire, k);

		n = parse_once(a, k, &lim, &av, &msg);
		if (n != 0) {
			ck_assert_int_eq(n, -EPROTO);
			ck_assert_str_eq(msg, c->msg);
		} else {
			ck_assert_ptr_null(msg);
			ck_assert_uint_lt(k, c->len);
		}
		free(a);
	}
	proto_resp_state_init(&st);
	for (k = 0; k <= c->len; k++) {
		char *a = fresh_copy(c->wire, k);

		n = proto_resp_parse(&st, a, k, &lim, &av, &msg);
		free(a);
		if (n != 0)
			break;
	}
	ck_assert_int_eq(n, -EPROTO);
	ck_assert_str_eq(msg, c->msg);
	proto_argv_free(&av);
}
END_TEST

/* A pipelined good command is served, then the bad one after it fails. */
START_TEST(test_error_after_good_command)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	const char in[] = "*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n";
	const char *msg;
	ssize_t n;

	proto_argv_init(&av);
	proto_resp_state_init(&st);
	n = proto_resp_parse(&st, in, sizeof(in) - 1, &lim, &av, &msg);
	ck_assert_int_eq(n, 14);
	ck_assert_uint_eq(av.argc, 1);
	n = proto_resp_parse(&st, in + n, sizeof(in) - 1 - (size_t)n, &lim, &av, &msg);
	ck_assert_int_eq(n, -EPROTO);
	ck_assert_str_eq(msg, BULK_LEN);
	proto_argv_free(&av);
}
END_TEST

/* The 64 KiB wait for a header line's end, at its edge (Redis: len > PROTO_INLINE_MAX_SIZE). */
START_TEST(test_error_header_too_big)
{
	struct proto_limits lim = test_limits();
	struct proto_resp_state st;
	struct proto_argv av;
	const size_t max = PROTO_RESP_MAX_HEADER;
	char *in = malloc(max + 100);
	const char *msg;

	ck_assert_ptr_nonnull(in);
	proto_argv_init(&av);

	/* Count line: "*" and 65535 digits (65536 bytes) waits; one more byte is refused. */
	in[0] = '*';
	memset(in + 1, '1', max + 50);
	ck_assert_int_eq(parse_once(in, max, &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(in, max + 1, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: too big mbulk count string");
	/* Resumed scanning reaches the same verdict. */
	proto_resp_state_init(&st);
	ck_assert_int_eq(proto_resp_parse(&st, in, max / 2, &lim, &av, &msg), 0);
	ck_assert_int_eq(proto_resp_parse(&st, in, max, &lim, &av, &msg), 0);
	ck_assert_int_eq(proto_resp_parse(&st, in, max + 1, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: too big mbulk count string");
	/* A '\r' that comes after 64 KiB is still a line end, and the number is then bad. */
	in[max + 10] = '\r';
	in[max + 11] = '\n';
	ck_assert_int_eq(parse_once(in, max + 12, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, MBULK_LEN);

	/* Bulk line, counted from its own first byte: "*1\r\n" then 65536 bytes wait. */
	memcpy(in, "*1\r\n$", 5);
	memset(in + 5, '1', max + 50);
	ck_assert_int_eq(parse_once(in, 4 + max, &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(in, 4 + max + 1, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: too big bulk count string");
	/* The size is judged before the '$' (Redis order). */
	memset(in + 4, 'X', max + 50);
	ck_assert_int_eq(parse_once(in, 4 + max, &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(in, 4 + max + 1, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: too big bulk count string");

	proto_argv_free(&av);
	free(in);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */

/*
 * Inline commands, as Redis reads them (redis-cli --pipe with plain lines, telnet): one line,
 * "\n" or "\r\n", split on blanks; quotes group and unescape; an empty line is an empty
 * command. Checked against redis-server 7.0's sdssplitargs().
 */
static const struct {
	const char *wire;
	size_t len, used, argc;
	struct {
		const char *p;
		size_t n;
	} argv[4];
} inline_cases[] = {
    {WIRE("PING\r\n"), 6, 1, {{WIRE("PING")}}},
    {WIRE("PING\n"), 5, 1, {{WIRE("PING")}}},
    {WIRE("\r\n"), 2, 0, {{NULL, 0}}},
    {WIRE("\n"), 1, 0, {{NULL, 0}}},
    {WIRE("   \t \r\n"), 7, 0, {{NULL, 0}}},
    {WIRE("BF.ADD  users\tu1 \r\n"), 19, 3, {{WIRE("BF.ADD")}, {WIRE("users")}, {WIRE("u1")}}},
    {WIRE("$1\r\na\r\n"), 4, 1, {{WIRE("$1")}}},
    {WIRE("ECHO \"a b\" 'c d'\r\n"), 18, 3, {{WIRE("ECHO")}, {WIRE("a b")}, {WIRE("c d")}}},
    {WIRE("ECHO \"\\x41\\n\\\\\\\"\"\r\n"), 19, 2, {{WIRE("ECHO")}, {WIRE("A\n\\\"")}}},
    {WIRE("ECHO 'it\\'s' \"\"\n"), 16, 3, {{WIRE("ECHO")}, {WIRE("it's")}, {WIRE("")}}},
    {WIRE("ECHO a\"b c\" d\r\n"), 15, 3, {{WIRE("ECHO")}, {WIRE("ab c")}, {WIRE("d")}}},
    {WIRE("ECHO \"\\xZZ\"\r\n"), 13, 2, {{WIRE("ECHO")}, {WIRE("xZZ")}}},
    {WIRE("a\rb\r\n"), 5, 2, {{WIRE("a")}, {WIRE("b")}}},
};

START_TEST(test_parse_inline)
{
	struct proto_limits lim = test_limits();
	struct proto_argv av;
	const char *msg;

	proto_argv_init(&av);
	for (size_t i = 0; i < sizeof(inline_cases) / sizeof(inline_cases[0]); i++) {
		ssize_t r = parse_once(inline_cases[i].wire, inline_cases[i].len, &lim, &av, &msg);

		ck_assert_msg(r == (ssize_t)inline_cases[i].used, "case %zu: %zd", i, r);
		ck_assert_uint_eq(av.argc, inline_cases[i].argc);
		for (size_t a = 0; a < av.argc; a++) {
			ck_assert_uint_eq(av.argvlen[a], inline_cases[i].argv[a].n);
			ck_assert_mem_eq(av.argv[a], inline_cases[i].argv[a].p, av.argvlen[a]);
		}
		/* Without its newline the line is incomplete. */
		size_t cut = inline_cases[i].used - 1;
		ck_assert_int_eq(parse_once(inline_cases[i].wire, cut, &lim, &av, &msg), 0);
	}
	/* A line without "\n" is refused past 64 KiB, as in Redis; a NUL ends the search. */
	static char big[PROTO_RESP_INLINE_MAX + 2];
	memset(big, 'a', sizeof(big));
	ck_assert_int_eq(parse_once(big, PROTO_RESP_INLINE_MAX, &lim, &av, &msg), 0);
	ck_assert_int_eq(parse_once(big, PROTO_RESP_INLINE_MAX + 1, &lim, &av, &msg), -EPROTO);
	ck_assert_str_eq(msg, "Protocol error: too big inline request");
	ck_assert_int_eq(parse_once(WIRE("PI\0NG\r\n"), &lim, &av, &msg), 0);
	/* A pipeline mixing both forms, as redis-cli --pipe ends its stream. */
	static const char mixed[] = "*1\r\n$4\r\nPING\r\n\r\nECHO x\r\n*1\r\n$4\r\nPING\r\n";
	size_t off = 0, cmds = 0;
	ssize_t r;
	struct proto_resp_state st;
	proto_resp_state_init(&st);
	while ((r = proto_resp_parse(&st, mixed + off, sizeof(mixed) - 1 - off, &lim, &av, &msg)) >
	       0) {
		off += (size_t)r;
		cmds += av.argc > 0;
	}
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(off, sizeof(mixed) - 1);
	ck_assert_uint_eq(cmds, 3);
	proto_argv_free(&av);
}
END_TEST

static Suite *resp_suite(void)
{
	Suite *s = suite_create("proto-resp");
	TCase *enc = tcase_create("encode");
	TCase *parse = tcase_create("parse");
	TCase *limits = tcase_create("limits");
	TCase *errors = tcase_create("errors");

	tcase_add_test(enc, test_enc_simple);
	tcase_add_test(enc, test_enc_error);
	tcase_add_test(enc, test_enc_error_fmt);
	tcase_add_test(enc, test_enc_integer);
	tcase_add_test(enc, test_enc_bulk);
	tcase_add_test(enc, test_enc_null);
	tcase_add_test(enc, test_enc_aggregates);
	tcase_add_test(enc, test_enc_bool);
	tcase_add_test(enc, test_enc_double);
	tcase_add_test(enc, test_enc_verbatim);
	tcase_add_test(enc, test_enc_info_reply);
	tcase_add_test(enc, test_enc_failed_buffer_stays_put);
	suite_add_tcase(s, enc);

	tcase_add_test(parse, test_parse_each);
	tcase_add_test(parse, test_parse_point_max);
	tcase_add_test(parse, test_parse_inline);
	tcase_add_test(parse, test_parse_pipeline);
	tcase_add_test(parse, test_parse_split_every_byte);
	tcase_add_test(parse, test_parse_byte_by_byte);
	tcase_add_test(parse, test_parse_need_driven);
	tcase_add_test(parse, test_parse_random_fragments);
	tcase_add_test(parse, test_parse_roundtrip);
	tcase_add_test(parse, test_parse_argv_reused);
	tcase_add_test(parse, test_parse_need);
	tcase_set_timeout(parse, 60);
	suite_add_tcase(s, parse);

	tcase_add_test(limits, test_limit_bulk_edge);
	tcase_add_test(limits, test_limit_args_edge);
	tcase_add_test(limits, test_limit_huge_declared);
	tcase_add_test(limits, test_limit_unauthenticated);
	tcase_add_test(limits, test_trim);
	suite_add_tcase(s, limits);

	tcase_add_loop_test(errors, test_errors_exact, 0, (int)N_ERRORS);
	tcase_add_loop_test(errors, test_errors_every_prefix, 0, (int)N_ERRORS);
	tcase_add_test(errors, test_error_after_good_command);
	tcase_add_test(errors, test_error_header_too_big);
	tcase_set_timeout(errors, 60);
	suite_add_tcase(s, errors);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(resp_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
