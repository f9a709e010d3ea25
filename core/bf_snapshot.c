/* SPDX-License-Identifier: MIT */
#include "core/bf_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf_model.h"
#include "core/bf_registry.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the snapshot format and the block words are little-endian"
#endif

static const char magic[8] = "BLOSSOM";

enum {
	OFF_VERSION = 8,
	OFF_HEADER_LEN = 12,
	OFF_TYPE = 16,
	OFF_EXPANSION = 20,
	OFF_CAPACITY = 24,
	OFF_ERROR = 32,
	OFF_SEED = 40,
	OFF_PERSIST = 48,
	OFF_NLAYERS = 52,
	OFF_ITEMS = 56,
	OFF_GENERATION = 64,
	OFF_BODY_LEN = 72,
	OFF_BODY_SUM = 80,
	OFF_STATS = 88,
	OFF_NAME_LEN = 160,
	OFF_NAME = 164,
	OFF_LAYERS = 368,
	LAYER_ENTRY = 40,
	OFF_HEADER_SUM_V1 = OFF_LAYERS + BF_MAX_LAYERS * LAYER_ENTRY,
	OFF_ID = OFF_HEADER_SUM_V1, /* version 2 on */
	OFF_LSN = OFF_ID + 8,
	OFF_HEADER_SUM = OFF_LSN + 8,
};

_Static_assert(OFF_STATS + sizeof(struct bf_stats) == OFF_NAME_LEN, "stats are 9 x u64");
_Static_assert(OFF_NAME + BF_NAME_MAX <= OFF_LAYERS, "name fits");
_Static_assert(OFF_HEADER_SUM + 8 <= BF_SNAPSHOT_HEADER_LEN, "header fits");

static void put32(unsigned char *h, size_t off, uint32_t v)
{
	memcpy(h + off, &v, 4);
}

static void put64(unsigned char *h, size_t off, uint64_t v)
{
	memcpy(h + off, &v, 8);
}

static void putf64(unsigned char *h, size_t off, double v)
{
	memcpy(h + off, &v, 8);
}

static uint32_t get32(const unsigned char *h, size_t off)
{
	uint32_t v;
	memcpy(&v, h + off, 4);
	return v;
}

static uint64_t get64(const unsigned char *h, size_t off)
{
	uint64_t v;
	memcpy(&v, h + off, 8);
	return v;
}

static double getf64(const unsigned char *h, size_t off)
{
	double v;
	memcpy(&v, h + off, 8);
	return v;
}

void bf_snapshot_filename(const char *name, size_t len, char out[BF_SNAPSHOT_NAME_MAX])
{
	static const char hex[] = "0123456789ABCDEF";
	/* Room for the encoding, "~" + 16 hex digits, the suffix and the NUL. */
	const size_t budget = BF_SNAPSHOT_NAME_MAX - 1 - 17 - (sizeof(BF_SNAPSHOT_SUFFIX) - 1) -
			      (sizeof(BF_SNAPSHOT_TMP_SUFFIX) - 1);
	size_t n = 0;
	bool cut = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '_' || c == '-';
		size_t need = plain ? 1 : 3;
		if (n + need > budget) {
			cut = true;
			break;
		}
		if (plain) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	if (cut)
		n += (size_t)snprintf(out + n, 18, "~%016llx",
				      (unsigned long long)XXH3_64bits(name, len));
	memcpy(out + n, BF_SNAPSHOT_SUFFIX, sizeof(BF_SNAPSHOT_SUFFIX));
}

void bf_snapshot_header(const struct bf_filter *f, uint64_t generation, uint64_t body_sum,
			unsigned char *h)
{
	uint64_t body_len = f->bytes;

	memset(h, 0, BF_SNAPSHOT_HEADER_LEN);
	memcpy(h, magic, sizeof(magic));
	put32(h, OFF_VERSION, BF_SNAPSHOT_VERSION);
	put32(h, OFF_HEADER_LEN, BF_SNAPSHOT_HEADER_LEN);
	put32(h, OFF_TYPE, (uint32_t)f->params.type);
	put32(h, OFF_EXPANSION, f->params.expansion);
	put64(h, OFF_CAPACITY, f->params.capacity);
	putf64(h, OFF_ERROR, f->params.error_rate);
	put64(h, OFF_SEED, f->seed);
	put32(h, OFF_PERSIST, f->params.persist);
	put32(h, OFF_NLAYERS, f->nlayers);
	put64(h, OFF_ITEMS, f->items);
	put64(h, OFF_GENERATION, generation);
	put64(h, OFF_BODY_LEN, body_len);
	put64(h, OFF_BODY_SUM, body_sum);
	memcpy(h + OFF_STATS, &f->stats, sizeof(f->stats));
	put32(h, OFF_NAME_LEN, (uint32_t)f->name_len);
	memcpy(h + OFF_NAME, f->name, f->name_len);
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &f->layers[i];
		unsigned char *e = h + OFF_LAYERS + i * LAYER_ENTRY;
		put64(e, 0, l->nblocks);
		put64(e, 8, l->capacity);
		put64(e, 16, l->items);
		putf64(e, 24, l->error_rate);
		e[32] = l->b;
		e[33] = l->counting;
	}
	put64(h, OFF_ID, f->id);
	put64(h, OFF_LSN, f->lsn);
	put64(h, OFF_HEADER_SUM, XXH3_64bits(h, OFF_HEADER_SUM));
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len) {
		/* Linux moves at most ~2 GiB per call. */
		ssize_t n = pwrite(fd, p, len > (1u << 30) ? (1u << 30) : len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int bf_snapshot_write(const struct bf_filter *f, uint64_t generation, int dirfd,
		      const char *filename, const char **step)
{
	char tmp[BF_SNAPSHOT_NAME_MAX + sizeof(BF_SNAPSHOT_TMP_SUFFIX)];
	unsigned char *header = NULL;
	const char *failed = "open";
	int fd = -1, rc;

	snprintf(tmp, sizeof(tmp), "%s%s", filename, BF_SNAPSHOT_TMP_SUFFIX);
	/* A temp file left by a crash would make O_EXCL fail forever: it is ours to remove. */
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}

	uint64_t body_len = f->bytes;
	failed = "fallocate";
	rc = -posix_fallocate(fd, 0, (off_t)(BF_SNAPSHOT_HEADER_LEN + body_len));
	if (rc)
		goto fail;

	failed = "write";
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	off_t off = BF_SNAPSHOT_HEADER_LEN;
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &f->layers[i];
		XXH3_64bits_update(&st, l->blocks, bf_layer_bytes(l));
		rc = pwrite_all(fd, l->blocks, bf_layer_bytes(l), off);
		if (rc)
			goto fail;
		off += (off_t)bf_layer_bytes(l);
	}
	header = malloc(BF_SNAPSHOT_HEADER_LEN);
	if (!header) {
		rc = -ENOMEM;
		goto fail;
	}
	bf_snapshot_header(f, generation, XXH3_64bits_digest(&st), header);
	rc = pwrite_all(fd, header, BF_SNAPSHOT_HEADER_LEN, 0);
	if (rc)
		goto fail;
	struct stat sb;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != BF_SNAPSHOT_HEADER_LEN + body_len) {
		rc = -EIO;
		goto fail;
	}

	failed = "fsync";
	if (fsync(fd) < 0) {
		rc = -errno;
		goto fail;
	}
	failed = "close";
	rc = close(fd);
	fd = -1;
	if (rc < 0) {
		rc = -errno;
		goto fail;
	}
	failed = "rename";
	if (renameat(dirfd, tmp, dirfd, filename) < 0) {
		rc = -errno;
		goto fail;
	}
	/* The rename is durable once the directory is. The file itself is complete either way. */
	if (fsync(dirfd) < 0) {
		if (step)
			*step = "fsync dir";
		free(header);
		return -errno;
	}
	free(header);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	free(header);
	if (step)
		*step = failed;
	return rc;
}

static int reason(char *why, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && len)
		vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return rc;
}

static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EINVAL; /* shrank under us */
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Check the header; fill params. Every rule a loaded filter must meet is here, once. */
static int check_header(const unsigned char *h, struct bf_params *p, char *why, size_t whylen)
{
	if (memcmp(h, magic, sizeof(magic)) != 0)
		return reason(why, whylen, -EINVAL, "bad magic");
	uint32_t version = get32(h, OFF_VERSION);
	if (version != 1 && version != BF_SNAPSHOT_VERSION)
		return reason(why, whylen, -ENOTSUP,
			      "unknown format version %u (this build reads 1 to %u)", version,
			      BF_SNAPSHOT_VERSION);
	/* Version 1 (before the log) ends at the layer table: no id, no LSN. */
	size_t sum_off = version == 1 ? OFF_HEADER_SUM_V1 : OFF_HEADER_SUM;
	if (get64(h, sum_off) != XXH3_64bits(h, sum_off))
		return reason(why, whylen, -EINVAL, "header checksum mismatch");
	if (get32(h, OFF_HEADER_LEN) != BF_SNAPSHOT_HEADER_LEN)
		return reason(why, whylen, -EINVAL, "bad header length %u",
			      get32(h, OFF_HEADER_LEN));
	/* The checksum covers the fields; the padding after it must be what the writer wrote. */
	for (size_t i = sum_off + 8; i < BF_SNAPSHOT_HEADER_LEN; i++)
		if (h[i])
			return reason(why, whylen, -EINVAL, "header padding not zero at byte %zu",
				      i);

	uint32_t persist = get32(h, OFF_PERSIST);
	*p = (struct bf_params){
	    .capacity = get64(h, OFF_CAPACITY),
	    .error_rate = getf64(h, OFF_ERROR),
	    .type = (enum bf_type)get32(h, OFF_TYPE),
	    .expansion = get32(h, OFF_EXPANSION),
	    .persist = persist != 0,
	};
	if (persist > 1 || bf_params_validate(p))
		return reason(why, whylen, -EINVAL, "bad filter parameters");
	uint32_t nlayers = get32(h, OFF_NLAYERS);
	if (nlayers < 1 || nlayers > BF_MAX_LAYERS || (p->expansion == 0 && nlayers != 1))
		return reason(why, whylen, -EINVAL, "bad layer count %u", nlayers);
	uint32_t name_len = get32(h, OFF_NAME_LEN);
	if (!bf_name_valid((const char *)h + OFF_NAME, name_len))
		return reason(why, whylen, -EINVAL, "bad filter name");

	/* Each layer must be exactly what the sizing model builds for its place in the chain. */
	uint64_t body = 0, items = 0;
	for (unsigned i = 0; i < nlayers; i++) {
		const unsigned char *e = h + OFF_LAYERS + i * LAYER_ENTRY;
		uint64_t cap, nblocks;
		double err;
		unsigned b;
		bf_filter_layer_target(p, i, &cap, &err);
		if (get64(e, 8) != cap || getf64(e, 24) != err ||
		    e[33] != (p->type == BF_TYPE_COUNTING))
			return reason(why, whylen, -EINVAL,
				      "layer %u does not match the parameters", i);
		if (bf_layer_plan(e[33], cap, err, &nblocks, &b) || get64(e, 0) != nblocks ||
		    e[32] != b)
			return reason(why, whylen, -EINVAL, "layer %u has the wrong geometry", i);
		/* A plain layer takes no key past its capacity; a counting one counts re-adds of
		 * keys it holds, so it may. */
		if (!e[33] && get64(e, 16) > cap)
			return reason(why, whylen, -EINVAL, "layer %u holds more than its capacity",
				      i);
		for (unsigned k = 34; k < LAYER_ENTRY; k++)
			if (e[k])
				return reason(why, whylen, -EINVAL, "layer %u padding not zero", i);
		body += nblocks * BF_BLOCK_BYTES;
		items += get64(e, 16);
	}
	for (unsigned i = nlayers; i < BF_MAX_LAYERS; i++)
		for (unsigned k = 0; k < LAYER_ENTRY; k++)
			if (h[OFF_LAYERS + i * LAYER_ENTRY + k])
				return reason(why, whylen, -EINVAL, "unused layer %u not zero", i);
	for (size_t i = OFF_NAME + name_len; i < OFF_LAYERS; i++)
		if (h[i])
			return reason(why, whylen, -EINVAL, "name padding not zero");
	if (get64(h, OFF_BODY_LEN) != body || get64(h, OFF_ITEMS) != items)
		return reason(why, whylen, -EINVAL, "body length or item count inconsistent");
	return 0;
}

int bf_snapshot_decode(const unsigned char *h, size_t len, uint64_t max_bytes,
		       struct bf_filter **out, struct bf_snapshot_info *info, char *why,
		       size_t whylen)
{
	struct bf_params p;
	int rc;

	if (len != BF_SNAPSHOT_HEADER_LEN)
		return reason(why, whylen, -EINVAL, "header of %zu bytes, not %d", len,
			      BF_SNAPSHOT_HEADER_LEN);
	rc = check_header(h, &p, why, whylen);
	if (rc)
		return rc;
	if (get64(h, OFF_BODY_LEN) > max_bytes)
		return reason(why, whylen, -ENOMEM, "%llu bytes of layers would pass the limit",
			      (unsigned long long)get64(h, OFF_BODY_LEN));

	struct bf_filter *f = bf_filter_alloc();
	if (!f)
		return reason(why, whylen, -ENOMEM, "out of memory");
	f->params = p;
	f->seed = get64(h, OFF_SEED);
	f->items = get64(h, OFF_ITEMS);
	memcpy(&f->stats, h + OFF_STATS, sizeof(f->stats));
	if (bf_filter_set_name(f, (const char *)h + OFF_NAME, get32(h, OFF_NAME_LEN))) {
		bf_filter_free(f);
		return reason(why, whylen, -ENOMEM, "out of memory");
	}
	if (get32(h, OFF_VERSION) >= 2) {
		f->id = get64(h, OFF_ID);
		f->lsn = get64(h, OFF_LSN);
	}
	uint32_t nlayers = get32(h, OFF_NLAYERS);
	if (bf_filter_layers_reserve(f, nlayers)) {
		bf_filter_free(f);
		return reason(why, whylen, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < nlayers; i++) {
		const unsigned char *e = h + OFF_LAYERS + i * LAYER_ENTRY;
		struct bf_layer *l = &f->layers[i];
		rc = bf_layer_alloc(l, e[33], get64(e, 0), e[32], get64(e, 8), getf64(e, 24));
		if (rc) {
			bf_filter_free(f);
			return reason(why, whylen, rc, "cannot allocate layer %u", i);
		}
		f->nlayers++;
		f->bytes += bf_layer_bytes(l);
		l->items = get64(e, 16);
	}
	*out = f;
	info->generation = get64(h, OFF_GENERATION);
	info->body_len = f->bytes;
	info->body_sum = get64(h, OFF_BODY_SUM);
	return 0;
}

int bf_snapshot_read(int dirfd, const char *filename, struct bf_filter **out, uint64_t *generation,
		     char *why, size_t whylen)
{
	unsigned char *h = NULL;
	struct bf_filter *f = NULL;
	struct bf_snapshot_info info;
	int rc;

	int fd = openat(dirfd, filename, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return reason(why, whylen, -errno, "cannot open: %s", strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		rc = reason(why, whylen, -errno, "cannot stat: %s", strerror(errno));
		goto fail;
	}
	if ((uint64_t)sb.st_size < BF_SNAPSHOT_HEADER_LEN) {
		rc = reason(why, whylen, -EINVAL, "truncated: %llu bytes, shorter than the header",
			    (unsigned long long)sb.st_size);
		goto fail;
	}
	h = malloc(BF_SNAPSHOT_HEADER_LEN);
	if (!h) {
		rc = reason(why, whylen, -ENOMEM, "out of memory");
		goto fail;
	}
	rc = pread_all(fd, h, BF_SNAPSHOT_HEADER_LEN, 0);
	if (rc) {
		reason(why, whylen, rc, "cannot read the header: %s", strerror(-rc));
		goto fail;
	}
	/* The header's own checks first; the file's length is checked before any allocation. */
	struct bf_params p;
	rc = check_header(h, &p, why, whylen);
	if (rc)
		goto fail;
	uint64_t want = BF_SNAPSHOT_HEADER_LEN + get64(h, OFF_BODY_LEN);
	if ((uint64_t)sb.st_size != want) {
		rc = reason(why, whylen, -EINVAL, "%s: %llu of %llu bytes",
			    (uint64_t)sb.st_size < want ? "truncated" : "too long",
			    (unsigned long long)sb.st_size, (unsigned long long)want);
		goto fail;
	}
	rc = bf_snapshot_decode(h, BF_SNAPSHOT_HEADER_LEN, UINT64_MAX, &f, &info, why, whylen);
	if (rc)
		goto fail;

	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	off_t off = BF_SNAPSHOT_HEADER_LEN;
	for (unsigned i = 0; i < f->nlayers; i++) {
		struct bf_layer *l = &f->layers[i];
		rc = pread_all(fd, l->blocks, bf_layer_bytes(l), off);
		if (rc) {
			reason(why, whylen, rc, "cannot read layer %u: %s", i, strerror(-rc));
			goto fail;
		}
		XXH3_64bits_update(&st, l->blocks, bf_layer_bytes(l));
		off += (off_t)bf_layer_bytes(l);
	}
	if (XXH3_64bits_digest(&st) != info.body_sum) {
		rc = reason(why, whylen, -EINVAL, "body checksum mismatch");
		goto fail;
	}
	*generation = info.generation;
	*out = f;
	free(h);
	close(fd);
	return 0;
fail:
	bf_filter_free(f);
	free(h);
	close(fd);
	return rc;
}
