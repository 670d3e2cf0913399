/* Unit tests for static validation (validate.c), drift reports and semantic
 * diffs (diff.c). Every finding code comes from a minimal plan and is checked
 * for its severity, the op or tensor it names, and its file and line (found
 * by looking up a marker in the text, so the texts stay readable); a valid
 * plan has no errors. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libplan/libplan.h"

/* ---- helpers ------------------------------------------------------------- */

#define HDR "libplan: \"" PLAN_FORMAT_STRING "\"\n"
#define PROG                                                                   \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "    w: {shape: [16, 4], role: param}\n"                                     \
  "  ops:\n"                                                                   \
  "    - {name: mm, op: matmul, in: [x, w], out: y}\n"                         \
  "    - {name: act, op: relu, in: [y], out: z}\n"
#define MESH22 "mesh:\n  axes: [dp=2, tp=2]\n"
#define GOOD_STRATEGIES                                                        \
  "strategies:\n"                                                              \
  "  mm: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"                                \
  "  act: {in: [S(0)S(1)], out: S(0)S(1)}\n"

/* 1-based line of the first occurrence of `needle` in `text`. */
static int line_of(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  if (!at)
    print_message("'%s' is not in the text\n", needle);
  assert_non_null(at);
  int line = 1;
  for (const char *s = text; s < at; s++)
    line += *s == '\n';
  return line;
}

/* 1-based column of `needle` (its first occurrence). */
static int col_of(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  assert_non_null(at);
  const char *bol = at;
  while (bol > text && bol[-1] != '\n')
    bol--;
  return (int)(at - bol) + 1;
}

static plan_plan *load(const char *text) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL);
  if (rc) {
    char buf[1200];
    print_message("load failed: %s\nfor:\n%s\n",
                  plan_error_format(buf, sizeof buf), text);
  }
  assert_int_equal(rc, PLAN_OK);
  return p;
}

static void dump(const plan_diags *d) {
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    print_message("  %s:%d:%d: [%s] %s (%s) sev %d\n", g->file, g->line,
                  g->column, g->code, g->message, g->object, (int)g->severity);
  }
}

static plan_diags *validate(const char *text) {
  plan_plan *p = load(text);
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  assert_non_null(d);
  plan_free(p);
  return d;
}

static size_t count_code(const plan_diags *d, const char *code) {
  size_t n = 0;
  for (size_t i = 0; i < plan_diags_count(d); i++)
    n += !strcmp(plan_diags_get(d, i)->code, code);
  return n;
}

/* The finding with `code` about `object` (NULL: any object). */
static const plan_diag *find(const plan_diags *d, const char *code,
                             const char *object) {
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (!strcmp(g->code, code) && (!object || !strcmp(g->object, object)))
      return g;
  }
  print_message("no finding %s about '%s'; the findings are:\n", code,
                object ? object : "*");
  dump(d);
  fail();
  return NULL;
}

/* Checks one finding: code, severity, object, file, line (unless -1) and
 * column (when > 0), and words of its message. */
static const plan_diag *expect(const plan_diags *d, const char *code,
                               plan_severity sev, const char *object,
                               const char *file, int line, int col,
                               const char *words) {
  const plan_diag *g = find(d, code, object);
  if ((int)g->severity != (int)sev || (line >= 0 && g->line != line) ||
      (col > 0 && g->column != col) || strcmp(g->file, file) ||
      (words && !strstr(g->message, words))) {
    print_message("finding %s about '%s':\n", code, object ? object : "*");
    dump(d);
  }
  assert_int_equal(g->severity, sev);
  assert_string_equal(g->file, file);
  if (line >= 0)
    assert_int_equal(g->line, line);
  if (col > 0)
    assert_int_equal(g->column, col);
  if (words)
    assert_non_null(strstr(g->message, words));
  return g;
}

static void assert_no_errors(const plan_diags *d) {
  if (plan_diags_count_at_least(d, PLAN_SEV_ERROR))
    dump(d);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 0);
}

static void assert_clean(const plan_diags *d) {
  if (plan_diags_count(d))
    dump(d);
  assert_int_equal(plan_diags_count(d), 0);
}

/* ---- valid plans ----------------------------------------------------------
 */

static void test_valid(void **state) {
  (void)state;
  plan_diags *d = validate(HDR PROG MESH22 GOOD_STRATEGIES);
  assert_clean(d);
  plan_diags_free(d);

  /* every example validates without errors */
  glob_t g;
  assert_int_equal(glob("examples/*.yaml", 0, NULL, &g), 0);
  assert_true(g.gl_pathc >= 1);
  for (size_t i = 0; i < g.gl_pathc; i++) {
    plan_plan *p = NULL;
    assert_int_equal(plan_load(&p, g.gl_pathv[i]), PLAN_OK);
    assert_int_equal(plan_validate(&d, p), PLAN_OK);
    if (plan_diags_count_at_least(d, PLAN_SEV_ERROR))
      print_message("%s:\n", g.gl_pathv[i]);
    assert_no_errors(d);
    plan_diags_free(d);
    plan_free(p);
  }
  globfree(&g);

  /* a program-only document has nothing to judge */
  d = validate(HDR PROG);
  assert_clean(d);
  plan_diags_free(d);
  assert_int_equal(plan_validate(&d, NULL), PLAN_EUSAGE);
  assert_null(d);
}

/* ---- strategies -------------------------------------------------------------
 */

static void test_strategy_findings(void **state) {
  (void)state;
  /* strategy.missing: at the op, in the program's file */
  const char *t = HDR PROG MESH22
      "strategies:\n  mm: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n";
  plan_diags *d = validate(t);
  expect(d, "strategy.missing", PLAN_SEV_ERROR, "act", "t.yaml",
         line_of(t, "{name: act"), col_of(t, "{name: act"), "no strategy");
  assert_int_equal(count_code(d, "strategy.missing"), 1);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);

  /* strategy.partial: relu consuming a partial sum */
  t = HDR PROG MESH22 "strategies:\n"
                      "  mm: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}\n"
                      "  act: {in: [S(0)P(sum)], out: S(0)R}\n";
  d = validate(t);
  const plan_diag *g = expect(d, "strategy.partial", PLAN_SEV_ERROR, "act",
                              "t.yaml", line_of(t, "  act:"), 0, "relu");
  assert_non_null(strstr(g->message, "S(0)P(sum)"));
  assert_non_null(strstr(g->message, "'y'"));
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);
  /* P(max) too, and exp, softmax, gelu are not linear either */
  static const char *const nonlinear[] = {"exp", "gelu", "tanh", "silu",
                                          "softmax"};
  for (size_t i = 0; i < sizeof nonlinear / sizeof *nonlinear; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             HDR "program:\n  tensors: {x: {shape: [8, 16]}}\n"
                 "  ops: [{name: f, op: %s, in: x, out: y}]\n" MESH22
                 "strategies:\n  f: {in: [RP(max)], out: RR}\n",
             nonlinear[i]);
    d = validate(text);
    expect(d, "strategy.partial", PLAN_SEV_ERROR, "f", "t.yaml",
           line_of(text, "  f: {"), 3, nonlinear[i]);
    plan_diags_free(d);
  }

  /* strategy.illegal: the reason names the op and its kind */
  t = HDR PROG MESH22 "strategies:\n"
                      "  mm: {in: [S(0)R, RS(1)], out: S(0)R}\n"
                      "  act: {in: [S(0)R], out: S(0)R}\n";
  d = validate(t);
  g = expect(d, "strategy.illegal", PLAN_SEV_ERROR, "mm", "t.yaml",
             line_of(t, "  mm:"), 3, "op 'mm' (matmul)");
  assert_non_null(strstr(g->message, "S(0)S(1)"));
  assert_int_equal(count_code(d, "strategy.illegal"), 1);
  plan_diags_free(d);
  /* sharding the contracted dim on one input only */
  t = HDR PROG MESH22 "strategies:\n"
                      "  mm: {in: [RS(1), RR], out: RP(sum)}\n"
                      "  act: {in: [RR], out: RR}\n";
  d = validate(t);
  expect(d, "strategy.illegal", PLAN_SEV_ERROR, "mm", "t.yaml",
         line_of(t, "  mm:"), 0, "matmul");
  plan_diags_free(d);
  /* softmax over a sharded dim */
  t = HDR "program:\n  tensors: {x: {shape: [8, 16]}}\n"
          "  ops: [{name: sm, op: softmax, in: x, out: y}]\n" MESH22
          "strategies:\n  sm: {in: [RS(1)], out: RS(1)}\n";
  d = validate(t);
  expect(d, "strategy.illegal", PLAN_SEV_ERROR, "sm", "t.yaml",
         line_of(t, "  sm: {"), 3, "softmax: dim 1 must be replicated");
  plan_diags_free(d);

  /* shard.empty: a dim of 1 split two ways (a warning), for a placement
   * and for an op output */
  t = HDR "program:\n  tensors: {x: {shape: [1, 16]}}\n"
          "  ops: [{name: f, op: relu, in: x, out: y}]\n" MESH22
          "placements:\n  x: S(0)R\n"
          "strategies:\n  f: {in: [S(0)R], out: S(0)R}\n";
  d = validate(t);
  expect(d, "shard.empty", PLAN_SEV_WARNING, "x", "t.yaml",
         line_of(t, "  x: S(0)R"), 3, "split 2 ways");
  expect(d, "shard.empty", PLAN_SEV_WARNING, "f", "t.yaml",
         line_of(t, "  f: {"), 3, NULL);
  assert_no_errors(d);
  plan_diags_free(d);
  /* nested: 4 rows over dp x tp both splitting dim 0 is fine, 3 is not */
  t = HDR "program:\n  tensors: {x: {shape: [3, 16]}}\n"
          "  ops: [{name: f, op: relu, in: x, out: y}]\n" MESH22
          "placements:\n  x: S(0)S(0)\n"
          "strategies:\n  f: {in: [RR], out: RR}\n";
  d = validate(t);
  expect(d, "shard.empty", PLAN_SEV_WARNING, "x", "t.yaml",
         line_of(t, "  x: S(0)S(0)"), 3, "split 4 ways");
  plan_diags_free(d);
}

/* ---- mesh, names, tensors
 * ---------------------------------------------------- */

static void test_mesh_and_names(void **state) {
  (void)state;
  const char *t = HDR PROG
      "mesh:\n  axes: [dp=2, tp=2]\n  devices: [0, 3, 3, 1]\n" GOOD_STRATEGIES;
  plan_diags *d = validate(t);
  expect(d, "mesh.devices", PLAN_SEV_ERROR, "mesh", "t.yaml",
         line_of(t, "devices:"), col_of(t, "[0, 3"), "device 3 appears twice");
  assert_int_equal(plan_diags_count(d), 1);
  plan_diags_free(d);
  /* a permutation is fine */
  d = validate(
      HDR PROG
      "mesh:\n  axes: [dp=2, tp=2]\n  devices: [3, 0, 2, 1]\n" GOOD_STRATEGIES);
  assert_clean(d);
  plan_diags_free(d);

  /* name.unknown (error) for exact names, name.unmatched (warning) for
   * globs, in every section that names ops or tensors */
  t = HDR PROG MESH22
      "placements:\n  ghost: RR\n"
      "strategies:\n"
      "  mm: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"
      "  act: {in: [S(0)S(1)], out: S(0)S(1)}\n"
      "  vanished: {in: [RR], out: RR}\n"
      "  \"layer.*\": {in: [RR], out: RR}\n"
      "outputs:\n  nowhere: RR\n"
      "regions:\n  - {name: r, kind: pinned, ops: [gone, \"g*\"]}\n";
  d = validate(t);
  expect(d, "name.unknown", PLAN_SEV_ERROR, "ghost", "t.yaml",
         line_of(t, "ghost"), 3, "placements");
  expect(d, "name.unknown", PLAN_SEV_ERROR, "vanished", "t.yaml",
         line_of(t, "vanished"), 3, "no op 'vanished'");
  expect(d, "name.unmatched", PLAN_SEV_WARNING, "layer.*", "t.yaml",
         line_of(t, "\"layer.*\""), 3, "matches no op");
  expect(d, "name.unknown", PLAN_SEV_ERROR, "nowhere", "t.yaml",
         line_of(t, "nowhere"), 3, "outputs");
  expect(d, "name.unknown", PLAN_SEV_ERROR, "gone", "t.yaml",
         line_of(t, "gone"), col_of(t, "gone"), "regions");
  expect(d, "name.unmatched", PLAN_SEV_WARNING, "g*", "t.yaml",
         line_of(t, "\"g*\""), 0, NULL);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 4);
  plan_diags_free(d);

  /* tensor.range: an integer input without a range (warning, at the
   * declaration) */
  t = HDR "program:\n"
          "  tensors:\n"
          "    ids: {shape: [4], dtype: i32}\n"
          "    ok: {shape: [4], dtype: i64, range: [0, 9]}\n"
          "    emb: {shape: [9, 2], role: param}\n"
          "  ops:\n"
          "    - {name: e, op: embedding, in: [emb, ids], out: h}\n"
          "    - {name: e2, op: embedding, in: [emb, ok], out: h2}\n" MESH22
          "strategies: {\"*\": {in: [RR, RR], out: RR}}\n";
  d = validate(t);
  expect(d, "tensor.range", PLAN_SEV_WARNING, "ids", "t.yaml",
         line_of(t, "ids:"), 5, "range");
  assert_int_equal(count_code(d, "tensor.range"), 1);
  assert_no_errors(d);
  plan_diags_free(d);
}

/* ---- pipeline
 * ------------------------------------------------------------------ */

#define LAYERS                                                                 \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [batch=8, 16]}\n"                                            \
  "  ops:\n"                                                                   \
  "    - {name: l0.a, op: relu, in: [x], out: a0}\n"                           \
  "    - {name: l0.b, op: tanh, in: [a0], out: b0}\n"                          \
  "    - {name: l1.a, op: relu, in: [b0], out: a1}\n"                          \
  "    - {name: l1.b, op: tanh, in: [a1], out: b1}\n"
#define PP_MESH "mesh:\n  axes: [pp=2, dp=2]\n"
#define PP_STRATS "strategies: {\"*\": {in: [RS(0)], out: RS(0)}}\n"

static void test_pipeline_findings(void **state) {
  (void)state;
  /* a clean pipeline */
  const char *t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n  microbatches: 2\n"
      "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n";
  plan_diags *d = validate(t);
  assert_clean(d);
  plan_diags_free(d);

  /* pipeline.unassigned and pipeline.duplicate: at the op */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n"
      "  stages: [{ops: [l0.a, l0.b, l1.a]}, {ops: [l1.a]}]\n";
  d = validate(t);
  expect(d, "pipeline.unassigned", PLAN_SEV_ERROR, "l1.b", "t.yaml",
         line_of(t, "{name: l1.b"), col_of(t, "{name: l1.b"),
         "no pipeline stage");
  expect(d, "pipeline.duplicate", PLAN_SEV_ERROR, "l1.a", "t.yaml",
         line_of(t, "{name: l1.a"), 0, "two pipeline stages");
  plan_diags_free(d);

  /* pipeline.order: a stage reads from a later one (at the stage) */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n"
      "  stages:\n    - {ops: [l0.a, l1.a, l1.b]}\n    - {ops: [l0.b]}\n";
  d = validate(t);
  expect(d, "pipeline.order", PLAN_SEV_ERROR, "l1.a", "t.yaml",
         line_of(t, "    - {ops: [l0.a"), 0, "later stage");
  assert_int_equal(count_code(d, "pipeline.order"), 1);
  plan_diags_free(d);

  /* pipeline.stages: 3 stages on a pp axis of 2 with 1f1b */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n"
      "  stages: [{ops: [l0.a]}, {ops: [l0.b]}, {ops: [\"l1.*\"]}]\n";
  d = validate(t);
  expect(d, "pipeline.stages", PLAN_SEV_ERROR, "pipeline", "t.yaml",
         line_of(t, "  axis: pp"), 0, "3 stages");
  plan_diags_free(d);
  /* interleaved needs a multiple of at least two */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n  schedule: interleaved-1f1b\n"
      "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n";
  d = validate(t);
  expect(d, "pipeline.stages", PLAN_SEV_ERROR, "pipeline", "t.yaml",
         line_of(t, "  axis: pp"), 0, "interleaved");
  plan_diags_free(d);
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n  schedule: interleaved-1f1b\n"
      "  stages: [{ops: [l0.a]}, {ops: [l0.b]}, {ops: [l1.a]}, {ops: "
      "[l1.b]}]\n";
  d = validate(t);
  assert_clean(d);
  plan_diags_free(d);

  /* pipeline.placement: no axis and a stage without a submesh */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n"
      "  stages:\n    - {ops: [\"l0.*\"]}\n    - {ops: [\"l1.*\"]}\n";
  d = validate(t);
  expect(d, "pipeline.placement", PLAN_SEV_ERROR, "pipeline", "t.yaml",
         line_of(t, "    - {ops: [\"l0"), 0, "stage 0");
  assert_int_equal(count_code(d, "pipeline.placement"), 2);
  plan_diags_free(d);
  d = validate(HDR LAYERS
               "mesh:\n  axes: [pp=2, dp=2]\n  submeshes: {s0: {pp: 0}, s1: "
               "{pp: 1}}\n" PP_STRATS
               "pipeline:\n  stages:\n    - {ops: [\"l0.*\"], submesh: s0}\n"
               "    - {ops: [\"l1.*\"], submesh: s1}\n");
  assert_clean(d);
  plan_diags_free(d);

  /* pipeline.microbatches: the batch dim (named) does not split */
  t = HDR LAYERS PP_MESH PP_STRATS
      "pipeline:\n  axis: pp\n  microbatches: 3\n"
      "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n";
  d = validate(t);
  expect(d, "pipeline.microbatches", PLAN_SEV_ERROR, "x", "t.yaml",
         line_of(t, "    x:"), 5, "not divisible into 3");
  plan_diags_free(d);

  /* pipeline.axis: sharded along the pipeline axis */
  t = HDR LAYERS PP_MESH "placements:\n  x: S(0)R\n"
                         "strategies:\n"
                         "  \"l0.*\": {in: [RS(0)], out: RS(0)}\n"
                         "  l1.a: {in: [S(0)R], out: S(0)R}\n"
                         "  l1.b: {in: [RS(0)], out: RS(0)}\n"
                         "pipeline:\n  axis: pp\n"
                         "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n";
  d = validate(t);
  expect(d, "pipeline.axis", PLAN_SEV_ERROR, "x", "t.yaml",
         line_of(t, "  x: S(0)R"), 3, "pipeline axis 'pp'");
  expect(d, "pipeline.axis", PLAN_SEV_ERROR, "l1.a", "t.yaml",
         line_of(t, "  l1.a:"), 3, NULL);
  assert_int_equal(count_code(d, "pipeline.axis"), 2);
  plan_diags_free(d);
}

/* ---- explicit schedules
 * ------------------------------------------------------------ */

/* A 2-stage pipeline over pp=2 with 2 microbatches; `grid` rows follow. */
#define GRID_PLAN                                                              \
  HDR LAYERS PP_MESH PP_STRATS                                                 \
      "pipeline:\n  axis: pp\n  microbatches: 2\n"                             \
      "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n"                     \
      "  grid:\n"

static plan_diags *validate_grid(const char *rows, char *text, size_t size) {
  snprintf(text, size, "%s%s", GRID_PLAN, rows);
  return validate(text);
}

static void test_schedule_findings(void **state) {
  (void)state;
  char t[4096];
  /* 1F1B for two stages: valid, with and without send/recv */
  plan_diags *d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                                "    - \"1F0 1B0 1F1 1B1\"\n",
                                t, sizeof t);
  assert_clean(d);
  plan_diags_free(d);
  d = validate_grid(
      "    - \"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\"\n"
      "    - [1RECV_F0, 1F0, 1B0, 1SEND_B0, 1RECV_F1, 1F1, 1B1, 1SEND_B1]\n",
      t, sizeof t);
  assert_clean(d);
  plan_diags_free(d);
  /* split backward: I then W */
  d = validate_grid("    - \"0F0 0F1 0I0 0W0 0B1\"\n"
                    "    - \"1F0 1I0 1F1 1W0 1I1 1W1\"\n",
                    t, sizeof t);
  assert_clean(d);
  plan_diags_free(d);

  /* a dropped action: schedule.incomplete */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - \"1F0 1B0 1F1\"\n",
                    t, sizeof t);
  expect(d, "schedule.incomplete", PLAN_SEV_ERROR, "stage 1 microbatch 1",
         "t.yaml", line_of(t, "\"1F0"), 0, "1B1");
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);
  d = validate_grid("    - \"0F1 0B0 0B1\"\n"
                    "    - \"1F0 1B0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.incomplete", PLAN_SEV_ERROR, "stage 0 microbatch 0",
         "t.yaml", line_of(t, "\"0F1"), 0, "0F0");
  plan_diags_free(d);

  /* F and B swapped: schedule.order at the B */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - \"1B0 1F0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.order", PLAN_SEV_ERROR, "stage 1 microbatch 0", "t.yaml",
         line_of(t, "\"1B0"), col_of(t, "1B0 1F0"), "1B0 runs before 1F0");
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);

  /* I after W: schedule.order at the W */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - [1F0, 1W0, 1I0, 1F1, 1B1]\n",
                    t, sizeof t);
  expect(d, "schedule.order", PLAN_SEV_ERROR, "stage 1 microbatch 0", "t.yaml",
         line_of(t, "[1F0"), col_of(t, "1W0"), "1W0 runs before 1I0");
  plan_diags_free(d);
  /* I before F */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - [1I0, 1F0, 1W0, 1F1, 1B1]\n",
                    t, sizeof t);
  expect(d, "schedule.order", PLAN_SEV_ERROR, "stage 1 microbatch 0", "t.yaml",
         line_of(t, "[1I0"), col_of(t, "1I0"), "1I0 runs before 1F0");
  plan_diags_free(d);

  /* an action on the wrong rank: schedule.rank at the action */
  d = validate_grid("    - \"0F0 1F0 0F1 0B0 0B1\"\n"
                    "    - \"1B0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.rank", PLAN_SEV_ERROR, "1F0", "t.yaml",
         line_of(t, "\"0F0 1F0"), col_of(t, "1F0 0F1"), "rank 0");
  plan_diags_free(d);

  /* an action outside the pipeline: schedule.action */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1 0F2\"\n"
                    "    - \"1F0 1B0 1F1 1B1 2F0\"\n",
                    t, sizeof t);
  expect(d, "schedule.action", PLAN_SEV_ERROR, "0F2", "t.yaml",
         line_of(t, "0F2"), col_of(t, "0F2"), "microbatch 2");
  expect(d, "schedule.action", PLAN_SEV_ERROR, "2F0", "t.yaml",
         line_of(t, "2F0"), col_of(t, "2F0"), "stage 2");
  plan_diags_free(d);

  /* twice the same action; B and I/W both */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1 0F1\"\n"
                    "    - \"1F0 1B0 1I0 1W0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.duplicate", PLAN_SEV_ERROR, "0F1", "t.yaml",
         line_of(t, "0B1 0F1"), col_of(t, "0F1\""), "more than once");
  expect(d, "schedule.duplicate", PLAN_SEV_ERROR, "stage 1 microbatch 0",
         "t.yaml", line_of(t, "\"1F0"), 0, "both");
  plan_diags_free(d);

  /* rows and ranks disagree: schedule.grid */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - \"1F0 1B0 1F1 1B1\"\n"
                    "    - \"\"\n",
                    t, sizeof t);
  expect(d, "schedule.grid", PLAN_SEV_ERROR, "pipeline", "t.yaml",
         line_of(t, "  grid:") + 1, 5, "3 rows");
  plan_diags_free(d);

  /* unpaired send/recv */
  d = validate_grid("    - \"0F0 0SEND_F0 0F1 0B0 0B1\"\n"
                    "    - \"1F0 1B0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.sendrecv", PLAN_SEV_ERROR, "stage 0 microbatch 0",
         "t.yaml", line_of(t, "\"0F0"), 0, "0SEND_F0 and 1RECV_F0");
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - \"1F0 1B0 1SEND_B0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.sendrecv", PLAN_SEV_ERROR, "stage 1 microbatch 0",
         "t.yaml", line_of(t, "\"1F0"), 0, "1SEND_B0 and 0RECV_B0");
  plan_diags_free(d);
  /* the last stage has nobody to send forward to */
  d = validate_grid("    - \"0F0 0F1 0B0 0B1\"\n"
                    "    - \"1F0 1SEND_F0 1B0 1F1 1B1\"\n",
                    t, sizeof t);
  expect(d, "schedule.sendrecv", PLAN_SEV_ERROR, "stage 1 microbatch 0",
         "t.yaml", line_of(t, "\"1F0"), 0, "end of the pipeline");
  plan_diags_free(d);
}

/* ---- regions and training
 * --------------------------------------------------------------- */

static void test_region_and_training_findings(void **state) {
  (void)state;
  const char *t = HDR LAYERS PP_MESH PP_STRATS
      "regions:\n"
      "  - {name: a, kind: pinned, ops: [\"l0.*\"]}\n"
      "  - {name: b, kind: pinned, ops: [l0.b, l1.a]}\n";
  plan_diags *d = validate(t);
  expect(d, "region.overlap", PLAN_SEV_ERROR, "l0.b", "t.yaml",
         line_of(t, "{name: b"), col_of(t, "{name: b"), "regions 'a' and 'b'");
  assert_int_equal(count_code(d, "region.overlap"), 1);
  plan_diags_free(d);

  t = HDR LAYERS PP_MESH PP_STRATS
      "regions:\n"
      "  - {name: m, kind: manual, ops: [l1.a], body: \"\"}\n";
  d = validate(t);
  expect(d, "region.body", PLAN_SEV_ERROR, "m", "t.yaml",
         line_of(t, "{name: m"), 0, "empty body");
  plan_diags_free(d);

  /* boundary tensors must cross the region's edge */
  t = HDR LAYERS PP_MESH PP_STRATS
      "regions:\n"
      "  - name: m\n"
      "    kind: manual\n"
      "    ops: [l1.a, l1.b]\n"
      "    inputs: {b0: RS(0), a1: RS(0), x: RS(0)}\n"
      "    outputs: {b1: RS(0), a0: RS(0)}\n"
      "    body: return 1\n";
  d = validate(t);
  expect(d, "region.boundary", PLAN_SEV_ERROR, "a1", "t.yaml",
         line_of(t, "inputs:"), col_of(t, "a1: RS"), "not an input");
  expect(d, "region.boundary", PLAN_SEV_ERROR, "x", "t.yaml",
         line_of(t, "inputs:"), col_of(t, "x: RS"), "not an input");
  expect(d, "region.boundary", PLAN_SEV_ERROR, "a0", "t.yaml",
         line_of(t, "outputs:"), col_of(t, "a0: RS"), "not an output");
  assert_int_equal(count_code(d, "region.boundary"), 3);
  plan_diags_free(d);

  /* training without a loss */
  t = HDR LAYERS PP_MESH PP_STRATS "training:\n  steps: 2\n";
  d = validate(t);
  expect(d, "training.loss", PLAN_SEV_ERROR, "training", "t.yaml",
         line_of(t, "  steps"), 0, "loss");
  plan_diags_free(d);

  /* reduce_scatter needs a sharded optimizer state */
  static const char prog[] =
      "program:\n"
      "  tensors:\n"
      "    x: {shape: [8, 16]}\n"
      "    lab: {shape: [8], dtype: i32, range: [0, 4]}\n"
      "    w: {shape: [16, 4], role: param}\n"
      "    v: {shape: [16, 4], role: param}\n"
      "  ops:\n"
      "    - {name: fc, op: matmul, in: [x, w], out: h}\n"
      "    - {name: add, op: add, in: [h, h], out: h2}\n"
      "    - {name: ce, op: cross_entropy, in: [h2, lab], out: L}\n"
      "  loss: L\n";
  char text[4096];
  snprintf(text, sizeof text,
           HDR "%s" MESH22 "strategies: {\"fc\": {in: [RR, RR], out: RR},"
               " add: {in: [RR, RR], out: RR}, ce: {in: [RR, RR], out: RR}}\n"
               "training:\n"
               "  grad_sync: {w: reduce_scatter, v: reduce_scatter}\n"
               "  optimizer_state: {v: RR}\n",
           prog);
  d = validate(text);
  expect(d, "training.sync", PLAN_SEV_ERROR, "w", "t.yaml",
         line_of(text, "grad_sync"), col_of(text, "reduce_scatter"),
         "optimizer_state");
  expect(d, "training.sync", PLAN_SEV_ERROR, "v", "t.yaml",
         line_of(text, "grad_sync"), 0, NULL);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 2);
  plan_diags_free(d);
  snprintf(text, sizeof text,
           HDR "%s" MESH22 "strategies: {\"*\": {in: [RR, RR], out: RR}}\n"
               "training:\n"
               "  optimizer: {kind: adam}\n"
               "  grad_sync: {w: reduce_scatter}\n"
               "  optimizer_state: {w: S(0)R}\n",
           prog);
  d = validate(text);
  assert_clean(d);
  plan_diags_free(d);
}

/* ---- findings are sorted and positioned
 * -------------------------------------------------- */

static void test_sorted(void **state) {
  (void)state;
  const char *t = HDR PROG MESH22 "placements: {ghost: RR}\n";
  plan_diags *d = validate(t);
  /* two missing strategies and an unknown name, in file order */
  assert_int_equal(plan_diags_count(d), 3);
  for (size_t i = 1; i < plan_diags_count(d); i++)
    assert_true(plan_diags_get(d, i - 1)->line <= plan_diags_get(d, i)->line);
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    assert_true(g->line >= 1 && g->column >= 1);
    assert_true(g->message[0] != 0 && g->object[0] != 0);
  }
  plan_diags_free(d);
}

/* ---- drift
 * ------------------------------------------------------------------------------
 */

static const char mlp_prog[] =
    "program:\n"
    "  name: mlp\n"
    "  tensors:\n"
    "    x:  {shape: [batch=8, hidden=16]}\n"
    "    w1: {shape: [16, 64], role: param}\n"
    "    w2: {shape: [64, 16], role: param}\n"
    "  ops:\n"
    "    - {name: mlp.fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: mlp.act, op: gelu, in: [h], out: a}\n"
    "    - {name: mlp.fc2, op: matmul, in: [a, w2], out: y}\n";

static const char mlp_decisions[] =
    "mesh:\n  axes: [dp=2, tp=2]\n"
    "placements:\n  x: S(0)R\n  w1: RS(1)\n  w2: RS(0)\n"
    "strategies:\n"
    "  mlp.fc1: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"
    "  mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  mlp.fc2: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}\n";

static char *edit(const char *base, const char *old, const char *new) {
  const char *at = strstr(base, old);
  if (!at)
    print_message("'%s' is not in the text\n", old);
  assert_non_null(at);
  size_t lb = strlen(base), lo = strlen(old), ln = strlen(new);
  char *out = malloc(lb - lo + ln + 1);
  assert_non_null(out);
  memcpy(out, base, (size_t)(at - base));
  memcpy(out + (at - base), new, ln);
  memcpy(out + (at - base) + ln, at + lo, lb - (size_t)(at - base) - lo + 1);
  return out;
}

static plan_program *program_of(const char *prog_section, const char *name) {
  char text[4096];
  snprintf(text, sizeof text, HDR "%s", prog_section);
  plan_program *g = NULL;
  int rc = plan_program_load_buffer(&g, text, strlen(text), name);
  if (rc) {
    char buf[1200];
    print_message("%s\n", plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  return g;
}

static plan_diags *drift_of(const char *edited_prog) {
  char text[4096];
  snprintf(text, sizeof text, HDR "%s%s", mlp_prog, mlp_decisions);
  plan_plan *p = load(text);
  plan_program *g = program_of(edited_prog, "edited.yaml");
  plan_diags *d = NULL;
  assert_int_equal(plan_drift(&d, p, g), PLAN_OK);
  plan_program_free(g);
  plan_free(p);
  return d;
}

static void test_drift(void **state) {
  (void)state;
  /* the same program: nothing */
  plan_diags *d = drift_of(mlp_prog);
  assert_clean(d);
  plan_diags_free(d);
  /* the same program written otherwise: nothing */
  char *e =
      edit(mlp_prog, "    x:  {shape: [batch=8, hidden=16]}\n",
           "    x:  {shape: [batch=8, hidden=16], dtype: f32, role: input}\n");
  d = drift_of(e);
  assert_clean(d);
  plan_diags_free(d);
  free(e);

  /* an attribute changed: drift.changed error naming the op, at the op in
   * the edited file */
  e = edit(mlp_prog, "op: gelu, in: [h], out: a}",
           "op: gelu, in: [h], out: a, attrs: {approximate: tanh}}");
  d = drift_of(e);
  char text[4096];
  snprintf(text, sizeof text, HDR "%s", e);
  expect(d, "drift.changed", PLAN_SEV_ERROR, "mlp.act", "edited.yaml",
         line_of(text, "{name: mlp.act"), col_of(text, "{name: mlp.act"),
         "op 'mlp.act' changed");
  assert_int_equal(plan_diags_count(d), 1);
  plan_diags_free(d);
  free(e);

  /* an op added without a strategy: drift.added error (its output tensor is
   * a note) */
  e = edit(mlp_prog, "out: y}\n",
           "out: y}\n    - {name: mlp.out, op: relu, in: [y], out: z}\n");
  d = drift_of(e);
  snprintf(text, sizeof text, HDR "%s", e);
  expect(d, "drift.added", PLAN_SEV_ERROR, "mlp.out", "edited.yaml",
         line_of(text, "{name: mlp.out"), 0, "no strategy");
  expect(d, "drift.added", PLAN_SEV_NOTE, "z", "edited.yaml",
         line_of(text, "{name: mlp.out"), 0, NULL);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);
  free(e);

  /* an op removed: drift.removed warning */
  e = edit(mlp_prog, "    - {name: mlp.fc2, op: matmul, in: [a, w2], out: y}\n",
           "");
  d = drift_of(e);
  expect(d, "drift.removed", PLAN_SEV_WARNING, "mlp.fc2", "t.yaml", 0, 0,
         "gone");
  expect(d, "drift.removed", PLAN_SEV_WARNING, "y", "t.yaml", 0, 0, NULL);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 0);
  plan_diags_free(d);
  free(e);

  /* a tensor the plan places changed: an error for it and for its
   * consumer; the produced tensor whose shape follows is a warning */
  char *e1 = edit(mlp_prog, "w1: {shape: [16, 64]", "w1: {shape: [16, 32]");
  e = edit(e1, "w2: {shape: [64, 16]", "w2: {shape: [32, 16]");
  free(e1);
  d = drift_of(e);
  snprintf(text, sizeof text, HDR "%s", e);
  expect(d, "drift.changed", PLAN_SEV_ERROR, "w1", "edited.yaml",
         line_of(text, "w1:"), 5, "tensor 'w1' changed");
  expect(d, "drift.changed", PLAN_SEV_ERROR, "mlp.fc1", "edited.yaml",
         line_of(text, "{name: mlp.fc1"), 7, NULL);
  expect(d, "drift.changed", PLAN_SEV_WARNING, "h", "edited.yaml",
         line_of(text, "{name: mlp.fc1"), -1, NULL);
  /* x is untouched */
  assert_int_equal(count_code(d, "drift.changed"), 7);
  plan_diags_free(d);
  free(e);

  assert_int_equal(plan_drift(&d, NULL, NULL), PLAN_EUSAGE);
}

/* ---- a program by path that changed
 * ------------------------------------------------------- */

static char tmpdir[64];

static int setup_tmp(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/libplan-validate-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

static void test_program_changed(void **state) {
  (void)state;
  char prog_path[256], plan_path[256], text[4096];
  snprintf(prog_path, sizeof prog_path, "%s/mlp.yaml", tmpdir);
  snprintf(plan_path, sizeof plan_path, "%s/plan.yaml", tmpdir);
  snprintf(text, sizeof text, HDR "%s", mlp_prog);
  write_file(prog_path, text);
  /* a by-path plan, written out so that it records hash and signatures */
  snprintf(text, sizeof text, HDR "program: {path: mlp.yaml}\n%s",
           mlp_decisions);
  plan_plan *p = NULL;
  assert_int_equal(plan_load_buffer(&p, text, strlen(text), plan_path, tmpdir),
                   PLAN_OK);
  char *written = NULL;
  assert_int_equal(plan_write_buffer(&written, NULL, p, NULL), PLAN_OK);
  plan_free(p);
  assert_non_null(strstr(written, "signatures:"));
  write_file(plan_path, written);

  /* unchanged: clean */
  assert_int_equal(plan_load(&p, plan_path), PLAN_OK);
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  assert_clean(d);
  plan_diags_free(d);
  plan_free(p);

  /* the program file changes under the plan */
  char *e = edit(mlp_prog, "op: gelu, in: [h], out: a}",
                 "op: gelu, in: [h], out: a, attrs: {approximate: tanh}}");
  snprintf(text, sizeof text, HDR "%s", e);
  write_file(prog_path, text);
  assert_int_equal(plan_load(&p, plan_path), PLAN_OK);
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  expect(d, "program.changed", PLAN_SEV_WARNING, "mlp.yaml", plan_path,
         line_of(written, "  path:"), 0, "has changed");
  expect(d, "drift.changed", PLAN_SEV_ERROR, "mlp.act", prog_path,
         line_of(text, "{name: mlp.act"), 0, NULL);
  assert_int_equal(count_code(d, "drift.changed"), 1);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_ERROR), 1);
  plan_diags_free(d);
  plan_free(p);
  free(e);

  /* an op the recorded program lacked: drift from the recorded signatures */
  e = edit(mlp_prog, "out: y}\n",
           "out: y}\n    - {name: mlp.out, op: relu, in: [y], out: z}\n");
  snprintf(text, sizeof text, HDR "%s", e);
  write_file(prog_path, text);
  assert_int_equal(plan_load(&p, plan_path), PLAN_OK);
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  find(d, "program.changed", NULL);
  expect(d, "drift.added", PLAN_SEV_ERROR, "mlp.out", prog_path,
         line_of(text, "{name: mlp.out"), 0, NULL);
  /* ... and the plan has no strategy for it */
  find(d, "strategy.missing", "mlp.out");
  plan_diags_free(d);
  plan_free(p);
  free(e);
  free(written);
}

/* ---- diff
 * ---------------------------------------------------------------------------------
 */

static plan_diags *diff_texts(const char *a, const char *b) {
  plan_plan *pa = load(a), *pb = load(b);
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, pa, pb), PLAN_OK);
  plan_free(pa);
  plan_free(pb);
  return d;
}

/* Editing `old` into `new` gives exactly one difference, `code` about
 * `object`. */
static void expect_one_diff(const char *base, const char *old, const char *new,
                            const char *code, const char *object) {
  char *b = edit(base, old, new);
  plan_diags *d = diff_texts(base, b);
  plan_diags *back = diff_texts(b, base); /* and the other way round */
  free(b);
  const plan_diag *g = plan_diags_get(d, 0), *gb = plan_diags_get(back, 0);
  bool ok = plan_diags_count(d) == 1 && plan_diags_count(back) == 1 &&
            !strcmp(g->code, code) && !strcmp(g->object, object) &&
            g->severity == PLAN_SEV_NOTE && !strcmp(gb->code, code);
  if (!ok) {
    print_message("edit '%s' -> '%s', wanted one %s about '%s':\n", old, new,
                  code, object);
    dump(d);
    print_message("and back:\n");
    dump(back);
  }
  plan_diags_free(d);
  plan_diags_free(back);
  assert_true(ok);
}

static char base[4096]; /* the plan the diffs start from */

static void make_diff_base(void) {
  snprintf(base, sizeof base,
           HDR "%s%s"
               "pipeline:\n  axis: dp\n  microbatches: 2\n"
               "  stages: [{ops: [mlp.fc1, mlp.act]}, {ops: [mlp.fc2]}]\n"
               "outputs:\n  y: S(0)R\n"
               "training:\n  steps: 2\n"
               "regions:\n  - {name: r, kind: pinned, ops: [mlp.act]}\n",
           mlp_prog, mlp_decisions);
}

static void test_diff(void **state) {
  (void)state;
  make_diff_base();
  /* identical in meaning: nothing */
  char *same = edit(base, "  w1: RS(1)\n", "  w1: {tp: S(-1)}\n");
  plan_diags *d = diff_texts(base, same);
  assert_clean(d);
  plan_diags_free(d);
  free(same);
  d = diff_texts(base, base);
  assert_clean(d);
  plan_diags_free(d);

  expect_one_diff(base, "  w1: RS(1)\n", "  w1: RR\n", "diff.placement", "w1");
  expect_one_diff(base, "mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}",
                  "mlp.act: {in: [S(0)R], out: S(0)R}", "diff.strategy",
                  "mlp.act");
  expect_one_diff(base, "axes: [dp=2, tp=2]", "axes: [dp=4, tp=2]", "diff.mesh",
                  "mesh");
  expect_one_diff(base, "  axes: [dp=2, tp=2]\n",
                  "  axes: [dp=2, tp=2]\n  devices: [2, 3, 0, 1]\n",
                  "diff.devices", "mesh");
  expect_one_diff(base, "  axis: dp\n", "  axis: dp\n  schedule: gpipe\n",
                  "diff.schedule", "pipeline");
  expect_one_diff(base, "  y: S(0)R\n", "  y: RR\n", "diff.output", "y");
  expect_one_diff(base, "  steps: 2\n", "  steps: 3\n", "diff.training",
                  "training");
  expect_one_diff(base, "kind: pinned, ops: [mlp.act]",
                  "kind: pinned, ops: [mlp.fc1]", "diff.regions", "regions");
  expect_one_diff(base, "  axes: [dp=2, tp=2]\n",
                  "  axes: [dp=2, tp=2]\n  hardware: {memory: 1e9}\n",
                  "diff.mesh", "mesh");
  /* program edits */
  expect_one_diff(base, "op: gelu, in: [h], out: a}",
                  "op: gelu, in: [h], out: a, attrs: {approximate: tanh}}",
                  "diff.op", "mlp.act");
  expect_one_diff(
      base, "    x:  {shape: [batch=8, hidden=16]}\n",
      "    x:  {shape: [batch=8, hidden=16]}\n    extra: {shape: [2]}\n",
      "diff.tensor", "extra");

  /* a strategy removed */
  char *b = edit(base, "  mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}\n", "");
  d = diff_texts(base, b);
  find(d, "diff.strategy", "mlp.act");
  assert_int_equal(plan_diags_count(d), 1);
  plan_diags_free(d);
  free(b);
  /* a plan against its program-only document: the mesh is gone */
  char prog_only[2048];
  snprintf(prog_only, sizeof prog_only, HDR "%s", mlp_prog);
  d = diff_texts(base, prog_only);
  find(d, "diff.mesh", "mesh");
  plan_diags_free(d);

  assert_int_equal(plan_diff(&d, NULL, NULL), PLAN_EUSAGE);
}

/* A stage move or a new microbatch count is reported as that, not also as
 * a changed schedule. */
static void test_diff_pipeline(void **state) {
  (void)state;
  make_diff_base();
  expect_one_diff(base, "stages: [{ops: [mlp.fc1, mlp.act]}, {ops: [mlp.fc2]}]",
                  "stages: [{ops: [mlp.fc1]}, {ops: [mlp.act, mlp.fc2]}]",
                  "diff.stage", "mlp.act");
  expect_one_diff(base, "  microbatches: 2\n", "  microbatches: 4\n",
                  "diff.pipeline", "pipeline");
  /* what only the pipeline section shows: an explicit grid's order */
  char *g = edit(base, "  microbatches: 2\n",
                 "  microbatches: 2\n  grid: [\"0F0 0F1 0B0 0B1\", \"1F0 1B0 "
                 "1F1 1B1\"]\n");
  expect_one_diff(g, "\"0F0 0F1 0B0 0B1\"", "\"0F0 0B0 0F1 0B1\"",
                  "diff.schedule", "pipeline");
  free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_strategy_findings),
      cmocka_unit_test(test_mesh_and_names),
      cmocka_unit_test(test_pipeline_findings),
      cmocka_unit_test(test_schedule_findings),
      cmocka_unit_test(test_region_and_training_findings),
      cmocka_unit_test(test_sorted),
      cmocka_unit_test(test_drift),
      cmocka_unit_test_setup_teardown(test_program_changed, setup_tmp,
                                      teardown_tmp),
      cmocka_unit_test(test_diff),
      cmocka_unit_test(test_diff_pipeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
