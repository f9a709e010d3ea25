/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's small codecs: UTF-8 validation, RFC 4648 base64 both ways, and the
 * percent-decoding of path segments and query arguments. Functions of bytes alone: no
 * request, no response.
 */
#include "proto/http_api_impl.h"

#include <errno.h>

bool http_api_utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p, *end = s + n;

	while (s < end) {
		unsigned c = *s, need;
		uint32_t cp, min;

		if (c < 0x80) {
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		if ((size_t)(end - s) <= need)
			return false;
		for (unsigned i = 1; i <= need; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += need + 1;
	}
	return true;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long http_api_base64_decode(const char *in, size_t n, unsigned char *out)
{
	uint32_t acc = 0;
	size_t bits = 0, o = 0, pad = 0;

	/* Up to two '=' at the very end, and only to complete a group of four. */
	while (pad < 2 && n > 0 && in[n - 1] == '=') {
		n--;
		pad++;
	}
	if (pad && (n + pad) % 4)
		return -EINVAL;
	if (n % 4 == 1)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value((unsigned char)in[i]);

		if (v < 0)
			return -EINVAL;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* The bits left over must be zero, so that every key has one encoding. */
	if (acc & ((1u << bits) - 1))
		return -EINVAL;
	return (long)o;
}

void http_api_base64_encode(struct proto_buf *out, const void *p, size_t n)
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = p;
	size_t i;

	if (proto_buf_reserve(out, (n + 2) / 3 * 4))
		return;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		char q[4] = {abc[v >> 18], abc[(v >> 12) & 63], abc[(v >> 6) & 63], abc[v & 63]};

		proto_buf_append(out, q, 4);
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
		char q[4] = {abc[v >> 18], abc[(v >> 12) & 63],
			     i + 1 < n ? abc[(v >> 6) & 63] : '=', '='};

		proto_buf_append(out, q, 4);
	}
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode p[0..n) into out (room for n bytes). Returns the length, or -EINVAL for a
 * '%' not followed by two hex digits. */
long http_api_pct_decode(const char *p, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			out[o++] = p[i];
			continue;
		}
		int hi = i + 2 < n ? hex_value((unsigned char)p[i + 1]) : -1;
		int lo = i + 2 < n ? hex_value((unsigned char)p[i + 2]) : -1;

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	return (long)o;
}
