/* Lowered programs with shard ratios as files: `plan lower -o` writes the
 * weights (S(0|3:1)), the reader interns them into the lowered program's
 * mesh, the round trip keeps the hash whatever order the sets are interned
 * in, the file verifies EQUAL in both modes, a 1.0 file with ratios is a
 * version error, and a file whose weights are swapped against the
 * producer's is NOT EQUAL. Run from the repository root (examples/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libplan/libplan.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "lowered_text.h"

#define FWD "examples/mlp-ratios.plan.yaml"
#define TRAIN "examples/mlp-ratios-train.plan.yaml"

/* Lowered `text` verified in `mode`: 1 equal, 0 not (report kept in *rep
 * when rep is not NULL). */
static int verify_text(const char *text, plan_verify_mode mode,
                       plan_verify_report **rep) {
  plan_lowered *l = read_text(text);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = mode;
  plan_verify_report *r = NULL;
  ok(plan_verify_lowered(&r, plan_lowered_plan(l), l, &o));
  int eq = plan_verify_report_equal(r);
  if (rep)
    *rep = r;
  else
    plan_verify_report_free(r);
  return eq;
}

static void test_write_read_hash(void **state) {
  (void)state;
  plan_plan *p;
  plan_hash h0, h1;
  char *text = lowered_text(FWD, &p, &h0);
  assert_non_null(strstr(text, "libplan-lowered: \"1.1\"\n"));
  assert_non_null(strstr(text, "\"x@0\": {tensor: \"x\", placement: "
                               "\"S(0|3:1)R\"}"));
  assert_non_null(strstr(text, "placement: \"S(1|3:1)S(0|1:3)\"}"));
  assert_null(strstr(text, "|#"));
  /* the three collectives that move unequal pieces */
  assert_non_null(strstr(text, "{collective: all_to_all, axis: dp, dim: 0, "
                               "to_dim: 1"));
  assert_non_null(strstr(text, "{collective: reduce_scatter, axis: tp, "
                               "reduce: sum, dim: 0"));
  assert_non_null(strstr(text, "{collective: all_gather, axis: dp, dim: 0"));
  plan_lowered *l = read_text(text);
  /* the two sets, interned into the lowered program's mesh */
  const plan_mesh *m = &plan_lowered_plan(l)->mesh;
  assert_int_equal(m->nratios, 2);
  assert_int_equal(m->ratios[0].axis, 0);
  assert_int_equal(m->ratios[0].w[0], 3);
  assert_int_equal(m->ratios[0].w[1], 1);
  assert_int_equal(m->ratios[1].axis, 1);
  assert_int_equal(m->ratios[1].w[0], 1);
  assert_int_equal(m->ratios[1].w[1], 3);
  ok(plan_lowered_hash(&h1, l));
  assert_true(plan_hash_equal(h0, h1));
  char *again = NULL;
  size_t len;
  ok(plan_lowered_write(&again, &len, l));
  assert_string_equal(again, text);
  plan_lowered_free(l);
  plan_buffer_free(again);
  plan_buffer_free(text);
  plan_free(p);
}

/* Sets interned in another order (the tp set's buffer listed first) give
 * other set numbers, the same program and hash. */
static void test_intern_order(void **state) {
  (void)state;
  plan_plan *p;
  plan_hash h0, h1;
  char *text = lowered_text(FWD, &p, &h0);
  const char *line = "  \"y@2\": {tensor: \"y\", placement: "
                     "\"S(1|3:1)S(0|1:3)\"}\n";
  /* the same placement in the map form, tp's entry first */
  const char *map = "  \"y@2\": {tensor: \"y\", placement: {tp: "
                    "\"S(0|1:3)\", dp: \"S(1|3:1)\"}}\n";
  char *at = strstr(text, line), *first = strstr(text, "buffers:\n");
  assert_non_null(at);
  assert_non_null(first);
  size_t n = strlen(text), ll = strlen(line), lm = strlen(map);
  char *moved = malloc(n + lm + 1);
  assert_non_null(moved);
  size_t head = (size_t)(first - text) + strlen("buffers:\n");
  memcpy(moved, text, head);
  memcpy(moved + head, map, lm);
  /* the rest, less the line */
  size_t off = head + lm;
  memcpy(moved + off, text + head, (size_t)(at - (text + head)));
  off += (size_t)(at - (text + head));
  strcpy(moved + off, at + ll);
  assert_int_equal(strlen(moved), n - ll + lm);
  plan_lowered *l = read_text(moved);
  const plan_mesh *m = &plan_lowered_plan(l)->mesh;
  assert_int_equal(m->nratios, 2);
  assert_int_equal(m->ratios[0].axis, 1); /* y@2's tp entry came first */
  assert_int_equal(m->ratios[0].w[0], 1);
  assert_int_equal(m->ratios[1].axis, 0);
  assert_int_equal(m->ratios[1].w[0], 3);
  ok(plan_lowered_hash(&h1, l));
  assert_true(plan_hash_equal(h0, h1));
  plan_lowered_free(l);
  free(moved);
  plan_buffer_free(text);
  plan_free(p);
}

static void test_verify_both_modes(void **state) {
  (void)state;
  const char *plans[] = {FWD, TRAIN};
  for (int i = 0; i < 2; i++) {
    plan_plan *p;
    plan_hash h;
    char *text = lowered_text(plans[i], &p, &h);
    assert_int_equal(verify_text(text, PLAN_VERIFY_EXACT, NULL), 1);
    assert_int_equal(verify_text(text, PLAN_VERIFY_FLOAT, NULL), 1);
    plan_buffer_free(text);
    plan_free(p);
  }
}

static char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  assert_non_null(at);
  size_t n = strlen(text) - strlen(from) + strlen(to);
  char *s = malloc(n + 1);
  assert_non_null(s);
  memcpy(s, text, (size_t)(at - text));
  strcpy(s + (at - text), to);
  strcat(s, at + strlen(from));
  return s;
}

/* The version the file says must hold its fields: 1.0 with ratios is a
 * version error at the placement. */
static void test_version(void **state) {
  (void)state;
  plan_plan *p;
  plan_hash h;
  char *text = lowered_text(FWD, &p, &h);
  char *old = replace(text, "libplan-lowered: \"1.1\"",
                      "libplan-lowered: "
                      "\"1.0\"");
  plan_lowered *l = NULL;
  assert_int_equal(
      plan_lowered_load_buffer(&l, old, strlen(old), "x.yaml", NULL),
      PLAN_EVERSION);
  assert_null(l);
  const plan_error *e = plan_error_last();
  assert_non_null(strstr(e->message, "format 1.1"));
  assert_string_equal(e->file, "x.yaml");
  assert_true(e->line > 1);
  free(old);
  plan_buffer_free(text);
  plan_free(p);
}

/* Weights swapped between two devices. On a buffer an op writes, the
 * blocks no longer fit the op: refused at the step. On the pieces an
 * all-to-all hands out (and the steps after it), every step fits, and the
 * delivered placement is not the plan's: NOT EQUAL in both modes, the
 * diagnosis naming the swapped axis. */
static void test_swapped_weights(void **state) {
  (void)state;
  plan_plan *p;
  plan_hash h;
  char *text = lowered_text(FWD, &p, &h);
  char *sw = replace(text,
                     "\"h@0\": {tensor: \"h\", placement: "
                     "\"S(0|3:1)S(1)\"}",
                     "\"h@0\": {tensor: \"h\", placement: \"S(0|1:3)S(1)\"}");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lowered_load_buffer(&l, sw, strlen(sw), "x.yaml", NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "'mlp.fc1'"));
  free(sw);
  char *s1 = replace(text, "placement: \"S(1|3:1)P(sum)\"",
                     "placement: \"S(1|1:3)P(sum)\"");
  char *s2 = replace(s1, "placement: \"S(1|3:1)S(0|1:3)\"}",
                     "placement: \"S(1|1:3)S(0|1:3)\"}");
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_report *r = NULL;
    assert_int_equal(
        verify_text(s2, mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT, &r), 0);
    assert_string_equal(plan_verify_report_first_tensor(r), "y");
    const char *d = plan_verify_report_diagnosis(r);
    assert_non_null(strstr(d, "S(1|1:3)S(0|1:3)"));
    assert_non_null(strstr(d, "weights over 'dp' are swapped"));
    plan_verify_report_free(r);
  }
  free(s1);
  free(s2);
  plan_buffer_free(text);
  plan_free(p);
}

/* `order` states a block's position, which needs pieces of one size: on a
 * level cut by ratios it is refused at the step, with its position. */
static void test_order_refused(void **state) {
  (void)state;
  plan_plan *p;
  plan_hash h;
  char *text = lowered_text(FWD, &p, &h);
  char *o = replace(text, "{collective: all_gather, axis: dp, dim: 0, in:",
                    "{collective: all_gather, axis: dp, dim: 0, order: [1, 0], "
                    "in:");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lowered_load_buffer(&l, o, strlen(o), "x.yaml", NULL),
                   PLAN_EINVALID);
  const plan_error *e = plan_error_last();
  assert_non_null(strstr(e->message, "cut by shard ratios over 'dp'"));
  assert_true(e->line > 1 && e->column > 1);
  free(o);
  plan_buffer_free(text);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_read_hash),
      cmocka_unit_test(test_intern_order),
      cmocka_unit_test(test_verify_both_modes),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_swapped_weights),
      cmocka_unit_test(test_order_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
