/* Internal to autodiff: the backward rule of fused attention
 * (autodiff_attention.c), called by the rule dispatch (autodiff_rules.c). */
#ifndef LIBPLAN_AUTODIFF_ATTENTION_H
#define LIBPLAN_AUTODIFF_ATTENTION_H

#include "autodiff/autodiff_build.h"

/* Contributes the gradients of q, k, v (and of a float mask) of attention
 * op `op` from dy, the gradient of its output. */
int plan_ad_bw_attention(plan_ad_ctx *c, const plan_op *op, int dy);

#endif
