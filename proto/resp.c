/* SPDX-License-Identifier: MIT */
/*
 * RESP command parser (resumable, zero copy) and reply encoder; see resp.h for the contract.
 * The parser follows Redis 7.0's processMultibulkBuffer step by step, so that the same bytes
 * give the same error, but keeps its progress as offsets so a large command is scanned once.
 */
#include "proto/resp.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* st->bulklen when the next thing to read is a "$" header line. */
#define RESP_NO_BULK SIZE_MAX

/* First size of the argument arrays: enough for every BF command with a few keys. */
#define RESP_ARGV_MIN_CAP 8

static const char err_mbulk_big[] = "Protocol error: too big mbulk count string";
static const char err_mbulk_len[] = "Protocol error: invalid multibulk length";
static const char err_bulk_big[] = "Protocol error: too big bulk count string";
static const char err_bulk_len[] = "Protocol error: invalid bulk length";
static const char err_bulk_crlf[] = "Protocol error: expected CRLF after bulk data";
static const char err_unauth_mbulk[] = "Protocol error: unauthenticated multibulk length";
static const char err_unauth_bulk[] = "Protocol error: unauthenticated bulk length";
static const char err_inline_big[] = "Protocol error: too big inline request";
static const char err_inline_quotes[] = "Protocol error: unbalanced quotes in request";

void proto_argv_init(struct proto_argv *av)
{
	av->argc = 0;
	av->maxlen2 = 0;
	av->argv_unset = false;
	av->cap = 0;
	av->argv = NULL;
	av->argvlen = NULL;
	av->argoff = NULL;
	av->ibuf = NULL;
	av->ibufcap = 0;
}

void proto_argv_free(struct proto_argv *av)
{
	free(av->argv);
	free(av->argvlen);
	free(av->argoff);
	free(av->ibuf);
	proto_argv_init(av);
}

int proto_argv_reserve(struct proto_argv *av, size_t n)
{
	const char **argv;
	size_t *argvlen, *argoff;
	size_t cap;

	if (n <= av->cap)
		return 0;
	cap = av->cap ? av->cap : RESP_ARGV_MIN_CAP;
	while (cap < n) {
		if (cap > SIZE_MAX / 2 / sizeof(size_t)) {
			cap = n;
			break;
		}
		cap *= 2;
	}
	if (cap > SIZE_MAX / sizeof(size_t))
		return -ENOMEM;
	/*
	 * Grow the three arrays one by one. If a later one fails the earlier ones are merely
	 * larger than cap says, which is harmless: cap stays the size all three have.
	 */
	argv = realloc(av->argv, cap * sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	av->argv = argv;
	argvlen = realloc(av->argvlen, cap * sizeof(*argvlen));
	if (!argvlen)
		return -ENOMEM;
	av->argvlen = argvlen;
	argoff = realloc(av->argoff, cap * sizeof(*argoff));
	if (!argoff)
		return -ENOMEM;
	av->argoff = argoff;
	av->cap = cap;
	return 0;
}

size_t proto_argv_bytes(const struct proto_argv *av)
{
	return av->cap * (sizeof(*av->argv) + sizeof(*av->argvlen) + sizeof(*av->argoff)) +
	       av->ibufcap;
}

void proto_resp_trim(const struct proto_resp_state *st, struct proto_argv *av, size_t keep)
{
	const char **argv;
	size_t *argvlen, *argoff;
	size_t cap = keep > st->got ? keep : st->got;

	if (cap < RESP_ARGV_MIN_CAP)
		cap = RESP_ARGV_MIN_CAP;
	if (av->cap <= cap)
		return;
	/* cap says what all three arrays hold at least, so it may drop first: an array that
	 * does not shrink is merely larger than cap. */
	av->cap = cap;
	argv = realloc(av->argv, cap * sizeof(*argv));
	if (argv)
		av->argv = argv;
	argvlen = realloc(av->argvlen, cap * sizeof(*argvlen));
	if (argvlen)
		av->argvlen = argvlen;
	argoff = realloc(av->argoff, cap * sizeof(*argoff));
	if (argoff)
		av->argoff = argoff;
	av->argc = 0;
	av->maxlen2 = 0;
	av->argv_unset = false;
}

void proto_resp_state_init(struct proto_resp_state *st)
{
	st->nargs = 0;
	st->got = 0;
	st->pos = 0;
	st->scan = 0;
	st->bulklen = RESP_NO_BULK;
	st->need = 1;
	st->maxlen2 = 0;
	st->errbuf[0] = '\0';
}

size_t proto_resp_need(const struct proto_resp_state *st)
{
	return st->need;
}

/*
 * Redis's string2ll() grammar: an optional '-', then "0" alone or a digit 1-9 followed by
 * digits; at most 20 bytes; the value fits in long long. Returns true and sets *out if s[0..n)
 * is such a number.
 */
bool proto_resp_parse_ll(const char *s, size_t n, long long *out)
{
	unsigned long long v = 0;
	bool neg = false;
	size_t i = 0;

	if (n == 0 || n > 20)
		return false;
	if (n == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	if (s[0] == '-') {
		neg = true;
		i = 1;
		if (n == 1)
			return false;
	}
	if (s[i] < '1' || s[i] > '9')
		return false;
	for (; i < n; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return false;
		d = (unsigned)(s[i] - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (unsigned long long)LLONG_MAX + 1)
			return false;
		*out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
	} else {
		if (v > (unsigned long long)LLONG_MAX)
			return false;
		*out = (long long)v;
	}
	return true;
}

/*
 * Find the '\r' ending the header line that starts at st->pos, resuming the search at
 * st->scan. Returns 1 with *eol at the '\r' when the '\r' and the byte after it are in buf;
 * 0 when the line is incomplete (st->scan and st->need updated), with *toobig set when no '\r'
 * is present and the line already exceeds PROTO_RESP_MAX_HEADER (Redis's check).
 */
static int resp_find_eol(struct proto_resp_state *st, const char *buf, size_t len, size_t *eol,
			 bool *toobig)
{
	const char *cr;

	*toobig = false;
	cr = st->scan < len ? memchr(buf + st->scan, '\r', len - st->scan) : NULL;
	if (!cr) {
		st->scan = len;
		st->need = len + 1;
		*toobig = len - st->pos > PROTO_RESP_MAX_HEADER;
		return 0;
	}
	*eol = (size_t)(cr - buf);
	if (*eol + 1 >= len) {
		st->scan = *eol; /* find it again at once next time */
		st->need = *eol + 2;
		return 0;
	}
	return 1;
}

static ssize_t resp_fail(const char **errmsg, const char *msg)
{
	if (errmsg)
		*errmsg = msg;
	return -EPROTO;
}

static ssize_t resp_fail_got(struct proto_resp_state *st, const char **errmsg, char expected,
			     char got)
{
	snprintf(st->errbuf, sizeof(st->errbuf), "Protocol error: expected '%c', got '%c'",
		 expected, got);
	return resp_fail(errmsg, st->errbuf);
}

static bool resp_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int resp_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Append an argument to av. 0 or -ENOMEM. */
static int resp_inline_arg(struct proto_argv *av, const char *p, size_t n)
{
	if (av->argc == av->cap && proto_argv_reserve(av, av->argc + 1) < 0)
		return -ENOMEM;
	av->argv[av->argc] = p;
	av->argvlen[av->argc] = n;
	if (av->argc >= 2 && n > av->maxlen2)
		av->maxlen2 = n;
	av->argc++;
	return 0;
}

/*
 * One quoted-or-not argument of line [*pp, e) as sdssplitargs() reads it, unescaped into
 * out (which has room: it never grows past its source). *pp moves past it. 0, or -EPROTO.
 */
static int resp_inline_quoted(const char **pp, const char *e, char *out, size_t *outlen)
{
	const char *p = *pp;
	bool inq = false, insq = false, done = false;
	size_t w = 0;

	while (!done) {
		char ch = p < e ? *p : '\0';

		if (inq) {
			if (ch == '\\' && e - p >= 4 && p[1] == 'x' && resp_hex(p[2]) >= 0 &&
			    resp_hex(p[3]) >= 0) {
				out[w++] = (char)(resp_hex(p[2]) * 16 + resp_hex(p[3]));
				p += 3;
			} else if (ch == '\\' && e - p >= 2) {
				char c = *++p;

				out[w++] = c == 'n'   ? '\n'
					   : c == 'r' ? '\r'
					   : c == 't' ? '\t'
					   : c == 'b' ? '\b'
					   : c == 'a' ? '\a'
						      : c;
			} else if (ch == '"') {
				if (e - p >= 2 && !resp_blank(p[1]))
					return -EPROTO;
				done = true;
			} else if (!ch) {
				return -EPROTO;
			} else {
				out[w++] = ch;
			}
		} else if (insq) {
			if (ch == '\\' && e - p >= 2 && p[1] == '\'') {
				p++;
				out[w++] = '\'';
			} else if (ch == '\'') {
				if (e - p >= 2 && !resp_blank(p[1]))
					return -EPROTO;
				done = true;
			} else if (!ch) {
				return -EPROTO;
			} else {
				out[w++] = ch;
			}
		} else {
			switch (ch) {
			case ' ':
			case '\n':
			case '\r':
			case '\t':
			case '\0':
				done = true;
				break;
			case '"':
				inq = true;
				break;
			case '\'':
				insq = true;
				break;
			default:
				out[w++] = ch;
				break;
			}
		}
		if (p < e)
			p++;
	}
	*pp = p;
	*outlen = w;
	return 0;
}

/* An inline command (see proto_resp_parse()). */
static ssize_t resp_inline(struct proto_resp_state *st, const char *buf, size_t len,
			   struct proto_argv *av, const char **errmsg)
{
	const char *nul = memchr(buf, '\0', len);
	size_t scan = nul ? (size_t)(nul - buf) : len;
	const char *nl = memchr(buf, '\n', scan);

	if (!nl) {
		if (len > PROTO_RESP_INLINE_MAX)
			return resp_fail(errmsg, err_inline_big);
		st->need = len + 1;
		return 0;
	}
	size_t end = (size_t)(nl - buf), consumed = end + 1;
	if (end && buf[end - 1] == '\r')
		end--;
	const char *p = buf, *e = buf + end;
	bool quoted = memchr(buf, '"', end) || memchr(buf, '\'', end);

	if (quoted && av->ibufcap < end) {
		char *b = realloc(av->ibuf, end);

		if (!b)
			return -ENOMEM;
		av->ibuf = b;
		av->ibufcap = end;
	}
	size_t w = 0;
	for (;;) {
		while (p < e && resp_blank(*p))
			p++;
		if (p == e)
			break;
		if (!quoted) {
			const char *start = p;

			while (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
				p++;
			if (resp_inline_arg(av, start, (size_t)(p - start)))
				goto nomem;
			continue;
		}
		size_t n;
		if (resp_inline_quoted(&p, e, av->ibuf + w, &n)) {
			av->argc = 0;
			av->maxlen2 = 0;
			return resp_fail(errmsg, err_inline_quotes);
		}
		if (resp_inline_arg(av, av->ibuf + w, n))
			goto nomem;
		w += n;
	}
	proto_resp_state_init(st);
	return (ssize_t)consumed;
nomem:
	av->argc = 0;
	av->maxlen2 = 0;
	av->argv_unset = false;
	return -ENOMEM;
}

/*
 * The count line "*N\r\n" at buf[0]. *go_on: the state is set for N arguments, read on. Else
 * the result is proto_resp_parse()'s: 0 if more bytes are needed, the bytes of an empty command
 * consumed, or an error.
 */
static ssize_t resp_count_line(struct proto_resp_state *st, const char *buf, size_t len,
			       const struct proto_limits *lim, const char **errmsg, bool *go_on)
{
	size_t eol;
	long long ll;
	bool toobig;

	*go_on = false;
	if (!resp_find_eol(st, buf, len, &eol, &toobig))
		return toobig ? resp_fail(errmsg, err_mbulk_big) : 0;
	if (buf[eol + 1] != '\n' || !proto_resp_parse_ll(buf + 1, eol - 1, &ll) ||
	    (ll > 0 && (unsigned long long)ll > lim->max_args))
		return resp_fail(errmsg, err_mbulk_len);
	if (lim->unauthenticated && ll > PROTO_RESP_UNAUTH_MAX_ARGS)
		return resp_fail(errmsg, err_unauth_mbulk);
	if (ll <= 0) {
		proto_resp_state_init(st);
		return (ssize_t)(eol + 2);
	}
	st->nargs = (size_t)ll;
	st->got = 0;
	st->pos = eol + 2;
	st->scan = st->pos;
	st->bulklen = RESP_NO_BULK;
	*go_on = true;
	return 0;
}

/* A bulk header line "$L\r\n" at st->pos: 1 with st->bulklen set, 0 if more bytes are needed,
 * or an error as proto_resp_parse()'s. */
static ssize_t resp_bulk_header(struct proto_resp_state *st, const char *buf, size_t len,
				const struct proto_limits *lim, const char **errmsg)
{
	size_t eol;
	long long ll;
	bool toobig;

	if (!resp_find_eol(st, buf, len, &eol, &toobig))
		return toobig ? resp_fail(errmsg, err_bulk_big) : 0;
	if (buf[st->pos] != '$')
		return resp_fail_got(st, errmsg, '$', buf[st->pos]);
	if (buf[eol + 1] != '\n' ||
	    !proto_resp_parse_ll(buf + st->pos + 1, eol - st->pos - 1, &ll) || ll < 0 ||
	    (unsigned long long)ll > lim->max_bulk_bytes || (unsigned long long)ll > SIZE_MAX - 2)
		return resp_fail(errmsg, err_bulk_len);
	if (lim->unauthenticated && ll > PROTO_RESP_UNAUTH_MAX_BULK)
		return resp_fail(errmsg, err_unauth_bulk);
	st->bulklen = (size_t)ll;
	st->pos = eol + 2;
	return 1;
}

/* The bulk's data and its "\r\n" at st->pos, noted as the next argument: 1, 0 if more bytes
 * are needed, or an error as proto_resp_parse()'s. */
static ssize_t resp_bulk_data(struct proto_resp_state *st, const char *buf, size_t len,
			      struct proto_argv *av, const char **errmsg)
{
	if (len - st->pos < st->bulklen + 2) {
		st->need =
		    st->pos > SIZE_MAX - (st->bulklen + 2) ? SIZE_MAX : st->pos + st->bulklen + 2;
		return 0;
	}
	if (buf[st->pos + st->bulklen] != '\r' || buf[st->pos + st->bulklen + 1] != '\n')
		return resp_fail(errmsg, err_bulk_crlf);
	if (st->got == av->cap && proto_argv_reserve(av, st->got + 1) < 0)
		return -ENOMEM;
	av->argoff[st->got] = st->pos;
	/* Touched now, as the command comes in, rather than all at once when it is complete: a
	 * million arguments' first touch of argv[] is tens of ms of page faults that would hold
	 * the loop in one turn. */
	av->argv[st->got] = NULL;
	av->argvlen[st->got] = st->bulklen;
	if (st->got >= 2 && st->bulklen > st->maxlen2)
		st->maxlen2 = st->bulklen;
	st->got++;
	st->pos += st->bulklen + 2;
	st->scan = st->pos;
	st->bulklen = RESP_NO_BULK;
	return 1;
}

ssize_t proto_resp_parse(struct proto_resp_state *st, const char *buf, size_t len,
			 const struct proto_limits *lim, struct proto_argv *av, const char **errmsg)
{
	size_t consumed;
	ssize_t r;

	av->argc = 0;
	av->maxlen2 = 0;
	av->argv_unset = false;
	if (errmsg)
		*errmsg = NULL;

	if (st->nargs == 0) {
		bool go_on;

		if (len == 0) {
			st->need = 1;
			return 0;
		}
		if (buf[0] != '*')
			return resp_inline(st, buf, len, av, errmsg);
		r = resp_count_line(st, buf, len, lim, errmsg, &go_on);
		if (!go_on)
			return r;
	}
	while (st->got < st->nargs) {
		if (st->bulklen == RESP_NO_BULK &&
		    (r = resp_bulk_header(st, buf, len, lim, errmsg)) <= 0)
			return r;
		if ((r = resp_bulk_data(st, buf, len, av, errmsg)) <= 0)
			return r;
	}

	/* Complete: turn offsets into pointers into this call's buffer (or leave that to the
	 * caller). */
	av->argv_unset = lim->point_max && st->got > lim->point_max;
	for (size_t i = 0; i < st->got && !av->argv_unset; i++)
		av->argv[i] = buf + av->argoff[i];
	av->argc = st->got;
	av->maxlen2 = st->maxlen2;
	consumed = st->pos;
	proto_resp_state_init(st);
	return (ssize_t)consumed;
}

/* Append s[0..n) with '\r' and '\n' written as ' ', so text can never end a RESP line early. */
static void resp_append_line_safe(struct proto_buf *b, const char *s, size_t n)
{
	size_t start = b->len, i;

	proto_buf_append(b, s, n);
	if (b->failed)
		return;
	for (i = start; i < b->len; i++) {
		if (b->data[i] == '\r' || b->data[i] == '\n')
			b->data[i] = ' ';
	}
}

/* "<prefix><v>\r\n" for lengths and counts. */
static void resp_header(struct proto_buf *b, char prefix, uint64_t v)
{
	proto_buf_append_char(b, prefix);
	proto_buf_append_u64(b, v);
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_simple(struct proto_buf *b, const char *s, size_t n)
{
	proto_buf_append_char(b, '+');
	resp_append_line_safe(b, s, n);
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_ok(struct proto_buf *b)
{
	proto_buf_append(b, "+OK\r\n", 5);
}

void proto_resp_error(struct proto_buf *b, const char *msg, size_t n)
{
	if (n == 0 || msg[0] != '-')
		proto_buf_append(b, "-ERR ", 5);
	resp_append_line_safe(b, msg, n);
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_error_str(struct proto_buf *b, const char *msg)
{
	proto_resp_error(b, msg, strlen(msg));
}

void proto_resp_error_fmt(struct proto_buf *b, const char *fmt, ...)
{
	size_t start = b->len, i;
	va_list ap;
	int n;

	if (b->failed)
		return;
	/* Format in place after "-ERR ", then drop that prefix if the message brings its own. */
	proto_buf_append(b, "-ERR ", 5);
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || proto_buf_reserve(b, (size_t)n + 1) < 0) {
		b->len = start;
		b->failed = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	if (n > 0 && b->data[b->len] == '-') {
		memmove(b->data + start, b->data + b->len, (size_t)n);
		b->len = start;
	}
	for (i = b->len; i < b->len + (size_t)n; i++) {
		if (b->data[i] == '\r' || b->data[i] == '\n')
			b->data[i] = ' ';
	}
	b->len += (size_t)n;
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_integer(struct proto_buf *b, int64_t v)
{
	proto_buf_append_char(b, ':');
	proto_buf_append_i64(b, v);
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_bulk(struct proto_buf *b, const void *p, size_t n)
{
	resp_header(b, '$', n);
	proto_buf_append(b, p, n);
	proto_buf_append(b, "\r\n", 2);
}

void proto_resp_bulk_str(struct proto_buf *b, const char *s)
{
	proto_resp_bulk(b, s, strlen(s));
}

void proto_resp_null(struct proto_buf *b, int resp)
{
	if (resp >= 3)
		proto_buf_append(b, "_\r\n", 3);
	else
		proto_buf_append(b, "$-1\r\n", 5);
}

void proto_resp_null_array(struct proto_buf *b, int resp)
{
	if (resp >= 3)
		proto_buf_append(b, "_\r\n", 3);
	else
		proto_buf_append(b, "*-1\r\n", 5);
}

void proto_resp_array(struct proto_buf *b, size_t n)
{
	resp_header(b, '*', n);
}

void proto_resp_map(struct proto_buf *b, int resp, size_t n)
{
	if (resp >= 3)
		resp_header(b, '%', n);
	else
		resp_header(b, '*', (uint64_t)n * 2);
}

void proto_resp_set(struct proto_buf *b, int resp, size_t n)
{
	resp_header(b, resp >= 3 ? '~' : '*', n);
}

void proto_resp_bool(struct proto_buf *b, int resp, bool v)
{
	if (resp >= 3)
		proto_buf_append(b, v ? "#t\r\n" : "#f\r\n", 4);
	else
		proto_buf_append(b, v ? ":1\r\n" : ":0\r\n", 4);
}

void proto_resp_double(struct proto_buf *b, int resp, double d)
{
	char tmp[40]; /* "%.17g" needs at most 24 bytes ("-1.2345678901234567e-308") */
	int n;

	if (isnan(d))
		n = snprintf(tmp, sizeof(tmp), "nan");
	else if (isinf(d))
		n = snprintf(tmp, sizeof(tmp), "%s", d > 0 ? "inf" : "-inf");
	else
		n = snprintf(tmp, sizeof(tmp), "%.17g", d);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->failed = true;
		return;
	}
	if (resp >= 3) {
		proto_buf_append_char(b, ',');
		proto_buf_append(b, tmp, (size_t)n);
		proto_buf_append(b, "\r\n", 2);
	} else {
		proto_resp_bulk(b, tmp, (size_t)n);
	}
}

void proto_resp_verbatim(struct proto_buf *b, int resp, const char *fmt, const char *s, size_t n)
{
	if (resp < 3) {
		proto_resp_bulk(b, s, n);
		return;
	}
	resp_header(b, '=', (uint64_t)n + 4);
	proto_buf_append(b, fmt, 3);
	proto_buf_append_char(b, ':');
	proto_buf_append(b, s, n);
	proto_buf_append(b, "\r\n", 2);
}
