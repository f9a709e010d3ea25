/* SPDX-License-Identifier: MIT */
/*
 * Replication (doc/replication.md, DESIGN.md §9): a primary streams its write-ahead log's
 * records to replicas that speak Redis's handshake (PING, AUTH, REPLCONF, PSYNC). The offset
 * is the primary's LSN. server/repl_primary.c is the primary's side (the links of its
 * replicas, the image a full sync sends, WAIT, INFO and ROLE); server/repl_replica.c the
 * replica's (its link to the primary, applying what comes, its acknowledgements).
 *
 * Wire format after "+FULLRESYNC <replid> <offset>\r\n": "$EOF:<40 bytes>\r\n", the image as
 * frames, the same 40 bytes; then frames as the log is appended. A frame is a record of the
 * log without its checksum (TCP carries it intact): u32 payload length, u8 type, 3 zero bytes,
 * u64 LSN (0 in the image), the payload (core/bf_record.h). The image holds, per persistent
 * filter, a LOAD (its header), BODY records (its blocks) and an EXPIRE if it has an expiry.
 * Frames of type REPL_FRAME_GETACK ask for an acknowledgement at once; REPL_FRAME_PING (each
 * second, its LSN the primary's offset) tells the replica the link is alive.
 *
 * Partial sync: a replica that had a whole sync sends "PSYNC <replid> <offset + 1>" when its
 * link is made again; while the primary's backlog (its newest records' frames, at most
 * repl_backlog_size bytes) reaches back to offset + 1 and replid is its own, it answers
 * "+CONTINUE <replid>\r\n" and the frames from there.
 */
#ifndef BLOSSOMD_SERVER_REPL_H
#define BLOSSOMD_SERVER_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srv;
struct srv_conn;

#define REPL_FRAME_HEAD	  16
#define REPL_FRAME_GETACK 250
#define REPL_FRAME_PING	  251
#define REPL_ID_LEN	  40
#define REPL_EOF_LEN	  40

/* After the log's start: the hooks, the timers, and following cfg.replicaof if set. 0 or a
 * negative errno (logged). Without the log, replication is off and this does nothing. */
int repl_start(struct srv *s);
/* Before the loop's handles are closed: every link closed, a full sync's child killed. */
void repl_stop(struct srv *s);

/* journal.c: a record was appended to the log (the primary sends it to its replicas). */
void repl_feed(struct srv *s, uint64_t lsn, unsigned type, const void *p, size_t len);
/* journal.c: after the log wrote what was appended (each turn of the loop). */
void repl_flush(struct srv *s);
/* conn.c: a connection is closing (if it was a replica's link, the link goes). */
void repl_conn_closed(struct srv *s, struct srv_conn *c);

#endif
