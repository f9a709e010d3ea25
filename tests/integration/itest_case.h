/* SPDX-License-Identifier: MIT */
/*
 * Check-level helpers for integration cases that keep one data directory across the daemons of
 * a case (restarts, SIGKILL) and talk to the daemon as a conversation: a RESP, text or HTTP
 * request and its whole reply, compared byte for byte. Every helper asserts instead of
 * returning an error. Replies are in static buffers, valid until the next call of the same
 * helper.
 *
 * Include it instead of itest_check.h (it includes that, and uses its daemon d and patience T,
 * bound before main()). A file may define, before including it, besides ITEST_T and
 * ITEST_STOP_MS:
 *	ITEST_START_READY	1: start_in() also waits for the daemon's "ready (pid " line (the
 *				RESP port accepts connections from listen() on, HTTP's a moment
 *				later); default 0
 */
#ifndef BLOSSOMD_TESTS_INTEGRATION_ITEST_CASE_H
#define BLOSSOMD_TESTS_INTEGRATION_ITEST_CASE_H

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tests/integration/harness.h"
#ifndef ITEST_CASE_IMPL /* itest_case.c has no daemon d of its own */
#include "tests/integration/itest_check.h"
#endif

#ifndef ITEST_START_READY
#define ITEST_START_READY 0
#endif

/* snprintf into an array, asserting nothing was cut. */
#define FMT(buf, ...) ck_assert_int_lt(snprintf((buf), sizeof(buf), __VA_ARGS__), (int)sizeof(buf))

/* s with CR and LF written as \r and \n, for a one-line failure message. Static: the results of
 * the last four calls stay valid. */
const char *esc(const char *s);

/* Two strings are equal; else both are shown, on one line (TAP). */
#define EQ(got, want)                                                                              \
	do {                                                                                       \
		const char *g_ = (got), *w_ = (want);                                              \
		ck_assert_msg(!strcmp(g_, w_), "got '%s', want '%s'", esc(g_), esc(w_));           \
	} while (0)

/* ---------------------------------------------------------------------------------------- */
/* The case's data directory */

/* This case's data directory ("" before data_dir_new()), kept across the daemons of the case
 * and removed by the next data_dir_new() or at exit. */
extern char case_dir[256];

/* A new, empty case_dir (/tmp/blossomd-<program>-XXXXXX); the previous one is removed. */
void data_dir_new(void);

/* case_dir/file. Static: the results of the last four calls stay valid. */
const char *path_in(const char *file);

/* True if case_dir/file exists. */
bool exists(const char *file);

/* The bytes of case_dir/file (malloc'd), its length in *len. */
unsigned char *slurp(const char *file, size_t *len);

/* case_dir/file holds exactly p[0, len). */
void spit(const char *file, const void *p, size_t len);

/* The pack file (pack-NN.bpack) in case_dir whose bytes hold name (static), or NULL. */
const char *pack_with(const char *name);

/* ---------------------------------------------------------------------------------------- */
/* Start and SIGKILL */

#ifndef ITEST_CASE_IMPL
/* Start on case_dir. Two free ports picked by the harness may be the same one (the daemon then
 * refuses to start): that start is tried again. With ITEST_START_READY, returns once the
 * daemon says it is ready. */
static inline void start_in(const char *conf)
{
	const char *extra[] = {"--data-dir", case_dir, NULL};

	for (int i = 0; i < 3; i++) {
		int rc = itest_start(&d, conf, extra);

		if (rc == 0) {
			if (ITEST_START_READY)
				ck_assert_msg(itest_log_wait(&d, "ready (pid ", T), "%s",
					      itest_log(&d));
			return;
		}
		if (rc != -ECHILD || !strstr(itest_log(&d), "http_port must differ from port")) {
			fprintf(stderr, "daemon log:\n%s\n", itest_log(&d));
			ck_abort_msg("blossomd did not start: %s", strerror(-rc));
		}
		itest_stop(&d, T);
	}
	ck_abort_msg("blossomd did not start: no two distinct free ports");
}

/* kill -9 and reap (through the wrapper, if any); case_dir stays. */
static inline void kill9(void)
{
	int st;

	kill(daemon_pid(), SIGKILL);
	st = itest_wait_exit(&d, T);
	ck_assert_msg(st >= 0, "daemon did not die: %d", st);
	d.status = st;
	itest_stop(&d, T); /* removes the harness's directory */
}
#endif

/* ---------------------------------------------------------------------------------------- */
/* RESP */

/* Append the RESP command of space-separated words to out[0, cap) at *len. */
void resp_encode(char *out, size_t cap, size_t *len, const char *words);

/* Send a command of argc arguments (binary, lens) and read its whole reply, NUL-terminated,
 * static. */
const char *callv(int fd, int argc, const char *const *argv, const size_t *lens);

/* A command of space-separated words ("" is not a word: use callv for an empty argument). */
const char *call(int fd, const char *words);

/* A command of space-separated words has exactly this reply. */
#define RX(fd, words, expect) EQ(call((fd), (words)), (expect))

/* Keys "<tag>:<i>" for i in [0, n) added to filter with BF.MADD, 200 a command; every one
 * new. */
void resp_add_keys(int fd, const char *filter, const char *tag, unsigned n);

/* How many of the keys "<tag>:<i>", i in [0, n), filter has (BF.MEXISTS, 200 a command). */
unsigned resp_count_keys(int fd, const char *filter, const char *tag, unsigned n);

/* No filter name exists (EXISTS). */
void absent(int fd, const char *name);

/* Wait until no background save runs (INFO persistence), up to T. */
void bgsave_done(int fd);

/* ---------------------------------------------------------------------------------------- */
/* Text protocol and HTTP */

/* One text-protocol command and its reply: one line, or START ... END. NUL-terminated,
 * static. */
const char *txt(int fd, const char *line);

#define TXT(fd, line, expect) EQ(txt((fd), (line)), (expect))

/* One HTTP request (body NULL: none) on its own connection to d's HTTP port; the whole
 * response (head, then Content-Length bytes), NUL-terminated, static. */
const char *http(const char *method, const char *path, const char *body);

/* ---------------------------------------------------------------------------------------- */

/* The daemon and patience (ms) the helpers above use: this file's d and T, bound below. */
void itest_case_bind(struct itest_daemon *daemon, int timeout_ms);

#ifndef ITEST_CASE_IMPL
__attribute__((constructor)) static void itest_case_bind_file(void)
{
	itest_case_bind(&d, T);
}
#endif

#endif /* BLOSSOMD_TESTS_INTEGRATION_ITEST_CASE_H */
