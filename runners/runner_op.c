/* The checks of runner_op.h that every runner makes before it runs an op:
 * the operand arrays and views, the op's local shapes (the core's
 * plan_op_check_local, libplan/ops.h: the registry's shape inference
 * where the local shapes follow the attributes, else the local-block rules
 * of the ops whose attributes name global sizes), and the routing ops'
 * indices and blocks. One copy of the checks and their messages, so a bad
 * op fails alike on every runner. */
#include "runner_op.h"

#include <limits.h>
#include <string.h>

#include "libplan/ops.h"
#include "base/util.h"

/* ---- small helpers ------------------------------------------------------- */

static int64_t count_of(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d]; /* fits: check_view */
  return n;
}

/* The global size of dim d (0 = unknown: the local size). */
static int64_t global_dim(const plan_view *v, int d) {
  return v->global_dims[d] > 0 ? v->global_dims[d] : v->dims[d];
}

/* ---- argument checks ----------------------------------------------------- */

static int check_view(const plan_view *v, const char *op, const char *what,
                      int i, char *err, size_t errsz) {
  if (v->rank < 0 || v->rank > PLAN_MAX_RANK)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: %s %d has rank %d (0 to %d)",
                     op, what, i, v->rank, PLAN_MAX_RANK);
  if ((int)v->dtype < 0 || v->dtype >= PLAN_DTYPE_COUNT)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "%s: %s %d has an unknown dtype (%d)", op, what, i,
                     (int)v->dtype);
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0)
      return plan_errc(PLAN_EUSAGE, err, errsz, "%s: %s %d dim %d is negative",
                       op, what, i, d);
    if (!plan_mul_i64(n, v->dims[d], &n) || n > INT64_MAX / 8)
      return plan_errc(PLAN_EUSAGE, err, errsz, "%s: %s %d is too large", op,
                       what, i);
  }
  if (n > 0 && !v->data)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: %s %d has no data", op, what,
                     i);
  return PLAN_OK;
}

static void shape_of(const plan_view *v, plan_shape *s) {
  memset(s, 0, sizeof *s);
  s->rank = v->rank;
  for (int d = 0; d < v->rank; d++)
    s->dims[d] = v->dims[d];
  s->dtype = v->dtype;
}

/* ---- the routing ops' indices and blocks --------------------------------- */

/* Every index within [0, n): else the error naming the first outside. */
static int check_index(const plan_view *idx, int64_t n, const char *op,
                       const char *what, char *err, size_t errsz) {
  const int64_t *id = idx->data;
  int64_t cnt = count_of(idx);
  for (int64_t i = 0; i < cnt; i++)
    if (id[i] < 0 || id[i] >= n)
      return plan_errf(err, errsz,
                       "%s: index %lld (element %lld) is outside %s [0, %lld)",
                       op, (long long)id[i], (long long)i, what, (long long)n);
  return PLAN_OK;
}

/* A block [lo, lo + n) of a dim of global size g. */
static int check_block(int64_t lo, int64_t n, int64_t g, const char *op,
                       const char *what, char *err, size_t errsz) {
  if (lo < 0 || lo + n > g)
    return plan_errf(err, errsz,
                     "%s: %s block [%lld, %lld) is outside [0, %lld)", op, what,
                     (long long)lo, (long long)(lo + n), (long long)g);
  return PLAN_OK;
}

/* The slots' block of a mixture-of-experts op: moe_dispatch's output,
 * moe_combine's input 0, moe_weights_grad's input 1. */
static const plan_view *moe_slots(int kind, const plan_view *in,
                                  const plan_view *out) {
  return kind == PLAN_OP_MOE_DISPATCH  ? out
         : kind == PLAN_OP_MOE_COMBINE ? &in[0]
                                       : &in[1];
}

int plan_kernel_route_check(int kind, const plan_view *in, int nin,
                            const plan_view *out, char *err, size_t errsz) {
  (void)nin;
  const char *op = plan_op_kind_name(kind);
  int rc;
  switch (kind) {
  case PLAN_OP_GATHER: {
    int r = in[0].rank;
    int64_t g = global_dim(&in[0], r - 1);
    if ((rc = check_block(in[0].offset[r - 1], in[0].dims[r - 1], g, op,
                          "x's last-dim", err, errsz)))
      return rc;
    return check_index(&in[1], g, op, "x's last dim", err, errsz);
  }
  case PLAN_OP_SCATTER_ADD: {
    int r = out->rank;
    int64_t g = global_dim(out, r - 1);
    if ((rc = check_block(out->offset[r - 1], out->dims[r - 1], g, op,
                          "the result's last-dim", err, errsz)))
      return rc;
    return check_index(&in[1], g, op, "the result's last dim", err, errsz);
  }
  case PLAN_OP_MOE_DISPATCH:
  case PLAN_OP_MOE_COMBINE:
  case PLAN_OP_MOE_WEIGHTS_GRAD: {
    const plan_view *slots = moe_slots(kind, in, out);
    const plan_view *idx = &in[kind == PLAN_OP_MOE_WEIGHTS_GRAD ? 2 : 1];
    int64_t experts = global_dim(slots, 0);
    if ((rc = check_block(slots->offset[0], slots->dims[0], experts, op,
                          "the experts", err, errsz)))
      return rc;
    return check_index(idx, experts, op, "the experts", err, errsz);
  }
  default:
    return PLAN_OK;
  }
}

/* ---- the entry point ----------------------------------------------------- */

int plan_kernel_check(int kind, const plan_attr_val *attrs, const plan_view *in,
                      int nin, const plan_view *out, int nout,
                      const plan_kernel_ctx *ctx, int *bits, char *err,
                      size_t errsz) {
  *bits = -1;
  if (kind < 0 || kind >= PLAN_OP_COUNT)
    return plan_errc(PLAN_EUSAGE, err, errsz, "unknown op kind %d", kind);
  const char *op = plan_op_kind_name(kind);
  if (nin < 0 || nout < 1 || nin > PLAN_MAX_OPERANDS ||
      nout > PLAN_MAX_OPERANDS || (nin > 0 && !in) || !out)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: bad operand arrays", op);
  if (ctx && ctx->exact) {
    *bits = ctx->dyadic_bits ? ctx->dyadic_bits : PLAN_KERNEL_DYADIC_BITS;
    if (*bits < 1 || *bits > 60)
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "%s: dyadic_bits %d is out of range (1 to 60)", op,
                       *bits);
  }
  int rc;
  for (int i = 0; i < nin; i++)
    if ((rc = check_view(&in[i], op, "input", i, err, errsz)))
      return rc;
  for (int i = 0; i < nout; i++)
    if ((rc = check_view(&out[i], op, "output", i, err, errsz)))
      return rc;
  /* the local shapes: the core's rules (libplan/ops.h), shared with the
   * lowered-file reader */
  plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
  for (int i = 0; i < nin; i++)
    shape_of(&in[i], &si[i]);
  for (int i = 0; i < nout; i++)
    shape_of(&out[i], &so[i]);
  rc = plan_op_check_local(kind, attrs, si, nin, so, nout, err, errsz);
  /* then the routing ops' indices and blocks */
  return rc ? rc : plan_kernel_route_check(kind, in, nin, out, err, errsz);
}
