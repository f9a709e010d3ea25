/* SPDX-License-Identifier: MIT */
/*
 * Paging (bloomd's close, cold filters): a filter's layers go once a durable file of its own
 * holds it as it is (a large one is written in the background first, the command waiting:
 * checkpoint.c), and come back at its next use, read on the threadpool (srv_snap_page_in);
 * srv_snap_cold() pages out the filters unused for a while.
 */
#include "server/snapshot_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/log.h"

/* ---------------------------------------------------------------------------------------- */
/* Paging (bloomd's close, cold filters) */

void srv_snap_set_paged_in(struct srv_snap *sn, void (*fn)(void *arg), void *arg)
{
	sn->paged_in = fn;
	sn->paged_arg = arg;
}

int srv_snap_page_out(struct srv_snap *sn, struct bf_filter *f)
{
	struct snap_entry *e;
	bool restart = false;
	int rc;

	if (!f->params->persist)
		return -ENOTSUP;
	if (f->paged)
		return 0;
	e = snap_find(sn, f);
	if (!e)
		return -ENOENT;
	if (e->wait_error) {
		rc = e->wait_error; /* the close that waited answers it; the next one retries */
		e->wait_error = 0;
		return rc;
	}
	if (e->waited) {
		e->wait_close = true; /* a flush's write is under way: paged out after it */
		return -EINPROGRESS;
	}
	/* A large filter that must be written is written in the background, as a checkpoint
	 * writes it, and paged out then (the command waits; other clients do not). */
	if ((snap_dirty(e) || !e->own_file) && e->pack < 0 && !sn->stopping &&
	    bf_filter_bytes(f) > SRV_SNAP_SLICE) {
		rc = ckpt_wait_add(sn, e, true);
		if (rc)
			return rc;
		ckpt_step(sn);
		return -EINPROGRESS;
	}
	/* Its layers go: a copy of them in progress is given up (the file is written now). */
	if (sn->copy && sn->copy->e == e) {
		snap_job_copy_abort(sn);
		restart = true;
	}
	/* On disk as a file of its own, durable, as it is now: the load on its next use reads
	 * that file. */
	if (snap_dirty(e) || e->pack >= 0 || !e->own_file || restart) {
		rc = snap_write_now(sn, e);
		if (rc) {
			if (restart)
				ckpt_step(sn);
			return rc;
		}
	}
	rc = bf_filter_page_out(f);
	if (!rc)
		srv_log(SRV_LOG_DEBUG, "filter '%s' paged out", bf_filter_name(f));
	if (restart)
		ckpt_step(sn);
	return rc;
}

struct snap_pagein {
	uv_work_t req;
	struct srv_snap *sn;
	struct snap_entry *e;
	struct bf_filter *copy;
	int rc;
	char why[320];
	char file[BF_SNAPSHOT_NAME_MAX];
};

static void snap_pagein_work(uv_work_t *req)
{
	struct snap_pagein *l = req->data;
	uint64_t gen;

	l->rc = bf_snapshot_read(l->sn->dirfd, l->file, &l->copy, &gen, l->why, sizeof(l->why));
}

static void snap_pagein_after(uv_work_t *req, int status)
{
	struct snap_pagein *l = req->data;
	struct snap_entry *e = l->e;
	struct srv_snap *sn = l->sn;
	int rc = status ? status : l->rc;

	e->loading = false;
	if (e->f && e->f->paged) {
		if (!rc && (rc = bf_filter_page_in(e->f, l->copy)) == 0)
			l->copy = NULL;
		else if (rc == -ENOMEM)
			snprintf(l->why, sizeof(l->why), "it would pass max_memory");
		else if (!l->why[0])
			snprintf(l->why, sizeof(l->why), "%s", strerror(-rc));
		if (rc) {
			e->load_error = (int16_t)rc;
			srv_log(SRV_LOG_ERR, "filter '%s': cannot load it from %s/%s: %s",
				bf_filter_name(e->f), sn->dir, l->file, l->why);
		} else {
			srv_log(SRV_LOG_DEBUG, "filter '%s' paged in from %s", bf_filter_name(e->f),
				l->file);
		}
	}
	bf_filter_free(l->copy);
	free(l);
	snap_release(e);
	if (sn->paged_in)
		sn->paged_in(sn->paged_arg);
}

int srv_snap_page_in(struct srv_snap *sn, struct bf_filter *f)
{
	struct snap_entry *e = snap_find(sn, f);
	struct snap_pagein *l;
	int rc;

	if (!e)
		return -ENOENT;
	if (e->load_error) {
		rc = e->load_error; /* the commands that waited answer it; the next one retries */
		e->load_error = 0;
		return rc;
	}
	if (e->loading)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->req.data = l;
	l->sn = sn;
	l->e = e;
	snap_file(e, l->file);
	rc = uv_queue_work(sn->loop, &l->req, snap_pagein_work, snap_pagein_after);
	if (rc) {
		free(l);
		return rc;
	}
	e->loading = true;
	return 0;
}

size_t srv_snap_cold(struct srv_snap *sn, uint32_t now_s, uint32_t interval, size_t budget)
{
	size_t n = 0, writes = 0;

	if (!interval || sn->stopping)
		return 0;
	for (size_t k = 0; k < budget && sn->nents; k++) {
		struct snap_entry *e;

		if (sn->cold_pos >= sn->nents)
			sn->cold_pos = 0;
		e = sn->ents[sn->cold_pos++];
		if (!e->f || e->f->paged || e->loading || e->busy || e->packing ||
		    now_s - e->f->used_s <= interval || snap_dirty(e))
			continue;
		/* A packed one is written as a file of its own first: a few per call. */
		if (e->pack >= 0 && writes++ >= 16)
			continue;
		if (srv_snap_page_out(sn, e->f) == 0)
			n++;
	}
	return n;
}
