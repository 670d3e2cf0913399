/* Unit tests for the cost model (cost*.c): hand-computed op costs on one
 * device and sharded, the alpha-beta formulas of the collectives, device
 * order and hosts, memory accounting (parameters, gradients, Adam state,
 * activations and recomputation), a plan that does not fit, profiles,
 * calibration, the plan's own hardware and the errors it gets. */
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

#include "cost/cost_model.h"
#include "libplan/cost.h"
#include "libplan/plan.h"
#include "ir/placement.h"

/* ---- helpers ------------------------------------------------------------- */

static plan_plan *load(const char *text) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL);
  if (rc) {
    char buf[1024];
    fail_msg("load: %s", plan_error_format(buf, sizeof buf));
  }
  return p;
}

static plan_cost_model *model(const plan_plan *p, const char *profile) {
  plan_cost_model *m = NULL;
  if (plan_cost_model_new(&m, p, profile)) {
    char buf[1024];
    fail_msg("model: %s", plan_error_format(buf, sizeof buf));
  }
  return m;
}

static plan_placement pl(const plan_plan *p, const char *text, int rank) {
  plan_placement x;
  char err[200] = "";
  if (plan_placement_parse(&x, text, strlen(text), p->mesh.naxes, err,
                           sizeof err, NULL) ||
      plan_placement_normalize(&x, rank, err, sizeof err))
    fail_msg("placement %s: %s", text, err);
  return x;
}

static void near(double got, double want, const char *what) {
  double tol = 1e-9 * fabs(want) + 1e-15;
  if (fabs(got - want) > tol)
    fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

static int tensor(const plan_plan *p, const char *name) {
  int t = plan_program_tensor_find(plan_get_program(p), name);
  assert_true(t >= 0);
  return t;
}

/* The figures tests compute by hand: efficiencies 1 except where a test
 * says otherwise. */
static void unit_efficiency(plan_cost_model *m) {
  assert_int_equal(plan_cost_model_set(m, "efficiency.matmul", 1), PLAN_OK);
  assert_int_equal(plan_cost_model_set(m, "efficiency.other", 1), PLAN_OK);
  assert_int_equal(plan_cost_model_set(m, "efficiency.memory", 1), PLAN_OK);
  assert_int_equal(plan_cost_model_set(m, "efficiency.link", 1), PLAN_OK);
}

/* ---- compute ------------------------------------------------------------- */

static const char matmul_1dev[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [4096, 4096], dtype: bf16}\n"
    "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: mm, op: matmul, in: [x, w], out: y}\n"
    "mesh: {axes: [d=1]}\n"
    "strategies:\n"
    "  mm: {in: [R, R], out: R}\n";

static void test_matmul_one_device(void **state) {
  (void)state;
  plan_plan *p = load(matmul_1dev);
  plan_cost_model *m = model(p, "h100");
  double t;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  /* 2 m n k FLOPs at 989.4 TFLOP/s x 0.7, against 3 x 4096^2 x 2 bytes at
   * 3.35 TB/s x 0.8: compute bound, plus the 4 us floor */
  double n = 4096.0, flops = 2 * n * n * n, bytes = 3 * n * n * 2;
  double tc = flops / (989.4e12 * 0.7), tm = bytes / (3.35e12 * 0.8);
  assert_true(tc > tm);
  near(t, tc + 4e-6, "matmul on one H100");
  /* the same through the string API */
  const char *in[] = {"R", "R"}, *out[] = {"R"};
  double t2;
  assert_int_equal(plan_cost_op(&t2, m, p, 0, in, out), PLAN_OK);
  near(t2, t, "string API");
  /* A100: 312 TFLOP/s */
  plan_cost_model *a = model(p, "a100");
  assert_int_equal(plan_cost_op_seconds(&t, a, p, 0, NULL, NULL), PLAN_OK);
  near(t, flops / (312e12 * 0.7) + 4e-6, "matmul on one A100");
  plan_cost_model_free(a);
  plan_cost_model_free(m);
  plan_free(p);
}

static const char matmul_tp[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [4096, 4096], dtype: bf16}\n"
    "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: mm, op: matmul, in: [x, w], out: y}\n"
    "mesh: {axes: [tp=4]}\n"
    "placements: {w: S(1)}\n"
    "strategies:\n"
    "  mm: {in: [R, S(1)], out: S(1)}\n";

static void test_matmul_sharded(void **state) {
  (void)state;
  plan_plan *p = load(matmul_tp);
  plan_cost_model *m = model(p, "h100");
  unit_efficiency(m);
  double n = 4096.0, t;
  /* column parallel: each rank computes m x n/4 with the whole k */
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, 2 * n * n * n / 4 / 989.4e12 + 4e-6, "column parallel");
  /* row parallel (k split): a partial sum of the whole m x n */
  plan_placement in[2] = {pl(p, "S(1)", 2), pl(p, "S(0)", 2)};
  plan_placement out = pl(p, "P(sum)", 2);
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, in, &out), PLAN_OK);
  near(t, 2 * n * n * n / 4 / 989.4e12 + 4e-6, "row parallel");
  /* every block whole: four times the work */
  plan_placement rr[2] = {pl(p, "R", 2), pl(p, "R", 2)};
  plan_placement r1 = pl(p, "R", 2);
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, rr, &r1), PLAN_OK);
  near(t, 2 * n * n * n / 989.4e12 + 4e-6, "replicated");
  plan_cost_model_free(m);
  plan_free(p);
}

static const char small_ops[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [1000, 1000], dtype: f32}\n"
    "  ops:\n"
    "    - {name: act, op: relu, in: [x], out: a}\n"
    "    - {name: sm, op: softmax, in: [a], out: s}\n"
    "    - {name: rs, op: reshape, in: [s], out: v, attrs: {shape: "
    "[1000000]}}\n"
    "mesh: {axes: [tp=3]}\n"
    "placements: {x: S(0)}\n"
    "strategies:\n"
    "  act: {in: [S(0)], out: S(0)}\n"
    "  sm: {in: [S(0)], out: S(0)}\n"
    "  rs: {in: [S(0)], out: S(0)}\n";

static void test_memory_bound_ops(void **state) {
  (void)state;
  plan_plan *p = load(small_ops);
  plan_cost_model *m = model(p, "h100");
  unit_efficiency(m);
  double t;
  /* 1000 rows over 3: the slowest rank holds ceil(1000/3) = 334 rows;
   * relu reads and writes 334 x 1000 f32: memory bound */
  double bytes = 2 * 334.0 * 1000 * 4;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, bytes / 3.35e12 + 4e-6, "relu");
  /* softmax: 5 FLOPs per element on the f32 vector rate, still memory
   * bound here */
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 1, NULL, NULL), PLAN_OK);
  near(t, fmax(5 * 334.0 * 1000 / 67e12, bytes / 3.35e12) + 4e-6, "softmax");
  /* a reshape is a view: free */
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 2, NULL, NULL), PLAN_OK);
  near(t, 0, "reshape");
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- collectives --------------------------------------------------------- */

static const char allreduce_plan[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    a: {shape: [8192, 8192], dtype: f32}\n"
    "    b: {shape: [8192, 8192], dtype: f32, role: param}\n"
    "    s: {shape: [256], dtype: f32}\n"
    "    c: {shape: [256], dtype: f32, role: param}\n"
    "  ops:\n"
    "    - {name: mm, op: matmul, in: [a, b], out: y}\n"
    "    - {name: small, op: add, in: [s, c], out: z}\n"
    "mesh: {axes: [tp=8]}\n"
    "placements: {a: S(1), b: S(0)}\n"
    "strategies:\n"
    "  mm: {in: [S(1), S(0)], out: P(sum)}\n"
    "  small: {in: [R, R], out: R}\n";

static void test_ring_allreduce(void **state) {
  (void)state;
  plan_plan *p = load(allreduce_plan);
  plan_cost_model *m = model(p, "h100");
  unit_efficiency(m);
  int y = tensor(p, "y");
  plan_placement from = pl(p, "P(sum)", 2), to = pl(p, "R", 2);
  double t;
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &from, &to), PLAN_OK);
  /* k = 8 in one host: alpha 2 us, beta 450 GB/s. n = 8192^2 x 4 bytes;
   * a ring sends 2 (k-1)/k n: 2 (k-1) alpha + 2 (k-1)/k n / beta */
  double k = 8, n = 8192.0 * 8192 * 4, a = 2e-6, b = 450e9;
  double ring = 2 * (k - 1) * a + 2 * (k - 1) / k * n / b;
  double tree = 2 * 3 * a + 2 * n / b;
  assert_true(ring < tree);
  near(t, ring, "ring all-reduce of 256 MiB over 8");
  /* a small tensor: the tree's log2 k latency terms win */
  int z = tensor(p, "z");
  plan_placement fz = pl(p, "P(sum)", 1), tz = pl(p, "R", 1);
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, z, &fz, &tz), PLAN_OK);
  double nz = 256 * 4;
  near(t,
       fmin(2 * (k - 1) * a + 2 * (k - 1) / k * nz / b, 2 * 3 * a + 2 * nz / b),
       "small all-reduce");
  near(t, 2 * 3 * a + 2 * nz / b, "small all-reduce is a tree");
  /* all-gather: (k-1) alpha + (k-1)/k n / beta; reduce-scatter the same */
  plan_placement s0 = pl(p, "S(0)", 2);
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &s0, &to), PLAN_OK);
  near(t, (k - 1) * a + (k - 1) / k * n / b, "all-gather");
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &from, &s0), PLAN_OK);
  near(t, (k - 1) * a + (k - 1) / k * n / b, "reduce-scatter");
  /* all-to-all: S(0) -> S(1) moves (k-1)/k of the local block */
  plan_placement s1 = pl(p, "S(1)", 2);
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &s0, &s1), PLAN_OK);
  near(t, (k - 1) * a + (k - 1) / k * (n / k) / b, "all-to-all");
  /* equal placements cost nothing; a local slice only a copy */
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &to, &to), PLAN_OK);
  near(t, 0, "no change");
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &to, &s0), PLAN_OK);
  near(t, n / k / 3.35e12 + 4e-6, "slice");
  /* the string API agrees */
  double t2;
  assert_int_equal(plan_cost_redistribute(&t2, m, p, y, "P(sum)", "R"),
                   PLAN_OK);
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, y, &from, &to), PLAN_OK);
  near(t2, t, "string API");
  assert_int_equal(plan_cost_redistribute(&t2, m, p, y, "S(7)", "R"),
                   PLAN_EINVALID);
  plan_cost_model_free(m);
  plan_free(p);
}

/* A Megatron MLP over dp=2 x tp=8 on two hosts of 8. */
static const char *mlp_hosts(char *buf, size_t size, const char *devices) {
  snprintf(buf, size,
           "libplan: \"0.1\"\n"
           "program:\n"
           "  tensors:\n"
           "    x: {shape: [16, 2048, 4096], dtype: bf16}\n"
           "    w1: {shape: [4096, 16384], dtype: bf16, role: param}\n"
           "    w2: {shape: [16384, 4096], dtype: bf16, role: param}\n"
           "  ops:\n"
           "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
           "    - {name: act, op: gelu, in: [h], out: a}\n"
           "    - {name: fc2, op: matmul, in: [a, w2], out: y}\n"
           "mesh:\n"
           "  axes: [dp=2, tp=8]\n"
           "  devices: %s\n"
           "  devices_per_host: 8\n"
           "placements: {x: S(0)R, w1: RS(1), w2: RS(0)}\n"
           "strategies:\n"
           "  fc1: {in: [S(0)R, RS(1)], out: S(0)S(2)}\n"
           "  act: {in: [S(0)S(2)], out: S(0)S(2)}\n"
           "  fc2: {in: [S(0)S(2), RS(0)], out: S(0)P(sum)}\n"
           "outputs: {y: S(0)R}\n",
           devices);
  return buf;
}

static void test_device_order(void **state) {
  (void)state;
  char a[2048], b[2048];
  /* iota: the tp groups are devices 0-7 and 8-15, each one host. The
   * transposed order puts tp over the even (odd) devices: across hosts. */
  plan_plan *inside = load(mlp_hosts(a, sizeof a, "iota"));
  plan_plan *across =
      load(mlp_hosts(b, sizeof b, "{iota: [8, 2], transpose: [1, 0]}"));
  plan_cost_model *mi = model(inside, "h100");
  plan_cost_model *ma = model(across, "h100");
  assert_true(mi->link[1].source == COST_LINK_INTRA);
  assert_true(ma->link[1].source == COST_LINK_INTER);
  assert_true(mi->link[0].source == COST_LINK_INTER); /* dp crosses hosts */
  assert_true(ma->link[0].source == COST_LINK_INTRA);
  /* the same all-reduce over tp */
  int y = tensor(inside, "y");
  plan_placement from = pl(inside, "S(0)P(sum)", 3),
                 to = pl(inside, "S(0)R", 3);
  double ti, ta;
  assert_int_equal(plan_cost_redist_seconds(&ti, mi, inside, y, &from, &to),
                   PLAN_OK);
  assert_int_equal(plan_cost_redist_seconds(&ta, ma, across, y, &from, &to),
                   PLAN_OK);
  /* local block 8 x 2048 x 4096 bf16; ring over 8 at 450 vs 50 GB/s, x 0.8 */
  double n = 8.0 * 2048 * 4096 * 2, k = 8;
  near(ti, 2 * (k - 1) * 2e-6 + 2 * (k - 1) / k * n / (450e9 * 0.8), "NVLink");
  near(ta, 2 * (k - 1) * 5e-6 + 2 * (k - 1) / k * n / (50e9 * 0.8), "IB");
  assert_true(ta > 5 * ti);
  /* and the whole plan: same sharding, cheaper with tp inside a host */
  plan_cost_report *ri, *ra;
  assert_int_equal(plan_cost_plan(&ri, mi, inside), PLAN_OK);
  assert_int_equal(plan_cost_plan(&ra, ma, across), PLAN_OK);
  assert_true(plan_cost_report_step_seconds(ri) <
              plan_cost_report_step_seconds(ra));
  near(plan_cost_report_compute_seconds(ri),
       plan_cost_report_compute_seconds(ra), "same compute");
  plan_cost_collective_info ci;
  assert_int_equal(plan_cost_report_collective_count(ra), 1);
  assert_int_equal(plan_cost_report_collective(&ci, ra, 0), PLAN_OK);
  assert_string_equal(ci.kind, "all_reduce");
  assert_string_equal(ci.axis, "tp");
  assert_string_equal(ci.link, "inter_host");
  assert_string_equal(ci.algorithm, "ring");
  assert_int_equal(ci.group, 8);
  near(ci.seconds, ta, "report row");
  /* a search that permutes the order updates the model */
  assert_int_equal(plan_cost_model_update_mesh(mi, across), PLAN_OK);
  double t2;
  assert_int_equal(plan_cost_redist_seconds(&t2, mi, across, y, &from, &to),
                   PLAN_OK);
  near(t2, ta, "updated mesh");
  /* per-axis links override the host figures */
  char c[2400];
  mlp_hosts(c, sizeof c, "iota");
  char *hw = strstr(c, "  devices_per_host: 8\n");
  assert_non_null(hw);
  char with[6000];
  snprintf(with, sizeof with,
           "%.*s  devices_per_host: 8\n  hardware:\n"
           "    name: h100-sxm\n"
           "    links: {tp: {bandwidth: 100e9, latency: 1e-6}}\n%s",
           (int)(hw - c), c, hw + strlen("  devices_per_host: 8\n"));
  plan_plan *ov = load(with);
  plan_cost_model *mo = model(ov, NULL);
  assert_string_equal(plan_cost_model_hardware(mo), "h100-sxm");
  assert_true(mo->link[1].source == COST_LINK_AXIS);
  assert_int_equal(plan_cost_redist_seconds(&t2, mo, ov, y, &from, &to),
                   PLAN_OK);
  near(t2, 2 * (k - 1) * 1e-6 + 2 * (k - 1) / k * n / (100e9 * 0.8), "links");
  plan_cost_model_free(mo);
  plan_free(ov);
  plan_cost_report_free(ri);
  plan_cost_report_free(ra);
  plan_cost_model_free(mi);
  plan_cost_model_free(ma);
  plan_free(inside);
  plan_free(across);
}

/* The plan's step is the sum of what a search adds up: op costs and
 * redistributions between producer and consumer placements. */
static void test_plan_sums(void **state) {
  (void)state;
  char a[2048];
  plan_plan *p = load(mlp_hosts(a, sizeof a, "iota"));
  plan_cost_model *m = model(p, "h200");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  double sum = 0, t;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(plan_cost_op_seconds(&t, m, p, i, NULL, NULL), PLAN_OK);
    sum += t;
    plan_cost_op_info oi;
    assert_int_equal(plan_cost_report_op(&oi, r, (size_t)i), PLAN_OK);
    near(oi.seconds, t, "op row");
  }
  plan_placement from = pl(p, "S(0)P(sum)", 3), to = pl(p, "S(0)R", 3);
  assert_int_equal(
      plan_cost_redist_seconds(&t, m, p, tensor(p, "y"), &from, &to), PLAN_OK);
  sum += t;
  near(plan_cost_report_step_seconds(r), sum, "step = ops + collectives");
  assert_true(plan_cost_report_fits(r));
  assert_string_equal(plan_cost_report_reason(r), "");
  plan_cost_op_info oi;
  assert_int_equal(plan_cost_report_op(&oi, r, 0), PLAN_OK);
  assert_string_equal(oi.name, "fc1");
  assert_string_equal(oi.bound, "compute");
  assert_int_equal(plan_cost_report_op(&oi, r, 3), PLAN_ENOTFOUND);
  /* the writers */
  char *text;
  size_t len;
  assert_int_equal(plan_cost_report_write(&text, &len, r, "text"), PLAN_OK);
  assert_non_null(strstr(text, "all_reduce"));
  assert_non_null(strstr(text, "fits"));
  free(text);
  assert_int_equal(plan_cost_report_write(&text, &len, r, "json"), PLAN_OK);
  assert_non_null(strstr(text, "\"schema\": \"libplan-cost/1\""));
  free(text);
  assert_int_equal(plan_cost_report_write(&text, &len, r, "yaml"), PLAN_OK);
  assert_non_null(strstr(text, "schema: \"libplan-cost/1\""));
  free(text);
  assert_int_equal(plan_cost_report_write(&text, &len, r, "xml"), PLAN_EUSAGE);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- memory -------------------------------------------------------------- */

static const char *train_mlp(char *buf, size_t size, const char *extra) {
  snprintf(
      buf, size,
      "libplan: \"0.1\"\n"
      "program:\n"
      "  tensors:\n"
      "    x: {shape: [64, 128], dtype: f32}\n"
      "    labels: {shape: [64], dtype: i64, range: [0, 10]}\n"
      "    w1: {shape: [128, 256], dtype: f32, role: param}\n"
      "    w2: {shape: [256, 10], dtype: f32, role: param}\n"
      "  ops:\n"
      "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
      "    - {name: act, op: relu, in: [h], out: a}\n"
      "    - {name: fc2, op: matmul, in: [a, w2], out: logits}\n"
      "    - {name: loss, op: cross_entropy, in: [logits, labels], out: l}\n"
      "  loss: l\n"
      "mesh:\n"
      "  axes: [dp=2]\n"
      "%s"
      "placements: {x: S(0), labels: S(0)}\n"
      "strategies:\n"
      "  fc1: {in: [S(0), R], out: S(0)}\n"
      "  act: {in: [S(0)], out: S(0)}\n"
      "  fc2: {in: [S(0), R], out: S(0)}\n"
      "  loss: {in: [S(0), S(0)], out: P(sum)}\n"
      "outputs: {l: R}\n"
      "training:\n"
      "  optimizer: {kind: adam}\n",
      extra);
  return buf;
}

static void test_memory_accounting(void **state) {
  (void)state;
  char a[4096];
  plan_plan *p = load(train_mlp(a, sizeof a, ""));
  plan_cost_model *m = model(p, "h100");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_int_equal(plan_cost_report_memory_count(r), 1);
  plan_cost_memory_info mi;
  assert_int_equal(plan_cost_report_memory(&mi, r, 0), PLAN_OK);
  assert_int_equal(mi.stage, -1);
  double params = (128.0 * 256 + 256 * 10) * 4; /* f32, replicated */
  near(mi.parameters, params, "parameters");
  near(mi.gradients, params, "gradients");
  near(mi.optimizer, 2 * params, "Adam: two f32 states");
  /* saved: op outputs on 32 rows (h, a: 32 x 256; logits 32 x 10; the
   * scalar loss) and the inputs (x 32 x 128 f32, labels 32 i64) */
  double saved = (2 * 32 * 256 + 32 * 10 + 1) * 4.0 + 32 * 128 * 4 + 32 * 8;
  near(mi.activations, saved, "activations");
  /* the largest backward working set: the relu's h and a */
  double work = 2 * 32 * 256 * 4.0;
  near(mi.workspace, work, "workspace");
  near(mi.total, 4 * params + saved + work, "total");
  near(plan_cost_report_memory_peak(r), mi.total, "peak");
  /* the gradients of replicated weights on a dp-split batch are partial:
   * one all-reduce each over dp */
  size_t syncs = 0;
  for (size_t i = 0; i < plan_cost_report_collective_count(r); i++) {
    plan_cost_collective_info ci;
    assert_int_equal(plan_cost_report_collective(&ci, r, i), PLAN_OK);
    if (!strcmp(ci.phase, "grad_sync")) {
      syncs++;
      assert_string_equal(ci.kind, "all_reduce");
      assert_string_equal(ci.axis, "dp");
    }
  }
  assert_int_equal(syncs, 2);
  /* training: backward is 2x forward compute */
  near(r->compute_bwd, 2 * r->compute_fwd, "backward");
  assert_true(r->grad_sync > 0 && r->optimizer_s > 0);

  /* recomputing the relu keeps its output out of the saved set, and
   * costs its forward once more */
  char c[9000];
  snprintf(c, sizeof c, "%s  recompute: [act]\n", a);
  plan_plan *q = load(c);
  plan_cost_report *rq;
  assert_int_equal(plan_cost_plan(&rq, m, q), PLAN_OK);
  plan_cost_memory_info mq;
  assert_int_equal(plan_cost_report_memory(&mq, rq, 0), PLAN_OK);
  near(mq.activations, saved - 32 * 256 * 4.0, "recomputation saves a");
  assert_true(mq.total < mi.total);
  double t;
  assert_int_equal(plan_cost_op_seconds(&t, m, q, 1, NULL, NULL), PLAN_OK);
  near(rq->recompute, t, "recompute time");
  near(plan_cost_report_step_seconds(rq), plan_cost_report_step_seconds(r) + t,
       "step with recomputation");
  plan_cost_report_free(rq);
  plan_free(q);

  /* bf16 parameters with f32 master weights; ZeRO: reduce-scatter into
   * sharded optimizer state, then all-gather the parameters */
  snprintf(c, sizeof c,
           "%s  dtypes: {param: bf16, compute: bf16, grad: bf16}\n"
           "  grad_sync: {w1: reduce_scatter}\n"
           "  optimizer_state: {w1: S(0)}\n",
           a);
  q = load(c);
  assert_int_equal(plan_cost_plan(&rq, m, q), PLAN_OK);
  assert_int_equal(plan_cost_report_memory(&mq, rq, 0), PLAN_OK);
  double w1 = 128.0 * 256, w2 = 256.0 * 10;
  near(mq.parameters, (w1 + w2) * 2, "bf16 parameters");
  near(mq.gradients, w1 / 2 * 2 + w2 * 2, "w1's gradient sharded");
  near(mq.optimizer, w1 / 2 * 12 + w2 * 12, "Adam + master, w1 sharded");
  int rs = 0, ag = 0;
  for (size_t i = 0; i < plan_cost_report_collective_count(rq); i++) {
    plan_cost_collective_info ci;
    assert_int_equal(plan_cost_report_collective(&ci, rq, i), PLAN_OK);
    rs += !strcmp(ci.phase, "grad_sync") && !strcmp(ci.kind, "reduce_scatter");
    ag += !strcmp(ci.phase, "param_gather") && !strcmp(ci.kind, "all_gather");
  }
  assert_int_equal(rs, 1);
  assert_int_equal(ag, 1);
  plan_cost_report_free(rq);
  plan_free(q);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

static void test_does_not_fit(void **state) {
  (void)state;
  char a[4096];
  plan_plan *p = load(
      train_mlp(a, sizeof a, "  hardware: {name: h100-sxm, memory: 200000}\n"));
  plan_cost_model *m = model(p, NULL);
  double v;
  assert_int_equal(plan_cost_model_get(&v, m, "memory"), PLAN_OK);
  near(v, 200000, "the plan's memory figure");
  assert_int_equal(plan_cost_model_get(&v, m, "memory_bandwidth"), PLAN_OK);
  near(v, 3.35e12, "the rest from h100-sxm");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_false(plan_cost_report_fits(r));
  assert_true(plan_cost_report_memory_peak(r) > 200000);
  near(plan_cost_report_memory_capacity(r), 200000, "capacity");
  assert_non_null(strstr(plan_cost_report_reason(r), "does not fit"));
  assert_non_null(strstr(plan_cost_report_reason(r), "optimizer state"));
  char *text;
  size_t len;
  assert_int_equal(plan_cost_report_write(&text, &len, r, "text"), PLAN_OK);
  assert_non_null(strstr(text, "DOES NOT FIT"));
  free(text);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  /* an explicit profile replaces the plan's hardware: it fits an H200 */
  m = model(p, "h200");
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_true(plan_cost_report_fits(r));
  near(plan_cost_report_memory_capacity(r), 141e9, "H200");
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- profiles, parameters, the plan's hardware --------------------------- */

static void test_profiles(void **state) {
  (void)state;
  assert_int_equal(plan_cost_profile_count(), 5);
  assert_string_equal(plan_cost_profile_name(0), "h100-sxm");
  assert_string_equal(plan_cost_profile_name(1), "h200-sxm");
  assert_string_equal(plan_cost_profile_name(2), "a100-80gb");
  assert_string_equal(plan_cost_profile_name(3), "l4");
  assert_string_equal(plan_cost_profile_name(4), "tpu-v5e");
  assert_null(plan_cost_profile_name(5));
  assert_string_equal(plan_cost_profile_resolve("V5E"), "tpu-v5e");
  assert_string_equal(plan_cost_profile_resolve("H100"), "h100-sxm");
  assert_string_equal(plan_cost_profile_resolve("h100-sxm5"), "h100-sxm");
  assert_string_equal(plan_cost_profile_resolve("h200"), "h200-sxm");
  assert_string_equal(plan_cost_profile_resolve("a100"), "a100-80gb");
  assert_string_equal(plan_cost_profile_resolve("A100_80GB"), "a100-80gb");
  assert_null(plan_cost_profile_resolve("tpu-v5"));
  plan_plan *p = load(matmul_1dev);
  plan_cost_model *m = NULL;
  assert_int_equal(plan_cost_model_new(&m, p, "tpu-v5"), PLAN_ENOTFOUND);
  assert_null(m);
  assert_non_null(strstr(plan_error_last()->message, "h100-sxm"));
  static const struct {
    const char *name;
    double bf16, f32, mem, bw, nvlink, ib;
  } want[] = {{"h100", 989.4e12, 67e12, 80e9, 3.35e12, 450e9, 50e9},
              {"h200", 989.4e12, 67e12, 141e9, 4.8e12, 450e9, 50e9},
              {"a100", 312e12, 19.5e12, 80e9, 2.039e12, 300e9, 25e9}};
  for (size_t i = 0; i < 3; i++) {
    m = model(p, want[i].name);
    double v;
    assert_int_equal(plan_cost_model_get(&v, m, "flops.bf16"), PLAN_OK);
    near(v, want[i].bf16, "bf16");
    assert_int_equal(plan_cost_model_get(&v, m, "flops.f32"), PLAN_OK);
    near(v, want[i].f32, "f32");
    assert_int_equal(plan_cost_model_get(&v, m, "memory"), PLAN_OK);
    near(v, want[i].mem, "memory");
    assert_int_equal(plan_cost_model_get(&v, m, "memory_bandwidth"), PLAN_OK);
    near(v, want[i].bw, "memory bandwidth");
    assert_int_equal(plan_cost_model_get(&v, m, "intra_host.bandwidth"),
                     PLAN_OK);
    near(v, want[i].nvlink, "NVLink");
    assert_int_equal(plan_cost_model_get(&v, m, "inter_host.bandwidth"),
                     PLAN_OK);
    near(v, want[i].ib, "InfiniBand");
    plan_cost_model_free(m);
  }
  /* no profile and no hardware in the plan: h100-sxm */
  m = model(p, NULL);
  assert_string_equal(plan_cost_model_hardware(m), "h100-sxm");
  /* parameters */
  assert_int_equal(plan_cost_model_set(m, "efficiency.matmul", 1.5),
                   PLAN_EINVALID);
  assert_int_equal(plan_cost_model_set(m, "memory", -1), PLAN_EINVALID);
  assert_int_equal(plan_cost_model_set(m, "memory", NAN), PLAN_EINVALID);
  assert_int_equal(plan_cost_model_set(m, "nonsense", 1), PLAN_ENOTFOUND);
  assert_int_equal(plan_cost_model_set(m, "kernel_floor", 0), PLAN_OK);
  assert_int_equal(plan_cost_model_set(m, "efficiency.matmul", 1), PLAN_OK);
  double t;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, 2 * 4096.0 * 4096 * 4096 / 989.4e12, "no floor");
  plan_cost_model_free(m);
  plan_cost_model_free(NULL);
  plan_cost_report_free(NULL);
  plan_free(p);
}

static const char custom_hw[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [64, 64], dtype: f32}\n"
    "    w: {shape: [64, 64], dtype: f32, role: param}\n"
    "  ops:\n"
    "    - {name: mm, op: matmul, in: [x, w], out: y}\n"
    "mesh:\n"
    "  axes: [tp=2]\n"
    "  hardware:\n"
    "    name: my-box\n"
    "    flops: {f32: 10e12}\n"
    "    memory: 16e9\n"
    "strategies:\n"
    "  mm: {in: [R, S(1)], out: S(1)}\n";

static void test_bad_hardware(void **state) {
  (void)state;
  plan_plan *p = load(custom_hw);
  plan_cost_model *m = NULL;
  /* no memory_bandwidth, no intra_host bandwidth, and my-box is not a
   * built-in profile to take them from */
  assert_int_equal(plan_cost_model_new(&m, p, NULL), PLAN_EINVALID);
  assert_null(m);
  const plan_error *e = plan_error_last();
  assert_string_equal(e->file, "t.yaml");
  assert_int_equal(e->line, 11);
  assert_int_equal(e->column, 5);
  assert_non_null(strstr(e->message, "memory_bandwidth"));
  assert_non_null(strstr(e->message, "intra_host.bandwidth"));
  assert_null(strstr(e->message, "flops"));
  /* a profile given explicitly needs none of it */
  m = model(p, "a100");
  plan_cost_model_free(m);
  plan_free(p);
  /* given in full it is used as is */
  char full[2048];
  snprintf(full, sizeof full, "%s", custom_hw);
  char *at = strstr(full, "    memory: 16e9\n");
  assert_non_null(at);
  char rest[1024];
  snprintf(rest, sizeof rest, "%s", at + strlen("    memory: 16e9\n"));
  snprintf(at, sizeof full - (size_t)(at - full),
           "    memory: 16e9\n    memory_bandwidth: 1e12\n"
           "    intra_host: {bandwidth: 100e9, latency: 1e-6}\n%s",
           rest);
  p = load(full);
  m = model(p, NULL);
  assert_string_equal(plan_cost_model_hardware(m), "my-box");
  unit_efficiency(m);
  double t;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t,
       fmax(2 * 64.0 * 32 * 64 / 10e12, (64.0 * 64 + 64 * 32 * 2) * 4 / 1e12) +
           4e-6,
       "custom figures");
  plan_cost_model_free(m);
  plan_free(p);
  /* figures the loader refuses, with their position */
  snprintf(full, sizeof full, "%s", custom_hw);
  at = strstr(full, "16e9");
  memcpy(at, "-1e9", 4);
  plan_plan *q = NULL;
  assert_int_equal(plan_load_buffer(&q, full, strlen(full), "t.yaml", NULL),
                   PLAN_EINVALID);
  assert_int_equal(plan_error_last()->line, 11);
  snprintf(full, sizeof full, "%s", custom_hw);
  at = strstr(full, "10e12");
  memcpy(at, ".nan ", 5);
  assert_true(plan_load_buffer(&q, full, strlen(full), "t.yaml", NULL) != 0);
  assert_int_equal(plan_error_last()->line, 12);
  assert_true(plan_error_last()->column > 0);
}

/* ---- calibration --------------------------------------------------------- */

static void test_calibration(void **state) {
  (void)state;
  char a[2048];
  plan_plan *p = load(mlp_hosts(a, sizeof a, "iota"));
  plan_cost_model *m = model(p, "h100");
  double t0, t;
  assert_int_equal(plan_cost_op_seconds(&t0, m, p, 0, NULL, NULL), PLAN_OK);
  /* a measured time per call */
  assert_int_equal(plan_cost_model_calibrate(m, "matmul", 1e-3, 0), PLAN_OK);
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, 1e-3, "fixed");
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 2, NULL, NULL), PLAN_OK);
  near(t, 1e-3, "fixed, both matmuls");
  /* an exact name beats the kind; a glob too */
  assert_int_equal(plan_cost_model_calibrate(m, "fc2", 2e-3, 0), PLAN_OK);
  assert_int_equal(plan_cost_model_calibrate(m, "f*", 0, 5e14), PLAN_OK);
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 2, NULL, NULL), PLAN_OK);
  near(t, 2e-3, "exact name");
  /* fc1 by the glob's rate: 8 x 2048 x 4096 x 2048 x 2 FLOPs at 500 TFLOP/s */
  double flops = 2.0 * 8 * 2048 * 4096 * 2048;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, flops / 5e14 + 4e-6, "glob rate");
  /* the gelu (named act) matches neither */
  cost_op_eval e;
  assert_int_equal(plan_cost_op_eval_at(&e, m, p, 1, NULL, NULL, 1), PLAN_OK);
  assert_int_equal(e.bound, COST_BOUND_MEMORY);
  /* a table: linear between points, proportional past the last */
  plan_cost_model *m2 = model(p, "h100");
  const double sizes[] = {1e9, 1e12}, secs[] = {1e-5, 1e-2};
  assert_int_equal(
      plan_cost_model_calibrate_table(m2, "matmul", sizes, secs, 2), PLAN_OK);
  assert_int_equal(plan_cost_op_seconds(&t, m2, p, 0, NULL, NULL), PLAN_OK);
  near(t, 1e-5 + (1e-2 - 1e-5) * (flops - 1e9) / (1e12 - 1e9), "table");
  const double bad[] = {1e9, 1e9};
  assert_int_equal(plan_cost_model_calibrate_table(m2, "matmul", bad, secs, 2),
                   PLAN_EINVALID);
  assert_int_equal(plan_cost_model_calibrate(m2, "matmul", 1, 1),
                   PLAN_EINVALID);
  assert_int_equal(plan_cost_model_calibrate(m2, "", 1, 0), PLAN_EUSAGE);
  /* collectives: a measured bandwidth replaces the link's */
  int y = tensor(p, "y");
  plan_placement from = pl(p, "S(0)P(sum)", 3), to = pl(p, "S(0)R", 3);
  assert_int_equal(plan_cost_model_calibrate(m2, "all_reduce", 0, 1e11),
                   PLAN_OK);
  assert_int_equal(plan_cost_redist_seconds(&t, m2, p, y, &from, &to), PLAN_OK);
  double n = 8.0 * 2048 * 4096 * 2, k = 8;
  near(t, 2 * (k - 1) * 2e-6 + 2 * (k - 1) / k * n / 1e11,
       "measured bus bandwidth");
  plan_cost_model_free(m2);

  /* a calibration file */
  m2 = model(p, "h100");
  static const char file[] =
      "libplan-calibration: \"0.1\"\n"
      "hardware: h100-sxm\n"
      "parameters: {kernel_floor: 1e-6, efficiency.link: 0.9}\n"
      "ops:\n"
      "  gelu: {seconds: 3e-4}\n"
      "  \"fc*\": {table: [[1e9, 1e-5], [1e12, 1e-2]]}\n"
      "collectives:\n"
      "  all_reduce: {seconds: 7e-3}\n";
  assert_int_equal(
      plan_cost_model_load_calibration_buffer(m2, file, strlen(file), "c.yaml"),
      PLAN_OK);
  assert_int_equal(plan_cost_op_seconds(&t, m2, p, 1, NULL, NULL), PLAN_OK);
  near(t, 3e-4, "file: fixed");
  assert_int_equal(plan_cost_op_seconds(&t, m2, p, 0, NULL, NULL), PLAN_OK);
  near(t, 1e-5 + (1e-2 - 1e-5) * (flops - 1e9) / (1e12 - 1e9), "file: table");
  assert_int_equal(plan_cost_redist_seconds(&t, m2, p, y, &from, &to), PLAN_OK);
  near(t, 7e-3, "file: collective");
  double v;
  assert_int_equal(plan_cost_model_get(&v, m2, "kernel_floor"), PLAN_OK);
  near(v, 1e-6, "file: parameter");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m2, p), PLAN_OK);
  plan_cost_op_info oi;
  assert_int_equal(plan_cost_report_op(&oi, r, 1), PLAN_OK);
  assert_string_equal(oi.bound, "calibrated");
  plan_cost_collective_info ci;
  assert_int_equal(plan_cost_report_collective(&ci, r, 0), PLAN_OK);
  assert_string_equal(ci.algorithm, "calibrated");
  plan_cost_report_free(r);

  /* bad files: positioned errors, and the model is left as it was */
  static const char bad_table[] =
      "libplan-calibration: \"0.1\"\n"
      "parameters: {kernel_floor: 9e-6}\n"
      "ops:\n"
      "  matmul: {table: [[1e9, 1e-5], [1e8, 1e-2]]}\n";
  assert_int_equal(plan_cost_model_load_calibration_buffer(
                       m2, bad_table, strlen(bad_table), "bad.yaml"),
                   PLAN_EINVALID);
  assert_string_equal(plan_error_last()->file, "bad.yaml");
  assert_int_equal(plan_error_last()->line, 4);
  assert_int_equal(plan_error_last()->column, 33);
  assert_non_null(strstr(plan_error_last()->message, "increase"));
  assert_int_equal(plan_cost_model_get(&v, m2, "kernel_floor"), PLAN_OK);
  near(v, 1e-6, "unchanged after a failed load");
  assert_int_equal(plan_cost_op_seconds(&t, m2, p, 1, NULL, NULL), PLAN_OK);
  near(t, 3e-4, "entries unchanged");
  static const char bad_key[] = "libplan-calibration: \"0.1\"\n"
                                "collectives:\n"
                                "  all_reduce: {flops_per_second: 1e9}\n";
  assert_int_equal(plan_cost_model_load_calibration_buffer(
                       m2, bad_key, strlen(bad_key), "bad.yaml"),
                   PLAN_ESCHEMA);
  assert_int_equal(plan_error_last()->line, 3);
  static const char bad_param[] = "libplan-calibration: \"0.1\"\n"
                                  "parameters:\n"
                                  "  efficiency.memory: 2\n";
  assert_int_equal(plan_cost_model_load_calibration_buffer(
                       m2, bad_param, strlen(bad_param), "bad.yaml"),
                   PLAN_EINVALID);
  assert_int_equal(plan_error_last()->line, 3);
  assert_int_equal(plan_error_last()->column, 22);
  static const char bad_coll[] = "libplan-calibration: \"0.1\"\n"
                                 "collectives:\n"
                                 "  broadcast: {seconds: 1}\n";
  assert_int_equal(plan_cost_model_load_calibration_buffer(
                       m2, bad_coll, strlen(bad_coll), "bad.yaml"),
                   PLAN_EINVALID);
  assert_int_equal(plan_error_last()->line, 3);
  assert_int_equal(plan_error_last()->column, 3);
  static const char no_header[] = "ops: {}\n";
  assert_int_equal(plan_cost_model_load_calibration_buffer(
                       m2, no_header, strlen(no_header), "bad.yaml"),
                   PLAN_ESCHEMA);
  assert_int_equal(plan_cost_model_load_calibration(m2, "/nonexistent/c.yaml"),
                   PLAN_EIO);
  plan_cost_model_free(m2);
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- pipelines ----------------------------------------------------------- */

static void test_schedule_formulas(void **state) {
  (void)state;
  plan_plan *p = calloc(1, sizeof *p);
  assert_non_null(p);
  p->has_mesh = true;
  p->mesh.naxes = 1;
  p->mesh.axis_sizes[0] = 4;
  p->pipeline.present = true;
  p->pipeline.axis = 0;
  p->pipeline.nstages = 4;
  p->pipeline.microbatches = 8;
  p->training.present = true;
  double f[8] = {1, 1, 1, 1, 1, 1, 1, 1}, b[8] = {2, 2, 2, 2, 2, 2, 2, 2},
         w[8] = {1, 1, 1, 1, 1, 1, 1, 1}, in[8];
  double step, bubble, cs, cb;
  /* equal stages: the schedule's run gives the textbook figures */
  static const int kinds[] = {PLAN_SCHED_1F1B, PLAN_SCHED_GPIPE,
                              PLAN_SCHED_ZB_H1};
  for (int k = 0; k < 3; k++) {
    p->pipeline.schedule = (plan_schedule_kind)kinds[k];
    assert_int_equal(plan_cost_schedule_time(&step, &bubble, in, p, f, b, w, 4),
                     PLAN_OK);
    assert_int_equal(plan_cost_schedule_closed_form(&cs, &cb, p, f, b, w, 4),
                     PLAN_OK);
    near(step, cs, "simulated = closed form");
    near(bubble, cb, "bubble");
    if (kinds[k] == PLAN_SCHED_ZB_H1) {
      /* m (F + B) + (R - 1)(F + B - W), B the input half (1 here) */
      near(step, 8 * 3.0 + 3 * 1.0, "zb-h1");
    } else {
      near(step, (8 + 3) * 3.0, "(m + R - 1)(F + B)");
      near(bubble, 3 * 3.0, "(R - 1)(F + B)");
    }
    /* 1f1b holds R - s microbatches on stage s, gpipe all m */
    if (kinds[k] == PLAN_SCHED_GPIPE) {
      near(in[0], 8, "gpipe stage 0");
      near(in[3], 8, "gpipe last stage");
    } else if (kinds[k] == PLAN_SCHED_1F1B) {
      near(in[0], 4, "1f1b stage 0");
      near(in[3], 1, "1f1b last stage");
    }
  }
  /* interleaved, 8 stages on 4 ranks: the fill shrinks by v = 2 */
  p->pipeline.schedule = PLAN_SCHED_INTERLEAVED_1F1B;
  p->pipeline.nstages = 8;
  assert_int_equal(plan_cost_schedule_closed_form(&cs, &cb, p, f, b, w, 8),
                   PLAN_OK);
  near(cs, 8 * 6.0 + 3 * 6.0 / 2, "interleaved, closed form");
  assert_int_equal(plan_cost_schedule_time(&step, &bubble, in, p, f, b, w, 8),
                   PLAN_OK);
  assert_true(step < (8 + 3) * 6.0); /* better than 1f1b's fill */
  assert_true(step >= 8 * 6.0);
  /* the zero-bubble kinds a plan names from format 1.1 on, 8 stages on 4
   * ranks (v = 2) with m = 8 (>= 2R): the schedule's makespan 3 v m + R - 1
   * (F 1, I 1, W 1), every rank idle R - 1 */
  static const int zb[] = {PLAN_SCHED_INTERLEAVED_ZB, PLAN_SCHED_ZBV,
                           PLAN_SCHED_DUALPIPEV};
  for (int k = 0; k < 3; k++) {
    p->pipeline.schedule = (plan_schedule_kind)zb[k];
    assert_int_equal(plan_cost_schedule_time(&step, &bubble, in, p, f, b, w, 8),
                     PLAN_OK);
    near(step, 3 * 2 * 8 + 4 - 1, "3 v m + R - 1");
    near(bubble, 4 - 1, "R - 1");
  }
  /* looped-bfs: interleaved 1F1B's time, every microbatch held */
  p->pipeline.schedule = PLAN_SCHED_LOOPED_BFS;
  assert_int_equal(plan_cost_schedule_time(&step, &bubble, in, p, f, b, w, 8),
                   PLAN_OK);
  near(in[0], 8, "looped-bfs stage 0 holds all m");
  /* unequal stages: the slow stage paces the pipeline */
  p->pipeline.schedule = PLAN_SCHED_1F1B;
  p->pipeline.nstages = 4;
  f[2] = 2;
  b[2] = 4;
  assert_int_equal(plan_cost_schedule_time(&step, &bubble, in, p, f, b, w, 4),
                   PLAN_OK);
  /* at least: the slow stage busy m times, the first microbatch's forward
   * reaching it, the last one's backward leaving it */
  assert_true(step >= 8 * 6.0 + 2 * 1 + 2 * 2);
  assert_true(step <= (8 + 3) * 6.0);
  /* forward only: a stream, one microbatch in flight */
  p->training.present = false;
  double zero[4] = {0, 0, 0, 0};
  f[2] = 1;
  assert_int_equal(
      plan_cost_schedule_time(&step, &bubble, in, p, f, zero, zero, 4),
      PLAN_OK);
  near(step, 8 + 3, "stream");
  near(in[0], 1, "forward only holds one");
  free(p);
}

static void test_pipeline_plan(void **state) {
  (void)state;
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, "examples/pipeline-1f1b.plan.yaml"), PLAN_OK);
  plan_cost_model *m = model(p, "h100");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_int_equal(plan_cost_report_memory_count(r), 4);
  plan_cost_memory_info m0, m3;
  assert_int_equal(plan_cost_report_memory(&m0, r, 0), PLAN_OK);
  assert_int_equal(plan_cost_report_memory(&m3, r, 3), PLAN_OK);
  near(m0.inflight, 4, "stage 0 holds 4 microbatches");
  near(m3.inflight, 1, "the last stage 1");
  assert_true(plan_cost_report_bubble_seconds(r) > 0);
  size_t sends = 0;
  for (size_t i = 0; i < plan_cost_report_collective_count(r); i++) {
    plan_cost_collective_info ci;
    assert_int_equal(plan_cost_report_collective(&ci, r, i), PLAN_OK);
    if (!strcmp(ci.kind, "send")) {
      sends++;
      near(ci.calls, 8, "a send per microbatch");
    }
  }
  assert_int_equal(sends, 3);
  plan_cost_op_info oi;
  assert_int_equal(plan_cost_report_op(&oi, r, 0), PLAN_OK);
  assert_int_equal(oi.stage, 0);
  assert_true(oi.backward_seconds > 0);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

/* Interleaved 1F1B, 4 stages on 2 pipeline ranks (stage s on rank s mod
 * 2): a device holds both of its stages, so the peak is their parameters,
 * gradients, optimizer state and activations together (the activations as
 * held at the one moment the rank holds most, not each stage's own peak),
 * with the larger working set; never one stage's row alone. */
static void test_interleaved_memory(void **state) {
  (void)state;
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, "examples/transformer4-interleaved.plan.yaml"),
                   PLAN_OK);
  plan_cost_model *m = model(p, "h100");
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_int_equal(plan_cost_report_memory_count(r), 4);
  plan_cost_memory_info mi[4];
  for (int s = 0; s < 4; s++)
    assert_int_equal(plan_cost_report_memory(&mi[s], r, (size_t)s), PLAN_OK);
  double worst = 0;
  for (int k = 0; k < 2; k++) {
    const plan_cost_memory_info *a = &mi[k], *b = &mi[k + 2];
    double held = a->parameters + a->gradients + a->optimizer + a->activations +
                  b->parameters + b->gradients + b->optimizer + b->activations +
                  (a->workspace > b->workspace ? a->workspace : b->workspace);
    assert_true(held > a->total && held > b->total);
    if (held > worst)
      worst = held;
  }
  near(plan_cost_report_memory_peak(r), worst, "the peak: a rank's stages");
  /* a stage's activations count what it holds at its rank's peak: on rank
   * 0 (stages 0 and 2) at least one microbatch of each, never more than
   * the 4 there are */
  assert_true(mi[0].inflight >= 1 && mi[2].inflight >= 1);
  assert_true(mi[0].inflight + mi[2].inflight <= 2 * 4);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- misuse
 * ----------------------------------------------------------------------------
 */

static void test_usage(void **state) {
  (void)state;
  plan_cost_model *m = NULL;
  assert_int_equal(plan_cost_model_new(&m, NULL, NULL), PLAN_EUSAGE);
  plan_plan *p = load(matmul_1dev);
  m = model(p, NULL);
  double t;
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 7, NULL, NULL), PLAN_EUSAGE);
  assert_int_equal(plan_cost_redistribute(&t, m, p, 99, "R", "R"), PLAN_EUSAGE);
  const char *in[] = {"S(9)", "R"};
  assert_int_equal(plan_cost_op(&t, m, p, 0, in, NULL), PLAN_EINVALID);
  plan_plan *other = load(small_ops);
  plan_cost_report *r = NULL;
  assert_int_equal(plan_cost_plan(&r, m, other), PLAN_EUSAGE);
  assert_null(r);
  assert_int_equal(plan_cost_model_update_mesh(m, other), PLAN_EUSAGE);
  plan_free(other);
  plan_cost_model_free(m);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_one_device),
      cmocka_unit_test(test_matmul_sharded),
      cmocka_unit_test(test_memory_bound_ops),
      cmocka_unit_test(test_ring_allreduce),
      cmocka_unit_test(test_device_order),
      cmocka_unit_test(test_plan_sums),
      cmocka_unit_test(test_memory_accounting),
      cmocka_unit_test(test_does_not_fit),
      cmocka_unit_test(test_profiles),
      cmocka_unit_test(test_bad_hardware),
      cmocka_unit_test(test_calibration),
      cmocka_unit_test(test_schedule_formulas),
      cmocka_unit_test(test_pipeline_plan),
      cmocka_unit_test(test_interleaved_memory),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
