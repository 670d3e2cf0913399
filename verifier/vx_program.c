/* The verifier's copy of a lowered program (vx_program.h), read through
 * the public views once, before the run: the run reads plain arrays where
 * a view call per element would cost more than the arithmetic. */
#include "vx_program.h"

#include <stdlib.h>
#include <string.h>

static const char *const redist_names[VX_REDIST_COUNT] = {
    "all_gather", "all_reduce",     "reduce_scatter", "all_to_all",
    "slice",      "zero_non_owner", "relabel"};

static const char *const phase_names[VX_PHASE_COUNT] = {
    "pre", "F", "I", "W", "RECV_F", "RECV_B", "post"};

const char *plan_vx_redist_kind_name(vx_redist_kind k) {
  return k >= 0 && k < VX_REDIST_COUNT ? redist_names[k] : "?";
}

/* n zeroed elements of `size` bytes from v's arena (at least one). */
static void *take(vx_lowered *v, size_t n, size_t size) {
  return plan_arena_alloc(&v->arena, (n ? n : 1) * size);
}

static int program_of(vx_lowered *v) {
  vx_program *g = &v->program;
  const plan_program *p = plan_get_program(v->plan);
  g->pub = p;
  g->ntensors = plan_program_tensor_count(p);
  g->nops = plan_program_op_count(p);
  g->noutputs = plan_program_output_count(p);
  g->loss = plan_program_loss(p);
  g->tensors = take(v, (size_t)g->ntensors, sizeof *g->tensors);
  g->ops = take(v, (size_t)g->nops, sizeof *g->ops);
  g->outputs = take(v, (size_t)g->noutputs, sizeof *g->outputs);
  if (!g->tensors || !g->ops || !g->outputs)
    return plan_oom();
  for (int t = 0; t < g->ntensors; t++) {
    plan_program_tensor_info i;
    int rc = plan_program_tensor(&i, p, t);
    if (rc)
      return rc;
    vx_tensor *x = &g->tensors[t];
    x->name = i.name;
    x->rank = i.rank;
    /* a scalar's view has no dims array; the verifier copies rank entries
     * from it (none), which needs a pointer all the same */
    static const int64_t no_dims[1] = {0};
    x->dims = i.dims ? i.dims : no_dims;
    x->dtype = (plan_dtype)i.dtype;
    x->role = (plan_role)i.role;
    x->producer = i.producer;
    x->producer_slot = i.producer_slot;
    x->has_range = i.has_range != 0;
    x->range_lo = i.range_lo;
    x->range_hi = i.range_hi;
    x->recipe = (plan_recipe)i.recipe;
    x->recipe_theta = i.recipe_theta;
    x->recipe_fill = i.recipe_fill;
  }
  for (int o = 0; o < g->nops; o++) {
    plan_program_op_info i;
    int rc = plan_program_op(&i, p, o);
    if (rc)
      return rc;
    vx_op *x = &g->ops[o];
    x->name = i.name;
    x->kind = i.kind;
    x->nin = i.nin;
    x->nout = i.nout;
    x->in = i.in;
    x->out = i.out;
    x->attrs = i.attrs;
  }
  for (int k = 0; k < g->noutputs; k++)
    g->outputs[k] = plan_program_output(p, k);
  return PLAN_OK;
}

static int mesh_of(vx_lowered *v) {
  vx_mesh *m = &v->mesh;
  m->naxes = plan_mesh_axis_count(v->plan);
  if (m->naxes > PLAN_MAX_MESH_AXES)
    return plan_failf(PLAN_EINVALID, "a mesh of %d axes", m->naxes);
  for (int a = 0; a < m->naxes; a++) {
    m->axis_names[a] = plan_mesh_axis_name(v->plan, a);
    m->axis_sizes[a] = plan_mesh_axis_size(v->plan, a);
  }
  m->ndevices = plan_mesh_device_count(v->plan);
  m->nratios = plan_mesh_ratio_count(v->plan);
  m->ratios = take(v, (size_t)m->nratios, sizeof *m->ratios);
  if (!m->ratios)
    return plan_oom();
  for (int k = 0; k < m->nratios; k++) {
    plan_mesh_ratio_info i;
    int rc = plan_mesh_ratio(&i, v->plan, k);
    if (rc)
      return rc;
    m->ratios[k].axis = i.axis;
    m->ratios[k].n = i.n;
    m->ratios[k].w = i.weights;
  }
  plan_training_info t;
  int rc = plan_get_training(&t, v->plan);
  if (rc)
    return rc;
  vx_training *o = &v->training;
  o->optimizer = (plan_optimizer)t.optimizer;
  o->lr = t.lr;
  o->momentum = t.momentum;
  o->beta1 = t.beta1;
  o->beta2 = t.beta2;
  o->eps = t.eps;
  o->weight_decay = t.weight_decay;
  o->steps = t.steps;
  o->param_dtype = t.param_dtype;
  o->compute_dtype = t.compute_dtype;
  o->grad_dtype = t.grad_dtype;
  o->accum_dtype = t.accum_dtype;
  o->clip_grad_norm = t.clip_grad_norm;
  o->loss_scale = t.loss_scale;
  return PLAN_OK;
}

/* A step's kind from its view's name. */
static void kind_of(vx_step *s, const char *kind) {
  static const struct {
    const char *name;
    vx_step_kind kind;
  } plain[] = {{"input", VX_STEP_INPUT},
               {"op", VX_STEP_OP},
               {"transfer", VX_STEP_TRANSFER},
               {"wait", VX_STEP_WAIT}};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (!strcmp(kind, plain[i].name)) {
      s->kind = plain[i].kind;
      return;
    }
  s->kind = VX_STEP_REDIST;
  s->redist.kind = VX_REDIST_COUNT;
  for (int k = 0; k < VX_REDIST_COUNT; k++)
    if (!strcmp(kind, redist_names[k]))
      s->redist.kind = (vx_redist_kind)k;
}

static int steps_of(vx_lowered *v) {
  const plan_lowered *l = v->pub;
  v->nsteps = plan_lowered_step_count(l);
  v->steps = take(v, (size_t)v->nsteps, sizeof *v->steps);
  if (!v->steps)
    return plan_oom();
  for (int i = 0; i < v->nsteps; i++) {
    plan_lowered_step_info si;
    plan_lowered_sched_info sc;
    plan_lowered_order_info oi;
    int rc;
    if ((rc = plan_lowered_step(&si, l, i)) ||
        (rc = plan_lowered_step_sched(&sc, l, i)) ||
        (rc = plan_lowered_step_order(&oi, l, i)))
      return rc;
    vx_step *s = &v->steps[i];
    kind_of(s, si.kind);
    s->op = si.op;
    s->nin = si.nin;
    s->nout = si.nout;
    s->in = si.in;
    s->out = si.out;
    s->redist.axis = si.axis;
    s->redist.dim = si.dim;
    s->redist.to_dim = si.to_dim;
    s->redist.reduce = si.reduce >= 0 ? (plan_reduce)si.reduce : PLAN_RED_SUM;
    s->group_order = oi.group_order;
    s->rank_order = oi.rank_order;
    s->stream = sc.stream;
    s->chunk_dim = sc.chunk_dim;
    s->chunk_index = sc.chunk_index;
    s->chunk_of = sc.chunk_of;
    s->chunk_at = sc.chunk_at;
  }
  for (int k = 0; k < VX_REDIST_COUNT; k++)
    v->collectives[k] = plan_lowered_collective_count(l, redist_names[k]);
  return PLAN_OK;
}

static int buffers_of(vx_lowered *v) {
  const plan_lowered *l = v->pub;
  const vx_program *g = &v->program;
  v->nbufs = plan_lowered_buffer_count(l);
  v->cap_bufs = v->nbufs > 0 ? v->nbufs : 1;
  v->bufs = calloc((size_t)v->cap_bufs, sizeof *v->bufs);
  v->produced = take(v, (size_t)g->ntensors, sizeof *v->produced);
  v->delivered = take(v, (size_t)g->noutputs, sizeof *v->delivered);
  v->required = take(v, (size_t)g->noutputs, sizeof *v->required);
  v->grad_of = take(v, (size_t)g->noutputs, sizeof *v->grad_of);
  if (!v->bufs || !v->produced || !v->delivered || !v->required || !v->grad_of)
    return plan_oom();
  for (int b = 0; b < v->nbufs; b++) {
    plan_lowered_buffer_info bi;
    int rc = plan_lowered_buffer(&bi, l, b);
    if (rc)
      return rc;
    v->bufs[b].tensor = bi.tensor;
    v->bufs[b].pl = bi.placement;
  }
  for (int t = 0; t < g->ntensors; t++) {
    int rc = plan_lowered_layout(&v->produced[t], l, t);
    if (rc)
      return rc;
  }
  bool required = g->noutputs > 0;
  for (int k = 0; k < g->noutputs; k++) {
    plan_lowered_output_info o;
    int rc = plan_lowered_output(&o, l, k);
    if (rc)
      return rc;
    v->delivered[k] = o.buffer;
    v->required[k] = o.required;
    v->grad_of[k] = o.gradient_of;
    required = required && o.has_required;
  }
  if (!required) { /* a lowered file that states none */
    v->required = NULL;
    v->grad_of = NULL;
  }
  return PLAN_OK;
}

static int train_of(vx_lowered *v) {
  plan_lowered_training_info ti;
  int rc = plan_lowered_training(&ti, v->pub);
  if (rc == PLAN_ENOTFOUND) {
    plan_error_clear();
    return PLAN_OK;
  }
  if (rc)
    return rc;
  vx_train *t = v->train = take(v, 1, sizeof *v->train);
  if (!t)
    return plan_oom();
  t->map = ti.has_grad_map != 0;
  t->loss = ti.loss;
  t->nparams = ti.params;
  size_t n = (size_t)t->nparams;
  t->param = take(v, n, sizeof *t->param);
  t->grad_out = take(v, n, sizeof *t->grad_out);
  t->master = take(v, n, sizeof *t->master);
  t->norm_axes = take(v, n, sizeof *t->norm_axes);
  if (!t->param || !t->grad_out || !t->master || !t->norm_axes)
    return plan_oom();
  for (int i = 0; i < t->nparams; i++) {
    plan_lowered_param_info pi;
    if ((rc = plan_lowered_param(&pi, v->pub, i)))
      return rc;
    t->param[i] = pi.tensor;
    t->grad_out[i] = pi.grad_output;
    t->master[i] = pi.master;
    t->norm_axes[i] = pi.norm_axes;
  }
  return PLAN_OK;
}

static int pipe_of(vx_lowered *v) {
  plan_lowered_pipeline_info pi;
  int rc = plan_lowered_pipeline(&pi, v->pub);
  if (rc == PLAN_ENOTFOUND) {
    plan_error_clear();
    return PLAN_OK;
  }
  if (rc)
    return rc;
  vx_pipe *pp = v->pipe = take(v, 1, sizeof *v->pipe);
  if (!pp)
    return plan_oom();
  pp->axis = pi.axis;
  pp->microbatches = pi.microbatches;
  pp->nstages = pi.stages;
  pp->schedule = pi.schedule;
  pp->transfers = pi.transfers;
  pp->local_transfers = pi.local_transfers;
  size_t n = (size_t)v->nsteps;
  pp->stage = take(v, n, sizeof *pp->stage);
  pp->phase = take(v, n, sizeof *pp->phase);
  pp->from_stage = take(v, n, sizeof *pp->from_stage);
  if (!pp->stage || !pp->phase || !pp->from_stage)
    return plan_oom();
  for (int i = 0; i < v->nsteps; i++) {
    plan_lowered_step_pipe_info si;
    if ((rc = plan_lowered_step_pipe(&si, v->pub, i)))
      return rc;
    pp->stage[i] = si.stage;
    pp->from_stage[i] = si.from_stage;
    v->steps[i].mb_shift = si.mb_shift;
    pp->phase[i] = VX_PHASE_COUNT;
    for (int k = 0; k < VX_PHASE_COUNT; k++)
      if (!strcmp(si.phase, phase_names[k]))
        pp->phase[i] = (uint8_t)k;
  }
  return PLAN_OK;
}

int plan_vx_lowered_new(vx_lowered **out, const plan_lowered *l) {
  *out = NULL;
  vx_lowered *v = calloc(1, sizeof *v);
  if (!v)
    return plan_oom();
  plan_arena_init(&v->arena);
  v->pub = l;
  v->plan = plan_lowered_plan(l);
  plan_lowered_regions_info rg;
  int rc;
  if ((rc = program_of(v)) || (rc = mesh_of(v)) || (rc = steps_of(v)) ||
      (rc = buffers_of(v)) || (rc = train_of(v)) || (rc = pipe_of(v)) ||
      (rc = plan_lowered_regions(&rg, l))) {
    plan_vx_lowered_free(v);
    return rc;
  }
  v->norig_ops = rg.orig_ops;
  v->norig_tensors = rg.orig_tensors;
  *out = v;
  return PLAN_OK;
}

void plan_vx_lowered_free(vx_lowered *v) {
  if (!v)
    return;
  plan_arena_free(&v->arena);
  free(v->bufs);
  free(v);
}
