/* libplan: the cost model. How long a plan's training or inference step
 * takes on a hardware model, what each op and collective costs, how much
 * memory each device needs, and whether it fits (docs/cost.md).
 *
 * - Compute: every op on its local blocks (the slowest rank's) as a
 *   roofline, max(FLOPs / (peak x efficiency), bytes / (memory bandwidth x
 *   efficiency)), plus a per-kernel floor.
 * - Collectives: an alpha-beta model (ring, and tree for all-reduce when it
 *   is cheaper) with the figures of the links a group's physical devices
 *   span: the mesh's device order and devices_per_host decide whether a
 *   group stays inside a host (NVLink) or crosses hosts (InfiniBand).
 * - Memory per device: parameters, gradients, optimizer state, activations
 *   saved for backward net of recomputation, a pipeline's in-flight
 *   microbatches.
 * - Measured times override the model (calibration).
 *
 * Hardware comes from a built-in profile ("h100-sxm", "h200-sxm",
 * "a100-80gb" and aliases) or from the plan's own `mesh.hardware`.
 *
 * A model is immutable once set up (set, calibrate), so one model may be
 * shared by threads that only evaluate. */
#ifndef LIBPLAN_COST_H
#define LIBPLAN_COST_H

#include <stdint.h>

#include "common.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_cost_model plan_cost_model;
typedef struct plan_cost_report plan_cost_report;

/* ---- built-in hardware profiles ------------------------------------------ */

/* Number of built-in profiles, and the canonical name of profile i ("h100-sxm",
 * "h200-sxm", "a100-80gb"); NULL out of range. */
PLAN_API int plan_cost_profile_count(void);
PLAN_API const char *plan_cost_profile_name(int i);
/* The canonical name of a profile named by its name or an alias ("h100",
 * "H100-SXM5", "a100"; case does not matter), or NULL when unknown. */
PLAN_API const char *plan_cost_profile_resolve(const char *name);

/* A byte count as every output of the library and its tools prints one:
 * binary units scaled to the value ("512 B", "5.00 KiB", "30.66 GiB";
 * KiB = 1024 B), NUL-terminated and truncated to `size` (24 bytes hold
 * any). Returns buf. */
PLAN_API char *plan_format_bytes(char *buf, size_t size, double bytes);

/* ---- the model ----------------------------------------------------------- */

/* A cost model for plans on p's mesh and program. `profile` names a built-in
 * profile (it replaces the plan's `mesh.hardware` entirely), or is NULL:
 * then the plan's `mesh.hardware` when it has one, else "h100-sxm".
 *
 * A plan's own hardware whose `name` is a built-in profile takes the figures
 * it leaves out (0 or absent) from that profile. Any other hardware must
 * give every figure the plan needs: peak FLOP/s of each float dtype its
 * matmuls use, memory, memory_bandwidth, and the intra_host / inter_host
 * bandwidth of every mesh axis whose groups stay in / cross hosts (unless
 * `links` gives that axis its own). A missing figure is PLAN_EINVALID with
 * the position of the `hardware` mapping and the figures it lacks.
 *
 * The model copies what it needs from p (it keeps no reference); evaluations
 * take a plan with the same program and mesh shape (the plan itself, or a
 * copy a search edits). Returns PLAN_OK, PLAN_ENOTFOUND (unknown profile),
 * PLAN_EUSAGE (no plan, or no mesh), PLAN_EINVALID, PLAN_ENOMEM. */
PLAN_API int plan_cost_model_new(plan_cost_model **out, const plan_plan *p,
                                 const char *profile);
PLAN_API void plan_cost_model_free(plan_cost_model *m);

/* The hardware's name: a built-in profile's canonical name, or the plan's
 * `hardware.name` ("custom" when it has none). Borrowed. */
PLAN_API const char *plan_cost_model_hardware(const plan_cost_model *m);

/* Model parameters by name:
 *   "efficiency.matmul"  fraction of peak FLOP/s matmul and linear reach
 *                        (default 0.7)
 *   "efficiency.other"   the same for other ops, on the vector (f32) peak
 *                        (default 0.5)
 *   "efficiency.memory"  fraction of memory bandwidth reached (default 0.8)
 *   "efficiency.link"    fraction of link bandwidth collectives reach
 *                        (default 0.8)
 *   "kernel_floor"       seconds every kernel takes at least (default 4e-6)
 *   "flops.DTYPE"        peak FLOP/s of DTYPE (f64 f32 bf16 f16)
 *   "memory"             bytes per device
 *   "memory_bandwidth"   bytes/s
 *   "intra_host.bandwidth" "intra_host.latency"
 *   "inter_host.bandwidth" "inter_host.latency"   bytes/s per device and
 *                        direction, seconds per step
 * Efficiencies lie in (0, 1]; every other value is finite and >= 0 (a
 * bandwidth or peak > 0). PLAN_ENOTFOUND for an unknown name, PLAN_EINVALID
 * for a value out of range. */
PLAN_API int plan_cost_model_set(plan_cost_model *m, const char *name,
                                 double value);
PLAN_API int plan_cost_model_get(double *out, const plan_cost_model *m,
                                 const char *name);

/* Re-reads the device order and host topology of p's mesh (same axes): a
 * search that permutes `mesh.devices` calls this before pricing the new
 * order. PLAN_EUSAGE when the mesh's axes differ from the model's. */
PLAN_API int plan_cost_model_update_mesh(plan_cost_model *m,
                                         const plan_plan *p);

/* ---- calibration: measured figures override the model -------------------- */

/* `pattern` names what the figure is for:
 *   an op name or glob ("layers.3.mlp.fc1", "layers.*.attn.softmax"),
 *   an op kind ("matmul", "softmax"), or
 *   a collective kind ("all_reduce", "all_gather", "reduce_scatter",
 *   "all_to_all", "send" for pipeline transfers).
 * For an op, an exact name wins over a glob, a glob over a kind; among
 * equals the latest call wins.
 *
 * plan_cost_model_calibrate: exactly one of
 *   seconds > 0  a measured time per call (ops: for the op on the plan's
 *                blocks, whole batch; collectives: per call), used as is;
 *   rate > 0     ops: achieved FLOP/s (replaces peak x efficiency; the
 *                memory bound and kernel floor stay); collectives: achieved
 *                bandwidth in bytes/s (replaces the link's bandwidth x
 *                efficiency; the latency terms stay).
 * plan_cost_model_calibrate_table: n >= 1 measured points (size, seconds),
 * sizes strictly increasing: FLOPs of the op (bytes it moves when it
 * computes none), or bytes one rank sends in the collective. Between points
 * the time is interpolated linearly; below the first it is the first
 * point's; above the last it grows in proportion to size.
 * PLAN_EINVALID for bad figures, PLAN_EUSAGE for a bad pattern. */
PLAN_API int plan_cost_model_calibrate(plan_cost_model *m, const char *pattern,
                                       double seconds, double rate);
/* The same measured on one hardware profile (`profile`: a profile name or
 * alias, "a100"; NULL: every device): on a mesh of unlike devices it
 * prices the ops of the devices with that hardware, and wins over an
 * entry for every device at the same level (name, glob, kind); on a model
 * of one hardware it applies when it is that hardware, else never. Ops
 * only: PLAN_EINVALID for a collective (a group spans several profiles). */
PLAN_API int plan_cost_model_calibrate_profile(plan_cost_model *m,
                                               const char *profile,
                                               const char *pattern,
                                               double seconds, double rate);
PLAN_API int plan_cost_model_calibrate_table(plan_cost_model *m,
                                             const char *pattern,
                                             const double *sizes,
                                             const double *seconds, int n);
/* Reads a calibration file (docs/cost.md, "Calibration"):
 *   libplan-calibration: "0.1"
 *   hardware: h100-sxm                # optional, informational
 *   parameters: {efficiency.matmul: 0.62, kernel_floor: 3e-6}
 *   ops:
 *     matmul: {flops_per_second: 6.1e14}
 *     "layers.*.attn.softmax": {seconds: 1.2e-4}
 *     gelu: {table: [[1e6, 5e-6], [1e9, 1.1e-3]]}
 *   collectives:
 *     all_reduce: {bandwidth: 3.6e11}
 *     all_gather: {table: [[1048576, 2.1e-5], [1073741824, 3.1e-3]]}
 *   profiles:                         # measured per hardware profile
 *     a100-80gb: {ops: {matmul: {flops_per_second: 2.2e14}}}
 * Errors carry file, line and column (PLAN_ESYNTAX, PLAN_ESCHEMA,
 * PLAN_EINVALID, PLAN_EIO). The model is unchanged when it fails. */
PLAN_API int plan_cost_model_load_calibration(plan_cost_model *m,
                                              const char *path);
PLAN_API int plan_cost_model_load_calibration_buffer(plan_cost_model *m,
                                                     const char *data,
                                                     size_t len,
                                                     const char *name);

/* ---- single evaluations (what a search asks) ----------------------------- */

/* Seconds op `op` takes on its local blocks (the slowest rank's, forward)
 * when it consumes its inputs in placements in[0..nin) and produces outs[]
 * (compact form, "S(0)R"; NULL for either: the plan's own strategy). */
PLAN_API int plan_cost_op(double *out, const plan_cost_model *m,
                          const plan_plan *p, int op, const char *const *in,
                          const char *const *outs);
/* Seconds to change tensor `tensor` from placement `from` to `to` (compact
 * form): the redistribution planner's steps, each priced on the devices
 * its group spans. 0 when they are equal. */
PLAN_API int plan_cost_redistribute(double *out, const plan_cost_model *m,
                                    const plan_plan *p, int tensor,
                                    const char *from, const char *to);

/* ---- the whole plan ------------------------------------------------------ */

/* Prices p's step: forward compute and the redistributions lowering inserts
 * between producers and consumers (and to the output placements); when p
 * trains, backward (2x forward compute, the mirror collectives),
 * recomputation, gradient synchronisation per `training.grad_sync`, the
 * optimizer update; with a pipeline, microbatches, stage transfers and the
 * schedule's bubble. Memory per device and whether it fits. p must be
 * valid (plan_validate without errors) and have the model's program and
 * mesh shape. *out is freed with plan_cost_report_free. */
PLAN_API int plan_cost_plan(plan_cost_report **out, const plan_cost_model *m,
                            const plan_plan *p);
PLAN_API void plan_cost_report_free(plan_cost_report *r);

/* Step time (seconds) and its parts. For a pipeline the parts are summed
 * over stages (work), and the step follows the schedule. */
PLAN_API double plan_cost_report_step_seconds(const plan_cost_report *r);
PLAN_API double plan_cost_report_compute_seconds(const plan_cost_report *r);
PLAN_API double plan_cost_report_comm_seconds(const plan_cost_report *r);
PLAN_API double plan_cost_report_bubble_seconds(const plan_cost_report *r);
/* Peak bytes on the fullest device, and the device's capacity (0 unknown). */
PLAN_API double plan_cost_report_memory_peak(const plan_cost_report *r);
PLAN_API double plan_cost_report_memory_capacity(const plan_cost_report *r);
/* 1 when the peak fits the capacity, else 0; the reason it does not
 * (borrowed, "" when it fits). */
PLAN_API int plan_cost_report_fits(const plan_cost_report *r);
PLAN_API const char *plan_cost_report_reason(const plan_cost_report *r);

/* Communication overlap (a plan with an `overlap:` section, docs/cost.md,
 * "Overlap"): 1 when the step was priced with its streams simulated, else
 * 0 (no overlap section, or a pipeline). The step without the overlap
 * (every collective on the compute stream: what plan_cost_report_step_seconds
 * gives for the same plan without its `overlap:`), and the communication the
 * compute stream still waits for. Without overlap both equal the plain
 * figures (the step, the communication). */
PLAN_API int plan_cost_report_overlapped(const plan_cost_report *r);
PLAN_API double
plan_cost_report_step_no_overlap_seconds(const plan_cost_report *r);
PLAN_API double
plan_cost_report_exposed_comm_seconds(const plan_cost_report *r);

/* One row per op, in topological order. Strings are borrowed from the
 * report. */
typedef struct plan_cost_op_info {
  const char *name;
  const char *kind;
  int stage;               /* pipeline stage, -1 without a pipeline */
  double flops;            /* forward FLOPs on the slowest rank's blocks */
  double bytes;            /* bytes it reads and writes there */
  double seconds;          /* forward, per step (all microbatches) */
  double backward_seconds; /* backward + recomputation per step; 0 when
                              the plan does not train */
  const char *bound; /* "compute", "memory", "floor", "view", "calibrated" */
} plan_cost_op_info;

/* One row per collective a step runs: the redistribution steps between
 * producer and consumer placements, to output placements, gradient
 * synchronisation and pipeline transfers. */
typedef struct plan_cost_collective_info {
  const char *phase;     /* "forward", "output", "grad_sync", "param_gather",
                            "pipeline" */
  const char *tensor;    /* the tensor (a gradient sync: the parameter) */
  const char *kind;      /* "all_gather", "all_reduce", "reduce_scatter",
                            "all_to_all", "slice", "zero_non_owner", "relabel",
                            "send" */
  const char *axis;      /* the mesh axis of its groups ("" for send) */
  const char *from, *to; /* placements before and after ("" for send) */
  int64_t group;         /* devices in a group */
  const char *link;      /* "intra_host", "inter_host", "axis" (the plan's
                            per-axis figures), "local", "calibrated" */
  const char *algorithm; /* "ring", "tree", "local", "p2p", "calibrated" */
  double bytes;          /* sent by one rank per call */
  double calls;          /* per step (microbatches) */
  double seconds;        /* per step, all calls; forward only */
} plan_cost_collective_info;

/* Memory of one device group: every device without a pipeline (stage -1),
 * else one row per stage (its devices hold the same blocks). Bytes. */
typedef struct plan_cost_memory_info {
  int stage;
  double parameters; /* parameters and constants */
  double gradients;
  double optimizer;   /* optimizer state (and f32 master weights) */
  double activations; /* saved for backward (training) or the live peak */
  double workspace;   /* the largest op's working set, recomputed segment */
  double total;
  double inflight; /* microbatches whose activations are held */
} plan_cost_memory_info;

/* The time of one pipeline stage for one microbatch, seconds, as the
 * schedule runs it: its F is forward + forward_comm + send_forward, its B
 * backward + backward_comm + send_backward (a split backward: W is
 * weight_grad of the backward part, I the rest). forward_comm and
 * backward_comm are the redistributions its ops run (the backward's
 * mirror them); send_forward sends its activations to the next stages,
 * send_backward its input gradients to the previous ones. grad_sync and
 * optimizer run once per step, after the schedule. */
typedef struct plan_cost_stage_info {
  int stage;
  int rank; /* its rank on the pipeline axis */
  double forward, forward_comm, send_forward;
  double backward, backward_comm, send_backward, weight_grad;
  double grad_sync, optimizer;
} plan_cost_stage_info;

/* Stages of a pipelined plan's report (0 without a pipeline); stage i,
 * PLAN_ENOTFOUND out of range. */
PLAN_API size_t plan_cost_report_stage_count(const plan_cost_report *r);
PLAN_API int plan_cost_report_stage(plan_cost_stage_info *out,
                                    const plan_cost_report *r, size_t i);

/* The training pipeline's timeline in modeled milliseconds as an SVG
 * picture: per rank a compute lane (F, B, I, W of each stage and
 * microbatch at the times the cost model's schedule runs them, then the
 * optimizer), a lane for the collectives each action runs (and the
 * gradient synchronisation) and a lane of sends, an arrow from each send
 * to the rank that receives it; the time axis ends at the modeled step.
 * r is plan_cost_plan's report of p. `name` (may be NULL) heads it.
 * PLAN_ENOTFOUND when p has no training pipeline; *out is freed with
 * plan_buffer_free. */
PLAN_API int plan_cost_timeline_write(char **out, size_t *len,
                                      const plan_cost_report *r,
                                      const plan_plan *p, const char *name);

/* ---- the stream simulation ----------------------------------------------- */

/* A plan's lowered program run on its streams with the model's prices
 * (docs/cost.md, "Overlap"): the compute stream runs the ops in order; a
 * collective started on stream s > 0 runs beside it from its start until
 * its wait; collectives on one stream run in order per link (so the chunks
 * of a chain over two axes pipeline); concurrent collectives on one link
 * (the physical level they cross: intra_host, inter_host, a topology
 * level, or an axis's own `links`) share its bandwidth. */
typedef struct plan_cost_sim plan_cost_sim;

enum {
  PLAN_COST_SIM_INPUT, /* a leaf materialised: takes no time */
  PLAN_COST_SIM_OP,
  PLAN_COST_SIM_COLLECTIVE,
  PLAN_COST_SIM_WAIT
};

/* Flags of plan_cost_simulate. */
#define PLAN_COST_SIM_PLAIN 1u  /* lower without the overlap entries */
#define PLAN_COST_SIM_SERIAL 2u /* every collective on the compute stream */

/* One step. Strings are borrowed from the simulation. */
typedef struct plan_cost_sim_step_info {
  int kind;               /* PLAN_COST_SIM_* */
  const char *name;       /* an op's name; a collective's or wait's tensor */
  const char *collective; /* "all_gather"... for a collective, else "" */
  const char *axis;       /* a collective's mesh axis, else "" */
  const char *link;       /* the link it shares ("intra_host", "inter_host",
                             a topology level, "axis:NAME"), "local", "" */
  int stream;             /* 0 the compute stream */
  int64_t chunk_index, chunk_of; /* chunk_of 0: not chunked */
  double seconds;    /* alone: an op's time, a collective's on a free link */
  double start, end; /* simulated; a wait: when the compute reaches it and
                        when it passes it */
  double issued;     /* a collective: when the compute stream reached its
                        start point (its start: when it could run) */
  /* what made a collective (what an `overlap:` entry selects it by):
   * the op and operand whose input it redistributes (origin_op, "" none),
   * the param it moves (param, "" none: the input is no param), the param
   * whose gradient it syncs (grad_of, "" none) */
  const char *origin_op;
  int origin_operand;
  const char *param;
  const char *grad_of;
  /* a collective: the step that writes its input (-1: none) and the first
   * step after it that reads what it writes (the step count: none) */
  int ready, reader;
  /* a collective: bit k set when 2^k chunks divide a dim of every block it
   * reads and writes that it does not act on (bit 0 always) */
  unsigned chunkable;
  /* a collective alone on its link in 1, 2 and 4 chunks (every chunk pays
   * its latency terms; the bytes are the same) */
  double chunk_seconds[3];
} plan_cost_sim_step_info;

/* Lowers p (plan_lower; with PLAN_COST_SIM_PLAIN without its overlap) and
 * runs it with m's prices. p as for plan_cost_plan; PLAN_EUNSUPPORTED for
 * a pipeline or manual regions. *out is freed with plan_cost_sim_free. */
PLAN_API int plan_cost_simulate(plan_cost_sim **out, const plan_cost_model *m,
                                const plan_plan *p, unsigned flags);
PLAN_API void plan_cost_sim_free(plan_cost_sim *s);
/* The makespan (the last step's end), the compute stream's busy time, and
 * the time it waits for communication (makespan - busy). */
PLAN_API double plan_cost_sim_makespan(const plan_cost_sim *s);
PLAN_API double plan_cost_sim_compute_seconds(const plan_cost_sim *s);
PLAN_API double plan_cost_sim_exposed_seconds(const plan_cost_sim *s);
PLAN_API size_t plan_cost_sim_step_count(const plan_cost_sim *s);
/* Step i; PLAN_ENOTFOUND out of range. */
PLAN_API int plan_cost_sim_step(plan_cost_sim_step_info *out,
                                const plan_cost_sim *s, size_t i);
/* The simulation as an SVG timeline in modeled milliseconds: the compute
 * stream's lane (ops), one lane per communication stream and link (each
 * collective a bar from its start to its end, and a line from its start
 * point to its wait), so what overlaps is visible. `name` (may be NULL)
 * heads it; *out is freed with plan_buffer_free. */
PLAN_API int plan_cost_sim_svg(char **out, size_t *len, const plan_cost_sim *s,
                               const char *name);

PLAN_API size_t plan_cost_report_op_count(const plan_cost_report *r);
/* PLAN_ENOTFOUND when i is out of range. */
PLAN_API int plan_cost_report_op(plan_cost_op_info *out,
                                 const plan_cost_report *r, size_t i);
PLAN_API size_t plan_cost_report_collective_count(const plan_cost_report *r);
PLAN_API int plan_cost_report_collective(plan_cost_collective_info *out,
                                         const plan_cost_report *r, size_t i);
PLAN_API size_t plan_cost_report_memory_count(const plan_cost_report *r);
PLAN_API int plan_cost_report_memory(plan_cost_memory_info *out,
                                     const plan_cost_report *r, size_t i);

/* The report as "text" (tables for people), "json" or "yaml" (schema
 * "libplan-cost/1", the same fields in both), newly allocated; the caller
 * frees *out with plan_buffer_free. PLAN_EUSAGE for another format. */
PLAN_API int plan_cost_report_write(char **out, size_t *len,
                                    const plan_cost_report *r,
                                    const char *format);

#ifdef __cplusplus
}
#endif
#endif
