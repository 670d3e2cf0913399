/* The verifier's memory estimate (plan_verify_estimate) against the peak
 * a run allocates, measured as the growth of the maximum resident set of
 * a child process that runs it; the preflight's refusal of a run over
 * memory_limit; old option versions without the field. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "libplan/verify.h"

static plan_plan *load_reduced(const char *path) {
  plan_plan *p = NULL, *r = NULL;
  assert_int_equal(plan_load(&p, path), PLAN_OK);
  assert_int_equal(plan_reduce_shapes(&r, NULL, p), PLAN_OK);
  plan_free(p);
  return r;
}

static int64_t maxrss_bytes(void) {
  struct rusage u;
  assert_int_equal(getrusage(RUSAGE_SELF, &u), 0);
  return (int64_t)u.ru_maxrss * 1024; /* Linux: kilobytes */
}

/* The growth of the maximum resident set while a child verifies p. */
static int64_t measured_peak(const plan_plan *p, const plan_verify_options *o) {
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    int64_t before = maxrss_bytes(), grew = -1;
    plan_verify_report *r;
    if (!plan_verify(&r, p, o)) {
      grew = plan_verify_report_equal(r) ? maxrss_bytes() - before : -2;
      plan_verify_report_free(r);
    }
    _exit(write(fd[1], &grew, sizeof grew) == (ssize_t)sizeof grew ? 0 : 1);
  }
  close(fd[1]);
  int64_t grew = -3;
  assert_int_equal(read(fd[0], &grew, sizeof grew), (ssize_t)sizeof grew);
  close(fd[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return grew;
}

/* Examples whose run allocates tens to hundreds of MB once reduced (the
 * pipelined model, both modes, holds 8 microbatches on 32 ranks): the
 * estimate is an upper bound, within 3x of the measured growth. */
static void test_estimate_vs_peak(void **state) {
  (void)state;
#ifdef __SANITIZE_ADDRESS__
  /* AddressSanitizer's shadow memory, redzones and its quarantine of freed
   * blocks are resident too: the growth measures the sanitizer, not the
   * run. The plain build (make check-unit) runs this test. */
  fprintf(stderr, "test_estimate_vs_peak: skipped under AddressSanitizer "
                  "(its resident memory is not the run's)\n");
  skip();
#endif
  static const struct {
    const char *file;
    plan_verify_mode mode;
  } cases[] = {
      {"examples/models/llama-32l.pp.plan.yaml", PLAN_VERIFY_EXACT},
      {"examples/models/llama-32l.pp.plan.yaml", PLAN_VERIFY_FLOAT},
      {"examples/models/dit-block.searched.plan.yaml", PLAN_VERIFY_FLOAT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    plan_plan *p = load_reduced(cases[i].file);
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = cases[i].mode;
    o.memory_limit = UINT64_MAX; /* measured, not refused */
    uint64_t est = 0;
    assert_int_equal(plan_verify_estimate(&est, p, NULL, &o), PLAN_OK);
    int64_t got = measured_peak(p, &o);
    fprintf(stderr, "%s: estimate %.1f MB, measured %.1f MB\n", cases[i].file,
            (double)est / 1e6, (double)got / 1e6);
    assert_true(got > (int64_t)20e6); /* big enough to measure */
    assert_true(est >= (uint64_t)got);
    assert_true(est <= 3 * (uint64_t)got);
    plan_free(p);
  }
}

/* A limit under the estimate: refused before running, with the figures;
 * the estimate is the same for the plan and for its lowered program. */
static void test_preflight(void **state) {
  (void)state;
  plan_plan *p =
      load_reduced("examples/models/llama3-8b-layer.recipe.plan.yaml");
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  uint64_t est = 0, est_l = 0;
  assert_int_equal(plan_verify_estimate(&est, p, NULL, &o), PLAN_OK);
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  assert_int_equal(plan_verify_estimate(&est_l, NULL, l, &o), PLAN_OK);
  assert_true(est_l == est);
  o.memory_limit = est - 1;
  plan_verify_report *r = (plan_verify_report *)1;
  assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_EUNSUPPORTED);
  assert_null(r);
  const char *msg = plan_error_last()->message;
  assert_non_null(strstr(msg, "needs about"));
  assert_non_null(strstr(msg, "available (the limit given)"));
  o.memory_limit = est;
  assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
  assert_true(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  /* version 5 has no memory_limit: what is free here, which holds it */
  plan_verify_options o5;
  memset(&o5, 0xff, sizeof o5); /* memory_limit stays unread */
  assert_int_equal(plan_verify_options_init(&o5, 5), PLAN_OK);
  assert_int_equal(plan_verify(&r, p, &o5), PLAN_OK);
  plan_verify_report_free(r);
  uint64_t have = 0;
  assert_int_equal(plan_verify_memory_available(&have), PLAN_OK);
  assert_true(have > 0 && have < UINT64_MAX);
  assert_int_equal(plan_verify_estimate(NULL, p, NULL, &o), PLAN_EUSAGE);
  assert_int_equal(plan_verify_estimate(&est, NULL, NULL, &o), PLAN_EUSAGE);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_estimate_vs_peak),
      cmocka_unit_test(test_preflight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
