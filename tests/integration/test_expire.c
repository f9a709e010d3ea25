/* SPDX-License-Identifier: MIT */
/*
 * The expiry family against the real daemon. RESP's exact bytes for EXPIRE, PEXPIRE, EXPIREAT,
 * PEXPIREAT (NX/XX/GT/LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST, and for every error
 * (Redis 7's expire.c: options checked first, then the integer, then its overflow; the command
 * named in lower case), a time not in the future dropping the filter. A filter whose time has
 * come is gone on time however it is looked for (RESP BF.EXISTS, EXISTS, PTTL, KEYS and SCAN;
 * HTTP GET and the listing; text check and list): there before its time, absent from it on,
 * never early; the 100 ms timer drops it without a lookup (500 at once too) and removes its
 * file from data_dir (also while a background save writes it), touching nothing else. The time
 * survives SIGKILL (the log alone; a checkpoint alone, without a log; both), for a small packed
 * filter and a large one with a file of its own; a filter whose time passed while the daemon
 * was down is gone before it listens, with its file (its pack entry at the next checkpoint);
 * PERSIST survives a restart; RENAME keeps the time; INFO's keyspace line and expired_keys are
 * exact. HTTP's ttl_seconds at create and PATCH (set, clear, every bad body), and the text
 * protocol's `expires` and the `ttl` line of `info`.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/check_main.h"
#define ITEST_T	      10000 /* snapshots under a sanitizer or valgrind take a while */
#define ITEST_STOP_MS 30000
/* HTTP answers a moment after the RESP port: start_in() waits for "ready". */
#define ITEST_START_READY 1
#include "tests/integration/itest_case.h"

/* The conf of most cases: no periodic checkpoint, so that only SAVE writes one. */
#define CONF_QUIET CONF("snapshot_interval = 3600\n")

/* How late past its time a filter may still be seen gone, or its file removed (the timer runs
 * every 100 ms): more under a wrapper (valgrind), whose daemon answers slowly. */
static int slack_ms(void)
{
	const char *w = getenv("BLOSSOMD_WRAPPER");

	return w && *w ? 1500 : 300;
}

/* A time short enough to wait for, and long enough for the commands that must come before it
 * (a SAVE, a SIGKILL): longer under a wrapper. */
static int short_ms(int ms)
{
	const char *w = getenv("BLOSSOMD_WRAPPER");

	return w && *w ? 4 * ms : ms;
}

/* Unix time in ms, as the daemon reads it (CLOCK_REALTIME). Every time a case compares with a
 * filter's expiry is read here, not from the monotonic clock: a time is a point of Unix time
 * (as in Redis), and while the system clock is being slewed the two clocks drift apart by
 * several ms a second (a case once saw filters "gone 4 ms early" by the monotonic clock). */
static long long unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------- */
/* RESP */

/* printf-style command, exact reply. */
#define RXF(fd, expect, ...)                                                                       \
	do {                                                                                       \
		char cmd_[512];                                                                    \
		FMT(cmd_, __VA_ARGS__);                                                            \
		RX((fd), cmd_, (expect));                                                          \
	} while (0)

/* The integer of an integer reply (asserted to be one). */
static long long integer(int fd, const char *words)
{
	const char *r = call(fd, words);
	char *end;
	long long v;

	ck_assert_msg(r[0] == ':', "%s: not an integer reply: %s", words, r);
	v = strtoll(r + 1, &end, 10);
	ck_assert_msg(!strcmp(end, "\r\n"), "%s: %s", words, r);
	return v;
}

/* The integer reply of `cmd name`. */
static long long integer_of(int fd, const char *cmd, const char *name)
{
	char line[512];

	FMT(line, "%s %s", cmd, name);
	return integer(fd, line);
}

/* The text of INFO section (the bulk string's payload), NUL-terminated, static. */
static const char *info(int fd, const char *section)
{
	static char text[8192];
	char cmd[64];
	const char *r, *p;
	long n;

	FMT(cmd, "INFO %s", section);
	r = call(fd, cmd);
	ck_assert_msg(r[0] == '$', "%s", r);
	n = atol(r + 1);
	p = strstr(r, "\r\n") + 2;
	ck_assert_int_lt(n, (long)sizeof(text));
	memcpy(text, p, (size_t)n);
	text[n] = '\0';
	return text;
}

/* INFO stats' expired_keys. */
static long expired_keys(int fd)
{
	const char *p = strstr(info(fd, "stats"), "\r\nexpired_keys:");

	ck_assert_ptr_nonnull(p);
	return atol(p + strlen("\r\nexpired_keys:"));
}

/* INFO keyspace is exactly want ("" when no filter exists: the heading alone). */
static void keyspace_is(int fd, const char *want)
{
	char text[256];

	if (*want)
		FMT(text, "# Keyspace\r\ndb0:%s\r\n", want);
	else
		FMT(text, "# Keyspace\r\n");
	ck_assert_str_eq(info(fd, "keyspace"), text);
}

/* INFO keyspace with keys and expires exact and avg_ttl in [lo, hi]. */
static void keyspace_avg(int fd, unsigned keys, unsigned expires, long lo, long hi)
{
	const char *t = info(fd, "keyspace");
	unsigned k, e;
	long avg;

	ck_assert_msg(
	    sscanf(t, "# Keyspace\r\ndb0:keys=%u,expires=%u,avg_ttl=%ld\r\n", &k, &e, &avg) == 3,
	    "%s", t);
	ck_assert_uint_eq(k, keys);
	ck_assert_uint_eq(e, expires);
	ck_assert_msg(avg >= lo && avg <= hi, "avg_ttl %ld not in [%ld, %ld]", avg, lo, hi);
}

/* filter holds all the keys "<tag>:<i>", i in [0, n), and has n items (BF.CARD). */
static void has_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	char cmd[256], expect[32];

	ck_assert_msg(resp_count_keys(fd, filter, tag, n) == n, "%s lacks some of the keys %s:*",
		      filter, tag);
	FMT(cmd, "BF.CARD %s", filter);
	FMT(expect, ":%u\r\n", n);
	RX(fd, cmd, expect);
}

/* ---------------------------------------------------------------------------------------- */
/* HTTP */

/* The response's status is status and its body exactly body. */
static void http_is(const char *resp, int status, const char *body)
{
	char line[32];
	const char *b = strstr(resp, "\r\n\r\n");

	FMT(line, "HTTP/1.1 %d ", status);
	ck_assert_msg(!strncmp(resp, line, strlen(line)), "not %d: %s", status, resp);
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(b + 4, body);
}

/* A bad request whose detail is exactly detail (a JSON string's inside). */
static void http_bad(const char *resp, const char *detail)
{
	char body[512];

	FMT(body,
	    "{\"type\":\"bad_request\",\"title\":\"Bad "
	    "request\",\"status\":400,\"detail\":\"%s\"}\n",
	    detail);
	http_is(resp, 400, body);
}

#define NOT_FOUND_JSON                                                                             \
	"{\"type\":\"filter_not_found\",\"title\":\"Filter not found\",\"status\":404,\"detail\":" \
	"\"no filter of that name\"}\n"

/* The JSON of a new, empty filter of capacity cap at 0.01 (made by PUT), with ttl ("null" or
 * seconds); its bytes as BF.INFO SIZE says. */
static const char *filter_json(int fd, const char *name, unsigned long cap, const char *ttl)
{
	static char body[1024];
	long long bytes;
	char cmd[256];
	const char *r;

	FMT(cmd, "BF.INFO %s SIZE", name);
	r = call(fd, cmd);
	ck_assert_msg(!strncmp(r, "*1\r\n:", 5), "%s", r);
	bytes = atoll(r + 5);
	FMT(body,
	    "{\"name\":\"%s\",\"type\":\"bloom\",\"capacity\":%lu,\"error_rate\":0.01,\"items\":0,"
	    "\"bytes\":%lld,\"layers\":1,\"initial_capacity\":%lu,\"expansion\":2,\"persist\":true,"
	    "\"ttl_seconds\":%s,\"fpr_estimate\":0,\"stats\":{\"checks\":0,\"check_hits\":0,"
	    "\"check_misses\":0,\"sets\":0,\"set_hits\":0,\"set_misses\":0,\"deletes\":0,"
	    "\"delete_hits\":0,\"delete_misses\":0}}\n",
	    name, cap, bytes, cap, ttl);
	return body;
}

/* ---------------------------------------------------------------------------------------- */
/* On time */

/* One way to look a filter up: true while it is there. */
struct probe {
	const char *what;
	bool (*there)(int fd, const char *name);
};

static bool there_bf_exists(int fd, const char *name)
{
	char cmd[256];
	const char *r;

	FMT(cmd, "BF.EXISTS %s k:0", name);
	r = call(fd, cmd);
	ck_assert_msg(!strcmp(r, ":1\r\n") || !strcmp(r, ":0\r\n"), "%s", r);
	return r[1] == '1';
}

static bool there_exists(int fd, const char *name)
{
	char cmd[256];
	const char *r;

	FMT(cmd, "EXISTS %s", name);
	r = call(fd, cmd);
	ck_assert_msg(!strcmp(r, ":1\r\n") || !strcmp(r, ":0\r\n"), "%s", r);
	return r[1] == '1';
}

static bool there_http(int fd, const char *name)
{
	char path[256];
	const char *r;

	(void)fd;
	FMT(path, "/v1/filters/%s", name);
	r = http("GET", path, "");
	if (!strncmp(r, "HTTP/1.1 404 ", 13)) {
		http_is(r, 404, NOT_FOUND_JSON);
		return false;
	}
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%s", r);
	return true;
}

static bool there_text(int fd, const char *name)
{
	char line[256];
	const char *r;

	FMT(line, "check %s k:0", name);
	r = txt(fd, line);
	if (!strcmp(r, "Filter does not exist\n"))
		return false;
	ck_assert_str_eq(r, "Yes\n");
	return true;
}

static bool there_ttl(int fd, const char *name)
{
	long long v = integer_of(fd, "PTTL", name);

	ck_assert_msg(v == -2 || v >= 0, "PTTL %s: %lld", name, v);
	return v != -2;
}

/* KEYS, as Redis's: a key whose time has come is not listed, swept or not. */
static bool there_keys(int fd, const char *name)
{
	char cmd[256], one[256];
	const char *r;

	FMT(cmd, "KEYS %s", name);
	FMT(one, "*1\r\n$%zu\r\n%s\r\n", strlen(name), name);
	r = call(fd, cmd);
	if (!strcmp(r, "*0\r\n"))
		return false;
	ck_assert_str_eq(r, one);
	return true;
}

/* SCAN, as Redis's: a key whose time has come is not returned. */
static bool there_scan(int fd, const char *name)
{
	char cmd[256], one[256];
	const char *r;

	FMT(cmd, "SCAN 0 MATCH %s COUNT 1000", name);
	FMT(one, "*2\r\n$1\r\n0\r\n*1\r\n$%zu\r\n%s\r\n", strlen(name), name);
	r = call(fd, cmd);
	if (!strcmp(r, "*2\r\n$1\r\n0\r\n*0\r\n"))
		return false;
	ck_assert_str_eq(r, one);
	return true;
}

/* The text protocol's list (the name as the prefix). */
static bool there_text_list(int fd, const char *name)
{
	char line[256], head[256];
	const char *r;

	FMT(line, "list %s", name);
	FMT(head, "START\n%s ", name);
	r = txt(fd, line);
	if (!strcmp(r, "START\nEND\n"))
		return false;
	ck_assert_msg(!strncmp(r, head, strlen(head)), "%s", r);
	return true;
}

/* HTTP's listing (the name as the prefix). */
static bool there_http_list(int fd, const char *name)
{
	char path[256], head[256];
	const char *r, *b;

	(void)fd;
	FMT(path, "/v1/filters?prefix=%s", name);
	FMT(head, "{\"filters\":[{\"name\":\"%s\",", name);
	r = http("GET", path, "");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%s", r);
	b = strstr(r, "\r\n\r\n") + 4;
	if (!strcmp(b, "{\"filters\":[]}\n"))
		return false;
	ck_assert_msg(!strncmp(b, head, strlen(head)), "%s", b);
	return true;
}

/*
 * The filter was given ttl_ms between t_sent and t_ack (monotonic ms): poll it every 5 ms.
 * Seen there, the poll must have started before the latest its time can be (t_ack + ttl_ms);
 * seen gone, the poll must have ended after the earliest (t_sent + ttl_ms): never early, never
 * late (a lookup drops it at once, whatever the timer has done). The first gone comes within
 * the slack after its time.
 */
static void poll_until_gone(int fd, const struct probe *p, const char *name, int64_t t_sent,
			    int64_t t_ack, int ttl_ms)
{
	for (;;) {
		int64_t s = unix_ms();
		bool there = p->there(fd, name);
		int64_t e = unix_ms();

		if (there) {
			/* 2 ms: the daemon's clock is read in whole ms. */
			ck_assert_msg(s < t_ack + ttl_ms + 2,
				      "%s: %s still there %lld ms after its time", p->what, name,
				      (long long)(s - t_ack - ttl_ms));
		} else {
			ck_assert_msg(e >= t_sent + ttl_ms - 2, "%s: %s gone %lld ms early",
				      p->what, name, (long long)(t_sent + ttl_ms - e));
			ck_assert_msg(e <= t_ack + ttl_ms + slack_ms(),
				      "%s: %s seen gone only %lld ms after its time", p->what, name,
				      (long long)(e - t_ack - ttl_ms));
			return;
		}
		itest_sleep_ms(5);
	}
}

/* PEXPIRE name ttl_ms, with the times it was sent and answered. */
static void pexpire(int fd, const char *name, int ttl_ms, int64_t *t_sent, int64_t *t_ack)
{
	char cmd[256];

	FMT(cmd, "PEXPIRE %s %d", name, ttl_ms);
	*t_sent = unix_ms();
	RX(fd, cmd, ":1\r\n");
	*t_ack = unix_ms();
}

/* ---------------------------------------------------------------------------------------- */
/* Exact replies */

#define ARITY(cmd)   "-ERR wrong number of arguments for '" cmd "' command\r\n"
#define NOT_INT	     "-ERR value is not an integer or out of range\r\n"
#define INVALID(cmd) "-ERR invalid expire time in '" cmd "' command\r\n"
#define NX_ERR	     "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
#define GTLT_ERR     "-ERR GT and LT options at the same time are not compatible\r\n"

/* TTL/PTTL/EXPIRETIME/PEXPIRETIME/PERSIST: -2 and 0 for no filter, -1 and 0 for no time, the
 * time left or the time; arity. */
START_TEST(test_replies_ttl)
{
	int fd;
	long long v, t0, at;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();

	/* No such filter. */
	RX(fd, "TTL f", ":-2\r\n");
	RX(fd, "PTTL f", ":-2\r\n");
	RX(fd, "EXPIRETIME f", ":-2\r\n");
	RX(fd, "PEXPIRETIME f", ":-2\r\n");
	RX(fd, "PERSIST f", ":0\r\n");
	RX(fd, "EXPIRE f 100", ":0\r\n");
	RX(fd, "PEXPIRE f 100", ":0\r\n");
	RX(fd, "EXPIREAT f 99999999999", ":0\r\n");
	RX(fd, "PEXPIREAT f 99999999999999", ":0\r\n");
	RX(fd, "EXISTS f", ":0\r\n");

	/* A filter without a time. */
	RX(fd, "BF.RESERVE f 0.01 100", "+OK\r\n");
	RX(fd, "TTL f", ":-1\r\n");
	RX(fd, "PTTL f", ":-1\r\n");
	RX(fd, "EXPIRETIME f", ":-1\r\n");
	RX(fd, "PEXPIRETIME f", ":-1\r\n");
	RX(fd, "PERSIST f", ":0\r\n");
	/* Names are case-sensitive. */
	RX(fd, "TTL F", ":-2\r\n");
	RX(fd, "EXPIRE F 100", ":0\r\n");

	/* EXPIRE: the time left, rounded to the second; in ms; the Unix time. */
	t0 = unix_ms();
	RX(fd, "EXPIRE f 100", ":1\r\n");
	RX(fd, "TTL f", ":100\r\n");
	v = integer(fd, "PTTL f");
	ck_assert_msg(v > 100000 - 1000 && v <= 100000, "PTTL %lld", v);
	at = integer(fd, "PEXPIRETIME f");
	ck_assert_msg(at >= t0 + 100000 - 2 && at <= unix_ms() + 100000 + 2, "PEXPIRETIME %lld",
		      at);
	ck_assert_int_eq(integer(fd, "EXPIRETIME f"), (at + 500) / 1000); /* rounded, as Redis */
	/* Command names in any case. */
	ck_assert_int_eq(integer(fd, "pexpiretime f"), at);
	RX(fd, "ttl f", ":100\r\n");

	/* EXPIREAT and PEXPIREAT set exactly the time given. */
	at = unix_ms() / 1000 + 5000;
	RXF(fd, ":1\r\n", "EXPIREAT f %lld", at);
	ck_assert_int_eq(integer(fd, "EXPIRETIME f"), at);
	ck_assert_int_eq(integer(fd, "PEXPIRETIME f"), at * 1000);
	at = unix_ms() + 7654321;
	RXF(fd, ":1\r\n", "PEXPIREAT f %lld", at);
	ck_assert_int_eq(integer(fd, "PEXPIRETIME f"), at);
	ck_assert_int_eq(integer(fd, "EXPIRETIME f"), (at + 500) / 1000);
	v = integer(fd, "TTL f");
	ck_assert_msg(v == 7654 || v == 7653, "TTL %lld", v);

	/* TTL rounds to the nearest second, as Redis's ((ms + 500) / 1000). */
	RX(fd, "PEXPIRE f 1400", ":1\r\n");
	RX(fd, "TTL f", ":1\r\n");
	RX(fd, "PEXPIRE f 2800", ":1\r\n");
	RX(fd, "TTL f", ":3\r\n");
	RX(fd, "PEXPIRE f 400", ":1\r\n");
	RX(fd, "TTL f", ":0\r\n");
	RX(fd, "PEXPIRE f 100000", ":1\r\n");

	/* PERSIST: 1 once, then 0; the time is gone. */
	RX(fd, "PERSIST f", ":1\r\n");
	RX(fd, "PERSIST f", ":0\r\n");
	RX(fd, "TTL f", ":-1\r\n");
	RX(fd, "PEXPIRETIME f", ":-1\r\n");
	RX(fd, "EXISTS f", ":1\r\n");

	/* Arity, as Redis words it (the command's name in lower case). */
	RX(fd, "EXPIRE", ARITY("expire"));
	RX(fd, "EXPIRE f", ARITY("expire"));
	RX(fd, "PEXPIRE f", ARITY("pexpire"));
	RX(fd, "EXPIREAT f", ARITY("expireat"));
	RX(fd, "PEXPIREAT f", ARITY("pexpireat"));
	RX(fd, "eXpIrE f", ARITY("expire"));
	RX(fd, "TTL", ARITY("ttl"));
	RX(fd, "TTL f g", ARITY("ttl"));
	RX(fd, "PTTL", ARITY("pttl"));
	RX(fd, "PTTL f g", ARITY("pttl"));
	RX(fd, "EXPIRETIME", ARITY("expiretime"));
	RX(fd, "EXPIRETIME f g", ARITY("expiretime"));
	RX(fd, "PEXPIRETIME", ARITY("pexpiretime"));
	RX(fd, "PEXPIRETIME f g", ARITY("pexpiretime"));
	RX(fd, "PERSIST", ARITY("persist"));
	RX(fd, "PERSIST f g", ARITY("persist"));
	RX(fd, "TTL f", ":-1\r\n");

	/* A pipeline: every reply in order. */
	ck_assert_int_eq(itest_send_str(fd, "*3\r\n$6\r\nEXPIRE\r\n$1\r\nf\r\n$2\r\n50\r\n"
					    "*2\r\n$3\r\nTTL\r\n$1\r\nf\r\n"
					    "*2\r\n$7\r\nPERSIST\r\n$1\r\nf\r\n"
					    "*2\r\n$3\r\nTTL\r\n$1\r\nf\r\n"
					    "*2\r\n$3\r\nTTL\r\n$1\r\nz\r\n"),
			 0);
	EXCHANGE(fd, "", ":1\r\n:50\r\n:1\r\n:-1\r\n:-2\r\n");
	/* Inline commands too. */
	EXCHANGE(fd, "EXPIRE f 60\r\nTTL f\r\nPERSIST f\r\n", ":1\r\n:60\r\n:1\r\n");
	close(fd);
	stop();
}
END_TEST

/* NX, XX, GT, LT as Redis 7 has them (no time counts as an infinite one), in any case and
 * combined; every option error, checked before the integer. */
START_TEST(test_replies_options)
{
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE f 0.01 100", "+OK\r\n");

	/* No time yet: XX and GT refuse, NX and LT set. */
	RX(fd, "EXPIRE f 100 XX", ":0\r\n");
	RX(fd, "EXPIRE f 100 GT", ":0\r\n");
	RX(fd, "TTL f", ":-1\r\n");
	RX(fd, "EXPIRE f 100 LT", ":1\r\n");
	RX(fd, "TTL f", ":100\r\n");
	RX(fd, "PERSIST f", ":1\r\n");
	RX(fd, "EXPIRE f 100 NX", ":1\r\n");
	RX(fd, "TTL f", ":100\r\n");

	/* A time: NX refuses, XX sets. */
	RX(fd, "EXPIRE f 200 NX", ":0\r\n");
	RX(fd, "TTL f", ":100\r\n");
	RX(fd, "EXPIRE f 200 XX", ":1\r\n");
	RX(fd, "TTL f", ":200\r\n");
	/* GT: only later; LT: only earlier; the same time is neither. */
	RX(fd, "EXPIRE f 100 GT", ":0\r\n");
	RX(fd, "EXPIRE f 300 GT", ":1\r\n");
	RX(fd, "TTL f", ":300\r\n");
	RX(fd, "EXPIRE f 400 LT", ":0\r\n");
	RX(fd, "EXPIRE f 50 LT", ":1\r\n");
	RX(fd, "TTL f", ":50\r\n");
	RXF(fd, ":0\r\n", "PEXPIREAT f %lld GT", integer(fd, "PEXPIRETIME f"));
	RXF(fd, ":0\r\n", "PEXPIREAT f %lld LT", integer(fd, "PEXPIRETIME f"));
	RX(fd, "TTL f", ":50\r\n");
	/* In any case, and combined (XX with GT or LT; one option twice). */
	RX(fd, "EXPIRE f 60 xx gt", ":1\r\n");
	RX(fd, "TTL f", ":60\r\n");
	RX(fd, "EXPIRE f 55 Xx Lt", ":1\r\n");
	RX(fd, "TTL f", ":55\r\n");
	RX(fd, "EXPIRE f 500 nX nx", ":0\r\n");
	RX(fd, "EXPIRE f 70 GT GT XX", ":1\r\n");
	RX(fd, "TTL f", ":70\r\n");
	RX(fd, "PERSIST f", ":1\r\n");
	RX(fd, "EXPIRE f 80 XX LT", ":0\r\n"); /* XX: no time */
	RX(fd, "PEXPIRE f 90000 nx", ":1\r\n");
	RX(fd, "TTL f", ":90\r\n");
	/* The other three commands take them too. */
	RXF(fd, ":0\r\n", "EXPIREAT f %lld NX", unix_ms() / 1000 + 1000);
	RXF(fd, ":1\r\n", "PEXPIREAT f %lld XX", unix_ms() + 95000);
	RX(fd, "TTL f", ":95\r\n");
	RX(fd, "PEXPIRE f 96000 GT", ":1\r\n");
	RX(fd, "TTL f", ":96\r\n");
	/* A time past, refused by an option: the filter stays. */
	RX(fd, "EXPIRE f -10 GT", ":0\r\n");
	RX(fd, "PEXPIREAT f 1 NX", ":0\r\n");
	RX(fd, "TTL f", ":96\r\n");
	/* Options on a filter that does not exist: 0, not an error. */
	RX(fd, "EXPIRE nope 10 XX", ":0\r\n");
	RX(fd, "EXPIRE nope 10 NX", ":0\r\n");

	/* Errors, exactly as Redis's, and nothing changes. */
	RX(fd, "EXPIRE f 100 FOO", "-ERR Unsupported option FOO\r\n");
	RX(fd, "EXPIRE f 100 NX foo", "-ERR Unsupported option foo\r\n");
	RX(fd, "PEXPIRE f 100 GTX", "-ERR Unsupported option GTX\r\n");
	RX(fd, "EXPIREAT f 100 N", "-ERR Unsupported option N\r\n");
	RX(fd, "PEXPIREAT f 100 XX 5", "-ERR Unsupported option 5\r\n");
	RX(fd, "EXPIRE f 100 NX XX", NX_ERR);
	RX(fd, "EXPIRE f 100 XX NX", NX_ERR);
	RX(fd, "EXPIRE f 100 NX GT", NX_ERR);
	RX(fd, "EXPIRE f 100 LT NX", NX_ERR);
	RX(fd, "EXPIRE f 100 nx lt gt", NX_ERR);
	RX(fd, "EXPIRE f 100 GT LT", GTLT_ERR);
	RX(fd, "PEXPIRE f 100 lt XX gt", GTLT_ERR);
	/* Options before the integer: an unknown option or a conflict wins over a bad time. */
	RX(fd, "EXPIRE f abc FOO", "-ERR Unsupported option FOO\r\n");
	RX(fd, "EXPIRE f abc NX XX", NX_ERR);
	RX(fd, "EXPIRE f abc GT LT", GTLT_ERR);
	RX(fd, "EXPIRE f abc NX", NOT_INT);
	/* On a filter that does not exist, the same errors. */
	RX(fd, "EXPIRE nope 100 FOO", "-ERR Unsupported option FOO\r\n");
	RX(fd, "EXPIRE nope 100 NX LT", NX_ERR);
	RX(fd, "TTL f", ":96\r\n");
	RX(fd, "EXISTS nope", ":0\r\n");
	close(fd);
	stop();
}
END_TEST

/* The time argument: integers only; the overflow of the unit and of the base is Redis's
 * "invalid expire time" with the command's name in lower case; a time not in the future drops
 * the filter (1), and counts as no expiry in INFO's expired_keys (Redis counts only keys whose
 * time came). */
START_TEST(test_replies_times)
{
	static const char *const names[] = {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"};
	/* Redis's string2ll: no sign but '-', no leading zero, no space, at most 20 bytes. */
	static const char *const bad[] = {"abc",
					  "1.5",
					  "1e3",
					  "0x10",
					  " 1",
					  "1 ",
					  "+1",
					  "+-1",
					  "-",
					  "-0",
					  "007",
					  "00",
					  "9223372036854775808",
					  "-9223372036854775809",
					  "99999999999999999999",
					  "-99999999999999999999",
					  "000000000000000000001",
					  ""};
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE f 0.01 100", "+OK\r\n");

	/* Not integers (one argument each, sent as is). */
	for (size_t c = 0; c < 4; c++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			const char *argv[] = {names[c], "f", bad[i]};
			size_t lens[] = {strlen(names[c]), 1, strlen(bad[i])};

			ck_assert_msg(!strcmp(callv(fd, 3, argv, lens), NOT_INT), "%s f '%s'",
				      names[c], bad[i]);
		}
	}
	RX(fd, "TTL f", ":-1\r\n");

	/* Seconds times 1000 past LLONG_MAX; a base added past it. */
	RX(fd, "EXPIRE f 9223372036854775807", INVALID("expire"));
	RX(fd, "EXPIRE f 9223372036854776", INVALID("expire"));
	RX(fd, "EXPIRE f -9223372036854776", INVALID("expire"));
	RX(fd, "EXPIRE f -9223372036854775808", INVALID("expire"));
	RX(fd, "EXPIRE f 9223372036854775", INVALID("expire")); /* + now */
	RX(fd, "EXPIREAT f 9223372036854776", INVALID("expireat"));
	RX(fd, "EXPIREAT f -9223372036854776", INVALID("expireat"));
	RX(fd, "PEXPIRE f 9223372036854775807", INVALID("pexpire"));
	RX(fd, "PEXPIRE f 9223372036854775000", INVALID("pexpire")); /* + now */
	RX(fd, "ExPiRe f 9223372036854775807", INVALID("expire"));
	RX(fd, "pexpire f 9223372036854775807", INVALID("pexpire"));
	RX(fd, "ExpireAt f -9223372036854776", INVALID("expireat"));
	/* ... and on a filter that does not exist: the same error. */
	RX(fd, "EXPIRE nope 9223372036854775807", INVALID("expire"));
	RX(fd, "TTL f", ":-1\r\n");
	/* The largest times that fit are times. */
	RX(fd, "EXPIREAT f 9223372036854775", ":1\r\n");
	RX(fd, "EXPIRETIME f", ":9223372036854775\r\n");
	RX(fd, "PEXPIRETIME f", ":9223372036854775000\r\n");
	RX(fd, "PEXPIREAT f 9223372036854775807", ":1\r\n");
	RX(fd, "PEXPIRETIME f", ":9223372036854775807\r\n");
	ck_assert_int_gt(integer(fd, "TTL f"), 9223370000000000LL); /* in s, from now */
	RX(fd, "PERSIST f", ":1\r\n");

	/* A time not in the future: the filter goes at once (1), whatever the command. */
	static const char *const past[] = {"EXPIRE p 0",
					   "EXPIRE p -1",
					   "PEXPIRE p 0",
					   "PEXPIRE p -5000",
					   "EXPIREAT p 0",
					   "EXPIREAT p 1",
					   "PEXPIREAT p 1",
					   "PEXPIREAT p -1",
					   "EXPIRE p -9223372036854775",
					   "PEXPIRE p -9223372036854775808",
					   "EXPIREAT p -9223372036854775",
					   "EXPIRE p -100 LT",
					   "PEXPIREAT p 1000 XX"};
	for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
		RX(fd, "BF.ADD p k", ":1\r\n");
		if (strstr(past[i], "XX"))
			RX(fd, "EXPIRE p 1000", ":1\r\n");
		ck_assert_msg(!strcmp(call(fd, past[i]), ":1\r\n"), "%s", past[i]);
		RX(fd, "EXISTS p", ":0\r\n");
		RX(fd, "TTL p", ":-2\r\n");
		RX(fd, "BF.EXISTS p k", ":0\r\n");
		/* ... and once more, on nothing. */
		ck_assert_msg(!strcmp(call(fd, past[i]), ":0\r\n"), "%s", past[i]);
	}
	/* EXPIREAT of the time now or a moment ago. */
	RX(fd, "BF.ADD p k", ":1\r\n");
	RXF(fd, ":1\r\n", "PEXPIREAT p %lld", unix_ms());
	RX(fd, "EXISTS p", ":0\r\n");
	RX(fd, "BF.ADD p k", ":1\r\n");
	RXF(fd, ":1\r\n", "EXPIREAT p %lld", unix_ms() / 1000 - 1);
	RX(fd, "EXISTS p", ":0\r\n");
	/* Deleted, not expired (as Redis counts them), and nothing else went. */
	ck_assert_int_eq(expired_keys(fd), 0);
	RX(fd, "KEYS *", "*1\r\n$1\r\nf\r\n");
	RX(fd, "TTL f", ":-1\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * EXPIRETIME of the largest times PEXPIREAT takes (up to LLONG_MAX ms): rounded to the second
 * as every other time, and the daemon still answering. Redis's (ttl + 500) / 1000 overflows a
 * long long past LLONG_MAX - 500: undefined behaviour, no answer to copy (a sanitizer build
 * stops on it).
 */
START_TEST(test_expiretime_of_the_largest_times)
{
	static const char *const times[][2] = {
	    {"9223372036854775307", "9223372036854775"}, /* LLONG_MAX - 500: the last that fits */
	    {"9223372036854775308", "9223372036854775"},
	    {"9223372036854775500", "9223372036854776"},
	    {"9223372036854775807", "9223372036854776"},
	};
	char cmd[128], expect[64];
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE f 0.01 100", "+OK\r\n");
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		const char *r;

		FMT(cmd, "PEXPIREAT f %s", times[i][0]);
		RX(fd, cmd, ":1\r\n");
		FMT(expect, ":%s\r\n", times[i][0]);
		RX(fd, "PEXPIRETIME f", expect);
		FMT(expect, ":%s\r\n", times[i][1]);
		ck_assert_int_eq(itest_send_str(fd, "EXPIRETIME f\r\n"), 0);
		r = itest_recv_until(fd, cmd, sizeof(cmd), "\r\n", T) > 0 ? cmd : "(no reply)";
		ck_assert_msg(!strcmp(r, expect), "EXPIRETIME after PEXPIREAT %s: %.*s, not :%s%s",
			      times[i][0], (int)strcspn(r, "\r"), r, times[i][1],
			      itest_wait_exit(&d, 200) >= 0 ? " (the daemon died)" : "");
	}
	RX(fd, "PERSIST f", ":1\r\n");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Gone on time */

/* The ways of looking a filter up, one case each. */
static const struct probe probes[] = {
    {"BF.EXISTS", there_bf_exists},
    {"EXISTS", there_exists},
    {"PTTL", there_ttl},
    {"HTTP GET", there_http},
    {"text check", there_text},
    {"KEYS", there_keys},
    {"SCAN", there_scan},
    {"HTTP listing", there_http_list},
    {"text list", there_text_list},
};
#define NPROBES ((int)(sizeof(probes) / sizeof(probes[0])))
#define NTIMED	5 /* filters timed in each case */

/*
 * Five filters given 400 to 948 ms are each there until its time and gone from it on, seen
 * through one way of looking (probes[_i]): RESP BF.EXISTS, EXISTS, PTTL, KEYS and SCAN, HTTP GET
 * (404) and the listing, text check ("Filter does not exist") and list; never early, never
 * late, whatever the 100 ms timer has done by then. Afterwards they are gone for every other
 * way, and a name is new again (BF.ADD creates it anew, with no time and none of its keys). The
 * other filters (with keys, large, one with a later time) are untouched.
 */
START_TEST(test_gone_on_time)
{
	const struct probe *p = &probes[_i];
	int fd, tfd, pfd, ttl[NTIMED];
	int64_t t_sent[NTIMED], t_ack[NTIMED];
	char name[NTIMED][16];

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	tfd = conn();
	pfd = p->there == there_text || p->there == there_text_list ? tfd : fd;
	RX(fd, "BF.RESERVE keep 0.0001 1000", "+OK\r\n");
	resp_add_keys(fd, "keep", "k", 100);
	RX(fd, "BF.RESERVE keep-big 0.01 200000", "+OK\r\n");
	resp_add_keys(fd, "keep-big", "k", 100);
	RX(fd, "BF.RESERVE keep-timed 0.01 1000", "+OK\r\n");
	RX(fd, "EXPIRE keep-timed 3600", ":1\r\n");
	for (int i = 0; i < NTIMED; i++) {
		FMT(name[i], "timed:%d", i);
		RXF(fd, "+OK\r\n", "BF.RESERVE %s 0.0001 1000", name[i]);
		resp_add_keys(fd, name[i], "k", 10);
	}

	/* Times 137 ms apart: where the timer's round falls after each differs, so a way of
	 * looking that leaves the filter to the timer sees one after its time. */
	for (int i = 0; i < NTIMED; i++) {
		ttl[i] = 400 + 137 * i;
		pexpire(fd, name[i], ttl[i], &t_sent[i], &t_ack[i]);
	}
	for (int i = 0; i < NTIMED; i++)
		poll_until_gone(pfd, p, name[i], t_sent[i], t_ack[i], ttl[i]);
	/* Gone for every other way of looking too. */
	for (int k = 0; k < NPROBES; k++) {
		int kfd =
		    probes[k].there == there_text || probes[k].there == there_text_list ? tfd : fd;

		for (int i = 0; i < NTIMED; i++)
			ck_assert_msg(!probes[k].there(kfd, name[i]),
				      "%s still sees %s after %s did not", probes[k].what, name[i],
				      p->what);
	}
	RX(fd, "TTL timed:0", ":-2\r\n");
	RX(fd, "PERSIST timed:0", ":0\r\n");
	RX(fd, "EXPIRE timed:0 100", ":0\r\n");
	RX(fd, "RENAME timed:0 other", "-ERR no such key\r\n");
	/* New again: BF.ADD creates it (RedisBloom's defaults), without its old keys. */
	RX(fd, "BF.EXISTS timed:0 k:0", ":0\r\n");
	RX(fd, "BF.ADD timed:0 k:0", ":1\r\n");
	RX(fd, "BF.CARD timed:0", ":1\r\n");
	RX(fd, "BF.INFO timed:0 CAPACITY", "*1\r\n:100\r\n");
	RX(fd, "TTL timed:0", ":-1\r\n");

	/* Nothing else touched. */
	has_keys(fd, "keep", "k", 100);
	has_keys(fd, "keep-big", "k", 100);
	RX(fd, "TTL keep", ":-1\r\n");
	RX(fd, "TTL keep-big", ":-1\r\n");
	ck_assert_int_ge(integer(fd, "TTL keep-timed"), 3590);
	ck_assert_int_eq(integer(fd, "DBSIZE"), 4);
	ck_assert_int_eq(expired_keys(fd), NTIMED);
	keyspace_avg(fd, 4, 1, 3580000, 3600000);
	close(tfd);
	close(fd);
	stop();
}
END_TEST

/*
 * The timer alone (no lookup of the filter): a large filter's own file and a small one's pack
 * entry. The file is there until the time and gone within the slack after it; the pack is
 * written without the small one at the next checkpoint. The other filters' files, pack entries
 * and keys stay, also after a restart.
 */
START_TEST(test_timer_removes_files)
{
	const int ttl = 500;
	int64_t t_sent, t_ack, gone_at = 0;
	long again;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE exp-big-one 0.01 200000", "+OK\r\n");
	resp_add_keys(fd, "exp-big-one", "k", 100);
	RX(fd, "BF.RESERVE exp-small-one 0.0001 1000", "+OK\r\n");
	resp_add_keys(fd, "exp-small-one", "k", 100);
	RX(fd, "BF.RESERVE keep-big-one 0.01 200000", "+OK\r\n");
	resp_add_keys(fd, "keep-big-one", "k", 100);
	RX(fd, "BF.RESERVE keep-small-one 0.0001 1000", "+OK\r\n");
	resp_add_keys(fd, "keep-small-one", "k", 100);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("exp-big-one.bsnap"));
	ck_assert(exists("keep-big-one.bsnap"));
	ck_assert(!exists("exp-small-one.bsnap"));
	ck_assert_ptr_nonnull(pack_with("exp-small-one"));
	ck_assert_ptr_nonnull(pack_with("keep-small-one"));

	pexpire(fd, "exp-big-one", ttl, &t_sent, &t_ack);
	RX(fd, "PEXPIRE exp-small-one 500", ":1\r\n");
	for (;;) {
		int64_t s = unix_ms();
		bool there = exists("exp-big-one.bsnap");
		int64_t e = unix_ms();

		if (!there) {
			ck_assert_msg(e >= t_sent + ttl - 2, "the file went %lld ms early",
				      (long long)(t_sent + ttl - e));
			gone_at = e;
			break;
		}
		ck_assert_msg(s <= t_ack + ttl + slack_ms(),
			      "exp-big-one.bsnap still there %lld ms after its time",
			      (long long)(s - t_ack - ttl));
		itest_sleep_ms(5);
	}
	/* Both went by the timer: counted before any lookup of them. */
	while (expired_keys(fd) < 2 && unix_ms() < gone_at + slack_ms())
		itest_sleep_ms(5);
	ck_assert_int_eq(expired_keys(fd), 2);
	keyspace_is(fd, "keys=2,expires=0,avg_ttl=0");
	absent(fd, "exp-big-one");
	absent(fd, "exp-small-one");
	ck_assert(exists("keep-big-one.bsnap"));
	ck_assert_ptr_nonnull(pack_with("keep-small-one"));
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert_ptr_null(pack_with("exp-small-one"));
	ck_assert_ptr_nonnull(pack_with("keep-small-one"));
	ck_assert(!exists("exp-big-one.bsnap"));
	ck_assert(exists("keep-big-one.bsnap"));
	has_keys(fd, "keep-big-one", "k", 100);
	has_keys(fd, "keep-small-one", "k", 100);
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	again = expired_keys(fd);
	absent(fd, "exp-big-one");
	absent(fd, "exp-small-one");
	has_keys(fd, "keep-big-one", "k", 100);
	has_keys(fd, "keep-small-one", "k", 100);
	keyspace_is(fd, "keys=2,expires=0,avg_ttl=0");
	close(fd);
	stop();
	ck_assert(!exists("exp-big-one.bsnap"));
	ck_assert_ptr_null(pack_with("exp-small-one"));
	/* Their time came, and was counted, in the daemon before: not again in this one (Redis
	 * logs an expired key's DEL, so neither its AOF nor its RDB brings the key back). */
	ck_assert_msg(again == 0,
		      "expired_keys:%ld after the restart: filters that expired "
		      "before it were counted again",
		      again);
}
END_TEST

/*
 * 500 filters given the same 300 ms in one pipeline: the timer alone (no lookup) drops them all
 * in time, counted once each; the one filter without a time stays.
 */
START_TEST(test_many_at_once)
{
	static char buf[500 * 96];
	const int ttl = 300, n = 500;
	size_t len = 0;
	int64_t t_sent, t_ack;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.ADD keep k", ":1\r\n");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "BF.ADD many:%d k\r\n", i);
	ck_assert_uint_lt(len, sizeof(buf));
	ck_assert_int_eq(itest_send(fd, buf, len), 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(itest_recv_n(fd, buf, 4, T), 4);
	len = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "PEXPIRE many:%d %d\r\n", i,
					ttl);
	t_sent = unix_ms();
	ck_assert_int_eq(itest_send(fd, buf, len), 0);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(itest_recv_n(fd, buf, 4, T), 4);
		ck_assert_msg(!memcmp(buf, ":1\r\n", 4), "PEXPIRE many:%d: %.4s", i, buf);
	}
	t_ack = unix_ms();
	keyspace_avg(fd, (unsigned)n + 1, (unsigned)n, 0, ttl);
	/* INFO and DBSIZE look no filter up: only the timer drops them. */
	while (integer(fd, "DBSIZE") > 1) {
		ck_assert_msg(unix_ms() <= t_ack + ttl + slack_ms(),
			      "%lld filters left %lld ms after their time",
			      integer(fd, "DBSIZE") - 1, (long long)(unix_ms() - t_ack - ttl));
		itest_sleep_ms(5);
	}
	ck_assert_int_ge(unix_ms(), t_sent + ttl - 2);
	ck_assert_int_eq(expired_keys(fd), n);
	keyspace_is(fd, "keys=1,expires=0,avg_ttl=0");
	RX(fd, "KEYS *", "*1\r\n$4\r\nkeep\r\n");
	RX(fd, "BF.EXISTS keep k", ":1\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * A large filter whose time comes while a background save writes its file: the file is removed
 * once the write ends (not left behind, not written back), and a restart after SIGKILL does not
 * find the filter. Its neighbour, written by the same save, is intact.
 */
START_TEST(test_expire_during_bgsave)
{
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE huge 0.0001 4000000", "+OK\r\n");
	resp_add_keys(fd, "huge", "k", 100);
	RX(fd, "BF.RESERVE keep-huge 0.0001 4000000", "+OK\r\n");
	resp_add_keys(fd, "keep-huge", "k", 100);
	/* One write: the save starts, then the time is set; it comes while the files are written.
	 */
	EXCHANGE(fd, "*1\r\n$6\r\nBGSAVE\r\n*3\r\n$7\r\nPEXPIRE\r\n$4\r\nhuge\r\n$2\r\n20\r\n",
		 "+Background saving started\r\n:1\r\n");
	bgsave_done(fd);
	itest_sleep_ms(150); /* the timer's next round, if the lookup below came first */
	absent(fd, "huge");
	bgsave_done(fd);
	ck_assert(!exists("huge.bsnap"));
	ck_assert(!exists("huge.bsnap.tmp"));
	ck_assert(exists("keep-huge.bsnap"));
	has_keys(fd, "keep-huge", "k", 100);
	ck_assert_int_eq(expired_keys(fd), 1);
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	absent(fd, "huge");
	has_keys(fd, "keep-huge", "k", 100);
	RX(fd, "KEYS *", "*1\r\n$9\r\nkeep-huge\r\n");
	close(fd);
	stop();
	ck_assert(!exists("huge.bsnap"));
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Restarts */

/* The filters of the restart cases: a small one (packed) and a large one (a file of its own). */
static void make_pair(int fd, const char *small, const char *big)
{
	char cmd[256];

	FMT(cmd, "BF.RESERVE %s 0.0001 1000", small);
	RX(fd, cmd, "+OK\r\n");
	resp_add_keys(fd, small, "k", 50);
	FMT(cmd, "BF.RESERVE %s 0.01 200000", big);
	RX(fd, cmd, "+OK\r\n");
	resp_add_keys(fd, big, "k", 50);
}

/* The times set by set_times, to compare after a restart. */
struct times {
	long long small_at, big_at, moved_at;
};

/*
 * Times on a small and a large filter (EXPIREAT and PEXPIREAT: exact), one moved twice, one set
 * and cleared (PERSIST), one never set.
 */
static void set_times(int fd, const char *tag, struct times *t)
{
	char s[64], b[64], m[64], p[64], n[64];

	FMT(s, "%s-small-filter", tag);
	FMT(b, "%s-big-filter", tag);
	FMT(m, "%s-moved", tag);
	FMT(p, "%s-persisted", tag);
	FMT(n, "%s-never", tag);
	t->small_at = unix_ms() / 1000 + 3600;
	t->big_at = unix_ms() + 7200123;
	RXF(fd, ":1\r\n", "EXPIREAT %s %lld", s, t->small_at);
	RXF(fd, ":1\r\n", "PEXPIREAT %s %lld", b, t->big_at);
	RXF(fd, "+OK\r\n", "BF.RESERVE %s 0.01 100", m);
	RXF(fd, ":1\r\n", "EXPIRE %s 100", m);
	RXF(fd, ":1\r\n", "EXPIRE %s 5000 GT", m);
	t->moved_at = integer_of(fd, "PEXPIRETIME", m);
	RXF(fd, "+OK\r\n", "BF.RESERVE %s 0.01 100", p);
	RXF(fd, ":1\r\n", "EXPIRE %s 100", p);
	RXF(fd, ":1\r\n", "PERSIST %s", p);
	RXF(fd, "+OK\r\n", "BF.RESERVE %s 0.01 100", n);
}

static void check_times(int fd, const char *tag, const struct times *t)
{
	char s[64], b[64], m[64], p[64], n[64];

	FMT(s, "%s-small-filter", tag);
	FMT(b, "%s-big-filter", tag);
	FMT(m, "%s-moved", tag);
	FMT(p, "%s-persisted", tag);
	FMT(n, "%s-never", tag);
	ck_assert_int_eq(integer_of(fd, "EXPIRETIME", s), t->small_at);
	ck_assert_int_eq(integer_of(fd, "PEXPIRETIME", s), t->small_at * 1000);
	ck_assert_int_eq(integer_of(fd, "PEXPIRETIME", b), t->big_at);
	ck_assert_int_eq(integer_of(fd, "PEXPIRETIME", m), t->moved_at);
	ck_assert_int_eq(integer_of(fd, "TTL", p), -1);
	ck_assert_int_eq(integer_of(fd, "TTL", n), -1);
	has_keys(fd, s, "k", 50);
	has_keys(fd, b, "k", 50);
}

/*
 * SIGKILL with no checkpoint since the start: the log alone (EXPIRE records) holds the times.
 * Then SAVE and SIGKILL again (the checkpoints, with the log after them), and a clean stop.
 */
START_TEST(test_kill9_log_only)
{
	struct times t;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	make_pair(fd, "log-small-filter", "log-big-filter");
	set_times(fd, "log", &t);
	check_times(fd, "log", &t);
	keyspace_avg(fd, 5, 3, 0, 7200123);
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	check_times(fd, "log", &t);
	keyspace_avg(fd, 5, 3, 0, 7200123);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("log-big-filter.bsnap"));
	ck_assert_ptr_nonnull(pack_with("log-small-filter"));
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	check_times(fd, "log", &t);
	close(fd);
	stop();
	start_in(CONF_QUIET);
	fd = conn();
	check_times(fd, "log", &t);
	close(fd);
	stop();
}
END_TEST

/*
 * The checkpoint alone (no log at all): SAVE writes the times into the large filter's file and
 * the small one's pack entry; SIGKILL; the restart reads them back. Then times changed and
 * cleared, SAVE, SIGKILL: the checkpoint has the new state (a time removed stays removed).
 */
START_TEST(test_kill9_checkpoint_only)
{
	const char *conf = CONF("snapshot_interval = 3600\nwal = off\n");
	struct times t;
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	make_pair(fd, "ck-small-filter", "ck-big-filter");
	set_times(fd, "ck", &t);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("ck-big-filter.bsnap"));
	ck_assert(!exists("ck-small-filter.bsnap"));
	ck_assert_ptr_nonnull(pack_with("ck-small-filter"));
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	check_times(fd, "ck", &t);
	keyspace_avg(fd, 5, 3, 0, 7200123);
	/* Changed: the small one's time cleared, the large one's moved, the never-set one set. */
	RX(fd, "PERSIST ck-small-filter", ":1\r\n");
	t.big_at += 1000;
	RXF(fd, ":1\r\n", "PEXPIREAT ck-big-filter %lld", t.big_at);
	RX(fd, "PEXPIREAT ck-never 99999999999999", ":1\r\n");
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	RX(fd, "TTL ck-small-filter", ":-1\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME ck-big-filter"), t.big_at);
	RX(fd, "PEXPIRETIME ck-never", ":99999999999999\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME ck-moved"), t.moved_at);
	RX(fd, "TTL ck-persisted", ":-1\r\n");
	has_keys(fd, "ck-small-filter", "k", 50);
	keyspace_avg(fd, 5, 3, 0, 99999999999999LL);
	close(fd);
	stop();
}
END_TEST

/*
 * Times set before a SAVE (the checkpoints hold them) and others after it (the log): SIGKILL,
 * and the restart has both; a time cleared after the SAVE (PERSIST in the log over a time in
 * the checkpoint) stays cleared, also after the time has passed.
 */
START_TEST(test_kill9_checkpoint_and_log)
{
	struct times a, b;
	int64_t t_ack;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	make_pair(fd, "a-small-filter", "a-big-filter");
	set_times(fd, "a", &a);
	RX(fd, "BF.RESERVE cleared 0.01 100", "+OK\r\n");
	RX(fd, "BF.ADD cleared x", ":1\r\n");
	RX(fd, "BF.RESERVE cleared-big 0.01 200000", "+OK\r\n");
	RX(fd, "BF.ADD cleared-big x", ":1\r\n");
	RXF(fd, ":1\r\n", "PEXPIRE cleared %d", short_ms(1000));
	RXF(fd, ":1\r\n", "PEXPIRE cleared-big %d", short_ms(1000));
	RX(fd, "SAVE", "+OK\r\n");
	t_ack = unix_ms();
	RX(fd, "PERSIST cleared", ":1\r\n");
	RX(fd, "PERSIST cleared-big", ":1\r\n");
	make_pair(fd, "b-small-filter", "b-big-filter");
	set_times(fd, "b", &b);
	/* Moved after the SAVE: the log's time wins over the checkpoint's. */
	a.big_at -= 5000;
	RXF(fd, ":1\r\n", "PEXPIREAT a-big-filter %lld", a.big_at);
	close(fd);
	kill9();
	/* Past the time the checkpoints hold for "cleared". */
	while (unix_ms() < t_ack + short_ms(1000) + 100)
		itest_sleep_ms(20);

	start_in(CONF_QUIET);
	fd = conn();
	check_times(fd, "a", &a);
	check_times(fd, "b", &b);
	RX(fd, "TTL cleared", ":-1\r\n");
	RX(fd, "TTL cleared-big", ":-1\r\n");
	RX(fd, "BF.EXISTS cleared x", ":1\r\n");
	RX(fd, "BF.EXISTS cleared-big x", ":1\r\n");
	ck_assert_int_eq(expired_keys(fd), 0);
	keyspace_avg(fd, 12, 6, 0, 7200123);
	close(fd);
	stop();
	ck_assert(exists("cleared-big.bsnap"));
}
END_TEST

/*
 * Filters whose time passed while the daemon was down (their time in the checkpoints: _i 0,
 * or only in the log: _i 1) are gone before it listens: the large one's file already removed
 * when the port answers, the small one's pack entry at the next checkpoint; counted in
 * expired_keys; the others (with keys, with a later time) intact. A second restart finds the
 * same.
 */
START_TEST(test_expired_while_down)
{
	bool in_log = _i == 1;
	int64_t t_ack;
	long again;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	make_pair(fd, "dead-small-filter", "dead-big-filter");
	make_pair(fd, "live-small-filter", "live-big-filter");
	RX(fd, "EXPIRE live-big-filter 3600", ":1\r\n");
	if (in_log)
		RX(fd, "SAVE", "+OK\r\n");
	RXF(fd, ":1\r\n", "PEXPIRE dead-small-filter %d", short_ms(800));
	RXF(fd, ":1\r\n", "PEXPIRE dead-big-filter %d", short_ms(800));
	t_ack = unix_ms();
	if (!in_log)
		RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("dead-big-filter.bsnap"));
	ck_assert_ptr_nonnull(pack_with("dead-small-filter"));
	close(fd);
	kill9();
	ck_assert_msg(unix_ms() < t_ack + short_ms(800), "too slow to stop before the time came");
	while (unix_ms() < t_ack + short_ms(800) + 100)
		itest_sleep_ms(20);

	start_in(CONF_QUIET);
	/* Gone before the first client could come. */
	ck_assert(!exists("dead-big-filter.bsnap"));
	fd = conn();
	ck_assert_int_eq(expired_keys(fd), 2);
	keyspace_avg(fd, 2, 1, 3580000, 3600000);
	absent(fd, "dead-small-filter");
	absent(fd, "dead-big-filter");
	RX(fd, "TTL dead-small-filter", ":-2\r\n");
	has_keys(fd, "live-small-filter", "k", 50);
	has_keys(fd, "live-big-filter", "k", 50);
	RX(fd, "TTL live-small-filter", ":-1\r\n");
	ck_assert_int_ge(integer(fd, "TTL live-big-filter"), 3590);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert_ptr_null(pack_with("dead-small-filter"));
	ck_assert_ptr_nonnull(pack_with("live-small-filter"));
	ck_assert(exists("live-big-filter.bsnap"));
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	again = expired_keys(fd);
	keyspace_avg(fd, 2, 1, 3580000, 3600000);
	absent(fd, "dead-small-filter");
	absent(fd, "dead-big-filter");
	has_keys(fd, "live-small-filter", "k", 50);
	/* The names are free: new filters, without the old keys. */
	RX(fd, "BF.ADD dead-small-filter k:0", ":1\r\n");
	RX(fd, "BF.ADD dead-big-filter k:0", ":1\r\n");
	RX(fd, "BF.CARD dead-big-filter", ":1\r\n");
	close(fd);
	stop();
	ck_assert(!exists("dead-big-filter.bsnap.tmp"));
	/* Counted at the first restart, where their time was found past; not at this one. */
	ck_assert_msg(again == 0,
		      "expired_keys:%ld at the second restart: filters that expired "
		      "at the first were counted again",
		      again);
}
END_TEST

/*
 * PERSIST survives a restart: a short time cleared, SIGKILL (the log), the time passes, the
 * filter is there; then SAVE (the checkpoint without a time) and a clean stop.
 */
START_TEST(test_persist_survives_restart)
{
	int64_t t_ack;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	make_pair(fd, "p-small-filter", "p-big-filter");
	RXF(fd, ":1\r\n", "PEXPIRE p-small-filter %d", short_ms(600));
	RXF(fd, ":1\r\n", "PEXPIRE p-big-filter %d", short_ms(600));
	t_ack = unix_ms();
	RX(fd, "PERSIST p-small-filter", ":1\r\n");
	RX(fd, "PERSIST p-big-filter", ":1\r\n");
	close(fd);
	kill9();
	while (unix_ms() < t_ack + short_ms(600) + 100)
		itest_sleep_ms(20);

	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "TTL p-small-filter", ":-1\r\n");
	RX(fd, "TTL p-big-filter", ":-1\r\n");
	has_keys(fd, "p-small-filter", "k", 50);
	has_keys(fd, "p-big-filter", "k", 50);
	keyspace_is(fd, "keys=2,expires=0,avg_ttl=0");
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	stop();

	start_in(CONF("snapshot_interval = 3600\nwal = off\n"));
	fd = conn();
	RX(fd, "TTL p-small-filter", ":-1\r\n");
	RX(fd, "TTL p-big-filter", ":-1\r\n");
	has_keys(fd, "p-big-filter", "k", 50);
	ck_assert_int_eq(expired_keys(fd), 0);
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* RENAME, INFO */

/*
 * RENAME and RENAMENX keep the time (Redis's renameGenericCommand); a filter renamed over one
 * with a time gives it its own (or none); the time survives SIGKILL under the new name; a short
 * time runs out under the new name, whose file the timer removes.
 */
START_TEST(test_rename_keeps_ttl)
{
	const int ttl = 600;
	long long at;
	int64_t t_sent, t_ack;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	RX(fd, "BF.RESERVE a 0.0001 1000", "+OK\r\n");
	resp_add_keys(fd, "a", "k", 20);
	RX(fd, "EXPIRE a 100", ":1\r\n");
	at = integer(fd, "PEXPIRETIME a");
	RX(fd, "RENAME a b", "+OK\r\n");
	RX(fd, "TTL a", ":-2\r\n");
	RX(fd, "TTL b", ":100\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME b"), at);
	RX(fd, "RENAMENX b c", ":1\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME c"), at);
	/* Over a filter with a time: the source's time. */
	RX(fd, "BF.RESERVE t 0.01 100", "+OK\r\n");
	RX(fd, "EXPIRE t 50", ":1\r\n");
	RX(fd, "RENAME c t", "+OK\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME t"), at);
	has_keys(fd, "t", "k", 20);
	/* A filter without a time over one with a time: none. */
	RX(fd, "BF.RESERVE u 0.01 100", "+OK\r\n");
	RX(fd, "BF.RESERVE v 0.01 100", "+OK\r\n");
	RX(fd, "EXPIRE v 50", ":1\r\n");
	RX(fd, "RENAME u v", "+OK\r\n");
	RX(fd, "TTL v", ":-1\r\n");
	keyspace_avg(fd, 2, 1, 95000, 100000);
	/* To its own name: unchanged. */
	RX(fd, "RENAME t t", "+OK\r\n");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME t"), at);
	/* A large filter renamed, then SIGKILL. */
	RX(fd, "BF.RESERVE big-a 0.01 200000", "+OK\r\n");
	resp_add_keys(fd, "big-a", "k", 20);
	RX(fd, "PEXPIREAT big-a 99999999999999", ":1\r\n");
	RX(fd, "RENAME big-a big-b", "+OK\r\n");
	ck_assert(exists("big-b.bsnap"));
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	ck_assert_int_eq(integer(fd, "PEXPIRETIME t"), at);
	RX(fd, "PEXPIRETIME big-b", ":99999999999999\r\n");
	RX(fd, "TTL big-a", ":-2\r\n");
	RX(fd, "TTL v", ":-1\r\n");
	has_keys(fd, "big-b", "k", 20);
	/* A short time, then renamed: it runs out under the new name, file and all. */
	RX(fd, "RENAME big-b big-c", "+OK\r\n");
	ck_assert(exists("big-c.bsnap"));
	ck_assert(!exists("big-b.bsnap"));
	pexpire(fd, "big-c", ttl, &t_sent, &t_ack);
	RX(fd, "RENAME big-c big-d", "+OK\r\n");
	ck_assert(exists("big-d.bsnap"));
	while (exists("big-d.bsnap")) {
		ck_assert_msg(unix_ms() <= t_ack + ttl + slack_ms(),
			      "big-d.bsnap still there %lld ms after its time",
			      (long long)(unix_ms() - t_ack - ttl));
		itest_sleep_ms(5);
	}
	ck_assert_int_ge(unix_ms(), t_sent + ttl - 2);
	absent(fd, "big-d");
	absent(fd, "big-c");
	ck_assert(!exists("big-c.bsnap"));
	ck_assert_int_eq(expired_keys(fd), 1);
	close(fd);
	stop();
}
END_TEST

/*
 * INFO: the keyspace line exact (keys, expires, avg_ttl: the mean time left in ms), and
 * expired_keys counting the filters whose time came (by the timer or a lookup), not those
 * deleted by DEL, FLUSHALL or a time in the past.
 */
START_TEST(test_info_counters)
{
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	keyspace_is(fd, "");
	ck_assert_int_eq(expired_keys(fd), 0);
	ck_assert_ptr_nonnull(strstr(info(fd, "stats"), "\r\nexpired_keys:0\r\n"));
	ck_assert_ptr_nonnull(strstr(info(fd, "everything"), "\r\nexpired_keys:0\r\n"));

	RX(fd, "BF.RESERVE a 0.01 100", "+OK\r\n");
	RX(fd, "BF.RESERVE b 0.01 100", "+OK\r\n");
	RX(fd, "BF.RESERVE c 0.01 100", "+OK\r\n");
	keyspace_is(fd, "keys=3,expires=0,avg_ttl=0");
	RX(fd, "EXPIRE a 100", ":1\r\n");
	RX(fd, "EXPIRE b 200", ":1\r\n");
	keyspace_avg(fd, 3, 2, 145000, 150000);
	/* In the full INFO too. */
	ck_assert_ptr_nonnull(strstr(info(fd, "everything"), "\r\ndb0:keys=3,expires=2,avg_ttl="));
	RX(fd, "PERSIST b", ":1\r\n");
	keyspace_avg(fd, 3, 1, 95000, 100000);
	RX(fd, "EXPIRE a 300 XX", ":1\r\n");
	keyspace_avg(fd, 3, 1, 295000, 300000);
	RX(fd, "DEL a", ":1\r\n");
	keyspace_is(fd, "keys=2,expires=0,avg_ttl=0");
	ck_assert_int_eq(expired_keys(fd), 0);

	/* By the timer: no lookup. */
	RX(fd, "PEXPIRE c 200", ":1\r\n");
	itest_sleep_ms(200 + slack_ms());
	ck_assert_int_eq(expired_keys(fd), 1);
	keyspace_is(fd, "keys=1,expires=0,avg_ttl=0");
	/* By a lookup (or the timer, whichever comes first): counted once. */
	RX(fd, "PEXPIRE b 50", ":1\r\n");
	itest_sleep_ms(60);
	RX(fd, "BF.EXISTS b x", ":0\r\n");
	RX(fd, "BF.EXISTS b x", ":0\r\n");
	ck_assert_int_eq(expired_keys(fd), 2);
	keyspace_is(fd, "");

	/* Gone otherwise: not counted. */
	RX(fd, "BF.RESERVE d 0.01 100", "+OK\r\n");
	RX(fd, "EXPIRE d -1", ":1\r\n");
	RX(fd, "BF.RESERVE e 0.01 100", "+OK\r\n");
	RX(fd, "BF.RESERVE f 0.01 100", "+OK\r\n");
	RX(fd, "EXPIRE e 100", ":1\r\n");
	RX(fd, "EXPIRE f 100", ":1\r\n");
	RX(fd, "DEL e", ":1\r\n");
	keyspace_avg(fd, 1, 1, 95000, 100000);
	RX(fd, "FLUSHALL", "+OK\r\n");
	keyspace_is(fd, "");
	RX(fd, "BF.RESERVE g 0.01 100", "+OK\r\n");
	keyspace_is(fd, "keys=1,expires=0,avg_ttl=0");
	ck_assert_int_eq(expired_keys(fd), 2);
	/* FLUSHALL left no time behind: the timer finds nothing to do. */
	itest_sleep_ms(250);
	ck_assert_int_eq(expired_keys(fd), 2);
	keyspace_is(fd, "keys=1,expires=0,avg_ttl=0");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* HTTP and the text protocol */

/* GET of a filter made by PUT (see filter_json) answers 200 with its seconds left, as TTL
 * says just before (or just after, if a second turned in between). */
static void http_get_ttl(int fd, const char *name, unsigned long cap)
{
	char path[256], ttl[32], cmd[256];
	const char *r, *b;

	FMT(path, "/v1/filters/%s", name);
	FMT(cmd, "TTL %s", name);
	for (int i = 0; i < 2; i++) {
		FMT(ttl, "%lld", integer(fd, cmd));
		r = http("GET", path, "");
		b = strstr(r, "\r\n\r\n");
		ck_assert_ptr_nonnull(b);
		if (!strcmp(b + 4, filter_json(fd, name, cap, ttl)))
			break;
	}
	http_is(r, 200, filter_json(fd, name, cap, ttl));
}

#define TTL_RANGE   "\\\"ttl_seconds\\\" must be an integer from 1 to 9007199254740, or null for none"
#define PATCH_SHAPE "the body must be {\\\"ttl_seconds\\\":N} or {\\\"ttl_seconds\\\":null}"

/*
 * PUT with ttl_seconds (a number, null, absent), GET, PATCH setting and clearing it; the exact
 * status and JSON of each, RESP's TTL agreeing; every bad value and body refused with 400 and
 * nothing changed; PATCH of a filter that does not exist is 404; a 1-second time runs out (GET
 * 404); the time survives SIGKILL.
 */
START_TEST(test_http_ttl)
{
	static const char *const bad_ttl[] = {"0",  "-1", "1.5",	   "\"10\"", "true",
					      "[]", "{}", "9007199254741", "1e300"};
	static const char *const bad_patch[] = {"{}", "{\"ttl\":5}", "{\"ttl_seconds\":5,\"x\":1}",
						"{\"x\":1,\"ttl_seconds\":5}",
						"{\"ttl_seconds\":5,\"ttl_seconds\":6}"};
	char body[256];
	const char *r;
	long long at1, at3;
	int64_t t_sent, t_ack;
	int fd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();

	r = http("PUT", "/v1/filters/h1",
		 "{\"capacity\":1000,\"error_rate\":0.01,\"ttl_seconds\":100}");
	http_is(r, 201, filter_json(fd, "h1", 1000, "100"));
	ck_assert_ptr_nonnull(strstr(r, "\r\nLocation: /v1/filters/h1\r\n"));
	http_is(http("GET", "/v1/filters/h1", ""), 200, filter_json(fd, "h1", 1000, "100"));
	RX(fd, "TTL h1", ":100\r\n");
	/* null and absent: none. */
	r = http("PUT", "/v1/filters/h2",
		 "{\"capacity\":1000,\"error_rate\":0.01,\"ttl_seconds\":null}");
	http_is(r, 201, filter_json(fd, "h2", 1000, "null"));
	r = http("PUT", "/v1/filters/h3", "{\"capacity\":500,\"error_rate\":0.01}");
	http_is(r, 201, filter_json(fd, "h3", 500, "null"));
	RX(fd, "TTL h2", ":-1\r\n");
	RX(fd, "TTL h3", ":-1\r\n");
	/* The largest. */
	r = http("PUT", "/v1/filters/h4",
		 "{\"capacity\":1000,\"error_rate\":0.01,\"ttl_seconds\":9007199254740}");
	http_is(r, 201, filter_json(fd, "h4", 1000, "9007199254740"));
	RX(fd, "TTL h4", ":9007199254740\r\n");
	/* Set by RESP, seen by HTTP. */
	RX(fd, "EXPIRE h3 4321", ":1\r\n");
	http_is(http("GET", "/v1/filters/h3", ""), 200, filter_json(fd, "h3", 500, "4321"));
	/* The listing. */
	r = http("GET", "/v1/filters", "");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%s", r);

	/* PUT of an existing filter: 409, its time unchanged. */
	r = http("PUT", "/v1/filters/h1",
		 "{\"capacity\":1000,\"error_rate\":0.01,\"ttl_seconds\":5}");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 409 ", 13), "%s", r);
	RX(fd, "TTL h1", ":100\r\n");
	/* Bad ttl_seconds at create: 400, nothing created. */
	for (size_t i = 0; i < sizeof(bad_ttl) / sizeof(bad_ttl[0]); i++) {
		FMT(body, "{\"capacity\":1000,\"ttl_seconds\":%s}", bad_ttl[i]);
		http_bad(http("PUT", "/v1/filters/bad", body), TTL_RANGE);
	}
	RX(fd, "EXISTS bad", ":0\r\n");

	/* PATCH: set, move, clear. */
	http_is(http("PATCH", "/v1/filters/h2", "{\"ttl_seconds\":50}"), 200,
		filter_json(fd, "h2", 1000, "50"));
	RX(fd, "TTL h2", ":50\r\n");
	http_is(http("PATCH", "/v1/filters/h2", "{\"ttl_seconds\":7000}"), 200,
		filter_json(fd, "h2", 1000, "7000"));
	RX(fd, "TTL h2", ":7000\r\n");
	http_is(http("PATCH", "/v1/filters/h2", " {\"ttl_seconds\" : null}\n"), 200,
		filter_json(fd, "h2", 1000, "null"));
	RX(fd, "TTL h2", ":-1\r\n");
	http_is(http("PATCH", "/v1/filters/h2", "{\"ttl_seconds\":null}"), 200,
		filter_json(fd, "h2", 1000, "null"));
	http_is(http("PATCH", "/v1/filters/h1", "{\"ttl_seconds\":null}"), 200,
		filter_json(fd, "h1", 1000, "null"));
	RX(fd, "TTL h1", ":-1\r\n");
	http_is(http("PATCH", "/v1/filters/h1", "{\"ttl_seconds\":9007199254740}"), 200,
		filter_json(fd, "h1", 1000, "9007199254740"));
	at1 = integer(fd, "PEXPIRETIME h1");
	/* Bad bodies: 400, the time unchanged. */
	for (size_t i = 0; i < sizeof(bad_ttl) / sizeof(bad_ttl[0]); i++) {
		FMT(body, "{\"ttl_seconds\":%s}", bad_ttl[i]);
		http_bad(http("PATCH", "/v1/filters/h1", body), TTL_RANGE);
	}
	for (size_t i = 0; i < sizeof(bad_patch) / sizeof(bad_patch[0]); i++)
		http_bad(http("PATCH", "/v1/filters/h1", bad_patch[i]), PATCH_SHAPE);
	http_bad(http("PATCH", "/v1/filters/h1", ""), PATCH_SHAPE);
	http_bad(http("PATCH", "/v1/filters/h1", "[1]"), "the body must be a JSON object");
	http_bad(http("PATCH", "/v1/filters/h1", "12"), "the body must be a JSON object");
	http_bad(http("PATCH", "/v1/filters/h1", "null"), "the body must be a JSON object");
	http_bad(http("PATCH", "/v1/filters/h1", "{\"ttl_seconds\":"), "malformed JSON");
	http_bad(http("PATCH", "/v1/filters/h1", "{\"ttl_seconds\":1} x"),
		 "malformed JSON: text after the value");
	ck_assert_int_eq(integer(fd, "PEXPIRETIME h1"), at1);
	/* No such filter. */
	http_is(http("PATCH", "/v1/filters/nope", "{\"ttl_seconds\":5}"), 404, NOT_FOUND_JSON);
	RX(fd, "EXISTS nope", ":0\r\n");

	/* A second's time runs out: GET says 404 from then on. */
	t_sent = unix_ms();
	r = http("PUT", "/v1/filters/short",
		 "{\"capacity\":1000,\"error_rate\":0.01,\"ttl_seconds\":1}");
	t_ack = unix_ms();
	http_is(r, 201, filter_json(fd, "short", 1000, "1"));
	poll_until_gone(fd, &(struct probe){"HTTP GET", there_http}, "short", t_sent, t_ack, 1000);
	/* ... and by PATCH. */
	r = http("PUT", "/v1/filters/short", "{\"capacity\":1000,\"error_rate\":0.01}");
	http_is(r, 201, filter_json(fd, "short", 1000, "null"));
	t_sent = unix_ms();
	r = http("PATCH", "/v1/filters/short", "{\"ttl_seconds\":1}");
	t_ack = unix_ms();
	http_is(r, 200, filter_json(fd, "short", 1000, "1"));
	poll_until_gone(fd, &(struct probe){"HTTP GET", there_http}, "short", t_sent, t_ack, 1000);
	http_is(http("PATCH", "/v1/filters/short", "{\"ttl_seconds\":5}"), 404, NOT_FOUND_JSON);
	ck_assert_int_eq(expired_keys(fd), 2);
	at3 = integer(fd, "PEXPIRETIME h3");
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	ck_assert_int_eq(integer(fd, "PEXPIRETIME h1"), at1);
	ck_assert_int_eq(integer(fd, "PEXPIRETIME h3"), at3);
	RX(fd, "TTL h2", ":-1\r\n");
	http_get_ttl(fd, "h3", 500);
	http_is(http("GET", "/v1/filters/short", ""), 404, NOT_FOUND_JSON);
	close(fd);
	stop();
}
END_TEST

/* The text protocol: `expires NAME SECONDS` (0: never) and its errors, info's ttl line (-1:
 * never), a 1-second time running out (check, info: "Filter does not exist"), SIGKILL. */
START_TEST(test_text_expires)
{
	int64_t t_sent, t_ack;
	long long at;
	const char *r;
	int fd, tfd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	tfd = conn();
	TXT(tfd, "create t capacity=1000 prob=0.01", "Done\n");
	TXT(tfd, "set t a", "Yes\n");
	r = txt(tfd, "info t");
	ck_assert_msg(strstr(r, "\ndelete_misses 0\nttl -1\nEND\n"), "%s", r);
	TXT(tfd, "expires t 100", "Done\n");
	RX(fd, "TTL t", ":100\r\n");
	r = txt(tfd, "info t");
	ck_assert_msg(strstr(r, "\ndelete_misses 0\nttl 100\nEND\n"), "%s", r);
	TXT(tfd, "expires t 0", "Done\n");
	RX(fd, "TTL t", ":-1\r\n");
	r = txt(tfd, "info t");
	ck_assert_msg(strstr(r, "\nttl -1\nEND\n"), "%s", r);
	/* 0 on a filter without a time: still Done. */
	TXT(tfd, "expires t 0", "Done\n");
	/* Set by RESP, seen by text. */
	RX(fd, "PEXPIRE t 7300", ":1\r\n");
	r = txt(tfd, "info t");
	ck_assert_msg(strstr(r, "\nttl 7\nEND\n"), "%s", r);
	TXT(tfd, "expires t 86400", "Done\n");
	RX(fd, "TTL t", ":86400\r\n");

	/* Errors, nothing changed. */
	TXT(tfd, "expires missing 10", "Filter does not exist\n");
	TXT(tfd, "expires t abc", "Client Error: Bad arguments\n");
	TXT(tfd, "expires t -1", "Client Error: Bad arguments\n");
	TXT(tfd, "expires t 1.5", "Client Error: Bad arguments\n");
	TXT(tfd, "expires t 99999999999999999999", "Client Error: Bad arguments\n");
	TXT(tfd, "expires t 9223372036854775807", "Client Error: Bad arguments\n");
	TXT(tfd, "expires t", "Client Error: Must provide filter name and seconds\n");
	TXT(tfd, "expires", "Client Error: Must provide filter name and seconds\n");
	TXT(tfd, "expires t 10 20", "Client Error: Unexpected arguments\n");
	TXT(tfd, "expires missing abc", "Client Error: Bad arguments\n");
	RX(fd, "TTL t", ":86400\r\n");
	RX(fd, "EXISTS missing", ":0\r\n");
	/* The extension's name in any case, as blossomd's others. */
	TXT(tfd, "EXPIRES t 86000", "Done\n");
	RX(fd, "TTL t", ":86000\r\n");
	at = integer(fd, "PEXPIRETIME t");

	/* A second runs out: check, info and expires say the filter does not exist. */
	TXT(tfd, "create short capacity=1000 prob=0.01", "Done\n");
	TXT(tfd, "set short k:0", "Yes\n");
	t_sent = unix_ms();
	TXT(tfd, "expires short 1", "Done\n");
	t_ack = unix_ms();
	poll_until_gone(tfd, &(struct probe){"text check", there_text}, "short", t_sent, t_ack,
			1000);
	TXT(tfd, "info short", "Filter does not exist\n");
	TXT(tfd, "expires short 5", "Filter does not exist\n");
	TXT(tfd, "check short k:0", "Filter does not exist\n");
	ck_assert_int_eq(expired_keys(fd), 1);
	close(tfd);
	close(fd);
	kill9();

	start_in(CONF_QUIET);
	fd = conn();
	ck_assert_int_eq(integer(fd, "PEXPIRETIME t"), at);
	RX(fd, "BF.EXISTS t a", ":1\r\n");
	RX(fd, "EXISTS short", ":0\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * The text protocol's largest times: seconds whose time (now + seconds, in ms) does not fit
 * the long long ms that RESP's EXPIRE family reads and answers in are refused, as Redis refuses
 * them ("invalid expire time"); HTTP's largest (2^53 ms) is a time, and RESP reads it back.
 */
START_TEST(test_text_expires_too_far)
{
	char line[128];
	int fd, tfd;

	data_dir_new();
	start_in(CONF_QUIET);
	fd = conn();
	tfd = conn();
	TXT(tfd, "create t capacity=1000 prob=0.01", "Done\n");
	TXT(tfd, "expires t 9007199254740", "Done\n");
	RX(fd, "TTL t", ":9007199254740\r\n");
	TXT(tfd, "expires t 0", "Done\n");
	/* 9223372036854775 s: 9223372036854775000 ms, past LLONG_MAX once now is added. */
	FMT(line, "expires t %lld", 9223372036854775LL);
	TXT(tfd, line, "Client Error: Bad arguments\n");
	FMT(line, "expires t %lld", 9223372036854775LL - unix_ms() / 1000 + 10);
	TXT(tfd, line, "Client Error: Bad arguments\n");
	RX(fd, "TTL t", ":-1\r\n");
	RX(fd, "PEXPIRETIME t", ":-1\r\n");
	RX(fd, "EXPIRE t 100 GT", ":0\r\n");
	close(tfd);
	close(fd);
	stop();
}
END_TEST

static Suite *expire_suite(void)
{
	Suite *s = suite_create("expire");
	TCase *replies = tcase_create("replies");
	TCase *on_time = tcase_create("on_time");
	TCase *restart = tcase_create("restart");
	TCase *keys = tcase_create("keys");
	TCase *front = tcase_create("http_text");

	tcase_set_timeout(replies, 60);
	tcase_add_test(replies, test_replies_ttl);
	tcase_add_test(replies, test_replies_options);
	tcase_add_test(replies, test_replies_times);
	tcase_add_test(replies, test_expiretime_of_the_largest_times);
	suite_add_tcase(s, replies);

	tcase_set_timeout(on_time, 120);
	tcase_add_loop_test(on_time, test_gone_on_time, 0, NPROBES);
	tcase_add_test(on_time, test_timer_removes_files);
	tcase_add_test(on_time, test_many_at_once);
	tcase_add_test(on_time, test_expire_during_bgsave);
	suite_add_tcase(s, on_time);

	tcase_set_timeout(restart, 180);
	tcase_add_test(restart, test_kill9_log_only);
	tcase_add_test(restart, test_kill9_checkpoint_only);
	tcase_add_test(restart, test_kill9_checkpoint_and_log);
	tcase_add_loop_test(restart, test_expired_while_down, 0, 2);
	tcase_add_test(restart, test_persist_survives_restart);
	suite_add_tcase(s, restart);

	tcase_set_timeout(keys, 120);
	tcase_add_test(keys, test_rename_keeps_ttl);
	tcase_add_test(keys, test_info_counters);
	suite_add_tcase(s, keys);

	tcase_set_timeout(front, 120);
	tcase_add_test(front, test_http_ttl);
	tcase_add_test(front, test_text_expires);
	tcase_add_test(front, test_text_expires_too_far);
	suite_add_tcase(s, front);
	return s;
}

CHECK_MAIN(expire_suite)
