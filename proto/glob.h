/* SPDX-License-Identifier: MIT */
/*
 * Redis's glob patterns (KEYS, SCAN ... MATCH, CONFIG GET), matched in bounded time.
 *
 * Syntax, as Redis 7.0's stringmatchlen() reads it, binary safe:
 *	*	any run of bytes, also none
 *	?	any one byte
 *	[abc]	one of the bytes listed; [^abc] one byte not listed; [a-z] a range (its ends in
 *		either order); \x inside brackets is x itself
 *	\x	x itself (a '\' at the very end of the pattern is a literal '\')
 * An unterminated class ("[abc") runs to the end of the pattern; "[]" matches nothing and "[^]"
 * any byte; "[a-]" is the range from ']' to 'a' and leaves the class open, as in Redis.
 * Without nocase every comparison is exact. With nocase, literals and range ends and the byte
 * tested are compared through tolower() (range ends after they are put in order), but an
 * escaped byte inside brackets is still compared exactly: Redis's quirks, kept.
 *
 * Two differences from Redis, on purpose:
 *   - A range compares bytes as unsigned. Redis compares C chars, which are signed on x86, so
 *     there "[a-\xff]" means the bytes 0x00-0x61 and 0xff; here it means 0x61-0xff (what Redis
 *     does on ARM, and what anyone reading the pattern expects).
 *   - No nesting limit. Redis 7.2.6+ gives up ("no match") below 1000 nested '*' because its
 *     matcher recurses; this one does not recurse. A 200-byte name (BF_NAME_MAX) cannot make
 *     Redis reach that depth, so KEYS and SCAN answer alike.
 * As in Redis, the empty string is matched by the empty pattern only ("*" does not match it).
 *
 * Cost. glob_compile() reads the pattern once, turning every token into a 256-bit set of the
 * bytes it accepts, and refuses patterns over GLOB_MAX_PATTERN bytes. glob_match() then never
 * looks at the pattern's bytes again: a string of n bytes costs O(1) when the pattern needs
 * more than n bytes (or, without '*', other than n), and otherwise at most (n + 1)^2 steps (one
 * step: one token tried against one byte, O(1)), however long or nested the pattern:
 * '*' is matched greedily, backtracking only to the last '*' seen (Redis backtracks to every
 * earlier one). For names of at most 200 bytes that is about 40,000 steps per name.
 */
#ifndef BLOSSOMD_PROTO_GLOB_H
#define BLOSSOMD_PROTO_GLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Longest pattern accepted, in bytes. Names are at most 200 bytes, so a pattern that can match
 * one has at most 200 tokens other than '*'; 16 KiB leaves room for a long class at every
 * one of them. Compiling costs 40 bytes per pattern byte at most (640 KiB at this bound).
 */
#define GLOB_MAX_PATTERN 16384

/* A compiled pattern. Immutable once compiled; may be matched against any number of strings. */
struct glob;

/*
 * Compile pattern p (plen bytes, not NUL-terminated, any bytes) for matching with or without
 * case folding (nocase: CONFIG GET's matching; KEYS and SCAN match exactly).
 *
 * Returns:
 *   0        *out is the compiled pattern; free it with glob_free().
 *   -E2BIG   plen > GLOB_MAX_PATTERN; nothing allocated, *out untouched.
 *   -ENOMEM  allocation failed; *out untouched.
 */
int glob_compile(const char *p, size_t plen, bool nocase, struct glob **out);

/* Release g. NULL is ignored. */
void glob_free(struct glob *g);

/*
 * Whether the n bytes at s (binary safe, s may be NULL when n is 0) match g, with Redis's
 * semantics (see the top of this file). If steps is not NULL, the steps taken are added to
 * *steps (for tests and benchmarks; see "Cost" above for the bound). Cannot fail.
 */
bool glob_match_counted(const struct glob *g, const char *s, size_t n, uint64_t *steps);

/* glob_match_counted() without the count. */
static inline bool glob_match(const struct glob *g, const char *s, size_t n)
{
	return glob_match_counted(g, s, n, NULL);
}

#endif /* BLOSSOMD_PROTO_GLOB_H */
