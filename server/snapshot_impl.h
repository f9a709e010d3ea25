/* SPDX-License-Identifier: MIT */
/*
 * Private to the snapshot module's files, and nothing else includes it: snapshot.c (the
 * module's state and entries, results, removals, the registry's hooks), snap_job.c (a filter's
 * own file written in the background), pack.c (packed snapshots and the packs record),
 * snap_files.c (the files record), checkpoint.c (cycles, waits, flush, shutdown, the log a
 * replay needs), paging.c (close and page-in) and load.c (the start's load). What they share:
 * struct srv_snap, the entries and jobs, and the functions below.
 */
#ifndef BLOSSOMD_SERVER_SNAPSHOT_IMPL_H
#define BLOSSOMD_SERVER_SNAPSHOT_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/bf_snapshot.h"
#include "server/progress.h"
#include "server/snapshot.h"

#define SNAP_TICK_MS 1000
/* Entries srv_snap_get_status() looks at per call for its count of changed filters. */
#define SNAP_DIRTY_BUDGET 65536
/* Added to the nice value of a threadpool thread once it runs snapshot work (snap_worker_nice). */
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
	uint64_t progress_bytes; /* log_progress_* when queued: the worker reads no config */
	unsigned progress_interval;
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
	/* log_progress_bytes and log_progress_interval when queued: the worker reads no config. */
	uint64_t progress_bytes;
	unsigned progress_interval;
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
		/* The file of its filter's name as the replay renames it (at first, file). */
		char named[BF_SNAPSHOT_NAME_MAX];
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
	uint64_t *renamed_ids; /* the ids whose slot had renamed set (snap_file_adopted) */
	size_t nrenamed, renamed_cap;
	uint64_t loaded_lsn; /* the newest LSN a loaded filter holds */
	/* The load's progress (log_progress_bytes): the bytes of the files loaded before the one
	 * being loaded. */
	struct srv_progress load_progress;
	uint64_t load_base;

	/* What was set aside at load, until srv_snap_after_replay(). */
	struct snap_aside {
		char *label; /* the file, or "FILE entry N" */
		char *file;  /* a file of its own: matched against the filters' file names */
		char *name;  /* a pack entry's filter name, if known */
	} * aside;
	size_t naside;
};

/* snapshot.c: entries, results, removals, writes on the loop, helpers */
const char *snap_file(const struct snap_entry *e, char out[BF_SNAPSHOT_NAME_MAX]);
uint64_t snap_next_gen(struct srv_snap *sn);
bool snap_dirty(const struct snap_entry *e);
uint64_t snap_need(const struct srv_snap *sn, const struct bf_filter *f);
bool snap_packable(const struct srv_snap *sn, const struct bf_filter *f);
struct snap_entry *snap_find(const struct srv_snap *sn, const struct bf_filter *f);
struct snap_entry *snap_track(struct srv_snap *sn, struct bf_filter *f);
void snap_release(struct snap_entry *e);
void snap_unlink(struct srv_snap *sn, const char *file, const char *why);
void snap_unlink_later(struct srv_snap *sn, const char *file, const char *why);
uint64_t snap_ms(uint64_t ns);
void snap_set_failed(struct srv_snap *sn, struct snap_entry *e, bool failed);
void snap_record(struct srv_snap *sn, struct snap_entry *e, const char *file, const char *name,
		 int rc, const char *step, uint64_t cut, uint64_t need, uint64_t bytes,
		 uint64_t write_ns, const char *kind);
void snap_worker_nice(void);
bool snap_round_over(const struct srv_snap *sn, size_t *k, size_t pos, uint64_t t0,
		     uint64_t budget_ns);
int snap_write_now(struct srv_snap *sn, struct snap_entry *e);
bool snap_detach(struct srv_snap *sn, struct snap_entry *e);

/* snap_job.c: a filter's own file written in the background */
void snap_job_settle(struct srv_snap *sn);
void snap_job_copy_abort(struct srv_snap *sn);
int snap_job_start(struct srv_snap *sn, struct snap_entry *e);

/* pack.c: packs, pack jobs, the packs record */
int snap_pack_of(const struct bf_filter *f);
void snap_pack_name(int pack, char out[32]);
void snap_pack_join(struct srv_snap *sn, struct snap_entry *e, int pack);
void snap_pack_leave(struct srv_snap *sn, struct snap_entry *e, uint64_t need);
void snap_pjob_free(struct snap_pjob *pj);
void snap_pmem_free(struct snap_pmem *pm);
bool snap_pmem_wait(struct srv_snap *sn, int pack);
void snap_pjob_apply(struct srv_snap *sn, struct snap_pjob *pj);
void snap_pjob_abort(struct srv_snap *sn);
void snap_pjob_settle(struct srv_snap *sn);
int snap_pack_start(struct srv_snap *sn, int pack);
int snap_pack_write_now(struct srv_snap *sn, int pack);
bool snap_pack_claim(struct srv_snap *sn, struct snap_entry *e);
int snap_packs_check(struct srv_snap *sn);

/* snap_files.c: the files record */
int snap_files_sync(struct srv_snap *sn);
void snap_files_removing(struct srv_snap *sn);
int snap_files_check(struct srv_snap *sn);
void snap_files_explained(struct srv_snap *sn, size_t i);
int snap_files_report(struct srv_snap *sn);

/* checkpoint.c: cycles, waits, flush, shutdown */
void ckpt_pending_clear(struct srv_snap *sn);
void ckpt_waits_clear(struct srv_snap *sn);
int ckpt_wait_add(struct srv_snap *sn, struct snap_entry *e, bool close);
void ckpt_step(struct srv_snap *sn);
void ckpt_on_tick(uv_timer_t *t);

/* load.c: the start's load */
bool snap_has_suffix(const char *s, const char *suffix);
void snap_aside_free(struct srv_snap *sn);
struct snap_idslot *snap_id_slot(const struct srv_snap *sn, uint64_t id);
int snap_load_all(struct srv_snap *sn);
void snap_load_state_free(struct srv_snap *sn);

#endif
