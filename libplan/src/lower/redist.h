/* The redistribution planner: the sequence of collectives and local steps
 * that turns one placement of a tensor on a mesh into another (DTensor's
 * redistribute), with the bytes each step moves for the cost model.
 *
 * Every step acts along ONE mesh axis. The group of a rank is the set of
 * ranks whose coordinates differ from its own only on that axis, ordered by
 * that axis's coordinate (k = the axis size members). Each step records the
 * placement before and after it; the local layout of either (see
 * plan_redist_local_layout) says exactly which piece of the global tensor a
 * rank holds, so a runner needs nothing else to execute a step:
 *
 *   ALL_GATHER(a, d)        a is the minor-most axis sharding dim d. Each
 *                           rank's new local tensor is the concatenation
 *                           along d, in coordinate order, of the group's
 *                           local tensors (pieces may be uneven or empty).
 *                           a becomes R.
 *   ALL_REDUCE(a, op)       a is P(op). Elementwise reduction over the group;
 *                           avg is sum / k. a becomes R.
 *   REDUCE_SCATTER(a, op, d) a is P(op). The group's local tensors (same
 *                           shape) are reduced elementwise, then each rank
 *                           keeps its piece along d: piece c of k, by
 *                           torch.chunk (chunk size ceil(len / k), trailing
 *                           pieces smaller or empty) or, when the step's
 *                           `ratio` names a set, by its weights. a becomes
 *                           S(d), the new minor-most level of d.
 *   ALL_TO_ALL(a, i, j)     a is the minor-most axis sharding dim i and does
 *                           not shard j. Each rank splits its local tensor
 *                           along j into k pieces (torch.chunk, or the
 *                           step's ratio set) and sends piece s to the
 *                           member with coordinate s; it concatenates what
 *                           it receives along i in coordinate order (the
 *                           members' pieces of i, equal or not). a becomes
 *                           S(j), the new minor-most level of j.
 *   SLICE(a, d)             a is R. Each rank keeps its piece (its
 *                           coordinate on a, of k; torch.chunk or the
 *                           step's ratio set) of its local tensor along d.
 *                           a becomes S(d), the new minor-most level.
 *   ZERO_NON_OWNER(a)       R -> P(sum): ranks whose coordinate on a is not 0
 *                           set their local tensor to zeros (no division by
 *                           k, so exact mode stays exact).
 *   RELABEL(a, op)          R -> P(op) for op avg, max or min: no data
 *                           changes.
 *
 * With shard ratios (format 1.1) a level's pieces follow its set's weights
 * (plan_placement_dim_range_r); a level is the same only when its axis and
 * its set are: S(0|3:2) -> S(0) gathers and slices again.
 *
 * Partial placements that mix max or min with another reduce op over several
 * axes have no order-free meaning; the planner reduces such axes one at a
 * time and does not promise an order among them. Sum and avg commute. */
#ifndef LIBPLAN_REDIST_H
#define LIBPLAN_REDIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

typedef enum plan_redist_kind {
  PLAN_REDIST_ALL_GATHER,
  PLAN_REDIST_ALL_REDUCE,
  PLAN_REDIST_REDUCE_SCATTER,
  PLAN_REDIST_ALL_TO_ALL,
  PLAN_REDIST_SLICE,
  PLAN_REDIST_ZERO_NON_OWNER,
  PLAN_REDIST_RELABEL,
  PLAN_REDIST_COUNT
} plan_redist_kind;

/* "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "slice",
 * "zero_non_owner", "relabel"; "?" out of range. */
const char *plan_redist_kind_name(plan_redist_kind k);

typedef struct plan_redist_step {
  plan_redist_kind kind;
  int axis;           /* the mesh axis the step acts along */
  int dim;            /* ALL_GATHER, REDUCE_SCATTER, SLICE: the tensor dim;
                         ALL_TO_ALL: the dim the axis leaves; else -1 */
  int to_dim;         /* ALL_TO_ALL: the dim the axis goes to; else -1 */
  plan_reduce reduce; /* ALL_REDUCE, REDUCE_SCATTER: the reduction;
                         RELABEL: the new op; ZERO_NON_OWNER: sum */
  int ratio;          /* SLICE, REDUCE_SCATTER, ALL_TO_ALL: the ratio set of
                         the new level (plan_axis_pl.ratio; 0 = torch.chunk);
                         else 0 */
  plan_placement before, after; /* normalised */
  /* Bytes one rank sends and receives in this step, the maximum over ranks
   * (each taken on its own). Volumes are the data that must move, not an
   * algorithm's: ALL_GATHER sends its piece to k-1 members and receives
   * the others' pieces; REDUCE_SCATTER sends each member the part it keeps
   * and receives k-1 parts of its own; ALL_REDUCE counts as a reduce-scatter
   * plus an all-gather of the flattened tensor cut into k torch.chunks
   * (2 (k-1) / k of the tensor when even); ALL_TO_ALL sends and receives
   * every piece but the one it keeps. Local steps move nothing. Saturates at
   * INT64_MAX. */
  int64_t send_bytes, recv_bytes;
} plan_redist_step;

/* Each axis is removed, added, reduced and relabelled at most once. */
#define PLAN_REDIST_MAX_STEPS (4 * PLAN_MAX_MESH_AXES + 8)

typedef struct plan_redist_plan {
  int nsteps;
  plan_redist_step steps[PLAN_REDIST_MAX_STEPS];
  plan_placement src, dst;        /* normalised */
  int64_t send_bytes, recv_bytes; /* sums over steps (saturating) */
} plan_redist_plan;

/* Plans the redistribution of a tensor of rank `rank` and global shape
 * `shape` (elements of dtype_size bytes) on a mesh of `naxes` axes with
 * sizes mesh_sizes, from placement *src to *dst (normalised here on copies;
 * both must have naxes axes). The steps run in order on every rank. Order of
 * work: shardings that must go are removed minor-most first (ALL_GATHER, or
 * ALL_TO_ALL when the axis can go straight to its target dim), shardings the
 * target adds are added major first as soon as their dim is ready (SLICE
 * from R, REDUCE_SCATTER from P), partial axes that do not become shards are
 * all-reduced where the local tensor is smallest, and R -> P comes last.
 * Returns PLAN_OK, or PLAN_EINVALID with a reason in err (errsz bytes, err
 * may be NULL) for bad arguments or placements; *out is then unspecified.
 * Allocates nothing. */
int plan_redistribute(plan_redist_plan *out, const int64_t *shape, int rank,
                      int dtype_size, const int64_t *mesh_sizes, int naxes,
                      const plan_placement *src, const plan_placement *dst,
                      char *err, size_t errsz);

/* The same with the plan's shard ratio sets (plan_mesh.ratios; NULL: none):
 * placements whose entries name sets are laid out, and their steps priced,
 * by them (the byte counts then come from every rank's pieces). */
int plan_redistribute_r(plan_redist_plan *out, const int64_t *shape, int rank,
                        int dtype_size, const int64_t *mesh_sizes, int naxes,
                        const plan_ratios *sets, int nsets,
                        const plan_placement *src, const plan_placement *dst,
                        char *err, size_t errsz);

/* Applies step s to placement *p (what the step turns it into); false when
 * the step does not apply to *p (an all-gather over an axis that does not
 * shard its dim at the minor-most level, an all-reduce of a non-partial
 * axis...). Used to check hand-written lowered programs. *p normalised. */
bool plan_redist_apply(plan_placement *p, const plan_redist_step *s);

/* The local layout of the rank at mesh coordinates coord: for each of the
 * `rank` dims, its local length local_shape[d] and the global offset
 * offset[d] of its first element (nested torch.chunk, as
 * plan_placement_dim_range). Partial axes do not change the layout. *p must
 * be normalised; either output may be NULL. */
void plan_redist_local_layout(const plan_placement *p, const int64_t *shape,
                              int rank, const int64_t *mesh_sizes,
                              const int64_t *coord, int64_t *local_shape,
                              int64_t *offset);

/* The same with the plan's ratio sets (plan_placement_dim_range_r). */
void plan_redist_local_layout_r(const plan_placement *p, const int64_t *shape,
                                int rank, const int64_t *mesh_sizes,
                                const plan_ratios *sets, int nsets,
                                const int64_t *coord, int64_t *local_shape,
                                int64_t *offset);

#endif
