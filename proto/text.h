/* SPDX-License-Identifier: MIT */
/*
 * Framing of the bloomd text protocol: one command per '\n'-terminated line, a '\r' before the
 * '\n' dropped, words separated by spaces. No I/O and no allocation: every result points into
 * the caller's buffer.
 *
 * The server's read loop:
 *
 *	if (skipping) {                        -- discarding the rest of an over-long line
 *		n = proto_text_skip(buf, len, &done);
 *		consume n; if (!done) read more; skipping = false;
 *	}
 *	n = proto_text_line(buf, len, lim.max_line_bytes, &line, &linelen);
 *	n > 0:    handle line; consume n
 *	n == 0:   read more
 *	-E2BIG:   reply "Client Error: Line too long"; skipping = true (nothing consumed yet;
 *	          proto_text_skip() then discards up to and including the line's '\n', across as
 *	          many reads as it takes, so the buffer never holds more than one read of it)
 *
 * Words: a run of spaces is one separator and leading spaces are ignored, so no word is empty
 * ("set  f  k" has the words "set", "f", "k"). Only ' ' separates; a tab is part of a word.
 * A key given as "the rest of the line" (check/set/delete) is different: it is every
 * byte after the one space that follows the filter name, spaces included (proto_text_rest()).
 */
#ifndef BLOSSOMD_PROTO_TEXT_H
#define BLOSSOMD_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

/*
 * Find the first line in buf[0..len). The line is the bytes before the first '\n', minus one
 * '\r' directly before that '\n' if there is one; only that line (its length after the '\r' is
 * dropped) is measured against max_line.
 *
 * Returns:
 *   > 0     a complete line: the bytes it takes in buf, its '\n' included; *line = buf,
 *           *linelen = its length (<= max_line; may be 0 for an empty line).
 *   0       no '\n' yet and the line may still fit: len <= max_line, or len == max_line + 1
 *           and buf[max_line] == '\r' (it may be the '\r' of "\r\n"). *line, *linelen unset.
 *   -E2BIG  the line is longer than max_line: no '\n' in the first max_line + 1 bytes (or
 *           max_line + 2 bytes when the (max_line + 1)th byte is '\r'). Nothing is consumed;
 *           see proto_text_skip(). *line, *linelen unset.
 * Only the first max_line + 2 bytes of buf are ever examined.
 */
ssize_t proto_text_line(const char *buf, size_t len, size_t max_line, const char **line,
			size_t *linelen);

/*
 * Discard input up to and including the next '\n' (used after -E2BIG from proto_text_line()).
 * Resumable: call it on each new read until *done is true.
 *
 * Returns the number of bytes to drop from the front of buf: up to and including the first
 * '\n' with *done = true, or len (all of it) with *done = false when there is no '\n'.
 */
size_t proto_text_skip(const char *buf, size_t len, bool *done);

/*
 * Cut the first word off the n bytes at *p (leading spaces skipped): *word, *wlen receive it,
 * and *p, *n are advanced to the byte after it. Returns false (nothing changed) when only
 * spaces, or nothing, are left. Inline: the text front end cuts every key with it.
 */
static inline bool proto_text_next_word(const char **p, size_t *n, const char **word, size_t *wlen)
{
	const char *s = *p, *end = *p + *n, *sp;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return false;
	sp = memchr(s, ' ', (size_t)(end - s));
	*word = s;
	*wlen = (size_t)((sp ? sp : end) - s);
	*p = s + *wlen;
	*n = (size_t)(end - *p);
	return true;
}

/*
 * Split line[0..len) into at most max words (see the top of this file for what a word is).
 * words[i], lens[i] receive word i (pointers into line). rest_off, if not NULL, receives the
 * offset of the first byte of word max + 1 when there are more than max words, else len; so
 * *rest_off < len means "more words follow".
 *
 * Returns the number of words stored (0 .. max); 0 for an empty or all-space line.
 */
size_t proto_text_split(const char *line, size_t len, size_t max, const char **words, size_t *lens,
			size_t *rest_off);

/*
 * The rest of the line after its first nwords words: skip nwords words (and the space runs
 * before and between them), then exactly one space; the rest is every remaining byte, spaces
 * included. For "check NAME KEY WITH SPACES" and nwords 2 the rest is "KEY WITH SPACES";
 * for "check NAME  K" it is " K".
 *
 * Returns:
 *   0        *rest, *restlen set; *restlen >= 1.
 *   -EINVAL  fewer than nwords words, or nothing after the space that follows word nwords
 *            ("check NAME", "check NAME "); *rest, *restlen unset.
 * With nwords 0 the rest is the whole line (-EINVAL if it is empty).
 */
int proto_text_rest(const char *line, size_t len, size_t nwords, const char **rest,
		    size_t *restlen);

#endif /* BLOSSOMD_PROTO_TEXT_H */
