/* SPDX-License-Identifier: MIT */
/*
 * A growable output byte buffer. Every reply of every protocol is built in one of these, then
 * written to the socket in one go.
 *
 * Appends never report failure to the caller: when memory runs out the buffer sets `failed`,
 * keeps the bytes it had, and ignores every later append. The server checks `failed` once per
 * burst of replies and closes the connection, instead of checking after each append. Once the
 * capacity is large enough nothing allocates: a buffer that is reset and reused serves a
 * connection without allocation per command.
 *
 * The contents are bytes, not a C string: there is no terminating NUL.
 */
#ifndef BLOSSOMD_PROTO_BUF_H
#define BLOSSOMD_PROTO_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct proto_buf {
	char *data;  /* NULL until the first append or reserve */
	size_t len;  /* bytes in use */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed; sticky until proto_buf_free() or proto_buf_init() */
};

/* Make b empty with no allocation. Cannot fail. */
void proto_buf_init(struct proto_buf *b);

/* Release the memory of b and leave it as proto_buf_init() does (failed cleared). Cannot fail. */
void proto_buf_free(struct proto_buf *b);

/* Set len to 0 and keep the capacity for reuse. `failed` stays as it is. Cannot fail. */
void proto_buf_reset(struct proto_buf *b);

/*
 * Make room for at least `extra` more bytes after len, so that appends of up to that many
 * bytes do not allocate. Grows by doubling.
 *
 * Returns:
 *   0        cap - len >= extra (nothing allocated if that already held).
 *   -ENOMEM  allocation failed or the size overflows; `failed` is set, b otherwise unchanged.
 *   -ENOMEM  also when `failed` was already set (nothing is attempted).
 */
int proto_buf_reserve(struct proto_buf *b, size_t extra);

/* Append n bytes from p (p may be NULL when n is 0). On failure sets `failed`. */
void proto_buf_append(struct proto_buf *b, const void *p, size_t n);

/* Append the NUL-terminated string s, without its NUL. On failure sets `failed`. */
void proto_buf_append_str(struct proto_buf *b, const char *s);

/* Append one byte. On failure sets `failed`. */
void proto_buf_append_char(struct proto_buf *b, char c);

/* Append v in decimal ("0", "18446744073709551615"). No snprintf. On failure sets `failed`. */
void proto_buf_append_u64(struct proto_buf *b, uint64_t v);

/* Append v in decimal with a leading '-' when negative ("-9223372036854775808"). No
 * snprintf. On failure sets `failed`. */
void proto_buf_append_i64(struct proto_buf *b, int64_t v);

/*
 * Append printf-style formatted text (vsnprintf; meant for rare paths such as error messages,
 * not for the per-key hot path). On allocation failure, or if vsnprintf itself reports an
 * error, sets `failed` and appends nothing.
 */
void proto_buf_append_fmt(struct proto_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* BLOSSOMD_PROTO_BUF_H */
