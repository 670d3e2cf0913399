/* Reading the training, pipeline, regions and provenance sections of a plan
 * (spec/plan-format.md). Patterns are expanded here against the program;
 * names that match nothing are recorded for validation. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"
#include "read/plan_read.h"

static const char *const training_keys[] = {
    "optimizer", "steps",          "dtypes",     "grad_sync", "optimizer_state",
    "recompute", "clip_grad_norm", "loss_scale", NULL};
static const char *const optimizer_keys[] = {
    "kind", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay", NULL};
static const char *const dtype_keys[] = {"param", "compute", "grad", "accum",
                                         NULL};
static const char *const pipeline_keys[] = {
    "axis", "stages", "microbatches", "schedule", "grid", NULL};
static const char *const stage_keys[] = {"ops", "submesh", NULL};
static const char *const region_keys[] = {"name",    "kind", "ops", "inputs",
                                          "outputs", "body", NULL};

static const char *const optimizer_names[PLAN_OPT_COUNT] = {"none", "sgd",
                                                            "adam"};
static const char *const sync_names[PLAN_SYNC_COUNT] = {
    "auto", "all_reduce", "reduce_scatter", "none"};
static const char *const region_kind_names[PLAN_REGION_COUNT] = {"pinned",
                                                                 "manual"};

/* Iterates over the tensors a name or glob names (params only when
 * params_only), recording the use. */
static int for_tensors(plan_plan *p, const char *pattern, const char *section,
                       plan_pos pos, bool params_only,
                       int (*fn)(int t, void *ctx), void *ctx) {
  int u = plan_record_use(p, pattern, section, true, pos);
  if (u < 0)
    return u;
  const plan_program *prog = p->program;
  int matches = 0, rc;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if (params_only && x->role != PLAN_ROLE_PARAM)
      continue;
    bool hit = p->uses[u].is_glob ? plan_glob_match(pattern, x->name)
                                  : !strcmp(pattern, x->name);
    if (hit) {
      matches++;
      if ((rc = fn(t, ctx)))
        return rc;
    }
  }
  p->uses[u].matches = matches;
  return matches;
}

/* ---- training
 * ---------------------------------------------------------------- */

typedef struct train_ctx {
  const plan_reader *rd;
  plan_plan *p;
  const plan_ynode *value;
  int sync;
} train_ctx;

static int set_sync(int t, void *vc) {
  train_ctx *c = vc;
  c->p->training.params[t].sync = (plan_grad_sync)c->sync;
  c->p->training.params[t].pos = plan_rd_pos(c->value);
  return PLAN_OK;
}

static int set_state_pl(int t, void *vc) {
  train_ctx *c = vc;
  plan_param_train *pt = &c->p->training.params[t];
  pt->has_state_pl = true;
  return plan_read_placement_in(c->rd, c->value, &c->p->mesh,
                                c->p->program->tensors[t].rank, &pt->state_pl);
}

static int set_recompute(int op, void *vc) {
  train_ctx *c = vc;
  c->p->training.recompute[op] = true;
  return PLAN_OK;
}

static int read_dtype_opt(const plan_reader *rd, const plan_ynode *n,
                          const char *key, int *out) {
  const plan_ynode *v = plan_ymap_get(n, key);
  *out = -1;
  if (!v)
    return PLAN_OK;
  int rc = plan_rd_expect_scalar(rd, v, key);
  if (rc)
    return rc;
  *out = plan_dtype_from_name(v->u.scalar.text);
  if (*out < 0 || !plan_dtype_is_float((plan_dtype)*out))
    return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                        "%s dtype must be f64, f32, bf16 or f16, not '%.40s'",
                        key, v->u.scalar.text);
  return PLAN_OK;
}

static int read_optimizer(const plan_reader *rd, const plan_ynode *n,
                          plan_training *tr) {
  int rc, kind;
  if ((rc = plan_rd_expect_map(rd, n, "optimizer")) ||
      (rc = plan_rd_check_keys(rd, n, optimizer_keys, "optimizer", NULL)))
    return rc;
  const plan_ynode *k = plan_ymap_get(n, "kind");
  if (!k)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "optimizer needs a 'kind' (sgd or adam)");
  if ((rc = plan_rd_enum(rd, k, "optimizer", optimizer_names, PLAN_OPT_COUNT,
                         &kind)))
    return rc;
  tr->optimizer = (plan_optimizer)kind;
  if (kind == PLAN_OPT_ADAM)
    tr->lr = 1e-3;
  struct {
    const char *key;
    double *dst;
  } nums[] = {{"lr", &tr->lr},       {"momentum", &tr->momentum},
              {"beta1", &tr->beta1}, {"beta2", &tr->beta2},
              {"eps", &tr->eps},     {"weight_decay", &tr->weight_decay}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    const plan_ynode *v = plan_ymap_get(n, nums[i].key);
    if (!v)
      continue;
    if (kind == PLAN_OPT_SGD &&
        (!strcmp(nums[i].key, "beta1") || !strcmp(nums[i].key, "beta2") ||
         !strcmp(nums[i].key, "eps")))
      return plan_rd_fail(rd, v, PLAN_ESCHEMA, "sgd has no '%s'", nums[i].key);
    if (kind == PLAN_OPT_ADAM && !strcmp(nums[i].key, "momentum"))
      return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                          "adam has no 'momentum' (use beta1)");
    if ((rc = plan_rd_number(rd, v, nums[i].key, nums[i].dst)))
      return rc;
    if (*nums[i].dst < 0)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "%s must be >= 0", nums[i].key);
  }
  return PLAN_OK;
}

static int read_training(const plan_reader *rd, const plan_ynode *n,
                         plan_plan *p) {
  plan_training *tr = &p->training;
  const plan_program *prog = p->program;
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "training")) ||
      (rc = plan_rd_check_keys(rd, n, training_keys, "training", &tr->ext)))
    return rc;
  tr->present = true;
  tr->pos = plan_rd_pos(n);
  tr->params = plan_arena_alloc(rd->arena, sizeof(plan_param_train) *
                                               (size_t)(prog->ntensors + 1));
  tr->recompute = plan_arena_alloc(rd->arena, (size_t)prog->nops + 1);
  if (!tr->params || !tr->recompute)
    return plan_oom();
  const plan_ynode *v;
  if ((v = plan_ymap_get(n, "optimizer")) && (rc = read_optimizer(rd, v, tr)))
    return rc;
  if ((v = plan_ymap_get(n, "steps"))) {
    if ((rc = plan_rd_int(rd, v, "steps", &tr->steps)))
      return rc;
    if (tr->steps < 1 || tr->steps > 1000000)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "steps must be 1 to 1000000");
  }
  if ((v = plan_ymap_get(n, "dtypes"))) {
    if ((rc = plan_rd_expect_map(rd, v, "dtypes")) ||
        (rc = plan_rd_check_keys(rd, v, dtype_keys, "dtypes", NULL)) ||
        (rc = read_dtype_opt(rd, v, "param", &tr->param_dtype)) ||
        (rc = read_dtype_opt(rd, v, "compute", &tr->compute_dtype)) ||
        (rc = read_dtype_opt(rd, v, "grad", &tr->grad_dtype)) ||
        (rc = read_dtype_opt(rd, v, "accum", &tr->accum_dtype)))
      return rc;
  }
  if ((v = plan_ymap_get(n, "clip_grad_norm"))) {
    if ((rc = plan_rd_number(rd, v, "clip_grad_norm", &tr->clip_grad_norm)))
      return rc;
    if (tr->clip_grad_norm < 0)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "clip_grad_norm must be >= 0");
  }
  if ((v = plan_ymap_get(n, "loss_scale"))) {
    if ((rc = plan_rd_number(rd, v, "loss_scale", &tr->loss_scale)))
      return rc;
    if (tr->loss_scale <= 0)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "loss_scale must be > 0");
  }
  /* grad_sync: {PARAM-OR-GLOB: kind}; exact names win over globs */
  if ((v = plan_ymap_get(n, "grad_sync"))) {
    if ((rc = plan_rd_expect_map(rd, v, "grad_sync")))
      return rc;
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < v->u.map.count; i++) {
        const plan_ynode *k = v->u.map.pairs[i].key;
        bool glob = plan_is_glob(k->u.scalar.text);
        if (glob != (pass == 0))
          continue; /* globs first, exact names overwrite them */
        train_ctx c = {rd, p, v->u.map.pairs[i].value, 0};
        if ((rc = plan_rd_enum(rd, c.value, "grad_sync kind", sync_names,
                               PLAN_SYNC_COUNT, &c.sync)))
          return rc;
        const char *name;
        if ((rc = plan_rd_name(rd, k, "a param name", &name)))
          return rc;
        if ((rc = for_tensors(p, name, "training.grad_sync", plan_rd_pos(k),
                              true, set_sync, &c)) < 0)
          return rc;
      }
  }
  if ((v = plan_ymap_get(n, "optimizer_state"))) {
    if ((rc = plan_rd_expect_map(rd, v, "optimizer_state")))
      return rc;
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < v->u.map.count; i++) {
        const plan_ynode *k = v->u.map.pairs[i].key;
        bool glob = plan_is_glob(k->u.scalar.text);
        if (glob != (pass == 0))
          continue;
        train_ctx c = {rd, p, v->u.map.pairs[i].value, 0};
        const char *name;
        if ((rc = plan_rd_name(rd, k, "a param name", &name)))
          return rc;
        if ((rc = for_tensors(p, name, "training.optimizer_state",
                              plan_rd_pos(k), true, set_state_pl, &c)) < 0)
          return rc;
      }
  }
  if ((v = plan_ymap_get(n, "recompute"))) {
    const char **pats;
    int cnt;
    if ((rc = plan_rd_name_list(rd, v, "an op name or pattern", &pats, &cnt)))
      return rc;
    for (int i = 0; i < cnt; i++) {
      train_ctx c = {rd, p, v, 0};
      const plan_ynode *at = v->kind == PLAN_Y_SEQ ? v->u.seq.items[i] : v;
      if ((rc = plan_for_ops(p, pats[i], "training.recompute", plan_rd_pos(at),
                             set_recompute, &c)) < 0)
        return rc;
    }
  }
  return PLAN_OK;
}

/* ---- pipeline
 * ------------------------------------------------------------------ */

static const char *const action_words[PLAN_ACT_COUNT] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"};

const char *plan_action_word(int kind) {
  return kind >= 0 && kind < PLAN_ACT_COUNT ? action_words[kind] : "?";
}

/* One action: STAGE WORD MICROBATCH, e.g. "0F1", "2B0", "1SEND_F3". */
int plan_action_parse(plan_action *a, const char *s, size_t len) {
  size_t i = 0;
  int64_t stage = 0, mb = 0;
  if (i >= len || s[i] < '0' || s[i] > '9')
    return -1;
  while (i < len && s[i] >= '0' && s[i] <= '9' && stage < 100000000)
    stage = stage * 10 + (s[i++] - '0');
  int kind = -1;
  size_t best = 0;
  for (int k = 0; k < PLAN_ACT_COUNT; k++) {
    size_t wl = strlen(action_words[k]);
    if (wl > best && i + wl <= len && !memcmp(s + i, action_words[k], wl)) {
      kind = k;
      best = wl;
    }
  }
  if (kind < 0)
    return -1;
  i += best;
  if (i >= len || s[i] < '0' || s[i] > '9')
    return -1;
  while (i < len && s[i] >= '0' && s[i] <= '9' && mb < 100000000)
    mb = mb * 10 + (s[i++] - '0');
  if (i != len)
    return -1;
  a->kind = (uint8_t)kind;
  a->stage = (int32_t)stage;
  a->microbatch = (int32_t)mb;
  return 0;
}

/* A grid row: a list of action strings, or one string of actions separated
 * by spaces. */
static int read_grid_row(const plan_reader *rd, const plan_ynode *n,
                         plan_action **out, int *count) {
  int rc;
  if (n->kind == PLAN_Y_SCALAR) {
    const char *s = n->u.scalar.text;
    int cap = 1;
    for (const char *c = s; *c; c++)
      cap += *c == ' ';
    plan_action *acts =
        plan_arena_alloc(rd->arena, sizeof(plan_action) * (size_t)cap);
    if (!acts)
      return plan_oom();
    int cnt = 0;
    size_t i = 0, len = n->u.scalar.len;
    while (i < len) {
      while (i < len && s[i] == ' ')
        i++;
      size_t j = i;
      while (j < len && s[j] != ' ')
        j++;
      if (j > i) {
        if (plan_action_parse(&acts[cnt], s + i, j - i))
          return plan_fail(PLAN_EINVALID, rd->file, n->line,
                           n->col + (int)i +
                               (n->u.scalar.style == PLAN_Y_QUOTED),
                           "action '%.*s' is not STAGE ACTION MICROBATCH (e.g. "
                           "0F1, 2B0, 1I3, 1W3, 0SEND_F2)",
                           (int)(j - i), s + i);
        acts[cnt].pos.line = n->line;
        acts[cnt].pos.col =
            n->col + (int)i + (n->u.scalar.style == PLAN_Y_QUOTED);
        cnt++;
      }
      i = j;
    }
    *out = acts;
    *count = cnt;
    return PLAN_OK;
  }
  if ((rc = plan_rd_expect_seq(rd, n, "a grid row")))
    return rc;
  plan_action *acts =
      plan_arena_alloc(rd->arena, sizeof(plan_action) * (n->u.seq.count + 1));
  if (!acts)
    return plan_oom();
  for (size_t i = 0; i < n->u.seq.count; i++) {
    const plan_ynode *e = n->u.seq.items[i];
    if ((rc = plan_rd_expect_scalar(rd, e, "an action")))
      return rc;
    if (plan_action_parse(&acts[i], e->u.scalar.text, e->u.scalar.len))
      return plan_rd_fail(
          rd, e, PLAN_EINVALID,
          "action '%.40s' is not STAGE ACTION MICROBATCH (e.g. 0F1, "
          "2B0, 1I3, 1W3, 0SEND_F2)",
          e->u.scalar.text);
    acts[i].pos = plan_rd_pos(e);
  }
  *out = acts;
  *count = (int)n->u.seq.count;
  return PLAN_OK;
}

typedef struct stage_ctx {
  plan_pipeline *pp;
  int stage;
} stage_ctx;

static int set_stage(int op, void *vc) {
  stage_ctx *c = vc;
  /* a second stage claiming the op is reported by validation */
  if (c->pp->op_stage[op] < 0)
    c->pp->op_stage[op] = c->stage;
  else if (c->pp->op_stage[op] != c->stage)
    c->pp->op_stage[op] = -2 - c->pp->op_stage[op]; /* mark: claimed twice */
  return PLAN_OK;
}

static int read_pipeline(const plan_reader *rd, const plan_ynode *n,
                         plan_plan *p) {
  plan_pipeline *pp = &p->pipeline;
  const plan_program *prog = p->program;
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "pipeline")) ||
      (rc = plan_rd_check_keys(rd, n, pipeline_keys, "pipeline", &pp->ext)))
    return rc;
  pp->present = true;
  pp->pos = plan_rd_pos(n);
  pp->microbatches = 1;
  pp->schedule = PLAN_SCHED_1F1B;
  const plan_ynode *v;
  if ((v = plan_ymap_get(n, "axis"))) {
    if ((rc = plan_rd_expect_scalar(rd, v, "pipeline axis")))
      return rc;
    pp->axis = plan_mesh_axis_find(&p->mesh, v->u.scalar.text);
    if (pp->axis < 0)
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "pipeline axis '%.40s' is not a mesh axis",
                          v->u.scalar.text);
  }
  if ((v = plan_ymap_get(n, "microbatches"))) {
    if ((rc = plan_rd_int(rd, v, "microbatches", &pp->microbatches)))
      return rc;
    if (pp->microbatches < 1 || pp->microbatches > 1000000)
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "microbatches must be 1 to 1000000");
  }
  const plan_ynode *grid = plan_ymap_get(n, "grid");
  if ((v = plan_ymap_get(n, "schedule"))) {
    int k;
    if ((rc = plan_rd_schedule_name(rd, v, &k)))
      return rc;
    pp->schedule = (plan_schedule_kind)k;
    pp->schedule_pos = plan_rd_pos(v);
    if ((k == PLAN_SCHED_EXPLICIT) != (grid != NULL))
      return plan_rd_fail(
          rd, v, PLAN_EINVALID,
          "schedule: explicit goes with a 'grid', and a 'grid' with "
          "schedule: explicit (or no schedule)");
  } else if (grid) {
    pp->schedule = PLAN_SCHED_EXPLICIT;
  }
  if (grid) {
    pp->schedule_pos = plan_rd_pos(grid);
    if ((rc = plan_rd_expect_seq(
             rd, grid, "grid (one row of actions per pipeline rank)")))
      return rc;
    if (grid->u.seq.count > 65536)
      return plan_rd_fail(rd, grid, PLAN_ELIMIT, "grid has too many rows");
    pp->grid_ranks = (int)grid->u.seq.count;
    pp->grid = plan_arena_alloc(rd->arena, sizeof(plan_action *) *
                                               (grid->u.seq.count + 1));
    pp->grid_len =
        plan_arena_alloc(rd->arena, sizeof(int) * (grid->u.seq.count + 1));
    if (!pp->grid || !pp->grid_len)
      return plan_oom();
    for (size_t r = 0; r < grid->u.seq.count; r++)
      if ((rc = read_grid_row(rd, grid->u.seq.items[r], &pp->grid[r],
                              &pp->grid_len[r])))
        return rc;
  }
  pp->op_stage =
      plan_arena_alloc(rd->arena, sizeof(int) * (size_t)(prog->nops + 1));
  if (!pp->op_stage)
    return plan_oom();
  for (int i = 0; i < prog->nops; i++)
    pp->op_stage[i] = -1;
  if (!(v = plan_ymap_get(n, "stages")))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "pipeline needs 'stages'");
  if ((rc = plan_rd_expect_seq(rd, v, "stages")))
    return rc;
  if (v->u.seq.count < 1 || v->u.seq.count > 65536)
    return plan_rd_fail(rd, v, PLAN_EINVALID,
                        "a pipeline has 1 to 65536 stages");
  pp->nstages = (int)v->u.seq.count;
  pp->stages =
      plan_arena_alloc(rd->arena, sizeof(plan_stage) * (v->u.seq.count + 1));
  if (!pp->stages)
    return plan_oom();
  for (int s = 0; s < pp->nstages; s++) {
    const plan_ynode *sn = v->u.seq.items[s];
    plan_stage *st = &pp->stages[s];
    st->pos = plan_rd_pos(sn);
    st->submesh = -1;
    if ((rc = plan_rd_expect_map(rd, sn,
                                 "a stage ({ops: [..], submesh: NAME})")) ||
        (rc = plan_rd_check_keys(rd, sn, stage_keys, "a stage", NULL)))
      return rc;
    const plan_ynode *on = plan_ymap_get(sn, "ops"), *mn;
    if (!on)
      return plan_rd_fail(rd, sn, PLAN_ESCHEMA, "a stage needs 'ops'");
    if ((rc = plan_rd_name_list(rd, on, "an op name or pattern", &st->patterns,
                                &st->npatterns)))
      return rc;
    if ((mn = plan_ymap_get(sn, "submesh"))) {
      if ((rc = plan_rd_expect_scalar(rd, mn, "submesh")))
        return rc;
      for (int k = 0; k < p->mesh.nsubmeshes; k++)
        if (!strcmp(p->mesh.submeshes[k].name, mn->u.scalar.text))
          st->submesh = k;
      if (st->submesh < 0)
        return plan_rd_fail(rd, mn, PLAN_EINVALID,
                            "no submesh '%.40s' in the mesh",
                            mn->u.scalar.text);
    }
    for (int i = 0; i < st->npatterns; i++) {
      stage_ctx c = {pp, s};
      const plan_ynode *at = on->kind == PLAN_Y_SEQ ? on->u.seq.items[i] : on;
      if ((rc = plan_for_ops(p, st->patterns[i], "pipeline.stages",
                             plan_rd_pos(at), set_stage, &c)) < 0)
        return rc;
    }
  }
  return PLAN_OK;
}

/* ---- regions
 * ------------------------------------------------------------------- */

typedef struct region_ctx {
  plan_region *r;
} region_ctx;

static int set_member(int op, void *vc) {
  ((region_ctx *)vc)->r->ops[op] = true;
  return PLAN_OK;
}

static int read_boundaries(const plan_reader *rd, const plan_ynode *n,
                           plan_plan *p, plan_boundary **out, int *count) {
  int rc = plan_rd_expect_map(rd, n, "region boundary placements");
  if (rc)
    return rc;
  *count = (int)n->u.map.count;
  *out =
      plan_arena_alloc(rd->arena, sizeof(plan_boundary) * (n->u.map.count + 1));
  if (!*out)
    return plan_oom();
  for (size_t i = 0; i < n->u.map.count; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key;
    plan_boundary *b = &(*out)[i];
    b->tensor = plan_strmap_get(&p->program->tensor_by_name, k->u.scalar.text);
    b->pos = plan_rd_pos(k);
    if (b->tensor < 0) {
      const plan_program *prog = p->program;
      char hint[PLAN_HINT_SIZE];
      plan_hint_field(hint, sizeof hint, k->u.scalar.text, prog->tensors,
                      (size_t)prog->ntensors, sizeof *prog->tensors,
                      offsetof(plan_tensor, name));
      return plan_rd_fail(rd, k, PLAN_EINVALID, "no tensor '%.60s'%s",
                          k->u.scalar.text, hint);
    }
    if ((rc = plan_read_placement_in(rd, n->u.map.pairs[i].value, &p->mesh,
                                     p->program->tensors[b->tensor].rank,
                                     &b->pl)))
      return rc;
  }
  return PLAN_OK;
}

/* Region r from its node rn; names holds the names read before it. */
static int read_region(const plan_reader *rd, const plan_ynode *rn,
                       plan_plan *p, plan_region *r, plan_strmap *names) {
  const plan_ynode *v;
  int rc;
  if ((rc = plan_rd_expect_map(rd, rn, "a region")) ||
      (rc = plan_rd_check_keys(rd, rn, region_keys, "a region", &r->ext)))
    return rc;
  r->pos = plan_rd_pos(rn);
  if (!(v = plan_ymap_get(rn, "name")))
    return plan_rd_fail(rd, rn, PLAN_ESCHEMA, "a region needs a 'name'");
  if ((rc = plan_rd_name(rd, v, "a region name", &r->name)))
    return rc;
  int old;
  if ((rc = plan_strmap_insert(names, r->name, 0, &old)))
    return rc;
  if (old >= 0)
    return plan_rd_fail(rd, v, PLAN_EINVALID, "region '%s' is defined twice",
                        r->name);
  int kind;
  if (!(v = plan_ymap_get(rn, "kind")))
    return plan_rd_fail(rd, rn, PLAN_ESCHEMA,
                        "region '%s' needs a 'kind' (pinned or manual)",
                        r->name);
  if ((rc = plan_rd_enum(rd, v, "region kind", region_kind_names,
                         PLAN_REGION_COUNT, &kind)))
    return rc;
  r->kind = (plan_region_kind)kind;
  if (!(v = plan_ymap_get(rn, "ops")))
    return plan_rd_fail(rd, rn, PLAN_ESCHEMA, "region '%s' needs 'ops'",
                        r->name);
  const plan_ynode *opsn = v;
  if ((rc = plan_rd_name_list(rd, v, "an op name or pattern", &r->patterns,
                              &r->npatterns)))
    return rc;
  r->ops = plan_arena_alloc(rd->arena, (size_t)p->program->nops + 1);
  if (!r->ops)
    return plan_oom();
  for (int j = 0; j < r->npatterns; j++) {
    region_ctx c = {r};
    const plan_ynode *at =
        opsn->kind == PLAN_Y_SEQ ? opsn->u.seq.items[j] : opsn;
    if ((rc = plan_for_ops(p, r->patterns[j], "regions", plan_rd_pos(at),
                           set_member, &c)) < 0)
      return rc;
  }
  const plan_ynode *in = plan_ymap_get(rn, "inputs"),
                   *out = plan_ymap_get(rn, "outputs"),
                   *body = plan_ymap_get(rn, "body");
  if (r->kind == PLAN_REGION_PINNED) {
    const plan_ynode *bad = in ? in : out ? out : body;
    if (bad)
      return plan_rd_fail(rd, bad, PLAN_ESCHEMA,
                          "inputs, outputs and body are for manual regions");
    return PLAN_OK;
  }
  if (!body)
    return plan_rd_fail(rd, rn, PLAN_ESCHEMA,
                        "manual region '%s' needs a Lua 'body'", r->name);
  if ((rc = plan_rd_string(rd, body, "body", &r->body)))
    return rc;
  /* a block scalar's text starts on the line after its indicator */
  r->body_line = body->line + (body->kind == PLAN_Y_SCALAR &&
                               body->u.scalar.style == PLAN_Y_BLOCK);
  if (in && (rc = read_boundaries(rd, in, p, &r->inputs, &r->ninputs)))
    return rc;
  if (out && (rc = read_boundaries(rd, out, p, &r->outputs, &r->noutputs)))
    return rc;
  return PLAN_OK;
}

/* Every region holds a flag per op of the program, and validation, lowering
 * and the writers pass over each region's flags: regions x ops is bounded
 * so that a short list of regions cannot make them hold or scan more. */
#define MAX_REGION_FLAGS ((uint64_t)1 << 27)

static int read_regions(const plan_reader *rd, const plan_ynode *n,
                        plan_plan *p) {
  int rc = plan_rd_expect_seq(rd, n, "regions");
  if (rc)
    return rc;
  uint64_t nops = (uint64_t)p->program->nops + 1;
  if ((uint64_t)n->u.seq.count > MAX_REGION_FLAGS / nops)
    return plan_rd_fail(rd, n, PLAN_ELIMIT,
                        "%zu regions over a program of %d ops: more than "
                        "2^27 regions x ops",
                        n->u.seq.count, p->program->nops);
  p->nregions = (int)n->u.seq.count;
  p->regions =
      plan_arena_alloc(rd->arena, sizeof(plan_region) * (n->u.seq.count + 1));
  if (!p->regions)
    return plan_oom();
  plan_strmap names;
  plan_strmap_init(&names);
  for (int i = 0; i < p->nregions && !rc; i++)
    rc = read_region(rd, n->u.seq.items[i], p, &p->regions[i], &names);
  plan_strmap_free(&names);
  return rc;
}

/* ---- all sections
 * ------------------------------------------------------------------ */

int plan_sections_read(const plan_reader *rd, const plan_ynode *root,
                       plan_plan *p) {
  const plan_ynode *v;
  int rc;
  p->training.steps = 1;
  p->training.lr = 0.01;
  p->training.beta1 = 0.9;
  p->training.beta2 = 0.999;
  p->training.eps = 1e-8;
  p->training.loss_scale = 1.0;
  p->training.param_dtype = p->training.compute_dtype = -1;
  p->training.grad_dtype = p->training.accum_dtype = -1;
  if (p->has_mesh) {
    if ((v = plan_ymap_get(root, "training")) && (rc = read_training(rd, v, p)))
      return rc;
    if ((v = plan_ymap_get(root, "pipeline")) && (rc = read_pipeline(rd, v, p)))
      return rc;
    if ((v = plan_ymap_get(root, "regions")) && (rc = read_regions(rd, v, p)))
      return rc;
    if ((v = plan_ymap_get(root, "overlap")) &&
        (rc = plan_overlap_read(rd, v, p)))
      return rc;
  }
  if ((v = plan_ymap_get(root, "provenance"))) {
    if ((rc = plan_rd_expect_map(rd, v, "provenance")) ||
        (rc = plan_rd_value(rd, v, &p->provenance)))
      return rc;
  }
  return PLAN_OK;
}

int plan_rd_schedule_name(const plan_reader *rd, const plan_ynode *v, int *k) {
  int rc =
      plan_rd_enum(rd, v, "schedule", plan_schedule_names, PLAN_SCHED_COUNT, k);
  if (rc || *k < PLAN_SCHED_FILE_COUNT_1_0)
    return rc;
  /* looped-bfs, interleaved-zb, zbv, dualpipev: format 1.1 */
  char what[64];
  snprintf(what, sizeof what, "schedule: %s", plan_schedule_names[*k]);
  return plan_rd_need_format_1_1(rd, v, what);
}
