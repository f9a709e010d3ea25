/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/JSON front end's router (http_api.h has the contract): a path to its route, the
 * refusals no body can change (404, 405, 401), the body's negotiation (JSON, not compressed),
 * the route's handler, and the count of every answer; with the response's life cycle. The
 * handlers have files of their own: http_admin.c (health, readiness, metrics, documents),
 * http_filters.c (the filters), http_keys.c (their keys), http_stream.c (the streamed add);
 * http_problem.c words the errors and http_codec.c holds the small codecs. What they share is
 * declared in http_api_impl.h.
 *
 * The answers that carry a string (filter names, problem details) are built with cJSON, which
 * escapes it; the hot boolean answers are written directly (see http_keys.c).
 */
#include "proto/http_api_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* JSON values a body may hold beyond max_args keys (the object, its array, a few fields). */
#define JSON_VALUES_SLACK 16

/* Sent when not even a problem document can be built. */
static const char oom_body[] = "{\"type\":\"insufficient_memory\",\"title\":\"Insufficient "
			       "memory\",\"status\":507,\"detail\":\"out of memory\"}\n";

/* ---------------------------------------------------------------------------------------- */
/* Routes and statuses */

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
    [HTTP_ROUTE_HISTORY] = {"/v1/metrics/history", "GET, HEAD"},
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
	http_history_counters(cmd, &api->history.last);
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
	if (span_is(path, "/v1/metrics/history"))
		return HTTP_ROUTE_HISTORY;
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
 * A body of the wrong media type. The add route also streams text/plain and
 * application/x-ndjson: its answer names all three and the header to set, as a file sent with
 * curl --data-binary and no -H goes as a form.
 */
static void media_type_problem(const struct http_api_request *req, struct http_api_response *r)
{
	struct span path = {req->path, req->path_len}, name, key;

	if (strcmp(req->method, "POST") == 0 &&
	    http_api_route_match(path, &name, &key) == HTTP_ROUTE_ADD) {
		http_problem(r, P_MEDIA_TYPE,
			     "the body must be application/json, text/plain (a key per line) or "
			     "application/x-ndjson: set the Content-Type header, e.g. curl -H "
			     "'Content-Type: text/plain'");
		return;
	}
	http_problem(r, P_MEDIA_TYPE, "the body must be application/json");
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
		media_type_problem(req, r);
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

/* A replica (doc/replication.md) refuses clients' changes: 409 read_only_replica. */
static bool read_only(const struct http_api *api, const struct http_api_request *req,
		      enum http_route route, struct http_api_response *r)
{
	bool read = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
	bool change = route == HTTP_ROUTE_ADD || route == HTTP_ROUTE_DELETE ||
		      route == HTTP_ROUTE_RENAME ||
		      ((route == HTTP_ROUTE_FILTER || route == HTTP_ROUTE_KEY) && !read);

	if (!api->cmd->replica || !change)
		return false;
	http_problem(r, P_READ_ONLY,
		     "this server is a read-only replica; send changes to its primary");
	return true;
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
		return read_only(api, req, route, r);
	/* Authorization is a singleton field (RFC 9110 11.6.2): which of two counts is not for
	 * us to guess. */
	if (req->authorization_repeated) {
		http_problem(r, P_BAD_REQUEST, "more than one Authorization header");
		return true;
	}
	if (auth_ok(req->authorization, api->token))
		return read_only(api, req, route, r);
	http_problem(r, P_UNAUTHORIZED, "send \"Authorization: Bearer <token>\"");
	r->www_authenticate = "Bearer";
	return true;
}

/*
 * Percent-decode the raw {name} and {key} segments into api->path, and point them there.
 * False with the answer in r: out of memory, or a malformed escape (400).
 */
static bool decode_path(struct http_api *api, struct http_api_response *r, struct span *name,
			struct span *key)
{
	long nl, kl;
	char *buf;

	/* One byte more than they need, so the buffer exists even for an empty name and key
	 * (NULL + 0 is UB). */
	if (proto_buf_reserve(&api->path, name->n + key->n + 1)) {
		proto_buf_free(&api->path);
		http_api_resp_oom(r);
		return false;
	}
	buf = api->path.data;
	nl = http_api_pct_decode(name->p, name->n, buf);
	kl = nl < 0 ? -1 : http_api_pct_decode(key->p, key->n, buf + nl);
	if (nl < 0 || kl < 0) {
		http_problem(r, P_BAD_REQUEST, "malformed percent-encoding in the path");
		return false;
	}
	*name = (struct span){buf, (size_t)nl};
	*key = (struct span){buf + nl, (size_t)kl};
	return true;
}

/*
 * The filter a route names. NULL when there is none to run on: the answer is in r (no such
 * filter, or its load failed), or it is loading (cmd->paging set; the server calls again).
 */
static struct bf_filter *named_filter(struct http_api *api, struct http_api_response *r,
				      enum http_route route, struct span name)
{
	struct bf_filter *f;

	/* A closed (paged-out) filter is loaded first; a snapshot of one has nothing to do. */
	if (route != HTTP_ROUTE_SNAPSHOT) {
		enum cmd_status ready = cmd_ready(api->cmd, name.p, name.n);

		if (ready != CMD_OK) {
			http_problem_status(api, r, ready, NULL, 0);
			return NULL;
		}
		if (api->cmd->paging)
			return NULL;
	}
	f = cmd_lookup(api->cmd, name.p, name.n);
	if (!f)
		http_problem_status(api, r, CMD_NOT_FOUND, NULL, 0);
	return f;
}

/* Run the handler of a route that works on an existing filter f (key: decoded, if any). */
static void dispatch_filter(struct http_api *api, const struct http_api_request *req,
			    struct http_api_response *r, enum http_route route, struct bf_filter *f,
			    struct span key)
{
	const char *m = req->method;
	bool get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;

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

/* Route, check and run the request; counting is left to the caller. */
static void dispatch(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *r, enum http_route route, struct span name,
		     struct span key)
{
	const char *m = req->method;
	struct bf_filter *f;

	if (http_api_refused(api, req, route, r))
		return;
	if (http_admin_answer(api, r, route))
		return;
	if (route == HTTP_ROUTE_FILTERS) {
		http_filters_list(api, req, r);
		return;
	}
	/* The routes below name a filter (and maybe a key). */
	if (!decode_path(api, r, &name, &key))
		return;
	if (route == HTTP_ROUTE_FILTER && strcmp(m, "PUT") == 0) {
		http_filters_create(api, req, r, name);
		return;
	}
	if (route == HTTP_ROUTE_FILTER && strcmp(m, "DELETE") == 0) {
		http_filters_drop(api, r, name);
		return;
	}
	f = named_filter(api, r, route, name);
	if (f)
		dispatch_filter(api, req, r, route, f, key);
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
