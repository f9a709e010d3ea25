/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's errors as problem+json documents (RFC 9457; http_api.h lists them):
 * the table of every problem's status, type and title, and the problem and detail a failed
 * command-layer call gets. An add or delete that stopped part way carries the answers of the
 * keys before it.
 */
#include "proto/http_api_impl.h"

#include <stdarg.h>
#include <stdio.h>

static const struct {
	unsigned status;
	const char *type;
	const char *title;
} problems[] = {
    [P_BAD_REQUEST] = {400, "bad_request", "Bad request"},
    [P_INVALID_NAME] = {400, "invalid_filter_name", "Invalid filter name"},
    [P_KEY_TOO_LONG] = {400, "key_too_long", "Key too long"},
    [P_UNAUTHORIZED] = {401, "unauthorized", "Unauthorized"},
    [P_NOT_FOUND] = {404, "not_found", "Not found"},
    [P_FILTER_NOT_FOUND] = {404, "filter_not_found", "Filter not found"},
    [P_METHOD_NOT_ALLOWED] = {405, "method_not_allowed", "Method not allowed"},
    [P_FILTER_EXISTS] = {409, "filter_exists", "Filter exists"},
    [P_FILTER_FULL] = {409, "filter_full", "Filter is full"},
    [P_NOT_COUNTING] = {409, "not_counting", "Not a counting filter"},
    [P_AMBIGUOUS_DELETE] = {409, "ambiguous_delete", "Key in more than one layer"},
    [P_LOG_UNAVAILABLE] = {503, "log_unavailable", "Write-ahead log unavailable"},
    [P_TOO_LARGE] = {413, "payload_too_large", "Payload too large"},
    [P_MEDIA_TYPE] = {415, "unsupported_media_type", "Unsupported media type"},
    [P_INTERNAL] = {500, "internal_error", "Internal error"},
    [P_NOT_READY] = {503, "not_ready", "Not ready"},
    [P_NO_MEMORY] = {507, "insufficient_memory", "Insufficient memory"},
    [P_READ_ONLY] = {409, "read_only_replica", "Read-only replica"},
};

/* A problem document; results (may be NULL) are the answers of the first n keys. */
static void problem_results(struct http_api_response *r, enum problem p, const int *results,
			    size_t n, const char *fmt, va_list ap)
{
	char detail[256];
	cJSON *j = cJSON_CreateObject(), *arr;
	bool ok = j != NULL;

	vsnprintf(detail, sizeof(detail), fmt, ap);
	proto_buf_reset(&r->body);
	r->status = problems[p].status;
	r->content_type = CT_PROBLEM;
	ok = ok && cJSON_AddStringToObject(j, "type", problems[p].type);
	ok = ok && cJSON_AddStringToObject(j, "title", problems[p].title);
	ok = ok && cJSON_AddNumberToObject(j, "status", problems[p].status);
	ok = ok && cJSON_AddStringToObject(j, "detail", detail);
	if (ok && results) {
		ok = (arr = cJSON_AddArrayToObject(j, "results")) != NULL;
		for (size_t i = 0; ok && i < n; i++) {
			cJSON *b = cJSON_CreateBool(results[i] > 0);

			ok = b && cJSON_AddItemToArray(arr, b);
			if (!ok)
				cJSON_Delete(b);
		}
	}
	if (!ok) {
		cJSON_Delete(j);
		http_api_resp_oom(r);
		return;
	}
	http_api_resp_json(r, j);
}

static void problem_partial(struct http_api_response *r, enum problem p, const int *results,
			    size_t n, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

void http_problem(struct http_api_response *r, enum problem p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	problem_results(r, p, NULL, 0, fmt, ap);
	va_end(ap);
}

static void problem_partial(struct http_api_response *r, enum problem p, const int *results,
			    size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	problem_results(r, p, results, n, fmt, ap);
	va_end(ap);
}

/*
 * The problem for a failed command-layer call, its detail in d (len bytes). partial: an add or
 * delete that stopped part way, done keys answered before it.
 */
enum problem http_problem_detail(struct http_api *api, enum cmd_status st, bool partial,
				 size_t done, char *d, size_t len)
{
	switch (st) {
	case CMD_NOT_FOUND:
		snprintf(d, len, "no filter of that name");
		return P_FILTER_NOT_FOUND;
	case CMD_EXISTS:
		snprintf(d, len, "a filter of that name exists");
		return P_FILTER_EXISTS;
	case CMD_BAD_NAME:
		snprintf(d, len,
			 "a filter name is 1 to %d bytes of printable characters, no spaces",
			 BF_NAME_MAX);
		return P_INVALID_NAME;
	case CMD_BAD_ARGS:
		snprintf(d, len, "bad filter parameters");
		return P_BAD_REQUEST;
	case CMD_RATE_TOO_LOW:
		snprintf(d, len, "\"error_rate\" below 1e-12 is not supported");
		return P_BAD_REQUEST;
	case CMD_KEY_TOO_LONG:
		snprintf(d, len, "a key is longer than max_key_bytes (%zu)",
			 api->cmd->max_key_bytes);
		return P_KEY_TOO_LONG;
	case CMD_FULL:
		if (partial)
			snprintf(
			    d, len,
			    "the filter is full (non-scaling, or %d layers); keys answered before "
			    "it: %zu",
			    BF_MAX_LAYERS, done);
		else
			snprintf(d, len, "the filter is full (non-scaling, or %d layers)",
				 BF_MAX_LAYERS);
		return P_FILTER_FULL;
	case CMD_NO_MEMORY:
		if (partial)
			snprintf(
			    d, len,
			    "growing the filter would pass max_memory; keys answered before it: "
			    "%zu",
			    done);
		else
			snprintf(d, len, "the filter would pass max_memory");
		return P_NO_MEMORY;
	case CMD_NOT_COUNTING:
		snprintf(d, len, "delete needs a counting filter");
		return P_NOT_COUNTING;
	case CMD_PAGED_OUT:
		snprintf(d, len,
			 "the filter is paged out and could not be loaded (see the server log)");
		return P_INTERNAL;
	case CMD_LOG_FAILED:
		snprintf(
		    d, len,
		    "the write-ahead log cannot be written; changes are refused until it can (see "
		    "the server log)");
		return P_LOG_UNAVAILABLE;
	case CMD_AMBIGUOUS:
		snprintf(
		    d, len,
		    "a key tests present in more than one layer of this filter, so deleting it "
		    "could remove another key; it and the keys after it were not deleted; keys "
		    "answered before it: %zu",
		    done);
		return P_AMBIGUOUS_DELETE;
	default:
		snprintf(d, len, "internal error; see the server log");
		return P_INTERNAL;
	}
}

/* The problem for a failed command-layer call; results (may be NULL) answer the first done
 * keys. */
void http_problem_status(struct http_api *api, struct http_api_response *r, enum cmd_status st,
			 const int *results, size_t done)
{
	char d[256];
	enum problem p = http_problem_detail(api, st, results != NULL, done, d, sizeof(d));

	/* Only an add or delete stopped part way carries the answers before it. */
	if (st != CMD_FULL && st != CMD_NO_MEMORY && st != CMD_AMBIGUOUS)
		results = NULL;
	problem_partial(r, p, results, done, "%s", d);
}
