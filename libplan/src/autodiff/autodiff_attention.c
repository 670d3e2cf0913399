/* The backward of fused attention, composed of ops of the registry: the
 * probabilities are recomputed as the unfused forward writes them (k and v
 * repeated per query head, scores = scale q k^T, the mask added or, for an
 * integer mask, the hidden scores replaced by -1e9, a causal_mask const
 * added, softmax), then
 *   dv = sum over each kv head's queries of p^T dy,
 *   ds = p (dp - sum_keys(dp p)), dp = dy v^T (0 where an integer mask
 *   hides the key: the score there is a constant),
 *   dq = scale ds k,  dk = sum over the group of scale ds^T q,
 *   dmask = ds summed where the mask broadcasts (a float mask only).
 * The kernel scores hidden keys the same way (-1e9), so the probabilities
 * agree, a query that sees no key included. Each op keeps its own
 * sharding rule, so the backward's placements are searched like any
 * others (the dk and dv products reduce over the queries: P(sum) under
 * context parallelism). */
#include "autodiff/autodiff_attention.h"

#include <math.h>
#include <string.h>

static int64_t dim_of(const plan_ad_ctx *c, int t, int d) {
  return c->p->tensors[t].dims[d];
}

/* x repeated g times per head (dim 1), or x itself for g 1. */
static int repeat_heads(plan_ad_ctx *c, const char *part, int x, int64_t g) {
  if (g == 1 || x < 0)
    return x;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_REPEAT_INTERLEAVE, a);
  a[0].i = g;
  a[0].present = true;
  a[1].i = 1;
  a[1].present = true;
  return plan_ad_op(c, PLAN_OP_REPEAT_INTERLEAVE, part, a, &x, 1);
}

/* [b, h, n, e] summed over each group of g query heads: [b, hk, n, e]. */
static int sum_groups(plan_ad_ctx *c, const char *part, const char *sum, int x,
                      int64_t g) {
  if (g == 1 || x < 0)
    return x;
  int64_t d5[5] = {dim_of(c, x, 0), dim_of(c, x, 1) / g, g, dim_of(c, x, 2),
                   dim_of(c, x, 3)};
  int y = plan_ad_reshape(c, part, x, 5, d5);
  int64_t two = 2;
  return y < 0 ? y : plan_ad_reduce_sum(c, sum, y, &two, 1, false);
}

/* The probabilities p [b, h, s, sk] the forward computed; *kk and *vv get
 * k and v repeated per query head. */
static int probabilities(plan_ad_ctx *c, const plan_op *op, double scale,
                         bool causal, int64_t g, int *kk, int *vv) {
  int q = op->in[0], mask = op->nin > 3 ? op->in[3] : -1;
  plan_dtype dt = c->p->tensors[q].dtype;
  *kk = repeat_heads(c, "k.repeat", op->in[1], g);
  *vv = repeat_heads(c, "v.repeat", op->in[2], g);
  if (*kk < 0 || *vv < 0)
    return *kk < 0 ? *kk : *vv;
  int s = plan_ad_matmul(c, "scores", q, *kk, false, true);
  if (s >= 0)
    s = plan_ad_scale(c, "scores.scale", s, scale);
  if (s >= 0 && mask >= 0) {
    if (plan_dtype_is_float(c->p->tensors[mask].dtype)) {
      s = plan_ad_binary(c, PLAN_OP_ADD, "scores.mask", s, mask);
    } else {
      int one =
          plan_ad_const(c, "hidden.one", NULL, 0, NULL, dt, PLAN_RECIPE_ONES);
      int hid = one < 0 ? one : plan_ad_scale(c, "hidden", one, -1e9);
      int in[3] = {mask, s, hid};
      s = hid < 0 ? hid
                  : plan_ad_op(c, PLAN_OP_WHERE, "scores.mask", NULL, in, 3);
    }
  }
  if (s >= 0 && causal) {
    int64_t cd[2] = {dim_of(c, q, 2), dim_of(c, op->in[1], 2)};
    int cm =
        plan_ad_const(c, "causal", NULL, 2, cd, dt, PLAN_RECIPE_CAUSAL_MASK);
    if (cm < 0)
      return cm;
    c->p->tensors[cm].recipe_fill = -1e9;
    s = plan_ad_binary(c, PLAN_OP_ADD, "scores.causal", s, cm);
  }
  if (s < 0)
    return s;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_SOFTMAX, a);
  a[0].i = 3;
  a[0].present = true;
  return plan_ad_op(c, PLAN_OP_SOFTMAX, "probs", a, &s, 1);
}

int plan_ad_bw_attention(plan_ad_ctx *c, const plan_op *op, int dy) {
  int q = op->in[0], mask = op->nin > 3 ? op->in[3] : -1;
  const plan_attr_spec *spec = plan_op_info_get(op->kind)->attrs;
  bool causal = op->attrs ? op->attrs[0].b : spec[0].def_b;
  double scale = op->attrs ? op->attrs[1].f : spec[1].def_f;
  if (scale == 0)
    scale = 1 / sqrt((double)dim_of(c, q, 3));
  int64_t hk = dim_of(c, op->in[1], 1);
  int64_t g = hk > 0 ? dim_of(c, q, 1) / hk : 1;
  int kk, vv, rc;
  int p = probabilities(c, op, scale, causal, g, &kk, &vv);
  if (p < 0)
    return p;
  if (plan_ad_wants(c, op, 2)) {
    int dv = plan_ad_matmul(c, "dv.full", p, dy, true, false);
    dv = sum_groups(c, "dv.split", "dv", dv, g);
    if (dv < 0 || (rc = plan_ad_contribute(c, op->in[2], dv)))
      return dv < 0 ? dv : rc;
  }
  bool wq = plan_ad_wants(c, op, 0), wk = plan_ad_wants(c, op, 1);
  bool wm = mask >= 0 && plan_ad_wants(c, op, 3);
  if (!wq && !wk && !wm)
    return PLAN_OK;
  /* softmax backward: ds = p (dp - sum(dp p)) */
  int dp = plan_ad_matmul(c, "dp", dy, vv, false, true);
  int t = dp < 0 ? dp : plan_ad_binary(c, PLAN_OP_MUL, "ds.dpp", dp, p);
  int64_t last = 3;
  if (t >= 0)
    t = plan_ad_reduce_sum(c, "ds.sum", t, &last, 1, true);
  if (t >= 0)
    t = plan_ad_binary(c, PLAN_OP_SUB, "ds.sub", dp, t);
  bool int_mask = mask >= 0 && !plan_dtype_is_float(c->p->tensors[mask].dtype);
  int ds =
      t < 0 ? t
            : plan_ad_binary(c, PLAN_OP_MUL, int_mask ? "ds.all" : "ds", p, t);
  if (ds >= 0 && int_mask) {
    /* a hidden score is a constant: no gradient flows through it */
    int zero = plan_ad_const(c, "ds.zero", NULL, 0, NULL,
                             c->p->tensors[q].dtype, PLAN_RECIPE_ZEROS);
    int in[3] = {mask, ds, zero};
    ds = zero < 0 ? zero : plan_ad_op(c, PLAN_OP_WHERE, "ds", NULL, in, 3);
  }
  if (ds < 0)
    return ds;
  if (wm) {
    int dm = plan_ad_unbroadcast(c, "dmask", ds, mask);
    if (dm < 0 || (rc = plan_ad_contribute(c, mask, dm)))
      return dm < 0 ? dm : rc;
  }
  int dss = plan_ad_scale(c, "ds.scale", ds, scale);
  if (dss < 0)
    return dss;
  if (wq) {
    int dq = plan_ad_matmul(c, "dq", dss, kk, false, false);
    if (dq < 0 || (rc = plan_ad_contribute(c, q, dq)))
      return dq < 0 ? dq : rc;
  }
  if (wk) {
    int dk = plan_ad_matmul(c, "dk.full", dss, q, true, false);
    dk = sum_groups(c, "dk.split", "dk", dk, g);
    if (dk < 0 || (rc = plan_ad_contribute(c, op->in[1], dk)))
      return dk < 0 ? dk : rc;
  }
  return PLAN_OK;
}
