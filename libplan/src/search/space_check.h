/* What libplan/space.h's functions check of the placements a caller gives
 * them before they set or price them: the mesh's axis count, kinds and
 * reduces in range, S dims inside the tensor's rank and levels inside the
 * mesh. Inline, for the pricing a search calls millions of times. */
#ifndef LIBPLAN_SPACE_CHECK_H
#define LIBPLAN_SPACE_CHECK_H

#include <stdbool.h>

#include "base/util.h"
#include "ir/ir.h"
#include "ir/placement.h"

/* True when pl is a placement the core may read for a tensor of `rank` on
 * a mesh of `naxes` axes. */
static inline bool plan_space_fits(const plan_placement *pl, int naxes,
                                   int rank) {
  if (pl->naxes != naxes)
    return false;
  for (int a = 0; a < naxes; a++) {
    const plan_axis_pl *e = &pl->ax[a];
    if (e->kind == PLAN_PL_S) {
      if (e->dim < 0 || e->dim >= rank || e->level < 0 || e->level >= naxes)
        return false;
    } else if (e->kind == PLAN_PL_P) {
      if (e->reduce >= PLAN_RED_COUNT)
        return false;
    } else if (e->kind != PLAN_PL_R) {
      return false;
    }
  }
  return true;
}

/* PLAN_OK, or PLAN_EINVALID naming `what` and the tensor. */
static inline int plan_space_check_placement(const plan_plan *p, int tensor,
                                             const plan_placement *pl,
                                             const char *what) {
  const plan_tensor *t = &p->program->tensors[tensor];
  if (plan_space_fits(pl, p->mesh.naxes, t->rank))
    return PLAN_OK;
  char buf[PLAN_PLACEMENT_STRLEN];
  return plan_failf(PLAN_EINVALID,
                    "%s of tensor '%s': '%s' (%d axes) is no normalized "
                    "placement for rank %d on %d mesh axes",
                    what, t->name, plan_placement_format(pl, buf), pl->naxes,
                    t->rank, p->mesh.naxes);
}

/* The operands' placements of op `op` (in or out may be NULL: not
 * checked). */
static inline int plan_space_check_operands(const plan_plan *p, int op,
                                            const plan_placement *in,
                                            const plan_placement *out) {
  const plan_op *o = &p->program->ops[op];
  int rc;
  for (int j = 0; in && j < o->nin; j++)
    if (!plan_space_fits(&in[j], p->mesh.naxes,
                         p->program->tensors[o->in[j]].rank) &&
        (rc = plan_space_check_placement(p, o->in[j], &in[j], "input")))
      return rc;
  for (int k = 0; out && k < o->nout; k++)
    if (!plan_space_fits(&out[k], p->mesh.naxes,
                         p->program->tensors[o->out[k]].rank) &&
        (rc = plan_space_check_placement(p, o->out[k], &out[k], "output")))
      return rc;
  return PLAN_OK;
}

#endif
