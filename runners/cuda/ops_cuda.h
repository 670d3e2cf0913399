/* The CUDA runner's op kernels: the vtable-compatible entry points of the
 * CUDA runner (runners/runner.h). Same contract as plan_cpu_kernel
 * (runners/cpu/kernels.h): host views in and out; each call uploads the
 * inputs, runs the op on the current CUDA device and stream, and downloads
 * the outputs.
 *
 * The kernel sources also build without CUDA (host emulation) so that their
 * logic is tested on machines without a GPU. */
#ifndef LIBPLAN_RUNNERS_CUDA_OPS_CUDA_H
#define LIBPLAN_RUNNERS_CUDA_OPS_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether op `kind` has a CUDA kernel for outputs of `dtype`. */
bool plan_cuda_supports_op(int kind, plan_dtype dtype);

/* One local op on rank-local host blocks: the contract of plan_cpu_kernel. */
int plan_cuda_run_op(int kind, const plan_attr_val *attrs, const plan_view *in,
                     int nin, plan_view *out, int nout,
                     const plan_kernel_ctx *ctx, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
