/* Template of the typed kernels: not a header of its own. kernels_typed.c
 * includes it once per compute type with
 *   R       the compute and storage type (double, float)
 *   F(n)    the instance's name for n (n_f64, n_f32)
 *   MF(fn)  the math function for R (exp, expf)
 *   GEMM    the BLAS gemm for R (cblas_dgemm, cblas_sgemm)
 *   TABLE   the name of the plan_typed_kernels table to define
 * Arithmetic is in R throughout (an F32 sum accumulates in float), in fixed
 * loop orders, so results are deterministic. bits >= 0 (exact mode) is only
 * ever passed to the double instance. */

/* Exact mode: rounds an inexact result to the grid. */
static inline R F(grid)(R x, int bits) {
  return bits >= 0 ? (R)plan_dyadic_round((double)x, bits) : x;
}

/* Exact mode: x on the grid of a mean over count (plan_grid_div). */
static inline R F(grid_div)(R x, int bits, int64_t count) {
  return (R)plan_grid_div((double)x, bits, count);
}

/* a / b; in exact mode rounded to the grid only when the quotient is inexact
 * (the residual a - q*b, exact through fma, is not zero). */
static inline R F(quot)(R a, R b, int bits) {
  R q = a / b;
  if (bits >= 0 && MF(fma)(q, b, -a) != 0)
    q = F(grid)(q, bits);
  return q;
}

/* x * f; in exact mode rounded only when the product is inexact. */
static inline R F(prod)(R x, R f, int bits) {
  R p = x * f;
  if (bits >= 0 && MF(fma)(x, f, -p) != 0)
    p = F(grid)(p, bits);
  return p;
}

/* ---- elementwise --------------------------------------------------------- */

static void F(binary)(int kind, const void *va, const void *vb, void *vo,
                      const plan_kbcast *bc, int bits) {
  const R *a = va, *b = vb;
  R *o = vo;
  if (bc->count == 0)
    return;
  int r = bc->rank;
  int64_t inner = r ? bc->dims[r - 1] : 1;
  int64_t ia = r ? bc->sa[r - 1] : 0, ib = r ? bc->sb[r - 1] : 0;
  int64_t outer = bc->count / inner;
  int64_t idx[PLAN_MAX_RANK] = {0}, pa = 0, pb = 0;
  for (int64_t q = 0; q < outer; q++) {
    const R *x = a + pa, *y = b + pb;
    R *z = o + q * inner;
    switch (kind) {
    case PLAN_OP_ADD:
      for (int64_t i = 0; i < inner; i++)
        z[i] = x[i * ia] + y[i * ib];
      break;
    case PLAN_OP_SUB:
      for (int64_t i = 0; i < inner; i++)
        z[i] = x[i * ia] - y[i * ib];
      break;
    case PLAN_OP_MUL:
      for (int64_t i = 0; i < inner; i++)
        z[i] = x[i * ia] * y[i * ib];
      break;
    default: /* PLAN_OP_DIV */
      for (int64_t i = 0; i < inner; i++)
        z[i] = F(quot)(x[i * ia], y[i * ib], bits);
      break;
    }
    /* next outer index, row-major */
    for (int d = r - 2; d >= 0; d--) {
      pa += bc->sa[d];
      pb += bc->sb[d];
      if (++idx[d] < bc->dims[d])
        break;
      pa -= bc->sa[d] * bc->dims[d];
      pb -= bc->sb[d] * bc->dims[d];
      idx[d] = 0;
    }
  }
}

static void F(unary)(int kind, const void *vx, void *vo, int64_t n,
                     double param, int bits) {
  const R *x = vx;
  R *o = vo;
  const R half = (R)0.5, one = (R)1;
  switch (kind) {
  case PLAN_OP_SCALE: {
    /* exact mode rounds a long factor (0.1) once to 11 significant bits,
     * not each product: the scale stays linear, so a rank's partial sum
     * scales to its share of the scaled sum, and small factors keep their
     * size */
    R f = (R)param;
    if (bits >= 0 && !plan_short_dyadic(param)) {
      int e;
      double m = frexp(param, &e);
      f = (R)ldexp(nearbyint(ldexp(m, 11)), e - 11);
    }
    for (int64_t i = 0; i < n; i++)
      o[i] = F(prod)(x[i], f, bits);
    break;
  }
  case PLAN_OP_RELU:
    for (int64_t i = 0; i < n; i++)
      o[i] = x[i] < 0 ? (R)0 : x[i]; /* NaN passes */
    break;
  case PLAN_OP_GELU:
    if (param != 0) { /* tanh approximation */
      const R c = (R)0.79788456080286535588, c3 = (R)0.044715;
      for (int64_t i = 0; i < n; i++) {
        R v = x[i];
        o[i] = F(grid)(half * v * (one + MF(tanh)(c * (v + c3 * v * v * v))),
                       bits);
      }
    } else {
      const R s = (R)0.70710678118654752440;
      for (int64_t i = 0; i < n; i++)
        o[i] = F(grid)(half * x[i] * (one + MF(erf)(x[i] * s)), bits);
    }
    break;
  case PLAN_OP_SILU:
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(x[i] / (one + MF(exp)(-x[i])), bits);
    break;
  case PLAN_OP_TANH:
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(MF(tanh)(x[i]), bits);
    break;
  case PLAN_OP_SIGMOID:
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(one / (one + MF(exp)(-x[i])), bits);
    break;
  case PLAN_OP_RSQRT:
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(one / MF(sqrt)(x[i]), bits);
    break;
  case PLAN_OP_ADD_SCALAR: {
    const R c = (R)param;
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(x[i] + c, bits);
    break;
  }
  default: /* PLAN_OP_EXP */
    for (int64_t i = 0; i < n; i++)
      o[i] = F(grid)(MF(exp)(x[i]), bits);
    break;
  }
}

/* ---- softmax, norms ------------------------------------------------------ */

static void F(softmax)(const void *vx, void *vo, int64_t outer, int64_t n,
                       int64_t inner, int bits) {
  const R *x = vx;
  R *o = vo;
  if (n == 0)
    return;
  for (int64_t p = 0; p < outer; p++)
    for (int64_t j = 0; j < inner; j++) {
      const R *xx = x + p * n * inner + j;
      R *oo = o + p * n * inner + j;
      R m = xx[0];
      for (int64_t i = 1; i < n; i++)
        if (xx[i * inner] > m)
          m = xx[i * inner];
      R s = 0;
      for (int64_t i = 0; i < n; i++) {
        R e = MF(exp)(xx[i * inner] - m);
        oo[i * inner] = e;
        s += e;
      }
      for (int64_t i = 0; i < n; i++)
        oo[i * inner] = F(grid)(oo[i * inner] / s, bits);
    }
}

static void F(norm)(int kind, const void *vx, const void *vw, const void *vb,
                    void *vo, int64_t rows, int64_t d, double eps, int bits) {
  const R *x = vx, *w = vw, *b = vb;
  R *o = vo;
  if (d == 0)
    return;
  const R dd = (R)d, e = (R)eps, one = (R)1;
  for (int64_t r = 0; r < rows; r++) {
    const R *xx = x + r * d;
    R *oo = o + r * d;
    if (kind == PLAN_OP_LAYERNORM) {
      R s = 0;
      for (int64_t i = 0; i < d; i++)
        s += xx[i];
      R mean = s / dd, v = 0;
      for (int64_t i = 0; i < d; i++)
        v += (xx[i] - mean) * (xx[i] - mean);
      R rstd = one / MF(sqrt)(v / dd + e);
      for (int64_t i = 0; i < d; i++) {
        R y = (xx[i] - mean) * rstd * w[i];
        oo[i] = F(grid)(b ? y + b[i] : y, bits);
      }
    } else { /* PLAN_OP_RMSNORM */
      R s = 0;
      for (int64_t i = 0; i < d; i++)
        s += xx[i] * xx[i];
      R rstd = one / MF(sqrt)(s / dd + e);
      for (int64_t i = 0; i < d; i++)
        oo[i] = F(grid)(xx[i] * rstd * w[i], bits);
    }
  }
}

/* ---- reductions, loss ---------------------------------------------------- */

static void F(reduce)(const void *vx, void *vo, const plan_kreduce *rd,
                      int bits) {
  const R *x = vx;
  R *o = vo;
  for (int64_t i = 0; i < rd->out_count; i++)
    o[i] = 0;
  if (rd->count > 0) {
    /* the input in row-major order: each output element sums its inputs in
     * increasing order of the reduced indices */
    int r = rd->rank;
    int64_t inner = rd->dims[r - 1], is = rd->ostride[r - 1];
    int64_t outer = rd->count / inner;
    int64_t idx[PLAN_MAX_RANK] = {0}, po = 0;
    for (int64_t q = 0; q < outer; q++) {
      const R *xx = x + q * inner;
      R *oo = o + po;
      if (is == 0) {
        R s = oo[0];
        for (int64_t i = 0; i < inner; i++)
          s += xx[i];
        oo[0] = s;
      } else {
        for (int64_t i = 0; i < inner; i++)
          oo[i * is] += xx[i];
      }
      for (int d = r - 2; d >= 0; d--) {
        po += rd->ostride[d];
        if (++idx[d] < rd->dims[d])
          break;
        po -= rd->ostride[d] * rd->dims[d];
        idx[d] = 0;
      }
    }
  }
  if (rd->divisor >= 0) {
    R dv = (R)rd->divisor;
    for (int64_t i = 0; i < rd->out_count; i++)
      o[i] = F(quot)(o[i], dv, bits);
  }
}

static void F(cross_entropy)(const void *vl, const int64_t *labels,
                             int64_t rows, int64_t c, double count, void *vo,
                             int bits) {
  const R *lg = vl;
  R *o = vo;
  R total = 0;
  for (int64_t r = 0; r < rows; r++) {
    const R *row = lg + r * c;
    R m = row[0];
    for (int64_t i = 1; i < c; i++)
      if (row[i] > m)
        m = row[i];
    /* the maximum contributes exp(0) = 1, so s >= 1 and its log is finite */
    R s = 0;
    for (int64_t i = 0; i < c; i++)
      s += MF(exp)(row[i] - m);
    s = s < 1 ? 1 : s;
    /* per-sample loss on the grid first, a multiple of count's odd part:
     * the sum over samples (and over ranks) is then exact in any order,
     * and so is its quotient by count, a rank's share included */
    total += F(grid_div)(m + MF(log)(s) - row[labels[r]], bits, (int64_t)count);
  }
  o[0] = F(quot)(total, (R)count, bits);
}

/* ---- matmul, linear (BLAS) ----------------------------------------------- */

static void F(matmul)(const plan_kmm *mm, const void *va, const void *vb,
                      void *vc) {
  const R *a = va, *b = vb;
  R *c = vc;
  int64_t m = mm->m, n = mm->n, k = mm->k;
  if (mm->bcount == 0 || m == 0 || n == 0)
    return;
  if (k == 0) { /* an empty sum; BLAS wants leading dims >= 1 */
    for (int64_t i = 0; i < mm->bcount * m * n; i++)
      c[i] = 0;
    return;
  }
  enum CBLAS_TRANSPOSE ta = mm->ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = mm->tb ? CblasTrans : CblasNoTrans;
  int lda = (int)(mm->ta ? m : k), ldb = (int)(mm->tb ? k : n);
  if (mm->fold) {
    GEMM(CblasRowMajor, ta, tb, (int)(mm->bcount * m), (int)n, (int)k, 1, a,
         lda, b, ldb, 0, c, (int)n);
    return;
  }
  int r = mm->brank;
  int64_t idx[PLAN_MAX_RANK] = {0}, pa = 0, pb = 0;
  for (int64_t q = 0; q < mm->bcount; q++) {
    GEMM(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1, a + pa, lda, b + pb,
         ldb, 0, c + q * m * n, (int)n);
    for (int d = r - 1; d >= 0; d--) {
      pa += mm->sa[d];
      pb += mm->sb[d];
      if (++idx[d] < mm->bdims[d])
        break;
      pa -= mm->sa[d] * mm->bdims[d];
      pb -= mm->sb[d] * mm->bdims[d];
      idx[d] = 0;
    }
  }
}

static void F(linear)(const void *vx, const void *vw, const void *vbias,
                      void *vo, int64_t rows, int64_t n, int64_t k) {
  const R *x = vx, *w = vw, *bias = vbias;
  R *o = vo;
  if (rows == 0 || n == 0)
    return;
  /* the bias first, then C = x w^T + 1 * C (addmm) */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++)
      o[r * n + j] = bias ? bias[j] : (R)0;
  if (k == 0)
    return;
  GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k, 1, x,
       (int)k, w, (int)k, bias ? 1 : 0, o, (int)n);
}

/* ---- gradient ops -------------------------------------------------------- */

static void F(act_grad)(int kind, const void *vdy, const void *vx, void *vo,
                        int64_t n, double param, int bits) {
  const R *dy = vdy, *x = vx;
  R *o = vo;
  const R half = (R)0.5, one = (R)1;
  switch (kind) {
  case PLAN_OP_RELU_GRAD:
    /* 0 at x = 0, as torch's threshold_backward */
    for (int64_t i = 0; i < n; i++)
      o[i] = x[i] > 0 ? dy[i] : (R)0;
    break;
  case PLAN_OP_GELU_GRAD:
    if (param != 0) {
      /* d/dx [x/2 (1 + tanh u)], u = c (x + c3 x^3):
       * (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 c3 x^2) */
      const R c = (R)0.79788456080286535588, c3 = (R)0.044715;
      for (int64_t i = 0; i < n; i++) {
        R v = x[i], t = MF(tanh)(c * (v + c3 * v * v * v));
        R d = half * (one + t) +
              half * v * (one - t * t) * c * (one + (R)3 * c3 * v * v);
        o[i] = F(grid)(dy[i] * d, bits);
      }
    } else {
      /* d/dx [x Phi(x)] = Phi(x) + x phi(x) */
      const R s = (R)0.70710678118654752440, p = (R)0.39894228040143267794;
      for (int64_t i = 0; i < n; i++) {
        R v = x[i];
        R d = half * (one + MF(erf)(v * s)) + v * p * MF(exp)(-half * v * v);
        o[i] = F(grid)(dy[i] * d, bits);
      }
    }
    break;
  default: /* PLAN_OP_SILU_GRAD: s (1 + x (1 - s)), s = sigmoid(x) */
    for (int64_t i = 0; i < n; i++) {
      R s = one / (one + MF(exp)(-x[i]));
      o[i] = F(grid)(dy[i] * (s * (one + x[i] * (one - s))), bits);
    }
    break;
  }
}

/* With xh = (x - mean) rstd (layernorm) or x rstd (rmsnorm) and g = dy w:
 * layernorm: dx = rstd (g - mean(g) - xh mean(g xh));
 * rmsnorm:   dx = rstd (g - xh mean(g xh)). */
static void F(norm_grad)(int kind, const void *vdy, const void *vx,
                         const void *vw, void *vo, int64_t rows, int64_t d,
                         double eps, int bits) {
  const R *dy = vdy, *x = vx, *w = vw;
  R *o = vo;
  if (d == 0)
    return;
  const R dd = (R)d, e = (R)eps, one = (R)1;
  bool ln = kind == PLAN_OP_LAYERNORM_GRAD;
  for (int64_t r = 0; r < rows; r++) {
    const R *xx = x + r * d, *gy = dy + r * d;
    R *oo = o + r * d;
    /* the statistics as the forward kernel computes them */
    R mean = 0, v = 0;
    if (ln) {
      R s = 0;
      for (int64_t i = 0; i < d; i++)
        s += xx[i];
      mean = s / dd;
      for (int64_t i = 0; i < d; i++)
        v += (xx[i] - mean) * (xx[i] - mean);
    } else {
      for (int64_t i = 0; i < d; i++)
        v += xx[i] * xx[i];
    }
    R rstd = one / MF(sqrt)(v / dd + e);
    R sg = 0, sgx = 0;
    for (int64_t i = 0; i < d; i++) {
      R g = gy[i] * w[i];
      sg += g;
      sgx += g * (xx[i] - mean) * rstd;
    }
    R mg = ln ? sg / dd : (R)0, mgx = sgx / dd;
    for (int64_t i = 0; i < d; i++) {
      R xh = (xx[i] - mean) * rstd;
      oo[i] = F(grid)(rstd * (gy[i] * w[i] - mg - xh * mgx), bits);
    }
  }
}

static void F(embedding_grad)(const void *vdy, const int64_t *ids, int64_t n,
                              int64_t lo, int64_t rows, int64_t d, void *vo) {
  const R *dy = vdy;
  R *o = vo;
  for (int64_t i = 0; i < rows * d; i++)
    o[i] = 0;
  /* in sample order: a row's sum is deterministic */
  for (int64_t i = 0; i < n; i++) {
    int64_t r = ids[i] - lo;
    if (r < 0 || r >= rows)
      continue;
    R *oo = o + r * d;
    const R *g = dy + i * d;
    for (int64_t j = 0; j < d; j++)
      oo[j] += g[j];
  }
}

static void F(cross_entropy_grad)(const void *vdy, const void *vl,
                                  const int64_t *labels, int64_t rows,
                                  int64_t c, double count, void *vo, int bits) {
  const R *lg = vl;
  R *o = vo;
  /* dy / count once, as the forward divides its sum once */
  R g = F(quot)(((const R *)vdy)[0], (R)count, bits);
  for (int64_t r = 0; r < rows; r++) {
    const R *row = lg + r * c;
    R *oo = o + r * c;
    R m = row[0];
    for (int64_t i = 1; i < c; i++)
      if (row[i] > m)
        m = row[i];
    R s = 0;
    for (int64_t i = 0; i < c; i++) {
      oo[i] = MF(exp)(row[i] - m);
      s += oo[i];
    }
    s = s < 1 ? 1 : s;
    for (int64_t i = 0; i < c; i++)
      oo[i] = F(grid)((oo[i] / s - (i == labels[r] ? (R)1 : (R)0)) * g, bits);
  }
}

const plan_typed_kernels TABLE = {
    F(binary),   F(unary),         F(softmax),        F(norm),
    F(reduce),   F(cross_entropy), F(matmul),         F(linear),
    F(act_grad), F(norm_grad),     F(embedding_grad), F(cross_entropy_grad),
};
