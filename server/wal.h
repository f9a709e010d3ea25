/* SPDX-License-Identifier: MIT */
/*
 * The write-ahead log (DESIGN.md §6): every change the daemon acknowledges is a record here
 * first. This module knows nothing of filters or of the rest of the server: records are opaque
 * payloads with a type, numbered by LSN (log sequence number).
 *
 * On disk. A directory of segment files "<first LSN as 16 lowercase hex digits>.wal", each a
 * run of records with consecutive LSNs, the next segment starting at the LSN after the last
 * record of the one before. A record, all integers little-endian:
 *   0   payload length    u32   at most WAL_MAX_PAYLOAD
 *   4   type              u8    1..255 (0 is never written)
 *   5   zero              3 bytes
 *   8   LSN               u64   1 for the very first record, then +1 per record
 *   16  payload           length bytes
 *   ..  checksum          u64   XXH3-64 of every byte of the record before it
 * A new segment is started before a write when the current one has reached segment_bytes
 * (so segments end between records, and may pass segment_bytes by one flush's bytes, or by
 * the records of a wal_write_now()).
 *
 * Life cycle, all on the loop thread given in the options:
 *   wal_open() -> wal_replay() (always, even on an empty directory: it finds the end of the log
 *   and opens the segment appends go to) -> wal_append()... wal_flush() once per loop
 *   iteration -> wal_close() -> run the loop until its handles are closed.
 *
 * Durability. wal_append() only copies the record into memory. wal_flush() writes every
 * record not yet written with one pwrite(2) at the end of the current segment. Then:
 *   WAL_FSYNC_ALWAYS    a dedicated sync thread runs fdatasync(2) up to the newest written
 *                       LSN while the loop goes on; a record is durable once an fdatasync that
 *                       began after its write succeeded. One fdatasync covers everything
 *                       written before it (group commit), never one per record.
 *   WAL_FSYNC_EVERYSEC  durable once written (a process kill loses nothing); the sync thread
 *                       runs fdatasync about once a second while there is something to sync.
 *   WAL_FSYNC_NO        durable once written; fdatasync only when a segment is closed (rotation,
 *                       wal_close()).
 * In every mode a record stays in memory until an fdatasync has covered it (in mode NO that is
 * up to one segment's bytes), so after a failed write or sync it can be written again from
 * memory and nothing acknowledged depends on the page cache of a file that reported an error.
 * durable_lsn only grows; on_durable(arg, durable_lsn) is called each time it grows: from
 * wal_flush() itself in modes EVERYSEC and NO (after the write), otherwise from the loop when
 * the sync thread reports (a uv_async_t) and when a failed log recovers.
 *
 * Rotation. When the current segment has reached segment_bytes, the next flush hands the
 * switch to the sync thread: fdatasync the old segment, create the new one, fsync the
 * directory (so a segment never exists on disk before the one before it is complete). Records
 * appended meanwhile stay buffered and are written by the loop as soon as the new segment
 * exists. The loop thread itself never calls fsync/fdatasync (except in wal_replay() and
 * wal_close(), which run before and after serving).
 *
 * Disk errors. A failed write (ENOSPC, EIO, a short write) or fdatasync, or a failed segment
 * switch, puts the log in the failed state: wal_failed() is true, wal_error() the -errno, and
 * durable_lsn no longer grows for records the failure touched. Appends are still accepted
 * (they are written once the log recovers); the daemon is expected to refuse changes while
 * wal_failed(). Every retry_ms a timer asks the sync thread to truncate the current segment
 * back to its last fdatasync'ed length, fdatasync it, and start a fresh segment (named after
 * the first record not yet synced; the same file, emptied, if none of its records was synced);
 * the loop then writes every record not yet synced into it and the sync thread fdatasyncs it.
 * When that fdatasync succeeds (in every mode), the failed state clears and on_durable fires.
 * A record whose write or sync failed is never reported durable before this.
 *
 * Threads: everything here is called on the loop thread; the sync thread only runs
 * fdatasync, ftruncate, the creation of a segment and the directory fsync; the libuv
 * threadpool only deletes released segments (wal_release()).
 */
#ifndef BLOSSOMD_SERVER_WAL_H
#define BLOSSOMD_SERVER_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* Bytes before a record's payload, and header + checksum. */
#define WAL_HEADER_BYTES    16
#define WAL_RECORD_OVERHEAD 24
/* Longest payload: a corrupt length field can never make replay allocate more than this. */
#define WAL_MAX_PAYLOAD (64u << 20)
/* Default segment size (wal_options.segment_bytes == 0). */
#define WAL_DEFAULT_SEGMENT_BYTES (64u << 20)
/* Default failed-state retry period (wal_options.retry_ms == 0). */
#define WAL_DEFAULT_RETRY_MS 250
/* Longest segment file name, NUL included ("0123456789abcdef.wal"). */
#define WAL_SEGMENT_NAME_MAX 24
/* fdatasync latency histogram: buckets with these upper bounds in microseconds (the last one
 * is +Inf); counts are per bucket, not cumulative. */
#define WAL_FSYNC_BUCKETS 7
extern const uint64_t wal_fsync_bucket_us[WAL_FSYNC_BUCKETS];

enum wal_fsync {
	WAL_FSYNC_ALWAYS = 0,
	WAL_FSYNC_EVERYSEC,
	WAL_FSYNC_NO,
};

struct wal;

struct wal_options {
	uv_loop_t *loop; /* the loop thread's loop: the async handle and retry timer */
	const char *dir; /* segment directory; created (one level, mode 0700) if missing */
	enum wal_fsync fsync;
	uint64_t segment_bytes; /* rotate once a segment has this many bytes; 0 = default */
	unsigned retry_ms;	/* failed-state retry period; 0 = default */
	/* Keep the current segment's file zero-filled this far (at least half of it) beyond
	 * its last record, writing the zeros with the records: an fdatasync then rarely has
	 * a file size to commit, only data (on ext4 about 4x faster). 0 = files grow with
	 * their records. A log written either way is read either way. */
	uint64_t prealloc_bytes;
	/* Called on the loop thread whenever durable_lsn grows (see above). It may call
	 * wal_append() (those records go to the next flush) and the read-only accessors, never
	 * wal_flush(), wal_release(), wal_replay() or wal_close(). NULL = not told. */
	void (*on_durable)(void *arg, uint64_t durable_lsn);
	/* Called on the loop thread when a released segment could not be deleted (err is the
	 * unlink's -errno; the segment is kept and the next wal_release() tries again), also
	 * after wal_close() until the loop has run the log's last callbacks, so arg must live
	 * that long. NULL = not told. */
	void (*on_unlink_error)(void *arg, const char *segment, int err);
	void *arg;
	/* Go on when segments at the start of the log are missing (--accept-missing-files): the
	 * replay warns, in why, instead of failing with -ENOENT. */
	bool accept_missing;
	/* Fault injection for tests: replacements for pwrite(2) (loop thread) and fdatasync(2)
	 * (sync thread, and the caller's thread in wal_replay()/wal_close()), with the same
	 * contract (-1 and errno on failure). NULL = the real ones. */
	ssize_t (*pwrite_fn)(int fd, const void *buf, size_t n, off_t off);
	int (*fdatasync_fn)(int fd);
};

/* Replay callback: one record, in LSN order. Return 0 to go on; a negative errno stops the
 * replay, which then returns that value. payload is valid only during the call. */
typedef int (*wal_replay_fn)(void *arg, uint64_t lsn, unsigned type, const void *payload,
			     size_t len);

/* What wal_replay() found and did. */
struct wal_replay_stats {
	uint64_t records;	    /* records read and verified */
	uint64_t delivered;	    /* of those, passed to the callback (lsn >= from_lsn) */
	uint64_t bytes;		    /* bytes of the records read */
	uint64_t first_lsn;	    /* LSN of the first record read, 0 = none */
	uint64_t next_lsn;	    /* the LSN the next wal_append() returns */
	uint64_t segments_read;	    /* segment files read */
	uint64_t segments_skipped;  /* whole segments below from_lsn, not read */
	uint64_t tail_truncated;    /* bytes of an unacknowledged torn tail cut off the last
				       segment (0 = clean end) */
	uint64_t corrupt_truncated; /* truncate_corrupt: bytes cut from the corrupt segment */
	uint64_t dropped_segments;  /* truncate_corrupt: later segments deleted */
	uint64_t dropped_bytes;	    /* truncate_corrupt: their bytes */
	uint64_t ns;		    /* time the replay took */
};

/* Counters for /metrics. */
struct wal_stats {
	uint64_t next_lsn;	 /* LSN the next append gets */
	uint64_t written_lsn;	 /* newest LSN written to a segment */
	uint64_t synced_lsn;	 /* newest LSN covered by a successful fdatasync */
	uint64_t durable_lsn;	 /* newest LSN reported durable (see above) */
	uint64_t appended;	 /* records appended since wal_open() */
	uint64_t writes;	 /* pwrite(2) calls that wrote records */
	uint64_t bytes_written;	 /* bytes written since wal_open(), rewrites included */
	uint64_t buffered_bytes; /* record bytes held in memory (not yet fdatasync'ed) */
	uint64_t segments;	 /* segment files (wal_segments()) */
	uint64_t bytes;		 /* their total size (wal_bytes()) */
	uint64_t unlinking;	 /* released segments whose files are being deleted */
	uint64_t rotations;	 /* segments started because the previous one was full */
	uint64_t fsyncs;	 /* fdatasync calls on segments, failed ones included */
	uint64_t fsync_ns;	 /* their total time */
	uint64_t fsync_hist[WAL_FSYNC_BUCKETS]; /* their latencies, see wal_fsync_bucket_us */
	uint64_t failures;			/* failed writes, fdatasyncs and segment switches */
	uint64_t recoveries;			/* times the failed state cleared */
	int error;				/* wal_error() */
	bool failed;				/* wal_failed() */
};

/*
 * Open the log in o->dir: create the directory if missing (mode 0700; its parent must exist),
 * list the segment files (other files are ignored), start the sync thread, and initialise an
 * async handle and a timer on o->loop. Reads no segment: call wal_replay() next.
 * Returns 0 and *out; -EINVAL for a bad option (no loop or dir, unknown fsync mode, a
 * segment_bytes below 4096); -errno of mkdir/open/readdir/stat, -ENOMEM, or the thread
 * creation's error, with a sentence naming the step in why (if why is not NULL). On failure
 * *out is NULL, nothing is left open, and no handle is left on the loop (except after a failed
 * thread creation: then two closing handles free the memory when the loop runs).
 */
int wal_open(const struct wal_options *o, struct wal **out, char *why, size_t whylen);

/*
 * Read the whole log once, in LSN order, calling fn for every record with lsn >= from_lsn
 * (0 counts as 1). Whole segments whose records are all below from_lsn (the next segment
 * starts at or below it) are skipped unread; the last segment is always read, since its end
 * is the end of the log. Must be called exactly once, before the first wal_append().
 *
 * A segment ends at its last record, or where only zero bytes follow (prealloc_bytes).
 * A bad record is one that is torn (its header or its length runs past the end of the file),
 * has a length above WAL_MAX_PAYLOAD, a non-zero padding byte or type 0, a wrong checksum, or
 * an LSN other than the previous one + 1 (a segment's first record must carry the LSN of its
 * name). A bad record in the last segment with no valid record after it (a record with a good
 * checksum and an LSN not below the expected one, found by scanning the rest of the file) is
 * the tail of a write that was never acknowledged: the file is truncated there (ftruncate and
 * fdatasync), the cut reported in st->tail_truncated and in why, and the replay succeeds.
 * Anything else is corruption: returns -EBADMSG with "segment NAME, offset N: reason" in why.
 * With truncate_corrupt, corruption is cut instead: the segment is truncated at the bad record
 * (deleted if the bad spot is its start and it does not begin where the log left off), every
 * later segment is deleted, the directory fsync'ed, what was dropped is reported in st and
 * why, and the replay succeeds with the records before the bad one.
 *
 * The log records where it starts in the file "start" (written before a release deletes
 * segments, and when the log is created): segments missing from there to the first one
 * present fail the replay with -ENOENT, naming the LSNs lost, unless accept_missing. A log with
 * no such record (made before it was kept) is taken to start at its first segment, and the
 * record is written.
 *
 * On success the last segment is opened for appends and fdatasync'ed (so what was replayed is
 * durable whatever mode wrote it); with no segment at all, "0000000000000001.wal" is created.
 * The next wal_append() gets st->next_lsn: the LSN after the last good record. why is left
 * empty unless something was cut.
 * Returns 0; -EBADMSG (see above); -ENOENT (missing segments, see above); the callback's negative
 * return (why says at which LSN); -EINVAL if called twice; -errno of
 * open/read/ftruncate/fdatasync/unlink, -ENOMEM, with why. On any failure the log accepts no
 * appends (close it).
 */
int wal_replay(struct wal *w, uint64_t from_lsn, bool truncate_corrupt, wal_replay_fn fn, void *arg,
	       struct wal_replay_stats *st, char *why, size_t whylen);

/*
 * Copy one record into the in-memory log buffer; no I/O. *lsn (if not NULL) is its LSN.
 * Accepted in the failed state too (written once the log recovers).
 * Returns 0; -EINVAL if type is 0 or above 255, or before wal_replay() succeeded or after
 * wal_close(); -EMSGSIZE if len > WAL_MAX_PAYLOAD; -ENOMEM (nothing appended, no LSN used).
 */
int wal_append(struct wal *w, unsigned type, const void *payload, size_t len, uint64_t *lsn);

/*
 * Once per loop iteration: write every buffered record not yet written with one pwrite(2) at
 * the end of the current segment (several calls only after a short write), then in mode
 * ALWAYS wake the sync thread; in modes EVERYSEC and NO, durable_lsn becomes the written LSN
 * and on_durable is called before this returns. If the current segment is full, the write
 * waits for a segment switch instead (see above).
 * Returns 0 (also when there was nothing to write or a switch is in progress); the failed
 * state's -errno when the write failed now (the log is now failed) or the log was already
 * failed (the records stay buffered; the retry timer writes them); -EINVAL before
 * wal_replay() succeeded or after wal_close().
 */
int wal_flush(struct wal *w);

/*
 * As wal_flush(), but the records are in the current segment's file when it returns (a process
 * kill keeps them) also when that segment is full (it passes segment_bytes by these records;
 * the next wal_flush() switches) or a switch is in progress (waited for: an fdatasync and a
 * create on the sync thread). For a record that must reach the log before a file is removed.
 * Returns as wal_flush().
 */
int wal_write_now(struct wal *w);

/* Newest LSN reported durable (0 = none). Never decreases. */
uint64_t wal_durable_lsn(const struct wal *w);
/* Newest LSN written to a segment by wal_flush() (0 = none). */
uint64_t wal_written_lsn(const struct wal *w);
/* The LSN the next wal_append() returns. */
uint64_t wal_next_lsn(const struct wal *w);
/* True while the log is in the failed state. */
bool wal_failed(const struct wal *w);
/* The failed state's -errno (ENOSPC, EIO, ...), 0 when not failed. */
int wal_error(const struct wal *w);
/* Total bytes of the segment files, the current one included (for wal_max_bytes); segments
 * released and being deleted are not counted. */
uint64_t wal_bytes(const struct wal *w);
/* Number of segment files, those released and being deleted not counted. */
uint64_t wal_segments(const struct wal *w);
/* Fill *st; takes the sync thread's lock briefly. */
void wal_get_stats(const struct wal *w, struct wal_stats *st);

/*
 * Checkpoints now cover every record below lsn: delete every segment all of whose records are
 * below lsn (the next segment starts at or below lsn). The current segment is never deleted.
 * The files are unlinked on the libuv threadpool (unlink(2) of a large file can take
 * milliseconds); from this call on the segments count in neither wal_segments() nor
 * wal_bytes(), and once the work is done the loop forgets those deleted and keeps those that
 * could not be, reported to on_unlink_error. A segment being deleted is not handed over again.
 * No directory fsync (a deleted segment that comes back after a power cut is skipped by the
 * next replay, as it is below from_lsn). Work still running at wal_close() finishes on its own
 * copy of the directory's fd while the loop runs.
 * Returns the number of segments handed over (>= 0); -EINVAL before wal_replay() or after
 * wal_close(); -ENOMEM, or the -errno of dup(2) or uv_queue_work(), with nothing handed over.
 */
int wal_release(struct wal *w, uint64_t lsn);

/*
 * Shut the log down: wait for a segment switch in flight, write what is buffered (no
 * rotation), run a final fdatasync in every mode (on the sync thread, waited for), join the
 * thread, close the files, and uv_close() the async handle and the timer. on_durable may be
 * called once more from here. The memory is freed by the close callbacks and the end of the
 * deletions wal_release() started, so the caller must run the loop until they have run
 * (uv_run(loop, UV_RUN_DEFAULT) returns once they have); w must not be used after this call. NULL
 * is a no-op returning 0. Returns 0 if every appended record is durable and synced; otherwise the
 * failed state's -errno, or -EIO (records appended but never written: they are lost, none was ever
 * reported durable).
 */
int wal_close(struct wal *w);

/* The file name of the segment whose first record is lsn. */
void wal_segment_name(uint64_t lsn, char out[WAL_SEGMENT_NAME_MAX]);

#endif
