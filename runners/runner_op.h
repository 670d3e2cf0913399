/* The op contract of the runner interface (runner.h): one local op of the
 * registry (libplan/ops.h) on rank-local tensor blocks, as every runner's
 * run_op computes it, and the checks every runner makes before it runs
 * one, so that a bad op fails alike everywhere.
 *
 * Every op runs on a rank's block of each tensor (its shard), so an op
 * whose result depends on global sizes (reduce_mean, cross_entropy) or
 * positions (embedding over a row-sharded table) reads them from the view's
 * global_dims and offset. The rank's partial results are combined later by
 * collectives; the local semantics of each op are chosen so that summing the
 * partials of P(sum) outputs gives the global result:
 *
 *  - elementwise (with numpy broadcasting), unary, matmul (batched, with
 *    broadcasting and transposes), linear, softmax, layernorm, rmsnorm,
 *    transpose, permute: the plain op on the local blocks;
 *  - reshape, split, concat: the plain op on the local blocks with the
 *    outputs' local dims given by the caller (the attributes name global
 *    sizes; the caller guarantees the local shapes are consistent);
 *  - reduce_sum: the local sum over the reduced dims;
 *  - reduce_mean: the local sum divided by the GLOBAL size of the reduced dims
 *    (in[0].global_dims), so the ranks' partials sum to the global mean;
 *  - embedding: the table block holds rows [offset[0], offset[0] + dims[0])
 *    of the vocabulary; ids are global; an id outside the local rows gives a
 *    zero row (the masked partial);
 *  - cross_entropy: sum over the local batch elements of
 *    (logsumexp(logits) - logits[label]) divided by the GLOBAL batch count
 *    (the product of in[1].global_dims); the classes are whole on the rank
 *    (a step whose logits split the classes, the vocab-parallel loss, never
 *    reaches a runner: the verifier combines the ranks' maxima, sums of
 *    exponentials and label logits itself, verifier/verify_vocab.c);
 *  - expand: the local block of the input broadcast to the output's local
 *    dims (the attribute names the global shape, like reshape);
 *  - relu_grad, gelu_grad, silu_grad, layernorm_grad, rmsnorm_grad: the
 *    plain op on the local blocks (the normalised dim whole);
 *  - embedding_grad: the output block holds rows [offset[0], offset[0] +
 *    dims[0]) of the table (global row count: out.global_dims[0]); each
 *    local dy row is added to the row its id names when the block holds
 *    it, so the ranks' blocks of a sample-sharded dy are partial sums;
 *  - cross_entropy_grad: dy (softmax - onehot) over the local rows, divided
 *    by the GLOBAL batch count (the product of in[2].global_dims); the
 *    classes whole, as for cross_entropy;
 *  - where: the plain op on the local blocks (broadcast together); the
 *    condition may have any dtype, nonzero selecting input 1;
 *  - repeat_interleave: the plain op on the local block (its attribute
 *    names no global size).
 *  - topk: the plain op on the local rows (the last dim whole);
 *  - gather: x's block holds [offset, offset + n) of its last dim (global
 *    size x.global_dims[-1]); indices are global; one outside the block
 *    gives 0 (the masked partial, as embedding's);
 *  - scatter_add: the output block holds [offset, offset + n) of the last
 *    dim (the attribute names the global size); an index outside the block
 *    adds nothing here;
 *  - moe_dispatch, moe_combine, moe_weights_grad: the slots' block ([e, g,
 *    c, h]: out of moe_dispatch, input 0 of moe_combine, input 1 of
 *    moe_weights_grad) holds experts [offset[0], offset[0] + dims[0]) of
 *    global_dims[0] (moe_dispatch's attribute names the global count);
 *    expert ids are global; a group's slots are assigned over its whole
 *    token dim (token-major, then choice; past the capacity dropped), so
 *    the token and choice dims are whole on the rank. Choices of experts
 *    outside the block contribute nothing here: moe_combine's and
 *    moe_weights_grad's ranks give partial sums.
 *  - sigmoid, rsqrt, add_scalar: the plain op on the local block;
 *  - attention: each local query row (batch, head, query: global positions
 *    offset + index) against the whole keys of its kv head (global head /
 *    (global h / global hk)); the mask block and the causal cut are read
 *    by global position, so a block sharded along the queries, heads or
 *    batch computes its rows as the whole tensor does.
 *
 * Dtypes: BF16 and F16 values are stored as float and every result is
 * rounded to the format (plan_round_bf16 / plan_round_f16, base/numeric.h).
 * Integer tensors (I64 and I32, both stored as int64_t) are embedding ids,
 * cross_entropy labels, where's masks and the routing ops' indices
 * (topk's second output is I64), and may go through the data-movement ops
 * (where and repeat_interleave among them).
 *
 * Exact mode (verifier `exact`, an F64 mode): the result of an op that is
 * not exactly representable is rounded to the dyadic grid 2^-dyadic_bits
 * (plan_dyadic_round, base/numeric.h), so that every later sum is exact in
 * any order:
 *  - gelu, silu, tanh, exp, sigmoid, rsqrt, add_scalar, attention,
 *    softmax, layernorm, rmsnorm, and the gradient
 *    ops gelu_grad, silu_grad, layernorm_grad, rmsnorm_grad and
 *    cross_entropy_grad: every output (relu_grad, embedding_grad,
 *    expand, where, repeat_interleave and the routing ops are exact: they
 *    copy, or multiply and add grid values as matmul does);
 *  - the per-sample losses of cross_entropy, before they are summed;
 *  - div, reduce_mean and cross_entropy's division by the global count: an
 *    element whose quotient is inexact in double;
 *  - scale: a factor of more than 24 significant bits (0.1) is rounded once
 *    to 11 significant bits, so the op stays linear over partial sums; then,
 *    as for 2^-k, 0.75 or 3, an element whose product is inexact.
 * An exact result of few bits (x / 4, a scale by 0.5, a mean over 8
 * elements) is kept as is, even off the grid: rounding it would break the
 * sum of partials (round(a/4) + round(b/4) != round((a+b)/4)), and a short
 * dyadic value keeps later sums exact just as well.
 * Exact mode rounds F64 outputs only; other dtypes ignore it. */
#ifndef LIBPLAN_RUNNERS_RUNNER_OP_H
#define LIBPLAN_RUNNERS_RUNNER_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libplan/ops.h"

/* C linkage: the CUDA runner's sources (C++) include this header. */
#ifdef __cplusplus
extern "C" {
#endif

/* A rank-local tensor block, row-major and contiguous. */
typedef struct plan_view {
  plan_dtype dtype; /* F64, F32, BF16, F16 stored as float; I64, I32 stored
                       as int64_t */
  int rank;
  int64_t dims[PLAN_MAX_RANK];        /* local extents */
  int64_t global_dims[PLAN_MAX_RANK]; /* the global tensor's dims; a 0 entry
                                         where dims[d] > 0 means "unknown:
                                         the same as dims[d]" */
  int64_t offset[PLAN_MAX_RANK];      /* where the block starts globally */
  void *data; /* double* for F64; float* for F32/BF16/F16; int64_t* for
                 integers; may be NULL for an empty block */
} plan_view;

typedef struct plan_kernel_ctx {
  bool exact;      /* exact mode: see above */
  int dyadic_bits; /* the grid 2^-dyadic_bits; 0 selects the default, 10 */
} plan_kernel_ctx;

#define PLAN_KERNEL_DYADIC_BITS 10

/* The checks a runner makes before it runs op `kind` (plan_op_kind) with
 * attribute values `attrs` (the kind's schema order, as in ops.c; NULL:
 * the schema defaults) on in[0..nin) into out[0..nout): the operand
 * arrays, the exact-mode grid (*bits: 2^-bits in exact mode, else -1),
 * every view, and the op's local shapes (the registry's inference, or the
 * local-block rules of reshape, expand, split, embedding_grad, scatter_add
 * and moe_dispatch), and the routing ops' indices against the dims they
 * index and their blocks against their global dims
 * (plan_kernel_route_check). Every runner calls it, so a bad op fails
 * alike everywhere.
 *
 * Returns PLAN_OK; PLAN_EINVALID when the shapes, dtypes or attributes do
 * not fit the op (or an index is out of range); PLAN_EUSAGE for a bad
 * argument. On failure a one-line reason is written into err (size errsz;
 * err may be NULL). */
int plan_kernel_check(int kind, const plan_attr_val *attrs, const plan_view *in,
                      int nin, const plan_view *out, int nout,
                      const plan_kernel_ctx *ctx, int *bits, char *err,
                      size_t errsz);

/* The routing ops' (topk, gather, scatter_add, moe_*) index and block
 * checks; PLAN_OK for any other kind. */
int plan_kernel_route_check(int kind, const plan_view *in, int nin,
                            const plan_view *out, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
