/* SPDX-License-Identifier: MIT */
/*
 * crashsim: a seeded, model-checked crash driver (after FoundationDB's simulation tests and
 * TigerBeetle's VOPR). It starts the real daemon (BLOSSOMD_BIN) on a data directory of its
 * own, drives random operations over RESP, the text protocol and HTTP, and keeps a model of
 * what was acknowledged. Meanwhile it kills the daemon (SIGKILL, also with a request in
 * flight, and SIGTERM) and restarts it under a changed configuration (snapshot_pack_bytes,
 * wal_segment_bytes, wal_max_bytes, snapshot_interval, cold_interval, wal_fsync). With
 * FSREC_LIB set (tests/integration/fsrec.c, preloaded into every daemon to record its file
 * system calls), a third of the kills are power cuts: the data directory becomes what the disk
 * held (fsmodel.h: what an fsync made durable, and at times the first of the calls that were
 * not), and the model is held to the promise of wal_fsync: with always nothing acknowledged
 * is lost; with everysec at most about the last second, so such a cut comes 2.5 s after the
 * last acknowledgement and again nothing may be lost. After every restart each filter the
 * model holds must exist with every acknowledged key, a filter the model dropped must not,
 * DBSIZE must match, and TTLs must be as set.
 *
 * All randomness comes from one seed (splitmix64), so a failing seed replays with the one
 * command line it prints (timing may still differ: a request in flight at a kill). The daemon's
 * logs of the whole run are kept in a file whose path is printed.
 *
 *	crashsim [--seed S | --seeds a,b,c] [--ops N] [--seconds N] [--tap] [--without K,...]
 *
 * --seconds bounds the whole run (split evenly over the seeds); --ops bounds each seed;
 * --without leaves out kinds of step (a BF.MADD instead), to find which a failure needs
 * (power-cut: kills stay kills; the power cuts draw from a stream of their own, so the other
 * draws of a seed are alike with and without them). It prints, per seed and in total, the
 * operations, restarts, kills, SIGTERMs, configuration changes and power cuts. Exit status 0
 * if every seed passed, 1 otherwise.
 *
 * Not covered: wal_fsync = no (a power cut may lose what the kernel had not written, which the
 * model cannot tell from the acknowledgements); deleted keys of a counting filter are not
 * checked (one may stay present as a false positive).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/fsmodel.h"
#include "tests/integration/harness.h"

enum {
	NNAMES = 48,	     /* names f0..f47: reused, so creates meet dropped names */
	MAX_KEYS = 12000,    /* keys a filter gets at most */
	BATCH = 500,	     /* keys per BF.MEXISTS when checking */
	PATIENCE_MS = 30000, /* a reply, a start, a stop */
	LONG_TTL = 864000,   /* ten days: nothing expires during a run */
	MAX_FILTERS = 256,   /* filters a run creates at most (uids) */
};

/* A key's state in its filter's model. */
enum key_state {
	K_NONE,	   /* never sent */
	K_ACKED,   /* added, acknowledged: must be present */
	K_MAYBE,   /* sent, no reply (killed): may be present */
	K_DELETED, /* deleted (counting): may be present as a false positive */
};

struct filter {
	int uid; /* keys are "u<uid>:<i>": they follow the filter through renames */
	bool counting;
	bool nonscaling;
	uint64_t capacity;
	unsigned next;	     /* next key index to add */
	unsigned char *keys; /* MAX_KEYS states */
	int ttl;	     /* 1: an EXPIRE acknowledged, 0: none, -1: unknown */
	bool closed;	     /* text close: paged out */
};

enum name_state {
	N_ABSENT,
	N_PRESENT,
	N_MAYBE,   /* a create or load in flight at a kill: resolved at the restart */
	N_CLEARED, /* text clear: gone until the next start loads its file again */
};

struct slot {
	enum name_state state;
	struct filter *f;
};

/* A rename or drop in flight at a kill: resolved at the restart by what exists. */
struct pending {
	enum { P_NONE, P_RENAME, P_DEL, P_FLUSHALL } kind;
	int from, to;
	struct filter *to_old; /* the filter a rename replaces */
};

struct stats {
	unsigned long ops, restarts, kills, inflight_kills, terms, config_changes, keys_acked,
	    checks, power_cuts, cut_calls, resyncs;
};

static struct sim {
	uint64_t rng;
	uint64_t rng2; /* power cuts' draws: the other draws stay those of a run without them */
	uint64_t seed;
	struct itest_daemon d;
	char dir[128];
	char data_dir[192];
	char all_log[192];
	char trace[192];    /* fsrec's trace of the daemons' file system calls (power cuts) */
	struct fsmodel *fm; /* the data directory's disk, or NULL: no power cuts */
	char conf[1024];
	bool running;
	int rfd, tfd; /* RESP and text connections */
	struct slot names[NNAMES];
	struct pending pending;
	int nuid;
	struct stats st;
	unsigned long op_limit;
	int64_t deadline_ms;
	char history[256][160]; /* the last operations, for a failure report */
	unsigned long nhist;
} S;

static char *argv0 = "crashsim";
static bool tap;	      /* --tap: TAP lines for meson */
static unsigned tap_index;    /* the TAP test (seed) running */
static char without_arg[600]; /* " --without LIST" for the replay line, or "" */
static const char *fsrec_lib; /* $FSREC_LIB: power cuts need it */

/* ---------------------------------------------------------------------------------------- */
/* Randomness: splitmix64 */

static uint64_t rnd(void)
{
	uint64_t z = (S.rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The power cuts' own stream: a run with them draws the rest as one without them. */
static unsigned below2(unsigned n)
{
	uint64_t z = (S.rng2 += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (unsigned)((z ^ (z >> 31)) % n);
}

/* A number in [0, n). */
static unsigned below(unsigned n)
{
	return (unsigned)(rnd() % n);
}

static bool chance(unsigned percent)
{
	return below(100) < percent;
}

static int rm_tree(const char *dir);
struct stats;
static void print_stats(const char *what, const struct stats *s);

/* ---------------------------------------------------------------------------------------- */
/* Failure: say what, how to replay, and the daemon's logs */

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	va_list ap;
	char *h = S.history[S.nhist++ % 256];

	va_start(ap, fmt);
	vsnprintf(h, sizeof(S.history[0]), fmt, ap);
	va_end(ap);
}

static void keep_log(void)
{
	FILE *f;

	if (!S.d.log_path[0])
		return;
	f = fopen(S.all_log, "a");
	if (!f)
		return;
	fprintf(f, "==== daemon (config: %s) ====\n%s\n", S.conf, itest_log(&S.d));
	fclose(f);
}

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;
	unsigned long from = S.nhist > 256 ? S.nhist - 256 : 0;

	fprintf(stderr, "\ncrashsim: FAILED at operation %lu of seed %" PRIu64 ": ", S.st.ops,
		S.seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nlast operations:\n");
	for (unsigned long i = from; i < S.nhist; i++)
		fprintf(stderr, "  %s\n", S.history[i % 256]);
	if (S.running) {
		fprintf(stderr, "daemon log (config %s):\n%s\n", S.conf, itest_log(&S.d));
		keep_log();
	}
	fprintf(stderr, "all daemon logs of this seed: %s\ndata directory kept: %s\n", S.all_log,
		S.data_dir);
	fprintf(stderr, "replay: %s%s%sBLOSSOMD_BIN=%s %s --seed %" PRIu64 " --ops %lu%s\n",
		fsrec_lib ? "FSREC_LIB=" : "", fsrec_lib ? fsrec_lib : "", fsrec_lib ? " " : "",
		itest_bin(), argv0, S.seed, S.st.ops, without_arg);
	fflush(stderr);
	if (tap)
		printf("not ok %u - seed %" PRIu64
		       " (replay: %s%s%sBLOSSOMD_BIN=%s %s --seed %" PRIu64 " --ops %lu%s)\n",
		       tap_index, S.seed, fsrec_lib ? "FSREC_LIB=" : "", fsrec_lib ? fsrec_lib : "",
		       fsrec_lib ? " " : "", itest_bin(), argv0, S.seed, S.st.ops, without_arg);
	print_stats("failed seed", &S.st);
	if (S.running && S.d.pid > 0) /* never kill(0): that is this whole process group */
		kill(S.d.pid, SIGKILL);
	exit(1);
}

/* ---------------------------------------------------------------------------------------- */
/* RESP, text and HTTP, each failing the run on a transport error */

static char *reply;
static size_t reply_cap;

/* The length of the complete RESP value at p[0, n), or 0 if incomplete. */
static size_t resp_len(const char *p, size_t n)
{
	const char *eol = memchr(p, '\n', n);
	size_t head;
	long v;

	if (!eol)
		return 0;
	head = (size_t)(eol - p) + 1;
	switch (p[0]) {
	case '+':
	case '-':
	case ':':
		return head;
	case '$':
		v = atol(p + 1);
		if (v < 0)
			return head;
		return n >= head + (size_t)v + 2 ? head + (size_t)v + 2 : 0;
	case '*':
		v = atol(p + 1);
		for (long i = 0; i < v; i++) {
			size_t one = head < n ? resp_len(p + head, n - head) : 0;

			if (!one)
				return 0;
			head += one;
		}
		return head;
	default:
		fail("not a RESP reply: %.80s", p);
	}
}

static void reply_room(size_t n)
{
	if (n <= reply_cap)
		return;
	reply_cap = n * 2;
	reply = realloc(reply, reply_cap);
	if (!reply)
		fail("out of memory");
}

/* Read one reply on fd: a RESP value (resp), else one text line. NUL-terminated in reply. */
static size_t read_reply(int fd, bool resp)
{
	size_t n = 0;

	for (;;) {
		ssize_t r;

		reply_room(n + 65536);
		r = itest_recv_until(fd, reply + n, reply_cap - n, "\n", PATIENCE_MS);
		if (r <= 0)
			fail("no reply on %s (%zd)", resp ? "RESP" : "text", r);
		n += (size_t)r;
		reply[n] = '\0';
		if (resp ? resp_len(reply, n) == n : reply[n - 1] == '\n')
			return n;
	}
}

static char *out;
static size_t out_len, out_cap;

static void out_add(const void *p, size_t n)
{
	if (out_len + n + 1 > out_cap) {
		out_cap = (out_len + n + 1) * 2;
		out = realloc(out, out_cap);
		if (!out)
			fail("out of memory");
	}
	memcpy(out + out_len, p, n);
	out_len += n;
	out[out_len] = '\0';
}

static void out_fmt(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	out_add(buf, (size_t)n);
}

static void resp_begin(unsigned argc)
{
	out_len = 0;
	out_fmt("*%u\r\n", argc);
}

static void resp_arg(const void *p, size_t n)
{
	out_fmt("$%zu\r\n", n);
	out_add(p, n);
	out_add("\r\n", 2);
}

static void resp_argf(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	resp_arg(buf, (size_t)n);
}

static void send_out(int fd)
{
	if (itest_send(fd, out, out_len))
		fail("cannot send a request");
}

/* Send the built command, read its reply. */
static const char *resp_go(void)
{
	send_out(S.rfd);
	read_reply(S.rfd, true);
	return reply;
}

/* Build a command of space-separated words (no binary). */
static void resp_words(const char *words)
{
	char buf[512], *save = NULL, *w;
	unsigned argc = 0;

	snprintf(buf, sizeof(buf), "%s", words);
	for (const char *p = buf; *p; p++)
		argc += (*p != ' ' && (p == buf || p[-1] == ' '));
	resp_begin(argc);
	for (w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
		resp_arg(w, strlen(w));
}

/* A command of space-separated words (no binary), its reply. */
static const char *rcall(const char *words)
{
	resp_words(words);
	return resp_go();
}

static void rexpect(const char *words, const char *want)
{
	const char *got = rcall(words);

	if (strcmp(got, want))
		fail("%s: got '%.200s', want '%s'", words, got, want);
}

static const char *tcall(const char *line)
{
	out_len = 0;
	out_fmt("%s\n", line);
	send_out(S.tfd);
	read_reply(S.tfd, false);
	return reply;
}

static void texpect(const char *line, const char *want)
{
	const char *got = tcall(line);

	if (strcmp(got, want))
		fail("text '%s': got '%.200s', want '%s'", line, got, want);
}

/* One HTTP request with body out[0, out_len) on a new connection; its status (no reply read
 * if in_flight: then the open fd is returned through *held). */
static int http_go(const char *method, const char *path, const char *type, int *held)
{
	char head[512];
	int fd = itest_connect(S.d.http_port), n;

	if (fd < 0)
		fail("cannot connect to HTTP: %s", strerror(-fd));
	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\n\r\n",
		     method, path, type, out_len);
	if (itest_send(fd, head, (size_t)n) || itest_send(fd, out, out_len))
		fail("cannot send an HTTP request");
	if (held) {
		*held = fd;
		return 0;
	}
	reply_room(65536);
	n = (int)itest_recv_until(fd, reply, reply_cap, "\r\n\r\n", PATIENCE_MS);
	close(fd);
	if (n < 12 || strncmp(reply, "HTTP/1.1 ", 9))
		fail("%s %s: no HTTP reply", method, path);
	return atoi(reply + 9);
}

/* ---------------------------------------------------------------------------------------- */
/* The daemon: configurations, start, kill, stop */

static const char *pick(const char *const *v, unsigned n)
{
	return v[below(n)];
}

#define PICK(v) pick((v), sizeof(v) / sizeof((v)[0]))

/* A new random configuration. The first of each list is the daemon's default. */
static void new_config(void)
{
	static const char *const pack[] = {"64k", "2k", "0", "4k", "1m"};
	static const char *const seg[] = {"65536", "4096", "65536", "1m"};
	static const char *const walmax[] = {"1g", "0", "1m", "64k"};
	static const char *const snap[] = {"5", "1", "0", "1", "2"};
	static const char *const cold[] = {"0", "1", "0", "2"};
	static const char *const fsync[] = {"always", "everysec"};

	snprintf(S.conf, sizeof(S.conf),
		 "[blossomd]\nsnapshot_pack_bytes = %s\nwal_segment_bytes = %s\n"
		 "wal_max_bytes = %s\nsnapshot_interval = %s\ncold_interval = %s\n"
		 "wal_fsync = %s\nlog_level = info\n",
		 PICK(pack), PICK(seg), PICK(walmax), PICK(snap), PICK(cold), PICK(fsync));
}

static void connect_both(void)
{
	S.rfd = itest_connect(S.d.port);
	S.tfd = itest_connect(S.d.port);
	if (S.rfd < 0 || S.tfd < 0)
		fail("cannot connect");
}

static void start(void)
{
	const char *extra[] = {"--data-dir", S.data_dir, NULL};
	char resynced[512] = "";
	int rc;

	if (S.fm && fsmodel_daemon_start(S.fm, resynced, sizeof(resynced)))
		fail("cannot note a daemon's start in the trace");
	if (resynced[0]) {
		note("  the disk differs from the trace at %s (a call made, its record "
		     "not, at the kill): a sync point",
		     resynced);
		S.st.resyncs++;
	}
	/* itest_start() draws two distinct ports, and draws again if one was taken meanwhile. */
	rc = itest_start(&S.d, S.conf, extra);
	S.running = true;
	if (rc || !itest_log_wait(&S.d, "ready (pid ", PATIENCE_MS))
		fail("the daemon did not start (%s)", rc ? strerror(-rc) : "not ready");
	connect_both();
}

static void disconnect(void)
{
	close(S.rfd);
	close(S.tfd);
	S.rfd = S.tfd = -1;
}

/* Stop the daemon by sig (SIGKILL or SIGTERM); a SIGTERM must end it with status 0. */
static void stop(int sig)
{
	int st;

	if (S.d.pid <= 0)
		fail("no daemon to signal");
	kill(S.d.pid, sig);
	st = itest_wait_exit(&S.d, PATIENCE_MS);
	if (st < 0)
		fail("the daemon did not exit after signal %d", sig);
	if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail("SIGTERM: exit status %#x", st);
	S.d.status = st;
	keep_log();
	itest_stop(&S.d, PATIENCE_MS);
	S.running = false;
	disconnect();
}

/* ---------------------------------------------------------------------------------------- */
/* The model */

static const char *nm(int i)
{
	static char buf[4][16];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "f%d", i);
	return buf[k];
}

static struct filter *filter_new(bool counting, bool nonscaling, uint64_t capacity)
{
	struct filter *f = calloc(1, sizeof(*f));

	if (!f || !(f->keys = calloc(MAX_KEYS, 1)))
		fail("out of memory");
	f->uid = S.nuid++;
	f->counting = counting;
	f->nonscaling = nonscaling;
	f->capacity = capacity;
	return f;
}

static void filter_free(struct filter *f)
{
	if (f) {
		free(f->keys);
		free(f);
	}
}

static void slot_drop(int i)
{
	filter_free(S.names[i].f);
	S.names[i].f = NULL;
	S.names[i].state = N_ABSENT;
}

/* A name in state st, or -1. */
static int name_in(enum name_state st)
{
	int start = (int)below(NNAMES);

	for (int k = 0; k < NNAMES; k++) {
		int i = (start + k) % NNAMES;

		if (S.names[i].state == st)
			return i;
	}
	return -1;
}

static bool any_cleared(void)
{
	for (int i = 0; i < NNAMES; i++)
		if (S.names[i].state == N_CLEARED)
			return true;
	return false;
}

/* ---------------------------------------------------------------------------------------- */
/* Checks after a restart */

static long exists(int i)
{
	char w[64];

	snprintf(w, sizeof(w), "EXISTS %s", nm(i));
	const char *r = rcall(w);

	if (r[0] != ':')
		fail("%s: %s", w, r);
	return atol(r + 1);
}

/* Every acknowledged key of filter i is present. */
static void check_keys(int i)
{
	struct filter *f = S.names[i].f;
	unsigned idx[BATCH];

	for (unsigned k = 0; k < f->next;) {
		unsigned n = 0;
		const char *p;

		while (k < f->next && n < BATCH) {
			if (f->keys[k] == K_ACKED)
				idx[n++] = k;
			k++;
		}
		if (!n)
			continue;
		resp_begin(2 + n);
		resp_arg("BF.MEXISTS", 10);
		resp_arg(nm(i), strlen(nm(i)));
		for (unsigned j = 0; j < n; j++)
			resp_argf("u%d:%u", f->uid, idx[j]);
		p = resp_go();
		if (p[0] != '*' || (unsigned)atol(p + 1) != n)
			fail("BF.MEXISTS %s: %.200s", nm(i), p);
		p = strchr(p, '\n') + 1;
		for (unsigned j = 0; j < n; j++, p = strchr(p, '\n') + 1)
			if (strncmp(p, ":1", 2))
				fail("filter %s lost acknowledged key u%d:%u (%u keys sent to it)",
				     nm(i), f->uid, idx[j], f->next);
		S.st.checks += n;
	}
}

static void check_ttl(int i)
{
	struct filter *f = S.names[i].f;
	char w[64];
	long t;

	if (f->ttl < 0)
		return;
	snprintf(w, sizeof(w), "TTL %s", nm(i));
	t = atol(rcall(w) + 1);
	if (f->ttl ? (t <= 0 || t > LONG_TTL) : t != -1)
		fail("%s: %ld, the model says %s", w, t, f->ttl ? "an expiry" : "none");
}

/* A FLUSHALL in flight at a kill is one logged change: all the model's filters are there, or
 * none is. Some of each is a half-applied FLUSHALL (or a loss), reported as such. */
static void resolve_flushall(void)
{
	char there[512] = "", gone[512] = "";
	size_t nt = 0, ng = 0;

	for (int i = 0; i < NNAMES; i++) {
		if (S.names[i].state != N_PRESENT)
			continue;
		if (exists(i))
			nt += (size_t)snprintf(
			    there + nt, nt < sizeof(there) ? sizeof(there) - nt : 0, " %s", nm(i));
		else
			ng += (size_t)snprintf(gone + ng, ng < sizeof(gone) ? sizeof(gone) - ng : 0,
					       " %s", nm(i));
	}
	if (nt && ng)
		fail("after a FLUSHALL in flight at a SIGKILL some filters are there and some gone "
		     "(half a FLUSHALL, or filters lost): there:%s; gone:%s",
		     there, gone);
	if (ng) {
		for (int j = 0; j < NNAMES; j++)
			slot_drop(j);
		note("  (the FLUSHALL in flight was applied)");
	}
}

/* Resolve what was in flight at a kill, by what exists now. */
static void resolve_pending(void)
{
	struct pending *p = &S.pending;

	switch (p->kind) {
	case P_NONE:
		break;
	case P_RENAME:
		if (exists(p->from))
			break; /* not applied */
		filter_free(p->to_old);
		S.names[p->to] = S.names[p->from];
		S.names[p->from].f = NULL;
		S.names[p->from].state = N_ABSENT;
		note("  (the rename in flight was applied)");
		break;
	case P_DEL:
		if (!exists(p->from)) {
			slot_drop(p->from);
			note("  (the DEL in flight was applied)");
		}
		break;
	case P_FLUSHALL:
		resolve_flushall();
		break;
	}
	p->kind = P_NONE;
	p->to_old = NULL;
	/* A create or load in flight: if it exists, drop it (its contents are unknown). */
	for (int i = 0; i < NNAMES; i++) {
		if (S.names[i].state != N_MAYBE)
			continue;
		if (exists(i)) {
			char w[64];

			snprintf(w, sizeof(w), "DEL %s", nm(i));
			rexpect(w, ":1\r\n");
		}
		slot_drop(i);
	}
}

static void check_all(void)
{
	long n = 0;
	char want[32];

	resolve_pending();
	for (int i = 0; i < NNAMES; i++) {
		struct slot *s = &S.names[i];

		if (s->state == N_CLEARED) /* its file is loaded again at a start */
			s->state = N_PRESENT;
		if (s->state == N_PRESENT)
			s->f->closed = false;
		if (exists(i) != (s->state == N_PRESENT))
			fail("filter %s %s after the restart", nm(i),
			     s->state == N_PRESENT ? "is gone" : "came back");
		if (s->state != N_PRESENT)
			continue;
		n++;
		check_keys(i);
		check_ttl(i);
	}
	snprintf(want, sizeof(want), ":%ld\r\n", n);
	if (strcmp(rcall("DBSIZE"), want))
		fail("DBSIZE %s, the model holds %ld filters", reply, n);
}

/* ---------------------------------------------------------------------------------------- */
/* Operations */

/* Record the replies of a BF.MADD/BF.DEL (RESP array of :0/:1 or errors) for keys idx. */
static void madd_replies(struct filter *f, const unsigned *idx, unsigned n, const char *p)
{
	if (p[0] != '*' || (unsigned)atol(p + 1) != n)
		fail("BF.MADD: %.200s", p);
	p = strchr(p, '\n') + 1;
	for (unsigned j = 0; j < n; j++, p = strchr(p, '\n') + 1) {
		if (p[0] == ':') {
			f->keys[idx[j]] = K_ACKED;
			S.st.keys_acked++;
		} else if (!f->nonscaling || !strstr(p, "full")) {
			fail("BF.MADD key %u: %.100s", idx[j], p);
		} else {
			f->keys[idx[j]] = K_NONE; /* refused: not added */
		}
	}
}

/* n new keys for f (fewer near MAX_KEYS, and at most half a non-scaling filter's capacity). */
static unsigned new_keys(struct filter *f, unsigned n, unsigned *idx)
{
	unsigned room = MAX_KEYS - f->next;

	if (f->nonscaling && f->capacity / 2 < f->next + n)
		room = f->capacity / 2 > f->next ? (unsigned)(f->capacity / 2 - f->next) : 0;
	if (n > room)
		n = room;
	for (unsigned j = 0; j < n; j++) {
		idx[j] = f->next++;
		f->keys[idx[j]] = K_MAYBE;
	}
	return n;
}

static unsigned idxbuf[MAX_KEYS];

static void op_madd(int i, bool in_flight)
{
	struct filter *f = S.names[i].f;
	unsigned n = new_keys(f, 1 + below(chance(30) ? 3000 : 300), idxbuf);

	if (!n)
		return;
	note("BF.MADD %s (%u keys from u%d:%u)", nm(i), n, f->uid, idxbuf[0]);
	resp_begin(2 + n);
	resp_arg("BF.MADD", 7);
	resp_arg(nm(i), strlen(nm(i)));
	for (unsigned j = 0; j < n; j++)
		resp_argf("u%d:%u", f->uid, idxbuf[j]);
	send_out(S.rfd);
	if (in_flight)
		return; /* the keys stay K_MAYBE */
	read_reply(S.rfd, true);
	madd_replies(f, idxbuf, n, reply);
	f->closed = false;
}

/* POST /v1/filters/NAME/add with a text/plain body: one key a line. */
static void op_http_add(int i, bool in_flight)
{
	struct filter *f = S.names[i].f;
	unsigned n = new_keys(f, 1 + below(5000), idxbuf);
	char path[64];
	int held = -1, status;

	if (!n)
		return;
	note("POST /v1/filters/%s/add text/plain (%u keys from u%d:%u)", nm(i), n, f->uid,
	     idxbuf[0]);
	out_len = 0;
	for (unsigned j = 0; j < n; j++)
		out_fmt("u%d:%u\n", f->uid, idxbuf[j]);
	snprintf(path, sizeof(path), "/v1/filters/%s/add", nm(i));
	status = http_go("POST", path, "text/plain", in_flight ? &held : NULL);
	if (in_flight) {
		itest_sleep_ms((int)below(3));
		close(held);
		return;
	}
	if (status == 200) {
		for (unsigned j = 0; j < n; j++)
			f->keys[idxbuf[j]] = K_ACKED;
		S.st.keys_acked += n;
	} else if (!(f->nonscaling && status == 507)) {
		fail("POST %s: status %d: %.300s", path, status, reply);
	}
	f->closed = false;
}

/* Text `bulk NAME k1 k2 ...`: Yes/No per key. */
static void op_text_add(int i)
{
	struct filter *f = S.names[i].f;
	unsigned n = new_keys(f, 1 + below(50), idxbuf);
	char line[64];

	if (!n)
		return;
	note("text bulk %s (%u keys from u%d:%u)", nm(i), n, f->uid, idxbuf[0]);
	out_len = 0;
	out_fmt("bulk %s", nm(i));
	for (unsigned j = 0; j < n; j++)
		out_fmt(" u%d:%u", f->uid, idxbuf[j]);
	out_add("\n", 1);
	send_out(S.tfd);
	read_reply(S.tfd, false);
	if (strncmp(reply, "Yes", 3) && strncmp(reply, "No", 2)) {
		if (f->nonscaling && strstr(reply, "full"))
			return;
		snprintf(line, sizeof(line), "bulk %s", nm(i));
		fail("text %s: %.200s", line, reply);
	}
	for (unsigned j = 0; j < n; j++)
		f->keys[idxbuf[j]] = K_ACKED;
	S.st.keys_acked += n;
	f->closed = false;
}

/* BF.DEL of a few acknowledged keys of a counting filter. */
static void op_delete(int i, bool in_flight)
{
	struct filter *f = S.names[i].f;

	if (!f->counting || !f->next)
		return;
	for (int t = 0; t < 8; t++) {
		unsigned k = below(f->next);
		const char *r;

		if (f->keys[k] != K_ACKED)
			continue;
		note("BF.DEL %s u%d:%u", nm(i), f->uid, k);
		resp_begin(3);
		resp_arg("BF.DEL", 6);
		resp_arg(nm(i), strlen(nm(i)));
		resp_argf("u%d:%u", f->uid, k);
		if (in_flight) {
			send_out(S.rfd);
			f->keys[k] = K_DELETED; /* maybe: not checked either way */
			return;
		}
		r = resp_go();
		if (!strcmp(r, ":1\r\n"))
			f->keys[k] = K_DELETED;
		else if (strstr(r, "more than one"))
			; /* refused: still present */
		else
			fail("BF.DEL %s u%d:%u: %.200s", nm(i), f->uid, k, r);
	}
}

/* A create over one of the three protocols. */
static void op_create(bool in_flight)
{
	int i = name_in(N_ABSENT), proto = (int)below(3);
	bool counting = chance(25), nonscaling = chance(12), big = chance(10);
	uint64_t cap = nonscaling ? 4000 + below(8000) : big ? 100000 : 100;
	char line[256], path[64];
	int status;

	if (i < 0 || any_cleared()) /* a cleared name's file would load at the next start */
		return;
	note("create %s via %s cap %" PRIu64 "%s%s", nm(i),
	     proto == 0	  ? "RESP"
	     : proto == 1 ? "text"
			  : "HTTP",
	     cap, counting ? " counting" : "", nonscaling ? " nonscaling" : "");
	S.names[i].f = filter_new(counting, nonscaling, cap);
	S.names[i].state = N_MAYBE;
	if (proto == 0) {
		snprintf(line, sizeof(line), "BF.RESERVE %s 0.01 %" PRIu64 "%s%s", nm(i), cap,
			 nonscaling ? " NONSCALING" : "", counting ? " COUNTING" : "");
		if (in_flight) {
			resp_words(line);
			send_out(S.rfd);
			return;
		}
		rexpect(line, "+OK\r\n");
	} else if (proto == 1) {
		snprintf(line, sizeof(line), "create %s capacity=%" PRIu64 " prob=0.01%s%s", nm(i),
			 cap, counting ? " type=counting" : "", nonscaling ? " nonscaling" : "");
		if (in_flight) {
			out_len = 0;
			out_fmt("%s\n", line);
			send_out(S.tfd);
			return;
		}
		texpect(line, "Done\n");
	} else {
		out_len = 0;
		out_fmt("{\"capacity\":%" PRIu64
			",\"error_rate\":0.01,\"type\":\"%s\",\"nonscaling\":%s}",
			cap, counting ? "counting" : "bloom", nonscaling ? "true" : "false");
		snprintf(path, sizeof(path), "/v1/filters/%s", nm(i));
		status = http_go("PUT", path, "application/json", NULL);
		if (status != 201)
			fail("PUT %s: %d %.300s", path, status, reply);
	}
	S.names[i].state = N_PRESENT;
}

static void op_rename(bool in_flight)
{
	int from = name_in(N_PRESENT), to = chance(40) ? name_in(N_PRESENT) : name_in(N_ABSENT);
	char w[64];

	if (from < 0 || to < 0 || to == from || any_cleared())
		return;
	snprintf(w, sizeof(w), "RENAME %s %s", nm(from), nm(to));
	note("%s%s", w, S.names[to].state == N_PRESENT ? " (over an existing filter)" : "");
	if (in_flight) {
		S.pending = (struct pending){P_RENAME, from, to, S.names[to].f};
		resp_words(w);
		send_out(S.rfd);
		return;
	}
	rexpect(w, "+OK\r\n");
	filter_free(S.names[to].f);
	S.names[to] = S.names[from];
	S.names[from].f = NULL;
	S.names[from].state = N_ABSENT;
}

static void op_del(bool in_flight)
{
	int i = name_in(N_PRESENT);
	char w[64];

	if (i < 0)
		return;
	snprintf(w, sizeof(w), "DEL %s", nm(i));
	note("%s", w);
	if (in_flight) {
		S.pending = (struct pending){P_DEL, i, 0, NULL};
		resp_words(w);
		send_out(S.rfd);
		return;
	}
	rexpect(w, ":1\r\n");
	slot_drop(i);
}

static void op_expire(void)
{
	int i = name_in(N_PRESENT);
	char w[64];

	if (i < 0)
		return;
	if (chance(60)) {
		snprintf(w, sizeof(w), "EXPIRE %s %d", nm(i), LONG_TTL - (int)below(1000));
		note("%s", w);
		rexpect(w, ":1\r\n");
		S.names[i].f->ttl = 1;
	} else {
		snprintf(w, sizeof(w), "PERSIST %s", nm(i));
		note("%s", w);
		rexpect(w, S.names[i].f->ttl == 1 ? ":1\r\n" : ":0\r\n");
		S.names[i].f->ttl = 0;
	}
}

static void op_flushall(bool in_flight)
{
	if (any_cleared())
		return;
	note("FLUSHALL");
	if (in_flight) {
		S.pending = (struct pending){P_FLUSHALL, 0, 0, NULL};
		resp_words("FLUSHALL");
		send_out(S.rfd);
		return;
	}
	rexpect("FLUSHALL", "+OK\r\n");
	for (int i = 0; i < NNAMES; i++)
		slot_drop(i);
}

/* Text close; then a check pages it in (or, sometimes, clear forgets it until a start). */
static void op_close(void)
{
	int i = name_in(N_PRESENT);
	struct filter *f;
	char line[64];

	if (i < 0)
		return;
	f = S.names[i].f;
	snprintf(line, sizeof(line), "close %s", nm(i));
	note("text %s", line);
	texpect(line, "Done\n");
	f->closed = true;
	if (chance(25)) {
		snprintf(line, sizeof(line), "clear %s", nm(i));
		note("text %s", line);
		texpect(line, "Done\n");
		S.names[i].state = N_CLEARED;
		return;
	}
	for (unsigned k = 0; k < f->next; k++) {
		if (f->keys[k] != K_ACKED)
			continue;
		snprintf(line, sizeof(line), "check %s u%d:%u", nm(i), f->uid, k);
		note("text %s (after close)", line);
		texpect(line, "Yes\n");
		f->closed = false;
		break;
	}
}

/* BF.SCANDUMP of a filter, BF.LOADCHUNK of each chunk into a free name. */
static void op_copy(bool in_flight)
{
	int from = name_in(N_PRESENT), to = name_in(N_ABSENT);
	struct filter *f, *g;
	long long iter = 0;

	if (from < 0 || to < 0 || any_cleared())
		return;
	f = S.names[from].f;
	note("BF.SCANDUMP %s, BF.LOADCHUNK into %s", nm(from), nm(to));
	g = filter_new(f->counting, f->nonscaling, f->capacity);
	g->uid = f->uid; /* the same keys */
	g->next = f->next;
	memcpy(g->keys, f->keys, MAX_KEYS);
	for (unsigned k = 0; k < g->next; k++)
		if (g->keys[k] == K_MAYBE)
			g->keys[k] = K_NONE;
	S.names[to].f = g;
	S.names[to].state = N_MAYBE;
	for (;;) {
		char *chunk;
		size_t clen;
		const char *p;

		resp_begin(3);
		resp_arg("BF.SCANDUMP", 11);
		resp_arg(nm(from), strlen(nm(from)));
		resp_argf("%lld", iter);
		p = resp_go();
		if (strncmp(p, "*2\r\n:", 5))
			fail("BF.SCANDUMP %s %lld: %.200s", nm(from), iter, p);
		iter = atoll(p + 5);
		p = strchr(p + 5, '$');
		clen = (size_t)atol(p + 1);
		p = strchr(p, '\n') + 1;
		if (iter == 0)
			break;
		chunk = malloc(clen + 1);
		if (!chunk)
			fail("out of memory");
		memcpy(chunk, p, clen);
		resp_begin(4);
		resp_arg("BF.LOADCHUNK", 12);
		resp_arg(nm(to), strlen(nm(to)));
		resp_argf("%lld", iter);
		resp_arg(chunk, clen);
		free(chunk);
		if (in_flight && chance(30)) {
			send_out(S.rfd);
			return;
		}
		if (strcmp(resp_go(), "+OK\r\n"))
			fail("BF.LOADCHUNK %s %lld: %.200s", nm(to), iter, reply);
	}
	S.names[to].state = N_PRESENT;
}

static void op_save(void)
{
	if (chance(50)) {
		note("SAVE");
		rexpect("SAVE", "+OK\r\n");
	} else {
		note("BGSAVE");
		rcall("BGSAVE");
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Kinds of step */

enum kind {
	OP_CREATE,
	OP_MADD,
	OP_HTTP_ADD,
	OP_TEXT_ADD,
	OP_DELETE,
	OP_RENAME,
	OP_DEL,
	OP_EXPIRE,
	OP_FLUSHALL,
	OP_CLOSE,
	OP_COPY,
	OP_SAVE,
	OP_SLEEP,
	OP_KILL,
	OP_KILL_IN_FLIGHT,
	OP_TERM,
	OP_POWER_CUT, /* a kill turned into a power cut (below2): never drawn as a kind */
	OP_KINDS
};

/* Each kind's name (for --without) and its share of the steps, in thousandths. */
static const struct {
	const char *name;
	unsigned weight;
} kinds[OP_KINDS] = {
    [OP_CREATE] = {"create", 90},
    [OP_MADD] = {"madd", 310},
    [OP_HTTP_ADD] = {"http-add", 70},
    [OP_TEXT_ADD] = {"text-add", 30},
    [OP_DELETE] = {"delete", 60},
    [OP_RENAME] = {"rename", 50},
    [OP_DEL] = {"del", 40},
    [OP_EXPIRE] = {"expire", 40},
    [OP_FLUSHALL] = {"flushall", 5},
    [OP_CLOSE] = {"close", 45},
    [OP_COPY] = {"copy", 30},
    [OP_SAVE] = {"save", 50},
    [OP_SLEEP] = {"sleep", 20},
    [OP_KILL] = {"kill", 60},
    [OP_KILL_IN_FLIGHT] = {"kill-in-flight", 40},
    [OP_TERM] = {"term", 60},
    [OP_POWER_CUT] = {"power-cut", 0},
};

static bool
    without[OP_KINDS]; /* --without: kinds not run (a madd instead; in flight at a kill: none) */

/* ---------------------------------------------------------------------------------------- */
/* Faults */

/*
 * A power cut, the daemon killed: the data directory becomes what the disk holds (fsmodel.h):
 * what was made durable, and sometimes the first calls of what was not. That state is then on
 * disk for good: a sync point.
 */
static void power_cut(void)
{
	char cut[256], why[128];
	unsigned keep = below2(2) ? below2(1000) : 0;
	size_t nondur = 0;
	int rc;

	snprintf(cut, sizeof(cut), "%s/cut", S.dir);
	rc = fsmodel_cut(S.fm, keep, cut, &nondur, why, sizeof(why));
	if (rc)
		fail("power cut: %s (%s)", why, strerror(-rc));
	note("  power cut: of %zu calls not durable, the first %u/1000 kept", nondur, keep);
	if (rm_tree(S.data_dir) || rename(cut, S.data_dir))
		fail("power cut: cannot replace %s", S.data_dir);
	/* The last cut's trace stays, for a failure to be looked into. */
	snprintf(cut, sizeof(cut), "%s/trace.cut", S.dir);
	if (rename(S.trace, cut))
		fail("power cut: cannot keep the trace");
	if (fsmodel_sync_point(S.fm))
		fail("power cut: no sync point");
	S.st.power_cuts++;
	S.st.cut_calls += nondur - (nondur * keep + 999) / 1000;
}

/*
 * The promise per wal_fsync (README, "Persistence"): with always nothing acknowledged is lost
 * to a power cut; with everysec at most about the last second, so the cut comes 2.5 s after
 * the last acknowledgement, and again nothing may be lost. A cut under a daemon in flight with
 * a request is all or nothing for that request, as a kill.
 */
static void restart(int sig, bool in_flight, bool cut)
{
	bool change = chance(50);

	if (in_flight) {
		/* A request without its reply: sent, then the daemon killed within a moment. */
		int i = name_in(N_PRESENT);
		unsigned what = below(6);

		/* The draws are those of every kind, so --without changes only what runs. */
		if (i >= 0 && what < 3) {
			if (what == 0 && !without[OP_MADD])
				op_madd(i, true);
			else if (what == 1 && !without[OP_HTTP_ADD])
				op_http_add(i, true);
			else if (what == 2 && !without[OP_DELETE])
				op_delete(i, true);
		} else if (what == 3) {
			if (!without[OP_CREATE])
				op_create(true);
		} else if (what == 4) {
			if (!without[OP_RENAME])
				op_rename(true);
		} else if (chance(20)) {
			if (!without[OP_FLUSHALL])
				op_flushall(true);
		} else if (!without[OP_DEL]) {
			op_del(true);
		}
		itest_sleep_ms((int)below(4));
		S.st.inflight_kills++;
	}
	if (cut && strstr(S.conf, "wal_fsync = everysec")) {
		note("wait 2.5 s (wal_fsync = everysec: the last second may be lost)");
		itest_sleep_ms(2500);
	}
	note("%s%s",
	     cut	      ? "power cut"
	     : sig == SIGKILL ? "SIGKILL"
			      : "SIGTERM",
	     change ? ", new config" : "");
	stop(sig);
	if (cut)
		power_cut();
	else if (sig == SIGKILL)
		S.st.kills++;
	else
		S.st.terms++;
	/* A long trace is cut short: with no daemon running, every file made durable. */
	if (S.fm && fsmodel_trace_bytes(S.fm) > (256u << 20) && fsmodel_sync_point(S.fm))
		fail("no sync point");
	if (change) {
		new_config();
		S.st.config_changes++;
		note("  config: %s", S.conf);
	}
	start();
	S.st.restarts++;
	check_all();
}

static enum kind pick_kind(void)
{
	unsigned r = below(1000);
	enum kind k = OP_CREATE;

	while (k + 1 < OP_KINDS && r >= kinds[k].weight)
		r -= kinds[k++].weight;
	return without[k] ? OP_MADD : k;
}

/* One random step. */
static void step(void)
{
	enum kind k = pick_kind();
	int i = name_in(N_PRESENT);
	/* A kill is a power cut at times (drawn from their own stream, always). */
	bool cut = below2(100) < 35 && S.fm && !without[OP_POWER_CUT];

	S.st.ops++;
	if (i < 0 && any_cleared()) { /* creates wait for the cleared filters to come back */
		restart(SIGTERM, false, false);
		return;
	}
	if (i < 0)
		k = OP_CREATE;
	switch (k) {
	case OP_CREATE:
		op_create(false);
		break;
	case OP_MADD:
		if (without[OP_MADD])
			op_save();
		else
			op_madd(i, false);
		break;
	case OP_HTTP_ADD:
		op_http_add(i, false);
		break;
	case OP_TEXT_ADD:
		op_text_add(i);
		break;
	case OP_DELETE:
		op_delete(i, false);
		break;
	case OP_RENAME:
		op_rename(false);
		break;
	case OP_DEL:
		op_del(false);
		break;
	case OP_EXPIRE:
		op_expire();
		break;
	case OP_FLUSHALL:
		op_flushall(false);
		break;
	case OP_CLOSE:
		op_close();
		break;
	case OP_COPY:
		op_copy(false);
		break;
	case OP_SAVE:
		op_save();
		break;
	case OP_SLEEP:
		note("sleep 1.2 s (a checkpoint, paging out)");
		itest_sleep_ms(1200);
		break;
	case OP_KILL:
		restart(SIGKILL, false, cut);
		break;
	case OP_KILL_IN_FLIGHT:
		restart(SIGKILL, true, cut);
		break;
	case OP_TERM:
	case OP_POWER_CUT:
	case OP_KINDS:
		restart(SIGTERM, false, false);
		break;
	}
}

/* --without a,b,c: 0, or -1 for an unknown kind. */
static int parse_without(const char *list)
{
	char buf[512], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		enum kind k = OP_CREATE;

		while (k < OP_KINDS && strcmp(kinds[k].name, w))
			k++;
		if (k == OP_KINDS)
			return -1;
		without[k] = true;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------- */

static void print_stats(const char *what, const struct stats *s)
{
	printf("# %s: %lu operations, %lu restarts, %lu kills (%lu with a request in flight), "
	       "%lu SIGTERMs, %lu configuration changes, %lu keys acknowledged, %lu key checks, "
	       "%lu power cuts (%lu file system calls lost; the model taken again from the disk "
	       "%lu times)\n",
	       what, s->ops, s->restarts, s->kills, s->inflight_kills, s->terms, s->config_changes,
	       s->keys_acked, s->checks, s->power_cuts, s->cut_calls, s->resyncs);
	fflush(stdout);
}

static int rm_tree(const char *dir)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

/* One seed, up to op_limit operations or the deadline. Returns only on success. */
static void run_seed(uint64_t seed)
{
	memset(&S.names, 0, sizeof(S.names));
	memset(&S.st, 0, sizeof(S.st));
	S.pending = (struct pending){0};
	S.nuid = 0;
	S.nhist = 0;
	S.seed = seed;
	S.rng = seed;
	S.rng2 = seed ^ 0x70c7c075ULL;
	snprintf(S.dir, sizeof(S.dir), "/tmp/crashsim-%" PRIu64 "-XXXXXX", seed);
	if (!mkdtemp(S.dir))
		fail("mkdtemp: %s", strerror(errno));
	snprintf(S.data_dir, sizeof(S.data_dir), "%s/data", S.dir);
	snprintf(S.all_log, sizeof(S.all_log), "%s/daemon-all.log", S.dir);
	if (mkdir(S.data_dir, 0700))
		fail("mkdir: %s", strerror(errno));
	if (fsrec_lib && !without[OP_POWER_CUT]) {
		char wrapper[1024];

		snprintf(S.trace, sizeof(S.trace), "%s/trace", S.dir);
		snprintf(wrapper, sizeof(wrapper),
			 "env LD_PRELOAD=%s FSREC_DIR=%s FSREC_OUT=%s "
			 "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0",
			 fsrec_lib, S.data_dir, S.trace);
		setenv("BLOSSOMD_WRAPPER", wrapper, 1);
		S.fm = fsmodel_new(S.data_dir, S.trace);
		if (!S.fm || fsmodel_sync_point(S.fm))
			fail("cannot model the data directory's disk");
	}
	new_config();
	note("config: %s", S.conf);
	start();
	while (S.st.ops < S.op_limit && itest_now_ms() < S.deadline_ms)
		step();
	restart(SIGTERM, false, false);
	stop(SIGTERM);
	for (int i = 0; i < NNAMES; i++)
		slot_drop(i);
	fsmodel_free(S.fm);
	S.fm = NULL;
	rm_tree(S.dir);
}

int main(int argc, char **argv)
{
	uint64_t seeds[64];
	unsigned nseeds = 0;
	long seconds = 0;
	struct stats total = {0};
	int64_t begin = itest_now_ms();

	argv0 = argv[0];
	S.op_limit = 1000000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--tap")) {
			tap = true;
			continue;
		}
		if (!v)
			goto usage;
		i++;
		if (!strcmp(a, "--seed"))
			seeds[nseeds++ % 64] = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--seeds"))
			for (char *p = (char *)v; *p && nseeds < 64; p += *p == ',')
				seeds[nseeds++] = strtoull(p, &p, 10);
		else if (!strcmp(a, "--ops"))
			S.op_limit = strtoul(v, NULL, 10);
		else if (!strcmp(a, "--seconds"))
			seconds = strtol(v, NULL, 10);
		else if (!strcmp(a, "--without") && !parse_without(v))
			snprintf(without_arg, sizeof(without_arg), " --without %s", v);
		else
			goto usage;
	}
	if (!itest_bin()) {
		fprintf(stderr, "crashsim: BLOSSOMD_BIN is not set\n");
		return 2;
	}
	if (!nseeds)
		seeds[nseeds++] = 1;
	/*
	 * Under a wrapper (valgrind) the daemon is some 30 times slower: a bounded run would
	 * cover a handful of operations and mostly time starts, so it is skipped (the same
	 * daemon code paths run under valgrind in the other integration tests).
	 */
	if (tap && getenv("BLOSSOMD_WRAPPER") && *getenv("BLOSSOMD_WRAPPER")) {
		printf("1..0 # SKIP crashsim under BLOSSOMD_WRAPPER: too slow to cover anything\n");
		return 0;
	}
	/* Power cuts record the daemon's file system calls (fsrec, by LD_PRELOAD): not beside
	 * another wrapper. */
	fsrec_lib = getenv("FSREC_LIB");
	if (fsrec_lib &&
	    (!*fsrec_lib || (getenv("BLOSSOMD_WRAPPER") && *getenv("BLOSSOMD_WRAPPER"))))
		fsrec_lib = NULL;
	if (tap)
		printf("1..%u\n", nseeds);
	printf("# power cuts: %s\n", without[OP_POWER_CUT] ? "left out (--without power-cut)"
				     : fsrec_lib	   ? "on (a third of the kills)"
							   : "off (FSREC_LIB is not set)");
	signal(SIGPIPE, SIG_IGN);
	for (unsigned k = 0; k < nseeds; k++) {
		char what[64];

		tap_index = k + 1;
		S.deadline_ms = seconds ? begin + seconds * 1000 * (k + 1) / nseeds : INT64_MAX;
		run_seed(seeds[k]);
		snprintf(what, sizeof(what), "seed %" PRIu64, seeds[k]);
		if (tap)
			printf("ok %u - %s\n", k + 1, what);
		print_stats(what, &S.st);
		total.ops += S.st.ops;
		total.restarts += S.st.restarts;
		total.kills += S.st.kills;
		total.inflight_kills += S.st.inflight_kills;
		total.terms += S.st.terms;
		total.config_changes += S.st.config_changes;
		total.keys_acked += S.st.keys_acked;
		total.checks += S.st.checks;
		total.power_cuts += S.st.power_cuts;
		total.cut_calls += S.st.cut_calls;
		total.resyncs += S.st.resyncs;
	}
	print_stats("total", &total);
	return 0;
usage:
	fprintf(stderr,
		"usage: %s [--seed S | --seeds a,b,c] [--ops N] [--seconds N] [--tap] "
		"[--without KIND,...]\nkinds:",
		argv[0]);
	for (int k = 0; k < OP_KINDS; k++)
		fprintf(stderr, " %s", kinds[k].name);
	fprintf(stderr, "\n");
	return 2;
}
