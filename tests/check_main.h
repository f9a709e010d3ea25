/* SPDX-License-Identifier: MIT */
/* Shared main() for the Check runners: run one suite, exit non-zero if any case failed. */
#ifndef TESTS_CHECK_MAIN_H
#define TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_MAIN(suite_fn)                                                                       \
	int main(void)                                                                             \
	{                                                                                          \
		SRunner *sr = srunner_create(suite_fn());                                          \
		srunner_run_all(sr, CK_ENV);                                                       \
		int failed = srunner_ntests_failed(sr);                                            \
		srunner_free(sr);                                                                  \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                       \
	}

/* A case that cannot run on this machine, and why. */
struct check_skip {
	const char *name;
	const char *reason;
};

/*
 * Run a suite whose cases that cannot run here were left out of it, and report those as real
 * TAP skips ("ok N - name # SKIP reason", counted in the plan), so meson counts them as skipped
 * rather than passed. Check writes its own plan last, so its TAP goes to a temporary file first
 * and is copied to stdout without that plan. Without CK_TAP_LOG_FILE_NAME=- (not under meson)
 * the skips are printed as notes. Returns the exit status.
 */
static inline int check_run_with_skips(Suite *s, const struct check_skip *skips, size_t nskips)
{
	const char *tap = getenv("CK_TAP_LOG_FILE_NAME");
	char path[] = "/tmp/blossomd-tap-XXXXXX", line[4096];
	SRunner *sr = srunner_create(s);
	unsigned n = 0, plan = 0;
	int fd = -1, failed;
	FILE *f;

	if (tap && strcmp(tap, "-") == 0 && (fd = mkstemp(path)) >= 0) {
		close(fd);
		unsetenv("CK_TAP_LOG_FILE_NAME"); /* it would override srunner_set_tap() */
		srunner_set_tap(sr, path);
	}
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (fd < 0) {
		for (size_t i = 0; i < nskips; i++)
			printf("# skipped %s: %s\n", skips[i].name, skips[i].reason);
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "1..%u", &plan) == 1)
			continue;
		if (strncmp(line, "ok ", 3) == 0 || strncmp(line, "not ok ", 7) == 0)
			n++;
		fputs(line, stdout);
	}
	if (f)
		fclose(f);
	unlink(path);
	for (size_t i = 0; i < nskips; i++)
		printf("ok %u - %s # SKIP %s\n", ++n, skips[i].name, skips[i].reason);
	printf("1..%u\n", n);
	fflush(stdout);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
