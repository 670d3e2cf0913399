/* Device memory of one op call (emu.h): allocations freed together at the
 * end of the call, and the copies between host and device; host memory and
 * memcpy when emulated. */
#include "emu.h"

int plan_cu_alloc(plan_cu *cu, size_t n, void **out) {
  *out = NULL;
  if (n == 0)
    return PLAN_OK;
  if (cu->nallocs >= PLAN_CU_MAX_ALLOCS)
    return plan_cu_fail(cu, PLAN_ELIMIT,
                        "device buffers: more than %d in one op",
                        PLAN_CU_MAX_ALLOCS);
  void *p = NULL;
  char size[32];
#ifdef __CUDACC__
  cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: clear it */
    return plan_cu_fail(
        cu, e == cudaErrorMemoryAllocation ? PLAN_ENOMEM : PLAN_EUNSUPPORTED,
        "cudaMalloc: %s (%s asked; %s)", cudaGetErrorString(e),
        plan_cu_size(n, size), cudaGetErrorName(e));
  }
#else
  p = malloc(n);
  if (!p)
    return plan_cu_fail(cu, PLAN_ENOMEM, "malloc: out of memory (%s asked)",
                        plan_cu_size(n, size));
#endif
  cu->allocs[cu->nallocs++] = p;
  *out = p;
  return PLAN_OK;
}

int plan_cu_upload(plan_cu *cu, void *dev, const void *host, size_t n) {
  if (n == 0)
    return PLAN_OK;
#ifdef __CUDACC__
  return plan_cu_check(cu, cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice),
                       "cudaMemcpy to the device");
#else
  (void)cu;
  memcpy(dev, host, n);
  return PLAN_OK;
#endif
}

int plan_cu_download(plan_cu *cu, void *host, const void *dev, size_t n) {
  if (n == 0)
    return PLAN_OK;
#ifdef __CUDACC__
  return plan_cu_check(cu, cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost),
                       "cudaMemcpy from the device");
#else
  (void)cu;
  memcpy(host, dev, n);
  return PLAN_OK;
#endif
}

int plan_cu_zero(plan_cu *cu, void *dev, size_t n) {
  if (n == 0)
    return PLAN_OK;
#ifdef __CUDACC__
  return plan_cu_check(cu, cudaMemsetAsync(dev, 0, n, cu->stream),
                       "cudaMemsetAsync");
#else
  (void)cu;
  memset(dev, 0, n);
  return PLAN_OK;
#endif
}

int plan_cu_sync(plan_cu *cu) {
#ifdef __CUDACC__
  return plan_cu_check(cu, cudaStreamSynchronize(cu->stream),
                       "cudaStreamSynchronize");
#else
  (void)cu;
  return PLAN_OK;
#endif
}

int plan_cu_end(plan_cu *cu, int rc) {
#ifdef __CUDACC__
  if (cu->blas && cu->own_blas) {
    cublasStatus_t s = cublasDestroy(cu->blas);
    cu->blas = NULL;
    if (s != CUBLAS_STATUS_SUCCESS && rc == PLAN_OK)
      rc = plan_cu_fail(cu, PLAN_EUNSUPPORTED, "cublasDestroy: %s",
                        cublasGetStatusName(s));
  }
#endif
  while (cu->nallocs > 0) {
    void *p = cu->allocs[--cu->nallocs];
#ifdef __CUDACC__
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess && rc == PLAN_OK) /* keep the first reason */
      rc = plan_cu_check(cu, e, "cudaFree");
#else
    free(p);
#endif
  }
  return rc;
}
