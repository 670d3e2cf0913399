/* Internal to the CPU kernels: the routing ops (kernels_route.c), called by
 * the dispatcher (kernels.c) once shapes, dtypes and attributes are
 * checked. */
#ifndef LIBPLAN_RUNNERS_CPU_KERNELS_ROUTE_H
#define LIBPLAN_RUNNERS_CPU_KERNELS_ROUTE_H

#include "kernels.h"

/* Runs routing op `kind` (topk, gather, scatter_add, moe_dispatch,
 * moe_combine, moe_weights_grad) once plan_kernel_check has passed: its
 * indices are in range and its blocks inside their global dims. */
int plan_kernel_route(int kind, const plan_view *in, int nin, plan_view *out);

#endif
