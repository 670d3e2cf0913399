/* libplan: the op registry, read-only. The op kinds a program's ops and a
 * lowered program's op steps name, their attribute schemas and values,
 * the tensor dtypes, and the registry's shape inference on whole tensors
 * and on the blocks one rank holds. A runner (a backend that executes
 * lowered programs) is written against this header: it keeps its own
 * kernel table indexed by plan_op_kind, reads an op step's attributes as
 * plan_attr_val in the kind's schema order, and checks the local shapes
 * with plan_op_check_local before it runs one.
 *
 * The kind names (plan_op_kind_name, space.h) are stable; the numbers are
 * this library's: a new op is a new kind before PLAN_OP_COUNT, and a
 * runner built against another release checks the count (runners/runner.h,
 * the plugin ABI key). Nothing here allocates or keeps state. */
#ifndef LIBPLAN_OPS_H
#define LIBPLAN_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "space.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes --------------------------------------------------------------
 * The element types of tensors, numbered in this order (the numbers are
 * part of the ABI). Floats run as F64, F32, BF16 or F16 (the last two
 * stored as float and rounded to their format); I64 and I32 are stored as
 * int64_t by the runners. */

typedef enum plan_dtype {
  PLAN_F64,
  PLAN_F32,
  PLAN_BF16,
  PLAN_F16,
  PLAN_I64,
  PLAN_I32,
  PLAN_DTYPE_COUNT
} plan_dtype;

/* "f64", "f32", "bf16", "f16", "i64", "i32"; "?" out of range. */
PLAN_API const char *plan_dtype_name(plan_dtype t);
/* The dtype of a name, -1 when unknown or NULL. */
PLAN_API int plan_dtype_from_name(const char *s);
/* Whether t is one of the float dtypes. */
PLAN_API bool plan_dtype_is_float(plan_dtype t);
/* Bytes of one element in the file's meaning of the dtype (bf16: 2), 0 out
 * of range. */
PLAN_API int plan_dtype_size(plan_dtype t);

/* ---- op kinds -------------------------------------------------------------
 * plan_op_kind_count(), plan_op_kind_name(), plan_op_kind_from_name() and
 * plan_op_kind_operands() are in space.h. Adding an op adds its kind here,
 * before PLAN_OP_COUNT, and nothing else to this header. */

typedef enum plan_op_kind {
  PLAN_OP_MATMUL,
  PLAN_OP_LINEAR,
  PLAN_OP_ADD,
  PLAN_OP_SUB,
  PLAN_OP_MUL,
  PLAN_OP_DIV,
  PLAN_OP_SCALE,
  PLAN_OP_RELU,
  PLAN_OP_GELU,
  PLAN_OP_SILU,
  PLAN_OP_TANH,
  PLAN_OP_EXP,
  PLAN_OP_SOFTMAX,
  PLAN_OP_LAYERNORM,
  PLAN_OP_RMSNORM,
  PLAN_OP_EMBEDDING,
  PLAN_OP_TRANSPOSE,
  PLAN_OP_PERMUTE,
  PLAN_OP_RESHAPE,
  PLAN_OP_REDUCE_SUM,
  PLAN_OP_REDUCE_MEAN,
  PLAN_OP_SPLIT,
  PLAN_OP_CONCAT,
  PLAN_OP_CROSS_ENTROPY,
  /* Broadcasting a tensor to a larger shape (numpy rules): the backward of
   * the reductions, and grouped-query attention's shared heads. */
  PLAN_OP_EXPAND,
  /* Gradient ops: the backward of an op whose derivative no composition of
   * the ops above gives exactly (docs/training-and-pipelines.md, Autodiff).
   * Input 0 is always the output gradient, and each is linear in it. */
  PLAN_OP_RELU_GRAD,
  PLAN_OP_GELU_GRAD,
  PLAN_OP_SILU_GRAD,
  PLAN_OP_LAYERNORM_GRAD,
  PLAN_OP_RMSNORM_GRAD,
  PLAN_OP_EMBEDDING_GRAD,
  PLAN_OP_CROSS_ENTROPY_GRAD,
  /* Ops real models need beyond the minimum set: a masked select
   * (attention masks, masked fills), and repeating each slice of a dim
   * (grouped-query attention's shared key/value heads,
   * torch.repeat_interleave). */
  PLAN_OP_WHERE,
  PLAN_OP_REPEAT_INTERLEAVE,
  /* Routing and mixture of experts: the k largest along the last dim with
   * their indices; gathering and scatter-adding along the last dim by
   * integer indices (each the other's gradient); and GShard-style expert
   * dispatch/combine over token groups with a per-group capacity, the
   * routing (expert indices, optional weights) an input, plus the weights'
   * gradient. */
  PLAN_OP_TOPK,
  PLAN_OP_GATHER,
  PLAN_OP_SCATTER_ADD,
  PLAN_OP_MOE_DISPATCH,
  PLAN_OP_MOE_COMBINE,
  PLAN_OP_MOE_WEIGHTS_GRAD,
  /* Ops traced models need: the logistic sigmoid (gates), the reciprocal
   * square root (hand-written RMSNorm), a number added to every element
   * (x + 1.0, 1 - x), and fused scaled dot-product attention (q, k, v
   * [, mask]; causal; grouped-query heads), whose rule shards batch,
   * heads and the query sequence. */
  PLAN_OP_SIGMOID,
  PLAN_OP_RSQRT,
  PLAN_OP_ADD_SCALAR,
  PLAN_OP_ATTENTION,
  PLAN_OP_COUNT
} plan_op_kind;

/* The most attributes a kind's schema has. */
#define PLAN_MAX_ATTRS 4

/* ---- attributes -----------------------------------------------------------
 * An op's attribute values are an array in the order of its kind's schema
 * (plan_op_attrs), one value per schema entry; absent values hold the
 * schema's default. Layout (part of the ABI) as declared. */

/* A position in a file: 1-based line and column, 0 when unknown. */
typedef struct plan_pos {
  int line;
  int col;
} plan_pos;

typedef enum plan_attr_type {
  PLAN_ATTR_INT,
  PLAN_ATTR_INTS, /* list of int64 */
  PLAN_ATTR_FLOAT,
  PLAN_ATTR_BOOL,
  PLAN_ATTR_STRING
} plan_attr_type;

/* One attribute value; the field of its schema entry's type is the one
 * that holds it. */
typedef struct plan_attr_val {
  int64_t i;     /* INT */
  double f;      /* FLOAT */
  bool b;        /* BOOL */
  const char *s; /* STRING (NULL: the default) */
  int64_t *ints; /* INTS: nints entries */
  int nints;
  bool present; /* written in the file (defaults are filled in regardless) */
  plan_pos pos; /* where it was written */
} plan_attr_val;

/* One entry of a kind's attribute schema. */
typedef struct plan_attr_spec {
  const char *name; /* as written in a program ("dim", "eps") */
  plan_attr_type type;
  bool required;
  int64_t def_i;     /* INT default */
  double def_f;      /* FLOAT default */
  bool def_b;        /* BOOL default */
  const char *def_s; /* STRING default */
  /* INTS default: always the empty list */
  /* The value names dims of input 0 (negative counts from the end): loading
   * rewrites it to dims >= 0, so `dim: -1` and `dim: 1` on a rank-2 input
   * are the same program (and hash alike). */
  bool is_dim;
} plan_attr_spec;

/* The attribute schema of `kind`: *count entries (count may be NULL), in
 * the order the op's plan_attr_val arrays follow. NULL with *count = 0 for
 * a kind without attributes; NULL with *count = -1 for a kind out of
 * range. Static: valid as long as the library is loaded. */
PLAN_API const plan_attr_spec *plan_op_attrs(int kind, int *count);

/* ---- shapes ---------------------------------------------------------------
 * The shapes an op sees: rank, dims and dtype of each operand. */

typedef struct plan_shape {
  int rank;
  int64_t dims[PLAN_MAX_RANK];
  plan_dtype dtype;
} plan_shape;

/* The registry's inference on whole tensors: checks op `kind`'s attributes
 * `attrs` (its schema order; NULL: the defaults) against the input shapes
 * in[0..nin) and fills out[0..nout), the shapes of the nout outputs the op
 * declares. PLAN_OK; PLAN_EINVALID with a one-line reason in err (size
 * errsz; err may be NULL) when they do not fit; PLAN_EUSAGE for a kind out
 * of range, operand counts outside the kind's (plan_op_kind_operands) or
 * a NULL array. */
PLAN_API int plan_op_infer(int kind, const plan_attr_val *attrs,
                           const plan_shape *in, int nin, plan_shape *out,
                           int nout, char *err, size_t errsz);

/* Whether the blocks one rank holds of an op's operands fit op `kind`
 * with attributes `attrs` (NULL: the schema defaults): the registry's
 * inference on the local shapes, or the local-block rules of the ops whose
 * attributes name global sizes (reshape, expand, split, embedding_grad,
 * scatter_add, moe_dispatch). PLAN_OK; PLAN_EINVALID with a one-line
 * reason in err; PLAN_EUSAGE for a kind out of range or a NULL array.
 * Runners check it before running an op, the lowered-file reader for
 * every op step. */
PLAN_API int plan_op_check_local(int kind, const plan_attr_val *attrs,
                                 const plan_shape *in, int nin,
                                 const plan_shape *out, int nout, char *err,
                                 size_t errsz);

/* ---- sharding factors -------------------------------------------------------
 * An op's sharding rule (spec/sharding-rules.md) names a factor for every
 * independent index of its computation, einsum-style (matmul's m, n and
 * k); each operand dim carries one or more of them. */

typedef enum plan_factor_kind {
  PLAN_FACTOR_FREE,
  PLAN_FACTOR_REDUCTION,        /* summed over: sharding it gives P results */
  PLAN_FACTOR_NEED_REPLICATION, /* must be R on every operand */
  PLAN_FACTOR_MASKED,           /* embedding's vocabulary: P(sum) result */
  /* split with the op's own all-reduces inside it, along the axes that
   * split it (cross_entropy's classes: the vocab-parallel loss): the
   * outputs that carry it are split, the others whole (R) */
  PLAN_FACTOR_COLLECTIVE
} plan_factor_kind;

/* The most factors a rule has. */
#define PLAN_MAX_FACTORS 32

/* One factor. Layout (part of the ABI) as declared. */
typedef struct plan_op_factor {
  int64_t size;
  int kind;     /* plan_factor_kind */
  int reduce;   /* REDUCTION, MASKED: the plan_reduce of the result; else -1 */
  char name[8]; /* its short name in messages ("m", "k", "b0"), NUL-ended */
} plan_op_factor;

/* The factors of op `kind`'s sharding rule with attributes `attrs` (NULL:
 * the defaults) on the whole-tensor shapes in[0..nin) and outs[0..nout),
 * the first `max` of them into out (out may be NULL when max is 0).
 * Returns their count (at most PLAN_MAX_FACTORS); PLAN_EINVALID with a
 * one-line reason in err (size errsz; err may be NULL) when the shapes do
 * not fit the op; PLAN_EUSAGE for a kind out of range or a NULL array. */
PLAN_API int plan_op_factors(plan_op_factor *out, int max, int kind,
                             const plan_attr_val *attrs, const plan_shape *in,
                             int nin, const plan_shape *outs, int nout,
                             char *err, size_t errsz);

/* Whether op `kind` takes a partial (P) input in some form (linear in it:
 * add, matmul, data movement...): 1; 0 when any P input is illegal (relu,
 * softmax: not linear); -1 for a kind out of range. */
PLAN_API int plan_op_kind_linear(int kind);

/* Whether a strategy fits op `kind`'s sharding rule on plan p's mesh (its
 * axis sizes and names, and its shard ratio sets): input placements
 * pin[0..nin) of whole-tensor shapes in[0..nin) legal, and output
 * placements pout[0..nout) (shapes outs) the ones the rule derives (P(avg)
 * accepted for P(sum) where the factor allows it). PLAN_OK; PLAN_EINVALID
 * with the first reason in err (size errsz; err may be NULL), e.g. "input
 * 1 shards dim 0 (factor k) along tp but input 0 does not", also when the
 * shapes do not fit the op (plan_op_factors tells the two apart);
 * PLAN_EUSAGE for a kind out of range, a NULL array or a plan without a
 * mesh. */
PLAN_API int plan_op_check_placements(const plan_plan *p, int kind,
                                      const plan_attr_val *attrs,
                                      const plan_shape *in,
                                      const plan_placement *pin, int nin,
                                      const plan_shape *outs,
                                      const plan_placement *pout, int nout,
                                      char *err, size_t errsz);

#ifdef __cplusplus
}
#endif
#endif
