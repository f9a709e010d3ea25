/* SPDX-License-Identifier: MIT */
/*
 * bench/wal-replay: how fast the write-ahead log replays at start (issue 12's target: at least
 * 20 M keys/s). Writes N add-like records, each a 4-byte filter id and K 128-bit key hashes
 * (the daemon's add record: one record per batch), through wal_append/wal_flush (mode no, one
 * flush per 1000 records, as loop iterations would), then replays the log --reps times with a
 * callback that reads every hash, and prints the median. The files are in the page cache (a
 * replay right after a restart); a cold-cache start is bounded by the disk's read speed
 * instead (about 270 bytes per 16-key record).
 *
 *	build/bench/wal-replay [--records N] [--keys K] [--reps R] [--dir DIR] [--keep]
 *
 * DIR (default: a new directory under $TMPDIR or /tmp) gets a "wal" directory, removed at the
 * end unless --keep.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "bench/progress.h"
#include "server/wal.h"

struct sink {
	uint64_t keys, acc;
};

static int on_record(void *arg, uint64_t lsn, unsigned type, const void *payload, size_t len)
{
	struct sink *s = arg;
	const uint8_t *p = payload;
	(void)lsn, (void)type;
	/* What the daemon would do first: pick the filter id, walk the hashes. */
	uint64_t acc = 0, h[2];
	for (size_t off = 4; off + 16 <= len; off += 16) {
		memcpy(h, p + off, 16);
		acc ^= h[0] + h[1];
		s->keys++;
	}
	s->acc += acc;
	return 0;
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(dir);
}

static struct wal *open_log(uv_loop_t *loop, const char *dir, struct sink *s,
			    struct wal_replay_stats *st)
{
	struct wal_options o = {.loop = loop, .dir = dir, .fsync = WAL_FSYNC_NO};
	struct wal *w;
	char why[256];
	int r = wal_open(&o, &w, why, sizeof(why));
	if (r) {
		fprintf(stderr, "wal_open: %s\n", why);
		exit(1);
	}
	r = wal_replay(w, 0, false, on_record, s, st, why, sizeof(why));
	if (r) {
		fprintf(stderr, "wal_replay: %d %s\n", r, why);
		exit(1);
	}
	return w;
}

static void close_log(uv_loop_t *loop, struct wal *w)
{
	int r = wal_close(w);
	uv_run(loop, UV_RUN_DEFAULT);
	if (r) {
		fprintf(stderr, "wal_close: %s\n", strerror(-r));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	uint64_t records = 1000000;
	unsigned keys = 16, reps = 5;
	const char *base = NULL;
	bool keep = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			keys = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			base = argv[++i];
		else if (!strcmp(argv[i], "--keep"))
			keep = true;
		else {
			fprintf(
			    stderr,
			    "usage: %s [--records N] [--keys K] [--reps R] [--dir DIR] [--keep]\n",
			    argv[0]);
			return 2;
		}
	}
	if (!reps || !keys || keys > 4096)
		return 2;
	char tmpl[4096], dir[4200];
	if (!base) {
		const char *t = getenv("TMPDIR");
		snprintf(tmpl, sizeof(tmpl), "%s/blossomd-wal-bench-XXXXXX", t ? t : "/tmp");
		if (!mkdtemp(tmpl)) {
			perror("mkdtemp");
			return 1;
		}
		base = tmpl;
	}
	snprintf(dir, sizeof(dir), "%s/wal", base);

	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sink s = {0};
	struct wal_replay_stats st;
	struct wal *w = open_log(&loop, dir, &s, &st);
	size_t len = 4 + 16 * (size_t)keys;
	uint8_t *payload = malloc(len);
	uint64_t x = 1;
	uint64_t t0 = uv_hrtime();
	/* Progress on a terminal, in records: written once, then replayed reps times. */
	struct bench_progress progress;
	double work = (double)records * (1 + reps);

	bench_progress_start(&progress);
	for (uint64_t i = 0; i < records; i++) {
		uint32_t id = (uint32_t)(i % 1000);
		memcpy(payload, &id, 4);
		for (unsigned k = 0; k < 2 * keys; k++) {
			uint64_t v = splitmix(&x);
			memcpy(payload + 4 + 8 * k, &v, 8);
		}
		if (wal_append(w, 3, payload, len, NULL) != 0) {
			fprintf(stderr, "wal_append failed\n");
			return 1;
		}
		if (i % 1000 == 999) {
			wal_flush(w);
			uv_run(&loop, UV_RUN_NOWAIT);
			bench_progress(&progress, (double)i, work, "wal-replay: writing the log");
		}
	}
	wal_flush(w);
	close_log(&loop, w);
	double write_s = (double)(uv_hrtime() - t0) / 1e9;
	uint64_t bytes = 0, segs = 0;

	double *secs = calloc(reps, sizeof(double));
	for (unsigned r = 0; r < reps; r++) {
		bench_progress(&progress, (double)records * (1 + r), work,
			       "wal-replay: replay %u of %u", r + 1, reps);
		memset(&s, 0, sizeof(s));
		w = open_log(&loop, dir, &s, &st);
		secs[r] = (double)st.ns / 1e9;
		if (st.records != records || s.keys != records * keys) {
			fprintf(stderr, "replayed %" PRIu64 " records, %" PRIu64 " keys\n",
				st.records, s.keys);
			return 1;
		}
		bytes = st.bytes;
		segs = st.segments_read;
		close_log(&loop, w);
	}
	bench_progress_clear(&progress);
	printf("wrote %" PRIu64 " records of %u keys: %.1f MB in %" PRIu64
	       " segments, %.1f bytes per key, %.2f s (appends, writes, rotations)\n",
	       records, keys, (double)bytes / 1e6, segs, (double)bytes / ((double)records * keys),
	       write_s);
	qsort(secs, reps, sizeof(double), cmp_double);
	double med = secs[reps / 2];
	printf("replay (median of %u, page cache warm): %.3f s = %.2f M records/s, %.1f M keys/s, "
	       "%.0f MB/s (fastest %.3f s, slowest %.3f s)\n",
	       reps, med, (double)records / med / 1e6, (double)records * keys / med / 1e6,
	       (double)bytes / med / 1e6, secs[0], secs[reps - 1]);
	printf("(checksum of the hashes read: %016" PRIx64 ")\n", s.acc);
	free(secs);
	free(payload);
	uv_loop_close(&loop);
	if (!keep) {
		rm_dir(dir);
		if (base == tmpl)
			rmdir(base);
	}
	return 0;
}
