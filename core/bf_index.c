/* SPDX-License-Identifier: MIT */
/* The filters in name order, as two levels of sorted arrays; see bf_index.h. */
#include "core/bf_index.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct bf_index_leaf {
	unsigned n;
	struct bf_filter *f[BF_INDEX_LEAF];
};

/* A batched insert: f, and its name's first 8 bytes big-endian, zero-padded (no name holds a
 * zero byte, so a name that is a prefix of another sorts first, as cmp() has it). */
struct bf_index_item {
	uint64_t key;
	struct bf_filter *f;
};

/* A removal while deferring: f, and how many inserts were batched before it. */
struct bf_index_gone {
	const struct bf_filter *f;
	size_t before;
};

/* A leaf with fewer filters than this is merged into a neighbour that has room. */
#define LEAF_LOW (BF_INDEX_LEAF / 4)

/* f's name against name[0, len): < 0, 0, > 0. */
static int cmp(const struct bf_filter *f, const char *name, size_t len)
{
	size_t n = f->name_len < len ? f->name_len : len;
	int c = memcmp(bf_filter_name(f), name, n);

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

/* Room in the batch for one more filter. 0 or -ENOMEM. */
static int batch_room(struct bf_index *ix)
{
	if (ix->nbatch == ix->batch_cap) {
		size_t cap = ix->batch_cap ? ix->batch_cap * 2 : 1024;
		struct bf_index_item *p = realloc(ix->batch, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ix->batch = p;
		ix->batch_cap = cap;
	}
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
	return ix->deferring ? batch_room(ix) : 0;
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
	free(ix->batch);
	free(ix->gone);
	memset(ix, 0, sizeof(*ix));
}

static uint64_t name_key(const char *name, size_t len)
{
	uint64_t k = 0;

	for (size_t i = 0; i < 8; i++)
		k = k << 8 | (i < len ? (unsigned char)name[i] : 0);
	return k;
}

/* Append f to the batch. 0 or -ENOMEM. */
static int batch_put(struct bf_index *ix, struct bf_filter *f)
{
	if (batch_room(ix))
		return -ENOMEM;
	ix->batch[ix->nbatch++] =
	    (struct bf_index_item){name_key(bf_filter_name(f), f->name_len), f};
	ix->count++;
	return 0;
}

int bf_index_insert(struct bf_index *ix, struct bf_filter *f)
{
	struct bf_index_leaf *l, *nl;
	size_t k;
	unsigned i;

	if (ix->deferring)
		return batch_put(ix, f);
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
	k = leaf_for(ix, bf_filter_name(f), f->name_len);
	l = ix->leaves[k];
	i = slot_for(l, bf_filter_name(f), f->name_len);
	if (i < l->n && cmp(l->f[i], bf_filter_name(f), f->name_len) == 0)
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

/*
 * Note the removal of f, a batched filter. A filter's memory may be reused by one batched later:
 * an item of the batch is removed if a removal of its pointer came after it. Without memory for
 * the note, the item is found and cleared at once (the last one with that pointer: earlier ones
 * were removed before it was inserted). 0 or -ENOENT.
 */
static int batch_remove(struct bf_index *ix, const struct bf_filter *f)
{
	if (ix->ngone == ix->gone_cap) {
		size_t cap = ix->gone_cap ? ix->gone_cap * 2 : 64;
		struct bf_index_gone *p = realloc(ix->gone, cap * sizeof(*p));

		if (p) {
			ix->gone = p;
			ix->gone_cap = cap;
		}
	}
	if (ix->ngone < ix->gone_cap) {
		ix->gone[ix->ngone++] = (struct bf_index_gone){f, ix->nbatch};
		ix->count--;
		return 0;
	}
	for (size_t i = ix->nbatch; i-- > 0;) {
		if (ix->batch[i].f == f) {
			ix->batch[i].f = NULL;
			ix->count--;
			return 0;
		}
	}
	return -ENOENT;
}

int bf_index_remove(struct bf_index *ix, const struct bf_filter *f)
{
	struct bf_index_leaf *l;
	size_t k;
	unsigned i;

	if (!ix->nleaves)
		return ix->deferring ? batch_remove(ix, f) : -ENOENT;
	k = leaf_for(ix, bf_filter_name(f), f->name_len);
	l = ix->leaves[k];
	i = slot_for(l, bf_filter_name(f), f->name_len);
	if (i >= l->n || l->f[i] != f)
		return ix->deferring ? batch_remove(ix, f) : -ENOENT;
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

void bf_index_defer(struct bf_index *ix)
{
	ix->deferring = true;
}

static int gone_cmp(const void *a, const void *b)
{
	const struct bf_index_gone *x = a, *y = b;
	uintptr_t px = (uintptr_t)x->f, py = (uintptr_t)y->f;

	if (px != py)
		return px < py ? -1 : 1;
	return (x->before > y->before) - (x->before < y->before);
}

/* Drop from b[0, n) the items removed while deferring; the number left. */
static size_t batch_prune(struct bf_index *ix, struct bf_index_item *b, size_t n)
{
	size_t k = 0;

	if (ix->ngone)
		qsort(ix->gone, ix->ngone, sizeof(*ix->gone), gone_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!b[i].f)
			continue;
		if (ix->ngone) {
			/* The last removal of this pointer. */
			size_t lo = 0, hi = ix->ngone;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if ((uintptr_t)ix->gone[mid].f <= (uintptr_t)b[i].f)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo && ix->gone[lo - 1].f == b[i].f && ix->gone[lo - 1].before > i)
				continue;
		}
		b[k++] = b[i];
	}
	return k;
}

/* Sort a[0, n) by key (LSD radix, a byte at a time, skipping bytes all keys share), using
 * tmp[0, n); returns whichever of the two holds the result. */
static struct bf_index_item *radix_sort(struct bf_index_item *a, struct bf_index_item *tmp,
					size_t n)
{
	size_t cnt[8][256] = {{0}};

	for (size_t i = 0; i < n; i++)
		for (unsigned d = 0; d < 8; d++)
			cnt[d][(a[i].key >> (8 * d)) & 255]++;
	for (unsigned d = 0; d < 8; d++) {
		size_t sum = 0;

		if (cnt[d][(a[0].key >> (8 * d)) & 255] == n)
			continue;
		for (unsigned v = 0; v < 256; v++) {
			size_t c = cnt[d][v];

			cnt[d][v] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[cnt[d][(a[i].key >> (8 * d)) & 255]++] = a[i];
		struct bf_index_item *t = a;
		a = tmp;
		tmp = t;
	}
	return a;
}

static int item_cmp(const void *a, const void *b)
{
	const struct bf_index_item *x = a, *y = b;

	return cmp(x->f, bf_filter_name(y->f), y->f->name_len);
}

int bf_index_flush(struct bf_index *ix)
{
	struct bf_index_item *b = ix->batch, *s = b, *tmp = NULL;
	size_t n, k = 0, done = 0;
	int rc = 0;

	ix->deferring = false;
	n = batch_prune(ix, b, ix->nbatch);
	ix->count -= n; /* counted again as they go in */
	if (n && !ix->nleaves && (tmp = malloc(n * sizeof(*tmp)))) {
		s = radix_sort(b, tmp, n);
		/* Names that share their first 8 bytes, in order of the whole name; of filters
		 * that share a name, one is kept. */
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && s[j].key == s[i].key; j++)
				;
			if (j - i > 1)
				qsort(s + i, j - i, sizeof(*s), item_cmp);
			for (size_t m = i; m < j; m++) {
				if (m > i && !item_cmp(&s[m - 1], &s[m]))
					rc = -EEXIST;
				else
					s[k++] = s[m];
			}
		}
		n = k;
		/* Whole leaves, as long as memory lasts. */
		size_t want = (n + BF_INDEX_LEAF - 1) / BF_INDEX_LEAF;
		struct bf_index_leaf **leaves = realloc(ix->leaves, want * sizeof(*leaves));

		if (leaves) {
			ix->leaves = leaves;
			ix->cap = want;
		}
		while (leaves && done < n) {
			struct bf_index_leaf *l = malloc(sizeof(*l));

			if (!l)
				break;
			l->n = n - done < BF_INDEX_LEAF ? (unsigned)(n - done) : BF_INDEX_LEAF;
			for (unsigned m = 0; m < l->n; m++)
				l->f[m] = s[done + m].f;
			ix->leaves[ix->nleaves++] = l;
			ix->count += l->n;
			done += l->n;
		}
	}
	/* Into an index that had filters already, or without the memory to sort: one by one. */
	for (; done < n; done++) {
		int r = bf_index_insert(ix, s[done].f);

		if (r == -ENOMEM) {
			rc = r;
			break;
		}
		if (r)
			rc = r;
	}
	free(tmp);
	free(b);
	free(ix->gone);
	ix->batch = NULL;
	ix->gone = NULL;
	ix->nbatch = ix->batch_cap = ix->ngone = ix->gone_cap = 0;
	return rc;
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
