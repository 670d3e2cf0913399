/* Unit tests for did-you-mean (plan_suggest, base/suggest.c), the one text
 * form of a finding (plan_diag_format) and of a byte count
 * (plan_format_bytes): the nearest one or two names within a third of the
 * word, swaps of neighbours as one edit, nothing for a far word or the word
 * itself; the hint over an array of structs in chunks; truncation. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <string.h>

#include "base/suggest.h"
#include "libplan/cost.h"
#include "libplan/diag.h"

static const char *const verbs[] = {"validate", "fmt",      "verify", "search",
                                    "replay",   "schedule", "show"};
#define NVERBS (sizeof verbs / sizeof *verbs)

static void test_nearest(void **state) {
  (void)state;
  char buf[128];
  assert_int_equal(plan_suggest(buf, sizeof buf, "verfy", verbs, NVERBS), 1);
  assert_string_equal(buf, "did you mean 'verify'?");
  /* a swap of neighbours is one edit */
  static const char *const keys[] = {"shape", "dtype", "role"};
  assert_int_equal(plan_suggest(buf, sizeof buf, "shpae", keys, 3), 1);
  assert_string_equal(buf, "did you mean 'shape'?");
  static const char *const kinds[] = {"gelu", "relu", "matmul"};
  /* gleu: gelu by a swap (1), relu by two edits: the nearest only */
  assert_int_equal(plan_suggest(buf, sizeof buf, "gleu", kinds, 3), 1);
  assert_string_equal(buf, "did you mean 'gelu'?");
}

static void test_two_and_none(void **state) {
  (void)state;
  char buf[128];
  static const char *const hw[] = {"h100", "h200", "a100"};
  /* h300: h100 and h200 both one edit away */
  assert_int_equal(plan_suggest(buf, sizeof buf, "h300", hw, 3), 2);
  assert_string_equal(buf, "did you mean 'h100' or 'h200'?");
  assert_int_equal(plan_suggest(buf, sizeof buf, "frobnicate", verbs, NVERBS),
                   0);
  assert_string_equal(buf, "");
  /* the word itself is no suggestion; a NULL entry ends the list */
  assert_int_equal(plan_suggest(buf, sizeof buf, "show", verbs, NVERBS), 0);
  static const char *const cut[] = {"alpha", NULL, "beta"};
  assert_int_equal(plan_suggest(buf, sizeof buf, "betx", cut, 3), 0);
  /* truncated, still terminated */
  char small[8];
  assert_int_equal(plan_suggest(small, sizeof small, "verfy", verbs, NVERBS),
                   1);
  assert_int_equal(strlen(small), 7);
}

typedef struct named {
  int pad;
  const char *name;
} named;

static void test_hint_field(void **state) {
  (void)state;
  /* 300 names, the nearest in the last chunk */
  static named items[300];
  static char text[300][24];
  for (int i = 0; i < 300; i++) {
    snprintf(text[i], sizeof text[i], "layer%03d.fc", i);
    items[i].name = text[i];
  }
  char hint[PLAN_HINT_SIZE];
  plan_hint_field(hint, sizeof hint, "layer299.fcc", items, 300, sizeof *items,
                  offsetof(named, name));
  assert_string_equal(hint, "; did you mean 'layer299.fc'?");
  plan_hint_field(hint, sizeof hint, "zzz", items, 300, sizeof *items,
                  offsetof(named, name));
  assert_string_equal(hint, "");
}

static void test_formats(void **state) {
  (void)state;
  plan_diag g = {
      PLAN_SEV_ERROR, "name.unknown", "no op 'x'", "x", "a.yaml", 3, 7};
  char buf[256];
  plan_diag_format(buf, sizeof buf, &g);
  assert_string_equal(buf, "a.yaml:3:7: error: no op 'x' [name.unknown]");
  g.line = 0;
  g.severity = PLAN_SEV_NOTE;
  plan_diag_format(buf, sizeof buf, &g);
  assert_string_equal(buf, "a.yaml: note: no op 'x' [name.unknown]");
  g.file = "";
  plan_diag_format(buf, sizeof buf, &g);
  assert_string_equal(buf, "note: no op 'x' [name.unknown]");
  assert_string_equal(plan_format_bytes(buf, sizeof buf, 512), "512 B");
  assert_string_equal(plan_format_bytes(buf, sizeof buf, 5120), "5.00 KiB");
  assert_string_equal(plan_format_bytes(buf, sizeof buf, 224.0 * 1048576),
                      "224.00 MiB");
  assert_string_equal(plan_format_bytes(buf, sizeof buf, 80e9), "74.51 GiB");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nearest),
      cmocka_unit_test(test_two_and_none),
      cmocka_unit_test(test_hint_field),
      cmocka_unit_test(test_formats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
