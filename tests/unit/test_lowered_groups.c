/* Collectives of a lowered file whose groups are explicit rank lists
 * (`groups: [[0, 1], [2, 3]]`): groups equal to an axis's verify EQUAL
 * and hash as the file that names the axis; one order for every group is
 * the file's `order`; groups with orders of their own round-trip through
 * the writer with the same hash, and a reduce_scatter and all_gather with
 * the same groups undo each other; a wrong member order is NOT EQUAL; a
 * malformed grouping is an error at its position. Run from the repository
 * root (examples/). */
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

#define BLOCK "examples/transformer-block.plan.yaml"

/* Every occurrence of `from` in text replaced by `to` (at most `max`
 * times; 0: all); a new string. */
static char *replace(const char *text, const char *from, const char *to,
                     int max) {
  size_t nf = strlen(from), nt = strlen(to), n = 0;
  for (const char *q = strstr(text, from); q; q = strstr(q + nf, from))
    n++;
  char *out = malloc(strlen(text) + n * (nt + 1) + 1), *w = out;
  assert_non_null(out);
  const char *q = text, *hit;
  int done = 0;
  while ((hit = strstr(q, from)) && (!max || done < max)) {
    memcpy(w, q, (size_t)(hit - q));
    w += hit - q;
    memcpy(w, to, nt);
    w += nt;
    q = hit + nf;
    done++;
  }
  strcpy(w, q);
  assert_true(done > 0);
  return out;
}

/* 1 equal, 0 not; the report kept in *rep when rep is not NULL. */
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
  return eq; /* l is the verifier's, freed there */
}

static plan_hash hash_of(const char *text) {
  plan_lowered *l = read_text(text);
  plan_hash h;
  ok(plan_lowered_hash(&h, l));
  plan_lowered_free(l);
  return h;
}

/* A lowered transformer block (dp=2, tp=2: tp groups {0,1} {2,3}) with
 * every `axis: tp` spelled as the axis's groups: EQUAL in both modes, and
 * the same program, so the same hash. */
static void test_groups_of_an_axis(void **state) {
  (void)state;
  plan_hash h0;
  char *text = lowered_text(BLOCK, NULL, &h0);
  assert_non_null(strstr(text, "axis: tp"));
  char *g = replace(text, "axis: tp", "groups: [[0, 1], [2, 3]]", 0);
  assert_null(strstr(g, "axis: tp"));
  assert_int_equal(verify_text(g, PLAN_VERIFY_EXACT, NULL), 1);
  assert_int_equal(verify_text(g, PLAN_VERIFY_FLOAT, NULL), 1);
  plan_hash h1 = hash_of(g);
  assert_true(plan_hash_equal(h0, h1));
  /* groups listed in another order are the same groups */
  char *g2 = replace(text, "axis: tp", "groups: [[2, 3], [0, 1]]", 0);
  assert_true(plan_hash_equal(h0, hash_of(g2)));
  free(g2);
  free(g);
  free(text);
  /* an all_reduce reduces in coordinate order whatever the member order
   * of its groups: EQUAL, the axis's program */
  text = lowered_text("examples/mlp-megatron.plan.yaml", NULL, &h0);
  g = replace(text, "axis: tp", "groups: [[1, 0], [2, 3]]", 0);
  assert_int_equal(verify_text(g, PLAN_VERIFY_EXACT, NULL), 1);
  assert_true(plan_hash_equal(h0, hash_of(g)));
  free(g);
  free(text);
}

/* The first all_gather with the second group's members swapped: that
 * group's blocks land in the wrong places, NOT EQUAL at the projection
 * that reads them; the same swap in every group is the axis with
 * `order: [1, 0]`, the same hash. */
static void test_wrong_member_order(void **state) {
  (void)state;
  plan_hash h0;
  char *text = lowered_text(BLOCK, NULL, &h0);
  const char *from = "{collective: all_gather, axis: tp";
  char *g = replace(text, from,
                    "{collective: all_gather, groups: [[0, 1], [3, 2]]", 1);
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_report *r = NULL;
    assert_int_equal(
        verify_text(g, mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT, &r), 0);
    assert_non_null(strstr(plan_verify_report_first_op(r), "qkv"));
    plan_verify_report_free(r);
  }
  char *uni = replace(text, from,
                      "{collective: all_gather, groups: [[1, 0], [3, 2]]", 1);
  char *ord = replace(text, "{collective: all_gather, axis: tp, dim: 1",
                      "{collective: all_gather, axis: tp, dim: 1, order: "
                      "[1, 0]",
                      1);
  assert_true(plan_hash_equal(hash_of(uni), hash_of(ord)));
  assert_false(plan_hash_equal(hash_of(uni), h0));
  assert_false(plan_hash_equal(hash_of(uni), hash_of(g)));
  free(uni);
  free(ord);
  free(g);
  free(text);
}

/* A row-parallel matmul whose partial output is reduce-scattered and
 * gathered back with the same groups, each group its own member order. */
static const char rowpar[] =
    "libplan-lowered: \"1.0\"\n"
    "program:\n"
    "  name: rowpar\n"
    "  tensors:\n"
    "    \"x\": {shape: [batch=8, hidden=16]}\n"
    "    w2: {shape: [16, 8], role: param}\n"
    "  ops:\n"
    "    - {name: fc2, op: matmul, in: [\"x\", w2], out: y}\n"
    "  outputs: [y]\n"
    "mesh:\n"
    "  axes: [dp=2, tp=2]\n"
    "buffers:\n"
    "  \"x@0\": {tensor: \"x\", placement: \"S(0)S(1)\"}\n"
    "  \"w2@0\": {tensor: \"w2\", placement: \"RS(0)\"}\n"
    "  \"y@0\": {tensor: \"y\", placement: \"S(0)P(sum)\"}\n"
    "  \"y@1\": {tensor: \"y\", placement: \"S(0)S(1)\"}\n"
    "  \"y@2\": {tensor: \"y\", placement: \"S(0)R\"}\n"
    "steps:\n"
    "  - {input: \"x@0\"}\n"
    "  - {input: \"w2@0\"}\n"
    "  - {op: \"fc2\", in: [\"x@0\", \"w2@0\"], out: [\"y@0\"]}\n"
    "  - {collective: reduce_scatter, GROUPS, reduce: sum, dim: 1, in: "
    "\"y@0\", out: \"y@1\"}\n"
    "  - {collective: all_gather, GATHER, dim: 1, in: \"y@1\", out: "
    "\"y@2\"}\n"
    "layouts: {\"x\": \"x@0\", \"w2\": \"w2@0\", \"y\": \"y@0\"}\n"
    "outputs: {\"y\": \"y@2\"}\n"
    "required: {\"y\": \"S(0)R\"}\n";

static char *rowpar_with(const char *scatter, const char *gather) {
  char *a = replace(rowpar, "GROUPS", scatter, 1);
  char *b = replace(a, "GATHER", gather, 1);
  free(a);
  return b;
}

static void test_orders_of_their_own(void **state) {
  (void)state;
  const char *gs = "groups: [[0, 1], [3, 2]]";
  char *text = rowpar_with(gs, gs);
  /* the second group's pieces are swapped in y@1, which the verifier
   * compares as the collective's output: NOT EQUAL there, though the
   * gather puts them back */
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_report *r = NULL;
    assert_int_equal(
        verify_text(text, mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT, &r), 0);
    assert_string_equal(plan_verify_report_first_tensor(r), "y");
    assert_non_null(strstr(plan_verify_report_first_op(r), "reduce_scatter"));
    plan_verify_report_free(r);
  }
  /* in coordinate order in every group: the program that names the axis */
  char *id =
      rowpar_with("groups: [[0, 1], [2, 3]]", "groups: [[2, 3], [0, 1]]");
  char *ax = rowpar_with("axis: tp", "axis: tp");
  assert_int_equal(verify_text(id, PLAN_VERIFY_EXACT, NULL), 1);
  assert_true(plan_hash_equal(hash_of(id), hash_of(ax)));
  free(id);
  free(ax);
  /* written back: the groups as given, the same text again */
  plan_lowered *l = read_text(text);
  char *w1 = NULL, *w2 = NULL;
  size_t n1, n2;
  ok(plan_lowered_write(&w1, &n1, l));
  assert_non_null(strstr(w1, "{collective: reduce_scatter, groups: [[0, 1], "
                             "[3, 2]], reduce: sum, dim: 1"));
  assert_non_null(
      strstr(w1, "{collective: all_gather, groups: [[0, 1], [3, 2]], dim: 1"));
  plan_hash h1, h2;
  ok(plan_lowered_hash(&h1, l));
  plan_lowered *l2 = read_text(w1);
  ok(plan_lowered_write(&w2, &n2, l2));
  ok(plan_lowered_hash(&h2, l2));
  assert_string_equal(w1, w2);
  assert_true(plan_hash_equal(h1, h2));
  /* the groups in another order: the same program */
  char *other = rowpar_with("groups: [[3, 2], [0, 1]]", gs);
  assert_true(plan_hash_equal(h1, hash_of(other)));
  /* another program: the gather in coordinate order */
  char *bad = rowpar_with(gs, "axis: tp");
  assert_false(plan_hash_equal(h1, hash_of(bad)));
  plan_buffer_free(w1);
  plan_buffer_free(w2);
  plan_lowered_free(l);
  plan_lowered_free(l2);
  free(other);
  free(bad);
  free(text);
}

/* Malformed groups: each an error (exit 2 at the CLI) at the position of
 * what is wrong, with a message naming it. */
static void test_bad_groups(void **state) {
  (void)state;
  static const struct {
    const char *groups, *pos, *words;
  } cases[] = {
      {"groups: [[0, 1], [2, 2]]", "x.yaml:22:", "rank 2 is in group 1"},
      {"groups: [[0, 1], [2, 4]]", "x.yaml:22:", "rank 4 is not in the mesh"},
      {"groups: [[0, 1], [2]]", "x.yaml:22:", "of equal size"},
      {"groups: [[0, 1]]", "x.yaml:22:", "rank 2 is in no group"},
      {"groups: [[0, 3], [1, 2]]",
       "x.yaml:22:", "not the groups of one mesh axis"},
      {"groups: [[0, 2], [1, 3]]", "x.yaml:22:", "over 'dp' does not turn"},
      {"groups: []", "x.yaml:22:", "every rank of the mesh"},
      {"groups: [[0, 1], [2, 3]], axis: tp", "x.yaml:22:", "not both"},
      {"groups: [[0, 1], [2, 3]], order: [1, 0]",
       "x.yaml:22:", "'order' goes with 'axis'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = rowpar_with(cases[i].groups, "axis: tp");
    plan_lowered *l = NULL;
    int rc = plan_lowered_load_buffer(&l, text, strlen(text), "x.yaml", NULL);
    char msg[1200];
    plan_error_format(msg, sizeof msg);
    if (rc == PLAN_OK || !strstr(msg, cases[i].words) ||
        !strstr(msg, cases[i].pos))
      print_message("case %zu: rc %d: %s\n", i, rc, msg);
    assert_int_not_equal(rc, PLAN_OK);
    assert_null(l);
    assert_non_null(strstr(msg, cases[i].pos));
    assert_non_null(strstr(msg, cases[i].words));
    free(text);
  }
}

/* The step view of the explicit member orders: the first all_gather with
 * `order: [1, 0]` gives that order and no per-rank rows; the same step
 * with `groups` of different member orders gives each rank its group's
 * order (ranks 0 and 1: coordinate order, 2 and 3: swapped); every other
 * step has none. */
static int first_all_gather(const plan_lowered *l) {
  for (int i = 0; i < plan_lowered_step_count(l); i++) {
    plan_lowered_step_info si;
    ok(plan_lowered_step(&si, l, i));
    if (!strcmp(si.kind, "all_gather"))
      return i;
  }
  return -1;
}

static void test_order_view(void **state) {
  (void)state;
  plan_hash h0;
  char *text = lowered_text(BLOCK, NULL, &h0);
  char *ord = replace(text, "{collective: all_gather, axis: tp, dim: 1",
                      "{collective: all_gather, axis: tp, dim: 1, order: "
                      "[1, 0]",
                      1);
  char *grp = replace(text, "{collective: all_gather, axis: tp",
                      "{collective: all_gather, groups: [[0, 1], [3, 2]]", 1);
  plan_lowered *l = read_text(ord);
  int g = first_all_gather(l);
  assert_true(g >= 0);
  for (int i = 0; i < plan_lowered_step_count(l); i++) {
    plan_lowered_order_info oi;
    ok(plan_lowered_step_order(&oi, l, i));
    assert_null(oi.rank_order);
    if (i != g) {
      assert_null(oi.group_order);
      continue;
    }
    assert_int_equal(oi.length, 2);
    assert_non_null(oi.group_order);
    assert_int_equal(oi.group_order[0], 1);
    assert_int_equal(oi.group_order[1], 0);
  }
  plan_lowered_free(l);
  l = read_text(grp);
  g = first_all_gather(l);
  plan_lowered_order_info oi;
  ok(plan_lowered_step_order(&oi, l, g));
  assert_int_equal(oi.length, 2);
  assert_non_null(oi.rank_order);
  const int64_t want[4][2] = {{0, 1}, {0, 1}, {1, 0}, {1, 0}};
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 2; k++)
      assert_int_equal(oi.rank_order[r * 2 + k], want[r][k]);
  plan_lowered_free(l);
  free(grp);
  free(ord);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_of_an_axis),
      cmocka_unit_test(test_wrong_member_order),
      cmocka_unit_test(test_orders_of_their_own),
      cmocka_unit_test(test_bad_groups),
      cmocka_unit_test(test_order_view),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
