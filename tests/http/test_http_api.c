/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/JSON front end (proto/http_api.c) without sockets: method, path and body in; the
 * exact status, headers and body bytes out, for every route and every error.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tests/check_main.h"
#include "proto/http_api.h"
#include "tests/cmd_fixture.h"

#define CT_JSON	   "application/json"
#define CT_PROBLEM "application/problem+json"

#define PROBLEM(type, title, status, detail)                                                       \
	"{\"type\":\"" type "\",\"title\":\"" title "\",\"status\":" #status                       \
	",\"detail\":\"" detail "\"}"

#define NOT_FOUND PROBLEM("not_found", "Not found", 404, "no such route")
#define FILTER_NOT_FOUND                                                                           \
	PROBLEM("filter_not_found", "Filter not found", 404, "no filter of that name")
#define BAD(detail) PROBLEM("bad_request", "Bad request", 400, detail)

static struct bf_registry *reg;
static struct cmd_ctx ctx;
static struct http_api api;
static struct http_api_response resp;
static char got[1 << 16];
static const char *not_ready_reason;
static const char *authorization;
static int flushes, flush_rc;
static struct bf_filter *flushed;

static int flush_hook(void *arg, struct bf_filter *f, uint64_t *ticket)
{
	(void)arg;
	(void)ticket;
	flushes++;
	flushed = f;
	return flush_rc;
}

static const char *not_ready(void *arg)
{
	(void)arg;
	return not_ready_reason;
}

static void metrics(void *arg, struct proto_buf *out)
{
	(void)arg;
	proto_buf_append_str(out, "blossomd_up 1\n");
}

static void setup(void)
{
	struct http_api_hooks hooks = {.not_ready = not_ready, .metrics = metrics};

	cmd_fixture_init(&ctx, 0, 16, 8);
	ctx.hooks.flush = flush_hook;
	reg = ctx.reg;
	http_api_init(&api, &ctx, &hooks);
	http_api_response_init(&resp);
	not_ready_reason = NULL;
	authorization = NULL;
	flushes = 0;
	flush_rc = 0;
	flushed = NULL;
}

static void teardown(void)
{
	http_api_response_free(&resp);
	http_api_free(&api);
	cmd_fixture_free(&ctx);
}

/* One request with an n-byte body; the answer's body, NUL-terminated, in got. */
/* The query arguments of the next requests (as libmicrohttpd decodes them), NULL: none. */
static const char *q_prefix, *q_after, *q_limit, *q_detail;

static const char *call_n(const char *method, const char *path, const char *ctype, const char *body,
			  size_t n)
{
	struct http_api_request req = {
	    .method = method,
	    .path = path,
	    .path_len = strlen(path),
	    .content_type = ctype,
	    .authorization = authorization,
	    .body = body,
	    .body_len = n,
	    .q_prefix = q_prefix,
	    .q_after = q_after,
	    .q_limit = q_limit,
	    .q_detail = q_detail,
	};

	http_api_handle(&api, &req, &resp);
	ck_assert_uint_lt(resp.len, sizeof(got));
	ck_assert(resp.len == 0 || resp.data != NULL);
	memcpy(got, resp.data, resp.len);
	got[resp.len] = '\0';
	/* Every JSON body ends with a newline (curl's output then ends its line); the tests
	 * below compare what comes before it. */
	if (resp.len && resp.content_type &&
	    (!strcmp(resp.content_type, CT_JSON) || !strcmp(resp.content_type, CT_PROBLEM))) {
		ck_assert_msg(got[resp.len - 1] == '\n', "no final newline: %s", got);
		got[resp.len - 1] = '\0';
	}
	return got;
}

static const char *call(const char *method, const char *path, const char *ctype, const char *body)
{
	return call_n(method, path, ctype, body, body ? strlen(body) : 0);
}

#define EXPECT(st, ct, text)                                                                       \
	do {                                                                                       \
		ck_assert_uint_eq(resp.status, (st));                                              \
		if ((ct) == NULL)                                                                  \
			ck_assert_ptr_null(resp.content_type);                                     \
		else                                                                               \
			ck_assert_str_eq(resp.content_type, (const char *)(ct));                   \
		ck_assert_str_eq(got, (text));                                                     \
	} while (0)

/* Exchanges: request, then the exact status, content type and body. */
#define GET(path, st, text)                                                                        \
	do {                                                                                       \
		call("GET", (path), NULL, NULL);                                                   \
		EXPECT((st), (st) < 400 ? CT_JSON : CT_PROBLEM, (text));                           \
	} while (0)
#define POST(path, body, st, text)                                                                 \
	do {                                                                                       \
		call("POST", (path), CT_JSON, (body));                                             \
		EXPECT((st), (st) < 400 ? CT_JSON : CT_PROBLEM, (text));                           \
	} while (0)
#define PUT(path, body, st, text)                                                                  \
	do {                                                                                       \
		call("PUT", (path), (body) ? CT_JSON : NULL, (body));                              \
		EXPECT((st), (st) < 400 ? CT_JSON : CT_PROBLEM, (text));                           \
	} while (0)

/* The DETAIL object of a fresh filter with these parameters. */
static const char *fresh_detail(const char *name, const char *type, unsigned long capacity,
				const char *rate, unsigned expansion, const char *persist)
{
	static char buf[1024];
	struct bf_filter *f = bf_registry_get(reg, name, strlen(name));

	ck_assert_ptr_nonnull(f);
	snprintf(buf, sizeof(buf),
		 "{\"name\":\"%s\",\"type\":\"%s\",\"capacity\":%lu,\"error_rate\":%s,\"items\":0,"
		 "\"bytes\":%llu,\"layers\":1,\"initial_capacity\":%lu,\"expansion\":%u,"
		 "\"persist\":%s,\"ttl_seconds\":null,\"fpr_estimate\":0,\"stats\":{"
		 "\"checks\":0,\"check_hits\":0,"
		 "\"check_misses\":0,\"sets\":0,\"set_hits\":0,\"set_misses\":0,\"deletes\":0,"
		 "\"delete_hits\":0,\"delete_misses\":0}}",
		 name, type, capacity, rate, (unsigned long long)bf_filter_bytes(f), capacity,
		 expansion, persist);
	return buf;
}

/* ---------------------------------------------------------------------------------------- */

START_TEST(health_and_ready)
{
	GET("/healthz", 200, "{\"status\":\"ok\"}");
	GET("/readyz", 200, "{\"status\":\"ready\"}");
	not_ready_reason = "loading snapshots";
	GET("/readyz", 503, PROBLEM("not_ready", "Not ready", 503, "loading snapshots"));
	/* Liveness does not depend on readiness. */
	GET("/healthz", 200, "{\"status\":\"ok\"}");
	/* HEAD is answered like GET (the server drops the body). */
	call("HEAD", "/healthz", NULL, NULL);
	EXPECT(200, CT_JSON, "{\"status\":\"ok\"}");
}
END_TEST

START_TEST(metrics_route)
{
	call("GET", "/metrics", NULL, NULL);
	EXPECT(200, "text/plain; version=0.0.4; charset=utf-8", "blossomd_up 1\n");

	/* Without a metrics hook there is no such route. */
	http_api_free(&api);
	http_api_init(&api, &ctx, NULL);
	GET("/metrics", 404, NOT_FOUND);
	GET("/readyz", 200, "{\"status\":\"ready\"}");
}
END_TEST

/*
 * GET /v1/metrics/history: what the status page charts, a sample a second, oldest first: each
 * sample what the counters grew by since the one before (the first: since the start); the
 * newest sample's time; at most 300 samples (the 301st drops the oldest). Not a command.
 */
START_TEST(history_route)
{
	GET("/v1/metrics/history", 200,
	    "{\"interval_seconds\":1,\"end_ms\":0,\"commands\":{\"text\":[],\"resp\":[],"
	    "\"http\":[]},\"keys\":{\"added\":[],\"checked\":[]}}");
	ctx.peer_commands[CMD_PEER_TEXT] = 3;
	ctx.peer_commands[CMD_PEER_RESP] = 5;
	ctx.keys[CMD_OP_ADD] = 100;
	http_api_history_sample(&api, 1765000000123);
	ctx.peer_commands[CMD_PEER_RESP] = 12;
	ctx.peer_commands[CMD_PEER_HTTP] = 1;
	ctx.keys[CMD_OP_ADD] = 150;
	ctx.keys[CMD_OP_CHECK] = 9;
	ctx.keys[CMD_OP_DELETE] = 4; /* not charted */
	http_api_history_sample(&api, 1765000001125);
	GET("/v1/metrics/history", 200,
	    "{\"interval_seconds\":1,\"end_ms\":1765000001125,\"commands\":{\"text\":[3,0],"
	    "\"resp\":[5,7],\"http\":[0,1]},\"keys\":{\"added\":[100,50],\"checked\":[0,9]}}");
	/* The route itself is no command (the page polls it). */
	ck_assert_uint_eq(ctx.peer_commands[CMD_PEER_HTTP], 1);

	/* 301 samples: the first one (3 text commands) is gone, 300 are left. */
	for (unsigned i = 0; i < 299; i++) {
		ctx.peer_commands[CMD_PEER_TEXT] += i;
		http_api_history_sample(&api, 1765000002000 + i * 1000);
	}
	call("GET", "/v1/metrics/history", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_str_eq(resp.content_type, CT_JSON);
	char want[8192];
	size_t n = (size_t)snprintf(want, sizeof(want),
				    "{\"interval_seconds\":1,\"end_ms\":1765000300000,"
				    "\"commands\":{\"text\":[0");
	for (unsigned i = 0; i < 299; i++)
		n += (size_t)snprintf(want + n, sizeof(want) - n, ",%u", i);
	ck_assert_uint_lt(n, sizeof(want) - 64);
	ck_assert_msg(!strncmp(got, want, n), "%.200s", got);
	ck_assert_ptr_nonnull(strstr(got, "],\"resp\":[7,0,"));
	ck_assert_ptr_nonnull(strstr(got, ",0]},\"keys\":{\"added\":[50,0,"));
	ck_assert_uint_eq(api.history.n, 300);
	call("HEAD", "/v1/metrics/history", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	call("POST", "/v1/metrics/history", CT_JSON, "{}");
	ck_assert_uint_eq(resp.status, 405);
}
END_TEST

START_TEST(unknown_routes)
{
	static const char *const paths[] = {
	    "/index.html", /* "/" is the status page */
	    "",
	    "/v1",
	    "/v1/",
	    "/v1/filtersx",
	    "/v1/filters/f/",
	    "/v1/filters/f/x",
	    "/v1/filters/f/add/",
	    "/v1/filters/f/keys",
	    "/v1/filters/f/keys/a/b",
	    "/healthz/",
	    "/HEALTHZ",
	};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		call("GET", paths[i], NULL, NULL);
		ck_assert_msg(resp.status == 404 && strcmp(got, NOT_FOUND) == 0, "%s: %u %s",
			      paths[i], resp.status, got);
		ck_assert_str_eq(resp.content_type, CT_PROBLEM);
		ck_assert_ptr_null(resp.allow);
	}
}
END_TEST

/* Found by fuzzing: an empty name and key as the first request of a fresh api decoded into a
 * scratch buffer that did not exist yet (NULL + 0, undefined behaviour under UBSan). */
START_TEST(empty_name_first_request)
{
	call("GET", "/v1/filters/", NULL, NULL);
	ck_assert_uint_eq(resp.status, 404);
	ck_assert_str_eq(resp.content_type, CT_PROBLEM);
	ck_assert_ptr_nonnull(strstr(got, "\"status\":404"));
}
END_TEST

START_TEST(methods_not_allowed)
{
	static const struct {
		const char *method, *path, *allow, *route;
	} t[] = {
	    {"POST", "/healthz", "GET, HEAD", "/healthz"},
	    {"PUT", "/readyz", "GET, HEAD", "/readyz"},
	    {"DELETE", "/metrics", "GET, HEAD", "/metrics"},
	    {"POST", "/v1/filters", "GET, HEAD", "/v1/filters"},
	    {"POST", "/v1/filters/f", "GET, HEAD, PUT, PATCH, DELETE", "/v1/filters/{name}"},
	    {"OPTIONS", "/v1/filters/f", "GET, HEAD, PUT, PATCH, DELETE", "/v1/filters/{name}"},
	    {"GET", "/v1/filters/f/add", "POST", "/v1/filters/{name}/add"},
	    {"PUT", "/v1/filters/f/check", "POST", "/v1/filters/{name}/check"},
	    {"GET", "/v1/filters/f/delete", "POST", "/v1/filters/{name}/delete"},
	    {"DELETE", "/v1/filters/f/keys/k", "GET, HEAD, PUT", "/v1/filters/{name}/keys/{key}"},
	    {"POST", "/v1/filters/f/keys/k", "GET, HEAD, PUT", "/v1/filters/{name}/keys/{key}"},
	    {"GET", "/v1/filters/f/snapshot", "POST", "/v1/filters/{name}/snapshot"},
	    /* Methods are case-sensitive (RFC 9110): "get" is not GET. */
	    {"get", "/healthz", "GET, HEAD", "/healthz"},
	    /* A method that is a substring of an allowed one. */
	    {"HEA", "/healthz", "GET, HEAD", "/healthz"},
	    {"OST", "/v1/filters/f/add", "POST", "/v1/filters/{name}/add"},
	};
	char expect[512];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		call(t[i].method, t[i].path, NULL, NULL);
		snprintf(expect, sizeof(expect),
			 PROBLEM("method_not_allowed", "Method not allowed", 405, "%s takes %s"),
			 t[i].route, t[i].allow);
		ck_assert_msg(resp.status == 405, "%s %s: %u", t[i].method, t[i].path, resp.status);
		ck_assert_str_eq(got, expect);
		ck_assert_str_eq(resp.allow, t[i].allow);
	}
}
END_TEST

START_TEST(create_defaults_and_params)
{
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	ck_assert_str_eq(resp.location, "/v1/filters/f");

	PUT("/v1/filters/g",
	    "{\"capacity\":5000,\"error_rate\":0.001,\"type\":\"counting\",\"expansion\":4,"
	    "\"persist\":false}",
	    201, fresh_detail("g", "counting", 5000, "0.001", 4, "false"));

	/* nonscaling, or expansion 0, makes a fixed-size filter. */
	PUT("/v1/filters/n1", "{\"nonscaling\":true}", 201,
	    fresh_detail("n1", "bloom", 1000, "0.01", 0, "true"));
	PUT("/v1/filters/n2", "{\"expansion\":0,\"nonscaling\":true}", 201,
	    fresh_detail("n2", "bloom", 1000, "0.01", 0, "true"));
	PUT("/v1/filters/n3", " { \"expansion\" : 0 , \"nonscaling\" : false } \r\n", 201,
	    fresh_detail("n3", "bloom", 1000, "0.01", 0, "true"));
	/* An empty object is all defaults; integral numbers may be written as 1e3 or 1000.0. */
	PUT("/v1/filters/e", "{}", 201, fresh_detail("e", "bloom", 1000, "0.01", 2, "true"));
	PUT("/v1/filters/x", "{\"capacity\":2e3,\"expansion\":1.0}", 201,
	    fresh_detail("x", "bloom", 2000, "0.01", 1, "true"));

	/* The same name again. */
	PUT("/v1/filters/f", NULL, 409,
	    PROBLEM("filter_exists", "Filter exists", 409, "a filter of that name exists"));
	PUT("/v1/filters/f", "{\"capacity\":7}", 409,
	    PROBLEM("filter_exists", "Filter exists", 409, "a filter of that name exists"));
	ck_assert_str_eq(resp.location, "");
	ck_assert_uint_eq(bf_registry_count(reg), 7);
}
END_TEST

START_TEST(create_location_encodes_the_name)
{
	call("PUT", "/v1/filters/a%2Fb%C3%A9~_.-%25", NULL, NULL);
	ck_assert_uint_eq(resp.status, 201);
	ck_assert_str_eq(resp.location, "/v1/filters/a%2Fb%C3%A9~_.-%25");
	ck_assert_ptr_nonnull(bf_registry_get(reg, "a/b\xc3\xa9~_.-%", 10));
	ck_assert_ptr_nonnull(strstr(got, "\"name\":\"a/b\xc3\xa9~_.-%\""));
}
END_TEST

START_TEST(create_bad_names)
{
	static const char *const paths[] = {
	    "/v1/filters/",	 /* empty */
	    "/v1/filters/a%20b", /* space */
	    "/v1/filters/a%00b", /* NUL */
	    "/v1/filters/a%0Ab", /* control byte */
	};
	char name[256];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		PUT(paths[i], NULL, 400,
		    PROBLEM("invalid_filter_name", "Invalid filter name", 400,
			    "a filter name is 1 to 200 bytes of printable characters, no spaces"));
	}
	/* 200 bytes is the longest name. */
	memcpy(name, "/v1/filters/", 12);
	memset(name + 12, 'n', 201);
	name[12 + 201] = '\0';
	call("PUT", name, NULL, NULL);
	ck_assert_uint_eq(resp.status, 400);
	name[12 + 200] = '\0';
	call("PUT", name, NULL, NULL);
	ck_assert_uint_eq(resp.status, 201);
	ck_assert_uint_eq(bf_registry_count(reg), 1);
	/* A lookup of a name that cannot exist is simply not found. */
	GET("/v1/filters/a%20b", 404, FILTER_NOT_FOUND);
}
END_TEST

START_TEST(create_bad_bodies)
{
	static const struct {
		const char *body, *detail;
	} t[] = {
	    {"{\"capacity\":0}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"capacity\":-5}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"capacity\":1.5}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"capacity\":\"100\"}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"capacity\":1e300}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"capacity\":null}", "\\\"capacity\\\" must be an integer >= 1"},
	    {"{\"error_rate\":0}",
	     "\\\"error_rate\\\" must be a number between 0 and 1 (exclusive)"},
	    {"{\"error_rate\":1}",
	     "\\\"error_rate\\\" must be a number between 0 and 1 (exclusive)"},
	    {"{\"error_rate\":\"0.1\"}",
	     "\\\"error_rate\\\" must be a number between 0 and 1 (exclusive)"},
	    {"{\"error_rate\":1e999}",
	     "\\\"error_rate\\\" must be a number between 0 and 1 (exclusive)"},
	    {"{\"error_rate\":1e-13}", "\\\"error_rate\\\" below 1e-12 is not supported"},
	    {"{\"error_rate\":1e-52,\"capacity\":1}",
	     "\\\"error_rate\\\" below 1e-12 is not supported"},
	    {"{\"type\":\"cuckoo\"}", "\\\"type\\\" must be \\\"bloom\\\" or \\\"counting\\\""},
	    {"{\"type\":1}", "\\\"type\\\" must be \\\"bloom\\\" or \\\"counting\\\""},
	    {"{\"expansion\":32769}", "\\\"expansion\\\" must be an integer from 0 to 32768"},
	    {"{\"expansion\":-1}", "\\\"expansion\\\" must be an integer from 0 to 32768"},
	    {"{\"expansion\":true}", "\\\"expansion\\\" must be an integer from 0 to 32768"},
	    {"{\"nonscaling\":1}", "\\\"nonscaling\\\" must be true or false"},
	    {"{\"persist\":\"yes\"}", "\\\"persist\\\" must be true or false"},
	    {"{\"nonscaling\":true,\"expansion\":2}",
	     "\\\"nonscaling\\\": true and a non-zero \\\"expansion\\\" contradict"},
	    {"{\"capacity\":10,\"prob\":0.1}", "unknown field \\\"prob\\\""},
	    {"{\"Capacity\":10}", "unknown field \\\"Capacity\\\""},
	    {"{\"capacity\":10,\"capacity\":20}", "field \\\"capacity\\\" appears twice"},
	    {"{\"caf\xc3\xa9\\n\":1}", "unknown field \\\"caf???\\\""},
	    {"[]", "the body must be a JSON object"},
	    {"\"capacity\"", "the body must be a JSON object"},
	    {"null", "the body must be a JSON object"},
	    {"{", "malformed JSON"},
	    {"{\"capacity\":10,}", "malformed JSON"},
	    {"{'capacity':10}", "malformed JSON"},
	    {"  ", "malformed JSON"},
	    {"{} {}", "malformed JSON: text after the value"},
	    {"{}x", "malformed JSON: text after the value"},
	};
	char expect[512];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		call("PUT", "/v1/filters/f", CT_JSON, t[i].body);
		snprintf(expect, sizeof(expect), BAD("%s"), t[i].detail);
		ck_assert_msg(resp.status == 400 && strcmp(got, expect) == 0, "%s -> %u %s",
			      t[i].body, resp.status, got);
	}
	ck_assert_uint_eq(bf_registry_count(reg), 0);
}
END_TEST

START_TEST(media_types)
{
	static const char *const bad[] = {
	    "text/plain",   "application/x-www-form-urlencoded", "application/jsonx", "json", "",
	    "application/", "multipart/form-data; boundary=x"};
	static const char *const good[] = {"application/json",
					   "Application/JSON",
					   "application/json; charset=utf-8",
					   " application/json",
					   "application/merge-patch+json",
					   "application/json\t;x=y"};
	char path[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		call("PUT", "/v1/filters/f", bad[i], "{}");
		EXPECT(415, CT_PROBLEM,
		       PROBLEM("unsupported_media_type", "Unsupported media type", 415,
			       "the body must be application/json"));
	}
	/* A body with no Content-Type at all. */
	call("PUT", "/v1/filters/f", NULL, "{}");
	ck_assert_uint_eq(resp.status, 415);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(path, sizeof(path), "/v1/filters/f%zu", i);
		call("PUT", path, good[i], "{}");
		ck_assert_msg(resp.status == 201, "%s: %u", good[i], resp.status);
	}
	/* An empty body needs no Content-Type. */
	call("PUT", "/v1/filters/z", "text/plain", "");
	ck_assert_uint_eq(resp.status, 201);
	/* The key routes look at no body. */
	call("PUT", "/v1/filters/z/keys/k", "text/plain", "ignored");
	EXPECT(200, CT_JSON, "{\"added\":true}");
}
END_TEST

START_TEST(get_list_delete)
{
	char expect[1024];
	struct bf_filter *f;

	GET("/v1/filters", 200, "{\"filters\":[]}");
	PUT("/v1/filters/b", "{\"type\":\"counting\",\"capacity\":100}", 201,
	    fresh_detail("b", "counting", 100, "0.01", 2, "true"));
	PUT("/v1/filters/a", NULL, 201, fresh_detail("a", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/a", 200, fresh_detail("a", "bloom", 1000, "0.01", 2, "true"));
	call("HEAD", "/v1/filters/a", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);

	snprintf(expect, sizeof(expect),
		 "{\"filters\":[{\"name\":\"a\",\"type\":\"bloom\",\"capacity\":1000,"
		 "\"error_rate\":0.01,\"items\":0,\"bytes\":%llu,\"layers\":1},{\"name\":\"b\","
		 "\"type\":\"counting\",\"capacity\":100,\"error_rate\":0.01,\"items\":0,"
		 "\"bytes\":%llu,\"layers\":1}]}",
		 (unsigned long long)bf_filter_bytes(bf_registry_get(reg, "a", 1)),
		 (unsigned long long)bf_filter_bytes(bf_registry_get(reg, "b", 1)));
	GET("/v1/filters", 200, expect);

	/* Stats after some traffic. */
	POST("/v1/filters/a/add", "{\"keys\":[\"x\",\"y\",\"x\"]}", 200,
	     "{\"results\":[true,true,false]}");
	POST("/v1/filters/a/check", "{\"keys\":[\"x\",\"nope\"]}", 200,
	     "{\"results\":[true,false]}");
	f = bf_registry_get(reg, "a", 1);
	call("GET", "/v1/filters/a", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	snprintf(expect, sizeof(expect),
		 "\"items\":2,\"bytes\":%llu,\"layers\":1,\"initial_capacity\":1000,"
		 "\"expansion\":2,\"persist\":true,\"ttl_seconds\":null,\"fpr_estimate\":",
		 (unsigned long long)bf_filter_bytes(f));
	ck_assert_msg(strstr(got, expect), "%s", got);
	ck_assert_msg(strstr(got, "\"stats\":{\"checks\":2,\"check_hits\":1,\"check_misses\":1,"
				  "\"sets\":3,\"set_hits\":2,\"set_misses\":1,\"deletes\":0,"
				  "\"delete_hits\":0,\"delete_misses\":0}}"),
		      "%s", got);

	call("DELETE", "/v1/filters/a", NULL, NULL);
	EXPECT(204, NULL, "");
	call("DELETE", "/v1/filters/a", NULL, NULL);
	EXPECT(404, CT_PROBLEM, FILTER_NOT_FOUND);
	GET("/v1/filters/a", 404, FILTER_NOT_FOUND);
	ck_assert_uint_eq(bf_registry_count(reg), 1);
}
END_TEST

START_TEST(non_utf8_names)
{
	/* Names may hold any byte >= 0x80; JSON shows them as U+FFFD plus the exact bytes. */
	static const char head[] =
	    "{\"name\":\"a\xef\xbf\xbd"
	    "b\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\",\"name_b64\":\"Yf9iw6nigg==\","
	    "\"type\":\"bloom\",";

	call("PUT", "/v1/filters/a%FFb%C3%A9%E2%82", NULL, NULL);
	ck_assert_uint_eq(resp.status, 201);
	ck_assert_msg(strncmp(got, head, sizeof(head) - 1) == 0, "%s", got);
	ck_assert_str_eq(resp.location, "/v1/filters/a%FFb%C3%A9%E2%82");
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_ptr_nonnull(strstr(got, "\"name_b64\":\"Yf9iw6nigg==\""));
}
END_TEST

START_TEST(add_check_keys)
{
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/f/add", "{\"keys\":[\"a\",\"b\",\"a\",\"\"]}", 200,
	     "{\"results\":[true,true,false,true]}");
	POST("/v1/filters/f/check", "{\"keys\":[\"a\",\"c\",\"\",\"b\"]}", 200,
	     "{\"results\":[true,false,true,true]}");
	POST("/v1/filters/f/check", "{\"keys\":[]}", 200, "{\"results\":[]}");
	POST("/v1/filters/f/add", "{\"keys\":[]}", 200, "{\"results\":[]}");
	/* base64: "YQ==" is "a"; padding optional. */
	POST("/v1/filters/f/check", "{\"keys_b64\":[\"YQ==\",\"YQ\",\"Yw==\",\"\"]}", 200,
	     "{\"results\":[true,true,false,true]}");
	/* Binary keys: NUL and 0xFF bytes. */
	POST("/v1/filters/f/add", "{\"keys_b64\":[\"AP8A\",\"AP8A\"]}", 200,
	     "{\"results\":[true,false]}");
	GET("/v1/filters/f/keys/%00%FF%00", 200, "{\"present\":true}");
	GET("/v1/filters/f/keys/%00%FF", 200, "{\"present\":false}");
	/* UTF-8 keys are their bytes, whichever way they are sent. */
	POST("/v1/filters/f/add",
	     "{\"keys\":[\"caf\xc3\xa9\",\"\\u00e9t\\u00e9\",\"\xf0\x9f\x8c\xb8\"]}", 200,
	     "{\"results\":[true,true,true]}");
	GET("/v1/filters/f/keys/caf%C3%A9", 200, "{\"present\":true}");
	GET("/v1/filters/f/keys/%c3%a9t%c3%a9", 200, "{\"present\":true}");
	POST("/v1/filters/f/check", "{\"keys_b64\":[\"8J+MuA==\"]}", 200, "{\"results\":[true]}");
	/* Escapes decode before hashing: "\/" and "/" are one key. */
	POST("/v1/filters/f/add", "{\"keys\":[\"a\\/b\",\"a/b\"]}", 200,
	     "{\"results\":[true,false]}");
	GET("/v1/filters/f/keys/a%2Fb", 200, "{\"present\":true}");
}
END_TEST

START_TEST(key_routes)
{
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/f/keys/k", 200, "{\"present\":false}");
	PUT("/v1/filters/f/keys/k", NULL, 200, "{\"added\":true}");
	PUT("/v1/filters/f/keys/k", NULL, 200, "{\"added\":false}");
	GET("/v1/filters/f/keys/k", 200, "{\"present\":true}");
	call("HEAD", "/v1/filters/f/keys/k", NULL, NULL);
	EXPECT(200, CT_JSON, "{\"present\":true}");
	/* "+" is a plus; %2B the same byte; an empty key is a key. */
	PUT("/v1/filters/f/keys/a+b", NULL, 200, "{\"added\":true}");
	GET("/v1/filters/f/keys/a%2bb", 200, "{\"present\":true}");
	GET("/v1/filters/f/keys/a%20b", 200, "{\"present\":false}");
	PUT("/v1/filters/f/keys/", NULL, 200, "{\"added\":true}");
	GET("/v1/filters/f/keys/", 200, "{\"present\":true}");
	/* Malformed escapes. */
	GET("/v1/filters/f/keys/a%zz", 400, BAD("malformed percent-encoding in the path"));
	GET("/v1/filters/f/keys/a%2", 400, BAD("malformed percent-encoding in the path"));
	GET("/v1/filters/f/keys/%", 400, BAD("malformed percent-encoding in the path"));
	GET("/v1/filters/f%/keys/a", 400, BAD("malformed percent-encoding in the path"));
	/* A missing filter. */
	GET("/v1/filters/g/keys/k", 404, FILTER_NOT_FOUND);
	PUT("/v1/filters/g/keys/k", NULL, 404, FILTER_NOT_FOUND);
	ck_assert_uint_eq(bf_registry_count(reg), 1);
}
END_TEST

START_TEST(key_limits)
{
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	/* max_key_bytes is 16 here. */
	PUT("/v1/filters/f/keys/0123456789abcdef", NULL, 200, "{\"added\":true}");
	PUT("/v1/filters/f/keys/0123456789abcdefg", NULL, 400,
	    PROBLEM("key_too_long", "Key too long", 400,
		    "a key is longer than max_key_bytes (16)"));
	GET("/v1/filters/f/keys/0123456789abcdefg", 400,
	    PROBLEM("key_too_long", "Key too long", 400,
		    "a key is longer than max_key_bytes (16)"));
	/* One long key refuses the whole batch, and nothing is added. */
	POST("/v1/filters/f/add", "{\"keys\":[\"new\",\"0123456789abcdefg\"]}", 400,
	     PROBLEM("key_too_long", "Key too long", 400,
		     "a key is longer than max_key_bytes (16)"));
	GET("/v1/filters/f/keys/new", 200, "{\"present\":false}");
	/* max_args is 8: 8 keys pass, 9 are too many. */
	POST("/v1/filters/f/check", "{\"keys\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\"]}",
	     200, "{\"results\":[false,false,false,false,false,false,false,false]}");
	POST("/v1/filters/f/check",
	     "{\"keys\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}", 413,
	     PROBLEM("payload_too_large", "Payload too large", 413, "more than max_args (8) keys"));
}
END_TEST

START_TEST(huge_arrays_refused_before_parsing)
{
	struct proto_buf b;

	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	proto_buf_init(&b);
	proto_buf_append_str(&b, "{\"keys\":[");
	for (int i = 0; i < 100000; i++)
		proto_buf_append_str(&b, i ? ",[]" : "[]");
	proto_buf_append_str(&b, "]}");
	ck_assert(!b.failed);
	call_n("POST", "/v1/filters/f/check", CT_JSON, b.data, b.len);
	EXPECT(
	    413, CT_PROBLEM,
	    PROBLEM("payload_too_large", "Payload too large", 413, "more than max_args (8) keys"));
	/* Many fields: answered at the first bad one, in one pass (no quadratic scan). */
	ctx.max_args = 1 << 20;
	for (int route = 0; route < 2; route++) {
		proto_buf_reset(&b);
		proto_buf_append_char(&b, '{');
		for (int i = 0; i < 200000; i++)
			proto_buf_append_fmt(&b, "%s\"keys\":[]", i ? "," : "");
		proto_buf_append_char(&b, '}');
		call_n(route ? "PUT" : "POST", route ? "/v1/filters/g" : "/v1/filters/f/add",
		       CT_JSON, b.data, b.len);
		EXPECT(400, CT_PROBLEM,
		       route ? BAD("unknown field \\\"keys\\\"")
			     : BAD("field \\\"keys\\\" appears twice"));
	}
	/* Nesting deeper than cJSON's limit is malformed, not a crash. */
	proto_buf_reset(&b);
	for (int i = 0; i < 5000; i++)
		proto_buf_append_char(&b, '[');
	call_n("POST", "/v1/filters/f/check", CT_JSON, b.data, b.len);
	EXPECT(400, CT_PROBLEM, BAD("malformed JSON"));
	proto_buf_free(&b);
}
END_TEST

START_TEST(bad_key_bodies)
{
	static const struct {
		const char *body, *detail;
	} t[] = {
	    {"{}", "missing field \\\"keys\\\" (or \\\"keys_b64\\\")"},
	    {"{\"keys\":[\"a\"],\"keys_b64\":[\"YQ==\"]}",
	     "give \\\"keys\\\" or \\\"keys_b64\\\", not both"},
	    {"{\"keys\":[\"a\"],\"extra\":1}", "unknown field \\\"extra\\\""},
	    {"{\"key\":[\"a\"]}", "unknown field \\\"key\\\""},
	    {"{\"keys\":[\"a\"],\"keys\":[\"b\"]}", "field \\\"keys\\\" appears twice"},
	    {"{\"keys\":\"a\"}", "\\\"keys\\\" must be an array of strings"},
	    {"{\"keys\":{\"a\":1}}", "\\\"keys\\\" must be an array of strings"},
	    {"{\"keys_b64\":null}", "\\\"keys_b64\\\" must be an array of strings"},
	    {"{\"keys\":[\"a\",1]}", "keys[1] must be a string"},
	    {"{\"keys\":[null]}", "keys[0] must be a string"},
	    {"{\"keys\":[[\"a\"]]}", "keys[0] must be a string"},
	    {"{\"keys_b64\":[\"YQ==\",\"Y\"]}", "keys_b64[1] is not valid base64"},
	    {"{\"keys_b64\":[\"Y===\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys_b64\":[\"YQ=\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys_b64\":[\"YR==\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys_b64\":[\"Y Q==\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys_b64\":[\"YQ-_\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys_b64\":[\"=YQ=\"]}", "keys_b64[0] is not valid base64"},
	    {"{\"keys\":[\"a\\u0000b\"]}",
	     "JSON strings must not contain NUL (\\\\u0000); send such keys as keys_b64"},
	    {"[\"a\"]", "the body must be a JSON object"},
	    {"{\"keys\":[\"a\"", "malformed JSON"},
	    {"{\"keys\":[\"a\",]}", "malformed JSON"},
	    {"{\"keys\":[\"\\x\"]}", "malformed JSON"},
	    {"{\"keys\":[\"\\ud800\"]}", "malformed JSON"},
	};
	char expect[512];

	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		call("POST", "/v1/filters/f/add", CT_JSON, t[i].body);
		snprintf(expect, sizeof(expect), BAD("%s"), t[i].detail);
		ck_assert_msg(resp.status == 400 && strcmp(got, expect) == 0, "%s -> %u %s",
			      t[i].body, resp.status, got);
	}
	/* A raw NUL byte in the body. */
	call_n("POST", "/v1/filters/f/check", CT_JSON, "{\"keys\":[\"a\0b\"]}", 16);
	EXPECT(400, CT_PROBLEM,
	       BAD("JSON strings must not contain NUL (\\\\u0000); send such keys as keys_b64"));
	/* "\\u0000" is a backslash and "u0000", not a NUL. */
	POST("/v1/filters/f/add", "{\"keys\":[\"\\\\u0000\"]}", 200, "{\"results\":[true]}");
	GET("/v1/filters/f/keys/%5Cu0000", 200, "{\"present\":true}");
	/* No body, or one that is not JSON. */
	POST("/v1/filters/f/check", "", 400,
	     BAD("the body must be a JSON object with \\\"keys\\\" or \\\"keys_b64\\\""));
	call("POST", "/v1/filters/f/check", "text/plain", "{\"keys\":[]}");
	EXPECT(415, CT_PROBLEM,
	       PROBLEM("unsupported_media_type", "Unsupported media type", 415,
		       "the body must be application/json"));
	/* The add route streams text/plain and ndjson too: a form (curl --data-binary without
	 * -H) or no type at all is told the three types and the header to set. */
	static const char *const add_bad[] = {"application/x-www-form-urlencoded", NULL};
	for (size_t i = 0; i < 2; i++) {
		call("POST", "/v1/filters/f/add", add_bad[i], "a\nb\n");
		EXPECT(415, CT_PROBLEM,
		       PROBLEM("unsupported_media_type", "Unsupported media type", 415,
			       "the body must be application/json, text/plain (a key per line) or "
			       "application/x-ndjson: set the Content-Type header, e.g. curl -H "
			       "'Content-Type: text/plain'"));
	}
	/* A missing filter is reported before the body is looked at. */
	POST("/v1/filters/g/check", "nonsense", 404, FILTER_NOT_FOUND);
	/* Nothing was added by the refused requests. */
	GET("/v1/filters/f/keys/a", 200, "{\"present\":false}");
}
END_TEST

START_TEST(delete_counting)
{
	PUT("/v1/filters/c", "{\"type\":\"counting\"}", 201,
	    fresh_detail("c", "counting", 1000, "0.01", 2, "true"));
	PUT("/v1/filters/p", NULL, 201, fresh_detail("p", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/c/add", "{\"keys\":[\"a\",\"a\",\"b\"]}", 200,
	     "{\"results\":[true,false,true]}");
	POST("/v1/filters/c/delete", "{\"keys\":[\"a\",\"b\",\"b\",\"z\"]}", 200,
	     "{\"results\":[true,true,false,false]}");
	/* "a" was added twice: one delete left it. */
	GET("/v1/filters/c/keys/a", 200, "{\"present\":true}");
	POST("/v1/filters/c/delete", "{\"keys_b64\":[\"YQ==\"]}", 200, "{\"results\":[true]}");
	GET("/v1/filters/c/keys/a", 200, "{\"present\":false}");
	POST("/v1/filters/p/delete", "{\"keys\":[\"a\"]}", 409,
	     PROBLEM("not_counting", "Not a counting filter", 409,
		     "delete needs a counting filter"));
	POST("/v1/filters/q/delete", "{\"keys\":[\"a\"]}", 404, FILTER_NOT_FOUND);
}
END_TEST

/* A key that tests present in two layers is not deleted, nor are the keys after it; the ones
 * before it are (issue 17 item 2). */
START_TEST(delete_ambiguous)
{
	char body[256], k[16];
	int found = -1;

	call("PUT", "/v1/filters/c", CT_JSON,
	     "{\"type\":\"counting\",\"capacity\":4,\"error_rate\":0.5}");
	ck_assert_uint_eq(resp.status, 201);
	for (int i = 0; i < 500; i++) {
		snprintf(body, sizeof(body), "/v1/filters/c/keys/k%d", i);
		call("PUT", body, NULL, NULL);
		ck_assert_uint_eq(resp.status, 200);
	}
	struct bf_filter *f = bf_registry_get(reg, "c", 1);
	ck_assert_uint_ge(f->nlayers, 3);
	for (int i = 0; i < 500 && found < 0; i++) {
		int n = snprintf(k, sizeof(k), "k%d", i);
		if (bf_filter_layers_with(f, k, (size_t)n) > 1)
			found = i;
	}
	ck_assert_int_ge(found, 0);
	call("PUT", "/v1/filters/c/keys/fresh", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	uint64_t items = bf_filter_items(f);
	snprintf(body, sizeof(body), "{\"keys\":[\"zz-absent\",\"k%d\",\"k%d\"]}", found, found);
	POST("/v1/filters/c/delete", body, 409,
	     "{\"type\":\"ambiguous_delete\",\"title\":\"Key in more than one layer\","
	     "\"status\":409,\"detail\":\"a key tests present in more than one layer of this "
	     "filter, so deleting it could remove another key; it and the keys after it were not "
	     "deleted; keys answered before it: 1\",\"results\":[false]}");
	ck_assert_uint_eq(bf_filter_items(f), items);
	snprintf(body, sizeof(body), "/v1/filters/c/keys/k%d", found);
	GET(body, 200, "{\"present\":true}");
}
END_TEST

START_TEST(full_and_out_of_memory)
{
	struct proto_buf b;
	char key[64];
	int added = 0;

	/* A non-scaling filter of capacity 1 holds only a few keys before it refuses. */
	PUT("/v1/filters/n", "{\"capacity\":1,\"nonscaling\":true}", 201,
	    fresh_detail("n", "bloom", 1, "0.01", 0, "true"));
	for (int round = 0; round < 1000; round++) {
		snprintf(key, sizeof(key), "/v1/filters/n/keys/k%d", round);
		call("PUT", key, NULL, NULL);
		if (resp.status != 200)
			break;
		added++;
	}
	ck_assert_int_ge(added, 1);
	EXPECT(409, CT_PROBLEM,
	       "{\"type\":\"filter_full\",\"title\":\"Filter is full\",\"status\":409,\"detail\":"
	       "\"the filter is full (non-scaling, or 1024 layers); keys answered before it: 0\","
	       "\"results\":[]}");
	/* In a batch, the answers before the failure come back with the problem. */
	proto_buf_init(&b);
	proto_buf_append_str(&b, "{\"keys\":[\"k0\",\"zz1\"]}");
	proto_buf_append_char(&b, '\0');
	POST("/v1/filters/n/add", b.data, 409,
	     "{\"type\":\"filter_full\",\"title\":\"Filter is full\",\"status\":409,\"detail\":"
	     "\"the filter is full (non-scaling, or 1024 layers); keys answered before it: 1\","
	     "\"results\":[false]}");
	proto_buf_free(&b);

	/* max_memory: a filter that does not fit is refused and nothing changes. */
	bf_registry_set_max_memory(reg, bf_registry_memory(reg) + 1000);
	PUT("/v1/filters/big", "{\"capacity\":1000000}", 507,
	    PROBLEM("insufficient_memory", "Insufficient memory", 507,
		    "the filter would pass max_memory"));
	GET("/v1/filters/big", 404, FILTER_NOT_FOUND);
}
END_TEST

START_TEST(snapshot_route)
{
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/f/snapshot", NULL, 200, "{\"flushed\":true}");
	ck_assert_int_eq(flushes, 1);
	ck_assert_ptr_eq(flushed, bf_registry_get(reg, "f", 1));
	/* The body is not looked at. */
	call("POST", "/v1/filters/f/snapshot", "text/plain", "whatever");
	EXPECT(200, CT_JSON, "{\"flushed\":true}");
	flush_rc = -5;
	POST("/v1/filters/f/snapshot", NULL, 500,
	     PROBLEM("internal_error", "Internal error", 500,
		     "the snapshot failed; see the server log"));
	ck_assert_int_eq(flushes, 3);
	POST("/v1/filters/g/snapshot", NULL, 404, FILTER_NOT_FOUND);
	ck_assert_int_eq(flushes, 3);
}
END_TEST

START_TEST(bearer_token)
{
	api.token = "s3cret";
	call("GET", "/v1/filters", NULL, NULL);
	EXPECT(401, CT_PROBLEM,
	       PROBLEM("unauthorized", "Unauthorized", 401,
		       "send \\\"Authorization: Bearer <token>\\\""));
	ck_assert_str_eq(resp.www_authenticate, "Bearer");
	authorization = "Bearer wrong!";
	GET("/metrics", 401,
	    PROBLEM("unauthorized", "Unauthorized", 401,
		    "send \\\"Authorization: Bearer <token>\\\""));
	authorization = "Bearer s3cre";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 401);
	authorization = "Basic s3cret";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 401);
	/* Probes stay open; 404 and 405 come before the token is asked for. */
	authorization = NULL;
	GET("/healthz", 200, "{\"status\":\"ok\"}");
	GET("/readyz", 200, "{\"status\":\"ready\"}");
	GET("/nope", 404, NOT_FOUND);
	authorization = "bearer s3cret";
	GET("/v1/filters", 200, "{\"filters\":[]}");
	ck_assert_ptr_null(resp.www_authenticate);
	authorization = "Bearer  s3cret ";
	GET("/v1/filters", 200, "{\"filters\":[]}");
}
END_TEST

START_TEST(counters)
{
	uint64_t c0 = ctx.commands, e0 = ctx.errors;

	GET("/healthz", 200, "{\"status\":\"ok\"}");
	GET("/nope", 404, NOT_FOUND);
	ck_assert_uint_eq(ctx.commands,
			  c0); /* probes, metrics and unknown routes are not commands */
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/g", 404, FILTER_NOT_FOUND);
	POST("/v1/filters/f/check", "{\"keys\":[\"a\"]}", 200, "{\"results\":[false]}");
	call("POST", "/v1/filters/f/check", "text/plain", "x");
	ck_assert_uint_eq(ctx.commands, c0 + 4);
	ck_assert_uint_eq(ctx.errors, e0 + 2);
	ck_assert_uint_eq(ctx.ops[CMD_OP_CREATE], 1);
	ck_assert_uint_eq(ctx.ops[CMD_OP_CHECK], 1);
	ck_assert_uint_eq(ctx.keys[CMD_OP_CHECK], 1);

	ck_assert_uint_eq(api.requests[HTTP_ROUTE_HEALTHZ][1], 1); /* slot 1: 200 */
	ck_assert_uint_eq(http_api_status_at(1), 200);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_NONE][6], 1); /* slot 6: 404 */
	ck_assert_uint_eq(http_api_status_at(6), 404);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_FILTER][2], 1);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_FILTER][6], 1);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_CHECK][1], 1);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_CHECK][10], 1);
	ck_assert_uint_eq(http_api_status_at(10), 415);
	ck_assert_uint_eq(http_api_status_at(0), 0);
	ck_assert_uint_eq(http_api_status_at(HTTP_API_NSTATUS), 0);
	ck_assert_str_eq(http_api_route_name(HTTP_ROUTE_KEY), "/v1/filters/{name}/keys/{key}");
	ck_assert_str_eq(http_api_route_name(HTTP_ROUTE_NONE), "other");
}
END_TEST

START_TEST(refusals)
{
	struct http_api_request req = {
	    .method = "POST", .path = "/v1/filters/f/add", .path_len = 17};
	uint64_t e0 = ctx.errors;

	http_api_refuse(&api, &req, HTTP_REFUSE_TOO_LARGE, 1024, &resp);
	ck_assert_uint_eq(resp.status, 413);
	ck_assert(resp.close);
	ck_assert_str_eq(resp.content_type, CT_PROBLEM);
	ck_assert_uint_eq(resp.len,
			  strlen(PROBLEM("payload_too_large", "Payload too large", 413,
					 "the body is larger than max_body_bytes (1024)") "\n"));
	ck_assert(memcmp(resp.data,
			 PROBLEM("payload_too_large", "Payload too large", 413,
				 "the body is larger than max_body_bytes (1024)") "\n",
			 resp.len) == 0);
	http_api_refuse(&api, &req, HTTP_REFUSE_FRAMING, 1024, &resp);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert(resp.close);
	ck_assert(memcmp(resp.data,
			 BAD("conflicting body framing (repeated Content-Length, or "
			     "Content-Length with Transfer-Encoding)") "\n",
			 resp.len) == 0);
	http_api_refuse(&api, &req, HTTP_REFUSE_NO_MEMORY, 1024, &resp);
	ck_assert_uint_eq(resp.status, 507);
	ck_assert(memcmp(resp.data,
			 PROBLEM("insufficient_memory", "Insufficient memory", 507,
				 "out of memory for the request body") "\n",
			 resp.len) == 0);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_ADD][9], 1); /* 413 */
	ck_assert_uint_eq(ctx.errors, e0 + 3);
	/* The next request starts clean. */
	GET("/healthz", 200, "{\"status\":\"ok\"}");
	ck_assert(!resp.close);
}
END_TEST

/* Before the body: a request refused whatever its body (401, 404, 405) gets that answer. */
START_TEST(admit_before_body)
{
	struct http_api_request req = {
	    .method = "POST", .path = "/v1/filters/f/add", .path_len = 17};
	uint64_t c0 = ctx.commands, e0 = ctx.errors;

	/* No token: everything may send its body, and nothing is counted. */
	ck_assert(http_api_admit(&api, &req, &resp));
	api.token = "s3cret";
	ck_assert(!http_api_admit(&api, &req, &resp));
	ck_assert_uint_eq(resp.status, 401);
	ck_assert(resp.close);
	ck_assert_str_eq(resp.www_authenticate, "Bearer");
	ck_assert_str_eq(resp.content_type, CT_PROBLEM);
	ck_assert_uint_eq(resp.len,
			  strlen(PROBLEM("unauthorized", "Unauthorized", 401,
					 "send \\\"Authorization: Bearer <token>\\\"") "\n"));
	ck_assert(memcmp(resp.data,
			 PROBLEM("unauthorized", "Unauthorized", 401,
				 "send \\\"Authorization: Bearer <token>\\\"") "\n",
			 resp.len) == 0);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_ADD][5], 1); /* slot 5: 401 */
	ck_assert_uint_eq(http_api_status_at(5), 401);
	ck_assert_uint_eq(ctx.commands, c0 + 1);
	ck_assert_uint_eq(ctx.errors, e0 + 1);

	/* With the token, and where no token is asked for, the body may come. */
	req.authorization = "Bearer s3cret";
	ck_assert(http_api_admit(&api, &req, &resp));
	req.authorization = NULL;
	req.path = "/healthz";
	req.path_len = 8;
	req.method = "GET";
	ck_assert(http_api_admit(&api, &req, &resp));
	ck_assert_uint_eq(ctx.commands, c0 + 1);
	/* No such route, and a method the route does not take: told at once, with or without
	 * the token, and closed. */
	req.method = "POST";
	req.path = "/nope";
	req.path_len = 5;
	ck_assert(!http_api_admit(&api, &req, &resp));
	ck_assert_uint_eq(resp.status, 404);
	ck_assert(resp.close);
	ck_assert_uint_eq(resp.len, strlen(NOT_FOUND "\n"));
	ck_assert(memcmp(resp.data, NOT_FOUND "\n", resp.len) == 0);
	req.path = "/healthz";
	req.path_len = 8;
	ck_assert(!http_api_admit(&api, &req, &resp));
	ck_assert_uint_eq(resp.status, 405);
	ck_assert(resp.close);
	ck_assert_str_eq(resp.allow, "GET, HEAD");
	req.authorization = "Bearer s3cret";
	req.method = "GET";
	req.path = "/v1/filters/f/add";
	req.path_len = 17;
	ck_assert(!http_api_admit(&api, &req, &resp));
	ck_assert_uint_eq(resp.status, 405);
	ck_assert_ptr_null(resp.www_authenticate);
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_NONE][6], 1); /* slot 6: 404 */
	ck_assert_uint_eq(ctx.commands, c0 + 2);		/* the 405 on a /v1 route */
	/* The next request starts clean. */
	GET("/healthz", 200, "{\"status\":\"ok\"}");
	ck_assert(!resp.close);
	ck_assert_ptr_null(resp.www_authenticate);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Codecs */

START_TEST(base64)
{
	static const struct {
		const char *in;
		long len;
		const char *out;
	} t[] = {
	    {"", 0, ""},
	    {"YQ==", 1, "a"},
	    {"YQ", 1, "a"},
	    {"YWI=", 2, "ab"},
	    {"YWI", 2, "ab"},
	    {"YWJj", 3, "abc"},
	    {"AP8A", 3, "\0\xff\0"},
	    {"+/+/", 3, "\xfb\xff\xbf"},
	    {"Y", -1, NULL},
	    {"YQ=", -1, NULL},
	    {"YQ===", -1, NULL},
	    {"YR==", -1, NULL},
	    {"YWJ=", -1, NULL},
	    {"Y=Q=", -1, NULL},
	    {"YQ==YQ==", -1, NULL},
	    {"-_", -1, NULL},
	    {"YW\nJj", -1, NULL},
	};
	unsigned char out[16];
	struct proto_buf b;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		long n = http_api_base64_decode(t[i].in, strlen(t[i].in), out);

		ck_assert_msg(n == (t[i].len < 0 ? -22 : t[i].len), "%s: %ld", t[i].in, n);
		if (n > 0)
			ck_assert(memcmp(out, t[i].out, (size_t)n) == 0);
	}
	proto_buf_init(&b);
	http_api_base64_encode(&b, "", 0);
	http_api_base64_encode(&b, "a", 1);
	proto_buf_append_char(&b, ' ');
	http_api_base64_encode(&b, "ab", 2);
	proto_buf_append_char(&b, ' ');
	http_api_base64_encode(&b, "abc", 3);
	proto_buf_append_char(&b, ' ');
	http_api_base64_encode(&b, "\xfb\xff\xbf\x00", 4);
	proto_buf_append_char(&b, '\0');
	ck_assert_str_eq(b.data, "YQ== YWI= YWJj +/+/AA==");
	proto_buf_free(&b);
}
END_TEST

START_TEST(utf8)
{
	ck_assert(http_api_utf8_valid("", 0));
	ck_assert(http_api_utf8_valid("abc", 3));
	ck_assert(http_api_utf8_valid("caf\xc3\xa9", 5));
	ck_assert(http_api_utf8_valid("\xe2\x82\xac", 3));
	ck_assert(http_api_utf8_valid("\xf0\x9f\x8c\xb8", 4));
	ck_assert(http_api_utf8_valid("\xf4\x8f\xbf\xbf", 4));
	ck_assert(!http_api_utf8_valid("\xff", 1));
	ck_assert(!http_api_utf8_valid("\xc3", 1));		/* truncated */
	ck_assert(!http_api_utf8_valid("\xc0\xaf", 2));		/* overlong */
	ck_assert(!http_api_utf8_valid("\xe0\x80\xaf", 3));	/* overlong */
	ck_assert(!http_api_utf8_valid("\xed\xa0\x80", 3));	/* surrogate */
	ck_assert(!http_api_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	ck_assert(!http_api_utf8_valid("\xe2\x82", 2));
	ck_assert(!http_api_utf8_valid("a\x80", 2));
}
END_TEST

/* GET /v1/filters?prefix=&after=&limit=: pages in name order, "more" until the last. */
START_TEST(list_pages)
{
	char name[16], want[64];

	for (int i = 24; i >= 0; i--) {
		snprintf(name, sizeof(name), "u%02d", i);
		ck_assert_int_eq(
		    bf_registry_create(reg, name, 3,
				       &(struct bf_params){.capacity = 10, .error_rate = 0.01}, 1,
				       NULL),
		    0);
	}
	ck_assert_int_eq(bf_registry_create(reg, "v1", 2,
					    &(struct bf_params){.capacity = 10, .error_rate = 0.01},
					    1, NULL),
			 0);
	q_prefix = "u";
	q_limit = "10";
	const char *afters[] = {NULL, "u09", "u19"};
	for (int p = 0; p < 3; p++) {
		q_after = afters[p];
		call("GET", "/v1/filters", NULL, NULL);
		ck_assert_uint_eq(resp.status, 200);
		int first = p * 10, last = p == 2 ? 24 : first + 9;
		for (int i = 0; i < 25; i++) {
			snprintf(want, sizeof(want), "\"name\":\"u%02d\"", i);
			ck_assert_msg((strstr(got, want) != NULL) == (i >= first && i <= last),
				      "page %d: u%02d: %s", p, i, got);
		}
		ck_assert_ptr_null(strstr(got, "\"v1\""));
		ck_assert_ptr_nonnull(strstr(got, p == 2 ? ",\"more\":false}" : ",\"more\":true}"));
	}
	/* Without a limit: all that match, no "more". */
	q_limit = NULL;
	q_prefix = NULL;
	q_after = "u24";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_ptr_nonnull(strstr(got, "\"name\":\"v1\""));
	ck_assert_ptr_null(strstr(got, "\"u"));
	ck_assert_ptr_null(strstr(got, "more"));
	q_after = NULL;
	const char *bad[] = {"0", "x", "10001", "-1", " 5", "5x", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		q_limit = bad[i];
		GET("/v1/filters", 400, BAD("\\\"limit\\\" must be an integer from 1 to 10000"));
	}
	q_limit = "10000";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	q_limit = NULL;
}
END_TEST

static int renames;
static void renamed_hook(void *arg, struct bf_filter *f, const char *from, size_t from_len)
{
	(void)arg;
	(void)f;
	(void)from;
	(void)from_len;
	renames++;
}

#define BAD_NAME                                                                                   \
	PROBLEM("invalid_filter_name", "Invalid filter name", 400,                                 \
		"a filter name is 1 to 200 bytes of printable characters, no spaces")
#define RENAME_TAKEN                                                                               \
	PROBLEM("filter_exists", "Filter exists", 409,                                             \
		"the new name is taken; send \\\"replace\\\":true to replace that filter")

/*
 * POST /v1/filters/{name}/rename {"to":NAME[, "replace":bool]}: 200 with the filter's DETAIL
 * under its new name (keys, parameters and stats kept), the old name gone; 404 for no such
 * filter; 409 when NAME is taken (also by the filter itself) unless "replace" is true, which
 * drops the filter holding it; 400 for a bad NAME.
 */
START_TEST(rename_route)
{
	char expect[2048];
	struct bf_filter *f;

	ctx.hooks.renamed = renamed_hook;
	renames = 0;
	PUT("/v1/filters/fresh", NULL, 201,
	    fresh_detail("fresh", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/fresh/rename", "{\"to\":\"new\"}", 200,
	     fresh_detail("new", "bloom", 1000, "0.01", 2, "true"));
	ck_assert_int_eq(renames, 1);
	GET("/v1/filters/fresh", 404, FILTER_NOT_FOUND);
	GET("/v1/filters/new", 200, fresh_detail("new", "bloom", 1000, "0.01", 2, "true"));
	/* The old name is free for a new filter. */
	PUT("/v1/filters/fresh", "{\"capacity\":50,\"persist\":false}", 201,
	    fresh_detail("fresh", "bloom", 50, "0.01", 2, "false"));

	/* A filter with keys and stats keeps them, and its parameters. */
	PUT("/v1/filters/a", "{\"type\":\"counting\",\"capacity\":500,\"error_rate\":0.001}", 201,
	    fresh_detail("a", "counting", 500, "0.001", 2, "true"));
	POST("/v1/filters/a/add", "{\"keys\":[\"x\",\"y\"]}", 200, "{\"results\":[true,true]}");
	POST("/v1/filters/a/check", "{\"keys\":[\"x\",\"z\"]}", 200, "{\"results\":[true,false]}");
	f = bf_registry_get(reg, "a", 1);
	/* Its DETAIL as GET shows it now, with the new name. */
	call("GET", "/v1/filters/a", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert(!strncmp(got, "{\"name\":\"a\",", 12));
	size_t rest = strlen(got + 12);
	ck_assert_uint_lt(12 + rest, sizeof(expect));
	memcpy(expect, "{\"name\":\"b\",", 12);
	memcpy(expect + 12, got + 12, rest + 1);
	POST("/v1/filters/a/rename", "{\"to\":\"b\"}", 200, expect);
	ck_assert_ptr_eq(bf_registry_get(reg, "b", 1), f);
	ck_assert_ptr_null(bf_registry_get(reg, "a", 1));
	GET("/v1/filters/b", 200, expect);
	POST("/v1/filters/b/check", "{\"keys\":[\"x\",\"y\"]}", 200, "{\"results\":[true,true]}");
	POST("/v1/filters/b/delete", "{\"keys\":[\"y\"]}", 200, "{\"results\":[true]}");
	ck_assert_int_eq(renames, 2);
	ck_assert_uint_eq(bf_registry_count(reg), 3);

	/* No such filter. */
	POST("/v1/filters/a/rename", "{\"to\":\"c\"}", 404, FILTER_NOT_FOUND);
	POST("/v1/filters/a/rename", "{\"to\":\"c\",\"replace\":true}", 404, FILTER_NOT_FOUND);
	ck_assert_ptr_null(bf_registry_get(reg, "c", 1));

	/* Taken: refused unless "replace" is true; the same name is taken too. */
	POST("/v1/filters/b/rename", "{\"to\":\"new\"}", 409, RENAME_TAKEN);
	POST("/v1/filters/b/rename", "{\"to\":\"new\",\"replace\":false}", 409, RENAME_TAKEN);
	POST("/v1/filters/b/rename", "{\"to\":\"b\"}", 409, RENAME_TAKEN);
	ck_assert_ptr_eq(bf_registry_get(reg, "b", 1), f);
	GET("/v1/filters/new", 200, fresh_detail("new", "bloom", 1000, "0.01", 2, "true"));
	ck_assert_int_eq(renames, 2);
	ck_assert_uint_eq(bf_registry_count(reg), 3);
	/* To its own name with replace: nothing to do, 200. */
	call("POST", "/v1/filters/b/rename", CT_JSON, "{\"to\":\"b\",\"replace\":true}");
	ck_assert_uint_eq(resp.status, 200);
	ck_assert(!strncmp(got, "{\"name\":\"b\",", 12));
	ck_assert_ptr_eq(bf_registry_get(reg, "b", 1), f);
	ck_assert_uint_eq(bf_registry_count(reg), 3);

	/* replace: the filter holding the name is dropped, this one takes it. */
	call("POST", "/v1/filters/b/rename", CT_JSON, "{\"replace\":true,\"to\":\"new\"}");
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_str_eq(resp.content_type, CT_JSON);
	static const char head[] = "{\"name\":\"new\",\"type\":\"counting\",\"capacity\":500,";
	ck_assert_msg(!strncmp(got, head, sizeof(head) - 1), "%s", got);
	ck_assert_ptr_eq(bf_registry_get(reg, "new", 3), f);
	ck_assert_ptr_null(bf_registry_get(reg, "b", 1));
	ck_assert_uint_eq(bf_registry_count(reg), 2);
	POST("/v1/filters/new/check", "{\"keys\":[\"x\",\"y\"]}", 200,
	     "{\"results\":[true,false]}");
	ck_assert_int_eq(renames, 3);
	/* The JSON list names it once, under its new name. */
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_ptr_nonnull(strstr(got, "{\"name\":\"new\",\"type\":\"counting\""));
	ck_assert_ptr_null(strstr(got, "\"name\":\"b\""));
	ck_assert_ptr_null(strstr(strstr(got, "\"name\":\"new\"") + 1, "\"name\":\"new\""));
}
END_TEST

/* Names in the path are percent-decoded, "to" is JSON (escapes, UTF-8); 200 bytes is the
 * longest name. */
START_TEST(rename_names)
{
	char body[512], path[512];

	PUT("/v1/filters/a%2Fb", NULL, 201, fresh_detail("a/b", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/a%2Fb/rename", "{\"to\":\"c/d%\"}", 200,
	     fresh_detail("c/d%", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/c%2Fd%25", 200, fresh_detail("c/d%", "bloom", 1000, "0.01", 2, "true"));
	POST("/v1/filters/c%2Fd%25/rename", "{\"to\":\"caf\\u00e9\"}", 200,
	     fresh_detail("caf\xc3\xa9", "bloom", 1000, "0.01", 2, "true"));
	ck_assert_ptr_nonnull(bf_registry_get(reg, "caf\xc3\xa9", 5));
	/* 200 bytes: a name; 201: not. */
	memset(path, 'n', sizeof(path));
	snprintf(body, sizeof(body), "{\"to\":\"%.201s\"}", path);
	POST("/v1/filters/caf%C3%A9/rename", body, 400, BAD_NAME);
	snprintf(body, sizeof(body), "{\"to\":\"%.200s\"}", path);
	call("POST", "/v1/filters/caf%C3%A9/rename", CT_JSON, body);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_ptr_nonnull(bf_registry_get(reg, path, 200));
	ck_assert_uint_eq(bf_registry_count(reg), 1);
}
END_TEST

/* Bad requests change nothing: a bad new name (400 invalid_filter_name), a body that is not
 * {"to":string[, "replace":bool]} (400 bad_request), a body that is not JSON (415); the
 * filter is looked up first (404 whatever the body). */
START_TEST(rename_bad_requests)
{
	static const char *const bad_names[] = {
	    "{\"to\":\"\"}",	  "{\"to\":\"a b\"}",	    "{\"to\":\"a\\nb\"}",
	    "{\"to\":\"a\\tb\"}", "{\"to\":\"a\\u007fb\"}", "{\"to\":\"\",\"replace\":true}",
	};
	static const struct {
		const char *body, *detail;
	} t[] = {
	    {"", "the body must name the new name: {\\\"to\\\":\\\"...\\\"}"},
	    {"{}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"to\":1}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"to\":null}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"to\":[\"x\"]}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"to\":true}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"replace\":true}", "\\\"to\\\" must be a string, the new name"},
	    {"{\"to\":\"x\",\"replace\":\"yes\"}", "\\\"replace\\\" must be true or false"},
	    {"{\"to\":\"x\",\"replace\":1}", "\\\"replace\\\" must be true or false"},
	    {"{\"to\":\"x\",\"replace\":null}", "\\\"replace\\\" must be true or false"},
	    {"{\"to\":\"x\",\"nx\":true}", "unknown field \\\"nx\\\""},
	    {"{\"To\":\"x\"}", "unknown field \\\"To\\\""},
	    {"{\"to\":\"x\",\"to\":\"y\"}", "field \\\"to\\\" appears twice"},
	    {"{\"to\":\"x\",\"replace\":true,\"replace\":true}",
	     "field \\\"replace\\\" appears twice"},
	    {"[]", "the body must be a JSON object"},
	    {"\"x\"", "the body must be a JSON object"},
	    {"{", "malformed JSON"},
	    {"{\"to\":\"x\",}", "malformed JSON"},
	    {"{\"to\":\"x\"} {}", "malformed JSON: text after the value"},
	};
	char expect[512];

	ctx.hooks.renamed = renamed_hook;
	renames = 0;
	PUT("/v1/filters/f", NULL, 201, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	PUT("/v1/filters/x", NULL, 201, fresh_detail("x", "bloom", 1000, "0.01", 2, "true"));
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		call("POST", "/v1/filters/f/rename", CT_JSON, bad_names[i]);
		ck_assert_msg(resp.status == 400 && strcmp(got, BAD_NAME) == 0, "%s -> %u %s",
			      bad_names[i], resp.status, got);
	}
	/* Bodies that are not {"to":string[, "replace":bool]}. */
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		call("POST", "/v1/filters/f/rename", CT_JSON, t[i].body);
		snprintf(expect, sizeof(expect), BAD("%s"), t[i].detail);
		ck_assert_msg(resp.status == 400 && strcmp(got, expect) == 0, "%s -> %u %s",
			      t[i].body, resp.status, got);
	}
	/* A NUL in "to" cannot be a name: refused (400) whatever the wording. */
	call("POST", "/v1/filters/f/rename", CT_JSON, "{\"to\":\"a\\u0000b\"}");
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_null(bf_registry_get(reg, "a", 1));

	/* Not JSON. */
	call("POST", "/v1/filters/f/rename", "text/plain", "{\"to\":\"g\"}");
	EXPECT(415, CT_PROBLEM,
	       PROBLEM("unsupported_media_type", "Unsupported media type", 415,
		       "the body must be application/json"));
	call("POST", "/v1/filters/f/rename", NULL, "{\"to\":\"g\"}");
	ck_assert_uint_eq(resp.status, 415);
	/* No such filter: 404 before the body is read. */
	POST("/v1/filters/nope/rename", "{\"to\":\"a b\"}", 404, FILTER_NOT_FOUND);
	POST("/v1/filters/nope/rename", "{", 404, FILTER_NOT_FOUND);
	/* Only POST. */
	call("GET", "/v1/filters/f/rename", NULL, NULL);
	EXPECT(405, CT_PROBLEM,
	       PROBLEM("method_not_allowed", "Method not allowed", 405,
		       "/v1/filters/{name}/rename takes POST"));
	ck_assert_str_eq(resp.allow, "POST");
	call("PUT", "/v1/filters/f/rename", CT_JSON, "{\"to\":\"g\"}");
	ck_assert_uint_eq(resp.status, 405);

	ck_assert_int_eq(renames, 0);
	ck_assert_uint_eq(bf_registry_count(reg), 2);
	GET("/v1/filters/f", 200, fresh_detail("f", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/x", 200, fresh_detail("x", "bloom", 1000, "0.01", 2, "true"));
	GET("/v1/filters/g", 404, FILTER_NOT_FOUND);
}
END_TEST

/* ---- streaming bulk load (http_api_stream_*) ---- */

/* Run one streaming add of body[0, n) to filter "s", fed in pieces of `piece` bytes; the
 * answer's body (status in resp.status). */
static const char *stream_run(const char *ct, const char *ce, const void *body, size_t n,
			      size_t piece)
{
	struct http_api_request req = {
	    .method = "POST",
	    .path = "/v1/filters/s/add",
	    .path_len = 17,
	    .content_type = ct,
	    .content_encoding = ce,
	};
	struct http_api_stream *st;

	ck_assert(http_api_stream_wanted(&req));
	ck_assert_int_eq(http_api_stream_begin(&api, &req, &resp, &st), 0);
	/* As libmicrohttpd does: what a call did not take is given again first, and a new piece
	 * comes once all is taken. */
	for (size_t off = 0, end = 0; off < n;) {
		if (end == off)
			end = n - end < piece ? n : end + piece;
		off += http_api_stream_feed(&api, st, (const char *)body + off, end - off);
	}
	ck_assert_int_eq(http_api_stream_end(&api, st, &resp), 0);
	snprintf(got, sizeof(got), "%.*s", (int)resp.len, resp.data);
	return got;
}

static void fresh_s(void)
{
	struct bf_params p = {1000, 0.01, BF_TYPE_BLOOM, 2, true, 0, 0};

	cmd_drop(&ctx, "s", 1, true);
	ck_assert_int_eq(cmd_create(&ctx, "s", 1, &p, NULL), CMD_OK);
}

static bool s_has(const char *key)
{
	struct bf_filter *f = bf_registry_get(reg, "s", 1);
	return bf_filter_check(f, key, strlen(key)) == 1;
}

/* gzip of body[0, n) into out (at most cap bytes); its length. */
static size_t gzip_of(const void *body, size_t n, unsigned char *out, size_t cap)
{
	z_stream z = {0};

	ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (unsigned char *)(uintptr_t)body;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t len = z.total_out;
	deflateEnd(&z);
	return len;
}

/* One key per line, "\r\n" too, empty lines skipped, the last line without its end; every way
 * the body can be cut into pieces gives the same answer. */
START_TEST(stream_text_any_pieces)
{
	static const char body[] = "alpha\nbeta\r\n\n\ngamma\ndelta";

	for (size_t piece = 1; piece <= sizeof(body); piece++) {
		fresh_s();
		ck_assert_str_eq(
		    stream_run("text/plain; charset=utf-8", NULL, body, sizeof(body) - 1, piece),
		    "{\"added\":4,\"present\":0}\n");
		ck_assert_uint_eq(resp.status, 200);
		ck_assert(s_has("alpha") && s_has("beta") && s_has("gamma") && s_has("delta"));
		ck_assert(!s_has("beta\r") && !s_has(""));
	}
	ck_assert_str_eq(stream_run("text/plain", "identity", body, sizeof(body) - 1, 7),
			 "{\"added\":0,\"present\":4}\n");
	ck_assert_str_eq(stream_run("text/plain", NULL, "", 0, 1), "{\"added\":0,\"present\":0}\n");
}
END_TEST

/* Many batches, a body far past max_body_bytes would be (not kept: fed as it comes). */
START_TEST(stream_many_keys_and_gzip)
{
	size_t cap = 200000 * 12, n = 0;
	char *body = malloc(cap);
	unsigned char *gz = malloc(cap);
	char key[16];

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(gz);
	for (int i = 0; i < 200000; i++)
		n += (size_t)snprintf(body + n, cap - n, "k%d\n", i);
	fresh_s();
	stream_run("text/plain", NULL, body, n, 65536);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_ptr_nonnull(strstr(got, "\"added\":"));
	for (int i = 0; i < 200000; i += 997) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_msg(s_has(key), "%s", key);
	}
	/* The same keys gzip'ed, in odd pieces: all present now. */
	size_t glen = gzip_of(body, n, gz, cap);
	ck_assert_str_eq(stream_run("text/plain", "gzip", gz, glen, 4099),
			 "{\"added\":0,\"present\":200000}\n");
	/* Cut short, or corrupt: 400, and what came before it counts. */
	stream_run("text/plain", "gzip", gz, glen / 2, 1000);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_nonnull(strstr(got, "the gzip body ends before its end"));
	gz[20] ^= 0xff;
	gz[21] ^= 0xff;
	stream_run("text/plain", "gzip", gz, glen, 1000);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_nonnull(strstr(got, "gzip"));
	free(body);
	free(gz);
}
END_TEST

/* ndjson: one JSON string per line; anything else stops it (400), as do a key too long (16
 * bytes here) and NUL. */
START_TEST(stream_ndjson_and_errors)
{
	static const char ok[] = "\"x\"\n\"caf\\u00e9\"\n\n\"\"\n";

	fresh_s();
	ck_assert_str_eq(stream_run("application/x-ndjson", NULL, ok, sizeof(ok) - 1, 3),
			 "{\"added\":3,\"present\":0}\n");
	ck_assert(s_has("caf\xc3\xa9") && s_has(""));
	stream_run("application/x-ndjson", NULL, "\"y\"\n42\n\"z\"\n", 11, 5);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_nonnull(strstr(got, "not a JSON string (line 2)"));
	ck_assert(s_has("y") && !s_has("z"));
	stream_run("application/x-ndjson", NULL, "\"a\\u0000b\"\n", 12, 12);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_nonnull(strstr(got, "NUL"));
	/* 17 bytes: key_too_long; the keys before it are added. */
	stream_run("text/plain", NULL, "before\n0123456789abcdefg\nafter\n", 31, 4);
	ck_assert_uint_eq(resp.status, 400);
	ck_assert_ptr_nonnull(strstr(got, "key_too_long"));
	ck_assert(s_has("before") && !s_has("after"));
}
END_TEST

/* An ndjson line holds one JSON string, with JSON whitespace around it, and nothing else; a line
 * of whitespace only is skipped as an empty one is. */
START_TEST(stream_ndjson_one_value_a_line)
{
	static const char *const junk[] = {"\"a\" \"b\"", "\"a\",",    "\"a\"]", "\"a\"garbage",
					   "\"a\" 5",	  "\x01\"a\"", "[\"a\"]"};
	static const char ok[] = "\"k\"\n \t \r\n\t\"x\" \r\n   \n \"y\"\t\n";
	char body[64];

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		fresh_s();
		int n = snprintf(body, sizeof(body), "\"k\"\n%s\n\"z\"\n", junk[i]);
		ck_assert_str_eq(
		    stream_run("application/x-ndjson", NULL, body, (size_t)n, 3),
		    BAD("a line of the body is not a JSON string (line 2); added before "
			"it: 1, present: 0") "\n");
		ck_assert_uint_eq(resp.status, 400);
		ck_assert(s_has("k") && !s_has("a") && !s_has("z"));
	}
	fresh_s();
	ck_assert_str_eq(stream_run("application/x-ndjson", NULL, ok, sizeof(ok) - 1, 2),
			 "{\"added\":3,\"present\":0}\n");
	ck_assert_uint_eq(resp.status, 200);
	ck_assert(s_has("k") && s_has("x") && s_has("y"));
}
END_TEST

/* Begin a streaming add of text/plain to "s" (answer in stream_finish). */
static struct http_api_stream *stream_open(void)
{
	struct http_api_request req = {.method = "POST",
				       .path = "/v1/filters/s/add",
				       .path_len = 17,
				       .content_type = "text/plain"};
	struct http_api_stream *st = NULL;

	ck_assert_int_eq(http_api_stream_begin(&api, &req, &resp, &st), 0);
	return st;
}

/* Keys k<from> .. k<to - 1>, one line each. */
static void stream_keys(struct http_api_stream *st, int from, int to)
{
	char line[24];

	for (int i = from; i < to; i++) {
		int n = snprintf(line, sizeof(line), "k%d\n", i);
		http_api_stream_feed(&api, st, line, (size_t)n);
	}
}

static const char *stream_finish(struct http_api_stream *st)
{
	ck_assert_int_eq(http_api_stream_end(&api, st, &resp), 0);
	snprintf(got, sizeof(got), "%.*s", (int)resp.len, resp.data);
	return got;
}

/* Every failure of a stream says how many keys went in before it, as a bad ndjson line does:
 * a key too long, the filter deleted (or renamed) under it, max_memory. */
START_TEST(stream_failure_counts_added)
{
	struct http_api_stream *st;
	char want[512];

	fresh_s();
	ck_assert_str_eq(
	    stream_run("text/plain", NULL, "before\n0123456789abcdefg\nafter\n", 31, 4),
	    PROBLEM("key_too_long", "Key too long", 400,
		    "a key is longer than max_key_bytes (16); added before it: 1, "
		    "present: 0") "\n");
	ck_assert_uint_eq(resp.status, 400);

	/* Deleted after its first batch (4096 keys) went in (no false positive among them). */
	struct bf_params big = {100000, 1e-6, BF_TYPE_BLOOM, 2, true, 0, 0};
	cmd_drop(&ctx, "s", 1, true);
	ck_assert_int_eq(cmd_create(&ctx, "s", 1, &big, NULL), CMD_OK);
	st = stream_open();
	stream_keys(st, 0, 5000);
	ck_assert_int_eq(cmd_drop(&ctx, "s", 1, true), CMD_OK);
	stream_keys(st, 5000, 6000);
	ck_assert_str_eq(stream_finish(st),
			 PROBLEM("filter_not_found", "Filter not found", 404,
				 "no filter of that name; added before it: 4096, present: 0") "\n");
	ck_assert_uint_eq(resp.status, 404);

	/* max_memory: the filter cannot grow past its first layer. */
	fresh_s();
	bf_registry_set_max_memory(reg, bf_registry_memory(reg) + 64);
	st = stream_open();
	stream_keys(st, 0, 3000);
	stream_finish(st);
	struct bf_filter *f = bf_registry_get(reg, "s", 1);
	unsigned long long added, present;
	ck_assert_uint_eq(resp.status, 507);
	ck_assert_int_eq(sscanf(got,
				PROBLEM("insufficient_memory", "Insufficient memory", 507,
					"the filter would pass max_memory; added before it: %llu, "
					"present: %llu"),
				&added, &present),
			 2);
	ck_assert_uint_eq(added, bf_filter_items(f));
	ck_assert_uint_gt(added, 900);
	ck_assert_uint_lt(added + present, 3000);
	snprintf(
	    want, sizeof(want),
	    PROBLEM("insufficient_memory", "Insufficient memory", 507,
		    "the filter would pass max_memory; added before it: %llu, present: %llu") "\n",
	    added, present);
	ck_assert_str_eq(got, want);
	bf_registry_set_max_memory(reg, 0);
}
END_TEST

#define TOO_LARGE(detail) PROBLEM("payload_too_large", "Payload too large", 413, detail)

/* max_gzip_bytes at its edge: a body decoding to exactly the limit is taken, one byte more is
 * 413 (nothing of it added: refused before its slice is read). */
START_TEST(stream_gzip_max_bytes_edge)
{
	size_t cap = 16 * 1024, n = 0, glen;
	char *body = malloc(cap), want[512];
	unsigned char *gz = malloc(cap);

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(gz);
	for (int i = 0; i < 1000; i++)
		n += (size_t)snprintf(body + n, cap - n, "k%d\n", i);
	glen = gzip_of(body, n, gz, cap);
	fresh_s();
	api.gzip_max_bytes = n;
	ck_assert_str_eq(stream_run("text/plain", "gzip", gz, glen, glen),
			 "{\"added\":1000,\"present\":0}\n");
	ck_assert_uint_eq(resp.status, 200);
	fresh_s();
	api.gzip_max_bytes = n - 1;
	snprintf(want, sizeof(want),
		 TOO_LARGE("the gzip body decodes to more than max_gzip_bytes (%zu); added before "
			   "it: 0, present: 0") "\n",
		 n - 1);
	ck_assert_str_eq(stream_run("text/plain", "gzip", gz, glen, glen), want);
	ck_assert_uint_eq(resp.status, 413);
	ck_assert(!s_has("k0"));
	api.gzip_max_bytes = 0;
	free(body);
	free(gz);
}
END_TEST

/* max_gzip_ratio at its edge: decoded bytes exactly ratio times the compressed ones are taken,
 * one more is 413. */
START_TEST(stream_gzip_ratio_edge)
{
	size_t cap = 64 * 1024, n = 0, glen = 0, glen2 = 0;
	char *body = malloc(cap), want[512];
	unsigned char *gz = malloc(cap), *gz2 = malloc(cap);

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(gz);
	ck_assert_ptr_nonnull(gz2);
	/* "a\n" k times (n bytes) whose gzip is a divisor of n, and with one byte more ("a") a
	 * gzip as long. */
	for (size_t i = 0; i + 1 < cap; i += 2)
		memcpy(body + i, "a\n", 2);
	for (size_t k = 1000; k < 30000; k++) {
		n = 2 * k;
		glen = gzip_of(body, n, gz, cap);
		if (n % glen)
			continue;
		glen2 = gzip_of(body, n + 1, gz2, cap);
		if (glen2 == glen)
			break;
	}
	ck_assert_uint_eq(glen2, glen);
	ck_assert_uint_eq(n % glen, 0);
	api.gzip_max_ratio = (uint32_t)(n / glen);
	fresh_s();
	snprintf(want, sizeof(want), "{\"added\":1,\"present\":%zu}\n", n / 2 - 1);
	ck_assert_uint_gt(n / glen, 1);
	ck_assert_str_eq(stream_run("text/plain", "gzip", gz, glen, glen), want);
	ck_assert_uint_eq(resp.status, 200);
	fresh_s();
	snprintf(want, sizeof(want),
		 TOO_LARGE("the gzip body decodes to more than max_gzip_ratio (%zu) times the "
			   "bytes received; added before it: 0, present: 0") "\n",
		 n / glen);
	ck_assert_str_eq(stream_run("text/plain", "gzip", gz2, glen2, glen2), want);
	ck_assert_uint_eq(resp.status, 413);
	api.gzip_max_ratio = 0;
	free(body);
	free(gz);
	free(gz2);
}
END_TEST

/* A gzip body decoding to far more than it is is inflated a slice a call: one call takes
 * part of what it is given, decoding at most HTTP_API_STREAM_SLICE bytes (and one output
 * buffer), and the rest is taken by later calls. */
START_TEST(stream_gzip_sliced)
{
	size_t n = 32u << 20, cap = 1u << 20, glen, off = 0, calls = 0;
	char *body = malloc(n);
	unsigned char *gz = malloc(cap);
	struct http_api_request req = {.method = "POST",
				       .path = "/v1/filters/s/add",
				       .path_len = 17,
				       .content_type = "text/plain",
				       .content_encoding = "gzip"};
	struct http_api_stream *st;

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(gz);
	memset(body, '\n', n);
	memcpy(body, "first\n", 6);
	memcpy(body + n - 5, "last\n", 5);
	glen = gzip_of(body, n, gz, cap);
	free(body);
	fresh_s();
	ck_assert_int_eq(http_api_stream_begin(&api, &req, &resp, &st), 0);
	while (off < glen) {
		size_t took = http_api_stream_feed(&api, st, (const char *)gz + off, glen - off);

		calls++;
		off += took;
	}
	/* 32 MiB in slices of 512 KiB: about 64 calls, never one. */
	ck_assert_uint_ge(calls, (32u << 20) / (HTTP_API_STREAM_SLICE + 64 * 1024));
	ck_assert_str_eq(stream_finish(st), "{\"added\":2,\"present\":0}\n");
	ck_assert(s_has("first") && s_has("last"));
	free(gz);
}
END_TEST

/* What is streamed, and what is refused before any byte of the body. */
START_TEST(stream_wanted_and_refused)
{
	struct http_api_request req = {.method = "POST",
				       .path = "/v1/filters/none/add",
				       .path_len = 20,
				       .content_type = "text/plain"};
	struct http_api_stream *st = NULL;

	ck_assert(http_api_stream_wanted(&req));
	req.content_type = "application/x-ndjson";
	ck_assert(http_api_stream_wanted(&req));
	req.content_type = "application/json";
	ck_assert(!http_api_stream_wanted(&req));
	req.content_type = "text/plainer";
	ck_assert(!http_api_stream_wanted(&req));
	req.content_type = "text/plain";
	req.method = "PUT";
	ck_assert(!http_api_stream_wanted(&req));
	req.method = "POST";
	req.path = "/v1/filters/none/check";
	req.path_len = 22;
	ck_assert(!http_api_stream_wanted(&req));
	req.path = "/v1/filters/none/add";
	req.path_len = 20;
	ck_assert_int_eq(http_api_stream_begin(&api, &req, &resp, &st), 1);
	ck_assert_ptr_null(st);
	ck_assert_uint_eq(resp.status, 404);
	fresh_s();
	req.path = "/v1/filters/s/add";
	req.path_len = 17;
	req.content_encoding = "br";
	ck_assert_int_eq(http_api_stream_begin(&api, &req, &resp, &st), 1);
	ck_assert_uint_eq(resp.status, 415);
}
END_TEST

/* GET /v1/openapi.yaml: the document built in from doc/openapi.yaml, byte for byte (the
 * service test "openapi" compares it with the file); a document, not a command, behind the
 * token like every /v1 route. */
START_TEST(openapi_route)
{
	static const char *const methods[] = {"GET", "HEAD"};
	uint64_t c0 = ctx.commands;

	ck_assert_uint_gt(http_api_openapi_yaml_len, 1000);
	ck_assert_uint_eq(strlen(http_api_openapi_yaml), http_api_openapi_yaml_len);
	ck_assert_ptr_nonnull(strstr(http_api_openapi_yaml, "\nopenapi: 3.1.0\n"));
	for (size_t i = 0; i < 2; i++) {
		struct http_api_request req = {
		    .method = methods[i], .path = "/v1/openapi.yaml", .path_len = 16};

		http_api_handle(&api, &req, &resp);
		ck_assert_uint_eq(resp.status, 200);
		ck_assert_str_eq(resp.content_type, "application/yaml");
		ck_assert_uint_eq(resp.len, http_api_openapi_yaml_len);
		ck_assert(memcmp(resp.data, http_api_openapi_yaml, resp.len) == 0);
		ck_assert_ptr_null(resp.allow);
	}
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_OPENAPI][1], 2); /* slot 1: 200 */
	ck_assert_uint_eq(ctx.commands, c0);
	ck_assert_str_eq(http_api_route_name(HTTP_ROUTE_OPENAPI), "/v1/openapi.yaml");

	call("POST", "/v1/openapi.yaml", NULL, NULL);
	EXPECT(405, CT_PROBLEM,
	       PROBLEM("method_not_allowed", "Method not allowed", 405,
		       "/v1/openapi.yaml takes GET, HEAD"));
	ck_assert_str_eq(resp.allow, "GET, HEAD");
	GET("/v1/openapi.yaml/", 404, NOT_FOUND);
	GET("/v1/openapi.yml", 404, NOT_FOUND);

	api.token = "s3cret";
	GET("/v1/openapi.yaml", 401,
	    PROBLEM("unauthorized", "Unauthorized", 401,
		    "send \\\"Authorization: Bearer <token>\\\""));
	ck_assert_str_eq(resp.www_authenticate, "Bearer");
	authorization = "Bearer s3cret";
	struct http_api_request req = {.method = "GET",
				       .path = "/v1/openapi.yaml",
				       .path_len = 16,
				       .authorization = authorization};
	http_api_handle(&api, &req, &resp);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_uint_eq(resp.len, http_api_openapi_yaml_len);
}
END_TEST

/* GET /: the status page built in from doc/status.html, byte for byte, as text/html; a
 * document (not a command) behind the token like /v1/openapi.yaml. */
START_TEST(status_route)
{
	static const char *const methods[] = {"GET", "HEAD"};
	uint64_t c0 = ctx.commands;

	ck_assert_uint_gt(http_api_status_html_len, 1000);
	ck_assert_uint_eq(strlen(http_api_status_html), http_api_status_html_len);
	ck_assert_ptr_nonnull(strstr(http_api_status_html, "<!DOCTYPE html>"));
	/* Self-contained: no external script, style, font or image. */
	ck_assert_ptr_null(strstr(http_api_status_html, "src=\"http"));
	ck_assert_ptr_null(strstr(http_api_status_html, "href=\"http"));
	ck_assert_ptr_null(strstr(http_api_status_html, "url(http"));
	ck_assert_ptr_null(strstr(http_api_status_html, "@import"));
	for (size_t i = 0; i < 2; i++) {
		struct http_api_request req = {.method = methods[i], .path = "/", .path_len = 1};

		http_api_handle(&api, &req, &resp);
		ck_assert_uint_eq(resp.status, 200);
		ck_assert_str_eq(resp.content_type, "text/html; charset=utf-8");
		ck_assert_uint_eq(resp.len, http_api_status_html_len);
		ck_assert(memcmp(resp.data, http_api_status_html, resp.len) == 0);
		ck_assert_ptr_null(resp.allow);
	}
	ck_assert_uint_eq(api.requests[HTTP_ROUTE_STATUS][1], 2); /* slot 1: 200 */
	ck_assert_uint_eq(ctx.commands, c0);
	ck_assert_str_eq(http_api_route_name(HTTP_ROUTE_STATUS), "/");

	call("POST", "/", NULL, NULL);
	EXPECT(405, CT_PROBLEM,
	       PROBLEM("method_not_allowed", "Method not allowed", 405, "/ takes GET, HEAD"));
	GET("/index.html", 404, NOT_FOUND);
	GET("//", 404, NOT_FOUND);
	GET("", 404, NOT_FOUND);

	api.token = "s3cret";
	GET("/", 401,
	    PROBLEM("unauthorized", "Unauthorized", 401,
		    "send \\\"Authorization: Bearer <token>\\\""));
	ck_assert_str_eq(resp.www_authenticate, "Bearer");
	authorization = "Bearer s3cret";
	call("GET", "/", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_str_eq(resp.content_type, "text/html; charset=utf-8");
	ck_assert_uint_eq(resp.len, http_api_status_html_len);
}
END_TEST

/* GET /v1/filters?detail=true&limit=N: DETAIL objects (what the status page reads), a limit of
 * 1 to 100 required; a closed filter is listed as it is, not loaded. */
START_TEST(list_detail)
{
	ck_assert_int_eq(bf_registry_create(reg, "a", 1,
					    &(struct bf_params){.capacity = 100,
								.error_rate = 0.01,
								.expansion = 2,
								.persist = true},
					    1, NULL),
			 0);
	ck_assert_int_eq(bf_registry_create(reg, "b", 1,
					    &(struct bf_params){.capacity = 10, .error_rate = 0.01},
					    1, NULL),
			 0);
	call("PUT", "/v1/filters/a/keys/k", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	q_detail = "true";
	q_limit = "1";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_str_eq(resp.content_type, CT_JSON);
	ck_assert_msg(strncmp(got,
			      "{\"filters\":[{\"name\":\"a\",\"type\":\"bloom\","
			      "\"capacity\":100,\"error_rate\":0.01,\"items\":1,",
			      80) == 0,
		      "%s", got);
	ck_assert_ptr_nonnull(strstr(got, "\"ttl_seconds\":null,\"fpr_estimate\":"));
	ck_assert_ptr_nonnull(strstr(got, "\"stats\":{\"checks\":0,"));
	ck_assert_ptr_nonnull(strstr(got, "}],\"more\":true}"));
	ck_assert_ptr_null(strstr(got, "\"b\""));
	q_detail = "false";
	q_limit = "2";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	ck_assert_ptr_null(strstr(got, "fpr_estimate"));
	ck_assert_ptr_nonnull(strstr(got, "\"name\":\"b\""));

	q_detail = "true";
	q_limit = "100";
	call("GET", "/v1/filters", NULL, NULL);
	ck_assert_uint_eq(resp.status, 200);
	q_limit = "101";
	GET("/v1/filters", 400, BAD("\\\"limit\\\" must be an integer from 1 to 100"));
	q_limit = NULL;
	GET("/v1/filters", 400, BAD("detail=true needs \\\"limit\\\", from 1 to 100"));
	q_detail = "1";
	q_limit = "5";
	GET("/v1/filters", 400, BAD("\\\"detail\\\" must be true or false"));
	q_detail = NULL;
	q_limit = NULL;
}
END_TEST

static Suite *http_api_suite(void)
{
	Suite *s = suite_create("http-api");
	TCase *tc = tcase_create("routes");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, health_and_ready);
	tcase_add_test(tc, metrics_route);
	tcase_add_test(tc, history_route);
	tcase_add_test(tc, openapi_route);
	tcase_add_test(tc, status_route);
	tcase_add_test(tc, list_detail);
	tcase_add_test(tc, unknown_routes);
	tcase_add_test(tc, empty_name_first_request);
	tcase_add_test(tc, methods_not_allowed);
	tcase_add_test(tc, create_defaults_and_params);
	tcase_add_test(tc, create_location_encodes_the_name);
	tcase_add_test(tc, create_bad_names);
	tcase_add_test(tc, create_bad_bodies);
	tcase_add_test(tc, media_types);
	tcase_add_test(tc, get_list_delete);
	tcase_add_test(tc, non_utf8_names);
	tcase_add_test(tc, add_check_keys);
	tcase_add_test(tc, key_routes);
	tcase_add_test(tc, key_limits);
	tcase_add_test(tc, huge_arrays_refused_before_parsing);
	tcase_add_test(tc, bad_key_bodies);
	tcase_add_test(tc, delete_counting);
	tcase_add_test(tc, delete_ambiguous);
	tcase_add_test(tc, full_and_out_of_memory);
	tcase_add_test(tc, snapshot_route);
	tcase_add_test(tc, bearer_token);
	tcase_add_test(tc, counters);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, admit_before_body);
	tcase_add_test(tc, list_pages);
	tcase_add_test(tc, stream_text_any_pieces);
	tcase_add_test(tc, stream_many_keys_and_gzip);
	tcase_add_test(tc, stream_ndjson_and_errors);
	tcase_add_test(tc, stream_ndjson_one_value_a_line);
	tcase_add_test(tc, stream_failure_counts_added);
	tcase_add_test(tc, stream_gzip_max_bytes_edge);
	tcase_add_test(tc, stream_gzip_ratio_edge);
	tcase_add_test(tc, stream_gzip_sliced);
	tcase_add_test(tc, stream_wanted_and_refused);
	tcase_add_test(tc, rename_route);
	tcase_add_test(tc, rename_names);
	tcase_add_test(tc, rename_bad_requests);
	suite_add_tcase(s, tc);

	tc = tcase_create("codecs");
	tcase_add_test(tc, base64);
	tcase_add_test(tc, utf8);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(http_api_suite)
