/* Inference of the routing ops: topk, gather, scatter_add and the
 * mixture-of-experts dispatch, combine and weights gradient. */
#include "ir/ops_infer_checks.h"

/* Integer input i must have exactly the dims `dims` (rank r). */
static int int_shaped(int kind, const plan_shape *in, int i, const char *what,
                      const int64_t *dims, int r, char *err, size_t errsz) {
  int rc = plan_infer_int_input(kind, in, i, what, err, errsz);
  if (rc)
    return rc;
  bool ok = in[i].rank == r;
  for (int d = 0; ok && d < r; d++)
    ok = in[i].dims[d] == dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(err, errsz, "%s: %s (input %d) is %s, not %s",
                     plan_op_kind_name(kind), what, i,
                     fmt_dims(in[i].dims, in[i].rank, a), fmt_dims(dims, r, b));
  }
  return PLAN_OK;
}

/* topk: x [.., n] -> values [.., k] (x's dtype), indices [.., k] (i64): the
 * k largest along the last dim, largest first, ties to the lower index. */
int plan_infer_topk(PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(PLAN_OP_TOPK, in, nin, out, nout, 2, err, errsz);
  plan_dtype dt;
  if (rc || (rc = plan_infer_float_inputs(PLAN_OP_TOPK, in, nin, 1u, &dt, err,
                                          errsz)))
    return rc;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz, "topk: attribute k is required");
  int64_t k = attr_int(attrs, SPEC(PLAN_OP_TOPK), 0);
  int r = in[0].rank;
  if (r < 1)
    return plan_errf(err, errsz, "topk: the input must have rank >= 1, not 0");
  if (k < 1 || k > in[0].dims[r - 1])
    return plan_errf(err, errsz,
                     "topk: k must be in [1, %lld] (the last dim), not %lld",
                     (long long)in[0].dims[r - 1], (long long)k);
  copy_shape(&out[0], &in[0]);
  out[0].dims[r - 1] = k;
  copy_shape(&out[1], &out[0]);
  out[1].dtype = PLAN_I64;
  return plan_infer_finish(PLAN_OP_TOPK, out, nout, err, errsz);
}

/* gather: x [.., n], idx [.., k] (integers in [0, n), the same leading
 * dims) -> [.., k], out[.., j] = x[.., idx[.., j]]. */
int plan_infer_gather(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc =
      plan_infer_prelude(PLAN_OP_GATHER, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc ||
      (rc = plan_infer_float_inputs(PLAN_OP_GATHER, in, nin, 1u, &dt, err,
                                    errsz)) ||
      (rc = plan_infer_int_input(PLAN_OP_GATHER, in, 1, "idx", err, errsz)))
    return rc;
  int r = in[0].rank;
  bool ok = r >= 1 && in[1].rank == r;
  for (int d = 0; ok && d + 1 < r; d++)
    ok = in[1].dims[d] == in[0].dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "gather: x %s and idx %s must have one rank (>= 1) and "
                     "the same dims but the last",
                     fmt_dims(in[0].dims, r, a),
                     fmt_dims(in[1].dims, in[1].rank, b));
  }
  copy_shape(out, &in[1]);
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_GATHER, out, nout, err, errsz);
}

/* scatter_add: src [.., k], idx [.., k] (integers in [0, size)) -> [..,
 * size], zeros with src[.., j] added at [.., idx[.., j]]. */
int plan_infer_scatter_add(PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(PLAN_OP_SCATTER_ADD, in, nin, out, nout, 1, err,
                              errsz);
  plan_dtype dt;
  if (rc || (rc = plan_infer_float_inputs(PLAN_OP_SCATTER_ADD, in, nin, 1u, &dt,
                                          err, errsz)))
    return rc;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz, "scatter_add: attribute size is required");
  int64_t size = attr_int(attrs, SPEC(PLAN_OP_SCATTER_ADD), 0);
  int r = in[0].rank;
  if (r < 1)
    return plan_errf(err, errsz, "scatter_add: src must have rank >= 1, not 0");
  if (size < 1)
    return plan_errf(err, errsz, "scatter_add: size must be >= 1, not %lld",
                     (long long)size);
  if ((rc = int_shaped(PLAN_OP_SCATTER_ADD, in, 1, "idx", in[0].dims, r, err,
                       errsz)))
    return rc;
  copy_shape(out, &in[0]);
  out->dims[r - 1] = size;
  return plan_infer_finish(PLAN_OP_SCATTER_ADD, out, nout, err, errsz);
}

/* The routing of the mixture-of-experts ops: idx [g, t, k] integers
 * (input i), and the optional weights [g, t, k] of dtype dt (input wi). */
static int moe_routing(int kind, const plan_shape *in, int nin, int i, int wi,
                       const int64_t *gt, plan_dtype dt, char *err,
                       size_t errsz) {
  if (in[i].rank != 3 || in[i].dims[0] != gt[0] || in[i].dims[1] != gt[1]) {
    char a[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "%s: idx (input %d) is %s, not [%lld, %lld, k] (groups, "
                     "tokens, choices)",
                     plan_op_kind_name(kind), i,
                     fmt_dims(in[i].dims, in[i].rank, a), (long long)gt[0],
                     (long long)gt[1]);
  }
  int rc = plan_infer_int_input(kind, in, i, "idx", err, errsz);
  if (rc || wi >= nin)
    return rc;
  if (in[wi].dtype != dt)
    return plan_errf(err, errsz, "%s: the weights (input %d) are %s, not %s",
                     plan_op_kind_name(kind), wi, plan_dtype_name(in[wi].dtype),
                     plan_dtype_name(dt));
  bool ok = in[wi].rank == 3;
  for (int d = 0; ok && d < 3; d++)
    ok = in[wi].dims[d] == in[i].dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(
        err, errsz, "%s: the weights (input %d) are %s, not idx's %s",
        plan_op_kind_name(kind), wi, fmt_dims(in[wi].dims, in[wi].rank, a),
        fmt_dims(in[i].dims, 3, b));
  }
  return PLAN_OK;
}

/* moe_dispatch: x [g, t, h], idx [g, t, k] [, w [g, t, k]] -> [experts, g,
 * capacity, h]. Slot c of expert e in group g holds the c-th (token-major,
 * then choice) token of g routed to e (times its weight); a choice past
 * the capacity is dropped. */
int plan_infer_moe_dispatch(PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(PLAN_OP_MOE_DISPATCH, in, nin, out, nout, 1, err,
                              errsz);
  plan_dtype dt;
  if (rc || (rc = plan_infer_float_inputs(PLAN_OP_MOE_DISPATCH, in, 1, 1u, &dt,
                                          err, errsz)))
    return rc;
  if (!attrs || !attrs[0].present || !attrs[1].present)
    return plan_errf(err, errsz,
                     "moe_dispatch: attributes experts and capacity are "
                     "required");
  const plan_attr_spec *spec = SPEC(PLAN_OP_MOE_DISPATCH);
  int64_t e = attr_int(attrs, spec, 0), cap = attr_int(attrs, spec, 1);
  if (e < 1 || cap < 1)
    return plan_errf(err, errsz,
                     "moe_dispatch: experts and capacity must be >= 1, not "
                     "%lld and %lld",
                     (long long)e, (long long)cap);
  if (in[0].rank != 3)
    return plan_errf(err, errsz,
                     "moe_dispatch: x must be [groups, tokens, hidden], not "
                     "rank %d",
                     in[0].rank);
  if ((rc = moe_routing(PLAN_OP_MOE_DISPATCH, in, nin, 1, 2, in[0].dims, dt,
                        err, errsz)))
    return rc;
  out->rank = 4;
  out->dims[0] = e;
  out->dims[1] = in[0].dims[0];
  out->dims[2] = cap;
  out->dims[3] = in[0].dims[2];
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_MOE_DISPATCH, out, nout, err, errsz);
}

/* moe_combine: y [e, g, c, h], idx [g, t, k] [, w] -> [g, t, h]: each
 * token's choices read back from the slots moe_dispatch gave them (the
 * same capacity, y's dim 2), weighted and summed; dropped ones add 0. */
int plan_infer_moe_combine(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(PLAN_OP_MOE_COMBINE, in, nin, out, nout, 1, err,
                              errsz);
  plan_dtype dt;
  if (rc || (rc = plan_infer_float_inputs(PLAN_OP_MOE_COMBINE, in, 1, 1u, &dt,
                                          err, errsz)))
    return rc;
  if (in[0].rank != 4)
    return plan_errf(err, errsz,
                     "moe_combine: y must be [experts, groups, capacity, "
                     "hidden], not rank %d",
                     in[0].rank);
  int64_t gt[2] = {in[0].dims[1], in[1].rank == 3 ? in[1].dims[1] : 0};
  if ((rc =
           moe_routing(PLAN_OP_MOE_COMBINE, in, nin, 1, 2, gt, dt, err, errsz)))
    return rc;
  out->rank = 3;
  out->dims[0] = gt[0];
  out->dims[1] = gt[1];
  out->dims[2] = in[0].dims[3];
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_MOE_COMBINE, out, nout, err, errsz);
}

/* moe_weights_grad: a [g, t, h], b [e, g, c, h], idx [g, t, k] -> [g, t,
 * k]: out[g, t, j] = a[g, t, :] . b[idx, g, slot, :] (0 when dropped), the
 * gradient of the weights of moe_combine (a = dout, b = y) and of a
 * weighted moe_dispatch (a = x, b = dout). */
int plan_infer_moe_weights_grad(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, out, nout, 1,
                              err, errsz);
  plan_dtype dt;
  if (rc || (rc = plan_infer_float_inputs(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, 3u,
                                          &dt, err, errsz)))
    return rc;
  const plan_shape *a = &in[0], *b = &in[1];
  if (a->rank != 3 || b->rank != 4 || b->dims[1] != a->dims[0] ||
      b->dims[3] != a->dims[2]) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "moe_weights_grad: a %s and b %s are not [g, t, h] and "
                     "[e, g, c, h]",
                     fmt_dims(a->dims, a->rank, sa),
                     fmt_dims(b->dims, b->rank, sb));
  }
  if ((rc = moe_routing(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, 2, 3, a->dims, dt,
                        err, errsz)))
    return rc;
  copy_shape(out, &in[2]);
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_MOE_WEIGHTS_GRAD, out, nout, err, errsz);
}
