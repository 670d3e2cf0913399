/* libplan: manual regions, traced.
 *
 * A manual region (spec/plan-format.md §4.6) is computed by the user's own
 * per-rank program, its `body`, in place of the strategies of its ops. The
 * library runs no script language itself: at lowering it hands each manual
 * region to a tracer callback, which runs the body (the plan tool and the
 * Lua module run it as Lua, in a sandbox: docs/lua.md, "Manual regions")
 * and reports what the body does through the builder calls below. Each
 * value the body handles is a rank-local block of a global tensor in a
 * placement; an op on blocks is the op on the global tensors under the
 * placements its factor rule derives (a matmul of row- and column-sharded
 * blocks leaves partial sums), a collective changes one mesh axis of a
 * placement. The lowering turns the trace into ordinary lowered ops and
 * collectives, enters the region in its input boundary placements and
 * checks that the body leaves each output in its boundary placement; the
 * verifier compares the region's outputs with the single-device program's
 * ops the region replaces.
 *
 * Builder calls return a handle (>= 0) or a negative status with the last
 * error set (plan_error_last); the tracer returns PLAN_OK or a negative
 * status: a builder's, or its own failure, with the last error set by
 * plan_error_set (common.h). */
#ifndef LIBPLAN_TRACE_H
#define LIBPLAN_TRACE_H

#include "common.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_trace plan_trace;

/* Runs the body of the manual region plan_trace_region(t) names. */
typedef int (*plan_region_tracer)(void *user, plan_trace *t);

/* ---- the region being traced -------------------------------------------- */

PLAN_API const char *plan_trace_region(const plan_trace *t);
PLAN_API const char *plan_trace_body(const plan_trace *t);
PLAN_API const char *plan_trace_file(const plan_trace *t);
/* The file line of the body's first line (0 when unknown). */
PLAN_API int plan_trace_body_line(const plan_trace *t);
/* The region's boundary inputs and outputs, in the plan's order. */
PLAN_API int plan_trace_ninputs(const plan_trace *t);
PLAN_API const char *plan_trace_input_name(const plan_trace *t, int k);
PLAN_API int plan_trace_noutputs(const plan_trace *t);
PLAN_API const char *plan_trace_output_name(const plan_trace *t, int k);
/* The handle of boundary input k: its tensor in its boundary placement. */
PLAN_API int plan_trace_input(plan_trace *t, int k);

/* ---- what the body does ---------------------------------------------------
 */

/* Attributes of the next plan_trace_op, by the op's schema names
 * (spec/plan-format.md §2.4); unset ones take their defaults. */
PLAN_API int plan_trace_attr_int(plan_trace *t, const char *name, int64_t v);
PLAN_API int plan_trace_attr_ints(plan_trace *t, const char *name,
                                  const int64_t *v, int n);
PLAN_API int plan_trace_attr_float(plan_trace *t, const char *name, double v);
PLAN_API int plan_trace_attr_bool(plan_trace *t, const char *name, int v);
PLAN_API int plan_trace_attr_string(plan_trace *t, const char *name,
                                    const char *v);
/* Op `op` (a registry name: "matmul", "gelu", ...) on the blocks of handles
 * in[0..nin): its nout outputs' handles into out. Refused (PLAN_EINVALID,
 * with the reason) when the shapes do not fit the op or its factor rule
 * refuses the inputs' placements. */
PLAN_API int plan_trace_op(plan_trace *t, const char *op, const int *in,
                           int nin, int *out, int nout);
/* One collective along mesh axis `axis` on handle h: "all_reduce" (P -> R),
 * "all_gather" (S(dim) -> R), "reduce_scatter" (P -> S(dim)) or
 * "all_to_all" (S(dim) -> S(to_dim)); dim and to_dim -1 where unused. The
 * new handle, or PLAN_EINVALID when h's placement does not allow it. */
PLAN_API int plan_trace_collective(plan_trace *t, const char *kind, int h,
                                   const char *axis, int dim, int to_dim);
/* Binds region output k to handle h: same shape, and the output's boundary
 * placement (else PLAN_EINVALID naming both). */
PLAN_API int plan_trace_set_output(plan_trace *t, int k, int h);
/* "name [dims] PLACEMENT" of handle h, into buf; its length. */
PLAN_API int plan_trace_describe(const plan_trace *t, int h, char *buf,
                                 size_t n);

/* Verifying a plan with manual regions under a tracer: plan_verify_traced,
 * in libplan/verify.h (the verifier's library). */

#ifdef __cplusplus
}
#endif
#endif
