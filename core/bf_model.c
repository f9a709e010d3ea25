#include "bf_model.h"

#include <errno.h>
#include <math.h>

/* Stirling numbers of the second kind S(n, k) for n, k <= BF_MODEL_MAX_B. */
static double stirling2(unsigned n, unsigned k)
{
	double s[BF_MODEL_MAX_B + 1][BF_MODEL_MAX_B + 1] = { { 1 } };

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
 * slots with probability S(b,d) slots!/(slots-d)! / slots^b; d given slots are all set with
 * probability sum_i (-1)^i C(d,i) (1 - i/slots)^t (inclusion-exclusion).
 */
static double word_hit(unsigned slots, unsigned b, double t)
{
	double total = 0;

	for (unsigned d = 1; d <= b && d <= slots; d++) {
		double pd = stirling2(b, d);
		for (unsigned i = 0; i < d; i++)
			pd *= (double)(slots - i) / slots;
		pd /= pow(slots, b - d);

		double all = 0;
		for (unsigned i = 0; i <= d; i++) {
			double term = binomial(d, i) * pow(1.0 - (double)i / slots, t);
			all += (i & 1) ? -term : term;
		}
		total += pd * all;
	}
	return total;
}

double bf_model_fpr(struct bf_geometry g, unsigned b, double lambda)
{
	if (lambda <= 0 || b == 0)
		return 0;

	/* Sum the Poisson(lambda) block loads over a window wide enough that the rest is < 1e-30. */
	double spread = 20 * sqrt(lambda) + 50;
	double jlo = floor(lambda - spread);
	double jhi = ceil(lambda + spread);
	if (jlo < 0)
		jlo = 0;

	double sum = 0;
	for (double j = jlo; j <= jhi; j++) {
		double logp = -lambda + j * log(lambda) - lgamma(j + 1);
		double hit = pow(word_hit(g.slots, b, j * b), g.words);
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

/* Smallest block count for one b by doubling then bisection; 0 if over max_blocks. */
static uint64_t blocks_for(struct bf_geometry g, unsigned b, uint64_t capacity, double p,
			   uint64_t max_blocks)
{
	/* At 4096 keys per block every slot is set: no target below 1 is met, so start there. */
	uint64_t lo = capacity >> 12;
	if (lo >= max_blocks)
		return 0;
	uint64_t hi = lo ? lo * 2 : 1;

	while (bf_model_fpr(g, b, (double)capacity / hi) > p) {
		if (hi > max_blocks / 2)
			return 0;
		lo = hi;
		hi *= 2;
	}
	while (hi - lo > 1) { /* lo fails (or is 0), hi passes */
		uint64_t mid = lo + (hi - lo) / 2;
		if (bf_model_fpr(g, b, (double)capacity / mid) > p)
			lo = mid;
		else
			hi = mid;
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
