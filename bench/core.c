/* SPDX-License-Identifier: MIT */
/*
 * bench/core: the core filter against Debian's libbloom, on the same keys, in the same run.
 *
 * For each N (default 10M and 100M) at rate p (default 0.01):
 *   - N random 16-byte keys (splitmix64, generated up front, not timed) are inserted into a
 *     non-scaling blossomd filter of capacity N and into a libbloom filter of N entries;
 *   - "present" probes: M keys drawn uniformly (with replacement) from the N added keys and
 *     copied into their own array, so they are checked in an order unrelated to insert order;
 *   - "absent" probes: M keys from a distinct stream that can never equal an added key (the
 *     low bit of the last word marks the stream); they give the measured FPR;
 *   - single check: one call per key; batched check: bf_filter_check_batch over batches of
 *     `batch` keys (pointer and length arrays prepared up front). libbloom has no batch API,
 *     so its batched figure is its single-check figure.
 * Both libraries run alternately, loop by loop; every loop is repeated `reps` times (inserts into
 * fresh filters) and the median is reported. Times are wall clock (CLOCK_MONOTONIC); CPU time
 * (CLOCK_PROCESS_CPUTIME_ID) is kept to show the run was not descheduled.
 *
 * Exit status: 0 whatever the figures (it is a benchmark); 1 if setup fails or the results are
 * inconsistent (a false negative, or batched answers differing from single ones).
 */
#include <bloom.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bf_filter.h"
#include "core/bf_layer_impl.h"
#include "bench/progress.h"

/* Progress on a terminal (bench/progress.h): work in keys, an insert rep's N and a check rep's
 * CHECK_LOOPS x M probes. */
#define CHECK_LOOPS 6
static struct bench_progress progress;
static double work_done, work_total;

#define KEY_BYTES 16
#define MAX_SIZES 16

/* Targets of the issue, at p = 0.01. */
#define TARGET_BITS_PER_KEY 10.6
#define TARGET_CHECK_RATIO  4.0
#define TARGET_BATCH_RATIO  8.0
#define TARGET_P	    0.01

struct key {
	uint64_t w[2];
};

struct opts {
	uint64_t n[MAX_SIZES];
	unsigned nsizes;
	double p;
	uint64_t probes;
	size_t batch;
	unsigned reps;
	uint64_t seed;
};

/* ---- keys ---- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Stream 0 = keys that are added, stream 1 = keys that never are: they differ in one bit. */
static void gen_keys(struct key *k, uint64_t n, uint64_t seed, unsigned stream)
{
	uint64_t s = seed;

	for (uint64_t i = 0; i < n; i++) {
		k[i].w[0] = splitmix64(&s);
		k[i].w[1] = (splitmix64(&s) & ~UINT64_C(1)) | stream;
	}
}

/* Uniform in [0, n) by multiply-shift. */
static uint64_t bounded(uint64_t *s, uint64_t n)
{
	__extension__ typedef unsigned __int128 u128;
	return (uint64_t)(((u128)splitmix64(s) * n) >> 64);
}

/* ---- timing ---- */

struct stamp {
	struct timespec wall, cpu;
};

struct span {
	double wall_ns, cpu_ns;
};

static void stamp_now(struct stamp *s)
{
	clock_gettime(CLOCK_MONOTONIC, &s->wall);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &s->cpu);
}

static double ts_ns(struct timespec t)
{
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static struct span stamp_since(const struct stamp *a)
{
	struct stamp b;
	stamp_now(&b);
	return (struct span){ts_ns(b.wall) - ts_ns(a->wall), ts_ns(b.cpu) - ts_ns(a->cpu)};
}

/* Totals over every timed loop, for the CPU/wall sanity figure. */
static double total_wall_ns, total_cpu_ns;

static double per_op(struct span s, uint64_t ops)
{
	total_wall_ns += s.wall_ns;
	total_cpu_ns += s.cpu_ns;
	return s.wall_ns / (double)ops;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the timed loops (one per library and operation) ---- */

static int bd_insert(struct bf_filter *f, const struct key *k, uint64_t n, uint64_t *added)
{
	uint64_t a = 0;

	for (uint64_t i = 0; i < n; i++) {
		int rc = bf_filter_add(f, &k[i], KEY_BYTES);
		if (rc < 0)
			return rc;
		a += (uint64_t)rc;
	}
	*added = a;
	return 0;
}

static uint64_t lb_insert(struct bloom *b, const struct key *k, uint64_t n)
{
	uint64_t dup = 0;

	for (uint64_t i = 0; i < n; i++)
		dup += (uint64_t)bloom_add(b, &k[i], KEY_BYTES);
	return n - dup; /* bloom_add answers 1 when every bit was already set */
}

static uint64_t bd_check(struct bf_filter *f, const struct key *k, uint64_t m)
{
	uint64_t hits = 0;

	for (uint64_t i = 0; i < m; i++)
		hits += (uint64_t)bf_filter_check(f, &k[i], KEY_BYTES);
	return hits;
}

static uint64_t lb_check(struct bloom *b, const struct key *k, uint64_t m)
{
	uint64_t hits = 0;

	for (uint64_t i = 0; i < m; i++)
		hits += (uint64_t)bloom_check(b, &k[i], KEY_BYTES);
	return hits;
}

static uint64_t bd_check_batch(struct bf_filter *f, const void *const *ptrs, const size_t *lens,
			       uint64_t m, size_t batch, int *out)
{
	uint64_t hits = 0;

	for (uint64_t base = 0; base < m; base += batch) {
		size_t n = m - base < batch ? (size_t)(m - base) : batch;
		bf_filter_check_batch(f, n, ptrs + base, lens + base, out);
		for (size_t i = 0; i < n; i++)
			hits += (uint64_t)out[i];
	}
	return hits;
}

/* ---- options ---- */

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: bench/core [--n N ...] [--p P] [--probes M] [--batch B] [--reps R] [--seed S]\n"
	    "  --n N       keys inserted; repeat or comma-separate for several sizes\n"
	    "              (default 10M and 100M; suffixes k, M, G are powers of 1000)\n"
	    "  --p P       target false-positive rate (default 0.01)\n"
	    "  --probes M  present and absent keys checked per loop (default 10M)\n"
	    "  --batch B   keys per bf_filter_check_batch call (default 1024)\n"
	    "  --reps R    repetitions of every timed loop, median reported (default 3)\n"
	    "  --seed S    seed of the key streams and of the filter (default 1)\n");
}

static bool parse_count(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'k':
	case 'K':
		v *= 1e3;
		end++;
		break;
	case 'm':
	case 'M':
		v *= 1e6;
		end++;
		break;
	case 'g':
	case 'G':
		v *= 1e9;
		end++;
		break;
	default:
		break;
	}
	if (*end || !(v >= 1) || v > 1e15 || v != floor(v))
		return false;
	*out = (uint64_t)v;
	return true;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.p = 0.01, .probes = 10000000, .batch = 1024, .reps = 3, .seed = 1};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "bench/core: %s needs a value\n", a);
			return -1;
		}
		const char *v = argv[++i];
		uint64_t c;
		if (!strcmp(a, "--n")) {
			char buf[256];
			snprintf(buf, sizeof(buf), "%s", v);
			for (char *save, *t = strtok_r(buf, ",", &save); t;
			     t = strtok_r(NULL, ",", &save)) {
				if (o->nsizes == MAX_SIZES || !parse_count(t, &c)) {
					fprintf(stderr, "bench/core: bad --n %s\n", t);
					return -1;
				}
				o->n[o->nsizes++] = c;
			}
		} else if (!strcmp(a, "--p")) {
			char *end;
			o->p = strtod(v, &end);
			if (*end || !(o->p > 0 && o->p < 1)) {
				fprintf(stderr, "bench/core: --p must be in (0, 1)\n");
				return -1;
			}
		} else if (!strcmp(a, "--probes")) {
			if (!parse_count(v, &o->probes)) {
				fprintf(stderr, "bench/core: bad --probes %s\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--batch")) {
			if (!parse_count(v, &c) || c > 1000000) {
				fprintf(stderr, "bench/core: bad --batch %s\n", v);
				return -1;
			}
			o->batch = (size_t)c;
		} else if (!strcmp(a, "--reps")) {
			if (!parse_count(v, &c) || c > 100) {
				fprintf(stderr, "bench/core: bad --reps %s\n", v);
				return -1;
			}
			o->reps = (unsigned)c;
		} else if (!strcmp(a, "--seed")) {
			char *end;
			errno = 0;
			o->seed = strtoull(v, &end, 0);
			if (errno || *end) {
				fprintf(stderr, "bench/core: bad --seed %s\n", v);
				return -1;
			}
		} else {
			fprintf(stderr, "bench/core: unknown option %s\n", a);
			usage(stderr);
			return -1;
		}
	}
	if (o->nsizes == 0) {
		o->n[o->nsizes++] = 10000000;
		o->n[o->nsizes++] = 100000000;
	}
	/* libbloom 1.6 keeps entries and its bit count in an int, and refuses < 1000 entries. */
	double bpe = -log(o->p) / (M_LN2 * M_LN2);
	for (unsigned i = 0; i < o->nsizes; i++) {
		if (o->n[i] < 1000 || (double)o->n[i] * bpe >= (double)INT_MAX) {
			fprintf(stderr,
				"bench/core: N = %" PRIu64
				" is outside what libbloom can hold at p = %g "
				"(1000 <= N, N * %.2f bits < 2^31)\n",
				o->n[i], o->p, bpe);
			return -1;
		}
	}
	return 0;
}

/* ---- one size ---- */

struct side {
	double bits_per_key, mib;
	unsigned k;
	uint64_t added; /* inserts that answered "new" */
	uint64_t fp;	/* absent probes answered "maybe present" (single check) */
	uint64_t fn;	/* present probes answered "absent" */
	double ins, chk_present, chk_absent, bat_present, bat_absent; /* ns per key */
	uint64_t checksum; /* hits summed over every timed loop */
};

struct result {
	uint64_t n;
	struct side bd, lb;
	bool consistent;
};

static void *xmalloc(size_t bytes, const char *what)
{
	void *p = malloc(bytes);
	if (!p)
		fprintf(stderr, "bench/core: cannot allocate %zu bytes for %s\n", bytes, what);
	return p;
}

static int run_size(const struct opts *o, uint64_t n, const struct key *keys,
		    const struct key *absent, struct key *present, const void **present_ptrs,
		    const void **absent_ptrs, const size_t *lens, int *out, struct result *r)
{
	const uint64_t m = o->probes;
	uint64_t s = o->seed ^ UINT64_C(0x5bd1e9955bd1e995) ^ n;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->consistent = true;

	/* Present probes: a random-order sample of the added keys, copied so reads stream. */
	for (uint64_t i = 0; i < m; i++) {
		present[i] = keys[bounded(&s, n)];
		present_ptrs[i] = &present[i];
		absent_ptrs[i] = &absent[i];
	}

	struct bf_params params = {.capacity = n,
				   .error_rate = o->p,
				   .type = BF_TYPE_BLOOM,
				   .expansion = 0,
				   .persist = false};
	struct bf_filter *f = NULL;
	struct bloom b = {0};
	struct stamp t;
	double bi[100], li[100];

	/*
	 * Inserts: reps times into fresh filters (a filter cannot be un-filled), blossomd then
	 * libbloom; the filters of the last rep are kept for the checks.
	 */
	for (unsigned rep = 0; rep < o->reps; rep++) {
		bench_progress(&progress, work_done, work_total,
			       "bench/core: N = %" PRIu64 ", inserts, rep %u/%u", n, rep + 1,
			       o->reps);
		if (f) {
			bf_filter_free(f);
			bloom_free(&b);
		}
		int rc = bf_filter_new(&params, o->seed, NULL, &f);
		if (rc) {
			fprintf(stderr, "bench/core: bf_filter_new(N = %" PRIu64 "): %s\n", n,
				strerror(-rc));
			return -1;
		}
		if (bloom_init(&b, (int)n, o->p)) {
			fprintf(stderr, "bench/core: bloom_init(N = %" PRIu64 ") failed\n", n);
			bf_filter_free(f);
			return -1;
		}

		stamp_now(&t);
		rc = bd_insert(f, keys, n, &r->bd.added);
		bi[rep] = per_op(stamp_since(&t), n);
		if (rc) {
			fprintf(stderr, "bench/core: bf_filter_add: %s\n", strerror(-rc));
			bloom_free(&b);
			bf_filter_free(f);
			return -1;
		}
		stamp_now(&t);
		r->lb.added = lb_insert(&b, keys, n);
		li[rep] = per_op(stamp_since(&t), n);
		r->bd.checksum += r->bd.added;
		r->lb.checksum += r->lb.added;
		work_done += (double)n;
	}
	r->bd.ins = median(bi, o->reps);
	r->lb.ins = median(li, o->reps);

	r->bd.bits_per_key = (double)bf_filter_bytes(f) * 8 / (double)n;
	r->bd.mib = (double)bf_filter_bytes(f) / (1 << 20);
	r->bd.k = 8u * bf_filter_layers(f)[0].b;
	r->lb.bits_per_key = (double)b.bytes * 8 / (double)n;
	r->lb.mib = (double)b.bytes / (1 << 20);
	r->lb.k = (unsigned)b.hashes;

	/* Checks: every loop reps times, the two libraries alternating. */
	double bcp[100], bca[100], lcp[100], lca[100], btp[100], bta[100];
	for (unsigned rep = 0; rep < o->reps; rep++) {
		bench_progress(&progress, work_done, work_total,
			       "bench/core: N = %" PRIu64 ", checks, rep %u/%u", n, rep + 1,
			       o->reps);
		uint64_t h;

		stamp_now(&t);
		h = bd_check(f, present, m);
		bcp[rep] = per_op(stamp_since(&t), m);
		r->bd.checksum += h;
		if (rep == 0)
			r->bd.fn = m - h;

		stamp_now(&t);
		h = lb_check(&b, present, m);
		lcp[rep] = per_op(stamp_since(&t), m);
		r->lb.checksum += h;
		if (rep == 0)
			r->lb.fn = m - h;

		stamp_now(&t);
		h = bd_check(f, absent, m);
		bca[rep] = per_op(stamp_since(&t), m);
		r->bd.checksum += h;
		if (rep == 0)
			r->bd.fp = h;

		stamp_now(&t);
		h = lb_check(&b, absent, m);
		lca[rep] = per_op(stamp_since(&t), m);
		r->lb.checksum += h;
		if (rep == 0)
			r->lb.fp = h;

		stamp_now(&t);
		h = bd_check_batch(f, present_ptrs, lens, m, o->batch, out);
		btp[rep] = per_op(stamp_since(&t), m);
		r->bd.checksum += h;
		if (h != m - r->bd.fn)
			r->consistent = false;

		stamp_now(&t);
		h = bd_check_batch(f, absent_ptrs, lens, m, o->batch, out);
		bta[rep] = per_op(stamp_since(&t), m);
		r->bd.checksum += h;
		if (h != r->bd.fp)
			r->consistent = false;
		work_done += CHECK_LOOPS * (double)m;
	}
	r->bd.chk_present = median(bcp, o->reps);
	r->bd.chk_absent = median(bca, o->reps);
	r->lb.chk_present = median(lcp, o->reps);
	r->lb.chk_absent = median(lca, o->reps);
	r->bd.bat_present = median(btp, o->reps);
	r->bd.bat_absent = median(bta, o->reps);
	r->lb.bat_present = r->lb.chk_present; /* no batch API: its single check loop */
	r->lb.bat_absent = r->lb.chk_absent;
	if (r->bd.fn || r->lb.fn)
		r->consistent = false;

	bloom_free(&b);
	bf_filter_free(f);
	return 0;
}

/* ---- report ---- */

static double mix(double present, double absent)
{
	return (present + absent) / 2; /* equal counts of each: ns per check over both loops */
}

static double fp_bound(uint64_t m, double p)
{
	double mu = (double)m * p;
	return mu + 3 * sqrt(mu * (1 - p));
}

static void row_ns(const char *name, double bd, double lb)
{
	printf("  %-30s %12.1f %12.1f %9.2fx\n", name, bd, lb, lb / bd);
}

static void print_table(const struct opts *o, const struct result *r)
{
	const uint64_t m = o->probes;
	char a[64], b[64];

	printf("\nN = %" PRIu64 " keys, p = %g, M = %" PRIu64 " present + %" PRIu64
	       " absent probes\n",
	       r->n, o->p, m, m);
	printf("  %-30s %12s %12s %10s\n", "", "blossomd", "libbloom", "lb/bd");
	printf("  %-30s %12.2f %12.2f\n", "bits per key", r->bd.bits_per_key, r->lb.bits_per_key);
	printf("  %-30s %12.1f %12.1f\n", "memory (MiB)", r->bd.mib, r->lb.mib);
	printf("  %-30s %12u %12u\n", "bits probed per key (k)", r->bd.k, r->lb.k);
	snprintf(a, sizeof(a), "%.4f%%", 100.0 * (double)r->bd.fp / (double)m);
	snprintf(b, sizeof(b), "%.4f%%", 100.0 * (double)r->lb.fp / (double)m);
	printf("  %-30s %12s %12s\n", "measured FPR", a, b);
	printf("  %-30s %12" PRIu64 " %12" PRIu64 "\n", "  false positives / M", r->bd.fp,
	       r->lb.fp);
	printf("  %-30s %12" PRIu64 " %12" PRIu64 "\n", "  false negatives / M", r->bd.fn,
	       r->lb.fn);
	row_ns("insert (ns/key)", r->bd.ins, r->lb.ins);
	row_ns("check present (ns)", r->bd.chk_present, r->lb.chk_present);
	row_ns("check absent (ns)", r->bd.chk_absent, r->lb.chk_absent);
	row_ns("check 50/50 (ns)", mix(r->bd.chk_present, r->bd.chk_absent),
	       mix(r->lb.chk_present, r->lb.chk_absent));
	row_ns("batched present (ns)", r->bd.bat_present, r->lb.bat_present);
	row_ns("batched absent (ns)", r->bd.bat_absent, r->lb.bat_absent);
	row_ns("batched 50/50 (ns)", mix(r->bd.bat_present, r->bd.bat_absent),
	       mix(r->lb.bat_present, r->lb.bat_absent));
	printf("  %-30s %12" PRIu64 " %12" PRIu64 "\n", "checksum (hits, all loops)",
	       r->bd.checksum, r->lb.checksum);
	if (!r->consistent)
		printf("  ERROR: inconsistent results (false negatives, or batched != single)\n");
}

static void print_targets(const struct opts *o, const struct result *res, unsigned nres)
{
	printf(
	    "\nTargets (check figures are the 50/50 mix; libbloom batched = its single check):\n");
	for (unsigned i = 0; i < nres; i++) {
		const struct result *r = &res[i];
		double bound = fp_bound(o->probes, o->p);
		double cr = mix(r->lb.chk_present, r->lb.chk_absent) /
			    mix(r->bd.chk_present, r->bd.chk_absent);
		double br = mix(r->lb.bat_present, r->lb.bat_absent) /
			    mix(r->bd.bat_present, r->bd.bat_absent);

		if (o->p == TARGET_P)
			printf("  [%s] N=%-10" PRIu64 " bits per key      %8.2f <= %.1f\n",
			       r->bd.bits_per_key <= TARGET_BITS_PER_KEY ? "PASS" : "MISS", r->n,
			       r->bd.bits_per_key, TARGET_BITS_PER_KEY);
		else
			printf("  [ -- ] N=%-10" PRIu64 " bits per key      %8.2f (target defined "
			       "for p = 0.01 only)\n",
			       r->n, r->bd.bits_per_key);
		printf("  [%s] N=%-10" PRIu64 " false positives   %8" PRIu64
		       " <= %.0f  (M*p + 3*sqrt(M*p*(1-p)); FPR %.4f%%)\n",
		       (double)r->bd.fp <= bound ? "PASS" : "MISS", r->n, r->bd.fp, floor(bound),
		       100.0 * (double)r->bd.fp / (double)o->probes);
		printf("  [%s] N=%-10" PRIu64 " check ratio       %8.2f >= %.0f\n",
		       cr >= TARGET_CHECK_RATIO ? "PASS" : "MISS", r->n, cr, TARGET_CHECK_RATIO);
		printf("  [%s] N=%-10" PRIu64 " batched ratio     %8.2f >= %.0f\n",
		       br >= TARGET_BATCH_RATIO ? "PASS" : "MISS", r->n, br, TARGET_BATCH_RATIO);
	}
}

static void cpu_name(char *buf, size_t size)
{
	snprintf(buf, size, "unknown");
	FILE *fp = fopen("/proc/cpuinfo", "r");
	if (!fp)
		return;
	char line[512];
	while (fgets(line, sizeof(line), fp)) {
		char *c = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && c) {
			c += strspn(c + 1, " \t") + 1;
			c[strcspn(c, "\n")] = 0;
			snprintf(buf, size, "%s", c);
			break;
		}
	}
	fclose(fp);
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse_opts(argc, argv, &o))
		return 1;

	uint64_t nmax = 0;
	for (unsigned i = 0; i < o.nsizes; i++)
		nmax = o.n[i] > nmax ? o.n[i] : nmax;
	const uint64_t m = o.probes;

	char cpu[256];
	cpu_name(cpu, sizeof(cpu));
	printf("bench/core: blossomd core vs libbloom %s, %d-byte random keys (splitmix64)\n",
	       bloom_version(), KEY_BYTES);
	printf("cpu: %s; blossomd kernel: %s\n", cpu, bf_layer_have_avx2() ? "avx2" : "scalar");
	printf("p = %g; M = %" PRIu64 " probes per loop; batch = %zu; reps = %u (median); "
	       "times are wall clock, ns per key\n",
	       o.p, m, o.batch, o.reps);
	printf("present = M added keys sampled at random (not insert order); absent = M never-added"
	       " keys; 50/50 = mean of the two\n");
	fflush(stdout);

	struct key *keys = xmalloc(nmax * sizeof(*keys), "keys");
	struct key *absent = xmalloc(m * sizeof(*absent), "absent probes");
	struct key *present = xmalloc(m * sizeof(*present), "present probes");
	const void **present_ptrs = xmalloc(m * sizeof(*present_ptrs), "pointers");
	const void **absent_ptrs = xmalloc(m * sizeof(*absent_ptrs), "pointers");
	size_t *lens = xmalloc(m * sizeof(*lens), "lengths");
	int *out = xmalloc(o.batch * sizeof(*out), "batch results");
	struct result *res = xmalloc(o.nsizes * sizeof(*res), "results");
	if (!keys || !absent || !present || !present_ptrs || !absent_ptrs || !lens || !out || !res)
		return 1;

	for (unsigned i = 0; i < o.nsizes; i++)
		work_total += o.reps * ((double)o.n[i] + CHECK_LOOPS * (double)m);
	bench_progress_start(&progress);
	bench_progress(&progress, 0, work_total,
		       "bench/core: generating %" PRIu64 " + %" PRIu64 " keys", nmax, m);
	gen_keys(keys, nmax, o.seed, 0);
	gen_keys(absent, m, o.seed ^ UINT64_C(0xa0761d6478bd642f), 1);
	for (uint64_t i = 0; i < m; i++)
		lens[i] = KEY_BYTES;

	bool consistent = true;
	for (unsigned i = 0; i < o.nsizes; i++) {
		if (run_size(&o, o.n[i], keys, absent, present, present_ptrs, absent_ptrs, lens,
			     out, &res[i])) {
			bench_progress_clear(&progress);
			return 1;
		}
		bench_progress_clear(&progress);
		print_table(&o, &res[i]);
		fflush(stdout);
		consistent &= res[i].consistent;
	}
	print_targets(&o, res, o.nsizes);
	printf("\nCPU time / wall time over all timed loops: %.3f\n", total_cpu_ns / total_wall_ns);

	free(res);
	free(out);
	free(lens);
	free((void *)absent_ptrs);
	free((void *)present_ptrs);
	free(present);
	free(absent);
	free(keys);
	return consistent ? 0 : 1;
}
