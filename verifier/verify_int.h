/* Internal entry of the verifier: verify an already lowered program (the
 * bug corpus mutates lowered programs to inject bugs). */
#ifndef LIBPLAN_VERIFY_INT_H
#define LIBPLAN_VERIFY_INT_H

#include "libplan/verify.h"
#include "lower.h"

/* Takes ownership of `low` (freed before returning, on every path). */
int plan_verify_lowered(plan_verify_report **out, const plan_plan *p,
                        plan_lowered *low, const plan_verify_options *opts);

#endif
