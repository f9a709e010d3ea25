/* SPDX-License-Identifier: MIT */
/* The growable output buffer behind every reply; see buf.h for the contract. */
#include "proto/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First allocation: big enough for a typical pipelined burst of short replies. */
#define PROTO_BUF_MIN_CAP 256

void proto_buf_init(struct proto_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->failed = false;
}

void proto_buf_free(struct proto_buf *b)
{
	free(b->data);
	proto_buf_init(b);
}

void proto_buf_reset(struct proto_buf *b)
{
	b->len = 0;
}

int proto_buf_reserve(struct proto_buf *b, size_t extra)
{
	size_t want, cap;
	char *p;

	if (b->failed)
		return -ENOMEM;
	if (b->cap - b->len >= extra)
		return 0;
	if (extra > SIZE_MAX - b->len)
		goto fail;
	want = b->len + extra;
	cap = b->cap ? b->cap : PROTO_BUF_MIN_CAP;
	while (cap < want) {
		if (cap > SIZE_MAX / 2) {
			cap = want;
			break;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p)
		goto fail;
	b->data = p;
	b->cap = cap;
	return 0;
fail:
	b->failed = true;
	return -ENOMEM;
}

void proto_buf_append(struct proto_buf *b, const void *p, size_t n)
{
	if (n == 0 || proto_buf_reserve(b, n) < 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void proto_buf_append_str(struct proto_buf *b, const char *s)
{
	proto_buf_append(b, s, strlen(s));
}

void proto_buf_append_char(struct proto_buf *b, char c)
{
	if (proto_buf_reserve(b, 1) < 0)
		return;
	b->data[b->len++] = c;
}

void proto_buf_append_u64(struct proto_buf *b, uint64_t v)
{
	char tmp[20]; /* UINT64_MAX has 20 digits */
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	proto_buf_append(b, tmp + i, sizeof(tmp) - i);
}

void proto_buf_append_i64(struct proto_buf *b, int64_t v)
{
	if (v < 0) {
		proto_buf_append_char(b, '-');
		/* Negate in unsigned arithmetic so INT64_MIN does not overflow. */
		proto_buf_append_u64(b, (uint64_t)0 - (uint64_t)v);
		return;
	}
	proto_buf_append_u64(b, (uint64_t)v);
}

void proto_buf_append_fmt(struct proto_buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t room;
	int n;

	if (b->failed)
		return;
	room = b->cap - b->len;
	va_start(ap, fmt);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	if ((size_t)n >= room) {
		/* vsnprintf needs room for its NUL, which is not kept. */
		if (proto_buf_reserve(b, (size_t)n + 1) < 0)
			return;
		va_start(ap, fmt);
		n = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = true;
			return;
		}
	}
	b->len += (size_t)n;
}
