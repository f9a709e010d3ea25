/* SPDX-License-Identifier: MIT */
/*
 * bench/sizing: the cost of sizing a layer (bf_model_size), which runs on the daemon's loop
 * thread whenever a filter is created or grows a layer. Prints microseconds per call, the
 * median of --reps runs, for the layers of a scaling chain from a few typical creates
 * (capacity doubles and the rate halves per layer, as in bf_filter), plain and counting.
 *
 *	build/bench/sizing [--reps R] [--layers L]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bf_model.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct {
		unsigned long long capacity;
		double p;
	} creates[] = {{1000, 0.01}, {100000, 0.01}, {1000000, 0.001}, {100000000, 1e-4}};
	const struct bf_geometry geo[2] = {BF_GEOMETRY_SECTOR512, BF_GEOMETRY_COUNT512};
	int reps = 21, layers = 4;
	double *t, total = 0;
	unsigned long long sum = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--layers") == 0)
			layers = atoi(argv[i + 1]);
	}
	if (reps < 1 || layers < 1) {
		fprintf(stderr, "usage: sizing [--reps R >= 1] [--layers L >= 1]\n");
		return 2;
	}
	t = calloc((size_t)reps, sizeof(*t));
	if (!t)
		return 1;
	printf("%-8s %12s %8s %6s %10s %3s %10s\n", "type", "capacity", "rate", "layer", "blocks",
	       "b", "us/call");
	for (int g = 0; g < 2; g++)
		for (size_t c = 0; c < sizeof(creates) / sizeof(creates[0]); c++)
			for (int l = 0; l < layers; l++) {
				unsigned long long cap = creates[c].capacity << l;
				double p = creates[c].p / (1 << l);
				uint64_t n = 0;
				unsigned b = 0;

				for (int r = 0; r < reps; r++) {
					double t0 = now_us();

					if (bf_model_size(geo[g], cap, p, UINT64_MAX, &n, &b)) {
						fprintf(stderr, "sizing failed\n");
						return 1;
					}
					t[r] = now_us() - t0;
				}
				qsort(t, (size_t)reps, sizeof(*t), cmp_double);
				total += t[reps / 2];
				sum += n * 31 + b;
				printf("%-8s %12llu %8.2g %6d %10llu %3u %10.1f\n",
				       g ? "counting" : "plain", cap, p, l, (unsigned long long)n,
				       b, t[reps / 2]);
			}
	printf("total of medians: %.0f us (checksum %llu)\n", total, sum);
	free(t);
	return 0;
}
