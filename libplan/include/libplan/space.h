/* libplan: the strategy space, for searches. Placements as values (a fixed
 * layout a caller may build and copy), their compact spelling, the legal
 * strategies of an op, reading and setting an op's strategy and a tensor's
 * placement in place (so a search can apply and undo), the mesh's device
 * order, op kinds and the operand limits, and the allocation-free pricing
 * of an op under a strategy and of a redistribution that a search calls
 * millions of times (the string forms are cost.h's plan_cost_op and
 * plan_cost_redistribute).
 *
 * Placements here are values over the plan's mesh: one entry per mesh
 * axis, in mesh order. The functions that take them from a caller (set,
 * price) expect them normalized for the tensor they place (dims in
 * 0..rank-1, nesting levels resolved): what plan_placement_resolve,
 * plan_placement_for_tensor, plan_op_strategies and the getters give. The
 * setters check that; the pricing, for speed, does not. */
#ifndef LIBPLAN_SPACE_H
#define LIBPLAN_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "cost.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ---------------------------------------------------------------
 * The library's own limits (the core defines the same values; a mismatch
 * does not compile). */

#define PLAN_MAX_RANK 8      /* dims of a tensor */
#define PLAN_MAX_MESH_AXES 8 /* axes of a mesh */
#define PLAN_MAX_OPERANDS 16 /* inputs + outputs of one op */
/* Bytes the compact form of any placement needs, NUL included. */
#define PLAN_PLACEMENT_STRLEN (PLAN_MAX_MESH_AXES * 12 + 1)

/* ---- placements -----------------------------------------------------------
 * Layout (part of the ABI): plan_axis_pl is 4 bytes, plan_placement 1 + 4 x
 * PLAN_MAX_MESH_AXES = 33 bytes, alignment 1; entries past naxes are
 * ignored. A zeroed plan_placement with naxes set is all R. */

typedef enum plan_pl_kind {
  PLAN_PL_R = 0, /* replicated */
  PLAN_PL_S = 1, /* sharded along one tensor dim */
  PLAN_PL_P = 2  /* partial: ranks hold addends (or operands) of a reduce */
} plan_pl_kind;

typedef enum plan_reduce {
  PLAN_RED_SUM = 0,
  PLAN_RED_AVG = 1,
  PLAN_RED_MAX = 2,
  PLAN_RED_MIN = 3,
  PLAN_RED_COUNT
} plan_reduce;

/* The placement of a tensor along one mesh axis. */
typedef struct plan_axis_pl {
  uint8_t kind;   /* plan_pl_kind */
  uint8_t reduce; /* plan_reduce, for P */
  int8_t dim;    /* for S: tensor dim (normalised to >= 0 once rank is known) */
  int8_t level;  /* for S: nesting level among the axes sharding `dim`,
                    0 = major. Default: order of the mesh axes. */
  uint8_t ratio; /* for S (format 1.1): 0 = torch.chunk's equal pieces;
                    k > 0 = pieces in the proportions of the plan's ratio
                    set k - 1 (plan_mesh.ratios), one weight per index of
                    this axis */
} plan_axis_pl;

/* A placement over the whole mesh: one entry per mesh axis, in mesh order. */
typedef struct plan_placement {
  uint8_t naxes;
  plan_axis_pl ax[PLAN_MAX_MESH_AXES];
} plan_placement;

/* One strategy of an op: how it consumes each input (in[0..nin)) and
 * produces each output (out[0..nout)); entries past those are unused. */
typedef struct plan_op_strategy {
  plan_placement in[PLAN_MAX_OPERANDS];
  plan_placement out[PLAN_MAX_OPERANDS];
} plan_op_strategy;

/* ---- the compact spelling ---------------------------------------------------
 * One entry per mesh axis, concatenated: R, S(d) (negative d counts from
 * the end), S(d:k) (dim d at nesting level k, 0 major), P(sum) P(avg)
 * P(max) P(min) (bare P is P(sum)); the long spellings Replicate(),
 * Shard(d), Partial(op) too (spec/plan-format.md). */

/* Parses the compact form `text` (NUL-terminated) of a placement over
 * `naxes` mesh axes into *out. Dims are kept as written (possibly
 * negative); levels not given as S(d:k) are -1 until
 * plan_placement_resolve. PLAN_EINVALID with the message "placement 'TEXT':
 * reason (at byte N)" for a bad spelling or a count of entries other than
 * naxes; PLAN_EUSAGE for a NULL argument or naxes outside
 * 0..PLAN_MAX_MESH_AXES. *out is unchanged on failure. */
PLAN_API int plan_placement_parse_text(plan_placement *out, const char *text,
                                       int naxes);

/* Normalizes *pl for a tensor of rank `rank`: resolves negative dims,
 * checks 0 <= dim < rank, fills default nesting levels (mesh order) and
 * checks explicit ones form 0..n-1 per dim. PLAN_EINVALID with the message
 * "placement: reason" (pl unchanged); PLAN_EUSAGE for NULL. */
PLAN_API int plan_placement_resolve(plan_placement *pl, int rank);

/* The canonical compact form of *pl ("S(0)R", "P(sum)S(1)"; a level is
 * written only where it differs from the mesh order) into buf,
 * NUL-terminated and truncated to size (PLAN_PLACEMENT_STRLEN bytes always
 * suffice). PLAN_ELIMIT when it was truncated, PLAN_EUSAGE for a NULL
 * argument, size 0 or naxes over PLAN_MAX_MESH_AXES. */
PLAN_API int plan_placement_format_text(char *buf, size_t size,
                                        const plan_placement *pl);

/* Whether two normalized placements (plan_placement_resolve) are the same
 * layout: the same entry on every axis, a dim's nesting levels included;
 * entries with shard ratios are equal when they name the same ratio set of
 * one plan. A NULL is equal only to another NULL. */
PLAN_API bool plan_placement_equal(const plan_placement *a,
                                   const plan_placement *b);
/* The mesh axes that shard tensor dim `dim` in a normalized placement,
 * major to minor (by nesting level), into axes; returns their count (0
 * when the dim is not sharded, or for a NULL argument). */
PLAN_API int plan_placement_dim_axes(const plan_placement *p, int dim,
                                     int axes[PLAN_MAX_MESH_AXES]);
/* Whether every level of the sharding of tensor dim `dim` (global size
 * `size`) divides evenly over the mesh axis sizes mesh_sizes[0..naxes):
 * every rank's block of it has the same extent. Never for a level with
 * shard ratios, nor for a NULL argument. */
PLAN_API bool plan_placement_dim_even(const plan_placement *p, int dim,
                                      int64_t size, const int64_t *mesh_sizes);

/* Parses `text` as a placement of tensor `tensor` of p: over p's mesh axes
 * and normalized for the tensor's rank (parse and resolve in one).
 * PLAN_EINVALID with the message "placement 'TEXT': reason"; PLAN_EUSAGE
 * for a NULL argument or a tensor out of range. */
PLAN_API int plan_placement_for_tensor(plan_placement *out, const plan_plan *p,
                                       int tensor, const char *text);
/* Shard ratios (format 1.1) in the compact form, S(0|3:1)R: the weights
 * of a placement's levels are the plan's sets (plan_mesh.ratios), which
 * plan_placement_format_text, having no plan, writes as S(0|#k).
 * plan_placement_for_tensor takes weights the plan already holds (an
 * unknown list: PLAN_EINVALID); plan_placement_for_tensor_in also adds new
 * ones to p's sets (the same checks as a file's: one weight per index of
 * the axis, positive, at most 255 distinct sets; a plan holding them is
 * written as format 1.1).
 * plan_placement_format_in writes *pl with the weights of p's sets into
 * buf as plan_placement_format_text does (PLAN_ELIMIT when truncated), a
 * text either function reads back. */
PLAN_API int plan_placement_for_tensor_in(plan_placement *out, plan_plan *p,
                                          int tensor, const char *text);
PLAN_API int plan_placement_format_in(char *buf, size_t size,
                                      const plan_plan *p,
                                      const plan_placement *pl);

/* ---- op kinds ---------------------------------------------------------------
 * Kinds are numbered 0..plan_op_kind_count()-1 in this library; the number
 * of a name may differ between versions, the names do not. */

PLAN_API int plan_op_kind_count(void);
/* The name of a kind ("matmul"); "unknown" (never NULL) out of range. */
PLAN_API const char *plan_op_kind_name(int kind);
/* The kind of a name, -1 when unknown or NULL. */
PLAN_API int plan_op_kind_from_name(const char *name);
/* The operand counts of a kind: inputs min_in..max_in (max -1: up to
 * PLAN_MAX_OPERANDS - 1) and outputs min_out..max_out (max -1: decided by
 * the op's attributes); each pointer may be NULL. PLAN_ENOTFOUND for a
 * kind out of range (nothing written). */
PLAN_API int plan_op_kind_operands(int *min_in, int *max_in, int *min_out,
                                   int *max_out, int kind);

/* ---- the strategy space -------------------------------------------------- */

/* The legal strategies of op `op` on the plan's mesh, in a canonical order
 * (all-R first). Each mesh axis either replicates or shards one factor of
 * the op's sharding rule (free, reduction or masked; never a
 * need-replication one): every operand dim whose major factor it is gets
 * S along that axis, an input that lacks a reduction factor but is added
 * after the reduction (a bias) gets P(sum), and the outputs are what the
 * rule derives. Combinations the rule refuses (divisibility, compound dims)
 * are left out; so is any sharding along the pipeline axis, or along an
 * axis of size 1. *out holds *count entries (*count >= 1 on PLAN_OK) and
 * is freed with plan_buffer_free. PLAN_EUSAGE for a NULL argument, a plan
 * without a mesh or an op out of range; PLAN_EINVALID when the op has no
 * sharding rule for its shapes or too many strategies to list; PLAN_ENOMEM.
 * *out is NULL and *count 0 on failure. */
PLAN_API int plan_op_strategies(plan_op_strategy **out, int *count,
                                const plan_plan *p, int op);

/* ---- reading decisions as values ----------------------------------------- */

/* Op `op`'s strategy into *out (its nin inputs and nout outputs; the other
 * entries are left as they were). PLAN_ENOTFOUND when the op has none;
 * PLAN_EUSAGE for a NULL argument, no mesh or an op out of range. */
PLAN_API int plan_get_strategy(plan_op_strategy *out, const plan_plan *p,
                               int op);
/* The storage placement the plan states for leaf `tensor` (an input, param
 * or const). PLAN_ENOTFOUND when it states none (the leaf is R);
 * PLAN_EUSAGE for a NULL argument, no mesh or a tensor that is not a leaf. */
PLAN_API int plan_get_placement(plan_placement *out, const plan_plan *p,
                                int tensor);
/* The delivered placement the plan states for program output k (0-based,
 * plan_program_output). PLAN_ENOTFOUND when it states none (R);
 * PLAN_EUSAGE for a NULL argument, no mesh or k out of range. */
PLAN_API int plan_get_output_placement(plan_placement *out, const plan_plan *p,
                                       int k);
/* 1 when a pinned region holds op `op` (its strategy is a constraint a
 * search keeps), else 0 (also for a bad argument). */
PLAN_API int plan_op_pinned(const plan_plan *p, int op);

/* ---- editing decisions in place ------------------------------------------
 * The plan keeps copies of what it is given (plan_set_strategy and
 * plan_set_mesh_devices in memory the plan holds until plan_free, so every
 * call grows it by the copy). The edits are taken as given
 * (plan_validate judges them); placements must have the mesh's axis count,
 * kinds and reduces in range and S dims inside the tensor's rank, else
 * PLAN_EINVALID naming the operand, with nothing changed. */

/* Sets op `op`'s strategy: in[0..nin) and out[0..nout) of the op.
 * PLAN_EUSAGE for a NULL argument, no mesh or an op out of range;
 * PLAN_EINVALID for a placement that does not fit (above); PLAN_ENOMEM. */
PLAN_API int plan_set_strategy(plan_plan *p, int op, const plan_placement *in,
                               const plan_placement *out);
/* Clears op `op`'s strategy (the op then has none). PLAN_EUSAGE for a NULL
 * plan or an op out of range. */
PLAN_API int plan_clear_strategy(plan_plan *p, int op);
/* Sets the storage placement of leaf `tensor` (input, param, const), or
 * clears it (pl NULL: R). PLAN_EUSAGE for a NULL plan, no mesh or a tensor
 * that is not a leaf; PLAN_EINVALID for a placement that does not fit. */
PLAN_API int plan_set_placement(plan_plan *p, int tensor,
                                const plan_placement *pl);
/* Sets the delivered placement of program output k (pl NULL: R).
 * PLAN_EUSAGE for a NULL plan, no mesh or k out of range; PLAN_EINVALID
 * for a placement that does not fit. */
PLAN_API int plan_set_output_placement(plan_plan *p, int k,
                                       const plan_placement *pl);
/* Sets the mesh's device order: devices[r] is the physical device of
 * logical rank r (row-major over the axes), a permutation of 0..n-1 with n
 * = plan_mesh_device_count; devices NULL restores iota. Which devices a
 * collective's group spans sets its links, so a search may choose it too:
 * a cost model made before prices the new order after
 * plan_cost_model_update_mesh. PLAN_EUSAGE for a NULL plan or no mesh;
 * PLAN_EINVALID for a list that is not a permutation; PLAN_ENOMEM. */
PLAN_API int plan_set_mesh_devices(plan_plan *p, const int64_t *devices);

/* ---- the device assignment on a topology --------------------------------
 * What-if questions (a torus the file does not describe, hardware per
 * device) and the placement search that picks mesh.devices on the
 * topology (docs/heterogeneous.md, "Placement search"). */

/* How the physical devices are wired (the file's `mesh.topology`): a
 * hierarchy of levels (level l groups `level_size[l]` consecutive devices
 * of level l - 1; the last level spans everything, its size 0), or a 1-3-D
 * torus of `dims` (devices numbered row-major; wrap[d] 0: a mesh without
 * wraparound in dim d). Links are per device and direction, bytes/s and
 * seconds; the strings are copied. */
#define PLAN_TOPOLOGY_MAX_LEVELS 4
typedef struct plan_topology_spec {
  int torus; /* 1: the torus fields; 0: the levels */
  int nlevels;
  const char *level_name[PLAN_TOPOLOGY_MAX_LEVELS];
  int64_t level_size[PLAN_TOPOLOGY_MAX_LEVELS];
  double level_bandwidth[PLAN_TOPOLOGY_MAX_LEVELS];
  double level_latency[PLAN_TOPOLOGY_MAX_LEVELS];
  int ndims;
  int64_t dims[3];
  int wrap[3];
  double bandwidth; /* torus: one neighbour link */
  double latency;
} plan_topology_spec;

/* Sets p's mesh topology to a copy of *t (NULL: none). PLAN_EUSAGE for a
 * NULL plan or no mesh; PLAN_EINVALID (nothing changed) for a torus whose
 * dims do not multiply to the device count, levels whose group sizes do
 * not divide it, a count out of range or a link without a positive
 * bandwidth; PLAN_ENOMEM. A cost model made before prices the new
 * topology after plan_cost_model_update_mesh. */
PLAN_API int plan_set_mesh_topology(plan_plan *p, const plan_topology_spec *t);

/* The kind of p's mesh topology: 1 a torus, 0 levels, -1 none (or no
 * mesh). */
PLAN_API int plan_mesh_topology_kind(const plan_plan *p);

/* Gives physical device d the built-in hardware profile names[d] (d <
 * plan_mesh_device_count); per-device hardware replaces the mesh's one
 * `hardware` profile, as in a file, which holds one or the other (names
 * NULL: no per-device hardware; a replaced profile is not restored).
 * PLAN_EUSAGE for a NULL plan or no mesh; PLAN_ENOTFOUND (nothing
 * changed) for a name that is no built-in profile; PLAN_ENOMEM. Only a
 * cost model made after the change prices the new hardware. */
PLAN_API int plan_set_mesh_device_hardware(plan_plan *p,
                                           const char *const *names);

/* Gives dst's mesh the physical side of src's: the hardware, each
 * device's profile, the topology and devices_per_host (copies; per-axis
 * link overrides follow their axis by name), for a plan of the same
 * devices in another logical shape (the mesh shape search). PLAN_EUSAGE
 * for a NULL plan or no mesh; PLAN_EINVALID (nothing changed) when the
 * device counts differ; PLAN_ENOMEM. */
PLAN_API int plan_mesh_copy_physical(plan_plan *dst, const plan_plan *src);

/* One device assignment the placement search priced. */
typedef struct plan_placement_candidate {
  char curve[24]; /* "default", "row-major", "snake", "tiled", "host-major",
                     "interleaved" */
  char order[96]; /* the mesh axes in the order the curve walks them,
                     "dp,tp" ("" for the default) */
  double step;    /* its modeled step, seconds */
} plan_placement_candidate;

#define PLAN_PLACEMENT_MAX_CANDIDATES 128
typedef struct plan_placement_result {
  plan_placement_candidate best; /* the one kept (the default on a tie) */
  double default_step;           /* the plan's own device order's step */
  int candidates;                /* assignments priced */
  int listed;                    /* entries of list[] filled, in the order
                                    priced (the first the default) */
  plan_placement_candidate list[PLAN_PLACEMENT_MAX_CANDIDATES];
  double seconds; /* processor time the search took */
} plan_placement_result;

/* What the placement search prices with. The pointers are borrowed for
 * the call. */
typedef struct plan_placement_options {
  unsigned int version; /* PLAN_PLACEMENT_OPTIONS_VERSION */
  const char *profile;  /* a built-in profile for every device; NULL: the
                           plan's hardware, per device where it says */
  /* what-if: this topology instead of the mesh's (NULL: the mesh's) */
  const plan_topology_spec *topology;
  /* what-if: device d's built-in profile names devices[d] instead of the
   * mesh's hardware (NULL: the mesh's; `profile` then is ignored) */
  const char *const *device_hardware;
  int keep; /* 1: leave p's devices at the best order; 0: as they were */
} plan_placement_options;
#define PLAN_PLACEMENT_OPTIONS_VERSION 1
#define PLAN_PLACEMENT_OPTIONS_INIT                                            \
  { PLAN_PLACEMENT_OPTIONS_VERSION, NULL, NULL, NULL, 1 }

/* The placement search: tries the plan's own device order, then every
 * curve through the topology's devices (torus: row-major, snake, 2x2
 * tiles; levels: host-major, interleaved across the top level's groups)
 * with every order of the mesh axes larger than 1, prices each with the
 * cost model (opts NULL: PLAN_PLACEMENT_OPTIONS_INIT), and fills *out; the
 * least step is kept (ties keep the earlier). The what-if topology and
 * hardware apply only during the call: p's mesh keeps its own. PLAN_EUSAGE
 * for a NULL argument, an unknown options version or no topology at all;
 * the setters' failures for bad what-ifs; a pricing failure's status. On a
 * failure p is as before. */
PLAN_API int plan_search_placement(plan_placement_result *out, plan_plan *p,
                                   const plan_placement_options *opts);

/* ---- pricing (allocation-free) --------------------------------------------
 * What a search calls millions of times, so the arguments are not checked
 * beyond the indices: out, m and p are not NULL, m was made for p's
 * program and mesh shape (plan_cost_model_new; p may be a copy a search
 * edits), and every placement given is a normalized placement of its
 * tensor over p's mesh (what plan_placement_resolve,
 * plan_placement_for_tensor, plan_op_strategies and the getters above
 * give). Anything else is undefined behaviour; cost.h's plan_cost_op and
 * plan_cost_redistribute are the checked string forms. Both read only the
 * model and the plan and allocate nothing, so threads may price with one
 * model at once. */

/* Seconds op `op` takes on its local blocks (the slowest rank's, forward,
 * whole batch) when it consumes in[0..nin) and produces out_pl[0..nout);
 * NULL for either: the plan's own strategy. PLAN_EUSAGE (and *out 0) for
 * an op out of range, or NULL placements for an op without a strategy. */
PLAN_API int plan_cost_op_seconds(double *out, const plan_cost_model *m,
                                  const plan_plan *p, int op,
                                  const plan_placement *in,
                                  const plan_placement *out_pl);

/* Seconds op `op` takes on logical rank `rank` (0 <= rank <
 * plan_mesh_device_count; row-major over the mesh axes): the rank's own
 * piece of every operand (shard ratios included) at the speed, memory
 * bandwidth and calibration of the device it runs on (mesh.devices, the
 * device's hardware profile), forward, whole batch; NULL placements: the
 * plan's own strategy. PLAN_EUSAGE (and *out 0) for an op or rank out of
 * range, or NULL placements for an op without a strategy. */
PLAN_API int plan_cost_op_seconds_rank(double *out, const plan_cost_model *m,
                                       const plan_plan *p, int op, int64_t rank,
                                       const plan_placement *in,
                                       const plan_placement *out_pl);

/* Seconds to change tensor `tensor` from placement *from to *to (whole
 * batch): the redistribution planner's steps, each priced on the devices
 * its group spans; 0 when they are equal. PLAN_EUSAGE (and *out 0) for a
 * tensor out of range; PLAN_EINVALID when the planner cannot make the
 * change. */
PLAN_API int plan_cost_redist_seconds(double *out, const plan_cost_model *m,
                                      const plan_plan *p, int tensor,
                                      const plan_placement *from,
                                      const plan_placement *to);

#ifdef __cplusplus
}
#endif
#endif
