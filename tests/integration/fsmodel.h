/* SPDX-License-Identifier: MIT */
/*
 * A model of one data directory's disk for crashsim's power cuts: a base (every file and
 * directory as it was at the last sync point, all durable) and the trace fsrec.c (an LD_PRELOAD
 * library) records of the daemons run on it since. A cut builds the directory a power cut
 * leaves: the base, what an fsync/fdatasync made durable since (a file's writes, truncations
 * and size by an fsync of it; a directory's creates, renames, unlinks and mkdirs by an fsync
 * of the directory), and of what was not made durable, the first `keep` of them in order
 * (test_powercut.c's "durable" and "half" states).
 */
#ifndef BLOSSOMD_TESTS_FSMODEL_H
#define BLOSSOMD_TESTS_FSMODEL_H

#include <stddef.h>
#include <stdint.h>

struct fsmodel;

/* A model of dir (absolute) whose daemons record into trace. NULL if out of memory. */
struct fsmodel *fsmodel_new(const char *dir, const char *trace);
void fsmodel_free(struct fsmodel *m);

/*
 * A sync point, with no daemon running: every file and directory under dir is fsync'ed and
 * becomes the base; the trace is emptied. 0 or -errno.
 */
int fsmodel_sync_point(struct fsmodel *m);

/*
 * A daemon is about to start on dir: its records' sync covers count from here (a record the
 * last kill cut short is dropped first). fsrec makes a call before it records it, so a SIGKILL
 * between the two leaves a call on disk that the trace lacks (a log record written, and a
 * later cut rebuilding the file without it). So the disk is compared with what the trace gives;
 * if they differ, the disk as it is becomes a sync point, and resynced (len bytes) names what
 * differed (else it is ""). 0 or -errno.
 */
int fsmodel_daemon_start(struct fsmodel *m, char *resynced, size_t len);

/* Bytes of trace since the sync point. */
uint64_t fsmodel_trace_bytes(const struct fsmodel *m);

/*
 * Write into out (a directory that must not exist) the state a power cut leaves now (no daemon
 * running): the durable state and the first keep_permille thousandths of the calls that were
 * not durable. *nondurable (if not NULL): how many calls were not. 0 or -errno (why says what).
 */
int fsmodel_cut(struct fsmodel *m, unsigned keep_permille, const char *out, size_t *nondurable,
		char *why, size_t whylen);

#endif
