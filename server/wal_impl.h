/* SPDX-License-Identifier: MIT */
/*
 * Private to the write-ahead log's three files, and nothing else includes it: wal.c (the log
 * itself: records and the append buffer, writes, segments, the start record, releases, open
 * and close), wal_sync.c (the sync thread, and on the loop what its answers mean: durability,
 * failure and retry, rotation and recovery) and wal_replay.c (reading the log back at a start).
 */
#ifndef BLOSSOMD_SERVER_WAL_IMPL_H
#define BLOSSOMD_SERVER_WAL_IMPL_H

#include <endian.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "server/wal.h"

/* The append buffer starts this big, and goes back to it once emptied after a burst. */
#define WAL_BUF_INITIAL (1u << 20)

/* The file recording where the log starts (wal_replay() tells missing segments by it). */
#define WAL_START_FILE "start"
#define WAL_START_TEMP "start.tmp"

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

static inline void set_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void set_why(char *why, size_t whylen, const char *fmt, ...)
{
	if (!why || !whylen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* wal.c */
/* Room for one more entry in w->segs: 0 or -ENOMEM. */
int wal_seg_reserve(struct wal *w);
/* A segment's entry (first LSN, length) after the last: 0 or -ENOMEM. */
int wal_seg_push(struct wal *w, uint64_t first, uint64_t bytes);
/* Create (or empty) the segment whose first record is lsn, its name durable: 0 and *fdp, or
 * -errno. */
int wal_create_segment(int dirfd, uint64_t lsn, int *fdp);
/* Write what is buffered and not yet written at the end of the current segment; may_rotate
 * hands a full one's switch to the sync thread instead. 0, or the failed log's -errno. */
int wal_flush_now(struct wal *w, bool may_rotate);
/* Record durably that the log starts at lsn (WAL_START_FILE). 0 or -errno. */
int wal_start_write(int dirfd, uint64_t lsn);
/* Where the log starts, as recorded: 0, -ENOENT, -EBADMSG or another -errno. */
int wal_start_read(int dirfd, uint64_t *lsn);

/* wal_sync.c */
/* The sync thread (uv_thread_create()), until w->sh.stop. */
void wal_sync_main(void *arg);
/* w->async's callback: the loop takes in what the sync thread reported. */
void wal_sync_async_cb(uv_async_t *a);
/* Hand a segment switch to the sync thread (the log fails if its entry has no room). */
void wal_sync_start_job(struct wal *w, enum wal_job job);
/* The failed state, with err (-errno); the retry timer runs unless the log is closing. */
void wal_sync_enter_failed(struct wal *w, int err);
/* Take in what the sync thread reported: the synced LSN, a failure, a finished job. */
void wal_sync_absorb(struct wal *w);
/* Grow durable_lsn as far as the mode allows, and tell on_durable. */
void wal_sync_update_durable(struct wal *w);

#endif
