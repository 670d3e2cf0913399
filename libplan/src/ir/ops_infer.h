/* Internal to the op registry: the inference function of every op kind,
 * defined in ops_infer_*.c by op family and referenced by the table in
 * ops.c. */
#ifndef LIBPLAN_OPS_INFER_H
#define LIBPLAN_OPS_INFER_H

#include <stddef.h>

#include "ir/ops.h"

#define PLAN_INFER_ARGS                                                        \
  const plan_shape *in, int nin, const plan_attr_val *attrs, plan_shape *out,  \
      int nout, char *err, size_t errsz

int plan_infer_matmul(PLAN_INFER_ARGS);
int plan_infer_linear(PLAN_INFER_ARGS);
int plan_infer_add(PLAN_INFER_ARGS);
int plan_infer_sub(PLAN_INFER_ARGS);
int plan_infer_mul(PLAN_INFER_ARGS);
int plan_infer_div(PLAN_INFER_ARGS);
int plan_infer_scale(PLAN_INFER_ARGS);
int plan_infer_relu(PLAN_INFER_ARGS);
int plan_infer_gelu(PLAN_INFER_ARGS);
int plan_infer_silu(PLAN_INFER_ARGS);
int plan_infer_tanh(PLAN_INFER_ARGS);
int plan_infer_exp(PLAN_INFER_ARGS);
int plan_infer_softmax(PLAN_INFER_ARGS);
int plan_infer_layernorm(PLAN_INFER_ARGS);
int plan_infer_rmsnorm(PLAN_INFER_ARGS);
int plan_infer_embedding(PLAN_INFER_ARGS);
int plan_infer_transpose(PLAN_INFER_ARGS);
int plan_infer_permute(PLAN_INFER_ARGS);
int plan_infer_reshape(PLAN_INFER_ARGS);
int plan_infer_reduce_sum(PLAN_INFER_ARGS);
int plan_infer_reduce_mean(PLAN_INFER_ARGS);
int plan_infer_split(PLAN_INFER_ARGS);
int plan_infer_concat(PLAN_INFER_ARGS);
int plan_infer_cross_entropy(PLAN_INFER_ARGS);
int plan_infer_expand(PLAN_INFER_ARGS);
int plan_infer_relu_grad(PLAN_INFER_ARGS);
int plan_infer_gelu_grad(PLAN_INFER_ARGS);
int plan_infer_silu_grad(PLAN_INFER_ARGS);
int plan_infer_layernorm_grad(PLAN_INFER_ARGS);
int plan_infer_rmsnorm_grad(PLAN_INFER_ARGS);
int plan_infer_embedding_grad(PLAN_INFER_ARGS);
int plan_infer_cross_entropy_grad(PLAN_INFER_ARGS);
int plan_infer_where(PLAN_INFER_ARGS);
int plan_infer_repeat_interleave(PLAN_INFER_ARGS);
int plan_infer_topk(PLAN_INFER_ARGS);
int plan_infer_gather(PLAN_INFER_ARGS);
int plan_infer_scatter_add(PLAN_INFER_ARGS);
int plan_infer_moe_dispatch(PLAN_INFER_ARGS);
int plan_infer_moe_combine(PLAN_INFER_ARGS);
int plan_infer_moe_weights_grad(PLAN_INFER_ARGS);
int plan_infer_sigmoid(PLAN_INFER_ARGS);
int plan_infer_rsqrt(PLAN_INFER_ARGS);
int plan_infer_add_scalar(PLAN_INFER_ARGS);
int plan_infer_attention(PLAN_INFER_ARGS);

#endif
