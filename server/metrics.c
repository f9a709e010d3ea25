/* SPDX-License-Identifier: MIT */
/* The Prometheus exposition of /metrics; see metrics.h for the families. */
#include "server/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/bf_registry.h"

static const char *const op_names[CMD_OP_COUNT] = {
    [CMD_OP_CREATE] = "create", [CMD_OP_DROP] = "drop",	    [CMD_OP_ADD] = "add",
    [CMD_OP_CHECK] = "check",	[CMD_OP_DELETE] = "delete", [CMD_OP_FLUSH] = "flush",
};

static const char *const peer_names[CMD_PEER_COUNT] = {
    [CMD_PEER_TEXT] = "text", [CMD_PEER_RESP] = "resp", [CMD_PEER_HTTP] = "http"};

static void family(struct proto_buf *b, const char *name, const char *type, const char *help)
{
	proto_buf_append_fmt(b, "# HELP blossomd_%s %s\n# TYPE blossomd_%s %s\n", name, help, name,
			     type);
}

static void sample_u64(struct proto_buf *b, const char *name, uint64_t v)
{
	proto_buf_append_str(b, "blossomd_");
	proto_buf_append_str(b, name);
	proto_buf_append_char(b, ' ');
	proto_buf_append_u64(b, v);
	proto_buf_append_char(b, '\n');
}

/* A family with one unlabelled sample. */
static void single(struct proto_buf *b, const char *name, const char *type, const char *help,
		   uint64_t v)
{
	family(b, name, type, help);
	sample_u64(b, name, v);
}

/* A label value as the format wants it: backslash, double quote and newline escaped. */
static void label_value(struct proto_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' || s[i] == '"')
			proto_buf_append_char(b, '\\');
		if (s[i] == '\n') {
			proto_buf_append_str(b, "\\n");
			continue;
		}
		proto_buf_append_char(b, s[i]);
	}
}

/* A family with one sample per listener kind. */
static void conns_family(struct proto_buf *b, const char *name, const char *type, const char *help,
			 uint64_t text_resp, uint64_t http)
{
	family(b, name, type, help);
	proto_buf_append_fmt(b, "blossomd_%s{protocol=\"text_resp\"} %" PRIu64 "\n", name,
			     text_resp);
	proto_buf_append_fmt(b, "blossomd_%s{protocol=\"http\"} %" PRIu64 "\n", name, http);
}

static void render_connections(const struct metrics_source *src, struct proto_buf *b)
{
	const struct metrics_conns *t = &src->server->tcp, *h = &src->http;

	conns_family(b, "connections", "gauge", "Client connections open now.", t->open, h->open);
	conns_family(b, "connections_total", "counter", "Client connections accepted.", t->accepted,
		     h->accepted);
	conns_family(b, "connections_rejected_total", "counter",
		     "Client connections refused because max_connections were open.", t->rejected,
		     h->rejected);
	conns_family(b, "received_bytes_total", "counter", "Bytes received from clients.",
		     t->bytes_in, h->bytes_in);
	conns_family(b, "sent_bytes_total", "counter",
		     "Bytes sent to clients (HTTP: acknowledged by the client).", t->bytes_out,
		     h->bytes_out);
	single(b, "connection_slices_yielded_total", "counter",
	       "Times a text/RESP connection's pipelined commands were paused after their slice of "
	       "the event loop so that other clients were served first.",
	       src->server->yields);
}

static void render_http(const struct http_api *api, struct proto_buf *b)
{
	family(b, "http_requests_total", "counter",
	       "HTTP requests answered, by route template and status code.");
	for (unsigned r = 0; r < HTTP_ROUTE_COUNT; r++) {
		for (unsigned i = 0; i < HTTP_API_NSTATUS; i++) {
			unsigned code = http_api_status_at(i);

			if (!api->requests[r][i])
				continue;
			proto_buf_append_fmt(b, "blossomd_http_requests_total{route=\"%s\",code=\"",
					     http_api_route_name((enum http_route)r));
			if (code)
				proto_buf_append_u64(b, code);
			else
				proto_buf_append_str(b, "other");
			proto_buf_append_fmt(b, "\"} %" PRIu64 "\n", api->requests[r][i]);
		}
	}
}

/* One per-filter family: a sample for each labelled filter. */
enum filter_field {
	FF_ITEMS,
	FF_CAPACITY,
	FF_BYTES,
	FF_LAYERS,
	FF_ERROR_RATE,
	FF_FPR,
	FF_CHECKS,
	FF_CHECK_HITS,
	FF_SETS,
	FF_SET_HITS,
	FF_COUNT,
};

static const struct {
	const char *name, *type, *help;
} filter_families[FF_COUNT] = {
    [FF_ITEMS] = {"filter_items", "gauge", "Keys added to the filter (adds that were new)."},
    [FF_CAPACITY] = {"filter_capacity", "gauge", "Keys the filter's layers hold so far."},
    [FF_BYTES] = {"filter_bytes", "gauge", "Memory of the filter's layers."},
    [FF_LAYERS] = {"filter_layers", "gauge", "Layers of the filter (scalable chain)."},
    [FF_ERROR_RATE] = {"filter_error_rate", "gauge", "Configured false-positive rate."},
    [FF_FPR] = {"filter_fpr_estimate", "gauge",
		"Model estimate of the current false-positive rate."},
    [FF_CHECKS] = {"filter_checks_total", "counter", "Keys checked."},
    [FF_CHECK_HITS] = {"filter_check_hits_total", "counter", "Keys checked that may be present."},
    [FF_SETS] = {"filter_sets_total", "counter", "Keys added (new or not)."},
    [FF_SET_HITS] = {"filter_set_hits_total", "counter", "Keys added that were new."},
};

static void filter_sample(struct proto_buf *b, const struct bf_filter *f, enum filter_field ff)
{
	double fpr;

	proto_buf_append_fmt(b, "blossomd_%s{filter=\"", filter_families[ff].name);
	label_value(b, bf_filter_name(f), f->name_len);
	proto_buf_append_str(b, "\"} ");
	switch (ff) {
	case FF_ITEMS:
		proto_buf_append_u64(b, bf_filter_items(f));
		break;
	case FF_CAPACITY:
		proto_buf_append_u64(b, bf_filter_capacity(f));
		break;
	case FF_BYTES:
		proto_buf_append_u64(b, bf_filter_bytes(f));
		break;
	case FF_LAYERS:
		proto_buf_append_u64(b, bf_filter_nlayers(f));
		break;
	case FF_ERROR_RATE:
		proto_buf_append_fmt(b, "%.15g", f->params->error_rate);
		break;
	case FF_FPR:
		fpr = bf_filter_fpr(f);
		proto_buf_append_fmt(b, "%.6g", fpr > 0 ? fpr : 0);
		break;
	case FF_CHECKS:
		proto_buf_append_u64(b, bf_filter_checks(f));
		break;
	case FF_CHECK_HITS:
		proto_buf_append_u64(b, bf_filter_stat(f, BF_STAT_CHECK_HITS));
		break;
	case FF_SETS:
		proto_buf_append_u64(b, bf_filter_sets(f));
		break;
	default:
		proto_buf_append_u64(b, bf_filter_stat(f, BF_STAT_SET_HITS));
		break;
	}
	proto_buf_append_char(b, '\n');
}

static void render_filters(const struct cmd_ctx *cmd, struct proto_buf *b)
{
	struct bf_filter *labels[METRICS_MAX_FILTERS], **page;
	size_t n = bf_registry_count(cmd->reg), labelled = 0, got;
	const char *after = "";
	size_t alen = 0;
	bool more = true;

	single(b, "filters", "gauge", "Filters in the registry.", n);
	single(b, "memory_bytes", "gauge", "Bytes held by all filters.",
	       bf_registry_memory(cmd->reg));
	single(b, "memory_limit_bytes", "gauge", "max_memory (0 = no limit).",
	       bf_registry_max_memory(cmd->reg));
	/* The first METRICS_MAX_FILTERS valid-UTF-8 names, in name order: a page of them (one
	 * pass keeping the best few, no sort of a million names), and another after it while
	 * some were not UTF-8. */
	while (labelled < METRICS_MAX_FILTERS && more) {
		if (bf_registry_page(cmd->reg, "", 0, after, alen, METRICS_MAX_FILTERS - labelled,
				     &page, &got, &more)) {
			b->failed = true;
			return;
		}
		for (size_t i = 0; i < got; i++)
			if (http_api_utf8_valid(bf_filter_name(page[i]), page[i]->name_len))
				labels[labelled++] = page[i];
		if (got) {
			after = bf_filter_name(page[got - 1]);
			alen = page[got - 1]->name_len;
		}
		free(page);
		if (!got)
			break;
	}
	for (unsigned ff = 0; ff < FF_COUNT; ff++) {
		family(b, filter_families[ff].name, filter_families[ff].type,
		       filter_families[ff].help);
		for (size_t i = 0; i < labelled; i++)
			filter_sample(b, labels[i], (enum filter_field)ff);
	}
	single(b, "filters_unlabelled", "gauge",
	       "Filters without per-filter series (over the limit of 100, or a name that is not "
	       "UTF-8).",
	       n - labelled);
}

static void render_persist(const struct metrics_persist *p, struct proto_buf *b)
{
	if (!p->enabled)
		return;
	single(b, "snapshot_loaded_filters", "gauge", "Filters loaded from snapshots at start.",
	       p->loaded);
	single(b, "snapshot_set_aside_files", "gauge",
	       "Corrupt snapshot files renamed aside at start.", p->set_aside);
	single(b, "snapshot_writes_total", "counter", "Snapshot files written.", p->saves);
	single(b, "snapshot_written_bytes_total", "counter", "Bytes of snapshot files written.",
	       p->saved_bytes);
	single(b, "snapshot_failures_total", "counter", "Snapshot writes that failed.",
	       p->failures);
	single(b, "snapshot_last_success_timestamp_seconds", "gauge",
	       "Unix time of the last good snapshot write (0: none since start).",
	       p->last_success_unix);
	single(b, "snapshot_last_failure_timestamp_seconds", "gauge",
	       "Unix time of the last failed snapshot write (0: none since start).",
	       p->last_failure_unix);
	single(b, "snapshot_failing_filters", "gauge",
	       "Persistent filters whose latest snapshot write failed.", p->failing);
	single(b, "snapshot_dirty_filters", "gauge",
	       "Persistent filters with changes not on disk yet.", p->dirty);
	single(b, "snapshot_in_progress", "gauge", "1 while a background snapshot runs.",
	       p->in_progress);
}

static void render_wal(const struct metrics_wal *w, struct proto_buf *b)
{
	uint64_t cum = 0;

	if (!w->enabled)
		return;
	single(b, "wal_bytes", "gauge",
	       "Bytes of the write-ahead log's records (its files also hold zeros ahead).",
	       w->bytes);
	single(b, "wal_segments", "gauge", "Segment files of the write-ahead log.", w->segments);
	single(b, "wal_written_bytes_total", "counter", "Bytes written to the log.",
	       w->written_bytes);
	single(b, "wal_records_total", "counter", "Records appended to the log since start.",
	       w->records);
	family(b, "wal_fsync_seconds", "histogram", "Latency of the log's fdatasync calls.");
	for (size_t i = 0; i < METRICS_WAL_BUCKETS; i++) {
		char le[32];
		cum += w->fsync_hist[i];
		if (i + 1 == METRICS_WAL_BUCKETS)
			snprintf(le, sizeof(le), "+Inf");
		else
			snprintf(le, sizeof(le), "%g", (double)w->fsync_bucket_us[i] / 1e6);
		proto_buf_append_fmt(
		    b, "blossomd_wal_fsync_seconds_bucket{le=\"%s\"} %" PRIu64 "\n", le, cum);
	}
	proto_buf_append_fmt(b, "blossomd_wal_fsync_seconds_sum %.9f\n", (double)w->fsync_ns / 1e9);
	proto_buf_append_fmt(b, "blossomd_wal_fsync_seconds_count %" PRIu64 "\n", w->fsyncs);
	single(b, "wal_failures_total", "counter", "Failed log writes, fdatasyncs and switches.",
	       w->failures);
	single(b, "wal_recoveries_total", "counter", "Times the log recovered from failing.",
	       w->recoveries);
	single(b, "wal_failing", "gauge", "1 while the log cannot write (changes are refused).",
	       w->failing);
	single(b, "wal_waiting_replies", "gauge",
	       "Connections and HTTP requests whose replies wait for the log.", w->waiting);
	single(b, "wal_replay_records", "gauge", "Log records applied at start.",
	       w->replay_records);
	family(b, "wal_replay_seconds", "gauge", "Time the replay at start took.");
	proto_buf_append_fmt(b, "blossomd_wal_replay_seconds %.6f\n", (double)w->replay_ns / 1e9);
}

int metrics_tcp_bytes(int fd, uint64_t *in, uint64_t *out)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (fd < 0)
		return -EBADF;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return -errno;
	if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
		return -ENOTSUP;
	*in = ti.tcpi_bytes_received;
	*out = ti.tcpi_bytes_acked;
	return 0;
}

void metrics_render(const struct metrics_source *src, struct proto_buf *b)
{
	const struct cmd_ctx *cmd = src->cmd;

	family(b, "build_info", "gauge", "blossomd version.");
	proto_buf_append_str(b, "blossomd_build_info{version=\"");
	label_value(b, src->version, strlen(src->version));
	proto_buf_append_str(b, "\"} 1\n");
	single(b, "start_time_seconds", "gauge", "Unix time the daemon started.",
	       cmd->started_unix);
	single(b, "ready", "gauge", "1 when /readyz answers 200.", src->not_ready == NULL);
	single(b, "commands_total", "counter", "Commands of every protocol.", cmd->commands);
	single(b, "errors_total", "counter", "Commands answered with an error.", cmd->errors);
	family(b, "protocol_commands_total", "counter",
	       "Commands by the protocol that sent them (text and RESP share a port).");
	for (unsigned i = 0; i < CMD_PEER_COUNT; i++)
		proto_buf_append_fmt(
		    b, "blossomd_protocol_commands_total{protocol=\"%s\"} %" PRIu64 "\n",
		    peer_names[i], cmd->peer_commands[i]);

	family(b, "operations_total", "counter", "Command-layer operations, any protocol.");
	for (unsigned i = 0; i < CMD_OP_COUNT; i++)
		proto_buf_append_fmt(b, "blossomd_operations_total{op=\"%s\"} %" PRIu64 "\n",
				     op_names[i], cmd->ops[i]);
	family(b, "keys_total", "counter", "Keys given to add, check and delete, any protocol.");
	for (unsigned i = CMD_OP_ADD; i <= CMD_OP_DELETE; i++)
		proto_buf_append_fmt(b, "blossomd_keys_total{op=\"%s\"} %" PRIu64 "\n", op_names[i],
				     cmd->keys[i]);

	render_connections(src, b);
	if (src->api)
		render_http(src->api, b);
	render_filters(cmd, b);
	render_persist(&src->server->persist, b);
	render_wal(&src->server->wal, b);
}
