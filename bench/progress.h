/* SPDX-License-Identifier: MIT */
/*
 * The progress of a long bench program, for whoever watches it on a terminal: one line on
 * stderr, redrawn in place at most five times a second,
 *
 *	bench/core: N = 100000000, checks, rep 2/3   58%   1m 12s elapsed, about 52s left
 *
 * and erased once the program is done, so the figures it prints stay as they were. Only when
 * stderr is a terminal (and TERM is not "dumb"): piped or redirected output (a log, CI, a
 * script parsing the figures) gets not one byte of it. Header-only, shared by the bench
 * programs; nothing here is timed (call it between measurements, not inside them).
 */
#ifndef BLOSSOMD_BENCH_PROGRESS_H
#define BLOSSOMD_BENCH_PROGRESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct bench_progress {
	bool tty;	 /* stderr is a terminal: draw */
	bool drawn;	 /* a line is on the screen */
	double t0, last; /* seconds (CLOCK_MONOTONIC): the start, the last line */
};

static inline double bench_progress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void bench_progress_start(struct bench_progress *p)
{
	const char *term = getenv("TERM");

	p->tty = isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
	p->drawn = false;
	p->t0 = bench_progress_now();
	p->last = 0;
}

/* "1h 02m", "3m 05s", "42s". */
static inline const char *bench_progress_dur(double s, char *buf, size_t len)
{
	unsigned long t = s > 0 ? (unsigned long)(s + 0.5) : 0;

	if (t >= 3600)
		snprintf(buf, len, "%luh %02lum", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(buf, len, "%lum %02lus", t / 60, t % 60);
	else
		snprintf(buf, len, "%lus", t);
	return buf;
}

/* done of total (any unit) is done; what (printf-style) says what is going on now. */
static inline void bench_progress(struct bench_progress *p, double done, double total,
				  const char *what, ...) __attribute__((format(printf, 4, 5)));
static inline void bench_progress(struct bench_progress *p, double done, double total,
				  const char *what, ...)
{
	char label[160], el[32], left[32];
	double now, frac;
	va_list ap;

	if (!p->tty)
		return;
	now = bench_progress_now();
	if (p->drawn && now - p->last < 0.2)
		return;
	p->last = now;
	va_start(ap, what);
	vsnprintf(label, sizeof(label), what, ap);
	va_end(ap);
	frac = total > 0 ? done / total : 0;
	if (frac > 1)
		frac = 1;
	bench_progress_dur(now - p->t0, el, sizeof(el));
	if (frac > 0.001)
		fprintf(stderr, "\r\033[K%s   %3.0f%%   %s elapsed, about %s left", label,
			frac * 100, el,
			bench_progress_dur((now - p->t0) * (1 - frac) / frac, left, sizeof(left)));
	else
		fprintf(stderr, "\r\033[K%s   %3.0f%%   %s elapsed", label, frac * 100, el);
	fflush(stderr);
	p->drawn = true;
}

/* Erase the line (before the program prints its figures, or at its end). */
static inline void bench_progress_clear(struct bench_progress *p)
{
	if (p->tty && p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = false;
}

#endif /* BLOSSOMD_BENCH_PROGRESS_H */
