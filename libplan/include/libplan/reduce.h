/* libplan: shape reduction (docs/verify.md, "Shape reduction"). The same
 * plan, or the same lowered program, over a smaller program with the same
 * sharding structure, so a plan of a real model size verifies in seconds
 * (`plan verify --reduce`). A transformation of plans: it is in the core
 * library, libplan; it runs nothing. */
#ifndef LIBPLAN_REDUCE_H
#define LIBPLAN_REDUCE_H

#include "common.h"
#include "lowered.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shape reduction (docs/verify.md, after TrainVerify): a new plan whose
 * program is smaller but keeps the sharding structure of `p`, so a plan of
 * a real model size verifies in seconds. The mesh, placements and strategies
 * are the same; every dim shrinks as far as these rules allow:
 * - dims that the ops tie together (by their factor-based sharding rules)
 *   get one size, and a merged dim is the product of its parts;
 * - a dim sharded evenly over k ranks stays a multiple of k, with
 *   min(n/k, 2) elements per shard; one sharded unevenly over one axis
 *   keeps its torch.chunk pattern (full, partial and empty pieces) with
 *   pieces of at least min(original, 2) elements; any other dim shrinks to
 *   min(n, 2);
 * - split/concat's split dim, a dim sharded unevenly over several axes, a
 *   dim no rule describes, and every dim tied to one of them, keep their
 *   size; integer ranges that index a dim (embedding ids, cross-entropy
 *   labels: [lo, n)) follow it; reshape shapes and split sizes are
 *   rewritten.
 * The result is written and read back, so its shapes are inferred and
 * checked like any loaded plan's. *summary (unless summary is NULL) is a
 * one-line account, newly allocated (free with plan_buffer_free):
 *   "reduced: batch 8->4, hidden 1024->2, ... (512x fewer elements)"
 * Returns PLAN_OK; PLAN_EUNSUPPORTED for manual regions;
 * PLAN_EINVALID when the reduced plan does not load or validate while `p`
 * does (a bug of the reduction; the message names the op); PLAN_ENOMEM;
 * PLAN_EUSAGE for NULL arguments. */
PLAN_API int plan_reduce_shapes(plan_plan **out, char **summary,
                                const plan_plan *p);

/* Mesh reduction, with the shapes' (docs/verify.md, "Mesh reduction"):
 * plan_reduce_plan: with PLAN_REDUCE_MESH in `what`, every mesh axis of size k
 * also shrinks to its smallest divisor d > 1, since the ranks along an axis run
 * one program on their own data and d of them show what k do. An axis keeps its
 * size where its ranks are named one by one (the pipeline axis, an axis with a
 * ratio set, one a submesh fixes, in a lowered program the axes of a step that
 * lists its ranks) or where some dim it splits cannot keep its pattern over d
 * ranks: evenly split dims stay multiples of the reduced rank count with
 * min(n/k, 2) per shard, unevenly split ones keep the kinds of piece they had
 * (full, partial, empty). A pipeline's microbatches shrink to the smallest
 * divisor of their count that keeps every phase of its schedule (at least
 * the pipeline ranks for GPipe and 1F1B, twice them for the others; an
 * explicit grid keeps its count). The device list, per-device hardware and
 * topology are left out of the reduced plan. The summary says what the mesh
 * became ("; mesh: dp 8->2, tp 4->2 (32->4 ranks)") and which axes kept their
 * size and why. what = 0 is plan_reduce_shapes / plan_reduce_lowered. */
#define PLAN_REDUCE_MESH 1u
PLAN_API int plan_reduce_plan(plan_plan **out, char **summary,
                              const plan_plan *p, unsigned what);

/* Shape reduction of a lowered program, through its program: its buffers
 * carry only placements, so they take the place of strategies as the
 * constraints (same rules as plan_reduce_shapes); the buffers, steps,
 * layouts and outputs stay as they are. The result is written and read
 * back (plan_lowered_load_buffer checks every step again); free it with
 * plan_lowered_free. *summary as for plan_reduce_shapes (unless summary is
 * NULL). PLAN_EUSAGE for a NULL out or l, PLAN_EUNSUPPORTED for manual
 * regions, PLAN_EINVALID, PLAN_ENOMEM. */
PLAN_API int plan_reduce_lowered(plan_lowered **out, char **summary,
                                 const plan_lowered *l);
/* The same with `what` as for plan_reduce_plan (PLAN_REDUCE_MESH: the mesh
 * too; the steps keep their axes). */
PLAN_API int plan_lowered_reduce(plan_lowered **out, char **summary,
                                 const plan_lowered *l, unsigned what);

#ifdef __cplusplus
}
#endif
#endif
