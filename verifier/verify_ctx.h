/* The verifier's context, shared by its files (verify.c lists them: the
 * driver, the runs, the comparison, the diagnoses, a training step's
 * optimizer update), and what each file gives the others. Internal to
 * verifier/. */
#ifndef LIBPLAN_VERIFIER_VERIFY_CTX_H
#define LIBPLAN_VERIFIER_VERIFY_CTX_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "runner.h"
#include "verify_int.h"
#include "vx_program.h"

/* ---- blocks -------------------------------------------------------------- */

typedef plan_vblock block;

/* The comparison of one buffer with the reference. */
typedef struct diff {
  int64_t mismatches, compared;
  double err64, base64; /* float mode: sum of squares of got - ref64 and of
                           ref - ref64 over the compared finite elements */
  bool nonfinite;       /* an infinity or NaN where the reference differs:
                           no norm bound can excuse it */
  double max_abs, max_rel;
  int64_t at; /* global index of the largest abs error */
  double got, want;
  /* float mode, for the depth bound: sums of squares of got - ref and of
   * ref, the largest |got - ref| / (|ref| + RMS(ref)) outside tolerance,
   * and whether a mismatch was not finite */
  double err2, ref2, max_scaled;
  bool bad_nonfinite;
} diff;

/* The most blocks one verification simulates: ranks (microbatches
 * included) times buffers of the lowered program. Every rank holds a
 * block of every buffer, made, run and compared even where it holds
 * nothing or a replica, so the work grows with the mesh, not the data (a
 * 4M-rank mesh over an 8-element tensor, 8M blocks, took 4.3 s and 1.7 GB
 * for an exact and a float run; the reduced 405B plan on 16,384 devices,
 * 13M blocks, 169 s and 4.5 GB). Past this
 * the run is refused as PLAN_EUNSUPPORTED (exit 3) with the counts,
 * before anything is allocated (docs/verify.md, "Limits of the run"). */
#define PLAN_VERIFY_MAX_RANK_BLOCKS ((int64_t)1 << 24) /* 16777216 */

/* One size class of the pool of blocks handed back. */
#define PLAN_VX_POOL_BUCKETS 64
typedef struct plan_vx_bucket {
  double **data;
  int64_t *n; /* each block's room, in doubles */
  int count, cap;
} plan_vx_bucket;

typedef struct vctx {
  const plan_plan *p; /* the plan the steps run on (public calls) */
  const vx_program *prog;
  const vx_mesh *m;
  vx_lowered *low;   /* the verifier's copy of `own` */
  plan_lowered *own; /* the program verified (freed with the context) */
  const plan_verify_options *o;
  plan_verify_step_hook hook; /* a faulty runner's stand-in, or NULL */
  void *hook_user;
  const plan_runner_vtable *runner;
  int64_t nranks;
  int64_t (*coords)[PLAN_MAX_MESH_AXES];
  block **bufs;   /* [buffer][rank] */
  double **ref;   /* [tensor]: the reference run */
  double **ref64; /* [tensor]: float mode, the reference run in f64, when
                     the program has f32/bf16/f16 tensors; else NULL */
  bool force64;   /* run every float kernel in f64 (for ref64) */
  int dtype;      /* float mode, --dtype: the dtype of every float tensor;
                     -1: each tensor's own */
  int8_t *policy; /* [tensor]: a training dtype policy's dtype for it, -1
                     its own; NULL without a policy */
  /* float mode, per tensor: the tolerances, and for the depth bound the
   * reduction length along the deepest path from the inputs and the RMS
   * of the reference */
  double *rtol, *atol, *depth, *rms;
  double *refmax; /* each tensor's largest finite |reference| */
  /* The lowered run compares each buffer when its step has written it,
   * and hands back the blocks of a buffer once no later step reads it
   * (unless it mismatched: the diagnosis reads it). Per buffer: */
  diff *diffs; /* its comparison, when compared */
  bool *compared;
  bool *needs_cmp;    /* written by a step (a layout, a delivered output, a
                         collective's result) */
  bool *extra;        /* [buffer]: compared only because a step writes it
                         (neither a layout nor an output): reported last */
  int *writer;        /* [buffer]: the last step that writes it, -1: none */
  int *last_use;      /* the last step that reads it, -1 when none */
  int *readers_left;  /* pipelines: the steps that read it and have not run
                         for every microbatch (NULL otherwise) */
  uint8_t *written;   /* pipelines: [buffer * microbatches + k], whether
                         microbatch k's blocks have been written */
  bool *shared;       /* pipelines: [buffer] a leaf R along the microbatch
                         axis, whose blocks every microbatch's ranks share
                         (plan_vx_mb_first's); NULL otherwise */
  int *pending;       /* per tensor: its buffers still to compare; at 0,
                         when all matched, its reference goes to the pool */
  bool *mismatched;   /* per tensor */
  double cmp_seconds; /* time spent comparing during the lowered run */
  /* freed blocks, kept for reuse: fresh pages would be faulted in and
   * zeroed again for every buffer. Bucket k holds blocks of 2^k to
   * 2^(k+1) - 1 doubles, a stack each (verify_block.c): a take looks at a
   * few, not at the whole pool (its linear scan was 41% of a pipelined
   * 32-layer model's verify) */
  plan_vx_bucket pool[PLAN_VX_POOL_BUCKETS];
  /* plan_vx_run_op's operand copies in the kernels' dtypes: inputs, then
   * outputs */
  void *scratch[PLAN_MAX_OPERANDS * 2];
  size_t scratch_cap[PLAN_MAX_OPERANDS * 2];
  plan_buf text;
  plan_vrecord *recs; /* every compared tensor, in topological order */
  int nrecs, cap_recs;
  plan_arena rec_arena;
  int equal;
  const char *first_op, *first_tensor;
  char diagnosis[1024];
  /* A training step (low->train), run `steps` times: the optimizer's
   * state between runs, per param (see "training steps" below): */
  int step, nsteps;
  bool *keep_ref;     /* [tensor]: reference values the update reads */
  bool *keep_buf;     /* [buffer]: blocks the update reads */
  double **leaf_ref;  /* [tensor]: a param's reference value this step */
  double ***leaf_blk; /* [tensor][rank]: its storage blocks this step */
  double ***master;   /* [param][rank]: master blocks (master placement) */
  double ***mom;      /* [param][rank]: momentum (Adam: first moment) */
  double ***vel;      /* [param][rank]: Adam's second moment */
  double **ref_mom;   /* [param]: the reference's momentum */
  double **ref_vel;
  int *master_buf;               /* [param]: a buffer of the master placement */
  const char *label_m, *label_v; /* this step's Adam state records */
  /* exact mode: [op] the ops whose results both runs round to the dyadic
   * grid (see setup_grid) */
  bool *grid_op;
  /* A pipelined program (low->pipe): the microbatch axis, and the
   * microbatch the step being run is for (-1: every rank). */
  int mb_axis;
  int64_t mb_now;
  bool deadlock; /* the schedule could not finish: nothing compared */
  /* verify_local.c: float mode, each step checked on its own inputs
   * (not distributed; pipelines microbatch by microbatch); the first step whose
   * check or whose replicas failed (INT_MAX: none), its op, tensor and
   * diagnosis */
  bool local_on, local_is_op;
  int local_fail;
  const char *local_op, *local_tensor;
  int first_step; /* the step that wrote the first divergent buffer */
  char local_diag[1024];
  /* exact mode: the first divergence is a double's rounding, past the
   * range exact mode keeps exact (plan_vx_exact_lost); empty: not */
  char exact_lost[512];
  /* Distributed verification (verify_dist.c): this process's
   * communicator and the one mesh rank it runs; NULL: every rank here. */
  plan_comm *comm;
  int64_t me;
  int dist_rc;    /* a communicator's failure where no status could return */
  bool dist_done; /* the run ended well: closed, not aborted */
} vctx;

/* The rank with r's coordinates and microbatch 0 (r itself without a
 * pipeline): the owner of what a pipelined run keeps once for every
 * microbatch (master params, optimizer state). */
static inline int64_t plan_vx_mb_first(const vctx *c, int64_t r) {
  if (c->mb_axis < 0 || c->coords[r][c->mb_axis] == 0)
    return r;
  int64_t k = c->coords[r][c->mb_axis], stride = 1;
  for (int a = c->m->naxes - 1; a > c->mb_axis; a--)
    stride *= c->m->axis_sizes[a];
  return r - k * stride;
}

/* Whether rank r's block of buffer b is a shared copy of its microbatch
 * owner's (not its own memory). */
static inline bool plan_vx_shared_copy(const vctx *c, int b, int64_t r) {
  return c->shared && c->shared[b] && plan_vx_mb_first(c, r) != r;
}

/* Whether rank r takes part in the step being run. */
static inline bool plan_vx_in_mb(const vctx *c, int64_t r) {
  return c->mb_now < 0 || c->coords[r][c->mb_axis] == c->mb_now;
}

/* Whether rank r runs in this process (every rank, unless distributed). */
static inline bool plan_vx_owned(const vctx *c, int64_t r) {
  return !c->comm || r == c->me;
}

/* Whether rank r takes part in the step being run here. */
static inline bool plan_vx_runs(const vctx *c, int64_t r) {
  return plan_vx_in_mb(c, r) && plan_vx_owned(c, r);
}

/* The slack of float mode's low-precision bound (verify_tol.c's
 * plan_vx_low_precision_bound; the partial-sums diagnosis allows the
 * same). */
#define PLAN_VERIFY_LOWP_FACTOR 4.0

/* Wall seconds, for the report's phases. */
static inline double plan_vx_seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- blocks (verify_block.c) --------------------------------------------- */

int64_t plan_vx_count_of(const int64_t *dims, int rank);
/* The rank at mesh coordinates (row-major). */
int64_t plan_vx_rank_at(const vx_mesh *m, const int64_t *coord);
/* The size of a group along mesh axes pa[0..np), and the rank of its
 * member k (row-major over those axes) in the group through coord: the
 * one walk of a partial group's members. */
int64_t plan_vx_group_size(const vx_mesh *m, const int *pa, int np);
int64_t plan_vx_group_member(const vx_mesh *m, const int *pa, int np,
                             const int64_t *coord, int64_t k);
/* The blocks of buffer b's partial group led by rank r when every partial
 * axis pa[0..np) sums (P(sum)), at most max, into mem; their count, or 0
 * when the group needs the general path (another reduction, too many, a
 * block missing or of another size). */
int plan_vx_sum_members(const vctx *c, int b, const int *pa, int np, int64_t r,
                        const double **mem, int max);
/* Rank r's block of `tensor` under placement pl: its shape and offset. */
void plan_vx_layout(const vctx *c, const plan_placement *pl, int tensor,
                    int64_t r, block *b);
/* Global row-major index of local element k of a block. */
int64_t plan_vx_global_index(const vx_tensor *t, const block *b, int64_t k);
/* Local index of global element g in block b, or -1 when b lacks it. */
int64_t plan_vx_local_index(const vx_tensor *t, const block *b, int64_t g);
/* The mesh axes along which buffer lb is partial, into pa (may be NULL);
 * their count. */
int plan_vx_partial_axes(const vx_buf *lb, int naxes, int *pa);
/* A fresh block of b->n zeros (at least one element). */
int plan_vx_alloc_block(block *b);
/* A block's memory from the pool when one fits (not zeroed), else fresh. */
int plan_vx_take_block(vctx *c, block *b);
/* A block's memory to the pool (freed when the pool cannot grow). */
void plan_vx_give_block(vctx *c, block *b);
/* Rank r's block of buffer b to the pool (a shared copy only let go). */
void plan_vx_give_rank(vctx *c, int b, int64_t r);
/* An array of n doubles (zeros when `zero`), from the pool of blocks the
 * run handed back when one fits: fresh pages cost more than the run's
 * arithmetic. free() it, or hand it to the pool. NULL when out of memory
 * (the error set). */
double *plan_vx_take_array(vctx *c, int64_t n, bool zero);
/* Every block of buffer b allocated (zeros when fresh and `zero`). */
int plan_vx_ensure_buffer(vctx *c, int b, bool zero);

/* ---- inputs and one op (verify_op.c) ------------------------------------- */

/* The dtype tensor t runs in (--dtype, or its own). */
plan_dtype plan_vx_run_dtype(const vctx *c, const vx_tensor *t);
/* v as a value of t's run dtype holds it (f32, bf16, f16 rounded; f64 and
 * integers as they are). */
double plan_vx_round_run_dtype(const vctx *c, const vx_tensor *t, double v);
/* Fills rank's block of leaf `tensor` with the verifier's inputs. */
void plan_vx_fill_leaf(const vctx *c, int tensor, block *b);
/* One op on blocks through the runner: ins[j] / outs[k] are the blocks of
 * the operands. */
int plan_vx_run_op(vctx *c, const vx_op *op, block *const *ins,
                   block *const *outs);

/* ---- the vocab-parallel loss (verify_vocab.c) -----------------------------
 */

/* The mesh axes along which step s's logits are split on the class dim
 * (a cross_entropy or cross_entropy_grad step) into pa; their count, 0
 * for any other step. */
int plan_vx_class_axes(const vctx *c, const vx_step *s, int *pa);
/* Such a step on the ranks that run it: the max and sum all-reduces of
 * the distributed softmax along axes pa[0..np). */
int plan_vx_run_class_split(vctx *c, const vx_step *s, const int *pa, int np);

/* ---- collectives (verify_redist.c) --------------------------------------- */

/* The redistribution step s on the ranks that run it. */
int plan_vx_run_redist(vctx *c, const vx_step *s);
/* The rank whose block of step s's input gives rank d's element g of the
 * output in a redistribution that copies (not a reduction), and the local
 * index there (*li): the first member of d's group, in coordinate order,
 * whose block holds g (an all_gather with an order reads its block from
 * the member that order names). -1 when no member holds g; -2 when the
 * order's block is too short (uneven pieces). */
int64_t plan_vx_redist_source(const vctx *c, const vx_step *s, int64_t d,
                              int64_t g, int64_t *li);

/* The member order of rank r's group in step s: the coordinates on the
 * step's axis of the members at each position (a lowered file's `order`,
 * or its `groups`, each group its own); NULL: coordinate order. */
const int64_t *plan_vx_group_order(const vctx *c, const vx_step *s, int64_t r);

/* ---- the two runs (verify_run.c) ----------------------------------------- */

/* Runs step i (on the ranks of c->mb_now), then the hook. */
int plan_vx_exec_step(vctx *c, int i);
/* After step i: compares what it wrote, hands back what no later step
 * reads. */
int plan_vx_after_step(vctx *c, int i);
/* The lowered run, comparing as it goes. */
int plan_vx_run_lowered(vctx *c);
/* The program on one device, every tensor whole, into *dst[tensor]. */
int plan_vx_run_reference(vctx *c, double ***dst);
/* Float mode: the f64 reference (c->ref64) of the low-precision bound,
 * when the program has f32, bf16 or f16 tensors. */
int plan_vx_run_reference64(vctx *c);

/* ---- tolerances and bounds (verify_tol.c) -------------------------------- */

/* Per-tensor tolerances, reduction depths and reference RMS (after the
 * reference run). */
int plan_vx_init_tolerances(vctx *c);
/* Tensor t's comparison tolerances; the diagnoses' (at least the
 * dtype's). */
void plan_vx_default_tol(const vctx *c, const vx_tensor *t, double *rtol,
                         double *atol);
void plan_vx_diag_tol(const vctx *c, const vx_tensor *t, double *rtol,
                      double *atol);
/* Whether a float-mode mismatch of tensor t is within the low-precision
 * bound, and within the depth bound (whose epsilon depth_eps is). */
bool plan_vx_low_precision_bound(const vctx *c, const vx_tensor *t,
                                 const diff *df);
double plan_vx_depth_eps(const vctx *c, const vx_tensor *t);
bool plan_vx_depth_bound(const vctx *c, const vx_tensor *t, const diff *df);

/* ---- comparing (verify_compare.c) ---------------------------------------- */

/* Whether rank r has coordinate 0 on every partial axis pa[0..np). */
bool plan_vx_partial_leader(const vctx *c, int64_t r, const int *pa, int np);
/* The reduced value of local element li over the group of ranks that
 * differ from coord only on the partial axes pa[from..np). */
void plan_vx_group_value(const vctx *c, int buf, const int *pa, int np,
                         int from, int64_t *coord, int64_t li, double *out);
/* Exact mode, at the first mismatch (of buffer buf): whether it is a
 * double's rounding of values past the range exact mode keeps exact;
 * when so, says it into c->exact_lost. */
void plan_vx_exact_lost(vctx *c, int buf, const diff *df);
/* Compares every replica of buffer buf with the reference, into *df
 * (distributed: every process's replicas, merged). */
int plan_vx_compare_buffer(vctx *c, int buf, diff *df);
/* Compares buffer buf into *df during the lowered run (distributed: this
 * process's replicas; the f64 reference made when a bound needs it). */
int plan_vx_compare_one(vctx *c, int buf, diff *df);
/* Once buffer b is compared: its tensor's reference to the pool when every
 * buffer of the tensor matched. */
void plan_vx_compared_buffer(vctx *c, int b);
/* *into += one (the comparison of more blocks of the same buffer). */
void plan_vx_merge_diff(diff *into, const diff *one);
/* Records and prints the comparison of buffer buf ("tensor" or "output",
 * for op opname); the first mismatch sets the first divergent op. */
void plan_vx_report_tensor(vctx *c, const char *what, const char *opname,
                           int buf, const diff *df);
/* Pipelines: compares microbatch k's blocks of buffer b, adding to its
 * comparison (last: every microbatch's are compared now); hands back
 * microbatch k's blocks of b. */
int plan_vx_compare_microbatch(vctx *c, int b, int64_t k, bool last);
void plan_vx_release_microbatch(vctx *c, int b, int64_t k);
/* Every comparison in topological order, then the outputs as delivered,
 * reported when `report`: the first mismatch is the first divergent op. */
int plan_vx_compare_all(vctx *c, bool report);

/* ---- the delivered placements (verify_contract.c) ------------------------ */

/* Whether output slot k is delivered in the placement the plan requires
 * (without a stated one: not partial); if not, a NOT EQUAL line, and the
 * first divergence with its diagnosis. */
bool plan_vx_check_delivered(vctx *c, int k);
/* After a misplaced output's record (the records held nrecs_before): it
 * counts as mismatching, whatever its values. */
void plan_vx_misplaced_record(vctx *c, int nrecs_before);

/* ---- distributed verification (verify_dist.c) ---------------------------- */

/* Opens the communicator of options' rank and world and checks that every
 * process verifies the same plan p (the caller's: a training step runs
 * one derived from it) the same way. */
int plan_vx_dist_open(vctx *c, const plan_plan *p);
/* Closes the communicator, or aborts it when the run failed here (its
 * peers may still be in a collective: they see this process gone). */
void plan_vx_dist_close(vctx *c);
/* The collectives of step s for this process's rank, through the
 * communicator: an all-reduce along the step's axis (k members), a
 * reduce-scatter, a redistribution that copies. */
int plan_vx_dist_all_reduce(vctx *c, const vx_step *s, int64_t k);
/* n values of buf all-reduced over the k global ranks members[] (this one
 * among them); `what` names the step in a failure. */
int plan_vx_dist_reduce(vctx *c, const int *members, int k, double *buf,
                        int64_t n, int reduce, const char *what);
int plan_vx_dist_reduce_scatter(vctx *c, const vx_step *s, int64_t k);
int plan_vx_dist_redist(vctx *c, const vx_step *s);
/* Before comparing partial buffer buf: its group's blocks brought to the
 * group's leader (where compare_blocks reduces them); after: let go. */
int plan_vx_dist_gather_partial(vctx *c, int buf);
void plan_vx_dist_drop_partial(vctx *c, int buf);
/* Every process's comparisons of the buffers merged (in rank order), so
 * that each makes the same report; one comparison, likewise. */
int plan_vx_dist_merge_diffs(vctx *c);
int plan_vx_dist_merge_one(vctx *c, diff *df);
/* Each process's `bytes` at mine, every one's into all (rank q's at
 * q * bytes). */
int plan_vx_dist_all_gather(vctx *c, const void *mine, size_t bytes, void *all,
                            const char *what);
/* Whether `ok` holds in every process (ok itself when not distributed;
 * false, with c->dist_rc set, when the communicator fails). */
bool plan_vx_dist_all(vctx *c, bool ok);
/* Every rank's block of buffer b, this process's from blocks[me], into
 * global by global index (ranks last to first, as in one process). */
int plan_vx_dist_gather_global(vctx *c, const vx_tensor *t, int b,
                               double *const *blocks, double *global);

/* ---- each step on its own (verify_local.c) ------------------------------- */

/* After step i ran (on the ranks of c->mb_now): the replicas it wrote agree
 * bit for bit, else "drifted", naming both ranks. Every mode. */
int plan_vx_check_replicas(vctx *c, int i);
/* Float mode (c->local_on): step i against what follows from the
 * distributed run's own inputs (an op: the reference kernel on the
 * reassembled inputs; a collective: its input's value). mb >= 0: a
 * pipelined step just run for microbatch mb, on that microbatch's blocks;
 * mb < 0: every rank's (a pipelined step of the schedule is skipped). */
int plan_vx_check_local(vctx *c, int i, int64_t mb);
/* Whether a low-precision tensor's end-to-end mismatch in buffer buf is
 * drift: every step up to its writer passed its own check. */
bool plan_vx_local_accepts(const vctx *c, int buf, const diff *df);
/* After the comparison: a failed step check decides a verdict the
 * end-to-end comparison left equal. */
void plan_vx_local_verdict(vctx *c);
/* verify_tol.c: the reduction length op adds (0 when none). */
double plan_vx_op_reduction_length(const vx_program *prog, const vx_op *op);

/* ---- pipelines, diagnoses, training -------------------------------------- */

/* verify_pipe.c: a pipelined program run action by action as its schedule
 * says, then compared step by step; a TRANSFER step for microbatch
 * c->mb_now. A deadlock at run time is a verdict: c->equal = 0, the
 * diagnosis names the ranks and the actions they wait at. */
int plan_vx_run_pipeline(vctx *c);
int plan_vx_run_transfer(vctx *c, const vx_step *s);

/* diagnose.c: the usual causes of buffer buf's divergence (docs/verify.md),
 * into c->diagnosis. */
void plan_vx_diagnose(vctx *c, int buf, const diff *df);
/* diagnose_pipe.c: the microbatch diagnoses of a pipelined program; false
 * when none applies (or the program has no pipeline). */
bool plan_vx_diagnose_microbatches(vctx *c, int buf);

/* verify_train.c: a training step's setup and its optimizer update. */
int plan_vx_setup_grid(vctx *c);
int plan_vx_setup_train(vctx *c);
int plan_vx_optimizer_step(vctx *c);

/* ---- memory (verify_mem.c) ----------------------------------------------- */

/* The peak bytes verifying l would allocate. */
int plan_vx_estimate(const vx_lowered *l, bool float_mode, uint64_t *bytes);
/* Before running: PLAN_EUNSUPPORTED with the figures when the estimate,
 * into *need (0 when not made), is over the limit or what is available. */
int plan_vx_preflight(const plan_plan *p, const vx_lowered *v,
                      const plan_verify_options *o, uint64_t *need);
/* "61 GB", "40 MB": decimal units, as the messages give sizes. */
void plan_vx_format_bytes(char *out, size_t cap, uint64_t b);

#endif
