/* The checks every op's inference starts and ends with
 * (ops_infer_checks.h): arities, input shapes and dtypes, output sizes. */
#include <string.h>

#include "ir/ops_infer_checks.h"

static bool dtype_ok(plan_dtype t) {
  return (int)t >= 0 && t < PLAN_DTYPE_COUNT;
}

/* Checks what every inference needs before looking at the op: arities
 * (the function pointer may be called without the loader's checks), sane
 * input shapes and known dtypes. want_out < 0: the op checks nout itself. */
int plan_infer_prelude(int kind, const plan_shape *in, int nin, plan_shape *out,
                       int nout, int want_out, char *err, size_t errsz) {
  const plan_op_info *info = plan_op_info_get(kind);
  int max_in = info->max_in < 0 ? PLAN_MAX_OPERANDS - 1 : info->max_in;
  if (nin < info->min_in || nin > max_in || (nin > 0 && !in)) {
    if (info->min_in == max_in)
      return plan_errf(err, errsz, "%s takes %d input%s, not %d", info->name,
                       info->min_in, info->min_in == 1 ? "" : "s", nin);
    return plan_errf(err, errsz, "%s takes %d to %d inputs, not %d", info->name,
                     info->min_in, max_in, nin);
  }
  if (want_out >= 0 && nout != want_out)
    return plan_errf(err, errsz, "%s gives %d output%s, not %d", info->name,
                     want_out, want_out == 1 ? "" : "s", nout);
  if (nout < 1 || nin + nout > PLAN_MAX_OPERANDS)
    return plan_errf(err, errsz, "%s: %d outputs is out of range", info->name,
                     nout);
  if (!out)
    return plan_errf(err, errsz, "%s: no output shapes to fill", info->name);
  for (int i = 0; i < nin; i++) {
    const plan_shape *s = &in[i];
    if (s->rank < 0 || s->rank > PLAN_MAX_RANK)
      return plan_errf(err, errsz, "%s: input %d has rank %d (at most %d)",
                       info->name, i, s->rank, PLAN_MAX_RANK);
    if (!dtype_ok(s->dtype))
      return plan_errf(err, errsz, "%s: input %d has an unknown dtype (%d)",
                       info->name, i, (int)s->dtype);
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) {
      if (s->dims[d] < 0)
        return plan_errf(err, errsz, "%s: input %d dim %d is negative (%lld)",
                         info->name, i, d, (long long)s->dims[d]);
      if (!plan_mul_i64(n, s->dims[d], &n))
        return plan_errf(err, errsz,
                         "%s: input %d has more elements than int64",
                         info->name, i);
    }
  }
  /* Outputs start zeroed so unused dims never carry garbage into hashes. */
  memset(out, 0, sizeof *out * (size_t)nout);
  return PLAN_OK;
}

/* Output element counts must fit int64 (a matmul of [2^32, 1] x [1, 2^32]
 * has fine inputs and an unrepresentable output). */
int plan_infer_finish(int kind, const plan_shape *out, int nout, char *err,
                      size_t errsz) {
  for (int o = 0; o < nout; o++) {
    int64_t n = 1;
    for (int d = 0; d < out[o].rank; d++)
      if (!plan_mul_i64(n, out[o].dims[d], &n))
        return plan_errf(err, errsz,
                         "%s: output %d has more elements than int64",
                         plan_op_kind_name(kind), o);
  }
  return PLAN_OK;
}

/* Inputs selected by `mask` must be floating point and of one dtype, which
 * becomes *dt. */
int plan_infer_float_inputs(int kind, const plan_shape *in, int nin,
                            unsigned mask, plan_dtype *dt, char *err,
                            size_t errsz) {
  const char *op = plan_op_kind_name(kind);
  int first = -1;
  for (int i = 0; i < nin; i++) {
    if (!(mask >> i & 1u))
      continue;
    if (!plan_dtype_is_float(in[i].dtype))
      return plan_errf(err, errsz,
                       "%s: input %d must be floating point, not %s", op, i,
                       plan_dtype_name(in[i].dtype));
    if (first < 0)
      first = i;
    else if (in[i].dtype != in[first].dtype)
      return plan_errf(err, errsz,
                       "%s: inputs %d and %d differ in dtype: %s vs %s", op,
                       first, i, plan_dtype_name(in[first].dtype),
                       plan_dtype_name(in[i].dtype));
  }
  *dt = in[first < 0 ? 0 : first].dtype;
  return PLAN_OK;
}

int plan_infer_int_input(int kind, const plan_shape *in, int i,
                         const char *what, char *err, size_t errsz) {
  if (plan_dtype_is_float(in[i].dtype))
    return plan_errf(
        err, errsz, "%s: %s (input %d) must be an integer tensor, not %s",
        plan_op_kind_name(kind), what, i, plan_dtype_name(in[i].dtype));
  return PLAN_OK;
}

/* Inputs a and b have the same shape (no broadcasting). */
int plan_infer_same_dims(int kind, const plan_shape *in, int a, int b,
                         char *err, size_t errsz) {
  bool same = in[a].rank == in[b].rank;
  for (int d = 0; same && d < in[a].rank; d++)
    same = in[a].dims[d] == in[b].dims[d];
  if (same)
    return PLAN_OK;
  char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
  return plan_errf(
      err, errsz, "%s: inputs %d and %d must have one shape, not %s and %s",
      plan_op_kind_name(kind), a, b, fmt_dims(in[a].dims, in[a].rank, sa),
      fmt_dims(in[b].dims, in[b].rank, sb));
}
