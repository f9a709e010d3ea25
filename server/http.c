/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd inside the libuv loop; see http.h for the behaviour and the limits. The
 * request bodies are collected here (bounded), the answers come from proto/http_api.c.
 */
#include "server/http.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <strings.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "server/log.h"
#include "proto/http_api.h"

/* Body buffers up to this size are kept for the connection's next request. */
#define HTTP_KEEP_BYTES (64 * 1024)
#ifndef HTTP_SWEEP_MS /* the fuzz target sweeps more often */
#define HTTP_SWEEP_MS 1000
#endif
#define HTTP_BACKLOG 1024u
/* Shortest interval between two "max_connections reached" warnings. */
#define HTTP_WARN_MS 1000

struct http_server;

/* One MHD daemon: one listening address. */
struct http_listener {
	struct http_server *srv;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;	  /* on the daemon's epoll descriptor */
	uv_timer_t timer; /* MHD_get_timeout() */
	uv_idle_t idle;	  /* MHD wants to run again at once */
	bool handles;	  /* poll, timer and idle initialised */
};

/* One client connection (MHD's socket context). */
struct http_conn {
	LIST_ENTRY(http_conn) link; /* in the server's conns */
	/* A response waiting for the log to make wait_lsn durable: the connection is suspended
	 * (in h->waiting) and the response queued when it is resumed (the 503 log_unavailable
	 * problem instead if the log fails first: http_unlogged()). */
	struct MHD_Response *held;
	unsigned held_status;
	enum http_route held_route; /* as counted (http_api_unlogged() recounts it) */
	uint64_t wait_lsn;
	bool waiting, resumed;
	bool paging; /* suspended in h->paging (wait_link) until its filter is loaded */
	/* A streamed gzip body inflated a slice: suspended in h->slicing (wait_link) until the
	 * next loop turn, when the rest of its piece is given again (http_run). */
	bool slicing;
	bool fed;	       /* its stream took body bytes since the last sweep: not stalled */
	bool repeat;	       /* its request is answered again on the next call (it was paging) */
	uint64_t flush_ticket; /* its snapshot request waits for its write (cmd_flush) */
	LIST_ENTRY(http_conn) wait_link;
	struct MHD_Connection *mhd;
	int fd;
	uint64_t request_ms; /* start of the request not yet done (loop ms), 0 between requests;
			      * restarted while its response moves */
	bool in_head;	     /* request line seen, the handler not called yet */
	bool in_request;     /* the handler has seen the current request's headers */
	bool responding;     /* the current request's response is queued */
	bool too_large;	     /* body past max_body_bytes: the rest is read and dropped */
	bool no_memory;	     /* the body could not be stored */
	bool cut;	     /* shut down by us (request_timeout, a stall, a refusal) */
	bool stalled;	     /* input waiting, unread, at the last sweep */
	uint64_t read_mark;  /* bytes MHD had read at the last sweep */
	uint64_t body_bytes; /* body bytes received for the current request */
	struct proto_buf body;
	/* A streaming bulk load (http_api_stream_*): its body is added as it arrives, never
	 * kept; stream_begin: its start waits for its filter to load (paging). */
	struct http_api_stream *stream;
	bool streaming, stream_begin;
	uint64_t bytes_in, bytes_out; /* TCP_INFO as last read */
	uint64_t done_in;	      /* bytes_in when the last request was done */
	uint64_t out_mark;	      /* bytes_out when the response last moved */
};

struct http_server {
	uv_loop_t *loop;
	const struct config *cfg;
	struct cmd_ctx *cmd;
	const char *version;
	void *arg;
	const char *(*not_ready)(void *arg);
	void (*server_stats)(void *arg, struct metrics_server *out);

	struct http_listener *ls;
	size_t nls;
	uv_timer_t sweep;
	bool sweep_init;
	unsigned pending_closes; /* handle close callbacks still to come before the free */
	bool starting;		 /* MHD messages are start-up errors */
	bool closed;		 /* a connection closed during this MHD_run() */

	struct http_api api;
	struct http_api_response resp;
	char problem[256]; /* the body of an answer worded here (http_fault_answer()) */

	LIST_HEAD(, http_conn) conns;
	LIST_HEAD(, http_conn) waiting; /* suspended until the log has their changes */
	LIST_HEAD(, http_conn) paging;	/* suspended until a paged-out filter is loaded */
	LIST_HEAD(, http_conn) slicing; /* suspended until the next loop turn (a gzip slice) */
	struct metrics_conns stats;	/* bytes_in/out: of closed connections only */
	uint64_t warned_at;
	bool warned;
};

/* ---------------------------------------------------------------------------------------- */
/* Connections */

/* Refresh c's byte counts from the kernel (never backwards). False if it cannot tell. */
static bool http_conn_tcp(struct http_conn *c)
{
	uint64_t in, out;

	if (metrics_tcp_bytes(c->fd, &in, &out))
		return false;
	if (in > c->bytes_in)
		c->bytes_in = in;
	if (out > c->bytes_out)
		c->bytes_out = out;
	return true;
}

/*
 * End c from outside MHD: shut the socket down, and give MHD a one-second timeout for it, so
 * MHD closes it even if it never reads from it again (a stalled connection would not see the
 * end of the stream). Not from within MHD_run(): the timeout moves c between MHD's lists.
 */
static void http_conn_end(struct http_conn *c)
{
	c->cut = true;
	shutdown(c->fd, SHUT_RDWR);
	MHD_set_connection_option(c->mhd, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
}

static struct http_conn *http_conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void http_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			       enum MHD_ConnectionNotificationCode code)
{
	struct http_server *h = cls;
	struct http_conn *c;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci;

		/* Without memory the handler finds no context and MHD closes the connection. */
		c = calloc(1, sizeof(*c));
		*socket_context = c;
		if (!c) {
			srv_log(SRV_LOG_ERR, "http: out of memory for a connection; closing it");
			return;
		}
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		c->fd = ci ? ci->connect_fd : -1;
		c->mhd = conn;
		/* The first request must arrive within request_timeout of the connection (the
		 * loop's time is brought up to now: the turn may have been long already). */
		uv_update_time(h->loop);
		c->request_ms = uv_now(h->loop);
		proto_buf_init(&c->body);
		LIST_INSERT_HEAD(&h->conns, c, link);
		h->stats.open++;
		h->stats.accepted++;
		return;
	}
	c = *socket_context;
	if (!c)
		return;
	http_conn_tcp(c);
	h->stats.bytes_in += c->bytes_in;
	h->stats.bytes_out += c->bytes_out;
	LIST_REMOVE(c, link);
	if (c->waiting || c->paging || c->slicing)
		LIST_REMOVE(c, wait_link);
	if (c->held)
		MHD_destroy_response(c->held);
	http_api_stream_free(c->stream);
	h->stats.open--;
	h->closed = true;
	proto_buf_free(&c->body);
	free(c);
	*socket_context = NULL;
}

/* Accept policy: max_connections over every listener (MHD counts per daemon). */
static enum MHD_Result http_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct http_server *h = cls;
	uint64_t now = uv_now(h->loop);

	(void)addr;
	(void)addrlen;
	if (h->stats.open < h->cfg->max_connections)
		return MHD_YES;
	h->stats.rejected++;
	if (!h->warned || now - h->warned_at >= HTTP_WARN_MS) {
		h->warned = true;
		h->warned_at = now;
		srv_log(SRV_LOG_WARNING,
			"http: max_connections (%" PRIu32 ") reached; refusing new connections",
			h->cfg->max_connections);
	}
	return MHD_NO;
}

/* A new request line: its clock starts (unless it is the connection's first request). */
static void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_server *h = cls;
	struct http_conn *c = http_conn_of(conn);

	(void)uri;
	if (c) {
		if (!c->request_ms)
			c->request_ms = uv_now(h->loop);
		c->in_head = true;
		c->in_request = false;
	}
	return c; /* the request's context: the handler gets it in *con_cls */
}

static void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct http_conn *c = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!c)
		return;
	c->request_ms = 0;
	c->in_head = false;
	c->in_request = false;
	c->responding = false;
	http_api_stream_free(c->stream);
	c->stream = NULL;
	c->streaming = c->stream_begin = false;
	http_conn_tcp(c);
	c->done_in = c->bytes_in;
	if (c->body.cap > HTTP_KEEP_BYTES || c->body.failed)
		proto_buf_free(&c->body);
	else
		proto_buf_reset(&c->body);
	*con_cls = NULL;
}

/* Paths reach the API still percent-encoded: it splits segments first, then decodes each,
 * so %2F stays inside a key and %00 does not end it. */
static size_t http_unescape_none(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	return strlen(s);
}

static void http_mhd_refusing(struct http_server *h);
static void http_run(struct http_listener *l);

static void http_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *h = cls;
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	/* At start-up these explain a failure (bind); later they are about one client. */
	srv_log(h->starting ? SRV_LOG_ERR : SRV_LOG_DEBUG, "http: %s", msg);
	if (!h->starting)
		http_mhd_refusing(h);
}

/* ---------------------------------------------------------------------------------------- */
/* Requests */

/* Add a header unless value is NULL. False when MHD has no memory for it. */
static bool http_header(struct MHD_Response *resp, const char *name, const char *value)
{
	return !value || MHD_add_response_header(resp, name, value) == MHD_YES;
}

/* The MHD response for r (its bytes copied), or NULL when MHD has no memory for it. */
static struct MHD_Response *http_response(const struct http_api_response *r)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(r->len, (void *)r->data, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return NULL;
	if (http_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type) &&
	    http_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow) &&
	    http_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, r->www_authenticate) &&
	    http_header(resp, MHD_HTTP_HEADER_LOCATION, r->location[0] ? r->location : NULL) &&
	    http_header(resp, MHD_HTTP_HEADER_CONNECTION, r->close ? "close" : NULL))
		return resp;
	MHD_destroy_response(resp);
	return NULL;
}

static enum MHD_Result http_send(struct MHD_Connection *conn, const struct http_api_response *r)
{
	struct MHD_Response *resp = http_response(r);
	enum MHD_Result ret = MHD_NO; /* MHD closes the connection */

	if (resp) {
		ret = MHD_queue_response(conn, r->status, resp);
		MHD_destroy_response(resp);
	}
	return ret;
}

static enum MHD_Result http_count_authorization(void *cls, enum MHD_ValueKind kind, const char *key,
						const char *value)
{
	unsigned *n = cls;

	(void)kind;
	(void)value;
	if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
		(*n)++;
	return MHD_YES;
}

/* The request as the API sees it, without its body. */
static struct http_api_request http_request(struct MHD_Connection *conn, const char *url,
					    const char *method)
{
	unsigned auth = 0;

	/* libmicrohttpd keeps every field line; its lookup gives the first of a kind. */
	MHD_get_connection_values(conn, MHD_HEADER_KIND, http_count_authorization, &auth);
	return (struct http_api_request){
	    .authorization_repeated = auth > 1,
	    .method = method,
	    .path = url,
	    .path_len = strlen(url),
	    .content_type =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
	    .content_encoding = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							    MHD_HTTP_HEADER_CONTENT_ENCODING),
	    .authorization =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
	    .q_prefix = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "prefix"),
	    .q_after = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after"),
	    .q_limit = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit"),
	    .q_detail = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "detail"),
	};
}

static enum MHD_Result http_reply(struct http_server *h, struct MHD_Connection *conn,
				  struct http_conn *c);

/* Its filter is loading (cmd->paging): suspended in h->paging until http_resume_paged. */
static enum MHD_Result http_suspend_paging(struct http_server *h, struct MHD_Connection *conn,
					   struct http_conn *c)
{
	c->paging = true;
	LIST_INSERT_HEAD(&h->paging, c, wait_link);
	MHD_suspend_connection(conn);
	return MHD_YES;
}

static enum MHD_Result http_answer(struct http_server *h, struct MHD_Connection *conn,
				   struct http_conn *c, const char *url, const char *method)
{
	struct http_api_request req = http_request(conn, url, method);

	req.body = c->body.data;
	req.body_len = c->body.len;
	/* The token can change on SIGHUP: take the current one. */
	h->api.token = h->cmd->token;
	h->cmd->wait_lsn = 0;
	req.flush_ticket = &c->flush_ticket;
	http_api_handle(&h->api, &req, &h->resp);
	if (h->cmd->paging || h->cmd->write_wait) {
		c->repeat = true; /* answered again once its filter is loaded, or written */
		return http_suspend_paging(h, conn, c);
	}
	return http_reply(h, conn, c);
}

/* Send h->resp now, or hold it until the log has made cmd->wait_lsn durable. */
static enum MHD_Result http_reply(struct http_server *h, struct MHD_Connection *conn,
				  struct http_conn *c)
{
	if (h->cmd->wait_lsn <= h->cmd->durable_lsn)
		return http_send(conn, &h->resp);
	/* The log cannot write: what it waits for is not durable until the log recovers, and
	 * it is not acknowledged meanwhile (503 log_unavailable, as a change refused now). */
	if (h->cmd->log_failed) {
		http_api_unlogged(&h->api, &h->resp);
		return http_send(conn, &h->resp);
	}
	/* It acknowledges a change (or owes a "present" to one) the log does not have yet. */
	c->held = http_response(&h->resp);
	if (!c->held)
		return MHD_NO;
	c->held_status = h->resp.status;
	c->held_route = h->resp.route;
	c->wait_lsn = h->cmd->wait_lsn;
	c->waiting = true;
	LIST_INSERT_HEAD(&h->waiting, c, wait_link);
	MHD_suspend_connection(conn);
	return MHD_YES;
}

uint64_t http_waiting(const struct http_server *h)
{
	const struct http_conn *c;
	uint64_t n = 0;

	LIST_FOREACH(c, &h->waiting, wait_link)
	n++;
	return n;
}

void http_resume_paged(struct http_server *h)
{
	struct http_conn *c;
	bool resumed = false;

	while ((c = LIST_FIRST(&h->paging))) {
		LIST_REMOVE(c, wait_link);
		c->paging = false;
		MHD_resume_connection(c->mhd);
		resumed = true;
	}
	for (size_t i = 0; resumed && i < h->nls; i++)
		if (h->ls[i].mhd)
			http_run(&h->ls[i]);
}

/*
 * The log failed before c's held response could go: what it waited for is not durable (and
 * will not be until the log recovers), so it is not acknowledged. The response becomes the 503
 * log_unavailable problem a change gets while the log cannot write; if even that cannot be
 * built, none is kept and the connection is closed when resumed (never the success).
 */
static void http_unlogged(struct http_server *h, struct http_conn *c)
{
	h->resp.route = c->held_route;
	h->resp.status = c->held_status;
	http_api_unlogged(&h->api, &h->resp);
	MHD_destroy_response(c->held);
	c->held = http_response(&h->resp);
	c->held_status = h->resp.status;
}

void http_release_waiting(struct http_server *h)
{
	struct http_conn *c, *next;
	bool resumed = false;

	for (c = LIST_FIRST(&h->waiting); c; c = next) {
		next = LIST_NEXT(c, wait_link);
		if (c->wait_lsn > h->cmd->durable_lsn) {
			if (!h->cmd->log_failed)
				continue;
			http_unlogged(h, c);
		}
		LIST_REMOVE(c, wait_link);
		c->waiting = false;
		c->resumed = true;
		MHD_resume_connection(c->mhd);
		resumed = true;
	}
	/* A resumed connection is served by the next MHD_run(): run it now rather than wait for
	 * its epoll descriptor to wake the loop. */
	for (size_t i = 0; resumed && i < h->nls; i++)
		if (h->ls[i].mhd)
			http_run(&h->ls[i]);
}

/*
 * Start a streaming bulk load: MHD_YES with c->stream set, or its answer sent (or, its filter
 * loading, the connection suspended until it is loaded: c->stream_begin).
 */
static enum MHD_Result http_stream_start(struct http_server *h, struct MHD_Connection *conn,
					 struct http_conn *c, const char *url, const char *method)
{
	struct http_api_request req = http_request(conn, url, method);

	h->api.token = h->cmd->token;
	h->api.gzip_max_bytes = h->cfg->max_gzip_bytes;
	h->api.gzip_max_ratio = h->cfg->max_gzip_ratio;
	c->stream_begin = false;
	if (http_api_stream_begin(&h->api, &req, &h->resp, &c->stream) == 0)
		return MHD_YES;
	if (h->cmd->paging) {
		c->stream_begin = true; /* started again once its filter is loaded */
		return http_suspend_paging(h, conn, c);
	}
	c->streaming = false;
	return http_send(conn, &h->resp);
}

/*
 * Whether a request announcing a body may send it: one refused whatever its body (no such
 * route, a wrong method, no token) is answered, and closed, before any of the body is read or
 * buffered, and before the limits are told to it.
 */
static bool http_admitted(struct http_server *h, struct MHD_Connection *conn, const char *url,
			  const char *method)
{
	struct http_api_request req = http_request(conn, url, method);

	h->api.token = h->cmd->token;
	return http_api_admit(&h->api, &req, &h->resp);
}

static enum MHD_Result http_refuse(struct http_server *h, struct MHD_Connection *conn,
				   const char *url, const char *method, enum http_api_refusal why)
{
	struct http_api_request req = {.method = method, .path = url, .path_len = strlen(url)};

	http_api_refuse(&h->api, &req, why, h->cfg->max_body_bytes, &h->resp);
	return http_send(conn, &h->resp);
}

/*
 * What can be wrong with a request's head. Those worded by proto/http_api.c
 * (http_api_refuse()) and those worded here, framing rules the API does not know of.
 */
enum http_fault {
	HTTP_FAULT_NONE,
	HTTP_FAULT_FRAMING,	/* 400: repeated Content-Length, or with Transfer-Encoding */
	HTTP_FAULT_TOO_LARGE,	/* 413: Content-Length over max_body_bytes (or 64 bits) */
	HTTP_FAULT_HEADER_NAME, /* 400: a field name that is not a token (RFC 9110 5.1) */
	HTTP_FAULT_HOST,	/* 400: HTTP/1.1 without exactly one Host (RFC 9112 3.2) */
	HTTP_FAULT_LENGTH,	/* 400: a Content-Length that is not a number (RFC 9112 6.3) */
	HTTP_FAULT_CODING,	/* 501: a Transfer-Encoding other than chunked (RFC 9112 6.1) */
	HTTP_FAULT_MALFORMED,	/* 400: libmicrohttpd refused the head, reason unknown here */
	HTTP_FAULT_STALLED,	/* 400: libmicrohttpd stopped reading the request */
};

/* The faults worded here: problem+json as proto/http_api.c words its own. */
static const struct {
	unsigned status;
	const char *type, *title, *detail;
} http_fault_text[] = {
    [HTTP_FAULT_HEADER_NAME] = {400, "bad_request", "Bad request",
				"malformed header field name (whitespace before the colon?)"},
    [HTTP_FAULT_HOST] = {400, "bad_request", "Bad request",
			 "an HTTP/1.1 request needs exactly one Host header"},
    [HTTP_FAULT_LENGTH] = {400, "bad_request", "Bad request", "invalid Content-Length"},
    [HTTP_FAULT_CODING] = {501, "not_implemented", "Not implemented",
			   "Transfer-Encoding other than chunked"},
    [HTTP_FAULT_MALFORMED] = {400, "bad_request", "Bad request", "malformed request"},
    [HTTP_FAULT_STALLED] = {400, "bad_request", "Bad request",
			    "the request cannot be read further (a line longer than the "
			    "server's buffer?)"},
};

/* The answer to a fault, in h->resp (also for those worded here, so one path sends all). */
static const struct http_api_response *http_fault_answer(struct http_server *h, const char *url,
							 const char *method, enum http_fault f)
{
	struct http_api_request req = {.method = method, .path = url, .path_len = strlen(url)};
	struct http_api_response *r = &h->resp;
	int n;

	if (f == HTTP_FAULT_FRAMING || f == HTTP_FAULT_TOO_LARGE) {
		http_api_refuse(&h->api, &req,
				f == HTTP_FAULT_FRAMING ? HTTP_REFUSE_FRAMING
							: HTTP_REFUSE_TOO_LARGE,
				h->cfg->max_body_bytes, r);
		return r;
	}
	n = snprintf(h->problem, sizeof(h->problem),
		     "{\"type\":\"%s\",\"title\":\"%s\",\"status\":%u,\"detail\":\"%s\"}\n",
		     http_fault_text[f].type, http_fault_text[f].title, http_fault_text[f].status,
		     http_fault_text[f].detail);
	r->status = http_fault_text[f].status;
	r->content_type = "application/problem+json";
	r->allow = NULL;
	r->www_authenticate = NULL;
	r->location[0] = '\0';
	r->close = true;
	r->data = h->problem;
	r->len = n > 0 && (size_t)n < sizeof(h->problem) ? (size_t)n : 0;
	return r;
}

/* The head's fields, as far as the checks below need them. */
struct http_head {
	unsigned content_length, transfer_encoding, host;
	bool bad_name;
	const char *coding; /* the first Transfer-Encoding */
};

/* tchar of RFC 9110 5.6.2: what a field name is made of. */
static bool http_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static enum MHD_Result http_scan_field(void *cls, enum MHD_ValueKind kind, const char *key,
				       const char *value)
{
	struct http_head *f = cls;

	(void)kind;
	/* libmicrohttpd 0.9.75 keeps "Content-Length " (space before the colon) as a field of
	 * its own, so a body it does not see would run as the next request (RFC 9112 5.1).
	 * Its MHD_OPTION_STRICT_FOR_CLIENT refuses that only at -1 (otherwise its most lenient
	 * level), and at 1 requires Host through the same path that answers twice (see
	 * http_mhd_refusing()): the checks are made here instead. */
	if (!*key)
		f->bad_name = true;
	for (const char *p = key; *p; p++)
		f->bad_name |= !http_tchar((unsigned char)*p);
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		f->content_length++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		if (!f->transfer_encoding++)
			f->coding = value ? value : "";
	} else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
		f->host++;
	}
	return MHD_YES;
}

/* "chunked", with optional whitespace around it, any case. */
static bool http_only_chunked(const char *v)
{
	size_t n;

	v += strspn(v, " \t");
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	return n == 7 && strncasecmp(v, "chunked", 7) == 0;
}

/* A Content-Length value: digits only. 0, -EINVAL, or -ERANGE past 64 bits. */
static int http_parse_length(const char *s, uint64_t *len)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*len = v;
	return 0;
}

/*
 * The head's syntax, whatever the route: field names, Host. The version is the request
 * line's ("HTTP/1.1"); libmicrohttpd takes any other HTTP/1.x above 1.0 as 1.1 too.
 */
static enum http_fault http_head_fault(struct MHD_Connection *conn, const char *version,
				       struct http_head *f)
{
	bool v11 = version && strncmp(version, "HTTP/1.", 7) == 0 && strcmp(version, "HTTP/1.0");

	memset(f, 0, sizeof(*f));
	MHD_get_connection_values(conn, MHD_HEADER_KIND, http_scan_field, f);
	if (f->bad_name)
		return HTTP_FAULT_HEADER_NAME;
	if (f->host > 1 || (v11 && f->host != 1))
		return HTTP_FAULT_HOST;
	return HTTP_FAULT_NONE;
}

/*
 * The body's framing, before any byte of it is read. *body: whether a body is announced (any
 * Transfer-Encoding, or a Content-Length but 0; also when the framing is bad).
 */
static enum http_fault http_framing_fault(struct http_server *h, struct MHD_Connection *conn,
					  const struct http_head *f, bool unbounded, bool *body)
{
	const char *cl;
	uint64_t len = 0;
	int rc;

	*body = f->content_length || f->transfer_encoding;
	if (f->content_length > 1 || (f->content_length && f->transfer_encoding))
		return HTTP_FAULT_FRAMING;
	/* Only chunked alone: anything else (gzip; chunked twice) libmicrohttpd would read to
	 * the end of the connection as the body. */
	if (f->transfer_encoding)
		return f->transfer_encoding == 1 && http_only_chunked(f->coding)
			   ? HTTP_FAULT_NONE
			   : HTTP_FAULT_CODING;
	if (!f->content_length)
		return HTTP_FAULT_NONE;
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	rc = http_parse_length(cl ? cl : "", &len);
	if (rc == -EINVAL)
		return HTTP_FAULT_LENGTH;
	*body = len > 0;
	return rc || (len > h->cfg->max_body_bytes && !unbounded) ? HTTP_FAULT_TOO_LARGE
								  : HTTP_FAULT_NONE;
}

/*
 * Send r on c's socket ourselves, then shut the socket down, when libmicrohttpd cannot be let
 * answer. Best effort (the socket's buffer is empty at these points: nothing else was sent
 * for this request); what does not fit is lost, the end of the stream says the rest.
 */
static void http_send_raw(struct http_conn *c, const struct http_api_response *r)
{
	char head[256], date[64];
	struct iovec iov[2];
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
	time_t now = time(NULL);
	struct tm tm;
	int n;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\n\r\n",
		     r->status, MHD_get_reason_phrase_for(r->status), date,
		     r->content_type ? r->content_type : "text/plain", r->len);
	if (n > 0 && (size_t)n < sizeof(head)) {
		iov[0] = (struct iovec){head, (size_t)n};
		iov[1] = (struct iovec){(void *)r->data, r->len};
		(void)sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	c->cut = true;
	shutdown(c->fd, SHUT_RDWR);
}

/*
 * libmicrohttpd logs just before it refuses a request itself. When that is in the middle of
 * its header checks (a malformed or too large Content-Length; its connection is between its
 * complete head and the handler's first call), 0.9.75 queues its answer twice: two header
 * blocks, the first one's Content-Length covering the second. Answer that request here, once,
 * and shut the socket down, so what libmicrohttpd then sends goes nowhere and it closes the
 * connection. Nothing of the request is run: the handler is never called for it.
 */
static void http_mhd_refusing(struct http_server *h)
{
	struct http_conn *c;

	LIST_FOREACH(c, &h->conns, link)
	{
		const union MHD_ConnectionInfo *ci;
		const char *url, *method;
		struct http_head f;
		enum http_fault fault;
		bool body;

		if (!c->in_head || c->cut)
			continue;
		ci = MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
		if (!ci || !ci->header_size)
			continue; /* still reading its head: its refusals are sent once */
		fault = http_head_fault(c->mhd, NULL, &f);
		if (!fault)
			fault = http_framing_fault(h, c->mhd, &f, false, &body);
		if (!fault)
			fault = HTTP_FAULT_MALFORMED;
		/* The URL and method are not known outside the handler: the problem's route is
		 * not needed for the words, only for /metrics. */
		url = "";
		method = "";
		http_send_raw(c, http_fault_answer(h, url, method, fault));
		srv_log(SRV_LOG_DEBUG, "http: request refused in its head; answered and closed");
		return;
	}
}

/* Queue the response that waited for the log (http_answer). None when the log failed and its
 * refusal could not be built: MHD_NO, and MHD closes the connection. */
static enum MHD_Result http_send_held(struct MHD_Connection *conn, struct http_conn *c)
{
	enum MHD_Result ret = MHD_NO;

	if (!c->held) {
		c->resumed = false;
		return ret;
	}
	ret = MHD_queue_response(conn, c->held_status, c->held);
	MHD_destroy_response(c->held);
	c->held = NULL;
	c->resumed = false;
	return ret;
}

/*
 * The headers of a new request are in: start c's state for it, then refuse it at once if its
 * head, its token or its framing is wrong, or start a streaming bulk load. Otherwise MHD_YES:
 * the answer comes with the last call.
 */
static enum MHD_Result http_request_begin(struct http_server *h, struct MHD_Connection *conn,
					  struct http_conn *c, const char *url, const char *method,
					  const char *version)
{
	enum http_fault fault, framing;
	struct http_head f;
	bool body;

	c->in_head = false;
	c->in_request = true;
	c->body_bytes = 0;
	c->too_large = false;
	c->no_memory = false;
	proto_buf_reset(&c->body);
	/* A malformed head is refused whatever the route (where its body ends, if it has one, is
	 * not known). Then a request refused whatever its body is answered, then bad framing. A
	 * request without a body is answered in full later (the connection stays open). */
	fault = http_head_fault(conn, version, &f);
	if (fault)
		return http_send(conn, http_fault_answer(h, url, method, fault));
	/* A streaming bulk load's body is not bounded by max_body_bytes (nor kept). */
	struct http_api_request head = http_request(conn, url, method);
	c->streaming = http_api_stream_wanted(&head);
	framing = http_framing_fault(h, conn, &f, c->streaming, &body);
	if (body && !http_admitted(h, conn, url, method))
		return http_send(conn, &h->resp);
	if (framing)
		return http_send(conn, http_fault_answer(h, url, method, framing));
	if (c->streaming)
		return http_stream_start(h, conn, c, url, method);
	/* Even without a body, answer on the next call: a response queued now is an "early" one
	 * to libmicrohttpd, which then closes the connection after it. */
	return MHD_YES;
}

/*
 * A piece of body (*size bytes at data): fed to c's stream, or kept in c->body up to
 * max_body_bytes (past it, or without memory, read on and dropped; the answer says so).
 * *size is left at what MHD is to give again.
 */
static enum MHD_Result http_take_body(struct http_server *h, struct MHD_Connection *conn,
				      struct http_conn *c, const char *data, size_t *size)
{
	size_t n = *size;

	*size = 0;
	c->body_bytes += n;
	if (c->stream) {
		size_t took = http_api_stream_feed(&h->api, c->stream, data, n);

		/* What it did not take, libmicrohttpd keeps and gives again first. */
		*size = n - took;
		c->fed = true;
		/* Its filter was paged out under it: the rest of the body waits for it. */
		if (h->cmd->paging)
			return http_suspend_paging(h, conn, c);
		/* A gzip slice done: the rest of the piece on the next loop turn, other clients
		 * served meanwhile. */
		if (took < n) {
			c->slicing = true;
			LIST_INSERT_HEAD(&h->slicing, c, wait_link);
			MHD_suspend_connection(conn);
		}
		return MHD_YES;
	}
	if (c->too_large || c->no_memory)
		return MHD_YES;
	if (c->body_bytes > h->cfg->max_body_bytes) {
		/* Keep reading (the client is sending it anyway) but store nothing. */
		c->too_large = true;
		proto_buf_free(&c->body);
		return MHD_YES;
	}
	proto_buf_append(&c->body, data, n);
	if (c->body.failed) {
		c->no_memory = true;
		proto_buf_free(&c->body);
	}
	return MHD_YES;
}

/*
 * MHD calls this once when the headers are in (token and framing checked, refused at once),
 * then once per piece of body, then once more with *upload_data_size 0: the answer.
 */
static enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
				       const char *method, const char *version,
				       const char *upload_data, size_t *upload_data_size,
				       void **con_cls)
{
	struct http_server *h = cls;
	struct http_conn *c = *con_cls;

	if (!c)
		return MHD_NO; /* no memory for the connection */
	if (c->stream_begin)
		return http_stream_start(h, conn, c, url, method); /* its filter is loaded now */
	if (c->repeat) {
		/* Its filter was loading (http_answer): answer the request now. */
		c->repeat = false;
		return http_answer(h, conn, c, url, method);
	}
	if (c->resumed)
		return http_send_held(conn, c);
	if (!c->in_request)
		return http_request_begin(h, conn, c, url, method, version);
	if (*upload_data_size)
		return http_take_body(h, conn, c, upload_data, upload_data_size);
	/* As of the last TCP_INFO reading (one syscall per request is enough): at worst the
	 * first sweep takes earlier bytes for the response moving, and restarts its clock once. */
	c->out_mark = c->bytes_out;
	c->responding = true;
	if (c->stream) {
		/* Its filter is loading: called again (here) once it is loaded. */
		if (http_api_stream_end(&h->api, c->stream, &h->resp))
			return http_suspend_paging(h, conn, c);
		c->stream = NULL;
		return http_reply(h, conn, c);
	}
	if (c->too_large)
		return http_send(conn, http_fault_answer(h, url, method, HTTP_FAULT_TOO_LARGE));
	if (c->no_memory)
		return http_refuse(h, conn, url, method, HTTP_REFUSE_NO_MEMORY);
	return http_answer(h, conn, c, url, method);
}

/* ---------------------------------------------------------------------------------------- */
/* /metrics */

static void http_metrics(void *arg, struct proto_buf *out)
{
	struct http_server *h = arg;
	struct metrics_server server;
	struct metrics_source src = {
	    .cmd = h->cmd,
	    .version = h->version ? h->version : "unknown",
	    .not_ready = h->not_ready ? h->not_ready(h->arg) : NULL,
	    .server = &server,
	    .http = h->stats,
	    .api = &h->api,
	};

	memset(&server, 0, sizeof(server));
	if (h->server_stats)
		h->server_stats(h->arg, &server);
	/* Closed connections' bytes, plus what the open ones have moved so far. */
	struct http_conn *c;

	LIST_FOREACH(c, &h->conns, link)
	{
		http_conn_tcp(c);
		src.http.bytes_in += c->bytes_in;
		src.http.bytes_out += c->bytes_out;
	}
	metrics_render(&src, out);
}

static const char *http_not_ready(void *arg)
{
	struct http_server *h = arg;

	return h->not_ready ? h->not_ready(h->arg) : NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* The loop */

static void http_on_timer(uv_timer_t *t);
static void http_on_idle(uv_idle_t *i);

/*
 * Let MHD do its work, then wake up when it next needs to. After a connection closed, run
 * again on the next loop iteration whatever MHD_get_timeout() says: a daemon that stopped
 * accepting (at its connection limit, or out of descriptors) only puts its listening socket
 * back into its epoll set at the start of an MHD_run(), and nothing else would wake it.
 *
 * "At once" is an idle handle, never a 0 ms timer: libuv before 1.45 runs a timer started
 * from its own callback again in the same pass when it is already due, without polling or
 * updating its clock, so a daemon that keeps asking to run at once (libmicrohttpd does, for
 * a connection it no longer reads: see http_on_sweep()) would hold the loop: no other
 * client, timer or signal served. An idle handle runs once per loop iteration.
 */
static void http_run(struct http_listener *l)
{
	struct http_server *h = l->srv;
	MHD_UNSIGNED_LONG_LONG ms;
	struct http_conn *c;
	bool timeout;

	/* The streams that inflated a slice on an earlier turn take their next one now. */
	while ((c = LIST_FIRST(&h->slicing))) {
		LIST_REMOVE(c, wait_link);
		c->slicing = false;
		MHD_resume_connection(c->mhd);
	}
	h->closed = false;
	MHD_run(l->mhd);
	timeout = MHD_get_timeout(l->mhd, &ms) == MHD_YES;
	if (!LIST_EMPTY(&h->slicing)) {
		/* Every daemon runs on the next turn: one of them holds each resumed stream. */
		for (size_t i = 0; i < h->nls; i++)
			if (h->ls[i].handles) {
				uv_timer_stop(&h->ls[i].timer);
				uv_idle_start(&h->ls[i].idle, http_on_idle);
			}
		return;
	}
	if (h->closed || (timeout && ms == 0)) {
		uv_timer_stop(&l->timer);
		uv_idle_start(&l->idle, http_on_idle);
		return;
	}
	uv_idle_stop(&l->idle);
	if (timeout)
		uv_timer_start(&l->timer, http_on_timer, ms, 0);
	else
		uv_timer_stop(&l->timer);
}

static void http_on_poll(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	http_run(p->data);
}

static void http_on_timer(uv_timer_t *t)
{
	http_run(t->data);
}

static void http_on_idle(uv_idle_t *i)
{
	http_run(i->data);
}

/*
 * Whether MHD has stopped reading c: input waits in the kernel, none of it was read since the
 * last sweep, and nothing of ours waits to be sent (else the client is just not reading our
 * answer, request_timeout's case). libmicrohttpd 0.9.75 gets there when a line it must hold
 * whole (a chunk size with its extensions) outgrows its read buffer (HTTP_CONN_MEMORY): it then
 * neither reads nor answers nor closes, and asks to run again at once, forever.
 */
static bool http_conn_stalled(struct http_conn *c, bool tcp_ok)
{
	int inq = 0, outq = 0;
	uint64_t read;

	if (!tcp_ok || ioctl(c->fd, SIOCINQ, &inq) || inq <= 0 || ioctl(c->fd, SIOCOUTQ, &outq) ||
	    outq > 0) {
		c->stalled = false;
		return false;
	}
	read = c->bytes_in - (uint64_t)inq; /* bytes MHD has read */
	if (c->stalled && read == c->read_mark)
		return true;
	c->stalled = true;
	c->read_mark = read;
	return false;
}

/* Whether some daemon asks to run again at once (idle handle on): the sign of a stall. */
static bool http_spinning(const struct http_server *h)
{
	for (size_t i = 0; i < h->nls; i++)
		if (h->ls[i].handles && uv_is_active((const uv_handle_t *)&h->ls[i].idle))
			return true;
	return false;
}

/*
 * Once a second: end connections MHD no longer reads (answered 400 when no answer was
 * started), and cut off requests not done within request_timeout. A stall is looked for only
 * while MHD asks to run at once, as it does for as long as one lasts; it is found within two
 * sweeps, whatever the timeouts.
 *
 * A request's clock starts at the connection, or at the first byte after the previous request
 * was done (seen here, so up to a second late; MHD itself tells only of a complete request
 * line, and a client trickling one must not go untimed), and restarts whenever its response
 * moves (the client reads it, however slowly). Bytes that came with the previous request (a
 * pipelined partial one) are not seen as new: such a connection is closed by idle_timeout
 * instead.
 */
static void http_on_sweep(uv_timer_t *t)
{
	struct http_server *h = t->data;
	uint64_t limit = (uint64_t)h->cfg->request_timeout * 1000, now = uv_now(h->loop);
	bool spinning = http_spinning(h);
	struct timespec ts;

	/* The status page's history: a sample a second (HTTP_SWEEP_MS). */
	clock_gettime(CLOCK_REALTIME, &ts);
	http_api_history_sample(&h->api,
				(uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	if (!limit && !spinning)
		return;
	struct http_conn *c;

	LIST_FOREACH(c, &h->conns, link)
	{
		bool tcp_ok;

		if (c->cut)
			continue;
		tcp_ok = http_conn_tcp(c);
		/* A stream inflating its gzip a slice a turn reads its socket only as its buffer
		 * empties, which under a slow decode can take seconds: it is not stalled. */
		if (c->fed) {
			c->fed = false;
			c->stalled = false;
		} else if (spinning && http_conn_stalled(c, tcp_ok)) {
			srv_log(SRV_LOG_INFO,
				"http: a request libmicrohttpd does not read further "
				"(a line longer than its buffer?); closing the connection");
			if (c->in_request && !c->responding &&
			    !MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_HTTP_STATUS))
				http_send_raw(c, http_fault_answer(h, "", "", HTTP_FAULT_STALLED));
			http_conn_end(c);
			continue;
		}
		if (!limit)
			continue;
		/* Two bytes allowed: a CRLF after a request is ignored (RFC 9112 2.2). */
		if (!c->request_ms && c->bytes_in > c->done_in + 2)
			c->request_ms = now;
		if (c->responding && c->bytes_out > c->out_mark) {
			c->out_mark = c->bytes_out;
			c->request_ms = now;
		}
		if (!c->request_ms || now - c->request_ms < limit)
			continue;
		srv_log(SRV_LOG_INFO,
			"http: request not done after request_timeout (%" PRIu32
			" s); closing the connection",
			h->cfg->request_timeout);
		/* MHD owns the descriptor: shut it down, and MHD sees the end and closes it. */
		http_conn_end(c);
	}
}

/* One close callback less to wait for; the last one frees the server. */
static void http_release(struct http_server *h)
{
	if (h->pending_closes && --h->pending_closes)
		return;
	http_api_free(&h->api);
	http_api_response_free(&h->resp);
	free(h->ls);
	free(h);
}

static void http_on_listener_closed(uv_handle_t *handle)
{
	http_release(((struct http_listener *)handle->data)->srv);
}

static void http_on_sweep_closed(uv_handle_t *handle)
{
	http_release(handle->data);
}

void http_server_stop(struct http_server *h)
{
	if (!h)
		return;
	/* MHD must not be stopped with suspended connections: resume them (their responses
	 * are not sent; the connections close with the daemon). */
	while (!LIST_EMPTY(&h->waiting)) {
		struct http_conn *c = LIST_FIRST(&h->waiting);
		LIST_REMOVE(c, wait_link);
		c->waiting = false;
		MHD_resume_connection(c->mhd);
	}
	while (!LIST_EMPTY(&h->paging)) {
		struct http_conn *c = LIST_FIRST(&h->paging);
		LIST_REMOVE(c, wait_link);
		c->paging = false;
		c->repeat = false;
		MHD_resume_connection(c->mhd);
	}
	while (!LIST_EMPTY(&h->slicing)) {
		struct http_conn *c = LIST_FIRST(&h->slicing);
		LIST_REMOVE(c, wait_link);
		c->slicing = false;
		MHD_resume_connection(c->mhd);
	}
	for (size_t i = 0; i < h->nls; i++) {
		struct http_listener *l = &h->ls[i];

		/* First stop watching the epoll descriptor, while it is still open. */
		if (l->handles) {
			uv_close((uv_handle_t *)&l->poll, http_on_listener_closed);
			uv_close((uv_handle_t *)&l->timer, http_on_listener_closed);
			uv_close((uv_handle_t *)&l->idle, http_on_listener_closed);
			h->pending_closes += 3;
		}
		if (l->mhd)
			MHD_stop_daemon(l->mhd);
		l->mhd = NULL;
	}
	if (h->sweep_init) {
		uv_close((uv_handle_t *)&h->sweep, http_on_sweep_closed);
		h->pending_closes++;
	}
	if (!h->pending_closes)
		http_release(h);
}

/* Start one daemon on addr:port and hook it to the loop. */
static int http_listen(struct http_server *h, struct http_listener *l, const char *addr)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
	} sa;
	unsigned port = h->cfg->http_port;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	const union MHD_DaemonInfo *di;
	char where[INET6_ADDRSTRLEN + 16];
	int rc;

	if (uv_ip4_addr(addr, (int)port, &sa.in4) == 0) {
		snprintf(where, sizeof(where), "%s:%u", addr, port);
	} else if (uv_ip6_addr(addr, (int)port, &sa.in6) == 0) {
		flags |= MHD_USE_IPv6;
		snprintf(where, sizeof(where), "[%s]:%u", addr, port);
	} else {
		srv_log(SRV_LOG_ERR, "http: bind %s: not an IPv4 or IPv6 address", addr);
		return -EINVAL;
	}
	l->srv = h;
	h->starting = true;
	errno = 0;
	l->mhd = MHD_start_daemon(
	    flags, (uint16_t)port, http_on_accept, h, http_on_request, h,
	    MHD_OPTION_EXTERNAL_LOGGER, http_on_mhd_log, h, MHD_OPTION_SOCK_ADDR, &sa.sa,
	    /* One over ours: the accept policy refuses first, closing at once, instead of
	     * MHD leaving connections in the backlog while it is at its limit. */
	    MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)h->cfg->max_connections + (h->cfg->max_connections < UINT_MAX),
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->cfg->idle_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, HTTP_BACKLOG, MHD_OPTION_NOTIFY_CONNECTION,
	    http_on_connection, h, MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, h,
	    MHD_OPTION_URI_LOG_CALLBACK, http_on_uri, h, MHD_OPTION_UNESCAPE_CALLBACK,
	    http_unescape_none, h, MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	rc = errno;
	h->starting = false;
	if (!l->mhd) {
		srv_log(SRV_LOG_ERR, "http: cannot listen on %s%s%s", where, rc ? ": " : "",
			rc ? strerror(rc) : "");
		return rc ? -rc : -EIO;
	}
	di = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di) {
		srv_log(SRV_LOG_ERR, "http: %s: no epoll descriptor", where);
		return -EIO;
	}
	/* The daemon is stopped by http_server_stop() if anything below fails. */
	rc = uv_poll_init(h->loop, &l->poll, di->epoll_fd);
	if (rc) {
		srv_log(SRV_LOG_ERR, "http: %s: %s", where, uv_strerror(rc));
		return rc;
	}
	uv_timer_init(h->loop, &l->timer); /* cannot fail */
	uv_idle_init(h->loop, &l->idle);   /* cannot fail */
	l->poll.data = l;
	l->timer.data = l;
	l->idle.data = l;
	l->handles = true;
	rc = uv_poll_start(&l->poll, UV_READABLE, http_on_poll);
	if (rc) {
		srv_log(SRV_LOG_ERR, "http: %s: %s", where, uv_strerror(rc));
		return rc;
	}
	http_run(l);
	srv_log(SRV_LOG_NOTICE, "listening on %s (HTTP)", where);
	return 0;
}

int http_server_start(const struct http_server_options *opt, struct http_server **out)
{
	const struct config *cfg = opt->cfg;
	char list[sizeof(cfg->bind)], *save = NULL;
	struct http_api_hooks hooks;
	struct http_server *h;
	size_t n = 1;
	int rc;

	*out = NULL;
	if (cfg->http_port == 0) {
		srv_log(SRV_LOG_INFO, "http_port is 0: HTTP disabled");
		return 0;
	}
	h = calloc(1, sizeof(*h));
	for (const char *p = cfg->bind; *p; p++)
		n += *p == ',';
	if (h)
		h->ls = calloc(n, sizeof(*h->ls));
	if (!h || !h->ls) {
		free(h);
		srv_log(SRV_LOG_ERR, "http: out of memory");
		return -ENOMEM;
	}
	h->loop = opt->loop;
	h->cfg = cfg;
	h->cmd = opt->cmd;
	h->version = opt->version;
	h->arg = opt->arg;
	h->not_ready = opt->not_ready;
	h->server_stats = opt->server_stats;
	hooks =
	    (struct http_api_hooks){.arg = h, .not_ready = http_not_ready, .metrics = http_metrics};
	http_api_init(&h->api, opt->cmd, &hooks);
	http_api_response_init(&h->resp);

	rc = uv_timer_init(h->loop, &h->sweep);
	if (rc)
		goto fail;
	h->sweep.data = h;
	h->sweep_init = true;
	rc = uv_timer_start(&h->sweep, http_on_sweep, HTTP_SWEEP_MS, HTTP_SWEEP_MS);
	if (rc)
		goto fail;

	snprintf(list, sizeof(list), "%s", cfg->bind);
	for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		rc = http_listen(h, &h->ls[h->nls++], a);
		if (rc)
			goto fail;
	}
	*out = h;
	return 0;

fail:
	http_server_stop(h);
	return rc;
}
