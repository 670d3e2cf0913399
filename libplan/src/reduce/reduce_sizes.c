/* Shape reduction, step 3 (reduce.c): the constraints every placement
 * puts on the atoms, and the smallest sizes that keep them all. */
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce_ctx.h"

#define SEARCH_SPAN ((int64_t)1 << 20) /* sizes tried per atom */

/* ---- step 3: constraints and sizes --------------------------------------- */

int plan_rd_add_cons(rctx *c, int t, int d, int64_t mult, unsigned axes,
                     bool nested, bool divisor) {
  const int64_t *ms = c->p->mesh.axis_sizes;
  int64_t k = mult;
  for (int a = 0; a < c->p->mesh.naxes; a++)
    if ((axes >> a & 1u) && !plan_mul_i64(k, ms[a] > 0 ? ms[a] : 1, &k))
      k = INT64_MAX;
  if (plan_grow((void **)&c->cons, &c->capcons, c->ncons + 1, sizeof *c->cons))
    return PLAN_ENOMEM;
  c->cons[c->ncons++] = (rcons){t, d, k, mult, axes, nested, divisor, false};
  return PLAN_OK;
}

int64_t plan_rd_cons_k2(const rctx *c, const rcons *q) {
  int64_t k = q->mb ? c->nmb : q->mult;
  for (int a = 0; a < c->p->mesh.naxes; a++)
    if ((q->axes >> a & 1u) && !plan_mul_i64(k, c->nk[a], &k))
      return INT64_MAX;
  return k;
}

/* The axes of dim d of placement pl, as a mask; *n their count. */
static unsigned dim_axes(const plan_placement *pl, int d, int *n) {
  int axes[PLAN_MAX_MESH_AXES];
  *n = plan_placement_dim_axes(pl, d, axes);
  unsigned m = 0;
  for (int a = 0; a < *n; a++)
    m |= 1u << axes[a];
  return m;
}

int plan_rd_add_pl(rctx *c, int t, const plan_placement *pl) {
  if (t < 0 || !pl)
    return PLAN_OK;
  const plan_tensor *x = &c->prog->tensors[t];
  for (int d = 0; d < x->rank; d++) {
    int na;
    unsigned m = dim_axes(pl, d, &na);
    int rc = na ? plan_rd_add_cons(c, t, d, 1, m, na > 1, false) : PLAN_OK;
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

int plan_rd_constraints(rctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = c->prog;
  int rc = PLAN_OK;
  /* rope tables need an even last dim */
  for (int t = 0; t < prog->ntensors && !rc; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if ((x->recipe == PLAN_RECIPE_ROPE_COS ||
         x->recipe == PLAN_RECIPE_ROPE_SIN) &&
        x->rank == 2)
      rc = plan_rd_add_cons(c, t, 1, 2, 0, false, true);
  }
  if (!p->has_mesh || rc)
    return rc;
  for (int t = 0; t < prog->ntensors && !rc; t++)
    if (p->placements && p->placements[t].set)
      rc = plan_rd_add_pl(c, t, &p->placements[t].pl);
  for (int i = 0; i < prog->nops && !rc; i++) {
    const plan_strategy *s = p->strategies ? &p->strategies[i] : NULL;
    if (!s || !s->set)
      continue;
    const plan_op *op = &prog->ops[i];
    for (int j = 0; j < op->nin && !rc; j++)
      rc = plan_rd_add_pl(c, op->in[j], &s->in[j]);
    for (int j = 0; j < op->nout && !rc; j++)
      rc = plan_rd_add_pl(c, op->out[j], &s->out[j]);
  }
  for (int k = 0; k < prog->noutputs && !rc; k++)
    if (p->out_pl && p->out_pl[k].set)
      rc = plan_rd_add_pl(c, prog->outputs[k], &p->out_pl[k].pl);
  if (p->training.present && p->training.params)
    for (int t = 0; t < prog->ntensors && !rc; t++)
      if (p->training.params[t].has_state_pl)
        rc = plan_rd_add_pl(c, t, &p->training.params[t].state_pl);
  /* a pipeline splits every input's batch dim into its microbatches (a
   * sharding in time, nested over the devices' sharding of that dim) */
  int64_t m = p->pipeline.present ? p->pipeline.microbatches : 1;
  for (int t = 0; t < prog->ntensors && !rc && m > 1; t++) {
    const plan_tensor *x = &prog->tensors[t];
    int d = x->producer < 0 ? plan_program_tensor_batch_dim(prog, t) : -1;
    if (d < 0)
      continue;
    int na = 0;
    unsigned axes = 0;
    if (p->placements && p->placements[t].set)
      axes = dim_axes(&p->placements[t].pl, d, &na);
    rc = plan_rd_add_cons(c, t, d, m, axes, na > 0, false);
    if (!rc)
      c->cons[c->ncons - 1].mb = true;
  }
  return rc;
}

/* torch.chunk of n over k: the chunk, the full pieces, the partial piece's
 * size (0: none) and the empty pieces. */
typedef struct chunking {
  int64_t chunk, full, part, empty;
} chunking;

static chunking chunk_of(int64_t n, int64_t k) {
  chunking r = {0, 0, 0, k};
  if (n <= 0 || k <= 0)
    return r;
  r.chunk = n / k + (n % k != 0);
  r.full = n / r.chunk;
  r.part = n - r.full * r.chunk;
  r.empty = k - r.full - (r.part > 0);
  return r;
}

static int64_t min2(int64_t n) {
  return n < 2 ? n : 2;
}

/* Whether size v over a->k2 ranks keeps constraint a (original size a->n
 * over a->k ranks). On the same ranks an uneven dim keeps its pieces'
 * counts; on fewer (a reduced mesh), the kinds of piece it has: full,
 * partial, empty. */
static bool fits(const acons *a, int64_t v) {
  if (a->even)
    return v % a->k2 == 0 && (a->divisor || v / a->k2 >= min2(a->n / a->k));
  chunking o = chunk_of(a->n, a->k), w = chunk_of(v, a->k2);
  bool same = a->k2 == a->k ? w.full == o.full && w.empty == o.empty
                            : (w.full > 0) == (o.full > 0) &&
                                  (w.empty > 0) == (o.empty > 0);
  return same && (w.part > 0) == (o.part > 0) && w.chunk >= min2(o.chunk) &&
         w.part >= min2(o.part);
}

static int cmp_acons(const void *x, const void *y) {
  const acons *a = x, *b = y;
  if (a->atom != b->atom)
    return a->atom < b->atom ? -1 : 1;
  if (a->k != b->k)
    return a->k < b->k ? -1 : 1;
  if (a->k2 != b->k2)
    return a->k2 < b->k2 ? -1 : 1;
  if (a->n != b->n)
    return a->n < b->n ? -1 : 1;
  if (a->even != b->even)
    return (int)a->even - (int)b->even;
  return (int)a->divisor - (int)b->divisor;
}

int64_t plan_rd_new_dim(const rctx *c, int t, int d) {
  int D = c->dimoff[t] + d;
  if (c->broken[D])
    return c->prog->tensors[t].dims[d];
  int64_t v = 1;
  for (int k = 0; k < c->natoms[D]; k++)
    v *= c->n[c->atoms[c->atomoff[D] + k]].nsize; /* <= the original */
  return v;
}

static bool keep_dim(rctx *c, int t, int d, keep_why why) {
  int D = c->dimoff[t] + d;
  bool ch = plan_rd_keep(c, D, why);
  for (int k = 0; k < c->natoms[D]; k++)
    ch |= plan_rd_keep(c, c->atoms[c->atomoff[D] + k], why);
  return ch;
}

/* Puts each constraint on the atom it binds; keeps what cannot be bound. */
static int bind(rctx *c) {
  c->nac = 0;
  for (int i = 0; i < c->ncons; i++) {
    const rcons *q = &c->cons[i];
    int D = c->dimoff[q->tensor] + q->dim;
    if (c->broken[D] || !c->natoms[D])
      continue;
    int64_t n0 = c->prog->tensors[q->tensor].dims[q->dim];
    bool even = q->k > 0 && n0 % q->k == 0;
    int a1 = c->atoms[c->atomoff[D]];
    acons ac = {a1,   q->k,      plan_rd_cons_k2(c, q), c->n[a1].size,
                even, q->divisor};
    if (!even && q->nested) {
      keep_dim(c, q->tensor, q->dim, KEEP_NESTED);
      continue;
    }
    if (c->natoms[D] > 1 && !(even && c->n[a1].size % q->k == 0)) {
      keep_dim(c, q->tensor, q->dim, KEEP_COMPOUND);
      continue;
    }
    if (plan_grow((void **)&c->ac, &c->capac, c->nac + 1, sizeof *c->ac))
      return PLAN_ENOMEM;
    c->ac[c->nac++] = ac;
  }
  if (c->nac)
    qsort(c->ac, (size_t)c->nac, sizeof *c->ac, cmp_acons);
  /* repeated layers repeat constraints: keep one of each */
  int w = 0;
  for (int i = 0; i < c->nac; i++)
    if (!w || cmp_acons(&c->ac[w - 1], &c->ac[i]))
      c->ac[w++] = c->ac[i];
  c->nac = w;
  return PLAN_OK;
}

static void choose(rctx *c) {
  for (int x = 0; x < c->nn; x++) {
    rnode *n = &c->n[x];
    if (n->parent == x && !n->nexp)
      n->nsize = n->keep ? n->size : min2(n->size);
  }
  for (int i = 0; i < c->nac;) {
    int j = i, a = c->ac[i].atom;
    while (j < c->nac && c->ac[j].atom == a)
      j++;
    rnode *n = &c->n[a];
    if (!n->keep) {
      /* the smallest size that keeps every constraint; the original keeps
       * them all */
      int64_t lo = min2(n->size), found = n->size;
      for (int64_t v = lo; v < n->size && v - lo < SEARCH_SPAN; v++) {
        bool ok = true;
        for (int k = i; ok && k < j; k++)
          ok = fits(&c->ac[k], v);
        if (ok) {
          found = v;
          break;
        }
      }
      n->nsize = found;
    }
    i = j;
  }
}

/* Checks every constraint and range on the new dims; keeps the dims that
 * break one. True when something changed (sizes must be chosen again). */
static bool recheck(rctx *c) {
  bool changed = false;
  for (int i = 0; i < c->ncons; i++) {
    const rcons *q = &c->cons[i];
    int64_t n0 = c->prog->tensors[q->tensor].dims[q->dim];
    int64_t nd = plan_rd_new_dim(c, q->tensor, q->dim);
    int64_t k2 = plan_rd_cons_k2(c, q);
    if (nd == n0 && k2 == q->k)
      continue;
    bool ok;
    if (n0 % q->k == 0)
      ok = nd % k2 == 0 && (q->divisor || nd / k2 >= min2(n0 / q->k));
    else if (q->nested)
      ok = false;
    else {
      acons a = {0, q->k, k2, n0, false, false};
      ok = fits(&a, nd);
    }
    /* on fewer ranks: the axes take their sizes back (a kept size may not
     * keep the pattern there); else the dim keeps its size */
    if (!ok && k2 != q->k)
      changed |= plan_rd_mesh_keep(c, q->axes, q->mb);
    else if (!ok)
      changed |= keep_dim(c, q->tensor, q->dim, KEEP_NOFIT);
  }
  /* integer ranges that index a dim: embedding ids, cross-entropy labels */
  const plan_program *prog = c->prog;
  for (int t = 0; t < prog->ntensors; t++)
    c->range_hi[t] = -1;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    if ((op->kind != PLAN_OP_EMBEDDING && op->kind != PLAN_OP_CROSS_ENTROPY) ||
        op->nin < 2)
      continue;
    const plan_tensor *ids = &prog->tensors[op->in[1]];
    const plan_tensor *tab = &prog->tensors[op->in[0]];
    if (!ids->has_range || tab->rank < 1)
      continue;
    int d = op->kind == PLAN_OP_EMBEDDING ? 0 : tab->rank - 1;
    int64_t n0 = tab->dims[d], nd = plan_rd_new_dim(c, op->in[0], d);
    int64_t want = ids->range_hi == n0 ? nd : ids->range_hi;
    bool bad = nd != n0 && (want > nd || ids->range_lo >= want);
    int64_t *hi = &c->range_hi[op->in[1]];
    if (!bad && *hi >= 0 && *hi != want)
      bad = true;
    if (bad)
      changed |= keep_dim(c, op->in[0], d, KEEP_RANGE);
    else
      *hi = want;
  }
  return changed;
}

int plan_rd_solve(rctx *c) {
  for (;;) {
    plan_rd_keep_down(c);
    int rc = bind(c);
    if (rc)
      return rc;
    choose(c);
    if (!recheck(c))
      return PLAN_OK;
  }
}
