/* CPU kernels: every op of the registry in F64, F32, BF16 and F16 against a
 * naive reference written here (plain loops in long double over the same
 * inputs, rounded to the dtype first), on small random shapes with
 * broadcasting, batched matmul with a 2-D rhs and both transposes, rank 3/4
 * inputs and uneven splits. BF16/F16 results must also be representable in
 * their format. Then the local-block semantics (reduce_mean over a sharded
 * dim, embedding over a row-sharded table, cross_entropy over a split
 * batch: the partials sum to the global result), exact mode (dyadic grid,
 * exact integer matmul, exact quotients kept) and the argument checks. */
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
#include "ir/ops.h"
#include "base/numeric.h"

/* ---- test tensors: doubles with dims ------------------------------------- */

typedef struct tt {
  int rank;
  int64_t dims[PLAN_MAX_RANK];
  int64_t n;
  double *v;
  plan_dtype int_dtype; /* I64 / I32 for integer tensors, else F64 */
  bool has_block;       /* global dims and offset below are set */
  int64_t gdims[PLAN_MAX_RANK], off[PLAN_MAX_RANK];
} tt;

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

static void free_all(void) {
  while (nallocs > 0)
    free(allocs[--nallocs]);
}

static int teardown(void **state) {
  (void)state;
  free_all();
  return 0;
}

static tt *mk(int rank, const int64_t *dims) {
  tt *t = talloc(sizeof *t);
  t->rank = rank;
  t->n = 1;
  t->int_dtype = PLAN_F64;
  for (int d = 0; d < rank; d++) {
    t->dims[d] = dims[d];
    t->n *= dims[d];
  }
  t->v = talloc(sizeof(double) * (size_t)t->n);
  return t;
}

static tt *mk_like(const tt *r) {
  return mk(r->rank, r->dims);
}

/* ---- random numbers ------------------------------------------------------ */

static uint64_t rstate;

static uint64_t rnd(void) {
  uint64_t z = (rstate += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
/* uniform in [lo, hi] */
static int64_t rint_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- dtypes -------------------------------------------------------------- */

static const plan_dtype DTS[4] = {PLAN_F64, PLAN_F32, PLAN_BF16, PLAN_F16};

static double quant(plan_dtype dt, double x) {
  switch (dt) {
  case PLAN_F32:
    return (float)x;
  case PLAN_BF16:
    return plan_round_bf16((float)x);
  case PLAN_F16:
    return plan_round_f16((float)x);
  default:
    return x;
  }
}

/* Random values in [-2, 2] on a 2^-11 grid, rounded to dt. */
static tt *rnd_t(plan_dtype dt, int rank, const int64_t *dims) {
  tt *t = mk(rank, dims);
  for (int64_t i = 0; i < t->n; i++)
    t->v[i] = quant(dt, (double)rint_in(-4096, 4096) / 2048.0);
  return t;
}

static tt *int_t(int rank, const int64_t *dims, int64_t lo, int64_t hi) {
  tt *t = mk(rank, dims);
  t->int_dtype = PLAN_I64;
  for (int64_t i = 0; i < t->n; i++)
    t->v[i] = (double)rint_in(lo, hi - 1);
  return t;
}

/* ---- running a kernel ---------------------------------------------------- */

static size_t esz(plan_dtype dt) {
  return dt == PLAN_F64                     ? sizeof(double)
         : dt == PLAN_I64 || dt == PLAN_I32 ? sizeof(int64_t)
                                            : sizeof(float);
}

static void to_view(const tt *t, plan_dtype dt, plan_view *v, bool fill) {
  memset(v, 0, sizeof *v);
  v->dtype = dt;
  v->rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    v->dims[d] = t->dims[d];
    v->global_dims[d] = t->has_block ? t->gdims[d] : t->dims[d];
    v->offset[d] = t->has_block ? t->off[d] : 0;
  }
  v->data = talloc(esz(dt) * (size_t)t->n);
  for (int64_t i = 0; i < t->n; i++) {
    double x = fill ? t->v[i] : 12345.0; /* outputs: a marker */
    if (dt == PLAN_F64)
      ((double *)v->data)[i] = x;
    else if (dt == PLAN_I64 || dt == PLAN_I32)
      ((int64_t *)v->data)[i] = (int64_t)x;
    else
      ((float *)v->data)[i] = (float)x;
  }
}

static void from_view(const plan_view *v, tt *t) {
  for (int64_t i = 0; i < t->n; i++) {
    if (v->dtype == PLAN_F64)
      t->v[i] = ((double *)v->data)[i];
    else if (v->dtype == PLAN_I64 || v->dtype == PLAN_I32)
      t->v[i] = (double)((int64_t *)v->data)[i];
    else
      t->v[i] = ((float *)v->data)[i];
  }
}

static char last_err[256];

/* Runs the kernel on ins (floats as dt, integers as their int dtype) and
 * writes the results into outs (whose dims the caller set). */
static int run_k(int kind, const plan_attr_val *attrs, plan_dtype dt,
                 tt *const *ins, int nin, tt *const *outs, int nout,
                 const plan_kernel_ctx *ctx) {
  plan_view iv[PLAN_MAX_OPERANDS], ov[PLAN_MAX_OPERANDS];
  for (int i = 0; i < nin; i++)
    to_view(ins[i], ins[i]->int_dtype != PLAN_F64 ? ins[i]->int_dtype : dt,
            &iv[i], true);
  for (int i = 0; i < nout; i++)
    to_view(outs[i], outs[i]->int_dtype != PLAN_F64 ? outs[i]->int_dtype : dt,
            &ov[i], false);
  last_err[0] = '\0';
  int rc = plan_cpu_kernel(kind, attrs, iv, nin, ov, nout, ctx, last_err,
                           sizeof last_err);
  if (rc == PLAN_OK)
    for (int i = 0; i < nout; i++)
      from_view(&ov[i], outs[i]);
  return rc;
}

/* ---- comparing ----------------------------------------------------------- */

static double rtol_of(plan_dtype dt) {
  return dt == PLAN_F64    ? 1e-12
         : dt == PLAN_F32  ? 1e-5
         : dt == PLAN_BF16 ? 1.0 / 256   /* one rounding: 2^-9 */
                           : 1.0 / 1024; /* f16: 2^-11 */
}
static double atol_of(plan_dtype dt) {
  return dt == PLAN_F64 ? 1e-12 : 1e-5;
}

/* |got - ref| <= rtol |ref| + atol * mag, where mag bounds the magnitude of
 * the terms a result sums (k * max|a| * max|b| for a matmul); BF16/F16
 * results must be representable in their format. */
static void compare(const tt *got, const tt *ref, plan_dtype dt, double mag,
                    const char *what) {
  assert_int_equal(got->n, ref->n);
  double rt = rtol_of(dt), at = atol_of(dt) * (mag > 1 ? mag : 1);
  for (int64_t i = 0; i < got->n; i++) {
    double g = got->v[i], r = ref->v[i];
    bool ok = fabs(g - r) <= rt * fabs(r) + at || (isnan(g) && isnan(r));
    if (dt == PLAN_BF16 && plan_round_bf16((float)g) != (float)g)
      ok = false;
    if (dt == PLAN_F16 && plan_round_f16((float)g) != (float)g)
      ok = false;
    if (!ok) {
      print_error("%s (%s): element %lld is %.17g, reference %.17g\n", what,
                  plan_dtype_name(dt), (long long)i, g, r);
      fail();
    }
  }
}

/* Runs one op on ins in dt and compares every output with the reference. */
static void expect(int kind, const plan_attr_val *attrs, plan_dtype dt,
                   tt *const *ins, int nin, tt *const *refs, int nout,
                   double mag) {
  tt *got[PLAN_MAX_OPERANDS] = {NULL};
  for (int i = 0; i < nout; i++)
    got[i] = mk_like(refs[i]);
  int rc = run_k(kind, attrs, dt, ins, nin, got, nout, NULL);
  if (rc != PLAN_OK) {
    print_error("%s (%s): %s\n", plan_op_kind_name(kind), plan_dtype_name(dt),
                last_err);
    fail();
  }
  for (int i = 0; i < nout; i++)
    compare(got[i], refs[i], dt, mag, plan_op_kind_name(kind));
}

/* ---- index helpers ------------------------------------------------------- */

static void unravel(int64_t i, const int64_t *dims, int rank, int64_t *c) {
  for (int d = rank - 1; d >= 0; d--) {
    c[d] = dims[d] ? i % dims[d] : 0;
    i = dims[d] ? i / dims[d] : 0;
  }
}

static int64_t ravel(const int64_t *c, const int64_t *dims, int rank) {
  int64_t i = 0;
  for (int d = 0; d < rank; d++)
    i = i * dims[d] + c[d];
  return i;
}

/* The element of t at the output coords oc (rank orank), numpy-broadcast. */
static double at_bcast(const tt *t, const int64_t *oc, int orank) {
  int64_t c[PLAN_MAX_RANK];
  for (int d = 0; d < t->rank; d++)
    c[d] = t->dims[d] == 1 ? 0 : oc[d + orank - t->rank];
  return t->v[ravel(c, t->dims, t->rank)];
}

/* Random dims of a given rank in [lo, hi]. */
static void rdims(int64_t *dims, int rank, int64_t lo, int64_t hi) {
  for (int d = 0; d < rank; d++)
    dims[d] = rint_in(lo, hi);
}

/* ---- references ---------------------------------------------------------- */

static tt *ref_binary(int kind, const tt *a, const tt *b) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  int64_t dims[PLAN_MAX_RANK];
  for (int j = 0; j < r; j++) {
    int ja = j - (r - a->rank), jb = j - (r - b->rank);
    int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
    dims[j] = da == 1 ? db : da;
  }
  tt *o = mk(r, dims);
  int64_t c[PLAN_MAX_RANK];
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, o->dims, r, c);
    long double x = at_bcast(a, c, r), y = at_bcast(b, c, r);
    o->v[i] = (double)(kind == PLAN_OP_ADD   ? x + y
                       : kind == PLAN_OP_SUB ? x - y
                       : kind == PLAN_OP_MUL ? x * y
                                             : x / y);
  }
  return o;
}

static double gelu_ref(long double x, bool tanh_approx) {
  if (tanh_approx)
    return (double)(0.5L * x *
                    (1 + tanhl(sqrtl(2.0L / 3.14159265358979323846264L) *
                               (x + 0.044715L * x * x * x))));
  return (double)(0.5L * x * (1 + erfl(x / sqrtl(2.0L))));
}

static tt *ref_unary(int kind, const tt *x, double param) {
  tt *o = mk_like(x);
  for (int64_t i = 0; i < x->n; i++) {
    long double v = x->v[i];
    switch (kind) {
    case PLAN_OP_SCALE:
      o->v[i] = (double)(v * param);
      break;
    case PLAN_OP_RELU:
      o->v[i] = v > 0 ? (double)v : 0.0;
      break;
    case PLAN_OP_GELU:
      o->v[i] = gelu_ref(v, param != 0);
      break;
    case PLAN_OP_SILU:
      o->v[i] = (double)(v / (1 + expl(-v)));
      break;
    case PLAN_OP_TANH:
      o->v[i] = (double)tanhl(v);
      break;
    case PLAN_OP_SIGMOID:
      o->v[i] = (double)(1 / (1 + expl(-v)));
      break;
    case PLAN_OP_RSQRT:
      o->v[i] = (double)(1 / sqrtl(v));
      break;
    case PLAN_OP_ADD_SCALAR:
      o->v[i] = (double)(v + param);
      break;
    default:
      o->v[i] = (double)expl(v);
      break;
    }
  }
  return o;
}

static tt *ref_matmul(const tt *a, const tt *b, bool ta, bool tb) {
  int ra = a->rank, rb = b->rank;
  int64_t m = a->dims[ta ? ra - 1 : ra - 2], k = a->dims[ta ? ra - 2 : ra - 1];
  int64_t n = b->dims[tb ? rb - 2 : rb - 1];
  int nb = (ra > rb ? ra : rb) - 2;
  int64_t dims[PLAN_MAX_RANK];
  for (int j = 0; j < nb; j++) {
    int ja = j - (nb - (ra - 2)), jb = j - (nb - (rb - 2));
    int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
    dims[j] = da == 1 ? db : da;
  }
  dims[nb] = m;
  dims[nb + 1] = n;
  tt *o = mk(nb + 2, dims);
  int64_t c[PLAN_MAX_RANK], ca[PLAN_MAX_RANK], cb[PLAN_MAX_RANK];
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, o->dims, nb + 2, c);
    for (int d = 0; d < ra - 2; d++)
      ca[d] = a->dims[d] == 1 ? 0 : c[d + nb - (ra - 2)];
    for (int d = 0; d < rb - 2; d++)
      cb[d] = b->dims[d] == 1 ? 0 : c[d + nb - (rb - 2)];
    long double s = 0;
    for (int64_t p = 0; p < k; p++) {
      ca[ra - 2] = ta ? p : c[nb];
      ca[ra - 1] = ta ? c[nb] : p;
      cb[rb - 2] = tb ? c[nb + 1] : p;
      cb[rb - 1] = tb ? p : c[nb + 1];
      s += (long double)a->v[ravel(ca, a->dims, ra)] *
           b->v[ravel(cb, b->dims, rb)];
    }
    o->v[i] = (double)s;
  }
  return o;
}

static tt *ref_linear(const tt *x, const tt *w, const tt *bias) {
  int64_t k = x->dims[x->rank - 1], n = w->dims[0];
  int64_t dims[PLAN_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[x->rank - 1] = n;
  tt *o = mk(x->rank, dims);
  for (int64_t i = 0; i < o->n; i++) {
    int64_t row = i / n, j = i % n;
    long double s = bias ? bias->v[j] : 0;
    for (int64_t p = 0; p < k; p++)
      s += (long double)x->v[row * k + p] * w->v[j * k + p];
    o->v[i] = (double)s;
  }
  return o;
}

static tt *ref_softmax(const tt *x, int dim) {
  tt *o = mk_like(x);
  int64_t c[PLAN_MAX_RANK];
  for (int64_t i = 0; i < x->n; i++) {
    unravel(i, x->dims, x->rank, c);
    int64_t keep = c[dim];
    long double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < x->dims[dim]; j++) {
      c[dim] = j;
      long double v = x->v[ravel(c, x->dims, x->rank)];
      if (v > m)
        m = v;
    }
    for (int64_t j = 0; j < x->dims[dim]; j++) {
      c[dim] = j;
      s += expl(x->v[ravel(c, x->dims, x->rank)] - m);
    }
    c[dim] = keep;
    o->v[i] = (double)(expl(x->v[i] - m) / s);
  }
  return o;
}

static tt *ref_norm(int kind, const tt *x, const tt *w, const tt *b,
                    double eps) {
  tt *o = mk_like(x);
  int64_t d = x->dims[x->rank - 1], rows = d ? x->n / d : 0;
  for (int64_t r = 0; r < rows; r++) {
    const double *xx = x->v + r * d;
    long double mean = 0, var = 0;
    if (kind == PLAN_OP_LAYERNORM) {
      for (int64_t i = 0; i < d; i++)
        mean += xx[i];
      mean /= d;
    }
    for (int64_t i = 0; i < d; i++)
      var += (xx[i] - mean) * (xx[i] - mean);
    long double rstd = 1 / sqrtl(var / d + eps);
    for (int64_t i = 0; i < d; i++)
      o->v[r * d + i] =
          (double)((xx[i] - mean) * rstd * w->v[i] + (b ? b->v[i] : 0));
  }
  return o;
}

static tt *ref_embedding(const tt *table, const tt *ids) {
  int64_t dims[PLAN_MAX_RANK];
  memcpy(dims, ids->dims, sizeof(int64_t) * (size_t)ids->rank);
  int64_t d = table->dims[1];
  dims[ids->rank] = d;
  tt *o = mk(ids->rank + 1, dims);
  for (int64_t i = 0; i < ids->n; i++)
    for (int64_t j = 0; j < d; j++)
      o->v[i * d + j] = table->v[(int64_t)ids->v[i] * d + j];
  return o;
}

static tt *ref_permute(const tt *x, const int *perm) {
  int64_t dims[PLAN_MAX_RANK], c[PLAN_MAX_RANK], ci[PLAN_MAX_RANK];
  for (int j = 0; j < x->rank; j++)
    dims[j] = x->dims[perm[j]];
  tt *o = mk(x->rank, dims);
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, o->dims, o->rank, c);
    for (int j = 0; j < x->rank; j++)
      ci[perm[j]] = c[j];
    o->v[i] = x->v[ravel(ci, x->dims, x->rank)];
  }
  o->int_dtype = x->int_dtype;
  return o;
}

/* divisor 0: sum; else the mean's divisor */
static tt *ref_reduce(const tt *x, const bool *red, bool keep, double divisor) {
  int64_t dims[PLAN_MAX_RANK], c[PLAN_MAX_RANK], co[PLAN_MAX_RANK];
  int r = 0;
  for (int d = 0; d < x->rank; d++)
    if (!red[d] || keep)
      dims[r++] = red[d] ? 1 : x->dims[d];
  tt *o = mk(r, dims);
  long double *acc = talloc(sizeof(long double) * (size_t)o->n);
  for (int64_t i = 0; i < x->n; i++) {
    unravel(i, x->dims, x->rank, c);
    int k = 0;
    for (int d = 0; d < x->rank; d++)
      if (!red[d] || keep)
        co[k++] = red[d] ? 0 : c[d];
    acc[ravel(co, o->dims, r)] += x->v[i];
  }
  for (int64_t i = 0; i < o->n; i++)
    o->v[i] = (double)(divisor > 0 ? acc[i] / divisor : acc[i]);
  return o;
}

/* pieces of x along dim with the given sizes */
static void ref_split(const tt *x, int dim, const int64_t *sizes, int n,
                      tt **outs) {
  int64_t c[PLAN_MAX_RANK], at = 0;
  for (int p = 0; p < n; p++) {
    int64_t dims[PLAN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[dim] = sizes[p];
    outs[p] = mk(x->rank, dims);
    outs[p]->int_dtype = x->int_dtype;
    for (int64_t i = 0; i < outs[p]->n; i++) {
      unravel(i, dims, x->rank, c);
      c[dim] += at;
      outs[p]->v[i] = x->v[ravel(c, x->dims, x->rank)];
    }
    at += sizes[p];
  }
}

static double ref_ce(const tt *lg, const tt *lb, double count) {
  int64_t c = lg->dims[lg->rank - 1];
  long double total = 0;
  for (int64_t r = 0; r < lb->n; r++) {
    const double *row = lg->v + r * c;
    long double m = row[0], s = 0;
    for (int64_t i = 1; i < c; i++)
      if (row[i] > m)
        m = row[i];
    for (int64_t i = 0; i < c; i++)
      s += expl(row[i] - m);
    total += m + logl(s) - row[(int64_t)lb->v[r]];
  }
  return (double)(total / count);
}

/* ---- attributes ---------------------------------------------------------- */

static plan_attr_val *attrs_new(void) {
  return talloc(sizeof(plan_attr_val) * PLAN_MAX_ATTRS);
}
static void set_ints(plan_attr_val *a, const int64_t *v, int n) {
  a->ints = talloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
  a->nints = n;
  a->present = true;
}

/* ---- per-op tests -------------------------------------------------------- */

/* A random broadcast partner: a suffix of dims, some of them 1. */
static int bcast_of(const int64_t *dims, int rank, int64_t *o) {
  int r = (int)rint_in(0, rank);
  for (int d = 0; d < r; d++) {
    o[d] = dims[rank - r + d];
    if (rint_in(0, 2) == 0)
      o[d] = 1;
  }
  return r;
}

static void test_binary(void **state) {
  (void)state;
  static const int kinds[4] = {PLAN_OP_ADD, PLAN_OP_SUB, PLAN_OP_MUL,
                               PLAN_OP_DIV};
  for (int di = 0; di < 4; di++)
    for (int ki = 0; ki < 4; ki++)
      for (int s = 0; s < 12; s++) {
        rstate = (uint64_t)(di * 1000 + ki * 100 + s);
        plan_dtype dt = DTS[di];
        int64_t od[PLAN_MAX_RANK], bd[PLAN_MAX_RANK];
        int r = (int)rint_in(0, 4);
        rdims(od, r, 1, 4);
        int rb = bcast_of(od, r, bd);
        tt *a = rnd_t(dt, r, od), *b = rnd_t(dt, rb, bd);
        if (s % 2) { /* the broadcast operand first */
          tt *t = a;
          a = b;
          b = t;
        }
        if (kinds[ki] == PLAN_OP_DIV)
          for (int64_t i = 0; i < b->n; i++)
            if (fabs(b->v[i]) < 0.25)
              b->v[i] = b->v[i] < 0 ? -0.5 : 0.5;
        tt *in[2] = {a, b}, *ref = ref_binary(kinds[ki], a, b);
        expect(kinds[ki], NULL, dt, in, 2, &ref, 1, 1);
      }
}

static void unary_case(int kind, const plan_attr_val *attrs, double param) {
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 6; s++) {
      rstate = (uint64_t)(kind * 100 + di * 10 + s);
      plan_dtype dt = DTS[di];
      int64_t dims[PLAN_MAX_RANK];
      int r = (int)rint_in(0, 4);
      rdims(dims, r, 1, 5);
      /* F32 (and BF16/F16) scale by the factor rounded to float */
      double p = dt == PLAN_F64 ? param : (double)(float)param;
      tt *x = rnd_t(dt, r, dims), *ref = ref_unary(kind, x, p);
      expect(kind, attrs, dt, &x, 1, &ref, 1, 1);
    }
}

static void test_scale(void **state) {
  (void)state;
  plan_attr_val *a = attrs_new();
  a[0].f = -0.75;
  a[0].present = true;
  unary_case(PLAN_OP_SCALE, a, -0.75);
  a[0].f = 0.1;
  unary_case(PLAN_OP_SCALE, a, 0.1);
  unary_case(PLAN_OP_SCALE, NULL, 1.0); /* default factor 1 */
}

static void test_relu(void **state) {
  (void)state;
  unary_case(PLAN_OP_RELU, NULL, 0);
}

static void test_gelu(void **state) {
  (void)state;
  unary_case(PLAN_OP_GELU, NULL, 0); /* default: erf */
  plan_attr_val *a = attrs_new();
  a[0].s = "none";
  unary_case(PLAN_OP_GELU, a, 0);
  a[0].s = "tanh";
  unary_case(PLAN_OP_GELU, a, 1);
}

static void test_silu(void **state) {
  (void)state;
  unary_case(PLAN_OP_SILU, NULL, 0);
}

static void test_tanh(void **state) {
  (void)state;
  unary_case(PLAN_OP_TANH, NULL, 0);
}

static void test_exp(void **state) {
  (void)state;
  unary_case(PLAN_OP_EXP, NULL, 0);
}

static void test_sigmoid(void **state) {
  (void)state;
  unary_case(PLAN_OP_SIGMOID, NULL, 0);
}

/* rsqrt of positive inputs (|x| + 1/4, on the dtype's grid) */
static void test_rsqrt(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++) {
    rstate = (uint64_t)(700 + di);
    plan_dtype dt = DTS[di];
    int64_t dims[2] = {3, 5};
    tt *x = rnd_t(dt, 2, dims);
    for (int64_t i = 0; i < x->n; i++)
      x->v[i] = quant(dt, fabs(x->v[i]) + 0.25);
    tt *ref = ref_unary(PLAN_OP_RSQRT, x, 0);
    expect(PLAN_OP_RSQRT, NULL, dt, &x, 1, &ref, 1, 1);
  }
}

static void test_add_scalar(void **state) {
  (void)state;
  plan_attr_val *a = attrs_new();
  a[0].f = -1.5;
  a[0].present = true;
  unary_case(PLAN_OP_ADD_SCALAR, a, -1.5);
  unary_case(PLAN_OP_ADD_SCALAR, NULL, 0); /* default value 0 */
}

static void matmul_case(plan_dtype dt, int ra, int rb, const int64_t *bat,
                        int nb, int64_t m, int64_t k, int64_t n, bool ta,
                        bool tb) {
  int64_t da[PLAN_MAX_RANK], db[PLAN_MAX_RANK];
  /* batch dims right-aligned to the output's, some broadcast */
  for (int d = 0; d < ra - 2; d++)
    da[d] = rint_in(0, 3) == 0 ? 1 : bat[d + nb - (ra - 2)];
  for (int d = 0; d < rb - 2; d++)
    db[d] = rint_in(0, 3) == 0 ? 1 : bat[d + nb - (rb - 2)];
  da[ra - 2] = ta ? k : m;
  da[ra - 1] = ta ? m : k;
  db[rb - 2] = tb ? n : k;
  db[rb - 1] = tb ? k : n;
  tt *a = rnd_t(dt, ra, da), *b = rnd_t(dt, rb, db);
  plan_attr_val *at = attrs_new();
  at[0].b = ta;
  at[1].b = tb;
  tt *in[2] = {a, b}, *ref = ref_matmul(a, b, ta, tb);
  expect(PLAN_OP_MATMUL, at, dt, in, 2, &ref, 1, 4.0 * (double)k);
}

static void test_matmul(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 40; s++) {
      rstate = (uint64_t)(7000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      bool ta = s & 1, tb = s & 2;
      int nb = (int)rint_in(0, 2);
      int64_t bat[PLAN_MAX_RANK];
      rdims(bat, nb, 1, 3);
      int ra = 2 + (int)rint_in(0, nb), rb = 2 + (int)rint_in(0, nb);
      if (s % 5 == 0) /* a batched lhs with a 2-D rhs (one gemm, folded) */
        rb = 2;
      if (ra < nb + 2 && rb < nb + 2)
        ra = nb + 2;
      matmul_case(dt, ra, rb, bat, nb, rint_in(1, 6), rint_in(1, 8),
                  rint_in(1, 6), ta, tb);
    }
  /* larger blocks through BLAS's blocking, both transposes */
  for (int di = 0; di < 2; di++)
    for (int t = 0; t < 4; t++) {
      rstate = (uint64_t)(7900 + di * 10 + t);
      const int64_t bat[2] = {2, 3};
      matmul_case(DTS[di], 4, 2 + (t & 1) * 2, bat, 2, 37, 130, 29, t & 1,
                  t & 2);
    }
  /* attrs NULL: no transposes */
  rstate = 7999;
  const int64_t d1[3] = {2, 3, 4}, d2[2] = {4, 5};
  tt *a = rnd_t(PLAN_F64, 3, d1), *b = rnd_t(PLAN_F64, 2, d2);
  tt *in[2] = {a, b}, *ref = ref_matmul(a, b, false, false);
  expect(PLAN_OP_MATMUL, NULL, PLAN_F64, in, 2, &ref, 1, 16);
}

static void test_linear(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 12; s++) {
      rstate = (uint64_t)(8000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int r = (int)rint_in(1, 4);
      int64_t dx[PLAN_MAX_RANK], dw[2], n = rint_in(1, 7);
      rdims(dx, r, 1, 4);
      if (s == 11)
        dx[r - 1] = 70; /* a longer contraction */
      dw[0] = n;
      dw[1] = dx[r - 1];
      tt *x = rnd_t(dt, r, dx), *w = rnd_t(dt, 2, dw);
      tt *bias = s % 2 ? rnd_t(dt, 1, &n) : NULL;
      tt *in[3] = {x, w, bias}, *ref = ref_linear(x, w, bias);
      expect(PLAN_OP_LINEAR, NULL, dt, in, bias ? 3 : 2, &ref, 1,
             4.0 * (double)dx[r - 1] + 2);
    }
}

static void test_softmax(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 10; s++) {
      rstate = (uint64_t)(9000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int r = (int)rint_in(1, 4);
      int64_t dims[PLAN_MAX_RANK];
      rdims(dims, r, 1, 5);
      int dim = (int)rint_in(0, r - 1);
      tt *x = rnd_t(dt, r, dims), *ref = ref_softmax(x, dim);
      plan_attr_val *a = attrs_new();
      /* half of the cases name the dim from the end */
      a[0].i = s % 2 ? dim - r : dim;
      expect(PLAN_OP_SOFTMAX, a, dt, &x, 1, &ref, 1, 1);
      if (dim == r - 1) /* the default dim -1 */
        expect(PLAN_OP_SOFTMAX, NULL, dt, &x, 1, &ref, 1, 1);
    }
}

static void norm_case(int kind) {
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 10; s++) {
      rstate = (uint64_t)(kind * 1000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int r = (int)rint_in(1, 4);
      int64_t dims[PLAN_MAX_RANK];
      rdims(dims, r, 1, 5);
      dims[r - 1] = rint_in(2, 9);
      tt *x = rnd_t(dt, r, dims), *w = rnd_t(dt, 1, &dims[r - 1]);
      tt *b = kind == PLAN_OP_LAYERNORM && s % 2 ? rnd_t(dt, 1, &dims[r - 1])
                                                 : NULL;
      double eps = kind == PLAN_OP_LAYERNORM ? 1e-5 : 1e-6;
      plan_attr_val *a = NULL;
      if (s % 3 == 0) {
        a = attrs_new();
        a[0].f = eps = 0.25;
      }
      tt *in[3] = {x, w, b}, *ref = ref_norm(kind, x, w, b, eps);
      expect(kind, a, dt, in, b ? 3 : 2, &ref, 1, 1);
    }
}

static void test_layernorm(void **state) {
  (void)state;
  norm_case(PLAN_OP_LAYERNORM);
}

static void test_rmsnorm(void **state) {
  (void)state;
  norm_case(PLAN_OP_RMSNORM);
}

static void test_embedding(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 8; s++) {
      rstate = (uint64_t)(11000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int64_t td[2] = {rint_in(1, 9), rint_in(1, 5)}, idd[PLAN_MAX_RANK];
      int r = (int)rint_in(0, 3);
      rdims(idd, r, 1, 4);
      tt *tab = rnd_t(dt, 2, td), *ids = int_t(r, idd, 0, td[0]);
      if (s % 2)
        ids->int_dtype = PLAN_I32;
      tt *in[2] = {tab, ids}, *ref = ref_embedding(tab, ids);
      expect(PLAN_OP_EMBEDDING, NULL, dt, in, 2, &ref, 1, 1);
    }
}

static void test_transpose(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 8; s++) {
      rstate = (uint64_t)(12000 + di * 100 + s);
      plan_dtype dt = di < 4 ? DTS[di] : PLAN_I64;
      int r = (int)rint_in(2, 4);
      int64_t dims[PLAN_MAX_RANK];
      rdims(dims, r, 1, 5);
      tt *x = di < 4 ? rnd_t(dt, r, dims) : int_t(r, dims, -50, 50);
      int d0 = (int)rint_in(0, r - 1), d1 = (int)rint_in(0, r - 2);
      if (d1 >= d0)
        d1++;
      int perm[PLAN_MAX_RANK];
      for (int j = 0; j < r; j++)
        perm[j] = j;
      perm[d0] = d1;
      perm[d1] = d0;
      plan_attr_val *a = attrs_new();
      const int64_t dd[2] = {d0, s % 2 ? d1 - r : d1};
      set_ints(&a[0], dd, 2);
      tt *ref = ref_permute(x, perm);
      expect(PLAN_OP_TRANSPOSE, a, dt, &x, 1, &ref, 1, 1);
      /* the default: the last two dims */
      for (int j = 0; j < r; j++)
        perm[j] = j;
      perm[r - 2] = r - 1;
      perm[r - 1] = r - 2;
      ref = ref_permute(x, perm);
      expect(PLAN_OP_TRANSPOSE, NULL, dt, &x, 1, &ref, 1, 1);
    }
}

static void test_permute(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 8; s++) {
      rstate = (uint64_t)(13000 + di * 100 + s);
      plan_dtype dt = di < 4 ? DTS[di] : PLAN_I32;
      int r = (int)rint_in(1, 5);
      int64_t dims[PLAN_MAX_RANK], pv[PLAN_MAX_RANK];
      rdims(dims, r, 1, 4);
      tt *x = di < 4 ? rnd_t(dt, r, dims) : int_t(r, dims, -50, 50);
      if (di == 4)
        x->int_dtype = PLAN_I32;
      int perm[PLAN_MAX_RANK];
      for (int j = 0; j < r; j++)
        perm[j] = j;
      for (int j = r - 1; j > 0; j--) { /* Fisher-Yates */
        int i = (int)rint_in(0, j), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
      for (int j = 0; j < r; j++)
        pv[j] = s % 2 ? perm[j] - r : perm[j];
      plan_attr_val *a = attrs_new();
      set_ints(&a[0], pv, r);
      tt *ref = ref_permute(x, perm);
      expect(PLAN_OP_PERMUTE, a, dt, &x, 1, &ref, 1, 1);
    }
}

static void test_reshape(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++) {
    rstate = (uint64_t)(14000 + di);
    plan_dtype dt = di < 4 ? DTS[di] : PLAN_I64;
    const int64_t din[3] = {2, 3, 4}, dout[2] = {6, 4};
    tt *x = di < 4 ? rnd_t(dt, 3, din) : int_t(3, din, 0, 9);
    tt *ref = mk(2, dout);
    ref->int_dtype = x->int_dtype;
    memcpy(ref->v, x->v, sizeof(double) * 24);
    plan_attr_val *a = attrs_new();
    /* the attribute is the global shape; the local dims are the caller's */
    const int64_t global[2] = {12, 4};
    set_ints(&a[0], global, 2);
    expect(PLAN_OP_RESHAPE, a, dt, &x, 1, &ref, 1, 1);
  }
}

static void reduce_case(int kind) {
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 12; s++) {
      rstate = (uint64_t)(kind * 1000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int r = (int)rint_in(1, 4);
      int64_t dims[PLAN_MAX_RANK], dv[PLAN_MAX_RANK];
      rdims(dims, r, 1, 5);
      bool red[PLAN_MAX_RANK] = {false};
      int nd = 0;
      double count = 1;
      for (int d = 0; d < r; d++)
        if (rint_in(0, 1) || (d == r - 1 && nd == 0)) {
          red[d] = true;
          dv[nd++] = s % 2 ? d - r : d;
          count *= (double)dims[d];
        }
      bool keep = s % 3 == 0;
      tt *x = rnd_t(dt, r, dims);
      tt *ref =
          ref_reduce(x, red, keep, kind == PLAN_OP_REDUCE_MEAN ? count : 0);
      plan_attr_val *a = attrs_new();
      set_ints(&a[0], dv, nd);
      a[1].b = keep;
      expect(kind, a, dt, &x, 1, &ref, 1,
             kind == PLAN_OP_REDUCE_MEAN ? 2 : 2 * count);
    }
}

static void test_reduce_sum(void **state) {
  (void)state;
  reduce_case(PLAN_OP_REDUCE_SUM);
}

static void test_reduce_mean(void **state) {
  (void)state;
  reduce_case(PLAN_OP_REDUCE_MEAN);
}

static void test_split(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 6; s++) {
      rstate = (uint64_t)(15000 + di * 100 + s);
      plan_dtype dt = di < 4 ? DTS[di] : PLAN_I64;
      int r = (int)rint_in(1, 4);
      int64_t dims[PLAN_MAX_RANK], sizes[4];
      rdims(dims, r, 1, 3);
      int dim = (int)rint_in(0, r - 1), np = (int)rint_in(1, 4);
      dims[dim] = 0;
      for (int p = 0; p < np; p++) /* uneven pieces */
        dims[dim] += sizes[p] = rint_in(1, 3);
      tt *x = di < 4 ? rnd_t(dt, r, dims) : int_t(r, dims, -9, 9);
      tt *refs[4];
      ref_split(x, dim, sizes, np, refs);
      plan_attr_val *a = attrs_new();
      a[0].i = s % 2 ? dim - r : dim;
      set_ints(&a[1], sizes, np);
      expect(PLAN_OP_SPLIT, a, dt, &x, 1, refs, np, 1);
    }
}

static void test_concat(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 6; s++) {
      rstate = (uint64_t)(16000 + di * 100 + s);
      plan_dtype dt = di < 4 ? DTS[di] : PLAN_I32;
      int r = (int)rint_in(1, 4);
      int64_t dims[PLAN_MAX_RANK], sizes[4];
      rdims(dims, r, 1, 3);
      int dim = (int)rint_in(0, r - 1), np = (int)rint_in(1, 4);
      dims[dim] = 0;
      for (int p = 0; p < np; p++)
        dims[dim] += sizes[p] = rint_in(1, 3);
      tt *whole = di < 4 ? rnd_t(dt, r, dims) : int_t(r, dims, -9, 9);
      if (di == 4)
        whole->int_dtype = PLAN_I32;
      tt *parts[4];
      ref_split(whole, dim, sizes, np, parts);
      plan_attr_val *a = NULL;
      if (s % 3) {
        a = attrs_new();
        a[0].i = s % 2 ? dim - r : dim;
      } else if (dim != r - 1) {
        continue; /* attrs NULL: the default dim -1 */
      }
      expect(PLAN_OP_CONCAT, a, dt, parts, np, &whole, 1, 1);
    }
}

static void test_cross_entropy(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++)
    for (int s = 0; s < 10; s++) {
      rstate = (uint64_t)(17000 + di * 100 + s);
      plan_dtype dt = DTS[di];
      int r = (int)rint_in(1, 3);
      int64_t dims[PLAN_MAX_RANK];
      rdims(dims, r, 1, 4);
      dims[r - 1] = rint_in(1, 9);
      tt *lg = rnd_t(dt, r, dims), *lb = int_t(r - 1, dims, 0, dims[r - 1]);
      if (s % 2)
        lb->int_dtype = PLAN_I32;
      tt *ref = mk(0, NULL);
      ref->v[0] = ref_ce(lg, lb, (double)lb->n);
      tt *in[2] = {lg, lb};
      expect(PLAN_OP_CROSS_ENTROPY, NULL, dt, in, 2, &ref, 1, 1);
    }
}

/* ---- bf16 / f16 rounding ------------------------------------------------- */

static void test_round_formats(void **state) {
  (void)state;
  /* bf16: 8 significant bits, ties to even */
  assert_true(plan_round_bf16(1.0f + 0x1p-8f) == 1.0f);
  assert_true(plan_round_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  assert_true(plan_round_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  assert_true(plan_round_bf16(-3.0f) == -3.0f);
  assert_true(isinf(plan_round_bf16(3.4028235e38f)));
  assert_true(isnan(plan_round_bf16(NAN)));
  /* f16: 11 significant bits, max 65504, subnormals down to 2^-24 */
  assert_true(plan_round_f16(1.0f + 0x1p-11f) == 1.0f);
  assert_true(plan_round_f16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
  assert_true(plan_round_f16(65504.0f) == 65504.0f);
  assert_true(plan_round_f16(65519.0f) == 65504.0f);
  assert_true(isinf(plan_round_f16(65520.0f)));
  assert_true(plan_round_f16(-65520.0f) == -INFINITY);
  assert_true(plan_round_f16(0x1p-24f) == 0x1p-24f);
  assert_true(plan_round_f16(0x1p-25f) == 0.0f);         /* tie to 0 */
  assert_true(plan_round_f16(3 * 0x1p-25f) == 0x1p-23f); /* tie to 2 */
  assert_true(plan_round_f16(0x1p-14f - 0x1p-30f) == 0x1p-14f);
  assert_true(plan_round_f16(-0x1p-20f - 0x1p-26f) == -0x1p-20f);
  assert_true(isnan(plan_round_f16(NAN)));
  /* idempotent and nearest: the neighbours are farther */
  rstate = 99;
  for (int i = 0; i < 20000; i++) {
    uint32_t u = (uint32_t)rnd();
    float x;
    memcpy(&x, &u, sizeof x);
    if (!isfinite(x) || fabsf(x) > 60000.0f || fabsf(x) < 0x1p-126f)
      continue;
    float b = plan_round_bf16(x), h = plan_round_f16(x);
    assert_true(plan_round_bf16(b) == b);
    assert_true(plan_round_f16(h) == h);
    assert_true(fabsf(b - x) <= fabsf(x) * 0x1p-8f);
    assert_true(fabsf(h - x) <= fabsf(x) * 0x1p-11f + 0x1p-25f);
  }
}

/* ---- local-block semantics ----------------------------------------------- */

/* A block of t along dim: [lo, lo + len), with global dims and offset. */
static tt *block_of(const tt *t, int dim, int64_t lo, int64_t len) {
  int64_t dims[PLAN_MAX_RANK], c[PLAN_MAX_RANK];
  memcpy(dims, t->dims, sizeof dims);
  dims[dim] = len;
  tt *b = mk(t->rank, dims);
  b->int_dtype = t->int_dtype;
  b->has_block = true;
  for (int d = 0; d < t->rank; d++) {
    b->gdims[d] = t->dims[d];
    b->off[d] = d == dim ? lo : 0;
  }
  for (int64_t i = 0; i < b->n; i++) {
    unravel(i, dims, t->rank, c);
    c[dim] += lo;
    b->v[i] = t->v[ravel(c, t->dims, t->rank)];
  }
  return b;
}

static void sum_into(tt *acc, const tt *x) {
  for (int64_t i = 0; i < acc->n; i++)
    acc->v[i] += x->v[i];
}

static void test_reduce_mean_sharded(void **state) {
  (void)state;
  for (int di = 0; di < 2; di++) {
    plan_dtype dt = DTS[di];
    rstate = (uint64_t)(20000 + di);
    const int64_t dims[3] = {3, 5, 2};
    tt *x = rnd_t(dt, 3, dims);
    bool red[3] = {false, true, false};
    tt *ref = ref_reduce(x, red, false, 5);
    plan_attr_val *a = attrs_new();
    const int64_t dv[1] = {1};
    set_ints(&a[0], dv, 1);
    /* two uneven halves of the reduced dim: 3 + 2 */
    tt *sum = mk_like(ref);
    for (int h = 0; h < 2; h++) {
      tt *blk = block_of(x, 1, h ? 3 : 0, h ? 2 : 3), *part = mk_like(ref);
      assert_int_equal(
          run_k(PLAN_OP_REDUCE_MEAN, a, dt, &blk, 1, &part, 1, NULL), PLAN_OK);
      sum_into(sum, part);
    }
    compare(sum, ref, dt, 2, "sharded reduce_mean");
  }
  /* exact mode over 8 = 4 + 4: the partials are exact quotients, so their
   * sum equals the global mean bit for bit */
  rstate = 20010;
  const int64_t dims[2] = {4, 8};
  tt *x = mk(2, dims);
  for (int64_t i = 0; i < x->n; i++)
    x->v[i] = (double)rint_in(-3, 3);
  bool red[2] = {false, true};
  tt *ref = ref_reduce(x, red, false, 8), *sum = mk_like(ref);
  plan_attr_val *a = attrs_new();
  const int64_t dv[1] = {-1};
  set_ints(&a[0], dv, 1);
  plan_kernel_ctx ctx = {true, 10};
  for (int h = 0; h < 2; h++) {
    tt *blk = block_of(x, 1, 4 * h, 4), *part = mk_like(ref);
    assert_int_equal(
        run_k(PLAN_OP_REDUCE_MEAN, a, PLAN_F64, &blk, 1, &part, 1, &ctx),
        PLAN_OK);
    sum_into(sum, part);
  }
  for (int64_t i = 0; i < ref->n; i++)
    assert_true(sum->v[i] == ref->v[i]);
}

static void test_embedding_sharded(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = DTS[di];
    rstate = (uint64_t)(21000 + di);
    const int64_t td[2] = {7, 3}, idd[2] = {2, 5};
    tt *tab = rnd_t(dt, 2, td), *ids = int_t(2, idd, 0, 7);
    tt *ref = ref_embedding(tab, ids), *sum = mk_like(ref);
    for (int h = 0; h < 2; h++) { /* rows [0, 4) and [4, 7) */
      tt *blk = block_of(tab, 0, h ? 4 : 0, h ? 3 : 4), *part = mk_like(ref);
      tt *in[2] = {blk, ids};
      assert_int_equal(
          run_k(PLAN_OP_EMBEDDING, NULL, dt, in, 2, &part, 1, NULL), PLAN_OK);
      /* rows of ids held elsewhere are zero */
      for (int64_t i = 0; i < ids->n; i++) {
        bool mine = h ? ids->v[i] >= 4 : ids->v[i] < 4;
        for (int64_t j = 0; j < 3; j++)
          if (!mine)
            assert_true(part->v[i * 3 + j] == 0.0);
      }
      sum_into(sum, part);
    }
    compare(sum, ref, dt, 1, "sharded embedding");
  }
  /* an id beyond the global vocabulary is an error on every rank */
  rstate = 21100;
  const int64_t td[2] = {7, 3}, idd[1] = {2};
  tt *tab = rnd_t(PLAN_F64, 2, td), *ids = int_t(1, idd, 0, 7);
  ids->v[1] = 7;
  tt *blk = block_of(tab, 0, 0, 4), *in[2] = {blk, ids};
  const int64_t od[2] = {2, 3};
  tt *out = mk(2, od);
  assert_int_equal(
      run_k(PLAN_OP_EMBEDDING, NULL, PLAN_F64, in, 2, &out, 1, NULL),
      PLAN_EINVALID);
  assert_non_null(strstr(last_err, "vocabulary"));
}

static void test_cross_entropy_sharded(void **state) {
  (void)state;
  for (int di = 0; di < 2; di++) {
    plan_dtype dt = DTS[di];
    rstate = (uint64_t)(22000 + di);
    const int64_t dims[3] = {5, 2, 6};
    tt *lg = rnd_t(dt, 3, dims), *lb = int_t(2, dims, 0, 6);
    tt *ref = mk(0, NULL), *sum = mk(0, NULL);
    ref->v[0] = ref_ce(lg, lb, 10);
    for (int h = 0; h < 2; h++) { /* batch rows [0, 3) and [3, 5) */
      tt *in[2] = {block_of(lg, 0, h ? 3 : 0, h ? 2 : 3),
                   block_of(lb, 0, h ? 3 : 0, h ? 2 : 3)};
      tt *part = mk(0, NULL);
      assert_int_equal(
          run_k(PLAN_OP_CROSS_ENTROPY, NULL, dt, in, 2, &part, 1, NULL),
          PLAN_OK);
      sum->v[0] += part->v[0];
    }
    compare(sum, ref, dt, 1, "sharded cross_entropy");
  }
}

/* ---- exact mode ---------------------------------------------------------- */

static bool on_grid(double x, int bits) {
  return ldexp(x, bits) == nearbyint(ldexp(x, bits));
}

static void test_exact_grid(void **state) {
  (void)state;
  plan_kernel_ctx ctx = {true, 0}; /* 0: the default, 10 bits */
  static const int kinds[] = {PLAN_OP_GELU, PLAN_OP_SILU, PLAN_OP_TANH,
                              PLAN_OP_EXP, PLAN_OP_SOFTMAX};
  const int64_t dims[2] = {3, 7};
  rstate = 23000;
  tt *x = mk(2, dims);
  for (int64_t i = 0; i < x->n; i++)
    x->v[i] = (double)rint_in(-3, 3);
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    tt *got = mk_like(x);
    assert_int_equal(run_k(kinds[k], NULL, PLAN_F64, &x, 1, &got, 1, &ctx),
                     PLAN_OK);
    tt *ref = kinds[k] == PLAN_OP_SOFTMAX ? ref_softmax(x, 1)
                                          : ref_unary(kinds[k], x, 0);
    for (int64_t i = 0; i < got->n; i++) {
      assert_true(on_grid(got->v[i], 10));
      assert_true(fabs(got->v[i] - ref->v[i]) <= 0x1p-11 * (1 + 1e-9));
    }
  }
  /* norms, with a custom grid */
  plan_kernel_ctx c6 = {true, 6};
  const int64_t wd[1] = {7};
  tt *w = mk(1, wd), *b = mk(1, wd);
  for (int i = 0; i < 7; i++) {
    w->v[i] = (double)rint_in(-3, 3);
    b->v[i] = (double)rint_in(-3, 3);
  }
  for (int k = 0; k < 2; k++) {
    int kind = k ? PLAN_OP_RMSNORM : PLAN_OP_LAYERNORM;
    tt *in[3] = {x, w, b}, *got = mk_like(x);
    assert_int_equal(run_k(kind, NULL, PLAN_F64, in, k ? 2 : 3, &got, 1, &c6),
                     PLAN_OK);
    tt *ref = ref_norm(kind, x, w, k ? NULL : b, k ? 1e-6 : 1e-5);
    for (int64_t i = 0; i < got->n; i++) {
      assert_true(on_grid(got->v[i], 6));
      assert_true(fabs(got->v[i] - ref->v[i]) <= 0x1p-7 * (1 + 1e-9));
    }
  }
  /* exact mode is an F64 mode: F32 results are not rounded */
  tt *xf = mk(2, dims), *g1 = mk_like(xf), *g2 = mk_like(xf);
  for (int64_t i = 0; i < xf->n; i++)
    xf->v[i] = x->v[i] / 3.0;
  assert_int_equal(run_k(PLAN_OP_EXP, NULL, PLAN_F32, &xf, 1, &g1, 1, &ctx),
                   PLAN_OK);
  assert_int_equal(run_k(PLAN_OP_EXP, NULL, PLAN_F32, &xf, 1, &g2, 1, NULL),
                   PLAN_OK);
  for (int64_t i = 0; i < xf->n; i++)
    assert_true(g1->v[i] == g2->v[i]);
}

static void test_exact_quotients(void **state) {
  (void)state;
  plan_kernel_ctx ctx = {true, 10};
  /* div: inexact quotients on the grid, exact ones kept (even off it) */
  const int64_t d4[1] = {4};
  tt *a = mk(1, d4), *b = mk(1, d4), *got = mk(1, d4);
  const double av[4] = {1, 3, 1, -2}, bv[4] = {3, 4, 4096, 7};
  memcpy(a->v, av, sizeof av);
  memcpy(b->v, bv, sizeof bv);
  tt *in[2] = {a, b};
  assert_int_equal(run_k(PLAN_OP_DIV, NULL, PLAN_F64, in, 2, &got, 1, &ctx),
                   PLAN_OK);
  assert_true(got->v[0] == plan_dyadic_round(1.0 / 3, 10));
  assert_true(got->v[1] == 0.75);
  assert_true(got->v[2] == 1.0 / 4096); /* exact: not rounded to 0 */
  assert_true(got->v[3] == plan_dyadic_round(-2.0 / 7, 10));
  /* scale: by 0.1, the factor rounded once to 11 significant bits
   * (0.1 = 1638.4 * 2^-14 -> 1638 * 2^-14), so the op stays linear; by
   * 2^-12 exact */
  plan_attr_val *at = attrs_new();
  at[0].f = 0.1;
  assert_int_equal(run_k(PLAN_OP_SCALE, at, PLAN_F64, &a, 1, &got, 1, &ctx),
                   PLAN_OK);
  for (int i = 0; i < 4; i++)
    assert_true(got->v[i] == av[i] * (1638 * 0x1p-14));
  /* linear: the scale of a sum is the sum of the scales */
  const double part[4] = {1.5, -2.25, 0.75, 3};
  memcpy(a->v, part, sizeof part);
  assert_int_equal(run_k(PLAN_OP_SCALE, at, PLAN_F64, &a, 1, &got, 1, &ctx),
                   PLAN_OK);
  assert_true(got->v[0] + got->v[1] == (part[0] + part[1]) * (1638 * 0x1p-14));
  memcpy(a->v, av, sizeof av);
  at[0].f = 0x1p-12;
  assert_int_equal(run_k(PLAN_OP_SCALE, at, PLAN_F64, &a, 1, &got, 1, &ctx),
                   PLAN_OK);
  for (int i = 0; i < 4; i++)
    assert_true(got->v[i] == av[i] * 0x1p-12);
  /* a short factor keeps exact products off the grid: 3 * 2^-20 */
  tt *tiny = mk(1, d4), *got3 = mk(1, d4);
  for (int i = 0; i < 4; i++)
    tiny->v[i] = av[i] * 0x1p-20;
  at[0].f = 3;
  assert_int_equal(run_k(PLAN_OP_SCALE, at, PLAN_F64, &tiny, 1, &got3, 1, &ctx),
                   PLAN_OK);
  for (int i = 0; i < 4; i++)
    assert_true(got3->v[i] == 3 * av[i] * 0x1p-20);
  /* reduce_mean over 3: on the grid */
  const int64_t d3[2] = {2, 3}, d1[1] = {2};
  tt *x = mk(2, d3), *m = mk(1, d1);
  const double xv[6] = {1, 1, 0, 2, -1, 1};
  memcpy(x->v, xv, sizeof xv);
  plan_attr_val *ar = attrs_new();
  const int64_t dv[1] = {1};
  set_ints(&ar[0], dv, 1);
  assert_int_equal(run_k(PLAN_OP_REDUCE_MEAN, ar, PLAN_F64, &x, 1, &m, 1, &ctx),
                   PLAN_OK);
  assert_true(m->v[0] == plan_dyadic_round(2.0 / 3, 10));
  assert_true(m->v[1] == plan_dyadic_round(2.0 / 3, 10));
  /* cross_entropy: per-sample losses on the grid, their sum over 4 exact */
  const int64_t dl[2] = {4, 3};
  tt *lg = mk(2, dl), *lb = int_t(1, dl, 0, 3), *ce = mk(0, NULL);
  for (int64_t i = 0; i < lg->n; i++)
    lg->v[i] = (double)rint_in(-3, 3);
  tt *cin[2] = {lg, lb};
  assert_int_equal(
      run_k(PLAN_OP_CROSS_ENTROPY, NULL, PLAN_F64, cin, 2, &ce, 1, &ctx),
      PLAN_OK);
  double want = 0;
  for (int r = 0; r < 4; r++) {
    tt *row = block_of(lg, 0, r, 1), *l1 = block_of(lb, 0, r, 1);
    want += plan_dyadic_round(ref_ce(row, l1, 1), 10);
  }
  assert_true(ce->v[0] == want / 4);
}

static void test_exact_matmul(void **state) {
  (void)state;
  plan_kernel_ctx ctx = {true, 10};
  rstate = 24000;
  const int64_t da[3] = {3, 17, 200}, db[2] = {200, 13};
  tt *a = mk(3, da), *b = mk(2, db);
  for (int64_t i = 0; i < a->n; i++)
    a->v[i] = (double)rint_in(-3, 3);
  for (int64_t i = 0; i < b->n; i++)
    b->v[i] = (double)rint_in(-3, 3);
  tt *ref = ref_matmul(a, b, false, false), *got = mk_like(ref);
  tt *in[2] = {a, b};
  assert_int_equal(run_k(PLAN_OP_MATMUL, NULL, PLAN_F64, in, 2, &got, 1, &ctx),
                   PLAN_OK);
  for (int64_t i = 0; i < ref->n; i++)
    assert_true(got->v[i] == ref->v[i]);
  /* k split in two: the partial products sum exactly */
  tt *sum = mk_like(ref);
  for (int h = 0; h < 2; h++) {
    tt *pa = block_of(a, 2, h * 100, 100), *pb = block_of(b, 0, h * 100, 100);
    tt *pin[2] = {pa, pb}, *part = mk_like(ref);
    assert_int_equal(
        run_k(PLAN_OP_MATMUL, NULL, PLAN_F64, pin, 2, &part, 1, &ctx), PLAN_OK);
    sum_into(sum, part);
  }
  for (int64_t i = 0; i < ref->n; i++)
    assert_true(sum->v[i] == ref->v[i]);
  /* linear with bias, exact */
  const int64_t dx[2] = {5, 40}, dw[2] = {6, 40}, dbias[1] = {6};
  tt *x = mk(2, dx), *w = mk(2, dw), *bias = mk(1, dbias);
  for (int64_t i = 0; i < x->n; i++)
    x->v[i] = (double)rint_in(-3, 3);
  for (int64_t i = 0; i < w->n; i++)
    w->v[i] = (double)rint_in(-3, 3);
  for (int64_t i = 0; i < 6; i++)
    bias->v[i] = (double)rint_in(-3, 3);
  tt *lin[3] = {x, w, bias}, *lref = ref_linear(x, w, bias);
  tt *lgot = mk_like(lref);
  assert_int_equal(
      run_k(PLAN_OP_LINEAR, NULL, PLAN_F64, lin, 3, &lgot, 1, &ctx), PLAN_OK);
  for (int64_t i = 0; i < lref->n; i++)
    assert_true(lgot->v[i] == lref->v[i]);
}

/* ---- edge cases and errors ----------------------------------------------- */

static void test_empty(void **state) {
  (void)state;
  /* k = 0: a matmul of empty sums is zeros */
  const int64_t da[2] = {3, 0}, db[2] = {0, 4}, dc[2] = {3, 4};
  tt *a = mk(2, da), *b = mk(2, db), *c = mk(2, dc);
  tt *in[2] = {a, b};
  for (int di = 0; di < 2; di++) {
    assert_int_equal(run_k(PLAN_OP_MATMUL, NULL, DTS[di], in, 2, &c, 1, NULL),
                     PLAN_OK);
    for (int i = 0; i < 12; i++)
      assert_true(c->v[i] == 0.0);
  }
  /* an empty batch, softmax and reduce over empty blocks */
  const int64_t de[3] = {0, 2, 3};
  tt *x = mk(3, de), *y = mk(3, de);
  assert_int_equal(run_k(PLAN_OP_SOFTMAX, NULL, PLAN_F64, &x, 1, &y, 1, NULL),
                   PLAN_OK);
  const int64_t d2[2] = {2, 3};
  tt *s = mk(2, d2);
  plan_attr_val *a0 = attrs_new();
  const int64_t dv[1] = {0};
  set_ints(&a0[0], dv, 1);
  assert_int_equal(run_k(PLAN_OP_REDUCE_SUM, a0, PLAN_F32, &x, 1, &s, 1, NULL),
                   PLAN_OK);
  for (int i = 0; i < 6; i++)
    assert_true(s->v[i] == 0.0);
}

/* ---- expand and the gradient ops --------------------------------------- */

static void test_expand(void **state) {
  (void)state;
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 6; s++) {
      rstate = (uint64_t)(24000 + di * 10 + s);
      int64_t od[PLAN_MAX_RANK], xd[PLAN_MAX_RANK];
      int ro = (int)rint_in(1, 4), rx = (int)rint_in(0, ro);
      rdims(od, ro, 1, 4);
      for (int d = 0; d < rx; d++)
        xd[d] = rint_in(0, 1) ? 1 : od[d + ro - rx];
      bool ints = di == 4;
      plan_dtype dt = ints ? PLAN_F64 : DTS[di];
      tt *x = ints ? int_t(rx, xd, -5, 5) : rnd_t(dt, rx, xd);
      tt *ref = mk(ro, od);
      ref->int_dtype = x->int_dtype;
      int64_t c[PLAN_MAX_RANK];
      for (int64_t i = 0; i < ref->n; i++) {
        unravel(i, od, ro, c);
        ref->v[i] = at_bcast(x, c, ro);
      }
      plan_attr_val *a = attrs_new();
      set_ints(&a[0], od, ro);
      if (!ints) {
        expect(PLAN_OP_EXPAND, a, dt, &x, 1, &ref, 1, 1);
        continue;
      }
      tt *got = mk_like(ref);
      got->int_dtype = PLAN_I64;
      assert_int_equal(run_k(PLAN_OP_EXPAND, a, dt, &x, 1, &got, 1, NULL),
                       PLAN_OK);
      for (int64_t i = 0; i < got->n; i++)
        assert_true(got->v[i] == ref->v[i]);
    }
  /* a local block: the broadcast dim sharded, the input whole */
  const int64_t xd[2] = {1, 3}, gd[2] = {5, 3}, bd[2] = {2, 3};
  rstate = 24100;
  tt *x = rnd_t(PLAN_F64, 2, xd), *out = mk(2, bd);
  out->has_block = true;
  memcpy(out->gdims, gd, sizeof gd);
  out->off[0] = 3;
  plan_attr_val *a = attrs_new();
  set_ints(&a[0], gd, 2);
  assert_int_equal(run_k(PLAN_OP_EXPAND, a, PLAN_F64, &x, 1, &out, 1, NULL),
                   PLAN_OK);
  for (int64_t i = 0; i < out->n; i++)
    assert_true(out->v[i] == x->v[i % 3]);
  tt *bad = mk(2, (const int64_t[]){2, 4});
  assert_int_equal(run_k(PLAN_OP_EXPAND, a, PLAN_F64, &x, 1, &bad, 1, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(last_err, "does not broadcast"));
}

/* ---- where and repeat_interleave ----------------------------------------- */

/* where(cond, a, b) against a reference over random shapes broadcast in
 * every order: an integer mask (I64, I32), a float one in the op's dtype
 * (zeros, -0, NaN: nonzero selects a, NaN included), integer a and b; exact
 * mode leaves every value as it is (a copy). */
static void test_where(void **state) {
  (void)state;
  plan_kernel_ctx exact = {true, 0};
  for (int di = 0; di < 6; di++)
    for (int s = 0; s < 10; s++) {
      rstate = (uint64_t)(31000 + di * 100 + s);
      bool ints = di == 4, fcond = di == 5 || s % 3 == 2;
      plan_dtype dt = di < 4 ? DTS[di] : di == 4 ? PLAN_F64 : PLAN_F32;
      int64_t od[PLAN_MAX_RANK], d[3][PLAN_MAX_RANK];
      int r = (int)rint_in(0, 4), rk[3];
      rdims(od, r, 1, 4);
      int full = (int)rint_in(0, 2); /* one operand has the output's shape */
      for (int i = 0; i < 3; i++) {
        if (i == full) {
          memcpy(d[i], od, sizeof od);
          rk[i] = r;
        } else {
          rk[i] = bcast_of(od, r, d[i]);
        }
      }
      tt *c = fcond ? rnd_t(dt, rk[0], d[0]) : int_t(rk[0], d[0], 0, 2);
      if (!fcond && s % 2)
        c->int_dtype = PLAN_I32;
      if (fcond)
        for (int64_t i = 0; i < c->n; i++) {
          int64_t u = rint_in(0, 3);
          c->v[i] = u == 0 ? 0.0 : u == 1 ? -0.0 : u == 2 ? NAN : c->v[i];
        }
      tt *a = ints ? int_t(rk[1], d[1], -9, 9) : rnd_t(dt, rk[1], d[1]);
      tt *b = ints ? int_t(rk[2], d[2], -9, 9) : rnd_t(dt, rk[2], d[2]);
      tt *ref = mk(r, od);
      int64_t co[PLAN_MAX_RANK];
      for (int64_t i = 0; i < ref->n; i++) {
        unravel(i, od, r, co);
        ref->v[i] =
            at_bcast(c, co, r) != 0 ? at_bcast(a, co, r) : at_bcast(b, co, r);
      }
      tt *in[3] = {c, a, b};
      tt *got = mk_like(ref);
      got->int_dtype = ints ? PLAN_I64 : PLAN_F64;
      if (ints) {
        assert_int_equal(run_k(PLAN_OP_WHERE, NULL, dt, in, 3, &got, 1, NULL),
                         PLAN_OK);
      } else {
        expect(PLAN_OP_WHERE, NULL, dt, in, 3, &ref, 1, 1);
        if (dt != PLAN_F64)
          continue;
        assert_int_equal(run_k(PLAN_OP_WHERE, NULL, dt, in, 3, &got, 1, &exact),
                         PLAN_OK);
      }
      for (int64_t i = 0; i < got->n; i++)
        assert_true(got->v[i] == ref->v[i] ||
                    (isnan(got->v[i]) && isnan(ref->v[i])));
    }
  /* a and b of two dtypes; shapes that do not broadcast */
  const int64_t d23[2] = {2, 3}, d4[1] = {4};
  tt *c = int_t(2, d23, 0, 2), *a = rnd_t(PLAN_F64, 2, d23),
     *b = int_t(2, d23, 0, 3), *out = mk(2, d23);
  tt *in[3] = {c, a, b};
  assert_int_equal(run_k(PLAN_OP_WHERE, NULL, PLAN_F64, in, 3, &out, 1, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(last_err, "differ in dtype"));
  in[2] = rnd_t(PLAN_F64, 1, d4);
  assert_int_equal(run_k(PLAN_OP_WHERE, NULL, PLAN_F64, in, 3, &out, 1, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(last_err, "do not broadcast"));
}

/* ---- routing and mixture of experts -------------------------------------- */

/* A tensor with the given values (integers when it is I64). */
static tt *vals_t(int rank, const int64_t *dims, const double *v, bool ints) {
  tt *t = mk(rank, dims);
  memcpy(t->v, v, sizeof(double) * (size_t)t->n);
  if (ints)
    t->int_dtype = PLAN_I64;
  return t;
}

static void block_at(tt *t, int dim, int64_t global, int64_t off) {
  t->has_block = true;
  for (int d = 0; d < t->rank; d++) {
    t->gdims[d] = t->dims[d];
    t->off[d] = 0;
  }
  t->gdims[dim] = global;
  t->off[dim] = off;
}

static void expect_vals(const tt *t, const double *want) {
  for (int64_t i = 0; i < t->n; i++)
    if (!(t->v[i] == want[i] || (isnan(t->v[i]) && isnan(want[i]))))
      fail_msg("element %lld: %g, want %g", (long long)i, t->v[i], want[i]);
}

static plan_attr_val *int_attrs(int kind, int64_t a0, int64_t a1) {
  static plan_attr_val a[PLAN_MAX_ATTRS];
  const plan_op_info *info = plan_op_info_get(kind);
  memset(a, 0, sizeof a);
  for (int i = 0; i < info->nattrs; i++)
    a[i].present = true;
  a[0].i = a0;
  a[1].i = a1;
  return a;
}

/* Worked examples, in every float dtype (the values are exact in each). */
static void test_topk_gather_scatter(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = DTS[di];
    /* topk: largest first, ties to the lower index, NaN above all */
    const int64_t d15[2] = {2, 5}, d13[2] = {2, 3};
    tt *x = vals_t(2, d15, (double[]){1, 3, 3, 0, 2, 1, NAN, 2, -1, 5}, false);
    tt *v = mk(2, d13), *i = mk(2, d13);
    i->int_dtype = PLAN_I64;
    tt *outs[2] = {v, i};
    assert_int_equal(run_k(PLAN_OP_TOPK, int_attrs(PLAN_OP_TOPK, 3, 0), dt, &x,
                           1, outs, 2, NULL),
                     PLAN_OK);
    expect_vals(v, (double[]){3, 3, 2, NAN, 5, 2});
    expect_vals(i, (double[]){1, 2, 4, 1, 4, 2});
    /* gather: rows by index; x holding columns [4, 8) of 8: the others 0 */
    const int64_t d24[2] = {2, 4}, d22[2] = {2, 2};
    tt *gx = vals_t(2, d24, (double[]){10, 11, 12, 13, 20, 21, 22, 23}, false);
    tt *gi = vals_t(2, d22, (double[]){3, 0, 1, 1}, true), *go = mk(2, d22);
    tt *gin[2] = {gx, gi};
    assert_int_equal(run_k(PLAN_OP_GATHER, NULL, dt, gin, 2, &go, 1, NULL),
                     PLAN_OK);
    expect_vals(go, (double[]){13, 10, 21, 21});
    block_at(gx, 1, 8, 4);
    gi->v[0] = 5;
    gi->v[3] = 7;
    assert_int_equal(run_k(PLAN_OP_GATHER, NULL, dt, gin, 2, &go, 1, NULL),
                     PLAN_OK);
    expect_vals(go, (double[]){11, 0, 0, 23});
    gi->v[1] = 8;
    assert_int_equal(run_k(PLAN_OP_GATHER, NULL, dt, gin, 2, &go, 1, NULL),
                     PLAN_EINVALID);
    assert_non_null(strstr(last_err, "index 8 (element 1) is outside"));
    /* scatter_add: repeated indices add; a block of the result */
    const int64_t d3[2] = {1, 3}, d4[2] = {1, 4}, d2[2] = {1, 2};
    tt *ss = vals_t(2, d3, (double[]){1, 2, 3}, false);
    tt *si = vals_t(2, d3, (double[]){2, 0, 2}, true), *so = mk(2, d4);
    tt *sin[2] = {ss, si};
    plan_attr_val *sa = int_attrs(PLAN_OP_SCATTER_ADD, 4, 0);
    assert_int_equal(run_k(PLAN_OP_SCATTER_ADD, sa, dt, sin, 2, &so, 1, NULL),
                     PLAN_OK);
    expect_vals(so, (double[]){2, 0, 4, 0});
    tt *sb = mk(2, d2);
    block_at(sb, 1, 4, 2);
    assert_int_equal(run_k(PLAN_OP_SCATTER_ADD, sa, dt, sin, 2, &sb, 1, NULL),
                     PLAN_OK);
    expect_vals(sb, (double[]){4, 0});
  }
}

/* One group of 3 tokens (hidden 2), 2 choices each, 2 experts of capacity
 * 2: the slots fill token-major, then by choice, so token 2's choices are
 * dropped. Worked by hand. */
static void test_moe(void **state) {
  (void)state;
  const int64_t dx[3] = {1, 3, 2}, dr[3] = {1, 3, 2}, ds[4] = {2, 1, 2, 2};
  const double slots[8] = {0.5, 1, 12, 16, 0.25, 0.5, 6, 8};
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = DTS[di];
    plan_kernel_ctx exact = {true, 0}, *ctx = dt == PLAN_F64 ? &exact : NULL;
    tt *x = vals_t(3, dx, (double[]){1, 2, 3, 4, 5, 6}, false);
    tt *idx = vals_t(3, dr, (double[]){0, 1, 1, 0, 1, 1}, true);
    tt *w = vals_t(3, dr, (double[]){0.5, 0.25, 2, 4, 1, 1}, false);
    tt *s = mk(4, ds);
    tt *din[3] = {x, idx, w};
    plan_attr_val *da = int_attrs(PLAN_OP_MOE_DISPATCH, 2, 2);
    assert_int_equal(run_k(PLAN_OP_MOE_DISPATCH, da, dt, din, 3, &s, 1, ctx),
                     PLAN_OK);
    expect_vals(s, slots);
    /* unweighted: the tokens themselves */
    assert_int_equal(run_k(PLAN_OP_MOE_DISPATCH, da, dt, din, 2, &s, 1, ctx),
                     PLAN_OK);
    expect_vals(s, (double[]){1, 2, 3, 4, 1, 2, 3, 4});
    /* the block of expert 1 alone */
    const int64_t ds1[4] = {1, 1, 2, 2};
    tt *s1 = mk(4, ds1);
    block_at(s1, 0, 2, 1);
    assert_int_equal(run_k(PLAN_OP_MOE_DISPATCH, da, dt, din, 3, &s1, 1, ctx),
                     PLAN_OK);
    expect_vals(s1, slots + 4);
    /* combine the weighted slots back: token 2's choices were dropped */
    tt *y = vals_t(4, ds, slots, false), *o = mk(3, dx);
    tt *cin[3] = {y, idx, w};
    assert_int_equal(run_k(PLAN_OP_MOE_COMBINE, NULL, dt, cin, 3, &o, 1, ctx),
                     PLAN_OK);
    expect_vals(o, (double[]){0.3125, 0.625, 60, 80, 0, 0});
    /* the weights' gradient: token . its slot */
    tt *g = mk(3, dr);
    tt *gin[3] = {x, y, idx};
    assert_int_equal(
        run_k(PLAN_OP_MOE_WEIGHTS_GRAD, NULL, dt, gin, 3, &g, 1, ctx), PLAN_OK);
    expect_vals(g, (double[]){2.5, 1.25, 50, 100, 0, 0});
    /* an expert id outside [0, experts) */
    idx->v[5] = 2;
    assert_int_equal(run_k(PLAN_OP_MOE_COMBINE, NULL, dt, cin, 3, &o, 1, ctx),
                     PLAN_EINVALID);
    assert_non_null(strstr(last_err, "index 2 (element 5) is outside the "
                                     "experts [0, 2)"));
  }
}

/* repeat_interleave(x, repeats, dim) against a reference (output slice j
 * is input slice j / repeats), every float dtype and integers, each dim of
 * random ranks; exact mode leaves values as they are. */
static void test_repeat_interleave(void **state) {
  (void)state;
  plan_kernel_ctx exact = {true, 0};
  for (int di = 0; di < 5; di++)
    for (int s = 0; s < 10; s++) {
      rstate = (uint64_t)(32000 + di * 100 + s);
      bool ints = di == 4;
      plan_dtype dt = ints ? PLAN_F64 : DTS[di];
      int64_t xd[PLAN_MAX_RANK], od[PLAN_MAX_RANK];
      int r = (int)rint_in(1, 4), dim = (int)rint_in(0, r - 1);
      int64_t rep = rint_in(1, 3);
      rdims(xd, r, s == 9 ? 0 : 1, 4);
      memcpy(od, xd, sizeof xd);
      od[dim] *= rep;
      tt *x = ints ? int_t(r, xd, -9, 9) : rnd_t(dt, r, xd), *ref = mk(r, od);
      int64_t c[PLAN_MAX_RANK];
      for (int64_t i = 0; i < ref->n; i++) {
        unravel(i, od, r, c);
        c[dim] /= rep;
        ref->v[i] = x->v[ravel(c, xd, r)];
      }
      plan_attr_val *a = attrs_new();
      a[0].i = rep;
      a[0].present = true;
      a[1].i = s % 2 ? dim - r : dim; /* negative dims count from the end */
      a[1].present = true;
      tt *got = mk_like(ref);
      got->int_dtype = ints ? PLAN_I64 : PLAN_F64;
      if (!ints) {
        expect(PLAN_OP_REPEAT_INTERLEAVE, a, dt, &x, 1, &ref, 1, 1);
        if (dt != PLAN_F64)
          continue;
      }
      assert_int_equal(run_k(PLAN_OP_REPEAT_INTERLEAVE, a, dt, &x, 1, &got, 1,
                             ints ? NULL : &exact),
                       PLAN_OK);
      for (int64_t i = 0; i < got->n; i++)
        assert_true(got->v[i] == ref->v[i]);
    }
  /* a local block whose output is not the input's repeat; no attributes */
  const int64_t xd[2] = {2, 3}, bd[2] = {2, 5};
  tt *x = rnd_t(PLAN_F64, 2, xd), *bad = mk(2, bd);
  plan_attr_val *a = attrs_new();
  a[0].i = 2;
  a[0].present = true;
  a[1].i = 1;
  a[1].present = true;
  assert_int_equal(
      run_k(PLAN_OP_REPEAT_INTERLEAVE, a, PLAN_F64, &x, 1, &bad, 1, NULL),
      PLAN_EINVALID);
  assert_non_null(strstr(last_err, "local op gives"));
  assert_int_equal(
      run_k(PLAN_OP_REPEAT_INTERLEAVE, NULL, PLAN_F64, &x, 1, &bad, 1, NULL),
      PLAN_EINVALID);
  assert_non_null(strstr(last_err, "repeats is required"));
}

/* d/dx of relu, gelu (both forms) and silu in long double. */
static double act_deriv(int kind, long double x, bool tanh_approx) {
  if (kind == PLAN_OP_RELU_GRAD)
    return x > 0 ? 1 : 0;
  if (kind == PLAN_OP_SILU_GRAD) {
    long double s = 1 / (1 + expl(-x));
    return (double)(s * (1 + x * (1 - s)));
  }
  if (tanh_approx) {
    long double c = sqrtl(2.0L / 3.14159265358979323846264L), c3 = 0.044715L;
    long double t = tanhl(c * (x + c3 * x * x * x));
    return (double)(0.5L * (1 + t) +
                    0.5L * x * (1 - t * t) * c * (1 + 3 * c3 * x * x));
  }
  return (double)(0.5L * (1 + erfl(x / sqrtl(2.0L))) +
                  x * expl(-x * x / 2) / sqrtl(2 * 3.14159265358979323846264L));
}

static void test_act_grads(void **state) {
  (void)state;
  static const int kinds[4] = {PLAN_OP_RELU_GRAD, PLAN_OP_GELU_GRAD,
                               PLAN_OP_GELU_GRAD, PLAN_OP_SILU_GRAD};
  for (int k = 0; k < 4; k++)
    for (int di = 0; di < 4; di++) {
      rstate = (uint64_t)(25000 + k * 10 + di);
      plan_dtype dt = DTS[di];
      int64_t dims[PLAN_MAX_RANK];
      int r = (int)rint_in(0, 3);
      rdims(dims, r, 1, 5);
      tt *dy = rnd_t(dt, r, dims), *x = rnd_t(dt, r, dims), *ref = mk(r, dims);
      for (int64_t i = 0; i < x->n; i++)
        ref->v[i] = (double)((long double)dy->v[i] *
                             act_deriv(kinds[k], x->v[i], k == 2));
      plan_attr_val *a = attrs_new();
      a[0].s = k == 2 ? "tanh" : "none";
      tt *in[2] = {dy, x};
      expect(kinds[k], kinds[k] == PLAN_OP_GELU_GRAD ? a : NULL, dt, in, 2,
             &ref, 1, 4);
    }
}

/* The norm gradients in every dtype agree with F64 (whose values the
 * finite-difference test of autodiff checks), and are exactly zero where dy
 * is. */
static void test_norm_grads(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    int kind = k ? PLAN_OP_RMSNORM_GRAD : PLAN_OP_LAYERNORM_GRAD;
    rstate = (uint64_t)(26000 + k);
    const int64_t dims[3] = {2, 3, 6}, wd[1] = {6};
    tt *dy = rnd_t(PLAN_BF16, 3, dims), *x = rnd_t(PLAN_BF16, 3, dims);
    tt *w = rnd_t(PLAN_BF16, 1, wd), *in[3] = {dy, x, w};
    tt *ref = mk(3, dims);
    assert_int_equal(run_k(kind, NULL, PLAN_F64, in, 3, &ref, 1, NULL),
                     PLAN_OK);
    for (int di = 1; di < 4; di++)
      expect(kind, NULL, DTS[di], in, 3, &ref, 1, 16);
    /* the sum of a layernorm gradient over a row is zero */
    if (kind == PLAN_OP_LAYERNORM_GRAD)
      for (int64_t r = 0; r < 6; r++) {
        double sum = 0;
        for (int64_t i = 0; i < 6; i++)
          sum += ref->v[r * 6 + i];
        assert_true(fabs(sum) < 1e-12);
      }
    memset(dy->v, 0, sizeof(double) * (size_t)dy->n);
    assert_int_equal(run_k(kind, NULL, PLAN_F64, in, 3, &ref, 1, NULL),
                     PLAN_OK);
    for (int64_t i = 0; i < ref->n; i++)
      assert_true(ref->v[i] == 0.0);
  }
}

/* embedding_grad sums dy rows by id; over a row-sharded output each block
 * holds its own rows. */
static void test_embedding_grad(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = DTS[di];
    rstate = (uint64_t)(27000 + di);
    const int64_t dd[3] = {2, 5, 3}, idd[2] = {2, 5}, od[2] = {7, 3};
    tt *dy = rnd_t(dt, 3, dd), *ids = int_t(2, idd, 0, 7), *ref = mk(2, od);
    for (int64_t i = 0; i < ids->n; i++)
      for (int j = 0; j < 3; j++)
        ref->v[(int64_t)ids->v[i] * 3 + j] += dy->v[i * 3 + j];
    plan_attr_val *a = attrs_new();
    a[0].i = 7;
    a[0].present = true;
    tt *in[2] = {dy, ids};
    expect(PLAN_OP_EMBEDDING_GRAD, a, dt, in, 2, &ref, 1, 10);
    for (int h = 0; h < 2; h++) { /* rows [0, 4) and [4, 7) */
      tt *blk = block_of(ref, 0, h ? 4 : 0, h ? 3 : 4), *got = mk_like(blk);
      got->has_block = true;
      memcpy(got->gdims, blk->gdims, sizeof got->gdims);
      memcpy(got->off, blk->off, sizeof got->off);
      assert_int_equal(
          run_k(PLAN_OP_EMBEDDING_GRAD, a, dt, in, 2, &got, 1, NULL), PLAN_OK);
      compare(got, blk, dt, 10, "embedding_grad block");
    }
  }
  const int64_t dd[2] = {2, 3}, idd[1] = {2}, od[2] = {4, 3};
  tt *dy = rnd_t(PLAN_F64, 2, dd), *ids = int_t(1, idd, 0, 4), *out = mk(2, od);
  ids->v[0] = 4;
  plan_attr_val *a = attrs_new();
  a[0].i = 4;
  tt *in[2] = {dy, ids};
  assert_int_equal(
      run_k(PLAN_OP_EMBEDDING_GRAD, a, PLAN_F64, in, 2, &out, 1, NULL),
      PLAN_EINVALID);
  assert_non_null(strstr(last_err, "outside the table's rows"));
}

/* cross_entropy_grad: dy (softmax - onehot) / count, the count global over
 * a split batch. */
static void test_cross_entropy_grad(void **state) {
  (void)state;
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = DTS[di];
    rstate = (uint64_t)(28000 + di);
    const int64_t ld[2] = {6, 5}, bd[1] = {6}, sd[1] = {1};
    tt *lg = rnd_t(dt, 2, ld), *lb = int_t(1, bd, 0, 5);
    tt *dy = mk(0, sd);
    dy->v[0] = quant(dt, 1.5);
    tt *ref = mk(2, ld);
    for (int r = 0; r < 6; r++) {
      long double m = lg->v[r * 5], z = 0;
      for (int i = 1; i < 5; i++)
        m = fmaxl(m, lg->v[r * 5 + i]);
      for (int i = 0; i < 5; i++)
        z += expl(lg->v[r * 5 + i] - m);
      for (int i = 0; i < 5; i++)
        ref->v[r * 5 + i] =
            (double)((expl(lg->v[r * 5 + i] - m) / z - (i == lb->v[r])) *
                     (long double)dy->v[0] / 6);
    }
    tt *in[3] = {dy, lg, lb};
    expect(PLAN_OP_CROSS_ENTROPY_GRAD, NULL, dt, in, 3, &ref, 1, 1);
    for (int h = 0; h < 2; h++) { /* samples [0, 2) and [2, 6) */
      tt *lgb = block_of(lg, 0, h ? 2 : 0, h ? 4 : 2);
      tt *lbb = block_of(lb, 0, h ? 2 : 0, h ? 4 : 2);
      tt *want = block_of(ref, 0, h ? 2 : 0, h ? 4 : 2), *got = mk_like(want);
      tt *bin[3] = {dy, lgb, lbb};
      assert_int_equal(
          run_k(PLAN_OP_CROSS_ENTROPY_GRAD, NULL, dt, bin, 3, &got, 1, NULL),
          PLAN_OK);
      compare(got, want, dt, 1, "cross_entropy_grad block");
    }
  }
}

/* Exact mode rounds the inexact gradient ops to the grid; relu_grad,
 * embedding_grad and expand stay exact. */
static void test_exact_grads(void **state) {
  (void)state;
  plan_kernel_ctx ctx = {true, 0};
  const int64_t dims[2] = {3, 7}, wd[1] = {7}, ld[1] = {3}, sd[1] = {1};
  rstate = 29000;
  tt *x = mk(2, dims), *dy = mk(2, dims), *w = mk(1, wd);
  for (int64_t i = 0; i < x->n; i++) {
    x->v[i] = (double)rint_in(-3, 3);
    dy->v[i] = (double)rint_in(-3, 3);
  }
  for (int i = 0; i < 7; i++)
    w->v[i] = (double)rint_in(-3, 3);
  static const int kinds[5] = {PLAN_OP_GELU_GRAD, PLAN_OP_SILU_GRAD,
                               PLAN_OP_LAYERNORM_GRAD, PLAN_OP_RMSNORM_GRAD,
                               PLAN_OP_RELU_GRAD};
  for (int k = 0; k < 5; k++) {
    tt *in[3] = {dy, x, w}, *got = mk_like(x);
    int nin =
        kinds[k] == PLAN_OP_LAYERNORM_GRAD || kinds[k] == PLAN_OP_RMSNORM_GRAD
            ? 3
            : 2;
    assert_int_equal(run_k(kinds[k], NULL, PLAN_F64, in, nin, &got, 1, &ctx),
                     PLAN_OK);
    for (int64_t i = 0; i < got->n; i++)
      assert_true(on_grid(got->v[i], 10));
  }
  tt *lb = int_t(1, ld, 0, 7), *s = mk(0, sd), *got = mk_like(x);
  s->v[0] = 1;
  tt *in[3] = {s, x, lb};
  assert_int_equal(
      run_k(PLAN_OP_CROSS_ENTROPY_GRAD, NULL, PLAN_F64, in, 3, &got, 1, &ctx),
      PLAN_OK);
  for (int64_t i = 0; i < got->n; i++)
    assert_true(on_grid(got->v[i], 10));
}

static void test_errors(void **state) {
  (void)state;
  const int64_t d23[2] = {2, 3}, d34[2] = {3, 4}, d25[2] = {2, 5};
  tt *a = mk(2, d23), *b = mk(2, d34), *bad = mk(2, d25);
  tt *in[2] = {a, b};
  /* wrong output dims */
  assert_int_equal(run_k(PLAN_OP_MATMUL, NULL, PLAN_F64, in, 2, &bad, 1, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(last_err, "local op gives"));
  /* contracting dims differ */
  tt *in2[2] = {a, a};
  assert_int_equal(run_k(PLAN_OP_MATMUL, NULL, PLAN_F64, in2, 2, &bad, 1, NULL),
                   PLAN_EINVALID);
  /* a label out of range */
  tt *lb = int_t(1, d23, 0, 3), *ce = mk(0, NULL);
  lb->v[1] = 3;
  tt *cin[2] = {a, lb};
  assert_int_equal(
      run_k(PLAN_OP_CROSS_ENTROPY, NULL, PLAN_F32, cin, 2, &ce, 1, NULL),
      PLAN_EINVALID);
  assert_non_null(strstr(last_err, "label"));
  /* integer relu: rejected by the registry; no kernel either */
  tt *ia = int_t(2, d23, 0, 3), *ib = int_t(2, d23, 0, 3);
  assert_int_equal(run_k(PLAN_OP_RELU, NULL, PLAN_I64, &ia, 1, &ib, 1, NULL),
                   PLAN_EINVALID);
  assert_false(plan_cpu_supports(PLAN_OP_RELU, PLAN_I64));
  assert_true(plan_cpu_supports(PLAN_OP_TRANSPOSE, PLAN_I32));
  assert_true(plan_cpu_supports(PLAN_OP_MATMUL, PLAN_BF16));
  assert_false(plan_cpu_supports(PLAN_OP_COUNT, PLAN_F64));
  assert_false(plan_cpu_supports(PLAN_OP_ADD, PLAN_DTYPE_COUNT));
  /* a bad split of the local block */
  tt *parts[2] = {mk(2, d23), mk(2, d23)};
  plan_attr_val *sa = attrs_new();
  sa[0].i = 1;
  assert_int_equal(run_k(PLAN_OP_SPLIT, sa, PLAN_F64, &a, 1, parts, 2, NULL),
                   PLAN_EINVALID);
  /* reshape to a different element count */
  assert_int_equal(run_k(PLAN_OP_RESHAPE, NULL, PLAN_F64, &a, 1, &b, 1, NULL),
                   PLAN_EINVALID);
  /* usage: no data, unknown kind, bad grid */
  plan_view v, o;
  memset(&v, 0, sizeof v);
  v.dtype = PLAN_F64;
  v.rank = 1;
  v.dims[0] = 3;
  o = v;
  char err[128];
  assert_int_equal(
      plan_cpu_kernel(PLAN_OP_RELU, NULL, &v, 1, &o, 1, NULL, err, sizeof err),
      PLAN_EUSAGE);
  assert_int_equal(plan_cpu_kernel(-1, NULL, &v, 1, &o, 1, NULL, NULL, 0),
                   PLAN_EUSAGE);
  double buf[6] = {0};
  v.data = buf;
  o.data = buf + 3;
  plan_kernel_ctx ctx = {true, 99};
  assert_int_equal(
      plan_cpu_kernel(PLAN_OP_RELU, NULL, &v, 1, &o, 1, &ctx, err, sizeof err),
      PLAN_EUSAGE);
  ctx.dyadic_bits = 10;
  assert_int_equal(
      plan_cpu_kernel(PLAN_OP_RELU, NULL, &v, 1, &o, 1, &ctx, err, sizeof err),
      PLAN_OK);
}

/* Every op of the registry has a kernel in every float dtype (an op added
 * to the enum without one fails kernels.c's switch at compile time). */
static void test_every_op_supported(void **state) {
  (void)state;
  for (int k = 0; k < PLAN_OP_COUNT; k++)
    for (int di = 0; di < 4; di++)
      assert_true(plan_cpu_supports(k, DTS[di]));
}

#define T(f) cmocka_unit_test_teardown(f, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_binary),
      T(test_scale),
      T(test_relu),
      T(test_gelu),
      T(test_silu),
      T(test_tanh),
      T(test_exp),
      T(test_sigmoid),
      T(test_rsqrt),
      T(test_add_scalar),
      T(test_matmul),
      T(test_linear),
      T(test_softmax),
      T(test_layernorm),
      T(test_rmsnorm),
      T(test_embedding),
      T(test_transpose),
      T(test_permute),
      T(test_reshape),
      T(test_reduce_sum),
      T(test_reduce_mean),
      T(test_split),
      T(test_concat),
      T(test_cross_entropy),
      T(test_round_formats),
      T(test_reduce_mean_sharded),
      T(test_embedding_sharded),
      T(test_cross_entropy_sharded),
      T(test_exact_grid),
      T(test_exact_quotients),
      T(test_exact_matmul),
      T(test_empty),
      T(test_errors),
      T(test_expand),
      T(test_act_grads),
      T(test_norm_grads),
      T(test_embedding_grad),
      T(test_cross_entropy_grad),
      T(test_exact_grads),
      T(test_where),
      T(test_repeat_interleave),
      T(test_topk_gather_scatter),
      T(test_moe),
      T(test_every_op_supported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
