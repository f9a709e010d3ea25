/* SPDX-License-Identifier: MIT */
/*
 * Replication (issue 34, doc/replication.md) between real daemons: a replica started with
 * `replicaof` gets a full image of every filter, equal byte for byte to the primary's
 * (BF.SCANDUMP), then every change made on the primary over RESP, text and HTTP (creates,
 * adds, counting deletes, EXPIRE, PERSIST, RENAME, DEL, FLUSHALL, MULTI/EXEC); WAIT counts the
 * replicas that acknowledged; a replica refuses clients' changes with exact bytes on all three
 * protocols; INFO replication and ROLE in Redis's exact format on both sides; REPLICAOF's
 * replies and promotion (REPLICAOF NO ONE: a new replid, the old as replid2); a replica
 * restarted keeps its data (its own log) and catches up; a primary killed with SIGKILL leaves
 * on the replica every add a WAIT acknowledged, and the replica reports its link down and
 * tries again. The limits (tcase "limits"): a full sync longer than idle_timeout and
 * repl_timeout, a paged-out filter changed while its image is written, repl_output_bytes during
 * an image and for a partial sync's gap, a record the replica cannot apply, a WAIT under way
 * when its daemon becomes a replica.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#define ITEST_T		  10000
#define ITEST_STOP_MS	  30000
#define ITEST_START_READY 1
#include "tests/integration/itest_case.h"

/* The image's child pauses this many ms before each filter (server/repl_impl.h). */
#define IMAGE_DELAY_ENV "BLOSSOMD_REPL_IMAGE_DELAY_MS"

/* The replica (d is the primary). */
static struct itest_daemon rd;

static void rstart(const char *conf, const char *const *extra)
{
	int rc = itest_start(&rd, conf, extra);

	if (rc)
		fprintf(stderr, "replica log:\n%s\n", itest_log(&rd));
	ck_assert_msg(rc == 0, "replica did not start: %s", strerror(-rc));
	ck_assert_msg(itest_log_wait(&rd, "ready (pid ", T), "%s", itest_log(&rd));
}

static void rstop(void)
{
	int st = itest_stop(&rd, ITEST_STOP_MS);

	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "replica did not exit 0 after SIGTERM (wait status %d)", st);
}

static int rconn(void)
{
	int fd = itest_connect(rd.port);

	ck_assert_msg(fd >= 0, "connect: %s", strerror(-fd));
	return fd;
}

/* The replica's config: follow d (with a priority INFO shows). */
static const char *follow_conf(void)
{
	static char conf[256];

	FMT(conf, "[blossomd]\nreplicaof = 127.0.0.1 %u\nreplica_priority = 7\n", (unsigned)d.port);
	return conf;
}

/* One CRLF line of fd, NUL-terminated, without its CRLF. */
static void line(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	for (;;) {
		ck_assert_uint_lt(n + 1, cap);
		ck_assert_int_eq(itest_recv_n(fd, buf + n, 1, T), 1);
		if (++n >= 2 && buf[n - 2] == '\r' && buf[n - 1] == '\n')
			break;
	}
	buf[n - 2] = 0;
}

/* The bytes of name's BF.SCANDUMP chunks after the first (its body: the first is the header,
 * which holds the LSN of the filter's last change in its own log) into out; the length. */
static size_t dump(int fd, const char *name, unsigned char *out, size_t cap)
{
	long long iter = 0;
	size_t len = 0;
	char head[64];

	do {
		char req[256], it[24];

		snprintf(it, sizeof(it), "%lld", iter);
		FMT(req, "*3\r\n$11\r\nBF.SCANDUMP\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(name),
		    name, strlen(it), it);
		ck_assert_int_eq(itest_send_str(fd, req), 0);
		line(fd, head, sizeof(head));
		EQ(head, "*2");
		line(fd, head, sizeof(head));
		ck_assert_msg(head[0] == ':', "%s", head);
		iter = atoll(head + 1);
		line(fd, head, sizeof(head));
		ck_assert_msg(head[0] == '$', "%s", head);
		long n = atol(head + 1);
		if (n < 0)
			break;
		ck_assert_uint_lt(len + (size_t)n + 2, cap);
		ck_assert_int_eq(itest_recv_n(fd, out + len, (size_t)n + 2, T), n + 2);
		if (iter > 1)
			len += (size_t)n;
	} while (iter);
	return len;
}

/* name is the same on the primary (pfd) and the replica (rfd): its digest, and its body byte
 * for byte. */
static void same(int pfd, int rfd, const char *name)
{
	char cmd[256], dg[128];

	FMT(cmd, "DEBUG DIGEST-VALUE %s", name);
	snprintf(dg, sizeof(dg), "%s", call(pfd, cmd));
	ck_assert_msg(strlen(dg) == 4 + 1 + 40 + 2 && strncmp(dg + 5, "0000000000", 10), "%s", dg);
	EQ(call(rfd, cmd), dg);

	static unsigned char a[1 << 20], b[1 << 20];
	size_t na = dump(pfd, name, a, sizeof(a)), nb = dump(rfd, name, b, sizeof(b));

	size_t at = 0;

	while (at < na && at < nb && a[at] == b[at])
		at++;
	ck_assert_msg(na == nb && at == na,
		      "%s differs on the replica (%zu, %zu bytes; first at byte %zu)", name, na, nb,
		      at);
}

/* The primary's WAIT for one replica answers 1. */
static void synced(int pfd)
{
	char cmd[64];

	FMT(cmd, "WAIT 1 %d", T);
	RX(pfd, cmd, ":1\r\n");
}

/* A primary with filters from all three protocols, and a replica following it. */
static void pair_up(int *pfd, int *rfd)
{
	start(NULL, NULL);
	*pfd = conn();
	RX(*pfd, "BF.RESERVE r1 0.01 1000", "+OK\r\n");
	RX(*pfd, "BF.MADD r1 a b c", "*3\r\n:1\r\n:1\r\n:1\r\n");
	RX(*pfd, "BF.RESERVE cnt 0.01 1000 COUNTING", "+OK\r\n");
	RX(*pfd, "BF.MADD cnt x y", "*2\r\n:1\r\n:1\r\n");
	RX(*pfd, "BF.DEL cnt y", ":1\r\n");
	RX(*pfd, "PEXPIRE r1 3600000", ":1\r\n");
	int tfd = conn();
	TXT(tfd, "create t1 capacity=1000 prob=0.01", "Done\n");
	TXT(tfd, "set t1 k1", "Yes\n");
	close(tfd);
	ck_assert_ptr_nonnull(strstr(http("PUT", "/v1/filters/h1",
					  "{\"capacity\":1000,"
					  "\"error_rate\":0.01}"),
				     " 201 "));
	ck_assert_ptr_nonnull(strstr(http("POST", "/v1/filters/h1/add", "{\"keys\":[\"q\"]}"),
				     "{\"results\":[true]}"));
	rstart(follow_conf(), NULL);
	*rfd = rconn();
	synced(*pfd);
}

/* The image: every filter equal byte for byte; then live changes from all three protocols. */
START_TEST(test_image_then_stream)
{
	int pfd, rfd;

	pair_up(&pfd, &rfd);
	same(pfd, rfd, "r1");
	same(pfd, rfd, "cnt");
	same(pfd, rfd, "t1");
	same(pfd, rfd, "h1");
	RX(rfd, "BF.MEXISTS cnt x y", "*2\r\n:1\r\n:0\r\n");
	/* Its expiry came as an absolute time. */
	long long pt = atoll(call(pfd, "PEXPIRETIME r1") + 1), rt;
	rt = atoll(call(rfd, "PEXPIRETIME r1") + 1);
	ck_assert_int_eq(pt, rt);
	RX(rfd, "DBSIZE", ":4\r\n");

	/* Live: RESP, text, HTTP. */
	RX(pfd, "BF.ADD r1 live-resp", ":1\r\n");
	int tfd = conn();
	TXT(tfd, "set t1 live-text", "Yes\n");
	TXT(tfd, "create t2", "Done\n");
	close(tfd);
	ck_assert_ptr_nonnull(
	    strstr(http("POST", "/v1/filters/h1/add", "{\"keys\":[\"live-http\"]}"), "[true]"));
	RX(pfd, "BF.ADD cnt z", ":1\r\n");
	RX(pfd, "BF.DEL cnt x", ":1\r\n");
	synced(pfd);
	RX(rfd, "BF.EXISTS r1 live-resp", ":1\r\n");
	RX(rfd, "BF.EXISTS t1 live-text", ":1\r\n");
	RX(rfd, "BF.EXISTS h1 live-http", ":1\r\n");
	RX(rfd, "BF.MEXISTS cnt x y z", "*3\r\n:0\r\n:0\r\n:1\r\n");
	RX(rfd, "EXISTS t2", ":1\r\n");
	same(pfd, rfd, "r1");
	same(pfd, rfd, "cnt");
	same(pfd, rfd, "t1");
	same(pfd, rfd, "h1");
	same(pfd, rfd, "t2");

	/* Keyspace changes and a transaction. */
	RX(pfd, "PERSIST r1", ":1\r\n");
	RX(pfd, "EXPIRE t1 5000", ":1\r\n");
	RX(pfd, "RENAME h1 h2", "+OK\r\n");
	RX(pfd, "DEL t2", ":1\r\n");
	RX(pfd, "MULTI", "+OK\r\n");
	RX(pfd, "BF.ADD r1 in-txn", "+QUEUED\r\n");
	RX(pfd, "BF.RESERVE tx 0.01 100", "+QUEUED\r\n");
	RX(pfd, "BF.ADD tx one", "+QUEUED\r\n");
	RX(pfd, "EXEC", "*3\r\n:1\r\n+OK\r\n:1\r\n");
	synced(pfd);
	RX(rfd, "TTL r1", ":-1\r\n");
	pt = atoll(call(pfd, "PEXPIRETIME t1") + 1);
	rt = atoll(call(rfd, "PEXPIRETIME t1") + 1);
	ck_assert_int_eq(pt, rt);
	RX(rfd, "EXISTS h1 h2 t2", ":1\r\n");
	RX(rfd, "BF.EXISTS h2 live-http", ":1\r\n");
	RX(rfd, "BF.EXISTS r1 in-txn", ":1\r\n");
	RX(rfd, "BF.EXISTS tx one", ":1\r\n");
	same(pfd, rfd, "tx");
	same(pfd, rfd, "h2");

	RX(pfd, "FLUSHALL", "+OK\r\n");
	synced(pfd);
	RX(rfd, "DBSIZE", ":0\r\n");
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A replica refuses clients' changes on every protocol; reads are served. */
START_TEST(test_read_only)
{
	int pfd, rfd;

	pair_up(&pfd, &rfd);
	RX(rfd, "BF.ADD r1 nope", "-READONLY You can't write against a read only replica.\r\n");
	RX(rfd, "DEL r1", "-READONLY You can't write against a read only replica.\r\n");
	RX(rfd, "FLUSHALL", "-READONLY You can't write against a read only replica.\r\n");
	RX(rfd, "MULTI", "+OK\r\n");
	RX(rfd, "BF.ADD r1 nope", "-READONLY You can't write against a read only replica.\r\n");
	RX(rfd, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
	RX(rfd, "BF.EXISTS r1 a", ":1\r\n");
	int tfd = rconn();
	TXT(tfd, "set t1 nope", "Client Error: Read only replica\n");
	TXT(tfd, "create t9", "Client Error: Read only replica\n");
	TXT(tfd, "check t1 k1", "Yes\n");
	close(tfd);
	itest_case_bind(&rd, T);
	const char *h = http("POST", "/v1/filters/h1/add", "{\"keys\":[\"nope\"]}");
	ck_assert_msg(strstr(h, "HTTP/1.1 409 ") && strstr(h, "\"type\":\"read_only_replica\""),
		      "%s", h);
	h = http("DELETE", "/v1/filters/h1", NULL);
	ck_assert_msg(strstr(h, "HTTP/1.1 409 "), "%s", h);
	h = http("GET", "/v1/filters/h1/keys/q", NULL);
	ck_assert_msg(strstr(h, "HTTP/1.1 200 ") && strstr(h, "\"present\":true"), "%s", h);
	itest_case_bind(&d, T);
	synced(pfd);
	RX(rfd, "BF.EXISTS r1 nope", ":0\r\n");
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* The value of field in an INFO reply (static), "" if absent. */
static const char *field(const char *info, const char *name)
{
	static char v[128];
	char key[64];
	const char *p;

	FMT(key, "\n%s:", name);
	p = strstr(info, key);
	v[0] = 0;
	if (p) {
		p += strlen(key);
		size_t n = strcspn(p, "\r");
		snprintf(v, sizeof(v), "%.*s", (int)n, p);
	}
	return v;
}

/* INFO replication and ROLE, exactly as Redis 7.0 words them, on both sides. */
START_TEST(test_info_and_role)
{
	int pfd, rfd;
	char want[2048], id[64], off[32];

	pair_up(&pfd, &rfd);
	const char *pi = call(pfd, "INFO replication");
	snprintf(id, sizeof(id), "%s", field(pi, "master_replid"));
	snprintf(off, sizeof(off), "%s", field(pi, "master_repl_offset"));
	ck_assert_uint_eq(strlen(id), 40);
	FMT(want,
	    "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"
	    "slave0:ip=127.0.0.1,port=%u,state=online,offset=%s,lag=0\r\n"
	    "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
	    "master_replid2:0000000000000000000000000000000000000000\r\n"
	    "master_repl_offset:%s\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\n"
	    "repl_backlog_size:16777216\r\nrepl_backlog_first_byte_offset:%lld\r\n"
	    "repl_backlog_histlen:0\r\n",
	    (unsigned)rd.port, off, id, off, atoll(off) + 1);
	char bulk[2200];
	FMT(bulk, "$%zu\r\n%s\r\n", strlen(want), want);
	EQ(pi, bulk);
	FMT(want,
	    "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:%u\r\n"
	    "master_link_status:up\r\nmaster_last_io_seconds_ago:0\r\n"
	    "master_sync_in_progress:0\r\nslave_read_repl_offset:%s\r\n"
	    "slave_repl_offset:%s\r\nslave_priority:7\r\nslave_read_only:1\r\n"
	    "replica_announced:1\r\nconnected_slaves:0\r\n"
	    "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
	    "master_replid2:0000000000000000000000000000000000000000\r\n"
	    "master_repl_offset:%s\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
	    "repl_backlog_size:16777216\r\nrepl_backlog_first_byte_offset:0\r\n"
	    "repl_backlog_histlen:0\r\n",
	    (unsigned)d.port, off, off, id, off);
	FMT(bulk, "$%zu\r\n%s\r\n", strlen(want), want);
	EQ(call(rfd, "INFO replication"), bulk);

	char port[16];
	FMT(port, "%u", (unsigned)rd.port);
	FMT(want,
	    "*3\r\n$6\r\nmaster\r\n:%s\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n"
	    "$%zu\r\n%s\r\n",
	    off, strlen(port), port, strlen(off), off);
	RX(pfd, "ROLE", want);
	FMT(want, "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:%u\r\n$9\r\nconnected\r\n:%s\r\n",
	    (unsigned)d.port, off);
	RX(rfd, "ROLE", want);
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* REPLICAOF's replies, and promotion: a new replid, the old one kept as replid2. */
START_TEST(test_replicaof_and_promotion)
{
	int pfd, rfd;
	char cmd[128], id[64], off[32], want[64];

	pair_up(&pfd, &rfd);
	FMT(cmd, "REPLICAOF 127.0.0.1 %u", (unsigned)d.port);
	RX(rfd, cmd, "+OK Already connected to specified master\r\n");
	FMT(cmd, "SLAVEOF 127.0.0.1 %u", (unsigned)d.port);
	RX(rfd, cmd, "+OK Already connected to specified master\r\n");
	RX(rfd, "REPLICAOF 127.0.0.1 70000", "-ERR Invalid master port\r\n");
	RX(rfd, "REPLICAOF 127.0.0.1 x", "-ERR Invalid master port\r\n");
	RX(rfd, "REPLICAOF 127.0.0.1",
	   "-ERR wrong number of arguments for 'replicaof' command\r\n");
	RX(rfd, "WAIT 1 0",
	   "-ERR WAIT cannot be used with replica instances. Please also note that since Redis "
	   "4.0 if a replica is configured to be writable (which is not the default) writes to "
	   "replicas are just local and are not propagated.\r\n");
	const char *ri = call(rfd, "INFO replication");
	snprintf(id, sizeof(id), "%s", field(ri, "master_replid"));
	snprintf(off, sizeof(off), "%s", field(ri, "slave_repl_offset"));
	RX(rfd, "REPLICAOF NO ONE", "+OK\r\n");
	RX(rfd, "REPLICAOF NO ONE", "+OK\r\n");
	ri = call(rfd, "INFO replication");
	EQ(field(ri, "role"), "master");
	EQ(field(ri, "master_replid2"), id);
	ck_assert_str_ne(field(ri, "master_replid"), id);
	FMT(want, "%lld", atoll(off) + 1);
	EQ(field(ri, "second_repl_offset"), want);
	/* Promoted: it takes writes, and keeps what it had. */
	RX(rfd, "BF.ADD r1 after", ":1\r\n");
	RX(rfd, "BF.EXISTS r1 a", ":1\r\n");
	ck_assert_ptr_nonnull(strstr(call(pfd, "INFO replication"), "connected_slaves:0\r\n"));
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* WAIT: Redis's argument errors, 0 replicas at once for 0, the timeout honoured. */
START_TEST(test_wait)
{
	start(NULL, NULL);
	int pfd = conn();
	RX(pfd, "WAIT 0 0", ":0\r\n");
	RX(pfd, "WAIT x 0", "-ERR value is not an integer or out of range\r\n");
	RX(pfd, "WAIT 1 -1", "-ERR timeout is negative\r\n");
	RX(pfd, "BF.ADD f a", ":1\r\n");
	int64_t t0 = itest_now_ms();
	RX(pfd, "WAIT 1 300", ":0\r\n");
	ck_assert_int_ge(itest_now_ms() - t0, 290);
	/* The loop serves others meanwhile. */
	int other = conn();
	ck_assert_int_eq(itest_send_str(pfd, "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n800\r\n"), 0);
	t0 = itest_now_ms();
	RX(other, "PING", "+PONG\r\n");
	ck_assert_int_lt(itest_now_ms() - t0, 500);
	char buf[8];
	ck_assert_int_eq(itest_recv_n(pfd, buf, 4, T), 4);
	ck_assert(!memcmp(buf, ":0\r\n", 4));
	close(other);
	/* In a transaction it answers at once (an EXEC is never held). */
	RX(pfd, "MULTI", "+OK\r\n");
	RX(pfd, "BF.ADD f b", "+QUEUED\r\n");
	RX(pfd, "WAIT 1 5000", "+QUEUED\r\n");
	t0 = itest_now_ms();
	RX(pfd, "EXEC", "*2\r\n:1\r\n:0\r\n");
	ck_assert_int_lt(itest_now_ms() - t0, 2500);
	close(pfd);
	stop();
}
END_TEST

/* What a replica acknowledged (WAIT 1 answered 1) survives its SIGKILL: it logs a record before
 * it acknowledges it. */
START_TEST(test_replica_killed_keeps_acked)
{
	int pfd, rfd, st;
	const char *extra[] = {"--data-dir", case_dir, NULL};

	data_dir_new();
	start(NULL, NULL);
	pfd = conn();
	RX(pfd, "BF.RESERVE k 0.001 10000", "+OK\r\n");
	rstart(follow_conf(), extra);
	synced(pfd);
	resp_add_keys(pfd, "k", "acked", 1000);
	RX(pfd, "BF.RESERVE k2 0.01 100 COUNTING", "+OK\r\n");
	RX(pfd, "BF.ADD k2 x", ":1\r\n");
	synced(pfd);
	ck_assert_int_eq(itest_signal(&rd, SIGKILL), 0);
	st = itest_wait_exit(&rd, T);
	ck_assert_msg(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
	rd.status = st;
	itest_stop(&rd, T);
	/* Alone, as a primary, from its own files. */
	rstart(NULL, extra);
	rfd = rconn();
	ck_assert_uint_eq(resp_count_keys(rfd, "k", "acked", 1000), 1000);
	RX(rfd, "BF.EXISTS k2 x", ":1\r\n");
	close(rfd);
	close(pfd);
	rstop();
	stop();
}
END_TEST

/* A replica restarted keeps its data (its own log and checkpoints) and catches up. */
START_TEST(test_replica_restart)
{
	int pfd, rfd;
	const char *extra[] = {"--data-dir", case_dir, NULL};

	data_dir_new();
	start(NULL, NULL);
	pfd = conn();
	RX(pfd, "BF.RESERVE big 0.0001 100000", "+OK\r\n");
	resp_add_keys(pfd, "big", "a", 2000);
	rstart(follow_conf(), extra);
	rfd = rconn();
	synced(pfd);
	resp_add_keys(pfd, "big", "b", 1000);
	synced(pfd);
	close(rfd);
	rstop();
	/* Alone, as a primary: what it had is there, from its own files. */
	rstart(NULL, extra);
	rfd = rconn();
	ck_assert_uint_eq(resp_count_keys(rfd, "big", "a", 2000), 2000);
	ck_assert_uint_eq(resp_count_keys(rfd, "big", "b", 1000), 1000);
	close(rfd);
	rstop();
	/* Changes while it was away reach it when it follows again. */
	resp_add_keys(pfd, "big", "c", 1000);
	RX(pfd, "BF.RESERVE later 0.01 100", "+OK\r\n");
	rstart(follow_conf(), extra);
	rfd = rconn();
	synced(pfd);
	ck_assert_uint_eq(resp_count_keys(rfd, "big", "c", 1000), 1000);
	RX(rfd, "EXISTS later", ":1\r\n");
	same(pfd, rfd, "big");
	close(rfd);
	close(pfd);
	rstop();
	stop();
}
END_TEST

/* The primary killed: every add a WAIT acknowledged is on the replica, whose link is reported
 * down, and which tries again (and follows the primary once it is back). */
START_TEST(test_primary_killed)
{
	int pfd, rfd;
	char cmd[64];

	pair_up(&pfd, &rfd);
	FMT(cmd, "WAIT 1 %d", T);
	for (int i = 0; i < 300; i++) {
		char add[64];
		FMT(add, "BF.ADD r1 acked:%d", i);
		RX(pfd, add, ":1\r\n");
		RX(pfd, cmd, ":1\r\n");
	}
	kill9();
	close(pfd);
	ck_assert_uint_eq(resp_count_keys(rfd, "r1", "acked", 300), 300);
	ck_assert(itest_log_wait(&rd, "retrying", T));
	const char *ri = call(rfd, "INFO replication");
	EQ(field(ri, "master_link_status"), "down");
	EQ(field(ri, "master_last_io_seconds_ago"), "-1");
	ck_assert_str_ne(field(ri, "master_link_down_since_seconds"), "-1");
	ck_assert_str_ne(field(ri, "master_link_down_since_seconds"), "");
	ck_assert_ptr_nonnull(strstr(call(rfd, "ROLE"), "$7\r\nconnect"));
	close(rfd);
	rstop();
}
END_TEST

/* A filter the primary paged out (bloomd's close) is in the image, read from its file. */
START_TEST(test_paged_out_in_image)
{
	start(NULL, NULL);
	int pfd = conn(), tfd = conn();
	TXT(tfd, "create pg capacity=10000 prob=0.001", "Done\n");
	TXT(tfd, "bulk pg k1 k2 k3", "Yes Yes Yes\n");
	TXT(tfd, "close pg", "Done\n");
	ck_assert_ptr_nonnull(strstr(txt(tfd, "info pg"), "in_memory 0\n"));
	rstart(follow_conf(), NULL);
	int rfd = rconn();
	synced(pfd);
	RX(rfd, "BF.MEXISTS pg k1 k2 k3 k4", "*4\r\n:1\r\n:1\r\n:1\r\n:0\r\n");
	ck_assert_ptr_nonnull(strstr(txt(tfd, "info pg"), "in_memory 0\n"));
	same(pfd, rfd, "pg");
	close(tfd);
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* Close the replica's link from the primary's side (CLIENT KILL of its address). */
static void cut_link(int pfd)
{
	char cmd[128];
	const char *list = call(pfd, "CLIENT LIST"), *p = strstr(list, "cmd=replconf");

	ck_assert_msg(p, "%s", list);
	while (p > list && p[-1] != '\n')
		p--;
	p = strstr(p, "addr=");
	ck_assert_ptr_nonnull(p);
	FMT(cmd, "CLIENT KILL %.*s", (int)strcspn(p + 5, " "), p + 5);
	RX(pfd, cmd, "+OK\r\n");
}

/* How many times needle is in the daemon's log. */
static int log_count(const struct itest_daemon *x, const char *needle)
{
	int n = 0;

	for (const char *p = itest_log(x); (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A link lost and made again goes on from the replica's offset (+CONTINUE) while the backlog
 * holds it: the changes made meanwhile arrive, and no image is sent again. */
START_TEST(test_partial_sync)
{
	int pfd, rfd;

	pair_up(&pfd, &rfd);
	RX(pfd, "BF.RESERVE p 0.001 10000", "+OK\r\n");
	resp_add_keys(pfd, "p", "before", 500);
	synced(pfd);
	cut_link(pfd);
	resp_add_keys(pfd, "p", "during", 500);
	RX(pfd, "MULTI", "+OK\r\n");
	RX(pfd, "BF.ADD p txn", "+QUEUED\r\n");
	RX(pfd, "DEL t1", "+QUEUED\r\n");
	RX(pfd, "EXEC", "*2\r\n:1\r\n:1\r\n");
	synced(pfd);
	ck_assert(itest_log_wait(&d, "partial sync from offset", T));
	ck_assert(itest_log_wait(&rd, "replication: partial sync from", T));
	ck_assert_int_eq(log_count(&d, "full sync from"), 1);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "during", 500), 500);
	RX(rfd, "BF.EXISTS p txn", ":1\r\n");
	RX(rfd, "EXISTS t1", ":0\r\n");
	same(pfd, rfd, "p");
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A small backlog that has dropped its oldest records many times over still gives a partial
 * sync for what it holds. */
START_TEST(test_partial_after_wrap)
{
	start(CONF("repl_backlog_size = 64k\n"), NULL);
	int pfd = conn();
	RX(pfd, "BF.RESERVE p 0.001 100000", "+OK\r\n");
	rstart(follow_conf(), NULL);
	int rfd = rconn();
	synced(pfd);
	/* 40000 keys: 640 KB of records through a 64 KiB backlog. */
	resp_add_keys(pfd, "p", "wrap", 40000);
	synced(pfd);
	cut_link(pfd);
	resp_add_keys(pfd, "p", "after", 100);
	synced(pfd);
	ck_assert(itest_log_wait(&d, "partial sync from offset", T));
	ck_assert_int_eq(log_count(&d, "full sync from"), 1);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "after", 100), 100);
	same(pfd, rfd, "p");
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A backlog that no longer holds the replica's offset: a full sync again. */
START_TEST(test_backlog_passed)
{
	const char *conf = CONF("repl_backlog_size = 4k\n");
	char cmd[64];

	start(conf, NULL);
	int pfd = conn();
	RX(pfd, "BF.RESERVE p 0.001 10000", "+OK\r\n");
	rstart(follow_conf(), NULL);
	int rfd = rconn();
	synced(pfd);
	cut_link(pfd);
	/* One record of 500 keys (8000 bytes of hashes) passes the backlog's 4 KiB. */
	resp_add_keys(pfd, "p", "during", 500);
	synced(pfd);
	/* The replica acknowledged the add: it synced again, in full. */
	ck_assert_int_eq(log_count(&d, "full sync from"), 2);
	ck_assert_int_eq(log_count(&d, "partial sync"), 0);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "during", 500), 500);
	FMT(cmd, "%s", field(call(pfd, "INFO replication"), "repl_backlog_size"));
	EQ(cmd, "4096");
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A replica whose primary is not there: its link is down from the start (Redis's -1s), it
 * tries again each second, and serves reads meanwhile. */
START_TEST(test_primary_absent)
{
	uint16_t port;
	char conf[128], want[512];

	ck_assert_int_eq(itest_free_port(&port), 0);
	FMT(conf, "[blossomd]\nreplicaof = 127.0.0.1 %u\n", (unsigned)port);
	rstart(conf, NULL);
	int rfd = rconn();
	ck_assert(itest_log_wait(&rd, "retrying", T));
	const char *ri = call(rfd, "INFO replication");
	FMT(want,
	    "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:%u\r\n"
	    "master_link_status:down\r\nmaster_last_io_seconds_ago:-1\r\n"
	    "master_sync_in_progress:0\r\nslave_read_repl_offset:0\r\nslave_repl_offset:0\r\n"
	    "master_link_down_since_seconds:-1\r\nslave_priority:100\r\n",
	    (unsigned)port);
	ck_assert_msg(strstr(ri, want), "%s", ri);
	const char *role = call(rfd, "ROLE");
	ck_assert_msg(strstr(role, "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n") &&
			  strstr(role, "\r\n:-1\r\n"),
		      "%s", role);
	RX(rfd, "DBSIZE", ":0\r\n");
	RX(rfd, "BF.ADD f a", "-READONLY You can't write against a read only replica.\r\n");
	close(rfd);
	rstop();
}
END_TEST

/* Until needle is in x's log n times (polled: the log is a file), up to ms. */
static bool log_wait_count(const struct itest_daemon *x, const char *needle, int n, int ms)
{
	for (int64_t t0 = itest_now_ms(); log_count(x, needle) < n; usleep(20000))
		if (itest_now_ms() - t0 > ms)
			return false;
	return true;
}

/* Start the primary with its image's child pausing delay_ms before each filter. */
static void start_slow_image(const char *conf, const char *delay_ms)
{
	ck_assert_int_eq(setenv(IMAGE_DELAY_ENV, delay_ms, 1), 0);
	start(conf, NULL);
	unsetenv(IMAGE_DELAY_ENV);
}

/* The replica following d, with this repl_timeout. */
static const char *follow_conf_timeout(unsigned repl_timeout)
{
	static char conf[256];

	FMT(conf, "[blossomd]\nreplicaof = 127.0.0.1 %u\nrepl_timeout = %u\n", (unsigned)d.port,
	    repl_timeout);
	return conf;
}

/* A full sync longer than the primary's idle_timeout (1 s; 2 filters, 2.5 s each) is not cut
 * by it, nor by the replica's repl_timeout (2 s) while the image streams in (the child pings
 * while it has nothing to write): one full sync. */
START_TEST(test_long_image_not_idle)
{
	char name[16];

	start_slow_image(NULL, "2500");
	int pfd = conn();
	for (int i = 0; i < 2; i++) {
		char cmd[64];

		FMT(name, "f%d", i);
		FMT(cmd, "BF.RESERVE %s 0.01 1000", name);
		RX(pfd, cmd, "+OK\r\n");
		resp_add_keys(pfd, name, "k", 50);
	}
	/* Set now: a client's first command on a slow (valgrind) start could find it idle. */
	RX(pfd, "CONFIG SET timeout 1", "+OK\r\n");
	close(pfd); /* idle_timeout would close it meanwhile */
	rstart(follow_conf_timeout(2), NULL);
	ck_assert_msg(itest_log_wait(&rd, "image loaded; following", 3 * T), "%s\n%s",
		      itest_log(&d), itest_log(&rd));
	pfd = conn();
	int rfd = rconn();
	synced(pfd);
	ck_assert_int_eq(log_count(&d, "full sync from"), 1);
	ck_assert_int_eq(log_count(&rd, "retrying"), 0);
	for (int i = 0; i < 2; i++) {
		FMT(name, "f%d", i);
		ck_assert_uint_eq(resp_count_keys(rfd, name, "k", 50), 50);
	}
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A counting filter paged out when the image is forked, then paged in, changed and paged out
 * again before the child reads its file: that image fails and the replica syncs again, rather
 * than get the change twice (in the image and in the stream: its counters doubled). */
START_TEST(test_paged_out_changed_during_image)
{
	start_slow_image(NULL, "2500");
	int pfd = conn(), tfd = conn();
	RX(pfd, "BF.RESERVE cx 0.01 1000 COUNTING", "+OK\r\n");
	RX(pfd, "BF.ADD cx k1", ":1\r\n");
	TXT(tfd, "close cx", "Done\n");
	rstart(follow_conf(), NULL);
	ck_assert(itest_log_wait(&d, "full sync from offset", T));
	/* Within the child's pause: paged in, a change, paged out again. */
	RX(pfd, "BF.ADD cx k2", ":1\r\n");
	TXT(tfd, "close cx", "Done\n");
	ck_assert_msg(itest_log_wait(&rd, "image loaded; following", 3 * T), "%s", itest_log(&rd));
	int rfd = rconn();
	synced(pfd);
	RX(rfd, "BF.MEXISTS cx k1 k2 k3", "*3\r\n:1\r\n:1\r\n:0\r\n");
	same(pfd, rfd, "cx");
	ck_assert_int_eq(log_count(&d, "a paged-out filter changed"), 1);
	ck_assert_int_eq(log_count(&d, "full sync from"), 2);
	/* Counted once: one delete leaves none. */
	RX(pfd, "BF.DEL cx k2", ":1\r\n");
	synced(pfd);
	RX(rfd, "BF.EXISTS cx k2", ":0\r\n");
	close(tfd);
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* Records logged during a full sync are held for the replica within repl_output_bytes, not a
 * client's max_output_bytes (64 KiB here: 80 KB held would have closed the link once online,
 * and a full sync followed); past repl_output_bytes the link is dropped, and the replica
 * syncs again. */
START_TEST(test_image_output_bound)
{
	start_slow_image(CONF("max_output_bytes = 64k\n"), "1500");
	int pfd = conn();
	RX(pfd, "BF.RESERVE p 0.001 100000", "+OK\r\n");
	rstart(follow_conf(), NULL);
	ck_assert(itest_log_wait(&d, "full sync from offset", T));
	/* 5000 keys: 80 KB of hashes logged while the child pauses. */
	resp_add_keys(pfd, "p", "during", 5000);
	ck_assert_msg(itest_log_wait(&rd, "image loaded; following", 3 * T), "%s", itest_log(&rd));
	int rfd = rconn();
	synced(pfd);
	ck_assert_int_eq(log_count(&d, "full sync from"), 1);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "during", 5000), 5000);
	close(rfd);
	rstop();

	/* At its edge: 64 KiB, passed during the image. */
	RX(pfd, "CONFIG SET repl_output_bytes 64k", "+OK\r\n");
	rstart(follow_conf(), NULL);
	ck_assert(log_wait_count(&d, "full sync from offset", 2, T));
	resp_add_keys(pfd, "p", "more", 5000);
	ck_assert_msg(itest_log_wait(&d, "passed repl_output_bytes", 3 * T), "%s", itest_log(&d));
	RX(pfd, "CONFIG SET repl_output_bytes 0", "+OK\r\n");
	ck_assert_msg(itest_log_wait(&rd, "image loaded; following", 3 * T), "%s", itest_log(&rd));
	rfd = rconn();
	synced(pfd);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "more", 5000), 5000);
	/* (BF.SCANDUMP's chunks would pass this primary's max_output_bytes.) */
	char dg[128];
	FMT(dg, "%s", call(pfd, "DEBUG DIGEST-VALUE p"));
	RX(rfd, "DEBUG DIGEST-VALUE p", dg);
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A partial sync whose gap is more than repl_output_bytes is made a full sync: sent, it would
 * pass the bound at once (before, with max_output_bytes, +CONTINUE and a close, forever). */
START_TEST(test_partial_gap_too_large)
{
	start(CONF("repl_backlog_size = 1m\nrepl_output_bytes = 64k\nmax_output_bytes = 64k\n"),
	      NULL);
	int pfd = conn();
	RX(pfd, "BF.RESERVE p 0.001 100000", "+OK\r\n");
	rstart(follow_conf(), NULL);
	int rfd = rconn();
	synced(pfd);
	cut_link(pfd);
	resp_add_keys(pfd, "p", "gap", 5000);
	synced(pfd);
	ck_assert(itest_log_wait(&d, "more than repl_output_bytes; a full sync instead", T));
	ck_assert_int_eq(log_count(&d, "full sync from"), 2);
	ck_assert_int_eq(log_count(&d, "bytes of the backlog)"), 0);
	ck_assert_uint_eq(resp_count_keys(rfd, "p", "gap", 5000), 5000);
	close(pfd);
	close(rfd);
	rstop();
	stop();
}
END_TEST

/* A listening socket on 127.0.0.1 (a primary played by the test); its port in *port. */
static int fake_listen(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The bulk string at *p (end: where the bytes read end) into out; *p past it. False if it has
 * not all arrived yet. */
static bool bulk_at(const char **p, const char *end, char *out, size_t cap)
{
	const char *q = *p, *nl = memchr(q, '\n', (size_t)(end - q));

	if (!nl || *q != '$')
		return false;
	size_t n = (size_t)atol(q + 1);
	if ((size_t)(end - (nl + 1)) < n + 2)
		return false;
	ck_assert_uint_lt(n, cap);
	memcpy(out, nl + 1, n);
	out[n] = 0;
	*p = nl + 1 + n + 2;
	return true;
}

/* The replica's next connection, read up to the end of its PSYNC: that command's two
 * arguments. */
static int fake_accept(int lfd, char *replid, size_t idcap, char *off, size_t offcap)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	static char buf[4096];
	size_t len = 0;

	ck_assert_int_eq(poll(&p, 1, 3 * T), 1);
	int fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	for (;;) {
		const char *at = memmem(buf, len, "$5\r\nPSYNC\r\n", 11);

		if (at) {
			at += 11;
			if (bulk_at(&at, buf + len, replid, idcap) &&
			    bulk_at(&at, buf + len, off, offcap))
				return fd;
		}
		ck_assert_uint_lt(len, sizeof(buf));
		ssize_t n = itest_recv_n(fd, buf + len, 1, T);
		ck_assert_int_eq(n, 1);
		len++;
	}
}

/* A record the replica cannot apply is not written to its log (it would refuse to start on
 * it) and is not asked for again from the same offset: the replica syncs in full. The primary
 * is played here: an empty image, then an ADD too short to be one. */
START_TEST(test_unappliable_record)
{
	static const char id[] = "0123456789abcdef0123456789abcdef01234567";
	static const char mark[] = "eofeofeofeofeofeofeofeofeofeofeofeofeof!";
	const char *extra[] = {"--data-dir", case_dir, NULL};
	char conf[128], replid[64], off[32], msg[512];
	unsigned char frame[16 + 3] = {3, 0, 0, 0, 2};
	uint16_t port;

	data_dir_new();
	int lfd = fake_listen(&port);
	FMT(conf, "[blossomd]\nreplicaof = 127.0.0.1 %u\n", (unsigned)port);
	rstart(conf, extra);
	int fd = fake_accept(lfd, replid, sizeof(replid), off, sizeof(off));
	EQ(replid, "?");
	EQ(off, "-1");
	FMT(msg, "+PONG\r\n+OK\r\n+OK\r\n+OK\r\n+FULLRESYNC %s 100\r\n$EOF:%s\r\n%s", id, mark,
	    mark);
	ck_assert_int_eq(itest_send_str(fd, msg), 0);
	frame[8] = 101; /* its LSN */
	ck_assert_int_eq(itest_send(fd, frame, sizeof(frame)), 0);
	ck_assert_msg(itest_log_wait(&rd, "cannot be applied", T), "%s", itest_log(&rd));
	/* Asked again: in full, not from offset 101. */
	int fd2 = fake_accept(lfd, replid, sizeof(replid), off, sizeof(off));
	EQ(replid, "?");
	EQ(off, "-1");
	close(fd2);
	close(fd);
	close(lfd);
	rstop();
	/* Its log holds no record it cannot replay. */
	rstart(NULL, extra);
	rstop();
}
END_TEST

/* A WAIT under way when the primary becomes a replica is answered as Redis 7.0 does (and its
 * connection closed); none is left behind: a later WAIT's timeout is its own. */
START_TEST(test_wait_unblocked_by_replicaof)
{
	char cmd[64], buf[160];
	const char *want = "-UNBLOCKED force unblock from blocking operation, instance state "
			   "changed (master -> replica?)\r\n";
	uint16_t port;

	start(NULL, NULL);
	int wfd = conn(), ofd = conn();
	RX(wfd, "BF.ADD f a", ":1\r\n");
	ck_assert_int_eq(itest_send_str(wfd, "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n"), 0);
	/* It waits once CLIENT LIST shows it ran. */
	for (int64_t t0 = itest_now_ms(); !strstr(call(ofd, "CLIENT LIST"), "cmd=wait");) {
		ck_assert_int_lt(itest_now_ms() - t0, T);
		usleep(10000);
	}
	ck_assert_int_eq(itest_free_port(&port), 0);
	FMT(cmd, "REPLICAOF 127.0.0.1 %u", (unsigned)port);
	RX(ofd, cmd, "+OK\r\n");
	ck_assert_int_eq(itest_recv_n(wfd, buf, strlen(want), T), (ssize_t)strlen(want));
	buf[strlen(want)] = 0;
	EQ(buf, want);
	ck_assert_int_eq(itest_recv_n(wfd, buf, 1, T), 0);
	close(wfd);
	RX(ofd, "REPLICAOF NO ONE", "+OK\r\n");
	int64_t t0 = itest_now_ms();
	RX(ofd, "WAIT 1 300", ":0\r\n");
	ck_assert_int_ge(itest_now_ms() - t0, 290);
	close(ofd);
	stop();
}
END_TEST

static Suite *repl_suite(void)
{
	Suite *s = suite_create("repl");
	TCase *sync = tcase_create("sync");
	TCase *roles = tcase_create("roles");
	TCase *life = tcase_create("life");

	tcase_set_timeout(sync, 120);
	tcase_add_test(sync, test_image_then_stream);
	tcase_add_test(sync, test_read_only);
	tcase_add_test(sync, test_paged_out_in_image);
	suite_add_tcase(s, sync);

	tcase_set_timeout(roles, 120);
	tcase_add_test(roles, test_info_and_role);
	tcase_add_test(roles, test_replicaof_and_promotion);
	tcase_add_test(roles, test_wait);
	suite_add_tcase(s, roles);

	tcase_set_timeout(life, 180);
	tcase_add_test(life, test_replica_restart);
	tcase_add_test(life, test_replica_killed_keeps_acked);
	tcase_add_test(life, test_primary_killed);
	tcase_add_test(life, test_primary_absent);
	tcase_add_test(life, test_partial_sync);
	tcase_add_test(life, test_partial_after_wrap);
	tcase_add_test(life, test_backlog_passed);
	suite_add_tcase(s, life);

	TCase *fix = tcase_create("limits");
	tcase_set_timeout(fix, 180);
	tcase_add_test(fix, test_long_image_not_idle);
	tcase_add_test(fix, test_paged_out_changed_during_image);
	tcase_add_test(fix, test_image_output_bound);
	tcase_add_test(fix, test_wait_unblocked_by_replicaof);
	tcase_add_test(fix, test_partial_gap_too_large);
	tcase_add_test(fix, test_unappliable_record);
	suite_add_tcase(s, fix);
	return s;
}

CHECK_MAIN(repl_suite)
