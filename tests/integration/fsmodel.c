/* SPDX-License-Identifier: MIT */
/* A data directory's disk for crashsim's power cuts: see fsmodel.h. */
#include "tests/integration/fsmodel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/fsrec.h"

struct mfile {
	uint8_t *b;
	size_t len;
};

struct ment {
	char *path; /* absolute; NULL once gone */
	int file;
};

struct base_file {
	char *path;
	uint64_t ino;
	uint8_t *b;
	size_t len;
};

struct fsmodel {
	char *dir, *trace;
	struct base_file *files;
	size_t nfiles;
	char **dirs; /* absolute, below dir */
	size_t ndirs;
	uint64_t *starts; /* trace offsets where each daemon since the sync point began */
	size_t nstarts;
	uint64_t whole; /* the trace's records are whole up to here */
};

struct op {
	struct fsrec_hdr h;
	const char *path, *path2; /* NUL-terminated copies */
	const uint8_t *data;
	int file;	/* model file of a data op or sync (-1: none) */
	uint64_t cover; /* a sync's cover, counted from the trace's first record */
	bool keep;
};

struct fsmodel *fsmodel_new(const char *dir, const char *trace)
{
	struct fsmodel *m = calloc(1, sizeof(*m));

	if (!m || !(m->dir = strdup(dir)) || !(m->trace = strdup(trace))) {
		fsmodel_free(m);
		return NULL;
	}
	return m;
}

static void base_clear(struct fsmodel *m)
{
	for (size_t i = 0; i < m->nfiles; i++) {
		free(m->files[i].path);
		free(m->files[i].b);
	}
	for (size_t i = 0; i < m->ndirs; i++)
		free(m->dirs[i]);
	free(m->files);
	free(m->dirs);
	m->files = NULL;
	m->dirs = NULL;
	m->nfiles = m->ndirs = 0;
}

void fsmodel_free(struct fsmodel *m)
{
	if (!m)
		return;
	base_clear(m);
	free(m->starts);
	free(m->dir);
	free(m->trace);
	free(m);
}

static int read_all(int fd, uint8_t **out, size_t *len)
{
	struct stat st;
	uint8_t *b;

	if (fstat(fd, &st))
		return -errno;
	b = malloc((size_t)st.st_size + 1);
	if (!b)
		return -ENOMEM;
	for (size_t off = 0; off < (size_t)st.st_size;) {
		ssize_t r = pread(fd, b + off, (size_t)st.st_size - off, (off_t)off);

		if (r <= 0) {
			free(b);
			return r < 0 ? -errno : -EIO;
		}
		off += (size_t)r;
	}
	*out = b;
	*len = (size_t)st.st_size;
	return 0;
}

static int base_add_dir(struct fsmodel *m, const char *p)
{
	char **v = realloc(m->dirs, (m->ndirs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	m->dirs = v;
	if (!(v[m->ndirs] = strdup(p)))
		return -ENOMEM;
	m->ndirs++;
	return 0;
}

/* fsync the file at p and take its bytes into the base. */
static int base_add_file(struct fsmodel *m, const char *p, uint64_t ino)
{
	struct base_file *v = realloc(m->files, (m->nfiles + 1) * sizeof(*v)), *f;
	int fd, rc;

	if (!v)
		return -ENOMEM;
	m->files = v;
	f = &v[m->nfiles];
	*f = (struct base_file){.ino = ino, .path = strdup(p)};
	if (!f->path)
		return -ENOMEM;
	fd = open(p, O_RDONLY);
	if (fd < 0) {
		free(f->path);
		return -errno;
	}
	rc = fsync(fd) ? -errno : read_all(fd, &f->b, &f->len);
	close(fd);
	if (rc) {
		free(f->path);
		return rc;
	}
	m->nfiles++;
	return 0;
}

/* Call visit on every entry under path (lstat'ed), parents before their children; stops at the
 * first non-zero return. */
static int walk_tree(const char *path,
		     int (*visit)(void *arg, const char *p, const struct stat *st), void *arg)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -errno;
	while (!rc && (e = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (lstat(p, &st))
			rc = -errno;
		else if (!(rc = visit(arg, p, &st)) && S_ISDIR(st.st_mode))
			rc = walk_tree(p, visit, arg);
	}
	closedir(d);
	return rc;
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), rc;

	if (fd < 0)
		return -errno;
	rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

static int sync_visit(void *arg, const char *p, const struct stat *st)
{
	struct fsmodel *m = arg;
	int rc = 0;

	if (S_ISDIR(st->st_mode) && !(rc = base_add_dir(m, p)))
		rc = fsync_dir(p);
	else if (S_ISREG(st->st_mode))
		rc = base_add_file(m, p, (uint64_t)st->st_ino);
	return rc;
}

/* fsync every file and directory under path into the base (path itself is not listed). */
static int sync_tree(struct fsmodel *m, const char *path)
{
	int rc = walk_tree(path, sync_visit, m);

	return rc ? rc : fsync_dir(path);
}

int fsmodel_sync_point(struct fsmodel *m)
{
	int fd;

	base_clear(m);
	m->nstarts = 0;
	m->whole = 0;
	fd = open(m->trace, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	return sync_tree(m, m->dir);
}

uint64_t fsmodel_trace_bytes(const struct fsmodel *m)
{
	struct stat st;

	return stat(m->trace, &st) ? 0 : (uint64_t)st.st_size;
}

/*
 * A kill can cut fsrec's last record short (a write is cut at a fatal signal): the trace ends
 * at the last whole record, so the next daemon's records follow it. (The call itself was made:
 * fsmodel_daemon_start() finds the disk then differs from the trace.)
 */
static int trace_trim(struct fsmodel *m)
{
	int fd = open(m->trace, O_RDWR), rc = 0;
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		rc = -errno;
	while (!rc && m->whole < (uint64_t)st.st_size) {
		struct fsrec_hdr h;
		uint64_t len;

		if ((uint64_t)st.st_size - m->whole < sizeof(h) ||
		    pread(fd, &h, sizeof(h), (off_t)m->whole) != (ssize_t)sizeof(h) ||
		    h.magic != FSREC_MAGIC)
			break;
		len = sizeof(h) + h.plen + h.plen2 + h.dlen;
		if ((uint64_t)st.st_size - m->whole < len)
			break;
		m->whole += len;
	}
	if (!rc && m->whole < (uint64_t)st.st_size && ftruncate(fd, (off_t)m->whole))
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- a cut ---- */

struct cut {
	struct op *ops;
	size_t nops;
	int nfiles; /* model files: the base's, then one per create */
	uint8_t *trace;
};

static char *dup_n(const uint8_t *p, uint32_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* The model file whose inode is ino now, or -1. */
static int file_of(const uint64_t *inos, int nfiles, uint64_t ino)
{
	for (int f = nfiles - 1; f >= 0; f--)
		if (inos[f] == ino)
			return f;
	return -1;
}

/* Parse the trace into c->ops, each data op and sync tied to its model file. */
static int cut_parse(struct fsmodel *m, struct cut *c, char *why, size_t whylen)
{
	int fd = open(m->trace, O_RDONLY), rc;
	size_t size, cap = 0, icap = m->nfiles + 64, run = 0, run_first = 0;
	uint64_t *inos; /* model file -> its inode now (0: none) */

	if (fd < 0)
		return -errno;
	rc = read_all(fd, &c->trace, &size);
	close(fd);
	if (rc)
		return rc;
	inos = calloc(icap, sizeof(*inos));
	if (!inos)
		return -ENOMEM;
	for (size_t f = 0; f < m->nfiles; f++)
		inos[f] = m->files[f].ino;
	c->nfiles = (int)m->nfiles;
	for (size_t off = 0; off < size;) {
		struct op o = {.file = -1};
		const uint8_t *p = c->trace + off + sizeof(o.h);

		while (run < m->nstarts && m->starts[run] <= off)
			run++, run_first = c->nops;
		if (size - off >= sizeof(o.h))
			memcpy(&o.h, c->trace + off, sizeof(o.h));
		if (size - off < sizeof(o.h) || o.h.magic != FSREC_MAGIC ||
		    size - off - sizeof(o.h) < o.h.plen + o.h.plen2 + o.h.dlen) {
			snprintf(why, whylen, "bad trace record at %zu", off);
			rc = -EINVAL;
			break;
		}
		o.path = dup_n(p, o.h.plen);
		o.path2 = dup_n(p + o.h.plen, o.h.plen2);
		o.data = p + o.h.plen + o.h.plen2;
		o.cover = run_first + o.h.cover;
		off += sizeof(o.h) + o.h.plen + o.h.plen2 + o.h.dlen;
		if (o.h.op == FSREC_CREATE) {
			int old = file_of(inos, c->nfiles, o.h.ino);

			if (old >= 0)
				inos[old] = 0; /* the number reused: that file is gone */
			if ((size_t)c->nfiles == icap) {
				uint64_t *v = realloc(inos, (icap *= 2) * sizeof(*v));

				if (!v) {
					rc = -ENOMEM;
					break;
				}
				inos = v;
			}
			o.file = c->nfiles++;
			inos[o.file] = o.h.ino;
		} else if (o.h.op == FSREC_TRUNC || o.h.op == FSREC_WRITE ||
			   o.h.op == FSREC_FALLOC || o.h.op == FSREC_SYNC) {
			o.file = file_of(inos, c->nfiles, o.h.ino);
		}
		if (c->nops == cap) {
			struct op *n = realloc(c->ops, (cap = cap ? 2 * cap : 1024) * sizeof(*n));

			if (!n) {
				free((char *)o.path);
				free((char *)o.path2);
				rc = -ENOMEM;
				break;
			}
			c->ops = n;
		}
		c->ops[c->nops++] = o;
		if (!o.path || !o.path2) {
			rc = -ENOMEM;
			break;
		}
	}
	free(inos);
	return rc;
}

static bool is_ns(const struct op *o)
{
	return o->h.op == FSREC_CREATE || o->h.op == FSREC_RENAME || o->h.op == FSREC_UNLINK ||
	       o->h.op == FSREC_MKDIR;
}

static bool is_data(const struct op *o)
{
	return o->h.op == FSREC_TRUNC || o->h.op == FSREC_WRITE || o->h.op == FSREC_FALLOC;
}

/* The length of path's directory part. */
static size_t dir_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) : 0;
}

/*
 * Mark which calls the cut keeps: the durable ones (a later sync of its file, or of its
 * directory, that began after it), and the first keep_permille thousandths of the others.
 * Walks back, keeping per file and per directory the highest cover of the syncs after.
 */
static int cut_choose(struct cut *c, unsigned keep_permille, size_t *nondur)
{
	uint64_t *fcover = calloc((size_t)c->nfiles + 1, sizeof(*fcover));
	const char *dirs[64];
	size_t dlens[64];
	uint64_t dcover[64];
	size_t ndirs = 0, n = 0, taken = 0;

	if (!fcover)
		return -ENOMEM;
	for (size_t k = c->nops; k-- > 0;) {
		struct op *o = &c->ops[k];
		size_t dl = o->h.op == FSREC_SYNCDIR ? strlen(o->path) : dir_len(o->path), d = 0;

		o->keep = true;
		if (o->h.op == FSREC_SYNC) {
			if (o->file >= 0 && o->cover > fcover[o->file])
				fcover[o->file] = o->cover;
			continue;
		}
		if (is_data(o)) {
			o->keep = o->file >= 0 && fcover[o->file] > k;
			n += !o->keep;
			continue;
		}
		if (!is_ns(o) && o->h.op != FSREC_SYNCDIR)
			continue;
		while (d < ndirs && (dlens[d] != dl || strncmp(dirs[d], o->path, dl)))
			d++;
		if (d == ndirs && ndirs < 64) {
			dirs[ndirs] = o->path;
			dlens[ndirs] = dl;
			dcover[ndirs++] = 0;
		}
		if (o->h.op == FSREC_SYNCDIR) {
			if (d < ndirs && o->cover > dcover[d])
				dcover[d] = o->cover;
			continue;
		}
		o->keep = d < ndirs && dcover[d] > k;
		n += !o->keep;
	}
	free(fcover);
	/* Of the calls not durable, the first ones in order. */
	for (size_t k = 0; k < c->nops; k++) {
		struct op *o = &c->ops[k];

		if (o->keep || !(is_ns(o) || is_data(o)))
			continue;
		o->keep = taken * 1000 < (uint64_t)keep_permille * n;
		taken++;
	}
	if (nondur)
		*nondur = n;
	return 0;
}

struct state {
	struct mfile *files;
	struct ment *ents;
	size_t nents, cap;
	const char **dirs;
	size_t ndirs;
};

static int ent_add(struct state *st, const char *path, int file)
{
	if (st->nents == st->cap) {
		struct ment *v =
		    realloc(st->ents, (st->cap = st->cap ? 2 * st->cap : 256) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		st->ents = v;
	}
	st->ents[st->nents++] = (struct ment){(char *)path, file};
	return 0;
}

static void ent_drop(struct state *st, const char *path)
{
	for (size_t e = 0; e < st->nents; e++)
		if (st->ents[e].path && !strcmp(st->ents[e].path, path))
			st->ents[e].path = NULL;
}

/* One kept data op on its file. */
static int apply_data(struct mfile *f, const struct op *o)
{
	uint64_t newlen = o->h.op == FSREC_TRUNC ? o->h.len : o->h.off + o->h.len;

	if (o->h.op == FSREC_TRUNC || newlen > f->len) {
		uint8_t *b = realloc(f->b, newlen ? newlen : 1);

		if (!b)
			return -ENOMEM;
		if (newlen > f->len)
			memset(b + f->len, 0, newlen - f->len);
		f->b = b;
		f->len = newlen;
	}
	if (o->h.op == FSREC_WRITE)
		memcpy(f->b + o->h.off, o->data, o->h.len);
	return 0;
}

/* The state the kept calls leave, from the base. */
static int cut_apply(struct fsmodel *m, struct cut *c, struct state *st)
{
	int rc = 0;

	st->files = calloc((size_t)c->nfiles + 1, sizeof(*st->files));
	st->dirs = calloc(m->ndirs + c->nops + 1, sizeof(*st->dirs));
	if (!st->files || !st->dirs)
		return -ENOMEM;
	for (size_t i = 0; i < m->nfiles && !rc; i++) {
		st->files[i].b = malloc(m->files[i].len + 1);
		if (!st->files[i].b)
			return -ENOMEM;
		memcpy(st->files[i].b, m->files[i].b, m->files[i].len);
		st->files[i].len = m->files[i].len;
		rc = ent_add(st, m->files[i].path, (int)i);
	}
	for (size_t i = 0; i < m->ndirs; i++)
		st->dirs[st->ndirs++] = m->dirs[i];
	for (size_t k = 0; k < c->nops && !rc; k++) {
		const struct op *o = &c->ops[k];

		if (!o->keep)
			continue;
		switch (o->h.op) {
		case FSREC_CREATE:
			ent_drop(st, o->path);
			rc = ent_add(st, o->path, o->file);
			break;
		case FSREC_RENAME:
			ent_drop(st, o->path2);
			for (size_t e = 0; e < st->nents; e++)
				if (st->ents[e].path && !strcmp(st->ents[e].path, o->path))
					st->ents[e].path = (char *)o->path2;
			break;
		case FSREC_UNLINK:
			ent_drop(st, o->path);
			break;
		case FSREC_MKDIR:
			st->dirs[st->ndirs++] = o->path;
			break;
		case FSREC_TRUNC:
		case FSREC_WRITE:
		case FSREC_FALLOC:
			if (o->file >= 0)
				rc = apply_data(&st->files[o->file], o);
			break;
		default:
			break;
		}
	}
	return rc;
}

static int cut_write(struct fsmodel *m, struct state *st, const char *out)
{
	size_t dl = strlen(m->dir);
	char p[PATH_MAX];

	if (mkdir(out, 0700))
		return -errno;
	/* Parents first: a directory's path is longer than its parent's. */
	for (size_t len = dl + 1; len < PATH_MAX; len++) {
		bool more = false;

		for (size_t i = 0; i < st->ndirs; i++) {
			size_t l = strlen(st->dirs[i]);

			more = more || l > len;
			if (l != len)
				continue;
			snprintf(p, sizeof(p), "%s%s", out, st->dirs[i] + dl);
			if (mkdir(p, 0700) && errno != EEXIST)
				return -errno;
		}
		if (!more)
			break;
	}
	for (size_t e = 0; e < st->nents; e++) {
		const struct ment *n = &st->ents[e];
		int fd;

		if (!n->path || strncmp(n->path, m->dir, dl))
			continue;
		snprintf(p, sizeof(p), "%s%s", out, n->path + dl);
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 && errno == ENOENT)
			continue; /* its directory's mkdir was lost: so is it */
		if (fd < 0)
			return -errno;
		for (size_t off = 0; off < st->files[n->file].len;) {
			ssize_t w =
			    write(fd, st->files[n->file].b + off, st->files[n->file].len - off);

			if (w <= 0) {
				close(fd);
				return -EIO;
			}
			off += (size_t)w;
		}
		close(fd);
	}
	return 0;
}

static void cut_free(struct cut *c, struct state *st)
{
	for (int i = 0; st->files && i < c->nfiles; i++)
		free(st->files[i].b);
	free(st->files);
	free(st->ents);
	free(st->dirs);
	for (size_t k = 0; k < c->nops; k++) {
		free((char *)c->ops[k].path);
		free((char *)c->ops[k].path2);
	}
	free(c->ops);
	free(c->trace);
}

/* The state of the cut that keeps keep_permille thousandths of the calls not durable. */
static int cut_state(struct fsmodel *m, unsigned keep_permille, struct cut *c, struct state *st,
		     size_t *nondurable, char *why, size_t whylen)
{
	int rc;

	snprintf(why, whylen, "out of memory or a file error");
	rc = trace_trim(m);
	if (!rc)
		rc = cut_parse(m, c, why, whylen);
	if (!rc)
		rc = cut_choose(c, keep_permille, nondurable);
	if (!rc)
		rc = cut_apply(m, c, st);
	return rc;
}

int fsmodel_cut(struct fsmodel *m, unsigned keep_permille, const char *out, size_t *nondurable,
		char *why, size_t whylen)
{
	struct cut c = {0};
	struct state st = {0};
	int rc = cut_state(m, keep_permille, &c, &st, nondurable, why, whylen);

	if (!rc)
		rc = cut_write(m, &st, out);
	cut_free(&c, &st);
	return rc;
}

static int count_visit(void *arg, const char *p, const struct stat *st)
{
	(void)p;
	*(size_t *)arg += S_ISREG(st->st_mode);
	return 0;
}

/* Whether the files under m->dir are those of st, byte for byte, and no others; if not, what
 * differs in diff. */
static int state_on_disk(struct fsmodel *m, const struct state *st, bool *same, char *diff,
			 size_t difflen)
{
	size_t dl = strlen(m->dir), want = 0, have = 0;
	int rc = walk_tree(m->dir, count_visit, &have);

	*same = true;
	snprintf(diff, difflen, "the number of files");
	for (size_t e = 0; !rc && *same && e < st->nents; e++) {
		const struct ment *n = &st->ents[e];
		const struct mfile *f;
		uint8_t *b = NULL;
		size_t len = 0;
		int fd;

		if (!n->path || strncmp(n->path, m->dir, dl))
			continue;
		want++;
		f = &st->files[n->file];
		snprintf(diff, difflen, "%s", n->path + dl);
		fd = open(n->path, O_RDONLY);
		if (fd < 0) {
			*same = false;
			break;
		}
		rc = read_all(fd, &b, &len);
		close(fd);
		*same = !rc && len == f->len && (!len || !memcmp(b, f->b, len));
		free(b);
	}
	if (!rc && *same)
		*same = want == have;
	return rc;
}

int fsmodel_daemon_start(struct fsmodel *m, char *resynced, size_t len)
{
	uint64_t *v = realloc(m->starts, (m->nstarts + 1) * sizeof(*v));
	bool same = true;
	int rc = 0;

	resynced[0] = '\0';
	if (!v)
		return -ENOMEM;
	m->starts = v;
	if (m->nstarts) {
		struct cut c = {0};
		struct state st = {0};
		char why[128];

		rc = cut_state(m, 1000, &c, &st, NULL, why, sizeof(why));
		if (!rc)
			rc = state_on_disk(m, &st, &same, resynced, len);
		cut_free(&c, &st);
	} else {
		rc = trace_trim(m);
	}
	if (same)
		resynced[0] = '\0';
	else if (!rc)
		rc = fsmodel_sync_point(m);
	if (rc)
		return rc;
	m->starts[m->nstarts++] = fsmodel_trace_bytes(m);
	return 0;
}
