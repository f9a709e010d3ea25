/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer targets: a command layer over a small registry (so no input can ask
 * for much memory or time), and a splitter that turns the first bytes of an input into
 * fragment sizes, so the codecs see the rest the way a connection delivers it: in reads of
 * arbitrary sizes.
 */
#ifndef BLOSSOMD_FUZZ_COMMON_H
#define BLOSSOMD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/bf_registry.h"
#include "proto/command.h"
#include "tests/cmd_fixture.h"

/* Every filter of every input must fit in this budget. */
#define FUZZ_MAX_MEMORY (1u << 20)

static inline void fuzz_ctx_init(struct cmd_ctx *c)
{
	cmd_fixture_init(c, FUZZ_MAX_MEMORY, 64, 16);
	c->version = "fuzz";
}

static inline void fuzz_ctx_free(struct cmd_ctx *c)
{
	cmd_ctx_free(c); /* a SUBSCRIBE made the pub/sub registry */
	cmd_fixture_free(c);
}

/*
 * Fragment sizes: the first byte gives how many sizes follow (1..8), each next byte one size
 * (1..256); they are used in turn, round robin. data and size are advanced past them.
 */
struct fuzz_frags {
	size_t n, next;
	size_t sizes[8];
};

static inline void fuzz_frags_init(struct fuzz_frags *fr, const uint8_t **data, size_t *size)
{
	fr->n = 1;
	fr->next = 0;
	fr->sizes[0] = SIZE_MAX; /* no header byte: one fragment */
	if (*size == 0)
		return;
	size_t n = (size_t)((*data)[0] % 8) + 1;
	(*data)++, (*size)--;
	if (n > *size)
		n = *size;
	if (n == 0)
		return;
	fr->n = n;
	for (size_t i = 0; i < n; i++)
		fr->sizes[i] = (size_t)(*data)[i] + 1;
	*data += n;
	*size -= n;
}

static inline size_t fuzz_frags_next(struct fuzz_frags *fr)
{
	size_t s = fr->sizes[fr->next];
	fr->next = (fr->next + 1) % fr->n;
	return s;
}

#endif
