/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of authentication (auth_token_file): text, RESP and HTTP before AUTH,
 * with a wrong and the right token, the close after three failures, the refusals to start
 * (weak or missing token, public bind without one) and rotating the token with SIGHUP.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/itest_check.h"

#define TOKEN_A "0123456789abcdefghijklmnopqrstuvwxyzABCD" /* 40 bytes */
#define TOKEN_B "B-second-token-B-second-token-B-second-token"

static char tdir[64]; /* per-test directory for token files (unchecked fixture) */
static char tok1[128], tok2[128], conf[512];

static void setup(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/blossomd-itest-auth-XXXXXX");
	if (!mkdtemp(tdir))
		abort();
	snprintf(tok1, sizeof(tok1), "%s/token1", tdir);
	snprintf(tok2, sizeof(tok2), "%s/token2", tdir);
}

static void teardown(void)
{
	unlink(tok1);
	unlink(tok2);
	rmdir(tdir);
}

/* The config text naming path as auth_token_file. */
static const char *conf_with(const char *path)
{
	snprintf(conf, sizeof(conf), CONF("auth_token_file = %s\n"), path);
	return conf;
}

/* Start with a token file holding TOKEN_A (and a newline). */
static void start_a(void)
{
	ck_assert_int_eq(itest_write_file(tok1, TOKEN_A "\n"), 0);
	start(conf_with(tok1), NULL);
	/* HTTP listens once start-up has finished. */
	ck_assert(itest_log_wait(&d, " ready (pid ", T));
}

/* The start must fail, with needle in the log. */
static void start_refused(const char *text, const char *const *extra, const char *needle)
{
	int rc = itest_start(&d, text, extra);

	ck_assert_msg(rc == -ECHILD, "blossomd started (or failed oddly: %d)", rc);
	ck_assert_msg(strstr(itest_log(&d), needle), "log lacks '%s':\n%s", needle, itest_log(&d));
	itest_stop(&d, T);
}

/* A RESP command from NULL-terminated words, in a static buffer. */
static const char *resp(const char *w0, ...)
{
	static char buf[1024];
	const char *w[16];
	size_t n = 0, len;
	va_list ap;

	va_start(ap, w0);
	for (const char *p = w0; p && n < 16; p = va_arg(ap, const char *))
		w[n++] = p;
	va_end(ap);
	len = (size_t)snprintf(buf, sizeof(buf), "*%zu\r\n", n);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "$%zu\r\n%s\r\n",
					strlen(w[i]), w[i]);
	ck_assert_uint_lt(len, sizeof(buf));
	return buf;
}

#define NOAUTH	  "-NOAUTH Authentication required.\r\n"
#define WRONGPASS "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

/* One HTTP/1.1 request with Connection: close; the whole response into buf. Returns the
 * status code. */
static int http(const char *method, const char *path, const char *auth, char *buf, size_t cap)
{
	char req[1024];
	int fd = itest_connect(d.http_port), status = 0;
	size_t len = 0;
	int64_t until = itest_now_ms() + T;

	ck_assert_msg(fd >= 0, "connect http: %s", strerror(-fd));
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s%s"
		 "Content-Length: 0\r\n\r\n",
		 method, path, auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	while (len + 1 < cap && itest_now_ms() < until) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	ck_assert_msg(sscanf(buf, "HTTP/1.1 %d", &status) == 1, "no status line: %s", buf);
	return status;
}

/* ---------------------------------------------------------------------------------------- */
/* Text */

START_TEST(test_text_auth)
{
	int fd;

	start_a();
	fd = conn();
	/* Before AUTH: PING works, everything else is refused. */
	EXCHANGE(fd, "ping\n", "PONG\n");
	EXCHANGE(fd, "list\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "create f\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "nonsense\n", "Client Error: Authentication required\n");
	/* A wrong token, a prefix of it, a longer one, none at all. */
	EXCHANGE(fd, "auth wrong-token\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "auth " TOKEN_A "x\n", "Client Error: Invalid token\n");
	close(fd);

	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_A "\r\n", "Done\n");
	EXCHANGE(fd, "create f\n", "Done\n");
	EXCHANGE(fd, "set f k\n", "Yes\n");
	EXCHANGE(fd, "check f k\n", "Yes\n");
	close(fd);

	/* Authentication is per connection. */
	fd = conn();
	EXCHANGE(fd, "check f k\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "auth\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "quit\n", "");
	CLOSED(fd);
	close(fd);
	stop();
}
END_TEST

/* AUTH, PING and QUIT in any case, as the README and the man page write them; the first
 * line of a connection stays the text protocol (not a Redis inline command). */
START_TEST(test_text_auth_any_case)
{
	int fd;

	start_a();
	fd = conn();
	EXCHANGE(fd, "PING\n", "PONG\n");
	EXCHANGE(fd, "CHECK f k\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "Auth wrong-token\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "AUTH " TOKEN_A "\n", "Done\n");
	EXCHANGE(fd, "create f\n", "Done\n");
	EXCHANGE(fd, "set f k\n", "Yes\n");
	EXCHANGE(fd, "check f k\n", "Yes\n");
	close(fd);

	fd = conn();
	EXCHANGE(fd, "AUTH " TOKEN_A "\r\ncheck f k\n", "Done\nYes\n");
	close(fd);

	fd = conn();
	EXCHANGE(fd, "QUIT\n", "");
	CLOSED(fd);
	close(fd);
	stop();
}
END_TEST

START_TEST(test_text_three_failures)
{
	int fd;

	start_a();
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_B "\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "list\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "auth " TOKEN_B "\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "auth x\n", "Client Error: Invalid token\n");
	CLOSED(fd);
	close(fd);

	/* The right token after that needs a new connection, and works there. */
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_A "\n", "Done\n");
	EXCHANGE(fd, "list\n", "START\nEND\n");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* RESP */

START_TEST(test_resp_auth)
{
	int fd;

	start_a();
	fd = conn();
	EXCHANGE(fd, resp("PING", NULL), "+PONG\r\n");
	EXCHANGE(fd, resp("BF.ADD", "f", "k", NULL), NOAUTH);
	EXCHANGE(fd, resp("NOSUCHCOMMAND", NULL), NOAUTH);
	EXCHANGE(fd, resp("HELLO", "3", NULL),
		 "-NOAUTH HELLO must be called with the client already authenticated, "
		 "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
		 "authenticate the client and select the RESP protocol version at the same "
		 "time\r\n");
	EXCHANGE(fd, resp("AUTH", "nope", NULL), WRONGPASS);
	EXCHANGE(fd, resp("AUTH", "nobody", TOKEN_A, NULL), WRONGPASS);
	close(fd);

	fd = conn();
	EXCHANGE(fd, resp("AUTH", TOKEN_A, NULL), "+OK\r\n");
	EXCHANGE(fd, resp("BF.ADD", "f", "k", NULL), ":1\r\n");
	close(fd);

	fd = conn();
	EXCHANGE(fd, resp("AUTH", "default", TOKEN_A, NULL), "+OK\r\n");
	EXCHANGE(fd, resp("BF.EXISTS", "f", "k", NULL), ":1\r\n");
	close(fd);

	/* HELLO with AUTH authenticates (and a wrong one does not). */
	fd = conn();
	EXCHANGE(fd, resp("HELLO", "2", "AUTH", "default", "bad", NULL), WRONGPASS);
	EXCHANGE(fd, resp("BF.EXISTS", "f", "k", NULL), NOAUTH);
	ck_assert_int_eq(itest_send_str(fd, resp("HELLO", "2", "AUTH", "default", TOKEN_A, NULL)),
			 0);
	{
		char buf[512];

		ck_assert(itest_recv_until(fd, buf, sizeof(buf), "$4\r\nargs\r\n*0\r\n", T) > 0);
		ck_assert_msg(strncmp(buf, "*14\r\n$6\r\nserver\r\n", 17) == 0, "%s", buf);
	}
	EXCHANGE(fd, resp("BF.EXISTS", "f", "k", NULL), ":1\r\n");
	close(fd);
	stop();
}
END_TEST

START_TEST(test_resp_three_failures)
{
	int fd;

	start_a();
	fd = conn();
	EXCHANGE(fd, resp("AUTH", TOKEN_B, NULL), WRONGPASS);
	EXCHANGE(fd, resp("HELLO", "3", "AUTH", "default", TOKEN_B, NULL), WRONGPASS);
	EXCHANGE(fd, resp("PING", NULL), "+PONG\r\n");
	EXCHANGE(fd, resp("AUTH", "default", "", NULL), WRONGPASS);
	CLOSED(fd);
	close(fd);

	/* Pipelined: the connection closes after the third failure, nothing after it runs. */
	fd = conn();
	{
		char burst[2048];

		snprintf(burst, sizeof(burst), "%s", resp("AUTH", "a", NULL));
		strcat(burst, resp("AUTH", "b", NULL));
		strcat(burst, resp("AUTH", "c", NULL));
		strcat(burst, resp("AUTH", TOKEN_A, NULL));
		EXCHANGE(fd, burst, WRONGPASS WRONGPASS WRONGPASS);
	}
	CLOSED(fd);
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* HTTP */

START_TEST(test_http_auth)
{
	char buf[8192];

	start_a();
	/* Probes stay open. */
	ck_assert_int_eq(http("GET", "/healthz", NULL, buf, sizeof(buf)), 200);
	ck_assert_int_eq(http("GET", "/readyz", NULL, buf, sizeof(buf)), 200);

	ck_assert_int_eq(http("GET", "/v1/filters", NULL, buf, sizeof(buf)), 401);
	ck_assert_msg(strstr(buf, "\r\nWWW-Authenticate: Bearer\r\n"), "%s", buf);
	ck_assert_msg(strstr(buf, "unauthorized"), "%s", buf);
	ck_assert_int_eq(http("GET", "/metrics", NULL, buf, sizeof(buf)), 401);
	ck_assert_int_eq(http("PUT", "/v1/filters/h", "Bearer " TOKEN_B, buf, sizeof(buf)), 401);
	ck_assert_int_eq(http("PUT", "/v1/filters/h", "Bearer " TOKEN_A "A", buf, sizeof(buf)),
			 401);
	ck_assert_int_eq(http("PUT", "/v1/filters/h", "Basic " TOKEN_A, buf, sizeof(buf)), 401);
	/* Nothing was created by the refused requests. */
	ck_assert_int_eq(http("GET", "/v1/filters/h", "Bearer " TOKEN_A, buf, sizeof(buf)), 404);

	ck_assert_int_eq(http("PUT", "/v1/filters/h", "Bearer " TOKEN_A, buf, sizeof(buf)), 201);
	ck_assert_int_eq(http("GET", "/v1/filters", "Bearer " TOKEN_A, buf, sizeof(buf)), 200);
	ck_assert_msg(strstr(buf, "\"h\""), "%s", buf);
	ck_assert_int_eq(http("GET", "/metrics", "Bearer " TOKEN_A, buf, sizeof(buf)), 200);
	stop();
}
END_TEST

/* Send req on a new HTTP connection and read until the daemon closes it: status code. */
static int http_raw(const char *req, char *buf, size_t cap)
{
	int fd = itest_connect(d.http_port), status = 0;

	ck_assert_msg(fd >= 0, "connect http: %s", strerror(-fd));
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	itest_recv_until(fd, buf, cap, "\n\n\n\n", T); /* a term never sent: read until closed */
	ck_assert_int_eq(itest_wait_closed(fd, T, NULL), 0);
	close(fd);
	ck_assert_msg(sscanf(buf, "HTTP/1.1 %d", &status) == 1, "no status line: %s", buf);
	return status;
}

#define POST_ADD(auth, length)                                                                     \
	"POST /v1/filters/h/add HTTP/1.1\r\nHost: t\r\n" auth                                      \
	"Content-Type: application/json\r\nContent-Length: " length "\r\n\r\n"

/*
 * A client without the token is answered 401, and closed, before any of its body is read:
 * it cannot make the daemon buffer a body, nor learn max_body_bytes (nor with a wrong route
 * or method: 404 and 405 come as early). Without a body, a 401 leaves the connection open.
 */
START_TEST(test_http_auth_before_body)
{
	char buf[8192];
	int64_t t0;
	int fd;

	ck_assert_int_eq(itest_write_file(tok1, TOKEN_A "\n"), 0);
	snprintf(conf, sizeof(conf), CONF("auth_token_file = %s\nmax_body_bytes = 1k\n"), tok1);
	start(conf, NULL);
	ck_assert(itest_log_wait(&d, " ready (pid ", T));

	/* Over max_body_bytes: 401, not 413. */
	ck_assert_int_eq(http_raw(POST_ADD("", "100000000"), buf, sizeof(buf)), 401);
	ck_assert_msg(strstr(buf, "\r\nWWW-Authenticate: Bearer\r\n"), "%s", buf);
	ck_assert_msg(strstr(buf, "\r\nConnection: close\r\n"), "%s", buf);
	/* A body announced and never sent: answered at once, not after request_timeout. */
	t0 = itest_now_ms();
	ck_assert_int_eq(
	    http_raw(POST_ADD("Authorization: Bearer nope\r\n", "100"), buf, sizeof(buf)), 401);
	ck_assert_int_lt(itest_now_ms() - t0, T);
	ck_assert_int_eq(http_raw("POST /v1/filters/h/add HTTP/1.1\r\nHost: t\r\n"
				  "Transfer-Encoding: chunked\r\n\r\n",
				  buf, sizeof(buf)),
			 401);
	/* Nor to a route that does not exist, or a method it does not take: told at once. */
	ck_assert_int_eq(
	    http_raw("POST /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n", buf,
		     sizeof(buf)),
	    404);
	ck_assert_msg(!strstr(buf, "max_body_bytes"), "%s", buf);
	ck_assert_int_eq(
	    http_raw("POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n", buf,
		     sizeof(buf)),
	    405);
	ck_assert_msg(strstr(buf, "\r\nAllow: GET, HEAD\r\n"), "%s", buf);
	/* With the token, the limit is told. */
	ck_assert_int_eq(http_raw(POST_ADD("Authorization: Bearer " TOKEN_A "\r\n", "100000000"),
				  buf, sizeof(buf)),
			 413);
	ck_assert_msg(strstr(buf, "max_body_bytes (1024)"), "%s", buf);

	/* No body: 401, and the connection stays open for the next request. */
	fd = itest_connect(d.http_port);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(itest_send_str(fd, "GET /v1/filters HTTP/1.1\r\nHost: t\r\n\r\n"),
				 0);
		ck_assert_int_gt(itest_recv_until(fd, buf, sizeof(buf), "\"}", T), 0);
		ck_assert_msg(strncmp(buf, "HTTP/1.1 401 ", 13) == 0, "%s", buf);
		ck_assert_msg(!strstr(buf, "Connection: close"), "%s", buf);
	}
	close(fd);
	/* Nothing was created or added by the refused requests. */
	ck_assert_int_eq(http("GET", "/v1/filters/h", "Bearer " TOKEN_A, buf, sizeof(buf)), 404);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Start-up */

START_TEST(test_refusals)
{
	const char *public[] = {"--bind", "0.0.0.0", NULL};

	/* 31 bytes (the newline does not count). */
	ck_assert_int_eq(itest_write_file(tok1, "0123456789012345678901234567890\n"), 0);
	start_refused(conf_with(tok1), NULL, "at least 32 are required");
	/* Spaces and control bytes are refused. */
	ck_assert_int_eq(itest_write_file(tok1, "0123456789 0123456789012345678901234567890\n"), 0);
	start_refused(conf_with(tok1), NULL, "printable ASCII");
	/* A missing file. */
	start_refused(conf_with(tok2), NULL, "refusing to start: auth_token_file");
	/* A public address without a token. */
	start_refused(NULL, public, "refusing to listen on 0.0.0.0 without auth_token_file");
}
END_TEST

START_TEST(test_public_with_token)
{
	const char *public[] = {"--bind", "0.0.0.0", NULL};
	int fd, rc;

	ck_assert_int_eq(itest_write_file(tok1, TOKEN_A), 0); /* no newline: fine too */
	rc = itest_start(&d, conf_with(tok1), public);
	if (rc)
		fprintf(stderr, "daemon log:\n%s\n", itest_log(&d));
	ck_assert_int_eq(rc, 0);
	fd = conn();
	EXCHANGE(fd, "list\n", "Client Error: Authentication required\n");
	EXCHANGE(fd, "auth " TOKEN_A "\n", "Done\n");
	EXCHANGE(fd, "list\n", "START\nEND\n");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* SIGHUP */

START_TEST(test_sighup_rotates_token)
{
	char buf[4096];
	int old, fd;

	start_a();
	old = conn();
	EXCHANGE(old, "auth " TOKEN_A "\n", "Done\n");

	/* A weak new token: the reload fails, the old token stays. */
	ck_assert_int_eq(itest_write_file(tok2, "short\n"), 0);
	ck_assert_int_eq(itest_write_file(d.conf_path, conf_with(tok2)), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert_msg(itest_log_wait(&d,
				     "reload failed (keeping the old configuration): "
				     "auth_token_file",
				     T),
		      "%s", itest_log(&d));
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_A "\n", "Done\n");
	close(fd);

	/* The same path with good contents now: re-read, it replaces the old token. */
	ck_assert_int_eq(itest_write_file(tok2, TOKEN_B "\n"), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "configuration reloaded", T));
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_A "\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "auth " TOKEN_B "\n", "Done\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, resp("AUTH", TOKEN_B, NULL), "+OK\r\n");
	close(fd);
	ck_assert_int_eq(http("GET", "/v1/filters", "Bearer " TOKEN_A, buf, sizeof(buf)), 401);
	ck_assert_int_eq(http("GET", "/v1/filters", "Bearer " TOKEN_B, buf, sizeof(buf)), 200);
	/* A connection that authenticated before keeps its session. */
	EXCHANGE(old, "list\n", "START\nEND\n");

	/* Back to the first file. */
	ck_assert_int_eq(itest_write_file(d.conf_path, conf_with(tok1)), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	snprintf(buf, sizeof(buf), "reload: auth token re-read from %s", tok1);
	ck_assert_msg(itest_log_wait(&d, buf, T), "%s", itest_log(&d));
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN_B "\n", "Client Error: Invalid token\n");
	EXCHANGE(fd, "auth " TOKEN_A "\n", "Done\n");
	close(fd);

	/* Dropping auth_token_file on loopback turns authentication off. */
	ck_assert_int_eq(itest_write_file(d.conf_path, CONF("")), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "reload: authentication disabled", T));
	fd = conn();
	EXCHANGE(fd, "list\n", "START\nEND\n");
	close(fd);
	close(old);
	stop();
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *proto = tcase_create("protocols");
	TCase *start_tc = tcase_create("start");
	TCase *sig = tcase_create("signals");

	tcase_add_unchecked_fixture(proto, setup, teardown);
	tcase_set_timeout(proto, 30);
	tcase_add_test(proto, test_text_auth);
	tcase_add_test(proto, test_text_auth_any_case);
	tcase_add_test(proto, test_text_three_failures);
	tcase_add_test(proto, test_resp_auth);
	tcase_add_test(proto, test_resp_three_failures);
	tcase_add_test(proto, test_http_auth);
	tcase_add_test(proto, test_http_auth_before_body);
	suite_add_tcase(s, proto);

	tcase_add_unchecked_fixture(start_tc, setup, teardown);
	tcase_set_timeout(start_tc, 30);
	tcase_add_test(start_tc, test_refusals);
	tcase_add_test(start_tc, test_public_with_token);
	suite_add_tcase(s, start_tc);

	tcase_add_unchecked_fixture(sig, setup, teardown);
	tcase_set_timeout(sig, 30);
	tcase_add_test(sig, test_sighup_rotates_token);
	suite_add_tcase(s, sig);
	return s;
}

CHECK_MAIN(auth_suite)
