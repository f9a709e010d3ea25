/* SPDX-License-Identifier: MIT */
/*
 * Check-level wrappers around the harness, shared by the integration test files: each file
 * has one daemon `d`, started with start(), stopped with stop() (which asserts exit status 0),
 * and asserts exchanges with EXCHANGE(). The harness itself (harness.h) returns errors
 * instead of asserting, so it stays usable outside Check.
 *
 * A file may define, before including this header:
 *	ITEST_T		patience for one reply in ms (default 5000: generous, so a loaded CI
 *			machine or a sanitizer build passes)
 *	ITEST_STOP_MS	how long stop() waits for the exit after SIGTERM (default 10000)
 * T and the stop's wait are these times itest_patience() (3 in scripts/test's valgrind pass).
 */
#ifndef BLOSSOMD_TESTS_INTEGRATION_ITEST_CHECK_H
#define BLOSSOMD_TESTS_INTEGRATION_ITEST_CHECK_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "tests/integration/harness.h"

#ifndef ITEST_T
#define ITEST_T 5000
#endif
#ifndef ITEST_STOP_MS
#define ITEST_STOP_MS 10000
#endif
#define T (ITEST_T * itest_patience())

/* A config file's text: the [blossomd] section with body. */
#define CONF(body) "[blossomd]\n" body

static struct itest_daemon d;

/* Start the daemon (see itest_start()); on failure print its log and fail the case. */
static inline void start(const char *conf, const char *const *extra)
{
	int rc = itest_start(&d, conf, extra);

	if (rc)
		fprintf(stderr, "daemon log:\n%s\n", itest_log(&d));
	ck_assert_msg(rc == 0, "blossomd did not start: %s", strerror(-rc));
}

/* SIGTERM must end the daemon cleanly with status 0 (under a wrapper: no error, no leak). */
static inline void stop(void)
{
	int st = itest_stop(&d, ITEST_STOP_MS * itest_patience());

	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "blossomd did not exit 0 after SIGTERM (wait status %d)", st);
}

/* A connection to the text/RESP port. */
static inline int conn(void)
{
	int fd = itest_connect(d.port);

	ck_assert_msg(fd >= 0, "connect: %s", strerror(-fd));
	return fd;
}

/* The daemon's own pid, from its start-up line (differs from d.pid under a wrapper). */
static inline pid_t daemon_pid(void)
{
	const char *p;

	ck_assert(itest_log_wait(&d, "ready (pid ", T));
	p = strstr(itest_log(&d), "ready (pid ");
	return (pid_t)atol(p + strlen("ready (pid "));
}

#define EXCHANGE(fd, req, expect) ck_assert(itest_exchange((fd), (req), (expect), T))
#define EXCHANGE_N(fd, req, rn, expect, en)                                                        \
	ck_assert(itest_exchange_n((fd), (req), (rn), (expect), (en), T))
/* The daemon closes fd within T (anything it still sends is discarded). */
#define CLOSED(fd) ck_assert_int_eq(itest_wait_closed((fd), T, NULL), 0)

#endif /* BLOSSOMD_TESTS_INTEGRATION_ITEST_CHECK_H */
