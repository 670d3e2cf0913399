/* Internal entry of the verifier: verify an already lowered program (the
 * bug corpus mutates lowered programs to inject bugs). */
#ifndef LIBPLAN_VERIFY_INT_H
#define LIBPLAN_VERIFY_INT_H

#include "libplan/verify.h"
#include "lower.h"

/* One compared tensor. */
typedef struct plan_vrecord {
  const char *what; /* "tensor" or "output" (as delivered) */
  const char *op, *tensor, *placement, *dtype;
  int64_t mismatches, compared;
  double max_abs, max_rel;
  int64_t at; /* global index of the largest abs error */
  double got, want;
} plan_vrecord;

struct plan_verify_report {
  int equal;
  char *text;
  char *first_op, *first_tensor, *diagnosis;
  int collectives[PLAN_REDIST_COUNT];
  /* for the machine-readable reports (report.c) */
  char *file;
  int mode;
  uint64_t seed;
  int64_t ranks;
  plan_vrecord *recs;
  int nrecs;
  plan_arena arena; /* the records' strings */
  /* wall seconds of each phase (bench/bench_verify.c reads them): the
   * reference run, the lowered run, the comparison (with the f64
   * reference when one was needed) */
  double seconds_reference, seconds_lowered, seconds_compare;
};

/* Takes ownership of `low` (freed before returning, on every path). */
int plan_verify_lowered(plan_verify_report **out, const plan_plan *p,
                        plan_lowered *low, const plan_verify_options *opts);

#endif
