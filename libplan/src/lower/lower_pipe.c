/* Lowering a pipelined plan (spec/plan-format.md §4.4; lower.h;
 * docs/training-and-pipelines.md, "Running a pipeline").
 *
 * Microbatches are a sharding in time: microbatch k is the k-th of m equal
 * slices of every input's batch dim. So the plan is lowered as an SPMD
 * program over its microbatch mesh, the mesh with the pipeline axis (R in
 * every placement of a pipelined plan) replaced by an axis `mb` of size m.
 * Along mb, inputs are S(batch), params and consts R, and every forward
 * op's entry follows from its own factor rule: S where the batch carries
 * through, P(sum) where the op sums over it (the loss; in the training
 * step, each weight gradient). A rank of that mesh is a (device of a
 * stage's sub-mesh, microbatch) pair, and its layout maps reassemble each
 * global tensor from every microbatch's blocks: the verifier compares each
 * microbatch against the full-batch reference with its usual machinery, and
 * the all-reduce over mb that the P(sum) gradients need is the gradient
 * accumulation across microbatches.
 *
 * Then every step is told where it runs (plan_lphase):
 * - the INPUT steps and the redistributions of leaves: before the schedule;
 * - an op: its stage (a backward op the stage of the forward op it
 *   differentiates, a sum of gradient contributions the earliest stage of
 *   its inputs'), in phase F (forward), I (it feeds an activation's
 *   gradient) or W (it only feeds weight gradients: zero-bubble's W);
 * - a redistribution along another axis: with the step that wrote its
 *   input;
 * - a redistribution along mb (the accumulation), and every step after
 *   one: after the schedule.
 * Where a stage's step reads a buffer another stage wrote, a TRANSFER step
 * (inserted just before its first reader) copies it into a buffer of the
 * reading stage: an activation on the way forward (RECV_F), a gradient on
 * the way back (RECV_B). Stages sit on pipeline ranks by the schedule's
 * placement (plan_schedule_stage_rank: s mod R, or a V for zbv and
 * dualpipev); a TRANSFER between two stages of one rank (the turn of a V)
 * is a local hand-over, not a send/recv, and is counted apart. */
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "libplan/plan.h"
#include "libplan/schedule.h"
#include "lower/lower.h"
#include "ir/ops.h"
#include "ir/placement.h"

void plan_lpipe_free(plan_lpipe *pp) {
  if (!pp)
    return;
  plan_schedule_free(pp->schedule);
  free(pp->stage);
  free(pp->phase);
  free(pp->from_stage);
  if (pp->xplan) { /* its program is the lowered plan's: not freed here */
    plan_arena_free(&pp->xplan->arena);
    free(pp->xplan);
  }
  free(pp);
}

int plan_pipeline_batch_dim(const plan_tensor *t) {
  if (t->rank == 0 || t->role == PLAN_ROLE_PARAM)
    return -1;
  for (int d = 0; t->dim_names && d < t->rank; d++)
    if (t->dim_names[d] && !strcmp(t->dim_names[d], "batch"))
      return d;
  return t->role == PLAN_ROLE_INPUT ? 0 : -1;
}

int plan_program_tensor_batch_dim(const plan_program *p, int tensor) {
  return p && tensor >= 0 && tensor < p->ntensors
             ? plan_pipeline_batch_dim(&p->tensors[tensor])
             : -1;
}

/* Placement pl (R along `axis`) with entry e along it; a shard of the
 * batch by microbatches is the major level of its dim. */
static int put_mb(plan_placement *pl, int rank, int axis, plan_axis_pl e) {
  char err[160];
  if (plan_placement_normalize(pl, rank, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "%s", err);
  if (e.kind == PLAN_PL_S) {
    for (int a = 0; a < pl->naxes; a++)
      if (a != axis && pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == e.dim)
        pl->ax[a].level++;
    e.level = 0;
  }
  pl->ax[axis] = e;
  return PLAN_OK;
}

/* The placement of every forward tensor along mb: leaves by their batch
 * dim, op outputs by the op's rule from its inputs'. */
static int derive_mb(const plan_plan *p, int64_t m, plan_axis_pl *mb) {
  const plan_program *prog = p->program;
  for (int t = 0; t < prog->ntensors; t++) {
    memset(&mb[t], 0, sizeof mb[t]);
    int d = prog->tensors[t].producer < 0
                ? plan_pipeline_batch_dim(&prog->tensors[t])
                : -1;
    if (d >= 0) {
      mb[t].kind = PLAN_PL_S;
      mb[t].dim = (int8_t)d;
    }
  }
  const int64_t sizes[1] = {m};
  const char *const names[1] = {"mb"};
  plan_rule rule;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
    plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
    for (int j = 0; j < op->nin; j++) {
      plan_shape_of(&prog->tensors[op->in[j]], &si[j]);
      memset(&in[j], 0, sizeof in[j]);
      in[j].naxes = 1;
      in[j].ax[0] = mb[op->in[j]];
    }
    for (int k = 0; k < op->nout; k++)
      plan_shape_of(&prog->tensors[op->out[k]], &so[k]);
    char err[256];
    if (plan_op_rule(&rule, op->kind, si, op->nin, so, op->nout, op->attrs, err,
                     sizeof err) ||
        plan_rule_infer_out(&rule, op->kind, op->attrs, in, sizes, names, out,
                            err, sizeof err))
      return plan_fail(PLAN_EUNSUPPORTED, p->file, op->pos.line, op->pos.col,
                       "op '%s' cannot run microbatch by microbatch (the "
                       "batch split into %lld): %s",
                       op->name, (long long)m, err);
    for (int k = 0; k < op->nout; k++)
      mb[op->out[k]] = out[k].ax[0];
  }
  return PLAN_OK;
}

/* The plan over the microbatch mesh: p's program (borrowed), training and
 * outputs, its placements and strategies with their mb entries. */
static int microbatch_plan(plan_plan **out, const plan_plan *p) {
  const plan_program *prog = p->program;
  int axis = p->pipeline.axis;
  int64_t m = p->pipeline.microbatches > 0 ? p->pipeline.microbatches : 1;
  plan_axis_pl *mb = calloc((size_t)prog->ntensors + 1, sizeof *mb);
  plan_plan *xp = calloc(1, sizeof *xp);
  if (!mb || !xp) {
    free(mb);
    free(xp);
    return plan_oom();
  }
  plan_arena_init(&xp->arena);
  *out = xp;
  int rc = derive_mb(p, m, mb);
  plan_arena *A = &xp->arena;
  xp->file = p->file;
  xp->version_major = p->version_major;
  xp->version_minor = p->version_minor;
  xp->program = p->program; /* borrowed: the plan is freed by hand */
  xp->program_inline = true;
  xp->has_mesh = true;
  xp->mesh = p->mesh;
  xp->mesh.axis_sizes[axis] = m;
  xp->mesh.ndevices = p->mesh.ndevices / p->mesh.axis_sizes[axis] * m;
  xp->mesh.devices = NULL;
  xp->mesh.submeshes = NULL;
  xp->mesh.nsubmeshes = 0;
  xp->mesh.hardware = NULL;
  /* per physical device, for the plan's own devices: not this mesh's */
  xp->mesh.profiles = NULL;
  xp->mesh.nprofiles = 0;
  xp->mesh.device_profile = NULL;
  xp->mesh.topology = NULL;
  /* "mb", unless the mesh has an axis of that name */
  xp->mesh.axis_names[axis] = "mb";
  for (int a = 0; a < p->mesh.naxes; a++)
    if (a != axis && !strcmp(p->mesh.axis_names[a], "mb"))
      xp->mesh.axis_names[axis] = "microbatch";
  xp->training = p->training;
  xp->pipeline.axis = -1;
  xp->mesh_pos = p->mesh_pos;
  xp->placements = plan_arena_alloc(A, sizeof(plan_tensor_pl) *
                                           (size_t)(prog->ntensors + 1));
  xp->out_pl = plan_arena_alloc(A, sizeof(plan_tensor_pl) *
                                       (size_t)(prog->noutputs + 1));
  xp->strategies =
      plan_arena_alloc(A, sizeof(plan_strategy) * (size_t)(prog->nops + 1));
  if (!rc && (!xp->placements || !xp->out_pl || !xp->strategies))
    rc = plan_oom();
  for (int t = 0; !rc && t < prog->ntensors; t++) {
    plan_tensor_pl *pl = &xp->placements[t];
    *pl = p->placements[t];
    if (prog->tensors[t].producer >= 0)
      continue;
    if (!pl->set)
      plan_placement_replicated(&pl->pl, p->mesh.naxes);
    pl->set = true;
    rc = put_mb(&pl->pl, prog->tensors[t].rank, axis, mb[t]);
  }
  for (int k = 0; !rc && k < prog->noutputs; k++)
    xp->out_pl[k] = p->out_pl[k]; /* R along mb: summed or gathered */
  for (int i = 0; !rc && i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    plan_strategy *st = &xp->strategies[i];
    *st = p->strategies[i];
    st->in =
        plan_arena_alloc(A, sizeof(plan_placement) * (size_t)(op->nin + 1));
    st->out =
        plan_arena_alloc(A, sizeof(plan_placement) * (size_t)(op->nout + 1));
    if (!st->in || !st->out) {
      rc = plan_oom();
      break;
    }
    for (int j = 0; !rc && j < op->nin; j++) {
      st->in[j] = p->strategies[i].in[j];
      rc = put_mb(&st->in[j], prog->tensors[op->in[j]].rank, axis,
                  mb[op->in[j]]);
    }
    for (int k = 0; !rc && k < op->nout; k++) {
      st->out[k] = p->strategies[i].out[k];
      rc = put_mb(&st->out[k], prog->tensors[op->out[k]].rank, axis,
                  mb[op->out[k]]);
    }
  }
  free(mb);
  return rc;
}

/* ---- where each step runs
 * ---------------------------------------------------- */

typedef struct sctx {
  const plan_plan *p; /* the pipelined plan */
  plan_lowered *l;
  plan_lpipe *pp;
  int *writer; /* [buffer]: the step that writes it, -1 */
} sctx;

static const char *tensor_of(const sctx *c, int b) {
  return c->l->plan->program->tensors[c->l->bufs[b].tensor].name;
}

/* Stage and phase of step i, from the steps before it. */
static int place_step(sctx *c, int i) {
  const plan_lstep *s = &c->l->steps[i];
  plan_lpipe *pp = c->pp;
  const plan_grad_map *map = c->l->train ? c->l->train->map : NULL;
  pp->stage[i] = -1;
  pp->from_stage[i] = -1;
  if (s->kind == PLAN_LSTEP_INPUT) {
    pp->phase[i] = PLAN_LPHASE_PRE;
    return PLAN_OK;
  }
  /* what its inputs' writers say */
  int first = -1;
  bool post = false, all_pre = true;
  for (int j = 0; j < s->nin; j++) {
    int w = c->writer[s->in[j]];
    if (w < 0)
      continue;
    post |= pp->phase[w] == PLAN_LPHASE_POST;
    if (pp->phase[w] != PLAN_LPHASE_PRE)
      all_pre = false;
    if (pp->stage[w] >= 0 && (first < 0 || pp->stage[w] < first))
      first = pp->stage[w];
  }
  if (s->kind == PLAN_LSTEP_REDIST) {
    int w = c->writer[s->in[0]];
    /* a slice along the microbatch axis keeps, on each microbatch, its
     * piece of what that microbatch holds (a loss seed's gradient, made R
     * and needed split as the microbatches split the batch): it runs
     * where its input is made; any other step along that axis sums or
     * gathers over microbatches, after the schedule */
    bool mb_slice = s->redist.kind == PLAN_REDIST_SLICE;
    if ((s->redist.axis == pp->axis && !mb_slice) || post) {
      pp->phase[i] = PLAN_LPHASE_POST;
    } else if (all_pre) {
      pp->phase[i] = PLAN_LPHASE_PRE;
    } else {
      pp->stage[i] = pp->stage[w];
      pp->phase[i] = pp->phase[w];
    }
    return PLAN_OK;
  }
  const plan_op *op = &c->l->plan->program->ops[s->op];
  if (post)
    return plan_failf(PLAN_EUNSUPPORTED,
                      "op '%s' reads a value summed over microbatches: a "
                      "pipeline cannot run it microbatch by microbatch",
                      op->name);
  int fwd = map ? map->origin[s->op] : s->op;
  if (!map || s->op < map->nfwd_ops) {
    pp->stage[i] = c->p->pipeline.op_stage[s->op];
    pp->phase[i] = PLAN_LPHASE_F;
  } else {
    pp->stage[i] = fwd >= 0     ? c->p->pipeline.op_stage[fwd]
                   : first >= 0 ? first
                                : pp->nstages - 1;
    pp->phase[i] =
        map->part[s->op] == PLAN_GRAD_WEIGHT ? PLAN_LPHASE_W : PLAN_LPHASE_I;
  }
  return PLAN_OK;
}

static bool is_stage_phase(int ph) {
  return ph == PLAN_LPHASE_F || ph == PLAN_LPHASE_I || ph == PLAN_LPHASE_W;
}

/* A transfer of buffer b into stage t: its buffer (made on first need). */
typedef struct xfer {
  int buf, stage, copy;
} xfer;

/* Rebuilds the step list with a TRANSFER before the first step of a stage
 * that reads a buffer another stage wrote. */
static int insert_transfers(sctx *c) {
  plan_lowered *l = c->l;
  plan_lpipe *pp = c->pp;
  int n = l->nsteps, cap = 2 * n + 8, ns = 0, nx = 0;
  plan_lstep *steps = calloc((size_t)cap, sizeof *steps);
  int *stage = malloc(sizeof(int) * (size_t)cap);
  int *from = malloc(sizeof(int) * (size_t)cap);
  uint8_t *phase = malloc((size_t)cap);
  xfer *xs = malloc(sizeof(xfer) * (size_t)cap);
  int rc = PLAN_OK;
  if (!steps || !stage || !from || !phase || !xs)
    rc = plan_oom();
  for (int i = 0; !rc && i < n; i++) {
    plan_lstep *s = &l->steps[i];
    int t = pp->stage[i];
    for (int j = 0; !rc && t >= 0 && is_stage_phase(pp->phase[i]) && j < s->nin;
         j++) {
      int b = s->in[j], w = c->writer[b];
      if (w < 0 || pp->stage[w] < 0 || pp->stage[w] == t)
        continue;
      int k = 0;
      while (k < nx && (xs[k].buf != b || xs[k].stage != t))
        k++;
      if (k == nx) {
        int src = pp->stage[w];
        bool fwd = pp->phase[w] == PLAN_LPHASE_F;
        if ((fwd && src > t) || (!fwd && src < t)) {
          rc = plan_failf(PLAN_EUNSUPPORTED,
                          "'%s' flows from stage %d to stage %d, against "
                          "the pipeline's direction",
                          tensor_of(c, b), src, t);
          break;
        }
        /* a new buffer of the same tensor and placement */
        if (l->nbufs == l->cap_bufs) {
          int nc = l->cap_bufs ? 2 * l->cap_bufs : 64;
          plan_lbuf *nb = realloc(l->bufs, sizeof *nb * (size_t)nc);
          if (!nb) {
            rc = plan_oom();
            break;
          }
          l->bufs = nb;
          l->cap_bufs = nc;
        }
        l->bufs[l->nbufs] = l->bufs[b];
        xs[nx++] = (xfer){b, t, l->nbufs++};
        plan_lstep *x = &steps[ns];
        memset(x, 0, sizeof *x);
        x->kind = PLAN_LSTEP_TRANSFER;
        x->op = -1;
        x->nin = x->nout = 1;
        x->in = plan_arena_alloc(&l->arena, sizeof(int));
        x->out = plan_arena_alloc(&l->arena, sizeof(int));
        if (!x->in || !x->out) {
          rc = plan_oom();
          break;
        }
        x->in[0] = b;
        x->out[0] = xs[k].copy;
        stage[ns] = t;
        from[ns] = src;
        phase[ns] = fwd ? PLAN_LPHASE_RECV_F : PLAN_LPHASE_RECV_B;
        ns++;
        /* stages on one rank (the turn of a V) hand over in place */
        if (plan_schedule_stage_rank(pp->schedule, src) ==
            plan_schedule_stage_rank(pp->schedule, t))
          pp->local_transfers++;
        else
          pp->transfers++;
      }
      s->in[j] = xs[k].copy;
    }
    steps[ns] = *s;
    stage[ns] = pp->stage[i];
    from[ns] = -1;
    phase[ns] = pp->phase[i];
    ns++;
  }
  if (rc) {
    free(steps), free(stage), free(from), free(phase), free(xs);
    return rc;
  }
  free(l->steps);
  free(pp->stage);
  free(pp->phase);
  free(pp->from_stage);
  free(xs);
  l->steps = steps;
  l->nsteps = ns;
  l->cap_steps = cap;
  pp->stage = stage;
  pp->phase = phase;
  pp->from_stage = from;
  return PLAN_OK;
}

static int place_steps(const plan_plan *p, plan_lowered *l) {
  plan_lpipe *pp = l->pipe;
  sctx c = {p, l, pp, NULL};
  size_t n = (size_t)l->nsteps + 1;
  pp->stage = malloc(n * sizeof(int));
  pp->phase = malloc(n);
  pp->from_stage = malloc(n * sizeof(int));
  c.writer = malloc(((size_t)l->nbufs + 1) * sizeof(int));
  if (!pp->stage || !pp->phase || !pp->from_stage || !c.writer) {
    free(c.writer);
    return plan_oom();
  }
  for (int b = 0; b < l->nbufs; b++)
    c.writer[b] = -1;
  int rc = PLAN_OK;
  for (int i = 0; i < l->nsteps && !rc; i++) {
    rc = place_step(&c, i);
    for (int k = 0; k < l->steps[i].nout; k++)
      c.writer[l->steps[i].out[k]] = i;
  }
  if (!rc)
    rc = insert_transfers(&c);
  if (!rc)
    rc = plan_lowered_renumber(l, NULL); /* a transfer's buffer was made last */
  free(c.writer);
  return rc;
}

int plan_lower_pipeline(plan_lowered **out, const plan_plan *p) {
  *out = NULL;
  if (p->pipeline.axis < 0)
    return plan_fail(PLAN_EUNSUPPORTED, p->file, p->pipeline.pos.line,
                     p->pipeline.pos.col,
                     "pipeline: lowering stages on submeshes is not "
                     "available yet; use a pipeline axis");
  plan_lpipe *pp = calloc(1, sizeof *pp);
  if (!pp)
    return plan_oom();
  pp->axis = p->pipeline.axis;
  pp->microbatches =
      p->pipeline.microbatches > 0 ? p->pipeline.microbatches : 1;
  pp->nstages = p->pipeline.nstages;
  int rc = plan_schedule_from_plan(&pp->schedule, p);
  if (!rc)
    rc = microbatch_plan(&pp->xplan, p);
  plan_lowered *l = NULL;
  if (!rc && p->training.present) {
    rc = plan_lower_train_mb(&l, pp->xplan, pp->axis);
  } else if (!rc) {
    l = calloc(1, sizeof *l);
    if (!l) {
      rc = plan_oom();
    } else {
      l->plan = pp->xplan;
      plan_arena_init(&l->arena);
      rc = plan_lower_steps(l);
    }
  }
  if (l)
    l->pipe = pp;
  else
    plan_lpipe_free(pp);
  if (!rc)
    rc = place_steps(p, l);
  if (rc) {
    plan_lowered_free(l);
    return rc;
  }
  *out = l;
  return PLAN_OK;
}
