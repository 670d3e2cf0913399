/* Format 1.1: shard ratios (compact S(d|w0:w1:...) and map form, interned
 * per plan, reduced by their gcd, validated, printed canonically), per-device
 * hardware profiles and the topology (read, written, hashed, each error
 * positioned), the version rule (1.1 fields refused in a 1.0 file; every
 * document written and hashed as the lowest version that holds it), the
 * upgrade of 1.0 and 1.1 files and the diff of two plans' weights; the
 * pipeline schedules a plan names from 1.1 on (looped-bfs, interleaved-zb,
 * zbv, dualpipev): read, placed, written and hashed as 1.1, refused in a
 * 1.0 file, their stage and microbatch counts validated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libplan/libplan.h"
#include "cost/cost_device.h"
#include "ir/ir.h"
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

/* ---- the version a plan is written and hashed as ------------------------ */

static char *write_text(const plan_plan *p) {
  char *out = NULL;
  size_t len = 0;
  assert_int_equal(plan_write_buffer(&out, &len, p, NULL), PLAN_OK);
  return out;
}

static plan_hash hash_of(const plan_plan *p, plan_part part) {
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, p, part), PLAN_OK);
  return h;
}

#define PLAIN PROG MESH23 "placements:\n  x: S(0)R\n"

static void test_lowest_version(void **state) {
  (void)state;
  /* a 1.0 file is written as it was, byte for byte, and hashes as 1.0 */
  plan_plan *p10 = load_ok(HDR10 PLAIN);
  char *t10 = write_text(p10);
  assert_non_null(strstr(t10, "libplan: \"1.0\"\n"));
  plan_plan *again = load_ok(t10);
  char *t10b = write_text(again);
  assert_string_equal(t10, t10b);
  /* a 1.1 file without a 1.1 field is 1.0 content: written and hashed as
   * the 1.0 file */
  plan_plan *p11 = load_ok(HDR11 PLAIN);
  char *t11 = write_text(p11);
  assert_string_equal(t11, t10);
  for (int k = 0; k < 3; k++) {
    plan_hash a = hash_of(p10, (plan_part)k), b = hash_of(p11, (plan_part)k);
    assert_true(plan_hash_equal(a, b));
  }
  /* ratios make the plan 1.1, and the version counts in its hash; the
   * mesh part holds the mesh alone, which ratios do not change */
  plan_plan *pr = load_ok(HDR11 PROG MESH23 "placements:\n  x: S(0|1:1)R\n");
  char *tr = write_text(pr);
  assert_non_null(strstr(tr, "libplan: \"1.1\"\n"));
  assert_false(plan_hash_equal(hash_of(pr, PLAN_PART_PLAN),
                               hash_of(p10, PLAN_PART_PLAN)));
  assert_true(plan_hash_equal(hash_of(pr, PLAN_PART_MESH),
                              hash_of(p10, PLAN_PART_MESH)));
  /* the program part is 1.0 content whatever the plan holds */
  assert_true(plan_hash_equal(hash_of(pr, PLAN_PART_PROGRAM),
                              hash_of(p10, PLAN_PART_PROGRAM)));
  /* a program file: 1.0 whatever it says (it has no 1.1 field), and a
   * field of a newer minor is a version error */
  plan_program *g10 = NULL, *g11 = NULL;
  const char *pg10 = HDR10 PROG, *pg11 = HDR11 PROG;
  assert_int_equal(plan_program_load_buffer(&g10, pg10, strlen(pg10), "g.yaml"),
                   PLAN_OK);
  assert_int_equal(plan_program_load_buffer(&g11, pg11, strlen(pg11), "g.yaml"),
                   PLAN_OK);
  plan_hash h10, h11;
  assert_int_equal(plan_program_hash(&h10, g10), PLAN_OK);
  assert_int_equal(plan_program_hash(&h11, g11), PLAN_OK);
  assert_true(plan_hash_equal(h10, h11));
  assert_true(plan_hash_equal(h10, hash_of(p10, PLAN_PART_PROGRAM)));
  char *w10 = NULL, *w11 = NULL;
  size_t wl;
  assert_int_equal(plan_program_write_buffer(&w10, &wl, g10), PLAN_OK);
  assert_int_equal(plan_program_write_buffer(&w11, &wl, g11), PLAN_OK);
  assert_string_equal(w10, w11);
  assert_non_null(strstr(w11, "libplan: \"1.0\"\n"));
  free(w10);
  free(w11);
  plan_program_free(g10);
  plan_program_free(g11);
  const char *pg12 = "libplan: \"1.2\"\n" PROG "  layout: nchw\n";
  plan_program *g12 = NULL;
  assert_int_equal(plan_program_load_buffer(&g12, pg12, strlen(pg12), "g.yaml"),
                   PLAN_EVERSION);
  assert_non_null(strstr(plan_error_last()->message, "unknown field 'layout'"));
  free(t10);
  free(t10b);
  free(t11);
  free(tr);
  plan_free(again);
  plan_free(p10);
  plan_free(p11);
  plan_free(pr);
}

/* ---- the pipeline schedules named from 1.1 on ---------------------------- */

/* Lines 2..9: four ops, one per stage. */
#define PROG4                                                                  \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "  ops:\n"                                                                   \
  "    - {name: l0, op: relu, in: [x], out: a0}\n"                             \
  "    - {name: l1, op: tanh, in: [a0], out: a1}\n"                            \
  "    - {name: l2, op: relu, in: [a1], out: a2}\n"                            \
  "    - {name: l3, op: tanh, in: [a2], out: a3}\n"
/* Lines 10..11. */
#define MESHPP "mesh:\n  axes: [pp=2]\n"
/* Line 12 is "pipeline:"; its schedule on line 15. */
#define PIPE(sched, m, stages)                                                 \
  "pipeline:\n"                                                                \
  "  axis: pp\n"                                                               \
  "  microbatches: " m "\n"                                                    \
  "  schedule: " sched "\n"                                                    \
  "  stages:\n" stages STRATS
#define STRATS "strategies:\n  \"l*\": {in: [R], out: R}\n"
#define STAGES4                                                                \
  "    - {ops: [l0]}\n"                                                        \
  "    - {ops: [l1]}\n"                                                        \
  "    - {ops: [l2]}\n"                                                        \
  "    - {ops: [l3]}\n"
#define STAGES2 "    - {ops: [l0, l1]}\n    - {ops: [l2, l3]}\n"

/* The findings of validating `text`: how many errors, and whether one has
 * `code` at line:col with `words` in its message. */
static size_t validate_errors(const char *text, const char *code, int line,
                              int col, const char *words, bool *found) {
  plan_plan *p = load_ok(text);
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  size_t n = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  *found = false;
  for (size_t i = 0; code && i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (!strcmp(g->code, code) && g->line == line && g->column == col &&
        strstr(g->message, words))
      *found = true;
  }
  if (code && !*found)
    for (size_t i = 0; i < plan_diags_count(d); i++)
      print_message("%s %d:%d %s\n", plan_diags_get(d, i)->code,
                    plan_diags_get(d, i)->line, plan_diags_get(d, i)->column,
                    plan_diags_get(d, i)->message);
  plan_diags_free(d);
  plan_free(p);
  return n;
}

static void test_schedule_names(void **state) {
  (void)state;
  /* each name reads in a 1.1 file, validates, is written as 1.1 and
   * round-trips; the stage placement follows from the name */
  static const struct {
    const char *text, *name;
    int kind;
    int rank[4]; /* of stages 0..3 on 2 ranks */
  } ok[] = {
      {HDR11 PROG4 MESHPP PIPE("looped-bfs", "4", STAGES4),
       "looped-bfs",
       PLAN_SCHED_LOOPED_BFS,
       {0, 1, 0, 1}},
      {HDR11 PROG4 MESHPP PIPE("interleaved-zb", "4", STAGES4),
       "interleaved-zb",
       PLAN_SCHED_INTERLEAVED_ZB,
       {0, 1, 0, 1}},
      {HDR11 PROG4 MESHPP PIPE("zbv", "2", STAGES4),
       "zbv",
       PLAN_SCHED_ZBV,
       {0, 1, 1, 0}},
      {HDR11 PROG4 MESHPP PIPE("dualpipev", "4", STAGES4),
       "dualpipev",
       PLAN_SCHED_DUALPIPEV,
       {0, 1, 1, 0}},
  };
  plan_plan *base = load_ok(HDR11 PROG4 MESHPP PIPE("1f1b", "4", STAGES2));
  char *tb = write_text(base);
  assert_non_null(strstr(tb, "libplan: \"1.0\"\n")); /* 1f1b: 1.0 content */
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
    bool found;
    assert_int_equal(validate_errors(ok[k].text, NULL, 0, 0, NULL, &found), 0);
    plan_plan *p = load_ok(ok[k].text);
    assert_int_equal(p->pipeline.schedule, ok[k].kind);
    char *t = write_text(p);
    assert_non_null(strstr(t, "libplan: \"1.1\"\n"));
    char want[64];
    snprintf(want, sizeof want, "schedule: %s\n", ok[k].name);
    assert_non_null(strstr(t, want));
    plan_plan *q = load_ok(t);
    char *t2 = write_text(q);
    assert_string_equal(t, t2);
    assert_true(plan_hash_equal(hash_of(p, PLAN_PART_PLAN),
                                hash_of(q, PLAN_PART_PLAN)));
    /* the name and the version count in the plan's hash */
    assert_false(plan_hash_equal(hash_of(p, PLAN_PART_PLAN),
                                 hash_of(base, PLAN_PART_PLAN)));
    plan_schedule *sc = NULL;
    assert_int_equal(plan_schedule_from_plan(&sc, p), PLAN_OK);
    assert_int_equal(plan_schedule_kind_of(sc), ok[k].kind);
    assert_int_equal(plan_schedule_ranks(sc), 2);
    for (int st = 0; st < 4; st++)
      assert_int_equal(plan_schedule_stage_rank(sc, st), ok[k].rank[st]);
    plan_diags *sd = NULL;
    assert_int_equal(plan_schedule_simulate(&sd, sc, NULL), PLAN_OK);
    assert_int_equal(plan_diags_count_at_least(sd, PLAN_SEV_ERROR), 0);
    plan_diags_free(sd);
    plan_schedule_result res;
    assert_int_equal(plan_schedule_result_get(&res, sc), PLAN_OK);
    assert_true(res.simulated && !res.deadlock);
    plan_schedule_free(sc);
    free(t);
    free(t2);
    plan_free(q);
    plan_free(p);
  }
  free(tb);
  plan_free(base);

  /* a 1.0 file naming one: a version error at the name */
  expect_fail(HDR10 PROG4 MESHPP PIPE("zbv", "2", STAGES4), PLAN_EVERSION, 15,
              13, "schedule: zbv is a format 1.1 field");
  expect_fail(HDR10 PROG4 MESHPP PIPE("looped-bfs", "4", STAGES4),
              PLAN_EVERSION, 15, 13, "write 'libplan: \"1.1\"'");
  /* ... and the 1.0 names still read there */
  plan_plan *p10 = load_ok(HDR10 PROG4 MESHPP PIPE("zb-h1", "4", STAGES2));
  assert_int_equal(p10->pipeline.schedule, PLAN_SCHED_ZB_H1);
  plan_free(p10);
  /* an unknown name lists the 1.1 ones */
  expect_fail(HDR11 PROG4 MESHPP PIPE("zb-v", "2", STAGES4), PLAN_ESCHEMA, 15,
              13, "zbv");

  /* the stage counts each needs, at the pipeline (its map: 13:3) */
  bool found;
  assert_int_equal(validate_errors(HDR11 PROG4 MESHPP PIPE("zbv", "2", STAGES2),
                                   "pipeline.stages", 13, 3,
                                   "zbv runs two stages per pipeline rank",
                                   &found),
                   1);
  assert_true(found);
  validate_errors(HDR11 PROG4 MESHPP PIPE("dualpipev", "4", STAGES2),
                  "pipeline.stages", 13, 3, "twice the axis size", &found);
  assert_true(found);
  validate_errors(HDR11 PROG4 MESHPP PIPE("interleaved-zb", "4", STAGES2),
                  "pipeline.stages", 13, 3,
                  "interleaved-zb needs a multiple (>= 2)", &found);
  assert_true(found);
  validate_errors(
      HDR11 PROG4 "mesh:\n  axes: [pp=3]\n" PIPE("looped-bfs", "4", STAGES4),
      "pipeline.stages", 13, 3, "a multiple of the axis size", &found);
  assert_true(found);
  /* what they need of the microbatches */
  validate_errors(HDR11 PROG4 MESHPP PIPE("dualpipev", "2", STAGES4),
                  "pipeline.microbatches", 13, 3,
                  "at least as many microbatches as stages (4)", &found);
  assert_true(found);
  validate_errors(HDR11
                  "program:\n  tensors:\n    x: {shape: [10, 16]}\n"
                  "  ops:\n"
                  "    - {name: l0, op: relu, in: [x], out: a0}\n"
                  "    - {name: l1, op: tanh, in: [a0], out: a1}\n"
                  "    - {name: l2, op: relu, in: [a1], out: a2}\n"
                  "    - {name: l3, op: tanh, in: [a2], out: a3}\n" MESHPP PIPE(
                      "interleaved-zb", "5", STAGES4),
                  "pipeline.microbatches", 13, 3, "rounds of 2", &found);
  assert_true(found);
  /* a V needs a pipeline axis: stages on submeshes run one per rank */
  validate_errors(HDR11 PROG4
                  "mesh:\n  axes: [pp=4]\n  submeshes: {a: {pp: 0}, b: {pp: "
                  "1}, c: {pp: 2}, d: {pp: 3}}\n"
                  "pipeline:\n  schedule: zbv\n  microbatches: 2\n  stages:\n"
                  "    - {ops: [l0], submesh: a}\n"
                  "    - {ops: [l1], submesh: b}\n"
                  "    - {ops: [l2], submesh: c}\n"
                  "    - {ops: [l3], submesh: d}\n" STRATS,
                  "pipeline.stages", 14, 3, "needs a pipeline 'axis'", &found);
  assert_true(found);
}

/* ---- per-device hardware and the topology --------------------------------
 */

/* Lines 9..: a 2x4 mesh of four H100s and four A100-like devices. */
#define HETERO                                                                 \
  "mesh:\n"                                                                    \
  "  axes: [dp=2, tp=4]\n"                                                     \
  "  hardware:\n"                                                              \
  "    profiles:\n"                                                            \
  "      fast: h100-sxm\n"                                                     \
  "      slow: {name: a100, flops: {bf16: 312e12}, memory: 80e9, "             \
  "links: {tp: {bandwidth: 1e9, latency: 1e-6}}}\n"                            \
  "    devices: [fast, fast, fast, fast, slow, slow, slow, slow]\n"

#define LEVELS                                                                 \
  "  topology:\n"                                                              \
  "    levels: [{name: nvlink, size: 4, bandwidth: 450e9, latency: 2e-6},\n"   \
  "             {name: ib, size: 2, bandwidth: 50e9, latency: 5e-6}]\n"

#define TORUS                                                                  \
  "  topology:\n"                                                              \
  "    torus: {dims: [2, 4], wrap: [false, true], bandwidth: 45e9, "           \
  "latency: 1e-6}\n"

static void round_trips(const char *text, plan_plan **out) {
  plan_plan *p = load_ok(text);
  char *t = write_text(p);
  plan_plan *q = load_ok(t);
  char *t2 = write_text(q);
  assert_string_equal(t, t2); /* the canonical layout is a fixed point */
  for (int k = 0; k < 3; k++)
    assert_true(
        plan_hash_equal(hash_of(p, (plan_part)k), hash_of(q, (plan_part)k)));
  free(t);
  free(t2);
  plan_free(q);
  *out = p;
}

static void test_profiles(void **state) {
  (void)state;
  plan_plan *p;
  round_trips(HDR11 PROG HETERO, &p);
  const plan_mesh *m = &p->mesh;
  assert_null(m->hardware);
  assert_int_equal(m->nprofiles, 2);
  assert_string_equal(m->profiles[0].label, "fast");
  assert_string_equal(m->profiles[0].name, "h100-sxm");
  assert_string_equal(m->profiles[1].name, "a100");
  assert_true(m->profiles[1].flops[PLAN_BF16] == 312e12);
  assert_true(m->profiles[1].memory == 80e9);
  assert_true(m->profiles[1].axis_link[1].bandwidth == 1e9);
  for (int d = 0; d < 8; d++)
    assert_int_equal(m->device_profile[d], d < 4 ? 0 : 1);
  assert_string_equal(plan_mesh_device_hardware(p, 5), "a100");
  char *t = write_text(p);
  assert_non_null(strstr(t, "libplan: \"1.1\"\n"));
  assert_non_null(strstr(t, "      fast: h100-sxm\n"));
  assert_non_null(strstr(t, "    devices: [fast, fast, fast, fast, slow, slow, "
                            "slow, slow]\n"));
  free(t);
  /* the cost model takes each device's profile */
  plan_cost_model *cm = NULL;
  assert_int_equal(plan_cost_model_new(&cm, p, NULL), PLAN_OK);
  assert_true(plan_cost_model_hetero(cm));
  plan_cost_model_free(cm);
  /* labels are names, not content: renamed, the same hash; one device
   * moved to the other profile, another */
  plan_plan *q = load_ok(
      HDR11 PROG "mesh:\n  axes: [dp=2, tp=4]\n  hardware:\n    profiles:\n"
                 "      b: {name: a100, flops: {bf16: 312e12}, memory: 80e9, "
                 "links: {tp: {bandwidth: 1e9, latency: 1e-6}}}\n"
                 "      a: h100-sxm\n      unused: l4\n"
                 "    devices: [a, a, a, a, b, b, b, b]\n");
  assert_true(
      plan_hash_equal(hash_of(p, PLAN_PART_MESH), hash_of(q, PLAN_PART_MESH)));
  plan_free(q);
  q = load_ok(HDR11 PROG "mesh:\n  axes: [dp=2, tp=4]\n  hardware:\n"
                         "    profiles: {fast: h100-sxm, slow: {name: a100, "
                         "flops: {bf16: 312e12}, memory: 80e9, links: {tp: "
                         "{bandwidth: 1e9, latency: 1e-6}}}}\n"
                         "    devices: [fast, fast, fast, slow, slow, slow, "
                         "slow, slow]\n");
  assert_false(
      plan_hash_equal(hash_of(p, PLAN_PART_MESH), hash_of(q, PLAN_PART_MESH)));
  /* the diff names the change */
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, p, q), PLAN_OK);
  bool found = false;
  for (size_t i = 0; i < plan_diags_count(d); i++)
    found |= !strcmp(plan_diags_get(d, i)->code, "diff.hardware");
  assert_true(found);
  plan_diags_free(d);
  plan_free(q);
  plan_free(p);
}

static void test_topology(void **state) {
  (void)state;
  plan_plan *p;
  round_trips(HDR11 PROG "mesh:\n  axes: [dp=2, tp=4]\n" LEVELS, &p);
  const plan_topology *t = p->mesh.topology;
  assert_non_null(t);
  assert_int_equal(t->kind, PLAN_TOPO_LEVELS);
  assert_int_equal(t->nlevels, 2);
  assert_string_equal(t->levels[0].name, "nvlink");
  assert_int_equal(t->levels[0].size, 4);
  assert_int_equal(t->levels[1].size, 2);
  assert_true(t->levels[1].link.bandwidth == 50e9);
  assert_true(t->levels[0].link.latency == 2e-6);
  char *s = write_text(p);
  assert_non_null(strstr(s, "      - {name: nvlink, size: 4, bandwidth: "
                            "4.5e+11, latency: 2e-06}\n"));
  free(s);
  plan_plan *q;
  round_trips(HDR11 PROG "mesh:\n  axes: [dp=2, tp=4]\n" TORUS, &q);
  t = q->mesh.topology;
  assert_int_equal(t->kind, PLAN_TOPO_TORUS);
  assert_int_equal(t->ndims, 2);
  assert_int_equal(t->dims[1], 4);
  assert_false(t->wrap[0]);
  assert_true(t->wrap[1]);
  assert_true(t->link.bandwidth == 45e9);
  s = write_text(q);
  assert_non_null(strstr(s, "    torus: {dims: [2, 4], wrap: [false, true], "
                            "bandwidth: 4.5e+10, latency: 1e-06}\n"));
  free(s);
  assert_false(
      plan_hash_equal(hash_of(p, PLAN_PART_MESH), hash_of(q, PLAN_PART_MESH)));
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, p, q), PLAN_OK);
  bool found = false;
  for (size_t i = 0; i < plan_diags_count(d); i++)
    found |= !strcmp(plan_diags_get(d, i)->code, "diff.topology") &&
             strstr(plan_diags_get(d, i)->message, "kind");
  assert_true(found);
  plan_diags_free(d);
  /* wrap defaults to true; another latency is another hash */
  plan_plan *r =
      load_ok(HDR11 PROG "mesh:\n  axes: [dp=2, tp=4]\n  topology:\n"
                         "    torus: {dims: [2, 4], bandwidth: 45e9, "
                         "latency: 2e-6}\n");
  assert_true(r->mesh.topology->wrap[0]);
  assert_false(
      plan_hash_equal(hash_of(r, PLAN_PART_MESH), hash_of(q, PLAN_PART_MESH)));
  plan_free(r);
  plan_free(q);
  plan_free(p);
}

#define AX24 "mesh:\n  axes: [dp=2, tp=4]\n"

static void test_hetero_errors(void **state) {
  (void)state;
  /* 1.1 fields in a 1.0 file: version errors at the key */
  expect_fail(HDR10 PROG HETERO, PLAN_EVERSION, 12, 5,
              "mesh.hardware.profiles is a format 1.1 field");
  expect_fail(HDR10 PROG AX24 LEVELS, PLAN_EVERSION, 11, 3,
              "mesh.topology is a format 1.1 field");
  /* profiles */
  expect_fail(HDR11 PROG AX24 "  hardware:\n    profiles: {fast: h100-smx}\n"
                              "    devices: [fast]\n",
              PLAN_EINVALID, 12, 22, "did you mean 'h100-sxm'");
  expect_fail(HDR11 PROG AX24 "  hardware:\n    profiles: {fast: h100}\n"
                              "    devices: [fast, fast]\n",
              PLAN_EINVALID, 13, 14, "lists 2 labels but the mesh has 8");
  expect_fail(HDR11 PROG AX24
              "  hardware:\n    profiles: {fast: h100, slow: l4}\n"
              "    devices: [fast, fast, fast, fast, slow, slow, slwo, slow]\n",
              PLAN_EINVALID, 13, 51, "no hardware profile 'slwo'");
  expect_fail(HDR11 PROG AX24 "  hardware:\n    profiles: {fast: h100}\n",
              PLAN_ESCHEMA, 12, 5, "needs 'devices");
  expect_fail(HDR11 PROG AX24 "  hardware:\n    name: h100\n"
                              "    profiles: {fast: h100}\n"
                              "    devices: [fast]\n",
              PLAN_ESCHEMA, 12, 5, "'name' does not go with per-device");
  expect_fail(HDR11 PROG AX24
              "  hardware:\n    profiles: {fast: {name: x, memory: -1}}\n"
              "    devices: [fast, fast, fast, fast, fast, fast, fast, fast]\n",
              PLAN_EINVALID, 12, 22, "hardware figures must be >= 0");
  expect_fail(HDR11 PROG AX24
              "  hardware:\n    profiles: {fast: {name: x, memory: .nan}}\n"
              "    devices: [fast, fast, fast, fast, fast, fast, fast, fast]\n",
              PLAN_ESCHEMA, 12, 40, "not NaN");
  /* topology */
  expect_fail(HDR11 PROG AX24
              "  topology:\n    levels: [{size: 4}, {size: 4}]\n",
              PLAN_EINVALID, 12, 13, "hold 16 devices");
  expect_fail(HDR11 PROG AX24 "  topology:\n    torus: {dims: [4, 4]}\n",
              PLAN_EINVALID, 12, 19, "torus dims hold 16 devices");
  expect_fail(HDR11 PROG AX24 "  topology:\n    torus: {dims: [8], "
                              "bandwidth: -5}\n",
              PLAN_EINVALID, 12, 35, "bandwidth must be >= 0");
  expect_fail(HDR11 PROG AX24 "  topology:\n    levels: [{size: 8, latency: "
                              ".inf}]\n",
              PLAN_ESCHEMA, 12, 33, "must be finite");
  expect_fail(HDR11 PROG AX24 "  topology:\n    levels: [{size: 8}]\n"
                              "    torus: {dims: [8]}\n",
              PLAN_ESCHEMA, 13, 5, "not both");
  expect_fail(HDR11 PROG AX24
              "  topology:\n    torus: {dims: [8], wrap: [true, "
              "true]}\n",
              PLAN_EINVALID, 12, 30, "2 entries for 1 dims");
}

/* ---- upgrade and diff ---------------------------------------------------- */

static void test_upgrade_versions(void **state) {
  (void)state;
  /* 1.0 and 1.1 files are current: nothing to do */
  const char *docs[] = {HDR10 PLAIN, HDR11 PLAIN, HDR11 PROG HETERO LEVELS};
  for (int i = 0; i < 3; i++) {
    char *out = NULL;
    size_t len = 0;
    plan_upgrade_info info;
    assert_int_equal(plan_upgrade_buffer(&out, &len, &info, docs[i],
                                         strlen(docs[i]), "t.yaml", NULL),
                     PLAN_OK);
    assert_int_equal(info.upgraded, 0);
    assert_int_equal(info.from_major, 1);
    assert_int_equal(info.from_minor, i == 0 ? 0 : 1);
    assert_null(out);
  }
  /* 0.1 becomes 1.0, the lowest version that holds it */
  const char *old = "libplan: \"0.1\"\n" PLAIN;
  char *out = NULL;
  size_t len = 0;
  plan_upgrade_info info;
  assert_int_equal(
      plan_upgrade_buffer(&out, &len, &info, old, strlen(old), "t.yaml", NULL),
      PLAN_OK);
  assert_int_equal(info.upgraded, 1);
  assert_non_null(strstr(out, "libplan: \"1.0\"\n"));
  free(out);
}

static void test_diff_ratio_weights(void **state) {
  (void)state;
  /* both plans name their only set #1: the weights differ all the same */
  plan_plan *a = load_ok(HDR11 PROG MESH23 "placements:\n  x: S(0|3:1)R\n"
                                           "strategies:\n"
                                           "  act: {in: [S(0|3:1)R], out: "
                                           "S(0|3:1)R}\n");
  plan_plan *b = load_ok(HDR11 PROG MESH23 "placements:\n  x: S(0|1:1)R\n"
                                           "strategies:\n"
                                           "  act: {in: [S(0|1:1)R], out: "
                                           "S(0)R}\n");
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, a, b), PLAN_OK);
  int seen = 0;
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (!strcmp(g->code, "diff.placement")) {
      assert_non_null(strstr(g->message, "placement of 'x': S(0|3:1)R -> "
                                         "S(0|1:1)R"));
      assert_non_null(strstr(g->message, "over 'dp': 3:1 -> 1:1"));
      seen++;
    }
    if (!strcmp(g->code, "diff.strategy")) {
      assert_non_null(strstr(g->message, "'act'"));
      assert_non_null(strstr(g->message, "over 'dp': 3:1 -> 1:1"));
      assert_non_null(strstr(g->message, "over 'dp': 3:1 -> even"));
      seen++;
    }
  }
  assert_int_equal(seen, 2);
  plan_diags_free(d);
  /* the same weights: no difference */
  assert_int_equal(plan_diff(&d, a, a), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  plan_free(a);
  plan_free(b);
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
      cmocka_unit_test(test_lowest_version),
      cmocka_unit_test(test_schedule_names),
      cmocka_unit_test(test_profiles),
      cmocka_unit_test(test_topology),
      cmocka_unit_test(test_hetero_errors),
      cmocka_unit_test(test_upgrade_versions),
      cmocka_unit_test(test_diff_ratio_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
