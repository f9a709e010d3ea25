/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/JSON front end: routes, JSON in and out (cJSON), problem+json errors; see
 * http_api.h for the contract. Every word a client sees (types, titles, details) is here.
 *
 * The hot answers ({"results":[...]}, {"present":...}, {"added":...}) are written straight
 * into the response buffer: a fixed shape of booleans needs no escaping, and building a cJSON
 * tree for it would cost two allocations per key. Everything that carries a string (filter
 * names, problem details) is built with cJSON, which escapes it.
 */
#include "proto/http_api_impl.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* Largest integer a JSON number (a double) holds exactly: the bound of "capacity". */
#define JSON_INT_MAX 9007199254740992.0

/* JSON values a body may hold beyond max_args keys (the object, its array, a few fields). */
#define JSON_VALUES_SLACK 16

/* Sent when not even a problem document can be built. */
static const char oom_body[] = "{\"type\":\"insufficient_memory\",\"title\":\"Insufficient "
			       "memory\",\"status\":507,\"detail\":\"out of memory\"}\n";

/* ---------------------------------------------------------------------------------------- */
/* Routes, statuses and problems */

static const unsigned status_slots[HTTP_API_NSTATUS] = {
    0, 200, 201, 204, 400, 401, 404, 405, 409, 413, 415, 500, 503, 507,
};

unsigned http_api_status_at(unsigned i)
{
	return i < HTTP_API_NSTATUS ? status_slots[i] : 0;
}

static unsigned status_slot(unsigned status)
{
	for (unsigned i = 1; i < HTTP_API_NSTATUS; i++)
		if (status_slots[i] == status)
			return i;
	return 0;
}

static const struct {
	const char *name;
	const char *allow; /* methods the route takes, as the Allow header lists them */
} routes[HTTP_ROUTE_COUNT] = {
    [HTTP_ROUTE_NONE] = {"other", NULL},
    [HTTP_ROUTE_HEALTHZ] = {"/healthz", "GET, HEAD"},
    [HTTP_ROUTE_READYZ] = {"/readyz", "GET, HEAD"},
    [HTTP_ROUTE_METRICS] = {"/metrics", "GET, HEAD"},
    [HTTP_ROUTE_OPENAPI] = {"/v1/openapi.yaml", "GET, HEAD"},
    [HTTP_ROUTE_STATUS] = {"/", "GET, HEAD"},
    [HTTP_ROUTE_FILTERS] = {"/v1/filters", "GET, HEAD"},
    [HTTP_ROUTE_FILTER] = {"/v1/filters/{name}", "GET, HEAD, PUT, PATCH, DELETE"},
    [HTTP_ROUTE_ADD] = {"/v1/filters/{name}/add", "POST"},
    [HTTP_ROUTE_CHECK] = {"/v1/filters/{name}/check", "POST"},
    [HTTP_ROUTE_DELETE] = {"/v1/filters/{name}/delete", "POST"},
    [HTTP_ROUTE_KEY] = {"/v1/filters/{name}/keys/{key}", "GET, HEAD, PUT"},
    [HTTP_ROUTE_SNAPSHOT] = {"/v1/filters/{name}/snapshot", "POST"},
    [HTTP_ROUTE_RENAME] = {"/v1/filters/{name}/rename", "POST"},
};

const char *http_api_route_name(enum http_route r)
{
	return (unsigned)r < HTTP_ROUTE_COUNT ? routes[r].name : routes[HTTP_ROUTE_NONE].name;
}

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
};

/* ---------------------------------------------------------------------------------------- */
/* cJSON allocation, so that "out of memory" is not reported as "malformed JSON" */

bool http_api_json_alloc_failed;

static void *json_malloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		http_api_json_alloc_failed = true;
	return p;
}

static void json_free(void *p)
{
	free(p);
}

/* ---------------------------------------------------------------------------------------- */
/* Setup */

void http_api_init(struct http_api *api, struct cmd_ctx *cmd, const struct http_api_hooks *hooks)
{
	static cJSON_Hooks jh = {json_malloc, json_free};

	memset(api, 0, sizeof(*api));
	api->cmd = cmd;
	if (hooks)
		api->hooks = *hooks;
	cmd_session_init(&api->sess, 0);
	proto_buf_init(&api->path);
	cJSON_InitHooks(&jh);
}

void http_api_free(struct http_api *api)
{
	cmd_session_free(&api->sess);
	proto_buf_free(&api->path);
}

void http_api_response_init(struct http_api_response *r)
{
	memset(r, 0, sizeof(*r));
	proto_buf_init(&r->body);
}

void http_api_response_free(struct http_api_response *r)
{
	proto_buf_free(&r->body);
	r->data = NULL;
	r->len = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Small codecs */

bool http_api_utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p, *end = s + n;

	while (s < end) {
		unsigned c = *s, need;
		uint32_t cp, min;

		if (c < 0x80) {
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		if ((size_t)(end - s) <= need)
			return false;
		for (unsigned i = 1; i <= need; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += need + 1;
	}
	return true;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long http_api_base64_decode(const char *in, size_t n, unsigned char *out)
{
	uint32_t acc = 0;
	size_t bits = 0, o = 0, pad = 0;

	/* Up to two '=' at the very end, and only to complete a group of four. */
	while (pad < 2 && n > 0 && in[n - 1] == '=') {
		n--;
		pad++;
	}
	if (pad && (n + pad) % 4)
		return -EINVAL;
	if (n % 4 == 1)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value((unsigned char)in[i]);

		if (v < 0)
			return -EINVAL;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* The bits left over must be zero, so that every key has one encoding. */
	if (acc & ((1u << bits) - 1))
		return -EINVAL;
	return (long)o;
}

void http_api_base64_encode(struct proto_buf *out, const void *p, size_t n)
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = p;
	size_t i;

	if (proto_buf_reserve(out, (n + 2) / 3 * 4))
		return;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		char q[4] = {abc[v >> 18], abc[(v >> 12) & 63], abc[(v >> 6) & 63], abc[v & 63]};

		proto_buf_append(out, q, 4);
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
		char q[4] = {abc[v >> 18], abc[(v >> 12) & 63],
			     i + 1 < n ? abc[(v >> 6) & 63] : '=', '='};

		proto_buf_append(out, q, 4);
	}
}

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode p[0..n) into out (room for n bytes). Returns the length, or -EINVAL for a
 * '%' not followed by two hex digits. */
long http_api_pct_decode(const char *p, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			out[o++] = p[i];
			continue;
		}
		int hi = i + 2 < n ? hex_value((unsigned char)p[i + 1]) : -1;
		int lo = i + 2 < n ? hex_value((unsigned char)p[i + 2]) : -1;

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	return (long)o;
}

/* ---------------------------------------------------------------------------------------- */
/* Building responses */

/* Start a response: no headers, empty body. */
void http_api_resp_reset(struct http_api_response *r)
{
	if (r->body.failed)
		proto_buf_free(&r->body);
	proto_buf_reset(&r->body);
	r->status = 200;
	r->content_type = NULL;
	r->allow = NULL;
	r->www_authenticate = NULL;
	r->close = false;
	r->location[0] = '\0';
	r->data = NULL;
	r->len = 0;
}

void http_api_resp_oom(struct http_api_response *r)
{
	r->status = 507;
	r->content_type = CT_PROBLEM;
	r->location[0] = '\0';
	r->data = oom_body;
	r->len = sizeof(oom_body) - 1;
}

/* Print j (deleting it) as the body. False (and a 507) when memory ran out. */
bool http_api_resp_json(struct http_api_response *r, cJSON *j)
{
	char *text = j ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	if (!text) {
		http_api_resp_oom(r);
		return false;
	}
	proto_buf_append_str(&r->body, text);
	cJSON_free(text);
	return true;
}

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

/* {"<field>":[true,false,...]} or {"<field>":bool} for one answer (array false). */
static void emit_bools(struct http_api_response *r, const char *field, const int *res, size_t n,
		       bool array)
{
	struct proto_buf *b = &r->body;

	r->content_type = CT_JSON;
	proto_buf_reserve(b, strlen(field) + 8 + 6 * n);
	proto_buf_append_str(b, "{\"");
	proto_buf_append_str(b, field);
	proto_buf_append_str(b, array ? "\":[" : "\":");
	for (size_t i = 0; i < n; i++) {
		if (i)
			proto_buf_append_char(b, ',');
		if (res[i] > 0)
			proto_buf_append(b, "true", 4);
		else
			proto_buf_append(b, "false", 5);
	}
	proto_buf_append_str(b, array ? "]}" : "}");
}

/* A filter's name as a JSON string: itself when it is UTF-8, else U+FFFD for each bad byte
 * (the exact bytes then go in "name_b64"). */
static bool add_name(cJSON *j, const struct bf_filter *f)
{
	char fixed[BF_NAME_MAX * 3 + 1];
	size_t o = 0;

	if (http_api_utf8_valid(bf_filter_name(f), f->name_len))
		return cJSON_AddStringToObject(j, "name", bf_filter_name(f)) != NULL;
	for (size_t i = 0; i < f->name_len;) {
		size_t run = 1;

		/* The longest valid sequence starting here (1 to 4 bytes), else one bad byte. */
		for (size_t k = 4; k >= 1; k--) {
			if (i + k <= f->name_len && http_api_utf8_valid(bf_filter_name(f) + i, k)) {
				run = k;
				break;
			}
		}
		if (run == 1 && (unsigned char)bf_filter_name(f)[i] >= 0x80) {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
		} else {
			memcpy(fixed + o, bf_filter_name(f) + i, run);
			o += run;
		}
		i += run;
	}
	fixed[o] = '\0';

	struct proto_buf b64;
	bool ok;

	proto_buf_init(&b64);
	http_api_base64_encode(&b64, bf_filter_name(f), f->name_len);
	proto_buf_append_char(&b64, '\0');
	ok = !b64.failed && cJSON_AddStringToObject(j, "name", fixed) &&
	     cJSON_AddStringToObject(j, "name_b64", b64.data);
	proto_buf_free(&b64);
	return ok;
}

/* The FILTER object of a filter (detail: DETAIL, with parameters and stats). NULL on OOM. */
/* "ttl_seconds": the seconds left (rounded as Redis's TTL), or null if it does not expire. */
static bool add_ttl(cJSON *j, const struct bf_filter *f)
{
	uint64_t now = cmd_now_ms();

	if (!bf_filter_expire_ms(f))
		return cJSON_AddNullToObject(j, "ttl_seconds") != NULL;
	return cJSON_AddNumberToObject(j, "ttl_seconds",
				       bf_filter_expire_ms(f) > now
					   ? (double)((bf_filter_expire_ms(f) - now + 500) / 1000)
					   : 0) != NULL;
}

static cJSON *filter_json(const struct bf_filter *f, bool detail)
{
	cJSON *j = cJSON_CreateObject(), *st;
	bool ok = j && add_name(j, f);
	double fpr;

	ok = ok && cJSON_AddStringToObject(
		       j, "type", f->params->type == BF_TYPE_COUNTING ? "counting" : "bloom");
	ok = ok && cJSON_AddNumberToObject(j, "capacity", (double)bf_filter_capacity(f));
	ok = ok && cJSON_AddNumberToObject(j, "error_rate", f->params->error_rate);
	ok = ok && cJSON_AddNumberToObject(j, "items", (double)bf_filter_items(f));
	ok = ok && cJSON_AddNumberToObject(j, "bytes", (double)bf_filter_bytes(f));
	ok = ok && cJSON_AddNumberToObject(j, "layers", bf_filter_nlayers(f));
	if (ok && detail) {
		fpr = bf_filter_fpr(f);
		ok = cJSON_AddNumberToObject(j, "initial_capacity", (double)f->params->capacity) &&
		     cJSON_AddNumberToObject(j, "expansion", f->params->expansion) &&
		     cJSON_AddBoolToObject(j, "persist", f->params->persist) && add_ttl(j, f) &&
		     /* -0.0 for an empty filter would print as "-0" */
		     cJSON_AddNumberToObject(j, "fpr_estimate", fpr > 0 ? fpr : 0) &&
		     (st = cJSON_AddObjectToObject(j, "stats")) &&
		     cJSON_AddNumberToObject(st, "checks", (double)bf_filter_checks(f)) &&
		     cJSON_AddNumberToObject(st, "check_hits",
					     (double)bf_filter_stat(f, BF_STAT_CHECK_HITS)) &&
		     cJSON_AddNumberToObject(st, "check_misses",
					     (double)bf_filter_stat(f, BF_STAT_CHECK_MISSES)) &&
		     cJSON_AddNumberToObject(st, "sets", (double)bf_filter_sets(f)) &&
		     cJSON_AddNumberToObject(st, "set_hits",
					     (double)bf_filter_stat(f, BF_STAT_SET_HITS)) &&
		     cJSON_AddNumberToObject(st, "set_misses",
					     (double)bf_filter_stat(f, BF_STAT_SET_MISSES)) &&
		     cJSON_AddNumberToObject(st, "deletes", (double)bf_filter_deletes(f)) &&
		     cJSON_AddNumberToObject(st, "delete_hits", (double)bf_filter_delete_hits(f)) &&
		     cJSON_AddNumberToObject(st, "delete_misses",
					     (double)bf_filter_delete_misses(f));
	}
	if (!ok) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* "/v1/filters/" + the name with every byte outside [A-Za-z0-9._~-] percent-encoded. */
static void set_location(struct http_api_response *r, const struct bf_filter *f)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = strlen(strcpy(r->location, "/v1/filters/"));

	for (size_t i = 0; i < f->name_len; i++) {
		unsigned char c = (unsigned char)bf_filter_name(f)[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '~' || c == '-') {
			r->location[o++] = (char)c;
		} else {
			r->location[o++] = '%';
			r->location[o++] = hex[c >> 4];
			r->location[o++] = hex[c & 15];
		}
	}
	r->location[o] = '\0';
}

/* ---------------------------------------------------------------------------------------- */
/* Request parsing */

static bool span_is(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n == n && memcmp(s.p, lit, n) == 0;
}

/* The route of a raw path, with its raw {name} and {key} segments. */
enum http_route http_api_route_match(struct span path, struct span *name, struct span *key)
{
	static const char v1[] = "/v1/filters";
	const size_t v1n = sizeof(v1) - 1;
	const char *slash;
	struct span rest;

	if (span_is(path, "/healthz"))
		return HTTP_ROUTE_HEALTHZ;
	if (span_is(path, "/readyz"))
		return HTTP_ROUTE_READYZ;
	if (span_is(path, "/metrics"))
		return HTTP_ROUTE_METRICS;
	if (span_is(path, "/v1/openapi.yaml"))
		return HTTP_ROUTE_OPENAPI;
	if (span_is(path, "/"))
		return HTTP_ROUTE_STATUS;
	if (path.n < v1n || memcmp(path.p, v1, v1n) != 0)
		return HTTP_ROUTE_NONE;
	if (path.n == v1n)
		return HTTP_ROUTE_FILTERS;
	if (path.p[v1n] != '/')
		return HTTP_ROUTE_NONE;
	name->p = path.p + v1n + 1;
	name->n = path.n - v1n - 1;
	slash = memchr(name->p, '/', name->n);
	if (!slash)
		return HTTP_ROUTE_FILTER;
	rest.p = slash + 1;
	rest.n = name->n - (size_t)(rest.p - name->p);
	name->n = (size_t)(slash - name->p);
	if (span_is(rest, "add"))
		return HTTP_ROUTE_ADD;
	if (span_is(rest, "check"))
		return HTTP_ROUTE_CHECK;
	if (span_is(rest, "delete"))
		return HTTP_ROUTE_DELETE;
	if (span_is(rest, "snapshot"))
		return HTTP_ROUTE_SNAPSHOT;
	if (span_is(rest, "rename"))
		return HTTP_ROUTE_RENAME;
	if (rest.n >= 5 && memcmp(rest.p, "keys/", 5) == 0 &&
	    !memchr(rest.p + 5, '/', rest.n - 5)) {
		key->p = rest.p + 5;
		key->n = rest.n - 5;
		return HTTP_ROUTE_KEY;
	}
	return HTTP_ROUTE_NONE;
}

static bool method_allowed(enum http_route route, const char *m)
{
	const char *allow = routes[route].allow;
	size_t n = strlen(m);

	/* The Allow list is "A, B, C": match one whole word of it. */
	for (const char *p = allow; (p = strstr(p, m)) != NULL; p += n)
		if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* "application/json" or "application/<anything>+json", any case, parameters ignored. */
static bool is_json_type(const char *ct)
{
	size_t n;

	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	if (n < 16 || strncasecmp(ct, "application/", 12) != 0)
		return false;
	return (n == 16 && strncasecmp(ct + 12, "json", 4) == 0) ||
	       strncasecmp(ct + n - 5, "+json", 5) == 0;
}

/* Constant-time comparison of "Bearer <token>" with the expected token. */
static bool auth_ok(const char *hdr, const char *token)
{
	size_t hl;

	if (!hdr || strncasecmp(hdr, "Bearer ", 7) != 0)
		return false;
	hdr += 7;
	while (*hdr == ' ')
		hdr++;
	hl = strlen(hdr);
	while (hl && (hdr[hl - 1] == ' ' || hdr[hl - 1] == '\t'))
		hl--;
	return cmd_token_equal(token, strlen(token), hdr, hl);
}

/* A field name fit to quote in a detail: printable ASCII ('?' for other bytes), at most 64
 * bytes. */
const char *http_api_field_label(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i < 64 && i + 1 < len; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

/*
 * The body as a JSON value (or a problem, and NULL). Before cJSON sees it: a NUL byte or a
 * \u0000 escape is refused (a C string would cut the key there), and the values are counted
 * (every value but the root follows a '[', '{' or ',') so a huge array is refused before a
 * node is allocated for it.
 */
cJSON *http_api_parse_body(struct http_api *api, const struct http_api_request *req,
			   struct http_api_response *r)
{
	const char *p = req->body, *end;
	size_t n = req->body_len, values = 1;
	bool in_str = false;
	cJSON *j;

	if (!is_json_type(req->content_type)) {
		http_problem(r, P_MEDIA_TYPE, "the body must be application/json");
		return NULL;
	}
	/* Only a streamed add inflates its body: a gzip'd JSON body is refused as such, not
	 * read as JSON holding NUL bytes. */
	if (req->content_encoding && strcasecmp(req->content_encoding, "identity") != 0) {
		http_problem(
		    r, P_MEDIA_TYPE,
		    "an application/json body is not compressed (Content-Encoding: gzip is for "
		    "a text/plain or application/x-ndjson add)");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (c == '\0')
			goto nul;
		if (in_str) {
			if (c == '\\') {
				if (i + 5 < n && memcmp(p + i + 1, "u0000", 5) == 0)
					goto nul;
				i++;
			} else if (c == '"') {
				in_str = false;
			}
		} else if (c == '"') {
			in_str = true;
		} else if (c == ',' || c == '[' || c == '{') {
			values++;
		}
	}
	if (values > api->cmd->max_args + JSON_VALUES_SLACK) {
		http_problem(r, P_TOO_LARGE, "more than max_args (%zu) keys", api->cmd->max_args);
		return NULL;
	}
	http_api_json_alloc_failed = false;
	j = cJSON_ParseWithLengthOpts(p, n, &end, 0);
	if (!j) {
		if (http_api_json_alloc_failed)
			http_problem(r, P_NO_MEMORY, "out of memory parsing the body");
		else
			http_problem(r, P_BAD_REQUEST, "malformed JSON");
		return NULL;
	}
	for (; end < p + n; end++) {
		if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n') {
			cJSON_Delete(j);
			http_problem(r, P_BAD_REQUEST, "malformed JSON: text after the value");
			return NULL;
		}
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		http_problem(r, P_BAD_REQUEST, "the body must be a JSON object");
		return NULL;
	}
	return j;
nul:
	http_problem(r, P_BAD_REQUEST,
		     "JSON strings must not contain NUL (\\u0000); send such keys as keys_b64");
	return NULL;
}

/*
 * The keys of a {"keys":[...]} / {"keys_b64":[...]} body, into api->sess (keys point into
 * the returned tree, which the caller deletes after use). NULL with a problem set otherwise.
 */
static cJSON *parse_keys(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, size_t *count)
{
	cJSON *j, *arr = NULL, *e;
	const char *field = NULL;
	char label[72];
	bool b64 = false;
	size_t n = 0, i;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be a JSON object with \"keys\" or "
			     "\"keys_b64\"");
		return NULL;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return NULL;
	/* One pass, stopping at the first unknown or repeated field (cJSON keeps repeats). */
	for (e = j->child; e; e = e->next) {
		if (strcmp(e->string, "keys") && strcmp(e->string, "keys_b64")) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			goto fail;
		}
		if (arr && strcmp(arr->string, e->string) == 0) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice", e->string);
			goto fail;
		}
		if (arr) {
			http_problem(r, P_BAD_REQUEST, "give \"keys\" or \"keys_b64\", not both");
			goto fail;
		}
		arr = e;
		field = e->string;
		b64 = strcmp(field, "keys_b64") == 0;
	}
	if (!arr) {
		http_problem(r, P_BAD_REQUEST, "missing field \"keys\" (or \"keys_b64\")");
		goto fail;
	}
	if (!cJSON_IsArray(arr)) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" must be an array of strings", field);
		goto fail;
	}
	for (e = arr->child; e; e = e->next)
		n++;
	if (n > api->cmd->max_args) {
		http_problem(r, P_TOO_LARGE, "more than max_args (%zu) keys", api->cmd->max_args);
		goto fail;
	}
	if (cmd_session_reserve(&api->sess, n)) {
		http_problem(r, P_NO_MEMORY, "out of memory for %zu keys", n);
		goto fail;
	}
	for (i = 0, e = arr->child; e; e = e->next, i++) {
		size_t len;

		if (!cJSON_IsString(e)) {
			http_problem(r, P_BAD_REQUEST, "%s[%zu] must be a string", field, i);
			goto fail;
		}
		len = strlen(e->valuestring);
		if (b64) {
			/* Decoding only shrinks: decode in place, in the tree's own copy. */
			long m = http_api_base64_decode(e->valuestring, len,
							(unsigned char *)e->valuestring);

			if (m < 0) {
				http_problem(r, P_BAD_REQUEST, "%s[%zu] is not valid base64", field,
					     i);
				goto fail;
			}
			len = (size_t)m;
		}
		api->sess.keys[i] = e->valuestring;
		api->sess.lens[i] = len;
	}
	*count = n;
	return j;
fail:
	cJSON_Delete(j);
	return NULL;
}

/* A JSON number that is an integer in [lo, hi]. */
static bool json_int(const cJSON *v, double lo, double hi, double *out)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
		return false;
	*out = v->valuedouble;
	return true;
}

enum param_field {
	PF_CAPACITY,
	PF_ERROR_RATE,
	PF_TYPE,
	PF_EXPANSION,
	PF_NONSCALING,
	PF_PERSIST,
	PF_TTL
};

static const char *const param_fields[] = {
    [PF_CAPACITY] = "capacity",	  [PF_ERROR_RATE] = "error_rate", [PF_TYPE] = "type",
    [PF_EXPANSION] = "expansion", [PF_NONSCALING] = "nonscaling", [PF_PERSIST] = "persist",
    [PF_TTL] = "ttl_seconds",
};

/* "ttl_seconds": an integer of seconds >= 1 (*ttl_ms set), or null (0: no expiry). False with
 * a problem set. */
static bool parse_ttl(struct http_api_response *r, const cJSON *e, uint64_t *ttl_ms)
{
	double v;

	if (cJSON_IsNull(e)) {
		*ttl_ms = 0;
		return true;
	}
	if (!json_int(e, 1, HTTP_API_TTL_MAX, &v)) {
		http_problem(r, P_BAD_REQUEST,
			     "\"ttl_seconds\" must be an integer from 1 to %.0f, or null for none",
			     HTTP_API_TTL_MAX);
		return false;
	}
	*ttl_ms = (uint64_t)v * 1000;
	return true;
}

/* One field of the PUT body into p (nonscaling and ttl_seconds apart). False with a problem
 * set. */
static bool parse_param(struct http_api_response *r, enum param_field f, const cJSON *e,
			struct bf_params *p, bool *nonscaling, uint64_t *ttl_ms)
{
	double v;

	switch (f) {
	case PF_TTL:
		return parse_ttl(r, e, ttl_ms);
	case PF_CAPACITY:
		if (!json_int(e, 0, JSON_INT_MAX, &v) ||
		    cmd_check_capacity((uint64_t)v) != CMD_OK) {
			http_problem(r, P_BAD_REQUEST, "\"capacity\" must be an integer >= 1");
			return false;
		}
		p->capacity = (uint64_t)v;
		return true;
	case PF_ERROR_RATE:
		if (!cJSON_IsNumber(e) || cmd_check_error_rate(e->valuedouble) == CMD_BAD_ARGS) {
			http_problem(r, P_BAD_REQUEST,
				     "\"error_rate\" must be a number between 0 and 1 (exclusive)");
			return false;
		}
		p->error_rate = e->valuedouble;
		return true;
	case PF_TYPE:
		if (cJSON_IsString(e) && strcmp(e->valuestring, "bloom") == 0) {
			p->type = BF_TYPE_BLOOM;
		} else if (cJSON_IsString(e) && strcmp(e->valuestring, "counting") == 0) {
			p->type = BF_TYPE_COUNTING;
		} else {
			http_problem(r, P_BAD_REQUEST,
				     "\"type\" must be \"bloom\" or \"counting\"");
			return false;
		}
		return true;
	case PF_EXPANSION:
		if (!json_int(e, 0, JSON_INT_MAX, &v) ||
		    cmd_check_expansion((uint64_t)v) != CMD_OK) {
			http_problem(r, P_BAD_REQUEST,
				     "\"expansion\" must be an integer from 0 to %d",
				     BF_MAX_EXPANSION);
			return false;
		}
		p->expansion = (uint32_t)v;
		return true;
	default:
		if (!cJSON_IsBool(e)) {
			http_problem(r, P_BAD_REQUEST, "\"%s\" must be true or false",
				     param_fields[f]);
			return false;
		}
		if (f == PF_NONSCALING)
			*nonscaling = cJSON_IsTrue(e);
		else
			p->persist = cJSON_IsTrue(e);
		return true;
	}
}

/* The parameters of PUT /v1/filters/{name}: defaults, then the body's fields. */
static bool parse_params(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct bf_params *p, uint64_t *ttl_ms)
{
	const size_t nfields = sizeof(param_fields) / sizeof(param_fields[0]);
	bool nonscaling = false, ok = true;
	unsigned seen = 0;
	char label[72];
	cJSON *j, *e;

	*p = cmd_default_params(api->cmd, CMD_PEER_HTTP);
	if (req->body_len == 0)
		return true;
	j = http_api_parse_body(api, req, r);
	if (!j)
		return false;
	/* One pass, stopping at the first unknown, repeated or bad field. */
	for (e = j->child; ok && e; e = e->next) {
		size_t f = 0;

		while (f < nfields && strcmp(e->string, param_fields[f]) != 0)
			f++;
		if (f == nfields) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			ok = false;
		} else if (seen & (1u << f)) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice",
				     param_fields[f]);
			ok = false;
		} else {
			seen |= 1u << f;
			ok = parse_param(r, (enum param_field)f, e, p, &nonscaling, ttl_ms);
		}
	}
	if (ok && nonscaling) {
		if ((seen & (1u << PF_EXPANSION)) && p->expansion != 0) {
			http_problem(
			    r, P_BAD_REQUEST,
			    "\"nonscaling\": true and a non-zero \"expansion\" contradict");
			ok = false;
		}
		p->expansion = 0;
	}
	cJSON_Delete(j);
	return ok;
}

/* ---------------------------------------------------------------------------------------- */
/* Handlers */

/*
 * GET /v1/filters: every filter in name order; with ?prefix= those whose name starts with it,
 * ?after= those after that name, and ?limit=N (1..HTTP_API_LIST_MAX) at most N of them, with
 * "more": whether others follow (the next page: after= the last name). ?detail=true: DETAIL
 * objects (each estimate is a model sum per layer, hence the smaller bound on limit).
 */
/*
 * A query argument holding (the start of) a filter name, percent-decoded into out (room for
 * BF_NAME_MAX bytes): its length, or -1 with a 400 in r. A malformed escape, or a byte no name
 * can hold (bf_name_valid: a control byte, a space or DEL), is refused rather than matching
 * nothing in silence.
 */
static long name_arg(struct http_api_response *r, const char *field, const char *v, char *out)
{
	char buf[BF_NAME_MAX * 3 + 1];
	size_t n = v ? strlen(v) : 0;
	long len;

	if (n > sizeof(buf)) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" is longer than a filter name (%d bytes)",
			     field, BF_NAME_MAX);
		return -1;
	}
	len = http_api_pct_decode(v ? v : "", n, buf);
	if (len < 0) {
		http_problem(r, P_BAD_REQUEST, "\"%s\": malformed percent-encoding", field);
		return -1;
	}
	if (len > BF_NAME_MAX) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" is longer than a filter name (%d bytes)",
			     field, BF_NAME_MAX);
		return -1;
	}
	for (long i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c <= 0x20 || c == 0x7f) {
			http_problem(
			    r, P_BAD_REQUEST,
			    "\"%s\" holds a byte no filter name can (a control byte, space or "
			    "DEL)",
			    field);
			return -1;
		}
	}
	memcpy(out, buf, (size_t)len);
	return len;
}

void http_filters_list(struct http_api *api, const struct http_api_request *req,
		       struct http_api_response *r)
{
	char prefix[BF_NAME_MAX], after[BF_NAME_MAX];
	long prefix_len = name_arg(r, "prefix", req->q_prefix, prefix), after_len;
	struct bf_filter **list;
	cJSON *j, *arr;
	size_t n, limit = SIZE_MAX;
	bool more = false, detail = false;

	if (prefix_len < 0 || (after_len = name_arg(r, "after", req->q_after, after)) < 0)
		return;
	if (req->q_detail) {
		detail = strcmp(req->q_detail, "true") == 0;
		if (!detail && strcmp(req->q_detail, "false") != 0) {
			http_problem(r, P_BAD_REQUEST, "\"detail\" must be true or false");
			return;
		}
	}

	if (req->q_limit) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(req->q_limit, &end, 10);
		if (!isdigit((unsigned char)req->q_limit[0]) || *end || errno || v < 1 ||
		    v > (detail ? HTTP_API_LIST_DETAIL_MAX : HTTP_API_LIST_MAX)) {
			http_problem(r, P_BAD_REQUEST, "\"limit\" must be an integer from 1 to %d",
				     detail ? HTTP_API_LIST_DETAIL_MAX : HTTP_API_LIST_MAX);
			return;
		}
		limit = (size_t)v;
	} else if (detail) {
		http_problem(r, P_BAD_REQUEST, "detail=true needs \"limit\", from 1 to %d",
			     HTTP_API_LIST_DETAIL_MAX);
		return;
	}
	if (bf_registry_page(api->cmd->reg, prefix, (size_t)prefix_len, after, (size_t)after_len,
			     limit, &list, &n, &more)) {
		http_api_resp_oom(r);
		return;
	}
	j = cJSON_CreateObject();
	arr = j ? cJSON_AddArrayToObject(j, "filters") : NULL;
	uint64_t now = cmd_now_ms();
	for (size_t i = 0; arr && i < n; i++) {
		if (cmd_expired(list[i], now))
			continue; /* its time has come: gone at its next lookup */
		cJSON *f = filter_json(list[i], detail);

		if (!f || !cJSON_AddItemToArray(arr, f)) {
			cJSON_Delete(f);
			arr = NULL;
		}
	}
	/* With a limit, whether more follow (pass the last name as after= for them). */
	if (arr && req->q_limit && !cJSON_AddBoolToObject(j, "more", more))
		arr = NULL;
	free(list);
	if (!arr) {
		cJSON_Delete(j);
		http_api_resp_oom(r);
		return;
	}
	r->content_type = CT_JSON;
	http_api_resp_json(r, j);
}

void http_filters_get(struct http_api_response *r, const struct bf_filter *f)
{
	cJSON *j = filter_json(f, true);

	if (!j) {
		http_api_resp_oom(r);
		return;
	}
	r->content_type = CT_JSON;
	http_api_resp_json(r, j);
}

void http_filters_create(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct span name)
{
	struct bf_filter *f;
	struct bf_params p;
	enum cmd_status st;
	uint64_t ttl_ms = 0;

	if (!bf_name_valid(name.p, name.n)) {
		http_problem_status(api, r, CMD_BAD_NAME, NULL, 0);
		return;
	}
	if (!parse_params(api, req, r, &p, &ttl_ms))
		return;
	st = cmd_create(api->cmd, name.p, name.n, &p, &f);
	if (st == CMD_OK && ttl_ms) {
		st = cmd_set_expire(api->cmd, f, cmd_now_ms() + ttl_ms);
		if (st != CMD_OK)
			cmd_drop(api->cmd, name.p, name.n, true);
	}
	if (st != CMD_OK) {
		http_problem_status(api, r, st, NULL, 0);
		return;
	}
	http_filters_get(r, f);
	if (r->status == 200) {
		r->status = 201;
		set_location(r, f);
	}
}

/* Run op over api->sess's n keys and answer with field = the results. */
static void run_keys(struct http_api *api, struct http_api_response *r, struct bf_filter *f,
		     enum cmd_key_op op, size_t n, const char *field, bool array)
{
	struct cmd_session *s = &api->sess;
	size_t done = 0;
	enum cmd_status st = cmd_run_keys(api->cmd, s, f, op, n, &done);

	if (st != CMD_OK) {
		http_problem_status(api, r, st, op == CMD_KEYS_CHECK ? NULL : s->results, done);
		return;
	}
	emit_bools(r, field, s->results, n, array);
}

void http_keys_batch(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *r, struct bf_filter *f, enum cmd_key_op op)
{
	size_t n;
	cJSON *j = parse_keys(api, req, r, &n);

	if (!j)
		return;
	run_keys(api, r, f, op, n, "results", true);
	cJSON_Delete(j);
}

void http_keys_one(struct http_api *api, struct http_api_response *r, struct bf_filter *f,
		   struct span key, bool put)
{
	if (cmd_session_reserve(&api->sess, 1)) {
		http_api_resp_oom(r);
		return;
	}
	api->sess.keys[0] = key.p;
	api->sess.lens[0] = key.n;
	run_keys(api, r, f, put ? CMD_KEYS_ADD : CMD_KEYS_CHECK, 1, put ? "added" : "present",
		 false);
}

void http_filters_snapshot(struct http_api *api, const struct http_api_request *req,
			   struct http_api_response *r, struct bf_filter *f)
{
	enum cmd_status st = cmd_flush(api->cmd, f, req->flush_ticket);

	if (api->cmd->write_wait)
		return; /* written in the background: the server handles it again after */
	if (st != CMD_OK) {
		http_problem(r, P_INTERNAL, "the snapshot failed; see the server log");
		return;
	}
	r->content_type = CT_JSON;
	/* A memory-only filter is never written (text flush says Done for it too): not
	 * claimed as flushed. */
	if (!f->params->persist)
		proto_buf_append_str(&r->body, "{\"flushed\":false,\"reason\":\"the filter is "
					       "memory-only (persist false): it is never "
					       "snapshotted\"}");
	else
		proto_buf_append_str(&r->body, "{\"flushed\":true}");
}

/* PATCH /v1/filters/{name} {"ttl_seconds":N|null}: set or clear the expiry. */
void http_filters_patch(struct http_api *api, const struct http_api_request *req,
			struct http_api_response *r, struct bf_filter *f)
{
	const cJSON *ttl;
	uint64_t ttl_ms;
	cJSON *j;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be {\"ttl_seconds\":N} or "
			     "{\"ttl_seconds\":null}");
		return;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return;
	ttl = j->child;
	if (!ttl || ttl->next || strcmp(ttl->string, "ttl_seconds") != 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be {\"ttl_seconds\":N} or "
			     "{\"ttl_seconds\":null}");
	} else if (parse_ttl(r, ttl, &ttl_ms)) {
		enum cmd_status st =
		    cmd_set_expire(api->cmd, f, ttl_ms ? cmd_now_ms() + ttl_ms : 0);
		if (st != CMD_OK)
			http_problem_status(api, r, st, NULL, 0);
		else
			http_filters_get(r, f);
	}
	cJSON_Delete(j);
}

/* POST /v1/filters/{name}/rename {"to":NAME[, "replace":bool]}. */
void http_filters_rename(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct bf_filter *f)
{
	const cJSON *to = NULL, *replace = NULL;
	char label[72];
	cJSON *j, *e;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST, "the body must name the new name: {\"to\":\"...\"}");
		return;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return;
	for (e = j->child; e; e = e->next) {
		const cJSON **slot = !strcmp(e->string, "to")	     ? &to
				     : !strcmp(e->string, "replace") ? &replace
								     : NULL;
		if (!slot) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			goto out;
		}
		if (*slot) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice", e->string);
			goto out;
		}
		*slot = e;
	}
	if (!cJSON_IsString(to)) {
		http_problem(r, P_BAD_REQUEST, "\"to\" must be a string, the new name");
		goto out;
	}
	if (replace && !cJSON_IsBool(replace)) {
		http_problem(r, P_BAD_REQUEST, "\"replace\" must be true or false");
		goto out;
	}
	enum cmd_status st = cmd_rename(api->cmd, bf_filter_name(f), f->name_len, to->valuestring,
					strlen(to->valuestring), !cJSON_IsTrue(replace));
	if (st == CMD_EXISTS)
		http_problem(r, P_FILTER_EXISTS,
			     "the new name is taken; send \"replace\":true to replace that "
			     "filter");
	else if (st != CMD_OK)
		http_problem_status(api, r, st, NULL, 0);
	else
		http_filters_get(r, f);
out:
	cJSON_Delete(j);
}

static void do_static(struct http_api_response *r, const char *json)
{
	r->content_type = CT_JSON;
	proto_buf_append_str(&r->body, json);
}

/*
 * True, with the problem in r, if req is refused whatever its body: no such route (404), a
 * method the route does not take (405), or no token where one is needed (401; /healthz and
 * /readyz stay open). In that order: a wrong route or method is told with or without the token.
 */
bool http_api_refused(const struct http_api *api, const struct http_api_request *req,
		      enum http_route route, struct http_api_response *r)
{
	if (route == HTTP_ROUTE_NONE) {
		http_problem(r, P_NOT_FOUND, "no such route");
		return true;
	}
	if (!method_allowed(route, req->method)) {
		http_problem(r, P_METHOD_NOT_ALLOWED, "%s takes %s", routes[route].name,
			     routes[route].allow);
		r->allow = routes[route].allow;
		return true;
	}
	if (!api->token || !api->token[0] || route == HTTP_ROUTE_HEALTHZ ||
	    route == HTTP_ROUTE_READYZ)
		return false;
	/* Authorization is a singleton field (RFC 9110 11.6.2): which of two counts is not for
	 * us to guess. */
	if (req->authorization_repeated) {
		http_problem(r, P_BAD_REQUEST, "more than one Authorization header");
		return true;
	}
	if (auth_ok(req->authorization, api->token))
		return false;
	http_problem(r, P_UNAUTHORIZED, "send \"Authorization: Bearer <token>\"");
	r->www_authenticate = "Bearer";
	return true;
}

/* Route, check and run the request; counting is left to the caller. */
static void dispatch(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *r, enum http_route route, struct span name,
		     struct span key)
{
	const char *m = req->method, *why;
	struct bf_filter *f = NULL;
	bool get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
	long nl, kl;
	char *buf;

	if (http_api_refused(api, req, route, r))
		return;
	switch (route) {
	case HTTP_ROUTE_HEALTHZ:
		do_static(r, "{\"status\":\"ok\"}");
		return;
	case HTTP_ROUTE_READYZ:
		why = api->hooks.not_ready ? api->hooks.not_ready(api->hooks.arg) : NULL;
		if (why)
			http_problem(r, P_NOT_READY, "%s", why);
		else
			do_static(r, "{\"status\":\"ready\"}");
		return;
	case HTTP_ROUTE_METRICS:
		if (!api->hooks.metrics) {
			http_problem(r, P_NOT_FOUND, "no such route");
			return;
		}
		r->content_type = CT_METRICS;
		api->hooks.metrics(api->hooks.arg, &r->body);
		return;
	case HTTP_ROUTE_OPENAPI:
		r->content_type = CT_YAML;
		r->data = http_api_openapi_yaml;
		r->len = http_api_openapi_yaml_len;
		return;
	case HTTP_ROUTE_STATUS:
		r->content_type = CT_HTML;
		r->data = http_api_status_html;
		r->len = http_api_status_html_len;
		return;
	case HTTP_ROUTE_FILTERS:
		http_filters_list(api, req, r);
		return;
	default:
		break;
	}

	/* The routes below name a filter (and maybe a key): decode them. One byte more than
	 * they need, so the buffer exists even for an empty name and key (NULL + 0 is UB). */
	if (proto_buf_reserve(&api->path, name.n + key.n + 1)) {
		proto_buf_free(&api->path);
		http_api_resp_oom(r);
		return;
	}
	buf = api->path.data;
	nl = http_api_pct_decode(name.p, name.n, buf);
	kl = nl < 0 ? -1 : http_api_pct_decode(key.p, key.n, buf + nl);
	if (nl < 0 || kl < 0) {
		http_problem(r, P_BAD_REQUEST, "malformed percent-encoding in the path");
		return;
	}
	name = (struct span){buf, (size_t)nl};
	key = (struct span){buf + nl, (size_t)kl};

	if (route == HTTP_ROUTE_FILTER && strcmp(m, "PUT") == 0) {
		http_filters_create(api, req, r, name);
		return;
	}
	if (route == HTTP_ROUTE_FILTER && strcmp(m, "DELETE") == 0) {
		enum cmd_status st = cmd_drop(api->cmd, name.p, name.n, true);

		if (st == CMD_OK)
			r->status = 204;
		else
			http_problem_status(api, r, st, NULL, 0);
		return;
	}
	/* A closed (paged-out) filter is loaded first; a snapshot of one has nothing to do. */
	if (route != HTTP_ROUTE_SNAPSHOT) {
		enum cmd_status ready = cmd_ready(api->cmd, name.p, name.n);

		if (ready != CMD_OK) {
			http_problem_status(api, r, ready, NULL, 0);
			return;
		}
		if (api->cmd->paging)
			return;
	}
	f = cmd_lookup(api->cmd, name.p, name.n);
	if (!f) {
		http_problem_status(api, r, CMD_NOT_FOUND, NULL, 0);
		return;
	}
	switch (route) {
	case HTTP_ROUTE_FILTER:
		if (strcmp(m, "PATCH") == 0)
			http_filters_patch(api, req, r, f);
		else
			http_filters_get(r, f);
		break;
	case HTTP_ROUTE_ADD:
		http_keys_batch(api, req, r, f, CMD_KEYS_ADD);
		break;
	case HTTP_ROUTE_CHECK:
		http_keys_batch(api, req, r, f, CMD_KEYS_CHECK);
		break;
	case HTTP_ROUTE_DELETE:
		http_keys_batch(api, req, r, f, CMD_KEYS_DELETE);
		break;
	case HTTP_ROUTE_KEY:
		http_keys_one(api, r, f, key, !get);
		break;
	case HTTP_ROUTE_RENAME:
		http_filters_rename(api, req, r, f);
		break;
	default:
		http_filters_snapshot(api, req, r, f);
		break;
	}
}

/* Count the answered request and fix data/len. A JSON body ends with a newline, as many APIs'
 * do, so that curl's output ends its line. */
void http_api_finish(struct http_api *api, struct http_api_response *r, enum http_route route)
{
	if (!r->data && r->body.len && r->content_type &&
	    (!strcmp(r->content_type, CT_JSON) || !strcmp(r->content_type, CT_PROBLEM)))
		proto_buf_append_char(&r->body, '\n');
	if (r->body.failed) {
		http_api_resp_oom(r);
	} else if (!r->data) {
		r->data = r->body.data;
		r->len = r->body.len;
	}
	if (!r->data)
		r->data = "";
	r->route = route;
	api->requests[route][status_slot(r->status)]++;
	if (route >= HTTP_ROUTE_FILTERS) {
		api->cmd->commands++;
		api->cmd->peer_commands[CMD_PEER_HTTP]++;
		if (r->status >= 400)
			api->cmd->errors++;
	}
}

void http_api_handle(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *resp)
{
	struct span path = {req->path, req->path_len}, name = {"", 0}, key = {"", 0};
	enum http_route route = http_api_route_match(path, &name, &key);

	http_api_resp_reset(resp);
	api->cmd->paging = NULL;
	api->cmd->write_wait = false;
	dispatch(api, req, resp, route, name, key);
	/* Its filter is loading (cmd_ready), or being written (a snapshot): the server holds
	 * the request and calls again. */
	if (api->cmd->paging || api->cmd->write_wait)
		return;
	http_api_finish(api, resp, route);
}

void http_api_unlogged(struct http_api *api, struct http_api_response *resp)
{
	enum http_route route = resp->route;

	/* Uncount the answer it was; http_api_finish() counts the refusal it becomes. */
	api->requests[route][status_slot(resp->status)]--;
	if (route >= HTTP_ROUTE_FILTERS) {
		api->cmd->commands--;
		api->cmd->peer_commands[CMD_PEER_HTTP]--;
		if (resp->status >= 400)
			api->cmd->errors--;
	}
	http_api_resp_reset(resp);
	http_problem_status(api, resp, CMD_LOG_FAILED, NULL, 0);
	http_api_finish(api, resp, route);
}

bool http_api_admit(struct http_api *api, const struct http_api_request *req,
		    struct http_api_response *resp)
{
	struct span path = {req->path, req->path_len}, name, key;
	enum http_route route = http_api_route_match(path, &name, &key);

	http_api_resp_reset(resp);
	if (!http_api_refused(api, req, route, resp))
		return true;
	resp->close = true;
	http_api_finish(api, resp, route);
	return false;
}

void http_api_refuse(struct http_api *api, const struct http_api_request *req,
		     enum http_api_refusal why, uint64_t max_body_bytes,
		     struct http_api_response *resp)
{
	struct span path = {req->path, req->path_len}, name, key;
	enum http_route route = http_api_route_match(path, &name, &key);

	http_api_resp_reset(resp);
	switch (why) {
	case HTTP_REFUSE_TOO_LARGE:
		http_problem(resp, P_TOO_LARGE, "the body is larger than max_body_bytes (%llu)",
			     (unsigned long long)max_body_bytes);
		break;
	case HTTP_REFUSE_FRAMING:
		http_problem(resp, P_BAD_REQUEST,
			     "conflicting body framing (repeated Content-Length, or Content-Length "
			     "with Transfer-Encoding)");
		break;
	default:
		http_problem(resp, P_NO_MEMORY, "out of memory for the request body");
		break;
	}
	resp->close = true;
	http_api_finish(api, resp, route);
}

/* ---------------------------------------------------------------------------------------- */
/* Streaming bulk load (see http_api.h) */

/* Keys added per batch, and the bytes a batch holds at most (beyond one key). */
#define STREAM_BATCH_KEYS  4096
#define STREAM_BATCH_BYTES (256 * 1024)

struct http_api_stream {
	char name[BF_NAME_MAX];
	size_t name_len;
	bool ndjson, gzip, zinit, zdone, skipping;
	/* waiting: its filter was paged out under it (cold_interval, a close) and is loading;
	 * the batch is kept, and grows by what the connection's current piece of body holds,
	 * until it is loaded. add_failed: the filter refused the keys (nothing more is added). */
	bool waiting, add_failed;
	z_stream z;
	struct proto_buf line;	/* the line being read (bounded: see stream_line) */
	struct proto_buf batch; /* the keys of the batch, back to back */
	size_t nkeys, ends_cap;
	size_t *ends; /* where each key of the batch ends in it */
	uint64_t added, present, wait_lsn;
	enum cmd_status st; /* the first failure; CMD_OK while going on */
	const char *why;    /* a failure of the body itself (bad ndjson, bad gzip) */
	/* gzip: bytes decoded, compressed bytes received, and those of them the last feed
	 * did not take (given again first). */
	uint64_t decoded, received;
	size_t left;
	uint64_t lineno;
};

static bool media_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return strncasecmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

bool http_api_stream_wanted(const struct http_api_request *req)
{
	struct span path = {req->path, req->path_len}, name, key;

	return strcmp(req->method, "POST") == 0 &&
	       http_api_route_match(path, &name, &key) == HTTP_ROUTE_ADD &&
	       (media_is(req->content_type, "text/plain") ||
		media_is(req->content_type, "application/x-ndjson"));
}

void http_api_stream_free(struct http_api_stream *st)
{
	if (!st)
		return;
	if (st->zinit)
		inflateEnd(&st->z);
	proto_buf_free(&st->line);
	proto_buf_free(&st->batch);
	free(st->ends);
	free(st);
}

int http_api_stream_begin(struct http_api *api, const struct http_api_request *req,
			  struct http_api_response *resp, struct http_api_stream **out)
{
	struct span path = {req->path, req->path_len}, name, key;
	enum http_route route = http_api_route_match(path, &name, &key);
	struct http_api_stream *st;
	char buf[BF_NAME_MAX * 3 + 1];
	long nl;

	*out = NULL;
	http_api_resp_reset(resp);
	api->cmd->paging = NULL;
	if (http_api_refused(api, req, route, resp)) {
		http_api_finish(api, resp, route);
		return 1;
	}
	nl = name.n <= sizeof(buf) ? http_api_pct_decode(name.p, name.n, buf) : -1;
	if (nl < 0 || !bf_name_valid(buf, (size_t)nl)) {
		http_problem_status(api, resp, CMD_NOT_FOUND, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	if (req->content_encoding && strcasecmp(req->content_encoding, "gzip") != 0 &&
	    strcasecmp(req->content_encoding, "identity") != 0) {
		http_problem(resp, P_MEDIA_TYPE, "Content-Encoding must be gzip or identity");
		http_api_finish(api, resp, route);
		return 1;
	}
	if (cmd_ready(api->cmd, buf, (size_t)nl) != CMD_OK) {
		http_problem_status(api, resp, CMD_PAGED_OUT, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	if (api->cmd->paging)
		return 1; /* loading: called again */
	if (!cmd_lookup(api->cmd, buf, (size_t)nl)) {
		http_problem_status(api, resp, CMD_NOT_FOUND, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	st = calloc(1, sizeof(*st));
	if (st) {
		st->ends_cap = STREAM_BATCH_KEYS;
		st->ends = malloc(st->ends_cap * sizeof(*st->ends));
		if (!st->ends) {
			free(st);
			st = NULL;
		}
	}
	if (!st) {
		http_api_resp_oom(resp);
		http_api_finish(api, resp, route);
		return 1;
	}
	memcpy(st->name, buf, (size_t)nl);
	st->name_len = (size_t)nl;
	st->ndjson = media_is(req->content_type, "application/x-ndjson");
	st->gzip = req->content_encoding && strcasecmp(req->content_encoding, "gzip") == 0;
	proto_buf_init(&st->line);
	proto_buf_init(&st->batch);
	if (st->gzip) {
		/* 16 + MAX_WBITS: a gzip stream (header and trailer checked by zlib). */
		if (inflateInit2(&st->z, 16 + MAX_WBITS) != Z_OK) {
			free(st->ends);
			free(st);
			http_api_resp_oom(resp);
			http_api_finish(api, resp, route);
			return 1;
		}
		st->zinit = true;
	}
	*out = st;
	return 0;
}

/* The filter refused the batch (status): nothing more is added. */
static void stream_refused(struct http_api_stream *st, enum cmd_status status)
{
	st->add_failed = true;
	if (st->st == CMD_OK && !st->why)
		st->st = status;
}

/*
 * Add the batch's keys. Its filter paged out under the stream (cold_interval, or a close from
 * another client) is paged in first, as any command's is: the batch is kept (st->waiting,
 * cmd->paging set) and added by the call after the load.
 */
static void stream_flush(struct http_api *api, struct http_api_stream *st)
{
	struct cmd_ctx *c = api->cmd;
	struct cmd_session *s = &api->sess;
	struct bf_filter *f;
	enum cmd_status rc;
	size_t done = 0, start = 0;

	st->waiting = false;
	if (!st->nkeys || st->add_failed)
		goto out;
	f = cmd_lookup(c, st->name, st->name_len);
	if (!f) {
		stream_refused(st, CMD_NOT_FOUND);
		goto out;
	}
	if (f->paged) {
		rc = cmd_ready(c, st->name, st->name_len);
		if (rc != CMD_OK) {
			stream_refused(st, rc); /* its load failed (logged by the load) */
			goto out;
		}
		if (c->paging) {
			st->waiting = true;
			return;
		}
	}
	if (cmd_session_reserve(s, st->nkeys)) {
		stream_refused(st, CMD_NO_MEMORY);
		goto out;
	}
	for (size_t i = 0; i < st->nkeys; i++) {
		s->keys[i] = st->batch.data + start;
		s->lens[i] = st->ends[i] - start;
		start = st->ends[i];
	}
	c->wait_lsn = 0;
	rc = cmd_add(c, f, st->nkeys, s->keys, s->lens, s->results, &done);
	if (rc != CMD_OK)
		stream_refused(st, rc);
	if (c->wait_lsn > st->wait_lsn)
		st->wait_lsn = c->wait_lsn;
	for (size_t i = 0; i < done; i++) {
		if (s->results[i] == 1)
			st->added++;
		else
			st->present++;
	}
out:
	st->nkeys = 0;
	proto_buf_reset(&st->batch);
}

/* The body cannot go on (a status, or why): the keys before it are added first. */
static void stream_fail(struct http_api *api, struct http_api_stream *st, enum cmd_status status,
			const char *why)
{
	stream_flush(api, st);
	if (st->st == CMD_OK && !st->why) {
		st->st = status;
		st->why = why;
	}
}

/* One whole line (without its end) of the body. */
static void stream_line(struct http_api *api, struct http_api_stream *st, const char *p, size_t n)
{
	if (st->st != CMD_OK || st->why)
		return;
	st->lineno++;
	if (n && p[n - 1] == '\r')
		n--;
	if (!st->ndjson) {
		if (!n)
			return;
		if (n > api->cmd->max_key_bytes) {
			stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
			return;
		}
		proto_buf_append(&st->batch, p, n);
	} else {
		const char *end = NULL;
		cJSON *j;

		/* One JSON value, with JSON whitespace around it; a line of only whitespace is
		 * skipped as an empty one is. */
		while (n && (*p == ' ' || *p == '\t' || *p == '\r')) {
			p++;
			n--;
		}
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		if (!n)
			return;
		http_api_json_alloc_failed = false;
		/* A string begins with its quote (cJSON would skip control bytes before it) and
		 * nothing may follow it: "a" "b", "a", "a"] are not one string. */
		j = *p == '"' ? cJSON_ParseWithLengthOpts(p, n, &end, 0) : NULL;
		if (j && end != p + n) {
			cJSON_Delete(j);
			j = NULL;
		}
		if (!cJSON_IsString(j)) {
			cJSON_Delete(j);
			stream_fail(api, st, http_api_json_alloc_failed ? CMD_NO_MEMORY : CMD_OK,
				    http_api_json_alloc_failed
					? NULL
					: "a line of the body is not a JSON string");
			return;
		}
		/* A JSON string cannot carry NUL here (cJSON ends it there): refused as for
		 * {"keys":[...]}. */
		if (memmem(p, n, "\\u0000", 6)) {
			cJSON_Delete(j);
			stream_fail(api, st, CMD_OK, "JSON strings must not contain NUL (\\u0000)");
			return;
		}
		size_t kl = strlen(j->valuestring);
		if (kl > api->cmd->max_key_bytes) {
			cJSON_Delete(j);
			stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
			return;
		}
		proto_buf_append(&st->batch, j->valuestring, kl);
		cJSON_Delete(j);
	}
	if (!st->batch.failed && st->nkeys == st->ends_cap) {
		size_t *e = realloc(st->ends, 2 * st->ends_cap * sizeof(*e));

		if (e) {
			st->ends = e;
			st->ends_cap *= 2;
		}
	}
	if (st->batch.failed || st->nkeys == st->ends_cap) {
		stream_refused(st, CMD_NO_MEMORY); /* the batch is lost: none of it is added */
		return;
	}
	st->ends[st->nkeys++] = st->batch.len;
	if (!st->waiting && (st->nkeys >= STREAM_BATCH_KEYS || st->batch.len >= STREAM_BATCH_BYTES))
		stream_flush(api, st);
}

/* Decoded body bytes: whole lines go to stream_line; a partial one waits in st->line, bounded
 * by the longest line a key may take (a longer one is refused: key too long). */
static void stream_bytes(struct http_api *api, struct http_api_stream *st, const char *p, size_t n)
{
	/* A JSON string escapes a byte in at most 6 (\u00XX), plus its quotes and a \r. */
	size_t max = api->cmd->max_key_bytes * (st->ndjson ? 6 : 1) + 3;

	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (st->skipping) {
			if (nl)
				st->skipping = false;
		} else if (st->line.len + k > max) {
			st->line.len = 0;
			stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
			st->skipping = !nl;
		} else if (nl && !st->line.len) {
			stream_line(api, st, p, k);
		} else {
			proto_buf_append(&st->line, p, k);
			if (st->line.failed && st->st == CMD_OK)
				st->st = CMD_NO_MEMORY;
			if (nl) {
				stream_line(api, st, st->line.data, st->line.len);
				proto_buf_reset(&st->line);
			}
		}
		if (!nl)
			break;
		p += k + 1;
		n -= k + 1;
	}
}

static const char gzip_too_many_bytes[] = "max_gzip_bytes";
static const char gzip_too_high_ratio[] = "max_gzip_ratio";

/* Whether n more decoded bytes pass a bound: refused then (413 at the end, the keys before it
 * added). */
static bool stream_gzip_past(struct http_api *api, struct http_api_stream *st, size_t n)
{
	uint64_t x = st->decoded + n, ratio = api->gzip_max_ratio;

	if (api->gzip_max_bytes && x > api->gzip_max_bytes) {
		stream_fail(api, st, CMD_OK, gzip_too_many_bytes);
		return true;
	}
	/* x > ratio * received, without overflow. */
	if (ratio && x && (x - 1) / ratio >= st->received) {
		stream_fail(api, st, CMD_OK, gzip_too_high_ratio);
		return true;
	}
	st->decoded = x;
	return false;
}

/* Inflate what data holds, at most HTTP_API_STREAM_SLICE decoded bytes: the bytes taken. */
static size_t stream_inflate(struct http_api *api, struct http_api_stream *st, const char *data,
			     size_t n)
{
	unsigned char out[64 * 1024];
	size_t sliced = 0;

	st->z.next_in = (unsigned char *)(uintptr_t)data;
	st->z.avail_in = (uInt)n;
	while (sliced < HTTP_API_STREAM_SLICE && !st->why) {
		size_t got;
		int rc;

		st->z.next_out = out;
		st->z.avail_out = sizeof(out);
		rc = inflate(&st->z, Z_NO_FLUSH);
		got = sizeof(out) - st->z.avail_out;
		sliced += got;
		if (stream_gzip_past(api, st, got))
			break;
		stream_bytes(api, st, (const char *)out, got);
		st->zdone = rc == Z_STREAM_END;
		if (rc == Z_STREAM_END) {
			/* Concatenated gzip members (as gzip -c a b makes) go on. */
			if (st->z.avail_in && inflateReset(&st->z) == Z_OK)
				continue;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			stream_fail(api, st, CMD_OK, "the body is not valid gzip");
			break;
		}
		/* All input taken and no output room asked for: the next piece goes on. */
		if (!st->z.avail_in && st->z.avail_out)
			break;
	}
	/* A refused body is read to its end and dropped. */
	return st->why ? n : n - st->z.avail_in;
}

size_t http_api_stream_feed(struct http_api *api, struct http_api_stream *st, const char *data,
			    size_t n)
{
	size_t took;

	api->cmd->paging = NULL;
	if (st->waiting)
		stream_flush(api, st); /* its filter is loaded now (or loading again) */
	if (!st->gzip) {
		stream_bytes(api, st, data, n);
		return n;
	}
	if (st->why)
		return n;
	/* data begins with the st->left bytes the last call did not take. */
	st->received += n - st->left;
	took = stream_inflate(api, st, data, n);
	st->left = n - took;
	return took;
}

int http_api_stream_end(struct http_api *api, struct http_api_stream *st,
			struct http_api_response *resp)
{
	struct cmd_ctx *c = api->cmd;

	c->paging = NULL;
	/* What zlib still holds of the input taken (a few bytes' worth at most). */
	while (st->gzip && !st->why && !st->zdone && !st->waiting) {
		uint64_t before = st->decoded;

		stream_inflate(api, st, "", 0);
		if (st->decoded == before)
			break;
	}
	if (st->line.len && !st->skipping) {
		stream_line(api, st, st->line.data, st->line.len);
		proto_buf_reset(&st->line);
	}
	stream_flush(api, st);
	if (st->waiting)
		return 1; /* its filter is loading: called again once it is loaded */
	http_api_resp_reset(resp);
	if (st->gzip && !st->why && !st->zdone)
		stream_fail(api, st, CMD_OK, "the gzip body ends before its end");
	/* Whatever stopped it, the keys before it stay added: the detail says how many. */
	if (st->why == gzip_too_many_bytes) {
		http_problem(
		    resp, P_TOO_LARGE,
		    "the gzip body decodes to more than max_gzip_bytes (%llu); added before it: "
		    "%llu, present: %llu",
		    (unsigned long long)api->gzip_max_bytes, (unsigned long long)st->added,
		    (unsigned long long)st->present);
	} else if (st->why == gzip_too_high_ratio) {
		http_problem(
		    resp, P_TOO_LARGE,
		    "the gzip body decodes to more than max_gzip_ratio (%llu) times the bytes "
		    "received; added before it: %llu, present: %llu",
		    (unsigned long long)api->gzip_max_ratio, (unsigned long long)st->added,
		    (unsigned long long)st->present);
	} else if (st->why) {
		http_problem(resp, P_BAD_REQUEST,
			     "%s (line %llu); added before it: %llu, present: %llu", st->why,
			     (unsigned long long)st->lineno, (unsigned long long)st->added,
			     (unsigned long long)st->present);
	} else if (st->st != CMD_OK) {
		char d[200];
		enum problem p = http_problem_detail(api, st->st, false, 0, d, sizeof(d));

		http_problem(resp, p, "%s; added before it: %llu, present: %llu", d,
			     (unsigned long long)st->added, (unsigned long long)st->present);
	} else {
		resp->content_type = CT_JSON;
		proto_buf_append_fmt(&resp->body, "{\"added\":%llu,\"present\":%llu}",
				     (unsigned long long)st->added,
				     (unsigned long long)st->present);
	}
	c->wait_lsn = st->wait_lsn;
	http_api_finish(api, resp, HTTP_ROUTE_ADD);
	http_api_stream_free(st);
	return 0;
}
