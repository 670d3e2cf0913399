/* The search's primitives over a plan: the legal strategies of an op (its
 * strategy space), and setting an op's strategy or a tensor's placement in
 * place (so a search can apply and undo). Frontends (lua/, cli/) use them;
 * the cost of a choice is the cost model's (cost.h). */
#ifndef LIBPLAN_STRATEGY_SPACE_H
#define LIBPLAN_STRATEGY_SPACE_H

#include "ir/ir.h"

/* One strategy of an op: its inputs' and outputs' placements. */
typedef struct plan_op_strategy {
  plan_placement in[PLAN_MAX_OPERANDS];
  plan_placement out[PLAN_MAX_OPERANDS];
} plan_op_strategy;

/* The legal strategies of op `op` on the plan's mesh, in a canonical order
 * (all-R first). Each mesh axis either replicates or shards one factor of
 * the op's sharding rule (free, reduction or masked; never a
 * need-replication one): every operand dim whose major factor it is gets
 * S along that axis, an input that lacks a reduction factor but is added
 * after the reduction (a bias) gets P(sum), and the outputs are what the
 * rule derives. Combinations the rule refuses (divisibility, compound dims)
 * are left out; so is any sharding along the pipeline axis, or along an
 * axis of size 1. *out is malloc'd (free with free()); *count >= 1 when
 * PLAN_OK. */
int plan_op_strategies(plan_op_strategy **out, int *count, const plan_plan *p,
                       int op);

/* Sets op `op`'s strategy (copies the placements into the plan); the plan
 * must have a mesh. */
int plan_set_strategy(plan_plan *p, int op, const plan_placement *in,
                      const plan_placement *out);
/* Clears op `op`'s strategy (the op then has none). */
void plan_clear_strategy(plan_plan *p, int op);

/* Sets the storage placement of a leaf tensor (input, param, const), or
 * clears it (pl NULL: replicated by default). */
int plan_set_placement(plan_plan *p, int tensor, const plan_placement *pl);

/* Sets the delivered placement of program output k (pl NULL: R). */
int plan_set_output_placement(plan_plan *p, int k, const plan_placement *pl);

/* Sets the mesh's device order: devices[r] is the physical device of
 * logical rank r (row-major over the axes), a permutation of 0..n-1;
 * devices NULL restores iota. Placement is a search decision too: which
 * devices a collective's group spans sets its links (the cost model). */
int plan_set_mesh_devices(plan_plan *p, const int64_t *devices);

#endif
