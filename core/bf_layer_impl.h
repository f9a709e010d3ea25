/* SPDX-License-Identifier: MIT */
/* Internal: the per-ISA kernels of the plain layer, exposed so tests can prove they agree. */
#ifndef BF_LAYER_IMPL_H
#define BF_LAYER_IMPL_H

#include "core/bf_layer.h"

bool bf_layer_check_scalar(const struct bf_layer *l, struct bf_hash h);
bool bf_layer_add_scalar(struct bf_layer *l, struct bf_hash h);
#if defined(__x86_64__)
bool bf_layer_check_avx2(const struct bf_layer *l, struct bf_hash h);
bool bf_layer_add_avx2(struct bf_layer *l, struct bf_hash h);
#endif

/* True when the CPU has AVX2 and the dispatching entry points use it. */
bool bf_layer_have_avx2(void);

#endif
