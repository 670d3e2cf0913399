/* Lowering a plan to SPMD steps; see lower.h. Each tensor lives in the
 * buffers of the placements it is needed in; where an op's strategy needs
 * an input in a placement no buffer has yet, the redistribution planner's
 * steps make one (from the placement the tensor was produced in). */
#include "lower/lower.h"

#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "ir/placement.h"
#include "read/program_read.h"
#include "lower/trace_record.h"

static int new_buf(plan_lowered *l, int tensor, const plan_placement *pl) {
  if (plan_grow((void **)&l->bufs, &l->cap_bufs, l->nbufs + 1,
                sizeof(plan_lbuf)))
    return -1;
  l->bufs[l->nbufs].tensor = tensor;
  l->bufs[l->nbufs].pl = *pl;
  return l->nbufs++;
}

static plan_lstep *new_step(plan_lowered *l, plan_lstep_kind kind, int nin,
                            int nout) {
  if (plan_grow((void **)&l->steps, &l->cap_steps, l->nsteps + 1,
                sizeof(plan_lstep)))
    return NULL;
  plan_lstep *s = &l->steps[l->nsteps];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->op = -1;
  s->origin_op = s->origin_in = s->origin_out = -1;
  s->nin = nin;
  s->nout = nout;
  s->in = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(nin + 1));
  s->out = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(nout + 1));
  if (!s->in || !s->out) {
    plan_oom();
    return NULL;
  }
  l->nsteps++;
  return s;
}

/* The buffers that hold each tensor, newest last (a short list: a tensor is
 * rarely needed in more than a few placements). */
typedef struct holders {
  int *first; /* per tensor: head of its list in next[], -1 */
  int *next;  /* per buffer */
  int cap;
} holders;

static int find_holder(const plan_lowered *l, const holders *h, int tensor,
                       const plan_placement *pl) {
  for (int b = h->first[tensor]; b >= 0; b = h->next[b])
    if (plan_placement_equal(&l->bufs[b].pl, pl))
      return b;
  return -1;
}

static int add_holder(plan_lowered *l, holders *h, int tensor,
                      const plan_placement *pl) {
  int b = new_buf(l, tensor, pl);
  if (b < 0)
    return -1;
  if (plan_grow((void **)&h->next, &h->cap, b + 1, sizeof(int)))
    return -1;
  h->next[b] = h->first[tensor];
  h->first[tensor] = b;
  return b;
}

/* A buffer of `tensor` in placement `want`: an existing one, or one made by
 * redistributing from `from` (the buffer the tensor was produced in). */
static int buffer_in_from(plan_lowered *l, holders *h, int tensor, int from,
                          const plan_placement *want, int oop, int oin,
                          int oout) {
  int b = find_holder(l, h, tensor, want);
  if (b >= 0)
    return b;
  const plan_plan *p = l->plan;
  const plan_tensor *t = &p->program->tensors[tensor];
  plan_redist_plan rp;
  char err[256];
  if (plan_redistribute_r(&rp, t->dims, t->rank, plan_dtype_size(t->dtype),
                          p->mesh.axis_sizes, p->mesh.naxes, p->mesh.ratios,
                          p->mesh.nratios, &l->bufs[from].pl, want, err,
                          sizeof err))
    return plan_failf(PLAN_EINVALID, "tensor '%s': %s", t->name, err), -1;
  int cur = from;
  for (int i = 0; i < rp.nsteps; i++) {
    /* every intermediate placement gets a buffer (reused when it exists) */
    int next = find_holder(l, h, tensor, &rp.steps[i].after);
    if (next < 0 && (next = add_holder(l, h, tensor, &rp.steps[i].after)) < 0)
      return -1;
    plan_lstep *s = new_step(l, PLAN_LSTEP_REDIST, 1, 1);
    if (!s)
      return -1;
    s->in[0] = cur;
    s->out[0] = next;
    s->redist = rp.steps[i];
    s->origin_op = oop;
    s->origin_in = oin;
    s->origin_out = oout;
    l->collectives[rp.steps[i].kind]++;
    cur = next;
  }
  return cur;
}

static int buffer_in(plan_lowered *l, holders *h, int tensor, int from,
                     const plan_placement *want) {
  return buffer_in_from(l, h, tensor, from, want, -1, -1, -1);
}

/* Manual region r, where its first op was: the records of its trace in
 * order. Inputs enter in their boundary placements, each traced op and
 * collective is a step on the handles' buffers, and each output's buffer
 * is relabelled as the region's output tensor. */
static int lower_region(plan_lowered *l, holders *h, int region) {
  const plan_trace *t = l->trace;
  const plan_program *prog = l->plan->program;
  int *buf = malloc(sizeof(int) * ((size_t)t->nh + 1));
  if (!buf)
    return plan_oom();
  int rc = PLAN_OK;
  for (int i = 0; i < t->nrecs && !rc; i++) {
    const trace_rec *r = &t->recs[i];
    if (r->region != region)
      continue;
    plan_lstep *s;
    int b;
    switch (r->kind) {
    case TRACE_INPUT:
      if (l->produced[r->tensor] < 0) {
        rc = plan_failf(PLAN_EINVALID,
                        "manual region '%s': its input '%s' is made after "
                        "the region's first op",
                        l->trace->p->regions[region].name,
                        prog->tensors[r->tensor].name);
        break;
      }
      b = buffer_in(l, h, r->tensor, l->produced[r->tensor],
                    &t->h_pl[r->out[0]]);
      if (b < 0)
        rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
      else
        buf[r->out[0]] = b;
      break;
    case TRACE_OP:
      s = new_step(l, PLAN_LSTEP_OP, r->nin, r->nout);
      if (!s) {
        rc = plan_oom();
        break;
      }
      s->op = r->op;
      for (int j = 0; j < r->nin; j++)
        s->in[j] = buf[r->in[j]];
      for (int k = 0; k < r->nout && !rc; k++) {
        int hk = r->out[k];
        b = add_holder(l, h, t->h_tensor[hk], &t->h_pl[hk]);
        if (b < 0) {
          rc = plan_oom();
          break;
        }
        l->steps[l->nsteps - 1].out[k] = buf[hk] = b;
        l->produced[t->h_tensor[hk]] = b;
      }
      break;
    case TRACE_COLLECTIVE:
    case TRACE_OUTPUT:
      b = r->kind == TRACE_OUTPUT
              ? add_holder(l, h, r->tensor, &t->h_pl[r->in[0]])
              : add_holder(l, h, t->h_tensor[r->out[0]], &t->h_pl[r->out[0]]);
      s = b < 0 ? NULL : new_step(l, PLAN_LSTEP_REDIST, 1, 1);
      if (!s) {
        rc = plan_oom();
        break;
      }
      s->in[0] = buf[r->in[0]];
      s->out[0] = b;
      if (r->kind == TRACE_COLLECTIVE) {
        s->redist = r->step;
        buf[r->out[0]] = b;
      } else { /* the traced value becomes the region's output tensor */
        memset(&s->redist, 0, sizeof s->redist);
        s->redist.kind = PLAN_REDIST_RELABEL;
        s->redist.axis = 0;
        s->redist.dim = s->redist.to_dim = -1;
        s->redist.before = s->redist.after = t->h_pl[r->in[0]];
        l->produced[r->tensor] = b;
      }
      l->collectives[s->redist.kind]++;
      break;
    }
  }
  free(buf);
  return rc;
}

/* The manual region op i belongs to, or -1. */
static int region_of(const plan_lowered *l, int i) {
  const plan_plan *p = l->trace->p;
  for (int r = 0; r < p->nregions; r++)
    if (p->regions[r].kind == PLAN_REGION_MANUAL && p->regions[r].ops &&
        p->regions[r].ops[i])
      return r;
  return -1;
}

/* The steps of l->plan (forward ops, or a training program as one): its
 * leaves in their storage placements, its ops in program order with the
 * redistributions their strategies need, its outputs as the plan delivers
 * them. */
int plan_lower_steps(plan_lowered *l) {
  const plan_plan *p = l->plan;
  const plan_program *prog = p->program;
  holders h = {NULL, NULL, 0};
  bool *region_done = NULL;
  int rc = PLAN_OK;
  l->produced = calloc((size_t)prog->ntensors + 1, sizeof(int));
  l->delivered = calloc((size_t)prog->noutputs + 1, sizeof(int));
  l->required = calloc((size_t)prog->noutputs + 1, sizeof(plan_placement));
  l->grad_of = malloc(sizeof(int) * ((size_t)prog->noutputs + 1));
  h.first = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  if (!l->produced || !l->delivered || !l->required || !l->grad_of ||
      !h.first) {
    rc = plan_oom();
    goto done;
  }
  for (int t = 0; t < prog->ntensors; t++) {
    l->produced[t] = -1;
    h.first[t] = -1;
  }
  /* leaves: one INPUT step each, in their storage placement */
  for (int t = 0; t < prog->ntensors; t++) {
    if (prog->tensors[t].producer >= 0)
      continue;
    plan_placement pl;
    if (p->placements[t].set)
      pl = p->placements[t].pl;
    else
      plan_placement_replicated(&pl, p->mesh.naxes);
    int b = add_holder(l, &h, t, &pl);
    plan_lstep *s = b < 0 ? NULL : new_step(l, PLAN_LSTEP_INPUT, 0, 1);
    if (!s) {
      rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
      goto done;
    }
    s->out[0] = b;
    l->produced[t] = b;
  }
  /* ops in topological order; a manual region's trace where its first op
   * was, the traced ops with it */
  region_done =
      l->trace ? calloc((size_t)l->trace->p->nregions + 1, sizeof(bool)) : NULL;
  if (l->trace && !region_done) {
    rc = plan_oom();
    goto done;
  }
  for (int i = 0; i < prog->nops; i++) {
    if (l->trace && i >= l->trace->norig_ops)
      break;
    int reg = l->trace ? region_of(l, i) : -1;
    if (reg >= 0) {
      if (!region_done[reg] && (rc = lower_region(l, &h, reg)))
        goto done;
      region_done[reg] = true;
      continue;
    }
    const plan_op *op = &prog->ops[i];
    const plan_strategy *st = &p->strategies[i];
    int ins[PLAN_MAX_OPERANDS];
    for (int j = 0; j < op->nin; j++) {
      int t = op->in[j];
      if ((ins[j] = buffer_in_from(l, &h, t, l->produced[t], &st->in[j], i, j,
                                   -1)) < 0) {
        rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
        goto done;
      }
    }
    plan_lstep *s = new_step(l, PLAN_LSTEP_OP, op->nin, op->nout);
    if (!s) {
      rc = plan_oom();
      goto done;
    }
    s->op = i;
    memcpy(s->in, ins, sizeof(int) * (size_t)op->nin);
    for (int k = 0; k < op->nout; k++) {
      int b = add_holder(l, &h, op->out[k], &st->out[k]);
      if (b < 0) {
        rc = plan_oom();
        goto done;
      }
      l->steps[l->nsteps - 1].out[k] = b;
      l->produced[op->out[k]] = b;
    }
  }
  /* outputs in the placement the plan delivers them in */
  for (int k = 0; k < prog->noutputs; k++) {
    int t = prog->outputs[k];
    plan_placement pl;
    if (p->out_pl[k].set)
      pl = p->out_pl[k].pl;
    else
      plan_placement_replicated(&pl, p->mesh.naxes);
    l->required[k] = pl; /* the contract the verifier checks */
    l->grad_of[k] = -1;
    if ((l->delivered[k] =
             buffer_in_from(l, &h, t, l->produced[t], &pl, -1, -1, k)) < 0) {
      rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
      goto done;
    }
  }
  for (int i = 0; l->train && i < l->train->nparams; i++)
    l->grad_of[l->train->grad_out[i]] = l->train->param[i];
done:
  free(region_done);
  free(h.first);
  free(h.next);
  return rc;
}

int plan_lower(plan_lowered **out, const plan_plan *p) {
  return plan_lower_traced(out, p, NULL, NULL);
}

/* The manual regions of p as the lowered program records them: each
 * region's traced ops (a range: regions are traced one after the other),
 * the ops it replaces, and its body's hash. */
static int lowered_regions(plan_lowered *l, const plan_plan *p,
                           const plan_trace *t) {
  l->ref_plan = p;
  l->regions = plan_arena_alloc(&l->arena, sizeof(plan_lregion) *
                                               ((size_t)p->nregions + 1));
  if (!l->regions)
    return plan_oom();
  for (int r = 0; r < p->nregions; r++) {
    const plan_region *reg = &p->regions[r];
    if (reg->kind != PLAN_REGION_MANUAL)
      continue;
    plan_lregion *lr = &l->regions[l->nregions++];
    memset(lr, 0, sizeof *lr);
    lr->name = reg->name;
    lr->body_hash = plan_lowered_body_hash(reg->body ? reg->body : "");
    lr->op_begin = lr->op_end = -1;
    for (int i = 0; i < t->nrecs; i++)
      if (t->recs[i].region == r && t->recs[i].kind == TRACE_OP) {
        if (lr->op_begin < 0)
          lr->op_begin = t->recs[i].op;
        lr->op_end = t->recs[i].op + 1;
      }
    if (lr->op_begin < 0)
      lr->op_begin = lr->op_end = l->norig_ops;
    lr->replaces = plan_arena_alloc(
        &l->arena, sizeof(int) * ((size_t)p->program->nops + 1));
    if (!lr->replaces)
      return plan_oom();
    for (int i = 0; i < p->program->nops; i++)
      if (reg->ops[i])
        lr->replaces[lr->nreplaces++] = i;
  }
  return PLAN_OK;
}

/* A plan of the traced program: p's placements, strategies and outputs
 * (the traced ops need none: their trace says where they run). */
static int traced_plan(plan_lowered *l, const plan_plan *p, plan_trace *t) {
  plan_plan *tp = calloc(1, sizeof *tp);
  if (!tp)
    return plan_oom();
  plan_arena_init(&tp->arena);
  l->own_plan = tp;
  l->plan = tp;
  tp->program = t->ad.p; /* taken from the trace */
  t->ad.p = NULL;
  tp->program_inline = true;
  tp->pipeline.axis = -1;
  tp->file = p->file;
  tp->version_major = p->version_major;
  tp->version_minor = p->version_minor;
  tp->mesh = p->mesh; /* borrowed from p, which outlives l */
  tp->has_mesh = true;
  tp->mesh_pos = p->mesh_pos;
  const plan_program *prog = tp->program;
  size_t nt = (size_t)prog->ntensors + 1, no = (size_t)prog->nops + 1;
  tp->placements = plan_arena_alloc(&tp->arena, sizeof(plan_tensor_pl) * nt);
  tp->strategies = plan_arena_alloc(&tp->arena, sizeof(plan_strategy) * no);
  tp->out_pl = plan_arena_alloc(&tp->arena, sizeof(plan_tensor_pl) *
                                                ((size_t)prog->noutputs + 1));
  if (!tp->placements || !tp->strategies || !tp->out_pl)
    return plan_oom();
  memset(tp->placements, 0, sizeof(plan_tensor_pl) * nt);
  memset(tp->strategies, 0, sizeof(plan_strategy) * no);
  memcpy(tp->placements, p->placements,
         sizeof(plan_tensor_pl) * (size_t)p->program->ntensors);
  memcpy(tp->strategies, p->strategies,
         sizeof(plan_strategy) * (size_t)p->program->nops);
  memcpy(tp->out_pl, p->out_pl,
         sizeof(plan_tensor_pl) * (size_t)prog->noutputs);
  l->norig_ops = t->norig_ops;
  l->norig_tensors = t->norig_tensors;
  return lowered_regions(l, p, t);
}

int plan_lower_traced(plan_lowered **out, const plan_plan *p,
                      plan_region_tracer tracer, void *user) {
  int rc = plan_lower_plain(out, p, tracer, user);
  if (rc || !p->noverlap)
    return rc;
  if ((rc = plan_lower_overlap(*out, p, NULL))) {
    plan_lowered_free(*out);
    *out = NULL;
  }
  return rc;
}

int plan_lower_plain(plan_lowered **out, const plan_plan *p,
                     plan_region_tracer tracer, void *user) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_lower: NULL out");
  *out = NULL;
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_lower: a plan with a mesh is needed");
  int manual = -1;
  for (int r = 0; r < p->nregions && manual < 0; r++)
    if (p->regions[r].kind == PLAN_REGION_MANUAL)
      manual = r;
  if (manual >= 0 && (!tracer || p->training.present || p->pipeline.present))
    return plan_failf(
        PLAN_EUNSUPPORTED, "manual region '%s': %s", p->regions[manual].name,
        !tracer               ? "its body runs in a Lua host: `plan verify` "
                                "and the Lua module lower it"
        : p->training.present ? "manual regions in a training step are not "
                                "lowered yet (the body's backward)"
                              : "manual regions in a pipeline are not lowered "
                                "yet");
  const plan_program *prog = p->program;
  for (int i = 0; i < prog->nops; i++)
    if (!p->strategies[i].set)
      return plan_failf(PLAN_EINVALID, "op '%s' has no strategy",
                        prog->ops[i].name);
  if (p->pipeline.present)
    return plan_lower_pipeline(out, p);
  if (p->training.present)
    return plan_lower_train(out, p);
  plan_lowered *l = calloc(1, sizeof *l);
  if (!l)
    return plan_oom();
  l->plan = p;
  plan_arena_init(&l->arena);
  plan_trace *t = NULL;
  int rc = PLAN_OK;
  if (manual >= 0 && !(rc = plan_trace_run(&t, p, tracer, user)))
    rc = traced_plan(l, p, t);
  l->trace = t;
  if (!rc)
    rc = plan_lower_steps(l);
  l->trace = NULL;
  plan_trace_free(t);
  if (rc) {
    plan_lowered_free(l);
    return rc;
  }
  *out = l;
  return PLAN_OK;
}

void plan_lowered_free(plan_lowered *l) {
  if (!l)
    return;
  plan_free(l->own_plan);
  plan_free(l->own_ref); /* after own_plan: its mesh is own_ref's */
  plan_ltrain_free(l->train);
  plan_lpipe_free(l->pipe); /* after own_plan: its mesh is the pipe's */
  free(l->bufs);
  free(l->steps);
  free(l->produced);
  free(l->delivered);
  free(l->required);
  free(l->grad_of);
  plan_arena_free(&l->arena);
  free(l);
}
