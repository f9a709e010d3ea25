/* SPDX-License-Identifier: MIT */
/*
 * The files record (data_dir/files): the filters that have a durable file of their own, written
 * whenever that set changed; at a start, read and checked against what was loaded (a file it
 * lists that is missing), the log's replay explaining some (srv_snap_replayed), the rest
 * reported (srv_snap_load_end).
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf_record.h"
#include "server/log.h"

/*
 * The files record: the filters that have a durable file of their own (e->filed), one
 * "ID FILE" a line (ID in 16 hex digits). A file it lists that is missing at a start, and that
 * holds no filter loaded from elsewhere (its pack, a file renamed) nor one the log's replay
 * drops, was lost outside the daemon: the start refuses (snap_files_check, srv_snap_load_end).
 * It is written whenever the set changed: before a pack is written (so a filter that left its
 * pack is listed before the pack lets it go), at the end of a cycle, and at a start. Until it is
 * written the log keeps every record since its last write (srv_snap_log_needed): a new file
 * not yet listed is covered by the log, and a listed file removed since by the log's DROP,
 * FLUSHALL or RENAME record. Without the log, a removal writes it first (snap_files_removing).
 */
#define SNAP_FILES	"files"
#define SNAP_FILES_LINE (16 + 1 + BF_SNAPSHOT_NAME_MAX + 1)

static int snap_files_write(struct srv_snap *sn)
{
	size_t n = 0, len = 0;
	char *text;
	int rc;

	for (size_t i = 0; i < sn->nents; i++)
		n += sn->ents[i]->filed;
	text = malloc(n * SNAP_FILES_LINE + 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < sn->nents; i++) {
		const struct snap_entry *e = sn->ents[i];
		char file[BF_SNAPSHOT_NAME_MAX];

		if (e->filed)
			len +=
			    (size_t)snprintf(text + len, SNAP_FILES_LINE + 1, "%016" PRIx64 " %s\n",
					     (uint64_t)e->f->id, snap_file(e, file));
	}
	rc = bf_file_write(sn->dirfd, SNAP_FILES, text, len, NULL);
	free(text);
	return rc;
}

/* Write the files record if the set changed. 0, or a negative errno (logged; it stays due, and
 * the log is kept until it is written). */
int snap_files_sync(struct srv_snap *sn)
{
	uint64_t lsn = sn->ctx->logged_lsn;
	int rc;

	if (!sn->files_stale)
		return 0;
	rc = snap_files_write(sn);
	if (rc) {
		srv_log(SRV_LOG_ERR, "%s/%s: cannot write: %s; the log is kept until it is",
			sn->dir, SNAP_FILES, strerror(-rc));
		return rc;
	}
	sn->files_stale = false;
	sn->files_lsn = lsn;
	return 0;
}

/* A listed file is about to be removed (its entry is out of ents, or no longer filed). Without
 * the log, the record is written first: no record of a log would explain the file gone. */
void snap_files_removing(struct srv_snap *sn)
{
	sn->files_stale = true;
	if (!sn->cfg->wal)
		(void)snap_files_sync(sn);
}

/* Read the files record: its text, NUL-terminated, in *out (NULL if there is none). 0 or a
 * negative errno. */
static int snap_files_read(struct srv_snap *sn, char **out)
{
	int fd = openat(sn->dirfd, SNAP_FILES, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	size_t len = 0;
	char *text;

	*out = NULL;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &sb) || !(text = malloc((size_t)sb.st_size + 1))) {
		int rc = errno ? -errno : -ENOMEM;
		close(fd);
		return rc;
	}
	while (len < (size_t)sb.st_size) {
		ssize_t n = read(fd, text + len, (size_t)sb.st_size - len);

		if (n <= 0) {
			int rc = n ? -errno : -EIO;
			close(fd);
			free(text);
			return rc;
		}
		len += (size_t)n;
	}
	close(fd);
	text[len] = '\0';
	*out = text;
	return 0;
}

/* Note a file the record lists that is missing (and no filter loaded holds its id). */
static int snap_files_missing(struct srv_snap *sn, uint64_t id, const char *file)
{
	struct snap_listed *m = realloc(sn->missing, (sn->nmissing + 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	sn->missing = m;
	m[sn->nmissing].id = id;
	m[sn->nmissing].file = strdup(file);
	if (!m[sn->nmissing].file)
		return -ENOMEM;
	snprintf(m[sn->nmissing].named, sizeof(m[sn->nmissing].named), "%s", file);
	sn->nmissing++;
	return 0;
}

/* A line of the record (at a start) names the file the filter of that id was loaded from: the
 * record needs no write for it (sn->files_listed counts them). */
static void snap_files_match(struct srv_snap *sn, uint64_t id, const char *file)
{
	const struct snap_idslot *slot = sn->ids ? snap_id_slot(sn, id) : NULL;
	char own[BF_SNAPSHOT_NAME_MAX];

	if (slot && slot->e && slot->e->f && slot->e->filed && !slot->renamed &&
	    !strcmp(snap_file(slot->e, own), file))
		sn->files_listed++;
}

/*
 * After the load: the files the record lists that are missing, and whose filter no other copy
 * loaded (its pack, the same filter's file under a new name), go in sn->missing; the log's
 * replay may yet explain them (srv_snap_replayed). One set aside as corrupt is told as that.
 */
int snap_files_check(struct srv_snap *sn)
{
	char *text, *line, *nl, aside[BF_SNAPSHOT_NAME_MAX + 16];
	struct stat sb;
	int rc = snap_files_read(sn, &text);

	sn->files_listed = text ? 0 : SIZE_MAX;
	sn->files_lines = 0;
	for (line = text; !rc && line && *line; line = nl + 1) {
		char *end, *file;
		uint64_t id;

		nl = strchr(line, '\n');
		if (!nl || nl - line < 18 || line[16] != ' ') {
			rc = -EBADMSG;
			break;
		}
		*nl = '\0';
		id = strtoull(line, &end, 16);
		file = line + 17;
		if (end != line + 16 || strlen(file) >= BF_SNAPSHOT_NAME_MAX || strchr(file, '/') ||
		    !snap_has_suffix(file, BF_SNAPSHOT_SUFFIX)) {
			rc = -EBADMSG;
			break;
		}
		sn->files_lines++;
		snap_files_match(sn, id, file);
		snprintf(aside, sizeof(aside), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (!fstatat(sn->dirfd, file, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !fstatat(sn->dirfd, aside, &sb, AT_SYMLINK_NOFOLLOW) ||
		    (sn->ids && snap_id_slot(sn, id)->e))
			continue;
		rc = snap_files_missing(sn, id, file);
	}
	free(text);
	if (rc)
		srv_log(SRV_LOG_ERR, "%s/%s: %s; not starting", sn->dir, SNAP_FILES,
			rc == -EBADMSG ? "a line is not \"ID FILE.bsnap\"" : strerror(-rc));
	return rc;
}

void snap_files_explained(struct srv_snap *sn, size_t i)
{
	free(sn->missing[i].file);
	sn->missing[i] = sn->missing[--sn->nmissing];
}

void srv_snap_replayed(struct srv_snap *sn, int type, const void *payload, size_t len)
{
	char file[BF_SNAPSHOT_NAME_MAX];
	const char *name;
	uint64_t id;
	size_t n;

	if (!sn->nmissing)
		return;
	if (type == BF_REC_FLUSHALL) {
		while (sn->nmissing)
			snap_files_explained(sn, 0);
	} else if (type == BF_REC_DROP && !bf_record_read_id(payload, len, &id)) {
		for (size_t i = sn->nmissing; i--;)
			if (sn->missing[i].id == id)
				snap_files_explained(sn, i);
	} else if (type == BF_REC_RENAME && !bf_record_read_rename(payload, len, &id, &name, &n)) {
		/* The filter that had the new name is replaced: its file written over, or
		 * removed first. That filter's name is followed through the renames replayed
		 * before (named): the record lists a file under the name its filter had then. */
		bf_snapshot_filename(name, n, file);
		for (size_t i = sn->nmissing; i--;)
			if (sn->missing[i].id != id && !strcmp(sn->missing[i].named, file))
				snap_files_explained(sn, i);
		for (size_t i = 0; i < sn->nmissing; i++)
			if (sn->missing[i].id == id)
				memcpy(sn->missing[i].named, file, sizeof(file));
	}
}

/* The files the record lists that are still missing after the replay: the start refuses, or
 * goes on without them as asked. */
int snap_files_report(struct srv_snap *sn)
{
	int rc = sn->nmissing && !sn->accept_missing ? -ENOENT : 0;

	for (size_t i = 0; i < sn->nmissing; i++)
		srv_log(sn->accept_missing ? SRV_LOG_WARNING : SRV_LOG_ERR,
			"snapshot %s/%s is missing (%s/%s lists it, filter id %" PRIu64
			"): that filter is lost%s%s",
			sn->dir, sn->missing[i].file, sn->dir, SNAP_FILES, sn->missing[i].id,
			sn->cfg->wal ? ", but for what the write-ahead log holds from its creation"
				     : "",
			sn->accept_missing ? "; going on without it, as asked" : "");
	if (rc)
		srv_log(SRV_LOG_ERR, "not starting (put the files back, or start once with "
				     "--accept-missing-files to go on without them)");
	else if (sn->nmissing)
		sn->files_stale = true; /* told once */
	while (sn->nmissing)
		snap_files_explained(sn, 0);
	free(sn->missing);
	sn->missing = NULL;
	return rc;
}
