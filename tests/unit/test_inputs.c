/* Verifier inputs: the generator is counter-based (any element alone gives
 * the same value as the whole tensor), deterministic across runs, in the
 * documented ranges and spread over them; dyadic rounding is exact. The
 * golden values pin the formula: a CUDA runner must reproduce them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "inputs.h"
#include "base/numeric.h"

static void test_block_equals_whole(void **state) {
  (void)state;
  const int64_t shape[3] = {5, 7, 3};
  double whole[105];
  const int64_t zero[3] = {0, 0, 0};
  plan_input_spec s = {PLAN_INPUT_FLOAT, 0, 0};
  uint64_t key = plan_input_tensor_key("layers.0.w");
  plan_input_fill_block(whole, 42, key, &s, 3, shape, zero, shape);
  /* an uneven block in the middle, as a rank would make its shard */
  const int64_t off[3] = {2, 3, 1}, loc[3] = {2, 3, 2};
  double block[12];
  plan_input_fill_block(block, 42, key, &s, 3, shape, off, loc);
  int k = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int l = 0; l < 2; l++)
        assert_true(block[k++] == whole[((2 + i) * 7 + (3 + j)) * 3 + (1 + l)]);
  /* empty blocks write nothing */
  const int64_t none[3] = {0, 3, 2};
  block[0] = 99;
  plan_input_fill_block(block, 42, key, &s, 3, shape, off, none);
  assert_true(block[0] == 99);
}

static void test_keys_and_seeds_differ(void **state) {
  (void)state;
  plan_input_spec s = {PLAN_INPUT_FLOAT, 0, 0};
  uint64_t a = plan_input_tensor_key("w1"), b = plan_input_tensor_key("w2");
  assert_true(a != b);
  int same_t = 0, same_s = 0;
  for (int64_t i = 0; i < 1000; i++) {
    same_t += plan_input_value(1, a, i, &s) == plan_input_value(1, b, i, &s);
    same_s += plan_input_value(1, a, i, &s) == plan_input_value(2, a, i, &s);
  }
  assert_true(same_t < 5);
  assert_true(same_s < 5);
}

static void test_ranges(void **state) {
  (void)state;
  plan_input_spec ex = {PLAN_INPUT_EXACT, 0, 0};
  plan_input_spec fl = {PLAN_INPUT_FLOAT, 0, 0};
  plan_input_spec in = {PLAN_INPUT_INT, 10, 17};
  int seen_ex[7] = {0}, seen_in[7] = {0};
  double fmin = 1, fmax = -1, sum = 0;
  for (int64_t i = 0; i < 70000; i++) {
    double e = plan_input_value(9, 1234, i, &ex);
    assert_true(e >= -3 && e <= 3 && e == floor(e));
    seen_ex[(int)e + 3]++;
    double f = plan_input_value(9, 1234, i, &fl);
    assert_true(f >= -1 && f < 1);
    assert_true(ldexp(f, 24) == floor(ldexp(f, 24))); /* on the 2^-24 grid */
    assert_true((double)(float)f == f);               /* exact in f32 */
    fmin = f < fmin ? f : fmin;
    fmax = f > fmax ? f : fmax;
    sum += f;
    double n = plan_input_value(9, 1234, i, &in);
    assert_true(n >= 10 && n < 17 && n == floor(n));
    seen_in[(int)n - 10]++;
  }
  for (int v = 0; v < 7; v++) { /* each value about 10000 times */
    assert_true(seen_ex[v] > 9000 && seen_ex[v] < 11000);
    assert_true(seen_in[v] > 9000 && seen_in[v] < 11000);
  }
  assert_true(fmin < -0.99 && fmax > 0.99);
  assert_true(fabs(sum / 70000) < 0.02);
}

static void test_golden(void **state) {
  (void)state;
  /* regenerate by printing these with %a if the formula changes on
   * purpose; it must not change by accident */
  assert_true(plan_input_bits(0, 0, 0) == plan_input_bits(0, 0, 0));
  uint64_t key = plan_input_tensor_key("x");
  plan_input_spec ex = {PLAN_INPUT_EXACT, 0, 0};
  double v[4];
  for (int i = 0; i < 4; i++)
    v[i] = plan_input_value(0, key, i, &ex);
  static const double want[4] = {1, -2, -1, -1};
  for (int i = 0; i < 4; i++)
    assert_true(v[i] == want[i]);
  plan_input_spec fl = {PLAN_INPUT_FLOAT, 0, 0};
  static const double wantf[3] = {-0x1.a0d9c8p-1, -0x1.aec36cp-2,
                                  -0x1.418524p-1};
  for (int i = 0; i < 3; i++)
    assert_true(plan_input_value(7, key, i * 1000, &fl) == wantf[i]);
  assert_true(plan_input_bits(1, 2, 3) == UINT64_C(0xbfdda205eebccef0));
}

static void test_dyadic(void **state) {
  (void)state;
  assert_true(plan_dyadic_round(0.1, 8) == 26.0 / 256);
  assert_true(plan_dyadic_round(-0.1, 8) == -26.0 / 256);
  assert_true(plan_dyadic_round(3.0 / 512, 8) == 2.0 / 256); /* half: even */
  assert_true(plan_dyadic_round(1.0 / 512, 8) == 0.0);
  assert_true(plan_dyadic_round(5.0, 8) == 5.0);
  assert_true(isinf(plan_dyadic_round(INFINITY, 8)));
  assert_true(isnan(plan_dyadic_round(NAN, 8)));
  /* sums of rounded values are exact in any order */
  double a = plan_dyadic_round(exp(0.3), 8),
         b = plan_dyadic_round(tanh(0.7), 8), c = plan_dyadic_round(1 / 3.0, 8);
  assert_true((a + b) + c == a + (b + c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_block_equals_whole),
      cmocka_unit_test(test_keys_and_seeds_differ),
      cmocka_unit_test(test_ranges),
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_dyadic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
