/* Reading a plan's decisions: placements (compact or map spelling),
 * the placements of inputs, params and consts, strategies (exact names and
 * globs, exact names first, equal placement lists stored once) and output
 * placements; and the record of every name or pattern a section uses, for
 * validation to judge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "libplan/plan.h"
#include "read/plan_doc.h"

static const char *const strategy_keys[] = {"in", "out", NULL};

/* ---- placements ------------------------------------------------------------
 */

/* Interns the weights of S(d|w...) into the plan's mesh (mut), or, with
 * a read-only mesh, finds the set it already holds. */
typedef struct ratio_ctx {
  const plan_mesh *m;
  plan_mesh *mut;
  plan_arena *arena;
} ratio_ctx;

static int intern_ratios(void *ctx, int axis, const int64_t *w, int n,
                         char *err, size_t errsz) {
  ratio_ctx *c = ctx;
  if (c->mut)
    return plan_ratios_intern(c->mut, c->arena, axis, w, n, err, errsz);
  int k = plan_ratios_find(c->m, axis, w, n);
  if (!k)
    snprintf(err, errsz, "these shard ratios are not a set of the plan");
  return k;
}

/* One axis of the map form written as a map: {shard: d, ratios: [...],
 * level: k} (format 1.1). */
static int read_axis_map(const plan_reader *rd, const plan_ynode *v,
                         ratio_ctx *rctx, int a, plan_axis_pl *e) {
  const plan_mesh *m = rctx->m;
  static const char *const keys[] = {"shard", "ratios", "level", NULL};
  int rc;
  if ((rc = plan_rd_check_keys(rd, v, keys, "a placement entry", NULL)))
    return rc;
  const plan_ynode *sh = plan_ymap_get(v, "shard");
  const plan_ynode *ra = plan_ymap_get(v, "ratios");
  const plan_ynode *lv = plan_ymap_get(v, "level");
  if (!sh)
    return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                        "a placement entry written as a map needs 'shard' "
                        "(the dim): {shard: 0, ratios: [3, 2]}");
  int64_t d;
  if ((rc = plan_rd_int(rd, sh, "a shard dim", &d)))
    return rc;
  if (d < -PLAN_MAX_RANK || d >= PLAN_MAX_RANK)
    return plan_rd_fail(rd, sh, PLAN_EINVALID,
                        "dim %lld is out of range (tensors have at most %d "
                        "dims)",
                        (long long)d, PLAN_MAX_RANK);
  *e = (plan_axis_pl){PLAN_PL_S, PLAN_RED_SUM, (int8_t)d, -1, 0};
  if (lv) {
    int64_t k;
    if ((rc = plan_rd_int(rd, lv, "a nesting level", &k)))
      return rc;
    if (k < 0 || k >= PLAN_MAX_MESH_AXES)
      return plan_rd_fail(rd, lv, PLAN_EINVALID,
                          "nesting level %lld is out of range (0..%d)",
                          (long long)k, PLAN_MAX_MESH_AXES - 1);
    e->level = (int8_t)k;
  }
  if (!ra)
    return PLAN_OK;
  if ((rc = plan_rd_need_format_1_1(rd, ra, "ratios")))
    return rc;
  if ((rc = plan_rd_expect_seq(rd, ra, "ratios")))
    return rc;
  /* the count first: a hostile list is refused before it is read */
  if ((int64_t)ra->u.seq.count != m->axis_sizes[a])
    return plan_rd_fail(rd, ra, PLAN_EINVALID,
                        "%zu shard weight%s for mesh axis %s of size %lld: "
                        "give one per index of the axis",
                        ra->u.seq.count, ra->u.seq.count == 1 ? "" : "s",
                        m->axis_names[a], (long long)m->axis_sizes[a]);
  for (size_t i = 0; i < ra->u.seq.count; i++) {
    const plan_ynode *it = ra->u.seq.items[i];
    int64_t w;
    if ((rc = plan_rd_int(rd, it, "a shard weight", &w)))
      return rc;
    if (w < 1 || w > PLAN_RATIO_WEIGHT_MAX)
      return plan_rd_fail(rd, it, PLAN_EINVALID,
                          "shard weight %lld is out of range (1..%lld)",
                          (long long)w, (long long)PLAN_RATIO_WEIGHT_MAX);
  }
  int64_t *w = plan_arena_alloc(rd->arena, sizeof *w * ra->u.seq.count + 1);
  if (!w)
    return plan_oom();
  for (size_t i = 0; i < ra->u.seq.count; i++)
    plan_rd_int(rd, ra->u.seq.items[i], "a shard weight", &w[i]);
  char err[160];
  int k = intern_ratios(rctx, a, w, (int)ra->u.seq.count, err, sizeof err);
  if (!k)
    return plan_rd_fail(rd, ra, PLAN_EINVALID, "ratios: %s", err);
  e->ratio = (uint8_t)k;
  return PLAN_OK;
}

static int read_placement(const plan_reader *rd, const plan_ynode *n,
                          const plan_mesh *m, plan_mesh *mut, int rank,
                          plan_placement *out) {
  char err[160];
  int rc;
  ratio_ctx rc_ctx = {m, mut, rd->arena};
  plan_ratio_sink sink = {intern_ratios, &rc_ctx, 0};
  if (n->kind == PLAN_Y_SCALAR) {
    size_t off = 0;
    if (plan_placement_parse_r(out, n->u.scalar.text, n->u.scalar.len, m->naxes,
                               &sink, err, sizeof err, &off)) {
      int col = n->col + (int)off + (n->u.scalar.style == PLAN_Y_QUOTED);
      return plan_fail(PLAN_EINVALID, rd->file, n->line, col,
                       "placement '%.60s': %s", n->u.scalar.text, err);
    }
    if (plan_placement_has_ratios(out) &&
        (rc = plan_rd_need_format_1_1(rd, n, "shard ratios S(d|w0:w1:...)")))
      return rc;
  } else if (n->kind == PLAN_Y_MAP) {
    /* {dp: S(0), tp: R, order: {0: [tp, dp]}} */
    plan_placement_replicated(out, m->naxes);
    for (int a = 0; a < m->naxes; a++)
      out->ax[a].level = -1;
    const plan_ynode *order = NULL;
    for (size_t i = 0; i < n->u.map.count; i++) {
      const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
      if (!strcmp(k->u.scalar.text, "order")) {
        order = v;
        continue;
      }
      if (!strncmp(k->u.scalar.text, "x-", 2))
        continue; /* extension keys are allowed in every mapping */
      int a = plan_mesh_axis_find(m, k->u.scalar.text);
      if (a < 0)
        return plan_rd_fail(rd, k, PLAN_EINVALID, "no mesh axis '%.40s'",
                            k->u.scalar.text);
      if (v->kind == PLAN_Y_MAP) {
        if ((rc = read_axis_map(rd, v, &rc_ctx, a, &out->ax[a])))
          return rc;
        continue;
      }
      if ((rc = plan_rd_expect_scalar(rd, v, "a placement entry")))
        return rc;
      plan_placement one;
      size_t off = 0;
      sink.axis = a;
      if (plan_placement_parse_r(&one, v->u.scalar.text, v->u.scalar.len, 1,
                                 &sink, err, sizeof err, &off))
        return plan_fail(PLAN_EINVALID, rd->file, v->line, v->col + (int)off,
                         "placement '%.60s': %s", v->u.scalar.text, err);
      if (plan_placement_has_ratios(&one) &&
          (rc = plan_rd_need_format_1_1(rd, v, "shard ratios S(d|w0:w1:...)")))
        return rc;
      out->ax[a] = one.ax[0];
    }
    if (order) {
      if ((rc = plan_rd_expect_map(rd, order, "order")))
        return rc;
      for (size_t i = 0; i < order->u.map.count; i++) {
        const plan_ynode *k = order->u.map.pairs[i].key;
        const plan_ynode *v = order->u.map.pairs[i].value;
        int64_t dim;
        if ((rc = plan_rd_int(rd, k, "an order dim", &dim)))
          return rc;
        const char **axes;
        int cnt;
        if ((rc = plan_rd_name_list(rd, v, "an axis name", &axes, &cnt)))
          return rc;
        for (int j = 0; j < cnt; j++) {
          int a = plan_mesh_axis_find(m, axes[j]);
          if (a < 0)
            return plan_rd_fail(rd, v, PLAN_EINVALID, "no mesh axis '%s'",
                                axes[j]);
          /* dims count from the end when negative, on either side */
          int64_t want = dim < 0 ? dim + rank : dim;
          int have =
              out->ax[a].dim < 0 ? out->ax[a].dim + rank : out->ax[a].dim;
          if (out->ax[a].kind != PLAN_PL_S || have != want)
            return plan_rd_fail(
                rd, v, PLAN_EINVALID,
                "order lists axis %s for dim %lld, but %s does not "
                "shard dim %lld",
                axes[j], (long long)dim, axes[j], (long long)dim);
          out->ax[a].level = (int8_t)j;
        }
      }
    }
  } else {
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "a placement is a string like S(0)R or a map like "
                        "{dp: S(0), tp: R}");
  }
  if (plan_placement_normalize(out, rank, err, sizeof err))
    return plan_rd_fail(rd, n, PLAN_EINVALID, "placement: %s", err);
  return PLAN_OK;
}

/* plan_read_placement_in through the load's cache (p->pl_cache). */
static int read_placement_cached(const plan_reader *rd, plan_plan *p,
                                 const plan_ynode *n, int rank,
                                 plan_placement *out) {
  struct plan_pl_cache *c = p->pl_cache;
  if (!c || n->kind != PLAN_Y_SCALAR || n->u.scalar.len == 0 ||
      n->u.scalar.len > PLAN_PL_CACHE_TEXT)
    return read_placement(rd, n, &p->mesh, &p->mesh, rank, out);
  const char *t = n->u.scalar.text;
  size_t len = n->u.scalar.len;
  uint64_t h =
      XXH3_64bits(t, len) ^ ((uint64_t)(unsigned)rank * 0x9E3779B97F4A7C15u);
  plan_pl_cache_slot *s = &c->slots[(h ^ (h >> 32)) % PLAN_PL_CACHE_SLOTS];
  if (s->len == len && s->rank == rank && !memcmp(s->text, t, len)) {
    *out = s->pl;
    return PLAN_OK;
  }
  int rc = read_placement(rd, n, &p->mesh, &p->mesh, rank, out);
  if (!rc && !plan_placement_has_ratios(out)) {
    memcpy(s->text, t, len);
    s->len = (uint8_t)len;
    s->rank = rank;
    s->pl = *out;
  }
  return rc;
}

int plan_read_placement(const plan_reader *rd, const plan_ynode *n,
                        const plan_mesh *m, int rank, plan_placement *out) {
  return read_placement(rd, n, m, NULL, rank, out);
}

int plan_read_placement_in(const plan_reader *rd, const plan_ynode *n,
                           plan_mesh *m, int rank, plan_placement *out) {
  return read_placement(rd, n, m, m, rank, out);
}

/* ---- glob patterns over op names ----------------------------------------- */

struct plan_op_name {
  const char *name;
  int op;
};

static int cmp_op_name(const void *a, const void *b) {
  return strcmp(((const struct plan_op_name *)a)->name,
                ((const struct plan_op_name *)b)->name);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The ops `pattern` can match: [*first, *end) of p->glob_index (built on
 * first use), the ops whose name starts with the pattern's literal prefix
 * (all of them when it starts with a wildcard). */
static int glob_candidates(plan_plan *p, const char *pattern, int *first,
                           int *end) {
  const plan_program *prog = p->program;
  if (!p->glob_index) {
    p->glob_index =
        malloc(sizeof(struct plan_op_name) * ((size_t)prog->nops + 1));
    if (!p->glob_index)
      return plan_oom();
    for (int i = 0; i < prog->nops; i++)
      p->glob_index[i] = (struct plan_op_name){prog->ops[i].name, i};
    qsort(p->glob_index, (size_t)prog->nops, sizeof *p->glob_index,
          cmp_op_name);
  }
  size_t len = strcspn(pattern, "*?[");
  int lo = 0, hi = prog->nops;
  while (lo < hi) { /* the first name >= the prefix */
    int mid = lo + (hi - lo) / 2;
    if (strncmp(p->glob_index[mid].name, pattern, len) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  int e = lo;
  while (e < prog->nops && !strncmp(p->glob_index[e].name, pattern, len))
    e++;
  *first = lo;
  *end = e;
  return PLAN_OK;
}

/* ---- name uses -------------------------------------------------------------
 */

int plan_record_use(plan_plan *p, const char *pattern, const char *section,
                    bool tensors, plan_pos pos) {
  /* The streamed mappings (strategies, placements) are consumed entry by
   * entry, so their duplicate keys are caught here and where the entry is
   * applied, not by the YAML reader. */
  if (!strcmp(section, "strategies") || !strcmp(section, "placements")) {
    char *key = plan_arena_printf(&p->arena, "%s:%s", section, pattern);
    int first;
    if (!key || plan_strmap_insert(&p->use_keys, key, p->nuses, &first))
      return plan_oom();
    if (first >= 0)
      return plan_fail(PLAN_ESCHEMA, p->file, pos.line, pos.col,
                       "duplicate key '%s' (first at line %d)", pattern,
                       p->uses[first].pos.line);
  }
  if (p->nuses == p->cap_uses) {
    int cap = p->cap_uses ? p->cap_uses * 2 : 16;
    plan_name_use *u = realloc(p->uses, sizeof *u * (size_t)cap);
    if (!u)
      return plan_oom();
    p->uses = u;
    p->cap_uses = cap;
  }
  plan_name_use *u = &p->uses[p->nuses];
  u->pattern = plan_arena_strdup(&p->arena, pattern);
  if (!u->pattern)
    return plan_oom();
  u->section = section;
  u->is_glob = plan_is_glob(pattern);
  u->tensors = tensors;
  u->matches = 0;
  u->pos = pos;
  return p->nuses++;
}

int plan_for_ops(plan_plan *p, const char *pattern, const char *section,
                 plan_pos pos, plan_op_fn fn, void *ctx) {
  const plan_program *prog = p->program;
  int matches = 0, rc;
  if (!plan_is_glob(pattern)) {
    /* An exact name that resolves needs no record (a 100k-op plan has
     * 100k of them); a miss is kept for validation to report. */
    int op =
        p->next_op < prog->nops && !strcmp(prog->ops[p->next_op].name, pattern)
            ? p->next_op /* strategies usually follow the ops' order */
            : plan_strmap_get(&prog->op_by_name, pattern);
    if (op >= 0) {
      p->next_op = op + 1;
      return (rc = fn(op, ctx)) ? rc : 1;
    }
    rc = plan_record_use(p, pattern, section, false, pos);
    return rc < 0 ? rc : 0;
  }
  /* A pattern's literal prefix ("layers.12." of "layers.12.*") picks the
   * ops it can match out of the ops sorted by name; only those are
   * matched, so per-layer patterns over a large program stay cheap. What
   * is scanned, weighted by pattern length (a match is linear in it), is
   * bounded: patterns that start with a wildcard scan every op. */
  int first = 0, end = 0, rc2;
  if ((rc2 = glob_candidates(p, pattern, &first, &end)))
    return rc2;
  uint64_t work = (uint64_t)(end - first) * (strlen(pattern) + 1);
  if (work > PLAN_GLOB_WORK_MAX - p->glob_work)
    return plan_fail(PLAN_ELIMIT, p->file, pos.line, pos.col,
                     "%s: the glob patterns scan more than 2^27 ops x "
                     "pattern bytes over a program of %d ops; name the ops, "
                     "or give the patterns a literal prefix",
                     section, prog->nops);
  p->glob_work += work;
  int u = plan_record_use(p, pattern, section, false, pos);
  if (u < 0)
    return u;
  /* the matches in op order, as a scan of every op would call fn */
  int *hit = malloc(sizeof(int) * (size_t)(end - first + 1));
  if (!hit)
    return plan_oom();
  for (int k = first; k < end; k++)
    if (plan_glob_match(pattern, p->glob_index[k].name))
      hit[matches++] = p->glob_index[k].op;
  qsort(hit, (size_t)matches, sizeof *hit, cmp_int);
  for (int k = 0; k < matches; k++)
    if ((rc = fn(hit[k], ctx))) {
      free(hit);
      return rc;
    }
  free(hit);
  p->uses[u].matches = matches;
  return matches;
}

/* ---- placements, strategies, outputs ----------------------------------------
 */

/* One entry of `placements`. */
int plan_read_placement_entry(const plan_reader *rd, plan_plan *p,
                              const plan_ynode *k, const plan_ynode *v) {
  const plan_program *prog = p->program;
  const char *name;
  int rc;
  if ((rc = plan_rd_name(rd, k, "a tensor name", &name)))
    return rc;
  int t = plan_strmap_get(&prog->tensor_by_name, name);
  if (t < 0) { /* reported by validation (and drift) */
    int u = plan_record_use(p, name, "placements", true, plan_rd_pos(k));
    return u < 0 ? u : PLAN_OK;
  }
  if (prog->tensors[t].producer >= 0)
    return plan_rd_fail(rd, k, PLAN_EINVALID,
                        "placements are for inputs, params and consts; '%s' is "
                        "produced by op '%s' (its placement is the op's "
                        "strategy)",
                        name, prog->ops[prog->tensors[t].producer].name);
  plan_tensor_pl *tp = &p->placements[t];
  if (tp->set)
    return plan_rd_fail(rd, k, PLAN_ESCHEMA,
                        "duplicate key '%s' (first at line %d)", name,
                        tp->pos.line);
  if ((rc = read_placement_cached(rd, p, v, prog->tensors[t].rank, &tp->pl)))
    return rc;
  tp->set = true;
  tp->pos = plan_rd_pos(k);
  return PLAN_OK;
}

int plan_read_tensor_placements(const plan_reader *rd, const plan_ynode *n,
                                plan_plan *p) {
  int rc = plan_rd_expect_map(rd, n, "placements");
  for (size_t i = 0; !rc && i < n->u.map.count; i++)
    rc = plan_read_placement_entry(rd, p, n->u.map.pairs[i].key,
                                   n->u.map.pairs[i].value);
  return rc;
}

typedef struct strategy_ctx {
  const plan_reader *rd;
  plan_plan *p;
  const plan_ynode *key, *value;
  const char *pattern; /* NULL for an exact name */
} strategy_ctx;

static int read_placement_list(const plan_reader *rd, const plan_ynode *n,
                               plan_plan *p, const int *tensors, int count,
                               const char *what, plan_placement *out) {
  const plan_program *prog = p->program;
  int have = n->kind == PLAN_Y_SEQ ? (int)n->u.seq.count : 1;
  if (have != count)
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "%s lists %d placement%s, the op has %d", what, have,
                        have == 1 ? "" : "s", count);
  for (int i = 0; i < count; i++) {
    const plan_ynode *e = n->kind == PLAN_Y_SEQ ? n->u.seq.items[i] : n;
    int rc = read_placement_cached(rd, p, e, prog->tensors[tensors[i]].rank,
                                   &out[i]);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

/* Strategies repeat (every layer's q projection has the same one), so equal
 * placement lists are stored once and shared. */
static plan_placement *intern_placements(plan_plan *p, const plan_placement *v,
                                         int n) {
  size_t bytes = sizeof(plan_placement) * (size_t)n;
  uint64_t h = XXH3_64bits(v, bytes) ^ (uint64_t)n;
  plan_intern *t = &p->intern;
  if ((t->count + 1) * 2 > t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 64;
    plan_intern_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) {
      plan_oom();
      return NULL;
    }
    for (size_t i = 0; i < t->cap; i++)
      if (t->slots[i].arr) {
        size_t j = t->slots[i].hash & (ncap - 1);
        while (ns[j].arr)
          j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
      }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
  }
  size_t j = h & (t->cap - 1);
  for (; t->slots[j].arr; j = (j + 1) & (t->cap - 1))
    if (t->slots[j].hash == h && t->slots[j].n == n &&
        !memcmp(t->slots[j].arr, v, bytes))
      return t->slots[j].arr;
  plan_placement *arr = plan_arena_alloc(&p->arena, bytes);
  if (!arr)
    return NULL;
  memcpy(arr, v, bytes);
  t->slots[j].hash = h;
  t->slots[j].n = n;
  t->slots[j].arr = arr;
  t->count++;
  return arr;
}

static int apply_strategy(int opi, void *vctx) {
  strategy_ctx *c = vctx;
  plan_strategy *s = &c->p->strategies[opi];
  const plan_op *op = &c->p->program->ops[opi];
  /* Exact names win over patterns whatever the order they come in. */
  if (s->set) {
    if (!c->pattern && !s->pattern)
      return plan_rd_fail(c->rd, c->key, PLAN_ESCHEMA,
                          "duplicate key '%s' (first at line %d)", op->name,
                          s->pos.line);
    if (c->pattern && !s->pattern)
      return PLAN_OK;
    if (c->pattern && s->pattern)
      return plan_rd_fail(c->rd, c->key, PLAN_EINVALID,
                          "op '%s' matches both '%s' and '%s'; give it its own "
                          "entry",
                          op->name, s->pattern, c->pattern);
  }
  const plan_ynode *n = c->value;
  int rc;
  if ((rc = plan_rd_expect_map(c->rd, n,
                               "a strategy ({in: [..], out: [..]})")) ||
      (rc = plan_rd_check_keys(c->rd, n, strategy_keys, "a strategy", NULL)))
    return rc;
  const plan_ynode *in = plan_ymap_get(n, "in"), *out = plan_ymap_get(n, "out");
  if (!in || !out)
    return plan_rd_fail(c->rd, n, PLAN_ESCHEMA,
                        "a strategy needs 'in' and 'out'");
  plan_placement tmp[PLAN_MAX_OPERANDS];
  memset(tmp, 0, sizeof tmp); /* interning compares bytes */
  if ((rc = read_placement_list(c->rd, in, c->p, op->in, op->nin, "in", tmp)) ||
      (rc = read_placement_list(c->rd, out, c->p, op->out, op->nout, "out",
                                tmp + op->nin)))
    return plan_fail(plan_error_last()->code, plan_error_last()->file,
                     plan_error_last()->line, plan_error_last()->column,
                     "strategy of op '%s': %s", op->name,
                     plan_error_last()->message);
  plan_placement *arr = intern_placements(c->p, tmp, op->nin + op->nout);
  if (!arr)
    return plan_oom();
  s->in = arr;
  s->out = arr + op->nin;
  s->set = true;
  s->pos = plan_rd_pos(c->key);
  s->pattern = c->pattern;
  return PLAN_OK;
}

/* One entry of `strategies`: an op name or a glob. */
int plan_read_strategy_entry(const plan_reader *rd, plan_plan *p,
                             const plan_ynode *k, const plan_ynode *v) {
  int rc;
  if ((rc = plan_rd_check_name(rd, k, "an op name or pattern")))
    return rc;
  const char *name = k->u.scalar.text; /* copied only where kept */
  bool glob = plan_is_glob(name);
  if (glob && !(name = plan_arena_strdup(&p->arena, name)))
    return plan_oom();
  strategy_ctx c = {rd, p, k, v, glob ? name : NULL};
  rc = plan_for_ops(p, name, "strategies", plan_rd_pos(k), apply_strategy, &c);
  return rc < 0 ? rc : PLAN_OK;
}

int plan_read_strategies(const plan_reader *rd, const plan_ynode *n,
                         plan_plan *p) {
  int rc = plan_rd_expect_map(rd, n, "strategies");
  /* exact names first, then patterns (see on_item) */
  for (int pass = 0; !rc && pass < 2; pass++)
    for (size_t i = 0; !rc && i < n->u.map.count; i++) {
      const plan_ynode *k = n->u.map.pairs[i].key;
      if (plan_is_glob(k->u.scalar.text) != (pass == 1))
        continue;
      rc = plan_read_strategy_entry(rd, p, k, n->u.map.pairs[i].value);
    }
  return rc;
}

int plan_read_output_placements(const plan_reader *rd, const plan_ynode *n,
                                plan_plan *p) {
  int rc = plan_rd_expect_map(rd, n, "outputs");
  if (rc)
    return rc;
  const plan_program *prog = p->program;
  for (size_t i = 0; i < n->u.map.count; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key;
    const char *name;
    if ((rc = plan_rd_name(rd, k, "an output name", &name)))
      return rc;
    int u = plan_record_use(p, name, "outputs", true, plan_rd_pos(k));
    if (u < 0)
      return u;
    int slot = -1;
    for (int j = 0; j < prog->noutputs; j++)
      if (!strcmp(prog->tensors[prog->outputs[j]].name, name))
        slot = j;
    if (slot < 0)
      continue; /* validation reports it */
    p->uses[u].matches = 1;
    plan_tensor_pl *tp = &p->out_pl[slot];
    if ((rc = plan_read_placement_in(rd, n->u.map.pairs[i].value, &p->mesh,
                                     prog->tensors[prog->outputs[slot]].rank,
                                     &tp->pl)))
      return rc;
    tp->set = true;
    tp->pos = plan_rd_pos(k);
  }
  return PLAN_OK;
}
