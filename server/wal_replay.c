/* SPDX-License-Identifier: MIT */
/*
 * Reading the write-ahead log back at a start (wal_replay(), see wal.h): the record of where
 * the log starts checked against the segments present, every record verified and handed over
 * in LSN order, a torn tail cut, damage refused or cut as asked, and the end of the log opened
 * for appends.
 */
#include "server/wal_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Replay reads segments in chunks of this many bytes (grown for a longer record). */
#define WAL_READ_CHUNK (4u << 20)

/* Buffered sequential reader over one segment. */
struct reader {
	int fd;
	uint64_t size;
	uint8_t *buf;
	size_t cap;
	uint64_t boff; /* file offset of buf[0] */
	size_t blen;
};

/* Point *p at file bytes [off, off + n), reading ahead as far as the buffer allows. */
static int reader_need(struct reader *r, uint64_t off, size_t n, const uint8_t **p)
{
	if (off >= r->boff && off + n <= r->boff + r->blen) {
		*p = r->buf + (off - r->boff);
		return 0;
	}
	size_t keep = 0;
	if (off >= r->boff && off < r->boff + r->blen) {
		keep = (size_t)(r->boff + r->blen - off);
		memmove(r->buf, r->buf + (off - r->boff), keep);
	}
	r->boff = off;
	r->blen = keep;
	if (n > r->cap) {
		size_t ncap = r->cap * 2 > n ? r->cap * 2 : n;
		uint8_t *nb = realloc(r->buf, ncap);
		if (!nb)
			return -ENOMEM;
		r->buf = nb;
		r->cap = ncap;
	}
	while (r->blen < n) {
		uint64_t left = r->size - (r->boff + r->blen);
		size_t want = r->cap - r->blen;
		if (want > left)
			want = (size_t)left;
		if (!want)
			return -EIO; /* the file shrank under us */
		ssize_t k = pread(r->fd, r->buf + r->blen, want, (off_t)(r->boff + r->blen));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		r->blen += (size_t)k;
	}
	*p = r->buf;
	return 0;
}

/* The checks every record passes, on bytes known to hold the whole of it. */
static bool record_ok(const uint8_t *p, size_t avail, uint64_t min_lsn)
{
	if (avail < WAL_RECORD_OVERHEAD || p[4] == 0 || p[5] || p[6] || p[7])
		return false;
	uint32_t len = get32(p);
	if (len > WAL_MAX_PAYLOAD || WAL_RECORD_OVERHEAD + (uint64_t)len > avail)
		return false;
	if (get64(p + 8) < min_lsn)
		return false;
	return XXH3_64bits(p, WAL_HEADER_BYTES + len) == get64(p + WAL_HEADER_BYTES + len);
}

/*
 * Does a valid record start anywhere in [from, size) of this segment? If so, the bad record
 * before it is not a torn tail but damage in the middle of the log. Only runs on the error
 * path; the cheap header tests reject almost every offset before a checksum is tried.
 */
static int valid_record_after(int fd, uint64_t size, uint64_t from, uint64_t min_lsn, bool *found)
{
	*found = false;
	if (from + WAL_RECORD_OVERHEAD > size)
		return 0;
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	const uint8_t *base = m;
	for (uint64_t o = from; o + WAL_RECORD_OVERHEAD <= size; o++) {
		if (record_ok(base + o, (size_t)(size - o), min_lsn)) {
			*found = true;
			break;
		}
	}
	munmap(m, (size_t)size);
	return 0;
}

/* Is every byte of [from, size) of this segment zero? */
static int all_zero_after(int fd, uint64_t size, uint64_t from, bool *zero)
{
	*zero = true;
	if (from >= size)
		return 0;
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	const uint8_t *p = (const uint8_t *)m + from;
	uint64_t n = size - from;
	/* First the bytes up to an 8-byte boundary, then whole words. */
	for (; n && ((uintptr_t)p & 7); p++, n--)
		if (*p) {
			*zero = false;
			break;
		}
	for (; *zero && n >= 8; p += 8, n -= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		if (v)
			*zero = false;
	}
	for (; *zero && n; p++, n--)
		if (*p)
			*zero = false;
	munmap(m, (size_t)size);
	return 0;
}

static int truncate_file(struct wal *w, const char *name, uint64_t len)
{
	int fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = 0;
	if (ftruncate(fd, (off_t)len) != 0)
		err = -errno;
	else if (w->fdatasync_fn(fd) != 0)
		err = errno ? -errno : -EIO;
	close(fd);
	return err;
}

/*
 * The segments wholly before the recorded start (the next one begins at or below it) are what
 * a release deleted after recording the start: the delete had not reached the disk when the
 * power went, so they are back. Nothing in them is needed, and they need not even be readable
 * (one may hold a hole its writer never synced): deleted again, unread, and the directory
 * synced. 0, or -errno with why.
 */
static int drop_before_start(struct wal *w, uint64_t start, char *why, size_t whylen)
{
	char name[WAL_SEGMENT_NAME_MAX];
	size_t n = 0;

	while (n + 1 < w->nsegs && w->segs[n + 1].first <= start)
		n++;
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		wal_segment_name(w->segs[i].first, name);
		if (unlinkat(w->dirfd, name, 0) != 0 && errno != ENOENT) {
			int err = -errno;
			set_why(why, whylen, "segment %s (before the log's start): unlink: %s",
				name, strerror(-err));
			return err;
		}
	}
	memmove(w->segs, w->segs + n, (w->nsegs - n) * sizeof(*w->segs));
	w->nsegs -= n;
	if (fsync(w->dirfd) != 0) {
		int err = -errno;
		set_why(why, whylen, "fsync %s: %s", w->dir, strerror(-err));
		return err;
	}
	return 0;
}

/*
 * Before the replay: are segments missing at the start of the log? The recorded start against
 * the first segment present (none present: the log was emptied, since a release always keeps
 * the newest segment). 0, with a warning in why if the operator accepts the loss or the log has
 * no record of its start yet (one is written); -ENOENT with why naming what is missing; or the
 * -errno of reading or writing the record.
 */
static int check_start(struct wal *w, char *why, size_t whylen)
{
	uint64_t start = 0, first = w->nsegs ? w->segs[0].first : 0;
	int err = wal_start_read(w->dirfd, &start);

	if (err == -ENOENT) {
		/* A new log, or one kept before the record was: it starts where it starts. */
		if (w->nsegs && first > 1)
			set_why(
			    why, whylen,
			    "no record of where the log starts (%s/%s): taken to be LSN %" PRIu64
			    ", its first segment's",
			    w->dir, WAL_START_FILE, first);
		err = wal_start_write(w->dirfd, w->nsegs ? first : 1);
		if (err)
			set_why(why, whylen, "write %s/%s: %s", w->dir, WAL_START_FILE,
				strerror(-err));
		return err;
	}
	if (err) {
		set_why(why, whylen, "read %s/%s: %s", w->dir, WAL_START_FILE,
			err == -EBADMSG ? "not an LSN" : strerror(-err));
		return err;
	}
	if (w->nsegs && first <= start)
		return drop_before_start(w, start, why, whylen);
	char lost[224];
	if (w->nsegs)
		snprintf(lost, sizeof(lost),
			 "the segments holding LSNs %" PRIu64 " to %" PRIu64
			 " are missing (the log starts at LSN %" PRIu64
			 ", its first segment left at %" PRIu64 ")",
			 start, first - 1, start, first);
	else
		snprintf(lost, sizeof(lost),
			 "every segment is missing (the log starts at LSN %" PRIu64 ")", start);
	if (!w->accept_missing) {
		set_why(why, whylen,
			"%s: the changes they held since the last checkpoint would be lost", lost);
		return -ENOENT;
	}
	set_why(why, whylen, "%s: going on without them, as asked; the changes they held are lost",
		lost);
	return wal_start_write(w->dirfd, w->nsegs ? first : start);
}

int wal_replay(struct wal *w, uint64_t from_lsn, bool truncate_corrupt, wal_replay_fn fn, void *arg,
	       struct wal_replay_stats *st, char *why, size_t whylen)
{
	struct wal_replay_stats local;
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	set_why(why, whylen, "%s", "");
	if (w->ready || w->closing || w->fd >= 0) {
		set_why(why, whylen, "the log was already replayed");
		return -EINVAL;
	}
	uint64_t t0 = uv_hrtime();
	if (from_lsn == 0)
		from_lsn = 1;
	char name[WAL_SEGMENT_NAME_MAX];
	char warned[256] = "";
	int err = check_start(w, warned, sizeof(warned));
	if (err) {
		set_why(why, whylen, "%s", warned);
		return err;
	}
	struct reader r = {.fd = -1, .cap = WAL_READ_CHUNK};
	r.buf = malloc(r.cap);
	if (!r.buf)
		return -ENOMEM;

	/* The first segment to read: the last one starting at or below from_lsn. */
	size_t start = 0;
	while (start + 1 < w->nsegs && w->segs[start + 1].first <= from_lsn)
		start++;
	st->segments_skipped = start;
	uint64_t expected = w->nsegs ? w->segs[start].first : 1;

	for (size_t j = start; j < w->nsegs; j++) {
		wal_segment_name(w->segs[j].first, name);
		bool last = j + 1 == w->nsegs;
		const char *reason = NULL;
		char rbuf[128];
		bool torn = false;
		uint64_t off = 0;

		r.fd = openat(w->dirfd, name, O_RDONLY | O_CLOEXEC);
		if (r.fd < 0) {
			err = -errno;
			set_why(why, whylen, "segment %s: open: %s", name, strerror(errno));
			goto fail;
		}
		struct stat stb;
		if (fstat(r.fd, &stb) != 0) {
			err = -errno;
			set_why(why, whylen, "segment %s: stat: %s", name, strerror(errno));
			goto fail;
		}
		r.size = (uint64_t)stb.st_size;
		r.boff = 0;
		r.blen = 0;
		posix_fadvise(r.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		st->segments_read++;

		bool gap = w->segs[j].first != expected;
		if (gap) {
			snprintf(rbuf, sizeof(rbuf),
				 "segment starts at LSN %" PRIu64
				 ", the log left off before LSN %" PRIu64,
				 w->segs[j].first, expected);
			reason = rbuf;
		}
		while (!reason && off < r.size) {
			uint64_t left = r.size - off;
			const uint8_t *p;
			if (left < WAL_HEADER_BYTES) {
				snprintf(rbuf, sizeof(rbuf),
					 "torn record header (%" PRIu64 " bytes)", left);
				reason = rbuf;
				torn = true;
				break;
			}
			err = reader_need(&r, off, WAL_HEADER_BYTES, &p);
			if (err)
				goto read_fail;
			uint32_t len = get32(p);
			uint64_t lsn = get64(p + 8);
			unsigned type = p[4];
			if (type == 0 || p[5] || p[6] || p[7]) {
				reason = "bad record header (type 0 or padding not zero)";
				break;
			}
			if (len > WAL_MAX_PAYLOAD) {
				snprintf(rbuf, sizeof(rbuf), "bad length %" PRIu32, len);
				reason = rbuf;
				break;
			}
			uint64_t rec = WAL_RECORD_OVERHEAD + (uint64_t)len;
			if (rec > left) {
				snprintf(rbuf, sizeof(rbuf),
					 "torn record (length %" PRIu32 ", %" PRIu64 " bytes left)",
					 len, left);
				reason = rbuf;
				torn = true;
				break;
			}
			err = reader_need(&r, off, (size_t)rec, &p);
			if (err)
				goto read_fail;
			if (XXH3_64bits(p, WAL_HEADER_BYTES + len) !=
			    get64(p + WAL_HEADER_BYTES + len)) {
				reason = "checksum mismatch";
				break;
			}
			if (lsn != expected) {
				snprintf(rbuf, sizeof(rbuf), "LSN %" PRIu64 ", expected %" PRIu64,
					 lsn, expected);
				reason = rbuf;
				break;
			}
			if (!st->first_lsn)
				st->first_lsn = lsn;
			if (lsn >= from_lsn) {
				int cr = fn(arg, lsn, type, p + WAL_HEADER_BYTES, len);
				if (cr) {
					err = cr < 0 ? cr : -EINVAL;
					set_why(why, whylen,
						"segment %s, offset %" PRIu64
						": replay stopped at LSN %" PRIu64 " (%s)",
						name, off, lsn, strerror(-err));
					goto fail;
				}
				st->delivered++;
			}
			st->records++;
			st->bytes += rec;
			expected++;
			off += rec;
		}
		/* Only zeros from here on: the segment's end (preallocated). */
		if (reason && !gap) {
			bool zero;
			err = all_zero_after(r.fd, r.size, off, &zero);
			if (err) {
				set_why(why, whylen, "segment %s: mmap: %s", name, strerror(-err));
				goto fail;
			}
			if (zero)
				reason = NULL;
		}
		if (!reason) {
			w->segs[j].bytes = off;
			close(r.fd);
			r.fd = -1;
			continue;
		}

		/* A bad spot at (j, off). Only the last segment can end in a torn write. */
		bool tail = false;
		if (last && !gap) {
			if (torn) {
				tail = true;
			} else {
				bool found;
				err = valid_record_after(r.fd, r.size, off + 1, expected, &found);
				if (err) {
					set_why(why, whylen, "segment %s: mmap: %s", name,
						strerror(-err));
					goto fail;
				}
				tail = !found;
			}
		}
		close(r.fd);
		r.fd = -1;
		if (tail) {
			err = truncate_file(w, name, off);
			if (err) {
				set_why(why, whylen,
					"segment %s: truncate the torn tail at %" PRIu64 ": %s",
					name, off, strerror(-err));
				goto fail;
			}
			st->tail_truncated = r.size - off;
			w->segs[j].bytes = off;
			set_why(why, whylen,
				"segment %s, offset %" PRIu64 ": %s; cut %" PRIu64
				" bytes of an unacknowledged torn tail",
				name, off, reason, r.size - off);
			break;
		}
		if (!truncate_corrupt) {
			set_why(why, whylen, "segment %s, offset %" PRIu64 ": %s", name, off,
				reason);
			err = -EBADMSG;
			goto fail;
		}
		/* The operator asked to cut here: drop the later segments, newest first, so a crash
		 * midway leaves a shorter but consistent log. */
		uint64_t dropped = 0, dbytes = 0;
		for (size_t k = w->nsegs; k-- > j + 1;) {
			char kname[WAL_SEGMENT_NAME_MAX];
			wal_segment_name(w->segs[k].first, kname);
			if (unlinkat(w->dirfd, kname, 0) != 0 && errno != ENOENT) {
				err = -errno;
				set_why(why, whylen, "segment %s: unlink: %s", kname,
					strerror(errno));
				goto fail;
			}
			dropped++;
			dbytes += w->segs[k].bytes;
			w->nsegs--;
		}
		if (gap) {
			/* The segment does not continue the log: it goes too (never the first one
			 * read, whose start defines where the log begins). */
			if (unlinkat(w->dirfd, name, 0) != 0 && errno != ENOENT) {
				err = -errno;
				set_why(why, whylen, "segment %s: unlink: %s", name,
					strerror(errno));
				goto fail;
			}
			dropped++;
			dbytes += r.size;
			w->nsegs--;
		} else {
			err = truncate_file(w, name, off);
			if (err) {
				set_why(why, whylen, "segment %s: truncate at %" PRIu64 ": %s",
					name, off, strerror(-err));
				goto fail;
			}
			st->corrupt_truncated = r.size - off;
			w->segs[j].bytes = off;
		}
		if (fsync(w->dirfd) != 0) {
			err = -errno;
			set_why(why, whylen, "fsync %s: %s", w->dir, strerror(errno));
			goto fail;
		}
		st->dropped_segments = dropped;
		st->dropped_bytes = dbytes;
		set_why(why, whylen,
			"segment %s, offset %" PRIu64 ": %s; truncated there as asked, %" PRIu64
			" bytes cut, %" PRIu64 " later segments (%" PRIu64 " bytes) deleted",
			name, off, reason, st->corrupt_truncated, dropped, dbytes);
		break;
	}

	/* Open the end of the log for appends, and make what was replayed durable. */
	if (w->nsegs == 0) {
		err = wal_create_segment(w->dirfd, expected, &w->fd);
		if (err) {
			set_why(why, whylen, "create the first segment in %s: %s", w->dir,
				strerror(-err));
			goto fail;
		}
		err = wal_seg_push(w, expected, 0);
		if (err)
			goto fail;
		w->seg_size = 0;
	} else {
		struct wal_seg *cur = &w->segs[w->nsegs - 1];
		wal_segment_name(cur->first, name);
		w->fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
		if (w->fd < 0) {
			err = -errno;
			set_why(why, whylen, "segment %s: open for appending: %s", name,
				strerror(errno));
			goto fail;
		}
		struct stat stb;
		if (fstat(w->fd, &stb) != 0) {
			err = -errno;
			goto fail;
		}
		/* The replay set bytes to where its records end (zeros may follow). */
		w->seg_size = cur->bytes;
		w->seg_alloc = (uint64_t)stb.st_size;
		if (w->fdatasync_fn(w->fd) != 0) {
			err = errno ? -errno : -EIO;
			set_why(why, whylen, "segment %s: fdatasync: %s", name, strerror(-err));
			goto fail;
		}
	}
	free(r.buf);
	w->next_lsn = expected;
	w->written_lsn = w->synced_lsn = w->durable_lsn = w->req_lsn = expected - 1;
	uv_mutex_lock(&w->mu);
	w->sh.fd = w->fd;
	w->sh.written = w->sh.synced = expected - 1;
	w->sh.written_off = w->sh.synced_off = w->seg_size;
	uv_mutex_unlock(&w->mu);
	w->ready = true;
	st->next_lsn = expected;
	st->ns = uv_hrtime() - t0;
	if (warned[0] && !(why && whylen && why[0]))
		set_why(why, whylen, "%s", warned);
	return 0;

read_fail:
	set_why(why, whylen, "segment %s: read: %s", name, strerror(-err));
fail:
	if (r.fd >= 0)
		close(r.fd);
	free(r.buf);
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	st->ns = uv_hrtime() - t0;
	return err;
}
