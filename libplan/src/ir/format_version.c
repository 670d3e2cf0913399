/* The format version a document is written and hashed as: the lowest that
 * holds its content (spec/plan-format.md, "Versions"). A plan that uses no
 * format 1.1 field (shard ratios, per-device hardware, a topology, a
 * pipeline schedule named from 1.1 on) is 1.0
 * whatever its file said; one that does is 1.1. The pre-release 0.1 keeps
 * its own version (its hashes stay), unless 1.1 content was added to it. A
 * program has no 1.1 field: 1.0 (or its pre-release version). */
#include "ir/placement.h"

bool plan_mesh_uses_1_1(const plan_mesh *m) {
  /* the test the writer and the hash use for per-device hardware */
  return (m->device_profile != NULL && m->nprofiles > 0) || m->topology != NULL;
}

static bool any_ratios(const plan_placement *pl, int n) {
  for (int i = 0; pl && i < n; i++)
    if (plan_placement_has_ratios(&pl[i]))
      return true;
  return false;
}

bool plan_plan_uses_1_1(const plan_plan *p) {
  /* looped-bfs, interleaved-zb, zbv, dualpipev */
  if (p->pipeline.present && p->pipeline.schedule >= PLAN_SCHED_FILE_COUNT_1_0)
    return true;
  if (!p->has_mesh)
    return false;
  if (p->noverlap > 0) /* communication overlap */
    return true;
  if (plan_mesh_uses_1_1(&p->mesh))
    return true;
  if (p->mesh.nratios == 0)
    return false; /* no set: no placement can name one */
  const plan_program *prog = p->program;
  for (int t = 0; t < prog->ntensors; t++) {
    if (p->placements && p->placements[t].set &&
        any_ratios(&p->placements[t].pl, 1))
      return true;
    if (p->training.present && p->training.params &&
        p->training.params[t].has_state_pl &&
        any_ratios(&p->training.params[t].state_pl, 1))
      return true;
  }
  for (int i = 0; p->out_pl && i < prog->noutputs; i++)
    if (p->out_pl[i].set && any_ratios(&p->out_pl[i].pl, 1))
      return true;
  for (int i = 0; p->strategies && i < prog->nops; i++) {
    const plan_strategy *s = &p->strategies[i];
    if (s->set && (any_ratios(s->in, prog->ops[i].nin) ||
                   any_ratios(s->out, prog->ops[i].nout)))
      return true;
  }
  for (int r = 0; r < p->nregions; r++) {
    const plan_region *g = &p->regions[r];
    for (int i = 0; i < g->ninputs; i++)
      if (any_ratios(&g->inputs[i].pl, 1))
        return true;
    for (int i = 0; i < g->noutputs; i++)
      if (any_ratios(&g->outputs[i].pl, 1))
        return true;
  }
  return false;
}

void plan_plan_format(const plan_plan *p, int *major, int *minor) {
  bool v11 = plan_plan_uses_1_1(p);
  if (p->version_major == 0 && !v11) {
    *major = p->version_major;
    *minor = p->version_minor;
    return;
  }
  *major = 1;
  *minor = v11 ? 1 : 0;
}

void plan_mesh_format(const plan_plan *p, int *major, int *minor) {
  bool v11 = p->has_mesh && plan_mesh_uses_1_1(&p->mesh);
  if (p->version_major == 0 && !v11) {
    *major = p->version_major;
    *minor = p->version_minor;
    return;
  }
  *major = 1;
  *minor = v11 ? 1 : 0;
}

void plan_program_format(const plan_program *p, int *major, int *minor) {
  *major = p->version_major == 0 ? 0 : 1;
  *minor = p->version_major == 0 ? p->version_minor : 0;
}
