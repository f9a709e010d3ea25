/* SPDX-License-Identifier: MIT */
/*
 * The write-ahead log's sync thread, and what the loop makes of its answers (wal.h:
 * "Durability", "Rotation", "Disk errors"). The thread runs every fdatasync (gathered in
 * mode always) and the jobs that switch segments: rotation when one is full, recovery after
 * a failed write or sync. The loop takes in what it reported: records now synced leave the
 * buffer, the durable LSN grows, a failure enters the failed state and starts its retry
 * timer, a finished job makes the next segment current. They share struct wal_shared, under
 * w->mu (wal_impl.h).
 */
#include "server/wal_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define WAL_EVERYSEC_NS 1000000000ull

const uint64_t wal_fsync_bucket_us[WAL_FSYNC_BUCKETS] = {
    100, 1000, 4000, 16000, 64000, 256000, UINT64_MAX,
};

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

void wal_sync_main(void *arg)
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

void wal_sync_start_job(struct wal *w, enum wal_job job)
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

void wal_sync_enter_failed(struct wal *w, int err)
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

void wal_sync_update_durable(struct wal *w)
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
void wal_sync_absorb(struct wal *w)
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

void wal_sync_async_cb(uv_async_t *a)
{
	struct wal *w = a->data;
	wal_sync_absorb(w);
	wal_sync_update_durable(w);
	maybe_unref(w);
}
