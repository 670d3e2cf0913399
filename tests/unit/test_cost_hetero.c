/* The cost model on unlike devices and on a topology (format 1.1 IR set
 * directly): each rank's own piece at its own profile's speed, the slowest
 * rank's time, memory per device, collectives priced on the levels a group
 * crosses and on a torus ring's hops, and the placement search finding the
 * assignment known by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_device.h"
#include "cost/cost_model.h"
#include "ir/placement.h"
#include "libplan/cost.h"
#include "libplan/plan.h"
#include "libplan/space.h"
#include "search/placement_search.h"

static plan_plan *load(const char *text) {
  plan_plan *p = NULL;
  if (plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL)) {
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

static void near(double got, double want, const char *what) {
  if (fabs(got - want) > 1e-9 * fabs(want) + 1e-15)
    fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

/* fc: x [1024, 4096] @ w [4096, 4096], bf16, batch split over dp=2 */
static const char *dp_plan =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [1024, 4096], dtype: bf16}\n"
    "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: fc, op: matmul, in: [x, w], out: y}\n"
    "mesh: {axes: [dp=2]}\n"
    "placements: {x: S(0), w: R}\n"
    "strategies:\n"
    "  fc: {in: [S(0), R], out: S(0)}\n"
    "outputs: {y: S(0)}\n";

static void test_profiles_per_device(void **state) {
  (void)state;
  plan_plan *p = load(dp_plan);
  plan_hardware prof[2];
  memset(prof, 0, sizeof prof);
  prof[0].name = "h100-sxm";
  prof[1].name = "a100-80gb";
  int devp[2] = {0, 1};
  /* the uniform model before the profiles */
  plan_cost_model *m0 = model(p, NULL);
  double t_uniform;
  assert_int_equal(plan_cost_op_seconds(&t_uniform, m0, p, 0, NULL, NULL),
                   PLAN_OK);
  double flops = 2.0 * 512 * 4096 * 4096;
  near(t_uniform, flops / (989.4e12 * 0.7) + 4e-6, "h100 everywhere");
  p->mesh.profiles = prof;
  p->mesh.nprofiles = 2;
  p->mesh.device_profile = devp;
  plan_cost_model *m = model(p, NULL);
  assert_true(plan_cost_model_hetero(m));
  assert_string_equal(plan_cost_model_hardware(m), "h100-sxm+a100-80gb");
  double t0, t1, t;
  assert_int_equal(plan_cost_op_rank_seconds(&t0, m, p, 0, 0, NULL, NULL),
                   PLAN_OK);
  assert_int_equal(plan_cost_op_rank_seconds(&t1, m, p, 0, 1, NULL, NULL),
                   PLAN_OK);
  near(t0, flops / (989.4e12 * 0.7) + 4e-6, "rank 0 on the h100");
  near(t1, flops / (312e12 * 0.7) + 4e-6, "rank 1 on the a100");
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, t1, "the slowest rank");
  near(plan_cost_device_memory(m, 1), 80e9, "a100 memory");
  /* ratios 3:1 give the h100 three quarters of the batch */
  int64_t w[2] = {3, 1};
  plan_ratios rs = {0, 2, w};
  p->mesh.ratios = &rs;
  p->mesh.nratios = 1;
  p->placements[0].pl.ax[0].ratio = 1;
  p->strategies[0].in[0].ax[0].ratio = 1;
  p->strategies[0].out[0].ax[0].ratio = 1;
  assert_int_equal(plan_cost_op_rank_seconds(&t0, m, p, 0, 0, NULL, NULL),
                   PLAN_OK);
  assert_int_equal(plan_cost_op_rank_seconds(&t1, m, p, 0, 1, NULL, NULL),
                   PLAN_OK);
  near(t0, 2.0 * 768 * 4096 * 4096 / (989.4e12 * 0.7) + 4e-6, "768 rows");
  near(t1, 2.0 * 256 * 4096 * 4096 / (312e12 * 0.7) + 4e-6, "256 rows");
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, t0 > t1 ? t0 : t1, "the slowest rank with ratios");
  assert_true(t < t_uniform * 989.4 / 312); /* better than even pieces */
  const plan_tensor *x = &p->program->tensors[0];
  near(plan_cost_rank_numel(m, p, x, &p->placements[0].pl, 0), 768.0 * 4096,
       "rank 0's piece");
  /* memory: each device against its own capacity */
  plan_cost_model_free(m);
  prof[1].memory = 1e6; /* a device too small for w */
  m = model(p, NULL);
  plan_cost_report *r;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_false(plan_cost_report_fits(r));
  assert_non_null(strstr(plan_cost_report_reason(r), "device 1"));
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_cost_model_free(m0);
  p->mesh.profiles = NULL;
  p->mesh.nprofiles = 0;
  p->mesh.device_profile = NULL;
  p->mesh.ratios = NULL;
  p->mesh.nratios = 0;
  plan_free(p);
}

/* y = x @ w contracted over sp, all-reduced: x [1024, 4096], w sharded on
 * its rows */
static const char *sp_plan =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [1024, 4096], dtype: bf16}\n"
    "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: fc, op: matmul, in: [x, w], out: y}\n"
    "mesh: {axes: [sp=16]}\n"
    "placements: {x: S(1), w: S(0)}\n"
    "strategies:\n"
    "  fc: {in: [S(1), S(0)], out: P(sum)}\n"
    "outputs: {y: R}\n";

static void test_torus_ring(void **state) {
  (void)state;
  plan_plan *p = load(sp_plan);
  plan_topology topo;
  memset(&topo, 0, sizeof topo);
  topo.kind = PLAN_TOPO_TORUS;
  topo.ndims = 2;
  topo.dims[0] = topo.dims[1] = 4;
  topo.wrap[0] = topo.wrap[1] = true;
  topo.link = (plan_link){45e9, 1e-6};
  p->mesh.topology = &topo;
  plan_cost_model *m = model(p, "h100");
  /* row-major: the row ends are 2 hops (down and round) */
  assert_true(m->link[0].source == COST_LINK_TOPO);
  near(m->taxis[0].ring_hops, 2, "row-major hops");
  near(m->taxis[0].ring_factor, 2, "row-major factor");
  plan_placement from, to;
  plan_placement_parse(&from, "P(sum)", 6, 1, NULL, 0, NULL);
  plan_placement_parse(&to, "R", 1, 1, NULL, 0, NULL);
  double t;
  assert_int_equal(plan_cost_redist_seconds(&t, m, p, 2, &from, &to), PLAN_OK);
  double n = 1024.0 * 4096 * 2, k = 16, beta = 45e9 * 0.8;
  near(t, 2 * (k - 1) * 2e-6 + 2 * (k - 1) / k * n * 2 / beta, "row-major");
  /* the snake curve: every ring edge one hop */
  int64_t curve[16];
  assert_int_equal(plan_placement_curve(curve, &topo, 16, "snake"), PLAN_OK);
  assert_int_equal(curve[4], 7);
  assert_int_equal(curve[15], 12);
  assert_int_equal(plan_set_mesh_devices(p, curve), PLAN_OK);
  assert_int_equal(plan_cost_model_update_mesh(m, p), PLAN_OK);
  near(m->taxis[0].ring_factor, 1, "snake factor");
  double ts;
  assert_int_equal(plan_cost_redist_seconds(&ts, m, p, 2, &from, &to), PLAN_OK);
  near(ts, 2 * (k - 1) * 1e-6 + 2 * (k - 1) / k * n / beta, "snake");
  /* without wraparound the snake's closing edge is 3 hops */
  topo.wrap[0] = topo.wrap[1] = false;
  assert_int_equal(plan_cost_model_update_mesh(m, p), PLAN_OK);
  near(m->taxis[0].ring_hops, 3, "snake on a mesh");
  topo.wrap[0] = topo.wrap[1] = true;
  /* the search: from row-major, snake is the assignment to find */
  assert_int_equal(plan_set_mesh_devices(p, NULL), PLAN_OK);
  plan_placement_choice ch;
  assert_int_equal(plan_placement_search(&ch, p, "h100"), PLAN_OK);
  assert_string_equal(ch.curve, "snake");
  assert_true(ch.step < ch.default_step);
  assert_int_equal(ch.candidates, 4); /* default, row-major, snake, tiled */
  print_message("placement search: %d candidates in %.3f ms, %.4g -> %.4g s\n",
                ch.candidates, ch.seconds * 1e3, ch.default_step, ch.step);
  assert_int_equal(p->mesh.devices[4], 7);
  plan_cost_model_free(m);
  p->mesh.topology = NULL;
  plan_free(p);
}

/* tp=4 all-reduces inside an NVLink island of 4 with host-major order;
 * interleaved they cross to the network */
static const char *tp_plan =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [1024, 4096], dtype: bf16}\n"
    "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: fc, op: matmul, in: [x, w], out: y}\n"
    "mesh: {axes: [dp=2, tp=4]}\n"
    "placements: {x: S(0)S(1), w: RS(0)}\n"
    "strategies:\n"
    "  fc: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}\n"
    "outputs: {y: S(0)R}\n";

static void test_levels(void **state) {
  (void)state;
  plan_plan *p = load(tp_plan);
  plan_topology topo;
  memset(&topo, 0, sizeof topo);
  topo.kind = PLAN_TOPO_LEVELS;
  topo.nlevels = 2;
  topo.levels[0] = (plan_topo_level){"nvlink", 4, {450e9, 2e-6}};
  topo.levels[1] = (plan_topo_level){"ib", 0, {50e9, 5e-6}};
  p->mesh.topology = &topo;
  plan_cost_model *m = model(p, "h100");
  assert_string_equal(m->taxis[1].label, "nvlink");
  assert_string_equal(m->taxis[0].label, "ib");
  near(m->link[1].bandwidth, 450e9 * 0.8, "tp on NVLink");
  near(m->link[0].bandwidth, 50e9 * 0.8, "dp on IB");
  /* interleaved: the tp groups cross islands */
  int64_t curve[8];
  assert_int_equal(plan_placement_curve(curve, &topo, 8, "interleaved"),
                   PLAN_OK);
  assert_int_equal(curve[1], 4);
  /* the search keeps tp inside an island: the default order */
  int64_t bad[8];
  for (int i = 0; i < 8; i++)
    bad[i] = curve[i];
  assert_int_equal(plan_set_mesh_devices(p, bad), PLAN_OK);
  assert_int_equal(plan_cost_model_update_mesh(m, p), PLAN_OK);
  assert_string_equal(m->taxis[1].label, "ib");
  plan_placement_choice ch;
  assert_int_equal(plan_placement_search(&ch, p, "h100"), PLAN_OK);
  assert_string_equal(ch.curve, "host-major");
  assert_string_equal(ch.order, "dp,tp");
  assert_true(ch.step < ch.default_step);
  for (int r = 0; r < 8; r++)
    assert_int_equal(plan_mesh_device(p, r), r);
  plan_cost_model_free(m);
  p->mesh.topology = NULL;
  plan_free(p);
}

/* memory per device with ratios: each rank counts its own piece */
static const char *ratio_mem_plan =
    "libplan: \"1.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [4096, 1024], dtype: bf16}\n"
    "    b: {shape: [4096, 1024], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: a, op: add, in: [x, b], out: y}\n"
    "mesh: {axes: [dp=2]}\n"
    "placements: {x: \"S(0|%s)\", b: \"S(0|%s)\"}\n"
    "strategies:\n"
    "  a: {in: [\"S(0|%s)\", \"S(0|%s)\"], out: [\"S(0|%s)\"]}\n"
    "outputs: {y: \"S(0|%s)\"}\n";

static void mem_of(const char *w, double *peak, double *params,
                   const char *profile, const char *const *hw) {
  char text[1024];
  snprintf(text, sizeof text, ratio_mem_plan, w, w, w, w, w, w);
  plan_plan *p = load(text);
  if (hw)
    assert_int_equal(plan_set_mesh_device_hardware(p, hw), PLAN_OK);
  plan_cost_model *m = model(p, profile);
  plan_cost_report *r = NULL;
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  *peak = (double)plan_cost_report_memory_peak(r);
  plan_cost_memory_info mi;
  assert_int_equal(plan_cost_report_memory(&mi, r, 0), PLAN_OK);
  *params = mi.parameters;
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

static void test_memory_own_piece(void **state) {
  (void)state;
  double rows = 4096, cols = 1024, bf16 = 2, peak, params;
  /* 3:1: rank 0 holds three quarters of x, b and y */
  mem_of("3:1", &peak, &params, "h100", NULL);
  near(params, rows * 3 / 4 * cols * bf16, "the 3:1 rank's parameters");
  near(peak, 3 * rows * 3 / 4 * cols * bf16, "the 3:1 rank's peak");
  /* 1:1 ratios: the even pieces */
  double even_peak, even_params;
  mem_of("1:1", &even_peak, &even_params, "h100", NULL);
  near(even_params, rows / 2 * cols * bf16, "even parameters");
  near(even_peak, 3 * rows / 2 * cols * bf16, "even peak");
  /* 1:3: the larger piece is rank 1's, the report names it */
  mem_of("1:3", &peak, &params, "h100", NULL);
  near(peak, 3 * rows * 3 / 4 * cols * bf16, "the 1:3 rank's peak");
  /* per-device hardware: the same pieces */
  static const char *const hw[] = {"h100", "a100"};
  mem_of("3:1", &peak, &params, NULL, hw);
  near(peak, 3 * rows * 3 / 4 * cols * bf16, "per device, 3:1");
}

/* the public what-if setters and the placement search's options */
static void test_whatif_api(void **state) {
  (void)state;
  plan_plan *p = load(sp_plan);
  assert_int_equal(plan_mesh_topology_kind(p), -1);
  plan_topology_spec t;
  memset(&t, 0, sizeof t);
  t.torus = 1;
  t.ndims = 2;
  t.dims[0] = 4;
  t.dims[1] = 3;
  t.wrap[0] = t.wrap[1] = 1;
  t.bandwidth = 45e9;
  t.latency = 1e-6;
  assert_int_equal(plan_set_mesh_topology(p, &t), PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "12 devices"));
  assert_int_equal(plan_mesh_topology_kind(p), -1);
  t.dims[1] = 4;
  t.bandwidth = 0;
  assert_int_equal(plan_set_mesh_topology(p, &t), PLAN_EINVALID);
  t.bandwidth = 45e9;
  /* levels whose sizes would overflow their product: refused, no trap */
  plan_topology_spec big;
  memset(&big, 0, sizeof big);
  big.nlevels = 3;
  big.level_size[0] = 4;
  big.level_size[1] = (int64_t)1 << 62;
  for (int l = 0; l < 3; l++)
    big.level_bandwidth[l] = 1e9;
  assert_int_equal(plan_set_mesh_topology(p, &big), PLAN_EINVALID);
  big.level_size[1] = INT64_MAX;
  assert_int_equal(plan_set_mesh_topology(p, &big), PLAN_EINVALID);
  big.nlevels = 2; /* the last level's size alone past the count */
  assert_int_equal(plan_set_mesh_topology(p, &big), PLAN_EINVALID);
  assert_int_equal(plan_mesh_topology_kind(p), -1);
  /* the what-if for one call: the search prices the torus, p keeps none */
  plan_placement_options o = PLAN_PLACEMENT_OPTIONS_INIT;
  o.profile = "h100";
  o.topology = &t;
  o.keep = 0;
  plan_placement_result *res = malloc(sizeof *res);
  assert_non_null(res);
  assert_int_equal(plan_search_placement(res, p, &o), PLAN_OK);
  assert_string_equal(res->best.curve, "snake");
  assert_int_equal(res->listed, res->candidates);
  assert_string_equal(res->list[0].curve, "default");
  near(res->list[0].step, res->default_step, "the default first");
  assert_true(res->best.step < res->default_step);
  assert_int_equal(plan_mesh_topology_kind(p), -1);
  assert_int_equal(plan_mesh_device(p, 4), 4); /* keep = 0 */
  o.keep = 1;
  assert_int_equal(plan_search_placement(res, p, &o), PLAN_OK);
  assert_int_equal(plan_mesh_device(p, 4), 7);
  /* without a topology, or a version this library does not know */
  assert_int_equal(plan_search_placement(res, p, NULL), PLAN_EUSAGE);
  o.version = 99;
  assert_int_equal(plan_search_placement(res, p, &o), PLAN_EUSAGE);
  /* levels: a group size that does not divide the devices */
  plan_topology_spec l;
  memset(&l, 0, sizeof l);
  l.nlevels = 2;
  l.level_size[0] = 5;
  l.level_bandwidth[0] = l.level_bandwidth[1] = 1e9;
  assert_int_equal(plan_set_mesh_topology(p, &l), PLAN_EINVALID);
  l.level_size[0] = 4;
  l.level_name[0] = "nvlink";
  assert_int_equal(plan_set_mesh_topology(p, &l), PLAN_OK);
  assert_int_equal(plan_mesh_topology_kind(p), 0);
  assert_string_equal(p->mesh.topology->levels[0].name, "nvlink");
  assert_int_equal(plan_set_mesh_topology(p, NULL), PLAN_OK);
  assert_int_equal(plan_mesh_topology_kind(p), -1);
  /* hardware per device: built-in names only, interned per profile */
  const char *hw[16];
  for (int d = 0; d < 16; d++)
    hw[d] = d < 8 ? "h100" : "a100-80gb";
  assert_int_equal(plan_set_mesh_device_hardware(p, hw), PLAN_OK);
  assert_int_equal(p->mesh.nprofiles, 2);
  assert_string_equal(plan_mesh_device_hardware(p, 0), "h100-sxm");
  assert_string_equal(plan_mesh_device_hardware(p, 15), "a100-80gb");
  hw[3] = "h1000";
  assert_int_equal(plan_set_mesh_device_hardware(p, hw), PLAN_ENOTFOUND);
  assert_string_equal(plan_mesh_device_hardware(p, 3), "h100-sxm");
  assert_int_equal(plan_set_mesh_device_hardware(p, NULL), PLAN_OK);
  assert_null(plan_mesh_device_hardware(p, 0));
  /* one rank's op time: on like devices and even pieces, the op's */
  plan_cost_model *m = model(p, "h100");
  double all, one;
  assert_int_equal(plan_cost_op_seconds(&all, m, p, 0, NULL, NULL), PLAN_OK);
  assert_int_equal(plan_cost_op_seconds_rank(&one, m, p, 0, 5, NULL, NULL),
                   PLAN_OK);
  near(one, all, "rank 5's time");
  assert_int_equal(plan_cost_op_seconds_rank(&one, m, p, 0, 16, NULL, NULL),
                   PLAN_EUSAGE);
  assert_int_equal(plan_cost_op_seconds_rank(&one, m, p, 1, 0, NULL, NULL),
                   PLAN_EUSAGE);
  plan_cost_model_free(m);
  free(res);
  plan_free(p);
}

/* calibration per profile: each profile of a mixed mesh its own */
static void test_calibration_per_profile(void **state) {
  (void)state;
  plan_plan *p = load(dp_plan);
  static const char *const hw[] = {"h100", "a100"};
  assert_int_equal(plan_set_mesh_device_hardware(p, hw), PLAN_OK);
  plan_cost_model *m = model(p, NULL);
  double h0, a0, t;
  assert_int_equal(plan_cost_op_seconds_rank(&h0, m, p, 0, 0, NULL, NULL), 0);
  assert_int_equal(plan_cost_op_seconds_rank(&a0, m, p, 0, 1, NULL, NULL), 0);
  assert_true(a0 > h0); /* the A100 is slower */
  /* measured on the A100: only its rank takes it */
  assert_int_equal(
      plan_cost_model_calibrate_profile(m, "a100", "matmul", 1.0, 0), PLAN_OK);
  plan_cost_op_seconds_rank(&t, m, p, 0, 1, NULL, NULL);
  near(t, 1.0, "the A100's measured matmul");
  plan_cost_op_seconds_rank(&t, m, p, 0, 0, NULL, NULL);
  near(t, h0, "the H100 keeps the model");
  /* for every device, later: the profile's own still wins at its level */
  assert_int_equal(plan_cost_model_calibrate(m, "matmul", 2.0, 0), PLAN_OK);
  plan_cost_op_seconds_rank(&t, m, p, 0, 0, NULL, NULL);
  near(t, 2.0, "every device's entry on the H100");
  plan_cost_op_seconds_rank(&t, m, p, 0, 1, NULL, NULL);
  near(t, 1.0, "the A100's own entry wins");
  /* a name beats a kind, whoever it is for */
  assert_int_equal(plan_cost_model_calibrate(m, "fc", 3.0, 0), PLAN_OK);
  plan_cost_op_seconds_rank(&t, m, p, 0, 1, NULL, NULL);
  near(t, 3.0, "a name over the A100's kind");
  /* the slowest rank sets the op's time */
  assert_int_equal(plan_cost_op_seconds(&t, m, p, 0, NULL, NULL), PLAN_OK);
  near(t, 3.0, "the op's time");
  /* a collective spans profiles */
  assert_int_equal(
      plan_cost_model_calibrate_profile(m, "a100", "all_reduce", 1.0, 0),
      PLAN_EINVALID);
  plan_cost_model_free(m);
  /* from a file */
  m = model(p, NULL);
  static const char file[] = "libplan-calibration: \"0.1\"\n"
                             "ops: {matmul: {seconds: 0.25}}\n"
                             "profiles:\n"
                             "  a100-80gb: {ops: {matmul: {seconds: 0.5}}}\n";
  assert_int_equal(
      plan_cost_model_load_calibration_buffer(m, file, strlen(file), "c"),
      PLAN_OK);
  plan_cost_op_seconds_rank(&t, m, p, 0, 0, NULL, NULL);
  near(t, 0.25, "the file's entry for every device");
  plan_cost_op_seconds_rank(&t, m, p, 0, 1, NULL, NULL);
  near(t, 0.5, "the file's A100 entry");
  static const char bad[] =
      "libplan-calibration: \"0.1\"\n"
      "profiles:\n"
      "  a100: {collectives: {all_reduce: {seconds: 1}}}\n";
  assert_int_equal(
      plan_cost_model_load_calibration_buffer(m, bad, strlen(bad), "bad.yaml"),
      PLAN_ESCHEMA);
  assert_int_equal(plan_error_last()->line, 3);
  plan_cost_model_free(m);
  /* one hardware: its own profile's entries apply, another's never */
  assert_int_equal(plan_set_mesh_device_hardware(p, NULL), PLAN_OK);
  m = model(p, "h100");
  double u0;
  plan_cost_op_seconds(&u0, m, p, 0, NULL, NULL);
  plan_cost_model_calibrate_profile(m, "a100", "matmul", 1.0, 0);
  plan_cost_op_seconds(&t, m, p, 0, NULL, NULL);
  near(t, u0, "another hardware's entry is not used");
  plan_cost_model_calibrate_profile(m, "h100-sxm", "matmul", 1.0, 0);
  plan_cost_op_seconds(&t, m, p, 0, NULL, NULL);
  near(t, 1.0, "its own hardware's entry is");
  plan_cost_model_free(m);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profiles_per_device),
      cmocka_unit_test(test_torus_ring),
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_memory_own_piece),
      cmocka_unit_test(test_whatif_api),
      cmocka_unit_test(test_calibration_per_profile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
