/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the blossomd daemon: each case starts the real binary on a free port,
 * holds a conversation over TCP asserting exact bytes, and stops it with SIGTERM (which must
 * exit 0). Covers the command line, protocol detection, pipelining, the limits on bad input,
 * many connections, timeouts and signals.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/itest_check.h"

/* A string of n copies of c, in a static buffer. */
static const char *rep(char c, size_t n)
{
	static char buf[4096];

	ck_assert_uint_lt(n, sizeof(buf));
	memset(buf, c, n);
	buf[n] = '\0';
	return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Command line */

START_TEST(test_version)
{
	const char *args[] = {"--version", NULL};
	char out[256], err[256];
	int st = itest_run(args, out, sizeof(out), err, sizeof(err), T);

	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_msg(strncmp(out, "blossomd ", 9) == 0 && out[strlen(out) - 1] == '\n', "%s", out);
	ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_help_and_usage)
{
	const char *help[] = {"--help", NULL};
	const char *bad[] = {"--no-such-flag", NULL};
	const char *extra[] = {"stray", NULL};
	char out[4096], err[1024];
	int st;

	st = itest_run(help, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_ptr_nonnull(strstr(out, "--test-config"));
	ck_assert_ptr_nonnull(strstr(out, "--data-dir"));

	st = itest_run(bad, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	ck_assert_ptr_nonnull(strstr(err, "--help"));

	st = itest_run(extra, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	ck_assert_ptr_nonnull(strstr(err, "stray"));
}
END_TEST

START_TEST(test_test_config)
{
	char path[] = "/tmp/blossomd-itest-conf-XXXXXX";
	char out[1024], err[1024], expect[256];
	int fd = mkstemp(path), st;
	const char *good[] = {"--config", path, "--test-config", NULL};
	const char *flag[] = {"--config", path, "--port", "0", "--test-config", NULL};
	const char *none[] = {"--test-config", NULL};
	const char *missing[] = {"--config", "/nonexistent/blossomd.conf", "--test-config", NULL};

	ck_assert_int_ge(fd, 0);
	close(fd);

	ck_assert_int_eq(itest_write_file(path, CONF("port = 9000\nmax_memory = 1g\n")), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_str_eq(out, "configuration OK\n");

	/* Defaults alone are a valid configuration. */
	st = itest_run(none, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* A bad line: exit 1, the message names the file and the line. */
	ck_assert_int_eq(itest_write_file(path, CONF("port = 9000\nbogus_key = 1\n")), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	snprintf(expect, sizeof(expect), "%s:3:", path);
	ck_assert_msg(strstr(err, expect) && strstr(err, "bogus_key"), "%s", err);
	ck_assert_str_eq(out, "");

	/* What a start refuses, the check refuses: a public address without a token, from the
	 * file or from --bind (a start would exit 1 with the same message). */
	ck_assert_int_eq(itest_write_file(path, CONF("bind = 0.0.0.0\n")), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, "refusing to listen on 0.0.0.0 without auth_token_file"), "%s",
		      err);
	ck_assert_str_eq(out, "");
	{
		const char *pub[] = {"--bind", "0.0.0.0", "--test-config", NULL};
		st = itest_run(pub, out, sizeof(out), err, sizeof(err), T);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
		ck_assert_msg(strstr(err, "refusing to listen on 0.0.0.0"), "%s", err);
	}

	/* Cross-field rule. */
	ck_assert_int_eq(itest_write_file(path, CONF("max_line_bytes = 10\n")), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, "max_key_bytes"), "%s", err);

	/* A bad flag over a good file. */
	ck_assert_int_eq(itest_write_file(path, CONF("port = 9000\n")), 0);
	st = itest_run(flag, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, "--port") && strstr(err, "port"), "%s", err);

	st = itest_run(missing, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, "/nonexistent/blossomd.conf") && strstr(err, "cannot open"), "%s",
		      err);

	/* The token file is checked as a start would check it. */
	char tok[] = "/tmp/blossomd-itest-token-XXXXXX", conf[512];
	fd = mkstemp(tok);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(conf, sizeof(conf), CONF("auth_token_file = %s\n"), tok);
	ck_assert_int_eq(itest_write_file(path, conf), 0);
	ck_assert_int_eq(itest_write_file(tok, "short\n"), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, tok) && strstr(err, "token is 5 bytes"), "%s", err);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(itest_write_file(tok, "0123456789abcdef0123456789abcdef\n"), 0);
	st = itest_run(good, out, sizeof(out), err, sizeof(err), T);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
	ck_assert_str_eq(out, "configuration OK\n");
	unlink(tok);
	unlink(path);
}
END_TEST

START_TEST(test_port_taken)
{
	char port[16], out[1024], err[2048], expect[128];
	const char *args[] = {"--port", port, "--http-port", "0", "--data-dir", "/tmp", NULL};
	int st;

	start(NULL, NULL);
	snprintf(port, sizeof(port), "%u", (unsigned)d.port);
	st = itest_run(args, out, sizeof(out), err, sizeof(err), T);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	snprintf(expect, sizeof(expect), "<3>blossomd: bind 127.0.0.1:%u: address already in use\n",
		 (unsigned)d.port);
	ck_assert_msg(strstr(err, expect), "%s", err);
	stop();
}
END_TEST

START_TEST(test_refuses_public_bind)
{
	const char *args[] = {"--bind", "0.0.0.0", "--port", "1", "--http-port", "0", NULL};
	char out[256], err[1024];
	int st = itest_run(args, out, sizeof(out), err, sizeof(err), T);

	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	ck_assert_msg(strstr(err, "refusing to listen on 0.0.0.0"), "%s", err);
}
END_TEST

START_TEST(test_startup_log)
{
	char expect[128];

	start(NULL, NULL);
	snprintf(expect, sizeof(expect), "<5>blossomd: listening on 127.0.0.1:%u",
		 (unsigned)d.port);
	ck_assert(itest_log_wait(&d, expect, T));
	ck_assert(itest_log_wait(&d, "ready", T));
	ck_assert_int_eq(itest_signal(&d, SIGTERM), 0);
	ck_assert_int_ge(itest_wait_exit(&d, T), 0);
	/* Every line has a priority prefix. */
	for (const char *p = itest_log(&d); *p; p = strchr(p, '\n') + 1) {
		ck_assert_msg(p[0] == '<' && p[1] >= '0' && p[1] <= '7' && p[2] == '>', "%s", p);
		ck_assert_ptr_nonnull(strchr(p, '\n'));
	}
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "<5>blossomd: stopped\n"));
	stop();
}
END_TEST

START_TEST(test_log_level)
{
	const char *quiet[] = {"--log-level", "warning", NULL};
	const char *loud[] = {"--log-level", "debug", NULL};
	const char *log;
	int fd;

	start(NULL, quiet);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	ck_assert_int_eq(itest_signal(&d, SIGTERM), 0);
	ck_assert_int_ge(itest_wait_exit(&d, T), 0);
	log = itest_log(&d);
	ck_assert_msg(!strstr(log, "<5>") && !strstr(log, "<6>") && !strstr(log, "<7>"), "%s", log);
	stop();

	start(NULL, loud);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	ck_assert(itest_log_wait(&d, "<7>blossomd: client 1 (127.0.0.1:", T));
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Protocols */

START_TEST(test_text_basic)
{
	int fd;

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, "create f\n", "Done\n");
	EXCHANGE(fd, "create f\n", "Exists\n");
	EXCHANGE(fd, "set f k\n", "Yes\n");
	EXCHANGE(fd, "set f k\n", "No\n");
	EXCHANGE(fd, "check f k\n", "Yes\n");
	EXCHANGE(fd, "check f other\r\n", "No\n");
	EXCHANGE(fd, "check nofilter k\n", "Filter does not exist\n");
	EXCHANGE(fd, "ping\n", "PONG\n");
	ck_assert(itest_quiet(fd, 100));
	close(fd);
	stop();
}
END_TEST

START_TEST(test_resp_basic)
{
	int fd;

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	EXCHANGE(fd, "*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$1\r\nk\r\n", ":1\r\n");
	EXCHANGE(fd, "*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$1\r\nk\r\n", ":0\r\n");
	EXCHANGE(fd, "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$1\r\nk\r\n", ":1\r\n");
	EXCHANGE(fd, "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$1\r\nx\r\n", ":0\r\n");
	/* Empty multibulks are skipped without a reply. */
	EXCHANGE(fd, "*0\r\n*-1\r\n*1\r\n$4\r\nping\r\n", "+PONG\r\n");
	close(fd);
	stop();
}
END_TEST

/* Text and RESP on one port, interleaved, on the same filters. */
START_TEST(test_protocol_detection)
{
	int t, r;

	start(NULL, NULL);
	t = conn();
	r = conn();
	EXCHANGE(t, "create f\n", "Done\n");
	EXCHANGE(r, "*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$3\r\nkey\r\n", ":1\r\n");
	EXCHANGE(t, "check f key\n", "Yes\n");
	EXCHANGE(t, "set f key2\n", "Yes\n");
	EXCHANGE(r, "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$4\r\nkey2\r\n", ":1\r\n");
	/* The first byte decides: a text client's "*" later in the stream is just text. */
	EXCHANGE(t, "*1\n", "Client Error: Command not supported\n");
	close(t);
	close(r);
	stop();
}
END_TEST

/*
 * Blank lines are ignored, as Redis ignores them (redis-cli --pipe ends with one; a person in
 * telnet presses Enter first): before the protocol is known, also in reads of their own, and
 * between text commands. Before, a connection that opened with one was taken as text and a
 * RESP command after it got text errors; an empty text line got "Command not supported".
 */
START_TEST(test_blank_lines_ignored)
{
	int fd;

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, "\r\n\n*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	EXCHANGE(fd, "\r\n*3\r\n$6\r\nBF.ADD\r\n$1\r\nr\r\n$1\r\na\r\n", ":1\r\n");
	close(fd);
	/* Blank lines alone in a read: the protocol is still open, and nothing is answered. */
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "\r\n\r\n\n"), 0);
	ck_assert(itest_quiet(fd, 100));
	EXCHANGE(fd, "*2\r\n$9\r\nBF.EXISTS\r\n$1\r\nr\r\n",
		 "-ERR wrong number of arguments for 'bf.exists' command\r\n");
	close(fd);
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "\n"), 0);
	ck_assert(itest_quiet(fd, 100));
	EXCHANGE(fd, "BF.EXISTS r a\r\n\r\nBF.EXISTS r b\r\n", ":1\r\n:0\r\n");
	close(fd);
	/* Text: before the first command and between commands. */
	fd = conn();
	EXCHANGE(fd, "\r\n\ncreate t\n\n\r\nset t k\n\ncheck t k\r\n", "Done\nYes\nYes\n");
	ck_assert_int_eq(itest_send_str(fd, "\n\n"), 0);
	ck_assert(itest_quiet(fd, 100));
	EXCHANGE(fd, "check t z\n", "No\n");
	close(fd);
	stop();
}
END_TEST

/*
 * Send one huge command on fd, then PING on other, one at a time, until fd's whole reply has
 * come; it must be exactly expect. Returns the longest PING's wait (ms); *total is the time
 * from the command's last byte sent to its reply's last byte received.
 */
static int64_t huge_command(int fd, int other, const char *req, size_t reqlen, const char *expect,
			    size_t explen, int64_t *total)
{
	char *got = malloc(explen + 1), pong[16];
	size_t have = 0;
	int64_t longest = 0, t0, until;

	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(itest_send(fd, req, reqlen), 0);
	t0 = itest_now_ms();
	until = t0 + 20 * T;
	while (have < explen) {
		int64_t p0 = itest_now_ms();

		ck_assert_int_lt(p0, until);
		ck_assert_int_eq(itest_send_str(other, "*1\r\n$4\r\nPING\r\n"), 0);
		ck_assert_int_eq(itest_recv_until(other, pong, sizeof(pong), "\r\n", 20 * T), 7);
		ck_assert(!memcmp(pong, "+PONG\r\n", 7));
		if (itest_now_ms() - p0 > longest)
			longest = itest_now_ms() - p0;
		for (;;) {
			ssize_t r = recv(fd, got + have, explen + 1 - have, MSG_DONTWAIT);

			if (r <= 0)
				break;
			have += (size_t)r;
		}
		ck_assert_uint_le(have, explen);
	}
	*total = itest_now_ms() - t0;
	ck_assert(!memcmp(got, expect, explen));
	ck_assert(itest_quiet(fd, 100));
	free(got);
	return longest;
}

/*
 * One huge command does not hold the loop (issue 30, item 5): a BF.MADD and a BF.MEXISTS of a
 * million keys (13 MB) run over many turns, their replies exact, while another client's PING
 * is answered meanwhile. Before, each ran in one turn: a PING waited for most of it (270 ms
 * and 144 ms on the reporter's machine). The bound is relative to the command's own time, so
 * it holds under valgrind too (before: 0.8 of it; after: about 0.15, up to 0.34 beside other
 * load on two cores: the bound is half).
 */
START_TEST(test_huge_command_sliced)
{
	size_t n = 1000000, ql = 0, el = 0;
	char *madd = malloc(n * 16 + 64), *mexists = malloc(n * 16 + 64),
	     *expect = malloc(n * 4 + 32);
	int64_t total, longest;
	int fd, other;

	ck_assert(madd && mexists && expect);
	ql = (size_t)sprintf(madd, "*%zu\r\n$7\r\nBF.MADD\r\n$1\r\nh\r\n", n + 2);
	el = (size_t)sprintf(expect, "*%zu\r\n", n);
	for (size_t i = 0; i < n; i++) {
		ql += (size_t)sprintf(madd + ql, "$7\r\nk%06zu\r\n", i);
		memcpy(expect + el, ":1\r\n", 4);
		el += 4;
	}
	/* The same arguments after "*N\r\n$7\r\nBF.MADD\r\n" (23 bytes). */
	size_t ml = (size_t)sprintf(mexists, "*%zu\r\n$10\r\nBF.MEXISTS\r\n", n + 2);
	memcpy(mexists + ml, madd + 23, ql - 23);
	ml += ql - 23;
	start(NULL, NULL);
	fd = conn();
	other = conn();
	/* An error rate low enough that no key of the million is falsely "already present". */
	EXCHANGE(fd, "*4\r\n$10\r\nBF.RESERVE\r\n$1\r\nh\r\n$5\r\n1e-10\r\n$7\r\n1000000\r\n",
		 "+OK\r\n");
	longest = huge_command(fd, other, madd, ql, expect, el, &total);
	printf("# BF.MADD of %zu keys: %lld ms, the longest PING meanwhile %lld ms\n", n,
	       (long long)total, (long long)longest);
	ck_assert_int_lt(longest * 2, total);
	longest = huge_command(fd, other, mexists, ml, expect, el, &total);
	printf("# BF.MEXISTS of %zu keys: %lld ms, the longest PING meanwhile %lld ms\n", n,
	       (long long)total, (long long)longest);
	ck_assert_int_lt(longest * 2, total);
	/* The connection goes on with its next command, and a small MEXISTS answers as before. */
	EXCHANGE(fd, "*4\r\n$10\r\nBF.MEXISTS\r\n$1\r\nh\r\n$7\r\nk999999\r\n$1\r\nx\r\n",
		 "*2\r\n:1\r\n:0\r\n");
	free(madd);
	free(mexists);
	free(expect);
	close(fd);
	close(other);
	stop();
}
END_TEST

/*
 * The same for the text protocol: a bulk and a multi of half a million keys on one 4 MB line
 * run over many turns, their reply lines exact (before, each ran in one turn).
 */
START_TEST(test_huge_text_line_sliced)
{
	size_t n = 500000, ql, ml, el = 0;
	char *bulk = malloc(n * 8 + 64), *multi = malloc(n * 8 + 64), *expect = malloc(n * 4 + 8);
	int64_t total, longest;
	int fd, other;

	ck_assert(bulk && multi && expect);
	ql = (size_t)sprintf(bulk, "bulk t");
	ml = (size_t)sprintf(multi, "multi t");
	for (size_t i = 0; i < n; i++) {
		ql += (size_t)sprintf(bulk + ql, " k%06zu", i);
		memcpy(expect + el, i ? " Yes" : "Yes", i ? 4 : 3);
		el += i ? 4 : 3;
	}
	memcpy(multi + ml, bulk + 6, ql - 6);
	ml += ql - 6;
	bulk[ql++] = '\n';
	multi[ml++] = '\n';
	expect[el++] = '\n';
	start(CONF("max_line_bytes = 4m\n"), NULL);
	fd = conn();
	other = conn();
	EXCHANGE(fd, "create t capacity=500000 prob=0.0000000001\n", "Done\n");
	longest = huge_command(fd, other, bulk, ql, expect, el, &total);
	printf("# bulk of %zu keys: %lld ms, the longest PING meanwhile %lld ms\n", n,
	       (long long)total, (long long)longest);
	ck_assert_int_lt(longest * 2, total);
	longest = huge_command(fd, other, multi, ml, expect, el, &total);
	printf("# multi of %zu keys: %lld ms, the longest PING meanwhile %lld ms\n", n,
	       (long long)total, (long long)longest);
	ck_assert_int_lt(longest * 2, total);
	EXCHANGE(fd, "multi t k499999 x\n", "Yes No\n");
	free(bulk);
	free(multi);
	free(expect);
	close(fd);
	close(other);
	stop();
}
END_TEST

/* Replies of a pipelined burst, in order. */
static void build_text_burst(char **req, size_t *reqlen, char **rep_out, size_t *replen, int n)
{
	size_t cap = (size_t)n * 64 + 64;
	char *q = malloc(cap), *p = malloc(cap);
	size_t ql = 0, pl = 0;

	ck_assert(q && p);
	ql += (size_t)snprintf(q + ql, cap - ql, "create burst capacity=1000000\n");
	pl += (size_t)snprintf(p + pl, cap - pl, "Done\n");
	for (int i = 0; i < n; i++) {
		ql += (size_t)snprintf(q + ql, cap - ql,
				       "set burst k%d\ncheck burst k%d\n"
				       "check burst absent%d\n",
				       i, i, i);
		pl += (size_t)snprintf(p + pl, cap - pl, "Yes\nYes\nNo\n");
	}
	*req = q;
	*reqlen = ql;
	*rep_out = p;
	*replen = pl;
}

START_TEST(test_pipeline_text)
{
	char *req, *expect;
	size_t reqlen, explen;
	int fd;

	start(NULL, NULL);
	fd = conn();
	build_text_burst(&req, &reqlen, &expect, &explen, 2000);
	ck_assert(itest_exchange_n(fd, req, reqlen, expect, explen, T));
	ck_assert(itest_quiet(fd, 100));
	free(req);
	free(expect);
	close(fd);
	stop();
}
END_TEST

/* The same burst dribbled in small pieces: commands split at every possible byte. */
START_TEST(test_pipeline_split)
{
	static const char resp_cmd[] = "*3\r\n$6\r\nBF.ADD\r\n$2\r\nrf\r\n$5\r\nhello\r\n"
				       "*1\r\n$4\r\nPING\r\n";
	char *req, *expect, got[64];
	size_t reqlen, explen;
	int fd, r;

	start(NULL, NULL);
	fd = conn();
	build_text_burst(&req, &reqlen, &expect, &explen, 30);
	for (size_t off = 0; off < reqlen; off += 7) {
		size_t n = reqlen - off < 7 ? reqlen - off : 7;

		ck_assert_int_eq(itest_send(fd, req + off, n), 0);
		if (off % 70 == 0)
			itest_sleep_ms(1);
	}
	ck_assert(itest_exchange_n(fd, NULL, 0, expect, explen, T));
	free(req);
	free(expect);
	close(fd);

	/* RESP, one byte at a time. */
	r = conn();
	for (size_t i = 0; i < sizeof(resp_cmd) - 1; i++) {
		ck_assert_int_eq(itest_send(r, resp_cmd + i, 1), 0);
		itest_sleep_ms(1);
	}
	ck_assert_int_eq(itest_recv_n(r, got, 11, T), 11);
	ck_assert_mem_eq(got, ":1\r\n+PONG\r\n", 11);
	close(r);
	stop();
}
END_TEST

START_TEST(test_pipeline_resp)
{
	const char *one = "*3\r\n$6\r\nBF.ADD\r\n$1\r\ng\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
	size_t n = 3000, ol = strlen(one);
	char *req = malloc(n * ol), *expect = malloc(n * 11);
	size_t el = 0;
	int fd;

	ck_assert(req && expect);
	for (size_t i = 0; i < n; i++) {
		memcpy(req + i * ol, one, ol);
		memcpy(expect + el, i == 0 ? ":1\r\n+PONG\r\n" : ":0\r\n+PONG\r\n", 11);
		el += 11;
	}
	start(NULL, NULL);
	fd = conn();
	ck_assert(itest_exchange_n(fd, req, n * ol, expect, el, T));
	free(req);
	free(expect);
	close(fd);
	stop();
}
END_TEST

/* The value of an unlabelled counter in the daemon's /metrics (-1 if absent). */
static long long metric(const char *name)
{
	static char buf[256 * 1024];
	char req[128], want[128];
	int64_t until = itest_now_ms() + T;
	int fd;
	ssize_t n;
	const char *p;

	/* The HTTP port listens a moment after the RESP port (start() waits for that one). */
	while ((fd = itest_connect(d.http_port)) < 0 && itest_now_ms() < until)
		itest_sleep_ms(10);
	ck_assert_int_ge(fd, 0);
	snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	n = itest_recv_until(fd, buf, sizeof(buf) - 1, "\n# EOF\n", T);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	snprintf(want, sizeof(want), "\n%s ", name);
	p = strstr(buf, want);
	return p ? atoll(p + strlen(want)) : -1;
}

/*
 * One client's long pipeline runs in slices of the loop's turns: every reply exact and in order
 * across the slices (also while earlier replies are still being written), another client
 * answered meanwhile, and the slices counted in /metrics.
 */
START_TEST(test_pipeline_slices)
{
	/* 8 MB of replies: more than the socket buffers hold while the client does not read, and
	 * enough commands waiting behind them that running them takes more than a slice even when
	 * nothing faults. */
	size_t n = 16000, rl = 0, el = 0;
	char *req = malloc(n * 540), *expect = malloc(n * 520), *reply = malloc(65536), got[16];
	pid_t pid;
	int fd, other, st;

	ck_assert(req && expect && reply);
	for (size_t i = 0; i < n; i++) {
		char arg[512];
		int al = snprintf(arg, sizeof(arg), "%08zu%0492d", i, 0);

		rl += (size_t)sprintf(req + rl, "*2\r\n$4\r\nPING\r\n$%d\r\n%s\r\n", al, arg);
		el += (size_t)sprintf(expect + el, "$%d\r\n%s\r\n", al, arg);
	}
	start(NULL, NULL);
	ck_assert_int_eq(metric("blossomd_connection_slices_yielded_total"), 0);
	fd = conn();
	/* A small receive buffer: the daemon's writes are soon left pending. */
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){16384}, sizeof(int)), 0);
	other = conn();
	/* The request is sent by a child while this process reads the replies (a client that
	 * sends it all before reading would fill both ways' socket buffers). */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(itest_send(fd, req, rl) ? 1 : 0);
	/* Not read at first: the replies back up, so slices end while a write is pending (and
	 * the commands after them wait for it: conn_on_yield()). */
	itest_sleep_ms(300);
	ck_assert_int_eq(itest_recv_n(fd, got, 4, T), 4);
	EXCHANGE(other, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	ck_assert_mem_eq(got, expect, 4);
	/* Patience T for each part rather than for all 8 MB: under valgrind beside another suite
	 * they took more than 30 s, while replies kept coming. */
	for (size_t at = 4, part; at < el; at += part) {
		part = el - at < 65536 ? el - at : 65536;
		ck_assert_msg(itest_recv_n(fd, reply, part, T) == (ssize_t)part,
			      "replies stopped at byte %zu of %zu", at, el);
		ck_assert_msg(memcmp(reply, expect + at, part) == 0,
			      "reply differs in bytes %zu..%zu", at, at + part);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_int_gt(metric("blossomd_connection_slices_yielded_total"), 0);
	free(req);
	free(expect);
	free(reply);
	close(fd);
	close(other);
	stop();
}
END_TEST

/*
 * Listings longer than a call's step (CMD_LIST_STEP, 4096 filters) go out over several turns of
 * the loop: text list and KEYS of 10,000 filters are exact and in name order, and each took
 * more than one slice.
 */
START_TEST(test_long_listings)
{
	enum { NF = 10000 };
	/* 40-byte names: KEYS' reply (480 KB) goes out in parts too (CMD_LIST_BYTES). */
#define LNAME "l%05d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	size_t cap = (size_t)NF * 128, rl = 0, el = 0;
	char *req = malloc(cap), *expect = malloc(cap), *one = malloc(256), suffix[128];
	long long y0;
	int fd;

	ck_assert(req && expect && one);
	for (int i = 0; i < NF; i++)
		rl +=
		    (size_t)snprintf(req + rl, cap - rl,
				     "*4\r\n$10\r\nBF.RESERVE\r\n$40\r\n" LNAME "\r\n$4\r\n0.01\r\n"
				     "$3\r\n100\r\n",
				     i);
	for (int i = 0; i < NF; i++)
		el += (size_t)snprintf(expect + el, cap - el, "+OK\r\n");
	start(NULL, NULL);
	fd = conn();
	ck_assert(itest_exchange_n(fd, req, rl, expect, el, 4 * T));
	close(fd);
	fd = conn(); /* a text-protocol connection */
	/* Every filter's line is the same but for its name: the first one's tells the rest. */
	ck_assert_int_eq(itest_send_str(fd, "list l00000-\n"), 0);
	ck_assert_int_gt(itest_recv_until(fd, one, 256, "END\n", T), 0);
	ck_assert_msg(sscanf(one, "START\nl00000-%*[x] %127[^\n]\nEND\n", suffix) == 1,
		      "list: '%s'", one);
	el = (size_t)snprintf(expect, cap, "START\n");
	for (int i = 0; i < NF; i++)
		el += (size_t)snprintf(expect + el, cap - el, LNAME " %s\n", i, suffix);
	el += (size_t)snprintf(expect + el, cap - el, "END\n");
	y0 = metric("blossomd_connection_slices_yielded_total");
	ck_assert(itest_exchange_n(fd, "list l\n", 7, expect, el, 4 * T));
	ck_assert_int_ge(metric("blossomd_connection_slices_yielded_total"), y0 + 2);
	close(fd);

	fd = conn();
	el = (size_t)snprintf(expect, cap, "*%d\r\n", NF);
	for (int i = 0; i < NF; i++)
		el += (size_t)snprintf(expect + el, cap - el, "$40\r\n" LNAME "\r\n", i);
	y0 = metric("blossomd_connection_slices_yielded_total");
	EXCHANGE_N(fd, "*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n", 21, expect, el);
	ck_assert_int_ge(metric("blossomd_connection_slices_yielded_total"), y0 + 2);
	/* A pattern's literal head narrows the walk; the rest is matched. */
	el = (size_t)snprintf(expect, cap, "*10\r\n");
	for (int i = 9990; i < NF; i++)
		el += (size_t)snprintf(expect + el, cap - el, "$40\r\n" LNAME "\r\n", i);
	EXCHANGE_N(fd, "*2\r\n$4\r\nKEYS\r\n$8\r\nl0999?-*\r\n", 28, expect, el);
	close(fd);
	free(req);
	free(expect);
	free(one);
	stop();
#undef LNAME
}
END_TEST

/* A large bulk (60 KB key) arriving over many reads. */
START_TEST(test_resp_large_bulk)
{
	size_t klen = 60000;
	char hdr[64];
	char *key = malloc(klen);
	int fd, hl;

	ck_assert_ptr_nonnull(key);
	memset(key, 'q', klen);
	start(NULL, NULL);
	fd = conn();
	hl = snprintf(hdr, sizeof(hdr), "*3\r\n$6\r\nBF.ADD\r\n$1\r\nb\r\n$%zu\r\n", klen);
	ck_assert_int_eq(itest_send(fd, hdr, (size_t)hl), 0);
	for (size_t off = 0; off < klen; off += 5000) {
		ck_assert_int_eq(itest_send(fd, key + off, 5000), 0);
		itest_sleep_ms(2);
	}
	EXCHANGE(fd, "\r\n", ":1\r\n");
	hl = snprintf(hdr, sizeof(hdr), "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nb\r\n$%zu\r\n", klen);
	ck_assert_int_eq(itest_send(fd, hdr, (size_t)hl), 0);
	ck_assert_int_eq(itest_send(fd, key, klen), 0);
	EXCHANGE(fd, "\r\n", ":1\r\n");
	free(key);
	close(fd);
	stop();
}
END_TEST

START_TEST(test_quit)
{
	int fd;

	start(NULL, NULL);
	fd = conn();
	/* Nothing after quit is run. */
	EXCHANGE(fd, "ping\nquit\nping\n", "PONG\n");
	CLOSED(fd);
	close(fd);

	fd = conn();
	EXCHANGE(fd, "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n",
		 "+PONG\r\n+OK\r\n");
	CLOSED(fd);
	close(fd);
	stop();
}
END_TEST

/*
 * blossomd's text extensions (ping, quit, auth, delete/d, expires) in any case, as the README
 * and the man page write AUTH; bloomd's own commands stay lowercase, as in bloomd. An
 * uppercase PING or AUTH as a connection's first line is the text protocol, not Redis inline.
 */
START_TEST(test_text_extensions_any_case)
{
	int fd;

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, "PING\n", "PONG\n");
	EXCHANGE(fd, "Ping\r\n", "PONG\n");
	EXCHANGE(fd, "create cf type=counting\n", "Done\n");
	EXCHANGE(fd, "set cf k1\nset cf k2\n", "Yes\nYes\n");
	EXCHANGE(fd, "DELETE cf k1\n", "Yes\n");
	EXCHANGE(fd, "D cf k2\n", "Yes\n");
	EXCHANGE(fd, "Delete cf k1\n", "No\n");
	EXCHANGE(fd, "check cf k1\n", "No\n");
	EXCHANGE(fd, "EXPIRES cf 3600\n", "Done\n");
	EXCHANGE(fd, "Expires cf 0\n", "Done\n");
	/* bloomd's commands are bloomd's: lowercase only. */
	EXCHANGE(fd, "CHECK cf k1\n", "Client Error: Command not supported\n");
	EXCHANGE(fd, "Create g\n", "Client Error: Command not supported\n");
	/* Without auth_token_file, AUTH says so in any case. */
	EXCHANGE(fd, "AUTH x\n", "Client Error: Authentication is not configured\n");
	EXCHANGE(fd, "QUIT\nping\n", "");
	CLOSED(fd);
	close(fd);

	fd = conn();
	EXCHANGE(fd, "AUTH x\n", "Client Error: Authentication is not configured\n");
	EXCHANGE(fd, "Quit\n", "");
	CLOSED(fd);
	close(fd);
	stop();
}
END_TEST

/* A client that shuts down its sending side still gets every reply, then EOF. */
START_TEST(test_half_close)
{
	char buf[64];
	int fd;

	start(NULL, NULL);
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "ping\nping\nchec"), 0);
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	ck_assert_int_eq(itest_recv_n(fd, buf, sizeof(buf), T), 10);
	ck_assert_mem_eq(buf, "PONG\nPONG\n", 10);
	close(fd);
	stop();
}
END_TEST

START_TEST(test_ipv6_and_two_listeners)
{
	const char *extra[] = {"--bind", "127.0.0.1,::1", NULL};
	int fd6, fd4;

	fd6 = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd6 < 0)
		return; /* no IPv6 here */
	close(fd6);
	start(NULL, extra);
	/* The harness waited for the first address only. */
	ck_assert(itest_log_wait(&d, "listening on [::1]:", T));
	fd6 = itest_connect6(d.port);
	ck_assert_int_ge(fd6, 0);
	fd4 = conn();
	EXCHANGE(fd6, "create six\n", "Done\n");
	EXCHANGE(fd4, "check six k\n", "No\n");
	close(fd6);
	close(fd4);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Bad input */

#define LINE_LIMITS CONF("max_line_bytes = 64\nmax_key_bytes = 64\n")
#define RESP_LIMITS CONF("max_bulk_bytes = 16\nmax_key_bytes = 16\nmax_args = 4\n")

START_TEST(test_line_too_long)
{
	char line[4200];
	int fd, other;

	start(LINE_LIMITS, NULL);
	fd = conn();
	/* Exactly max_line_bytes (64) is fine, with or without "\r". */
	snprintf(line, sizeof(line), "check nofilter %s\n", rep('k', 49));
	EXCHANGE(fd, line, "Filter does not exist\n");
	snprintf(line, sizeof(line), "check nofilter %s\r\n", rep('k', 49));
	EXCHANGE(fd, line, "Filter does not exist\n");
	/* One more byte is too long; the next line is served. */
	snprintf(line, sizeof(line), "check nofilter %s\nping\n", rep('k', 50));
	EXCHANGE(fd, line, "Client Error: Line too long\nPONG\n");

	/* A long line spread over many reads is answered once, then discarded to its end. */
	EXCHANGE(fd, rep('x', 100), "Client Error: Line too long\n");
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(itest_send_str(fd, rep('y', 1000)), 0);
		itest_sleep_ms(2);
	}
	ck_assert(itest_quiet(fd, 100));
	EXCHANGE(fd, "zzz\nping\n", "PONG\n");

	/* Others are not affected. */
	other = conn();
	EXCHANGE(other, "ping\n", "PONG\n");
	close(other);
	close(fd);
	stop();
}
END_TEST

START_TEST(test_resp_bulk_too_long)
{
	int fd, other;

	start(RESP_LIMITS, NULL);
	other = conn();
	EXCHANGE(other, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	fd = conn();
	/* 16 bytes is the limit and fine; 17 is refused as soon as its header is read. */
	EXCHANGE(fd, "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$16\r\n0123456789abcdef\r\n", ":0\r\n");
	EXCHANGE(fd, "*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$17\r\n",
		 "-ERR Protocol error: invalid bulk length\r\n");
	CLOSED(fd);
	close(fd);
	EXCHANGE(other, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	close(other);
	stop();
}
END_TEST

START_TEST(test_resp_too_many_args)
{
	int fd;

	start(RESP_LIMITS, NULL);
	fd = conn();
	EXCHANGE(fd, "*4\r\n$7\r\nBF.MADD\r\n$1\r\nf\r\n$1\r\na\r\n$1\r\nb\r\n",
		 "*2\r\n:1\r\n:1\r\n");
	EXCHANGE(fd, "*5\r\n", "-ERR Protocol error: invalid multibulk length\r\n");
	CLOSED(fd);
	close(fd);

	/* Others are served. */
	fd = conn();
	EXCHANGE(fd, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	close(fd);
	stop();
}
END_TEST

START_TEST(test_resp_malformed)
{
	static const struct {
		const char *req, *reply;
	} cases[] = {
	    {"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
	    {"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
	    {"*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
	    {"*1\r\n$4\r\nPINGxx", "-ERR Protocol error: expected CRLF after bulk data\r\n"},
	    /* A valid command, then an inline one with unbalanced quotes. */
	    {"*1\r\n$4\r\nPING\r\nECHO \"a\r\n",
	     "+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n"},
	};
	int fd;

	start(NULL, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fd = conn();
		EXCHANGE(fd, cases[i].req, cases[i].reply);
		CLOSED(fd);
		close(fd);
	}
	fd = conn();
	EXCHANGE(fd, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	/* Inline commands after RESP ones, as Redis takes them (redis-cli --pipe ends its stream
	 * with an empty line): an empty line is skipped, an unknown command is only an error. */
	EXCHANGE(fd, "\r\nGET x\r\nECHO \"a b\"\r\n",
		 "-ERR unknown command 'GET', with args beginning with: 'x' \r\n$3\r\na b\r\n");
	close(fd);
	/* A first line that is a Redis command the text protocol lacks is RESP, inline; one the
	 * text protocol has stays text. */
	fd = conn();
	EXCHANGE(fd, "BF.ADD users u1\r\nDBSIZE\r\n", ":1\r\n:1\r\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "check users u1\n", "Yes\n");
	close(fd);
	/* A first line in Redis's inline form (CRLF) is RESP when it is not one of bloomd's own
	 * commands: PING (redis-benchmark's PING_INLINE), a Redis command blossomd lacks, a word
	 * neither protocol knows. With LF alone, PING and unknown words stay text. */
	fd = conn();
	EXCHANGE(fd, "PING\r\nPING\r\n", "+PONG\r\n+PONG\r\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "GET k\r\n", "-ERR unknown command 'GET', with args beginning with: 'k' \r\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "LPUSH l a\n",
		 "-ERR unknown command 'LPUSH', with args beginning with: 'l' 'a' \r\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "nosuch x\r\n",
		 "-ERR unknown command 'nosuch', with args beginning with: 'x' \r\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "nosuch x\n", "Client Error: Command not supported\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "check users u1\r\n", "Yes\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "AUTH x\r\n", "Client Error: Authentication is not configured\n");
	close(fd);
	fd = conn();
	EXCHANGE(fd, "delete users u1\r\n", "Client Error: Not a counting filter\n");
	close(fd);
	/* The line end is waited for when it decides. */
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "PING"), 0);
	itest_sleep_ms(100);
	ck_assert_int_eq(itest_send_str(fd, "\r"), 0);
	itest_sleep_ms(100);
	EXCHANGE(fd, "\n", "+PONG\r\n");
	close(fd);
	/* The first word split between reads is waited for. */
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "BF."), 0);
	itest_sleep_ms(100);
	EXCHANGE(fd, "ADD users u2\r\n", ":1\r\n");
	close(fd);
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "che"), 0);
	itest_sleep_ms(100);
	EXCHANGE(fd, "ck users u2\n", "Yes\n");
	close(fd);
	stop();
}
END_TEST

/* One RESP command may not grow past max(max_bulk_bytes, 16 MiB) + 128 KiB. */
START_TEST(test_resp_command_too_large)
{
	static const char arg[] = "$16\r\n0123456789abcdef\r\n";
	size_t n = 8192, al = sizeof(arg) - 1;
	char *blob = malloc(n * al), buf[128];
	int fd, other;

	ck_assert_ptr_nonnull(blob);
	for (size_t i = 0; i < n; i++)
		memcpy(blob + i * al, arg, al);
	start(CONF("max_bulk_bytes = 16\nmax_key_bytes = 16\n"), NULL);
	fd = conn();
	ck_assert_int_eq(itest_send_str(fd, "*1000000\r\n"), 0);
	/* 17 MiB of 16-byte arguments: past the cap, which the daemon answers once, then it
	 * discards the rest until it closes. */
	for (size_t sent = 0; sent < (size_t)17 << 20; sent += n * al)
		if (itest_send(fd, blob, n * al))
			break;
	ck_assert_int_gt(itest_recv_until(fd, buf, sizeof(buf), "\r\n", T), 0);
	ck_assert_str_eq(buf, "-ERR Protocol error: command too large\r\n");
	CLOSED(fd);
	close(fd);
	other = conn();
	EXCHANGE(other, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	close(other);
	free(blob);
	stop();
}
END_TEST

/* Deterministic pseudo-random bytes. */
static uint32_t garbage_state = 12345;

static unsigned char garbage_byte(void)
{
	garbage_state = garbage_state * 1103515245u + 12345u;
	return (unsigned char)(garbage_state >> 16);
}

START_TEST(test_binary_garbage)
{
	size_t n = 256 * 1024;
	char *junk = malloc(n), *buf = malloc(4 * n);
	ssize_t got;
	int fd, other;

	ck_assert(junk && buf);
	start(NULL, NULL);
	other = conn();
	EXCHANGE(other, "create g\n", "Done\n");

	/* Text connection: garbage lines get error replies, the connection keeps working. */
	fd = conn();
	junk[0] = 'x';
	for (size_t i = 1; i < n; i++)
		junk[i] = (char)garbage_byte();
	ck_assert_int_eq(itest_send(fd, junk, n), 0);
	ck_assert_int_eq(itest_send_str(fd, "\nping\n"), 0);
	got = itest_recv_until(fd, buf, 4 * n, "\nPONG\n", T);
	ck_assert_msg(got >= 6 && memcmp(buf + got - 6, "\nPONG\n", 6) == 0,
		      "no PONG after garbage (%zd bytes)", got);
	EXCHANGE(fd, "set g k\n", "Yes\n");
	close(fd);

	/* RESP connection: the first bad byte ends it with a protocol error. */
	fd = conn();
	junk[0] = '*';
	junk[1] = '1';
	junk[2] = '\r';
	junk[3] = '\n';
	junk[4] = '%';
	ck_assert_int_eq(itest_send(fd, junk, n), 0);
	got = itest_recv_until(fd, buf, 4 * n, "\r\n", T);
	ck_assert_msg(got > 0 && strncmp(buf, "-ERR Protocol error: ", 21) == 0, "%s", buf);
	CLOSED(fd);
	close(fd);

	EXCHANGE(other, "check g k\n", "Yes\n");
	close(other);
	free(junk);
	free(buf);
	stop();
}
END_TEST

/* A client that sends without ever reading: others are served, it is closed later. */
START_TEST(test_never_reader)
{
	static const char cmd[] = "check nofilter k\n"; /* 17 bytes in, 22 out */
	size_t chunk = 64 * 1024, sent = 0;
	char *blob = malloc(chunk);
	int64_t t0;
	int fd, other;

	ck_assert_ptr_nonnull(blob);
	for (size_t i = 0; i < chunk; i++)
		blob[i] = cmd[i % (sizeof(cmd) - 1)];
	start(CONF("request_timeout = 2\n"), NULL);
	fd = conn();
	ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	/* Send until nothing more is taken for half a second: every buffer is full. */
	for (;;) {
		/* blob repeats cmd, so starting at sent % len keeps commands whole. */
		size_t at = sent % (sizeof(cmd) - 1);
		ssize_t w = send(fd, blob + at, chunk - at, MSG_NOSIGNAL);

		if (w > 0) {
			sent += (size_t)w;
			ck_assert_msg(sent < ((size_t)1 << 30), "the daemon never stopped reading");
			continue;
		}
		ck_assert(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (poll(&p, 1, 500) == 0)
			break;
	}
	/* Everyone else is still served at once. */
	other = conn();
	t0 = itest_now_ms();
	EXCHANGE(other, "ping\n", "PONG\n");
	ck_assert_int_lt(itest_now_ms() - t0, 1000);

	/* The stalled connection is closed after about request_timeout seconds. */
	ck_assert_int_eq(itest_wait_hup(fd, 15000), 0);
	ck_assert(itest_log_wait(&d, "not reading its replies; closing", T));
	EXCHANGE(other, "ping\n", "PONG\n");
	close(fd);
	close(other);
	free(blob);
	stop();
}
END_TEST

/* A batch whose replies pass max_output_bytes closes the connection. */
START_TEST(test_output_cap)
{
	char line[4096];
	size_t off;
	int fd, other;

	start(CONF("max_output_bytes = 1k\n"), NULL);
	fd = conn();
	EXCHANGE(fd, "create o\n", "Done\n");
	off = (size_t)snprintf(line, sizeof(line), "multi o");
	for (int i = 0; i < 500; i++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %c", 'a' + i % 26);
	snprintf(line + off, sizeof(line) - off, "\n");
	ck_assert_int_eq(itest_send_str(fd, line), 0);
	CLOSED(fd);
	close(fd);
	ck_assert(itest_log_wait(&d, "passed max_output_bytes", T));
	other = conn();
	EXCHANGE(other, "ping\n", "PONG\n");
	close(other);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Connections and timeouts */

START_TEST(test_many_connections)
{
	enum { N = 2000 };
	static int fds[N];
	char buf[8];
	int other;

	ck_assert_int_ge(itest_raise_fd_limit(), N + 64);
	start(NULL, NULL);
	other = conn();
	EXCHANGE(other, "create many\n", "Done\n");
	for (int i = 0; i < N; i++)
		fds[i] = conn();
	/* With all of them open, another client is answered at once. */
	int64_t t0 = itest_now_ms();

	EXCHANGE(other, "set many k\n", "Yes\n");
	EXCHANGE(other, "check many k\n", "Yes\n");
	ck_assert_int_lt(itest_now_ms() - t0, 1000);
	/* And every one of them is served. */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(itest_send_str(fds[i], "check many k\n"), 0);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(itest_recv_n(fds[i], buf, 4, T), 4);
		ck_assert_mem_eq(buf, "Yes\n", 4);
	}
	for (int i = 0; i < N; i++)
		close(fds[i]);
	EXCHANGE(other, "ping\n", "PONG\n");
	close(other);
	ck_assert_ptr_null(strstr(itest_log(&d), "<4>"));
	stop();
}
END_TEST

START_TEST(test_max_connections)
{
	int fds[3], extra, again = -1;
	size_t drained = 1;

	start(CONF("max_connections = 3\n"), NULL);
	for (int i = 0; i < 3; i++) {
		fds[i] = conn();
		EXCHANGE(fds[i], "ping\n", "PONG\n");
	}
	/* The fourth is accepted and closed without a word. */
	extra = conn();
	ck_assert_int_eq(itest_wait_closed(extra, T, &drained), 0);
	ck_assert_uint_eq(drained, 0);
	close(extra);
	ck_assert(itest_log_wait(&d, "<4>blossomd: max_connections (3) reached", T));
	for (int i = 0; i < 3; i++)
		EXCHANGE(fds[i], "ping\n", "PONG\n");

	/* Once one leaves, a new one is served. */
	close(fds[0]);
	for (int64_t end = itest_now_ms() + T; itest_now_ms() < end; itest_sleep_ms(20)) {
		char buf[8];

		again = conn();
		if (itest_send_str(again, "ping\n") == 0 && itest_recv_n(again, buf, 5, 500) == 5 &&
		    memcmp(buf, "PONG\n", 5) == 0)
			break;
		close(again);
		again = -1;
	}
	ck_assert_int_ge(again, 0);
	close(again);
	close(fds[1]);
	close(fds[2]);
	stop();
}
END_TEST

START_TEST(test_idle_timeout)
{
	int64_t t0, dt;
	int idle, busy;

	start(CONF("idle_timeout = 1\n"), NULL);
	idle = conn();
	busy = conn();
	EXCHANGE(idle, "ping\n", "PONG\n");
	t0 = itest_now_ms();
	/* An active client is kept. */
	for (int i = 0; i < 8; i++) {
		EXCHANGE(busy, "ping\n", "PONG\n");
		itest_sleep_ms(300);
	}
	CLOSED(idle);
	dt = itest_now_ms() - t0;
	ck_assert_msg(dt >= 900 && dt <= 3500, "idle connection closed after %lld ms",
		      (long long)dt);
	EXCHANGE(busy, "ping\n", "PONG\n");
	close(idle);
	close(busy);
	stop();
}
END_TEST

START_TEST(test_request_timeout)
{
	int64_t t0, dt;
	int fd;

	start(CONF("request_timeout = 1\nidle_timeout = 60\n"), NULL);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	/* A command that trickles in a byte at a time still has to finish in time. */
	t0 = itest_now_ms();
	for (int i = 0; i < 20; i++) {
		if (itest_send_str(fd, "c"))
			break;
		if (!itest_quiet(fd, 200))
			break;
	}
	CLOSED(fd);
	dt = itest_now_ms() - t0;
	ck_assert_msg(dt >= 900 && dt <= 3500, "partial command closed after %lld ms",
		      (long long)dt);
	ck_assert(itest_log_wait(&d, "command incomplete after request_timeout", T));
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Signals */

#define RELOAD_BASE CONF("max_line_bytes = 64\nmax_key_bytes = 64\n")

/* A 75-byte line: too long for max_line_bytes 64. */
static const char *long_check(void)
{
	static char line[4200];

	snprintf(line, sizeof(line), "check nofilter %s\n", rep('k', 60));
	return line;
}

START_TEST(test_sighup_bad_file)
{
	char expect[512];
	int fd;

	start(RELOAD_BASE, NULL);
	fd = conn();
	EXCHANGE(fd, long_check(), "Client Error: Line too long\n");
	/* A good line, then a bad one: nothing of the file is applied. */
	ck_assert_int_eq(itest_write_file(d.conf_path, CONF("max_line_bytes = 1k\nbogus = 1\n")),
			 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	snprintf(expect, sizeof(expect),
		 "<3>blossomd: reload failed: %s:3: unknown key 'bogus'; keeping the old "
		 "configuration\n",
		 d.conf_path);
	ck_assert_msg(itest_log_wait(&d, expect, T), "%s", itest_log(&d));
	EXCHANGE(fd, long_check(), "Client Error: Line too long\n");
	EXCHANGE(fd, "ping\n", "PONG\n");

	/* A missing file is also survived. */
	ck_assert_int_eq(unlink(d.conf_path), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "cannot open", T));
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	stop();
}
END_TEST

START_TEST(test_sighup_good_file)
{
	int fd;

	start(RELOAD_BASE, NULL);
	fd = conn();
	EXCHANGE(fd, long_check(), "Client Error: Line too long\n");
	ck_assert_int_eq(
	    itest_write_file(d.conf_path, CONF("max_line_bytes = 1k\nmax_key_bytes = 64\n"
					       "port = 1\nbind = 127.0.0.2\n")),
	    0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "configuration reloaded", T));
	/* The new limit applies to the open connection. */
	EXCHANGE(fd, long_check(), "Filter does not exist\n");
	ck_assert(itest_log_wait(&d, "reload: max_line_bytes 64 -> 1024", T));
	/* Listening addresses need a restart; the --port flag still wins over the file. */
	ck_assert(itest_log_wait(&d, "<4>blossomd: reload: bind changed", T));
	ck_assert_ptr_null(strstr(itest_log(&d), "port changed"));
	close(fd);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	stop();
}
END_TEST

/* The file's bytes, NUL-terminated, in a static buffer. */
static const char *file_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#define CONFIG_REWRITE "*2\r\n$6\r\nCONFIG\r\n$7\r\nREWRITE\r\n"

/*
 * CONFIG REWRITE writes CONFIG SET's values into the file the daemon started with, its
 * comments and layout kept byte for byte, and a restart with it has them. Without a config
 * file, Redis's error.
 */
START_TEST(test_config_rewrite)
{
	static const char conf[] = CONF("# my settings\n"
					"; keep me\n"
					"\n"
					"max_memory = 1g   # one gig\n"
					"idle_timeout = 300\n");
	char saved[4096];
	int fd;

	start(conf, NULL);
	fd = conn();
	EXCHANGE(fd, "*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$9\r\nmaxmemory\r\n$5\r\n100mb\r\n",
		 "+OK\r\n");
	EXCHANGE(fd,
		 "*6\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$7\r\ntimeout\r\n$2\r\n60\r\n"
		 "$13\r\nmax_key_bytes\r\n$4\r\n1000\r\n",
		 "+OK\r\n");
	EXCHANGE(fd, CONFIG_REWRITE, "+OK\r\n");
	snprintf(saved, sizeof(saved), "%s", file_text(d.conf_path));
	ck_assert_str_eq(saved, CONF("# my settings\n"
				     "; keep me\n"
				     "\n"
				     "max_memory = 100m   # one gig\n"
				     "idle_timeout = 60\n"
				     "# Generated by CONFIG REWRITE\n"
				     "max_key_bytes = 1000\n"));
	ck_assert(itest_log_wait(&d, "CONFIG REWRITE: ", T));
	close(fd);
	stop();

	start(saved, NULL);
	fd = conn();
	EXCHANGE(fd, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$9\r\nmaxmemory\r\n",
		 "*2\r\n$9\r\nmaxmemory\r\n$9\r\n104857600\r\n");
	EXCHANGE(fd, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$7\r\ntimeout\r\n",
		 "*2\r\n$7\r\ntimeout\r\n$2\r\n60\r\n");
	close(fd);
	stop();

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, CONFIG_REWRITE, "-ERR The server is running without a config file\r\n");
	close(fd);
	stop();
}
END_TEST

/* A string with a line break is refused by CONFIG SET (it would add a line to a rewritten file);
 * one that would read back cut (" #" starts a comment) is taken, but CONFIG REWRITE refuses to
 * write it and leaves the file as it was. */
START_TEST(test_config_rewrite_unreadable_value)
{
	static const char conf[] = CONF("primary_auth = old\n");
	int fd;

	start(conf, NULL);
	fd = conn();
	EXCHANGE(fd, "*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$12\r\nprimary_auth\r\n$7\r\nx\n[foo]\r\n",
		 "-ERR CONFIG SET failed (possibly related to argument 'primary_auth') - bad value "
		 "for primary_auth: control characters (byte 0x0a) are not allowed\r\n");
	/* Nothing changed: the value is still the file's. */
	EXCHANGE(fd, CONFIG_REWRITE, "+OK\r\n");
	ck_assert_str_eq(file_text(d.conf_path), conf);
	EXCHANGE(fd,
		 "*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$12\r\nprimary_auth\r\n$9\r\nsecret #1\r\n",
		 "+OK\r\n");
	EXCHANGE(fd, CONFIG_REWRITE,
		 "-ERR Rewriting config file: the value of primary_auth cannot be written so that "
		 "it reads back the same (spaces at its ends, a '#' or ';' after a space, or a "
		 "control character)\r\n");
	ck_assert_str_eq(file_text(d.conf_path), conf);
	close(fd);
	stop();
}
END_TEST

/* storage (the bits' bytes) of filter name, from text info. */
static unsigned long long info_storage(int fd, const char *name)
{
	char req[128], buf[4096];
	const char *p;

	snprintf(req, sizeof(req), "info %s\n", name);
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	ck_assert_int_gt(itest_recv_until(fd, buf, sizeof(buf), "END\n", T), 0);
	p = strstr(buf, "\nstorage ");
	ck_assert_ptr_nonnull(p);
	return strtoull(p + strlen("\nstorage "), NULL, 10);
}

/*
 * A create of log_create_bytes of bits or more is logged at info, with its size: at the edge
 * (a filter exactly that large) and not one byte under it; 0 never logs; SIGHUP changes it.
 */
START_TEST(test_large_create_logged)
{
	char expect[512];
	unsigned long long bytes;
	int fd;

	start(CONF("log_create_bytes = 0\n"), NULL);
	fd = conn();
	EXCHANGE(fd, "create a capacity=100000 prob=0.01\n", "Done\n");
	bytes = info_storage(fd, "a");
	snprintf(expect, sizeof(expect), "[blossomd]\nlog_create_bytes = %llu\n", bytes + 1);
	ck_assert_int_eq(itest_write_file(d.conf_path, expect), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "reload: log_create_bytes 0 -> ", T));
	EXCHANGE(fd, "create b capacity=100000 prob=0.01\n", "Done\n");
	snprintf(expect, sizeof(expect), "[blossomd]\nlog_create_bytes = %llu\n", bytes);
	ck_assert_int_eq(itest_write_file(d.conf_path, expect), 0);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	snprintf(expect, sizeof(expect), "reload: log_create_bytes %llu -> %llu", bytes + 1, bytes);
	ck_assert(itest_log_wait(&d, expect, T));
	EXCHANGE(fd, "create c capacity=100000 prob=0.01 in_memory=1\n", "Done\n");
	EXCHANGE(fd, "create d capacity=100000 prob=0.01\n", "Done\n");
	snprintf(expect, sizeof(expect),
		 "<6>blossomd: created filter 'd': %llu bytes (%.1f MiB) of bits for 100000 keys "
		 "at 0.01; its first checkpoint writes as much\n",
		 bytes, bytes / 1048576.0);
	ck_assert_msg(itest_log_wait(&d, expect, T), "%s", itest_log(&d));
	snprintf(expect, sizeof(expect),
		 "<6>blossomd: created filter 'c': %llu bytes (%.1f MiB) of bits for 100000 keys "
		 "at 0.01\n",
		 bytes, bytes / 1048576.0);
	ck_assert_msg(strstr(itest_log(&d), expect), "%s", itest_log(&d));
	ck_assert_ptr_null(strstr(itest_log(&d), "created filter 'a'"));
	ck_assert_ptr_null(strstr(itest_log(&d), "created filter 'b'"));
	close(fd);
	stop();
}
END_TEST

START_TEST(test_sighup_without_config)
{
	int fd;

	start(NULL, NULL);
	ck_assert_int_eq(itest_signal(&d, SIGHUP), 0);
	ck_assert(itest_log_wait(&d, "SIGHUP: started without --config, nothing to re-read", T));
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	stop();
}
END_TEST

START_TEST(test_sigterm_and_sigint)
{
	int fd, st;

	start(NULL, NULL);
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	/* An open connection and a half-sent command do not hold the daemon up. */
	ck_assert_int_eq(itest_send_str(fd, "chec"), 0);
	itest_sleep_ms(50);
	ck_assert_int_eq(itest_signal(&d, SIGTERM), 0);
	st = itest_wait_exit(&d, T);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "<5>blossomd: SIGTERM received"));
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "<5>blossomd: stopped\n"));
	CLOSED(fd);
	close(fd);
	itest_stop(&d, T);

	start(NULL, NULL);
	ck_assert_int_eq(itest_signal(&d, SIGINT), 0);
	st = itest_wait_exit(&d, T);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "SIGINT received"));
	itest_stop(&d, T);
}
END_TEST

/*
 * SHUTDOWN stops the daemon as SIGTERM does: the asking connection closes with no reply, the
 * changed filters are written, exit 0. Its refusals (ABORT, bad flags) change nothing.
 */
START_TEST(test_shutdown_command)
{
	int fd, other, st;

	start(NULL, NULL);
	fd = conn();
	other = conn();
	EXCHANGE(other, "ping\n", "PONG\n");
	EXCHANGE(fd, "*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$1\r\nx\r\n", ":1\r\n");
	EXCHANGE(fd, "*2\r\n$8\r\nSHUTDOWN\r\n$5\r\nABORT\r\n",
		 "-ERR No shutdown in progress.\r\n");
	EXCHANGE(fd, "*3\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n$6\r\nNOSAVE\r\n",
		 "-ERR syntax error\r\n");
	EXCHANGE(fd, "*2\r\n$8\r\nshutdown\r\n$3\r\nnow\r\n", "");
	CLOSED(fd);
	CLOSED(other);
	st = itest_wait_exit(&d, T);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "<5>blossomd: SHUTDOWN received"));
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "final snapshot: 1 filters written"));
	ck_assert_ptr_nonnull(strstr(itest_log(&d), "<5>blossomd: stopped\n"));
	close(fd);
	close(other);
	itest_stop(&d, T);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* max_memory counts everything a filter costs (issue 17 item 10) */

/* The daemon's resident set in KiB, from /proc (0 if unreadable). */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

enum fill_proto { FILL_TEXT, FILL_RESP, FILL_HTTP };

/*
 * Read what has arrived on fd (at least one byte, waiting up to T) into buf at *have, leaving
 * room for a NUL. False if nothing came. Replies are read a socket buffer at a time, and
 * checked with plain comparisons: a Check assertion writes to its runner's pipe each time it
 * passes, and one per byte of 100,000 replies made this case take two minutes.
 */
static bool recv_more(int fd, char *buf, size_t cap, size_t *have)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t r;

	if (*have + 1 >= cap || poll(&p, 1, T) != 1)
		return false;
	r = recv(fd, buf + *have, cap - 1 - *have, 0);
	if (r <= 0)
		return false;
	*have += (size_t)r;
	buf[*have] = '\0';
	return true;
}

/* The last byte of the first whole reply in buf[0, have), or NULL: a line (text, RESP), or an
 * HTTP response (its header, then Content-Length bytes). buf is NUL-terminated. */
static char *reply_end(char *buf, size_t have, bool http)
{
	char *hdr, *cl;
	size_t len;

	if (!http)
		return memchr(buf, '\n', have);
	hdr = memmem(buf, have, "\r\n\r\n", 4);
	if (!hdr)
		return NULL;
	cl = strstr(buf, "Content-Length: ");
	len = cl && cl < hdr ? (size_t)atol(cl + 16) : 0;
	return hdr + 4 + len <= buf + have ? hdr + 4 + len - 1 : NULL;
}

/*
 * Create filters of capacity 1 (f0, f1, ...) over one protocol, 500 pipelined requests at a
 * time (HTTP: one at a time on a keep-alive connection), until the daemon answers "not enough
 * memory" or `most` are created. Returns the number created. Every reply is one of the two.
 */
static unsigned fill_tiny_filters(enum fill_proto proto, unsigned most)
{
	static char req[500 * 160], buf[1 << 16];
	const char *ok = proto == FILL_TEXT   ? "Done\n"
			 : proto == FILL_RESP ? "+OK\r\n"
					      : "HTTP/1.1 201";
	const char *full = proto == FILL_TEXT	? "Client Error: Not enough memory\n"
			   : proto == FILL_RESP ? "-OOM command not allowed when used memory > "
						  "'maxmemory'.\r\n"
						: "HTTP/1.1 507";
	unsigned created = 0, batch = proto == FILL_HTTP ? 1 : 500;
	int fd = proto == FILL_HTTP ? itest_connect(d.http_port) : conn();
	bool refused = false;
	size_t have = 0;

	ck_assert_int_ge(fd, 0);
	while (!refused && created < most) {
		size_t n = 0;
		for (unsigned i = 0; i < batch; i++) {
			char name[32];
			int k = snprintf(name, sizeof(name), "f%u", created + i);
			if (proto == FILL_TEXT)
				n += (size_t)sprintf(req + n, "create %s capacity=1\n", name);
			else if (proto == FILL_RESP)
				n += (size_t)sprintf(req + n,
						     "*4\r\n$10\r\nBF.RESERVE\r\n$%d\r\n%s\r\n"
						     "$4\r\n0.01\r\n$1\r\n1\r\n",
						     k, name);
			else
				n += (size_t)sprintf(req + n,
						     "PUT /v1/filters/%s HTTP/1.1\r\nHost: t\r\n"
						     "Content-Type: application/json\r\n"
						     "Content-Length: 14\r\n\r\n{\"capacity\":1}",
						     name);
		}
		ck_assert_int_eq(itest_send(fd, req, n), 0);
		/* One reply per request. */
		for (unsigned got = 0; got < batch;) {
			char *end = reply_end(buf, have, proto == FILL_HTTP);

			if (!end) {
				if (!recv_more(fd, buf, sizeof(buf), &have))
					ck_abort_msg("no reply after %u filters", created);
				continue;
			}
			if (strncmp(buf, ok, strlen(ok)) == 0)
				created++;
			else if (strncmp(buf, full, strlen(full)) == 0)
				refused = true;
			else
				ck_abort_msg("unexpected reply: %.*s", (int)(end + 1 - buf), buf);
			have -= (size_t)(end + 1 - buf);
			memmove(buf, end + 1, have + 1);
			got++;
		}
	}
	close(fd);
	ck_assert_msg(have == 0, "more replies than requests: %s", buf);
	ck_assert_msg(refused, "%u filters of capacity 1 admitted under max_memory", created);
	return created;
}

/* Drop f0 .. f<n-1> over the text protocol, so that the stop is not a few thousand snapshot
 * files (each fsynced) long. */
static void drop_tiny_filters(unsigned n)
{
	static char req[500 * 32], done[500 * 5 + 1], got[500 * 5 + 1];
	int fd = conn();

	for (unsigned i = 0; i < 500; i++)
		memcpy(done + 5 * i, "Done\n", 5);
	for (unsigned base = 0; base < n; base += 500) {
		size_t len = 0;
		unsigned m = n - base < 500 ? n - base : 500;
		for (unsigned i = 0; i < m; i++)
			len += (size_t)sprintf(req + len, "drop f%u\n", base + i);
		ck_assert_int_eq(itest_send(fd, req, len), 0);
		ck_assert_int_eq(itest_recv_n(fd, got, 5 * m, T), 5 * m);
		ck_assert(memcmp(got, done, 5 * m) == 0);
	}
	close(fd);
}

/*
 * With max_memory = 8m, 131,072 filters of capacity 1 were admitted and RSS reached 318 MB:
 * only their bits (64 bytes each) were counted. Now each protocol is refused after a few
 * thousand, and the daemon's RSS grows by at most max_memory plus a fixed margin (4 MiB: the
 * connections' buffers and the allocator's arenas).
 */
START_TEST(test_max_memory_counts_everything)
{
	static const enum fill_proto protos[] = {FILL_RESP, FILL_TEXT, FILL_HTTP};
	/* RSS means the daemon's memory only without valgrind and without ASan (its redzones and
	 * shadow memory multiply a heap's footprint); the counts are checked in every build. */
#if defined(__SANITIZE_ADDRESS__)
	bool measured = false;
#else
	const char *wrapper = getenv("BLOSSOMD_WRAPPER");
	bool measured = !wrapper || !strstr(wrapper, "valgrind");
#endif
	/* 2 MiB where RSS is not measured: the counts are the same per filter, and under
	 * valgrind 3 x 32,000 creates took most of the suite's time. */
	unsigned mib = measured ? 8 : 2;

	for (size_t i = 0; i < 3; i++) {
		char conf[96];

		/* wal_fsync = no: this measures memory; an fdatasync per HTTP create would only
		 * slow it. */
		snprintf(conf, sizeof(conf), "[blossomd]\nmax_memory = %um\nwal_fsync = no\n", mib);
		start(conf, NULL);
		pid_t pid = daemon_pid();
		long before = rss_kib(pid);
		unsigned n = fill_tiny_filters(protos[i], 131072);
		long after = rss_kib(pid);
		printf("# %s: %u filters of capacity 1 in max_memory %u MiB, RSS +%ld KiB\n",
		       i == 0	? "RESP"
		       : i == 1 ? "text"
				: "HTTP",
		       n, mib, after - before);
		ck_assert_uint_gt(n, 500 * mib / 8);
		/* Each is charged its structure with its name (112 bytes with names of up to 7
		 * bytes), the server's snapshot entry and its slots (48), its share of the
		 * registry's buckets and name index (32), not only its 64 bytes of bits: about
		 * 256 bytes. */
		ck_assert_uint_lt(n, (mib << 20) / 248);
		if (measured)
			ck_assert_int_le(after - before, (8 + 4) << 10);
		drop_tiny_filters(n);
		stop();
	}
}
END_TEST

static Suite *server_suite(void)
{
	Suite *s = suite_create("server");
	TCase *cli = tcase_create("cli");
	TCase *proto = tcase_create("protocols");
	TCase *huge = tcase_create("huge");
	TCase *bad = tcase_create("bad-input");
	TCase *conns = tcase_create("connections");
	TCase *sig = tcase_create("signals");

	tcase_set_timeout(cli, 30);
	tcase_add_test(cli, test_version);
	tcase_add_test(cli, test_help_and_usage);
	tcase_add_test(cli, test_test_config);
	tcase_add_test(cli, test_port_taken);
	tcase_add_test(cli, test_refuses_public_bind);
	tcase_add_test(cli, test_startup_log);
	tcase_add_test(cli, test_log_level);
	suite_add_tcase(s, cli);

	/* test_pipeline_slices sends 8 MB and reads 8 MB back: over 30 s under ASan beside another
	 * suite on two busy cores. */
	tcase_set_timeout(proto, 90);
	tcase_set_timeout(huge, 600);
	tcase_add_test(huge, test_huge_command_sliced);
	tcase_add_test(huge, test_huge_text_line_sliced);
	suite_add_tcase(s, huge);
	tcase_add_test(proto, test_text_basic);
	tcase_add_test(proto, test_resp_basic);
	tcase_add_test(proto, test_protocol_detection);
	tcase_add_test(proto, test_blank_lines_ignored);
	tcase_add_test(proto, test_pipeline_text);
	tcase_add_test(proto, test_pipeline_split);
	tcase_add_test(proto, test_pipeline_resp);
	tcase_add_test(proto, test_pipeline_slices);
	tcase_add_test(proto, test_long_listings);
	tcase_add_test(proto, test_resp_large_bulk);
	tcase_add_test(proto, test_quit);
	tcase_add_test(proto, test_text_extensions_any_case);
	tcase_add_test(proto, test_half_close);
	tcase_add_test(proto, test_ipv6_and_two_listeners);
	suite_add_tcase(s, proto);

	/* test_max_memory_counts_everything fills 8 MiB with filters of about 300 bytes three
	 * times over (about 85 s on a busy 2-core machine, over 150 s under ASan). */
	tcase_set_timeout(bad, 360);
	tcase_add_test(bad, test_line_too_long);
	tcase_add_test(bad, test_resp_bulk_too_long);
	tcase_add_test(bad, test_resp_too_many_args);
	tcase_add_test(bad, test_resp_malformed);
	tcase_add_test(bad, test_resp_command_too_large);
	tcase_add_test(bad, test_binary_garbage);
	tcase_add_test(bad, test_never_reader);
	tcase_add_test(bad, test_output_cap);
	tcase_add_test(bad, test_max_memory_counts_everything);
	suite_add_tcase(s, bad);

	tcase_set_timeout(conns, 60);
	tcase_add_test(conns, test_many_connections);
	tcase_add_test(conns, test_max_connections);
	tcase_add_test(conns, test_idle_timeout);
	tcase_add_test(conns, test_request_timeout);
	suite_add_tcase(s, conns);

	tcase_set_timeout(sig, 30);
	tcase_add_test(sig, test_sighup_bad_file);
	tcase_add_test(sig, test_sighup_good_file);
	tcase_add_test(sig, test_config_rewrite);
	tcase_add_test(sig, test_config_rewrite_unreadable_value);
	tcase_add_test(sig, test_large_create_logged);
	tcase_add_test(sig, test_sighup_without_config);
	tcase_add_test(sig, test_sigterm_and_sigint);
	tcase_add_test(sig, test_shutdown_command);
	suite_add_tcase(s, sig);
	return s;
}

CHECK_MAIN(server_suite)
