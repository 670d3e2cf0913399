/* Read-only views of a lowered program (libplan/lowered.h): its plan, the
 * step and collective counts, and each step, buffer, tensor layout and
 * output by index, as plain structs over borrowed pointers, so a runner
 * or a binding reads the program without the core's internal layout. */
#include <string.h>

#include "base/util.h"
#include "ir/ops.h"
#include "lower/lower.h"
#include "lower/lowered_io_pipe.h"
#include "lower/redist.h"

const plan_plan *plan_lowered_plan(const plan_lowered *l) {
  return l ? l->plan : NULL;
}

int plan_lowered_step_count(const plan_lowered *l) {
  return l ? l->nsteps : -1;
}

/* The all-reduces inside op steps: the vocab-parallel loss's, per axis
 * that splits a cross_entropy's or its gradient's classes. */
static int op_all_reduces(const plan_lowered *l) {
  const plan_program *prog = l->plan->program;
  int n = 0, pa[PLAN_MAX_MESH_AXES];
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind != PLAN_LSTEP_OP)
      continue;
    const plan_op *o = &prog->ops[s->op];
    int li = plan_op_logits_input(o->kind);
    if (li >= 0)
      n += PLAN_OP_CLASS_ALL_REDUCES(o->kind) *
           plan_op_class_axes(o->kind, prog->tensors[o->in[li]].rank,
                              &l->bufs[s->in[li]].pl, l->plan->mesh.naxes, pa);
  }
  return n;
}

int plan_lowered_collective_count(const plan_lowered *l, const char *kind) {
  if (!l || !kind)
    return -1;
  if (!strcmp(kind, "op_all_reduce"))
    return op_all_reduces(l);
  for (int k = 0; k < PLAN_REDIST_COUNT; k++)
    if (!strcmp(kind, plan_redist_kind_name((plan_redist_kind)k)))
      return l->collectives[k];
  return -1;
}

/* PLAN_EUSAGE naming the view, unless out and l are set and 0 <= i < n. */
static int check_index(const void *out, const plan_lowered *l, int i, int n,
                       const char *fn, const char *what) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "%s: NULL argument", fn);
  if (i < 0 || i >= n)
    return plan_failf(PLAN_EUSAGE,
                      "%s: %s %d out of range (the program has %d)", fn, what,
                      i, n);
  return PLAN_OK;
}

/* The fields of a redistribution step that its kind gives meaning to. */
static void redist_fields(plan_lowered_step_info *o,
                          const plan_redist_step *r) {
  o->kind = plan_redist_kind_name(r->kind);
  o->axis = r->axis;
  switch (r->kind) {
  case PLAN_REDIST_ALL_GATHER:
  case PLAN_REDIST_SLICE:
    o->dim = r->dim;
    break;
  case PLAN_REDIST_REDUCE_SCATTER:
    o->dim = r->dim;
    o->reduce = (int)r->reduce;
    break;
  case PLAN_REDIST_ALL_TO_ALL:
    o->dim = r->dim;
    o->to_dim = r->to_dim;
    break;
  case PLAN_REDIST_ALL_REDUCE:
  case PLAN_REDIST_RELABEL:
    o->reduce = (int)r->reduce;
    break;
  case PLAN_REDIST_ZERO_NON_OWNER:
    o->reduce = PLAN_RED_SUM;
    break;
  default:
    break;
  }
}

int plan_lowered_step(plan_lowered_step_info *out, const plan_lowered *l,
                      int step) {
  int rc =
      check_index(out, l, step, l ? l->nsteps : 0, "plan_lowered_step", "step");
  if (rc)
    return rc;
  const plan_lstep *s = &l->steps[step];
  plan_lowered_step_info o;
  memset(&o, 0, sizeof o);
  o.op = o.op_kind = o.axis = o.dim = o.to_dim = o.reduce = o.stage = -1;
  o.nin = s->nin;
  o.nout = s->nout;
  o.in = s->in;
  o.out = s->out;
  switch (s->kind) {
  case PLAN_LSTEP_INPUT:
    o.kind = "input";
    break;
  case PLAN_LSTEP_OP: {
    const plan_op *op = &l->plan->program->ops[s->op];
    o.kind = "op";
    o.op = s->op;
    o.op_kind = op->kind;
    int nattrs = 0;
    plan_op_attrs(op->kind, &nattrs);
    o.attrs = nattrs > 0 ? op->attrs : NULL;
    break;
  }
  case PLAN_LSTEP_REDIST:
    redist_fields(&o, &s->redist);
    break;
  case PLAN_LSTEP_TRANSFER:
    o.kind = "transfer";
    break;
  case PLAN_LSTEP_WAIT:
    o.kind = "wait";
    break;
  default:
    o.kind = "?";
    break;
  }
  if (l->pipe && l->pipe->stage)
    o.stage = l->pipe->stage[step];
  *out = o;
  return PLAN_OK;
}

int plan_lowered_buffer_count(const plan_lowered *l) {
  return l ? l->nbufs : -1;
}

int plan_lowered_buffer(plan_lowered_buffer_info *out, const plan_lowered *l,
                        int buffer) {
  int rc = check_index(out, l, buffer, l ? l->nbufs : 0, "plan_lowered_buffer",
                       "buffer");
  if (rc)
    return rc;
  const plan_lbuf *b = &l->bufs[buffer];
  const plan_tensor *t = &l->plan->program->tensors[b->tensor];
  plan_lowered_buffer_info o;
  memset(&o, 0, sizeof o);
  o.tensor = b->tensor;
  o.tensor_name = t->name;
  /* as the file form numbers them (lowered_io.c): in buffer order */
  for (int i = 0; i < buffer; i++)
    o.ordinal += l->bufs[i].tensor == b->tensor;
  o.dtype = (int)t->dtype;
  o.rank = t->rank;
  for (int d = 0; d < t->rank && d < PLAN_MAX_RANK; d++)
    o.dims[d] = t->dims[d];
  o.placement = b->pl;
  if (plan_placement_format_in(o.placement_text, sizeof o.placement_text,
                               l->plan, &b->pl))
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_buffer: buffer %d has no "
                      "placement over the mesh",
                      buffer);
  *out = o;
  return PLAN_OK;
}

int plan_lowered_buffer_block(int64_t *dims, int64_t *offset,
                              const plan_lowered *l, int buffer, int64_t rank) {
  if (!l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_buffer_block: NULL argument");
  if (buffer < 0 || buffer >= l->nbufs)
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_buffer_block: buffer %d out of range (the "
                      "program has %d)",
                      buffer, l->nbufs);
  const plan_mesh *m = &l->plan->mesh;
  if (rank < 0 || rank >= m->ndevices)
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_buffer_block: rank %lld out of range (the "
                      "mesh has %lld)",
                      (long long)rank, (long long)m->ndevices);
  int64_t coord[PLAN_MAX_MESH_AXES];
  int64_t r = rank;
  for (int a = m->naxes - 1; a >= 0; a--) {
    coord[a] = r % m->axis_sizes[a];
    r /= m->axis_sizes[a];
  }
  const plan_lbuf *b = &l->bufs[buffer];
  const plan_tensor *t = &l->plan->program->tensors[b->tensor];
  plan_redist_local_layout_r(&b->pl, t->dims, t->rank, m->axis_sizes, m->ratios,
                             m->nratios, coord, dims, offset);
  return t->rank;
}

int plan_lowered_layout(int *out, const plan_lowered *l, int tensor) {
  int rc = check_index(out, l, tensor, l ? l->plan->program->ntensors : 0,
                       "plan_lowered_layout", "tensor");
  if (rc)
    return rc;
  *out = l->produced ? l->produced[tensor] : -1;
  return PLAN_OK;
}

int plan_lowered_output_count(const plan_lowered *l) {
  return l ? l->plan->program->noutputs : -1;
}

int plan_lowered_output(plan_lowered_output_info *out, const plan_lowered *l,
                        int k) {
  int rc = check_index(out, l, k, l ? l->plan->program->noutputs : 0,
                       "plan_lowered_output", "output");
  if (rc)
    return rc;
  plan_lowered_output_info o;
  memset(&o, 0, sizeof o);
  o.tensor = l->plan->program->outputs[k];
  o.buffer = l->delivered ? l->delivered[k] : -1;
  o.has_required = l->required != NULL;
  if (l->required)
    o.required = l->required[k];
  else if (o.buffer >= 0)
    o.required = l->bufs[o.buffer].pl;
  o.gradient_of = l->grad_of ? l->grad_of[k] : -1;
  if (plan_placement_format_in(o.required_text, sizeof o.required_text, l->plan,
                               &o.required))
    o.required_text[0] = '\0';
  *out = o;
  return PLAN_OK;
}

int plan_lowered_pipeline(plan_lowered_pipeline_info *out,
                          const plan_lowered *l) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_pipeline: NULL argument");
  const plan_lpipe *pp = l->pipe;
  if (!pp)
    return plan_failf(PLAN_ENOTFOUND,
                      "plan_lowered_pipeline: the program has no pipeline");
  plan_lowered_pipeline_info o;
  memset(&o, 0, sizeof o);
  o.axis = pp->axis;
  o.microbatches = pp->microbatches;
  o.stages = pp->nstages;
  o.schedule = pp->schedule;
  o.transfers = pp->transfers;
  o.local_transfers = pp->local_transfers;
  *out = o;
  return PLAN_OK;
}

int plan_lowered_step_pipe(plan_lowered_step_pipe_info *out,
                           const plan_lowered *l, int step) {
  int rc = check_index(out, l, step, l ? l->nsteps : 0,
                       "plan_lowered_step_pipe", "step");
  if (rc)
    return rc;
  const plan_lpipe *pp = l->pipe;
  if (!pp || !pp->phase)
    return plan_failf(PLAN_ENOTFOUND,
                      "plan_lowered_step_pipe: the program has no pipeline");
  plan_lowered_step_pipe_info o;
  memset(&o, 0, sizeof o);
  o.phase = plan_lphase_name(pp->phase[step]);
  o.stage = pp->stage[step];
  o.from_stage = pp->from_stage[step];
  o.mb_shift = l->steps[step].mb_shift;
  *out = o;
  return PLAN_OK;
}

int plan_lowered_step_sched(plan_lowered_sched_info *out, const plan_lowered *l,
                            int step) {
  int rc = check_index(out, l, step, l ? l->nsteps : 0,
                       "plan_lowered_step_sched", "step");
  if (rc)
    return rc;
  const plan_lstep *s = &l->steps[step];
  out->stream = s->stream;
  out->chunk_dim = s->chunk_of ? s->chunk_dim : -1;
  out->chunk_index = s->chunk_of ? s->chunk_index : 0;
  out->chunk_of = s->chunk_of;
  out->chunk_at = s->chunk_of ? s->chunk_at : 0;
  return PLAN_OK;
}

int plan_lowered_step_order(plan_lowered_order_info *out, const plan_lowered *l,
                            int step) {
  int rc = check_index(out, l, step, l ? l->nsteps : 0,
                       "plan_lowered_step_order", "step");
  if (rc)
    return rc;
  const plan_lstep *s = &l->steps[step];
  out->group_order = s->group_order;
  out->rank_order = s->rank_order;
  out->length = 0;
  if ((s->group_order || s->rank_order) && s->kind == PLAN_LSTEP_REDIST &&
      s->redist.axis >= 0 && s->redist.axis < l->plan->mesh.naxes)
    out->length = l->plan->mesh.axis_sizes[s->redist.axis];
  return PLAN_OK;
}

int plan_lowered_placement_block(int64_t *dims, int64_t *offset,
                                 const plan_lowered *l,
                                 const plan_placement *pl, int tensor,
                                 const int64_t *coord) {
  if (!l || !pl || !coord)
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_placement_block: NULL argument");
  const plan_program *prog = l->plan->program;
  if (tensor < 0 || tensor >= prog->ntensors)
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_placement_block: tensor %d out of range "
                      "(the program has %d)",
                      tensor, prog->ntensors);
  const plan_mesh *m = &l->plan->mesh;
  const plan_tensor *t = &prog->tensors[tensor];
  plan_redist_local_layout_r(pl, t->dims, t->rank, m->axis_sizes, m->ratios,
                             m->nratios, coord, dims, offset);
  return t->rank;
}

int plan_lowered_training(plan_lowered_training_info *out,
                          const plan_lowered *l) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_training: NULL argument");
  if (!l->train)
    return plan_failf(PLAN_ENOTFOUND,
                      "plan_lowered_training: the program is not a training "
                      "step");
  out->loss = l->train->loss;
  out->params = l->train->nparams;
  out->has_grad_map = l->train->map != NULL;
  return PLAN_OK;
}

int plan_lowered_param(plan_lowered_param_info *out, const plan_lowered *l,
                       int i) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_param: NULL argument");
  const plan_ltrain *t = l->train;
  if (!t)
    return plan_failf(PLAN_ENOTFOUND,
                      "plan_lowered_param: the program is not a training "
                      "step");
  if (i < 0 || i >= t->nparams)
    return plan_failf(PLAN_EUSAGE,
                      "plan_lowered_param: param %d out of range (the step "
                      "has %d)",
                      i, t->nparams);
  plan_lowered_param_info o;
  memset(&o, 0, sizeof o);
  o.tensor = t->param[i];
  o.grad_output = t->grad_out[i];
  o.master = t->master[i];
  o.sync = t->sync ? (int)t->sync[i] : PLAN_SYNC_AUTO;
  o.norm_axes = t->norm_axes ? t->norm_axes[i] : 0;
  *out = o;
  return PLAN_OK;
}

int plan_lowered_regions(plan_lowered_regions_info *out,
                         const plan_lowered *l) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_regions: NULL argument");
  out->regions = l->nregions;
  out->orig_ops = l->norig_ops;
  out->orig_tensors = l->norig_tensors;
  out->reference = l->nregions ? l->ref_plan : NULL;
  return PLAN_OK;
}

int plan_lowered_region(plan_lowered_region_info *out, const plan_lowered *l,
                        int k) {
  int rc = check_index(out, l, k, l ? l->nregions : 0, "plan_lowered_region",
                       "region");
  if (rc)
    return rc;
  const plan_lregion *g = &l->regions[k];
  out->name = g->name;
  out->body_hash = g->body_hash;
  out->op_begin = g->op_begin;
  out->op_end = g->op_end;
  out->nreplaces = g->nreplaces;
  out->replaces = g->replaces;
  return PLAN_OK;
}
