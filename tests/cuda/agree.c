/* The agreement test's harness (agree.h): buffers the test frees in its
 * teardown, random views in every dtype, op attributes, and running one
 * op on the CPU and the CUDA runner and comparing the outputs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"

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

int teardown(void **state) {
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

size_t esz(plan_dtype t) {
  return t == PLAN_F64 || !is_float(t) ? 8 : 4;
}

int64_t count(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d];
  return n;
}

plan_view mkv(plan_dtype dt, int rank, const int64_t *dims) {
  plan_view v;
  memset(&v, 0, sizeof v);
  v.dtype = dt;
  v.rank = rank;
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  v.data = talloc((size_t)count(&v) * esz(dt));
  return v;
}

void put(plan_view *v, int64_t i, double x) {
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

double get(const plan_view *v, int64_t i) {
  if (v->dtype == PLAN_F64)
    return ((const double *)v->data)[i];
  if (is_float(v->dtype))
    return ((const float *)v->data)[i];
  return (double)((const int64_t *)v->data)[i];
}

bool dyadic_inputs;

/* Uniform in [lo, hi) (integers: in [lo, hi) too); away from zero when
 * `nonzero` (a divisor), with a random sign. */
plan_view rnd(plan_dtype dt, int rank, const int64_t *dims, double lo,
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

plan_view divisor(plan_dtype dt, int rank, const int64_t *dims) {
  plan_view v = rnd(dt, rank, dims, 0.5, 2);
  for (int64_t i = 0; i < count(&v); i++)
    if (urand() < 0.5)
      put(&v, i, -get(&v, i));
  return v;
}

plan_view ids_in(int rank, const int64_t *dims, int64_t lo, int64_t hi) {
  return rnd(PLAN_I64, rank, dims, (double)lo, (double)hi);
}

/* ---- attributes ---------------------------------------------------------- */

plan_attr_val *attrs_new(int n) {
  return talloc(sizeof(plan_attr_val) * (size_t)(n ? n : 1));
}

void set_ints(plan_attr_val *a, int n, ...) {
  va_list ap;
  va_start(ap, n);
  a->ints = talloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    a->ints[i] = va_arg(ap, int);
  va_end(ap);
  a->nints = n;
  a->present = true;
}

plan_attr_val *int_attrs(int n, int64_t a0, int64_t a1) {
  plan_attr_val *at = attrs_new(n);
  at[0].i = a0;
  at[0].present = true;
  if (n > 1) {
    at[1].i = a1;
    at[1].present = true;
  }
  return at;
}

/* ---- running and comparing ----------------------------------------------- */

int ncompared;
int64_t nnonzero;

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

/* Compares as agreement() says. */
void agree(const char *label, int kind, const plan_attr_val *attrs,
           const plan_view *in, int nin, const plan_view *shape, int nout,
           bool exact) {
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

const plan_dtype float_dtypes[4] = {PLAN_F64, PLAN_F32, PLAN_BF16, PLAN_F16};
