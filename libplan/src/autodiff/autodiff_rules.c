/* The backward rule of every op kind of the registry: the ops that turn the
 * gradient of an op's outputs into the gradients of its inputs. Each rule
 * is written with ops of the registry; the table in
 * docs/training-and-pipelines.md ("Autodiff") states them in formulas.
 *
 * Conventions: dy is the gradient of output 0 (dys[k] of output k); the
 * forward tensors keep their indices in the training program, so op->in[j]
 * and op->out[k] name them there. The main op of a gradient is named after
 * the input (da, db, dx, dw, ...); the ops that shape it take a suffix
 * (da.sum, da.shape). A gradient op is linear in its first input (the
 * output gradient), and its rule covers that input and a norm's weight; the
 * point it is taken at (x, logits) would need a second derivative, which is
 * refused with the op's position. */
#include <string.h>

#include "autodiff/autodiff_attention.h"
#include "autodiff/autodiff_build.h"

/* ---- helpers ------------------------------------------------------------- */

/* Contributes g (or passes a failure on). */
static int give(plan_ad_ctx *c, const plan_op *op, int slot, int g) {
  return g < 0 ? g : plan_ad_contribute(c, op->in[slot], g);
}

static const plan_attr_spec *spec_of(int kind) {
  return plan_op_info_get(kind)->attrs;
}
static bool attr_b(const plan_op *op, int i) {
  return op->attrs ? op->attrs[i].b : spec_of(op->kind)[i].def_b;
}
static int64_t attr_i(const plan_op *op, int i) {
  return op->attrs ? op->attrs[i].i : spec_of(op->kind)[i].def_i;
}
static double attr_f(const plan_op *op, int i) {
  return op->attrs ? op->attrs[i].f : spec_of(op->kind)[i].def_f;
}

static int rank_of(const plan_ad_ctx *c, int t) {
  return c->p->tensors[t].rank;
}
static int64_t dim_of(const plan_ad_ctx *c, int t, int d) {
  return c->p->tensors[t].dims[d];
}
/* Copies the dims of t into dims (PLAN_MAX_RANK entries). */
static int dims_of(const plan_ad_ctx *c, int t, int64_t *dims) {
  const plan_tensor *x = &c->p->tensors[t];
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  return x->rank;
}

/* The product of every dim but the last. */
static int64_t rows_of(const plan_ad_ctx *c, int t) {
  const plan_tensor *x = &c->p->tensors[t];
  int64_t n = 1;
  for (int d = 0; d + 1 < x->rank; d++)
    n *= x->dims[d];
  return n;
}

/* The op's own attributes (for a rule that applies the same kind again). */
static const plan_attr_val *same_attrs(const plan_op *op) {
  return op->attrs;
}

static int second_order(plan_ad_ctx *c, const plan_op *op, int slot) {
  return plan_ad_fail(c,
                      "the loss depends on input %d ('%s'), the point this "
                      "gradient op is taken at; its gradient there is a second "
                      "derivative, which autodiff does not build",
                      slot, c->f->tensors[op->in[slot]].name);
}

/* ---- matmul, linear ------------------------------------------------------ */

/* C = op(A) op(B) (op: transpose when ta / tb), batch dims broadcast:
 *   dA = dC op(B)^T, stored transposed when ta: op(B) dC^T;
 *   dB = op(A)^T dC, stored transposed when tb: dC^T op(A);
 * then summed over the batch dims the operand was broadcast along. A 2-D B
 * under a batched A (the usual weight) folds the batch into the rows
 * instead: one [k, rows] x [rows, n] product, no batch of partial dBs. */
static int bw_matmul(plan_ad_ctx *c, const plan_op *op, int dc) {
  int a = op->in[0], b = op->in[1];
  bool ta = attr_b(op, 0), tb = attr_b(op, 1);
  if (plan_ad_wants(c, op, 0)) {
    int g = ta ? plan_ad_matmul(c, "da", b, dc, tb, true)
               : plan_ad_matmul(c, "da", dc, b, false, !tb);
    if (g >= 0)
      g = plan_ad_unbroadcast(c, "da", g, a);
    int rc = give(c, op, 0, g);
    if (rc)
      return rc;
  }
  if (!plan_ad_wants(c, op, 1))
    return PLAN_OK;
  int ra = rank_of(c, a), rb = rank_of(c, b);
  if (rb == 2 && ra > 2 && !ta) {
    int64_t k = dim_of(c, a, ra - 1), n = dim_of(c, dc, ra - 1);
    int64_t rows = rows_of(c, a);
    int64_t ad[2] = {rows, k}, cd[2] = {rows, n};
    int a2 = plan_ad_reshape(c, "db.a", a, 2, ad);
    int c2 = a2 < 0 ? a2 : plan_ad_reshape(c, "db.dy", dc, 2, cd);
    if (c2 < 0)
      return c2;
    return give(c, op, 1,
                tb ? plan_ad_matmul(c, "db", c2, a2, true, false)
                   : plan_ad_matmul(c, "db", a2, c2, true, false));
  }
  int g = tb ? plan_ad_matmul(c, "db", dc, a, true, ta)
             : plan_ad_matmul(c, "db", a, dc, !ta, false);
  if (g >= 0)
    g = plan_ad_unbroadcast(c, "db", g, b);
  return give(c, op, 1, g);
}

/* y = x w^T + bias, x [b.., k], w [n, k]:
 *   dx = dy w;  dw = dy^T x over every row;  dbias = dy summed over rows. */
static int bw_linear(plan_ad_ctx *c, const plan_op *op, int dy) {
  int x = op->in[0], w = op->in[1], r = rank_of(c, dy), rc;
  int64_t n = dim_of(c, w, 0), k = dim_of(c, w, 1);
  if (plan_ad_wants(c, op, 0)) {
    int g;
    if (r >= 2) {
      g = plan_ad_matmul(c, "dx", dy, w, false, false);
    } else { /* [n] -> [1, n] x [n, k] -> [k] */
      int64_t row[2] = {1, n};
      g = plan_ad_reshape(c, "dx.row", dy, 2, row);
      if (g >= 0)
        g = plan_ad_matmul(c, "dx.mm", g, w, false, false);
      if (g >= 0)
        g = plan_ad_reshape(c, "dx", g, 1, &k);
    }
    if ((rc = give(c, op, 0, g)))
      return rc;
  }
  if (plan_ad_wants(c, op, 1)) {
    int64_t rows = rows_of(c, x);
    int64_t yd[2] = {rows, n}, xd[2] = {rows, k};
    int y2 = plan_ad_reshape(c, "dw.dy", dy, 2, yd);
    int x2 = y2 < 0 ? y2 : plan_ad_reshape(c, "dw.x", x, 2, xd);
    int g = x2 < 0 ? x2 : plan_ad_matmul(c, "dw", y2, x2, true, false);
    if ((rc = give(c, op, 1, g)))
      return rc;
  }
  if (op->nin == 3 && plan_ad_wants(c, op, 2))
    return give(c, op, 2, plan_ad_sum_rows(c, "db", dy));
  return PLAN_OK;
}

/* ---- elementwise --------------------------------------------------------- */

/* add: da = dy, db = dy; sub: db = -dy; each summed back to its operand's
 * shape where it was broadcast. */
static int bw_add_sub(plan_ad_ctx *c, const plan_op *op, int dy, bool sub) {
  int rc;
  if (plan_ad_wants(c, op, 0) &&
      (rc = give(c, op, 0, plan_ad_unbroadcast(c, "da", dy, op->in[0]))))
    return rc;
  if (!plan_ad_wants(c, op, 1))
    return PLAN_OK;
  int g = plan_ad_unbroadcast(c, "db", dy, op->in[1]);
  if (sub && g >= 0)
    g = plan_ad_scale(c, "db.neg", g, -1.0);
  return give(c, op, 1, g);
}

/* mul: da = dy b, db = dy a (summed where broadcast). */
static int bw_mul(plan_ad_ctx *c, const plan_op *op, int dy) {
  static const char *const part[2] = {"da", "db"};
  for (int s = 0; s < 2; s++) {
    if (!plan_ad_wants(c, op, s))
      continue;
    int g = plan_ad_binary(c, PLAN_OP_MUL, part[s], dy, op->in[1 - s]);
    if (g >= 0)
      g = plan_ad_unbroadcast(c, part[s], g, op->in[s]);
    int rc = give(c, op, s, g);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

/* y = a / b: da = dy / b;  db = -dy a / b^2 = -(dy / b) y. */
static int bw_div(plan_ad_ctx *c, const plan_op *op, int dy) {
  int q = plan_ad_binary(c, PLAN_OP_DIV, "da", dy, op->in[1]);
  if (q < 0)
    return q;
  int rc;
  if (plan_ad_wants(c, op, 0) &&
      (rc = give(c, op, 0, plan_ad_unbroadcast(c, "da", q, op->in[0]))))
    return rc;
  if (!plan_ad_wants(c, op, 1))
    return PLAN_OK;
  int g = plan_ad_binary(c, PLAN_OP_MUL, "db", q, op->out[0]);
  if (g >= 0)
    g = plan_ad_unbroadcast(c, "db", g, op->in[1]);
  if (g >= 0)
    g = plan_ad_scale(c, "db.neg", g, -1.0);
  return give(c, op, 1, g);
}

/* ---- unary --------------------------------------------------------------- */

/* relu, gelu, silu: dx = dy f'(x), a gradient op of the registry. */
static int bw_act(plan_ad_ctx *c, const plan_op *op, int dy, int gkind) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(gkind, a);
  if (op->kind == PLAN_OP_GELU && op->attrs)
    a[0] = op->attrs[0]; /* approximate */
  int in[2] = {dy, op->in[0]};
  return give(c, op, 0, plan_ad_op(c, gkind, "dx", a, in, 2));
}

/* y = tanh x: dx = dy (1 - y^2) = dy - (dy y) y. */
static int bw_tanh(plan_ad_ctx *c, const plan_op *op, int dy) {
  int y = op->out[0];
  int g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyy", dy, y);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyyy", g, y);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_SUB, "dx", dy, g);
  return give(c, op, 0, g);
}

/* y = sigmoid x: dx = dy y (1 - y) = dy y - dy y y. */
static int bw_sigmoid(plan_ad_ctx *c, const plan_op *op, int dy) {
  int y = op->out[0];
  int g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyy", dy, y);
  int g2 = g < 0 ? g : plan_ad_binary(c, PLAN_OP_MUL, "dx.dyyy", g, y);
  return give(c, op, 0,
              g2 < 0 ? g2 : plan_ad_binary(c, PLAN_OP_SUB, "dx", g, g2));
}

/* y = x^(-1/2): dx = -1/2 dy y^3. */
static int bw_rsqrt(plan_ad_ctx *c, const plan_op *op, int dy) {
  int y = op->out[0];
  int g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyy", dy, y);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyyy", g, y);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyyyy", g, y);
  return give(c, op, 0, g < 0 ? g : plan_ad_scale(c, "dx", g, -0.5));
}

/* y = softmax(x) along dim: dx = y (dy - sum_dim(dy y)). */
static int bw_softmax(plan_ad_ctx *c, const plan_op *op, int dy) {
  int y = op->out[0];
  int64_t dim = attr_i(op, 0);
  if (dim < 0)
    dim += rank_of(c, y);
  int g = plan_ad_binary(c, PLAN_OP_MUL, "dx.dyy", dy, y);
  if (g >= 0)
    g = plan_ad_reduce_sum(c, "dx.sum", g, &dim, 1, true);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_SUB, "dx.sub", dy, g);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_MUL, "dx", y, g);
  return give(c, op, 0, g);
}

/* ---- norms --------------------------------------------------------------- */

/* A const of ones shaped like the normalised dim of x: the weight of the
 * plain norm. */
static int norm_ones(plan_ad_ctx *c, int x, const char *part) {
  int64_t d = dim_of(c, x, rank_of(c, x) - 1);
  return plan_ad_const(c, part, NULL, 1, &d, c->p->tensors[x].dtype,
                       PLAN_RECIPE_ONES);
}

/* y = xh w (+ bias) with xh the normalised x (layernorm: (x - mean) rstd,
 * rmsnorm: x rstd):
 *   dx = layernorm_grad / rmsnorm_grad (dy, x, w);
 *   dw = sum over rows of dy xh, with xh recomputed as the norm of x with
 *        weight ones;  dbias = sum over rows of dy. */
static int bw_norm(plan_ad_ctx *c, const plan_op *op, int dy, int gkind) {
  int x = op->in[0], rc;
  if (plan_ad_wants(c, op, 0)) {
    plan_attr_val a[PLAN_MAX_ATTRS];
    plan_ad_attrs(gkind, a);
    a[0].f = attr_f(op, 0); /* eps */
    a[0].present = op->attrs && op->attrs[0].present;
    int in[3] = {dy, x, op->in[1]};
    if ((rc = give(c, op, 0, plan_ad_op(c, gkind, "dx", a, in, 3))))
      return rc;
  }
  if (plan_ad_wants(c, op, 1)) {
    int ones = norm_ones(c, x, "ones");
    int in[2] = {x, ones};
    int xh = ones < 0 ? ones
                      : plan_ad_op(c, op->kind, "xhat", same_attrs(op), in, 2);
    bool rows = rank_of(c, x) > 1;
    int g =
        xh < 0 ? xh
               : plan_ad_binary(c, PLAN_OP_MUL, rows ? "dw.mul" : "dw", dy, xh);
    if (g >= 0)
      g = plan_ad_sum_rows(c, "dw", g);
    if ((rc = give(c, op, 1, g)))
      return rc;
  }
  if (op->nin == 3 && plan_ad_wants(c, op, 2))
    return give(c, op, 2, plan_ad_sum_rows(c, "db", dy));
  return PLAN_OK;
}

/* ---- embedding, loss ----------------------------------------------------- */

/* out = table[ids]: dtable = the rows of dy summed into the rows the ids
 * name (embedding_grad); the ids are integers. */
static int bw_embedding(plan_ad_ctx *c, const plan_op *op, int dy) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_EMBEDDING_GRAD, a);
  a[0].i = dim_of(c, op->in[0], 0);
  a[0].present = true;
  int in[2] = {dy, op->in[1]};
  return give(c, op, 0,
              plan_ad_op(c, PLAN_OP_EMBEDDING_GRAD, "dtable", a, in, 2));
}

/* loss = mean over samples of lse(logits) - logits[label]:
 * dlogits = dloss (softmax(logits) - onehot(labels)) / samples. */
static int bw_cross_entropy(plan_ad_ctx *c, const plan_op *op, int dy) {
  int in[3] = {dy, op->in[0], op->in[1]};
  return give(
      c, op, 0,
      plan_ad_op(c, PLAN_OP_CROSS_ENTROPY_GRAD, "dlogits", NULL, in, 3));
}

/* ---- data movement ------------------------------------------------------- */

/* transpose: the same swap; permute: the inverse permutation. */
static int bw_permute(plan_ad_ctx *c, const plan_op *op, int dy) {
  if (op->kind == PLAN_OP_TRANSPOSE)
    return give(c, op, 0,
                plan_ad_op(c, PLAN_OP_TRANSPOSE, "dx", same_attrs(op), &dy, 1));
  int r = rank_of(c, dy);
  int64_t inv[PLAN_MAX_RANK];
  for (int j = 0; j < r; j++) {
    int64_t pj = op->attrs[0].ints[j];
    inv[pj < 0 ? pj + r : pj] = j;
  }
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_PERMUTE, a);
  plan_ad_set_ints(&a[0], inv, r);
  return give(c, op, 0, plan_ad_op(c, PLAN_OP_PERMUTE, "dx", a, &dy, 1));
}

static int bw_reshape(plan_ad_ctx *c, const plan_op *op, int dy) {
  int64_t dims[PLAN_MAX_RANK];
  int r = dims_of(c, op->in[0], dims);
  return give(c, op, 0, plan_ad_reshape(c, "dx", dy, r, dims));
}

/* reduce_sum: dx = dy broadcast back over the reduced dims (expand, after a
 * reshape that puts the reduced dims back as 1 unless keepdim);
 * reduce_mean: the same of dy / (elements per mean). */
static int bw_reduce(plan_ad_ctx *c, const plan_op *op, int dy) {
  int x = op->in[0];
  int64_t xd[PLAN_MAX_RANK], kd[PLAN_MAX_RANK];
  int r = dims_of(c, x, xd);
  memcpy(kd, xd, sizeof kd);
  double count = 1;
  const int64_t *dims = op->attrs[0].ints;
  for (int i = 0; i < op->attrs[0].nints; i++) {
    int d = (int)(dims[i] < 0 ? dims[i] + r : dims[i]);
    count *= (double)xd[d];
    kd[d] = 1;
  }
  int g = dy;
  if (op->kind == PLAN_OP_REDUCE_MEAN)
    g = plan_ad_scale(c, "dx.mean", g, count > 0 ? 1.0 / count : 1.0);
  if (g >= 0)
    g = plan_ad_reshape(c, "dx.shape", g, r, kd);
  if (g < 0)
    return g;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_EXPAND, a);
  plan_ad_set_ints(&a[0], xd, r);
  return give(c, op, 0, plan_ad_op(c, PLAN_OP_EXPAND, "dx", a, &g, 1));
}

/* split: dx = concat of the parts' gradients (zeros for a part without
 * one, made by the caller). */
static int bw_split(plan_ad_ctx *c, const plan_op *op, const int *dys) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_CONCAT, a);
  a[0].i = attr_i(op, 0);
  a[0].present = true;
  return give(c, op, 0, plan_ad_op(c, PLAN_OP_CONCAT, "dx", a, dys, op->nout));
}

/* concat: each input's gradient is its slice of dy (one split). */
static int bw_concat(plan_ad_ctx *c, const plan_op *op, int dy) {
  int64_t dim = attr_i(op, 0), sizes[PLAN_MAX_OPERANDS];
  if (dim < 0)
    dim += rank_of(c, dy);
  for (int j = 0; j < op->nin; j++)
    sizes[j] = dim_of(c, op->in[j], (int)dim);
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_SPLIT, a);
  a[0].i = dim;
  a[0].present = true;
  plan_ad_set_ints(&a[1], sizes, op->nin);
  int parts[PLAN_MAX_OPERANDS];
  int rc = plan_ad_emit(c, PLAN_OP_SPLIT, "dx", a, &dy, 1, op->nin, parts);
  if (rc < 0)
    return rc;
  for (int j = 0; j < op->nin; j++)
    if (plan_ad_wants(c, op, j) && (rc = give(c, op, j, parts[j])))
      return rc;
  return PLAN_OK;
}

/* expand: dx = dy summed over the broadcast dims. */
static int bw_expand(plan_ad_ctx *c, const plan_op *op, int dy) {
  return give(c, op, 0, plan_ad_unbroadcast(c, "dx", dy, op->in[0]));
}

/* where(cond, a, b): da = where(cond, dy, 0), db = where(cond, 0, dy),
 * each summed back where it was broadcast (the 0 a scalar const of zeros).
 * cond only selects: an integer mask takes no gradient; a float one that
 * needs one gets zeros (a step's derivative, almost everywhere). */
static int bw_where(plan_ad_ctx *c, const plan_op *op, int dy) {
  static const char *const part[3] = {"dcond", "da", "db"};
  int rc, zero = -1;
  for (int s = 1; s < 3; s++) {
    if (!plan_ad_wants(c, op, s))
      continue;
    if (zero < 0 &&
        (zero = plan_ad_const(c, "zero", NULL, 0, NULL, c->p->tensors[dy].dtype,
                              PLAN_RECIPE_ZEROS)) < 0)
      return zero;
    int in[3] = {op->in[0], s == 1 ? dy : zero, s == 1 ? zero : dy};
    int g = plan_ad_op(c, PLAN_OP_WHERE, part[s], NULL, in, 3);
    if (g >= 0)
      g = plan_ad_unbroadcast(c, part[s], g, op->in[s]);
    if ((rc = give(c, op, s, g)))
      return rc;
  }
  if (!plan_ad_wants(c, op, 0))
    return PLAN_OK;
  int64_t dims[PLAN_MAX_RANK];
  int r = dims_of(c, op->in[0], dims);
  return give(c, op, 0,
              plan_ad_const(c, part[0], NULL, r, dims,
                            c->p->tensors[op->in[0]].dtype, PLAN_RECIPE_ZEROS));
}

/* repeat_interleave(x, repeats, dim): dx sums the copies: dy reshaped with
 * the repeated dim split into [n, repeats] and summed over the repeats (at
 * the largest rank, the dims around it merged for the split). */
static int bw_repeat_interleave(plan_ad_ctx *c, const plan_op *op, int dy) {
  int64_t xd[PLAN_MAX_RANK], sd[PLAN_MAX_RANK];
  int r = dims_of(c, op->in[0], xd), rs = 0;
  int64_t rep = attr_i(op, 0), dim = attr_i(op, 1), rd;
  if (dim < 0)
    dim += r;
  if (r < PLAN_MAX_RANK) {
    for (int d = 0; d < r; d++) {
      sd[rs++] = xd[d];
      if (d == dim)
        sd[rs++] = rep;
    }
    rd = dim + 1;
  } else {
    int64_t lead = 1, trail = 1;
    for (int d = 0; d < r; d++)
      if (d < dim)
        lead *= xd[d];
      else if (d > dim)
        trail *= xd[d];
    sd[rs++] = lead;
    sd[rs++] = xd[dim];
    sd[rs++] = rep;
    sd[rs++] = trail;
    rd = 2;
  }
  int g = plan_ad_reshape(c, "dx.split", dy, rs, sd);
  if (g >= 0)
    g = plan_ad_reduce_sum(c, r < PLAN_MAX_RANK ? "dx" : "dx.sum", g, &rd, 1,
                           false);
  if (g >= 0)
    g = plan_ad_reshape(c, "dx.shape", g, r, xd);
  return give(c, op, 0, g);
}

/* ---- routing and mixture of experts -------------------------------------- */

/* scatter_add of g by idx into a last dim of `size`. */
static int scatter_into(plan_ad_ctx *c, const char *part, int g, int idx,
                        int64_t size) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_SCATTER_ADD, a);
  a[0].i = size;
  a[0].present = true;
  int in[2] = {g, idx};
  return plan_ad_op(c, PLAN_OP_SCATTER_ADD, part, a, in, 2);
}

/* topk: the values are x's at the indices: dx = dvalues scattered back to
 * them; the indices take no gradient. */
static int bw_topk(plan_ad_ctx *c, const plan_op *op, const int *dys) {
  int x = op->in[0];
  return give(c, op, 0,
              scatter_into(c, "dx", dys[0], op->out[1],
                           dim_of(c, x, rank_of(c, x) - 1)));
}

/* gather and scatter_add are each other's adjoint (the indices fixed). */
static int bw_gather(plan_ad_ctx *c, const plan_op *op, int dy) {
  int x = op->in[0];
  return give(
      c, op, 0,
      scatter_into(c, "dx", dy, op->in[1], dim_of(c, x, rank_of(c, x) - 1)));
}

static int bw_scatter_add(plan_ad_ctx *c, const plan_op *op, int dy) {
  int in[2] = {dy, op->in[1]};
  return give(c, op, 0, plan_ad_op(c, PLAN_OP_GATHER, "dsrc", NULL, in, 2));
}

/* moe_dispatch of tokens t with routing (idx, w) into slots s, for the
 * adjoints below; w < 0: unweighted. */
static int moe_to_slots(plan_ad_ctx *c, const char *part, int t, int idx, int w,
                        int64_t experts, int64_t capacity) {
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_ad_attrs(PLAN_OP_MOE_DISPATCH, a);
  a[0].i = experts;
  a[0].present = true;
  a[1].i = capacity;
  a[1].present = true;
  int in[3] = {t, idx, w};
  return plan_ad_op(c, PLAN_OP_MOE_DISPATCH, part, a, in, w < 0 ? 2 : 3);
}

static int moe_from_slots(plan_ad_ctx *c, const char *part, int s, int idx,
                          int w) {
  int in[3] = {s, idx, w};
  return plan_ad_op(c, PLAN_OP_MOE_COMBINE, part, NULL, in, w < 0 ? 2 : 3);
}

static int moe_wgrad(plan_ad_ctx *c, const char *part, int a, int b, int idx) {
  int in[3] = {a, b, idx};
  return plan_ad_op(c, PLAN_OP_MOE_WEIGHTS_GRAD, part, NULL, in, 3);
}

/* s = dispatch(x, idx, w): linear in x, so dx = combine(ds, idx, w), the
 * adjoint (each slot read back by the choice that filled it); and ds's
 * slot (g, t, j) is w[g, t, j] x[g, t], so dw = weights_grad(x, ds). */
static int bw_moe_dispatch(plan_ad_ctx *c, const plan_op *op, int dy) {
  int w = op->nin > 2 ? op->in[2] : -1, rc;
  if (plan_ad_wants(c, op, 0) &&
      (rc = give(c, op, 0, moe_from_slots(c, "dx", dy, op->in[1], w))))
    return rc;
  if (w >= 0 && plan_ad_wants(c, op, 2))
    return give(c, op, 2, moe_wgrad(c, "dw", op->in[0], dy, op->in[1]));
  return PLAN_OK;
}

/* y = combine(s, idx, w): ds = dispatch(dy, idx, w) into s's experts and
 * capacity; dw = weights_grad(dy, s). */
static int bw_moe_combine(plan_ad_ctx *c, const plan_op *op, int dy) {
  int s = op->in[0], w = op->nin > 2 ? op->in[2] : -1, rc;
  if (plan_ad_wants(c, op, 0) &&
      (rc = give(c, op, 0,
                 moe_to_slots(c, "ds", dy, op->in[1], w, dim_of(c, s, 0),
                              dim_of(c, s, 2)))))
    return rc;
  if (w >= 0 && plan_ad_wants(c, op, 2))
    return give(c, op, 2, moe_wgrad(c, "dw", dy, s, op->in[1]));
  return PLAN_OK;
}

/* z = weights_grad(a, b): z[g, t, j] = a[g, t] . b[slot of (g, t, j)], so
 * da = combine(b, idx, dz) and db = dispatch(a, idx, dz). */
static int bw_moe_weights_grad(plan_ad_ctx *c, const plan_op *op, int dz) {
  int a = op->in[0], b = op->in[1], idx = op->in[2], rc;
  if (plan_ad_wants(c, op, 0) &&
      (rc = give(c, op, 0, moe_from_slots(c, "da", b, idx, dz))))
    return rc;
  if (plan_ad_wants(c, op, 1))
    return give(
        c, op, 1,
        moe_to_slots(c, "db", a, idx, dz, dim_of(c, b, 0), dim_of(c, b, 2)));
  return PLAN_OK;
}

/* ---- gradient ops -------------------------------------------------------- */

/* relu_grad, gelu_grad, silu_grad: z = a f'(x) elementwise, so
 * da = dz f'(x): the same op. */
static int bw_act_grad(plan_ad_ctx *c, const plan_op *op, int dz) {
  if (plan_ad_wants(c, op, 1))
    return second_order(c, op, 1);
  int in[2] = {dz, op->in[1]};
  return give(c, op, 0, plan_ad_op(c, op->kind, "da", same_attrs(op), in, 2));
}

/* layernorm_grad / rmsnorm_grad: z = J (w a), with J the Jacobian of the
 * plain norm at x, which is symmetric; so da = w (J dz) and dw = sum over
 * rows of a (J dz), where J dz is the same op with weight ones. */
static int bw_norm_grad(plan_ad_ctx *c, const plan_op *op, int dz) {
  if (plan_ad_wants(c, op, 1))
    return second_order(c, op, 1);
  int x = op->in[1], rc;
  int ones = norm_ones(c, x, "ones");
  int in[3] = {dz, x, ones};
  int jg =
      ones < 0 ? ones : plan_ad_op(c, op->kind, "jdz", same_attrs(op), in, 3);
  if (jg < 0)
    return jg;
  if (plan_ad_wants(c, op, 0) &&
      (rc =
           give(c, op, 0, plan_ad_binary(c, PLAN_OP_MUL, "da", jg, op->in[2]))))
    return rc;
  if (!plan_ad_wants(c, op, 2))
    return PLAN_OK;
  bool rows = rank_of(c, x) > 1;
  int g = plan_ad_binary(c, PLAN_OP_MUL, rows ? "dw.mul" : "dw", jg, op->in[0]);
  if (g >= 0)
    g = plan_ad_sum_rows(c, "dw", g);
  return give(c, op, 2, g);
}

/* embedding_grad sums rows by id; its adjoint gathers them: da =
 * embedding(dz, ids). */
static int bw_embedding_grad(plan_ad_ctx *c, const plan_op *op, int dz) {
  int in[2] = {dz, op->in[1]};
  return give(c, op, 0, plan_ad_op(c, PLAN_OP_EMBEDDING, "da", NULL, in, 2));
}

/* cross_entropy_grad: z = a G(logits) for the scalar a, so da = sum(dz G),
 * with G the same op at a = 1. */
static int bw_cross_entropy_grad(plan_ad_ctx *c, const plan_op *op, int dz) {
  if (plan_ad_wants(c, op, 1))
    return second_order(c, op, 1);
  int one = plan_ad_const(c, "one", NULL, 0, NULL, c->p->tensors[dz].dtype,
                          PLAN_RECIPE_ONES);
  int in[3] = {one, op->in[1], op->in[2]};
  int g = one < 0
              ? one
              : plan_ad_op(c, PLAN_OP_CROSS_ENTROPY_GRAD, "da.g", NULL, in, 3);
  if (g >= 0)
    g = plan_ad_binary(c, PLAN_OP_MUL, "da.mul", dz, g);
  int64_t all[PLAN_MAX_RANK];
  int r = g < 0 ? 0 : rank_of(c, g);
  for (int d = 0; d < r; d++)
    all[d] = d;
  if (g >= 0)
    g = plan_ad_reduce_sum(c, "da", g, all, r, false);
  return give(c, op, 0, g);
}

/* ---- dispatch ------------------------------------------------------------ */

int plan_ad_backward(plan_ad_ctx *c, const plan_op *op, const int *dy) {
  switch ((plan_op_kind)op->kind) {
  case PLAN_OP_MATMUL:
    return bw_matmul(c, op, dy[0]);
  case PLAN_OP_LINEAR:
    return bw_linear(c, op, dy[0]);
  case PLAN_OP_ADD:
    return bw_add_sub(c, op, dy[0], false);
  case PLAN_OP_SUB:
    return bw_add_sub(c, op, dy[0], true);
  case PLAN_OP_MUL:
    return bw_mul(c, op, dy[0]);
  case PLAN_OP_DIV:
    return bw_div(c, op, dy[0]);
  case PLAN_OP_SCALE:
    return give(c, op, 0, plan_ad_scale(c, "dx", dy[0], attr_f(op, 0)));
  case PLAN_OP_RELU:
    return bw_act(c, op, dy[0], PLAN_OP_RELU_GRAD);
  case PLAN_OP_GELU:
    return bw_act(c, op, dy[0], PLAN_OP_GELU_GRAD);
  case PLAN_OP_SILU:
    return bw_act(c, op, dy[0], PLAN_OP_SILU_GRAD);
  case PLAN_OP_TANH:
    return bw_tanh(c, op, dy[0]);
  case PLAN_OP_EXP:
    /* y = exp x: dx = dy y */
    return give(c, op, 0,
                plan_ad_binary(c, PLAN_OP_MUL, "dx", dy[0], op->out[0]));
  case PLAN_OP_SOFTMAX:
    return bw_softmax(c, op, dy[0]);
  case PLAN_OP_LAYERNORM:
    return bw_norm(c, op, dy[0], PLAN_OP_LAYERNORM_GRAD);
  case PLAN_OP_RMSNORM:
    return bw_norm(c, op, dy[0], PLAN_OP_RMSNORM_GRAD);
  case PLAN_OP_EMBEDDING:
    return bw_embedding(c, op, dy[0]);
  case PLAN_OP_TRANSPOSE:
  case PLAN_OP_PERMUTE:
    return bw_permute(c, op, dy[0]);
  case PLAN_OP_RESHAPE:
    return bw_reshape(c, op, dy[0]);
  case PLAN_OP_REDUCE_SUM:
  case PLAN_OP_REDUCE_MEAN:
    return bw_reduce(c, op, dy[0]);
  case PLAN_OP_SPLIT:
    return bw_split(c, op, dy);
  case PLAN_OP_CONCAT:
    return bw_concat(c, op, dy[0]);
  case PLAN_OP_CROSS_ENTROPY:
    return bw_cross_entropy(c, op, dy[0]);
  case PLAN_OP_EXPAND:
    return bw_expand(c, op, dy[0]);
  case PLAN_OP_RELU_GRAD:
  case PLAN_OP_GELU_GRAD:
  case PLAN_OP_SILU_GRAD:
    return bw_act_grad(c, op, dy[0]);
  case PLAN_OP_LAYERNORM_GRAD:
  case PLAN_OP_RMSNORM_GRAD:
    return bw_norm_grad(c, op, dy[0]);
  case PLAN_OP_EMBEDDING_GRAD:
    return bw_embedding_grad(c, op, dy[0]);
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    return bw_cross_entropy_grad(c, op, dy[0]);
  case PLAN_OP_WHERE:
    return bw_where(c, op, dy[0]);
  case PLAN_OP_REPEAT_INTERLEAVE:
    return bw_repeat_interleave(c, op, dy[0]);
  case PLAN_OP_TOPK:
    return bw_topk(c, op, dy);
  case PLAN_OP_GATHER:
    return bw_gather(c, op, dy[0]);
  case PLAN_OP_SCATTER_ADD:
    return bw_scatter_add(c, op, dy[0]);
  case PLAN_OP_MOE_DISPATCH:
    return bw_moe_dispatch(c, op, dy[0]);
  case PLAN_OP_MOE_COMBINE:
    return bw_moe_combine(c, op, dy[0]);
  case PLAN_OP_MOE_WEIGHTS_GRAD:
    return bw_moe_weights_grad(c, op, dy[0]);
  case PLAN_OP_SIGMOID:
    return bw_sigmoid(c, op, dy[0]);
  case PLAN_OP_RSQRT:
    return bw_rsqrt(c, op, dy[0]);
  case PLAN_OP_ADD_SCALAR:
    /* y = x + c: dx = dy */
    return give(c, op, 0, dy[0]);
  case PLAN_OP_ATTENTION:
    return plan_ad_bw_attention(c, op, dy[0]);
  case PLAN_OP_COUNT:
    break;
  }
  return plan_ad_fail(c, "no backward rule for op kind %d", op->kind);
}
