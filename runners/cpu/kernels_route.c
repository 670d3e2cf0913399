/* The CPU kernels of the routing ops: topk, gather, scatter_add and the
 * mixture-of-experts dispatch / combine / weights gradient
 * (runners/runner_op.h states each op's local semantics; ops_infer.c the
 * shapes).
 *
 * These ops move values more than they compute, so they read and write
 * through double (ld / st) whatever the float dtype: F64 keeps its bits,
 * F32 / BF16 / F16 values are widened exactly and each result is stored
 * once (the dispatcher then rounds BF16 / F16 outputs). Products and sums
 * of exact-mode values stay on their dyadic grid, so nothing is rounded in
 * exact mode.
 *
 * Their indices and blocks are checked before anything runs
 * (plan_kernel_route_check, runners/runner_op.c, called by
 * plan_kernel_check for every runner).
 *
 * A mixture-of-experts slot depends on the tokens before it in its group,
 * and kernels allocate nothing, so the kernels walk one expert at a time:
 * the running count of that expert's choices is the slot. */
#include <math.h>
#include <string.h>

#include "kernels_route.h"
#include "kernels_int.h"
#include "libplan/ops.h"

static int64_t count_of(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d];
  return n;
}

static int64_t global_dim(const plan_view *v, int d) {
  return v->global_dims[d] > 0 ? v->global_dims[d] : v->dims[d];
}

static void zero(plan_view *v) {
  int64_t n = count_of(v);
  if (n > 0)
    memset(v->data, 0,
           (size_t)n * (v->dtype == PLAN_F64 ? sizeof(double) : sizeof(float)));
}

/* The slots' block of a mixture-of-experts op: moe_dispatch's output,
 * moe_combine's input 0, moe_weights_grad's input 1; and its routing. */
static const plan_view *moe_slots(int kind, const plan_view *in,
                                  const plan_view *out) {
  return kind == PLAN_OP_MOE_DISPATCH  ? out
         : kind == PLAN_OP_MOE_COMBINE ? &in[0]
                                       : &in[1];
}

/* ---- topk ---------------------------------------------------------------- */

/* The order of topk: larger first, NaN above every number, ties to the
 * lower index. Whether (a, ia) comes before (b, ib). */
static bool before(double a, int64_t ia, double b, int64_t ib) {
  bool na = isnan(a), nb = isnan(b);
  if (na != nb)
    return na;
  if (!na && a != b)
    return a > b;
  return ia < ib;
}

/* Pick j is the first element after pick j - 1 in that order: O(n k) per
 * row, no scratch. */
static void topk(const plan_view *x, plan_view *vals, plan_view *idx) {
  int r = x->rank;
  int64_t n = x->dims[r - 1], k = vals->dims[r - 1];
  int64_t rows = n ? count_of(x) / n : 0;
  int64_t *oi = idx->data;
  for (int64_t q = 0; q < rows; q++) {
    int64_t base = q * n;
    for (int64_t j = 0; j < k; j++) {
      int64_t best = -1;
      double bv = 0;
      for (int64_t i = 0; i < n; i++) {
        double v = plan_kview_get(x, base + i);
        if (j > 0 && !before(plan_kview_get(vals, q * k + j - 1),
                             oi[q * k + j - 1], v, i))
          continue;
        if (best < 0 || before(v, i, bv, best)) {
          best = i;
          bv = v;
        }
      }
      plan_kview_set(vals, q * k + j, bv);
      oi[q * k + j] = best;
    }
  }
}

/* ---- gather, scatter_add ------------------------------------------------- */

static void gather(const plan_view *x, const plan_view *idx, plan_view *out) {
  int r = x->rank;
  int64_t n = x->dims[r - 1], lo = x->offset[r - 1];
  int64_t k = idx->dims[r - 1], rows = k ? count_of(idx) / k : 0;
  const int64_t *id = idx->data;
  for (int64_t q = 0; q < rows; q++)
    for (int64_t j = 0; j < k; j++) {
      int64_t i = id[q * k + j] - lo;
      /* masked: an index another rank holds gives 0 here */
      plan_kview_set(out, q * k + j,
                     i >= 0 && i < n ? plan_kview_get(x, q * n + i) : 0.0);
    }
}

static void scatter_add(const plan_view *src, const plan_view *idx,
                        plan_view *out) {
  int r = out->rank;
  int64_t n = out->dims[r - 1], lo = out->offset[r - 1];
  zero(out);
  int64_t k = idx->dims[r - 1], rows = k ? count_of(idx) / k : 0;
  const int64_t *id = idx->data;
  for (int64_t q = 0; q < rows; q++)
    for (int64_t j = 0; j < k; j++) {
      int64_t i = id[q * k + j] - lo;
      if (i >= 0 && i < n) /* in order of j: deterministic */
        plan_kview_set(out, q * n + i,
                       plan_kview_get(out, q * n + i) +
                           plan_kview_get(src, q * k + j));
    }
}

/* ---- mixture of experts -------------------------------------------------- */

/* The geometry of one call: tokens [g, t, h] (h local), routing [g, t, k],
 * slots [e, g, c, h] of which this block holds experts [e0, e0 + ne). */
typedef struct moe_geom {
  int64_t g, t, k, h, c, e0, ne, experts;
} moe_geom;

static void moe_geometry(const plan_view *tok, const plan_view *idx,
                         const plan_view *slots, moe_geom *m) {
  m->g = idx->dims[0];
  m->t = idx->dims[1];
  m->k = idx->dims[2];
  m->h = tok->dims[2];
  m->c = slots->dims[2];
  m->e0 = slots->offset[0];
  m->ne = slots->dims[0];
  m->experts = global_dim(slots, 0);
}

/* Element offsets of token (g, t) and of slot (e - e0, g, s). */
static int64_t tok_at(const moe_geom *m, int64_t g, int64_t t) {
  return (g * m->t + t) * m->h;
}
static int64_t slot_at(const moe_geom *m, int64_t le, int64_t g, int64_t s) {
  return ((le * m->g + g) * m->c + s) * m->h;
}

/* Calls visit for every choice that got a slot held here: per group, per
 * expert of the block, the group's choices in order (token, then choice),
 * the running count of the expert's choices being the slot. r is the
 * choice's index in idx; tok and slot the element offsets of its token and
 * of its slot. */
typedef struct moe_walk {
  const moe_geom *m;
  const plan_view *in; /* the op's inputs */
  int nin;
  plan_view *out;
} moe_walk;

static void walk(const moe_walk *w, const int64_t *id,
                 void (*visit)(const moe_walk *w, int64_t r, int64_t tok,
                               int64_t slot)) {
  const moe_geom *m = w->m;
  for (int64_t g = 0; g < m->g; g++)
    for (int64_t le = 0; le < m->ne; le++) {
      int64_t s = 0;
      for (int64_t t = 0; t < m->t && s < m->c; t++)
        for (int64_t j = 0; j < m->k && s < m->c; j++) {
          int64_t r = (g * m->t + t) * m->k + j;
          if (id[r] == m->e0 + le)
            visit(w, r, tok_at(m, g, t), slot_at(m, le, g, s++));
        }
    }
}

/* slot = token (times its weight) */
static void dispatch_one(const moe_walk *w, int64_t r, int64_t tok,
                         int64_t slot) {
  const plan_view *x = &w->in[0], *wt = w->nin > 2 ? &w->in[2] : NULL;
  double f = wt ? plan_kview_get(wt, r) : 1.0;
  for (int64_t d = 0; d < w->m->h; d++)
    plan_kview_set(w->out, slot + d,
                   wt ? f * plan_kview_get(x, tok + d)
                      : plan_kview_get(x, tok + d));
}

/* token += slot (times its weight): a token's choices in expert order */
static void combine_one(const moe_walk *w, int64_t r, int64_t tok,
                        int64_t slot) {
  const plan_view *y = &w->in[0], *wt = w->nin > 2 ? &w->in[2] : NULL;
  double f = wt ? plan_kview_get(wt, r) : 1.0;
  for (int64_t d = 0; d < w->m->h; d++) {
    double v = plan_kview_get(y, slot + d);
    plan_kview_set(w->out, tok + d,
                   plan_kview_get(w->out, tok + d) + (wt ? f * v : v));
  }
}

/* the choice's weight gradient = token . slot */
static void wgrad_one(const moe_walk *w, int64_t r, int64_t tok, int64_t slot) {
  double acc = 0;
  for (int64_t d = 0; d < w->m->h; d++)
    acc += plan_kview_get(&w->in[0], tok + d) *
           plan_kview_get(&w->in[1], slot + d);
  plan_kview_set(w->out, r, acc);
}

int plan_kernel_route(int kind, const plan_view *in, int nin, plan_view *out) {
  if (kind == PLAN_OP_TOPK) {
    topk(&in[0], &out[0], &out[1]);
    return PLAN_OK;
  }
  if (kind == PLAN_OP_GATHER || kind == PLAN_OP_SCATTER_ADD) {
    (kind == PLAN_OP_GATHER ? gather : scatter_add)(&in[0], &in[1], out);
    return PLAN_OK;
  }
  bool wgrad = kind == PLAN_OP_MOE_WEIGHTS_GRAD;
  const plan_view *idx = &in[wgrad ? 2 : 1];
  const plan_view *tok = kind == PLAN_OP_MOE_COMBINE ? out : &in[0];
  moe_geom m;
  moe_geometry(tok, idx, moe_slots(kind, in, out), &m);
  moe_walk w = {&m, in, nin, out};
  zero(out);
  walk(&w, idx->data,
       kind == PLAN_OP_MOE_DISPATCH  ? dispatch_one
       : kind == PLAN_OP_MOE_COMBINE ? combine_one
                                     : wgrad_one);
  return PLAN_OK;
}
