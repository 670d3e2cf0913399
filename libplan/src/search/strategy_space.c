/* The strategy space of an op, and in-place edits of a plan's decisions
 * (libplan/space.h; the reading side and the text forms are
 * space_views.c, the pricing cost/cost.c). The edits check the placements
 * they are given: the core reads them unchecked from then on. */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "libplan/space.h"
#include "read/plan_read.h"

/* The dim of operand `opnd` whose major factor is f, -1 when the operand
 * does not carry f, -2 when it carries f only as a minor factor of a
 * merged dim (not expressible as a shard of that dim). */
static int major_dim(const plan_rule *r, int opnd, int f) {
  const plan_rule_operand *o = &r->operand[opnd];
  int found = -1;
  for (int d = 0; d < o->rank; d++)
    for (int k = 0; k < o->nf[d]; k++)
      if (o->f[d][k] == f) {
        if (k == 0)
          return d;
        found = -2;
      }
  return found;
}

/* The input placements for one choice per axis (choice[a] = factor, or -1
 * for R); false when some choice is not expressible. */
static bool inputs_for(const plan_rule *r, const int *choice, int naxes,
                       int nin, plan_placement *in) {
  for (int j = 0; j < nin; j++) {
    plan_placement_replicated(&in[j], naxes);
    for (int a = 0; a < naxes; a++) {
      int f = choice[a];
      if (f < 0)
        continue;
      int d = major_dim(r, j, f);
      if (d == -2)
        return false;
      if (d >= 0) {
        in[j].ax[a].kind = PLAN_PL_S;
        in[j].ax[a].dim = (int8_t)d;
        in[j].ax[a].level = -1;
      } else if (r->operand[j].additive &&
                 r->factors[f].kind == PLAN_FACTOR_REDUCTION) {
        in[j].ax[a].kind = PLAN_PL_P;
        in[j].ax[a].reduce = PLAN_RED_SUM;
      }
    }
  }
  return true;
}

int plan_op_strategies(plan_op_strategy **out, int *count, const plan_plan *p,
                       int op) {
  if (!out || !count || !p)
    return plan_failf(PLAN_EUSAGE, "plan_op_strategies: NULL argument");
  *out = NULL;
  *count = 0;
  const plan_program *prog = p->program;
  if (!p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_op_strategies: the plan has no mesh");
  if (op < 0 || op >= prog->nops)
    return plan_failf(PLAN_EUSAGE, "plan_op_strategies: no op %d", op);
  const plan_op *o = &prog->ops[op];
  const plan_mesh *m = &p->mesh;
  plan_shape in[PLAN_MAX_OPERANDS], outs[PLAN_MAX_OPERANDS];
  for (int j = 0; j < o->nin; j++)
    plan_shape_of(&prog->tensors[o->in[j]], &in[j]);
  for (int k = 0; k < o->nout; k++)
    plan_shape_of(&prog->tensors[o->out[k]], &outs[k]);
  plan_rule *rule = malloc(sizeof *rule);
  if (!rule)
    return plan_oom();
  char err[256];
  int rc = plan_op_rule(rule, o->kind, in, o->nin, outs, o->nout, o->attrs, err,
                        sizeof err);
  if (rc) {
    free(rule);
    return plan_failf(PLAN_EINVALID, "op '%s': no sharding rule: %s", o->name,
                      err);
  }
  /* the choices of each axis: R, then every shardable factor */
  int nchoice[PLAN_MAX_MESH_AXES], total = 1;
  for (int a = 0; a < m->naxes; a++) {
    bool fixed =
        m->axis_sizes[a] < 2 || (p->pipeline.present && p->pipeline.axis == a);
    nchoice[a] = fixed ? 1 : 1 + rule->nfactors;
    if (total > (1 << 20) / nchoice[a]) {
      free(rule);
      return plan_failf(PLAN_EINVALID, "op '%s': too many strategies to list",
                        o->name);
    }
    total *= nchoice[a];
  }
  plan_op_strategy *list = malloc(sizeof *list * (size_t)total);
  if (!list) {
    free(rule);
    return plan_oom();
  }
  int n = 0;
  for (int code = 0; code < total; code++) {
    int choice[PLAN_MAX_MESH_AXES], c = code;
    bool ok = true;
    for (int a = m->naxes - 1; a >= 0; a--) { /* the last axis varies fastest */
      choice[a] = c % nchoice[a] - 1;
      c /= nchoice[a];
      if (choice[a] >= 0 &&
          rule->factors[choice[a]].kind == PLAN_FACTOR_NEED_REPLICATION)
        ok = false;
    }
    plan_op_strategy *s = &list[n];
    if (!ok || !inputs_for(rule, choice, m->naxes, o->nin, s->in))
      continue;
    bool used = true; /* a factor no operand shards is no new strategy */
    for (int a = 0; a < m->naxes && used; a++) {
      if (choice[a] < 0)
        continue;
      used = false;
      for (int j = 0; j < o->nin && !used; j++)
        used = s->in[j].ax[a].kind != PLAN_PL_R;
    }
    if (!used)
      continue;
    char e2[256];
    if (plan_rule_infer_out(rule, o->kind, o->attrs, s->in, m->axis_sizes,
                            m->axis_names, s->out, e2, sizeof e2))
      continue;
    bool valid = true;
    for (int j = 0; j < o->nin && valid; j++)
      valid = !plan_placement_normalize(&s->in[j], in[j].rank, e2, sizeof e2);
    for (int k = 0; k < o->nout && valid; k++)
      valid =
          !plan_placement_normalize(&s->out[k], outs[k].rank, e2, sizeof e2);
    if (valid)
      n++;
  }
  free(rule);
  *out = list;
  *count = n;
  return PLAN_OK;
}

/* ---- edits ------------------------------------------------------------ */

/* True when pl is a placement the core may read for a tensor of `rank` on
 * a mesh of `naxes` axes: the axis count, kinds and reduces in range, S
 * dims inside the rank and levels inside the mesh. */
static bool fits(const plan_placement *pl, int naxes, int rank) {
  if (pl->naxes != naxes)
    return false;
  for (int a = 0; a < naxes; a++) {
    const plan_axis_pl *e = &pl->ax[a];
    if (e->kind == PLAN_PL_S) {
      if (e->dim < 0 || e->dim >= rank || e->level < 0 || e->level >= naxes)
        return false;
    } else if (e->kind == PLAN_PL_P) {
      if (e->reduce >= PLAN_RED_COUNT)
        return false;
    } else if (e->kind != PLAN_PL_R) {
      return false;
    }
  }
  return true;
}

/* PLAN_OK, or PLAN_EINVALID naming `what` and the tensor. */
static int check_placement(const plan_plan *p, int tensor,
                           const plan_placement *pl, const char *what) {
  const plan_tensor *t = &p->program->tensors[tensor];
  if (fits(pl, p->mesh.naxes, t->rank))
    return PLAN_OK;
  char buf[PLAN_PLACEMENT_STRLEN];
  return plan_failf(PLAN_EINVALID,
                    "%s of tensor '%s': '%s' (%d axes) is no normalized "
                    "placement for rank %d on %d mesh axes",
                    what, t->name, plan_placement_format(pl, buf), pl->naxes,
                    t->rank, p->mesh.naxes);
}

/* The placements of op `op`'s operands. */
static int check_operands(const plan_plan *p, int op, const plan_placement *in,
                          const plan_placement *out) {
  const plan_op *o = &p->program->ops[op];
  int rc;
  for (int j = 0; j < o->nin; j++)
    if ((rc = check_placement(p, o->in[j], &in[j], "input")))
      return rc;
  for (int k = 0; k < o->nout; k++)
    if ((rc = check_placement(p, o->out[k], &out[k], "output")))
      return rc;
  return PLAN_OK;
}

static plan_strategy *strategies_of(plan_plan *p) {
  if (!p->strategies) {
    size_t n = (size_t)p->program->nops + 1;
    p->strategies = plan_arena_alloc(&p->arena, sizeof(plan_strategy) * n);
    if (p->strategies)
      memset(p->strategies, 0, sizeof(plan_strategy) * n);
  }
  return p->strategies;
}

int plan_set_strategy(plan_plan *p, int op, const plan_placement *in,
                      const plan_placement *out) {
  if (!p || !p->has_mesh || op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE, "plan_set_strategy: no op %d or no mesh",
                      op);
  const plan_op *o = &p->program->ops[op];
  if ((!in && o->nin) || (!out && o->nout))
    return plan_failf(PLAN_EUSAGE,
                      "plan_set_strategy: op '%s': NULL "
                      "placements",
                      o->name);
  int rc;
  if ((rc = check_operands(p, op, in, out)))
    return rc;
  plan_strategy *all = strategies_of(p);
  if (!all)
    return plan_oom();
  plan_strategy *s = &all[op];
  /* the arrays of a strategy read from a file may be shared by a glob's
   * ops: give this op its own */
  plan_placement *pin =
      plan_arena_alloc(&p->arena, sizeof *pin * (size_t)(o->nin + 1));
  plan_placement *pout =
      plan_arena_alloc(&p->arena, sizeof *pout * (size_t)(o->nout + 1));
  if (!pin || !pout)
    return plan_oom();
  if (o->nin)
    memcpy(pin, in, sizeof *pin * (size_t)o->nin);
  if (o->nout)
    memcpy(pout, out, sizeof *pout * (size_t)o->nout);
  s->in = pin;
  s->out = pout;
  s->set = true;
  s->pattern = NULL;
  memset(&s->pos, 0, sizeof s->pos);
  return PLAN_OK;
}

int plan_clear_strategy(plan_plan *p, int op) {
  if (!p || op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE, "plan_clear_strategy: no op %d", op);
  if (p->strategies)
    p->strategies[op].set = false;
  return PLAN_OK;
}

int plan_set_placement(plan_plan *p, int tensor, const plan_placement *pl) {
  if (!p || !p->has_mesh || tensor < 0 || tensor >= p->program->ntensors ||
      !p->placements || p->program->tensors[tensor].producer >= 0)
    return plan_failf(PLAN_EUSAGE,
                      "plan_set_placement: tensor %d is not a leaf", tensor);
  int rc;
  if (pl && (rc = check_placement(p, tensor, pl, "placement")))
    return rc;
  plan_tensor_pl *tp = &p->placements[tensor];
  tp->set = pl != NULL;
  if (pl)
    tp->pl = *pl;
  memset(&tp->pos, 0, sizeof tp->pos);
  return PLAN_OK;
}

int plan_set_output_placement(plan_plan *p, int k, const plan_placement *pl) {
  if (!p || !p->has_mesh || k < 0 || k >= p->program->noutputs || !p->out_pl)
    return plan_failf(PLAN_EUSAGE, "plan_set_output_placement: no output %d",
                      k);
  int rc;
  if (pl &&
      (rc = check_placement(p, p->program->outputs[k], pl, "output placement")))
    return rc;
  plan_tensor_pl *tp = &p->out_pl[k];
  tp->set = pl != NULL;
  if (pl)
    tp->pl = *pl;
  memset(&tp->pos, 0, sizeof tp->pos);
  return PLAN_OK;
}

int plan_set_mesh_devices(plan_plan *p, const int64_t *devices) {
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_set_mesh_devices: no mesh");
  plan_mesh *m = &p->mesh;
  if (!devices) {
    m->devices = NULL;
    return PLAN_OK;
  }
  int64_t n = m->ndevices;
  bool *seen = calloc((size_t)n + 1, sizeof(bool));
  if (!seen)
    return plan_oom();
  for (int64_t r = 0; r < n; r++) {
    if (devices[r] < 0 || devices[r] >= n || seen[devices[r]]) {
      free(seen);
      return plan_failf(PLAN_EINVALID,
                        "device order: %lld is not a permutation of 0..%lld",
                        (long long)devices[r], (long long)(n - 1));
    }
    seen[devices[r]] = true;
  }
  free(seen);
  /* the identity is iota, as the reader takes it: the same plan hash */
  int64_t r = 0;
  while (r < n && devices[r] == r)
    r++;
  if (r == n) {
    m->devices = NULL;
    return PLAN_OK;
  }
  int64_t *copy = plan_arena_alloc(&p->arena, sizeof(int64_t) * (size_t)n);
  if (!copy)
    return plan_oom();
  memcpy(copy, devices, sizeof(int64_t) * (size_t)n);
  m->devices = copy;
  return PLAN_OK;
}
