/* The checks of runner_op.h that every runner makes before it runs an op:
 * the operand arrays and views, the op's local shapes (through the
 * registry's shape inference where the local shapes follow the
 * attributes, else the local-block rules of the ops whose attributes name
 * global sizes), and the routing ops' indices and blocks. One copy of the
 * checks and their messages, so a bad op fails alike on every runner. */
#include "runner_op.h"

#include <limits.h>
#include <string.h>

#include "ir/ops.h"
#include "base/util.h"

/* ---- small helpers ------------------------------------------------------- */

static bool dtype_is_float(plan_dtype t) {
  return t == PLAN_F64 || t == PLAN_F32 || t == PLAN_BF16 || t == PLAN_F16;
}

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

/* An INT attribute, or the schema default when attrs is NULL (the loader
 * fills the defaults of absent scalars). */
static int64_t attr_int(const plan_attr_val *a, int kind, int i) {
  return a ? a[i].i : plan_op_info_get(kind)->attrs[i].def_i;
}
/* An INTS attribute; false when absent. */
static bool attr_ints(const plan_attr_val *a, int i, const int64_t **v,
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

static int norm_dim(int64_t d, int rank) {
  return (int)(d < 0 ? d + rank : d); /* in range: inference checked */
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

static bool same_dims(const plan_view *v, const plan_shape *s) {
  if (v->rank != s->rank)
    return false;
  for (int d = 0; d < v->rank; d++)
    if (v->dims[d] != s->dims[d])
      return false;
  return true;
}

/* reshape and split: the attributes name global sizes, so the outputs'
 * local dims are the caller's; check they partition the input. */
static int check_reshape(const plan_view *in, int nin, const plan_view *out,
                         int nout, char *err, size_t errsz) {
  if (nin != 1 || nout != 1)
    return plan_errf(err, errsz, "reshape takes 1 input and gives 1 output");
  if (out->dtype != in->dtype)
    return plan_errf(err, errsz, "reshape: output is %s but input is %s",
                     plan_dtype_name(out->dtype), plan_dtype_name(in->dtype));
  if (count_of(out) != count_of(in)) {
    char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
    return plan_errf(err, errsz,
                     "reshape: local block %s does not reshape to %s",
                     plan_format_dims(in->dims, in->rank, a),
                     plan_format_dims(out->dims, out->rank, b));
  }
  return PLAN_OK;
}

static int check_split(const plan_attr_val *attrs, const plan_view *in, int nin,
                       const plan_view *out, int nout, char *err,
                       size_t errsz) {
  if (nin != 1 || nout < 1 || nout > PLAN_MAX_OPERANDS - 1)
    return plan_errf(err, errsz,
                     "split takes 1 input and gives 1 to %d "
                     "outputs",
                     PLAN_MAX_OPERANDS - 1);
  int64_t d = attr_int(attrs, PLAN_OP_SPLIT, 0);
  if (d < -(int64_t)in->rank || d >= in->rank)
    return plan_errf(err, errsz, "split: dim %lld is out of range for rank %d",
                     (long long)d, in->rank);
  int dim = norm_dim(d, in->rank);
  const int64_t *sz;
  int nsz;
  if (attr_ints(attrs, 1, &sz, &nsz) && nsz != nout)
    return plan_errf(err, errsz, "split: sizes has %d entries for %d outputs",
                     nsz, nout);
  int64_t sum = 0;
  for (int i = 0; i < nout; i++) {
    bool same = out[i].rank == in->rank && out[i].dtype == in->dtype;
    for (int j = 0; same && j < in->rank; j++)
      same = j == dim || out[i].dims[j] == in->dims[j];
    if (!same) {
      char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
      return plan_errf(err, errsz,
                       "split: output %d is %s %s, input %s %s (only dim %d "
                       "may differ)",
                       i, plan_dtype_name(out[i].dtype),
                       plan_format_dims(out[i].dims, out[i].rank, a),
                       plan_dtype_name(in->dtype),
                       plan_format_dims(in->dims, in->rank, b), dim);
    }
    sum += out[i].dims[dim];
  }
  if (sum != in->dims[dim])
    return plan_errf(err, errsz,
                     "split: outputs add up to %lld along dim %d, input has "
                     "%lld",
                     (long long)sum, dim, (long long)in->dims[dim]);
  return PLAN_OK;
}

/* expand: the attribute names the global shape, so the output's local dims
 * are the caller's; each input dim (right-aligned) is 1 or the output's
 * local dim. */
static int check_expand(const plan_view *in, int nin, const plan_view *out,
                        int nout, char *err, size_t errsz) {
  if (nin != 1 || nout != 1)
    return plan_errf(err, errsz, "expand takes 1 input and gives 1 output");
  if (out->dtype != in->dtype)
    return plan_errf(err, errsz, "expand: output is %s but input is %s",
                     plan_dtype_name(out->dtype), plan_dtype_name(in->dtype));
  bool ok = out->rank >= in->rank;
  for (int d = 0; ok && d < in->rank; d++) {
    int64_t o = out->dims[d + out->rank - in->rank];
    ok = in->dims[d] == 1 || in->dims[d] == o;
  }
  if (!ok) {
    char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
    return plan_errf(err, errsz,
                     "expand: local block %s does not broadcast to %s",
                     plan_format_dims(in->dims, in->rank, a),
                     plan_format_dims(out->dims, out->rank, b));
  }
  return PLAN_OK;
}

/* embedding_grad: the output block holds rows [offset[0], offset[0] +
 * dims[0]) of the table (the attribute names the global row count). */
static int check_embedding_grad(const plan_view *in, int nin,
                                const plan_view *out, int nout, char *err,
                                size_t errsz) {
  if (nin != 2 || nout != 1)
    return plan_errf(err, errsz,
                     "embedding_grad takes 2 inputs and gives 1 output");
  const plan_view *dy = &in[0], *ids = &in[1];
  if (!dtype_is_float(dy->dtype) || dtype_is_float(ids->dtype) ||
      out->dtype != dy->dtype)
    return plan_errf(err, errsz,
                     "embedding_grad: dy and the output must be one float "
                     "dtype and the ids integers (%s, %s -> %s)",
                     plan_dtype_name(dy->dtype), plan_dtype_name(ids->dtype),
                     plan_dtype_name(out->dtype));
  bool ok = dy->rank == ids->rank + 1 && out->rank == 2 &&
            out->dims[1] == dy->dims[dy->rank - 1];
  for (int d = 0; ok && d < ids->rank; d++)
    ok = dy->dims[d] == ids->dims[d];
  if (!ok) {
    char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN], c[PLAN_DIMS_STRLEN];
    return plan_errf(err, errsz,
                     "embedding_grad: dy %s and ids %s do not give the block "
                     "%s",
                     plan_format_dims(dy->dims, dy->rank, a),
                     plan_format_dims(ids->dims, ids->rank, b),
                     plan_format_dims(out->dims, out->rank, c));
  }
  return PLAN_OK;
}

/* Every other op: the registry's inference on the local shapes must give
 * the outputs' local shapes. */
static int check_infer(int kind, const plan_attr_val *attrs,
                       const plan_view *in, int nin, const plan_view *out,
                       int nout, char *err, size_t errsz) {
  plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
  if (nin > PLAN_MAX_OPERANDS || nout > PLAN_MAX_OPERANDS || nout < 1)
    return plan_errf(err, errsz, "%s: %d inputs and %d outputs",
                     plan_op_kind_name(kind), nin, nout);
  for (int i = 0; i < nin; i++)
    shape_of(&in[i], &si[i]);
  int rc = plan_op_info_get(kind)->infer(si, nin, attrs, so, nout, err, errsz);
  if (rc)
    return rc;
  for (int i = 0; i < nout; i++)
    if (!same_dims(&out[i], &so[i]) || out[i].dtype != so[i].dtype) {
      char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
      return plan_errf(
          err, errsz, "%s: output %d is %s %s but the local op gives %s %s",
          plan_op_kind_name(kind), i, plan_dtype_name(out[i].dtype),
          plan_format_dims(out[i].dims, out[i].rank, a),
          plan_dtype_name(so[i].dtype),
          plan_format_dims(so[i].dims, so[i].rank, b));
    }
  return PLAN_OK;
}

/* scatter_add and moe_dispatch: an attribute names a global size (size,
 * experts) that the output block may hold part of: inference with that
 * attribute set to the block's size. */
static int check_infer_local(int kind, const plan_attr_val *attrs,
                             const plan_view *in, int nin, const plan_view *out,
                             int nout, char *err, size_t errsz) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  const plan_op_info *info = plan_op_info_get(kind);
  if (!attrs || nout != 1)
    return check_infer(kind, attrs, in, nin, out, nout, err, errsz);
  memcpy(a, attrs, sizeof(plan_attr_val) * (size_t)info->nattrs);
  if (kind == PLAN_OP_SCATTER_ADD && out->rank >= 1)
    a[0].i = out->dims[out->rank - 1];
  else if (kind == PLAN_OP_MOE_DISPATCH && out->rank == 4)
    a[0].i = out->dims[0];
  return check_infer(kind, a, in, nin, out, nout, err, errsz);
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
  switch (kind) {
  case PLAN_OP_RESHAPE:
    return check_reshape(in, nin, out, nout, err, errsz);
  case PLAN_OP_EXPAND:
    return check_expand(in, nin, out, nout, err, errsz);
  case PLAN_OP_EMBEDDING_GRAD:
    return check_embedding_grad(in, nin, out, nout, err, errsz);
  case PLAN_OP_SPLIT:
    return check_split(attrs, in, nin, out, nout, err, errsz);
  case PLAN_OP_SCATTER_ADD:
  case PLAN_OP_MOE_DISPATCH:
    rc = check_infer_local(kind, attrs, in, nin, out, nout, err, errsz);
    break;
  default:
    rc = check_infer(kind, attrs, in, nin, out, nout, err, errsz);
    break;
  }
  /* then the routing ops' indices and blocks */
  return rc ? rc : plan_kernel_route_check(kind, in, nin, out, err, errsz);
}
