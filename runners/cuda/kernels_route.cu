/* The CUDA runner's routing ops: topk, gather, scatter_add and the
 * mixture-of-experts dispatch / combine / weights gradient, with the local
 * semantics of every runner (runners/runner_op.h) and the CPU runner's
 * arithmetic (runners/cpu/kernels_route.c), so that the results agree bit
 * for bit:
 *
 *  - every value is read through double (exact for every storage type),
 *    products and sums are formed in double, and a result is converted
 *    to the compute type (float but for F64) where the CPU stores it into
 *    its float buffer: a running sum (scatter_add, moe_combine) after
 *    each term, a dot product (moe_weights_grad) once; BF16 and F16 are
 *    then rounded once on store, as the CPU runner rounds its outputs;
 *  - each output element is one thread's, its terms added in the CPU's
 *    order: scatter_add in order of the choice j, moe_combine a token's
 *    choices in expert order then slot order, moe_weights_grad's dot
 *    product in order of h. Nothing uses atomics.
 *
 * Indices are checked on the host before anything runs, with the CPU
 * runner's messages. A mixture-of-experts slot depends on the tokens
 * before it in its group, so one thread per (group, expert) walks the
 * group's choices in order (token-major, then choice) and numbers that
 * expert's: the slot of each choice (-1: dropped past the capacity, or an
 * expert of another block) and the choice held by each slot (-1: empty).
 * The ops' kernels then read those maps. The ops are exact (they copy, or
 * multiply and add grid values): exact mode rounds nothing here. */
#include "kernels.cuh"

/* ---- loads and stores ---------------------------------------------------- */

template <class S>
static PLAN_HD inline double route_ld(const S *p, int64_t i) {
  return (double)plan_st<S>::load(p[i]);
}

/* x converted to the compute type, as the CPU's store into its buffer. */
template <class S>
static PLAN_HD inline typename plan_st<S>::C route_c(double x) {
  return (typename plan_st<S>::C)x;
}

/* ---- kernels ------------------------------------------------------------- */

/* topk, one row each: pick j is the first element after pick j - 1 in the
 * order larger first, NaN above every number, ties to the lower index. */
static PLAN_HD inline bool route_before(double a, int64_t ia, double b,
                                        int64_t ib) {
  bool na = isnan(a), nb = isnan(b);
  if (na != nb)
    return na;
  if (!na && a != b)
    return a > b;
  return ia < ib;
}

template <class S> struct plan_k_topk {
  const S *x;
  S *vals;
  int64_t *idx;
  int64_t n, k;
  PLAN_HD void operator()(int64_t q) const {
    double pv = 0;
    int64_t pi = -1;
    for (int64_t j = 0; j < k; j++) {
      int64_t best = -1;
      double bv = 0;
      for (int64_t i = 0; i < n; i++) {
        double v = route_ld(x, q * n + i);
        if (j > 0 && !route_before(pv, pi, v, i))
          continue;
        if (best < 0 || route_before(v, i, bv, best)) {
          best = i;
          bv = v;
        }
      }
      /* the element itself, not its value through double: a device may
       * make any NaN its canonical one on a conversion */
      vals[q * k + j] = x[q * n + best];
      idx[q * k + j] = best;
      pv = bv;
      pi = best;
    }
  }
};

/* gather, one output element each: x's block holds [lo, lo + n) of the
 * last dim; an index another rank holds gives 0. */
template <class S> struct plan_k_route_gather {
  const S *x;
  const int64_t *id;
  S *o;
  int64_t n, k, lo;
  PLAN_HD void operator()(int64_t e) const {
    int64_t q = e / k, i = id[e] - lo;
    /* a copy of the element (its NaN's bits kept, as on the CPU) */
    o[e] = i >= 0 && i < n ? x[q * n + i] : plan_st<S>::store(route_c<S>(0.0));
  }
};

/* scatter_add, one output element (q, i) each: the row's sources whose
 * index names it, added in order of j. */
template <class S> struct plan_k_scatter_add {
  const S *src;
  const int64_t *id;
  S *o;
  int64_t n, k, lo;
  PLAN_HD void operator()(int64_t e) const {
    typename plan_st<S>::C acc = 0;
    int64_t q = e / n, i = e % n;
    for (int64_t j = 0; j < k; j++)
      if (id[q * k + j] - lo == i)
        acc = route_c<S>((double)acc + route_ld(src, q * k + j));
    o[e] = plan_st<S>::store(acc);
  }
};

/* The geometry of a mixture-of-experts call: tokens [g, t, h] (h local),
 * routing [g, t, k], slots [e, g, c, h] of which the block holds experts
 * [e0, e0 + ne). */
typedef struct route_moe {
  int64_t g, t, k, h, c, e0, ne, experts;
} route_moe;

/* Every choice's slot -1 before the walk (choices of other blocks keep
 * it). */
struct plan_k_moe_clear {
  int64_t *slot;
  PLAN_HD void operator()(int64_t r) const {
    slot[r] = -1;
  }
};

/* The walk of expert e0 + le over group g (index g * ne + le): its
 * choices in order take slots 0, 1, .. up to the capacity; slot[r] is the
 * slot of choice r (-1 dropped), occ[(le, g, s)] the choice in slot s (-1
 * empty). */
struct plan_k_moe_slots {
  const int64_t *id;
  int64_t *slot, *occ;
  route_moe m;
  PLAN_HD void operator()(int64_t w) const {
    int64_t g = w / m.ne, le = w % m.ne, s = 0;
    int64_t *held = occ + (le * m.g + g) * m.c;
    for (int64_t r = g * m.t * m.k; r < (g + 1) * m.t * m.k; r++)
      if (id[r] == m.e0 + le) {
        if (s < m.c) {
          held[s] = r;
          slot[r] = s++;
        } else {
          slot[r] = -1;
        }
      }
    for (int64_t u = s; u < m.c; u++)
      held[u] = -1;
  }
};

/* moe_dispatch, one element (le, g, s, d) of the slots each: the token
 * its slot holds (times its weight w, when given), or 0. */
template <class S> struct plan_k_moe_dispatch {
  const S *x, *w;
  const int64_t *occ;
  S *o;
  route_moe m;
  PLAN_HD void operator()(int64_t e) const {
    int64_t d = e % m.h, r = occ[e / m.h];
    double v = 0;
    if (r >= 0) {
      double xv = route_ld(x, (r / m.k) * m.h + d);
      v = w ? route_ld(w, r) * xv : xv;
    }
    o[e] = plan_st<S>::store(route_c<S>(v));
  }
};

/* moe_combine, one element (g, t, d) of the tokens each: its choices'
 * slots (times their weights), added in expert order, then slot order. */
template <class S> struct plan_k_moe_combine {
  const S *y, *w;
  const int64_t *id, *slot;
  S *o;
  route_moe m;
  PLAN_HD void operator()(int64_t e) const {
    int64_t gt = e / m.h, d = e % m.h, g = gt / m.t;
    typename plan_st<S>::C acc = 0;
    for (int64_t le = 0; le < m.ne; le++)
      for (int64_t j = 0; j < m.k; j++) {
        int64_t r = gt * m.k + j;
        if (id[r] != m.e0 + le || slot[r] < 0)
          continue;
        double yv = route_ld(y, ((le * m.g + g) * m.c + slot[r]) * m.h + d);
        acc = route_c<S>((double)acc + (w ? route_ld(w, r) * yv : yv));
      }
    o[e] = plan_st<S>::store(acc);
  }
};

/* moe_weights_grad, one choice r each: a's token row dotted with b's row
 * of the choice's slot, in order of h (0 when dropped or elsewhere). */
template <class S> struct plan_k_moe_wgrad {
  const S *a, *b;
  const int64_t *id, *slot;
  S *o;
  route_moe m;
  PLAN_HD void operator()(int64_t r) const {
    double acc = 0;
    int64_t le = id[r] - m.e0, s = slot[r];
    if (s >= 0) {
      int64_t g = r / (m.t * m.k);
      const S *ar = a + (r / m.k) * m.h;
      const S *br = b + ((le * m.g + g) * m.c + s) * m.h;
      for (int64_t d = 0; d < m.h; d++)
        acc += route_ld(ar, d) * route_ld(br, d);
    }
    o[r] = plan_st<S>::store(route_c<S>(acc));
  }
};

/* ---- host side ----------------------------------------------------------- */

/* Indices and blocks were checked before anything was uploaded
 * (plan_kernel_check: plan_kernel_route_check, every runner's). */

template <class S> static int run_topk(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *x = &c->in[0];
  int r = x->rank;
  plan_k_topk<S> k;
  k.x = (const S *)c->din[0];
  k.vals = (S *)c->dout[0];
  k.idx = (int64_t *)c->dout[1];
  k.n = x->dims[r - 1];
  k.k = c->out[0].dims[r - 1];
  if (k.n == 0 || k.k == 0)
    return PLAN_OK;
  return plan_cu_launch(cu, plan_cu_count(x) / k.n, k);
}

template <class S> static int run_gather(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *x = &c->in[0];
  int r = x->rank;
  plan_k_route_gather<S> k;
  k.n = x->dims[r - 1];
  k.lo = x->offset[r - 1];
  k.k = c->in[1].dims[r - 1];
  k.x = (const S *)c->din[0];
  k.id = (const int64_t *)c->din[1];
  k.o = (S *)c->dout[0];
  return plan_cu_launch(cu, plan_cu_count(c->out), k);
}

template <class S>
static int run_scatter_add(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *out = c->out;
  int r = out->rank;
  plan_k_scatter_add<S> k;
  k.n = out->dims[r - 1];
  k.lo = out->offset[r - 1];
  k.k = c->in[1].dims[r - 1];
  k.src = (const S *)c->din[0];
  k.id = (const int64_t *)c->din[1];
  k.o = (S *)c->dout[0];
  return plan_cu_launch(cu, plan_cu_count(out), k);
}

/* The geometry (tokens tok, routing idx, slots) and the slot maps: slot (one
 * per choice) and occ (one per slot of the block), device buffers freed with
 * the call; NULL when the hidden dim is 0, where no result reads them (and the
 * slots' count bounds neither). */
static int moe_setup(plan_cu *cu, const plan_view *tok, const plan_view *idx,
                     const void *did, const plan_view *slots, route_moe *m,
                     int64_t **slot, int64_t **occ) {
  m->g = idx->dims[0];
  m->t = idx->dims[1];
  m->k = idx->dims[2];
  m->h = tok->dims[2];
  m->c = slots->dims[2];
  m->e0 = slots->offset[0];
  m->ne = slots->dims[0];
  m->experts = plan_cu_global_dim(slots, 0);
  int rc;
  *slot = *occ = NULL;
  if (m->h == 0)
    return PLAN_OK;
  int64_t choices = m->g * m->t * m->k, held = m->ne * m->g * m->c;
  void *ps, *po;
  if ((rc = plan_cu_alloc(cu, (size_t)choices * sizeof(int64_t), &ps)) ||
      (rc = plan_cu_alloc(cu, (size_t)held * sizeof(int64_t), &po)))
    return rc;
  *slot = (int64_t *)ps;
  *occ = (int64_t *)po;
  plan_k_moe_clear kc;
  kc.slot = *slot;
  if ((rc = plan_cu_launch(cu, choices, kc)))
    return rc;
  plan_k_moe_slots ks;
  ks.id = (const int64_t *)did;
  ks.slot = *slot;
  ks.occ = *occ;
  ks.m = *m;
  return plan_cu_launch(cu, m->g * m->ne, ks);
}

template <class S>
static int run_moe_dispatch(plan_cu *cu, const plan_cu_call *c) {
  plan_k_moe_dispatch<S> k;
  int64_t *slot, *occ;
  int rc =
      moe_setup(cu, &c->in[0], &c->in[1], c->din[1], c->out, &k.m, &slot, &occ);
  if (rc)
    return rc;
  k.x = (const S *)c->din[0];
  k.w = c->nin > 2 ? (const S *)c->din[2] : NULL;
  k.occ = occ;
  k.o = (S *)c->dout[0];
  return plan_cu_launch(cu, plan_cu_count(c->out), k);
}

template <class S>
static int run_moe_combine(plan_cu *cu, const plan_cu_call *c) {
  plan_k_moe_combine<S> k;
  int64_t *slot, *occ;
  int rc =
      moe_setup(cu, c->out, &c->in[1], c->din[1], &c->in[0], &k.m, &slot, &occ);
  if (rc)
    return rc;
  k.y = (const S *)c->din[0];
  k.w = c->nin > 2 ? (const S *)c->din[2] : NULL;
  k.id = (const int64_t *)c->din[1];
  k.slot = slot;
  k.o = (S *)c->dout[0];
  return plan_cu_launch(cu, plan_cu_count(c->out), k);
}

template <class S>
static int run_moe_weights_grad(plan_cu *cu, const plan_cu_call *c) {
  plan_k_moe_wgrad<S> k;
  int64_t *slot, *occ;
  int rc = moe_setup(cu, &c->in[0], &c->in[2], c->din[2], &c->in[1], &k.m,
                     &slot, &occ);
  if (rc)
    return rc;
  if (k.m.h == 0) /* empty dot products */
    return plan_cu_zero(cu, c->dout[0],
                        (size_t)plan_cu_count(c->out) * sizeof(S));
  k.a = (const S *)c->din[0];
  k.b = (const S *)c->din[1];
  k.id = (const int64_t *)c->din[2];
  k.slot = slot;
  k.o = (S *)c->dout[0];
  return plan_cu_launch(cu, plan_cu_count(c->out), k);
}

template <class S> static int run_route(plan_cu *cu, const plan_cu_call *c) {
  switch (c->kind) {
  case PLAN_OP_TOPK:
    return run_topk<S>(cu, c);
  case PLAN_OP_GATHER:
    return run_gather<S>(cu, c);
  case PLAN_OP_SCATTER_ADD:
    return run_scatter_add<S>(cu, c);
  case PLAN_OP_MOE_DISPATCH:
    return run_moe_dispatch<S>(cu, c);
  case PLAN_OP_MOE_COMBINE:
    return run_moe_combine<S>(cu, c);
  default: /* PLAN_OP_MOE_WEIGHTS_GRAD: plan_cu_is_route was checked */
    return run_moe_weights_grad<S>(cu, c);
  }
}

bool plan_cu_is_route(int kind) {
  switch (kind) {
  case PLAN_OP_TOPK:
  case PLAN_OP_GATHER:
  case PLAN_OP_SCATTER_ADD:
  case PLAN_OP_MOE_DISPATCH:
  case PLAN_OP_MOE_COMBINE:
  case PLAN_OP_MOE_WEIGHTS_GRAD:
    return true;
  default:
    return false;
  }
}

int plan_cu_run_route(plan_cu *cu, const plan_cu_call *c) {
  switch (c->out[0].dtype) {
  case PLAN_F64:
    return run_route<double>(cu, c);
  case PLAN_F32:
    return run_route<float>(cu, c);
  case PLAN_BF16:
    return run_route<plan_bf16_t>(cu, c);
  default: /* F16: supports_op was checked */
    return run_route<plan_f16_t>(cu, c);
  }
}
