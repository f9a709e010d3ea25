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

/* Delete the segment file name (gone already is fine). 0, or -errno with why naming it. */
static int unlink_segment(struct wal *w, const char *name, char *why, size_t whylen)
{
	if (unlinkat(w->dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	int err = -errno;
	set_why(why, whylen, "segment %s: unlink: %s", name, strerror(-err));
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
		int err = unlink_segment(w, name, why, whylen);
		if (err)
			return err;
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

/* One replay, as its steps share it. */
struct replay {
	struct wal *w;
	uint64_t from_lsn; /* records below it are read and checked, not delivered */
	bool truncate_corrupt;
	wal_replay_fn fn;
	void *arg;
	struct wal_replay_stats *st;
	char *why;
	size_t whylen;
	struct reader r;   /* over the segment being read; fd -1 between segments */
	uint64_t expected; /* the LSN the next record must carry */
};

/* What reading one segment found. */
struct replay_seg {
	size_t j; /* its index in w->segs */
	char name[WAL_SEGMENT_NAME_MAX];
	uint64_t off;	    /* where its good records end */
	const char *reason; /* why the segment does not end there cleanly; NULL if it does */
	char rbuf[128];	    /* the reason, when it was formatted */
	bool gap;	    /* the segment does not begin where the log left off */
	bool torn;	    /* the bad record runs past the end of the file */
};

/*
 * The first segment to read: the last one starting at or below from_lsn. Skipping those
 * before it unread is safe: the segment after each starts at or below from_lsn, so every
 * record they hold is below it, and the caller has those already (that is what from_lsn
 * says). The log's LSNs go on from the first segment read.
 */
static size_t replay_first_segment(struct replay *rp)
{
	struct wal *w = rp->w;
	size_t start = 0;

	while (start + 1 < w->nsegs && w->segs[start + 1].first <= rp->from_lsn)
		start++;
	rp->st->segments_skipped = start;
	rp->expected = w->nsegs ? w->segs[start].first : 1;
	return start;
}

/* Open segment s for reading from its start, in rp->r. 0, or -errno with why. */
static int replay_open_segment(struct replay *rp, const struct replay_seg *s)
{
	struct stat stb;
	int err;

	rp->r.fd = openat(rp->w->dirfd, s->name, O_RDONLY | O_CLOEXEC);
	if (rp->r.fd < 0) {
		err = -errno;
		set_why(rp->why, rp->whylen, "segment %s: open: %s", s->name, strerror(errno));
		return err;
	}
	if (fstat(rp->r.fd, &stb) != 0) {
		err = -errno;
		set_why(rp->why, rp->whylen, "segment %s: stat: %s", s->name, strerror(errno));
		return err;
	}
	rp->r.size = (uint64_t)stb.st_size;
	rp->r.boff = 0;
	rp->r.blen = 0;
	posix_fadvise(rp->r.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	rp->st->segments_read++;
	return 0;
}

/* Point *p at bytes [s->off, s->off + n) of the segment. 0, or -errno with why. */
static int replay_need(struct replay *rp, const struct replay_seg *s, size_t n, const uint8_t **p)
{
	int err = reader_need(&rp->r, s->off, n, p);

	if (err)
		set_why(rp->why, rp->whylen, "segment %s: read: %s", s->name, strerror(-err));
	return err;
}

/*
 * Check the record at s->off against every rule of wal_replay() (wal.h), in that order: whole
 * header, type and padding, length, whole record, checksum, LSN. 0 with *p at its bytes and
 * *rec its length if it passes; 0 with s->reason (and s->torn if it runs past the end of the
 * file) if it fails one; -errno with why if the file cannot be read.
 */
static int replay_check_record(struct replay *rp, struct replay_seg *s, const uint8_t **p,
			       uint64_t *rec)
{
	uint64_t left = rp->r.size - s->off;
	const uint8_t *q;
	int err;

	if (left < WAL_HEADER_BYTES) {
		snprintf(s->rbuf, sizeof(s->rbuf), "torn record header (%" PRIu64 " bytes)", left);
		s->reason = s->rbuf;
		s->torn = true;
		return 0;
	}
	err = replay_need(rp, s, WAL_HEADER_BYTES, &q);
	if (err)
		return err;
	uint32_t len = get32(q);
	if (q[4] == 0 || q[5] || q[6] || q[7]) {
		s->reason = "bad record header (type 0 or padding not zero)";
		return 0;
	}
	if (len > WAL_MAX_PAYLOAD) {
		snprintf(s->rbuf, sizeof(s->rbuf), "bad length %" PRIu32, len);
		s->reason = s->rbuf;
		return 0;
	}
	*rec = WAL_RECORD_OVERHEAD + (uint64_t)len;
	if (*rec > left) {
		snprintf(s->rbuf, sizeof(s->rbuf),
			 "torn record (length %" PRIu32 ", %" PRIu64 " bytes left)", len, left);
		s->reason = s->rbuf;
		s->torn = true;
		return 0;
	}
	err = replay_need(rp, s, (size_t)*rec, &q);
	if (err)
		return err;
	if (XXH3_64bits(q, WAL_HEADER_BYTES + len) != get64(q + WAL_HEADER_BYTES + len)) {
		s->reason = "checksum mismatch";
		return 0;
	}
	uint64_t lsn = get64(q + 8);
	if (lsn != rp->expected) {
		snprintf(s->rbuf, sizeof(s->rbuf), "LSN %" PRIu64 ", expected %" PRIu64, lsn,
			 rp->expected);
		s->reason = s->rbuf;
		return 0;
	}
	*p = q;
	return 0;
}

/*
 * Take the good record p (rec bytes) at s->off: delivered to fn if it is at or above from_lsn
 * (below it, only counted: the caller has it already), then s->off and the expected LSN move
 * past it. 0, or fn's stop (negative; a positive return counts as
 * -EINVAL) with why naming the LSN.
 */
static int replay_deliver(struct replay *rp, struct replay_seg *s, const uint8_t *p, uint64_t rec)
{
	struct wal_replay_stats *st = rp->st;
	uint32_t len = get32(p);
	uint64_t lsn = get64(p + 8);
	unsigned type = p[4];

	if (!st->first_lsn)
		st->first_lsn = lsn;
	if (lsn >= rp->from_lsn) {
		int cr = rp->fn(rp->arg, lsn, type, p + WAL_HEADER_BYTES, len);
		if (cr) {
			int err = cr < 0 ? cr : -EINVAL;
			set_why(rp->why, rp->whylen,
				"segment %s, offset %" PRIu64 ": replay stopped at LSN %" PRIu64
				" (%s)",
				s->name, s->off, lsn, strerror(-err));
			return err;
		}
		st->delivered++;
	}
	st->records++;
	st->bytes += rec;
	rp->expected++;
	s->off += rec;
	return 0;
}

/*
 * The records of segment s from s->off on, each checked and taken, up to the end of the file
 * or the first bad one (s->reason). 0, or -errno with why (a read failed, fn stopped).
 */
static int replay_records(struct replay *rp, struct replay_seg *s)
{
	while (s->off < rp->r.size) {
		const uint8_t *p;
		uint64_t rec;
		int err = replay_check_record(rp, s, &p, &rec);

		if (err)
			return err;
		if (s->reason)
			return 0;
		err = replay_deliver(rp, s, p, rec);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Read segment j: opened, then its records if it begins where the log left off (if not, that
 * is its reason, and none is read). A bad spot with nothing but zeros after it is none: the
 * segment's preallocated end. 0 with s saying where its good records end and, if it does not
 * end cleanly there, why (rp->r.fd still open on it); -errno with why.
 */
static int replay_read_segment(struct replay *rp, size_t j, struct replay_seg *s)
{
	struct wal *w = rp->w;
	bool zero;
	int err;

	memset(s, 0, sizeof(*s));
	s->j = j;
	wal_segment_name(w->segs[j].first, s->name);
	err = replay_open_segment(rp, s);
	if (err)
		return err;
	s->gap = w->segs[j].first != rp->expected;
	if (s->gap) {
		snprintf(s->rbuf, sizeof(s->rbuf),
			 "segment starts at LSN %" PRIu64 ", the log left off before LSN %" PRIu64,
			 w->segs[j].first, rp->expected);
		s->reason = s->rbuf;
		return 0;
	}
	err = replay_records(rp, s);
	if (err || !s->reason)
		return err;
	/* Only zeros from here on: the segment's end (preallocated). */
	err = all_zero_after(rp->r.fd, rp->r.size, s->off, &zero);
	if (err) {
		set_why(rp->why, rp->whylen, "segment %s: mmap: %s", s->name, strerror(-err));
		return err;
	}
	if (zero)
		s->reason = NULL;
	return 0;
}

/*
 * Is the bad spot s the torn tail of a write never acknowledged? Only the last segment can
 * end in one, and only where it continues the log: a torn record there is one, and so is a
 * bad record with no valid record anywhere after it. Anything else is damage. 0 and *tail,
 * or -errno with why.
 */
static int replay_is_tail(struct replay *rp, const struct replay_seg *s, bool *tail)
{
	bool found;
	int err;

	*tail = false;
	if (s->j + 1 != rp->w->nsegs || s->gap)
		return 0;
	if (s->torn) {
		*tail = true;
		return 0;
	}
	err = valid_record_after(rp->r.fd, rp->r.size, s->off + 1, rp->expected, &found);
	if (err) {
		set_why(rp->why, rp->whylen, "segment %s: mmap: %s", s->name, strerror(-err));
		return err;
	}
	*tail = !found;
	return 0;
}

/*
 * Cut the torn tail at s->off (ftruncate, fdatasync). It is the end of a write that was never
 * acknowledged (wal.h), so cutting it loses nothing a client was told is durable. 0 with the
 * cut in st and why; -errno with why.
 */
static int replay_cut_tail(struct replay *rp, const struct replay_seg *s)
{
	uint64_t cut = rp->r.size - s->off;
	int err = truncate_file(rp->w, s->name, s->off);

	if (err) {
		set_why(rp->why, rp->whylen,
			"segment %s: truncate the torn tail at %" PRIu64 ": %s", s->name, s->off,
			strerror(-err));
		return err;
	}
	rp->st->tail_truncated = cut;
	rp->w->segs[s->j].bytes = s->off;
	set_why(rp->why, rp->whylen,
		"segment %s, offset %" PRIu64 ": %s; cut %" PRIu64
		" bytes of an unacknowledged torn tail",
		s->name, s->off, s->reason, cut);
	return 0;
}

/*
 * Delete the segments after s, newest first, so that a crash midway leaves a shorter but
 * consistent log; their count and bytes are added to *n and *bytes. 0, or -errno with why.
 */
static int replay_drop_later(struct replay *rp, const struct replay_seg *s, uint64_t *n,
			     uint64_t *bytes)
{
	struct wal *w = rp->w;
	char kname[WAL_SEGMENT_NAME_MAX];

	for (size_t k = w->nsegs; k-- > s->j + 1;) {
		wal_segment_name(w->segs[k].first, kname);
		int err = unlink_segment(w, kname, rp->why, rp->whylen);
		if (err)
			return err;
		(*n)++;
		*bytes += w->segs[k].bytes;
		w->nsegs--;
	}
	return 0;
}

/*
 * truncate_corrupt: the log cut at the bad spot s, as the operator asked (the changes after
 * it are lost, and why says how many bytes). Every later segment is deleted; s itself is
 * deleted if it does not continue the log, else truncated at its last good record; the
 * directory is fsync'ed. 0 with what went in st and why; -errno with why.
 */
static int replay_cut_corrupt(struct replay *rp, const struct replay_seg *s)
{
	struct wal *w = rp->w;
	struct wal_replay_stats *st = rp->st;
	uint64_t dropped = 0, dbytes = 0;
	int err = replay_drop_later(rp, s, &dropped, &dbytes);

	if (err)
		return err;
	if (s->gap) {
		/* The segment does not continue the log: it goes too (never the first one
		 * read, whose start defines where the log begins). */
		err = unlink_segment(w, s->name, rp->why, rp->whylen);
		if (err)
			return err;
		dropped++;
		dbytes += rp->r.size;
		w->nsegs--;
	} else {
		err = truncate_file(w, s->name, s->off);
		if (err) {
			set_why(rp->why, rp->whylen, "segment %s: truncate at %" PRIu64 ": %s",
				s->name, s->off, strerror(-err));
			return err;
		}
		st->corrupt_truncated = rp->r.size - s->off;
		w->segs[s->j].bytes = s->off;
	}
	if (fsync(w->dirfd) != 0) {
		err = -errno;
		set_why(rp->why, rp->whylen, "fsync %s: %s", w->dir, strerror(errno));
		return err;
	}
	st->dropped_segments = dropped;
	st->dropped_bytes = dbytes;
	set_why(rp->why, rp->whylen,
		"segment %s, offset %" PRIu64 ": %s; truncated there as asked, %" PRIu64
		" bytes cut, %" PRIu64 " later segments (%" PRIu64 " bytes) deleted",
		s->name, s->off, s->reason, st->corrupt_truncated, dropped, dbytes);
	return 0;
}

/*
 * A bad spot at s ends the log, whatever it is: a torn tail is cut; damage fails the replay
 * with -EBADMSG, or is cut too with truncate_corrupt. rp->r.fd is closed first. 0 (the log
 * ends at s->off, or before s if s was deleted), or -errno with why.
 */
static int replay_bad_spot(struct replay *rp, const struct replay_seg *s)
{
	bool tail;
	int err = replay_is_tail(rp, s, &tail);

	if (err)
		return err;
	close(rp->r.fd);
	rp->r.fd = -1;
	if (tail)
		return replay_cut_tail(rp, s);
	if (!rp->truncate_corrupt) {
		set_why(rp->why, rp->whylen, "segment %s, offset %" PRIu64 ": %s", s->name, s->off,
			s->reason);
		return -EBADMSG;
	}
	return replay_cut_corrupt(rp, s);
}

/*
 * Read the log, from the first segment needed to its end or its first bad spot, records from
 * from_lsn on delivered to fn. 0 with rp->expected the LSN after the last good record and
 * w->segs the segments kept, those read with the length of their good records; -errno with
 * why.
 */
static int replay_segments(struct replay *rp)
{
	struct wal *w = rp->w;
	struct replay_seg s;

	for (size_t j = replay_first_segment(rp); j < w->nsegs; j++) {
		int err = replay_read_segment(rp, j, &s);

		if (err)
			return err;
		if (s.reason)
			return replay_bad_spot(rp, &s);
		w->segs[j].bytes = s.off;
		close(rp->r.fd);
		rp->r.fd = -1;
	}
	return 0;
}

/* No segment at all: the first one created, named after rp->expected, and made current.
 * 0, or -errno (with why if the file could not be created). */
static int replay_create_first(struct replay *rp)
{
	struct wal *w = rp->w;
	int err = wal_create_segment(w->dirfd, rp->expected, &w->fd);

	if (err) {
		set_why(rp->why, rp->whylen, "create the first segment in %s: %s", w->dir,
			strerror(-err));
		return err;
	}
	err = wal_seg_push(w, rp->expected, 0);
	if (err)
		return err;
	w->seg_size = 0;
	return 0;
}

/*
 * The last segment made current: opened for appends after its last good record (zeros may
 * follow, preallocated) and fdatasync'ed, so what was replayed is durable whatever mode wrote
 * it; and the directory fsync'ed, so are the segments' names: the process before may have died
 * between creating the last segment and syncing the directory, and a power cut would then take
 * the segment, with every record appended to it from now on (found by crashsim seed 1002: six
 * acknowledged records lost). 0, or -errno (with why but for a failed fstat).
 */
static int replay_open_last(struct replay *rp)
{
	struct wal *w = rp->w;
	struct wal_seg *cur = &w->segs[w->nsegs - 1];
	char name[WAL_SEGMENT_NAME_MAX];
	struct stat stb;
	int err;

	wal_segment_name(cur->first, name);
	w->fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
	if (w->fd < 0) {
		err = -errno;
		set_why(rp->why, rp->whylen, "segment %s: open for appending: %s", name,
			strerror(errno));
		return err;
	}
	if (fstat(w->fd, &stb) != 0)
		return -errno;
	/* The replay set bytes to where its records end (zeros may follow). */
	w->seg_size = cur->bytes;
	w->seg_alloc = (uint64_t)stb.st_size;
	if (w->fdatasync_fn(w->fd) != 0) {
		err = errno ? -errno : -EIO;
		set_why(rp->why, rp->whylen, "segment %s: fdatasync: %s", name, strerror(-err));
		return err;
	}
	if (fsync(w->dirfd) != 0) {
		err = -errno;
		set_why(rp->why, rp->whylen, "fsync %s: %s", w->dir, strerror(errno));
		return err;
	}
	return 0;
}

/* The log ready for appends from LSN next: everything before it written and synced, as the
 * loop and the sync thread both see it. */
static void replay_publish(struct wal *w, uint64_t next)
{
	w->next_lsn = next;
	w->written_lsn = w->synced_lsn = w->durable_lsn = w->req_lsn = next - 1;
	uv_mutex_lock(&w->mu);
	w->sh.fd = w->fd;
	w->sh.written = w->sh.synced = next - 1;
	w->sh.written_off = w->sh.synced_off = w->seg_size;
	uv_mutex_unlock(&w->mu);
	w->ready = true;
}

/*
 * The steps, each above with its contract: check where the log starts (check_start()), read
 * its segments to its end or its first bad spot (replay_segments()), open the last segment
 * for appends or create the first (replay_open_last(), replay_create_first()), and go on from
 * the LSN after the last good record (replay_publish()). A failure leaves no segment open
 * for appends, and the log accepts none.
 */
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
	struct replay rp = {
	    .w = w,
	    .from_lsn = from_lsn ? from_lsn : 1,
	    .truncate_corrupt = truncate_corrupt,
	    .fn = fn,
	    .arg = arg,
	    .st = st,
	    .why = why,
	    .whylen = whylen,
	    .r = {.fd = -1, .cap = WAL_READ_CHUNK},
	};
	char warned[256] = "";
	int err = check_start(w, warned, sizeof(warned));
	if (err) {
		set_why(why, whylen, "%s", warned);
		return err;
	}
	rp.r.buf = malloc(rp.r.cap);
	if (!rp.r.buf)
		return -ENOMEM;
	err = replay_segments(&rp);
	if (!err)
		err = w->nsegs ? replay_open_last(&rp) : replay_create_first(&rp);
	if (rp.r.fd >= 0)
		close(rp.r.fd);
	free(rp.r.buf);
	if (err) {
		if (w->fd >= 0) {
			close(w->fd);
			w->fd = -1;
		}
		st->ns = uv_hrtime() - t0;
		return err;
	}
	replay_publish(w, rp.expected);
	st->next_lsn = rp.expected;
	st->ns = uv_hrtime() - t0;
	if (warned[0] && !(why && whylen && why[0]))
		set_why(why, whylen, "%s", warned);
	return 0;
}
