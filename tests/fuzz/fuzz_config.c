/* SPDX-License-Identifier: MIT */
/*
 * The config parser (conf/config.h): the input is the INI file, loaded over the defaults
 * with conf_load() from a memfd (through /proc/self/fd: no disk I/O), then checked with
 * conf_validate(). A load that fails must leave the config unchanged, as documented.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz-config", MFD_CLOEXEC);
		if (memfd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0) < 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();

	static struct config c, before;
	char err[512];
	conf_defaults(&c);
	before = c;
	int rc = conf_load(&c, path, err, sizeof(err));
	if (rc != 0) {
		if (memcmp(&c, &before, sizeof(c)) != 0)
			abort(); /* a failed load changed the config */
		if (memchr(err, '\0', sizeof(err)) == NULL)
			abort();
	} else {
		conf_validate(&c, err, sizeof(err));
	}
	return 0;
}
