/* SPDX-License-Identifier: MIT */
/*
 * Payloads of the write-ahead log's records: what each change to a filter looks like in the
 * log, built and read here so that core stays the one place that encodes filters. The log
 * itself (framing, LSN, checksum, segments) is the server's; it treats these bytes as opaque.
 *
 * A filter is named by its id (struct bf_filter.id), never by its name, and a key by its 128-bit
 * hash under the filter's seed (bf_filter_hash), never by its bytes. All integers little-endian.
 *
 *   CREATE  u64 id, u64 seed, u64 capacity, f64 error_rate, u32 expansion, u8 type, u8 persist,
 *           u8 name_len, name (1..200 bytes), f64 ratio (the tightening ratio), f64 first (the
 *           first layer's share of error_rate); a record written before either existed ends
 *           before it, and has 0.5
 *   ADD     u64 id, then 16 bytes per key (lo, hi), at least one key
 *   DELETE  as ADD (counting filters)
 *   DROP    u64 id (the filter and its checkpoint are gone)
 *   CLEAR   u64 id (the filter leaves memory; its checkpoint stays; not written today: a
 *           cleared filter comes back from its checkpoint and the log at the next start)
 *   LOAD    u64 id, then a snapshot header (BF.LOADCHUNK's first chunk: a filter with zero blocks)
 *   BODY    u64 id, u64 offset, then bytes of the filter's body (a later BF.LOADCHUNK chunk)
 *   FLUSHALL no payload: every filter whose last change is older is gone
 *   RENAME  u64 id, u8 name_len, name: the filter's new name; a filter holding that name whose
 *           last change is older is dropped (RENAME over an existing key) in the same record
 *   EXPIRE  u64 id, u64 expire_ms: the filter expires at that Unix time in ms (0: never)
 *
 * A transaction (RESP's EXEC) is one unit: each of its records is logged as a TXN_PART (u8 the
 * record's type, then its payload), and a TXN_COMMIT (no payload) follows the last. A replay
 * holds the parts back and applies them at their COMMIT, or drops them at a TXN_ABORT (no
 * payload: written by the next start after a log that ends in parts, the crash's cut) or at
 * the log's end. Parts are never written before a record of another kind with no COMMIT in
 * between (a COMMIT the log could not take is the exception: such parts were applied in
 * memory and are applied at the next record). A log written before transactions existed has
 * none of the three, and replays as it did; one with them is refused by an older build (an
 * unknown type).
 */
#ifndef BF_RECORD_H
#define BF_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_filter.h"
#include "core/bf_registry.h"

enum bf_record_type {
	BF_REC_CREATE = 1,
	BF_REC_ADD = 2,
	BF_REC_DELETE = 3,
	BF_REC_DROP = 4,
	BF_REC_CLEAR = 5,
	BF_REC_LOAD = 6,
	BF_REC_BODY = 7,
	/* FLUSHALL: every filter whose last change is older is gone. No payload. */
	BF_REC_FLUSHALL = 8,
	BF_REC_RENAME = 9,
	BF_REC_EXPIRE = 10,
	BF_REC_TXN_PART = 11,
	BF_REC_TXN_COMMIT = 12,
	BF_REC_TXN_ABORT = 13,
};

/* Largest CREATE payload, and the bytes an ADD or DELETE takes before its hashes. */
#define BF_RECORD_CREATE_MAX (8 + 8 + 8 + 8 + 4 + 3 + BF_NAME_MAX + 16)
#define BF_RECORD_RENAME_MAX (8 + 1 + BF_NAME_MAX)
#define BF_RECORD_KEYS_HEAD  8
#define BF_RECORD_HASH_BYTES 16

/* CREATE for f (its id, seed, parameters and name) into buf (BF_RECORD_CREATE_MAX bytes).
 * Returns the payload's length. */
size_t bf_record_create(const struct bf_filter *f, unsigned char *buf);

/* The head of an ADD, DELETE, DROP or CLEAR (the id) into buf (8 bytes); ADD and DELETE then
 * take bf_record_put_hash() for each key. Returns 8. */
size_t bf_record_id(uint64_t id, unsigned char *buf);
void bf_record_put_hash(struct bf_hash h, unsigned char *buf);

/* RENAME of filter id to name[0, len) into buf (BF_RECORD_RENAME_MAX bytes). Returns the
 * payload's length. */
size_t bf_record_rename(uint64_t id, const char *name, size_t len, unsigned char *buf);

/* A CREATE payload, decoded and checked (id non-zero, valid name and parameters). */
struct bf_record_create {
	uint64_t id, seed;
	struct bf_params params;
	char name[BF_NAME_MAX + 1];
	size_t name_len;
};

/*
 * Decode. Each returns 0, or -EINVAL if the payload is malformed for its type (wrong length,
 * zero id, bad name or parameters): a record that passed the log's checksum but that this build
 * cannot apply, which the caller reports as corruption.
 * bf_record_read_keys: ADD/DELETE: *id, *hashes (unaligned: read with bf_record_get_hash) and
 * *n (>= 1). bf_record_read_id: DROP/CLEAR. bf_record_read_blob: LOAD/BODY: *id, and the
 * bytes after it (after the offset for BODY, *off set; off may be NULL for LOAD).
 */
int bf_record_read_create(const unsigned char *p, size_t len, struct bf_record_create *out);
int bf_record_read_keys(const unsigned char *p, size_t len, uint64_t *id,
			const unsigned char **hashes, size_t *n);
int bf_record_read_id(const unsigned char *p, size_t len, uint64_t *id);
int bf_record_read_blob(const unsigned char *p, size_t len, int type, uint64_t *id, uint64_t *off,
			const unsigned char **data, size_t *dlen);
struct bf_hash bf_record_get_hash(const unsigned char *p);
/* EXPIRE: 16 bytes into buf. */
size_t bf_record_expire(uint64_t id, uint64_t expire_ms, unsigned char *buf);
int bf_record_read_expire(const unsigned char *p, size_t len, uint64_t *id, uint64_t *expire_ms);
/* RENAME: *id and the new name (a valid one, pointing into p). */
int bf_record_read_rename(const unsigned char *p, size_t len, uint64_t *id, const char **name,
			  size_t *name_len);

/*
 * Replay: apply the log's records, in LSN order, to a registry loaded from checkpoints. A
 * record is skipped when its filter's checkpoint already holds it (record LSN <= filter's
 * lsn); a record for an id neither loaded nor created earlier in the replay is skipped and
 * counted (its filter was dropped after a checkpoint that no longer exists).
 */
struct bf_replay;

struct bf_replay_stats {
	uint64_t applied, skipped, unknown; /* records */
	uint64_t keys;			    /* keys added or deleted */
};

/* A filter leaves the registry during replay (DROP: remove_file; CLEAR: not), just before it
 * is freed: the owner forgets its files and bookkeeping. */
typedef void (*bf_replay_dropping_fn)(void *arg, struct bf_filter *f, bool remove_file);

/* A filter a record created (CREATE, LOAD) has just joined the registry. */
typedef void (*bf_replay_created_fn)(void *arg, struct bf_filter *f);

/* A filter a record renamed from the name from[0, from_len) (f->name is the new one). */
typedef void (*bf_replay_renamed_fn)(void *arg, struct bf_filter *f, const char *from,
				     size_t from_len);

/*
 * The filter of r with this id when the replay began (loaded from a checkpoint), or NULL: the
 * owner's own table by id, kept from its load. The replay asks it only about ids its records
 * name, and never again about one it dropped, created or renamed (it knows those itself), so
 * the answer may be as of the replay's start.
 */
typedef struct bf_filter *(*bf_replay_lookup_fn)(void *arg, uint64_t id);

/* A replay onto r; any callback may be NULL. Without lookup, the first record indexes every
 * filter of r by id (one pass over all of them). Returns 0 or -ENOMEM. */
int bf_replay_new(struct bf_registry *r, bf_replay_lookup_fn lookup, bf_replay_dropping_fn dropping,
		  bf_replay_created_fn created, bf_replay_renamed_fn renamed, void *arg,
		  struct bf_replay **out);

/* The ids the replay's index holds (the filters it indexed, and those it saw dropped). */
size_t bf_replay_indexed(const struct bf_replay *rp);

/*
 * Apply one record. Returns 0 (applied or skipped); -EINVAL if the payload is malformed or
 * contradicts the registry (a CREATE of a name another filter holds), with the reason in why;
 * -ENOMEM if a filter or layer cannot be allocated. Lift the registry's memory limit for the
 * replay (bf_registry_set_max_memory 0): what was acknowledged is restored, then the limit
 * applies to what comes next.
 */
int bf_replay_apply(struct bf_replay *rp, uint64_t lsn, int type, const unsigned char *p,
		    size_t len, char *why, size_t whylen);

/* After the last record: drop the filters a RENAME took to a name a newer checkpoint holds
 * and nothing renamed since (they were replaced after; see replay_rename in bf_record.c). */
void bf_replay_finish(struct bf_replay *rp);
void bf_replay_stats(const struct bf_replay *rp, struct bf_replay_stats *out);
void bf_replay_free(struct bf_replay *rp);

#endif
