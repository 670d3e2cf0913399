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
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "ops_cuda.h"

/* Built against the nvcc objects (make check-cuda-gpu), the same test runs
 * on a GPU, where the ops that call the math library agree within
 * tolerance instead of bit for bit. */
#ifdef PLAN_CUDA_DEVICE_TEST
#define ON_DEVICE 1
#else
#define ON_DEVICE 0
#endif

/* ---- buffers ------------------------------------------------------------- */

#define MAXALLOC 4096
static void *allocs[MAXALLOC];
static int nallocs;

static void *talloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  assert_non_null(p);
  assert_true(nallocs < MAXALLOC);
  allocs[nallocs++] = p;
  return p;
}

static int teardown(void **state) {
  (void)state;
  while (nallocs > 0)
    free(allocs[--nallocs]);
  return 0;
}

/* ---- random views -------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

static bool is_float(plan_dtype t) {
  return t == PLAN_F64 || t == PLAN_F32 || t == PLAN_BF16 || t == PLAN_F16;
}

static size_t esz(plan_dtype t) {
  return t == PLAN_F64 || !is_float(t) ? 8 : 4;
}

static int64_t count(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d];
  return n;
}

static plan_view mkv(plan_dtype dt, int rank, const int64_t *dims) {
  plan_view v;
  memset(&v, 0, sizeof v);
  v.dtype = dt;
  v.rank = rank;
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  v.data = talloc((size_t)count(&v) * esz(dt));
  return v;
}

static void put(plan_view *v, int64_t i, double x) {
  switch (v->dtype) {
  case PLAN_F64:
    ((double *)v->data)[i] = x;
    break;
  case PLAN_F32:
    ((float *)v->data)[i] = (float)x;
    break;
  case PLAN_BF16:
    ((float *)v->data)[i] = plan_round_bf16((float)x);
    break;
  case PLAN_F16:
    ((float *)v->data)[i] = plan_round_f16((float)x);
    break;
  default:
    ((int64_t *)v->data)[i] = (int64_t)x;
    break;
  }
}

static double get(const plan_view *v, int64_t i) {
  if (v->dtype == PLAN_F64)
    return ((const double *)v->data)[i];
  if (is_float(v->dtype))
    return ((const float *)v->data)[i];
  return (double)((const int64_t *)v->data)[i];
}

/* Exact mode's inputs: multiples of 1/16 in [-4, 4], so every product and
 * sum of a few of them is exact. */
static bool dyadic_inputs;

/* Uniform in [lo, hi) (integers: in [lo, hi) too); away from zero when
 * `nonzero` (a divisor), with a random sign. */
static plan_view rnd(plan_dtype dt, int rank, const int64_t *dims, double lo,
                     double hi) {
  plan_view v = mkv(dt, rank, dims);
  for (int64_t i = 0; i < count(&v); i++) {
    double x = lo + (hi - lo) * urand();
    if (!is_float(dt))
      x = floor(x);
    else if (dyadic_inputs)
      x = nearbyint(x * 16) / 16;
    put(&v, i, x);
  }
  return v;
}

static plan_view divisor(plan_dtype dt, int rank, const int64_t *dims) {
  plan_view v = rnd(dt, rank, dims, 0.5, 2);
  for (int64_t i = 0; i < count(&v); i++)
    if (urand() < 0.5)
      put(&v, i, -get(&v, i));
  return v;
}

/* ---- attributes ---------------------------------------------------------- */

static plan_attr_val *attrs_new(int n) {
  return talloc(sizeof(plan_attr_val) * (size_t)(n ? n : 1));
}

static void set_ints(plan_attr_val *a, int n, ...) {
  va_list ap;
  va_start(ap, n);
  a->ints = talloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    a->ints[i] = va_arg(ap, int);
  va_end(ap);
  a->nints = n;
  a->present = true;
}

/* ---- running and comparing ----------------------------------------------- */

static int ncompared;
static int64_t nnonzero; /* nonzero output elements compared */

/* The outputs' local shapes from the registry (every op whose local
 * shapes follow the attributes). */
static int infer(int kind, const plan_attr_val *attrs, const plan_view *in,
                 int nin, plan_view *out, int nout) {
  plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
  char err[256];
  memset(si, 0, sizeof si);
  memset(so, 0, sizeof so);
  for (int i = 0; i < nin; i++) {
    si[i].rank = in[i].rank;
    si[i].dtype = in[i].dtype;
    for (int d = 0; d < in[i].rank; d++)
      si[i].dims[d] = in[i].dims[d];
  }
  int rc =
      plan_op_info_get(kind)->infer(si, nin, attrs, so, nout, err, sizeof err);
  if (rc)
    fail_msg("%s: inference failed: %s", plan_op_kind_name(kind), err);
  for (int i = 0; i < nout; i++)
    out[i] = mkv(so[i].dtype, so[i].rank, so[i].dims);
  return rc;
}

static double tol_of(plan_dtype t) {
  return t == PLAN_F64    ? 1e-12
         : t == PLAN_F32  ? 1e-5
         : t == PLAN_BF16 ? 1e-2
                          : 2e-3;
}

/* How the CUDA runner agrees with the CPU runner on op `kind`. */
enum { SAME_BITS, WITHIN_TOL, ONE_GRID_STEP };

static bool calls_libm(int kind) {
  switch (kind) {
  case PLAN_OP_GELU:
  case PLAN_OP_SILU:
  case PLAN_OP_TANH:
  case PLAN_OP_EXP:
  case PLAN_OP_SOFTMAX:
  case PLAN_OP_CROSS_ENTROPY:
  case PLAN_OP_GELU_GRAD:
  case PLAN_OP_SILU_GRAD:
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    return true;
  default:
    return false;
  }
}

static int agreement(int kind, bool exact) {
  bool gemm = kind == PLAN_OP_MATMUL || kind == PLAN_OP_LINEAR;
  if (exact) /* sums of grid values are exact in any order */
    return ON_DEVICE && calls_libm(kind) ? ONE_GRID_STEP : SAME_BITS;
  if (gemm || (ON_DEVICE && calls_libm(kind)))
    return WITHIN_TOL;
  return SAME_BITS;
}

/* Runs op `kind` on both runners (outputs shaped like `shape`, or from the
 * registry when shape is NULL) and compares them as agreement() says. */
static void agree(const char *label, int kind, const plan_attr_val *attrs,
                  const plan_view *in, int nin, const plan_view *shape,
                  int nout, bool exact) {
  plan_view a[PLAN_MAX_OPERANDS], b[PLAN_MAX_OPERANDS];
  if (shape)
    for (int i = 0; i < nout; i++)
      a[i] = mkv(shape[i].dtype, shape[i].rank, shape[i].dims);
  else
    infer(kind, attrs, in, nin, a, nout);
  for (int i = 0; i < nout; i++) {
    if (shape) {
      memcpy(a[i].global_dims, shape[i].global_dims, sizeof a[i].global_dims);
      memcpy(a[i].offset, shape[i].offset, sizeof a[i].offset);
    }
    b[i] = a[i];
    b[i].data = talloc((size_t)count(&a[i]) * esz(a[i].dtype));
    /* different garbage in each, so an element left unwritten shows */
    memset(a[i].data, 0x11, (size_t)count(&a[i]) * esz(a[i].dtype));
    memset(b[i].data, 0x77, (size_t)count(&a[i]) * esz(a[i].dtype));
  }
  plan_kernel_ctx ctx = {exact, 0};
  char e1[256], e2[256];
  int r1 = plan_cpu_kernel(kind, attrs, in, nin, a, nout, &ctx, e1, sizeof e1);
  int r2 = plan_cuda_run_op(kind, attrs, in, nin, b, nout, &ctx, e2, sizeof e2);
  if (r1 != PLAN_OK)
    fail_msg("%s: the CPU runner failed (%d): %s", label, r1, e1);
  if (r2 != PLAN_OK)
    fail_msg("%s: the CUDA runner failed (%d): %s", label, r2, e2);
  int how = agreement(kind, exact);
  for (int i = 0; i < nout; i++) {
    int64_t n = count(&a[i]);
    size_t es = esz(a[i].dtype);
    for (int64_t j = 0; j < n; j++)
      nnonzero += get(&a[i], j) != 0;
    if (how == SAME_BITS) {
      if (memcmp(a[i].data, b[i].data, (size_t)n * es) != 0)
        for (int64_t j = 0; j < n; j++)
          if (memcmp((char *)a[i].data + j * es, (char *)b[i].data + j * es,
                     es) != 0 &&
              !(isnan(get(&a[i], j)) && isnan(get(&b[i], j))))
            /* any two NaNs match: a device may make a NaN its canonical
             * one on any arithmetic or conversion */
            fail_msg("%s (%s): output %d element %lld: cpu %.17g, cuda %.17g "
                     "(bit-identical expected)",
                     label, plan_dtype_name(a[i].dtype), i, (long long)j,
                     get(&a[i], j), get(&b[i], j));
    } else {
      double big = 0;
      for (int64_t j = 0; j < n; j++)
        big = fmax(big, fabs(get(&a[i], j)));
      double t = how == ONE_GRID_STEP
                     ? 0x1p-10
                     : tol_of(a[i].dtype) * (big > 1 ? big : 1);
      for (int64_t j = 0; j < n; j++)
        if (!(fabs(get(&a[i], j) - get(&b[i], j)) <= t))
          fail_msg("%s (%s): output %d element %lld: cpu %.17g, cuda %.17g "
                   "(tolerance %g)",
                   label, plan_dtype_name(a[i].dtype), i, (long long)j,
                   get(&a[i], j), get(&b[i], j), t);
    }
    ncompared++;
  }
}

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* A random float view of the given dims in [-2, 2). */
#define RV(dt, ...) rnd(dt, NDIMS(__VA_ARGS__), D(__VA_ARGS__), -2, 2)

static const plan_dtype float_dtypes[] = {PLAN_F64, PLAN_F32, PLAN_BF16,
                                          PLAN_F16};

/* ---- the ops, one dtype at a time ---------------------------------------- */

static void matmuls(plan_dtype dt, bool exact) {
  static const struct {
    int ra, rb;
    int64_t a[5], b[5];
  } shapes[] = {
      {2, 2, {3, 4}, {4, 5}},
      {3, 3, {2, 3, 4}, {2, 4, 5}},
      {3, 2, {5, 3, 4}, {4, 2}},                /* B one matrix */
      {2, 3, {3, 4}, {2, 4, 5}},                /* A one matrix */
      {4, 4, {2, 1, 3, 4}, {1, 3, 4, 5}},       /* batches broadcast */
      {5, 5, {2, 3, 1, 3, 4}, {1, 3, 2, 4, 2}}, /* no single stride */
      {4, 3, {2, 2, 3, 4}, {1, 4, 5}},
      {2, 2, {3, 0}, {0, 4}}, /* k = 0: zeros */
      {3, 3, {2, 1, 7}, {2, 7, 1}},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      bool ta = t & 1, tb = t & 2;
      int64_t da[5], db[5];
      int ra = shapes[s].ra, rb = shapes[s].rb;
      memcpy(da, shapes[s].a, sizeof da);
      memcpy(db, shapes[s].b, sizeof db);
      if (ta) { /* the stored A is [.., k, m] */
        int64_t x = da[ra - 1];
        da[ra - 1] = da[ra - 2];
        da[ra - 2] = x;
      }
      if (tb) {
        int64_t x = db[rb - 1];
        db[rb - 1] = db[rb - 2];
        db[rb - 2] = x;
      }
      plan_view in[2] = {rnd(dt, ra, da, -2, 2), rnd(dt, rb, db, -2, 2)};
      plan_attr_val *at = attrs_new(2);
      at[0].b = ta;
      at[1].b = tb;
      char label[64];
      snprintf(label, sizeof label, "matmul shape %zu ta %d tb %d", s, ta, tb);
      agree(label, PLAN_OP_MATMUL, at, in, 2, NULL, 1, exact);
    }
  /* linear with and without bias, on rank 2 and 3 inputs */
  for (int bias = 0; bias < 2; bias++) {
    plan_view in[3] = {RV(dt, 2, 3, 4), RV(dt, 5, 4), RV(dt, 5)};
    agree(bias ? "linear+bias" : "linear", PLAN_OP_LINEAR, NULL, in, 2 + bias,
          NULL, 1, exact);
    plan_view in2[3] = {RV(dt, 6, 3), RV(dt, 2, 3), RV(dt, 2)};
    agree("linear rank 2", PLAN_OP_LINEAR, NULL, in2, 2 + bias, NULL, 1, exact);
  }
}

static void elementwise(plan_dtype dt, bool exact) {
  static const int kinds[] = {PLAN_OP_ADD, PLAN_OP_SUB, PLAN_OP_MUL,
                              PLAN_OP_DIV};
  for (size_t k = 0; k < 4; k++) {
    bool div = kinds[k] == PLAN_OP_DIV;
    const char *name = plan_op_kind_name(kinds[k]);
    plan_view in[2] = {RV(dt, 2, 3, 4),
                       div ? divisor(dt, 2, D(3, 1)) : RV(dt, 3, 1)};
    agree(name, kinds[k], NULL, in, 2, NULL, 1, exact);
    plan_view in2[2] = {RV(dt, 4),
                        div ? divisor(dt, 3, D(2, 3, 4)) : RV(dt, 2, 3, 4)};
    agree(name, kinds[k], NULL, in2, 2, NULL, 1, exact);
    plan_view in3[2] = {RV(dt, 5, 1, 3),
                        div ? divisor(dt, 2, D(4, 1)) : RV(dt, 4, 1)};
    agree(name, kinds[k], NULL, in3, 2, NULL, 1, exact);
  }
  static const double factors[] = {0.1, 0.75, -3, 1e-3};
  for (int f = 0; f < 4; f++) {
    plan_attr_val *at = attrs_new(1);
    at[0].f = factors[f];
    plan_view in = RV(dt, 3, 5);
    agree("scale", PLAN_OP_SCALE, at, &in, 1, NULL, 1, exact);
  }
  static const int unary[] = {PLAN_OP_RELU, PLAN_OP_SILU, PLAN_OP_TANH,
                              PLAN_OP_EXP};
  for (int u = 0; u < 4; u++) {
    plan_view in = RV(dt, 2, 3, 7);
    agree(plan_op_kind_name(unary[u]), unary[u], NULL, &in, 1, NULL, 1, exact);
  }
  for (int t = 0; t < 2; t++) {
    plan_attr_val *at = attrs_new(1);
    at[0].s = t ? "tanh" : "none";
    plan_view in = RV(dt, 4, 9);
    agree(t ? "gelu tanh" : "gelu", PLAN_OP_GELU, at, &in, 1, NULL, 1, exact);
    plan_view g[2] = {RV(dt, 4, 9), RV(dt, 4, 9)};
    agree(t ? "gelu_grad tanh" : "gelu_grad", PLAN_OP_GELU_GRAD, at, g, 2, NULL,
          1, exact);
  }
  static const int grads[] = {PLAN_OP_RELU_GRAD, PLAN_OP_SILU_GRAD};
  for (int u = 0; u < 2; u++) {
    plan_view in[2] = {RV(dt, 3, 6), RV(dt, 3, 6)};
    put(&in[1], 0, 0); /* relu_grad at 0 */
    agree(plan_op_kind_name(grads[u]), grads[u], NULL, in, 2, NULL, 1, exact);
  }
}

static void rows(plan_dtype dt, bool exact) {
  for (int d = 0; d < 3; d++) {
    plan_attr_val *at = attrs_new(1);
    at[0].i = d;
    plan_view in = RV(dt, 3, 4, 5);
    agree("softmax", PLAN_OP_SOFTMAX, at, &in, 1, NULL, 1, exact);
  }
  for (int bias = 0; bias < 2; bias++) {
    plan_attr_val *at = attrs_new(1);
    at[0].f = 1e-5;
    plan_view in[3] = {RV(dt, 2, 3, 8), RV(dt, 8), RV(dt, 8)};
    agree("layernorm", PLAN_OP_LAYERNORM, at, in, 2 + bias, NULL, 1, exact);
  }
  plan_attr_val *at = attrs_new(1);
  at[0].f = 1e-6;
  plan_view in[2] = {RV(dt, 5, 16), RV(dt, 16)};
  agree("rmsnorm", PLAN_OP_RMSNORM, at, in, 2, NULL, 1, exact);
  for (int k = 0; k < 2; k++) {
    int kind = k ? PLAN_OP_RMSNORM_GRAD : PLAN_OP_LAYERNORM_GRAD;
    plan_attr_val *ae = attrs_new(1);
    ae[0].f = 1e-5;
    plan_view g[3] = {RV(dt, 2, 3, 8), RV(dt, 2, 3, 8), RV(dt, 8)};
    agree(plan_op_kind_name(kind), kind, ae, g, 3, NULL, 1, exact);
  }
}

static void reductions(plan_dtype dt, bool exact) {
  static const struct {
    int n;
    int dims[3];
    bool keep;
  } red[] = {{1, {1}, false},
             {2, {0, 2}, false},
             {1, {2}, true},
             {3, {0, 1, 2}, false},
             {2, {1, 2}, true}};
  for (int kind = PLAN_OP_REDUCE_SUM; kind <= PLAN_OP_REDUCE_MEAN; kind++)
    for (size_t r = 0; r < sizeof red / sizeof red[0]; r++) {
      plan_attr_val *at = attrs_new(2);
      set_ints(&at[0], red[r].n, red[r].dims[0], red[r].dims[1],
               red[r].dims[2]);
      at[1].b = red[r].keep;
      plan_view in = RV(dt, 3, 4, 5);
      if (kind == PLAN_OP_REDUCE_MEAN && r % 2) { /* a block of a larger dim */
        in.global_dims[0] = 6;
        in.global_dims[2] = 10;
      }
      agree(plan_op_kind_name(kind), kind, at, &in, 1, NULL, 1, exact);
    }
  /* cross_entropy and its gradient over a block of a [4, 3] batch */
  for (int g = 0; g < 2; g++) {
    plan_view lg = RV(dt, 2, 3, 7);
    plan_view lb = rnd(PLAN_I64, 2, D(2, 3), 0, 7);
    if (g) {
      lb.global_dims[0] = 4;
      lb.global_dims[1] = 3;
    }
    plan_view in[2] = {lg, lb};
    agree("cross_entropy", PLAN_OP_CROSS_ENTROPY, NULL, in, 2, NULL, 1, exact);
    plan_view gin[3] = {rnd(dt, 0, NULL, 0.5, 2), lg, lb};
    agree("cross_entropy_grad", PLAN_OP_CROSS_ENTROPY_GRAD, NULL, gin, 3, NULL,
          1, exact);
  }
}

/* embedding over a table block (rows [3, 9) of 12) and its gradient into
 * such a block, with repeated ids. */
static void embeddings(plan_dtype dt, bool exact) {
  for (int blk = 0; blk < 2; blk++) {
    plan_view tab = RV(dt, 6, 4);
    if (blk) {
      tab.offset[0] = 3;
      tab.global_dims[0] = 12;
    }
    plan_view ids = rnd(PLAN_I64, 2, D(2, 5), 0, blk ? 12 : 6);
    ((int64_t *)ids.data)[1] = ((int64_t *)ids.data)[0];
    plan_view in[2] = {tab, ids};
    agree("embedding", PLAN_OP_EMBEDDING, NULL, in, 2, NULL, 1, exact);
    plan_view gin[2] = {RV(dt, 2, 5, 4), ids};
    plan_view shape = mkv(dt, 2, D(6, 4));
    if (blk) {
      shape.offset[0] = 3;
      shape.global_dims[0] = 12;
    }
    plan_attr_val *at = attrs_new(1);
    at[0].i = blk ? 12 : 6;
    at[0].present = true;
    agree("embedding_grad", PLAN_OP_EMBEDDING_GRAD, at, gin, 2, &shape, 1,
          exact);
  }
}

/* The data-movement ops: any dtype, integers included. */
static void movement(plan_dtype dt, bool exact) {
  plan_view x = rnd(dt, 3, D(2, 3, 4), -50, 50);
  agree("transpose", PLAN_OP_TRANSPOSE, NULL, &x, 1, NULL, 1, exact);
  plan_attr_val *at = attrs_new(1);
  set_ints(&at[0], 2, 0, 2);
  agree("transpose 0 2", PLAN_OP_TRANSPOSE, at, &x, 1, NULL, 1, exact);
  plan_attr_val *ap = attrs_new(1);
  set_ints(&ap[0], 3, 2, 0, 1);
  agree("permute", PLAN_OP_PERMUTE, ap, &x, 1, NULL, 1, exact);
  plan_view x4 = rnd(dt, 4, D(2, 1, 3, 2), -50, 50);
  plan_attr_val *ap4 = attrs_new(1);
  set_ints(&ap4[0], 4, 3, 1, 0, 2);
  agree("permute rank 4", PLAN_OP_PERMUTE, ap4, &x4, 1, NULL, 1, exact);
  plan_view rs = mkv(dt, 2, D(6, 4));
  agree("reshape", PLAN_OP_RESHAPE, NULL, &x, 1, &rs, 1, exact);
  for (int dim = 0; dim < 3; dim++) {
    plan_attr_val *as = attrs_new(2);
    plan_view parts[3];
    int64_t n = x.dims[dim];
    int64_t sz[3] = {1, n - 1, 0};
    int np = 2;
    for (int i = 0; i < np; i++) {
      int64_t d[3] = {2, 3, 4};
      d[dim] = sz[i];
      parts[i] = mkv(dt, 3, d);
    }
    as[0].i = dim;
    set_ints(&as[1], 2, (int)sz[0], (int)sz[1]);
    agree("split", PLAN_OP_SPLIT, as, &x, 1, parts, np, exact);
    plan_view cin[3];
    for (int i = 0; i < 3; i++) {
      int64_t d[3] = {2, 3, 4};
      d[dim] = i + 1;
      cin[i] = rnd(dt, 3, d, -50, 50);
    }
    plan_attr_val *ac = attrs_new(1);
    ac[0].i = dim;
    agree("concat", PLAN_OP_CONCAT, ac, cin, 3, NULL, 1, exact);
  }
  plan_view small = rnd(dt, 2, D(3, 1), -50, 50);
  plan_view big = mkv(dt, 3, D(2, 3, 4));
  agree("expand", PLAN_OP_EXPAND, NULL, &small, 1, &big, 1, exact);
  plan_view scalar = rnd(dt, 0, NULL, -50, 50);
  agree("expand scalar", PLAN_OP_EXPAND, NULL, &scalar, 1, &big, 1, exact);
  static const plan_dtype conds[] = {PLAN_I64, PLAN_F32, PLAN_F64};
  for (int c = 0; c < 3; c++) {
    plan_view w[3] = {rnd(conds[c], 2, D(3, 1), 0, 2),
                      rnd(dt, 3, D(2, 3, 4), -50, 50),
                      rnd(dt, 1, D(4), -50, 50)};
    agree("where", PLAN_OP_WHERE, NULL, w, 3, NULL, 1, exact);
  }
  for (int dim = 0; dim < 3; dim++) {
    plan_attr_val *ar = attrs_new(2);
    ar[0].i = 3;
    ar[1].i = dim;
    ar[0].present = ar[1].present = true;
    agree("repeat_interleave", PLAN_OP_REPEAT_INTERLEAVE, ar, &x, 1, NULL, 1,
          exact);
  }
}

/* ---- routing ops --------------------------------------------------------- */

/* Integer indices in [lo, hi) of the given dims. */
static plan_view ids_in(int rank, const int64_t *dims, int64_t lo, int64_t hi) {
  return rnd(PLAN_I64, rank, dims, (double)lo, (double)hi);
}

static plan_attr_val *int_attrs(int n, int64_t a0, int64_t a1) {
  plan_attr_val *at = attrs_new(n);
  at[0].i = a0;
  at[0].present = true;
  if (n > 1) {
    at[1].i = a1;
    at[1].present = true;
  }
  return at;
}

/* topk at several shapes and k, on distinct values and on few values
 * (ties to the lower index), with NaN and infinities in float mode. */
static void route_topk(plan_dtype dt, bool exact) {
  static const struct {
    int rank;
    int64_t dims[3], k;
  } shapes[] = {
      {1, {9}, 4},    {2, {3, 7}, 1},    {2, {3, 7}, 3},
      {2, {4, 7}, 7}, {3, {2, 3, 5}, 2}, {2, {0, 5}, 2},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ties = 0; ties < 2; ties++) {
      plan_view x = rnd(dt, shapes[s].rank, shapes[s].dims, -2, 2);
      for (int64_t i = 0; ties && i < count(&x); i++)
        put(&x, i, floor(get(&x, i))); /* -2 .. 1: many ties */
      if (!exact && dt != PLAN_BF16 && dt != PLAN_F16 && count(&x) > 4) {
        put(&x, 1, NAN);
        put(&x, 2, INFINITY);
        put(&x, 3, -INFINITY);
      }
      char label[64];
      snprintf(label, sizeof label, "topk shape %zu ties %d", s, ties);
      agree(label, PLAN_OP_TOPK, int_attrs(1, shapes[s].k, 0), &x, 1, NULL, 2,
            exact);
    }
}

/* gather and scatter_add on the whole last dim and on a block of it
 * ([4, 9) of 12), with repeated indices (scatter_add's sums). */
static void route_gather_scatter(plan_dtype dt, bool exact) {
  for (int blk = 0; blk < 2; blk++) {
    int64_t lo = blk ? 4 : 0, n = blk ? 5 : 6, g = blk ? 12 : 6;
    plan_view x = RV(dt, 3, n);
    if (blk) {
      x.offset[1] = lo;
      x.global_dims[1] = g;
    }
    plan_view in[2] = {x, ids_in(2, D(3, 9), 0, g)};
    agree(blk ? "gather block" : "gather", PLAN_OP_GATHER, NULL, in, 2, NULL, 1,
          exact);
    plan_view x3 = RV(dt, 2, 2, n);
    if (blk) {
      x3.offset[2] = lo;
      x3.global_dims[2] = g;
    }
    plan_view in3[2] = {x3, ids_in(3, D(2, 2, 4), 0, g)};
    agree("gather rank 3", PLAN_OP_GATHER, NULL, in3, 2, NULL, 1, exact);
    plan_view x1 = RV(dt, n);
    if (blk) {
      x1.offset[0] = lo;
      x1.global_dims[0] = g;
    }
    plan_view in1[2] = {x1, ids_in(1, D(7), 0, g)};
    agree("gather rank 1", PLAN_OP_GATHER, NULL, in1, 2, NULL, 1, exact);
    for (int64_t k = 1; k <= 20; k += 19) {
      plan_view src[2] = {RV(dt, 3, k), ids_in(2, D(3, k), 0, g)};
      plan_view shape = mkv(dt, 2, D(3, n));
      if (blk) {
        shape.offset[1] = lo;
        shape.global_dims[1] = g;
      }
      agree(blk ? "scatter_add block" : "scatter_add", PLAN_OP_SCATTER_ADD,
            int_attrs(1, g, 0), src, 2, &shape, 1, exact);
    }
    plan_view src3[2] = {RV(dt, 2, 2, 9), ids_in(3, D(2, 2, 9), 0, g)};
    plan_view shape3 = mkv(dt, 3, D(2, 2, n));
    if (blk) {
      shape3.offset[2] = lo;
      shape3.global_dims[2] = g;
    }
    agree("scatter_add rank 3", PLAN_OP_SCATTER_ADD, int_attrs(1, g, 0), src3,
          2, &shape3, 1, exact);
  }
  /* many sources into each element: the running sum's rounding shows */
  plan_view hot[2] = {RV(dt, 3, 64), ids_in(2, D(3, 64), 0, 4)};
  plan_view hot_out = mkv(dt, 2, D(3, 2));
  hot_out.offset[1] = 1;
  hot_out.global_dims[1] = 4;
  agree("scatter_add collisions", PLAN_OP_SCATTER_ADD, int_attrs(1, 4, 0), hot,
        2, &hot_out, 1, exact);
}

/* The mixture-of-experts ops over groups of tokens [g, t, h] routed to
 * `experts` with k choices each, weighted or not, on the whole experts
 * dim and on the block [e0, e0 + ne): capacity cap drops choices when
 * t * k > experts * cap. */
static void route_moe_case(plan_dtype dt, bool exact, int64_t g, int64_t t,
                           int64_t k, int64_t h, int64_t experts, int64_t cap,
                           int64_t e0, int64_t ne) {
  plan_view x = rnd(dt, 3, D(g, t, h), -2, 2);
  plan_view idx = ids_in(3, D(g, t, k), 0, experts);
  if (k > 1 && t > 0) /* a token choosing one expert twice */
    ((int64_t *)idx.data)[1] = ((int64_t *)idx.data)[0];
  plan_view w = rnd(dt, 3, D(g, t, k), -2, 2);
  bool blk = e0 > 0 || ne < experts;
  char label[96];
  for (int wt = 0; wt < 2; wt++) {
    snprintf(label, sizeof label,
             "moe g %lld t %lld k %lld h %lld e %lld cap %lld block [%lld, "
             "%lld)%s",
             (long long)g, (long long)t, (long long)k, (long long)h,
             (long long)experts, (long long)cap, (long long)e0,
             (long long)(e0 + ne), wt ? " weighted" : "");
    plan_view din[3] = {x, idx, w};
    plan_view slots = mkv(dt, 4, D(ne, g, cap, h));
    if (blk) {
      slots.offset[0] = e0;
      slots.global_dims[0] = experts;
    }
    agree(label, PLAN_OP_MOE_DISPATCH, int_attrs(2, experts, cap), din, 2 + wt,
          &slots, 1, exact);
    plan_view y = rnd(dt, 4, D(ne, g, cap, h), -2, 2);
    y.offset[0] = slots.offset[0];
    y.global_dims[0] = slots.global_dims[0];
    plan_view cin[3] = {y, idx, w};
    agree(label, PLAN_OP_MOE_COMBINE, NULL, cin, 2 + wt, NULL, 1, exact);
  }
  plan_view b = rnd(dt, 4, D(ne, g, cap, h), -2, 2);
  if (blk) {
    b.offset[0] = e0;
    b.global_dims[0] = experts;
  }
  plan_view gin[3] = {x, b, idx};
  agree(label, PLAN_OP_MOE_WEIGHTS_GRAD, NULL, gin, 3, NULL, 1, exact);
}

static void route_moe(plan_dtype dt, bool exact) {
  /* 12 choices a group over 4 experts: capacity 2 keeps at most 8 */
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 2, 0, 4);
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 2, 1, 2);
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 12, 0, 4); /* no drops */
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 12, 3, 1);
  route_moe_case(dt, exact, 3, 5, 1, 4, 3, 1, 2, 1);
  route_moe_case(dt, exact, 1, 8, 3, 2, 8, 2, 4, 4);
}

static void routing(plan_dtype dt, bool exact) {
  int64_t before = nnonzero;
  route_topk(dt, exact);
  route_gather_scatter(dt, exact);
  route_moe(dt, exact);
  assert_true(nnonzero - before > 800); /* about 970: not all zeros */
}

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
static const char *const known_gaps[] = {NULL};

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
      cmocka_unit_test_teardown(test_edges, teardown),
      cmocka_unit_test_teardown(test_large, teardown),
      cmocka_unit_test_teardown(test_context, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
