/* The CUDA runner's kernel bodies: one functor per op family, called once
 * per index of its launch (emu.h's plan_cu_launch), so that the same code
 * runs as device threads under nvcc and as a host loop when emulated.
 *
 * Numeric functors take the device storage type S (double, float,
 * plan_bf16_t, plan_f16_t) and compute in plan_st<S>::C (double for F64,
 * float otherwise), rounding only on store, with the CPU runner's
 * expressions in the CPU runner's order (runners/cpu/kernels_tmpl.h): an
 * elementwise result is bit-identical to the CPU's wherever the math
 * library agrees. Every reduction is sequential within one thread (a row,
 * a line of softmax, an output element of reduce_*), in the CPU's order,
 * so results are deterministic run to run and sums match the CPU's
 * bit for bit. Data-movement functors take an unsigned type E of the
 * element's size and copy bits.
 *
 * Also the host-side helpers of the dispatcher (kernels.cu) and the other
 * kernel files. */
#ifndef LIBPLAN_RUNNERS_CUDA_KERNELS_CUH
#define LIBPLAN_RUNNERS_CUDA_KERNELS_CUH

#include "emu.h"

extern "C" {
#include "libplan/ops.h"
#include "base/util.h"
}

/* ---- host-side helpers --------------------------------------------------- */

static inline bool plan_cu_is_float(plan_dtype t) {
  return t == PLAN_F64 || t == PLAN_F32 || t == PLAN_BF16 || t == PLAN_F16;
}

static inline int64_t plan_cu_count(const plan_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++)
    n *= v->dims[d];
  return n;
}

static inline int64_t plan_cu_prod(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++)
    n *= dims[d];
  return n;
}

/* The global size of dim d (0 = unknown: the local size). */
static inline int64_t plan_cu_global_dim(const plan_view *v, int d) {
  return v->global_dims[d] > 0 ? v->global_dims[d] : v->dims[d];
}

static inline int plan_cu_norm_dim(int64_t d, int rank) {
  return (int)(d < 0 ? d + rank : d);
}

/* Attribute values, or the schema defaults when attrs is NULL. */
static inline int64_t plan_cu_attr_int(const plan_attr_val *a, int kind,
                                       int i) {
  return a ? a[i].i : plan_op_attrs(kind, NULL)[i].def_i;
}
static inline double plan_cu_attr_float(const plan_attr_val *a, int kind,
                                        int i) {
  return a ? a[i].f : plan_op_attrs(kind, NULL)[i].def_f;
}
static inline bool plan_cu_attr_bool(const plan_attr_val *a, int kind, int i) {
  return a ? a[i].b : plan_op_attrs(kind, NULL)[i].def_b;
}
static inline const char *plan_cu_attr_string(const plan_attr_val *a, int kind,
                                              int i) {
  return a && a[i].s ? a[i].s : plan_op_attrs(kind, NULL)[i].def_s;
}
/* An INTS attribute; false when absent. */
static inline bool plan_cu_attr_ints(const plan_attr_val *a, int i,
                                     const int64_t **v, int *n) {
  if (!a || (!a[i].present && a[i].nints <= 0)) {
    *v = NULL;
    *n = 0;
    return false;
  }
  *v = a[i].ints;
  *n = a[i].nints > 0 && a[i].ints ? a[i].nints : 0;
  return true;
}

/* The arguments are checked by plan_kernel_check (runners/runner_op.h),
 * the checks of every runner: the same statuses and messages as the CPU
 * runner's. */

/* ---- index maps ---------------------------------------------------------- */

/* Up to three operands broadcast to an output of `rank` dims: st[k][j] is
 * operand k's element stride along output dim j (0 where it broadcasts).
 * Also a strided gather (one operand: permute, transpose, expand). */
typedef struct plan_cu_bc {
  int rank;
  int64_t dims[PLAN_MAX_RANK];
  int64_t st[3][PLAN_MAX_RANK];
} plan_cu_bc;

/* The operands' offsets of output element i (row-major). */
static PLAN_HD inline void plan_cu_bc_at(const plan_cu_bc &b, int64_t i,
                                         int64_t *off) {
  off[0] = off[1] = off[2] = 0;
  for (int d = b.rank - 1; d >= 0; d--) {
    int64_t x = i % b.dims[d];
    i /= b.dims[d];
    off[0] += x * b.st[0][d];
    off[1] += x * b.st[1][d];
    off[2] += x * b.st[2][d];
  }
}

/* A reduction: the kept dims (output order) and the reduced dims (in
 * increasing order, the last fastest) with their input strides. */
typedef struct plan_cu_red {
  int nkeep, nred;
  int64_t kdims[PLAN_MAX_RANK], kst[PLAN_MAX_RANK];
  int64_t rdims[PLAN_MAX_RANK], rst[PLAN_MAX_RANK];
  int64_t rcount; /* product of rdims */
} plan_cu_red;

/* ---- one op call (host) -------------------------------------------------- */

/* Bytes of one element on the device (double, float, 16-bit, int64_t). */
static inline size_t plan_cu_dev_esz(plan_dtype t) {
  switch (t) {
  case PLAN_F32:
    return sizeof(float);
  case PLAN_BF16:
    return sizeof(plan_bf16_t);
  case PLAN_F16:
    return sizeof(plan_f16_t);
  default: /* F64, and the integers stored as int64_t */
    return 8;
  }
}

/* An op call: the host views and their device buffers (din, dout). */
typedef struct plan_cu_call {
  int kind;
  const plan_attr_val *attrs;
  const plan_view *in;
  int nin;
  plan_view *out;
  int nout;
  int bits; /* the exact-mode grid for F64, else -1 */
  void *din[PLAN_MAX_OPERANDS], *dout[PLAN_MAX_OPERANDS];
} plan_cu_call;

/* Operands v[0..n) broadcast to `out` (numpy, right-aligned). */
static inline plan_cu_bc plan_cu_bcast(const plan_view *out, const plan_view *v,
                                       int n) {
  plan_cu_bc bc;
  memset(&bc, 0, sizeof bc);
  bc.rank = out->rank;
  for (int j = 0; j < out->rank; j++)
    bc.dims[j] = out->dims[j];
  for (int i = 0; i < n; i++) {
    int64_t s = 1;
    for (int d = v[i].rank - 1; d >= 0; d--) {
      bc.st[i][d + out->rank - v[i].rank] = v[i].dims[d] == 1 ? 0 : s;
      s *= v[i].dims[d];
    }
  }
  return bc;
}

/* Every id within [0, rows); else the CPU runner's error, naming the
 * first id outside. */
static inline int plan_cu_check_ids(plan_cu *cu, const int64_t *id, int64_t n,
                                    int64_t rows, const char *op,
                                    const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (id[i] < 0 || id[i] >= rows)
      return plan_cu_fail(cu, PLAN_EINVALID,
                          "%s: id %lld (element %lld) is outside %s [0, %lld)",
                          op, (long long)id[i], (long long)i, what,
                          (long long)rows);
  return PLAN_OK;
}

/* Whether `kind` is data movement (plan_cu_run_move: any dtype, the
 * elements copied as bits). */
bool plan_cu_is_move(int kind);
int plan_cu_run_move(plan_cu *cu, const plan_cu_call *c);

/* Whether `kind` is a routing op (plan_cu_run_route, kernels_route.cu:
 * topk, gather, scatter_add, moe_dispatch, moe_combine, moe_weights_grad;
 * the float dtypes). */
bool plan_cu_is_route(int kind);
int plan_cu_run_route(plan_cu *cu, const plan_cu_call *c);

/* ---- elementwise --------------------------------------------------------- */

template <class S> struct plan_k_binary {
  const S *a, *b;
  S *o;
  plan_cu_bc bc;
  int kind, bits;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    int64_t off[3];
    plan_cu_bc_at(bc, i, off);
    C x = T::load(a[off[0]]), y = T::load(b[off[1]]), z;
    switch (kind) {
    case PLAN_OP_ADD:
      z = x + y;
      break;
    case PLAN_OP_SUB:
      z = x - y;
      break;
    case PLAN_OP_MUL:
      z = x * y;
      break;
    default: /* PLAN_OP_DIV */
      z = plan_cu_quot(x, y, bits);
      break;
    }
    o[i] = T::store(z);
  }
};

/* kind: SCALE (f the factor), RELU, GELU (tanh_approx), SILU, TANH, EXP. */
template <class S> struct plan_k_unary {
  const S *x;
  S *o;
  int kind, bits;
  double f;
  bool tanh_approx;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    const C hf = (C)0.5, one = (C)1;
    C v = T::load(x[i]), r;
    switch (kind) {
    case PLAN_OP_SCALE:
      r = plan_cu_prod(v, (C)f, bits);
      break;
    case PLAN_OP_RELU:
      r = v < 0 ? (C)0 : v; /* NaN passes */
      break;
    case PLAN_OP_GELU:
      if (tanh_approx) {
        const C c = (C)0.79788456080286535588, c3 = (C)0.044715;
        r = plan_cu_grid(hf * v * (one + plan_m_tanh(c * (v + c3 * v * v * v))),
                         bits);
      } else {
        const C s = (C)0.70710678118654752440;
        r = plan_cu_grid(hf * v * (one + plan_m_erf(v * s)), bits);
      }
      break;
    case PLAN_OP_SILU:
      r = plan_cu_grid(v / (one + plan_m_exp(-v)), bits);
      break;
    case PLAN_OP_TANH:
      r = plan_cu_grid(plan_m_tanh(v), bits);
      break;
    default: /* PLAN_OP_EXP */
      r = plan_cu_grid(plan_m_exp(v), bits);
      break;
    }
    o[i] = T::store(r);
  }
};

/* kind: RELU_GRAD, GELU_GRAD (tanh_approx), SILU_GRAD: dy * f'(x). */
template <class S> struct plan_k_act_grad {
  const S *dy, *x;
  S *o;
  int kind, bits;
  bool tanh_approx;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    const C hf = (C)0.5, one = (C)1;
    C g = T::load(dy[i]), v = T::load(x[i]), r;
    if (kind == PLAN_OP_RELU_GRAD) {
      r = v > 0 ? g : (C)0;
    } else if (kind == PLAN_OP_GELU_GRAD && tanh_approx) {
      const C c = (C)0.79788456080286535588, c3 = (C)0.044715;
      C t = plan_m_tanh(c * (v + c3 * v * v * v));
      C d = hf * (one + t) +
            hf * v * (one - t * t) * c * (one + (C)3 * c3 * v * v);
      r = plan_cu_grid(g * d, bits);
    } else if (kind == PLAN_OP_GELU_GRAD) {
      const C s = (C)0.70710678118654752440, p = (C)0.39894228040143267794;
      C d = hf * (one + plan_m_erf(v * s)) + v * p * plan_m_exp(-hf * v * v);
      r = plan_cu_grid(g * d, bits);
    } else { /* SILU_GRAD */
      C s = one / (one + plan_m_exp(-v));
      r = plan_cu_grid(g * (s * (one + v * (one - s))), bits);
    }
    o[i] = T::store(r);
  }
};

/* ---- rows: softmax, norms, their gradients ------------------------------- */

/* Softmax over the middle dim of [outer, n, inner]: one line per index. */
template <class S> struct plan_k_softmax {
  const S *x;
  S *o;
  int64_t n, inner;
  int bits;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    int64_t p = i / inner, j = i % inner, at = p * n * inner + j;
    const S *xx = x + at;
    S *oo = o + at;
    C m = T::load(xx[0]);
    for (int64_t t = 1; t < n; t++) {
      C v = T::load(xx[t * inner]);
      if (v > m)
        m = v;
    }
    C s = 0;
    for (int64_t t = 0; t < n; t++)
      s += plan_m_exp(T::load(xx[t * inner]) - m);
    for (int64_t t = 0; t < n; t++)
      oo[t * inner] = T::store(
          plan_cu_grid(plan_m_exp(T::load(xx[t * inner]) - m) / s, bits));
  }
};

/* The statistics of a row as the forward norms compute them: the mean
 * (layernorm; 0 for rmsnorm) and rstd. */
template <class S, class C>
static PLAN_HD inline void plan_cu_row_stats(const S *xx, int64_t d, bool ln,
                                             C e, C *mean, C *rstd) {
  typedef plan_st<S> T;
  const C dd = (C)d, one = (C)1;
  C mu = 0, v = 0;
  if (ln) {
    C s = 0;
    for (int64_t i = 0; i < d; i++)
      s += T::load(xx[i]);
    mu = s / dd;
    for (int64_t i = 0; i < d; i++) {
      C c = T::load(xx[i]) - mu;
      v += c * c;
    }
  } else {
    for (int64_t i = 0; i < d; i++) {
      C c = T::load(xx[i]);
      v += c * c;
    }
  }
  *mean = mu;
  *rstd = one / plan_m_sqrt(v / dd + e);
}

/* layernorm (b may be NULL) or rmsnorm over the last dim: one row each. */
template <class S> struct plan_k_norm {
  const S *x, *w, *b;
  S *o;
  int64_t d;
  double eps;
  bool ln;
  int bits;
  PLAN_HD void operator()(int64_t r) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    const S *xx = x + r * d;
    S *oo = o + r * d;
    C mean, rstd;
    plan_cu_row_stats<S, C>(xx, d, ln, (C)eps, &mean, &rstd);
    for (int64_t i = 0; i < d; i++) {
      C y;
      if (ln) {
        y = (T::load(xx[i]) - mean) * rstd * T::load(w[i]);
        if (b)
          y = y + T::load(b[i]);
      } else {
        y = T::load(xx[i]) * rstd * T::load(w[i]);
      }
      oo[i] = T::store(plan_cu_grid(y, bits));
    }
  }
};

/* layernorm_grad / rmsnorm_grad: with xh = (x - mean) rstd and g = dy w,
 * dx = rstd (g - mean(g) - xh mean(g xh)) (no mean(g) for rmsnorm). */
template <class S> struct plan_k_norm_grad {
  const S *dy, *x, *w;
  S *o;
  int64_t d;
  double eps;
  bool ln;
  int bits;
  PLAN_HD void operator()(int64_t r) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    const S *xx = x + r * d, *gy = dy + r * d;
    S *oo = o + r * d;
    const C dd = (C)d;
    C mean, rstd;
    plan_cu_row_stats<S, C>(xx, d, ln, (C)eps, &mean, &rstd);
    C sg = 0, sgx = 0;
    for (int64_t i = 0; i < d; i++) {
      C g = T::load(gy[i]) * T::load(w[i]);
      sg += g;
      sgx += g * (T::load(xx[i]) - mean) * rstd;
    }
    C mg = ln ? sg / dd : (C)0, mgx = sgx / dd;
    for (int64_t i = 0; i < d; i++) {
      C xh = (T::load(xx[i]) - mean) * rstd;
      oo[i] = T::store(plan_cu_grid(
          rstd * (T::load(gy[i]) * T::load(w[i]) - mg - xh * mgx), bits));
    }
  }
};

/* ---- reductions, loss ---------------------------------------------------- */

/* reduce_sum / reduce_mean (divisor >= 0): one output element each, its
 * inputs summed in increasing order of the reduced indices. */
template <class S> struct plan_k_reduce {
  const S *x;
  S *o;
  plan_cu_red rd;
  double divisor;
  int bits;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    int64_t base = 0, q = i;
    for (int d = rd.nkeep - 1; d >= 0; d--) {
      base += (q % rd.kdims[d]) * rd.kst[d];
      q /= rd.kdims[d];
    }
    C s = 0;
    int64_t idx[PLAN_MAX_RANK] = {0}, p = base;
    for (int64_t t = 0; t < rd.rcount; t++) {
      s += T::load(x[p]);
      for (int d = rd.nred - 1; d >= 0; d--) { /* next reduced index */
        p += rd.rst[d];
        if (++idx[d] < rd.rdims[d])
          break;
        p -= rd.rst[d] * rd.rdims[d];
        idx[d] = 0;
      }
    }
    if (divisor >= 0)
      s = plan_cu_quot(s, (C)divisor, bits);
    o[i] = T::store(s);
  }
};

/* cross_entropy, first pass: each row's loss logsumexp - logit[label], on
 * the grid of multiples of count's odd part in exact mode, into loss
 * (compute type). */
template <class S> struct plan_k_ce_rows {
  const S *lg;
  const int64_t *labels;
  typename plan_st<S>::C *loss;
  int64_t c, count; /* count: the global batch count the mean divides by */
  int bits;
  PLAN_HD void operator()(int64_t r) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    const S *row = lg + r * c;
    C m = T::load(row[0]);
    for (int64_t i = 1; i < c; i++) {
      C v = T::load(row[i]);
      if (v > m)
        m = v;
    }
    C s = 0;
    for (int64_t i = 0; i < c; i++)
      s += plan_m_exp(T::load(row[i]) - m);
    s = s < 1 ? (C)1 : s;
    loss[r] = plan_cu_grid_div(m + plan_m_log(s) - T::load(row[labels[r]]),
                               bits, count);
  }
};

/* cross_entropy, second pass (one index): the rows' losses summed in
 * order and divided by the global batch count. */
template <class S> struct plan_k_ce_total {
  const typename plan_st<S>::C *loss;
  S *o;
  int64_t rows;
  double count;
  int bits;
  PLAN_HD void operator()(int64_t) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    C total = 0;
    for (int64_t r = 0; r < rows; r++)
      total += loss[r];
    o[0] = T::store(plan_cu_quot(total, (C)count, bits));
  }
};

/* cross_entropy_grad: dy[0] / count (softmax(row) - onehot(label)), one
 * row each. */
template <class S> struct plan_k_ce_grad {
  const S *dy, *lg;
  const int64_t *labels;
  S *o;
  int64_t c;
  double count;
  int bits;
  PLAN_HD void operator()(int64_t r) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    C g = plan_cu_quot(T::load(dy[0]), (C)count, bits);
    const S *row = lg + r * c;
    S *oo = o + r * c;
    C m = T::load(row[0]);
    for (int64_t i = 1; i < c; i++) {
      C v = T::load(row[i]);
      if (v > m)
        m = v;
    }
    C s = 0;
    for (int64_t i = 0; i < c; i++)
      s += plan_m_exp(T::load(row[i]) - m);
    s = s < 1 ? (C)1 : s;
    for (int64_t i = 0; i < c; i++) {
      C p = plan_m_exp(T::load(row[i]) - m) / s;
      oo[i] = T::store(
          plan_cu_grid((p - (i == labels[r] ? (C)1 : (C)0)) * g, bits));
    }
  }
};

/* embedding_grad: output element (r, j) of the block sums dy[s, j] over
 * the samples s whose id names row r, in sample order (the host lists
 * them: start[r]..start[r+1] in sample[]). */
template <class S> struct plan_k_emb_grad {
  const S *dy;
  const int64_t *start, *sample;
  S *o;
  int64_t d;
  PLAN_HD void operator()(int64_t i) const {
    typedef plan_st<S> T;
    typedef typename T::C C;
    int64_t r = i / d, j = i % d;
    C s = 0;
    for (int64_t t = start[r]; t < start[r + 1]; t++)
      s += T::load(dy[sample[t] * d + j]);
    o[i] = T::store(s);
  }
};

/* linear's bias broadcast over the rows: the gemm then adds x w^T. */
template <class S> struct plan_k_bias {
  const S *bias;
  S *o;
  int64_t n;
  PLAN_HD void operator()(int64_t i) const {
    o[i] = bias[i % n];
  }
};

/* ---- data movement (E: an unsigned type of the element's size) ----------- */

/* out[i] = in[the offset of i under bc's operand 0]: permute, transpose,
 * expand and (rank 1, stride 1) a copy. */
template <class E> struct plan_k_gather {
  const E *in;
  E *o;
  plan_cu_bc bc;
  PLAN_HD void operator()(int64_t i) const {
    int64_t off[3];
    plan_cu_bc_at(bc, i, off);
    o[i] = in[off[0]];
  }
};

/* where: mask (1 where the condition is nonzero) selects a, else b. */
template <class E> struct plan_k_where {
  const unsigned char *mask;
  const E *a, *b;
  E *o;
  plan_cu_bc bc;
  PLAN_HD void operator()(int64_t i) const {
    int64_t off[3];
    plan_cu_bc_at(bc, i, off);
    o[i] = mask[off[0]] ? a[off[1]] : b[off[2]];
  }
};

/* repeat_interleave of [outer, n, inner] along the middle dim. */
template <class E> struct plan_k_repeat {
  const E *in;
  E *o;
  int64_t n, rep, inner;
  PLAN_HD void operator()(int64_t i) const {
    int64_t orow = n * rep * inner, q = i / orow, w = i % orow;
    int64_t jj = w / inner, t = w % inner;
    o[i] = in[q * n * inner + (jj / rep) * inner + t];
  }
};

/* One part of a split (to_whole false) or concat: the part is
 * [outer, prow] and sits at column `at` of the whole's [outer, wrow]. */
template <class E> struct plan_k_part {
  E *whole, *part;
  int64_t prow, wrow, at;
  bool to_whole;
  PLAN_HD void operator()(int64_t i) const {
    int64_t q = i / prow, w = i % prow, x = q * wrow + at + w;
    if (to_whole)
      whole[x] = part[i];
    else
      part[i] = whole[x];
  }
};

/* embedding: row ids[s] - lo of the table block, or zeros (all-zero bits
 * are 0 in every float format) when another rank holds it. */
template <class E> struct plan_k_embedding {
  const E *tab;
  const int64_t *ids;
  E *o;
  int64_t rows, lo, d;
  PLAN_HD void operator()(int64_t i) const {
    int64_t s = i / d, j = i % d, r = ids[s] - lo;
    o[i] = r >= 0 && r < rows ? tab[r * d + j] : (E)0;
  }
};

#endif
