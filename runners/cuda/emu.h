/* The CUDA runner's portability layer: what lets the kernel sources build
 * both with nvcc (real device code) and with a plain C++ compiler on the
 * host (emulation), so the kernels' logic is tested where no GPU or CUDA
 * toolkit exists.
 *
 *  - PLAN_HD marks the element and row functions shared by both builds
 *    (__host__ __device__ under nvcc, nothing on the host);
 *  - plan_bf16_t / plan_f16_t are the device storage types (__nv_bfloat16,
 *    __half) or, emulated, a float rounded on every store with the project's
 *    plan_round_bf16 / plan_round_f16 (round to nearest even, as
 *    __float2bfloat16_rn and __float2half_rn on the device);
 *  - plan_cu is one op call: its device allocations, its cuBLAS handle and
 *    its error buffer; plan_cu_launch runs a functor over an index space,
 *    a <<<grid, block>>> launch under nvcc and a sequential loop emulated;
 *    device buffers are host buffers when emulated.
 *
 * Every CUDA call is checked; a failure becomes a status code with the
 * call and CUDA's error name and message in the call's err:
 * cudaErrorMemoryAllocation gives PLAN_ENOMEM, every other failure
 * PLAN_EUNSUPPORTED (the op is valid, the device could not run it).
 *
 * No CUDA header is included outside __CUDACC__. */
#ifndef LIBPLAN_RUNNERS_CUDA_EMU_H
#define LIBPLAN_RUNNERS_CUDA_EMU_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

extern "C" {
#include "runner_op.h"
#include "libplan/common.h"
#include "base/numeric.h"
}

#ifdef __CUDACC__
#define PLAN_HD __host__ __device__
#define PLAN_CUDA_EMULATED 0
typedef __nv_bfloat16 plan_bf16_t;
typedef __half plan_f16_t;
#else
#define PLAN_HD
#define PLAN_CUDA_EMULATED 1
/* Distinct types (not float itself) so that storage traits tell them
 * apart; each holds a value already rounded to its format. */
typedef struct plan_bf16_t {
  float v;
} plan_bf16_t;
typedef struct plan_f16_t {
  float v;
} plan_f16_t;
#endif

/* ---- storage traits: device storage type S, compute type C -------------- */

template <class S> struct plan_st;

template <> struct plan_st<double> {
  typedef double C;
  static PLAN_HD double load(double x) {
    return x;
  }
  static PLAN_HD double store(double c) {
    return c;
  }
};

template <> struct plan_st<float> {
  typedef float C;
  static PLAN_HD float load(float x) {
    return x;
  }
  static PLAN_HD float store(float c) {
    return c;
  }
};

template <> struct plan_st<plan_bf16_t> {
  typedef float C;
#ifdef __CUDACC__
  static PLAN_HD float load(plan_bf16_t x) {
    return __bfloat162float(x);
  }
  static PLAN_HD plan_bf16_t store(float c) {
    return __float2bfloat16_rn(c);
  }
#else
  static float load(plan_bf16_t x) {
    return x.v;
  }
  static plan_bf16_t store(float c) {
    plan_bf16_t s = {plan_round_bf16(c)};
    return s;
  }
#endif
};

template <> struct plan_st<plan_f16_t> {
  typedef float C;
#ifdef __CUDACC__
  static PLAN_HD float load(plan_f16_t x) {
    return __half2float(x);
  }
  static PLAN_HD plan_f16_t store(float c) {
    return __float2half_rn(c);
  }
#else
  static float load(plan_f16_t x) {
    return x.v;
  }
  static plan_f16_t store(float c) {
    plan_f16_t s = {plan_round_f16(c)};
    return s;
  }
#endif
};

/* ---- math in the compute type (the CUDA math library on the device, libm
 * on the host) --------------------------------------------------------------
 */

static PLAN_HD inline double plan_m_exp(double x) {
  return exp(x);
}
static PLAN_HD inline float plan_m_exp(float x) {
  return expf(x);
}
static PLAN_HD inline double plan_m_log(double x) {
  return log(x);
}
static PLAN_HD inline float plan_m_log(float x) {
  return logf(x);
}
static PLAN_HD inline double plan_m_tanh(double x) {
  return tanh(x);
}
static PLAN_HD inline float plan_m_tanh(float x) {
  return tanhf(x);
}
static PLAN_HD inline double plan_m_erf(double x) {
  return erf(x);
}
static PLAN_HD inline float plan_m_erf(float x) {
  return erff(x);
}
static PLAN_HD inline double plan_m_sqrt(double x) {
  return sqrt(x);
}
static PLAN_HD inline float plan_m_sqrt(float x) {
  return sqrtf(x);
}
static PLAN_HD inline double plan_m_fma(double a, double b, double c) {
  return fma(a, b, c);
}
static PLAN_HD inline float plan_m_fma(float a, float b, float c) {
  return fmaf(a, b, c);
}

/* Exact mode: x rounded to the grid 2^-bits, half to even; bits < 0 (float
 * mode) leaves x. The same arithmetic as plan_dyadic_round
 * (base/numeric.h), so the grid values are bit-identical to the CPU runner's,
 * signed zeros included: a magnitude of 2^(52 - bits) or more, infinities
 * and NaN pass; below, adding and subtracting 2^52 rounds to an integer. */
static PLAN_HD inline double plan_cu_grid(double x, int bits) {
  if (bits < 0)
    return x;
  double lim = ldexp(1.0, 52 - bits);
  if (!(x < lim && x > -lim))
    return x;
  const double big = 4503599627370496.0; /* 2^52 */
  double y = x * ldexp(1.0, bits);
  double r = y >= 0 ? (y + big) - big : -((-y + big) - big);
  return r * ldexp(1.0, -bits);
}
static PLAN_HD inline float plan_cu_grid(float x, int bits) {
  return bits < 0 ? x : (float)plan_cu_grid((double)x, bits);
}

/* Exact mode: x rounded to a multiple of odd 2^-(bits + e), odd the odd
 * part of count and 2^e >= odd: a sum of such values divided by count is
 * exact. The same arithmetic as the CPU runner's grid_div. */
static PLAN_HD inline double plan_cu_grid_div(double x, int bits,
                                              int64_t count) {
  if (bits < 0 || count <= 0)
    return x;
  int64_t odd = count;
  while (!(odd & 1))
    odd >>= 1;
  int e = 0;
  while (e < 40 && ((int64_t)1 << e) < odd)
    e++;
  if (odd == 1 || ((int64_t)1 << e) < odd || bits + e > 60)
    return plan_cu_grid(x, bits);
  return plan_cu_grid(x / (double)odd, bits + e) * (double)odd;
}
static PLAN_HD inline float plan_cu_grid_div(float x, int bits, int64_t count) {
  return bits < 0 ? x : (float)plan_cu_grid_div((double)x, bits, count);
}

/* a / b; in exact mode rounded to the grid only when the quotient is
 * inexact (the residual through fma is not zero). */
template <class C> static PLAN_HD inline C plan_cu_quot(C a, C b, int bits) {
  C q = a / b;
  if (bits >= 0 && plan_m_fma(q, b, -a) != 0)
    q = plan_cu_grid(q, bits);
  return q;
}

/* x * f; in exact mode rounded only when the product is inexact. */
template <class C> static PLAN_HD inline C plan_cu_prod(C x, C f, int bits) {
  C p = x * f;
  if (bits >= 0 && plan_m_fma(x, f, -p) != 0)
    p = plan_cu_grid(p, bits);
  return p;
}

/* ---- one op call ---------------------------------------------------------
 */

#define PLAN_CU_MAX_ALLOCS 64

typedef struct plan_cu {
  void *allocs[PLAN_CU_MAX_ALLOCS]; /* freed by plan_cu_end */
  int nallocs;
  char *err;
  size_t errsz;
#ifdef __CUDACC__
  cudaStream_t stream; /* the current (default) stream */
  cublasHandle_t blas; /* a context's, or created on the first gemm */
#endif
  bool own_blas; /* blas was created for this call: plan_cu_end frees it */
} plan_cu;

/* A failure: the reason into cu->err; returns code. */
static inline int plan_cu_fail(plan_cu *cu, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int plan_cu_fail(plan_cu *cu, int code, const char *fmt, ...) {
  if (cu->err && cu->errsz) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cu->err, cu->errsz, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* n bytes for a message: "512 bytes", "1.5 MiB", "2 GiB". */
static inline const char *plan_cu_size(size_t n, char buf[32]) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, 32, u ? "%.3g %s" : "%.0f %s", v, unit[u]);
  return buf;
}

#ifdef __CUDACC__
/* A CUDA runtime result: PLAN_OK, or the status with "what: name: message". */
static inline int plan_cu_check(plan_cu *cu, cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return PLAN_OK;
  return plan_cu_fail(
      cu, e == cudaErrorMemoryAllocation ? PLAN_ENOMEM : PLAN_EUNSUPPORTED,
      "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
}
#endif

static inline void plan_cu_begin(plan_cu *cu, char *err, size_t errsz) {
  memset(cu, 0, sizeof *cu);
  cu->err = err;
  cu->errsz = errsz;
#ifdef __CUDACC__
  /* a failure an earlier call left (a failed copy or allocation is not
   * sticky, but cudaGetLastError would report it at this call's first
   * launch) is that call's, already reported */
  (void)cudaGetLastError();
#endif
}

/* Frees what the call allocated; returns rc, or the first failure to free
 * (a sticky device error surfaces here) when rc is PLAN_OK. */
int plan_cu_end(plan_cu *cu, int rc);

/* n bytes of device memory (host memory emulated) into *out, freed by
 * plan_cu_end; n == 0 gives NULL. */
int plan_cu_alloc(plan_cu *cu, size_t n, void **out);

/* Host to device, device to host and device to device copies of n bytes;
 * synchronous with respect to the host. */
int plan_cu_upload(plan_cu *cu, void *dev, const void *host, size_t n);
int plan_cu_download(plan_cu *cu, void *host, const void *dev, size_t n);

/* Sets n bytes of device memory to zero (0 in every float format). */
int plan_cu_zero(plan_cu *cu, void *dev, size_t n);

/* Waits for the work queued so far and reports an asynchronous failure. */
int plan_cu_sync(plan_cu *cu);

#ifdef __CUDACC__
template <class K> __global__ void plan_cu_loop(int64_t n, K k) {
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += step)
    k(i);
}
#endif

/* Runs k(i) for every i in [0, n): one device thread per index (a
 * grid-stride loop past the grid's size), or on the host from the last
 * index to the first, so that a kernel reading what another index writes
 * (a race on the device) shows in the emulated tests. Each index is
 * independent; k's work for one index is sequential, which keeps every
 * reduction in a fixed order. */
template <class K> static int plan_cu_launch(plan_cu *cu, int64_t n, K k) {
  if (n <= 0)
    return PLAN_OK;
#ifdef __CUDACC__
  const int64_t block = 256;
  int64_t grid = (n + block - 1) / block;
  if (grid > 65535)
    grid = 65535;
  plan_cu_loop<K><<<(unsigned)grid, (unsigned)block, 0, cu->stream>>>(n, k);
  return plan_cu_check(cu, cudaGetLastError(), "kernel launch");
#else
  (void)cu;
  for (int64_t i = n - 1; i >= 0; i--)
    k(i);
  return PLAN_OK;
#endif
}

#endif
