/* SPDX-License-Identifier: MIT */
/*
 * RESP2/RESP3 wire codec: a parser for client commands (multibulk arrays of bulk strings) and
 * an encoder for replies. No I/O: the parser reads a caller-owned byte buffer, the encoder
 * appends to a struct proto_buf.
 *
 * Parsing a connection's input (the server's read loop):
 *
 *	struct proto_resp_state st;   -- one per connection, proto_resp_state_init()
 *	struct proto_argv av;         -- one per connection, proto_argv_init()
 *	for (;;) {
 *		n = proto_resp_parse(&st, rbuf + start, end - start, &lim, &av, &msg);
 *		if (n > 0) { run av; start += n; continue; }
 *		if (n == 0) break;    -- read more; proto_resp_need() says how much at least
 *		reply "-ERR msg" (if msg), then close      -- n < 0
 *	}
 *
 * The parser is resumable. When a command is incomplete it returns 0 and remembers in `st` how
 * far it got (the count line, the bulks already complete, the header of the bulk being read,
 * where the search for a line end stopped), all as offsets from the command's first byte. The
 * next call must pass a buffer that starts at the same command byte and holds at least the
 * bytes passed before (the caller may move or reallocate its buffer in between: nothing keeps a
 * pointer into it). Each call therefore only looks at bytes it has not seen, so a 64 MB bulk
 * that arrives in 16 KB reads costs one pass, not one pass per read. proto_resp_need() gives
 * the buffer length the command needs before the next call can make progress, so the server can
 * grow its buffer once to hold a large bulk and need not call the parser on every read.
 *
 * Error texts are Redis 7.0's where Redis has one (networking.c, processMultibulkBuffer).
 * Differences from Redis, on purpose:
 *   - Inline commands are not supported: a command must start with '*'. (blossomd decides the
 *     protocol from a connection's first byte; bloomd's text protocol covers line commands.)
 *   - The "\r" ending a header line must be followed by "\n", and a bulk's data by "\r\n";
 *     Redis skips those two bytes unchecked. A client that gets lengths wrong is stopped at the
 *     first bad byte instead of being misread.
 */
#ifndef BLOSSOMD_PROTO_RESP_H
#define BLOSSOMD_PROTO_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/buf.h"

/* Longest header line ("*N" or "$N") the parser waits for; Redis's PROTO_INLINE_MAX_SIZE. */
#define PROTO_RESP_MAX_HEADER (64 * 1024)

/*
 * Before a client has authenticated (proto_limits.unauthenticated): the most elements in one
 * command and the longest bulk, Redis 7.0's fixed numbers (networking.c). AUTH, and HELLO 3
 * AUTH user token SETNAME name, fit with room to spare (a token is at most 4096 bytes).
 */
#define PROTO_RESP_UNAUTH_MAX_ARGS 10
#define PROTO_RESP_UNAUTH_MAX_BULK 16384

/* Size of the buffer in struct proto_resp_state holding a formatted error message. */
#define PROTO_RESP_ERRBUF 48

/*
 * Per-connection protocol limits (filled from struct config by the server).
 */
struct proto_limits {
	size_t max_bulk_bytes; /* RESP: longest bulk string; longer is "invalid bulk length" */
	size_t max_args;       /* RESP: most elements in one command; more is "invalid multibulk
				* length" */
	size_t max_line_bytes; /* text protocol: longest line, for proto_text_line(); the RESP
				* parser does not use it */
	bool unauthenticated;  /* RESP: the client has yet to AUTH: at most
				* PROTO_RESP_UNAUTH_MAX_ARGS elements and PROTO_RESP_UNAUTH_MAX_BULK
				* bytes per bulk as well */
	size_t point_max;      /* RESP: a complete command of more elements than this (0: no
				* limit) leaves argv[] unset, argv_unset true: the caller sets it
				* from argoff (a million pointers are tens of ms: in parts) */
};

/*
 * One parsed command: argc arguments, argument i is argvlen[i] bytes at argv[i]. The arguments
 * point into the caller's input buffer (zero copy) and are not NUL-terminated; they stay valid
 * while that buffer is unchanged. The arrays grow as needed and are reused, so once a
 * connection has seen its largest command no parse allocates.
 */
struct proto_argv {
	size_t argc;
	size_t cap; /* entries allocated in each array */
	const char **argv;
	size_t *argvlen;
	size_t *argoff;	 /* parser scratch: offsets of the arguments from the command's first
			  * byte, kept while a command is incomplete (the buffer may move) */
	size_t maxlen2;	 /* the longest argument from the third on (argv[2]...): a million-key
			  * command's length check needs no pass over its arguments */
	bool argv_unset; /* complete, but argv[] is to be set from argoff (point_max) */
	char *ibuf;	 /* an inline command's quoted arguments, unescaped */
	size_t ibufcap;
};

/* Longest inline command line (Redis's PROTO_INLINE_MAX_SIZE). */
#define PROTO_RESP_INLINE_MAX (64 * 1024)

/*
 * Redis's string2ll() grammar: an optional '-', then "0" alone or a digit 1-9 followed by
 * digits, at most 20 bytes, within long long (no '+', no spaces, no leading zeros). Returns
 * true and sets *out if s[0..n) is such a number; false otherwise (*out untouched).
 */
bool proto_resp_parse_ll(const char *s, size_t n, long long *out);

/* Make av empty with no allocation. Cannot fail. */
void proto_argv_init(struct proto_argv *av);

/* Release the arrays of av and leave it as proto_argv_init() does. Cannot fail. */
void proto_argv_free(struct proto_argv *av);

/*
 * Make room for at least n arguments (argc unchanged).
 * Returns 0 on success, -ENOMEM if allocation fails or n is too large (av unchanged then).
 */
int proto_argv_reserve(struct proto_argv *av, size_t n);

/* Bytes allocated for av's arrays (for a server's accounting of what a connection holds). */
size_t proto_argv_bytes(const struct proto_argv *av);

/*
 * Parse progress of the command at the front of a connection's input. Treat as opaque; the
 * fields are public only so the state can live inside the connection without allocation.
 */
struct proto_resp_state {
	size_t nargs;	/* elements declared by "*N"; 0 while the count line is unparsed */
	size_t got;	/* complete elements (their offsets/lengths are in argv->argoff/argvlen) */
	size_t pos;	/* offset of the first byte not yet consumed */
	size_t scan;	/* offset where the search for the '\r' of the current header resumes */
	size_t bulklen; /* declared length of the bulk being read; SIZE_MAX: next is a "$" line */
	size_t need;	/* see proto_resp_need() */
	size_t maxlen2; /* the longest bulk from the third on, so far (proto_argv.maxlen2) */
	char errbuf[PROTO_RESP_ERRBUF]; /* formatted error message, see proto_resp_parse() */
};

/* Prepare st for the first command of a connection. Cannot fail. */
void proto_resp_state_init(struct proto_resp_state *st);

/*
 * Give back the memory of av's arrays beyond keep entries, so that one large command does not
 * leave a connection holding arrays its size (Redis too shrinks a client's argv after it).
 * The elements of the incomplete command st is parsing are kept (the arrays never shrink
 * below them), so this may be called between any two proto_resp_parse() calls; av->argv of
 * the last complete command is invalid afterwards. Cannot fail: if realloc() will not shrink
 * an array, that array keeps its size.
 */
void proto_resp_trim(const struct proto_resp_state *st, struct proto_argv *av, size_t keep);

/*
 * Parse one command, a multibulk array "*N\r\n" followed by N bulk strings "$L\r\n<L bytes>\r\n",
 * or, when buf does not start with '*', an inline command as Redis takes it (redis-cli --pipe,
 * telnet): one line ending in "\n" or "\r\n", split as Redis's sdssplitargs() does (blanks
 * separate arguments; "double quotes" with \n \r \t \b \a \\ \" \xHH escapes and 'single
 * quotes' with \' group them; a closing quote must end its argument); an empty line is an
 * empty command. From the start of buf (len bytes). st carries the progress of an incomplete
 * command between calls (see the top of this file); av receives the arguments; lim gives the
 * limits; errmsg (may be NULL) receives the error text. Every call sets av->argc (0 unless the
 * return is > 0) and *errmsg (NULL unless the return is -EPROTO).
 *
 * Returns:
 *   > 0      a complete command: the number of bytes it took from buf. av->argc arguments
 *            point into buf. "*0\r\n" and "*-1\r\n" (any count <= 0, as in Redis) are empty
 *            commands: consumed, av->argc == 0; the caller skips them. st is ready for the
 *            next command, which starts at buf + return value.
 *   0        the command is not complete yet (possibly len == 0). st remembers the progress;
 *            call again with the same start and more bytes. A command may be split at any byte.
 *   -EPROTO  protocol error; *errmsg is the reply text without the "-ERR " prefix, a static
 *            string or st->errbuf (valid until st is next used):
 *              "Protocol error: too big inline request"   an inline line without its "\n" in
 *                  the first PROTO_RESP_INLINE_MAX bytes (a NUL byte ends the search, as in Redis)
 *              "Protocol error: unbalanced quotes in request"   an inline line whose quotes do
 *                  not close, or a closing quote followed by something other than a blank
 *              "Protocol error: too big mbulk count string"   no '\r' in the first 64 KiB
 *                  (PROTO_RESP_MAX_HEADER) of the count line
 *              "Protocol error: invalid multibulk length"   count is not a number in Redis's
 *                  strict form (no '+', no leading zeros, no spaces, fits in 64 bits), is
 *                  above lim->max_args, or its '\r' is not followed by '\n'
 *              "Protocol error: unauthenticated multibulk length"   lim->unauthenticated and
 *                  a count above PROTO_RESP_UNAUTH_MAX_ARGS (Redis 7.0)
 *              "Protocol error: too big bulk count string"   same as above, for a "$" line
 *              "Protocol error: expected '$', got 'x'"   an element is not a bulk string (x is
 *                  the byte found; as in Redis a NUL byte ends the message just before it)
 *              "Protocol error: invalid bulk length"   length not a number, negative, above
 *                  lim->max_bulk_bytes, or its '\r' is not followed by '\n'
 *              "Protocol error: unauthenticated bulk length"   lim->unauthenticated and a
 *                  length above PROTO_RESP_UNAUTH_MAX_BULK (Redis 7.0)
 *              "Protocol error: expected CRLF after bulk data"   the 2 bytes after the declared
 *                  length are not "\r\n" (ours; Redis does not check)
 *            Declared lengths are never used to allocate, so "$99999999999999999999" costs
 *            nothing. st must be re-initialised before it parses again; the server replies
 *            and closes the connection, as Redis does.
 *   -ENOMEM  the argument arrays could not grow; *errmsg is NULL; st must be re-initialised.
 */
ssize_t proto_resp_parse(struct proto_resp_state *st, const char *buf, size_t len,
			 const struct proto_limits *lim, struct proto_argv *av,
			 const char **errmsg);

/*
 * After proto_resp_parse() returned 0: the buffer length (counted from the command's first
 * byte) needed before the next call can make progress. Always greater than the len of that
 * call. While a bulk's data is awaited this is the exact end of that bulk (its "\r\n"
 * included), so the caller can size its buffer once for a large bulk and skip parse calls until
 * that many bytes are in; otherwise it is len + 1 (a header line's end is not known yet).
 * After init or a complete command it is 1. Cannot fail. SIZE_MAX if the end does not fit in
 * size_t (cannot happen with a sane max_bulk_bytes).
 */
size_t proto_resp_need(const struct proto_resp_state *st);

/*
 * Reply encoder. Each function appends one RESP value, or the header of an aggregate, to b.
 * `resp` is the connection's protocol version: 2 for RESP2, 3 (or more) for RESP3; functions
 * without it write the same bytes in both. Failures only set b->failed (see buf.h).
 */

/* "+s\r\n": a simple string of n bytes; any '\r' or '\n' in s is written as ' '. */
void proto_resp_simple(struct proto_buf *b, const char *s, size_t n);

/* "+OK\r\n". */
void proto_resp_ok(struct proto_buf *b);

/*
 * "-ERR msg\r\n": an error of n bytes. As in Redis, a message that starts with '-' carries its
 * own error code and is written as is ("-WRONGTYPE ...", "-NOAUTH ..."); otherwise "-ERR " is
 * put in front. Any '\r' or '\n' in msg is written as ' ' (Redis does the same for formatted
 * errors), so a message can never break the framing.
 */
void proto_resp_error(struct proto_buf *b, const char *msg, size_t n);

/* As proto_resp_error() with the NUL-terminated message msg. */
void proto_resp_error_str(struct proto_buf *b, const char *msg);

/* As proto_resp_error() with a printf-style message (for rare paths). */
void proto_resp_error_fmt(struct proto_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ":v\r\n". */
void proto_resp_integer(struct proto_buf *b, int64_t v);

/* "$n\r\n<n bytes>\r\n": a binary-safe bulk string (p may be NULL when n is 0). */
void proto_resp_bulk(struct proto_buf *b, const void *p, size_t n);

/* As proto_resp_bulk() with the NUL-terminated string s. */
void proto_resp_bulk_str(struct proto_buf *b, const char *s);

/* The null bulk string: RESP2 "$-1\r\n", RESP3 "_\r\n". */
void proto_resp_null(struct proto_buf *b, int resp);

/* The null array: RESP2 "*-1\r\n", RESP3 "_\r\n". */
void proto_resp_null_array(struct proto_buf *b, int resp);

/* Array header "*n\r\n"; the caller then appends n values. */
void proto_resp_array(struct proto_buf *b, size_t n);

/* Map header for n key/value pairs: RESP3 "%n\r\n", RESP2 the flat array "*<2n>\r\n"; the
 * caller then appends 2n values (key, value, key, value, ...). */
void proto_resp_map(struct proto_buf *b, int resp, size_t n);

/* Set header: RESP3 "~n\r\n", RESP2 "*n\r\n"; the caller then appends n values. */
void proto_resp_set(struct proto_buf *b, int resp, size_t n);

/* Boolean: RESP3 "#t\r\n" / "#f\r\n", RESP2 ":1\r\n" / ":0\r\n". */
void proto_resp_bool(struct proto_buf *b, int resp, bool v);

/*
 * Double, formatted with "%.17g" as Redis does: RESP3 ",<d>\r\n", RESP2 the bulk string "<d>".
 * Infinities are "inf" / "-inf" and NaN is "nan" in both versions (libc spellings vary).
 */
void proto_resp_double(struct proto_buf *b, int resp, double d);

/*
 * Verbatim string of n bytes with a 3-byte format ("txt" or "mkd"; only the first 3 bytes of
 * fmt are used and fmt must have at least 3): RESP3 "=<n+4>\r\n<fmt>:<s>\r\n", RESP2 the bulk
 * string "<s>".
 */
void proto_resp_verbatim(struct proto_buf *b, int resp, const char *fmt, const char *s, size_t n);

#endif /* BLOSSOMD_PROTO_RESP_H */
