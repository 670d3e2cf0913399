/* Internal to the CPU kernels: the typed numeric kernels (kernels_typed.c,
 * one instance per compute type from the template kernels_tmpl.h) that the
 * dispatcher (kernels.c) calls after it has checked shapes, dtypes and
 * attributes. The typed kernels trust their arguments.
 *
 * `bits` is the exact-mode grid (2^-bits) or -1 outside exact mode. */
#ifndef LIBPLAN_RUNNERS_CPU_KERNELS_INT_H
#define LIBPLAN_RUNNERS_CPU_KERNELS_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

/* Element i of an F32 or F64 view, as a double, and stored from one: the
 * kernels that compute in double whatever the dtype (routing, attention). */
static inline double plan_kview_get(const plan_view *v, int64_t i) {
  return v->dtype == PLAN_F64 ? ((const double *)v->data)[i]
                              : (double)((const float *)v->data)[i];
}

static inline void plan_kview_set(plan_view *v, int64_t i, double x) {
  if (v->dtype == PLAN_F64)
    ((double *)v->data)[i] = x;
  else
    ((float *)v->data)[i] = (float)x;
}

/* An elementwise binary op with numpy broadcasting: the output has `rank`
 * dims; sa / sb are the inputs' element strides per output dim (0 where the
 * input broadcasts along it). */
typedef struct plan_kbcast {
  int rank;
  int64_t count; /* output elements */
  int64_t dims[PLAN_MAX_RANK];
  int64_t sa[PLAN_MAX_RANK], sb[PLAN_MAX_RANK];
} plan_kbcast;

/* A batched matmul C[b..] = op(A[b..]) op(B[b..]): C is [batch.., m, n]
 * contiguous; sa / sb are the inputs' strides per batch dim in elements (0
 * where the input broadcasts). fold: one gemm of (batch * m) rows (A not
 * transposed, contiguous over the batch; B one matrix). */
typedef struct plan_kmm {
  int brank;
  int64_t bcount; /* product of bdims */
  int64_t bdims[PLAN_MAX_RANK];
  int64_t sa[PLAN_MAX_RANK], sb[PLAN_MAX_RANK];
  int64_t m, n, k;
  bool ta, tb, fold;
} plan_kmm;

/* A reduction: the input has `rank` dims; ostride[d] is the output's stride
 * for input dim d (0 where d is reduced). */
typedef struct plan_kreduce {
  int rank;
  int64_t count, out_count;
  int64_t dims[PLAN_MAX_RANK];
  int64_t ostride[PLAN_MAX_RANK];
  double divisor; /* < 0: a sum; else the mean's divisor */
} plan_kreduce;

typedef struct plan_typed_kernels {
  /* kind: PLAN_OP_ADD, SUB, MUL or DIV */
  void (*binary)(int kind, const void *a, const void *b, void *out,
                 const plan_kbcast *bc, int bits);
  /* kind: SCALE (param: the factor), RELU, GELU (param 1: tanh
   * approximation), SILU, TANH, EXP */
  void (*unary)(int kind, const void *x, void *out, int64_t n, double param,
                int bits);
  /* softmax over the middle dim of [outer, n, inner] */
  void (*softmax)(const void *x, void *out, int64_t outer, int64_t n,
                  int64_t inner, int bits);
  /* kind: LAYERNORM or RMSNORM over the last dim of [rows, d]; b may be
   * NULL */
  void (*norm)(int kind, const void *x, const void *w, const void *b, void *out,
               int64_t rows, int64_t d, double eps, int bits);
  void (*reduce)(const void *x, void *out, const plan_kreduce *rd, int bits);
  /* logits [rows, c], labels checked in [0, c); out: one element */
  void (*cross_entropy)(const void *logits, const int64_t *labels, int64_t rows,
                        int64_t c, double count, void *out, int bits);
  void (*matmul)(const plan_kmm *mm, const void *a, const void *b, void *c);
  /* out[rows, n] = x[rows, k] w[n, k]^T (+ bias[n]); bias may be NULL */
  void (*linear)(const void *x, const void *w, const void *bias, void *out,
                 int64_t rows, int64_t n, int64_t k);
  /* kind: RELU_GRAD, GELU_GRAD (param 1: tanh approximation), SILU_GRAD:
   * out = dy * f'(x), elementwise over n */
  void (*act_grad)(int kind, const void *dy, const void *x, void *out,
                   int64_t n, double param, int bits);
  /* kind: LAYERNORM_GRAD or RMSNORM_GRAD: the input gradient over the last
   * dim of [rows, d] */
  void (*norm_grad)(int kind, const void *dy, const void *x, const void *w,
                    void *out, int64_t rows, int64_t d, double eps, int bits);
  /* out[rows, d] (table rows [lo, lo + rows)) = the dy rows [n, d] summed
   * by id; ids outside the block are skipped */
  void (*embedding_grad)(const void *dy, const int64_t *ids, int64_t n,
                         int64_t lo, int64_t rows, int64_t d, void *out);
  /* out[rows, c] = dy[0] (softmax(logits) - onehot(labels)) / count */
  void (*cross_entropy_grad)(const void *dy, const void *logits,
                             const int64_t *labels, int64_t rows, int64_t c,
                             double count, void *out, int bits);
} plan_typed_kernels;

/* Exact mode: whether x has at most 24 significant bits (0, 2^k, 0.75 and 3
 * do; 0.1 does not). A product by such a factor stays a short dyadic when
 * it is exact; a product by a long factor is long even when exact. */
static inline bool plan_short_dyadic(double x) {
  if (x == 0)
    return true;
  int e;
  double s = ldexp(frexp(fabs(x), &e), 24);
  return s == floor(s);
}

extern const plan_typed_kernels plan_kernels_f64;
extern const plan_typed_kernels plan_kernels_f32;

#endif
