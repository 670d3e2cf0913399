/* The op registry (ggml style): one row per plan_op_kind, indexed by the
 * enum, with each op's name, arity, attribute schema, partial rule and shape
 * inference (ops_infer_*.c). The sharding rules built from the inferred shapes
 * are in sharding_rules.c and sharding.c. */
#include "ir/ops.h"

#include <string.h>

#include "ir/ops_infer.h"

/* plan_op_factors hands out every factor of a rule (C only: nvcc compiles
 * C++ sources that include ops.h) */
_Static_assert(PLAN_RULE_MAX_FACTORS == PLAN_MAX_FACTORS,
               "plan_op_factors hands out every factor of a rule");

/* ---- attribute schemas --------------------------------------------------- */

static const plan_attr_spec matmul_attrs[] = {
    {.name = "transpose_a", .type = PLAN_ATTR_BOOL},
    {.name = "transpose_b", .type = PLAN_ATTR_BOOL},
};
static const plan_attr_spec scale_attrs[] = {
    {.name = "factor", .type = PLAN_ATTR_FLOAT, .def_f = 1.0},
};
static const plan_attr_spec gelu_attrs[] = {
    {.name = "approximate", .type = PLAN_ATTR_STRING, .def_s = "none"},
};
static const plan_attr_spec softmax_attrs[] = {
    {.name = "dim", .type = PLAN_ATTR_INT, .def_i = -1, .is_dim = true},
};
static const plan_attr_spec layernorm_attrs[] = {
    {.name = "eps", .type = PLAN_ATTR_FLOAT, .def_f = 1e-5},
};
static const plan_attr_spec rmsnorm_attrs[] = {
    {.name = "eps", .type = PLAN_ATTR_FLOAT, .def_f = 1e-6},
};
/* dims defaults to [-2, -1]; an INTS default is always the empty list in the
 * schema, so the absent list stands for it. */
static const plan_attr_spec transpose_attrs[] = {
    {.name = "dims", .type = PLAN_ATTR_INTS, .is_dim = true},
};
static const plan_attr_spec permute_attrs[] = {
    {.name = "perm", .type = PLAN_ATTR_INTS, .required = true, .is_dim = true},
};
static const plan_attr_spec reshape_attrs[] = {
    {.name = "shape", .type = PLAN_ATTR_INTS, .required = true},
};
static const plan_attr_spec reduce_attrs[] = {
    {.name = "dims", .type = PLAN_ATTR_INTS, .required = true, .is_dim = true},
    {.name = "keepdim", .type = PLAN_ATTR_BOOL},
};
static const plan_attr_spec split_attrs[] = {
    {.name = "dim", .type = PLAN_ATTR_INT, .def_i = -1, .is_dim = true},
    {.name = "sizes", .type = PLAN_ATTR_INTS, .required = true},
};
static const plan_attr_spec concat_attrs[] = {
    {.name = "dim", .type = PLAN_ATTR_INT, .def_i = -1, .is_dim = true},
};
static const plan_attr_spec expand_attrs[] = {
    {.name = "shape", .type = PLAN_ATTR_INTS, .required = true},
};
/* torch.repeat_interleave(x, repeats, dim) with an int `repeats`: each
 * slice along dim repeated in place (grouped-query attention's kv heads).
 * dim has no default: torch's (flatten first) is not this op. Both are
 * required; their def_i are placeholders no loaded value equals (repeats
 * >= 1, dims normalised to >= 0), so the canonical form, which leaves out
 * values equal to the default, always holds them. */
static const plan_attr_spec repeat_interleave_attrs[] = {
    {.name = "repeats", .type = PLAN_ATTR_INT, .required = true, .def_i = 0},
    {.name = "dim",
     .type = PLAN_ATTR_INT,
     .required = true,
     .def_i = -1,
     .is_dim = true},
};
/* topk: how many; always along the last dim (permute first for another). */
static const plan_attr_spec topk_attrs[] = {
    {.name = "k", .type = PLAN_ATTR_INT, .required = true, .def_i = 0},
};
/* scatter_add: the size of the last dim of the result (the indices alone
 * do not tell it). */
static const plan_attr_spec scatter_add_attrs[] = {
    {.name = "size", .type = PLAN_ATTR_INT, .required = true, .def_i = 0},
};
/* moe_dispatch: the expert count and each group's capacity per expert (the
 * result is [experts, groups, capacity, hidden]). */
static const plan_attr_spec moe_dispatch_attrs[] = {
    {.name = "experts", .type = PLAN_ATTR_INT, .required = true, .def_i = 0},
    {.name = "capacity", .type = PLAN_ATTR_INT, .required = true, .def_i = 0},
};
/* The table's row count: the ids alone do not tell it. */
static const plan_attr_spec embedding_grad_attrs[] = {
    {.name = "rows", .type = PLAN_ATTR_INT, .required = true},
};

/* add_scalar: the number added to every element. */
static const plan_attr_spec add_scalar_attrs[] = {
    {.name = "value", .type = PLAN_ATTR_FLOAT, .def_f = 0.0},
};
/* attention: a causal mask (key j seen by query i when j <= i, positions
 * global: top-left aligned, as torch's is_causal) and the factor of the
 * scores (0, the default: 1 / sqrt(d)). */
static const plan_attr_spec attention_attrs[] = {
    {.name = "causal", .type = PLAN_ATTR_BOOL},
    {.name = "scale", .type = PLAN_ATTR_FLOAT, .def_f = 0.0},
};

#define ATTRS(a) a, (int)(sizeof a / sizeof a[0])

/* The registry. Designated initialisers keep each row next to its enum
 * value; a row left out leaves a zero row (caught by test_ops) or, at the
 * end, a short table (caught by the static_assert below). */
static const plan_op_info op_table[] = {
    [PLAN_OP_MATMUL] = {"matmul", 2, 2, 1, 1, ATTRS(matmul_attrs),
                        PLAN_PARTIAL_PRODUCT, plan_infer_matmul},
    [PLAN_OP_LINEAR] = {"linear", 2, 3, 1, 1, NULL, 0, PLAN_PARTIAL_LINEAR,
                        plan_infer_linear},
    [PLAN_OP_ADD] = {"add", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_ADDITIVE,
                     plan_infer_add},
    [PLAN_OP_SUB] = {"sub", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_ADDITIVE,
                     plan_infer_sub},
    [PLAN_OP_MUL] = {"mul", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_PRODUCT,
                     plan_infer_mul},
    [PLAN_OP_DIV] = {"div", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_DIVIDEND,
                     plan_infer_div},
    [PLAN_OP_SCALE] = {"scale", 1, 1, 1, 1, ATTRS(scale_attrs),
                       PLAN_PARTIAL_UNARY, plan_infer_scale},
    [PLAN_OP_RELU] = {"relu", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                      plan_infer_relu},
    [PLAN_OP_GELU] = {"gelu", 1, 1, 1, 1, ATTRS(gelu_attrs), PLAN_PARTIAL_NONE,
                      plan_infer_gelu},
    [PLAN_OP_SILU] = {"silu", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                      plan_infer_silu},
    [PLAN_OP_TANH] = {"tanh", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                      plan_infer_tanh},
    [PLAN_OP_EXP] = {"exp", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                     plan_infer_exp},
    [PLAN_OP_SOFTMAX] = {"softmax", 1, 1, 1, 1, ATTRS(softmax_attrs),
                         PLAN_PARTIAL_NONE, plan_infer_softmax},
    [PLAN_OP_LAYERNORM] = {"layernorm", 2, 3, 1, 1, ATTRS(layernorm_attrs),
                           PLAN_PARTIAL_NONE, plan_infer_layernorm},
    [PLAN_OP_RMSNORM] = {"rmsnorm", 2, 2, 1, 1, ATTRS(rmsnorm_attrs),
                         PLAN_PARTIAL_NONE, plan_infer_rmsnorm},
    [PLAN_OP_EMBEDDING] = {"embedding", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_TABLE,
                           plan_infer_embedding},
    [PLAN_OP_TRANSPOSE] = {"transpose", 1, 1, 1, 1, ATTRS(transpose_attrs),
                           PLAN_PARTIAL_PASS, plan_infer_transpose},
    [PLAN_OP_PERMUTE] = {"permute", 1, 1, 1, 1, ATTRS(permute_attrs),
                         PLAN_PARTIAL_PASS, plan_infer_permute},
    [PLAN_OP_RESHAPE] = {"reshape", 1, 1, 1, 1, ATTRS(reshape_attrs),
                         PLAN_PARTIAL_PASS, plan_infer_reshape},
    [PLAN_OP_REDUCE_SUM] = {"reduce_sum", 1, 1, 1, 1, ATTRS(reduce_attrs),
                            PLAN_PARTIAL_UNARY, plan_infer_reduce_sum},
    [PLAN_OP_REDUCE_MEAN] = {"reduce_mean", 1, 1, 1, 1, ATTRS(reduce_attrs),
                             PLAN_PARTIAL_UNARY, plan_infer_reduce_mean},
    /* split: as many outputs as `sizes` has entries (max_out -1). */
    [PLAN_OP_SPLIT] = {"split", 1, 1, 1, -1, ATTRS(split_attrs),
                       PLAN_PARTIAL_PASS, plan_infer_split},
    /* concat: one or more inputs (max_in -1). */
    [PLAN_OP_CONCAT] = {"concat", 1, -1, 1, 1, ATTRS(concat_attrs),
                        PLAN_PARTIAL_ADDITIVE, plan_infer_concat},
    [PLAN_OP_CROSS_ENTROPY] = {"cross_entropy", 2, 2, 1, 1, NULL, 0,
                               PLAN_PARTIAL_NONE, plan_infer_cross_entropy},
    [PLAN_OP_EXPAND] = {"expand", 1, 1, 1, 1, ATTRS(expand_attrs),
                        PLAN_PARTIAL_PASS, plan_infer_expand},
    /* The gradient ops take the output gradient first: (dy, x, ...). */
    [PLAN_OP_RELU_GRAD] = {"relu_grad", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_FIRST,
                           plan_infer_relu_grad},
    [PLAN_OP_GELU_GRAD] = {"gelu_grad", 2, 2, 1, 1, ATTRS(gelu_attrs),
                           PLAN_PARTIAL_FIRST, plan_infer_gelu_grad},
    [PLAN_OP_SILU_GRAD] = {"silu_grad", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_FIRST,
                           plan_infer_silu_grad},
    [PLAN_OP_LAYERNORM_GRAD] = {"layernorm_grad", 3, 3, 1, 1,
                                ATTRS(layernorm_attrs), PLAN_PARTIAL_FIRST,
                                plan_infer_layernorm_grad},
    [PLAN_OP_RMSNORM_GRAD] = {"rmsnorm_grad", 3, 3, 1, 1, ATTRS(rmsnorm_attrs),
                              PLAN_PARTIAL_FIRST, plan_infer_rmsnorm_grad},
    [PLAN_OP_EMBEDDING_GRAD] = {"embedding_grad", 2, 2, 1, 1,
                                ATTRS(embedding_grad_attrs), PLAN_PARTIAL_FIRST,
                                plan_infer_embedding_grad},
    [PLAN_OP_CROSS_ENTROPY_GRAD] = {"cross_entropy_grad", 3, 3, 1, 1, NULL, 0,
                                    PLAN_PARTIAL_FIRST,
                                    plan_infer_cross_entropy_grad},
    /* where: (cond, a, b); cond of any dtype, nonzero selects a. */
    [PLAN_OP_WHERE] = {"where", 3, 3, 1, 1, NULL, 0, PLAN_PARTIAL_SELECT,
                       plan_infer_where},
    [PLAN_OP_REPEAT_INTERLEAVE] = {"repeat_interleave", 1, 1, 1, 1,
                                   ATTRS(repeat_interleave_attrs),
                                   PLAN_PARTIAL_PASS,
                                   plan_infer_repeat_interleave},
    /* topk: x -> (values, indices), the k largest along the last dim. */
    [PLAN_OP_TOPK] = {"topk", 1, 1, 2, 2, ATTRS(topk_attrs), PLAN_PARTIAL_NONE,
                      plan_infer_topk},
    /* gather: (x [.., n], idx [.., k]) -> [.., k]; linear in x. */
    [PLAN_OP_GATHER] = {"gather", 2, 2, 1, 1, NULL, 0, PLAN_PARTIAL_FIRST,
                        plan_infer_gather},
    /* scatter_add: (src [.., k], idx [.., k]) -> [.., size]; linear in src. */
    [PLAN_OP_SCATTER_ADD] = {"scatter_add", 2, 2, 1, 1,
                             ATTRS(scatter_add_attrs), PLAN_PARTIAL_FIRST,
                             plan_infer_scatter_add},
    /* moe_dispatch: (x [g, t, h], idx [g, t, k] [, w [g, t, k]]) ->
     * [experts, g, capacity, h]; linear in x. */
    [PLAN_OP_MOE_DISPATCH] = {"moe_dispatch", 2, 3, 1, 1,
                              ATTRS(moe_dispatch_attrs), PLAN_PARTIAL_FIRST,
                              plan_infer_moe_dispatch},
    /* moe_combine: (y [e, g, c, h], idx [g, t, k] [, w]) -> [g, t, h]. */
    [PLAN_OP_MOE_COMBINE] = {"moe_combine", 2, 3, 1, 1, NULL, 0,
                             PLAN_PARTIAL_FIRST, plan_infer_moe_combine},
    /* moe_weights_grad: (a [g, t, h], b [e, g, c, h], idx) -> [g, t, k]. */
    [PLAN_OP_MOE_WEIGHTS_GRAD] = {"moe_weights_grad", 3, 3, 1, 1, NULL, 0,
                                  PLAN_PARTIAL_FIRST,
                                  plan_infer_moe_weights_grad},
    [PLAN_OP_SIGMOID] = {"sigmoid", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                         plan_infer_sigmoid},
    [PLAN_OP_RSQRT] = {"rsqrt", 1, 1, 1, 1, NULL, 0, PLAN_PARTIAL_NONE,
                       plan_infer_rsqrt},
    /* add_scalar: not linear (every rank would add the number). */
    [PLAN_OP_ADD_SCALAR] = {"add_scalar", 1, 1, 1, 1, ATTRS(add_scalar_attrs),
                            PLAN_PARTIAL_NONE, plan_infer_add_scalar},
    /* attention: (q [b, h, s, d], k [b, hk, sk, d], v [b, hk, sk, dv]
     * [, mask [.., s, sk]]) -> [b, h, s, dv]; h a multiple of hk. */
    [PLAN_OP_ATTENTION] = {"attention", 3, 4, 1, 1, ATTRS(attention_attrs),
                           PLAN_PARTIAL_NONE, plan_infer_attention},
};

_Static_assert(sizeof op_table / sizeof op_table[0] == PLAN_OP_COUNT,
               "op_table needs one row per plan_op_kind");

const plan_op_info *plan_op_info_get(int kind) {
  if (kind < 0 || kind >= PLAN_OP_COUNT)
    return NULL;
  return &op_table[kind];
}

int plan_op_kind_from_name(const char *name) {
  if (!name)
    return -1;
  /* the first byte rules out most kinds without a call */
  for (int k = 0; k < PLAN_OP_COUNT; k++)
    if (op_table[k].name && op_table[k].name[0] == name[0] &&
        !strcmp(op_table[k].name, name))
      return k;
  return -1;
}

const plan_attr_spec *plan_op_attrs(int kind, int *count) {
  if (kind < 0 || kind >= PLAN_OP_COUNT) {
    if (count)
      *count = -1;
    return NULL;
  }
  if (count)
    *count = op_table[kind].nattrs;
  return op_table[kind].nattrs ? op_table[kind].attrs : NULL;
}

int plan_op_infer(int kind, const plan_attr_val *attrs, const plan_shape *in,
                  int nin, plan_shape *out, int nout, char *err, size_t errsz) {
  const plan_op_info *info = plan_op_info_get(kind);
  if (!info)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "plan_op_infer: kind %d is not an op", kind);
  int max_in = info->max_in < 0 ? PLAN_MAX_OPERANDS - 1 : info->max_in;
  int max_out = info->max_out < 0 ? PLAN_MAX_OPERANDS - 1 : info->max_out;
  if (nin < info->min_in || nin > max_in || nout < info->min_out ||
      nout > max_out || nin + nout > PLAN_MAX_OPERANDS)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: %d inputs and %d outputs",
                     info->name, nin, nout);
  if ((nin > 0 && !in) || !out)
    return plan_errc(PLAN_EUSAGE, err, errsz, "%s: NULL operands", info->name);
  return info->infer(in, nin, attrs, out, nout, err, errsz);
}

const char *plan_op_kind_name(int kind) {
  /* Never NULL, so it can go straight into a message. */
  if (kind < 0 || kind >= PLAN_OP_COUNT)
    return "unknown";
  return op_table[kind].name;
}

int plan_op_logits_input(int kind) {
  return kind == PLAN_OP_CROSS_ENTROPY        ? 0
         : kind == PLAN_OP_CROSS_ENTROPY_GRAD ? 1
                                              : -1;
}

int plan_op_class_axes(int kind, int rank, const plan_placement *pl, int naxes,
                       int *pa) {
  if (plan_op_logits_input(kind) < 0 || !pl)
    return 0;
  int np = 0;
  for (int a = 0; a < naxes && a < pl->naxes; a++)
    if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == rank - 1)
      pa[np++] = a;
  return np;
}
