/* Shape reduction, internal entries (the public one, plan_reduce_shapes,
 * is in libplan/verify.h; docs/verify.md "Shape reduction" has the rules).
 * A lowered program is reduced through its program: its buffers carry only
 * placements, so the buffers' placements take the place of strategies as
 * the constraints, and the steps are kept as they are. */
#ifndef LIBPLAN_REDUCE_H
#define LIBPLAN_REDUCE_H

#include "libplan/verify.h"
#include "lower/lower.h"

/* The lowered program `l` over a reduced program: same buffers, steps,
 * layouts and outputs; written and read back (plan_lowered_load_buffer
 * checks every step again). *summary as for plan_reduce_shapes. */
int plan_reduce_lowered(plan_lowered **out, char **summary,
                        const plan_lowered *l);

#endif
