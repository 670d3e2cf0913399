/* Reading a plan document: version, program (inline or by path), mesh,
 * placements, strategies and output placements; the other sections are in
 * plan_sections.c. Loading checks well-formedness only; plan_validate judges
 * the decisions. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "libplan/plan.h"
#include "read/plan_read.h"
#include "yaml/ypipe.h"

static const char *const top_keys[] = {
    "libplan",  "program",  "mesh",    "placements", "strategies", "outputs",
    "pipeline", "training", "regions", "provenance", NULL};
static const char *const ref_keys[] = {"path", "hash", "signatures", NULL};
static const char *const sig_keys[] = {"ops", "tensors", NULL};
static const char *const strategy_keys[] = {"in", "out", NULL};

/* ---- placements ------------------------------------------------------------
 */

int plan_read_placement(const plan_reader *rd, const plan_ynode *n,
                   const plan_mesh *m, int rank, plan_placement *out) {
  char err[160];
  int rc;
  if (n->kind == PLAN_Y_SCALAR) {
    size_t off = 0;
    if (plan_placement_parse(out, n->u.scalar.text, n->u.scalar.len, m->naxes,
                             err, sizeof err, &off)) {
      int col = n->col + (int)off + (n->u.scalar.style == PLAN_Y_QUOTED);
      return plan_fail(PLAN_EINVALID, rd->file, n->line, col,
                       "placement '%.60s': %s", n->u.scalar.text, err);
    }
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
      if ((rc = plan_rd_expect_scalar(rd, v, "a placement entry")))
        return rc;
      plan_placement one;
      size_t off = 0;
      if (plan_placement_parse(&one, v->u.scalar.text, v->u.scalar.len, 1, err,
                               sizeof err, &off))
        return plan_fail(PLAN_EINVALID, rd->file, v->line, v->col + (int)off,
                         "placement '%.60s': %s", v->u.scalar.text, err);
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
            return plan_rd_fail(rd, v, PLAN_EINVALID, "no mesh axis '%s'", axes[j]);
          /* dims count from the end when negative, on either side */
          int64_t want = dim < 0 ? dim + rank : dim;
          int have =
              out->ax[a].dim < 0 ? out->ax[a].dim + rank : out->ax[a].dim;
          if (out->ax[a].kind != PLAN_PL_S || have != want)
            return plan_rd_fail(rd, v, PLAN_EINVALID,
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
  int u = plan_record_use(p, pattern, section, false, pos);
  if (u < 0)
    return u;
  {
    for (int op = 0; op < prog->nops; op++)
      if (plan_glob_match(pattern, prog->ops[op].name)) {
        matches++;
        if ((rc = fn(op, ctx)))
          return rc;
      }
  }
  p->uses[u].matches = matches;
  return matches;
}

/* ---- program reference -----------------------------------------------------
 */

static int read_sig_map(const plan_reader *rd, const plan_ynode *n,
                        const char ***names, uint64_t **sigs, int *count) {
  int rc = plan_rd_expect_map(rd, n, "signatures");
  if (rc)
    return rc;
  *count = (int)n->u.map.count;
  *names = plan_arena_alloc(rd->arena, sizeof(char *) * (n->u.map.count + 1));
  *sigs = plan_arena_alloc(rd->arena, sizeof(uint64_t) * (n->u.map.count + 1));
  if (!*names || !*sigs)
    return plan_oom();
  for (size_t i = 0; i < n->u.map.count; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
    if ((rc = plan_rd_name(rd, k, "a name", &(*names)[i])) ||
        (rc = plan_rd_expect_scalar(rd, v, "a signature")))
      return rc;
    const char *t = v->u.scalar.text;
    uint64_t s = 0;
    if (v->u.scalar.len != 16)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "a signature is 16 hex digits");
    for (int j = 0; j < 16; j++) {
      char c = t[j];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return plan_rd_fail(rd, v, PLAN_EINVALID, "a signature is 16 hex digits");
      s = s << 4 | (uint64_t)d;
    }
    (*sigs)[i] = s;
  }
  return PLAN_OK;
}

static int read_file_all(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return plan_failf(PLAN_EIO, "cannot read '%s': %s", path, strerror(errno));
  plan_buf b;
  plan_buf_init(&b);
  /* one read of the whole file when its size is known (the usual case) */
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size < ((off_t)1 << 30)) {
    size_t want = (size_t)st.st_size;
    char *buf = malloc(want + 1);
    if (!buf) {
      fclose(f);
      return plan_oom();
    }
    size_t got = fread(buf, 1, want, f);
    int c = got == want ? fgetc(f) : EOF;
    if (got == want && c == EOF && !ferror(f)) {
      fclose(f);
      buf[want] = '\0';
      *data = buf;
      *len = want;
      return PLAN_OK;
    }
    free(buf);
    rewind(f); /* the file changed under us: read it the slow way */
  }
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    plan_buf_append(&b, chunk, n);
    if (b.len > (1u << 30)) {
      fclose(f);
      plan_buf_free(&b);
      return plan_failf(PLAN_ELIMIT, "'%s' is larger than 1 GiB", path);
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err || b.failed) {
    plan_buf_free(&b);
    return err ? plan_failf(PLAN_EIO, "cannot read '%s'", path) : plan_oom();
  }
  *len = b.len;
  *data = b.data ? b.data : calloc(1, 1);
  return *data ? PLAN_OK : plan_oom();
}

static int read_program_ref(const plan_reader *rd, const plan_ynode *n,
                            plan_plan *p, const char *base_dir) {
  int rc = plan_rd_check_keys(rd, n, ref_keys, "program", NULL);
  if (rc)
    return rc;
  plan_program_ref *r = &p->ref;
  r->pos = plan_rd_pos(n);
  const plan_ynode *pathn = plan_ymap_get(n, "path"), *v;
  if ((rc = plan_rd_name(rd, pathn, "program path", &r->path)))
    return rc;
  if ((v = plan_ymap_get(n, "hash"))) {
    if ((rc = plan_rd_expect_scalar(rd, v, "program hash")))
      return rc;
    if (plan_hash_parse(&r->hash, v->u.scalar.text))
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                     "program hash must be xxh3:<32 hex digits>");
    r->has_hash = true;
  }
  if ((v = plan_ymap_get(n, "signatures"))) {
    if ((rc = plan_rd_expect_map(rd, v, "signatures")) ||
        (rc = plan_rd_check_keys(rd, v, sig_keys, "signatures", NULL)))
      return rc;
    const plan_ynode *s;
    if ((s = plan_ymap_get(v, "ops")) &&
        (rc = read_sig_map(rd, s, &r->op_names, &r->op_sigs, &r->nops)))
      return rc;
    if ((s = plan_ymap_get(v, "tensors")) &&
        (rc = read_sig_map(rd, s, &r->tensor_names, &r->tensor_sigs,
                           &r->ntensors)))
      return rc;
  }
  char *full = r->path[0] == '/' || !base_dir || !base_dir[0]
                   ? plan_arena_strdup(rd->arena, r->path)
                   : plan_arena_printf(rd->arena, "%s/%s", base_dir, r->path);
  if (!full)
    return plan_oom();
  char *data = NULL;
  size_t len = 0;
  if ((rc = read_file_all(full, &data, &len)))
    return plan_fail(rc, rd->file, pathn->line, pathn->col, "program '%s': %s",
                     r->path, plan_error_last()->message);
  rc = plan_program_load_buffer(&p->program, data, len, full);
  free(data);
  return rc;
}

/* ---- placements, strategies, outputs ----------------------------------------
 */

/* One entry of `placements`. */
static int read_placement_entry(const plan_reader *rd, plan_plan *p,
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
    return plan_rd_fail(rd, k, PLAN_ESCHEMA, "duplicate key '%s' (first at line %d)",
                   name, tp->pos.line);
  if ((rc = plan_read_placement(rd, v, &p->mesh, prog->tensors[t].rank, &tp->pl)))
    return rc;
  tp->set = true;
  tp->pos = plan_rd_pos(k);
  return PLAN_OK;
}

static int read_tensor_placements(const plan_reader *rd, const plan_ynode *n,
                                  plan_plan *p) {
  int rc = plan_rd_expect_map(rd, n, "placements");
  for (size_t i = 0; !rc && i < n->u.map.count; i++)
    rc = read_placement_entry(rd, p, n->u.map.pairs[i].key,
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
                               const plan_plan *p, const int *tensors,
                               int count, const char *what,
                               plan_placement *out) {
  const plan_program *prog = p->program;
  int have = n->kind == PLAN_Y_SEQ ? (int)n->u.seq.count : 1;
  if (have != count)
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                   "%s lists %d placement%s, the op has %d", what, have,
                   have == 1 ? "" : "s", count);
  for (int i = 0; i < count; i++) {
    const plan_ynode *e = n->kind == PLAN_Y_SEQ ? n->u.seq.items[i] : n;
    int rc = plan_read_placement(rd, e, &p->mesh, prog->tensors[tensors[i]].rank,
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
  if ((rc = plan_rd_expect_map(c->rd, n, "a strategy ({in: [..], out: [..]})")) ||
      (rc = plan_rd_check_keys(c->rd, n, strategy_keys, "a strategy", NULL)))
    return rc;
  const plan_ynode *in = plan_ymap_get(n, "in"), *out = plan_ymap_get(n, "out");
  if (!in || !out)
    return plan_rd_fail(c->rd, n, PLAN_ESCHEMA, "a strategy needs 'in' and 'out'");
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
static int read_strategy_entry(const plan_reader *rd, plan_plan *p,
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

static int read_strategies(const plan_reader *rd, const plan_ynode *n,
                           plan_plan *p) {
  int rc = plan_rd_expect_map(rd, n, "strategies");
  /* exact names first, then patterns (see on_item) */
  for (int pass = 0; !rc && pass < 2; pass++)
    for (size_t i = 0; !rc && i < n->u.map.count; i++) {
      const plan_ynode *k = n->u.map.pairs[i].key;
      if (plan_is_glob(k->u.scalar.text) != (pass == 1))
        continue;
      rc = read_strategy_entry(rd, p, k, n->u.map.pairs[i].value);
    }
  return rc;
}

static int read_output_placements(const plan_reader *rd, const plan_ynode *n,
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
    if ((rc = plan_read_placement(rd, n->u.map.pairs[i].value, &p->mesh,
                             prog->tensors[prog->outputs[slot]].rank, &tp->pl)))
      return rc;
    tp->set = true;
    tp->pos = plan_rd_pos(k);
  }
  return PLAN_OK;
}

/* ---- the document
 * ------------------------------------------------------------- */

static int alloc_per_program(plan_plan *p) {
  const plan_program *prog = p->program;
  p->placements = plan_arena_alloc(&p->arena, sizeof(plan_tensor_pl) *
                                                  (size_t)(prog->ntensors + 1));
  p->out_pl = plan_arena_alloc(&p->arena, sizeof(plan_tensor_pl) *
                                              (size_t)(prog->noutputs + 1));
  p->strategies = plan_arena_alloc(&p->arena, sizeof(plan_strategy) *
                                                  (size_t)(prog->nops + 1));
  if (!p->placements || !p->out_pl || !p->strategies)
    return plan_oom();
  return PLAN_OK;
}

/* Loading streams: the big collections (ops, tensors, strategies,
 * placements) are read item by item while libyaml parses, so a 100k-op plan
 * never exists whole as a YAML tree. Anything that arrives before what it
 * needs (a strategy before the program, say) stays in the tree and is read
 * when the parse is over. */
typedef struct deferred_item {
  const char *path;
  plan_ynode *key, *value;
} deferred_item;

typedef struct load_ctx {
  plan_plan *p;
  plan_reader rd;
  const char *base_dir;
  bool have_version, program_done, mesh_done;
  /* Pipelined loads cannot leave an item in the tree for later: items that
   * must wait are copied here instead and read at the same point. */
  bool piped;
  /* the program's hash and name order, computed on a third thread while
   * the parser and the reader go on (see load_program) */
  pthread_t prep_thread;
  bool prep_running;
  int prep_rc;
  plan_error prep_err;
  char prep_msg[1024], prep_file[512];
  plan_arena defer_arena;
  deferred_item *deferred;
  int ndeferred, cap_deferred;
} load_ctx;

/* An item read later: kept in the tree, or copied aside when pipelined.
 * Returns the callback's answer (0: keep, 1: consumed) or a status. */
static int defer_item(load_ctx *c, const plan_yitem *it) {
  if (!c->piped)
    return 0;
  if (c->ndeferred == c->cap_deferred) {
    int cap = c->cap_deferred ? c->cap_deferred * 2 : 64;
    deferred_item *d = realloc(c->deferred, sizeof *d * (size_t)cap);
    if (!d)
      return plan_oom();
    c->deferred = d;
    c->cap_deferred = cap;
  }
  deferred_item *d = &c->deferred[c->ndeferred];
  d->path = it->path;
  d->key = it->key ? plan_ynode_copy(&c->defer_arena, it->key) : NULL;
  d->value = plan_ynode_copy(&c->defer_arena, it->value);
  if ((it->key && !d->key) || !d->value)
    return plan_oom();
  c->ndeferred++;
  return 1;
}

/* Reads the deferred items of one stream; for strategies, exact names in a
 * first pass and patterns in a second, as read_strategies does. */
static int read_deferred(load_ctx *c, const char *path) {
  int rc = PLAN_OK;
  plan_plan *p = c->p;
  bool strat = !strcmp(path, "strategies");
  for (int pass = 0; !rc && pass < (strat ? 2 : 1); pass++)
    for (int i = 0; !rc && i < c->ndeferred; i++) {
      deferred_item *d = &c->deferred[i];
      if (strcmp(d->path, path))
        continue;
      if (strat && plan_is_glob(d->key->u.scalar.text) != (pass == 1))
        continue;
      if (!strcmp(path, "program/ops") || !strcmp(path, "program/tensors")) {
        plan_reader prd = c->rd;
        prd.arena = &p->program->arena;
        rc = d->key ? plan_program_add_tensor(&prd, p->program, d->key, d->value)
                    : plan_program_add_op(&prd, p->program, d->value);
      } else if (strat) {
        rc = read_strategy_entry(&c->rd, p, d->key, d->value);
      } else {
        rc = read_placement_entry(&c->rd, p, d->key, d->value);
      }
    }
  return rc;
}

static const char *const load_streams[] = {"program/tensors", "program/ops",
                                           "strategies", "placements", NULL};

static int ensure_program(load_ctx *c) {
  if (!c->p->program && !(c->p->program = plan_program_new(c->p->file)))
    return plan_oom();
  return PLAN_OK;
}

static void *prepare_main(void *arg) {
  load_ctx *c = arg;
  c->prep_rc = plan_canon_program_prepare(c->p->program);
  if (c->prep_rc) { /* keep the error: it belongs to this thread */
    const plan_error *e = plan_error_last();
    snprintf(c->prep_msg, sizeof c->prep_msg, "%s", e->message);
    snprintf(c->prep_file, sizeof c->prep_file, "%s", e->file);
  }
  return NULL;
}

/* Joins the preparing thread; its error, if any, becomes this thread's. */
static int prepare_join(load_ctx *c) {
  if (!c->prep_running)
    return PLAN_OK;
  pthread_join(c->prep_thread, NULL);
  c->prep_running = false;
  if (c->prep_rc)
    return plan_fail(c->prep_rc, c->prep_file, 0, 0, "%s", c->prep_msg);
  return PLAN_OK;
}

static int load_program(load_ctx *c, const plan_ynode *v) {
  plan_plan *p = c->p;
  int rc;
  if ((rc = plan_rd_expect_map(&c->rd, v, "program")))
    return rc;
  if (plan_ymap_get(v, "path")) {
    p->program_inline = false;
    plan_program_free(p->program);
    p->program = NULL;
    if ((rc = read_program_ref(&c->rd, v, p, c->base_dir)))
      return rc;
  } else {
    p->program_inline = true;
    if ((rc = ensure_program(c)))
      return rc;
    plan_reader prd = c->rd;
    prd.arena = &p->program->arena;
    if ((rc = plan_program_read(&prd, v, p->program)) ||
        (rc = plan_program_finish(&prd, p->program)))
      return rc;
    /* Pipelined, the program is final long before the parse ends: its
     * hash and name order (most of any later plan hash) are computed on a
     * third thread meanwhile. It only reads the program; the reader goes
     * on writing the plan's own tables. */
    if (c->piped) {
      if (pthread_create(&c->prep_thread, NULL, prepare_main, c) == 0)
        c->prep_running = true;
      else if ((rc = plan_canon_program_prepare(p->program)))
        return rc;
    }
  }
  if ((rc = alloc_per_program(p)))
    return rc;
  c->program_done = true;
  return PLAN_OK;
}

static int load_mesh(load_ctx *c, const plan_ynode *v) {
  c->p->has_mesh = true;
  c->p->mesh_pos = plan_rd_pos(v);
  c->mesh_done = true;
  return plan_mesh_read(&c->rd, v, &c->p->mesh);
}

static int on_item(void *vctx, const plan_yitem *it) {
  load_ctx *c = vctx;
  plan_plan *p = c->p;
  int rc;
  if (!it->key && !it->path[0])
    return 0;
  if (!it->path[0]) { /* a root entry is complete */
    const char *key = it->key->u.scalar.text;
    if (!strcmp(key, "libplan")) {
      plan_ynode root = {.kind = PLAN_Y_MAP};
      plan_ypair pair = {(plan_ynode *)it->key, (plan_ynode *)it->value};
      root.u.map.pairs = &pair;
      root.u.map.count = 1;
      if ((rc = plan_read_version(&c->rd, &root)))
        return rc;
      p->version_major = c->rd.ver_major;
      p->version_minor = c->rd.ver_minor;
      p->version_pos = c->rd.ver_pos;
      c->have_version = true;
    } else if (c->have_version && !strcmp(key, "program")) {
      if ((rc = load_program(c, it->value)))
        return rc;
    } else if (c->have_version && !strcmp(key, "mesh")) {
      if ((rc = load_mesh(c, it->value)))
        return rc;
    }
    return 0; /* root entries stay in the tree */
  }
  /* A collection of the wrong kind (ops as a mapping, strategies as a
   * sequence) stays in the tree, where the type error is reported; when
   * pipelined its items are dropped (the collection node, left empty,
   * still carries the type and position for that error). */
  bool want_key = strcmp(it->path, "program/ops") != 0;
  if (want_key != (it->key != NULL))
    return c->piped ? 1 : 0;
  if (!c->have_version)
    return defer_item(c, it);
  if (!strcmp(it->path, "program/ops") ||
      !strcmp(it->path, "program/tensors")) {
    if ((rc = ensure_program(c)))
      return rc;
    plan_reader prd = c->rd;
    prd.arena = &p->program->arena;
    rc = it->key ? plan_program_add_tensor(&prd, p->program, it->key, it->value)
                 : plan_program_add_op(&prd, p->program, it->value);
    return rc ? rc : 1;
  }
  if (!c->program_done || !c->mesh_done)
    return defer_item(c, it);
  /* Patterns wait in the tree until every exact name is in (read_rest):
   * an exact name wins over them wherever it is written, also where the
   * pattern's placements would not fit the op or two patterns overlap. */
  if (!strcmp(it->path, "strategies") && plan_is_glob(it->key->u.scalar.text))
    return defer_item(c, it);
  rc = !strcmp(it->path, "strategies")
           ? read_strategy_entry(&c->rd, p, it->key, it->value)
           : read_placement_entry(&c->rd, p, it->key, it->value);
  return rc ? rc : 1;
}

/* What streaming left in the tree. */
static int read_rest(load_ctx *c, const plan_ydoc *doc) {
  plan_plan *p = c->p;
  plan_reader *rd = &c->rd;
  const plan_ynode *root = doc->root, *v;
  int rc;
  if (!c->have_version) {
    if ((rc = plan_read_version(rd, root)))
      return rc;
    p->version_major = rd->ver_major;
    p->version_minor = rd->ver_minor;
    p->version_pos = rd->ver_pos;
  }
  if ((rc = plan_rd_check_keys(rd, root, top_keys, "the document", &p->ext)))
    return rc;
  if (!(v = plan_ymap_get(root, "program")))
    return plan_rd_fail(rd, root, PLAN_ESCHEMA, "the document has no 'program'");
  if (!c->program_done && c->ndeferred) {
    if ((rc = ensure_program(c)) || (rc = read_deferred(c, "program/tensors")) ||
        (rc = read_deferred(c, "program/ops")))
      return rc;
  }
  if (!c->program_done && (rc = load_program(c, v)))
    return rc;
  if (!(v = plan_ymap_get(root, "mesh"))) {
    /* A program-only document: nothing else may be present. */
    static const char *const need_mesh[] = {
        "placements", "strategies", "outputs", "pipeline",
        "training",   "regions",    NULL};
    for (const char *const *k = need_mesh; *k; k++)
      if (plan_ymap_get(root, *k))
        return plan_rd_fail(rd, root, PLAN_ESCHEMA,
                       "'%s' needs a 'mesh' in the same document", *k);
  } else {
    if (!c->mesh_done && (rc = load_mesh(c, v)))
      return rc;
    const plan_ynode *pl = plan_ymap_get(root, "placements");
    const plan_ynode *st = plan_ymap_get(root, "strategies");
    /* a wrong-kind collection reports its type first, as unpiped */
    if (pl && (rc = plan_rd_expect_map(rd, pl, "placements")))
      return rc;
    if (st && (rc = plan_rd_expect_map(rd, st, "strategies")))
      return rc;
    if ((rc = read_deferred(c, "placements")))
      return rc;
    if (pl && (rc = read_tensor_placements(rd, pl, p)))
      return rc;
    if ((rc = read_deferred(c, "strategies")))
      return rc;
    if (st && (rc = read_strategies(rd, st, p)))
      return rc;
    if ((v = plan_ymap_get(root, "outputs")) &&
        (rc = read_output_placements(rd, v, p)))
      return rc;
  }
  return plan_sections_read(rd, root, p);
}

static plan_plan *plan_new(const char *file) {
  plan_plan *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  plan_arena_init(&p->arena);
  p->file = plan_arena_strdup(&p->arena, file ? file : "");
  p->pipeline.axis = -1;
  if (!p->file) {
    plan_free(p);
    return NULL;
  }
  return p;
}

int plan_load_buffer(plan_plan **out, const char *data, size_t len,
                     const char *name, const char *base_dir) {
  return plan_load_buffer_mode(out, data, len, name, base_dir, PLAN_LOAD_AUTO);
}

int plan_from_root(plan_plan **out, const plan_ynode *root, const char *file,
                   const char *base_dir) {
  *out = NULL;
  plan_plan *p = plan_new(file);
  if (!p)
    return plan_oom();
  load_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.rd.file = p->file;
  c.rd.arena = &p->arena;
  c.base_dir = base_dir;
  plan_arena_init(&c.defer_arena);
  plan_ydoc doc;
  memset(&doc, 0, sizeof doc);
  doc.root = (plan_ynode *)root;
  int rc = read_rest(&c, &doc);
  int prc = prepare_join(&c);
  if (!rc)
    rc = prc;
  free(c.deferred);
  plan_arena_free(&c.defer_arena);
  if (rc) {
    plan_free(p);
    return rc;
  }
  *out = p;
  return PLAN_OK;
}

int plan_load_buffer_mode(plan_plan **out, const char *data, size_t len,
                          const char *name, const char *base_dir, int mode) {
  *out = NULL;
  plan_error_clear();
  if (!data && len)
    return plan_failf(PLAN_EUSAGE, "plan_load_buffer: NULL data");
  plan_plan *p = plan_new(name);
  if (!p)
    return plan_oom();
  load_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.rd.file = p->file;
  c.rd.arena = &p->arena;
  c.base_dir = base_dir;
  plan_arena_init(&c.defer_arena);
  plan_ydoc doc;
  int rc;
  plan_ypipe *pipe = NULL;
  /* Big documents are read on a second thread while libyaml parses; small
   * ones are not worth the thread. */
  if (mode == PLAN_LOAD_PIPED ||
      (mode == PLAN_LOAD_AUTO && len >= PLAN_PIPE_MIN_BYTES))
    if (plan_ypipe_start(&pipe, on_item, &c) != PLAN_OK)
      pipe = NULL; /* no thread here: read sequentially */
  if (pipe) {
    c.piped = true;
    rc = plan_ydoc_parse_piped(&doc, data ? data : "", len, p->file,
                               load_streams, pipe);
    rc = plan_ypipe_finish(pipe, rc);
  } else {
    rc = plan_ydoc_parse_stream(&doc, data ? data : "", len, p->file,
                                load_streams, on_item, &c);
  }
  if (!rc)
    rc = read_rest(&c, &doc);
  /* the hash thread overlapped the rest of the load; it is joined on every
   * path before the program can be freed */
  int prc = prepare_join(&c);
  if (!rc)
    rc = prc;
  plan_ydoc_free(&doc);
  free(c.deferred);
  plan_arena_free(&c.defer_arena);
  if (rc) {
    plan_free(p);
    return rc;
  }
  *out = p;
  return PLAN_OK;
}

static int load_mode_of(const plan_load_options *o, int *mode) {
  *mode = PLAN_LOAD_AUTO;
  if (!o)
    return PLAN_OK;
  if (o->version != PLAN_LOAD_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE, "plan_load_options version %u is not %d",
                      o->version, PLAN_LOAD_OPTIONS_VERSION);
  if (o->threads < 0 || o->threads > 1)
    return plan_failf(PLAN_EUSAGE, "plan_load_options.threads is 0 or 1");
  *mode = o->threads == 1 ? PLAN_LOAD_SEQUENTIAL : PLAN_LOAD_AUTO;
  return PLAN_OK;
}

int plan_load_buffer_ext(plan_plan **out, const char *data, size_t len,
                         const char *name, const char *base_dir,
                         const plan_load_options *opts) {
  int mode, rc;
  *out = NULL;
  if ((rc = load_mode_of(opts, &mode)))
    return rc;
  return plan_load_buffer_mode(out, data, len, name, base_dir, mode);
}

int plan_load(plan_plan **out, const char *path) {
  return plan_load_ext(out, path, NULL);
}

int plan_load_ext(plan_plan **out, const char *path,
                  const plan_load_options *opts) {
  *out = NULL;
  plan_error_clear();
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_load: NULL path");
  char *data = NULL;
  size_t len = 0;
  int rc = read_file_all(path, &data, &len);
  if (rc)
    return plan_fail(rc, path, 0, 0, "%s", plan_error_last()->message);
  /* Resolve a program path relative to the plan's folder. */
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (slash && (size_t)(slash - path) < sizeof dir) {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    if (!dir[0])
      strcpy(dir, "/");
  } else {
    dir[0] = 0;
  }
  rc = plan_load_buffer_ext(out, data, len, path, dir, opts);
  free(data);
  return rc;
}

void plan_free(plan_plan *p) {
  if (!p)
    return;
  plan_program_free(p->program);
  free(p->uses);
  plan_strmap_free(&p->use_keys);
  free(p->intern.slots);
  plan_arena_free(&p->arena);
  free(p);
}

plan_program *plan_take_program(plan_plan *p) {
  plan_program *prog = p->program;
  p->program = NULL;
  return prog;
}

const plan_program *plan_get_program(const plan_plan *p) {
  return p->program;
}
int plan_has_mesh(const plan_plan *p) {
  return p->has_mesh;
}
const char *plan_file(const plan_plan *p) {
  return p->file;
}
