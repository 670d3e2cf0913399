/* The verifier's own read-only copy of the lowered program it runs, built
 * once at the start of a verification from the public views
 * (libplan/lowered.h, program.h, plan.h): every step, buffer, layout and
 * output, the training section, the pipeline annotations, the program's
 * tensors and ops, the mesh and the training options, with the field
 * names the verifier's files read. The real public handles travel with it
 * for the public calls (placements formatted, blocks laid out, the stream
 * check, the hook). Internal to verifier/. */
#ifndef LIBPLAN_VERIFIER_VX_PROGRAM_H
#define LIBPLAN_VERIFIER_VX_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "libplan/lowered.h"
#include "libplan/ops.h"
#include "libplan/plan.h"
#include "libplan/program.h"
#include "libplan/schedule.h"
#include "libplan/space.h"
#include "base/util.h"

/* ---- the program --------------------------------------------------------- */

/* One tensor (plan_program_tensor's view). */
typedef struct vx_tensor {
  const char *name;
  int rank;
  const int64_t *dims; /* rank entries */
  plan_dtype dtype;
  plan_role role;
  int producer;      /* op index, -1 for leaves */
  int producer_slot; /* which output of the producer */
  bool has_range;    /* integer inputs: values in [range_lo, range_hi) */
  int64_t range_lo, range_hi;
  plan_recipe recipe;
  double recipe_theta, recipe_fill;
} vx_tensor;

/* One op (plan_program_op's view). */
typedef struct vx_op {
  const char *name;
  int kind; /* plan_op_kind */
  int nin, nout;
  const int *in, *out; /* tensor indices */
  const plan_attr_val *attrs;
} vx_op;

typedef struct vx_program {
  const plan_program *pub;
  vx_tensor *tensors;
  int ntensors;
  vx_op *ops; /* in topological order */
  int nops;
  int *outputs;
  int noutputs;
  int loss; /* tensor index or -1 */
} vx_program;

/* A shard ratio set (plan_mesh_ratio). */
typedef struct vx_ratios {
  int axis, n;
  const int64_t *w;
} vx_ratios;

typedef struct vx_mesh {
  int naxes;
  const char *axis_names[PLAN_MAX_MESH_AXES];
  int64_t axis_sizes[PLAN_MAX_MESH_AXES];
  int64_t ndevices;
  vx_ratios *ratios;
  int nratios;
} vx_mesh;

/* The training options (plan_get_training). */
typedef struct vx_training {
  plan_optimizer optimizer;
  double lr, momentum, beta1, beta2, eps, weight_decay;
  int64_t steps;
  int param_dtype, compute_dtype, grad_dtype, accum_dtype; /* -1: own */
  double clip_grad_norm, loss_scale;
} vx_training;

/* ---- the steps ----------------------------------------------------------- */

/* The collectives and local redistribution steps, in the order (and with
 * the names) of plan_lowered_collective_count's kinds. */
typedef enum vx_redist_kind {
  VX_REDIST_ALL_GATHER,
  VX_REDIST_ALL_REDUCE,
  VX_REDIST_REDUCE_SCATTER,
  VX_REDIST_ALL_TO_ALL,
  VX_REDIST_SLICE,
  VX_REDIST_ZERO_NON_OWNER,
  VX_REDIST_RELABEL,
  VX_REDIST_COUNT
} vx_redist_kind;

/* "all_gather", ... "relabel"; "?" out of range. */
const char *plan_vx_redist_kind_name(vx_redist_kind k);

typedef struct vx_redist_step {
  vx_redist_kind kind;
  int axis;           /* the mesh axis it acts along */
  int dim, to_dim;    /* as plan_lowered_step_info's; -1 where unused */
  plan_reduce reduce; /* all_reduce, reduce_scatter, relabel; else sum */
} vx_redist_step;

typedef enum vx_step_kind {
  VX_STEP_INPUT,    /* a leaf's blocks made in its storage placement */
  VX_STEP_OP,       /* a program op on local blocks */
  VX_STEP_REDIST,   /* one redistribution step: in[0] -> out[0] */
  VX_STEP_TRANSFER, /* pipelines: in[0], another stage's, received */
  VX_STEP_WAIT,     /* waits for the collectives on `stream` writing in[0] */
  VX_STEP_COUNT
} vx_step_kind;

typedef struct vx_step {
  vx_step_kind kind;
  int op; /* OP: program op index; else -1 */
  int nin, nout;
  const int *in, *out; /* buffer indices */
  vx_redist_step redist;
  /* a lowered file's member orders (plan_lowered_step_order): NULL for
   * coordinate order */
  const int64_t *group_order, *rank_order;
  int64_t mb_shift; /* pipelines: microbatch k gets (k + mb_shift) mod m's */
  int stream;       /* communication overlap (plan_lowered_step_sched) */
  int chunk_dim;
  int64_t chunk_index, chunk_of, chunk_at;
} vx_step;

/* A distributed buffer: one global tensor in one placement. */
typedef struct vx_buf {
  int tensor;
  plan_placement pl;
} vx_buf;

/* Where a step of a pipelined program runs (plan_lowered_step_pipe's
 * phases, in their order). */
typedef enum vx_phase {
  VX_PHASE_PRE,
  VX_PHASE_F,
  VX_PHASE_I,
  VX_PHASE_W,
  VX_PHASE_RECV_F,
  VX_PHASE_RECV_B,
  VX_PHASE_POST,
  VX_PHASE_COUNT
} vx_phase;

typedef struct vx_pipe {
  int axis; /* the microbatch axis */
  int64_t microbatches;
  int nstages;
  const plan_schedule *schedule;
  int *stage;      /* [step]; -1 for PRE and POST */
  uint8_t *phase;  /* [step]: vx_phase */
  int *from_stage; /* [step]: a TRANSFER's sender; else -1 */
  int transfers, local_transfers;
} vx_pipe;

/* A training step (plan_lowered_training, plan_lowered_param). */
typedef struct vx_train {
  bool map; /* the training program of autodiff (a seed grad/<loss>) */
  int loss;
  int nparams;
  int *param, *grad_out;
  plan_placement *master;
  unsigned *norm_axes;
} vx_train;

/* The lowered program. */
typedef struct vx_lowered {
  const plan_lowered *pub;
  const plan_plan *plan; /* plan_lowered_plan(pub) */
  vx_program program;
  vx_mesh mesh;
  vx_training training;
  vx_buf *bufs; /* malloc'd: a training step's run adds its master
                   placements' buffers (verify_train.c) */
  int nbufs, cap_bufs;
  vx_step *steps;
  int nsteps;
  int *produced;  /* per tensor: the buffer of its layout, -1: none */
  int *delivered; /* per output slot: the buffer delivering it */
  /* per output slot: the placement required of it; NULL when a lowered
   * file states none */
  plan_placement *required;
  int *grad_of; /* per output slot: the param whose gradient it is, or -1 */
  int collectives[VX_REDIST_COUNT];
  vx_train *train; /* NULL for a forward program */
  vx_pipe *pipe;   /* NULL without a pipeline */
  /* manual regions: the reference program's ops and tensors (0 without) */
  int norig_ops, norig_tensors;
  plan_arena arena;
} vx_lowered;

/* The copy of l (which must outlive it) into *out; free it with
 * plan_vx_lowered_free. PLAN_ENOMEM, or a view's failure. */
int plan_vx_lowered_new(vx_lowered **out, const plan_lowered *l);
void plan_vx_lowered_free(vx_lowered *v);

/* Rank r's block of `tensor` under placement pl (at coordinates coord):
 * its extents into local, its offset into offset. */
static inline void plan_vx_block_of(const vx_lowered *v,
                                    const plan_placement *pl, int tensor,
                                    const int64_t *coord, int64_t *local,
                                    int64_t *offset) {
  plan_lowered_placement_block(local, offset, v->pub, pl, tensor, coord);
}

#endif
