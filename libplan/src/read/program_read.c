/* Reading the `program:` mapping into a plan_program (spec/plan-format.md,
 * "program"). Structure and names are checked here; plan_program_finish() then
 * orders the ops, infers shapes and computes signatures. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ops.h"
#include "read/program_read.h"
#include "base/suggest.h"

/* The did-you-mean of an unknown tensor name: the program's tensors. */
static void tensor_hint(char *hint, size_t size, const plan_program *p,
                        const char *name) {
  plan_hint_field(hint, size, name, p->tensors, (size_t)p->ntensors,
                  sizeof *p->tensors, offsetof(plan_tensor, name));
}

static const char *const program_keys[] = {"name",    "tensors", "ops",
                                           "outputs", "loss",    NULL};
static const char *const tensor_keys[] = {"shape", "dtype", "role",
                                          "range", "init",  NULL};
static const char *const op_keys[] = {"name", "op", "in", "out", "attrs", NULL};
static const char *const init_keys[] = {"recipe", "theta", "fill", NULL};

/* "8" or "batch=8" */
static int read_dim(const plan_reader *rd, const plan_ynode *n, int64_t *size,
                    const char **dim_name) {
  int rc = plan_rd_expect_scalar(rd, n, "a shape entry");
  if (rc)
    return rc;
  const char *t = n->u.scalar.text;
  const char *eq = strchr(t, '=');
  *dim_name = NULL;
  const char *num = t;
  size_t numlen = n->u.scalar.len;
  if (eq) {
    size_t nl = (size_t)(eq - t);
    if (nl == 0 || nl > 64)
      return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                          "shape entry '%.40s' must be SIZE or NAME=SIZE", t);
    *dim_name = plan_arena_strndup(rd->arena, t, nl);
    if (!*dim_name)
      return plan_oom();
    num = eq + 1;
    numlen = n->u.scalar.len - nl - 1;
  }
  if (!plan_parse_int64(num, numlen, size))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "shape entry '%.40s' must be SIZE or NAME=SIZE with an "
                        "integer SIZE",
                        t);
  if (*size < 0)
    return plan_rd_fail(rd, n, PLAN_EINVALID, "negative dimension %lld",
                        (long long)*size);
  return PLAN_OK;
}

int plan_read_shape(const plan_reader *rd, const plan_ynode *n,
                    plan_tensor *t) {
  int rc = plan_rd_expect_seq(rd, n, "shape");
  if (rc)
    return rc;
  if (n->u.seq.count > PLAN_MAX_RANK)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "rank %zu is over the limit of %d",
                        n->u.seq.count, PLAN_MAX_RANK);
  t->rank = (int)n->u.seq.count;
  t->dims = plan_arena_alloc_align(rd->arena,
                                   sizeof(int64_t) * (size_t)(t->rank + 1), 8);
  if (!t->dims)
    return plan_oom();
  int64_t elems = 1;
  for (int d = 0; d < t->rank; d++) {
    const plan_ynode *e = n->u.seq.items[d];
    const char *dn;
    if ((rc = read_dim(rd, e, &t->dims[d], &dn)))
      return rc;
    if (dn && !t->dim_names) {
      t->dim_names =
          plan_arena_alloc(rd->arena, sizeof(char *) * (size_t)t->rank);
      if (!t->dim_names)
        return plan_oom();
    }
    if (dn)
      t->dim_names[d] = dn;
    if (!plan_mul_i64(elems, t->dims[d], &elems))
      return plan_rd_fail(rd, e, PLAN_EINVALID,
                          "the shape's element count overflows int64");
  }
  return PLAN_OK;
}

static int read_init(const plan_reader *rd, const plan_ynode *n,
                     plan_tensor *t) {
  static const char *const recipes[PLAN_RECIPE_COUNT] = {
      NULL, "zeros", "ones", "causal_mask", "rope_cos", "rope_sin"};
  const plan_ynode *rn = n;
  int rc, r;
  if (n->kind == PLAN_Y_MAP) {
    if ((rc = plan_rd_check_keys(rd, n, init_keys, "init", NULL)))
      return rc;
    rn = plan_ymap_get(n, "recipe");
    if (!rn)
      return plan_rd_fail(rd, n, PLAN_ESCHEMA, "init needs a 'recipe'");
    const plan_ynode *v;
    if ((v = plan_ymap_get(n, "theta")) &&
        (rc = plan_rd_number(rd, v, "theta", &t->recipe_theta)))
      return rc;
    if ((v = plan_ymap_get(n, "fill")) &&
        (rc = plan_rd_number(rd, v, "fill", &t->recipe_fill)))
      return rc;
  }
  if ((rc =
           plan_rd_enum(rd, rn, "init recipe", recipes, PLAN_RECIPE_COUNT, &r)))
    return rc;
  t->recipe = (plan_recipe)r;
  return PLAN_OK;
}

static int read_tensor(const plan_reader *rd, const plan_ynode *key,
                       const plan_ynode *n, plan_tensor *t) {
  int rc;
  if ((rc = plan_rd_name(rd, key, "a tensor name", &t->name)))
    return rc;
  t->pos = plan_rd_pos(key);
  t->declared = true;
  t->producer = -1;
  t->dtype = PLAN_F32;
  t->role = PLAN_ROLE_COUNT; /* decided in plan_program_finish */
  t->recipe_theta = 10000.0;
  t->recipe_fill = -1e9;
  if ((rc = plan_rd_expect_map(rd, n, "a tensor declaration")))
    return rc;
  if ((rc = plan_rd_check_keys(rd, n, tensor_keys, "a tensor declaration",
                               &t->ext)))
    return rc;
  const plan_ynode *v = plan_ymap_get(n, "shape");
  if (!v)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "tensor '%s' needs a 'shape'",
                        t->name);
  if ((rc = plan_read_shape(rd, v, t)))
    return rc;
  int e;
  if ((v = plan_ymap_get(n, "dtype"))) {
    if ((rc = plan_rd_expect_scalar(rd, v, "dtype")))
      return rc;
    if ((e = plan_dtype_from_name(v->u.scalar.text)) < 0)
      return plan_rd_fail(
          rd, v, PLAN_ESCHEMA,
          "unknown dtype '%.40s' (expected f64, f32, bf16, f16, "
          "i64 or i32)",
          v->u.scalar.text);
    t->dtype = (plan_dtype)e;
  }
  if ((v = plan_ymap_get(n, "role"))) {
    if ((rc = plan_rd_expect_scalar(rd, v, "role")))
      return rc;
    if ((e = plan_role_from_name(v->u.scalar.text)) < 0)
      return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                          "unknown role '%.40s' (expected input, param, const, "
                          "activation or output)",
                          v->u.scalar.text);
    t->role = (plan_role)e;
  }
  if ((v = plan_ymap_get(n, "range"))) {
    int64_t *r;
    int cnt;
    if ((rc = plan_rd_int_list(rd, v, "range", &r, &cnt, 2)))
      return rc;
    if (cnt != 2 || r[0] >= r[1])
      return plan_rd_fail(
          rd, v, PLAN_EINVALID,
          "range must be [LOW, HIGH] with LOW < HIGH (values are "
          "drawn from LOW to HIGH-1)");
    if (plan_dtype_is_float(t->dtype))
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "range is for integer tensors; '%s' is %s", t->name,
                          plan_dtype_name(t->dtype));
    t->has_range = true;
    t->range_lo = r[0];
    t->range_hi = r[1];
  }
  if ((v = plan_ymap_get(n, "init")) && (rc = read_init(rd, v, t)))
    return rc;
  return PLAN_OK;
}

int plan_program_reserve(plan_program *p, int ops, int tensors, size_t keys) {
  int rc = plan_grow((void **)&p->ops, &p->cap_ops, ops, sizeof(plan_op));
  if (!rc)
    rc = plan_grow((void **)&p->tensors, &p->cap_tensors, tensors,
                   sizeof(plan_tensor));
  if (!rc)
    rc = plan_strmap_reserve(&p->op_by_name, keys);
  if (!rc)
    rc = plan_strmap_reserve(&p->tensor_by_name, keys);
  return rc;
}

/* A new tensor at the end of the array, zeroed. */
static int new_tensor(plan_program *p, int *out, uint64_t name_hash) {
  int rc = plan_grow((void **)&p->tensors, &p->cap_tensors, p->ntensors + 1,
                     sizeof(plan_tensor));
  if (rc)
    return rc;
  *out = p->ntensors++;
  memset(&p->tensors[*out], 0, sizeof(plan_tensor));
  p->recent[*out % 8] = *out;
  p->recent_hash[*out % 8] = name_hash;
  return PLAN_OK;
}

/* A tensor by name: the recently created ones first (an op usually reads
 * what the ops just before it made; on a 100k-op program the map probe is a
 * cache miss), then the map. */
static int find_tensor(const plan_program *p, const plan_ynode *n, uint64_t h) {
  for (int k = 0; k < 8 && k < p->ntensors; k++) {
    int t = p->recent[k];
    if (p->recent_hash[k] == h && !strcmp(p->tensors[t].name, n->u.scalar.text))
      return t;
  }
  return plan_strmap_getn_h(&p->tensor_by_name, n->u.scalar.text,
                            n->u.scalar.len, h);
}

/* An op's names, hashed as soon as the op is seen, with their map slots
 * asked for (plan_strmap_prefetch): on a large program each slot is a cache
 * miss, and it now arrives while the op is checked and read. The inserts
 * and lookups reuse the hashes. */
typedef struct op_names {
  uint64_t name, out[PLAN_MAX_OPERANDS], in[PLAN_MAX_OPERANDS];
  bool have_name, have_out, have_in; /* false: read as before, unhashed */
} op_names;

/* Hashes the names of a name or list of names (what plan_rd_name_nodes
 * accepts), prefetching their slots in m. False for anything else, or a
 * list longer than an op may have: those are refused where they are read. */
static bool hash_names(const plan_ynode *v, const plan_strmap *m, uint64_t *h) {
  if (!v)
    return false;
  const plan_ynode *const *items = (const plan_ynode *const *)&v;
  size_t n = 1;
  if (v->kind == PLAN_Y_SEQ) {
    items = (const plan_ynode *const *)v->u.seq.items;
    n = v->u.seq.count;
  }
  if (n > PLAN_MAX_OPERANDS)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (items[i]->kind != PLAN_Y_SCALAR)
      return false;
    h[i] = plan_strmap_hash(items[i]->u.scalar.text, items[i]->u.scalar.len);
    plan_strmap_prefetch(m, h[i]);
  }
  return true;
}

static void op_names_hash(op_names *nh, const plan_program *p,
                          const plan_ynode *n) {
  const plan_ynode *v = plan_ymap_get(n, "name");
  nh->have_name = v && v->kind == PLAN_Y_SCALAR;
  if (nh->have_name) {
    nh->name = plan_strmap_hash(v->u.scalar.text, v->u.scalar.len);
    plan_strmap_prefetch(&p->op_by_name, nh->name);
  }
  nh->have_out =
      hash_names(plan_ymap_get(n, "out"), &p->tensor_by_name, nh->out);
  nh->have_in = hash_names(plan_ymap_get(n, "in"), &p->tensor_by_name, nh->in);
}

/* Creates the tensor named by `at` (hash h) for an op output (or finds its
 * declaration). */
static int bind_output(const plan_reader *rd, plan_program *p,
                       const plan_ynode *at, uint64_t h, int op, int slot,
                       int *out) {
  int ti, rc;
  const char *name =
      plan_arena_strndup(rd->arena, at->u.scalar.text, at->u.scalar.len);
  if (!name)
    return plan_oom();
  /* one probe: insert, or find the declaration */
  if ((rc = plan_strmap_insert_h(&p->tensor_by_name, name, at->u.scalar.len, h,
                                 p->ntensors, &ti)))
    return rc;
  if (ti < 0) {
    if ((rc = new_tensor(p, &ti, h)))
      return rc;
    plan_tensor *t = &p->tensors[ti];
    t->name = name;
    t->producer = -1;
    t->role = PLAN_ROLE_COUNT;
    t->pos = plan_rd_pos(at);
  }
  plan_tensor *t = &p->tensors[ti];
  if (t->producer >= 0)
    return plan_rd_fail(rd, at, PLAN_EINVALID,
                        "tensor '%s' is produced twice (also by op '%s')",
                        t->name, p->ops[t->producer].name);
  t->producer = op;
  t->producer_slot = slot;
  *out = ti;
  return PLAN_OK;
}

static int read_attr(const plan_reader *rd, const plan_attr_spec *spec,
                     const plan_ynode *v, plan_attr_val *a) {
  int rc = PLAN_OK;
  switch (spec->type) {
  case PLAN_ATTR_INT:
    rc = plan_rd_int(rd, v, spec->name, &a->i);
    break;
  case PLAN_ATTR_INTS:
    rc = plan_rd_int_list(rd, v, spec->name, &a->ints, &a->nints, 64);
    break;
  case PLAN_ATTR_FLOAT:
    rc = plan_rd_number(rd, v, spec->name, &a->f);
    break;
  case PLAN_ATTR_BOOL:
    rc = plan_rd_bool(rd, v, spec->name, &a->b);
    break;
  case PLAN_ATTR_STRING:
    rc = plan_rd_string(rd, v, spec->name, &a->s);
    break;
  }
  a->present = true;
  a->pos = plan_rd_pos(v);
  return rc;
}

int plan_program_fill_attr_defaults(const plan_op_info *info,
                                    plan_attr_val *attrs) {
  for (int i = 0; i < info->nattrs; i++) {
    const plan_attr_spec *s = &info->attrs[i];
    attrs[i].i = s->def_i;
    attrs[i].f = s->def_f;
    attrs[i].b = s->def_b;
    attrs[i].s = s->def_s;
  }
  return PLAN_OK;
}

static plan_attr_val *default_attrs(const plan_reader *rd, plan_program *p,
                                    int kind) {
  if (!p->default_attrs[kind]) {
    const plan_op_info *info = plan_op_info_get(kind);
    plan_attr_val *a = plan_arena_alloc(
        rd->arena, sizeof(plan_attr_val) * (size_t)(info->nattrs + 1));
    if (!a)
      return NULL;
    plan_program_fill_attr_defaults(info, a);
    p->default_attrs[kind] = a;
  }
  return p->default_attrs[kind];
}

static int read_attrs(const plan_reader *rd, plan_program *p, plan_op *op,
                      const plan_op_info *info, const plan_ynode *n,
                      const plan_ynode *opnode) {
  int rc;
  if (!n) {
    /* a missing required attribute is a schema error, as below */
    for (int j = 0; j < info->nattrs; j++)
      if (info->attrs[j].required)
        return plan_rd_fail(rd, opnode, PLAN_ESCHEMA,
                            "op '%s' (%s) needs the attribute '%s'", op->name,
                            info->name, info->attrs[j].name);
    /* Ops without attrs share one default array per kind (copied before
     * anything changes it, see program.c). */
    op->attrs = default_attrs(rd, p, op->kind);
    return op->attrs ? PLAN_OK : plan_oom();
  }
  op->attrs = plan_arena_alloc(rd->arena, sizeof(plan_attr_val) *
                                              (size_t)(info->nattrs + 1));
  if (!op->attrs)
    return plan_oom();
  plan_program_fill_attr_defaults(info, op->attrs);
  if (n) {
    if ((rc = plan_rd_expect_map(rd, n, "attrs")))
      return rc;
    for (size_t i = 0; i < n->u.map.count; i++) {
      if (!strncmp(n->u.map.pairs[i].key->u.scalar.text, "x-", 2))
        continue; /* extension keys are kept nowhere but allowed */
      const plan_ynode *k = n->u.map.pairs[i].key;
      int found = -1;
      for (int j = 0; j < info->nattrs; j++)
        if (!strcmp(info->attrs[j].name, k->u.scalar.text))
          found = j;
      if (found < 0)
        return plan_rd_fail(rd, k, PLAN_ESCHEMA, "%s has no attribute '%.60s'",
                            info->name, k->u.scalar.text);
      if ((rc = read_attr(rd, &info->attrs[found], n->u.map.pairs[i].value,
                          &op->attrs[found])))
        return rc;
    }
  }
  for (int j = 0; j < info->nattrs; j++)
    if (info->attrs[j].required && !op->attrs[j].present)
      return plan_rd_fail(rd, opnode, PLAN_ESCHEMA,
                          "op '%s' (%s) needs the attribute '%s'", op->name,
                          info->name, info->attrs[j].name);
  return PLAN_OK;
}

/* Reads one op: name, kind, outputs, attributes and inputs. An input whose
 * producer has not been read yet is bound when the program is finished. */
int plan_program_add_op(const plan_reader *rd, plan_program *p,
                        const plan_ynode *n) {
  int rc, idx = p->nops;
  if ((rc = plan_grow((void **)&p->ops, &p->cap_ops, p->nops + 1,
                      sizeof(plan_op))))
    return rc;
  p->nops++;
  plan_op *op = &p->ops[idx];
  memset(op, 0, sizeof *op);
  if ((rc = plan_rd_expect_map(rd, n, "an op")))
    return rc;
  if ((rc = plan_rd_check_keys(rd, n, op_keys, "an op", &op->ext)))
    return rc;
  op_names nh;
  op_names_hash(&nh, p, n);
  op->pos = plan_rd_pos(n);
  const plan_ynode *v = plan_ymap_get(n, "name");
  if (!v)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "an op needs a 'name'");
  if ((rc = plan_rd_name(rd, v, "an op name", &op->name)))
    return rc;
  int prev;
  if ((rc = plan_strmap_insert_h(&p->op_by_name, op->name, v->u.scalar.len,
                                 nh.name, idx, &prev)))
    return rc;
  if (prev >= 0)
    return plan_rd_fail(rd, v, PLAN_EINVALID,
                        "op name '%s' is used twice (first at line %d)",
                        op->name, p->ops[prev].pos.line);
  if (!(v = plan_ymap_get(n, "op")))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "op '%s' needs an 'op' kind",
                        op->name);
  if ((rc = plan_rd_expect_scalar(rd, v, "op kind")))
    return rc;
  op->kind = plan_op_kind_from_name(v->u.scalar.text);
  if (op->kind < 0) {
    const char *kinds[PLAN_OP_COUNT];
    for (int k = 0; k < PLAN_OP_COUNT; k++)
      kinds[k] = plan_op_kind_name(k);
    char hint[PLAN_HINT_SIZE];
    plan_hint_names(hint, sizeof hint, v->u.scalar.text, kinds, PLAN_OP_COUNT);
    return plan_rd_fail(rd, v, PLAN_EINVALID, "unknown op kind '%.60s'%s",
                        v->u.scalar.text, hint);
  }
  const plan_op_info *info = plan_op_info_get(op->kind);
  const plan_ynode *const *items;
  int cnt;
  if (!(v = plan_ymap_get(n, "out")))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "op '%s' needs 'out'", op->name);
  if ((rc = plan_rd_name_nodes(rd, v, "an output name", &items, &cnt)))
    return rc;
  if (cnt < 1 || cnt > PLAN_MAX_OPERANDS)
    return plan_rd_fail(rd, v, PLAN_EINVALID, "op '%s' has %d outputs",
                        op->name, cnt);
  op->nout = cnt;
  op->out = plan_arena_alloc_align(rd->arena, sizeof(int) * (size_t)cnt, 4);
  if (!op->out)
    return plan_oom();
  for (int i = 0; i < cnt; i++) {
    const plan_ynode *at = items ? items[i] : v;
    uint64_t h = nh.have_out
                     ? nh.out[i]
                     : plan_strmap_hash(at->u.scalar.text, at->u.scalar.len);
    if ((rc = bind_output(rd, p, at, h, idx, i, &op->out[i])))
      return rc;
  }
  if ((info->min_out >= 0 && cnt < info->min_out) ||
      (info->max_out >= 0 && cnt > info->max_out))
    return plan_rd_fail(rd, v, PLAN_EINVALID, "%s takes %d output%s, not %d",
                        info->name, info->min_out,
                        info->min_out == 1 ? "" : "s", cnt);
  if ((rc = read_attrs(rd, p, op, info, plan_ymap_get(n, "attrs"), n)))
    return rc;
  if (!(v = plan_ymap_get(n, "in")))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "op '%s' needs 'in'", op->name);
  if ((rc = plan_rd_name_nodes(rd, v, "an input name", &items, &cnt)))
    return rc;
  int max_in = info->max_in < 0 ? PLAN_MAX_OPERANDS - op->nout : info->max_in;
  if (cnt < info->min_in || cnt > max_in) {
    if (info->min_in == max_in)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "%s takes %d input%s, not %d",
                          info->name, info->min_in,
                          info->min_in == 1 ? "" : "s", cnt);
    return plan_rd_fail(rd, v, PLAN_EINVALID,
                        "%s takes %d to %d inputs, not %d", info->name,
                        info->min_in, max_in, cnt);
  }
  op->nin = cnt;
  op->in =
      plan_arena_alloc_align(rd->arena, sizeof(int) * (size_t)(cnt + 1), 4);
  if (!op->in)
    return plan_oom();
  for (int i = 0; i < cnt; i++) {
    const plan_ynode *e = items ? items[i] : v;
    op->in[i] = find_tensor(
        p, e,
        nh.have_in ? nh.in[i]
                   : plan_strmap_hash(e->u.scalar.text, e->u.scalar.len));
    if (op->in[i] >= 0)
      continue;
    if ((rc = plan_grow((void **)&p->pending, &p->cap_pending, p->npending + 1,
                        sizeof(plan_pending_in))))
      return rc;
    plan_pending_in *pi = &p->pending[p->npending++];
    pi->op = idx;
    pi->slot = i;
    pi->pos = plan_rd_pos(e);
    if (!(pi->name =
              plan_arena_strndup(rd->arena, e->u.scalar.text, e->u.scalar.len)))
      return plan_oom();
  }
  return PLAN_OK;
}

/* Reads one entry of `tensors`. The tensor may already exist as the output
 * of an op read earlier: the declaration then names its dims. */
int plan_program_add_tensor(const plan_reader *rd, plan_program *p,
                            const plan_ynode *key, const plan_ynode *value) {
  plan_tensor tmp;
  memset(&tmp, 0, sizeof tmp);
  int rc = read_tensor(rd, key, value, &tmp);
  if (rc)
    return rc;
  size_t len = strlen(tmp.name);
  uint64_t h = plan_strmap_hash(tmp.name, len);
  int ti = plan_strmap_getn_h(&p->tensor_by_name, tmp.name, len, h);
  if (ti >= 0) {
    plan_tensor *t = &p->tensors[ti];
    if (t->declared)
      return plan_rd_fail(rd, key, PLAN_ESCHEMA,
                          "duplicate key '%s' (first at line %d)", tmp.name,
                          t->pos.line);
    tmp.producer = t->producer;
    tmp.producer_slot = t->producer_slot;
    *t = tmp;
    return PLAN_OK;
  }
  if ((rc = new_tensor(p, &ti, h)))
    return rc;
  p->tensors[ti] = tmp;
  int old; /* absent, as just found */
  return plan_strmap_insert_h(&p->tensor_by_name, tmp.name, len, h, ti, &old);
}

int plan_program_read(const plan_reader *rd, const plan_ynode *n,
                      plan_program *p) {
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "program")))
    return rc;
  if ((rc = plan_rd_check_keys(rd, n, program_keys, "program", &p->ext)))
    return rc;
  p->pos = plan_rd_pos(n);
  p->loss = -1;
  p->version_major = rd->ver_major;
  p->version_minor = rd->ver_minor;
  const plan_ynode *v;
  p->name = "";
  if ((v = plan_ymap_get(n, "name")) &&
      (rc = plan_rd_string(rd, v, "program name", &p->name)))
    return rc;
  const plan_ynode *tn = plan_ymap_get(n, "tensors");
  const plan_ynode *on = plan_ymap_get(n, "ops");
  if (tn && (rc = plan_rd_expect_map(rd, tn, "tensors")))
    return rc;
  if (!on)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "program needs 'ops'");
  if ((rc = plan_rd_expect_seq(rd, on, "ops")))
    return rc;
  /* What a streaming reader consumed is gone from the tree; the rest is
   * read here. */
  for (size_t i = 0; tn && i < tn->u.map.count; i++)
    if ((rc = plan_program_add_tensor(rd, p, tn->u.map.pairs[i].key,
                                      tn->u.map.pairs[i].value)))
      return rc;
  for (size_t i = 0; i < on->u.seq.count; i++)
    if ((rc = plan_program_add_op(rd, p, on->u.seq.items[i])))
      return rc;
  for (int i = 0; i < p->npending; i++) {
    const plan_pending_in *pi = &p->pending[i];
    int ti = plan_strmap_get(&p->tensor_by_name, pi->name);
    if (ti < 0) {
      char hint[PLAN_HINT_SIZE];
      tensor_hint(hint, sizeof hint, p, pi->name);
      return plan_fail(PLAN_EINVALID, rd->file, pi->pos.line, pi->pos.col,
                       "op '%s' reads '%s', which is neither declared nor "
                       "produced by an op%s",
                       p->ops[pi->op].name, pi->name, hint);
    }
    p->ops[pi->op].in[pi->slot] = ti;
  }
  free(p->pending);
  p->pending = NULL;
  p->npending = p->cap_pending = 0;
  if ((v = plan_ymap_get(n, "outputs"))) {
    const char **names;
    int cnt;
    if ((rc = plan_rd_name_list(rd, v, "an output name", &names, &cnt)))
      return rc;
    p->outputs = plan_arena_alloc(&p->arena, sizeof(int) * (size_t)(cnt + 1));
    if (!p->outputs)
      return plan_oom();
    for (int i = 0; i < cnt; i++) {
      const plan_ynode *at = v->kind == PLAN_Y_SEQ ? v->u.seq.items[i] : v;
      int ti = plan_strmap_get(&p->tensor_by_name, names[i]);
      if (ti < 0) {
        char hint[PLAN_HINT_SIZE];
        tensor_hint(hint, sizeof hint, p, names[i]);
        return plan_rd_fail(rd, at, PLAN_EINVALID,
                            "output '%s' is not a tensor%s", names[i], hint);
      }
      for (int j = 0; j < i; j++)
        if (p->outputs[j] == ti)
          return plan_rd_fail(rd, at, PLAN_EINVALID,
                              "output '%s' is listed twice", names[i]);
      p->outputs[i] = ti;
    }
    p->noutputs = cnt;
    p->outputs_explicit = true;
    p->outputs_pos = plan_rd_pos(v);
  }
  if ((v = plan_ymap_get(n, "loss"))) {
    const char *name;
    if ((rc = plan_rd_name(rd, v, "loss", &name)))
      return rc;
    p->loss = plan_strmap_get(&p->tensor_by_name, name);
    if (p->loss < 0) {
      char hint[PLAN_HINT_SIZE];
      tensor_hint(hint, sizeof hint, p, name);
      return plan_rd_fail(rd, v, PLAN_EINVALID, "loss '%s' is not a tensor%s",
                          name, hint);
    }
    p->loss_pos = plan_rd_pos(v);
  }
  return PLAN_OK;
}
