/* Lowering a training step (spec/plan-format.md §4.5; lower.h). The plan's
 * program becomes its training program (autodiff.c: the forward ops keep
 * their indices, the backward ops follow), and the plan becomes a plan of
 * that program, owned by the lowered result:
 *
 * - forward ops keep their strategies; leaves keep their storage
 *   placements, and the consts autodiff adds (the loss's seed, ones, zeros)
 *   are replicated;
 * - a backward op's strategy is derived from its forward op's by the
 *   backward op's own factor rule: a forward tensor enters in the placement
 *   the forward op consumed (or produced) it in, a gradient in the
 *   placement it was produced in, and the rule derives the outputs. Where
 *   the rule refuses (a partial gradient into an op not linear in it, a
 *   need-replication factor sharded), the partial inputs are reduced first,
 *   and failing that every input is replicated; the redistribution planner
 *   inserts the collectives, as in forward lowering;
 * - each param's gradient is delivered in its master placement (the
 *   storage placement, or the optimizer_state placement under
 *   reduce_scatter), which is the gradient sync: P(sum) -> R is the
 *   data-parallel all-reduce, P(sum) -> S the reduce-scatter, and a
 *   gradient that is R along an axis already (every rank there did the
 *   same computation) gets no collective on it.
 *
 * The optimizer step is not lowered into ops: the verifier applies it to
 * every rank's master blocks (verifier/verify.c, "training steps"). */
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "libplan/plan.h"
#include "lower/lower.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "read/program_read.h"

void plan_ltrain_free(plan_ltrain *t) {
  if (!t)
    return;
  plan_grad_map_free(t->map);
  free(t->param);
  free(t->grad_out);
  free(t->master);
  free(t->sync);
  free(t->norm_axes);
  free(t);
}

/* A derived plan over the training program: strategies per op, placements
 * per leaf, output placements. */
typedef struct tctx {
  const plan_plan *p; /* the forward plan */
  plan_plan *tp;      /* the derived plan */
  plan_grad_map *map;
  plan_placement *prod; /* per training tensor: its produced placement */
  plan_rule rule;
  int mb_axis; /* the microbatch axis of a pipelined step, or -1 */
} tctx;

/* The placement in which backward op `op` reads tensor `u`. */
static plan_placement want_of(const tctx *c, const plan_op *op, int u) {
  int o = c->map->origin[op - c->tp->program->ops];
  if (o >= 0) {
    const plan_op *f = &c->p->program->ops[o];
    const plan_strategy *st = &c->p->strategies[o];
    for (int j = 0; j < f->nin; j++)
      if (f->in[j] == u)
        return st->in[j];
    for (int k = 0; k < f->nout; k++)
      if (f->out[k] == u)
        return st->out[k];
    /* the gradient of an output is laid out like the output, a partial
     * output's gradient replicated along those axes: the conjugate of the
     * forward collective (an all-gather's is a reduce-scatter, an
     * all-reduce's the identity, Megatron's f and g) */
    for (int k = 0; k < f->nout; k++)
      if (c->map->grad[f->out[k]] == u) {
        plan_placement pl = st->out[k];
        for (int a = 0; a < pl.naxes; a++)
          if (pl.ax[a].kind == PLAN_PL_P)
            memset(&pl.ax[a], 0, sizeof pl.ax[a]);
        return pl;
      }
  }
  return c->prod[u];
}

static int derive(tctx *c, int i, plan_placement *in, plan_placement *out) {
  const plan_program *prog = c->tp->program;
  const plan_op *op = &prog->ops[i];
  const plan_mesh *m = &c->p->mesh;
  plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
  for (int j = 0; j < op->nin; j++)
    plan_shape_of(&prog->tensors[op->in[j]], &si[j]);
  for (int k = 0; k < op->nout; k++)
    plan_shape_of(&prog->tensors[op->out[k]], &so[k]);
  char err[256];
  if (plan_op_rule(&c->rule, op->kind, si, op->nin, so, op->nout, op->attrs,
                   err, sizeof err))
    return plan_failf(PLAN_EINVALID, "op '%s': no sharding rule: %s", op->name,
                      err);
  for (int j = 0; j < op->nin; j++)
    in[j] = want_of(c, op, op->in[j]);
  /* as read; then with partial inputs reduced; then replicated along one
   * more axis at a time, the last (fastest) first, down to everything
   * replicated */
  for (int attempt = 0; attempt < m->naxes + 2; attempt++) {
    if (attempt == 1)
      for (int j = 0; j < op->nin; j++)
        for (int a = 0; a < m->naxes; a++)
          if (in[j].ax[a].kind == PLAN_PL_P)
            memset(&in[j].ax[a], 0, sizeof in[j].ax[a]);
    if (attempt >= 2) {
      int a = m->naxes - 1 - (attempt - 2);
      for (int j = 0; j < op->nin; j++) {
        memset(&in[j].ax[a], 0, sizeof in[j].ax[a]);
        for (int b = 0; b < m->naxes; b++) /* nesting levels renumbered */
          if (in[j].ax[b].kind == PLAN_PL_S)
            in[j].ax[b].level = -1;
      }
    }
    bool ok = true;
    for (int j = 0; j < op->nin && ok; j++)
      ok = !plan_placement_normalize(&in[j], si[j].rank, err, sizeof err);
    if (!ok || plan_rule_infer_out_r(&c->rule, op->kind, op->attrs, in,
                                     m->axis_sizes, m->axis_names, m->ratios,
                                     m->nratios, out, err, sizeof err))
      continue;
    for (int k = 0; k < op->nout && ok; k++)
      ok = !plan_placement_normalize(&out[k], so[k].rank, err, sizeof err);
    if (ok)
      return PLAN_OK;
  }
  return plan_failf(PLAN_EINVALID,
                    "op '%s': no strategy even with replicated inputs: %s",
                    op->name, err);
}

/* Where param t's gradient goes: its master placement. */
static int master_of(const plan_plan *p, int t, plan_grad_sync *sync,
                     plan_placement *out) {
  const plan_tensor *x = &p->program->tensors[t];
  *sync = PLAN_SYNC_AUTO;
  const plan_param_train *pt =
      p->training.params ? &p->training.params[t] : NULL;
  if (pt)
    *sync = pt->sync;
  if (p->placements[t].set)
    *out = p->placements[t].pl;
  else
    plan_placement_replicated(out, p->mesh.naxes);
  if (*sync != PLAN_SYNC_REDUCE_SCATTER)
    return PLAN_OK;
  if (!pt->has_state_pl)
    return plan_fail(PLAN_EINVALID, p->file, pt->pos.line, pt->pos.col,
                     "param '%s': grad_sync reduce_scatter needs a sharded "
                     "optimizer_state placement for it",
                     x->name);
  *out = pt->state_pl;
  /* the master must hold every element the storage placement holds: a
   * state sharded where the param is partial would lose a part */
  for (int a = 0; a < p->mesh.naxes; a++)
    if (out->ax[a].kind == PLAN_PL_P ||
        (p->placements[t].set && p->placements[t].pl.ax[a].kind == PLAN_PL_P))
      return plan_fail(PLAN_EINVALID, p->file, pt->pos.line, pt->pos.col,
                       "param '%s': a partial param or optimizer state "
                       "cannot be reduce-scattered into",
                       x->name);
  return PLAN_OK;
}

/* The grad of a param under grad_sync none is delivered as produced: only
 * where storage is R may it be partial (the user asserts it is not). */
static int none_placement(const plan_plan *p, int t, const plan_placement *prod,
                          const plan_placement *store, plan_placement *out) {
  for (int a = 0; a < p->mesh.naxes; a++) {
    bool same = !memcmp(&prod->ax[a], &store->ax[a], sizeof prod->ax[a]);
    bool p_on_r =
        prod->ax[a].kind == PLAN_PL_P && store->ax[a].kind == PLAN_PL_R;
    if (!same && !p_on_r) {
      const plan_param_train *pt = &p->training.params[t];
      return plan_fail(PLAN_EINVALID, p->file, pt->pos.line, pt->pos.col,
                       "param '%s': grad_sync none, but its gradient is not "
                       "laid out like the param along '%s'",
                       p->program->tensors[t].name, p->mesh.axis_names[a]);
    }
  }
  *out = *prod;
  return PLAN_OK;
}

static int build(tctx *c, plan_lowered *l) {
  const plan_plan *p = c->p;
  plan_plan *tp = c->tp;
  const plan_program *prog = tp->program;
  const plan_program *fwd = p->program;
  const plan_grad_map *map = c->map;
  plan_arena *A = &tp->arena;
  tp->placements = plan_arena_alloc(A, sizeof(plan_tensor_pl) *
                                           (size_t)(prog->ntensors + 1));
  tp->out_pl = plan_arena_alloc(A, sizeof(plan_tensor_pl) *
                                       (size_t)(prog->noutputs + 1));
  tp->strategies =
      plan_arena_alloc(A, sizeof(plan_strategy) * (size_t)(prog->nops + 1));
  c->prod = calloc((size_t)prog->ntensors + 1, sizeof(plan_placement));
  if (!tp->placements || !tp->out_pl || !tp->strategies || !c->prod)
    return plan_oom();
  memset(tp->placements, 0, sizeof(plan_tensor_pl) * (size_t)prog->ntensors);
  memset(tp->out_pl, 0, sizeof(plan_tensor_pl) * (size_t)prog->noutputs);
  memset(tp->strategies, 0, sizeof(plan_strategy) * (size_t)prog->nops);
  for (int t = 0; t < prog->ntensors; t++) {
    if (t < fwd->ntensors)
      tp->placements[t] = p->placements[t];
    if (tp->placements[t].set)
      c->prod[t] = tp->placements[t].pl;
    else
      plan_placement_replicated(&c->prod[t], p->mesh.naxes);
  }
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    plan_strategy *st = &tp->strategies[i];
    if (i < map->nfwd_ops) {
      *st = p->strategies[i];
    } else {
      st->set = true;
      st->pos = op->pos;
      st->in =
          plan_arena_alloc(A, sizeof(plan_placement) * (size_t)(op->nin + 1));
      st->out =
          plan_arena_alloc(A, sizeof(plan_placement) * (size_t)(op->nout + 1));
      if (!st->in || !st->out)
        return plan_oom();
      int rc = derive(c, i, st->in, st->out);
      if (rc)
        return rc;
    }
    for (int k = 0; k < op->nout; k++)
      c->prod[op->out[k]] = st->out[k];
  }
  /* the optimizer's view */
  plan_ltrain *tr = calloc(1, sizeof *tr);
  if (!tr)
    return plan_oom();
  l->train = tr;
  size_t n = (size_t)fwd->ntensors + 1;
  tr->param = malloc(n * sizeof(int));
  tr->grad_out = malloc(n * sizeof(int));
  tr->master = malloc(n * sizeof(plan_placement));
  tr->sync = malloc(n * sizeof(plan_grad_sync));
  tr->norm_axes = calloc(n, sizeof(unsigned));
  if (!tr->param || !tr->grad_out || !tr->master || !tr->sync || !tr->norm_axes)
    return plan_oom();
  tr->loss = fwd->loss;
  /* output placements: forward outputs as the plan says, the loss
   * replicated unless stated, each gradient in its master placement */
  for (int k = 0; k < prog->noutputs; k++) {
    int t = prog->outputs[k];
    if (k < fwd->noutputs) {
      tp->out_pl[k] = p->out_pl[k];
      continue;
    }
    for (int f = 0; f < fwd->ntensors; f++) {
      if (map->grad[f] != t || fwd->tensors[f].role != PLAN_ROLE_PARAM ||
          !plan_dtype_is_float(fwd->tensors[f].dtype))
        continue;
      int i = tr->nparams++;
      tr->param[i] = f;
      tr->grad_out[i] = k;
      int rc = master_of(p, f, &tr->sync[i], &tr->master[i]);
      plan_placement deliver = tr->master[i];
      if (!rc && tr->sync[i] == PLAN_SYNC_NONE)
        rc = none_placement(p, f, &c->prod[t], &tr->master[i], &deliver);
      if (rc)
        return rc;
      /* a pipelined step accumulates every gradient over microbatches */
      if (c->mb_axis >= 0)
        memset(&deliver.ax[c->mb_axis], 0, sizeof deliver.ax[0]);
      tp->out_pl[k].set = true;
      tp->out_pl[k].pl = deliver;
      for (int a = 0; a < deliver.naxes; a++)
        if (deliver.ax[a].kind == PLAN_PL_S)
          tr->norm_axes[i] |= 1u << a;
      break;
    }
  }
  return PLAN_OK;
}

int plan_lower_train(plan_lowered **out, const plan_plan *p) {
  return plan_lower_train_mb(out, p, -1);
}

int plan_lower_train_mb(plan_lowered **out, const plan_plan *p, int mb_axis) {
  *out = NULL;
  int rc;
  tctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.mb_axis = mb_axis;
  plan_program *train = NULL;
  if ((rc = plan_autodiff(&train, &c.map, p->program, NULL)))
    return rc;
  plan_lowered *l = calloc(1, sizeof *l);
  plan_plan *tp = calloc(1, sizeof *tp);
  if (!l || !tp) {
    free(l);
    free(tp);
    plan_program_free(train);
    plan_grad_map_free(c.map);
    return plan_oom();
  }
  plan_arena_init(&l->arena);
  plan_arena_init(&tp->arena);
  tp->program = train;
  tp->program_inline = true;
  tp->pipeline.axis = -1;
  tp->file = plan_arena_strdup(&tp->arena, p->file ? p->file : "");
  tp->version_major = p->version_major;
  tp->version_minor = p->version_minor;
  tp->mesh = p->mesh; /* borrowed from p, which outlives l */
  tp->has_mesh = true;
  tp->training = p->training; /* the optimizer's settings; the per-param
                                 and per-op tables index p's program */
  tp->training.params = NULL;
  tp->training.recompute = NULL;
  tp->mesh_pos = p->mesh_pos;
  tp->overlap = p->overlap; /* borrowed, as the mesh */
  tp->noverlap = p->noverlap;
  l->plan = tp;
  l->own_plan = tp;
  c.tp = tp;
  rc = tp->file ? build(&c, l) : plan_oom();
  if (l->train)
    l->train->map = c.map;
  else
    plan_grad_map_free(c.map);
  free(c.prod);
  if (!rc)
    rc = plan_lower_steps(l);
  if (rc) {
    plan_lowered_free(l);
    return rc;
  }
  *out = l;
  return PLAN_OK;
}
