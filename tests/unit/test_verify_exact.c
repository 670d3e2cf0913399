/* Exact mode's soundness (docs/verify.md, "Exact mode"): a mean over a
 * sharded batch whose count is not a power of two is bit-exact (each
 * rank's share of cross-entropy's mean sums to the mean), and a program
 * whose values grow past the range a double keeps exact says so (exit 3)
 * in place of a false NOT EQUAL, while a real bug in it is still NOT
 * EQUAL. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "read/plan_read.h"
#include "verify_int.h"
#include "verify_mutations.h"

/* moe-train's loss is cross-entropy's mean over 24 tokens, P(sum) over
 * the two ranks of ep: each rank divides its 12 tokens' sum by 24. These
 * seeds gave a loss 2^-13 off (a rank's quotient rounded to the grid, the
 * whole one exact). */
static void test_mean_of_shards(void **state) {
  (void)state;
  plan_plan *p = load("examples/moe-train.plan.yaml");
  const uint64_t seeds[] = {7, 10, 13, 14};
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.seed = seeds[i];
    plan_verify_report *r;
    assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
    if (!plan_verify_report_equal(r))
      fail_msg("seed %llu: %s", (unsigned long long)seeds[i],
               plan_verify_report_text(r));
    plan_verify_report_free(r);
  }
  plan_free(p);
}

/* The reduced 4-layer transformer at seed 1: its gradients reach 8.9e15,
 * where the runs' sums round differently (by 0.5). */
static plan_plan *reduced_transformer4(void) {
  plan_plan *p = load("examples/transformer4-1f1b.plan.yaml"), *small = NULL;
  char *summary = NULL;
  assert_int_equal(plan_reduce_shapes(&small, &summary, p), PLAN_OK);
  free(summary);
  plan_free(p);
  return small;
}

/* Lowers p and verifies it in exact mode (the lowered program is the
 * verifier's, freed by it), after `bug` when not NULL. */
static int verify_exact(plan_verify_report **r, const plan_plan *p,
                        mutation bug, uint64_t seed) {
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  if (bug)
    bug(l);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.seed = seed;
  return plan_verify_lowered(r, p, l, &o);
}

static void test_past_exact_range(void **state) {
  (void)state;
  plan_plan *p = reduced_transformer4();
  plan_verify_report *r = NULL;
  /* seed 0 stays in range: equal */
  assert_int_equal(verify_exact(&r, p, NULL, 0), PLAN_OK);
  assert_true(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  r = NULL;
  /* seed 1: cannot be exact here, and says why */
  assert_int_equal(verify_exact(&r, p, NULL, 1), PLAN_EUNSUPPORTED);
  assert_null(r);
  char msg[1024];
  plan_error_format(msg, sizeof msg);
  if (!strstr(msg, "exact mode cannot be exact here") ||
      !strstr(msg, "--mode float"))
    fail_msg("%s", msg);
  /* a dropped all-reduce at seed 1 is a difference of the values' own
   * size: NOT EQUAL, not "cannot be exact" */
  assert_int_equal(verify_exact(&r, p, drop_all_reduce, 1), PLAN_OK);
  assert_false(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mean_of_shards),
      cmocka_unit_test(test_past_exact_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
