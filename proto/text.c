/* SPDX-License-Identifier: MIT */
/* Line framing and word splitting of the bloomd text protocol; see text.h for the contract. */
#include "proto/text.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

ssize_t proto_text_line(const char *buf, size_t len, size_t max_line, const char **line,
			size_t *linelen)
{
	size_t window, n;
	const char *nl;

	if (len == 0)
		return 0;
	/* A line of max_line bytes plus "\r\n" is the longest that can be accepted. */
	window = max_line > SIZE_MAX - 2 ? SIZE_MAX : max_line + 2;
	if (window > len)
		window = len;
	nl = memchr(buf, '\n', window);
	if (!nl) {
		if (len <= max_line)
			return 0;
		if (len == max_line + 1 && buf[max_line] == '\r')
			return 0;
		return -E2BIG;
	}
	n = (size_t)(nl - buf);
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n > max_line)
		return -E2BIG;
	*line = buf;
	*linelen = n;
	return (ssize_t)(nl - buf) + 1;
}

size_t proto_text_skip(const char *buf, size_t len, bool *done)
{
	const char *nl = len ? memchr(buf, '\n', len) : NULL;

	*done = nl != NULL;
	return nl ? (size_t)(nl - buf) + 1 : len;
}

/* Offset of the first non-space byte at or after i, or len. */
static size_t text_skip_spaces(const char *line, size_t len, size_t i)
{
	while (i < len && line[i] == ' ')
		i++;
	return i;
}

/* Offset of the first space at or after i, or len. */
static size_t text_word_end(const char *line, size_t len, size_t i)
{
	const char *sp = i < len ? memchr(line + i, ' ', len - i) : NULL;

	return sp ? (size_t)(sp - line) : len;
}

size_t proto_text_split(const char *line, size_t len, size_t max, const char **words, size_t *lens,
			size_t *rest_off)
{
	const char *p = line;
	size_t left = len, n = 0;

	while (n < max && proto_text_next_word(&p, &left, &words[n], &lens[n]))
		n++;
	if (rest_off)
		*rest_off = text_skip_spaces(line, len, (size_t)(p - line));
	return n;
}

int proto_text_rest(const char *line, size_t len, size_t nwords, const char **rest, size_t *restlen)
{
	size_t i = 0, k;

	if (nwords == 0) {
		if (len == 0)
			return -EINVAL;
		*rest = line;
		*restlen = len;
		return 0;
	}
	for (k = 0; k < nwords; k++) {
		i = text_skip_spaces(line, len, i);
		if (i == len)
			return -EINVAL;
		i = text_word_end(line, len, i);
	}
	/* line[i] is the space after word nwords (or i == len); the rest starts after it. */
	if (i + 1 >= len)
		return -EINVAL;
	*rest = line + i + 1;
	*restlen = len - i - 1;
	return 0;
}
