/* SPDX-License-Identifier: MIT */
/*
 * Snapshot files: one per persistent filter. A fixed header (magic, version, parameters, seed,
 * stats, layer table, body length and checksum, header checksum) followed by the layers'
 * blocks. The reader validates every field before it trusts a byte; the writer is crash-safe
 * (temp file, fallocate, write, fsync, rename, fsync of the directory).
 *
 * All integers are little-endian on disk. Layout, version 3:
 *   0     magic "BLOSSOM\0"         8
 *   8     version (1)               u32
 *   12    header_len                u32   multiple of 4096; body starts here
 *   16    type                      u32   0 bloom, 1 counting
 *   20    expansion                 u32
 *   24    capacity                  u64
 *   32    error_rate                f64
 *   40    seed                      u64
 *   48    persist                   u32
 *   52    nlayers                   u32   1..BF_MAX_LAYERS (1..32 before version 3)
 *   56    items                     u64
 *   64    generation                u64   bumped by the caller per snapshot
 *   72    body_len                  u64   sum of the layers' bytes
 *   80    body_checksum             u64   XXH3-64 of the body
 *   88    stats                     9 x u64 (bf_filter_stats_encode's order)
 *   160   name_len                  u32
 *   164   name                      200 bytes, zero padded
 *   364   pad to 368
 *   368   layers                    first 32 x 40 bytes: nblocks u64, capacity u64, items u64,
 *                                   error_rate f64, b u8, counting u8, 6 bytes zero
 *   1648  id                        u64   the filter's id in log records (version 2 on)
 *   1656  lsn                       u64   the last logged change the file holds (version 2 on)
 *   1664  expire_ms                 u64   Unix time in ms it expires at, 0 never (version 3 on)
 *   1672  ratio                     f64   tightening ratio r (struct bf_params; version 3
 *                                         on, 0.5 before)
 *   1680  first                     f64   the first layer's share of error_rate (struct
 *                                         bf_params; version 4 on, 0.5 before)
 *   1688  header_checksum           u64   XXH3-64 of bytes 0..1688, then of bytes
 *                                         4096..header_len (version 3 on; version 3 has it
 *                                         at 1680, of bytes 0..1680 then 4096..header_len)
 *   1696  zero up to 4096
 *   4096  layers 32 and on, 40 bytes each, zero padded to header_len (version 3 on: header_len
 *         is 4096 for up to 32 layers, and grows by 4096 for every 102 more)
 * Version 1 (written before the log existed) ends with its checksum at 1648 (of bytes 0..1648);
 * it is still read, as id 0 and lsn 0. Version 2 ends with its checksum at 1664 (of bytes
 * 0..1664), read as never expiring.
 */
#ifndef BF_SNAPSHOT_H
#define BF_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf_filter.h"

#define BF_SNAPSHOT_VERSION    4
#define BF_SNAPSHOT_HEADER_LEN 4096
#define BF_SNAPSHOT_SUFFIX     ".bsnap"
#define BF_SNAPSHOT_TMP_SUFFIX ".tmp"
/* Longest file name bf_snapshot_filename() writes, NUL included. */
#define BF_SNAPSHOT_NAME_MAX 256

/*
 * The file name for a filter name: bytes outside [A-Za-z0-9_-] percent-encoded (so "../x"
 * is "%2E%2E%2Fx"), then BF_SNAPSHOT_SUFFIX; a name whose encoding is too long keeps a prefix
 * and adds "~" and a 64-bit hash of the whole name. Never contains '/', never starts with '.'.
 * Writes at most BF_SNAPSHOT_NAME_MAX bytes including the NUL.
 */
void bf_snapshot_filename(const char *name, size_t len, char out[BF_SNAPSHOT_NAME_MAX]);

/*
 * The filter name file is the file name of (the inverse of bf_snapshot_filename): 0 and
 * out[0, *len), or -EINVAL if file is not one, or is one of a name too long to be spelled out
 * (cut, with its hash). out has room for BF_NAME_MAX bytes.
 */
int bf_snapshot_filename_name(const char *file, char *out, size_t *len);

/*
 * Write f's snapshot as `filename` in the directory dirfd, crash-safe: create
 * filename + ".tmp" with O_EXCL, posix_fallocate the full size (a full disk fails here, not
 * as SIGBUS later), pwrite header and body, check the length, fsync, rename over filename,
 * fsync the directory. On any failure the temp file is removed and an existing snapshot
 * stays as it was. f must not change during the call (pass a copy if the owner goes on).
 * Returns 0, or a negative errno with *step naming the failing step ("open", "fallocate",
 * "write", "fsync", "rename", "fsync dir") if step is not NULL.
 */
int bf_snapshot_write(const struct bf_filter *f, uint64_t generation, int dirfd,
		      const char *filename, const char **step);

/*
 * The progress of a long read or write, for its caller to report: fn(arg, done, total) is
 * called on the calling thread after each BF_IO_STEP bytes of the file (and after its last
 * bytes) have been moved, with done counted from the file's first byte. Nothing else.
 */
struct bf_io_progress {
	void (*fn)(void *arg, uint64_t done, uint64_t total);
	void *arg;
};
#define BF_IO_STEP ((size_t)16 << 20)

/* bf_snapshot_write, telling pr (if not NULL) how far the write has got. */
int bf_snapshot_write_progress(const struct bf_filter *f, uint64_t generation, int dirfd,
			       const char *filename, const struct bf_io_progress *pr,
			       const char **step);

/*
 * Encode f's header (bf_snapshot_header_len(f) bytes into h): what a snapshot file starts with, and
 * what BF.SCANDUMP sends first, so one reader's rules judge both. body_sum is the XXH3-64 of the
 * layers' bytes in order (0 in a dump, whose blocks follow in chunks and may change meanwhile).
 */
void bf_snapshot_header(const struct bf_filter *f, uint64_t generation, uint64_t body_sum,
			unsigned char *h);
/* The length of f's header: BF_SNAPSHOT_HEADER_LEN, more for a chain of over 32 layers. */
size_t bf_snapshot_header_len(const struct bf_filter *f);

struct bf_snapshot_info {
	uint64_t generation;
	uint64_t body_len; /* bytes of blocks that follow the header */
	uint64_t body_sum; /* as encoded; the caller checks it once it has the body */
};

/*
 * Check a header with every rule bf_snapshot_read applies to a file's header (magic, version,
 * checksum, parameters, layer geometry against the sizing model, item counts, zero padding),
 * and build the filter it describes: parameters, seed, name, stats, item counts, its layers
 * allocated with zeroed blocks, charged to no budget. Layers needing more than max_bytes are
 * refused before anything is allocated. Returns 0 with *out and *info set; -EINVAL (corrupt,
 * with the reason in why), -ENOTSUP (unknown version), -ENOMEM.
 */
int bf_snapshot_decode(const unsigned char *h, size_t len, uint64_t max_bytes,
		       struct bf_filter **out, struct bf_snapshot_info *info, char *why,
		       size_t whylen);

/*
 * Read and validate the snapshot `filename` in dirfd, building a new filter (no budget;
 * adopt it into a registry). Every header field is checked (magic, version, checksums,
 * parameters, layer geometry against the sizing model, lengths against the file size) before
 * the body is used. Returns 0 with *out and *generation set, or a negative errno with a
 * one-line reason in why: -ENOENT/-EACCES/... (cannot open), -EINVAL (corrupt: "bad magic",
 * "header checksum mismatch", "truncated: 1234 of 5678 bytes", ...), -ENOTSUP (a version this
 * build does not know), -ENOMEM.
 */
int bf_snapshot_read(int dirfd, const char *filename, struct bf_filter **out, uint64_t *generation,
		     char *why, size_t whylen);
/* bf_snapshot_read, telling pr (if not NULL) how far the body's read has got. */
int bf_snapshot_read_progress(int dirfd, const char *filename, struct bf_filter **out,
			      uint64_t *generation, const struct bf_io_progress *pr, char *why,
			      size_t whylen);

/*
 * Packed entries: one small filter in a pack file (DESIGN.md §6: a million small filters are
 * not a million files). The same fields as a file's header, and the same rules judge them, in
 * a compact form. All integers little-endian:
 *   0   entry_len u32 (the whole entry, checksum included; a multiple of 8)
 *   4   type u32, expansion u32, persist u32, nlayers u32, name_len u32
 *   24  capacity u64, error_rate f64, seed u64, items u64, generation u64, id u64, lsn u64,
 *       body_len u64
 *   88  stats 9 x u64
 *   160 expire_ms u64 (Unix time in ms it expires at, 0 never; pack version 2 on)
 *   168 ratio f64 (the chain's tightening ratio; pack version 2 on, 0.5 before)
 *   176 first f64 (the first layer's share of error_rate; pack version 3 on, 0.5 before)
 *   184 name, zero padded to a multiple of 8 (at 160 in pack version 1, 176 in version 2)
 *       layers: nlayers x 40 bytes, as in a file's header
 *       body: the layers' blocks
 *       checksum u64: XXH3-64 of everything before it
 */
size_t bf_snapshot_entry_size(const struct bf_filter *f);
/* Packs are for small filters: an entry's length is a u32. */
#define BF_SNAPSHOT_ENTRY_MAX UINT32_MAX
/* Encode f (bf_snapshot_entry_size(f) <= BF_SNAPSHOT_ENTRY_MAX) as an entry of
 * bf_snapshot_entry_size(f) bytes into out (an exact cut of f). */
void bf_snapshot_entry_encode(const struct bf_filter *f, uint64_t generation, unsigned char *out);
/*
 * Check an entry of len bytes (framing, checksum, then every rule bf_snapshot_decode applies)
 * and build its filter with its blocks (no budget). 0, -EINVAL (reason in why), -ENOMEM.
 */
int bf_snapshot_entry_decode(const unsigned char *e, size_t len, uint64_t max_bytes,
			     struct bf_filter **out, uint64_t *generation, char *why,
			     size_t whylen);
/* Best effort, for logs: the filter name an entry that failed to decode claims, if its
 * framing holds and the name is a valid one. */
bool bf_snapshot_entry_name(const unsigned char *e, size_t len, const char **name,
			    size_t *name_len);

/*
 * Pack files: many entries in one file, written crash-safe as a snapshot file is. Layout:
 *   0   magic "BLOSPAK\0"
 *   8   version u32 (3; 2 and 1 are read too: their entries have no first share, and
 *       version 1 no expiry either), count u32
 *   16  file_len u64
 *   24  index_checksum u64: XXH3-64 of bytes 0 .. 32 + 16 x count, this field read as zero
 *   32  index: count x (offset u64, length u64), entries back to back after it
 * A bad header or index makes the whole file unreadable; a bad entry only that entry.
 */
#define BF_PACK_VERSION 3
#define BF_PACK_SUFFIX	".bpack"

/* Write buf[0, len) as filename in dirfd, crash-safe as bf_snapshot_write writes a snapshot
 * (its temp file is FILENAME.bsnap.tmp). 0, or a negative errno with *step. */
int bf_file_write(int dirfd, const char *filename, const void *buf, size_t len, const char **step);

/* Write count entries, back to back in entries (entry i ends at ends[i]). As
 * bf_snapshot_write: 0, or a negative errno with *step. */
int bf_pack_write(int dirfd, const char *filename, const unsigned char *entries,
		  const uint64_t *ends, uint32_t count, const char **step);
/* bf_pack_write, telling pr (if not NULL) how far the write has got. */
int bf_pack_write_progress(int dirfd, const char *filename, const unsigned char *entries,
			   const uint64_t *ends, uint32_t count, const struct bf_io_progress *pr,
			   const char **step);

struct bf_pack {
	unsigned char *buf; /* the whole file */
	size_t len;
	size_t cap; /* of buf (bf_pack_reopen) */
	uint32_t count;
	uint32_t version;
};

/* Read a pack file whole and check its header and index. 0, or -EINVAL/-ENOTSUP (reason in
 * why; the file is not usable), or -errno/-ENOMEM (cannot read it). */
int bf_pack_open(int dirfd, const char *filename, struct bf_pack *pk, char *why, size_t whylen);
/* bf_pack_open, reading into pk's buffer if it is large enough (pk zeroed, or left by an earlier
 * bf_pack_open or bf_pack_reopen, whatever it returned): a load of many packs faults its buffer
 * in once, not once per pack. On failure pk holds no pack but keeps its buffer; bf_pack_close
 * frees it. */
int bf_pack_reopen(int dirfd, const char *filename, struct bf_pack *pk, char *why, size_t whylen);
/* Entry i (< pk->count), as bf_snapshot_entry_decode. */
int bf_pack_entry(const struct bf_pack *pk, uint32_t i, uint64_t max_bytes, struct bf_filter **out,
		  uint64_t *generation, char *why, size_t whylen);
void bf_pack_entry_bytes(const struct bf_pack *pk, uint32_t i, const unsigned char **e,
			 size_t *len);
/* The id and name entry i (< pk->count) says it has, checked only to lie within the entry:
 * hints for fetching into the cache what adopting it will look up, ahead of decoding it. false
 * if the entry is too short. */
bool bf_pack_entry_peek(const struct bf_pack *pk, uint32_t i, uint64_t *id, const char **name,
			size_t *name_len);
void bf_pack_close(struct bf_pack *pk);

#endif
