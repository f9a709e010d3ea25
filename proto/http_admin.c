/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's operational routes, which name no filter and are not counted as
 * commands: /healthz, /readyz (the server's not_ready hook), /metrics (its metrics hook), the
 * history of what the status page charts (/v1/metrics/history, and its samples), and the
 * documents built in from doc/: /v1/openapi.yaml and the status page at /.
 */
#include "proto/http_api_impl.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* The status page's history */

void http_history_counters(const struct cmd_ctx *cmd, struct http_history_sample *out)
{
	for (unsigned i = 0; i < CMD_PEER_COUNT; i++)
		out->commands[i] = cmd->peer_commands[i];
	out->added = cmd->keys[CMD_OP_ADD];
	out->checked = cmd->keys[CMD_OP_CHECK];
}

void http_api_history_sample(struct http_api *api, uint64_t now_ms)
{
	struct http_history *h = &api->history;
	struct http_history_sample now, *s = &h->s[h->next];

	http_history_counters(api->cmd, &now);
	for (unsigned i = 0; i < CMD_PEER_COUNT; i++)
		s->commands[i] = now.commands[i] - h->last.commands[i];
	s->added = now.added - h->last.added;
	s->checked = now.checked - h->last.checked;
	h->last = now;
	h->end_ms = now_ms;
	h->next = (h->next + 1) % HTTP_HISTORY_LEN;
	if (h->n < HTTP_HISTORY_LEN)
		h->n++;
}

/* "name":[v,...] of the field at off (a uint64_t) of each sample, oldest first. */
static void history_column(struct proto_buf *b, const struct http_history *h, const char *name,
			   size_t off)
{
	uint32_t first = (h->next + HTTP_HISTORY_LEN - h->n) % HTTP_HISTORY_LEN;

	proto_buf_append_fmt(b, "\"%s\":[", name);
	for (uint32_t i = 0; i < h->n; i++) {
		const unsigned char *s =
		    (const unsigned char *)&h->s[(first + i) % HTTP_HISTORY_LEN];
		uint64_t v;

		memcpy(&v, s + off, sizeof(v));
		proto_buf_append_fmt(b, i ? ",%" PRIu64 : "%" PRIu64, v);
	}
	proto_buf_append_char(b, ']');
}

static void history_answer(const struct http_history *h, struct http_api_response *r)
{
	struct proto_buf *b = &r->body;

	r->content_type = CT_JSON;
	proto_buf_append_fmt(b, "{\"interval_seconds\":1,\"end_ms\":%" PRIu64 ",\"commands\":{",
			     h->end_ms);
	history_column(b, h, "text", offsetof(struct http_history_sample, commands[CMD_PEER_TEXT]));
	proto_buf_append_char(b, ',');
	history_column(b, h, "resp", offsetof(struct http_history_sample, commands[CMD_PEER_RESP]));
	proto_buf_append_char(b, ',');
	history_column(b, h, "http", offsetof(struct http_history_sample, commands[CMD_PEER_HTTP]));
	proto_buf_append_str(b, "},\"keys\":{");
	history_column(b, h, "added", offsetof(struct http_history_sample, added));
	proto_buf_append_char(b, ',');
	history_column(b, h, "checked", offsetof(struct http_history_sample, checked));
	proto_buf_append_str(b, "}}");
}

/* ---------------------------------------------------------------------------------------- */
/* The routes */

static void do_static(struct http_api_response *r, const char *json)
{
	r->content_type = CT_JSON;
	proto_buf_append_str(&r->body, json);
}

bool http_admin_answer(struct http_api *api, struct http_api_response *r, enum http_route route)
{
	const char *why;

	switch (route) {
	case HTTP_ROUTE_HEALTHZ:
		do_static(r, "{\"status\":\"ok\"}");
		return true;
	case HTTP_ROUTE_READYZ:
		why = api->hooks.not_ready ? api->hooks.not_ready(api->hooks.arg) : NULL;
		if (why)
			http_problem(r, P_NOT_READY, "%s", why);
		else
			do_static(r, "{\"status\":\"ready\"}");
		return true;
	case HTTP_ROUTE_METRICS:
		if (!api->hooks.metrics) {
			http_problem(r, P_NOT_FOUND, "no such route");
			return true;
		}
		r->content_type = CT_METRICS;
		api->hooks.metrics(api->hooks.arg, &r->body);
		return true;
	case HTTP_ROUTE_HISTORY:
		history_answer(&api->history, r);
		return true;
	case HTTP_ROUTE_OPENAPI:
		r->content_type = CT_YAML;
		r->data = http_api_openapi_yaml;
		r->len = http_api_openapi_yaml_len;
		return true;
	case HTTP_ROUTE_STATUS:
		r->content_type = CT_HTML;
		r->data = http_api_status_html;
		r->len = http_api_status_html_len;
		return true;
	default:
		return false;
	}
}
