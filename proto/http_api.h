/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/JSON front end as a pure function (DESIGN.md §4.3): a method, a raw path and the
 * whole request body go in; a status, a content type, a few headers and the body bytes come
 * out. No sockets and no HTTP parsing here: server/http.c feeds it from libmicrohttpd, the
 * unit tests call it directly. Every filter operation goes through the command layer
 * (proto/command.h), so HTTP sees the same filters, limits and error kinds as text and RESP.
 *
 * Routes (GET routes also answer HEAD; anything else on a route is 405 with Allow):
 *
 *	GET    /healthz                          200 {"status":"ok"}
 *	GET    /readyz                           200 {"status":"ready"}, 503 not_ready
 *	GET    /metrics                          200 Prometheus text 0.0.4 (hooks.metrics)
 *	GET    /v1/openapi.yaml                  200 this API in OpenAPI 3.1, application/yaml
 *	                                         (doc/openapi.yaml, built in)
 *	GET    /                                 200 the status page, text/html (doc/status.html,
 *	                                         built in; it reads /metrics, /readyz,
 *	                                         /v1/filters?detail=true and, once,
 *	                                         /v1/metrics/history)
 *	GET    /v1/metrics/history               200 the last HTTP_HISTORY_LEN seconds of what the
 *	                                         status page charts (struct http_history), so
 *	                                         its charts are full from its first request:
 *	                                         {"interval_seconds":1,"end_ms":T,"commands":
 *	                                         {"text":[N,...],"resp":[...],"http":[...]},
 *	                                         "keys":{"added":[...],"checked":[...]}}, the
 *	                                         oldest sample first, each what that second saw;
 *	                                         end_ms is the newest sample's Unix time in ms
 *	GET    /v1/filters                       200 {"filters":[FILTER, ...]} sorted by name
 *	PUT    /v1/filters/{name}                201 DETAIL (+ Location), 409, 400
 *	GET    /v1/filters/{name}                200 DETAIL, 404
 *	PATCH  /v1/filters/{name}                200 DETAIL, body {"ttl_seconds":N} (expires in N
 *	                                         seconds, 1..HTTP_API_TTL_MAX) or
 *	                                         {"ttl_seconds":null} (never)
 *	DELETE /v1/filters/{name}                204, 404
 *	POST   /v1/filters/{name}/add            200 {"results":[true,false,...]} (true = new)
 *	POST   /v1/filters/{name}/check          200 {"results":[...]} (true = may be present)
 *	POST   /v1/filters/{name}/delete         200 {"results":[...]} (true = removed; counting)
 *	GET    /v1/filters/{name}/keys/{key}     200 {"present":bool}
 *	PUT    /v1/filters/{name}/keys/{key}     200 {"added":bool}
 *	POST   /v1/filters/{name}/snapshot       200 {"flushed":true} once the snapshot is durable;
 *	                                         {"flushed":false,"reason":...} for a memory-only
 *	                                         filter (never written)
 *	POST   /v1/filters/{name}/rename         200 DETAIL (of the filter under its new name),
 *	                                         body {"to":NAME, "replace":bool}: as RESP's
 *	                                         RENAME (replace true) or RENAMENX (false, the
 *	                                         default: 409 filter_exists if NAME is taken)
 *
 * FILTER is {"name","type","capacity","error_rate","items","bytes","layers"} (capacity: of the
 * whole chain as built so far); DETAIL adds "initial_capacity", "expansion" (0: non-scaling),
 * "persist", "ttl_seconds" (seconds left, null: never expires), "fpr_estimate" and "stats":{checks,
 *check_hits, check_misses, sets, set_hits, set_misses, deletes, delete_hits, delete_misses}. A name
 *that is not valid UTF-8 is shown with U+FFFD for each bad byte, plus "name_b64" with its exact
 *bytes.
 *
 * GET /v1/filters?detail=true lists DETAIL objects instead, and needs a limit from 1 to
 * HTTP_API_LIST_DETAIL_MAX (400 otherwise); a closed filter is listed as it is, not loaded.
 *
 * Paths are raw (still percent-encoded, without the query string): {name} and {key} are one
 * segment each, percent-decoded here, so a key holding '/' is sent as %2F and any byte as %XX.
 * "+" is a plus sign. The key bodies are {"keys":[string, ...]} (UTF-8 as the bytes of the
 * key) or {"keys_b64":[string, ...]} (RFC 4648 base64, padding optional) for binary keys;
 * exactly one of them. JSON strings must not contain \u0000 (use keys_b64 for such keys).
 * PUT /v1/filters/{name} takes an empty body (all defaults) or an object with any of
 * "capacity" (integer >= 1), "error_rate" (0 < p < 1), "type" ("bloom"|"counting"),
 * "expansion" (integer 0..32768, 0 = non-scaling), "nonscaling" (bool), "persist" (bool),
 * "ttl_seconds" (integer 1..HTTP_API_TTL_MAX, or null);
 * defaults come from cmd_default_params(). Unknown or repeated fields are 400.
 *
 * Errors are application/problem+json (RFC 9457): {"type","title","status","detail"}, with
 * "results" added when an add stopped part way (the answers for the keys before the failure).
 * type and status, stable:
 *
 *	bad_request 400            malformed JSON or percent-encoding, wrong types, missing or
 *	                           unknown fields, bad parameter values, bad framing
 *	invalid_filter_name 400    PUT of a name that breaks the naming rules
 *	key_too_long 400           a key over max_key_bytes (nothing was changed)
 *	unauthorized 401           token set and no matching "Authorization: Bearer" (+ header
 *	                           WWW-Authenticate: Bearer); /healthz and /readyz stay open
 *	not_found 404              no such route
 *	filter_not_found 404       no filter of that name (every route but PUT /v1/filters/{name})
 *	method_not_allowed 405     (+ header Allow)
 *	filter_exists 409          PUT of a name that is taken
 *	filter_full 409            non-scaling filter full, or 1024 layers reached
 *	not_counting 409           delete on a plain filter
 *	ambiguous_delete 409       delete of a key present in more than one layer
 *	read_only_replica 409      a change sent to a replica (doc/replication.md)
 *	payload_too_large 413      body over max_body_bytes, or more JSON values than max_args
 *	unsupported_media_type 415 a non-empty body whose Content-Type is not JSON
 *	internal_error 500         a snapshot failed, a closed filter could not be loaded, or
 *	                           anything unexpected
 *	not_ready 503              /readyz while loading, stopping, or while the log or snapshots
 *	                           cannot be written
 *	log_unavailable 503        a change while the write-ahead log cannot write
 *	insufficient_memory 507    max_memory would be passed, or an allocation failed
 *
 * Counters: each /v1/filters request counts one command in the cmd_ctx (and one error when it
 * is answered with 4xx/5xx); every request counts in requests[route][status] for /metrics.
 *
 * Threading: the loop thread only, like the command layer.
 */
#ifndef BLOSSOMD_PROTO_HTTP_API_H
#define BLOSSOMD_PROTO_HTTP_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"
#include "proto/command.h"

/* The most decoded bytes of a gzip'd streamed add taken in one call (a few ms of work). */
#define HTTP_API_STREAM_SLICE (512 * 1024)

/* The longest ttl_seconds taken (about 285 million years: its ms fit a JSON integer). */
#define HTTP_API_TTL_MAX 9007199254740.0

/* The routes, for counting and for messages. */
enum http_route {
	HTTP_ROUTE_NONE = 0, /* no route matched (404) */
	HTTP_ROUTE_HEALTHZ,
	HTTP_ROUTE_READYZ,
	HTTP_ROUTE_METRICS,
	HTTP_ROUTE_OPENAPI, /* a document: like /metrics, not counted as a command */
	HTTP_ROUTE_STATUS,  /* GET /: the status page, a document too */
	HTTP_ROUTE_HISTORY, /* GET /v1/metrics/history: like /metrics */
	HTTP_ROUTE_FILTERS,
	HTTP_ROUTE_FILTER,
	HTTP_ROUTE_ADD,
	HTTP_ROUTE_CHECK,
	HTTP_ROUTE_DELETE,
	HTTP_ROUTE_KEY,
	HTTP_ROUTE_SNAPSHOT,
	HTTP_ROUTE_RENAME,
	HTTP_ROUTE_COUNT,
};

/* The statuses counted one by one; any other lands in the last slot ("other"). */
#define HTTP_API_NSTATUS 14

/* The status counted in slot i (0 for the "other" slot), i < HTTP_API_NSTATUS. */
unsigned http_api_status_at(unsigned i);

/* The route's path template ("/v1/filters/{name}/add"; "other" for HTTP_ROUTE_NONE). */
const char *http_api_route_name(enum http_route r);

/* Bytes of the Location header of a 201: "/v1/filters/" + the name, every byte encoded. */
/* GET /v1/filters?limit= at most this; with detail=true (DETAIL objects, whose estimate
 * costs a model sum per layer) at most HTTP_API_LIST_DETAIL_MAX. */
#define HTTP_API_LIST_MAX	 10000
#define HTTP_API_LIST_DETAIL_MAX 100
#define HTTP_API_LOCATION_MAX	 (sizeof("/v1/filters/") + 3 * BF_NAME_MAX)

struct http_api_request {
	const char *method; /* NUL-terminated, case-sensitive ("GET") */
	const char *path;   /* raw path: percent-encoded, no query; need not be NUL-ended */
	size_t path_len;
	const char *content_type;     /* the Content-Type header, or NULL */
	const char *content_encoding; /* the Content-Encoding header, or NULL */
	const char *authorization;    /* the Authorization header, or NULL */
	bool authorization_repeated;  /* more than one Authorization header (refused: 400) */
	const char *body;	      /* may be NULL when body_len is 0 */
	size_t body_len;
	/* GET /v1/filters?prefix=&after=&limit=&detail= (query arguments as sent: prefix and
	 * after are percent-decoded here), NULL if absent. */
	const char *q_prefix, *q_after, *q_limit, *q_detail;
	/* The request's flush ticket (cmd_flush), kept while it waits for its write: 0 when it
	 * is first handled; NULL: a snapshot is answered without waiting for its write. */
	uint64_t *flush_ticket;
};

struct http_api_response {
	unsigned status;
	const char *content_type;     /* static string; NULL when there is no body (204) */
	const char *allow;	      /* 405: the route's methods ("GET, HEAD"); else NULL */
	const char *www_authenticate; /* 401: "Bearer"; else NULL */
	bool close;		      /* close the connection after this response */
	char location[HTTP_API_LOCATION_MAX]; /* 201: the new filter's path; else "" */
	/* The bytes to send: body.data, or a static text when body ran out of memory. */
	const char *data;
	size_t len;
	/* Scratch the body is built in; init once, reused across calls, freed by the owner. */
	struct proto_buf body;
	/* The route it answered, as counted (set with the rest; read by http_api_unlogged()). */
	enum http_route route;
};

struct http_api_hooks {
	void *arg;
	/* NULL while ready; else why not, for /readyz ("loading snapshots", "shutting down"). */
	const char *(*not_ready)(void *arg);
	/* Append the Prometheus exposition text to out. NULL: /metrics is 404. */
	void (*metrics)(void *arg, struct proto_buf *out);
};

/*
 * The last five minutes of the figures the status page charts, a sample a second, kept by the
 * daemon (http_api_history_sample, from a 1 s timer) so that the page's first request gets them.
 */
#define HTTP_HISTORY_LEN 300
struct http_history_sample {
	uint64_t commands[CMD_PEER_COUNT]; /* commands of each protocol in the interval */
	uint64_t added, checked;	   /* keys given to add and to check */
};
struct http_history {
	struct http_history_sample s[HTTP_HISTORY_LEN]; /* a ring */
	uint32_t n, next;				/* samples kept; where the next goes */
	uint64_t end_ms;				/* Unix time (ms) of the newest sample */
	struct http_history_sample last;		/* the counters at the newest sample */
};

struct http_api {
	struct cmd_ctx *cmd;
	struct http_api_hooks hooks;
	/* Bearer token every route but /healthz and /readyz requires; NULL or "": none. */
	const char *token;
	/* A gzip'd streamed add: the most bytes it may decode to, and decoded bytes per
	 * compressed byte received (at any point); past either, 413. 0: no bound. */
	uint64_t gzip_max_bytes;
	uint32_t gzip_max_ratio;
	/* Scratch of the multi-key routes (the loop thread serves one request at a time). */
	struct cmd_session sess;
	struct proto_buf path; /* percent-decoded segments */
	/* requests[route][slot]: answered requests by route and status slot. */
	uint64_t requests[HTTP_ROUTE_COUNT][HTTP_API_NSTATUS];
	struct http_history history; /* GET /v1/metrics/history */
};

/* Set api up over cmd with hooks (copied; may be NULL: no hooks). Cannot fail. */
void http_api_init(struct http_api *api, struct cmd_ctx *cmd, const struct http_api_hooks *hooks);

/* Take a sample of the history at Unix time now_ms: what cmd's counters grew by since the last
 * one (or since http_api_init). The oldest is dropped past HTTP_HISTORY_LEN. Call it every
 * second. Cannot fail. */
void http_api_history_sample(struct http_api *api, uint64_t now_ms);

/*
 * Streaming bulk load: POST /v1/filters/{name}/add with a text/plain body (one key per line;
 * "\r\n" ends a line too; empty lines are skipped) or application/x-ndjson (one JSON string per
 * line, optional spaces, tabs or \r around it and nothing else after it; empty and
 * whitespace-only lines are skipped), optionally Content-Encoding: gzip. The body is not
 * bounded by max_body_bytes and is not kept: keys are added in batches as its bytes arrive, in
 * memory bounded by the longest key (max_key_bytes) and a batch. The answer, once the body has
 * ended: 200 {"added":N,"present":M} (added: new keys; present: keys already there), or the problem
 * that stopped it (the rest of the body is read and dropped; the keys before it stay added,
 * and every such problem's detail ends with "added before it: N, present: M"). The caller holds the
 * answer until cmd->wait_lsn is durable.
 */
struct http_api_stream;

/* Whether req (its head) asks for a streaming bulk load. */
bool http_api_stream_wanted(const struct http_api_request *req);

/*
 * Begin one: 0 with *out set; 1 with the answer in resp (no such filter, bad name, an unknown
 * Content-Encoding: 415, out of memory), or with nothing and cmd->paging set (the filter is
 * loading: call again once it is loaded).
 */
int http_api_stream_begin(struct http_api *api, const struct http_api_request *req,
			  struct http_api_response *resp, struct http_api_stream **out);
/*
 * n more bytes of body (data begins with what the last call left): how many it took. A gzip'd
 * body is inflated in slices of at most HTTP_API_STREAM_SLICE decoded bytes a call, so one
 * call holds the loop a few milliseconds at most: fewer than n taken, call again (on a later
 * loop turn) with the rest first. With cmd->paging set after it, the filter was paged out
 * under the stream (cold_interval, or a close) and is loading: read no more of the body until
 * it is loaded (the keys taken meanwhile wait in st), then go on feeding.
 */
size_t http_api_stream_feed(struct http_api *api, struct http_api_stream *st, const char *data,
			    size_t n);
/*
 * The body has ended: 0, the answer in resp, counted as a request (cmd->wait_lsn is what it
 * must wait for), and st freed; or 1 with cmd->paging set: its filter is loading, call again
 * once it is loaded.
 */
int http_api_stream_end(struct http_api *api, struct http_api_stream *st,
			struct http_api_response *resp);
void http_api_stream_free(struct http_api_stream *st);

/*
 * resp, an answer that waited for the log, cannot be given: a record it waited for was not
 * written (the log failed). Replace it with the 503 log_unavailable problem a change gets while
 * the log cannot write, and count it as that instead of what it was. Cannot fail (at worst
 * the static 507 text).
 */
void http_api_unlogged(struct http_api *api, struct http_api_response *resp);

/* Release the scratch memory. The api can be initialised again afterwards. */
void http_api_free(struct http_api *api);

/* Prepare a response for its first use (empty body, no allocation). Cannot fail. */
void http_api_response_init(struct http_api_response *r);

/* Release the response's scratch. */
void http_api_response_free(struct http_api_response *r);

/*
 * Answer one complete request: fills every field of resp (data/len valid until the next
 * call with resp, or until http_api_response_free()). Never fails: every problem becomes a
 * problem+json response; when even that cannot be built, a static 507 text is sent. One
 * exception: when the request's filter is paged out and loading, nothing is answered and
 * cmd->paging is set: the caller holds the request and calls again once it is loaded.
 */
void http_api_handle(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *resp);

/*
 * Before the body is read: false if req (method, path and authorization; the body is not
 * looked at) is refused whatever its body (404 no route, 405 method, 401 token), with that
 * answer in resp, resp->close set (the body is not read) and counted as http_api_handle()
 * would; else true, nothing counted. Lets the server refuse a request announcing a body,
 * a client without the token in particular, before it buffers any of that body.
 */
bool http_api_admit(struct http_api *api, const struct http_api_request *req,
		    struct http_api_response *resp);

/* Why a request is refused before its body is read (the server's framing checks). */
enum http_api_refusal {
	HTTP_REFUSE_TOO_LARGE, /* 413 payload_too_large: Content-Length or body over the limit */
	HTTP_REFUSE_FRAMING,   /* 400 bad_request: repeated Content-Length, or with chunked */
	HTTP_REFUSE_NO_MEMORY, /* 507 insufficient_memory: no memory to hold the body */
};

/*
 * Answer req (method and path; the body is not looked at) with the refusal's problem, set
 * resp->close (the rest of the request is not read), and count it as http_api_handle()
 * would. Never fails.
 */
void http_api_refuse(struct http_api *api, const struct http_api_request *req,
		     enum http_api_refusal why, uint64_t max_body_bytes,
		     struct http_api_response *resp);

/*
 * Helpers, exposed for tests and for server/metrics.c.
 */

/* Decode RFC 4648 base64 (standard alphabet; '=' padding optional, but only at the end) of
 * in[0..n) into out (room for n * 3 / 4 bytes; may equal in). Returns the decoded length, or
 * -EINVAL on any other character or a bad length. */
long http_api_base64_decode(const char *in, size_t n, unsigned char *out);

/* Append the base64 of p[0..n) (with padding) to out. */
void http_api_base64_encode(struct proto_buf *out, const void *p, size_t n);

/* doc/openapi.yaml as built in by scripts/embed.py (a NUL follows its len bytes): what
 * GET /v1/openapi.yaml sends. */
extern const char http_api_openapi_yaml[];
extern const size_t http_api_openapi_yaml_len;

/* doc/status.html as built in the same way: what GET / sends. */
extern const char http_api_status_html[];
extern const size_t http_api_status_html_len;

/* True if p[0..n) is well-formed UTF-8 (no overlongs, surrogates or values over U+10FFFF). */
bool http_api_utf8_valid(const void *p, size_t n);

#endif /* BLOSSOMD_PROTO_HTTP_API_H */
