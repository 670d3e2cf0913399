/* Unit tests for abi.c: plan_abi_sizeof answers sizeof of the public structs
 * by name, and 0 for anything else. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libplan/libplan.h"

static void test_known_sizes(void **state) {
  (void)state;
  assert_int_equal(plan_abi_sizeof("plan_error"), sizeof(plan_error));
  assert_int_equal(plan_abi_sizeof("plan_hash"), sizeof(plan_hash));
  assert_int_equal(plan_abi_sizeof("plan_hash"), 2 * sizeof(uint64_t));
  assert_int_equal(plan_abi_sizeof("plan_diag"), sizeof(plan_diag));
  assert_int_equal(plan_abi_sizeof("plan_load_options"),
                   sizeof(plan_load_options));
  assert_int_equal(plan_abi_sizeof("plan_upgrade_info"),
                   sizeof(plan_upgrade_info));
  assert_int_equal(plan_abi_sizeof("plan_grad_options"),
                   sizeof(plan_grad_options));
  assert_int_equal(plan_abi_sizeof("plan_cost_collective_info"),
                   sizeof(plan_cost_collective_info));
  assert_int_equal(plan_abi_sizeof("plan_schedule_options"),
                   sizeof(plan_schedule_options));
  assert_int_equal(plan_abi_sizeof("plan_schedule_stage_stats"),
                   sizeof(plan_schedule_stage_stats));
  assert_int_equal(plan_abi_sizeof("plan_verify_options"),
                   sizeof(plan_verify_options));
  assert_int_equal(plan_abi_sizeof("plan_verify_tolerance"),
                   sizeof(plan_verify_tolerance));
  assert_int_equal(plan_abi_sizeof("plan_ref_options"),
                   sizeof(plan_ref_options));
}

static void test_unknown_names(void **state) {
  (void)state;
  assert_int_equal(plan_abi_sizeof(NULL), 0);
  assert_int_equal(plan_abi_sizeof(""), 0);
  assert_int_equal(plan_abi_sizeof("plan_nothing"), 0);
  /* opaque handles have no size a caller may rely on */
  assert_int_equal(plan_abi_sizeof("plan_plan"), 0);
  assert_int_equal(plan_abi_sizeof("plan_verify_report"), 0);
  /* the C name exactly: no struct keyword, no prefix match */
  assert_int_equal(plan_abi_sizeof("struct plan_hash"), 0);
  assert_int_equal(plan_abi_sizeof("plan_has"), 0);
  assert_int_equal(plan_abi_sizeof("plan_hash "), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_sizes),
      cmocka_unit_test(test_unknown_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
