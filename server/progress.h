/* SPDX-License-Identifier: MIT */
/*
 * The progress of a long piece of work (a checkpoint's write, the start's load) logged at info as
 * it goes, as a progress bar in a log: "checkpoint of filter 'big': 402653184 of 3623878656
 * bytes (11%), 389.2 MiB/s, 8 s left", a line every interval, none at all for work smaller than
 * the threshold (log_progress_bytes, log_progress_interval). A tracker is used by one thread at a
 * time (the one doing the work: a threadpool thread for a write, the loop for the load) and
 * reads the clock only once per SRV_PROGRESS_STEP bytes, so it costs nothing per key or entry.
 */
#ifndef BLOSSOMD_SERVER_PROGRESS_H
#define BLOSSOMD_SERVER_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes between two looks at the clock (as core reports reads and writes: BF_IO_STEP). */
#define SRV_PROGRESS_STEP ((uint64_t)16 << 20)

struct srv_progress {
	char what[160];	   /* "checkpoint of filter 'big'" */
	uint64_t total;	   /* bytes the work moves */
	uint64_t done;	   /* so far */
	uint64_t next;	   /* done at which the clock is read again */
	uint64_t t0, last; /* uv_hrtime() at the start and at the last line */
	uint64_t interval; /* ns between lines */
	bool on;	   /* total >= the threshold: lines are logged */
	unsigned lines;	   /* logged so far */
};

/*
 * Begin tracking work of total bytes, named by the printf-style what. Lines are logged only if
 * min_bytes is not 0 and total >= min_bytes; then one every interval_s seconds (0: one each
 * SRV_PROGRESS_STEP bytes).
 */
void srv_progress_begin(struct srv_progress *p, uint64_t total, uint64_t min_bytes,
			unsigned interval_s, const char *what, ...)
    __attribute__((format(printf, 5, 6)));

/* done bytes of the total are done (done never goes back). Cheap unless a line is due. */
void srv_progress_at(struct srv_progress *p, uint64_t done);

/* srv_progress_at(arg, done), as a struct bf_io_progress's fn (core/bf_snapshot.h); the total
 * becomes the file's (begin decides whether lines are logged). */
void srv_progress_io(void *arg, uint64_t done, uint64_t total);

/* The work ended: with rc 0 and lines logged, a last line says how long it took in all. */
void srv_progress_end(struct srv_progress *p, int rc);

#endif /* BLOSSOMD_SERVER_PROGRESS_H */
