/* Internal to the CPU kernels: fused scaled dot-product attention
 * (kernels_attention.c), called by the dispatcher (kernels.c) once shapes,
 * dtypes and attributes are checked. */
#ifndef LIBPLAN_RUNNERS_CPU_KERNELS_ATTENTION_H
#define LIBPLAN_RUNNERS_CPU_KERNELS_ATTENTION_H

#include "kernels.h"

/* attention (q, k, v [, mask]) -> out on rank-local blocks; bits is the
 * exact-mode grid (2^-bits) or -1. */
int plan_kernel_attention(const plan_attr_val *attrs, const plan_view *in,
                          int nin, plan_view *out, int bits);

#endif
