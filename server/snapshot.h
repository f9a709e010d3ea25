/* SPDX-License-Identifier: MIT */
/*
 * Persistence (DESIGN.md §6): the snapshot files in data_dir, loaded at start and kept up to
 * date while the daemon runs. The file format and the crash-safe write are core's
 * (bf_snapshot.h: temp file with O_EXCL, fallocate, pwrite, fsync, rename, fsync of the
 * directory; on failure the temp file is removed and the previous snapshot stays). This module
 * decides when each persistent filter is written, where that work runs, and what happens to
 * the files at start. persist=false filters never touch the disk.
 *
 * When a filter is written. A filter is dirty when it has no snapshot yet, or when its
 * bf_filter.changes differs from the value its last good snapshot holds.
 *   - Cycles: every snapshot_interval seconds (read from the live config, so SIGHUP changes
 *     it; 0 = no periodic snapshots) every dirty filter is written, one at a time. A failed
 *     write leaves the filter dirty, so the next cycle retries it, with a new temp file.
 *   - Flush (text `flush [NAME]`, RESP SAVE, HTTP snapshot, via cmd_flush()): see
 *     srv_snap_flush(); BGSAVE starts a cycle (srv_snap_bgsave()).
 *   - Shutdown (srv_snap_shutdown(), from srv_stop()): every dirty filter, before the loop ends.
 *
 * Where the work runs.
 *   - Cycle: the copy's memory is allocated on the loop and, for copies of 2 MiB or more,
 *     faulted in on the libuv threadpool (so the loop's copy is a plain memcpy, with no page
 *     faults). Then the cut is taken on the loop thread. A counting filter, or any filter of
 *     at most SRV_SNAP_SLICE bytes, is copied whole at once: an exact cut in one pause of the
 *     loop (about 0.1-0.2 s per GiB here; bench/snapshot measures it). A larger plain filter is
 *     copied in slices of SRV_SNAP_SLICE bytes, one slice per loop iteration (a uv_idle
 *     handle), so clients are served between slices (about 0.5 ms each). Such a copy is a
 *     valid snapshot because plain bits only go from 0 to 1: it holds every key added before
 *     the copy began (the cut recorded for it), and the filter stays dirty for whatever came
 *     after; its item counts are taken when the copy ends, so they never undercount the bits
 *     and the chain never overfills after a restart. Then the write (checksum, pwrite, fsync,
 *     rename, fsync of the directory) runs on the threadpool with uv_queue_work() while the
 *     loop keeps serving.
 *   - Flush and a large close use the same machinery: the asking command waits, nobody else
 *     does (see srv_snap_flush(), srv_snap_page_out()). Only a clear of a packed filter, a
 *     rename and a close of a small or packed filter write on the loop thread.
 *   - Shutdown uses the cycle machinery with no copies (no command runs once stopping): the
 *     threadpool writes the live filters while the loop runs on until the last write is done.
 * No two threads ever write the same file, and a file never goes back in time: a write on the
 * loop of a filter whose background write is in flight first waits for that write and applies
 * its result, and a sliced copy overtaken by such a write is dropped.
 *
 * Start (srv_snap_new()): data_dir is created if missing (mode 0700) and locked (flock) so a
 * second daemon cannot share it; leftover "*.bsnap.tmp" files are removed; every "*.bsnap" is
 * read and validated (bf_snapshot_read()) and adopted into the registry. A corrupt, truncated
 * or unknown-version file, or one whose name is not the encoding of the filter name inside it,
 * is logged with its name and the reason and renamed to NAME.bsnap.corrupt (or .corrupt.1 ...
 * .corrupt.99 if taken), and the others load. Anything that is not a property of the file
 * (cannot read it, out of memory, the filter does not fit in max_memory) stops the start
 * instead: starting without an intact snapshot would lose acknowledged keys. The pack files
 * that exist are recorded in data_dir/packs (a pack is never removed once written): one listed
 * there and missing stops the start with -ENOENT, naming it, unless accept_missing
 * (--accept-missing-files), which logs the loss and goes on.
 *
 * Dropping a filter removes its file (after the write in flight, if any, has finished): it is
 * renamed aside on the loop and unlinked on the threadpool (unlinking a large file frees its
 * blocks in the call); clear keeps it, so the filter comes back at the next start, as in
 * bloomd.
 *
 * Threading: every function here runs on the loop thread. The threadpool only runs
 * bf_snapshot_write() on a copy it owns (or, at shutdown, on a filter nothing else touches).
 */
#ifndef BLOSSOMD_SERVER_SNAPSHOT_H
#define BLOSSOMD_SERVER_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf/config.h"
#include "proto/command.h"

/* Bytes copied per loop iteration when a plain filter is copied in slices. */
#define SRV_SNAP_SLICE (4u << 20)

struct srv_snap;
struct srv_prefault; /* server/prefault.h */

/* What persistence has done, for logs, metrics and readiness. */
struct srv_snap_status {
	uint64_t loaded;	     /* filters loaded at start */
	uint64_t loaded_bytes;	     /* bytes of the files loaded at start */
	uint64_t load_ms;	     /* time the start-up load took */
	uint64_t set_aside;	     /* files renamed to *.corrupt at start */
	uint64_t saves;		     /* snapshot files written */
	uint64_t saved_bytes;	     /* bytes of those files */
	uint64_t failures;	     /* snapshot writes that failed (each filter, each attempt) */
	uint64_t last_success_unix;  /* time of the last good write, 0 = none since start */
	uint64_t last_failure_unix;  /* time of the last failed write, 0 = none since start */
	int last_error;		     /* -errno of the last failed write, 0 = none */
	char last_error_msg[320];    /* "filter 'NAME' (FILE): STEP: REASON" of that failure */
	uint64_t failing;	     /* persistent filters whose latest write failed */
	uint64_t dirty;		     /* persistent filters with changes not on disk yet */
	bool in_progress;	     /* a background copy or write is running */
	uint64_t last_copy_pause_us; /* longest loop pause of the last background copy */
};

/*
 * Open (creating it, 0700, with any missing parents) and lock cfg->data_dir, remove leftover
 * temp files, load every snapshot into ctx->reg (set aside the bad ones, see above), set
 * ctx->last_save_unix to the newest loaded file's mtime, and start the cycle timer on loop.
 * cfg and ctx must outlive the module; cfg->snapshot_interval is read at every tick.
 * Every problem is logged with the path and reason. Returns 0 with *out set, or a negative
 * errno: -EBUSY (data_dir locked by another process), -ENOMEM (allocation, or a filter that
 * does not fit in max_memory), or the errno of a failed mkdir/open/read; then nothing is left
 * behind except filters already adopted into ctx->reg (freed with the registry). pf (may be
 * NULL) is poked as the load allocates, so that the heap's new memory is faulted in by its
 * thread rather than the loading one.
 */
int srv_snap_new(uv_loop_t *loop, const struct config *cfg, struct cmd_ctx *ctx,
		 struct srv_prefault *pf, bool accept_missing, struct srv_snap **out);

/*
 * Command-layer hooks (struct cmd_hooks): a filter was created / is about to be dropped
 * (remove_file) or cleared. A cleared packed filter is first written as a file of its own (so
 * the next start loads it, as bloomd's clear promises); if that fails, the clear is refused
 * with its negative errno. A drop returns 0.
 */
void srv_snap_created(struct srv_snap *sn, struct bf_filter *f);
int srv_snap_dropping(struct srv_snap *sn, struct bf_filter *f, bool remove_file);
/*
 * f was renamed from the name from[0, from_len). A filter saved in a file of its own (with the
 * log on) has that file renamed, and is written with its new name at the next cycle. Else its
 * snapshot is written under the new name now (a file of its own, on the loop), then the old
 * name's copy is removed. 0, or a negative errno (the write failed: the old copy is kept and the
 * filter written again at the next cycle).
 */
int srv_snap_renamed(struct srv_snap *sn, struct bf_filter *f, const char *from, size_t from_len);

/*
 * bloomd's close: page f out. Its snapshot is made durable as a file of its own, then its
 * layers are freed; it stays listed, and srv_snap_page_in loads it on its next use. A filter of
 * more than SRV_SNAP_SLICE bytes that must be written is written in the background, as a
 * checkpoint writes it (before the cycle's next filter), and -EINPROGRESS returned: the caller
 * asks again once the paged_in callback runs, and then has 0 or the write's error, once. A
 * smaller one (or a packed one) is written now, on the loop. A flush's write of f under way is
 * waited for the same way, and f paged out after it. 0; -ENOTSUP (a memory-only filter
 * stays in memory); a negative errno (the write failed: it stays in memory).
 */
int srv_snap_page_out(struct srv_snap *sn, struct bf_filter *f);
/*
 * Start loading paged-out f on the threadpool (once: 0 if it is loading already); the
 * srv_snap_set_paged_in callback runs when it ends. A load that failed is told once, as its
 * negative errno, to the next call (the waiting commands answer it); the one after retries.
 */
int srv_snap_page_in(struct srv_snap *sn, struct bf_filter *f);
void srv_snap_set_paged_in(struct srv_snap *sn, void (*fn)(void *arg), void *arg);
/*
 * bloomd's cold_interval: page out the clean filters unused (cmd used_s) for interval seconds
 * or more (the stamps are as coarse as a second: more than interval by them), among the next
 * `budget` filters (a pass goes round all of them in turn). Returns
 * how many were paged out. interval 0: none.
 */
size_t srv_snap_cold(struct srv_snap *sn, uint32_t now_s, uint32_t interval, size_t budget);

/*
 * The flush hook (text `flush [NAME]`, RESP SAVE, HTTP POST .../snapshot): make f's snapshot
 * (f NULL: every dirty persistent filter's) durable; the command is answered once it is, and
 * only its client waits. The writes run as a checkpoint's do (the copy on the loop in slices,
 * the write on the threadpool, one write at a time), never from the loop thread:
 *   - f: its write (a file of its own, or its pack's if it is packed) is started ahead of the
 *     cycle's next; a close of f meanwhile shares it. The wait is over once a durable file
 *     holds f as it was when the command came (changes made since need not be).
 *   - NULL (SAVE, flush of all): a checkpoint cycle is started, as BGSAVE starts one; if one
 *     runs already, the command waits for it and for the next (which the end of this one
 *     starts), since the running one may have listed its filters before the command came.
 * *ticket is the command's: 0 on its first call, kept by the front end while it waits (set
 * here, passed back unchanged), and 0 again once the command is answered. Returns
 * -EINPROGRESS while the write runs: the command is run again, with its ticket, after the
 * srv_snap_set_paged_in callback. Then (or at once: a clean or non-persistent filter costs
 * nothing) 0, or a negative errno: a write failed (each failure is logged and counted; the
 * other filters are still written, and a failed one stays dirty for the next cycle), or
 * -ENOMEM.
 */
int srv_snap_flush(struct srv_snap *sn, struct bf_filter *f, uint64_t *ticket);

/*
 * Shutdown: drop a copy in progress and write every dirty filter on the threadpool; the loop
 * stays alive until the last write has finished (the work requests keep uv_run() going).
 * Failures are logged. Later cycles and timer ticks do nothing. Safe to call twice; NULL is
 * ignored. Without save (SHUTDOWN NOSAVE) nothing more is written: writes under way finish,
 * the dirty filters stay as the last checkpoint has them (the log, if on, holds the rest).
 */
void srv_snap_shutdown(struct srv_snap *sn, bool save);

/* After the loop ended: true if a filter's final snapshot failed (its changes since the last
 * snapshot are lost), so the process must not exit 0. NULL: false. */
bool srv_snap_final_failed(const struct srv_snap *sn);

/*
 * The write-ahead log: the oldest LSN some filter's replay still needs: for a filter changed
 * since its snapshot, the log's position when that snapshot was cut (or its first record if it
 * has none); a filter unchanged since needs nothing; a drop not yet written out of its pack
 * needs its record. UINT64_MAX if nothing is needed. Segments below it may be deleted.
 * Computed by a pass over the filters that looks at `budget` of them per call (0: a fresh
 * pass, all at once); until a pass completes, the last complete pass's answer (0 before the
 * first), which stays valid: what is logged after a pass began is never released by it.
 */
uint64_t srv_snap_log_needed(struct srv_snap *sn, size_t budget);

/* Start a cycle now unless one runs (the log passed wal_max_bytes), whatever the interval. */
void srv_snap_soon(struct srv_snap *sn);

/* BGSAVE: start a cycle now (0; it may find nothing to write), or -EBUSY if one runs. */
int srv_snap_bgsave(struct srv_snap *sn);

/* Current figures. failing is exact; dirty is counted over successive calls, 65,536 filters a
 * call (exact with fewer filters), so no call walks a million. */
void srv_snap_get_status(struct srv_snap *sn, struct srv_snap_status *out);

/*
 * From srv_snap_new() to srv_snap_load_end(): the filter loaded with this id (NULL: none, or
 * id 0). Not to be asked about an id whose filter was dropped or renamed since the load (its
 * entry may be gone): the log's replay asks only about the filters its records name, and never
 * again about one it dropped, renamed or created (bf_replay_lookup_fn), rather than indexing
 * every filter by id again.
 */
struct bf_filter *srv_snap_loaded(const struct srv_snap *sn, uint64_t id);
/* The newest LSN a loaded filter's checkpoint holds (0: none). */
uint64_t srv_snap_loaded_lsn(const struct srv_snap *sn);
/*
 * Each record the log's replay applies (type, payload: core/bf_record.h): a DROP, FLUSHALL or
 * RENAME explains a file the files record lists that is missing at the start.
 */
void srv_snap_replayed(struct srv_snap *sn, int type, const void *payload, size_t len);
/*
 * Once the replay is done (or there is no log): a file the files record lists that is missing,
 * whose filter nothing else loaded and no record of the log dropped, refuses the start (-ENOENT,
 * logged), unless --accept-missing-files; a renamed file's filter that no RENAME of the log
 * named takes the file's name; srv_snap_loaded's table goes; the files record is written as
 * the data directory is now. 0 or a negative errno (the start fails).
 */
int srv_snap_load_end(struct srv_snap *sn);

/*
 * After the write-ahead log's replay: for each snapshot file set aside as corrupt at load, log
 * whether the replay rebuilt its filter (the log held it from its creation) or it is lost.
 */
void srv_snap_after_replay(struct srv_snap *sn, struct bf_registry *reg);

/*
 * Release everything. The loop must have closed this module's handles and finished its work
 * requests first (uv_walk + uv_close, then uv_run(), as srv_free() does). NULL is ignored.
 */
void srv_snap_free(struct srv_snap *sn);

#endif /* BLOSSOMD_SERVER_SNAPSHOT_H */
