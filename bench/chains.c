/* SPDX-License-Identifier: MIT */
/*
 * bench/chains: bits per key of a scalable chain, by the sizing model, for each share of the
 * error rate given to the first layer (a) with the tightening ratio the daemon would choose for
 * it (bf_filter_choose_ratio), against RedisBloom's chain (textbook sizes, its first layer at
 * the full rate, halving after; its rate then passes the target once it grows). Columns: a
 * chain that never grows (1x its first layer), one grown to 20x (issue 14's 10,000 -> 200,000
 * keys), and the average over chains that end anywhere from 1x to 20x, log-uniformly (sampled
 * at every 10 %), which is what BF_FIRST_SHARE was chosen by.
 *
 *	build/bench/chains [--expansion E]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf_filter.h"

#define FIRST 10000

/* RedisBloom's: layer i holds FIRST * e^i keys at p / 2^i, -ln(p_i) / ln(2)^2 bits per key. */
static double redisbloom_bits(double p, uint32_t e, uint64_t n)
{
	double bits = 0;
	uint64_t keys = 0, cap = FIRST;

	for (unsigned i = 0; keys < n; i++, cap *= e) {
		bits += ceil((double)cap * -log(p / pow(2, i)) / (M_LN2 * M_LN2));
		keys += cap;
	}
	return bits / (double)n;
}

/* The average over final sizes from 1x to 20x, log-uniform. */
static double average(double (*f)(const void *, uint64_t), const void *arg)
{
	double sum = 0;
	int count = 0;

	for (double g = 1; g <= 20; g *= 1.1, count++)
		sum += f(arg, (uint64_t)(FIRST * g));
	return sum / count;
}

static double ours_at(const void *arg, uint64_t n)
{
	return bf_filter_chain_bits(arg, n);
}

struct rb_args {
	double p;
	uint32_t e;
};

static double rb_at(const void *arg, uint64_t n)
{
	const struct rb_args *a = arg;

	return redisbloom_bits(a->p, a->e, n);
}

int main(int argc, char **argv)
{
	static const double rates[] = {0.1, 0.01, 0.001, 0.0001};
	static const double shares[] = {0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5};
	uint32_t e = 2;

	if (argc == 3 && strcmp(argv[1], "--expansion") == 0)
		e = (uint32_t)atoi(argv[2]);
	if (e < 2 || argc == 2 || argc > 3) {
		fprintf(stderr, "usage: chains [--expansion E >= 2]\n");
		return 2;
	}
	printf("expansion %u, first layer %d keys; bits per key\n", e, FIRST);
	printf("%-8s %-12s %6s %8s %8s %8s\n", "rate", "chain", "ratio", "1x", "20x", "avg");
	for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++) {
		struct rb_args rb = {rates[r], e};
		printf("%-8g %-12s %6s %8.2f %8.2f %8.2f\n", rates[r], "RedisBloom", "0.5",
		       redisbloom_bits(rates[r], e, FIRST),
		       redisbloom_bits(rates[r], e, 20 * FIRST), average(rb_at, &rb));
		for (size_t s = 0; s < sizeof(shares) / sizeof(shares[0]); s++) {
			struct bf_params p = {
			    .capacity = FIRST,
			    .error_rate = rates[r],
			    .expansion = e,
			    .first = shares[s],
			};
			char name[32];

			p.ratio = bf_filter_choose_ratio(p.type, p.error_rate, e, p.first);
			snprintf(name, sizeof(name), "a=%.2f%s", shares[s],
				 shares[s] == BF_FIRST_SHARE ? " (*)" : "");
			printf("%-8s %-12s %6.2f %8.2f %8.2f %8.2f\n", "", name, p.ratio,
			       bf_filter_chain_bits(&p, FIRST),
			       bf_filter_chain_bits(&p, 20 * FIRST), average(ours_at, &p));
		}
	}
	printf("(*) BF_FIRST_SHARE, what a new chain gets\n");
	return 0;
}
