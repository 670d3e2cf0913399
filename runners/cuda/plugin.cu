/* The CUDA runner's plugin entry (runners/runner.h): libplan-cuda.so is
 * dlopen'ed by plan_runner_find("cuda"); its entry point checks the API
 * version and that a CUDA device is present, selects it, and returns the
 * vtable: the op kernels of ops_cuda.h (with a cuBLAS handle kept per
 * thread), the virtual-rank all-reduce of collectives_virtual.cu (every
 * rank of the mesh on this one GPU) and the NCCL communicator of
 * comm_nccl.cu (one process per rank, NCCL loaded when it is opened).
 *
 * The device is PLAN_CUDA_DEVICE when set, else LOCAL_RANK (a launcher's
 * per-host rank; device 0 when only one is visible), else 0. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "collectives.h"
#include "comm_nccl.h"
#include "libplan/common.h"
#include "ops_cuda.h"
#include "runner.h"

namespace {

int pick_device(int count) {
  const char *v = getenv("PLAN_CUDA_DEVICE");
  if (!v || !v[0]) {
    v = getenv("LOCAL_RANK");
    /* a launcher that shows each process its one GPU (SLURM, torchrun
     * with CUDA_VISIBLE_DEVICES) still numbers the local ranks */
    if (count == 1)
      return 0;
  }
  if (!v || !v[0])
    return 0;
  char *e;
  long d = strtol(v, &e, 10);
  return *e || d < 0 || d >= count ? -1 : (int)d;
}

/* The device is per thread in CUDA: a thread that runs ops (the verifier
 * may run ranks on threads) selects it on its first call, as the entry
 * point did for the thread that loaded the plugin. */
thread_local bool thread_device_set;

int use_device(char *err, size_t errsz) {
  if (thread_device_set)
    return 0;
  int count = 0, dev;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && (dev = pick_device(count)) >= 0)
    e = cudaSetDevice(dev);
  else if (e == cudaSuccess)
    e = cudaErrorInvalidDevice;
  if (e != cudaSuccess) {
    if (err && errsz)
      snprintf(err, errsz, "selecting the device: %s", cudaGetErrorString(e));
    return PLAN_EUNSUPPORTED;
  }
  thread_device_set = true;
  return 0;
}

void describe(char *buf, size_t size) {
  int dev = 0;
  cudaDeviceProp p;
  if (!size)
    return;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    snprintf(buf, size, "device unknown");
    return;
  }
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  /* NCCL is not used here: every rank is a virtual one on this device */
  snprintf(buf, size,
           "device %d %s (sm_%d%d, %.0f GiB), CUDA runtime %d.%d, driver "
           "%d.%d; every rank virtual on this device, reductions on it in "
           "rank-coordinate order (no NCCL)",
           dev, p.name, p.major, p.minor,
           (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), rt / 1000,
           (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
}

/* One context (a cuBLAS handle) per thread, made on first use and kept
 * for the life of the process: a handle per op call would cost more than
 * most ops. A context that cannot be made leaves the call to
 * plan_cuda_run_op, which makes its own handle. */
thread_local plan_cuda_ctx *thread_ctx;
thread_local bool thread_ctx_failed;

int run_op(int kind, const plan_attr_val *attrs, const plan_view *in, int nin,
           plan_view *out, int nout, const plan_kernel_ctx *ctx, char *err,
           size_t errsz) {
  if (int rc = use_device(err, errsz))
    return rc;
  if (!thread_ctx && !thread_ctx_failed) {
    thread_ctx = plan_cuda_ctx_new(err, errsz);
    thread_ctx_failed = !thread_ctx;
  }
  return plan_cuda_run_op_ctx(thread_ctx, kind, attrs, in, nin, out, nout,
                              ctx, err, errsz);
}

int all_reduce(double *const *blocks, int nmembers, int64_t n, int reduce,
               char *err, size_t errsz) {
  if (int rc = use_device(err, errsz))
    return rc;
  return plan_cuda_host_all_reduce(blocks, nmembers, n, reduce, err, errsz);
}

/* The communicator runs on the device this thread's ops run on. */
int comm_open(plan_comm **out, int rank, int world, const char *rendezvous,
              double timeout_s, char *err, size_t errsz) {
  if (out)
    *out = NULL;
  if (int rc = use_device(err, errsz))
    return rc;
  return plan_cuda_comm_open(out, rank, world, rendezvous, timeout_s, err,
                             errsz);
}

const plan_runner_vtable cuda_vtable = {
    PLAN_RUNNER_API_VERSION, "cuda",     plan_cuda_supports_op,
    run_op,                  describe,   all_reduce,
    comm_open};

} // namespace

/* the release and layouts it was built for (runners/runner.h) */
extern "C" __attribute__((visibility("default"))) const unsigned long long
    plan_runner_plugin_abi = PLAN_RUNNER_ABI_KEY;

extern "C" __attribute__((visibility("default"))) const plan_runner_vtable *
plan_runner_plugin_entry(int api_version, char *err, size_t errsz) {
  if (api_version != PLAN_RUNNER_API_VERSION) {
    if (err && errsz)
      snprintf(err, errsz,
               "the plugin speaks runner API version %d, the library %d; "
               "rebuild it with `make cuda`",
               PLAN_RUNNER_API_VERSION, api_version);
    return NULL;
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (err && errsz)
      snprintf(err, errsz, "cudaGetDeviceCount: %s",
               e != cudaSuccess ? cudaGetErrorString(e)
                                : "no CUDA-capable device is detected");
    return NULL;
  }
  int dev = pick_device(count);
  if (dev < 0) {
    if (err && errsz)
      snprintf(err, errsz,
               "PLAN_CUDA_DEVICE / LOCAL_RANK names no device (%d visible)",
               count);
    return NULL;
  }
  e = cudaSetDevice(dev);
  if (e == cudaSuccess)
    e = cudaFree(0); /* makes the context now: a broken driver shows here */
  thread_device_set = e == cudaSuccess;
  if (e != cudaSuccess) {
    if (err && errsz)
      snprintf(err, errsz, "device %d: %s", dev, cudaGetErrorString(e));
    return NULL;
  }
  return &cuda_vtable;
}
