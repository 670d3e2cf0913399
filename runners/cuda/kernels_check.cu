/* The CUDA runner's argument checks (host code): the same checks and
 * messages as plan_cpu_kernel's, so a bad op fails alike on every runner,
 * before anything is uploaded. */
#include <limits.h>

#include "kernels.cuh"

static int check_view(const plan_view *v, const char *op, const char *what,
                      int i, char *err, size_t errsz) {
  if (v->rank < 0 || v->rank > PLAN_MAX_RANK) {
    plan_errf(err, errsz, "%s: %s %d has rank %d (0 to %d)", op, what, i,
              v->rank, PLAN_MAX_RANK);
    return PLAN_EUSAGE;
  }
  if ((int)v->dtype < 0 || v->dtype >= PLAN_DTYPE_COUNT) {
    plan_errf(err, errsz, "%s: %s %d has an unknown dtype (%d)", op, what, i,
              (int)v->dtype);
    return PLAN_EUSAGE;
  }
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0) {
      plan_errf(err, errsz, "%s: %s %d dim %d is negative", op, what, i, d);
      return PLAN_EUSAGE;
    }
    if (!plan_mul_i64(n, v->dims[d], &n) || n > INT64_MAX / 8) {
      plan_errf(err, errsz, "%s: %s %d is too large", op, what, i);
      return PLAN_EUSAGE;
    }
  }
  if (n > 0 && !v->data) {
    plan_errf(err, errsz, "%s: %s %d has no data", op, what, i);
    return PLAN_EUSAGE;
  }
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

/* reshape: the attribute names global sizes; the local blocks must hold
 * the same number of elements. */
static int check_reshape(const plan_view *in, int nin, const plan_view *out,
                         int nout, char *err, size_t errsz) {
  if (nin != 1 || nout != 1)
    return plan_errf(err, errsz, "reshape takes 1 input and gives 1 output");
  if (out->dtype != in->dtype)
    return plan_errf(err, errsz, "reshape: output is %s but input is %s",
                     plan_dtype_name(out->dtype), plan_dtype_name(in->dtype));
  if (plan_cu_count(out) != plan_cu_count(in)) {
    char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
    return plan_errf(err, errsz,
                     "reshape: local block %s does not reshape to %s",
                     plan_format_dims(in->dims, in->rank, a),
                     plan_format_dims(out->dims, out->rank, b));
  }
  return PLAN_OK;
}

/* split: the outputs partition the input along dim. */
static int check_split(const plan_attr_val *attrs, const plan_view *in, int nin,
                       const plan_view *out, int nout, char *err,
                       size_t errsz) {
  if (nin != 1 || nout < 1 || nout > PLAN_MAX_OPERANDS - 1)
    return plan_errf(err, errsz,
                     "split takes 1 input and gives 1 to %d outputs",
                     PLAN_MAX_OPERANDS - 1);
  int64_t d = plan_cu_attr_int(attrs, PLAN_OP_SPLIT, 0);
  if (d < -(int64_t)in->rank || d >= in->rank)
    return plan_errf(err, errsz, "split: dim %lld is out of range for rank %d",
                     (long long)d, in->rank);
  int dim = plan_cu_norm_dim(d, in->rank);
  const int64_t *sz;
  int nsz;
  if (plan_cu_attr_ints(attrs, 1, &sz, &nsz) && nsz != nout)
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

/* expand: each input dim (right-aligned) is 1 or the output's local dim. */
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

/* embedding_grad: dy [ids.., d] gives the table block [rows, d]. */
static int check_embedding_grad(const plan_view *in, int nin,
                                const plan_view *out, int nout, char *err,
                                size_t errsz) {
  if (nin != 2 || nout != 1)
    return plan_errf(err, errsz,
                     "embedding_grad takes 2 inputs and gives 1 output");
  const plan_view *dy = &in[0], *ids = &in[1];
  if (!plan_cu_is_float(dy->dtype) || plan_cu_is_float(ids->dtype) ||
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

int plan_cu_check_args(int kind, const plan_attr_val *attrs,
                       const plan_view *in, int nin, const plan_view *out,
                       int nout, char *err, size_t errsz) {
  const char *op = plan_op_kind_name(kind);
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
    return check_infer_local(kind, attrs, in, nin, out, nout, err, errsz);
  default:
    return check_infer(kind, attrs, in, nin, out, nout, err, errsz);
  }
}
