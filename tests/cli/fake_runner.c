/* Stand-ins for the CUDA runner's plugin, for the tests of plugin loading
 * (tests/cli/run.sh builds one per variant with -DFAKE_...):
 *  FAKE_WORKS     the CPU kernels behind a "cuda" vtable with a host
 *                 all-reduce in member order: the verifier's runner path
 *  FAKE_REFUSES   no device: the entry point returns NULL with the reason
 *  FAKE_OLD_API   a vtable of another API version
 *  FAKE_NO_ENTRY  no entry point at all
 *  FAKE_OTHER_ABI built for another release: another ABI key
 *  FAKE_FAILS     every op fails as a device out of memory would */
#include <stdio.h>
#include <string.h>

#include "runner.h"
#include "cpu/kernels.h" /* the stand-in runs the CPU kernels */

#ifdef FAKE_WORKS
/* folded left in member order, as runners/runner.h asks */
static int fake_all_reduce(double *const *blocks, int nmembers, int64_t n,
                           int reduce, char *err, size_t errsz) {
  (void)err;
  (void)errsz;
  for (int64_t e = 0; e < n; e++) {
    double acc = blocks[0][e];
    for (int m = 1; m < nmembers; m++) {
      double b = blocks[m][e];
      acc = reduce == 2   ? (acc > b ? acc : b)
            : reduce == 3 ? (acc < b ? acc : b)
                          : acc + b;
    }
    blocks[0][e] = reduce == 1 ? acc / (double)nmembers : acc;
  }
  return 0;
}

static void fake_describe(char *buf, size_t size) {
  snprintf(buf, size, "a stand-in on the CPU kernels");
}

static const plan_runner_vtable fake = {PLAN_RUNNER_API_VERSION,
                                        "cuda",
                                        plan_cpu_supports,
                                        plan_cpu_kernel,
                                        fake_describe,
                                        fake_all_reduce,
                                        NULL};
#elif defined(FAKE_FAILS)
/* a device out of memory at the first op: the machine's failure */
static bool all_ops(int kind, plan_dtype dtype) {
  (void)kind;
  (void)dtype;
  return true;
}
static int oom_run(int kind, const plan_attr_val *attrs, const plan_view *in,
                   int nin, plan_view *out, int nout,
                   const plan_kernel_ctx *ctx, char *err, size_t errsz) {
  (void)kind, (void)attrs, (void)in, (void)nin, (void)out, (void)nout;
  (void)ctx;
  snprintf(err, errsz, "cudaMalloc: out of memory (2 GiB asked)");
  return -1; /* PLAN_ENOMEM */
}
static const plan_runner_vtable fake = {
    PLAN_RUNNER_API_VERSION, "cuda", all_ops, oom_run, NULL, NULL, NULL};
#elif defined(FAKE_OLD_API) || defined(FAKE_OTHER_ABI)
static bool no_op(int kind, plan_dtype dtype) {
  (void)kind;
  (void)dtype;
  return false;
}
static int no_run(int kind, const plan_attr_val *attrs, const plan_view *in,
                  int nin, plan_view *out, int nout, const plan_kernel_ctx *ctx,
                  char *err, size_t errsz) {
  (void)kind, (void)attrs, (void)in, (void)nin, (void)out, (void)nout;
  (void)ctx, (void)err, (void)errsz;
  return -10;
}
static const plan_runner_vtable fake = {1,    "cuda", no_op, no_run,
                                        NULL, NULL,   NULL};
#endif

/* FAKE_OTHER_ABI: built for another release (another ABI key) */
extern const unsigned long long plan_runner_plugin_abi;
#ifdef FAKE_OTHER_ABI
const unsigned long long plan_runner_plugin_abi = PLAN_RUNNER_ABI_KEY + 1;
#else
const unsigned long long plan_runner_plugin_abi = PLAN_RUNNER_ABI_KEY;
#endif

#ifndef FAKE_NO_ENTRY
const plan_runner_vtable *plan_runner_plugin_entry(int api_version, char *err,
                                                   size_t errsz);
const plan_runner_vtable *plan_runner_plugin_entry(int api_version, char *err,
                                                   size_t errsz) {
  (void)api_version;
#ifdef FAKE_REFUSES
  snprintf(err, errsz,
           "cudaGetDeviceCount: no CUDA-capable device is "
           "detected");
  return NULL;
#else
  (void)err;
  (void)errsz;
  return &fake;
#endif
}
#else
int plan_fake_runner_nothing(void);
int plan_fake_runner_nothing(void) {
  return 0;
}
#endif
