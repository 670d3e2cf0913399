/* libplan: numerical verification of a plan against its single-device
 * program (DESIGN §3). The plan is lowered to SPMD steps and run on the CPU
 * runner with simulated ranks; the reference program runs on the same
 * kernels; every tensor the plan produces is reassembled from the ranks'
 * blocks (every replica, partial sums reduced) and compared with the
 * reference, in topological order, so the first divergent op is named.
 *
 * Forward plans for now: training steps and pipelines come with issue 4,
 * and verifying them returns PLAN_EUNSUPPORTED. */
#ifndef LIBPLAN_VERIFY_H
#define LIBPLAN_VERIFY_H

#include "common.h"
#include "plan.h"

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
  double rtol, atol; /* float mode; 0: the dtype's defaults (DESIGN §3) */
  /* float mode: run every float tensor in this dtype ("f64", "f32",
   * "bf16", "f16"), to check a plan at another precision; NULL: each
   * tensor's own */
  const char *dtype;
} plan_verify_options;
#define PLAN_VERIFY_OPTIONS_VERSION 2
#define PLAN_VERIFY_OPTIONS_INIT                                               \
  {PLAN_VERIFY_OPTIONS_VERSION, PLAN_VERIFY_EXACT, 0, 0, 0, NULL}

typedef struct plan_verify_report plan_verify_report;

/* Lowers and runs `p` and its reference program. *out always holds a report
 * when PLAN_OK is returned (equal or not); a negative status means the check
 * could not run: PLAN_EUNSUPPORTED (not verifiable here yet), PLAN_EINVALID
 * (the plan does not lower), PLAN_ENOMEM. */
int plan_verify(plan_verify_report **out, const plan_plan *p,
                const plan_verify_options *opts);
void plan_verify_report_free(plan_verify_report *r);

/* 1 when every compared tensor equals the reference, else 0. */
int plan_verify_report_equal(const plan_verify_report *r);
/* Human-readable report (borrowed; never NULL). */
const char *plan_verify_report_text(const plan_verify_report *r);
/* The first divergent op in topological order and its tensor; NULL when
 * equal. */
const char *plan_verify_report_first_op(const plan_verify_report *r);
const char *plan_verify_report_first_tensor(const plan_verify_report *r);
/* A short diagnosis of the first divergence ("" when none applies). */
const char *plan_verify_report_diagnosis(const plan_verify_report *r);
/* Collectives the lowered program runs, by kind name ("all_gather",
 * "all_reduce", "reduce_scatter", "all_to_all"): the count of that kind. */
int plan_verify_report_collectives(const plan_verify_report *r,
                                   const char *kind);

/* The report as "text", "json" or "yaml" (schema "libplan-verify/1": the
 * verdict, mode, seed, ranks, collective counts, the first divergence with
 * its diagnosis, and one entry per compared tensor), or "junit" (one test
 * case per compared tensor). Newly allocated; free with free(). */
int plan_verify_report_write(char **out, size_t *len,
                             const plan_verify_report *r, const char *format);

#ifdef __cplusplus
}
#endif
#endif
