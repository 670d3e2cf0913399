/* Shape reduction. Both entries are public, in libplan/reduce.h:
 * plan_reduce_shapes and plan_reduce_lowered (docs/verify.md "Shape
 * reduction" has the rules). A lowered program is reduced through its
 * program: its buffers carry only placements, so the buffers' placements
 * take the place of strategies as the constraints, and the steps are kept
 * as they are. */
#ifndef LIBPLAN_REDUCE_REDUCE_H
#define LIBPLAN_REDUCE_REDUCE_H

#include "libplan/reduce.h"
#include "lower/lower.h"

#endif
