/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end: libmicrohttpd driven by the daemon's libuv loop, answering through
 * proto/http_api.h (routes, JSON, problem+json) on the loop thread, so handlers call the same
 * command layer as text and RESP with no locks.
 *
 * Driving. One MHD daemon per address of `bind`, each started with MHD_USE_EPOLL and no
 * internal thread: a uv_poll_t watches the daemon's epoll descriptor
 * (MHD_DAEMON_INFO_EPOLL_FD) and calls MHD_run(); a uv_timer_t is re-armed after every
 * MHD_run() from MHD_get_timeout() (timeouts), and a uv_idle_t runs it on the next loop
 * iteration when MHD asks to run again at once (work it has buffered). Never a 0 ms timer:
 * libuv before 1.45 runs such a timer again in the same pass, and would not leave it.
 *
 * Limits, each set explicitly (libmicrohttpd 0.9.75 has no body limit, no timeout and allows
 * 1020 connections by default):
 *   max_body_bytes   a Content-Length over it is answered 413 at once, before any byte of
 *                    the body is read, and the connection is closed; a chunked body is counted
 *                    while it streams in and dropped (not stored) past the limit, then 413.
 *                    Bodies are held in memory up to the limit, never beyond.
 *   max_connections  HTTP connections open at once, over all addresses (accept policy; also
 *                    MHD_OPTION_CONNECTION_LIMIT); more are accepted and closed at once. This
 *                    budget is separate from the text/RESP port's.
 *   idle_timeout     MHD_OPTION_CONNECTION_TIMEOUT: a connection with no traffic that long is
 *                    closed (0 = never).
 *   request_timeout  a request (from the connection's start for the first one, else from its
 *                    request line) not answered and sent within it is cut off: the socket is
 *                    shut down and MHD closes the connection (0 = never). Slow senders and
 *                    clients that never read their response both end this way.
 *   HTTP_CONN_MEMORY MHD_OPTION_CONNECTION_MEMORY_LIMIT: the request line and headers must fit
 *                    in it (MHD itself answers 414 or 431 otherwise); keys longer than fit in a
 *                    URL (about 32000 bytes, percent-encoded) go in a POST body.
 *   stalls           a connection MHD no longer reads (input waiting, none of it read for a
 *                    second, nothing to send) is answered 400 and closed within about two
 *                    seconds, whatever the timeouts. libmicrohttpd 0.9.75 stops so on a
 *                    chunk-size line (size and extensions) longer than what HTTP_CONN_MEMORY
 *                    leaves its read buffer (32460 bytes did, 32500 not), asking to run again
 *                    at once for as long as it lasts.
 *
 * No guessing where a body, or the next request, starts (RFC 9112): each of these is refused
 * as soon as the head is in, and the connection closed. A field name that is not a token
 * (whitespace before the colon: libmicrohttpd 0.9.75 keeps "Content-Length " as a field of its
 * own), or HTTP/1.1 without exactly one Host, whatever the route: 400. Then, after the checks
 * of route, method and token: repeated Content-Length, or Content-Length with
 * Transfer-Encoding: 400; a Transfer-Encoding other than chunked alone: 501.
 *
 * A Content-Length that is not a number (or past 64 bits) libmicrohttpd refuses itself,
 * within its own header checks, where 0.9.75 queues its answer twice (two header blocks, the
 * first one's length covering the second). The glue sees that refusal coming (MHD logs it
 * first): it sends the one answer itself (400, or 413 past 64 bits) and shuts the socket down,
 * so MHD's goes nowhere; the request is not run. What else libmicrohttpd refuses by itself (a
 * malformed request line, headers over HTTP_CONN_MEMORY: 400, 414, 431) gets its own short
 * HTML answer. Neither those nor the answers worded in http.c rather than proto/http_api.c
 * (field name, Host, Content-Length, transfer coding, stall) are counted in /metrics.
 *
 * The loop thread only. max_body_bytes, request_timeout and max_connections (up to its value
 * at start, MHD's own limit) are read from the live config at each use, so SIGHUP changes
 * them; bind, http_port and idle_timeout are fixed at start.
 */
#ifndef BLOSSOMD_SERVER_HTTP_H
#define BLOSSOMD_SERVER_HTTP_H

#include <uv.h>

#include "conf/config.h"
#include "server/metrics.h"
#include "proto/command.h"

/*
 * Per-connection memory of libmicrohttpd (request line, headers, read buffer): URLs of up to
 * about 32000 bytes fit. It is zeroed for every request, so more costs time on every request
 * (64 KiB: about 1 µs more each, measured).
 */
#define HTTP_CONN_MEMORY (32 * 1024)

struct http_server;

struct http_server_options {
	uv_loop_t *loop;
	const struct config *cfg; /* live: must outlive the server */
	struct cmd_ctx *cmd;
	const char *version; /* for blossomd_build_info */
	void *arg;	     /* passed to the hooks */
	/* /readyz: NULL while ready, else why not (static text). May be NULL. */
	const char *(*not_ready)(void *arg);
	/* /metrics: what the rest of the server knows (text/RESP port, persistence). May be
	 * NULL. */
	void (*server_stats)(void *arg, struct metrics_server *out);
};

/*
 * Start serving on cfg->http_port at every address of cfg->bind. With http_port 0, does
 * nothing: returns 0 with *out NULL. Returns 0 with *out set, or a negative errno with every
 * step undone (the reason logged: "http: bind 127.0.0.1:8674: Address already in use").
 */
int http_server_start(const struct http_server_options *opt, struct http_server **out);

/*
 * Stop: close the loop handles, then every connection and listener (MHD_stop_daemon(); a
 * request in progress is dropped). The memory is released by the handles' close callbacks,
 * so the loop must run once more (srv_free()'s drain does). NULL is ignored; h must not be
 * used afterwards.
 */
void http_server_stop(struct http_server *h);

/* Resume the requests whose responses waited for the log: those whose wait_lsn the command
 * layer's durable_lsn now reaches (their responses are then sent); while the log has failed
 * (cmd_ctx.log_failed), every one, its response replaced with the 503 log_unavailable problem
 * (what it waited for is not durable, so it is not acknowledged). */
void http_release_waiting(struct http_server *h);
/* A page-in ended: the requests held for it are answered again. */
void http_resume_paged(struct http_server *h);

/* Requests whose responses wait for the log now. */
uint64_t http_waiting(const struct http_server *h);

#endif /* BLOSSOMD_SERVER_HTTP_H */
