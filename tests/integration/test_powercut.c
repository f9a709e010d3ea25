/* SPDX-License-Identifier: MIT */
/*
 * Power cuts, simulated as ALICE and CrashMonkey do (issue 12). The daemon runs a loaded
 * workload (filters created, keys added, snapshots every second and a SAVE, small log
 * segments so they rotate and are released) with its file system calls recorded by fsrec.so
 * (tests/integration/fsrec.c). From that trace this test builds the disk states a power cut
 * could leave at many points of the run:
 *   durable   only what an fsync/fdatasync had made durable (a file's writes, truncations
 *             and size by an fsync of it; a directory's creates, renames, unlinks and mkdirs
 *             by an fsync of the directory),
 *   all       everything done so far (a process crash: the page cache survives),
 *   half      the durable state plus the first half (in order) of what was not,
 *   torn      "all" with the last write not yet made durable cut in half,
 * starts the daemon (no recording) on each one, and checks that it starts and that every key
 * and every filter whose add or create was acknowledged before the cut is there.
 * POWERCUT_CUTS (default 16) sets how many points of the run are cut; bench/powercut runs
 * more.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/fsrec.h"
#include "tests/integration/itest_check.h"

#define WORKLOAD_CONF CONF("wal_fsync = always\nsnapshot_interval = 1\nwal_segment_bytes = 65536\n")

static char dir[256], trace_path[300];

/* ---- the workload and what it was told ---- */

enum { MAX_FILTERS = 256, MAX_BATCHES = 20000, BATCH = 10 };

struct ack {
	int filter, first; /* keys k<filter>_<first> .. +BATCH-1 */
	off_t at;	   /* trace size when the reply came */
};

static struct ack acks[MAX_BATCHES];
static int nacks;
static off_t created_at[MAX_FILTERS];
static int nfilters, nkeys[MAX_FILTERS];

static off_t trace_size(void)
{
	struct stat st;
	ck_assert_int_eq(stat(trace_path, &st), 0);
	return st.st_size;
}

/* A RESP command from NUL-terminated words. */
static size_t resp_cmd(char *out, size_t cap, const char **w, int n)
{
	size_t len = (size_t)snprintf(out, cap, "*%d\r\n", n);
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, cap - len, "$%zu\r\n%s\r\n", strlen(w[i]), w[i]);
	return len;
}

static void one(int fd, const char **w, int n, const char *want)
{
	char req[4096], buf[4096];
	size_t len = resp_cmd(req, sizeof(req), w, n);
	ck_assert_int_eq(itest_send(fd, req, len), 0);
	ssize_t r = itest_recv_until(fd, buf, sizeof(buf), want, T);
	ck_assert_msg(r > 0 && !strcmp(buf, want), "%s: got '%s'", w[0], r > 0 ? buf : "");
}

/* Read n reply lines. */
static void read_lines(int fd, int n)
{
	char c;
	while (n > 0) {
		ck_assert_int_eq(itest_recv_n(fd, &c, 1, T), 1);
		n -= c == '\n';
	}
}

static void workload(int ms)
{
	int fd = conn();
	int64_t end = itest_now_ms() + ms;
	char names[MAX_FILTERS][16], keys[BATCH][32];
	bool saved = false;

	for (int i = 0; itest_now_ms() < end && nacks < MAX_BATCHES; i++) {
		if ((i % 8 == 0 && nfilters < MAX_FILTERS) || nfilters == 0) {
			snprintf(names[nfilters], sizeof(names[0]), "p%d", nfilters);
			const char *w[] = {"BF.RESERVE", names[nfilters], "0.01", "2000"};
			one(fd, w, 4, "+OK\r\n");
			created_at[nfilters++] = trace_size();
			continue;
		}
		if (!saved && itest_now_ms() > end - ms / 2) {
			const char *w[] = {"SAVE"};
			one(fd, w, 1, "+OK\r\n");
			saved = true;
		}
		int f = rand() % nfilters;
		const char *w[2 + BATCH] = {"BF.MADD", names[f]};
		for (int k = 0; k < BATCH; k++) {
			snprintf(keys[k], sizeof(keys[0]), "k%d_%d", f, nkeys[f] + k);
			w[2 + k] = keys[k];
		}
		char req[4096];
		size_t len = resp_cmd(req, sizeof(req), w, 2 + BATCH);
		ck_assert_int_eq(itest_send(fd, req, len), 0);
		/* The array header and one integer per key (:1, or :0 for a false positive). */
		read_lines(fd, BATCH + 1);
		acks[nacks++] = (struct ack){f, nkeys[f], trace_size()};
		nkeys[f] += BATCH;
	}
	close(fd);
}

/* ---- the trace ---- */

struct op {
	struct fsrec_hdr h;
	const char *path, *path2; /* NUL-terminated copies */
	const uint8_t *data;
	off_t end;  /* trace offset after this record */
	int inode;  /* model inode a data op or sync applies to (-1: none) */
	char *dirp; /* directory a namespace op (or SYNCDIR) is about */
};

static struct op *ops;
static size_t nops;
static uint8_t *trace;

static char *dirname_of(const char *p)
{
	char *dn = strdup(p);
	char *slash = strrchr(dn, '/');
	if (slash)
		*slash = '\0';
	return dn;
}

static char *dup_n(const uint8_t *p, uint32_t n)
{
	char *s = malloc(n + 1);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static void load_trace(void)
{
	int fd = open(trace_path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	off_t size = trace_size();
	trace = malloc((size_t)size + 1);
	ck_assert_int_eq(read(fd, trace, (size_t)size), size);
	close(fd);
	size_t cap = 1024;
	ops = malloc(cap * sizeof(*ops));
	/* Inode numbers as the file system gave them -> model inodes (a create makes a new one;
	 * a number may be reused after an unlink). */
	uint64_t inos[4096];
	int nino = 0, map[4096];
	for (off_t off = 0; off < size;) {
		struct op o = {0};
		ck_assert_int_ge(size - off, (off_t)sizeof(o.h));
		memcpy(&o.h, trace + off, sizeof(o.h));
		ck_assert_uint_eq(o.h.magic, FSREC_MAGIC);
		const uint8_t *p = trace + off + sizeof(o.h);
		o.path = dup_n(p, o.h.plen);
		o.path2 = dup_n(p + o.h.plen, o.h.plen2);
		o.data = p + o.h.plen + o.h.plen2;
		off += (off_t)(sizeof(o.h) + o.h.plen + o.h.plen2 + o.h.dlen);
		o.end = off;
		o.inode = -1;
		int slot = -1;
		for (int i = 0; i < nino; i++)
			if (inos[i] == o.h.ino)
				slot = i;
		switch (o.h.op) {
		case FSREC_CREATE:
			if (slot < 0) {
				ck_assert_int_lt(nino, 4096);
				slot = nino++;
				inos[slot] = o.h.ino;
			}
			map[slot] = (int)nops; /* the model inode is the create's index */
			o.inode = (int)nops;
			o.dirp = dirname_of(o.path);
			break;
		case FSREC_TRUNC:
		case FSREC_WRITE:
		case FSREC_FALLOC:
		case FSREC_SYNC:
			/* A file that existed before the run (none here) has no create: skip. */
			o.inode = slot >= 0 ? map[slot] : -1;
			break;
		case FSREC_SYNCDIR:
			o.dirp = strdup(o.path);
			break;
		case FSREC_RENAME:
		case FSREC_UNLINK:
		case FSREC_MKDIR:
			o.dirp = dirname_of(o.path);
			break;
		default:
			ck_abort_msg("bad op %u", o.h.op);
		}
		if (nops == cap) {
			cap *= 2;
			ops = realloc(ops, cap * sizeof(*ops));
		}
		ops[nops++] = o;
	}
}

static bool is_ns(const struct op *o)
{
	return o->h.op == FSREC_CREATE || o->h.op == FSREC_RENAME || o->h.op == FSREC_UNLINK ||
	       o->h.op == FSREC_MKDIR;
}

static bool is_data(const struct op *o)
{
	return o->h.op == FSREC_TRUNC || o->h.op == FSREC_WRITE || o->h.op == FSREC_FALLOC;
}

/* Was op k made durable by a sync among ops[0..upto)? */
static bool durable(size_t k, size_t upto)
{
	const struct op *o = &ops[k];
	for (size_t s = k + 1; s < upto; s++) {
		const struct op *y = &ops[s];
		if (y->h.cover <= k)
			continue;
		if (is_data(o) && y->h.op == FSREC_SYNC && y->inode == o->inode)
			return true;
		if (is_ns(o) && y->h.op == FSREC_SYNCDIR && !strcmp(y->dirp, o->dirp))
			return true;
	}
	return false;
}

/* ---- a disk state ---- */

struct file {
	uint8_t *b;
	size_t len;
};

struct entry {
	char *path;
	int inode;
};

/* Build the state in which the ops with keep[k] set happened (the last write cut to
 * torn_len bytes if torn_at is it), into dir out. */
static void materialize(const bool *keep, size_t upto, size_t torn_at, size_t torn_len,
			const char *out)
{
	struct file *files = calloc(nops, sizeof(*files));
	struct entry *ents = calloc(nops, sizeof(*ents));
	char **dirs = calloc(nops + 1, sizeof(*dirs));
	size_t nents = 0, ndirs = 0;

	for (size_t k = 0; k < upto; k++) {
		const struct op *o = &ops[k];
		if (!keep[k])
			continue;
		struct file *f = o->inode >= 0 ? &files[o->inode] : NULL;
		uint64_t newlen;
		switch (o->h.op) {
		case FSREC_CREATE:
			for (size_t e = 0; e < nents; e++)
				if (ents[e].path && !strcmp(ents[e].path, o->path))
					ents[e].path = NULL;
			ents[nents++] = (struct entry){(char *)o->path, o->inode};
			break;
		case FSREC_RENAME:
			for (size_t e = 0; e < nents; e++)
				if (ents[e].path && !strcmp(ents[e].path, o->path2))
					ents[e].path = NULL;
			for (size_t e = 0; e < nents; e++)
				if (ents[e].path && !strcmp(ents[e].path, o->path))
					ents[e].path = (char *)o->path2;
			break;
		case FSREC_UNLINK:
			for (size_t e = 0; e < nents; e++)
				if (ents[e].path && !strcmp(ents[e].path, o->path))
					ents[e].path = NULL;
			break;
		case FSREC_MKDIR:
			dirs[ndirs++] = (char *)o->path;
			break;
		case FSREC_TRUNC:
		case FSREC_WRITE:
		case FSREC_FALLOC:
			if (!f)
				break;
			newlen = o->h.op == FSREC_TRUNC ? o->h.len : o->h.off + o->h.len;
			if (o->h.op == FSREC_WRITE && k == torn_at)
				newlen = o->h.off + torn_len;
			if (o->h.op == FSREC_TRUNC || newlen > f->len) {
				f->b = realloc(f->b, newlen ? newlen : 1);
				if (newlen > f->len)
					memset(f->b + f->len, 0, newlen - f->len);
				f->len = newlen;
			}
			if (o->h.op == FSREC_WRITE)
				memcpy(f->b + o->h.off, o->data,
				       k == torn_at ? torn_len : o->h.len);
			break;
		default:
			break;
		}
	}

	/* Write it out under out (the recorded paths are under dir). */
	size_t dl = strlen(dir);
	ck_assert_int_eq(mkdir(out, 0700), 0);
	for (size_t i = 0; i < ndirs; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s%s", out, dirs[i] + dl);
		ck_assert_int_eq(mkdir(p, 0700), 0);
	}
	for (size_t e = 0; e < nents; e++) {
		if (!ents[e].path)
			continue;
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s%s", out, ents[e].path + dl);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 && errno == ENOENT)
			continue; /* its directory's mkdir was lost: so is it */
		ck_assert_int_ge(fd, 0);
		struct file *f = &files[ents[e].inode];
		ck_assert_int_eq(write(fd, f->b ? f->b : (uint8_t *)"", f->len), (ssize_t)f->len);
		close(fd);
	}
	for (size_t i = 0; i < nops; i++)
		free(files[i].b);
	free(files);
	free(ents);
	free(dirs);
}

/* ---- checking a state ---- */

static void rm_rf(const char *p)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	ck_assert_int_eq(system(cmd), 0);
}

/* Start on state dir sdir; every filter and key acknowledged by trace offset cut is there. */
static void check_state(const char *sdir, off_t cut, const char *what)
{
	const char *extra[] = {"--data-dir", sdir, NULL};
	int rc = itest_start(&d, WORKLOAD_CONF, extra);
	if (rc)
		fprintf(stderr, "%s: daemon log:\n%s\n", what, itest_log(&d));
	ck_assert_msg(rc == 0, "%s: blossomd did not start on it", what);
	int fd = conn();
	unsigned long filters = 0, keys = 0, missing = 0;
	for (int f = 0; f < nfilters; f++) {
		if (created_at[f] > cut)
			continue;
		char name[16], req[256], buf[65536];
		snprintf(name, sizeof(name), "p%d", f);
		const char *w[] = {"BF.INFO", name, "Capacity"};
		size_t len = resp_cmd(req, sizeof(req), w, 3);
		ck_assert_int_eq(itest_send(fd, req, len), 0);
		ssize_t r = itest_recv_until(fd, buf, sizeof(buf), "\r\n", T);
		if (r > 0 && !strcmp(buf, "*1\r\n"))
			r = itest_recv_until(fd, buf + r, sizeof(buf) - (size_t)r, "\r\n", T) + r;
		ck_assert_msg(r > 0 && !strcmp(buf, "*1\r\n:2000\r\n"),
			      "%s: filter %s acknowledged at %lld, cut at %lld: %s", what, name,
			      (long long)created_at[f], (long long)cut, r > 0 ? buf : "");
		filters++;
	}
	for (int a = 0; a < nacks; a++) {
		if (acks[a].at > cut)
			continue;
		char name[16], keys_s[BATCH][32], req[4096], buf[4096];
		const char *w[2 + BATCH] = {"BF.MEXISTS", name};
		snprintf(name, sizeof(name), "p%d", acks[a].filter);
		for (int k = 0; k < BATCH; k++) {
			snprintf(keys_s[k], sizeof(keys_s[0]), "k%d_%d", acks[a].filter,
				 acks[a].first + k);
			w[2 + k] = keys_s[k];
		}
		size_t len = resp_cmd(req, sizeof(req), w, 2 + BATCH);
		char want[8 * BATCH + 16];
		size_t wl = (size_t)snprintf(want, sizeof(want), "*%d\r\n", BATCH);
		for (int k = 0; k < BATCH; k++)
			wl += (size_t)snprintf(want + wl, sizeof(want) - wl, ":1\r\n");
		ck_assert_int_eq(itest_send(fd, req, len), 0);
		ssize_t r = itest_recv_n(fd, buf, wl, T);
		ck_assert_int_eq(r, (ssize_t)wl);
		if (memcmp(buf, want, wl))
			missing++;
		keys += BATCH;
	}
	close(fd);
	ck_assert_msg(missing == 0,
		      "%s: %lu of %lu acknowledged batches lost (cut at trace offset %lld)", what,
		      missing, keys / BATCH, (long long)cut);
	stop();
	(void)filters;
}

START_TEST(test_power_cuts)
{
	const char *lib = getenv("FSREC_LIB");
	char wrapper[1024];
	int cuts = getenv("POWERCUT_CUTS") ? atoi(getenv("POWERCUT_CUTS")) : 16;

	snprintf(dir, sizeof(dir), "/tmp/blossomd-powercut-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(trace_path, sizeof(trace_path), "%s.trace", dir);
	unlink(trace_path);
	ck_assert_ptr_nonnull(lib);
	snprintf(wrapper, sizeof(wrapper),
		 "env LD_PRELOAD=%s FSREC_DIR=%s FSREC_OUT=%s "
		 "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0",
		 lib, dir, trace_path);
	setenv("BLOSSOMD_WRAPPER", wrapper, 1);
	const char *extra[] = {"--data-dir", dir, NULL};
	start(WORKLOAD_CONF, extra);
	unsetenv("BLOSSOMD_WRAPPER");
	workload(2500);
	kill(daemon_pid(), SIGKILL);
	ck_assert_int_ge(itest_wait_exit(&d, T), 0);
	itest_stop(&d, T);

	load_trace();
	size_t nsync = 0;
	for (size_t i = 0; i < nops; i++)
		nsync += ops[i].h.op == FSREC_SYNC || ops[i].h.op == FSREC_SYNCDIR;
	printf("# power cuts: %d filters, %d batches of %d keys acknowledged; %zu file system "
	       "calls recorded (%zu syncs)\n",
	       nfilters, nacks, BATCH, nops, nsync);
	ck_assert_uint_gt(nsync, 50);
	ck_assert_int_gt(nacks, 100);

	bool *keep = malloc(nops);
	unsigned states = 0;
	for (int c = 1; c <= cuts; c++) {
		/* Cut right after a sync, spread over the run (the last one: the very end). */
		size_t target = nsync * (size_t)c / (size_t)cuts, seen = 0, upto = nops;
		for (size_t i = 0; i < nops; i++) {
			seen += ops[i].h.op == FSREC_SYNC || ops[i].h.op == FSREC_SYNCDIR;
			if (seen == target) {
				upto = i + 1;
				break;
			}
		}
		off_t cut = ops[upto - 1].end;
		size_t nondur = 0, last_write = SIZE_MAX;
		for (size_t k = 0; k < upto; k++) {
			bool dur = !(is_ns(&ops[k]) || is_data(&ops[k])) || durable(k, upto);
			keep[k] = dur;
			if (!dur) {
				nondur++;
				if (ops[k].h.op == FSREC_WRITE)
					last_write = k;
			}
		}
		static const char *const kinds[] = {"durable", "half", "all", "torn"};
		for (int v = 0; v < 4; v++) {
			size_t taken = 0, torn_at = SIZE_MAX, torn_len = 0;
			if (v == 3 && last_write == SIZE_MAX)
				continue;
			for (size_t k = 0; k < upto; k++) {
				bool dur =
				    !(is_ns(&ops[k]) || is_data(&ops[k])) || durable(k, upto);
				if (dur)
					continue;
				keep[k] = v >= 2 || (v == 1 && taken < nondur / 2);
				taken++;
			}
			if (v == 3) {
				torn_at = last_write;
				torn_len = ops[last_write].h.len / 2;
			}
			char sdir[300], what[128];
			snprintf(sdir, sizeof(sdir), "%s.state", dir);
			snprintf(what, sizeof(what),
				 "cut %d/%d (%s, %zu of %zu calls, %zu not durable)", c, cuts,
				 kinds[v], upto, nops, nondur);
			rm_rf(sdir);
			materialize(keep, upto, torn_at, torn_len, sdir);
			check_state(sdir, cut, what);
			rm_rf(sdir);
			states++;
		}
	}
	printf("# power cuts: %u disk states started on, every acknowledged key and filter "
	       "present\n",
	       states);
	free(keep);
	rm_rf(dir);
	unlink(trace_path);
}
END_TEST

/* ---- a drop's record before its files (process crashes) ---- */

#define DROP_CONF                                                                                  \
	CONF("wal_fsync = always\nsnapshot_interval = 0\nwal_segment_bytes = 4096\n"               \
	     "snapshot_pack_bytes = 0\n")

/* BF.MADD name of keys <prefix>0 .. <prefix>n-1 on fd (its reply read, not checked). */
static void madd(int fd, const char *name, const char *prefix, int n)
{
	static char keys[400][16], req[16384];
	const char *w[2 + 400] = {"BF.MADD", name};

	ck_assert_int_le(n, 400);
	for (int k = 0; k < n; k++) {
		snprintf(keys[k], sizeof(keys[0]), "%s%d", prefix, k);
		w[2 + k] = keys[k];
	}
	size_t len = resp_cmd(req, sizeof(req), w, 2 + n);
	ck_assert_int_eq(itest_send(fd, req, len), 0);
	read_lines(fd, n + 1);
}

/* 1 if filter name exists on fd, else 0. */
static int exists_on(int fd, const char *name)
{
	char req[128], buf[64];
	const char *w[] = {"EXISTS", name};
	size_t len = resp_cmd(req, sizeof(req), w, 2);

	ck_assert_int_eq(itest_send(fd, req, len), 0);
	ck_assert_int_gt(itest_recv_until(fd, buf, sizeof(buf), "\r\n", T), 0);
	ck_assert_msg(!strcmp(buf, ":0\r\n") || !strcmp(buf, ":1\r\n"), "EXISTS: %s", buf);
	return buf[1] == '1';
}

/* Filter name holds keys <prefix>0 .. <prefix>19 (all of them). */
static bool holds(int fd, const char *name, const char *prefix)
{
	char keys[20][16], req[1024], buf[256], want[256] = "*20\r\n";
	const char *w[2 + 20] = {"BF.MEXISTS", name};

	for (int k = 0; k < 20; k++) {
		snprintf(keys[k], sizeof(keys[0]), "%s%d", prefix, k);
		w[2 + k] = keys[k];
		strcat(want, ":1\r\n");
	}
	size_t len = resp_cmd(req, sizeof(req), w, 22);
	ck_assert_int_eq(itest_send(fd, req, len), 0);
	ssize_t r = itest_recv_n(fd, buf, strlen(want), T);
	ck_assert_int_eq(r, (ssize_t)strlen(want));
	return !memcmp(buf, want, strlen(want));
}

/*
 * A process crash at any point of a RENAME over another filter or of a FLUSHALL leaves all of
 * it or none: its one record reaches the log file before a file is removed. Both come right
 * after a record that filled the log's segment (4096 bytes), when the flush that should have
 * written them only started the switch to a new segment: the files went first, and a SIGKILL
 * there lost the RENAME's target or half the FLUSHALL (crashsim, seeds 3003 to 3012). The
 * daemon's file system calls are recorded; each prefix of them from the RENAME on, as a kill
 * leaves it (the page cache kept), is started on.
 */
START_TEST(test_drop_record_before_files)
{
	const char *lib = getenv("FSREC_LIB");
	char wrapper[1024], sdir[300], what[160];

	snprintf(dir, sizeof(dir), "/tmp/blossomd-droprec-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(trace_path, sizeof(trace_path), "%s.trace", dir);
	unlink(trace_path);
	ck_assert_ptr_nonnull(lib);
	snprintf(wrapper, sizeof(wrapper),
		 "env LD_PRELOAD=%s FSREC_DIR=%s FSREC_OUT=%s "
		 "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0",
		 lib, dir, trace_path);
	setenv("BLOSSOMD_WRAPPER", wrapper, 1);
	const char *extra[] = {"--data-dir", dir, NULL};
	start(DROP_CONF, extra);
	unsetenv("BLOSSOMD_WRAPPER");
	int fd = conn();
	static const char *const names[] = {"a", "b", "c", "d"};
	for (int i = 0; i < 4; i++) {
		const char *w[] = {"BF.RESERVE", names[i], "0.01", "1000"};

		one(fd, w, 4, "+OK\r\n");
		madd(fd, names[i], names[i], 20);
	}
	/* A full segment, then a new one: the one holding the creates is released at the
	 * clean stop, which leaves the filters in their files only. */
	madd(fd, "a", "early-a", 300);
	madd(fd, "a", "early2-a", 1);
	/* A clean stop: the filters are in their files only, the log released. */
	close(fd);
	stop();
	setenv("BLOSSOMD_WRAPPER", wrapper, 1);
	start(DROP_CONF, extra);
	unsetenv("BLOSSOMD_WRAPPER");
	fd = conn();
	/* 300 keys: a record of over 4096 bytes, so the segment is full after it. */
	madd(fd, "a", "fill-a", 300);
	off_t from = trace_size();
	const char *rename[] = {"RENAME", "a", "b"};
	one(fd, rename, 3, "+OK\r\n");
	madd(fd, "c", "fill-c", 300);
	const char *flushall[] = {"FLUSHALL"};
	one(fd, flushall, 1, "+OK\r\n");
	close(fd);
	kill(daemon_pid(), SIGKILL);
	ck_assert_int_ge(itest_wait_exit(&d, T), 0);
	itest_stop(&d, T);

	load_trace();
	bool *keep = malloc(nops);
	unsigned states = 0;
	snprintf(sdir, sizeof(sdir), "%s.state", dir);
	for (size_t upto = 1; upto <= nops; upto++) {
		if (ops[upto - 1].end <= from)
			continue;
		for (size_t k = 0; k < upto; k++)
			keep[k] = true;
		rm_rf(sdir);
		materialize(keep, upto, SIZE_MAX, 0, sdir);
		const char *x[] = {"--data-dir", sdir, NULL};
		start(DROP_CONF, x);
		fd = conn();
		int a = exists_on(fd, "a"), b = exists_on(fd, "b"), c = exists_on(fd, "c"),
		    dd = exists_on(fd, "d");
		snprintf(what, sizeof(what), "killed after %zu of %zu calls: a %d b %d c %d d %d",
			 upto, nops, a, b, c, dd);
		/* The FLUSHALL: all of b, c and d there, or none (and not a either). */
		if (a + b + c + dd) {
			ck_assert_msg(c && dd, "%s: half a FLUSHALL", what);
			/* The RENAME: a under its name and b as it was, or b holding a's keys. */
			ck_assert_msg(b, "%s: the RENAME's target lost", what);
			ck_assert_msg(a ? holds(fd, "b", "b") : holds(fd, "b", "a"),
				      "%s: b is not %s", what, a ? "the old b" : "the renamed a");
			ck_assert_msg(holds(fd, "c", "c") && holds(fd, "d", "d"), "%s: c or d lost",
				      what);
		}
		close(fd);
		stop();
		states++;
	}
	printf("# a drop's record before its files: %u states killed after a call, from the "
	       "RENAME on, all or none of each\n",
	       states);
	ck_assert_uint_gt(states, 4);
	free(keep);
	rm_rf(sdir);
	rm_rf(dir);
	unlink(trace_path);
}
END_TEST

static struct check_skip skips[2];
static size_t nskips;

int main(void)
{
	Suite *s = suite_create("powercut");
	TCase *tc = tcase_create("powercut");
	TCase *tc2 = tcase_create("drop_record");
	const char *w = getenv("BLOSSOMD_WRAPPER");

	srand(4242);
	tcase_set_timeout(tc, 300);
	tcase_set_timeout(tc2, 300);
	/* The recorded run and the starts go without the wrapper, so under valgrind this would
	 * only repeat the plain build's run. */
	if (w && strstr(w, "valgrind")) {
		skips[nskips++] = (struct check_skip){"test_power_cuts", "runs without valgrind"};
		skips[nskips++] =
		    (struct check_skip){"test_drop_record_before_files", "runs without valgrind"};
	} else {
		tcase_add_test(tc, test_power_cuts);
		tcase_add_test(tc2, test_drop_record_before_files);
	}
	suite_add_tcase(s, tc);
	suite_add_tcase(s, tc2);
	return check_run_with_skips(s, skips, nskips);
}
