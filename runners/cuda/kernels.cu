/* The CUDA runner's op kernels (ops_cuda.h). */
#include "ops_cuda.h"

#include <stdio.h>

#include "libplan/common.h"

extern "C" bool plan_cuda_supports_op(int kind, plan_dtype dtype) {
  (void)kind;
  (void)dtype;
  return false;
}

extern "C" int plan_cuda_run_op(int kind, const plan_attr_val *attrs,
                                const plan_view *in, int nin, plan_view *out,
                                int nout, const plan_kernel_ctx *ctx,
                                char *err, size_t errsz) {
  (void)attrs;
  (void)in;
  (void)nin;
  (void)out;
  (void)nout;
  (void)ctx;
  if (err && errsz)
    snprintf(err, errsz, "cuda runner: op kind %d has no kernel", kind);
  return PLAN_EUNSUPPORTED;
}
