/* The gemm layer (gemm.cuh): cuBLAS strided-batched gemms on the device, a
 * naive column-major loop with cuBLAS's argument semantics emulated. */
#include "gemm.cuh"

#ifdef __CUDACC__

/* A cuBLAS result: PLAN_OK, or the status with "what: name: message". */
static int blas_check(plan_cu *cu, cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return PLAN_OK;
  return plan_cu_fail(
      cu, s == CUBLAS_STATUS_ALLOC_FAILED ? PLAN_ENOMEM : PLAN_EUNSUPPORTED,
      "%s: %s: %s", what, cublasGetStatusName(s), cublasGetStatusString(s));
}

int plan_cu_gemm(plan_cu *cu, plan_dtype dt, bool ta, bool tb, int m, int n,
                 int k, const void *a, int lda, int64_t sa, const void *b,
                 int ldb, int64_t sb, bool beta_one, void *c, int ldc,
                 int64_t sc, int batch) {
  int rc;
  if (!cu->blas) {
    if ((rc = blas_check(cu, cublasCreate(&cu->blas), "cublasCreate")))
      return rc;
    cu->own_blas = true;
  }
  if ((rc = blas_check(cu, cublasSetStream(cu->blas, cu->stream),
                       "cublasSetStream")))
    return rc;
  /* Verification compares with fp32 and fp64 references, so F32 must be
   * true fp32: CUBLAS_DEFAULT_MATH never uses TF32 tensor cores (only
   * CUBLAS_TF32_TENSOR_OP_MATH would), and the 16-bit gemms below compute
   * in fp32 with reduced-precision split-k reductions disallowed. */
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  if (dt == PLAN_BF16 || dt == PLAN_F16)
    mode = (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  if ((rc = blas_check(cu, cublasSetMathMode(cu->blas, mode),
                       "cublasSetMathMode")))
    return rc;
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (dt == PLAN_F64) {
    const double one = 1, beta = beta_one ? 1 : 0;
    return blas_check(
        cu,
        cublasDgemmStridedBatched(cu->blas, oa, ob, m, n, k, &one,
                                  (const double *)a, lda, sa, (const double *)b,
                                  ldb, sb, &beta, (double *)c, ldc, sc, batch),
        "cublasDgemmStridedBatched");
  }
  const float one = 1, beta = beta_one ? 1 : 0;
  if (dt == PLAN_F32)
    return blas_check(
        cu,
        cublasSgemmStridedBatched(cu->blas, oa, ob, m, n, k, &one,
                                  (const float *)a, lda, sa, (const float *)b,
                                  ldb, sb, &beta, (float *)c, ldc, sc, batch),
        "cublasSgemmStridedBatched");
  cudaDataType t = dt == PLAN_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  return blas_check(
      cu,
      cublasGemmStridedBatchedEx(cu->blas, oa, ob, m, n, k, &one, a, t, lda, sa,
                                 b, t, ldb, sb, &beta, c, t, ldc, sc, batch,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

#else /* emulated */

/* cuBLAS's column-major semantics, one dot product per element of C in
 * increasing k, accumulated in the compute type. */
template <class S>
static void gemm_naive(bool ta, bool tb, int m, int n, int k, const S *a,
                       int lda, int64_t sa, const S *b, int ldb, int64_t sb,
                       bool beta_one, S *c, int ldc, int64_t sc, int batch) {
  typedef plan_st<S> T;
  typedef typename T::C C;
  for (int p = 0; p < batch; p++) {
    const S *ap = a + p * sa, *bp = b + p * sb;
    S *cp = c + p * sc;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        C acc = 0;
        for (int l = 0; l < k; l++) {
          C x =
              T::load(ta ? ap[l + (int64_t)i * lda] : ap[i + (int64_t)l * lda]);
          C y =
              T::load(tb ? bp[j + (int64_t)l * ldb] : bp[l + (int64_t)j * ldb]);
          acc += x * y;
        }
        S *o = &cp[i + (int64_t)j * ldc];
        *o = T::store(beta_one ? acc + T::load(*o) : acc);
      }
  }
}

int plan_cu_gemm(plan_cu *cu, plan_dtype dt, bool ta, bool tb, int m, int n,
                 int k, const void *a, int lda, int64_t sa, const void *b,
                 int ldb, int64_t sb, bool beta_one, void *c, int ldc,
                 int64_t sc, int batch) {
  /* cuBLAS's argument checks (CUBLAS_STATUS_INVALID_VALUE) */
  if (m < 1 || n < 1 || k < 1 || batch < 0 || lda < (ta ? k : m) ||
      ldb < (tb ? n : k) || ldc < m)
    return plan_cu_fail(cu, PLAN_EUNSUPPORTED,
                        "gemm: invalid arguments m %d n %d k %d lda %d ldb %d "
                        "ldc %d",
                        m, n, k, lda, ldb, ldc);
  switch (dt) {
  case PLAN_F64:
    gemm_naive(ta, tb, m, n, k, (const double *)a, lda, sa, (const double *)b,
               ldb, sb, beta_one, (double *)c, ldc, sc, batch);
    return PLAN_OK;
  case PLAN_F32:
    gemm_naive(ta, tb, m, n, k, (const float *)a, lda, sa, (const float *)b,
               ldb, sb, beta_one, (float *)c, ldc, sc, batch);
    return PLAN_OK;
  case PLAN_BF16:
    gemm_naive(ta, tb, m, n, k, (const plan_bf16_t *)a, lda, sa,
               (const plan_bf16_t *)b, ldb, sb, beta_one, (plan_bf16_t *)c, ldc,
               sc, batch);
    return PLAN_OK;
  case PLAN_F16:
    gemm_naive(ta, tb, m, n, k, (const plan_f16_t *)a, lda, sa,
               (const plan_f16_t *)b, ldb, sb, beta_one, (plan_f16_t *)c, ldc,
               sc, batch);
    return PLAN_OK;
  default:
    return plan_cu_fail(cu, PLAN_EUNSUPPORTED, "gemm: no kernel for %s",
                        plan_dtype_name(dt));
  }
}

#endif
