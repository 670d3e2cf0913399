/* Unit tests for diag.c: adding, counting, copying and stable sorting. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "libplan/diag.h"

static void test_empty(void **state) {
  (void)state;
  plan_diags *d = NULL;
  assert_int_equal(plan_diags_new(&d), PLAN_OK);
  assert_non_null(d);
  assert_int_equal(plan_diags_count(d), 0);
  assert_null(plan_diags_get(d, 0));
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_NOTE), 0);
  plan_diags_sort(d); /* no-op */
  plan_diags_free(d);
  plan_diags_free(NULL);
  assert_int_equal(plan_diags_count(NULL), 0);
  assert_int_equal(plan_diags_new(NULL), PLAN_EUSAGE);
  assert_int_equal(
      plan_diags_add(NULL, PLAN_SEV_NOTE, "x", NULL, NULL, 0, 0, "m"),
      PLAN_EUSAGE);
}

static void test_add_copies(void **state) {
  (void)state;
  plan_diags *d;
  assert_int_equal(plan_diags_new(&d), PLAN_OK);
  char code[] = "strategy.illegal";
  char obj[] = "mlp.fc1";
  char file[] = "plan.yaml";
  assert_int_equal(plan_diags_add(d, PLAN_SEV_ERROR, code, obj, file, 12, 4,
                                  "input %d is %s", 1, "S(0)"),
                   PLAN_OK);
  /* Mutating the caller's strings must not change the finding. */
  memset(code, 'x', sizeof code - 1);
  memset(obj, 'x', sizeof obj - 1);
  memset(file, 'x', sizeof file - 1);
  const plan_diag *g = plan_diags_get(d, 0);
  assert_non_null(g);
  assert_int_equal(g->severity, PLAN_SEV_ERROR);
  assert_string_equal(g->code, "strategy.illegal");
  assert_string_equal(g->object, "mlp.fc1");
  assert_string_equal(g->file, "plan.yaml");
  assert_string_equal(g->message, "input 1 is S(0)");
  assert_int_equal(g->line, 12);
  assert_int_equal(g->column, 4);

  /* NULL strings become "", negative positions 0. */
  assert_int_equal(
      plan_diags_add(d, PLAN_SEV_NOTE, NULL, NULL, NULL, -3, -1, NULL),
      PLAN_OK);
  g = plan_diags_get(d, 1);
  assert_string_equal(g->code, "");
  assert_string_equal(g->object, "");
  assert_string_equal(g->file, "");
  assert_string_equal(g->message, "");
  assert_int_equal(g->line, 0);
  assert_int_equal(g->column, 0);
  assert_null(plan_diags_get(d, 2));
  plan_diags_free(d);
}

static void test_counts_and_growth(void **state) {
  (void)state;
  plan_diags *d;
  assert_int_equal(plan_diags_new(&d), PLAN_OK);
  for (int i = 0; i < 3000; i++)
    assert_int_equal(plan_diags_add(d, (plan_severity)(i % 3), "c", "o", "f", i,
                                    1, "finding %d", i),
                     PLAN_OK);
  assert_int_equal(plan_diags_count(d), 3000);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_NOTE), 3000);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_WARNING), 2000);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1000);
  /* Pointers stay valid strings after the items array grew. */
  assert_string_equal(plan_diags_get(d, 2999)->message, "finding 2999");
  assert_string_equal(plan_diags_get(d, 0)->message, "finding 0");
  plan_diags_free(d);
}

static void test_sort(void **state) {
  (void)state;
  plan_diags *d;
  assert_int_equal(plan_diags_new(&d), PLAN_OK);
  /* Added out of order; `object` tags let us read back the result. */
  struct {
    const char *file;
    int line, col;
    const char *code, *object, *msg;
  } in[] = {
      {"b.yaml", 1, 1, "x", "o9", "m"}, {"a.yaml", 10, 1, "x", "o5", "m"},
      {"a.yaml", 2, 5, "x", "o3", "m"}, {"a.yaml", 2, 1, "z", "o2", "m"},
      {"a.yaml", 2, 1, "y", "o1", "m"}, {"", 7, 7, "x", "o0", "m"},
      {"a.yaml", 2, 5, "x", "o4", "m"}, {"a.yaml", 10, 1, "x", "o5", "a"},
  };
  size_t n = sizeof in / sizeof in[0];
  for (size_t i = 0; i < n; i++)
    assert_int_equal(plan_diags_add(d, PLAN_SEV_ERROR, in[i].code, in[i].object,
                                    in[i].file, in[i].line, in[i].col, "%s",
                                    in[i].msg),
                     PLAN_OK);
  plan_diags_sort(d);
  const char *want_obj[] = {"o0", "o1", "o2", "o3", "o4", "o5", "o5", "o9"};
  const char *want_msg[] = {"m", "m", "m", "m", "m", "a", "m", "m"};
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(plan_diags_get(d, i)->object, want_obj[i]);
    assert_string_equal(plan_diags_get(d, i)->message, want_msg[i]);
  }
  plan_diags_free(d);
}

static void test_sort_stable(void **state) {
  (void)state;
  plan_diags *d;
  assert_int_equal(plan_diags_new(&d), PLAN_OK);
  /* Identical keys differing only in severity: order of insertion stays. */
  for (int i = 0; i < 200; i++)
    assert_int_equal(plan_diags_add(d, (plan_severity)(i % 3), "same", "obj",
                                    "f", 1, 1, "msg"),
                     PLAN_OK);
  plan_diags_sort(d);
  for (int i = 0; i < 200; i++)
    assert_int_equal(plan_diags_get(d, (size_t)i)->severity, i % 3);
  /* Sorting twice is idempotent. */
  plan_diags_sort(d);
  for (int i = 0; i < 200; i++)
    assert_int_equal(plan_diags_get(d, (size_t)i)->severity, i % 3);
  plan_diags_free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_add_copies),
      cmocka_unit_test(test_counts_and_growth),
      cmocka_unit_test(test_sort),
      cmocka_unit_test(test_sort_stable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
