/* SPDX-License-Identifier: MIT */
/*
 * Publish/subscribe, keyspace notifications and MONITOR against the real daemon: the exact
 * bytes of RESP2 arrays and RESP3 pushes between real connections (as redis-server 7.0.15
 * sends them), keyspace events of changes made over the text protocol, RESP and HTTP alike,
 * MONITOR's lines with the clients' real addresses, a subscriber that never reads closed at
 * max_output_bytes while the daemon goes on serving (and one that reads keeping everything),
 * and subscribers spared by idle_timeout, as Redis spares them.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/check_main.h"
#define ITEST_T 10000
#include "tests/integration/itest_case.h"

/* fd is sent exactly want (and nothing more within a moment). */
static void pushed(int fd, const char *want)
{
	size_t n = strlen(want);
	char *buf = malloc(n + 1);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(itest_recv_n(fd, buf, n, T), (ssize_t)n);
	buf[n] = '\0';
	ck_assert_msg(memcmp(buf, want, n) == 0, "got '%s', want '%s'", esc(buf), esc(want));
	free(buf);
	ck_assert(itest_quiet(fd, 100));
}

/* Append the keyevent ("E") notification of event on name, as a RESP2 subscriber of the
 * pattern __keyevent@0__:* gets it. */
static void keyevent(char *out, size_t cap, const char *event, const char *name)
{
	size_t len = strlen(out);

	snprintf(out + len, cap - len,
		 "*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n$%zu\r\n__keyevent@0__:%s"
		 "\r\n$%zu\r\n%s\r\n",
		 15 + strlen(event), event, strlen(name), name);
}

/* ---------------------------------------------------------------------------------------- */

START_TEST(test_resp2_between_connections)
{
	int s, p;

	data_dir_new();
	start_in(NULL);
	s = conn();
	p = conn();
	EXCHANGE(s, "SUBSCRIBE ch\r\nPSUBSCRIBE c* x?\r\n",
		 "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
		 "*3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:2\r\n"
		 "*3\r\n$10\r\npsubscribe\r\n$2\r\nx?\r\n:3\r\n");
	EXCHANGE(p, "PUBLISH ch hello\r\nPUBLISH xy m\r\nPUBLISH zz m\r\n", ":2\r\n:1\r\n:0\r\n");
	pushed(s, "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"
		  "*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$5\r\nhello\r\n"
		  "*4\r\n$8\r\npmessage\r\n$2\r\nx?\r\n$2\r\nxy\r\n$1\r\nm\r\n");
	EXCHANGE(s, "PING\r\nBF.ADD f k\r\n",
		 "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
		 "-ERR Can't execute 'bf.add': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
		 "QUIT / RESET are allowed in this context\r\n");
	EXCHANGE(p, "PUBSUB NUMSUB ch zz\r\nPUBSUB NUMPAT\r\nPUBSUB CHANNELS\r\n",
		 "*4\r\n$2\r\nch\r\n:1\r\n$2\r\nzz\r\n:0\r\n:2\r\n*1\r\n$2\r\nch\r\n");
	ck_assert(strstr(call(p, "INFO stats"), "\r\npubsub_channels:1\r\npubsub_patterns:2\r\n"));
	ck_assert(strstr(call(p, "CLIENT LIST"), " flags=P db=0 sub=1 psub=2 ssub=0 "));
	/* TYPE pubsub is the subscriber alone; killed, it leaves its channels and patterns. */
	ck_assert(strstr(call(p, "CLIENT LIST TYPE pubsub"), " flags=P "));
	ck_assert(!strstr(call(p, "CLIENT LIST TYPE normal"), " flags=P "));
	RX(p, "CLIENT KILL TYPE pubsub", ":1\r\n");
	CLOSED(s);
	close(s);
	for (int i = 0; i < 100; i++) {
		if (!strcmp(call(p, "PUBSUB NUMPAT"), ":0\r\n"))
			break;
		itest_sleep_ms(20);
	}
	RX(p, "PUBSUB NUMPAT", ":0\r\n");
	RX(p, "PUBSUB CHANNELS", "*0\r\n");
	RX(p, "PUBLISH ch x", ":0\r\n");
	close(p);
	stop();
}
END_TEST

START_TEST(test_resp3_pushes_before_the_reply)
{
	int s, p;
	char buf[512];

	data_dir_new();
	start_in(NULL);
	s = conn();
	p = conn();
	ck_assert(itest_send_str(s, "HELLO 3\r\n") == 0);
	ck_assert(itest_recv_until(s, buf, sizeof(buf), "$4\r\nargs\r\n*0\r\n", T) > 0);
	EXCHANGE(s, "SUBSCRIBE a\r\nPSUBSCRIBE a*\r\n",
		 ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
		 ">3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:2\r\n");
	EXCHANGE(p, "PUBLISH a hi\r\n", ":2\r\n");
	pushed(s, ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nhi\r\n"
		  ">4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$1\r\na\r\n$2\r\nhi\r\n");
	/* No restriction in RESP3; its own PUBLISH's messages come before its reply. */
	EXCHANGE(s, "PING\r\nPUBLISH a me\r\n",
		 "+PONG\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nme\r\n"
		 ">4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$1\r\na\r\n$2\r\nme\r\n:2\r\n");
	EXCHANGE(s, "UNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n",
		 ">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n"
		 ">3\r\n$11\r\nunsubscribe\r\n_\r\n:1\r\n"
		 ">3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:0\r\n");
	close(s);
	close(p);
	stop();
}
END_TEST

START_TEST(test_keyspace_events_from_every_protocol)
{
	char want[4096] = "";
	int s, r, t;
	const char *h;

	data_dir_new();
	start_in(NULL);
	s = conn();
	r = conn();
	t = conn();
	RX(r, "CONFIG GET notify-keyspace-events",
	   "*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n");
	EXCHANGE(s, "PSUBSCRIBE __keyevent@0__:*\r\n",
		 "*3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n");
	RX(r, "BF.ADD off k", ":1\r\n"); /* off by default: nothing */
	ck_assert(itest_quiet(s, 200));
	RX(r, "CONFIG SET notify-keyspace-events KEA", "+OK\r\n");
	RX(r, "CONFIG GET notify-keyspace-events",
	   "*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n");
	RX(r, "CONFIG SET notify-keyspace-events KEQ",
	   "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - "
	   "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n");
	/* RESP */
	RX(r, "BF.ADD r k", ":1\r\n");
	RX(r, "BF.ADD r k", ":0\r\n");
	/* The text protocol */
	TXT(t, "create t", "Done\n");
	TXT(t, "set t k", "Yes\n");
	TXT(t, "drop t", "Done\n");
	/* HTTP */
	h = http("PUT", "/v1/filters/h", "{\"capacity\":100,\"error_rate\":0.01}");
	ck_assert_msg(!strncmp(h, "HTTP/1.1 201 ", 13), "%s", h);
	h = http("POST", "/v1/filters/h/add", "{\"keys\":[\"a\",\"b\"]}");
	ck_assert_msg(!strncmp(h, "HTTP/1.1 200 ", 13), "%s", h);
	h = http("DELETE", "/v1/filters/h", NULL);
	ck_assert_msg(!strncmp(h, "HTTP/1.1 204 ", 13), "%s", h);
	h = http("PUT", "/v1/filters/h2", "{\"capacity\":100,\"error_rate\":0.01}");
	ck_assert_msg(!strncmp(h, "HTTP/1.1 201 ", 13), "%s", h);
	h = http("POST", "/v1/filters/h2/rename", "{\"to\":\"h3\"}");
	ck_assert_msg(!strncmp(h, "HTTP/1.1 200 ", 13), "%s", h);
	RX(r, "RENAME r r2", "+OK\r\n");
	RX(r, "EXPIRE r2 1", ":1\r\n"); /* a second: under valgrind too, not past at once */
	keyevent(want, sizeof(want), "bf.reserve", "r");
	keyevent(want, sizeof(want), "bf.add", "r");
	keyevent(want, sizeof(want), "bf.reserve", "t");
	keyevent(want, sizeof(want), "bf.add", "t");
	keyevent(want, sizeof(want), "del", "t");
	keyevent(want, sizeof(want), "bf.reserve", "h");
	keyevent(want, sizeof(want), "bf.add", "h");
	keyevent(want, sizeof(want), "del", "h");
	keyevent(want, sizeof(want), "bf.reserve", "h2");
	keyevent(want, sizeof(want), "rename_from", "h2");
	keyevent(want, sizeof(want), "rename_to", "h3");
	keyevent(want, sizeof(want), "rename_from", "r");
	keyevent(want, sizeof(want), "rename_to", "r2");
	keyevent(want, sizeof(want), "expire", "r2");
	keyevent(want, sizeof(want), "expired", "r2"); /* by the daemon's own timer */
	pushed(s, want);
	close(s);
	close(r);
	close(t);
	stop();
}
END_TEST

START_TEST(test_monitor_lines)
{
	char line[512], addr[64], big[2048];
	int m, r, t;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	data_dir_new();
	start_in(NULL);
	m = conn();
	r = conn();
	t = conn();
	EXCHANGE(m, "MONITOR\r\n", "+OK\r\n");
	RX(r, "BF.ADD f k", ":1\r\n");
	ck_assert_int_eq(getsockname(r, (struct sockaddr *)&sa, &sl), 0);
	FMT(addr, "[0 127.0.0.1:%u] \"BF.ADD\" \"f\" \"k\"\r\n", (unsigned)ntohs(sa.sin_port));
	ck_assert(itest_recv_until(m, line, sizeof(line), "\r\n", T) > 0);
	ck_assert_msg(line[0] == '+' && strstr(line, addr) && strchr(line, '.') < strchr(line, ' '),
		      "%s", esc(line));
	TXT(t, "set f a", "Yes\n");
	sl = sizeof(sa);
	ck_assert_int_eq(getsockname(t, (struct sockaddr *)&sa, &sl), 0);
	FMT(addr, "[0 127.0.0.1:%u] \"set\" \"f\" \"a\"\r\n", (unsigned)ntohs(sa.sin_port));
	ck_assert(itest_recv_until(m, line, sizeof(line), "\r\n", T) > 0);
	ck_assert_msg(strstr(line, addr), "%s", esc(line));
	/* CLIENT INFO: flags=O; its own command is shown too, after its reply. */
	ck_assert(itest_send_str(m, "CLIENT INFO\r\n") == 0);
	ck_assert(itest_recv_until(m, big, sizeof(big), "\"CLIENT\" \"INFO\"\r\n", T) > 0);
	ck_assert_msg(strstr(big, " flags=O db=0 sub=0 psub=0 ") &&
			  strstr(big, "\n\r\n+") < strstr(big, "\"CLIENT\" \"INFO\""),
		      "%s", esc(big));
	/* HTTP requests are not commands of a client: not shown. Admin commands are not. */
	RX(r, "CONFIG GET save", "*2\r\n$4\r\nsave\r\n$3\r\n5 1\r\n");
	ck_assert(itest_quiet(m, 200));
	close(m);
	close(r);
	close(t);
	stop();
}
END_TEST

/* PUBLISH ch <len bytes of 'm'>, as RESP. */
static char *publish_cmd(size_t len, size_t *n)
{
	char head[64];
	int hl = snprintf(head, sizeof(head), "*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$%zu\r\n", len);
	char *p = malloc((size_t)hl + len + 2);

	ck_assert_ptr_nonnull(p);
	memcpy(p, head, (size_t)hl);
	memset(p + hl, 'm', len);
	memcpy(p + hl + len, "\r\n", 2);
	*n = (size_t)hl + len + 2;
	return p;
}

/* Read one message of len payload bytes on channel ch from fd. */
static void read_message(int fd, size_t len)
{
	char head[64];
	int hl = snprintf(head, sizeof(head), "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$%zu\r\n", len);
	char *buf = malloc((size_t)hl + len + 2);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(itest_recv_n(fd, buf, (size_t)hl + len + 2, T),
			 (ssize_t)hl + (ssize_t)len + 2);
	ck_assert(memcmp(buf, head, (size_t)hl) == 0);
	free(buf);
}

START_TEST(test_slow_subscriber_closed_at_max_output_bytes)
{
	enum { MSG = 64 * 1024 };
	size_t n, rounds;
	char *cmd = publish_cmd(MSG, &n);
	int slow, reader, p;

	data_dir_new();
	start_in(CONF("max_output_bytes = 256k\n"));
	slow = conn();
	reader = conn();
	p = conn();
	EXCHANGE(slow, "SUBSCRIBE ch\r\n", "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
	EXCHANGE(reader, "SUBSCRIBE ch\r\n", "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
	/* Two messages a round (128 KiB: under the bound), which the reader reads each round;
	 * the slow one never reads, and once the kernel's buffers are full its messages pile up
	 * in the daemon until they pass the bound. */
	for (rounds = 0; rounds < 400; rounds++) {
		char reply[16];

		ck_assert_int_eq(itest_send(p, cmd, n), 0);
		ck_assert_int_eq(itest_send(p, cmd, n), 0);
		read_message(reader, MSG);
		read_message(reader, MSG);
		for (int k = 0; k < 2; k++) {
			ck_assert(itest_recv_n(p, reply, 4, T) == 4);
			ck_assert(reply[0] == ':' && (reply[1] == '1' || reply[1] == '2'));
		}
		if (!strcmp(call(p, "PUBSUB NUMSUB ch"), "*2\r\n$2\r\nch\r\n:1\r\n"))
			break;
	}
	ck_assert_msg(rounds < 400, "the slow subscriber was never closed");
	ck_assert(rounds > 1); /* not before its output could pass the bound */
	ck_assert(itest_log_wait(&d, "unsent output passed max_output_bytes (262144)", T));
	CLOSED(slow);
	/* The daemon serves on, and the reader got every message. */
	RX(p, "PING", "+PONG\r\n");
	ck_assert_int_eq(itest_send(p, cmd, n), 0);
	read_message(reader, MSG);
	ck_assert(itest_quiet(reader, 100));
	free(cmd);
	close(reader);
	close(p);
	stop();
}
END_TEST

START_TEST(test_idle_timeout_spares_subscribers_and_monitors)
{
	int s, m, c, p;

	data_dir_new();
	start_in(CONF("idle_timeout = 1\n"));
	s = conn();
	m = conn();
	c = conn();
	EXCHANGE(s, "SUBSCRIBE ch\r\n", "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
	EXCHANGE(m, "MONITOR\r\n", "+OK\r\n");
	EXCHANGE(c, "PING\r\n", "+PONG\r\n");
	CLOSED(c); /* idle past idle_timeout */
	itest_sleep_ms(1200);
	p = conn();
	RX(p, "PUBLISH ch x", ":1\r\n");
	pushed(s, "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n");
	ck_assert(itest_recv_until(m, (char[256]){0}, 256, "\"PUBLISH\" \"ch\" \"x\"\r\n", T) > 0);
	close(s);
	close(m);
	close(p);
	stop();
}
END_TEST

START_TEST(test_subscriptions_count_against_max_client_memory)
{
	enum { NAME = 1000, BATCH = 100 };
	char *cmd = malloc(BATCH * (NAME + 32) + 64), *reply = malloc(BATCH * (NAME + 64));
	size_t len;
	int s, p, batches;

	ck_assert(cmd && reply);
	data_dir_new();
	start_in(CONF("max_client_memory = 2m\n"));
	s = conn();
	p = conn();
	/* Batches of 100 channels of 1000 bytes (about 110 KiB of subscriptions each) until
	 * the connection is refused. */
	for (batches = 0; batches < 40; batches++) {
		char term[32];

		len = (size_t)sprintf(cmd, "*%d\r\n$9\r\nSUBSCRIBE\r\n", BATCH + 1);
		for (int i = 0; i < BATCH; i++) {
			len += (size_t)sprintf(cmd + len, "$%d\r\n", NAME);
			memset(cmd + len, 'a', NAME - 6);
			len +=
			    (size_t)sprintf(cmd + len + NAME - 6, "%06d\r\n", batches * BATCH + i) +
			    NAME - 6;
		}
		if (itest_send(s, cmd, len))
			break; /* closed already: its error was read with the last batch */
		FMT(term, ":%d\r\n", (batches + 1) * BATCH);
		itest_recv_until(s, reply, BATCH * (NAME + 64), term, T);
		if (strstr(reply, "max_client_memory"))
			break;
		ck_assert_msg(strstr(reply, term), "%s", esc(reply));
	}
	ck_assert_msg(batches > 5 && batches < 40, "refused after %d batches", batches);
	ck_assert(itest_log_wait(&d, "client buffers would pass max_client_memory", T));
	CLOSED(s);
	close(s);
	/* Its subscriptions went with it; the daemon serves on. */
	for (int i = 0; i < 100 && !strstr(call(p, "INFO stats"), "\npubsub_channels:0\r"); i++)
		itest_sleep_ms(20);
	ck_assert(strstr(call(p, "INFO stats"), "\npubsub_channels:0\r"));
	RX(p, "PING", "+PONG\r\n");
	free(cmd);
	free(reply);
	close(p);
	stop();
}
END_TEST

static Suite *pubsub_suite(void)
{
	Suite *s = suite_create("pubsub");
	TCase *t = tcase_create("pubsub");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_resp2_between_connections);
	tcase_add_test(t, test_resp3_pushes_before_the_reply);
	tcase_add_test(t, test_keyspace_events_from_every_protocol);
	tcase_add_test(t, test_monitor_lines);
	tcase_add_test(t, test_slow_subscriber_closed_at_max_output_bytes);
	tcase_add_test(t, test_idle_timeout_spares_subscribers_and_monitors);
	tcase_add_test(t, test_subscriptions_count_against_max_client_memory);
	suite_add_tcase(s, t);
	return s;
}

CHECK_MAIN(pubsub_suite)
