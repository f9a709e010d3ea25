/* SPDX-License-Identifier: MIT */
/*
 * The start's load (snap_load_all, from srv_snap_new): the data directory listed (leftover temp
 * files removed), the packs record checked, the packs and then the files of their own read and
 * adopted into the registry (of two copies of one filter the later stays; a renamed file's
 * filter under a hidden name), a bad file set aside as .corrupt, the files record checked; the
 * prefault thread told how much the heap will grow. The table of filter ids is kept for the
 * log's replay until srv_snap_load_end(); what was set aside is reported after the replay
 * (srv_snap_after_replay).
 */
#include "server/snapshot_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bf_pool.h"
#include "server/log.h"
#include "server/prefault.h"
#include "server/progress.h"

/* ---------------------------------------------------------------------------------------- */
/* Start-up */

bool snap_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcmp(s + n - k, suffix);
}

static int snap_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The snapshot files in the directory, sorted, as a malloc'd array of malloc'd names, and
 * their bytes in all (*bytes); leftover temp files are removed on the way. 0 or -errno.
 */
static int snap_list(struct srv_snap *sn, char ***out, size_t *n, uint64_t *bytes)
{
	char **names = NULL;
	size_t cap = 0, count = 0;
	struct dirent *de;
	int fd = dup(sn->dirfd), rc = 0;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rewinddir(d);
	while ((errno = 0, de = readdir(d))) {
		struct stat sb;

		if (de->d_name[0] == '.')
			continue;
		if (snap_has_suffix(de->d_name, BF_SNAPSHOT_SUFFIX BF_SNAPSHOT_TMP_SUFFIX)) {
			if (unlinkat(sn->dirfd, de->d_name, 0) == 0)
				srv_log(SRV_LOG_NOTICE, "removed leftover temp file %s/%s", sn->dir,
					de->d_name);
			else
				srv_log(SRV_LOG_WARNING,
					"cannot remove leftover temp file %s/%s: %s", sn->dir,
					de->d_name, strerror(errno));
			continue;
		}
		if (!snap_has_suffix(de->d_name, BF_SNAPSHOT_SUFFIX))
			continue;
		if (fstatat(sn->dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(sb.st_mode)) {
			srv_log(SRV_LOG_WARNING, "%s/%s is not a regular file; ignored", sn->dir,
				de->d_name);
			continue;
		}
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **p = realloc(names, ncap * sizeof(*p));

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			names = p;
			cap = ncap;
		}
		names[count] = strdup(de->d_name);
		if (!names[count]) {
			rc = -ENOMEM;
			break;
		}
		count++;
		*bytes += (uint64_t)sb.st_size;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < count; i++)
			free(names[i]);
		free(names);
		return rc;
	}
	if (count)
		qsort(names, count, sizeof(*names), snap_cmp_names);
	*out = names;
	*n = count;
	return 0;
}

static void snap_aside_note(struct srv_snap *sn, const char *label, const char *file,
			    const char *name, size_t name_len);

/* Rename a bad file to FILE.corrupt (or .corrupt.N if taken); a file of its own is noted for
 * srv_snap_after_replay(). */
static void snap_set_aside(struct srv_snap *sn, const char *file, const char *why)
{
	if (!snap_has_suffix(file, BF_PACK_SUFFIX))
		snap_aside_note(sn, file, file, NULL, 0);

	char to[BF_SNAPSHOT_NAME_MAX + 32];

	for (int i = 0; i < SNAP_CORRUPT_TRIES; i++) {
		if (i)
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX ".%d", file, i);
		else
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (faccessat(sn->dirfd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
		    i + 1 < SNAP_CORRUPT_TRIES)
			continue;
		break;
	}
	sn->st.set_aside++;
	if (renameat(sn->dirfd, file, sn->dirfd, to)) {
		srv_log(SRV_LOG_ERR,
			"snapshot %s/%s: %s; not loaded, and it cannot be renamed to %s: %s",
			sn->dir, file, why, to, strerror(errno));
		return;
	}
	srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; renamed to %s, filter not loaded", sn->dir, file,
		why, to);
}

void snap_aside_free(struct srv_snap *sn)
{
	for (size_t i = 0; i < sn->naside; i++) {
		free(sn->aside[i].label);
		free(sn->aside[i].file);
		free(sn->aside[i].name);
	}
	free(sn->aside);
	sn->aside = NULL;
	sn->naside = 0;
}

/*
 * Remember what a bad file or pack entry held, for srv_snap_after_replay(): label names it in
 * logs; the filter is matched by its file name (file) or, for a pack entry, by its name (name,
 * NULL if unknown).
 */
static void snap_aside_note(struct srv_snap *sn, const char *label, const char *file,
			    const char *name, size_t name_len)
{
	struct snap_aside *a = realloc(sn->aside, (sn->naside + 1) * sizeof(*a));

	if (!a)
		return;
	sn->aside = a;
	a = &sn->aside[sn->naside];
	a->label = strdup(label);
	a->file = file ? strdup(file) : NULL;
	a->name = name ? strndup(name, name_len) : NULL;
	if (a->label)
		sn->naside++;
	else {
		free(a->file);
		free(a->name);
	}
}

/* Where the search for id's slot begins (ids_cap > 0). */
static size_t snap_id_home(const struct srv_snap *sn, uint64_t id)
{
	return (size_t)(id * 0x9e3779b97f4a7c15ULL) & (sn->ids_cap - 1);
}

/* The load-time slot of filter id (free if it has none yet). The table has room. */
struct snap_idslot *snap_id_slot(const struct srv_snap *sn, uint64_t id)
{
	size_t mask = sn->ids_cap - 1, i = snap_id_home(sn, id);

	while (sn->ids[i].id && sn->ids[i].id != id)
		i = (i + 1) & mask;
	return &sn->ids[i];
}

/* Room for n ids at load. 0 or -ENOMEM. */
static int snap_ids_reserve(struct srv_snap *sn, size_t n)
{
	struct snap_idslot *old = sn->ids;
	size_t ocap = sn->ids_cap;

	if (2 * n <= sn->ids_cap)
		return 0;
	sn->ids_cap = ocap ? 2 * ocap : 1024;
	while (sn->ids_cap < 2 * n)
		sn->ids_cap *= 2;
	sn->ids = calloc(sn->ids_cap, sizeof(*sn->ids));
	if (!sn->ids) {
		sn->ids = old;
		sn->ids_cap = ocap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < ocap; i++)
		if (old[i].id)
			*snap_id_slot(sn, old[i].id) = old[i];
	free(old);
	return 0;
}

/*
 * Of two copies loaded of one filter (one name, or one id), the newer was found after the
 * older e: e's filter leaves the registry, its copy its file or its pack.
 */
static void snap_forget_older(struct srv_snap *sn, struct snap_entry *e, bool repack[SNAP_PACKS])
{
	struct bf_filter *f = e->f;

	if (e->pack >= 0)
		repack[e->pack] = true;
	snap_pack_leave(sn, e, UINT64_MAX);
	if (e->own_file) {
		const char *renamed = f->id ? snap_id_slot(sn, f->id)->renamed : NULL;
		char file[BF_SNAPSHOT_NAME_MAX];

		snap_unlink(sn, renamed ? renamed : snap_file(e, file), "older copy");
	}
	sn->ents[e->idx] = sn->ents[--sn->nents];
	sn->ents[e->idx]->idx = e->idx;
	bf_pool_put(e);
	bf_registry_drop(sn->ctx->reg, bf_filter_name(f), f->name_len);
	sn->st.loaded--;
}

/* f (from file, or pack >= 0 of it) is an older copy than the one loaded (generation had). */
static void snap_skip_older(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, uint64_t had,
			    const char *file, int pack, bool repack[SNAP_PACKS])
{
	srv_log(SRV_LOG_NOTICE,
		"filter '%s' (id %" PRIu64 "): %s/%s holds an older copy (generation %" PRIu64
		", loaded %" PRIu64 "); %s",
		bf_filter_name(f), (uint64_t)f->id, sn->dir, file, gen, had,
		pack < 0 ? "removed" : "dropped from the pack");
	if (pack < 0)
		snap_unlink(sn, file, "older copy");
	else
		repack[pack] = true;
	bf_filter_free(f);
}

/*
 * e's filter was loaded from pack, where it no longer belongs (it grew past
 * snapshot_pack_bytes, or that is smaller now). Its pack is the only durable copy of it, and the
 * log may no longer hold it: it stays a member of that pack until a durable file holds it
 * elsewhere. One too large for a pack is dirty, so the next checkpoint (or the stop) writes it
 * as a file of its own; snap_record() then takes it out of the pack, which is written again
 * without it after that. One small enough stays in that pack.
 */
static void snap_adopt_stay(struct srv_snap *sn, struct snap_entry *e, int pack)
{
	if (e->pack >= 0)
		sn->packs[e->pack].n--;
	e->pack = pack;
	sn->packs[pack].n++;
	if (!snap_packable(sn, e->f))
		e->on_disk = false;
}

/*
 * The id step of adopting f, a copy of generation gen from file (pack >= 0: an entry of that
 * pack): one filter under two names (renamed, and the old name's copy not yet removed). A filter
 * without an id (a file from before ids) has no step here. Else *slot is its slot in the table of
 * ids, and if a copy of that filter is loaded already the one written later stays: f is skipped
 * if it is the older (returns 1: f consumed, the older copy removed or its pack written again),
 * or the one loaded is forgotten. 0 to go on, 1, or -ENOMEM (f freed).
 */
static int snap_adopt_id(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, const char *file,
			 int pack, bool repack[SNAP_PACKS], struct snap_idslot **slot)
{
	struct snap_idslot *s;

	if (!f->id)
		return 0;
	if (snap_ids_reserve(sn, sn->ids_n + 1)) {
		bf_filter_free(f);
		return -ENOMEM;
	}
	s = snap_id_slot(sn, f->id);
	*slot = s;
	if (!s->id || !s->e)
		return 0;
	if (gen <= s->gen) {
		snap_skip_older(sn, f, gen, s->gen, file, pack, repack);
		return 1;
	}
	srv_log(SRV_LOG_NOTICE,
		"filter '%s' (id %" PRIu64 "): %s/%s holds a newer copy (generation "
		"%" PRIu64 ") than '%s' loaded (%" PRIu64 ")",
		bf_filter_name(f), (uint64_t)f->id, sn->dir, file, gen, bf_filter_name(s->e->f),
		s->gen);
	snap_forget_older(sn, s->e, repack);
	s->e = NULL;
	return 0;
}

/*
 * The name step: f goes into the registry, under a hidden name if renamed, else under its own.
 * A filter loaded already under that name (two filters, one name: a crash between a new copy's
 * write and the old one's removal) gives way if f was written later; else f is skipped as the
 * older copy (returns 1: f consumed). 0 (f added), 1, or the registry's negative errno (f not
 * added, and still the caller's).
 */
static int snap_adopt_name(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, bool renamed,
			   const char *file, int pack, bool repack[SNAP_PACKS])
{
	struct bf_filter *old;
	struct snap_entry *e;
	uint64_t had;
	int rc;

	if (renamed)
		rc = bf_registry_adopt_hidden(sn->ctx->reg, f);
	else
		rc = bf_registry_adopt(sn->ctx->reg, bf_filter_name(f), f->name_len, f);
	if (rc != -EEXIST ||
	    !(old = bf_registry_get(sn->ctx->reg, bf_filter_name(f), f->name_len)) ||
	    !(e = snap_find(sn, old)))
		return rc;
	had = snap_id_slot(sn, old->id)->gen;
	if (gen <= had) {
		snap_skip_older(sn, f, gen, had, file, pack, repack);
		return 1;
	}
	srv_log(SRV_LOG_NOTICE,
		"filter '%s': %s/%s holds a newer copy (generation %" PRIu64
		") than the one loaded (%" PRIu64 ")",
		bf_filter_name(f), sn->dir, file, gen, had);
	if (e->f->id && e->f->id != f->id)
		snap_id_slot(sn, e->f->id)->e = NULL;
	snap_forget_older(sn, e, repack);
	return bf_registry_adopt(sn->ctx->reg, bf_filter_name(f), f->name_len, f);
}

/*
 * The registry refused f (rc, negative). Passing max_memory stops the start (-ENOMEM returned:
 * the operator raises it; starting without the filter would lose acknowledged keys). Any other
 * refusal (a filter of that name is loaded that is not an older copy of this one, or the name is
 * not valid) is taken as the file's, as a bad file is: the start goes on without it (0), a file
 * of its own set aside as .corrupt and reported after the replay, a pack entry left out (logged)
 * and its pack written again without it. f is consumed.
 */
static int snap_adopt_refused(struct srv_snap *sn, struct bf_filter *f, int rc, const char *file,
			      int pack, bool repack[SNAP_PACKS])
{
	char why[320];

	if (rc == -ENOMEM) {
		srv_log(SRV_LOG_ERR,
			"snapshot %s/%s: filter '%s' needs %" PRIu64 " bytes; with %" PRIu64
			" loaded that passes max_memory (%" PRIu64
			"); not starting (raise max_memory)",
			sn->dir, file, bf_filter_name(f), bf_filter_bytes(f),
			bf_registry_memory(sn->ctx->reg), bf_registry_max_memory(sn->ctx->reg));
		bf_filter_free(f);
		return rc;
	}
	snprintf(why, sizeof(why), "cannot add filter '%s': %s", bf_filter_name(f),
		 rc == -EEXIST ? "a filter of that name is already loaded" : strerror(-rc));
	bf_filter_free(f);
	if (pack >= 0) {
		srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not loaded", sn->dir, file, why);
		repack[pack] = true;
	} else {
		snap_set_aside(sn, file, why);
	}
	return 0;
}

/*
 * The entry step: f, now in the registry, is tracked as clean, holding what its copy holds (from
 * pack >= 0, or a file of its own, which the files record lists), and counted as loaded. NULL on
 * allocation failure.
 */
static struct snap_entry *snap_adopt_entry(struct srv_snap *sn, struct bf_filter *f, int pack)
{
	struct snap_entry *e = snap_track(sn, f);

	if (!e)
		return NULL;
	e->on_disk = true;
	e->own_file = pack < 0;
	e->filed = pack < 0;
	e->saved_changes = f->changes;
	e->need_lsn = f->lsn + 1;
	sn->st.loaded++;
	if (f->lsn > sn->loaded_lsn)
		sn->loaded_lsn = f->lsn;
	return e;
}

/*
 * The slot step: e's filter in the table of ids (slot from the id step, NULL if it had no id
 * there), with the generation loaded and, for a renamed file, that file's name (for the replay's
 * RENAME, srv_snap_dropping and srv_snap_load_end). 0 or -ENOMEM.
 */
static int snap_adopt_slot(struct srv_snap *sn, struct snap_entry *e, struct snap_idslot *slot,
			   uint64_t gen, bool renamed, const char *file)
{
	const struct bf_filter *f = e->f;

	/* A filter that had no id before (a file from before ids) has one now. */
	if (!slot) {
		if (snap_ids_reserve(sn, sn->ids_n + 1))
			return -ENOMEM;
		slot = snap_id_slot(sn, f->id);
	}
	if (!slot->id)
		sn->ids_n++;
	slot->id = f->id;
	slot->e = e;
	slot->gen = gen;
	free(slot->renamed);
	slot->renamed = renamed ? strdup(file) : NULL;
	if (renamed && !slot->renamed)
		return -ENOMEM;
	if (renamed && sn->nrenamed == sn->renamed_cap) {
		size_t cap = sn->renamed_cap ? 2 * sn->renamed_cap : 16;
		uint64_t *ids = realloc(sn->renamed_ids, cap * sizeof(*ids));

		if (!ids)
			return -ENOMEM;
		sn->renamed_ids = ids;
		sn->renamed_cap = cap;
	}
	if (renamed)
		sn->renamed_ids[sn->nrenamed++] = f->id;
	return 0;
}

/*
 * Adopt f, loaded from file (pack >= 0: an entry of that pack), a copy of generation gen: of two
 * copies of one filter (one id), or of two filters under one name, the one written later stays;
 * the older copy's file is removed, or its pack marked for writing again (repack[]).
 * A renamed file's filter (renamed: its header has its name before a RENAME) is adopted under a
 * hidden name until the log's replay of that RENAME names it (srv_snap_load_end if none does):
 * under the old name it could meet a filter that took that name since, and under the new one
 * the records before the RENAME of a filter it replaced. 0 (adopted, or the older copy dropped,
 * or set aside), or a negative errno that must stop the start. f is consumed.
 */
static int snap_adopt(struct srv_snap *sn, struct bf_filter *f, uint64_t gen, bool renamed,
		      const char *file, int pack, bool repack[SNAP_PACKS])
{
	struct snap_idslot *slot = NULL;
	struct snap_entry *e;
	int rc;

	if (gen > sn->gen)
		sn->gen = gen;
	rc = snap_adopt_id(sn, f, gen, file, pack, repack, &slot);
	if (rc)
		return rc < 0 ? rc : 0;
	rc = snap_adopt_name(sn, f, gen, renamed, file, pack, repack);
	if (rc > 0)
		return 0;
	if (rc)
		return snap_adopt_refused(sn, f, rc, file, pack, repack);
	e = snap_adopt_entry(sn, f, pack);
	if (!e)
		return -ENOMEM;
	rc = snap_adopt_slot(sn, e, slot, gen, renamed, file);
	if (rc)
		return rc;
	/* Loaded from a pack it no longer belongs in: it stays a member until a durable file holds
	 * it elsewhere (snap_adopt_stay). */
	if (pack >= 0 && e->pack != pack)
		snap_adopt_stay(sn, e, pack);
	/* Packed where it was a file of its own: its pack is written with it, and only then
	 * is the file removed (snap_pjob_record). */
	else if (e->pack >= 0 && pack < 0)
		repack[e->pack] = true;
	return 0;
}

/* The read of a file of its own has got to done bytes: the load's progress. */
static void snap_load_io(void *arg, uint64_t done, uint64_t total)
{
	struct srv_snap *sn = arg;

	(void)total;
	srv_progress_at(&sn->load_progress, sn->load_base + done);
}

/* Load one file of its own. 0 (loaded or set aside) or a negative errno that must stop the
 * start. */
static int snap_load_one(struct srv_snap *sn, const char *file, uint64_t *newest,
			 bool repack[SNAP_PACKS])
{
	char why[640], expect[BF_SNAPSHOT_NAME_MAX];
	struct bf_io_progress pr = {snap_load_io, sn};
	struct bf_filter *f = NULL;
	bool renamed = false;
	uint64_t gen = 0;
	struct stat sb;
	int rc;

	rc = bf_snapshot_read_progress(sn->dirfd, file, &f, &gen, &pr, why, sizeof(why));
	if (fstatat(sn->dirfd, file, &sb, 0))
		memset(&sb, 0, sizeof(sb)); /* counted as 0 bytes, and as no newer than others */
	sn->load_base += (uint64_t)sb.st_size;
	if (rc == -EINVAL || rc == -ENOTSUP) {
		snap_set_aside(sn, file, why);
		return 0;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not starting (fix or move the file)",
			sn->dir, file, why);
		return rc;
	}
	bf_snapshot_filename(bf_filter_name(f), f->name_len, expect);
	if (strcmp(expect, file)) {
		/* Renamed as metadata (snap_rename_file): the file's name is the filter's. */
		char name[BF_NAME_MAX];
		size_t len;

		const struct snap_idslot *slot = sn->ids && f->id ? snap_id_slot(sn, f->id) : NULL;

		/* Not renamed, but a copy of a file loaded (the same generation of the filter). */
		if (bf_snapshot_filename_name(file, name, &len) ||
		    (slot && slot->e && slot->gen == gen)) {
			snprintf(why, sizeof(why), "holds filter '%s', whose file name is %s",
				 bf_filter_name(f), expect);
			bf_filter_free(f);
			snap_set_aside(sn, file, why);
			return 0;
		}
		srv_log(SRV_LOG_DEBUG, "%s/%s holds filter '%.*s' under its name before a RENAME",
			sn->dir, file, (int)len, name);
		renamed = true;
	}
	if (!f->params->persist) {
		bf_filter_free(f);
		snap_set_aside(sn, file, "holds a filter that is not persistent");
		return 0;
	}
	sn->st.loaded_bytes += (uint64_t)sb.st_size;
	if ((uint64_t)sb.st_mtime > *newest)
		*newest = (uint64_t)sb.st_mtime;
	srv_log(SRV_LOG_DEBUG,
		"loaded filter '%s' from %s/%s (%" PRIu64 " bytes, generation %" PRIu64 ")",
		bf_filter_name(f), sn->dir, file, bf_filter_bytes(f), gen);
	return snap_adopt(sn, f, gen, renamed, file, -1, repack);
}

/*
 * Keep a copy of a pack with a bad entry as FILE.corrupt (a hard link: the pack itself stays,
 * its good entries load, and it is written again without the bad one).
 */
static void snap_keep_copy(struct srv_snap *sn, const char *file)
{
	char to[BF_SNAPSHOT_NAME_MAX + 32];

	for (int i = 0; i < SNAP_CORRUPT_TRIES; i++) {
		if (i)
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX ".%d", file, i);
		else
			snprintf(to, sizeof(to), "%s" SNAP_CORRUPT_SUFFIX, file);
		if (linkat(sn->dirfd, file, sn->dirfd, to, 0) == 0) {
			srv_log(SRV_LOG_NOTICE, "copy of %s/%s kept as %s", sn->dir, file, to);
			return;
		}
		if (errno != EEXIST)
			break;
	}
	srv_log(SRV_LOG_WARNING, "cannot keep a copy of %s/%s: %s", sn->dir, file, strerror(errno));
}

/*
 * The open step of a pack's load: `file` read whole into buf's buffer (bf_pack_reopen), *sb its
 * stat. 1 if there is nothing to load: no such file (a pack not yet written; the packs record
 * was checked before, snap_packs_check), or one that is not a valid pack, set aside as .corrupt
 * with every filter in it noted for srv_snap_after_replay (the log may rebuild them: the start
 * goes on as for any bad file). 0 once open; a negative errno (cannot read it) stops the start.
 */
static int snap_load_pack_open(struct srv_snap *sn, const char *file, struct bf_pack *buf,
			       struct stat *sb)
{
	char why[640], label[96];
	struct bf_pack pk = *buf;
	int rc;

	if (fstatat(sn->dirfd, file, sb, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		return 1;
	rc = bf_pack_reopen(sn->dirfd, file, &pk, why, sizeof(why));
	*buf = pk; /* its buffer, whatever the result */
	if (rc == -EINVAL || rc == -ENOTSUP) {
		snap_set_aside(sn, file, why);
		snprintf(label, sizeof(label), "%s (every filter in it)", file);
		snap_aside_note(sn, label, NULL, NULL, 0);
		return 1;
	}
	if (rc)
		srv_log(SRV_LOG_ERR, "snapshot %s/%s: %s; not starting (fix or move the file)",
			sn->dir, file, why);
	return rc;
}

/*
 * Room for an open pack's filters before they are adopted, and the prefault handshake: the
 * prefault thread is told how much the heap will grow, and the registry, the table of ids and
 * the entries are sized for this pack's count times the packs still to load. All best effort:
 * adopting grows what could not be sized here.
 */
static void snap_load_pack_room(struct srv_snap *sn, const struct bf_pack *pk, int pack)
{
	/* Its filters take about as many bytes of heap as they have in the file, if their layers
	 * all come from the heap (not if packs hold layers big enough for mappings of their own:
	 * the room would be populated for nothing). */
	if (sn->cfg->snapshot_pack_bytes < SRV_MMAP_THRESHOLD)
		srv_prefault_expect(sn->prefault, pk->len);
	/* Packs hold about as many each: size the tables for all of them once. */
	size_t expect = sn->nents + (size_t)pk->count * (size_t)(SNAP_PACKS - pack);
	bf_registry_reserve(sn->ctx->reg, expect);
	/* Best effort too: a million ids by doublings faulted in 64 MB, not 32 (adopt grows the
	 * table if this could not). */
	(void)snap_ids_reserve(sn, expect);
	if (sn->ents_cap < expect) {
		struct snap_entry **grown = realloc(sn->ents, expect * sizeof(*grown));

		if (grown) {
			sn->ents = grown;
			sn->ents_cap = expect;
		}
	}
}

/* The id table and the registry's buckets are far larger than the caches: fetch what the entry
 * SNAP_LOAD_AHEAD after entry i will look up while i is decoded (a third of the adopting was
 * waiting on those misses). */
static void snap_load_pack_prefetch(struct srv_snap *sn, const struct bf_pack *pk, uint32_t i)
{
	uint64_t next_id;
	const char *next_name;
	size_t next_len;

	if (i + SNAP_LOAD_AHEAD < pk->count &&
	    bf_pack_entry_peek(pk, i + SNAP_LOAD_AHEAD, &next_id, &next_name, &next_len)) {
		if (next_id && sn->ids_cap)
			__builtin_prefetch(&sn->ids[snap_id_home(sn, next_id)]);
		bf_registry_prefetch(sn->ctx->reg, next_name, next_len);
	}
}

/*
 * Entry i of the pack in `file` is bad (why): logged with its filter's name if that can be read,
 * and left out, as a bad file of its own is set aside: a copy of the pack is kept as .corrupt (once
 * per pack: *kept), the filter is noted for srv_snap_after_replay (the log may rebuild it), and the
 * pack is written again without it.
 */
static void snap_load_pack_bad(struct srv_snap *sn, const struct bf_pack *pk, const char *file,
			       int pack, uint32_t i, const char *why, bool *kept,
			       bool repack[SNAP_PACKS])
{
	const unsigned char *e;
	const char *name = NULL;
	size_t elen, nlen = 0;
	char label[96];

	bf_pack_entry_bytes(pk, i, &e, &elen);
	if (!bf_snapshot_entry_name(e, elen, &name, &nlen))
		name = NULL;
	srv_log(SRV_LOG_ERR,
		"snapshot %s/%s: entry %" PRIu32 " (filter '%.*s'): %s; "
		"not loaded",
		sn->dir, file, i, name ? (int)nlen : 1, name ? name : "?", why);
	if (!*kept)
		snap_keep_copy(sn, file);
	*kept = true;
	repack[pack] = true;
	sn->st.set_aside++;
	snprintf(label, sizeof(label), "%s entry %" PRIu32, file, i);
	snap_aside_note(sn, label, NULL, name, nlen);
}

/*
 * The entry step: entry i of the open pack (pack, in `file`) decoded and adopted. A bad entry is
 * left out (snap_load_pack_bad), and a filter no longer persistent too (its pack is written
 * again without it). 0, or a negative errno that must stop the start (it cannot be decoded in
 * memory, or snap_adopt's).
 */
static int snap_load_pack_entry(struct srv_snap *sn, const struct bf_pack *pk, const char *file,
				int pack, uint32_t i, bool *kept, bool repack[SNAP_PACKS])
{
	struct bf_filter *f = NULL;
	char why[640];
	uint64_t gen;
	int rc;

	snap_load_pack_prefetch(sn, pk, i);
	/* The heap grows by about a filter's size per entry: its new memory is faulted in by the
	 * prefault thread, just ahead of the entries that will use it. */
	if (i % SNAP_LOAD_POKE == 0)
		srv_prefault_poke(sn->prefault);
	rc = bf_pack_entry(pk, i, UINT64_MAX, &f, &gen, why, sizeof(why));
	if (rc == -EINVAL) {
		snap_load_pack_bad(sn, pk, file, pack, i, why, kept, repack);
		return 0;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR,
			"snapshot %s/%s: entry %" PRIu32 ": %s; not starting (raise "
			"max_memory?)",
			sn->dir, file, i, why);
		return rc;
	}
	if (!f->params->persist) {
		bf_filter_free(f);
		repack[pack] = true;
		return 0;
	}
	return snap_adopt(sn, f, gen, false, file, pack, repack);
}

/* Entry i of the open pack is loaded: the load's progress has got to its end. */
static void snap_load_pack_progress(struct srv_snap *sn, const struct bf_pack *pk, uint32_t i)
{
	const unsigned char *e;
	size_t len;

	bf_pack_entry_bytes(pk, i, &e, &len);
	srv_progress_at(&sn->load_progress, sn->load_base + (uint64_t)(e - pk->buf) + len);
}

/* Load pack file `pack`, read into buf's buffer (bf_pack_reopen): opened, room made for its
 * filters, then each entry adopted in turn. 0 (loaded, or set aside) or a negative errno that
 * must stop the start. */
static int snap_load_pack(struct srv_snap *sn, int pack, struct bf_pack *buf, uint64_t *newest,
			  bool repack[SNAP_PACKS])
{
	char file[32];
	struct stat sb;
	bool kept = false;
	int rc;

	snap_pack_name(pack, file);
	rc = snap_load_pack_open(sn, file, buf, &sb);
	if (rc)
		return rc > 0 ? 0 : rc;
	sn->st.loaded_bytes += buf->len;
	if ((uint64_t)sb.st_mtime > *newest)
		*newest = (uint64_t)sb.st_mtime;
	snap_load_pack_room(sn, buf, pack);
	for (uint32_t i = 0; i < buf->count && !rc; i++) {
		rc = snap_load_pack_entry(sn, buf, file, pack, i, &kept, repack);
		snap_load_pack_progress(sn, buf, i);
	}
	sn->load_base += buf->len;
	return rc;
}

/* The bytes of the pack files there are. */
static uint64_t snap_packs_bytes(struct srv_snap *sn)
{
	uint64_t bytes = 0;
	char file[32];
	struct stat sb;

	for (int pack = 0; pack < SNAP_PACKS; pack++) {
		snap_pack_name(pack, file);
		if (fstatat(sn->dirfd, file, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			bytes += (uint64_t)sb.st_size;
	}
	return bytes;
}

int snap_load_all(struct srv_snap *sn)
{
	uint64_t t0 = uv_hrtime(), newest = 0, ns, bytes = 0;
	char **names = NULL;
	size_t n = 0, i;
	int rc;

	/* The names about to be loaded made durable: the process before may have died between a
	 * rename or unlink and its directory's fsync, and a power cut after this start relies on
	 * them (a file it trusts and releases the log for, a dropped filter's file gone). A
	 * failure leaves them as durable as they were before this call: told, not fatal. */
	if (fsync(sn->dirfd))
		srv_log(SRV_LOG_WARNING,
			"data_dir %s: fsync: %s; what the last process renamed or removed may not "
			"be durable yet",
			sn->dir, strerror(errno));
	rc = snap_list(sn, &names, &n, &bytes);
	if (rc) {
		srv_log(SRV_LOG_ERR, "data_dir %s: cannot list: %s", sn->dir, strerror(-rc));
		return rc;
	}
	rc = snap_packs_check(sn);
	if (rc)
		goto out;
	bool repack[SNAP_PACKS] = {false};
	srv_progress_begin(&sn->load_progress, bytes + snap_packs_bytes(sn),
			   sn->cfg->log_progress_bytes, sn->cfg->log_progress_interval,
			   "load of %s", sn->dir);
	sn->load_base = 0;
	/* A million names into the index one by one were a third of the load. */
	bf_registry_defer_names(sn->ctx->reg);
	struct bf_pack buf = {0};
	for (int pack = 0; pack < SNAP_PACKS && !rc; pack++)
		rc = snap_load_pack(sn, pack, &buf, &newest, repack);
	bf_pack_close(&buf);
	for (i = 0; i < n && !rc; i++)
		rc = snap_load_one(sn, names[i], &newest, repack);
	if (bf_registry_index_names(sn->ctx->reg) && !rc) {
		srv_log(SRV_LOG_ERR, "data_dir %s: out of memory indexing the filters' names",
			sn->dir);
		rc = -ENOMEM;
	}
	if (!rc)
		rc = snap_files_check(sn);
	srv_progress_end(&sn->load_progress, rc);
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (rc)
		return rc;
	/* A pack is written again only if it must change: not for having been loaded. */
	for (int pack = 0; pack < SNAP_PACKS; pack++)
		sn->packs[pack].dirty = repack[pack];
	ns = uv_hrtime() - t0;
	sn->st.load_ms = snap_ms(ns);
	if (newest)
		sn->ctx->last_save_unix = newest;
	if (n || sn->st.loaded || sn->st.set_aside)
		srv_log(SRV_LOG_INFO,
			"loaded %" PRIu64 " filters (%" PRIu64 " bytes) from %s in %" PRIu64
			" ms (%.2f GB/s)%s",
			sn->st.loaded, sn->st.loaded_bytes, sn->dir, sn->st.load_ms,
			ns ? (double)sn->st.loaded_bytes / (double)ns : 0.0,
			sn->st.set_aside ? "; some files were set aside, see above" : "");
	return 0;
}

struct bf_filter *srv_snap_loaded(const struct srv_snap *sn, uint64_t id)
{
	const struct snap_idslot *slot;

	if (!sn->ids_cap || !id)
		return NULL;
	slot = snap_id_slot(sn, id);
	return slot->id && slot->e ? slot->e->f : NULL;
}

uint64_t srv_snap_loaded_lsn(const struct srv_snap *sn)
{
	return sn->loaded_lsn;
}

/*
 * A renamed file's filter that no RENAME of the log named (the log is off now, or was lost):
 * it takes its file's name; if another filter has that name, the file is set aside.
 */
static void snap_name_by_file(struct srv_snap *sn, struct snap_idslot *slot)
{
	/* Not slot->e: the replay may have dropped it (its entry is gone). */
	struct bf_filter *f = bf_registry_get_hidden(sn->ctx->reg, slot->id);
	struct snap_entry *e = f ? snap_find(sn, f) : NULL;
	char name[BF_NAME_MAX];
	size_t len;
	int rc;

	if (!e)
		return;
	rc = bf_snapshot_filename_name(slot->renamed, name, &len);
	if (!rc)
		rc = bf_registry_rename(sn->ctx->reg, e->f, name, len);
	if (!rc) {
		srv_log(SRV_LOG_NOTICE,
			"filter '%s' in %s/%s: the log no longer holds its RENAME; named by its "
			"file",
			bf_filter_name(e->f), sn->dir, slot->renamed);
		e->on_disk = false; /* written with its name in the header at the next cycle */
		return;
	}
	snap_detach(sn, e);
	bf_registry_drop(sn->ctx->reg, bf_filter_name(e->f), e->f->name_len);
	e->f = NULL;
	snap_release(e);
	slot->e = NULL;
	sn->st.loaded--;
	snap_set_aside(sn, slot->renamed,
		       rc == -EEXIST ? "a RENAME gave its filter the file's name, which another "
				       "filter has now"
				     : "cannot name its filter by the file's name");
}

/* The load's table of ids goes (naming the renamed files' filters no RENAME named, if name). */
static void snap_ids_free(struct srv_snap *sn, bool name)
{
	for (size_t i = 0; i < sn->ids_cap; i++)
		if (sn->ids[i].renamed) {
			if (name)
				snap_name_by_file(sn, &sn->ids[i]);
			free(sn->ids[i].renamed);
		}
	free(sn->ids);
	sn->ids = NULL;
	sn->ids_cap = sn->ids_n = 0;
	free(sn->renamed_ids);
	sn->renamed_ids = NULL;
	sn->nrenamed = sn->renamed_cap = 0;
}

/* What only a start keeps, freed without a start (it failed). */
void snap_load_state_free(struct srv_snap *sn)
{
	snap_ids_free(sn, false);
	while (sn->nmissing)
		snap_files_explained(sn, 0);
	free(sn->missing);
	sn->missing = NULL;
}

int srv_snap_load_end(struct srv_snap *sn)
{
	int rc = snap_files_report(sn);

	snap_ids_free(sn, !rc);
	if (rc) {
		sn->stopping = true; /* not starting: nothing is written, the record stays */
		return rc;
	}
	/* Written if it does not list the files as they are now: a line that names no file loaded
	 * (one missing, told once or explained by the log, whose records are released later), or
	 * a file loaded that it does not name. */
	size_t nfiled = 0;
	for (size_t i = 0; i < sn->nents; i++)
		nfiled += sn->ents[i]->filed;
	if (sn->files_listed == SIZE_MAX ? nfiled > 0
					 : sn->files_listed != nfiled || sn->files_lines != nfiled)
		sn->files_stale = true;
	return snap_files_sync(sn);
}

void srv_snap_after_replay(struct srv_snap *sn, struct bf_registry *reg)
{
	struct bf_filter **list = NULL;
	size_t n = 0;
	bool by_file = false;

	for (size_t i = 0; i < sn->naside; i++)
		by_file = by_file || sn->aside[i].file;
	if (by_file && bf_registry_list(reg, "", 0, &list, &n))
		n = 0;
	for (size_t i = 0; i < sn->naside; i++) {
		const struct snap_aside *a = &sn->aside[i];
		const struct bf_filter *found = NULL;
		char file[BF_SNAPSHOT_NAME_MAX];

		if (a->name)
			found = bf_registry_get(reg, a->name, strlen(a->name));
		for (size_t j = 0; a->file && j < n && !found; j++) {
			bf_snapshot_filename(bf_filter_name(list[j]), list[j]->name_len, file);
			if (!strcmp(file, a->file))
				found = list[j];
		}
		if (found)
			srv_log(
			    SRV_LOG_NOTICE,
			    "snapshot %s/%s was corrupt: filter '%s' rebuilt from the write-ahead "
			    "log",
			    sn->dir, a->label, bf_filter_name(found));
		else if (!a->file && !a->name)
			srv_log(SRV_LOG_ERR,
				"snapshot %s/%s was corrupt: its filters that the write-ahead log "
				"holds from their creation were rebuilt, the others are lost",
				sn->dir, a->label);
		else
			srv_log(
			    SRV_LOG_ERR,
			    "snapshot %s/%s was corrupt and the write-ahead log no longer holds "
			    "its filter from its creation: that filter is lost",
			    sn->dir, a->label);
	}
	free(list);
	snap_aside_free(sn);
}
