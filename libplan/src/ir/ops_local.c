/* An op's local shapes: whether the blocks one rank holds of an op's
 * operands fit the op. Most ops follow the registry's inference on the
 * local shapes; reshape, expand, split, embedding_grad, scatter_add and
 * moe_dispatch have attributes that name global sizes, so they have
 * local-block rules of their own (runners/runner_op.h, the op contract).
 * Every runner checks this before it runs an op (plan_kernel_check), and
 * the lowered-file reader checks it for every op step before anything
 * runs: one copy of the rules and their messages. */
#include <string.h>

#include "base/util.h"
#include "ir/ops.h"

static int64_t count_of(const plan_shape *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d]; /* fits: the caller's blocks are bounded */
  return n;
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

static bool same_dims(const plan_shape *v, const plan_shape *s) {
  if (v->rank != s->rank)
    return false;
  for (int d = 0; d < v->rank; d++)
    if (v->dims[d] != s->dims[d])
      return false;
  return true;
}

/* reshape: the attribute names global sizes, so the output's local dims
 * are the caller's; check they hold the input's elements. */
static int check_reshape(const plan_shape *in, int nin, const plan_shape *out,
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

/* split: the sizes are global; the outputs' local dims must partition the
 * input's along the split dim. */
static int check_split(const plan_attr_val *attrs, const plan_shape *in,
                       int nin, const plan_shape *out, int nout, char *err,
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
  int dim = (int)(d < 0 ? d + in->rank : d);
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
static int check_expand(const plan_shape *in, int nin, const plan_shape *out,
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
static int check_embedding_grad(const plan_shape *in, int nin,
                                const plan_shape *out, int nout, char *err,
                                size_t errsz) {
  if (nin != 2 || nout != 1)
    return plan_errf(err, errsz,
                     "embedding_grad takes 2 inputs and gives 1 output");
  const plan_shape *dy = &in[0], *ids = &in[1];
  if (!plan_dtype_is_float(dy->dtype) || plan_dtype_is_float(ids->dtype) ||
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
                       const plan_shape *in, int nin, const plan_shape *out,
                       int nout, char *err, size_t errsz) {
  plan_shape so[PLAN_MAX_OPERANDS];
  if (nin > PLAN_MAX_OPERANDS || nout > PLAN_MAX_OPERANDS || nout < 1)
    return plan_errf(err, errsz, "%s: %d inputs and %d outputs",
                     plan_op_kind_name(kind), nin, nout);
  int rc = plan_op_info_get(kind)->infer(in, nin, attrs, so, nout, err, errsz);
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
                             const plan_shape *in, int nin,
                             const plan_shape *out, int nout, char *err,
                             size_t errsz) {
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

int plan_op_check_local(int kind, const plan_attr_val *attrs,
                        const plan_shape *in, int nin, const plan_shape *out,
                        int nout, char *err, size_t errsz) {
  if (!plan_op_info_get(kind))
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "plan_op_check_local: kind %d is not an op", kind);
  if ((nin > 0 && !in) || (nout > 0 && !out) || nin < 0 || nout < 0)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: bad operand arrays",
                     plan_op_kind_name(kind));
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
    return check_infer_local(kind, attrs, in, nin, out, nout, err, errsz);
  default:
    return check_infer(kind, attrs, in, nin, out, nout, err, errsz);
  }
}
