/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of proto/glob: Redis's glob semantics, case by case and against Redis's own
 * matcher on every small pattern/string pair a random walk finds, the pattern length bound,
 * and the work bound on pathological patterns (issue 17: an 8 MiB pattern held the loop for
 * 3.7 s against one 200-byte name).
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/check_main.h"
#include "proto/glob.h"

/*
 * The oracle: Redis 7.0.15's stringmatchlen() (src/util.c, BSD-3-Clause, Copyright (c)
 * 2009-2012 Salvatore Sanfilippo), unchanged but for the range ends, compared here as unsigned
 * bytes (see glob.h). It reads pattern[patternLen] (Redis's strings end in a NUL), so callers
 * pass NUL-terminated buffers.
 */
static int redis_match_impl(const char *pattern, int patternLen, const char *string, int stringLen,
			    int nocase, int *skipLongerMatches)
{
	while (patternLen && stringLen) {
		switch (pattern[0]) {
		case '*':
			while (patternLen && pattern[1] == '*') {
				pattern++;
				patternLen--;
			}
			if (patternLen == 1)
				return 1; /* match */
			while (stringLen) {
				if (redis_match_impl(pattern + 1, patternLen - 1, string, stringLen,
						     nocase, skipLongerMatches))
					return 1; /* match */
				if (*skipLongerMatches)
					return 0; /* no match */
				string++;
				stringLen--;
			}
			*skipLongerMatches = 1;
			return 0; /* no match */
		case '?':
			string++;
			stringLen--;
			break;
		case '[': {
			int not, match;

			pattern++;
			patternLen--;
			not = pattern[0] == '^';
			if (not ) {
				pattern++;
				patternLen--;
			}
			match = 0;
			while (1) {
				if (pattern[0] == '\\' && patternLen >= 2) {
					pattern++;
					patternLen--;
					if (pattern[0] == string[0])
						match = 1;
				} else if (pattern[0] == ']') {
					break;
				} else if (patternLen == 0) {
					pattern--;
					patternLen++;
					break;
				} else if (patternLen >= 3 && pattern[1] == '-') {
					int start = (unsigned char)pattern[0];
					int end = (unsigned char)pattern[2];
					int c = (unsigned char)string[0];
					if (start > end) {
						int t = start;
						start = end;
						end = t;
					}
					if (nocase) {
						start = tolower(start);
						end = tolower(end);
						c = tolower(c);
					}
					pattern += 2;
					patternLen -= 2;
					if (c >= start && c <= end)
						match = 1;
				} else {
					if (!nocase) {
						if (pattern[0] == string[0])
							match = 1;
					} else {
						if (tolower((int)pattern[0]) ==
						    tolower((int)string[0]))
							match = 1;
					}
				}
				pattern++;
				patternLen--;
			}
			if (not )
				match = !match;
			if (!match)
				return 0; /* no match */
			string++;
			stringLen--;
			break;
		}
		case '\\':
			if (patternLen >= 2) {
				pattern++;
				patternLen--;
			}
			/* fall through */
		default:
			if (!nocase) {
				if (pattern[0] != string[0])
					return 0; /* no match */
			} else {
				if (tolower((int)pattern[0]) != tolower((int)string[0]))
					return 0; /* no match */
			}
			string++;
			stringLen--;
			break;
		}
		pattern++;
		patternLen--;
		if (stringLen == 0) {
			while (*pattern == '*') {
				pattern++;
				patternLen--;
			}
			break;
		}
	}
	if (patternLen == 0 && stringLen == 0)
		return 1;
	return 0;
}

static bool redis_match(const char *p, size_t plen, const char *s, size_t slen, bool nocase)
{
	int skip = 0;

	return redis_match_impl(p, (int)plen, s, (int)slen, nocase, &skip);
}

/* Compile p (plen bytes), match s (slen bytes), free. */
static bool gm(const char *p, size_t plen, const char *s, size_t slen, bool nocase)
{
	struct glob *g = NULL;
	bool r;

	ck_assert_int_eq(glob_compile(p, plen, nocase, &g), 0);
	r = glob_match(g, s, slen);
	glob_free(g);
	return r;
}

/* String-literal forms. */
#define M(p, s)	 gm(p, strlen(p), s, strlen(s), false)
#define MI(p, s) gm(p, strlen(p), s, strlen(s), true)

struct glob_case {
	const char *p, *s;
	bool nocase, want;
};

/* Redis's behaviour, each row checked against the oracle too (so a row that misstates Redis
 * fails as loudly as the matcher). */
static const struct glob_case cases[] = {
    /* literals and '?' */
    {"abc", "abc", false, true},
    {"abc", "abd", false, false},
    {"abc", "ab", false, false},
    {"ab", "abc", false, false},
    {"a?c", "abc", false, true},
    {"a?c", "ac", false, false},
    {"???", "abc", false, true},
    {"???", "abcd", false, false},
    /* '*' */
    {"*", "anything", false, true},
    {"*", "", false, false}, /* Redis: "*" does not match the empty string */
    {"", "", false, true},
    {"", "a", false, false},
    {"**", "a", false, true},
    {"a*", "a", false, true},
    {"*a", "a", false, true},
    {"a*b", "ab", false, true},
    {"a*b", "axxxb", false, true},
    {"a*b", "axxxbc", false, false},
    {"a*b*c", "abbbcbc", false, true},
    {"*a*b*", "xaybz", false, true},
    {"*a*b*", "xbyaz", false, false},
    {"f*", "filter:1", false, true},
    {"*:1", "filter:1", false, true},
    {"a**b", "ab", false, true},
    {"a*", "", false, false},
    /* classes */
    {"[abc]", "b", false, true},
    {"[abc]", "d", false, false},
    {"[^abc]", "d", false, true},
    {"[^abc]", "a", false, false},
    {"[a-c]x", "bx", false, true},
    {"[c-a]x", "bx", false, true}, /* ends in either order */
    {"[a-c]", "d", false, false},
    {"[^a-c]", "d", false, true},
    {"[]", "a", false, false},	  /* empty class: nothing */
    {"[]a]", "]", false, false},  /* "[]" then literals "a]" */
    {"[]a]", "a]", false, false}, /* ... which need one byte for "[]" first */
    {"[^]", "x", false, true},	  /* empty negated class: any byte */
    {"[abc", "b", false, true},	  /* unterminated: runs to the end */
    {"[abc", "d", false, false},
    {"[", "a", false, false},	/* a lone '[' matches nothing */
    {"[^", "a", false, true},	/* ... a lone "[^" any byte */
    {"[a-]", "a", false, true}, /* ']'..'a', class left open */
    {"[a-]", "^", false, true}, /* '^' is between ']' and 'a' */
    {"[a-]", "-", false, false},
    {"[a-]x", "ax", false, false}, /* "x" is inside the open class */
    {"[a-]x", "x", false, true},
    {"[-a]", "-", false, true},	 /* '-' first is a literal */
    {"[\\]]", "]", false, true}, /* escaped ']' inside a class */
    {"[\\-a]", "-", false, true},
    {"[\\-a]", "b", false, false},
    {"[a\\", "\\", false, true}, /* '\' last in an open class is literal */
    {"x[a-\\]", "x\\", false, true},
    /* escapes */
    {"\\*", "*", false, true},
    {"\\*", "a", false, false},
    {"\\?", "?", false, true},
    {"\\[a]", "[a]", false, true},
    {"a\\", "a\\", false, true}, /* trailing '\' is literal */
    {"\\\\", "\\", false, true},
    {"\\a", "a", false, true},
    /* nocase (CONFIG GET) */
    {"ABC", "abc", true, true},
    {"abc", "ABC", true, true},
    {"ABC", "abc", false, false},
    {"[A-C]", "b", true, true},
    {"[a-c]", "B", true, true},
    {"[Z-a]", "z", true, false}, /* Redis lowers the ends after ordering: 'z'..'a' is empty */
    {"[Z-a]", "a", true, false},
    {"[Z-a]", "_", true, false},
    {"[Z-a]", "_", false, true},
    {"[\\A]", "a", true, false}, /* an escaped byte in a class is compared exactly */
    {"[\\A]", "A", true, true},
    {"\\A", "a", true, true}, /* ... but outside a class it is folded */
    {"[^A]", "a", true, false},
    {"MAX*", "maxmemory", true, true},
};

START_TEST(test_cases)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct glob_case *c = &cases[i];
		bool got = gm(c->p, strlen(c->p), c->s, strlen(c->s), c->nocase);
		bool redis = redis_match(c->p, strlen(c->p), c->s, strlen(c->s), c->nocase);

		ck_assert_msg(redis == c->want,
			      "row %zu: Redis says %d for '%s' ~ '%s' (nocase %d)", i, redis, c->p,
			      c->s, c->nocase);
		ck_assert_msg(got == c->want, "row %zu: %d for '%s' ~ '%s' (nocase %d), want %d", i,
			      got, c->p, c->s, c->nocase, c->want);
	}
}
END_TEST

/* Binary safety: NUL bytes and bytes >= 0x80 anywhere; ranges over unsigned bytes. */
START_TEST(test_binary)
{
	ck_assert(gm("a\0b", 3, "a\0b", 3, false));
	ck_assert(!gm("a\0b", 3, "a\0c", 3, false));
	ck_assert(gm("a?b", 3, "a\0b", 3, false));
	ck_assert(gm("[\0]", 3, "\0", 1, false));
	ck_assert(gm("*\xff", 2, "\x80\xff", 2, false));
	ck_assert(gm("[\x80-\xff]", 5, "\x90", 1, false));
	ck_assert(!gm("[\x80-\xff]", 5, "a", 1, false));
	/* Redis on x86 (signed char) would read this as 0x00..0x61 plus 0xff. */
	ck_assert(gm("[a-\xff]", 5, "\xc3", 1, false));
	ck_assert(!gm("[a-\xff]", 5, "A", 1, false));
	ck_assert(gm("[^\x80-\xff]", 6, "a", 1, false));
	ck_assert(!gm("\xc3", 1, "\xe3", 1, true)); /* folding is ASCII only */
}
END_TEST

/* xorshift64*: the same sequence on every run. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1du;
}

/*
 * Every pattern of up to 9 bytes over the bytes that mean something to a glob (and two
 * letters of each case), against strings of up to 7 bytes over the bytes they may meet,
 * with and without nocase: the same answer as Redis, 400,000 times.
 */
START_TEST(test_same_as_redis)
{
	static const char pa[] = "ab*?[]^-\\AZ_";
	static const char sa[] = "abAB-]^\\[*?Z_z";
	char p[16], s[16];
	size_t mism = 0;

	for (int iter = 0; iter < 400000; iter++) {
		size_t pl = rnd() % 10, sl = rnd() % 8;
		bool nocase = rnd() & 1;
		bool got, want;

		for (size_t i = 0; i < pl; i++)
			p[i] = pa[rnd() % (sizeof(pa) - 1)];
		for (size_t i = 0; i < sl; i++)
			s[i] = sa[rnd() % (sizeof(sa) - 1)];
		p[pl] = s[sl] = '\0';
		got = gm(p, pl, s, sl, nocase);
		want = redis_match(p, pl, s, sl, nocase);
		if (got != want && mism++ < 10)
			fprintf(stderr, "'%s' ~ '%s' nocase %d: %d, Redis %d\n", p, s, nocase, got,
				want);
	}
	ck_assert_uint_eq(mism, 0);
}
END_TEST

/* The bound: GLOB_MAX_PATTERN bytes compile, one more is -E2BIG with nothing allocated. */
START_TEST(test_pattern_bound)
{
	char *p = malloc(GLOB_MAX_PATTERN + 1);
	struct glob *g = NULL;

	ck_assert_ptr_nonnull(p);
	memset(p, '*', GLOB_MAX_PATTERN + 1);
	ck_assert_int_eq(glob_compile(p, GLOB_MAX_PATTERN + 1, false, &g), -E2BIG);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(glob_compile(p, GLOB_MAX_PATTERN, false, &g), 0);
	ck_assert(glob_match(g, "x", 1));
	glob_free(g);
	glob_free(NULL);
	free(p);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Pathological patterns of the largest accepted size against 200-byte names (BF_NAME_MAX):
 * each match stays within the (n + 1)^2 steps glob.h promises, and 1000 names per pattern
 * take well under a second (a few ms here; the issue measured 3.7 s for one name).
 */
START_TEST(test_pathological_fast)
{
	enum { N = 200, NAMES = 1000, L = GLOB_MAX_PATTERN };
	char *p = malloc(L + 1), name_a[N], name_ab[N];
	uint64_t bound = (uint64_t)(N + 1) * (N + 1), worst = 0;
	double t0, spent;
	struct glob *g;

	ck_assert_ptr_nonnull(p);
	memset(name_a, 'a', N);
	memcpy(name_ab, name_a, N);
	name_ab[N - 1] = 'b';
	t0 = now_s();
	for (int kind = 0; kind < 7; kind++) {
		size_t len = L;

		switch (kind) {
		case 0: /* "*a*a*a...*b": Redis's classic backtracking trap */
			for (size_t i = 0; i < L; i++)
				p[i] = i % 2 ? 'a' : '*';
			p[L - 1] = 'b';
			break;
		case 1: /* "*" then 199 'a' and 'b': the longest prefix that can still fail */
			memset(p, 'a', N + 1);
			p[0] = '*';
			p[N] = 'b';
			len = N + 1;
			break;
		case 2: /* one class of 16 KiB, tried at every byte after a '*' */
			memset(p, 'c', L);
			p[0] = '*';
			p[1] = '[';
			break;
		case 3: /* 16 KiB of '?': needs more bytes than any name has */
			memset(p, '?', L);
			break;
		case 4: /* "*[a-a]*[a-a]...": many stars, each followed by a class */
			for (size_t i = 0; i + 6 <= L; i += 6)
				memcpy(p + i, "*[a-a]", 6);
			len = L - L % 6;
			p[len - 2] = 'b';
			break;
		case 5: /* "*" then 99 'a' and 'b': 100 restarts of 100 steps on "aaa...a" */
			memset(p, 'a', N / 2 + 1);
			p[0] = '*';
			p[N / 2] = 'b';
			len = N / 2 + 1;
			break;
		default: /* a valid matching pattern with 100 stars */
			len = 0;
			for (int i = 0; i < 100; i++) {
				p[len++] = '*';
				p[len++] = 'a';
			}
			break;
		}
		ck_assert_int_eq(glob_compile(p, len, false, &g), 0);
		for (int i = 0; i < NAMES; i++) {
			uint64_t steps = 0;

			(void)glob_match_counted(g, i % 2 ? name_a : name_ab, N, &steps);
			ck_assert_msg(steps <= bound, "pattern %d: %llu steps > %llu", kind,
				      (unsigned long long)steps, (unsigned long long)bound);
			if (steps > worst)
				worst = steps;
		}
		/* The answers themselves, against Redis's where it finishes quickly. */
		if (kind == 1 || kind == 5 || kind == 6)
			ck_assert(glob_match(g, name_ab, N) ==
				  redis_match(p, len, name_ab, N, false));
		glob_free(g);
	}
	spent = now_s() - t0;
	fprintf(stderr, "# 7 patterns x %d names of %d bytes: %.1f ms, at most %llu steps\n", NAMES,
		N, spent * 1e3, (unsigned long long)worst);
	ck_assert_msg(spent < 2.0, "took %.2f s", spent);
	/* The quadratic case was reached (so the bound above was tested, not idle). */
	ck_assert_uint_ge(worst, (uint64_t)(N / 2) * (N / 2));
	free(p);
}
END_TEST

/* The answers of the pathological patterns are still Redis's answers. */
START_TEST(test_pathological_answers)
{
	char name[201];

	memset(name, 'a', 200);
	name[200] = '\0';
	ck_assert(!M("*aaaaaaaaaaaaaaaaaaaab", name));
	ck_assert(M("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a", name));
	ck_assert(!M("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", name));
	name[199] = 'b';
	ck_assert(M("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", name));
	ck_assert(M("*[ab]", name));
	ck_assert(MI("*A*B", name));
}
END_TEST

static Suite *glob_suite(void)
{
	Suite *s = suite_create("proto-glob");
	TCase *tc = tcase_create("glob");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cases);
	tcase_add_test(tc, test_binary);
	tcase_add_test(tc, test_same_as_redis);
	tcase_add_test(tc, test_pattern_bound);
	tcase_add_test(tc, test_pathological_fast);
	tcase_add_test(tc, test_pathological_answers);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(glob_suite)
