/* SPDX-License-Identifier: MIT */
/*
 * fsrec: an LD_PRELOAD library that records what a process does to the files under one
 * directory, for the power-cut test (test_powercut.c, which reads the trace back). Set
 * FSREC_DIR (an absolute directory; only paths under it are recorded) and FSREC_OUT (the
 * trace file). Each call is passed on to libc; when it succeeds, one record is appended to
 * the trace with one write(2), under a lock, before the call returns to the caller. So a
 * client that sees the trace file's size after a reply knows every call that reply waited for
 * lies within it.
 *
 * Built with _FILE_OFFSET_BITS=64 as the daemon is, so the calls it makes are the *64 ones
 * (open64, pwrite64, ...): those are the ones replaced here.
 *
 * Record: struct fsrec_hdr, then path (plen bytes), path2 (plen2), data (dlen). An fsync or
 * fdatasync record's cover is the number of records written before the call began: the
 * writes it makes durable are those among them (a write recorded while it ran may have come
 * too late for it).
 */
#include "tests/integration/fsrec.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define FSREC_FDS 4096

struct fd_ent {
	bool used, dir;
	uint64_t ino;
	char path[PATH_MAX];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fd_ent fds[FSREC_FDS];
static int out_fd = -1;
static uint64_t nrec;
static char prefix[PATH_MAX];
static size_t prefix_len;
static bool inited;

#define REAL(ret, name, ...)                                                                       \
	static ret (*real_##name)(__VA_ARGS__);                                                    \
	if (!real_##name)                                                                          \
	*(void **)&real_##name = dlsym(RTLD_NEXT, #name)

static int (*libc_open)(const char *, int, ...);

static void init_locked(void)
{
	if (inited)
		return;
	inited = true;
	const char *d = getenv("FSREC_DIR"), *o = getenv("FSREC_OUT");
	if (!d || !o)
		return;
	snprintf(prefix, sizeof(prefix), "%s", d);
	prefix_len = strlen(prefix);
	*(void **)&libc_open = dlsym(RTLD_NEXT, "open64");
	out_fd = libc_open(o, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static bool under(const char *path)
{
	return out_fd >= 0 && !strncmp(path, prefix, prefix_len) &&
	       (path[prefix_len] == '\0' || path[prefix_len] == '/');
}

/* Resolve (dirfd, name) to an absolute path; false if it cannot be (not ours). */
static bool resolve(int dirfd, const char *name, char *out)
{
	if (name[0] == '/') {
		snprintf(out, PATH_MAX, "%s", name);
		return true;
	}
	if (dirfd >= 0 && dirfd < FSREC_FDS && fds[dirfd].used) {
		snprintf(out, PATH_MAX, "%s/%s", fds[dirfd].path, name);
		return true;
	}
	return false;
}

static void put(const struct fsrec_hdr *h, const char *p1, const char *p2, const void *data)
{
	size_t n = sizeof(*h) + h->plen + h->plen2 + h->dlen;
	char *b = malloc(n);
	if (!b)
		abort();
	memcpy(b, h, sizeof(*h));
	memcpy(b + sizeof(*h), p1, h->plen);
	memcpy(b + sizeof(*h) + h->plen, p2, h->plen2);
	if (h->dlen)
		memcpy(b + sizeof(*h) + h->plen + h->plen2, data, h->dlen);
	REAL(ssize_t, write, int, const void *, size_t);
	for (size_t off = 0; off < n;) {
		ssize_t w = real_write(out_fd, b + off, n - off);
		if (w <= 0)
			abort();
		off += (size_t)w;
	}
	free(b);
	nrec++;
}

static void rec(uint32_t op, uint64_t ino, uint64_t off, uint64_t len, uint64_t cover,
		const char *p1, const char *p2, const void *data, uint64_t dlen)
{
	struct fsrec_hdr h = {
	    .magic = FSREC_MAGIC,
	    .op = op,
	    .ino = ino,
	    .off = off,
	    .len = len,
	    .cover = cover,
	    .plen = p1 ? (uint32_t)strlen(p1) : 0,
	    .plen2 = p2 ? (uint32_t)strlen(p2) : 0,
	    .dlen = dlen,
	};
	put(&h, p1 ? p1 : "", p2 ? p2 : "", data);
}

/* A new fd on path: remember it, and record the create / truncate it did. */
static void opened(int fd, const char *path, int flags, bool existed)
{
	struct stat st;
	if (fd < 0 || fd >= FSREC_FDS || fstat(fd, &st) != 0)
		return;
	struct fd_ent *e = &fds[fd];
	e->used = true;
	e->dir = S_ISDIR(st.st_mode);
	e->ino = (uint64_t)st.st_ino;
	snprintf(e->path, sizeof(e->path), "%s", path);
	if (!existed && (flags & O_CREAT))
		rec(FSREC_CREATE, e->ino, 0, 0, 0, path, NULL, NULL, 0);
	else if ((flags & O_TRUNC) && !e->dir)
		rec(FSREC_TRUNC, e->ino, 0, 0, 0, NULL, NULL, NULL, 0);
}

static int do_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	REAL(int, openat64, int, const char *, int, ...);
	char path[PATH_MAX];
	pthread_mutex_lock(&mu);
	init_locked();
	bool ours = resolve(dirfd, name, path) && under(path);
	bool existed = ours && access(path, F_OK) == 0;
	int fd = real_openat64(dirfd, name, flags, mode);
	if (ours && fd >= 0)
		opened(fd, path, flags, existed);
	pthread_mutex_unlock(&mu);
	return fd;
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	return do_openat(AT_FDCWD, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	return do_openat(dirfd, path, flags, mode);
}

int close(int fd)
{
	REAL(int, close, int);
	pthread_mutex_lock(&mu);
	if (fd >= 0 && fd < FSREC_FDS)
		fds[fd].used = false;
	int r = real_close(fd);
	pthread_mutex_unlock(&mu);
	return r;
}

int dup(int fd)
{
	REAL(int, dup, int);
	pthread_mutex_lock(&mu);
	int r = real_dup(fd);
	if (r >= 0 && r < FSREC_FDS && fd >= 0 && fd < FSREC_FDS)
		fds[r] = fds[fd];
	pthread_mutex_unlock(&mu);
	return r;
}

static struct fd_ent *tracked(int fd)
{
	return fd >= 0 && fd < FSREC_FDS && fds[fd].used && out_fd >= 0 ? &fds[fd] : NULL;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
	pthread_mutex_lock(&mu);
	ssize_t r = real_pwrite64(fd, buf, n, off);
	struct fd_ent *e = tracked(fd);
	if (e && r > 0)
		rec(FSREC_WRITE, e->ino, (uint64_t)off, (uint64_t)r, 0, NULL, NULL, buf,
		    (uint64_t)r);
	pthread_mutex_unlock(&mu);
	return r;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t);
	pthread_mutex_lock(&mu);
	ssize_t r = real_pwritev64(fd, iov, cnt, off);
	struct fd_ent *e = tracked(fd);
	if (e && r > 0) {
		char *b = malloc((size_t)r);
		size_t got = 0;
		for (int i = 0; i < cnt && got < (size_t)r; i++) {
			size_t k =
			    iov[i].iov_len < (size_t)r - got ? iov[i].iov_len : (size_t)r - got;
			memcpy(b + got, iov[i].iov_base, k);
			got += k;
		}
		rec(FSREC_WRITE, e->ino, (uint64_t)off, (uint64_t)r, 0, NULL, NULL, b, (uint64_t)r);
		free(b);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(ssize_t, write, int, const void *, size_t);
	if (!tracked(fd))
		return real_write(fd, buf, n);
	pthread_mutex_lock(&mu);
	off_t off = lseek(fd, 0, SEEK_CUR);
	ssize_t r = real_write(fd, buf, n);
	struct fd_ent *e = tracked(fd);
	if (e && r > 0 && off >= 0)
		rec(FSREC_WRITE, e->ino, (uint64_t)off, (uint64_t)r, 0, NULL, NULL, buf,
		    (uint64_t)r);
	pthread_mutex_unlock(&mu);
	return r;
}

int ftruncate64(int fd, off_t len)
{
	REAL(int, ftruncate64, int, off_t);
	pthread_mutex_lock(&mu);
	int r = real_ftruncate64(fd, len);
	struct fd_ent *e = tracked(fd);
	if (e && r == 0)
		rec(FSREC_TRUNC, e->ino, 0, (uint64_t)len, 0, NULL, NULL, NULL, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

int posix_fallocate64(int fd, off_t off, off_t len)
{
	REAL(int, posix_fallocate64, int, off_t, off_t);
	pthread_mutex_lock(&mu);
	int r = real_posix_fallocate64(fd, off, len);
	struct fd_ent *e = tracked(fd);
	if (e && r == 0)
		rec(FSREC_FALLOC, e->ino, (uint64_t)off, (uint64_t)len, 0, NULL, NULL, NULL, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

/* fsync and fdatasync: the lock is not held during the call (the loop goes on writing). */
static int do_sync(int fd, bool data_only)
{
	REAL(int, fsync, int);
	REAL(int, fdatasync, int);
	pthread_mutex_lock(&mu);
	struct fd_ent *e = tracked(fd);
	struct fd_ent copy;
	if (e)
		copy = *e;
	uint64_t cover = nrec;
	pthread_mutex_unlock(&mu);
	int r = data_only ? real_fdatasync(fd) : real_fsync(fd);
	if (e && r == 0) {
		pthread_mutex_lock(&mu);
		if (copy.dir)
			rec(FSREC_SYNCDIR, copy.ino, 0, 0, cover, copy.path, NULL, NULL, 0);
		else
			rec(FSREC_SYNC, copy.ino, 0, 0, cover, NULL, NULL, NULL, 0);
		pthread_mutex_unlock(&mu);
	}
	return r;
}

int fsync(int fd)
{
	return do_sync(fd, false);
}

int fdatasync(int fd)
{
	return do_sync(fd, true);
}

int renameat(int ofd, const char *oname, int nfd, const char *nname)
{
	REAL(int, renameat, int, const char *, int, const char *);
	char a[PATH_MAX], b[PATH_MAX];
	pthread_mutex_lock(&mu);
	init_locked();
	bool ours = resolve(ofd, oname, a) && resolve(nfd, nname, b) && under(a) && under(b);
	int r = real_renameat(ofd, oname, nfd, nname);
	if (ours && r == 0)
		rec(FSREC_RENAME, 0, 0, 0, 0, a, b, NULL, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

int rename(const char *a, const char *b)
{
	return renameat(AT_FDCWD, a, AT_FDCWD, b);
}

int unlinkat(int dfd, const char *name, int flags)
{
	REAL(int, unlinkat, int, const char *, int);
	char a[PATH_MAX];
	pthread_mutex_lock(&mu);
	init_locked();
	bool ours = resolve(dfd, name, a) && under(a);
	int r = real_unlinkat(dfd, name, flags);
	if (ours && r == 0)
		rec(FSREC_UNLINK, 0, 0, 0, 0, a, NULL, NULL, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

int unlink(const char *name)
{
	return unlinkat(AT_FDCWD, name, 0);
}

int mkdir(const char *path, mode_t mode)
{
	REAL(int, mkdir, const char *, mode_t);
	pthread_mutex_lock(&mu);
	init_locked();
	int r = real_mkdir(path, mode);
	if (r == 0 && path[0] == '/' && under(path))
		rec(FSREC_MKDIR, 0, 0, 0, 0, path, NULL, NULL, 0);
	pthread_mutex_unlock(&mu);
	return r;
}
