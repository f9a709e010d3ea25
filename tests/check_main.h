/* Shared main() for the Check runners: run one suite, exit non-zero if any case failed. */
#ifndef TESTS_CHECK_MAIN_H
#define TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define CHECK_MAIN(suite_fn)                                                                       \
	int main(void)                                                                             \
	{                                                                                          \
		SRunner *sr = srunner_create(suite_fn());                                          \
		srunner_run_all(sr, CK_ENV);                                                       \
		int failed = srunner_ntests_failed(sr);                                            \
		srunner_free(sr);                                                                  \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                       \
	}

#endif
