/* The delivered placements, part of the contract: every program output (a
 * training step's gradients among them) must be delivered in the
 * placement the plan requires (low->required), before its values are
 * compared. The comparison reduces partial axes, so without this a
 * gradient that was never synchronised, or an output left partial, would
 * match the reference. */
#include <stdio.h>
#include <string.h>

#include "verify_ctx.h"

/* The axes along which `got` is partial and `want` is not (or reduces
 * otherwise), as "'dp'" or "'dp' and 'tp'", into buf; their count. */
static int unsynced_axes(const vctx *c, const plan_placement *got,
                         const plan_placement *want, char *buf, size_t n) {
  int cnt = 0;
  size_t at = 0;
  buf[0] = 0;
  for (int a = 0; a < c->m->naxes; a++) {
    if (got->ax[a].kind != PLAN_PL_P ||
        (want->ax[a].kind == PLAN_PL_P &&
         want->ax[a].reduce == got->ax[a].reduce))
      continue;
    int w = snprintf(buf + at, n - at, "%s'%s'", cnt ? " and " : "",
                     c->m->axis_names[a]);
    if (w > 0 && (size_t)w < n - at)
      at += (size_t)w;
    cnt++;
  }
  return cnt;
}

/* The first axis whose level in `got` has the weights of `want`'s in
 * another order (two devices' pieces swapped), -1 when none. */
static int swapped_ratio_axis(const vctx *c, const plan_placement *got,
                              const plan_placement *want) {
  const vx_mesh *m = c->m;
  for (int a = 0; a < m->naxes; a++) {
    const plan_axis_pl *g = &got->ax[a], *w = &want->ax[a];
    if (g->kind != PLAN_PL_S || w->kind != PLAN_PL_S || g->dim != w->dim ||
        !g->ratio || !w->ratio || g->ratio == w->ratio ||
        g->ratio > m->nratios || w->ratio > m->nratios)
      continue;
    const vx_ratios *x = &m->ratios[g->ratio - 1],
                    *y = &m->ratios[w->ratio - 1];
    if (x->n != y->n)
      continue;
    int64_t sx = 0, sy = 0;
    for (int i = 0; i < x->n; i++) {
      sx += x->w[i];
      sy += y->w[i];
    }
    /* the same weights, reordered: equal sums and the same multiset */
    bool same = sx == sy;
    for (int i = 0; same && i < x->n; i++) {
      int cx = 0, cy = 0;
      for (int j = 0; j < x->n; j++) {
        cx += x->w[j] == x->w[i];
        cy += y->w[j] == x->w[i];
      }
      same = cx == cy;
    }
    if (same)
      return a;
  }
  return -1;
}

/* Why output slot k's buffer is not what the plan requires, into c's
 * diagnosis when it is the first divergence. */
static void diagnose(vctx *c, int k, const plan_placement *got,
                     const plan_placement *want, const char *gs,
                     const char *ws) {
  const vx_lowered *l = c->low;
  const char *name = c->prog->tensors[c->prog->outputs[k]].name;
  char axes[256];
  int np = unsynced_axes(c, got, want, axes, sizeof axes);
  int w = l->grad_of ? l->grad_of[k] : -1;
  const char *param = w >= 0 ? c->prog->tensors[w].name : NULL;
  char *d = c->diagnosis;
  size_t n = sizeof c->diagnosis;
  if (!l->required)
    snprintf(d, n,
             "output '%s' is delivered partial over %s (as %s), and the "
             "lowered program states no required placement for it "
             "('required'), so it must not be partial: a reduction over %s "
             "is missing",
             name, axes, gs, axes);
  else if (param && np)
    snprintf(d, n,
             "gradient of %s not synchronised over %s: '%s' is delivered as "
             "%s, partial, but the plan requires %s (the gradient sync)",
             param, axes, name, gs, ws);
  else if (param)
    snprintf(d, n,
             "gradient of %s delivered as %s, but the plan requires %s (where "
             "the optimizer updates %s)",
             param, gs, ws, param);
  else if (np)
    snprintf(d, n,
             "output '%s' is delivered as %s, partial over %s, but the plan "
             "requires %s: a reduction over %s is missing",
             name, gs, axes, ws, axes);
  else if ((np = swapped_ratio_axis(c, got, want)) >= 0)
    snprintf(d, n,
             "output '%s' is delivered as %s, but the plan requires %s: the "
             "shard weights over '%s' are swapped between devices (each "
             "holds another's piece size)",
             name, gs, ws, c->m->axis_names[np]);
  else
    snprintf(d, n, "output '%s' is delivered as %s, but the plan requires %s",
             name, gs, ws);
}

/* p with every axis of size 1 made R: along such an axis there is one
 * rank, so a shard is the whole and a partial sum has one term. */
static plan_placement unit_axes_replicated(const vctx *c,
                                           const plan_placement *p) {
  plan_placement q = *p;
  for (int a = 0; a < q.naxes && a < c->m->naxes; a++)
    if (c->m->axis_sizes[a] == 1)
      memset(&q.ax[a], 0, sizeof q.ax[a]);
  return q;
}

bool plan_vx_check_delivered(vctx *c, int k) {
  const vx_lowered *l = c->low;
  const plan_placement *got = &l->bufs[l->delivered[k]].pl;
  plan_placement want;
  if (l->required) {
    want = l->required[k];
  } else { /* no stated contract: delivered as it is, but never partial */
    want = *got;
    for (int a = 0; a < want.naxes; a++)
      if (want.ax[a].kind == PLAN_PL_P)
        memset(&want.ax[a], 0, sizeof want.ax[a]);
  }
  plan_placement g1 = unit_axes_replicated(c, got);
  plan_placement w1 = unit_axes_replicated(c, &want);
  if (plan_placement_equal(&g1, &w1))
    return true;
  char gs[PLAN_PLACEMENT_STRLEN], ws[PLAN_PLACEMENT_STRLEN];
  plan_placement_format_in(gs, sizeof gs, c->p, got);
  plan_placement_format_in(ws, sizeof ws, c->p, &want);
  const char *name = c->prog->tensors[c->prog->outputs[k]].name;
  if (l->required)
    plan_buf_printf(&c->text,
                    "NOT EQUAL output '%s' (as delivered, as %s): the plan "
                    "requires it as %s\n",
                    name, gs, ws);
  else
    plan_buf_printf(&c->text,
                    "NOT EQUAL output '%s' (as delivered, as %s): partial, "
                    "with no required placement stated\n",
                    name, gs);
  if (c->equal) {
    c->equal = 0;
    c->first_op = "as delivered";
    c->first_tensor = name;
    diagnose(c, k, got, &want, gs, ws);
  }
  return false;
}

void plan_vx_misplaced_record(vctx *c, int nrecs_before) {
  /* the output's record: no element is where the plan wants it */
  if (c->nrecs > nrecs_before) {
    plan_vrecord *r = &c->recs[c->nrecs - 1];
    if (!r->mismatches)
      r->mismatches = r->compared ? r->compared : 1;
  }
}
