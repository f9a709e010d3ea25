/* SPDX-License-Identifier: MIT */
/* The write-ahead log: durability order, group commit, segments, replay of damaged logs, and
 * recovery from injected write and fdatasync failures. */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>
#include <xxhash.h>

#include "tests/check_main.h"
#include "server/wal.h"

static char root[64];
static char wdir[96];
static uv_loop_t loop;
static uv_timer_t tick;

/* Injected failures: the errno to fail with (0 = none), read by the hooks on any thread. */
static atomic_int fail_write;
static atomic_size_t fail_write_partial; /* bytes written before a failing write fails */
static atomic_int fail_sync;
static atomic_uint nwrites, nsyncs;
static atomic_uint sync_delay_ms;

static ssize_t hook_pwrite(int fd, const void *b, size_t n, off_t off)
{
	nwrites++;
	int e = fail_write;
	if (e) {
		size_t part = fail_write_partial;
		if (part && part < n)
			ck_assert_int_eq(pwrite(fd, b, part, off), (ssize_t)part);
		errno = e;
		return -1;
	}
	return pwrite(fd, b, n, off);
}

static int hook_sync(int fd)
{
	nsyncs++;
	if (sync_delay_ms)
		usleep(sync_delay_ms * 1000);
	int e = fail_sync;
	if (e) {
		errno = e;
		return -1;
	}
	return fdatasync(fd);
}

/* on_durable calls, in order. */
static uint64_t durable_calls[4096];
static unsigned ndurable;

static void on_durable(void *arg, uint64_t lsn)
{
	(void)arg;
	ck_assert_uint_lt(ndurable, 4096);
	if (ndurable)
		ck_assert_uint_gt(lsn, durable_calls[ndurable - 1]);
	durable_calls[ndurable++] = lsn;
}

/* Records seen by the last replay. */
struct rec {
	uint64_t lsn;
	unsigned type;
	size_t len;
	uint8_t data[256];
};
static struct rec recs[4096];
static unsigned nrecs;

static int collect(void *arg, uint64_t lsn, unsigned type, const void *payload, size_t len)
{
	(void)arg;
	ck_assert_uint_lt(nrecs, 4096);
	ck_assert_uint_le(len, 256);
	recs[nrecs].lsn = lsn;
	recs[nrecs].type = type;
	recs[nrecs].len = len;
	memcpy(recs[nrecs].data, payload, len);
	nrecs++;
	return 0;
}

/* The payload test record lsn carries: its length depends on lsn (or is fixed). */
static size_t payload_len = 0; /* 0 = varying */

static size_t mkpayload(uint64_t lsn, uint8_t *out)
{
	size_t len = payload_len ? payload_len : 8 + lsn % 37;
	for (size_t i = 0; i < len; i++)
		out[i] = (uint8_t)(lsn * 31 + i);
	return len;
}

static void setup(void)
{
	strcpy(root, "/tmp/blossomd-wal-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(wdir, sizeof(wdir), "%s/wal", root);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	uv_timer_init(&loop, &tick);
	fail_write = 0;
	fail_write_partial = 0;
	fail_sync = 0;
	nwrites = nsyncs = 0;
	sync_delay_ms = 0;
	ndurable = 0;
	nrecs = 0;
	payload_len = 0;
}

static void rm_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void teardown(void)
{
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	rm_files(wdir);
	rmdir(wdir);
	rmdir(root);
}

static void tick_cb(uv_timer_t *t)
{
	(void)t;
}

/* Run the loop (woken at least every millisecond) until cond holds; fail after ms. */
#define RUN_UNTIL(cond, ms)                                                                        \
	do {                                                                                       \
		uint64_t end_ = uv_hrtime() + (uint64_t)(ms)*1000000;                              \
		uv_timer_start(&tick, tick_cb, 1, 1);                                              \
		while (!(cond) && uv_hrtime() < end_)                                              \
			uv_run(&loop, UV_RUN_ONCE);                                                \
		uv_timer_stop(&tick);                                                              \
		ck_assert_msg((cond), "not reached in %u ms: %s", (unsigned)(ms), #cond);          \
	} while (0)

static void run_for(unsigned ms)
{
	uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000;
	uv_timer_start(&tick, tick_cb, 1, 1);
	while (uv_hrtime() < end)
		uv_run(&loop, UV_RUN_ONCE);
	uv_timer_stop(&tick);
}

static struct wal_options opts(enum wal_fsync mode, uint64_t segment_bytes)
{
	return (struct wal_options){
	    .loop = &loop,
	    .dir = wdir,
	    .fsync = mode,
	    .segment_bytes = segment_bytes,
	    .retry_ms = 10,
	    .on_durable = on_durable,
	    .pwrite_fn = hook_pwrite,
	    .fdatasync_fn = hook_sync,
	};
}

/* fsync(2) of a directory, counted: the wal library is linked into this program, so its
 * calls come here. */
static atomic_uint ndirsyncs;

int fsync(int fd)
{
	static int (*real)(int);
	struct stat sb;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "fsync");
	if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode))
		ndirsyncs++;
	return real(fd);
}

static char why[512];
static struct wal_replay_stats rst;

/* Open and replay from from_lsn; returns the replay's result (the log is closed on failure). */
static int try_open(enum wal_fsync mode, uint64_t segment_bytes, uint64_t from_lsn,
		    bool truncate_corrupt, struct wal **out)
{
	struct wal_options o = opts(mode, segment_bytes);
	struct wal *w;
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	nrecs = 0;
	ndurable = 0; /* a new log reports from its own start */
	int r = wal_replay(w, from_lsn, truncate_corrupt, collect, NULL, &rst, why, sizeof(why));
	if (r) {
		ck_assert_int_eq(wal_append(w, 1, "x", 1, NULL), -EINVAL);
		wal_close(w);
		uv_run(&loop, UV_RUN_NOWAIT);
		*out = NULL;
		return r;
	}
	*out = w;
	return 0;
}

static struct wal *open_ok(enum wal_fsync mode, uint64_t segment_bytes)
{
	struct wal *w;
	int r = try_open(mode, segment_bytes, 0, false, &w);
	ck_assert_msg(r == 0, "replay: %d %s", r, why);
	return w;
}

static int close_wal(struct wal *w)
{
	int r = wal_close(w);
	uv_run(&loop, UV_RUN_NOWAIT);
	return r;
}

static uint64_t append(struct wal *w, uint64_t expect_lsn)
{
	uint8_t p[256];
	size_t len = mkpayload(expect_lsn, p);
	uint64_t lsn = 0;
	ck_assert_int_eq(wal_append(w, 1 + (unsigned)(expect_lsn % 255), p, len, &lsn), 0);
	ck_assert_uint_eq(lsn, expect_lsn);
	return lsn;
}

/* The last replay delivered exactly the records first..last, as append() made them. */
static void assert_recs(uint64_t first, uint64_t last)
{
	ck_assert_uint_eq(nrecs, last - first + 1);
	for (unsigned i = 0; i < nrecs; i++) {
		uint8_t p[256];
		uint64_t lsn = first + i;
		size_t len = mkpayload(lsn, p);
		ck_assert_uint_eq(recs[i].lsn, lsn);
		ck_assert_uint_eq(recs[i].type, 1 + lsn % 255);
		ck_assert_uint_eq(recs[i].len, len);
		ck_assert_mem_eq(recs[i].data, p, len);
	}
}

/* Segment files in wdir, sorted by first LSN; returns how many. */
static unsigned list_segs(uint64_t *firsts, unsigned max)
{
	unsigned n = 0;
	DIR *d = opendir(wdir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l != 20 || strcmp(e->d_name + 16, ".wal") != 0)
			continue;
		ck_assert_uint_lt(n, max);
		firsts[n++] = strtoull(e->d_name, NULL, 16);
	}
	closedir(d);
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && firsts[j - 1] > firsts[j]; j--) {
			uint64_t t = firsts[j];
			firsts[j] = firsts[j - 1];
			firsts[j - 1] = t;
		}
	return n;
}

static void seg_path(uint64_t first, char *out, size_t n)
{
	char name[WAL_SEGMENT_NAME_MAX];
	wal_segment_name(first, name);
	snprintf(out, n, "%s/%s", wdir, name);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	uint8_t *b = malloc((size_t)st.st_size + 1);
	ck_assert_int_eq(read(fd, b, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

static void write_file(const char *path, const void *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
}

static off_t file_size(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

/* Encode a record the way the log does (for hand-made damaged logs). */
static size_t encode(uint8_t *p, unsigned type, uint64_t lsn, const uint8_t *pl, uint32_t len)
{
	memcpy(p, &len, 4);
	p[4] = (uint8_t)type;
	p[5] = p[6] = p[7] = 0;
	memcpy(p + 8, &lsn, 8);
	memcpy(p + 16, pl, len);
	uint64_t h = XXH3_64bits(p, 16 + len);
	memcpy(p + 16 + len, &h, 8);
	return 24 + len;
}

/* Write a log of records first..last (one segment, named first) and return record offsets. */
static size_t write_log(uint64_t first, uint64_t last, size_t *offs)
{
	wal_segment_name(first, why);
	mkdir(wdir, 0700);
	uint8_t *b = malloc(300 * (last - first + 1));
	size_t n = 0;
	for (uint64_t l = first; l <= last; l++) {
		uint8_t p[256];
		size_t len = mkpayload(l, p);
		if (offs)
			offs[l - first] = n;
		n += encode(b + n, 1 + (unsigned)(l % 255), l, p, (uint32_t)len);
	}
	char path[160];
	seg_path(first, path, sizeof(path));
	write_file(path, b, n);
	free(b);
	return n;
}

/* A fresh log with records 1..n written and durable, closed. */
static void make_log(enum wal_fsync mode, uint64_t segment_bytes, uint64_t n, uint64_t per_flush)
{
	struct wal *w = open_ok(mode, segment_bytes);
	uint64_t lsn = wal_next_lsn(w);
	while (lsn <= n) {
		for (uint64_t i = 0; i < per_flush && lsn <= n; i++, lsn++)
			append(w, lsn);
		ck_assert_int_eq(wal_flush(w), 0);
		RUN_UNTIL(wal_durable_lsn(w) == lsn - 1, 5000);
	}
	ck_assert_int_eq(close_wal(w), 0);
}

START_TEST(always_durable_after_sync_in_order)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	uint64_t segs[4];
	ck_assert_uint_eq(list_segs(segs, 4), 1);
	ck_assert_uint_eq(segs[0], 1);
	nsyncs = 0;
	append(w, 1);
	append(w, 2);
	append(w, 3);
	/* Appending does no I/O. */
	ck_assert_uint_eq(nwrites, 0);
	ck_assert_uint_eq(wal_written_lsn(w), 0);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(nwrites, 1);
	ck_assert_uint_eq(wal_written_lsn(w), 3);
	/* Written is not durable in mode always: only the sync thread's report makes it so. */
	ck_assert_uint_eq(wal_durable_lsn(w), 0);
	ck_assert_uint_eq(ndurable, 0);
	RUN_UNTIL(wal_durable_lsn(w) == 3, 5000);
	ck_assert_uint_eq(ndurable, 1);
	ck_assert_uint_eq(durable_calls[0], 3);
	ck_assert_uint_eq(nsyncs, 1);
	/* Nothing to write: no write, no sync. */
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(nwrites, 1);
	append(w, 4);
	append(w, 5);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 5, 5000);
	ck_assert_uint_eq(ndurable, 2);
	ck_assert_uint_eq(durable_calls[1], 5);
	struct wal_stats st;
	wal_get_stats(w, &st);
	ck_assert_uint_eq(st.appended, 5);
	ck_assert_uint_eq(st.writes, 2);
	ck_assert_uint_eq(st.fsyncs, 2);
	ck_assert_uint_eq(st.synced_lsn, 5);
	ck_assert_uint_eq(st.buffered_bytes, 0);
	ck_assert_uint_eq(st.bytes, st.bytes_written);
	uint64_t hist = 0;
	for (unsigned i = 0; i < WAL_FSYNC_BUCKETS; i++)
		hist += st.fsync_hist[i];
	ck_assert_uint_eq(hist, 2);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 5);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/* A log opened again makes its segments' names durable: the process before may have died
 * between creating its last segment and syncing the directory, and the records appended to that
 * segment now (acknowledged once fdatasync'ed) would go with its name at a power cut. */
START_TEST(reopen_syncs_the_directory)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);

	append(w, 1);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 1, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	ndirsyncs = 0;
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 1);
	ck_assert_uint_ge(ndirsyncs, 1);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(group_commit_one_sync_per_flush)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	nsyncs = 0;
	for (uint64_t l = 1; l <= 1000; l++)
		append(w, l);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 1000, 5000);
	ck_assert_uint_eq(nsyncs, 1);
	ck_assert_uint_eq(nwrites, 1);
	ck_assert_uint_eq(ndurable, 1);
	/* Flushes while a sync is running share the next one. */
	sync_delay_ms = 100;
	nsyncs = 0;
	uint64_t l = 1001;
	for (int f = 0; f < 5; f++) {
		for (int i = 0; i < 10; i++, l++)
			append(w, l);
		ck_assert_int_eq(wal_flush(w), 0);
	}
	RUN_UNTIL(wal_durable_lsn(w) == 1050, 5000);
	ck_assert_uint_ge(nsyncs, 1);
	ck_assert_uint_le(nsyncs, 2);
	sync_delay_ms = 0;
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(everysec_durable_at_write_synced_within_seconds)
{
	struct wal *w = open_ok(WAL_FSYNC_EVERYSEC, 0);
	nsyncs = 0;
	append(w, 1);
	append(w, 2);
	ck_assert_int_eq(wal_flush(w), 0);
	/* Durable once written, reported from wal_flush() itself. */
	ck_assert_uint_eq(wal_durable_lsn(w), 2);
	ck_assert_uint_eq(ndurable, 1);
	ck_assert_uint_eq(durable_calls[0], 2);
	ck_assert_uint_eq(nsyncs, 0);
	struct wal_stats st;
	RUN_UNTIL((wal_get_stats(w, &st), st.synced_lsn == 2), 3000);
	ck_assert_uint_eq(st.fsyncs, 1);
	ck_assert_uint_eq(st.buffered_bytes, 0);
	append(w, 3);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(wal_durable_lsn(w), 3);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_EVERYSEC, 0);
	assert_recs(1, 3);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(no_mode_syncs_only_at_close)
{
	struct wal *w = open_ok(WAL_FSYNC_NO, 0);
	nsyncs = 0;
	append(w, 1);
	append(w, 2);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(wal_durable_lsn(w), 2);
	ck_assert_uint_eq(ndurable, 1);
	run_for(1200);
	ck_assert_uint_eq(nsyncs, 0);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_uint_eq(nsyncs, 1);
	w = open_ok(WAL_FSYNC_NO, 0);
	assert_recs(1, 2);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(lsns_continue_across_reopen)
{
	make_log(WAL_FSYNC_ALWAYS, 0, 5, 2);
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 5);
	ck_assert_uint_eq(rst.next_lsn, 6);
	ck_assert_uint_eq(rst.first_lsn, 1);
	ck_assert_uint_eq(rst.tail_truncated, 0);
	ck_assert_str_eq(why, "");
	ck_assert_uint_eq(wal_next_lsn(w), 6);
	ck_assert_uint_eq(wal_durable_lsn(w), 5);
	append(w, 6);
	/* Buffered and never flushed: wal_close() writes and syncs it. */
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 6);
	append(w, 7);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 7, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 7);
	uint64_t segs[4];
	ck_assert_uint_eq(list_segs(segs, 4), 1);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(rotation_names_and_sizes)
{
	payload_len = 200; /* 224-byte records */
	make_log(WAL_FSYNC_ALWAYS, 4096, 100, 10);
	uint64_t segs[32];
	unsigned n = list_segs(segs, 32);
	/* 2240 bytes per flush: a segment takes two flushes (4480 bytes) before it is full. */
	ck_assert_uint_eq(n, 5);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_uint_eq(segs[i], 1 + 20 * i);
		char path[160];
		seg_path(segs[i], path, sizeof(path));
		size_t len;
		uint8_t *b = read_file(path, &len);
		uint64_t first;
		memcpy(&first, b + 8, 8);
		ck_assert_uint_eq(first, segs[i]);
		ck_assert_uint_eq(len, 20 * 224);
		free(b);
	}
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 4096);
	assert_recs(1, 100);
	ck_assert_uint_eq(rst.segments_read, 5);
	ck_assert_uint_eq(wal_segments(w), 5);
	ck_assert_uint_eq(wal_bytes(w), 100 * 224);
	/* The current segment is full: the next flush starts segment 101. */
	append(w, 101);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 101, 5000);
	ck_assert_uint_eq(wal_segments(w), 6);
	struct wal_stats st;
	wal_get_stats(w, &st);
	ck_assert_uint_eq(st.rotations, 1);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_uint_eq(list_segs(segs, 32), 6);
	ck_assert_uint_eq(segs[5], 101);
}
END_TEST

START_TEST(rotation_in_modes_everysec_and_no)
{
	payload_len = 200;
	for (int m = WAL_FSYNC_EVERYSEC; m <= WAL_FSYNC_NO; m++) {
		struct wal *w = open_ok((enum wal_fsync)m, 4096);
		uint64_t l = wal_next_lsn(w);
		for (int f = 0; f < 10; f++) {
			for (int i = 0; i < 10; i++, l++)
				append(w, l);
			ck_assert_int_eq(wal_flush(w), 0);
			/* A switch in progress holds the write until the new segment exists. */
			RUN_UNTIL(wal_durable_lsn(w) == l - 1, 5000);
		}
		ck_assert_int_eq(close_wal(w), 0);
	}
	struct wal *w = open_ok(WAL_FSYNC_NO, 4096);
	assert_recs(1, 200);
	ck_assert_uint_eq(rst.segments_read, 10);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/*
 * wal_write_now() puts the records in a file before it returns, where wal_flush() would only
 * start a switch: a record that must precede a file's removal (a drop, a FLUSHALL) is there
 * when a kill follows. With the segment full it goes into that segment; with a switch in
 * progress (its fdatasync slowed) it waits for the new segment.
 */
START_TEST(write_now_with_a_full_segment_and_during_a_switch)
{
	payload_len = 200; /* 224-byte records */
	make_log(WAL_FSYNC_ALWAYS, 4096, 100, 10);
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 4096);
	char path[160];

	/* The current segment (81..100, 4480 bytes) is full. */
	append(w, 101);
	ck_assert_int_eq(wal_write_now(w), 0);
	ck_assert_uint_eq(wal_written_lsn(w), 101);
	ck_assert_uint_eq(wal_segments(w), 5);
	seg_path(81, path, sizeof(path));
	ck_assert_int_eq(file_size(path), 21 * 224);
	RUN_UNTIL(wal_durable_lsn(w) == 101, 5000);

	/* A flush starts the switch; the record after it waits for the new segment. */
	sync_delay_ms = 100;
	append(w, 102);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(wal_written_lsn(w), 101);
	append(w, 103);
	ck_assert_int_eq(wal_write_now(w), 0);
	ck_assert_uint_eq(wal_written_lsn(w), 103);
	ck_assert_uint_eq(wal_segments(w), 6);
	seg_path(102, path, sizeof(path));
	ck_assert_int_eq(file_size(path), 2 * 224);
	sync_delay_ms = 0;
	RUN_UNTIL(wal_durable_lsn(w) == 103, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_ALWAYS, 4096);
	assert_recs(1, 103);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(replay_from_the_middle_skips_segments_unread)
{
	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 100, 10);
	/* Damage the first segment: a replay from LSN 50 must not even read it. */
	char path[160];
	seg_path(1, path, sizeof(path));
	size_t len;
	uint8_t *b = read_file(path, &len);
	b[100] ^= 0x40;
	write_file(path, b, len);
	free(b);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 50, false, &w), 0);
	assert_recs(50, 100);
	ck_assert_uint_eq(rst.segments_skipped, 2); /* 1..20, 21..40 */
	ck_assert_uint_eq(rst.segments_read, 3);
	ck_assert_uint_eq(rst.records, 60);
	ck_assert_uint_eq(rst.delivered, 51);
	ck_assert_uint_eq(rst.first_lsn, 41);
	ck_assert_uint_eq(rst.next_lsn, 101);
	ck_assert_int_eq(close_wal(w), 0);
	/* From the start, the damage is found. */
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 0, false, &w), -EBADMSG);
	ck_assert_str_eq(why, "segment 0000000000000001.wal, offset 0: checksum mismatch");
	/* A replay past the end reads only the last segment and delivers nothing. */
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 1000, false, &w), 0);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_uint_eq(rst.segments_read, 1);
	ck_assert_uint_eq(rst.next_lsn, 101);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(torn_tail_cut_at_every_offset)
{
	size_t offs[3];
	size_t total = write_log(1, 3, offs);
	char path[160];
	seg_path(1, path, sizeof(path));
	size_t len;
	uint8_t *good = read_file(path, &len);
	ck_assert_uint_eq(len, total);
	size_t last = offs[2];
	for (size_t cut = 0; cut < total - last; cut++) {
		rm_files(wdir);
		write_file(path, good, last + cut);
		struct wal *w;
		int r = try_open(WAL_FSYNC_NO, 0, 0, false, &w);
		ck_assert_msg(r == 0, "cut %zu: %d %s", cut, r, why);
		assert_recs(1, 2);
		ck_assert_uint_eq(rst.tail_truncated, cut);
		ck_assert_uint_eq(file_size(path), last);
		if (cut)
			ck_assert_msg(strstr(why, "torn") != NULL, "cut %zu: %s", cut, why);
		else
			ck_assert_str_eq(why, "");
		/* Appends continue at the lost record's LSN. */
		append(w, 3);
		ck_assert_int_eq(wal_flush(w), 0);
		ck_assert_int_eq(close_wal(w), 0);
		ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), 0);
		assert_recs(1, 3);
		ck_assert_uint_eq(rst.tail_truncated, 0);
		ck_assert_int_eq(close_wal(w), 0);
	}
	/* A zero-filled tail (a preallocated segment's, or a power cut's) ends the segment:
	 * nothing is cut or reported, and appends go right after the last record. */
	rm_files(wdir);
	uint8_t *z = calloc(1, total + 4096);
	memcpy(z, good, last);
	write_file(path, z, last + 4096);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), 0);
	assert_recs(1, 2);
	ck_assert_uint_eq(rst.tail_truncated, 0);
	ck_assert_str_eq(why, "");
	ck_assert_uint_eq(wal_bytes(w), last);
	append(w, 3);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_uint_eq(file_size(path), last + 4096);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), 0);
	assert_recs(1, 3);
	ck_assert_int_eq(close_wal(w), 0);
	free(z);
	free(good);
}
END_TEST

/* A file's bytes from off on are all zero. */
static bool zero_from(const uint8_t *b, size_t len, size_t off)
{
	for (size_t i = off; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/*
 * prealloc_bytes: segments are zero-filled ahead of their records, rotation and replay read
 * them (the zeros are each segment's clean end, reported nowhere), appends after a restart go
 * right after the last record; a torn write before the zeros is still cut, and a flipped bit
 * in a record before them still refuses the replay.
 */
START_TEST(preallocated_segments)
{
	struct wal_options o = opts(WAL_FSYNC_ALWAYS, 16384);
	struct wal *w;
	char path[160];
	size_t len;

	payload_len = 200;
	o.prealloc_bytes = 8192;
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	ck_assert_int_eq(wal_replay(w, 0, false, collect, NULL, &rst, why, sizeof(why)), 0);
	append(w, 1);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 1, 2000);
	/* One record, then zeros to the next multiple of 8192 past half of it ahead. */
	seg_path(1, path, sizeof(path));
	uint8_t *b = read_file(path, &len);
	ck_assert_uint_eq(len, 8192);
	ck_assert_uint_eq(wal_bytes(w), WAL_RECORD_OVERHEAD + 200);
	ck_assert(zero_from(b, len, WAL_RECORD_OVERHEAD + 200));
	free(b);
	/* Enough records for several segments (never zero-filled past segment_bytes). */
	for (uint64_t l = 2; l <= 300; l++) {
		append(w, l);
		if (l % 7 == 0) {
			ck_assert_int_eq(wal_flush(w), 0);
			RUN_UNTIL(wal_durable_lsn(w) == l, 2000);
		}
	}
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 300, 5000);
	ck_assert_uint_gt(wal_segments(w), 3);
	ck_assert_int_eq(close_wal(w), 0);
	b = read_file(path, &len);
	ck_assert_uint_le(len, 16384 + 7 * (WAL_RECORD_OVERHEAD + 200));
	free(b);

	/* Replayed with or without preallocation alike, nothing reported. */
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 16384, 0, false, &w), 0);
	assert_recs(1, 300);
	ck_assert_str_eq(why, "");
	ck_assert_uint_eq(rst.tail_truncated, 0);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	nrecs = 0;
	ck_assert_int_eq(wal_replay(w, 0, false, collect, NULL, &rst, why, sizeof(why)), 0);
	assert_recs(1, 300);
	ck_assert_str_eq(why, "");
	append(w, 301);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 301, 2000);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 16384, 0, false, &w), 0);
	assert_recs(1, 301);
	ck_assert_int_eq(close_wal(w), 0);

	/* The last segment: its last record torn (half of it written, zeros after). */
	uint64_t first = 0;
	DIR *dp = opendir(wdir);
	struct dirent *e;
	while ((e = readdir(dp)))
		if (strstr(e->d_name, ".wal") && strtoull(e->d_name, NULL, 16) > first)
			first = strtoull(e->d_name, NULL, 16);
	closedir(dp);
	seg_path(first, path, sizeof(path));
	b = read_file(path, &len);
	size_t rec = WAL_RECORD_OVERHEAD + 200, end = (301 - first + 1) * rec;
	ck_assert(zero_from(b, len, end));
	ck_assert_uint_gt(len, end);
	memset(b + end - rec / 2, 0, rec / 2);
	write_file(path, b, len);
	free(b);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 16384, 0, false, &w), 0);
	assert_recs(1, 300);
	ck_assert_uint_eq(rst.tail_truncated, len - (end - rec));
	ck_assert_ptr_nonnull(strstr(why, "torn"));
	ck_assert_int_eq(close_wal(w), 0);

	/* A flipped bit in a record of a preallocated older segment: corruption. */
	seg_path(1, path, sizeof(path));
	b = read_file(path, &len);
	b[rec + 20] ^= 0x04;
	write_file(path, b, len);
	free(b);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 16384, 0, false, &w), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "segment 0000000000000001.wal, offset %zu: checksum mismatch",
		 rec);
	ck_assert_str_eq(why, want);
	payload_len = 0;
}
END_TEST

START_TEST(bit_flip_in_the_middle_is_corruption)
{
	size_t offs[5];
	size_t total = write_log(1, 5, offs);
	char path[160];
	seg_path(1, path, sizeof(path));
	size_t len;
	uint8_t *b = read_file(path, &len);
	b[offs[2] + 20] ^= 0x08; /* record 3's payload */
	write_file(path, b, len);
	free(b);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "segment 0000000000000001.wal, offset %zu: checksum mismatch",
		 offs[2]);
	ck_assert_str_eq(why, want);
	ck_assert_uint_eq(nrecs, 2);
	ck_assert_uint_eq(file_size(path), total); /* refused: nothing changed */
	/* The operator's truncate flag: the records before it survive. */
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, true, &w), 0);
	assert_recs(1, 2);
	ck_assert_uint_eq(rst.corrupt_truncated, total - offs[2]);
	ck_assert_uint_eq(rst.dropped_segments, 0);
	ck_assert_uint_eq(rst.next_lsn, 3);
	ck_assert_ptr_nonnull(strstr(why, "checksum mismatch; truncated there"));
	ck_assert_uint_eq(file_size(path), offs[2]);
	append(w, 3);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), 0);
	assert_recs(1, 3);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(corruption_in_an_older_segment_drops_the_later_ones)
{
	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 100, 10);
	/* The LAST record of segment 21 (21..40) is bad: not a tail, since segments follow. */
	char path[160];
	seg_path(21, path, sizeof(path));
	size_t len;
	uint8_t *b = read_file(path, &len);
	b[len - 1] ^= 1;
	write_file(path, b, len);
	free(b);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 0, false, &w), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "segment 0000000000000015.wal, offset %zu: checksum mismatch",
		 (size_t)19 * 224);
	ck_assert_str_eq(why, want);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 0, true, &w), 0);
	assert_recs(1, 39);
	ck_assert_uint_eq(rst.dropped_segments, 3);
	ck_assert_uint_eq(rst.dropped_bytes, 3 * 20 * 224);
	ck_assert_uint_eq(rst.corrupt_truncated, 224);
	ck_assert_uint_eq(wal_segments(w), 2);
	uint64_t segs[8];
	ck_assert_uint_eq(list_segs(segs, 8), 2);
	append(w, 40);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 4096, 0, false, &w), 0);
	assert_recs(1, 40);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(bad_length_field)
{
	size_t offs[4];
	size_t total = write_log(1, 4, offs);
	char path[160];
	seg_path(1, path, sizeof(path));
	size_t len;
	uint8_t *good = read_file(path, &len);
	uint8_t *b = malloc(len);
	memcpy(b, good, len);
	uint32_t huge = 0xfffffff0u;
	memcpy(b + offs[1], &huge, 4);
	write_file(path, b, len);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "segment 0000000000000001.wal, offset %zu: bad length %u",
		 offs[1], huge);
	ck_assert_str_eq(why, want);
	/* A length that fits the file but is wrong: the checksum catches it. */
	memcpy(b, good, len);
	uint32_t l1;
	memcpy(&l1, b + offs[1], 4);
	l1 += 3;
	memcpy(b + offs[1], &l1, 4);
	write_file(path, b, len);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	snprintf(want, sizeof(want), "segment 0000000000000001.wal, offset %zu: checksum mismatch",
		 offs[1]);
	ck_assert_str_eq(why, want);
	/* The same damage in the last record is a torn tail. */
	memcpy(b, good, len);
	memcpy(b + offs[3], &huge, 4);
	write_file(path, b, len);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), 0);
	assert_recs(1, 3);
	ck_assert_uint_eq(rst.tail_truncated, total - offs[3]);
	ck_assert_int_eq(close_wal(w), 0);
	free(b);
	free(good);
}
END_TEST

START_TEST(lsn_gap)
{
	mkdir(wdir, 0700);
	uint8_t b[2048], p[256];
	size_t n = 0, off4 = 0;
	uint64_t lsns[] = {1, 2, 4, 5};
	for (int i = 0; i < 4; i++) {
		if (lsns[i] == 4)
			off4 = n;
		n += encode(b + n, 7, lsns[i], p, (uint32_t)mkpayload(lsns[i], p));
	}
	char path[160];
	seg_path(1, path, sizeof(path));
	write_file(path, b, n);
	struct wal *w;
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "segment 0000000000000001.wal, offset %zu: LSN 4, expected 3",
		 off4);
	ck_assert_str_eq(why, want);

	/* A gap between segments: 1..3, then a segment starting at 5. */
	rm_files(wdir);
	write_log(5, 6, NULL);
	write_log(1, 3, NULL);
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	ck_assert_str_eq(why, "segment 0000000000000005.wal, offset 0: segment starts at LSN 5, "
			      "the log left off before LSN 4");
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, true, &w), 0);
	assert_recs(1, 3);
	ck_assert_uint_eq(rst.dropped_segments, 1);
	ck_assert_uint_eq(rst.next_lsn, 4);
	uint64_t segs[4];
	ck_assert_uint_eq(list_segs(segs, 4), 1);
	ck_assert_int_eq(close_wal(w), 0);
	/* A segment whose first record is not its name. */
	rm_files(wdir);
	write_log(1, 3, NULL);
	char from[160], to[160];
	seg_path(1, from, sizeof(from));
	seg_path(2, to, sizeof(to));
	ck_assert_int_eq(rename(from, to), 0);
	/* Good records follow the bad one, so it is no torn tail even in the last segment. */
	ck_assert_int_eq(try_open(WAL_FSYNC_NO, 0, 0, false, &w), -EBADMSG);
	ck_assert_str_eq(why, "segment 0000000000000002.wal, offset 0: LSN 1, expected 2");
}
END_TEST

START_TEST(enospc_on_write_then_recovery)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	for (uint64_t l = 1; l <= 3; l++)
		append(w, l);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 3, 5000);
	fail_write = ENOSPC;
	fail_write_partial = 10; /* some bytes of the batch reach the file */
	for (uint64_t l = 4; l <= 6; l++)
		append(w, l);
	ck_assert_int_eq(wal_flush(w), -ENOSPC);
	ck_assert(wal_failed(w));
	ck_assert_int_eq(wal_error(w), -ENOSPC);
	run_for(150);
	/* The retry timer keeps trying; nothing that failed is durable. */
	ck_assert(wal_failed(w));
	ck_assert_uint_eq(wal_durable_lsn(w), 3);
	ck_assert_uint_eq(ndurable, 1);
	struct wal_stats st;
	wal_get_stats(w, &st);
	ck_assert_uint_ge(st.failures, 3);
	ck_assert(st.failed);
	ck_assert_int_eq(st.error, -ENOSPC);
	/* Still accepted while failed; written once the disk is back. */
	append(w, 7);
	ck_assert_int_eq(wal_flush(w), -ENOSPC);
	fail_write = 0;
	RUN_UNTIL(!wal_failed(w), 5000);
	RUN_UNTIL(wal_durable_lsn(w) == 7, 5000);
	ck_assert_int_eq(wal_error(w), 0);
	ck_assert_uint_eq(ndurable, 2);
	ck_assert_uint_eq(durable_calls[1], 7);
	wal_get_stats(w, &st);
	ck_assert_uint_eq(st.recoveries, 1);
	append(w, 8);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 8, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	/* The old segment was cut back to its synced records; the rest went to a new one. */
	uint64_t segs[4];
	ck_assert_uint_eq(list_segs(segs, 4), 2);
	ck_assert_uint_eq(segs[0], 1);
	ck_assert_uint_eq(segs[1], 4);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 8);
	ck_assert_uint_eq(rst.tail_truncated, 0);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(eio_on_fdatasync_then_recovery)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	append(w, 1);
	append(w, 2);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 2, 5000);
	fail_sync = EIO;
	append(w, 3);
	append(w, 4);
	ck_assert_int_eq(wal_flush(w), 0); /* the write itself works */
	RUN_UNTIL(wal_failed(w), 5000);
	ck_assert_int_eq(wal_error(w), -EIO);
	run_for(100);
	ck_assert_uint_eq(wal_durable_lsn(w), 2);
	ck_assert_uint_eq(ndurable, 1);
	append(w, 5);
	ck_assert_int_eq(wal_flush(w), -EIO);
	fail_sync = 0;
	RUN_UNTIL(!wal_failed(w) && wal_durable_lsn(w) == 5, 5000);
	ck_assert_uint_eq(durable_calls[ndurable - 1], 5);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	assert_recs(1, 5);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(eio_on_fdatasync_everysec)
{
	struct wal *w = open_ok(WAL_FSYNC_EVERYSEC, 0);
	fail_sync = EIO; /* after the replay's own fdatasync */
	append(w, 1);
	append(w, 2);
	ck_assert_int_eq(wal_flush(w), 0);
	ck_assert_uint_eq(wal_durable_lsn(w), 2); /* written = durable in everysec */
	RUN_UNTIL(wal_failed(w), 3000);
	append(w, 3);
	ck_assert_int_eq(wal_flush(w), -EIO);
	run_for(50);
	ck_assert_uint_eq(wal_durable_lsn(w), 2);
	fail_sync = 0;
	RUN_UNTIL(!wal_failed(w) && wal_durable_lsn(w) == 3, 5000);
	struct wal_stats st;
	wal_get_stats(w, &st);
	ck_assert_uint_eq(st.synced_lsn, 3);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_EVERYSEC, 0);
	assert_recs(1, 3);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

START_TEST(failed_rotation_recovers)
{
	payload_len = 200;
	struct wal *w = open_ok(WAL_FSYNC_NO, 4096);
	uint64_t l = 1;
	for (; l <= 20; l++)
		append(w, l);
	ck_assert_int_eq(wal_flush(w), 0);
	/* The segment is full; its sync at the switch fails. */
	fail_sync = EIO;
	for (; l <= 25; l++)
		append(w, l);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_failed(w), 5000);
	ck_assert_uint_eq(wal_durable_lsn(w), 20);
	fail_sync = 0;
	RUN_UNTIL(!wal_failed(w) && wal_durable_lsn(w) == 25, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_NO, 4096);
	assert_recs(1, 25);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/* Released segments whose files are still being deleted. */
static uint64_t unlinking(struct wal *w)
{
	struct wal_stats st;
	wal_get_stats(w, &st);
	return st.unlinking;
}

START_TEST(release_deletes_exactly_covered_segments)
{
	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 100, 10);
	struct wal *w = open_ok(WAL_FSYNC_NO, 4096);
	uint64_t segs[8];
	ck_assert_uint_eq(list_segs(segs, 8), 5); /* 1 21 41 61 81 */
	ck_assert_int_eq(wal_release(w, 40), 1);  /* 1..20 only; 21..40 has 40 */
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_uint_eq(list_segs(segs, 8), 4);
	ck_assert_uint_eq(segs[0], 21);
	ck_assert_int_eq(wal_release(w, 41), 1);
	ck_assert_int_eq(wal_release(w, 41), 0); /* already being deleted */
	ck_assert_uint_eq(wal_segments(w), 3);
	ck_assert_uint_eq(wal_bytes(w), 60 * 224);
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_int_eq(wal_release(w, 41), 0);
	ck_assert_int_eq(wal_release(w, UINT64_MAX), 2); /* never the current one */
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_uint_eq(wal_segments(w), 1);
	ck_assert_uint_eq(list_segs(segs, 8), 1);
	ck_assert_uint_eq(segs[0], 81);
	ck_assert_int_eq(close_wal(w), 0);
	w = open_ok(WAL_FSYNC_NO, 4096);
	assert_recs(81, 100);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/* A power cut can bring back a segment a release deleted (the delete not yet durable, the new
 * start already): it is before the recorded start, so it is deleted again, unread, however
 * broken (here a hole: zeros, then bytes that are no record). */
START_TEST(segment_back_before_the_start_is_dropped_unread)
{
	char path[160];
	uint8_t junk[4096] = {0};
	uint64_t segs[8];

	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 100, 10);
	struct wal *w = open_ok(WAL_FSYNC_NO, 4096);
	ck_assert_int_eq(wal_release(w, 41), 2); /* 1..40: the start is now 41 */
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	memset(junk + 2048, 0x5a, 1024);
	snprintf(path, sizeof(path), "%s/%016x.wal", wdir, 21u);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_uint_eq(list_segs(segs, 8), 4);
	w = open_ok(WAL_FSYNC_NO, 4096);
	assert_recs(41, 100);
	ck_assert_uint_eq(list_segs(segs, 8), 3);
	ck_assert_uint_eq(segs[0], 41);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/* on_unlink_error calls. */
static char unlink_failed[WAL_SEGMENT_NAME_MAX];
static int unlink_err;
static unsigned nunlink_errors;

static void on_unlink_error(void *arg, const char *segment, int err)
{
	(void)arg;
	snprintf(unlink_failed, sizeof(unlink_failed), "%s", segment);
	unlink_err = err;
	nunlink_errors++;
}

START_TEST(release_that_cannot_delete_keeps_the_segment)
{
	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 60, 10);
	struct wal_options o = opts(WAL_FSYNC_NO, 4096);
	o.on_unlink_error = on_unlink_error;
	struct wal *w;
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	ck_assert_int_eq(wal_replay(w, 0, false, collect, NULL, &rst, why, sizeof(why)), 0);
	/* Segment 21 becomes something unlink(2) refuses: a directory. */
	char path[160];
	seg_path(21, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	nunlink_errors = 0;
	ck_assert_int_eq(wal_release(w, 60), 2);
	ck_assert_uint_eq(wal_segments(w), 1);
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_uint_eq(nunlink_errors, 1);
	ck_assert_str_eq(unlink_failed, "0000000000000015.wal");
	ck_assert_int_eq(unlink_err, -EISDIR);
	/* Kept, and tried again by the next release. */
	ck_assert_uint_eq(wal_segments(w), 2);
	ck_assert_uint_eq(wal_bytes(w), 20 * 224 + 20 * 224);
	uint64_t segs[8];
	ck_assert_uint_eq(list_segs(segs, 8), 2); /* 21 (the directory) 41 */
	ck_assert_int_eq(rmdir(path), 0);
	ck_assert_int_eq(wal_release(w, 60), 1);
	RUN_UNTIL(unlinking(w) == 0, 5000);
	ck_assert_uint_eq(nunlink_errors, 1); /* gone already counts as deleted */
	ck_assert_uint_eq(wal_segments(w), 1);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

/* Threadpool works that wait until unblock_pool(): the work queued after them waits too. */
static uv_sem_t pool_sem;
static uv_work_t pool_blockers[64];
static unsigned npool_blockers;

static void blocker_work(uv_work_t *req)
{
	(void)req;
	uv_sem_wait(&pool_sem);
}

static void blocker_done(uv_work_t *req, int status)
{
	(void)req;
	ck_assert_int_eq(status, 0);
}

static void block_pool(void)
{
	const char *env = getenv("UV_THREADPOOL_SIZE");
	npool_blockers = env ? (unsigned)atoi(env) : 4;
	ck_assert_uint_ge(npool_blockers, 1);
	ck_assert_uint_le(npool_blockers, 64);
	ck_assert_int_eq(uv_sem_init(&pool_sem, 0), 0);
	for (unsigned i = 0; i < npool_blockers; i++)
		ck_assert_int_eq(
		    uv_queue_work(&loop, &pool_blockers[i], blocker_work, blocker_done), 0);
}

static void unblock_pool(void)
{
	for (unsigned i = 0; i < npool_blockers; i++)
		uv_sem_post(&pool_sem);
}

START_TEST(close_while_a_release_is_pending)
{
	payload_len = 200;
	make_log(WAL_FSYNC_NO, 4096, 60, 10);
	struct wal *w = open_ok(WAL_FSYNC_NO, 4096);
	block_pool();
	ck_assert_int_eq(wal_release(w, 60), 2);
	ck_assert_int_eq(wal_release(w, 60), 0);
	ck_assert_int_eq(wal_close(w), 0);
	uint64_t segs[8];
	ck_assert_uint_eq(list_segs(segs, 8), 3); /* not deleted yet */
	/* The deletion outlives the log's fd and memory until the loop has run it. */
	unblock_pool();
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_sem_destroy(&pool_sem);
	ck_assert_uint_eq(list_segs(segs, 8), 1);
	ck_assert_uint_eq(segs[0], 41);
	w = open_ok(WAL_FSYNC_NO, 4096);
	assert_recs(41, 60);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

static uint64_t big_sum;
static unsigned big_n;

static int hash_records(void *arg, uint64_t lsn, unsigned type, const void *p, size_t len)
{
	(void)arg, (void)type;
	big_sum ^= XXH3_64bits(p, len) + lsn;
	big_n++;
	return 0;
}

START_TEST(records_longer_than_the_read_chunk)
{
	struct wal *w = open_ok(WAL_FSYNC_ALWAYS, 0);
	size_t sizes[] = {10, 5u << 20, 3, 9u << 20, 1};
	uint64_t want = 0;
	uint8_t *p = malloc(9u << 20);
	for (unsigned i = 0; i < 5; i++) {
		for (size_t k = 0; k < sizes[i]; k++)
			p[k] = (uint8_t)(k * 7 + i);
		uint64_t lsn;
		ck_assert_int_eq(wal_append(w, 9, p, sizes[i], &lsn), 0);
		want ^= XXH3_64bits(p, sizes[i]) + lsn;
	}
	free(p);
	ck_assert_int_eq(wal_flush(w), 0);
	RUN_UNTIL(wal_durable_lsn(w) == 5, 5000);
	ck_assert_int_eq(close_wal(w), 0);
	struct wal_options o = opts(WAL_FSYNC_ALWAYS, 0);
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	big_sum = 0;
	big_n = 0;
	ck_assert_int_eq(wal_replay(w, 0, false, hash_records, NULL, &rst, why, sizeof(why)), 0);
	ck_assert_uint_eq(big_n, 5);
	ck_assert_uint_eq(big_sum, want);
	ck_assert_int_eq(close_wal(w), 0);
}
END_TEST

static int stop_at_3(void *arg, uint64_t lsn, unsigned type, const void *p, size_t len)
{
	(void)arg, (void)type, (void)p, (void)len;
	return lsn == 3 ? -ECANCELED : 0;
}

START_TEST(api_edges)
{
	struct wal_options o = opts(WAL_FSYNC_ALWAYS, 0);
	struct wal *w;
	o.loop = NULL;
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_null(w);
	o = opts(WAL_FSYNC_ALWAYS, 100);
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), -EINVAL);
	o = opts(WAL_FSYNC_ALWAYS, 0);
	o.dir = "/nonexistent-blossomd/wal";
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "mkdir /nonexistent-blossomd/wal"));
	ck_assert_int_eq(close_wal(NULL), 0);

	o = opts(WAL_FSYNC_ALWAYS, 0);
	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	struct stat st;
	ck_assert_int_eq(stat(wdir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(wal_append(w, 1, "x", 1, NULL), -EINVAL); /* before replay */
	ck_assert_int_eq(wal_flush(w), -EINVAL);
	ck_assert_int_eq(wal_replay(w, 0, false, collect, NULL, NULL, why, sizeof(why)), 0);
	ck_assert_int_eq(wal_replay(w, 0, false, collect, NULL, NULL, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(wal_append(w, 0, "x", 1, NULL), -EINVAL);
	ck_assert_int_eq(wal_append(w, 256, "x", 1, NULL), -EINVAL);
	ck_assert_int_eq(wal_append(w, 1, "x", WAL_MAX_PAYLOAD + 1, NULL), -EMSGSIZE);
	ck_assert_uint_eq(wal_next_lsn(w), 1);
	uint64_t lsn;
	ck_assert_int_eq(wal_append(w, 255, NULL, 0, &lsn), 0); /* empty payload */
	ck_assert_uint_eq(lsn, 1);
	for (uint64_t l = 2; l <= 5; l++)
		append(w, l);
	ck_assert_int_eq(close_wal(w), 0);

	ck_assert_int_eq(wal_open(&o, &w, why, sizeof(why)), 0);
	ck_assert_int_eq(wal_replay(w, 0, false, stop_at_3, NULL, NULL, why, sizeof(why)),
			 -ECANCELED);
	ck_assert_ptr_nonnull(strstr(why, "replay stopped at LSN 3"));
	ck_assert_int_eq(wal_append(w, 1, "x", 1, NULL), -EINVAL);
	close_wal(w);
	/* Files that are not segments are left alone. */
	char other[160];
	snprintf(other, sizeof(other), "%s/notes.txt", wdir);
	write_file(other, "hi", 2);
	w = open_ok(WAL_FSYNC_ALWAYS, 0);
	ck_assert_uint_eq(nrecs, 5);
	ck_assert_uint_eq(recs[0].type, 255);
	ck_assert_uint_eq(recs[0].len, 0);
	ck_assert_int_eq(close_wal(w), 0);
	ck_assert_int_eq(unlink(other), 0);
}
END_TEST

static Suite *wal_suite(void)
{
	Suite *s = suite_create("wal");
	TCase *tc = tcase_create("wal");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, always_durable_after_sync_in_order);
	tcase_add_test(tc, reopen_syncs_the_directory);
	tcase_add_test(tc, group_commit_one_sync_per_flush);
	tcase_add_test(tc, everysec_durable_at_write_synced_within_seconds);
	tcase_add_test(tc, no_mode_syncs_only_at_close);
	tcase_add_test(tc, lsns_continue_across_reopen);
	tcase_add_test(tc, rotation_names_and_sizes);
	tcase_add_test(tc, rotation_in_modes_everysec_and_no);
	tcase_add_test(tc, write_now_with_a_full_segment_and_during_a_switch);
	tcase_add_test(tc, replay_from_the_middle_skips_segments_unread);
	tcase_add_test(tc, torn_tail_cut_at_every_offset);
	tcase_add_test(tc, bit_flip_in_the_middle_is_corruption);
	tcase_add_test(tc, corruption_in_an_older_segment_drops_the_later_ones);
	tcase_add_test(tc, bad_length_field);
	tcase_add_test(tc, lsn_gap);
	tcase_add_test(tc, enospc_on_write_then_recovery);
	tcase_add_test(tc, eio_on_fdatasync_then_recovery);
	tcase_add_test(tc, eio_on_fdatasync_everysec);
	tcase_add_test(tc, failed_rotation_recovers);
	tcase_add_test(tc, release_deletes_exactly_covered_segments);
	tcase_add_test(tc, segment_back_before_the_start_is_dropped_unread);
	tcase_add_test(tc, release_that_cannot_delete_keeps_the_segment);
	tcase_add_test(tc, close_while_a_release_is_pending);
	tcase_add_test(tc, records_longer_than_the_read_chunk);
	tcase_add_test(tc, api_edges);
	tcase_add_test(tc, preallocated_segments);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(wal_suite)
