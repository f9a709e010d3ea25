/* SPDX-License-Identifier: MIT */
/*
 * Packed snapshots (DESIGN.md §6): small filters share SNAP_PACKS files, by name hash. A pack's
 * members (join, leave, claim); a pack job (struct snap_pjob): its memory readied on the
 * threadpool, its members gathered and encoded on the loop in rounds, the file written on the
 * threadpool, the result recorded in rounds; a pack written on the loop (a flush); and the packs
 * record (data_dir/packs), with its check at a start.
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/bf_hash.h"
#include "server/log.h"
#include "server/progress.h"

static void snap_pjob_on_idle(uv_idle_t *h);

/* The pack file a filter of this name goes in. */
int snap_pack_of(const struct bf_filter *f)
{
	return (int)(XXH3_64bits(bf_filter_name(f), f->name_len) % SNAP_PACKS);
}

void snap_pack_name(int pack, char out[32])
{
	snprintf(out, 32, "pack-%02d%s", pack, BF_PACK_SUFFIX);
}

/*
 * The packs record: which pack files exist, one name a line. A pack file is never removed once
 * written (one whose members all left is written empty), so a pack the record lists and the
 * data directory lacks was lost outside the daemon: the start refuses (snap_packs_check). A
 * pack joins the record once its first write is durable.
 */
#define SNAP_RECORD "packs"

/* Write the record of the packs in mask, crash-safe (bf_file_write). 0 or -errno. */
static int snap_pack_record_write(int dirfd, uint32_t mask)
{
	char text[SNAP_PACKS * 32], file[32];
	size_t len = 0;

	for (int i = 0; i < SNAP_PACKS; i++)
		if (mask & (1u << i)) {
			snap_pack_name(i, file);
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s\n", file);
		}
	return bf_file_write(dirfd, SNAP_RECORD, text, len, NULL);
}

/* Read the record into *mask. 0, -ENOENT (none), -EBADMSG (a line that names no pack), or
 * another -errno. */
static int snap_pack_record_read(int dirfd, uint32_t *mask)
{
	char text[SNAP_PACKS * 32 + 1], file[32];
	int fd = openat(dirfd, SNAP_RECORD, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	*mask = 0;
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	text[n] = '\0';
	for (char *line = text, *nl; *line; line = nl + 1) {
		int i = 0;

		nl = strchr(line, '\n');
		if (!nl)
			return -EBADMSG;
		*nl = '\0';
		for (; i < SNAP_PACKS; i++) {
			snap_pack_name(i, file);
			if (!strcmp(line, file))
				break;
		}
		if (i == SNAP_PACKS)
			return -EBADMSG;
		*mask |= 1u << i;
	}
	return 0;
}

/* Make e a member of pack. */
void snap_pack_join(struct srv_snap *sn, struct snap_entry *e, int pack)
{
	e->pack = pack;
	sn->packs[pack].n++;
	sn->packs[pack].dirty = true;
}

/*
 * Take e out of its pack: the pack must be written again without it. What its filter holds
 * stays covered by the log until then (need: the oldest record that must stay).
 */
void snap_pack_leave(struct srv_snap *sn, struct snap_entry *e, uint64_t need)
{
	struct snap_pack *pk;

	if (e->pack < 0)
		return;
	pk = &sn->packs[e->pack];
	pk->n--;
	pk->dirty = true;
	if (need < pk->gone_lsn)
		pk->gone_lsn = need;
	e->pack = -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Pack files */

void snap_pjob_free(struct snap_pjob *pj)
{
	for (size_t i = pj->apos; i < pj->n; i++) {
		pj->ents[i]->packing = false;
		snap_release(pj->ents[i]);
	}
	if (pj->sync_ready) {
		uv_cond_destroy(&pj->cond);
		uv_mutex_destroy(&pj->lock);
	}
	free(pj->ents);
	free(pj->cuts);
	free(pj->ends);
	free(pj->buf);
	free(pj);
}

/* Free a pack job's memory (its arrays and buffer), leaving pm without any. */
static void snap_pmem_release(struct snap_pmem *pm)
{
	free(pm->ents);
	free(pm->cuts);
	free(pm->ends);
	free(pm->buf);
	pm->ents = NULL;
	pm->cuts = NULL;
	pm->ends = NULL;
	pm->buf = NULL;
}

void snap_pmem_free(struct snap_pmem *pm)
{
	snap_pmem_release(pm);
	free(pm);
}

/* Threadpool: allocate a pack job's memory and write to all of it, so that it is faulted in. */
static void snap_pmem_work(uv_work_t *req)
{
	struct snap_pmem *pm = req->data;

	snap_worker_nice();
	pm->ents = malloc(pm->ncap * sizeof(*pm->ents));
	pm->cuts = malloc(pm->ncap * sizeof(*pm->cuts));
	pm->ends = malloc(pm->ncap * sizeof(*pm->ends));
	pm->buf = malloc(pm->cap);
	if (!pm->ents || !pm->cuts || !pm->ends || !pm->buf) {
		snap_pmem_release(pm);
		return;
	}
	memset(pm->ents, 0, pm->ncap * sizeof(*pm->ents));
	memset(pm->cuts, 0, pm->ncap * sizeof(*pm->cuts));
	memset(pm->ends, 0, pm->ncap * sizeof(*pm->ends));
	memset(pm->buf, 0, pm->cap);
}

static void snap_pmem_after(uv_work_t *req, int status)
{
	struct snap_pmem *pm = req->data;
	struct srv_snap *sn = pm->sn;

	(void)status; /* cancelled: its arrays are NULL, and the job allocates its own */
	pm->ready = true;
	if (sn->pmem != pm) {
		snap_pmem_free(pm);
		return;
	}
	ckpt_step(sn);
}

/* Have the memory for a job writing pack readied on the threadpool. Returns false if it
 * could not be asked for (the job then allocates its own, on the loop). */
static bool snap_pmem_ask(struct srv_snap *sn, int pack)
{
	const struct snap_pack *pk = &sn->packs[pack];
	struct snap_pmem *pm = calloc(1, sizeof(*pm));
	size_t each = 0, k = 0;

	if (!pm)
		return false;
	pm->sn = sn;
	pm->pack = pack;
	pm->req.data = pm;
	/* Room for members that join meanwhile; the bytes of the last write, or a guess from a
	 * few members the first time (too little is grown on the loop, as before). */
	pm->ncap = pk->n + pk->n / 8 + 64;
	for (size_t i = 0; !pk->last_len && i < sn->nents && i < 4096 && k < 16; i++)
		if (sn->ents[i]->pack == pack) {
			each += bf_snapshot_entry_size(sn->ents[i]->f);
			k++;
		}
	pm->cap = pk->last_len ? pk->last_len + pk->last_len / 8
			       : (k ? each / k : 0) * pm->ncap + (64u << 10);
	if (uv_queue_work(sn->loop, &pm->req, snap_pmem_work, snap_pmem_after)) {
		free(pm);
		return false;
	}
	sn->pmem = pm;
	return true;
}

/* Before a cycle's job writes pack: true while its memory is being readied (snap_pmem_after
 * steps on), false once the job can start. */
bool snap_pmem_wait(struct srv_snap *sn, int pack)
{
	struct snap_pmem *pm = sn->pmem;

	if (pm && !pm->ready)
		return true; /* one at a time: this pack's, or a pack's no longer dirty */
	if (pm && pm->pack == pack)
		return false;
	if (pm) {
		sn->pmem = NULL;
		snap_pmem_free(pm);
	}
	return snap_pmem_ask(sn, pack);
}

/* A job for pack's members as they are now; the pack counts as written from here on (a
 * failure makes it dirty again). Its memory is sn->pmem's if that was readied for this pack
 * and is large enough. NULL on allocation failure. */
static struct snap_pjob *snap_pjob_new(struct srv_snap *sn, int pack)
{
	struct snap_pack *pk = &sn->packs[pack];
	struct snap_pjob *pj = calloc(1, sizeof(*pj));
	struct snap_pmem *pm = sn->pmem;

	if (!pj)
		return NULL;
	if (pm && pm->ready && pm->pack == pack && pm->ents && pm->ncap >= pk->n) {
		pj->ents = pm->ents;
		pj->cuts = pm->cuts;
		pj->ends = pm->ends;
		pj->buf = pm->buf;
		pj->cap = pm->cap;
		pj->ncap = pm->ncap;
		pm->ents = NULL;
		pm->cuts = NULL;
		pm->ends = NULL;
		pm->buf = NULL;
	}
	if (pm && pm->ready && pm->pack == pack) {
		sn->pmem = NULL;
		snap_pmem_free(pm);
	}
	if (!pj->ents) {
		pj->ncap = pk->n ? pk->n : 1;
		pj->ents = malloc(pj->ncap * sizeof(*pj->ents));
		pj->cuts = calloc(pj->ncap, sizeof(*pj->cuts));
		pj->ends = malloc(pj->ncap * sizeof(*pj->ends));
	}
	if (!pj->ents || !pj->cuts || !pj->ends || uv_mutex_init(&pj->lock)) {
		snap_pjob_free(pj);
		return NULL;
	}
	if (uv_cond_init(&pj->cond)) {
		uv_mutex_destroy(&pj->lock);
		snap_pjob_free(pj);
		return NULL;
	}
	pj->sync_ready = true;
	pj->sn = sn;
	pj->pack = pack;
	pj->req.data = pj;
	snap_pack_name(pack, pj->file);
	pj->gathering = true;
	pj->gpos = sn->nents;
	pj->gone_lsn = pk->gone_lsn;
	if (!(sn->packs_recorded & (1u << pack)))
		pj->record = sn->packs_recorded | 1u << pack;
	pk->gone_lsn = UINT64_MAX;
	pk->dirty = false;
	/* Room for about what it held last time: growing a buffer of megabytes by doubling would
	 * copy it on the loop. Best effort. */
	if (!pj->buf && pk->last_len) {
		pj->cap = pk->last_len + pk->last_len / 8;
		pj->buf = malloc(pj->cap);
		if (!pj->buf)
			pj->cap = 0;
	}
	return pj;
}

/* Room for twice as many members in a job's arrays. 0 or -ENOMEM. */
static int snap_pjob_grow(struct snap_pjob *pj)
{
	size_t cap = pj->ncap * 2;
	struct snap_entry **ents = realloc(pj->ents, cap * sizeof(*ents));
	struct snap_pcut *cuts;
	uint64_t *ends;

	if (!ents)
		return -ENOMEM;
	pj->ents = ents;
	cuts = realloc(pj->cuts, cap * sizeof(*cuts));
	if (!cuts)
		return -ENOMEM;
	memset(cuts + pj->ncap, 0, (cap - pj->ncap) * sizeof(*cuts));
	pj->cuts = cuts;
	ends = realloc(pj->ends, cap * sizeof(*ends));
	if (!ends)
		return -ENOMEM;
	pj->ends = ends;
	pj->ncap = cap;
	return 0;
}

/*
 * Gather the pack's members into the job, walking the live entries (ents) down from gpos and
 * taking those in the pack, for about budget_ns of loop time (0: all). An entry that goes
 * meanwhile has the last one moved into its place: below the walk (met there, and taken once:
 * ->packing), or within what was walked (taken already, or one that came since, which the
 * pack's next write takes: a join makes it dirty). An entry that leaves the pack before the
 * walk meets it is not taken (the leave made the pack dirty), and one that joins it below the
 * walk is. So every member from the job's start to the walk's end is taken, once. Returns 1
 * while more remain, 0 once all are, or -ENOMEM.
 */
static int snap_pjob_gather(struct srv_snap *sn, struct snap_pjob *pj, uint64_t budget_ns)
{
	uint64_t t0 = uv_hrtime();
	size_t k = 0;

	while (pj->gpos > 0) {
		struct snap_entry *e;

		if (pj->gpos > sn->nents) {
			pj->gpos = sn->nents; /* entries went past the walk */
			continue;
		}
		e = sn->ents[--pj->gpos];
		if (e->pack != pj->pack || e->packing) {
			/* Passed over: not a step of the round (a round of round_max steps takes
			 * that many members), but the clock is read now and then. */
			if (budget_ns && (pj->gpos & 1023) == 0 && uv_hrtime() - t0 >= budget_ns)
				break;
			continue;
		}
		if (pj->n == pj->ncap && snap_pjob_grow(pj))
			return -ENOMEM;
		pj->ents[pj->n++] = e;
		e->packing = true;
		if (snap_round_over(sn, &k, pj->gpos, t0, budget_ns))
			break;
	}
	return pj->gpos > 0;
}

/* Gather the members, then encode them from pj->pos on, for about budget_ns of loop time (0:
 * all; a round that ends the gathering encodes nothing): each one an exact cut of its filter.
 * 0 or -ENOMEM. */
static int snap_pjob_encode(struct snap_pjob *pj, uint64_t budget_ns)
{
	struct srv_snap *sn = pj->sn;
	uint64_t t0 = uv_hrtime();

	if (pj->gathering) {
		int rc = snap_pjob_gather(sn, pj, budget_ns ? SNAP_ROUND_NS : 0);

		if (rc <= 0)
			pj->gathering = false;
		if (rc < 0)
			return rc;
		if (budget_ns)
			return 0;
	}

	while (pj->pos < pj->n) {
		struct snap_entry *e = pj->ents[pj->pos];
		const struct bf_filter *f = e->f;

		if (f) {
			size_t need = bf_snapshot_entry_size(f);

			if (pj->len + need > pj->cap) {
				size_t cap = pj->cap ? pj->cap * 2 : 64 * 1024;
				unsigned char *b;

				while (cap < pj->len + need)
					cap *= 2;
				b = realloc(pj->buf, cap);
				if (!b)
					return -ENOMEM;
				pj->buf = b;
				pj->cap = cap;
			}
			pj->cuts[pj->pos].cut = f->changes;
			pj->cuts[pj->pos].need = snap_need(sn, f);
			pj->cuts[pj->pos].in = true;
			bf_snapshot_entry_encode(f, snap_next_gen(pj->sn), pj->buf + pj->len);
			pj->len += need;
			pj->ends[pj->count++] = pj->len;
		}
		pj->pos++;
		if (budget_ns && (pj->pos & 63) == 0 && uv_hrtime() - t0 >= budget_ns)
			break;
	}
	return 0;
}

/* Loop: record a pack job's result: the pack's at once, its members from pj->apos on for about
 * budget_ns of loop time (0: all of them), each let go once recorded (a pack of 62,500 took
 * about 5 ms). Returns true once all are. */
static bool snap_pjob_record(struct srv_snap *sn, struct snap_pjob *pj, uint64_t budget_ns)
{
	struct snap_pack *pk = &sn->packs[pj->pack];
	uint64_t now = (uint64_t)time(NULL), t0 = uv_hrtime();
	size_t k = 0;

	if (!pj->applied && pj->rc) {
		pj->applied = true;
		pk->dirty = true;
		if (pj->gone_lsn < pk->gone_lsn)
			pk->gone_lsn = pj->gone_lsn;
		sn->st.failures++;
		sn->st.last_failure_unix = now;
		sn->st.last_error = pj->rc;
		snprintf(sn->st.last_error_msg, sizeof(sn->st.last_error_msg),
			 "pack %s (%zu filters): %s: %s", pj->file, pj->n,
			 pj->step ? pj->step : "?", strerror(-pj->rc));
		sn->cycle_failed += pj->count ? pj->count : 1;
		srv_log(SRV_LOG_ERR, "snapshot of %" PRIu32 " filters failed: %s/%s: %s: %s; %s",
			pj->count, sn->dir, pj->file, pj->step ? pj->step : "?", strerror(-pj->rc),
			pj->step && !strcmp(pj->step, "fsync dir")
			    ? "the new pack is in place but may not survive a power loss"
			    : "the previous pack is kept");
	} else if (!pj->applied) {
		pj->applied = true;
		sn->packs_recorded |= pj->record;
		sn->st.saves++;
		sn->st.saved_bytes += pj->len;
		pk->last_len = pj->len;
		sn->st.last_success_unix = now;
		sn->ctx->last_save_unix = now;
		sn->cycle_saved += pj->count;
		srv_log(SRV_LOG_DEBUG,
			"snapshot of %" PRIu32 " filters in %s: %zu bytes, encoded in %" PRIu64
			" ms of loop time (longest pause %" PRIu64 " us), written in %" PRIu64
			" ms",
			pj->count, pj->file, pj->len, snap_ms(pj->copy_ns), pj->copy_max_ns / 1000,
			snap_ms(pj->write_ns));
	}
	while (pj->apos < pj->n) {
		struct snap_entry *e = pj->ents[pj->apos];
		const struct snap_pcut *c = &pj->cuts[pj->apos];

		if (e->f && c->in && pj->rc) {
			snap_set_failed(sn, e, true);
		} else if (e->f && c->in) {
			if (e->failed)
				srv_log(SRV_LOG_NOTICE,
					"snapshot of filter '%s' (%s) written again after failures",
					bf_filter_name(e->f), pj->file);
			e->on_disk = true;
			snap_set_failed(sn, e, false);
			e->saved_changes = c->cut;
			e->need_lsn = c->need;
			/* Packed now: a file of its own from before is older, and no longer
			 * needed. */
			if (e->own_file && e->pack == pj->pack) {
				char file[BF_SNAPSHOT_NAME_MAX];

				if (e->filed) {
					e->filed = false;
					snap_files_removing(sn);
				}
				snap_unlink(sn, snap_file(e, file), "filter packed");
				e->own_file = false;
			}
		}
		e->packing = false;
		snap_release(e);
		pj->apos++;
		if (snap_round_over(sn, &k, pj->apos, t0, budget_ns))
			break;
	}
	return pj->apos == pj->n;
}

/* Loop: record all of a pack job's result (what is not yet). */
void snap_pjob_apply(struct srv_snap *sn, struct snap_pjob *pj)
{
	snap_pjob_record(sn, pj, 0);
}

/* Threadpool: write a pack job's file. */
static void snap_pjob_work(uv_work_t *req)
{
	struct snap_pjob *pj = req->data;
	struct srv_progress progress;
	struct bf_io_progress pr = {srv_progress_io, &progress};
	const char *step = NULL;
	uint64_t t0;
	int rc;

	snap_worker_nice();
	srv_progress_begin(&progress, pj->len, pj->progress_bytes, pj->progress_interval,
			   "checkpoint of %s (%" PRIu32 " filters)", pj->file, pj->count);
	t0 = uv_hrtime();
	rc = bf_pack_write_progress(pj->sn->dirfd, pj->file, pj->buf, pj->ends, pj->count, &pr,
				    &step);
	srv_progress_end(&progress, rc);
	if (!rc && pj->record && (rc = snap_pack_record_write(pj->sn->dirfd, pj->record)))
		step = "write the packs record";
	/* Freed here, not on the loop (megabytes unmapped); the loop reads neither any more. */
	free(pj->buf);
	free(pj->ends);
	pj->buf = NULL;
	pj->ends = NULL;
	uv_mutex_lock(&pj->lock);
	pj->rc = rc;
	pj->step = step;
	pj->write_ns = uv_hrtime() - t0;
	pj->done = true;
	uv_cond_signal(&pj->cond);
	uv_mutex_unlock(&pj->lock);
}

static void snap_pjob_after(uv_work_t *req, int status)
{
	struct snap_pjob *pj = req->data;
	struct srv_snap *sn = pj->sn;

	if (status == UV_ECANCELED && !pj->done) {
		pj->rc = -ECANCELED;
		pj->step = "queue";
	}
	if (sn->pjob == pj && !sn->stopping && !snap_pjob_record(sn, pj, SNAP_ROUND_NS)) {
		pj->recording = true;
		uv_idle_start(&sn->pidle, snap_pjob_on_idle);
		return;
	}
	snap_pjob_apply(sn, pj);
	if (sn->pjob == pj)
		sn->pjob = NULL;
	snap_pjob_free(pj);
	ckpt_step(sn);
}

/* The encoded job goes to the threadpool. Returns 0, or -1 if it ended here (recorded). */
static int snap_pjob_queue(struct srv_snap *sn, struct snap_pjob *pj)
{
	int rc;

	pj->progress_bytes = sn->cfg->log_progress_bytes;
	pj->progress_interval = sn->cfg->log_progress_interval;
	rc = uv_queue_work(sn->loop, &pj->req, snap_pjob_work, snap_pjob_after);
	if (rc) {
		pj->rc = rc;
		pj->step = "queue";
		snap_pjob_apply(sn, pj);
		snap_pjob_free(pj);
		sn->pjob = NULL;
		return -1;
	}
	return 0;
}

/* One round of encoding; the last hands the job to the threadpool. */
static void snap_pjob_on_idle(uv_idle_t *h)
{
	struct srv_snap *sn = h->data;
	struct snap_pjob *pj = sn->pjob;
	uint64_t t0 = uv_hrtime(), dt;
	int rc;

	if (pj && pj->recording) {
		if (!snap_pjob_record(sn, pj, SNAP_ROUND_NS))
			return;
		uv_idle_stop(h);
		sn->pjob = NULL;
		snap_pjob_free(pj);
		ckpt_step(sn);
		return;
	}
	if (!pj || !sn->pencoding) {
		uv_idle_stop(h);
		return;
	}
	rc = snap_pjob_encode(pj, SNAP_PACK_ROUND_NS);
	dt = uv_hrtime() - t0;
	pj->copy_ns += dt;
	if (dt > pj->copy_max_ns)
		pj->copy_max_ns = dt;
	if (!rc && (pj->gathering || pj->pos < pj->n))
		return;
	uv_idle_stop(h);
	sn->pencoding = false;
	if (rc) {
		pj->rc = rc;
		pj->step = "copy";
		snap_pjob_apply(sn, pj);
		snap_pjob_free(pj);
		sn->pjob = NULL;
	} else if (!snap_pjob_queue(sn, pj)) {
		return;
	}
	ckpt_step(sn);
}

/* Give up a pack job still encoding: the pack stays dirty. */
void snap_pjob_abort(struct srv_snap *sn)
{
	struct snap_pjob *pj = sn->pjob;
	struct snap_pack *pk;

	if (!pj || !sn->pencoding)
		return;
	pk = &sn->packs[pj->pack];
	uv_idle_stop(&sn->pidle);
	sn->pencoding = false;
	sn->pjob = NULL;
	pk->dirty = true;
	if (pj->gone_lsn < pk->gone_lsn)
		pk->gone_lsn = pj->gone_lsn;
	snap_pjob_free(pj);
}

/* Wait for a pack job on the threadpool to finish, then record its result, all of it (a
 * member's recorded later would take it back to what the pack holds). */
void snap_pjob_settle(struct srv_snap *sn)
{
	struct snap_pjob *pj = sn->pjob;

	if (!pj || sn->pencoding)
		return;
	if (!pj->applied) {
		uv_mutex_lock(&pj->lock);
		while (!pj->done)
			uv_cond_wait(&pj->cond, &pj->lock);
		uv_mutex_unlock(&pj->lock);
	}
	snap_pjob_apply(sn, pj);
}

/* Start writing pack in the background (at shutdown: encoded at once). 0 if a job now runs,
 * -1 if not (a failure is recorded). */
int snap_pack_start(struct srv_snap *sn, int pack)
{
	struct snap_pjob *pj;

	/* A member that left for a file of its own is listed before the pack lets it go. */
	if (snap_files_sync(sn)) {
		sn->packs[pack].dirty = true;
		sn->cycle_failed++;
		return -1;
	}
	pj = snap_pjob_new(sn, pack);

	if (!pj) {
		sn->packs[pack].dirty = true;
		sn->cycle_failed++;
		sn->st.failures++;
		srv_log(SRV_LOG_ERR, "snapshot of pack %d: out of memory; retrying later", pack);
		return -1;
	}
	sn->pjob = pj;
	/* The next dirty pack's memory is readied while this one is encoded and written. */
	for (int next = pack + 1; !sn->stopping && !sn->pmem && next < SNAP_PACKS; next++)
		if (sn->packs[next].dirty) {
			snap_pmem_ask(sn, next);
			break;
		}
	if (sn->stopping) {
		pj->rc = snap_pjob_encode(pj, 0);
		if (pj->rc) {
			pj->step = "copy";
			snap_pjob_apply(sn, pj);
			snap_pjob_free(pj);
			sn->pjob = NULL;
			return -1;
		}
		return snap_pjob_queue(sn, pj);
	}
	sn->pencoding = true;
	uv_idle_start(&sn->pidle, snap_pjob_on_idle);
	return 0;
}

/* Write pack now, on the loop thread (a flush). 0 or the failure's negative errno. */
int snap_pack_write_now(struct srv_snap *sn, int pack)
{
	struct snap_pjob *pj;
	uint64_t t0;

	/* Never two writers of one file, never an older state over a newer one. */
	if (sn->pjob && sn->pjob->pack == pack) {
		if (sn->pencoding)
			snap_pjob_abort(sn);
		else
			snap_pjob_settle(sn);
	}
	/* A member that left for a file of its own is listed before the pack lets it go. */
	if (snap_files_sync(sn))
		return -EIO;
	pj = snap_pjob_new(sn, pack);
	if (!pj) {
		sn->packs[pack].dirty = true;
		sn->st.failures++;
		srv_log(SRV_LOG_ERR, "snapshot of pack %d: out of memory", pack);
		return -ENOMEM;
	}
	t0 = uv_hrtime();
	pj->rc = snap_pjob_encode(pj, 0);
	pj->step = "copy";
	pj->copy_ns = pj->copy_max_ns = uv_hrtime() - t0;
	if (!pj->rc) {
		t0 = uv_hrtime();
		pj->rc =
		    bf_pack_write(sn->dirfd, pj->file, pj->buf, pj->ends, pj->count, &pj->step);
		if (!pj->rc && pj->record &&
		    (pj->rc = snap_pack_record_write(sn->dirfd, pj->record)))
			pj->step = "write the packs record";
		pj->write_ns = uv_hrtime() - t0;
	}
	int rc = pj->rc;
	snap_pjob_apply(sn, pj);
	snap_pjob_free(pj);
	return rc;
}

/* Entries dirty since their last snapshot that go in a pack mark it for writing (joining it
 * if they had a file of their own). Returns false for e if it is written as a file of its
 * own instead. */
bool snap_pack_claim(struct srv_snap *sn, struct snap_entry *e)
{
	if (!snap_packable(sn, e->f))
		return false;
	if (e->pack < 0)
		snap_pack_join(sn, e, snap_pack_of(e->f));
	sn->packs[e->pack].dirty = true;
	return true;
}

/* True if pack's file is in the data directory. */
static bool snap_pack_exists(const struct srv_snap *sn, int pack)
{
	char file[32];
	struct stat sb;

	snap_pack_name(pack, file);
	return fstatat(sn->dirfd, file, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/*
 * Before the load: every pack the record lists is there, or was set aside as corrupt by an
 * earlier start (reported then). A missing one stops the start, naming it, unless the operator
 * accepts the loss (--accept-missing-files): then it leaves the record. A data directory
 * without a record (new, or from before it was kept) gets one listing the packs it has. 0, or
 * -ENOENT (missing), or the -errno of reading or writing the record.
 */
int snap_packs_check(struct srv_snap *sn)
{
	uint32_t mask, missing = 0;
	char file[32], aside[48];
	struct stat sb;
	int rc = snap_pack_record_read(sn->dirfd, &mask);

	if (rc == -ENOENT) {
		for (int i = 0; i < SNAP_PACKS; i++)
			mask |= snap_pack_exists(sn, i) ? 1u << i : 0;
		rc = mask ? snap_pack_record_write(sn->dirfd, mask) : 0;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR, "%s/%s: %s; not starting", sn->dir, SNAP_RECORD,
			rc == -EBADMSG ? "names a file that is no pack" : strerror(-rc));
		return rc;
	}
	for (int i = 0; i < SNAP_PACKS; i++) {
		if (!(mask & (1u << i)) || snap_pack_exists(sn, i))
			continue;
		snap_pack_name(i, file);
		snprintf(aside, sizeof(aside), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (fstatat(sn->dirfd, aside, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		missing |= 1u << i;
		srv_log(sn->accept_missing ? SRV_LOG_WARNING : SRV_LOG_ERR,
			"snapshot %s/%s is missing (%s/%s lists it): the small filters it held "
			"are lost, but for those the write-ahead log holds from their creation%s",
			sn->dir, file, sn->dir, SNAP_RECORD,
			sn->accept_missing ? "; going on without it, as asked" : "");
	}
	if (missing && !sn->accept_missing) {
		srv_log(SRV_LOG_ERR, "not starting (put the files back, or start once with "
				     "--accept-missing-files to go on without them)");
		return -ENOENT;
	}
	sn->packs_recorded = mask & ~missing;
	return missing ? snap_pack_record_write(sn->dirfd, sn->packs_recorded) : 0;
}
