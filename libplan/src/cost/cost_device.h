/* The cost per device: the internal API that prices one logical rank's
 * piece of an op on its own device, and a collective over a group of
 * physical devices on the real path (docs/cost.md, "Unlike devices" and
 * "Topology"). The placement search and the ratio LP price with it; it is
 * kept stable for them.
 *
 * Ranks and devices: a logical rank r has mesh coordinates (row-major over
 * the axes, the last fastest) that pick its piece of every tensor (ratios
 * included, plan_placement_dim_range_r) and runs on physical device
 * plan_cost_rank_device(m, r) (mesh.devices; iota when absent), whose
 * hardware is its profile's (mesh.device_profile) or the model's.
 *
 * Everything here only reads the model and the plan and allocates nothing,
 * as plan_cost_op_seconds does. */
#ifndef LIBPLAN_COST_DEVICE_H
#define LIBPLAN_COST_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/cost_model.h"

/* ---- devices ------------------------------------------------------------- */

/* The physical device of logical rank `rank` (0 <= rank < ndevices). */
int64_t plan_cost_rank_device(const plan_cost_model *m, int64_t rank);
/* The mesh coordinates of `rank` into coord[naxes]. */
void plan_cost_rank_coord(const plan_cost_model *m, int64_t rank,
                          int64_t *coord);
/* True when the model's devices have unlike hardware (several profiles). */
bool plan_cost_model_hetero(const plan_cost_model *m);
/* The hardware of physical device `device`: its profile's, or the model's
 * when the mesh has no per-device hardware. Never NULL for a valid id. */
const cost_hw *plan_cost_device_hw(const plan_cost_model *m, int64_t device);
/* Peak FLOP/s x efficiency on `device` in dtype dt, of the matmul units
 * (matmul, linear, attention) or of the vector units (every other op). */
double plan_cost_device_peak(const plan_cost_model *m, int64_t device,
                             plan_dtype dt, bool matmul);
/* Memory bandwidth x efficiency.memory, and memory in bytes, of `device`. */
double plan_cost_device_mem_bw(const plan_cost_model *m, int64_t device);
double plan_cost_device_memory(const plan_cost_model *m, int64_t device);

/* ---- one op on one rank -------------------------------------------------- */

/* Local element count of tensor t under pl on logical rank `rank`: its own
 * piece (the plan's ratio sets apply), not the slowest rank's. */
double plan_cost_rank_numel(const plan_cost_model *m, const plan_plan *p,
                            const plan_tensor *t, const plan_placement *pl,
                            int64_t rank);

/* Op `op` on logical rank `rank`: the rank's own piece of every operand
 * (in[]/outs[]; NULL: the op's strategy) at its device's speed, memory
 * bandwidth and calibration, `split` as plan_cost_op_eval_at. */
int plan_cost_op_eval_rank(cost_op_eval *out, const plan_cost_model *m,
                           const plan_plan *p, int op, int64_t rank,
                           const plan_placement *in, const plan_placement *outs,
                           double split);
/* Its seconds for the whole batch (0 on error). */
int plan_cost_op_rank_seconds(double *out, const plan_cost_model *m,
                              const plan_plan *p, int op, int64_t rank,
                              const plan_placement *in,
                              const plan_placement *outs);

/* True when an evaluation of op under these placements differs between
 * ranks beyond torch.chunk's slowest piece: unlike devices, or a placement
 * with ratios. plan_cost_op_eval_at then takes the slowest rank's time. */
bool plan_cost_op_varies(const plan_cost_model *m, const plan_plan *p, int op,
                         const plan_placement *in, const plan_placement *outs);

/* ---- collectives over a group of devices --------------------------------- */

/* The links a collective over physical devices devs[0..k-1] (in ring
 * order) uses: without a topology the host rule (inter_host when two
 * members sit on two hosts, else intra_host, the slowest profile's); with
 * levels, the slowest level the group crosses; on a torus, the ring's
 * hops and contention under dimension-order routing (cost_topo.c). */
void plan_cost_group_topo(cost_topo_axis *out, const plan_cost_model *m,
                          const int64_t *devs, int k);

/* The time of one collective `kind` (a plan_redist_kind) over a group of k
 * devices whose links are gl: send / recv the bytes one rank sends and
 * receives (the redistribution planner's V), n the local block's bytes
 * (the tree all-reduce). *algorithm gets COST_ALG_RING or _TREE. */
double plan_cost_group_seconds(const plan_cost_model *m, int kind,
                               const cost_topo_axis *gl, int64_t k, double send,
                               double recv, double n, int *algorithm);

#endif
