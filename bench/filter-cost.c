/* SPDX-License-Identifier: MIT */
/*
 * bench/filter-cost: where the bytes of a small filter go (issue 13: "measure where the bytes
 * go"). Creates N filters of capacity 100 at 1 % (names "u<i>") in a registry, as BF.RESERVE
 * does, and reports the bytes per filter the heap took from the system (mallinfo2()), then each
 * piece's size as the allocator hands it out (malloc_usable_size + its 8-byte chunk header; a
 * pool's piece, core/bf_pool.h, has no header).
 *
 *   build-bench/bench/filter-cost [N]     (default 100000)
 *
 * The server adds its own per-filter bookkeeping, not counted here: its snapshot entry (32
 * bytes, a piece of a pool) and its slot in the entry list (8 bytes; the cycle's list of
 * filters to write has room for one more, touched only for filters with files of their own);
 * bench/many-filters measures the whole daemon's RSS.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_registry.h"

/* What the heap holds from the system: the bytes in use and the free ones it cannot give back
 * (slivers between chunks count: they are resident all the same). */
static size_t heap(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.arena + mi.hblkhd;
}

static size_t chunk(const void *p)
{
	return p ? malloc_usable_size((void *)p) + 8 : 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	struct bf_params p = {.capacity = 100, .error_rate = 0.01, .expansion = 2, .persist = true};
	struct bf_registry *r;
	struct bf_filter *f = NULL;
	char name[32];

	if (bf_registry_new(0, &r))
		return 1;
	size_t h0 = heap();
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(name, sizeof(name), "u%zu", i);

		if (bf_registry_create(r, name, (size_t)len, &p, i * 0x9e3779b97f4a7c15ULL, &f))
			return 1;
	}
	size_t h1 = heap();
	struct mallinfo2 mi = mallinfo2();
	printf("bench/filter-cost: %zu filters of capacity 100 at 1 %%, names u0..u%zu\n\n", n,
	       n - 1);
	printf("heap per filter (core: filter, layers, bits, registry; free slivers included): "
	       "%.1f B\n",
	       (double)(h1 - h0) / (double)n);
	printf("of which free (slivers the heap could not reuse), in all: %.1f B per filter\n\n",
	       (double)mi.fordblks / (double)n);
	printf("| piece | bytes (as allocated) |\n|---|---:|\n");
	/* The structure and its name's room are a piece of a pool. */
	size_t own = sizeof(*f) + f->name_room;
	printf(
	    "| struct bf_filter (sizeof %zu) and the room for its name (%u), from a pool | %zu |\n",
	    sizeof(struct bf_filter), f->name_room, own);
	printf("| (of which statistics, struct bf_stats) | (%zu) |\n", sizeof(struct bf_stats));
	printf("| its params (struct bf_params %zu: one copy shared by the filters alike) | 0 |\n",
	       sizeof(struct bf_params));
	/* One layer is f->layer0, inside the structure; more are a heap array. */
	const void *table = f->layers_cap > 1 ? f->table : NULL;
	printf("| its layer table (sizeof struct bf_layer %zu, x%u%s) | %zu |\n",
	       sizeof(struct bf_layer), f->layers_cap, table ? "" : ", inside the structure",
	       chunk(table));
	/* A small layer's blocks are a piece of a pool's slab, not a chunk of their own. */
	size_t bits = bf_layer_cost(bf_filter_bytes(f));
	printf("| its bits (%llu bytes, 64-byte aligned, from a pool) | %zu |\n",
	       (unsigned long long)bf_filter_bytes(f), bits);
	printf("| its name (%u bytes: in that room, above) | %zu |\n", f->name_len,
	       bf_filter_name(f) == (const char *)(f + 1) ? 0 : chunk(bf_filter_name(f)));
	printf("| the rest (registry bucket slots, allocator slack) | %.1f |\n",
	       (double)(h1 - h0) / (double)n - (double)(own + chunk(table) + bits));
	bf_registry_free(r);
	return 0;
}
