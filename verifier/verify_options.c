/* The verifier's public helpers that run nothing (libplan/verify.h): its
 * options init functions, and whether a runner can run here. */
#include <stddef.h>
#include <string.h>

#include "libplan/verify.h"
#include "base/util.h"
#include "runner.h"

int plan_verify_options_init(plan_verify_options *opts, unsigned int version) {
  if (!opts)
    return plan_failf(PLAN_EUSAGE, "plan_verify_options_init: NULL options");
  if (version < 2 || version > PLAN_VERIFY_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE,
                      "plan_verify_options version %u is not 2 to %d", version,
                      PLAN_VERIFY_OPTIONS_VERSION);
  /* an older caller's struct ends before the newer fields (the sizes
   * plan_verify reads for each version) */
  plan_verify_options full = PLAN_VERIFY_OPTIONS_INIT;
  full.version = version;
  memcpy(opts, &full,
         version == 2   ? offsetof(plan_verify_options, tolerances)
         : version == 3 ? offsetof(plan_verify_options, runner)
         : version == 4 ? offsetof(plan_verify_options, world)
         : version == 5 ? offsetof(plan_verify_options, memory_limit)
                        : sizeof full);
  return PLAN_OK;
}

int plan_ref_options_init(plan_ref_options *opts) {
  if (!opts)
    return plan_failf(PLAN_EUSAGE, "plan_ref_options_init: NULL options");
  *opts = (plan_ref_options)PLAN_REF_OPTIONS_INIT;
  return PLAN_OK;
}

int plan_runner_check(const char *name) {
  /* plan_runner_find sets the reason when it finds none */
  return plan_runner_find(name) ? PLAN_OK : plan_error_last()->code;
}
