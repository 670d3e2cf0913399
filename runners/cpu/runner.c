/* The CPU runner's vtable (runners/runner.h). */
#include "runner.h"

#include <string.h>

#include "util.h"

static const plan_runner_vtable cpu_vtable = {
    PLAN_RUNNER_API_VERSION, "cpu", plan_cpu_supports, plan_cpu_kernel};

const plan_runner_vtable *plan_cpu_runner(void) { return &cpu_vtable; }

const plan_runner_vtable *plan_runner_find(const char *name) {
  if (!name || !strcmp(name, "cpu"))
    return &cpu_vtable;
  if (!strcmp(name, "cuda")) {
    plan_failf(PLAN_EUNSUPPORTED,
               "runner 'cuda' is not built here: the CUDA runner (a plugin "
               "loaded on demand) is not part of this release yet"
               );
    return NULL;
  }
  plan_failf(PLAN_EUNSUPPORTED, "no runner named '%s' (runners: cpu)", name);
  return NULL;
}
