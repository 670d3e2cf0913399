/* Training-step verification benchmark: how long `plan verify` takes on a
 * training plan (a pipelined one, for the target) against the reference
 * training step alone, measured in the same run.
 *
 * usage: bench_train PLAN [--mode exact|float] [-n REPS]
 *
 * Each repetition is one fresh child process (this program re-executed)
 * that loads PLAN and runs plan_verify once, timed with CLOCK_MONOTONIC
 * around the call, and prints the phases the report measured: the
 * reference run (the single-device training step: forward, loss, every
 * gradient; the optimizer update is the verifier's), the lowered run (every
 * rank, every microbatch, the schedule's actions; the comparisons made as
 * it goes excluded) and the comparison. Its peak RSS comes from wait4. The
 * figure of merit is whole / reference, best of REPS, with the plan's
 * steps counted: both sides cover the same steps.
 *
 * Target (the issue): for the 4-layer transformer at hidden 512, seq 256,
 * batch 8 on dp x tp x pp = 2 x 2 x 2 with 4 microbatches (bench/run.sh
 * generates it), the whole verification within 3x the reference training
 * step. PASS/FAIL; the exit status is 0 unless something fails to run. */
#define _DEFAULT_SOURCE /* wait4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "libplan/plan.h"
#include "libplan/verify.h"
#include "verify_int.h"

static int child(const char *path, int mode) {
  plan_plan *p = NULL;
  if (plan_load(&p, path)) {
    char buf[512];
    fprintf(stderr, "%s\n", plan_error_format(buf, sizeof buf));
    return 1;
  }
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
  plan_verify_report *r = NULL;
  double t0 = bench_now();
  int rc = plan_verify(&r, p, &o);
  double t1 = bench_now();
  if (rc) {
    char buf[512];
    fprintf(stderr, "%s\n", plan_error_format(buf, sizeof buf));
    plan_free(p);
    return 1;
  }
  printf("%.6f %.6f %.6f %.6f %d\n", t1 - t0, r->seconds_reference,
         r->seconds_lowered, r->seconds_compare, r->equal);
  plan_verify_report_free(r);
  plan_free(p);
  return 0;
}

int main(int argc, char **argv) {
  const char *plan = NULL;
  int mode = 1, reps = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--child") && i + 2 < argc)
      return child(argv[i + 1], atoi(argv[i + 2]));
    if (!strcmp(argv[i], "--mode") && i + 1 < argc)
      mode = !strcmp(argv[++i], "float");
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (argv[i][0] != '-' && !plan)
      plan = argv[i];
    else {
      fprintf(stderr, "usage: bench_train PLAN [--mode exact|float] [-n "
                      "REPS]\n");
      return 2;
    }
  }
  if (!plan || reps < 1) {
    fprintf(stderr, "usage: bench_train PLAN [--mode exact|float] [-n REPS]\n");
    return 2;
  }
  printf("bench_train: %s, %s mode, best of %d\n", plan,
         mode ? "float" : "exact", reps);
  double best = -1, best_ref = 0, best_low = 0, best_cmp = 0;
  long best_rss = 0;
  int equal = 1;
  for (int k = 0; k < reps; k++) {
    char out[256] = "", m[4];
    snprintf(m, sizeof m, "%d", mode);
    char *args[] = {argv[0], "--child", (char *)plan, m, NULL};
    long rss = bench_child("bench_train", argv[0], args, out, sizeof out);
    double whole, ref, low, cmp;
    int eq;
    if (rss < 0 ||
        sscanf(out, "%lf %lf %lf %lf %d", &whole, &ref, &low, &cmp, &eq) != 5)
      return 1;
    printf("  run %d: whole %.3f s (reference %.3f, lowered %.3f, compare "
           "%.3f), peak RSS %.0f MiB, %s\n",
           k + 1, whole, ref, low, cmp, (double)rss / 1024,
           eq ? "EQUAL" : "NOT EQUAL");
    equal &= eq;
    if (best < 0 || whole / ref < best / best_ref) {
      best = whole, best_ref = ref, best_low = low, best_cmp = cmp;
      best_rss = rss;
    }
  }
  double ratio = best / best_ref;
  printf("whole verification / reference training step: %.2fx (%.3f s / "
         "%.3f s; lowered run %.2fx, comparison %.2fx the reference), peak "
         "RSS %.0f MiB: %s (target <= 3x)%s\n",
         ratio, best, best_ref, best_low / best_ref, best_cmp / best_ref,
         (double)best_rss / 1024, ratio <= 3 ? "PASS" : "FAIL",
         equal ? "" : "; the verdict was NOT EQUAL");
  return 0;
}
