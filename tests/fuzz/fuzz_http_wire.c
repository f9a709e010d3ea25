/* SPDX-License-Identifier: MIT */
/*
 * Raw bytes to the real HTTP front end: server/http.c and libmicrohttpd, started once in this
 * process on a loopback port of a libuv loop of our own, as the daemon runs them. Each input
 * is written whole to a new connection; the loop runs until the front end closes it, or sends
 * nothing more while it is not busy (no more asking to run at once: an answered keep-alive
 * connection, or one waiting for the rest of a request). Fails (abort) when:
 *   - that takes over HANG_MS: the front end keeps busy with a connection it does not end
 *     (libmicrohttpd stalled on it and the glue does not see it);
 *   - what came back is not a sequence of well-formed responses: each a status line, headers,
 *     and as many body bytes as its Content-Length says, the next one starting right after
 *     (two header blocks for one request, one's length covering the other, are caught
 *     here). Skipped when the input holds "HEAD" (a HEAD answer announces a body it has not);
 *   - the loop does not come back at all (libFuzzer's -timeout): a front end holding it.
 * Answers may stop short at the end (a connection closed while answering); filters created by
 * one input stay for the next ones. The connection is then reset (libmicrohttpd 0.9.75 may not
 * see a plain close of an answered keep-alive connection until idle_timeout).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "conf/config.h"
#include "tests/fuzz/fuzz_common.h"
#include "server/http.h"
#include "server/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An input's connection must be done by then (a stall is ended within 2 sweeps; HTTP_SWEEP_MS
 * is short in this build). */
#define HANG_MS 5000
/* Done when nothing came for this long while the front end was not busy. */
#define QUIET_MS 10
/* Answers kept per input for the check; more are read and dropped. */
#define OUT_MAX (1u << 20)

static uv_loop_t loop;
static struct config cfg;
static struct cmd_ctx ctx;
static struct http_server *srv;
static char out[OUT_MAX];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A loopback port free a moment ago. */
static uint16_t free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		abort();
	close(fd);
	return ntohs(a.sin_port);
}

static void start(void)
{
	struct http_server_options opt = {
	    .loop = &loop, .cfg = &cfg, .cmd = &ctx, .version = "fuzz"};

	signal(SIGPIPE, SIG_IGN);
	srv_log_set_level(SRV_LOG_EMERG); /* quiet: a client's faults are logged */
	conf_defaults(&cfg);
	cfg.http_port = free_port();
	cfg.max_body_bytes = 64 * 1024;
	cfg.max_connections = 16;
	cfg.request_timeout = 60;
	cfg.idle_timeout = 60;
	fuzz_ctx_init(&ctx);
	if (uv_loop_init(&loop) || http_server_start(&opt, &srv) || !srv)
		abort();
}

static int connect_port(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* Loopback: the handshake completes in the backlog, before the loop accepts. */
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		abort();
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/*
 * Run the loop once, then wait a little for it or fd to have something. False if nothing
 * happened: the loop had nothing due, and neither it nor fd became ready.
 */
static bool step(int fd, short events)
{
	struct pollfd p[2] = {{.fd = fd, .events = events},
			      {.fd = uv_backend_fd(&loop), .events = POLLIN}};
	int t;

	uv_run(&loop, UV_RUN_NOWAIT);
	t = uv_backend_timeout(&loop);
	if (t == 0)
		return true; /* the front end asks to run again at once */
	return poll(p, 2, t < 0 || t > 5 ? 5 : t) > 0;
}

/* Read what is there; true at the end of the stream (or a reset). */
static bool drain(int fd, size_t *n)
{
	for (;;) {
		char tmp[16384];
		ssize_t got = recv(fd, tmp, sizeof(tmp), 0);

		if (got == 0 ||
		    (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return true;
		if (got < 0)
			return false;
		if (*n < OUT_MAX) {
			size_t k = (size_t)got < OUT_MAX - *n ? (size_t)got : OUT_MAX - *n;

			memcpy(out + *n, tmp, k);
			*n += k;
		}
	}
}

/* The value of a header in head[0..hlen), or NULL. */
static const char *header(const char *head, size_t hlen, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = memmem(head, hlen, "\r\n", 2); p && p + 2 + nl < head + hlen;
	     p = memmem(p + 2, hlen - (size_t)(p + 2 - head), "\r\n", 2))
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':')
			return p + 3 + nl;
	return NULL;
}

/* out[0..n) must be whole responses, one after the other (the last may be cut short). */
static void check_responses(size_t n)
{
	size_t at = 0;

	while (at < n) {
		const char *r = out + at, *end, *cl;
		size_t left = n - at, hlen, blen = 0;
		int status;

		if (left < 13)
			return; /* cut short */
		if (memcmp(r, "HTTP/1.", 7) != 0 || r[8] != ' ' || r[12] != ' ')
			abort(); /* not a status line where a response must start */
		status = atoi(r + 9);
		if (status < 100 || status > 599)
			abort();
		end = memmem(r, left, "\r\n\r\n", 4);
		if (!end)
			return;
		hlen = (size_t)(end - r) + 4;
		cl = header(r, hlen, "Content-Length");
		if (cl && status >= 200 && status != 204 && status != 304)
			blen = strtoul(cl, NULL, 10);
		if (hlen + blen > left)
			return;
		at += hlen + blen;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	size_t sent = 0, n = 0, seen = 0;
	bool closed = false;
	int64_t until, quiet_since;
	int fd;

	if (!srv)
		start();
	fd = connect_port(cfg.http_port);
	until = now_ms() + HANG_MS;
	while (sent < size && !closed) {
		ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL);

		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* the front end closed the connection before the end of the input */
		closed = drain(fd, &n);
		step(fd, POLLIN | POLLOUT);
		if (now_ms() > until)
			abort(); /* it neither reads nor closes */
	}
	/* Until the front end closes the connection, or is quiet and not busy: an answered
	 * keep-alive connection, or one waiting for more of a request, is left open. */
	quiet_since = now_ms();
	while (!closed) {
		bool busy = step(fd, POLLIN);

		closed = drain(fd, &n);
		if (n != seen || busy) {
			seen = n;
			quiet_since = now_ms();
		} else if (now_ms() - quiet_since >= QUIET_MS) {
			break;
		}
		if (now_ms() > until)
			abort(); /* held: a request that neither ends nor lets the loop rest */
	}
	/* A reset, which libmicrohttpd notices in any state: the connection is freed at once. */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	close(fd);
	for (int i = 0; i < 3; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	if (!memmem(data, size, "HEAD", 4))
		check_responses(n);
	return 0;
}
