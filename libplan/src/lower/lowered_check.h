/* Static checks of a lowered file's steps, made when it is read
 * (lowered_check.c). */
#ifndef LIBPLAN_LOWERED_CHECK_H
#define LIBPLAN_LOWERED_CHECK_H

#include <stddef.h>

#include "lower/lower.h"

/* Whether op step s's buffers' blocks fit its op on every rank
 * (plan_op_check_local on the local shapes the placements give). PLAN_OK,
 * or PLAN_EINVALID with a one-line reason in err naming the step, the
 * first rank that does not fit and why. */
int plan_lowered_check_op_step(const plan_lowered *l, const plan_lstep *s,
                               char *err, size_t errsz);

#endif
