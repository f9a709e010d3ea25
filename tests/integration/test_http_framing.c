/* SPDX-License-Identifier: MIT */
/*
 * HTTP framing under hostile input, against the real daemon (issue 17, items 1, 8 and 9):
 *
 *   - a request libmicrohttpd can no longer read (a chunk-size line longer than its buffer)
 *     must not hold the loop: the text/RESP port and other HTTP clients are answered at once,
 *     the request is refused and closed, and SIGTERM still stops the daemon, even with
 *     idle_timeout and request_timeout both 0;
 *   - no request smuggling: whitespace before a header's colon, HTTP/1.1 without exactly one
 *     Host, a transfer coding other than chunked are refused at once and the connection closed,
 *     and what followed is never run as a request;
 *   - an invalid Content-Length gets exactly one well-formed answer, and nothing is run.
 *
 * Every answer is read up to the end of the connection and checked to be exactly one response:
 * its status line, a Content-Length that ends it where the connection ends.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/itest_check.h"

#define PROBLEM(type, title, status, detail)                                                       \
	"{\"type\":\"" type "\",\"title\":\"" title "\",\"status\":" #status                       \
	",\"detail\":\"" detail "\"}"
#define FILTER_NOT_FOUND                                                                           \
	PROBLEM("filter_not_found", "Filter not found", 404, "no filter of that name")

/* What one connection received up to its end. */
/* A JSON body: want, then the newline every JSON body ends with. */
static void body_eq(const char *got, const char *want)
{
	size_t n = strlen(want);

	ck_assert_msg(!strncmp(got, want, n) && !strcmp(got + n, n ? "\n" : ""),
		      "body '%s', expected '%s' and a newline", got, want);
}

struct wire {
	char buf[1 << 16];
	size_t n;
	bool closed; /* EOF or reset seen */
};

static struct wire W;

static int http_conn(void)
{
	int64_t until = itest_now_ms() + T;
	int fd;

	/* The HTTP port opens just after the main one. */
	while ((fd = itest_connect(d.http_port)) < 0 && itest_now_ms() < until)
		itest_sleep_ms(20);
	ck_assert_msg(fd >= 0, "connect to the HTTP port: %s", strerror(-fd));
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	int rc = itest_send(fd, p, n);

	ck_assert_msg(rc == 0, "send: %s", strerror(-rc));
}

/* Read everything until the daemon closes the connection, up to timeout_ms. */
static void read_to_end(int fd, struct wire *w, int timeout_ms)
{
	int64_t until = itest_now_ms() + timeout_ms;

	w->n = 0;
	w->closed = false;
	while (itest_now_ms() < until && w->n < sizeof(w->buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t got;

		if (poll(&p, 1, (int)(until - itest_now_ms())) <= 0)
			break;
		got = recv(fd, w->buf + w->n, sizeof(w->buf) - 1 - w->n, 0);
		if (got <= 0) {
			w->closed = true;
			break;
		}
		w->n += (size_t)got;
	}
	w->buf[w->n] = '\0';
}

/* s[0..n) with CR, LF and other control bytes escaped, for messages (TAP needs one line). */
static const char *esc(const char *s, size_t n)
{
	static char out[4096];
	size_t o = 0;

	for (size_t i = 0; i < n && o + 8 < sizeof(out); i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", ch);
	}
	out[o] = '\0';
	return out;
}

#define WIRE(w) esc((w)->buf, (w)->n)

/* Count of non-overlapping occurrences of s in w. */
static unsigned wire_count(const struct wire *w, const char *s)
{
	unsigned n = 0;

	for (const char *p = w->buf; (p = memmem(p, w->n - (size_t)(p - w->buf), s, strlen(s)));
	     p++)
		n++;
	return n;
}

/*
 * w holds exactly one response with this status and body, then the end of the connection:
 * one status line, a Content-Length that covers the body and nothing more, "Connection:
 * close". body NULL: any body.
 */
static void one_answer(const struct wire *w, int status, const char *body)
{
	const char *end = strstr(w->buf, "\r\n\r\n"), *cl;
	char line[64];
	size_t hlen;

	ck_assert_msg(w->closed, "connection not closed; got: %s", WIRE(w));
	ck_assert_msg(end != NULL, "no complete response; got: %s", WIRE(w));
	snprintf(line, sizeof(line), "HTTP/1.1 %d ", status);
	ck_assert_msg(strncmp(w->buf, line, strlen(line)) == 0, "expected %s; got: %s", line,
		      WIRE(w));
	/* A second status line would follow a CRLF (bodies here have none). */
	ck_assert_msg(wire_count(w, "\r\nHTTP/1.") == 0, "more than one response: %s", WIRE(w));
	hlen = (size_t)(end - w->buf) + 4;
	cl = strcasestr(w->buf, "\r\nContent-Length: ");
	ck_assert_msg(cl && cl < end, "no Content-Length: %s", WIRE(w));
	ck_assert_uint_eq(strtoull(cl + 18, NULL, 10), w->n - hlen);
	cl = strcasestr(w->buf, "\r\nConnection: close\r\n");
	ck_assert_msg(cl && cl < end, "no Connection: close: %s", WIRE(w));
	if (body)
		body_eq(w->buf + hlen, body);
}

/* One exchange on a fresh text/RESP connection. */
static void text_cmd(const char *req, const char *expect)
{
	int fd = conn();

	EXCHANGE(fd, req, expect);
	close(fd);
}

/* One request on a fresh connection; the whole answer lands in W. */
static void request(const void *req, size_t n, int timeout_ms)
{
	int fd = http_conn();

	send_all(fd, req, n);
	read_to_end(fd, &W, timeout_ms);
	close(fd);
}

static void request_str(const char *req)
{
	request(req, strlen(req), T);
}

/* A keep-alive GET on a fresh connection: its status line and body. */
static void get(const char *path, const char *status_line, const char *body)
{
	char req[512], *end;
	int fd = http_conn();
	ssize_t n;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
	send_all(fd, req, strlen(req));
	read_to_end(fd, &W, T);
	close(fd);
	n = (ssize_t)strlen(status_line);
	ck_assert_msg(strncmp(W.buf, status_line, (size_t)n) == 0, "GET %s: %s", path, WIRE(&W));
	end = strstr(W.buf, "\r\n\r\n");
	ck_assert_ptr_nonnull(end);
	body_eq(end + 4, body);
}

/* ---------------------------------------------------------------------------------------- */
/* Item 1: a request libmicrohttpd cannot read further must not hold the loop */

/* "POST ... chunked" with a chunk-size line of n bytes (size and extension), not ended. */
static char *long_chunk_line(size_t n, bool zeros, size_t *len)
{
	static const char head[] = "POST /v1/filters/ch/add HTTP/1.1\r\nHost: t\r\n"
				   "Content-Type: application/json\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n";
	char *req = malloc(sizeof(head) + n + 2);

	ck_assert_ptr_nonnull(req);
	memcpy(req, head, sizeof(head) - 1);
	*len = sizeof(head) - 1;
	if (zeros) {
		memset(req + *len, '0', n);
	} else {
		memcpy(req + *len, "f;", 2);
		memset(req + *len + 2, 'x', n - 2);
	}
	*len += n;
	memcpy(req + *len, "\r\n", 2);
	*len += 2;
	return req;
}

/* The other ports and clients answer at once while fd's request is stuck. */
static void others_answered(int within_ms)
{
	int64_t t0 = itest_now_ms();
	int fd = conn();

	/* One protocol per connection: text, then RESP. */
	ck_assert(itest_exchange(fd, "ping\n", "PONG\n", within_ms));
	close(fd);
	fd = conn();
	ck_assert(itest_exchange(fd, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n", within_ms));
	close(fd);
	get("/healthz", "HTTP/1.1 200 OK\r\n", "{\"status\":\"ok\"}");
	ck_assert_int_lt(itest_now_ms() - t0, within_ms);
}

#define STALLED                                                                                    \
	PROBLEM("bad_request", "Bad request", 400,                                                 \
		"the request cannot be read further (a line longer than the server's buffer?)")

START_TEST(test_long_chunk_line)
{
	static const struct {
		size_t n;
		bool zeros;
	} t[] = {{40000, false}, {100000, true}, {33000, false}};

	/* request_timeout far away: the answer below is the stall's, not the clock's. */
	start(CONF("request_timeout = 30\n"), NULL);
	text_cmd("create ch\n", "Done\n");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t len;
		char *req = long_chunk_line(t[i].n, t[i].zeros, &len);
		int fd = http_conn();
		int64_t t0 = itest_now_ms();

		send_all(fd, req, len);
		free(req);
		itest_sleep_ms(200);
		others_answered(2000);
		/* Refused within a few seconds, once, and closed. */
		read_to_end(fd, &W, 2 * T);
		close(fd);
		one_answer(&W, 400, STALLED);
		ck_assert_int_lt(itest_now_ms() - t0, 5000);
	}
	/* A long chunk extension that fits is still read. */
	{
		static const char rest[] = "\r\n{\"keys\":[\"a\"]}\r\n0\r\n\r\n";
		size_t len;
		char *req = long_chunk_line(20000, false, &len);

		req = realloc(req, len + sizeof(rest));
		ck_assert_ptr_nonnull(req);
		req[len - 2 - 20000] = 'e'; /* the size: 14 bytes */
		memcpy(req + len - 2, rest, sizeof(rest));
		request(req, len - 2 + sizeof(rest) - 1, T);
		free(req);
		ck_assert_msg(strncmp(W.buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", WIRE(&W));
		ck_assert_ptr_nonnull(strstr(W.buf, "\r\n\r\n{\"results\":[true]}"));
	}
	others_answered(2000);
	stop();
}
END_TEST

/* With no timeout at all, the stuck request still ends, and SIGTERM works while it is open. */
START_TEST(test_long_chunk_line_no_timeouts)
{
	size_t len;
	char *req;
	int fd, st;

	start(CONF("idle_timeout = 0\nrequest_timeout = 0\n"), NULL);
	req = long_chunk_line(40000, false, &len);
	fd = http_conn();
	send_all(fd, req, len);
	itest_sleep_ms(200);
	others_answered(2000);
	read_to_end(fd, &W, 2 * T);
	close(fd);
	one_answer(&W, 400, STALLED);

	/* SIGTERM right after such a request arrived. */
	fd = http_conn();
	send_all(fd, req, len);
	free(req);
	itest_sleep_ms(100);
	st = itest_stop(&d, T); /* SIGKILL after T */
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "blossomd did not exit 0 after SIGTERM (wait status %d)", st);
	close(fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Item 8: request smuggling */

#define HEADER_NAME                                                                                \
	PROBLEM("bad_request", "Bad request", 400,                                                 \
		"malformed header field name (whitespace before the colon?)")
#define NO_HOST                                                                                    \
	PROBLEM("bad_request", "Bad request", 400,                                                 \
		"an HTTP/1.1 request needs exactly one Host header")
#define CODING                                                                                     \
	PROBLEM("not_implemented", "Not implemented", 501, "Transfer-Encoding other than chunked")

START_TEST(test_smuggling)
{
	static const struct {
		const char *req;
		int status;
		const char *body;
	} t[] = {
	    /* The body would be a second request (it was: smug2 was created). */
	    {"PUT /v1/filters/smug HTTP/1.1\r\nHost: t\r\nContent-Length : 44\r\n\r\n"
	     "PUT /v1/filters/smug2 HTTP/1.1\r\nHost: t\r\n\r\n",
	     400, HEADER_NAME},
	    {"PUT /v1/filters/smug HTTP/1.1\r\nHost: t\r\nContent-Length\t: 44\r\n\r\n"
	     "PUT /v1/filters/smug2 HTTP/1.1\r\nHost: t\r\n\r\n",
	     400, HEADER_NAME},
	    /* Past the CL+TE check: the daemon would read 44 bytes, a proxy a chunked body. */
	    {"POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
	     "Content-Length: 5\r\nTransfer-Encoding : chunked\r\n\r\n"
	     "0\r\n\r\nPUT /v1/filters/smug2 HTTP/1.1\r\nHost: t\r\n\r\n",
	     400, HEADER_NAME},
	    {"PUT /v1/filters/smug HTTP/1.1\r\nHost: t\r\nX-Y\x0b: 1\r\n\r\n", 400, HEADER_NAME},
	    /* RFC 9112 3.2: HTTP/1.1 needs exactly one Host. */
	    {"PUT /v1/filters/smug HTTP/1.1\r\n\r\n", 400, NO_HOST},
	    {"PUT /v1/filters/smug HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, NO_HOST},
	    /* A coding the daemon cannot decode: 501 at once, not a wait for the body's end. */
	    {"POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
	     "Transfer-Encoding: gzip\r\n\r\n",
	     501, CODING},
	    {"POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
	     "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	     501, CODING},
	};

	/* request_timeout far away: each answer must come at once. */
	start(CONF("request_timeout = 30\n"), NULL);
	text_cmd("create f\n", "Done\n");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t t0 = itest_now_ms();

		request_str(t[i].req);
		one_answer(&W, t[i].status, t[i].body);
		ck_assert_int_lt(itest_now_ms() - t0, 2000);
	}
	/* Neither the request nor what followed it ran. */
	get("/v1/filters/smug", "HTTP/1.1 404 ", FILTER_NOT_FOUND);
	get("/v1/filters/smug2", "HTTP/1.1 404 ", FILTER_NOT_FOUND);
	/* HTTP/1.0 needs no Host; a good chunked body still works. */
	request_str("GET /healthz HTTP/1.0\r\n\r\n");
	ck_assert_msg(strncmp(W.buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", WIRE(&W));
	request_str("POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
		    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "e\r\n{\"keys\":[\"a\"]}\r\n0\r\n\r\n");
	one_answer(&W, 200, "{\"results\":[true]}");
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Item 9: one answer to one request */

#define BAD_LENGTH PROBLEM("bad_request", "Bad request", 400, "invalid Content-Length")

START_TEST(test_bad_content_length)
{
	static const char *const cl[] = {"12, 12", "abc", "-1", "+14", "1 4", "0x0e", ""};
	char req[512];

	start(NULL, NULL);
	text_cmd("create f\n", "Done\n");
	for (size_t i = 0; i < sizeof(cl) / sizeof(cl[0]); i++) {
		snprintf(req, sizeof(req),
			 "POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\n"
			 "Content-Type: application/json\r\nContent-Length: %s\r\n\r\n"
			 "{\"keys\":[\"a\"]}",
			 cl[i]);
		request_str(req);
		one_answer(&W, 400, BAD_LENGTH);
	}
	/* Too large for 64 bits: libmicrohttpd's 413, one answer too. */
	request_str("POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\n"
		    "Content-Length: 99999999999999999999999\r\n\r\n{\"keys\":[\"a\"]}");
	one_answer(&W, 413, NULL);
	/* Nothing was run, and the daemon serves on. */
	get("/v1/filters/f/keys/a", "HTTP/1.1 200 OK\r\n", "{\"present\":false}");
	stop();
}
END_TEST

static Suite *http_framing_suite(void)
{
	Suite *s = suite_create("http-framing");
	TCase *tc = tcase_create("daemon");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_long_chunk_line);
	tcase_add_test(tc, test_long_chunk_line_no_timeouts);
	tcase_add_test(tc, test_smuggling);
	tcase_add_test(tc, test_bad_content_length);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(http_framing_suite)
