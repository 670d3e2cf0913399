/* Float mode's tolerances and bounds: each tensor's elementwise
 * tolerance, and the two bounds that accept a tensor outside it (the
 * low-precision bound against an f64 reference, the depth bound over the
 * reduction length behind the tensor). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

/* The slack of float mode's depth bound (plan_vx_depth_bound). */
#define PLAN_VERIFY_DEPTH_FACTOR 8.0

/* torch.testing.assert_close's defaults. */
static void dtype_tol(plan_dtype d, double *rtol, double *atol) {
  switch (d) {
  case PLAN_F64:
    *rtol = 1e-7, *atol = 1e-7;
    break;
  case PLAN_BF16:
    *rtol = 1.6e-2, *atol = 1e-5;
    break;
  case PLAN_F16:
    *rtol = 1e-3, *atol = 1e-5;
    break;
  default:
    *rtol = 1.3e-6, *atol = 1e-5;
  }
}

/* The tolerances of tensor t: the dtype's (torch.testing.assert_close
 * defaults), else the run's, else the first per-tensor entry matching it. */
static void tolerance_of(const vctx *c, const vx_tensor *t, double *rtol,
                         double *atol) {
  for (int i = 0; i < c->o->ntolerances; i++) {
    const plan_verify_tolerance *e = &c->o->tolerances[i];
    if (e->tensor && plan_glob_match(e->tensor, t->name)) {
      *rtol = e->rtol;
      *atol = e->atol;
      return;
    }
  }
  *rtol = c->o->rtol;
  *atol = c->o->atol;
  if (*rtol > 0 || *atol > 0)
    return;
  dtype_tol(plan_vx_run_dtype(c, t), rtol, atol);
  /* a dtype policy: every tensor of the step is computed from values in
   * the compute dtype, and holds no more of their precision (an f32
   * gradient of bf16 activations, the loss of bf16 logits) */
  int cd = c->policy ? c->low->training.compute_dtype : -1;
  if (cd >= 0 && plan_dtype_is_float(t->dtype)) {
    double cr, ca;
    dtype_tol((plan_dtype)cd, &cr, &ca);
    if (cr > *rtol)
      *rtol = cr, *atol = ca > *atol ? ca : *atol;
  }
}

void plan_vx_default_tol(const vctx *c, const vx_tensor *t, double *rtol,
                         double *atol) {
  int i = (int)(t - c->prog->tensors);
  *rtol = c->rtol[i];
  *atol = c->atol[i];
}

/* The diagnoses' test of "equal up to float noise": the tensor's tolerance,
 * at least the dtype's (a tolerance tightened for the comparison must not
 * make a sum of partials look unlike the reference). */
void plan_vx_diag_tol(const vctx *c, const vx_tensor *t, double *rtol,
                      double *atol) {
  double r, a;
  plan_vx_default_tol(c, t, rtol, atol);
  dtype_tol(plan_vx_run_dtype(c, t), &r, &a);
  *rtol = fmax(*rtol, r);
  *atol = fmax(*atol, a);
}

/* The reduction length an op adds: the product of the sizes of the
 * factors it sums over (matmul's k, a norm's or softmax's dim, a reduced
 * dim), from its sharding rule. */
double plan_vx_op_reduction_length(const vx_program *prog, const vx_op *op) {
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  for (int j = 0; j < op->nin + op->nout; j++) {
    const vx_tensor *t =
        &prog->tensors[j < op->nin ? op->in[j] : op->out[j - op->nin]];
    plan_shape *sh = j < op->nin ? &in[j] : &out[j - op->nin];
    sh->rank = t->rank;
    memcpy(sh->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    sh->dtype = t->dtype;
  }
  plan_op_factor fs[PLAN_MAX_FACTORS];
  char err[160];
  int nf = plan_op_factors(fs, PLAN_MAX_FACTORS, op->kind, op->attrs, in,
                           op->nin, out, op->nout, err, sizeof err);
  if (nf < 0)
    return 1;
  /* need-replication factors are sums only in the normalising ops (split,
   * concat and reshape move data) */
  bool norm = op->kind == PLAN_OP_SOFTMAX || op->kind == PLAN_OP_LAYERNORM ||
              op->kind == PLAN_OP_RMSNORM ||
              op->kind == PLAN_OP_CROSS_ENTROPY ||
              op->kind == PLAN_OP_CROSS_ENTROPY_GRAD;
  double n = 1;
  for (int f = 0; f < nf; f++)
    if (fs[f].kind == PLAN_FACTOR_REDUCTION ||
        (norm && (fs[f].kind == PLAN_FACTOR_NEED_REPLICATION ||
                  fs[f].kind == PLAN_FACTOR_COLLECTIVE)))
      n *= (double)fs[f].size;
  return n > 1 ? n : 0;
}

/* Per-tensor tolerances, reduction depths and reference RMS (after the
 * reference run). */
int plan_vx_init_tolerances(vctx *c) {
  const vx_program *prog = c->prog;
  size_t n = (size_t)prog->ntensors + 1;
  if (!(c->rtol = calloc(n, sizeof(double))) ||
      !(c->atol = calloc(n, sizeof(double))) ||
      !(c->depth = calloc(n, sizeof(double))) ||
      !(c->rms = calloc(n, sizeof(double))) ||
      !(c->refmax = calloc(n, sizeof(double))))
    return plan_oom();
  for (int t = 0; t < prog->ntensors; t++) {
    tolerance_of(c, &prog->tensors[t], &c->rtol[t], &c->atol[t]);
    const vx_tensor *x = &prog->tensors[t];
    int64_t cnt = plan_vx_count_of(x->dims, x->rank);
    double s = 0, mx = 0;
    for (int64_t i = 0; c->ref[t] && i < cnt; i++)
      if (isfinite(c->ref[t][i])) {
        double a = fabs(c->ref[t][i]);
        s += a * a;
        mx = a > mx ? a : mx;
      }
    c->refmax[t] = mx;
    c->rms[t] = cnt > 0 ? sqrt(s / (double)cnt) : 0;
  }
  for (int i = 0; i < prog->nops; i++) { /* ops are in topological order */
    const vx_op *op = &prog->ops[i];
    double d = 0;
    for (int j = 0; j < op->nin; j++)
      d = fmax(d, c->depth[op->in[j]]);
    d += plan_vx_op_reduction_length(prog, op);
    for (int k = 0; k < op->nout; k++)
      c->depth[op->out[k]] = d;
  }
  return PLAN_OK;
}

/* Unit roundoff of the dtypes the depth bound serves (f64 and f32; the
 * low-precision bound serves bf16 and f16), else 0. */
static double depth_unit(plan_dtype d) {
  return d == PLAN_F64 ? 0x1p-53 : d == PLAN_F32 ? 0x1p-24 : 0;
}

/* docs/verify.md, "Modes and tolerances": a float-mode mismatch in f32,
 * bf16 or f16 is accepted when the distributed run is not much worse than
 * the single-device run in the same dtype, both measured against an f64
 * reference (Frobenius norms):
 *   |got - ref64| <= LOWP_FACTOR * |ref - ref64| + atol * sqrt(n).
 * Ranks that round their partial sums to bf16 before an all-reduce differ
 * from the reference element by element, yet are no less accurate. A real
 * bug (a missing reduction, a wrong shard) is far outside this bound
 * (PLAN_VERIFY_LOWP_FACTOR, verify_ctx.h). */
bool plan_vx_low_precision_bound(const vctx *c, const vx_tensor *t,
                                 const diff *df) {
  if (df->nonfinite || !c->ref64 || !c->ref64[t - c->prog->tensors] ||
      !plan_dtype_is_float(t->dtype) || plan_vx_run_dtype(c, t) == PLAN_F64)
    return false;
  double rtol, atol;
  plan_vx_default_tol(c, t, &rtol, &atol);
  return sqrt(df->err64) <= PLAN_VERIFY_LOWP_FACTOR * sqrt(df->base64) +
                                atol * sqrt((double)df->compared);
}

/* TTrace's idea (docs/verify.md): float error grows with the reductions behind
 * a tensor, so f64 and f32 tensors outside the elementwise tolerance are
 * accepted when, with K the reduction length along the deepest path from
 * the inputs and u the unit roundoff, eps = DEPTH_FACTOR u sqrt(K) bounds
 * both the relative Frobenius error and every element's error relative to
 * |ref| + RMS(ref) (so one wrong element in a big tensor is not averaged
 * away). bf16 and f16 are left to the low-precision bound: their u makes
 * such a bound too loose to catch a dropped reduction. */
double plan_vx_depth_eps(const vctx *c, const vx_tensor *t) {
  double u = depth_unit(plan_vx_run_dtype(c, t));
  return PLAN_VERIFY_DEPTH_FACTOR * u *
         sqrt(fmax(c->depth[t - c->prog->tensors], 1));
}

bool plan_vx_depth_bound(const vctx *c, const vx_tensor *t, const diff *df) {
  if (!plan_dtype_is_float(t->dtype)) /* integers compare exactly */
    return false;
  double eps = plan_vx_depth_eps(c, t);
  return eps > 0 && !df->bad_nonfinite && df->max_scaled <= eps &&
         sqrt(df->err2) <= eps * sqrt(df->ref2);
}
