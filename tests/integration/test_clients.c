/* SPDX-License-Identifier: MIT */
/*
 * CLIENT LIST, CLIENT INFO and CLIENT KILL against the real daemon: the lines of Redis 7.0's
 * format with this test's own sockets in them (ids, addresses, names, protocol versions, the
 * last command), every connection listed exactly once, and KILL by id, address and the other
 * filters closing the right connections, each of which then reads EOF.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/itest_check.h"

/* ---------------------------------------------------------------------------------------- */
/* Helpers */

/* Send one RESP command of NUL-terminated arguments (the list ends with NULL). */
static void send_cmd(int fd, const char *first, ...)
{
	char buf[4096];
	const char *args[32];
	size_t n = 0, len;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		ck_assert_uint_lt(n, 32);
		args[n++] = a;
	}
	va_end(ap);
	len = (size_t)snprintf(buf, sizeof(buf), "*%zu\r\n", n);
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "$%zu\r\n%s\r\n",
					strlen(args[i]), args[i]);
		ck_assert_uint_lt(len, sizeof(buf));
	}
	ck_assert_int_eq(itest_send(fd, buf, len), 0);
}

/* Read one line ("...\r\n") of a reply into buf, NUL-terminated without its "\r\n". */
static void read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	for (;;) {
		ck_assert_uint_lt(n + 1, cap);
		ck_assert_msg(itest_recv_n(fd, buf + n, 1, T) == 1, "reply line cut short");
		if (n && buf[n - 1] == '\r' && buf[n] == '\n')
			break;
		n++;
	}
	buf[n - 1] = '\0';
}

/* Read a bulk string (RESP3: a verbatim "txt" string) reply into a malloc'd, NUL-terminated
 * buffer the caller frees. */
static char *read_text(int fd)
{
	char head[64];
	long long n;
	char *p;

	read_line(fd, head, sizeof(head));
	ck_assert_msg(head[0] == '$' || head[0] == '=', "not a bulk reply: %s", head);
	n = atoll(head + 1);
	ck_assert_int_ge(n, 0);
	p = malloc((size_t)n + 3);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(itest_recv_n(fd, p, (size_t)n + 2, T), n + 2);
	ck_assert(p[n] == '\r' && p[n + 1] == '\n');
	p[n] = '\0';
	if (head[0] == '=') {
		ck_assert_msg(n >= 4 && memcmp(p, "txt:", 4) == 0, "verbatim: %s", p);
		memmove(p, p + 4, (size_t)n - 3);
	}
	return p;
}

/* Send a command of NUL-terminated arguments (the list ends with NULL) and return its bulk
 * (or verbatim) reply (free it). */
#define ASK_TEXT(fd, ...) (send_cmd((fd), __VA_ARGS__, NULL), read_text(fd))

/* CLIENT ID of fd. */
static unsigned long long client_id(int fd)
{
	char line[64];

	send_cmd(fd, "CLIENT", "ID", NULL);
	read_line(fd, line, sizeof(line));
	ck_assert_msg(line[0] == ':', "%s", line);
	return strtoull(line + 1, NULL, 10);
}

/* An address as the daemon prints it: "127.0.0.1:40000", "[::1]:40000". */
static void format_addr(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(out, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(out, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	}
}

/* fd's own address (the daemon's addr= for it). */
static void local_addr(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
	format_addr(&ss, out, len);
}

/* fd's peer's address (the daemon's laddr= for it). */
static void peer_addr(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	ck_assert_int_eq(getpeername(fd, (struct sockaddr *)&ss, &sl), 0);
	format_addr(&ss, out, len);
}

/* Whether s matches pattern p, where '#' in p stands for one or more digits. */
static bool matches(const char *p, const char *s)
{
	while (*p) {
		if (*p == '#') {
			if (*s < '0' || *s > '9')
				return false;
			while (*s >= '0' && *s <= '9')
				s++;
			p++;
		} else if (*p++ != *s++) {
			return false;
		}
	}
	return *s == '\0';
}

#define MATCHES(pattern, s)                                                                        \
	ck_assert_msg(matches((pattern), (s)), "got\n%s\nwant\n%s", (s), (pattern))

/*
 * Append to out the line CLIENT LIST / INFO give for fd as a pattern ('#': a number that
 * varies from run to run): Redis 7.0's fields in its order, fd's id (0: any) and name, and
 * rest from qbuf= on.
 */
static void add_line(char *out, size_t cap, int fd, unsigned long long id, const char *name,
		     const char *rest)
{
	char addr[64], laddr[64];
	size_t len = strlen(out);
	char idtext[32] = "#";

	local_addr(fd, addr, sizeof(addr));
	peer_addr(fd, laddr, sizeof(laddr));
	if (id)
		snprintf(idtext, sizeof(idtext), "%llu", id);
	snprintf(out + len, cap - len,
		 "id=%s addr=%s laddr=%s fd=# name=%s age=# idle=# flags=N db=0 sub=0 psub=0 "
		 "ssub=0 multi=-1 watch=0 %s\n",
		 idtext, addr, laddr, name, rest);
}

/* What follows qbuf= for the connection asking with CLIENT LIST / INFO alone (26 bytes of
 * command, "client" + "list" 10 bytes of arguments: Redis's numbers too), and for one not
 * running a command (nothing partial, sent nothing for a while). */
#define ASKING(cmd, resp)                                                                          \
	"qbuf=26 qbuf-free=# argv-mem=10 multi-mem=0 rbs=# rbp=# obl=0 oll=0 omem=0 tot-mem=# "    \
	"events=r cmd=" cmd " user=default redir=-1 resp=" resp
/* The same for any command with arguments. */
#define ASKED(cmd, resp)                                                                           \
	"qbuf=# qbuf-free=# argv-mem=# multi-mem=0 rbs=# rbp=# obl=0 oll=0 omem=0 tot-mem=# "      \
	"events=r cmd=" cmd " user=default redir=-1 resp=" resp
#define RESTING(cmd, resp)                                                                         \
	"qbuf=0 qbuf-free=# argv-mem=0 multi-mem=0 rbs=# rbp=# obl=0 oll=0 omem=0 tot-mem=# "      \
	"events=r cmd=" cmd " user=default redir=-1 resp=" resp

/* Wait for the daemon to close fd: it must read EOF (no reply, no reset) within T. */
static void reads_eof(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char c;

	ck_assert_int_eq(poll(&pfd, 1, T), 1);
	ck_assert_int_eq(recv(fd, &c, 1, 0), 0);
}

/* The number of lines of list that contain needle. */
static int count_lines_with(const char *list, const char *needle)
{
	int n = 0;

	for (const char *p = list; *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char line[1024];

		ck_assert_uint_lt(len, sizeof(line));
		memcpy(line, p, len);
		line[len] = '\0';
		if (strstr(line, needle))
			n++;
		p += len + (end ? 1 : 0);
	}
	return n;
}

static int count_lines(const char *list)
{
	int n = 0;

	for (const char *p = list; *p; p++)
		n += *p == '\n';
	return n;
}

/* HELLO 3 on fd (its map reply ends with the "modules" array: RedisBloom's, args last). */
static void hello3(int fd)
{
	char buf[512];

	send_cmd(fd, "HELLO", "3", NULL);
	ck_assert(itest_recv_until(fd, buf, sizeof(buf), "$4\r\nargs\r\n*0\r\n", T) > 0);
	ck_assert_msg(strncmp(buf, "%7\r\n", 4) == 0, "%s", buf);
}

/* ---------------------------------------------------------------------------------------- */
/* CLIENT LIST / INFO */

START_TEST(test_list_and_info_lines)
{
	int a, b, t, u;
	unsigned long long ida, idb;
	char want[4096], *txt;

	start(NULL, NULL);
	a = conn();
	b = conn();
	ida = client_id(a);
	idb = client_id(b);
	ck_assert_uint_gt(idb, ida);

	/* CLIENT INFO: the asking connection's line, "\n" ended. */
	txt = ASK_TEXT(a, "CLIENT", "INFO");
	want[0] = '\0';
	add_line(want, sizeof(want), a, ida, "", ASKING("client|info", "2"));
	MATCHES(want, txt);
	free(txt);

	/* b named, in RESP3, its last command HELLO: so in a's list, oldest first. */
	EXCHANGE(b, "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$6\r\nworker\r\n", "+OK\r\n");
	hello3(b);
	txt = ASK_TEXT(a, "CLIENT", "LIST");
	want[0] = '\0';
	add_line(want, sizeof(want), a, ida, "", ASKING("client|list", "2"));
	add_line(want, sizeof(want), b, idb, "worker", RESTING("hello", "3"));
	MATCHES(want, txt);
	free(txt);

	/* b's own, in RESP3: a verbatim string (read_text() checks its "txt:"). */
	txt = ASK_TEXT(b, "CLIENT", "INFO");
	want[0] = '\0';
	add_line(want, sizeof(want), b, idb, "worker", ASKING("client|info", "3"));
	MATCHES(want, txt);
	free(txt);

	/* By id: in the order given; an unknown id adds nothing. */
	{
		char ids[2][32];

		snprintf(ids[0], sizeof(ids[0]), "%llu", idb);
		snprintf(ids[1], sizeof(ids[1]), "%llu", ida);
		txt = ASK_TEXT(a, "CLIENT", "LIST", "ID", ids[0], "999999", ids[1]);
		want[0] = '\0';
		add_line(want, sizeof(want), b, idb, "worker", RESTING("client|info", "3"));
		add_line(want, sizeof(want), a, ida, "", ASKED("client|list", "2"));
		MATCHES(want, txt);
		free(txt);
	}
	EXCHANGE(a, "*4\r\n$6\r\nCLIENT\r\n$4\r\nLIST\r\n$4\r\nTYPE\r\n$6\r\npubsub\r\n",
		 "$0\r\n\r\n");

	/* A text-protocol client and one that has sent nothing are listed too, with no
	 * command. */
	t = conn();
	EXCHANGE(t, "ping\n", "PONG\n");
	u = conn();
	EXCHANGE(a, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n"); /* u is accepted before this */
	txt = ASK_TEXT(a, "CLIENT", "LIST", "TYPE", "normal");
	want[0] = '\0';
	add_line(want, sizeof(want), a, ida, "", ASKED("client|list", "2"));
	add_line(want, sizeof(want), b, idb, "worker", RESTING("client|info", "3"));
	add_line(want, sizeof(want), t, 0, "", RESTING("NULL", "2"));
	add_line(want, sizeof(want), u, 0, "", RESTING("NULL", "2"));
	MATCHES(want, txt);
	free(txt);

	/* Pipelined: a's qbuf counts its running command and the one after it, as Redis's
	 * query buffer does. */
	ck_assert_int_eq(
	    itest_send_str(a, "*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n*1\r\n$4\r\nPING\r\n"), 0);
	txt = read_text(a);
	ck_assert_msg(strstr(txt, " qbuf=40 ") && strstr(txt, " argv-mem=10 "), "%s", txt);
	free(txt);
	EXCHANGE(a, "", "+PONG\r\n");

	close(a);
	close(b);
	close(t);
	close(u);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* CLIENT KILL */

/* "CLIENT KILL <args>" on fd answers expect (exact bytes). */
#define KILL(fd, expect, ...)                                                                      \
	do {                                                                                       \
		char got_[256];                                                                    \
		send_cmd((fd), "CLIENT", "KILL", __VA_ARGS__, NULL);                               \
		read_line((fd), got_, sizeof(got_));                                               \
		ck_assert_str_eq(got_, (expect));                                                  \
	} while (0)

START_TEST(test_kill_by_id_and_addr)
{
	int a, b, c, e, f;
	unsigned long long idb, ide;
	char id[32], addr[64], laddr[64], *txt;

	start(NULL, NULL);
	a = conn();
	b = conn();
	c = conn();
	f = conn();
	idb = client_id(b);
	snprintf(id, sizeof(id), "%llu", idb);

	/* By id: the count, and b reads EOF; once gone, nothing matches. */
	KILL(a, ":1", "ID", id);
	reads_eof(b);
	KILL(a, ":0", "ID", id);
	KILL(a, ":0", "ID", "999999");

	/* By address, new form and old. */
	local_addr(c, addr, sizeof(addr));
	KILL(a, ":0", "ADDR", "127.0.0.1:1");
	KILL(a, ":1", "ADDR", addr);
	reads_eof(c);
	local_addr(f, addr, sizeof(addr));
	KILL(a, "+OK", addr);
	reads_eof(f);
	KILL(a, "-ERR No such client", addr);

	/* A connection in the middle of a command: its partial command shows as qbuf, and it
	 * goes all the same. */
	e = conn();
	ide = client_id(e);
	snprintf(id, sizeof(id), "%llu", ide);
	ck_assert_int_eq(itest_send_str(e, "*2\r\n$4\r\nPI"), 0);
	for (int i = 0;; i++) {
		txt = ASK_TEXT(a, "CLIENT", "LIST", "ID", id);
		if (strstr(txt, " qbuf=10 ") || i == 50)
			break;
		free(txt);
		itest_sleep_ms(20);
	}
	ck_assert_msg(strstr(txt, " qbuf=10 ") && strstr(txt, " argv-mem=0 ") &&
			  strstr(txt, " cmd=client|id "),
		      "%s", txt);
	free(txt);
	peer_addr(e, laddr, sizeof(laddr));
	KILL(a, ":0", "LADDR", "127.0.0.1:1", "ID", id);
	KILL(a, ":1", "LADDR", laddr, "ID", id);
	reads_eof(e);

	/* Only a is left, and it goes on. */
	txt = ASK_TEXT(a, "CLIENT", "LIST");
	ck_assert_int_eq(count_lines(txt), 1);
	local_addr(a, addr, sizeof(addr));
	ck_assert_int_eq(count_lines_with(txt, addr), 1);
	free(txt);
	EXCHANGE(a, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");

	close(a);
	close(b);
	close(c);
	close(e);
	close(f);
	stop();
}
END_TEST

START_TEST(test_kill_skipme_and_self)
{
	int a, b, c, g, h;
	char id[32], addr[64], laddr[64];

	start(NULL, NULL);
	a = conn();
	b = conn();
	c = conn();
	EXCHANGE(c, "ping\n", "PONG\n"); /* a text-protocol client goes too */

	/* SKIPME yes is the default: all but a. */
	KILL(a, ":0", "TYPE", "master");
	KILL(a, ":0", "TYPE", "pubsub", "SKIPME", "no");
	KILL(a, ":2", "USER", "default");
	reads_eof(b);
	reads_eof(c);
	EXCHANGE(a, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	close(b);
	close(c);

	/* SKIPME no: a too, after its reply. */
	b = conn();
	EXCHANGE(b, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	KILL(a, ":2", "SKIPME", "no");
	reads_eof(a);
	reads_eof(b);
	close(a);
	close(b);

	/* A command after a connection's KILL of itself is not run (Redis: close after the
	 * reply). */
	g = conn();
	snprintf(id, sizeof(id), "%llu", client_id(g));
	{
		char req[256];

		snprintf(
		    req, sizeof(req),
		    "*6\r\n$6\r\nCLIENT\r\n$4\r\nKILL\r\n$2\r\nID\r\n$%zu\r\n%s\r\n$6\r\nSKIPME\r\n"
		    "$2\r\nno\r\n*1\r\n$4\r\nPING\r\n",
		    strlen(id), id);
		EXCHANGE(g, req, ":1\r\n");
	}
	reads_eof(g);
	close(g);

	/* The old form may name the asking connection itself. */
	g = conn();
	local_addr(g, addr, sizeof(addr));
	KILL(g, "+OK", addr);
	reads_eof(g);
	close(g);

	/* LADDR: every connection to this port. */
	g = conn();
	h = conn();
	EXCHANGE(h, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	peer_addr(g, laddr, sizeof(laddr));
	KILL(g, ":1", "LADDR", laddr, "SKIPME", "yes");
	reads_eof(h);
	KILL(g, ":1", "LADDR", laddr, "SKIPME", "NO");
	reads_eof(g);
	close(g);
	close(h);
	stop();
}
END_TEST

/* Redis 7.0's errors, and the connection goes on after each. */
START_TEST(test_syntax_errors)
{
	int a;

	start(NULL, NULL);
	a = conn();
	send_cmd(a, "CLIENT", "KILL", NULL);
	EXCHANGE(a, "", "-ERR wrong number of arguments for 'client|kill' command\r\n");
	KILL(a, "-ERR syntax error", "ID", "10", "wrong_arg");
	KILL(a, "-ERR client-id should be greater than 0", "ID", "str");
	KILL(a, "-ERR client-id should be greater than 0", "ID", "0");
	KILL(a, "-ERR Unknown client type 'wrong_type'", "TYPE", "wrong_type");
	KILL(a, "-ERR No such user 'wrong_user'", "USER", "wrong_user");
	KILL(a, "-ERR syntax error", "SKIPME", "yes_or_no");
	KILL(a, "-ERR syntax error", "SKIPME", "no", "ADDR");
	KILL(a, "-ERR No such client", "ID");
	send_cmd(a, "CLIENT", "LIST", "TYPE", "bogus", NULL);
	EXCHANGE(a, "", "-ERR Unknown client type 'bogus'\r\n");
	send_cmd(a, "CLIENT", "LIST", "ID", "1", "x", NULL);
	EXCHANGE(a, "", "-ERR Invalid client ID\r\n");
	send_cmd(a, "CLIENT", "LIST", "ID", NULL);
	EXCHANGE(a, "", "-ERR syntax error\r\n");
	send_cmd(a, "CLIENT", "INFO", "x", NULL);
	EXCHANGE(a, "", "-ERR wrong number of arguments for 'client|info' command\r\n");
	send_cmd(a, "CLIENT", "HELP", NULL);
	{
		char buf[8192];

		ck_assert(itest_recv_until(a, buf, sizeof(buf), "+    Print this help.\r\n", T) >
			  0);
		ck_assert_msg(strncmp(buf, "*35\r\n+CLIENT <subcommand>", 25) == 0, "%s", buf);
		ck_assert_ptr_nonnull(strstr(buf, "\r\n+KILL <ip:port>\r\n"));
		ck_assert_ptr_nonnull(strstr(buf, "\r\n+LIST [options ...]\r\n"));
		ck_assert_ptr_nonnull(strstr(buf, "\r\n+INFO\r\n"));
	}
	EXCHANGE(a, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
	close(a);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Many connections */

#define MANY 50

START_TEST(test_list_many)
{
	int fds[MANY], a;
	char addrs[MANY][64], id[32], *txt;
	unsigned long long ids[MANY], last = 0;

	start(NULL, NULL);
	for (int i = 0; i < MANY; i++) {
		char name[16];

		fds[i] = conn();
		snprintf(name, sizeof(name), "c%d", i);
		send_cmd(fds[i], "CLIENT", "SETNAME", name, NULL);
		EXCHANGE(fds[i], "", "+OK\r\n");
		ids[i] = client_id(fds[i]);
		local_addr(fds[i], addrs[i], sizeof(addrs[i]));
	}
	a = conn();

	/* Each exactly once, oldest first, and a's own line last. */
	txt = ASK_TEXT(a, "CLIENT", "LIST");
	ck_assert_int_eq(count_lines(txt), MANY + 1);
	for (int i = 0; i < MANY; i++) {
		char needle[96];

		snprintf(needle, sizeof(needle), " addr=%s ", addrs[i]);
		ck_assert_int_eq(count_lines_with(txt, needle), 1);
		snprintf(needle, sizeof(needle), "id=%llu addr=%s laddr=", ids[i], addrs[i]);
		ck_assert_int_eq(count_lines_with(txt, needle), 1);
		snprintf(needle, sizeof(needle), " name=c%d age=", i);
		ck_assert_int_eq(count_lines_with(txt, needle), 1);
	}
	for (const char *p = txt; *p; p = strchr(p, '\n') + 1) {
		unsigned long long n = strtoull(p + 3, NULL, 10);

		ck_assert(strncmp(p, "id=", 3) == 0 && n > last);
		last = n;
	}
	free(txt);

	/* Half of them killed one by one: each reads EOF and leaves the list. */
	for (int i = 0; i < MANY; i += 2) {
		snprintf(id, sizeof(id), "%llu", ids[i]);
		KILL(a, ":1", "ID", id);
		reads_eof(fds[i]);
	}
	txt = ASK_TEXT(a, "CLIENT", "LIST");
	ck_assert_int_eq(count_lines(txt), MANY / 2 + 1);
	for (int i = 0; i < MANY; i++) {
		char needle[96];

		snprintf(needle, sizeof(needle), " addr=%s ", addrs[i]);
		ck_assert_int_eq(count_lines_with(txt, needle), i % 2);
	}
	free(txt);

	/* The rest at once. */
	KILL(a, ":25", "TYPE", "normal");
	for (int i = 1; i < MANY; i += 2)
		reads_eof(fds[i]);
	txt = ASK_TEXT(a, "CLIENT", "LIST");
	ck_assert_int_eq(count_lines(txt), 1);
	free(txt);
	for (int i = 0; i < MANY; i++)
		close(fds[i]);
	close(a);
	stop();
}
END_TEST

static Suite *clients_suite(void)
{
	Suite *s = suite_create("clients");
	TCase *tc = tcase_create("clients");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_list_and_info_lines);
	tcase_add_test(tc, test_kill_by_id_and_addr);
	tcase_add_test(tc, test_kill_skipme_and_self);
	tcase_add_test(tc, test_syntax_errors);
	tcase_add_test(tc, test_list_many);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(clients_suite)
