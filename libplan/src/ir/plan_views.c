/* Read-only views of a plan for tools and bindings. */
#include <stdio.h>
#include <string.h>

#include "libplan/plan.h"
#include "read/plan_read.h"

int plan_mesh_axis_count(const plan_plan *p) {
  return p && p->has_mesh ? p->mesh.naxes : 0;
}

const char *plan_mesh_axis_name(const plan_plan *p, int a) {
  return p && p->has_mesh && a >= 0 && a < p->mesh.naxes ? p->mesh.axis_names[a]
                                                         : NULL;
}

int64_t plan_mesh_axis_size(const plan_plan *p, int a) {
  return p && p->has_mesh && a >= 0 && a < p->mesh.naxes ? p->mesh.axis_sizes[a]
                                                         : -1;
}

int64_t plan_mesh_device_count(const plan_plan *p) {
  return p && p->has_mesh ? p->mesh.ndevices : 0;
}

int64_t plan_mesh_device(const plan_plan *p, int64_t rank) {
  if (!p || !p->has_mesh || rank < 0 || rank >= p->mesh.ndevices)
    return -1;
  return p->mesh.devices ? p->mesh.devices[rank] : rank;
}

const char *plan_mesh_device_hardware(const plan_plan *p, int64_t device) {
  if (!p || !p->has_mesh || device < 0 || device >= p->mesh.ndevices ||
      !p->mesh.device_profile || !p->mesh.profiles)
    return NULL;
  int k = p->mesh.device_profile[device];
  return k >= 0 && k < p->mesh.nprofiles ? p->mesh.profiles[k].name : NULL;
}

/* The canonical form, shard ratios with their weights (p's sets). */
static int put(char *buf, size_t size, const plan_plan *p,
               const plan_placement *pl) {
  if (buf && size)
    plan_placement_format_r(pl, p->mesh.ratios, p->mesh.nratios, buf, size);
  return PLAN_OK;
}

int plan_tensor_placement(char *buf, size_t size, const plan_plan *p, int t) {
  if (!p || !p->has_mesh || t < 0 || t >= p->program->ntensors)
    return plan_failf(PLAN_ENOTFOUND, "no tensor %d in the plan", t);
  plan_placement r;
  plan_placement_replicated(&r, p->mesh.naxes);
  return put(buf, size, p, p->placements[t].set ? &p->placements[t].pl : &r);
}

int plan_op_placement(char *buf, size_t size, const plan_plan *p, int op,
                      int output, int slot) {
  if (!p || !p->has_mesh || op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_ENOTFOUND, "no op %d in the plan", op);
  const plan_strategy *s = &p->strategies[op];
  const plan_op *o = &p->program->ops[op];
  if (!s->set)
    return plan_failf(PLAN_ENOTFOUND, "op '%s' has no strategy", o->name);
  if (slot < 0 || slot >= (output ? o->nout : o->nin))
    return plan_failf(PLAN_ENOTFOUND, "op '%s' has no %s %d", o->name,
                      output ? "output" : "input", slot);
  return put(buf, size, p, output ? &s->out[slot] : &s->in[slot]);
}

int plan_op_stage(const plan_plan *p, int op) {
  if (!p || !p->pipeline.present || op < 0 || op >= p->program->nops)
    return -1;
  return p->pipeline.op_stage[op] >= 0 ? p->pipeline.op_stage[op] : -1;
}

int plan_stage_count(const plan_plan *p) {
  return p && p->pipeline.present ? p->pipeline.nstages : 0;
}

static const char *const point_words[PLAN_OVL_POINT_COUNT] = {
    "in_place", "ready", "after", "before", "end"};

bool plan_overlap_point_text(char *buf, size_t size, plan_ovl_point pt,
                             const char *op) {
  buf[0] = 0;
  if (pt == PLAN_OVL_IN_PLACE || pt >= PLAN_OVL_POINT_COUNT)
    return false;
  if (pt == PLAN_OVL_AFTER || pt == PLAN_OVL_BEFORE)
    snprintf(buf, size, "%s %s", point_words[pt], op ? op : "");
  else
    snprintf(buf, size, "%s", point_words[pt]);
  return true;
}

int plan_overlap_count(const plan_plan *p) {
  return p ? p->noverlap : 0;
}

int plan_overlap_entry(plan_overlap_info *out, const plan_plan *p, int i) {
  static const char *const sel[PLAN_OVL_SELECT_COUNT] = {"input", "param",
                                                         "grad_sync"};
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_overlap_entry: NULL argument");
  if (i < 0 || i >= p->noverlap)
    return plan_failf(PLAN_EUSAGE,
                      "plan_overlap_entry: entry %d of %d out of range", i,
                      p->noverlap);
  const plan_overlap *e = &p->overlap[i];
  out->select = sel[e->select];
  out->pattern = e->pattern;
  out->operand = e->operand;
  out->dim = e->dim;
  out->chunks = e->chunks;
  out->stream = e->stream;
  out->start = point_words[e->start];
  out->wait = point_words[e->wait];
  out->start_op = e->start_op;
  out->wait_op = e->wait_op;
  return PLAN_OK;
}

int plan_mesh_ratio_count(const plan_plan *p) {
  return p && p->has_mesh ? p->mesh.nratios : 0;
}

int plan_mesh_ratio(plan_mesh_ratio_info *out, const plan_plan *p, int k) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_mesh_ratio: NULL argument");
  int n = plan_mesh_ratio_count(p);
  if (k < 0 || k >= n)
    return plan_failf(PLAN_EUSAGE,
                      "plan_mesh_ratio: set %d out of range (the plan has %d)",
                      k, n);
  const plan_ratios *r = &p->mesh.ratios[k];
  out->axis = r->axis;
  out->n = r->n;
  out->weights = r->w;
  return PLAN_OK;
}

int plan_get_training(plan_training_info *out, const plan_plan *p) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_get_training: NULL argument");
  const plan_training *t = &p->training;
  plan_training_info o;
  memset(&o, 0, sizeof o);
  o.present = t->present;
  o.optimizer = (int)t->optimizer;
  o.lr = t->lr;
  o.momentum = t->momentum;
  o.beta1 = t->beta1;
  o.beta2 = t->beta2;
  o.eps = t->eps;
  o.weight_decay = t->weight_decay;
  o.steps = t->steps;
  o.param_dtype = t->param_dtype;
  o.compute_dtype = t->compute_dtype;
  o.grad_dtype = t->grad_dtype;
  o.accum_dtype = t->accum_dtype;
  o.clip_grad_norm = t->clip_grad_norm;
  o.loss_scale = t->loss_scale;
  *out = o;
  return PLAN_OK;
}
