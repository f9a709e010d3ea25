/* SPDX-License-Identifier: MIT */
/*
 * Redis glob patterns compiled to byte sets, matched greedily; see glob.h for the syntax, the
 * differences from Redis and the cost. The compiler follows the token rules of Redis 7.0's
 * stringmatchlen() (util.c) step by step, so that each bracket ends where Redis's ends.
 */
#include "proto/glob.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One token: '*', or the set of bytes that a single-byte token ('?', a class, a literal)
 * accepts. */
struct glob_tok {
	uint64_t set[4];
	bool star;
};

struct glob {
	size_t plen;   /* of the source pattern: only the empty one matches the empty string */
	size_t ntok;   /* runs of '*' are one token */
	size_t nfixed; /* tokens other than '*': each takes exactly one byte */
	bool has_star;
	struct glob_tok tok[];
};

/* tolower() of the C locale, which Redis runs its matching in. */
static unsigned char glob_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static void set_add(struct glob_tok *t, unsigned char c)
{
	t->set[c >> 6] |= (uint64_t)1 << (c & 63);
}

static bool set_has(const struct glob_tok *t, unsigned char c)
{
	return (t->set[c >> 6] >> (c & 63)) & 1;
}

/* A literal byte x: with nocase every byte whose lower case is x's (only letters have two). */
static void set_add_literal(struct glob_tok *t, unsigned char x, bool nocase)
{
	set_add(t, x);
	if (nocase && glob_lower(x) >= 'a' && glob_lower(x) <= 'z') {
		set_add(t, glob_lower(x));
		set_add(t, (unsigned char)(glob_lower(x) - 'a' + 'A'));
	}
}

/* The range a-b (either order); with nocase Redis lowers the ends after ordering them, and
 * the byte tested, so "[Z-a]" is the empty range 'z'..'a' there and here. */
static void set_add_range(struct glob_tok *t, unsigned char a, unsigned char b, bool nocase)
{
	unsigned lo = a < b ? a : b, hi = a < b ? b : a;

	if (nocase) {
		lo = glob_lower((unsigned char)lo);
		hi = glob_lower((unsigned char)hi);
	}
	for (unsigned c = 0; c < 256; c++) {
		unsigned v = nocase ? glob_lower((unsigned char)c) : c;

		if (v >= lo && v <= hi)
			set_add(t, (unsigned char)c);
	}
}

/*
 * The class starting after '[' at p[i]: fills t and returns the offset after it. The loop is
 * Redis's: an escape first, then ']' ends it, then the end of the pattern ends it (unclosed),
 * then "x-y" when at least three bytes are left, else a literal.
 */
static size_t glob_class(const unsigned char *p, size_t plen, size_t i, bool nocase,
			 struct glob_tok *t)
{
	bool neg = i < plen && p[i] == '^';

	if (neg)
		i++;
	for (;;) {
		if (i < plen && p[i] == '\\' && plen - i >= 2) {
			i++;
			set_add(t, p[i]); /* exact even with nocase, as in Redis */
		} else if (i < plen && p[i] == ']') {
			i++;
			break;
		} else if (i >= plen) {
			break;
		} else if (plen - i >= 3 && p[i + 1] == '-') {
			set_add_range(t, p[i], p[i + 2], nocase);
			i += 2;
		} else {
			set_add_literal(t, p[i], nocase);
		}
		i++;
	}
	if (neg)
		for (int w = 0; w < 4; w++)
			t->set[w] = ~t->set[w];
	return i;
}

int glob_compile(const char *pattern, size_t plen, bool nocase, struct glob **out)
{
	const unsigned char *p = (const unsigned char *)pattern;
	struct glob *g;
	size_t i = 0;

	if (plen > GLOB_MAX_PATTERN)
		return -E2BIG;
	/* Every token takes at least one pattern byte. */
	g = calloc(1, sizeof(*g) + (plen ? plen : 1) * sizeof(g->tok[0]));
	if (!g)
		return -ENOMEM;
	g->plen = plen;
	while (i < plen) {
		struct glob_tok *t;

		if (p[i] == '*') {
			if (!g->ntok || !g->tok[g->ntok - 1].star)
				g->tok[g->ntok++].star = true;
			g->has_star = true;
			i++;
			continue;
		}
		t = &g->tok[g->ntok++];
		g->nfixed++;
		if (p[i] == '?') {
			memset(t->set, 0xff, sizeof(t->set));
			i++;
		} else if (p[i] == '[') {
			i = glob_class(p, plen, i + 1, nocase, t);
		} else {
			if (p[i] == '\\' && plen - i >= 2)
				i++;
			set_add_literal(t, p[i], nocase);
			i++;
		}
	}
	*out = g;
	return 0;
}

void glob_free(struct glob *g)
{
	free(g);
}

bool glob_match_counted(const struct glob *g, const char *str, size_t n, uint64_t *steps)
{
	const unsigned char *s = (const unsigned char *)str;
	const struct glob_tok *t = g->tok;
	size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
	uint64_t k = 0;
	bool r;

	if (n == 0)
		return g->plen == 0;
	/* Every token but '*' takes exactly one byte. */
	if (g->nfixed > n || (!g->has_star && g->nfixed != n))
		return false;
	/*
	 * Greedy: a '*' first takes nothing; on a mismatch the last '*' takes one byte more and
	 * matching resumes after it. Earlier '*'s never need to take more: anything the tail
	 * could match after a longer earlier run it can match after the last '*' (which absorbs
	 * the difference), so one restart point suffices and each byte of s starts at most one
	 * restart: at most (n + 1) * n + n + 1 token tests.
	 */
	while (si < n) {
		if (pi < g->ntok && t[pi].star) {
			if (++pi == g->ntok) {
				r = true;
				goto out;
			}
			star_p = pi;
			star_s = si;
			continue;
		}
		if (pi < g->ntok) {
			k++;
			if (set_has(&t[pi], s[si])) {
				pi++;
				si++;
				continue;
			}
		}
		if (star_p == SIZE_MAX) {
			r = false;
			goto out;
		}
		pi = star_p;
		si = ++star_s;
	}
	while (pi < g->ntok && t[pi].star)
		pi++;
	r = pi == g->ntok;
out:
	if (steps)
		*steps += k;
	return r;
}
