/* libplan: lowered programs.
 *
 * A plan lowers to an explicit SPMD program over rank-local buffers: every
 * rank runs the same steps, each a local op on local blocks or one
 * collective along one mesh axis (all_gather, all_reduce, reduce_scatter,
 * all_to_all, and the local slice / zero_non_owner / relabel steps), and a
 * layout map says which buffer holds every tensor of the single-device
 * program, in which placement. The file form (spec/lowered-format.md) is a
 * YAML document whose first key is `libplan-lowered`; `plan verify` runs
 * one as it is (docs/verify.md). */
#ifndef LIBPLAN_LOWERED_H
#define LIBPLAN_LOWERED_H

#include "common.h"
#include "ops.h"
#include "plan.h"
#include "schedule.h"
#include "space.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_lowered plan_lowered;

/* Lowers `p`, which should validate without errors (plan_validate): a
 * plan with a `training` section lowers its training step (forward, then
 * backward ops, the gradient sync), a pipelined plan its step over the
 * microbatch mesh. `p` must outlive *out; free *out with
 * plan_lowered_free. Returns PLAN_OK; PLAN_EUNSUPPORTED for what is not
 * lowered here (a manual region, whose body needs a tracer: plan_verify
 * runs it; training features the lowering refuses); PLAN_EINVALID when a
 * redistribution cannot be planned or a gradient cannot be synced as the
 * plan says; PLAN_EUSAGE for a NULL plan or one without a mesh;
 * PLAN_ENOMEM. */
PLAN_API int plan_lower(plan_lowered **out, const plan_plan *p);
/* plan_lower for a plan with manual regions: each region's body is run by
 * `tracer` (libplan/trace.h; NULL: refused with PLAN_EUNSUPPORTED, as
 * plan_lower does). The lowered program's file form carries the traced
 * ops of every region, so it verifies from the file alone. */
PLAN_API int plan_lower_traced(plan_lowered **out, const plan_plan *p,
                               plan_region_tracer tracer, void *user);
/* Frees a lowered program; accepts NULL. */
PLAN_API void plan_lowered_free(plan_lowered *l);

/* The text form (spec/lowered-format.md) into a newly allocated,
 * NUL-terminated buffer of *len bytes; free *out with plan_buffer_free.
 * A pipelined program is written with its `pipeline:` section and each
 * step's stage and phase. PLAN_ENOMEM, PLAN_EUSAGE for a NULL argument;
 * *out = NULL on failure. */
PLAN_API int plan_lowered_write(char **out, size_t *len, const plan_lowered *l);
/* Writes the text form to `path` atomically (as plan_write_file_atomic
 * does). A program given by path is written relative to the new file's
 * folder, so the file finds it wherever it is written. PLAN_EIO naming
 * the path, and the statuses of plan_lowered_write. */
PLAN_API int plan_lowered_save(const plan_lowered *l, const char *path);

/* Reads a lowered program file. The program given by path is resolved
 * relative to the file's folder. Every collective step must fit its
 * buffers' placements. On failure returns a negative status (PLAN_EIO,
 * PLAN_ESYNTAX, PLAN_ESCHEMA, PLAN_EVERSION, PLAN_EINVALID, PLAN_ENOMEM;
 * PLAN_EUSAGE for a NULL argument) with the last error naming file, line
 * and column, as plan_load does; *out = NULL. */
PLAN_API int plan_lowered_load(plan_lowered **out, const char *path);
/* The same from memory: `name` is used in messages, a program path is
 * resolved relative to `base_dir` (NULL: the current folder). */
PLAN_API int plan_lowered_load_buffer(plan_lowered **out, const char *data,
                                      size_t len, const char *name,
                                      const char *base_dir);

/* Content hash of the lowered program's canonical encoding: the program's
 * hash, the mesh, and the buffers, steps, layouts and outputs as written.
 * A lowered program and the file it writes, read back, hash the same (a
 * training step's and a pipelined program's too). PLAN_ENOMEM;
 * PLAN_EUSAGE for a NULL argument. */
PLAN_API int plan_lowered_hash(plan_hash *out, const plan_lowered *l);

/* 1 when `data` (len bytes) starts as a lowered program (its first key,
 * after comments and blank lines, is `libplan-lowered`), else 0 (also for
 * a NULL data); nothing
 * is parsed, so a caller can choose between plan_lowered_load_buffer and
 * plan_load_buffer. */
PLAN_API int plan_is_lowered_text(const char *data, size_t len);

/* ---- views ------------------------------------------------------------ */

/* The plan whose program and mesh the steps run on (never NULL for a valid
 * l): the plan lowered, its training step's plan for a training plan, or
 * the program and mesh a lowered file carries. Borrowed: valid while l
 * lives. NULL for a NULL l. */
PLAN_API const plan_plan *plan_lowered_plan(const plan_lowered *l);
/* The number of steps; -1 for a NULL l. */
PLAN_API int plan_lowered_step_count(const plan_lowered *l);
/* The number of steps of one collective kind ("all_gather", "all_reduce",
 * "reduce_scatter", "all_to_all", "slice", "zero_non_owner", "relabel"),
 * or "op_all_reduce": the all-reduces op steps run inside themselves (a
 * class-split cross_entropy's three and its gradient's two per axis that
 * splits the classes); -1 for an unknown kind or a NULL argument. */
PLAN_API int plan_lowered_collective_count(const plan_lowered *l,
                                           const char *kind);

/* The views below read one step, buffer, tensor layout or output of l by
 * index. Pointers they hand out (strings, buffer index arrays, attribute
 * values) are borrowed from l (or its plan) and valid while l lives; the
 * structs are plain data the caller owns. Program indices (op, tensor)
 * are those of plan_lowered_plan(l)'s program (plan_get_program), a
 * training step's the training program's. Each returns PLAN_OK, or
 * PLAN_EUSAGE (with the last error saying why, *out unchanged) for a NULL
 * argument or an index out of range. */

/* One step. Layout (part of the ABI) as declared. */
typedef struct plan_lowered_step_info {
  /* "input" (a leaf's blocks made in its storage placement), "op" (a
   * program op on local blocks), "transfer" (pipelines: a buffer another
   * stage wrote, received), or the collective or local redistribution
   * step: "all_gather", "all_reduce", "reduce_scatter", "all_to_all",
   * "slice", "zero_non_owner", "relabel" (the names
   * plan_lowered_collective_count takes). Static. */
  const char *kind;
  int op;      /* "op": the program op; else -1 */
  int op_kind; /* "op": its plan_op_kind (ops.h); else -1 */
  /* "op": its attribute values in its kind's schema order (plan_op_attrs);
   * NULL for a kind without attributes and for every other step */
  const plan_attr_val *attrs;
  int axis; /* a collective: the mesh axis it acts along; else -1 */
  /* all_gather, reduce_scatter, slice: the tensor dim; all_to_all: the dim
   * the axis leaves; else -1 */
  int dim;
  int to_dim; /* all_to_all: the dim the axis goes to; else -1 */
  /* all_reduce, reduce_scatter: the reduction; relabel: the new P's;
   * zero_non_owner: PLAN_RED_SUM; else -1 (plan_reduce, space.h) */
  int reduce;
  int nin, nout;  /* buffers read and written */
  const int *in;  /* nin buffer indices */
  const int *out; /* nout buffer indices */
  /* a pipelined program: the stage it runs in, -1 before and after the
   * schedule (leaves, the gradient sync); -1 without a pipeline */
  int stage;
} plan_lowered_step_info;

PLAN_API int plan_lowered_step(plan_lowered_step_info *out,
                               const plan_lowered *l, int step);

/* Communication overlap: how step `step` runs in time. A collective with
 * stream > 0 is started on that stream and runs asynchronously: what it
 * writes may be read only after a "wait" step on it (kind "wait" in
 * plan_lowered_step_info: in[0] is the buffer waited for, stream the
 * stream). stream 0: the step completes where it stands (the compute
 * stream). A chunked collective (chunk_of > 0) moves slice chunk_index of
 * chunk_of along chunk_dim of its input's blocks into slice chunk_at of
 * its output's. Layout (part of the ABI) as declared. */
typedef struct plan_lowered_sched_info {
  int stream;
  int chunk_dim; /* -1 when not chunked */
  int64_t chunk_index, chunk_of, chunk_at;
} plan_lowered_sched_info;

PLAN_API int plan_lowered_step_sched(plan_lowered_sched_info *out,
                                     const plan_lowered *l, int step);

/* The static happens-before check of the streams (spec/lowered-format.md,
 * "Streams"): no step reads a buffer a started collective writes before
 * its wait, none writes a buffer a collective in flight reads or writes,
 * every start is waited, every wait has a start. PLAN_OK, or
 * PLAN_EINVALID with *bad_step the first step at fault (-1 for a start
 * never waited: then the start) and a one-line reason in why. */
PLAN_API int plan_lowered_check_streams(const plan_lowered *l, int *bad_step,
                                        char *why, size_t why_size);

/* One buffer: a global tensor in one placement. Layout (part of the ABI)
 * as declared. */
typedef struct plan_lowered_buffer_info {
  int tensor;              /* the program tensor it holds */
  const char *tensor_name; /* its name (borrowed) */
  /* the buffer's number among the tensor's buffers: the file form names it
   * "<tensor_name>@<ordinal>" */
  int ordinal;
  int dtype; /* plan_dtype (ops.h) */
  int rank;
  int64_t dims[PLAN_MAX_RANK]; /* the global shape, rank entries */
  plan_placement placement;    /* over the mesh, normalised */
  char placement_text[PLAN_PLACEMENT_STRLEN]; /* its compact form, "S(0)R" */
} plan_lowered_buffer_info;

/* The number of buffers; -1 for a NULL l. */
PLAN_API int plan_lowered_buffer_count(const plan_lowered *l);
PLAN_API int plan_lowered_buffer(plan_lowered_buffer_info *out,
                                 const plan_lowered *l, int buffer);
/* The block of buffer `buffer` that mesh rank `rank` holds (ranks
 * 0..plan_mesh_device_count(plan_lowered_plan(l)) - 1, row-major over the
 * mesh axes, the last fastest): its extents into dims[0..rank) and its
 * global offset into offset[0..rank) (nested torch.chunk pieces, as the
 * file form says; partial axes change nothing). Either may be NULL; each
 * needs the tensor's rank of entries (PLAN_MAX_RANK always suffice).
 * Returns the tensor's rank (>= 0), or PLAN_EUSAGE. */
PLAN_API int plan_lowered_buffer_block(int64_t *dims, int64_t *offset,
                                       const plan_lowered *l, int buffer,
                                       int64_t rank);

/* The layouts map: the buffer that holds program tensor `tensor` in *out,
 * or -1 when no step of the lowered program writes it. Tensors run
 * 0..plan_program_tensor_count - 1 of plan_lowered_plan(l)'s program. */
PLAN_API int plan_lowered_layout(int *out, const plan_lowered *l, int tensor);

/* One program output as the lowered program delivers it. Layout (part of
 * the ABI) as declared. */
typedef struct plan_lowered_output_info {
  int tensor; /* the output's program tensor */
  int buffer; /* the buffer that delivers it */
  /* 1: the plan requires it in `required` (its output placement; a
   * gradient's master placement, the gradient sync), which plan_verify
   * checks the delivered buffer is in; 0: a lowered file that states none
   * (then `required` is the delivered buffer's placement) */
  int has_required;
  plan_placement required;
  char required_text[PLAN_PLACEMENT_STRLEN]; /* its compact form */
  int gradient_of; /* the param tensor whose gradient it is, else -1 */
} plan_lowered_output_info;

/* The number of program outputs; -1 for a NULL l. */
PLAN_API int plan_lowered_output_count(const plan_lowered *l);
PLAN_API int plan_lowered_output(plan_lowered_output_info *out,
                                 const plan_lowered *l, int k);

/* A pipelined program (spec/lowered-format.md, "Pipelines"): lowered over
 * its microbatch mesh, plan_lowered_plan(l)'s mesh. Layout (part of the
 * ABI) as declared. */
typedef struct plan_lowered_pipeline_info {
  int axis;             /* the microbatch axis of the mesh */
  int64_t microbatches; /* its size */
  int stages;
  /* each pipeline rank's actions and the stages' placement on the ranks
   * (libplan/schedule.h views: plan_schedule_get, plan_schedule_stage_rank);
   * borrowed, never simulated here */
  const plan_schedule *schedule;
  int transfers;       /* transfer steps between pipeline ranks: send/recv */
  int local_transfers; /* between two stages of one rank (a V's turn) */
} plan_lowered_pipeline_info;

/* PLAN_OK; PLAN_ENOTFOUND when l has no pipeline; PLAN_EUSAGE for a NULL
 * argument (*out unchanged on failure). */
PLAN_API int plan_lowered_pipeline(plan_lowered_pipeline_info *out,
                                   const plan_lowered *l);

/* Where step `step` of a pipelined program runs. Layout (part of the ABI)
 * as declared. */
typedef struct plan_lowered_step_pipe_info {
  /* "pre" (before the schedule, every rank), "F", "I", "W" (its stage's
   * forward, input-gradient and weight-gradient halves), "RECV_F",
   * "RECV_B" (a transfer into its stage), "post" (after the schedule).
   * Static. */
  const char *phase;
  int stage;      /* its stage; -1 for pre and post */
  int from_stage; /* a transfer: the stage that sends; else -1 */
  /* an input or a transfer: microbatch k receives microbatch
   * (k + mb_shift) mod m's data (0 in every lowering) */
  int64_t mb_shift;
} plan_lowered_step_pipe_info;

/* PLAN_OK; PLAN_ENOTFOUND when l has no pipeline; PLAN_EUSAGE for a NULL
 * argument or a step out of range. */
PLAN_API int plan_lowered_step_pipe(plan_lowered_step_pipe_info *out,
                                    const plan_lowered *l, int step);

/* A lowered file's explicit member orders of step `step`
 * (spec/lowered-format.md, "order" and "groups"). Layout (part of the ABI)
 * as declared; the arrays are borrowed from l. */
typedef struct plan_lowered_order_info {
  /* an all_gather's or reduce_scatter's `order`: the coordinate on the
   * step's axis of the member whose block is at each position of the
   * concatenation (`length` entries); NULL: coordinate order */
  const int64_t *group_order;
  /* `groups` whose member orders differ between groups: row r (of
   * plan_mesh_device_count rows, `length` entries each) the order of rank
   * r's group; NULL: group_order for every group */
  const int64_t *rank_order;
  int64_t length; /* the step's axis size; 0 when both are NULL */
} plan_lowered_order_info;

PLAN_API int plan_lowered_step_order(plan_lowered_order_info *out,
                                     const plan_lowered *l, int step);

/* The block of a tensor under any placement, as plan_lowered_buffer_block
 * gives a buffer's: program tensor `tensor` of plan_lowered_plan(l) in
 * placement *pl (over its mesh, normalised: as the views give them) on the
 * rank at mesh coordinates coord[0..axes). Its extents into dims, its
 * global offset into offset (either may be NULL). Returns the tensor's
 * rank, or PLAN_EUSAGE for a NULL l, pl or coord or a tensor out of
 * range. */
PLAN_API int plan_lowered_placement_block(int64_t *dims, int64_t *offset,
                                          const plan_lowered *l,
                                          const plan_placement *pl, int tensor,
                                          const int64_t *coord);

/* A lowered training step (a plan with a `training` section): what its
 * optimizer updates. Layout (part of the ABI) as declared. */
typedef struct plan_lowered_training_info {
  int loss;   /* the loss tensor */
  int params; /* the float params updated (plan_lowered_param) */
  /* 1: the program is the training program of autodiff, whose backward
   * pass is seeded by grad/<loss> (plan_program_grad_tensor); 0: a lowered
   * file's, which states no seed */
  int has_grad_map;
} plan_lowered_training_info;

/* PLAN_OK; PLAN_ENOTFOUND when l is not a training step; PLAN_EUSAGE for
 * a NULL argument (*out unchanged on failure). */
PLAN_API int plan_lowered_training(plan_lowered_training_info *out,
                                   const plan_lowered *l);

/* Param i (0 .. params - 1) of a lowered training step. Layout (part of
 * the ABI) as declared. */
typedef struct plan_lowered_param_info {
  int tensor;      /* the param */
  int grad_output; /* the output slot delivering its synced gradient, in
                      the master placement (plan_lowered_output) */
  /* where its update runs and its master copy and optimizer state live:
   * its storage placement, or its optimizer_state placement
   * (reduce_scatter: ZeRO / FSDP) */
  plan_placement master;
  int sync; /* plan_grad_sync (plan.h) */
  /* gradient clipping: the mesh axes (bit a for axis a) along which the
   * ranks' sums of squares of the synced gradient add up (those that
   * shard it, each replica counted once) */
  unsigned norm_axes;
} plan_lowered_param_info;

/* PLAN_OK; PLAN_ENOTFOUND when l is not a training step; PLAN_EUSAGE for
 * a NULL argument or i out of range. */
PLAN_API int plan_lowered_param(plan_lowered_param_info *out,
                                const plan_lowered *l, int i);

/* Manual regions (plan_lower_traced): the program is the plan's with
 * every region's traced ops (and their tensors) appended; ops from
 * orig_ops on and tensors from orig_tensors on are the lowered run's
 * alone, the reference runs each region's own ops instead. Layout (part of
 * the ABI) as declared. */
typedef struct plan_lowered_regions_info {
  int regions;      /* 0 without manual regions */
  int orig_ops;     /* the reference program's ops; 0 without regions */
  int orig_tensors; /* its tensors; 0 without regions */
  /* the plan whose program (without the traced ops) is the reference;
   * NULL without regions. Borrowed. */
  const plan_plan *reference;
} plan_lowered_regions_info;

/* PLAN_OK (regions 0 without manual regions), PLAN_EUSAGE for a NULL
 * argument. */
PLAN_API int plan_lowered_regions(plan_lowered_regions_info *out,
                                  const plan_lowered *l);

/* Manual region k. Layout (part of the ABI) as declared. */
typedef struct plan_lowered_region_info {
  const char *name;     /* borrowed */
  plan_hash body_hash;  /* of the body text its ops were traced from */
  int op_begin, op_end; /* its traced ops: op_begin .. op_end - 1 */
  int nreplaces;
  const int *replaces; /* the program ops it replaces (borrowed) */
} plan_lowered_region_info;

/* PLAN_OK, PLAN_EUSAGE for a NULL argument or k out of range. */
PLAN_API int plan_lowered_region(plan_lowered_region_info *out,
                                 const plan_lowered *l, int k);

#ifdef __cplusplus
}
#endif
#endif
