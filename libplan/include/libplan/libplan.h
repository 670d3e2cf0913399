/* libplan: the umbrella header. Include this, or the module headers. */
#ifndef LIBPLAN_LIBPLAN_H
#define LIBPLAN_LIBPLAN_H

#include "common.h"
#include "cost.h"
#include "diag.h"
#include "lowered.h"
#include "ops.h"
#include "plan.h"
#include "program.h"
#include "schedule.h"
#include "space.h"
#include "trace.h"
#include "verify.h"

#endif
