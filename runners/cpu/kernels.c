/* The CPU kernels' dispatcher: checks the local blocks against the op
 * (plan_kernel_check, the runners' common checks), resolves attributes and
 * global sizes, and runs the typed numeric kernels (kernels_typed.c) or the
 * dtype-agnostic data movement here; BF16/F16 results are rounded to their
 * format at the end. */
#include "kernels.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels_int.h"
#include "kernels_attention.h"
#include "kernels_route.h"
#include "libplan/ops.h"
#include "base/numeric.h"
#include "base/util.h"

/* ---- small helpers ------------------------------------------------------- */

static bool dtype_is_float(plan_dtype t) {
  return t == PLAN_F64 || t == PLAN_F32 || t == PLAN_BF16 || t == PLAN_F16;
}

/* Bytes of one stored element: double, float or int64_t. */
static size_t elem_size(plan_dtype t) {
  return t == PLAN_F64       ? sizeof(double)
         : dtype_is_float(t) ? sizeof(float)
                             : sizeof(int64_t);
}

static int64_t count_of(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d]; /* fits: check_view */
  return n;
}

static int64_t prod(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++)
    n *= dims[d];
  return n;
}

/* The global size of dim d (0 = unknown: the local size). */
static int64_t global_dim(const plan_view *v, int d) {
  return v->global_dims[d] > 0 ? v->global_dims[d] : v->dims[d];
}

/* Attribute values, or the schema defaults when attrs is NULL (the loader
 * fills the defaults of absent scalars). */
static const plan_attr_spec *spec_of(int kind) {
  return plan_op_attrs(kind, NULL);
}
static int64_t attr_int(const plan_attr_val *a, int kind, int i) {
  return a ? a[i].i : spec_of(kind)[i].def_i;
}
static double attr_float(const plan_attr_val *a, int kind, int i) {
  return a ? a[i].f : spec_of(kind)[i].def_f;
}
static bool attr_bool(const plan_attr_val *a, int kind, int i) {
  return a ? a[i].b : spec_of(kind)[i].def_b;
}
static const char *attr_string(const plan_attr_val *a, int kind, int i) {
  return a && a[i].s ? a[i].s : spec_of(kind)[i].def_s;
}
/* An INTS attribute; false when absent. */
static bool attr_ints(const plan_attr_val *a, int i, const int64_t **v,
                      int *n) {
  if (!a || (!a[i].present && a[i].nints <= 0)) {
    *v = NULL;
    *n = 0;
    return false;
  }
  *v = a[i].ints;
  *n = a[i].nints > 0 && a[i].ints ? a[i].nints : 0;
  return true;
}

static int norm_dim(int64_t d, int rank) {
  return (int)(d < 0 ? d + rank : d); /* in range: inference checked */
}

static void round_view(plan_view *v) {
  float *p = v->data;
  int64_t n = count_of(v);
  if (v->dtype == PLAN_BF16)
    plan_round_bf16_n(p, n);
  else if (v->dtype == PLAN_F16)
    plan_round_f16_n(p, n);
}

/* ---- data movement (dtype-agnostic) -------------------------------------- */

/* out[j..] = in[perm..]: out dim j is in dim perm[j]. */
static void permute_copy(const void *src, void *dst, size_t esz, int rank,
                         const int64_t *in_dims, const int *perm) {
  int64_t istr[PLAN_MAX_RANK] = {0}, ostr[PLAN_MAX_RANK] = {0},
          odims[PLAN_MAX_RANK];
  int64_t s = 1, n = prod(in_dims, 0, rank);
  for (int d = rank - 1; d >= 0; d--) {
    istr[d] = s;
    s *= in_dims[d];
  }
  for (int j = 0; j < rank; j++) {
    odims[j] = in_dims[perm[j]];
    ostr[j] = istr[perm[j]];
  }
  if (n == 0)
    return;
  if (rank == 0) {
    memcpy(dst, src, esz);
    return;
  }
  int64_t inner = odims[rank - 1], is = ostr[rank - 1], outer = n / inner;
  int64_t idx[PLAN_MAX_RANK] = {0}, p = 0;
  const unsigned char *in = src;
  unsigned char *o = dst;
  for (int64_t q = 0; q < outer; q++) {
    unsigned char *oo = o + (size_t)(q * inner) * esz;
    if (esz == sizeof(float)) {
      float *t = (float *)(void *)oo;
      const float *f = (const float *)(const void *)in + p;
      for (int64_t i = 0; i < inner; i++)
        t[i] = f[i * is];
    } else {
      for (int64_t i = 0; i < inner; i++)
        memcpy(oo + (size_t)i * esz, in + (size_t)(p + i * is) * esz, esz);
    }
    for (int d = rank - 2; d >= 0; d--) {
      p += ostr[d];
      if (++idx[d] < odims[d])
        break;
      p -= ostr[d] * odims[d];
      idx[d] = 0;
    }
  }
}

static int run_permute(int kind, const plan_attr_val *attrs,
                       const plan_view *in, plan_view *out) {
  int r = in->rank, perm[PLAN_MAX_RANK];
  const int64_t *v;
  int n;
  for (int j = 0; j < r; j++)
    perm[j] = j;
  if (kind == PLAN_OP_TRANSPOSE) {
    int d0 = r - 2, d1 = r - 1;
    if (attr_ints(attrs, 0, &v, &n)) {
      d0 = norm_dim(v[0], r);
      d1 = norm_dim(v[1], r);
    }
    perm[d0] = d1;
    perm[d1] = d0;
  } else {
    attr_ints(attrs, 0, &v, &n);
    for (int j = 0; j < r; j++)
      perm[j] = norm_dim(v[j], r);
  }
  permute_copy(in->data, out->data, elem_size(in->dtype), r, in->dims, perm);
  return PLAN_OK;
}

/* concat (to_whole) or split (!to_whole) along dim: parts[i] are the pieces
 * in order; whole is the fused tensor. */
static void move_parts(const plan_view *whole, const plan_view *parts,
                       int nparts, int dim, bool to_whole) {
  size_t esz = elem_size(whole->dtype);
  int64_t outer = prod(whole->dims, 0, dim);
  int64_t inner = prod(whole->dims, dim + 1, whole->rank);
  int64_t wrow = whole->dims[dim] * inner;
  unsigned char *w = whole->data;
  int64_t at = 0;
  for (int i = 0; i < nparts; i++) {
    int64_t prow = parts[i].dims[dim] * inner;
    unsigned char *p = parts[i].data;
    if (prow > 0)
      for (int64_t q = 0; q < outer; q++) {
        unsigned char *wp = w + (size_t)(q * wrow + at) * esz;
        unsigned char *pp = p + (size_t)(q * prow) * esz;
        if (to_whole)
          memcpy(wp, pp, (size_t)prow * esz);
        else
          memcpy(pp, wp, (size_t)prow * esz);
      }
    at += prow;
  }
}

/* out = in broadcast to out's (local) dims, numpy style. */
static void run_expand(const plan_view *in, plan_view *out) {
  size_t esz = elem_size(in->dtype);
  int r = out->rank;
  int64_t n = count_of(out);
  if (n == 0)
    return;
  if (r == 0) {
    memcpy(out->data, in->data, esz);
    return;
  }
  int64_t st[PLAN_MAX_RANK] = {0}, s = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    st[d + r - in->rank] = in->dims[d] == 1 ? 0 : s;
    s *= in->dims[d];
  }
  int64_t inner = out->dims[r - 1], is = st[r - 1], outer = n / inner;
  int64_t idx[PLAN_MAX_RANK] = {0}, p = 0;
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  for (int64_t q = 0; q < outer; q++) {
    unsigned char *o = dst + (size_t)(q * inner) * esz;
    for (int64_t i = 0; i < inner; i++)
      memcpy(o + (size_t)i * esz, src + (size_t)(p + i * is) * esz, esz);
    for (int d = r - 2; d >= 0; d--) {
      p += st[d];
      if (++idx[d] < out->dims[d])
        break;
      p -= st[d] * out->dims[d];
      idx[d] = 0;
    }
  }
}

/* Whether element i of a where's condition selects a: nonzero, whatever
 * the dtype (a float NaN is nonzero, as in C and torch's bool()). */
static bool cond_at(const plan_view *c, int64_t i) {
  if (c->dtype == PLAN_F64)
    return ((const double *)c->data)[i] != 0;
  if (dtype_is_float(c->dtype))
    return ((const float *)c->data)[i] != 0;
  return ((const int64_t *)c->data)[i] != 0;
}

/* where: out = cond ? a : b elementwise over the local blocks, the three
 * broadcast to out's dims (numpy); a copy of one element or the other, so
 * exact in every mode and dtype. */
static void run_where(const plan_view *in, plan_view *out) {
  size_t esz = elem_size(out->dtype);
  int r = out->rank;
  int64_t n = count_of(out);
  int64_t st[3][PLAN_MAX_RANK] = {{0}};
  for (int i = 0; i < 3; i++) {
    int64_t s = 1;
    for (int d = in[i].rank - 1; d >= 0; d--) {
      st[i][d + r - in[i].rank] = in[i].dims[d] == 1 ? 0 : s;
      s *= in[i].dims[d];
    }
  }
  const unsigned char *a = in[1].data, *b = in[2].data;
  unsigned char *o = out->data;
  int64_t idx[PLAN_MAX_RANK] = {0}, p[3] = {0, 0, 0};
  for (int64_t q = 0; q < n; q++) {
    const unsigned char *src =
        cond_at(&in[0], p[0]) ? a + (size_t)p[1] * esz : b + (size_t)p[2] * esz;
    memcpy(o + (size_t)q * esz, src, esz);
    for (int d = r - 1; d >= 0; d--) { /* next index, row-major */
      for (int i = 0; i < 3; i++)
        p[i] += st[i][d];
      if (++idx[d] < out->dims[d])
        break;
      for (int i = 0; i < 3; i++)
        p[i] -= st[i][d] * out->dims[d];
      idx[d] = 0;
    }
  }
}

/* repeat_interleave along dim: each of the n input slices [inner] copied
 * `rep` times in place, for every outer index. */
static void run_repeat_interleave(const plan_attr_val *attrs,
                                  const plan_view *in, plan_view *out) {
  size_t esz = elem_size(in->dtype);
  int dim = norm_dim(attr_int(attrs, PLAN_OP_REPEAT_INTERLEAVE, 1), in->rank);
  int64_t rep = attr_int(attrs, PLAN_OP_REPEAT_INTERLEAVE, 0);
  int64_t outer = prod(in->dims, 0, dim), n = in->dims[dim];
  size_t row = (size_t)prod(in->dims, dim + 1, in->rank) * esz;
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  if (row == 0)
    return;
  for (int64_t q = 0; q < outer; q++)
    for (int64_t j = 0; j < n; j++, src += row)
      for (int64_t t = 0; t < rep; t++, dst += row)
        memcpy(dst, src, row);
}

/* Every id of an embedding (or its gradient) within [0, rows): else the
 * error, naming the first id outside. */
static int check_ids(const int64_t *id, int64_t n, int64_t rows, const char *op,
                     const char *what, char *err, size_t errsz) {
  for (int64_t i = 0; i < n; i++)
    if (id[i] < 0 || id[i] >= rows)
      return plan_errf(err, errsz,
                       "%s: id %lld (element %lld) is outside %s [0, %lld)", op,
                       (long long)id[i], (long long)i, what, (long long)rows);
  return PLAN_OK;
}

static int run_embedding(const plan_view *in, plan_view *out, char *err,
                         size_t errsz) {
  const plan_view *tab = &in[0], *ids = &in[1];
  int64_t rows = tab->dims[0], d = tab->dims[1], lo = tab->offset[0];
  int64_t vocab = global_dim(tab, 0);
  if (lo < 0 || lo + rows > vocab)
    return plan_errf(err, errsz,
                     "embedding: table block rows [%lld, %lld) outside the "
                     "vocabulary of %lld",
                     (long long)lo, (long long)(lo + rows), (long long)vocab);
  const int64_t *id = ids->data;
  int64_t n = count_of(ids);
  if (check_ids(id, n, vocab, "embedding", "the vocabulary", err, errsz))
    return PLAN_EINVALID;
  size_t esz = elem_size(tab->dtype), row = (size_t)d * esz;
  const unsigned char *t = tab->data;
  unsigned char *o = out->data;
  if (row == 0)
    return PLAN_OK;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = id[i] - lo;
    if (r >= 0 && r < rows)
      memcpy(o + (size_t)i * row, t + (size_t)r * row, row);
    else
      memset(o + (size_t)i * row, 0, row); /* masked: another rank's row
                                              (all-zero bits is 0.0) */
  }
  return PLAN_OK;
}

/* ---- numeric ops --------------------------------------------------------- */

static int run_binary(const plan_typed_kernels *K, int kind,
                      const plan_view *in, plan_view *out, int bits) {
  plan_kbcast bc;
  memset(&bc, 0, sizeof bc);
  bc.rank = out->rank;
  bc.count = count_of(out);
  for (int j = 0; j < out->rank; j++)
    bc.dims[j] = out->dims[j];
  for (int i = 0; i < 2; i++) {
    const plan_view *v = &in[i];
    int64_t *st = i ? bc.sb : bc.sa, s = 1;
    for (int d = v->rank - 1; d >= 0; d--) {
      int j = d + out->rank - v->rank;
      st[j] = v->dims[d] == 1 ? 0 : s;
      s *= v->dims[d];
    }
  }
  K->binary(kind, in[0].data, in[1].data, out->data, &bc, bits);
  return PLAN_OK;
}

static int run_reduce(const plan_typed_kernels *K, int kind,
                      const plan_attr_val *attrs, const plan_view *in,
                      plan_view *out, int bits, char *err, size_t errsz) {
  plan_kreduce rd;
  memset(&rd, 0, sizeof rd);
  bool red[PLAN_MAX_RANK] = {false};
  const int64_t *v;
  int n;
  attr_ints(attrs, 0, &v, &n); /* present: inference checked */
  for (int j = 0; j < n; j++)
    red[norm_dim(v[j], in->rank)] = true;
  rd.rank = in->rank;
  rd.count = count_of(in);
  rd.out_count = count_of(out);
  rd.divisor = -1;
  int64_t s = 1, g = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    rd.dims[d] = in->dims[d];
    rd.ostride[d] = red[d] ? 0 : s;
    if (!red[d])
      s *= in->dims[d];
  }
  if (kind == PLAN_OP_REDUCE_MEAN) {
    for (int d = 0; d < in->rank; d++)
      if (red[d]) {
        int64_t gd = global_dim(in, d);
        if (gd < in->dims[d])
          return plan_errf(err, errsz,
                           "reduce_mean: dim %d is %lld locally but %lld "
                           "globally",
                           d, (long long)in->dims[d], (long long)gd);
        if (!plan_mul_i64(g, gd, &g))
          return plan_errf(err, errsz, "reduce_mean: global size overflows");
      }
    rd.divisor = (double)g;
  }
  K->reduce(in->data, out->data, &rd, bits);
  return PLAN_OK;
}

/* Cross-entropy's labels (op `name`): each in [0, c); the global batch
 * (the product of the labels' global dims) into *g, the count a mean over
 * the whole batch divides by. */
static int check_labels(const char *name, const plan_view *lb, int64_t c,
                        int64_t *g, char *err, size_t errsz) {
  const int64_t *label = lb->data;
  int64_t rows = count_of(lb);
  for (int64_t i = 0; i < rows; i++)
    if (label[i] < 0 || label[i] >= c)
      return plan_errf(err, errsz,
                       "%s: label %lld (element %lld) is outside the classes "
                       "[0, %lld)",
                       name, (long long)label[i], (long long)i, (long long)c);
  *g = 1;
  for (int d = 0; d < lb->rank; d++) {
    int64_t gd = global_dim(lb, d);
    if (gd < lb->dims[d])
      return plan_errf(err, errsz,
                       "%s: labels dim %d is %lld locally but %lld globally",
                       name, d, (long long)lb->dims[d], (long long)gd);
    if (!plan_mul_i64(*g, gd, g))
      return plan_errf(err, errsz, "%s: global batch overflows", name);
  }
  return PLAN_OK;
}

static int run_cross_entropy(const plan_typed_kernels *K, const plan_view *in,
                             plan_view *out, int bits, char *err,
                             size_t errsz) {
  const plan_view *lg = &in[0], *lb = &in[1];
  int64_t c = lg->dims[lg->rank - 1], rows = count_of(lb), g;
  int rc = check_labels("cross_entropy", lb, c, &g, err, errsz);
  if (rc)
    return rc;
  K->cross_entropy(lg->data, lb->data, rows, c, (double)g, out->data, bits);
  return PLAN_OK;
}

static int run_embedding_grad(const plan_typed_kernels *K, const plan_view *in,
                              plan_view *out, char *err, size_t errsz) {
  const plan_view *dy = &in[0], *ids = &in[1];
  int64_t lo = out->offset[0], rows = out->dims[0];
  int64_t vocab = global_dim(out, 0);
  if (lo < 0 || lo + rows > vocab)
    return plan_errf(err, errsz,
                     "embedding_grad: output block rows [%lld, %lld) outside "
                     "the table's %lld rows",
                     (long long)lo, (long long)(lo + rows), (long long)vocab);
  const int64_t *id = ids->data;
  int64_t n = count_of(ids);
  if (check_ids(id, n, vocab, "embedding_grad", "the table's rows", err, errsz))
    return PLAN_EINVALID;
  K->embedding_grad(dy->data, id, n, lo, rows, out->dims[1], out->data);
  return PLAN_OK;
}

static int run_cross_entropy_grad(const plan_typed_kernels *K,
                                  const plan_view *in, plan_view *out, int bits,
                                  char *err, size_t errsz) {
  const plan_view *lg = &in[1], *lb = &in[2];
  int64_t c = lg->dims[lg->rank - 1], rows = count_of(lb), g;
  int rc = check_labels("cross_entropy_grad", lb, c, &g, err, errsz);
  if (rc)
    return rc;
  K->cross_entropy_grad(in[0].data, lg->data, lb->data, rows, c, (double)g,
                        out->data, bits);
  return PLAN_OK;
}

static bool fits_int(int64_t v) {
  return v <= INT_MAX;
}

static int run_matmul(const plan_typed_kernels *K, const plan_attr_val *attrs,
                      const plan_view *in, plan_view *out, char *err,
                      size_t errsz) {
  const plan_view *a = &in[0], *b = &in[1];
  plan_kmm mm;
  memset(&mm, 0, sizeof mm);
  mm.ta = attr_bool(attrs, PLAN_OP_MATMUL, 0);
  mm.tb = attr_bool(attrs, PLAN_OP_MATMUL, 1);
  int ra = a->rank, rb = b->rank, nb = out->rank - 2;
  mm.m = a->dims[mm.ta ? ra - 1 : ra - 2];
  mm.k = a->dims[mm.ta ? ra - 2 : ra - 1];
  mm.n = b->dims[mm.tb ? rb - 2 : rb - 1];
  if (!fits_int(mm.m) || !fits_int(mm.n) || !fits_int(mm.k))
    return plan_errc(PLAN_ELIMIT, err, errsz,
                     "matmul: m, n, k = %lld, %lld, %lld exceed BLAS's int",
                     (long long)mm.m, (long long)mm.n, (long long)mm.k);
  mm.brank = nb;
  mm.bcount = prod(out->dims, 0, nb);
  for (int j = 0; j < nb; j++)
    mm.bdims[j] = out->dims[j];
  const plan_view *op[2] = {a, b};
  int64_t bn[2];
  for (int i = 0; i < 2; i++) {
    const plan_view *v = op[i];
    int64_t *st = i ? mm.sb : mm.sa;
    int64_t s = v->dims[v->rank - 1] * v->dims[v->rank - 2];
    bn[i] = prod(v->dims, 0, v->rank - 2);
    for (int d = v->rank - 3; d >= 0; d--) {
      int j = d + nb - (v->rank - 2);
      st[j] = v->dims[d] == 1 ? 0 : s;
      s *= v->dims[d];
    }
  }
  /* A's batch is the whole output batch and B one matrix: one gemm of
   * batch * m rows (A's rows are contiguous when A is not transposed) */
  mm.fold =
      !mm.ta && bn[0] == mm.bcount && bn[1] == 1 && fits_int(mm.bcount * mm.m);
  K->matmul(&mm, a->data, b->data, out->data);
  return PLAN_OK;
}

static int run_linear(const plan_typed_kernels *K, const plan_view *in, int nin,
                      plan_view *out, char *err, size_t errsz) {
  const plan_view *x = &in[0], *w = &in[1];
  int64_t k = x->dims[x->rank - 1], n = w->dims[0];
  int64_t rows = prod(x->dims, 0, x->rank - 1);
  if (!fits_int(rows) || !fits_int(n) || !fits_int(k))
    return plan_errc(PLAN_ELIMIT, err, errsz,
                     "linear: rows, n, k = %lld, %lld, %lld exceed BLAS's int",
                     (long long)rows, (long long)n, (long long)k);
  K->linear(x->data, w->data, nin > 2 ? in[2].data : NULL, out->data, rows, n,
            k);
  return PLAN_OK;
}

/* ---- entry points -------------------------------------------------------- */

bool plan_cpu_supports(int kind, plan_dtype dtype) {
  if (kind < 0 || kind >= PLAN_OP_COUNT || (int)dtype < 0 ||
      dtype >= PLAN_DTYPE_COUNT)
    return false;
  if (dtype_is_float(dtype))
    return true;
  return kind == PLAN_OP_TRANSPOSE || kind == PLAN_OP_PERMUTE ||
         kind == PLAN_OP_RESHAPE || kind == PLAN_OP_SPLIT ||
         kind == PLAN_OP_CONCAT || kind == PLAN_OP_EXPAND ||
         kind == PLAN_OP_WHERE || kind == PLAN_OP_REPEAT_INTERLEAVE;
}

static int run(int kind, const plan_attr_val *attrs, const plan_view *in,
               int nin, plan_view *out, int nout, int bits, char *err,
               size_t errsz) {
  plan_dtype dt = out[0].dtype;
  const plan_typed_kernels *K =
      dt == PLAN_F64 ? &plan_kernels_f64 : &plan_kernels_f32;
  if (dt != PLAN_F64)
    bits = -1; /* exact mode is an F64 mode */
  switch ((plan_op_kind)kind) {
  case PLAN_OP_MATMUL:
    return run_matmul(K, attrs, in, out, err, errsz);
  case PLAN_OP_LINEAR:
    return run_linear(K, in, nin, out, err, errsz);
  case PLAN_OP_ADD:
  case PLAN_OP_SUB:
  case PLAN_OP_MUL:
  case PLAN_OP_DIV:
    return run_binary(K, kind, in, out, bits);
  case PLAN_OP_SCALE:
    K->unary(kind, in->data, out->data, count_of(out),
             attr_float(attrs, kind, 0), bits);
    return PLAN_OK;
  case PLAN_OP_GELU:
    K->unary(kind, in->data, out->data, count_of(out),
             strcmp(attr_string(attrs, kind, 0), "tanh") ? 0 : 1, bits);
    return PLAN_OK;
  case PLAN_OP_RELU:
  case PLAN_OP_SILU:
  case PLAN_OP_TANH:
  case PLAN_OP_EXP:
  case PLAN_OP_SIGMOID:
  case PLAN_OP_RSQRT:
    K->unary(kind, in->data, out->data, count_of(out), 0, bits);
    return PLAN_OK;
  case PLAN_OP_ADD_SCALAR:
    K->unary(kind, in->data, out->data, count_of(out),
             attr_float(attrs, kind, 0), bits);
    return PLAN_OK;
  case PLAN_OP_ATTENTION:
    return plan_kernel_attention(attrs, in, nin, out, bits);
  case PLAN_OP_SOFTMAX: {
    int d = norm_dim(attr_int(attrs, kind, 0), in->rank);
    K->softmax(in->data, out->data, prod(in->dims, 0, d), in->dims[d],
               prod(in->dims, d + 1, in->rank), bits);
    return PLAN_OK;
  }
  case PLAN_OP_LAYERNORM:
  case PLAN_OP_RMSNORM: {
    int64_t d = in->dims[in->rank - 1];
    K->norm(kind, in[0].data, in[1].data, nin > 2 ? in[2].data : NULL,
            out->data, prod(in->dims, 0, in->rank - 1), d,
            attr_float(attrs, kind, 0), bits);
    return PLAN_OK;
  }
  case PLAN_OP_EMBEDDING:
    return run_embedding(in, out, err, errsz);
  case PLAN_OP_TRANSPOSE:
  case PLAN_OP_PERMUTE:
    return run_permute(kind, attrs, in, out);
  case PLAN_OP_RESHAPE:
    if (count_of(in) > 0)
      memcpy(out->data, in->data, (size_t)count_of(in) * elem_size(dt));
    return PLAN_OK;
  case PLAN_OP_REDUCE_SUM:
  case PLAN_OP_REDUCE_MEAN:
    return run_reduce(K, kind, attrs, in, out, bits, err, errsz);
  case PLAN_OP_SPLIT:
    move_parts(in, out, nout, norm_dim(attr_int(attrs, kind, 0), in->rank),
               false);
    return PLAN_OK;
  case PLAN_OP_CONCAT:
    move_parts(out, in, nin, norm_dim(attr_int(attrs, kind, 0), out->rank),
               true);
    return PLAN_OK;
  case PLAN_OP_CROSS_ENTROPY:
    return run_cross_entropy(K, in, out, bits, err, errsz);
  case PLAN_OP_EXPAND:
    run_expand(in, out);
    return PLAN_OK;
  case PLAN_OP_RELU_GRAD:
  case PLAN_OP_SILU_GRAD:
    K->act_grad(kind, in[0].data, in[1].data, out->data, count_of(out), 0,
                bits);
    return PLAN_OK;
  case PLAN_OP_GELU_GRAD:
    K->act_grad(kind, in[0].data, in[1].data, out->data, count_of(out),
                strcmp(attr_string(attrs, kind, 0), "tanh") ? 0 : 1, bits);
    return PLAN_OK;
  case PLAN_OP_LAYERNORM_GRAD:
  case PLAN_OP_RMSNORM_GRAD: {
    int64_t d = in[1].dims[in[1].rank - 1];
    K->norm_grad(kind, in[0].data, in[1].data, in[2].data, out->data,
                 prod(in[1].dims, 0, in[1].rank - 1), d,
                 attr_float(attrs, kind, 0), bits);
    return PLAN_OK;
  }
  case PLAN_OP_EMBEDDING_GRAD:
    return run_embedding_grad(K, in, out, err, errsz);
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    return run_cross_entropy_grad(K, in, out, bits, err, errsz);
  case PLAN_OP_WHERE:
    run_where(in, out);
    return PLAN_OK;
  case PLAN_OP_REPEAT_INTERLEAVE:
    run_repeat_interleave(attrs, in, out);
    return PLAN_OK;
  case PLAN_OP_TOPK:
  case PLAN_OP_GATHER:
  case PLAN_OP_SCATTER_ADD:
  case PLAN_OP_MOE_DISPATCH:
  case PLAN_OP_MOE_COMBINE:
  case PLAN_OP_MOE_WEIGHTS_GRAD:
    return plan_kernel_route(kind, in, nin, out);
  case PLAN_OP_COUNT:
    break;
  }
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                   "no CPU kernel for op kind %d", kind);
}

int plan_cpu_kernel(int kind, const plan_attr_val *attrs, const plan_view *in,
                    int nin, plan_view *out, int nout,
                    const plan_kernel_ctx *ctx, char *err, size_t errsz) {
  if (err && errsz)
    err[0] = '\0';
  int bits, rc;
  if ((rc = plan_kernel_check(kind, attrs, in, nin, out, nout, ctx, &bits, err,
                              errsz)))
    return rc;
  if (!plan_cpu_supports(kind, out[0].dtype))
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "%s: no CPU kernel for %s",
                     plan_op_kind_name(kind), plan_dtype_name(out[0].dtype));
  if ((rc = run(kind, attrs, in, nin, out, nout, bits, err, errsz)))
    return rc;
  for (int i = 0; i < nout; i++)
    round_view(&out[i]);
  return PLAN_OK;
}
