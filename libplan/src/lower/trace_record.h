/* Internal to manual regions: the trace a region's body leaves (trace.c),
 * which the lowering turns into steps (lower.c). See libplan/trace.h. */
#ifndef LIBPLAN_TRACE_RECORD_H
#define LIBPLAN_TRACE_RECORD_H

#include "autodiff/autodiff_build.h"
#include "ir/ir.h"
#include "libplan/trace.h"
#include "lower/redist.h"

typedef enum trace_rec_kind {
  TRACE_INPUT,      /* handle h = boundary input (its tensor, placement) */
  TRACE_OP,         /* program op `op` (traced) from handles in[] to out[] */
  TRACE_COLLECTIVE, /* one redistribution step: in[0] -> out[0] */
  TRACE_OUTPUT      /* region output tensor `tensor` = handle in[0] */
} trace_rec_kind;

typedef struct trace_rec {
  trace_rec_kind kind;
  int region;
  int op, tensor;
  int nin, nout;
  int in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_redist_step step;
} trace_rec;

typedef struct trace_attr {
  const char *name; /* the caller's, valid until the op */
  plan_attr_type type;
  int64_t i;
  double f;
  bool b;
  const char *s;
  const int64_t *ints;
  int nints;
} trace_attr;

struct plan_trace {
  const plan_plan *p; /* the plan whose regions are traced */
  plan_ad_ctx ad;     /* ad.p: its program, extended by the traced ops */
  int norig_ops, norig_tensors;
  int region; /* the region being traced */
  /* handles: a tensor of ad.p in a placement */
  int *h_tensor;
  plan_placement *h_pl;
  int nh, cap_ht, cap_hpl;
  trace_attr attrs[PLAN_MAX_ATTRS * 2];
  int nattrs;
  trace_rec *recs;
  int nrecs, cap_recs;
  bool *out_set;  /* the current region's outputs bound */
  int traced_ops; /* ops made by the current region, for their names */
};

/* Traces every manual region of p with `tracer` into a new trace (free
 * with plan_trace_free; its program, ad.p, is taken by the lowering). */
int plan_trace_run(plan_trace **out, const plan_plan *p,
                   plan_region_tracer tracer, void *user);
void plan_trace_free(plan_trace *t);

#endif
