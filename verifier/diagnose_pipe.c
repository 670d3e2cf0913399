/* Diagnoses of a pipelined program (vx_program.h, vx_pipe): the causes that
 * live on the microbatch axis. A microbatch holding another microbatch's
 * values (a send/recv off by one, labels paired with another microbatch's
 * inputs), and a gradient holding one microbatch's contribution where the
 * sum over all was due (gradients cleared between microbatches). The
 * generic diagnoses (diagnose.c) cover the rest, the ratio one naming the
 * microbatch axis when a value is counted once per microbatch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "verify_ctx.h"

static void tolerance(const vctx *c, const vx_tensor *t, double *rtol,
                      double *atol) {
  *rtol = *atol = 0;
  if (c->o->mode == PLAN_VERIFY_FLOAT && plan_dtype_is_float(t->dtype)) {
    plan_vx_diag_tol(c, t, rtol, atol);
    *rtol *= PLAN_VERIFY_LOWP_FACTOR;
  }
}

static bool close_to(double got, double want, double rtol, double atol) {
  return got == want || fabs(got - want) <= atol + rtol * fabs(want);
}

/* Whether the blocks of microbatch k hold the reference's values of
 * microbatch j (j < 0: zeros). Buffers without partial axes only. */
static bool holds(const vctx *c, int buf, int64_t k, int64_t j) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  const double *ref = c->ref[lb->tensor];
  int axis = c->mb_axis;
  double rtol, atol;
  tolerance(c, t, &rtol, &atol);
  for (int64_t r = 0; r < c->nranks; r++) {
    if (c->coords[r][axis] != k)
      continue;
    const block *b = &c->bufs[buf][r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    coord[axis] = j < 0 ? k : j;
    if (!b->data) /* handed back: it matched, so it held its own */
      return j == k;
    block o;
    plan_vx_layout(c, &lb->pl, lb->tensor, plan_vx_rank_at(c->m, coord), &o);
    if (o.n != b->n)
      return false;
    for (int64_t e = 0; e < b->n; e++) {
      double want = j < 0 ? 0 : ref[plan_vx_global_index(t, &o, e)];
      if (!close_to(b->data[e], want, rtol, atol))
        return false;
    }
  }
  return true;
}

/* The step that writes buf. */
static const vx_step *writer(const vctx *c, int buf, int *index) {
  for (int i = 0; i < c->low->nsteps; i++)
    for (int k = 0; k < c->low->steps[i].nout; k++)
      if (c->low->steps[i].out[k] == buf) {
        *index = i;
        return &c->low->steps[i];
      }
  return NULL;
}

static bool displaced_microbatches(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  const vx_pipe *pp = c->low->pipe;
  int64_t m = pp->microbatches;
  if (lb->pl.ax[c->mb_axis].kind != PLAN_PL_S || m < 2 ||
      plan_vx_partial_axes(lb, c->m->naxes, NULL) || !c->ref[lb->tensor])
    return false;
  char map[256] = "";
  size_t u = 0;
  int64_t first_k = -1, first_j = -2;
  for (int64_t k = 0; k < m; k++) {
    int64_t j = k;
    if (!holds(c, buf, k, k)) {
      for (j = 0; j < m && (j == k || !holds(c, buf, k, j)); j++)
        ;
      if (j == m)
        j = holds(c, buf, k, -1) ? -1 : -2;
      if (j == -2)
        return false; /* neither another microbatch's values nor zeros */
      if (first_k < 0)
        first_k = k, first_j = j;
    }
    if (j < 0)
      u += (size_t)snprintf(map + u, sizeof map - u, "%s%lld<-zeros",
                            k ? ", " : "", (long long)k);
    else
      u += (size_t)snprintf(map + u, sizeof map - u, "%s%lld<-%lld",
                            k ? ", " : "", (long long)k, (long long)j);
    if (u >= sizeof map - 1)
      return false;
  }
  if (first_k < 0)
    return false;
  char whose[48];
  if (first_j < 0)
    snprintf(whose, sizeof whose, "zeros");
  else
    snprintf(whose, sizeof whose, "microbatch %lld's values",
             (long long)first_j);
  int i = -1;
  const vx_step *s = writer(c, buf, &i);
  const char *hint = "microbatches paired wrongly";
  char extra[160] = "";
  if (s && s->kind == VX_STEP_TRANSFER) {
    hint = "a send/recv that pairs a microbatch with another one (off by "
           "one?)";
    snprintf(extra, sizeof extra, " as stage %d received it from stage %d",
             pp->stage[i], pp->from_stage[i]);
  } else if (s && s->kind == VX_STEP_INPUT) {
    hint = "the input's microbatches are out of step with the other "
           "inputs' (labels of one microbatch paired with another's "
           "samples)";
  }
  snprintf(c->diagnosis, sizeof c->diagnosis,
           "'%s'%s: microbatch %lld holds %s (%s; microbatch<-the microbatch "
           "whose reference values it holds): %s",
           t->name, extra, (long long)first_k, whose, map, hint);
  return true;
}

/* A gradient summed over microbatches that holds one microbatch's
 * contribution: the sum's input at microbatch k, reduced over its other
 * partial axes, equals the buffer. */
static bool one_contribution(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int axis = c->mb_axis;
  if (lb->pl.ax[axis].kind != PLAN_PL_R ||
      plan_vx_partial_axes(lb, c->m->naxes, NULL))
    return false;
  int src = -1;
  for (int i = 0; i < c->low->nsteps && src < 0; i++) {
    const vx_step *s = &c->low->steps[i];
    if (s->kind == VX_STEP_REDIST && s->redist.axis == axis &&
        s->redist.kind == VX_REDIST_ALL_REDUCE &&
        c->low->bufs[s->in[0]].tensor == lb->tensor)
      src = s->in[0];
  }
  if (src < 0 || !c->bufs[src][0].data)
    return false;
  const vx_buf *sb = &c->low->bufs[src];
  for (int a = 0; a < c->m->naxes; a++) /* alike blocks: the same shards */
    if ((sb->pl.ax[a].kind == PLAN_PL_S) != (lb->pl.ax[a].kind == PLAN_PL_S) ||
        (sb->pl.ax[a].kind == PLAN_PL_S &&
         memcmp(&sb->pl.ax[a], &lb->pl.ax[a], sizeof sb->pl.ax[a])))
      return false;
  int pa[PLAN_MAX_MESH_AXES], np = 0;
  for (int a = 0; a < c->m->naxes; a++)
    if (sb->pl.ax[a].kind == PLAN_PL_P && a != axis)
      pa[np++] = a;
  double rtol, atol;
  tolerance(c, t, &rtol, &atol);
  int64_t m = c->low->pipe->microbatches;
  for (int64_t k = m - 1; k >= 0; k--) {
    bool all = true;
    for (int64_t r = 0; r < c->nranks && all; r++) {
      if (c->coords[r][axis] != 0 || !plan_vx_partial_leader(c, r, pa, np))
        continue;
      const block *b = &c->bufs[buf][r];
      int64_t coord[PLAN_MAX_MESH_AXES];
      memcpy(coord, c->coords[r], sizeof coord);
      coord[axis] = k;
      for (int64_t e = 0; e < b->n && all; e++) {
        double v;
        plan_vx_group_value(c, src, pa, np, 0, coord, e, &v);
        all = close_to(b->data[e], v, rtol, atol);
      }
    }
    if (!all)
      continue;
    snprintf(c->diagnosis, sizeof c->diagnosis,
             "'%s' holds microbatch %lld's contribution only, where the sum "
             "over all %lld microbatches was due: the gradient was cleared "
             "between microbatches (or the accumulation kept one "
             "microbatch's)",
             t->name, (long long)k, (long long)m);
    return true;
  }
  return false;
}

bool plan_vx_diagnose_microbatches(vctx *c, int buf) {
  if (!c->low->pipe)
    return false;
  return displaced_microbatches(c, buf) || one_contribution(c, buf);
}
