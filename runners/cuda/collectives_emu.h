/* Host stand-ins for the CUDA runtime calls of collectives_virtual.cu and
 * comm_nccl.cu, so that they build with a plain C++ compiler and run on the
 * host, kernels one index after another (tests/gpu/test_virtual_emu.c tests
 * their layouts and reduction order without a GPU; tests/cuda/
 * test_comm_nccl.c the communicator). "Device" memory is host memory; one
 * device, 0, whose work is done when a call returns.
 * PLAN_CUDA_EMU_FAIL=cudaMemcpyAsync makes that call fail
 * (cudaErrorInvalidValue), as a device failure would. */
#ifndef LIBPLAN_RUNNERS_CUDA_COLLECTIVES_EMU_H
#define LIBPLAN_RUNNERS_CUDA_COLLECTIVES_EMU_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *cudaStream_t;
typedef enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNotReady = 600
} cudaError_t;
#define cudaStreamNonBlocking 0x01
typedef struct cudaDeviceProp {
  char name[256];
} cudaDeviceProp;
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
  const char *fail = getenv("PLAN_CUDA_EMU_FAIL");
  (void)st;
  if (fail && !strcmp(fail, "cudaMemcpyAsync"))
    return cudaErrorInvalidValue;
  return cudaMemcpy(d, s, n, k);
}
static inline cudaError_t cudaGetLastError(void) {
  return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) {
  (void)d;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
  (void)d;
  snprintf(p->name, sizeof p->name, "%s", "host emulation");
  return cudaSuccess;
}
/* a stream is a token: work is done when its call returns */
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s,
                                                    unsigned flags) {
  static char token;
  (void)flags;
  *s = &token;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess             ? "no error"
         : e == cudaErrorInvalidValue ? "invalid argument (emulated)"
                                      : "out of memory";
}

#endif
