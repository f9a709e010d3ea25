/* SPDX-License-Identifier: MIT */
/*
 * Private to the HTTP/JSON front end, shared by its files: http_api.c (the router),
 * http_admin.c, http_filters.c, http_keys.c, http_stream.c, http_problem.c and http_codec.c.
 * The content types, problems and response builders they share, and the handlers the router
 * calls. Nothing else includes it; the contract with the server and the tests is http_api.h.
 */
#ifndef BLOSSOMD_PROTO_HTTP_API_IMPL_H
#define BLOSSOMD_PROTO_HTTP_API_IMPL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "proto/http_api.h"

#define CT_JSON	   "application/json"
#define CT_PROBLEM "application/problem+json"
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CT_YAML	   "application/yaml"
#define CT_HTML	   "text/html; charset=utf-8"

/* Bytes of a request: a path segment, still raw or decoded. */
struct span {
	const char *p;
	size_t n;
};

/* The problem types: their status, type and title are in one table. */
enum problem {
	P_BAD_REQUEST,
	P_INVALID_NAME,
	P_KEY_TOO_LONG,
	P_UNAUTHORIZED,
	P_NOT_FOUND,
	P_FILTER_NOT_FOUND,
	P_METHOD_NOT_ALLOWED,
	P_FILTER_EXISTS,
	P_FILTER_FULL,
	P_NOT_COUNTING,
	P_AMBIGUOUS_DELETE,
	P_LOG_UNAVAILABLE,
	P_TOO_LARGE,
	P_MEDIA_TYPE,
	P_INTERNAL,
	P_NOT_READY,
	P_NO_MEMORY,
	P_READ_ONLY,
};

/* Set when cJSON's allocation failed (cleared before a parse), so that "out of memory" is not
 * reported as "malformed JSON". */
extern bool http_api_json_alloc_failed;

/* Responses: start one (no headers, empty body); the static 507; print j (deleting it) as the
 * body (false, and a 507, when memory ran out). */
void http_api_resp_reset(struct http_api_response *r);
void http_api_resp_oom(struct http_api_response *r);
bool http_api_resp_json(struct http_api_response *r, cJSON *j);

/* Problems: one with a detail; the one for a failed command-layer call (results, may be NULL:
 * the answers of the first done keys); that problem's type and detail (into d, len bytes). */
void http_problem(struct http_api_response *r, enum problem p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void http_problem_status(struct http_api *api, struct http_api_response *r, enum cmd_status st,
			 const int *results, size_t done);
enum problem http_problem_detail(struct http_api *api, enum cmd_status st, bool partial,
				 size_t done, char *d, size_t len);

/* Percent-decode p[0..n) into out (room for n bytes): the length, or -EINVAL. */
long http_api_pct_decode(const char *p, size_t n, char *out);

/* Requests: the route of a raw path (with its raw {name} and {key}); whether req is refused
 * whatever its body (the problem in r); the JSON object body (or NULL and a problem); a field
 * name fit to quote in a detail. */
enum http_route http_api_route_match(struct span path, struct span *name, struct span *key);
bool http_api_refused(const struct http_api *api, const struct http_api_request *req,
		      enum http_route route, struct http_api_response *r);
cJSON *http_api_parse_body(struct http_api *api, const struct http_api_request *req,
			   struct http_api_response *r);
const char *http_api_field_label(const char *s, char *buf, size_t len);

/* Count the answered request and fix data/len. */
void http_api_finish(struct http_api *api, struct http_api_response *r, enum http_route route);

/* The operational routes (/healthz, /readyz, /metrics, the built-in documents): true with the
 * answer in r if route is one of them, else false and nothing done. */
bool http_admin_answer(struct http_api *api, struct http_api_response *r, enum http_route route);
/* The counters the history samples, as they are now. */
void http_history_counters(const struct cmd_ctx *cmd, struct http_history_sample *out);

/* The filter resources: GET /v1/filters; GET, PUT, PATCH, DELETE /v1/filters/{name}; its
 * snapshot and rename. */
void http_filters_list(struct http_api *api, const struct http_api_request *req,
		       struct http_api_response *r);
void http_filters_get(struct http_api_response *r, const struct bf_filter *f);
void http_filters_create(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct span name);
void http_filters_drop(struct http_api *api, struct http_api_response *r, struct span name);
void http_filters_patch(struct http_api *api, const struct http_api_request *req,
			struct http_api_response *r, struct bf_filter *f);
void http_filters_snapshot(struct http_api *api, const struct http_api_request *req,
			   struct http_api_response *r, struct bf_filter *f);
void http_filters_rename(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct bf_filter *f);

/* The keys: a {"keys":[...]} body's add, check or delete; GET or PUT (put) of one key. */
void http_keys_batch(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *r, struct bf_filter *f, enum cmd_key_op op);
void http_keys_one(struct http_api *api, struct http_api_response *r, struct bf_filter *f,
		   struct span key, bool put);

#endif /* BLOSSOMD_PROTO_HTTP_API_IMPL_H */
