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
 * forward program's when the program is complete.
 *
 * This file is the analysis and the walk; the copy and the builder the
 * rules use are in autodiff_build.c. */
#include "autodiff/autodiff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff_build.h"
#include "read/program_read.h"

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
    int z = plan_ad_const(c, NULL, name, x->rank, x->dims, x->dtype,
                          PLAN_RECIPE_ZEROS);
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
  if ((g = plan_ad_emit_named(c, PLAN_OP_SCALE, copy, a, &g, 1, 1, NULL)) < 0)
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
    rc = plan_ad_grow_meta(&c, 2 * fwd->nops + 16);
  if (!rc)
    rc = analyse(&c, opts);
  if (!rc)
    rc = plan_ad_copy_forward(c.p, fwd);
  int seed = -1;
  if (!rc) {
    const plan_tensor *l = &fwd->tensors[fwd->loss];
    char *name = plan_arena_printf(&c.p->arena, "grad/%s", l->name);
    seed = name ? plan_ad_const(&c, NULL, name, 0, NULL, l->dtype,
                                PLAN_RECIPE_ONES)
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

int plan_program_grad_tensor(const plan_program *train, int tensor) {
  if (!train || tensor < 0 || tensor >= train->ntensors)
    return -1;
  const char *name = train->tensors[tensor].name;
  size_t n = strlen(name);
  char small[PLAN_MAX_NAME + 8];
  char *key = n + 6 <= sizeof small ? small : malloc(n + 6);
  if (!key)
    return -1;
  memcpy(key, "grad/", 5);
  memcpy(key + 5, name, n + 1);
  int g = plan_strmap_get(&train->tensor_by_name, key);
  if (key != small)
    free(key);
  return g >= 0 && g != tensor ? g : -1;
}
