/* The CPU runner's vtable (runners/runner.h). */
#include "runner.h"

#include <string.h>

#include "plugin_load.h"
#include "base/util.h"

static const plan_runner_vtable cpu_vtable = {
    PLAN_RUNNER_API_VERSION,
    "cpu",
    plan_cpu_supports,
    plan_cpu_kernel,
    NULL, /* describe: the name says it */
    NULL, /* all_reduce: the verifier's, on the host */
    NULL  /* comm_open: the library's TCP communicator */
};

const plan_runner_vtable *plan_cpu_runner(void) {
  return &cpu_vtable;
}

const plan_runner_vtable *plan_runner_find(const char *name) {
  if (!name || !strcmp(name, "cpu"))
    return &cpu_vtable;
  if (!strcmp(name, "cuda"))
    return plan_runner_plugin_load("cuda", "libplan-cuda.so",
                                   "PLAN_CUDA_PLUGIN");
  plan_failf(PLAN_EUSAGE, "no runner named '%s' (runners: cpu, cuda)", name);
  return NULL;
}
