/* SPDX-License-Identifier: MIT */
/* Progress lines of long checkpoints and loads; see progress.h. */
#include "server/progress.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "server/log.h"

void srv_progress_begin(struct srv_progress *p, uint64_t total, uint64_t min_bytes,
			unsigned interval_s, const char *what, ...)
{
	va_list ap;

	memset(p, 0, sizeof(*p));
	p->total = total;
	p->on = min_bytes && total >= min_bytes;
	if (!p->on)
		return;
	va_start(ap, what);
	vsnprintf(p->what, sizeof(p->what), what, ap);
	va_end(ap);
	p->interval = (uint64_t)interval_s * 1000000000u;
	p->next = SRV_PROGRESS_STEP;
	p->t0 = p->last = uv_hrtime();
}

/* MiB/s of done bytes in ns (at least 1). */
static double srv_progress_rate(uint64_t done, uint64_t ns)
{
	return (double)done / 1048576.0 / ((double)(ns ? ns : 1) / 1e9);
}

void srv_progress_at(struct srv_progress *p, uint64_t done)
{
	uint64_t now, ns, left;
	double rate;

	p->done = done;
	if (!p->on || done < p->next || done >= p->total)
		return;
	p->next = done + SRV_PROGRESS_STEP;
	now = uv_hrtime();
	if (now - p->last < p->interval)
		return;
	p->last = now;
	p->lines++;
	ns = now - p->t0;
	rate = srv_progress_rate(done, ns);
	/* Time left at the rate so far; rounded up, so a line never says 0 s before the end. */
	left = (uint64_t)((double)(p->total - done) / 1048576.0 / rate) + 1;
	srv_log(SRV_LOG_INFO,
		"%s: %" PRIu64 " of %" PRIu64 " bytes (%u%%), %.1f MiB/s, %" PRIu64 " s left",
		p->what, done, p->total, (unsigned)(done * 100 / p->total), rate, left);
}

void srv_progress_io(void *arg, uint64_t done, uint64_t total)
{
	struct srv_progress *p = arg;

	p->total = total; /* the file's exact length (begin may have had its body's only) */
	srv_progress_at(p, done);
}

void srv_progress_end(struct srv_progress *p, int rc)
{
	uint64_t ns;

	if (!p->on || rc || !p->lines)
		return;
	ns = uv_hrtime() - p->t0;
	srv_log(SRV_LOG_INFO, "%s: %" PRIu64 " bytes in %.1f s, %.1f MiB/s", p->what, p->total,
		(double)ns / 1e9, srv_progress_rate(p->total, ns));
}
