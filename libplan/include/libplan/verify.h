/* libplan: numerical verification of a plan against its single-device
 * program (docs/verify.md). The plan is lowered to SPMD steps and run on
 * the CPU runner with simulated ranks; the reference program runs on the
 * same kernels; every tensor the plan produces is reassembled from the ranks'
 * blocks (every replica, partial sums reduced) and compared with the
 * reference, in topological order, so the first divergent op is named.
 *
 * A plan with a `training` section runs its training step `steps` times:
 * the loss, every gradient and the SGD-updated params on every replica are
 * compared as well (docs/training-and-pipelines.md, Training). A pipelined
 * plan runs each pipeline rank's schedule, microbatch by microbatch.
 *
 * This header is the verifier's library, libplan-verify; every other
 * header is the core's, libplan. Shape reduction (reduce.h, included
 * here) is the core's: it transforms plans, it runs nothing. */
#ifndef LIBPLAN_VERIFY_H
#define LIBPLAN_VERIFY_H

#include "common.h"
#include "lowered.h"
#include "plan.h"
#include "reduce.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum plan_verify_mode {
  /* small-integer inputs in f64; inexact op results rounded to a dyadic
   * grid in both runs, so any reduction order is exact: compare with == */
  PLAN_VERIFY_EXACT = 0,
  /* random floats in each tensor's dtype; compare with tolerances */
  PLAN_VERIFY_FLOAT = 1
} plan_verify_mode;

typedef struct plan_verify_options {
  unsigned int version; /* PLAN_VERIFY_OPTIONS_VERSION */
  plan_verify_mode mode;
  uint64_t seed;
  double rtol, atol; /* float mode; 0: the dtype's defaults (docs/verify.md) */
  /* float mode: run every float tensor in this dtype ("f64", "f32",
   * "bf16", "f16"), to check a plan at another precision; NULL: each
   * tensor's own */
  const char *dtype;
  /* version 3: float mode, tolerances for some tensors: the first entry
   * whose `tensor` (a name, or a glob such as "attn.*") matches a tensor
   * replaces its rtol and atol (both, as given). */
  const struct plan_verify_tolerance *tolerances;
  int ntolerances;
  /* version 4: the runner that runs both programs: "cpu" (NULL: the
   * default) or "cuda" (the plugin libplan-cuda.so, docs/gpu.md); a runner
   * that is not built or has no device here gives PLAN_EUNSUPPORTED */
  const char *runner;
  /* version 5: distributed verification (docs/gpu.md): this process is
   * mesh rank `rank` of `world` processes, one per rank of the mesh (world
   * must be its device count); each runs its own rank's share of the
   * lowered program and the single-device program, the collectives go
   * through the runner's communicator (NCCL for cuda, MPI otherwise), and
   * every process returns the same report. The processes are one MPI job
   * (mpirun, srun: rank and world must be MPI's), or, with nccl only, a
   * torchrun launch where rank 0 leaves NCCL's id in `rendezvous`, a
   * fresh folder every one of them sees (NULL under MPI). Each waits up
   * to timeout_s seconds (0: 300) for the others; a peer that stops
   * answering fails the run with PLAN_EUNSUPPORTED. world 0: every rank
   * in this process (the default). */
  int world, rank;
  const char *rendezvous;
  double timeout_s;
  /* the communicator: "nccl" (the cuda runner's), "mpi" (the library's,
   * with any runner: several processes on one GPU), or NULL: the
   * runner's own where it has one (nccl for cuda), else mpi */
  const char *comm;
  /* version 6: the bytes the run may use (docs/verify.md, Memory). Before
   * running, the verifier estimates its peak (plan_verify_estimate) and
   * refuses a run over this limit with PLAN_EUNSUPPORTED, the figures and
   * the size of the --reduce'd run in the message. 0: the memory available
   * here (plan_verify_memory_available); UINT64_MAX: no check. A
   * distributed run is not checked. */
  uint64_t memory_limit;
} plan_verify_options;

typedef struct plan_verify_tolerance {
  const char *tensor;
  double rtol, atol;
} plan_verify_tolerance;

/* Versions 2 (without tolerances), 3 (without runner), 4 (without the
 * distributed fields), 5 (without memory_limit) and 6 are accepted. */
#define PLAN_VERIFY_OPTIONS_VERSION 6
#define PLAN_VERIFY_OPTIONS_INIT                                               \
  {                                                                            \
    PLAN_VERIFY_OPTIONS_VERSION, PLAN_VERIFY_EXACT, 0, 0, 0, NULL, NULL, 0,    \
        NULL, 0, 0, NULL, 0, NULL, 0                                           \
  }

/* Fills *opts with the defaults of options version `version`, 2 to
 * PLAN_VERIFY_OPTIONS_VERSION, and sets opts->version to it. Only the
 * fields of that version are written: a caller built against an older
 * header has a shorter struct. For the current version the result is
 * PLAN_VERIFY_OPTIONS_INIT. PLAN_EUSAGE, opts unchanged, for a NULL opts
 * or another version. */
PLAN_API int plan_verify_options_init(plan_verify_options *opts,
                                      unsigned int version);

/* Whether runner `name` ("cpu", "cuda"; NULL: the default, cpu) can run
 * here, as plan_verify with opts->runner = name would find it: PLAN_OK;
 * PLAN_EUNSUPPORTED when it is not built or has no device here, with the
 * reason in the last error (where the plugin was looked for, why it did
 * not load); PLAN_EUSAGE for an unknown name. A tool asks before it loads
 * anything, to report an unusable runner first. */
PLAN_API int plan_runner_check(const char *name);

typedef struct plan_verify_report plan_verify_report;

/* The peak bytes verifying `p` (l NULL: lowered here, without manual
 * regions' tracer) or the lowered program `l` (borrowed; p may then be
 * NULL) would allocate with these options, into *bytes: the reference
 * run's tensors, every rank's blocks of the buffers live at once, the
 * kernels' scratch, the training state (docs/verify.md, Memory). An upper
 * bound, at most a few times the measured peak. PLAN_EUSAGE for a NULL
 * bytes or no program; the statuses of plan_lower. */
PLAN_API int plan_verify_estimate(uint64_t *bytes, const plan_plan *p,
                                  const plan_lowered *l,
                                  const plan_verify_options *opts);

/* The memory this process can use now, into *bytes: the smallest of the
 * cgroup's limit less its usage (v2 or v1) and the kernel's MemAvailable.
 * PLAN_EUNSUPPORTED when neither can be read (*bytes = UINT64_MAX). */
PLAN_API int plan_verify_memory_available(uint64_t *bytes);

/* Lowers and runs `p` and its reference program. *out always holds a report
 * when PLAN_OK is returned (equal or not); a negative status means the check
 * could not run: PLAN_EUNSUPPORTED (not verifiable here yet, or the runner
 * is not available here, or the run needs more memory than
 * opts->memory_limit: the message says why), PLAN_EINVALID (the plan
 * does not lower), PLAN_ENOMEM (an allocation failed mid-run: the message
 * names the plan's file and the estimate), PLAN_EUSAGE (an unknown runner
 * name). */
PLAN_API int plan_verify(plan_verify_report **out, const plan_plan *p,
                         const plan_verify_options *opts);
PLAN_API void plan_verify_report_free(plan_verify_report *r);

/* 1 when every compared tensor equals the reference, else 0. */
PLAN_API int plan_verify_report_equal(const plan_verify_report *r);
/* Human-readable report (borrowed; never NULL). */
PLAN_API const char *plan_verify_report_text(const plan_verify_report *r);
/* The first divergent op in topological order and its tensor; NULL when
 * equal. */
PLAN_API const char *plan_verify_report_first_op(const plan_verify_report *r);
PLAN_API const char *
plan_verify_report_first_tensor(const plan_verify_report *r);
/* A short diagnosis of the first divergence ("" when none applies). */
PLAN_API const char *plan_verify_report_diagnosis(const plan_verify_report *r);
/* Collectives the lowered program runs, by kind name ("all_gather",
 * "all_reduce", "reduce_scatter", "all_to_all"): the count of that kind. */
PLAN_API int plan_verify_report_collectives(const plan_verify_report *r,
                                            const char *kind);

/* The same for a lowered program as it is (docs/verify.md, "Lowered
 * programs as files"): plan_lower's, or one read with plan_lowered_load
 * (written by `plan lower`, by hand or by another tool, or changed on
 * purpose: the check's contract is that it computes the reference program
 * under its declared layouts). `p` is the plan `l` was lowered from, or
 * plan_lowered_plan(l) for a lowered program read from a file; it must
 * not be NULL, nor must out and l. Takes ownership of `l`: it is freed
 * before the call returns, on every path (do not free it again). Statuses
 * as plan_verify's; PLAN_EUSAGE for a NULL out, p or l. */
PLAN_API int plan_verify_lowered(plan_verify_report **out, const plan_plan *p,
                                 plan_lowered *l,
                                 const plan_verify_options *opts);

/* The runner that ran the check ("cpu", "cuda"; borrowed, never NULL). */
PLAN_API const char *plan_verify_report_runner(const plan_verify_report *r);

/* The report as "text", "json" or "yaml" (schema "libplan-verify/1": the
 * verdict, mode, seed, runner, ranks, collective counts, the first divergence
 * with its diagnosis, and one entry per compared tensor), or "junit" (one test
 * case per compared tensor). Newly allocated; free with plan_buffer_free. */
PLAN_API int plan_verify_report_write(char **out, size_t *len,
                                      const plan_verify_report *r,
                                      const char *format);

/* Single-device reference runs: a program run whole on one device with the
 * CPU runner's kernels and the verifier's inputs (the counter-based
 * generator keyed by seed, tensor name and global index), as the verifier's
 * own reference run does. A frontend uses it to compare a framework's run
 * of the same program (the PyTorch bridge's tests do). */
typedef struct plan_ref_options {
  plan_verify_mode mode; /* exact: f64 with dyadic rounding; float */
  uint64_t seed;
  /* float mode: -1 runs each tensor in its own dtype; a float plan_dtype
   * runs every float tensor in it (PLAN_F64 for finite differences) */
  int dtype;
} plan_ref_options;

#define PLAN_REF_OPTIONS_INIT                                                  \
  { PLAN_VERIFY_FLOAT, 0, -1 }
/* Fills *opts as PLAN_REF_OPTIONS_INIT does. The struct has no version
 * field, so the function takes none (a new field would come with a
 * versioned struct). PLAN_EUSAGE for a NULL opts. */
PLAN_API int plan_ref_options_init(plan_ref_options *opts);

/* One run of a program: a value for every tensor, as doubles (row-major,
 * the tensor's element count; integers hold their integer values). */
typedef struct plan_ref_run plan_ref_run;

/* Allocates every tensor of p and fills the leaves (inputs, params,
 * consts) as the verifier does. p must outlive the run. Returns PLAN_OK,
 * PLAN_ENOMEM or PLAN_EUSAGE (a NULL argument, an unknown dtype). */
PLAN_API int plan_ref_run_new(plan_ref_run **out, const plan_program *p,
                              const plan_ref_options *opts);
/* Frees the run; accepts NULL. */
PLAN_API void plan_ref_run_free(plan_ref_run *r);

/* The values of a tensor (NULL for a bad index), borrowed from the run; a
 * leaf's may be changed before plan_ref_run_exec (a finite difference
 * perturbs a param). */
PLAN_API double *plan_ref_run_values(plan_ref_run *r, int tensor);
/* The element count of a tensor (-1 for a bad index). */
PLAN_API int64_t plan_ref_run_count(const plan_ref_run *r, int tensor);

/* Runs every op in program order, writing every produced tensor. Returns
 * PLAN_OK, or the kernel's failure (the message names the op). */
PLAN_API int plan_ref_run_exec(plan_ref_run *r);

/* plan_verify for a plan with manual regions: each region's body is run by
 * `tracer` (called once per manual region, at lowering). Without manual
 * regions, plan_verify itself. */
PLAN_API int plan_verify_traced(plan_verify_report **out, const plan_plan *p,
                                const plan_verify_options *opts,
                                plan_region_tracer tracer, void *user);

#ifdef __cplusplus
}
#endif
#endif
