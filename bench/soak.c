/* SPDX-License-Identifier: MIT */
/*
 * bench/soak: mixed load on a running blossomd over its three protocols for a long time, with
 * the daemon's RSS, open fds and per-second p99 latency sampled every second (issue 7).
 * Plain blocking sockets and pthreads, libc only. Driven by the bench/soak script, which
 * builds and starts the daemon; it can also be pointed at a daemon by hand:
 *
 *   soak --port N --http-port N --pid PID [--seconds 600] [--warmup 60] [--load 1]
 *        [--no-churn] [--out FILE.csv] [--data-dir DIR]
 *
 * Four client threads run until the time is up, each on a fixed schedule (the rates below
 * times --load; --load 0 sends as fast as the replies come back). Every reply is checked: an
 * unexpected reply, an I/O error or a timeout (10 s) counts as one error (the first ones are
 * printed on stderr) and the thread reconnects.
 *   resp   one connection, 1000 batches/s of 20 pipelined commands: BF.MADD of 8 keys on
 *          soak-resp (scalable, capacity 50000, keys from a space of 500000, so it grows to
 *          4 layers in the first seconds and then stays), BF.EXISTS and BF.MEXISTS of keys
 *          just added (must be 1; one never-added key may be either), BF.ADD + BF.DEL of a
 *          key on soak-respc (counting; the delete must succeed).
 *   text   one connection, 1000 batches/s of 24 pipelined lines, the same on soak-text and
 *          soak-textc: b and m of 8 keys (m all Yes), s then c (Yes), s then d (Yes).
 *   http   one keep-alive connection, 500 rounds/s of 6 requests: POST add and check of 8 keys
 *          on soak-http (capacity 5000, keyspace 50000; check all true), PUT then GET
 *          /keys/{key} (present), POST add then delete of 4 keys on soak-httpc (counting;
 *          all deleted); each must answer 200.
 *   churn  4 cycles/s, each over new connections of all three protocols: create a small
 *          filter (capacity 1000, plain or counting), fill it with 4000 keys so it grows to
 *          3 layers, check its layers, sometimes snapshot it (flush / POST .../snapshot),
 *          send bad input that must be refused (unknown command, key over max_key_bytes,
 *          missing filter, wrong arity, malformed JSON, now and then an over-long line, a
 *          RESP framing error, a body over max_body_bytes), drop it (drop / DEL / DELETE),
 *          and close the connection in one of four ways (close, quit, reset, half a command
 *          then close). --no-churn leaves this thread out.
 * An op is one command (one request over HTTP); its latency runs from the write of its batch
 * to the read that completed its reply, and goes into a log-linear histogram (16 sub-buckets
 * per power of two, so within 6 %) of its protocol and second.
 *
 * Every second the main thread writes one CSV line (header first):
 *   t, rss_kib (VmRSS of /proc/PID/status), fds (entries of /proc/PID/fd), conns_tcp and
 *   conns_http, filters, filter_bytes, snapshots and snapshot_failures (from GET /metrics),
 *   files (entries of --data-dir, or -1), then per protocol the ops of that second and their
 *   p99 in µs (upper edge of the bucket; empty when no op), and errors so far.
 * At the end it prints a summary (figures at the end of the warm-up, at the end, extremes
 * after warm-up, the least-squares slope of RSS after warm-up, ops and p99 per protocol).
 * Exit status 0 whatever the figures; 1 if setup fails or the daemon disappears.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bench/progress.h"

enum proto { P_RESP, P_TEXT, P_HTTP, P_CHURN, NPROTO };
static const char *const proto_name[NPROTO] = {"resp", "text", "http", "churn"};

/* The long-lived filters: capacity, and the keyspace their keys are drawn from (ten times
 * the capacity, so a filter grows to 4 layers, 15 times its capacity, and then stays). */
#define MAIN_CAPACITY 50000
#define MAIN_KEYSPACE 500000
#define HTTP_CAPACITY 5000
#define HTTP_KEYSPACE 50000
/* Paced load at --load 1: batches (or rounds, or cycles) per second of each worker. */
#define RESP_RATE   1000
#define TEXT_RATE   1000
#define HTTP_RATE   500
#define CHURN_RATE  4
#define KEY_MAX	    64	/* bytes of a generated key, NUL included */
#define FRESH_EVERY 100 /* batches (HTTP: rounds / 2) between two fresh keys */
#define STR_(x)	    #x
#define STR(x)	    STR_(x)
/* The churn filters: capacity, and keys added to each (1000 + 2000 < 4000: 3 layers). */
#define CHURN_CAPACITY 1000
#define CHURN_KEYS     4000
#define CHURN_LAYERS   3
/* max_key_bytes is 64 KiB by default: one byte more is refused. */
#define LONG_KEY (64 * 1024 + 1)
/* max_line_bytes is 1 MiB by default. */
#define LONG_LINE (1024 * 1024 + 4096)
/* max_body_bytes is 16 MiB by default. */
#define HUGE_BODY    "17000000"
#define IO_TIMEOUT_S 10
#define MAX_REPORTED 30

/* ---------------------------------------------------------------------------------------- */
/* Options, clock, errors */

static struct {
	int port, http_port;
	long pid;
	unsigned seconds, warmup;
	double load;
	bool no_churn;
	const char *out, *data_dir;
} opt = {.seconds = 600, .warmup = UINT32_MAX, .load = 1};

static uint64_t start_ns;
static atomic_bool stopping;
static atomic_uint_fast64_t errors[NPROTO];
static atomic_uint reported;
static atomic_uint_fast64_t churn_cycles, churn_conns, churn_drops;

static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("soak: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * Pacing: a worker runs rate x --load times a second, on a fixed schedule (after falling
 * more than 100 ms behind, it starts over from now rather than bursting); --load 0 means
 * as fast as replies come back.
 */
struct pacer {
	uint64_t period, next;
};

static void pace_init(struct pacer *p, unsigned rate)
{
	p->period = opt.load > 0 ? (uint64_t)(1e9 / (rate * opt.load)) : 0;
	p->next = now_ns();
}

static void pace_wait(struct pacer *p)
{
	uint64_t t = now_ns();

	if (!p->period)
		return;
	if (t > p->next + 100000000u)
		p->next = t;
	sleep_until(p->next);
	p->next += p->period;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory");
	return p;
}

/* One error of protocol p: counted, and printed while few have been. */
static void fail(enum proto p, const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&errors[p], 1);
	if (atomic_fetch_add(&reported, 1) >= MAX_REPORTED)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "soak: t=%.3f %s: ", (double)(now_ns() - start_ns) / 1e9, proto_name[p]);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* A reply shown in an error message: printable, cut to 120 bytes. */
static const char *shown(const char *p, size_t n)
{
	static _Thread_local char buf[160];
	size_t i, o = 0;

	for (i = 0; i < n && o < 120; i++)
		buf[o++] = p[i] >= 32 && p[i] < 127 ? p[i] : '.';
	if (i < n) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Latency histograms: per second, per protocol, log-linear buckets of nanoseconds */

#define SUB_BITS 4
#define SUB	 (1u << SUB_BITS)
#define MAX_MSB	 40 /* 2^41 ns (about 37 minutes) and above share the last bucket */
#define NBUCKETS ((MAX_MSB - SUB_BITS + 2) * SUB)

typedef atomic_uint_least32_t histogram[NBUCKETS];

static histogram (*hist)[NPROTO]; /* hist[second][protocol] */
static unsigned nhist;

static unsigned bucket_of(uint64_t v)
{
	if (v < SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	if (msb > MAX_MSB)
		return NBUCKETS - 1;
	unsigned shift = msb - SUB_BITS;
	return (shift + 1) * SUB + (unsigned)((v >> shift) & (SUB - 1));
}

/* The largest value of bucket b. */
static uint64_t bucket_top(unsigned b)
{
	if (b < SUB)
		return b;
	unsigned shift = b / SUB - 1;
	uint64_t mant = b % SUB + SUB;
	return ((mant + 1) << shift) - 1;
}

/* n ops of protocol p sent at t0 and answered at t1. */
static void record(enum proto p, uint64_t t0, uint64_t t1, unsigned n)
{
	uint64_t sec = (t1 - start_ns) / 1000000000u;

	if (sec >= nhist)
		sec = nhist - 1;
	atomic_fetch_add_explicit(&hist[sec][p][bucket_of(t1 - t0)], n, memory_order_relaxed);
}

/* Sum of h into acc; returns the count of h. */
static uint64_t hist_add(uint64_t *acc, histogram *h)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < NBUCKETS; b++) {
		uint32_t v = atomic_load_explicit(&(*h)[b], memory_order_relaxed);
		acc[b] += v;
		n += v;
	}
	return n;
}

/* The q-quantile of a histogram of n values, in µs (upper bucket edge); NAN when empty. */
static double quantile_us(const uint64_t *h, uint64_t n, double q)
{
	uint64_t rank = (uint64_t)ceil(q * (double)n), seen = 0;

	if (n == 0)
		return NAN;
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += h[b];
		if (seen >= rank)
			return (double)bucket_top(b) / 1000.0;
	}
	return (double)bucket_top(NBUCKETS - 1) / 1000.0;
}

/* ---------------------------------------------------------------------------------------- */
/* Growing byte buffers */

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_reserve(struct sbuf *b, size_t more)
{
	if (b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	b->p = realloc(b->p, cap);
	if (!b->p)
		die("out of memory");
	b->cap = cap;
}

static void sb_add(struct sbuf *b, const void *p, size_t n)
{
	sb_reserve(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) sb_fmt(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sb_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void sb_reset(struct sbuf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

/* ---------------------------------------------------------------------------------------- */
/* Connections: blocking sockets with timeouts, a read buffer */

struct conn {
	int fd;
	char *buf;
	size_t cap, start, end;
	const char *why; /* what the last failed read or write ran into */
	int err;	 /* its errno, or 0 at EOF */
};

static int conn_open(struct conn *c, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct timeval tv = {IO_TIMEOUT_S, 0};
	int one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->start = c->end = 0;
	if (!c->buf) {
		c->cap = 65536;
		c->buf = xmalloc(c->cap);
	}
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		c->why = strerror(errno);
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		c->why = strerror(errno);
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	return 0;
}

/* Close; reset: with an RST (SO_LINGER 0) instead of a FIN. */
static void conn_close(struct conn *c, bool reset)
{
	if (c->fd < 0)
		return;
	if (reset) {
		struct linger l = {1, 0};
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	close(c->fd);
	c->fd = -1;
}

static int conn_send(struct conn *c, const void *p, size_t n)
{
	const char *q = p;

	while (n) {
		ssize_t w = send(c->fd, q, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			c->why = errno == EAGAIN ? "send timed out" : strerror(errno);
			return -1;
		}
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read more into the buffer: 1, or 0 at EOF, or -1 on an error or timeout. */
static int conn_fill(struct conn *c)
{
	if (c->start > 0 && c->start == c->end)
		c->start = c->end = 0;
	if (c->end == c->cap) {
		if (c->start > 0) {
			memmove(c->buf, c->buf + c->start, c->end - c->start);
			c->end -= c->start;
			c->start = 0;
		} else {
			c->cap *= 2;
			c->buf = realloc(c->buf, c->cap);
			if (!c->buf)
				die("out of memory");
		}
	}
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + c->end, c->cap - c->end, 0);
		if (r > 0) {
			c->end += (size_t)r;
			return 1;
		}
		if (r == 0) {
			c->why = "connection closed by the daemon";
			c->err = 0;
			return 0;
		}
		if (errno == EINTR)
			continue;
		c->err = errno;
		c->why = errno == EAGAIN ? "no reply within 10 s" : strerror(errno);
		return -1;
	}
}

/* The next line, without its "\n" or "\r\n", NUL-terminated in place; -1 at EOF or error. */
static int conn_line(struct conn *c, char **line, size_t *len)
{
	size_t scanned = 0;

	for (;;) {
		char *nl = memchr(c->buf + c->start + scanned, '\n', c->end - c->start - scanned);
		if (nl) {
			*line = c->buf + c->start;
			*len = (size_t)(nl - *line);
			if (*len && (*line)[*len - 1] == '\r')
				(*len)--;
			(*line)[*len] = '\0';
			c->start = (size_t)(nl - c->buf) + 1;
			return 0;
		}
		scanned = c->end - c->start;
		if (conn_fill(c) <= 0)
			return -1;
	}
}

/* The next n bytes (valid until the next read); -1 at EOF or error. */
static int conn_bytes(struct conn *c, size_t n, char **p)
{
	while (c->end - c->start < n) {
		if (c->cap - c->start < n && c->start > 0) {
			memmove(c->buf, c->buf + c->start, c->end - c->start);
			c->end -= c->start;
			c->start = 0;
		}
		if (conn_fill(c) <= 0)
			return -1;
	}
	*p = c->buf + c->start;
	c->start += n;
	return 0;
}

/* True if the daemon closes the connection (nothing more to read) within the timeout. */
static bool conn_expect_eof(struct conn *c)
{
	int r;

	c->start = c->end = 0;
	while ((r = conn_fill(c)) > 0)
		c->start = c->end = 0;
	return r == 0 || c->err == ECONNRESET;
}

/* ---------------------------------------------------------------------------------------- */
/* Keys */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* A key of a long-lived filter's keyspace: "k" and a number below space. */
static int main_key(char *buf, uint64_t *rng, uint64_t space)
{
	return sprintf(buf, "k%llu", (unsigned long long)(splitmix(rng) % space));
}

/*
 * A key new to the run ("fresh-", the start time, who, n). Each long-lived plain filter gets
 * about 10 a second, so it keeps changing (and being snapshotted) after its keyspace is all
 * in, while growing by too little (6000 keys in 10 minutes) to need another layer.
 */
static void fresh_key(char *buf, const char *who, uint64_t n)
{
	sprintf(buf, "fresh-%llx-%s-%llu", (unsigned long long)start_ns, who,
		(unsigned long long)n);
}

/* A key never added to anything. */
static int absent_key(char *buf, uint64_t *rng)
{
	return sprintf(buf, "never-%llu", (unsigned long long)splitmix(rng));
}

/* ---------------------------------------------------------------------------------------- */
/* RESP */

static void resp_begin(struct sbuf *b, unsigned argc)
{
	sb_fmt(b, "*%u\r\n", argc);
}

static void resp_arg(struct sbuf *b, const char *p, size_t n)
{
	sb_fmt(b, "$%zu\r\n", n);
	sb_add(b, p, n);
	sb_add(b, "\r\n", 2);
}

static void resp_args(struct sbuf *b, unsigned argc, ...)
{
	va_list ap;

	resp_begin(b, argc);
	va_start(ap, argc);
	for (unsigned i = 0; i < argc; i++) {
		const char *s = va_arg(ap, const char *);
		resp_arg(b, s, strlen(s));
	}
	va_end(ap);
}

/* What one RESP reply must be. */
enum resp_shape {
	R_LINE,	  /* exactly text */
	R_PREFIX, /* a line starting with text */
	R_BIT,	  /* :0 or :1 */
	R_ONE,	  /* :1 */
	R_ARRAY,  /* n elements of :0 or :1, the first ones of them :1 */
	R_MIN,	  /* :N with N >= n */
};

struct resp_expect {
	enum resp_shape shape;
	const char *text;
	unsigned n, ones;
};

/* Read one reply and check it against e; 0 or -1 (counted as an error of p). */
static int resp_check(struct conn *c, enum proto p, const char *what, const struct resp_expect *e)
{
	char *line;
	size_t len;

	if (conn_line(c, &line, &len)) {
		fail(p, "%s: %s", what, c->why);
		return -1;
	}
	switch (e->shape) {
	case R_LINE:
		if (strcmp(line, e->text) == 0)
			return 0;
		break;
	case R_PREFIX:
		if (strncmp(line, e->text, strlen(e->text)) == 0)
			return 0;
		break;
	case R_BIT:
		if (strcmp(line, ":0") == 0 || strcmp(line, ":1") == 0)
			return 0;
		break;
	case R_ONE:
		if (strcmp(line, ":1") == 0)
			return 0;
		break;
	case R_MIN:
		if (line[0] == ':' && strtoull(line + 1, NULL, 10) >= e->n)
			return 0;
		break;
	case R_ARRAY: {
		char head[32];
		snprintf(head, sizeof(head), "*%u", e->n);
		if (strcmp(line, head) != 0)
			break;
		for (unsigned i = 0; i < e->n; i++) {
			if (conn_line(c, &line, &len)) {
				fail(p, "%s: %s", what, c->why);
				return -1;
			}
			if (strcmp(line, ":1") != 0 && (i < e->ones || strcmp(line, ":0") != 0)) {
				fail(p, "%s: element %u of %u is '%s'", what, i, e->n,
				     shown(line, len));
				return -1;
			}
		}
		return 0;
	}
	}
	fail(p, "%s: unexpected reply '%s'", what, shown(line, len));
	return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Text protocol */

/* What one text reply must be. */
enum text_shape {
	T_LINE,	 /* exactly text */
	T_YESNO, /* n words "Yes"/"No", the first ones of them Yes */
};

struct text_expect {
	enum text_shape shape;
	const char *text;
	unsigned n, yes;
};

static int text_check(struct conn *c, enum proto p, const char *what, const struct text_expect *e)
{
	char *line, *w;
	size_t len;
	unsigned i = 0;

	if (conn_line(c, &line, &len)) {
		fail(p, "%s: %s", what, c->why);
		return -1;
	}
	if (e->shape == T_LINE) {
		if (strcmp(line, e->text) == 0)
			return 0;
		fail(p, "%s: expected '%s', got '%s'", what, e->text, shown(line, len));
		return -1;
	}
	const char *orig = shown(line, len);
	for (w = line; i < e->n; i++) {
		if (strncmp(w, "Yes", 3) == 0 && (w[3] == ' ' || w[3] == '\0'))
			w += 3;
		else if (i >= e->yes && strncmp(w, "No", 2) == 0 && (w[2] == ' ' || w[2] == '\0'))
			w += 2;
		else
			break;
		if (*w == ' ' && i + 1 < e->n)
			w++;
	}
	if (i == e->n && *w == '\0')
		return 0;
	fail(p, "%s: expected %u Yes/No (%u Yes first), got '%s'", what, e->n, e->yes, orig);
	return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* HTTP/1.1 client: one request at a time on a keep-alive connection */

struct http_reply {
	int status;
	bool close; /* the daemon said Connection: close */
	struct sbuf body;
};

/* Send a request and read its reply; 0, or -1 on an I/O error or a reply that does not parse
 * (c->why says which). */
static int http_do(struct conn *c, const char *method, const char *path, const char *body,
		   size_t blen, struct http_reply *r, struct sbuf *req)
{
	char *line, *p;
	size_t len, clen = 0;
	bool have_len = false, chunked = false;

	sb_reset(req);
	sb_fmt(req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, path);
	if (body)
		sb_fmt(req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
	sb_str(req, "\r\n");
	if (conn_send(c, req->p, req->len) || (body && conn_send(c, body, blen)))
		return -1;

	sb_reset(&r->body);
	r->close = false;
	if (conn_line(c, &line, &len))
		return -1;
	if (strncmp(line, "HTTP/1.1 ", 9) != 0 || len < 12) {
		c->why = "not an HTTP/1.1 status line";
		return -1;
	}
	r->status = atoi(line + 9);
	for (;;) {
		if (conn_line(c, &line, &len))
			return -1;
		if (len == 0)
			break;
		if (strncasecmp(line, "Content-Length:", 15) == 0) {
			clen = strtoull(line + 15, NULL, 10);
			have_len = true;
		} else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
			   strstr(line, "chunked")) {
			chunked = true;
		} else if (strncasecmp(line, "Connection:", 11) == 0 && strcasestr(line, "close")) {
			r->close = true;
		}
	}
	if (chunked) {
		for (;;) {
			if (conn_line(c, &line, &len))
				return -1;
			size_t n = strtoull(line, NULL, 16);
			if (n == 0)
				break;
			if (conn_bytes(c, n, &p))
				return -1;
			sb_add(&r->body, p, n);
			if (conn_line(c, &line, &len))
				return -1;
		}
		do {
			if (conn_line(c, &line, &len))
				return -1;
		} while (len);
	} else if (have_len) {
		if (conn_bytes(c, clen, &p))
			return -1;
		sb_add(&r->body, p, clen);
	} else if (r->status != 204 && r->status != 304) {
		c->why = "a reply without Content-Length";
		return -1;
	}
	sb_reserve(&r->body, 0); /* a body, if empty, is still a string */
	r->body.p[r->body.len] = '\0';
	return 0;
}

/*
 * Check a {"results":[...]} body: n booleans, all true if all_true. Returns 0 or -1.
 */
static int json_results(const char *body, unsigned n, bool all_true)
{
	const char *p = strstr(body, "\"results\":[");
	unsigned i = 0;

	if (!p)
		return -1;
	p += 11;
	while (*p != ']') {
		if (strncmp(p, "true", 4) == 0)
			p += 4;
		else if (!all_true && strncmp(p, "false", 5) == 0)
			p += 5;
		else
			return -1;
		i++;
		if (*p == ',')
			p++;
		else if (*p != ']')
			return -1;
	}
	return i == n ? 0 : -1;
}

/* {"keys":["k1","k2",...]} */
static void json_keys(struct sbuf *b, char (*keys)[KEY_MAX], unsigned n)
{
	sb_reset(b);
	sb_str(b, "{\"keys\":[");
	for (unsigned i = 0; i < n; i++)
		sb_fmt(b, "%s\"%s\"", i ? "," : "", keys[i]);
	sb_str(b, "]}");
}

/* One checked HTTP request of protocol p: status must be want (and, when results > 0 or
 * all_true, a results array of that many booleans). Records its latency. */
struct http_client {
	struct conn c;
	struct http_reply r;
	struct sbuf req;
};

static int http_call(struct http_client *h, enum proto p, const char *method, const char *path,
		     const char *body, size_t blen, int want)
{
	uint64_t t0 = now_ns();

	if (http_do(&h->c, method, path, body, blen, &h->r, &h->req)) {
		fail(p, "%s %s: %s", method, path, h->c.why);
		return -1;
	}
	record(p, t0, now_ns(), 1);
	if (h->r.status != want) {
		fail(p, "%s %s: status %d (expected %d): %s", method, path, h->r.status, want,
		     shown(h->r.body.p, h->r.body.len));
		return -1;
	}
	return 0;
}

static int http_results(struct http_client *h, enum proto p, const char *what, unsigned n,
			bool all_true)
{
	if (json_results(h->r.body.p, n, all_true) == 0)
		return 0;
	fail(p, "%s: expected %u %s results, got %s", what, n, all_true ? "true" : "boolean",
	     shown(h->r.body.p, h->r.body.len));
	return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Setup of the long-lived filters */

static void setup_filters(void)
{
	struct conn c = {.fd = -1};
	struct http_client h = {.c = {.fd = -1}};
	struct sbuf b = {0};
	char *line;
	size_t len;
	static const char *const text_create[] = {
	    "create soak-text capacity=" STR(MAIN_CAPACITY) " prob=0.01\n",
	    "create soak-textc capacity=" STR(MAIN_CAPACITY) " prob=0.01 type=counting\n",
	};

	if (conn_open(&c, opt.port))
		die("cannot connect to port %d: %s", opt.port, c.why);
	for (unsigned i = 0; i < 2; i++) {
		if (conn_send(&c, text_create[i], strlen(text_create[i])) ||
		    conn_line(&c, &line, &len))
			die("text create: %s", c.why);
		if (strcmp(line, "Done") != 0 && strcmp(line, "Exists") != 0)
			die("text create: '%s'", shown(line, len));
	}
	conn_close(&c, false);

	if (conn_open(&c, opt.port))
		die("cannot connect to port %d: %s", opt.port, c.why);
	resp_args(&b, 4, "BF.RESERVE", "soak-resp", "0.01", STR(MAIN_CAPACITY));
	resp_args(&b, 5, "BF.RESERVE", "soak-respc", "0.01", STR(MAIN_CAPACITY), "COUNTING");
	if (conn_send(&c, b.p, b.len))
		die("RESP: %s", c.why);
	for (unsigned i = 0; i < 2; i++) {
		if (conn_line(&c, &line, &len))
			die("BF.RESERVE: %s", c.why);
		if (strcmp(line, "+OK") != 0 && strcmp(line, "-ERR item exists") != 0)
			die("BF.RESERVE: '%s'", shown(line, len));
	}
	conn_close(&c, false);

	if (conn_open(&h.c, opt.http_port))
		die("cannot connect to HTTP port %d: %s", opt.http_port, h.c.why);
	static const char *const http_create[][2] = {
	    {"/v1/filters/soak-http", "{\"capacity\":" STR(HTTP_CAPACITY) ",\"error_rate\":0.01}"},
	    {"/v1/filters/soak-httpc",
	     "{\"capacity\":" STR(HTTP_CAPACITY) ",\"error_rate\":0.01,\"type\":\"counting\"}"},
	};
	for (unsigned i = 0; i < 2; i++) {
		const char *body = http_create[i][1];
		if (http_do(&h.c, "PUT", http_create[i][0], body, strlen(body), &h.r, &h.req))
			die("PUT %s: %s", http_create[i][0], h.c.why);
		if (h.r.status != 201 && h.r.status != 409)
			die("PUT %s: status %d", http_create[i][0], h.r.status);
	}
	conn_close(&h.c, false);
	free(c.buf);
	free(h.c.buf);
	free(h.r.body.p);
	free(h.req.p);
	free(b.p);
}

/* ---------------------------------------------------------------------------------------- */
/* Workers */

#define RESP_ROUNDS 4 /* of 5 commands: 20 per batch */

static void *worker_resp(void *arg)
{
	struct conn c = {.fd = -1};
	struct sbuf b = {0};
	struct resp_expect ex[RESP_ROUNDS * 5];
	uint64_t batches = 0;
	char keys[8][KEY_MAX], absent[KEY_MAX], ck[KEY_MAX];
	uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + now_ns();

	struct pacer pace;

	pace_init(&pace, RESP_RATE);
	while (!atomic_load(&stopping)) {
		pace_wait(&pace);
		if (c.fd < 0 && conn_open(&c, opt.port)) {
			fail(P_RESP, "connect: %s", c.why);
			sleep(1);
			continue;
		}
		unsigned n = 0;
		sb_reset(&b);
		for (unsigned r = 0; r < RESP_ROUNDS; r++) {
			for (unsigned i = 0; i < 8; i++)
				main_key(keys[i], &rng, MAIN_KEYSPACE);
			if (r == 0 && batches % FRESH_EVERY == 0)
				fresh_key(keys[7], "resp", batches);
			resp_begin(&b, 10);
			resp_arg(&b, "BF.MADD", 7);
			resp_arg(&b, "soak-resp", 9);
			for (unsigned i = 0; i < 8; i++)
				resp_arg(&b, keys[i], strlen(keys[i]));
			ex[n++] = (struct resp_expect){R_ARRAY, NULL, 8, 0};
			resp_args(&b, 3, "BF.EXISTS", "soak-resp", keys[r]);
			ex[n++] = (struct resp_expect){R_ONE, NULL, 0, 0};
			absent_key(absent, &rng);
			resp_args(&b, 8, "BF.MEXISTS", "soak-resp", keys[0], keys[1], keys[2],
				  keys[3], keys[4], absent);
			ex[n++] = (struct resp_expect){R_ARRAY, NULL, 6, 5};
			main_key(ck, &rng, MAIN_KEYSPACE);
			resp_args(&b, 3, "BF.ADD", "soak-respc", ck);
			ex[n++] = (struct resp_expect){R_BIT, NULL, 0, 0};
			resp_args(&b, 3, "BF.DEL", "soak-respc", ck);
			ex[n++] = (struct resp_expect){R_ONE, NULL, 0, 0};
		}
		batches++;
		uint64_t t0 = now_ns();
		if (conn_send(&c, b.p, b.len)) {
			fail(P_RESP, "send: %s", c.why);
			conn_close(&c, false);
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			if (resp_check(&c, P_RESP, "batch", &ex[i])) {
				conn_close(&c, false);
				break;
			}
			record(P_RESP, t0, now_ns(), 1);
		}
	}
	conn_close(&c, false);
	free(c.buf);
	free(b.p);
	return NULL;
}

#define TEXT_ROUNDS 4 /* of 6 lines: 24 per batch */

static void *worker_text(void *arg)
{
	struct conn c = {.fd = -1};
	struct sbuf b = {0};
	struct text_expect ex[TEXT_ROUNDS * 6];
	uint64_t batches = 0;
	char keys[8][KEY_MAX], k[KEY_MAX];
	uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + now_ns();

	struct pacer pace;

	pace_init(&pace, TEXT_RATE);
	while (!atomic_load(&stopping)) {
		pace_wait(&pace);
		if (c.fd < 0 && conn_open(&c, opt.port)) {
			fail(P_TEXT, "connect: %s", c.why);
			sleep(1);
			continue;
		}
		unsigned n = 0;
		sb_reset(&b);
		for (unsigned r = 0; r < TEXT_ROUNDS; r++) {
			for (unsigned i = 0; i < 8; i++)
				main_key(keys[i], &rng, MAIN_KEYSPACE);
			if (r == 0 && batches % FRESH_EVERY == 0)
				fresh_key(keys[7], "text", batches);
			sb_str(&b, "b soak-text");
			for (unsigned i = 0; i < 8; i++)
				sb_fmt(&b, " %s", keys[i]);
			sb_str(&b, "\nm soak-text");
			for (unsigned i = 0; i < 8; i++)
				sb_fmt(&b, " %s", keys[i]);
			ex[n++] = (struct text_expect){T_YESNO, NULL, 8, 0};
			ex[n++] = (struct text_expect){T_YESNO, NULL, 8, 8};
			main_key(k, &rng, MAIN_KEYSPACE);
			sb_fmt(&b, "\ns soak-text %s\nc soak-text %s\n", k, k);
			ex[n++] = (struct text_expect){T_YESNO, NULL, 1, 0};
			ex[n++] = (struct text_expect){T_YESNO, NULL, 1, 1};
			main_key(k, &rng, MAIN_KEYSPACE);
			sb_fmt(&b, "s soak-textc %s\nd soak-textc %s\n", k, k);
			ex[n++] = (struct text_expect){T_YESNO, NULL, 1, 0};
			ex[n++] = (struct text_expect){T_YESNO, NULL, 1, 1};
		}
		batches++;
		uint64_t t0 = now_ns();
		if (conn_send(&c, b.p, b.len)) {
			fail(P_TEXT, "send: %s", c.why);
			conn_close(&c, false);
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			if (text_check(&c, P_TEXT, "batch", &ex[i])) {
				conn_close(&c, false);
				break;
			}
			record(P_TEXT, t0, now_ns(), 1);
		}
	}
	conn_close(&c, false);
	free(c.buf);
	free(b.p);
	return NULL;
}

static void *worker_http(void *arg)
{
	struct http_client h = {.c = {.fd = -1}};
	struct sbuf body = {0};
	char keys[8][KEY_MAX], path[160];
	uint64_t rounds = 0;
	uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + now_ns();

	struct pacer pace;

	pace_init(&pace, HTTP_RATE);
	while (!atomic_load(&stopping)) {
		pace_wait(&pace);
		if (h.c.fd < 0 && conn_open(&h.c, opt.http_port)) {
			fail(P_HTTP, "connect: %s", h.c.why);
			sleep(1);
			continue;
		}
		for (unsigned i = 0; i < 8; i++)
			main_key(keys[i], &rng, HTTP_KEYSPACE);
		if (rounds++ % (FRESH_EVERY / 2) == 0)
			fresh_key(keys[7], "http", rounds);
		json_keys(&body, keys, 8);
		bool ok = http_call(&h, P_HTTP, "POST", "/v1/filters/soak-http/add", body.p,
				    body.len, 200) == 0 &&
			  http_results(&h, P_HTTP, "add", 8, false) == 0 &&
			  http_call(&h, P_HTTP, "POST", "/v1/filters/soak-http/check", body.p,
				    body.len, 200) == 0 &&
			  http_results(&h, P_HTTP, "check", 8, true) == 0;
		if (ok) {
			snprintf(path, sizeof(path), "/v1/filters/soak-http/keys/%s", keys[0]);
			ok = http_call(&h, P_HTTP, "PUT", path, NULL, 0, 200) == 0;
			if (ok && !strstr(h.r.body.p, "\"added\":")) {
				fail(P_HTTP, "PUT %s: %s", path, shown(h.r.body.p, h.r.body.len));
				ok = false;
			}
		}
		if (ok) {
			ok = http_call(&h, P_HTTP, "GET", path, NULL, 0, 200) == 0;
			if (ok && strcmp(h.r.body.p, "{\"present\":true}") != 0) {
				fail(P_HTTP, "GET %s: %s", path, shown(h.r.body.p, h.r.body.len));
				ok = false;
			}
		}
		if (ok) {
			json_keys(&body, keys + 4, 4);
			ok = http_call(&h, P_HTTP, "POST", "/v1/filters/soak-httpc/add", body.p,
				       body.len, 200) == 0 &&
			     http_results(&h, P_HTTP, "counting add", 4, false) == 0 &&
			     http_call(&h, P_HTTP, "POST", "/v1/filters/soak-httpc/delete", body.p,
				       body.len, 200) == 0 &&
			     http_results(&h, P_HTTP, "counting delete", 4, true) == 0;
		}
		if (!ok || h.r.close)
			conn_close(&h.c, false);
	}
	conn_close(&h.c, false);
	free(h.c.buf);
	free(h.r.body.p);
	free(h.req.p);
	free(body.p);
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Churn: connections, filters and bad input that come and go */

struct churn {
	uint64_t cycle;
	struct conn c;
	struct sbuf b;
	struct http_client h;
	char *long_key, *long_line;
	size_t long_line_len;
};

/* Open a connection for churn, timing it as one op. */
static int churn_connect(struct conn *c, int port)
{
	uint64_t t0 = now_ns();

	if (conn_open(c, port)) {
		fail(P_CHURN, "connect to %d: %s", port, c->why);
		return -1;
	}
	record(P_CHURN, t0, now_ns(), 1);
	atomic_fetch_add(&churn_conns, 1);
	return 0;
}

/*
 * End a text or RESP connection in one of four ways: close; the protocol's quit (the daemon
 * must close it); a reset; half a command, then close. Returns 0 or -1.
 */
static int churn_hangup(struct churn *ch, bool resp)
{
	struct conn *c = &ch->c;
	int how = (int)(ch->cycle % 4);

	if (how == 1) {
		const char *q = resp ? "*1\r\n$4\r\nQUIT\r\n" : "quit\n";
		char *line;
		size_t len;
		if (conn_send(c, q, strlen(q))) {
			fail(P_CHURN, "quit: %s", c->why);
		} else if (resp && (conn_line(c, &line, &len) || strcmp(line, "+OK") != 0)) {
			fail(P_CHURN, "QUIT: no +OK");
		} else if (!conn_expect_eof(c)) {
			fail(P_CHURN, "%s: the daemon did not close the connection (%s)",
			     resp ? "QUIT" : "quit", c->why);
		}
	} else if (how == 3) {
		const char *half = resp ? "*3\r\n$6\r\nBF.ADD\r\n$4\r\nsoak" : "s soak-text half";
		conn_send(c, half, strlen(half));
	}
	conn_close(c, how == 2);
	return 0;
}

/* The text half of a churn cycle. */
static int churn_text(struct churn *ch)
{
	struct conn *c = &ch->c;
	struct sbuf *b = &ch->b;
	char name[64], *line;
	size_t len;
	bool counting = ch->cycle % 3 == 0;
	unsigned layers = 0;
	uint64_t t0;

	snprintf(name, sizeof(name), "soak-ct-%llu", (unsigned long long)ch->cycle);
	if (churn_connect(c, opt.port))
		return -1;

	/* create, then fill in lines of 100 keys, pipelined, then info. */
	sb_reset(b);
	sb_fmt(b, "create %s capacity=%d prob=0.01%s\n", name, CHURN_CAPACITY,
	       counting ? " type=counting" : "");
	for (unsigned i = 0; i < CHURN_KEYS; i += 100) {
		sb_fmt(b, "b %s", name);
		for (unsigned j = i; j < i + 100; j++)
			sb_fmt(b, " t%llu-%u", (unsigned long long)ch->cycle, j);
		sb_str(b, "\n");
	}
	sb_fmt(b, "info %s\n", name);
	t0 = now_ns();
	if (conn_send(c, b->p, b->len))
		goto io;
	struct text_expect done = {T_LINE, "Done", 0, 0}, fill = {T_YESNO, NULL, 100, 0};
	if (text_check(c, P_CHURN, "create", &done))
		goto out;
	record(P_CHURN, t0, now_ns(), 1);
	for (unsigned i = 0; i < CHURN_KEYS; i += 100) {
		if (text_check(c, P_CHURN, "bulk", &fill))
			goto out;
		record(P_CHURN, t0, now_ns(), 1);
	}
	if (conn_line(c, &line, &len))
		goto io;
	if (strcmp(line, "START") != 0) {
		fail(P_CHURN, "info: '%s'", shown(line, len));
		goto out;
	}
	for (;;) {
		if (conn_line(c, &line, &len))
			goto io;
		if (strcmp(line, "END") == 0)
			break;
		if (strncmp(line, "layers ", 7) == 0)
			layers = (unsigned)atoi(line + 7);
	}
	record(P_CHURN, t0, now_ns(), 1);
	if (layers < CHURN_LAYERS) {
		fail(P_CHURN, "info %s: %u layers after %d keys (expected >= %d)", name, layers,
		     CHURN_KEYS, CHURN_LAYERS);
		goto out;
	}

	/* Bad input, each refused; a snapshot now and then; the drop. */
	static const char long_key_cmd[] = "s soak-text ";
	struct {
		const char *send;
		const char *want;
	} steps[] = {
	    {"frobnicate soak\n", "Client Error: Command not supported"},
	    {"c soak-missing k\n", "Filter does not exist"},
	    {NULL, "Client Error: Key too long"},
	    {ch->cycle % 8 == 5 ? "" : NULL, "Client Error: Line too long"},
	    {ch->cycle % 4 == 1 ? "flush " : NULL, "Done"},
	    {"drop ", "Done"},
	};
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct text_expect want = {T_LINE, steps[i].want, 0, 0};
		sb_reset(b);
		if (i == 2) {
			sb_str(b, long_key_cmd);
			sb_add(b, ch->long_key, LONG_KEY);
			sb_str(b, "\n");
		} else if (i == 3) {
			if (!steps[i].send)
				continue;
			sb_add(b, ch->long_line, ch->long_line_len);
		} else if (i >= 4) {
			if (!steps[i].send)
				continue;
			sb_fmt(b, "%s%s\n", steps[i].send, name);
		} else {
			sb_str(b, steps[i].send);
		}
		t0 = now_ns();
		if (conn_send(c, b->p, b->len))
			goto io;
		if (text_check(c, P_CHURN, steps[i].want, &want))
			goto out;
		record(P_CHURN, t0, now_ns(), 1);
	}
	return churn_hangup(ch, false);
io:
	fail(P_CHURN, "text %s: %s", name, c->why);
out:
	conn_close(c, false);
	return -1;
}

/* The RESP half of a churn cycle. */
static int churn_resp(struct churn *ch)
{
	struct conn *c = &ch->c;
	struct sbuf *b = &ch->b;
	char name[64], key[48];
	bool counting = ch->cycle % 3 == 1;
	uint64_t t0;

	snprintf(name, sizeof(name), "soak-cr-%llu", (unsigned long long)ch->cycle);
	if (churn_connect(c, opt.port))
		return -1;

	sb_reset(b);
	if (counting)
		resp_args(b, 5, "BF.RESERVE", name, "0.01", "1000", "COUNTING");
	else
		resp_args(b, 4, "BF.RESERVE", name, "0.01", "1000");
	for (unsigned i = 0; i < CHURN_KEYS; i += 100) {
		resp_begin(b, 102);
		resp_arg(b, "BF.MADD", 7);
		resp_arg(b, name, strlen(name));
		for (unsigned j = i; j < i + 100; j++) {
			int n = sprintf(key, "r%llu-%u", (unsigned long long)ch->cycle, j);
			resp_arg(b, key, (size_t)n);
		}
	}
	resp_args(b, 3, "BF.INFO", name, "FILTERS");
	t0 = now_ns();
	if (conn_send(c, b->p, b->len))
		goto io;
	struct resp_expect ok = {R_LINE, "+OK", 0, 0}, fill = {R_ARRAY, NULL, 100, 0},
			   one = {R_LINE, "*1", 0, 0}, layers = {R_MIN, NULL, CHURN_LAYERS, 0};
	if (resp_check(c, P_CHURN, "BF.RESERVE", &ok))
		goto out;
	record(P_CHURN, t0, now_ns(), 1);
	for (unsigned i = 0; i < CHURN_KEYS; i += 100) {
		if (resp_check(c, P_CHURN, "BF.MADD", &fill))
			goto out;
		record(P_CHURN, t0, now_ns(), 1);
	}
	/* RedisBloom 2.4+ answers one field as an array of one. */
	if (resp_check(c, P_CHURN, "BF.INFO FILTERS", &one) ||
	    resp_check(c, P_CHURN, "BF.INFO FILTERS (expected >= 3 layers)", &layers))
		goto out;
	record(P_CHURN, t0, now_ns(), 1);

	/* Bad input, each refused, then the drop. */
	for (unsigned i = 0; i < 5; i++) {
		struct resp_expect want = {R_LINE, NULL, 0, 0};
		sb_reset(b);
		switch (i) {
		case 0:
			resp_args(b, 2, "FROBNICATE", "soak");
			want = (struct resp_expect){R_PREFIX, "-ERR unknown command 'FROBNICATE'",
						    0, 0};
			break;
		case 1:
			resp_begin(b, 3);
			resp_arg(b, "BF.ADD", 6);
			resp_arg(b, name, strlen(name));
			resp_arg(b, ch->long_key, LONG_KEY);
			want.text = "-ERR item too long";
			break;
		case 2:
			resp_args(b, 2, "BF.ADD", name);
			want.text = "-ERR wrong number of arguments for 'bf.add' command";
			break;
		case 3:
			resp_args(b, 3, "BF.MADD", "soak-missing", "k");
			resp_args(b, 2, "DEL", "soak-missing");
			break;
		case 4:
			resp_args(b, 2, "DEL", name);
			want.text = ":1";
			break;
		}
		t0 = now_ns();
		if (conn_send(c, b->p, b->len))
			goto io;
		if (i == 3) {
			/* BF.MADD creates a missing filter (RedisBloom does): [1], then DEL :1. */
			struct resp_expect arr1 = {R_ARRAY, NULL, 1, 1}, del = {R_ONE, NULL, 0, 0};
			if (resp_check(c, P_CHURN, "BF.MADD soak-missing", &arr1) ||
			    resp_check(c, P_CHURN, "DEL soak-missing", &del))
				goto out;
		} else if (resp_check(c, P_CHURN, want.text, &want)) {
			goto out;
		}
		record(P_CHURN, t0, now_ns(), 1);
	}
	churn_hangup(ch, true);

	/* Now and then a framing error on a connection of its own: an error, then the close. */
	if (ch->cycle % 8 == 3) {
		struct resp_expect perr = {R_PREFIX, "-ERR Protocol error", 0, 0};
		if (churn_connect(c, opt.port))
			return -1;
		t0 = now_ns();
		if (conn_send(c, "*1\r\n$abc\r\n", 10))
			goto io;
		if (resp_check(c, P_CHURN, "framing error", &perr))
			goto out;
		if (!conn_expect_eof(c)) {
			fail(P_CHURN, "framing error: the connection stayed open (%s)", c->why);
			goto out;
		}
		record(P_CHURN, t0, now_ns(), 1);
		conn_close(c, false);
	}
	return 0;
io:
	fail(P_CHURN, "RESP %s: %s", name, c->why);
out:
	conn_close(c, false);
	return -1;
}

/* The HTTP third of a churn cycle. */
static int churn_http(struct churn *ch)
{
	struct http_client *h = &ch->h;
	struct sbuf *b = &ch->b;
	char path[128], sub[160];
	bool counting = ch->cycle % 3 == 2;

	snprintf(path, sizeof(path), "/v1/filters/soak-ch-%llu", (unsigned long long)ch->cycle);
	if (churn_connect(&h->c, opt.http_port))
		return -1;

	sb_reset(b);
	sb_fmt(b, "{\"capacity\":%d,\"error_rate\":0.01%s}", CHURN_CAPACITY,
	       counting ? ",\"type\":\"counting\"" : "");
	if (http_call(h, P_CHURN, "PUT", path, b->p, b->len, 201))
		goto out;
	snprintf(sub, sizeof(sub), "%s/add", path);
	for (unsigned i = 0; i < CHURN_KEYS; i += 1000) {
		sb_reset(b);
		sb_str(b, "{\"keys\":[");
		for (unsigned j = i; j < i + 1000; j++)
			sb_fmt(b, "%s\"h%llu-%u\"", j > i ? "," : "", (unsigned long long)ch->cycle,
			       j);
		sb_str(b, "]}");
		if (http_call(h, P_CHURN, "POST", sub, b->p, b->len, 200) ||
		    http_results(h, P_CHURN, "churn add", 1000, false))
			goto out;
	}
	if (counting) {
		/* The last body again: every key was added, so every delete removes one. */
		snprintf(sub, sizeof(sub), "%s/delete", path);
		if (http_call(h, P_CHURN, "POST", sub, b->p, b->len, 200) ||
		    http_results(h, P_CHURN, "churn delete", 1000, true))
			goto out;
	}
	if (http_call(h, P_CHURN, "GET", path, NULL, 0, 200))
		goto out;
	const char *l = strstr(h->r.body.p, "\"layers\":");
	if (!l || atoi(l + 9) < CHURN_LAYERS) {
		fail(P_CHURN, "GET %s: fewer than %d layers: %s", path, CHURN_LAYERS,
		     shown(h->r.body.p, h->r.body.len));
		goto out;
	}
	if (ch->cycle % 4 == 3) {
		snprintf(sub, sizeof(sub), "%s/snapshot", path);
		if (http_call(h, P_CHURN, "POST", sub, NULL, 0, 200))
			goto out;
	}

	/* Bad requests, each refused with its status. */
	snprintf(sub, sizeof(sub), "%s/add", path);
	if (http_call(h, P_CHURN, "POST", sub, "{\"keys\":[", 9, 400) ||
	    http_call(h, P_CHURN, "GET", "/v1/filters/soak-missing/keys/k", NULL, 0, 404) ||
	    http_call(h, P_CHURN, "GET", "/v1/nothing-here", NULL, 0, 404))
		goto out;
	sb_reset(b);
	sb_str(b, "{\"keys\":[\"");
	sb_add(b, ch->long_key, LONG_KEY);
	sb_str(b, "\"]}");
	if (http_call(h, P_CHURN, "POST", sub, b->p, b->len, 400))
		goto out;
	if (!strstr(h->r.body.p, "key_too_long")) {
		fail(P_CHURN, "long key: %s", shown(h->r.body.p, h->r.body.len));
		goto out;
	}
	if (http_call(h, P_CHURN, "DELETE", path, NULL, 0, 204) ||
	    http_call(h, P_CHURN, "DELETE", path, NULL, 0, 404))
		goto out;

	/* Now and then a body over max_body_bytes: refused before it is sent. */
	if (ch->cycle % 8 == 7) {
		sb_reset(b);
		sb_fmt(b,
		       "POST %s/add HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
		       "application/json\r\nContent-Length: " HUGE_BODY "\r\n\r\n",
		       path);
		uint64_t t0 = now_ns();
		char *line;
		size_t len;
		if (conn_send(&h->c, b->p, b->len) || conn_line(&h->c, &line, &len)) {
			fail(P_CHURN, "huge body: %s", h->c.why);
			goto out;
		}
		if (strncmp(line, "HTTP/1.1 413", 12) != 0) {
			fail(P_CHURN, "huge body: '%s'", shown(line, len));
			goto out;
		}
		record(P_CHURN, t0, now_ns(), 1);
	}
	conn_close(&h->c, ch->cycle % 4 == 2);
	return 0;
out:
	conn_close(&h->c, false);
	return -1;
}

static void *worker_churn(void *arg)
{
	struct churn ch = {.c = {.fd = -1}, .h = {.c = {.fd = -1}}};

	struct pacer pace;

	(void)arg;
	pace_init(&pace, CHURN_RATE);
	ch.long_key = xmalloc(LONG_KEY);
	memset(ch.long_key, 'x', LONG_KEY);
	ch.long_line_len = LONG_LINE;
	ch.long_line = xmalloc(LONG_LINE);
	memcpy(ch.long_line, "c soak-text ", 12);
	memset(ch.long_line + 12, 'y', LONG_LINE - 13);
	ch.long_line[LONG_LINE - 1] = '\n';
	while (!atomic_load(&stopping)) {
		pace_wait(&pace);
		churn_drops +=
		    (churn_text(&ch) == 0) + (churn_resp(&ch) == 0) + (churn_http(&ch) == 0);
		ch.cycle++;
		atomic_fetch_add(&churn_cycles, 1);
	}
	free(ch.c.buf);
	free(ch.h.c.buf);
	free(ch.h.r.body.p);
	free(ch.h.req.p);
	free(ch.b.p);
	free(ch.long_key);
	free(ch.long_line);
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Sampling */

struct sample {
	long rss_kib, fds, files;
	long conns_tcp, conns_http, filters, filter_bytes, snapshots, snapshot_failures;
	uint64_t ops[NPROTO];
	double p99[NPROTO];
	uint64_t errors;
};

/* VmRSS of the daemon in KiB; -1 if it is gone. */
static long read_rss(void)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", opt.pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Entries of a directory (without . and ..); -1 if it cannot be read. */
static long count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static long metric(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return atol(p + n + 1);
	return -1;
}

/* The daemon's own gauges and counters from GET /metrics; -1 where it could not say. */
static void read_metrics(struct http_client *h, struct sample *s)
{
	s->conns_tcp = s->conns_http = s->filters = s->filter_bytes = -1;
	s->snapshots = s->snapshot_failures = -1;
	if (h->c.fd < 0 && conn_open(&h->c, opt.http_port))
		return;
	if (http_do(&h->c, "GET", "/metrics", NULL, 0, &h->r, &h->req) || h->r.status != 200) {
		fail(P_HTTP, "GET /metrics: %s", h->c.fd >= 0 ? h->c.why : "closed");
		conn_close(&h->c, false);
		return;
	}
	const char *t = h->r.body.p;
	s->conns_tcp = metric(t, "blossomd_connections{protocol=\"text_resp\"}");
	s->conns_http = metric(t, "blossomd_connections{protocol=\"http\"}");
	s->filters = metric(t, "blossomd_filters");
	s->filter_bytes = metric(t, "blossomd_memory_bytes");
	s->snapshots = metric(t, "blossomd_snapshot_writes_total");
	s->snapshot_failures = metric(t, "blossomd_snapshot_failures_total");
	if (h->r.close)
		conn_close(&h->c, false);
}

static uint64_t total_errors(void)
{
	uint64_t n = 0;

	for (int p = 0; p < NPROTO; p++)
		n += atomic_load(&errors[p]);
	return n;
}

static void csv_header(FILE *f)
{
	fputs("t,rss_kib,fds,conns_tcp,conns_http,filters,filter_bytes,snapshots,"
	      "snapshot_failures,files",
	      f);
	for (int p = 0; p < NPROTO; p++)
		fprintf(f, ",%s_ops,%s_p99_us", proto_name[p], proto_name[p]);
	fputs(",errors\n", f);
}

static void csv_line(FILE *f, unsigned t, const struct sample *s)
{
	fprintf(f, "%u,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld", t, s->rss_kib, s->fds, s->conns_tcp,
		s->conns_http, s->filters, s->filter_bytes, s->snapshots, s->snapshot_failures,
		s->files);
	for (int p = 0; p < NPROTO; p++) {
		fprintf(f, ",%llu,", (unsigned long long)s->ops[p]);
		if (!isnan(s->p99[p]))
			fprintf(f, "%.1f", s->p99[p]);
	}
	fprintf(f, ",%llu\n", (unsigned long long)s->errors);
	fflush(f);
}

/* ---------------------------------------------------------------------------------------- */
/* Summary */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Least-squares slope of y over x = index (seconds), for samples [from, to). */
static double slope_per_s(const struct sample *s, unsigned from, unsigned to)
{
	double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;

	for (unsigned i = from; i < to; i++) {
		double x = i, y = (double)s[i].rss_kib;
		n++;
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
	}
	if (n < 2)
		return NAN;
	return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

#define FIELD_STATS(field)                                                                         \
	do {                                                                                       \
		long lo = LONG_MAX, hi = LONG_MIN;                                                 \
		for (unsigned i = w; i <= last; i++) {                                             \
			lo = s[i].field < lo ? s[i].field : lo;                                    \
			hi = s[i].field > hi ? s[i].field : hi;                                    \
		}                                                                                  \
		printf("| %s | %ld | %ld | %ld | %ld |\n", #field, s[w].field, s[last].field, lo,  \
		       hi);                                                                        \
	} while (0)

/* s[1..n]: the samples taken at t = 1..n. */
static void summary(const struct sample *s, unsigned n)
{
	unsigned w = opt.warmup < n ? opt.warmup : n / 4, last = n;

	if (w < 1)
		w = 1;
	printf("\nsoak: %u s of load, warm-up %u s; figures after warm-up are t = %u..%u s\n\n", n,
	       w, w, last);
	printf("| daemon | at t = %u s | at the end | min after warm-up | max after warm-up |\n",
	       w);
	printf("|---|---:|---:|---:|---:|\n");
	FIELD_STATS(rss_kib);
	FIELD_STATS(fds);
	FIELD_STATS(conns_tcp);
	FIELD_STATS(conns_http);
	FIELD_STATS(filters);
	FIELD_STATS(filter_bytes);
	if (opt.data_dir)
		FIELD_STATS(files);
	unsigned half = (w + last) / 2;
	printf("\nRSS slope after warm-up: %+.1f KiB/min (least squares over %u samples); over "
	       "the second half (t = %u..%u s): %+.1f KiB/min; RSS %ld -> %ld KiB over the whole "
	       "run\n",
	       slope_per_s(s, w, last + 1) * 60, last + 1 - w, half, last,
	       slope_per_s(s, half, last + 1) * 60, s[1].rss_kib, s[last].rss_kib);
	printf("snapshots written: %ld, failed: %ld\n\n", s[last].snapshots,
	       s[last].snapshot_failures);

	printf("| protocol | ops | ops/s | errors | p99 of each second, median (µs) | max (µs) | "
	       "all ops after warm-up: p50 | p99 | p99.9 (µs) |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	double *p99 = xmalloc(sizeof(double) * (n + 1));
	uint64_t *acc = xmalloc(sizeof(uint64_t) * NBUCKETS);
	for (int p = 0; p < NPROTO; p++) {
		uint64_t ops = 0, after = 0;
		unsigned m = 0;
		memset(acc, 0, sizeof(uint64_t) * NBUCKETS);
		for (unsigned i = 1; i <= last; i++) {
			ops += s[i].ops[p];
			if (i > w) {
				/* Second i covers [i - 1, i): after warm-up from i = w + 1. */
				after += hist_add(acc, &hist[i - 1][p]);
				if (!isnan(s[i].p99[p]))
					p99[m++] = s[i].p99[p];
			}
		}
		qsort(p99, m, sizeof(double), cmp_double);
		printf("| %s | %llu | %.0f | %llu | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
		       proto_name[p], (unsigned long long)ops, (double)ops / n,
		       (unsigned long long)atomic_load(&errors[p]), m ? p99[m / 2] : NAN,
		       m ? p99[m - 1] : NAN, quantile_us(acc, after, 0.5),
		       quantile_us(acc, after, 0.99), quantile_us(acc, after, 0.999));
	}
	printf("\nchurn: %llu cycles, %llu connections opened and closed, %llu filters created, "
	       "grown and dropped\n",
	       (unsigned long long)churn_cycles, (unsigned long long)churn_conns,
	       (unsigned long long)churn_drops);
	printf("errors: %llu\n", (unsigned long long)total_errors());
	free(p99);
	free(acc);
}

/* ---------------------------------------------------------------------------------------- */

static void usage(void)
{
	fputs("usage: soak --port N --http-port N --pid PID [--seconds 600] [--warmup 60] "
	      "[--load 1] [--no-churn] [--out FILE.csv] [--data-dir DIR]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"port", required_argument, NULL, 'p'},	{"http-port", required_argument, NULL, 'H'},
	    {"pid", required_argument, NULL, 'P'},	{"seconds", required_argument, NULL, 's'},
	    {"warmup", required_argument, NULL, 'w'},	{"out", required_argument, NULL, 'o'},
	    {"data-dir", required_argument, NULL, 'd'}, {"load", required_argument, NULL, 'l'},
	    {"no-churn", no_argument, NULL, 'n'},	{NULL, 0, NULL, 0},
	};
	void *(*const fns[])(void *) = {worker_resp, worker_text, worker_http, worker_churn};
	pthread_t threads[4];
	struct http_client mh = {.c = {.fd = -1}};
	FILE *csv = NULL;
	int ch;
	bool gone = false;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 'H':
			opt.http_port = atoi(optarg);
			break;
		case 'P':
			opt.pid = atol(optarg);
			break;
		case 's':
			opt.seconds = (unsigned)atoi(optarg);
			break;
		case 'w':
			opt.warmup = (unsigned)atoi(optarg);
			break;
		case 'o':
			opt.out = optarg;
			break;
		case 'd':
			opt.data_dir = optarg;
			break;
		case 'l':
			opt.load = atof(optarg);
			break;
		case 'n':
			opt.no_churn = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || opt.port <= 0 || opt.http_port <= 0 || opt.pid <= 0 ||
	    opt.seconds < 2 || !(opt.load >= 0))
		usage();
	if (opt.warmup == UINT32_MAX)
		opt.warmup = opt.seconds >= 240 ? 60 : opt.seconds / 4;
	signal(SIGPIPE, SIG_IGN);
	if (read_rss() < 0)
		die("no process %ld (or no VmRSS in /proc/%ld/status)", opt.pid, opt.pid);
	if (opt.out && !(csv = fopen(opt.out, "w")))
		die("cannot write %s: %s", opt.out, strerror(errno));

	nhist = opt.seconds + 2;
	hist = calloc(nhist, sizeof(*hist));
	struct sample *s = calloc(opt.seconds + 1, sizeof(*s));
	if (!hist || !s)
		die("out of memory");
	start_ns = now_ns();
	setup_filters();
	start_ns = now_ns();
	unsigned nthreads = opt.no_churn ? 3 : 4; /* churn is the last */
	for (unsigned i = 0; i < nthreads; i++)
		if (pthread_create(&threads[i], NULL, fns[i], (void *)(uintptr_t)(i + 1)))
			die("cannot start a thread");
	if (csv)
		csv_header(csv);

	unsigned t;
	struct bench_progress progress;

	bench_progress_start(&progress);
	for (t = 1; t <= opt.seconds; t++) {
		/* A little after the second ends, so its ops are in. */
		sleep_until(start_ns + (uint64_t)t * 1000000000u + 5000000u);
		struct sample *x = &s[t];
		char dir[64];
		x->rss_kib = read_rss();
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", opt.pid);
		x->fds = count_entries(dir);
		x->files = opt.data_dir ? count_entries(opt.data_dir) : -1;
		if (x->rss_kib < 0) {
			fprintf(stderr, "soak: t=%u: the daemon (pid %ld) is gone\n", t, opt.pid);
			gone = true;
			break;
		}
		read_metrics(&mh, x);
		for (int p = 0; p < NPROTO; p++) {
			uint64_t acc[NBUCKETS] = {0};
			x->ops[p] = hist_add(acc, &hist[t - 1][p]);
			x->p99[p] = quantile_us(acc, x->ops[p], 0.99);
		}
		x->errors = total_errors();
		if (csv)
			csv_line(csv, t, x);
		bench_progress(&progress, t, opt.seconds,
			       "soak: t = %u of %u s, RSS %ld KiB, %ld fds, %llu errors", t,
			       opt.seconds, x->rss_kib, x->fds, (unsigned long long)x->errors);
	}
	bench_progress_clear(&progress);
	atomic_store(&stopping, true);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	conn_close(&mh.c, false);
	if (csv)
		fclose(csv);
	if (gone)
		return 1;
	summary(s, opt.seconds);
	free(s);
	free(hist);
	free(mh.c.buf);
	free(mh.r.body.p);
	free(mh.req.p);
	return 0;
}
