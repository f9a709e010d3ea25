/* SPDX-License-Identifier: MIT */
/* Snapshot files: their format, the checked reader and the crash-safe writer; see
 * bf_snapshot.h. */
#include "core/bf_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
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
	HEAD_LAYERS = 32, /* the table's entries in the first 4 KiB; the rest follow them */
	OFF_HEADER_SUM_V1 = OFF_LAYERS + HEAD_LAYERS * LAYER_ENTRY,
	OFF_ID = OFF_HEADER_SUM_V1, /* version 2 on */
	OFF_LSN = OFF_ID + 8,
	OFF_HEADER_SUM_V2 = OFF_LSN + 8,
	OFF_EXPIRE = OFF_HEADER_SUM_V2, /* version 3 on */
	OFF_RATIO = OFF_EXPIRE + 8,
	OFF_HEADER_SUM_V3 = OFF_RATIO + 8,
	OFF_FIRST = OFF_HEADER_SUM_V3, /* version 4 on */
	OFF_HEADER_SUM = OFF_FIRST + 8,
	OFF_MORE_LAYERS = BF_SNAPSHOT_HEADER_LEN, /* layers 32 on, version 3 on */
};

_Static_assert(OFF_STATS + BF_STATS_WORDS * 8 == OFF_NAME_LEN, "stats are 9 x u64");
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

/* Layer i's capacity and error target at offsets 8 and 24 of its entry e, which files keep
 * (check_meta holds them to its params, which give them to a filter). */
static void put_layer_target(unsigned char *e, const struct bf_filter *f, unsigned i)
{
	uint64_t cap;
	double err;

	bf_filter_layer_target(f->params, i, &cap, &err);
	put64(e, 8, cap);
	putf64(e, 24, err);
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

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int bf_snapshot_filename_name(const char *file, char *out, size_t *len)
{
	size_t flen = strlen(file), slen = sizeof(BF_SNAPSHOT_SUFFIX) - 1, n = 0;
	char again[BF_SNAPSHOT_NAME_MAX];

	if (flen <= slen || strcmp(file + flen - slen, BF_SNAPSHOT_SUFFIX))
		return -EINVAL;
	for (size_t i = 0; i < flen - slen && n < BF_NAME_MAX; i++) {
		int hi, lo;

		if (file[i] != '%') {
			out[n++] = file[i];
			continue;
		}
		if (i + 2 >= flen - slen || (hi = hex_digit(file[i + 1])) < 0 ||
		    (lo = hex_digit(file[i + 2])) < 0)
			return -EINVAL;
		out[n++] = (char)(hi << 4 | lo);
		i += 2;
	}
	/* Only a name that encodes back to file is one (so no cut name, no "~", no '/'). */
	if (!bf_name_valid(out, n))
		return -EINVAL;
	bf_snapshot_filename(out, n, again);
	if (strcmp(again, file))
		return -EINVAL;
	*len = n;
	return 0;
}

/* A header of n layers' length: 4 KiB, and as many more as the layers past 32 take. */
static size_t header_len_for(unsigned n)
{
	size_t more = n > HEAD_LAYERS ? (size_t)(n - HEAD_LAYERS) * LAYER_ENTRY : 0;

	return BF_SNAPSHOT_HEADER_LEN + (more + BF_SNAPSHOT_HEADER_LEN - 1) /
					    BF_SNAPSHOT_HEADER_LEN * BF_SNAPSHOT_HEADER_LEN;
}

size_t bf_snapshot_header_len(const struct bf_filter *f)
{
	return header_len_for(f->nlayers);
}

/* Where layer i's entry is in a header. */
static size_t layer_off(unsigned i)
{
	return i < HEAD_LAYERS ? OFF_LAYERS + (size_t)i * LAYER_ENTRY
			       : OFF_MORE_LAYERS + (size_t)(i - HEAD_LAYERS) * LAYER_ENTRY;
}

/* The header checksum (version 3 on): its fields, up to sum_off where the checksum is, then the
 * layers past the first 4 KiB. */
static uint64_t header_sum(const unsigned char *h, size_t sum_off, size_t len)
{
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, h, sum_off);
	XXH3_64bits_update(&st, h + OFF_MORE_LAYERS, len - OFF_MORE_LAYERS);
	return XXH3_64bits_digest(&st);
}

void bf_snapshot_header(const struct bf_filter *f, uint64_t generation, uint64_t body_sum,
			unsigned char *h)
{
	uint64_t body_len = bf_filter_bytes(f);
	size_t len = bf_snapshot_header_len(f);

	memset(h, 0, len);
	memcpy(h, magic, sizeof(magic));
	put32(h, OFF_VERSION, BF_SNAPSHOT_VERSION);
	put32(h, OFF_HEADER_LEN, (uint32_t)len);
	put32(h, OFF_TYPE, (uint32_t)f->params->type);
	put32(h, OFF_EXPANSION, f->params->expansion);
	put64(h, OFF_CAPACITY, f->params->capacity);
	putf64(h, OFF_ERROR, f->params->error_rate);
	put64(h, OFF_SEED, f->seed);
	put32(h, OFF_PERSIST, f->params->persist);
	put32(h, OFF_NLAYERS, f->nlayers);
	put64(h, OFF_ITEMS, bf_filter_items(f));
	put64(h, OFF_GENERATION, generation);
	put64(h, OFF_BODY_LEN, body_len);
	put64(h, OFF_BODY_SUM, body_sum);
	uint64_t stats[BF_STATS_WORDS];
	bf_filter_stats_encode(f, stats);
	memcpy(h + OFF_STATS, stats, sizeof(stats));
	put32(h, OFF_NAME_LEN, (uint32_t)f->name_len);
	memcpy(h + OFF_NAME, bf_filter_name(f), f->name_len);
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		unsigned char *e = h + layer_off(i);
		put64(e, 0, l->nblocks);
		put_layer_target(e, f, i);
		put64(e, 16, l->items);
		e[32] = l->b;
		e[33] = l->counting;
	}
	put64(h, OFF_ID, f->id);
	put64(h, OFF_LSN, f->lsn);
	put64(h, OFF_EXPIRE, bf_filter_expire_ms(f));
	putf64(h, OFF_RATIO, f->params->ratio);
	putf64(h, OFF_FIRST, f->params->first);
	put64(h, OFF_HEADER_SUM, header_sum(h, OFF_HEADER_SUM, len));
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

/* Tell pr (if any) that done of total bytes have moved. */
static void io_progress(const struct bf_io_progress *pr, uint64_t done, uint64_t total)
{
	if (pr && pr->fn)
		pr->fn(pr->arg, done, total);
}

/* pwrite_all in steps of BF_IO_STEP, pr told after each (the file's first byte is at 0, so
 * off + the bytes written is how much of total is done). */
static int pwrite_steps(int fd, const unsigned char *p, size_t len, off_t off, uint64_t total,
			const struct bf_io_progress *pr)
{
	while (len) {
		size_t n = len > BF_IO_STEP ? BF_IO_STEP : len;
		int rc = pwrite_all(fd, p, n, off);

		if (rc)
			return rc;
		p += n;
		off += (off_t)n;
		len -= n;
		io_progress(pr, (uint64_t)off, total);
	}
	return 0;
}

/*
 * Write the pieces iov[0..n) one after the other as `filename` in dirfd, crash-safe (see
 * bf_snapshot_write). 0, or a negative errno with *step set.
 */
static int write_atomic(int dirfd, const char *filename, const struct iovec *iov, size_t n,
			const struct bf_io_progress *pr, const char **step)
{
	char tmp[BF_SNAPSHOT_NAME_MAX + sizeof(BF_SNAPSHOT_TMP_SUFFIX)];
	const char *failed = "open";
	uint64_t total = 0;
	off_t off = 0;
	int fd = -1, rc;

	for (size_t i = 0; i < n; i++)
		total += iov[i].iov_len;
	snprintf(tmp, sizeof(tmp), "%s%s", filename, BF_SNAPSHOT_TMP_SUFFIX);
	/* A temp file left by a crash would make O_EXCL fail forever: it is ours to remove. */
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	failed = "fallocate";
	rc = total ? -posix_fallocate(fd, 0, (off_t)total) : 0;
	if (rc)
		goto fail;
	failed = "write";
	for (size_t i = 0; i < n; i++) {
		rc = pwrite_steps(fd, iov[i].iov_base, iov[i].iov_len, off, total, pr);
		if (rc)
			goto fail;
		off += (off_t)iov[i].iov_len;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != total) {
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
		return -errno;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	if (step)
		*step = failed;
	return rc;
}

int bf_file_write(int dirfd, const char *filename, const void *buf, size_t len, const char **step)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return write_atomic(dirfd, filename, &iov, 1, NULL, step);
}

int bf_snapshot_write(const struct bf_filter *f, uint64_t generation, int dirfd,
		      const char *filename, const char **step)
{
	return bf_snapshot_write_progress(f, generation, dirfd, filename, NULL, step);
}

int bf_snapshot_write_progress(const struct bf_filter *f, uint64_t generation, int dirfd,
			       const char *filename, const struct bf_io_progress *pr,
			       const char **step)
{
	size_t hlen = bf_snapshot_header_len(f);
	struct iovec *iov = malloc((1 + f->nlayers) * sizeof(*iov));
	unsigned char *header = malloc(hlen);
	XXH3_state_t st;
	int rc;

	if (!header || !iov) {
		free(header);
		free(iov);
		if (step)
			*step = "open";
		return -ENOMEM;
	}
	XXH3_64bits_reset(&st);
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		XXH3_64bits_update(&st, l->blocks, bf_layer_bytes(l));
		iov[1 + i] = (struct iovec){l->blocks, bf_layer_bytes(l)};
	}
	bf_snapshot_header(f, generation, XXH3_64bits_digest(&st), header);
	iov[0] = (struct iovec){header, hlen};
	rc = write_atomic(dirfd, filename, iov, 1 + f->nlayers, pr, step);
	free(header);
	free(iov);
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

/*
 * A filter's description as both formats carry it (a file's 4 KiB header, a pack's compact
 * entry): check_meta() holds every rule a loaded filter must meet, once, and meta_build() makes
 * the filter from it.
 */
struct snap_meta {
	uint32_t type, expansion, persist, nlayers, name_len;
	uint64_t capacity, seed, items, generation, body_len, id, lsn, expire_ms;
	double error_rate, ratio, first;
	const unsigned char *stats;  /* BF_STATS_WORDS x u64 (bf_filter_stats_encode) */
	const unsigned char *name;   /* name_len bytes */
	const unsigned char *layers; /* nlayers x LAYER_ENTRY (a file header: the first 32) */
	const unsigned char *more;   /* a file header's entries past the first 32, or NULL */
};

/* Layer i's entry. */
static const unsigned char *meta_layer(const struct snap_meta *m, unsigned i)
{
	if (m->more && i >= HEAD_LAYERS)
		return m->more + (size_t)(i - HEAD_LAYERS) * LAYER_ENTRY;
	return m->layers + (size_t)i * LAYER_ENTRY;
}

static int check_meta(const struct snap_meta *m, struct bf_params *p, char *why, size_t whylen)
{
	*p = (struct bf_params){
	    .capacity = m->capacity,
	    .error_rate = m->error_rate,
	    .type = (enum bf_type)m->type,
	    .expansion = m->expansion,
	    .persist = m->persist != 0,
	    .ratio = m->ratio,
	    .first = m->first,
	};
	if (m->persist > 1 || !(m->ratio > 0) || !(m->first > 0) || bf_params_validate(p))
		return reason(why, whylen, -EINVAL, "bad filter parameters");
	if (m->nlayers < 1 || m->nlayers > BF_MAX_LAYERS || (p->expansion == 0 && m->nlayers != 1))
		return reason(why, whylen, -EINVAL, "bad layer count %u", m->nlayers);
	if (!bf_name_valid((const char *)m->name, m->name_len))
		return reason(why, whylen, -EINVAL, "bad filter name");
	if (m->id > BF_ID_MAX)
		return reason(why, whylen, -EINVAL, "filter id %llu out of range",
			      (unsigned long long)m->id);

	/* Each layer must be exactly what the sizing model builds for its place in the chain. */
	uint64_t body = 0, items = 0;
	for (unsigned i = 0; i < m->nlayers; i++) {
		const unsigned char *e = meta_layer(m, i);
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
	if (m->body_len != body || m->items != items)
		return reason(why, whylen, -EINVAL, "body length or item count inconsistent");
	return 0;
}

/* The filter m describes (checked by check_meta into p), its blocks zeroed. */
static int meta_build(const struct snap_meta *m, const struct bf_params *p, uint64_t max_bytes,
		      struct bf_filter **out, char *why, size_t whylen)
{
	int rc;

	if (m->body_len > max_bytes)
		return reason(why, whylen, -ENOMEM, "%llu bytes of layers would pass the limit",
			      (unsigned long long)m->body_len);
	struct bf_filter *f = bf_filter_alloc(m->name_len);
	if (!f)
		return reason(why, whylen, -ENOMEM, "out of memory");
	if (bf_filter_set_params(f, p)) {
		bf_filter_free(f);
		return reason(why, whylen, -ENOMEM, "out of memory");
	}
	f->seed = m->seed;
	f->id = m->id;
	f->lsn = m->lsn;
	uint64_t stats[BF_STATS_WORDS];
	memcpy(stats, m->stats, sizeof(stats));
	if (bf_filter_set_expiry(f, m->expire_ms) || bf_filter_stats_decode(f, stats) ||
	    bf_filter_set_name(f, (const char *)m->name, m->name_len) ||
	    bf_filter_layers_reserve(f, m->nlayers)) {
		bf_filter_free(f);
		return reason(why, whylen, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < m->nlayers; i++) {
		const unsigned char *e = meta_layer(m, i);
		struct bf_layer *l = &bf_filter_layers(f)[i];
		rc = bf_layer_alloc(l, e[33], get64(e, 0), e[32]);
		if (rc) {
			bf_filter_free(f);
			return reason(why, whylen, rc, "cannot allocate layer %u", i);
		}
		f->nlayers++;
		l->items = get64(e, 16);
	}
	*out = f;
	return 0;
}

/*
 * The length a header starting at h (its first BF_SNAPSHOT_HEADER_LEN bytes) says it has: 0 and
 * *hlen set, or an error (bad magic, unknown version, a length no header can have). Its
 * checksum is not checked yet: a reader reads that many bytes, then check_header judges them.
 */
static int header_len_of(const unsigned char *h, size_t *hlen, char *why, size_t whylen)
{
	if (memcmp(h, magic, sizeof(magic)) != 0)
		return reason(why, whylen, -EINVAL, "bad magic");
	uint32_t version = get32(h, OFF_VERSION), len = get32(h, OFF_HEADER_LEN);
	if (version < 1 || version > BF_SNAPSHOT_VERSION)
		return reason(why, whylen, -ENOTSUP,
			      "unknown format version %u (this build reads 1 to %u)", version,
			      BF_SNAPSHOT_VERSION);
	/* Before version 3 every header is 4 KiB; from it, as long as its layers need. */
	if (len % BF_SNAPSHOT_HEADER_LEN || len < BF_SNAPSHOT_HEADER_LEN ||
	    len > (version < 3 ? BF_SNAPSHOT_HEADER_LEN : header_len_for(BF_MAX_LAYERS)))
		return reason(why, whylen, -EINVAL, "bad header length %u", len);
	*hlen = len;
	return 0;
}

/* Check a file header of len bytes (framing: magic, version, length, checksum, padding; then
 * its fields); fill m and p. */
static int check_header(const unsigned char *h, size_t len, struct snap_meta *m,
			struct bf_params *p, char *why, size_t whylen)
{
	size_t hlen;
	int rc = header_len_of(h, &hlen, why, whylen);

	if (rc)
		return rc;
	if (hlen != len)
		return reason(why, whylen, -EINVAL, "header of %zu bytes, not %zu", len, hlen);
	uint32_t version = get32(h, OFF_VERSION);
	/* Version 1 (before the log) ends at the layer table: no id, no LSN; version 2 has no
	 * expiry and halves the error per layer (ratio 0.5); up to version 3 the first layer
	 * has half the error rate (first 0.5). */
	size_t sum_off = version == 1	? OFF_HEADER_SUM_V1
			 : version == 2 ? OFF_HEADER_SUM_V2
			 : version == 3 ? OFF_HEADER_SUM_V3
					: OFF_HEADER_SUM;
	uint64_t sum = version < 3 ? XXH3_64bits(h, sum_off) : header_sum(h, sum_off, len);
	if (get64(h, sum_off) != sum)
		return reason(why, whylen, -EINVAL, "header checksum mismatch");
	/* The checksum covers the fields; the padding after it must be what the writer wrote. */
	for (size_t i = sum_off + 8; i < BF_SNAPSHOT_HEADER_LEN; i++)
		if (h[i])
			return reason(why, whylen, -EINVAL, "header padding not zero at byte %zu",
				      i);

	*m = (struct snap_meta){
	    .type = get32(h, OFF_TYPE),
	    .expansion = get32(h, OFF_EXPANSION),
	    .persist = get32(h, OFF_PERSIST),
	    .nlayers = get32(h, OFF_NLAYERS),
	    .name_len = get32(h, OFF_NAME_LEN),
	    .capacity = get64(h, OFF_CAPACITY),
	    .seed = get64(h, OFF_SEED),
	    .items = get64(h, OFF_ITEMS),
	    .generation = get64(h, OFF_GENERATION),
	    .body_len = get64(h, OFF_BODY_LEN),
	    .id = version >= 2 ? get64(h, OFF_ID) : 0,
	    .lsn = version >= 2 ? get64(h, OFF_LSN) : 0,
	    .expire_ms = version >= 3 ? get64(h, OFF_EXPIRE) : 0,
	    .error_rate = getf64(h, OFF_ERROR),
	    .ratio = version >= 3 ? getf64(h, OFF_RATIO) : 0.5,
	    .first = version >= 4 ? getf64(h, OFF_FIRST) : 0.5,
	    .stats = h + OFF_STATS,
	    .name = h + OFF_NAME,
	    .layers = h + OFF_LAYERS,
	    .more = h + OFF_MORE_LAYERS,
	};
	if (m->name_len > BF_NAME_MAX)
		return reason(why, whylen, -EINVAL, "bad filter name");
	if (m->nlayers > BF_MAX_LAYERS || header_len_for(m->nlayers) != len)
		return reason(why, whylen, -EINVAL, "bad layer count %u", m->nlayers);
	rc = check_meta(m, p, why, whylen);
	if (rc)
		return rc;
	for (unsigned i = m->nlayers; i < HEAD_LAYERS; i++)
		for (unsigned k = 0; k < LAYER_ENTRY; k++)
			if (h[OFF_LAYERS + i * LAYER_ENTRY + k])
				return reason(why, whylen, -EINVAL, "unused layer %u not zero", i);
	for (size_t i = m->nlayers > HEAD_LAYERS ? layer_off(m->nlayers) : len; i < len; i++)
		if (h[i])
			return reason(why, whylen, -EINVAL, "header padding not zero at byte %zu",
				      i);
	for (size_t i = OFF_NAME + m->name_len; i < OFF_LAYERS; i++)
		if (h[i])
			return reason(why, whylen, -EINVAL, "name padding not zero");
	return 0;
}

int bf_snapshot_decode(const unsigned char *h, size_t len, uint64_t max_bytes,
		       struct bf_filter **out, struct bf_snapshot_info *info, char *why,
		       size_t whylen)
{
	struct snap_meta m;
	struct bf_params p;
	int rc;

	if (len < BF_SNAPSHOT_HEADER_LEN)
		return reason(why, whylen, -EINVAL, "header of %zu bytes, shorter than %d", len,
			      BF_SNAPSHOT_HEADER_LEN);
	rc = check_header(h, len, &m, &p, why, whylen);
	if (rc)
		return rc;
	rc = meta_build(&m, &p, max_bytes, out, why, whylen);
	if (rc)
		return rc;
	info->generation = m.generation;
	info->body_len = m.body_len;
	info->body_sum = get64(h, OFF_BODY_SUM);
	return 0;
}

/*
 * Read the header of the file open as fd, size bytes long, into a buffer of its own (*out,
 * *outlen bytes: BF_SNAPSHOT_HEADER_LEN, or more for a long chain's layer table). 0, or a
 * negative errno with why set and nothing allocated.
 */
static int snap_read_header(int fd, uint64_t size, unsigned char **out, size_t *outlen, char *why,
			    size_t whylen)
{
	unsigned char *h;
	size_t hlen;
	int rc;

	if (size < BF_SNAPSHOT_HEADER_LEN)
		return reason(why, whylen, -EINVAL,
			      "truncated: %llu bytes, shorter than the header",
			      (unsigned long long)size);
	h = malloc(BF_SNAPSHOT_HEADER_LEN);
	if (!h)
		return reason(why, whylen, -ENOMEM, "out of memory");
	rc = pread_all(fd, h, BF_SNAPSHOT_HEADER_LEN, 0);
	if (rc) {
		reason(why, whylen, rc, "cannot read the header: %s", strerror(-rc));
		goto fail;
	}
	/* A long chain's layer table goes on past the first 4 KiB. */
	rc = header_len_of(h, &hlen, why, whylen);
	if (rc)
		goto fail;
	if (hlen > BF_SNAPSHOT_HEADER_LEN) {
		unsigned char *bigger = size < hlen ? NULL : realloc(h, hlen);

		if (!bigger) {
			rc = reason(why, whylen, -EINVAL,
				    "truncated: %llu bytes, shorter than the header",
				    (unsigned long long)size);
			goto fail;
		}
		h = bigger;
		rc = pread_all(fd, h + BF_SNAPSHOT_HEADER_LEN, hlen - BF_SNAPSHOT_HEADER_LEN,
			       BF_SNAPSHOT_HEADER_LEN);
		if (rc) {
			reason(why, whylen, rc, "cannot read the header: %s", strerror(-rc));
			goto fail;
		}
	}
	*out = h;
	*outlen = hlen;
	return 0;
fail:
	free(h);
	return rc;
}

/* Read f's layers from fd, from offset hlen on, and check them against the header's body
 * checksum. 0, or a negative errno with why set. */
static int snap_read_body(int fd, struct bf_filter *f, size_t hlen, uint64_t body_sum,
			  uint64_t total, const struct bf_io_progress *pr, char *why, size_t whylen)
{
	XXH3_state_t st;
	off_t off = (off_t)hlen;
	int rc;

	XXH3_64bits_reset(&st);
	for (unsigned i = 0; i < f->nlayers; i++) {
		struct bf_layer *l = &bf_filter_layers(f)[i];
		unsigned char *p = (unsigned char *)l->blocks;

		/* In steps, so that pr hears of a large layer as it goes. */
		for (size_t left = bf_layer_bytes(l), n; left; left -= n, p += n) {
			n = left > BF_IO_STEP ? BF_IO_STEP : left;
			rc = pread_all(fd, p, n, off);
			if (rc)
				return reason(why, whylen, rc, "cannot read layer %u: %s", i,
					      strerror(-rc));
			XXH3_64bits_update(&st, p, n);
			off += (off_t)n;
			io_progress(pr, (uint64_t)off, total);
		}
	}
	if (XXH3_64bits_digest(&st) != body_sum)
		return reason(why, whylen, -EINVAL, "body checksum mismatch");
	return 0;
}

int bf_snapshot_read(int dirfd, const char *filename, struct bf_filter **out, uint64_t *generation,
		     char *why, size_t whylen)
{
	return bf_snapshot_read_progress(dirfd, filename, out, generation, NULL, why, whylen);
}

int bf_snapshot_read_progress(int dirfd, const char *filename, struct bf_filter **out,
			      uint64_t *generation, const struct bf_io_progress *pr, char *why,
			      size_t whylen)
{
	unsigned char *h = NULL;
	struct bf_filter *f = NULL;
	struct bf_snapshot_info info;
	size_t hlen = 0;
	int rc;

	int fd = openat(dirfd, filename, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return reason(why, whylen, -errno, "cannot open: %s", strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		rc = reason(why, whylen, -errno, "cannot stat: %s", strerror(errno));
		goto fail;
	}
	rc = snap_read_header(fd, (uint64_t)sb.st_size, &h, &hlen, why, whylen);
	if (rc)
		goto fail;
	/* The header's own checks first; the file's length is checked before any allocation. */
	struct snap_meta m;
	struct bf_params p;
	rc = check_header(h, hlen, &m, &p, why, whylen);
	if (rc)
		goto fail;
	uint64_t want = hlen + get64(h, OFF_BODY_LEN);
	if ((uint64_t)sb.st_size != want) {
		rc = reason(why, whylen, -EINVAL, "%s: %llu of %llu bytes",
			    (uint64_t)sb.st_size < want ? "truncated" : "too long",
			    (unsigned long long)sb.st_size, (unsigned long long)want);
		goto fail;
	}
	rc = bf_snapshot_decode(h, hlen, UINT64_MAX, &f, &info, why, whylen);
	if (!rc)
		rc = snap_read_body(fd, f, hlen, info.body_sum, want, pr, why, whylen);
	if (rc)
		goto fail;
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

/* ---------------------------------------------------------------------------------------- */
/* Packed entries and pack files (see bf_snapshot.h) */

static const char pack_magic[8] = "BLOSPAK";

enum {
	/* An entry's fixed part. */
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
	E_EXPIRE = E_STATS + 72, /* pack version 2 on */
	E_RATIO = E_EXPIRE + 8,	 /* pack version 2 on */
	E_FIRST = E_RATIO + 8,	 /* pack version 3 on */
	E_NAME_V1 = E_EXPIRE,
	E_NAME_V2 = E_FIRST,
	E_NAME = E_FIRST + 8,
	/* A pack file's header; the index follows. */
	P_VERSION = 8,
	P_COUNT = 12,
	P_LEN = 16,
	P_SUM = 24,
	P_INDEX = 32,
	P_INDEX_ENTRY = 16,
};

_Static_assert(E_STATS + BF_STATS_WORDS * 8 == E_EXPIRE, "stats are 9 x u64");

/* Where an entry of a pack of this version has its name. */
static size_t e_name(uint32_t version)
{
	return version >= 3 ? E_NAME : version == 2 ? E_NAME_V2 : E_NAME_V1;
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

size_t bf_snapshot_entry_size(const struct bf_filter *f)
{
	return E_NAME + pad8(f->name_len) + (size_t)f->nlayers * LAYER_ENTRY + bf_filter_bytes(f) +
	       8;
}

void bf_snapshot_entry_encode(const struct bf_filter *f, uint64_t generation, unsigned char *out)
{
	size_t len = bf_snapshot_entry_size(f);
	unsigned char *p;

	memset(out, 0, E_NAME + pad8(f->name_len) + (size_t)f->nlayers * LAYER_ENTRY);
	put32(out, E_LEN, (uint32_t)len);
	put32(out, E_TYPE, (uint32_t)f->params->type);
	put32(out, E_EXPANSION, f->params->expansion);
	put32(out, E_PERSIST, f->params->persist);
	put32(out, E_NLAYERS, f->nlayers);
	put32(out, E_NAME_LEN, (uint32_t)f->name_len);
	put64(out, E_CAPACITY, f->params->capacity);
	putf64(out, E_ERROR, f->params->error_rate);
	put64(out, E_SEED, f->seed);
	put64(out, E_ITEMS, bf_filter_items(f));
	put64(out, E_GENERATION, generation);
	put64(out, E_ID, f->id);
	put64(out, E_LSN, f->lsn);
	put64(out, E_BODY_LEN, bf_filter_bytes(f));
	uint64_t stats[BF_STATS_WORDS];
	bf_filter_stats_encode(f, stats);
	memcpy(out + E_STATS, stats, sizeof(stats));
	put64(out, E_EXPIRE, bf_filter_expire_ms(f));
	putf64(out, E_RATIO, f->params->ratio);
	putf64(out, E_FIRST, f->params->first);
	memcpy(out + E_NAME, bf_filter_name(f), f->name_len);
	p = out + E_NAME + pad8(f->name_len);
	for (unsigned i = 0; i < f->nlayers; i++, p += LAYER_ENTRY) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		put64(p, 0, l->nblocks);
		put_layer_target(p, f, i);
		put64(p, 16, l->items);
		p[32] = l->b;
		p[33] = l->counting;
	}
	for (unsigned i = 0; i < f->nlayers; i++) {
		memcpy(p, bf_filter_layers(f)[i].blocks, bf_layer_bytes(&bf_filter_layers(f)[i]));
		p += bf_layer_bytes(&bf_filter_layers(f)[i]);
	}
	put64(out, len - 8, XXH3_64bits(out, len - 8));
}

/* The fixed part and the name of an entry of len bytes in a pack of this version, framing
 * checked; no checksum. */
static int entry_meta(const unsigned char *e, size_t len, uint32_t version, struct snap_meta *m,
		      char *why, size_t whylen)
{
	size_t at = e_name(version);

	if (len < at + 8 || len % 8 || get32(e, E_LEN) != len)
		return reason(why, whylen, -EINVAL, "bad entry length");
	*m = (struct snap_meta){
	    .type = get32(e, E_TYPE),
	    .expansion = get32(e, E_EXPANSION),
	    .persist = get32(e, E_PERSIST),
	    .nlayers = get32(e, E_NLAYERS),
	    .name_len = get32(e, E_NAME_LEN),
	    .capacity = get64(e, E_CAPACITY),
	    .seed = get64(e, E_SEED),
	    .items = get64(e, E_ITEMS),
	    .generation = get64(e, E_GENERATION),
	    .body_len = get64(e, E_BODY_LEN),
	    .id = get64(e, E_ID),
	    .lsn = get64(e, E_LSN),
	    .expire_ms = version >= 2 ? get64(e, E_EXPIRE) : 0,
	    .error_rate = getf64(e, E_ERROR),
	    .ratio = version >= 2 ? getf64(e, E_RATIO) : 0.5,
	    .first = version >= 3 ? getf64(e, E_FIRST) : 0.5,
	    .stats = e + E_STATS,
	    .name = e + at,
	};
	if (m->name_len > BF_NAME_MAX || m->nlayers > BF_MAX_LAYERS || m->body_len > len ||
	    at + pad8(m->name_len) + (uint64_t)m->nlayers * LAYER_ENTRY + m->body_len + 8 != len)
		return reason(why, whylen, -EINVAL, "entry fields do not add up to its length");
	m->layers = e + at + pad8(m->name_len);
	return 0;
}

/* bf_snapshot_entry_decode of an entry of a pack of this version. */
static int entry_decode(const unsigned char *e, size_t len, uint32_t version, uint64_t max_bytes,
			struct bf_filter **out, uint64_t *generation, char *why, size_t whylen)
{
	size_t at = e_name(version);
	struct snap_meta m;
	struct bf_params p;
	struct bf_filter *f;
	int rc;

	rc = entry_meta(e, len, version, &m, why, whylen);
	if (rc)
		return rc;
	if (get64(e, len - 8) != XXH3_64bits(e, len - 8))
		return reason(why, whylen, -EINVAL, "checksum mismatch");
	for (size_t i = at + m.name_len; i < at + pad8(m.name_len); i++)
		if (e[i])
			return reason(why, whylen, -EINVAL, "name padding not zero");
	rc = check_meta(&m, &p, why, whylen);
	if (rc)
		return rc;
	rc = meta_build(&m, &p, max_bytes, &f, why, whylen);
	if (rc)
		return rc;
	const unsigned char *body = m.layers + (size_t)m.nlayers * LAYER_ENTRY;
	for (unsigned i = 0; i < f->nlayers; i++) {
		memcpy(bf_filter_layers(f)[i].blocks, body,
		       bf_layer_bytes(&bf_filter_layers(f)[i]));
		body += bf_layer_bytes(&bf_filter_layers(f)[i]);
	}
	*generation = m.generation;
	*out = f;
	return 0;
}

int bf_snapshot_entry_decode(const unsigned char *e, size_t len, uint64_t max_bytes,
			     struct bf_filter **out, uint64_t *generation, char *why, size_t whylen)
{
	return entry_decode(e, len, BF_PACK_VERSION, max_bytes, out, generation, why, whylen);
}

bool bf_snapshot_entry_name(const unsigned char *e, size_t len, const char **name, size_t *name_len)
{
	struct snap_meta m;

	if (entry_meta(e, len, BF_PACK_VERSION, &m, NULL, 0) ||
	    !bf_name_valid((const char *)m.name, m.name_len))
		return false;
	*name = (const char *)m.name;
	*name_len = m.name_len;
	return true;
}

int bf_pack_write(int dirfd, const char *filename, const unsigned char *entries,
		  const uint64_t *ends, uint32_t count, const char **step)
{
	return bf_pack_write_progress(dirfd, filename, entries, ends, count, NULL, step);
}

int bf_pack_write_progress(int dirfd, const char *filename, const unsigned char *entries,
			   const uint64_t *ends, uint32_t count, const struct bf_io_progress *pr,
			   const char **step)
{
	size_t hlen = P_INDEX + (size_t)count * P_INDEX_ENTRY;
	uint64_t len = count ? ends[count - 1] : 0;
	unsigned char *h = malloc(hlen);
	struct iovec iov[2];
	int rc;

	if (!h) {
		if (step)
			*step = "open";
		return -ENOMEM;
	}
	memcpy(h, pack_magic, sizeof(pack_magic));
	put32(h, P_VERSION, BF_PACK_VERSION);
	put32(h, P_COUNT, count);
	put64(h, P_LEN, hlen + len);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t start = i ? ends[i - 1] : 0;
		put64(h, P_INDEX + i * P_INDEX_ENTRY, hlen + start);
		put64(h, P_INDEX + i * P_INDEX_ENTRY + 8, ends[i] - start);
	}
	put64(h, P_SUM, 0);
	put64(h, P_SUM, XXH3_64bits(h, hlen));
	iov[0] = (struct iovec){h, hlen};
	iov[1] = (struct iovec){(void *)entries, len};
	rc = write_atomic(dirfd, filename, iov, len ? 2 : 1, pr, step);
	free(h);
	return rc;
}

/*
 * Check the pack of pk->len bytes read into pk->buf: magic, version (set in pk->version), entry
 * count (pk->count), length, index checksum, and entries back to back exactly filling the file
 * after the index. 0, or -EINVAL (-ENOTSUP for an unknown version) with why set.
 */
static int pack_check(struct bf_pack *pk, char *why, size_t whylen)
{
	uint64_t sum;
	int rc;

	rc = -EINVAL;
	if (memcmp(pk->buf, pack_magic, sizeof(pack_magic)) != 0) {
		reason(why, whylen, rc, "bad magic");
		return rc;
	}
	pk->version = get32(pk->buf, P_VERSION);
	if (pk->version < 1 || pk->version > BF_PACK_VERSION) {
		rc = reason(why, whylen, -ENOTSUP,
			    "unknown pack version %u (this build reads 1 to %u)", pk->version,
			    BF_PACK_VERSION);
		return rc;
	}
	pk->count = get32(pk->buf, P_COUNT);
	size_t hlen = P_INDEX + (size_t)pk->count * P_INDEX_ENTRY;
	if (hlen > pk->len) {
		reason(why, whylen, rc, "truncated: index of %zu bytes in a file of %zu", hlen,
		       pk->len);
		return rc;
	}
	if (get64(pk->buf, P_LEN) != pk->len) {
		reason(why, whylen, rc, "%s: %zu of %llu bytes",
		       pk->len < get64(pk->buf, P_LEN) ? "truncated" : "too long", pk->len,
		       (unsigned long long)get64(pk->buf, P_LEN));
		return rc;
	}
	sum = get64(pk->buf, P_SUM);
	put64(pk->buf, P_SUM, 0);
	if (sum != XXH3_64bits(pk->buf, hlen)) {
		reason(why, whylen, rc, "index checksum mismatch");
		return rc;
	}
	/* Entries in order, back to back, exactly filling the file after the index. */
	uint64_t at = hlen;
	for (uint32_t i = 0; i < pk->count; i++) {
		if (get64(pk->buf, P_INDEX + i * P_INDEX_ENTRY) != at) {
			reason(why, whylen, rc, "index entry %u: bad offset", i);
			return rc;
		}
		uint64_t elen = get64(pk->buf, P_INDEX + i * P_INDEX_ENTRY + 8);
		if (elen > pk->len - at) {
			reason(why, whylen, rc, "index entry %u: past the end", i);
			return rc;
		}
		at += elen;
	}
	if (at != pk->len) {
		reason(why, whylen, rc, "index does not cover the file");
		return rc;
	}
	return 0;
}

/* bf_pack_open into pk's buffer if it has room. On failure pk holds no pack, its buffer kept. */
static int pack_read(int dirfd, const char *filename, struct bf_pack *pk, char *why, size_t whylen)
{
	struct stat sb;
	int rc;

	pk->len = 0;
	pk->count = pk->version = 0;
	int fd = openat(dirfd, filename, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return reason(why, whylen, -errno, "cannot open: %s", strerror(errno));
	if (fstat(fd, &sb) < 0) {
		rc = reason(why, whylen, -errno, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)sb.st_size < P_INDEX) {
		rc = reason(why, whylen, -EINVAL, "truncated: %llu bytes, shorter than the header",
			    (unsigned long long)sb.st_size);
		goto out;
	}
	if ((uint64_t)sb.st_size > pk->cap) {
		free(pk->buf);
		pk->cap = 0;
		pk->buf = malloc((size_t)sb.st_size);
		if (!pk->buf) {
			rc = reason(why, whylen, -ENOMEM, "out of memory");
			goto out;
		}
		pk->cap = (size_t)sb.st_size;
	}
	pk->len = (size_t)sb.st_size;
	rc = pread_all(fd, pk->buf, pk->len, 0);
	if (rc) {
		reason(why, whylen, rc, "cannot read: %s", strerror(-rc));
		goto out;
	}
	rc = pack_check(pk, why, whylen);
out:
	close(fd);
	if (rc) {
		pk->len = 0;
		pk->count = pk->version = 0;
	}
	return rc;
}

int bf_pack_open(int dirfd, const char *filename, struct bf_pack *pk, char *why, size_t whylen)
{
	memset(pk, 0, sizeof(*pk));
	int rc = pack_read(dirfd, filename, pk, why, whylen);

	if (rc)
		bf_pack_close(pk);
	return rc;
}

int bf_pack_reopen(int dirfd, const char *filename, struct bf_pack *pk, char *why, size_t whylen)
{
	return pack_read(dirfd, filename, pk, why, whylen);
}

int bf_pack_entry(const struct bf_pack *pk, uint32_t i, uint64_t max_bytes, struct bf_filter **out,
		  uint64_t *generation, char *why, size_t whylen)
{
	const unsigned char *e;
	size_t len;

	bf_pack_entry_bytes(pk, i, &e, &len);
	return entry_decode(e, len, pk->version, max_bytes, out, generation, why, whylen);
}

void bf_pack_entry_bytes(const struct bf_pack *pk, uint32_t i, const unsigned char **e, size_t *len)
{
	*e = pk->buf + get64(pk->buf, P_INDEX + i * P_INDEX_ENTRY);
	*len = (size_t)get64(pk->buf, P_INDEX + i * P_INDEX_ENTRY + 8);
}

bool bf_pack_entry_peek(const struct bf_pack *pk, uint32_t i, uint64_t *id, const char **name,
			size_t *name_len)
{
	const unsigned char *e;
	size_t len, at = e_name(pk->version);

	bf_pack_entry_bytes(pk, i, &e, &len);
	if (len < at || get32(e, E_NAME_LEN) > len - at)
		return false;
	*id = get64(e, E_ID);
	*name = (const char *)e + at;
	*name_len = get32(e, E_NAME_LEN);
	return true;
}

void bf_pack_close(struct bf_pack *pk)
{
	free(pk->buf);
	memset(pk, 0, sizeof(*pk));
}
