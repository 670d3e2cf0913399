/* The CUDA runner's plugin built for the host: the same op kernels
 * (runners/cuda/kernels*.cu, gemm.cu), virtual-rank all-reduce
 * (collectives_virtual.cu) and NCCL communicator (comm_nccl.cu, over the
 * library PLAN_NCCL_LIBRARY names: tests/cuda/fake_nccl.c in its test)
 * compiled as C++ through runners/cuda/emu.h and collectives_emu.h, and
 * the same entry point and vtable shape as runners/cuda/plugin.cu, loaded
 * by plan_runner_find("cuda") through PLAN_CUDA_PLUGIN. No GPU is needed,
 * so `make test` runs plans through the whole CUDA path everywhere: the
 * loader, the API version check, the verifier's use of the vtable (its
 * run_op and its all-reduce hook) and the kernels' host dispatch; what it
 * cannot see is the device itself (tests/gpu/run.sh does, on a GPU). */
#include <stdio.h>

#include "collectives.h"
#include "comm_nccl.h"
#include "ops_cuda.h"
#include "runner.h"

namespace {

void describe(char *buf, size_t size) {
  if (size)
    snprintf(buf, size,
             "the CUDA runner's kernels emulated on the host (no device); "
             "every rank virtual, reductions in rank-coordinate order");
}

const plan_runner_vtable emu_vtable = {
    PLAN_RUNNER_API_VERSION, "cuda",   plan_cuda_supports_op,
    plan_cuda_run_op,        describe, plan_cuda_host_all_reduce,
    plan_cuda_comm_open};

} // namespace

/* the release and layouts it was built for (runners/runner.h) */
extern "C" __attribute__((visibility("default"))) const unsigned long long
    plan_runner_plugin_abi = PLAN_RUNNER_ABI_KEY;

extern "C" __attribute__((visibility("default"))) const plan_runner_vtable *
plan_runner_plugin_entry(int api_version, char *err, size_t errsz);

extern "C" const plan_runner_vtable *
plan_runner_plugin_entry(int api_version, char *err, size_t errsz) {
  if (api_version != PLAN_RUNNER_API_VERSION) {
    if (err && errsz)
      snprintf(err, errsz,
               "the plugin speaks runner API version %d, the library %d",
               PLAN_RUNNER_API_VERSION, api_version);
    return NULL;
  }
  return &emu_vtable;
}
