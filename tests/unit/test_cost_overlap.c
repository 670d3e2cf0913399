/* Unit tests for the stream simulation of the cost model (cost_overlap.c):
 * a collective hidden by compute costs the max, not the sum; two
 * collectives in flight on one link take twice one, on two links one;
 * one stream runs its collectives in order; the chunks of a chain over two
 * links pipeline; a serial run is the sum of its steps; and the report of
 * a plan without an `overlap:` section is what it was. */
/* cmocka needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/plan.h"

static plan_plan *load(const char *text) {
  plan_plan *p = NULL;
  if (plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL)) {
    char buf[1024];
    fail_msg("load: %s", plan_error_format(buf, sizeof buf));
  }
  return p;
}

static plan_cost_model *model(const plan_plan *p) {
  plan_cost_model *m = NULL;
  if (plan_cost_model_new(&m, p, "h100-sxm")) {
    char buf[1024];
    fail_msg("model: %s", plan_error_format(buf, sizeof buf));
  }
  return m;
}

static plan_cost_sim *simulate(const plan_cost_model *m, const plan_plan *p,
                               unsigned flags) {
  plan_cost_sim *s = NULL;
  if (plan_cost_simulate(&s, m, p, flags)) {
    char buf[1024];
    fail_msg("simulate: %s", plan_error_format(buf, sizeof buf));
  }
  return s;
}

static void near(double got, double want, const char *what) {
  double tol = 1e-9 * fabs(want) + 1e-15;
  if (fabs(got - want) > tol)
    fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

/* The nth step (0: the first) of `kind` named `name`. */
static plan_cost_sim_step_info step(const plan_cost_sim *s, int kind,
                                    const char *name, int nth) {
  plan_cost_sim_step_info o;
  for (size_t i = 0; i < plan_cost_sim_step_count(s); i++) {
    assert_int_equal(plan_cost_sim_step(&o, s, i), PLAN_OK);
    if (o.kind == kind && !strcmp(o.name, name) && nth-- == 0)
      return o;
  }
  fail_msg("no step %s", name);
  return o;
}

static double op_seconds(const plan_cost_sim *s, const char *name) {
  return step(s, PLAN_COST_SIM_OP, name, 0).seconds;
}

/* Three matmuls a, b, c; w1 and w2 stored sharded and all-gathered for
 * b and c: over dp (across the two hosts) or over tp (inside one), as
 * the placements say; OVERLAP is the plan's `overlap:` list. */
static char *three_ops(char *buf, size_t size, const char *w1, const char *w2,
                       const char *overlap) {
  snprintf(buf, size,
           "libplan: \"1.1\"\n"
           "program:\n"
           "  name: three\n"
           "  tensors:\n"
           "    x: {shape: [batch=65536, d=1024], dtype: bf16, role: input}\n"
           "    w0: {shape: [1024, 1024], dtype: bf16, role: param}\n"
           "    w1: {shape: [1024, 1024], dtype: bf16, role: param}\n"
           "    w2: {shape: [1024, 1024], dtype: bf16, role: param}\n"
           "  ops:\n"
           "    - {name: a, op: matmul, in: [x, w0], out: h}\n"
           "    - {name: b, op: matmul, in: [h, w1], out: y}\n"
           "    - {name: c, op: matmul, in: [y, w2], out: z}\n"
           "  outputs: [z]\n"
           "mesh:\n"
           "  axes: [dp=2, tp=2]\n"
           "  devices_per_host: 2\n"
           "placements:\n"
           "  x: S(0)R\n"
           "  w0: RR\n"
           "  w1: %s\n"
           "  w2: %s\n"
           "strategies:\n"
           "  a: {in: [S(0)R, RR], out: S(0)R}\n"
           "  b: {in: [S(0)R, RR], out: S(0)R}\n"
           "  c: {in: [S(0)R, RR], out: S(0)R}\n"
           "outputs:\n"
           "  z: S(0)R\n"
           "%s",
           w1, w2, overlap);
  return buf;
}

/* w1's all-gather started as soon as w1 is there, on stream 1, under the
 * matmul a (which takes longer): the step is the compute alone, where
 * the serial step adds the gather. */
static void test_hidden_costs_max(void **state) {
  (void)state;
  char buf[4096];
  plan_plan *p = load(three_ops(buf, sizeof buf, "S(0)R", "RR",
                                "overlap:\n"
                                "  - {param: w1, start: ready, stream: 1}\n"));
  plan_cost_model *m = model(p);
  plan_cost_sim *s = simulate(m, p, 0);
  plan_cost_sim *serial =
      simulate(m, p, PLAN_COST_SIM_PLAIN | PLAN_COST_SIM_SERIAL);
  double ta = op_seconds(s, "a"), tb = op_seconds(s, "b"),
         tc = op_seconds(s, "c");
  plan_cost_sim_step_info g = step(s, PLAN_COST_SIM_COLLECTIVE, "w1", 0);
  assert_string_equal(g.collective, "all_gather");
  assert_string_equal(g.link, "inter_host");
  assert_int_equal(g.stream, 1);
  assert_true(g.seconds > 0 && g.seconds < ta); /* the premise */
  near(g.start, 0, "the gather starts at once");
  near(g.end, g.seconds, "and runs at its own speed");
  /* max(a, gather) + b + c, not the sum */
  near(plan_cost_sim_makespan(s), ta + tb + tc, "hidden");
  near(plan_cost_sim_exposed_seconds(s), 0, "nothing exposed");
  near(plan_cost_sim_makespan(serial), ta + tb + tc + g.seconds, "serial");
  near(plan_cost_sim_exposed_seconds(serial), g.seconds, "serial exposed");
  /* the report: the step less the gather, the plain step as it was */
  plan_cost_report *r = NULL;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_true(plan_cost_report_overlapped(r));
  near(plan_cost_report_step_no_overlap_seconds(r) -
           plan_cost_report_step_seconds(r),
       g.seconds, "the gain is the hidden gather");
  near(plan_cost_report_exposed_comm_seconds(r), 0, "report: none exposed");
  plan_cost_report_free(r);
  plan_cost_sim_free(s);
  plan_cost_sim_free(serial);
  plan_cost_model_free(m);
  plan_free(p);
}

/* Without an `overlap:` section the report is today's: the same plan
 * with and without one, the step without overlap equal to the plain
 * step, and a serial run is the sum of its steps, the report's step. */
static void test_no_overlap_unchanged(void **state) {
  (void)state;
  char buf[4096], buf2[4096];
  plan_plan *p = load(three_ops(buf, sizeof buf, "S(0)R", "RS(0)", ""));
  plan_plan *q = load(three_ops(buf2, sizeof buf2, "S(0)R", "RS(0)",
                                "overlap:\n"
                                "  - {param: w1, start: ready, stream: 1}\n"
                                "  - {param: w2, start: ready, stream: 2}\n"));
  plan_cost_model *m = model(p);
  plan_cost_report *r = NULL, *rq = NULL;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_int_equal(plan_cost_plan(&rq, m, q), PLAN_OK);
  assert_false(plan_cost_report_overlapped(r));
  assert_true(plan_cost_report_step_seconds(r) ==
              plan_cost_report_step_no_overlap_seconds(r));
  assert_true(plan_cost_report_exposed_comm_seconds(r) ==
              plan_cost_report_comm_seconds(r));
  assert_true(plan_cost_report_step_no_overlap_seconds(rq) ==
              plan_cost_report_step_seconds(r));
  assert_true(plan_cost_report_step_seconds(rq) <
              plan_cost_report_step_seconds(r));
  /* the text and JSON of the plain plan carry no overlap line */
  char *txt = NULL;
  size_t n;
  assert_int_equal(plan_cost_report_write(&txt, &n, r, "json"), PLAN_OK);
  assert_null(strstr(txt, "overlap"));
  plan_buffer_free(txt);
  assert_int_equal(plan_cost_report_write(&txt, &n, rq, "json"), PLAN_OK);
  assert_non_null(strstr(txt, "\"step_no_overlap\""));
  plan_buffer_free(txt);
  /* the serial run: the sum of its steps, which is the report's step */
  plan_cost_sim *s = simulate(m, p, PLAN_COST_SIM_SERIAL);
  double sum = 0;
  plan_cost_sim_step_info o;
  for (size_t i = 0; i < plan_cost_sim_step_count(s); i++) {
    assert_int_equal(plan_cost_sim_step(&o, s, i), PLAN_OK);
    sum += o.seconds;
  }
  assert_int_equal(plan_cost_sim_step(&o, s, plan_cost_sim_step_count(s)),
                   PLAN_ENOTFOUND);
  near(plan_cost_sim_makespan(s), sum, "serial = sum");
  near(plan_cost_sim_makespan(s), plan_cost_report_step_seconds(r),
       "the report's step");
  plan_cost_sim_free(s);
  plan_cost_report_free(r);
  plan_cost_report_free(rq);
  plan_cost_model_free(m);
  plan_free(p);
  plan_free(q);
}

/* Two gathers of the same size started together: over one link (both
 * over dp, two streams) they share it and each takes twice its time;
 * on one stream they run one after the other; over two links (dp and
 * tp) each takes its own. */
static void test_link_sharing(void **state) {
  (void)state;
  char buf[4096];
  const char *two = "overlap:\n"
                    "  - {param: w1, start: ready, stream: 1}\n"
                    "  - {param: w2, start: ready, stream: %d}\n";
  char ov[256];
  /* one link, two streams */
  snprintf(ov, sizeof ov, two, 2);
  plan_plan *p = load(three_ops(buf, sizeof buf, "S(0)R", "S(0)R", ov));
  plan_cost_model *m = model(p);
  plan_cost_sim *s = simulate(m, p, 0);
  plan_cost_sim_step_info g1 = step(s, PLAN_COST_SIM_COLLECTIVE, "w1", 0);
  plan_cost_sim_step_info g2 = step(s, PLAN_COST_SIM_COLLECTIVE, "w2", 0);
  assert_string_equal(g1.link, g2.link);
  near(g1.seconds, g2.seconds, "equal gathers");
  near(g1.start, 0, "both start at once");
  near(g2.start, 0, "both start at once");
  near(g1.end, 2 * g1.seconds, "sharing: twice one");
  near(g2.end, 2 * g2.seconds, "sharing: twice one");
  plan_cost_sim_free(s);
  plan_free(p);
  /* one link, one stream: in order */
  snprintf(ov, sizeof ov, two, 1);
  p = load(three_ops(buf, sizeof buf, "S(0)R", "S(0)R", ov));
  s = simulate(m, p, 0);
  g1 = step(s, PLAN_COST_SIM_COLLECTIVE, "w1", 0);
  g2 = step(s, PLAN_COST_SIM_COLLECTIVE, "w2", 0);
  near(g1.end, g1.seconds, "first alone");
  near(g2.start, g1.end, "second after it");
  near(g2.end, g1.seconds + g2.seconds, "in order");
  plan_cost_sim_free(s);
  plan_free(p);
  /* two links */
  snprintf(ov, sizeof ov, two, 2);
  p = load(three_ops(buf, sizeof buf, "S(0)R", "RS(0)", ov));
  s = simulate(m, p, 0);
  g1 = step(s, PLAN_COST_SIM_COLLECTIVE, "w1", 0);
  g2 = step(s, PLAN_COST_SIM_COLLECTIVE, "w2", 0);
  assert_string_equal(g1.link, "inter_host");
  assert_string_equal(g2.link, "intra_host");
  near(g1.end, g1.seconds, "own link");
  near(g2.end, g2.seconds, "own link");
  plan_cost_sim_free(s);
  plan_free(p);
  plan_cost_model_free(m);
}

/* A matmul whose contracting dim is split over dp and tp makes a sum
 * partial over both: its reduction is a chain of two all-reduces, over
 * dp (across hosts) then tp (inside one). In 2 chunks, the second
 * chunk's dp step runs while the first chunk's tp step does. */
static const char chain_plan[] =
    "libplan: \"1.1\"\n"
    "program:\n"
    "  name: chain\n"
    "  tensors:\n"
    "    x: {shape: [batch=512, d=4096], dtype: bf16, role: input}\n"
    "    w: {shape: [4096, 1024], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: b, op: matmul, in: [x, w], out: y}\n"
    "    - {name: c, op: gelu, in: [y], out: z}\n"
    "  outputs: [z]\n"
    "mesh:\n"
    "  axes: [dp=2, tp=2]\n"
    "  devices_per_host: 2\n"
    "placements:\n"
    "  x: S(1)S(1)\n"
    "  w: S(0)S(0)\n"
    "strategies:\n"
    "  b: {in: [S(1)S(1), S(0)S(0)], out: P(sum)P(sum)}\n"
    "  c: {in: [RR], out: RR}\n"
    "outputs:\n"
    "  z: RR\n"
    "overlap:\n"
    "  - {input: c, chunks: 2}\n";

static void test_chunks_pipeline(void **state) {
  (void)state;
  plan_plan *p = load(chain_plan);
  plan_cost_model *m = model(p);
  plan_cost_sim *s = simulate(m, p, 0);
  plan_cost_sim_step_info a0 = step(s, PLAN_COST_SIM_COLLECTIVE, "y", 0);
  plan_cost_sim_step_info a1 = step(s, PLAN_COST_SIM_COLLECTIVE, "y", 1);
  plan_cost_sim_step_info b0 = step(s, PLAN_COST_SIM_COLLECTIVE, "y", 2);
  plan_cost_sim_step_info b1 = step(s, PLAN_COST_SIM_COLLECTIVE, "y", 3);
  assert_string_equal(a0.axis, "dp");
  assert_string_equal(b0.axis, "tp");
  assert_int_equal(a0.chunk_of, 2);
  assert_int_equal(b1.chunk_index, 1);
  assert_true(a0.chunkable & 2); /* 2 chunks divide the batch dim */
  /* a chunk: half the bytes, all the latency terms */
  near(a0.seconds * 2, a0.chunk_seconds[1], "a chunk of two");
  assert_true(a0.chunk_seconds[1] > a0.chunk_seconds[0]);
  double t0 = op_seconds(s, "b");
  near(a0.start, t0, "dp chunk 0 after the matmul");
  near(a1.start, a0.end, "dp chunk 1 after chunk 0 (one channel)");
  near(b0.start, a0.end, "tp chunk 0 as soon as dp chunk 0 is done");
  double b1_start = fmax(a1.end, b0.end);
  near(b1.start, b1_start, "tp chunk 1 after both");
  near(b1.end, b1_start + b1.seconds, "tp chunk 1 alone on its link");
  /* the pipeline beats the chain run chunk after chunk */
  assert_true(b1.end - t0 < a0.seconds + a1.seconds + b0.seconds + b1.seconds);
  near(plan_cost_sim_makespan(s), b1.end + op_seconds(s, "c"), "makespan");
  plan_cost_sim_free(s);
  plan_cost_model_free(m);
  plan_free(p);
}

static void test_usage(void **state) {
  (void)state;
  plan_cost_sim *s = (plan_cost_sim *)1;
  assert_int_equal(plan_cost_simulate(&s, NULL, NULL, 0), PLAN_EUSAGE);
  assert_null(s);
  assert_int_equal(plan_cost_sim_step_count(NULL), 0);
  assert_true(plan_cost_sim_makespan(NULL) == 0);
  plan_cost_sim_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hidden_costs_max),
      cmocka_unit_test(test_no_overlap_unchanged),
      cmocka_unit_test(test_link_sharing),
      cmocka_unit_test(test_chunks_pipeline),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
