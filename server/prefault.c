/* SPDX-License-Identifier: MIT */
/* Fault the heap's new memory in off the loop thread; see prefault.h. */
#include "server/prefault.h"

#include "server/log.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

/* Room kept past the heap's top: a sixteenth of the heap, at most 16 huge pages (far more than
 * the loop allocates between two looks of the thread while filters are created: about 70 MB a
 * second at a million), so that what is populated ahead stays small beside what is used. */
#define SRV_PREFAULT_PAD_MAX   (32u << 20)
#define SRV_PREFAULT_PAD_SHARE 16
/* The thread's nice value: behind the loop and the clients, as the snapshot workers. */
#define SRV_PREFAULT_NICE 10
/* srv_prefault_expect's room: at most this much. */
#define SRV_PREFAULT_EXPECT_MAX (256u << 20)
/* Populated in pieces of this much, from the heap's top down: the loop writes from the bottom
 * of a new stretch up, so the two meet instead of faulting the same pages one after the other. */
#define SRV_PREFAULT_STEP (2u << 20)
/* glibc's own M_TOP_PAD (mallopt(3)): what a settled heap keeps past its top. */
#define SRV_PREFAULT_PAD_SETTLED (128u << 10)
struct srv_prefault {
	uv_thread_t thread;
	uv_mutex_t mu;
	uv_cond_t cv;
	bool stop;
	bool poked;	 /* the heap grew since the thread last looked (under mu) */
	bool settle;	 /* srv_prefault_settle was called (under mu) */
	size_t expect;	 /* srv_prefault_expect's bytes (under mu) */
	uintptr_t seen;	 /* loop only: the break at the last poke */
	uintptr_t done;	 /* the heap's top when the thread was started: populated up to there */
	uintptr_t start; /* where the heap begins (0: unknown) */
};

/* The program break, read from the kernel (glibc's sbrk(0) reads a variable the loop's
 * malloc writes). */
static uintptr_t prefault_brk(void)
{
	return (uintptr_t)syscall(SYS_brk, 0);
}

/* Where the heap begins (field 47 of /proc/self/stat), or 0 if unknown. */
static uintptr_t prefault_heap_start(void)
{
	char buf[2048];
	unsigned long long v = 0;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	char *p;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	/* Fields 3 to 46 come before it. */
	for (int i = 3; p && i <= 47; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p, " %llu", &v);
	return (uintptr_t)v;
}

static void prefault_main(void *arg)
{
	struct srv_prefault *pf = arg;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), done = pf->done, start = pf->start;
	size_t pad = 0;

	setpriority(PRIO_PROCESS, (id_t)gettid(), SRV_PREFAULT_NICE);

	uv_mutex_lock(&pf->mu);
	for (;;) {
		while (!pf->poked && !pf->settle && !pf->stop)
			uv_cond_wait(&pf->cv, &pf->mu);
		if (pf->stop)
			break;
		bool settle = pf->settle;
		size_t expect = pf->expect;

		pf->poked = pf->settle = false;
		uv_mutex_unlock(&pf->mu);
		if (settle) {
			/* The pad back to glibc's, and the top past it back to the system;
			 * malloc_trim also gives back the whole pages of free chunks inside the
			 * heap (free memory only: what the loop holds is not touched; 1 M
			 * filters kept their huge pages, 426 MB of 448). */
			mallopt(M_TOP_PAD, SRV_PREFAULT_PAD_SETTLED);
			malloc_trim(SRV_PREFAULT_PAD_SETTLED);
			pad = SRV_PREFAULT_PAD_SETTLED;
			done = prefault_brk();
			uv_mutex_lock(&pf->mu);
			continue;
		}
		uintptr_t top = prefault_brk();

		/* Populating what malloc has handed out already changes no byte of it; a stretch
		 * given back meanwhile (trimmed) fails, and is skipped. */
		for (uintptr_t from = done & ~(page - 1), hi = top; hi > from;) {
			uintptr_t lo =
			    hi - from > SRV_PREFAULT_STEP ? hi - SRV_PREFAULT_STEP : from;

			madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
			hi = lo;
		}
		size_t want = start && top > start ? (top - start) / SRV_PREFAULT_PAD_SHARE : 0;

		if (want > SRV_PREFAULT_PAD_MAX)
			want = SRV_PREFAULT_PAD_MAX;
		if (expect > want)
			want = expect < SRV_PREFAULT_EXPECT_MAX ? expect : SRV_PREFAULT_EXPECT_MAX;
		want &= ~(size_t)(page - 1);
		/* M_TOP_PAD is read by malloc on the loop thread; mallopt() sets it under the
		 * arena's lock. */
		if (want != pad) {
			mallopt(M_TOP_PAD, (int)want);
			pad = want;
		}
		done = top;
		uv_mutex_lock(&pf->mu);
	}
	uv_mutex_unlock(&pf->mu);
}

void srv_prefault_poke(struct srv_prefault *pf)
{
	uintptr_t top;

	if (!pf || (top = (uintptr_t)sbrk(0)) == pf->seen)
		return;
	pf->seen = top;
	uv_mutex_lock(&pf->mu);
	pf->poked = true;
	uv_cond_signal(&pf->cv);
	uv_mutex_unlock(&pf->mu);
}

void srv_prefault_expect(struct srv_prefault *pf, size_t bytes)
{
	if (!pf)
		return;
	uv_mutex_lock(&pf->mu);
	pf->expect = bytes;
	pf->poked = true;
	uv_cond_signal(&pf->cv);
	uv_mutex_unlock(&pf->mu);
}

void srv_prefault_settle(struct srv_prefault *pf)
{
	if (!pf)
		return;
	uv_mutex_lock(&pf->mu);
	pf->settle = true;
	pf->expect = 0;
	uv_cond_signal(&pf->cv);
	uv_mutex_unlock(&pf->mu);
}

struct srv_prefault *srv_prefault_start(void)
{
	struct srv_prefault *pf = calloc(1, sizeof(*pf));
	int rc;

	if (!pf)
		return NULL;
	/* Populating needs Linux 5.14; an empty range tells whether it is there. */
	if (madvise(NULL, 0, MADV_POPULATE_WRITE) != 0) {
		srv_log(SRV_LOG_DEBUG, "heap prefault: %s", strerror(errno));
		free(pf);
		return NULL;
	}
	if (uv_mutex_init(&pf->mu))
		goto fail_free;
	if (uv_cond_init(&pf->cv))
		goto fail_mu;
	/* Read here: what the loop allocates before the thread runs is the thread's too. */
	pf->done = pf->seen = prefault_brk();
	/* Read here, not by the thread: it allocates nothing, so it has no arena of its own that
	 * glibc would trim as it exits (reading /proc/sys, which the unit hides). */
	pf->start = prefault_heap_start();
	rc = uv_thread_create(&pf->thread, prefault_main, pf);
	if (rc) {
		srv_log(SRV_LOG_DEBUG, "heap prefault: %s", uv_strerror(rc));
		goto fail_cv;
	}
	return pf;
fail_cv:
	uv_cond_destroy(&pf->cv);
fail_mu:
	uv_mutex_destroy(&pf->mu);
fail_free:
	free(pf);
	return NULL;
}

void srv_prefault_stop(struct srv_prefault *pf)
{
	if (!pf)
		return;
	uv_mutex_lock(&pf->mu);
	pf->stop = true;
	uv_cond_signal(&pf->cv);
	uv_mutex_unlock(&pf->mu);
	uv_thread_join(&pf->thread);
	uv_cond_destroy(&pf->cv);
	uv_mutex_destroy(&pf->mu);
	free(pf);
}
