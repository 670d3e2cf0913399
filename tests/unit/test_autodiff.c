/* Autodiff (libplan/src/autodiff*.c) and the reference gradients
 * (verifier/train_ref.c), checked against central finite differences in
 * f64.
 *
 * Every op kind of the registry gets tiny programs: the op (with params for
 * its float inputs) followed by a fixed random projection to a scalar loss,
 * loss = sum(y * r) over the tensors the case names (r an input of y's
 * shape), or the op's own scalar when it is one. The gradient of every param
 * by autodiff (the training program run on the CPU runner in f64) is
 * compared with (L(p + h) - L(p - h)) / 2h, h = 1e-6, element by element:
 * the error relative to max(|autodiff|, |fd|, 1e-2 * the largest gradient
 * element of that param) must stay under 1e-6. The shapes cover
 * broadcasting, transposes, batch dims and uneven sizes. A transformer
 * block (embedding to cross-entropy) and the example
 * examples/transformer-block.plan.yaml with a loss added are checked end
 * to end.
 *
 * relu's kink: the seed is advanced until no relu input lies within 1e-4 of
 * 0, so a difference never straddles it. Integer inputs (ids, labels) get
 * no gradient. The table printed at the end is the largest relative error
 * of each op kind over its cases.
 *
 * Also: the names, sums, copies, zeros and map of a training program; the
 * refusals (no loss, a second derivative, a name clash, a name too long);
 * every training program written out reads back with the same hash; and
 * the block's training program under data parallelism (outputs derived by
 * each op's factor rule) validates and verifies equal, its param gradients
 * all-reduced. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/autodiff.h"
#include "libplan/plan.h"
#include "libplan/program.h"
#include "libplan/verify.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "train_ref.h"
#include "base/util.h"

#define FD_H 1e-6
#define FD_TOL 1e-6

/* ---- the cases ----------------------------------------------------------- */

typedef struct adcase {
  const char *label;
  const char *tensors; /* flow mapping entries */
  const char *ops;     /* flow sequence entries */
  const char *proj;    /* space-separated tensors the loss projects; NULL:
                          "y" */
} adcase;

/* shorthand for declarations */
#define P(n, s) n ": {shape: " s ", role: param}"
#define IN(n, s) n ": {shape: " s "}"
#define IDS(n, s, r) n ": {shape: " s ", dtype: i64, range: [0, " r "]}"

static const adcase cases[] = {
    /* matmul: plain, uneven, every transpose, batched (2-D rhs folded, or
     * not with ta), broadcast batch, a 2-D lhs under a batched rhs, rank 4 */
    {"matmul", P("a", "[4, 6]") ", " P("b", "[6, 8]"),
     "{name: op, op: matmul, in: [a, b], out: y}", NULL},
    {"matmul.uneven", P("a", "[3, 5]") ", " P("b", "[5, 3]"),
     "{name: op, op: matmul, in: [a, b], out: y}", NULL},
    {"matmul.ta", P("a", "[6, 4]") ", " P("b", "[6, 8]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_a: true}}",
     NULL},
    {"matmul.tb", P("a", "[4, 6]") ", " P("b", "[8, 6]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_b: true}}",
     NULL},
    {"matmul.tab", P("a", "[5, 3]") ", " P("b", "[3, 5]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_a: true, "
     "transpose_b: true}}",
     NULL},
    {"matmul.batched.rhs2d", P("a", "[2, 4, 6]") ", " P("b", "[6, 8]"),
     "{name: op, op: matmul, in: [a, b], out: y}", NULL},
    {"matmul.batched.rhs2d.tb", P("a", "[2, 3, 5]") ", " P("b", "[4, 5]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_b: true}}",
     NULL},
    {"matmul.batched.rhs2d.ta", P("a", "[2, 6, 4]") ", " P("b", "[6, 3]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_a: true}}",
     NULL},
    {"matmul.batched", P("a", "[2, 4, 6]") ", " P("b", "[2, 6, 4]"),
     "{name: op, op: matmul, in: [a, b], out: y}", NULL},
    {"matmul.bcastbatch", P("a", "[1, 4, 6]") ", " P("b", "[2, 6, 3]"),
     "{name: op, op: matmul, in: [a, b], out: y}", NULL},
    {"matmul.lhs2d", P("a", "[4, 6]") ", " P("b", "[2, 6, 3]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_b: false}}",
     NULL},
    {"matmul.rank4.tab", P("a", "[2, 3, 5, 4]") ", " P("b", "[3, 2, 5]"),
     "{name: op, op: matmul, in: [a, b], out: y, attrs: {transpose_a: true, "
     "transpose_b: true}}",
     NULL},
    /* linear: with and without bias, batched, a rank-1 x */
    {"linear", P("x", "[4, 6]") ", " P("w", "[8, 6]"),
     "{name: op, op: linear, in: [x, w], out: y}", NULL},
    {"linear.bias",
     P("x", "[4, 6]") ", " P("w", "[8, 6]") ", " P("bias", "[8]"),
     "{name: op, op: linear, in: [x, w, bias], out: y}", NULL},
    {"linear.batched.uneven",
     P("x", "[2, 3, 5]") ", " P("w", "[3, 5]") ", " P("bias", "[3]"),
     "{name: op, op: linear, in: [x, w, bias], out: y}", NULL},
    {"linear.rank1", P("x", "[4]") ", " P("w", "[3, 4]") ", " P("bias", "[3]"),
     "{name: op, op: linear, in: [x, w, bias], out: y}", NULL},
    /* elementwise, with broadcasting either way */
    {"add", P("a", "[4, 6]") ", " P("b", "[4, 6]"),
     "{name: op, op: add, in: [a, b], out: y}", NULL},
    {"add.bcast", P("a", "[4, 6]") ", " P("b", "[6]"),
     "{name: op, op: add, in: [a, b], out: y}", NULL},
    {"add.bcast.both", P("a", "[4, 1]") ", " P("b", "[1, 6]"),
     "{name: op, op: add, in: [a, b], out: y}", NULL},
    {"add.scalar", P("a", "[]") ", " P("b", "[3, 5]"),
     "{name: op, op: add, in: [a, b], out: y}", NULL},
    {"sub.uneven", P("a", "[3, 5]") ", " P("b", "[3, 5]"),
     "{name: op, op: sub, in: [a, b], out: y}", NULL},
    {"sub.bcast", P("a", "[4, 6]") ", " P("b", "[4, 1]"),
     "{name: op, op: sub, in: [a, b], out: y}", NULL},
    {"sub.bcast.lhs", P("a", "[6]") ", " P("b", "[2, 3, 6]"),
     "{name: op, op: sub, in: [a, b], out: y}", NULL},
    {"mul", P("a", "[4, 6]") ", " P("b", "[4, 6]"),
     "{name: op, op: mul, in: [a, b], out: y}", NULL},
    {"mul.bcast.uneven", P("a", "[3, 5]") ", " P("b", "[5]"),
     "{name: op, op: mul, in: [a, b], out: y}", NULL},
    {"mul.square", P("a", "[3, 5]"), "{name: op, op: mul, in: [a, a], out: y}",
     NULL},
    /* div: the divisor is exp(b), away from zero */
    {"div", P("a", "[4, 6]") ", " P("b", "[4, 6]"),
     "{name: pos, op: exp, in: [b], out: eb}, "
     "{name: op, op: div, in: [a, eb], out: y}",
     NULL},
    {"div.bcast.uneven", P("a", "[3, 5]") ", " P("b", "[1, 5]"),
     "{name: pos, op: exp, in: [b], out: eb}, "
     "{name: op, op: div, in: [a, eb], out: y}",
     NULL},
    {"div.bcast.lhs", P("a", "[5]") ", " P("b", "[3, 5]"),
     "{name: pos, op: exp, in: [b], out: eb}, "
     "{name: op, op: div, in: [a, eb], out: y}",
     NULL},
    {"scale", P("x", "[4, 6]"),
     "{name: op, op: scale, in: [x], out: y, attrs: {factor: 0.5}}", NULL},
    {"scale.neg.uneven", P("x", "[3, 5]"),
     "{name: op, op: scale, in: [x], out: y, attrs: {factor: -1.5}}", NULL},
    {"scale.inexact", P("x", "[4, 6]"),
     "{name: op, op: scale, in: [x], out: y, attrs: {factor: 0.1}}", NULL},
    /* unary */
    {"relu", P("x", "[4, 6]"), "{name: op, op: relu, in: [x], out: y}", NULL},
    {"relu.rank3.uneven", P("x", "[2, 3, 5]"),
     "{name: op, op: relu, in: [x], out: y}", NULL},
    {"gelu.uneven", P("x", "[3, 5]"), "{name: op, op: gelu, in: [x], out: y}",
     NULL},
    {"gelu.tanh", P("x", "[4, 6]"),
     "{name: op, op: gelu, in: [x], out: y, attrs: {approximate: tanh}}", NULL},
    {"silu", P("x", "[4, 6]"), "{name: op, op: silu, in: [x], out: y}", NULL},
    {"tanh.uneven", P("x", "[3, 5]"), "{name: op, op: tanh, in: [x], out: y}",
     NULL},
    {"exp", P("x", "[4, 6]"), "{name: op, op: exp, in: [x], out: y}", NULL},
    /* softmax on the last, the first and a middle dim */
    {"softmax", P("x", "[4, 6]"), "{name: op, op: softmax, in: [x], out: y}",
     NULL},
    {"softmax.dim0.uneven", P("x", "[3, 5]"),
     "{name: op, op: softmax, in: [x], out: y, attrs: {dim: 0}}", NULL},
    {"softmax.rank3", P("x", "[2, 3, 5]"),
     "{name: op, op: softmax, in: [x], out: y, attrs: {dim: 1}}", NULL},
    /* norms: with and without bias, batched, rank 1 */
    {"layernorm", P("x", "[4, 6]") ", " P("w", "[6]") ", " P("bias", "[6]"),
     "{name: op, op: layernorm, in: [x, w, bias], out: y}", NULL},
    {"layernorm.nobias.uneven", P("x", "[3, 5]") ", " P("w", "[5]"),
     "{name: op, op: layernorm, in: [x, w], out: y, attrs: {eps: 0.01}}", NULL},
    {"layernorm.rank3",
     P("x", "[2, 3, 4]") ", " P("w", "[4]") ", " P("bias", "[4]"),
     "{name: op, op: layernorm, in: [x, w, bias], out: y}", NULL},
    {"layernorm.rank1", P("x", "[5]") ", " P("w", "[5]") ", " P("bias", "[5]"),
     "{name: op, op: layernorm, in: [x, w, bias], out: y}", NULL},
    {"rmsnorm", P("x", "[4, 6]") ", " P("w", "[6]"),
     "{name: op, op: rmsnorm, in: [x, w], out: y}", NULL},
    {"rmsnorm.rank3.uneven", P("x", "[2, 3, 5]") ", " P("w", "[5]"),
     "{name: op, op: rmsnorm, in: [x, w], out: y}", NULL},
    {"rmsnorm.rank1", P("x", "[5]") ", " P("w", "[5]"),
     "{name: op, op: rmsnorm, in: [x, w], out: y, attrs: {eps: 0.001}}", NULL},
    /* embedding: repeated ids sum their rows */
    {"embedding", P("table", "[8, 4]") ", " IDS("ids", "[2, 3]", "8"),
     "{name: op, op: embedding, in: [table, ids], out: y}", NULL},
    {"embedding.repeats", P("table", "[3, 5]") ", " IDS("ids", "[7]", "3"),
     "{name: op, op: embedding, in: [table, ids], out: y}", NULL},
    /* data movement */
    {"transpose", P("x", "[4, 6]"),
     "{name: op, op: transpose, in: [x], out: y}", NULL},
    {"transpose.rank3", P("x", "[2, 3, 5]"),
     "{name: op, op: transpose, in: [x], out: y, attrs: {dims: [0, 2]}}", NULL},
    {"transpose.rank4", P("x", "[2, 3, 2, 5]"),
     "{name: op, op: transpose, in: [x], out: y, attrs: {dims: [3, 1]}}", NULL},
    {"permute", P("x", "[2, 3, 4]"),
     "{name: op, op: permute, in: [x], out: y, attrs: {perm: [2, 0, 1]}}",
     NULL},
    {"permute.rank4", P("x", "[2, 3, 4, 5]"),
     "{name: op, op: permute, in: [x], out: y, attrs: {perm: [1, 3, 0, 2]}}",
     NULL},
    {"reshape.merge", P("x", "[4, 6]"),
     "{name: op, op: reshape, in: [x], out: y, attrs: {shape: [24]}}", NULL},
    {"reshape.split.uneven", P("x", "[15]"),
     "{name: op, op: reshape, in: [x], out: y, attrs: {shape: [3, -1]}}", NULL},
    {"reshape.regroup", P("x", "[2, 3, 4]"),
     "{name: op, op: reshape, in: [x], out: y, attrs: {shape: [4, 6]}}", NULL},
    {"reduce_sum", P("x", "[4, 6]"),
     "{name: op, op: reduce_sum, in: [x], out: y, attrs: {dims: [1]}}", NULL},
    {"reduce_sum.keepdim.uneven", P("x", "[3, 5]"),
     "{name: op, op: reduce_sum, in: [x], out: y, attrs: {dims: [0], "
     "keepdim: true}}",
     NULL},
    {"reduce_sum.two", P("x", "[2, 3, 4]"),
     "{name: op, op: reduce_sum, in: [x], out: y, attrs: {dims: [0, -1]}}",
     NULL},
    {"reduce_sum.all", P("x", "[3, 5]"),
     "{name: op, op: reduce_sum, in: [x], out: y, attrs: {dims: [0, 1]}}",
     NULL},
    {"reduce_mean", P("x", "[4, 6]"),
     "{name: op, op: reduce_mean, in: [x], out: y, attrs: {dims: [1]}}", NULL},
    {"reduce_mean.keepdim.uneven", P("x", "[2, 3, 5]"),
     "{name: op, op: reduce_mean, in: [x], out: y, attrs: {dims: [0, 2], "
     "keepdim: true}}",
     NULL},
    /* split: every part used, and a part nothing uses (its gradient is
     * zeros) */
    {"split", P("x", "[4, 6]"),
     "{name: op, op: split, in: [x], out: [y0, y1], attrs: {sizes: [2, 4]}}",
     "y0 y1"},
    {"split.unused.uneven", P("x", "[5, 3]"),
     "{name: op, op: split, in: [x], out: [y0, y1, y2], attrs: {dim: 0, "
     "sizes: [2, 1, 2]}}",
     "y0 y2"},
    /* concat: two params, three inputs one of which takes no gradient */
    {"concat", P("a", "[4, 2]") ", " P("b", "[4, 4]"),
     "{name: op, op: concat, in: [a, b], out: y}", NULL},
    {"concat.dim0.three",
     P("a", "[1, 3]") ", " IN("b", "[2, 3]") ", " P("c", "[2, 3]"),
     "{name: op, op: concat, in: [a, b, c], out: y, attrs: {dim: 0}}", NULL},
    {"cross_entropy", P("logits", "[4, 6]") ", " IDS("labels", "[4]", "6"),
     "{name: op, op: cross_entropy, in: [logits, labels], out: y}", NULL},
    {"cross_entropy.rank3.uneven",
     P("logits", "[2, 3, 5]") ", " IDS("labels", "[2, 3]", "5"),
     "{name: op, op: cross_entropy, in: [logits, labels], out: y}", NULL},
    {"expand", P("x", "[1, 6]"),
     "{name: op, op: expand, in: [x], out: y, attrs: {shape: [4, 6]}}", NULL},
    {"expand.lead.uneven", P("x", "[5]"),
     "{name: op, op: expand, in: [x], out: y, attrs: {shape: [2, 3, 5]}}",
     NULL},
    {"expand.middle", P("x", "[2, 1, 3]"),
     "{name: op, op: expand, in: [x], out: y, attrs: {shape: [2, 4, 3]}}",
     NULL},
    /* gradient ops: with respect to the output gradient (and a norm's
     * weight); the point x is an input that takes no gradient */
    {"relu_grad", P("a", "[4, 6]") ", " IN("x", "[4, 6]"),
     "{name: op, op: relu_grad, in: [a, x], out: y}", NULL},
    {"gelu_grad", P("a", "[3, 5]") ", " IN("x", "[3, 5]"),
     "{name: op, op: gelu_grad, in: [a, x], out: y}", NULL},
    {"gelu_grad.tanh", P("a", "[4, 6]") ", " IN("x", "[4, 6]"),
     "{name: op, op: gelu_grad, in: [a, x], out: y, attrs: {approximate: "
     "tanh}}",
     NULL},
    {"silu_grad", P("a", "[4, 6]") ", " IN("x", "[4, 6]"),
     "{name: op, op: silu_grad, in: [a, x], out: y}", NULL},
    {"layernorm_grad",
     P("a", "[4, 6]") ", " IN("x", "[4, 6]") ", " P("w", "[6]"),
     "{name: op, op: layernorm_grad, in: [a, x, w], out: y}", NULL},
    {"rmsnorm_grad.rank3",
     P("a", "[2, 3, 5]") ", " IN("x", "[2, 3, 5]") ", " P("w", "[5]"),
     "{name: op, op: rmsnorm_grad, in: [a, x, w], out: y}", NULL},
    {"rmsnorm_grad.rank1", P("a", "[5]") ", " IN("x", "[5]") ", " P("w", "[5]"),
     "{name: op, op: rmsnorm_grad, in: [a, x, w], out: y}", NULL},
    {"embedding_grad", P("a", "[2, 3, 4]") ", " IDS("ids", "[2, 3]", "5"),
     "{name: op, op: embedding_grad, in: [a, ids], out: y, attrs: {rows: 5}}",
     NULL},
    {"cross_entropy_grad",
     P("a", "[]") ", " IN("logits", "[4, 6]") ", " IDS("labels", "[4]", "6"),
     "{name: op, op: cross_entropy_grad, in: [a, logits, labels], out: y}",
     NULL},
    /* where: an integer mask (no gradient), broadcasting every way, one
     * tensor on both sides, and a float mask that is a param (its gradient
     * is zeros) */
    {"where",
     IDS("m", "[4, 6]", "2") ", " P("a", "[4, 6]") ", " P("b", "[4, 6]"),
     "{name: op, op: where, in: [m, a, b], out: y}", NULL},
    {"where.bcast.uneven",
     IDS("m", "[3, 1]", "2") ", " P("a", "[5]") ", " P("b", "[2, 1, 5]"),
     "{name: op, op: where, in: [m, a, b], out: y}", NULL},
    {"where.scalar",
     IDS("m", "[3, 5]", "2") ", " P("a", "[3, 5]") ", " P("b", "[]"),
     "{name: op, op: where, in: [m, a, b], out: y}", NULL},
    {"where.same", IDS("m", "[4, 6]", "2") ", " P("a", "[4, 6]"),
     "{name: op, op: where, in: [m, a, a], out: y}", NULL},
    {"where.fmask", P("m", "[4, 6]") ", " P("a", "[4, 6]") ", " IN("b", "[6]"),
     "{name: op, op: where, in: [m, a, b], out: y}", NULL},
    /* repeat_interleave: grouped-query attention's heads, the last dim,
     * repeats 1, and rank 8 (the split of the gradient merges dims) */
    {"repeat_interleave.heads", P("k", "[2, 2, 3, 4]"),
     "{name: op, op: repeat_interleave, in: [k], out: y, attrs: {repeats: 2, "
     "dim: 1}}",
     NULL},
    {"repeat_interleave.last.uneven", P("x", "[3, 5]"),
     "{name: op, op: repeat_interleave, in: [x], out: y, attrs: {repeats: 3, "
     "dim: -1}}",
     NULL},
    {"repeat_interleave.one", P("x", "[3, 5]"),
     "{name: op, op: repeat_interleave, in: [x], out: y, attrs: {repeats: 1, "
     "dim: 0}}",
     NULL},
    {"repeat_interleave.rank8", P("x", "[2, 1, 1, 1, 1, 2, 3, 1]"),
     "{name: op, op: repeat_interleave, in: [x], out: y, attrs: {repeats: 2, "
     "dim: 5}}",
     NULL},
    /* topk (the values; the indices take none), gather and scatter_add with
     * repeated indices, and the mixture-of-experts ops, weighted or not,
     * with a capacity that drops some choices */
    {"topk", P("x", "[3, 6]"),
     "{name: op, op: topk, in: [x], out: [y, i], attrs: {k: 2}}", NULL},
    {"topk.all.rank1", P("x", "[5]"),
     "{name: op, op: topk, in: [x], out: [y, i], attrs: {k: 5}}", NULL},
    {"gather", P("x", "[3, 6]") ", " IDS("i", "[3, 4]", "6"),
     "{name: op, op: gather, in: [x, i], out: y}", NULL},
    {"scatter_add", P("s", "[3, 4]") ", " IDS("i", "[3, 4]", "6"),
     "{name: op, op: scatter_add, in: [s, i], out: y, attrs: {size: 6}}", NULL},
    {"moe_dispatch",
     P("x", "[2, 5, 3]") ", " IDS("i", "[2, 5, 2]", "4") ", " P("w",
                                                                "[2, 5, 2]"),
     "{name: op, op: moe_dispatch, in: [x, i, w], out: y, attrs: {experts: 4, "
     "capacity: 3}}",
     NULL},
    {"moe_dispatch.unweighted",
     P("x", "[2, 5, 3]") ", " IDS("i", "[2, 5, 2]", "4"),
     "{name: op, op: moe_dispatch, in: [x, i], out: y, attrs: {experts: 4, "
     "capacity: 2}}",
     NULL},
    {"moe_combine",
     P("s", "[4, 2, 3, 3]") ", " IDS("i", "[2, 5, 2]", "4") ", " P("w",
                                                                   "[2, 5, 2]"),
     "{name: op, op: moe_combine, in: [s, i, w], out: y}", NULL},
    {"moe_combine.unweighted",
     P("s", "[4, 2, 2, 3]") ", " IDS("i", "[2, 5, 2]", "4"),
     "{name: op, op: moe_combine, in: [s, i], out: y}", NULL},
    {"moe_weights_grad",
     P("a", "[2, 5, 3]") ", " P("b", "[4, 2, 3, 3]") ", " IDS("i", "[2, 5, 2]",
                                                              "4"),
     "{name: op, op: moe_weights_grad, in: [a, b, i], out: y}", NULL},
    /* traced models' ops; rsqrt of exp(x), away from zero */
    {"sigmoid", P("x", "[4, 6]"), "{name: op, op: sigmoid, in: [x], out: y}",
     NULL},
    {"rsqrt", P("x", "[3, 5]"),
     "{name: pos, op: exp, in: [x], out: ex}, "
     "{name: op, op: rsqrt, in: [ex], out: y}",
     NULL},
    {"add_scalar", P("x", "[3, 5]"),
     "{name: op, op: add_scalar, in: [x], out: y, attrs: {value: -1.5}}", NULL},
    /* attention: plain, grouped-query heads with a causal mask, an integer
     * mask (no gradient) and a float mask (its gradient summed where it
     * broadcasts) */
    {"attention",
     P("q", "[2, 2, 3, 4]") ", " P("k", "[2, 2, 5, 4]") ", " P("v",
                                                               "[2, 2, 5, 3]"),
     "{name: op, op: attention, in: [q, k, v], out: y}", NULL},
    {"attention.gqa.causal",
     P("q", "[1, 4, 4, 2]") ", " P("k", "[1, 2, 4, 2]") ", " P("v",
                                                               "[1, 2, 4, 3]"),
     "{name: op, op: attention, in: [q, k, v], out: y, attrs: {causal: true, "
     "scale: 0.5}}",
     NULL},
    {"attention.mask",
     P("q", "[2, 2, 3, 2]") ", " P("k", "[2, 2, 4, 2]") ", " P(
         "v", "[2, 2, 4, 2]") ", " IDS("m", "[3, 4]", "2"),
     "{name: op, op: attention, in: [q, k, v, m], out: y}", NULL},
    {"attention.fmask",
     P("q", "[2, 2, 3, 2]") ", " P("k", "[2, 1, 4, 2]") ", " P(
         "v", "[2, 1, 4, 2]") ", " P("m", "[2, 1, 3, 4]"),
     "{name: op, op: attention, in: [q, k, v, m], out: y}", NULL},
};

#define NCASES (sizeof cases / sizeof cases[0])

/* ---- building programs --------------------------------------------------- */

static char *fmt(const char *f, ...) PLAN_PRINTF(1, 2);
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

static plan_program *load_text(const char *text, const char *name) {
  plan_program *p = NULL;
  int rc = plan_program_load_buffer(&p, text, strlen(text), name);
  if (rc) {
    char buf[512];
    fail_msg("%s: %s\n%s", name, plan_error_format(buf, sizeof buf), text);
  }
  return p;
}

/* The case's program with loss = sum over its projected tensors of
 * sum(y * r_y). */
static plan_program *case_program(const adcase *c) {
  char *base = fmt("libplan: \"0.1\"\nprogram:\n  tensors: {%s}\n  ops: [%s]\n",
                   c->tensors, c->ops);
  plan_program *p0 = load_text(base, c->label);
  free(base);
  plan_buf t, o;
  plan_buf_init(&t);
  plan_buf_init(&o);
  plan_buf_puts(&t, c->tensors);
  plan_buf_puts(&o, c->ops);
  char names[128];
  snprintf(names, sizeof names, "%s", c->proj ? c->proj : "y");
  int k = 0;
  for (char *sv = NULL, *y = strtok_r(names, " ", &sv); y;
       y = strtok_r(NULL, " ", &sv), k++) {
    int ti = plan_program_tensor_find(p0, y);
    assert_true(ti >= 0);
    int64_t dims[8];
    int r = plan_program_tensor_shape(p0, ti, dims, 8);
    plan_buf_printf(&t, ", proj/%s: {shape: [", y);
    for (int d = 0; d < r; d++)
      plan_buf_printf(&t, "%s%lld", d ? ", " : "", (long long)dims[d]);
    plan_buf_puts(&t, "]}");
    plan_buf_printf(&o,
                    ", {name: loss.mul%d, op: mul, in: [%s, proj/%s], "
                    "out: loss/m%d}",
                    k, y, y, k);
    if (r > 0) {
      plan_buf_printf(&o,
                      ", {name: loss.sum%d, op: reduce_sum, in: "
                      "[loss/m%d], out: loss/s%d, attrs: {dims: [",
                      k, k, k);
      for (int d = 0; d < r; d++)
        plan_buf_printf(&o, "%s%d", d ? ", " : "", d);
      plan_buf_puts(&o, "]}}");
    } else {
      plan_buf_printf(&o,
                      ", {name: loss.sum%d, op: scale, in: [loss/m%d], "
                      "out: loss/s%d}",
                      k, k, k);
    }
    if (k > 0) {
      char prev[32];
      snprintf(prev, sizeof prev, k == 1 ? "loss/s0" : "loss/t%d", k - 1);
      plan_buf_printf(&o,
                      ", {name: loss.add%d, op: add, in: [%s, loss/s%d], "
                      "out: loss/t%d}",
                      k, prev, k, k);
    }
  }
  plan_program_free(p0);
  /* the last sum is the loss */
  char *text;
  if (k == 1) {
    text = fmt("libplan: \"0.1\"\nprogram:\n  tensors: {%s}\n  ops: [%s]\n"
               "  loss: loss/s0\n",
               plan_buf_cstr(&t), plan_buf_cstr(&o));
  } else {
    text = fmt("libplan: \"0.1\"\nprogram:\n  tensors: {%s}\n  ops: [%s]\n"
               "  loss: loss/t%d\n",
               plan_buf_cstr(&t), plan_buf_cstr(&o), k - 1);
  }
  plan_buf_free(&t);
  plan_buf_free(&o);
  plan_program *p = load_text(text, c->label);
  free(text);
  return p;
}

/* ---- finite differences -------------------------------------------------- */

static plan_ref_options f64_opts(uint64_t seed) {
  plan_ref_options o = PLAN_REF_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  o.seed = seed;
  o.dtype = PLAN_F64;
  return o;
}

/* Whether some relu input lies within 1e-4 of its kink. */
static bool near_kink(const plan_program *p, plan_ref_run *r) {
  for (int i = 0; i < plan_program_op_count(p); i++) {
    if (strcmp(plan_program_op_kind(p, i), "relu"))
      continue;
    int x = plan_program_op_input(p, i, 0);
    const double *v = plan_ref_run_values(r, x);
    for (int64_t k = 0; k < plan_ref_run_count(r, x); k++)
      if (fabs(v[k]) < 1e-4)
        return true;
  }
  return false;
}

static double loss_of(const plan_program *p, plan_ref_run *r) {
  assert_int_equal(plan_ref_run_exec(r), PLAN_OK);
  return plan_ref_run_values(r, p->loss)[0];
}

/* Largest relative error of autodiff against central differences over
 * every param element of p. */
static double fd_check(const plan_program *p, const char *label) {
  uint64_t seed = 0;
  plan_ref_run *r = NULL;
  for (;; seed++) {
    plan_ref_options o = f64_opts(seed);
    assert_int_equal(plan_ref_run_new(&r, p, &o), PLAN_OK);
    assert_int_equal(plan_ref_run_exec(r), PLAN_OK);
    if (!near_kink(p, r))
      break;
    plan_ref_run_free(r);
    assert_true(seed < 100);
  }
  plan_ref_options o = f64_opts(seed);
  plan_ref_grads *g = NULL;
  if (plan_ref_grads_compute(&g, p, &o)) {
    char buf[512];
    fail_msg("%s: %s", label, plan_error_format(buf, sizeof buf));
  }
  assert_true(fabs(g->loss - loss_of(p, r)) <= 1e-12 * (1 + fabs(g->loss)));
  double worst = 0;
  for (int i = 0; i < g->nparams; i++) {
    int t = g->param[i];
    double *v = plan_ref_run_values(r, t);
    const double *ad = plan_ref_grads_values(g, i);
    int64_t n = plan_ref_run_count(r, t);
    double *fd = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(fd);
    double big = 0;
    for (int64_t k = 0; k < n; k++) {
      double keep = v[k];
      v[k] = keep + FD_H;
      double lp = loss_of(p, r);
      v[k] = keep - FD_H;
      double lm = loss_of(p, r);
      v[k] = keep;
      fd[k] = (lp - lm) / (2 * FD_H);
      big = fmax(big, fmax(fabs(fd[k]), fabs(ad[k])));
    }
    for (int64_t k = 0; k < n; k++) {
      double den =
          fmax(fmax(fabs(ad[k]), fabs(fd[k])), fmax(1e-2 * big, 1e-12));
      double e = fabs(ad[k] - fd[k]) / den;
      if (e > FD_TOL)
        print_message("%s: d loss / d %s[%lld]: autodiff %.12g, finite "
                      "difference %.12g (relative error %.3g)\n",
                      label, p->tensors[t].name, (long long)k, ad[k], fd[k], e);
      worst = fmax(worst, e);
    }
    free(fd);
  }
  plan_ref_grads_free(g);
  plan_ref_run_free(r);
  return worst;
}

/* The training program written and read back hashes the same as built, and
 * its gradients are where the names say. */
static void check_roundtrip(const plan_program *p, const char *label) {
  plan_program *t = NULL;
  assert_int_equal(plan_program_grad(&t, p, NULL), PLAN_OK);
  char *text = NULL;
  assert_int_equal(plan_program_write_buffer(&text, NULL, t), PLAN_OK);
  plan_program *back = load_text(text, label);
  plan_hash h1, h2;
  assert_int_equal(plan_program_hash(&h1, t), PLAN_OK);
  assert_int_equal(plan_program_hash(&h2, back), PLAN_OK);
  if (memcmp(&h1, &h2, sizeof h1))
    fail_msg("%s: the training program reads back with another hash:\n%s",
             label, text);
  for (int i = 0; i < plan_program_tensor_count(p); i++) {
    const char *role = plan_program_tensor_role(p, i);
    const char *dt = plan_program_tensor_dtype(p, i);
    char name[300];
    snprintf(name, sizeof name, "grad/%s", plan_program_tensor_name(p, i));
    int g = plan_program_tensor_find(t, name);
    bool param = !strcmp(role, "param") && dt[0] != 'i';
    /* params have one; integers never */
    if (param)
      assert_true(g >= 0 && !strcmp(plan_program_tensor_role(t, g), "output"));
    if (dt[0] == 'i')
      assert_true(g < 0);
  }
  free(text);
  plan_program_free(back);
  plan_program_free(t);
}

/* ---- tests --------------------------------------------------------------- */

static int kind_of_label(const char *label) {
  char k[64];
  size_t n = strcspn(label, ".");
  snprintf(k, sizeof k, "%.*s", (int)n, label);
  return plan_op_kind_from_name(k);
}

static void test_every_op_fd(void **state) {
  (void)state;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double worst[PLAN_OP_COUNT];
  int ncase[PLAN_OP_COUNT] = {0};
  for (int k = 0; k < PLAN_OP_COUNT; k++)
    worst[k] = 0;
  for (size_t i = 0; i < NCASES; i++) {
    plan_program *p = case_program(&cases[i]);
    double e = fd_check(p, cases[i].label);
    check_roundtrip(p, cases[i].label);
    int k = kind_of_label(cases[i].label);
    assert_true(k >= 0);
    worst[k] = fmax(worst[k], e);
    ncase[k]++;
    if (e > FD_TOL)
      fail_msg("%s: relative error %.3g over %g", cases[i].label, e, FD_TOL);
    plan_program_free(p);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  print_message("finite differences (h %g), largest relative error per op:\n",
                FD_H);
  for (int k = 0; k < PLAN_OP_COUNT; k++) {
    if (!ncase[k])
      fail_msg("op %s has no finite-difference case", plan_op_kind_name(k));
    print_message("  %-20s %2d cases  %.2e\n", plan_op_kind_name(k), ncase[k],
                  worst[k]);
  }
  print_message("%zu cases in %.2f s\n", NCASES,
                (double)(t1.tv_sec - t0.tv_sec) +
                    1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

/* A transformer block from token ids to cross-entropy: embedding,
 * layernorm, fused QKV (linear with bias, reshape, permute, split), causal
 * attention (matmul with transpose, scale, add of a const mask, softmax,
 * matmul), merge, row projection, residuals, rmsnorm, an MLP with tanh
 * gelu, a final layernorm and a vocabulary head; every param used, x used
 * twice (the residuals). */
static const char *const block_text =
    "libplan: \"1.0\"\n"
    "program:\n"
    "  name: block\n"
    "  tensors:\n"
    "    ids: {shape: [2, 4], dtype: i64, range: [0, 11]}\n"
    "    labels: {shape: [2, 4], dtype: i64, range: [0, 11]}\n"
    "    emb: {shape: [11, 8], role: param}\n"
    "    ln1_w: {shape: [8], role: param}\n"
    "    ln1_b: {shape: [8], role: param}\n"
    "    w_qkv: {shape: [24, 8], role: param}\n"
    "    b_qkv: {shape: [24], role: param}\n"
    "    mask: {shape: [4, 4], role: const, init: causal_mask}\n"
    "    w_o: {shape: [8, 8], role: param}\n"
    "    rms_w: {shape: [8], role: param}\n"
    "    w_fc1: {shape: [16, 8], role: param}\n"
    "    b_fc1: {shape: [16], role: param}\n"
    "    w_fc2: {shape: [16, 8], role: param}\n"
    "    lnf_w: {shape: [8], role: param}\n"
    "    lnf_b: {shape: [8], role: param}\n"
    "    head: {shape: [11, 8], role: param}\n"
    "  ops:\n"
    "    - {name: embed, op: embedding, in: [emb, ids], out: x}\n"
    "    - {name: ln1, op: layernorm, in: [x, ln1_w, ln1_b], out: h1}\n"
    "    - {name: attn.qkv, op: linear, in: [h1, w_qkv, b_qkv], out: qkv}\n"
    "    - {name: attn.heads, op: reshape, in: [qkv], out: qkv4, attrs: "
    "{shape: [2, 4, 2, 12]}}\n"
    "    - {name: attn.perm_in, op: permute, in: [qkv4], out: qkvh, attrs: "
    "{perm: [0, 2, 1, 3]}}\n"
    "    - {name: attn.split, op: split, in: [qkvh], out: [q, k, v], attrs: "
    "{sizes: [4, 4, 4]}}\n"
    "    - {name: attn.scores, op: matmul, in: [q, k], out: s, attrs: "
    "{transpose_b: true}}\n"
    "    - {name: attn.scale, op: scale, in: [s], out: ss, attrs: {factor: "
    "0.5}}\n"
    "    - {name: attn.mask, op: add, in: [ss, mask], out: sm}\n"
    "    - {name: attn.softmax, op: softmax, in: [sm], out: probs}\n"
    "    - {name: attn.context, op: matmul, in: [probs, v], out: ctx}\n"
    "    - {name: attn.perm_out, op: permute, in: [ctx], out: ctx_t, attrs: "
    "{perm: [0, 2, 1, 3]}}\n"
    "    - {name: attn.merge, op: reshape, in: [ctx_t], out: ctx_m, attrs: "
    "{shape: [2, 4, 8]}}\n"
    "    - {name: attn.proj, op: matmul, in: [ctx_m, w_o], out: attn_out}\n"
    "    - {name: res1, op: add, in: [x, attn_out], out: r1}\n"
    "    - {name: norm2, op: rmsnorm, in: [r1, rms_w], out: h2}\n"
    "    - {name: mlp.fc1, op: linear, in: [h2, w_fc1, b_fc1], out: f1}\n"
    "    - {name: mlp.act, op: gelu, in: [f1], out: f1a, attrs: "
    "{approximate: tanh}}\n"
    "    - {name: mlp.fc2, op: matmul, in: [f1a, w_fc2], out: f2}\n"
    "    - {name: res2, op: add, in: [r1, f2], out: y}\n"
    "    - {name: lnf, op: layernorm, in: [y, lnf_w, lnf_b], out: yf}\n"
    "    - {name: lm_head, op: linear, in: [yf, head], out: logits}\n"
    "    - {name: loss, op: cross_entropy, in: [logits, labels], out: loss}\n"
    "  loss: loss\n";

static void test_transformer_block(void **state) {
  (void)state;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  plan_program *p = load_text(block_text, "block");
  double e = fd_check(p, "block");
  check_roundtrip(p, "block");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  print_message("transformer block: relative error %.2e (%.2f s)\n", e,
                (double)(t1.tv_sec - t0.tv_sec) +
                    1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  assert_true(e <= FD_TOL);
  plan_program_free(p);
}

/* examples/transformer-block.plan.yaml's program with a loss added (a
 * projection of its output y), written out and read back. */
static void test_example_block(void **state) {
  (void)state;
  plan_plan *pl = NULL;
  assert_int_equal(plan_load(&pl, "examples/transformer-block.plan.yaml"),
                   PLAN_OK);
  char *text = NULL;
  assert_int_equal(plan_program_write_buffer(&text, NULL, plan_get_program(pl)),
                   PLAN_OK);
  plan_free(pl);
  /* the projection joins the declarations and the ops; the loss replaces
   * the outputs */
  char *tens = strstr(text, "  tensors:\n");
  char *outs = strstr(text, "  outputs:");
  assert_non_null(tens);
  assert_non_null(outs);
  *outs = '\0';
  tens += strlen("  tensors:\n");
  char *full =
      fmt("%.*s    proj: {shape: [4, 8, 16]}\n%s"
          "    - {name: loss.mul, op: mul, in: [y, proj], out: ly}\n"
          "    - {name: loss.sum, op: reduce_sum, in: [ly], out: loss, attrs: "
          "{dims: [0, 1, 2]}}\n"
          "  loss: loss\n",
          (int)(tens - text), text, tens);
  free(text);
  plan_program *p = load_text(full, "transformer-block");
  free(full);
  double e = fd_check(p, "transformer-block");
  check_roundtrip(p, "transformer-block");
  print_message("examples/transformer-block.plan.yaml: relative error %.2e\n",
                e);
  assert_true(e <= FD_TOL);
  plan_program_free(p);
}

/* ---- structure ----------------------------------------------------------- */

static plan_program *grad_of_text(const char *text, plan_grad_map **map) {
  plan_program *f = load_text(text, "mlp");
  plan_program *t = NULL;
  if (plan_autodiff(&t, map, f, NULL)) {
    char buf[512];
    fail_msg("%s", plan_error_format(buf, sizeof buf));
  }
  plan_program_free(f);
  return t;
}

static const char *const mlp_text =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [4, 6]}\n"
    "    w1: {shape: [6, 8], role: param}\n"
    "    w2: {shape: [8, 3], role: param}\n"
    "    unused: {shape: [5], role: param}\n"
    "  ops:\n"
    "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: act, op: relu, in: [h], out: a}\n"
    "    - {name: fc2, op: matmul, in: [a, w2], out: y}\n"
    "    - {name: skip, op: reduce_sum, in: [a], out: as, attrs: {dims: [1]}}\n"
    "    - {name: l1, op: reduce_sum, in: [y], out: ly, attrs: {dims: [0, "
    "1]}}\n"
    "    - {name: l2, op: reduce_sum, in: [as], out: la, attrs: {dims: [0]}}\n"
    "    - {name: loss, op: add, in: [ly, la], out: loss}\n"
    "  loss: loss\n";

static int find_op(const plan_program *p, const char *name) {
  int i = plan_program_op_find(p, name);
  if (i < 0)
    fail_msg("no op '%s'", name);
  return i;
}

/* Names, accumulation, zeros for an unused param, the map, the outputs. */
static void test_structure(void **state) {
  (void)state;
  plan_grad_map *m = NULL;
  plan_program *t = grad_of_text(mlp_text, &m);
  /* a is read by fc2 and skip: two contributions summed into grad/a */
  int acc = find_op(t, "grad/a/acc1");
  assert_string_equal(plan_program_op_kind(t, acc), "add");
  assert_string_equal(
      plan_program_tensor_name(t, plan_program_op_output(t, acc, 0)), "grad/a");
  assert_int_equal(m->origin[acc], -1);
  assert_int_equal(m->accum_of[acc], plan_program_tensor_find(t, "a"));
  /* backward ops are grad/<op>/<part>, and know their forward op */
  int dw2 = find_op(t, "grad/fc2/db");
  assert_int_equal(m->origin[dw2], find_op(t, "fc2"));
  assert_int_equal(m->part[dw2], PLAN_GRAD_WEIGHT);
  assert_int_equal(m->part[find_op(t, "grad/fc2/da")], PLAN_GRAD_INPUT);
  assert_int_equal(m->part[find_op(t, "grad/act/dx")], PLAN_GRAD_INPUT);
  assert_int_equal(m->part[find_op(t, "grad/fc1/db")], PLAN_GRAD_WEIGHT);
  assert_int_equal(m->part[find_op(t, "fc1")], PLAN_GRAD_FORWARD);
  /* x is an input: no gradient, so fc1 has no da */
  assert_int_equal(plan_program_op_find(t, "grad/fc1/da"), -1);
  assert_int_equal(plan_program_tensor_find(t, "grad/x"), -1);
  /* the unused param's gradient is a copy of a const of zeros */
  int gu = plan_program_tensor_find(t, "grad/unused");
  assert_true(gu >= 0);
  assert_string_equal(plan_program_tensor_role(t, gu), "output");
  int zu = plan_program_tensor_find(t, "grad/unused/zeros");
  assert_int_equal(t->tensors[zu].recipe, PLAN_RECIPE_ZEROS);
  assert_string_equal(plan_program_tensor_role(t, zu), "const");
  assert_int_equal(plan_program_op_input(t, find_op(t, "grad/unused/copy"), 0),
                   zu);
  /* the seed */
  assert_string_equal(plan_program_tensor_name(t, m->seed), "grad/loss");
  assert_int_equal(t->tensors[m->seed].recipe, PLAN_RECIPE_ONES);
  /* forward indices kept; outputs: the loss, then the gradients in tensor
   * order */
  assert_int_equal(m->nfwd_ops, 7);
  assert_string_equal(plan_program_op_name(t, 0), "fc1");
  assert_int_equal(t->noutputs, 4);
  assert_string_equal(plan_program_tensor_name(t, t->outputs[0]), "loss");
  assert_string_equal(plan_program_tensor_name(t, t->outputs[1]), "grad/w1");
  assert_string_equal(plan_program_tensor_name(t, t->outputs[2]), "grad/w2");
  assert_string_equal(plan_program_tensor_name(t, t->outputs[3]),
                      "grad/unused");
  assert_int_equal(m->grad[plan_program_tensor_find(t, "w1")],
                   plan_program_tensor_find(t, "grad/w1"));
  /* the public lookup agrees with the map: every param's, the seed, and an
   * activation's where it has a tensor of its own; none for the input */
  int nparams = 0;
  for (int i = 0; i < m->nfwd_tensors; i++) {
    int g = plan_program_grad_tensor(t, i);
    if (t->tensors[i].role == PLAN_ROLE_PARAM) {
      assert_true(g >= 0);
      nparams++;
    }
    if (g >= 0 && i != t->loss)
      assert_int_equal(g, m->grad[i]);
  }
  assert_int_equal(nparams, 3);
  assert_int_equal(plan_program_grad_tensor(t, t->loss), m->seed);
  assert_int_equal(
      plan_program_grad_tensor(t, plan_program_tensor_find(t, "a")),
      plan_program_tensor_find(t, "grad/a"));
  assert_int_equal(
      plan_program_grad_tensor(t, plan_program_tensor_find(t, "x")), -1);
  assert_int_equal(plan_program_grad_tensor(t, m->seed), -1);
  assert_int_equal(plan_program_grad_tensor(t, -1), -1);
  assert_int_equal(plan_program_grad_tensor(t, t->ntensors), -1);
  assert_int_equal(plan_program_grad_tensor(NULL, 0), -1);
  plan_grad_map_free(m);
  plan_program_free(t);
}

/* A param whose gradient is another tensor's (added as it is) is copied
 * under its own name; inputs get gradients when asked. */
static void test_copy_and_inputs(void **state) {
  (void)state;
  const char *text = "libplan: \"0.1\"\n"
                     "program:\n"
                     "  tensors:\n"
                     "    x: {shape: [3]}\n"
                     "    b: {shape: [3], role: param}\n"
                     "  ops:\n"
                     "    - {name: shift, op: add, in: [x, b], out: y}\n"
                     "    - {name: l, op: reduce_sum, in: [y], out: loss, "
                     "attrs: {dims: [0]}}\n"
                     "  loss: loss\n";
  plan_program *f = load_text(text, "shift");
  plan_program *t = NULL;
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_OK);
  /* grad/b = grad/y exactly: a scale by 1 names it */
  int cp = find_op(t, "grad/b/copy");
  assert_string_equal(plan_program_op_kind(t, cp), "scale");
  assert_int_equal(plan_program_tensor_find(t, "grad/x"), -1);
  plan_program_free(t);
  plan_grad_options o = PLAN_GRAD_OPTIONS_INIT;
  o.inputs = 1;
  assert_int_equal(plan_program_grad(&t, f, &o), PLAN_OK);
  assert_true(plan_program_tensor_find(t, "grad/x") >= 0);
  plan_program_free(t);
  o.version = 99;
  assert_int_equal(plan_program_grad(&t, f, &o), PLAN_EUSAGE);
  assert_null(t);
  assert_int_equal(plan_program_grad(NULL, f, NULL), PLAN_EUSAGE);
  plan_program_free(f);
}

/* Refusals, each with a position: no loss; a second derivative; a name the
 * training program needs taken by the program. */
static void test_errors(void **state) {
  (void)state;
  plan_program *t = NULL;
  const char *noloss = "libplan: \"0.1\"\nprogram:\n"
                       "  tensors: {x: {shape: [3], role: param}}\n"
                       "  ops: [{name: e, op: exp, in: [x], out: y}]\n";
  plan_program *f = load_text(noloss, "noloss");
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_EINVALID);
  assert_null(t);
  assert_non_null(strstr(plan_error_last()->message, "no loss"));
  plan_program_free(f);

  const char *second =
      "libplan: \"0.1\"\nprogram:\n"
      "  tensors: {a: {shape: [3]}, x: {shape: [3], role: param}}\n"
      "  ops:\n"
      "    - {name: g, op: gelu_grad, in: [a, x], out: y}\n"
      "    - {name: l, op: reduce_sum, in: [y], out: loss, attrs: {dims: "
      "[0]}}\n"
      "  loss: loss\n";
  f = load_text(second, "second");
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_EINVALID);
  const plan_error *e = plan_error_last();
  assert_non_null(strstr(e->message, "second derivative"));
  assert_non_null(strstr(e->message, "op 'g' (gelu_grad)"));
  assert_int_equal(e->line, 5);
  plan_program_free(f);

  const char *clash =
      "libplan: \"0.1\"\nprogram:\n"
      "  tensors: {x: {shape: [3], role: param}}\n"
      "  ops:\n"
      "    - {name: e, op: exp, in: [x], out: grad/x}\n"
      "    - {name: l, op: reduce_sum, in: [grad/x], out: loss, attrs: "
      "{dims: [0]}}\n"
      "  loss: loss\n";
  f = load_text(clash, "clash");
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_EINVALID);
  e = plan_error_last();
  assert_non_null(strstr(e->message, "'grad/x'"));
  assert_int_equal(e->line, 5);
  plan_program_free(f);

  /* an op name of 250 bytes makes backward names too long to read back */
  char longname[251];
  memset(longname, 'o', 250);
  longname[250] = '\0';
  char *text = fmt("libplan: \"0.1\"\nprogram:\n"
                   "  tensors: {x: {shape: [3], role: param}}\n"
                   "  ops:\n"
                   "    - {name: %s, op: exp, in: [x], out: y}\n"
                   "    - {name: l, op: reduce_sum, in: [y], out: loss, "
                   "attrs: {dims: [0]}}\n"
                   "  loss: loss\n",
                   longname);
  f = load_text(text, "long");
  free(text);
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_EINVALID);
  e = plan_error_last();
  assert_non_null(strstr(e->message, "longer than names may be (256)"));
  assert_int_equal(e->line, 5);
  plan_program_free(f);
}

/* Exact mode runs the training program too (f64 on the dyadic grid), and
 * its gradients are close to float mode's. */
static void test_exact_mode(void **state) {
  (void)state;
  plan_program *p = load_text(block_text, "block");
  plan_ref_options o = PLAN_REF_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_EXACT;
  plan_ref_grads *g = NULL;
  assert_int_equal(plan_ref_grads_compute(&g, p, &o), PLAN_OK);
  assert_int_equal(g->nparams, 13);
  for (int i = 0; i < g->nparams; i++) {
    const double *v = plan_ref_grads_values(g, i);
    for (int64_t k = 0; k < plan_ref_run_count(g->run, g->grad[i]); k++)
      assert_true(isfinite(v[k]));
  }
  plan_ref_grads_free(g);
  plan_program_free(p);
}

/* The backward ops follow the same factor rules as the forward ones: the
 * training program of the block under data parallelism (the samples of ids
 * and labels split over dp, params replicated, every op's outputs derived
 * by its rule) validates and verifies equal, the param gradients partial
 * sums over dp all-reduced by lowering (the gradient sync of
 * data-parallel training). */
static void test_data_parallel(void **state) {
  (void)state;
  plan_program *f = load_text(block_text, "block");
  plan_program *t = NULL;
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_OK);
  char *text = NULL;
  assert_int_equal(plan_program_write_buffer(&text, NULL, t), PLAN_OK);
  plan_buf b;
  plan_buf_init(&b);
  plan_buf_puts(&b, text);
  plan_buf_puts(&b, "mesh:\n  axes: [dp=2]\n  devices: iota\nplacements:\n");
  plan_placement *pl = calloc((size_t)t->ntensors, sizeof *pl);
  assert_non_null(pl);
  char pb[PLAN_PLACEMENT_STRLEN];
  for (int i = 0; i < t->ntensors; i++) {
    plan_placement_replicated(&pl[i], 1);
    const plan_tensor *x = &t->tensors[i];
    if (x->producer < 0 && x->role == PLAN_ROLE_INPUT) {
      pl[i].ax[0].kind = PLAN_PL_S;
      pl[i].ax[0].dim = 0;
      plan_buf_printf(&b, "  %s: %s\n", x->name,
                      plan_placement_format(&pl[i], pb));
    }
  }
  plan_buf_puts(&b, "strategies:\n");
  int64_t sizes[1] = {2};
  const char *axes[1] = {"dp"};
  int npartial = 0;
  for (int i = 0; i < t->nops; i++) {
    const plan_op *op = &t->ops[i];
    plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
    plan_placement pin[PLAN_MAX_OPERANDS], pout[PLAN_MAX_OPERANDS];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    for (int j = 0; j < op->nin + op->nout; j++) {
      const plan_tensor *x =
          &t->tensors[j < op->nin ? op->in[j] : op->out[j - op->nin]];
      plan_shape *sh = j < op->nin ? &in[j] : &out[j - op->nin];
      sh->rank = x->rank;
      memcpy(sh->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
      sh->dtype = x->dtype;
      if (j < op->nin)
        pin[j] = pl[op->in[j]];
    }
    plan_rule r;
    char err[256];
    if (plan_op_rule(&r, op->kind, in, op->nin, out, op->nout, op->attrs, err,
                     sizeof err) ||
        plan_rule_infer_out(&r, op->kind, op->attrs, pin, sizes, axes, pout,
                            err, sizeof err))
      fail_msg("op '%s': %s", op->name, err);
    plan_buf_printf(&b, "  \"%s\": {in: [", op->name);
    for (int j = 0; j < op->nin; j++)
      plan_buf_printf(&b, "%s%s", j ? ", " : "",
                      plan_placement_format(&pin[j], pb));
    plan_buf_puts(&b, "], out: [");
    for (int k = 0; k < op->nout; k++) {
      pl[op->out[k]] = pout[k];
      plan_buf_printf(&b, "%s%s", k ? ", " : "",
                      plan_placement_format(&pout[k], pb));
    }
    plan_buf_puts(&b, "]}\n");
  }
  for (int i = 0; i < t->noutputs; i++)
    npartial += pl[t->outputs[i]].ax[0].kind == PLAN_PL_P;
  /* the loss and every param gradient are sums over the samples */
  assert_int_equal(npartial, t->noutputs);
  free(pl);
  plan_plan *plan = NULL;
  const char *yaml = plan_buf_cstr(&b);
  if (plan_load_buffer(&plan, yaml, strlen(yaml), "dp.plan.yaml", NULL)) {
    char buf[512];
    fail_msg("%s\n%s", plan_error_format(buf, sizeof buf), yaml);
  }
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, plan), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    plan_verify_report *rep = NULL;
    assert_int_equal(plan_verify(&rep, plan, &o), PLAN_OK);
    if (!plan_verify_report_equal(rep))
      fail_msg("%s", plan_verify_report_text(rep));
    assert_true(plan_verify_report_collectives(rep, "all_reduce") > 0);
    plan_verify_report_free(rep);
  }
  plan_free(plan);
  plan_buf_free(&b);
  free(text);
  plan_program_free(t);
  plan_program_free(f);
}

/* x- keys of the program, its tensors and ops stay in the training
 * program. */
static void test_ext_keys(void **state) {
  (void)state;
  const char *text =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  x-owner: {team: a, ids: [1, 2]}\n"
      "  tensors:\n"
      "    w: {shape: [3], role: param, x-init: normal}\n"
      "  ops:\n"
      "    - {name: e, op: exp, in: [w], out: y, x-note: fused}\n"
      "    - {name: l, op: reduce_sum, in: [y], out: loss, attrs: {dims: "
      "[0]}}\n"
      "  loss: loss\n";
  plan_program *f = load_text(text, "ext");
  plan_program *t = NULL;
  assert_int_equal(plan_program_grad(&t, f, NULL), PLAN_OK);
  plan_program_free(f);
  char *out = NULL;
  assert_int_equal(plan_program_write_buffer(&out, NULL, t), PLAN_OK);
  assert_non_null(strstr(out, "x-owner"));
  assert_non_null(strstr(out, "x-init: normal"));
  assert_non_null(strstr(out, "x-note: fused"));
  free(out);
  plan_program_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_copy_and_inputs),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_every_op_fd),
      cmocka_unit_test(test_transformer_block),
      cmocka_unit_test(test_example_block),
      cmocka_unit_test(test_exact_mode),
      cmocka_unit_test(test_data_parallel),
      cmocka_unit_test(test_ext_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
