/* SPDX-License-Identifier: MIT */
/* Snapshot files: names never become paths, round trips are exact, corruption is detected. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf_snapshot.h"
#include "tests/check_main.h"

static char dir[64];
static int dirfd_;

static void setup(void)
{
	strcpy(dir, "/tmp/blossomd-snap-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dirfd_, 0);
}

static void teardown(void)
{
	DIR *d = fdopendir(dirfd_);
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && unlinkat(dirfd(d), e->d_name, 0) != 0)
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	closedir(d);
	rmdir(dir);
}

static struct bf_filter *make(const char *name, struct bf_params p, uint64_t nkeys)
{
	struct bf_filter *f;
	ck_assert_int_eq(bf_filter_new(&p, 0x1234abcd, NULL, &f), 0);
	ck_assert_int_eq(bf_filter_set_name(f, name, strlen(name)), 0);
	char k[32];
	for (uint64_t i = 0; i < nkeys; i++) {
		int n = snprintf(k, sizeof(k), "key%llu", (unsigned long long)i);
		if (bf_filter_add(f, k, (size_t)n) < 0)
			break;
	}
	bf_filter_check(f, "x", 1);
	return f;
}

static void assert_same(const struct bf_filter *a, const struct bf_filter *b)
{
	ck_assert_uint_eq(a->name_len, b->name_len);
	ck_assert_mem_eq(a->name, b->name, a->name_len);
	ck_assert_uint_eq(a->params.capacity, b->params.capacity);
	ck_assert_double_eq(a->params.error_rate, b->params.error_rate);
	ck_assert_int_eq(a->params.type, b->params.type);
	ck_assert_uint_eq(a->params.expansion, b->params.expansion);
	ck_assert_int_eq(a->params.persist, b->params.persist);
	ck_assert_uint_eq(a->seed, b->seed);
	ck_assert_uint_eq(a->items, b->items);
	ck_assert_uint_eq(a->bytes, b->bytes);
	ck_assert_mem_eq(&a->stats, &b->stats, sizeof(a->stats));
	ck_assert_uint_eq(a->nlayers, b->nlayers);
	for (unsigned i = 0; i < a->nlayers; i++) {
		ck_assert_uint_eq(a->layers[i].items, b->layers[i].items);
		ck_assert_uint_eq(a->layers[i].nblocks, b->layers[i].nblocks);
		ck_assert_mem_eq(a->layers[i].blocks, b->layers[i].blocks,
				 bf_layer_bytes(&a->layers[i]));
	}
}

START_TEST(filenames)
{
	char out[BF_SNAPSHOT_NAME_MAX];
	bf_snapshot_filename("foo", 3, out);
	ck_assert_str_eq(out, "foo.bsnap");
	bf_snapshot_filename("../x", 4, out);
	ck_assert_str_eq(out, "%2E%2E%2Fx.bsnap");
	bf_snapshot_filename(".", 1, out);
	ck_assert_str_eq(out, "%2E.bsnap");
	bf_snapshot_filename("caf\xc3\xa9 :", 7, out);
	ck_assert_str_eq(out, "caf%C3%A9%20%3A.bsnap");

	/* 200 bytes that all need encoding: a prefix and a hash, within NAME_MAX with ".tmp". */
	char a[200], b[200], oa[BF_SNAPSHOT_NAME_MAX], ob[BF_SNAPSHOT_NAME_MAX];
	memset(a, '/', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[199] = '.';
	bf_snapshot_filename(a, sizeof(a), oa);
	bf_snapshot_filename(b, sizeof(b), ob);
	ck_assert_uint_le(strlen(oa) + strlen(BF_SNAPSHOT_TMP_SUFFIX), 255);
	ck_assert_ptr_nonnull(strchr(oa, '~'));
	ck_assert_ptr_null(strchr(oa, '/'));
	ck_assert_str_ne(oa, ob);
	bf_snapshot_filename(a, sizeof(a), ob);
	ck_assert_str_eq(oa, ob);
}
END_TEST

START_TEST(round_trip_every_kind)
{
	struct {
		const char *name;
		struct bf_params p;
		uint64_t keys;
	} cases[] = {
	    {"scalable", {1000, 0.01, BF_TYPE_BLOOM, 2, true}, 5000},
	    {"counting", {1000, 0.001, BF_TYPE_COUNTING, 3, true}, 3000},
	    {"fixed", {500, 0.1, BF_TYPE_BLOOM, 0, true}, 800},
	    {"empty", {10, 0.5, BF_TYPE_BLOOM, 2, false}, 0},
	    {"../../weird?name", {100, 0.0001, BF_TYPE_BLOOM, 1, true}, 150},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bf_filter *f = make(cases[i].name, cases[i].p, cases[i].keys), *g;
		char file[BF_SNAPSHOT_NAME_MAX], why[128] = "";
		bf_snapshot_filename(f->name, f->name_len, file);
		const char *step = NULL;
		ck_assert_int_eq(bf_snapshot_write(f, 7 + i, dirfd_, file, &step), 0);
		uint64_t gen = 0;
		ck_assert_msg(bf_snapshot_read(dirfd_, file, &g, &gen, why, sizeof(why)) == 0, "%s",
			      why);
		ck_assert_uint_eq(gen, 7 + i);
		assert_same(f, g);
		ck_assert_ptr_null(g->budget);
		/* The copy answers exactly as the original. */
		char k[32];
		for (uint64_t j = 0; j < cases[i].keys + 1000; j++) {
			int n = snprintf(k, sizeof(k), "key%llu", (unsigned long long)j);
			if (bf_filter_check(f, k, (size_t)n) != bf_filter_check(g, k, (size_t)n))
				ck_abort_msg("%s: answers differ at %s", cases[i].name, k);
		}
		bf_filter_free(f);
		bf_filter_free(g);
	}
}
END_TEST

/* Write a snapshot of a small filter, return its size. */
static off_t write_sample(const char *file)
{
	struct bf_params p = {2000, 0.01, BF_TYPE_BLOOM, 2, true};
	struct bf_filter *f = make("sample", p, 3000);
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, file, NULL), 0);
	off_t size = (off_t)(BF_SNAPSHOT_HEADER_LEN + f->bytes);
	bf_filter_free(f);
	struct stat sb;
	ck_assert_int_eq(fstatat(dirfd_, file, &sb, 0), 0);
	ck_assert_int_eq(sb.st_size, size);
	return size;
}

static void patch(const char *file, off_t off, const void *bytes, size_t n)
{
	int fd = openat(dirfd_, file, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void flip(const char *file, off_t off)
{
	unsigned char c;
	int fd = openat(dirfd_, file, O_RDWR);
	ck_assert_int_eq(pread(fd, &c, 1, off), 1);
	c ^= 0x20;
	ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

static int load(const char *file, char *why, size_t len)
{
	struct bf_filter *f = NULL;
	uint64_t gen;
	int rc = bf_snapshot_read(dirfd_, file, &f, &gen, why, len);
	if (rc == 0)
		bf_filter_free(f);
	return rc;
}

START_TEST(header_corruption_detected)
{
	char why[128];
	/* The version field (8..11) is read before the checksum, whose place a future version may
	 * move: a flipped version byte reads as an unknown version. Both are refused. */
	write_sample("s.bsnap");
	flip("s.bsnap", 9);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -ENOTSUP);

	static const off_t offsets[] = {0, 7, 13, 20, 30, 40, 60, 75, 85, 100, 170, 370, 420, 1650};

	/* The padding after the header checksum is checked too. */
	write_sample("s.bsnap");
	flip("s.bsnap", 3000);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "header padding not zero at byte 3000");
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		write_sample("s.bsnap");
		flip("s.bsnap", offsets[i]);
		int rc = load("s.bsnap", why, sizeof(why));
		ck_assert_msg(rc == -EINVAL, "offset %lld: rc %d", (long long)offsets[i], rc);
		if (offsets[i] >= 8)
			ck_assert_msg(strcmp(why, "header checksum mismatch") == 0,
				      "offset %lld: %s", (long long)offsets[i], why);
		else
			ck_assert_str_eq(why, "bad magic");
	}
}
END_TEST

START_TEST(body_corruption_detected)
{
	char why[128];
	off_t size = write_sample("s.bsnap");
	for (off_t off = BF_SNAPSHOT_HEADER_LEN; off < size;
	     off += (size - BF_SNAPSHOT_HEADER_LEN) / 7) {
		write_sample("s.bsnap");
		flip("s.bsnap", off);
		ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
		ck_assert_str_eq(why, "body checksum mismatch");
	}
	write_sample("s.bsnap");
	flip("s.bsnap", size - 1);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
}
END_TEST

START_TEST(truncation_detected_at_every_region)
{
	char why[128];
	off_t size = write_sample("s.bsnap");
	for (off_t len = 0; len < size; len += len < 8192 ? 509 : 4093) {
		write_sample("s.bsnap");
		int fd = openat(dirfd_, "s.bsnap", O_RDWR);
		ck_assert_int_eq(ftruncate(fd, len), 0);
		close(fd);
		ck_assert_msg(load("s.bsnap", why, sizeof(why)) == -EINVAL, "length %lld",
			      (long long)len);
		ck_assert_msg(strncmp(why, "truncated", 9) == 0, "length %lld: %s", (long long)len,
			      why);
	}
	/* Appended garbage is as wrong as missing bytes. */
	write_sample("s.bsnap");
	patch("s.bsnap", size, "x", 1);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "too long", 8) == 0, "%s", why);
}
END_TEST

START_TEST(future_version_refused)
{
	char why[128];
	write_sample("s.bsnap");
	int fd = openat(dirfd_, "s.bsnap", O_RDWR);
	unsigned char h[BF_SNAPSHOT_HEADER_LEN];
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	uint32_t v = 3;
	memcpy(h + 8, &v, 4);
	uint64_t sum = XXH3_64bits(h, 1664);
	memcpy(h + 1664, &sum, 8);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -ENOTSUP);
	ck_assert_str_eq(why, "unknown format version 3 (this build reads 1 to 2)");
}
END_TEST

/* A version 1 file (written before the log: no id, no LSN, its checksum at 1648) still loads,
 * as id 0 and LSN 0; version 2 keeps both. */
START_TEST(version_1_still_read)
{
	char why[128];
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true};
	struct bf_filter *f = make("s", p, 50), *g;
	uint64_t gen;

	f->id = 42;
	f->lsn = 1234;
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, "s.bsnap", NULL), 0);
	ck_assert_int_eq(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)), 0);
	ck_assert_uint_eq(g->id, 42);
	ck_assert_uint_eq(g->lsn, 1234);
	bf_filter_free(g);

	int fd = openat(dirfd_, "s.bsnap", O_RDWR);
	unsigned char h[BF_SNAPSHOT_HEADER_LEN];
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	uint32_t v = 1;
	memcpy(h + 8, &v, 4);
	memset(h + 1648, 0, 24);
	uint64_t sum = XXH3_64bits(h, 1648);
	memcpy(h + 1648, &sum, 8);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_msg(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_uint_eq(g->id, 0);
	ck_assert_uint_eq(g->lsn, 0);
	assert_same(f, g);
	bf_filter_free(f);
	bf_filter_free(g);
}
END_TEST

START_TEST(valid_checksum_but_wrong_geometry_refused)
{
	/* A header that checks out but claims a layer the model would not build. */
	char why[128];
	write_sample("s.bsnap");
	int fd = openat(dirfd_, "s.bsnap", O_RDWR);
	unsigned char h[BF_SNAPSHOT_HEADER_LEN];
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	uint64_t nblocks;
	memcpy(&nblocks, h + 368, 8);
	nblocks += 1;
	memcpy(h + 368, &nblocks, 8);
	uint64_t sum = XXH3_64bits(h, 1664);
	memcpy(h + 1664, &sum, 8);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "layer 0 has the wrong geometry");
}
END_TEST

START_TEST(missing_file)
{
	char why[128];
	ck_assert_int_eq(load("nope.bsnap", why, sizeof(why)), -ENOENT);
	ck_assert_str_eq(why, "cannot open: No such file or directory");
}
END_TEST

START_TEST(failed_write_keeps_old_and_removes_temp)
{
	/* A directory where the snapshot should go makes the rename fail. */
	ck_assert_int_eq(mkdirat(dirfd_, "s.bsnap", 0700), 0);
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true};
	struct bf_filter *f = make("s", p, 10);
	const char *step = NULL;
	int rc = bf_snapshot_write(f, 1, dirfd_, "s.bsnap", &step);
	ck_assert_int_lt(rc, 0);
	ck_assert_str_eq(step, "rename");
	struct stat sb;
	ck_assert_int_eq(fstatat(dirfd_, "s.bsnap.tmp", &sb, 0), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(fstatat(dirfd_, "s.bsnap", &sb, 0), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	ck_assert_int_eq(unlinkat(dirfd_, "s.bsnap", AT_REMOVEDIR), 0);

	/* A temp file left by a crash does not block the next snapshot. */
	patch("s.bsnap.tmp", 0, "junk", 4);
	ck_assert_int_eq(bf_snapshot_write(f, 2, dirfd_, "s.bsnap", &step), 0);
	ck_assert_int_eq(fstatat(dirfd_, "s.bsnap.tmp", &sb, 0), -1);
	char why[128];
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), 0);
	bf_filter_free(f);
}
END_TEST

START_TEST(clone_is_exact_and_independent)
{
	struct bf_params p = {1000, 0.01, BF_TYPE_COUNTING, 2, true};
	struct bf_filter *f = make("c", p, 2500), *g;
	ck_assert_int_eq(bf_filter_clone(f, &g), 0);
	assert_same(f, g);
	ck_assert_int_eq(bf_filter_add(f, "new", 3), 1);
	ck_assert_int_eq(bf_filter_check(g, "new", 3), 0);
	bf_filter_free(f);
	bf_filter_free(g);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, filenames);
	tcase_add_test(tc, round_trip_every_kind);
	tcase_add_test(tc, header_corruption_detected);
	tcase_add_test(tc, body_corruption_detected);
	tcase_add_test(tc, truncation_detected_at_every_region);
	tcase_add_test(tc, future_version_refused);
	tcase_add_test(tc, version_1_still_read);
	tcase_add_test(tc, valid_checksum_but_wrong_geometry_refused);
	tcase_add_test(tc, missing_file);
	tcase_add_test(tc, failed_write_keeps_old_and_removes_temp);
	tcase_add_test(tc, clone_is_exact_and_independent);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(snapshot_suite)
