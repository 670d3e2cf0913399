/* The cost of a whole plan: every op, the redistributions lowering inserts
 * (found the way plan_lower finds them), gradient synchronisation, the
 * optimizer, a pipeline's transfers and schedule, and memory per device
 * (docs/cost.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_device.h"
#include "cost/cost_model.h"
#include "libplan/schedule.h"
#include "ir/placement.h"
#include "schedule/schedule_actions.h"

/* Per stage (one row without a pipeline), per microbatch. */
typedef struct stage_acc {
  double fwd, bwd, rec, wgt; /* compute */
  double comm_f, comm_b;     /* redistributions (backward: their mirror) */
  double p2p_f, p2p_b;       /* stage transfers */
  double sync, opt;          /* per step */
  /* memory, bytes per device */
  double params, grads, optstate, saved, work, live, live_peak, recseg;
} stage_acc;

/* The placements each tensor is held in, as lowering keeps them. */
typedef struct holders {
  int *first; /* per tensor */
  struct hnode {
    plan_placement pl;
    int next;
  } * nodes;
  int n, cap;
} holders;

typedef struct ctx {
  const plan_cost_model *m;
  const plan_plan *p;
  plan_cost_report *r;
  stage_acc *st;
  int nst;
  double split; /* microbatches of a pipeline, else 1 */
  holders h;
  int *sent_first; /* per tensor: head of its (stage) list in sent_nodes */
  int *sent_nodes; /* pairs (stage, next) */
  int nsent, cap_sent;
  int *first_use;      /* per tensor: its first consumer, -1 */
  unsigned *sync_mask; /* per param: axes its gradient is partial along */
  /* the memory of one logical rank: its mesh coordinates, so every tensor
   * counts that rank's own piece (ratios included); NULL: torch.chunk's
   * largest piece. memory_only: a pass that counts bytes and prices
   * nothing (device_memory's per-rank passes). */
  const int64_t *coord;
  bool memory_only;
  const double *inflight; /* per stage: microbatches held (totals) */
} ctx;

static bool held(const holders *h, int t, const plan_placement *pl) {
  for (int i = h->first[t]; i >= 0; i = h->nodes[i].next)
    if (plan_placement_equal(&h->nodes[i].pl, pl))
      return true;
  return false;
}

static int hold(holders *h, int t, const plan_placement *pl) {
  if (held(h, t, pl))
    return PLAN_OK;
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 256;
    struct hnode *n = realloc(h->nodes, sizeof *n * (size_t)cap);
    if (!n)
      return plan_oom();
    h->nodes = n;
    h->cap = cap;
  }
  h->nodes[h->n].pl = *pl;
  h->nodes[h->n].next = h->first[t];
  h->first[t] = h->n++;
  return PLAN_OK;
}

static int op_stage(const plan_plan *p, int op, int nst) {
  if (!p->pipeline.present || !p->pipeline.op_stage)
    return 0;
  int s = p->pipeline.op_stage[op];
  return s >= 0 && s < nst ? s : 0;
}

static plan_placement storage_pl(const plan_plan *p, int t) {
  plan_placement pl;
  if (p->placements[t].set)
    pl = p->placements[t].pl;
  else
    plan_placement_replicated(&pl, p->mesh.naxes);
  return pl;
}

/* The placement a tensor is produced in. */
static plan_placement produced_pl(const plan_plan *p, int t) {
  const plan_tensor *x = &p->program->tensors[t];
  if (x->producer < 0)
    return storage_pl(p, t);
  return p->strategies[x->producer].out[x->producer_slot];
}

/* Elements of tensor x under pl on c's rank (c->coord), or torch.chunk's
 * largest piece. */
static double ctx_numel(const ctx *c, const plan_tensor *x,
                        const plan_placement *pl) {
  const plan_plan *p = c->p;
  if (!c->coord)
    return plan_cost_local_numel(x, pl, p->mesh.axis_sizes);
  double n = 1;
  for (int d = 0; d < x->rank; d++) {
    int64_t off, len;
    plan_placement_dim_range_r(pl, d, x->dims[d], p->mesh.axis_sizes, c->coord,
                               p->mesh.ratios, p->mesh.nratios, &off, &len);
    n *= (double)len;
  }
  return n;
}

static double tensor_bytes(const ctx *c, int t, const plan_placement *pl) {
  const plan_plan *p = c->p;
  return ctx_numel(c, &p->program->tensors[t], pl) *
         plan_dtype_size(plan_cost_tensor_dtype(p, t));
}

static const char *dup(ctx *c, const char *s) {
  const char *d = plan_arena_strdup(&c->r->arena, s ? s : "");
  return d;
}

static int add_coll(ctx *c, const char *phase, int tensor, int kind, int axis,
                    const plan_placement *from, const plan_placement *to,
                    const cost_step_eval *e, double calls) {
  plan_cost_report *r = c->r;
  if (r->ncolls == r->cap_colls) {
    int cap = r->cap_colls ? 2 * r->cap_colls : 64;
    plan_cost_collective_info *n = realloc(r->colls, sizeof *n * (size_t)cap);
    if (!n)
      return plan_oom();
    r->colls = n;
    r->cap_colls = cap;
  }
  plan_cost_collective_info *ci = &r->colls[r->ncolls];
  memset(ci, 0, sizeof *ci);
  char a[PLAN_PLACEMENT_STRLEN], b[PLAN_PLACEMENT_STRLEN];
  ci->phase = phase;
  ci->tensor = dup(c, c->p->program->tensors[tensor].name);
  ci->kind = kind == COST_COLL_SEND
                 ? "send"
                 : plan_redist_kind_name((plan_redist_kind)kind);
  /* copied: the report outlives the model it was priced with */
  ci->axis = axis >= 0 ? dup(c, c->m->axis_names[axis]) : "";
  ci->from = from ? dup(c, plan_placement_format(from, a)) : "";
  ci->to = to ? dup(c, plan_placement_format(to, b)) : "";
  if (!ci->tensor || !ci->axis || !ci->from || !ci->to)
    return plan_oom();
  ci->group = axis >= 0 ? c->m->axis_sizes[axis] : 2;
  static const char *const links[] = {"intra_host", "inter_host", "axis"};
  ci->link = e->link >= 0 && e->link <= 2 ? links[e->link]
             : e->link == COST_LINK_TOPO && axis >= 0
                 ? dup(c, c->m->taxis[axis].label)
             : e->link == -2 ? "calibrated"
                             : "local";
  if (!ci->link)
    return plan_oom();
  ci->algorithm = plan_cost_alg_names[e->algorithm];
  ci->bytes = e->bytes;
  ci->calls = calls;
  ci->seconds = e->seconds * calls;
  r->ncolls++;
  return PLAN_OK;
}

/* Prices the redistribution of tensor t into `want` for a consumer on
 * stage s (as lowering inserts it: from the placement it was produced in,
 * every intermediate placement then held too). Adds the forward time (per
 * microbatch) to *acc. */
static int redistribute(ctx *c, int t, const plan_placement *want,
                        const char *phase, double *acc) {
  if (held(&c->h, t, want))
    return PLAN_OK;
  const plan_plan *p = c->p;
  const plan_tensor *x = &p->program->tensors[t];
  plan_placement from = produced_pl(p, t);
  int esize = plan_dtype_size(plan_cost_tensor_dtype(p, t));
  plan_redist_plan rp;
  char err[200];
  if (plan_redistribute(&rp, x->dims, x->rank, esize, p->mesh.axis_sizes,
                        p->mesh.naxes, &from, want, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "tensor '%s': %s", x->name, err);
  /* parameters are moved whole for every microbatch */
  bool whole = x->role == PLAN_ROLE_PARAM || x->role == PLAN_ROLE_CONST;
  for (int i = 0; i < rp.nsteps; i++) {
    const plan_redist_step *step = &rp.steps[i];
    cost_step_eval e;
    plan_cost_step_eval_at(&e, c->m, x, esize, step, whole ? 1 : c->split);
    *acc += e.seconds;
    int rc = add_coll(c, phase, t, step->kind, step->axis, &step->before,
                      &step->after, &e, c->split);
    if (rc || (rc = hold(&c->h, t, &step->after)))
      return rc;
  }
  return PLAN_OK;
}

/* A tensor produced on stage ps and consumed on stage s: one send per
 * microbatch forward (and its gradient back when training), once per
 * pair of stages. */
static int stage_transfer(ctx *c, int t, int ps, int s) {
  if (ps == s)
    return PLAN_OK;
  /* two stages on one rank (the turn of a V): nothing is sent */
  const plan_pipeline *pipe = &c->p->pipeline;
  if (pipe->axis >= 0 && pipe->axis < c->m->naxes) {
    int R = (int)c->m->axis_sizes[pipe->axis];
    if (plan_schedule_kind_stage_rank(pipe->schedule, R, ps) ==
        plan_schedule_kind_stage_rank(pipe->schedule, R, s))
      return PLAN_OK;
  }
  for (int i = c->sent_first[t]; i >= 0; i = c->sent_nodes[2 * i + 1])
    if (c->sent_nodes[2 * i] == s)
      return PLAN_OK;
  if (c->nsent == c->cap_sent) {
    int cap = c->cap_sent ? 2 * c->cap_sent : 64;
    int *n = realloc(c->sent_nodes, sizeof(int) * 2 * (size_t)cap);
    if (!n)
      return plan_oom();
    c->sent_nodes = n;
    c->cap_sent = cap;
  }
  c->sent_nodes[2 * c->nsent] = s;
  c->sent_nodes[2 * c->nsent + 1] = c->sent_first[t];
  c->sent_first[t] = c->nsent++;
  plan_placement pl = produced_pl(c->p, t);
  const plan_tensor *x = &c->p->program->tensors[t];
  bool whole = x->role == PLAN_ROLE_PARAM || x->role == PLAN_ROLE_CONST;
  double bytes = tensor_bytes(c, t, &pl) / (whole ? 1 : c->split);
  cost_step_eval e;
  plan_cost_send_eval(&e, c->m, c->p->pipeline.axis, bytes);
  c->st[ps].p2p_f += e.seconds;
  if (c->r->training)
    c->st[s].p2p_b += e.seconds;
  return add_coll(c, "pipeline", t, COST_COLL_SEND, -1, NULL, NULL, &e,
                  c->split);
}

/* ---- training: which gradients need a sync ------------------------------- */

/* Per param, the axes along which its gradient is a partial sum: it is
 * replicated there, and a consumer computes on blocks split (or partial)
 * along it, so each rank's gradient covers only its part. Bit a for axis
 * a. Also each tensor's first consumer. One pass over the ops. */
static void consumers(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  for (int i = prog->nops - 1; i >= 0; i--) {
    const plan_op *o = &prog->ops[i];
    const plan_strategy *st = &p->strategies[i];
    for (int j = 0; j < o->nin; j++) {
      int t = o->in[j];
      c->first_use[t] = i;
      if (prog->tensors[t].role != PLAN_ROLE_PARAM)
        continue;
      plan_placement sp = storage_pl(p, t);
      unsigned others = 0;
      for (int q = 0; q < o->nin + o->nout; q++) {
        if (q == j)
          continue;
        const plan_placement *pl =
            q < o->nin ? &st->in[q] : &st->out[q - o->nin];
        for (int a = 0; a < p->mesh.naxes; a++)
          if (pl->ax[a].kind != PLAN_PL_R)
            others |= 1u << a;
      }
      for (int a = 0; a < p->mesh.naxes; a++)
        if (sp.ax[a].kind == PLAN_PL_R && p->mesh.axis_sizes[a] > 1 &&
            st->in[j].ax[a].kind == PLAN_PL_R && (others & (1u << a)))
          c->sync_mask[t] |= 1u << a;
    }
  }
}

static int price_steps(ctx *c, const char *phase, int t, int esize,
                       const plan_placement *from, const plan_placement *to,
                       double *acc) {
  const plan_plan *p = c->p;
  const plan_tensor *x = &p->program->tensors[t];
  plan_redist_plan rp;
  char err[200];
  if (plan_placement_equal(from, to))
    return PLAN_OK;
  if (plan_redistribute(&rp, x->dims, x->rank, esize, p->mesh.axis_sizes,
                        p->mesh.naxes, from, to, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "%s of '%s': %s", phase, x->name, err);
  for (int i = 0; i < rp.nsteps; i++) {
    cost_step_eval e;
    plan_cost_step_eval_at(&e, c->m, x, esize, &rp.steps[i], 1);
    *acc += e.seconds;
    int rc = add_coll(c, phase, t, rp.steps[i].kind, rp.steps[i].axis,
                      &rp.steps[i].before, &rp.steps[i].after, &e, 1);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

static int train_params(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  const plan_training *tr = &p->training;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if (x->role != PLAN_ROLE_PARAM || !plan_dtype_is_float(x->dtype))
      continue;
    int op = c->first_use[t];
    if (op < 0)
      continue;
    stage_acc *s = &c->st[op_stage(p, op, c->nst)];
    plan_placement sp = storage_pl(p, t);
    const plan_param_train *pt = tr->params ? &tr->params[t] : NULL;
    int sync = pt ? (int)pt->sync : PLAN_SYNC_AUTO;
    bool rs = sync == PLAN_SYNC_REDUCE_SCATTER && pt && pt->has_state_pl;
    plan_placement state = rs || (pt && pt->has_state_pl) ? pt->state_pl : sp;
    plan_dtype pdt = plan_cost_tensor_dtype(p, t);
    plan_dtype gdt = tr->grad_dtype >= 0 ? (plan_dtype)tr->grad_dtype : pdt;
    double n_param = ctx_numel(c, x, &sp);
    double n_state = ctx_numel(c, x, &state);
    double n_grad = rs ? n_state : n_param;
    int pes = plan_dtype_size(pdt), ges = plan_dtype_size(gdt);
    double master = pdt != PLAN_F32 ? 4 : 0; /* f32 master weights */
    s->grads += n_grad * ges;
    double per = 0;                   /* optimizer state bytes per element */
    double touched = 2.0 * pes + ges; /* read and write p, read g */
    if (tr->optimizer == PLAN_OPT_ADAM) {
      per = 8 + master;
      touched += 16 + 2 * master;
    } else if (tr->optimizer == PLAN_OPT_SGD) {
      per = (tr->momentum != 0 ? 4 : 0) + master;
      touched += (tr->momentum != 0 ? 8 : 0) + 2 * master;
    }
    s->optstate += n_state * per;
    if (c->memory_only)
      continue;
    if (c->m->mem_bw > 0)
      s->opt += n_state * touched / c->m->mem_bw;
    /* gradient synchronisation */
    unsigned axes = sync == PLAN_SYNC_NONE ? 0 : c->sync_mask[t];
    if (!axes)
      continue;
    plan_placement from = sp;
    for (int a = 0; a < p->mesh.naxes; a++)
      if (axes & (1u << a)) {
        from.ax[a].kind = PLAN_PL_P;
        from.ax[a].reduce = PLAN_RED_SUM;
      }
    int rc =
        price_steps(c, "grad_sync", t, ges, &from, rs ? &state : &sp, &s->sync);
    if (!rc && rs)
      rc = price_steps(c, "param_gather", t, pes, &state, &sp, &s->sync);
    if (rc)
      return rc;
  }
  for (int i = 0; i < c->nst; i++)
    if (c->st[i].opt > 0)
      c->st[i].opt += c->m->kernel_floor; /* one fused update per device */
  return PLAN_OK;
}

/* ---- memory -------------------------------------------------------------- */

static void leaf_memory(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if (x->producer >= 0)
      continue;
    int op = c->first_use[t];
    if (op < 0)
      continue;
    stage_acc *s = &c->st[op_stage(p, op, c->nst)];
    plan_placement sp = storage_pl(p, t);
    double b = tensor_bytes(c, t, &sp);
    if (x->role == PLAN_ROLE_PARAM || x->role == PLAN_ROLE_CONST)
      s->params += b;
    else /* inputs: one microbatch's slice per held microbatch */
      s->saved += b / c->split;
  }
}

/* Forward-only plans: the peak of live tensors in topological order,
 * each freed after its last consumer (outputs kept). Per microbatch. */
static int live_memory(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  int *last = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  if (!last)
    return plan_oom();
  for (int t = 0; t < prog->ntensors; t++)
    last[t] = -1;
  for (int i = 0; i < prog->nops; i++)
    for (int j = 0; j < prog->ops[i].nin; j++)
      last[prog->ops[i].in[j]] = i;
  for (int k = 0; k < prog->noutputs; k++)
    last[prog->outputs[k]] = prog->nops;
  /* a view aliases its input: the input lives as long as the view */
  for (int i = prog->nops - 1; i >= 0; i--) {
    const plan_op *o = &prog->ops[i];
    if (c->m->kclass[o->kind] != COST_CLASS_VIEW || o->nin < 1)
      continue;
    for (int k = 0; k < o->nout; k++)
      if (last[o->out[k]] > last[o->in[0]])
        last[o->in[0]] = last[o->out[k]];
  }
  /* input leaves are live from the start */
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if (x->producer < 0 && x->role == PLAN_ROLE_INPUT && last[t] >= 0) {
      plan_placement sp = storage_pl(p, t);
      stage_acc *s = &c->st[op_stage(p, c->first_use[t], c->nst)];
      s->live += tensor_bytes(c, t, &sp) / c->split;
    }
  }
  for (int s = 0; s < c->nst; s++)
    c->st[s].live_peak = c->st[s].live;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *o = &prog->ops[i];
    stage_acc *s = &c->st[op_stage(p, i, c->nst)];
    bool view = c->m->kclass[o->kind] == COST_CLASS_VIEW;
    for (int k = 0; k < o->nout && !view; k++)
      s->live +=
          tensor_bytes(c, o->out[k], &p->strategies[i].out[k]) / c->split;
    if (s->live > s->live_peak)
      s->live_peak = s->live;
    /* free what dies here: inputs last used here, outputs never used */
    for (int j = 0; j < o->nin; j++) {
      int t = o->in[j];
      const plan_tensor *x = &prog->tensors[t];
      if (last[t] != i || x->role == PLAN_ROLE_PARAM ||
          x->role == PLAN_ROLE_CONST)
        continue;
      if (x->producer >= 0 &&
          c->m->kclass[prog->ops[x->producer].kind] == COST_CLASS_VIEW)
        continue;   /* freed with the tensor it views */
      last[t] = -2; /* freed once even when an op reads it twice */
      plan_placement pl = produced_pl(p, t);
      stage_acc *ps =
          x->producer >= 0 ? &c->st[op_stage(p, x->producer, c->nst)] : s;
      ps->live -= tensor_bytes(c, t, &pl) / c->split;
    }
    for (int k = 0; k < o->nout && !view; k++)
      if (last[o->out[k]] < 0)
        s->live -=
            tensor_bytes(c, o->out[k], &p->strategies[i].out[k]) / c->split;
  }
  free(last);
  return PLAN_OK;
}

/* Training: activations saved for backward (op outputs, net of
 * recomputation) and the largest working set. Per microbatch. */
static void saved_memory(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  const bool *rec = p->training.recompute;
  int prev_stage = -1;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *o = &prog->ops[i];
    const plan_strategy *st = &p->strategies[i];
    int si = op_stage(p, i, c->nst);
    stage_acc *s = &c->st[si];
    if (c->m->kclass[o->kind] == COST_CLASS_VIEW)
      continue;
    double outb = 0, inb = 0;
    for (int k = 0; k < o->nout; k++)
      outb += tensor_bytes(c, o->out[k], &st->out[k]) / c->split;
    for (int j = 0; j < o->nin; j++) {
      const plan_tensor *x = &prog->tensors[o->in[j]];
      if (x->role != PLAN_ROLE_PARAM && x->role != PLAN_ROLE_CONST)
        inb += tensor_bytes(c, o->in[j], &st->in[j]) / c->split;
    }
    /* while its backward runs: the gradients of its activations, in and
     * out (parameter gradients are counted apart) */
    if (inb + outb > s->work)
      s->work = inb + outb;
    if (rec && rec[i]) {
      /* a run of recomputed ops is rebuilt at once during backward */
      if (prev_stage != si)
        s->recseg = 0;
      s->recseg += outb;
      if (s->recseg > s->work)
        s->work = s->recseg;
      prev_stage = si;
    } else {
      s->saved += outb;
      s->recseg = 0;
      prev_stage = -1;
    }
  }
}

/* ---- the whole plan ------------------------------------------------------ */

static int check_plan(const plan_cost_model *m, const plan_plan *p) {
  if (!p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_cost_plan: the plan has no mesh");
  if (p->program->nops != m->nops || p->program->ntensors != m->ntensors ||
      p->mesh.naxes != m->naxes)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_plan: the model was made for another program "
                      "or mesh");
  for (int a = 0; a < m->naxes; a++)
    if (p->mesh.axis_sizes[a] != m->axis_sizes[a])
      return plan_failf(PLAN_EUSAGE, "plan_cost_plan: the model was made for "
                                     "another mesh");
  for (int i = 0; i < p->program->nops; i++)
    if (!p->strategies[i].set)
      return plan_fail(PLAN_EINVALID, p->file, p->program->ops[i].pos.line,
                       p->program->ops[i].pos.col, "op '%s' has no strategy",
                       p->program->ops[i].name);
  return PLAN_OK;
}

static int describe(ctx *c) {
  plan_cost_report *r = c->r;
  const plan_plan *p = c->p;
  const plan_cost_model *m = c->m;
  plan_buf b;
  plan_buf_init(&b);
  for (int a = 0; a < m->naxes; a++)
    plan_buf_printf(&b, "%s%s=%lld", a ? " x " : "", m->axis_names[a],
                    (long long)m->axis_sizes[a]);
  r->mesh = dup(c, plan_buf_cstr(&b));
  plan_buf_reset(&b);
  static const char *const links[] = {"intra_host", "inter_host", "axis"};
  for (int a = 0; a < m->naxes; a++)
    plan_buf_printf(&b, "%s%s: %s", a ? ", " : "", m->axis_names[a],
                    m->axis_sizes[a] < 2 ? "none"
                    : m->link[a].source == COST_LINK_TOPO
                        ? m->taxis[a].label
                        : links[m->link[a].source]);
  r->axis_links = dup(c, plan_buf_cstr(&b));
  bool failed = b.failed;
  plan_buf_free(&b);
  r->file = dup(c, p->file ? p->file : "");
  r->hardware = dup(c, m->hw_name);
  r->program = dup(c, p->program->name ? p->program->name : "");
  r->devices = m->ndevices;
  r->hosts = m->hosts;
  r->devices_per_host = m->devices_per_host;
  r->training = p->training.present;
  r->optimizer = !r->training                             ? ""
                 : p->training.optimizer == PLAN_OPT_ADAM ? "adam"
                 : p->training.optimizer == PLAN_OPT_SGD  ? "sgd"
                                                          : "none";
  r->pipeline = c->nst > 1 || p->pipeline.present;
  r->schedule =
      r->pipeline ? plan_schedule_kind_name(p->pipeline.schedule) : "";
  r->microbatches = r->pipeline ? p->pipeline.microbatches : 1;
  r->nstages = r->pipeline ? c->nst : 0;
  if (failed || !r->mesh || !r->axis_links || !r->file || !r->hardware ||
      !r->program)
    return plan_oom();
  return PLAN_OK;
}

static int ops_and_redists(ctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = p->program;
  plan_cost_report *r = c->r;
  bool train = r->training;
  for (int t = 0; t < prog->ntensors; t++) {
    plan_placement pl = produced_pl(p, t);
    if (prog->tensors[t].producer < 0) {
      int rc = hold(&c->h, t, &pl);
      if (rc)
        return rc;
    }
  }
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *o = &prog->ops[i];
    const plan_strategy *st = &p->strategies[i];
    int si = op_stage(p, i, c->nst);
    stage_acc *s = &c->st[si];
    int rc;
    for (int j = 0; j < o->nin; j++) {
      int t = o->in[j];
      const plan_tensor *x = &prog->tensors[t];
      if (r->pipeline && x->producer >= 0 &&
          (rc = stage_transfer(c, t, op_stage(p, x->producer, c->nst), si)))
        return rc;
      double comm = 0;
      if ((rc = redistribute(c, t, &st->in[j], "forward", &comm)))
        return rc;
      s->comm_f += comm;
      if (train)
        s->comm_b += comm; /* the mirror collective carries the gradient */
    }
    cost_op_eval e;
    if ((rc = plan_cost_op_eval_at(&e, c->m, p, i, NULL, NULL, c->split)))
      return rc;
    s->fwd += e.seconds;
    plan_cost_op_info *row = &r->ops[i];
    row->name = dup(c, o->name);
    row->kind = plan_op_kind_name(o->kind);
    if (!row->name)
      return plan_oom();
    row->stage = r->pipeline ? si : -1;
    row->flops = e.flops * c->split;
    row->bytes = e.bytes * c->split;
    row->seconds = e.seconds * c->split;
    row->bound = plan_cost_bound_names[e.bound];
    if (train) {
      double b = 2 * e.seconds;
      double rec =
          p->training.recompute && p->training.recompute[i] ? e.seconds : 0;
      s->bwd += b;
      s->rec += rec;
      bool weights = false;
      for (int j = 0; j < o->nin; j++)
        weights |= prog->tensors[o->in[j]].role == PLAN_ROLE_PARAM;
      if (weights)
        s->wgt += e.seconds; /* the weight-gradient half */
      row->backward_seconds = (b + rec) * c->split;
    }
    for (int k = 0; k < o->nout; k++)
      if ((rc = hold(&c->h, o->out[k], &st->out[k])))
        return rc;
  }
  /* outputs in the placements the plan delivers them in */
  for (int k = 0; k < prog->noutputs; k++) {
    int t = prog->outputs[k];
    plan_placement want;
    if (p->out_pl && p->out_pl[k].set)
      want = p->out_pl[k].pl;
    else
      plan_placement_replicated(&want, p->mesh.naxes);
    int ps = prog->tensors[t].producer >= 0
                 ? op_stage(p, prog->tensors[t].producer, c->nst)
                 : 0;
    double comm = 0;
    int rc = redistribute(c, t, &want, "output", &comm);
    if (rc)
      return rc;
    c->st[ps].comm_f += comm;
    if (train)
      c->st[ps].comm_b += comm;
  }
  return PLAN_OK;
}

static void human_bytes(char *buf, size_t size, double b) {
  plan_format_bytes(buf, size, b);
}

/* A stage's memory row from its accumulator (totals' formula). */
static void stage_row(const ctx *c, const stage_acc *a, int s, double inflight,
                      plan_cost_memory_info *mi) {
  mi->stage = c->r->pipeline ? s : -1;
  mi->parameters = a->params;
  mi->gradients = a->grads;
  mi->optimizer = a->optstate;
  if (c->r->training) {
    mi->inflight = inflight;
    mi->activations = a->saved * inflight;
    mi->workspace = a->work;
  } else {
    mi->inflight = 1;
    mi->activations = a->live_peak;
    mi->workspace = 0;
  }
  mi->total = mi->parameters + mi->gradients + mi->optimizer + mi->activations +
              mi->workspace;
}

/* Every stage's memory row as logical rank rk holds it (its own piece of
 * every tensor, ratios included) into out[nst]: the memory passes again,
 * counting bytes only. */
static int rank_memory(ctx *c, int64_t rk, plan_cost_memory_info *out) {
  int64_t coord[PLAN_MAX_MESH_AXES];
  plan_cost_rank_coord(c->m, rk, coord);
  stage_acc *keep = c->st;
  stage_acc *tmp = calloc((size_t)c->nst, sizeof *tmp);
  if (!tmp)
    return plan_oom();
  c->st = tmp;
  c->coord = coord;
  c->memory_only = true;
  leaf_memory(c);
  int rc;
  if (c->r->training) {
    saved_memory(c);
    rc = train_params(c);
  } else {
    rc = live_memory(c);
  }
  for (int s = 0; s < c->nst && !rc; s++)
    stage_row(c, &tmp[s], s, c->inflight[s], &out[s]);
  c->st = keep;
  c->coord = NULL;
  c->memory_only = false;
  free(tmp);
  return rc;
}

/* What the devices at `rank` along the pipeline axis hold (R ranks, nst
 * stage rows): with one stage, its row; with several (interleaved, V
 * schedules) every stage's parameters, gradients, optimizer state and
 * saved activations, and the largest working set among them (one op runs
 * at a time). *top gets the stage of the largest row, -1 when none is
 * there; the sum's stage is that one. */
static void rank_held(const plan_plan *p, int R,
                      const plan_cost_memory_info *rows, int nst, int rank,
                      plan_cost_memory_info *sum, int *top) {
  memset(sum, 0, sizeof *sum);
  *top = -1;
  for (int s = 0; s < nst; s++) {
    if (plan_schedule_kind_stage_rank(p->pipeline.schedule, R, s) != rank)
      continue;
    const plan_cost_memory_info *mi = &rows[s];
    if (*top < 0 || mi->total > rows[*top].total)
      *top = s;
    sum->parameters += mi->parameters;
    sum->gradients += mi->gradients;
    sum->optimizer += mi->optimizer;
    sum->activations += mi->activations;
    sum->inflight += mi->inflight;
    if (mi->workspace > sum->workspace)
      sum->workspace = mi->workspace;
  }
  sum->stage = *top;
  sum->total = sum->parameters + sum->gradients + sum->optimizer +
               sum->activations + sum->workspace;
}

/* Per-device hardware or shard ratios: each device's stage total against
 * its own memory (the stages of a rank: those the schedule's placement puts
 * at its index along the pipeline axis, s mod R, or a V for zbv and
 * dualpipev). With ratios each rank counts
 * its own pieces (a rank with a 3:1 share holds three times the other's
 * bytes), not torch.chunk's largest even piece. The report's capacity and
 * peak are those of the device with the least headroom. */
static int device_memory(ctx *c) {
  plan_cost_report *r = c->r;
  const plan_cost_model *m = c->m;
  const plan_plan *p = c->p;
  int64_t coord[PLAN_MAX_MESH_AXES], worst = -1;
  double worst_left = 0, worst_total = 0;
  int worst_row = 0;
  int pa = p->pipeline.present ? p->pipeline.axis : -1;
  /* with ratios: each rank's rows, and per stage the largest rank's row
   * reported */
  plan_cost_memory_info *row = NULL;
  bool *seen = NULL;
  if (p->mesh.nratios > 0 &&
      (!(row = malloc(sizeof *row * ((size_t)c->nst + 1))) ||
       !(seen = calloc((size_t)c->nst + 1, sizeof *seen)))) {
    free(row);
    return plan_oom();
  }
  for (int64_t rk = 0; rk < m->ndevices; rk++) {
    int rc = row ? rank_memory(c, rk, row) : PLAN_OK;
    if (rc) {
      free(row);
      free(seen);
      return rc;
    }
    plan_cost_rank_coord(m, rk, coord);
    int64_t d = plan_cost_rank_device(m, rk);
    double cap = plan_cost_device_memory(m, d);
    bool piped = pa >= 0 && pa < m->naxes;
    for (int s = 0; s < c->nst; s++) {
      if (piped &&
          plan_schedule_kind_stage_rank(p->pipeline.schedule,
                                        (int)m->axis_sizes[pa], s) != coord[pa])
        continue;
      if (row && (!seen[s] || row[s].total > r->mem[s].total)) {
        r->mem[s] = row[s];
        seen[s] = true;
      }
    }
    /* what this device holds: its stages together */
    plan_cost_memory_info held;
    int top = 0;
    if (piped)
      rank_held(p, (int)m->axis_sizes[pa], row ? row : r->mem, c->nst,
                (int)coord[pa], &held, &top);
    else
      held = row ? row[0] : r->mem[0];
    if (top < 0)
      continue;
    double total = held.total;
    /* no figure: every device fits, the largest total reported */
    double left = cap > 0 ? cap - total : 1e300 - total;
    if (worst < 0 || left < worst_left) {
      worst = d;
      worst_left = left;
      worst_row = top;
      worst_total = total;
    }
  }
  free(seen);
  free(row);
  if (worst < 0)
    return PLAN_OK;
  r->capacity = plan_cost_device_memory(m, worst);
  r->peak = worst_total;
  r->peak_row = worst_row;
  r->fits = r->capacity <= 0 || worst_left >= 0;
  if (r->fits) {
    r->reason = "";
    return PLAN_OK;
  }
  char need[32], cap[32];
  human_bytes(need, sizeof need, r->peak);
  human_bytes(cap, sizeof cap, r->capacity);
  r->reason = plan_arena_printf(
      &r->arena, "does not fit: device %lld (%s) needs %s, it has %s",
      (long long)worst, plan_cost_device_hw(m, worst)->name, need, cap);
  return r->reason ? PLAN_OK : plan_oom();
}

static int totals(ctx *c) {
  plan_cost_report *r = c->r;
  const plan_plan *p = c->p;
  double m = c->split;
  double *inflight =
      plan_arena_alloc(&r->arena, sizeof(double) * (size_t)c->nst);
  if (!inflight)
    return plan_oom();
  for (int s = 0; s < c->nst; s++)
    inflight[s] = 1;
  for (int s = 0; s < c->nst; s++) {
    const stage_acc *a = &c->st[s];
    r->compute_fwd += a->fwd * m;
    r->compute_bwd += a->bwd * m;
    r->recompute += a->rec * m;
    r->comm_fwd += a->comm_f * m;
    r->comm_bwd += a->comm_b * m;
    r->p2p += (a->p2p_f + a->p2p_b) * m;
    r->grad_sync += a->sync;
    r->optimizer_s += a->opt;
  }
  if (!r->pipeline) {
    r->step = r->compute_fwd + r->comm_fwd + r->compute_bwd + r->recompute +
              r->comm_bwd + r->grad_sync + r->optimizer_s;
  } else {
    double *f = calloc((size_t)c->nst * 3 + 1, sizeof(double));
    if (!f)
      return plan_oom();
    double *b = f + c->nst, *w = b + c->nst, tail = 0;
    for (int s = 0; s < c->nst; s++) {
      const stage_acc *a = &c->st[s];
      f[s] = a->fwd + a->comm_f + a->p2p_f;
      b[s] = a->bwd + a->rec + a->comm_b + a->p2p_b;
      w[s] = r->training ? a->wgt : 0;
      if (a->sync + a->opt > tail)
        tail = a->sync + a->opt;
    }
    r->stages = plan_arena_alloc(&r->arena, sizeof *r->stages * (size_t)c->nst);
    if (!r->stages) {
      free(f);
      return plan_oom();
    }
    r->nstage_rows = c->nst;
    int R = p->pipeline.axis >= 0 && p->pipeline.axis < p->mesh.naxes
                ? (int)p->mesh.axis_sizes[p->pipeline.axis]
                : c->nst;
    for (int s = 0; s < c->nst; s++) {
      const stage_acc *a = &c->st[s];
      r->stages[s] = (plan_cost_stage_info){
          .stage = s,
          .rank = plan_schedule_kind_stage_rank(p->pipeline.schedule, R, s),
          .forward = a->fwd,
          .forward_comm = a->comm_f,
          .send_forward = a->p2p_f,
          .backward = a->bwd + a->rec,
          .backward_comm = a->comm_b,
          .send_backward = a->p2p_b,
          .weight_grad = w[s],
          .grad_sync = a->sync,
          .optimizer = a->opt};
    }
    double step, bubble;
    int rc =
        plan_cost_schedule_time(&step, &bubble, inflight, p, f, b, w, c->nst);
    free(f);
    if (rc)
      return rc;
    r->step = step + tail;
    r->bubble = bubble;
  }
  /* memory */
  r->nmem = c->nst;
  r->mem = plan_arena_alloc(&r->arena, sizeof *r->mem * (size_t)c->nst);
  if (!r->mem)
    return plan_oom();
  r->capacity = c->m->hw.memory;
  for (int s = 0; s < c->nst; s++)
    stage_row(c, &c->st[s], s, inflight[s], &r->mem[s]);
  /* the peak: the devices holding the most, a pipeline rank's stages
   * together (several under an interleaved or V schedule) */
  int R = p->pipeline.present && p->pipeline.axis >= 0 &&
                  p->pipeline.axis < p->mesh.naxes
              ? (int)p->mesh.axis_sizes[p->pipeline.axis]
              : 0;
  plan_cost_memory_info worst = r->mem[0];
  r->peak_row = 0;
  for (int k = 0; k < R; k++) {
    plan_cost_memory_info held;
    int top;
    rank_held(p, R, r->mem, c->nst, k, &held, &top);
    if (top >= 0 && (k == 0 || held.total > worst.total)) {
      worst = held;
      r->peak_row = top;
    }
  }
  r->peak = worst.total;
  r->fits = r->capacity <= 0 || r->peak <= r->capacity;
  c->inflight = inflight;
  if (c->m->nprof > 0 || c->p->mesh.nratios > 0)
    return device_memory(c);
  if (r->fits) {
    r->reason = "";
    return PLAN_OK;
  }
  const plan_cost_memory_info *mi = &worst;
  char need[32], cap[32], pa[32], gr[32], op[32], ac[32], wk[32];
  human_bytes(need, sizeof need, mi->total);
  human_bytes(cap, sizeof cap, r->capacity);
  human_bytes(pa, sizeof pa, mi->parameters);
  human_bytes(gr, sizeof gr, mi->gradients);
  human_bytes(op, sizeof op, mi->optimizer);
  human_bytes(ac, sizeof ac, mi->activations);
  human_bytes(wk, sizeof wk, mi->workspace);
  char where[64] = "each device";
  int held_stages = 0;
  for (int s = 0; r->pipeline && R > 0 && s < c->nst; s++)
    held_stages +=
        plan_schedule_kind_stage_rank(p->pipeline.schedule, R, s) ==
        plan_schedule_kind_stage_rank(p->pipeline.schedule, R, r->peak_row);
  if (r->pipeline && held_stages > 1)
    snprintf(
        where, sizeof where, "pipeline rank %d (%d stages)",
        plan_schedule_kind_stage_rank(p->pipeline.schedule, R, r->peak_row),
        held_stages);
  else if (r->pipeline)
    snprintf(where, sizeof where, "stage %d", mi->stage);
  r->reason = plan_arena_printf(
      &r->arena,
      "does not fit: %s needs %s per device, the %s has %s (parameters %s, "
      "gradients %s, optimizer state %s, activations %s, workspace %s)",
      where, need, r->hardware, cap, pa, gr, op, ac, wk);
  return r->reason ? PLAN_OK : plan_oom();
}

int plan_cost_plan(plan_cost_report **out, const plan_cost_model *m,
                   const plan_plan *p) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_plan: out is NULL");
  *out = NULL;
  if (!m || !p)
    return plan_failf(PLAN_EUSAGE, "plan_cost_plan: no model or no plan");
  int rc = check_plan(m, p);
  if (rc)
    return rc;
  const plan_program *prog = p->program;
  plan_cost_report *r = calloc(1, sizeof *r);
  if (!r)
    return plan_oom();
  plan_arena_init(&r->arena);
  ctx c = {.m = m, .p = p, .r = r, .split = 1, .nst = 1};
  if (p->pipeline.present && p->pipeline.nstages > 0) {
    c.nst = p->pipeline.nstages;
    c.split =
        (double)(p->pipeline.microbatches > 0 ? p->pipeline.microbatches : 1);
  }
  c.st = calloc((size_t)c.nst, sizeof *c.st);
  c.h.first = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  c.sent_first = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  c.first_use = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  c.sync_mask = calloc((size_t)prog->ntensors + 1, sizeof(unsigned));
  r->nops = prog->nops;
  r->ops = calloc((size_t)prog->nops + 1, sizeof *r->ops);
  if (!c.st || !c.h.first || !c.sent_first || !c.first_use || !c.sync_mask ||
      !r->ops) {
    rc = plan_oom();
    goto done;
  }
  for (int t = 0; t < prog->ntensors; t++)
    c.h.first[t] = c.sent_first[t] = c.first_use[t] = -1;
  consumers(&c);
  if ((rc = describe(&c)) || (rc = ops_and_redists(&c)))
    goto done;
  leaf_memory(&c);
  if (r->training) {
    saved_memory(&c);
    rc = train_params(&c);
  } else {
    rc = live_memory(&c);
  }
  if (!rc)
    rc = totals(&c);
  if (!rc)
    rc = plan_cost_overlap_price(r, m, p);
done:
  free(c.st);
  free(c.h.first);
  free(c.h.nodes);
  free(c.sent_first);
  free(c.sent_nodes);
  free(c.first_use);
  free(c.sync_mask);
  if (rc) {
    plan_cost_report_free(r);
    return rc;
  }
  *out = r;
  return PLAN_OK;
}
