/* The in-memory IR: program, mesh, placements and plan. This is the core's
 * private view; the public headers expose opaque handles and accessors over
 * it. See spec/plan-format.md for what each field means and
 * docs/architecture.md for how modules use it.
 *
 * Ownership: every object hangs off one arena (the program's or the plan's),
 * freed with its owner. Names are interned in that arena. Indices (int) link
 * objects: an op names its tensors by index into program->tensors. */
#ifndef LIBPLAN_IR_H
#define LIBPLAN_IR_H

#include <stdbool.h>
#include <stdint.h>

#include "libplan/common.h"
#include "libplan/ops.h"
#include "libplan/plan.h"
#include "libplan/program.h"
#include "libplan/space.h"
#include "base/util.h"

/* C linkage: the CUDA runner's sources (C++) include this header. */
#ifdef __cplusplus
extern "C" {
#endif

/* PLAN_MAX_RANK and PLAN_MAX_MESH_AXES: libplan/space.h */
#define PLAN_MAX_NAME 256 /* bytes in a tensor/op/axis name */

/* ---- enums with name tables (each ends in a _COUNT sentinel) ------------- */

/* plan_dtype and its name functions are public: libplan/ops.h. */

/* plan_role and plan_recipe are public: libplan/program.h. */

const char *plan_role_name(plan_role r);
const char *plan_recipe_name(plan_recipe r);
/* Return the enum value, or -1 when unknown. */
int plan_role_from_name(const char *s);
int plan_recipe_from_name(const char *s);

/* plan_pos (a file position) and the op attribute values (plan_attr_type,
 * plan_attr_val) are public: libplan/ops.h. */

/* ---- program --------------------------------------------------------------
 */

typedef struct plan_tensor {
  const char *name;
  int rank;
  int64_t *dims;          /* rank entries (arena) */
  const char **dim_names; /* NULL when no dim is named; else rank entries,
                             NULL where unnamed */
  plan_dtype dtype;
  plan_role role;
  bool declared;  /* listed under program.tensors */
  bool has_range; /* integer inputs: values in [range_lo, range_hi) */
  int64_t range_lo, range_hi;
  plan_recipe recipe;
  double recipe_theta;  /* rope: base, default 10000 */
  double recipe_fill;   /* causal_mask: masked value, default -1e9 */
  struct plan_ext *ext; /* x- keys of the declaration */
  int producer;         /* op index, -1 for leaves */
  int producer_slot;    /* which output of the producer */
  plan_pos pos;
} plan_tensor;

typedef struct plan_pending_in {
  int op, slot;
  const char *name;
  plan_pos pos;
} plan_pending_in;

typedef struct plan_op {
  const char *name;
  int kind; /* plan_op_kind (ops.h) */
  int nin, nout;
  int *in;              /* tensor indices */
  int *out;             /* tensor indices */
  plan_attr_val *attrs; /* one per attribute of the kind's schema */
  struct plan_ext *ext; /* x- keys of the op */
  plan_pos pos;
} plan_op;

struct plan_program {
  plan_arena arena;
  const char *file; /* for diagnostics; "" when built in memory */
  const char *name;
  int version_major, version_minor; /* format version of its document */
  plan_tensor *tensors;             /* malloc'd, grows while reading */
  int ntensors, cap_tensors;
  plan_op *ops; /* in topological order after load */
  int nops, cap_ops;
  /* Inputs named before their producer was read, bound when the program is
   * finished (malloc'd; freed then). */
  struct plan_pending_in *pending;
  int npending, cap_pending;
  bool sigs_done; /* signatures are computed on first use (plan_program_sigs) */
  uint64_t *op_sigs, *tensor_sigs; /* per op / tensor, malloc'd then */
  /* Filled while a pipelined load reads the rest of the plan (the worker
   * would wait for the parser anyway): the program hash and the ops and
   * tensors in name order, which every later hash reuses. */
  bool hash_cached;
  plan_hash hash;
  int *ops_by_name, *tensors_by_name; /* malloc'd; NULL when not prepared */
  int recent[8]; /* the last tensors created: most inputs are among them */
  uint64_t recent_hash[8]; /* their names' plan_strmap_hash */
  /* Shared attribute arrays of ops that write no attrs, per op kind. */
  plan_attr_val *default_attrs[48];
  int *outputs;
  int noutputs;
  int loss;              /* tensor index or -1 */
  bool outputs_explicit; /* `outputs:` written (else: unconsumed tensors) */
  plan_pos outputs_pos, loss_pos;
  plan_strmap tensor_by_name;
  plan_strmap op_by_name;
  struct plan_ext *ext; /* x- keys of the program mapping */
  plan_pos pos;
};

/* ---- generic values (provenance, x- extension keys) -----------------------
 */

typedef enum plan_value_kind {
  PLAN_V_NULL,
  PLAN_V_BOOL,
  PLAN_V_INT,
  PLAN_V_FLOAT,
  PLAN_V_STRING,
  PLAN_V_SEQ,
  PLAN_V_MAP
} plan_value_kind;

typedef struct plan_value {
  plan_value_kind kind;
  bool b;
  int64_t i;
  double f;
  const char *s; /* STRING */
  bool block;    /* STRING written as a block scalar (kept for readability) */
  int n;         /* SEQ items / MAP entries */
  struct plan_value **items; /* SEQ: n items; MAP: n values */
  const char **keys;         /* MAP: n keys, in file order */
} plan_value;

/* x- keys of one mapping, kept in file order, excluded from hashes. */
typedef struct plan_ext {
  int n;
  const char **keys;
  plan_value **vals;
} plan_ext;

/* ---- mesh -----------------------------------------------------------------
 */

typedef struct plan_link {
  double bandwidth; /* bytes/s, 0 = unset */
  double latency;   /* seconds */
} plan_link;

typedef struct plan_hardware {
  const char *name;  /* NULL when not given */
  const char *label; /* a per-device profile's key in hardware.profiles */
  double flops[PLAN_DTYPE_COUNT]; /* peak FLOP/s per dtype, 0 = unset */
  double memory;                  /* bytes per device */
  double memory_bandwidth;        /* bytes/s */
  plan_link intra_host;
  plan_link inter_host;
  plan_link axis_link[PLAN_MAX_MESH_AXES]; /* per mesh axis override */
  plan_pos pos;
} plan_hardware;

/* Explicit shard ratios (format 1.1): a dim split along mesh axis `axis`
 * gives the rank at index i of that axis a piece proportional to w[i]
 * (piece i = [floor(n * W_i / W), floor(n * W_{i+1} / W)) of a length-n
 * parent piece, W_i the sum of w[0..i), W the sum of all), instead of
 * torch.chunk's equal chunks. A placement entry names its set by index
 * (plan_axis_pl.ratio = k + 1 for ratios[k]); sets are interned per plan,
 * at most PLAN_MAX_RATIO_SETS of them. */
#define PLAN_MAX_RATIO_SETS 255
typedef struct plan_ratios {
  int axis;   /* mesh axis index */
  int n;      /* == the axis size */
  int64_t *w; /* n positive weights */
} plan_ratios;

/* Topology (format 1.1): how the physical devices are wired, for pricing
 * collectives on the real path. Either a hierarchy of levels (NVLink island
 * inside a host, PCIe, the InfiniBand network: level l groups `size`
 * consecutive devices of level l - 1, the last level spans everything) or a
 * direct network: a 1-3-D torus (or mesh without wraparound) of `dims`,
 * devices numbered row-major, neighbours joined by `link`. */
#define PLAN_MAX_TOPO_LEVELS 4
typedef enum plan_topo_kind {
  PLAN_TOPO_LEVELS = 0,
  PLAN_TOPO_TORUS = 1
} plan_topo_kind;
typedef struct plan_topo_level {
  const char *name; /* "nvlink", "pcie", "ib", ...: for reports */
  int64_t size;     /* devices per group at this level; last: 0 = all */
  plan_link link;   /* per device and direction inside a group */
} plan_topo_level;
typedef struct plan_topology {
  int kind; /* plan_topo_kind */
  int nlevels;
  plan_topo_level levels[PLAN_MAX_TOPO_LEVELS];
  int ndims;
  int64_t dims[3];
  bool wrap[3];   /* wraparound per torus dim */
  plan_link link; /* torus: one neighbour link, per direction */
  plan_pos pos;
} plan_topology;

typedef struct plan_submesh {
  const char *name;
  /* index[a] >= 0 fixes mesh axis a to that index; -1 keeps the whole axis */
  int64_t index[PLAN_MAX_MESH_AXES];
  plan_pos pos;
} plan_submesh;

typedef struct plan_mesh {
  int naxes;
  const char *axis_names[PLAN_MAX_MESH_AXES];
  int64_t axis_sizes[PLAN_MAX_MESH_AXES];
  int64_t ndevices; /* product of axis sizes */
  /* Physical device id of every logical rank; ranks are row-major over the
   * axes (the last axis varies fastest). NULL means identity (iota). */
  int64_t *devices;
  int64_t devices_per_host; /* 0 = one host */
  plan_submesh *submeshes;
  int nsubmeshes;
  plan_hardware *hardware; /* NULL when absent */
  /* Per-device hardware (format 1.1): profiles[device_profile[d]] is the
   * hardware of physical device d; NULL device_profile = every device is
   * `hardware`. */
  plan_hardware *profiles;
  int nprofiles;
  int *device_profile;     /* ndevices entries, by physical device id */
  plan_topology *topology; /* NULL when absent */
  plan_ratios *ratios;     /* the plan's ratio sets (plan_axis_pl.ratio) */
  int nratios;
  plan_ext *ext;
  plan_pos pos;
  plan_pos axes_pos;
  plan_pos devices_pos;
} plan_mesh;

/* ---- placements ------------------------------------------------------------
 */

/* plan_placement (a placement over the whole mesh, one plan_axis_pl per
 * axis in mesh order), its kinds and reduces are public: libplan/space.h. */

/* ---- plan ------------------------------------------------------------------
 */

typedef struct plan_strategy {
  bool set;
  plan_placement *in;  /* op->nin entries */
  plan_placement *out; /* op->nout entries */
  plan_pos pos;
  const char *pattern; /* the key it came from when a glob, else NULL */
} plan_strategy;

/* plan_grad_sync and plan_optimizer are public: libplan/plan.h. */

typedef struct plan_param_train {
  plan_grad_sync sync;
  bool has_state_pl;
  plan_placement state_pl; /* where optimizer state (and master weight) lives */
  plan_pos pos;
} plan_param_train;

typedef struct plan_training {
  bool present;
  plan_optimizer optimizer;
  double lr, momentum, beta1, beta2, eps, weight_decay;
  int64_t steps; /* optimizer steps a verification runs, default 1 */
  /* dtype policy; -1 = same as the tensor */
  int param_dtype, compute_dtype, grad_dtype, accum_dtype;
  double clip_grad_norm;    /* 0 = off */
  double loss_scale;        /* 1 = off */
  plan_param_train *params; /* per tensor index (only params used) */
  bool *recompute;          /* per op index */
  plan_pos pos;
  plan_ext *ext;
} plan_training;

typedef enum plan_schedule_kind {
  PLAN_SCHED_GPIPE,
  PLAN_SCHED_1F1B,
  PLAN_SCHED_INTERLEAVED_1F1B,
  PLAN_SCHED_ZB_H1,
  PLAN_SCHED_EXPLICIT,
  /* format 1.1: a plan file names these only from 1.1 on */
  PLAN_SCHED_LOOPED_BFS,
  PLAN_SCHED_INTERLEAVED_ZB,
  PLAN_SCHED_ZBV,
  PLAN_SCHED_DUALPIPEV,
  PLAN_SCHED_COUNT
} plan_schedule_kind;
/* The schedule kinds a format 1.0 plan file may name: PLAN_SCHED_GPIPE ..
 * PLAN_SCHED_EXPLICIT; 1.1 names every kind. */
#define PLAN_SCHED_FILE_COUNT_1_0 (PLAN_SCHED_EXPLICIT + 1)

typedef enum plan_action_kind {
  PLAN_ACT_F, /* forward */
  PLAN_ACT_B, /* full backward */
  PLAN_ACT_I, /* backward, input gradient half */
  PLAN_ACT_W, /* backward, weight gradient half */
  PLAN_ACT_SEND_F,
  PLAN_ACT_RECV_F,
  PLAN_ACT_SEND_B,
  PLAN_ACT_RECV_B,
  PLAN_ACT_COUNT
} plan_action_kind;

typedef struct plan_action {
  uint8_t kind; /* plan_action_kind */
  int32_t stage;
  int32_t microbatch;
  plan_pos pos;
} plan_action;

typedef struct plan_stage {
  const char **patterns; /* op names or globs as written */
  int npatterns;
  int submesh; /* index into mesh submeshes, -1 = from the pipeline axis */
  plan_pos pos;
} plan_stage;

typedef struct plan_pipeline {
  bool present;
  int axis; /* mesh axis index of the pp axis, -1 = none */
  plan_stage *stages;
  int nstages;
  int *op_stage; /* per op index: stage, -1 = none (resolved) */
  int64_t microbatches;
  plan_schedule_kind schedule;
  /* explicit grid: one action list per pipeline rank */
  plan_action **grid;
  int *grid_len;
  int grid_ranks;
  plan_pos pos;
  plan_pos schedule_pos;
  plan_ext *ext;
} plan_pipeline;

typedef enum plan_region_kind {
  PLAN_REGION_PINNED,
  PLAN_REGION_MANUAL,
  PLAN_REGION_COUNT
} plan_region_kind;

typedef struct plan_boundary {
  int tensor;
  plan_placement pl;
  plan_pos pos;
} plan_boundary;

typedef struct plan_region {
  const char *name;
  plan_region_kind kind;
  const char **patterns;
  int npatterns;
  bool *ops;                       /* per op index: member (resolved) */
  plan_boundary *inputs, *outputs; /* manual regions */
  int ninputs, noutputs;
  const char *body; /* manual: Lua source, kept as text */
  int body_line;    /* the file line of the body's first line */
  plan_pos pos;
  plan_ext *ext;
} plan_region;

/* Communication overlap (format 1.1, spec/plan-format.md §4.8): which
 * collectives of the lowered program run asynchronously, decomposed into
 * chunks, started and waited where. Patterns are resolved at lowering
 * (lower_overlap.c), against the lowered program's ops and params. */
typedef enum plan_ovl_select {
  PLAN_OVL_INPUT,     /* the redistribution of an op's input */
  PLAN_OVL_PARAM,     /* a param's redistributions (FSDP's all-gather) */
  PLAN_OVL_GRAD_SYNC, /* a param gradient's sync (training) */
  PLAN_OVL_SELECT_COUNT
} plan_ovl_select;

typedef enum plan_ovl_point {
  PLAN_OVL_IN_PLACE, /* start: where lowering puts it; wait: before the
                        first step that reads its result */
  PLAN_OVL_READY,    /* start: right after its input is made */
  PLAN_OVL_AFTER,    /* start: right after op `op` */
  PLAN_OVL_BEFORE,   /* start or wait: right before op `op` */
  PLAN_OVL_END,      /* wait: at the end of the step */
  PLAN_OVL_POINT_COUNT
} plan_ovl_point;

typedef struct plan_overlap {
  plan_ovl_select select;
  const char *pattern; /* an op (input) or param name or glob */
  int operand;         /* input: the operand, -1 = every one */
  int64_t chunks;      /* 1: not decomposed */
  int dim;             /* the dim chunks split, -1 = the first the
                          collective does not act on */
  int stream;          /* >= 1 */
  plan_ovl_point start, wait;
  const char *start_op, *wait_op; /* AFTER / BEFORE: the op's name */
  plan_pos pos, chunks_pos, start_pos, wait_pos;
} plan_overlap;

typedef struct plan_tensor_pl {
  bool set;
  plan_placement pl;
  plan_pos pos;
} plan_tensor_pl;

/* The recorded identity of the program a plan was made for, when the plan
 * refers to its program by path. */
typedef struct plan_program_ref {
  const char *path; /* as written, relative to the plan file's folder */
  bool has_hash;
  plan_hash hash;
  /* recorded signatures (name -> sig), for the drift report */
  int nops, ntensors;
  const char **op_names, **tensor_names;
  uint64_t *op_sigs, *tensor_sigs;
  plan_pos pos;
} plan_program_ref;

/* A name or glob pattern used in a plan section, kept so validation can
 * report names that match nothing (a vanished op, a typo). */
typedef struct plan_name_use {
  const char *pattern;
  const char *section; /* "strategies", "placements", "regions", ... */
  bool is_glob;
  bool tensors; /* names tensors (else ops) */
  int matches;
  plan_pos pos;
} plan_name_use;

typedef struct plan_intern_slot {
  uint64_t hash;
  int n;
  plan_placement *arr;
} plan_intern_slot;

/* Shared placement lists of strategies (a hash set; see plan_decisions.c). */
typedef struct plan_intern {
  plan_intern_slot *slots; /* malloc'd */
  size_t cap, count;
} plan_intern;

struct plan_plan {
  plan_arena arena;
  const char *file;                 /* for diagnostics */
  int version_major, version_minor; /* as read from the file */
  plan_pos version_pos;             /* of the version scalar */
  plan_program *program;            /* owned */
  bool program_inline;
  plan_program_ref ref; /* valid when !program_inline */
  plan_mesh mesh;
  bool has_mesh;
  plan_tensor_pl *placements; /* per tensor index (inputs, params, consts) */
  plan_tensor_pl *out_pl;     /* per program output position */
  plan_strategy *strategies;  /* per op index */
  plan_training training;
  plan_pipeline pipeline;
  plan_region *regions;
  int nregions;
  plan_overlap *overlap; /* format 1.1: noverlap entries, file order */
  int noverlap;
  plan_value *provenance; /* NULL when absent; a generic map */
  plan_ext *ext;          /* top-level x- keys */
  plan_pos mesh_pos;
  plan_name_use *uses; /* malloc'd */
  int nuses, cap_uses;
  plan_intern intern;
  plan_strmap use_keys; /* "section:name" of recorded uses, for duplicates */
  int next_op;          /* where the next exact strategy name is likely to be */
  uint64_t glob_work;   /* ops x pattern bytes the glob patterns scanned */
  struct plan_op_name *glob_index; /* ops by name, for glob prefixes;
                                      malloc'd on first use */
  /* Placements already parsed, while the document loads (the loader owns
   * it; NULL otherwise). */
  struct plan_pl_cache *pl_cache;
};

/* An overlap point as the file writes it ("ready", "after OP", "before
 * OP", "end") into buf; false (buf "") for PLAN_OVL_IN_PLACE, the default
 * (plan_views.c). */
bool plan_overlap_point_text(char *buf, size_t size, plan_ovl_point pt,
                             const char *op);

/* ---- format versions (format_version.c) ---------------------------------
 */

/* Whether the mesh or plan uses a format 1.1 field: per-device hardware, a
 * topology, or (plans) a placement with shard ratios. */
bool plan_mesh_uses_1_1(const plan_mesh *m);
bool plan_plan_uses_1_1(const plan_plan *p);
/* The version a plan or program is written and hashed as: the lowest that
 * holds its content (1.0 or 1.1; a pre-release 0.1 document keeps its own
 * unless it carries 1.1 content). */
void plan_plan_format(const plan_plan *p, int *major, int *minor);
/* The version of a plan's mesh part: the lowest that holds the mesh
 * alone (per-device hardware, a topology), so the mesh hashes the same
 * whatever the placements say. */
void plan_mesh_format(const plan_plan *p, int *major, int *minor);
void plan_program_format(const plan_program *p, int *major, int *minor);

#ifdef __cplusplus
}
#endif

#endif
