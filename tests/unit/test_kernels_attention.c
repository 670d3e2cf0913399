/* The CPU kernel of fused attention against a naive reference (long
 * double loops: scores, mask, causal cut, softmax, weighted sum) in F64,
 * F32, BF16 and F16, with grouped-query heads, an integer and a float
 * mask, a causal mask with more keys than queries, a query that sees no
 * key (all keys alike: hidden ones score -1e9), and blocks: the rows of a block
 * sharded along the queries, the heads or the batch (its offsets set, keys
 * whole) equal those rows of the whole result, causal mask and mask included.
 */
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
#include "base/numeric.h"
#include "ir/ops.h"

enum { Q, K, V, M, NT };

/* One case: dims of q, k, v and the mask (rank 0: none); integer mask or
 * float; causal; scale (0: 1 / sqrt(d)). */
typedef struct acase {
  int64_t q[4], k[4], v[4];
  int mrank;
  int64_t m[4];
  bool int_mask, causal;
  double scale;
} acase;

static uint64_t rstate = 1;
static double rnd(void) {
  rstate = rstate * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)((int64_t)(rstate >> 33) % 4096) / 2048.0;
}

static double quant(plan_dtype dt, double x) {
  return dt == PLAN_F64    ? x
         : dt == PLAN_F32  ? (double)(float)x
         : dt == PLAN_BF16 ? (double)plan_round_bf16((float)x)
                           : (double)plan_round_f16((float)x);
}

static int64_t count(const int64_t *d, int r) {
  int64_t n = 1;
  for (int i = 0; i < r; i++)
    n *= d[i];
  return n;
}

/* The mask element for (b, h, s, j), broadcast right-aligned. */
static double mask_at(const acase *c, const double *m, const int64_t *g) {
  int64_t i = 0;
  for (int d = 0; d < c->mrank; d++) {
    int fd = 4 - c->mrank + d;
    i = i * c->m[d] + (c->m[d] == 1 ? 0 : g[fd]);
  }
  return m[i];
}

/* out [b, h, s, dv] in long double. */
static void reference(const acase *c, double *const *t, double *out) {
  int64_t g = c->q[1] / c->k[1], d = c->q[3], sk = c->k[2], dv = c->v[3];
  long double scale = c->scale != 0 ? c->scale : 1 / sqrtl((long double)d);
  for (int64_t b = 0; b < c->q[0]; b++)
    for (int64_t h = 0; h < c->q[1]; h++)
      for (int64_t s = 0; s < c->q[2]; s++) {
        long double sc[64], mx = -INFINITY;
        for (int64_t j = 0; j < sk; j++) {
          int64_t gi[4] = {b, h, s, j};
          long double add = 0;
          bool hidden = false;
          if (c->mrank) {
            double mv = mask_at(c, t[M], gi);
            if (c->int_mask)
              hidden = mv == 0;
            else
              add = mv;
          }
          long double dot = 0;
          for (int64_t e = 0; e < d; e++)
            dot +=
                (long double)t[Q][((b * c->q[1] + h) * c->q[2] + s) * d + e] *
                t[K][((b * c->k[1] + h / g) * sk + j) * d + e];
          sc[j] = hidden ? -1e9L : scale * dot + add;
          if (c->causal && j > s)
            sc[j] += -1e9L;
          if (sc[j] > mx)
            mx = sc[j];
        }
        long double sum = 0;
        for (int64_t j = 0; j < sk; j++) {
          sc[j] = expl(sc[j] - mx);
          sum += sc[j];
        }
        for (int64_t e = 0; e < dv; e++) {
          long double y = 0;
          for (int64_t j = 0; j < sk; j++)
            y += sc[j] * t[V][((b * c->v[1] + h / g) * sk + j) * dv + e];
          out[((b * c->q[1] + h) * c->q[2] + s) * dv + e] =
              sum > 0 ? (double)(y / sum) : 0;
        }
      }
}

static void *view_data(plan_dtype dt, const double *v, int64_t n) {
  bool isint = dt == PLAN_I64;
  void *p = malloc((size_t)(n ? n : 1) *
                   (dt == PLAN_F64 || isint ? 8 : sizeof(float)));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++)
    if (dt == PLAN_F64)
      ((double *)p)[i] = v[i];
    else if (isint)
      ((int64_t *)p)[i] = (int64_t)v[i];
    else
      ((float *)p)[i] = (float)v[i];
  return p;
}

/* The view of the block [lo, lo + n) of every dim of a tensor of dims
 * `gd` (rank r) holding values `all`. */
static void block_view(plan_view *v, plan_dtype dt, const double *all,
                       const int64_t *gd, int r, const int64_t *lo,
                       const int64_t *n) {
  memset(v, 0, sizeof *v);
  v->dtype = dt;
  v->rank = r;
  int64_t total = count(n, r);
  double *vals = malloc(sizeof(double) * (size_t)(total ? total : 1));
  assert_non_null(vals);
  for (int64_t i = 0; i < total; i++) {
    int64_t rem = i, gi = 0, idx[4];
    for (int d = r - 1; d >= 0; d--) {
      idx[d] = rem % n[d] + lo[d];
      rem /= n[d];
    }
    for (int d = 0; d < r; d++)
      gi = gi * gd[d] + idx[d];
    vals[i] = all[gi];
  }
  for (int d = 0; d < r; d++) {
    v->dims[d] = n[d];
    v->global_dims[d] = gd[d];
    v->offset[d] = lo[d];
  }
  v->data = view_data(dt, vals, total);
  free(vals);
}

static double ld(const plan_view *v, int64_t i) {
  return v->dtype == PLAN_F64 ? ((double *)v->data)[i] : ((float *)v->data)[i];
}

static double rtol(plan_dtype dt) {
  return dt == PLAN_F64    ? 1e-12
         : dt == PLAN_F32  ? 1e-5
         : dt == PLAN_BF16 ? 1.0 / 128
                           : 1.0 / 512;
}

/* Runs the kernel on the block of q rows [lo, lo + n) (k and v: the same
 * batch rows and their kv heads; keys whole; the mask's block follows)
 * and compares it with the reference's rows. */
static void run_block(const acase *c, plan_dtype dt, double *const *t,
                      const double *ref, const int64_t *lo, const int64_t *n) {
  int64_t g = c->q[1] / c->k[1];
  plan_view in[NT], out;
  block_view(&in[Q], dt, t[Q], c->q, 4, lo, n);
  int64_t klo[4] = {lo[0], lo[1] / g, 0, 0};
  int64_t kn[4] = {n[0], (n[1] + g - 1) / g, c->k[2], c->k[3]};
  if (n[1] < g) /* a part of one group's heads: its kv head */
    kn[1] = 1;
  block_view(&in[K], dt, t[K], c->k, 4, klo, kn);
  kn[3] = c->v[3];
  block_view(&in[V], dt, t[V], c->v, 4, klo, kn);
  int nin = 3;
  if (c->mrank) {
    int64_t mlo[4], mn[4];
    for (int d = 0; d < c->mrank; d++) {
      int fd = 4 - c->mrank + d;
      bool whole = c->m[d] == 1 || fd == 3;
      mlo[d] = whole ? 0 : lo[fd];
      mn[d] = whole ? c->m[d] : n[fd];
    }
    block_view(&in[M], c->int_mask ? PLAN_I64 : dt, t[M], c->m, c->mrank, mlo,
               mn);
    nin = 4;
  }
  int64_t od[4] = {c->q[0], c->q[1], c->q[2], c->v[3]};
  int64_t on[4] = {n[0], n[1], n[2], c->v[3]},
          olo[4] = {lo[0], lo[1], lo[2], 0};
  double *zeros = calloc((size_t)count(od, 4), sizeof(double));
  assert_non_null(zeros);
  block_view(&out, dt, zeros, od, 4, olo, on);
  free(zeros);
  plan_attr_val a[PLAN_MAX_ATTRS];
  memset(a, 0, sizeof a);
  a[0].b = c->causal;
  a[1].f = c->scale;
  char err[256];
  int rc = plan_cpu_kernel(PLAN_OP_ATTENTION, a, in, nin, &out, 1, NULL, err,
                           sizeof err);
  if (rc)
    fail_msg("attention (%s): %s", plan_dtype_name(dt), err);
  for (int64_t i = 0; i < count(on, 4); i++) {
    int64_t rem = i, gi = 0, idx[4];
    for (int d = 3; d >= 0; d--) {
      idx[d] = rem % on[d] + olo[d];
      rem /= on[d];
    }
    for (int d = 0; d < 4; d++)
      gi = gi * od[d] + idx[d];
    double got = ld(&out, i), want = ref[gi];
    if (!(fabs(got - want) <=
          rtol(dt) * fabs(want) + 1e-5 * (dt != PLAN_F64) + 1e-12))
      fail_msg("attention (%s): element %lld is %.17g, reference %.17g",
               plan_dtype_name(dt), (long long)gi, got, want);
  }
  for (int i = 0; i < nin; i++)
    free(in[i].data);
  free(out.data);
}

static void run_case(const acase *c, unsigned seed) {
  static const plan_dtype dts[4] = {PLAN_F64, PLAN_F32, PLAN_BF16, PLAN_F16};
  for (int di = 0; di < 4; di++) {
    plan_dtype dt = dts[di];
    rstate = seed * 31 + (unsigned)di;
    const int64_t *dims[NT] = {c->q, c->k, c->v, c->m};
    int ranks[NT] = {4, 4, 4, c->mrank};
    double *t[NT] = {NULL};
    for (int i = 0; i < NT; i++) {
      int64_t n = i == M && !c->mrank ? 1 : count(dims[i], ranks[i]);
      t[i] = malloc(sizeof(double) * (size_t)n);
      assert_non_null(t[i]);
      for (int64_t e = 0; e < n; e++)
        t[i][e] = i == M && c->int_mask ? (double)(rnd() > 0.6)
                                        : quant(dt, rnd() - 1);
    }
    int64_t od[4] = {c->q[0], c->q[1], c->q[2], c->v[3]};
    double *ref = malloc(sizeof(double) * (size_t)count(od, 4));
    assert_non_null(ref);
    reference(c, t, ref);
    int64_t zero[4] = {0, 0, 0, 0};
    run_block(c, dt, t, ref, zero, c->q);
    /* the second half of the queries, of the heads, of the batch */
    for (int d = 0; d < 3; d++) {
      if (c->q[d] < 2)
        continue;
      int64_t lo[4] = {0, 0, 0, 0}, n[4] = {c->q[0], c->q[1], c->q[2], c->q[3]};
      lo[d] = c->q[d] / 2;
      n[d] = c->q[d] - lo[d];
      if (d == 1 && (lo[1] % (c->q[1] / c->k[1]) != 0 &&
                     c->q[1] / c->k[1] > 1 && c->k[1] > 1))
        continue; /* a block splitting a group across kv heads */
      run_block(c, dt, t, ref, lo, n);
    }
    for (int i = 0; i < NT; i++)
      free(t[i]);
    free(ref);
  }
}

static void test_attention_plain(void **state) {
  (void)state;
  acase c = {{2, 2, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 4}, 0, {0}, false, false, 0};
  run_case(&c, 1);
  c.scale = 0.75;
  run_case(&c, 2);
}

static void test_attention_gqa_causal(void **state) {
  (void)state;
  /* 4 query heads over 2 kv heads; more keys than queries */
  acase c = {{2, 4, 4, 2}, {2, 2, 6, 2}, {2, 2, 6, 3}, 0, {0}, false, true, 0};
  run_case(&c, 3);
  /* one kv head for all */
  acase m = {{1, 4, 4, 2}, {1, 1, 4, 2}, {1, 1, 4, 2}, 0, {0}, false, true, 0};
  run_case(&m, 4);
}

static void test_attention_masks(void **state) {
  (void)state;
  /* an integer mask over [s, sk]: some queries see no key */
  acase c = {{2, 2, 4, 2}, {2, 2, 3, 2}, {2, 2, 3, 2}, 2,
             {4, 3},       true,         false,        0};
  run_case(&c, 5);
  /* a float mask per batch row, broadcast over heads, with causal */
  acase f = {{2, 2, 4, 2}, {2, 2, 4, 2}, {2, 2, 4, 3}, 4,
             {2, 1, 4, 4}, false,        true,         0.5};
  run_case(&f, 6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_plain),
      cmocka_unit_test(test_attention_gqa_causal),
      cmocka_unit_test(test_attention_masks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
