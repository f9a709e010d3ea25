/* SPDX-License-Identifier: MIT */
/*
 * The write-ahead log itself (see wal.h): records and the append buffer, writes to the current
 * segment and its preallocation, the segment files and the record of where the log starts,
 * releases, open and close. The sync thread and what the loop makes of its answers are in
 * wal_sync.c, the replay in wal_replay.c; wal_impl.h is what the three share.
 */
#include "server/wal_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

/* Preallocation stops while the file system has less than this many times it free. */
#define WAL_PREALLOC_FREE 16
/* Zeros written by one flush at most: the page cache of a file grows in folios as large as
 * the write (up to 2 MiB), and 4 MiB at once held the loop for 8 ms where a fresh page costs
 * a fault of the hypervisor. A burst that outruns them extends the file with its records. */
#define WAL_PREALLOC_STEP (256u << 10)

/*
 * Released segments being deleted on the threadpool: unlink(2) of a segment's file held the
 * loop for up to 18 ms, as the file system frees its blocks. The work owns a dup of the
 * directory's fd, so wal_close() may close the log's; it holds a reference on the wal, so the
 * entries it updates when it ends are still there.
 */
struct wal_unlink {
	uv_work_t req;
	struct wal *w;
	int dirfd;
	uint64_t keep; /* the first LSN of the first segment kept: the log's start from now on */
	size_t n;
	struct {
		uint64_t first;
		int err; /* 0 (gone, or was already) or the unlink's -errno */
	} seg[];
};

void wal_segment_name(uint64_t lsn, char out[WAL_SEGMENT_NAME_MAX])
{
	snprintf(out, WAL_SEGMENT_NAME_MAX, "%016" PRIx64 ".wal", lsn);
}

/* "0123456789abcdef.wal" -> 0 and *lsn; anything else -> -1. */
static int parse_segment_name(const char *name, uint64_t *lsn)
{
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return -1;
		v = v << 4 | d;
	}
	if (strcmp(name + 16, ".wal") != 0 || v == 0)
		return -1;
	*lsn = v;
	return 0;
}

/* Room for one more segment entry. */
int wal_seg_reserve(struct wal *w)
{
	if (w->nsegs == w->segcap) {
		size_t ncap = w->segcap ? w->segcap * 2 : 16;
		struct wal_seg *n = realloc(w->segs, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		w->segs = n;
		w->segcap = ncap;
	}
	return 0;
}

int wal_seg_push(struct wal *w, uint64_t first, uint64_t bytes)
{
	int err = wal_seg_reserve(w);
	if (err)
		return err;
	w->segs[w->nsegs++] = (struct wal_seg){first, bytes, false};
	return 0;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct wal_seg *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

static ssize_t real_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

static int real_fdatasync(int fd)
{
	return fdatasync(fd);
}

/* Create (or empty) the segment whose first record is lsn, and make its name durable. */
int wal_create_segment(int dirfd, uint64_t lsn, int *fdp)
{
	char name[WAL_SEGMENT_NAME_MAX];
	wal_segment_name(lsn, name);
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fsync(dirfd) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	*fdp = fd;
	return 0;
}

/*
 * Keep the segment's file zero-filled at least prealloc / 2 beyond its last record (but not
 * beyond segment_bytes): zeros up to the next multiple of prealloc past that, at most
 * WAL_PREALLOC_STEP bytes a flush, while the file system has WAL_PREALLOC_FREE times that free.
 * Best effort: a failed write only means slower fdatasyncs (a disk that is full fails the
 * next record).
 */
static void prealloc(struct wal *w)
{
	static const uint8_t zeros[64 * 1024];
	struct iovec iov[64];
	uint64_t want = w->seg_size + w->prealloc / 2;

	struct statvfs sv;

	if (!w->prealloc || w->seg_alloc >= want || w->seg_alloc >= w->segment_bytes)
		return;
	/* Never the last of the disk: snapshots need it more. */
	if (fstatvfs(w->fd, &sv) != 0 ||
	    (uint64_t)sv.f_bavail * sv.f_frsize < WAL_PREALLOC_FREE * w->prealloc)
		return;
	want = (want / w->prealloc + 1) * w->prealloc;
	if (want > w->segment_bytes)
		want = w->segment_bytes;
	if (want > w->seg_alloc + WAL_PREALLOC_STEP)
		want = w->seg_alloc + WAL_PREALLOC_STEP;
	while (w->seg_alloc < want) {
		uint64_t left = want - w->seg_alloc;
		int n = 0;
		/* One call for up to 4 MiB (and no pwrite(2) for fault injection to count). */
		for (; n < 64 && left; n++) {
			iov[n].iov_base = (void *)zeros;
			iov[n].iov_len = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
			left -= iov[n].iov_len;
		}
		ssize_t r = pwritev(w->fd, iov, n, (off_t)w->seg_alloc);
		if (r <= 0)
			break;
		w->seg_alloc += (uint64_t)r;
	}
}

/* Write buffer[wpos, len) at the end of the current segment. See wal_flush(). */
int wal_flush_now(struct wal *w, bool may_rotate)
{
	if (w->failed && !w->recovering)
		return w->error;
	if (w->switching)
		return 0;
	size_t n = w->len - w->wpos;
	if (!n)
		return 0;
	if (may_rotate && w->seg_size >= w->segment_bytes) {
		wal_sync_start_job(w, JOB_ROTATE);
		return w->failed ? w->error : 0;
	}
	const uint8_t *p = w->buf + w->wpos;
	uint64_t off = w->seg_size;
	int err = 0;
	while (n) {
		ssize_t r = w->pwrite_fn(w->fd, p, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = errno ? -errno : -EIO;
			break;
		}
		if (r == 0) {
			err = -ENOSPC;
			break;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	w->writes++;
	w->bytes_written += off - w->seg_size;
	if (err) {
		/* What did reach the file is cut by the recovery (beyond synced_off). */
		wal_sync_enter_failed(w, err);
		return err;
	}
	w->seg_size = off;
	if (off > w->seg_alloc)
		w->seg_alloc = off;
	prealloc(w);
	w->segs[w->nsegs - 1].bytes = off;
	w->wpos = w->len;
	w->written_lsn = w->next_lsn - 1;
	if (w->recovering && !w->recover_target)
		w->recover_target = w->written_lsn;
	bool want = w->mode == WAL_FSYNC_ALWAYS || w->recovering;
	uv_mutex_lock(&w->mu);
	w->sh.written = w->written_lsn;
	w->sh.written_off = off;
	if (want)
		w->sh.req = w->written_lsn;
	/* In mode everysec an idle thread sleeps until told there is something to sync; while
	 * it has, it wakes by its own timeout, so most flushes need no wake-up. */
	if (want || (w->sh.sleeping && w->mode == WAL_FSYNC_EVERYSEC))
		uv_cond_broadcast(&w->cv);
	uv_mutex_unlock(&w->mu);
	if (want) {
		w->req_lsn = w->written_lsn;
		uv_ref((uv_handle_t *)&w->async);
	}
	return 0;
}

int wal_flush(struct wal *w)
{
	if (!w->ready || w->closing)
		return -EINVAL;
	int r = wal_flush_now(w, true);
	wal_sync_update_durable(w);
	return r;
}

int wal_write_now(struct wal *w)
{
	if (!w->ready || w->closing)
		return -EINVAL;
	if (w->switching) {
		/* The buffered records have no segment until the switch is done: wait for it
		 * (an fdatasync and a create on the sync thread); its end writes them. */
		uv_mutex_lock(&w->mu);
		while (w->sh.job != JOB_NONE && !w->sh.job_done)
			uv_cond_wait(&w->cv, &w->mu);
		uv_mutex_unlock(&w->mu);
		wal_sync_absorb(w);
	}
	/* A full segment takes the records still; the next wal_flush() switches. */
	int r = wal_flush_now(w, false);
	wal_sync_update_durable(w);
	return r;
}

int wal_append(struct wal *w, unsigned type, const void *payload, size_t len, uint64_t *lsn)
{
	if (!w->ready || w->closing || type == 0 || type > 255)
		return -EINVAL;
	if (len > WAL_MAX_PAYLOAD)
		return -EMSGSIZE;
	size_t need = WAL_RECORD_OVERHEAD + len;
	if (w->cap - w->len < need) {
		if (w->head) {
			memmove(w->buf, w->buf + w->head, w->len - w->head);
			w->wpos -= w->head;
			w->len -= w->head;
			w->head = 0;
		}
		if (w->cap - w->len < need) {
			size_t ncap = w->cap ? w->cap : WAL_BUF_INITIAL;
			while (ncap - w->len < need)
				ncap *= 2;
			uint8_t *n = realloc(w->buf, ncap);
			if (!n)
				return -ENOMEM;
			w->buf = n;
			w->cap = ncap;
		}
	}
	uint8_t *p = w->buf + w->len;
	put32(p, (uint32_t)len);
	p[4] = (uint8_t)type;
	p[5] = p[6] = p[7] = 0;
	put64(p + 8, w->next_lsn);
	if (len)
		memcpy(p + WAL_HEADER_BYTES, payload, len);
	put64(p + WAL_HEADER_BYTES + len, XXH3_64bits(p, WAL_HEADER_BYTES + len));
	w->len += need;
	w->appended++;
	if (lsn)
		*lsn = w->next_lsn;
	w->next_lsn++;
	return 0;
}

uint64_t wal_durable_lsn(const struct wal *w)
{
	return w->durable_lsn;
}

uint64_t wal_written_lsn(const struct wal *w)
{
	return w->written_lsn;
}

uint64_t wal_next_lsn(const struct wal *w)
{
	return w->next_lsn;
}

bool wal_failed(const struct wal *w)
{
	return w->failed;
}

int wal_error(const struct wal *w)
{
	return w->failed ? w->error : 0;
}

uint64_t wal_bytes(const struct wal *w)
{
	uint64_t b = 0;
	for (size_t i = 0; i < w->nsegs; i++)
		if (!w->segs[i].unlinking)
			b += w->segs[i].bytes;
	return b;
}

uint64_t wal_segments(const struct wal *w)
{
	return w->nsegs - w->unlinking;
}

void wal_get_stats(const struct wal *w, struct wal_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->next_lsn = w->next_lsn;
	st->written_lsn = w->written_lsn;
	st->synced_lsn = w->synced_lsn;
	st->durable_lsn = w->durable_lsn;
	st->appended = w->appended;
	st->writes = w->writes;
	st->bytes_written = w->bytes_written;
	st->buffered_bytes = w->len - w->head;
	st->segments = wal_segments(w);
	st->bytes = wal_bytes(w);
	st->unlinking = w->unlinking;
	st->rotations = w->rotations;
	st->failures = w->failures;
	st->recoveries = w->recoveries;
	st->error = wal_error(w);
	st->failed = w->failed;
	uv_mutex_t *mu = (uv_mutex_t *)&w->mu;
	uv_mutex_lock(mu);
	st->fsyncs = w->sh.fsyncs;
	st->fsync_ns = w->sh.fsync_ns;
	memcpy(st->fsync_hist, w->sh.fsync_hist, sizeof(st->fsync_hist));
	uv_mutex_unlock(mu);
}

static void free_wal(struct wal *w)
{
	free(w->buf);
	free(w->segs);
	free(w->dir);
	free(w);
}

static void wal_unref(struct wal *w)
{
	if (--w->refs == 0) {
		uv_cond_destroy(&w->cv);
		uv_mutex_destroy(&w->mu);
		free_wal(w);
	}
}

/* Record durably that the log starts at lsn: a temporary file written and fsync'ed, renamed
 * over the record, the directory fsync'ed. 0 or -errno. */
int wal_start_write(int dirfd, uint64_t lsn)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%" PRIu64 "\n", lsn), err = 0;
	int fd = openat(dirfd, WAL_START_TEMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len || fsync(fd) != 0)
		err = errno ? -errno : -EIO;
	close(fd);
	if (!err && renameat(dirfd, WAL_START_TEMP, dirfd, WAL_START_FILE) != 0)
		err = -errno;
	if (!err && fsync(dirfd) != 0)
		err = -errno;
	if (err)
		unlinkat(dirfd, WAL_START_TEMP, 0);
	return err;
}

/* Where the log starts, as recorded: 0, -ENOENT if there is no record, -EBADMSG if it is not
 * a number, or another -errno. */
int wal_start_read(int dirfd, uint64_t *lsn)
{
	char text[32], *end;
	int fd = openat(dirfd, WAL_START_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	text[n] = '\0';
	errno = 0;
	*lsn = strtoull(text, &end, 10);
	if (errno || end == text || *end != '\n' || !*lsn)
		return -EBADMSG;
	return 0;
}

/* Threadpool: record the log's new start, then delete the files (none if it could not be
 * recorded: the next start would take them for missing). */
static void unlink_work(uv_work_t *req)
{
	struct wal_unlink *u = req->data;
	char name[WAL_SEGMENT_NAME_MAX];
	int err = wal_start_write(u->dirfd, u->keep);

	for (size_t i = 0; i < u->n && err; i++)
		u->seg[i].err = err;
	for (size_t i = 0; i < u->n && !err; i++) {
		wal_segment_name(u->seg[i].first, name);
		u->seg[i].err = unlinkat(u->dirfd, name, 0) != 0 && errno != ENOENT ? -errno : 0;
	}
	close(u->dirfd);
}

/* Loop: forget the segments deleted; one that could not be is kept for the next release. */
static void unlink_done(uv_work_t *req, int status)
{
	struct wal_unlink *u = req->data;
	struct wal *w = u->w;
	char name[WAL_SEGMENT_NAME_MAX];
	size_t j = 0;

	(void)status; /* never cancelled: uv_cancel() is not called on it */
	for (size_t i = 0; i < u->n; i++) {
		/* Both lists are in LSN order, and only a release removes entries. */
		while (w->segs[j].first != u->seg[i].first)
			j++;
		w->unlinking--;
		if (u->seg[i].err) {
			w->segs[j].unlinking = false;
			wal_segment_name(u->seg[i].first, name);
			if (w->on_unlink_error)
				w->on_unlink_error(w->arg, name, u->seg[i].err);
			continue;
		}
		memmove(w->segs + j, w->segs + j + 1, (w->nsegs - j - 1) * sizeof(*w->segs));
		w->nsegs--;
	}
	free(u);
	wal_unref(w);
}

int wal_release(struct wal *w, uint64_t lsn)
{
	if (!w->ready)
		return -EINVAL;
	size_t n = 0;
	while (n + 1 < w->nsegs && w->segs[n + 1].first <= lsn)
		n++;
	size_t want = 0;
	for (size_t i = 0; i < n; i++)
		want += !w->segs[i].unlinking;
	if (!want)
		return 0;
	struct wal_unlink *u = malloc(sizeof(*u) + want * sizeof(u->seg[0]));
	if (!u)
		return -ENOMEM;
	u->dirfd = dup(w->dirfd);
	if (u->dirfd < 0) {
		int err = -errno;
		free(u);
		return err;
	}
	u->w = w;
	u->n = 0;
	u->keep = w->segs[n].first;
	u->req.data = u;
	for (size_t i = 0; i < n; i++)
		if (!w->segs[i].unlinking)
			u->seg[u->n++].first = w->segs[i].first;
	int err = uv_queue_work(w->loop, &u->req, unlink_work, unlink_done);
	if (err) {
		close(u->dirfd);
		free(u);
		return err;
	}
	for (size_t i = 0; i < n; i++)
		w->segs[i].unlinking = true;
	w->unlinking += want;
	w->refs++;
	return (int)want;
}

/* ---- open / close ---- */

static void handle_closed(uv_handle_t *h)
{
	wal_unref(h->data);
}

static int list_segments(struct wal *w, char *why, size_t whylen)
{
	int fd = dup(w->dirfd);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
	int err = 0;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d))) {
		uint64_t first;
		if (parse_segment_name(e->d_name, &first) != 0)
			continue;
		struct stat stb;
		if (fstatat(w->dirfd, e->d_name, &stb, 0) != 0) {
			/* Deleted since readdir: a release of the log closed before (wal_close()
			 * leaves its deletions to the loop). */
			if (errno == ENOENT) {
				errno = 0;
				continue;
			}
			err = -errno;
			set_why(why, whylen, "stat %s/%s: %s", w->dir, e->d_name, strerror(-err));
			goto out;
		}
		if (!S_ISREG(stb.st_mode))
			continue;
		err = wal_seg_push(w, first, (uint64_t)stb.st_size);
		if (err)
			goto out;
		errno = 0;
	}
	if (errno) {
		err = -errno;
		set_why(why, whylen, "readdir %s: %s", w->dir, strerror(-err));
	}
	if (w->nsegs > 1)
		qsort(w->segs, w->nsegs, sizeof(*w->segs), seg_cmp);
out:
	closedir(d);
	return err;
}

/* fsync the directory that holds path. 0 or -errno. */
static int sync_parent(const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == path)
		snprintf(parent, sizeof(parent), "/");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - path), path);
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return err;
}

/* A new log's settings from the options, defaults filled in; nothing is opened yet. */
static void take_options(struct wal *w, const struct wal_options *o)
{
	w->dirfd = -1;
	w->fd = -1;
	w->loop = o->loop;
	w->mode = o->fsync;
	w->segment_bytes = o->segment_bytes ? o->segment_bytes : WAL_DEFAULT_SEGMENT_BYTES;
	w->retry_ms = o->retry_ms ? o->retry_ms : WAL_DEFAULT_RETRY_MS;
	w->prealloc = o->prealloc_bytes;
	w->on_durable = o->on_durable;
	w->on_unlink_error = o->on_unlink_error;
	w->accept_missing = o->accept_missing;
	w->arg = o->arg;
	w->pwrite_fn = o->pwrite_fn ? o->pwrite_fn : real_pwrite;
	w->fdatasync_fn = o->fdatasync_fn ? o->fdatasync_fn : real_fdatasync;
	w->next_lsn = 1;
	w->sh.fd = -1;
}

/* The log's directory open in w->dirfd, created first if missing (one level, mode 0700, its
 * name made durable). 0, or -errno with why. */
static int open_dir(struct wal *w, char *why, size_t whylen)
{
	int err;

	if (mkdir(w->dir, 0700) == 0) {
		/* The new directory's name is durable once its parent is (else a power cut
		 * could take the whole log with it). */
		err = sync_parent(w->dir);
		if (err) {
			set_why(why, whylen, "fsync the parent of %s: %s", w->dir, strerror(-err));
			return err;
		}
	} else if (errno != EEXIST) {
		err = -errno;
		set_why(why, whylen, "mkdir %s: %s", w->dir, strerror(errno));
		return err;
	}
	w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		err = -errno;
		set_why(why, whylen, "open %s: %s", w->dir, strerror(errno));
		return err;
	}
	return 0;
}

/*
 * The loop's handles (the async handle the sync thread wakes, the retry timer), then the sync
 * thread. 0; or the thread's error with why, the directory closed and both handles closing:
 * the last of their callbacks frees w.
 */
static int start_sync_thread(struct wal *w, char *why, size_t whylen)
{
	/* Cannot fail on Linux past this point except the thread; handles need uv_close. */
	uv_async_init(w->loop, &w->async, wal_sync_async_cb);
	w->async.data = w;
	uv_unref((uv_handle_t *)&w->async);
	uv_timer_init(w->loop, &w->timer);
	w->timer.data = w;
	w->refs = 2;
	int err = uv_thread_create(&w->thread, wal_sync_main, w);
	if (err) {
		set_why(why, whylen, "start the log's sync thread: %s", uv_strerror(err));
		close(w->dirfd);
		uv_close((uv_handle_t *)&w->async, handle_closed);
		uv_close((uv_handle_t *)&w->timer, handle_closed);
		return err;
	}
	w->thread_started = true;
	return 0;
}

int wal_open(const struct wal_options *o, struct wal **out, char *why, size_t whylen)
{
	*out = NULL;
	set_why(why, whylen, "%s", "");
	if (!o->loop || !o->dir || o->fsync > WAL_FSYNC_NO ||
	    (o->segment_bytes && o->segment_bytes < 4096)) {
		set_why(why, whylen, "bad log options");
		return -EINVAL;
	}
	int err;
	struct wal *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	take_options(w, o);
	w->dir = strdup(o->dir);
	if (!w->dir) {
		err = -ENOMEM;
		goto fail;
	}
	err = open_dir(w, why, whylen);
	if (err)
		goto fail;
	err = list_segments(w, why, whylen);
	if (err)
		goto fail;
	w->cap = WAL_BUF_INITIAL;
	w->buf = malloc(w->cap);
	if (!w->buf) {
		err = -ENOMEM;
		goto fail;
	}
	err = uv_mutex_init(&w->mu);
	if (err)
		goto fail;
	err = uv_cond_init(&w->cv);
	if (err) {
		uv_mutex_destroy(&w->mu);
		goto fail;
	}
	err = start_sync_thread(w, why, whylen);
	if (err)
		return err;
	*out = w;
	return 0;
fail:
	if (why && !why[0])
		set_why(why, whylen, "open the log in %s: %s", o->dir, strerror(-err));
	if (w->dirfd >= 0)
		close(w->dirfd);
	free_wal(w);
	return err;
}

int wal_close(struct wal *w)
{
	if (!w)
		return 0;
	int err = 0;
	w->closing = true;
	uv_timer_stop(&w->timer);
	if (w->ready) {
		/* Let a switch in flight finish, so the buffered records have a segment. */
		uv_mutex_lock(&w->mu);
		while (w->sh.job != JOB_NONE && !w->sh.job_done)
			uv_cond_wait(&w->cv, &w->mu);
		uv_mutex_unlock(&w->mu);
		wal_sync_absorb(w);
		wal_flush_now(w, false);
	}
	uv_mutex_lock(&w->mu);
	w->sh.req = w->sh.written;
	w->sh.stop = true;
	uv_cond_broadcast(&w->cv);
	uv_mutex_unlock(&w->mu);
	uv_thread_join(&w->thread);
	if (w->ready) {
		wal_sync_absorb(w);
		uv_timer_stop(&w->timer);
		wal_sync_update_durable(w);
		if (w->failed)
			err = w->error;
		else if (w->len != w->head)
			err = -EIO;
	}
	if (w->fd >= 0)
		close(w->fd);
	close(w->dirfd);
	w->ready = false;
	uv_close((uv_handle_t *)&w->async, handle_closed);
	uv_close((uv_handle_t *)&w->timer, handle_closed);
	return err;
}
