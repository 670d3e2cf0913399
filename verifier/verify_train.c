/* Training steps (low->train): the optimizer update applied after each
 * run to the reference and to every rank's master blocks (SGD with
 * momentum and weight decay, Adam, clipping by global norm, loss scaling),
 * the exact-mode grid of the ops computed whole, and the comparison of the
 * updated params and optimizer state on every replica. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numeric.h"
#include "verify_ctx.h"

/* ---- training steps --------------------------------------------------------
 */

/* A training step's verification runs the training program `steps` times.
 * After each run the optimizer updates the reference's params from the
 * reference gradients, and every rank's master blocks of each param from
 * its blocks of the synced gradient (the gradient as lowering delivered
 * it, in the master placement); the updated params are compared, every
 * replica, and the next run starts from them: the reference from its own,
 * every rank from its own storage blocks (the master blocks themselves
 * when master and storage placements agree, else gathered from the master
 * blocks, as the all-gather after a ZeRO/FSDP update would). */

/* A value in the param's precision: exact mode's dyadic grid, float mode's
 * dtype. */
static double param_round(const vctx *c, const vx_tensor *t, double v) {
  if (c->o->mode == PLAN_VERIFY_EXACT)
    return plan_dyadic_round(v, PLAN_KERNEL_DYADIC_BITS);
  return plan_vx_round_run_dtype(c, t, v);
}

/* One optimizer update of w by gradient g, as torch's: SGD (g += wd w;
 * m = momentum m + g when momentum; w -= lr m) or Adam (g += wd w;
 * m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; w -= lr mhat / (sqrt(vhat)
 * + eps) with the bias corrections of step c->step + 1). The param is
 * rounded to its precision; the state to the param's dtype in float mode,
 * and not at all in exact mode (both runs compute it alike from equal
 * gradients, and the grid would flush a small second moment to 0). */
static double state_round(const vctx *c, const vx_tensor *t, double v) {
  return c->o->mode == PLAN_VERIFY_EXACT ? v : param_round(c, t, v);
}

static double opt_update(const vctx *c, const vx_tensor *t, double w, double g,
                         double *m, double *v) {
  const vx_training *o = &c->low->training;
  g += o->weight_decay * w;
  if (o->optimizer == PLAN_OPT_ADAM) {
    double k = (double)(c->step + 1);
    *m = state_round(c, t, o->beta1 * *m + (1 - o->beta1) * g);
    *v = state_round(c, t, o->beta2 * *v + (1 - o->beta2) * g * g);
    double mh = *m / (1 - pow(o->beta1, k)), vh = *v / (1 - pow(o->beta2, k));
    return param_round(c, t, w - o->lr * mh / (sqrt(vh) + o->eps));
  }
  if (o->momentum != 0) {
    *m = state_round(c, t, o->momentum * *m + g);
    g = *m;
  }
  return param_round(c, t, w - o->lr * g);
}

static double ***new_blocks(int n) {
  return calloc((size_t)n + 1, sizeof(double **));
}

int plan_vx_setup_grid(vctx *c) {
  const vx_lowered *l = c->low;
  /* Exact mode keeps sums exact in any order while values stay short
   * dyadics. A backward pass multiplies activations by activations
   * (softmax's backward, attention's dq and dk, weight gradients), so each
   * such product makes the grid finer, and a deep chain runs out of the
   * 53 bits of a double: the order of a sum then shows in the last bit.
   * And after an update the params are no longer integers. So both runs
   * round the results of every op the lowered program computes whole (no
   * partial input or output) to the grid (a result already on it, as most
   * forward results are, is unchanged); where partial sums flow, ops stay
   * linear and unrounded, so a rank's partial still sums to its share. */
  if (c->o->mode == PLAN_VERIFY_EXACT) {
    if (!(c->grid_op = calloc((size_t)c->prog->nops + 1, sizeof(bool))))
      return plan_oom();
    for (int i = 0; i < c->prog->nops; i++)
      c->grid_op[i] = true;
    for (int i = 0; i < l->nsteps; i++) {
      const vx_step *st = &l->steps[i];
      if (st->kind != VX_STEP_OP)
        continue;
      for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < (pass ? st->nout : st->nin); j++)
          if (plan_vx_partial_axes(&l->bufs[pass ? st->out[j] : st->in[j]],
                                   c->m->naxes, NULL))
            c->grid_op[st->op] = false;
    }
  }
  return PLAN_OK;
}

/* Per param: a buffer of the master placement (for comparing the updated
 * params), and the reference values and blocks the update reads kept. */
/* The dtype policy (spec §4.5 `dtypes`; docs/training-and-pipelines.md,
 * "Dtype policies"): each float tensor of the training step runs in the
 * dtype its role gives it. Params (their master copies and the optimizer
 * state) in `param`; their gradients in `grad`; the loss and its seed, a
 * sum over the batch, in `accum`; every other activation and gradient in
 * `compute`. An op reads its float inputs in its output's dtype (autocast:
 * an f32 weight is rounded to bf16 where a bf16 matmul reads it; a bf16
 * activation is read exactly by an f32 weight-gradient op); the kernels
 * accumulate in f32 or wider. Unset entries keep each tensor's own dtype;
 * --dtype overrides the policy. */
static int setup_policy(vctx *c) {
  const vx_training *o = &c->low->training;
  const vx_train *tr = c->low->train;
  if (c->dtype >= 0 || (o->param_dtype < 0 && o->compute_dtype < 0 &&
                        o->grad_dtype < 0 && o->accum_dtype < 0))
    return PLAN_OK;
  const vx_program *prog = c->prog;
  /* the seed grad/<loss> (a training step lowered from a plan) */
  int seed = tr->map ? plan_program_grad_tensor(prog->pub, tr->loss) : -1;
  c->policy = malloc((size_t)prog->ntensors + 1);
  if (!c->policy)
    return plan_oom();
  for (int t = 0; t < prog->ntensors; t++) {
    const vx_tensor *x = &prog->tensors[t];
    int d = o->compute_dtype;
    if (x->role == PLAN_ROLE_PARAM)
      d = o->param_dtype;
    if (t == tr->loss || t == seed)
      d = o->accum_dtype >= 0 ? o->accum_dtype : o->compute_dtype;
    c->policy[t] = (int8_t)(plan_dtype_is_float(x->dtype) ? d : -1);
  }
  for (int i = 0; i < tr->nparams; i++)
    c->policy[prog->outputs[tr->grad_out[i]]] = (int8_t)o->grad_dtype;
  return PLAN_OK;
}

int plan_vx_setup_train(vctx *c) {
  vx_lowered *l = c->low;
  const vx_train *tr = l->train;
  int np = tr->nparams;
  size_t nt = (size_t)c->prog->ntensors + 1;
  int rc0 = setup_policy(c);
  if (rc0)
    return rc0;
  vx_buf *nb = realloc(l->bufs, sizeof(vx_buf) * (size_t)(l->nbufs + np + 1));
  if (!nb)
    return plan_oom();
  l->bufs = nb;
  l->cap_bufs = l->nbufs + np + 1;
  c->keep_ref = calloc(nt, sizeof(bool));
  c->leaf_ref = calloc(nt, sizeof(double *));
  c->leaf_blk = new_blocks(c->prog->ntensors);
  c->master = new_blocks(np);
  c->mom = new_blocks(np);
  c->vel = new_blocks(np);
  c->ref_mom = calloc((size_t)np + 1, sizeof(double *));
  c->ref_vel = calloc((size_t)np + 1, sizeof(double *));
  c->master_buf = malloc(sizeof(int) * ((size_t)np + 1));
  c->keep_buf = calloc((size_t)(l->nbufs + np + 1), sizeof(bool));
  if (!c->keep_ref || !c->leaf_ref || !c->leaf_blk || !c->master || !c->mom ||
      !c->vel || !c->ref_mom || !c->ref_vel || !c->master_buf || !c->keep_buf)
    return plan_oom();
  /* loss scaling: the backward pass starts from loss_scale, not 1 (the
   * seed grad/<loss>, replicated: one element on every rank) */
  double ls = c->low->training.loss_scale;
  int sd = tr->map ? plan_program_grad_tensor(c->prog->pub, tr->loss) : -1;
  if (ls != 1 && sd >= 0) {
    if (!(c->leaf_ref[sd] = malloc(sizeof(double))) ||
        !(c->leaf_blk[sd] = calloc((size_t)c->nranks, sizeof(double *))))
      return plan_oom();
    c->leaf_ref[sd][0] = ls;
    for (int64_t r = 0; r < c->nranks; r++) {
      int64_t q = plan_vx_mb_first(c, r);
      if (q != r) { /* shared along the microbatch axis */
        c->leaf_blk[sd][r] = c->leaf_blk[sd][q];
        continue;
      }
      if (!(c->leaf_blk[sd][r] = malloc(sizeof(double))))
        return plan_oom();
      c->leaf_blk[sd][r][0] = ls;
    }
  }
  for (int i = 0; i < np; i++) {
    c->master_buf[i] = l->nbufs;
    l->bufs[l->nbufs].tensor = tr->param[i];
    l->bufs[l->nbufs++].pl = tr->master[i];
    c->keep_ref[tr->param[i]] = true;
    c->keep_ref[c->prog->outputs[tr->grad_out[i]]] = true;
    c->keep_buf[l->produced[tr->param[i]]] = true;
    c->keep_buf[l->delivered[tr->grad_out[i]]] = true;
  }
  return PLAN_OK;
}

/* Whether this process keeps rank r's optimizer arrays: its own rank's
 * (distributed), one copy along a pipeline's microbatch axis. */
static bool keeps(const vctx *c, int64_t r) {
  return plan_vx_mb_first(c, r) == r && plan_vx_owned(c, r);
}

static int alloc_rank_blocks(vctx *c, double ***dst, int buf) {
  if (*dst)
    return PLAN_OK;
  if (!(*dst = calloc((size_t)c->nranks, sizeof(double *))))
    return plan_oom();
  for (int64_t r = 0; r < c->nranks; r++) {
    int64_t q = plan_vx_mb_first(c, r);
    if (q != r) { /* pipelines: one copy along the microbatch axis */
      (*dst)[r] = (*dst)[q];
      continue;
    }
    if (!plan_vx_owned(c, r)) /* distributed: another process's */
      continue;
    if (!((*dst)[r] = plan_vx_take_array(c, c->bufs[buf][r].n, true)))
      return PLAN_ENOMEM;
  }
  return PLAN_OK;
}

/* A gradient scaled by clipping's coefficient (rounded to the grid in exact
 * mode: both runs the same way). */
static double clipped(const vctx *c, double g, double coef) {
  if (coef == 1)
    return g;
  return c->o->mode == PLAN_VERIFY_EXACT
             ? plan_dyadic_round(g * coef, PLAN_KERNEL_DYADIC_BITS)
             : g * coef;
}

/* The unit roundoff of the param's dtype in this run (the state rounds
 * to it too): what one rounding of an updated value may move it by,
 * relative to the rounded value. */
static double param_unit(const vctx *c, const vx_tensor *t) {
  switch (plan_vx_run_dtype(c, t)) {
  case PLAN_F32:
    return 0x1p-24;
  case PLAN_BF16:
    return 0x1p-8;
  case PLAN_F16:
    return 0x1p-11;
  default:
    return 0x1p-53;
  }
}

/* explained_by_gradient on rank r: each element of the rank's result
 * within its tolerance of the reference's, plus k times the difference of
 * what the update read (the momentum, the clipped gradient, its square),
 * plus the rounding of the rank's own result to the param's dtype. */
static bool rank_explained(const vctx *c, int i, int gb, int mb, int64_t r,
                           double coef_ref, double coef, int what,
                           const double *got, const double *want, double k,
                           double rtol, double atol) {
  const vx_train *tr = c->low->train;
  const vx_training *o = &c->low->training;
  int t = tr->param[i], gt = c->prog->outputs[tr->grad_out[i]];
  const vx_tensor *x = &c->prog->tensors[t];
  const block *g = &c->bufs[gb][r], *m = &c->bufs[mb][r];
  if (g->n != m->n)
    return false;
  double u = param_unit(c, x);
  for (int64_t e = 0; e < m->n; e++) {
    int64_t q = plan_vx_global_index(x, m, e);
    double gg = g->data[e] * coef, gw = c->ref[gt][q] * coef_ref;
    double dd = what == 2 ? fabs(gg * gg - gw * gw)
                : what == 0 && o->momentum != 0
                    ? fabs(c->mom[i][r][e] - c->ref_mom[i][q])
                    : fabs(gg - gw);
    if (!(fabs(got[e] - want[q]) <=
          atol + rtol * fabs(want[q]) + u * fabs(got[e]) + k * dd * (1 + 1e-6)))
      return false;
  }
  return true;
}

/* Float mode (docs/verify.md, "The optimizer update"): the update runs
 * only after every gradient was accepted (within its tolerance, the depth
 * or the low-precision bound, or as drift), and an accepted gradient
 * still moves what the optimizer computes from it by more than that
 * value's own tolerance: an SGD param by lr times the difference of its
 * step (the momentum, or the clipped gradient), Adam's moments by
 * (1 - beta1) times the gradient's difference and (1 - beta2) times its
 * square's. Such a value is accepted when every rank's synced gradient
 * holds the accepted values (no partial axis: replicas agree bit for bit,
 * shards are pieces of the reassembled value), clipping scaled them by the
 * coefficient the run's own gradients give (coef_ok), and each element
 * differs by at most its tolerance, its own rounding and that amount: a
 * partial or wrongly clipped gradient fails the first tests, a wrong
 * update the last. what: 0 the SGD param, 1 Adam's m, 2 Adam's v;
 * got[rank] and want[global index] the values compared. */
static bool explained_by_gradient(vctx *c, int i, int gb, double coef_ref,
                                  const double *coef, bool coef_ok, int what,
                                  double *const *got, const double *want) {
  const vx_train *tr = c->low->train;
  const vx_training *o = &c->low->training;
  int t = tr->param[i], gt = c->prog->outputs[tr->grad_out[i]];
  const vx_tensor *x = &c->prog->tensors[t];
  /* a rank's block of a partial gradient is its part, not the value the
   * comparison accepted (the parts' sum): the update read something else */
  if (c->o->mode != PLAN_VERIFY_FLOAT || !c->ref[gt] ||
      plan_vx_partial_axes(&c->low->bufs[gb], c->m->naxes, NULL))
    return false;
  double rtol, atol;
  plan_vx_default_tol(c, x, &rtol, &atol);
  double k = what == 0 ? o->lr : what == 1 ? 1 - o->beta1 : 1 - o->beta2;
  int mb = c->master_buf[i];
  bool ok = coef_ok;
  for (int64_t r = 0; r < c->nranks && ok; r++)
    ok = !plan_vx_owned(c, r) ||
         rank_explained(c, i, gb, mb, r, coef_ref, coef[r], what, got[r], want,
                        k, rtol, atol);
  return plan_vx_dist_all(c, ok); /* every process's ranks */
}

/* One param's update (update_param): what its steps share. */
typedef struct pupdate {
  int i, t, gt; /* the param's index, its tensor, its gradient's */
  const vx_tensor *x;
  int64_t n;        /* the param's elements */
  int mb, gb, sb;   /* its buffers: master, synced gradient, storage */
  bool same;        /* master and storage placements agree */
  bool adam, has_m; /* Adam; a first moment kept (Adam, or momentum) */
  const char *label;
  double coef_ref;    /* clipping's coefficients: the reference's, */
  const double *coef; /* every rank's */
  bool coef_ok;       /* every rank's the one its run's gradients give */
} pupdate;

/* The reference's update of the param (the state only where the
 * optimizer keeps one), and the next step's reference param. */
static int update_reference(vctx *c, const pupdate *u) {
  int i = u->i, t = u->t, gt = u->gt;
  int64_t n = u->n;
  bool last = c->step + 1 >= c->nsteps;
  double none_m = 0, none_v = 0;
  if ((u->has_m && !c->ref_mom[i] &&
       !(c->ref_mom[i] = plan_vx_take_array(c, n, true))) ||
      (u->adam && !c->ref_vel[i] &&
       !(c->ref_vel[i] = plan_vx_take_array(c, n, true))))
    return PLAN_ENOMEM;
  for (int64_t e = 0; e < n; e++)
    c->ref[t][e] = opt_update(c, u->x, c->ref[t][e],
                              clipped(c, c->ref[gt][e], u->coef_ref),
                              u->has_m ? &c->ref_mom[i][e] : &none_m,
                              u->adam ? &c->ref_vel[i][e] : &none_v);
  if (!last) { /* the next step's reference param */
    if (!c->leaf_ref[t] && !(c->leaf_ref[t] = plan_vx_take_array(c, n, false)))
      return PLAN_ENOMEM;
    memcpy(c->leaf_ref[t], c->ref[t], sizeof(double) * (size_t)n);
  }
  return PLAN_OK;
}

/* The ranks' master blocks (and optimizer state), made the first time:
 * the param's first values (a pipelined run keeps them once along the
 * microbatch axis). */
static int init_master(vctx *c, const pupdate *u) {
  int i = u->i, mb = u->mb;
  if (c->mb_axis >= 0)
    c->mb_now = 0;
  int rc = plan_vx_ensure_buffer(c, mb, true);
  c->mb_now = -1;
  if (rc || c->master[i])
    return rc;
  if ((rc = alloc_rank_blocks(c, &c->master[i], mb)) ||
      (u->has_m && (rc = alloc_rank_blocks(c, &c->mom[i], mb))) ||
      (u->adam && (rc = alloc_rank_blocks(c, &c->vel[i], mb))))
    return rc;
  for (int64_t r = 0; r < c->nranks; r++) {
    if (plan_vx_mb_first(c, r) != r || !plan_vx_owned(c, r))
      continue;
    block b = c->bufs[mb][r];
    b.data = c->master[i][r];
    if (u->same)
      memcpy(b.data, c->bufs[u->sb][r].data, sizeof(double) * (size_t)b.n);
    else
      plan_vx_fill_leaf(c, u->t, &b);
  }
  return PLAN_OK;
}

/* Every rank's update of its master blocks from its synced gradient; the
 * master buffer then holds them. */
static int update_ranks(vctx *c, const pupdate *u) {
  int i = u->i;
  double none_m = 0, none_v = 0;
  for (int64_t r = 0; r < c->nranks; r++) {
    const block *g = &c->bufs[u->gb][r];
    block *m = &c->bufs[u->mb][r];
    if (!plan_vx_owned(c, r)) /* distributed: another process's */
      continue;
    if (g->n != m->n)
      return plan_failf(PLAN_EINVALID,
                        "param '%s': its synced gradient is not laid out "
                        "like its master copy",
                        u->x->name);
    size_t bytes = sizeof(double) * (size_t)m->n;
    /* pipelines: the master is R along the microbatch axis, one copy
     * shared by every microbatch's ranks (alloc_rank_blocks), updated
     * once; compared once too */
    if (!keeps(c, r))
      continue;
    for (int64_t e = 0; e < m->n; e++)
      c->master[i][r][e] = opt_update(c, u->x, c->master[i][r][e],
                                      clipped(c, g->data[e], u->coef[r]),
                                      u->has_m ? &c->mom[i][r][e] : &none_m,
                                      u->adam ? &c->vel[i][r][e] : &none_v);
    memcpy(m->data, c->master[i][r], bytes);
  }
  return PLAN_OK;
}

/* The updated params compared with the reference's, and reported, within
 * float mode's bounds for an optimizer step from a gradient within its
 * own. */
static int compare_param(vctx *c, const pupdate *u) {
  int i = u->i, t = u->t;
  if (c->ref64) { /* the f64 reference knows the old values only */
    free(c->ref64[t]);
    c->ref64[t] = NULL;
  }
  diff df;
  int rc;
  if ((rc = plan_vx_compare_buffer(c, u->mb, &df)))
    return rc;
  /* Float mode, Adam: each element's step is normalised by its own second
   * moment, so rounding noise in a gradient near zero can move it by up to
   * lr either way (docs/verify.md). The params are then accepted within 2
   * lr and their rounding, the moments (which keep the gradient's scale) carry
   * the check, and the next step starts every rank from the reference's params.
   */
  bool adam_float = c->low->training.optimizer == PLAN_OPT_ADAM &&
                    c->o->mode == PLAN_VERIFY_FLOAT;
  bool float_mode = c->o->mode == PLAN_VERIFY_FLOAT;
  if (float_mode && !adam_float && df.mismatches &&
      explained_by_gradient(c, i, u->gb, u->coef_ref, u->coef, u->coef_ok, 0,
                            c->master[i], c->ref[t])) {
    plan_buf_printf(&c->text,
                    "within bound param '%s' (%s): %lld of %lld elements "
                    "are outside the tolerance, each by no more than lr "
                    "times its step's difference, from an accepted "
                    "gradient\n",
                    u->x->name, u->label, (long long)df.mismatches,
                    (long long)df.compared);
    df.mismatches = 0;
  }
  if (c->dist_rc) /* the processes could not agree: no more collectives */
    return c->dist_rc;
  /* (and the param's own rounding to its dtype, of a value up to the
   * largest the reference holds plus that step) */
  double big = 0, lr = c->low->training.lr;
  for (int64_t q = 0; adam_float && df.mismatches && q < u->n; q++)
    big = fmax(big, fabs(c->ref[u->t][q]));
  if (adam_float && df.mismatches &&
      df.max_abs <=
          2 * lr * (1 + 1e-6) + param_unit(c, u->x) * (big + 2 * lr)) {
    plan_buf_printf(&c->text,
                    "within bound param '%s' (%s): %lld of %lld elements "
                    "are outside the tolerance, by at most %g, within 2 lr "
                    "(Adam's normalised step); the moments are compared\n",
                    u->x->name, u->label, (long long)df.mismatches,
                    (long long)df.compared, df.max_abs);
    df.mismatches = 0;
  }
  plan_vx_report_tensor(c, "param", u->label, u->mb, &df);
  return PLAN_OK;
}

/* Adam's update hides a gradient's scale (docs/verify.md): its state
 * shows it, compared in the master buffer against the reference's
 * state. */
static int compare_state(vctx *c, const pupdate *u) {
  int i = u->i, t = u->t, mb = u->mb;
  bool float_mode = c->o->mode == PLAN_VERIFY_FLOAT;
  for (int st = 0; c->low->training.optimizer == PLAN_OPT_ADAM && st < 2;
       st++) {
    double *want = st ? c->ref_vel[i] : c->ref_mom[i], *keep = c->ref[t];
    for (int64_t r = 0; r < c->nranks; r++)
      if (plan_vx_mb_first(c, r) == r && plan_vx_owned(c, r))
        memcpy(c->bufs[mb][r].data, st ? c->vel[i][r] : c->mom[i][r],
               sizeof(double) * (size_t)c->bufs[mb][r].n);
    c->ref[t] = want;
    diff df;
    int rc;
    if ((rc = plan_vx_compare_buffer(c, mb, &df)))
      return rc;
    if (df.mismatches &&
        explained_by_gradient(c, i, u->gb, u->coef_ref, u->coef, u->coef_ok,
                              1 + st, st ? c->vel[i] : c->mom[i], want)) {
      plan_buf_printf(&c->text,
                      "within bound state %s '%s' (%s): %lld of %lld "
                      "elements are outside the tolerance, each by no more "
                      "than %s times its gradient's difference, from an "
                      "accepted gradient\n",
                      st ? "v" : "m", u->x->name, st ? c->label_v : c->label_m,
                      (long long)df.mismatches, (long long)df.compared,
                      st ? "(1 - beta2)" : "(1 - beta1)");
      df.mismatches = 0;
    }
    if (c->dist_rc)
      return c->dist_rc;
    plan_vx_report_tensor(c, st ? "state v" : "state m",
                          st ? c->label_v : c->label_m, mb, &df);
    c->ref[t] = keep;
    /* float mode: the next step starts from the reference's state */
    for (int64_t r = 0; float_mode && r < c->nranks; r++)
      for (int64_t e = 0; keeps(c, r) && e < c->bufs[mb][r].n; e++)
        (st ? c->vel[i] : c->mom[i])[r][e] =
            want[plan_vx_global_index(u->x, &c->bufs[mb][r], e)];
  }
  return PLAN_OK;
}

/* The master buffer back to the master blocks, and the next step's
 * storage blocks (none after the last step): the master blocks when the
 * placements agree, else gathered from them; in float mode the
 * reference's params. */
static int next_storage(vctx *c, const pupdate *u) {
  int i = u->i, t = u->t, mb = u->mb;
  const vx_tensor *x = u->x;
  bool float_mode = c->o->mode == PLAN_VERIFY_FLOAT;
  int rc;
  for (int64_t r = 0; r < c->nranks; r++)
    if (keeps(c, r))
      memcpy(c->bufs[mb][r].data, c->master[i][r],
             sizeof(double) * (size_t)c->bufs[mb][r].n);
  if (c->step + 1 >= c->nsteps)
    return PLAN_OK;
  if ((rc = alloc_rank_blocks(c, &c->leaf_blk[t], u->sb)))
    return rc;
  double *glob = NULL;
  if (!u->same && !float_mode) { /* gathered from the master blocks */
    if (!(glob = malloc(sizeof(double) * ((size_t)u->n + 1))))
      return plan_oom();
    if (c->comm) {
      rc = plan_vx_dist_gather_global(c, x, mb, c->master[i], glob);
      if (rc) {
        free(glob);
        return rc;
      }
    }
    for (int64_t r = c->nranks - 1; r >= 0 && !c->comm; r--)
      for (int64_t e = 0; e < c->bufs[mb][r].n; e++)
        glob[plan_vx_global_index(x, &c->bufs[mb][r], e)] = c->master[i][r][e];
  }
  /* (a pipelined run's arrays are shared along mb: each written once) */
  if (float_mode) /* every rank restarts from the reference's params */
    for (int64_t r = 0; r < c->nranks; r++)
      for (int64_t e = 0; keeps(c, r) && e < c->bufs[mb][r].n; e++)
        c->master[i][r][e] =
            c->ref[t][plan_vx_global_index(x, &c->bufs[mb][r], e)];
  for (int64_t r = 0; r < c->nranks; r++) {
    if (!keeps(c, r))
      continue;
    const block *sbk = &c->bufs[u->sb][r];
    for (int64_t e = 0; e < sbk->n; e++)
      c->leaf_blk[t][r][e] = float_mode
                                 ? c->ref[t][plan_vx_global_index(x, sbk, e)]
                             : u->same ? c->master[i][r][e]
                                       : glob[plan_vx_global_index(x, sbk, e)];
  }
  free(glob);
  return PLAN_OK;
}

/* One param's update on every rank, compared; its next storage blocks.
 * coef_ref and coef[rank]: clipping's coefficients. */
static int update_param(vctx *c, int i, const char *label, double coef_ref,
                        const double *coef, bool coef_ok) {
  const vx_train *tr = c->low->train;
  pupdate u;
  memset(&u, 0, sizeof u);
  u.i = i;
  u.t = tr->param[i];
  u.gt = c->prog->outputs[tr->grad_out[i]];
  u.x = &c->prog->tensors[u.t];
  u.n = plan_vx_count_of(u.x->dims, u.x->rank);
  u.mb = c->master_buf[i];
  u.gb = c->low->delivered[tr->grad_out[i]];
  u.sb = c->low->produced[u.t];
  u.same = plan_placement_equal(&tr->master[i], &c->low->bufs[u.sb].pl);
  u.adam = c->low->training.optimizer == PLAN_OPT_ADAM;
  u.has_m = u.adam || c->low->training.momentum != 0;
  u.label = label;
  u.coef_ref = coef_ref;
  u.coef = coef;
  u.coef_ok = coef_ok;
  int rc;
  if ((rc = update_reference(c, &u)) || (rc = init_master(c, &u)) ||
      (rc = update_ranks(c, &u)) || (rc = compare_param(c, &u)) ||
      (rc = compare_state(c, &u)))
    return rc;
  return next_storage(c, &u);
}

static double sum_squares(const block *g) {
  double s = 0;
  for (int64_t e = 0; e < g->n; e++)
    s += g->data[e] * g->data[e];
  return s;
}

/* Distributed: every rank's sums of squares of its synced gradients,
 * [rank * nparams + param], gathered from every process. */
static int gathered_squares(vctx *c, double **sq) {
  const vx_train *tr = c->low->train;
  size_t np = (size_t)tr->nparams;
  double *mine = calloc(np + 1, sizeof *mine);
  *sq = calloc(np * (size_t)c->nranks + 1, sizeof **sq);
  if (!mine || !*sq) {
    free(mine);
    return plan_oom();
  }
  for (size_t i = 0; i < np; i++)
    mine[i] = sum_squares(&c->bufs[c->low->delivered[tr->grad_out[i]]][c->me]);
  int rc = plan_vx_dist_all_gather(c, mine, np * sizeof *mine, *sq,
                                   "gathering the gradient norms");
  free(mine);
  return rc;
}

/* Gradient clipping by global norm (torch's clip_grad_norm_: the
 * gradients scaled by min(1, max / (norm + 1e-6))). The reference's norm is
 * over its whole gradients; each rank sums the squares of its blocks of
 * every synced gradient over the ranks along that param's norm axes (the
 * all-reduce a runner would do), so each element counts once when lowering
 * chose the axes right. norm[rank] and coef[rank]. */
static double clip_norms(vctx *c, double *norm, double *coef,
                         const double *sq) {
  const vx_train *tr = c->low->train;
  double max = c->low->training.clip_grad_norm, ref2 = 0;
  for (int64_t r = 0; r < c->nranks; r++)
    norm[r] = 0;
  for (int i = 0; i < tr->nparams; i++) {
    int gt = c->prog->outputs[tr->grad_out[i]];
    const vx_tensor *x = &c->prog->tensors[gt];
    int64_t n = plan_vx_count_of(x->dims, x->rank);
    for (int64_t e = 0; e < n; e++)
      ref2 += c->ref[gt][e] * c->ref[gt][e];
    int gb = c->low->delivered[tr->grad_out[i]];
    for (int64_t q = 0; q < c->nranks; q++) {
      double s = sq ? sq[(size_t)q * (size_t)tr->nparams + (size_t)i]
                    : sum_squares(&c->bufs[gb][q]);
      for (int64_t r = 0; r < c->nranks; r++) { /* q in r's group? */
        bool same = true;
        for (int a = 0; a < c->m->naxes && same; a++)
          same = (tr->norm_axes[i] >> a & 1u) ||
                 c->coords[q][a] == c->coords[r][a];
        if (same)
          norm[r] += s;
      }
    }
  }
  double u = 1 / c->low->training.loss_scale; /* norms of unscaled grads */
  for (int64_t r = 0; r < c->nranks; r++) {
    norm[r] = sqrt(norm[r]) * u;
    coef[r] = fmin(1, max / (norm[r] + 1e-6));
  }
  return sqrt(ref2) * u;
}

/* Float mode, clipping: whether every rank scaled its gradients by the
 * coefficient the distributed run's own synced gradients give. Their
 * global norm counts each element once (every rank's block placed at its
 * global offset, as the comparison reassembles it). A rank whose norm axes
 * are right sums the same squares in another order: n non-negative terms
 * in any order are within (n - 1) 2^-53 of their sum, relative, so its
 * norm, and its coefficient max / (norm + 1e-6), are within n 2^-53 of
 * these. A replica counted twice or a shard left out moves them by its
 * share of the squares. */
static int clip_coef_ok(vctx *c, const double *coef, bool *ok) {
  const vx_train *tr = c->low->train;
  double s2 = 0, n_all = 0;
  double **ptrs = calloc((size_t)c->nranks + 1, sizeof *ptrs);
  int rc = ptrs ? PLAN_OK : plan_oom();
  for (int i = 0; i < tr->nparams && !rc; i++) {
    int gt = c->prog->outputs[tr->grad_out[i]];
    int gb = c->low->delivered[tr->grad_out[i]];
    const vx_tensor *x = &c->prog->tensors[gt];
    int64_t n = plan_vx_count_of(x->dims, x->rank);
    double *glob = plan_vx_take_array(c, n, true);
    if (!glob) {
      rc = PLAN_ENOMEM;
      break;
    }
    if (c->comm) {
      ptrs[c->me] = c->bufs[gb][c->me].data;
      rc = plan_vx_dist_gather_global(c, x, gb, ptrs, glob);
    }
    for (int64_t r = c->nranks - 1; r >= 0 && !c->comm; r--)
      for (int64_t e = 0; e < c->bufs[gb][r].n; e++)
        glob[plan_vx_global_index(x, &c->bufs[gb][r], e)] =
            c->bufs[gb][r].data[e];
    for (int64_t e = 0; e < n; e++)
      s2 += glob[e] * glob[e];
    n_all += (double)n;
    free(glob);
  }
  free(ptrs);
  if (rc)
    return rc;
  double norm = sqrt(s2) / c->low->training.loss_scale;
  double own = fmin(1, c->low->training.clip_grad_norm / (norm + 1e-6)) /
               c->low->training.loss_scale;
  double tol = (n_all + 1) * 0x1p-53 * own;
  *ok = true;
  for (int64_t r = 0; r < c->nranks && *ok; r++)
    *ok = fabs(coef[r] - own) <= tol;
  return PLAN_OK;
}

int plan_vx_optimizer_step(vctx *c) {
  const vx_train *tr = c->low->train;
  if (c->low->training.optimizer == PLAN_OPT_NONE)
    return PLAN_OK;
  bool adam = c->low->training.optimizer == PLAN_OPT_ADAM;
  const char *label = plan_arena_printf(&c->rec_arena, "%s step %d",
                                        adam ? "adam" : "sgd", c->step + 1);
  c->label_m = plan_arena_printf(&c->rec_arena, "adam step %d: first moment",
                                 c->step + 1);
  c->label_v = plan_arena_printf(&c->rec_arena, "adam step %d: second moment",
                                 c->step + 1);
  double *norm = malloc(sizeof(double) * (size_t)c->nranks);
  double *coef = malloc(sizeof(double) * (size_t)c->nranks);
  if (!label || !c->label_m || !c->label_v || !norm || !coef) {
    free(norm);
    free(coef);
    return plan_oom();
  }
  double ref_norm = 0, coef_ref = 1;
  for (int64_t r = 0; r < c->nranks; r++)
    coef[r] = 1;
  double *squares = NULL; /* distributed: every rank's sums of squares */
  int rc = PLAN_OK;
  if (c->low->training.clip_grad_norm > 0 && c->comm)
    rc = gathered_squares(c, &squares);
  if (c->low->training.clip_grad_norm > 0 && !rc) {
    ref_norm = clip_norms(c, norm, coef, squares);
    coef_ref = fmin(1, c->low->training.clip_grad_norm / (ref_norm + 1e-6));
  }
  /* loss scaling: the gradients are unscaled before clipping's factor */
  double u = 1 / c->low->training.loss_scale;
  coef_ref *= u;
  for (int64_t r = 0; r < c->nranks; r++)
    coef[r] *= u;
  free(squares);
  bool was_equal = c->equal, coef_ok = true;
  if (!rc && c->low->training.clip_grad_norm > 0 &&
      c->o->mode == PLAN_VERIFY_FLOAT)
    rc = clip_coef_ok(c, coef, &coef_ok);
  for (int i = 0; i < tr->nparams && !rc; i++)
    rc = update_param(c, i, label, coef_ref, coef, coef_ok);
  /* a wrong update after right gradients: a wrong norm says why */
  for (int64_t r = 0; !rc && was_equal && !c->equal &&
                      c->low->training.clip_grad_norm > 0 && r < c->nranks;
       r++) {
    double rt = c->o->mode == PLAN_VERIFY_EXACT ? 0 : 1e-5;
    if (fabs(norm[r] - ref_norm) <= rt * ref_norm)
      continue;
    double sq = ref_norm > 0 ? norm[r] * norm[r] / (ref_norm * ref_norm) : 0;
    snprintf(c->diagnosis, sizeof c->diagnosis,
             "gradient clipping: the global gradient norm on rank %lld is "
             "%.17g, the reference's %.17g; its square is %g times the "
             "reference's: %s",
             (long long)r, norm[r], ref_norm, sq,
             sq > 1 ? "squares of replicated gradients summed over their "
                      "replicas (a replica counted more than once)"
                    : "squares of sharded gradients left out (a shard not "
                      "counted)");
    break;
  }
  free(norm);
  free(coef);
  return rc ? rc : c->dist_rc;
}
