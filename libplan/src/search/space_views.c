/* The reading side of libplan/space.h: placements from and to their
 * compact spelling, op kinds and their operand counts, and a plan's
 * decisions (an op's strategy, a leaf's or an output's placement, pinned
 * ops) as values. */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "libplan/space.h"
#include "read/plan_read.h"

/* ---- the compact spelling ------------------------------------------------ */

int plan_placement_parse_text(plan_placement *out, const char *text,
                              int naxes) {
  if (!out || !text)
    return plan_failf(PLAN_EUSAGE, "plan_placement_parse_text: NULL argument");
  if (naxes < 0 || naxes > PLAN_MAX_MESH_AXES)
    return plan_failf(PLAN_EUSAGE,
                      "plan_placement_parse_text: a mesh has 0..%d axes, not "
                      "%d",
                      PLAN_MAX_MESH_AXES, naxes);
  char err[200];
  size_t off = 0;
  plan_placement pl;
  if (plan_placement_parse(&pl, text, strlen(text), naxes, err, sizeof err,
                           &off))
    return plan_failf(PLAN_EINVALID, "placement '%s': %s (at byte %zu)", text,
                      err, off);
  *out = pl;
  return PLAN_OK;
}

int plan_placement_resolve(plan_placement *pl, int rank) {
  if (!pl)
    return plan_failf(PLAN_EUSAGE, "plan_placement_resolve: NULL argument");
  char err[200];
  if (plan_placement_normalize(pl, rank, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "placement: %s", err);
  return PLAN_OK;
}

int plan_placement_format_text(char *buf, size_t size,
                               const plan_placement *pl) {
  if (!buf || !size || !pl || pl->naxes > PLAN_MAX_MESH_AXES)
    return plan_failf(PLAN_EUSAGE, "plan_placement_format_text: NULL "
                                   "argument, no room or too many axes");
  if (size >= PLAN_PLACEMENT_STRLEN) { /* the common case: no copy */
    plan_placement_format(pl, buf);
    return PLAN_OK;
  }
  char tmp[PLAN_PLACEMENT_STRLEN];
  size_t n = strlen(plan_placement_format(pl, tmp));
  size_t keep = n < size ? n : size - 1;
  memcpy(buf, tmp, keep);
  buf[keep] = '\0';
  if (n >= size)
    return plan_failf(PLAN_ELIMIT, "placement '%s' needs %zu bytes, not %zu",
                      tmp, n + 1, size);
  return PLAN_OK;
}

/* The sinks of shard ratios S(d|w0:w1): one that finds the sets a plan
 * holds, one that interns new ones into it. */
static int find_set(void *ctx, int axis, const int64_t *w, int n, char *err,
                    size_t errsz) {
  const plan_plan *p = ctx;
  int k = plan_ratios_find(&p->mesh, axis, w, n);
  if (!k)
    snprintf(err, errsz,
             "these shard ratios are not a set of the plan (a plan being "
             "changed takes new ones)");
  return k;
}

static int intern_set(void *ctx, int axis, const int64_t *w, int n, char *err,
                      size_t errsz) {
  plan_plan *p = ctx;
  return plan_ratios_intern(&p->mesh, &p->arena, axis, w, n, err, errsz);
}

static int for_tensor(plan_placement *out, const plan_plan *p, void *ctx,
                      bool intern, int tensor, const char *text) {
  if (!out || !p || !text)
    return plan_failf(PLAN_EUSAGE, "plan_placement_for_tensor: NULL argument");
  if (tensor < 0 || tensor >= p->program->ntensors)
    return plan_failf(PLAN_EUSAGE, "plan_placement_for_tensor: no tensor %d",
                      tensor);
  char err[200];
  plan_placement pl;
  plan_ratio_sink sink = {intern ? intern_set : find_set, ctx, 0};
  if (plan_placement_parse_r(&pl, text, strlen(text), p->mesh.naxes, &sink, err,
                             sizeof err, NULL) ||
      plan_placement_normalize(&pl, p->program->tensors[tensor].rank, err,
                               sizeof err))
    return plan_failf(PLAN_EINVALID, "placement '%s': %s", text, err);
  *out = pl;
  return PLAN_OK;
}

int plan_placement_for_tensor(plan_placement *out, const plan_plan *p,
                              int tensor, const char *text) {
  return for_tensor(out, p, (void *)p, false, tensor, text);
}

int plan_placement_for_tensor_in(plan_placement *out, plan_plan *p, int tensor,
                                 const char *text) {
  return for_tensor(out, p, p, true, tensor, text);
}

int plan_placement_format_in(char *buf, size_t size, const plan_plan *p,
                             const plan_placement *pl) {
  if (!buf || !size || !p || !pl || pl->naxes > PLAN_MAX_MESH_AXES)
    return plan_failf(PLAN_EUSAGE, "plan_placement_format_in: NULL "
                                   "argument, no room or too many axes");
  size_t n =
      plan_placement_format_r(pl, p->has_mesh ? p->mesh.ratios : NULL,
                              p->has_mesh ? p->mesh.nratios : 0, buf, size);
  if (n >= size)
    return plan_failf(PLAN_ELIMIT, "placement '%s' needs %zu bytes, not %zu",
                      buf, n + 1, size);
  return PLAN_OK;
}

/* ---- op kinds (plan_op_kind_name and plan_op_kind_from_name: ops.c) ------ */

int plan_op_kind_count(void) {
  return PLAN_OP_COUNT;
}

int plan_op_kind_operands(int *min_in, int *max_in, int *min_out, int *max_out,
                          int kind) {
  const plan_op_info *info = plan_op_info_get(kind);
  if (!info)
    return plan_failf(PLAN_ENOTFOUND, "no op kind %d (0..%d)", kind,
                      PLAN_OP_COUNT - 1);
  if (min_in)
    *min_in = info->min_in;
  if (max_in)
    *max_in = info->max_in;
  if (min_out)
    *min_out = info->min_out;
  if (max_out)
    *max_out = info->max_out;
  return PLAN_OK;
}

/* ---- decisions as values ------------------------------------------------- */

int plan_get_strategy(plan_op_strategy *out, const plan_plan *p, int op) {
  if (!out || !p || !p->has_mesh || op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE, "plan_get_strategy: no op %d or no mesh",
                      op);
  const plan_op *o = &p->program->ops[op];
  const plan_strategy *s = p->strategies ? &p->strategies[op] : NULL;
  if (!s || !s->set)
    return plan_failf(PLAN_ENOTFOUND, "op '%s' has no strategy", o->name);
  if (o->nin)
    memcpy(out->in, s->in, sizeof *out->in * (size_t)o->nin);
  if (o->nout)
    memcpy(out->out, s->out, sizeof *out->out * (size_t)o->nout);
  return PLAN_OK;
}

int plan_get_placement(plan_placement *out, const plan_plan *p, int tensor) {
  if (!out || !p || !p->has_mesh || tensor < 0 ||
      tensor >= p->program->ntensors ||
      p->program->tensors[tensor].producer >= 0)
    return plan_failf(PLAN_EUSAGE,
                      "plan_get_placement: tensor %d is not a leaf", tensor);
  const plan_tensor_pl *tp = p->placements ? &p->placements[tensor] : NULL;
  if (!tp || !tp->set)
    return plan_failf(PLAN_ENOTFOUND, "the plan states no placement of '%s'",
                      p->program->tensors[tensor].name);
  *out = tp->pl;
  return PLAN_OK;
}

int plan_get_output_placement(plan_placement *out, const plan_plan *p, int k) {
  if (!out || !p || !p->has_mesh || k < 0 || k >= p->program->noutputs)
    return plan_failf(PLAN_EUSAGE, "plan_get_output_placement: no output %d",
                      k);
  const plan_tensor_pl *tp = p->out_pl ? &p->out_pl[k] : NULL;
  if (!tp || !tp->set)
    return plan_failf(PLAN_ENOTFOUND,
                      "the plan states no placement of output '%s'",
                      p->program->tensors[p->program->outputs[k]].name);
  *out = tp->pl;
  return PLAN_OK;
}

int plan_op_pinned(const plan_plan *p, int op) {
  if (!p || op < 0 || op >= p->program->nops)
    return 0;
  for (int i = 0; i < p->nregions; i++) {
    const plan_region *r = &p->regions[i];
    if (r->kind == PLAN_REGION_PINNED && r->ops && r->ops[op])
      return 1;
  }
  return 0;
}
