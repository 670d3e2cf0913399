/* The vocab-parallel loss: a cross_entropy or cross_entropy_grad step whose
 * logits are split on the class dim along some mesh axes (the rule's
 * collective factor, spec/sharding-rules.md). Each rank holds some classes
 * of every sample of its block, and the op runs the three all-reduces of
 * the distributed softmax along those axes, as Megatron-LM's vocab-parallel
 * cross-entropy does:
 *
 *   1. each sample's largest logit (max over the group);
 *   2. each sample's sum of exp(logit - max) (sum);
 *   3. forward only: the label's logit, from the one rank that holds it
 *      (sum, the others adding 0).
 *
 * The loss is then whole on every member; the gradient (softmax - onehot)
 * * dy / count is split as the logits. The arithmetic is the CPU kernel's
 * (runners/cpu/kernels_tmpl.h) in f64, exact mode's grid included, so only
 * the order of the sum of exponentials differs from the reference, which
 * the grid absorbs. Simulated ranks combine the members' partials in
 * member order; a distributed run all-reduces them through the
 * communicator. The op's arithmetic is the verifier's own here, not a
 * runner kernel's (docs/verify.md, "The vocab-parallel loss"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/numeric.h"
#include "runner_op.h"
#include "verify_ctx.h"

/* The input holding the logits, or -1 for an op without them. */
static int logits_input(int kind) {
  return kind == PLAN_OP_CROSS_ENTROPY        ? 0
         : kind == PLAN_OP_CROSS_ENTROPY_GRAD ? 1
                                              : -1;
}

int plan_vx_class_axes(const vctx *c, const vx_step *s, int *pa) {
  if (s->kind != VX_STEP_OP)
    return 0;
  const vx_op *op = &c->prog->ops[s->op];
  int li = logits_input(op->kind);
  if (li < 0)
    return 0;
  const vx_tensor *t = &c->prog->tensors[op->in[li]];
  const plan_placement *pl = &c->low->bufs[s->in[li]].pl;
  int np = 0;
  for (int a = 0; a < c->m->naxes; a++)
    if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == t->rank - 1)
      pa[np++] = a;
  return np;
}

typedef enum { PART_MAX, PART_SUMEXP, PART_LABEL } part_kind;

/* One member's partial of every sample (rows of its logits block, c of its
 * classes from class `off`): its largest logit, its sum of exp(x - gmax),
 * or its label's logit where it holds the label (else 0). */
static void partial(part_kind k, const block *lg, const block *lb, int64_t rows,
                    int64_t cls, int64_t off, const double *gmax, double *out) {
  for (int64_t r = 0; r < rows; r++) {
    const double *x = lg->data + r * cls;
    double v = k == PART_MAX ? -INFINITY : 0;
    if (k == PART_MAX) {
      for (int64_t i = 0; i < cls; i++)
        v = x[i] > v ? x[i] : v;
    } else if (k == PART_SUMEXP) {
      for (int64_t i = 0; i < cls; i++)
        v += exp(x[i] - gmax[r]);
    } else {
      int64_t at = (int64_t)lb->data[r] - off;
      v = at >= 0 && at < cls ? x[at] : 0;
    }
    out[r] = v;
  }
}

/* The op's operands on one rank. */
typedef struct ce_view {
  int li;          /* the logits input */
  int64_t rows;    /* samples in the block */
  int64_t classes; /* the global class count */
  int64_t count;   /* the global sample count (the mean's divisor) */
} ce_view;

/* Partial k of rank r's group (axes pa[0..np)) into out[rows]: the
 * members' partials combined in member order, or this process's through
 * the communicator. */
static int combine(vctx *c, const vx_step *s, const ce_view *v, int64_t r,
                   const int *pa, int np, part_kind k, const double *gmax,
                   double *out, double *tmp) {
  int lab = s->in[v->li + 1];
  int lgb = s->in[v->li];
  int d = c->prog->tensors[c->prog->ops[s->op].in[v->li]].rank - 1;
  int reduce = k == PART_MAX ? PLAN_RED_MAX : PLAN_RED_SUM;
  if (c->comm) {
    const block *lg = &c->bufs[lgb][r];
    partial(k, lg, &c->bufs[lab][r], v->rows, lg->local[d], lg->offset[d], gmax,
            out);
    int64_t n = plan_vx_group_size(c->m, pa, np);
    if (n > PLAN_COMM_MAX_WORLD)
      return plan_failf(PLAN_EUNSUPPORTED,
                        "vocab-parallel loss: a group of %lld ranks",
                        (long long)n);
    int members[PLAN_COMM_MAX_WORLD];
    for (int64_t q = 0; q < n; q++)
      members[q] = (int)plan_vx_group_member(c->m, pa, np, c->coords[r], q);
    return plan_vx_dist_reduce(c, members, (int)n, out, v->rows, reduce,
                               "vocab-parallel loss");
  }
  int64_t n = plan_vx_group_size(c->m, pa, np);
  for (int64_t q = 0; q < n; q++) {
    int64_t m = plan_vx_group_member(c->m, pa, np, c->coords[r], q);
    const block *lg = &c->bufs[lgb][m];
    if (lg->n && !lg->data)
      return plan_failf(PLAN_EINVALID,
                        "vocab-parallel loss: rank %lld's logits are missing",
                        (long long)m);
    double *dst = q ? tmp : out;
    partial(k, lg, &c->bufs[lab][m], v->rows, lg->local[d], lg->offset[d], gmax,
            dst);
    for (int64_t i = 0; q && i < v->rows; i++)
      out[i] =
          k == PART_MAX ? (tmp[i] > out[i] ? tmp[i] : out[i]) : out[i] + tmp[i];
  }
  return PLAN_OK;
}

/* The value in the output's run dtype, as a kernel in that dtype stores
 * it (exact mode and f64: as it is). */
static double stored(const vctx *c, const vx_tensor *t, double x) {
  if (c->o->mode == PLAN_VERIFY_EXACT || c->force64)
    return x;
  return plan_vx_round_run_dtype(c, t, x);
}

/* Rank r's output from the group's statistics. */
static void finish(vctx *c, const vx_step *s, const ce_view *v, int64_t r,
                   const double *gmax, const double *sum, const double *lab,
                   int bits) {
  const vx_op *op = &c->prog->ops[s->op];
  const vx_tensor *ot = &c->prog->tensors[op->out[0]];
  block *o = &c->bufs[s->out[0]][r];
  double count = (double)v->count;
  if (op->kind == PLAN_OP_CROSS_ENTROPY) {
    double total = 0;
    for (int64_t i = 0; i < v->rows; i++) {
      double si = sum[i] < 1 ? 1 : sum[i];
      total += plan_grid_div(gmax[i] + log(si) - lab[i], bits, v->count);
    }
    o->data[0] = stored(c, ot, plan_grid_quot(total, count, bits));
    return;
  }
  const block *lg = &c->bufs[s->in[1]][r];
  const block *lb = &c->bufs[s->in[2]][r];
  int d = c->prog->tensors[op->in[1]].rank - 1;
  int64_t cls = lg->local[d], off = lg->offset[d];
  double g = plan_grid_quot(c->bufs[s->in[0]][r].data[0], count, bits);
  for (int64_t i = 0; i < v->rows; i++) {
    double si = sum[i] < 1 ? 1 : sum[i];
    int64_t label = (int64_t)lb->data[i];
    const double *x = lg->data + i * cls;
    double *y = o->data + i * cls;
    for (int64_t j = 0; j < cls; j++) {
      double p = exp(x[j] - gmax[i]) / si - (off + j == label ? 1.0 : 0.0);
      double e = p * g;
      y[j] = stored(c, ot, bits >= 0 ? plan_dyadic_round(e, bits) : e);
    }
  }
}

/* Rank r's operands: shapes agree with the group's, labels in range. */
static int view_of(const vctx *c, const vx_step *s, int64_t r, ce_view *v) {
  const vx_op *op = &c->prog->ops[s->op];
  v->li = logits_input(op->kind);
  const vx_tensor *lt = &c->prog->tensors[op->in[v->li]];
  const vx_tensor *bt = &c->prog->tensors[op->in[v->li + 1]];
  const block *lb = &c->bufs[s->in[v->li + 1]][r];
  v->classes = lt->dims[lt->rank - 1];
  v->rows = lb->n;
  v->count = 1;
  for (int d = 0; d < bt->rank; d++)
    v->count *= bt->dims[d];
  const block *lg = &c->bufs[s->in[v->li]][r];
  if (lg->n != v->rows * lg->local[lt->rank - 1])
    return plan_failf(PLAN_EINVALID,
                      "op '%s': the logits' block (%lld values) and the "
                      "labels' (%lld samples) do not cover the same samples",
                      op->name, (long long)lg->n, (long long)v->rows);
  for (int64_t i = 0; i < v->rows; i++)
    if (lb->data[i] < 0 || lb->data[i] >= (double)v->classes)
      return plan_failf(PLAN_EINVALID,
                        "op '%s': label %.0f (element %lld) is outside the "
                        "classes [0, %lld)",
                        op->name, lb->data[i], (long long)i,
                        (long long)v->classes);
  return PLAN_OK;
}

int plan_vx_run_class_split(vctx *c, const vx_step *s, const int *pa, int np) {
  int bits = c->o->mode == PLAN_VERIFY_EXACT ? PLAN_KERNEL_DYADIC_BITS : -1;
  int rc = PLAN_OK;
  double *stats = NULL;
  int64_t cap = 0;
  for (int64_t r = 0; r < c->nranks && !rc; r++) {
    if (!plan_vx_runs(c, r))
      continue;
    ce_view v;
    if ((rc = view_of(c, s, r, &v)))
      break;
    if (v.rows > cap) {
      free(stats);
      cap = v.rows;
      if (!(stats = malloc(sizeof(double) * 4 * (size_t)cap)))
        return plan_oom();
    }
    double *gmax = stats, *sum = stats + cap, *lab = stats + 2 * cap;
    double *tmp = stats + 3 * cap;
    bool fwd = c->prog->ops[s->op].kind == PLAN_OP_CROSS_ENTROPY;
    if ((rc = combine(c, s, &v, r, pa, np, PART_MAX, NULL, gmax, tmp)) ||
        (rc = combine(c, s, &v, r, pa, np, PART_SUMEXP, gmax, sum, tmp)) ||
        (fwd &&
         (rc = combine(c, s, &v, r, pa, np, PART_LABEL, NULL, lab, tmp))))
      break;
    finish(c, s, &v, r, gmax, sum, lab, bits);
    /* a training step's exact mode rounds whole results, as
     * plan_vx_run_op does */
    block *o = &c->bufs[s->out[0]][r];
    for (int64_t e = 0; c->grid_op && c->grid_op[s->op] && e < o->n; e++)
      o->data[e] = plan_dyadic_round(o->data[e], PLAN_KERNEL_DYADIC_BITS);
  }
  free(stats);
  return rc;
}
