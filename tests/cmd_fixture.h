/* SPDX-License-Identifier: MIT */
/*
 * The command layer the protocol tests and fuzz targets run against: a real registry with a
 * memory limit, the defaults of RESP auto-create (capacity 1000 at 1 %, expansion 2) and small
 * key and argument limits, so edges are cheap to reach. No hooks: a test sets the ones it
 * watches. Aborts if the registry cannot be made (no test can go on without it).
 */
#ifndef BLOSSOMD_TESTS_CMD_FIXTURE_H
#define BLOSSOMD_TESTS_CMD_FIXTURE_H

#include <stdlib.h>

#include "proto/command.h"

static inline void cmd_fixture_init(struct cmd_ctx *c, uint64_t max_memory, size_t max_key_bytes,
				    size_t max_args)
{
	struct bf_registry *reg;

	if (bf_registry_new(max_memory, &reg) != 0)
		abort();
	*c = (struct cmd_ctx){
	    .reg = reg,
	    /* As the config's defaults, but HTTP's capacity smaller. */
	    .defaults =
		{
		    [CMD_PEER_TEXT] = {100000, 0.0001},
		    [CMD_PEER_RESP] = {100, 0.01},
		    [CMD_PEER_HTTP] = {1000, 0.01},
		},
	    .default_expansion = 2,
	    .max_key_bytes = max_key_bytes,
	    .max_args = max_args,
	    .version = "0.1.0",
	};
}

static inline void cmd_fixture_free(struct cmd_ctx *c)
{
	bf_registry_free(c->reg);
	c->reg = NULL;
}

#endif /* BLOSSOMD_TESTS_CMD_FIXTURE_H */
