/* SPDX-License-Identifier: MIT */
/* Pools of same-size pieces in slabs, found from a piece by a search of the slabs; see
 * bf_pool.h. */
#include "core/bf_pool.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Under ASan a piece given back is poisoned until it is given again, as free() would have it. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A slab's header, at its start; its pieces from the first multiple of its pool's align on. */
struct bf_pool_slab {
	struct bf_pool_slab *prev, *next; /* in its pool's list of slabs with room */
	struct bf_pool *pool;
	void *free;	 /* pieces given back, linked through their first word */
	char *first;	 /* its first piece */
	uint32_t used;	 /* pieces handed out */
	uint32_t fresh;	 /* pieces from here on were never handed out */
	uint32_t pieces; /* how many fit */
	uint32_t off;	 /* the slab - the pointer malloc gave */
};

static struct {
	pthread_mutex_t mu;
	struct bf_pool_slab **all; /* every slab of every pool, by address */
	size_t n, cap;
} slabs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool slab_has_room(const struct bf_pool_slab *s)
{
	return s->free || s->fresh < s->pieces;
}

static void slab_list(struct bf_pool_slab *s)
{
	s->prev = NULL;
	s->next = s->pool->room;
	if (s->next)
		s->next->prev = s;
	s->pool->room = s;
}

static void slab_unlist(struct bf_pool_slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		s->pool->room = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
}

/* The number of slabs in slabs.all below address p. */
static size_t slab_rank(const void *p)
{
	size_t lo = 0, hi = slabs.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)slabs.all[mid] < (uintptr_t)p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uintptr_t align_up(uintptr_t x, uintptr_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* A new empty slab of pool p, listed in slabs.all; NULL if out of memory. */
static struct bf_pool_slab *slab_new(struct bf_pool *p)
{
	/* What malloc's own alignment leaves to do: the slab's header, then its first piece. */
	const size_t slack = p->align > alignof(max_align_t) ? p->align - alignof(max_align_t) : 0;

	if (slabs.n == slabs.cap) {
		size_t cap = slabs.cap ? slabs.cap * 2 : 64;
		struct bf_pool_slab **all = realloc(slabs.all, cap * sizeof(*all));

		if (!all)
			return NULL;
		slabs.all = all;
		slabs.cap = cap;
	}
	char *raw = malloc(BF_POOL_SLAB_BYTES + slack);
	if (!raw)
		return NULL;
	struct bf_pool_slab *s = (struct bf_pool_slab *)align_up((uintptr_t)raw, p->align);
	char *first = (char *)align_up((uintptr_t)(s + 1), p->align);

	*s = (struct bf_pool_slab){
	    .pool = p,
	    .first = first,
	    .pieces = (uint32_t)(((char *)s + BF_POOL_SLAB_BYTES - first) / p->size),
	    .off = (uint32_t)((char *)s - raw),
	};
	size_t at = slab_rank(s);

	memmove(slabs.all + at + 1, slabs.all + at, (slabs.n - at) * sizeof(*slabs.all));
	slabs.all[at] = s;
	slabs.n++;
	return s;
}

/* Take the empty slab s out of slabs.all (freed with the last slab: nothing is left at exit);
 * returns the block to free, out of the lock. */
static void *slab_remove(struct bf_pool_slab *s)
{
	size_t at = slab_rank(s);

	memmove(slabs.all + at, slabs.all + at + 1, (slabs.n - at - 1) * sizeof(*slabs.all));
	if (--slabs.n == 0) {
		free(slabs.all);
		slabs.all = NULL;
		slabs.cap = 0;
	}
	return (char *)s - s->off;
}

void *bf_pool_get(struct bf_pool *p)
{
	char *piece = NULL;

	pthread_mutex_lock(&slabs.mu);
	struct bf_pool_slab *s = p->room;
	if (!s && (s = slab_new(p)))
		slab_list(s);
	if (s) {
		if (s->free) {
			piece = s->free;
			UNPOISON(piece, p->size);
			s->free = *(void **)piece;
		} else {
			piece = s->first + (size_t)s->fresh++ * p->size;
		}
		s->used++;
		if (!slab_has_room(s))
			slab_unlist(s);
	}
	pthread_mutex_unlock(&slabs.mu);
	if (piece)
		memset(piece, 0, p->size);
	return piece;
}

void bf_pool_put(void *piece)
{
	void *raw = NULL;

	if (!piece)
		return;
	pthread_mutex_lock(&slabs.mu);
	/* Its slab: the last that begins below it. */
	struct bf_pool_slab *s = slabs.all[slab_rank(piece) - 1];
	if (!slab_has_room(s))
		slab_list(s);
	*(void **)piece = s->free;
	s->free = piece;
	POISON((char *)piece + sizeof(void *), s->pool->size - sizeof(void *));
	if (--s->used == 0) {
		slab_unlist(s);
		raw = slab_remove(s);
	}
	pthread_mutex_unlock(&slabs.mu);
	free(raw);
}

size_t bf_pool_slabs(void)
{
	pthread_mutex_lock(&slabs.mu);
	size_t n = slabs.n;
	pthread_mutex_unlock(&slabs.mu);
	return n;
}
