/* SPDX-License-Identifier: MIT */
/*
 * A filter's own file written in the background (struct snap_job): the copy's memory faulted in
 * on the threadpool, the cut taken on the loop (whole, or a large plain filter in slices), the
 * write on the threadpool, its result recorded on the loop. The cycle, the waits and the
 * shutdown start them (checkpoint.c); a write on the loop settles the one in flight first.
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "server/log.h"
#include "server/progress.h"

static void snap_job_free(struct snap_job *job)
{
	if (job->owned)
		bf_filter_free(job->f);
	if (job->sync_ready) {
		uv_cond_destroy(&job->cond);
		uv_mutex_destroy(&job->lock);
	}
	free(job);
}

static struct snap_job *snap_job_new(struct srv_snap *sn, struct snap_entry *e)
{
	struct snap_job *job = calloc(1, sizeof(*job));

	if (!job)
		return NULL;
	if (uv_mutex_init(&job->lock)) {
		free(job);
		return NULL;
	}
	if (uv_cond_init(&job->cond)) {
		uv_mutex_destroy(&job->lock);
		free(job);
		return NULL;
	}
	job->sync_ready = true;
	job->sn = sn;
	job->e = e;
	job->cut = e->f->changes;
	job->need = snap_need(sn, e->f);
	job->generation = snap_next_gen(sn);
	job->req.data = job;
	snap_file(e, job->file);
	return job;
}

/* Threadpool: write the job's filter. */
static void snap_job_work(uv_work_t *req)
{
	struct snap_job *job = req->data;
	struct srv_progress progress;
	struct bf_io_progress pr = {srv_progress_io, &progress};
	const char *step = NULL;
	uint64_t t0;
	int rc;

	snap_worker_nice();
	srv_progress_begin(&progress, bf_snapshot_header_len(job->f) + bf_filter_bytes(job->f),
			   job->progress_bytes, job->progress_interval, "checkpoint of filter '%s'",
			   bf_filter_name(job->f));
	t0 = uv_hrtime();
	rc = bf_snapshot_write_progress(job->f, job->generation, job->sn->dirfd, job->file, &pr,
					&step);
	srv_progress_end(&progress, rc);

	uv_mutex_lock(&job->lock);
	job->rc = rc;
	job->step = step;
	job->write_ns = uv_hrtime() - t0;
	job->done = true;
	uv_cond_signal(&job->cond);
	uv_mutex_unlock(&job->lock);
}

/* Loop: record a finished job's result (once). */
static void snap_job_apply(struct srv_snap *sn, struct snap_job *job)
{
	struct snap_entry *e = job->e;

	if (job->applied)
		return;
	job->applied = true;
	snap_record(sn, e, job->file, bf_filter_name(job->f), job->rc, job->step, job->cut,
		    job->need, BF_SNAPSHOT_HEADER_LEN + bf_filter_bytes(job->f), job->write_ns,
		    sn->stopping ? "final" : "periodic");
	if (job->rc == 0 && job->copy_ns)
		sn->st.last_copy_pause_us = job->copy_max_ns / 1000;
	if (job->rc == 0 && job->copy_ns)
		srv_log(SRV_LOG_DEBUG,
			"snapshot of filter '%s': copy took %" PRIu64 " ms of loop time, longest "
			"pause %" PRIu64 " us",
			bf_filter_name(job->f), snap_ms(job->copy_ns), job->copy_max_ns / 1000);
	if (job->remove_after)
		snap_unlink_later(sn, job->file, "filter dropped");
	e->busy = false;
	snap_release(e);
}

/* Wait for the job on the threadpool to finish writing, then record its result. */
void snap_job_settle(struct srv_snap *sn)
{
	struct snap_job *job = sn->job;

	if (!job || job->applied)
		return;
	uv_mutex_lock(&job->lock);
	while (!job->done)
		uv_cond_wait(&job->cond, &job->lock);
	uv_mutex_unlock(&job->lock);
	snap_job_apply(sn, job);
}

static void snap_job_after(uv_work_t *req, int status)
{
	struct snap_job *job = req->data;
	struct srv_snap *sn = job->sn;

	if (status == UV_ECANCELED && !job->done) {
		job->rc = -ECANCELED;
		job->step = "queue";
		job->done = true;
	}
	snap_job_apply(sn, job);
	if (sn->job == job)
		sn->job = NULL;
	snap_job_free(job);
	ckpt_step(sn);
}

/* Hand a job whose filter is ready to the threadpool. */
static void snap_job_queue(struct srv_snap *sn, struct snap_job *job)
{
	int rc;

	job->progress_bytes = sn->cfg->log_progress_bytes;
	job->progress_interval = sn->cfg->log_progress_interval;
	rc = uv_queue_work(sn->loop, &job->req, snap_job_work, snap_job_after);

	if (rc) {
		job->rc = rc;
		job->step = "queue";
		job->done = true;
		snap_job_apply(sn, job);
		snap_job_free(job);
		return;
	}
	sn->job = job;
}

/* End a job that will not be written (nothing is recorded). */
static void snap_job_drop(struct snap_job *job)
{
	if (job->e) {
		job->e->busy = false;
		snap_release(job->e);
	}
	snap_job_free(job);
}

/* Give up a copy in progress; its filter stays dirty. */
void snap_job_copy_abort(struct srv_snap *sn)
{
	struct snap_job *job = sn->copy;

	if (!job)
		return;
	sn->copy = NULL;
	job->e->busy = false;
	snap_release(job->e);
	job->e = NULL;
	if (job->prefaulting) {
		job->aborted = true; /* the threadpool still writes its memory: freed after */
		return;
	}
	uv_idle_stop(&sn->idle);
	snap_job_free(job);
}

/* One slice of a plain filter's copy; the last one hands the copy to the threadpool. */
static void snap_job_on_idle(uv_idle_t *h)
{
	struct srv_snap *sn = h->data;
	struct snap_job *job = sn->copy;
	const struct bf_filter *live;
	struct bf_filter *c;
	uint64_t t0, dt;

	if (!job || job->prefaulting) {
		uv_idle_stop(h);
		return;
	}
	live = job->e->f;
	c = job->f;
	t0 = uv_hrtime();
	job->copy_off += bf_filter_copy_body(c, live, job->copy_off, SRV_SNAP_SLICE);
	/* The last slice takes the counts as of now, never fewer than the bits copied hold (of
	 * the layers the copy has: a layer added meanwhile is the next snapshot's). */
	bool done = job->copy_off >= bf_filter_bytes(c);
	if (done)
		bf_filter_copy_counts(c, live);
	dt = uv_hrtime() - t0;
	job->copy_ns += dt;
	if (dt > job->copy_max_ns)
		job->copy_max_ns = dt;
	if (!done)
		return;

	uv_idle_stop(h);
	sn->copy = NULL;
	if (job->e->on_disk && job->e->saved_changes >= job->cut) {
		/* A flush wrote a newer state while we copied. */
		snap_job_drop(job);
		ckpt_step(sn);
		return;
	}
	snap_job_queue(sn, job);
	if (!sn->job)
		ckpt_step(sn);
}

/*
 * Take the cut of a job whose memory is ready: a counting or small filter is copied whole,
 * now (exact); a large plain one in slices from the next loop iterations on. Returns 0 if the
 * job goes on (slicing, or queued for its write), -1 if it ended (failure recorded, or the
 * filter is clean by now). Does not start other jobs.
 */
static int snap_job_copy_begin(struct srv_snap *sn, struct snap_job *job)
{
	struct snap_entry *e = job->e;
	const struct bf_filter *f = e->f;
	struct bf_filter *c = job->f;
	uint64_t t0 = uv_hrtime();
	int rc;

	if (!snap_dirty(e)) {
		snap_job_drop(job); /* a flush wrote it meanwhile */
		return -1;
	}
	rc = bf_filter_copy_grow(c, f);
	if (!rc)
		rc = bf_filter_copy_meta(c, f);
	if (rc) {
		snap_record(sn, e, job->file, bf_filter_name(f), rc, "copy", 0, 0, 0, 0,
			    "periodic");
		snap_job_drop(job);
		return -1;
	}
	job->cut = f->changes;
	job->need = snap_need(sn, f);
	if (f->params->type == BF_TYPE_COUNTING || bf_filter_bytes(f) <= SRV_SNAP_SLICE) {
		bf_filter_copy_body(c, f, 0, bf_filter_bytes(f));
		job->copy_ns = job->copy_max_ns = uv_hrtime() - t0;
		snap_job_queue(sn, job);
		return sn->job ? 0 : -1;
	}
	job->copy_off = 0;
	sn->copy = job;
	uv_idle_start(&sn->idle, snap_job_on_idle);
	return 0;
}

/* Threadpool: fault in the copy's memory, so the loop's copy is a plain memcpy. */
static void snap_job_prefault_work(uv_work_t *req)
{
	struct snap_job *job = req->data;

	snap_worker_nice();
	bf_filter_prefault(job->f);
}

static void snap_job_prefault_after(uv_work_t *req, int status)
{
	struct snap_job *job = req->data;
	struct srv_snap *sn = job->sn;

	(void)status; /* cancelled or not, the memory is usable */
	job->prefaulting = false;
	if (job->aborted) {
		snap_job_free(job);
		return;
	}
	sn->copy = NULL;
	if (snap_job_copy_begin(sn, job))
		ckpt_step(sn);
}

/*
 * Start the background write of e: at shutdown the live filter itself; else a copy, whose
 * memory is allocated here and (if large) faulted in on the threadpool before the loop copies
 * into it. Returns 0 if something now runs (preparation, copy or write), -1 if not (a failure
 * is recorded). Does not start other jobs.
 */
int snap_job_start(struct srv_snap *sn, struct snap_entry *e)
{
	const struct bf_filter *f = e->f;
	struct snap_job *job = snap_job_new(sn, e);
	int rc;

	if (!job) {
		char file[BF_SNAPSHOT_NAME_MAX];

		snap_record(sn, e, snap_file(e, file), bf_filter_name(f), -ENOMEM, "copy", 0, 0, 0,
			    0, "periodic");
		return -1;
	}
	e->busy = true;
	if (sn->stopping) {
		job->f = e->f;
		job->owned = false;
		snap_job_queue(sn, job);
		return sn->job ? 0 : -1;
	}
	job->owned = true;
	rc = bf_filter_copy_new(f, &job->f);
	if (rc) {
		snap_record(sn, e, job->file, bf_filter_name(f), rc, "copy", 0, 0, 0, 0,
			    "periodic");
		snap_job_drop(job);
		return -1;
	}
	if (bf_filter_bytes(job->f) >= SNAP_PREFAULT_MIN &&
	    uv_queue_work(sn->loop, &job->req, snap_job_prefault_work, snap_job_prefault_after) ==
		0) {
		job->prefaulting = true;
		sn->copy = job;
		return 0;
	}
	return snap_job_copy_begin(sn, job);
}
