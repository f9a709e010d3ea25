/* SPDX-License-Identifier: MIT */
/* The write-ahead log: records, segments, group commit on a sync thread, replay; see wal.h. */
#include "server/wal.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

/* Replay reads segments in chunks of this many bytes (grown for a longer record). */
#define WAL_READ_CHUNK (4u << 20)
/* The append buffer starts this big, and goes back to it once emptied after a burst. */
#define WAL_BUF_INITIAL (1u << 20)
#define WAL_EVERYSEC_NS 1000000000ull
/* Preallocation stops while the file system has less than this many times it free. */
#define WAL_PREALLOC_FREE 16
/* Zeros written by one flush at most: the page cache of a file grows in folios as large as
 * the write (up to 2 MiB), and 4 MiB at once held the loop for 8 ms where a fresh page costs
 * a fault of the hypervisor. A burst that outruns them extends the file with its records. */
#define WAL_PREALLOC_STEP (256u << 10)

const uint64_t wal_fsync_bucket_us[WAL_FSYNC_BUCKETS] = {
    100, 1000, 4000, 16000, 64000, 256000, UINT64_MAX,
};

enum wal_job {
	JOB_NONE = 0,
	JOB_ROTATE,  /* the current segment is full: sync it, start the next */
	JOB_RECOVER, /* failed: cut back to the synced length, sync, start afresh */
};

struct wal_seg {
	uint64_t first; /* LSN of its first record (its name) */
	uint64_t bytes;
	bool unlinking; /* released: a struct wal_unlink is deleting its file */
};

/*
 * Released segments being deleted on the threadpool: unlink(2) of a segment's file held the
 * loop for up to 18 ms, as the file system frees its blocks. The work owns a dup of the
 * directory's fd, so wal_close() may close the log's; it holds a reference on the wal, so the
 * entries it updates when it ends are still there.
 */
struct wal_unlink {
	uv_work_t req;
	struct wal *w;
	int dirfd;
	uint64_t keep; /* the first LSN of the first segment kept: the log's start from now on */
	size_t n;
	struct {
		uint64_t first;
		int err; /* 0 (gone, or was already) or the unlink's -errno */
	} seg[];
};

/*
 * What the loop and the sync thread share, under w->mu. The sync thread alone runs fdatasync,
 * truncates, creates segments and closes a replaced segment's fd; the loop alone writes. The
 * (written, written_off) pair is published by the loop after each successful write, and
 * (synced, synced_off) by the thread after each successful fdatasync: the thread's pair is
 * the authority on how much of the current segment is on disk, which is why recovery truncates
 * to synced_off on the thread rather than to anything the loop computed earlier.
 */
struct wal_shared {
	/* loop -> thread */
	int fd;		      /* current segment */
	uint64_t written;     /* newest LSN written to fd */
	uint64_t written_off; /* fd's length once it was written */
	uint64_t req;	      /* sync wanted up to here (mode always, recovery, close) */
	enum wal_job job;     /* requested switch, JOB_NONE if none */
	bool stop;
	bool sleeping; /* the thread waits with no timeout: wake it for everysec work */
	/* thread -> loop */
	uint64_t synced, synced_off;
	bool broken;		/* an fdatasync on fd failed: no later one on it is believed */
	int broken_err;		/* its -errno */
	int sync_err;		/* a failure the loop has not seen yet */
	bool job_done;		/* the job ran; the loop clears job and job_done */
	int job_err;		/* 0 or -errno */
	int job_fd;		/* new segment's fd on success */
	uint64_t job_first;	/* new segment's first LSN */
	uint64_t job_old_bytes; /* replaced segment's final length */
	/* stats */
	uint64_t fsyncs, fsync_ns, fsync_hist[WAL_FSYNC_BUCKETS];
};

struct wal {
	/* options */
	uv_loop_t *loop;
	char *dir;
	int dirfd;
	enum wal_fsync mode;
	uint64_t segment_bytes;
	unsigned retry_ms;
	void (*on_durable)(void *arg, uint64_t durable_lsn);
	void (*on_unlink_error)(void *arg, const char *segment, int err);
	bool accept_missing; /* wal_options' */
	void *arg;
	ssize_t (*pwrite_fn)(int fd, const void *buf, size_t n, off_t off);
	int (*fdatasync_fn)(int fd);

	/* segments, oldest first; the last is the current one once replayed */
	struct wal_seg *segs;
	size_t nsegs, segcap;
	size_t unlinking;   /* of those, released and being deleted */
	int fd;		    /* current segment, loop's copy */
	uint64_t seg_size;  /* its length: where the next write goes */
	uint64_t seg_alloc; /* bytes of its file (records, then zeros); seg_size or more */
	uint64_t prealloc;  /* see wal_options.prealloc_bytes */

	/*
	 * Records not yet covered by an fdatasync, oldest first, in buf[head, len):
	 * [head, wpos) is written to the current segment, [wpos, len) is not.
	 */
	uint8_t *buf;
	size_t cap, head, wpos, len;

	uint64_t next_lsn, written_lsn, synced_lsn, durable_lsn, req_lsn;
	bool ready; /* replayed: appends accepted */
	bool closing;
	bool switching;	 /* a job is with the sync thread */
	bool failed;	 /* see wal.h */
	bool recovering; /* a recovery switch succeeded; waiting for its rewrite to be synced */
	uint64_t recover_target;
	int error;

	/* loop-side stats */
	uint64_t appended, writes, bytes_written, rotations, failures, recoveries;

	uv_async_t async;
	uv_timer_t timer;
	int refs; /* open handles and wal_unlink works: the memory goes with the last */
	bool thread_started;
	uv_thread_t thread;
	uv_mutex_t mu;
	uv_cond_t cv;
	struct wal_shared sh;
};

static void set_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_why(char *why, size_t whylen, const char *fmt, ...)
{
	if (!why || !whylen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

void wal_segment_name(uint64_t lsn, char out[WAL_SEGMENT_NAME_MAX])
{
	snprintf(out, WAL_SEGMENT_NAME_MAX, "%016" PRIx64 ".wal", lsn);
}

/* "0123456789abcdef.wal" -> 0 and *lsn; anything else -> -1. */
static int parse_segment_name(const char *name, uint64_t *lsn)
{
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return -1;
		v = v << 4 | d;
	}
	if (strcmp(name + 16, ".wal") != 0 || v == 0)
		return -1;
	*lsn = v;
	return 0;
}

/* Room for one more segment entry. */
static int wal_seg_reserve(struct wal *w)
{
	if (w->nsegs == w->segcap) {
		size_t ncap = w->segcap ? w->segcap * 2 : 16;
		struct wal_seg *n = realloc(w->segs, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		w->segs = n;
		w->segcap = ncap;
	}
	return 0;
}

static int wal_seg_push(struct wal *w, uint64_t first, uint64_t bytes)
{
	int err = wal_seg_reserve(w);
	if (err)
		return err;
	w->segs[w->nsegs++] = (struct wal_seg){first, bytes, false};
	return 0;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct wal_seg *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

static ssize_t real_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

static int real_fdatasync(int fd)
{
	return fdatasync(fd);
}

/* Create (or empty) the segment whose first record is lsn, and make its name durable. */
static int wal_create_segment(int dirfd, uint64_t lsn, int *fdp)
{
	char name[WAL_SEGMENT_NAME_MAX];
	wal_segment_name(lsn, name);
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fsync(dirfd) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	*fdp = fd;
	return 0;
}

/* ---- sync thread ---- */

/* fdatasync with the lock dropped, timed into the histogram. Called and returns locked. */
static int timed_sync(struct wal *w, int fd)
{
	uv_mutex_unlock(&w->mu);
	uint64_t t0 = uv_hrtime();
	int r = w->fdatasync_fn(fd);
	int err = r == 0 ? 0 : (errno ? -errno : -EIO);
	uint64_t ns = uv_hrtime() - t0;
	uv_mutex_lock(&w->mu);
	struct wal_shared *s = &w->sh;
	s->fsyncs++;
	s->fsync_ns += ns;
	unsigned b = 0;
	while (b + 1 < WAL_FSYNC_BUCKETS && ns / 1000 > wal_fsync_bucket_us[b])
		b++;
	s->fsync_hist[b]++;
	return err;
}

/* Run s->job. Called and returns locked. */
static void run_job(struct wal *w)
{
	struct wal_shared *s = &w->sh;
	enum wal_job job = s->job;
	int oldfd = s->fd;
	uint64_t synced = s->synced, synced_off = s->synced_off;
	uint64_t old_bytes = s->written_off;
	int err = 0, newfd = -1;

	if (job == JOB_ROTATE) {
		/* A sync on this fd already failed: a later success would prove nothing. */
		if (s->broken) {
			err = s->broken_err;
		} else {
			uint64_t written = s->written, woff = s->written_off;
			err = timed_sync(w, oldfd);
			if (!err) {
				synced = written;
				synced_off = woff;
			} else {
				s->broken = true;
				s->broken_err = err;
			}
		}
	} else {
		/* Cut what no successful fdatasync covered: after a write or sync error, its pages
		 * may be lost or wrongly clean. Those records are still in the loop's memory. */
		uv_mutex_unlock(&w->mu);
		if (ftruncate(oldfd, (off_t)synced_off) != 0)
			err = -errno;
		uv_mutex_lock(&w->mu);
		if (!err)
			err = timed_sync(w, oldfd);
		old_bytes = synced_off;
	}
	if (!err) {
		uv_mutex_unlock(&w->mu);
		err = wal_create_segment(w->dirfd, synced + 1, &newfd);
		uv_mutex_lock(&w->mu);
	}
	if (!err) {
		close(oldfd);
		s->fd = newfd;
		s->synced = synced;
		s->synced_off = 0;
		s->written = synced;
		s->written_off = 0;
		s->broken = false;
		s->job_fd = newfd;
		s->job_first = synced + 1;
		s->job_old_bytes = old_bytes;
	} else if (job == JOB_ROTATE && !s->broken && synced > s->synced) {
		/* The old segment's sync succeeded even though the switch did not. */
		s->synced = synced;
		s->synced_off = synced_off;
	}
	s->job_err = err;
	s->job_done = true;
}

static void wal_sync_main(void *arg)
{
	struct wal *w = arg;
	struct wal_shared *s = &w->sh;
	uint64_t last = uv_hrtime();

	/*
	 * Gathering (mode always). Clients whose replies an fdatasync released send their next
	 * changes within a fraction of a millisecond; an fdatasync started at once would carry
	 * only what came in during the last one, and those clients would wait for the one after
	 * it: the clients split into two waves, each waiting about two fdatasyncs. So once one
	 * ends, the next waits until half as many records as it covered have been written since
	 * (gather_want, counted from gather_from), or for as long as it took (gather_until),
	 * whichever comes first. A lone client never waits (half of one record is none); with 50
	 * clients pipelining 16 adds each this took throughput from 0.63 to 0.8 of wal = off
	 * (bench/wal-modes).
	 */
	uint64_t gather_from = 0, gather_want = 0, gather_until = 0;

	uv_mutex_lock(&w->mu);
	for (;;) {
		if (s->job != JOB_NONE && !s->job_done) {
			run_job(w);
			uv_cond_broadcast(&w->cv);
			uv_async_send(&w->async);
			continue;
		}
		bool pending = s->written > s->synced && !s->broken;
		uint64_t now = uv_hrtime();
		bool tick = w->mode == WAL_FSYNC_EVERYSEC && now - last >= WAL_EVERYSEC_NS;
		if (pending && (s->req > s->synced || s->stop || tick)) {
			if (!s->stop && w->mode == WAL_FSYNC_ALWAYS && now < gather_until &&
			    s->written - gather_from < gather_want) {
				uv_cond_timedwait(&w->cv, &w->mu, gather_until - now);
				continue;
			}
			uint64_t target = s->written, off = s->written_off;
			uint64_t before = s->synced, t0 = uv_hrtime();
			int err = timed_sync(w, s->fd);
			last = uv_hrtime();
			if (!err) {
				if (target > s->synced) {
					s->synced = target;
					s->synced_off = off;
				}
				gather_from = s->written;
				gather_want = (target - before) / 2;
				gather_until = last + (last - t0);
			} else {
				s->broken = true;
				s->broken_err = err;
				s->sync_err = err;
			}
			uv_cond_broadcast(&w->cv);
			uv_async_send(&w->async);
			continue;
		}
		if (s->stop)
			break;
		if (pending && w->mode == WAL_FSYNC_EVERYSEC)
			uv_cond_timedwait(&w->cv, &w->mu, WAL_EVERYSEC_NS - (now - last));
		else {
			s->sleeping = true;
			uv_cond_wait(&w->cv, &w->mu);
			s->sleeping = false;
		}
	}
	uv_mutex_unlock(&w->mu);
}

/* ---- loop side ---- */

static int wal_flush_now(struct wal *w, bool may_rotate);

static void wal_sync_enter_failed(struct wal *w, int err);

static void wal_sync_start_job(struct wal *w, enum wal_job job)
{
	/* The new segment's entry must fit when the job succeeds (the file will exist). */
	int err = wal_seg_reserve(w);
	if (err) {
		wal_sync_enter_failed(w, err);
		return;
	}
	w->switching = true;
	uv_mutex_lock(&w->mu);
	w->sh.job = job;
	w->sh.job_done = false;
	uv_cond_broadcast(&w->cv);
	uv_mutex_unlock(&w->mu);
	/* Keep the loop alive until the answer comes. */
	uv_ref((uv_handle_t *)&w->async);
}

static void retry_cb(uv_timer_t *t)
{
	struct wal *w = t->data;
	if (!w->failed) {
		uv_timer_stop(t);
		return;
	}
	if (w->switching || w->recovering)
		return;
	wal_sync_start_job(w, JOB_RECOVER);
}

static void wal_sync_enter_failed(struct wal *w, int err)
{
	w->failures++;
	w->error = err;
	w->recovering = false;
	w->recover_target = 0;
	if (!w->failed) {
		w->failed = true;
		if (!w->closing)
			uv_timer_start(&w->timer, retry_cb, w->retry_ms, w->retry_ms);
	}
}

static void recovered(struct wal *w)
{
	w->failed = false;
	w->recovering = false;
	w->recover_target = 0;
	w->error = 0;
	w->recoveries++;
	uv_timer_stop(&w->timer);
}

/* Forget the records an fdatasync has covered. */
static void drop_synced(struct wal *w)
{
	while (w->head < w->wpos) {
		const uint8_t *p = w->buf + w->head;
		if (get64(p + 8) > w->synced_lsn)
			break;
		w->head += WAL_RECORD_OVERHEAD + get32(p);
	}
	if (w->head == w->len) {
		w->head = w->wpos = w->len = 0;
		if (w->cap > 4 * WAL_BUF_INITIAL) {
			/* A burst is over: give its memory back. */
			uint8_t *n = malloc(WAL_BUF_INITIAL);
			if (n) {
				free(w->buf);
				w->buf = n;
				w->cap = WAL_BUF_INITIAL;
			}
		}
	}
}

static void wal_sync_update_durable(struct wal *w)
{
	uint64_t d = w->synced_lsn;
	if (w->mode != WAL_FSYNC_ALWAYS && !w->failed && w->written_lsn > d)
		d = w->written_lsn;
	if (d > w->durable_lsn) {
		w->durable_lsn = d;
		if (w->on_durable)
			w->on_durable(w->arg, d);
	}
}

static void maybe_unref(struct wal *w)
{
	if (!w->switching && w->req_lsn <= w->synced_lsn)
		uv_unref((uv_handle_t *)&w->async);
}

static void job_finished(struct wal *w, enum wal_job job, int err, int fd, uint64_t first,
			 uint64_t old_bytes)
{
	w->switching = false;
	if (err) {
		wal_sync_enter_failed(w, err);
		return;
	}
	struct wal_seg *cur = &w->segs[w->nsegs - 1];
	if (first == cur->first) {
		cur->bytes = 0;
	} else {
		cur->bytes = old_bytes;
		/* Cannot fail: wal_sync_start_job() reserved the room. */
		w->segs[w->nsegs++] = (struct wal_seg){first, 0, false};
	}
	w->fd = fd;
	w->seg_size = 0;
	w->seg_alloc = 0;
	/* Everything still buffered goes into the new segment. */
	w->wpos = w->head;
	w->written_lsn = w->synced_lsn;
	w->req_lsn = w->synced_lsn;
	if (job == JOB_ROTATE) {
		w->rotations++;
		wal_flush_now(w, false);
		return;
	}
	w->recovering = true;
	w->recover_target = 0;
	if (w->len == w->head) {
		recovered(w);
		return;
	}
	wal_flush_now(w, false);
}

/* Take in what the sync thread reported. */
static void wal_sync_absorb(struct wal *w)
{
	struct wal_shared *s = &w->sh;
	uv_mutex_lock(&w->mu);
	uint64_t synced = s->synced;
	int serr = s->sync_err;
	s->sync_err = 0;
	bool done = s->job_done;
	enum wal_job job = s->job;
	int jerr = s->job_err, jfd = s->job_fd;
	uint64_t jfirst = s->job_first, jold = s->job_old_bytes;
	if (done) {
		s->job = JOB_NONE;
		s->job_done = false;
	}
	uv_mutex_unlock(&w->mu);

	if (synced > w->synced_lsn) {
		w->synced_lsn = synced;
		drop_synced(w);
	}
	if (serr)
		wal_sync_enter_failed(w, serr);
	if (done)
		job_finished(w, job, jerr, jfd, jfirst, jold);
	if (w->recovering && w->recover_target && w->synced_lsn >= w->recover_target)
		recovered(w);
}

static void wal_sync_async_cb(uv_async_t *a)
{
	struct wal *w = a->data;
	wal_sync_absorb(w);
	wal_sync_update_durable(w);
	maybe_unref(w);
}

/* Write buffer[wpos, len) at the end of the current segment. See wal_flush(). */
/*
 * Keep the segment's file zero-filled at least prealloc / 2 beyond its last record (but not
 * beyond segment_bytes): zeros up to the next multiple of prealloc past that, at most
 * WAL_PREALLOC_STEP bytes a flush, while the file system has WAL_PREALLOC_FREE times that free.
 * Best effort: a failed write only means slower
 * fdatasyncs (a disk that is full fails the next record).
 */
static void prealloc(struct wal *w)
{
	static const uint8_t zeros[64 * 1024];
	struct iovec iov[64];
	uint64_t want = w->seg_size + w->prealloc / 2;

	struct statvfs sv;

	if (!w->prealloc || w->seg_alloc >= want || w->seg_alloc >= w->segment_bytes)
		return;
	/* Never the last of the disk: snapshots need it more. */
	if (fstatvfs(w->fd, &sv) != 0 ||
	    (uint64_t)sv.f_bavail * sv.f_frsize < WAL_PREALLOC_FREE * w->prealloc)
		return;
	want = (want / w->prealloc + 1) * w->prealloc;
	if (want > w->segment_bytes)
		want = w->segment_bytes;
	if (want > w->seg_alloc + WAL_PREALLOC_STEP)
		want = w->seg_alloc + WAL_PREALLOC_STEP;
	while (w->seg_alloc < want) {
		uint64_t left = want - w->seg_alloc;
		int n = 0;
		/* One call for up to 4 MiB (and no pwrite(2) for fault injection to count). */
		for (; n < 64 && left; n++) {
			iov[n].iov_base = (void *)zeros;
			iov[n].iov_len = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
			left -= iov[n].iov_len;
		}
		ssize_t r = pwritev(w->fd, iov, n, (off_t)w->seg_alloc);
		if (r <= 0)
			break;
		w->seg_alloc += (uint64_t)r;
	}
}

static int wal_flush_now(struct wal *w, bool may_rotate)
{
	if (w->failed && !w->recovering)
		return w->error;
	if (w->switching)
		return 0;
	size_t n = w->len - w->wpos;
	if (!n)
		return 0;
	if (may_rotate && w->seg_size >= w->segment_bytes) {
		wal_sync_start_job(w, JOB_ROTATE);
		return w->failed ? w->error : 0;
	}
	const uint8_t *p = w->buf + w->wpos;
	uint64_t off = w->seg_size;
	int err = 0;
	while (n) {
		ssize_t r = w->pwrite_fn(w->fd, p, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = errno ? -errno : -EIO;
			break;
		}
		if (r == 0) {
			err = -ENOSPC;
			break;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	w->writes++;
	w->bytes_written += off - w->seg_size;
	if (err) {
		/* What did reach the file is cut by the recovery (beyond synced_off). */
		wal_sync_enter_failed(w, err);
		return err;
	}
	w->seg_size = off;
	if (off > w->seg_alloc)
		w->seg_alloc = off;
	prealloc(w);
	w->segs[w->nsegs - 1].bytes = off;
	w->wpos = w->len;
	w->written_lsn = w->next_lsn - 1;
	if (w->recovering && !w->recover_target)
		w->recover_target = w->written_lsn;
	bool want = w->mode == WAL_FSYNC_ALWAYS || w->recovering;
	uv_mutex_lock(&w->mu);
	w->sh.written = w->written_lsn;
	w->sh.written_off = off;
	if (want)
		w->sh.req = w->written_lsn;
	/* In mode everysec an idle thread sleeps until told there is something to sync; while
	 * it has, it wakes by its own timeout, so most flushes need no wake-up. */
	if (want || (w->sh.sleeping && w->mode == WAL_FSYNC_EVERYSEC))
		uv_cond_broadcast(&w->cv);
	uv_mutex_unlock(&w->mu);
	if (want) {
		w->req_lsn = w->written_lsn;
		uv_ref((uv_handle_t *)&w->async);
	}
	return 0;
}

int wal_flush(struct wal *w)
{
	if (!w->ready || w->closing)
		return -EINVAL;
	int r = wal_flush_now(w, true);
	wal_sync_update_durable(w);
	return r;
}

int wal_write_now(struct wal *w)
{
	if (!w->ready || w->closing)
		return -EINVAL;
	if (w->switching) {
		/* The buffered records have no segment until the switch is done: wait for it
		 * (an fdatasync and a create on the sync thread); its end writes them. */
		uv_mutex_lock(&w->mu);
		while (w->sh.job != JOB_NONE && !w->sh.job_done)
			uv_cond_wait(&w->cv, &w->mu);
		uv_mutex_unlock(&w->mu);
		wal_sync_absorb(w);
	}
	/* A full segment takes the records still; the next wal_flush() switches. */
	int r = wal_flush_now(w, false);
	wal_sync_update_durable(w);
	return r;
}

int wal_append(struct wal *w, unsigned type, const void *payload, size_t len, uint64_t *lsn)
{
	if (!w->ready || w->closing || type == 0 || type > 255)
		return -EINVAL;
	if (len > WAL_MAX_PAYLOAD)
		return -EMSGSIZE;
	size_t need = WAL_RECORD_OVERHEAD + len;
	if (w->cap - w->len < need) {
		if (w->head) {
			memmove(w->buf, w->buf + w->head, w->len - w->head);
			w->wpos -= w->head;
			w->len -= w->head;
			w->head = 0;
		}
		if (w->cap - w->len < need) {
			size_t ncap = w->cap ? w->cap : WAL_BUF_INITIAL;
			while (ncap - w->len < need)
				ncap *= 2;
			uint8_t *n = realloc(w->buf, ncap);
			if (!n)
				return -ENOMEM;
			w->buf = n;
			w->cap = ncap;
		}
	}
	uint8_t *p = w->buf + w->len;
	put32(p, (uint32_t)len);
	p[4] = (uint8_t)type;
	p[5] = p[6] = p[7] = 0;
	put64(p + 8, w->next_lsn);
	if (len)
		memcpy(p + WAL_HEADER_BYTES, payload, len);
	put64(p + WAL_HEADER_BYTES + len, XXH3_64bits(p, WAL_HEADER_BYTES + len));
	w->len += need;
	w->appended++;
	if (lsn)
		*lsn = w->next_lsn;
	w->next_lsn++;
	return 0;
}

uint64_t wal_durable_lsn(const struct wal *w)
{
	return w->durable_lsn;
}

uint64_t wal_written_lsn(const struct wal *w)
{
	return w->written_lsn;
}

uint64_t wal_next_lsn(const struct wal *w)
{
	return w->next_lsn;
}

bool wal_failed(const struct wal *w)
{
	return w->failed;
}

int wal_error(const struct wal *w)
{
	return w->failed ? w->error : 0;
}

uint64_t wal_bytes(const struct wal *w)
{
	uint64_t b = 0;
	for (size_t i = 0; i < w->nsegs; i++)
		if (!w->segs[i].unlinking)
			b += w->segs[i].bytes;
	return b;
}

uint64_t wal_segments(const struct wal *w)
{
	return w->nsegs - w->unlinking;
}

void wal_get_stats(const struct wal *w, struct wal_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->next_lsn = w->next_lsn;
	st->written_lsn = w->written_lsn;
	st->synced_lsn = w->synced_lsn;
	st->durable_lsn = w->durable_lsn;
	st->appended = w->appended;
	st->writes = w->writes;
	st->bytes_written = w->bytes_written;
	st->buffered_bytes = w->len - w->head;
	st->segments = wal_segments(w);
	st->bytes = wal_bytes(w);
	st->unlinking = w->unlinking;
	st->rotations = w->rotations;
	st->failures = w->failures;
	st->recoveries = w->recoveries;
	st->error = wal_error(w);
	st->failed = w->failed;
	uv_mutex_t *mu = (uv_mutex_t *)&w->mu;
	uv_mutex_lock(mu);
	st->fsyncs = w->sh.fsyncs;
	st->fsync_ns = w->sh.fsync_ns;
	memcpy(st->fsync_hist, w->sh.fsync_hist, sizeof(st->fsync_hist));
	uv_mutex_unlock(mu);
}

static void free_wal(struct wal *w)
{
	free(w->buf);
	free(w->segs);
	free(w->dir);
	free(w);
}

static void wal_unref(struct wal *w)
{
	if (--w->refs == 0) {
		uv_cond_destroy(&w->cv);
		uv_mutex_destroy(&w->mu);
		free_wal(w);
	}
}

/* The file recording where the log starts (wal_replay() tells missing segments by it). */
#define WAL_START_FILE "start"
#define WAL_START_TEMP "start.tmp"

/* Record durably that the log starts at lsn: a temporary file written and fsync'ed, renamed
 * over the record, the directory fsync'ed. 0 or -errno. */
static int wal_start_write(int dirfd, uint64_t lsn)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%" PRIu64 "\n", lsn), err = 0;
	int fd = openat(dirfd, WAL_START_TEMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len || fsync(fd) != 0)
		err = errno ? -errno : -EIO;
	close(fd);
	if (!err && renameat(dirfd, WAL_START_TEMP, dirfd, WAL_START_FILE) != 0)
		err = -errno;
	if (!err && fsync(dirfd) != 0)
		err = -errno;
	if (err)
		unlinkat(dirfd, WAL_START_TEMP, 0);
	return err;
}

/* Where the log starts, as recorded: 0, -ENOENT if there is no record, -EBADMSG if it is not
 * a number, or another -errno. */
static int wal_start_read(int dirfd, uint64_t *lsn)
{
	char text[32], *end;
	int fd = openat(dirfd, WAL_START_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	text[n] = '\0';
	errno = 0;
	*lsn = strtoull(text, &end, 10);
	if (errno || end == text || *end != '\n' || !*lsn)
		return -EBADMSG;
	return 0;
}

/* Threadpool: record the log's new start, then delete the files (none if it could not be
 * recorded: the next start would take them for missing). */
static void unlink_work(uv_work_t *req)
{
	struct wal_unlink *u = req->data;
	char name[WAL_SEGMENT_NAME_MAX];
	int err = wal_start_write(u->dirfd, u->keep);

	for (size_t i = 0; i < u->n && err; i++)
		u->seg[i].err = err;
	for (size_t i = 0; i < u->n && !err; i++) {
		wal_segment_name(u->seg[i].first, name);
		u->seg[i].err = unlinkat(u->dirfd, name, 0) != 0 && errno != ENOENT ? -errno : 0;
	}
	close(u->dirfd);
}

/* Loop: forget the segments deleted; one that could not be is kept for the next release. */
static void unlink_done(uv_work_t *req, int status)
{
	struct wal_unlink *u = req->data;
	struct wal *w = u->w;
	char name[WAL_SEGMENT_NAME_MAX];
	size_t j = 0;

	(void)status; /* never cancelled: uv_cancel() is not called on it */
	for (size_t i = 0; i < u->n; i++) {
		/* Both lists are in LSN order, and only a release removes entries. */
		while (w->segs[j].first != u->seg[i].first)
			j++;
		w->unlinking--;
		if (u->seg[i].err) {
			w->segs[j].unlinking = false;
			wal_segment_name(u->seg[i].first, name);
			if (w->on_unlink_error)
				w->on_unlink_error(w->arg, name, u->seg[i].err);
			continue;
		}
		memmove(w->segs + j, w->segs + j + 1, (w->nsegs - j - 1) * sizeof(*w->segs));
		w->nsegs--;
	}
	free(u);
	wal_unref(w);
}

int wal_release(struct wal *w, uint64_t lsn)
{
	if (!w->ready)
		return -EINVAL;
	size_t n = 0;
	while (n + 1 < w->nsegs && w->segs[n + 1].first <= lsn)
		n++;
	size_t want = 0;
	for (size_t i = 0; i < n; i++)
		want += !w->segs[i].unlinking;
	if (!want)
		return 0;
	struct wal_unlink *u = malloc(sizeof(*u) + want * sizeof(u->seg[0]));
	if (!u)
		return -ENOMEM;
	u->dirfd = dup(w->dirfd);
	if (u->dirfd < 0) {
		int err = -errno;
		free(u);
		return err;
	}
	u->w = w;
	u->n = 0;
	u->keep = w->segs[n].first;
	u->req.data = u;
	for (size_t i = 0; i < n; i++)
		if (!w->segs[i].unlinking)
			u->seg[u->n++].first = w->segs[i].first;
	int err = uv_queue_work(w->loop, &u->req, unlink_work, unlink_done);
	if (err) {
		close(u->dirfd);
		free(u);
		return err;
	}
	for (size_t i = 0; i < n; i++)
		w->segs[i].unlinking = true;
	w->unlinking += want;
	w->refs++;
	return (int)want;
}

/* ---- open / close ---- */

static void handle_closed(uv_handle_t *h)
{
	wal_unref(h->data);
}

static int list_segments(struct wal *w, char *why, size_t whylen)
{
	int fd = dup(w->dirfd);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
	int err = 0;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d))) {
		uint64_t first;
		if (parse_segment_name(e->d_name, &first) != 0)
			continue;
		struct stat stb;
		if (fstatat(w->dirfd, e->d_name, &stb, 0) != 0) {
			/* Deleted since readdir: a release of the log closed before (wal_close()
			 * leaves its deletions to the loop). */
			if (errno == ENOENT) {
				errno = 0;
				continue;
			}
			err = -errno;
			set_why(why, whylen, "stat %s/%s: %s", w->dir, e->d_name, strerror(-err));
			goto out;
		}
		if (!S_ISREG(stb.st_mode))
			continue;
		err = wal_seg_push(w, first, (uint64_t)stb.st_size);
		if (err)
			goto out;
		errno = 0;
	}
	if (errno) {
		err = -errno;
		set_why(why, whylen, "readdir %s: %s", w->dir, strerror(-err));
	}
	if (w->nsegs > 1)
		qsort(w->segs, w->nsegs, sizeof(*w->segs), seg_cmp);
out:
	closedir(d);
	return err;
}

/* fsync the directory that holds path. 0 or -errno. */
static int sync_parent(const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == path)
		snprintf(parent, sizeof(parent), "/");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - path), path);
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return err;
}

int wal_open(const struct wal_options *o, struct wal **out, char *why, size_t whylen)
{
	*out = NULL;
	set_why(why, whylen, "%s", "");
	if (!o->loop || !o->dir || o->fsync > WAL_FSYNC_NO ||
	    (o->segment_bytes && o->segment_bytes < 4096)) {
		set_why(why, whylen, "bad log options");
		return -EINVAL;
	}
	int err;
	struct wal *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->dirfd = -1;
	w->fd = -1;
	w->loop = o->loop;
	w->mode = o->fsync;
	w->segment_bytes = o->segment_bytes ? o->segment_bytes : WAL_DEFAULT_SEGMENT_BYTES;
	w->retry_ms = o->retry_ms ? o->retry_ms : WAL_DEFAULT_RETRY_MS;
	w->prealloc = o->prealloc_bytes;
	w->on_durable = o->on_durable;
	w->on_unlink_error = o->on_unlink_error;
	w->accept_missing = o->accept_missing;
	w->arg = o->arg;
	w->pwrite_fn = o->pwrite_fn ? o->pwrite_fn : real_pwrite;
	w->fdatasync_fn = o->fdatasync_fn ? o->fdatasync_fn : real_fdatasync;
	w->next_lsn = 1;
	w->sh.fd = -1;
	w->dir = strdup(o->dir);
	if (!w->dir) {
		err = -ENOMEM;
		goto fail;
	}
	if (mkdir(w->dir, 0700) == 0) {
		/* The new directory's name is durable once its parent is (else a power cut
		 * could take the whole log with it). */
		err = sync_parent(w->dir);
		if (err) {
			set_why(why, whylen, "fsync the parent of %s: %s", w->dir, strerror(-err));
			goto fail;
		}
	} else if (errno != EEXIST) {
		err = -errno;
		set_why(why, whylen, "mkdir %s: %s", w->dir, strerror(errno));
		goto fail;
	}
	w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		err = -errno;
		set_why(why, whylen, "open %s: %s", w->dir, strerror(errno));
		goto fail;
	}
	err = list_segments(w, why, whylen);
	if (err)
		goto fail;
	w->cap = WAL_BUF_INITIAL;
	w->buf = malloc(w->cap);
	if (!w->buf) {
		err = -ENOMEM;
		goto fail;
	}
	err = uv_mutex_init(&w->mu);
	if (err)
		goto fail;
	err = uv_cond_init(&w->cv);
	if (err) {
		uv_mutex_destroy(&w->mu);
		goto fail;
	}
	/* Cannot fail on Linux past this point except the thread; handles need uv_close. */
	uv_async_init(w->loop, &w->async, wal_sync_async_cb);
	w->async.data = w;
	uv_unref((uv_handle_t *)&w->async);
	uv_timer_init(w->loop, &w->timer);
	w->timer.data = w;
	w->refs = 2;
	err = uv_thread_create(&w->thread, wal_sync_main, w);
	if (err) {
		set_why(why, whylen, "start the log's sync thread: %s", uv_strerror(err));
		close(w->dirfd);
		uv_close((uv_handle_t *)&w->async, handle_closed);
		uv_close((uv_handle_t *)&w->timer, handle_closed);
		return err;
	}
	w->thread_started = true;
	*out = w;
	return 0;
fail:
	if (why && !why[0])
		set_why(why, whylen, "open the log in %s: %s", o->dir, strerror(-err));
	if (w->dirfd >= 0)
		close(w->dirfd);
	free_wal(w);
	return err;
}

int wal_close(struct wal *w)
{
	if (!w)
		return 0;
	int err = 0;
	w->closing = true;
	uv_timer_stop(&w->timer);
	if (w->ready) {
		/* Let a switch in flight finish, so the buffered records have a segment. */
		uv_mutex_lock(&w->mu);
		while (w->sh.job != JOB_NONE && !w->sh.job_done)
			uv_cond_wait(&w->cv, &w->mu);
		uv_mutex_unlock(&w->mu);
		wal_sync_absorb(w);
		wal_flush_now(w, false);
	}
	uv_mutex_lock(&w->mu);
	w->sh.req = w->sh.written;
	w->sh.stop = true;
	uv_cond_broadcast(&w->cv);
	uv_mutex_unlock(&w->mu);
	uv_thread_join(&w->thread);
	if (w->ready) {
		wal_sync_absorb(w);
		uv_timer_stop(&w->timer);
		wal_sync_update_durable(w);
		if (w->failed)
			err = w->error;
		else if (w->len != w->head)
			err = -EIO;
	}
	if (w->fd >= 0)
		close(w->fd);
	close(w->dirfd);
	w->ready = false;
	uv_close((uv_handle_t *)&w->async, handle_closed);
	uv_close((uv_handle_t *)&w->timer, handle_closed);
	return err;
}

/* ---- replay ---- */

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
