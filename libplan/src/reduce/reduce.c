/* Shape reduction (after TrainVerify): the same plan over a
 * smaller program with the same sharding structure, so plans of real model
 * sizes verify in seconds. docs/verify.md ("Shape reduction") states the
 * rules; this file implements them in four steps.
 *
 * 1. Ties. Every op's factor-based sharding rule (sharding_rules.c) says
 *    which factor each operand dim carries; a merged reshape dim carries
 *    several, major to minor. One node per tensor dim and per factor of
 *    every op; a union-find joins the nodes that must have one size. A dim
 *    that carries several factors is joined with a node whose "expansion"
 *    is that list, so its size is their product; two expansions of one
 *    class are joined part by part. The parts a tensor dim finally breaks
 *    into (its atoms) are the sizes to choose.
 * 2. Kept sizes. An atom keeps its size when a dim it makes up cannot be
 *    reduced safely: split/concat's split dim (a sum of parts), a dim no
 *    rule describes, a dim whose parts do not multiply to its size, a dim
 *    sharded unevenly over several axes, a merged dim sharded where its
 *    major part does not divide.
 * 3. Sizes. Every placement of the plan (storage, both sides of every
 *    strategy, outputs as delivered; for a lowered program its buffers)
 *    that shards a dim over k ranks constrains the dim's (major) atom: a
 *    multiple of k with min(n/k, 2) per shard when the original divides,
 *    else the same torch.chunk pattern with pieces of at least
 *    min(original, 2). Each atom takes the smallest size that meets all its
 *    constraints (at least min(n, 2)); then every constraint and integer
 *    range is checked again on the new dims, and the atoms of a dim that
 *    fails keep their size, until nothing changes.
 * 4. Rewrite. A copy of the plan (written self-contained and read back)
 *    gets the new dims, ranges, reshape shapes and split sizes, and is
 *    written and read back again, so the loader infers and checks every
 *    shape; the result is validated.
 *
 * Steps 1 and 2 are in reduce_ties.c, step 3 in reduce_sizes.c, the
 * summary in reduce_summary.c and their context in reduce_ctx.h; step 4
 * and the entries here. */
#include "reduce/reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce_ctx.h"

/* ---- step 4: rewrite ----------------------------------------------------- */

/* Attribute arrays may be shared between ops: gives op its own copy (in
 * the program's arena) to rewrite, or NULL when out of memory. */
static plan_attr_val *own_attrs(plan_program *prog, plan_op *op) {
  size_t n = (size_t)plan_op_info_get(op->kind)->nattrs;
  plan_attr_val *av = plan_arena_alloc(&prog->arena, sizeof *av * n);
  if (av) {
    memcpy(av, op->attrs, sizeof *av * n);
    op->attrs = av;
  }
  return av;
}

/* The int attributes that name an output's size: topk's k, scatter_add's
 * size, moe_dispatch's experts and capacity, from the new dims. */
static int apply_sizes(plan_program *prog, plan_op *op) {
  const plan_tensor *y = &prog->tensors[op->out[0]];
  int64_t v[2];
  int n;
  if (op->kind == PLAN_OP_TOPK || op->kind == PLAN_OP_SCATTER_ADD) {
    v[0] = y->dims[y->rank - 1];
    n = 1;
  } else if (op->kind == PLAN_OP_MOE_DISPATCH) {
    v[0] = y->dims[0];
    v[1] = y->dims[2];
    n = 2;
  } else {
    return PLAN_OK;
  }
  if (!op->attrs) /* every such kind requires them: never so loaded */
    return PLAN_OK;
  plan_attr_val *av = own_attrs(prog, op);
  if (!av)
    return plan_oom();
  for (int i = 0; i < n; i++)
    av[i].i = v[i];
  return PLAN_OK;
}

static int apply(rctx *c) {
  plan_program *prog = c->p->program;
  plan_arena *A = &prog->arena;
  for (int t = 0; t < prog->ntensors; t++) {
    plan_tensor *x = &prog->tensors[t];
    bool same = true;
    for (int d = 0; d < x->rank && same; d++)
      same = plan_rd_new_dim(c, t, d) == x->dims[d];
    if (!same) {
      int64_t *nd =
          plan_arena_alloc_align(A, sizeof(int64_t) * ((size_t)x->rank + 1), 8);
      if (!nd)
        return plan_oom();
      for (int d = 0; d < x->rank; d++)
        nd[d] = plan_rd_new_dim(c, t, d);
      x->dims = nd;
    }
    if (c->range_hi[t] >= 0)
      x->range_hi = c->range_hi[t];
  }
  for (int i = 0; i < prog->nops; i++) {
    plan_op *op = &prog->ops[i];
    int ai;
    const plan_tensor *src;
    if (op->kind == PLAN_OP_RESHAPE || op->kind == PLAN_OP_EXPAND)
      ai = 0; /* the output's shape */
    else if (op->kind == PLAN_OP_SPLIT)
      ai = 1;
    else {
      int rc = apply_sizes(prog, op);
      if (rc)
        return rc;
      continue;
    }
    if (!op->attrs) /* every such kind requires it: never so loaded */
      continue;
    plan_attr_val *av = own_attrs(prog, op);
    bool shape = op->kind != PLAN_OP_SPLIT;
    int n = shape ? prog->tensors[op->out[0]].rank : op->nout;
    int64_t *v =
        plan_arena_alloc_align(A, sizeof(int64_t) * ((size_t)n + 1), 8);
    if (!av || !v)
      return plan_oom();
    for (int j = 0; j < n; j++) {
      if (shape) {
        src = &prog->tensors[op->out[0]];
        v[j] = src->dims[j];
      } else {
        src = &prog->tensors[op->out[j]];
        v[j] = src->dims[(int)op->attrs[0].i];
      }
    }
    av[ai].ints = v;
    av[ai].nints = n;
    av[ai].present = true;
  }
  return PLAN_OK;
}

/* ---- entries ------------------------------------------------------------- */

static void ctx_free(rctx *c) {
  free(c->n);
  free(c->exps);
  free(c->stack);
  free(c->dimoff);
  free(c->described);
  free(c->broken);
  free(c->atomoff);
  free(c->natoms);
  free(c->atoms);
  free(c->cons);
  free(c->ac);
  free(c->range_hi);
  free(c->rule);
}

/* A private copy of p: written self-contained and read back. */
static int copy_plan(plan_plan **out, const plan_plan *p, const char *name) {
  plan_write_options wo = PLAN_WRITE_OPTIONS_INIT;
  wo.self_contained = 1;
  char *text;
  size_t len;
  int rc = plan_write_buffer(&text, &len, p, &wo);
  if (rc)
    return rc;
  rc = plan_load_buffer(out, text, len, name, NULL);
  free(text);
  return rc;
}

static int refuse(const plan_plan *p) {
  for (int i = 0; i < p->nregions; i++)
    if (p->regions[i].kind == PLAN_REGION_MANUAL)
      return plan_failf(PLAN_EUNSUPPORTED,
                        "%s: shape reduction of manual regions is not "
                        "supported (region '%s': its body may depend on sizes)",
                        p->file, p->regions[i].name);
  return PLAN_OK;
}

/* The first op whose shapes or strategy the reduction broke, for the
 * message. */
static int broken_by_reduction(const plan_plan *orig, const plan_plan *red) {
  plan_diags *dr = NULL, *d0 = NULL;
  int rc = plan_validate(&dr, red);
  if (rc)
    return rc;
  if (!plan_diags_count_at_least(dr, PLAN_SEV_ERROR)) {
    plan_diags_free(dr);
    return PLAN_OK;
  }
  if ((rc = plan_validate(&d0, orig))) {
    plan_diags_free(dr);
    return rc;
  }
  bool orig_bad = plan_diags_count_at_least(d0, PLAN_SEV_ERROR) > 0;
  plan_diags_free(d0);
  if (orig_bad) { /* not ours to judge: the caller validates */
    plan_diags_free(dr);
    return PLAN_OK;
  }
  const plan_diag *f = NULL;
  for (size_t i = 0; i < plan_diags_count(dr) && !f; i++)
    if (plan_diags_get(dr, i)->severity == PLAN_SEV_ERROR)
      f = plan_diags_get(dr, i);
  rc = plan_failf(PLAN_EINVALID,
                  "%s: shape reduction broke the plan at '%s': %s [%s]",
                  orig->file, f->object, f->message, f->code);
  plan_diags_free(dr);
  return rc;
}

/* Reduces `copy` in place, with extra constraints from lowered buffers
 * (bufs over `bprog`'s tensors; NULL for a plan), writes it and reads it
 * back as *out. */
/* Communication overlap: a chunked collective's chunks divide every
 * block of its buffers along the chunk dim, so that dim stays a multiple
 * of its shards times the chunks (in `copy`'s indices). */
static int chunk_constraints(rctx *c, const plan_plan *copy,
                             const plan_lowered *l) {
  const plan_program *lp = l->plan->program;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind != PLAN_LSTEP_REDIST || !s->chunk_of)
      continue;
    int bufs[2] = {s->in[0], s->out[0]};
    for (int j = 0; j < 2; j++) {
      const plan_lbuf *b = &l->bufs[bufs[j]];
      int t = plan_strmap_get(&copy->program->tensor_by_name,
                              lp->tensors[b->tensor].name);
      if (t < 0)
        continue;
      int axes[PLAN_MAX_MESH_AXES];
      int na = plan_placement_dim_axes(&b->pl, s->chunk_dim, axes);
      unsigned m = 0;
      for (int a = 0; a < na; a++)
        m |= 1u << axes[a];
      int rc = plan_rd_add_cons(c, t, s->chunk_dim, s->chunk_of, m, true, true);
      if (rc)
        return rc;
    }
  }
  return PLAN_OK;
}

static int reduce_copy(plan_plan **out, char **sum, plan_plan *copy,
                       const plan_lbuf *bufs, int nbufs,
                       const plan_program *bprog, const plan_lowered *chunked,
                       bool mesh) {
  rctx c;
  memset(&c, 0, sizeof c);
  c.p = copy;
  c.prog = copy->program;
  plan_rd_mesh_init(&c, mesh, chunked);
  int rc = plan_rd_build(&c);
  if (!rc)
    rc = plan_rd_constraints(&c);
  for (int b = 0; b < nbufs && !rc; b++) {
    int t = plan_strmap_get(&copy->program->tensor_by_name,
                            bprog->tensors[bufs[b].tensor].name);
    rc = plan_rd_add_pl(&c, t, &bufs[b].pl);
  }
  if (!rc && chunked)
    rc = chunk_constraints(&c, copy, chunked);
  if (!rc)
    rc = plan_rd_solve(&c);
  if (!rc && sum)
    rc = plan_rd_summary(&c, sum);
  if (!rc)
    rc = apply(&c);
  if (!rc)
    plan_rd_mesh_apply(&c);
  ctx_free(&c);
  if (rc)
    return rc;
  char *text;
  size_t len;
  plan_write_options wo = PLAN_WRITE_OPTIONS_INIT;
  wo.self_contained = 1;
  if ((rc = plan_write_buffer(&text, &len, copy, &wo)))
    return rc;
  rc = plan_load_buffer(out, text, len, copy->file, NULL);
  free(text);
  if (rc) {
    const plan_error *e = plan_error_last();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", e->message);
    return plan_failf(PLAN_EINVALID,
                      "%s: the reduced program does not load (a bug of shape "
                      "reduction): %s",
                      copy->file, msg);
  }
  return PLAN_OK;
}

int plan_reduce_shapes(plan_plan **out, char **summary_out,
                       const plan_plan *p) {
  return plan_reduce_plan(out, summary_out, p, 0);
}

int plan_reduce_plan(plan_plan **out, char **summary_out, const plan_plan *p,
                     unsigned what) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_reduce_plan: NULL argument");
  *out = NULL;
  if (summary_out)
    *summary_out = NULL;
  int rc = refuse(p);
  if (rc)
    return rc;
  plan_plan *copy, *red;
  if ((rc = copy_plan(&copy, p, p->file)))
    return rc;
  char *sum = NULL;
  /* with overlap, its chunks constrain the sizes (what cannot be lowered
   * constrains nothing here: the verification reports it) */
  plan_lowered *lw = NULL;
  if (p->noverlap && p->has_mesh && plan_lower(&lw, p))
    lw = NULL;
  rc = reduce_copy(&red, summary_out ? &sum : NULL, copy, NULL, 0, NULL, lw,
                   (what & PLAN_REDUCE_MESH) != 0);
  plan_lowered_free(lw);
  plan_free(copy);
  if (!rc && p->has_mesh && (rc = broken_by_reduction(p, red)))
    plan_free(red);
  if (rc) {
    free(sum);
    return rc;
  }
  *out = red;
  if (summary_out)
    *summary_out = sum;
  return PLAN_OK;
}

int plan_reduce_lowered(plan_lowered **out, char **summary_out,
                        const plan_lowered *l) {
  return plan_lowered_reduce(out, summary_out, l, 0);
}

int plan_lowered_reduce(plan_lowered **out, char **summary_out,
                        const plan_lowered *l, unsigned what) {
  if (!out || !l || !l->plan)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_reduce: NULL argument");
  *out = NULL;
  if (summary_out)
    *summary_out = NULL;
  const plan_plan *p = l->plan;
  const plan_program *oprog = p->program;
  int rc = refuse(p);
  if (rc)
    return rc;
  plan_plan *copy, *red;
  if ((rc = copy_plan(&copy, p, p->file)))
    return rc;
  /* The buffers' ratio levels name l's sets, which the copies' text does
   * not carry (no placement of theirs names them): borrowed from p, which
   * outlives both. */
  copy->mesh.ratios = p->mesh.ratios;
  copy->mesh.nratios = p->mesh.nratios;
  char *sum = NULL;
  rc = reduce_copy(&red, summary_out ? &sum : NULL, copy, l->bufs, l->nbufs,
                   oprog, l, (what & PLAN_REDUCE_MESH) != 0);
  plan_free(copy);
  if (rc) {
    free(sum);
    return rc;
  }
  red->mesh.ratios = p->mesh.ratios;
  red->mesh.nratios = p->mesh.nratios;
  /* the same steps over the reduced program's indices (matched by name) */
  const plan_program *np = red->program;
  char *text = NULL;
  size_t len = 0;
  plan_lowered tmp = *l;
  tmp.plan = red;
  tmp.bufs = malloc(sizeof *tmp.bufs * ((size_t)l->nbufs + 1));
  tmp.steps = malloc(sizeof *tmp.steps * ((size_t)l->nsteps + 1));
  tmp.produced = malloc(sizeof(int) * ((size_t)np->ntensors + 1));
  tmp.delivered = malloc(sizeof(int) * ((size_t)np->noutputs + 1));
  tmp.required = NULL;
  tmp.grad_of = NULL;
  if (l->required) {
    tmp.required = malloc(sizeof(plan_placement) * ((size_t)np->noutputs + 1));
    tmp.grad_of = malloc(sizeof(int) * ((size_t)np->noutputs + 1));
  }
  if (!tmp.bufs || !tmp.steps || !tmp.produced || !tmp.delivered ||
      (l->required && (!tmp.required || !tmp.grad_of))) {
    rc = plan_oom();
    goto done;
  }
  for (int b = 0; b < l->nbufs; b++) {
    tmp.bufs[b] = l->bufs[b];
    tmp.bufs[b].tensor = plan_strmap_get(
        &np->tensor_by_name, oprog->tensors[l->bufs[b].tensor].name);
  }
  for (int s = 0; s < l->nsteps; s++) {
    tmp.steps[s] = l->steps[s];
    if (l->steps[s].kind == PLAN_LSTEP_OP)
      tmp.steps[s].op =
          plan_strmap_get(&np->op_by_name, oprog->ops[l->steps[s].op].name);
  }
  for (int t = 0; t < np->ntensors; t++)
    tmp.produced[t] = -1;
  for (int t = 0; t < oprog->ntensors; t++) {
    int nt = plan_strmap_get(&np->tensor_by_name, oprog->tensors[t].name);
    if (l->produced[t] >= 0 && nt >= 0)
      tmp.produced[nt] = l->produced[t];
  }
  for (int k = 0; k < np->noutputs; k++) {
    const char *nm = np->tensors[np->outputs[k]].name;
    tmp.delivered[k] = -1;
    for (int j = 0; j < oprog->noutputs; j++)
      if (!strcmp(oprog->tensors[oprog->outputs[j]].name, nm)) {
        tmp.delivered[k] = l->delivered[j];
        if (tmp.required) { /* the contract, over the new indices */
          tmp.required[k] = l->required[j];
          tmp.grad_of[k] =
              l->grad_of[j] < 0
                  ? -1
                  : plan_strmap_get(&np->tensor_by_name,
                                    oprog->tensors[l->grad_of[j]].name);
        }
      }
  }
  for (int b = 0; b < l->nbufs && !rc; b++)
    if (tmp.bufs[b].tensor < 0)
      rc = plan_failf(PLAN_EINVALID, "%s: tensor '%s' is lost by reduction",
                      p->file, oprog->tensors[l->bufs[b].tensor].name);
  for (int k = 0; k < np->noutputs && !rc; k++)
    if (tmp.delivered[k] < 0)
      rc = plan_failf(PLAN_EINVALID, "%s: output %d is lost by reduction",
                      p->file, k);
  for (int s = 0; s < l->nsteps && !rc; s++)
    if (tmp.steps[s].kind == PLAN_LSTEP_OP && tmp.steps[s].op < 0)
      rc = plan_failf(PLAN_EINVALID, "%s: op '%s' is lost by reduction",
                      p->file, oprog->ops[l->steps[s].op].name);
  if (!rc)
    rc = plan_lowered_write(&text, &len, &tmp);
  if (!rc) {
    rc = plan_lowered_load_buffer(out, text, len, p->file, NULL);
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", plan_error_last()->message);
      rc = plan_failf(PLAN_EINVALID,
                      "%s: the reduced lowered program does not load (a bug "
                      "of shape reduction): %s",
                      p->file, msg);
    }
  }
done:
  free(text);
  free(tmp.bufs);
  free(tmp.steps);
  free(tmp.produced);
  free(tmp.delivered);
  free(tmp.required);
  free(tmp.grad_of);
  plan_free(red);
  if (rc) {
    free(sum);
    return rc;
  }
  if (summary_out)
    *summary_out = sum;
  return PLAN_OK;
}
