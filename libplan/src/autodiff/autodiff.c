/* Autodiff: the training program of a forward program (reverse mode over the
 * op DAG). The forward program is copied; then, walking its ops in reverse
 * topological order, each op whose outputs carry a gradient appends its
 * backward rule (autodiff_rules.c): ordinary ops of the registry on new
 * tensors, so the training program loads, hashes, validates, lowers and
 * runs like any program. A tensor read by several ops sums its gradient
 * contributions with `add` as they arrive.
 *
 * Names (docs/training-and-pipelines.md, "Autodiff"): the gradient of tensor
 * t is grad/<t>; the backward ops of op o are grad/<o>/<part> and their
 * outputs take the op's name until one becomes a gradient; the sums of a
 * gradient are grad/<t>/acc<k>. The names are checked for clashes with the
 * forward program's when the program is complete. */
#include "autodiff/autodiff.h"

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

static int copy_forward(plan_program *p, const plan_program *f) {
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
static int grow_meta(plan_ad_ctx *c, int need) {
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
    return plan_ad_fail(c, "internal: %s with %d operands", info->name, nin + nout);
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
    return plan_ad_fail(c, "internal: the backward op '%s' does not infer: %s", name,
                   err);
  int rc =
      plan_grow((void **)&p->ops, &p->cap_ops, p->nops + 1, sizeof(plan_op));
  if (!rc)
    rc = grow_meta(c, p->nops + 1);
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
                  const plan_attr_val *attrs, const int *in, int nin, int nout,
                  int *outs) {
  return emit_named(c, kind, name, attrs, in, nin, nout, outs);
}

int plan_ad_copy_begin(plan_ad_ctx *c, const plan_program *f) {
  memset(c, 0, sizeof *c);
  c->f = f;
  c->op = -1;
  c->p = plan_program_new(f->file);
  int rc = c->p ? grow_meta(c, f->nops + 16) : plan_oom();
  if (!rc)
    rc = copy_forward(c->p, f);
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

int plan_ad_emit(plan_ad_ctx *c, int kind, const char *part, const plan_attr_val *attrs,
            const int *in, int nin, int nout, int *outs) {
  const char *name = plan_arena_printf(&c->p->arena, "grad/%s/%s",
                                       c->f->ops[c->op].name, part);
  return emit_named(c, kind, name, attrs, in, nin, nout, outs);
}

int plan_ad_op(plan_ad_ctx *c, int kind, const char *part, const plan_attr_val *attrs,
          const int *in, int nin) {
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

int plan_ad_matmul(plan_ad_ctx *c, const char *part, int a, int b, bool ta, bool tb) {
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

int plan_ad_reduce_sum(plan_ad_ctx *c, const char *part, int x, const int64_t *dims,
                  int n, bool keepdim) {
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
    return plan_ad_fail(c, "internal: gradient of rank %d for a tensor of rank %d",
                   rg, rt);
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

/* ---- analysis ------------------------------------------------------------ */

/* The tensors gradients are taken for: float params, and float inputs when
 * asked. */
static bool wrt(const plan_tensor *x, const plan_grad_options *o) {
  return x->producer < 0 && plan_dtype_is_float(x->dtype) &&
         (x->role == PLAN_ROLE_PARAM ||
          (o->inputs && x->role == PLAN_ROLE_INPUT));
}

/* needs[t]: float, depends on a tensor gradients are taken for, and the
 * loss depends on it; ncontrib[t]: the op inputs that will send it a
 * gradient. */
static int analyse(plan_ad_ctx *c, const plan_grad_options *o) {
  const plan_program *f = c->f;
  size_t nt = (size_t)f->ntensors + 1;
  bool *dep = calloc(nt, sizeof(bool)), *reach = calloc(nt, sizeof(bool));
  if (!dep || !reach) {
    free(dep);
    free(reach);
    return plan_oom();
  }
  for (int t = 0; t < f->ntensors; t++)
    dep[t] = wrt(&f->tensors[t], o);
  for (int i = 0; i < f->nops; i++) {
    const plan_op *op = &f->ops[i];
    bool d = false;
    for (int j = 0; j < op->nin; j++)
      d = d || dep[op->in[j]];
    for (int k = 0; k < op->nout; k++)
      dep[op->out[k]] = d && plan_dtype_is_float(f->tensors[op->out[k]].dtype);
  }
  reach[f->loss] = true;
  for (int i = f->nops - 1; i >= 0; i--) {
    const plan_op *op = &f->ops[i];
    bool r = false;
    for (int k = 0; k < op->nout; k++)
      r = r || (reach[op->out[k]] && dep[op->out[k]]);
    for (int j = 0; r && j < op->nin; j++)
      reach[op->in[j]] = true;
  }
  for (int t = 0; t < f->ntensors; t++) {
    c->needs[t] = dep[t] && reach[t];
    c->grad[t] = -1;
  }
  for (int i = 0; i < f->nops; i++) {
    const plan_op *op = &f->ops[i];
    bool active = false;
    for (int k = 0; k < op->nout; k++)
      active = active || c->needs[op->out[k]];
    for (int j = 0; active && j < op->nin; j++)
      c->ncontrib[op->in[j]] += c->needs[op->in[j]];
  }
  free(dep);
  free(reach);
  return PLAN_OK;
}

/* ---- the training program ------------------------------------------------ */

/* The gradient of every output of op (zeros for an output without one, as a
 * split part nothing uses); then op's rule. */
static int differentiate(plan_ad_ctx *c, int i) {
  const plan_op *op = &c->f->ops[i];
  int dy[PLAN_MAX_OPERANDS];
  bool active = false;
  for (int k = 0; k < op->nout; k++)
    active = active || c->needs[op->out[k]];
  if (!active)
    return PLAN_OK;
  c->op = i;
  for (int k = 0; k < op->nout; k++) {
    int t = op->out[k];
    const plan_tensor *x = &c->f->tensors[t];
    if (c->needs[t] && c->got[t] == c->ncontrib[t] && c->grad[t] >= 0) {
      dy[k] = c->grad[t];
      continue;
    }
    if (c->needs[t])
      return plan_ad_fail(c, "internal: the gradient of '%s' is incomplete",
                     x->name);
    if (!plan_dtype_is_float(x->dtype)) { /* topk's indices: none */
      dy[k] = -1;
      continue;
    }
    char *name = plan_arena_printf(&c->p->arena, "grad/%s", x->name);
    if (!name)
      return plan_oom();
    int z =
        plan_ad_const(c, NULL, name, x->rank, x->dims, x->dtype, PLAN_RECIPE_ZEROS);
    if (z < 0)
      return z;
    dy[k] = z;
  }
  c->first_new = c->p->ntensors;
  c->nrenamed = 0;
  int rc = plan_ad_backward(c, op, dy);
  c->op = -1;
  return rc;
}

/* The gradient of a param (or input) under its own name, as an output (so
 * produced by an op): a copy (scale by 1) of another tensor's gradient, or
 * of a const of zeros (grad/<t>/zeros) when the loss does not depend on
 * it. */
static int name_grad(plan_ad_ctx *c, int t) {
  const plan_tensor *x = &c->f->tensors[t];
  plan_arena *A = &c->p->arena;
  char *name = plan_arena_printf(A, "grad/%s", x->name);
  char *copy = plan_arena_printf(A, "grad/%s/copy", x->name);
  char *zeros = plan_arena_printf(A, "grad/%s/zeros", x->name);
  if (!name || !copy || !zeros)
    return plan_oom();
  int g = c->grad[t];
  if (g >= 0 && !strcmp(c->p->tensors[g].name, name))
    return PLAN_OK;
  if (g < 0 && (g = plan_ad_const(c, NULL, zeros, x->rank, x->dims, x->dtype,
                             PLAN_RECIPE_ZEROS)) < 0)
    return g;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_SCALE, a);
  int op = c->p->nops;
  if ((g = emit_named(c, PLAN_OP_SCALE, copy, a, &g, 1, 1, NULL)) < 0)
    return g;
  c->origin[op] = -1;
  c->accum_of[op] = t;
  c->p->tensors[g].name = name;
  c->grad[t] = g;
  return PLAN_OK;
}

/* Outputs: the program's, the loss, then the gradients in tensor order;
 * roles follow. */
static int set_outputs(plan_ad_ctx *c, const plan_grad_options *o) {
  plan_program *p = c->p;
  const plan_program *f = c->f;
  int n = f->noutputs + 1;
  for (int t = 0; t < f->ntensors; t++)
    n += wrt(&f->tensors[t], o);
  p->outputs = plan_arena_alloc(&p->arena, sizeof(int) * (size_t)(n + 1));
  if (!p->outputs)
    return plan_oom();
  memcpy(p->outputs, f->outputs, sizeof(int) * (size_t)f->noutputs);
  p->noutputs = f->noutputs;
  bool listed = false;
  for (int i = 0; i < f->noutputs; i++)
    listed = listed || f->outputs[i] == f->loss;
  if (!listed)
    p->outputs[p->noutputs++] = f->loss;
  for (int t = 0; t < f->ntensors; t++)
    if (wrt(&f->tensors[t], o))
      p->outputs[p->noutputs++] = c->grad[t];
  p->outputs_explicit = true;
  p->outputs_pos = f->outputs_pos;
  p->loss = f->loss;
  for (int t = 0; t < p->ntensors; t++)
    if (p->tensors[t].producer >= 0)
      p->tensors[t].role = PLAN_ROLE_ACTIVATION;
  for (int i = 0; i < p->noutputs; i++)
    p->tensors[p->outputs[i]].role = PLAN_ROLE_OUTPUT;
  return PLAN_OK;
}

/* A name of the training program must read back from a file. */
static int too_long(const plan_ad_ctx *c, const char *name, plan_pos pos) {
  return plan_fail(PLAN_EINVALID, c->f->file, pos.line, pos.col,
                   "the training program needs the name '%.60s...' (%zu "
                   "bytes), longer than names may be (%d): shorten the name "
                   "it is made from",
                   name, strlen(name), PLAN_MAX_NAME);
}

/* The name maps; a clash with a forward name is the user's to resolve. */
static int map_names(plan_ad_ctx *c) {
  plan_program *p = c->p;
  c->op = -1;
  for (int t = c->f->ntensors; t < p->ntensors; t++)
    if (strlen(p->tensors[t].name) > PLAN_MAX_NAME)
      return too_long(c, p->tensors[t].name, p->tensors[t].pos);
  for (int i = c->f->nops; i < p->nops; i++)
    if (strlen(p->ops[i].name) > PLAN_MAX_NAME)
      return too_long(c, p->ops[i].name, p->ops[i].pos);
  for (int t = 0; t < p->ntensors; t++) {
    int old;
    if (plan_strmap_insert(&p->tensor_by_name, p->tensors[t].name, t, &old))
      return plan_oom();
    if (old >= 0) {
      const plan_tensor *x =
          old < c->f->ntensors ? &c->f->tensors[old] : &p->tensors[t];
      return plan_fail(PLAN_EINVALID, c->f->file, x->pos.line, x->pos.col,
                       "the training program needs the tensor name '%s' for "
                       "a gradient, but the program uses it already: rename "
                       "the tensor",
                       p->tensors[t].name);
    }
  }
  for (int i = 0; i < p->nops; i++) {
    int old;
    if (plan_strmap_insert(&p->op_by_name, p->ops[i].name, i, &old))
      return plan_oom();
    if (old >= 0) {
      const plan_op *x = &p->ops[old < c->f->nops ? old : i];
      return plan_fail(PLAN_EINVALID, c->f->file, x->pos.line, x->pos.col,
                       "the training program needs the op name '%s' for a "
                       "backward op, but the program uses it already: rename "
                       "the op",
                       p->ops[i].name);
    }
  }
  return PLAN_OK;
}

/* part[op]: forward, or whether the op feeds the gradient of an activation
 * or input (INPUT) or only the gradients of params (WEIGHT). */
static int classify(plan_grad_map *m, const plan_program *p,
                    const plan_program *f) {
  bool *feeds = calloc((size_t)p->ntensors + 1, sizeof(bool));
  if (!feeds)
    return plan_oom();
  for (int t = 0; t < f->ntensors; t++)
    if (m->grad[t] >= 0 && f->tensors[t].role != PLAN_ROLE_PARAM)
      feeds[m->grad[t]] = true;
  for (int i = p->nops - 1; i >= f->nops; i--) {
    const plan_op *op = &p->ops[i];
    bool in = false;
    for (int k = 0; k < op->nout; k++)
      in = in || feeds[op->out[k]];
    m->part[i] = in ? PLAN_GRAD_INPUT : PLAN_GRAD_WEIGHT;
    for (int j = 0; in && j < op->nin; j++)
      feeds[op->in[j]] = true;
  }
  for (int i = 0; i < f->nops; i++)
    m->part[i] = PLAN_GRAD_FORWARD;
  free(feeds);
  return PLAN_OK;
}

void plan_grad_map_free(plan_grad_map *m) {
  if (!m)
    return;
  free(m->grad);
  free(m->origin);
  free(m->accum_of);
  free(m->part);
  free(m);
}

static int make_map(plan_grad_map **out, plan_ad_ctx *c, int seed) {
  const plan_program *p = c->p, *f = c->f;
  plan_grad_map *m = calloc(1, sizeof *m);
  if (!m)
    return plan_oom();
  m->nfwd_ops = f->nops;
  m->nfwd_tensors = f->ntensors;
  m->nops = p->nops;
  m->seed = seed;
  m->grad = malloc(sizeof(int) * (size_t)(f->ntensors + 1));
  m->origin = malloc(sizeof(int) * (size_t)(p->nops + 1));
  m->accum_of = malloc(sizeof(int) * (size_t)(p->nops + 1));
  m->part = malloc((size_t)p->nops + 1);
  if (!m->grad || !m->origin || !m->accum_of || !m->part) {
    plan_grad_map_free(m);
    return plan_oom();
  }
  memcpy(m->grad, c->grad, sizeof(int) * (size_t)f->ntensors);
  for (int i = 0; i < p->nops; i++) {
    m->origin[i] = i < f->nops ? i : c->origin[i];
    m->accum_of[i] = i < f->nops ? -1 : c->accum_of[i];
  }
  int rc = classify(m, p, f);
  if (rc) {
    plan_grad_map_free(m);
    return rc;
  }
  *out = m;
  return PLAN_OK;
}

int plan_autodiff(plan_program **out, plan_grad_map **map,
                  const plan_program *fwd, const plan_grad_options *opts) {
  if (out)
    *out = NULL;
  if (map)
    *map = NULL;
  if (!out || !fwd)
    return plan_failf(PLAN_EUSAGE, "plan_program_grad: NULL argument");
  plan_grad_options def = PLAN_GRAD_OPTIONS_INIT;
  if (!opts)
    opts = &def;
  if (opts->version != PLAN_GRAD_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE, "plan_grad_options version %u is not %d",
                      opts->version, PLAN_GRAD_OPTIONS_VERSION);
  if (fwd->loss < 0)
    return plan_fail(PLAN_EINVALID, fwd->file, fwd->pos.line, fwd->pos.col,
                     "program '%s' has no loss: a training program needs a "
                     "scalar loss (program.loss)",
                     fwd->name ? fwd->name : "");
  plan_ad_ctx c;
  memset(&c, 0, sizeof c);
  c.f = fwd;
  c.op = -1;
  size_t nt = (size_t)fwd->ntensors + 1;
  c.needs = calloc(nt, sizeof(bool));
  c.ncontrib = calloc(nt, sizeof(int));
  c.got = calloc(nt, sizeof(int));
  c.grad = calloc(nt, sizeof(int));
  c.p = plan_program_new(fwd->file);
  int rc =
      c.needs && c.ncontrib && c.got && c.grad && c.p ? PLAN_OK : plan_oom();
  if (!rc)
    rc = grow_meta(&c, 2 * fwd->nops + 16);
  if (!rc)
    rc = analyse(&c, opts);
  if (!rc)
    rc = copy_forward(c.p, fwd);
  int seed = -1;
  if (!rc) {
    const plan_tensor *l = &fwd->tensors[fwd->loss];
    char *name = plan_arena_printf(&c.p->arena, "grad/%s", l->name);
    seed = name ? plan_ad_const(&c, NULL, name, 0, NULL, l->dtype, PLAN_RECIPE_ONES)
                : plan_oom();
    if (seed < 0)
      rc = seed;
    else
      c.p->tensors[seed].pos = l->pos;
    if (!rc && c.needs[fwd->loss])
      c.grad[fwd->loss] = seed;
  }
  for (int i = fwd->nops - 1; i >= 0 && !rc; i--)
    rc = differentiate(&c, i);
  for (int t = 0; t < fwd->ntensors && !rc; t++)
    if (wrt(&fwd->tensors[t], opts))
      rc = name_grad(&c, t);
  if (!rc)
    rc = set_outputs(&c, opts);
  if (!rc)
    rc = map_names(&c);
  if (!rc && map)
    rc = make_map(map, &c, seed);
  free(c.needs);
  free(c.ncontrib);
  free(c.got);
  free(c.grad);
  free(c.origin);
  free(c.accum_of);
  if (rc) {
    plan_program_free(c.p);
    return rc;
  }
  *out = c.p;
  return PLAN_OK;
}

int plan_program_grad(plan_program **out, const plan_program *p,
                      const plan_grad_options *opts) {
  return plan_autodiff(out, NULL, p, opts);
}
