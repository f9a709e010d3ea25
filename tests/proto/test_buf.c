/* SPDX-License-Identifier: MIT */
/* Unit tests of proto/buf: the growable output buffer. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/buf.h"

/* b holds exactly the bytes of the string literal lit. */
#define ck_assert_buf(b, lit)                                                                      \
	do {                                                                                       \
		ck_assert_uint_eq((b)->len, sizeof(lit) - 1);                                      \
		ck_assert_mem_eq((b)->data, lit, sizeof(lit) - 1);                                 \
	} while (0)

START_TEST(test_init_empty)
{
	struct proto_buf b;

	proto_buf_init(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, 0);
	ck_assert(!b.failed);
	proto_buf_free(&b);
	proto_buf_free(&b); /* free twice is harmless: free leaves an empty buffer */
}
END_TEST

START_TEST(test_append_bytes)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_buf_append(&b, "ab", 2);
	proto_buf_append(&b, NULL, 0);
	proto_buf_append(&b, "c\0d", 3);
	proto_buf_append_str(&b, "ef");
	proto_buf_append_str(&b, "");
	proto_buf_append_char(&b, 'g');
	ck_assert_buf(&b, "abc\0defg");
	ck_assert(!b.failed);
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_append_grows)
{
	struct proto_buf b;
	char chunk[1000];
	size_t i;

	proto_buf_init(&b);
	for (i = 0; i < sizeof(chunk); i++)
		chunk[i] = (char)('a' + i % 26);
	for (i = 0; i < 100; i++)
		proto_buf_append(&b, chunk, sizeof(chunk));
	ck_assert_uint_eq(b.len, 100 * sizeof(chunk));
	ck_assert_uint_ge(b.cap, b.len);
	for (i = 0; i < 100; i++)
		ck_assert_mem_eq(b.data + i * sizeof(chunk), chunk, sizeof(chunk));
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_reset_keeps_capacity)
{
	struct proto_buf b;
	char *data;
	size_t cap;

	proto_buf_init(&b);
	proto_buf_append_str(&b, "hello");
	data = b.data;
	cap = b.cap;
	proto_buf_reset(&b);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, cap);
	ck_assert_ptr_eq(b.data, data);
	proto_buf_append_str(&b, "x");
	ck_assert_buf(&b, "x");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_no_allocation_within_capacity)
{
	struct proto_buf b;
	char *data;
	size_t cap, i;

	proto_buf_init(&b);
	ck_assert_int_eq(proto_buf_reserve(&b, 4096), 0);
	ck_assert_uint_ge(b.cap, 4096);
	data = b.data;
	cap = b.cap;
	ck_assert_int_eq(proto_buf_reserve(&b, 4096), 0);
	ck_assert_ptr_eq(b.data, data);
	for (int round = 0; round < 3; round++) {
		proto_buf_reset(&b);
		for (i = 0; i < 200; i++) {
			proto_buf_append_u64(&b, UINT64_MAX); /* 20 bytes: 4000 in all */
		}
		ck_assert_uint_eq(b.len, 4000);
		ck_assert_ptr_eq(b.data, data);
		ck_assert_uint_eq(b.cap, cap);
	}
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_u64)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_buf_append_u64(&b, 0);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_u64(&b, 9);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_u64(&b, 10);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_u64(&b, 1234567890);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_u64(&b, UINT64_MAX);
	ck_assert_buf(&b, "0 9 10 1234567890 18446744073709551615");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_i64)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_buf_append_i64(&b, 0);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_i64(&b, -1);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_i64(&b, 42);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_i64(&b, INT64_MAX);
	proto_buf_append_char(&b, ' ');
	proto_buf_append_i64(&b, INT64_MIN);
	ck_assert_buf(&b, "0 -1 42 9223372036854775807 -9223372036854775808");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_fmt)
{
	struct proto_buf b;
	char big[2000];
	size_t i;

	proto_buf_init(&b);
	proto_buf_append_fmt(&b, "%s=%d;", "x", -7);
	ck_assert_buf(&b, "x=-7;");
	/* Longer than the remaining capacity: must grow and format again. */
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	proto_buf_append_fmt(&b, "[%s]", big);
	ck_assert_uint_eq(b.len, 5 + 2 + sizeof(big) - 1);
	ck_assert_int_eq(b.data[5], '[');
	for (i = 0; i < sizeof(big) - 1; i++)
		ck_assert_int_eq(b.data[6 + i], 'z');
	ck_assert_int_eq(b.data[b.len - 1], ']');
	proto_buf_append_fmt(&b, "%s", "");
	ck_assert_uint_eq(b.len, 5 + 2 + sizeof(big) - 1);
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_fmt_exact_fit)
{
	struct proto_buf b;
	size_t before;

	/* Formatted text exactly as long as the free space: vsnprintf needs one more byte for its
	 * NUL, so this must grow rather than truncate. */
	proto_buf_init(&b);
	ck_assert_int_eq(proto_buf_reserve(&b, 1), 0);
	b.len = b.cap - 3;
	memset(b.data, '.', b.len);
	before = b.len;
	proto_buf_append_fmt(&b, "%d", 123);
	ck_assert_uint_eq(b.len, before + 3);
	ck_assert_mem_eq(b.data + b.len - 3, "123", 3);
	ck_assert(!b.failed);
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_failure_is_sticky)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_buf_append_str(&b, "keep");
	ck_assert_int_eq(proto_buf_reserve(&b, SIZE_MAX), -ENOMEM);
	ck_assert(b.failed);
	ck_assert_buf(&b, "keep");
	/* Every append is now a no-op, even one that would fit. */
	proto_buf_append_str(&b, "x");
	proto_buf_append_char(&b, 'y');
	proto_buf_append_u64(&b, 1);
	proto_buf_append_i64(&b, -1);
	proto_buf_append_fmt(&b, "%d", 1);
	ck_assert_buf(&b, "keep");
	ck_assert_int_eq(proto_buf_reserve(&b, 0), -ENOMEM);
	proto_buf_reset(&b);
	ck_assert(b.failed);
	proto_buf_free(&b);
	ck_assert(!b.failed);
	proto_buf_append_str(&b, "ok");
	ck_assert_buf(&b, "ok");
	proto_buf_free(&b);
}
END_TEST

START_TEST(test_reserve_overflow)
{
	struct proto_buf b;

	proto_buf_init(&b);
	proto_buf_append_str(&b, "ab");
	ck_assert_int_eq(proto_buf_reserve(&b, SIZE_MAX - 1), -ENOMEM);
	ck_assert(b.failed);
	proto_buf_free(&b);
}
END_TEST

static Suite *buf_suite(void)
{
	Suite *s = suite_create("proto-buf");
	TCase *tc = tcase_create("buf");

	tcase_add_test(tc, test_init_empty);
	tcase_add_test(tc, test_append_bytes);
	tcase_add_test(tc, test_append_grows);
	tcase_add_test(tc, test_reset_keeps_capacity);
	tcase_add_test(tc, test_no_allocation_within_capacity);
	tcase_add_test(tc, test_u64);
	tcase_add_test(tc, test_i64);
	tcase_add_test(tc, test_fmt);
	tcase_add_test(tc, test_fmt_exact_fit);
	tcase_add_test(tc, test_failure_is_sticky);
	tcase_add_test(tc, test_reserve_overflow);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(buf_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
