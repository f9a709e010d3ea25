/* SPDX-License-Identifier: MIT */
/*
 * Issue 30, "Lose nothing": what a restart must keep whatever the checkpoints did before it.
 * A small packed filter that grew past snapshot_pack_bytes (or met a smaller
 * snapshot_pack_bytes after a restart) keeps every acknowledged key across restarts, SIGTERM or
 * SIGKILL; a missing segment, snapshot or pack file stops the start, naming what is missing,
 * unless the operator says to go on without it.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check_main.h"
#define ITEST_T		  20000 /* checkpoints of many filters under valgrind take a while */
#define ITEST_STOP_MS	  60000
#define ITEST_START_READY 1
#include "tests/integration/itest_case.h"

#define NFILTERS 40
#define NKEYS	 3000

/* "pm<i>" */
static const char *pm(int i)
{
	static char buf[4][16];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "pm%d", i);
	return buf[k];
}

/* BF.MADD filter <tag>:<from> ... <tag>:<from + m - 1> (m at most 200): its reply. */
static const char *madd(int fd, const char *filter, const char *tag, unsigned from, unsigned m)
{
	static char keys[200][32];
	const char *argv[202] = {"BF.MADD", filter};
	size_t lens[202] = {7, strlen(filter)};

	for (unsigned i = 0; i < m; i++) {
		lens[2 + i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "%s:%u", tag, from + i);
		argv[2 + i] = keys[i];
	}
	return callv(fd, (int)m + 2, argv, lens);
}

/* BF.MADD of the keys "<tag>:<i>", i in [0, n), 200 a command: each reply an array of n
 * integers (a key may be a false positive of those before it: :0). */
static void add_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	for (unsigned from = 0; from < n; from += 200) {
		unsigned m = n - from < 200 ? n - from : 200;
		const char *r = madd(fd, filter, tag, from, m);
		unsigned got = 0;

		ck_assert_msg(r[0] == '*' && (unsigned)atoi(r + 1) == m, "%s", esc(r));
		for (const char *p = strstr(r, "\r\n:"); p; p = strstr(p + 1, "\r\n:"))
			got++;
		ck_assert_uint_eq(got, m);
	}
}

/* Every pm<i> has all NKEYS of its keys "k<i>:<n>". */
static void all_there(int fd)
{
	char tag[16];

	for (int i = 0; i < NFILTERS; i++) {
		snprintf(tag, sizeof(tag), "k%d", i);
		ck_assert_msg(resp_count_keys(fd, pm(i), tag, NKEYS) == NKEYS,
			      "filter %s lost keys: %u of %u", pm(i),
			      resp_count_keys(fd, pm(i), tag, NKEYS), NKEYS);
	}
}

/* The repro: 40 filters of capacity 100, packed while small (the default
 * snapshot_pack_bytes), each grown to 3,000 keys; a restart under snapshot_pack_bytes = 2k, a
 * checkpoint, and another restart. */
static void grown_packed_setup(void)
{
	char words[128], tag[16];
	int fd;

	data_dir_new();
	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"));
	fd = conn();
	for (int i = 0; i < NFILTERS; i++) {
		snprintf(words, sizeof(words), "BF.RESERVE %s 0.01 100", pm(i));
		RX(fd, words, "+OK\r\n");
		/* Small and packed at first: a checkpoint while it holds a few keys. */
		if (i == 0) {
			RX(fd, "BF.ADD pm0 first", ":1\r\n");
			RX(fd, "SAVE", "+OK\r\n");
		}
		snprintf(tag, sizeof(tag), "k%d", i);
		add_keys(fd, pm(i), tag, NKEYS);
	}
	close(fd);
	stop();
}

START_TEST(test_grown_packed_filters_survive_sigterm)
{
	int fd;

	grown_packed_setup();
	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"
		      "snapshot_pack_bytes = 2k\n"));
	fd = conn();
	all_there(fd);
	add_keys(fd, "other", "o", NKEYS);
	RX(fd, "BGSAVE", "+Background saving started\r\n");
	bgsave_done(fd);
	close(fd);
	stop();

	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"
		      "snapshot_pack_bytes = 2k\n"));
	fd = conn();
	all_there(fd);
	ck_assert_uint_eq(resp_count_keys(fd, "other", "o", NKEYS), NKEYS);
	close(fd);
	stop();
}
END_TEST

START_TEST(test_grown_packed_filters_survive_sigkill)
{
	int fd;

	grown_packed_setup();
	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"
		      "snapshot_pack_bytes = 2k\n"));
	fd = conn();
	add_keys(fd, "other", "o", NKEYS);
	RX(fd, "BGSAVE", "+Background saving started\r\n");
	bgsave_done(fd);
	close(fd);
	kill9();

	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"
		      "snapshot_pack_bytes = 2k\n"));
	fd = conn();
	all_there(fd);
	close(fd);
	stop();
	/* And back under the default pack size: packed again, nothing lost. */
	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"));
	fd = conn();
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	kill9();
	start_in(CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n"));
	fd = conn();
	all_there(fd);
	close(fd);
	stop();
}
END_TEST

/* Start on case_dir with extra arguments; it must refuse, saying needle. */
static void start_refused(const char *conf, const char *arg, const char *needle)
{
	const char *extra[] = {"--data-dir", case_dir, arg, NULL};
	int rc = itest_start(&d, conf, extra);

	ck_assert_msg(rc == -ECHILD, "started: %d\n%s", rc, itest_log(&d));
	ck_assert_msg(strstr(itest_log(&d), needle), "no '%s' in:\n%s", needle, itest_log(&d));
	itest_stop(&d, T);
}

/* Issue 30 item 2: a segment deleted from the start of the log stops the start, naming the
 * LSNs lost, unless --accept-missing-files; a log kept whole starts as before. */
START_TEST(test_missing_first_segment_refused)
{
	const char *conf = CONF("wal_segment_bytes = 4096\nsnapshot_interval = 0\n");
	const char *extra[] = {"--data-dir", case_dir, "--accept-missing-files", NULL};
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	RX(fd, "BF.RESERVE w 0.01 1000", "+OK\r\n");
	add_keys(fd, "w", "k", 600);
	close(fd);
	kill9();
	ck_assert(exists("wal/start"));
	ck_assert(exists("wal/0000000000000001.wal"));
	ck_assert_int_eq(unlink(path_in("wal/0000000000000001.wal")), 0);
	start_refused(conf, NULL, "the segments holding LSNs 1 to ");
	start_refused(conf, NULL,
		      "are missing (the log starts at LSN 1, its first segment left at ");
	start_refused(conf, NULL,
		      "not starting (put the segments back, or start once with "
		      "--accept-missing-files");

	ck_assert_int_eq(itest_start(&d, conf, extra), 0);
	ck_assert(itest_log_wait(&d,
				 "going on without them, as asked; the changes they held "
				 "are lost",
				 T));
	fd = conn();
	call(fd, "PING");
	close(fd);
	stop();
	/* Told once: the log starts where it is now. */
	start_in(conf);
	ck_assert(!strstr(itest_log(&d), "missing"));
	stop();
}
END_TEST

/* Issue 30 item 2: a pack file deleted outside the daemon stops the start, naming it, unless
 * --accept-missing-files; so does one deleted after a restart recorded it. */
START_TEST(test_missing_pack_refused)
{
	/* Without the log, the pack alone holds its filters. */
	const char *conf = CONF("snapshot_interval = 0\nwal = off\n");
	const char *extra[] = {"--data-dir", case_dir, "--accept-missing-files", NULL};
	char name[32], needle[160];
	const char *file;
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "BF.ADD s%d x", i);
		RX(fd, name, ":1\r\n");
	}
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	stop();
	ck_assert(exists("packs"));
	file = pack_with("s7");
	ck_assert_ptr_nonnull(file);
	snprintf(name, sizeof(name), "%s", file);
	ck_assert_int_eq(unlink(path_in(name)), 0);
	snprintf(needle, sizeof(needle), "/%s is missing (", name);
	start_refused(conf, NULL, needle);
	start_refused(conf, NULL,
		      "not starting (put the files back, or start once with "
		      "--accept-missing-files");

	ck_assert_int_eq(itest_start(&d, conf, extra), 0);
	ck_assert(itest_log_wait(&d, "; going on without it, as asked", T));
	fd = conn();
	RX(fd, "EXISTS s7", ":0\r\n");
	RX(fd, "BF.EXISTS s8 x", ":1\r\n");
	close(fd);
	stop();
	/* Told once; and a pack written since is listed again. */
	start_in(conf);
	ck_assert(!strstr(itest_log(&d), "missing"));
	fd = conn();
	RX(fd, "BF.ADD s7 y", ":1\r\n");
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	stop();
	file = pack_with("s7");
	ck_assert_ptr_nonnull(file);
	snprintf(name, sizeof(name), "%s", file);
	ck_assert_int_eq(unlink(path_in(name)), 0);
	start_refused(conf, NULL, needle);
}
END_TEST

/* RENAME as metadata (issue 30 item 3): a filter in a file of its own keeps that file,
 * renamed. Own files from 64 KiB up; no periodic checkpoint, so each case says when one is
 * written. */
#define RENAME_CONF CONF("snapshot_interval = 0\nsnapshot_pack_bytes = 64k\n")
#define BIG_KEYS    2000

/* A filter of about 240 KB named name, BIG_KEYS keys "k:<i>", written by SAVE. */
static void big_saved(int fd, const char *name)
{
	char words[64];

	snprintf(words, sizeof(words), "BF.RESERVE %s 0.01 200000", name);
	RX(fd, words, "+OK\r\n");
	add_keys(fd, name, "k", BIG_KEYS);
	RX(fd, "SAVE", "+OK\r\n");
}

static ino_t inode_of(const char *file)
{
	struct stat sb;

	ck_assert_msg(stat(path_in(file), &sb) == 0, "%s: %s", file, strerror(errno));
	return sb.st_ino;
}

/* The file is renamed, not written again: the same inode, at once; after a SIGKILL (the header
 * still has the old name) the filter is there under the new name, with the keys added before and
 * after; the next checkpoint writes it under its name. */
START_TEST(test_rename_keeps_the_file)
{
	ino_t ino;
	int fd;

	data_dir_new();
	start_in(RENAME_CONF);
	fd = conn();
	big_saved(fd, "a");
	ino = inode_of("a.bsnap");
	RX(fd, "RENAME a b", "+OK\r\n");
	ck_assert(!exists("a.bsnap"));
	ck_assert_uint_eq(inode_of("b.bsnap"), ino);
	add_keys(fd, "b", "m", 500);
	close(fd);
	kill9();

	start_in(RENAME_CONF);
	fd = conn();
	RX(fd, "EXISTS a", ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "b", "k", BIG_KEYS), BIG_KEYS);
	ck_assert_uint_eq(resp_count_keys(fd, "b", "m", 500), 500);
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	kill9();
	ck_assert_uint_ne(inode_of("b.bsnap"), ino);
	start_in(RENAME_CONF);
	ck_assert(!strstr(itest_log(&d), "set aside"));
	fd = conn();
	ck_assert_uint_eq(resp_count_keys(fd, "b", "m", 500), 500);
	close(fd);
	stop();
}
END_TEST

/* RENAME over a packed filter: the pack, written later than the renamed file, still holds the
 * filter dropped; after a SIGKILL the renamed file keeps the name. */
START_TEST(test_rename_over_packed_filter)
{
	int fd;

	data_dir_new();
	start_in(RENAME_CONF);
	fd = conn();
	big_saved(fd, "a");
	RX(fd, "BF.ADD b y", ":1\r\n");
	RX(fd, "SAVE", "+OK\r\n");
	ck_assert_ptr_nonnull(pack_with("b"));
	RX(fd, "RENAME a b", "+OK\r\n");
	close(fd);
	kill9();

	start_in(RENAME_CONF);
	fd = conn();
	RX(fd, "EXISTS a", ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "b", "k", BIG_KEYS), BIG_KEYS);
	EQ(call(fd, "BF.INFO b Capacity"), "*1\r\n:200000\r\n");
	close(fd);
	stop();
}
END_TEST

/* Renamed away and on, then the first new name taken by a new filter that a checkpoint holds:
 * the replay skips the first RENAME (the name's holder is newer) and must not drop the filter,
 * which the second RENAME names. */
START_TEST(test_rename_twice_name_retaken)
{
	int fd, t;

	data_dir_new();
	start_in(RENAME_CONF);
	fd = conn();
	big_saved(fd, "a");
	RX(fd, "RENAME a b", "+OK\r\n");
	RX(fd, "RENAME b c", "+OK\r\n");
	ck_assert(exists("c.bsnap") && !exists("b.bsnap"));
	RX(fd, "BF.ADD b y", ":1\r\n");
	t = conn();
	TXT(t, "flush b", "Done\n");
	close(t);
	close(fd);
	kill9();

	start_in(RENAME_CONF);
	fd = conn();
	RX(fd, "EXISTS a", ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "c", "k", BIG_KEYS), BIG_KEYS);
	RX(fd, "BF.EXISTS b y", ":1\r\n");
	EQ(call(fd, "BF.INFO b Capacity"), "*1\r\n:100\r\n");
	close(fd);
	stop();
}
END_TEST

/* Renamed away and back, the name it went to then taken by a filter a checkpoint holds: the
 * replay skips the first RENAME (the name's holder is newer), and the second gives the filter
 * the name it already has. It must stay (it was dropped at the end of the replay). */
START_TEST(test_rename_away_and_back)
{
	int fd, t;

	data_dir_new();
	start_in(RENAME_CONF);
	fd = conn();
	big_saved(fd, "a");
	RX(fd, "RENAME a b", "+OK\r\n");
	RX(fd, "RENAME b a", "+OK\r\n");
	RX(fd, "BF.ADD b y", ":1\r\n");
	t = conn();
	TXT(t, "flush b", "Done\n");
	close(t);
	close(fd);
	kill9();

	start_in(RENAME_CONF);
	fd = conn();
	ck_assert_uint_eq(resp_count_keys(fd, "a", "k", BIG_KEYS), BIG_KEYS);
	RX(fd, "BF.EXISTS b y", ":1\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * RENAME a b over a b the log alone holds: a's file becomes b.bsnap. At the next start the
 * replay creates the old b and drops it at the RENAME: that drop must not remove b.bsnap, which
 * holds a (found by crashsim seed 1000: the filter was gone a restart later).
 */
START_TEST(test_rename_over_logged_filter)
{
	const char *conf = CONF("snapshot_interval = 0\nsnapshot_pack_bytes = 64k\n"
				"wal_segment_bytes = 4096\n");
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	big_saved(fd, "a");
	RX(fd, "BF.RESERVE b 0.01 1000", "+OK\r\n");
	RX(fd, "BF.ADD b old", ":1\r\n");
	RX(fd, "RENAME a b", "+OK\r\n");
	close(fd);
	kill9();
	start_in(conf);
	close(conn());
	kill9();
	ck_assert_msg(exists("b.bsnap"), "b.bsnap (a's file, renamed) was removed");
	start_in(conf);
	fd = conn();
	ck_assert_uint_eq(resp_count_keys(fd, "b", "k", BIG_KEYS), BIG_KEYS);
	RX(fd, "EXISTS a", ":0\r\n");
	close(fd);
	stop();
}
END_TEST

/*
 * RENAME a b, RENAME b c, then RENAME d c over it: a's file went to b.bsnap, then c.bsnap, and
 * d's file was renamed over that. The files record, not written since, lists a.bsnap and d.bsnap;
 * at the next start a.bsnap is missing, and only the replay explains it: a's filter, followed
 * through its renames, is the one the last RENAME replaced (found by crashsim seed 1003: the start
 * refused, "a.bsnap is missing").
 */
START_TEST(test_renamed_twice_then_replaced)
{
	int fd;

	data_dir_new();
	start_in(RENAME_CONF);
	fd = conn();
	big_saved(fd, "a");
	big_saved(fd, "d");
	RX(fd, "RENAME a b", "+OK\r\n");
	RX(fd, "RENAME b c", "+OK\r\n");
	RX(fd, "RENAME d c", "+OK\r\n");
	close(fd);
	kill9();
	ck_assert(!exists("a.bsnap") && !exists("d.bsnap") && exists("c.bsnap"));
	start_in(RENAME_CONF);
	ck_assert_msg(!strstr(itest_log(&d), "missing"), "%s", itest_log(&d));
	fd = conn();
	ck_assert_uint_eq(resp_count_keys(fd, "c", "k", BIG_KEYS), BIG_KEYS);
	RX(fd, "EXISTS a b d", ":0\r\n");
	close(fd);
	stop();
}
END_TEST

/* Issue 30 item 2: a snapshot file of its own deleted outside the daemon stops the start, naming
 * it, unless --accept-missing-files; files the daemon removed itself (a drop, logged or not, a
 * RENAME, a filter packed again) never do. conf: with or without the log. */
static void missing_own_file(const char *conf, bool wal)
{
	const char *extra[] = {"--data-dir", case_dir, "--accept-missing-files", NULL};
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	big_saved(fd, "a");
	big_saved(fd, "b");
	big_saved(fd, "gone");
	big_saved(fd, "moved");
	RX(fd, "DEL gone", ":1\r\n");
	RX(fd, "RENAME moved there", "+OK\r\n");
	close(fd);
	kill9();
	ck_assert(exists("files") && exists("a.bsnap") && !exists("gone.bsnap"));
	/* What the daemon removed itself is no loss. */
	start_in(conf);
	ck_assert_msg(!strstr(itest_log(&d), "missing"), "%s", itest_log(&d));
	fd = conn();
	RX(fd, "EXISTS gone", ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "there", "k", BIG_KEYS), BIG_KEYS);
	close(fd);
	kill9();

	ck_assert_int_eq(unlink(path_in("a.bsnap")), 0);
	start_refused(conf, NULL, "/a.bsnap is missing (");
	start_refused(conf, NULL, "/files lists it, filter id ");
	start_refused(conf, NULL,
		      "not starting (put the files back, or start once with "
		      "--accept-missing-files");
	ck_assert_int_eq(itest_start(&d, conf, extra), 0);
	ck_assert(itest_log_wait(&d, "; going on without it, as asked", T));
	fd = conn();
	/* The log, kept whole here (no checkpoint since), rebuilds it from its creation. */
	RX(fd, "EXISTS a", wal ? ":1\r\n" : ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "b", "k", BIG_KEYS), BIG_KEYS);
	close(fd);
	stop();
	/* Told once. */
	start_in(conf);
	ck_assert(!strstr(itest_log(&d), "missing"));
	stop();
}

START_TEST(test_missing_own_file_refused)
{
	missing_own_file(RENAME_CONF, true);
}
END_TEST

START_TEST(test_missing_own_file_refused_without_log)
{
	missing_own_file(CONF("snapshot_interval = 0\nsnapshot_pack_bytes = 64k\nwal = off\n"),
			 false);
}
END_TEST

/* A file the daemon removed, whose drop only the log explains at a start, leaves the record at
 * that start: a checkpoint later releases the log, and the next start must not find it listed.
 * (The record was kept when its other lines matched the files loaded one for one.) */
START_TEST(test_dropped_file_unlisted_at_start)
{
	/* Small segments: the SAVE after the start releases the one that holds the drop. */
	const char *conf = CONF("snapshot_interval = 0\nsnapshot_pack_bytes = 64k\n"
				"wal_segment_bytes = 4096\n");
	int fd;

	data_dir_new();
	start_in(conf);
	fd = conn();
	big_saved(fd, "a");
	big_saved(fd, "gone");
	RX(fd, "DEL gone", ":1\r\n");
	close(fd);
	kill9();
	start_in(conf);
	fd = conn();
	add_keys(fd, "a", "more", 2000);
	RX(fd, "SAVE", "+OK\r\n");
	close(fd);
	stop(); /* releases the segments the checkpoint covers */
	start_in(conf);
	ck_assert_msg(!strstr(itest_log(&d), "missing"), "%s", itest_log(&d));
	fd = conn();
	RX(fd, "EXISTS gone", ":0\r\n");
	ck_assert_uint_eq(resp_count_keys(fd, "a", "k", BIG_KEYS), BIG_KEYS);
	ck_assert_uint_eq(resp_count_keys(fd, "a", "more", 2000), 2000);
	close(fd);
	stop();
}
END_TEST

static Suite *recovery_suite(void)
{
	Suite *s = suite_create("recovery");
	TCase *grown = tcase_create("grown_packed");

	tcase_set_timeout(grown, 300);
	tcase_add_test(grown, test_grown_packed_filters_survive_sigterm);
	tcase_add_test(grown, test_grown_packed_filters_survive_sigkill);
	suite_add_tcase(s, grown);

	TCase *missing = tcase_create("missing");
	tcase_set_timeout(missing, 120);
	tcase_add_test(missing, test_missing_first_segment_refused);
	tcase_add_test(missing, test_missing_pack_refused);
	tcase_add_test(missing, test_missing_own_file_refused);
	tcase_add_test(missing, test_missing_own_file_refused_without_log);
	tcase_add_test(missing, test_dropped_file_unlisted_at_start);
	suite_add_tcase(s, missing);

	TCase *rename = tcase_create("rename");
	tcase_set_timeout(rename, 120);
	tcase_add_test(rename, test_rename_keeps_the_file);
	tcase_add_test(rename, test_rename_over_packed_filter);
	tcase_add_test(rename, test_rename_twice_name_retaken);
	tcase_add_test(rename, test_rename_away_and_back);
	tcase_add_test(rename, test_rename_over_logged_filter);
	tcase_add_test(rename, test_renamed_twice_then_replaced);
	suite_add_tcase(s, rename);
	return s;
}

int main(void)
{
	return check_run_with_skips(recovery_suite(), NULL, 0);
}
