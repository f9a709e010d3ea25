/* SPDX-License-Identifier: MIT */
/*
 * /metrics: the daemon's figures in the Prometheus text exposition format 0.0.4, every name
 * prefixed "blossomd_", counters ending in "_total". Families (labels in braces):
 *
 *	blossomd_build_info{version}                    gauge, 1
 *	blossomd_start_time_seconds                     gauge, Unix time of the start
 *	blossomd_ready                                  gauge, 1 ready / 0 (why: /readyz)
 *	blossomd_commands_total                         every command of every front end
 *	blossomd_errors_total                           commands answered with an error
 *	blossomd_operations_total{op}                   command-layer calls: create, drop,
 *	blossomd_keys_total{op}                         add, check, delete, flush; and keys
 *	blossomd_connections{protocol}                  gauge, open now ("text_resp", "http")
 *	blossomd_connections_total{protocol}            accepted
 *	blossomd_connections_rejected_total{protocol}   refused at max_connections
 *	blossomd_received_bytes_total{protocol}         bytes read from clients
 *	blossomd_sent_bytes_total{protocol}             bytes written to clients (HTTP: acked)
 *	blossomd_http_requests_total{route,code}        answered HTTP requests (non-zero only)
 *	blossomd_filters                                gauge, filters in the registry
 *	blossomd_memory_bytes, blossomd_memory_limit_bytes   gauges (limit 0 = none)
 *	blossomd_filter_{items,capacity,bytes,layers,error_rate,fpr_estimate}{filter}   gauges
 *	blossomd_filter_{checks,check_hits,sets,set_hits}_total{filter}                 counters
 *	blossomd_filters_unlabelled                     gauge, filters left out of the above
 *	blossomd_snapshot_*                             persistence, when the server has it
 *
 * Label count is bounded: per-filter series exist for at most METRICS_MAX_FILTERS filters,
 * the first ones in name order whose names are valid UTF-8 (Prometheus label values must
 * be); the rest are counted in blossomd_filters_unlabelled. Routes and codes of
 * blossomd_http_requests_total come from fixed lists (proto/http_api.h).
 */
#ifndef BLOSSOMD_SERVER_METRICS_H
#define BLOSSOMD_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/buf.h"
#include "proto/command.h"
#include "proto/http_api.h"

/* Filters given per-filter series at most. */
#define METRICS_MAX_FILTERS 100

/* Connections of one listener kind. */
struct metrics_conns {
	uint64_t open, accepted, rejected;
	uint64_t bytes_in, bytes_out;
};

/* Persistence figures (server/snapshot.h's status, as far as metrics show it). */
struct metrics_persist {
	bool enabled; /* false: no snapshot_* series */
	uint64_t loaded, set_aside;
	uint64_t saves, saved_bytes, failures;
	uint64_t last_success_unix, last_failure_unix;
	uint64_t failing, dirty;
	bool in_progress;
};

/* The write-ahead log's figures (server/wal.h's stats, and the daemon's around it). */
#define METRICS_WAL_BUCKETS 7
struct metrics_wal {
	bool enabled; /* false: no wal_* series */
	uint64_t bytes, segments, written_bytes, records, fsyncs, fsync_ns;
	uint64_t fsync_hist[METRICS_WAL_BUCKETS]; /* per bucket (not cumulative) */
	const uint64_t *fsync_bucket_us;	  /* upper bounds; the last one is +Inf */
	uint64_t failures, recoveries;
	bool failing;
	uint64_t waiting;	 /* replies (connections, HTTP requests) waiting for it */
	uint64_t replay_records; /* applied at start */
	uint64_t replay_ns;
};

/* What the server outside HTTP knows (filled by server.c through a hook). */
struct metrics_server {
	struct metrics_conns tcp; /* the text/RESP port */
	uint64_t yields;	  /* slices cut short (SRV_SLICE_NS): others served in between */
	struct metrics_persist persist;
	struct metrics_wal wal;
};

struct metrics_source {
	const struct cmd_ctx *cmd;
	const char *version;
	const char *not_ready; /* NULL when ready */
	const struct metrics_server *server;
	struct metrics_conns http;
	const struct http_api *api; /* per-route counters; may be NULL */
};

/*
 * Payload bytes a TCP socket has received and had acknowledged by the peer so far
 * (TCP_INFO tcpi_bytes_received / tcpi_bytes_acked, Linux 4.6+). 0, or -errno (also
 * -ENOTSUP on an older kernel) with *in and *out untouched.
 */
int metrics_tcp_bytes(int fd, uint64_t *in, uint64_t *out);

/* Append the exposition text to out (on allocation failure out->failed is set). */
void metrics_render(const struct metrics_source *src, struct proto_buf *out);

#endif /* BLOSSOMD_SERVER_METRICS_H */
