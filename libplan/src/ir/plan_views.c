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

int plan_placement_format_plan(char *buf, size_t size, const plan_plan *p,
                               const plan_placement *pl) {
  if (!buf || !size || !p || !pl)
    return plan_failf(PLAN_EUSAGE, "plan_placement_format_plan: NULL argument");
  if (pl->naxes > PLAN_MAX_MESH_AXES)
    return plan_failf(PLAN_EUSAGE, "a placement of %d axes", pl->naxes);
  size_t n =
      plan_placement_format_r(pl, p->has_mesh ? p->mesh.ratios : NULL,
                              p->has_mesh ? p->mesh.nratios : 0, buf, size);
  return n >= size ? PLAN_ELIMIT : PLAN_OK;
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
