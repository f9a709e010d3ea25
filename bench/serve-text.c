/* SPDX-License-Identifier: MIT */
/*
 * bench/serve-text: a pipelining client for blossomd's text protocol (bloomd dialect).
 * Plain blocking sockets, no dependencies beyond libc.
 *
 *   serve-text [-H HOST] -p PORT [-n KEYS] [-B LINES] [-k KEYS-PER-LINE] [-w WINDOW]
 *              [-o OFFSET] [-C CAPACITY] -f FILTER MODE
 *
 * MODE:
 *   s / c   one key per command: "s FILTER key:I" (set) or "c FILTER key:I" (check)
 *   b / m   KEYS-PER-LINE keys per command (default 32): "b FILTER key:I key:I+1 ..." (bulk,
 *           set semantics) or "m FILTER ..." (multi, check)
 * KEYS keys in total (default 1000000), key:OFFSET .. key:OFFSET+KEYS-1. Commands go out in
 * batches of LINES lines (default 128); up to WINDOW batches (default 2) are in flight, so the
 * server always has the next batch queued while the client reads the replies of the last.
 * With -C, "create FILTER capacity=CAPACITY prob=0.01" is sent first (Done or Exists is fine).
 *
 * Prints one line:
 *   mode=s keys=1000000 commands=1000000 seconds=0.812 commands/s=1231527 keys/s=1231527 yes=...
 * no=... Exit status 0, or 1 on a connection error or a reply that is not Yes/No per key.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct batch {
	char *buf;
	size_t len;
	uint64_t lines;
};

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "serve-text: %s\n", what);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
	int fd = -1, one = 1;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		die("cannot resolve the host");
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("cannot connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("send failed");
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Reply reader: whole lines out of a growing buffer. */
struct reader {
	int fd;
	char *buf;
	size_t cap, start, end;
};

/* The next reply line (without '\n', NUL-terminated in place), or die at EOF. */
static char *read_line(struct reader *r, size_t *len)
{
	for (;;) {
		char *nl =
		    r->end > r->start ? memchr(r->buf + r->start, '\n', r->end - r->start) : NULL;
		if (nl) {
			char *line = r->buf + r->start;
			*len = (size_t)(nl - line);
			*nl = '\0';
			r->start = (size_t)(nl - r->buf) + 1;
			return line;
		}
		if (r->start > 0) {
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		if (r->end == r->cap) {
			r->cap *= 2;
			r->buf = realloc(r->buf, r->cap);
			if (!r->buf)
				die("out of memory");
		}
		ssize_t n = recv(r->fd, r->buf + r->end, r->cap - r->end, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(n == 0 ? "the server closed the connection" : "recv failed");
		r->end += (size_t)n;
	}
}

static char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int i = 0;

	do {
		tmp[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		*p++ = tmp[--i];
	return p;
}

/* Fill b with up to `lines` commands starting at key *next (< end). */
static void build_batch(struct batch *b, char mode, const char *filter, size_t flen, uint64_t *next,
			uint64_t end, uint64_t lines, unsigned per_line)
{
	char *p = b->buf;

	b->lines = 0;
	while (b->lines < lines && *next < end) {
		*p++ = mode;
		*p++ = ' ';
		memcpy(p, filter, flen);
		p += flen;
		for (unsigned k = 0; k < per_line && *next < end; k++) {
			memcpy(p, " key:", 5);
			p = put_u64(p + 5, (*next)++);
		}
		*p++ = '\n';
		b->lines++;
	}
	b->len = (size_t)(p - b->buf);
}

/* Read one reply line per command of b; count Yes/No words. */
static void read_batch(struct reader *r, const struct batch *b, unsigned per_line, uint64_t *yes,
		       uint64_t *no)
{
	for (uint64_t i = 0; i < b->lines; i++) {
		size_t len, words = 0;
		char *line = read_line(r, &len);
		char *p = line, *e = line + len;

		while (p < e) {
			if (e - p >= 3 && memcmp(p, "Yes", 3) == 0 && (p + 3 == e || p[3] == ' ')) {
				++*yes;
				p += 3;
			} else if (e - p >= 2 && memcmp(p, "No", 2) == 0 &&
				   (p + 2 == e || p[2] == ' ')) {
				++*no;
				p += 2;
			} else {
				fprintf(stderr, "serve-text: unexpected reply: %s\n", line);
				exit(1);
			}
			words++;
			if (p < e)
				p++;
		}
		if (words == 0 || words > per_line) {
			fprintf(stderr, "serve-text: unexpected reply: %s\n", line);
			exit(1);
		}
	}
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: serve-text [-H HOST] -p PORT [-n KEYS] [-B LINES] [-k KEYS-PER-LINE]\n"
		   "                  [-w WINDOW] [-o OFFSET] [-C CAPACITY] -f FILTER s|c|b|m\n");
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *port = NULL, *filter = NULL;
	uint64_t keys = 1000000, offset = 0, capacity = 0, lines = 128;
	unsigned per_line = 32, window = 2;
	int opt;

	while ((opt = getopt(argc, argv, "H:p:n:B:k:w:o:C:f:h")) != -1) {
		switch (opt) {
		case 'H':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'n':
			keys = strtoull(optarg, NULL, 10);
			break;
		case 'B':
			lines = strtoull(optarg, NULL, 10);
			break;
		case 'k':
			per_line = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			window = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'o':
			offset = strtoull(optarg, NULL, 10);
			break;
		case 'C':
			capacity = strtoull(optarg, NULL, 10);
			break;
		case 'f':
			filter = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!port || !filter || optind + 1 != argc || strlen(argv[optind]) != 1 ||
	    !strchr("scbm", argv[optind][0]) || lines == 0 || per_line == 0 || window == 0 ||
	    keys == 0) {
		usage(stderr);
		return 2;
	}
	char mode = argv[optind][0];
	if (mode == 's' || mode == 'c')
		per_line = 1;
	size_t flen = strlen(filter);

	int fd = connect_to(host, port);
	struct reader r = {.fd = fd, .cap = 1 << 16};
	r.buf = malloc(r.cap);
	if (!r.buf)
		die("out of memory");

	if (capacity) {
		char cmd[512];
		size_t len;
		int n = snprintf(cmd, sizeof(cmd), "create %s capacity=%llu prob=0.01\n", filter,
				 (unsigned long long)capacity);
		if (n < 0 || (size_t)n >= sizeof(cmd))
			die("filter name too long");
		send_all(fd, cmd, (size_t)n);
		char *line = read_line(&r, &len);
		if (strcmp(line, "Done") != 0 && strcmp(line, "Exists") != 0) {
			fprintf(stderr, "serve-text: create: %s\n", line);
			return 1;
		}
	}

	/* Each line: mode, space, filter, then per key " key:" and up to 20 digits, '\n'. */
	size_t line_max = 2 + flen + (size_t)per_line * 25 + 1;
	struct batch *b = calloc(window, sizeof(*b));
	if (!b)
		die("out of memory");
	for (unsigned i = 0; i < window; i++) {
		b[i].buf = malloc(line_max * lines);
		if (!b[i].buf)
			die("out of memory");
	}

	uint64_t next = offset, end = offset + keys, yes = 0, no = 0, commands = 0;
	unsigned head = 0, inflight = 0; /* b[head] is the oldest batch in flight */
	double t0 = now_s();

	while (next < end && inflight < window) {
		struct batch *x = &b[(head + inflight) % window];
		build_batch(x, mode, filter, flen, &next, end, lines, per_line);
		send_all(fd, x->buf, x->len);
		commands += x->lines;
		inflight++;
	}
	while (inflight) {
		read_batch(&r, &b[head], per_line, &yes, &no);
		inflight--;
		unsigned slot = head;
		head = (head + 1) % window;
		if (next < end) {
			struct batch *x = &b[slot];
			build_batch(x, mode, filter, flen, &next, end, lines, per_line);
			send_all(fd, x->buf, x->len);
			commands += x->lines;
			inflight++;
		}
	}
	double secs = now_s() - t0;

	if (yes + no != keys) {
		fprintf(stderr, "serve-text: %llu answers for %llu keys\n",
			(unsigned long long)(yes + no), (unsigned long long)keys);
		return 1;
	}
	printf("mode=%c keys=%llu commands=%llu seconds=%.3f commands/s=%.0f keys/s=%.0f yes=%llu "
	       "no=%llu\n",
	       mode, (unsigned long long)keys, (unsigned long long)commands, secs,
	       (double)commands / secs, (double)keys / secs, (unsigned long long)yes,
	       (unsigned long long)no);
	close(fd);
	for (unsigned i = 0; i < window; i++)
		free(b[i].buf);
	free(b);
	free(r.buf);
	return 0;
}
