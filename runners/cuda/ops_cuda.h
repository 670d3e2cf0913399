/* The CUDA runner's op kernels: the vtable-compatible entry points of the
 * CUDA runner (runners/runner.h), with the op contract of every runner
 * (runners/runner_op.h): host views in and out; each call checks the
 * views as every runner does (plan_kernel_check), uploads the inputs,
 * runs the op on the current CUDA device and its default stream, and
 * downloads the outputs.
 * A context (plan_cuda_ctx) is optional: it keeps one cuBLAS handle
 * across calls; plan_cuda_run_op, the vtable's entry, makes a handle per
 * call that needs one (matmul, linear).
 *
 * Every op of the registry up to moe_weights_grad has a kernel in F64,
 * F32, BF16 and F16; the data-movement ops (transpose, permute, reshape,
 * split, concat, expand, where, repeat_interleave) also in I64 and I32:
 * the CPU runner's set. A kind the kernels do not know (an op added to the
 * registry later) is unsupported. On the device the tensors are double,
 * float, __nv_bfloat16, __half and int64_t; BF16 and F16 compute in float
 * and round to nearest even on store, as the CPU runner's emulation does.
 * The routing ops (topk, gather, scatter_add, moe_dispatch, moe_combine,
 * moe_weights_grad) compute through double as the CPU runner's
 * kernels_route.c does, converting a result to float (F32, BF16, F16)
 * where the CPU stores it, then rounding BF16 and F16 once on store; their
 * indices and blocks are checked on the host, with the CPU's messages,
 * before anything runs.
 *
 * Agreement with the CPU runner, on the device (built with --fmad=false,
 * IEEE division and square root):
 *  - bit for bit: the data movement, embedding, add, sub, mul, div, scale,
 *    relu, relu_grad, layernorm, rmsnorm and their gradients, reduce_sum,
 *    reduce_mean, embedding_grad, and the routing ops: the CPU's
 *    expressions in the CPU's order (every reduction sequential in one
 *    thread, embedding_grad's rows summed in sample order, scatter_add's
 *    sources in order of the choice, moe_combine's in expert order then
 *    slot order, moe_weights_grad's dot products in order of h);
 *  - the ops through the CUDA math library (expf, tanhf, erff: 2 ulp;
 *    logf, exp, log, tanh: 1 ulp; erf: 2 ulp): gelu, silu, tanh, exp,
 *    softmax, cross_entropy, gelu_grad, silu_grad, cross_entropy_grad.
 *    Each call is within those bounds, but where the op's expression
 *    cancels (cross_entropy's m + log(s) - x with s near 1, gelu_grad's
 *    1 - t*t, silu_grad) the result can be many ulps apart in relative
 *    terms; the device agreement test compares them with the dtype's
 *    tolerance, not bits. Verdicts do not depend on it: the reference and
 *    the ranks both run on the device;
 *  - matmul and linear (cuBLAS, F32 without TF32, BF16/F16 accumulating in
 *    fp32) within summation-order error: |cuda - cpu| <= k eps sum |a b|
 *    per element, eps of the compute type (or of the format, BF16/F16);
 *  - exact mode (F64 on the dyadic grid): bit for bit for every op whose
 *    result is a sum, product or quotient of grid values (matmul and the
 *    routing ops included: such sums are exact in any order, and the
 *    routing ops round nothing); a transcendental op is rounded to
 *    the grid and may differ by one grid step where the CUDA and the host
 *    libm round to either side of a grid midpoint.
 * "Bit for bit" counts any two NaNs as equal: arithmetic and conversions
 * on a device may give the canonical NaN where the CPU keeps a payload
 * (topk and gather copy elements, so theirs keep their bits; topk orders
 * NaN above every number on both).
 * The host emulation (emu.h; tests/cuda/test_cuda_emu.c) uses libm, so
 * there every op but matmul and linear is bit-identical to the CPU runner.
 *
 * Results are deterministic run to run: reductions have a fixed order,
 * cuBLAS is deterministic on one stream, and nothing uses atomics. */
#ifndef LIBPLAN_RUNNERS_CUDA_OPS_CUDA_H
#define LIBPLAN_RUNNERS_CUDA_OPS_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "runner_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether op `kind` has a CUDA kernel for outputs of `dtype`. */
bool plan_cuda_supports_op(int kind, plan_dtype dtype);

/* One local op on rank-local host blocks: the contract of run_op
 * (runners/runner.h) and of plan_cpu_kernel, with these failures besides:
 * PLAN_ENOMEM when device memory runs out, PLAN_EUNSUPPORTED when a CUDA
 * or cuBLAS call fails (no device, a driver or launch error), each with
 * the call and CUDA's error name and message in err ("cudaMalloc: out of
 * memory (2 GiB asked; cudaErrorMemoryAllocation)"). */
int plan_cuda_run_op(int kind, const plan_attr_val *attrs, const plan_view *in,
                     int nin, plan_view *out, int nout,
                     const plan_kernel_ctx *ctx, char *err, size_t errsz);

/* A context of the current device: its cuBLAS handle, made once. Used by
 * one thread at a time, on the device current when it was made. */
typedef struct plan_cuda_ctx plan_cuda_ctx;

/* A new context, freed with plan_cuda_ctx_free; NULL with the reason in
 * err when cuBLAS cannot start or memory runs out. */
plan_cuda_ctx *plan_cuda_ctx_new(char *err, size_t errsz);
void plan_cuda_ctx_free(plan_cuda_ctx *c); /* accepts NULL */

/* plan_cuda_run_op with context c (NULL: plan_cuda_run_op itself). */
int plan_cuda_run_op_ctx(plan_cuda_ctx *c, int kind, const plan_attr_val *attrs,
                         const plan_view *in, int nin, plan_view *out, int nout,
                         const plan_kernel_ctx *ctx, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
