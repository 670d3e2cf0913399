/* The CUDA runner's benchmark (docs/gpu.md): ratios measured in one
 * run, on one GPU.
 *
 *  - matmul: TFLOP/s of a direct cublasGemmEx (the peak here) and of the
 *    runner's gemm path on the same device buffers (plan_cu_gemm,
 *    runners/cuda/gemm.cuh), f32 (true fp32, no TF32) and bf16 (f32
 *    accumulation), M = N = K = --size (8192); and of the runner's whole
 *    matmul op through its vtable (host views: uploads, the gemm, the
 *    download and bf16 conversions included), at the same size;
 *  - verification: the time `plan verify --runner cuda` takes on the plan
 *    given by --layer (tests/gpu/run.sh: a Llama-3-8B decoder layer, hidden
 *    4096, seq 2048, tensor parallel over 8 virtual ranks) in float mode,
 *    in f32 (--dtype f32) and in the plan's bf16, with its phases.
 *
 * usage: bench_cuda [--size N] [--reps R] [--layer PLAN [--dtype f32|own]]
 *                   [--skip-gemm]
 * (--dtype: verify the layer in f32 only, or in its own dtypes only; both
 * by default)
 * The plugin is PLAN_CUDA_PLUGIN, else the one this program is linked to
 * (../libplan-cuda.so beside it, as in build/ and the GPU bundle). Prints
 * one line per figure; exits 3 without a GPU, 1 when a step fails. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "gemm.cuh"
#include "ops_cuda.h"

extern "C" {
#include "libplan/plan.h"
#include "libplan/verify.h"
#include "ir/ops.h"
#include "runner.h"
#include "verify_int.h"
}

namespace {

double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return true;
  printf("bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

/* Fills n elements of type T on the device with values in [-1, 1). */
template <typename T> __global__ void fill_k(T *x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = (T)((float)(h & 0xffff) / 32768.0f - 1.0f);
  }
}

/* Seconds per call of f, timed with events over reps calls after one
 * warm-up call. */
template <typename F> double timed(int reps, F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  if (!f())
    return -1;
  cudaEventRecord(a);
  for (int i = 0; i < reps; i++)
    if (!f())
      return -1;
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3 / reps;
}

int bench_gemm(int n, int reps, bool bf16) {
  const char *tn = bf16 ? "bf16" : "f32";
  size_t es = bf16 ? 2 : 4, bytes = es * (size_t)n * (size_t)n;
  void *a, *b, *c;
  if (!cuda_ok(cudaMalloc(&a, bytes), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&b, bytes), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&c, bytes), "cudaMalloc"))
    return 1;
  int64_t nn = (int64_t)n * n;
  if (bf16) {
    fill_k<<<1024, 256>>>((__nv_bfloat16 *)a, nn, 1);
    fill_k<<<1024, 256>>>((__nv_bfloat16 *)b, nn, 2);
  } else {
    fill_k<<<1024, 256>>>((float *)a, nn, 1);
    fill_k<<<1024, 256>>>((float *)b, nn, 2);
  }
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("bench_cuda: cublasCreate failed\n");
    return 1;
  }
  float one = 1, zero = 0;
  cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  double flops = 2.0 * n * (double)n * n;
  double peak = timed(reps, [&] {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, t, n,
                        b, t, n, &zero, c, t, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
  });
  char err[256] = "";
  plan_cu cu;
  plan_cu_begin(&cu, err, sizeof err);
  double mine = timed(reps, [&] {
    return plan_cu_gemm(&cu, bf16 ? PLAN_BF16 : PLAN_F32, false, false, n, n,
                        n, a, n, 0, b, n, 0, false, c, n, 0, 1) == PLAN_OK;
  });
  plan_cu_end(&cu, PLAN_OK);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  if (peak <= 0 || mine <= 0) {
    printf("bench_cuda: gemm %s failed%s%s\n", tn, err[0] ? ": " : "", err);
    return 1;
  }
  printf("gemm %s %dx%dx%d: runner %.1f TFLOP/s, cublasGemmEx %.1f TFLOP/s, "
         "ratio %.3f\n",
         tn, n, n, n, flops / mine / 1e12, flops / peak / 1e12, peak / mine);
  /* the whole op through the vtable: host views in and out */
  std::vector<float> ha((size_t)nn), hb((size_t)nn), hc((size_t)nn);
  for (int64_t i = 0; i < nn; i++) {
    ha[(size_t)i] = (float)((i * 7) % 13) / 8.0f - 0.75f;
    hb[(size_t)i] = (float)((i * 5) % 11) / 8.0f - 0.625f;
  }
  plan_view v[3];
  memset(v, 0, sizeof v);
  void *data[3] = {ha.data(), hb.data(), hc.data()};
  for (int i = 0; i < 3; i++) {
    v[i].dtype = bf16 ? PLAN_BF16 : PLAN_F32;
    v[i].rank = 2;
    v[i].dims[0] = v[i].dims[1] = n;
    v[i].data = data[i];
  }
  int oreps = reps < 3 ? reps : 3;
  double t0 = 0;
  for (int r = -1; r < oreps; r++) { /* one warm-up call */
    if (r == 0)
      t0 = now();
    if (plan_cuda_run_op(PLAN_OP_MATMUL, NULL, v, 2, &v[2], 1, NULL, err,
                         sizeof err)) {
      printf("bench_cuda: the runner's matmul op (%s): %s\n", tn, err);
      return 1;
    }
  }
  double op = (now() - t0) / oreps;
  printf("matmul op %s %dx%dx%d through the vtable (host views, copies "
         "included): %.1f TFLOP/s, %.3f of cublasGemmEx\n",
         tn, n, n, n, flops / op / 1e12, peak / op);
  fflush(stdout);
  return 0;
}

int bench_layer(const char *path, const char *dtype) {
  plan_plan *p;
  if (plan_load(&p, path)) {
    printf("bench_cuda: %s: %s\n", path, plan_error_last()->message);
    return 1;
  }
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  o.dtype = dtype;
  o.runner = "cuda";
  plan_verify_report *r;
  double t0 = now();
  int rc = plan_verify(&r, p, &o);
  double secs = now() - t0;
  plan_free(p);
  if (rc) {
    printf("bench_cuda: verify %s (%s): %s\n", path, dtype ? dtype : "bf16",
           plan_error_last()->message);
    return rc == PLAN_EUNSUPPORTED ? 3 : 1;
  }
  printf("verify %s on cuda, float mode, %s: %.1f s (reference %.1f s, "
         "lowered %.1f s, compare %.1f s), %s\n",
         path, dtype ? dtype : "its own dtypes", secs, r->seconds_reference,
         r->seconds_lowered, r->seconds_compare,
         plan_verify_report_equal(r) ? "EQUAL" : "NOT EQUAL");
  if (!plan_verify_report_equal(r))
    printf("%s", plan_verify_report_text(r));
  int eq = plan_verify_report_equal(r);
  plan_verify_report_free(r);
  fflush(stdout);
  return eq ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  int n = 8192, reps = 10;
  const char *layer = NULL, *only = NULL;
  bool gemm = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layer") && i + 1 < argc)
      layer = argv[++i];
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "f32") || !strcmp(argv[i + 1], "own")))
      only = argv[++i];
    else if (!strcmp(argv[i], "--skip-gemm"))
      gemm = false;
    else {
      fprintf(stderr, "usage: bench_cuda [--size N] [--reps R] [--layer "
                      "PLAN [--dtype f32|own]] [--skip-gemm]\n");
      return 2;
    }
  }
  if (n < 16 || reps < 1)
    return 2;
  /* the verifier loads the plugin this program is linked to */
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 40);
  if (!getenv("PLAN_CUDA_PLUGIN") && len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      strcpy(slash, "/../libplan-cuda.so");
      setenv("PLAN_CUDA_PLUGIN", exe, 0);
    }
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || !count) {
    printf("bench_cuda: cannot run here: cudaGetDeviceCount: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e)
                            : "no CUDA-capable device is detected");
    return 3;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("bench_cuda: device 0 %s (sm_%d%d)\n", prop.name, prop.major,
         prop.minor);
  int rc = 0;
  if (gemm) {
    rc |= bench_gemm(n, reps, false);
    rc |= bench_gemm(n, reps, true);
  }
  if (layer) {
    int a = only && strcmp(only, "f32") ? 0 : bench_layer(layer, "f32");
    int b = only && strcmp(only, "own") ? 0 : bench_layer(layer, NULL);
    if (a == 3 || b == 3)
      return 3;
    rc |= a | b;
  }
  return rc ? 1 : 0;
}
