/* Virtual-rank collectives (collectives.h): every rank of a group on one
 * GPU, combined by plain kernels in member order. One thread owns one
 * element of the result and folds the members' values left to right, so
 * the order, and with it every bit, is the host loop's. */
#include "collectives.h"

#include <stdio.h>

#include "libplan/common.h"

/* Built by nvcc, the kernels run on the device; built by a plain C++
 * compiler (collectives_emu.h), they run on the host, each "thread" of the
 * grid-stride loops in turn, over host memory. */
#ifdef __CUDACC__
#include <cuda_runtime.h>
#define CV_HD __host__ __device__
#define CV_GLOBAL __global__
#define CV_FIRST (blockIdx.x * (int64_t)blockDim.x + threadIdx.x)
#define CV_STEP ((int64_t)gridDim.x * blockDim.x)
#define CV_LAUNCH(k, total, s, ...) k<<<grid_for(total), 256, 0, s>>>(__VA_ARGS__)
#else
#include "collectives_emu.h"
#define CV_HD
#define CV_GLOBAL static
#define CV_FIRST ((int64_t)0)
#define CV_STEP ((int64_t)1)
#define CV_LAUNCH(k, total, s, ...) ((void)(s), (void)(total), k(__VA_ARGS__))
#endif

namespace {

#ifdef __CUDACC__
/* A grid over `total` elements: enough blocks to fill the device, the
 * loops stride over the rest. */
unsigned grid_for(int64_t total) {
  int64_t b = (total + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}
#endif

/* Kernel parameters carry the members' pointers by value. */
struct ptrs {
  const void *p[PLAN_CUDA_MAX_GROUP];
};
struct mptrs {
  void *p[PLAN_CUDA_MAX_GROUP];
};

/* The verifier's reduce2 (verifier/verify.c), for the partial results of
 * a fold; avg is a sum here, divided once at the end. */
template <typename T> CV_HD T fold(int reduce, T a, T b) {
  switch (reduce) {
  case 2: /* PLAN_RED_MAX */
    return a > b ? a : b;
  case 3: /* PLAN_RED_MIN */
    return a < b ? a : b;
  default:
    return a + b;
  }
}

template <typename T>
CV_GLOBAL void all_reduce_k(mptrs buf, int n, int64_t count, int reduce) {
  for (int64_t i = CV_FIRST; i < count; i += CV_STEP) {
    T acc = static_cast<const T *>(buf.p[0])[i];
    for (int m = 1; m < n; m++)
      acc = fold<T>(reduce, acc, static_cast<const T *>(buf.p[m])[i]);
    if (reduce == 1) /* PLAN_RED_AVG */
      acc = acc / (T)n;
    for (int m = 0; m < n; m++)
      static_cast<T *>(buf.p[m])[i] = acc;
  }
}

template <typename T>
CV_GLOBAL void all_gather_k(ptrs in, mptrs out, int n, int64_t count) {
  int64_t total = count * n;
  for (int64_t j = CV_FIRST; j < total; j += CV_STEP) {
    int m = (int)(j / count);
    T v = static_cast<const T *>(in.p[m])[j - (int64_t)m * count];
    for (int r = 0; r < n; r++)
      static_cast<T *>(out.p[r])[j] = v;
  }
}

template <typename T>
CV_GLOBAL void reduce_scatter_k(ptrs in, mptrs out, int n, int64_t count,
                                 int reduce) {
  int64_t total = count * n;
  for (int64_t j = CV_FIRST; j < total; j += CV_STEP) {
    int r = (int)(j / count);
    T acc = static_cast<const T *>(in.p[0])[j];
    for (int m = 1; m < n; m++)
      acc = fold<T>(reduce, acc, static_cast<const T *>(in.p[m])[j]);
    if (reduce == 1)
      acc = acc / (T)n;
    static_cast<T *>(out.p[r])[j - (int64_t)r * count] = acc;
  }
}

template <typename T>
CV_GLOBAL void all_to_all_k(ptrs in, mptrs out, int n, int64_t count) {
  int64_t total = count * n * n;
  for (int64_t j = CV_FIRST; j < total; j += CV_STEP) {
    /* j = (r * n + m) * count + i: out[r][m * count + i] = in[m][r * count
     * + i] */
    int64_t i = j % count;
    int64_t rm = j / count;
    int m = (int)(rm % n), r = (int)(rm / n);
    static_cast<T *>(out.p[r])[(int64_t)m * count + i] =
        static_cast<const T *>(in.p[m])[(int64_t)r * count + i];
  }
}

int fail(char *err, size_t errsz, int code, const char *what,
         const char *why) {
  if (err && errsz)
    snprintf(err, errsz, "%s: %s", what, why);
  return code;
}

int check_args(int n, int64_t count, plan_dtype dt, const char *what,
               char *err, size_t errsz) {
  if (n < 1 || n > PLAN_CUDA_MAX_GROUP)
    return fail(err, errsz, PLAN_EUSAGE, what,
                "a virtual group has 1 to 64 members");
  if (count < 0)
    return fail(err, errsz, PLAN_EUSAGE, what, "a negative count");
  if (dt != PLAN_F64 && dt != PLAN_F32)
    return fail(err, errsz, PLAN_EUNSUPPORTED, what,
                "element types are f64 and f32");
  return 0;
}

int launched(const char *what, char *err, size_t errsz) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(err, errsz, PLAN_EUNSUPPORTED, what, cudaGetErrorString(e));
  return 0;
}

template <typename P> P pack(const void *const *a, int n) {
  P x = {};
  for (int i = 0; i < n; i++)
    x.p[i] = const_cast<decltype(x.p[0])>(a[i]);
  return x;
}

} // namespace

extern "C" int plan_cuda_virtual_all_reduce(void *const *buf, int n,
                                            int64_t count, plan_dtype dt,
                                            int reduce, void *stream,
                                            char *err, size_t errsz) {
  const char *what = "virtual all_reduce";
  if (int rc = check_args(n, count, dt, what, err, errsz))
    return rc;
  if (reduce < 0 || reduce > 3)
    return fail(err, errsz, PLAN_EUSAGE, what, "unknown reduction");
  if (!count)
    return 0;
  mptrs b = pack<mptrs>((const void *const *)buf, n);
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == PLAN_F64)
    CV_LAUNCH(all_reduce_k<double>, count, s, b, n, count, reduce);
  else
    CV_LAUNCH(all_reduce_k<float>, count, s, b, n, count, reduce);
  return launched(what, err, errsz);
}

extern "C" int plan_cuda_virtual_all_gather(const void *const *in,
                                            void *const *out, int n,
                                            int64_t count, plan_dtype dt,
                                            void *stream, char *err,
                                            size_t errsz) {
  const char *what = "virtual all_gather";
  if (int rc = check_args(n, count, dt, what, err, errsz))
    return rc;
  if (!count)
    return 0;
  ptrs i = pack<ptrs>(in, n);
  mptrs o = pack<mptrs>((const void *const *)out, n);
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == PLAN_F64)
    CV_LAUNCH(all_gather_k<double>, count * n, s, i, o, n, count);
  else
    CV_LAUNCH(all_gather_k<float>, count * n, s, i, o, n, count);
  return launched(what, err, errsz);
}

extern "C" int plan_cuda_virtual_reduce_scatter(const void *const *in,
                                                void *const *out, int n,
                                                int64_t count, plan_dtype dt,
                                                int reduce, void *stream,
                                                char *err, size_t errsz) {
  const char *what = "virtual reduce_scatter";
  if (int rc = check_args(n, count, dt, what, err, errsz))
    return rc;
  if (reduce < 0 || reduce > 3)
    return fail(err, errsz, PLAN_EUSAGE, what, "unknown reduction");
  if (!count)
    return 0;
  ptrs i = pack<ptrs>(in, n);
  mptrs o = pack<mptrs>((const void *const *)out, n);
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == PLAN_F64)
    CV_LAUNCH(reduce_scatter_k<double>, count * n, s, i, o, n, count, reduce);
  else
    CV_LAUNCH(reduce_scatter_k<float>, count * n, s, i, o, n, count, reduce);
  return launched(what, err, errsz);
}

extern "C" int plan_cuda_virtual_all_to_all(const void *const *in,
                                            void *const *out, int n,
                                            int64_t count, plan_dtype dt,
                                            void *stream, char *err,
                                            size_t errsz) {
  const char *what = "virtual all_to_all";
  if (int rc = check_args(n, count, dt, what, err, errsz))
    return rc;
  if (!count)
    return 0;
  ptrs i = pack<ptrs>(in, n);
  mptrs o = pack<mptrs>((const void *const *)out, n);
  cudaStream_t s = (cudaStream_t)stream;
  int64_t total = count * n * n;
  if (dt == PLAN_F64)
    CV_LAUNCH(all_to_all_k<double>, total, s, i, o, n, count);
  else
    CV_LAUNCH(all_to_all_k<float>, total, s, i, o, n, count);
  return launched(what, err, errsz);
}

extern "C" int plan_cuda_virtual_send_recv(const void *in, void *out,
                                           int64_t count, plan_dtype dt,
                                           void *stream, char *err,
                                           size_t errsz) {
  const char *what = "virtual send/recv";
  if (int rc = check_args(1, count, dt, what, err, errsz))
    return rc;
  size_t bytes = (size_t)count * (dt == PLAN_F64 ? 8 : 4);
  cudaError_t e = cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice,
                                  (cudaStream_t)stream);
  if (e != cudaSuccess)
    return fail(err, errsz, PLAN_EUNSUPPORTED, what, cudaGetErrorString(e));
  return 0;
}

extern "C" int plan_cuda_host_all_reduce(double *const *blocks, int nmembers,
                                         int64_t n, int reduce, char *err,
                                         size_t errsz) {
  const char *what = "all_reduce";
  if (int rc = check_args(nmembers, n, PLAN_F64, what, err, errsz))
    return rc;
  if (!n)
    return 0;
  size_t bytes = sizeof(double) * (size_t)n;
  void *dev = NULL;
  /* one allocation holds every member's block */
  cudaError_t e = cudaMalloc(&dev, bytes * (size_t)nmembers);
  void *buf[PLAN_CUDA_MAX_GROUP];
  for (int m = 0; e == cudaSuccess && m < nmembers; m++) {
    buf[m] = (char *)dev + bytes * (size_t)m;
    e = cudaMemcpy(buf[m], blocks[m], bytes, cudaMemcpyHostToDevice);
  }
  if (e != cudaSuccess) {
    cudaFree(dev);
    (void)cudaGetLastError(); /* reported here, not at a later launch */
    return fail(err, errsz,
                e == cudaErrorMemoryAllocation ? PLAN_ENOMEM
                                               : PLAN_EUNSUPPORTED,
                what, cudaGetErrorString(e));
  }
  int rc = plan_cuda_virtual_all_reduce(buf, nmembers, n, PLAN_F64, reduce,
                                        NULL, err, errsz);
  if (!rc) {
    e = cudaMemcpy(blocks[0], buf[0], bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      rc = fail(err, errsz, PLAN_EUNSUPPORTED, what, cudaGetErrorString(e));
  }
  cudaFree(dev);
  return rc;
}
