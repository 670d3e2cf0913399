/* The runners by name (runner.h): the embedded CPU runner, or a plugin
 * loaded on demand (plugin_load.c). */
#include "runner.h"

#include <string.h>

#include "plugin_load.h"
#include "base/util.h"

const plan_runner_vtable *plan_runner_find(const char *name) {
  if (!name || !strcmp(name, "cpu"))
    return plan_cpu_runner();
  if (!strcmp(name, "cuda"))
    return plan_runner_plugin_load("cuda", "libplan-cuda.so",
                                   "PLAN_CUDA_PLUGIN");
  plan_failf(PLAN_EUSAGE, "no runner named '%s' (runners: cpu, cuda)", name);
  return NULL;
}

bool plan_runner_is_cpu(const plan_runner_vtable *r) {
  return r && r == plan_cpu_runner();
}
