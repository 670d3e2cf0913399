/* The cost model inside the core (docs/cost.md; public view:
 * libplan/cost.h). Searches call plan_cost_op_seconds and
 * plan_cost_redist_seconds (public: libplan/space.h) millions of times:
 * they take placements as structs, allocate nothing and read only the
 * model and the plan.
 *
 * Files: cost.c (model, op and collective pricing), cost_hw.c (built-in
 * profiles, the plan's own hardware), cost_calib.c (calibration),
 * cost_plan.c (the whole plan: breakdown and memory), cost_report.c
 * (report accessors and writers), cost_pipeline.c (the pipeline schedule's
 * time and in-flight microbatches), cost_device.c (unlike devices: a
 * rank's piece at its own device's speed; the internal API in
 * cost_device.h), cost_topo.c (collectives priced on a topology's real
 * path). */
#ifndef LIBPLAN_COST_MODEL_H
#define LIBPLAN_COST_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "libplan/cost.h"
#include "libplan/schedule.h"
#include "libplan/space.h"
#include "ir/ops.h"
#include "lower/redist.h"

/* ---- hardware ------------------------------------------------------------ */

typedef struct cost_hw {
  const char *name;               /* canonical name */
  double flops[PLAN_DTYPE_COUNT]; /* dense peak FLOP/s; 0 = none */
  double memory;                  /* bytes per device */
  double memory_bandwidth;        /* bytes/s */
  plan_link intra_host;           /* per device and direction */
  plan_link inter_host;
} cost_hw;

/* Built-in profiles (cost_hw.c). */
int plan_cost_profiles_total(void);
const cost_hw *plan_cost_profile_at(int i);
/* By canonical name or alias, case-insensitive; NULL when unknown. */
const cost_hw *plan_cost_profile_find(const char *name);
/* "h100-sxm, h200-sxm, a100-80gb" for messages. */
const char *plan_cost_profile_list(void);

/* ---- op classes ---------------------------------------------------------- */

typedef enum cost_class {
  COST_CLASS_POINTWISE, /* c FLOPs per output element */
  COST_CLASS_MATMUL,    /* 2 m n k per batch */
  COST_CLASS_LINEAR,    /* 2 m n k (+ the bias) */
  COST_CLASS_ROWWISE,   /* c FLOPs per element of input 0 (softmax, norms) */
  COST_CLASS_REDUCE,    /* 1 FLOP per input element */
  COST_CLASS_MOVE,      /* a copy: no FLOPs, bytes in and out */
  COST_CLASS_VIEW,      /* free: a reshape of a contiguous block */
  COST_CLASS_GATHER,    /* embedding: rows read, output written */
  COST_CLASS_COUNT
} cost_class;

/* ---- calibration --------------------------------------------------------- */

enum { COST_CAL_FIXED, COST_CAL_RATE, COST_CAL_TABLE };
enum { COST_TARGET_NAME, COST_TARGET_GLOB, COST_TARGET_KIND, COST_TARGET_COLL };

/* Collectives a calibration may name: the redistribution kinds, then the
 * pipeline's point-to-point transfer. */
#define COST_COLL_SEND PLAN_REDIST_COUNT
#define COST_COLL_COUNT (PLAN_REDIST_COUNT + 1)

typedef struct cost_cal {
  const char *pattern;         /* arena */
  int prof;                    /* the model's profile it is for; -1 every */
  int target;                  /* COST_TARGET_* */
  int kind;                    /* op kind or collective kind */
  int mode;                    /* COST_CAL_* */
  double value;                /* FIXED: seconds; RATE: FLOP/s or bytes/s */
  const double *sizes, *times; /* TABLE (arena) */
  int n;
} cost_cal;

/* ---- the model ----------------------------------------------------------- */

/* A link as priced: effective bandwidth (x efficiency) and latency. */
typedef struct cost_link {
  double bandwidth; /* bytes/s, already x efficiency.link */
  double latency;   /* seconds per step */
  uint8_t source;   /* COST_LINK_* */
} cost_link;

enum { COST_LINK_INTRA, COST_LINK_INTER, COST_LINK_AXIS, COST_LINK_TOPO };

/* One plan profile of a mesh with per-device hardware (format 1.1),
 * completed and derived as the model's own hardware is. */
typedef struct cost_prof {
  cost_hw hw;
  char name[PLAN_MAX_NAME + 1];
  double peak_matmul[PLAN_DTYPE_COUNT]; /* x efficiency */
  double peak_other[PLAN_DTYPE_COUNT];
  double mem_bw; /* x efficiency */
  int *op_cal;   /* per op: calibration entry, -1 none */
  int coll_cal[COST_COLL_COUNT];
} cost_prof;

/* How an axis's groups sit on the topology (cost_topo.c): the worst group
 * of the axis, raw link figures (before efficiency.link). */
typedef struct cost_topo_axis {
  double bandwidth, latency; /* the slowest link a group uses */
  double ring_factor;        /* time per byte x this: max(hops, contention) */
  double ring_hops;          /* the longest hop of a ring step */
  double tree_hops;          /* the farthest two members */
  double a2a_factor;         /* all-to-all: the busiest link's load */
  char label[24];            /* the level's name, "torus" */
} cost_topo_axis;

struct plan_cost_model {
  cost_hw hw;
  char hw_name[PLAN_MAX_NAME + 1];
  plan_link axis_override[PLAN_MAX_MESH_AXES]; /* the plan's `links` */
  double eff_matmul, eff_other, eff_memory, eff_link, kernel_floor;

  /* mesh */
  int naxes;
  int64_t axis_sizes[PLAN_MAX_MESH_AXES];
  char axis_names[PLAN_MAX_MESH_AXES][65];
  int64_t ndevices;
  int64_t devices_per_host;            /* 0: one host */
  int64_t hosts;                       /* hosts the mesh's devices span */
  bool axis_inter[PLAN_MAX_MESH_AXES]; /* some group crosses hosts */
  cost_link link[PLAN_MAX_MESH_AXES];  /* resolved */

  /* unlike devices (format 1.1; cost_device.c): nprof == 0 when every
   * device is `hw` */
  int nprof;
  cost_prof *prof;   /* malloc'd */
  int *dev_prof;     /* per physical device: its profile; malloc'd */
  int64_t *rank_dev; /* per logical rank: its device; malloc'd */
  bool hetero;       /* the devices' profiles differ */
  /* topology (format 1.1; cost_topo.c) */
  bool has_topo;
  plan_topology topo; /* copied; level names not kept */
  cost_topo_axis taxis[PLAN_MAX_MESH_AXES];

  /* derived, per op kind */
  uint8_t kclass[PLAN_OP_COUNT];
  float kflops[PLAN_OP_COUNT]; /* FLOPs per element (pointwise, rowwise) */
  double peak_matmul[PLAN_DTYPE_COUNT]; /* x efficiency; 0 = no compute */
  double peak_other[PLAN_DTYPE_COUNT];
  double mem_bw; /* x efficiency */

  /* program (copied: a model keeps no reference to the plan) */
  int nops, ntensors;
  const char **op_names; /* arena */
  int *op_kinds;
  int *op_cal; /* per op: calibration entry, -1 none */
  int coll_cal[COST_COLL_COUNT];
  cost_cal *cals; /* malloc'd */
  int ncals, cap_cals;
  plan_arena arena;
};

/* Recomputes the derived figures (peaks x efficiencies, links) after a
 * figure changed (cost.c). */
void plan_cost_model_derive(plan_cost_model *m);
/* A dtype's dense peak on hw, falling back to a related dtype's (cost.c). */
double plan_cost_dtype_peak(const cost_hw *hw, int d);

/* Unlike devices (cost_device.c): each rank's device (on every mesh
 * change); the mesh's profiles (once the ops are known); their derived
 * figures; freeing. */
int plan_cost_ranks_setup(plan_cost_model *m, const plan_mesh *mesh);
int plan_cost_devices_setup(plan_cost_model *m, const plan_plan *p);
void plan_cost_devices_derive(plan_cost_model *m);
void plan_cost_devices_free(plan_cost_model *m);

/* The topology (cost_topo.c): copied from the mesh and every axis's
 * groups placed on it (on every mesh change); the axes' links from it
 * (after a figure changed). */
int plan_cost_topo_setup(plan_cost_model *m, const plan_mesh *mesh);
void plan_cost_topo_derive(plan_cost_model *m);
/* A collective's time with latency alpha and bandwidth beta (already x
 * efficiency) over a group placed as gl: the host rule's formulas when
 * gl's factors are 1 (cost_topo.c). */
double plan_cost_topo_seconds(int kind, double alpha, double beta,
                              const cost_topo_axis *gl, int64_t k, double send,
                              double recv, double n, int *algorithm);
/* Resolves each axis's link from the device order and hosts (cost.c). */
void cost_resolve_links(plan_cost_model *m, const plan_mesh *mesh);

/* The plan's hardware completed from its named built-in profile, checked
 * against what p needs (cost_hw.c). */
int plan_cost_hw_from_plan(plan_cost_model *m, const plan_plan *p);
/* Hardware h completed from its named built-in profile into hw (its name
 * into name[namesz]) and checked against what p needs; `what` names h in
 * the message, `links` asks for the host links the axes use. */
int plan_cost_hw_complete(cost_hw *hw, char *name, size_t namesz,
                          const plan_hardware *h, const plan_cost_model *m,
                          const plan_plan *p, const char *what, bool links);
/* Recomputes op_cal[] and coll_cal[] from the entries (cost_calib.c). */
void plan_cost_cal_match(plan_cost_model *m);
/* A calibrated time for `size` units under entry c. */
double plan_cost_cal_time(const cost_cal *c, double size, double base_floor);

/* ---- evaluation ---------------------------------------------------------- */

/* The dtype an op computes in and a tensor is held in under the plan's
 * dtype policy (training.dtypes), and its size in bytes. */
plan_dtype plan_cost_tensor_dtype(const plan_plan *p, int tensor);

/* Local element count of a tensor under a placement on the slowest rank
 * (torch.chunk: the first piece of every level is the largest). */
double plan_cost_local_numel(const plan_tensor *t, const plan_placement *pl,
                             const int64_t *mesh_sizes);

enum {
  COST_BOUND_COMPUTE,
  COST_BOUND_MEMORY,
  COST_BOUND_FLOOR,
  COST_BOUND_VIEW,
  COST_BOUND_CALIBRATED,
  COST_BOUND_COUNT
};
extern const char *const plan_cost_bound_names[COST_BOUND_COUNT];

typedef struct cost_op_eval {
  double flops;   /* per call */
  double bytes;   /* per call */
  double seconds; /* per call */
  int bound;      /* COST_BOUND_* */
} cost_op_eval;

/* One op under placements in[]/outs[] (NULL: its strategy). `split` > 1
 * runs it on a microbatch of 1/split of the batch: FLOPs and the bytes of
 * non-parameter operands shrink, parameters are read in full. */
int plan_cost_op_eval_at(cost_op_eval *out, const plan_cost_model *m,
                         const plan_plan *p, int op, const plan_placement *in,
                         const plan_placement *outs, double split);

/* Where an op is evaluated (cost_device.c makes these): one rank's
 * coordinates, the plan's ratio sets and its device's derived figures and
 * calibration. NULL: the slowest rank (torch.chunk's first pieces) on the
 * model's hardware. */
typedef struct cost_at {
  const int64_t *coord;
  const plan_ratios *sets;
  int nsets;
  const double *peak_matmul, *peak_other;
  double mem_bw;
  const int *op_cal; /* per op */
} cost_at;

/* plan_cost_op_eval_at at a given place (cost.c). */
int plan_cost_op_eval_where(cost_op_eval *out, const plan_cost_model *m,
                            const plan_plan *p, int op,
                            const plan_placement *in,
                            const plan_placement *outs, double split,
                            const cost_at *at);

/* The slowest rank's evaluation when ranks differ (cost_device.c). */
int plan_cost_op_eval_slowest(cost_op_eval *out, const plan_cost_model *m,
                              const plan_plan *p, int op,
                              const plan_placement *in,
                              const plan_placement *outs, double split);

/* plan_cost_op_seconds, the time of the op (whole batch) on the slowest
 * rank: public, libplan/space.h. */

typedef struct cost_step_eval {
  double seconds; /* per call */
  double bytes;   /* sent by one rank */
  int link;       /* COST_LINK_* or -1 for local steps */
  int algorithm;  /* COST_ALG_* */
} cost_step_eval;

enum {
  COST_ALG_RING,
  COST_ALG_TREE,
  COST_ALG_LOCAL,
  COST_ALG_P2P,
  COST_ALG_CALIBRATED,
  COST_ALG_COUNT
};
extern const char *const plan_cost_alg_names[COST_ALG_COUNT];

/* One redistribution step of a tensor of `esize`-byte elements, `split` as
 * above (bytes / split per call). */
void plan_cost_step_eval_at(cost_step_eval *out, const plan_cost_model *m,
                            const plan_tensor *t, int esize,
                            const plan_redist_step *s, double split);

/* A point-to-point transfer of `bytes` over mesh axis `axis` (-1: the
 * mesh's widest link class). */
void plan_cost_send_eval(cost_step_eval *out, const plan_cost_model *m,
                         int axis, double bytes);

/* plan_cost_redist_seconds, the time to change a tensor's placement
 * (whole batch): public, libplan/space.h. */

/* ---- the pipeline schedule ----------------------------------------------- */

/* The pipeline's time for all microbatches (*step) and the part of it the
 * busiest rank waits (*bubble), from each stage's time for one
 * microbatch: forward fwd[s], backward bwd[s] (0 when the plan does not
 * train) and the weight-gradient part of it wgt[s]; and, when inflight is
 * not NULL, the microbatches whose activations each stage holds at its
 * peak (nstages entries). Training pipelines run the schedule module's
 * action lists (plan_schedule_from_plan: named schedules generated,
 * explicit grids as written) with these per-stage durations; forward-only
 * pipelines stream (cost_pipeline.c). */
int plan_cost_schedule_time(double *step, double *bubble, double *inflight,
                            const plan_plan *p, const double *fwd,
                            const double *bwd, const double *wgt, int nstages);
/* The training pipeline's action lists run with these durations, each
 * action's start and end (seconds, per action of sc) in t0 and t1 (NULL:
 * not kept): what plan_cost_schedule_time computes, action by action.
 * -1 when they deadlock, else PLAN_OK or PLAN_ENOMEM. */
int plan_cost_schedule_actions(double *step, double *bubble, double *inflight,
                               const plan_schedule *sc, const double *fwd,
                               const double *bwd, const double *wgt, double *t0,
                               double *t1);
/* The closed forms per named schedule (docs/cost.md, "Pipelines"): what a
 * schedule that cannot be generated is priced with. */
int plan_cost_schedule_closed_form(double *step, double *bubble,
                                   const plan_plan *p, const double *fwd,
                                   const double *bwd, const double *wgt,
                                   int nstages);

/* ---- reports ------------------------------------------------------------- */

/* Rows hold their strings (in the report's arena), so a report outlives
 * the plan it was made from. */
struct plan_cost_report {
  plan_arena arena;
  const char *file;
  const char *hardware;
  const char *program;
  const char *mesh;       /* "dp=2 x tp=4" */
  const char *axis_links; /* "dp: inter_host, tp: intra_host" */
  int64_t devices, hosts, devices_per_host;
  bool training, pipeline;
  const char *optimizer; /* "adam", "sgd", "" */
  const char *schedule;  /* pipelines */
  int64_t microbatches;
  int nstages;
  /* time per step */
  double step, compute_fwd, compute_bwd, recompute, comm_fwd, comm_bwd,
      grad_sync, optimizer_s, p2p, bubble;
  /* communication overlap (cost_overlap.c): the step without it, the
   * communication the compute still waits for, whether it was priced */
  double step_plain, exposed;
  bool overlapped;
  /* memory */
  double capacity, peak;
  int peak_row;
  bool fits;
  const char *reason;
  /* rows */
  plan_cost_op_info *ops;
  int nops;
  plan_cost_collective_info *colls;
  int ncolls, cap_colls;
  plan_cost_memory_info *mem;
  int nmem;
  plan_cost_stage_info *stages; /* pipelines: per stage (arena) */
  int nstage_rows;
};

/* The step of a plan with an `overlap:` section, its streams simulated
 * (cost_overlap.c): sets step_plain and exposed, and, with overlap, the
 * step less what the streams hide. */
int plan_cost_overlap_price(plan_cost_report *r, const plan_cost_model *m,
                            const plan_plan *p);

/* Writers (cost_report.c). */
int plan_cost_report_text(plan_buf *b, const plan_cost_report *r);
int plan_cost_report_json(plan_buf *b, const plan_cost_report *r, bool yaml);

/* A tick step of 1, 2 or 5 times a power of ten, at least `min`: the
 * time axis of the SVG timelines (cost_timeline.c). */
double plan_cost_tick_step(double min);

#endif
