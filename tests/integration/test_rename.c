/* SPDX-License-Identifier: MIT */
/*
 * RENAME and RENAMENX against the real daemon: the exact RESP replies of every case (Redis 7's
 * renameGenericCommand: +OK, :1, :0, "no such key", arity errors; "bad filter name" for a name
 * no filter may have); what was acknowledged is what a restart finds, after SIGKILL (the log
 * alone, or the log after a SAVE, or with periodic checkpoints in between) and after a clean
 * SIGTERM (also without a log): filters under their new names with their keys, a renamed-over
 * target's old keys gone, the old names absent or held by new filters created after the
 * rename, chains of renames, small (packed) and large (a file of their own) filters alike;
 * the files in data_dir (the new name's file written at once, no file left under an old name);
 * a filter found on disk under its old and its new name (as a crash between the two leaves it)
 * loaded once; memory-only filters renamed over persistent ones and the reverse; HTTP's rename
 * route across a SIGKILL; and RENAME as an atomic swap: a client checking a key without pause
 * never sees it missing while another replaces the filter again and again, and after a restart
 * only the last replacement is there (also for the smallest swap: twice).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#define ITEST_T	      10000 /* snapshots of large filters under a sanitizer take a while */
#define ITEST_STOP_MS 30000
#include "tests/integration/itest_case.h"

/* ---------------------------------------------------------------------------------------- */
/* RESP */

/* RENAME or RENAMENX (cmd) of two names that may hold any byte. */
static const char *rename_bin(int fd, const char *cmd, const char *from, size_t flen,
			      const char *to, size_t tlen)
{
	const char *argv[] = {cmd, from, to};
	size_t lens[] = {strlen(cmd), flen, tlen};

	return callv(fd, 3, argv, lens);
}

static void has_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	unsigned got = resp_count_keys(fd, filter, tag, n);

	ck_assert_msg(got == n, "%s has %u of the %u keys %s:*", filter, got, n, tag);
}

/* None of the keys (filters here have a low false-positive rate, or are far from full). */
static void lacks_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	unsigned got = resp_count_keys(fd, filter, tag, n);

	ck_assert_msg(got == 0, "%s has %u of the %u keys %s:* (none expected)", filter, got, n,
		      tag);
}

/* filter exists, with this capacity (BF.INFO) and this many items (BF.CARD). */
static void filter_is(int fd, const char *name, unsigned long capacity, unsigned long items)
{
	char cmd[256], expect[64];

	FMT(cmd, "EXISTS %s", name);
	ck_assert_msg(!strcmp(call(fd, cmd), ":1\r\n"), "%s does not exist", name);
	FMT(cmd, "BF.INFO %s CAPACITY", name);
	FMT(expect, "*1\r\n:%lu\r\n", capacity);
	ck_assert_str_eq(call(fd, cmd), expect);
	FMT(cmd, "BF.CARD %s", name);
	FMT(expect, ":%lu\r\n", items);
	ck_assert_str_eq(call(fd, cmd), expect);
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* KEYS * names exactly these filters (sorted, n at most 32). */
static void keys_are(int fd, const char *const *want, size_t n)
{
	static char names[32][256];
	const char *got[32], *sorted[32];
	const char *r = call(fd, "KEYS *"), *p;
	size_t m;

	ck_assert_msg(r[0] == '*', "%s", r);
	m = (size_t)atol(r + 1);
	ck_assert_msg(m == n, "KEYS * has %zu names, not %zu: %s", m, n, r);
	p = strstr(r, "\r\n") + 2;
	for (size_t i = 0; i < m; i++) {
		size_t len = (size_t)atol(p + 1);

		p = strstr(p, "\r\n") + 2;
		ck_assert_uint_lt(len, sizeof(names[i]));
		memcpy(names[i], p, len);
		names[i][len] = '\0';
		got[i] = names[i];
		p += len + 2;
	}
	memcpy(sorted, want, n * sizeof(*want));
	qsort(got, m, sizeof(*got), by_str);
	qsort(sorted, n, sizeof(*sorted), by_str);
	for (size_t i = 0; i < n; i++)
		ck_assert_str_eq(got[i], sorted[i]);
}

/* ---------------------------------------------------------------------------------------- */
/* Exact replies */

#define NO_SUCH_KEY "-ERR no such key\r\n"
#define BAD_NAME    "-ERR bad filter name\r\n"
#define ARITY(cmd)  "-ERR wrong number of arguments for '" cmd "' command\r\n"

START_TEST(test_replies)
{
	char n200[201], n201[202];
	int fd;

	memset(n200, 'n', 200);
	n200[200] = '\0';
	memset(n201, 'x', 201);
	n201[201] = '\0';
	data_dir_new();
	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();

	/* No such source, whatever the new name (Redis looks the source up first). */
	RX(fd, "RENAME a b", NO_SUCH_KEY);
	RX(fd, "RENAMENX a b", NO_SUCH_KEY);
	RX(fd, "RENAME a a", NO_SUCH_KEY);
	RX(fd, "RENAMENX a a", NO_SUCH_KEY);
	ck_assert_str_eq(rename_bin(fd, "RENAME", "a", 1, "x y", 3), NO_SUCH_KEY);
	ck_assert_str_eq(rename_bin(fd, "RENAMENX", "a", 1, "", 0), NO_SUCH_KEY);

	RX(fd, "BF.RESERVE a 0.000001 100", "+OK\r\n");
	RX(fd, "BF.ADD a k", ":1\r\n");
	RX(fd, "RENAME a b", "+OK\r\n");
	RX(fd, "EXISTS a", ":0\r\n");
	RX(fd, "EXISTS b", ":1\r\n");
	RX(fd, "BF.EXISTS b k", ":1\r\n");
	RX(fd, "BF.EXISTS a k", ":0\r\n");
	RX(fd, "RENAME a b", NO_SUCH_KEY);
	/* To its own name: RENAME does nothing and says OK, RENAMENX says 0. */
	RX(fd, "RENAME b b", "+OK\r\n");
	RX(fd, "RENAMENX b b", ":0\r\n");
	RX(fd, "BF.EXISTS b k", ":1\r\n");
	/* RENAMENX to a free name: 1. */
	RX(fd, "RENAMENX b c", ":1\r\n");
	RX(fd, "EXISTS b", ":0\r\n");
	RX(fd, "BF.EXISTS c k", ":1\r\n");
	/* RENAMENX to a taken name: 0, both unchanged. */
	RX(fd, "BF.RESERVE d 0.000001 200", "+OK\r\n");
	RX(fd, "BF.ADD d dk", ":1\r\n");
	RX(fd, "RENAMENX c d", ":0\r\n");
	RX(fd, "BF.EXISTS c k", ":1\r\n");
	RX(fd, "BF.EXISTS d dk", ":1\r\n");
	RX(fd, "BF.EXISTS d k", ":0\r\n");
	/* RENAME over it: d is c now, its own keys gone, c gone. */
	RX(fd, "RENAME c d", "+OK\r\n");
	RX(fd, "EXISTS c", ":0\r\n");
	RX(fd, "BF.EXISTS d k", ":1\r\n");
	RX(fd, "BF.EXISTS d dk", ":0\r\n");
	RX(fd, "BF.INFO d CAPACITY", "*1\r\n:100\r\n");
	RX(fd, "BF.CARD d", ":1\r\n");
	RX(fd, "DBSIZE", ":1\r\n");

	/* Names no filter may have; nothing changes. */
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, "x y", 3), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAMENX", "d", 1, "x y", 3), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, "", 0), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, "x\ny", 3), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, "x\0y", 3), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, n201, 201), BAD_NAME);
	ck_assert_str_eq(rename_bin(fd, "RENAMENX", "d", 1, n201, 201), BAD_NAME);
	RX(fd, "KEYS *", "*1\r\n$1\r\nd\r\n");
	/* 200 bytes, and bytes >= 0x80, are names. */
	ck_assert_str_eq(rename_bin(fd, "RENAME", "d", 1, n200, 200), "+OK\r\n");
	ck_assert_str_eq(rename_bin(fd, "RENAMENX", n200, 200, "caf\xc3\xa9\xff", 6), ":1\r\n");
	RX(fd, "KEYS *", "*1\r\n$6\r\ncaf\xc3\xa9\xff\r\n");
	ck_assert_str_eq(rename_bin(fd, "RENAME", "caf\xc3\xa9\xff", 6, "d", 1), "+OK\r\n");

	/* Arity, as Redis words it (the command's name in lower case). */
	RX(fd, "RENAME", ARITY("rename"));
	RX(fd, "RENAME d", ARITY("rename"));
	RX(fd, "RENAME d e f", ARITY("rename"));
	RX(fd, "RENAMENX d", ARITY("renamenx"));
	RX(fd, "RENAMENX d e f", ARITY("renamenx"));
	RX(fd, "rename d", ARITY("rename"));
	RX(fd, "ReNaMeNx d", ARITY("renamenx"));
	/* Command names in any case. */
	RX(fd, "rename d e", "+OK\r\n");
	RX(fd, "renamenx e d", ":1\r\n");
	/* Names are case-sensitive. */
	RX(fd, "RENAME D e", NO_SUCH_KEY);

	/* A pipeline: every reply in order. */
	ck_assert_int_eq(itest_send_str(fd, "*3\r\n$6\r\nRENAME\r\n$1\r\nd\r\n$1\r\ne\r\n"
					    "*3\r\n$8\r\nRENAMENX\r\n$1\r\ne\r\n$1\r\nd\r\n"
					    "*3\r\n$8\r\nRENAMENX\r\n$1\r\nd\r\n$1\r\nd\r\n"
					    "*3\r\n$6\r\nRENAME\r\n$1\r\ne\r\n$1\r\nf\r\n"),
			 0);
	EXCHANGE(fd, "", "+OK\r\n:1\r\n:0\r\n-ERR no such key\r\n");
	RX(fd, "KEYS *", "*1\r\n$1\r\nd\r\n");
	RX(fd, "BF.EXISTS d k", ":1\r\n");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* What a restart finds */

/* Sizes of the workload: a small filter (packed) and a large one (a file of its own). */
struct size {
	const char *p;		   /* the names' prefix: "small" or "large" */
	const char *rate;	   /* error rate: low, so absent keys test absent */
	unsigned long cap, t_cap;  /* the renamed filter's capacity, the target's */
	unsigned long new_cap;	   /* the filter created under the old name afterwards */
	unsigned n_a, n_t, n_b, n; /* keys: before the rename, the target's, after it, new */
};

static const struct size sizes[] = {
    {"small", "0.000001", 100, 200, 300, 50, 40, 30, 20},
    {"large", "0.001", 2000000, 1500000, 1000000, 2000, 1000, 1000, 500},
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static const char *nm(const struct size *s, const char *suffix)
{
	static char buf[8][64];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s-%s", s->p, suffix);
	return buf[i];
}

static void reserve(int fd, const char *name, const char *rate, unsigned long cap)
{
	char cmd[256];

	FMT(cmd, "BF.RESERVE %s %s %lu", name, rate, cap);
	RX(fd, cmd, "+OK\r\n");
}

static void rename_ok(int fd, const char *from, const char *to)
{
	char cmd[256];

	FMT(cmd, "RENAME %s %s", from, to);
	RX(fd, cmd, "+OK\r\n");
}

/* The workload's first part: for each size, X-a (keys X-a), X-t (keys X-t), X-gone-a; then
 * X-a -> X-b and X-gone-a -> X-gone-b; and a chain: chain-a -> chain-b -> chain-c. (The
 * same name renamed over twice is test_*_swap_twice's.) */
static void workload_before(int fd)
{
	for (size_t i = 0; i < NSIZES; i++) {
		const struct size *s = &sizes[i];

		reserve(fd, nm(s, "a"), s->rate, s->cap);
		resp_add_keys(fd, nm(s, "a"), nm(s, "a"), s->n_a);
		reserve(fd, nm(s, "t"), s->rate, s->t_cap);
		resp_add_keys(fd, nm(s, "t"), nm(s, "t"), s->n_t);
		reserve(fd, nm(s, "gone-a"), s->rate, s->cap);
		resp_add_keys(fd, nm(s, "gone-a"), nm(s, "gone"), 10);
		rename_ok(fd, nm(s, "a"), nm(s, "b"));
		rename_ok(fd, nm(s, "gone-a"), nm(s, "gone-b"));
	}
	reserve(fd, "chain-a", "0.000001", 100);
	resp_add_keys(fd, "chain-a", "c1", 10);
	rename_ok(fd, "chain-a", "chain-b");
	rename_ok(fd, "chain-b", "chain-c");
}

/*
 * The second part: keys added under the new name, X-b renamed over X-t (after a refused
 * RENAMENX), X-gone-b dropped, a new X-a; the chain's first name created again, and the chain
 * goes on with RENAMENX (chain-c -> chain-d; chain-d -> chain-a refused).
 */
static void workload_after(int fd)
{
	char cmd[256];

	for (size_t i = 0; i < NSIZES; i++) {
		const struct size *s = &sizes[i];

		resp_add_keys(fd, nm(s, "b"), nm(s, "b"), s->n_b);
		FMT(cmd, "RENAMENX %s %s", nm(s, "b"), nm(s, "t"));
		RX(fd, cmd, ":0\r\n");
		rename_ok(fd, nm(s, "b"), nm(s, "t"));
		FMT(cmd, "DEL %s", nm(s, "gone-b"));
		RX(fd, cmd, ":1\r\n");
		reserve(fd, nm(s, "a"), s->rate, s->new_cap);
		resp_add_keys(fd, nm(s, "a"), nm(s, "new"), s->n);
	}
	reserve(fd, "chain-a", "0.000001", 150);
	resp_add_keys(fd, "chain-a", "c2", 10);
	resp_add_keys(fd, "chain-c", "c3", 5);
	RX(fd, "RENAMENX chain-c chain-d", ":1\r\n");
	RX(fd, "RENAMENX chain-d chain-a", ":0\r\n");
}

/* Everything acknowledged by the workload, and nothing else. */
static void workload_check(int fd)
{
	static const char *const names[] = {"small-t", "small-a", "large-t",
					    "large-a", "chain-a", "chain-d"};

	for (size_t i = 0; i < NSIZES; i++) {
		const struct size *s = &sizes[i];

		/* X-t is the renamed filter: its capacity, its keys from before and after the
		 * rename; the old X-t's keys are gone. */
		filter_is(fd, nm(s, "t"), s->cap, s->n_a + s->n_b);
		has_keys(fd, nm(s, "t"), nm(s, "a"), s->n_a);
		has_keys(fd, nm(s, "t"), nm(s, "b"), s->n_b);
		lacks_keys(fd, nm(s, "t"), nm(s, "t"), s->n_t);
		/* X-a is the new filter of the old name, only its own keys. */
		filter_is(fd, nm(s, "a"), s->new_cap, s->n);
		has_keys(fd, nm(s, "a"), nm(s, "new"), s->n);
		lacks_keys(fd, nm(s, "a"), nm(s, "a"), s->n_a);
		absent(fd, nm(s, "b"));
		absent(fd, nm(s, "gone-a"));
		absent(fd, nm(s, "gone-b"));
	}
	filter_is(fd, "chain-d", 100, 15);
	has_keys(fd, "chain-d", "c1", 10);
	has_keys(fd, "chain-d", "c3", 5);
	lacks_keys(fd, "chain-d", "c2", 10);
	filter_is(fd, "chain-a", 150, 10);
	has_keys(fd, "chain-a", "c2", 10);
	lacks_keys(fd, "chain-a", "c1", 10);
	absent(fd, "chain-b");
	absent(fd, "chain-c");
	keys_are(fd, names, sizeof(names) / sizeof(names[0]));
}

/* No file and no pack entry under a name no filter has; the large filters' own files. */
static void files_check(void)
{
	static const char *const gone[] = {"large-b", "large-gone-a", "large-gone-b",
					   "small-b", "small-gone-a", "small-gone-b",
					   "chain-b", "chain-c"};
	char file[128];

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		FMT(file, "%s.bsnap", gone[i]);
		ck_assert_msg(!exists(file), "%s is left in %s", file, case_dir);
		ck_assert_msg(!pack_with(gone[i]), "%s is left in %s/%s", gone[i], case_dir,
			      pack_with(gone[i]));
	}
	ck_assert(exists("large-t.bsnap"));
	ck_assert(exists("large-a.bsnap"));
	ck_assert_int_eq(access("large-t.bsnap.tmp", F_OK), -1);
}

enum stop_how {
	BY_KILL,
	BY_TERM,
};

/*
 * The workload on a new data directory with conf, SAVE between its parts if save_between
 * (and a pause past a periodic checkpoint if pause_ms), stopped by SIGKILL or SIGTERM; the
 * restart finds exactly what was acknowledged. Then a SAVE (a checkpoint of what the restart
 * loaded and replayed), and a change to every small filter so that it is packed again, a
 * clean stop, and the state is the same again, with no file left under an old name.
 */
static void restart_round(const char *conf, bool save_between, int pause_ms, enum stop_how how)
{
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	workload_before(fd);
	if (save_between)
		RX(fd, "SAVE", "+OK\r\n");
	if (pause_ms)
		itest_sleep_ms(pause_ms);
	workload_after(fd);
	workload_check(fd);
	close(fd);
	if (how == BY_KILL)
		kill9();
	else
		stop();

	start_in(conf);
	fd = conn();
	workload_check(fd);
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	workload_check(fd);
	/* Changed, the small filters are packed again at the next checkpoint. */
	resp_add_keys(fd, "small-t", "small-more", 3);
	resp_add_keys(fd, "small-a", "small-more", 3);
	resp_add_keys(fd, "chain-a", "more", 3);
	resp_add_keys(fd, "chain-d", "more", 3);
	RX(fd, "SAVE", "+OK\r\n");
	files_check();
	close(fd);
	stop();
	files_check();

	start_in(conf);
	fd = conn();
	has_keys(fd, "small-t", "small-more", 3);
	has_keys(fd, "chain-d", "more", 3);
	filter_is(fd, "small-t", 100, 50 + 30 + 3);
	filter_is(fd, "chain-a", 150, 10 + 3);
	for (size_t i = 0; i < NSIZES; i++) {
		const struct size *s = &sizes[i];

		has_keys(fd, nm(s, "t"), nm(s, "a"), s->n_a);
		lacks_keys(fd, nm(s, "t"), nm(s, "t"), s->n_t);
		absent(fd, nm(s, "b"));
		absent(fd, nm(s, "gone-b"));
	}
	close(fd);
	stop();
	files_check();
}

/* SIGKILL with no checkpoint since the start: the log alone (wal_fsync = always, the default)
 * restores every rename. */
START_TEST(test_kill9_log_only)
{
	restart_round(CONF("snapshot_interval = 3600\n"), false, 0, BY_KILL);
}
END_TEST

/* SIGKILL with a checkpoint (SAVE) between the renames and what followed them. */
START_TEST(test_kill9_after_save)
{
	restart_round(CONF("snapshot_interval = 3600\n"), true, 0, BY_KILL);
}
END_TEST

/* SIGKILL with periodic checkpoints running between the two parts. */
START_TEST(test_kill9_periodic_checkpoints)
{
	restart_round(CONF("snapshot_interval = 1\n"), false, 2500, BY_KILL);
}
END_TEST

/* A clean stop: the checkpoints it writes, then the log. */
START_TEST(test_sigterm)
{
	restart_round(CONF("snapshot_interval = 3600\n"), false, 0, BY_TERM);
}
END_TEST

/* A clean stop without a log: the checkpoints alone carry the renames. */
START_TEST(test_sigterm_without_log)
{
	int fd;

	data_dir_new();
	start_in(CONF("snapshot_interval = 3600\nwal = off\n"));
	fd = conn();
	workload_before(fd);
	RX(fd, "SAVE", "+OK\r\n");
	workload_after(fd);
	workload_check(fd);
	close(fd);
	stop();
	start_in(CONF("snapshot_interval = 3600\nwal = off\n"));
	fd = conn();
	workload_check(fd);
	close(fd);
	stop();
	start_in(CONF("snapshot_interval = 3600\nwal = off\n"));
	fd = conn();
	workload_check(fd);
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Files */

/*
 * A large filter's file: written under the new name before RENAME answers, the old name's file
 * gone; a packed filter gets a file of its own under its new name and leaves its pack; a filter
 * renamed over another takes its file. Then SIGKILL: the files alone (no log to replay past
 * them) hold the renames.
 */
START_TEST(test_files)
{
	int fd;

	data_dir_new();
	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();
	reserve(fd, "big-a", "0.001", 2000000);
	resp_add_keys(fd, "big-a", "k", 1000);
	reserve(fd, "tiny-a", "0.000001", 100);
	resp_add_keys(fd, "tiny-a", "k", 50);
	reserve(fd, "big-t", "0.001", 2000000);
	resp_add_keys(fd, "big-t", "t", 100);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("big-a.bsnap"));
	ck_assert(exists("big-t.bsnap"));
	ck_assert(!exists("tiny-a.bsnap"));
	ck_assert_ptr_nonnull(pack_with("tiny-a"));

	rename_ok(fd, "big-a", "big-b");
	ck_assert(exists("big-b.bsnap"));
	ck_assert(!exists("big-a.bsnap"));
	rename_ok(fd, "tiny-a", "tiny-b");
	ck_assert(exists("tiny-b.bsnap"));
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(!exists("big-a.bsnap"));
	ck_assert_ptr_null(pack_with("tiny-a"));
	/* Over another: its file is the renamed filter's. */
	rename_ok(fd, "big-b", "big-t");
	ck_assert(!exists("big-b.bsnap"));
	ck_assert(exists("big-t.bsnap"));
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(!exists("big-b.bsnap"));
	ck_assert(!exists("big-a.bsnap"));
	close(fd);
	kill9();

	start_in(CONF("snapshot_interval = 3600\n"));
	ck_assert_msg(itest_log_wait(&d, "ready", T), "%s", itest_log(&d));
	fd = conn();
	filter_is(fd, "big-t", 2000000, 1000);
	has_keys(fd, "big-t", "k", 1000);
	lacks_keys(fd, "big-t", "t", 100);
	filter_is(fd, "tiny-b", 100, 50);
	has_keys(fd, "tiny-b", "k", 50);
	absent(fd, "big-a");
	absent(fd, "big-b");
	absent(fd, "tiny-a");
	close(fd);
	stop();
	ck_assert(!exists("big-a.bsnap"));
	ck_assert(!exists("big-b.bsnap"));
	ck_assert_ptr_null(pack_with("tiny-a"));
}
END_TEST

/* Send the RESP commands in one write (one loop iteration) and expect exactly reply. */
static void one_write(int fd, const char *const *cmds, size_t n, const char *reply)
{
	char buf[4096];
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		char copy[256], *save = NULL;
		const char *w[8];
		int k = 0;

		FMT(copy, "%s", cmds[i]);
		for (char *t = strtok_r(copy, " ", &save); t && k < 8;
		     t = strtok_r(NULL, " ", &save))
			w[k++] = t;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "*%d\r\n", k);
		for (int j = 0; j < k; j++)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "$%zu\r\n%s\r\n",
						strlen(w[j]), w[j]);
		ck_assert_uint_lt(len, sizeof(buf));
	}
	EXCHANGE_N(fd, buf, len, reply, strlen(reply));
}

/*
 * RENAME while a background save writes the filter (BGSAVE and the renames in one write): the
 * file of the name given up is removed once its write ends, the file of the name taken is the
 * filter's, also when the name taken back is the one being written. Without a log, so the
 * files alone carry everything to the restart after SIGKILL.
 */
START_TEST(test_rename_during_bgsave)
{
	static const char *const round1[] = {"BF.ADD big-a x1", "BGSAVE", "RENAME big-a big-b"};
	static const char *const round2[] = {"BF.ADD big-b x2", "BGSAVE", "RENAME big-b big-x",
					     "RENAME big-x big-b"};
	static const char *const round3[] = {"BF.ADD big-b x3",	   "BGSAVE",
					     "RENAME big-b big-y", "RENAME big-y big-z",
					     "RENAME big-z big-b", "RENAME big-b big-c"};
	const char *conf = CONF("snapshot_interval = 3600\nwal = off\n");
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	reserve(fd, "big-a", "0.0001", 3000000);
	resp_add_keys(fd, "big-a", "k", 1000);

	one_write(fd, round1, 3, ":1\r\n+Background saving started\r\n+OK\r\n");
	bgsave_done(fd);
	ck_assert(exists("big-b.bsnap"));
	ck_assert(!exists("big-a.bsnap"));

	one_write(fd, round2, 4, ":1\r\n+Background saving started\r\n+OK\r\n+OK\r\n");
	bgsave_done(fd);
	ck_assert(exists("big-b.bsnap"));
	ck_assert(!exists("big-x.bsnap"));
	ck_assert(!exists("big-a.bsnap"));
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	filter_is(fd, "big-b", 3000000, 1002);
	has_keys(fd, "big-b", "k", 1000);
	RX(fd, "BF.MEXISTS big-b x1 x2", "*2\r\n:1\r\n:1\r\n");
	one_write(fd, round3, 6,
		  ":1\r\n+Background saving started\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n");
	bgsave_done(fd);
	ck_assert(exists("big-c.bsnap"));
	ck_assert(!exists("big-b.bsnap"));
	ck_assert(!exists("big-y.bsnap"));
	ck_assert(!exists("big-z.bsnap"));
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	filter_is(fd, "big-c", 3000000, 1003);
	has_keys(fd, "big-c", "k", 1000);
	RX(fd, "BF.MEXISTS big-c x1 x2 x3", "*3\r\n:1\r\n:1\r\n:1\r\n");
	RX(fd, "KEYS *", "*1\r\n$5\r\nbig-c\r\n");
	close(fd);
	stop();
}
END_TEST

/* Copy file src to dst, both in the data directory. */
static void copy_file(const char *src, const char *dst)
{
	char buf[65536];
	FILE *in, *out;
	size_t n;

	in = fopen(path_in(src), "rb");
	ck_assert_ptr_nonnull(in);
	out = fopen(path_in(dst), "wb");
	ck_assert_ptr_nonnull(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

/*
 * A filter under two names on disk, as a crash between the new name's file and the removal of
 * the old copy leaves it: the old name's file (put back from a copy taken before the rename)
 * and a packed filter's old pack entry (the pack not yet written again). The start loads the
 * newer copy only, under the new name, and removes the older file. With the log (wal on) or
 * without it: the checkpoint a rename writes at once carries it either way.
 */
static void stale_copies(const char *conf)
{
	static const char *const names[] = {"big-b", "tiny-b"};
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	reserve(fd, "big-a", "0.001", 2000000);
	resp_add_keys(fd, "big-a", "k", 1000);
	reserve(fd, "tiny-a", "0.000001", 100);
	resp_add_keys(fd, "tiny-a", "k", 50);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert(exists("big-a.bsnap"));
	ck_assert_ptr_nonnull(pack_with("tiny-a"));
	copy_file("big-a.bsnap", "big-a.copy");
	rename_ok(fd, "big-a", "big-b");
	rename_ok(fd, "tiny-a", "tiny-b");
	resp_add_keys(fd, "big-b", "after", 10);
	resp_add_keys(fd, "tiny-b", "after", 10);
	/* The pack still holds tiny-a's old entry (no checkpoint since), tiny-b.bsnap the new. */
	ck_assert_ptr_nonnull(pack_with("tiny-a"));
	ck_assert(exists("tiny-b.bsnap"));
	close(fd);
	kill9();
	ck_assert(!exists("big-a.bsnap"));
	copy_file("big-a.copy", "big-a.bsnap");
	ck_assert_int_eq(remove(path_in("big-a.copy")), 0);

	start_in(conf);
	fd = conn();
	/* Without the log, the rename wrote big-b.bsnap, a newer copy (found in either order:
	 * "holds an older copy" or "holds a newer copy"). With it, the rename renamed the file:
	 * the copy put back is of the same generation, so the file whose header names it loads,
	 * the renamed one is set aside, and the log's RENAME names the filter. */
	ck_assert(itest_log_wait(&d, "ready", T));
	if (strstr(conf, "wal = off"))
		ck_assert_msg(strstr(itest_log(&d), "big-a.bsnap holds an older copy") ||
				  strstr(itest_log(&d), "big-b.bsnap holds a newer copy"),
			      "%s", itest_log(&d));
	else
		ck_assert_msg(strstr(itest_log(&d), "big-b.bsnap: holds filter 'big-a', whose file "
						    "name is big-a.bsnap; renamed to "
						    "big-b.bsnap.corrupt"),
			      "%s", itest_log(&d));
	absent(fd, "big-a");
	absent(fd, "tiny-a");
	has_keys(fd, "big-b", "k", 1000);
	has_keys(fd, "tiny-b", "k", 50);
	ck_assert(!exists("big-a.bsnap"));
	keys_are(fd, names, 2);
	/* With the log, the keys added after the renames too. */
	if (!strstr(conf, "wal = off")) {
		filter_is(fd, "big-b", 2000000, 1010);
		filter_is(fd, "tiny-b", 100, 60);
		has_keys(fd, "big-b", "after", 10);
		has_keys(fd, "tiny-b", "after", 10);
	}
	resp_add_keys(fd, "tiny-b", "more", 1);
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert_ptr_null(pack_with("tiny-a"));
	close(fd);
	stop();
	ck_assert(!exists("big-a.bsnap"));
	ck_assert(!exists("tiny-a.bsnap"));
}

START_TEST(test_stale_copies)
{
	stale_copies(CONF("snapshot_interval = 3600\n"));
}
END_TEST

START_TEST(test_stale_copies_without_log)
{
	stale_copies(CONF("snapshot_interval = 3600\nwal = off\n"));
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Memory-only filters, HTTP */

/*
 * A memory-only filter (text: in_memory=1) renamed over a persistent one: the persistent one is
 * gone for good (its drop logged), the memory-only one is gone after a restart; a persistent
 * filter renamed over a memory-only one is there after it.
 */
START_TEST(test_memory_only)
{
	int fd, tfd;

	data_dir_new();
	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();
	tfd = conn();
	ck_assert_str_eq(txt(tfd, "create mem1 capacity=1000 prob=0.0001 in_memory=1"), "Done\n");
	ck_assert_str_eq(txt(tfd, "set mem1 m"), "Yes\n");
	ck_assert_str_eq(txt(tfd, "create mem2 capacity=1000 prob=0.0001 in_memory=1"), "Done\n");
	reserve(fd, "disk1", "0.000001", 100);
	resp_add_keys(fd, "disk1", "d1", 10);
	reserve(fd, "disk2", "0.000001", 100);
	resp_add_keys(fd, "disk2", "d2", 10);
	RX(fd, "SAVE", "+OK\r\n");
	rename_ok(fd, "mem1", "disk1");
	RX(fd, "BF.EXISTS disk1 m", ":1\r\n");
	rename_ok(fd, "disk2", "mem2");
	has_keys(fd, "mem2", "d2", 10);
	close(fd);
	close(tfd);
	kill9();

	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();
	absent(fd, "disk1");
	absent(fd, "mem1");
	absent(fd, "disk2");
	filter_is(fd, "mem2", 100, 10);
	has_keys(fd, "mem2", "d2", 10);
	RX(fd, "KEYS *", "*1\r\n$4\r\nmem2\r\n");
	close(fd);
	stop();
}
END_TEST

/* The same over HTTP: 200, 409, 404; a replace; all of it there after SIGKILL. */
START_TEST(test_http_rename_survives_kill)
{
	const char *r;
	int fd;

	data_dir_new();
	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();
	reserve(fd, "h-a", "0.000001", 100);
	resp_add_keys(fd, "h-a", "a", 20);
	reserve(fd, "h-t", "0.000001", 200);
	resp_add_keys(fd, "h-t", "t", 20);
	r = http("POST", "/v1/filters/h-a/rename", "{\"to\":\"h-b\"}");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%s", r);
	ck_assert_msg(strstr(r, "\r\n\r\n{\"name\":\"h-b\",\"type\":\"bloom\",\"capacity\":100,"),
		      "%s", r);
	r = http("POST", "/v1/filters/h-b/rename", "{\"to\":\"h-t\"}");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 409 ", 13), "%s", r);
	ck_assert_msg(strstr(r, "\"type\":\"filter_exists\""), "%s", r);
	r = http("POST", "/v1/filters/h-a/rename", "{\"to\":\"h-c\"}");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 404 ", 13), "%s", r);
	r = http("POST", "/v1/filters/h-b/rename", "{\"to\":\"h-t\",\"replace\":true}");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%s", r);
	ck_assert_msg(strstr(r, "\r\n\r\n{\"name\":\"h-t\",\"type\":\"bloom\",\"capacity\":100,"),
		      "%s", r);
	filter_is(fd, "h-t", 100, 20);
	close(fd);
	kill9();

	start_in(CONF("snapshot_interval = 3600\n"));
	fd = conn();
	filter_is(fd, "h-t", 100, 20);
	has_keys(fd, "h-t", "a", 20);
	lacks_keys(fd, "h-t", "t", 20);
	RX(fd, "KEYS *", "*1\r\n$3\r\nh-t\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * The smallest swaps: users:new built and renamed over users `rounds` times (a SAVE after the
 * first if save_between), then SIGKILL or SIGTERM. The restart finds users (the last users:new,
 * with its key) and nothing else: no earlier users:new, replaced by a later rename, is left
 * under its first name, in memory or on disk. After a clean stop the checkpoints alone (a start
 * without the log) hold the same; users:new is a new filter again.
 */
static void swap_rounds(const char *conf, int rounds, bool save_between, enum stop_how how)
{
	char cmd[256], expect[256], nowal[512];
	int fd;

	FMT(nowal, "%swal = off\n", conf);
	data_dir_new();
	start_in(conf);
	fd = conn();
	RX(fd, "BF.ADD users k0", ":1\r\n");
	for (int i = 1; i <= rounds; i++) {
		FMT(cmd, "BF.ADD users:new k%d", i);
		RX(fd, cmd, ":1\r\n");
		RX(fd, "RENAME users:new users", "+OK\r\n");
		if (i == 1 && save_between)
			RX(fd, "SAVE", "+OK\r\n");
	}
	RX(fd, "KEYS *", "*1\r\n$5\r\nusers\r\n");
	close(fd);
	if (how == BY_KILL)
		kill9();
	else
		stop();

	/* users holds the last key only: BF.MEXISTS users k0 .. k<rounds>. */
	FMT(cmd, "BF.MEXISTS users");
	FMT(expect, "*%d\r\n", rounds + 1);
	for (int i = 0; i <= rounds; i++) {
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " k%d", i);
		snprintf(expect + strlen(expect), sizeof(expect) - strlen(expect), ":%d\r\n",
			 i == rounds);
	}
	for (int pass = 0; pass < 2; pass++) {
		start_in(pass ? nowal : conf);
		fd = conn();
		RX(fd, cmd, expect);
		RX(fd, "BF.CARD users", ":1\r\n");
		RX(fd, "EXISTS users:new", ":0\r\n");
		RX(fd, "KEYS *", "*1\r\n$5\r\nusers\r\n");
		ck_assert_msg(!exists("users%3Anew.bsnap"), "a file is left for users:new");
		ck_assert_msg(!pack_with("users:new"), "a pack holds users:new");
		if (pass) {
			RX(fd, "BF.ADD users:new k1", ":1\r\n");
			RX(fd, "BF.CARD users:new", ":1\r\n");
		}
		close(fd);
		stop();
	}
}

START_TEST(test_kill9_swap_twice)
{
	swap_rounds(CONF("snapshot_interval = 3600\n"), 2, false, BY_KILL);
}
END_TEST

START_TEST(test_kill9_swap_thrice)
{
	swap_rounds(CONF("snapshot_interval = 3600\n"), 3, false, BY_KILL);
}
END_TEST

START_TEST(test_kill9_swap_thrice_after_save)
{
	swap_rounds(CONF("snapshot_interval = 3600\n"), 3, true, BY_KILL);
}
END_TEST

START_TEST(test_sigterm_swap_thrice)
{
	swap_rounds(CONF("snapshot_interval = 3600\n"), 3, false, BY_TERM);
}
END_TEST

/*
 * The swap thrice, SIGKILL, restart; then ordinary traffic fills small log segments and a SAVE
 * lets the old ones go, so the next start replays none of the swaps' records: it must still
 * find users and other only (nothing the replay after the kill left on disk comes back).
 */
START_TEST(test_kill9_swap_thrice_log_trimmed)
{
	const char *conf = CONF("snapshot_interval = 3600\nwal_segment_bytes = 4096\n");
	static const char *const names[] = {"other", "users"};
	char cmd[64];
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	RX(fd, "BF.ADD users k0", ":1\r\n");
	for (int i = 1; i <= 3; i++) {
		FMT(cmd, "BF.ADD users:new k%d", i);
		RX(fd, cmd, ":1\r\n");
		RX(fd, "RENAME users:new users", "+OK\r\n");
	}
	close(fd);
	kill9();

	start_in(conf);
	fd = conn();
	RX(fd, "KEYS *", "*1\r\n$5\r\nusers\r\n");
	reserve(fd, "other", "0.000001", 1000);
	for (int i = 0; i < 300; i++) {
		FMT(cmd, "BF.ADD other x%d", i);
		RX(fd, cmd, ":1\r\n");
	}
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	stop();

	start_in(conf);
	fd = conn();
	keys_are(fd, names, 2);
	RX(fd, "BF.MEXISTS users k0 k1 k2 k3", "*4\r\n:0\r\n:0\r\n:0\r\n:1\r\n");
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The atomic swap */

#define SWAP_BATCH 64

struct checker {
	uint16_t port;
	atomic_bool stop;
	atomic_ulong checks, wrong;
	char first_wrong[64];
	int failed; /* an error of the connection (-errno), or 0 */
};

/* Pipeline SWAP_BATCH "BF.EXISTS users k" at a time until told to stop; count every reply
 * that is not :1. */
static void *checker_run(void *arg)
{
	static const char one[] = "*3\r\n$9\r\nBF.EXISTS\r\n$5\r\nusers\r\n$1\r\nk\r\n";
	struct checker *c = arg;
	char req[SWAP_BATCH * sizeof(one)], reply[SWAP_BATCH * 4];
	size_t len = 0;
	int fd = itest_connect(c->port);

	if (fd < 0) {
		c->failed = fd;
		return NULL;
	}
	for (int i = 0; i < SWAP_BATCH; i++) {
		memcpy(req + len, one, sizeof(one) - 1);
		len += sizeof(one) - 1;
	}
	while (!atomic_load(&c->stop)) {
		if (itest_send(fd, req, len) ||
		    itest_recv_n(fd, reply, sizeof(reply), T) != (ssize_t)sizeof(reply)) {
			c->failed = -EPIPE;
			break;
		}
		for (int i = 0; i < SWAP_BATCH; i++) {
			if (memcmp(reply + 4 * i, ":1\r\n", 4) == 0)
				continue;
			if (atomic_fetch_add(&c->wrong, 1) == 0)
				snprintf(c->first_wrong, sizeof(c->first_wrong), "%.4s",
					 reply + 4 * i);
		}
		atomic_fetch_add(&c->checks, SWAP_BATCH);
	}
	close(fd);
	return NULL;
}

/*
 * One client checks "users" for key k without pause, pipelined; another rebuilds users:new
 * with k and renames it over users, again and again: every check answers 1 (the name is
 * never missing nor empty). After a SIGKILL, users holds k and users:new is gone.
 */
START_TEST(test_atomic_swap)
{
	struct checker c = {0};
	pthread_t th;
	unsigned rounds = 0;
	unsigned long before;
	int64_t t0;
	int fd;

	data_dir_new();
	start_in(CONF("snapshot_interval = 1\n"));
	fd = conn();
	RX(fd, "BF.ADD users k", ":1\r\n");
	c.port = d.port;
	ck_assert_int_eq(pthread_create(&th, NULL, checker_run, &c), 0);
	t0 = itest_now_ms();
	while (atomic_load(&c.checks) == 0 && !c.failed && itest_now_ms() - t0 < T)
		itest_sleep_ms(1);
	t0 = itest_now_ms();
	while (rounds < 2000 && itest_now_ms() - t0 < 4000) {
		RX(fd, "BF.ADD users:new k", ":1\r\n");
		RX(fd, "RENAME users:new users", "+OK\r\n");
		rounds++;
	}
	before = atomic_load(&c.checks);
	/* Some more checks after the last round. */
	t0 = itest_now_ms();
	while (atomic_load(&c.checks) < before + 2 * SWAP_BATCH && !c.failed &&
	       itest_now_ms() - t0 < T)
		itest_sleep_ms(1);
	atomic_store(&c.stop, true);
	pthread_join(th, NULL);
	fprintf(stderr, "atomic swap: %u renames, %lu checks, %lu not :1\n", rounds,
		(unsigned long)atomic_load(&c.checks), (unsigned long)atomic_load(&c.wrong));
	ck_assert_int_eq(c.failed, 0);
	ck_assert_msg(atomic_load(&c.wrong) == 0, "%lu checks answered %s, not :1",
		      (unsigned long)atomic_load(&c.wrong), c.first_wrong);
	ck_assert_uint_ge(rounds, 20);
	ck_assert_uint_gt(atomic_load(&c.checks), rounds);
	RX(fd, "KEYS *", "*1\r\n$5\r\nusers\r\n");
	filter_is(fd, "users", 100, 1);
	close(fd);
	kill9();

	start_in(CONF("snapshot_interval = 1\n"));
	fd = conn();
	RX(fd, "BF.EXISTS users k", ":1\r\n");
	RX(fd, "KEYS *", "*1\r\n$5\r\nusers\r\n");
	filter_is(fd, "users", 100, 1);
	close(fd);
	stop();
	ck_assert(!exists("users%3Anew.bsnap"));
}
END_TEST

static Suite *rename_suite(void)
{
	Suite *s = suite_create("rename");
	TCase *replies = tcase_create("replies");
	TCase *restart = tcase_create("restart");
	TCase *files = tcase_create("files");
	TCase *swap = tcase_create("swap");

	tcase_set_timeout(replies, 60);
	tcase_add_test(replies, test_replies);
	suite_add_tcase(s, replies);

	tcase_set_timeout(restart, 240);
	tcase_add_test(restart, test_kill9_log_only);
	tcase_add_test(restart, test_kill9_after_save);
	tcase_add_test(restart, test_kill9_periodic_checkpoints);
	tcase_add_test(restart, test_sigterm);
	tcase_add_test(restart, test_sigterm_without_log);
	suite_add_tcase(s, restart);

	tcase_set_timeout(files, 120);
	tcase_add_test(files, test_files);
	tcase_add_test(files, test_stale_copies);
	tcase_add_test(files, test_stale_copies_without_log);
	tcase_add_test(files, test_rename_during_bgsave);
	tcase_add_test(files, test_memory_only);
	tcase_add_test(files, test_http_rename_survives_kill);
	suite_add_tcase(s, files);

	tcase_set_timeout(swap, 120);
	tcase_add_test(swap, test_kill9_swap_twice);
	tcase_add_test(swap, test_kill9_swap_thrice);
	tcase_add_test(swap, test_kill9_swap_thrice_after_save);
	tcase_add_test(swap, test_sigterm_swap_thrice);
	tcase_add_test(swap, test_kill9_swap_thrice_log_trimmed);
	tcase_add_test(swap, test_atomic_swap);
	suite_add_tcase(s, swap);
	return s;
}

CHECK_MAIN(rename_suite)
