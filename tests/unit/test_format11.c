/* Format 1.1: shard ratios (compact S(d|w0:w1:...) and map form, interned
 * per plan, reduced by their gcd, validated, printed canonically), and the
 * version rule that refuses them in a 1.0 file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libplan/libplan.h"
#include "ir/placement.h"

#define HDR11 "libplan: \"1.1\"\n"
#define HDR10 "libplan: \"1.0\"\n"
/* Lines 2..8. */
#define PROG                                                                   \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [10, 16]}\n"                                                 \
  "    w: {shape: [16, 4], role: param}\n"                                     \
  "  ops:\n"                                                                   \
  "    - {name: mm, op: matmul, in: [x, w], out: y}\n"                         \
  "    - {name: act, op: relu, in: [y], out: z}\n"
/* Lines 9..10. */
#define MESH23 "mesh:\n  axes: [dp=2, tp=3]\n"

static plan_plan *load_ok(const char *text) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL);
  if (rc != PLAN_OK) {
    char buf[1200];
    print_message("unexpected failure: %s\n",
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  return p;
}

/* Loading fails with `code` at line:col, the message holding `words`. */
static void expect_fail(const char *text, int code, int line, int col,
                        const char *words) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL);
  const plan_error *e = plan_error_last();
  if (rc == PLAN_OK)
    plan_free(p);
  if (rc != code || e->line != line || e->column != col ||
      !strstr(e->message, words))
    print_message("for:\n%s\ngot %d %d:%d: %s\n", text, rc, e->line, e->column,
                  e->message);
  assert_int_equal(rc, code);
  assert_int_equal(e->line, line);
  assert_int_equal(e->column, col);
  assert_non_null(strstr(e->message, words));
}

/* The canonical placement text of tensor `name`. */
static void placement_is(const plan_plan *p, const char *name,
                         const char *want) {
  const plan_program *prog = plan_get_program(p);
  int t = plan_program_tensor_find(prog, name);
  assert_true(t >= 0);
  char buf[256];
  assert_int_equal(plan_tensor_placement(buf, sizeof buf, p, t), PLAN_OK);
  assert_string_equal(buf, want);
}

/* ---- the placement spelling with a mesh's sets --------------------------- */

typedef struct mesh_ctx {
  plan_mesh m;
  plan_arena arena;
} mesh_ctx;

static int intern_cb(void *ctx, int axis, const int64_t *w, int n, char *err,
                     size_t errsz) {
  mesh_ctx *c = ctx;
  return plan_ratios_intern(&c->m, &c->arena, axis, w, n, err, errsz);
}

static void mesh_init(mesh_ctx *c) {
  memset(c, 0, sizeof *c);
  plan_arena_init(&c->arena);
  c->m.naxes = 2;
  c->m.axis_names[0] = "dp";
  c->m.axis_names[1] = "tp";
  c->m.axis_sizes[0] = 2;
  c->m.axis_sizes[1] = 3;
  c->m.ndevices = 6;
}

static int parse(mesh_ctx *c, const char *text, plan_placement *out, char *err,
                 size_t errsz, size_t *off) {
  plan_ratio_sink sink = {intern_cb, c, 0};
  return plan_placement_parse_r(out, text, strlen(text), 2, &sink, err, errsz,
                                off);
}

static void round_trip(mesh_ctx *c, const char *text, const char *want) {
  plan_placement pl;
  char err[160], buf[128];
  size_t off = 0;
  int rc = parse(c, text, &pl, err, sizeof err, &off);
  if (rc)
    print_message("%s: %s\n", text, err);
  assert_int_equal(rc, PLAN_OK);
  assert_int_equal(plan_placement_normalize(&pl, 2, err, sizeof err), PLAN_OK);
  size_t n =
      plan_placement_format_r(&pl, c->m.ratios, c->m.nratios, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

static void test_compact_ratios(void **state) {
  (void)state;
  mesh_ctx c;
  mesh_init(&c);
  round_trip(&c, "S(0|3:2)R", "S(0|3:2)R");
  assert_int_equal(c.m.nratios, 1);
  /* 6:4 is 3:2: the same layout, the same set */
  round_trip(&c, "S(0|6:4)S(1)", "S(0|3:2)S(1)");
  assert_int_equal(c.m.nratios, 1);
  assert_int_equal(c.m.ratios[0].axis, 0);
  assert_int_equal(c.m.ratios[0].w[0], 3);
  assert_int_equal(c.m.ratios[0].w[1], 2);
  /* equal weights stay written: 1:1 is not torch.chunk's pieces */
  round_trip(&c, "S(0|2:2)R", "S(0|1:1)R");
  assert_int_equal(c.m.nratios, 2);
  /* the other axis: its own set, with levels and spaces */
  round_trip(&c, "S(1:1|1 : 2) S(1:0|1:2:3)", "S(1:1|1:2)S(1:0|1:2:3)");
  round_trip(&c, "Shard(0|1:5)P(avg)", "S(0|1:5)P(avg)");
  assert_int_equal(c.m.nratios, 5);
  /* the fixed-size form names the set by number, for messages */
  plan_placement pl;
  char err[160], buf[PLAN_PLACEMENT_STRLEN];
  size_t off;
  assert_int_equal(parse(&c, "S(0|3:2)R", &pl, err, sizeof err, &off), 0);
  assert_string_equal(plan_placement_format(&pl, buf), "S(0|#1)R");
  /* truncation reports the full length */
  char small[4];
  assert_int_equal(plan_placement_format_r(&pl, c.m.ratios, c.m.nratios, small,
                                           sizeof small),
                   9);
  assert_string_equal(small, "S(0");
  plan_arena_free(&c.arena);
}

static void parse_fails(mesh_ctx *c, const char *text, const char *words,
                        size_t want_off) {
  plan_placement pl;
  char err[160] = "";
  size_t off = 99;
  assert_int_equal(parse(c, text, &pl, err, sizeof err, &off), PLAN_EINVALID);
  if (!strstr(err, words))
    print_message("%s: %s\n", text, err);
  assert_non_null(strstr(err, words));
  assert_int_equal(off, want_off);
}

static void test_ratio_errors(void **state) {
  (void)state;
  mesh_ctx c;
  mesh_init(&c);
  parse_fails(&c, "S(0|3)R", "1 shard weight for mesh axis dp of size 2", 0);
  parse_fails(&c, "RS(0|1:1)", "2 shard weights for mesh axis tp of size 3", 1);
  parse_fails(&c, "S(0|3:0)R", "shard weight 0 is out of range", 0);
  parse_fails(&c, "S(0|3:-1)R", "decimal integers", 0);
  parse_fails(&c, "S(0|1048577:1)R", "out of range (1..1048576)", 0);
  parse_fails(&c, "S(0|3:2:)R", "decimal integers", 0);
  parse_fails(&c, "S(0|3:2R", "expected ')'", 0);
  parse_fails(&c, "R|3:2 R", "belong inside S(...)", 0);
  parse_fails(&c, "RP|1:1", "belong inside S(...)", 1);
  assert_int_equal(c.m.nratios, 0);
  /* the maximum weight is fine */
  round_trip(&c, "S(0|1048576:1)R", "S(0|1048576:1)R");
  /* without a sink a weight list is refused */
  plan_placement pl;
  char err[160];
  size_t off;
  assert_int_equal(
      plan_placement_parse(&pl, "S(0|1:2)", 8, 1, err, sizeof err, &off),
      PLAN_EINVALID);
  assert_non_null(strstr(err, "need a plan's mesh"));
  plan_arena_free(&c.arena);
}

static void test_ratio_set_limit(void **state) {
  (void)state;
  mesh_ctx c;
  mesh_init(&c);
  char text[64], err[160];
  plan_placement pl;
  size_t off;
  /* 1:k for k = 1..255 are 255 distinct sets; one more is refused */
  for (int k = 1; k <= PLAN_MAX_RATIO_SETS; k++) {
    snprintf(text, sizeof text, "S(0|1:%d)R", k);
    assert_int_equal(parse(&c, text, &pl, err, sizeof err, &off), PLAN_OK);
    assert_int_equal(pl.ax[0].ratio, k);
  }
  assert_int_equal(c.m.nratios, PLAN_MAX_RATIO_SETS);
  /* a known set (2:2 is 1:1) is still found */
  assert_int_equal(parse(&c, "S(0|2:2)R", &pl, err, sizeof err, &off), PLAN_OK);
  assert_int_equal(pl.ax[0].ratio, 1);
  parse_fails(&c, "S(0|1:256)R", "more than 255 distinct sets", 0);
  /* every set kept its weights through the regrowth */
  for (int k = 1; k <= PLAN_MAX_RATIO_SETS; k++)
    assert_int_equal(c.m.ratios[k - 1].w[1], k);
  plan_arena_free(&c.arena);
}

static void test_ratio_sets_same(void **state) {
  (void)state;
  int64_t a[] = {3, 2}, b[] = {6, 4}, d[] = {2, 3};
  plan_ratios ra = {0, 2, a}, rb = {0, 2, b}, rd = {0, 2, d}, re = {1, 2, a};
  /* stored sets are reduced; b is the reduced form's multiple */
  assert_true(plan_ratios_same(&ra, &rb));
  assert_false(plan_ratios_same(&ra, &rd));
  assert_false(plan_ratios_same(&ra, &re)); /* another axis */
  assert_false(plan_ratios_same(&ra, NULL));
  assert_true(plan_ratios_same(NULL, NULL));
}

/* ---- plans with ratios --------------------------------------------------- */

static void test_plan_ratios(void **state) {
  (void)state;
  const char *text = HDR11 PROG MESH23 "placements:\n"
                                       "  x: \"S(0|6:4)R\"\n"
                                       "  w: {dp: {shard: 1, ratios: [3, 2]}, "
                                       "tp: \"S(0|1:1:2)\"}\n";
  plan_plan *p = load_ok(text);
  placement_is(p, "x", "S(0|3:2)R");
  placement_is(p, "w", "S(1|3:2)S(0|1:1:2)");
  /* the canonical YAML writes the reduced weights and reads back the same */
  char *out = NULL;
  size_t len = 0;
  assert_int_equal(plan_write_buffer(&out, &len, p, NULL), PLAN_OK);
  assert_non_null(strstr(out, "\"x\": \"S(0|3:2)R\""));
  assert_non_null(strstr(out, "w: \"S(1|3:2)S(0|1:1:2)\""));
  plan_plan *q = load_ok(out);
  placement_is(q, "w", "S(1|3:2)S(0|1:1:2)");
  plan_hash hp, hq;
  assert_int_equal(plan_hash_part(&hp, p, PLAN_PART_PLAN), PLAN_OK);
  assert_int_equal(plan_hash_part(&hq, q, PLAN_PART_PLAN), PLAN_OK);
  assert_memory_equal(&hp, &hq, sizeof hp);
  free(out);
  plan_free(q);
  /* other weights, another hash */
  const char *other = HDR11 PROG MESH23 "placements:\n"
                                        "  x: \"S(0|2:3)R\"\n"
                                        "  w: {dp: {shard: 1, ratios: [3, 2]}, "
                                        "tp: \"S(0|1:1:2)\"}\n";
  q = load_ok(other);
  assert_int_equal(plan_hash_part(&hq, q, PLAN_PART_PLAN), PLAN_OK);
  assert_memory_not_equal(&hp, &hq, sizeof hp);
  plan_free(q);
  plan_free(p);
}

static void test_plan_ratio_errors(void **state) {
  (void)state;
  /* a 1.0 file: a version error naming the field, at the placement */
  expect_fail(HDR10 PROG MESH23 "placements:\n  x: \"S(0|3:2)R\"\n",
              PLAN_EVERSION, 12, 6, "shard ratios");
  expect_fail(HDR10 PROG MESH23
              "placements:\n  x: {dp: {shard: 0, ratios: [3, 2]}}\n",
              PLAN_EVERSION, 12, 30, "ratios is a format 1.1 field");
  /* the weight count is the axis size; the column is the entry's */
  expect_fail(HDR11 PROG MESH23 "placements:\n  x: \"RS(0|3:2)\"\n",
              PLAN_EINVALID, 12, 8, "2 shard weights for mesh axis tp");
  expect_fail(HDR11 PROG MESH23
              "placements:\n  x: {dp: {shard: 0, ratios: [3, 2, 1]}}\n",
              PLAN_EINVALID, 12, 30, "3 shard weights for mesh axis dp");
  expect_fail(HDR11 PROG MESH23
              "placements:\n  x: {dp: {shard: 0, ratios: [3, 0]}}\n",
              PLAN_EINVALID, 12, 34, "shard weight 0 is out of range");
  expect_fail(HDR11 PROG MESH23 "placements:\n  x: {dp: {ratios: [3, 2]}}\n",
              PLAN_ESCHEMA, 12, 11, "needs 'shard'");
}

/* ---- diff of ratios ------------------------------------------------------ */

static size_t diff_count(const char *a, const char *b, const char **msg) {
  plan_plan *pa = load_ok(a), *pb = load_ok(b);
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, pa, pb), PLAN_OK);
  size_t n = plan_diags_count(d);
  static char first[1024];
  first[0] = 0;
  if (n)
    snprintf(first, sizeof first, "%s", plan_diags_get(d, 0)->message);
  *msg = first;
  plan_diags_free(d);
  plan_free(pa);
  plan_free(pb);
  return n;
}

/* diff compares the weights, never the plans' set numbers: the same sets
 * interned in another order diff equal; 3:1 against 1:3 differs, named
 * with the tensor, the axis and both weight lists. */
static void test_diff_ratios(void **state) {
  (void)state;
  /* x interns dp's set first, w tp's; in `swapped` w's tp set comes first */
  const char *a = HDR11 PROG MESH23 "placements:\n"
                                    "  x: \"S(0|3:1)R\"\n"
                                    "  w: \"RS(0|1:1:2)\"\n";
  const char *order = HDR11 PROG MESH23 "placements:\n"
                                        "  w: {tp: \"S(0|1:1:2)\"}\n"
                                        "  x: {dp: \"S(0|6:2)\"}\n";
  const char *msg;
  assert_int_equal(diff_count(a, order, &msg), 0);
  const char *flip = HDR11 PROG MESH23 "placements:\n"
                                       "  x: \"S(0|1:3)R\"\n"
                                       "  w: \"RS(0|1:1:2)\"\n";
  assert_int_equal(diff_count(a, flip, &msg), 1);
  assert_string_equal(msg, "placement of 'x': S(0|3:1)R -> S(0|1:3)R; shard "
                           "ratios of the placement over 'dp': 3:1 -> 1:3");
  /* even against ratios */
  const char *even = HDR11 PROG MESH23 "placements:\n"
                                       "  x: \"S(0)R\"\n"
                                       "  w: \"RS(0|1:1:2)\"\n";
  assert_int_equal(diff_count(a, even, &msg), 1);
  assert_non_null(strstr(msg, "over 'dp': 3:1 -> even"));
  /* a strategy: the op, the operand and both lists */
  const char *sa = HDR11 PROG MESH23
      "placements:\n  x: \"S(0|3:1)R\"\n  w: \"RS(1)\"\n"
      "strategies:\n  mm: {in: [\"S(0|3:1)R\", \"RS(1)\"], out: "
      "\"S(0|3:1)S(1)\"}\n";
  const char *sb = HDR11 PROG MESH23
      "placements:\n  w: \"RS(1)\"\n  x: \"S(0|3:1)R\"\n"
      "strategies:\n  mm: {in: [\"S(0|3:1)R\", \"RS(1)\"], out: "
      "\"S(0|1:3)S(1)\"}\n";
  assert_int_equal(diff_count(sa, sa, &msg), 0);
  assert_int_equal(diff_count(sa, sb, &msg), 1);
  assert_non_null(strstr(msg, "strategy of 'mm'"));
  assert_non_null(strstr(msg, "shard ratios of output over 'dp': 3:1 -> 1:3"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compact_ratios),
      cmocka_unit_test(test_ratio_errors),
      cmocka_unit_test(test_ratio_set_limit),
      cmocka_unit_test(test_ratio_sets_same),
      cmocka_unit_test(test_plan_ratios),
      cmocka_unit_test(test_plan_ratio_errors),
      cmocka_unit_test(test_diff_ratios),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
