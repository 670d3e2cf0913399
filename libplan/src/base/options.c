/* Options init functions of the core's options structs (plan.h,
 * program.h, schedule.h): each fills a struct as its _INIT macro does,
 * for callers that cannot expand a C macro (bindings). Each struct has
 * had one version so far. */
#include "libplan/plan.h"
#include "libplan/program.h"
#include "libplan/schedule.h"
#include "base/util.h"

/* PLAN_EUSAGE unless opts is set and version is the only one there is. */
static int check(const void *opts, unsigned int version, unsigned int known,
                 const char *what) {
  if (!opts)
    return plan_failf(PLAN_EUSAGE, "%s_init: NULL options", what);
  if (version != known)
    return plan_failf(PLAN_EUSAGE, "%s version %u is not %u", what, version,
                      known);
  return PLAN_OK;
}

int plan_load_options_init(plan_load_options *opts, unsigned int version) {
  int rc = check(opts, version, PLAN_LOAD_OPTIONS_VERSION, "plan_load_options");
  if (!rc)
    *opts = (plan_load_options)PLAN_LOAD_OPTIONS_INIT;
  return rc;
}

int plan_write_options_init(plan_write_options *opts, unsigned int version) {
  int rc =
      check(opts, version, PLAN_WRITE_OPTIONS_VERSION, "plan_write_options");
  if (!rc)
    *opts = (plan_write_options)PLAN_WRITE_OPTIONS_INIT;
  return rc;
}

int plan_grad_options_init(plan_grad_options *opts, unsigned int version) {
  int rc = check(opts, version, PLAN_GRAD_OPTIONS_VERSION, "plan_grad_options");
  if (!rc)
    *opts = (plan_grad_options)PLAN_GRAD_OPTIONS_INIT;
  return rc;
}

int plan_schedule_options_init(plan_schedule_options *opts,
                               unsigned int version) {
  int rc = check(opts, version, PLAN_SCHEDULE_OPTIONS_VERSION,
                 "plan_schedule_options");
  if (!rc)
    *opts = (plan_schedule_options)PLAN_SCHEDULE_OPTIONS_INIT;
  return rc;
}
