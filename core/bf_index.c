/* SPDX-License-Identifier: MIT */
#include "core/bf_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct bf_index_leaf {
	unsigned n;
	struct bf_filter *f[BF_INDEX_LEAF];
};

/* A leaf with fewer filters than this is merged into a neighbour that has room. */
#define LEAF_LOW (BF_INDEX_LEAF / 4)

/* f's name against name[0, len): < 0, 0, > 0. */
static int cmp(const struct bf_filter *f, const char *name, size_t len)
{
	size_t n = f->name_len < len ? f->name_len : len;
	int c = memcmp(f->name, name, n);

	if (c)
		return c;
	return f->name_len < len ? -1 : f->name_len > len;
}

/* The leaf name belongs in: the last whose first name is not after it (0 if there is none). */
static size_t leaf_for(const struct bf_index *ix, const char *name, size_t len)
{
	size_t lo = 0, hi = ix->nleaves;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp(ix->leaves[mid]->f[0], name, len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
}

/* The first slot of l whose name is not before name[0, len). */
static unsigned slot_for(const struct bf_index_leaf *l, const char *name, size_t len)
{
	unsigned lo = 0, hi = l->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (cmp(l->f[mid], name, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Room for one more leaf in the array. */
static int leaves_reserve(struct bf_index *ix)
{
	if (ix->nleaves < ix->cap)
		return 0;
	size_t cap = ix->cap ? ix->cap * 2 : 4;
	struct bf_index_leaf **p = realloc(ix->leaves, cap * sizeof(*p));

	if (!p)
		return -ENOMEM;
	ix->leaves = p;
	ix->cap = cap;
	return 0;
}

/* A leaf for the index: its spare if it has one. */
static struct bf_index_leaf *leaf_new(struct bf_index *ix)
{
	struct bf_index_leaf *l = ix->spare;

	ix->spare = NULL;
	return l ? l : malloc(sizeof(*l));
}

int bf_index_reserve(struct bf_index *ix)
{
	if (leaves_reserve(ix))
		return -ENOMEM;
	if (!ix->spare && !(ix->spare = malloc(sizeof(*ix->spare))))
		return -ENOMEM;
	return 0;
}

static void leaves_insert(struct bf_index *ix, size_t k, struct bf_index_leaf *l)
{
	memmove(ix->leaves + k + 1, ix->leaves + k, (ix->nleaves - k) * sizeof(*ix->leaves));
	ix->leaves[k] = l;
	ix->nleaves++;
}

static void leaves_remove(struct bf_index *ix, size_t k)
{
	free(ix->leaves[k]);
	memmove(ix->leaves + k, ix->leaves + k + 1, (ix->nleaves - k - 1) * sizeof(*ix->leaves));
	ix->nleaves--;
}

static void leaf_put(struct bf_index_leaf *l, unsigned i, struct bf_filter *f)
{
	memmove(l->f + i + 1, l->f + i, (l->n - i) * sizeof(*l->f));
	l->f[i] = f;
	l->n++;
}

void bf_index_clear(struct bf_index *ix)
{
	for (size_t k = 0; k < ix->nleaves; k++)
		free(ix->leaves[k]);
	free(ix->leaves);
	free(ix->spare);
	memset(ix, 0, sizeof(*ix));
}

int bf_index_insert(struct bf_index *ix, struct bf_filter *f)
{
	struct bf_index_leaf *l, *nl;
	size_t k;
	unsigned i;

	if (!ix->nleaves) {
		if (leaves_reserve(ix))
			return -ENOMEM;
		l = leaf_new(ix);
		if (!l)
			return -ENOMEM;
		l->n = 1;
		l->f[0] = f;
		leaves_insert(ix, 0, l);
		ix->count = 1;
		return 0;
	}
	k = leaf_for(ix, f->name, f->name_len);
	l = ix->leaves[k];
	i = slot_for(l, f->name, f->name_len);
	if (i < l->n && cmp(l->f[i], f->name, f->name_len) == 0)
		return -EEXIST;
	if (l->n == BF_INDEX_LEAF) {
		if (leaves_reserve(ix))
			return -ENOMEM;
		nl = leaf_new(ix);
		if (!nl)
			return -ENOMEM;
		/* Names arriving in order fill leaves whole: past the last one's end (or before the
		 * first one's start) starts a new leaf; elsewhere the leaf splits in halves. */
		if (i == BF_INDEX_LEAF && k == ix->nleaves - 1) {
			nl->n = 0;
			leaves_insert(ix, k + 1, nl);
			l = nl;
			i = 0;
		} else if (i == 0 && k == 0) {
			nl->n = 0;
			leaves_insert(ix, 0, nl);
			l = nl;
		} else {
			unsigned half = BF_INDEX_LEAF / 2;

			nl->n = BF_INDEX_LEAF - half;
			memcpy(nl->f, l->f + half, nl->n * sizeof(*l->f));
			l->n = half;
			leaves_insert(ix, k + 1, nl);
			if (i > half) {
				l = nl;
				i -= half;
			}
		}
	}
	leaf_put(l, i, f);
	ix->count++;
	return 0;
}

int bf_index_remove(struct bf_index *ix, const struct bf_filter *f)
{
	struct bf_index_leaf *l;
	size_t k;
	unsigned i;

	if (!ix->nleaves)
		return -ENOENT;
	k = leaf_for(ix, f->name, f->name_len);
	l = ix->leaves[k];
	i = slot_for(l, f->name, f->name_len);
	if (i >= l->n || l->f[i] != f)
		return -ENOENT;
	memmove(l->f + i, l->f + i + 1, (l->n - i - 1) * sizeof(*l->f));
	l->n--;
	ix->count--;
	if (l->n == 0) {
		leaves_remove(ix, k);
	} else if (l->n < LEAF_LOW) {
		/* Into a neighbour with room, so that leaves stay at least a quarter full. */
		struct bf_index_leaf *left = k ? ix->leaves[k - 1] : NULL;
		struct bf_index_leaf *right = k + 1 < ix->nleaves ? ix->leaves[k + 1] : NULL;

		if (left && left->n + l->n <= BF_INDEX_LEAF * 3 / 4) {
			memcpy(left->f + left->n, l->f, l->n * sizeof(*l->f));
			left->n += l->n;
			leaves_remove(ix, k);
		} else if (right && right->n + l->n <= BF_INDEX_LEAF * 3 / 4) {
			memmove(right->f + l->n, right->f, right->n * sizeof(*l->f));
			memcpy(right->f, l->f, l->n * sizeof(*l->f));
			right->n += l->n;
			leaves_remove(ix, k);
		}
	}
	return 0;
}

struct bf_index_pos bf_index_seek(const struct bf_index *ix, const char *name, size_t len, bool at)
{
	struct bf_index_pos p = {0, 0};

	if (!ix->nleaves)
		return p;
	p.leaf = leaf_for(ix, name, len);
	const struct bf_index_leaf *l = ix->leaves[p.leaf];
	p.i = slot_for(l, name, len);
	if (!at && p.i < l->n && cmp(l->f[p.i], name, len) == 0)
		p.i++;
	return p;
}

struct bf_filter *bf_index_next(const struct bf_index *ix, struct bf_index_pos *p)
{
	while (p->leaf < ix->nleaves) {
		const struct bf_index_leaf *l = ix->leaves[p->leaf];

		if (p->i < l->n)
			return l->f[p->i++];
		p->leaf++;
		p->i = 0;
	}
	return NULL;
}
