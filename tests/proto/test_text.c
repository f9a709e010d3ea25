/* SPDX-License-Identifier: MIT */
/* Unit tests of proto/text: line framing, over-long lines, word splitting, rest of line. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"

#define WIRE(lit) lit, sizeof(lit) - 1

/* The line found is exactly the literal lit. */
#define ck_assert_line(line, linelen, lit)                                                         \
	do {                                                                                       \
		ck_assert_uint_eq((linelen), sizeof(lit) - 1);                                     \
		if (sizeof(lit) > 1)                                                               \
			ck_assert_mem_eq((line), lit, sizeof(lit) - 1);                            \
	} while (0)

/* A heap copy in its own allocation, so ASan sees any read past len. */
static char *fresh_copy(const char *p, size_t n)
{
	char *q = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(q);
	if (n)
		memcpy(q, p, n);
	return q;
}

/* ---------------------------------------------------------------------------------------- */
/* proto_text_line */

START_TEST(test_line_terminators)
{
	const char *line;
	size_t len;

	ck_assert_int_eq(proto_text_line(WIRE("check f k\n"), 100, &line, &len), 10);
	ck_assert_line(line, len, "check f k");
	ck_assert_int_eq(proto_text_line(WIRE("check f k\r\n"), 100, &line, &len), 11);
	ck_assert_line(line, len, "check f k");
	/* Only one '\r', and only right before the '\n', is dropped. */
	ck_assert_int_eq(proto_text_line(WIRE("a\rb\r\r\n"), 100, &line, &len), 6);
	ck_assert_line(line, len, "a\rb\r");
	ck_assert_int_eq(proto_text_line(WIRE("\n"), 100, &line, &len), 1);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(proto_text_line(WIRE("\r\n"), 100, &line, &len), 2);
	ck_assert_uint_eq(len, 0);
	/* Binary bytes are kept. */
	ck_assert_int_eq(proto_text_line(WIRE("s f a\0b\n"), 100, &line, &len), 8);
	ck_assert_line(line, len, "s f a\0b");
}
END_TEST

START_TEST(test_line_incomplete)
{
	const char *line = NULL;
	size_t len = 7;

	ck_assert_int_eq(proto_text_line(NULL, 0, 100, &line, &len), 0);
	ck_assert_int_eq(proto_text_line(WIRE("check f k"), 100, &line, &len), 0);
	ck_assert_int_eq(proto_text_line(WIRE("check f k\r"), 100, &line, &len), 0);
	ck_assert_ptr_null(line);
	ck_assert_uint_eq(len, 7);
}
END_TEST

START_TEST(test_line_pipelined)
{
	const char in[] = "ping\nset f a\r\n\ncheck f a\nlist";
	const char *expect[] = {"ping", "set f a", "", "check f a"};
	const char *line;
	size_t off = 0, len, i;
	ssize_t n;

	for (i = 0; i < 4; i++) {
		n = proto_text_line(in + off, sizeof(in) - 1 - off, 100, &line, &len);
		ck_assert_int_gt(n, 0);
		ck_assert_uint_eq(len, strlen(expect[i]));
		ck_assert_mem_eq(line, expect[i], len);
		ck_assert_ptr_eq(line, in + off);
		off += (size_t)n;
	}
	ck_assert_int_eq(proto_text_line(in + off, sizeof(in) - 1 - off, 100, &line, &len), 0);
}
END_TEST

/* A line split at every byte gives 0 for every proper prefix, then the whole line. */
START_TEST(test_line_split_every_byte)
{
	const char *cases[] = {"multi f a b c\r\n", "x\n", "\r\n", "create f capacity=1000\n"};
	const char *line;
	size_t i, k, len;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t total = strlen(cases[i]);

		for (k = 0; k <= total; k++) {
			char *a = fresh_copy(cases[i], k);
			ssize_t n = proto_text_line(a, k, 64, &line, &len);

			if (k < total)
				ck_assert_int_eq(n, 0);
			else
				ck_assert_int_eq(n, (ssize_t)total);
			free(a);
		}
	}
}
END_TEST

/* max_line 4: four bytes of content fit with either terminator, five do not. */
START_TEST(test_line_limit_edge)
{
	const char *line;
	size_t len;

	ck_assert_int_eq(proto_text_line(WIRE("abcd\n"), 4, &line, &len), 5);
	ck_assert_line(line, len, "abcd");
	ck_assert_int_eq(proto_text_line(WIRE("abcd\r\n"), 4, &line, &len), 6);
	ck_assert_line(line, len, "abcd");
	ck_assert_int_eq(proto_text_line(WIRE("abcde\n"), 4, &line, &len), -E2BIG);
	ck_assert_int_eq(proto_text_line(WIRE("abcde\r\n"), 4, &line, &len), -E2BIG);
	ck_assert_int_eq(proto_text_line(WIRE("abcd\r\r\n"), 4, &line, &len), -E2BIG);
	/* Incomplete: still possible while len <= max_line, or a trailing '\r' right after. */
	ck_assert_int_eq(proto_text_line(WIRE("abcd"), 4, &line, &len), 0);
	ck_assert_int_eq(proto_text_line(WIRE("abcd\r"), 4, &line, &len), 0);
	/* Certainly too long before any '\n' arrives. */
	ck_assert_int_eq(proto_text_line(WIRE("abcde"), 4, &line, &len), -E2BIG);
	ck_assert_int_eq(proto_text_line(WIRE("abcd\rX"), 4, &line, &len), -E2BIG);
	ck_assert_int_eq(proto_text_line(WIRE("abcdefghij\n"), 4, &line, &len), -E2BIG);
	/* Shorter lines after a long tail are found only once the long one is skipped, but a
	 * short first line is fine whatever follows. */
	ck_assert_int_eq(proto_text_line(WIRE("ab\ncdefghijkl"), 4, &line, &len), 3);
	ck_assert_line(line, len, "ab");
	/* max_line 0: only empty lines. */
	ck_assert_int_eq(proto_text_line(WIRE("\n"), 0, &line, &len), 1);
	ck_assert_int_eq(proto_text_line(WIRE("\r\n"), 0, &line, &len), 2);
	ck_assert_int_eq(proto_text_line(WIRE("\r"), 0, &line, &len), 0);
	ck_assert_int_eq(proto_text_line(WIRE("a"), 0, &line, &len), -E2BIG);
}
END_TEST

/* The longest acceptable line, max_line bytes and "\r\n", in a buffer of exactly that size. */
START_TEST(test_line_examines_window_only)
{
	const size_t max = 1000;
	char *buf = malloc(max + 2);
	const char *line;
	size_t len;

	ck_assert_ptr_nonnull(buf);
	memset(buf, 'a', max + 2);
	buf[max] = '\r';
	buf[max + 1] = '\n';
	ck_assert_int_eq(proto_text_line(buf, max + 2, max, &line, &len), (ssize_t)max + 2);
	ck_assert_uint_eq(len, max);
	buf[max] = 'a';
	ck_assert_int_eq(proto_text_line(buf, max + 2, max, &line, &len), -E2BIG);
	free(buf);
}
END_TEST

/* Over-long line: refuse, skip to its end across several reads, then carry on. */
START_TEST(test_line_skip_overlong)
{
	const char part1[] = "set f aaaaaaaaaaaaaaaa";
	const char part2[] = "bbbbbbbbbbbbbbbbbbbbbbbb";
	const char part3[] = "cccc\r\nping\n";
	const char *line;
	size_t len, n;
	bool done;

	ck_assert_int_eq(proto_text_line(WIRE(part1), 8, &line, &len), -E2BIG);
	n = proto_text_skip(WIRE(part1), &done);
	ck_assert_uint_eq(n, sizeof(part1) - 1);
	ck_assert(!done);
	n = proto_text_skip(WIRE(part2), &done);
	ck_assert_uint_eq(n, sizeof(part2) - 1);
	ck_assert(!done);
	n = proto_text_skip(WIRE(part3), &done);
	ck_assert_uint_eq(n, 6);
	ck_assert(done);
	ck_assert_int_eq(proto_text_line(part3 + n, sizeof(part3) - 1 - n, 8, &line, &len), 5);
	ck_assert_line(line, len, "ping");
	n = proto_text_skip(NULL, 0, &done);
	ck_assert_uint_eq(n, 0);
	ck_assert(!done);
	/* A complete over-long line is skipped in one go. */
	ck_assert_int_eq(proto_text_line(WIRE("0123456789\nok\n"), 8, &line, &len), -E2BIG);
	ck_assert_uint_eq(proto_text_skip(WIRE("0123456789\nok\n"), &done), 11);
	ck_assert(done);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* proto_text_split */

/* Split s (max words) and compare with the nwant expected words and rest offset. */
static void check_split(const char *s, size_t max, const char *const *want, size_t nwant,
			size_t want_rest)
{
	const char *words[16];
	size_t lens[16], rest = 12345, n, i;

	n = proto_text_split(s, strlen(s), max, words, lens, &rest);
	ck_assert_uint_eq(n, nwant);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(lens[i], strlen(want[i]));
		ck_assert_mem_eq(words[i], want[i], lens[i]);
		ck_assert(words[i] >= s && words[i] + lens[i] <= s + strlen(s));
	}
	ck_assert_uint_eq(rest, want_rest);
	/* rest_off may be NULL. */
	ck_assert_uint_eq(proto_text_split(s, strlen(s), max, words, lens, NULL), nwant);
}

START_TEST(test_split_basic)
{
	const char *w1[] = {"multi", "f", "a", "b"};
	const char *w2[] = {"list"};

	check_split("multi f a b", 16, w1, 4, 11);
	check_split("list", 16, w2, 1, 4);
	check_split("", 16, NULL, 0, 0);
	check_split("    ", 16, NULL, 0, 4);
}
END_TEST

START_TEST(test_split_space_runs)
{
	const char *w[] = {"multi", "f", "a", "b"};
	const char *tab[] = {"a\tb", "c"};

	/* Runs of spaces are one separator; leading and trailing spaces give no empty word. */
	check_split("  multi   f a    b  ", 16, w, 4, 20);
	/* Only ' ' separates. */
	check_split("a\tb c", 16, tab, 2, 5);
}
END_TEST

START_TEST(test_split_max)
{
	const char *w2[] = {"bulk", "f"};
	const char *w4[] = {"bulk", "f", "k1", "k2"};

	/* rest_off is where the first word not returned starts. */
	check_split("bulk f k1 k2", 2, w2, 2, 7);
	check_split("bulk f  k1 k2", 2, w2, 2, 8);
	check_split("bulk f k1 k2", 4, w4, 4, 12);
	check_split("bulk f k1 k2   ", 4, w4, 4, 15);
	check_split("bulk f k1 k2", 0, NULL, 0, 0);
	check_split("  bulk", 0, NULL, 0, 2);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* proto_text_rest */

static void check_rest(const char *s, size_t len, size_t nwords, const char *want, size_t wantlen)
{
	const char *rest = NULL;
	size_t restlen = 0;

	ck_assert_int_eq(proto_text_rest(s, len, nwords, &rest, &restlen), 0);
	ck_assert_uint_eq(restlen, wantlen);
	ck_assert_mem_eq(rest, want, wantlen);
	ck_assert_ptr_eq(rest + restlen, s + len);
}

START_TEST(test_rest_key)
{
	check_rest(WIRE("check NAME KEY WITH SPACES"), 2, WIRE("KEY WITH SPACES"));
	check_rest(WIRE("c f k"), 2, WIRE("k"));
	/* Exactly the bytes after the one space that follows NAME. */
	check_rest(WIRE("check NAME  K"), 2, WIRE(" K"));
	check_rest(WIRE("check NAME K "), 2, WIRE("K "));
	check_rest(WIRE("  check   NAME key"), 2, WIRE("key"));
	check_rest(WIRE("set f a\0b\rc"), 2, WIRE("a\0b\rc"));
	check_rest(WIRE("drop f"), 1, WIRE("f"));
	check_rest(WIRE("whole line"), 0, WIRE("whole line"));
}
END_TEST

START_TEST(test_rest_missing)
{
	const char *rest = NULL;
	size_t restlen = 99;

	ck_assert_int_eq(proto_text_rest(WIRE("check NAME"), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE("check NAME "), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE("check"), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE("check "), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE("check    "), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE(""), 2, &rest, &restlen), -EINVAL);
	ck_assert_int_eq(proto_text_rest(WIRE(""), 0, &rest, &restlen), -EINVAL);
	ck_assert_ptr_null(rest);
	ck_assert_uint_eq(restlen, 99);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */

static Suite *text_suite(void)
{
	Suite *s = suite_create("proto-text");
	TCase *line = tcase_create("line");
	TCase *split = tcase_create("split");

	tcase_add_test(line, test_line_terminators);
	tcase_add_test(line, test_line_incomplete);
	tcase_add_test(line, test_line_pipelined);
	tcase_add_test(line, test_line_split_every_byte);
	tcase_add_test(line, test_line_limit_edge);
	tcase_add_test(line, test_line_examines_window_only);
	tcase_add_test(line, test_line_skip_overlong);
	suite_add_tcase(s, line);

	tcase_add_test(split, test_split_basic);
	tcase_add_test(split, test_split_space_runs);
	tcase_add_test(split, test_split_max);
	tcase_add_test(split, test_rest_key);
	tcase_add_test(split, test_rest_missing);
	suite_add_tcase(s, split);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(text_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
