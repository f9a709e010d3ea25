/* SPDX-License-Identifier: MIT */
/*
 * The snapshot module's state and what its other files build on (snapshot.h; they share
 * snapshot_impl.h): srv_snap_new() (the data directory created, opened and locked, then the
 * start's load: load.c) and srv_snap_free(); the entries, one per persistent filter (tracked,
 * found, let go); a write's result recorded (snap_record); a filter's own file removed off the
 * loop; a filter written now, on the loop (snap_write_now); the registry's hooks for a filter
 * created, dropped or cleared, and renamed (RENAME of its file: snap_rename_file); the status.
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/bf_pool.h"
#include "server/log.h"

/* Entries come from a pool (core/bf_pool.h): a million filters have a million of them, and
 * malloc would add a header and round each up to 48 bytes. */
static struct bf_pool snap_entries = {.size = sizeof(struct snap_entry),
				      .align = _Alignof(struct snap_entry)};
_Static_assert(sizeof(struct snap_entry) % _Alignof(struct snap_entry) == 0 &&
		   _Alignof(struct snap_entry) >= sizeof(void *),
	       "pool pieces are whole multiples of their alignment and hold a pointer");

/* The name of the file of its own the live entry e's filter has or would have (from the
 * filter's name: an entry does not keep it). */
const char *snap_file(const struct snap_entry *e, char out[BF_SNAPSHOT_NAME_MAX])
{
	bf_snapshot_filename(bf_filter_name(e->f), e->f->name_len, out);
	return out;
}

uint64_t snap_next_gen(struct srv_snap *sn)
{
	return ++sn->gen;
}

/* ---------------------------------------------------------------------------------------- */
/* Entries */

bool snap_dirty(const struct snap_entry *e)
{
	return e->f && (!e->on_disk || e->f->changes != e->saved_changes);
}

/* The first LSN a replay on top of a cut of f taken now needs: every change to f logged so far
 * is in the cut, and the log is at ctx->logged_lsn (f->lsn + 1 if the log is off). */
uint64_t snap_need(const struct srv_snap *sn, const struct bf_filter *f)
{
	return (sn->ctx->logged_lsn > f->lsn ? sn->ctx->logged_lsn : f->lsn) + 1;
}

/* An entry moved from position `from` to e->idx: if the log-needed pass has visited its new
 * place but not its old one, it counts now. */
static void snap_need_moved(struct srv_snap *sn, const struct snap_entry *e, size_t from)
{
	struct snap_need *p = &sn->need;

	if (p->running && e->idx < p->pos && from >= p->pos && snap_dirty(e) &&
	    e->need_lsn < p->min)
		p->min = e->need_lsn;
}

/* f goes in a pack file (else a file of its own): its bits are small enough. */
bool snap_packable(const struct srv_snap *sn, const struct bf_filter *f)
{
	uint64_t max = sn->cfg->snapshot_pack_bytes;

	return max && bf_filter_bytes(f) <= max;
}

/* f's live entry (f->owner), or NULL. */
struct snap_entry *snap_find(const struct srv_snap *sn, const struct bf_filter *f)
{
	struct snap_entry *e = f->owner;

	(void)sn;
	return e && e->f == f ? e : NULL;
}

/* A new entry for f, listed in ents. NULL on allocation failure (logged). */
struct snap_entry *snap_track(struct srv_snap *sn, struct bf_filter *f)
{
	struct snap_entry *e;

	if (sn->nents == sn->ents_cap) {
		size_t cap = sn->ents_cap ? sn->ents_cap * 2 : 16;
		struct snap_entry **p = realloc(sn->ents, cap * sizeof(*p));

		if (!p)
			goto nomem;
		sn->ents = p;
		sn->ents_cap = cap;
	}
	if (sn->nents == UINT32_MAX)
		goto nomem;
	e = bf_pool_get(&snap_entries);
	if (!e)
		goto nomem;
	e->f = f;
	f->used_s = sn->ctx->now_s;
	e->idx = (uint32_t)sn->nents;
	e->pack = -1;
	if (snap_packable(sn, f))
		snap_pack_join(sn, e, snap_pack_of(f));
	f->owner = e;
	sn->ents[sn->nents++] = e;
	return e;
nomem:
	srv_log(SRV_LOG_CRIT, "filter '%s': out of memory; it will NOT be persisted",
		bf_filter_name(f));
	return NULL;
}

/* Free a dead entry once nothing refers to it any more. */
void snap_release(struct snap_entry *e)
{
	if (!e->f && !e->busy && !e->queued && !e->packing && !e->loading && !e->waited)
		bf_pool_put(e);
}

void snap_unlink(struct srv_snap *sn, const char *file, const char *why)
{
	if (unlinkat(sn->dirfd, file, 0) == 0)
		srv_log(SRV_LOG_DEBUG, "removed %s/%s (%s)", sn->dir, file, why);
	else if (errno != ENOENT)
		srv_log(SRV_LOG_WARNING, "cannot remove %s/%s (%s): %s", sn->dir, file, why,
			strerror(errno));
}

/*
 * A removal on the threadpool: unlinking a large file frees its blocks in the call (60 ms for
 * 196 MB here, about 0.3 s a GiB, most of a DEL's time), so the file is renamed out of the way
 * on the loop (a new filter of the name may write the name next) and unlinked there. The new
 * name ends in ".bsnap.tmp" and holds a '.', which no filter's encoded name does: no writer
 * ever uses it, and a crash before the unlink leaves a temp file the next start removes.
 */
struct snap_gone {
	uv_work_t req;
	struct srv_snap *sn;
	int rc;
	char why[32];
	char file[BF_SNAPSHOT_NAME_MAX];
	char gone[BF_SNAPSHOT_NAME_MAX + 32];
};

static void snap_gone_work(uv_work_t *req)
{
	struct snap_gone *g = req->data;

	g->rc = unlinkat(g->sn->dirfd, g->gone, 0) ? -errno : 0;
}

static void snap_gone_after(uv_work_t *req, int status)
{
	struct snap_gone *g = req->data;

	if (status == UV_ECANCELED)
		snap_gone_work(req);
	if (g->rc)
		srv_log(SRV_LOG_WARNING, "cannot remove %s/%s (was %s, %s): %s", g->sn->dir,
			g->gone, g->file, g->why, strerror(-g->rc));
	else
		srv_log(SRV_LOG_DEBUG, "removed %s/%s (%s)", g->sn->dir, g->file, g->why);
	free(g);
}

/* Remove file, a filter's own, with the unlink on the threadpool (above); at once if that
 * cannot be arranged. */
void snap_unlink_later(struct srv_snap *sn, const char *file, const char *why)
{
	static uint64_t seq;
	struct snap_gone *g = calloc(1, sizeof(*g));
	size_t len = strlen(file) - (sizeof(BF_SNAPSHOT_SUFFIX) - 1);

	if (!g) {
		snap_unlink(sn, file, why);
		return;
	}
	g->req.data = g;
	g->sn = sn;
	snprintf(g->why, sizeof(g->why), "%s", why);
	snprintf(g->file, sizeof(g->file), "%s", file);
	snprintf(g->gone, sizeof(g->gone), "%.*s.gone%" PRIu64 "%s%s", (int)len, file, ++seq,
		 BF_SNAPSHOT_SUFFIX, BF_SNAPSHOT_TMP_SUFFIX);
	if (renameat(sn->dirfd, file, sn->dirfd, g->gone)) {
		int err = errno;

		free(g);
		if (err != ENOENT)
			snap_unlink(sn, file, why);
		return;
	}
	if (uv_queue_work(sn->loop, &g->req, snap_gone_work, snap_gone_after)) {
		snap_gone_work(&g->req);
		snap_gone_after(&g->req, 0);
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Results */

uint64_t snap_ms(uint64_t ns)
{
	return ns / 1000000;
}

/* Set e->failed, keeping sn->nfailing (the live entries whose latest write failed) exact. */
void snap_set_failed(struct srv_snap *sn, struct snap_entry *e, bool failed)
{
	if (e->failed != failed)
		sn->nfailing += failed ? 1 : (size_t)-1;
	e->failed = failed;
}

/* Count and log a failed write of e (may be dead) as file. */
static void snap_record_failure(struct srv_snap *sn, struct snap_entry *e, const char *file,
				const char *name, int rc, const char *step)
{
	/* Only a failed fsync of the directory comes after the rename. */
	bool renamed = step && !strcmp(step, "fsync dir");
	uint32_t interval = sn->cfg->snapshot_interval;
	char retry[64] = "";

	sn->st.failures++;
	sn->st.last_failure_unix = (uint64_t)time(NULL);
	sn->st.last_error = rc;
	snprintf(sn->st.last_error_msg, sizeof(sn->st.last_error_msg), "filter '%s' (%s): %s: %s",
		 name, file, step ? step : "?", strerror(-rc));
	sn->cycle_failed++;
	if (e->f)
		snap_set_failed(sn, e, true);
	if (sn->stopping)
		snprintf(retry, sizeof(retry), "; not retried (shutting down)");
	else if (interval)
		snprintf(retry, sizeof(retry), "; retrying in %" PRIu32 " s", interval);
	srv_log(SRV_LOG_ERR, "snapshot of filter '%s' failed: %s/%s: %s: %s; %s%s", name, sn->dir,
		file, step ? step : "?", strerror(-rc),
		renamed ? "the new snapshot is in place but may not survive a power loss"
			: "the previous snapshot is kept",
		retry);
}

/*
 * Record the outcome of writing e (may be dead) as file: counters, the entry's state, the
 * log. cut/need: what the file holds if rc is 0. kind names the trigger for the log.
 */
void snap_record(struct srv_snap *sn, struct snap_entry *e, const char *file, const char *name,
		 int rc, const char *step, uint64_t cut, uint64_t need, uint64_t bytes,
		 uint64_t write_ns, const char *kind)
{
	uint64_t now = (uint64_t)time(NULL);

	if (rc) {
		snap_record_failure(sn, e, file, name, rc, step);
		return;
	}
	sn->st.saves++;
	sn->st.saved_bytes += bytes;
	sn->st.last_success_unix = now;
	sn->ctx->last_save_unix = now;
	sn->cycle_saved++;
	if (e->failed && e->f)
		srv_log(SRV_LOG_NOTICE, "snapshot of filter '%s' (%s) written again after failures",
			name, file);
	else
		srv_log(SRV_LOG_DEBUG,
			"%s snapshot of filter '%s' (%s): %" PRIu64 " bytes in %" PRIu64 " ms",
			kind, name, file, bytes, snap_ms(write_ns));
	if (e->f) {
		e->on_disk = true;
		e->saved_changes = cut;
		e->need_lsn = need;
		snap_set_failed(sn, e, false);
		e->own_file = true;
		if (!e->filed)
			sn->files_stale = true;
		e->filed = true;
		/* Its own file holds it now (it grew past snapshot_pack_bytes, or was cleared):
		 * its pack is written again without it. */
		snap_pack_leave(sn, e, UINT64_MAX);
	}
}

/*
 * Threadpool: lower this thread's priority (Linux nice values are per thread), once, so the
 * loop thread and the clients on a small machine get the CPU before snapshot work does (the
 * checksum, the copy into the page cache, the prefault). Best effort. The thread keeps it:
 * an unprivileged process cannot undo it, and all blossomd puts on the threadpool is
 * background work (snapshots, and the deletes of log segments no longer needed).
 */
void snap_worker_nice(void)
{
	static __thread bool done;
	id_t tid = (id_t)gettid();
	int now;

	if (done)
		return;
	done = true;
	errno = 0;
	now = getpriority(PRIO_PROCESS, tid);
	if (now == -1 && errno)
		return;
	setpriority(PRIO_PROCESS, tid, now + SNAP_WORKER_NICE > 19 ? 19 : now + SNAP_WORKER_NICE);
}

/*
 * A round of budget_ns of loop time (0: no end) has taken one more step, to pos: is it over?
 * *k counts its steps (round_max caps them, for tests); the clock is read every 64 places.
 */
bool snap_round_over(const struct srv_snap *sn, size_t *k, size_t pos, uint64_t t0,
		     uint64_t budget_ns)
{
	return budget_ns &&
	       (++*k >= sn->round_max || ((pos & 63) == 0 && uv_hrtime() - t0 >= budget_ns));
}

/* ---------------------------------------------------------------------------------------- */
/* Hooks */

void srv_snap_created(struct srv_snap *sn, struct bf_filter *f)
{
	if (!f->params->persist)
		return;
	struct snap_entry *e = snap_track(sn, f);
	if (e)
		e->need_lsn = f->lsn ? f->lsn : 1; /* its first record, if it was logged */
}

/* Write e now, on the loop thread, from the live filter, as a file of its own. */
int snap_write_now(struct srv_snap *sn, struct snap_entry *e)
{
	const struct bf_filter *f = e->f;
	struct srv_progress progress;
	struct bf_io_progress pr = {srv_progress_io, &progress};
	const char *step = NULL;
	char file[BF_SNAPSHOT_NAME_MAX];
	uint64_t t0, gen;
	int rc;

	snap_file(e, file);
	/* Never two writers of one file, never an older state over a newer one. */
	if (sn->job && !sn->job->applied && !strcmp(sn->job->file, file))
		snap_job_settle(sn);
	/* A pack job still encoding may hold this filter: its state is newer there. */
	if (e->packing && sn->pencoding)
		snap_pjob_abort(sn);
	else if (e->packing)
		snap_pjob_settle(sn);
	gen = snap_next_gen(sn);
	srv_progress_begin(&progress, bf_snapshot_header_len(f) + bf_filter_bytes(f),
			   sn->cfg->log_progress_bytes, sn->cfg->log_progress_interval,
			   "checkpoint of filter '%s'", bf_filter_name(f));
	t0 = uv_hrtime();
	rc = bf_snapshot_write_progress(f, gen, sn->dirfd, file, &pr, &step);
	srv_progress_end(&progress, rc);
	snap_record(sn, e, file, bf_filter_name(f), rc, step, f->changes, snap_need(sn, f),
		    BF_SNAPSHOT_HEADER_LEN + bf_filter_bytes(f), uv_hrtime() - t0, "flush");
	return rc;
}

/*
 * Take e, a live entry, out of the filters this module writes: out of ents, its copy in
 * progress given up, out of its pack (the log keeps the record just logged, at logged_lsn, until
 * the pack is written without the filter; during the replay, what the filter needed). Its own
 * file stays. Returns true if a copy was given up (the caller restarts the cycle: ckpt_step).
 */
bool snap_detach(struct srv_snap *sn, struct snap_entry *e)
{
	size_t i = e->idx;
	bool restart = false;

	sn->ents[i] = sn->ents[--sn->nents];
	sn->ents[i]->idx = (uint32_t)i;
	snap_need_moved(sn, sn->ents[i], sn->nents);
	snap_set_failed(sn, e, false);
	e->f->owner = NULL;
	if (sn->copy && sn->copy->e == e) {
		snap_job_copy_abort(sn);
		restart = true;
	}
	snap_pack_leave(sn, e, sn->ctx->logged_lsn ? sn->ctx->logged_lsn : e->need_lsn);
	return restart;
}

/* Remove a filter's own file (off the loop: snap_unlink_later); a write of it still running
 * would put it back: it removes it then. */
static void snap_remove_file(struct srv_snap *sn, const char *file, const char *why)
{
	if (sn->job && !sn->job->applied && !strcmp(sn->job->file, file))
		sn->job->remove_after = true;
	else
		snap_unlink_later(sn, file, why);
}

/* At a start: is file the one a renamed file's filter (other than id's) was adopted from?
 * Dropping the filter that had the new name then leaves it: it holds the renamed filter. */
static bool snap_file_adopted(const struct srv_snap *sn, const char *file, uint64_t id)
{
	if (!sn->ids)
		return false;
	/* The few renamed files' ids, not the whole table: a FLUSHALL replayed over a million
	 * filters drops each of them. */
	for (size_t i = 0; i < sn->nrenamed; i++) {
		const struct snap_idslot *slot = snap_id_slot(sn, sn->renamed_ids[i]);

		if (slot->renamed && slot->id != id && slot->e && slot->e->f &&
		    !strcmp(slot->renamed, file))
			return true;
	}
	return false;
}

int srv_snap_dropping(struct srv_snap *sn, struct bf_filter *f, bool remove_file)
{
	struct snap_entry *e;
	bool restart;

	if (!f->params->persist)
		return 0;
	e = snap_find(sn, f);
	if (!e)
		return 0;
	/* A clear forgets the filter until the next start, which loads it again: a packed one
	 * is written as a file of its own first, since its pack is written again without it. */
	if (!remove_file && e->pack >= 0) {
		int rc = snap_write_now(sn, e);

		if (rc)
			return rc;
	}
	char file[BF_SNAPSHOT_NAME_MAX];
	snap_file(e, file);
	/* A renamed file's filter that the replay drops before a RENAME named it. */
	if (bf_registry_hidden(f) && sn->ids && snap_id_slot(sn, f->id)->renamed)
		snprintf(file, sizeof(file), "%s", snap_id_slot(sn, f->id)->renamed);
	restart = snap_detach(sn, e);
	e->f = NULL;
	/* Out of the files record: a cleared filter's file stays, unlisted (the next start loads
	 * it, and lists it again). */
	if (e->filed && remove_file)
		snap_files_removing(sn);
	else if (e->filed)
		sn->files_stale = true;
	/* Also when packed: a write of a file of its own may be in flight (one that grew past
	 * snapshot_pack_bytes stays in its pack until that write is done), and would leave the
	 * dropped filter to come back at the next start (snap_remove_file removes it then). */
	if (remove_file && !snap_file_adopted(sn, file, f->id))
		snap_remove_file(sn, file, "filter dropped");
	snap_release(e);
	if (restart)
		ckpt_step(sn);
	return 0;
}

/*
 * RENAME as metadata: the file of its own of e (detached, dead: its filter is now n's), under
 * the old name, is renamed to the new name's file (renameat, then the directory fsync'ed), and
 * n takes over what e had on disk. The filter stays changed (the RENAME counts as a change), so
 * the next cycle writes it with its new name in the header; until then the log keeps the RENAME
 * record. A start adopts such a file's filter under a hidden name, which the replay of that
 * RENAME replaces (snap_adopt, srv_snap_load_end). Only for a filter
 * whose saved state is in a file of its own, under a name a file name spells out, and while no
 * write of the new name's file is in flight (it would land over this one). Returns true if
 * done; false (nothing changed) if the caller must write the filter under its new name.
 */
static bool snap_rename_file(struct srv_snap *sn, const struct snap_entry *e, struct snap_entry *n,
			     const char *from, size_t from_len)
{
	const struct bf_filter *f = n->f;
	char old[BF_SNAPSHOT_NAME_MAX], file[BF_SNAPSHOT_NAME_MAX], name[BF_NAME_MAX];
	size_t len;

	/* The log's RENAME names the file's filter at a start until it is written again. */
	if (!sn->cfg->wal || n->pack >= 0 || e->pack >= 0 || !e->own_file || !e->on_disk ||
	    f->paged)
		return false;
	bf_snapshot_filename(from, from_len, old);
	snap_file(n, file);
	if (bf_snapshot_filename_name(file, name, &len))
		return false;
	if (sn->job && !sn->job->applied && !strcmp(sn->job->file, file))
		return false;
	if (renameat(sn->dirfd, old, sn->dirfd, file)) {
		srv_log(SRV_LOG_WARNING, "filter '%s': cannot rename %s/%s to %s: %s; writing it",
			bf_filter_name(f), sn->dir, old, file, strerror(errno));
		return false;
	}
	/* A write of the old name's file still running puts a copy back under the old name: it
	 * is removed once written (e is dead: nothing is recorded). A start meanwhile loads the
	 * newer of the two copies (one filter id), and the log's RENAME names it. */
	if (sn->job && !sn->job->applied && !strcmp(sn->job->file, old))
		sn->job->remove_after = true;
	if (fsync(sn->dirfd))
		srv_log(SRV_LOG_WARNING,
			"filter '%s': renamed %s/%s to %s, but the directory could not be synced: "
			"%s (the log keeps the RENAME)",
			bf_filter_name(f), sn->dir, old, file, strerror(errno));
	else
		srv_log(SRV_LOG_DEBUG, "filter '%s': renamed %s/%s to %s", bf_filter_name(f),
			sn->dir, old, file);
	n->own_file = true;
	n->on_disk = true;
	n->filed = e->filed;
	n->saved_changes = e->saved_changes;
	sn->files_stale = true; /* listed under the old name (its id is loaded from the new one) */
	return true;
}

int srv_snap_renamed(struct srv_snap *sn, struct bf_filter *f, const char *from, size_t from_len)
{
	struct snap_entry *e, *n;
	bool restart;
	int rc = 0;

	if (!f->params->persist || !(e = snap_find(sn, f)))
		return 0;
	/* The replay named a renamed file's filter (snap_adopt): its file has the name already,
	 * and is written with the name in its header at the next cycle. */
	if (from_len && from[0] == BF_HIDDEN_NAME) {
		e->on_disk = false;
		return 0;
	}
	restart = snap_detach(sn, e);
	e->f = NULL; /* what follows may settle jobs that hold e: it is gone */
	n = snap_track(sn, f);
	if (!n) {
		rc = -ENOMEM;
	} else {
		n->need_lsn = e->need_lsn;
		/* Else the new name's file is written now, so that the old copy (its file or its
		 * pack entry, under the old name) can go at once: a new filter given the old
		 * name never meets it. Failed: the old copy stays (the log covers the rest, and
		 * a start loads the copy with the higher generation); the filter is written at
		 * the next cycle. Written: the old name's file goes, also when the filter was
		 * packed (a write of it may be in flight). */
		if (!snap_rename_file(sn, e, n, from, from_len) && !(rc = snap_write_now(sn, n))) {
			char file[BF_SNAPSHOT_NAME_MAX];

			if (e->filed)
				snap_files_removing(sn);
			bf_snapshot_filename(from, from_len, file);
			snap_remove_file(sn, file, "filter renamed");
		}
	}
	snap_release(e);
	if (restart)
		ckpt_step(sn);
	return rc;
}

void srv_snap_get_status(struct srv_snap *sn, struct srv_snap_status *out)
{
	struct snap_dirty_pass *d = &sn->dirty_pass;

	if (d->pos > sn->nents) /* filters went meanwhile: start over */
		d->pos = d->count = 0;
	size_t end =
	    sn->nents - d->pos > SNAP_DIRTY_BUDGET ? d->pos + SNAP_DIRTY_BUDGET : sn->nents;

	/* The changed filters, counted over successive calls by SNAP_DIRTY_BUDGET entries each:
	 * exact when there are no more, and /metrics never walks a million filters at once. */
	for (; d->pos < end; d->pos++)
		d->count += snap_dirty(sn->ents[d->pos]);
	if (d->pos >= sn->nents) {
		d->last = d->count;
		d->pos = d->count = 0;
	}
	*out = sn->st;
	out->failing = sn->nfailing;
	out->dirty = d->last;
	out->in_progress = sn->copy || sn->job || sn->pjob;
}

/* fsync the directory buf[0, len) names ("/" if len is 0). 0 or -errno. */
static int snap_sync_dir(const char *buf, size_t len)
{
	char dir[sizeof(((struct config *)0)->data_dir)];
	int fd, rc;

	snprintf(dir, sizeof(dir), "%.*s", len ? (int)len : 1, len ? buf : "/");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* mkdir -p: the missing parents 0755, the directory itself 0700. Each directory made is
 * durable before the next (its parent fsync'ed), so a power cut cannot take data_dir away
 * from under what is written in it. 0 or -errno. */
static int snap_mkdirs(const char *path)
{
	char buf[sizeof(((struct config *)0)->data_dir)];
	size_t len = strlen(path), parent = 0;
	int rc;

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		bool last = !*p;
		*p = '\0';
		if (mkdir(buf, last ? 0700 : 0755) == 0) {
			rc = snap_sync_dir(buf, parent);
			if (rc)
				return rc;
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (last)
			break;
		parent = (size_t)(p - buf);
		*p = '/';
	}
	return 0;
}

int srv_snap_new(uv_loop_t *loop, const struct config *cfg, struct cmd_ctx *ctx,
		 struct srv_prefault *pf, bool accept_missing, struct srv_snap **out)
{
	struct srv_snap *sn;
	int rc;

	sn = calloc(1, sizeof(*sn));
	if (!sn) {
		srv_log(SRV_LOG_ERR, "out of memory");
		return -ENOMEM;
	}
	sn->loop = loop;
	sn->cfg = cfg;
	sn->accept_missing = accept_missing;
	const char *round = getenv(SNAP_ROUND_ENV);
	unsigned long round_max = round ? strtoul(round, NULL, 10) : 0;
	sn->round_max = round_max ? round_max : SIZE_MAX;
	sn->ctx = ctx;
	sn->prefault = pf;
	for (int i = 0; i < SNAP_PACKS; i++)
		sn->packs[i].gone_lsn = UINT64_MAX;
	snprintf(sn->dir, sizeof(sn->dir), "%s", cfg->data_dir);
	/* Each filter's entry here (and its slots in ents and pending) counts against max_memory.
	 */
	bf_registry_set_entry_overhead(ctx->reg, sizeof(struct snap_entry) + 2 * sizeof(void *));

	rc = snap_mkdirs(sn->dir);
	if (rc) {
		srv_log(SRV_LOG_ERR, "data_dir %s: cannot create: %s", sn->dir, strerror(-rc));
		goto fail;
	}
	sn->dirfd = open(sn->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sn->dirfd < 0) {
		rc = -errno;
		srv_log(SRV_LOG_ERR, "data_dir %s: cannot open: %s", sn->dir, strerror(-rc));
		goto fail;
	}
	if (flock(sn->dirfd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		srv_log(SRV_LOG_ERR, "data_dir %s: %s", sn->dir,
			rc == -EBUSY ? "in use by another blossomd (locked)" : strerror(-rc));
		goto fail_fd;
	}
	rc = snap_load_all(sn);
	if (rc)
		goto fail_fd;

	/* Neither can fail on an initialised loop. */
	uv_timer_init(loop, &sn->timer);
	uv_idle_init(loop, &sn->idle);
	uv_idle_init(loop, &sn->pidle);
	uv_idle_init(loop, &sn->cidle);
	uv_idle_init(loop, &sn->fidle);
	sn->timer.data = sn;
	sn->idle.data = sn;
	sn->pidle.data = sn;
	sn->cidle.data = sn;
	sn->fidle.data = sn;
	sn->next_due_ms = uv_now(loop) + (uint64_t)cfg->snapshot_interval * 1000;
	uv_timer_start(&sn->timer, ckpt_on_tick, SNAP_TICK_MS, SNAP_TICK_MS);
	*out = sn;
	return 0;

fail_fd:
	close(sn->dirfd);
fail:
	snap_load_state_free(sn);
	for (size_t i = 0; i < sn->nents; i++)
		bf_pool_put(sn->ents[i]);
	free(sn->ents);
	snap_aside_free(sn);
	free(sn);
	return rc;
}

void srv_snap_free(struct srv_snap *sn)
{
	if (!sn)
		return;
	snap_aside_free(sn);
	if (sn->copy)
		snap_job_copy_abort(sn);
	snap_pjob_abort(sn);
	if (sn->pjob && sn->pjob->recording) {
		uv_idle_stop(&sn->pidle);
		snap_pjob_apply(sn, sn->pjob);
		snap_pjob_free(sn->pjob);
		sn->pjob = NULL;
	}
	if (sn->pmem && sn->pmem->ready)
		snap_pmem_free(sn->pmem);
	/* A job still here means its after_work never ran: the loop was not drained. Its
	 * memory may still be in use by the threadpool, so it is left alone. */
	ckpt_pending_clear(sn);
	ckpt_waits_clear(sn);
	snap_load_state_free(sn);
	for (size_t i = 0; i < sn->nents; i++)
		bf_pool_put(sn->ents[i]);
	free(sn->ents);
	free(sn->pending);
	free(sn->waits);
	close(sn->dirfd);
	free(sn);
}
