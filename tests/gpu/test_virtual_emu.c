/* The virtual-rank collectives (runners/cuda/collectives_virtual.cu) built
 * for the host (collectives_emu.h): their layouts (NCCL's), their checks of
 * arguments, and their reductions' order, which must give the bits of the
 * verifier's host loop (verifier/verify.c) for the all-reduce the plugin
 * hands the verifier. nccl_check runs the same kernels on a GPU. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "libplan/common.h"

enum { NR = 5, COUNT = 37 }; /* an odd group, an odd count */

static double f(int r, int64_t j) {
  return 3.0 * (r + 1) + (double)(j % 13);
}

/* n buffers of len doubles: buf[r][j] = f(r, j) */
static double **make(int n, int64_t len, bool fill) {
  double **b = calloc((size_t)n, sizeof *b);
  assert_non_null(b);
  for (int r = 0; r < n; r++) {
    b[r] = calloc((size_t)len, sizeof **b);
    assert_non_null(b[r]);
    for (int64_t j = 0; fill && j < len; j++)
      b[r][j] = f(r, j);
  }
  return b;
}

static void drop(double **b, int n) {
  for (int r = 0; r < n; r++)
    free(b[r]);
  free(b);
}

static void test_all_reduce(void **state) {
  (void)state;
  char err[256];
  for (int red = 0; red < 4; red++) {
    double **b = make(NR, COUNT, true);
    assert_int_equal(plan_cuda_virtual_all_reduce((void *const *)b, NR, COUNT,
                                                  PLAN_F64, red, NULL, err,
                                                  sizeof err),
                     0);
    for (int r = 0; r < NR; r++)
      for (int64_t j = 0; j < COUNT; j++) {
        double sum = 0;
        for (int m = 0; m < NR; m++)
          sum += f(m, j);
        double want = red == 0   ? sum
                      : red == 1 ? sum / NR
                      : red == 2 ? f(NR - 1, j)
                                 : f(0, j);
        assert_true(b[r][j] == want);
      }
    drop(b, NR);
  }
}

static void test_all_gather(void **state) {
  (void)state;
  char err[256];
  double **in = make(NR, COUNT, true), **out = make(NR, COUNT * NR, false);
  assert_int_equal(
      plan_cuda_virtual_all_gather((const void *const *)in, (void *const *)out,
                                   NR, COUNT, PLAN_F64, NULL, err, sizeof err),
      0);
  for (int r = 0; r < NR; r++)
    for (int64_t j = 0; j < COUNT * NR; j++)
      assert_true(out[r][j] == f((int)(j / COUNT), j % COUNT));
  drop(in, NR);
  drop(out, NR);
}

static void test_reduce_scatter(void **state) {
  (void)state;
  char err[256];
  double **in = make(NR, COUNT * NR, true), **out = make(NR, COUNT, false);
  assert_int_equal(plan_cuda_virtual_reduce_scatter(
                       (const void *const *)in, (void *const *)out, NR, COUNT,
                       PLAN_F64, 0, NULL, err, sizeof err),
                   0);
  for (int r = 0; r < NR; r++)
    for (int64_t j = 0; j < COUNT; j++) {
      double sum = 0;
      for (int m = 0; m < NR; m++)
        sum += f(m, r * COUNT + j);
      assert_true(out[r][j] == sum);
    }
  drop(in, NR);
  drop(out, NR);
}

static void test_all_to_all(void **state) {
  (void)state;
  char err[256];
  double **in = make(NR, COUNT * NR, true), **out = make(NR, COUNT * NR, false);
  assert_int_equal(
      plan_cuda_virtual_all_to_all((const void *const *)in, (void *const *)out,
                                   NR, COUNT, PLAN_F64, NULL, err, sizeof err),
      0);
  for (int r = 0; r < NR; r++)
    for (int64_t j = 0; j < COUNT * NR; j++)
      assert_true(out[r][j] == f((int)(j / COUNT), r * COUNT + j % COUNT));
  drop(in, NR);
  drop(out, NR);
}

/* f32 buffers go through the same kernels */
static void test_f32(void **state) {
  (void)state;
  char err[256];
  float *b[3];
  for (int r = 0; r < 3; r++) {
    b[r] = malloc(sizeof(float) * 4);
    assert_non_null(b[r]);
    for (int j = 0; j < 4; j++)
      b[r][j] = (float)f(r, j);
  }
  assert_int_equal(plan_cuda_virtual_all_reduce((void *const *)b, 3, 4,
                                                PLAN_F32, 2, NULL, err,
                                                sizeof err),
                   0);
  for (int r = 0; r < 3; r++) {
    for (int j = 0; j < 4; j++)
      assert_true(b[r][j] == (float)f(2, j));
    free(b[r]);
  }
}

/* The verifier's all-reduce: random doubles, where the order shows in the
 * bits; the result must be the host loop's exactly. */
static void test_host_bits(void **state) {
  (void)state;
  char err[256];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int n = 2; n <= 8; n++)
    for (int red = 0; red < 4; red++) {
      double **b = make(n, COUNT, false);
      for (int m = 0; m < n; m++)
        for (int64_t e = 0; e < COUNT; e++) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          b[m][e] = ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 1e3;
        }
      double want[COUNT];
      for (int64_t e = 0; e < COUNT; e++) {
        double acc = b[0][e];
        for (int m = 1; m < n; m++) {
          double v = b[m][e];
          acc = red == 2   ? (acc > v ? acc : v)
                : red == 3 ? (acc < v ? acc : v)
                           : acc + v;
        }
        want[e] = red == 1 ? acc / (double)n : acc;
      }
      assert_int_equal(
          plan_cuda_host_all_reduce(b, n, COUNT, red, err, sizeof err), 0);
      assert_memory_equal(b[0], want, sizeof want);
      drop(b, n);
    }
}

static void test_bad_arguments(void **state) {
  (void)state;
  char err[256] = "";
  double x = 1, *p = &x;
  assert_int_equal(plan_cuda_virtual_all_reduce((void *const *)&p, 0, 1,
                                                PLAN_F64, 0, NULL, err,
                                                sizeof err),
                   PLAN_EUSAGE);
  assert_non_null(strstr(err, "a virtual group has 1 to 64 members"));
  assert_int_equal(plan_cuda_virtual_all_reduce((void *const *)&p, 1, 1,
                                                PLAN_BF16, 0, NULL, err,
                                                sizeof err),
                   PLAN_EUNSUPPORTED);
  assert_int_equal(plan_cuda_virtual_all_reduce((void *const *)&p, 1, 1,
                                                PLAN_F64, 7, NULL, err,
                                                sizeof err),
                   PLAN_EUSAGE);
  assert_non_null(strstr(err, "unknown reduction"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_all_to_all),
      cmocka_unit_test(test_f32),
      cmocka_unit_test(test_host_bits),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
