/* Internal to the CPU kernels: the routing ops (kernels_route.c), called by
 * the dispatcher (kernels.c) once shapes, dtypes and attributes are
 * checked. Each returns PLAN_OK, or PLAN_EINVALID with the reason in err
 * for an index outside its range or a block outside its global dim. */
#ifndef LIBPLAN_RUNNERS_CPU_KERNELS_ROUTE_H
#define LIBPLAN_RUNNERS_CPU_KERNELS_ROUTE_H

#include "kernels.h"

int plan_kernel_topk(const plan_view *x, plan_view *vals, plan_view *idx);
int plan_kernel_gather(const plan_view *x, const plan_view *idx,
                       plan_view *out, char *err, size_t errsz);
int plan_kernel_scatter_add(const plan_view *src, const plan_view *idx,
                            plan_view *out, char *err, size_t errsz);
/* in: x [g, t, h], idx [g, t, k], optional w [g, t, k] */
int plan_kernel_moe_dispatch(const plan_view *in, int nin, plan_view *out,
                             char *err, size_t errsz);
/* in: y [e, g, c, h], idx [g, t, k], optional w [g, t, k] */
int plan_kernel_moe_combine(const plan_view *in, int nin, plan_view *out,
                            char *err, size_t errsz);
/* in: a [g, t, h], b [e, g, c, h], idx [g, t, k] */
int plan_kernel_moe_weights_grad(const plan_view *in, plan_view *out,
                                 char *err, size_t errsz);

#endif
