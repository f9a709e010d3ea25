/* SPDX-License-Identifier: MIT */
/*
 * The daemon's write-ahead log (DESIGN.md §6), over server/wal.h: at start, replay the log
 * into the registry the snapshots were loaded into; then append every change the command
 * layer reports (cmd_hooks.log), write the loop iteration's records once per iteration (a
 * uv_check handle: after the iteration's reads were served), and release the replies that
 * waited for them when the log reports them durable. While the log cannot write, the command
 * layer refuses changes (ctx.log_failed), the replies that waited for records not yet durable
 * are given that refusal instead (conn.c, http.c), and the log retries by itself.
 */
#include "server/server_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_record.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/repl.h"
#include "server/snapshot.h"
#include "server/wal.h"

/* Fills the LSNs a checkpoint holds but the log lost (see journal_fill). Never a change. */
#define JOURNAL_REC_NOOP 255
/* Every this many ms, the pass over the filters that finds what the log must keep looks at
 * this many more (about a millisecond of the loop; a million filters take a few seconds). */
#define JOURNAL_RELEASE_MS  100
#define JOURNAL_NEED_BUDGET 16384
/* Ids of dropped filters a replica's replay index may hold beyond twice the filters there are
 * before it is made afresh (journal_follow_end). */
#define JOURNAL_FOLLOW_SLACK 4096
/* Segments are kept zero-filled this far ahead of their records (wal_options). */
#define JOURNAL_PREALLOC (4u << 20)

/* Append a record of an EXEC as its TXN_PART (core/bf_record.h). 0 or a negative errno. */
static int journal_part(struct srv *s, int type, const void *payload, size_t len, uint64_t *lsn)
{
	if (len + 1 > s->txn_rec_cap) {
		size_t cap = s->txn_rec_cap ? s->txn_rec_cap : 4096;
		unsigned char *p;

		while (cap < len + 1)
			cap *= 2;
		p = realloc(s->txn_rec, cap);
		if (!p)
			return -ENOMEM;
		s->txn_rec = p;
		s->txn_rec_cap = cap;
	}
	s->txn_rec[0] = (unsigned char)type;
	if (len)
		memcpy(s->txn_rec + 1, payload, len);
	int rc = wal_append(s->wal, BF_REC_TXN_PART, s->txn_rec, len + 1, lsn);
	if (!rc) {
		s->txn_parts++;
		repl_feed(s, *lsn, BF_REC_TXN_PART, s->txn_rec, len + 1);
	}
	return rc;
}

static uint64_t journal_log(void *arg, int type, const void *payload, size_t len)
{
	struct srv *s = arg;
	uint64_t lsn;
	int rc = s->txn_open ? journal_part(s, type, payload, len, &lsn)
			     : wal_append(s->wal, (unsigned)type, payload, len, &lsn);

	if (rc) {
		srv_log(SRV_LOG_ERR, "write-ahead log: out of memory for a record; change refused");
		return 0;
	}
	if (!s->txn_open)
		repl_feed(s, lsn, (unsigned)type, payload, len);
	s->ctx.logged_lsn = lsn;
	return lsn;
}

/*
 * cmd_hooks.txn: an EXEC begins or ends. Its records are parts, and its end a COMMIT, so a
 * replay applies all of them or none. A COMMIT the log cannot take (out of memory) leaves the
 * parts to be applied at the next record the replay meets: they are in memory already.
 */
static uint64_t journal_txn(void *arg, bool end)
{
	struct srv *s = arg;
	uint64_t lsn;

	if (!end) {
		s->txn_open = true;
		s->txn_parts = 0;
		return 0;
	}
	s->txn_open = false;
	if (!s->txn_parts)
		return 0;
	if (wal_append(s->wal, BF_REC_TXN_COMMIT, NULL, 0, &lsn)) {
		srv_log(SRV_LOG_ERR, "write-ahead log: out of memory for a transaction's end");
		return s->ctx.logged_lsn;
	}
	repl_feed(s, lsn, BF_REC_TXN_COMMIT, NULL, 0);
	s->ctx.logged_lsn = lsn;
	return lsn;
}

static void journal_state(struct srv *s)
{
	bool failed = wal_failed(s->wal), was = s->ctx.log_failed;

	if (failed != was)
		srv_log(failed ? SRV_LOG_ERR : SRV_LOG_NOTICE,
			failed ? "write-ahead log: cannot write (%s); changes are refused until it "
				 "can"
			       : "write-ahead log: writing again%s; changes are accepted",
			failed ? strerror(-wal_error(s->wal)) : "");
	s->ctx.log_failed = failed;
	/* The replies held for records not yet durable cannot wait for them now: they are
	 * released at once as the refusal a change gets while the log fails (an unlogged change
	 * is never acknowledged; the client is not left waiting for the recovery). */
	if (failed && !was) {
		conn_release_waiting(s);
		if (s->http)
			http_release_waiting(s->http);
	}
}

static void journal_on_durable(void *arg, uint64_t lsn)
{
	struct srv *s = arg;

	s->ctx.durable_lsn = lsn;
	journal_state(s);
	conn_release_waiting(s);
	if (s->http)
		http_release_waiting(s->http);
}

/* A released segment that could not be deleted stays and is tried again at the next release. */
static void journal_on_unlink_error(void *arg, const char *segment, int err)
{
	struct srv *s = arg;

	srv_log(SRV_LOG_WARNING, "write-ahead log: delete %s/wal/%s: %s; kept", s->cfg.data_dir,
		segment, strerror(-err));
}

/* Once per loop iteration, after its reads were served: write its records. */
static void journal_on_check(uv_check_t *h)
{
	struct srv *s = h->data;

	uint64_t now = uv_now(&s->loop);

	wal_flush(s->wal);
	journal_state(s);
	repl_flush(s);
	/* Every JOURNAL_RELEASE_MS: delete the segments no filter needs any more, and snapshot
	 * early when the log has grown past wal_max_bytes. */
	if (now - s->wal_release_ms < JOURNAL_RELEASE_MS)
		return;
	s->wal_release_ms = now;
	uint64_t need = srv_snap_log_needed(s->snap, JOURNAL_NEED_BUDGET);
	if (need > wal_next_lsn(s->wal))
		need = wal_next_lsn(s->wal);
	wal_release(s->wal, need);
	if (s->cfg.wal_max_bytes && wal_bytes(s->wal) > s->cfg.wal_max_bytes)
		srv_snap_soon(s->snap);
}

/*
 * Just before the loop sleeps in poll: write the records of changes made since the last check
 * by idle and timer callbacks (libmicrohttpd's requests run from those too). Left to the check
 * handle, which runs after poll, they waited for the next event or the next timer: an HTTP
 * create answered up to a second late.
 */
static void journal_on_prepare(uv_prepare_t *h)
{
	struct srv *s = h->data;

	wal_flush(s->wal);
	journal_state(s);
	repl_flush(s);
}

struct journal_replay {
	struct srv *s;
	struct bf_replay *rp;
	char why[256];
	uint64_t noops;
	/* The parts of a transaction read since its last COMMIT: each u64 LSN, u32 length, then
	 * the part's payload (u8 type, the record's payload). */
	unsigned char *txn;
	size_t txn_len, txn_cap;
	uint64_t txn_parts, txn_dropped;
	uint64_t reg_changes; /* journal_follow: bf_registry_changes when rp was last used */
};

static int journal_apply_one(struct journal_replay *jr, uint64_t lsn, int type,
			     const unsigned char *payload, size_t len)
{
	srv_snap_replayed(jr->s->snap, type, payload, len);
	int rc = bf_replay_apply(jr->rp, lsn, type, payload, len, jr->why, sizeof(jr->why));
	if (rc == -EINVAL)
		return -EBADMSG;
	return rc;
}

/* Hold a transaction's part until its COMMIT. 0, -EBADMSG (not a part), -ENOMEM. */
static int journal_txn_hold(struct journal_replay *jr, uint64_t lsn, const unsigned char *p,
			    size_t len)
{
	uint32_t n = (uint32_t)len;

	if (len < 1 || p[0] == 0 || p[0] == BF_REC_TXN_PART || p[0] == BF_REC_TXN_COMMIT ||
	    p[0] == BF_REC_TXN_ABORT || p[0] == JOURNAL_REC_NOOP) {
		snprintf(jr->why, sizeof(jr->why), "a transaction's part holds no record");
		return -EBADMSG;
	}
	if (jr->txn_len + 12 + len > jr->txn_cap) {
		size_t cap = jr->txn_cap ? jr->txn_cap : 65536;
		unsigned char *q;

		while (cap < jr->txn_len + 12 + len)
			cap *= 2;
		q = realloc(jr->txn, cap);
		if (!q)
			return -ENOMEM;
		jr->txn = q;
		jr->txn_cap = cap;
	}
	memcpy(jr->txn + jr->txn_len, &lsn, 8);
	memcpy(jr->txn + jr->txn_len + 8, &n, 4);
	memcpy(jr->txn + jr->txn_len + 12, p, len);
	jr->txn_len += 12 + len;
	jr->txn_parts++;
	return 0;
}

/* Apply the parts held, in their order, and forget them. */
static int journal_txn_apply(struct journal_replay *jr)
{
	size_t at = 0;
	int rc = 0;

	while (!rc && at < jr->txn_len) {
		uint64_t lsn;
		uint32_t n;

		memcpy(&lsn, jr->txn + at, 8);
		memcpy(&n, jr->txn + at + 8, 4);
		const unsigned char *p = jr->txn + at + 12;
		rc = journal_apply_one(jr, lsn, p[0], p + 1, n - 1);
		at += 12 + n;
	}
	jr->txn_len = 0;
	jr->txn_parts = 0;
	return rc;
}

static int journal_apply(void *arg, uint64_t lsn, unsigned type, const void *payload, size_t len)
{
	struct journal_replay *jr = arg;

	if (type == JOURNAL_REC_NOOP) {
		jr->noops++;
		return 0;
	}
	if (type == BF_REC_TXN_PART)
		return journal_txn_hold(jr, lsn, payload, len);
	if (type == BF_REC_TXN_ABORT) {
		if (jr->txn_parts)
			jr->txn_dropped++;
		jr->txn_len = 0;
		jr->txn_parts = 0;
		return 0;
	}
	/* At its COMMIT, or (one the log could not take) at the next record. */
	if (jr->txn_parts) {
		int rc = journal_txn_apply(jr);
		if (rc)
			return rc;
	}
	if (type == BF_REC_TXN_COMMIT)
		return 0;
	return journal_apply_one(jr, lsn, (int)type, payload, len);
}

/*
 * After the replay: the parts of a transaction the log ends in were cut by a crash before its
 * COMMIT. None of it is applied; an ABORT tells the next replay so, before any record of this
 * run follows them. 0 or -ENOMEM.
 */
static int journal_txn_cut(struct srv *s, struct journal_replay *jr)
{
	if (jr->txn_parts) {
		srv_log(SRV_LOG_WARNING,
			"write-ahead log: a transaction cut short (%" PRIu64
			" records, no end) is not applied",
			jr->txn_parts);
		jr->txn_dropped++;
		jr->txn_len = 0;
		jr->txn_parts = 0;
		if (wal_append(s->wal, BF_REC_TXN_ABORT, NULL, 0, NULL))
			return -ENOMEM;
	}
	free(jr->txn);
	jr->txn = NULL;
	return 0;
}

static void journal_dropping(void *arg, struct bf_filter *f, bool remove_file)
{
	struct srv *s = arg;

	(void)srv_snap_dropping(s->snap, f, remove_file); /* replay drops; never refused */
}

static void journal_created(void *arg, struct bf_filter *f)
{
	struct srv *s = arg;

	srv_snap_created(s->snap, f);
}

static void journal_renamed(void *arg, struct bf_filter *f, const char *from, size_t from_len)
{
	struct srv *s = arg;

	/* A failure is logged; the next cycle retries. */
	(void)srv_snap_renamed(s->snap, f, from, from_len);
}

static struct bf_filter *journal_lookup(void *arg, uint64_t id)
{
	struct srv *s = arg;

	return srv_snap_loaded(s->snap, id);
}

/*
 * A power cut can lose log records that a checkpoint already holds (it was renamed into place
 * before the log's fdatasync covered them). The log then ends before that checkpoint's LSN, and
 * new records would reuse LSNs the next replay skips for that filter. Append no-op records up
 * to it, so every new record is newer than every checkpoint.
 */
static int journal_fill(struct srv *s, uint64_t newest)
{
	uint64_t next = wal_next_lsn(s->wal), n = 0;

	for (; next + n <= newest; n++)
		if (wal_append(s->wal, JOURNAL_REC_NOOP, NULL, 0, NULL))
			return -ENOMEM;
	if (n)
		srv_log(SRV_LOG_WARNING,
			"write-ahead log: it ends at LSN %" PRIu64
			" but a snapshot holds LSN %" PRIu64
			" (a power cut lost records the snapshot has); %" PRIu64
			" LSNs skipped so that none is reused",
			next - 1, newest, n);
	return 0;
}

/*
 * Log why the replay at start failed (rc, the log's why, the record's reason jr_why), with what
 * the operator can do about it: a corrupt log or missing segments name the flag that goes on
 * without them.
 */
static void journal_replay_failed(const char *dir, int rc, const char *why, const char *jr_why)
{
	if (rc == -EBADMSG && jr_why[0])
		srv_log(SRV_LOG_ERR, "write-ahead log %s: %s: %s; not starting", dir, why, jr_why);
	else if (rc == -EBADMSG)
		srv_log(SRV_LOG_ERR,
			"write-ahead log %s: %s; not starting (start once with "
			"--wal-truncate-corrupt to cut the log there, losing what follows)",
			dir, why);
	else if (rc == -ENOENT && why[0])
		srv_log(SRV_LOG_ERR,
			"write-ahead log %s: %s; not starting (put the segments back, or start "
			"once with --accept-missing-files to go on without them)",
			dir, why);
	else
		srv_log(SRV_LOG_ERR, "write-ahead log %s: replay: %s", dir,
			why[0] ? why : strerror(-rc));
}

/* Start the loop's check and prepare handles that drive the log each turn. 0, or libuv's
 * error with neither handle left open. */
static int journal_handles_start(struct srv *s)
{
	int rc = uv_check_init(&s->loop, &s->wal_check);

	if (rc)
		return rc;
	rc = uv_prepare_init(&s->loop, &s->wal_prepare);
	if (rc) {
		uv_close((uv_handle_t *)&s->wal_check, NULL);
		return rc;
	}
	s->wal_check_init = true;
	s->wal_check.data = s;
	s->wal_prepare.data = s;
	uv_check_start(&s->wal_check, journal_on_check);
	uv_prepare_start(&s->wal_prepare, journal_on_prepare);
	return 0;
}

int journal_start(struct srv *s)
{
	struct wal_options o = {
	    .loop = &s->loop,
	    .fsync = (enum wal_fsync)s->cfg.wal_fsync,
	    .segment_bytes = s->cfg.wal_segment_bytes,
	    .prealloc_bytes = JOURNAL_PREALLOC,
	    .on_durable = journal_on_durable,
	    .on_unlink_error = journal_on_unlink_error,
	    .arg = s,
	    .accept_missing = s->accept_missing_files,
	};
	struct journal_replay jr = {.s = s};
	struct wal_replay_stats st;
	char dir[sizeof(s->cfg.data_dir) + 8], why[512] = "";
	uint64_t from, newest, limit;
	int rc;

	if (!s->cfg.wal)
		return 0;
	snprintf(dir, sizeof(dir), "%s/wal", s->cfg.data_dir);
	o.dir = dir;
	rc = wal_open(&o, &s->wal, why, sizeof(why));
	if (rc) {
		srv_log(SRV_LOG_ERR, "write-ahead log %s: %s", dir, why);
		return rc;
	}
	/* The whole log that is left: segments go only once every checkpoint covers them, so
	 * what is left may hold the create of a filter no checkpoint has yet, older than every
	 * loaded one's LSN; records a checkpoint holds are skipped per filter. */
	from = 1;
	newest = srv_snap_loaded_lsn(s->snap);
	/* What was acknowledged is restored whatever max_memory says now. */
	limit = bf_registry_max_memory(s->reg);
	bf_registry_set_max_memory(s->reg, 0);
	rc = bf_replay_new(s->reg, journal_lookup, journal_dropping, journal_created,
			   journal_renamed, s, &jr.rp);
	if (!rc)
		rc = wal_replay(s->wal, from, s->wal_truncate_corrupt, journal_apply, &jr, &st, why,
				sizeof(why));
	bf_registry_set_max_memory(s->reg, limit);
	if (rc) {
		journal_replay_failed(dir, rc, why, jr.why);
		goto fail;
	}
	if (why[0])
		srv_log(SRV_LOG_WARNING, "write-ahead log %s: %s", dir, why);
	struct bf_replay_stats rs;
	bf_replay_finish(jr.rp);
	bf_replay_stats(jr.rp, &rs);
	srv_log(SRV_LOG_INFO,
		"write-ahead log: replayed %" PRIu64 " records (%" PRIu64 " keys) from LSN %" PRIu64
		" in %" PRIu64 " ms; %" PRIu64 " already in snapshots",
		rs.applied, rs.keys, from, st.ns / 1000000, rs.skipped);
	s->wal_replay_records = rs.applied;
	s->wal_replay_ns = st.ns;
	bf_replay_free(jr.rp);
	jr.rp = NULL;
	rc = journal_txn_cut(s, &jr);
	if (!rc)
		rc = journal_fill(s, newest);
	if (rc)
		goto fail;
	s->ctx.logged_lsn = wal_next_lsn(s->wal) - 1;
	srv_snap_after_replay(s->snap, s->reg);

	rc = journal_handles_start(s);
	if (rc)
		goto fail;
	s->ctx.hooks.log = journal_log;
	s->ctx.hooks.txn = journal_txn;
	s->ctx.durable_lsn = wal_durable_lsn(s->wal);
	return 0;
fail:
	free(jr.txn);
	bf_replay_free(jr.rp);
	wal_close(s->wal);
	s->wal = NULL;
	return rc;
}

/* A replica's replay, made if missing; its index of the filters by id kept from one record to
 * the next while no other path added or took out a filter (on a replica none does): made
 * afresh per read, it would visit every filter each time. NULL if out of memory. */
static struct journal_replay *journal_follow_replay(struct srv *s)
{
	struct journal_replay *jr = s->follow;

	if (!jr) {
		jr = calloc(1, sizeof(*jr));
		if (!jr)
			return NULL;
		jr->s = s;
		s->follow = jr;
	}
	if (jr->rp && bf_registry_changes(s->reg) != jr->reg_changes) {
		bf_replay_free(jr->rp);
		jr->rp = NULL;
	}
	if (!jr->rp && bf_replay_new(s->reg, NULL, journal_dropping, journal_created,
				     journal_renamed, s, &jr->rp))
		return NULL;
	return jr;
}

int journal_follow(struct srv *s, unsigned type, const void *p, size_t len, char *why,
		   size_t whylen)
{
	struct journal_replay *jr;
	uint64_t lsn, limit;
	int rc;

	if (!s->wal)
		return -EINVAL;
	jr = journal_follow_replay(s);
	if (!jr)
		return -ENOMEM;
	/* Applied, then logged: a record this daemon cannot apply never reaches its log (a
	 * restart would refuse to replay it). It is applied under the LSN its append takes. */
	lsn = wal_next_lsn(s->wal);
	/* What the primary acknowledged is taken whatever max_memory says here. */
	limit = bf_registry_max_memory(s->reg);
	bf_registry_set_max_memory(s->reg, 0);
	jr->why[0] = 0;
	rc = journal_apply(jr, lsn, type, p, len);
	bf_registry_set_max_memory(s->reg, limit);
	jr->reg_changes = bf_registry_changes(s->reg);
	if (!rc) {
		rc = wal_append(s->wal, type, p, len, &lsn);
		if (rc)
			snprintf(jr->why, sizeof(jr->why),
				 "applied, but the log could not take it");
		else
			s->ctx.logged_lsn = lsn;
	}
	if (rc && why)
		snprintf(why, whylen, "%s", jr->why[0] ? jr->why : strerror(-rc));
	return rc;
}

void journal_follow_end(struct srv *s)
{
	struct journal_replay *jr = s->follow;

	/* Kept (journal_follow_replay), unless the ids of filters dropped since it was made
	 * outnumber those there are: then made afresh, smaller, at the next record. */
	if (jr && jr->rp &&
	    bf_replay_indexed(jr->rp) > 2 * bf_registry_count(s->reg) + JOURNAL_FOLLOW_SLACK) {
		bf_replay_free(jr->rp);
		jr->rp = NULL;
	}
}

void journal_follow_abort(struct srv *s)
{
	struct journal_replay *jr = s->follow;

	if (!jr)
		return;
	if (jr->txn_parts && s->wal)
		(void)wal_append(s->wal, BF_REC_TXN_ABORT, NULL, 0, NULL);
	bf_replay_free(jr->rp);
	free(jr->txn);
	free(jr);
	s->follow = NULL;
}

void journal_metrics(struct srv *s, struct metrics_wal *out)
{
	struct wal_stats st;
	struct srv_conn *c;
	uint64_t waiting = 0;

	if (!s->wal)
		return;
	wal_get_stats(s->wal, &st);
	LIST_FOREACH(c, &s->waiting, wait_link)
	waiting++;
	if (s->http)
		waiting += http_waiting(s->http);
	*out = (struct metrics_wal){
	    .enabled = true,
	    .bytes = st.bytes,
	    .segments = st.segments,
	    .written_bytes = st.bytes_written,
	    .records = st.appended,
	    .fsyncs = st.fsyncs,
	    .fsync_ns = st.fsync_ns,
	    .fsync_bucket_us = wal_fsync_bucket_us,
	    .failures = st.failures,
	    .recoveries = st.recoveries,
	    .failing = st.failed,
	    .waiting = waiting,
	    .replay_records = s->wal_replay_records,
	    .replay_ns = s->wal_replay_ns,
	};
	_Static_assert(METRICS_WAL_BUCKETS == WAL_FSYNC_BUCKETS, "one histogram");
	memcpy(out->fsync_hist, st.fsync_hist, sizeof(out->fsync_hist));
}

void journal_stop(struct srv *s)
{
	if (!s->wal)
		return;
	s->ctx.hooks.log = NULL;
	s->ctx.hooks.txn = NULL;
	free(s->txn_rec);
	s->txn_rec = NULL;
	s->txn_rec_cap = 0;
	if (s->wal_check_init) {
		uv_close((uv_handle_t *)&s->wal_check, NULL);
		uv_close((uv_handle_t *)&s->wal_prepare, NULL);
	}
	s->wal_check_init = false;
	/* What the checkpoints on disk cover now need not be replayed by the next start (the
	 * final snapshots still running only lower what is needed later, never this). */
	uint64_t need = srv_snap_log_needed(s->snap, 0);
	if (need > wal_next_lsn(s->wal))
		need = wal_next_lsn(s->wal);
	wal_release(s->wal, need);
	int rc = wal_close(s->wal);
	if (rc)
		srv_log(SRV_LOG_ERR,
			"write-ahead log: closing: %s; changes not in a snapshot may "
			"be lost",
			strerror(-rc));
	s->wal = NULL;
}
