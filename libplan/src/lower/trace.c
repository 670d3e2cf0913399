/* Manual regions, traced (libplan/trace.h): the builder a tracer calls
 * while it runs a region's body. Each op the body applies becomes an op of
 * a copy of the program, appended after the original ops (their indices
 * unchanged), on the global tensors under the placements its factor rule
 * derives from its inputs'; each collective one redistribution step. The
 * records, in order, are what the lowering emits at the region's place
 * (lower.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "read/program_read.h"
#include "lower/trace_record.h"

static const plan_region *cur(const plan_trace *t) {
  return &t->p->regions[t->region];
}

const char *plan_trace_region(const plan_trace *t) {
  return cur(t)->name;
}
const char *plan_trace_body(const plan_trace *t) {
  return cur(t)->body;
}
const char *plan_trace_file(const plan_trace *t) {
  return t->p->file ? t->p->file : "";
}
int plan_trace_body_line(const plan_trace *t) {
  return cur(t)->body_line;
}
int plan_trace_ninputs(const plan_trace *t) {
  return cur(t)->ninputs;
}
int plan_trace_noutputs(const plan_trace *t) {
  return cur(t)->noutputs;
}

const char *plan_trace_input_name(const plan_trace *t, int k) {
  const plan_region *r = cur(t);
  return k >= 0 && k < r->ninputs
             ? t->p->program->tensors[r->inputs[k].tensor].name
             : NULL;
}

const char *plan_trace_output_name(const plan_trace *t, int k) {
  const plan_region *r = cur(t);
  return k >= 0 && k < r->noutputs
             ? t->p->program->tensors[r->outputs[k].tensor].name
             : NULL;
}

/* An error about the region being traced. */
static int fail(const plan_trace *t, const char *fmt, const char *what) {
  const plan_region *r = cur(t);
  char msg[600];
  snprintf(msg, sizeof msg, fmt, what ? what : "");
  return plan_fail(PLAN_EINVALID, t->p->file, r->pos.line, r->pos.col,
                   "manual region '%s': %s", r->name, msg);
}

static int new_handle(plan_trace *t, int tensor, const plan_placement *pl) {
  int rc = plan_grow((void **)&t->h_tensor, &t->cap_ht, t->nh + 1, sizeof(int));
  if (!rc)
    rc = plan_grow((void **)&t->h_pl, &t->cap_hpl, t->nh + 1,
                   sizeof(plan_placement));
  if (rc)
    return rc;
  t->h_tensor[t->nh] = tensor;
  t->h_pl[t->nh] = *pl;
  return t->nh++;
}

static trace_rec *new_rec(plan_trace *t, trace_rec_kind kind) {
  if (plan_grow((void **)&t->recs, &t->cap_recs, t->nrecs + 1,
                sizeof(trace_rec)))
    return NULL;
  trace_rec *r = &t->recs[t->nrecs++];
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->region = t->region;
  r->op = r->tensor = -1;
  return r;
}

static bool valid(const plan_trace *t, int h) {
  return h >= 0 && h < t->nh;
}

int plan_trace_input(plan_trace *t, int k) {
  const plan_region *r = cur(t);
  if (k < 0 || k >= r->ninputs)
    return plan_failf(PLAN_EUSAGE, "manual region '%s' has no input %d",
                      r->name, k);
  int h = new_handle(t, r->inputs[k].tensor, &r->inputs[k].pl);
  trace_rec *rec = h < 0 ? NULL : new_rec(t, TRACE_INPUT);
  if (!rec)
    return PLAN_ENOMEM;
  rec->tensor = r->inputs[k].tensor;
  rec->nout = 1;
  rec->out[0] = h;
  return h;
}

int plan_trace_describe(const plan_trace *t, int h, char *buf, size_t n) {
  if (!valid(t, h) || !buf || !n)
    return plan_failf(PLAN_EUSAGE, "plan_trace_describe: no handle %d", h);
  const plan_tensor *x = &t->ad.p->tensors[t->h_tensor[h]];
  char pl[PLAN_PLACEMENT_STRLEN];
  plan_placement_format(&t->h_pl[h], pl);
  size_t u = (size_t)snprintf(buf, n, "%s [", x->name);
  for (int d = 0; d < x->rank && u < n; d++)
    u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? ", " : "",
                          (long long)x->dims[d]);
  if (u < n)
    u += (size_t)snprintf(buf + u, n - u, "] %s", pl);
  return (int)(u < n ? u : n - 1);
}

/* ---- attributes -------------------------------------------------------------
 */

static int stage(plan_trace *t, const char *name, trace_attr a) {
  if (!name)
    return plan_failf(PLAN_EUSAGE, "an attribute needs a name");
  if (t->nattrs == (int)(sizeof t->attrs / sizeof *t->attrs))
    return fail(t, "too many attributes for one op%s", "");
  a.name = name;
  t->attrs[t->nattrs++] = a;
  return PLAN_OK;
}

int plan_trace_attr_int(plan_trace *t, const char *name, int64_t v) {
  trace_attr a = {0};
  a.type = PLAN_ATTR_INT;
  a.i = v;
  a.f = (double)v;
  return stage(t, name, a);
}

int plan_trace_attr_ints(plan_trace *t, const char *name, const int64_t *v,
                         int n) {
  trace_attr a = {0};
  a.type = PLAN_ATTR_INTS;
  a.ints = v;
  a.nints = n;
  return stage(t, name, a);
}

int plan_trace_attr_float(plan_trace *t, const char *name, double v) {
  trace_attr a = {0};
  a.type = PLAN_ATTR_FLOAT;
  a.f = v;
  return stage(t, name, a);
}

int plan_trace_attr_bool(plan_trace *t, const char *name, int v) {
  trace_attr a = {0};
  a.type = PLAN_ATTR_BOOL;
  a.b = v != 0;
  return stage(t, name, a);
}

int plan_trace_attr_string(plan_trace *t, const char *name, const char *v) {
  trace_attr a = {0};
  a.type = PLAN_ATTR_STRING;
  a.s = v;
  return stage(t, name, a);
}

/* The staged attributes into op kind's values (defaults elsewhere). */
static int take_attrs(plan_trace *t, int kind, plan_attr_val *av) {
  const plan_op_info *info = plan_op_info_get(kind);
  plan_ad_attrs(kind, av);
  int rc = PLAN_OK;
  for (int i = 0; i < t->nattrs && !rc; i++) {
    const trace_attr *a = &t->attrs[i];
    int k = 0;
    while (k < info->nattrs && strcmp(info->attrs[k].name, a->name))
      k++;
    char what[160];
    snprintf(what, sizeof what, "%s has no attribute '%s'", info->name,
             a->name);
    if (k == info->nattrs) {
      rc = fail(t, "%s", what);
      break;
    }
    plan_attr_val *v = &av[k];
    plan_attr_type want = info->attrs[k].type;
    v->present = true;
    if (want == PLAN_ATTR_FLOAT &&
        (a->type == PLAN_ATTR_FLOAT || a->type == PLAN_ATTR_INT))
      v->f = a->f;
    else if (want == PLAN_ATTR_INT && a->type == PLAN_ATTR_INT)
      v->i = a->i;
    else if (want == PLAN_ATTR_BOOL && a->type == PLAN_ATTR_BOOL)
      v->b = a->b;
    else if (want == PLAN_ATTR_STRING && a->type == PLAN_ATTR_STRING)
      v->s = a->s;
    else if (want == PLAN_ATTR_INTS && a->type == PLAN_ATTR_INTS)
      plan_ad_set_ints(v, a->ints, a->nints);
    else if (want == PLAN_ATTR_INTS && a->type == PLAN_ATTR_INT)
      plan_ad_set_ints(v, &a->i, 1);
    else {
      snprintf(what, sizeof what, "%s's attribute '%s' has another type",
               info->name, a->name);
      rc = fail(t, "%s", what);
    }
  }
  t->nattrs = 0;
  return rc;
}

/* ---- ops and collectives ----------------------------------------------------
 */

int plan_trace_op(plan_trace *t, const char *op, const int *in, int nin,
                  int *out, int nout) {
  int kind = op ? plan_op_kind_from_name(op) : -1;
  if (kind < 0) {
    t->nattrs = 0;
    return fail(t, "no op '%s' in the registry", op);
  }
  if (nin < 0 || nout < 1 || nin + nout > PLAN_MAX_OPERANDS || !out) {
    t->nattrs = 0;
    return fail(t, "%s: a wrong number of operands", op);
  }
  for (int j = 0; j < nin; j++)
    if (!valid(t, in[j])) {
      t->nattrs = 0;
      return fail(t, "%s: an input that is no tensor of the region", op);
    }
  plan_attr_val av[PLAN_MAX_ATTRS];
  int rc = take_attrs(t, kind, av);
  if (rc)
    return rc;
  const plan_op_info *info = plan_op_info_get(kind);
  plan_shape si[PLAN_MAX_OPERANDS], so[PLAN_MAX_OPERANDS];
  plan_placement pin[PLAN_MAX_OPERANDS], pout[PLAN_MAX_OPERANDS];
  for (int j = 0; j < nin; j++) {
    plan_shape_of(&t->ad.p->tensors[t->h_tensor[in[j]]], &si[j]);
    pin[j] = t->h_pl[in[j]];
  }
  char err[256] = "", what[400];
  if (info->infer(si, nin, av, so, nout, err, sizeof err)) {
    size_t n = strlen(op); /* the reason may name the op already */
    bool named = !strncmp(err, op, n) && err[n] == ':';
    snprintf(what, sizeof what, "%s%s%s", named ? "" : op, named ? "" : ": ",
             err);
    return fail(t, "%s", what);
  }
  plan_rule rule;
  const plan_mesh *m = &t->p->mesh;
  if (plan_op_rule(&rule, kind, si, nin, so, nout, av, err, sizeof err) ||
      plan_rule_infer_out_r(&rule, kind, av, pin, m->axis_sizes, m->axis_names,
                            m->ratios, m->nratios, pout, err, sizeof err)) {
    snprintf(what, sizeof what, "%s on blocks in these placements: %s", op,
             err);
    return fail(t, "%s", what);
  }
  for (int k = 0; k < nout; k++)
    if (plan_placement_normalize(&pout[k], so[k].rank, err, sizeof err))
      return fail(t, "%s", err);
  char *name = plan_arena_printf(&t->ad.p->arena, "%s/%d.%s", cur(t)->name,
                                 ++t->traced_ops, op);
  if (!name)
    return plan_oom();
  int tin[PLAN_MAX_OPERANDS], outs[PLAN_MAX_OPERANDS];
  for (int j = 0; j < nin; j++)
    tin[j] = t->h_tensor[in[j]];
  rc = plan_ad_emit_named(&t->ad, kind, name, av, tin, nin, nout, outs);
  if (rc < 0)
    return rc;
  for (int k = 0; k < nout; k++)
    if ((out[k] = new_handle(t, outs[k], &pout[k])) < 0)
      return out[k];
  trace_rec *rec = new_rec(t, TRACE_OP);
  if (!rec)
    return PLAN_ENOMEM;
  rec->op = t->ad.p->nops - 1;
  rec->nin = nin;
  rec->nout = nout;
  memcpy(rec->in, in, sizeof(int) * (size_t)nin);
  memcpy(rec->out, out, sizeof(int) * (size_t)nout);
  return out[0];
}

int plan_trace_collective(plan_trace *t, const char *kind, int h,
                          const char *axis, int dim, int to_dim) {
  static const struct {
    const char *name;
    plan_redist_kind kind;
  } kinds[] = {{"all_reduce", PLAN_REDIST_ALL_REDUCE},
               {"all_gather", PLAN_REDIST_ALL_GATHER},
               {"reduce_scatter", PLAN_REDIST_REDUCE_SCATTER},
               {"all_to_all", PLAN_REDIST_ALL_TO_ALL}};
  int ki = 0, n = (int)(sizeof kinds / sizeof *kinds);
  while (ki < n && (!kind || strcmp(kinds[ki].name, kind)))
    ki++;
  if (ki == n)
    return fail(t,
                "no collective '%s' (all_reduce, all_gather, "
                "reduce_scatter, all_to_all)",
                kind);
  if (!valid(t, h))
    return fail(t, "%s of something that is no tensor of the region", kind);
  const plan_mesh *m = &t->p->mesh;
  int a = 0;
  while (a < m->naxes && (!axis || strcmp(m->axis_names[a], axis)))
    a++;
  if (a == m->naxes)
    return fail(t, "no mesh axis '%s'", axis);
  const plan_tensor *x = &t->ad.p->tensors[t->h_tensor[h]];
  plan_placement before = t->h_pl[h], after = before;
  plan_axis_pl *e = &after.ax[a];
  char what[300], pl[PLAN_PLACEMENT_STRLEN];
  plan_placement_format(&before, pl);
  snprintf(what, sizeof what, "%s along '%s' of '%s' in %s", kind, axis,
           x->name, pl);
  bool ok = true;
  switch (kinds[ki].kind) {
  case PLAN_REDIST_ALL_REDUCE:
    ok = e->kind == PLAN_PL_P;
    memset(e, 0, sizeof *e);
    break;
  case PLAN_REDIST_ALL_GATHER:
    ok = e->kind == PLAN_PL_S && (dim < 0 || e->dim == dim);
    memset(e, 0, sizeof *e);
    break;
  case PLAN_REDIST_REDUCE_SCATTER:
    ok = e->kind == PLAN_PL_P && dim >= 0 && dim < x->rank;
    memset(e, 0, sizeof *e);
    e->kind = PLAN_PL_S;
    e->dim = (int8_t)dim;
    e->level = -1;
    break;
  default: /* all_to_all */
    ok = e->kind == PLAN_PL_S && (dim < 0 || e->dim == dim) && to_dim >= 0 &&
         to_dim < x->rank;
    e->dim = (int8_t)to_dim;
    e->level = -1;
    break;
  }
  for (int b = 0; b < m->naxes && ok; b++) /* nesting levels recomputed */
    if (after.ax[b].kind == PLAN_PL_S && b != a)
      after.ax[b].level = -1;
  char err[256] = "";
  plan_redist_plan rp;
  if (ok &&
      (plan_placement_normalize(&after, x->rank, err, sizeof err) ||
       plan_redistribute_r(&rp, x->dims, x->rank, plan_dtype_size(x->dtype),
                           m->axis_sizes, m->naxes, m->ratios, m->nratios,
                           &before, &after, err, sizeof err)))
    ok = false;
  if (ok && (rp.nsteps != 1 || rp.steps[0].kind != kinds[ki].kind ||
             rp.steps[0].axis != a)) {
    ok = false;
    snprintf(err, sizeof err, "it is not one %s step", kind);
  }
  if (!ok) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what,
             err[0] ? err : "the placement along that axis does not allow it");
    return fail(t, "%s", msg);
  }
  int nh = new_handle(t, t->h_tensor[h], &after);
  trace_rec *rec = nh < 0 ? NULL : new_rec(t, TRACE_COLLECTIVE);
  if (!rec)
    return PLAN_ENOMEM;
  rec->nin = rec->nout = 1;
  rec->in[0] = h;
  rec->out[0] = nh;
  rec->step = rp.steps[0];
  return nh;
}

int plan_trace_set_output(plan_trace *t, int k, int h) {
  const plan_region *r = cur(t);
  if (k < 0 || k >= r->noutputs)
    return plan_failf(PLAN_EUSAGE, "manual region '%s' has no output %d",
                      r->name, k);
  if (!valid(t, h))
    return fail(t, "output '%s' is no tensor of the region",
                plan_trace_output_name(t, k));
  const plan_boundary *b = &r->outputs[k];
  const plan_tensor *want = &t->ad.p->tensors[b->tensor];
  const plan_tensor *got = &t->ad.p->tensors[t->h_tensor[h]];
  char msg[600], pg[PLAN_PLACEMENT_STRLEN], pw[PLAN_PLACEMENT_STRLEN];
  bool shape =
      got->rank == want->rank &&
      !memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)want->rank);
  if (!shape || !plan_placement_equal(&t->h_pl[h], &b->pl)) {
    plan_placement_format(&t->h_pl[h], pg);
    plan_placement_format(&b->pl, pw);
    snprintf(msg, sizeof msg,
             "output '%s' comes out as '%s' in %s, where its boundary says "
             "%s%s",
             want->name, got->name, pg, pw,
             shape ? "" : " (and the shapes differ)");
    return fail(t, "%s", msg);
  }
  trace_rec *rec = new_rec(t, TRACE_OUTPUT);
  if (!rec)
    return PLAN_ENOMEM;
  rec->tensor = b->tensor;
  rec->nin = 1;
  rec->in[0] = h;
  t->out_set[k] = true;
  return h;
}

/* ---- a plan's regions -------------------------------------------------------
 */

void plan_trace_free(plan_trace *t) {
  if (!t)
    return;
  plan_ad_copy_end(&t->ad);
  plan_program_free(t->ad.p);
  free(t->h_tensor);
  free(t->h_pl);
  free(t->recs);
  free(t->out_set);
  free(t);
}

int plan_trace_run(plan_trace **out, const plan_plan *p,
                   plan_region_tracer tracer, void *user) {
  *out = NULL;
  plan_trace *t = calloc(1, sizeof *t);
  if (!t)
    return plan_oom();
  t->p = p;
  int rc = plan_ad_copy_begin(&t->ad, p->program);
  if (rc) {
    free(t);
    return rc;
  }
  t->norig_ops = p->program->nops;
  t->norig_tensors = p->program->ntensors;
  for (int r = 0; r < p->nregions && !rc; r++) {
    const plan_region *reg = &p->regions[r];
    if (reg->kind != PLAN_REGION_MANUAL)
      continue;
    t->region = r;
    t->traced_ops = 0;
    t->nattrs = 0;
    free(t->out_set);
    t->out_set = calloc((size_t)reg->noutputs + 1, sizeof(bool));
    if (!t->out_set) {
      rc = plan_oom();
      break;
    }
    rc = tracer(user, t);
    for (int k = 0; !rc && k < reg->noutputs; k++)
      if (!t->out_set[k])
        rc = fail(t, "the body leaves output '%s' unset",
                  plan_trace_output_name(t, k));
  }
  if (rc) {
    plan_trace_free(t);
    return rc;
  }
  *out = t;
  return PLAN_OK;
}
