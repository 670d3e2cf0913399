/* Shape reduction, steps 1 and 2 (reduce.c): the union-find that ties
 * every tensor dim to the op factors its sharding rule names, the atoms
 * each dim breaks into, and the sizes that must be kept. */
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce_ctx.h"

#define MAX_ATOMS 16 /* parts of one tensor dim */
#define MAX_DEPTH 8  /* nested expansions */

/* ---- small helpers ------------------------------------------------------- */

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
bool plan_rd_keep(rctx *c, int x, keep_why why) {
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

/* ---- step 1: ties -------------------------------------------------------- */

/* A node of size m * g that is the expansion [m, g] (m kept: a count of
 * pieces), or g itself when m is 1; -1 when out of memory. */
static int pieces_node(rctx *c, int64_t m, int g) {
  if (m == 1)
    return g;
  int whole = add_node(c, m * c->n[g].size), count = add_node(c, m);
  if (whole < 0 || count < 0 ||
      plan_grow((void **)&c->exps, &c->capexps, c->nexps + 2, sizeof(int)))
    return -1;
  c->n[count].keep = KEEP_PARTS;
  c->n[whole].exp = c->nexps;
  c->n[whole].nexp = 2;
  c->exps[c->nexps++] = count;
  c->exps[c->nexps++] = g;
  return whole;
}

/* split's and concat's fused dim: the whole is a sum of parts, so it can be
 * reduced only part by part. With g the gcd of the parts, every part is
 * [m_i, g] and the whole [sum m_i, g] (pieces major, as the parts are laid
 * out one after another); the counts keep their size and g is reduced like
 * any atom, so the parts stay in proportion (rope's halves, equal chunks).
 * fused_node[o] gets the node of operand o's fused dim; false when the
 * parts have no common size worth reducing (the dim keeps its size). */
static int fused_nodes(rctx *c, const plan_op *op, int fused, int *fused_node,
                       bool *ok) {
  const plan_program *prog = c->prog;
  bool split = op->kind == PLAN_OP_SPLIT;
  int nparts = split ? op->nout : op->nin;
  int64_t g = 0, total = 0;
  for (int j = 0; j < nparts; j++) {
    int64_t p = prog->tensors[split ? op->out[j] : op->in[j]].dims[fused];
    g = plan_gcd_i64(p, g);
    total += p;
  }
  *ok = g > 1;
  if (!*ok)
    return PLAN_OK;
  int gn = add_node(c, g);
  if (gn < 0)
    return PLAN_ENOMEM;
  for (int o = 0; o < op->nin + op->nout; o++) {
    int64_t n = prog->tensors[op_tensor(op, o)].dims[fused];
    bool whole = split ? o < op->nin : o >= op->nin;
    if ((fused_node[o] = pieces_node(c, (whole ? total : n) / g, gn)) < 0)
      return PLAN_ENOMEM;
  }
  return PLAN_OK;
}

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
  int fused = -1, fused_node[PLAN_MAX_OPERANDS];
  bool parts = false;
  if (ok && (op->kind == PLAN_OP_SPLIT || op->kind == PLAN_OP_CONCAT)) {
    fused = op->attrs ? (int)op->attrs[0].i /* normalised to >= 0 */
                      : prog->tensors[op->out[0]].rank - 1;
    if (fused_nodes(c, op, fused, fused_node, &parts))
      return PLAN_ENOMEM;
  }
  for (int o = 0; o < op->nin + op->nout; o++) {
    const plan_tensor *t = &prog->tensors[op_tensor(op, o)];
    int tix = op_tensor(op, o);
    for (int d = 0; d < t->rank; d++) {
      int D = c->dimoff[tix] + d;
      c->described[D] = true;
      if (!ok) {
        plan_rd_keep(c, D, KEEP_RULE);
        continue;
      }
      const plan_rule_operand *ro = &r->operand[o];
      int nf = d < ro->rank ? ro->nf[d] : 0;
      if (nf == 0) {
        if (t->dims[d] != 1)
          plan_rd_keep(c, D, KEEP_RULE);
        continue;
      }
      int target;
      if (d == fused && parts) {
        if (join(c, D, fused_node[o]))
          return PLAN_ENOMEM;
        continue;
      }
      if (nf == 1) {
        target = base + ro->f[d][0];
      } else {
        int64_t prod = 1;
        bool fits = true;
        for (int k = 0; k < nf; k++)
          fits =
              fits && plan_mul_i64(prod, r->factors[ro->f[d][k]].size, &prod);
        if ((target = add_node(c, prod)) < 0 ||
            plan_grow((void **)&c->exps, &c->capexps, c->nexps + nf,
                      sizeof(int)))
          return PLAN_ENOMEM;
        c->n[target].exp = c->nexps;
        c->n[target].nexp = nf;
        for (int k = 0; k < nf; k++)
          c->exps[c->nexps++] = base + ro->f[d][k];
        if (!fits)
          plan_rd_keep(c, target, KEEP_RULE);
      }
      if (d == fused)
        plan_rd_keep(c, target, KEEP_FUSED);
      /* repeat_interleave's output dim is [n, repeats]: the attribute
       * names the repeats, which keep their size */
      if (op->kind == PLAN_OP_REPEAT_INTERLEAVE && o == op->nin && nf == 2 &&
          op->attrs && d == (int)op->attrs[1].i)
        plan_rd_keep(c, base + ro->f[d][1], KEEP_REPEATS);
      if (indexed_dim(op, o, d, t->rank))
        plan_rd_keep(c, target, KEEP_INDEXED);
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
void plan_rd_keep_down(rctx *c) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int x = 0; x < c->nn; x++) {
      const rnode *n = &c->n[x];
      if (n->parent != x || !n->nexp || !n->keep)
        continue;
      for (int i = 0; i < n->nexp; i++)
        changed |= plan_rd_keep(c, c->exps[n->exp + i], (keep_why)n->keep);
    }
  }
}

int plan_rd_build(rctx *c) {
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
      plan_rd_keep(c, D, KEEP_UNUSED);
  plan_rd_keep_down(c);
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
        plan_rd_keep(c, D, KEEP_RULE);
        for (int k = 0; k < na; k++)
          plan_rd_keep(c, tmp[k], KEEP_RULE);
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
  plan_rd_keep_down(c);
  return PLAN_OK;
}
