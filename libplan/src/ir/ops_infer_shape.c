/* Inference of the ops that move, reduce, cut or repeat data: transpose,
 * permute, reshape, the reductions, split, concat, expand and
 * repeat_interleave. */
#include "ir/ops_infer_checks.h"

/* ---- data movement ------------------------------------------------------- */

int plan_infer_transpose(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_TRANSPOSE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  static const int64_t def[2] = {-2, -1};
  const int64_t *v;
  int n;
  if (!attr_ints(attrs, 0, &v, &n)) {
    v = def;
    n = 2;
  }
  if (n != 2)
    return plan_errf(err, errsz,
                     "transpose: dims must name exactly two dims, not %d", n);
  int d0, d1, r = in[0].rank;
  if (!norm_dim(v[0], r, &d0) || !norm_dim(v[1], r, &d1))
    return plan_errf(err, errsz,
                     "transpose: dims [%lld, %lld] are out of range "
                     "for rank %d",
                     (long long)v[0], (long long)v[1], r);
  if (d0 == d1)
    return plan_errf(err, errsz,
                     "transpose: dims [%lld, %lld] name the same dim",
                     (long long)v[0], (long long)v[1]);
  copy_shape(out, &in[0]);
  out->dims[d0] = in[0].dims[d1];
  out->dims[d1] = in[0].dims[d0];
  return PLAN_OK;
}

int plan_infer_permute(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_PERMUTE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "permute: attribute perm is required");
  if (n != r)
    return plan_errf(err, errsz, "permute: perm has %d entries for rank %d", n,
                     r);
  bool seen[PLAN_MAX_RANK] = {false};
  copy_shape(out, &in[0]);
  for (int j = 0; j < n; j++) {
    int d;
    if (!norm_dim(v[j], r, &d))
      return plan_errf(err, errsz,
                       "permute: perm entry %lld is out of range for "
                       "rank %d",
                       (long long)v[j], r);
    if (seen[d])
      return plan_errf(err, errsz, "permute: perm names dim %d twice", d);
    seen[d] = true;
    out->dims[j] = in[0].dims[d];
  }
  return PLAN_OK;
}

int plan_infer_reshape(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_RESHAPE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "reshape: attribute shape is required");
  if (n > PLAN_MAX_RANK)
    return plan_errf(err, errsz, "reshape: shape has rank %d (at most %d)", n,
                     PLAN_MAX_RANK);
  int64_t count = 1, known = 1;
  for (int d = 0; d < in[0].rank; d++)
    plan_mul_i64(count, in[0].dims[d], &count); /* fits: prelude checked */
  int infer_at = -1;
  for (int j = 0; j < n; j++) {
    if (v[j] == -1) {
      if (infer_at >= 0)
        return plan_errf(err, errsz, "reshape: shape has more than one -1");
      infer_at = j;
      continue;
    }
    if (v[j] < 1)
      return plan_errf(
          err, errsz, "reshape: shape entries must be positive or -1, not %lld",
          (long long)v[j]);
    if (!plan_mul_i64(known, v[j], &known))
      return plan_errf(err, errsz,
                       "reshape: shape has more elements than int64");
  }
  char si[SHAPE_STRLEN], so[SHAPE_STRLEN];
  for (int j = 0; j < n; j++)
    out->dims[j] = v[j];
  out->rank = n;
  if (infer_at >= 0) {
    if (count % known)
      return plan_errf(err, errsz,
                       "reshape: cannot infer the -1 in %s: %lld "
                       "elements of %s are not a multiple of %lld",
                       fmt_dims(v, n, so), (long long)count,
                       fmt_dims(in[0].dims, in[0].rank, si), (long long)known);
    out->dims[infer_at] = count / known;
  } else if (known != count) {
    return plan_errf(err, errsz,
                     "reshape: cannot reshape %s (%lld elements) to "
                     "%s (%lld elements)",
                     fmt_dims(in[0].dims, in[0].rank, si), (long long)count,
                     fmt_dims(v, n, so), (long long)known);
  }
  out->dtype = in[0].dtype;
  return PLAN_OK;
}

/* ---- reductions ---------------------------------------------------------- */

static int infer_reduce(int kind, PLAN_INFER_ARGS) {
  const char *op = plan_op_kind_name(kind);
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, 1u, &dt, err, errsz)))
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "%s: attribute dims is required", op);
  if (n == 0)
    return plan_errf(err, errsz, "%s: dims must name at least one dim", op);
  bool red[PLAN_MAX_RANK] = {false};
  for (int j = 0; j < n; j++) {
    int d;
    if (!norm_dim(v[j], r, &d))
      return plan_errf(err, errsz, "%s: dim %lld is out of range for rank %d",
                       op, (long long)v[j], r);
    if (red[d])
      return plan_errf(err, errsz, "%s: dims name dim %d twice", op, d);
    red[d] = true;
  }
  bool keep = attr_bool(attrs, SPEC(PLAN_OP_REDUCE_SUM), 1);
  out->rank = 0;
  for (int d = 0; d < r; d++) {
    if (!red[d])
      out->dims[out->rank++] = in[0].dims[d];
    else if (keep)
      out->dims[out->rank++] = 1;
  }
  out->dtype = dt;
  return PLAN_OK;
}

int plan_infer_reduce_sum(PLAN_INFER_ARGS) {
  return infer_reduce(PLAN_OP_REDUCE_SUM, in, nin, attrs, out, nout, err,
                      errsz);
}
int plan_infer_reduce_mean(PLAN_INFER_ARGS) {
  return infer_reduce(PLAN_OP_REDUCE_MEAN, in, nin, attrs, out, nout, err,
                      errsz);
}

/* ---- split, concat ------------------------------------------------------- */

int plan_infer_split(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_SPLIT, in, nin, out, nout, -1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank, dim;
  if (!attr_ints(attrs, 1, &v, &n))
    return plan_errf(err, errsz, "split: attribute sizes is required");
  if (n < 1)
    return plan_errf(err, errsz, "split: sizes must have at least one entry");
  if (n != nout)
    return plan_errf(err, errsz,
                     "split: sizes has %d entries but the op has %d "
                     "output%s",
                     n, nout, nout == 1 ? "" : "s");
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_SPLIT), 0);
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz, "split: dim %lld is out of range for rank %d",
                     (long long)d, r);
  int64_t sum = 0;
  for (int j = 0; j < n; j++) {
    if (v[j] < 1)
      return plan_errf(err, errsz, "split: sizes must be positive, not %lld",
                       (long long)v[j]);
    if (!plan_add_i64(sum, v[j], &sum))
      return plan_errf(err, errsz, "split: sizes overflow int64");
  }
  if (sum != in[0].dims[dim])
    return plan_errf(err, errsz,
                     "split: sizes add up to %lld but dim %d has size "
                     "%lld",
                     (long long)sum, dim, (long long)in[0].dims[dim]);
  for (int j = 0; j < n; j++) {
    copy_shape(&out[j], &in[0]);
    out[j].dims[dim] = v[j];
  }
  return PLAN_OK;
}

int plan_infer_concat(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_CONCAT, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  int r = in[0].rank, dim;
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_CONCAT), 0);
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz, "concat: dim %lld is out of range for rank %d",
                     (long long)d, r);
  int64_t sum = 0;
  char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
  for (int i = 0; i < nin; i++) {
    if (in[i].dtype != in[0].dtype)
      return plan_errf(err, errsz,
                       "concat: inputs 0 and %d differ in dtype: %s vs "
                       "%s",
                       i, plan_dtype_name(in[0].dtype),
                       plan_dtype_name(in[i].dtype));
    bool same = in[i].rank == r;
    for (int j = 0; same && j < r; j++)
      same = j == dim || in[i].dims[j] == in[0].dims[j];
    if (!same)
      return plan_errf(err, errsz,
                       "concat: input %d is %s but input 0 is %s (only "
                       "dim %d may differ)",
                       i, fmt_dims(in[i].dims, in[i].rank, sa),
                       fmt_dims(in[0].dims, r, sb), dim);
    if (!plan_add_i64(sum, in[i].dims[dim], &sum))
      return plan_errf(err, errsz, "concat: dim %d overflows int64", dim);
  }
  copy_shape(out, &in[0]);
  out->dims[dim] = sum;
  return plan_infer_finish(PLAN_OP_CONCAT, out, nout, err, errsz);
}

/* ---- expand -------------------------------------------------------------- */

int plan_infer_expand(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_EXPAND, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "expand: attribute shape is required");
  if (n > PLAN_MAX_RANK)
    return plan_errf(err, errsz, "expand: shape has rank %d (at most %d)", n,
                     PLAN_MAX_RANK);
  char si[SHAPE_STRLEN], so[SHAPE_STRLEN];
  if (n < r)
    return plan_errf(err, errsz,
                     "expand: shape %s has fewer dims than the input %s",
                     fmt_dims(v, n, so), fmt_dims(in[0].dims, r, si));
  for (int j = 0; j < n; j++) {
    int ji = j - (n - r);
    if (v[j] < 0)
      return plan_errf(err, errsz,
                       "expand: shape entries must be >= 0, not %lld",
                       (long long)v[j]);
    /* numpy broadcasting: an input dim is 1 or the size itself */
    if (ji >= 0 && in[0].dims[ji] != 1 && in[0].dims[ji] != v[j])
      return plan_errf(err, errsz,
                       "expand: input %s does not broadcast to %s (dim %d is "
                       "%lld, not 1 or %lld)",
                       fmt_dims(in[0].dims, r, si), fmt_dims(v, n, so), ji,
                       (long long)in[0].dims[ji], (long long)v[j]);
    out->dims[j] = v[j];
  }
  out->rank = n;
  out->dtype = in[0].dtype;
  return plan_infer_finish(PLAN_OP_EXPAND, out, nout, err, errsz);
}

/* repeat_interleave: [.., n, ..] -> [.., n * repeats, ..] along dim, each
 * slice repeated in place (slice j of the output is slice j / repeats of
 * the input); any dtype. */
int plan_infer_repeat_interleave(PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(PLAN_OP_REPEAT_INTERLEAVE, in, nin, out, nout, 1,
                              err, errsz);
  if (rc)
    return rc;
  const plan_attr_spec *spec = SPEC(PLAN_OP_REPEAT_INTERLEAVE);
  int r = in[0].rank, dim;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz,
                     "repeat_interleave: attribute repeats is required");
  if (!attrs[1].present)
    return plan_errf(err, errsz,
                     "repeat_interleave: attribute dim is required");
  int64_t rep = attr_int(attrs, spec, 0), d = attr_int(attrs, spec, 1);
  if (r < 1)
    return plan_errf(err, errsz,
                     "repeat_interleave: the input must have rank >= 1, not "
                     "0");
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz,
                     "repeat_interleave: dim %lld is out of range for rank %d",
                     (long long)d, r);
  if (rep < 1)
    return plan_errf(err, errsz,
                     "repeat_interleave: repeats must be >= 1, not %lld",
                     (long long)rep);
  copy_shape(out, &in[0]);
  if (!plan_mul_i64(in[0].dims[dim], rep, &out->dims[dim]))
    return plan_errf(err, errsz,
                     "repeat_interleave: dim %d (%lld) times %lld overflows "
                     "int64",
                     dim, (long long)in[0].dims[dim], (long long)rep);
  return plan_infer_finish(PLAN_OP_REPEAT_INTERLEAVE, out, nout, err, errsz);
}
