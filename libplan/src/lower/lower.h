/* Lowering: a plan becomes an explicit SPMD program over rank-local buffers
 * (spec/lowered-format.md, docs/verify.md). Every rank runs the same
 * steps; a step is a local op on local blocks or one redistribution step
 * (redist.h) along one mesh axis. The layout map says, for every tensor of
 * the reference
 * program, which buffer holds it and in which placement, so a verifier can
 * reassemble the global tensor from the ranks' blocks.
 *
 * A plan with a `training` section lowers its training step: the training
 * program of autodiff (forward ops, then backward ops) with a strategy for
 * every backward op derived from its forward op's (lower_train.c), and each
 * param's gradient delivered where its optimizer update runs (the gradient
 * sync). A plan with a pipeline lowers its step over the microbatch mesh
 * and tags every step with the stage and phase it runs in (lower_pipe.c);
 * the verifier runs it action by action as the schedule says. */
#ifndef LIBPLAN_LOWER_H
#define LIBPLAN_LOWER_H

#include "ir/ir.h"
#include "libplan/lowered.h"
#include "libplan/trace.h"
#include "lower/redist.h"

/* A distributed buffer: one global tensor in one placement. */
typedef struct plan_lbuf {
  int tensor; /* index into the program's tensors */
  plan_placement pl;
} plan_lbuf;

typedef enum plan_lstep_kind {
  PLAN_LSTEP_INPUT,    /* materialise a leaf tensor's blocks (inputs, params,
                          consts) in its storage placement */
  PLAN_LSTEP_OP,       /* a program op on local blocks */
  PLAN_LSTEP_REDIST,   /* one redistribution step: in[0] -> out[0] */
  PLAN_LSTEP_TRANSFER, /* pipelines: in[0] (written by another stage) sent
                          to this step's stage, as out[0]: same tensor,
                          same placement */
  PLAN_LSTEP_WAIT,     /* communication overlap: waits until the
                          collectives started on `stream` that write in[0]
                          have completed (no data change; nout 0) */
  PLAN_LSTEP_COUNT
} plan_lstep_kind;

typedef struct plan_lstep {
  plan_lstep_kind kind;
  int op; /* OP: program op index; else -1 */
  int nin, nout;
  int *in; /* buffer indices */
  int *out;
  plan_redist_step redist; /* REDIST */
  int64_t *group_order;    /* ALL_GATHER from a lowered file: the coordinate
                              whose block lands at each position of the
                              concatenation; NULL: coordinate order */
  int64_t *rank_order;     /* a lowered file's `groups` whose member orders
                              differ between groups: [nranks * k], row r the
                              coordinates on the axis of the members of r's
                              group in member order (the group_order of r's
                              group); NULL: group_order for every group */
  /* Pipelines, INPUT and TRANSFER steps: microbatch k receives the data of
   * microbatch (k + mb_shift) mod m. 0 in every lowering; the bug corpus
   * sets it (labels paired with another microbatch's inputs, a send/recv
   * off by one microbatch). */
  int64_t mb_shift;
  /* Communication overlap (lower_overlap.c, lowered_hb.c). A REDIST step
   * with stream > 0 is started there, asynchronously: its out[0] may be
   * read only after a WAIT step on it (stream 0: it completes in place);
   * a WAIT's stream is the one it waits on. */
  int stream;
  /* A chunked REDIST (chunk_of > 0): the collective on the slice
   * chunk_index of chunk_of along chunk_dim of in[0]'s local blocks
   * (torch.chunk, even: chunk_of divides every block's extent), written
   * to slice chunk_at of out[0]'s blocks: the k steps of a decomposed
   * collective write out[0] slice by slice, chunk_at their reassembly. */
  int chunk_dim;
  int64_t chunk_index, chunk_of, chunk_at;
  /* Lowering only (not in the file form): what made a REDIST step, for
   * the overlap entries to select it: the op and operand whose input it
   * redistributes, or the output slot it delivers; -1 when neither. */
  int origin_op, origin_in, origin_out;
} plan_lstep;

/* Where a step of a pipelined program runs. */
typedef enum plan_lphase {
  PLAN_LPHASE_PRE,    /* before the schedule, on every rank: leaves */
  PLAN_LPHASE_F,      /* its stage's forward (action F) */
  PLAN_LPHASE_I,      /* the input-gradient half of its backward (B or I) */
  PLAN_LPHASE_W,      /* the weight-gradient half (B or W) */
  PLAN_LPHASE_RECV_F, /* a TRANSFER into its stage, forward (RECV_F, or
                         before F when the schedule has no receive) */
  PLAN_LPHASE_RECV_B, /* backward (RECV_B, or before B / I) */
  PLAN_LPHASE_POST,   /* after the schedule, on every rank: the sum over
                         microbatches (gradient accumulation), the gradient
                         sync, the outputs' delivery */
  PLAN_LPHASE_COUNT
} plan_lphase;

/* A pipelined step (lower_pipe.c). Microbatches are a sharding in time:
 * the plan is lowered over its microbatch mesh, the mesh with the
 * pipeline axis (R everywhere) replaced by an axis of `microbatches`
 * along which inputs are split on their batch dim. A rank of that mesh is
 * a (device of one pipeline rank's sub-mesh, microbatch) pair. */
typedef struct plan_lpipe {
  int axis; /* the microbatch axis (the pipeline axis's slot) */
  int64_t microbatches;
  int nstages;
  struct plan_schedule *schedule; /* each pipeline rank's actions (stage
                                     s on the rank of its placement,
                                     plan_schedule_stage_rank) */
  int *stage;                     /* [step]: its stage; -1 for PRE and POST */
  uint8_t *phase;                 /* [step]: plan_lphase */
  int *from_stage;     /* [step]: a TRANSFER's sending stage; else -1 */
  int transfers;       /* TRANSFER steps between ranks: the send/recv pairs */
  int local_transfers; /* TRANSFER steps between two stages of one rank */
  plan_plan *xplan;    /* the plan over the microbatch mesh: owned, its
                          program borrowed from the plan lowered */
} plan_lpipe;

struct plan_grad_map;

/* A lowered training step: what the optimizer updates, and where. */
typedef struct plan_ltrain {
  struct plan_grad_map *map; /* training program vs forward program */
  int loss;                  /* the loss tensor */
  int nparams;
  int *param;    /* [nparams]: float params (tensor indices) */
  int *grad_out; /* [nparams]: the output slot delivering its synced
                    gradient, in the master placement */
  /* [nparams]: where the update runs, and where the master copy of the
   * param and its optimizer state live: the param's storage placement
   * (all-reduce, auto, none) or its optimizer_state placement
   * (reduce_scatter: ZeRO/FSDP, the next step's param is all-gathered
   * from the master) */
  plan_placement *master;
  plan_grad_sync *sync;
  /* [nparams]: gradient clipping by global norm, the mesh axes (bit a for
   * axis a) along which the ranks' sums of squares of the synced gradient
   * are summed: those that shard it (each replica counted once) */
  unsigned *norm_axes;
} plan_ltrain;

/* A manual region of a lowered program: the traced ops of its body (ops
 * op_begin..op_end-1 of the lowered program's program), the program ops
 * it replaces, and the hash of the body they were traced from. */
typedef struct plan_lregion {
  const char *name;
  plan_hash body_hash;
  int op_begin, op_end;
  int nreplaces;
  int *replaces; /* program op indices */
} plan_lregion;

/* The lowered program (libplan/lowered.h declares it opaque). */
struct plan_lowered {
  const plan_plan *plan;
  plan_plan *own_plan; /* a lowered file's program and mesh (else NULL) */
  plan_arena arena;
  plan_lbuf *bufs;
  int nbufs, cap_bufs;
  plan_lstep *steps;
  int nsteps, cap_steps;
  int *produced;  /* per program tensor: the buffer its producer (or its
                     INPUT step) writes, -1 when none */
  int *delivered; /* per program output slot: the buffer in the output
                     placement */
  /* per program output slot: the placement the plan requires it in (its
   * output placement; a gradient's master placement, the gradient sync),
   * which the verifier checks the delivered buffer is in; NULL for a
   * lowered file that states none (then no output may be partial) */
  plan_placement *required;
  int *grad_of; /* per output slot: the param whose gradient it is, or -1;
                   NULL with required */
  int collectives[PLAN_REDIST_COUNT]; /* steps of each kind */
  plan_ltrain *train; /* a training step; NULL for a forward program */
  plan_lpipe *pipe;   /* a pipelined program; NULL without a pipeline */
  /* Manual regions (trace.c): the program is the plan's with the traced
   * ops appended; ops from norig_ops on and tensors from norig_tensors on
   * are the lowered run's alone (the reference runs the region's own ops
   * instead). 0 without manual regions. */
  int norig_ops, norig_tensors;
  const struct plan_trace *trace; /* while lowering */
  /* With manual regions: the plan whose program (without the traced ops)
   * is the reference, whose program and mesh the file form writes (the
   * plan lowered, which outlives l, or own_ref for a file), and the
   * regions (arena). */
  const plan_plan *ref_plan;
  plan_plan *own_ref;
  int nregions;
  plan_lregion *regions;
};

/* plan_lower, plan_lowered_free and the file form (write, load, hash) are
 * public: libplan/lowered.h. A training plan lowers its training step,
 * whose program (l->plan->program) is the training program, owned by l. */

/* Internal to lowering: the steps of l->plan (lower.c), and the training
 * step of p (lower_train.c). */
int plan_lower_steps(plan_lowered *l);
int plan_lower_train(plan_lowered **out, const plan_plan *p);
/* The same over a microbatch mesh: every gradient is delivered summed
 * over `mb_axis` (accumulated), whatever its sync; -1: no such axis. */
int plan_lower_train_mb(plan_lowered **out, const plan_plan *p, int mb_axis);
void plan_ltrain_free(plan_ltrain *t);

/* The hash a lowered program records of a manual region's body text
 * (lowered_io.c). */
plan_hash plan_lowered_body_hash(const char *body);

/* Renumbers l's buffers in the order its steps first write them (a
 * chunked collective's slices share a buffer, its copies their in and out
 * arrays, renumbered once): bufs, every step's in and out, produced and
 * delivered, so a program and its file form number, write and hash alike.
 * A buffer no step writes goes last; *unwritten (NULL: not asked) gets the
 * first such buffer's old index, -1 when none (lowered_api.c). */
int plan_lowered_renumber(plan_lowered *l, int *unwritten);

/* Communication overlap (lower_overlap.c): applies p's `overlap` entries
 * to l (lowered from p): the collectives they select are started on their
 * streams where the entries say, waited where they say, decomposed into
 * chunks. Without `d`, the first problem is an error (PLAN_EINVALID at the
 * entry's position; PLAN_EUNSUPPORTED for a pipeline); with it, each is a
 * finding in d (overlap.*) and the entry is left out. */
int plan_lower_overlap(plan_lowered *l, const plan_plan *p,
                       struct plan_diags *d);
/* Whether a collective started before step `upto` and not waited before
 * it reads or writes buffer buf; *start is the step (lowered_hb.c). */
int plan_lowered_inflight(const plan_lowered *l, int upto, int buf, int *start);
/* The overlap entries of p judged on its lowered program: what they
 * select, their order and chunks, as findings in d (plan_validate; a
 * plan that does not lower is left to its other findings). */
int plan_overlap_validate(const plan_plan *p, struct plan_diags *d);
/* plan_lower without the overlap entries applied (lower.c). */
int plan_lower_plain(plan_lowered **out, const plan_plan *p,
                     plan_region_tracer tracer, void *user);

/* A plan with a pipeline (lower_pipe.c). */
int plan_lower_pipeline(plan_lowered **out, const plan_plan *p);
/* The dim of leaf t that microbatches split: the dim named `batch`, else
 * dim 0 for an input; -1 when it is not split (params, consts without a
 * batch dim, scalars). */
int plan_pipeline_batch_dim(const plan_tensor *t);
void plan_lpipe_free(plan_lpipe *pp);

#endif
