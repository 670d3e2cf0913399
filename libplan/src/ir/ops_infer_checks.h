/* What the inference of every op kind (ops_infer_*.c) shares: the checks
 * every op starts and ends with, and the readers of attribute values.
 * Inference functions never allocate and keep no state: every result goes
 * into the caller's plan_shape array and every problem into a one-line
 * reason ("matmul: contracting dims differ: 16 vs 32"). */
#ifndef LIBPLAN_OPS_INFER_CHECKS_H
#define LIBPLAN_OPS_INFER_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ops_infer.h"

#define SHAPE_STRLEN PLAN_DIMS_STRLEN
#define fmt_dims plan_format_dims

/* Resolves a dim attribute (negative counts from the end) against rank. */
static inline bool norm_dim(int64_t d, int rank, int *out) {
  if (d < -(int64_t)rank || d >= (int64_t)rank)
    return false;
  *out = (int)(d < 0 ? d + rank : d);
  return true;
}

/* The schema of a kind (reduce_sum and reduce_mean share one). */
#define SPEC(kind) (plan_op_info_get(kind)->attrs)

/* The attribute values may be NULL for an op built in memory: every field
 * then takes the schema default. With values, the loader has already filled
 * the defaults of absent scalars (plan_program_fill_attr_defaults). */
static inline int64_t attr_int(const plan_attr_val *a, const plan_attr_spec *s,
                               int i) {
  return a ? a[i].i : s[i].def_i;
}
static inline double attr_float(const plan_attr_val *a, const plan_attr_spec *s,
                                int i) {
  return a ? a[i].f : s[i].def_f;
}
static inline bool attr_bool(const plan_attr_val *a, const plan_attr_spec *s,
                             int i) {
  return a ? a[i].b : s[i].def_b;
}
static inline const char *attr_string(const plan_attr_val *a,
                                      const plan_attr_spec *s, int i) {
  return a && a[i].s ? a[i].s : s[i].def_s;
}
/* An INTS attribute: false when absent (neither written nor given a list). A
 * written empty list (`shape: []`) is present. */
static inline bool attr_ints(const plan_attr_val *a, int i, const int64_t **v,
                             int *n) {
  if (!a || (!a[i].present && a[i].nints <= 0)) {
    *v = NULL;
    *n = 0;
    return false;
  }
  *v = a[i].ints;
  *n = a[i].nints > 0 && a[i].ints ? a[i].nints : 0;
  return true;
}

static inline void copy_shape(plan_shape *dst, const plan_shape *src) {
  dst->rank = src->rank;
  for (int d = 0; d < src->rank; d++)
    dst->dims[d] = src->dims[d];
  dst->dtype = src->dtype;
}

/* ---- the shared checks (ops_infer_checks.c) ------------------------------ */

/* Checks what every inference needs before looking at the op: arities
 * (the function pointer may be called without the loader's checks), sane
 * input shapes and known dtypes. want_out < 0: the op checks nout itself. */
int plan_infer_prelude(int kind, const plan_shape *in, int nin, plan_shape *out,
                       int nout, int want_out, char *err, size_t errsz);
/* Output element counts must fit int64 (a matmul of [2^32, 1] x [1, 2^32]
 * has fine inputs and an unrepresentable output). */
int plan_infer_finish(int kind, const plan_shape *out, int nout, char *err,
                      size_t errsz);
/* Inputs selected by `mask` must be floating point and of one dtype, which
 * becomes *dt. */
int plan_infer_float_inputs(int kind, const plan_shape *in, int nin,
                            unsigned mask, plan_dtype *dt, char *err,
                            size_t errsz);
/* Input i (`what`, for the message) must be an integer tensor. */
int plan_infer_int_input(int kind, const plan_shape *in, int i,
                         const char *what, char *err, size_t errsz);
/* Inputs a and b have the same shape (no broadcasting). */
int plan_infer_same_dims(int kind, const plan_shape *in, int a, int b,
                         char *err, size_t errsz);

#endif
