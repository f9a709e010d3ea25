/* SPDX-License-Identifier: MIT */
/*
 * When filters are written: the checkpoint cycle (every snapshot_interval, BGSAVE, SAVE), which
 * lists the changed filters in rounds and writes them one at a time, files of their own first,
 * then the packs; the waits of a command for a filter's write (flush NAME, a large close) and of
 * SAVE and flush of all for a cycle; the shutdown pass; and the oldest log record the snapshots
 * still need (srv_snap_log_needed).
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "server/log.h"

static void ckpt_cycle_start(struct srv_snap *sn);

/* ---------------------------------------------------------------------------------------- */
/* Cycles */

void ckpt_pending_clear(struct srv_snap *sn)
{
	for (size_t i = sn->pending_pos; i < sn->npending; i++) {
		struct snap_entry *e = sn->pending[i];

		e->queued = false;
		snap_release(e);
	}
	sn->npending = sn->pending_pos = 0;
}

/* Start listing the dirty entries for a cycle (ckpt_pending_round()). 0 or -ENOMEM. */
static int ckpt_pending_begin(struct srv_snap *sn)
{
	ckpt_pending_clear(sn);
	uv_idle_stop(&sn->fidle);
	sn->fill_pos = 0;
	/* Room for every entry there is now: the walk visits no more places than that. */
	if (sn->pending_cap < sn->nents) {
		struct snap_entry **p = realloc(sn->pending, sn->nents * sizeof(*p));

		if (!p)
			return -ENOMEM;
		sn->pending = p;
		sn->pending_cap = sn->nents;
	}
	sn->fill_pos = sn->nents;
	sn->pack_pos = 0;
	return 0;
}

/*
 * List the dirty entries for about budget_ns of loop time (0: all): those written as a file
 * of their own in pending, the others mark their pack. Between rounds, a filter dropped has
 * the last entry moved into its place: one not walked yet (met later) or one walked already
 * (met again, listed once: ->queued); a filter created goes past the walk, and is written by
 * its pack (joining marked it dirty) or by the next cycle, as is one changed after its visit.
 * So every entry dirty when the listing began and still live is listed, and none dead.
 * Returns true once the listing is over.
 */
static bool ckpt_pending_round(struct srv_snap *sn, uint64_t budget_ns)
{
	uint64_t t0 = uv_hrtime();
	size_t k = 0;

	while (sn->fill_pos > 0) {
		struct snap_entry *e;

		if (sn->fill_pos > sn->nents) {
			sn->fill_pos = sn->nents; /* entries left past the walk */
			continue;
		}
		e = sn->ents[--sn->fill_pos];
		if (!e->queued && snap_dirty(e) && !snap_pack_claim(sn, e)) {
			e->queued = true;
			sn->pending[sn->npending++] = e;
		}
		if (snap_round_over(sn, &k, sn->fill_pos, t0, budget_ns))
			break;
	}
	return sn->fill_pos == 0;
}

/* List every dirty entry at once (shutdown). 0 or -ENOMEM. */
static int ckpt_pending_fill(struct srv_snap *sn)
{
	int rc = ckpt_pending_begin(sn);

	if (!rc)
		ckpt_pending_round(sn, 0);
	return rc;
}

static bool ckpt_packs_dirty(const struct srv_snap *sn)
{
	for (int i = 0; i < SNAP_PACKS; i++)
		if (sn->packs[i].dirty)
			return true;
	return false;
}

static void ckpt_cycle_end(struct srv_snap *sn)
{
	uint64_t now = uv_now(sn->loop);
	uint64_t ms = now - sn->cycle_started_ms;

	if (snap_files_sync(sn))
		sn->cycle_failed++;

	sn->cycle_running = false;
	sn->ctx->save_in_progress = false;
	sn->ctx->last_save_failed = sn->cycle_failed != 0;
	sn->next_due_ms = sn->cycle_started_ms + (uint64_t)sn->cfg->snapshot_interval * 1000;
	if (sn->stopping) {
		sn->final_failed = sn->final_failed || sn->cycle_failed;
		if (sn->cycle_failed)
			srv_log(SRV_LOG_ERR,
				"final snapshot: %" PRIu64 " filters written, %" PRIu64 " failed",
				sn->cycle_saved, sn->cycle_failed);
		else if (sn->cycle_saved)
			srv_log(SRV_LOG_INFO,
				"final snapshot: %" PRIu64 " filters written in %" PRIu64 " ms",
				sn->cycle_saved, ms);
		return;
	}
	if (sn->cycle_saved || sn->cycle_failed)
		srv_log(SRV_LOG_DEBUG,
			"snapshot cycle: %" PRIu64 " filters written, %" PRIu64
			" failed, in %" PRIu64 " ms",
			sn->cycle_saved, sn->cycle_failed, ms);
}

/* Forget the waits (shutdown): their filters stay in memory; the shutdown pass writes them. */
void ckpt_waits_clear(struct srv_snap *sn)
{
	while (sn->nwaits) {
		struct snap_entry *e = sn->waits[--sn->nwaits];

		e->waited = e->wait_written = e->wait_close = false;
		snap_release(e);
	}
	sn->save_again = sn->save_waiting = false;
}

/* A wait ended: the commands that waited run again, from the loop (never from inside a
 * command or ckpt_step(), which a wait may end in). A save asked for while a cycle ran starts
 * the next cycle first. */
static void ckpt_on_cidle(uv_idle_t *h)
{
	struct srv_snap *sn = h->data;

	uv_idle_stop(h);
	if (sn->save_again && !sn->cycle_running && !sn->stopping)
		ckpt_cycle_start(sn); /* clears save_again (else the next tick tries again) */
	if (sn->paged_in)
		sn->paged_in(sn->paged_arg);
}

/* Add e to the waits (its write starts at the next ckpt_step). 0 or -ENOMEM. */
int ckpt_wait_add(struct srv_snap *sn, struct snap_entry *e, bool close)
{
	if (!e->waited) {
		if (sn->nwaits == sn->waits_cap) {
			size_t cap = sn->waits_cap ? sn->waits_cap * 2 : 4;
			struct snap_entry **p = realloc(sn->waits, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			sn->waits = p;
			sn->waits_cap = cap;
		}
		sn->waits[sn->nwaits++] = e;
		e->waited = true;
		e->wait_error = 0;
	}
	e->wait_close = e->wait_close || close;
	return 0;
}

/* e's wait is over (written, paged out, failed, or its filter gone): the commands waiting for
 * it run again (ckpt_on_cidle), and are answered rc (told once). */
static void ckpt_wait_end(struct srv_snap *sn, size_t i, int rc)
{
	struct snap_entry *e = sn->waits[i];

	sn->waits[i] = sn->waits[--sn->nwaits];
	e->waited = e->wait_written = e->wait_close = false;
	e->wait_error = (int16_t)(e->f ? rc : 0);
	snap_release(e);
	uv_idle_start(&sn->cidle, ckpt_on_cidle);
}

/* e's write for its wait: its pack's (a flush of a packed filter) or a file of its own (a
 * close always: the load on its next use reads that file). 0 if it runs, -1 if not (a failure
 * is recorded, or it was clean by now). */
static int ckpt_wait_write(struct srv_snap *sn, struct snap_entry *e)
{
	e->wait_written = true;
	if (!e->wait_close && snap_pack_claim(sn, e))
		return snap_pack_start(sn, e->pack);
	return snap_job_start(sn, e);
}

/*
 * Nothing runs: go on with the waits, one write at a time. A flush's ends once its filter is
 * clean (a write holds it as it is); a close's once a write of its own file holds it as it is,
 * and it is paged out. Either ends with the write's error if that failed; a filter that
 * changed during its write is written again. Returns true if a write started (ckpt_step waits
 * for it).
 */
static bool ckpt_waits_step(struct srv_snap *sn)
{
	while (sn->nwaits) {
		size_t i = sn->nwaits - 1;
		struct snap_entry *e = sn->waits[i];

		if (sn->job || sn->copy || sn->pjob)
			return true; /* one write at a time */
		if (!e->f || e->f->paged) {
			ckpt_wait_end(sn, i, 0); /* dropped, renamed or cleared meanwhile */
		} else if (e->wait_written && e->failed) {
			ckpt_wait_end(sn, i, -EIO);
		} else if (!snap_dirty(e) && !e->wait_close) {
			ckpt_wait_end(sn, i, 0);
		} else if (!snap_dirty(e) && e->own_file && e->pack < 0) {
			int rc = bf_filter_page_out(e->f);

			if (!rc)
				srv_log(SRV_LOG_DEBUG, "filter '%s' paged out",
					bf_filter_name(e->f));
			ckpt_wait_end(sn, i, rc);
		} else if (ckpt_wait_write(sn, e) == 0) {
			return true;
		} else if (!e->failed && snap_dirty(e)) {
			/* Not started: out of memory for a pack's job (its failure is logged), or
			 * it ends above, next round (failed, or clean by now). */
			ckpt_wait_end(sn, i, -ENOMEM);
		}
	}
	return false;
}

/* A cycle ended (or found nothing to write): the saves waiting for it are answered. */
static void ckpt_cycle_over(struct srv_snap *sn)
{
	sn->cycles_done = sn->cycles_begun;
	if (sn->cycle_failed)
		sn->cycle_failed_at = sn->cycles_done;
	if (sn->save_waiting || sn->save_again) {
		sn->save_waiting = false;
		uv_idle_start(&sn->cidle, ckpt_on_cidle);
	}
}

/* Start the next pending write if nothing runs; end the cycle when none is left. */
void ckpt_step(struct srv_snap *sn)
{
	while (!sn->job && !sn->copy && !sn->pjob) {
		struct snap_entry *e;

		if (!sn->stopping && ckpt_waits_step(sn))
			continue;
		if (sn->pending_pos == sn->npending) {
			if (sn->fill_pos)
				return; /* ckpt_on_fidle steps on once all are listed */
			/* Files of their own first (a filter that left its pack is then on disk),
			 * then the packs, each once its memory is ready (not at shutdown). */
			if (sn->cycle_running && sn->pack_pos < SNAP_PACKS) {
				int pack = sn->pack_pos;

				if (sn->packs[pack].dirty && !sn->stopping &&
				    snap_pmem_wait(sn, pack))
					return;
				sn->pack_pos++;
				if (sn->packs[pack].dirty)
					snap_pack_start(sn, pack);
				continue;
			}
			sn->npending = sn->pending_pos = 0;
			if (sn->cycle_running) {
				ckpt_cycle_end(sn);
				ckpt_cycle_over(sn);
			}
			return;
		}
		e = sn->pending[sn->pending_pos++];
		e->queued = false;
		if (!e->f) {
			snap_release(e);
			continue;
		}
		if (!snap_dirty(e) || e->busy)
			continue;
		snap_job_start(sn, e);
	}
}

/* The cycle's entries are listed: write them, or end it at once if nothing changed. */
static void ckpt_cycle_listed(struct srv_snap *sn)
{
	if (!sn->npending && !ckpt_packs_dirty(sn)) {
		(void)snap_files_sync(sn); /* files removed since */
		sn->cycle_running = false;
		sn->ctx->save_in_progress = false;
		sn->next_due_ms =
		    sn->cycle_started_ms + (uint64_t)sn->cfg->snapshot_interval * 1000;
		ckpt_cycle_over(sn);
		return;
	}
	ckpt_step(sn);
}

static void ckpt_on_fidle(uv_idle_t *h)
{
	struct srv_snap *sn = h->data;

	if (!ckpt_pending_round(sn, SNAP_ROUND_NS))
		return;
	uv_idle_stop(h);
	ckpt_cycle_listed(sn);
}

static void ckpt_cycle_start(struct srv_snap *sn)
{
	if (ckpt_pending_begin(sn)) {
		srv_log(SRV_LOG_ERR, "snapshot cycle: out of memory; retrying at the next tick");
		return;
	}
	sn->cycle_started_ms = uv_now(sn->loop);
	sn->cycle_saved = sn->cycle_failed = 0;
	sn->cycle_running = true;
	sn->cycles_begun++;
	sn->save_again = false; /* a save waiting for the next cycle waits for this one */
	sn->ctx->save_in_progress = true;
	if (ckpt_pending_round(sn, SNAP_ROUND_NS))
		ckpt_cycle_listed(sn);
	else
		uv_idle_start(&sn->fidle, ckpt_on_fidle);
}

void ckpt_on_tick(uv_timer_t *t)
{
	struct srv_snap *sn = t->data;
	uint32_t interval = sn->cfg->snapshot_interval;
	uint64_t now = uv_now(sn->loop);

	if (sn->stopping || sn->cycle_running)
		return;
	/* A save waits for a cycle that could not start (out of memory): tried every tick. */
	if (sn->save_again) {
		ckpt_cycle_start(sn);
		return;
	}
	if (!interval)
		return;
	/* A shorter interval set by a reload takes effect at once. */
	if (sn->next_due_ms > now + (uint64_t)interval * 1000)
		sn->next_due_ms = now + (uint64_t)interval * 1000;
	if (now + SNAP_TICK_MS / 2 < sn->next_due_ms)
		return;
	ckpt_cycle_start(sn);
}

uint64_t srv_snap_log_needed(struct srv_snap *sn, size_t budget)
{
	struct snap_need *p = &sn->need;
	size_t end;

	/* All at once: a fresh pass, so nothing an older pass started before counts. */
	if (!budget)
		p->running = false;
	if (!p->running) {
		p->running = true;
		p->pos = 0;
		p->min = UINT64_MAX;
		/* What is logged from here on may be needed by a filter visited before it
		 * changes: the pass never releases it. */
		p->start = sn->ctx->logged_lsn + 1;
	}
	if (budget > sn->round_max)
		budget = sn->round_max;
	/* Filters dropped since the last round took the entries past the end with them: each
	 * that moved below pos was counted as it moved (snap_need_moved), and one that went
	 * needs nothing the pass counts (a packed one left its need with its pack: gone_lsn). */
	if (p->pos > sn->nents)
		p->pos = sn->nents;
	end = budget && sn->nents - p->pos > budget ? p->pos + budget : sn->nents;
	/* A clean filter needs nothing: no record about it follows what its snapshot holds. */
	for (; p->pos < end; p->pos++)
		if (sn->ents[p->pos]->need_lsn < p->min && snap_dirty(sn->ents[p->pos]))
			p->min = sn->ents[p->pos]->need_lsn;
	if (p->pos < sn->nents)
		return p->last;
	uint64_t need = p->min < p->start ? p->min : p->start;
	for (int i = 0; i < SNAP_PACKS; i++)
		if (sn->packs[i].gone_lsn < need)
			need = sn->packs[i].gone_lsn;
	if (sn->pjob && !sn->pjob->applied && sn->pjob->gone_lsn < need)
		need = sn->pjob->gone_lsn;
	if (sn->files_stale && sn->files_lsn + 1 < need)
		need = sn->files_lsn + 1;
	p->running = false;
	p->last = need;
	return need;
}

int srv_snap_bgsave(struct srv_snap *sn)
{
	if (sn->cycle_running)
		return -EBUSY;
	if (!sn->stopping)
		ckpt_cycle_start(sn);
	return 0;
}

void srv_snap_soon(struct srv_snap *sn)
{
	if (sn->stopping || sn->cycle_running)
		return;
	ckpt_cycle_start(sn);
}

/* Write every dirty filter now, on the loop thread, from the live filters (the shutdown's
 * fallback when it has no room for its list). 0, or the first failure's negative errno. */
static int ckpt_flush_all_now(struct srv_snap *sn)
{
	struct snap_entry *e;
	int rc = 0, r;

	/* Files of their own first (one leaving its pack is then on disk), then the packs. */
	for (size_t i = 0; i < sn->nents; i++) {
		e = sn->ents[i];
		if (!snap_dirty(e) || snap_pack_claim(sn, e))
			continue;
		r = snap_write_now(sn, e);
		if (r && !rc)
			rc = r;
	}
	for (int pack = 0; pack < SNAP_PACKS; pack++) {
		if (!sn->packs[pack].dirty)
			continue;
		r = snap_pack_write_now(sn, pack);
		if (r && !rc)
			rc = r;
	}
	r = snap_files_sync(sn);
	return rc ? rc : r;
}

/* flush of one filter: see srv_snap_flush(). *ticket is what f->changes was, plus 1, when the
 * command began to wait. */
static int ckpt_flush_one(struct srv_snap *sn, struct bf_filter *f, uint64_t *ticket)
{
	struct snap_entry *e = snap_find(sn, f);
	int rc;

	if (!e && !(e = snap_track(sn, f)))
		return -ENOMEM;
	if (*ticket) {
		/* Its wait is over if a durable file holds f as it was when the command came. */
		if (!snap_dirty(e) || (e->on_disk && e->saved_changes + 1 >= *ticket))
			return 0;
		if (e->waited)
			return -EINPROGRESS;
		if (e->wait_error) {
			rc = e->wait_error; /* told once: the next flush tries again */
			e->wait_error = 0;
			return rc;
		}
		/* Neither written nor failed: not the filter the command began with (dropped,
		 * and created again under its name); flushed as a new command. */
	}
	if (!snap_dirty(e))
		return 0;
	if (sn->stopping)
		return snap_pack_claim(sn, e) ? snap_pack_write_now(sn, e->pack)
					      : snap_write_now(sn, e);
	rc = ckpt_wait_add(sn, e, false);
	if (rc)
		return rc;
	*ticket = e->f->changes + 1;
	ckpt_step(sn);
	return -EINPROGRESS;
}

/* SAVE and flush of all: see srv_snap_flush(). *ticket is the cycle that must end. */
static int ckpt_flush_all(struct srv_snap *sn, uint64_t *ticket)
{
	if (sn->stopping)
		return 0; /* the shutdown pass writes everything (no command runs then) */
	if (!*ticket && sn->cycle_running) {
		/* It may have listed its filters before the last changes: the next one too. */
		*ticket = sn->cycles_begun + 1;
		sn->save_again = true;
	} else if (!*ticket) {
		uint64_t begun = sn->cycles_begun;

		ckpt_cycle_start(sn);
		if (sn->cycles_begun == begun)
			return -ENOMEM; /* logged */
		*ticket = sn->cycles_begun;
	}
	if (sn->cycles_done < *ticket) {
		sn->save_waiting = true;
		return -EINPROGRESS;
	}
	return sn->cycle_failed_at >= *ticket ? -EIO : 0;
}

int srv_snap_flush(struct srv_snap *sn, struct bf_filter *f, uint64_t *ticket)
{
	int rc;

	if (f && !f->params->persist)
		rc = 0;
	else
		rc = f ? ckpt_flush_one(sn, f, ticket) : ckpt_flush_all(sn, ticket);
	if (rc != -EINPROGRESS)
		*ticket = 0;
	return rc;
}

void srv_snap_shutdown(struct srv_snap *sn, bool save)
{
	if (!sn || sn->stopping)
		return;
	sn->stopping = true;
	snap_job_copy_abort(sn);
	snap_pjob_abort(sn);
	if (sn->pjob && sn->pjob->recording)
		snap_pjob_apply(sn, sn->pjob); /* so the pass below sees its members written */
	ckpt_waits_clear(sn); /* the shutdown pass writes them; their clients are let go */
	if (!save) {
		/* SHUTDOWN NOSAVE: a write under way finishes (no file is left half-written), none
		 * starts; what no checkpoint holds is the log's to replay at the next start. */
		ckpt_pending_clear(sn);
		uv_idle_stop(&sn->fidle);
		sn->fill_pos = 0;
		sn->pack_pos = SNAP_PACKS;
		srv_log(SRV_LOG_NOTICE, "final snapshot skipped (SHUTDOWN NOSAVE)");
		return;
	}
	if (ckpt_pending_fill(sn)) {
		/* No room for a list: write them one by one here, on the loop. */
		srv_log(SRV_LOG_ERR, "final snapshot: out of memory; writing on the loop thread");
		sn->final_failed = ckpt_flush_all_now(sn) != 0;
		return;
	}
	sn->cycle_started_ms = uv_now(sn->loop);
	sn->cycle_saved = sn->cycle_failed = 0;
	sn->cycle_running = true;
	if (sn->npending || ckpt_packs_dirty(sn))
		srv_log(SRV_LOG_INFO, "writing changed filters before exit");
	ckpt_step(sn);
}

bool srv_snap_final_failed(const struct srv_snap *sn)
{
	return sn && sn->final_failed;
}
