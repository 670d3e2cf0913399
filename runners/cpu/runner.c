/* The CPU runner's vtable (runners/runner.h). */
#include "kernels.h"

static const plan_runner_vtable cpu_vtable = {
    PLAN_RUNNER_API_VERSION,
    "cpu",
    plan_cpu_supports,
    plan_cpu_kernel,
    NULL, /* describe: the name says it */
    NULL, /* all_reduce: the verifier's, on the host */
    NULL  /* comm_open: the library's MPI communicator */
};

const plan_runner_vtable *plan_cpu_runner(void) {
  return &cpu_vtable;
}
