/* SPDX-License-Identifier: MIT */
/* The heap prefault thread: new heap memory is resident before anything writes to it. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "tests/check_main.h"
#include "server/prefault.h"

static uintptr_t brk_now(void)
{
	return (uintptr_t)syscall(SYS_brk, 0);
}

/* Pages of [from, to) not resident. */
static size_t missing(uintptr_t from, uintptr_t to)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (to - from) / page, miss = 0;
	unsigned char *v = malloc(n);

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mincore((void *)from, to - from, v), 0);
	for (size_t i = 0; i < n; i++)
		miss += !(v[i] & 1);
	free(v);
	return miss;
}

START_TEST(new_heap_is_populated)
{
	enum { BLOCKS = 256, SIZE = 64 * 1024 };
	struct srv_prefault *pf = srv_prefault_start();
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	static char *blocks[BLOCKS];
	size_t miss = 0;

	if (!pf)
		return; /* Linux before 5.14: nothing to test */
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's allocator maps its own memory: the program break never moves. */
	srv_prefault_stop(pf);
	return;
#endif
	/* Grow the heap by 16 MiB of blocks under the mmap threshold, of which malloc writes
	 * only the headers: their insides are written by nobody but the thread. */
	uintptr_t before = brk_now();
	for (unsigned i = 0; i < BLOCKS; i++) {
		blocks[i] = malloc(SIZE);
		ck_assert_ptr_nonnull(blocks[i]);
	}
	ck_assert_uint_gt(brk_now(), before);
	uint64_t end = uv_hrtime() + 2000000000ull;
	do {
		srv_prefault_poke(pf); /* as the loop does once a turn */
		usleep(1000);
		miss = 0;
		for (unsigned i = 0; i < BLOCKS; i++) {
			uintptr_t from = ((uintptr_t)blocks[i] + page - 1) & ~(page - 1);
			uintptr_t to = ((uintptr_t)blocks[i] + SIZE) & ~(page - 1);

			if ((uintptr_t)blocks[i] >= before)
				miss += missing(from, to);
		}
	} while (miss && uv_hrtime() < end);
	ck_assert_uint_eq(miss, 0);
	srv_prefault_stop(pf);
	srv_prefault_stop(NULL);
	for (unsigned i = 0; i < BLOCKS; i++)
		free(blocks[i]);
}
END_TEST

static Suite *prefault_suite(void)
{
	Suite *s = suite_create("prefault");
	TCase *tc = tcase_create("prefault");

	tcase_add_test(tc, new_heap_is_populated);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(prefault_suite)
