/* The CUDA runner's op dispatcher (ops_cuda.h): checks the host views as
 * the CPU runner does, uploads the inputs in the device storage types,
 * runs the op's kernels (kernels.cuh; the data movement in
 * kernels_move.cu, the routing ops in kernels_route.cu) or gemms
 * (gemm.cuh) on the current device and stream, and downloads the
 * outputs. Ids, labels and routing indices are checked
 * on the host before anything runs; where's condition travels as a byte
 * mask; embedding_grad's samples are grouped by row on the host, so the
 * device sums each row in sample order without atomics. */
#include "ops_cuda.h"

#include <limits.h>

#include "gemm.cuh"
#include "kernels.cuh"

/* ---- sizes and transfers ------------------------------------------------- */

template <class S> static void to_dev(const float *h, void *d, int64_t n) {
  S *s = (S *)d;
  for (int64_t i = 0; i < n; i++)
    s[i] = plan_st<S>::store(h[i]);
}

template <class S> static void to_host(const void *d, float *h, int64_t n) {
  const S *s = (const S *)d;
  for (int64_t i = 0; i < n; i++)
    h[i] = plan_st<S>::load(s[i]);
}

/* A host buffer for staging, freed by the caller. */
static int host_alloc(plan_cu *cu, size_t n, void **out) {
  *out = malloc(n ? n : 1);
  char size[32];
  if (!*out)
    return plan_cu_fail(cu, PLAN_ENOMEM, "malloc: out of memory (%s asked)",
                        plan_cu_size(n, size));
  return PLAN_OK;
}

/* View v into a new device buffer *dev in the device storage type: BF16
 * and F16 are converted (their host floats are representable, so the
 * conversion is exact); the others are copied. */
static int upload_view(plan_cu *cu, const plan_view *v, void **dev) {
  int64_t n = plan_cu_count(v);
  size_t bytes = (size_t)n * plan_cu_dev_esz(v->dtype);
  int rc = plan_cu_alloc(cu, bytes, dev);
  if (rc || bytes == 0)
    return rc;
  if (v->dtype != PLAN_BF16 && v->dtype != PLAN_F16)
    return plan_cu_upload(cu, *dev, v->data, bytes);
  void *stage;
  if ((rc = host_alloc(cu, bytes, &stage)))
    return rc;
  if (v->dtype == PLAN_BF16)
    to_dev<plan_bf16_t>((const float *)v->data, stage, n);
  else
    to_dev<plan_f16_t>((const float *)v->data, stage, n);
  rc = plan_cu_upload(cu, *dev, stage, bytes);
  free(stage);
  return rc;
}

static int download_view(plan_cu *cu, const void *dev, plan_view *v) {
  int64_t n = plan_cu_count(v);
  size_t bytes = (size_t)n * plan_cu_dev_esz(v->dtype);
  if (bytes == 0)
    return PLAN_OK;
  if (v->dtype != PLAN_BF16 && v->dtype != PLAN_F16)
    return plan_cu_download(cu, v->data, dev, bytes);
  void *stage;
  int rc = host_alloc(cu, bytes, &stage);
  if (rc)
    return rc;
  if (!(rc = plan_cu_download(cu, stage, dev, bytes))) {
    if (v->dtype == PLAN_BF16)
      to_host<plan_bf16_t>(stage, (float *)v->data, n);
    else
      to_host<plan_f16_t>(stage, (float *)v->data, n);
  }
  free(stage);
  return rc;
}

/* Any host buffer (ids, masks, row lists) to the device. */
static int upload_bytes(plan_cu *cu, const void *host, size_t n, void **dev) {
  int rc = plan_cu_alloc(cu, n, dev);
  return rc ? rc : plan_cu_upload(cu, *dev, host, n);
}

/* ---- one op call --------------------------------------------------------- */

/* Cross-entropy's labels, each in [0, c); the global batch into *g. */
static int check_labels(plan_cu *cu, const char *name, const plan_view *lb,
                        int64_t c, int64_t *g) {
  const int64_t *label = (const int64_t *)lb->data;
  int64_t rows = plan_cu_count(lb);
  for (int64_t i = 0; i < rows; i++)
    if (label[i] < 0 || label[i] >= c)
      return plan_cu_fail(cu, PLAN_EINVALID,
                          "%s: label %lld (element %lld) is outside the "
                          "classes [0, %lld)",
                          name, (long long)label[i], (long long)i,
                          (long long)c);
  *g = 1;
  for (int d = 0; d < lb->rank; d++) {
    int64_t gd = plan_cu_global_dim(lb, d);
    if (gd < lb->dims[d])
      return plan_cu_fail(cu, PLAN_EINVALID,
                          "%s: labels dim %d is %lld locally but %lld "
                          "globally",
                          name, d, (long long)lb->dims[d], (long long)gd);
    if (!plan_mul_i64(*g, gd, g))
      return plan_cu_fail(cu, PLAN_EINVALID, "%s: global batch overflows",
                          name);
  }
  return PLAN_OK;
}

/* ---- matmul and linear: row-major onto column-major gemms ---------------- */

/* A row-major C[m, n] = op(A) op(B) is the column-major C^T[n, m] =
 * op(B)^T op(A)^T: the gemm takes B first with B's transpose flag, then A;
 * a row-major matrix's leading dimension is its row length. */
static int gemm_rm(plan_cu *cu, plan_dtype dt, bool ta, bool tb, int m, int n,
                   int k, const void *a, int64_t sa, const void *b, int64_t sb,
                   bool beta_one, void *c, int64_t sc, int batch) {
  int lda = ta ? m : k, ldb = tb ? k : n;
  return plan_cu_gemm(cu, dt, tb, ta, n, m, k, b, ldb, sb, a, lda, sa, beta_one,
                      c, n, sc, batch);
}

/* Batched matmul with broadcasting: the batch dims (size-1 dims dropped,
 * neighbours merged where every operand's strides allow) become one
 * strided-batched gemm over the last merged dim, once per index of the
 * others. */
static int run_matmul(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *a = &c->in[0], *b = &c->in[1];
  plan_view *out = c->out;
  plan_dtype dt = out->dtype;
  bool ta = plan_cu_attr_bool(c->attrs, PLAN_OP_MATMUL, 0);
  bool tb = plan_cu_attr_bool(c->attrs, PLAN_OP_MATMUL, 1);
  int ra = a->rank, rb = b->rank, nb = out->rank - 2;
  int64_t m = a->dims[ta ? ra - 1 : ra - 2], k = a->dims[ta ? ra - 2 : ra - 1];
  int64_t n = b->dims[tb ? rb - 2 : rb - 1];
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return plan_cu_fail(cu, PLAN_ELIMIT,
                        "matmul: m, n, k = %lld, %lld, %lld exceed cuBLAS's "
                        "int",
                        (long long)m, (long long)n, (long long)k);
  int64_t total = plan_cu_count(out);
  if (total == 0)
    return PLAN_OK;
  size_t esz = plan_cu_dev_esz(dt);
  if (k == 0) /* an empty sum; cuBLAS wants leading dims >= 1 */
    return plan_cu_zero(cu, c->dout[0], (size_t)total * esz);
  /* per batch dim of the output: its size and each operand's stride */
  int64_t dims[PLAN_MAX_RANK] = {0}, st[3][PLAN_MAX_RANK] = {{0}};
  int r = 0;
  const plan_view *op[2] = {a, b};
  int64_t full[3][PLAN_MAX_RANK] = {{0}};
  for (int i = 0; i < 2; i++) {
    const plan_view *v = op[i];
    int64_t s = v->dims[v->rank - 1] * v->dims[v->rank - 2];
    for (int d = v->rank - 3; d >= 0; d--) {
      full[i][d + nb - (v->rank - 2)] = v->dims[d] == 1 ? 0 : s;
      s *= v->dims[d];
    }
  }
  int64_t s = m * n;
  for (int j = nb - 1; j >= 0; j--) {
    full[2][j] = s;
    s *= out->dims[j];
  }
  for (int j = 0; j < nb; j++) {
    if (out->dims[j] == 1)
      continue;
    bool merge = r > 0;
    for (int i = 0; merge && i < 3; i++)
      merge = st[i][r - 1] == full[i][j] * out->dims[j];
    if (merge) {
      dims[r - 1] *= out->dims[j];
      for (int i = 0; i < 3; i++)
        st[i][r - 1] = full[i][j];
    } else {
      dims[r] = out->dims[j];
      for (int i = 0; i < 3; i++)
        st[i][r] = full[i][j];
      r++;
    }
  }
  int64_t batch = r ? dims[r - 1] : 1;
  if (batch > INT_MAX)
    return plan_cu_fail(cu, PLAN_ELIMIT,
                        "matmul: a batch of %lld exceeds cuBLAS's int",
                        (long long)batch);
  int64_t sa = r ? st[0][r - 1] : 0, sb = r ? st[1][r - 1] : 0;
  int64_t sc = r ? st[2][r - 1] : 0;
  int64_t outer = total / (batch * m * n);
  int64_t idx[PLAN_MAX_RANK] = {0}, pa = 0, pb = 0, pc = 0;
  const char *da = (const char *)c->din[0], *db = (const char *)c->din[1];
  char *dc = (char *)c->dout[0];
  for (int64_t q = 0; q < outer; q++) {
    int rc = gemm_rm(cu, dt, ta, tb, (int)m, (int)n, (int)k,
                     da + (size_t)pa * esz, sa, db + (size_t)pb * esz, sb,
                     false, dc + (size_t)pc * esz, sc, (int)batch);
    if (rc)
      return rc;
    for (int d = r - 2; d >= 0; d--) { /* next outer index, row-major */
      pa += st[0][d];
      pb += st[1][d];
      pc += st[2][d];
      if (++idx[d] < dims[d])
        break;
      pa -= st[0][d] * dims[d];
      pb -= st[1][d] * dims[d];
      pc -= st[2][d] * dims[d];
      idx[d] = 0;
    }
  }
  return PLAN_OK;
}

/* linear: out[rows, n] = x[rows, k] w[n, k]^T (+ bias), the bias written
 * first and the product added to it (beta 1), as addmm. */
template <class S> static int run_linear(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *x = &c->in[0], *w = &c->in[1];
  int64_t k = x->dims[x->rank - 1], n = w->dims[0];
  int64_t rows = plan_cu_prod(x->dims, 0, x->rank - 1);
  if (rows > INT_MAX || n > INT_MAX || k > INT_MAX)
    return plan_cu_fail(cu, PLAN_ELIMIT,
                        "linear: rows, n, k = %lld, %lld, %lld exceed "
                        "cuBLAS's int",
                        (long long)rows, (long long)n, (long long)k);
  if (rows == 0 || n == 0)
    return PLAN_OK;
  S *o = (S *)c->dout[0];
  bool bias = c->nin > 2;
  int rc;
  if (bias) {
    plan_k_bias<S> kb;
    kb.bias = (const S *)c->din[2];
    kb.o = o;
    kb.n = n;
    rc = plan_cu_launch(cu, rows * n, kb);
  } else {
    rc = plan_cu_zero(cu, o, (size_t)(rows * n) * sizeof(S));
  }
  if (rc || k == 0)
    return rc;
  return gemm_rm(cu, c->out->dtype, false, true, (int)rows, (int)n, (int)k,
                 c->din[0], 0, c->din[1], 0, bias, o, 0, 1);
}

/* ---- numeric ops --------------------------------------------------------- */

template <class S> static int run_reduce(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *in = c->in;
  bool red[PLAN_MAX_RANK] = {false};
  const int64_t *v;
  int nv;
  plan_cu_attr_ints(c->attrs, 0, &v, &nv);
  for (int j = 0; j < nv; j++)
    red[plan_cu_norm_dim(v[j], in->rank)] = true;
  plan_k_reduce<S> k;
  memset(&k.rd, 0, sizeof k.rd);
  k.rd.rcount = 1;
  int64_t s = 1, istr[PLAN_MAX_RANK] = {0};
  for (int d = in->rank - 1; d >= 0; d--) {
    istr[d] = s;
    s *= in->dims[d];
  }
  for (int d = 0; d < in->rank; d++)
    if (red[d]) {
      k.rd.rdims[k.rd.nred] = in->dims[d];
      k.rd.rst[k.rd.nred++] = istr[d];
      k.rd.rcount *= in->dims[d];
    } else {
      k.rd.kdims[k.rd.nkeep] = in->dims[d];
      k.rd.kst[k.rd.nkeep++] = istr[d];
    }
  k.divisor = -1;
  if (c->kind == PLAN_OP_REDUCE_MEAN) {
    int64_t g = 1;
    for (int d = 0; d < in->rank; d++)
      if (red[d]) {
        int64_t gd = plan_cu_global_dim(in, d);
        if (gd < in->dims[d])
          return plan_cu_fail(cu, PLAN_EINVALID,
                              "reduce_mean: dim %d is %lld locally but %lld "
                              "globally",
                              d, (long long)in->dims[d], (long long)gd);
        if (!plan_mul_i64(g, gd, &g))
          return plan_cu_fail(cu, PLAN_EINVALID,
                              "reduce_mean: global size overflows");
      }
    k.divisor = (double)g;
  }
  k.x = (const S *)c->din[0];
  k.o = (S *)c->dout[0];
  k.bits = c->bits;
  return plan_cu_launch(cu, plan_cu_count(c->out), k);
}

template <class S>
static int run_cross_entropy(plan_cu *cu, const plan_cu_call *c) {
  typedef typename plan_st<S>::C C;
  const plan_view *lg = &c->in[0], *lb = &c->in[1];
  int64_t cl = lg->dims[lg->rank - 1], rows = plan_cu_count(lb), g;
  int rc = check_labels(cu, "cross_entropy", lb, cl, &g);
  if (rc)
    return rc;
  void *loss, *labels;
  if ((rc = plan_cu_alloc(cu, (size_t)rows * sizeof(C), &loss)) ||
      (rc =
           upload_bytes(cu, lb->data, (size_t)rows * sizeof(int64_t), &labels)))
    return rc;
  plan_k_ce_rows<S> kr;
  kr.lg = (const S *)c->din[0];
  kr.labels = (const int64_t *)labels;
  kr.loss = (C *)loss;
  kr.c = cl;
  kr.count = g;
  kr.bits = c->bits;
  if ((rc = plan_cu_launch(cu, rows, kr)))
    return rc;
  plan_k_ce_total<S> kt;
  kt.loss = (const C *)loss;
  kt.o = (S *)c->dout[0];
  kt.rows = rows;
  kt.count = (double)g;
  kt.bits = c->bits;
  return plan_cu_launch(cu, 1, kt);
}

template <class S>
static int run_cross_entropy_grad(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *lg = &c->in[1], *lb = &c->in[2];
  int64_t cl = lg->dims[lg->rank - 1], rows = plan_cu_count(lb), g;
  int rc = check_labels(cu, "cross_entropy_grad", lb, cl, &g);
  if (rc)
    return rc;
  void *labels;
  if ((rc =
           upload_bytes(cu, lb->data, (size_t)rows * sizeof(int64_t), &labels)))
    return rc;
  plan_k_ce_grad<S> k;
  k.dy = (const S *)c->din[0];
  k.lg = (const S *)c->din[1];
  k.labels = (const int64_t *)labels;
  k.o = (S *)c->dout[0];
  k.c = cl;
  k.count = (double)g;
  k.bits = c->bits;
  return plan_cu_launch(cu, rows, k);
}

/* The samples of each row of the output block, in sample order: start
 * (rows + 1 entries) and sample (n), built on the host by counting. */
template <class S>
static int run_embedding_grad(plan_cu *cu, const plan_cu_call *c) {
  const plan_view *ids = &c->in[1];
  plan_view *out = c->out;
  int64_t lo = out->offset[0], rows = out->dims[0], d = out->dims[1];
  int64_t vocab = plan_cu_global_dim(out, 0);
  if (lo < 0 || lo + rows > vocab)
    return plan_cu_fail(cu, PLAN_EINVALID,
                        "embedding_grad: output block rows [%lld, %lld) "
                        "outside the table's %lld rows",
                        (long long)lo, (long long)(lo + rows),
                        (long long)vocab);
  const int64_t *id = (const int64_t *)ids->data;
  int64_t n = plan_cu_count(ids);
  int rc =
      plan_cu_check_ids(cu, id, n, vocab, "embedding_grad", "the table's rows");
  if (rc || rows * d == 0)
    return rc;
  size_t words = (size_t)(2 * rows + 1 + n);
  void *hs;
  if ((rc = host_alloc(cu, words * sizeof(int64_t), &hs)))
    return rc;
  int64_t *start = (int64_t *)hs, *next = start + rows + 1;
  int64_t *sample = next + rows;
  memset(start, 0, (size_t)(rows + 1) * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++)
    if (id[i] - lo >= 0 && id[i] - lo < rows)
      start[id[i] - lo + 1]++;
  for (int64_t r = 0; r < rows; r++) {
    start[r + 1] += start[r];
    next[r] = start[r];
  }
  for (int64_t i = 0; i < n; i++) /* stable: sample order within a row */
    if (id[i] - lo >= 0 && id[i] - lo < rows)
      sample[next[id[i] - lo]++] = i;
  void *dev;
  rc = upload_bytes(cu, hs, words * sizeof(int64_t), &dev);
  free(hs);
  if (rc)
    return rc;
  plan_k_emb_grad<S> k;
  k.dy = (const S *)c->din[0];
  k.start = (const int64_t *)dev;
  k.sample = (const int64_t *)dev + 2 * rows + 1;
  k.o = (S *)c->dout[0];
  k.d = d;
  return plan_cu_launch(cu, rows * d, k);
}

/* Whether x has at most 24 significant bits (0, 2^k, 0.75 and 3 do; 0.1
 * does not): exact mode keeps such a scale factor as it is. */
static bool short_dyadic(double x) {
  if (x == 0)
    return true;
  int e;
  double s = ldexp(frexp(fabs(x), &e), 24);
  return s == floor(s);
}

template <class S> static int run_numeric(plan_cu *cu, const plan_cu_call *c) {
  int kind = c->kind;
  const plan_view *in = c->in;
  plan_view *out = c->out;
  const S *x = (const S *)c->din[0];
  S *o = (S *)c->dout[0];
  int64_t total = plan_cu_count(out);
  switch (kind) {
  case PLAN_OP_MATMUL:
    return run_matmul(cu, c);
  case PLAN_OP_LINEAR:
    return run_linear<S>(cu, c);
  case PLAN_OP_ADD:
  case PLAN_OP_SUB:
  case PLAN_OP_MUL:
  case PLAN_OP_DIV: {
    plan_k_binary<S> k;
    k.a = x;
    k.b = (const S *)c->din[1];
    k.o = o;
    k.bc = plan_cu_bcast(out, in, 2);
    k.kind = kind;
    k.bits = c->bits;
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_SCALE:
  case PLAN_OP_RELU:
  case PLAN_OP_GELU:
  case PLAN_OP_SILU:
  case PLAN_OP_TANH:
  case PLAN_OP_EXP: {
    plan_k_unary<S> k;
    k.x = x;
    k.o = o;
    k.kind = kind;
    k.bits = c->bits;
    k.f = 0;
    k.tanh_approx = false;
    if (kind == PLAN_OP_SCALE) {
      /* exact mode rounds a long factor (0.1) once to 11 significant
       * bits, as the CPU runner does, so the scale stays linear */
      k.f = plan_cu_attr_float(c->attrs, kind, 0);
      if (c->bits >= 0 && !short_dyadic(k.f)) {
        int e;
        double m = frexp(k.f, &e);
        k.f = ldexp(nearbyint(ldexp(m, 11)), e - 11);
      }
    }
    if (kind == PLAN_OP_GELU)
      k.tanh_approx = !strcmp(plan_cu_attr_string(c->attrs, kind, 0), "tanh");
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_SOFTMAX: {
    int d = plan_cu_norm_dim(plan_cu_attr_int(c->attrs, kind, 0), in->rank);
    plan_k_softmax<S> k;
    k.x = x;
    k.o = o;
    k.n = in->dims[d];
    k.inner = plan_cu_prod(in->dims, d + 1, in->rank);
    k.bits = c->bits;
    if (k.n == 0)
      return PLAN_OK;
    return plan_cu_launch(cu, plan_cu_prod(in->dims, 0, d) * k.inner, k);
  }
  case PLAN_OP_LAYERNORM:
  case PLAN_OP_RMSNORM: {
    plan_k_norm<S> k;
    k.x = x;
    k.w = (const S *)c->din[1];
    k.b = c->nin > 2 ? (const S *)c->din[2] : NULL;
    k.o = o;
    k.d = in->dims[in->rank - 1];
    k.eps = plan_cu_attr_float(c->attrs, kind, 0);
    k.ln = kind == PLAN_OP_LAYERNORM;
    k.bits = c->bits;
    if (k.d == 0)
      return PLAN_OK;
    return plan_cu_launch(cu, plan_cu_prod(in->dims, 0, in->rank - 1), k);
  }
  case PLAN_OP_REDUCE_SUM:
  case PLAN_OP_REDUCE_MEAN:
    return run_reduce<S>(cu, c);
  case PLAN_OP_CROSS_ENTROPY:
    return run_cross_entropy<S>(cu, c);
  case PLAN_OP_RELU_GRAD:
  case PLAN_OP_GELU_GRAD:
  case PLAN_OP_SILU_GRAD: {
    plan_k_act_grad<S> k;
    k.dy = x;
    k.x = (const S *)c->din[1];
    k.o = o;
    k.kind = kind;
    k.bits = c->bits;
    k.tanh_approx = kind == PLAN_OP_GELU_GRAD &&
                    !strcmp(plan_cu_attr_string(c->attrs, kind, 0), "tanh");
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_LAYERNORM_GRAD:
  case PLAN_OP_RMSNORM_GRAD: {
    const plan_view *xv = &in[1];
    plan_k_norm_grad<S> k;
    k.dy = x;
    k.x = (const S *)c->din[1];
    k.w = (const S *)c->din[2];
    k.o = o;
    k.d = xv->dims[xv->rank - 1];
    k.eps = plan_cu_attr_float(c->attrs, kind, 0);
    k.ln = kind == PLAN_OP_LAYERNORM_GRAD;
    k.bits = c->bits;
    if (k.d == 0)
      return PLAN_OK;
    return plan_cu_launch(cu, plan_cu_prod(xv->dims, 0, xv->rank - 1), k);
  }
  case PLAN_OP_EMBEDDING_GRAD:
    return run_embedding_grad<S>(cu, c);
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    return run_cross_entropy_grad<S>(cu, c);
  default:
    return plan_cu_fail(cu, PLAN_EUNSUPPORTED, "%s: no CUDA kernel",
                        plan_op_kind_name(kind));
  }
}

/* Whether the kernels handle `kind` at all: every kind of the registry up
 * to moe_weights_grad (the routing ops in kernels_route.cu), nothing added
 * after it. */
static bool has_kernel(int kind) {
  switch (kind) {
  case PLAN_OP_MATMUL:
  case PLAN_OP_LINEAR:
  case PLAN_OP_ADD:
  case PLAN_OP_SUB:
  case PLAN_OP_MUL:
  case PLAN_OP_DIV:
  case PLAN_OP_SCALE:
  case PLAN_OP_RELU:
  case PLAN_OP_GELU:
  case PLAN_OP_SILU:
  case PLAN_OP_TANH:
  case PLAN_OP_EXP:
  case PLAN_OP_SOFTMAX:
  case PLAN_OP_LAYERNORM:
  case PLAN_OP_RMSNORM:
  case PLAN_OP_REDUCE_SUM:
  case PLAN_OP_REDUCE_MEAN:
  case PLAN_OP_CROSS_ENTROPY:
  case PLAN_OP_RELU_GRAD:
  case PLAN_OP_GELU_GRAD:
  case PLAN_OP_SILU_GRAD:
  case PLAN_OP_LAYERNORM_GRAD:
  case PLAN_OP_RMSNORM_GRAD:
  case PLAN_OP_EMBEDDING_GRAD:
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    return true;
  default:
    return plan_cu_is_move(kind) || plan_cu_is_route(kind);
  }
}

/* ---- entry points -------------------------------------------------------- */

extern "C" bool plan_cuda_supports_op(int kind, plan_dtype dtype) {
  if (kind < 0 || kind >= PLAN_OP_COUNT || (int)dtype < 0 ||
      dtype >= PLAN_DTYPE_COUNT || !has_kernel(kind))
    return false;
  if (plan_cu_is_float(dtype))
    return true;
  return plan_cu_is_move(kind) && kind != PLAN_OP_EMBEDDING;
}

static int dispatch(plan_cu *cu, plan_cu_call *c) {
  int rc;
  for (int i = 0; i < c->nin; i++) {
    const plan_view *v = &c->in[i];
    if (c->kind == PLAN_OP_WHERE && i == 0) {
      /* the condition, of any dtype, as a byte mask: nonzero selects a */
      int64_t n = plan_cu_count(v);
      void *mask;
      if ((rc = host_alloc(cu, (size_t)n, &mask)))
        return rc;
      unsigned char *mk = (unsigned char *)mask;
      for (int64_t j = 0; j < n; j++)
        mk[j] = v->dtype == PLAN_F64 ? ((const double *)v->data)[j] != 0
                : plan_cu_is_float(v->dtype)
                    ? ((const float *)v->data)[j] != 0
                    : ((const int64_t *)v->data)[j] != 0;
      rc = upload_bytes(cu, mask, (size_t)n, &c->din[i]);
      free(mask);
    } else {
      rc = upload_view(cu, v, &c->din[i]);
    }
    if (rc)
      return rc;
  }
  for (int i = 0; i < c->nout; i++)
    if ((rc = plan_cu_alloc(cu,
                            (size_t)plan_cu_count(&c->out[i]) *
                                plan_cu_dev_esz(c->out[i].dtype),
                            &c->dout[i])))
      return rc;
  if (plan_cu_is_move(c->kind)) {
    rc = plan_cu_run_move(cu, c);
  } else if (plan_cu_is_route(c->kind)) {
    rc = plan_cu_run_route(cu, c);
  } else {
    switch (c->out[0].dtype) {
    case PLAN_F64:
      rc = run_numeric<double>(cu, c);
      break;
    case PLAN_F32:
      rc = run_numeric<float>(cu, c);
      break;
    case PLAN_BF16:
      rc = run_numeric<plan_bf16_t>(cu, c);
      break;
    default: /* F16: supports_op was checked */
      rc = run_numeric<plan_f16_t>(cu, c);
      break;
    }
  }
  if (rc || (rc = plan_cu_sync(cu)))
    return rc;
  for (int i = 0; i < c->nout; i++)
    if ((rc = download_view(cu, c->dout[i], &c->out[i])))
      return rc;
  return PLAN_OK;
}

struct plan_cuda_ctx {
#ifdef __CUDACC__
  cublasHandle_t blas;
#else
  int unused;
#endif
};

extern "C" plan_cuda_ctx *plan_cuda_ctx_new(char *err, size_t errsz) {
  plan_cuda_ctx *c = (plan_cuda_ctx *)calloc(1, sizeof *c);
  if (!c) {
    if (err && errsz)
      snprintf(err, errsz, "plan_cuda_ctx_new: out of memory");
    return NULL;
  }
#ifdef __CUDACC__
  cublasStatus_t s = cublasCreate(&c->blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    if (err && errsz)
      snprintf(err, errsz, "cublasCreate: %s: %s", cublasGetStatusName(s),
               cublasGetStatusString(s));
    free(c);
    return NULL;
  }
#endif
  return c;
}

extern "C" void plan_cuda_ctx_free(plan_cuda_ctx *c) {
  if (!c)
    return;
#ifdef __CUDACC__
  (void)cublasDestroy(c->blas); /* nothing to do on failure */
#endif
  free(c);
}

extern "C" int
plan_cuda_run_op_ctx(plan_cuda_ctx *cc, int kind, const plan_attr_val *attrs,
                     const plan_view *in, int nin, plan_view *out, int nout,
                     const plan_kernel_ctx *ctx, char *err, size_t errsz) {
  plan_cu cu;
  plan_cu_begin(&cu, err, errsz);
  if (err && errsz)
    err[0] = '\0';
  int bits;
  int rc = plan_kernel_check(kind, attrs, in, nin, out, nout, ctx, &bits, err,
                             errsz);
  if (rc)
    return rc;
  const char *op = plan_op_kind_name(kind);
  if (!plan_cuda_supports_op(kind, out[0].dtype))
    return plan_cu_fail(&cu, PLAN_EUNSUPPORTED, "%s: no CUDA kernel for %s", op,
                        plan_dtype_name(out[0].dtype));
  plan_cu_call c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.attrs = attrs;
  c.in = in;
  c.nin = nin;
  c.out = out;
  c.nout = nout;
  c.bits = out[0].dtype == PLAN_F64 ? bits : -1; /* an F64 mode */
#ifdef __CUDACC__
  cu.stream = 0; /* the default stream of the current device */
  if (cc)
    cu.blas = cc->blas;
#else
  (void)cc;
#endif
  return plan_cu_end(&cu, dispatch(&cu, &c));
}

extern "C" int plan_cuda_run_op(int kind, const plan_attr_val *attrs,
                                const plan_view *in, int nin, plan_view *out,
                                int nout, const plan_kernel_ctx *ctx, char *err,
                                size_t errsz) {
  return plan_cuda_run_op_ctx(NULL, kind, attrs, in, nin, out, nout, ctx, err,
                              errsz);
}
