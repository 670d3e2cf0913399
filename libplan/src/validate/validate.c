/* Static validation of a loaded plan (no numerics): every finding names the
 * op or tensor and the file position it comes from. The list of finding
 * codes is in spec/plan-format.md, "Validation". */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/plan.h"
#include "base/suggest.h"
#include "ir/ops.h"
#include "lower/lower.h"
#include "read/plan_read.h"
#include "schedule/schedule_actions.h"

typedef struct vctx {
  const plan_plan *p;
  const plan_program *prog;
  plan_diags *d;
  int rc; /* first allocation failure */
} vctx;

#define FIND(v, sev, code, obj, pos, file, ...)                                \
  do {                                                                         \
    int rc_ = plan_diags_add((v)->d, sev, code, obj, file, (pos).line,         \
                             (pos).col, __VA_ARGS__);                          \
    if (rc_ && !(v)->rc)                                                       \
      (v)->rc = rc_;                                                           \
  } while (0)

/* Positions of ops and tensors are in the program's file (the plan's own file
 * when inline). */
static const char *pfile(const vctx *v) {
  return v->prog->file;
}
static const char *plfile(const vctx *v) {
  return v->p->file;
}

static void tensor_shape(const plan_tensor *t, plan_shape *s) {
  s->rank = t->rank;
  memcpy(s->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  s->dtype = t->dtype;
}

/* ---- mesh
 * --------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void check_mesh(vctx *v) {
  const plan_mesh *m = &v->p->mesh;
  if (!m->devices)
    return;
  int64_t *s = malloc(sizeof(int64_t) * (size_t)m->ndevices);
  if (!s) {
    v->rc = plan_oom();
    return;
  }
  memcpy(s, m->devices, sizeof(int64_t) * (size_t)m->ndevices);
  qsort(s, (size_t)m->ndevices, sizeof(int64_t), cmp_i64);
  for (int64_t k = 1; k < m->ndevices; k++)
    if (s[k] == s[k - 1]) {
      FIND(v, PLAN_SEV_ERROR, "mesh.devices", "mesh", m->devices_pos, plfile(v),
           "device %lld appears twice in the device order: the order must "
           "give each logical rank its own device",
           (long long)s[k]);
      break;
    }
  free(s);
}

/* ---- names
 * ---------------------------------------------------------------------- */

static void check_uses(vctx *v) {
  for (int i = 0; i < v->p->nuses; i++) {
    const plan_name_use *u = &v->p->uses[i];
    if (u->matches > 0)
      continue;
    if (u->is_glob)
      FIND(v, PLAN_SEV_WARNING, "name.unmatched", u->pattern, u->pos, plfile(v),
           "%s: pattern '%s' matches no %s", u->section, u->pattern,
           u->tensors ? "tensor" : "op");
    else {
      const plan_program *prog = v->p->program;
      char hint[PLAN_HINT_SIZE];
      if (u->tensors)
        plan_hint_field(hint, sizeof hint, u->pattern, prog->tensors,
                        (size_t)prog->ntensors, sizeof *prog->tensors,
                        offsetof(plan_tensor, name));
      else
        plan_hint_field(hint, sizeof hint, u->pattern, prog->ops,
                        (size_t)prog->nops, sizeof *prog->ops,
                        offsetof(plan_op, name));
      FIND(v, PLAN_SEV_ERROR, "name.unknown", u->pattern, u->pos, plfile(v),
           "%s: the program has no %s '%s'%s", u->section,
           u->tensors ? "tensor" : "op", u->pattern, hint);
    }
  }
}

/* ---- placements and strategies
 * ---------------------------------------------------- */

static void check_shards_fit(vctx *v, const char *what, const char *name,
                             const plan_tensor *t, const plan_placement *pl,
                             plan_pos pos) {
  const plan_mesh *m = &v->p->mesh;
  for (int d = 0; d < t->rank; d++) {
    int axes[PLAN_MAX_MESH_AXES];
    int n = plan_placement_dim_axes(pl, d, axes);
    int64_t shards = 1;
    for (int k = 0; k < n; k++)
      shards *= m->axis_sizes[axes[k]];
    if (n && t->dims[d] < shards)
      FIND(v, PLAN_SEV_WARNING, "shard.empty", name, pos, plfile(v),
           "%s of '%s': dim %d (size %lld) is split %lld ways, so some ranks "
           "hold nothing",
           what, t->name, d, (long long)t->dims[d], (long long)shards);
  }
}

static void check_placements(vctx *v) {
  const plan_program *prog = v->prog;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor_pl *tp = &v->p->placements[t];
    if (tp->set)
      check_shards_fit(v, "placement", prog->tensors[t].name, &prog->tensors[t],
                       &tp->pl, tp->pos);
    const plan_tensor *x = &prog->tensors[t];
    if (x->producer < 0 && !plan_dtype_is_float(x->dtype) && !x->has_range &&
        x->role == PLAN_ROLE_INPUT)
      FIND(v, PLAN_SEV_WARNING, "tensor.range", x->name, x->pos, pfile(v),
           "integer input '%s' has no range: the verifier's input generator "
           "needs one (range: [LOW, HIGH])",
           x->name);
  }
}

static bool any_partial(const plan_placement *p) {
  for (int a = 0; a < p->naxes; a++)
    if (p->ax[a].kind == PLAN_PL_P)
      return true;
  return false;
}

/* Ops of repeated layers are the same check again (same kind, shapes,
 * attributes and strategy): a set of the exact inputs of checks that
 * passed lets validation of a 100k-op plan run each distinct one once. */
typedef struct passed_set {
  uint64_t *hash;
  size_t *off, *len; /* into keys */
  size_t cap, count;
  plan_buf keys;
} passed_set;

static void check_key(plan_buf *k, const plan_program *prog, const plan_op *op,
                      const plan_strategy *s) {
  const plan_op_info *info = plan_op_info_get(op->kind);
  plan_buf_reset(k);
  plan_buf_append(k, &op->kind, sizeof op->kind);
  plan_buf_append(k, &op->nin, sizeof op->nin);
  plan_buf_append(k, &op->nout, sizeof op->nout);
  for (int j = 0; j < op->nin + op->nout; j++) {
    const plan_tensor *t =
        &prog->tensors[j < op->nin ? op->in[j] : op->out[j - op->nin]];
    plan_buf_append(k, &t->rank, sizeof t->rank);
    plan_buf_append(k, &t->dtype, sizeof t->dtype);
    plan_buf_append(k, t->dims, sizeof(int64_t) * (size_t)t->rank);
  }
  plan_buf_append(k, s->in, sizeof(plan_placement) * (size_t)op->nin);
  plan_buf_append(k, s->out, sizeof(plan_placement) * (size_t)op->nout);
  for (int a = 0; a < info->nattrs; a++) {
    const plan_attr_val *x = &op->attrs[a];
    plan_buf_append(k, &x->i, sizeof x->i);
    plan_buf_append(k, &x->f, sizeof x->f);
    plan_buf_append(k, &x->b, sizeof x->b);
    plan_buf_append(k, &x->nints, sizeof x->nints);
    if (x->nints > 0)
      plan_buf_append(k, x->ints, sizeof(int64_t) * (size_t)x->nints);
    if (x->s)
      plan_buf_puts(k, x->s);
    plan_buf_putc(k, 0);
  }
}

/* Returns true when the key is in the set; else adds it when add. */
static bool passed_has(passed_set *ps, const plan_buf *k, bool add) {
  uint64_t h = XXH3_64bits(k->data, k->len);
  if (ps->cap) {
    for (size_t i = h & (ps->cap - 1); ps->len[i]; i = (i + 1) & (ps->cap - 1))
      if (ps->hash[i] == h && ps->len[i] == k->len &&
          !memcmp(ps->keys.data + ps->off[i], k->data, k->len))
        return true;
  }
  if (!add)
    return false;
  if ((ps->count + 1) * 2 > ps->cap) {
    size_t ncap = ps->cap ? ps->cap * 2 : 64;
    uint64_t *nh = calloc(ncap, sizeof *nh);
    size_t *no = calloc(ncap, sizeof *no), *nl = calloc(ncap, sizeof *nl);
    if (!nh || !no || !nl) {
      free(nh);
      free(no);
      free(nl);
      return false; /* no memo: the check just runs again next time */
    }
    for (size_t i = 0; i < ps->cap; i++)
      if (ps->len[i]) {
        size_t j = ps->hash[i] & (ncap - 1);
        while (nl[j])
          j = (j + 1) & (ncap - 1);
        nh[j] = ps->hash[i];
        no[j] = ps->off[i];
        nl[j] = ps->len[i];
      }
    free(ps->hash);
    free(ps->off);
    free(ps->len);
    ps->hash = nh;
    ps->off = no;
    ps->len = nl;
    ps->cap = ncap;
  }
  size_t i = h & (ps->cap - 1);
  while (ps->len[i])
    i = (i + 1) & (ps->cap - 1);
  size_t off = ps->keys.len;
  plan_buf_append(&ps->keys, k->data, k->len);
  if (ps->keys.failed)
    return false;
  ps->hash[i] = h;
  ps->off[i] = off;
  ps->len[i] = k->len;
  ps->count++;
  return false;
}

static void check_strategies(vctx *v) {
  const plan_program *prog = v->prog;
  const plan_mesh *m = &v->p->mesh;
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  char err[320], pb[PLAN_PLACEMENT_STRLEN];
  plan_rule *rule = malloc(sizeof *rule);
  if (!rule) {
    v->rc = plan_oom();
    return;
  }
  passed_set ps;
  memset(&ps, 0, sizeof ps);
  plan_buf_init(&ps.keys);
  plan_buf key;
  plan_buf_init(&key);
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    const plan_strategy *s = &v->p->strategies[i];
    const plan_op_info *info = plan_op_info_get(op->kind);
    if (!s->set) {
      FIND(v, PLAN_SEV_ERROR, "strategy.missing", op->name, op->pos, pfile(v),
           "op '%s' (%s) has no strategy", op->name, info->name);
      continue;
    }
    if (info->partial == PLAN_PARTIAL_NONE) {
      int bad = -1;
      for (int j = 0; j < op->nin && bad < 0; j++)
        if (any_partial(&s->in[j]))
          bad = j;
      if (bad >= 0) {
        FIND(v, PLAN_SEV_ERROR, "strategy.partial", op->name, s->pos, plfile(v),
             "op '%s' (%s) consumes input %d ('%s') as %s, but %s is not "
             "linear: the partial sum must be reduced first (consume it as R "
             "or S)",
             op->name, info->name, bad, prog->tensors[op->in[bad]].name,
             plan_placement_format(&s->in[bad], pb), info->name);
        continue;
      }
    }
    check_key(&key, prog, op, s);
    if (!key.failed && passed_has(&ps, &key, false))
      continue;
    for (int j = 0; j < op->nin; j++)
      tensor_shape(&prog->tensors[op->in[j]], &in[j]);
    for (int j = 0; j < op->nout; j++)
      tensor_shape(&prog->tensors[op->out[j]], &out[j]);
    err[0] = 0;
    if (plan_op_rule(rule, op->kind, in, op->nin, out, op->nout, op->attrs, err,
                     sizeof err)) {
      FIND(v, PLAN_SEV_ERROR, "strategy.rule", op->name, op->pos, pfile(v),
           "op '%s': no sharding rule: %s", op->name, err);
      continue;
    }
    err[0] = 0;
    size_t before = plan_diags_count(v->d);
    if (plan_rule_check_r(rule, op->kind, op->attrs, s->in, s->out,
                          m->axis_sizes, m->axis_names, m->ratios, m->nratios,
                          err, sizeof err))
      FIND(v, PLAN_SEV_ERROR, "strategy.illegal", op->name, s->pos, plfile(v),
           "strategy of op '%s' (%s) breaks its sharding rule: %s", op->name,
           info->name, err);
    for (int j = 0; j < op->nout; j++)
      check_shards_fit(v, "output placement", op->name,
                       &prog->tensors[op->out[j]], &s->out[j], s->pos);
    /* only clean checks are remembered: every op with a finding reports */
    if (!key.failed && plan_diags_count(v->d) == before)
      passed_has(&ps, &key, true);
  }
  free(rule);
  free(ps.hash);
  free(ps.off);
  free(ps.len);
  plan_buf_free(&ps.keys);
  plan_buf_free(&key);
}

/* ---- pipeline
 * --------------------------------------------------------------------- */

/* What a named schedule needs of its stage count on a pipeline axis of
 * `ranks`, or NULL when it fits: gpipe, 1f1b and zb-h1 one stage per rank;
 * interleaved-1f1b and interleaved-zb a multiple (>= 2) of the ranks (stage
 * s on rank s mod R); looped-bfs a multiple (s mod R too); zbv and
 * dualpipev two per rank, in a V (stage s < R on rank s, s >= R on rank
 * 2R - 1 - s); an explicit grid a multiple (s mod R). */
static const char *stage_rule(int kind, int stages, int ranks) {
  switch (kind) {
  case PLAN_SCHED_INTERLEAVED_1F1B:
    return stages % ranks || stages < 2 * ranks
               ? "interleaved-1f1b needs a multiple (>= 2) of the axis size"
               : NULL;
  case PLAN_SCHED_INTERLEAVED_ZB:
    return stages % ranks || stages < 2 * ranks
               ? "interleaved-zb needs a multiple (>= 2) of the axis size"
               : NULL;
  case PLAN_SCHED_LOOPED_BFS:
  case PLAN_SCHED_EXPLICIT:
    return stages % ranks ? "the stages must be a multiple of the axis size"
                          : NULL;
  case PLAN_SCHED_ZBV:
  case PLAN_SCHED_DUALPIPEV:
    return stages != 2 * ranks
               ? (kind == PLAN_SCHED_ZBV
                      ? "zbv runs two stages per pipeline rank, in a V "
                        "(stage s and stage 2R - 1 - s on rank s): it needs "
                        "twice the axis size"
                      : "dualpipev runs two stages per pipeline rank, in a V "
                        "(stage s and stage 2R - 1 - s on rank s): it needs "
                        "twice the axis size")
               : NULL;
  default:
    return stages != ranks ? "this schedule needs one stage per pipeline rank"
                           : NULL;
  }
}

static void check_pipeline(vctx *v) {
  const plan_pipeline *pp = &v->p->pipeline;
  const plan_program *prog = v->prog;
  const plan_mesh *m = &v->p->mesh;
  if (!pp->present)
    return;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    int s = pp->op_stage[i];
    if (s == -1)
      FIND(v, PLAN_SEV_ERROR, "pipeline.unassigned", op->name, op->pos,
           pfile(v), "op '%s' is in no pipeline stage", op->name);
    else if (s < -1)
      FIND(v, PLAN_SEV_ERROR, "pipeline.duplicate", op->name, op->pos, pfile(v),
           "op '%s' is claimed by two pipeline stages (stage %d and a later "
           "one)",
           op->name, -2 - s);
    if (s < 0)
      continue;
    for (int j = 0; j < op->nin; j++) {
      int pr = prog->tensors[op->in[j]].producer;
      if (pr >= 0 && pp->op_stage[pr] > s)
        FIND(v, PLAN_SEV_ERROR, "pipeline.order", op->name, pp->stages[s].pos,
             plfile(v),
             "op '%s' (stage %d) reads '%s' from op '%s' in the later stage "
             "%d",
             op->name, s, prog->tensors[op->in[j]].name, prog->ops[pr].name,
             pp->op_stage[pr]);
    }
  }
  int ranks = 0;
  if (pp->axis >= 0) {
    /* each stage lives on one index of the pp axis: nothing is split or
     * partial along it */
    int a = pp->axis;
    for (int t = 0; t < prog->ntensors; t++)
      if (v->p->placements[t].set &&
          v->p->placements[t].pl.ax[a].kind != PLAN_PL_R)
        FIND(v, PLAN_SEV_ERROR, "pipeline.axis", prog->tensors[t].name,
             v->p->placements[t].pos, plfile(v),
             "'%s' is not R along the pipeline axis '%s'",
             prog->tensors[t].name, m->axis_names[a]);
    for (int i = 0; i < prog->nops; i++) {
      const plan_strategy *s = &v->p->strategies[i];
      bool bad = false;
      for (int j = 0; s->set && j < prog->ops[i].nin; j++)
        bad |= s->in[j].ax[a].kind != PLAN_PL_R;
      for (int j = 0; s->set && j < prog->ops[i].nout; j++)
        bad |= s->out[j].ax[a].kind != PLAN_PL_R;
      if (bad)
        FIND(v, PLAN_SEV_ERROR, "pipeline.axis", prog->ops[i].name, s->pos,
             plfile(v),
             "the strategy of op '%s' is not R along the pipeline axis '%s'",
             prog->ops[i].name, m->axis_names[a]);
    }
    ranks = (int)m->axis_sizes[pp->axis];
    const char *why = stage_rule(pp->schedule, pp->nstages, ranks);
    if (why)
      FIND(v, PLAN_SEV_ERROR, "pipeline.stages", "pipeline", pp->pos, plfile(v),
           "%d stages on a pipeline axis '%s' of size %d: %s", pp->nstages,
           m->axis_names[pp->axis], ranks, why);
  } else {
    for (int s = 0; s < pp->nstages; s++)
      if (pp->stages[s].submesh < 0)
        FIND(v, PLAN_SEV_ERROR, "pipeline.placement", "pipeline",
             pp->stages[s].pos, plfile(v),
             "stage %d has no submesh and the pipeline names no axis", s);
    ranks = pp->nstages;
    if (pp->schedule == PLAN_SCHED_ZBV || pp->schedule == PLAN_SCHED_DUALPIPEV)
      FIND(v, PLAN_SEV_ERROR, "pipeline.stages", "pipeline", pp->pos, plfile(v),
           "%s runs two stages per pipeline rank: it needs a pipeline "
           "'axis' (stages on submeshes run one per rank)",
           plan_schedule_kind_name(pp->schedule));
  }
  /* what the named schedule needs of the microbatches */
  if (pp->axis >= 0 && pp->schedule == PLAN_SCHED_INTERLEAVED_ZB && ranks > 0) {
    int64_t round = pp->microbatches / ranks > 0 ? pp->microbatches / ranks : 1;
    if (pp->microbatches % round)
      FIND(v, PLAN_SEV_ERROR, "pipeline.microbatches", "pipeline", pp->pos,
           plfile(v),
           "interleaved-zb runs the %lld microbatches in rounds of %lld "
           "(max(1, microbatches / %d ranks)): they must be a multiple of it",
           (long long)pp->microbatches, (long long)round, ranks);
  }
  if (pp->schedule == PLAN_SCHED_DUALPIPEV && pp->microbatches < pp->nstages)
    FIND(v, PLAN_SEV_ERROR, "pipeline.microbatches", "pipeline", pp->pos,
         plfile(v),
         "dualpipev needs at least as many microbatches as stages (%d), not "
         "%lld",
         pp->nstages, (long long)pp->microbatches);
  /* microbatches split the batch: the dim named "batch", else dim 0 */
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if (x->role != PLAN_ROLE_INPUT || x->rank == 0)
      continue;
    int bd = 0;
    for (int d = 0; d < x->rank; d++)
      if (x->dim_names && x->dim_names[d] && !strcmp(x->dim_names[d], "batch"))
        bd = d;
    if (x->dims[bd] % pp->microbatches != 0)
      FIND(v, PLAN_SEV_ERROR, "pipeline.microbatches", x->name, x->pos,
           pfile(v),
           "input '%s' has batch %lld (dim %d), not divisible into %lld "
           "microbatches",
           x->name, (long long)x->dims[bd], bd, (long long)pp->microbatches);
  }
  /* an explicit grid: the checks and simulation every schedule gets
   * (schedule_sim.c) */
  if (pp->schedule == PLAN_SCHED_EXPLICIT && !v->rc) {
    int rc = plan_schedule_validate_grid(v->d, v->p, pp->axis >= 0 ? ranks : 0);
    if (rc)
      v->rc = rc;
  }
}

/* ---- regions and training
 * ------------------------------------------------------------- */

/* An op in two regions: reported against the first region that holds it
 * (owner[op], by region index), so the pass is one scan of each region's
 * flags. */
static void check_overlaps(vctx *v, int *owner) {
  const plan_program *prog = v->prog;
  for (int op = 0; op < prog->nops; op++)
    owner[op] = -1;
  for (int i = 0; i < v->p->nregions; i++) {
    const plan_region *r = &v->p->regions[i];
    for (int op = 0; op < prog->nops; op++) {
      if (!r->ops[op])
        continue;
      if (owner[op] < 0)
        owner[op] = i;
      else
        FIND(v, PLAN_SEV_ERROR, "region.overlap", prog->ops[op].name, r->pos,
             plfile(v), "op '%s' is in regions '%s' and '%s'",
             prog->ops[op].name, v->p->regions[owner[op]].name, r->name);
    }
  }
}

/* A manual region's boundary tensors must cross its edge: an input is
 * read by an op of the region and made outside it; an output is made
 * inside. read_in[t]: an op of the region reads t (made here, cleared
 * after). */
static void check_boundaries(vctx *v, const plan_region *r, bool *read_in) {
  const plan_program *prog = v->prog;
  for (int op = 0; op < prog->nops; op++)
    if (r->ops[op])
      for (int j = 0; j < prog->ops[op].nin; j++)
        read_in[prog->ops[op].in[j]] = true;
  for (int k = 0; k < r->ninputs + r->noutputs; k++) {
    bool is_in = k < r->ninputs;
    const plan_boundary *b =
        is_in ? &r->inputs[k] : &r->outputs[k - r->ninputs];
    const plan_tensor *t = &prog->tensors[b->tensor];
    bool ok =
        is_in ? read_in[b->tensor] && (t->producer < 0 || !r->ops[t->producer])
              : t->producer >= 0 && r->ops[t->producer];
    if (!ok)
      FIND(v, PLAN_SEV_ERROR, "region.boundary", t->name, b->pos, plfile(v),
           "'%s' is not an %s of manual region '%s'", t->name,
           is_in ? "input" : "output", r->name);
  }
  for (int op = 0; op < prog->nops; op++)
    if (r->ops[op])
      for (int j = 0; j < prog->ops[op].nin; j++)
        read_in[prog->ops[op].in[j]] = false;
}

static void check_regions(vctx *v) {
  const plan_program *prog = v->prog;
  if (!v->p->nregions)
    return;
  int *owner = malloc(sizeof(int) * ((size_t)prog->nops + 1));
  bool *read_in = calloc((size_t)prog->ntensors + 1, sizeof(bool));
  if (!owner || !read_in) {
    free(owner);
    free(read_in);
    if (!v->rc)
      v->rc = plan_oom();
    return;
  }
  check_overlaps(v, owner);
  for (int i = 0; i < v->p->nregions; i++) {
    const plan_region *r = &v->p->regions[i];
    if (r->kind != PLAN_REGION_MANUAL)
      continue;
    if (!r->body || !r->body[0])
      FIND(v, PLAN_SEV_ERROR, "region.body", r->name, r->pos, plfile(v),
           "manual region '%s' has an empty body", r->name);
    check_boundaries(v, r, read_in);
  }
  free(owner);
  free(read_in);
}

static void check_training(vctx *v) {
  const plan_training *tr = &v->p->training;
  const plan_program *prog = v->prog;
  if (!tr->present)
    return;
  if (prog->loss < 0)
    FIND(v, PLAN_SEV_ERROR, "training.loss", "training", tr->pos, plfile(v),
         "training needs a program with a 'loss'");
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_param_train *pt = &tr->params[t];
    if (pt->sync == PLAN_SYNC_REDUCE_SCATTER &&
        (!pt->has_state_pl || plan_placement_is_replicated(&pt->state_pl)))
      FIND(v, PLAN_SEV_ERROR, "training.sync", prog->tensors[t].name, pt->pos,
           plfile(v),
           "param '%s' uses reduce_scatter, which shards its optimizer state: "
           "give it a sharded optimizer_state placement",
           prog->tensors[t].name);
  }
}

/* ---- entry
 * ----------------------------------------------------------------------------------
 */

int plan_validate(plan_diags **out, const plan_plan *p) {
  *out = NULL;
  if (!p)
    return plan_failf(PLAN_EUSAGE, "plan_validate: NULL plan");
  plan_diags *d;
  int rc = plan_diags_new(&d);
  if (rc)
    return rc;
  vctx v = {p, p->program, d, 0};
  if (p->version_major < PLAN_FORMAT_MAJOR)
    FIND(&v, PLAN_SEV_NOTE, "version.old", "libplan", p->version_pos,
         plfile(&v),
         "format %d.%d is the pre-release form of %s and reads as it is; "
         "'plan upgrade' rewrites the file as %s (new hashes, same content)",
         p->version_major, p->version_minor, PLAN_FORMAT_BASE_STRING,
         PLAN_FORMAT_BASE_STRING);
  if (!p->program_inline && p->ref.has_hash) {
    plan_hash h;
    if ((rc = plan_program_hash(&h, p->program))) {
      plan_diags_free(d);
      return rc;
    }
    if (!plan_hash_equal(h, p->ref.hash)) {
      char a[PLAN_HASH_STRLEN], b[PLAN_HASH_STRLEN];
      FIND(&v, PLAN_SEV_WARNING, "program.changed", p->ref.path, p->ref.pos,
           plfile(&v),
           "program '%s' has changed since the plan was made (recorded %s, now "
           "%s); the drift report follows",
           p->ref.path, plan_hash_format(p->ref.hash, a),
           plan_hash_format(h, b));
      if (!v.rc)
        v.rc = plan_drift_into(d, p, p->program);
    }
  }
  if (p->has_mesh) {
    check_mesh(&v);
    check_uses(&v);
    check_placements(&v);
    check_strategies(&v);
    check_pipeline(&v);
    check_regions(&v);
    check_training(&v);
    /* the overlap entries on the lowered program, once the rest holds */
    if (p->noverlap && !v.rc && !plan_diags_count_at_least(d, PLAN_SEV_ERROR))
      v.rc = plan_overlap_validate(p, d);
  }
  if (v.rc) {
    plan_diags_free(d);
    return v.rc;
  }
  plan_diags_sort(d);
  *out = d;
  return PLAN_OK;
}
