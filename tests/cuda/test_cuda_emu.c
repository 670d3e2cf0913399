/* The runner agreement test of the CUDA kernels, in host emulation (the
 * kernel sources built by the plain C++ compiler, runners/cuda/emu.h): for
 * every op and dtype the CUDA runner supports, random inputs at several
 * shapes (broadcasting, transposed and batched matmuls with broadcast
 * batches, non-zero offsets and global dims for embedding, embedding_grad,
 * reduce_mean and cross_entropy; for the routing ops, blocks of gather's
 * and scatter_add's last dim and of the experts, ties and NaN in topk,
 * choices dropped past the capacity, weighted and unweighted
 * mixture-of-experts calls, many sources into one scatter_add element),
 * plan_cuda_run_op must agree with plan_cpu_kernel:
 *
 *  - bit for bit for every op but matmul and linear: the kernels compute
 *    the CPU's expressions in the CPU's order, and emulated they call the
 *    same libm (on the device the ops that call exp, log, tanh or erf are
 *    within the CUDA math library's few ulps instead: ops_cuda.h);
 *  - matmul and linear within a tolerance (the emulated gemm sums in plain
 *    order, OpenBLAS in blocks), |cuda - cpu| <= tol * max(1, max |cpu|)
 *    over the output: F64 1e-12, F32 1e-5, BF16 1e-2, F16 2e-3;
 *  - exact mode (F64, dyadic inputs) bit for bit for every op, matmul
 *    included: every sum of grid values is exact in any order.
 *
 * Also empty blocks, F16's overflow and subnormals, blocks large enough
 * for many device blocks and long rows, repeated calls giving the same
 * bits, and calls through a plan_cuda_ctx.
 *
 * Then the enumeration: every op kind the CPU runner supports, in every
 * dtype, the CUDA runner supports too, unless listed below as a known gap
 * (none today), and it claims nothing the CPU runner lacks; and the error
 * paths (ids, labels and routing indices out of range, blocks outside
 * their global dims, bad shapes, unknown kinds) fail with the CPU
 * runner's codes and messages.
 *
 * This file holds the tests; they run the cases of agree_ops.c (the ops,
 * one dtype at a time) and agree_route.c (the routing ops) through the
 * harness of agree.c (agree.h), which compares the two runners.
 *
 * Built against the nvcc objects instead (make check-cuda-gpu), the same
 * test runs on a GPU with the device's agreement (ops_cuda.h): the ops
 * that call exp, log, tanh or erf within the tolerances above, or one grid
 * step (2^-10) in exact mode. Without a usable device it says why and
 * exits 77: skipped, never passed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agree.h"

/* ---- tests --------------------------------------------------------------- */

static void test_float_ops(void **state) {
  (void)state;
  dyadic_inputs = false;
  for (int t = 0; t < 4; t++) {
    plan_dtype dt = float_dtypes[t];
    matmuls(dt, false);
    elementwise(dt, false);
    rows(dt, false);
    reductions(dt, false);
    embeddings(dt, false);
    movement(dt, false);
    routing(dt, false);
    teardown(NULL);
  }
  assert_true(ncompared > 400);
}

static void test_integer_movement(void **state) {
  (void)state;
  movement(PLAN_I64, false);
  movement(PLAN_I32, false);
}

/* Exact mode: F64 on dyadic inputs, every op bit for bit. */
static void test_exact_mode(void **state) {
  (void)state;
  dyadic_inputs = true;
  matmuls(PLAN_F64, true);
  elementwise(PLAN_F64, true);
  rows(PLAN_F64, true);
  reductions(PLAN_F64, true);
  embeddings(PLAN_F64, true);
  movement(PLAN_F64, true);
  routing(PLAN_F64, true);
  dyadic_inputs = false;
  /* the grid is applied: exp of a dyadic value is rounded to 2^-10 */
  plan_view x = rnd(PLAN_F64, 1, D(16), -2, 2), y = mkv(PLAN_F64, 1, D(16));
  plan_kernel_ctx ctx = {true, 0};
  char err[256];
  assert_int_equal(
      plan_cuda_run_op(PLAN_OP_EXP, NULL, &x, 1, &y, 1, &ctx, err, sizeof err),
      PLAN_OK);
  for (int i = 0; i < 16; i++) {
    double v = get(&y, i) * 1024;
    assert_true(v == floor(v));
  }
}

/* Op kinds the CUDA runner knowingly lacks, by name, with the reason; an
 * op the CPU runner gains that is neither here nor in the CUDA runner
 * fails the enumeration. */
/* The ops traced models brought (sigmoid, rsqrt, add_scalar, attention)
 * run on the CPU runner only so far: the CUDA runner refuses them with
 * PLAN_EUNSUPPORTED (test_new_ops_refused). */
static const char *const known_gaps[] = {"sigmoid", "rsqrt", "add_scalar",
                                         "attention", NULL};

static bool known_gap(int kind) {
  for (int i = 0; known_gaps[i]; i++)
    if (!strcmp(known_gaps[i], plan_op_kind_name(kind)))
      return true;
  return false;
}

static void test_enumeration(void **state) {
  (void)state;
  for (int k = 0; k < PLAN_OP_COUNT; k++)
    for (int t = 0; t < PLAN_DTYPE_COUNT; t++) {
      bool cpu = plan_cpu_supports(k, (plan_dtype)t);
      bool cuda = plan_cuda_supports_op(k, (plan_dtype)t);
      if (cpu && !cuda && !known_gap(k))
        fail_msg("op %s in %s: the CPU runner has a kernel, the CUDA runner "
                 "none",
                 plan_op_kind_name(k), plan_dtype_name((plan_dtype)t));
      if (cuda && !cpu)
        fail_msg("op %s in %s: the CUDA runner claims a kernel the CPU "
                 "runner lacks",
                 plan_op_kind_name(k), plan_dtype_name((plan_dtype)t));
    }
  assert_false(plan_cuda_supports_op(PLAN_OP_COUNT, PLAN_F32));
  assert_false(plan_cuda_supports_op(-1, PLAN_F32));
  assert_false(plan_cuda_supports_op(PLAN_OP_ADD, PLAN_DTYPE_COUNT));
  assert_false(plan_cuda_supports_op(PLAN_OP_EMBEDDING, PLAN_I64));
  assert_true(plan_cuda_supports_op(PLAN_OP_WHERE, PLAN_I32));
}

/* The message of the last same_failure. */
static char failed_with[256];

/* Both runners fail alike: the code and the message. */
static void same_failure(int kind, const plan_attr_val *attrs,
                         const plan_view *in, int nin, plan_view *out, int nout,
                         int want) {
  char e1[256], e2[256];
  int r1 =
      plan_cpu_kernel(kind, attrs, in, nin, out, nout, NULL, e1, sizeof e1);
  int r2 =
      plan_cuda_run_op(kind, attrs, in, nin, out, nout, NULL, e2, sizeof e2);
  assert_int_equal(r1, want);
  assert_int_equal(r2, want);
  assert_string_equal(e1, e2);
  snprintf(failed_with, sizeof failed_with, "%s", e2);
}

/* The routing ops' failures: an index outside its global range (the
 * first one named), a block outside its global dim, a bad local shape. */
static void route_errors(void) {
  plan_view x = RV(PLAN_F32, 3, 5);
  x.offset[1] = 4;
  x.global_dims[1] = 12;
  plan_view gi = ids_in(2, D(3, 4), 0, 12);
  ((int64_t *)gi.data)[5] = 12;
  ((int64_t *)gi.data)[7] = -1;
  plan_view go = mkv(PLAN_F32, 2, D(3, 4));
  plan_view gin[2] = {x, gi};
  same_failure(PLAN_OP_GATHER, NULL, gin, 2, &go, 1, PLAN_EINVALID);
  assert_string_equal(failed_with, "gather: index 12 (element 5) is outside "
                                   "x's last dim [0, 12)");
  gin[0].offset[1] = 8; /* [8, 13) of 12 */
  ((int64_t *)gi.data)[5] = 0;
  same_failure(PLAN_OP_GATHER, NULL, gin, 2, &go, 1, PLAN_EINVALID);
  plan_view si[2] = {RV(PLAN_F64, 2, 6), ids_in(2, D(2, 6), 0, 10)};
  ((int64_t *)si[1].data)[4] = -3;
  plan_view so = mkv(PLAN_F64, 2, D(2, 5));
  so.offset[1] = 5;
  so.global_dims[1] = 10;
  same_failure(PLAN_OP_SCATTER_ADD, int_attrs(1, 10, 0), si, 2, &so, 1,
               PLAN_EINVALID);
  ((int64_t *)si[1].data)[4] = 0;
  so.offset[1] = 6;
  same_failure(PLAN_OP_SCATTER_ADD, int_attrs(1, 10, 0), si, 2, &so, 1,
               PLAN_EINVALID);
  plan_view bad = mkv(PLAN_F64, 2, D(3, 5));
  same_failure(PLAN_OP_SCATTER_ADD, int_attrs(1, 10, 0), si, 2, &bad, 1,
               PLAN_EINVALID);
  plan_view mx = RV(PLAN_BF16, 2, 4, 3);
  plan_view mi = ids_in(3, D(2, 4, 2), 0, 4);
  ((int64_t *)mi.data)[9] = 4;
  plan_view slots = mkv(PLAN_BF16, 4, D(2, 2, 3, 3));
  slots.offset[0] = 2;
  slots.global_dims[0] = 4;
  plan_view din[2] = {mx, mi};
  same_failure(PLAN_OP_MOE_DISPATCH, int_attrs(2, 4, 3), din, 2, &slots, 1,
               PLAN_EINVALID);
  assert_string_equal(failed_with, "moe_dispatch: index 4 (element 9) is "
                                   "outside the experts [0, 4)");
  ((int64_t *)mi.data)[9] = 1;
  plan_view y = RV(PLAN_BF16, 2, 2, 3, 3);
  y.offset[0] = 3; /* [3, 5) of 4 */
  y.global_dims[0] = 4;
  plan_view cin[2] = {y, mi};
  plan_view co = mkv(PLAN_BF16, 3, D(2, 4, 3));
  same_failure(PLAN_OP_MOE_COMBINE, NULL, cin, 2, &co, 1, PLAN_EINVALID);
  assert_string_equal(failed_with, "moe_combine: the experts block [3, 5) is "
                                   "outside [0, 4)");
  y.offset[0] = 2;
  ((int64_t *)mi.data)[3] = -1;
  plan_view win[3] = {mx, y, mi};
  plan_view wo = mkv(PLAN_BF16, 3, D(2, 4, 2));
  same_failure(PLAN_OP_MOE_WEIGHTS_GRAD, NULL, win, 3, &wo, 1, PLAN_EINVALID);
  plan_view tx = RV(PLAN_F16, 3, 4);
  plan_view to[2] = {mkv(PLAN_F16, 2, D(3, 5)), mkv(PLAN_I64, 2, D(3, 5))};
  same_failure(PLAN_OP_TOPK, int_attrs(1, 5, 0), &tx, 1, to, 2, PLAN_EINVALID);
}

/* The known gaps are refused cleanly: PLAN_EUNSUPPORTED, the op named,
 * nothing run. */
static void test_new_ops_refused(void **state) {
  (void)state;
  static const int kinds[] = {PLAN_OP_SIGMOID, PLAN_OP_RSQRT,
                              PLAN_OP_ADD_SCALAR};
  plan_view x = RV(PLAN_F32, 3, 4), y = mkv(PLAN_F32, 2, D(3, 4));
  char err[256];
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    assert_true(known_gap(kinds[i]));
    assert_false(plan_cuda_supports_op(kinds[i], PLAN_F32));
    assert_int_equal(
        plan_cuda_run_op(kinds[i], NULL, &x, 1, &y, 1, NULL, err, sizeof err),
        PLAN_EUNSUPPORTED);
    assert_non_null(strstr(err, plan_op_kind_name(kinds[i])));
  }
  plan_view qkv[3] = {RV(PLAN_F32, 1, 2, 3, 4), RV(PLAN_F32, 1, 2, 3, 4),
                      RV(PLAN_F32, 1, 2, 3, 4)};
  plan_view o = mkv(PLAN_F32, 4, D(1, 2, 3, 4));
  assert_int_equal(plan_cuda_run_op(PLAN_OP_ATTENTION, NULL, qkv, 3, &o, 1,
                                    NULL, err, sizeof err),
                   PLAN_EUNSUPPORTED);
  assert_non_null(strstr(err, "attention"));
}

static void test_errors(void **state) {
  (void)state;
  plan_view tab = RV(PLAN_F32, 6, 4);
  plan_view ids = rnd(PLAN_I64, 1, D(3), 0, 6);
  ((int64_t *)ids.data)[2] = 6;
  plan_view out = mkv(PLAN_F32, 2, D(3, 4));
  plan_view in[2] = {tab, ids};
  same_failure(PLAN_OP_EMBEDDING, NULL, in, 2, &out, 1, PLAN_EINVALID);
  plan_view lg = RV(PLAN_F32, 3, 5), lb = rnd(PLAN_I64, 1, D(3), 0, 5);
  ((int64_t *)lb.data)[1] = -1;
  plan_view loss = mkv(PLAN_F32, 0, NULL);
  plan_view ce[2] = {lg, lb};
  same_failure(PLAN_OP_CROSS_ENTROPY, NULL, ce, 2, &loss, 1, PLAN_EINVALID);
  plan_view a[2] = {RV(PLAN_F32, 3, 4), RV(PLAN_F32, 5, 6)};
  plan_view o = mkv(PLAN_F32, 2, D(3, 6));
  same_failure(PLAN_OP_MATMUL, NULL, a, 2, &o, 1, PLAN_EINVALID);
  plan_view wrong = mkv(PLAN_F32, 2, D(3, 5));
  plan_view b[2] = {RV(PLAN_F32, 3, 4), RV(PLAN_F32, 3, 4)};
  same_failure(PLAN_OP_ADD, NULL, b, 2, &wrong, 1, PLAN_EINVALID);
  plan_view ri = rnd(PLAN_I64, 1, D(4), 0, 9), ro = mkv(PLAN_I64, 1, D(4));
  same_failure(PLAN_OP_EXP, NULL, &ri, 1, &ro, 1, PLAN_EINVALID);
  route_errors();
  char err[256];
  assert_int_equal(
      plan_cuda_run_op(PLAN_OP_COUNT, NULL, b, 2, &o, 1, NULL, err, sizeof err),
      PLAN_EUSAGE);
  assert_non_null(strstr(err, "unknown op kind"));
  plan_kernel_ctx bad = {true, 99};
  assert_int_equal(
      plan_cuda_run_op(PLAN_OP_ADD, NULL, b, 2, &o, 1, &bad, err, sizeof err),
      PLAN_EUSAGE);
}

/* Empty blocks (a zero dim somewhere) and F16's edges: overflow to
 * infinity, subnormal results. */
static void test_edges(void **state) {
  (void)state;
  for (int t = 0; t < 4; t++) {
    plan_dtype dt = float_dtypes[t];
    plan_view mm[2] = {RV(dt, 0, 4), RV(dt, 4, 3)};
    agree("matmul m 0", PLAN_OP_MATMUL, NULL, mm, 2, NULL, 1, false);
    plan_view ad[2] = {RV(dt, 2, 0, 3), RV(dt, 3)};
    agree("add empty", PLAN_OP_ADD, NULL, ad, 2, NULL, 1, false);
    plan_attr_val *at = attrs_new(2);
    set_ints(&at[0], 1, 1);
    plan_view rz = RV(dt, 3, 0, 2);
    agree("reduce_sum over 0", PLAN_OP_REDUCE_SUM, at, &rz, 1, NULL, 1, false);
    plan_view sm = RV(dt, 0, 5);
    agree("softmax empty", PLAN_OP_SOFTMAX, NULL, &sm, 1, NULL, 1, false);
    plan_view cc[2] = {RV(dt, 2, 0), RV(dt, 2, 3)};
    agree("concat empty part", PLAN_OP_CONCAT, NULL, cc, 2, NULL, 1, false);
    plan_view ids = rnd(PLAN_I64, 1, D(0), 0, 1);
    plan_view eg[2] = {RV(dt, 0, 4), ids};
    plan_view blk = mkv(dt, 2, D(5, 4));
    plan_attr_val *ar = attrs_new(1);
    ar[0].i = 5;
    ar[0].present = true;
    agree("embedding_grad no ids", PLAN_OP_EMBEDDING_GRAD, ar, eg, 2, &blk, 1,
          false);
    plan_view gz[2] = {RV(dt, 3, 4), ids_in(2, D(3, 0), 0, 4)};
    agree("gather no indices", PLAN_OP_GATHER, NULL, gz, 2, NULL, 1, false);
    plan_view sz[2] = {RV(dt, 2, 0), ids_in(2, D(2, 0), 0, 5)};
    plan_view szo = mkv(dt, 2, D(2, 5)); /* zeros: nothing added */
    agree("scatter_add no sources", PLAN_OP_SCATTER_ADD, int_attrs(1, 5, 0), sz,
          2, &szo, 1, false);
    route_moe_case(dt, false, 2, 0, 2, 3, 4, 2, 0, 4); /* no tokens */
    route_moe_case(dt, false, 2, 3, 2, 0, 4, 2, 1, 2); /* hidden 0 */
    route_moe_case(dt, false, 0, 3, 2, 3, 4, 2, 0, 4); /* no groups */
  }
  plan_view big = rnd(PLAN_F16, 1, D(64), -20, 12);
  agree("exp f16 overflow", PLAN_OP_EXP, NULL, &big, 1, NULL, 1, false);
  plan_attr_val *at = attrs_new(1);
  at[0].f = 1e-6;
  plan_view tiny = rnd(PLAN_F16, 1, D(64), -2, 2);
  agree("scale f16 subnormal", PLAN_OP_SCALE, at, &tiny, 1, NULL, 1, false);
  plan_view huge = rnd(PLAN_F16, 1, D(64), 100, 300);
  plan_view two[2] = {huge, huge};
  agree("mul f16 overflow", PLAN_OP_MUL, NULL, two, 2, NULL, 1, false);
  /* sums past 65504 become infinity only when stored as f16 */
  plan_view hs[2] = {rnd(PLAN_F16, 2, D(2, 40), 5000, 9000),
                     ids_in(2, D(2, 40), 0, 3)};
  plan_view hso = mkv(PLAN_F16, 2, D(2, 3));
  agree("scatter_add f16 overflow", PLAN_OP_SCATTER_ADD, int_attrs(1, 3, 0), hs,
        2, &hso, 1, false);
  char err[256];
  assert_int_equal(plan_cuda_run_op(PLAN_OP_SCATTER_ADD, int_attrs(1, 3, 0), hs,
                                    2, &hso, 1, NULL, err, sizeof err),
                   PLAN_OK);
  int ninf = 0;
  for (int i = 0; i < 6; i++)
    ninf += isinf(get(&hso, i)) != 0;
  assert_true(ninf > 0);
}

/* Larger blocks (many device blocks, long rows and reductions), and the
 * same call twice giving the same bits. */
static void test_large(void **state) {
  (void)state;
  for (int t = 0; t < 4; t++) {
    plan_dtype dt = float_dtypes[t];
    plan_view mm[2] = {RV(dt, 3, 64, 96), RV(dt, 96, 80)};
    agree("matmul large", PLAN_OP_MATMUL, NULL, mm, 2, NULL, 1, false);
    plan_view ad[2] = {RV(dt, 40, 50, 60), RV(dt, 50, 1)};
    agree("add large", PLAN_OP_ADD, NULL, ad, 2, NULL, 1, false);
    plan_attr_val *at = attrs_new(2);
    set_ints(&at[0], 2, 0, 2);
    plan_view rz = RV(dt, 40, 50, 60);
    agree("reduce_sum large", PLAN_OP_REDUCE_SUM, at, &rz, 1, NULL, 1, false);
    plan_view sm = RV(dt, 30, 1000);
    agree("softmax large", PLAN_OP_SOFTMAX, NULL, &sm, 1, NULL, 1, false);
    plan_attr_val *ae = attrs_new(1);
    ae[0].f = 1e-5;
    plan_view ln[2] = {RV(dt, 64, 512), RV(dt, 512)};
    agree("rmsnorm large", PLAN_OP_RMSNORM, ae, ln, 2, NULL, 1, false);
    plan_view ids = rnd(PLAN_I64, 1, D(3000), 0, 50);
    plan_view eg[2] = {RV(dt, 3000, 16), ids};
    plan_view blk = mkv(dt, 2, D(50, 16));
    plan_attr_val *ar = attrs_new(1);
    ar[0].i = 50;
    ar[0].present = true;
    agree("embedding_grad large", PLAN_OP_EMBEDDING_GRAD, ar, eg, 2, &blk, 1,
          false);
    /* twice: deterministic */
    plan_view o1 = mkv(dt, 2, D(50, 16)), o2 = mkv(dt, 2, D(50, 16));
    char err[256];
    assert_int_equal(plan_cuda_run_op(PLAN_OP_EMBEDDING_GRAD, ar, eg, 2, &o1, 1,
                                      NULL, err, sizeof err),
                     PLAN_OK);
    assert_int_equal(plan_cuda_run_op(PLAN_OP_EMBEDDING_GRAD, ar, eg, 2, &o2, 1,
                                      NULL, err, sizeof err),
                     PLAN_OK);
    assert_memory_equal(o1.data, o2.data, 50 * 16 * esz(dt));
    plan_view m1 = mkv(dt, 3, D(3, 64, 80)), m2 = mkv(dt, 3, D(3, 64, 80));
    assert_int_equal(plan_cuda_run_op(PLAN_OP_MATMUL, NULL, mm, 2, &m1, 1, NULL,
                                      err, sizeof err),
                     PLAN_OK);
    assert_int_equal(plan_cuda_run_op(PLAN_OP_MATMUL, NULL, mm, 2, &m2, 1, NULL,
                                      err, sizeof err),
                     PLAN_OK);
    assert_memory_equal(m1.data, m2.data, 3 * 64 * 80 * esz(dt));
    route_moe_case(dt, false, 4, 64, 2, 32, 8, 12, 2, 4);
    plan_view sa[2] = {RV(dt, 64, 200), ids_in(2, D(64, 200), 0, 300)};
    plan_view sao = mkv(dt, 2, D(64, 100));
    sao.offset[1] = 100;
    sao.global_dims[1] = 300;
    agree("scatter_add large", PLAN_OP_SCATTER_ADD, int_attrs(1, 300, 0), sa, 2,
          &sao, 1, false);
    plan_view tk = RV(dt, 100, 300);
    agree("topk large", PLAN_OP_TOPK, int_attrs(1, 8, 0), &tk, 1, NULL, 2,
          false);
    teardown(NULL);
  }
}

/* A context keeps one cuBLAS handle across calls; the results are the
 * same as without. */
static void test_context(void **state) {
  (void)state;
  char err[256];
  plan_cuda_ctx *cc = plan_cuda_ctx_new(err, sizeof err);
  if (!cc)
    fail_msg("plan_cuda_ctx_new: %s", err);
  for (int rep = 0; rep < 3; rep++) {
    plan_view in[2] = {RV(PLAN_F32, 2, 5, 3), RV(PLAN_F32, 3, 4)};
    plan_view a = mkv(PLAN_F32, 3, D(2, 5, 4)),
              b = mkv(PLAN_F32, 3, D(2, 5, 4));
    assert_int_equal(plan_cuda_run_op_ctx(cc, PLAN_OP_MATMUL, NULL, in, 2, &a,
                                          1, NULL, err, sizeof err),
                     PLAN_OK);
    assert_int_equal(plan_cuda_run_op(PLAN_OP_MATMUL, NULL, in, 2, &b, 1, NULL,
                                      err, sizeof err),
                     PLAN_OK);
    assert_memory_equal(a.data, b.data, 40 * sizeof(float));
  }
  plan_cuda_ctx_free(cc);
  plan_cuda_ctx_free(NULL);
}

int main(void) {
  if (ON_DEVICE) {
    /* no device: say why and exit 77 (skipped, never passed) */
    float x = 1, y = 0;
    plan_view in[2], out;
    memset(in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in[0].dtype = in[1].dtype = out.dtype = PLAN_F32;
    in[0].data = in[1].data = &x;
    out.data = &y;
    char err[256];
    if (plan_cuda_run_op(PLAN_OP_ADD, NULL, in, 2, &out, 1, NULL, err,
                         sizeof err) != PLAN_OK) {
      printf("test_cuda_gpu: SKIPPED: no usable CUDA device: %s\n", err);
      return 77;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_float_ops, teardown),
      cmocka_unit_test_teardown(test_integer_movement, teardown),
      cmocka_unit_test_teardown(test_exact_mode, teardown),
      cmocka_unit_test(test_enumeration),
      cmocka_unit_test_teardown(test_errors, teardown),
      cmocka_unit_test_teardown(test_new_ops_refused, teardown),
      cmocka_unit_test_teardown(test_edges, teardown),
      cmocka_unit_test_teardown(test_large, teardown),
      cmocka_unit_test_teardown(test_context, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
