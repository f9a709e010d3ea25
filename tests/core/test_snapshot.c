/* SPDX-License-Identifier: MIT */
/* Snapshot files: names never become paths, round trips are exact, corruption is detected. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf_snapshot.h"
#include "tests/check_main.h"

/* Its place in its registry's expiry heap (0: none). */
#define EXPIRE_POS(f) ((f)->rare ? (f)->rare->expire_pos : 0u)

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
	ck_assert_mem_eq(bf_filter_name(a), bf_filter_name(b), a->name_len);
	ck_assert_uint_eq(a->params->capacity, b->params->capacity);
	ck_assert_double_eq(a->params->error_rate, b->params->error_rate);
	ck_assert_int_eq(a->params->type, b->params->type);
	ck_assert_uint_eq(a->params->expansion, b->params->expansion);
	ck_assert_int_eq(a->params->persist, b->params->persist);
	ck_assert_double_eq(a->params->ratio, b->params->ratio);
	ck_assert_uint_eq(bf_filter_expire_ms(a), bf_filter_expire_ms(b));
	ck_assert_uint_eq(a->seed, b->seed);
	ck_assert_uint_eq(bf_filter_items(a), bf_filter_items(b));
	ck_assert_uint_eq(bf_filter_bytes(a), bf_filter_bytes(b));
	for (int i = 0; i < BF_STAT_N; i++)
		ck_assert_uint_eq(bf_filter_stat(a, i), bf_filter_stat(b, i));
	ck_assert_uint_eq(bf_filter_delete_hits(a), bf_filter_delete_hits(b));
	ck_assert_uint_eq(bf_filter_delete_misses(a), bf_filter_delete_misses(b));
	ck_assert_uint_eq(a->nlayers, b->nlayers);
	for (unsigned i = 0; i < a->nlayers; i++) {
		ck_assert_uint_eq(bf_filter_layers(a)[i].items, bf_filter_layers(b)[i].items);
		ck_assert_uint_eq(bf_filter_layers(a)[i].nblocks, bf_filter_layers(b)[i].nblocks);
		ck_assert_mem_eq(bf_filter_layers(a)[i].blocks, bf_filter_layers(b)[i].blocks,
				 bf_layer_bytes(&bf_filter_layers(a)[i]));
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

	/* Back from a file name to the filter's: only a name spelled out in full. */
	char name[BF_NAME_MAX];
	size_t len = 0;
	ck_assert_int_eq(bf_snapshot_filename_name("caf%C3%A9%3A.bsnap", name, &len), 0);
	ck_assert_uint_eq(len, 6);
	ck_assert_mem_eq(name, "caf\xc3\xa9:", 6);
	ck_assert_int_eq(bf_snapshot_filename_name("foo.bsnap", name, &len), 0);
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(bf_snapshot_filename_name(oa, name, &len), -EINVAL); /* cut, hashed */
	ck_assert_int_eq(bf_snapshot_filename_name("foo.bpack", name, &len), -EINVAL);
	ck_assert_int_eq(bf_snapshot_filename_name(".bsnap", name, &len), -EINVAL);
	ck_assert_int_eq(bf_snapshot_filename_name("%2e.bsnap", name, &len), -EINVAL);
	ck_assert_int_eq(bf_snapshot_filename_name("a%2.bsnap", name, &len), -EINVAL);
	ck_assert_int_eq(bf_snapshot_filename_name("a.b.bsnap", name, &len), -EINVAL);
	ck_assert_int_eq(bf_snapshot_filename_name("%20.bsnap", name, &len), -EINVAL);
}
END_TEST

START_TEST(round_trip_every_kind)
{
	struct {
		const char *name;
		struct bf_params p;
		uint64_t keys;
	} cases[] = {
	    {"scalable", {1000, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0}, 5000},
	    {"counting", {1000, 0.001, BF_TYPE_COUNTING, 3, true, 0, 0}, 3000},
	    {"fixed", {500, 0.1, BF_TYPE_BLOOM, 0, true, 0, 0}, 800},
	    {"empty", {10, 0.5, BF_TYPE_BLOOM, 2, false, 0, 0}, 0},
	    {"../../weird?name", {100, 0.0001, BF_TYPE_BLOOM, 1, true, 0, 0}, 150},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bf_filter *f = make(cases[i].name, cases[i].p, cases[i].keys), *g;
		char file[BF_SNAPSHOT_NAME_MAX], why[128] = "";
		if (cases[i].p.type == BF_TYPE_COUNTING) {
			/* Deletes are counted apart (the filter's rare part); the file keeps them.
			 */
			(void)bf_filter_delete(f, "key0", 4);
			(void)bf_filter_delete(f, "absent", 6);
			ck_assert_uint_eq(bf_filter_deletes(f), 2);
		}
		bf_snapshot_filename(bf_filter_name(f), f->name_len, file);
		const char *step = NULL;
		ck_assert_int_eq(bf_snapshot_write(f, 7 + i, dirfd_, file, &step), 0);
		uint64_t gen = 0;
		ck_assert_msg(bf_snapshot_read(dirfd_, file, &g, &gen, why, sizeof(why)) == 0, "%s",
			      why);
		ck_assert_uint_eq(gen, 7 + i);
		assert_same(f, g);
		ck_assert_ptr_null(bf_filter_budget(g));
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
	struct bf_params p = {2000, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
	struct bf_filter *f = make("sample", p, 3000);
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, file, NULL), 0);
	off_t size = (off_t)(BF_SNAPSHOT_HEADER_LEN + bf_filter_bytes(f));
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
	uint32_t v = 5;
	memcpy(h + 8, &v, 4);
	uint64_t sum = XXH3_64bits(h, 1688);
	memcpy(h + 1688, &sum, 8);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -ENOTSUP);
	ck_assert_str_eq(why, "unknown format version 5 (this build reads 1 to 4)");
}
END_TEST

/*
 * Rewrite file's 4 KiB header as an older format version writes it: the version field, the
 * fields that version lacks (from sum_off, where its checksum goes, to the end of today's)
 * zeroed, and its checksum, of the bytes before it.
 */
static void rewrite_as_version(const char *file, uint32_t version, size_t sum_off)
{
	unsigned char h[BF_SNAPSHOT_HEADER_LEN];
	int fd = openat(dirfd_, file, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	memcpy(h + 8, &version, 4);
	memset(h + sum_off, 0, 1696 - sum_off);
	uint64_t sum = XXH3_64bits(h, sum_off);
	memcpy(h + sum_off, &sum, 8);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
}

/* A version 1 file (written before the log: no id, no LSN, its checksum at 1648) still loads,
 * as id 0 and LSN 0; version 2 keeps both. */
START_TEST(version_1_still_read)
{
	char why[128];
	/* Files before version 3 halve the error per layer from p/2: ratio 0.5, first 0.5. */
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0.5, 0.5};
	struct bf_filter *f = make("s", p, 50), *g;
	uint64_t gen;

	f->id = 42;
	f->lsn = 1234;
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, "s.bsnap", NULL), 0);
	ck_assert_int_eq(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)), 0);
	ck_assert_uint_eq(g->id, 42);
	ck_assert_uint_eq(g->lsn, 1234);
	bf_filter_free(g);

	rewrite_as_version("s.bsnap", 1, 1648);
	ck_assert_msg(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_uint_eq(g->id, 0);
	ck_assert_uint_eq(g->lsn, 0);
	assert_same(f, g);
	bf_filter_free(f);
	bf_filter_free(g);
}
END_TEST

/*
 * Issue 14: a chain of more than 32 layers (RedisBloom grows without bound). Its header's layer
 * table goes on past 4 KiB (8 KiB for 100 layers), and the file, a pack entry and a dump's
 * header chunk all round-trip; a layer entry past 4 KiB that is changed, or the padding after
 * the last one, is refused.
 */
START_TEST(long_chain_round_trips)
{
	struct bf_params p = {1, 0.01, BF_TYPE_BLOOM, 1, true, 0, 0};
	struct bf_filter *f = make("long", p, 100), *g;
	char why[128];
	uint64_t gen;

	ck_assert_uint_eq(f->nlayers, 100);
	ck_assert_int_eq(bf_filter_set_expiry(f, 1234), 0);
	ck_assert_uint_eq(bf_snapshot_header_len(f), 2 * BF_SNAPSHOT_HEADER_LEN);
	ck_assert_int_eq(bf_snapshot_write(f, 7, dirfd_, "s.bsnap", NULL), 0);
	ck_assert_msg(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_uint_eq(gen, 7);
	assert_same(f, g);
	bf_filter_free(g);

	size_t elen = bf_snapshot_entry_size(f);
	unsigned char *e = malloc(elen);
	ck_assert_ptr_nonnull(e);
	bf_snapshot_entry_encode(f, 9, e);
	ck_assert_msg(bf_snapshot_entry_decode(e, elen, UINT64_MAX, &g, &gen, why, sizeof(why)) ==
			  0,
		      "%s", why);
	assert_same(f, g);
	bf_filter_free(g);
	free(e);

	size_t hlen = bf_snapshot_header_len(f);
	unsigned char *h = malloc(hlen);
	struct bf_snapshot_info info;
	ck_assert_ptr_nonnull(h);
	bf_snapshot_header(f, 0, 0, h);
	ck_assert_int_eq(bf_snapshot_decode(h, hlen, UINT64_MAX, &g, &info, why, sizeof(why)), 0);
	ck_assert_uint_eq(g->nlayers, 100);
	bf_filter_free(g);
	/* A header cut at 4 KiB, a byte of layer 40's entry, the padding after layer 99. */
	ck_assert_int_eq(
	    bf_snapshot_decode(h, BF_SNAPSHOT_HEADER_LEN, UINT64_MAX, &g, &info, why, sizeof(why)),
	    -EINVAL);
	h[BF_SNAPSHOT_HEADER_LEN + 8 * 40 + 8] ^= 1;
	ck_assert_int_eq(bf_snapshot_decode(h, hlen, UINT64_MAX, &g, &info, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "header checksum mismatch");
	h[BF_SNAPSHOT_HEADER_LEN + 8 * 40 + 8] ^= 1;
	h[hlen - 1] = 1;
	ck_assert_int_eq(bf_snapshot_decode(h, hlen, UINT64_MAX, &g, &info, why, sizeof(why)),
			 -EINVAL);
	free(h);
	bf_filter_free(f);
}
END_TEST

/* Version 3 keeps the expiry; a version 2 file (its checksum at 1664, no expiry) still loads,
 * as never expiring. */
START_TEST(version_2_still_read)
{
	char why[128];
	/* Files before version 3 halve the error per layer from p/2: ratio 0.5, first 0.5. */
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0.5, 0.5};
	struct bf_filter *f = make("s", p, 50), *g;
	uint64_t gen;

	f->id = 42;
	f->lsn = 1234;
	ck_assert_int_eq(bf_filter_set_expiry(f, 1796292690123ULL), 0);
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, "s.bsnap", NULL), 0);
	ck_assert_int_eq(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)), 0);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 1796292690123ULL);
	ck_assert_uint_eq(EXPIRE_POS(g), 0);
	bf_filter_free(g);

	rewrite_as_version("s.bsnap", 2, 1664);
	ck_assert_msg(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_uint_eq(g->id, 42);
	ck_assert_uint_eq(g->lsn, 1234);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 0);
	ck_assert_int_eq(bf_filter_set_expiry(f, 0), 0);
	assert_same(f, g);
	bf_filter_free(f);
	bf_filter_free(g);
}
END_TEST

/*
 * Version 4 keeps the first layer's share of the error rate; a version 3 file (its checksum at
 * 1680) still loads with the share it was written with, a half. A version 3 header whose layers
 * were not built with a half is refused: the share is what the file says, not today's rule.
 */
START_TEST(version_3_still_read)
{
	char why[128];
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0.7, 0.5};
	struct bf_filter *f = make("s", p, 250), *g;
	uint64_t gen;

	ck_assert_uint_eq(f->nlayers, 2);
	f->id = 42;
	ck_assert_int_eq(bf_filter_set_expiry(f, 1796292690123ULL), 0);
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, "s.bsnap", NULL), 0);

	rewrite_as_version("s.bsnap", 3, 1680);
	ck_assert_msg(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_double_eq(g->params->first, 0.5);
	ck_assert_double_eq(g->params->ratio, 0.7);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 1796292690123ULL);
	assert_same(f, g);
	bf_filter_free(f);
	bf_filter_free(g);

	/* Today's share (a fifth) in a version 3 header: its layer 0 is not a half's. */
	p.first = 0;
	f = make("s", p, 50);
	ck_assert_double_eq(f->params->first, BF_FIRST_SHARE);
	ck_assert_int_eq(bf_snapshot_write(f, 1, dirfd_, "s.bsnap", NULL), 0);
	rewrite_as_version("s.bsnap", 3, 1680);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "layer 0 does not match the parameters");
	bf_filter_free(f);
}
END_TEST

/* Set the header's u64 at off to v, and its checksum to match. */
static void header_put(unsigned char h[BF_SNAPSHOT_HEADER_LEN], size_t off, uint64_t v)
{
	memcpy(h + off, &v, 8);
	uint64_t sum = XXH3_64bits(h, 1688);
	memcpy(h + 1688, &sum, 8);
}

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
	header_put(h, 368, nblocks + 1);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "layer 0 has the wrong geometry");
}
END_TEST

START_TEST(id_past_the_largest_refused)
{
	/* A header that checks out but names an id no filter can have (BF_ID_MAX + 1). */
	char why[128];
	write_sample("s.bsnap");
	int fd = openat(dirfd_, "s.bsnap", O_RDWR);
	unsigned char h[BF_SNAPSHOT_HEADER_LEN];
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	header_put(h, 1648, BF_ID_MAX + 1);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(load("s.bsnap", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "filter id 281474976710656 out of range");
	/* The largest one loads. */
	header_put(h, 1648, BF_ID_MAX);
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	struct bf_filter *g = NULL;
	uint64_t gen;
	ck_assert_int_eq(bf_snapshot_read(dirfd_, "s.bsnap", &g, &gen, why, sizeof(why)), 0);
	ck_assert_uint_eq(g->id, BF_ID_MAX);
	bf_filter_free(g);
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
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};
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
	struct bf_params p = {1000, 0.01, BF_TYPE_COUNTING, 2, true, 0, 0};
	struct bf_filter *f = make("c", p, 2500), *g;
	ck_assert_int_eq(bf_filter_clone(f, &g), 0);
	assert_same(f, g);
	ck_assert_int_eq(bf_filter_add(f, "new", 3), 1);
	ck_assert_int_eq(bf_filter_check(g, "new", 3), 0);
	bf_filter_free(f);
	bf_filter_free(g);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Packed entries and pack files: round trips are exact, a bad entry costs only that entry, a
 * bad header or index costs the file, and a checksum never vouches for inconsistent fields. */

/* Offsets from the layouts in core/bf_snapshot.h. */
enum {
	E_LEN = 0,
	E_TYPE = 4,
	E_EXPANSION = 8,
	E_PERSIST = 12,
	E_NLAYERS = 16,
	E_NAME_LEN = 20,
	E_CAPACITY = 24,
	E_ERROR = 32,
	E_SEED = 40,
	E_ITEMS = 48,
	E_GENERATION = 56,
	E_ID = 64,
	E_LSN = 72,
	E_BODY_LEN = 80,
	E_STATS = 88,
	E_EXPIRE = 160,
	E_RATIO = 168,
	E_FIRST = 176,
	E_NAME = 184,
	E_LAYER = 40,
	P_VERSION = 8,
	P_COUNT = 12,
	P_LEN = 16,
	P_SUM = 24,
	P_INDEX = 32,
	P_INDEX_ENTRY = 16,
};

static uint32_t rd32(const unsigned char *p, size_t off)
{
	uint32_t v;
	memcpy(&v, p + off, 4);
	return v;
}

static uint64_t rd64(const unsigned char *p, size_t off)
{
	uint64_t v;
	memcpy(&v, p + off, 8);
	return v;
}

static void wr32(unsigned char *p, size_t off, uint32_t v)
{
	memcpy(p + off, &v, 4);
}

static void wr64(unsigned char *p, size_t off, uint64_t v)
{
	memcpy(p + off, &v, 8);
}

static double rdf64(const unsigned char *p, size_t off)
{
	double v;
	memcpy(&v, p + off, 8);
	return v;
}

static void wrf64(unsigned char *p, size_t off, double v)
{
	memcpy(p + off, &v, 8);
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Where an entry's layer table and body start. */
static size_t entry_layers(const unsigned char *e)
{
	return E_NAME + pad8(rd32(e, E_NAME_LEN));
}

static size_t entry_body(const unsigned char *e)
{
	return entry_layers(e) + (size_t)rd32(e, E_NLAYERS) * E_LAYER;
}

/* Make an edited entry's checksum right again. */
static void reseal_entry(unsigned char *e, size_t len)
{
	wr64(e, len - 8, XXH3_64bits(e, len - 8));
}

/* Make an edited pack header or index's checksum right again. */
static void reseal_pack(unsigned char *pk)
{
	size_t hlen = P_INDEX + (size_t)rd32(pk, P_COUNT) * P_INDEX_ENTRY;
	wr64(pk, P_SUM, 0);
	wr64(pk, P_SUM, XXH3_64bits(pk, hlen));
}

static void put_file(const char *file, const void *bytes, size_t len)
{
	int fd = openat(dirfd_, file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
}

static unsigned char *get_file(const char *file, size_t *len)
{
	struct stat sb;
	int fd = openat(dirfd_, file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	unsigned char *buf = malloc((size_t)sb.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

static bool file_exists(const char *file)
{
	struct stat sb;
	if (fstatat(dirfd_, file, &sb, 0) == 0)
		return true;
	ck_assert_int_eq(errno, ENOENT);
	return false;
}

static struct bf_filter *make_keyed(const char *name, size_t len, struct bf_params p, uint64_t seed,
				    uint64_t nkeys)
{
	struct bf_filter *f;
	char k[32];
	ck_assert_int_eq(bf_filter_new(&p, seed, NULL, &f), 0);
	ck_assert_int_eq(bf_filter_set_name(f, name, len), 0);
	for (uint64_t i = 0; i < nkeys; i++) {
		int n = snprintf(k, sizeof(k), "key%llu", (unsigned long long)i);
		ck_assert_int_ge(bf_filter_add(f, k, (size_t)n), 0);
	}
	bf_filter_check(f, "absent", 6);
	return f;
}

/* Everything a decoded filter must share with the one encoded. */
static void assert_same_entry(const struct bf_filter *a, const struct bf_filter *b)
{
	assert_same(a, b);
	ck_assert_uint_eq(a->id, b->id);
	ck_assert_uint_eq(a->lsn, b->lsn);
	for (unsigned i = 0; i < a->nlayers; i++) {
		ck_assert_uint_eq(bf_filter_layers(a)[i].b, bf_filter_layers(b)[i].b);
		ck_assert_int_eq(bf_filter_layers(a)[i].counting, bf_filter_layers(b)[i].counting);
	}
	ck_assert_ptr_null(bf_filter_budget(b));
}

/* g holds every key f was given, and answers every other key as f does. */
static void assert_keys(const struct bf_filter *f, struct bf_filter *g, uint64_t nkeys)
{
	char k[32];
	for (uint64_t j = 0; j < nkeys + 1000; j++) {
		int n = snprintf(k, sizeof(k), "key%llu", (unsigned long long)j);
		if (j < nkeys && bf_filter_check(g, k, (size_t)n) != 1)
			ck_abort_msg("%.20s: added key %s missing", bf_filter_name(g), k);
		if (bf_filter_layers_with(f, k, (size_t)n) !=
		    bf_filter_layers_with(g, k, (size_t)n))
			ck_abort_msg("%.20s: answers differ at %s", bf_filter_name(g), k);
	}
}

#define NPACK 5

/* Filters of every kind, with names of 1, 23 (the longest kept inline), 24 (the shortest on
 * the heap, no padding), 200 (BF_NAME_MAX) bytes, bytes >= 0x80 among them. */
struct pack_set {
	struct bf_filter *f[NPACK];
	uint64_t gen[NPACK];
	uint64_t keys[NPACK];
};

static void pack_set_make(struct pack_set *s)
{
	char n23[23], n24[24], n200[200];
	memcpy(n23, "caf\xc3\xa9-\x80\xfe\xff", 9);
	memset(n23 + 9, 'x', sizeof(n23) - 9);
	for (size_t i = 0; i < sizeof(n24); i++)
		n24[i] = (char)('A' + i);
	/* Every byte a name may hold, from '!' on, DEL left out. */
	unsigned char c = 0x21;
	for (size_t i = 0; i < sizeof(n200); i++) {
		n200[i] = (char)c;
		c = c == 0x7e ? 0x80 : (unsigned char)(c + 1);
	}
	const struct {
		const char *name;
		size_t len;
		struct bf_params p;
		uint64_t keys, gen;
	} c_[NPACK] = {
	    {"a", 1, {500, 0.01, BF_TYPE_BLOOM, 0, true, 0, 0}, 400, 1},
	    {n23, sizeof(n23), {100, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0}, 1500, 7},
	    {n24, sizeof(n24), {200, 0.01, BF_TYPE_COUNTING, 2, true, 0, 0}, 1000, UINT64_MAX},
	    {n200,
	     sizeof(n200),
	     {50, 0.001, BF_TYPE_BLOOM, 1, false, 0, 0},
	     200,
	     0x0123456789abcdefULL},
	    {"empty", 5, {10, 0.5, BF_TYPE_BLOOM, 2, true, 0, 0}, 0, 0},
	};
	for (unsigned i = 0; i < NPACK; i++) {
		s->f[i] = make_keyed(c_[i].name, c_[i].len, c_[i].p,
				     0x9e3779b97f4a7c15ULL * (i + 1), c_[i].keys);
		s->f[i]->id = 100 + i;
		s->f[i]->lsn = ((uint64_t)(i + 1) << 40) | i;
		s->gen[i] = c_[i].gen;
		s->keys[i] = c_[i].keys;
	}
	/* Counting: keys added twice are counted twice; one delete leaves them present. */
	char k[32];
	for (unsigned j = 0; j < 50; j++) {
		int n = snprintf(k, sizeof(k), "key%u", j);
		ck_assert_int_eq(bf_filter_add(s->f[2], k, (size_t)n), 0);
	}
	ck_assert_int_eq(bf_filter_delete(s->f[2], "key0", 4), 1);
	ck_assert_uint_eq(s->f[0]->nlayers, 1);
	ck_assert_uint_ge(s->f[1]->nlayers, 3);
	ck_assert_uint_ge(s->f[2]->nlayers, 3);
	ck_assert_uint_ge(s->f[3]->nlayers, 3);
	ck_assert_uint_eq(bf_filter_items(s->f[4]), 0);
}

static void pack_set_free(struct pack_set *s)
{
	for (unsigned i = 0; i < NPACK; i++)
		bf_filter_free(s->f[i]);
}

/* The set's entries back to back; entry i ends at ends[i]. */
static unsigned char *pack_set_encode(const struct pack_set *s, uint64_t ends[NPACK])
{
	size_t total = 0, at = 0;
	for (unsigned i = 0; i < NPACK; i++)
		total += bf_snapshot_entry_size(s->f[i]);
	unsigned char *buf = malloc(total);
	ck_assert_ptr_nonnull(buf);
	for (unsigned i = 0; i < NPACK; i++) {
		size_t n = bf_snapshot_entry_size(s->f[i]);
		ck_assert_uint_eq(n % 8, 0);
		bf_snapshot_entry_encode(s->f[i], s->gen[i], buf + at);
		ck_assert_uint_eq(rd32(buf + at, E_LEN), n);
		at += n;
		ends[i] = at;
	}
	return buf;
}

/* The set written as a pack file by bf_pack_write, and read back whole. */
static unsigned char *pack_set_image(const struct pack_set *s, size_t *len)
{
	uint64_t ends[NPACK];
	unsigned char *buf = pack_set_encode(s, ends);
	ck_assert_int_eq(bf_pack_write(dirfd_, "img.bpack", buf, ends, NPACK, NULL), 0);
	free(buf);
	unsigned char *img = get_file("img.bpack", len);
	ck_assert_int_eq(unlinkat(dirfd_, "img.bpack", 0), 0);
	ck_assert_uint_eq(*len, P_INDEX + NPACK * P_INDEX_ENTRY + ends[NPACK - 1]);
	return img;
}

/* Open file as a pack: a failure leaves nothing to close. */
static int pack_open(const char *file, struct bf_pack *pk, char *why, size_t whylen)
{
	why[0] = 0;
	int rc = bf_pack_open(dirfd_, file, pk, why, whylen);
	if (rc) {
		ck_assert_ptr_null(pk->buf);
		ck_assert_uint_eq(pk->count, 0);
	}
	return rc;
}

START_TEST(pack_round_trip)
{
	struct pack_set s;
	uint64_t ends[NPACK];
	char why[128] = "";
	const char *step = NULL;
	struct bf_pack pk;
	struct stat sb;

	pack_set_make(&s);
	unsigned char *buf = pack_set_encode(&s, ends);
	ck_assert_int_eq(bf_pack_write(dirfd_, "p" BF_PACK_SUFFIX, buf, ends, NPACK, &step), 0);
	ck_assert_int_eq(fstatat(dirfd_, "p.bpack", &sb, 0), 0);
	ck_assert_uint_eq(sb.st_size, P_INDEX + NPACK * P_INDEX_ENTRY + ends[NPACK - 1]);
	ck_assert(!file_exists("p.bpack" BF_SNAPSHOT_TMP_SUFFIX));

	ck_assert_msg(pack_open("p.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_eq(pk.count, NPACK);
	ck_assert_uint_eq(pk.len, (size_t)sb.st_size);
	for (uint32_t i = 0; i < NPACK; i++) {
		const unsigned char *e;
		size_t len, start = i ? ends[i - 1] : 0;
		struct bf_filter *g = NULL;
		uint64_t gen = 42;

		bf_pack_entry_bytes(&pk, i, &e, &len);
		ck_assert_uint_eq(len, ends[i] - start);
		ck_assert_mem_eq(e, buf + start, len);
		ck_assert_msg(bf_pack_entry(&pk, i, UINT64_MAX, &g, &gen, why, sizeof(why)) == 0,
			      "entry %u: %s", i, why);
		ck_assert_uint_eq(gen, s.gen[i]);
		assert_same_entry(s.f[i], g);
		assert_keys(s.f[i], g, s.keys[i]);
		bf_filter_free(g);

		/* The same bytes decode alike outside a pack. */
		g = NULL;
		gen = 42;
		ck_assert_int_eq(bf_snapshot_entry_decode(buf + start, len, UINT64_MAX, &g, &gen,
							  why, sizeof(why)),
				 0);
		ck_assert_uint_eq(gen, s.gen[i]);
		assert_same_entry(s.f[i], g);
		bf_filter_free(g);
	}
	bf_pack_close(&pk);
	ck_assert_ptr_null(pk.buf);
	ck_assert_uint_eq(pk.count, 0);
	free(buf);
	pack_set_free(&s);
}
END_TEST

/* Entries [0, n) of pk are s's. */
static void assert_pack_holds(const struct bf_pack *pk, const struct pack_set *s, uint32_t n)
{
	char why[128] = "";

	ck_assert_uint_eq(pk->count, n);
	for (uint32_t i = 0; i < n; i++) {
		struct bf_filter *g = NULL;
		uint64_t gen = 0;

		ck_assert_msg(bf_pack_entry(pk, i, UINT64_MAX, &g, &gen, why, sizeof(why)) == 0,
			      "entry %u: %s", i, why);
		ck_assert_uint_eq(gen, s->gen[i]);
		assert_same_entry(s->f[i], g);
		bf_filter_free(g);
	}
}

/*
 * bf_pack_reopen (a start's load of the packs): one buffer, grown when a pack is larger, kept
 * through packs that fail to open; each pack read is only itself.
 */
START_TEST(pack_reopen_reuses_buffer)
{
	struct pack_set s;
	uint64_t ends[NPACK];
	char why[128] = "";
	struct bf_pack pk = {0};
	size_t len;

	pack_set_make(&s);
	unsigned char *buf = pack_set_encode(&s, ends);
	ck_assert_int_eq(bf_pack_write(dirfd_, "big.bpack", buf, ends, NPACK, NULL), 0);
	ck_assert_int_eq(bf_pack_write(dirfd_, "small.bpack", buf, ends, 2, NULL), 0);
	unsigned char *bad = get_file("big.bpack", &len);
	bad[P_INDEX + 3] ^= 0x20; /* an index offset: the index checksum fails */
	put_file("bad.bpack", bad, len);
	free(bad);

	ck_assert_msg(bf_pack_reopen(dirfd_, "small.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	assert_pack_holds(&pk, &s, 2);
	size_t small = pk.len;
	ck_assert_msg(bf_pack_reopen(dirfd_, "big.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_gt(pk.len, small);
	ck_assert_uint_ge(pk.cap, pk.len);
	assert_pack_holds(&pk, &s, NPACK);
	unsigned char *kept = pk.buf;
	ck_assert_msg(bf_pack_reopen(dirfd_, "small.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_ptr_eq(pk.buf, kept);
	ck_assert_uint_eq(pk.len, small);
	assert_pack_holds(&pk, &s, 2);
	/* A pack that fails leaves no pack, but the buffer. */
	ck_assert_int_eq(bf_pack_reopen(dirfd_, "bad.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "index checksum mismatch");
	ck_assert_uint_eq(pk.count, 0);
	ck_assert_uint_eq(pk.len, 0);
	ck_assert_ptr_eq(pk.buf, kept);
	ck_assert_int_eq(bf_pack_reopen(dirfd_, "none.bpack", &pk, why, sizeof(why)), -ENOENT);
	ck_assert_uint_eq(pk.count, 0);
	ck_assert_msg(bf_pack_reopen(dirfd_, "big.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_ptr_eq(pk.buf, kept);
	assert_pack_holds(&pk, &s, NPACK);
	bf_pack_close(&pk);
	ck_assert_ptr_null(pk.buf);
	ck_assert_uint_eq(pk.cap, 0);
	free(buf);
	pack_set_free(&s);
}
END_TEST

START_TEST(pack_empty_round_trip)
{
	char why[128];
	struct bf_pack pk;
	struct stat sb;
	ck_assert_int_eq(bf_pack_write(dirfd_, "e.bpack", NULL, NULL, 0, NULL), 0);
	ck_assert_int_eq(fstatat(dirfd_, "e.bpack", &sb, 0), 0);
	ck_assert_int_eq(sb.st_size, P_INDEX);
	ck_assert_msg(pack_open("e.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_eq(pk.count, 0);
	bf_pack_close(&pk);
	ck_assert(!file_exists("e.bpack" BF_SNAPSHOT_TMP_SUFFIX));
}
END_TEST

START_TEST(pack_entry_max_bytes)
{
	/* A layer budget too small refuses the entry before anything is allocated. */
	struct pack_set s;
	size_t len;
	char why[128];
	struct bf_pack pk;
	struct bf_filter *g = NULL;
	uint64_t gen;

	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len);
	put_file("p.bpack", img, len);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), 0);
	ck_assert_int_eq(
	    bf_pack_entry(&pk, 1, bf_filter_bytes(s.f[1]) - 1, &g, &gen, why, sizeof(why)),
	    -ENOMEM);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(bf_pack_entry(&pk, 1, bf_filter_bytes(s.f[1]), &g, &gen, why, sizeof(why)),
			 0);
	assert_same_entry(s.f[1], g);
	bf_filter_free(g);
	bf_pack_close(&pk);
	free(img);
	pack_set_free(&s);
}
END_TEST

START_TEST(pack_entry_corruption_is_local)
{
	struct pack_set s;
	size_t len;
	char why[128];

	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len), *bad = malloc(len);
	ck_assert_ptr_nonnull(bad);
	for (unsigned t = 0; t < NPACK; t++) {
		size_t at = rd64(img, P_INDEX + t * P_INDEX_ENTRY);
		size_t elen = rd64(img, P_INDEX + t * P_INDEX_ENTRY + 8);
		const unsigned char *e0 = img + at;
		size_t body = entry_body(e0), name_len = rd32(e0, E_NAME_LEN);
		const struct {
			const char *what;
			size_t off;
			bool framing; /* checked before the checksum: refused, the name unknown */
		} spots[] = {
		    {"capacity", E_CAPACITY, false},
		    {"seed", E_SEED + 3, false},
		    {"generation", E_GENERATION, false},
		    {"stats", E_STATS + 17, false},
		    {"name first", E_NAME, false},
		    {"name last", E_NAME + name_len - 1, false},
		    {"layer table", entry_layers(e0) + 8, false},
		    {"body first", body, false},
		    {"body middle", body + (elen - 8 - body) / 2, false},
		    {"body last", elen - 9, false},
		    {"checksum", elen - 1, false},
		    {"entry_len", E_LEN, true},
		    {"nlayers", E_NLAYERS, true},
		    {"name_len", E_NAME_LEN, true},
		    {"body_len", E_BODY_LEN + 1, true},
		};
		for (size_t k = 0; k < sizeof(spots) / sizeof(spots[0]); k++) {
			struct bf_pack pk;
			memcpy(bad, img, len);
			bad[at + spots[k].off] ^= 0x20;
			put_file("p.bpack", bad, len);
			ck_assert_msg(pack_open("p.bpack", &pk, why, sizeof(why)) == 0,
				      "entry %u %s: %s", t, spots[k].what, why);
			ck_assert_uint_eq(pk.count, NPACK);
			for (uint32_t i = 0; i < NPACK; i++) {
				struct bf_filter *g = NULL;
				uint64_t gen = 42;
				why[0] = 0;
				int rc =
				    bf_pack_entry(&pk, i, UINT64_MAX, &g, &gen, why, sizeof(why));
				if (i != t) {
					ck_assert_msg(rc == 0, "entry %u %s: entry %u: %s", t,
						      spots[k].what, i, why);
					ck_assert_uint_eq(gen, s.gen[i]);
					assert_same_entry(s.f[i], g);
					bf_filter_free(g);
					continue;
				}
				ck_assert_msg(rc == -EINVAL, "entry %u %s: rc %d", t, spots[k].what,
					      rc);
				ck_assert_ptr_null(g);
				if (!spots[k].framing)
					ck_assert_msg(strstr(why, "checksum"), "entry %u %s: %s", t,
						      spots[k].what, why);
			}

			/* What the bad entry claims to be, for the log: its name unless the name
			 * itself or the framing is what broke. */
			const unsigned char *e;
			const char *name = NULL;
			size_t elen2, nlen = 0;
			bf_pack_entry_bytes(&pk, t, &e, &elen2);
			bool named = bf_snapshot_entry_name(e, elen2, &name, &nlen);
			if (spots[k].framing) {
				ck_assert_msg(!named, "entry %u %s", t, spots[k].what);
			} else if (strncmp(spots[k].what, "name", 4) != 0) {
				ck_assert_msg(named, "entry %u %s", t, spots[k].what);
				ck_assert_uint_eq(nlen, s.f[t]->name_len);
				ck_assert_mem_eq(name, bf_filter_name(s.f[t]), nlen);
			}
			bf_pack_close(&pk);
		}
	}
	free(bad);
	free(img);
	pack_set_free(&s);
}
END_TEST

START_TEST(pack_header_and_index_corruption_refused)
{
	struct pack_set s;
	size_t len;
	char why[128];
	struct bf_pack pk;

	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len), *bad = malloc(len);
	ck_assert_ptr_nonnull(bad);
	/* Every byte of the header and the index. The version (8..11) is read before the checksum,
	 * as a snapshot file's: a flipped version byte reads as an unknown version. */
	for (size_t off = 0; off < P_INDEX + NPACK * P_INDEX_ENTRY; off++) {
		memcpy(bad, img, len);
		bad[off] ^= 0x20;
		put_file("p.bpack", bad, len);
		int rc = pack_open("p.bpack", &pk, why, sizeof(why));
		if (off >= P_VERSION && off < P_COUNT) {
			ck_assert_msg(rc == -ENOTSUP, "byte %zu: rc %d %s", off, rc, why);
			ck_assert_msg(strncmp(why, "unknown pack version", 20) == 0, "byte %zu: %s",
				      off, why);
			continue;
		}
		ck_assert_msg(rc == -EINVAL, "byte %zu: rc %d %s", off, rc, why);
		if (off < P_VERSION)
			ck_assert_str_eq(why, "bad magic");
		else if (off >= P_SUM)
			ck_assert_msg(strcmp(why, "index checksum mismatch") == 0, "byte %zu: %s",
				      off, why);
	}

	/* A future version is refused, whatever its checksum. */
	memcpy(bad, img, len);
	wr32(bad, P_VERSION, 4);
	reseal_pack(bad);
	put_file("p.bpack", bad, len);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -ENOTSUP);
	ck_assert_str_eq(why, "unknown pack version 4 (this build reads 1 to 3)");
	wr32(bad, P_VERSION, 0);
	reseal_pack(bad);
	put_file("p.bpack", bad, len);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -ENOTSUP);

	/* A snapshot file is not a pack. */
	write_sample("s.bsnap");
	ck_assert_int_eq(pack_open("s.bsnap", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "bad magic");
	free(bad);
	free(img);
	pack_set_free(&s);
}
END_TEST

/*
 * A version 2 pack (entries without the first layer's share: the name at 176) still loads, with
 * the share those entries were built with, a half.
 */
START_TEST(pack_version_2_still_read)
{
	struct bf_params p = {100, 0.01, BF_TYPE_BLOOM, 2, true, 0.7, 0.5};
	struct bf_filter *f = make("old", p, 250), *g;
	size_t len = bf_snapshot_entry_size(f), len2 = len - 8;
	unsigned char *e = malloc(len), *e2 = malloc(len2);
	struct bf_pack pk;
	uint64_t gen;
	char why[128];

	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(e2);
	ck_assert_int_eq(bf_filter_set_expiry(f, 77), 0);
	bf_snapshot_entry_encode(f, 5, e);
	memcpy(e2, e, E_FIRST);
	memcpy(e2 + E_FIRST, e + E_NAME, len - 8 - E_NAME);
	wr32(e2, E_LEN, (uint32_t)len2);
	wr64(e2, len2 - 8, XXH3_64bits(e2, len2 - 8));
	uint64_t end = len2;
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", e2, &end, 1, NULL), 0);

	int fd = openat(dirfd_, "p.bpack", O_RDWR);
	unsigned char h[P_INDEX + P_INDEX_ENTRY];
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	wr32(h, P_VERSION, 2);
	wr64(h, P_SUM, 0);
	wr64(h, P_SUM, XXH3_64bits(h, sizeof(h)));
	ck_assert_int_eq(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_msg(pack_open("p.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_eq(pk.version, 2);
	ck_assert_msg(bf_pack_entry(&pk, 0, UINT64_MAX, &g, &gen, why, sizeof(why)) == 0, "%s",
		      why);
	ck_assert_uint_eq(gen, 5);
	ck_assert_double_eq(g->params->first, 0.5);
	ck_assert_double_eq(g->params->ratio, 0.7);
	ck_assert_uint_eq(bf_filter_expire_ms(g), 77);
	assert_same(f, g);
	bf_pack_close(&pk);
	bf_filter_free(g);
	bf_filter_free(f);
	free(e);
	free(e2);
}
END_TEST

START_TEST(pack_wrong_length_refused)
{
	struct pack_set s;
	size_t len;
	char why[128];
	struct bf_pack pk;

	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len);
	const size_t hlen = P_INDEX + NPACK * P_INDEX_ENTRY;
	const size_t cuts[] = {len - 1, len - 8, rd64(img, P_INDEX + (NPACK - 1) * P_INDEX_ENTRY),
			       hlen + 1, hlen};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		put_file("p.bpack", img, cuts[i]);
		ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
		ck_assert_msg(strncmp(why, "truncated", 9) == 0, "length %zu: %s", cuts[i], why);
	}
	/* Shorter than the index it announces. */
	put_file("p.bpack", img, P_INDEX + 8);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "truncated: index", 16) == 0, "%s", why);
	/* Shorter than the header. */
	put_file("p.bpack", img, 10);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "truncated: 10 bytes, shorter than the header");
	put_file("p.bpack", img, 0);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "truncated: 0 bytes, shorter than the header");

	/* Appended bytes are as wrong as missing ones. */
	unsigned char *longer = calloc(1, len + 8);
	ck_assert_ptr_nonnull(longer);
	memcpy(longer, img, len);
	put_file("p.bpack", longer, len + 1);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "too long", 8) == 0, "%s", why);
	put_file("p.bpack", longer, len + 8);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "too long", 8) == 0, "%s", why);

	ck_assert_int_eq(pack_open("nope.bpack", &pk, why, sizeof(why)), -ENOENT);
	free(longer);
	free(img);
	pack_set_free(&s);
}
END_TEST

START_TEST(pack_index_must_tile_the_file)
{
	/* An index whose checksum holds but whose entries are not back to back after it, exactly
	 * filling the file, is refused: an entry never overlaps the index or another entry. */
	struct pack_set s;
	size_t len;
	char why[128];
	struct bf_pack pk;

	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len), *bad = malloc(len);
	ck_assert_ptr_nonnull(bad);
	const size_t last = P_INDEX + (NPACK - 1) * P_INDEX_ENTRY;
	const struct {
		size_t field; /* an offset or length in the index */
		int64_t delta;
		const char *why;
	} cases[] = {
	    {P_INDEX, 0, NULL}, /* resealed unchanged: still good */
	    {P_INDEX, -8, "index entry 0: bad offset"},
	    {P_INDEX, 8, "index entry 0: bad offset"},
	    {P_INDEX + P_INDEX_ENTRY, 8, "index entry 1: bad offset"},
	    {P_INDEX + 8, 8, "index entry 1: bad offset"},
	    {P_INDEX + 8, -8, "index entry 1: bad offset"},
	    {last + 8, 8, "index entry 4: past the end"},
	    {last + 8, -8, "index does not cover the file"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, img, len);
		wr64(bad, cases[i].field, rd64(bad, cases[i].field) + (uint64_t)cases[i].delta);
		reseal_pack(bad);
		put_file("p.bpack", bad, len);
		int rc = pack_open("p.bpack", &pk, why, sizeof(why));
		if (!cases[i].why) {
			ck_assert_msg(rc == 0, "%s", why);
			bf_pack_close(&pk);
			continue;
		}
		ck_assert_msg(rc == -EINVAL, "case %zu: rc %d", i, rc);
		ck_assert_str_eq(why, cases[i].why);
	}

	/* One entry fewer in the index than in the file. */
	memcpy(bad, img, len);
	wr32(bad, P_COUNT, NPACK - 1);
	reseal_pack(bad);
	put_file("p.bpack", bad, len);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "index entry 0: bad offset");
	free(bad);
	free(img);
	pack_set_free(&s);
}
END_TEST

/* Edit k of an entry (its checksum to be made right after), and the reason it must be refused
 * with; NULL past the last edit. */

static const char *edit_entry(unsigned char *e, unsigned k, char *want, size_t wantlen)
{
	size_t l = entry_layers(e), name_len = rd32(e, E_NAME_LEN);
	unsigned nlayers = rd32(e, E_NLAYERS);
	switch (k) {
	case 0:
		wr64(e, l + 8, rd64(e, l + 8) + 1);
		return "layer 0 does not match the parameters";
	case 1:
		wrf64(e, l + 2 * E_LAYER + 24, rdf64(e, l + 2 * E_LAYER + 24) * 1.000001);
		return "layer 2 does not match the parameters";
	case 2:
		wr64(e, l + E_LAYER, rd64(e, l + E_LAYER) + 1);
		return "layer 1 has the wrong geometry";
	case 3:
		e[l + 32] ^= 1;
		return "layer 0 has the wrong geometry";
	case 4:
		e[l + 33] = 1;
		return "layer 0 does not match the parameters";
	case 5: /* a plain layer over its capacity, the total kept the sum */
		wr64(e, E_ITEMS, rd64(e, E_ITEMS) + rd64(e, l + 8) + 1 - rd64(e, l + 16));
		wr64(e, l + 16, rd64(e, l + 8) + 1);
		return "layer 0 holds more than its capacity";
	case 6:
		wr64(e, E_ITEMS, rd64(e, E_ITEMS) + 1);
		return "body length or item count inconsistent";
	case 7: /* a layer's count no longer adds up to the total */
		wr64(e, l + 16, rd64(e, l + 16) - 1);
		return "body length or item count inconsistent";
	case 8:
		e[l + E_LAYER - 1] = 1;
		return "layer 0 padding not zero";
	case 9:
		wr64(e, E_CAPACITY, rd64(e, E_CAPACITY) + 1);
		return "layer 0 does not match the parameters";
	case 10:
		wrf64(e, E_ERROR, rdf64(e, E_ERROR) / 2);
		return "layer 0 does not match the parameters";
	case 11:
		wr32(e, E_EXPANSION, rd32(e, E_EXPANSION) + 1);
		return "layer 1 does not match the parameters";
	case 12:
		wr32(e, E_EXPANSION, 0);
		snprintf(want, wantlen, "bad layer count %u", nlayers);
		return want;
	case 13:
		wr32(e, E_TYPE, 2);
		return "bad filter parameters";
	case 14:
		wr32(e, E_PERSIST, 2);
		return "bad filter parameters";
	case 15:
		wr64(e, E_CAPACITY, 0);
		return "bad filter parameters";
	case 16:
		wrf64(e, E_ERROR, 1.0);
		return "bad filter parameters";
	case 17:
		wrf64(e, E_ERROR, 1e-13);
		return "bad filter parameters";
	case 18:
		wrf64(e, E_ERROR, NAN);
		return "bad filter parameters";
	case 19:
		wr32(e, E_EXPANSION, BF_MAX_EXPANSION + 1);
		return "bad filter parameters";
	case 20: /* the last name byte becomes padding that is not zero */
		wr32(e, E_NAME_LEN, (uint32_t)name_len - 1);
		return "name padding not zero";
	case 21: /* the name takes a zero padding byte */
		wr32(e, E_NAME_LEN, (uint32_t)name_len + 1);
		return "bad filter name";
	case 22:
		e[E_NAME] = ' ';
		return "bad filter name";
	case 23:
		e[E_NAME + name_len - 1] = 0x7f;
		return "bad filter name";
	case 24:
		wr32(e, E_NAME_LEN, (uint32_t)name_len + 2);
		return "entry fields do not add up to its length";
	case 25:
		wr32(e, E_NAME_LEN, 0);
		return "entry fields do not add up to its length";
	case 26:
		wr32(e, E_NAME_LEN, BF_NAME_MAX + 1);
		return "entry fields do not add up to its length";
	case 27:
		wr32(e, E_NLAYERS, nlayers - 1);
		return "entry fields do not add up to its length";
	case 28:
		wr32(e, E_NLAYERS, BF_MAX_LAYERS + 1);
		return "entry fields do not add up to its length";
	case 29:
		wr64(e, E_BODY_LEN, rd64(e, E_BODY_LEN) + 8);
		return "entry fields do not add up to its length";
	case 30:
		wr32(e, E_LEN, rd32(e, E_LEN) + 8);
		return "bad entry length";
	default:
		return NULL;
	}
}

START_TEST(entry_inconsistent_fields_refused)
{
	/* The scalable filter: a 23-byte name (one padding byte), plain layers, 3 or more. */
	struct pack_set s;
	uint64_t ends[NPACK];
	char why[128], want[64];

	pack_set_make(&s);
	unsigned char *buf = pack_set_encode(&s, ends);
	const unsigned char *good = buf + ends[0];
	const size_t len = ends[1] - ends[0];
	unsigned char *e = malloc(len);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(rd32(good, E_NAME_LEN), 23);
	ck_assert_uint_ge(rd32(good, E_NLAYERS), 3);
	for (unsigned k = 0;; k++) {
		memcpy(e, good, len);
		const char *expect = edit_entry(e, k, want, sizeof(want));
		if (!expect)
			break;
		reseal_entry(e, len);
		struct bf_filter *g = NULL;
		uint64_t gen = 42;
		why[0] = 0;
		int rc = bf_snapshot_entry_decode(e, len, UINT64_MAX, &g, &gen, why, sizeof(why));
		ck_assert_msg(rc == -EINVAL, "edit %u: rc %d (%s)", k, rc, why);
		ck_assert_msg(strcmp(why, expect) == 0, "edit %u: \"%s\", not \"%s\"", k, why,
			      expect);
		ck_assert_ptr_null(g);
		ck_assert_uint_eq(gen, 42);
	}

	/* Framing that cannot hold whatever the checksum says. */
	const size_t short_lens[] = {len - 8, len - 1, E_NAME, 8, 0};
	struct bf_filter *g = NULL;
	uint64_t gen = 42;
	memcpy(e, good, len);
	for (size_t i = 0; i < sizeof(short_lens) / sizeof(short_lens[0]); i++) {
		ck_assert_int_eq(bf_snapshot_entry_decode(e, short_lens[i], UINT64_MAX, &g, &gen,
							  why, sizeof(why)),
				 -EINVAL);
		ck_assert_str_eq(why, "bad entry length");
		ck_assert_ptr_null(g);
	}

	/* A counting layer counts re-adds: more items than capacity is consistent there. */
	const unsigned char *cgood = buf + ends[1];
	const size_t clen = ends[2] - ends[1];
	unsigned char *c = malloc(clen);
	ck_assert_ptr_nonnull(c);
	memcpy(c, cgood, clen);
	size_t l = entry_layers(c);
	uint64_t over = rd64(c, l + 8) + 5;
	wr64(c, E_ITEMS, rd64(c, E_ITEMS) + over - rd64(c, l + 16));
	wr64(c, l + 16, over);
	reseal_entry(c, clen);
	ck_assert_msg(bf_snapshot_entry_decode(c, clen, UINT64_MAX, &g, &gen, why, sizeof(why)) ==
			  0,
		      "%s", why);
	ck_assert_uint_eq(bf_filter_layers(g)[0].items, over);
	bf_filter_free(g);

	/* Fields no rule constrains are carried as they are. */
	memcpy(e, good, len);
	wr64(e, E_GENERATION, 99);
	wr64(e, E_ID, 12345);
	wr64(e, E_LSN, 777);
	reseal_entry(e, len);
	ck_assert_int_eq(bf_snapshot_entry_decode(e, len, UINT64_MAX, &g, &gen, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(gen, 99);
	ck_assert_uint_eq(g->id, 12345);
	ck_assert_uint_eq(g->lsn, 777);
	bf_filter_free(g);

	free(c);
	free(e);
	free(buf);
	pack_set_free(&s);
}
END_TEST

START_TEST(entry_name_best_effort)
{
	struct pack_set s;
	uint64_t ends[NPACK];
	const char *name;
	size_t nlen;
	char why[128];

	pack_set_make(&s);
	unsigned char *buf = pack_set_encode(&s, ends);
	for (unsigned i = 0; i < NPACK; i++) {
		size_t start = i ? ends[i - 1] : 0, len = ends[i] - start;
		unsigned char *e = buf + start;
		name = NULL;
		ck_assert(bf_snapshot_entry_name(e, len, &name, &nlen));
		ck_assert_uint_eq(nlen, s.f[i]->name_len);
		ck_assert_mem_eq(name, bf_filter_name(s.f[i]), nlen);

		/* A body that fails its checksum still names its filter. */
		e[entry_body(e)] ^= 0x01;
		struct bf_filter *g = NULL;
		uint64_t gen;
		ck_assert_int_eq(
		    bf_snapshot_entry_decode(e, len, UINT64_MAX, &g, &gen, why, sizeof(why)),
		    -EINVAL);
		ck_assert_str_eq(why, "checksum mismatch");
		name = NULL;
		ck_assert(bf_snapshot_entry_name(e, len, &name, &nlen));
		ck_assert_uint_eq(nlen, s.f[i]->name_len);
		ck_assert_mem_eq(name, bf_filter_name(s.f[i]), nlen);

		/* Framing that does not hold, or a name no filter may have: no name. */
		ck_assert(!bf_snapshot_entry_name(e, len - 8, &name, &nlen));
		ck_assert(!bf_snapshot_entry_name(e, len + 8, &name, &nlen));
		unsigned char saved = e[E_NAME];
		e[E_NAME] = ' ';
		ck_assert(!bf_snapshot_entry_name(e, len, &name, &nlen));
		e[E_NAME] = saved;
	}

	/* Garbage. */
	unsigned char junk[512];
	memset(junk, 0, sizeof(junk));
	ck_assert(!bf_snapshot_entry_name(junk, sizeof(junk), &name, &nlen));
	uint64_t x = 0x243f6a8885a308d3ULL;
	for (size_t i = 0; i < sizeof(junk); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		junk[i] = (unsigned char)x;
	}
	ck_assert(!bf_snapshot_entry_name(junk, sizeof(junk), &name, &nlen));
	wr32(junk, E_LEN, sizeof(junk)); /* right length, fields that do not add up */
	ck_assert(!bf_snapshot_entry_name(junk, sizeof(junk), &name, &nlen));
	ck_assert(!bf_snapshot_entry_name(junk, 0, &name, &nlen));
	ck_assert(!bf_snapshot_entry_name(junk, 8, &name, &nlen));
	free(buf);
	pack_set_free(&s);
}
END_TEST

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The names in the test directory, sorted, joined by spaces. */
static void dir_names(char *out, size_t len)
{
	char names[16][64];
	unsigned n = 0;
	/* A descriptor of its own: the teardown reads the directory through dirfd_. */
	int fd = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	DIR *d = fdopendir(fd);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && n < 16 && strlen(de->d_name) < sizeof(names[0]))
			strcpy(names[n++], de->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_name);
	out[0] = 0;
	for (unsigned i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "", names[i]);
}

START_TEST(pack_write_replaces_and_leaves_no_temp)
{
	struct pack_set s;
	uint64_t ends[NPACK];
	char why[128], names[256];
	struct bf_pack pk;
	const char *step = NULL;

	pack_set_make(&s);
	unsigned char *buf = pack_set_encode(&s, ends);
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", buf, ends, NPACK, &step), 0);
	dir_names(names, sizeof(names));
	ck_assert_str_eq(names, "p.bpack");

	/* A smaller pack replaces it whole. */
	size_t one = bf_snapshot_entry_size(s.f[2]);
	unsigned char *e = malloc(one);
	ck_assert_ptr_nonnull(e);
	bf_snapshot_entry_encode(s.f[2], 99, e);
	uint64_t end = one;
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", e, &end, 1, &step), 0);
	dir_names(names, sizeof(names));
	ck_assert_str_eq(names, "p.bpack");
	ck_assert_msg(pack_open("p.bpack", &pk, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_eq(pk.count, 1);
	ck_assert_uint_eq(pk.len, P_INDEX + P_INDEX_ENTRY + one);
	struct bf_filter *g = NULL;
	uint64_t gen;
	ck_assert_int_eq(bf_pack_entry(&pk, 0, UINT64_MAX, &g, &gen, why, sizeof(why)), 0);
	ck_assert_uint_eq(gen, 99);
	assert_same_entry(s.f[2], g);
	bf_filter_free(g);
	bf_pack_close(&pk);

	/* A temp file left by a crash does not block the next write, and goes. */
	patch("p.bpack" BF_SNAPSHOT_TMP_SUFFIX, 0, "junk", 4);
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", buf, ends, NPACK, &step), 0);
	dir_names(names, sizeof(names));
	ck_assert_str_eq(names, "p.bpack");
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), 0);
	ck_assert_uint_eq(pk.count, NPACK);
	bf_pack_close(&pk);

	/* An empty pack replaces it too. */
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", NULL, NULL, 0, &step), 0);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), 0);
	ck_assert_uint_eq(pk.count, 0);
	bf_pack_close(&pk);

	/* A write that fails (its temp name is taken by a directory) leaves the old pack. */
	ck_assert_int_eq(bf_pack_write(dirfd_, "p.bpack", buf, ends, NPACK, &step), 0);
	ck_assert_int_eq(mkdirat(dirfd_, "p.bpack" BF_SNAPSHOT_TMP_SUFFIX, 0700), 0);
	step = NULL;
	ck_assert_int_lt(bf_pack_write(dirfd_, "p.bpack", e, &end, 1, &step), 0);
	ck_assert_str_eq(step, "open");
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), 0);
	ck_assert_uint_eq(pk.count, NPACK);
	bf_pack_close(&pk);
	ck_assert_int_eq(unlinkat(dirfd_, "p.bpack" BF_SNAPSHOT_TMP_SUFFIX, AT_REMOVEDIR), 0);

	/* A write that fails at the rename removes its temp file. */
	ck_assert_int_eq(mkdirat(dirfd_, "q.bpack", 0700), 0);
	step = NULL;
	ck_assert_int_lt(bf_pack_write(dirfd_, "q.bpack", buf, ends, NPACK, &step), 0);
	ck_assert_str_eq(step, "rename");
	dir_names(names, sizeof(names));
	ck_assert_str_eq(names, "p.bpack q.bpack");

	free(e);
	free(buf);
	pack_set_free(&s);
}
END_TEST

START_TEST(entry_body_len_wrap_refused)
{
	/* body_len chosen so that the fields' sum wraps to the entry's length: the name (200
	 * bytes claimed) and the layer table lie past the 192-byte entry. */
	unsigned char *e = calloc(1, 192);
	char why[128];
	ck_assert_ptr_nonnull(e);
	wr32(e, E_LEN, 192);
	wr32(e, E_EXPANSION, 2);
	wr32(e, E_PERSIST, 1);
	wr32(e, E_NLAYERS, 1);
	wr32(e, E_NAME_LEN, 200);
	wr64(e, E_CAPACITY, 100);
	wrf64(e, E_ERROR, 0.01);
	wr64(e, E_BODY_LEN, (uint64_t)192 - (E_NAME + 200 + E_LAYER + 8));
	memset(e + E_NAME, 'a', 8);
	for (uint64_t seed = 0;; seed++) { /* a checksum that reads as name bytes too */
		wr64(e, E_SEED, seed);
		reseal_entry(e, 192);
		bool name_like = true;
		for (int i = 184; i < 192; i++)
			name_like &= e[i] > 0x20 && e[i] != 0x7f;
		if (name_like)
			break;
	}
	const char *name;
	size_t nlen;
	ck_assert(!bf_snapshot_entry_name(e, 192, &name, &nlen));
	struct bf_filter *g = NULL;
	uint64_t gen;
	ck_assert_int_eq(bf_snapshot_entry_decode(e, 192, UINT64_MAX, &g, &gen, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "entry fields do not add up to its length");
	free(e);
}
END_TEST

START_TEST(pack_index_wrap_refused)
{
	/* Entry 0 "2^64 - 8 bytes long", entry 1 starting inside the index: the sum wraps to the
	 * file's length. */
	struct pack_set s;
	size_t len;
	char why[128];
	struct bf_pack pk;
	pack_set_make(&s);
	unsigned char *img = pack_set_image(&s, &len);
	const size_t hlen = P_INDEX + NPACK * P_INDEX_ENTRY;
	wr64(img, P_INDEX + 8, UINT64_MAX - 7);
	wr64(img, P_INDEX + P_INDEX_ENTRY, hlen - 8);
	wr64(img, P_INDEX + P_INDEX_ENTRY + 8, rd64(img, P_INDEX + 2 * P_INDEX_ENTRY) - (hlen - 8));
	reseal_pack(img);
	put_file("p.bpack", img, len);
	ck_assert_int_eq(pack_open("p.bpack", &pk, why, sizeof(why)), -EINVAL);
	free(img);
	pack_set_free(&s);
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
	tcase_add_test(tc, version_2_still_read);
	tcase_add_test(tc, version_3_still_read);
	tcase_add_test(tc, long_chain_round_trips);
	tcase_add_test(tc, valid_checksum_but_wrong_geometry_refused);
	tcase_add_test(tc, id_past_the_largest_refused);
	tcase_add_test(tc, missing_file);
	tcase_add_test(tc, failed_write_keeps_old_and_removes_temp);
	tcase_add_test(tc, clone_is_exact_and_independent);
	suite_add_tcase(s, tc);

	tc = tcase_create("pack");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pack_round_trip);
	tcase_add_test(tc, pack_empty_round_trip);
	tcase_add_test(tc, pack_reopen_reuses_buffer);
	tcase_add_test(tc, pack_entry_max_bytes);
	tcase_add_test(tc, pack_entry_corruption_is_local);
	tcase_add_test(tc, pack_header_and_index_corruption_refused);
	tcase_add_test(tc, pack_version_2_still_read);
	tcase_add_test(tc, pack_wrong_length_refused);
	tcase_add_test(tc, pack_index_must_tile_the_file);
	tcase_add_test(tc, entry_inconsistent_fields_refused);
	tcase_add_test(tc, entry_name_best_effort);
	tcase_add_test(tc, pack_write_replaces_and_leaves_no_temp);
	tcase_add_test(tc, entry_body_len_wrap_refused);
	tcase_add_test(tc, pack_index_wrap_refused);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(snapshot_suite)
