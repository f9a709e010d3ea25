/* SPDX-License-Identifier: MIT */
/* Snapshot scheduling, flush, shutdown save and the start-up load; see snapshot.h. */
#include "server/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/bf_hash.h"
#include "core/bf_pool.h"
#include "core/bf_record.h"
#include "core/bf_snapshot.h"
#include "server/log.h"
#include "server/prefault.h"

#define SNAP_TICK_MS 1000
/* Entries srv_snap_get_status() looks at per call for its count of changed filters. */
#define SNAP_DIRTY_BUDGET 65536
/* Added to the nice value of a threadpool thread once it runs snapshot work (see below). */
#define SNAP_WORKER_NICE 10
/* Copies of at least this many bytes have their memory faulted in on the threadpool. */
#define SNAP_PREFAULT_MIN (2u << 20)
/* A start's load fetches into the cache what the entry this many ahead will look up. */
#define SNAP_LOAD_AHEAD 4
/* ... and tells the prefault thread every this many entries whether the heap grew. */
#define SNAP_LOAD_POKE 256
/* Suffix of a file set aside at start; ".1" ... up to this many more are tried. */
#define SNAP_CORRUPT_SUFFIX ".corrupt"
#define SNAP_CORRUPT_TRIES  100

/*
 * What this module knows about one persistent filter: one per filter, so it is kept small
 * (32 bytes: flags in bits, 32-bit places: snap_track refuses a 2^32nd entry, which would take
 * over a terabyte of filters anyway).
 */
struct snap_entry {
	struct bf_filter *f; /* NULL once the filter is gone ("dead", no longer in ents) */
	/* f->changes that the snapshot on disk holds, if on_disk (48 bits, as f->changes). */
	uint64_t saved_changes : 48;
	bool on_disk : 1;      /* a snapshot of this filter (as it is now, bar changes) exists */
	bool failed : 1;       /* the latest write failed */
	bool queued : 1;       /* listed in sn->pending */
	bool busy : 1;	       /* held by the copy in progress or by a job not yet applied */
	bool own_file : 1;     /* a file of its own may exist (removed once it is packed) */
	bool packing : 1;      /* held by a pack job not yet applied */
	bool loading : 1;      /* paged out, its file being read on the threadpool */
	bool waited : 1;       /* a command waits for its write (listed in sn->waits) */
	bool wait_written : 1; /* ... and that write has been started */
	bool wait_close : 1;   /* ... and pages it out once written (bloomd's close) */
	bool filed : 1;	       /* a durable file of its own holds a copy (SNAP_FILES lists it) */
	/* The pack file it is a member of (< SNAP_PACKS), or -1: a file of its own. A pack keeps
	 * no list of its members: ents, walked, gives them (snap_pjob_gather). */
	signed int pack : 5;
	uint64_t need_lsn;  /* the oldest log record a replay needs for this filter: the one
			     * after what its snapshot holds, or its first if it has none */
	uint32_t idx;	    /* its place in sn->ents while live */
	int16_t load_error; /* the last load failed (told once to srv_snap_page_in): a
			     * negative errno or UV_E* code, all of which fit */
	int16_t wait_error; /* the write a command waited for failed (told once to the next
			     * srv_snap_page_out or srv_snap_flush) */
};
_Static_assert(sizeof(void *) != 8 || sizeof(struct snap_entry) == 32,
	       "a snapshot entry is 32 bytes: a million filters pay for every byte");

/* Entries come from a pool (core/bf_pool.h): a million filters have a million of them, and
 * malloc would add a header and round each up to 48 bytes. */
static struct bf_pool snap_entries = {.size = sizeof(struct snap_entry),
				      .align = _Alignof(struct snap_entry)};
_Static_assert(sizeof(struct snap_entry) % _Alignof(struct snap_entry) == 0 &&
		   _Alignof(struct snap_entry) >= sizeof(void *),
	       "pool pieces are whole multiples of their alignment and hold a pointer");

/* The name of the file of its own the live entry e's filter has or would have (from the
 * filter's name: an entry does not keep it). */
static const char *snap_file(const struct snap_entry *e, char out[BF_SNAPSHOT_NAME_MAX])
{
	bf_snapshot_filename(bf_filter_name(e->f), e->f->name_len, out);
	return out;
}

/* Packed snapshots (DESIGN.md §6): small filters share SNAP_PACKS files, by name hash. */
#define SNAP_PACKS 16
_Static_assert(SNAP_PACKS <= 16, "struct snap_entry keeps its pack (or -1) in 5 signed bits");
/* A pack's entries are encoded on the loop in rounds of this much time at most. */
#define SNAP_PACK_ROUND_NS 500000
/* A written pack's members are recorded in rounds of this much loop time at most. */
#define SNAP_ROUND_NS 500000
/* For tests only: the environment can cap a round at this many entries (at least 1), so that
 * commands land between rounds that would otherwise be over within a turn of the loop (the
 * rounds of a pack's, and those of the pass that finds the log a replay needs). */
#define SNAP_ROUND_ENV "BLOSSOMD_SNAP_ROUND_ENTRIES"

struct snap_pack {
	size_t n;	   /* its members (entries whose ->pack is this pack) */
	bool dirty;	   /* must be written even if no member is (one left, one was bad) */
	uint64_t gone_lsn; /* the oldest log record that a member dropped or cleared since the
			    * file was last written needs kept (UINT64_MAX: none) */
	size_t last_len;   /* bytes of its last write: the next one's buffer is sized from it */
};

/* A member's cut as a pack job encoded it. */
struct snap_pcut {
	uint64_t cut, need;
	bool in; /* encoded into the file (not dropped before its turn) */
};

/*
 * A pack job's memory, allocated and faulted in on the threadpool ahead of the job that takes
 * it (the first write to each 2 MiB of a fresh buffer cost the loop about 4 ms on a VM), sized
 * for the pack as it was when asked for: room for ncap members and cap bytes of entries.
 */
struct snap_pmem {
	uv_work_t req;
	struct srv_snap *sn;
	int pack;
	bool ready; /* its after_work ran (the arrays are NULL if it could not allocate them) */
	size_t ncap, cap;
	struct snap_entry **ents;
	struct snap_pcut *cuts;
	uint64_t *ends;
	unsigned char *buf;
};

/* One pack's write: its members encoded (on the loop, in rounds), then the file written on
 * the threadpool. */
struct snap_pjob {
	uv_work_t req;
	struct srv_snap *sn;
	int pack;
	char file[32];
	/* The members when the job began (each ->packing), gathered in rounds while gathering:
	 * the live entries (sn->ents) below gpos are still to be walked (snap_pjob_gather); room
	 * for ncap. */
	struct snap_entry **ents;
	size_t n, pos; /* encoded up to pos */
	bool gathering;
	size_t gpos, ncap;
	struct snap_pcut *cuts;
	unsigned char *buf; /* freed by the worker once written */
	size_t len, cap;
	uint64_t *ends; /* entry i of the file ends at ends[i]; freed with buf */
	uint32_t count;
	uint64_t gone_lsn; /* the pack's gone_lsn when the job began */
	uint32_t record;   /* the packs record to write once the pack is (0: it lists it already) */
	uint64_t copy_ns, copy_max_ns;
	/* The worker's result, read by the loop after after_work or once done (under lock). */
	uv_mutex_t lock;
	uv_cond_t cond;
	bool sync_ready;
	bool done;
	int rc;
	const char *step;
	uint64_t write_ns;
	/* Loop only: the pack's result recorded; its members' up to apos (each let go then);
	 * recording: after_work ran, the rest is recorded in rounds (snap_pjob_on_idle). */
	bool applied, recording;
	size_t apos;
};

/* One background write: a copy (or, at shutdown, the live filter) and its file. */
struct snap_job {
	uv_work_t req; /* req.data = the job */
	struct srv_snap *sn;
	struct snap_entry *e;
	struct bf_filter *f; /* what the worker writes */
	bool owned;	     /* f is a copy, freed with the job */
	uint64_t cut;	     /* e->f->changes that f holds (at least) */
	uint64_t need;	     /* the first LSN a replay on top of it needs (snap_need at the cut) */
	uint64_t generation;
	char file[BF_SNAPSHOT_NAME_MAX]; /* e's own file (snap_file): the worker never reads e */
	bool remove_after;		 /* dropped meanwhile: remove the file once written */
	/* Preparing and copying (sn->copy == this job). */
	bool prefaulting;	       /* its memory is being faulted in on the threadpool */
	bool aborted;		       /* given up while prefaulting: freed when that ends */
	uint64_t copy_off;	       /* body bytes copied so far */
	uint64_t copy_ns, copy_max_ns; /* loop time spent copying, longest single pause */
	/* Written by the worker, read by the loop once done (under lock) or after after_work. */
	uv_mutex_t lock;
	uv_cond_t cond;
	bool sync_ready; /* lock and cond initialised */
	bool done;
	int rc;
	const char *step;
	uint64_t write_ns;
	bool applied; /* loop only: its result has been recorded */
};

struct srv_snap {
	uv_loop_t *loop;
	const struct config *cfg;
	struct cmd_ctx *ctx;
	struct srv_prefault *prefault; /* the start's load pokes it (srv_snap_new) */
	int dirfd;
	char dir[sizeof(((struct config *)0)->data_dir)];

	struct snap_entry **ents; /* live entries, unordered */
	size_t nents, ents_cap;

	/* The cycle (or the shutdown pass): entries still to write, in order. */
	struct snap_entry **pending;
	size_t npending, pending_pos, pending_cap;
	bool cycle_running;
	/* The cycle lists its entries in rounds (ckpt_on_fidle), walking ents down from
	 * fill_pos (0: not listing): a million are not looked at in one turn of the loop. */
	size_t fill_pos;
	uv_idle_t fidle;
	uint64_t cycle_started_ms, next_due_ms;
	uint64_t cycle_saved, cycle_failed;
	bool final_failed; /* a filter could not be written at shutdown: the exit status says so */

	struct snap_job *copy; /* being prepared (prefault) or copied in slices */
	struct snap_job *job;  /* queued on the threadpool, until its after_work */

	/* Filters a command waits for (a flush of one filter, a large close): written in the
	 * background, before the cycle's next write (then, for a close, paged out). */
	struct snap_entry **waits;
	size_t nwaits, waits_cap;
	/* SAVE and flush of all: the cycles begun by ckpt_cycle_start and ended; the last ended
	 * one that had a failure; another cycle is due once this one ends (a save came while it
	 * ran); a save waits for a cycle (the commands run again when it ends). */
	uint64_t cycles_begun, cycles_done, cycle_failed_at;
	bool save_again, save_waiting;

	uv_idle_t cidle; /* once: the commands whose wait ended run again */
	size_t nfailing; /* live entries whose latest write failed (e->failed) */
	/* srv_snap_get_status()'s count of changed filters, SNAP_DIRTY_BUDGET entries a call. */
	struct snap_dirty_pass {
		size_t pos, count, last;
	} dirty_pass;

	/*
	 * srv_snap_log_needed()'s pass over ents, a budget of entries per call (a million filters
	 * are not walked in one go on the loop): the least need_lsn of the changed filters visited
	 * so far, and the result of the last complete pass.
	 */
	struct snap_need {
		bool running;
		size_t pos;
		uint64_t min, start, last;
	} need;

	struct snap_pack packs[SNAP_PACKS];
	uint32_t packs_recorded; /* bit i: pack i's file is in the packs record (SNAP_RECORD) */
	/* The files record (SNAP_FILES): the set of filed entries changed since it was written
	 * (at logged_lsn files_lsn); the log keeps what follows files_lsn until it is written. */
	bool files_stale;
	uint64_t files_lsn;
	size_t files_listed; /* at a start: its lines that match a filter loaded (SIZE_MAX: none) */
	size_t files_lines;  /* at a start: all its lines */
	/* At a start, until srv_snap_load_end(): the files it lists that are missing and hold no
	 * filter loaded from elsewhere, unless the log's replay drops them. */
	struct snap_listed {
		uint64_t id;
		char *file;
	} * missing;
	size_t nmissing;
	bool accept_missing;	/* --accept-missing-files */
	int pack_pos;		/* the cycle's next pack to consider */
	struct snap_pjob *pjob; /* encoding (pencoding) or writing */
	struct snap_pmem *pmem; /* the next pack job's memory, being readied or ready */
	bool pencoding;
	uv_idle_t pidle;

	uv_timer_t timer;
	uv_idle_t idle;
	bool stopping;

	struct srv_snap_status st;
	size_t round_max; /* entries per round at most (SNAP_ROUND_ENV; else SIZE_MAX) */

	/* The highest generation loaded or given: every write takes the next, so of two copies
	 * on disk of one name or of one filter (renamed, or moved between a pack and a file of
	 * its own), the one written later has the higher. */
	uint64_t gen;
	/* Called once a page-in ends (loaded or failed): the commands waiting for it run again. */
	void (*paged_in)(void *arg);
	void *paged_arg;
	size_t cold_pos; /* where srv_snap_cold() goes on in ents */
	/* At load: the entries by filter id (open addressing, 0 = free), so a filter found under
	 * two names (renamed, then a crash before the old copy went) is loaded once; kept until
	 * srv_snap_load_end(), for the log's replay to find the filters its records name. Each
	 * loaded filter has one, with the generation of the copy loaded (an entry does not keep
	 * it: only a load compares generations), and, if that copy is a renamed file (one whose
	 * header still has its name before a RENAME: snap_rename_file), that file's name. */
	struct snap_idslot {
		uint64_t id;
		struct snap_entry *e;
		uint64_t gen;
		char *renamed;
	} * ids;
	size_t ids_cap, ids_n;
	uint64_t loaded_lsn; /* the newest LSN a loaded filter holds */

	/* What was set aside at load, until srv_snap_after_replay(). */
	struct snap_aside {
		char *label; /* the file, or "FILE entry N" */
		char *file;  /* a file of its own: matched against the filters' file names */
		char *name;  /* a pack entry's filter name, if known */
	} * aside;
	size_t naside;
};

static void ckpt_step(struct srv_snap *sn);
static void snap_pjob_on_idle(uv_idle_t *h);
static struct snap_idslot *snap_id_slot(const struct srv_snap *sn, uint64_t id);
static void ckpt_cycle_start(struct srv_snap *sn);

static uint64_t snap_next_gen(struct srv_snap *sn)
{
	return ++sn->gen;
}

/* ---------------------------------------------------------------------------------------- */
/* Entries */

static bool snap_dirty(const struct snap_entry *e)
{
	return e->f && (!e->on_disk || e->f->changes != e->saved_changes);
}

/* The first LSN a replay on top of a cut of f taken now needs: every change to f logged so far
 * is in the cut, and the log is at ctx->logged_lsn (f->lsn + 1 if the log is off). */
static uint64_t snap_need(const struct srv_snap *sn, const struct bf_filter *f)
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
static bool snap_packable(const struct srv_snap *sn, const struct bf_filter *f)
{
	uint64_t max = sn->cfg->snapshot_pack_bytes;

	return max && bf_filter_bytes(f) <= max;
}

/* The pack file a filter of this name goes in. */
static int snap_pack_of(const struct bf_filter *f)
{
	return (int)(XXH3_64bits(bf_filter_name(f), f->name_len) % SNAP_PACKS);
}

static void snap_pack_name(int pack, char out[32])
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

/*
 * The files record: the filters that have a durable file of their own (e->filed), one
 * "ID FILE" a line (ID in 16 hex digits). A file it lists that is missing at a start, and that
 * holds no filter loaded from elsewhere (its pack, a file renamed) nor one the log's replay
 * drops, was lost outside the daemon: the start refuses (snap_files_check, srv_snap_load_end).
 * It is written whenever the set changed: before a pack is written (so a filter that left its
 * pack is listed before the pack lets it go), at the end of a cycle, and at a start. Until it is
 * written the log keeps every record since its last write (srv_snap_log_needed): a new file
 * not yet listed is covered by the log, and a listed file removed since by the log's DROP,
 * FLUSHALL or RENAME record. Without the log, a removal writes it first (snap_files_leaving).
 */
#define SNAP_FILES	"files"
#define SNAP_FILES_LINE (16 + 1 + BF_SNAPSHOT_NAME_MAX + 1)

static int snap_files_write(struct srv_snap *sn)
{
	size_t n = 0, len = 0;
	char *text;
	int rc;

	for (size_t i = 0; i < sn->nents; i++)
		n += sn->ents[i]->filed;
	text = malloc(n * SNAP_FILES_LINE + 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < sn->nents; i++) {
		const struct snap_entry *e = sn->ents[i];
		char file[BF_SNAPSHOT_NAME_MAX];

		if (e->filed)
			len +=
			    (size_t)snprintf(text + len, SNAP_FILES_LINE + 1, "%016" PRIx64 " %s\n",
					     (uint64_t)e->f->id, snap_file(e, file));
	}
	rc = bf_file_write(sn->dirfd, SNAP_FILES, text, len, NULL);
	free(text);
	return rc;
}

/* Write the files record if the set changed. 0, or a negative errno (logged; it stays due, and
 * the log is kept until it is written). */
static int snap_files_sync(struct srv_snap *sn)
{
	uint64_t lsn = sn->ctx->logged_lsn;
	int rc;

	if (!sn->files_stale)
		return 0;
	rc = snap_files_write(sn);
	if (rc) {
		srv_log(SRV_LOG_ERR, "%s/%s: cannot write: %s; the log is kept until it is",
			sn->dir, SNAP_FILES, strerror(-rc));
		return rc;
	}
	sn->files_stale = false;
	sn->files_lsn = lsn;
	return 0;
}

/* A listed file is about to be removed (its entry is out of ents, or no longer filed). Without
 * the log, the record is written first: no record of a log would explain the file gone. */
static void snap_files_removing(struct srv_snap *sn)
{
	sn->files_stale = true;
	if (!sn->cfg->wal)
		(void)snap_files_sync(sn);
}

/* Make e a member of pack. */
static void snap_pack_join(struct srv_snap *sn, struct snap_entry *e, int pack)
{
	e->pack = pack;
	sn->packs[pack].n++;
	sn->packs[pack].dirty = true;
}

/*
 * Take e out of its pack: the pack must be written again without it. What its filter holds
 * stays covered by the log until then (need: the oldest record that must stay).
 */
static void snap_pack_leave(struct srv_snap *sn, struct snap_entry *e, uint64_t need)
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

/* f's live entry (f->owner), or NULL. */
static struct snap_entry *snap_find(const struct srv_snap *sn, const struct bf_filter *f)
{
	struct snap_entry *e = f->owner;

	(void)sn;
	return e && e->f == f ? e : NULL;
}

/* A new entry for f, listed in ents. NULL on allocation failure (logged). */
static struct snap_entry *snap_track(struct srv_snap *sn, struct bf_filter *f)
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
static void snap_release(struct snap_entry *e)
{
	if (!e->f && !e->busy && !e->queued && !e->packing && !e->loading && !e->waited)
		bf_pool_put(e);
}

static void snap_unlink(struct srv_snap *sn, const char *file, const char *why)
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
static void snap_unlink_later(struct srv_snap *sn, const char *file, const char *why)
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

static uint64_t snap_ms(uint64_t ns)
{
	return ns / 1000000;
}

/* Set e->failed, keeping sn->nfailing (the live entries whose latest write failed) exact. */
static void snap_set_failed(struct srv_snap *sn, struct snap_entry *e, bool failed)
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
static void snap_record(struct srv_snap *sn, struct snap_entry *e, const char *file,
			const char *name, int rc, const char *step, uint64_t cut, uint64_t need,
			uint64_t bytes, uint64_t write_ns, const char *kind)
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

/* ---------------------------------------------------------------------------------------- */
/* Background jobs */

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

/*
 * Threadpool: lower this thread's priority (Linux nice values are per thread), once, so the
 * loop thread and the clients on a small machine get the CPU before snapshot work does (the
 * checksum, the copy into the page cache, the prefault). Best effort. The thread keeps it:
 * an unprivileged process cannot undo it, and all blossomd puts on the threadpool is
 * background work (snapshots, and the deletes of log segments no longer needed).
 */
static void snap_worker_nice(void)
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

/* Threadpool: write the job's filter. */
static void snap_job_work(uv_work_t *req)
{
	struct snap_job *job = req->data;
	const char *step = NULL;
	uint64_t t0;
	int rc;

	snap_worker_nice();
	t0 = uv_hrtime();
	rc = bf_snapshot_write(job->f, job->generation, job->sn->dirfd, job->file, &step);

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
static void snap_job_settle(struct srv_snap *sn)
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
	int rc = uv_queue_work(sn->loop, &job->req, snap_job_work, snap_job_after);

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
static void snap_job_copy_abort(struct srv_snap *sn)
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
static int snap_job_start(struct srv_snap *sn, struct snap_entry *e)
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

/* ---------------------------------------------------------------------------------------- */
/* Pack files */

static void snap_pjob_free(struct snap_pjob *pj)
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

static void snap_pmem_free(struct snap_pmem *pm)
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
static bool snap_pmem_wait(struct srv_snap *sn, int pack)
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
 * A round of budget_ns of loop time (0: no end) has taken one more step, to pos: is it over?
 * *k counts its steps (round_max caps them, for tests); the clock is read every 64 places.
 */
static bool snap_round_over(const struct srv_snap *sn, size_t *k, size_t pos, uint64_t t0,
			    uint64_t budget_ns)
{
	return budget_ns &&
	       (++*k >= sn->round_max || ((pos & 63) == 0 && uv_hrtime() - t0 >= budget_ns));
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
static void snap_pjob_apply(struct srv_snap *sn, struct snap_pjob *pj)
{
	snap_pjob_record(sn, pj, 0);
}

/* Threadpool: write a pack job's file. */
static void snap_pjob_work(uv_work_t *req)
{
	struct snap_pjob *pj = req->data;
	const char *step = NULL;
	uint64_t t0;
	int rc;

	snap_worker_nice();
	t0 = uv_hrtime();
	rc = bf_pack_write(pj->sn->dirfd, pj->file, pj->buf, pj->ends, pj->count, &step);
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
	int rc = uv_queue_work(sn->loop, &pj->req, snap_pjob_work, snap_pjob_after);

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
static void snap_pjob_abort(struct srv_snap *sn)
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
static void snap_pjob_settle(struct srv_snap *sn)
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
static int snap_pack_start(struct srv_snap *sn, int pack)
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
static int snap_pack_write_now(struct srv_snap *sn, int pack)
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
static bool snap_pack_claim(struct srv_snap *sn, struct snap_entry *e)
{
	if (!snap_packable(sn, e->f))
		return false;
	if (e->pack < 0)
		snap_pack_join(sn, e, snap_pack_of(e->f));
	sn->packs[e->pack].dirty = true;
	return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Cycles */

static void ckpt_pending_clear(struct srv_snap *sn)
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
static void ckpt_waits_clear(struct srv_snap *sn)
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
static int ckpt_wait_add(struct srv_snap *sn, struct snap_entry *e, bool close)
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
static void ckpt_step(struct srv_snap *sn)
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

static void ckpt_on_tick(uv_timer_t *t)
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

/* Write e now, on the loop thread, from the live filter, as a file of its own. */
static int snap_write_now(struct srv_snap *sn, struct snap_entry *e)
{
	const struct bf_filter *f = e->f;
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
	t0 = uv_hrtime();
	rc = bf_snapshot_write(f, gen, sn->dirfd, file, &step);
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
static bool snap_detach(struct srv_snap *sn, struct snap_entry *e)
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
	if (remove_file)
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

/* ---------------------------------------------------------------------------------------- */
/* Paging (bloomd's close, cold filters) */

void srv_snap_set_paged_in(struct srv_snap *sn, void (*fn)(void *arg), void *arg)
{
	sn->paged_in = fn;
	sn->paged_arg = arg;
}

int srv_snap_page_out(struct srv_snap *sn, struct bf_filter *f)
{
	struct snap_entry *e;
	bool restart = false;
	int rc;

	if (!f->params->persist)
		return -ENOTSUP;
	if (f->paged)
		return 0;
	e = snap_find(sn, f);
	if (!e)
		return -ENOENT;
	if (e->wait_error) {
		rc = e->wait_error; /* the close that waited answers it; the next one retries */
		e->wait_error = 0;
		return rc;
	}
	if (e->waited) {
		e->wait_close = true; /* a flush's write is under way: paged out after it */
		return -EINPROGRESS;
	}
	/* A large filter that must be written is written in the background, as a checkpoint
	 * writes it, and paged out then (the command waits; other clients do not). */
	if ((snap_dirty(e) || !e->own_file) && e->pack < 0 && !sn->stopping &&
	    bf_filter_bytes(f) > SRV_SNAP_SLICE) {
		rc = ckpt_wait_add(sn, e, true);
		if (rc)
			return rc;
		ckpt_step(sn);
		return -EINPROGRESS;
	}
	/* Its layers go: a copy of them in progress is given up (the file is written now). */
	if (sn->copy && sn->copy->e == e) {
		snap_job_copy_abort(sn);
		restart = true;
	}
	/* On disk as a file of its own, durable, as it is now: the load on its next use reads
	 * that file. */
	if (snap_dirty(e) || e->pack >= 0 || !e->own_file || restart) {
		rc = snap_write_now(sn, e);
		if (rc) {
			if (restart)
				ckpt_step(sn);
			return rc;
		}
	}
	rc = bf_filter_page_out(f);
	if (!rc)
		srv_log(SRV_LOG_DEBUG, "filter '%s' paged out", bf_filter_name(f));
	if (restart)
		ckpt_step(sn);
	return rc;
}

struct snap_pagein {
	uv_work_t req;
	struct srv_snap *sn;
	struct snap_entry *e;
	struct bf_filter *copy;
	int rc;
	char why[320];
	char file[BF_SNAPSHOT_NAME_MAX];
};

static void snap_pagein_work(uv_work_t *req)
{
	struct snap_pagein *l = req->data;
	uint64_t gen;

	l->rc = bf_snapshot_read(l->sn->dirfd, l->file, &l->copy, &gen, l->why, sizeof(l->why));
}

static void snap_pagein_after(uv_work_t *req, int status)
{
	struct snap_pagein *l = req->data;
	struct snap_entry *e = l->e;
	struct srv_snap *sn = l->sn;
	int rc = status ? status : l->rc;

	e->loading = false;
	if (e->f && e->f->paged) {
		if (!rc && (rc = bf_filter_page_in(e->f, l->copy)) == 0)
			l->copy = NULL;
		else if (rc == -ENOMEM)
			snprintf(l->why, sizeof(l->why), "it would pass max_memory");
		else if (!l->why[0])
			snprintf(l->why, sizeof(l->why), "%s", strerror(-rc));
		if (rc) {
			e->load_error = (int16_t)rc;
			srv_log(SRV_LOG_ERR, "filter '%s': cannot load it from %s/%s: %s",
				bf_filter_name(e->f), sn->dir, l->file, l->why);
		} else {
			srv_log(SRV_LOG_DEBUG, "filter '%s' paged in from %s", bf_filter_name(e->f),
				l->file);
		}
	}
	bf_filter_free(l->copy);
	free(l);
	snap_release(e);
	if (sn->paged_in)
		sn->paged_in(sn->paged_arg);
}

int srv_snap_page_in(struct srv_snap *sn, struct bf_filter *f)
{
	struct snap_entry *e = snap_find(sn, f);
	struct snap_pagein *l;
	int rc;

	if (!e)
		return -ENOENT;
	if (e->load_error) {
		rc = e->load_error; /* the commands that waited answer it; the next one retries */
		e->load_error = 0;
		return rc;
	}
	if (e->loading)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->req.data = l;
	l->sn = sn;
	l->e = e;
	snap_file(e, l->file);
	rc = uv_queue_work(sn->loop, &l->req, snap_pagein_work, snap_pagein_after);
	if (rc) {
		free(l);
		return rc;
	}
	e->loading = true;
	return 0;
}

size_t srv_snap_cold(struct srv_snap *sn, uint32_t now_s, uint32_t interval, size_t budget)
{
	size_t n = 0, writes = 0;

	if (!interval || sn->stopping)
		return 0;
	for (size_t k = 0; k < budget && sn->nents; k++) {
		struct snap_entry *e;

		if (sn->cold_pos >= sn->nents)
			sn->cold_pos = 0;
		e = sn->ents[sn->cold_pos++];
		if (!e->f || e->f->paged || e->loading || e->busy || e->packing ||
		    now_s - e->f->used_s <= interval || snap_dirty(e))
			continue;
		/* A packed one is written as a file of its own first: a few per call. */
		if (e->pack >= 0 && writes++ >= 16)
			continue;
		if (srv_snap_page_out(sn, e->f) == 0)
			n++;
	}
	return n;
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

void srv_snap_shutdown(struct srv_snap *sn)
{
	if (!sn || sn->stopping)
		return;
	sn->stopping = true;
	snap_job_copy_abort(sn);
	snap_pjob_abort(sn);
	if (sn->pjob && sn->pjob->recording)
		snap_pjob_apply(sn, sn->pjob); /* so the pass below sees its members written */
	ckpt_waits_clear(sn); /* the shutdown pass writes them; their clients are let go */
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

/* ---------------------------------------------------------------------------------------- */
/* Start-up */

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

static bool snap_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcmp(s + n - k, suffix);
}

static int snap_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The snapshot files in the directory, sorted, as a malloc'd array of malloc'd names; leftover
 * temp files are removed on the way. 0 or -errno.
 */
static int snap_list(struct srv_snap *sn, char ***out, size_t *n)
{
	char **names = NULL;
	size_t cap = 0, count = 0;
	struct dirent *de;
	int fd = dup(sn->dirfd), rc = 0;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rewinddir(d);
	while ((errno = 0, de = readdir(d))) {
		struct stat sb;

		if (de->d_name[0] == '.')
			continue;
		if (snap_has_suffix(de->d_name, BF_SNAPSHOT_SUFFIX BF_SNAPSHOT_TMP_SUFFIX)) {
			if (unlinkat(sn->dirfd, de->d_name, 0) == 0)
				srv_log(SRV_LOG_NOTICE, "removed leftover temp file %s/%s", sn->dir,
					de->d_name);
			else
				srv_log(SRV_LOG_WARNING,
					"cannot remove leftover temp file %s/%s: %s", sn->dir,
					de->d_name, strerror(errno));
			continue;
		}
		if (!snap_has_suffix(de->d_name, BF_SNAPSHOT_SUFFIX))
			continue;
		if (fstatat(sn->dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(sb.st_mode)) {
			srv_log(SRV_LOG_WARNING, "%s/%s is not a regular file; ignored", sn->dir,
				de->d_name);
			continue;
		}
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **p = realloc(names, ncap * sizeof(*p));

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			names = p;
			cap = ncap;
		}
		names[count] = strdup(de->d_name);
		if (!names[count]) {
			rc = -ENOMEM;
			break;
		}
		count++;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < count; i++)
			free(names[i]);
		free(names);
		return rc;
	}
	if (count)
		qsort(names, count, sizeof(*names), snap_cmp_names);
	*out = names;
	*n = count;
	return 0;
}

static void snap_aside_note(struct srv_snap *sn, const char *label, const char *file,
			    const char *name, size_t name_len);

/* Rename a bad file to FILE.corrupt (or .corrupt.N if taken); a file of its own is noted for
 * srv_snap_after_replay(). */
static void snap_set_aside(struct srv_snap *sn, const char *file, const char *why)
{
	if (!snap_has_suffix(file, BF_PACK_SUFFIX))
		snap_aside_note(sn, file, file, NULL, 0);

	char to[BF_SNAPSHOT_NAME_MAX + 32];

	for (int i = 0; i < SNAP_CORRUPT_TRIES; i++) {
		if (i)
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX ".%d", file, i);
		else
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (faccessat(sn->dirfd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
		    i + 1 < SNAP_CORRUPT_TRIES)
			continue;
		break;
	}
	sn->st.set_aside++;
	if (renameat(sn->dirfd, file, sn->dirfd, to)) {
		srv_log(SRV_LOG_ERR,
			"snapshot %s/%s: %s; not loaded, and it cannot be renamed to %s: %s",
			sn->dir, file, why, to, strerror(errno));
		return;
	}
	srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; renamed to %s, filter not loaded", sn->dir, file,
		why, to);
}

static void snap_aside_free(struct srv_snap *sn)
{
	for (size_t i = 0; i < sn->naside; i++) {
		free(sn->aside[i].label);
		free(sn->aside[i].file);
		free(sn->aside[i].name);
	}
	free(sn->aside);
	sn->aside = NULL;
	sn->naside = 0;
}

/*
 * Remember what a bad file or pack entry held, for srv_snap_after_replay(): label names it in
 * logs; the filter is matched by its file name (file) or, for a pack entry, by its name (name,
 * NULL if unknown).
 */
static void snap_aside_note(struct srv_snap *sn, const char *label, const char *file,
			    const char *name, size_t name_len)
{
	struct snap_aside *a = realloc(sn->aside, (sn->naside + 1) * sizeof(*a));

	if (!a)
		return;
	sn->aside = a;
	a = &sn->aside[sn->naside];
	a->label = strdup(label);
	a->file = file ? strdup(file) : NULL;
	a->name = name ? strndup(name, name_len) : NULL;
	if (a->label)
		sn->naside++;
	else {
		free(a->file);
		free(a->name);
	}
}

/*
 * Adopt f, read from file (pack >= 0: that pack file's), into the registry and track it. The
 * same filter in a pack and in a file of its own (a crash between writing one and removing the
 * other): the higher generation wins; the other file is removed, or its pack marked for
 * writing again (repack[]). 0 (adopted, or the older copy dropped), or a negative errno that
 * must stop the start. f is consumed.
 */
/* Where the search for id's slot begins (ids_cap > 0). */
static size_t snap_id_home(const struct srv_snap *sn, uint64_t id)
{
	return (size_t)(id * 0x9e3779b97f4a7c15ULL) & (sn->ids_cap - 1);
}

/* The load-time slot of filter id (free if it has none yet). The table has room. */
static struct snap_idslot *snap_id_slot(const struct srv_snap *sn, uint64_t id)
{
	size_t mask = sn->ids_cap - 1, i = snap_id_home(sn, id);

	while (sn->ids[i].id && sn->ids[i].id != id)
		i = (i + 1) & mask;
	return &sn->ids[i];
}

/* Room for n ids at load. 0 or -ENOMEM. */
static int snap_ids_reserve(struct srv_snap *sn, size_t n)
{
	struct snap_idslot *old = sn->ids;
	size_t ocap = sn->ids_cap;

	if (2 * n <= sn->ids_cap)
		return 0;
	sn->ids_cap = ocap ? 2 * ocap : 1024;
	while (sn->ids_cap < 2 * n)
		sn->ids_cap *= 2;
	sn->ids = calloc(sn->ids_cap, sizeof(*sn->ids));
	if (!sn->ids) {
		sn->ids = old;
		sn->ids_cap = ocap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < ocap; i++)
		if (old[i].id)
			*snap_id_slot(sn, old[i].id) = old[i];
	free(old);
	return 0;
}

/*
 * Of two copies loaded of one filter (one name, or one id), the newer was found after the
 * older e: e's filter leaves the registry, its copy its file or its pack.
 */
static void snap_forget_older(struct srv_snap *sn, struct snap_entry *e, bool repack[SNAP_PACKS])
{
	struct bf_filter *f = e->f;

	if (e->pack >= 0)
		repack[e->pack] = true;
	snap_pack_leave(sn, e, UINT64_MAX);
	if (e->own_file) {
		const char *renamed = f->id ? snap_id_slot(sn, f->id)->renamed : NULL;
		char file[BF_SNAPSHOT_NAME_MAX];

		snap_unlink(sn, renamed ? renamed : snap_file(e, file), "older copy");
	}
	sn->ents[e->idx] = sn->ents[--sn->nents];
	sn->ents[e->idx]->idx = e->idx;
	bf_pool_put(e);
	bf_registry_drop(sn->ctx->reg, bf_filter_name(f), f->name_len);
	sn->st.loaded--;
}

/* f (from file, or pack >= 0 of it) is an older copy than the one loaded (generation had). */
static void snap_skip_older(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, uint64_t had,
			    const char *file, int pack, bool repack[SNAP_PACKS])
{
	srv_log(SRV_LOG_NOTICE,
		"filter '%s' (id %" PRIu64 "): %s/%s holds an older copy (generation %" PRIu64
		", loaded %" PRIu64 "); %s",
		bf_filter_name(f), (uint64_t)f->id, sn->dir, file, gen, had,
		pack < 0 ? "removed" : "dropped from the pack");
	if (pack < 0)
		snap_unlink(sn, file, "older copy");
	else
		repack[pack] = true;
	bf_filter_free(f);
}

/*
 * e's filter was loaded from pack, where it no longer belongs (it grew past
 * snapshot_pack_bytes, or that is smaller now). Its pack is the only durable copy of it, and the
 * log may no longer hold it: it stays a member of that pack until a durable file holds it
 * elsewhere. One too large for a pack is dirty, so the next checkpoint (or the stop) writes it
 * as a file of its own; snap_record() then takes it out of the pack, which is written again
 * without it after that. One small enough stays in that pack.
 */
static void snap_adopt_stay(struct srv_snap *sn, struct snap_entry *e, int pack)
{
	if (e->pack >= 0)
		sn->packs[e->pack].n--;
	e->pack = pack;
	sn->packs[pack].n++;
	if (!snap_packable(sn, e->f))
		e->on_disk = false;
}

/*
 * Adopt f, loaded from file (pack >= 0: an entry of that pack), a copy of generation gen: of two
 * copies of one filter (one id), or of two filters under one name, the one written later stays.
 * A renamed file's filter (renamed: its header has its name before a RENAME) is adopted under a
 * hidden name until the log's replay of that RENAME names it (srv_snap_load_end if none does):
 * under the old name it could meet a filter that took that name since, and under the new one
 * the records before the RENAME of a filter it replaced.
 */
static int snap_adopt(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, bool renamed,
		      const char *file, int pack, bool repack[SNAP_PACKS])
{
	struct snap_idslot *slot = NULL;
	struct bf_filter *old;
	struct snap_entry *e;
	int rc;

	if (gen > sn->gen)
		sn->gen = gen;
	/* One filter under two names: renamed, and the old name's copy not yet removed. */
	if (f->id) {
		if (snap_ids_reserve(sn, sn->ids_n + 1)) {
			bf_filter_free(f);
			return -ENOMEM;
		}
		slot = snap_id_slot(sn, f->id);
		if (slot->id && slot->e) {
			if (gen <= slot->gen) {
				snap_skip_older(sn, f, gen, slot->gen, file, pack, repack);
				return 0;
			}
			srv_log(SRV_LOG_NOTICE,
				"filter '%s' (id %" PRIu64
				"): %s/%s holds a newer copy (generation "
				"%" PRIu64 ") than '%s' loaded (%" PRIu64 ")",
				bf_filter_name(f), (uint64_t)f->id, sn->dir, file, gen,
				bf_filter_name(slot->e->f), slot->gen);
			snap_forget_older(sn, slot->e, repack);
			slot->e = NULL;
		}
	}
	if (renamed)
		rc = bf_registry_adopt_hidden(sn->ctx->reg, f);
	else
		rc = bf_registry_adopt(sn->ctx->reg, bf_filter_name(f), f->name_len, f);
	if (rc == -EEXIST &&
	    (old = bf_registry_get(sn->ctx->reg, bf_filter_name(f), f->name_len)) &&
	    (e = snap_find(sn, old))) {
		uint64_t had = snap_id_slot(sn, old->id)->gen;

		if (gen <= had) {
			snap_skip_older(sn, f, gen, had, file, pack, repack);
			return 0;
		}
		srv_log(SRV_LOG_NOTICE,
			"filter '%s': %s/%s holds a newer copy (generation %" PRIu64
			") than the one loaded (%" PRIu64 ")",
			bf_filter_name(f), sn->dir, file, gen, had);
		if (e->f->id && e->f->id != f->id)
			snap_id_slot(sn, e->f->id)->e = NULL;
		snap_forget_older(sn, e, repack);
		rc = bf_registry_adopt(sn->ctx->reg, bf_filter_name(f), f->name_len, f);
	}
	if (rc == -ENOMEM) {
		srv_log(SRV_LOG_ERR,
			"snapshot %s/%s: filter '%s' needs %" PRIu64 " bytes; with %" PRIu64
			" loaded that passes max_memory (%" PRIu64
			"); not starting (raise max_memory)",
			sn->dir, file, bf_filter_name(f), bf_filter_bytes(f),
			bf_registry_memory(sn->ctx->reg), bf_registry_max_memory(sn->ctx->reg));
		bf_filter_free(f);
		return rc;
	}
	if (rc) {
		char why[320];

		snprintf(why, sizeof(why), "cannot add filter '%s': %s", bf_filter_name(f),
			 rc == -EEXIST ? "a filter of that name is already loaded" : strerror(-rc));
		bf_filter_free(f);
		if (pack >= 0) {
			srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not loaded", sn->dir, file, why);
			repack[pack] = true;
		} else {
			snap_set_aside(sn, file, why);
		}
		return 0;
	}
	e = snap_track(sn, f);
	if (!e)
		return -ENOMEM;
	e->on_disk = true;
	e->own_file = pack < 0;
	e->filed = pack < 0;
	e->saved_changes = f->changes;
	e->need_lsn = f->lsn + 1;
	sn->st.loaded++;
	if (f->lsn > sn->loaded_lsn)
		sn->loaded_lsn = f->lsn;
	/* A filter that had no id before (a file from before ids) has one now. */
	if (!slot) {
		if (snap_ids_reserve(sn, sn->ids_n + 1))
			return -ENOMEM;
		slot = snap_id_slot(sn, f->id);
	}
	if (!slot->id)
		sn->ids_n++;
	slot->id = f->id;
	slot->e = e;
	slot->gen = gen;
	free(slot->renamed);
	slot->renamed = renamed ? strdup(file) : NULL;
	if (renamed && !slot->renamed)
		return -ENOMEM;
	if (pack >= 0 && e->pack != pack)
		snap_adopt_stay(sn, e, pack);
	/* Packed where it was a file of its own: its pack is written with it, and only then
	 * is the file removed (snap_pjob_record). */
	else if (e->pack >= 0 && pack < 0)
		repack[e->pack] = true;
	return 0;
}

/* Load one file of its own. 0 (loaded or set aside) or a negative errno that must stop the
 * start. */
static int snap_load_one(struct srv_snap *sn, const char *file, uint64_t *newest,
			 bool repack[SNAP_PACKS])
{
	char why[640], expect[BF_SNAPSHOT_NAME_MAX];
	struct bf_filter *f = NULL;
	bool renamed = false;
	uint64_t gen = 0;
	struct stat sb;
	int rc;

	rc = bf_snapshot_read(sn->dirfd, file, &f, &gen, why, sizeof(why));
	if (rc == -EINVAL || rc == -ENOTSUP) {
		snap_set_aside(sn, file, why);
		return 0;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not starting (fix or move the file)",
			sn->dir, file, why);
		return rc;
	}
	bf_snapshot_filename(bf_filter_name(f), f->name_len, expect);
	if (strcmp(expect, file)) {
		/* Renamed as metadata (snap_rename_file): the file's name is the filter's. */
		char name[BF_NAME_MAX];
		size_t len;

		const struct snap_idslot *slot = sn->ids && f->id ? snap_id_slot(sn, f->id) : NULL;

		/* Not renamed, but a copy of a file loaded (the same generation of the filter). */
		if (bf_snapshot_filename_name(file, name, &len) ||
		    (slot && slot->e && slot->gen == gen)) {
			snprintf(why, sizeof(why), "holds filter '%s', whose file name is %s",
				 bf_filter_name(f), expect);
			bf_filter_free(f);
			snap_set_aside(sn, file, why);
			return 0;
		}
		srv_log(SRV_LOG_DEBUG, "%s/%s holds filter '%.*s' under its name before a RENAME",
			sn->dir, file, (int)len, name);
		renamed = true;
	}
	if (!f->params->persist) {
		bf_filter_free(f);
		snap_set_aside(sn, file, "holds a filter that is not persistent");
		return 0;
	}
	if (fstatat(sn->dirfd, file, &sb, 0) == 0) {
		sn->st.loaded_bytes += (uint64_t)sb.st_size;
		if ((uint64_t)sb.st_mtime > *newest)
			*newest = (uint64_t)sb.st_mtime;
	}
	srv_log(SRV_LOG_DEBUG,
		"loaded filter '%s' from %s/%s (%" PRIu64 " bytes, generation %" PRIu64 ")",
		bf_filter_name(f), sn->dir, file, bf_filter_bytes(f), gen);
	return snap_adopt(sn, f, gen, renamed, file, -1, repack);
}

/*
 * Keep a copy of a pack with a bad entry as FILE.corrupt (a hard link: the pack itself stays,
 * its good entries load, and it is written again without the bad one).
 */
static void snap_keep_copy(struct srv_snap *sn, const char *file)
{
	char to[BF_SNAPSHOT_NAME_MAX + 32];

	for (int i = 0; i < SNAP_CORRUPT_TRIES; i++) {
		if (i)
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX ".%d", file, i);
		else
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (linkat(sn->dirfd, file, sn->dirfd, to, 0) == 0) {
			srv_log(SRV_LOG_NOTICE, "copy of %s/%s kept as %s", sn->dir, file, to);
			return;
		}
		if (errno != EEXIST)
			break;
	}
	srv_log(SRV_LOG_WARNING, "cannot keep a copy of %s/%s: %s", sn->dir, file, strerror(errno));
}

/* Load pack file `pack`, read into buf's buffer (bf_pack_reopen). 0 (loaded, or set aside) or a
 * negative errno that must stop the start. */
static int snap_load_pack(struct srv_snap *sn, int pack, struct bf_pack *buf, uint64_t *newest,
			  bool repack[SNAP_PACKS])
{
	char file[32], why[640], label[96];
	struct bf_pack pk = *buf;
	struct stat sb;
	bool kept = false;
	int rc;

	snap_pack_name(pack, file);
	if (fstatat(sn->dirfd, file, &sb, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		return 0;
	rc = bf_pack_reopen(sn->dirfd, file, &pk, why, sizeof(why));
	*buf = pk; /* its buffer, whatever the result */
	if (rc == -EINVAL || rc == -ENOTSUP) {
		snap_set_aside(sn, file, why);
		snprintf(label, sizeof(label), "%s (every filter in it)", file);
		snap_aside_note(sn, label, NULL, NULL, 0);
		return 0;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not starting (fix or move the file)",
			sn->dir, file, why);
		return rc;
	}
	sn->st.loaded_bytes += pk.len;
	/* Its filters take about as many bytes of heap as they have in the file, if their layers
	 * all come from the heap (not if packs hold layers big enough for mappings of their own:
	 * the room would be populated for nothing). */
	if (sn->cfg->snapshot_pack_bytes < SRV_MMAP_THRESHOLD)
		srv_prefault_expect(sn->prefault, pk.len);
	if ((uint64_t)sb.st_mtime > *newest)
		*newest = (uint64_t)sb.st_mtime;
	/* Packs hold about as many each: size the tables for all of them once. */
	size_t expect = sn->nents + (size_t)pk.count * (size_t)(SNAP_PACKS - pack);
	bf_registry_reserve(sn->ctx->reg, expect);
	/* Best effort too: a million ids by doublings faulted in 64 MB, not 32 (adopt grows the
	 * table if this could not). */
	(void)snap_ids_reserve(sn, expect);
	if (sn->ents_cap < expect) {
		struct snap_entry **grown = realloc(sn->ents, expect * sizeof(*grown));

		if (grown) {
			sn->ents = grown;
			sn->ents_cap = expect;
		}
	}
	for (uint32_t i = 0; i < pk.count && !rc; i++) {
		struct bf_filter *f = NULL;
		uint64_t gen, next_id;
		const char *next_name;
		size_t next_len;

		/* The id table and the registry's buckets are far larger than the caches: fetch
		 * what an entry a few ahead will look up while this one is decoded (a third of
		 * the adopting was waiting on those misses). */
		if (i + SNAP_LOAD_AHEAD < pk.count &&
		    bf_pack_entry_peek(&pk, i + SNAP_LOAD_AHEAD, &next_id, &next_name, &next_len)) {
			if (next_id && sn->ids_cap)
				__builtin_prefetch(&sn->ids[snap_id_home(sn, next_id)]);
			bf_registry_prefetch(sn->ctx->reg, next_name, next_len);
		}

		/* The heap grows by about a filter's size per entry: its new memory is faulted
		 * in by the prefault thread, just ahead of the entries that will use it. */
		if (i % SNAP_LOAD_POKE == 0)
			srv_prefault_poke(sn->prefault);
		rc = bf_pack_entry(&pk, i, UINT64_MAX, &f, &gen, why, sizeof(why));
		if (rc == -EINVAL) {
			const unsigned char *e;
			const char *name = NULL;
			size_t elen, nlen = 0;

			bf_pack_entry_bytes(&pk, i, &e, &elen);
			if (!bf_snapshot_entry_name(e, elen, &name, &nlen))
				name = NULL;
			srv_log(SRV_LOG_ERR,
				"snapshot %s/%s: entry %" PRIu32 " (filter '%.*s'): %s; "
				"not loaded",
				sn->dir, file, i, name ? (int)nlen : 1, name ? name : "?", why);
			if (!kept)
				snap_keep_copy(sn, file);
			kept = true;
			repack[pack] = true;
			sn->st.set_aside++;
			snprintf(label, sizeof(label), "%s entry %" PRIu32, file, i);
			snap_aside_note(sn, label, NULL, name, nlen);
			rc = 0;
			continue;
		}
		if (rc) {
			srv_log(SRV_LOG_ERR,
				"snapshot %s/%s: entry %" PRIu32 ": %s; not starting (raise "
				"max_memory?)",
				sn->dir, file, i, why);
			break;
		}
		if (!f->params->persist) {
			bf_filter_free(f);
			repack[pack] = true;
			continue;
		}
		rc = snap_adopt(sn, f, gen, false, file, pack, repack);
	}
	return rc;
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
static int snap_packs_check(struct srv_snap *sn)
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

/* Read the files record: its text, NUL-terminated, in *out (NULL if there is none). 0 or a
 * negative errno. */
static int snap_files_read(struct srv_snap *sn, char **out)
{
	int fd = openat(sn->dirfd, SNAP_FILES, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	size_t len = 0;
	char *text;

	*out = NULL;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &sb) || !(text = malloc((size_t)sb.st_size + 1))) {
		int rc = errno ? -errno : -ENOMEM;
		close(fd);
		return rc;
	}
	while (len < (size_t)sb.st_size) {
		ssize_t n = read(fd, text + len, (size_t)sb.st_size - len);

		if (n <= 0) {
			int rc = n ? -errno : -EIO;
			close(fd);
			free(text);
			return rc;
		}
		len += (size_t)n;
	}
	close(fd);
	text[len] = '\0';
	*out = text;
	return 0;
}

/* Note a file the record lists that is missing (and no filter loaded holds its id). */
static int snap_files_missing(struct srv_snap *sn, uint64_t id, const char *file)
{
	struct snap_listed *m = realloc(sn->missing, (sn->nmissing + 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	sn->missing = m;
	m[sn->nmissing].id = id;
	m[sn->nmissing].file = strdup(file);
	if (!m[sn->nmissing].file)
		return -ENOMEM;
	sn->nmissing++;
	return 0;
}

/* A line of the record (at a start) names the file the filter of that id was loaded from: the
 * record needs no write for it (sn->files_listed counts them). */
static void snap_files_match(struct srv_snap *sn, uint64_t id, const char *file)
{
	const struct snap_idslot *slot = sn->ids ? snap_id_slot(sn, id) : NULL;
	char own[BF_SNAPSHOT_NAME_MAX];

	if (slot && slot->e && slot->e->f && slot->e->filed && !slot->renamed &&
	    !strcmp(snap_file(slot->e, own), file))
		sn->files_listed++;
}

/*
 * After the load: the files the record lists that are missing, and whose filter no other copy
 * loaded (its pack, the same filter's file under a new name), go in sn->missing; the log's
 * replay may yet explain them (srv_snap_replayed). One set aside as corrupt is told as that.
 */
static int snap_files_check(struct srv_snap *sn)
{
	char *text, *line, *nl, aside[BF_SNAPSHOT_NAME_MAX + 16];
	struct stat sb;
	int rc = snap_files_read(sn, &text);

	sn->files_listed = text ? 0 : SIZE_MAX;
	sn->files_lines = 0;
	for (line = text; !rc && line && *line; line = nl + 1) {
		char *end, *file;
		uint64_t id;

		nl = strchr(line, '\n');
		if (!nl || nl - line < 18 || line[16] != ' ') {
			rc = -EBADMSG;
			break;
		}
		*nl = '\0';
		id = strtoull(line, &end, 16);
		file = line + 17;
		if (end != line + 16 || strlen(file) >= BF_SNAPSHOT_NAME_MAX || strchr(file, '/') ||
		    !snap_has_suffix(file, BF_SNAPSHOT_SUFFIX)) {
			rc = -EBADMSG;
			break;
		}
		sn->files_lines++;
		snap_files_match(sn, id, file);
		snprintf(aside, sizeof(aside), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (!fstatat(sn->dirfd, file, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !fstatat(sn->dirfd, aside, &sb, AT_SYMLINK_NOFOLLOW) ||
		    (sn->ids && snap_id_slot(sn, id)->e))
			continue;
		rc = snap_files_missing(sn, id, file);
	}
	free(text);
	if (rc)
		srv_log(SRV_LOG_ERR, "%s/%s: %s; not starting", sn->dir, SNAP_FILES,
			rc == -EBADMSG ? "a line is not \"ID FILE.bsnap\"" : strerror(-rc));
	return rc;
}

static void snap_files_explained(struct srv_snap *sn, size_t i)
{
	free(sn->missing[i].file);
	sn->missing[i] = sn->missing[--sn->nmissing];
}

void srv_snap_replayed(struct srv_snap *sn, int type, const void *payload, size_t len)
{
	char file[BF_SNAPSHOT_NAME_MAX];
	const char *name;
	uint64_t id;
	size_t n;

	if (!sn->nmissing)
		return;
	if (type == BF_REC_FLUSHALL) {
		while (sn->nmissing)
			snap_files_explained(sn, 0);
	} else if (type == BF_REC_DROP && !bf_record_read_id(payload, len, &id)) {
		for (size_t i = sn->nmissing; i--;)
			if (sn->missing[i].id == id)
				snap_files_explained(sn, i);
	} else if (type == BF_REC_RENAME && !bf_record_read_rename(payload, len, &id, &name, &n)) {
		/* The filter that had the new name is replaced: its file written over, or
		 * removed first. */
		bf_snapshot_filename(name, n, file);
		for (size_t i = sn->nmissing; i--;)
			if (!strcmp(sn->missing[i].file, file))
				snap_files_explained(sn, i);
	}
}

/* The files the record lists that are still missing after the replay: the start refuses, or
 * goes on without them as asked. */
static int snap_files_report(struct srv_snap *sn)
{
	int rc = sn->nmissing && !sn->accept_missing ? -ENOENT : 0;

	for (size_t i = 0; i < sn->nmissing; i++)
		srv_log(sn->accept_missing ? SRV_LOG_WARNING : SRV_LOG_ERR,
			"snapshot %s/%s is missing (%s/%s lists it, filter id %" PRIu64
			"): that filter is lost%s%s",
			sn->dir, sn->missing[i].file, sn->dir, SNAP_FILES, sn->missing[i].id,
			sn->cfg->wal ? ", but for what the write-ahead log holds from its creation"
				     : "",
			sn->accept_missing ? "; going on without it, as asked" : "");
	if (rc)
		srv_log(SRV_LOG_ERR, "not starting (put the files back, or start once with "
				     "--accept-missing-files to go on without them)");
	else if (sn->nmissing)
		sn->files_stale = true; /* told once */
	while (sn->nmissing)
		snap_files_explained(sn, 0);
	free(sn->missing);
	sn->missing = NULL;
	return rc;
}

static int snap_load_all(struct srv_snap *sn)
{
	uint64_t t0 = uv_hrtime(), newest = 0, ns;
	char **names = NULL;
	size_t n = 0, i;
	int rc;

	rc = snap_list(sn, &names, &n);
	if (rc) {
		srv_log(SRV_LOG_ERR, "data_dir %s: cannot list: %s", sn->dir, strerror(-rc));
		return rc;
	}
	rc = snap_packs_check(sn);
	if (rc)
		goto out;
	bool repack[SNAP_PACKS] = {false};
	/* A million names into the index one by one were a third of the load. */
	bf_registry_defer_names(sn->ctx->reg);
	struct bf_pack buf = {0};
	for (int pack = 0; pack < SNAP_PACKS && !rc; pack++)
		rc = snap_load_pack(sn, pack, &buf, &newest, repack);
	bf_pack_close(&buf);
	for (i = 0; i < n && !rc; i++)
		rc = snap_load_one(sn, names[i], &newest, repack);
	if (bf_registry_index_names(sn->ctx->reg) && !rc) {
		srv_log(SRV_LOG_ERR, "data_dir %s: out of memory indexing the filters' names",
			sn->dir);
		rc = -ENOMEM;
	}
	if (!rc)
		rc = snap_files_check(sn);
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (rc)
		return rc;
	/* A pack is written again only if it must change: not for having been loaded. */
	for (int pack = 0; pack < SNAP_PACKS; pack++)
		sn->packs[pack].dirty = repack[pack];
	ns = uv_hrtime() - t0;
	sn->st.load_ms = snap_ms(ns);
	if (newest)
		sn->ctx->last_save_unix = newest;
	if (n || sn->st.loaded || sn->st.set_aside)
		srv_log(SRV_LOG_INFO,
			"loaded %" PRIu64 " filters (%" PRIu64 " bytes) from %s in %" PRIu64
			" ms (%.2f GB/s)%s",
			sn->st.loaded, sn->st.loaded_bytes, sn->dir, sn->st.load_ms,
			ns ? (double)sn->st.loaded_bytes / (double)ns : 0.0,
			sn->st.set_aside ? "; some files were set aside, see above" : "");
	return 0;
}

static void snap_load_state_free(struct srv_snap *sn);

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

struct bf_filter *srv_snap_loaded(const struct srv_snap *sn, uint64_t id)
{
	const struct snap_idslot *slot;

	if (!sn->ids_cap || !id)
		return NULL;
	slot = snap_id_slot(sn, id);
	return slot->id && slot->e ? slot->e->f : NULL;
}

uint64_t srv_snap_loaded_lsn(const struct srv_snap *sn)
{
	return sn->loaded_lsn;
}

/*
 * A renamed file's filter that no RENAME of the log named (the log is off now, or was lost):
 * it takes its file's name; if another filter has that name, the file is set aside.
 */
static void snap_name_by_file(struct srv_snap *sn, struct snap_idslot *slot)
{
	/* Not slot->e: the replay may have dropped it (its entry is gone). */
	struct bf_filter *f = bf_registry_get_hidden(sn->ctx->reg, slot->id);
	struct snap_entry *e = f ? snap_find(sn, f) : NULL;
	char name[BF_NAME_MAX];
	size_t len;
	int rc;

	if (!e)
		return;
	rc = bf_snapshot_filename_name(slot->renamed, name, &len);
	if (!rc)
		rc = bf_registry_rename(sn->ctx->reg, e->f, name, len);
	if (!rc) {
		srv_log(SRV_LOG_NOTICE,
			"filter '%s' in %s/%s: the log no longer holds its RENAME; named by its "
			"file",
			bf_filter_name(e->f), sn->dir, slot->renamed);
		e->on_disk = false; /* written with its name in the header at the next cycle */
		return;
	}
	snap_detach(sn, e);
	bf_registry_drop(sn->ctx->reg, bf_filter_name(e->f), e->f->name_len);
	e->f = NULL;
	snap_release(e);
	slot->e = NULL;
	sn->st.loaded--;
	snap_set_aside(sn, slot->renamed,
		       rc == -EEXIST ? "a RENAME gave its filter the file's name, which another "
				       "filter has now"
				     : "cannot name its filter by the file's name");
}

/* The load's table of ids goes (naming the renamed files' filters no RENAME named, if name). */
static void snap_ids_free(struct srv_snap *sn, bool name)
{
	for (size_t i = 0; i < sn->ids_cap; i++)
		if (sn->ids[i].renamed) {
			if (name)
				snap_name_by_file(sn, &sn->ids[i]);
			free(sn->ids[i].renamed);
		}
	free(sn->ids);
	sn->ids = NULL;
	sn->ids_cap = sn->ids_n = 0;
}

/* What only a start keeps, freed without a start (it failed). */
static void snap_load_state_free(struct srv_snap *sn)
{
	snap_ids_free(sn, false);
	while (sn->nmissing)
		snap_files_explained(sn, 0);
	free(sn->missing);
	sn->missing = NULL;
}

int srv_snap_load_end(struct srv_snap *sn)
{
	int rc = snap_files_report(sn);

	snap_ids_free(sn, !rc);
	if (rc) {
		sn->stopping = true; /* not starting: nothing is written, the record stays */
		return rc;
	}
	/* Written if it does not list the files as they are now: a line that names no file loaded
	 * (one missing, told once or explained by the log, whose records are released later), or
	 * a file loaded that it does not name. */
	size_t nfiled = 0;
	for (size_t i = 0; i < sn->nents; i++)
		nfiled += sn->ents[i]->filed;
	if (sn->files_listed == SIZE_MAX ? nfiled > 0
					 : sn->files_listed != nfiled || sn->files_lines != nfiled)
		sn->files_stale = true;
	return snap_files_sync(sn);
}

void srv_snap_after_replay(struct srv_snap *sn, struct bf_registry *reg)
{
	struct bf_filter **list = NULL;
	size_t n = 0;
	bool by_file = false;

	for (size_t i = 0; i < sn->naside; i++)
		by_file = by_file || sn->aside[i].file;
	if (by_file && bf_registry_list(reg, "", 0, &list, &n))
		n = 0;
	for (size_t i = 0; i < sn->naside; i++) {
		const struct snap_aside *a = &sn->aside[i];
		const struct bf_filter *found = NULL;
		char file[BF_SNAPSHOT_NAME_MAX];

		if (a->name)
			found = bf_registry_get(reg, a->name, strlen(a->name));
		for (size_t j = 0; a->file && j < n && !found; j++) {
			bf_snapshot_filename(bf_filter_name(list[j]), list[j]->name_len, file);
			if (!strcmp(file, a->file))
				found = list[j];
		}
		if (found)
			srv_log(
			    SRV_LOG_NOTICE,
			    "snapshot %s/%s was corrupt: filter '%s' rebuilt from the write-ahead "
			    "log",
			    sn->dir, a->label, bf_filter_name(found));
		else if (!a->file && !a->name)
			srv_log(SRV_LOG_ERR,
				"snapshot %s/%s was corrupt: its filters that the write-ahead log "
				"holds from their creation were rebuilt, the others are lost",
				sn->dir, a->label);
		else
			srv_log(
			    SRV_LOG_ERR,
			    "snapshot %s/%s was corrupt and the write-ahead log no longer holds "
			    "its filter from its creation: that filter is lost",
			    sn->dir, a->label);
	}
	free(list);
	snap_aside_free(sn);
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
