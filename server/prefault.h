/* SPDX-License-Identifier: MIT */
/*
 * The heap's new memory is faulted in by a thread of its own, ahead of the loop. With glibc's
 * malloc on transparent huge pages (glibc.malloc.hugetlb=1, as the unit starts the daemon),
 * the first write to each 2 MiB of new heap made the kernel clear a whole huge page on the
 * loop thread: 1 to 9 ms of a turn, dozens of times a second while filters are created.
 * While running, malloc keeps room past the heap's top (M_TOP_PAD, a sixteenth of the heap)
 * and the thread populates (MADV_POPULATE_WRITE) every new stretch of it as soon as the loop
 * tells it the heap grew, so the loop mostly writes pages that are there already. The start's
 * load pokes it too (a million filters' new memory was half of a slow start). An idle
 * daemon's thread sleeps.
 */
#ifndef BLOSSOMD_SERVER_PREFAULT_H
#define BLOSSOMD_SERVER_PREFAULT_H

#include <stddef.h>

/* Blocks from this size up get a mapping of their own, which free() gives back (glibc's
 * M_MMAP_THRESHOLD, set by srv_new): only smaller ones come from the heap. */
#define SRV_MMAP_THRESHOLD (128 * 1024)

struct srv_prefault;

/* Start the thread. NULL if it cannot run here (logged at debug level): nothing is lost but
 * latency. */
struct srv_prefault *srv_prefault_start(void);

/* Loop thread, once a turn: wake the thread if the heap's top moved (no system call: it reads
 * malloc's own idea of the break). NULL is a no-op. */
void srv_prefault_poke(struct srv_prefault *pf);

/* About this many bytes are about to be allocated (a pack file's filters, at the start's load):
 * the room kept past the heap's top is made that large (at most 256 MiB), so that the heap's
 * next growth takes it all at once and the thread populates it while the loop fills it. Until
 * srv_prefault_settle. NULL is a no-op. */
void srv_prefault_expect(struct srv_prefault *pf, size_t bytes);

/* A burst of allocation is over (the start's load): the room kept past the heap's top, which
 * the burst had grown, is given back until the heap grows again. NULL is a no-op. */
void srv_prefault_settle(struct srv_prefault *pf);

/* Stop and join the thread, and free it. NULL is a no-op. */
void srv_prefault_stop(struct srv_prefault *pf);

#endif
