/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed snapshots of tests/fuzz/corpus/snapshot/ (not built by meson; rerun it
 * when the snapshot format changes):
 *
 *   cc -D_GNU_SOURCE -I core tests/fuzz/gen_snapshot_seeds.c core/bf_model.c core/bf_layer.c \
 *     core/bf_filter.c core/bf_registry.c core/bf_snapshot.c -lxxhash -lm -o /tmp/gen && \
 *     /tmp/gen tests/fuzz/corpus/snapshot
 *
 * Each seed is a real snapshot followed by the fuzz target's control byte (1: fix the
 * checksums after mutation; 3: the same, for a pack file; see fuzz_snapshot.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bf_snapshot.h"

static void seed(int dirfd, const char *file, const char *name, struct bf_params p, int grow)
{
	struct bf_filter *f;
	if (bf_filter_new(&p, 0x1234567890abcdefull, NULL, &f) != 0)
		exit(1);
	if (bf_filter_set_name(f, name, strlen(name)))
		exit(1);
	char key[32];
	for (int i = 0; i < grow; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		bf_filter_add(f, key, strlen(key));
	}
	bf_filter_check(f, "key-0", 5);
	const char *step;
	if (bf_snapshot_write(f, 7, dirfd, file, &step) != 0) {
		fprintf(stderr, "%s: %s failed\n", file, step);
		exit(1);
	}
	bf_filter_free(f);
	int fd = openat(dirfd, file, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "\1", 1) != 1 || close(fd) != 0)
		exit(1);
}

/* A pack of the three kinds of filter. */
static void seed_pack(int dirfd, const char *file)
{
	struct bf_params ps[] = {{50, 0.01, BF_TYPE_BLOOM, 2, true},
				 {20, 0.05, BF_TYPE_COUNTING, 0, true},
				 {8, 0.1, BF_TYPE_BLOOM, 2, true}};
	static unsigned char buf[1 << 16];
	uint64_t ends[3];
	size_t len = 0;

	for (int i = 0; i < 3; i++) {
		struct bf_filter *f;
		char name[16], key[32];
		if (bf_filter_new(&ps[i], 0x1234567890abcdefull + (unsigned)i, NULL, &f) != 0)
			exit(1);
		snprintf(name, sizeof(name), "p%d", i);
		if (bf_filter_set_name(f, name, strlen(name)))
			exit(1);
		for (int k = 0; k < 10 * (i + 1); k++) {
			snprintf(key, sizeof(key), "key-%d", k);
			bf_filter_add(f, key, strlen(key));
		}
		if (len + bf_snapshot_entry_size(f) > sizeof(buf))
			exit(1);
		bf_snapshot_entry_encode(f, 3, buf + len);
		len += bf_snapshot_entry_size(f);
		ends[i] = len;
		bf_filter_free(f);
	}
	const char *step;
	if (bf_pack_write(dirfd, file, buf, ends, 3, &step) != 0)
		exit(1);
	int fd = openat(dirfd, file, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "\3", 1) != 1 || close(fd) != 0)
		exit(1);
}

int main(int argc, char **argv)
{
	int dirfd = open(argc > 1 ? argv[1] : ".", O_RDONLY | O_DIRECTORY);
	if (dirfd < 0)
		return 1;
	seed(dirfd, "bloom", "plain", (struct bf_params){50, 0.01, BF_TYPE_BLOOM, 2, true}, 10);
	seed(dirfd, "counting", "cnt", (struct bf_params){20, 0.05, BF_TYPE_COUNTING, 0, true}, 5);
	/* Past its first layer's capacity: three layers. */
	seed(dirfd, "scaled", "grown/\xc3\xa9", (struct bf_params){8, 0.1, BF_TYPE_BLOOM, 2, true},
	     40);
	seed_pack(dirfd, "pack");
	return 0;
}
