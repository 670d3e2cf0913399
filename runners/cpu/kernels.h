/* The CPU runner: its kernels, one local op of the registry (ops.h) on
 * rank-local tensor blocks with the contract of the runner interface
 * (runner_op.h: each op's local semantics, the dtypes, exact mode), and
 * its vtable.
 *
 * Dtypes: F64 is computed in double and F32 in float (matmul and linear
 * through OpenBLAS dgemm / sgemm). BF16 and F16 are emulated: stored as
 * float, computed in float, and every result rounded to the format
 * (round to nearest even; F16 overflows to infinity and has subnormals).
 * The routing ops compute through double (runners/cpu/kernels_route.c)
 * and store each result once.
 *
 * Determinism: loop orders are fixed, so a kernel gives bit-identical results
 * for identical inputs and shapes. OpenBLAS is deterministic for a given
 * thread count; the library never changes OpenBLAS's (process-global) thread
 * count: the runner sets OPENBLAS_NUM_THREADS or calls
 * openblas_set_num_threads once at startup, which is its decision.
 *
 * Kernels keep no state, allocate nothing and are thread-safe. */
#ifndef LIBPLAN_RUNNERS_CPU_KERNELS_H
#define LIBPLAN_RUNNERS_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "runner.h"
#include "runner_op.h"

/* C linkage, for a C++ source that includes it. */
#ifdef __cplusplus
extern "C" {
#endif

/* Runs op `kind` (plan_op_kind) with attribute values `attrs` (the kind's
 * schema order, as in ops.c; NULL: the schema defaults) on the local blocks
 * in[0..nin) and writes out[0..nout), whose dims, dtype and data the caller
 * has set (the local result shapes: e.g. the local matmul of the local
 * blocks). Outputs must not overlap inputs. ctx NULL: float mode.
 *
 * Returns PLAN_OK; PLAN_EINVALID when the shapes, dtypes or attributes do not
 * fit the op (or an id/label is out of range); PLAN_EUNSUPPORTED for a dtype
 * the kernel lacks; PLAN_ELIMIT for a matrix too large for BLAS's int;
 * PLAN_EUSAGE for a bad argument (the statuses and messages of
 * plan_kernel_check, runner_op.h, first). On failure a one-line reason is
 * written into err (size errsz; err may be NULL) and the outputs are
 * unspecified. */
int plan_cpu_kernel(int kind, const plan_attr_val *attrs, const plan_view *in,
                    int nin, plan_view *out, int nout,
                    const plan_kernel_ctx *ctx, char *err, size_t errsz);

/* Whether op `kind` has a kernel for outputs of `dtype` (every op for the
 * float dtypes; transpose, permute, reshape, split, concat, expand, where
 * and repeat_interleave also for the integer dtypes). */
bool plan_cpu_supports(int kind, plan_dtype dtype);

/* plan_cpu_runner, the CPU runner's vtable (runner.c), is declared in
 * runner.h: the runner finder hands it out. */

#ifdef __cplusplus
}
#endif

#endif
