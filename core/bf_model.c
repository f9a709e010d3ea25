/* SPDX-License-Identifier: MIT */
/* The sizing model: a blocked filter's false-positive rate, and the smallest layer that meets
 * a target; see bf_model.h. */
#include "core/bf_model.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>

/* Stirling numbers of the second kind S(n, k) for n, k <= BF_MODEL_MAX_B. */
static double stirling2(unsigned n, unsigned k)
{
	double s[BF_MODEL_MAX_B + 1][BF_MODEL_MAX_B + 1] = {{1}};

	for (unsigned i = 1; i <= n; i++)
		for (unsigned j = 1; j <= i; j++)
			s[i][j] = j * s[i - 1][j] + s[i - 1][j - 1];
	return s[n][k];
}

static double binomial(unsigned n, unsigned k)
{
	double r = 1;

	for (unsigned i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

/*
 * Probability that a query's b slots in one word are all set, when t slots were set
 * uniformly at random (with repetition) among `slots`. The query's b slots cover d distinct
 * slots with probability pd[d] = S(b,d) slots!/(slots-d)! / slots^b; d given slots are all
 * set with probability sum_i (-1)^i C(d,i) (1 - i/slots)^t (inclusion-exclusion). Everything
 * but the powers of t is fixed for a (slots, b): computed once per bf_model_fpr().
 */
struct word_model {
	unsigned slots, dmax;
	double pd[BF_MODEL_MAX_B + 1];
	double binom[BF_MODEL_MAX_B + 1][BF_MODEL_MAX_B + 1];
};

static void word_model_init(struct word_model *m, unsigned slots, unsigned b)
{
	m->slots = slots;
	m->dmax = b < slots ? b : slots;
	for (unsigned d = 1; d <= m->dmax; d++) {
		double pd = stirling2(b, d);
		for (unsigned i = 0; i < d; i++)
			pd *= (double)(slots - i) / slots;
		m->pd[d] = pd / pow(slots, b - d);
		for (unsigned i = 0; i <= d; i++)
			m->binom[d][i] = binomial(d, i);
	}
}

static double word_hit(const struct word_model *m, double t)
{
	double q[BF_MODEL_MAX_B + 1], total = 0;

	for (unsigned i = 0; i <= m->dmax; i++)
		q[i] = pow(1.0 - (double)i / m->slots, t);
	for (unsigned d = 1; d <= m->dmax; d++) {
		double all = 0;
		for (unsigned i = 0; i <= d; i++) {
			double term = m->binom[d][i] * q[i];
			all += (i & 1) ? -term : term;
		}
		total += m->pd[d] * all;
	}
	return total;
}

double bf_model_fpr(struct bf_geometry g, unsigned b, double lambda)
{
	struct word_model m;

	if (lambda <= 0 || b == 0)
		return 0;
	/*
	 * At 40 positions set per slot on average, a slot is still clear with probability about
	 * e^-40 = 4e-18: the rate is 1 to within 1e-15, and the sum below would walk a Poisson
	 * window of sqrt(lambda) terms (seconds for a capacity of 2^64 in a few blocks).
	 */
	if (lambda * b >= 40.0 * g.slots)
		return 1;
	word_model_init(&m, g.slots, b);

	/* Sum the Poisson(lambda) block loads over a window wide enough that the rest is < 1e-30.
	 */
	double spread = 20 * sqrt(lambda) + 50;
	double jlo = floor(lambda - spread);
	double jhi = ceil(lambda + spread);
	if (jlo < 0)
		jlo = 0;

	double sum = 0, loglambda = log(lambda);
	for (double j = jlo; j <= jhi; j++) {
		double logp = -lambda + j * loglambda - lgamma(j + 1);
		double hit = pow(word_hit(&m, j * b), g.words);
		sum += exp(logp) * hit;
	}
	return sum > 1 ? 1 : sum;
}

double bf_model_standard_fpr(double bits_per_key, unsigned k)
{
	return pow(1 - exp(-(double)k / bits_per_key), k);
}

double bf_model_standard_bits_per_key(double p)
{
	return -log(p) / (M_LN2 * M_LN2);
}

/* The modelled rate of a layer of nblocks blocks holding capacity keys. */
static double rate(struct bf_geometry g, unsigned b, uint64_t capacity, uint64_t nblocks)
{
	return bf_model_fpr(g, b, (double)capacity / nblocks);
}

/*
 * Smallest block count for one b, or 0 if more than max_blocks are needed. The rate falls as
 * blocks are added, so the answer is the one count whose rate is <= p while one block fewer
 * is over it; how it is found only changes the work. The bracket starts from the block count
 * of a textbook filter with as many slots (a blocked layer needs a little more): evaluations
 * far from the answer are the costly ones (a wide Poisson window at many keys per block).
 * Inside it, the log of the rate is nearly linear in the block count, so the next count is
 * interpolated, with a bisection after any step that did not halve the bracket.
 */
static uint64_t blocks_for(struct bf_geometry g, unsigned b, uint64_t capacity, double p,
			   uint64_t max_blocks)
{
	double guess = ceil((double)capacity * bf_model_standard_bits_per_key(p) /
			    ((double)g.words * g.slots));
	uint64_t lo = 0, hi; /* lo is too small (or 0), hi is not */
	double rlo = 1, rhi, r = 1;
	bool bisect = false;

	hi = guess < 1 ? 1 : guess >= (double)max_blocks ? max_blocks : (uint64_t)guess;
	rhi = rate(g, b, capacity, hi);
	while (rhi > p) {
		if (hi == max_blocks)
			return 0;
		lo = hi;
		rlo = rhi;
		hi = hi > max_blocks / 2 ? max_blocks : hi * 2;
		rhi = rate(g, b, capacity, hi);
	}
	if (!lo) {
		for (lo = hi / 2; lo && (r = rate(g, b, capacity, lo)) <= p; lo = hi / 2) {
			hi = lo;
			rhi = r;
		}
		if (lo)
			rlo = r;
	}
	while (hi - lo > 1) {
		uint64_t width = hi - lo, mid = lo + width / 2;

		if (lo && !bisect && rhi > 0) {
			double t = (log(rlo) - log(p)) / (log(rlo) - log(rhi));
			double m = ceil((double)lo + t * (double)width);

			mid = m <= (double)lo ? lo + 1 : m >= (double)hi ? hi - 1 : (uint64_t)m;
		}
		r = rate(g, b, capacity, mid);
		if (r > p) {
			lo = mid;
			rlo = r;
		} else {
			hi = mid;
			rhi = r;
		}
		bisect = !bisect && 2 * (hi - lo) > width;
	}
	return hi;
}

int bf_model_size(struct bf_geometry g, uint64_t capacity, double error_rate, uint64_t max_blocks,
		  uint64_t *nblocks, unsigned *b)
{
	if (capacity == 0 || !(error_rate > 0 && error_rate < 1))
		return -EINVAL;

	/* The block count is unimodal in b: stop at the first b that does worse than the last. */
	uint64_t best = 0;
	unsigned best_b = 0;
	for (unsigned k = 1; k <= BF_MODEL_MAX_B; k++) {
		uint64_t n = blocks_for(g, k, capacity, error_rate, max_blocks);
		if (n && (best == 0 || n < best)) {
			best = n;
			best_b = k;
		} else if (best) {
			break;
		}
	}
	if (best == 0)
		return -E2BIG;
	*nblocks = best;
	*b = best_b;
	return 0;
}
