/* The device assignment as a searched decision on the mesh's topology
 * (docs/cost.md, "Placement search"): which physical device each logical
 * rank is, beyond permutations of the mesh axes. A candidate is a curve
 * through the physical devices (torus: row-major, snake, 2x2 tiles;
 * levels: host-major, interleaved across the top level's groups) composed
 * with an order of the mesh axes; each is priced with the cost model
 * (plan_cost_plan's step), not run. */
#ifndef LIBPLAN_PLACEMENT_SEARCH_H
#define LIBPLAN_PLACEMENT_SEARCH_H

#include <stdint.h>

#include "ir/ir.h"
#include "libplan/cost.h"

typedef struct plan_placement_choice {
  char curve[24];      /* "row-major", "snake", "tiled", "host-major", ... */
  char order[96];      /* the axis order, "dp,tp" */
  double step;         /* the chosen assignment's modeled step, seconds */
  double default_step; /* the default order's (the plan's devices) */
  int candidates;      /* assignments priced */
  double seconds;      /* processor time the search took */
} plan_placement_choice;

/* Fills curve[n] (n = the topology's device count) with the physical
 * device at each position of curve `which` ("row-major", "snake", "tiled",
 * "host-major", "interleaved"); PLAN_ENOTFOUND when it does not apply. */
int plan_placement_curve(int64_t *curve, const plan_topology *t, int64_t n,
                         const char *which);

/* Tries every curve that applies to p's topology with every order of the
 * mesh axes larger than 1, prices each with a model for `profile` (NULL:
 * the plan's hardware), and leaves p's devices set to the least step's
 * (ties keep the earlier; the plan's own order is tried first and wins
 * ties). PLAN_EUSAGE without a topology. */
int plan_placement_search(plan_placement_choice *out, plan_plan *p,
                          const char *profile);

#endif
