/* SPDX-License-Identifier: MIT */
/*
 * Hostile clients against the real daemon (issue #7): slowloris on the text/RESP port and on
 * HTTP, clients that pipeline without ever reading, and connection floods past
 * max_connections. Each case asserts that a well-behaved client keeps being answered within a
 * stated bound meanwhile, that every hostile connection is closed when the configuration says
 * (not before, not much after), that a slot it held is given back, and that the daemon serves
 * normally afterwards.
 *
 * Slow connections are driven from one thread with poll() (struct trickle), the well-behaved
 * client runs in another and times every exchange (struct prober). Neither thread asserts:
 * the test's own thread checks what they recorded once they are joined.
 *
 * Timing. Both sweeps of the daemon (text/RESP and HTTP) run once a second, so a connection
 * whose clock starts at t is closed in [t + request_timeout, t + request_timeout + 1 s], plus
 * however late the daemon gets to run on a loaded machine. The bounds (EARLY_MS, late_ms(),
 * the latency bounds) say why they are safe where they are defined; under $BLOSSOMD_WRAPPER
 * (valgrind makes the daemon 20-50x slower) every latency and lateness allowance is multiplied
 * by slowdown() (10).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/check_main.h"
#include "tests/integration/itest_check.h"

/* request_timeout of the cases that test it, in seconds and ms. */
#define REQ_S  2
#define REQ_MS (REQ_S * 1000)
#define REQ_CONF                                                                                   \
	"request_timeout = 2\n"                                                                    \
	"idle_timeout = 60\n"

/* The daemon's sweep period (SRV_SWEEP_MS, HTTP_SWEEP_MS). */
#define SWEEP_MS 1000

/*
 * A connection is never closed more than this before request_timeout has passed since its
 * clock started (as the client sees it). The daemon starts the clock at its loop time when it
 * reads the byte (HTTP: accepts the connection), which is at most a millisecond before the
 * client's send when the loop is idle, but up to one loop iteration before it when the
 * iteration was already running (MHD accepting a connection that arrived during it); 100 ms
 * is far more than an iteration of this daemon takes (x slowdown() under valgrind).
 */
#define EARLY_MS 100

/* Bytes each slow connection sends: one every TRICKLE_MIN_MS..TRICKLE_MAX_MS. */
#define TRICKLE_MIN_MS 100
#define TRICKLE_MAX_MS 300

/* 10 under $BLOSSOMD_WRAPPER (valgrind: the daemon runs 20-50x slower), else 1. */
static int slowdown(void)
{
	const char *w = getenv("BLOSSOMD_WRAPPER");

	return w && *w ? 10 : 1;
}

static int64_t early_ms(void)
{
	return (int64_t)EARLY_MS * slowdown();
}

/*
 * How long after request_timeout a connection may still be open: one sweep period (the sweep
 * that finds it expired can come up to 1 s later), plus 1 s for the daemon and this test to
 * get the CPU on a loaded 2-core machine (x slowdown()). With request_timeout 2 that is the
 * "request_timeout + 2 s" the issue asks for.
 */
static int64_t late_ms(void)
{
	return SWEEP_MS + 1000 * (int64_t)slowdown();
}

/*
 * Latency of a well-behaved exchange while the hostile clients are at work. A healthy daemon
 * answers in well under a millisecond; what it costs here is the scheduler of a loaded 2-core
 * machine (this test's threads, the daemon and other jobs share it), which can delay a run by
 * tens of milliseconds. A daemon that waited on a slow client would show request_timeout
 * (2 s) or more. Bounds x slowdown() under valgrind.
 */
#define LAT_MAX_MS 500
#define LAT_P99_MS 100

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Occurrences of needle in hay. */
static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* VmRSS of pid in KiB, or -1. */
static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void set_nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* ---------------------------------------------------------------------------------------- */
/* A minimal HTTP client (thread-safe: the caller gives the buffer) */

/*
 * One GET on a keep-alive connection. Returns the status, with *body (NUL-terminated, inside
 * buf) and *blen set; 0 if the answer did not come whole within timeout_ms or the connection
 * ended.
 */
static int http_get(int fd, const char *path, char *buf, size_t cap, const char **body,
		    size_t *blen, int timeout_ms)
{
	int64_t until = itest_now_ms() + timeout_ms;
	size_t n = 0, hlen = 0, need = 0;
	char req[256];
	int status = 0;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
	if (itest_send_str(fd, req))
		return 0;
	buf[0] = '\0';
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = until - itest_now_ms();
		const char *end, *cl;
		ssize_t r;

		if (!hlen && (end = strstr(buf, "\r\n\r\n"))) {
			hlen = (size_t)(end - buf) + 4;
			cl = strcasestr(buf, "\r\nContent-Length:");
			if (!cl || cl > end || sscanf(buf, "HTTP/1.1 %d", &status) != 1)
				return 0;
			need = hlen + strtoul(cl + 17, NULL, 10);
		}
		if (hlen && n >= need)
			break;
		if (n + 1 >= cap || left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		r = recv(fd, buf + n, cap - 1 - n, 0);
		if (r <= 0)
			return 0;
		n += (size_t)r;
		buf[n] = '\0';
	}
	*body = buf + hlen;
	*blen = need - hlen;
	return status;
}

/* Wait until the HTTP listener is up: it starts after the text/RESP one the harness waits
 * for. */
static void http_listening(void)
{
	char line[96];

	snprintf(line, sizeof(line), "listening on 127.0.0.1:%u (HTTP)", (unsigned)d.http_port);
	ck_assert(itest_log_wait(&d, line, T));
}

/* A connection to the HTTP port, once it listens. */
static int hconn(void)
{
	int fd;

	http_listening();
	fd = itest_connect(d.http_port);
	ck_assert_msg(fd >= 0, "connect to the HTTP port: %s", strerror(-fd));
	return fd;
}

/* The value of sample name (e.g. "connections{protocol=\"http\"}") in a /metrics body, or
 * -1 if absent. */
static int64_t metric_in(const char *body, const char *name)
{
	char needle[256];
	const char *p;

	snprintf(needle, sizeof(needle), "\nblossomd_%s ", name);
	p = strstr(body, needle);
	return p ? strtoll(p + strlen(needle), NULL, 10) : -1;
}

/* The sample name from /metrics, asked on the keep-alive HTTP connection fd. */
static int64_t metric(int fd, const char *name)
{
	static char buf[1 << 18];
	const char *body;
	size_t blen;

	ck_assert_int_eq(http_get(fd, "/metrics", buf, sizeof(buf), &body, &blen, T), 200);
	return metric_in(body, name);
}

/* Wait up to T for the sample name to read want (gauges follow closes a little later). */
static void metric_becomes(int fd, const char *name, int64_t want)
{
	int64_t until = itest_now_ms() + T, v;

	while ((v = metric(fd, name)) != want && itest_now_ms() < until)
		itest_sleep_ms(20);
	ck_assert_msg(v == want, "blossomd_%s is %" PRId64 ", expected %" PRId64, name, v, want);
}

/* Wait until no text/RESP connection is open (the harness's probe at start is gone). */
static void text_resp_idle(void)
{
	int h = hconn();

	metric_becomes(h, "connections{protocol=\"text_resp\"}", 0);
	close(h);
}

/* ---------------------------------------------------------------------------------------- */
/* Slow connections, driven from one thread */

/* What one slow connection sends. */
struct script {
	const char *name;
	const char *head;    /* sent whole on connect ("": nothing) */
	const char *trickle; /* then one byte at a time (the first at once if head is "") ... */
	char filler;	     /* ... then this byte forever ('\0': nothing more) */
	/* The byte of head + trickle whose arrival starts the daemon's clock (-1: the connect):
	 * the first byte of the command or request that never completes. */
	int clock_from;
	const char *reply; /* what the daemon sends before closing it, exactly */
	bool reply_prefix; /* ... or only its beginning (HTTP answers carry a date) */
};

struct slow {
	const struct script *sc;
	int fd;
	size_t sent;
	int64_t connect_at;   /* planned */
	int64_t connected_ms; /* 0: not connected yet */
	int64_t clock_ms;     /* when the daemon's clock started (0: not yet) */
	int64_t next_ms;      /* next byte due */
	int64_t closed_ms;    /* when the daemon's close was seen; 0 while open */
	int err;	      /* errno of a failed connect or send */
	size_t got;	      /* bytes received */
	char reply[256];      /* their beginning */
};

struct trickle {
	uint16_t port;
	struct slow *s;
	size_t n;
	int64_t give_up_ms; /* stop then even if some are still open */
	unsigned seed;
	atomic_int nconnected, ndone; /* ndone: closed or failed */
	pthread_t th;
};

static int64_t trickle_gap(struct trickle *t)
{
	return TRICKLE_MIN_MS + rand_r(&t->seed) % (TRICKLE_MAX_MS - TRICKLE_MIN_MS + 1);
}

static void slow_done(struct trickle *t, struct slow *s, int64_t closed_ms, int err)
{
	s->closed_ms = closed_ms;
	s->err = err;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	atomic_fetch_add(&t->ndone, 1);
}

static void slow_connect(struct trickle *t, struct slow *s, int64_t now)
{
	const struct script *sc = s->sc;
	size_t hl = strlen(sc->head);
	int64_t t0 = itest_now_ms();
	int fd = itest_connect(t->port);

	if (fd < 0) {
		slow_done(t, s, 0, -fd);
		return;
	}
	s->fd = fd;
	s->connected_ms = t0;
	if (sc->clock_from < 0)
		s->clock_ms = t0;
	if (hl) {
		if (sc->clock_from == 0)
			s->clock_ms = itest_now_ms();
		int rc = itest_send(fd, sc->head, hl);

		if (rc) {
			slow_done(t, s, 0, -rc);
			return;
		}
		s->sent = hl;
		s->next_ms = now + trickle_gap(t);
	} else {
		s->next_ms = now;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	atomic_fetch_add(&t->nconnected, 1);
}

static void slow_send(struct trickle *t, struct slow *s, int64_t now)
{
	size_t hl = strlen(s->sc->head), tl = strlen(s->sc->trickle);
	char b = s->sent < hl + tl ? s->sc->trickle[s->sent - hl] : s->sc->filler;
	int64_t before = itest_now_ms();
	ssize_t w;

	if (!b) {
		s->next_ms = INT64_MAX;
		return;
	}
	if (s->sc->clock_from >= 0 && s->sent == (size_t)s->sc->clock_from)
		s->clock_ms = before;
	w = send(s->fd, &b, 1, MSG_NOSIGNAL);
	if (w == 1)
		s->sent++;
	else if (w < 0 && errno != EAGAIN && errno != EINTR)
		slow_done(t, s, before, 0); /* the daemon closed it: reset */
	s->next_ms = now + trickle_gap(t);
}

/* Read what the daemon sent; its close (EOF or reset) ends the connection. */
static void slow_read(struct trickle *t, struct slow *s, int64_t now)
{
	char buf[4096];

	for (;;) {
		ssize_t r = recv(s->fd, buf, sizeof(buf), 0);

		if (r > 0) {
			size_t cap = sizeof(s->reply) - 1;
			size_t have = s->got < cap ? s->got : cap;
			size_t take = (size_t)r < cap - have ? (size_t)r : cap - have;

			memcpy(s->reply + have, buf, take);
			s->got += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		slow_done(t, s, now, 0);
		return;
	}
}

static void *trickle_run(void *arg)
{
	struct trickle *t = arg;
	struct pollfd *pfd = calloc(t->n, sizeof(*pfd));
	size_t *idx = calloc(t->n, sizeof(*idx));

	if (!pfd || !idx)
		goto out;
	for (;;) {
		int64_t now = itest_now_ms(), wake = now + 100;
		size_t np = 0;

		if (atomic_load(&t->ndone) == (int)t->n || now >= t->give_up_ms)
			break;
		for (size_t i = 0; i < t->n; i++) {
			struct slow *s = &t->s[i];

			if (s->closed_ms || s->err)
				continue;
			if (!s->connected_ms) {
				if (now < s->connect_at) {
					wake = s->connect_at < wake ? s->connect_at : wake;
					continue;
				}
				slow_connect(t, s, now);
				if (s->closed_ms || s->err)
					continue;
			}
			if (now >= s->next_ms)
				slow_send(t, s, now);
			if (s->closed_ms || s->err)
				continue;
			wake = s->next_ms < wake ? s->next_ms : wake;
			pfd[np] = (struct pollfd){.fd = s->fd, .events = POLLIN};
			idx[np++] = i;
		}
		if (poll(pfd, np, wake > now ? (int)(wake - now) : 0) <= 0)
			continue;
		now = itest_now_ms();
		for (size_t k = 0; k < np; k++)
			if (pfd[k].revents)
				slow_read(t, &t->s[idx[k]], now);
	}
out:
	free(pfd);
	free(idx);
	return NULL;
}

/*
 * Start n slow connections to port, connection i running scripts[i % nscripts], the connects
 * spread evenly over stagger_ms. The thread gives up give_up_after_ms after the last connect.
 */
static struct trickle *trickle_start(uint16_t port, size_t n, const struct script *scripts,
				     size_t nscripts, int stagger_ms, int64_t give_up_after_ms)
{
	struct trickle *t = calloc(1, sizeof(*t));
	int64_t t0 = itest_now_ms();

	ck_assert_ptr_nonnull(t);
	t->s = calloc(n, sizeof(*t->s));
	ck_assert_ptr_nonnull(t->s);
	t->port = port;
	t->n = n;
	t->seed = 7;
	atomic_init(&t->nconnected, 0);
	atomic_init(&t->ndone, 0);
	for (size_t i = 0; i < n; i++) {
		t->s[i].sc = &scripts[i % nscripts];
		t->s[i].fd = -1;
		t->s[i].connect_at = t0 + (int64_t)stagger_ms * (int64_t)i / (int64_t)n;
	}
	t->give_up_ms = t0 + stagger_ms + give_up_after_ms;
	ck_assert_int_eq(pthread_create(&t->th, NULL, trickle_run, t), 0);
	return t;
}

/* Wait up to T for all n connects. */
static void trickle_wait_connected(struct trickle *t)
{
	int64_t until = itest_now_ms() + T;

	while (atomic_load(&t->nconnected) < (int)t->n && atomic_load(&t->ndone) == 0 &&
	       itest_now_ms() < until)
		itest_sleep_ms(2);
	ck_assert_int_eq(atomic_load(&t->nconnected), (int)t->n);
}

static void trickle_join(struct trickle *t)
{
	ck_assert_int_eq(pthread_join(t->th, NULL), 0);
}

static void trickle_free(struct trickle *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->s[i].fd >= 0)
			close(t->s[i].fd);
	free(t->s);
	free(t);
}

/*
 * Every slow connection was closed by the daemon in [its clock + request_timeout - EARLY,
 * its clock + request_timeout + late], after exactly the replies its script expects.
 */
static void trickle_check(const struct trickle *t, const char *what)
{
	int64_t lo = REQ_MS - early_ms(), hi = REQ_MS + late_ms();
	int64_t mn = INT64_MAX, mx = INT64_MIN;

	for (size_t i = 0; i < t->n; i++) {
		const struct slow *s = &t->s[i];
		const struct script *sc = s->sc;
		size_t rl = strlen(sc->reply);
		int64_t dt = s->closed_ms - s->clock_ms;

		ck_assert_msg(!s->err, "%s %zu (%s): %s", what, i, sc->name, strerror(s->err));
		ck_assert_msg(s->clock_ms, "%s %zu (%s): closed before its clock started", what, i,
			      sc->name);
		ck_assert_msg(s->closed_ms,
			      "%s %zu (%s): still open %" PRId64
			      " ms after its clock started (%zu bytes sent)",
			      what, i, sc->name, itest_now_ms() - s->clock_ms, s->sent);
		ck_assert_msg(dt >= lo && dt <= hi,
			      "%s %zu (%s): closed %" PRId64
			      " ms after its clock started, not in [%" PRId64 ", %" PRId64 "]",
			      what, i, sc->name, dt, lo, hi);
		ck_assert_msg(sc->reply_prefix ? s->got >= rl && !memcmp(s->reply, sc->reply, rl)
					       : s->got == rl && !memcmp(s->reply, sc->reply, rl),
			      "%s %zu (%s): received %zu bytes \"%.*s\"", what, i, sc->name, s->got,
			      (int)(s->got < sizeof(s->reply) ? s->got : sizeof(s->reply) - 1),
			      s->reply);
		mn = dt < mn ? dt : mn;
		mx = dt > mx ? dt : mx;
	}
	fprintf(stderr,
		"# %s: %zu slow connections closed %" PRId64 "..%" PRId64
		" ms after their clocks started (bounds %" PRId64 "..%" PRId64 ")\n",
		what, t->n, mn, mx, lo, hi);
}

/* ---------------------------------------------------------------------------------------- */
/* The well-behaved client, timing every exchange from another thread */

struct probe {
	int fd;
	bool http;	    /* GET /healthz on a keep-alive connection, else req/expect */
	const char *req;    /* text or RESP request */
	const char *expect; /* its exact reply */
};

struct prober {
	struct probe p[2];
	int np;
	atomic_bool stop;
	int64_t *lat_us;
	size_t n, cap;
	bool failed;
	char why[256];
	pthread_t th;
};

static bool probe_once(struct probe *p, char *buf, size_t cap)
{
	const char *body;
	size_t blen;

	if (!p->http)
		return itest_exchange(p->fd, p->req, p->expect, T);
	return http_get(p->fd, "/healthz", buf, cap, &body, &blen, T) == 200 &&
	       !strcmp(body, "{\"status\":\"ok\"}\n");
}

static void *prober_run(void *arg)
{
	struct prober *pr = arg;
	char *buf = malloc(65536);

	for (size_t i = 0; buf && !atomic_load(&pr->stop); i++) {
		struct probe *p = &pr->p[i % (size_t)pr->np];
		int64_t t0 = now_us();
		bool ok = probe_once(p, buf, 65536);

		if (!ok) {
			pr->failed = true;
			snprintf(pr->why, sizeof(pr->why),
				 "exchange %zu (%s) failed after %" PRId64 " ms", i,
				 p->http ? "GET /healthz" : p->req, (now_us() - t0) / 1000);
			break;
		}
		if (pr->n == pr->cap) {
			size_t cap = pr->cap ? pr->cap * 2 : 4096;
			int64_t *l = realloc(pr->lat_us, cap * sizeof(*l));

			if (!l)
				break;
			pr->lat_us = l;
			pr->cap = cap;
		}
		pr->lat_us[pr->n++] = now_us() - t0;
	}
	free(buf);
	return NULL;
}

static void prober_start(struct prober *pr)
{
	atomic_init(&pr->stop, false);
	ck_assert_int_eq(pthread_create(&pr->th, NULL, prober_run, pr), 0);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Stop the prober and check it: no failure, at least min_n exchanges, p99 and max within
 * the bounds. */
static void prober_stop(struct prober *pr, const char *what, size_t min_n)
{
	int64_t p50, p99, mx;

	atomic_store(&pr->stop, true);
	ck_assert_int_eq(pthread_join(pr->th, NULL), 0);
	ck_assert_msg(!pr->failed, "%s: %s", what, pr->why);
	ck_assert_msg(pr->n >= min_n, "%s: only %zu exchanges", what, pr->n);
	qsort(pr->lat_us, pr->n, sizeof(*pr->lat_us), cmp_i64);
	p50 = pr->lat_us[pr->n / 2];
	p99 = pr->lat_us[pr->n * 99 / 100];
	mx = pr->lat_us[pr->n - 1];
	fprintf(stderr,
		"# %s: %zu exchanges, latency median %.3f ms, p99 %.3f ms, max %.3f ms "
		"(bounds p99 %d ms, max %d ms)\n",
		what, pr->n, (double)p50 / 1000, (double)p99 / 1000, (double)mx / 1000,
		LAT_P99_MS * slowdown(), LAT_MAX_MS * slowdown());
	ck_assert_msg(p99 <= (int64_t)LAT_P99_MS * slowdown() * 1000, "%s: p99 latency %.3f ms",
		      what, (double)p99 / 1000);
	ck_assert_msg(mx <= (int64_t)LAT_MAX_MS * slowdown() * 1000, "%s: max latency %.3f ms",
		      what, (double)mx / 1000);
	free(pr->lat_us);
	pr->lat_us = NULL;
}

/* A text and a RESP client on filter f, which holds k. */
#define EXISTS_K "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$1\r\nk\r\n"

static void text_resp_prober(struct prober *pr, int txt, int rsp)
{
	memset(pr, 0, sizeof(*pr));
	EXCHANGE(txt, "create f\n", "Done\n");
	EXCHANGE(txt, "set f k\n", "Yes\n");
	EXCHANGE(rsp, EXISTS_K, ":1\r\n");
	pr->p[0] = (struct probe){.fd = txt, .req = "check f k\n", .expect = "Yes\n"};
	pr->p[1] = (struct probe){.fd = rsp, .req = EXISTS_K, .expect = ":1\r\n"};
	pr->np = 2;
	prober_start(pr);
}

static void http_prober(struct prober *pr, int fd)
{
	memset(pr, 0, sizeof(*pr));
	pr->p[0] = (struct probe){.fd = fd, .http = true};
	pr->np = 1;
	prober_start(pr);
}

/* Nothing was logged at warning or worse. */
static void no_warnings(void)
{
	const char *log = itest_log(&d);

	ck_assert_msg(!strstr(log, "<3>") && !strstr(log, "<4>"), "%s", log);
}

/* ---------------------------------------------------------------------------------------- */
/* Slowloris on the text/RESP port */

/* 2000 bytes without a newline: longer than the max_line_bytes (1k) of the cases below. */
static const char *long_line(void)
{
	static char buf[2001];

	memset(buf, 'x', sizeof(buf) - 1);
	return buf;
}

#define RESP_PING "*1\r\n$4\r\nPING\r\n"
#define TEXT_CONF CONF(REQ_CONF "max_line_bytes = 1k\nmax_key_bytes = 1k\n")

/* Partial commands that never complete, each in a different parser state. */
static void text_scripts(struct script sc[5])
{
	sc[0] = (struct script){"text command", "", "check f ", 'k', 0, "", false};
	/* The clock starts at the '*'; the key (1000 bytes announced) never ends. */
	sc[1] = (struct script){
	    "RESP command", "", "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$1000\r\n", 'k', 0, "", false};
	/* After a served command: the clock starts with the next one. */
	sc[2] = (struct script){"text after ping", "ping\n", "set f slow", 'k', 5, "PONG\n", false};
	sc[3] = (struct script){"RESP after PING",
				RESP_PING,
				"*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$4000\r\n",
				'k',
				(int)strlen(RESP_PING),
				"+PONG\r\n",
				false};
	/* An over-long line: answered once, then discarded while it goes on; the clock runs
	 * from its first byte. */
	sc[4] = (struct script){
	    "text line too long", long_line(), "", 'x', 0, "Client Error: Line too long\n", false};
}

START_TEST(test_slowloris_text)
{
	enum { N = 200 };
	struct script sc[5];
	struct prober pr;
	struct trickle *t;
	int txt, rsp;

	ck_assert_int_ge(itest_raise_fd_limit(), N + 64);
	text_scripts(sc);
	start(TEXT_CONF, NULL);
	txt = conn();
	rsp = conn();
	text_resp_prober(&pr, txt, rsp);
	/* 200 connects spread over 1 s, so their deadlines fall across several sweeps. */
	t = trickle_start(d.port, N, sc, 5, 1000, TRICKLE_MAX_MS + REQ_MS + late_ms() + 1000);
	trickle_join(t);
	prober_stop(&pr, "text/RESP client during 200 slowloris connections", 200);
	trickle_check(t, "text/RESP slowloris");
	ck_assert_int_eq(count_str(itest_log(&d), "command incomplete after request_timeout (2 s); "
						  "closing\n"),
			 N);
	no_warnings();
	EXCHANGE(txt, "ping\n", "PONG\n");
	EXCHANGE(rsp, RESP_PING, "+PONG\r\n");
	trickle_free(t);
	close(txt);
	close(rsp);
	stop();
}
END_TEST

/* With max_connections slowloris connections open, a new client is refused; once they are
 * cut, one is served: trickling cannot hold a slot for longer than request_timeout. */
START_TEST(test_slowloris_holds_no_slot)
{
	enum { K = 50 };
	struct script sc[5];
	struct trickle *t;
	size_t drained = 1;
	int64_t t0;
	int fd, h;

	text_scripts(sc);
	start(CONF(REQ_CONF "max_line_bytes = 1k\nmax_key_bytes = 1k\nmax_connections = 50\n"),
	      NULL);
	/* No other connection may hold a slot when the K take them. */
	text_resp_idle();
	t = trickle_start(d.port, K, sc, 5, 0, TRICKLE_MAX_MS + REQ_MS + late_ms() + 1000);
	trickle_wait_connected(t);
	/* Accepted after the K (the listen queue is FIFO), so refused: closed without a byte,
	 * while every slow one is still open. */
	fd = conn();
	ck_assert_int_eq(itest_wait_closed(fd, T, &drained), 0);
	ck_assert_uint_eq(drained, 0);
	ck_assert_int_eq(atomic_load(&t->ndone), 0);
	close(fd);
	ck_assert(itest_log_wait(&d, "<4>blossomd: max_connections (50) reached", T));
	trickle_join(t);
	trickle_check(t, "text/RESP slowloris at max_connections");
	/* All cut: the next client is served at once. The daemon frees a slot when it decides
	 * to close (before the descriptor is closed and the client sees it), so this holds on
	 * the first try. */
	t0 = itest_now_ms();
	fd = conn();
	EXCHANGE(fd, "ping\n", "PONG\n");
	fprintf(stderr, "# text/RESP: a new client served %" PRId64 " ms after the last cut\n",
		itest_now_ms() - t0);
	/* (An HTTP connection's first request must come within request_timeout: opened now.) */
	h = hconn();
	ck_assert_int_eq(metric(h, "connections_rejected_total{protocol=\"text_resp\"}"), 1);
	ck_assert_int_eq(metric(h, "connections{protocol=\"text_resp\"}"), 1);
	close(fd);
	close(h);
	trickle_free(t);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Slowloris on HTTP */

#define ADD_HEAD                                                                                   \
	"POST /v1/filters/f/add HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"         \
	"Content-Length: 1000\r\n\r\n"
#define HEALTHZ "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"

/* Requests that never complete; the first request's clock starts at the connect. */
static void http_scripts(struct script sc[4])
{
	sc[0] = (struct script){"HTTP header lines",
				"",
				"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ",
				'a',
				-1,
				"",
				false};
	sc[1] = (struct script){"HTTP body", ADD_HEAD, "{\"keys\":[\"", 'a', -1, "", false};
	sc[2] =
	    (struct script){"HTTP request line", "", "GET /v1/filters/f/keys/", 'a', -1, "", false};
	sc[3] = (struct script){"HTTP silent", "", "", '\0', -1, "", false};
}

START_TEST(test_slowloris_http)
{
	enum { N = 50 };
	struct script sc[4];
	struct prober pr;
	struct trickle *t;
	int h;

	ck_assert_int_ge(itest_raise_fd_limit(), N + 64);
	http_scripts(sc);
	start(CONF(REQ_CONF), NULL);
	h = hconn();
	http_prober(&pr, h);
	t = trickle_start(d.http_port, N, sc, 4, 1000, TRICKLE_MAX_MS + REQ_MS + late_ms() + 1000);
	trickle_join(t);
	prober_stop(&pr, "HTTP client during 50 slowloris connections", 200);
	trickle_check(t, "HTTP slowloris");
	ck_assert_int_eq(count_str(itest_log(&d), "http: request not done after request_timeout "
						  "(2 s); closing the connection\n"),
			 N);
	no_warnings();
	metric_becomes(h, "connections{protocol=\"http\"}", 1);
	close(h);
	trickle_free(t);
	stop();
}
END_TEST

START_TEST(test_slowloris_http_holds_no_slot)
{
	enum { K = 20 };
	struct script sc[4];
	struct trickle *t;
	size_t drained = 1;
	int64_t t0;
	int fd, h, refused = 0;
	char buf[4096];
	const char *body;
	size_t blen;

	http_scripts(sc);
	start(CONF(REQ_CONF "max_connections = 20\n"), NULL);
	/* No other HTTP connection before the K: they take every slot. */
	http_listening();
	t = trickle_start(d.http_port, K, sc, 4, 0, TRICKLE_MAX_MS + REQ_MS + late_ms() + 1000);
	trickle_wait_connected(t);
	fd = itest_connect(d.http_port);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(itest_send_str(fd, HEALTHZ), 0);
	ck_assert_int_eq(itest_wait_closed(fd, T, &drained), 0);
	ck_assert_uint_eq(drained, 0);
	ck_assert_int_eq(atomic_load(&t->ndone), 0);
	close(fd);
	ck_assert(itest_log_wait(&d, "<4>blossomd: http: max_connections (20) reached", T));
	trickle_join(t);
	trickle_check(t, "HTTP slowloris at max_connections");
	/* libmicrohttpd closes a cut connection when it next runs, a moment after the client
	 * sees the shutdown: retry for up to 1 s (x slowdown()). */
	t0 = itest_now_ms();
	for (;;) {
		h = itest_connect(d.http_port);
		ck_assert_int_ge(h, 0);
		if (http_get(h, "/healthz", buf, sizeof(buf), &body, &blen, T) == 200)
			break;
		close(h);
		refused++;
		ck_assert_msg(itest_now_ms() - t0 < 1000 * slowdown(),
			      "no HTTP client served %" PRId64 " ms after the last cut",
			      itest_now_ms() - t0);
		itest_sleep_ms(10);
	}
	fprintf(stderr,
		"# HTTP: a new client served %" PRId64 " ms after the last cut (%d refused)\n",
		itest_now_ms() - t0, refused);
	ck_assert_int_eq(metric(h, "connections_rejected_total{protocol=\"http\"}"), 1 + refused);
	ck_assert_int_eq(metric(h, "connections{protocol=\"http\"}"), 1);
	close(h);
	trickle_free(t);
	stop();
}
END_TEST

/*
 * A keep-alive client that was answered once, then trickles its next request line: that
 * request's clock starts with its first byte, as for text and RESP, so it is closed within
 * request_timeout of it (and idle_timeout never fires: it is not idle).
 */
START_TEST(test_slowloris_http_keepalive)
{
	enum { N = 10 };
	struct script sc = {
	    "HTTP second request", HEALTHZ, "GET /v1/filters/f/keys/", 'a', (int)strlen(HEALTHZ),
	    "HTTP/1.1 200 OK\r\n", true};
	struct trickle *t;
	int h;

	start(CONF(REQ_CONF), NULL);
	http_listening();
	t = trickle_start(d.http_port, N, &sc, 1, 0, TRICKLE_MAX_MS + REQ_MS + late_ms() + 1000);
	trickle_join(t);
	trickle_check(t, "HTTP keep-alive slowloris");
	h = hconn();
	metric_becomes(h, "connections{protocol=\"http\"}", 1);
	close(h);
	trickle_free(t);
	stop();
}
END_TEST

/*
 * The other side: an idle keep-alive connection is not cut by request_timeout, even after a
 * CRLF that followed its last request (RFC 9112 2.2: ignored before a request line).
 */
START_TEST(test_http_keepalive_idle_kept)
{
	static char buf[65536];
	const char *body;
	size_t blen;
	int fd;

	start(CONF(REQ_CONF), NULL);
	fd = hconn();
	ck_assert_int_eq(http_get(fd, "/healthz", buf, sizeof(buf), &body, &blen, T), 200);
	ck_assert_int_eq(itest_send_str(fd, "\r\n"), 0);
	/* Longer than request_timeout and the sweep's lateness: it would be cut by now. */
	ck_assert(itest_quiet(fd, (int)(REQ_MS + late_ms() + SWEEP_MS)));
	ck_assert_int_eq(http_get(fd, "/healthz", buf, sizeof(buf), &body, &blen, T), 200);
	ck_assert_ptr_null(strstr(itest_log(&d), "request_timeout"));
	close(fd);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Clients that never read */

/*
 * A client sends cmd over and over and never reads: the daemon stops reading it once its
 * replies back up, serves the others meanwhile, and closes it about request_timeout after its
 * writes stopped moving, without its memory growing past one batch of replies.
 */
static void never_reader(const char *cmd, const char *what)
{
	size_t cl = strlen(cmd), chunk = 64 * 1024 - (64 * 1024) % cl, sent = 0;
	char *blob = malloc(chunk);
	/* Half a second without taking a byte is far longer than the daemon needs for one
	 * 64 KiB batch (15 ms; 700 ms under valgrind), so it has stopped reading. */
	int64_t t_first, t_last, t_closed, stall_ms = slowdown() > 1 ? 1500 : 500;
	long rss0, rss_stalled, rss_after;
	struct prober pr;
	int fd, txt, rsp;
	bool cut = false;
	pid_t pid;

	ck_assert_ptr_nonnull(blob);
	for (size_t i = 0; i < chunk; i++)
		blob[i] = cmd[i % cl];
	start(CONF(REQ_CONF), NULL);
	pid = daemon_pid();
	txt = conn();
	rsp = conn();
	EXCHANGE(txt, "create g\n", "Done\n");
	text_resp_prober(&pr, txt, rsp);
	rss0 = rss_kb(pid);

	fd = conn();
	set_nonblock(fd);
	/* Send until nothing more is taken for stall_ms: the daemon has stopped reading. */
	t_first = t_last = itest_now_ms();
	for (;;) {
		ssize_t w = send(fd, blob + sent % cl, chunk - sent % cl, MSG_NOSIGNAL);
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		if (w > 0) {
			sent += (size_t)w;
			t_last = itest_now_ms();
			ck_assert_msg(sent < ((size_t)1 << 30), "the daemon never stopped reading");
			continue;
		}
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			cut = true; /* under valgrind, the daemon may cut it before we notice */
			break;
		}
		ck_assert(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		if (poll(&p, 1, (int)stall_ms) == 0)
			break;
	}
	rss_stalled = rss_kb(pid);
	if (!cut)
		ck_assert_int_eq(itest_wait_hup(fd, REQ_MS + SWEEP_MS + (int)late_ms()), 0);
	t_closed = itest_now_ms();
	prober_stop(&pr, what, 200);
	fprintf(stderr,
		"# %s: %zu bytes sent in %" PRId64 " ms; closed %" PRId64
		" ms after the first, %" PRId64 " ms after the last (bounds >= %" PRId64
		", <= %" PRId64 ")\n",
		what, sent, t_last - t_first, t_closed - t_first, t_closed - t_last,
		REQ_MS - early_ms(), REQ_MS + SWEEP_MS + late_ms());
	/* Its writes started moving no earlier than its first command, and the daemon gives a
	 * stalled write request_timeout to move again. */
	ck_assert_int_ge(t_closed - t_first, REQ_MS - early_ms());
	/* They stopped moving at the latest when it stopped being able to send (the sweep then
	 * may note that one more second later), then request_timeout and the sweep's lateness. */
	ck_assert_int_le(t_closed - t_last, REQ_MS + SWEEP_MS + late_ms());
	ck_assert(itest_log_wait(&d, "not reading its replies; closing", T));
	ck_assert_int_eq(count_str(itest_log(&d), "not reading its replies; closing\n"), 1);
	ck_assert_int_eq(count_str(itest_log(&d), "request_timeout"), 0);
	no_warnings();
	close(fd);

	/* Served as before. */
	EXCHANGE(txt, "ping\n", "PONG\n");
	EXCHANGE(rsp, EXISTS_K, ":1\r\n");
	rss_after = rss_kb(pid);
	fprintf(stderr, "# %s: daemon VmRSS %ld KiB before, %ld stalled, %ld after\n", what, rss0,
		rss_stalled, rss_after);
	/* The replies held for it are one batch (a 64 KiB read's worth, a few MiB at most),
	 * not everything it sent: 64 MiB is far below what it would take to hold its input
	 * or all its replies, and far above allocator and sanitizer noise. */
	ck_assert_int_lt(rss_stalled - rss0, 64 * 1024);
	ck_assert_int_lt(rss_after - rss0, 64 * 1024);
	close(txt);
	close(rsp);
	free(blob);
	stop();
}

/* "info g\n": 7 bytes in, 294 out, so the replies back up fast. */
START_TEST(test_never_reader_text)
{
	never_reader("info g\n", "text never-reader");
}
END_TEST

/* BF.INFO: 25 bytes in, 117 out. */
START_TEST(test_never_reader_resp)
{
	never_reader("*2\r\n$7\r\nBF.INFO\r\n$1\r\ng\r\n", "RESP never-reader");
}
END_TEST

/*
 * The other side of that rule: a client that reads its replies slowly but steadily is not
 * "not reading", even while the daemon's own queue of them does not move because the kernel
 * still holds megabytes of them (the socket buffers of a loopback connection grow to several
 * MiB). Nor is the command that the daemon's last read cut in half (it stops reading while
 * it writes) "incomplete": the client sent it whole long ago. It is served to the end, every
 * reply exact.
 */
START_TEST(test_slow_reader_kept)
{
	/* 210 KB of "info g\n", about 8.8 MB of replies: more than the kernel buffers. */
	enum { N = 30000 };
	static char one[4096];
	size_t rl, total, got = 0;
	char *req, *expect, *in;
	int64_t t0, slow_until;
	int fd;

	start(CONF(REQ_CONF), NULL);
	fd = conn();
	EXCHANGE(fd, "create g\n", "Done\n");
	ck_assert_int_eq(itest_send_str(fd, "info g\n"), 0);
	ck_assert_int_gt(itest_recv_until(fd, one, sizeof(one), "END\n", T), 0);
	rl = strlen(one);
	total = rl * N;
	req = malloc(7 * N);
	expect = malloc(total);
	in = malloc(total);
	ck_assert(req && expect && in);
	for (size_t i = 0; i < N; i++) {
		memcpy(req + 7 * i, "info g\n", 7);
		memcpy(expect + rl * i, one, rl);
	}
	ck_assert_int_eq(itest_send(fd, req, 7 * N), 0);
	/* 32 KiB every 100 ms (320 KiB/s) for longer than request_timeout and the sweep's
	 * lateness: long enough to be cut if its progress were not seen. */
	t0 = itest_now_ms();
	slow_until = t0 + REQ_MS + late_ms() + SWEEP_MS;
	while (got < total && itest_now_ms() < slow_until) {
		size_t want = total - got < 32768 ? total - got : 32768;
		ssize_t r;

		itest_sleep_ms(100);
		r = recv(fd, in + got, want, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		ck_assert_msg(r > 0,
			      "a client reading 320 KiB/s was closed after %" PRId64
			      " ms, %zu of %zu bytes read",
			      itest_now_ms() - t0, got, total);
		got += (size_t)r;
	}
	fprintf(stderr, "# slow reader: %zu of %zu bytes read in %" PRId64 " ms, still open\n", got,
		total, itest_now_ms() - t0);
	ck_assert_int_eq(itest_recv_n(fd, in + got, total - got, T), (ssize_t)(total - got));
	ck_assert(memcmp(in, expect, total) == 0);
	EXCHANGE(fd, "ping\n", "PONG\n");
	ck_assert_ptr_null(strstr(itest_log(&d), "not reading its replies"));
	ck_assert_ptr_null(strstr(itest_log(&d), "request_timeout"));
	close(fd);
	free(req);
	free(expect);
	free(in);
	stop();
}
END_TEST

/*
 * The same over HTTP: a response of megabytes read slowly but steadily is not cut by
 * request_timeout, which restarts while the response moves.
 */
START_TEST(test_http_slow_reader_kept)
{
	/* 1M keys: a 4 MB body and a 6 MB answer, more than the kernel buffers hold. */
	enum { N = 1000000 };
	static const char head[] = "{\"results\":[";
	/* The answer: head, N "false,", the last comma a "]}", and the final newline. */
	size_t blen = strlen("{\"keys\":[]}") + 4 * N - 1, rlen = strlen(head) + 6 * N + 2;
	size_t got = 0, cap = rlen + 4096;
	char *body = malloc(blen + 1), *in = malloc(cap), *expect = malloc(rlen + 1), req[256];
	const char *end;
	int64_t t0, slow_until;
	int fd;

	ck_assert(body && in && expect);
	memcpy(body, "{\"keys\":[", 9);
	for (size_t i = 0; i < N; i++)
		memcpy(body + 9 + 4 * i, "\"a\",", 4);
	memcpy(body + 9 + 4 * N - 1, "]}", 3);
	memcpy(expect, head, strlen(head));
	for (size_t i = 0; i < N; i++)
		memcpy(expect + strlen(head) + 6 * i, "false,", 6);
	memcpy(expect + rlen - 3, "]}\n", 4);

	start(CONF(REQ_CONF), NULL);
	fd = hconn();
	ck_assert_int_eq(itest_send_str(fd, "PUT /v1/filters/g HTTP/1.1\r\nHost: t\r\n"
					    "Connection: close\r\nContent-Length: 0\r\n\r\n"),
			 0);
	ck_assert_int_eq(itest_wait_closed(fd, T, NULL), 0);
	close(fd);
	fd = hconn();
	snprintf(req, sizeof(req),
		 "POST /v1/filters/g/check HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		 blen);
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	ck_assert_int_eq(itest_send(fd, body, blen), 0);
	/* 32 KiB every 100 ms for longer than request_timeout and the sweep's lateness. */
	t0 = itest_now_ms();
	slow_until = t0 + REQ_MS + late_ms() + SWEEP_MS;
	while (itest_now_ms() < slow_until) {
		ssize_t r;

		itest_sleep_ms(100);
		r = recv(fd, in + got, 32768, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		ck_assert_msg(r > 0,
			      "an HTTP client reading 320 KiB/s was closed after %" PRId64
			      " ms, %zu bytes read",
			      itest_now_ms() - t0, got);
		got += (size_t)r;
	}
	fprintf(stderr, "# HTTP slow reader: %zu of about %zu bytes read in %" PRId64 " ms\n", got,
		rlen, itest_now_ms() - t0);
	ck_assert_uint_lt(got, rlen); /* it was still reading when the timeout would have cut */
	got += (size_t)itest_recv_until(fd, in + got, cap - got, "]}", T * slowdown());
	in[got] = '\0';
	ck_assert_msg(strncmp(in, "HTTP/1.1 200 ", 13) == 0, "%.200s", in);
	end = strstr(in, "\r\n\r\n");
	ck_assert_ptr_nonnull(end);
	ck_assert_uint_eq(got - (size_t)(end + 4 - in), rlen);
	ck_assert(memcmp(end + 4, expect, rlen) == 0);
	ck_assert_ptr_null(strstr(itest_log(&d), "request_timeout"));
	close(fd);
	free(body);
	free(in);
	free(expect);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Connection floods */

enum { FLOOD = 500, FLOOD_MAX = 20 };

/* The rate-limited warning: at most one per second of the flood, at least one. */
static void flood_warnings(const char *line, int64_t flood_ms)
{
	int n = count_str(itest_log(&d), line);

	fprintf(stderr, "# \"%.*s\" logged %d times in a %" PRId64 " ms flood\n",
		(int)strlen(line) - 1, line, n, flood_ms);
	ck_assert_int_ge(n, 1);
	ck_assert_int_le(n, flood_ms / 1000 + 1);
}

START_TEST(test_flood_text)
{
	static int fds[FLOOD];
	int64_t t0, dt;
	int h, fd, refused = 0;
	size_t drained;

	ck_assert_int_ge(itest_raise_fd_limit(), FLOOD + 64);
	start(CONF("max_connections = 20\n"), NULL);
	/* No other connection may hold a slot when the flood takes them. */
	text_resp_idle();
	h = hconn();
	t0 = itest_now_ms();
	for (int i = 0; i < FLOOD; i++)
		fds[i] = conn();
	/* The listen queue is FIFO: exactly the first max_connections are served ... */
	for (int i = 0; i < FLOOD_MAX; i++)
		ck_assert_msg(itest_exchange(fds[i], "ping\n", "PONG\n", T),
			      "connection %d not served", i);
	/* ... and every other one is closed without a byte. */
	for (int i = FLOOD_MAX; i < FLOOD; i++) {
		drained = 1;
		ck_assert_msg(itest_wait_closed(fds[i], T, &drained) == 0, "connection %d open", i);
		ck_assert_msg(drained == 0, "connection %d got %zu bytes", i, drained);
	}
	dt = itest_now_ms() - t0;
	fprintf(stderr,
		"# text/RESP flood: %d connections, %d served, the rest refused in %" PRId64
		" ms\n",
		FLOOD, FLOOD_MAX, dt);
	flood_warnings("<4>blossomd: max_connections (20) reached; refusing new connections\n", dt);
	/* The HTTP port has its own budget, and counts what the other one refused. */
	ck_assert_int_eq(metric(h, "connections_rejected_total{protocol=\"text_resp\"}"),
			 FLOOD - FLOOD_MAX);
	ck_assert_int_eq(metric(h, "connections{protocol=\"text_resp\"}"), FLOOD_MAX);
	for (int i = 0; i < FLOOD_MAX; i++)
		EXCHANGE(fds[i], "ping\n", "PONG\n");
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);
	/* Served again once they are gone (the daemon may see the new client before some of
	 * the closes: then it is refused and we try again). */
	for (int64_t until = itest_now_ms() + T;; itest_sleep_ms(10)) {
		char buf[8];

		fd = conn();
		if (itest_send_str(fd, "ping\n") == 0 && itest_recv_n(fd, buf, 5, T) == 5 &&
		    !memcmp(buf, "PONG\n", 5))
			break;
		close(fd);
		refused++;
		ck_assert(itest_now_ms() < until);
	}
	metric_becomes(h, "connections{protocol=\"text_resp\"}", 1);
	ck_assert_int_eq(metric(h, "connections_rejected_total{protocol=\"text_resp\"}"),
			 FLOOD - FLOOD_MAX + refused);
	EXCHANGE(fd, "ping\n", "PONG\n");
	close(fd);
	close(h);
	stop();
}
END_TEST

START_TEST(test_flood_http)
{
	static int fds[FLOOD];
	static char buf[65536];
	const char *body;
	size_t blen, drained;
	int64_t t0, dt;
	int h = -1, refused = 0;

	ck_assert_int_ge(itest_raise_fd_limit(), FLOOD + 64);
	start(CONF("max_connections = 20\n"), NULL);
	/* No HTTP connection before the flood: its first max_connections take every slot. */
	http_listening();
	t0 = itest_now_ms();
	for (int i = 0; i < FLOOD; i++) {
		fds[i] = itest_connect(d.http_port);
		ck_assert_msg(fds[i] >= 0, "connect %d: %s", i, strerror(-fds[i]));
	}
	for (int i = 0; i < FLOOD_MAX; i++)
		ck_assert_msg(http_get(fds[i], "/healthz", buf, sizeof(buf), &body, &blen, T) ==
				  200,
			      "connection %d not served", i);
	for (int i = FLOOD_MAX; i < FLOOD; i++) {
		drained = 1;
		ck_assert_msg(itest_wait_closed(fds[i], T, &drained) == 0, "connection %d open", i);
		ck_assert_msg(drained == 0, "connection %d got %zu bytes", i, drained);
	}
	dt = itest_now_ms() - t0;
	fprintf(stderr,
		"# HTTP flood: %d connections, %d served, the rest refused in %" PRId64 " ms\n",
		FLOOD, FLOOD_MAX, dt);
	flood_warnings("<4>blossomd: http: max_connections (20) reached; refusing new "
		       "connections\n",
		       dt);
	ck_assert_int_eq(metric(fds[0], "connections_rejected_total{protocol=\"http\"}"),
			 FLOOD - FLOOD_MAX);
	ck_assert_int_eq(metric(fds[0], "connections{protocol=\"http\"}"), FLOOD_MAX);
	ck_assert_int_eq(metric(fds[0], "connections_rejected_total{protocol=\"text_resp\"}"), 0);
	/* The text/RESP port has its own budget. */
	{
		int fd = conn();

		EXCHANGE(fd, "ping\n", "PONG\n");
		close(fd);
	}
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);
	for (int64_t until = itest_now_ms() + T;; itest_sleep_ms(10)) {
		h = itest_connect(d.http_port);
		ck_assert_int_ge(h, 0);
		if (http_get(h, "/healthz", buf, sizeof(buf), &body, &blen, T) == 200)
			break;
		close(h);
		refused++;
		ck_assert(itest_now_ms() < until);
	}
	metric_becomes(h, "connections{protocol=\"http\"}", 1);
	ck_assert_int_eq(metric(h, "connections_rejected_total{protocol=\"http\"}"),
			 FLOOD - FLOOD_MAX + refused);
	close(h);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Memory a connection keeps (issue 17 item 5) */

/* A growable byte string for building large requests and their expected replies. */
struct blob {
	char *p;
	size_t n, cap;
};

static void blob_add(struct blob *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void blob_str(struct blob *b, const char *s)
{
	blob_add(b, s, strlen(s));
}

static void blob_fmt(struct blob *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void blob_fmt(struct blob *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	ck_assert(n > 0 && (size_t)n < sizeof(tmp));
	blob_add(b, tmp, (size_t)n);
}

/* Send req whole, then read exactly the bytes of want (no dump of megabytes on a mismatch:
 * the first differing offset is reported). */
static void exchange_blob(int fd, const struct blob *req, const struct blob *want, int timeout_ms)
{
	char *got = malloc(want->n);
	ssize_t n;
	size_t i = 0;

	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(itest_send(fd, req->p, req->n), 0);
	n = itest_recv_n(fd, got, want->n, timeout_ms);
	ck_assert_msg(n == (ssize_t)want->n, "reply of %zd bytes, %zu expected", n, want->n);
	while (i < want->n && got[i] == want->p[i])
		i++;
	ck_assert_msg(i == want->n, "reply differs at byte %zu: '%.40s' for '%.40s'", i, got + i,
		      want->p + i);
	free(got);
}

/* Connections that each run one huge command and then stay idle; keys each. */
#define HUGE_CONNS 10
#define HUGE_KEYS  250000

/*
 * What HUGE_CONNS idle connections may still hold, all together, after each ran one command
 * of HUGE_KEYS keys: each keeps at most 64 KiB of input and of output buffer and argument
 * arrays of 1024 entries, about 1.5 MiB for all ten; 16 MiB leaves room for allocator noise.
 * Before the fix they held the command's argument arrays (24 bytes a key) and the key
 * scratch (20 bytes a key) for good, about 11 MiB each, 110 MiB in all (RESP; text about
 * half), and glibc kept freed pages of large buffers too. x slowdown() under valgrind.
 */
#define HUGE_IDLE_KB (16 * 1024)

/*
 * The case, scaled: HUGE_CONNS connections each send one BF.MEXISTS (text: one `m`
 * line) of HUGE_KEYS keys, read the whole exact reply, and stay open. The daemon's VmRSS
 * once they are idle is within HUGE_IDLE_KB of what it was before, and each is still served.
 */
static void idle_after_huge(bool text)
{
	struct blob req = {0}, want = {0};
	int fds[HUGE_CONNS], ctl;
	long rss0, rss_idle;
	pid_t pid;

	start(CONF("max_line_bytes = 2m\n"), NULL);
	pid = daemon_pid();
	ctl = conn();
	EXCHANGE(ctl, "create f\n", "Done\n");
	EXCHANGE(ctl, "s f k\n", "Yes\n");
	if (text) {
		blob_str(&req, "m f");
		blob_str(&want, "Yes");
		for (int i = 0; i < HUGE_KEYS; i++)
			blob_str(&req, " k");
		for (int i = 1; i < HUGE_KEYS; i++)
			blob_str(&want, " Yes");
		blob_str(&req, "\n");
		blob_str(&want, "\n");
	} else {
		blob_fmt(&req, "*%d\r\n$10\r\nBF.MEXISTS\r\n$1\r\nf\r\n", HUGE_KEYS + 2);
		blob_fmt(&want, "*%d\r\n", HUGE_KEYS);
		for (int i = 0; i < HUGE_KEYS; i++) {
			blob_str(&req, "$1\r\nk\r\n");
			blob_str(&want, ":1\r\n");
		}
	}
	rss0 = rss_kb(pid);
	for (int i = 0; i < HUGE_CONNS; i++) {
		fds[i] = conn();
		exchange_blob(fds[i], &req, &want, T * slowdown());
	}
	/* Every reply was read whole, so the daemon is done with them. */
	EXCHANGE(ctl, "ping\n", "PONG\n");
	rss_idle = rss_kb(pid);
	fprintf(stderr,
		"# %s: %d connections idle after a %d-key command each: daemon VmRSS %ld KiB "
		"before, %ld after (bound +%d)\n",
		text ? "text m" : "RESP BF.MEXISTS", HUGE_CONNS, HUGE_KEYS, rss0, rss_idle,
		HUGE_IDLE_KB * slowdown());
	ck_assert_int_lt(rss_idle - rss0, HUGE_IDLE_KB * slowdown());
	for (int i = 0; i < HUGE_CONNS; i++) {
		if (text)
			EXCHANGE(fds[i], "c f k\n", "Yes\n");
		else
			EXCHANGE(fds[i], EXISTS_K, ":1\r\n");
		close(fds[i]);
	}
	close(ctl);
	free(req.p);
	free(want.p);
	stop();
}

START_TEST(test_idle_after_huge_resp)
{
	idle_after_huge(false);
}
END_TEST

START_TEST(test_idle_after_huge_text)
{
	idle_after_huge(true);
}
END_TEST

/* A token file for the pre-AUTH cases, removed at exit. */
#define TOKEN "0123456789abcdefghijklmnopqrstuvwxyzABCD"
static char token_path[64];

static void token_unlink(void)
{
	unlink(token_path);
}

static const char *token_conf(void)
{
	static char conf[256];
	int fd;

	if (!token_path[0]) {
		snprintf(token_path, sizeof(token_path), "/tmp/blossomd-itest-token-XXXXXX");
		fd = mkstemp(token_path);
		ck_assert_int_ge(fd, 0);
		close(fd);
		atexit(token_unlink);
	}
	ck_assert_int_eq(itest_write_file(token_path, TOKEN "\n"), 0);
	snprintf(conf, sizeof(conf), CONF("auth_token_file = %s\n"), token_path);
	return conf;
}

#define UNAUTH_MBULK	 "-ERR Protocol error: unauthenticated multibulk length\r\n"
#define UNAUTH_BULK	 "-ERR Protocol error: unauthenticated bulk length\r\n"
#define NOAUTH		 "-NOAUTH Authentication required.\r\n"
#define WRONGPASS	 "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
#define TEXT_BAD_TOKEN	 "Client Error: Invalid token\n"
#define TEXT_UNAUTH_LONG "Client Error: Unauthenticated line too long\n"
#define TEXT_UNKNOWN	 "Client Error: Command not supported\n"

/* "*2\r\n$4\r\nAUTH\r\n$<n>\r\n" and n bytes of 'x' (a wrong token) and "\r\n". */
static void auth_of(struct blob *b, size_t n)
{
	b->n = 0;
	blob_fmt(b, "*2\r\n$4\r\nAUTH\r\n$%zu\r\n", n);
	for (size_t i = 0; i < n; i++)
		blob_add(b, "x", 1);
	blob_str(b, "\r\n");
}

/*
 * Before AUTH, RESP commands are capped as Redis 7.0 caps them: at most 10 elements, bulks of
 * at most 16384 bytes; one more is answered with Redis's exact error and the connection is
 * closed (so a 1M-argument PING costs the daemon nothing). After AUTH the configured limits
 * apply. Text: lines of at most 16384 bytes before AUTH.
 */
START_TEST(test_unauth_caps)
{
	struct blob req = {0}, want = {0};
	int fd;
	long rss0;
	pid_t pid;

	start(token_conf(), NULL);
	pid = daemon_pid();
	rss0 = rss_kb(pid);

	/* 10 elements: read, and refused for want of AUTH. */
	fd = conn();
	blob_str(&req, "*10\r\n$3\r\nGET\r\n");
	for (int i = 0; i < 9; i++)
		blob_str(&req, "$1\r\nx\r\n");
	EXCHANGE_N(fd, req.p, req.n, NOAUTH, strlen(NOAUTH));
	/* A bulk of 16384 bytes: read (a wrong token). */
	auth_of(&req, 16384);
	EXCHANGE_N(fd, req.p, req.n, WRONGPASS, strlen(WRONGPASS));
	EXCHANGE(fd, RESP_PING, "+PONG\r\n");
	/* 16385: refused from its header on, and closed. */
	EXCHANGE(fd, "*2\r\n$4\r\nAUTH\r\n$16385\r\n", UNAUTH_BULK);
	CLOSED(fd);
	close(fd);

	/* 11 elements: the count line is enough. */
	fd = conn();
	EXCHANGE(fd, "*11\r\n", UNAUTH_MBULK);
	CLOSED(fd);
	close(fd);
	/* The 1M-argument PING: refused at once, nothing allocated for it. */
	fd = conn();
	EXCHANGE(fd, "*1000000\r\n$4\r\nPING\r\n", UNAUTH_MBULK);
	CLOSED(fd);
	close(fd);

	/* After AUTH (pipelined right behind it) the configured limits hold. */
	fd = conn();
	req.n = 0;
	blob_fmt(&req, "*2\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n", strlen(TOKEN), TOKEN);
	blob_str(&req, "*11\r\n$4\r\nPING\r\n");
	for (int i = 0; i < 10; i++)
		blob_str(&req, "$1\r\nx\r\n");
	blob_str(&req, "*2\r\n$4\r\nECHO\r\n$16385\r\n");
	for (int i = 0; i < 16385; i++)
		blob_add(&req, "e", 1);
	blob_str(&req, "\r\n");
	blob_str(&want, "+OK\r\n-ERR wrong number of arguments for 'ping' command\r\n$16385\r\n");
	for (int i = 0; i < 16385; i++)
		blob_add(&want, "e", 1);
	blob_str(&want, "\r\n");
	exchange_blob(fd, &req, &want, T);
	close(fd);

	/* Text: a line of 16384 bytes is read (a wrong token), one of 16385 closes. */
	fd = conn();
	req.n = 0;
	blob_str(&req, "auth ");
	while (req.n < 16384)
		blob_add(&req, "x", 1);
	blob_str(&req, "\n");
	EXCHANGE_N(fd, req.p, req.n, TEXT_BAD_TOKEN, strlen(TEXT_BAD_TOKEN));
	EXCHANGE(fd, "ping\n", "PONG\n");
	req.p[req.n - 1] = 'x';
	blob_str(&req, "\n");
	EXCHANGE_N(fd, req.p, req.n, TEXT_UNAUTH_LONG, strlen(TEXT_UNAUTH_LONG));
	CLOSED(fd);
	close(fd);
	/* Authenticated, the same line is just a wrong command. */
	fd = conn();
	EXCHANGE(fd, "auth " TOKEN "\n", "Done\n");
	req.p[0] = 'z';
	EXCHANGE_N(fd, req.p, req.n, TEXT_UNKNOWN, strlen(TEXT_UNKNOWN));
	close(fd);

	fprintf(stderr, "# before AUTH: daemon VmRSS %ld KiB at start, %ld after\n", rss0,
		rss_kb(pid));
	free(req.p);
	free(want.p);
	stop();
}
END_TEST

/* BF.EXISTS of a key of n bytes in the missing filter f: a large command, a small reply. */
static void big_exists(struct blob *req, struct blob *want, size_t n)
{
	req->n = want->n = 0;
	blob_fmt(req, "*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$%zu\r\n", n);
	for (size_t i = 0; i < n; i++)
		blob_add(req, "e", 1);
	blob_str(req, "\r\n");
	blob_str(want, ":0\r\n");
}

#define CLIENT_MEM_RESP "-ERR client buffers would pass max_client_memory; closing\r\n"
#define CLIENT_MEM_TEXT "Client Error: Client buffers would pass max_client_memory\n"
/* The key of each command of the max_client_memory case: 1.5 MB. */
#define BIG_KEY 1500000

/*
 * max_client_memory bounds what all connections hold together. With 4 MiB, two clients that
 * announce 1.5 MB keys and send them slowly fit (their input buffers are reserved when the
 * header arrives); a third one's would pass the total (4.5 MB), so it is told so and closed,
 * before anything is allocated for it. The first two are served in full, and once they are done the
 * memory is free for the next one. Text: a line growing past the total is refused likewise.
 */
START_TEST(test_client_memory_cap)
{
	struct blob req = {0}, want = {0};
	int a, b, c, ctl;
	size_t head;

	start(CONF("max_client_memory = 4m\nmax_line_bytes = 8m\nmax_key_bytes = 2m\n"), NULL);
	ctl = conn();
	EXCHANGE(ctl, RESP_PING, "+PONG\r\n");
	big_exists(&req, &want, BIG_KEY);
	head = strlen("*3\r\n$9\r\nBF.EXISTS\r\n$1\r\nf\r\n$1500000\r\n") + 1000;
	a = conn();
	b = conn();
	ck_assert_int_eq(itest_send(a, req.p, head), 0);
	ck_assert_int_eq(itest_send(b, req.p, head), 0);
	/* Both are read (the daemon reads clients in turn; the sleep covers a loaded machine). */
	itest_sleep_ms(200 * slowdown());
	EXCHANGE(ctl, RESP_PING, "+PONG\r\n");
	c = conn();
	EXCHANGE_N(c, req.p, head, CLIENT_MEM_RESP, strlen(CLIENT_MEM_RESP));
	CLOSED(c);
	close(c);
	ck_assert(itest_log_wait(&d,
				 "client buffers would pass max_client_memory (4194304); "
				 "closing",
				 T));
	/* The first two finish and get their exact replies. */
	ck_assert_int_eq(itest_send(a, req.p + head, req.n - head), 0);
	ck_assert_int_eq(itest_send(b, req.p + head, req.n - head), 0);
	{
		struct blob none = {0};

		exchange_blob(a, &none, &want, T);
		exchange_blob(b, &none, &want, T);
	}
	close(a);
	close(b);
	EXCHANGE(ctl, RESP_PING, "+PONG\r\n");
	/* Their buffers are given back: a new one fits again, twice over. */
	a = conn();
	exchange_blob(a, &req, &want, T);
	exchange_blob(a, &req, &want, T);
	close(a);

	/* Text: a 6 MB line (under max_line_bytes) grows its buffer past the total. */
	a = conn();
	req.n = 0;
	blob_str(&req, "m f");
	while (req.n < 6000000)
		blob_str(&req, " k");
	blob_str(&req, "\n");
	/* The daemon may close while this is still being sent; what counts is its answer. */
	(void)itest_send(a, req.p, req.n);
	ck_assert_int_eq(itest_recv_n(a, want.p, strlen(CLIENT_MEM_TEXT), T),
			 (ssize_t)strlen(CLIENT_MEM_TEXT));
	ck_assert_mem_eq(want.p, CLIENT_MEM_TEXT, strlen(CLIENT_MEM_TEXT));
	CLOSED(a);
	close(a);
	EXCHANGE(ctl, RESP_PING, "+PONG\r\n");
	close(ctl);
	free(req.p);
	free(want.p);
	stop();
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Glob patterns (issue 17 item 4) */

#define NAMES	     500
#define NAME_LEN     200
#define PATTERN_LONG "-ERR pattern longer than 16384 bytes\r\n"

/*
 * KEYS, SCAN ... MATCH and CONFIG GET refuse a pattern over 16384 bytes with a clear error
 * (the 4 MiB pattern against 500 filters took 21.7 s, all clients waiting), and a
 * pathological pattern of the largest size against 500 names of 200 bytes is answered at once,
 * with the right names.
 */
START_TEST(test_glob_bounded)
{
	struct blob req = {0}, want = {0}, pat = {0};
	char name[NAME_LEN + 1];
	int fd, other;
	int64_t t0, dt;

	start(NULL, NULL);
	fd = conn();
	other = conn();
	/* 500 filters of 200-byte names, one of them with a 'b' in it. */
	for (int i = 0; i < NAMES; i++) {
		memset(name, 'a', NAME_LEN);
		if (i == 0)
			name[150] = 'b';
		else
			snprintf(name + NAME_LEN - 4, 5, "%04d", i);
		blob_fmt(&req, "*4\r\n$10\r\nBF.RESERVE\r\n$%d\r\n", NAME_LEN);
		blob_add(&req, name, NAME_LEN);
		blob_str(&req, "\r\n$4\r\n0.01\r\n$3\r\n100\r\n");
		blob_str(&want, "+OK\r\n");
	}
	exchange_blob(fd, &req, &want, T * slowdown());

	/* "*" + 99 'a' + "b" + stars up to 16384 bytes: 100 restarts of 100 steps per name. */
	blob_str(&pat, "*");
	for (int i = 0; i < 99; i++)
		blob_str(&pat, "a");
	blob_str(&pat, "b");
	while (pat.n < 16384)
		blob_str(&pat, "*");
	req.n = want.n = 0;
	blob_fmt(&req, "*2\r\n$4\r\nKEYS\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	memset(name, 'a', NAME_LEN);
	name[150] = 'b';
	blob_fmt(&want, "*1\r\n$%d\r\n", NAME_LEN);
	blob_add(&want, name, NAME_LEN);
	blob_str(&want, "\r\n");
	t0 = itest_now_ms();
	exchange_blob(fd, &req, &want, T);
	dt = itest_now_ms() - t0;
	fprintf(stderr, "# KEYS with a 16384-byte pattern over %d names: %" PRId64 " ms\n", NAMES,
		dt);
	ck_assert_int_lt(dt, 1000 * slowdown());
	/* "*[" and an unclosed class of 16382 bytes: tried at every byte of every name (the
	 * matcher before the fix scanned the class each time: 2.7 s here, 43 s at 256 KiB). */
	pat.n = 0;
	blob_str(&pat, "*[");
	while (pat.n < 16384)
		blob_str(&pat, "c");
	req.n = 0;
	blob_fmt(&req, "*2\r\n$4\r\nKEYS\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	t0 = itest_now_ms();
	EXCHANGE_N(fd, req.p, req.n, "*0\r\n", 4);
	dt = itest_now_ms() - t0;
	fprintf(stderr, "# KEYS with a 16384-byte class over %d names: %" PRId64 " ms\n", NAMES,
		dt);
	ck_assert_int_lt(dt, 1000 * slowdown());

	/* One byte more: refused, by each of the three commands. */
	blob_str(&pat, "*");
	req.n = 0;
	blob_fmt(&req, "*2\r\n$4\r\nKEYS\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	blob_fmt(&req, "*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	blob_fmt(&req, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	EXCHANGE_N(fd, req.p, req.n, PATTERN_LONG PATTERN_LONG PATTERN_LONG,
		   3 * strlen(PATTERN_LONG));

	/* A 4 MiB pattern: refused at once (before the fix: about 11 minutes on the loop, every
	 * client waiting); another client is answered meanwhile. */
	pat.n = 0;
	blob_str(&pat, "*[");
	while (pat.n < 4u << 20)
		blob_str(&pat, "c");
	req.n = 0;
	blob_fmt(&req, "*2\r\n$4\r\nKEYS\r\n$%zu\r\n", pat.n);
	blob_add(&req, pat.p, pat.n);
	blob_str(&req, "\r\n");
	t0 = itest_now_ms();
	EXCHANGE_N(fd, req.p, req.n, PATTERN_LONG, strlen(PATTERN_LONG));
	EXCHANGE(other, RESP_PING, "+PONG\r\n");
	dt = itest_now_ms() - t0;
	fprintf(stderr, "# KEYS with a 4 MiB pattern: refused in %" PRId64 " ms\n", dt);
	ck_assert_int_lt(dt, 1000 * slowdown());

	/* SCAN and CONFIG GET match as before. */
	req.n = want.n = 0;
	blob_str(&req, "*8\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$5\r\n*b*a*\r\n$4\r\nTYPE\r\n"
		       "$9\r\nMBbloom--\r\n$5\r\nCOUNT\r\n$4\r\n1000\r\n");
	blob_fmt(&want, "*2\r\n$1\r\n0\r\n*1\r\n$%d\r\n", NAME_LEN);
	blob_add(&want, name, NAME_LEN);
	blob_str(&want, "\r\n");
	exchange_blob(fd, &req, &want, T);
	EXCHANGE(fd, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$6\r\n*MEMOR\r\n", "*0\r\n");
	/* The harness's snapshot_interval (5 s by default): a checkpoint after any change. */
	EXCHANGE(fd, "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nSAV?\r\n",
		 "*2\r\n$4\r\nsave\r\n$3\r\n5 1\r\n");
	close(fd);
	close(other);
	free(req.p);
	free(want.p);
	free(pat.p);
	stop();
}
END_TEST

/* Cases left out of this build, reported as TAP skips. */
static struct check_skip skips[3];
static size_t nskips;

static Suite *hostile_suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *slow = tcase_create("slowloris");
	TCase *never = tcase_create("never-reader");
	TCase *flood = tcase_create("flood");
	TCase *mem = tcase_create("memory-and-glob");

	/* Each case takes a few seconds; under valgrind several times that. */
	tcase_set_timeout(slow, 120);
	tcase_add_test(slow, test_slowloris_text);
	tcase_add_test(slow, test_slowloris_holds_no_slot);
	tcase_add_test(slow, test_slowloris_http);
	tcase_add_test(slow, test_slowloris_http_holds_no_slot);
	tcase_add_test(slow, test_slowloris_http_keepalive);
	tcase_add_test(slow, test_http_keepalive_idle_kept);
	suite_add_tcase(s, slow);

	tcase_set_timeout(never, 120);
	tcase_add_test(never, test_never_reader_text);
	tcase_add_test(never, test_never_reader_resp);
	tcase_add_test(never, test_slow_reader_kept);
	tcase_add_test(never, test_http_slow_reader_kept);
	suite_add_tcase(s, never);

	tcase_set_timeout(flood, 120);
	tcase_add_test(flood, test_flood_text);
	tcase_add_test(flood, test_flood_http);
	suite_add_tcase(s, flood);

	tcase_set_timeout(mem, 300);
#if defined(__SANITIZE_ADDRESS__)
	/* These measure the daemon's memory (VmRSS, and what max_client_memory counts against
	 * the heap); under ASan its redzones, shadow and quarantine are most of it. */
	skips[nskips++] = (struct check_skip){"test_idle_after_huge_resp", "RSS under ASan"};
	skips[nskips++] = (struct check_skip){"test_idle_after_huge_text", "RSS under ASan"};
	skips[nskips++] = (struct check_skip){"test_client_memory_cap", "memory under ASan"};
#else
	tcase_add_test(mem, test_idle_after_huge_resp);
	tcase_add_test(mem, test_idle_after_huge_text);
#endif
	tcase_add_test(mem, test_unauth_caps);
#if !defined(__SANITIZE_ADDRESS__)
	tcase_add_test(mem, test_client_memory_cap);
#endif
	tcase_add_test(mem, test_glob_bounded);
	suite_add_tcase(s, mem);
	return s;
}

int main(void)
{
	Suite *s = hostile_suite();

	return check_run_with_skips(s, skips, nskips);
}
