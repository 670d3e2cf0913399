/* Internals of the verifier: the report's fields, and verifying an already
 * lowered program with a hook after each step (the bug corpus mutates
 * lowered programs and runs to inject bugs). plan_verify_lowered itself is
 * public (libplan/verify.h). */
#ifndef LIBPLAN_VERIFY_INT_H
#define LIBPLAN_VERIFY_INT_H

#include "libplan/verify.h"
#include "vx_program.h"

/* One compared tensor. */
typedef struct plan_vrecord {
  const char *what; /* "tensor" or "output" (as delivered) */
  const char *op, *tensor, *placement, *dtype;
  int64_t mismatches, compared;
  double max_abs, max_rel;
  int64_t at; /* global index of the largest abs error */
  double got, want;
  int step; /* a training step's number (1, 2...), 0 for a forward plan */
} plan_vrecord;

struct plan_verify_report {
  int equal;
  char *text;
  char *first_op, *first_tensor, *diagnosis;
  int collectives[VX_REDIST_COUNT];
  /* for the machine-readable reports (report.c) */
  char *file;
  int mode;
  uint64_t seed;
  char *runner; /* its name */
  int64_t ranks;
  plan_vrecord *recs;
  int nrecs;
  plan_arena arena; /* the records' strings */
  /* wall seconds of each phase (bench/bench_verify.c reads them): the
   * reference run, the lowered run, the comparison (with the f64
   * reference when one was needed) */
  double seconds_reference, seconds_lowered, seconds_compare;
};

/* One rank's block of a buffer in the lowered run: its local shape, its
 * offset in the global tensor, and its values (row-major, as doubles). */
typedef struct plan_vblock {
  int64_t local[PLAN_MAX_RANK], offset[PLAN_MAX_RANK];
  int64_t n;
  double *data;
} plan_vblock;

/* Called after each step of the lowered run with every buffer's blocks,
 * bufs[buffer][rank] (rank = row-major mesh coordinates); in a pipelined
 * program, once per microbatch the step runs for (microbatch -1: a step
 * run for all at once, before or after the schedule). The bug corpus
 * uses it to stand in for a faulty runner (a collective that unpads uneven
 * shards wrongly): it may rewrite the blocks the step wrote. A non-zero
 * return stops the run with that status. */
typedef int (*plan_verify_step_hook)(void *user, const plan_lowered *low,
                                     int step, int64_t microbatch,
                                     plan_vblock *const *bufs);

int plan_verify_lowered_hooked(plan_verify_report **out, const plan_plan *p,
                               plan_lowered *low,
                               const plan_verify_options *opts,
                               plan_verify_step_hook hook, void *user);

#endif
