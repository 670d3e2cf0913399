/* Shape reduction (DESIGN §3, after TrainVerify): the same plan over a
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
 *    shape; the result is validated. */
#include "lower/lower.h"
#include "reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "read/plan_read.h"

#define MAX_ATOMS 16                   /* parts of one tensor dim */
#define MAX_DEPTH 8                    /* nested expansions */
#define SEARCH_SPAN ((int64_t)1 << 20) /* sizes tried per atom */
#define SUMMARY_ITEMS 10

/* Why an atom keeps its size (the first reason found). */
typedef enum keep_why {
  KEEP_NO = 0,
  KEEP_FUSED,
  KEEP_RULE,
  KEEP_UNUSED,
  KEEP_NESTED,
  KEEP_COMPOUND,
  KEEP_NOFIT,
  KEEP_RANGE,
  KEEP_REPEATS,
  KEEP_INDEXED,
  KEEP_COUNT
} keep_why;

static const char *const keep_text[KEEP_COUNT] = {
    "",
    "split/concat dim",
    "no sharding rule describes it",
    "no op uses it",
    "uneven over several axes",
    "merged dim, uneven major part",
    "no smaller size keeps its sharding",
    "an integer range indexes it",
    "the repeats of repeat_interleave",
    "computed indices point into it"};

typedef struct rnode {
  int parent;
  int exp, nexp; /* expansion: nodes exps[exp .. exp + nexp), major first */
  int64_t size;  /* original */
  int64_t nsize; /* chosen (atoms) */
  uint8_t keep;  /* keep_why */
} rnode;

/* A placement shards tensor dim `dim` over k ranks (nested: several axes);
 * or (divisor) the dim must stay a multiple of k, nothing more (a rope
 * table's even dim). */
typedef struct rcons {
  int tensor, dim;
  int64_t k;
  bool nested, divisor;
} rcons;

/* The same, on the atom it constrains (n: the atom's original size). */
typedef struct acons {
  int atom;
  int64_t k, n;
  bool even, divisor;
} acons;

typedef struct rctx {
  plan_plan *p; /* the copy being reduced */
  const plan_program *prog;
  rnode *n;
  int nn, capn;
  int *exps;
  int nexps, capexps;
  int *stack;
  int nstack, capstack;
  int *dimoff;     /* per tensor: its first dim node; [ntensors]: total */
  bool *described; /* per dim node: some op's rule names it */
  bool *broken;    /* per dim node: its atoms do not make its size */
  int *atomoff;    /* per dim node: first atom in atoms[] */
  uint8_t *natoms; /* per dim node */
  int *atoms;
  rcons *cons;
  int ncons, capcons;
  acons *ac;
  int nac, capac;
  int64_t *range_hi; /* per tensor: the new range end, -1 when unchanged */
  plan_rule *rule;
} rctx;

/* ---- small helpers ----------------------------------------------------------
 */

static int add_node(rctx *c, int64_t size) {
  if (plan_grow((void **)&c->n, &c->capn, c->nn + 1, sizeof *c->n))
    return -1;
  rnode *x = &c->n[c->nn];
  memset(x, 0, sizeof *x);
  x->parent = c->nn;
  x->exp = -1;
  x->size = size;
  x->nsize = size;
  return c->nn++;
}

static int find(rctx *c, int x) {
  while (c->n[x].parent != x) {
    c->n[x].parent = c->n[c->n[x].parent].parent;
    x = c->n[x].parent;
  }
  return x;
}

/* Marks x's class kept; true when that is news. */
static bool keep(rctx *c, int x, keep_why why) {
  int r = find(c, x);
  if (c->n[r].keep)
    return false;
  c->n[r].keep = (uint8_t)why;
  return true;
}

static int push_pair(rctx *c, int a, int b) {
  if (plan_grow((void **)&c->stack, &c->capstack, c->nstack + 2, sizeof(int)))
    return PLAN_ENOMEM;
  c->stack[c->nstack++] = a;
  c->stack[c->nstack++] = b;
  return PLAN_OK;
}

/* Joins the classes of a and b; expansions of both are joined part by
 * part (a work list, no recursion). */
static int join(rctx *c, int a, int b) {
  if (push_pair(c, a, b))
    return PLAN_ENOMEM;
  while (c->nstack) {
    int y = c->stack[--c->nstack], x = c->stack[--c->nstack];
    int ra = find(c, x), rb = find(c, y);
    if (ra == rb)
      continue;
    rnode *A = &c->n[ra], *B = &c->n[rb];
    B->parent = ra;
    if (!A->keep)
      A->keep = B->keep;
    if (A->size != B->size && !A->keep)
      A->keep = KEEP_RULE;
    if (B->nexp) {
      if (!A->nexp) {
        A->exp = B->exp;
        A->nexp = B->nexp;
      } else if (A->nexp == B->nexp) {
        int ea = A->exp, eb = B->exp, ne = A->nexp;
        for (int i = 0; i < ne; i++)
          if (push_pair(c, c->exps[ea + i], c->exps[eb + i]))
            return PLAN_ENOMEM;
      } else if (!A->keep) {
        /* one dim broken up two different ways: keep it (and its parts) */
        A->keep = KEEP_COMPOUND;
      }
    }
  }
  return PLAN_OK;
}

static void tensor_shape(const plan_tensor *t, plan_shape *s) {
  s->rank = t->rank;
  memcpy(s->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  s->dtype = t->dtype;
}

static int op_tensor(const plan_op *op, int o) {
  return o < op->nin ? op->in[o] : op->out[o - op->nin];
}

/* A dim that indices computed by the program (not an input with a range)
 * point into: topk's and gather's last input dim, scatter_add's last output
 * dim, and the experts of the mixture-of-experts slots. Reducing it could
 * leave an index past its end (a router's topk over all experts feeds the
 * dispatch), so it keeps its size. */
static bool indexed_dim(const plan_op *op, int o, int d, int rank) {
  switch ((plan_op_kind)op->kind) {
  case PLAN_OP_TOPK:
  case PLAN_OP_GATHER:
    return o == 0 && d == rank - 1;
  case PLAN_OP_SCATTER_ADD:
    return o == op->nin && d == rank - 1;
  case PLAN_OP_MOE_DISPATCH:
    return o == op->nin && d == 0;
  case PLAN_OP_MOE_COMBINE:
    return o == 0 && d == 0;
  case PLAN_OP_MOE_WEIGHTS_GRAD:
    return o == 1 && d == 0;
  default:
    return false;
  }
}

/* ---- step 1: ties
 * ------------------------------------------------------------ */

static int tie_op(rctx *c, int i) {
  const plan_program *prog = c->prog;
  const plan_op *op = &prog->ops[i];
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  for (int j = 0; j < op->nin; j++)
    tensor_shape(&prog->tensors[op->in[j]], &in[j]);
  for (int j = 0; j < op->nout; j++)
    tensor_shape(&prog->tensors[op->out[j]], &out[j]);
  char err[256];
  plan_rule *r = c->rule;
  bool ok = !plan_op_rule(r, op->kind, in, op->nin, out, op->nout, op->attrs,
                          err, sizeof err);
  int base = c->nn;
  for (int f = 0; ok && f < r->nfactors; f++)
    if (add_node(c, r->factors[f].size) < 0)
      return PLAN_ENOMEM;
  int fused = -1;
  if (op->kind == PLAN_OP_SPLIT || op->kind == PLAN_OP_CONCAT)
    fused = op->attrs ? (int)op->attrs[0].i /* normalised to >= 0 */
                      : prog->tensors[op->out[0]].rank - 1;
  for (int o = 0; o < op->nin + op->nout; o++) {
    const plan_tensor *t = &prog->tensors[op_tensor(op, o)];
    int tix = op_tensor(op, o);
    for (int d = 0; d < t->rank; d++) {
      int D = c->dimoff[tix] + d;
      c->described[D] = true;
      if (!ok) {
        keep(c, D, KEEP_RULE);
        continue;
      }
      const plan_rule_operand *ro = &r->operand[o];
      int nf = d < ro->rank ? ro->nf[d] : 0;
      if (nf == 0) {
        if (t->dims[d] != 1)
          keep(c, D, KEEP_RULE);
        continue;
      }
      int target;
      if (nf == 1) {
        target = base + ro->f[d][0];
      } else {
        int64_t prod = 1;
        bool fits = true;
        for (int k = 0; k < nf; k++)
          fits =
              fits && plan_mul_i64(prod, r->factors[ro->f[d][k]].size, &prod);
        if ((target = add_node(c, prod)) < 0 ||
            plan_grow((void **)&c->exps, &c->capexps, c->nexps + nf, sizeof(int)))
          return PLAN_ENOMEM;
        c->n[target].exp = c->nexps;
        c->n[target].nexp = nf;
        for (int k = 0; k < nf; k++)
          c->exps[c->nexps++] = base + ro->f[d][k];
        if (!fits)
          keep(c, target, KEEP_RULE);
      }
      if (d == fused)
        keep(c, target, KEEP_FUSED);
      /* repeat_interleave's output dim is [n, repeats]: the attribute
       * names the repeats, which keep their size */
      if (op->kind == PLAN_OP_REPEAT_INTERLEAVE && o == op->nin && nf == 2 &&
          op->attrs && d == (int)op->attrs[1].i)
        keep(c, base + ro->f[d][1], KEEP_REPEATS);
      if (indexed_dim(op, o, d, t->rank))
        keep(c, target, KEEP_INDEXED);
      if (join(c, D, target))
        return PLAN_ENOMEM;
    }
  }
  return PLAN_OK;
}

/* The atoms of node x, major to minor; -1 when too many or too deep. */
static int flatten(rctx *c, int x, int *out, int cnt, int depth) {
  int r = find(c, x);
  if (!c->n[r].nexp) {
    if (cnt >= MAX_ATOMS)
      return -1;
    out[cnt] = r;
    return cnt + 1;
  }
  if (depth >= MAX_DEPTH)
    return -1;
  int e = c->n[r].exp, ne = c->n[r].nexp;
  for (int i = 0; i < ne && cnt >= 0; i++)
    cnt = flatten(c, c->exps[e + i], out, cnt, depth + 1);
  return cnt;
}

/* A kept class with an expansion keeps its parts too. */
static void keep_down(rctx *c) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int x = 0; x < c->nn; x++) {
      const rnode *n = &c->n[x];
      if (n->parent != x || !n->nexp || !n->keep)
        continue;
      for (int i = 0; i < n->nexp; i++)
        changed |= keep(c, c->exps[n->exp + i], (keep_why)n->keep);
    }
  }
}

static int build(rctx *c) {
  const plan_program *prog = c->prog;
  int nt = prog->ntensors;
  if (!(c->dimoff = malloc(sizeof(int) * ((size_t)nt + 1))))
    return plan_oom();
  int total = 0;
  for (int t = 0; t < nt; t++) {
    c->dimoff[t] = total;
    total += prog->tensors[t].rank;
  }
  c->dimoff[nt] = total;
  c->described = calloc((size_t)total + 1, sizeof(bool));
  c->broken = calloc((size_t)total + 1, sizeof(bool));
  c->atomoff = calloc((size_t)total + 1, sizeof(int));
  c->natoms = calloc((size_t)total + 1, 1);
  c->range_hi = malloc(sizeof(int64_t) * ((size_t)nt + 1));
  c->rule = malloc(sizeof *c->rule);
  if (!c->described || !c->broken || !c->atomoff || !c->natoms ||
      !c->range_hi || !c->rule)
    return plan_oom();
  for (int t = 0; t < nt; t++)
    for (int d = 0; d < prog->tensors[t].rank; d++)
      if (add_node(c, prog->tensors[t].dims[d]) < 0)
        return PLAN_ENOMEM;
  for (int i = 0; i < prog->nops; i++) {
    int rc = tie_op(c, i);
    if (rc)
      return rc;
  }
  for (int D = 0; D < total; D++)
    if (!c->described[D])
      keep(c, D, KEEP_UNUSED);
  keep_down(c);
  /* the atoms of every dim (fixed from here on: only keep marks change) */
  int cap = 0, used = 0, tmp[MAX_ATOMS];
  for (int t = 0; t < nt; t++) {
    const plan_tensor *x = &prog->tensors[t];
    for (int d = 0; d < x->rank; d++) {
      int D = c->dimoff[t] + d;
      int na = flatten(c, D, tmp, 0, 0);
      int64_t prod = 1;
      bool ok = na > 0;
      for (int k = 0; ok && k < na; k++)
        ok = plan_mul_i64(prod, c->n[tmp[k]].size, &prod);
      if (!ok || prod != x->dims[d]) {
        c->broken[D] = true;
        keep(c, D, KEEP_RULE);
        for (int k = 0; k < na; k++)
          keep(c, tmp[k], KEEP_RULE);
        if (na < 0)
          na = 0;
      }
      if (plan_grow((void **)&c->atoms, &cap, used + na, sizeof(int)))
        return PLAN_ENOMEM;
      if (na)
        memcpy(c->atoms + used, tmp, sizeof(int) * (size_t)na);
      c->atomoff[D] = used;
      c->natoms[D] = (uint8_t)na;
      used += na;
    }
  }
  keep_down(c);
  return PLAN_OK;
}

/* ---- step 3: constraints and sizes ------------------------------------------
 */

static int add_pl(rctx *c, int t, const plan_placement *pl) {
  if (t < 0 || !pl)
    return PLAN_OK;
  const plan_tensor *x = &c->prog->tensors[t];
  const int64_t *ms = c->p->mesh.axis_sizes;
  for (int d = 0; d < x->rank; d++) {
    int axes[PLAN_MAX_MESH_AXES];
    int na = plan_placement_dim_axes(pl, d, axes);
    if (!na)
      continue;
    int64_t k = 1;
    for (int a = 0; a < na; a++)
      if (!plan_mul_i64(k, ms[axes[a]] > 0 ? ms[axes[a]] : 1, &k))
        k = INT64_MAX;
    if (plan_grow((void **)&c->cons, &c->capcons, c->ncons + 1, sizeof *c->cons))
      return PLAN_ENOMEM;
    c->cons[c->ncons++] = (rcons){t, d, k, na > 1, false};
  }
  return PLAN_OK;
}

static int plan_constraints(rctx *c) {
  const plan_plan *p = c->p;
  const plan_program *prog = c->prog;
  int rc = PLAN_OK;
  /* rope tables need an even last dim */
  for (int t = 0; t < prog->ntensors && !rc; t++) {
    const plan_tensor *x = &prog->tensors[t];
    if ((x->recipe == PLAN_RECIPE_ROPE_COS ||
         x->recipe == PLAN_RECIPE_ROPE_SIN) &&
        x->rank == 2) {
      if (plan_grow((void **)&c->cons, &c->capcons, c->ncons + 1, sizeof *c->cons))
        return PLAN_ENOMEM;
      c->cons[c->ncons++] = (rcons){t, 1, 2, false, true};
    }
  }
  if (!p->has_mesh)
    return PLAN_OK;
  for (int t = 0; t < prog->ntensors && !rc; t++)
    if (p->placements && p->placements[t].set)
      rc = add_pl(c, t, &p->placements[t].pl);
  for (int i = 0; i < prog->nops && !rc; i++) {
    const plan_strategy *s = p->strategies ? &p->strategies[i] : NULL;
    if (!s || !s->set)
      continue;
    const plan_op *op = &prog->ops[i];
    for (int j = 0; j < op->nin && !rc; j++)
      rc = add_pl(c, op->in[j], &s->in[j]);
    for (int j = 0; j < op->nout && !rc; j++)
      rc = add_pl(c, op->out[j], &s->out[j]);
  }
  for (int k = 0; k < prog->noutputs && !rc; k++)
    if (p->out_pl && p->out_pl[k].set)
      rc = add_pl(c, prog->outputs[k], &p->out_pl[k].pl);
  if (p->training.present && p->training.params)
    for (int t = 0; t < prog->ntensors && !rc; t++)
      if (p->training.params[t].has_state_pl)
        rc = add_pl(c, t, &p->training.params[t].state_pl);
  /* a pipeline splits every input's batch dim into its microbatches (a
   * sharding in time, nested over the devices' sharding of that dim) */
  int64_t m = p->pipeline.present ? p->pipeline.microbatches : 1;
  for (int t = 0; t < prog->ntensors && !rc && m > 1; t++) {
    const plan_tensor *x = &prog->tensors[t];
    int d = x->producer < 0 ? plan_pipeline_batch_dim(x) : -1;
    if (d < 0)
      continue;
    int64_t k = m;
    int na = 0, axes[PLAN_MAX_MESH_AXES];
    if (p->placements && p->placements[t].set) {
      na = plan_placement_dim_axes(&p->placements[t].pl, d, axes);
      for (int a = 0; a < na; a++)
        if (!plan_mul_i64(k, p->mesh.axis_sizes[axes[a]], &k))
          k = INT64_MAX;
    }
    if (plan_grow((void **)&c->cons, &c->capcons, c->ncons + 1, sizeof *c->cons))
      return PLAN_ENOMEM;
    c->cons[c->ncons++] = (rcons){t, d, k, na > 0, false};
  }
  return rc;
}

/* torch.chunk of n over k: the chunk, the full pieces, the partial piece's
 * size (0: none) and the empty pieces. */
typedef struct chunking {
  int64_t chunk, full, part, empty;
} chunking;

static chunking chunk_of(int64_t n, int64_t k) {
  chunking r = {0, 0, 0, k};
  if (n <= 0 || k <= 0)
    return r;
  r.chunk = n / k + (n % k != 0);
  r.full = n / r.chunk;
  r.part = n - r.full * r.chunk;
  r.empty = k - r.full - (r.part > 0);
  return r;
}

static int64_t min2(int64_t n) {
  return n < 2 ? n : 2;
}

/* Whether size v keeps constraint a (over original size a->n). */
static bool fits(const acons *a, int64_t v) {
  if (a->even)
    return v % a->k == 0 && (a->divisor || v / a->k >= min2(a->n / a->k));
  chunking o = chunk_of(a->n, a->k), w = chunk_of(v, a->k);
  return w.full == o.full && (w.part > 0) == (o.part > 0) &&
         w.empty == o.empty && w.chunk >= min2(o.chunk) &&
         w.part >= min2(o.part);
}

static int cmp_acons(const void *x, const void *y) {
  const acons *a = x, *b = y;
  if (a->atom != b->atom)
    return a->atom < b->atom ? -1 : 1;
  if (a->k != b->k)
    return a->k < b->k ? -1 : 1;
  if (a->n != b->n)
    return a->n < b->n ? -1 : 1;
  if (a->even != b->even)
    return (int)a->even - (int)b->even;
  return (int)a->divisor - (int)b->divisor;
}

static int64_t new_dim(const rctx *c, int t, int d) {
  int D = c->dimoff[t] + d;
  if (c->broken[D])
    return c->prog->tensors[t].dims[d];
  int64_t v = 1;
  for (int k = 0; k < c->natoms[D]; k++)
    v *= c->n[c->atoms[c->atomoff[D] + k]].nsize; /* <= the original */
  return v;
}

static bool keep_dim(rctx *c, int t, int d, keep_why why) {
  int D = c->dimoff[t] + d;
  bool ch = keep(c, D, why);
  for (int k = 0; k < c->natoms[D]; k++)
    ch |= keep(c, c->atoms[c->atomoff[D] + k], why);
  return ch;
}

/* Puts each constraint on the atom it binds; keeps what cannot be bound. */
static int bind(rctx *c) {
  c->nac = 0;
  for (int i = 0; i < c->ncons; i++) {
    const rcons *q = &c->cons[i];
    int D = c->dimoff[q->tensor] + q->dim;
    if (c->broken[D] || !c->natoms[D])
      continue;
    int64_t n0 = c->prog->tensors[q->tensor].dims[q->dim];
    bool even = q->k > 0 && n0 % q->k == 0;
    int a1 = c->atoms[c->atomoff[D]];
    acons ac = {a1, q->k, c->n[a1].size, even, q->divisor};
    if (!even && q->nested) {
      keep_dim(c, q->tensor, q->dim, KEEP_NESTED);
      continue;
    }
    if (c->natoms[D] > 1 && !(even && c->n[a1].size % q->k == 0)) {
      keep_dim(c, q->tensor, q->dim, KEEP_COMPOUND);
      continue;
    }
    if (plan_grow((void **)&c->ac, &c->capac, c->nac + 1, sizeof *c->ac))
      return PLAN_ENOMEM;
    c->ac[c->nac++] = ac;
  }
  if (c->nac)
    qsort(c->ac, (size_t)c->nac, sizeof *c->ac, cmp_acons);
  /* repeated layers repeat constraints: keep one of each */
  int w = 0;
  for (int i = 0; i < c->nac; i++)
    if (!w || cmp_acons(&c->ac[w - 1], &c->ac[i]))
      c->ac[w++] = c->ac[i];
  c->nac = w;
  return PLAN_OK;
}

static void choose(rctx *c) {
  for (int x = 0; x < c->nn; x++) {
    rnode *n = &c->n[x];
    if (n->parent == x && !n->nexp)
      n->nsize = n->keep ? n->size : min2(n->size);
  }
  for (int i = 0; i < c->nac;) {
    int j = i, a = c->ac[i].atom;
    while (j < c->nac && c->ac[j].atom == a)
      j++;
    rnode *n = &c->n[a];
    if (!n->keep) {
      /* the smallest size that keeps every constraint; the original keeps
       * them all */
      int64_t lo = min2(n->size), found = n->size;
      for (int64_t v = lo; v < n->size && v - lo < SEARCH_SPAN; v++) {
        bool ok = true;
        for (int k = i; ok && k < j; k++)
          ok = fits(&c->ac[k], v);
        if (ok) {
          found = v;
          break;
        }
      }
      n->nsize = found;
    }
    i = j;
  }
}

/* Checks every constraint and range on the new dims; keeps the dims that
 * break one. True when something changed (sizes must be chosen again). */
static bool recheck(rctx *c) {
  bool changed = false;
  for (int i = 0; i < c->ncons; i++) {
    const rcons *q = &c->cons[i];
    int64_t n0 = c->prog->tensors[q->tensor].dims[q->dim];
    int64_t nd = new_dim(c, q->tensor, q->dim);
    if (nd == n0)
      continue;
    bool ok;
    if (n0 % q->k == 0)
      ok = nd % q->k == 0 && (q->divisor || nd / q->k >= min2(n0 / q->k));
    else if (q->nested)
      ok = false;
    else {
      acons a = {0, q->k, n0, false, false};
      ok = fits(&a, nd);
    }
    if (!ok)
      changed |= keep_dim(c, q->tensor, q->dim, KEEP_NOFIT);
  }
  /* integer ranges that index a dim: embedding ids, cross-entropy labels */
  const plan_program *prog = c->prog;
  for (int t = 0; t < prog->ntensors; t++)
    c->range_hi[t] = -1;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    if ((op->kind != PLAN_OP_EMBEDDING && op->kind != PLAN_OP_CROSS_ENTROPY) ||
        op->nin < 2)
      continue;
    const plan_tensor *ids = &prog->tensors[op->in[1]];
    const plan_tensor *tab = &prog->tensors[op->in[0]];
    if (!ids->has_range || tab->rank < 1)
      continue;
    int d = op->kind == PLAN_OP_EMBEDDING ? 0 : tab->rank - 1;
    int64_t n0 = tab->dims[d], nd = new_dim(c, op->in[0], d);
    int64_t want = ids->range_hi == n0 ? nd : ids->range_hi;
    bool bad = nd != n0 && (want > nd || ids->range_lo >= want);
    int64_t *hi = &c->range_hi[op->in[1]];
    if (!bad && *hi >= 0 && *hi != want)
      bad = true;
    if (bad)
      changed |= keep_dim(c, op->in[0], d, KEEP_RANGE);
    else
      *hi = want;
  }
  return changed;
}

static int solve(rctx *c) {
  for (;;) {
    keep_down(c);
    int rc = bind(c);
    if (rc)
      return rc;
    choose(c);
    if (!recheck(c))
      return PLAN_OK;
  }
}

/* ---- step 4: rewrite
 * ---------------------------------------------------------- */

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
      same = new_dim(c, t, d) == x->dims[d];
    if (!same) {
      int64_t *nd =
          plan_arena_alloc_align(A, sizeof(int64_t) * ((size_t)x->rank + 1), 8);
      if (!nd)
        return plan_oom();
      for (int d = 0; d < x->rank; d++)
        nd[d] = new_dim(c, t, d);
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

/* ---- the summary
 * ---------------------------------------------------------------- */

typedef struct label {
  char text[96];
  bool named;
  int order;
} label;

/* The label with every all-digit path component before its "[" as "*",
 * so the dims of repeated layers (layers.3.mlp.h[2]) make one entry. */
static char *pattern_of(plan_arena *a, const char *text) {
  size_t n = strlen(text);
  char *o = plan_arena_alloc(a, n + 1);
  if (!o)
    return NULL;
  const char *br = strchr(text, '[');
  size_t end = br ? (size_t)(br - text) : n, w = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < end && text[j] >= '0' && text[j] <= '9')
      j++;
    bool whole =
        j > i && (i == 0 || text[i - 1] == '.') && (j == end || text[j] == '.');
    if (whole) {
      o[w++] = '*';
      i = j;
    } else {
      o[w++] = text[i++];
    }
  }
  o[w] = '\0';
  return o;
}

/* Entries of the summary: atoms grouped by kind (reduced or kept), sizes,
 * reason and label pattern, in order of first appearance. */
typedef struct sgroup {
  const char *text, *pattern;
  int atom, count;
  bool kept;
} sgroup;

static int group_atoms(rctx *c, const label *lb, const int *list, int nl,
                       plan_arena *a, sgroup *g, int *ng) {
  plan_strmap seen;
  plan_strmap_init(&seen);
  int rc = PLAN_OK;
  *ng = 0;
  for (int kept = 0; kept < 2 && !rc; kept++)
    for (int i = 0; i < nl && !rc; i++) {
      const rnode *n = &c->n[list[i]];
      if (kept ? !n->keep || n->size <= 2 || n->keep == KEEP_UNUSED
               : n->nsize == n->size)
        continue;
      char *pat = pattern_of(a, lb[list[i]].text);
      char *key = pat ? plan_arena_printf(
                            a, "%d %lld %lld %d %s", kept, (long long)n->size,
                            (long long)n->nsize, (int)n->keep, pat)
                      : NULL;
      int old;
      if (!key || plan_strmap_insert(&seen, key, *ng, &old)) {
        rc = plan_oom();
        break;
      }
      if (old >= 0) {
        g[old].count++;
        continue;
      }
      g[*ng] = (sgroup){lb[list[i]].text, pat, list[i], 1, kept == 1};
      (*ng)++;
    }
  plan_strmap_free(&seen);
  return rc;
}

static int summary(rctx *c, char **out) {
  const plan_program *prog = c->prog;
  label *lb = calloc((size_t)c->nn + 1, sizeof *lb);
  int *list = malloc(sizeof(int) * ((size_t)c->nn + 1));
  if (!lb || !list) {
    free(lb);
    free(list);
    return plan_oom();
  }
  for (int x = 0; x < c->nn; x++)
    lb[x].order = -1;
  int seq = 0;
  double before = 0, after = 0;
  /* name each atom after the first dim made of it alone, preferring a
   * named dim; atoms only found inside merged dims as "t[d]/part" */
  for (int pass = 0; pass < 2; pass++)
    for (int t = 0; t < prog->ntensors; t++) {
      const plan_tensor *x = &prog->tensors[t];
      double e0 = 1, e1 = 1;
      for (int d = 0; d < x->rank; d++) {
        int D = c->dimoff[t] + d;
        e0 *= (double)x->dims[d];
        e1 *= (double)new_dim(c, t, d);
        for (int k = 0; k < c->natoms[D]; k++) {
          int a = c->atoms[c->atomoff[D] + k];
          bool alone = c->natoms[D] == 1;
          if (pass == 0 && !alone)
            continue;
          const char *nm = x->dim_names ? x->dim_names[d] : NULL;
          label *L = &lb[a];
          if (L->order < 0) {
            L->order = seq++;
            L->named = alone && nm;
            if (L->named)
              snprintf(L->text, sizeof L->text, "%s", nm);
            else if (alone)
              snprintf(L->text, sizeof L->text, "%s[%d]", x->name, d);
            else
              snprintf(L->text, sizeof L->text, "%s[%d]/%d", x->name, d, k);
          } else if (!L->named && alone && nm) {
            L->named = true;
            snprintf(L->text, sizeof L->text, "%s", nm);
          }
        }
      }
      if (pass == 0) {
        before += e0;
        after += e1;
      }
    }
  /* orders are 0 .. seq-1, one per labelled atom */
  int nl = seq;
  for (int x = 0; x < c->nn; x++)
    if (lb[x].order >= 0)
      list[lb[x].order] = x;
  plan_arena a;
  plan_arena_init(&a);
  sgroup *g = malloc(sizeof *g * ((size_t)nl + 1));
  int ng = 0;
  int rc = g ? group_atoms(c, lb, list, nl, &a, g, &ng) : plan_oom();
  plan_buf b;
  plan_buf_init(&b);
  plan_buf_puts(&b, "reduced: ");
  int shown[2] = {0, 0}, more[2] = {0, 0};
  for (int i = 0; i < ng && !rc; i++) {
    int k = g[i].kept;
    if (shown[k] >= SUMMARY_ITEMS) {
      more[k]++;
      continue;
    }
    if (k && !shown[1]) {
      if (!shown[0])
        plan_buf_puts(&b, "nothing (every dim keeps its size)");
      if (more[0])
        plan_buf_printf(&b, " and %d more", more[0]);
      if (after > 0 && before > after)
        plan_buf_printf(&b, " (%.*fx fewer elements)",
                        before / after < 10 ? 1 : 0, before / after);
      plan_buf_puts(&b, "; kept: ");
    } else if (shown[k]) {
      plan_buf_puts(&b, ", ");
    }
    const rnode *n = &c->n[g[i].atom];
    plan_buf_printf(&b, "%s %lld", g[i].count > 1 ? g[i].pattern : g[i].text,
                    (long long)n->size);
    if (k)
      plan_buf_printf(&b, " (%s)", keep_text[n->keep]);
    else
      plan_buf_printf(&b, "->%lld", (long long)n->nsize);
    if (g[i].count > 1)
      plan_buf_printf(&b, " (x%d)", g[i].count);
    shown[k]++;
  }
  if (!shown[1]) {
    if (!shown[0])
      plan_buf_puts(&b, "nothing (every dim keeps its size)");
    if (more[0])
      plan_buf_printf(&b, " and %d more", more[0]);
    if (after > 0 && before > after)
      plan_buf_printf(&b, " (%.*fx fewer elements)",
                      before / after < 10 ? 1 : 0, before / after);
  } else if (more[1]) {
    plan_buf_printf(&b, " and %d more", more[1]);
  }
  free(g);
  plan_arena_free(&a);
  free(lb);
  free(list);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, NULL);
}

/* ---- entries
 * ------------------------------------------------------------------ */

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
static int reduce_copy(plan_plan **out, char **sum, plan_plan *copy,
                       const plan_lbuf *bufs, int nbufs,
                       const plan_program *bprog) {
  rctx c;
  memset(&c, 0, sizeof c);
  c.p = copy;
  c.prog = copy->program;
  int rc = build(&c);
  if (!rc)
    rc = plan_constraints(&c);
  for (int b = 0; b < nbufs && !rc; b++) {
    int t = plan_strmap_get(&copy->program->tensor_by_name,
                            bprog->tensors[bufs[b].tensor].name);
    rc = add_pl(&c, t, &bufs[b].pl);
  }
  if (!rc)
    rc = solve(&c);
  if (!rc && sum)
    rc = summary(&c, sum);
  if (!rc)
    rc = apply(&c);
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
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_reduce_shapes: NULL argument");
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
  rc = reduce_copy(&red, summary_out ? &sum : NULL, copy, NULL, 0, NULL);
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
  if (!out || !l || !l->plan)
    return plan_failf(PLAN_EUSAGE, "plan_reduce_lowered: NULL argument");
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
  char *sum = NULL;
  rc = reduce_copy(&red, summary_out ? &sum : NULL, copy, l->bufs, l->nbufs,
                   oprog);
  plan_free(copy);
  if (rc) {
    free(sum);
    return rc;
  }
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
  if (!tmp.bufs || !tmp.steps || !tmp.produced || !tmp.delivered) {
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
      if (!strcmp(oprog->tensors[oprog->outputs[j]].name, nm))
        tmp.delivered[k] = l->delivered[j];
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
  plan_free(red);
  if (rc) {
    free(sum);
    return rc;
  }
  if (summary_out)
    *summary_out = sum;
  return PLAN_OK;
}
