/* Host stand-ins for the CUDA runtime calls of collectives_virtual.cu, so
 * that its kernels build with a plain C++ compiler and run on the host, one
 * index after another (tests/gpu/test_virtual_emu.c tests their layouts and
 * reduction order without a GPU). "Device" memory is host memory. */
#ifndef LIBPLAN_RUNNERS_CUDA_COLLECTIVES_EMU_H
#define LIBPLAN_RUNNERS_CUDA_COLLECTIVES_EMU_H

#include <stdlib.h>
#include <string.h>

typedef void *cudaStream_t;
typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 } cudaError_t;
typedef enum {
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice
} cudaMemcpyKind;

static inline cudaError_t cudaMalloc(void **p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n,
                                     cudaMemcpyKind k) {
  (void)k;
  memmove(d, s, n);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n,
                                          cudaMemcpyKind k, cudaStream_t st) {
  (void)st;
  return cudaMemcpy(d, s, n, k);
}
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "out of memory";
}

#endif
