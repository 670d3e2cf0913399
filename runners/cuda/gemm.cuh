/* The CUDA runner's gemm layer: a column-major strided-batched gemm with
 * cuBLAS's semantics, run by cuBLAS on the device and by a naive loop over
 * the same arguments when emulated (emu.h), so the row-major to
 * column-major mapping, leading dimensions, strides and batch broadcasting
 * of the matmul and linear kernels are tested without a GPU. */
#ifndef LIBPLAN_RUNNERS_CUDA_GEMM_CUH
#define LIBPLAN_RUNNERS_CUDA_GEMM_CUH

#include "emu.h"

/* For p in [0, batch): C_p = op(A_p) op(B_p) + (beta_one ? C_p : 0), with
 * X_p = X + p * sX elements (sX 0 shares one matrix), all column-major:
 * op(A_p) is m x k (A_p stored m x k with lda >= m, or k x m transposed
 * with ta), op(B_p) k x n, C_p m x n with ldc >= m. Elements of dtype dt
 * (F64, F32, BF16, F16) in the device storage type; BF16 and F16 multiply
 * in float and round on store. m, n, k >= 1.
 *
 * F32 runs in true fp32 (TF32 tensor-core math disallowed). Returns
 * PLAN_OK, or the cuBLAS failure with its name in cu->err. */
int plan_cu_gemm(plan_cu *cu, plan_dtype dt, bool ta, bool tb, int m, int n,
                 int k, const void *a, int lda, int64_t sa, const void *b,
                 int ldb, int64_t sb, bool beta_one, void *c, int ldc,
                 int64_t sc, int batch);

#endif
