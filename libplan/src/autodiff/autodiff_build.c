/* The builder of training programs (autodiff_build.h): the copy of the
 * forward program every training program starts from, and the ops the
 * backward rules append to it (named grad/<op>/<part>, shapes from the
 * registry's inference), with the gradient sums. autodiff.c drives it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff_build.h"
#include "read/program_read.h"

/* ---- copying the forward program ----------------------------------------- */

static plan_value *copy_value(plan_arena *A, const plan_value *v) {
  plan_value *n = plan_arena_alloc(A, sizeof *n);
  if (!n)
    return NULL;
  *n = *v;
  if (v->s && !(n->s = plan_arena_strdup(A, v->s)))
    return NULL;
  n->items = NULL;
  n->keys = NULL;
  if (v->n > 0 && v->items) {
    n->items = plan_arena_alloc(A, sizeof *n->items * (size_t)v->n);
    if (!n->items)
      return NULL;
    for (int i = 0; i < v->n; i++)
      if (!(n->items[i] = copy_value(A, v->items[i])))
        return NULL;
  }
  if (v->n > 0 && v->keys) {
    n->keys = plan_arena_alloc(A, sizeof *n->keys * (size_t)v->n);
    if (!n->keys)
      return NULL;
    for (int i = 0; i < v->n; i++)
      if (!(n->keys[i] = plan_arena_strdup(A, v->keys[i])))
        return NULL;
  }
  return n;
}

/* x- keys: NULL stays NULL; *ok turns false on an allocation failure. */
static plan_ext *copy_ext(plan_arena *A, const plan_ext *e, bool *ok) {
  if (!e)
    return NULL;
  plan_ext *n = plan_arena_alloc(A, sizeof *n);
  bool good = n != NULL;
  if (good && e->n > 0) {
    n->n = e->n;
    n->keys = plan_arena_alloc(A, sizeof *n->keys * (size_t)e->n);
    n->vals = plan_arena_alloc(A, sizeof *n->vals * (size_t)e->n);
    good = n->keys && n->vals;
    for (int i = 0; good && i < e->n; i++)
      good = (n->keys[i] = plan_arena_strdup(A, e->keys[i])) &&
             (n->vals[i] = copy_value(A, e->vals[i]));
  }
  if (!good)
    *ok = false;
  return good ? n : NULL;
}

/* An attribute array of kind's schema, deep-copied into A. */
static plan_attr_val *copy_attrs(plan_arena *A, int kind,
                                 const plan_attr_val *src) {
  const plan_op_info *info = plan_op_info_get(kind);
  plan_attr_val *a =
      plan_arena_alloc(A, sizeof *a * (size_t)(info->nattrs + 1));
  if (!a)
    return NULL;
  for (int k = 0; k < info->nattrs; k++) {
    a[k] = src[k];
    if (src[k].s && !(a[k].s = plan_arena_strdup(A, src[k].s)))
      return NULL;
    if (src[k].nints > 0) {
      a[k].ints =
          plan_arena_alloc_align(A, sizeof(int64_t) * (size_t)src[k].nints, 8);
      if (!a[k].ints)
        return NULL;
      memcpy(a[k].ints, src[k].ints, sizeof(int64_t) * (size_t)src[k].nints);
    } else {
      a[k].ints = NULL;
    }
  }
  return a;
}

int plan_ad_copy_forward(plan_program *p, const plan_program *f) {
  plan_arena *A = &p->arena;
  bool ok = true;
  int rc;
  if ((rc = plan_grow((void **)&p->tensors, &p->cap_tensors, f->ntensors + 1,
                      sizeof(plan_tensor))) ||
      (rc = plan_grow((void **)&p->ops, &p->cap_ops, f->nops + 1,
                      sizeof(plan_op))))
    return rc;
  p->name = plan_arena_strdup(A, f->name ? f->name : "");
  p->version_major = f->version_major;
  p->version_minor = f->version_minor;
  p->pos = f->pos;
  p->loss_pos = f->loss_pos;
  p->ext = copy_ext(A, f->ext, &ok);
  for (int t = 0; t < f->ntensors && ok; t++) {
    const plan_tensor *s = &f->tensors[t];
    plan_tensor *d = &p->tensors[t];
    *d = *s;
    d->name = plan_arena_strdup(A, s->name);
    d->dims =
        plan_arena_alloc_align(A, sizeof(int64_t) * (size_t)(s->rank + 1), 8);
    ok = d->name && d->dims;
    if (ok)
      memcpy(d->dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
    if (ok && s->dim_names) {
      d->dim_names = plan_arena_alloc(A, sizeof(char *) * (size_t)s->rank);
      ok = d->dim_names != NULL;
      for (int k = 0; ok && k < s->rank; k++)
        if (s->dim_names[k])
          ok = (d->dim_names[k] = plan_arena_strdup(A, s->dim_names[k]));
    }
    d->ext = copy_ext(A, s->ext, &ok);
  }
  p->ntensors = f->ntensors;
  for (int i = 0; i < f->nops && ok; i++) {
    const plan_op *s = &f->ops[i];
    plan_op *d = &p->ops[i];
    *d = *s;
    d->name = plan_arena_strdup(A, s->name);
    d->in = plan_arena_alloc_align(A, sizeof(int) * (size_t)(s->nin + 1), 4);
    d->out = plan_arena_alloc_align(A, sizeof(int) * (size_t)(s->nout + 1), 4);
    d->attrs = copy_attrs(A, s->kind, s->attrs);
    ok = d->name && d->in && d->out && d->attrs;
    if (ok) {
      memcpy(d->in, s->in, sizeof(int) * (size_t)s->nin);
      memcpy(d->out, s->out, sizeof(int) * (size_t)s->nout);
    }
    d->ext = copy_ext(A, s->ext, &ok);
  }
  p->nops = f->nops;
  return ok && p->name ? PLAN_OK : plan_oom();
}

/* ---- the builder --------------------------------------------------------- */

void plan_ad_attrs(int kind, plan_attr_val *a) {
  memset(a, 0, sizeof *a * PLAN_MAX_ATTRS);
  plan_program_fill_attr_defaults(plan_op_info_get(kind), a);
}

void plan_ad_set_ints(plan_attr_val *a, const int64_t *v, int n) {
  a->ints = (int64_t *)(uintptr_t)v; /* copied by plan_ad_emit */
  a->nints = n;
  a->present = true;
}

int plan_ad_fail(const plan_ad_ctx *c, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->op < 0)
    return plan_failf(PLAN_EINVALID, "autodiff: %s", msg);
  const plan_op *op = &c->f->ops[c->op];
  return plan_fail(PLAN_EINVALID, c->f->file, op->pos.line, op->pos.col,
                   "op '%s' (%s): %s", op->name, plan_op_kind_name(op->kind),
                   msg);
}

/* A new tensor of the training program (not yet in the name map: names are
 * mapped, and clashes found, when the program is complete). */
static int new_tensor(plan_ad_ctx *c, const char *name, const plan_shape *s,
                      plan_pos pos) {
  plan_program *p = c->p;
  int rc = plan_grow((void **)&p->tensors, &p->cap_tensors, p->ntensors + 1,
                     sizeof(plan_tensor));
  if (rc)
    return rc;
  plan_tensor *t = &p->tensors[p->ntensors];
  memset(t, 0, sizeof *t);
  t->name = name;
  t->rank = s->rank;
  t->dims = plan_arena_alloc_align(&p->arena,
                                   sizeof(int64_t) * (size_t)(s->rank + 1), 8);
  if (!t->dims)
    return plan_oom();
  memcpy(t->dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
  t->dtype = s->dtype;
  t->role = PLAN_ROLE_ACTIVATION;
  t->producer = -1;
  t->recipe_theta = 10000.0;
  t->recipe_fill = -1e9;
  t->pos = pos;
  return p->ntensors++;
}

/* origin and accum_of hold `need` entries. */
int plan_ad_grow_meta(plan_ad_ctx *c, int need) {
  if (need <= c->cap_meta)
    return PLAN_OK;
  int cap = c->cap_meta > 0 ? c->cap_meta : 16;
  while (cap < need)
    cap += cap / 2;
  int *o = realloc(c->origin, sizeof(int) * (size_t)cap);
  if (o)
    c->origin = o;
  int *a = o ? realloc(c->accum_of, sizeof(int) * (size_t)cap) : NULL;
  if (!a)
    return plan_oom();
  c->accum_of = a;
  c->cap_meta = cap;
  return PLAN_OK;
}

static plan_pos cur_pos(const plan_ad_ctx *c) {
  plan_pos none = {0, 0};
  return c->op >= 0 ? c->f->ops[c->op].pos : none;
}

/* Appends an op with a finished name (see plan_ad_emit). */
static int emit_named(plan_ad_ctx *c, int kind, const char *name,
                      const plan_attr_val *attrs, const int *in, int nin,
                      int nout, int *outs) {
  plan_program *p = c->p;
  const plan_op_info *info = plan_op_info_get(kind);
  plan_shape sin[PLAN_MAX_OPERANDS], sout[PLAN_MAX_OPERANDS];
  plan_attr_val def[PLAN_MAX_ATTRS];
  if (nin + nout > PLAN_MAX_OPERANDS)
    return plan_ad_fail(c, "internal: %s with %d operands", info->name,
                        nin + nout);
  if (!attrs) {
    plan_ad_attrs(kind, def);
    attrs = def;
  }
  plan_attr_val *av = copy_attrs(&p->arena, kind, attrs);
  if (!name || !av)
    return plan_oom();
  memset(sin, 0, sizeof sin);
  for (int j = 0; j < nin; j++) {
    const plan_tensor *t = &p->tensors[in[j]];
    sin[j].rank = t->rank;
    memcpy(sin[j].dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    sin[j].dtype = t->dtype;
  }
  char err[256] = "";
  if (info->infer(sin, nin, av, sout, nout, err, sizeof err))
    return plan_ad_fail(c, "internal: the backward op '%s' does not infer: %s",
                        name, err);
  int rc =
      plan_grow((void **)&p->ops, &p->cap_ops, p->nops + 1, sizeof(plan_op));
  if (!rc)
    rc = plan_ad_grow_meta(c, p->nops + 1);
  if (rc)
    return rc;
  int idx = p->nops;
  int *ins =
      plan_arena_alloc_align(&p->arena, sizeof(int) * (size_t)(nin + 1), 4);
  int *os =
      plan_arena_alloc_align(&p->arena, sizeof(int) * (size_t)(nout + 1), 4);
  if (!ins || !os)
    return plan_oom();
  memcpy(ins, in, sizeof(int) * (size_t)nin);
  for (int k = 0; k < nout; k++) {
    const char *tn =
        nout == 1 ? name : plan_arena_printf(&p->arena, "%s:%d", name, k);
    if (!tn)
      return plan_oom();
    int t = new_tensor(c, tn, &sout[k], cur_pos(c));
    if (t < 0)
      return t;
    p->tensors[t].producer = idx;
    p->tensors[t].producer_slot = k;
    os[k] = t;
    if (outs)
      outs[k] = t;
  }
  plan_op *op = &p->ops[idx];
  memset(op, 0, sizeof *op);
  op->name = name;
  op->kind = kind;
  op->nin = nin;
  op->nout = nout;
  op->in = ins;
  op->out = os;
  op->attrs = av;
  op->pos = cur_pos(c);
  c->origin[idx] = c->op;
  c->accum_of[idx] = -1;
  p->nops++;
  return os[0];
}

int plan_ad_emit_named(plan_ad_ctx *c, int kind, const char *name,
                       const plan_attr_val *attrs, const int *in, int nin,
                       int nout, int *outs) {
  return emit_named(c, kind, name, attrs, in, nin, nout, outs);
}

int plan_ad_copy_begin(plan_ad_ctx *c, const plan_program *f) {
  memset(c, 0, sizeof *c);
  c->f = f;
  c->op = -1;
  c->p = plan_program_new(f->file);
  int rc = c->p ? plan_ad_grow_meta(c, f->nops + 16) : plan_oom();
  if (!rc)
    rc = plan_ad_copy_forward(c->p, f);
  if (!rc && f->noutputs > 0) {
    c->p->outputs = plan_arena_alloc_align(
        &c->p->arena, sizeof(int) * (size_t)f->noutputs, 4);
    if (!c->p->outputs)
      rc = plan_oom();
    else
      memcpy(c->p->outputs, f->outputs, sizeof(int) * (size_t)f->noutputs);
  }
  if (!rc) {
    c->p->noutputs = f->noutputs;
    c->p->loss = f->loss;
    c->p->outputs_explicit = f->outputs_explicit;
  }
  if (rc) {
    plan_ad_copy_end(c);
    plan_program_free(c->p);
    c->p = NULL;
  }
  return rc;
}

void plan_ad_copy_end(plan_ad_ctx *c) {
  free(c->origin);
  free(c->accum_of);
  c->origin = c->accum_of = NULL;
}

int plan_ad_emit(plan_ad_ctx *c, int kind, const char *part,
                 const plan_attr_val *attrs, const int *in, int nin, int nout,
                 int *outs) {
  const char *name = plan_arena_printf(&c->p->arena, "grad/%s/%s",
                                       c->f->ops[c->op].name, part);
  return emit_named(c, kind, name, attrs, in, nin, nout, outs);
}

int plan_ad_op(plan_ad_ctx *c, int kind, const char *part,
               const plan_attr_val *attrs, const int *in, int nin) {
  return plan_ad_emit(c, kind, part, attrs, in, nin, 1, NULL);
}

int plan_ad_binary(plan_ad_ctx *c, int kind, const char *part, int a, int b) {
  int in[2] = {a, b};
  return plan_ad_op(c, kind, part, NULL, in, 2);
}

int plan_ad_scale(plan_ad_ctx *c, const char *part, int x, double factor) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_SCALE, a);
  a[0].f = factor;
  a[0].present = true;
  return plan_ad_op(c, PLAN_OP_SCALE, part, a, &x, 1);
}

int plan_ad_matmul(plan_ad_ctx *c, const char *part, int a, int b, bool ta,
                   bool tb) {
  plan_attr_val av[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_MATMUL, av);
  av[0].b = ta;
  av[0].present = ta;
  av[1].b = tb;
  av[1].present = tb;
  int in[2] = {a, b};
  return plan_ad_op(c, PLAN_OP_MATMUL, part, av, in, 2);
}

static bool has_dims(const plan_tensor *t, int rank, const int64_t *dims) {
  if (t->rank != rank)
    return false;
  for (int d = 0; d < rank; d++)
    if (t->dims[d] != dims[d])
      return false;
  return true;
}

int plan_ad_reshape(plan_ad_ctx *c, const char *part, int x, int rank,
                    const int64_t *dims) {
  if (has_dims(&c->p->tensors[x], rank, dims))
    return x;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_RESHAPE, a);
  plan_ad_set_ints(&a[0], dims, rank);
  return plan_ad_op(c, PLAN_OP_RESHAPE, part, a, &x, 1);
}

int plan_ad_reduce_sum(plan_ad_ctx *c, const char *part, int x,
                       const int64_t *dims, int n, bool keepdim) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_REDUCE_SUM, a);
  plan_ad_set_ints(&a[0], dims, n);
  a[1].b = keepdim;
  a[1].present = keepdim;
  return plan_ad_op(c, PLAN_OP_REDUCE_SUM, part, a, &x, 1);
}

int plan_ad_sum_rows(plan_ad_ctx *c, const char *part, int x) {
  int r = c->p->tensors[x].rank;
  if (r <= 1)
    return x;
  int64_t dims[PLAN_MAX_RANK];
  for (int d = 0; d < r - 1; d++)
    dims[d] = d;
  return plan_ad_reduce_sum(c, part, x, dims, r - 1, false);
}

int plan_ad_unbroadcast(plan_ad_ctx *c, const char *part, int g, int target) {
  const plan_tensor *gt = &c->p->tensors[g], *tt = &c->p->tensors[target];
  int rg = gt->rank, rt = tt->rank, lead = rg - rt, n = 0;
  int64_t dims[PLAN_MAX_RANK], tdims[PLAN_MAX_RANK];
  bool only_ones = true; /* every summed dim has size 1: a reshape will do */
  if (lead < 0)
    return plan_ad_fail(
        c, "internal: gradient of rank %d for a tensor of rank %d", rg, rt);
  memcpy(tdims, tt->dims, sizeof(int64_t) * (size_t)rt);
  for (int j = 0; j < rg; j++)
    if (j < lead || (tt->dims[j - lead] == 1 && gt->dims[j] != 1)) {
      dims[n++] = j;
      only_ones = only_ones && gt->dims[j] == 1;
    }
  char sum[64], shape[64];
  snprintf(sum, sizeof sum, "%s.sum", part);
  snprintf(shape, sizeof shape, "%s.shape", part);
  if (n == 0 || only_ones)
    return plan_ad_reshape(c, shape, g, rt, tdims);
  /* keepdim when nothing leads: the sum has target's shape already */
  int s = plan_ad_reduce_sum(c, sum, g, dims, n, lead == 0);
  if (s < 0)
    return s;
  return plan_ad_reshape(c, shape, s, rt, tdims);
}

int plan_ad_const(plan_ad_ctx *c, const char *part, const char *name, int rank,
                  const int64_t *dims, plan_dtype dt, plan_recipe recipe) {
  const char *nm = name ? plan_arena_strdup(&c->p->arena, name)
                        : plan_arena_printf(&c->p->arena, "grad/%s/%s",
                                            c->f->ops[c->op].name, part);
  if (!nm)
    return plan_oom();
  plan_shape s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  if (rank > 0)
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
  s.dtype = dt;
  int t = new_tensor(c, nm, &s, cur_pos(c));
  if (t < 0)
    return t;
  plan_tensor *x = &c->p->tensors[t];
  x->role = PLAN_ROLE_CONST;
  x->recipe = recipe;
  x->declared = true;
  return t;
}

bool plan_ad_wants(const plan_ad_ctx *c, const plan_op *op, int slot) {
  return c->needs[op->in[slot]];
}

/* The sum of a gradient: add(so far, g), named grad/<t> when it is the
 * last. */
static int accumulate(plan_ad_ctx *c, int t, int g, bool last) {
  const char *tn = c->f->tensors[t].name;
  plan_arena *A = &c->p->arena;
  const char *name = plan_arena_printf(A, "grad/%s/acc%d", tn, c->got[t]);
  if (!name)
    return plan_oom();
  int in[2] = {c->grad[t], g};
  int op = c->p->nops;
  int s = emit_named(c, PLAN_OP_ADD, name, NULL, in, 2, 1, NULL);
  if (s < 0)
    return s;
  c->origin[op] = -1;
  c->accum_of[op] = t;
  if (last && !(c->p->tensors[s].name = plan_arena_printf(A, "grad/%s", tn)))
    return plan_oom();
  return s;
}

int plan_ad_contribute(plan_ad_ctx *c, int t, int g) {
  const plan_tensor *ft = &c->f->tensors[t], *gt = &c->p->tensors[g];
  if (!has_dims(gt, ft->rank, ft->dims) || gt->dtype != ft->dtype) {
    char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
    return plan_ad_fail(
        c, "internal: the gradient of '%s' (%s %s) is %s %s", ft->name,
        plan_dtype_name(ft->dtype), plan_format_dims(ft->dims, ft->rank, a),
        plan_dtype_name(gt->dtype), plan_format_dims(gt->dims, gt->rank, b));
  }
  if (!c->needs[t] || c->got[t] >= c->ncontrib[t])
    return plan_ad_fail(c, "internal: unexpected gradient contribution to '%s'",
                        ft->name);
  bool last = c->got[t] + 1 == c->ncontrib[t];
  if (c->grad[t] < 0) {
    /* the first: a tensor this rule made, named after its op, becomes the
     * gradient itself when it is also the last */
    bool fresh = last && g >= c->first_new && c->p->tensors[g].producer >= 0 &&
                 c->nrenamed < PLAN_MAX_OPERANDS;
    for (int k = 0; fresh && k < c->nrenamed; k++)
      fresh = c->renamed[k] != g;
    if (fresh) {
      if (!(c->p->tensors[g].name =
                plan_arena_printf(&c->p->arena, "grad/%s", ft->name)))
        return plan_oom();
      c->renamed[c->nrenamed++] = g;
    }
    c->grad[t] = g;
  } else {
    int s = accumulate(c, t, g, last);
    if (s < 0)
      return s;
    c->grad[t] = s;
  }
  c->got[t]++;
  return PLAN_OK;
}
