/* SPDX-License-Identifier: MIT */
/*
 * The snapshot readers (core/bf_snapshot.h). The input minus its last byte is the file; the
 * last byte is a control byte. Bit 1 clear: a snapshot file of its own; bit 1 set: a pack file
 * (bf_pack_open, then every entry). With bit 0 set, the target first writes the correct
 * checksums into the file (the header's and the body's; a pack's index checksum and every
 * entry's the index points at), so mutations reach the field checks behind the checksums
 * instead of all failing at a checksum mismatch. A filter that loads is then used (check, add,
 * delete) and freed.
 *
 * The file is a memfd, opened by bf_snapshot_read() through /proc/self/fd: no disk I/O.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/bf_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OFF_BODY_LEN   72
#define OFF_BODY_SUM   80
#define OFF_HEADER_SUM 1664 /* version 2 */

static int memfd = -1;
static char path[64];

static void use(struct bf_filter *f)
{
	static const char *const keys[] = {"a", "key", "another key", ""};

	for (size_t i = 0; i < 4; i++) {
		bf_filter_check(f, keys[i], strlen(keys[i]));
		int added = bf_filter_add(f, keys[i], strlen(keys[i]));
		if (added >= 0 && bf_filter_check(f, keys[i], strlen(keys[i])) != 1)
			abort(); /* an added key must be found */
		bf_filter_delete(f, keys[i], strlen(keys[i]));
	}
	bf_filter_free(f);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Pack layout (bf_snapshot.h): count at 12, index checksum at 24, index from 32. */
static void fix_pack(unsigned char *file, size_t size)
{
	if (size < 32)
		return;
	uint64_t count = (uint64_t)file[12] | (uint64_t)file[13] << 8 | (uint64_t)file[14] << 16 |
			 (uint64_t)file[15] << 24;
	if (count > (size - 32) / 16)
		return;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t off = get64(file + 32 + 16 * i), len = get64(file + 40 + 16 * i);
		if (off <= size && len >= 8 && len <= size - off)
			put64(file + off + len - 8, XXH3_64bits(file + off, len - 8));
	}
	put64(file + 24, 0);
	put64(file + 24, XXH3_64bits(file, 32 + 16 * count));
}

static void fuzz_pack(void)
{
	struct bf_pack pk;
	char why[256];

	if (bf_pack_open(AT_FDCWD, path, &pk, why, sizeof(why))) {
		if (memchr(why, '\0', sizeof(why)) == NULL)
			abort();
		return;
	}
	for (uint32_t i = 0; i < pk.count; i++) {
		struct bf_filter *f = NULL;
		const unsigned char *e;
		const char *name;
		size_t len, nlen;
		uint64_t gen;

		bf_pack_entry_bytes(&pk, i, &e, &len);
		if (bf_snapshot_entry_name(e, len, &name, &nlen) &&
		    (name < (const char *)e || name + nlen > (const char *)e + len))
			abort();
		uint64_t id;
		if (bf_pack_entry_peek(&pk, i, &id, &name, &nlen) &&
		    (name < (const char *)e || name + nlen > (const char *)e + len))
			abort();
		if (bf_pack_entry(&pk, i, UINT64_MAX, &f, &gen, why, sizeof(why)) == 0)
			use(f);
	}
	bf_pack_close(&pk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (memfd < 0) {
		memfd = memfd_create("fuzz-snapshot", MFD_CLOEXEC);
		if (memfd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	uint8_t ctrl = data[size - 1];
	size--;

	unsigned char *file = malloc(size ? size : 1);
	if (!file)
		abort();
	memcpy(file, data, size);
	if ((ctrl & 3) == 3)
		fix_pack(file, size);
	if ((ctrl & 3) == 1 && size >= OFF_HEADER_SUM + 8) {
		if (size > BF_SNAPSHOT_HEADER_LEN) {
			uint64_t body = get64(file + OFF_BODY_LEN);
			uint64_t have = size - BF_SNAPSHOT_HEADER_LEN;
			put64(file + OFF_BODY_SUM, XXH3_64bits(file + BF_SNAPSHOT_HEADER_LEN,
							       body < have ? body : have));
		}
		put64(file + OFF_HEADER_SUM, XXH3_64bits(file, OFF_HEADER_SUM));
	}
	if (ftruncate(memfd, 0) < 0 || pwrite(memfd, file, size, 0) != (ssize_t)size)
		abort();
	free(file);
	if (ctrl & 2) {
		fuzz_pack();
		return 0;
	}

	struct bf_filter *f = NULL;
	uint64_t gen;
	char why[256];
	int rc = bf_snapshot_read(AT_FDCWD, path, &f, &gen, why, sizeof(why));
	if (rc == 0) {
		if (!f)
			abort();
		use(f);
	} else if (memchr(why, '\0', sizeof(why)) == NULL) {
		abort();
	}
	return 0;
}
