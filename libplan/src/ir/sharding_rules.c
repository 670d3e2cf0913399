/* Building the factor-based sharding rule of one op instance (Shardy
 * style): which factors the op has, their kind
 * (free, reduction, need-replication, masked) and which dim of every operand
 * carries which factor. plan_rule_infer_out / plan_rule_check (sharding.c)
 * then judge placements against the rule without knowing the op.
 *
 * The rule is built from the shapes inference gives, so plan_op_rule first
 * re-runs the op's inference: a rule is never built over shapes the op
 * rejects, and outs given by the caller must match what the op infers. */
#include "ir/ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SHAPE_STRLEN PLAN_DIMS_STRLEN

/* "[4, 6]" for messages. */
static const char *fmt_shape(const plan_shape *s, char *buf) {
  return plan_format_dims(s->dims, s->rank, buf);
}

/* Operand indices: inputs 0..nin-1, then outputs. */
#define OUT(r, o) ((r)->nin + (o))

/* A new factor; -1 when the rule is full (cannot happen with the op set's
 * limits, checked anyway so a new op cannot overrun the array). */
static int factor(plan_rule *r, int64_t size, plan_factor_kind kind,
                  const char *name, int idx) {
  if (r->nfactors >= PLAN_RULE_MAX_FACTORS)
    return -1;
  plan_factor *f = &r->factors[r->nfactors];
  memset(f, 0, sizeof *f);
  f->size = size;
  f->kind = (uint8_t)kind;
  f->reduce = PLAN_RED_SUM;
  /* name (at most 4 chars) then idx (0..99): fits name[8]. */
  size_t n = strlen(name);
  if (n > 4)
    n = 4;
  memcpy(f->name, name, n);
  if (idx >= 10)
    f->name[n++] = (char)('0' + idx / 10 % 10);
  if (idx >= 0)
    f->name[n++] = (char)('0' + idx % 10);
  f->name[n] = '\0';
  return r->nfactors++;
}

/* Appends factor f to the factors of operand dim (major to minor). */
static void carry(plan_rule *r, int opnd, int dim, int f) {
  plan_rule_operand *o = &r->operand[opnd];
  if (f >= 0 && o->nf[dim] < PLAN_RULE_MAX_COMPOUND)
    o->f[dim][o->nf[dim]++] = (int8_t)f;
}

/* Broadcast factors: output dim j (of rank ro) gets a fresh factor that each
 * input carries on its right-aligned dim unless that dim is a size-1
 * broadcast (nf 0: a size-1 dim cannot be sharded to match the output). */
static void broadcast_dims(plan_rule *r, const plan_shape *in, int nin,
                           const int *ranks, int ro, const int64_t *odims,
                           int opnd_out, int out_off, const char *name) {
  for (int j = 0; j < ro; j++) {
    int f = factor(r, odims[j], PLAN_FACTOR_FREE, name, j);
    carry(r, opnd_out, out_off + j, f);
    for (int i = 0; i < nin; i++) {
      int ji = j - (ro - ranks[i]);
      if (ji >= 0 && in[i].dims[ji] == odims[j])
        carry(r, i, ji, f);
    }
  }
}

static int rule_matmul(plan_rule *r, const plan_shape *in,
                       const plan_shape *out, const plan_attr_val *attrs) {
  bool ta = attrs ? attrs[0].b : false, tb = attrs ? attrs[1].b : false;
  int ra = in[0].rank, rb = in[1].rank, nb = out->rank - 2;
  int ranks[2] = {ra - 2, rb - 2};
  broadcast_dims(r, in, 2, ranks, nb, out->dims, OUT(r, 0), 0, "b");
  int m = factor(r, out->dims[nb], PLAN_FACTOR_FREE, "m", -1);
  int k = factor(r, in[0].dims[ta ? ra - 2 : ra - 1], PLAN_FACTOR_REDUCTION,
                 "k", -1);
  int n = factor(r, out->dims[nb + 1], PLAN_FACTOR_FREE, "n", -1);
  carry(r, 0, ta ? ra - 1 : ra - 2, m);
  carry(r, 0, ta ? ra - 2 : ra - 1, k);
  carry(r, 1, tb ? rb - 1 : rb - 2, k);
  carry(r, 1, tb ? rb - 2 : rb - 1, n);
  carry(r, OUT(r, 0), nb, m);
  carry(r, OUT(r, 0), nb + 1, n);
  return PLAN_OK;
}

static int rule_linear(plan_rule *r, const plan_shape *in, int nin) {
  int rx = in[0].rank;
  for (int d = 0; d < rx - 1; d++) {
    int b = factor(r, in[0].dims[d], PLAN_FACTOR_FREE, "b", d);
    carry(r, 0, d, b);
    carry(r, OUT(r, 0), d, b);
  }
  int k = factor(r, in[0].dims[rx - 1], PLAN_FACTOR_REDUCTION, "k", -1);
  int n = factor(r, in[1].dims[0], PLAN_FACTOR_FREE, "n", -1);
  carry(r, 0, rx - 1, k);
  carry(r, 1, 1, k);
  carry(r, 1, 0, n);
  carry(r, OUT(r, 0), rx - 1, n);
  if (nin == 3) {
    carry(r, 2, 0, n);
    /* The bias is added after the k reduction: with k sharded it must come
     * in as P(sum) or every rank adds it. */
    r->operand[2].additive = true;
  }
  return PLAN_OK;
}

/* One factor per dim of a same-shape op, carried by input 0 and output 0;
 * `special` (>= 0) is the dim whose factor has kind `kind` instead of free. */
static void same_shape(plan_rule *r, const plan_shape *x, int special,
                       plan_factor_kind kind) {
  for (int d = 0; d < x->rank; d++) {
    int f =
        factor(r, x->dims[d], d == special ? kind : PLAN_FACTOR_FREE, "d", d);
    carry(r, 0, d, f);
    carry(r, OUT(r, 0), d, f);
  }
}

static int rule_norm(plan_rule *r, const plan_shape *in, int nin) {
  int rx = in[0].rank;
  same_shape(r, &in[0], rx - 1, PLAN_FACTOR_NEED_REPLICATION);
  /* weight and bias carry only the normalised dim (its factor is the last
   * one same_shape made). */
  for (int i = 1; i < nin; i++)
    carry(r, i, 0, r->nfactors - 1);
  return PLAN_OK;
}

static int rule_embedding(plan_rule *r, const plan_shape *in) {
  int rb = in[1].rank;
  /* A row-sharded table leaves each rank the rows it owns and zeros for the
   * ids it does not: a masked partial sum (DTensor's _MaskPartial). */
  int v = factor(r, in[0].dims[0], PLAN_FACTOR_MASKED, "v", -1);
  carry(r, 0, 0, v);
  for (int d = 0; d < rb; d++) {
    int b = factor(r, in[1].dims[d], PLAN_FACTOR_FREE, "b", d);
    carry(r, 1, d, b);
    carry(r, OUT(r, 0), d, b);
  }
  int dd = factor(r, in[0].dims[1], PLAN_FACTOR_FREE, "d", -1);
  carry(r, 0, 1, dd);
  carry(r, OUT(r, 0), rb, dd);
  return PLAN_OK;
}

/* perm[j]: the input dim that output dim j comes from. */
static int rule_permute(plan_rule *r, const plan_shape *x, const int *perm) {
  int fs[PLAN_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    fs[d] = factor(r, x->dims[d], PLAN_FACTOR_FREE, "d", d);
    carry(r, 0, d, fs[d]);
  }
  for (int j = 0; j < x->rank; j++)
    carry(r, OUT(r, 0), j, fs[perm[j]]);
  return PLAN_OK;
}

static int norm_dim(int64_t d, int rank) {
  return (int)(d < 0 ? d + rank : d);
}

/* Reshape: both shapes split into the smallest contiguous groups of equal
 * product (size-1 dims left out: each gets its own need-replication factor,
 * since sharding a size-1 dim leaves all data on one rank, which the other
 * side cannot express). A group of one dim on each side is one free factor;
 * one input dim split into several output dims is compound of the output
 * dims' factors (major to minor), and the merge is the mirror case; any other
 * group ([6, 4] -> [4, 6]) moves elements across dims and is one
 * need-replication factor on all its dims. */
static int rule_reshape(plan_rule *r, const plan_shape *x,
                        const plan_shape *y) {
  const plan_shape *sh[2] = {x, y};
  int opnd[2] = {0, OUT(r, 0)};
  bool zero = false;
  for (int s = 0; s < 2; s++)
    for (int d = 0; d < sh[s]->rank; d++)
      zero = zero || sh[s]->dims[d] == 0;
  if (zero) {
    /* Empty tensors: no products to group by; nothing worth sharding. */
    int f = factor(r, 0, PLAN_FACTOR_NEED_REPLICATION, "r", 0);
    for (int s = 0; s < 2; s++)
      for (int d = 0; d < sh[s]->rank; d++)
        carry(r, opnd[s], d, f);
    return PLAN_OK;
  }
  int idx[2][PLAN_MAX_RANK], cnt[2] = {0, 0};
  for (int s = 0; s < 2; s++)
    for (int d = 0; d < sh[s]->rank; d++) {
      if (sh[s]->dims[d] == 1)
        carry(r, opnd[s], d,
              factor(r, 1, PLAN_FACTOR_NEED_REPLICATION, "r", r->nfactors));
      else
        idx[s][cnt[s]++] = d;
    }
  int i = 0, j = 0;
  while (i < cnt[0] && j < cnt[1]) {
    int i0 = i, j0 = j;
    int64_t pa = x->dims[idx[0][i]], pb = y->dims[idx[1][j]];
    /* Products only grow (every dim > 1) and both totals are equal, so the
     * walk closes a group before running off either list. */
    while (pa != pb) {
      if (pa < pb && i + 1 < cnt[0])
        pa *= x->dims[idx[0][++i]];
      else if (pb < pa && j + 1 < cnt[1])
        pb *= y->dims[idx[1][++j]];
      else
        return PLAN_EINVALID;
    }
    int ni = i - i0 + 1, nj = j - j0 + 1;
    if (ni == 1 && nj == 1) {
      int f = factor(r, pa, PLAN_FACTOR_FREE, "r", r->nfactors);
      carry(r, 0, idx[0][i0], f);
      carry(r, OUT(r, 0), idx[1][j0], f);
    } else if ((ni == 1 || nj == 1) &&
               (ni > nj ? ni : nj) <= PLAN_RULE_MAX_COMPOUND) {
      /* Split (ni 1) or merge (nj 1): the single dim is compound. A dim
       * made of more parts than PLAN_RULE_MAX_COMPOUND falls to the
       * need-replication case below. */
      int s_many = ni == 1 ? 1 : 0, s_one = 1 - s_many;
      int first = s_many ? j0 : i0, n_many = s_many ? nj : ni;
      int one_dim = idx[s_one][s_one ? j0 : i0];
      for (int t = 0; t < n_many; t++) {
        int d = idx[s_many][first + t];
        int f =
            factor(r, sh[s_many]->dims[d], PLAN_FACTOR_FREE, "r", r->nfactors);
        carry(r, opnd[s_many], d, f);
        carry(r, opnd[s_one], one_dim, f);
      }
    } else {
      int f = factor(r, pa, PLAN_FACTOR_NEED_REPLICATION, "r", r->nfactors);
      for (int t = i0; t <= i; t++)
        carry(r, 0, idx[0][t], f);
      for (int t = j0; t <= j; t++)
        carry(r, OUT(r, 0), idx[1][t], f);
    }
    i++;
    j++;
  }
  return i == cnt[0] && j == cnt[1] ? PLAN_OK : PLAN_EINVALID;
}

static int rule_reduce(plan_rule *r, const plan_shape *x,
                       const plan_attr_val *attrs, bool mean) {
  bool red[PLAN_MAX_RANK] = {false};
  for (int t = 0; attrs && t < attrs[0].nints; t++)
    red[norm_dim(attrs[0].ints[t], x->rank)] = true;
  bool keep = attrs ? attrs[1].b : false;
  int od = 0;
  for (int d = 0; d < x->rank; d++) {
    if (red[d]) {
      int f = factor(r, x->dims[d], PLAN_FACTOR_REDUCTION, "d", d);
      /* A sharded mean is local sum / global count, a P(sum); local means
       * averaged (P(avg)) are right only when every shard is as large. */
      if (f >= 0)
        r->factors[f].avg_if_even = mean;
      carry(r, 0, d, f);
      if (keep)
        od++; /* the kept size-1 dim carries nothing: nf 0 */
    } else {
      int f = factor(r, x->dims[d], PLAN_FACTOR_FREE, "d", d);
      carry(r, 0, d, f);
      carry(r, OUT(r, 0), od++, f);
    }
  }
  return PLAN_OK;
}

/* split and concat: the fused dim is need-replication on every operand
 * (each with its own factor, sized like its dim: sharding the fused dim and
 * then splitting would hand each rank a mix of parts, the fused-QKV bug);
 * every other dim is one free factor shared by all operands. */
static int rule_fused(plan_rule *r, const plan_shape *x, int dim) {
  int nops = r->nin + r->nout;
  for (int d = 0; d < x->rank; d++) {
    if (d == dim)
      continue;
    int f = factor(r, x->dims[d], PLAN_FACTOR_FREE, "d", d);
    for (int o = 0; o < nops; o++)
      carry(r, o, d, f);
  }
  return PLAN_OK;
}

static int rule_cross_entropy(plan_rule *r, const plan_shape *in) {
  int rl = in[0].rank;
  /* The loss is a mean over every sample: each batch factor is a reduction
   * (P(sum) of per-sample loss / global count). */
  for (int d = 0; d < rl - 1; d++) {
    int b = factor(r, in[0].dims[d], PLAN_FACTOR_REDUCTION, "b", d);
    carry(r, 0, d, b);
    carry(r, 1, d, b);
  }
  /* The classes may be split (the vocab-parallel loss): the op then
   * all-reduces each sample's max, sum of exponentials and label logit
   * along the axes that split them, and the loss is whole there. */
  int c = factor(r, in[0].dims[rl - 1], PLAN_FACTOR_COLLECTIVE, "c", -1);
  carry(r, 0, rl - 1, c);
  return PLAN_OK;
}

/* expand: an output dim the input has at the same size shares its free
 * factor; a broadcast dim (input size 1, or absent) gets a factor of its
 * own that only the output carries (free: sharding the result of a
 * broadcast is a slice of copies), and the input's size-1 dim carries
 * nothing. */
static int rule_expand(plan_rule *r, const plan_shape *x, const plan_shape *y) {
  for (int j = 0; j < y->rank; j++) {
    int ji = j - (y->rank - x->rank);
    int f = factor(r, y->dims[j], PLAN_FACTOR_FREE, "d", j);
    carry(r, OUT(r, 0), j, f);
    if (ji >= 0 && x->dims[ji] == y->dims[j])
      carry(r, 0, ji, f);
  }
  return PLAN_OK;
}

/* repeat_interleave along dim: the input's n becomes the output's compound
 * [n, r], n major (output slice j is input slice j / r), so sharding the
 * input dim shards the output's the same way, as reshape's merge does, when
 * n divides into the shards (compound_check); r is the output's alone and,
 * being minor, never sharded. Every other dim is one free factor. With r 1
 * the output dim is the input's: plain, uneven shards allowed. (Tiling,
 * torch's repeat, would make r major and leave n unshardable.) */
static int rule_repeat_interleave(plan_rule *r, const plan_shape *x,
                                  const plan_attr_val *attrs) {
  int dim = norm_dim(attrs[1].i, x->rank);
  int64_t rep = attrs[0].i;
  for (int d = 0; d < x->rank; d++) {
    int f = factor(r, x->dims[d], PLAN_FACTOR_FREE, "d", d);
    carry(r, 0, d, f);
    carry(r, OUT(r, 0), d, f);
    if (d == dim && rep != 1)
      carry(r, OUT(r, 0), d, factor(r, rep, PLAN_FACTOR_FREE, "rep", -1));
  }
  return PLAN_OK;
}

/* topk over the last dim: the leading dims free, the last whole on the
 * input (n) and the output (k), both need-replication. */
static int rule_topk(plan_rule *r, const plan_shape *x, const plan_shape *y) {
  int rx = x->rank;
  for (int d = 0; d < rx - 1; d++) {
    int b = factor(r, x->dims[d], PLAN_FACTOR_FREE, "b", d);
    carry(r, 0, d, b);
    carry(r, OUT(r, 0), d, b);
    carry(r, OUT(r, 1), d, b);
  }
  int n = factor(r, x->dims[rx - 1], PLAN_FACTOR_NEED_REPLICATION, "n", -1);
  int k = factor(r, y->dims[rx - 1], PLAN_FACTOR_NEED_REPLICATION, "k", -1);
  carry(r, 0, rx - 1, n);
  carry(r, OUT(r, 0), rx - 1, k);
  carry(r, OUT(r, 1), rx - 1, k);
  return PLAN_OK;
}

/* gather (x [.., n], idx [.., k] -> [.., k]) and scatter_add (src [.., k],
 * idx [.., k] -> [.., n]): the leading dims free. gather's n is masked, as
 * embedding's vocabulary: a rank holding part of x's last dim reads the
 * indices it holds and gives 0 for the others, a P(sum) partial; its k is
 * free. scatter_add's k is a reduction (a rank scattering part of the
 * choices gives a partial sum) and its n is the result's alone (carried
 * by no input, so the result is whole along it; the kernel would fill a
 * block from the global indices, as embedding_grad's). */
static int rule_gather_scatter(plan_rule *r, int kind, const plan_shape *in,
                               const plan_shape *y) {
  bool gather = kind == PLAN_OP_GATHER;
  int rk = in[1].rank;
  for (int d = 0; d < rk - 1; d++) {
    int b = factor(r, in[1].dims[d], PLAN_FACTOR_FREE, "b", d);
    carry(r, 0, d, b);
    carry(r, 1, d, b);
    carry(r, OUT(r, 0), d, b);
  }
  int k = factor(r, in[1].dims[rk - 1],
                 gather ? PLAN_FACTOR_FREE : PLAN_FACTOR_REDUCTION, "k", -1);
  int n = gather ? factor(r, in[0].dims[rk - 1], PLAN_FACTOR_MASKED, "n", -1)
                 : factor(r, y->dims[rk - 1], PLAN_FACTOR_FREE, "n", -1);
  carry(r, 1, rk - 1, k);
  carry(r, gather ? OUT(r, 0) : 0, rk - 1, k);
  carry(r, gather ? 0 : OUT(r, 0), rk - 1, n);
  return PLAN_OK;
}

/* The mixture-of-experts ops over [g, t, h] tokens, [g, t, k] routing and
 * [e, g, c, h] expert slots. The groups g are free everywhere (a group's
 * slots depend on its tokens alone); a slot's position depends on every
 * earlier token of its group, so t, k and c are whole (need-replication);
 * h is free, except in moe_weights_grad, whose dot products reduce it. The
 * experts e are moe_dispatch's result's alone (whole there, like
 * scatter_add's n) and a reduction where slots are read (moe_combine,
 * moe_weights_grad: a rank holding some experts adds their part). Under
 * expert parallelism the groups and the experts are sharded on one axis:
 * dispatch gives slots S(g), the experts' matmuls want S(e), and moving
 * the slots between the two dims is the all-to-all, there and back. */
static int rule_moe(plan_rule *r, int kind, const plan_shape *in, int nin,
                    const plan_shape *y) {
  bool dispatch = kind == PLAN_OP_MOE_DISPATCH;
  bool wgrad = kind == PLAN_OP_MOE_WEIGHTS_GRAD;
  /* the operands: tokens [g, t, h] (x, or a / dout), slots [e, g, c, h],
   * routing idx (and w) [g, t, k] */
  int tok = dispatch ? 0 : wgrad ? 0 : OUT(r, 0);
  int slots = dispatch ? OUT(r, 0) : wgrad ? 1 : 0;
  int ridx = wgrad ? 2 : 1;
  const plan_shape *ts = dispatch || wgrad ? &in[0] : y;
  const plan_shape *ss = dispatch ? y : wgrad ? &in[1] : &in[0];
  int e = factor(r, ss->dims[0],
                 dispatch ? PLAN_FACTOR_FREE : PLAN_FACTOR_REDUCTION, "e", -1);
  int g = factor(r, ts->dims[0], PLAN_FACTOR_FREE, "g", -1);
  int t = factor(r, ts->dims[1], PLAN_FACTOR_NEED_REPLICATION, "t", -1);
  int k = factor(r, in[ridx].dims[2], PLAN_FACTOR_NEED_REPLICATION, "k", -1);
  int c = factor(r, ss->dims[2], PLAN_FACTOR_NEED_REPLICATION, "c", -1);
  int h = factor(r, ts->dims[2],
                 wgrad ? PLAN_FACTOR_REDUCTION : PLAN_FACTOR_FREE, "h", -1);
  carry(r, tok, 0, g);
  carry(r, tok, 1, t);
  carry(r, tok, 2, h);
  carry(r, slots, 0, e);
  carry(r, slots, 1, g);
  carry(r, slots, 2, c);
  carry(r, slots, 3, h);
  for (int i = ridx; i < nin; i++) { /* idx, and w when given */
    carry(r, i, 0, g);
    carry(r, i, 1, t);
    carry(r, i, 2, k);
  }
  if (wgrad) {
    carry(r, OUT(r, 0), 0, g);
    carry(r, OUT(r, 0), 1, t);
    carry(r, OUT(r, 0), 2, k);
  }
  return PLAN_OK;
}

/* Gradient ops shaped like their forward: the factors of input 0 and the
 * output (made by same_shape) are carried by input `also` dim for dim. */
static void carry_like_first(plan_rule *r, int first_factor, int also,
                             int rank) {
  for (int d = 0; d < rank; d++)
    carry(r, also, d, first_factor + d);
}

/* embedding_grad: dy [b.., d] x ids [b..] -> [v, d]. Rows of every sample
 * are summed into the table: the b factors are reductions (P(sum)); v is the
 * output's alone (free, never sharded by the inputs). */
static int rule_embedding_grad(plan_rule *r, const plan_shape *in,
                               const plan_shape *y) {
  int rb = in[1].rank;
  for (int d = 0; d < rb; d++) {
    int b = factor(r, in[1].dims[d], PLAN_FACTOR_REDUCTION, "b", d);
    carry(r, 0, d, b);
    carry(r, 1, d, b);
  }
  int v = factor(r, y->dims[0], PLAN_FACTOR_FREE, "v", -1);
  int dd = factor(r, y->dims[1], PLAN_FACTOR_FREE, "d", -1);
  carry(r, OUT(r, 0), 0, v);
  carry(r, 0, rb, dd);
  carry(r, OUT(r, 0), 1, dd);
  return PLAN_OK;
}

/* cross_entropy_grad: dy [] x logits [b.., c] x labels [b..] -> [b.., c]:
 * each sample's row on its own (b free, the divisor is the global count),
 * the classes collective; the scalar dy carries nothing. */
static int rule_cross_entropy_grad(plan_rule *r, const plan_shape *in) {
  int rl = in[1].rank;
  for (int d = 0; d < rl - 1; d++) {
    int b = factor(r, in[1].dims[d], PLAN_FACTOR_FREE, "b", d);
    carry(r, 1, d, b);
    carry(r, 2, d, b);
    carry(r, OUT(r, 0), d, b);
  }
  /* split classes: each sample's max and sum of exponentials all-reduced
   * along the axes that split them; the gradient split as the logits */
  int c = factor(r, in[1].dims[rl - 1], PLAN_FACTOR_COLLECTIVE, "c", -1);
  carry(r, 1, rl - 1, c);
  carry(r, OUT(r, 0), rl - 1, c);
  return PLAN_OK;
}

/* attention: q [b, h, s, d], k [b, hk, sk, d], v [b, hk, sk, dv] [, mask]
 * -> [b, h, s, dv]. The batch b, the heads and the query sequence s are
 * free: each (sample, head, query) row of the result reads its own q row
 * and the whole k and v of its head, so a rank holding some queries needs
 * every key (context parallelism: k and v replicated along that axis; a
 * causal mask reads the queries' global positions). The query heads are
 * the compound [hk, g], the kv heads major (as repeat_interleave of k and
 * v gives), so sharding them shards k's and v's heads the same way; with
 * one kv head only g (k and v then whole). The keys sk and the dim d are
 * need-replication (the softmax and the dot products read them whole); v's
 * dim dv is free. The mask carries the factor of each dim it does not
 * broadcast. */
static int rule_attention(plan_rule *r, const plan_shape *in, int nin) {
  const plan_shape *q = &in[0], *k = &in[1];
  int y = OUT(r, 0);
  int64_t g = k->dims[1] ? q->dims[1] / k->dims[1] : 1;
  int b = factor(r, q->dims[0], PLAN_FACTOR_FREE, "b", -1);
  int hk = k->dims[1] != 1
               ? factor(r, k->dims[1], PLAN_FACTOR_FREE, "hk", -1)
               : factor(r, 1, PLAN_FACTOR_NEED_REPLICATION, "hk", -1);
  int hg = g != 1 ? factor(r, g, PLAN_FACTOR_FREE, "g", -1) : -1;
  int s = factor(r, q->dims[2], PLAN_FACTOR_FREE, "s", -1);
  int sk = factor(r, k->dims[2], PLAN_FACTOR_NEED_REPLICATION, "sk", -1);
  int d = factor(r, q->dims[3], PLAN_FACTOR_NEED_REPLICATION, "d", -1);
  int dv = factor(r, in[2].dims[3], PLAN_FACTOR_FREE, "dv", -1);
  for (int o = 0; o < 3; o++)
    carry(r, o, 0, b);
  carry(r, y, 0, b);
  for (int o = 1; o < 3; o++) {
    carry(r, o, 1, hk);
    carry(r, o, 2, sk);
  }
  /* q, the result and a per-head mask: the compound heads, s */
  int qlike[2] = {0, y};
  for (int t = 0; t < 2; t++) {
    if (k->dims[1] != 1)
      carry(r, qlike[t], 1, hk);
    carry(r, qlike[t], 1, hg);
    carry(r, qlike[t], 2, s);
  }
  carry(r, 0, 3, d);
  carry(r, 1, 3, d);
  carry(r, 2, 3, dv);
  carry(r, y, 3, dv);
  if (nin == 4) {
    const plan_shape *m = &in[3];
    int64_t full[4] = {q->dims[0], q->dims[1], q->dims[2], k->dims[2]};
    for (int md = 0; md < m->rank; md++) {
      int fd = 4 - m->rank + md;
      if (m->dims[md] != full[fd])
        continue; /* broadcast: carries nothing */
      if (fd == 0)
        carry(r, 3, md, b);
      else if (fd == 1) {
        if (k->dims[1] != 1)
          carry(r, 3, md, hk);
        carry(r, 3, md, hg);
      } else
        carry(r, 3, md, fd == 2 ? s : sk);
    }
  }
  return PLAN_OK;
}

/* The op's output shapes by inference, checked against the caller's
 * `outs` when it gives them. */
static int infer_outputs(const plan_op_info *info, const plan_shape *in,
                         int nin, const plan_shape *outs, int nout,
                         const plan_attr_val *attrs, plan_shape *inferred,
                         char *err, size_t errsz) {
  int rc = info->infer(in, nin, attrs, inferred, nout, err, errsz);
  if (rc)
    return rc;
  for (int o = 0; outs && o < nout; o++) {
    bool same = outs[o].rank == inferred[o].rank;
    for (int d = 0; same && d < inferred[o].rank; d++)
      same = outs[o].dims[d] == inferred[o].dims[d];
    if (!same) {
      char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
      return plan_errf(err, errsz, "%s: output %d is %s but the op gives %s",
                       info->name, o, fmt_shape(&outs[o], a),
                       fmt_shape(&inferred[o], b));
    }
  }
  return PLAN_OK;
}

/* transpose: a permutation swapping two dims (the last two by default). */
static int rule_transpose(plan_rule *r, const plan_shape *x,
                          const plan_attr_val *attrs) {
  int perm[PLAN_MAX_RANK];
  int rk = x->rank, d0 = rk - 2, d1 = rk - 1;
  if (attrs && (attrs[0].present || attrs[0].nints > 0)) {
    d0 = norm_dim(attrs[0].ints[0], rk);
    d1 = norm_dim(attrs[0].ints[1], rk);
  }
  for (int d = 0; d < rk; d++)
    perm[d] = d;
  perm[d0] = d1;
  perm[d1] = d0;
  return rule_permute(r, x, perm);
}

/* split and concat (see rule_fused): the fused dim of every input and
 * output carries its own need-replication factor. */
static int rule_split_concat(plan_rule *r, const plan_shape *in, int nin,
                             const plan_shape *outs, int nout,
                             const plan_attr_val *attrs) {
  const plan_shape *y = &outs[0];
  int fused = norm_dim(attrs ? attrs[0].i : -1, y->rank);
  int rc = rule_fused(r, y, fused);
  for (int o = 0; o < nin + nout; o++) {
    const plan_shape *s = o < nin ? &in[o] : &outs[o - nin];
    carry(r, o, fused,
          factor(r, s->dims[fused], PLAN_FACTOR_NEED_REPLICATION, "f", o));
  }
  return rc;
}

/* The factors of an op of `kind` over its input and (inferred) output
 * shapes, by op family. */
static int rule_of_kind(plan_rule *out, int kind, const plan_shape *in, int nin,
                        const plan_shape *inferred, int nout,
                        const plan_attr_val *attrs) {
  int rc = PLAN_OK;
  const plan_shape *y = &inferred[0];
  int perm[PLAN_MAX_RANK];
  switch ((plan_op_kind)kind) {
  case PLAN_OP_MATMUL:
    rc = rule_matmul(out, in, y, attrs);
    break;
  case PLAN_OP_LINEAR:
    rc = rule_linear(out, in, nin);
    break;
  case PLAN_OP_ADD:
  case PLAN_OP_SUB:
  case PLAN_OP_MUL:
  case PLAN_OP_DIV: {
    int ranks[2] = {in[0].rank, in[1].rank};
    broadcast_dims(out, in, 2, ranks, y->rank, y->dims, OUT(out, 0), 0, "d");
    break;
  }
  case PLAN_OP_SCALE:
  case PLAN_OP_RELU:
  case PLAN_OP_GELU:
  case PLAN_OP_SILU:
  case PLAN_OP_TANH:
  case PLAN_OP_EXP:
  case PLAN_OP_SIGMOID:
  case PLAN_OP_RSQRT:
  case PLAN_OP_ADD_SCALAR:
    same_shape(out, &in[0], -1, PLAN_FACTOR_FREE);
    break;
  case PLAN_OP_SOFTMAX:
    same_shape(out, &in[0], norm_dim(attrs ? attrs[0].i : -1, in[0].rank),
               PLAN_FACTOR_NEED_REPLICATION);
    break;
  case PLAN_OP_LAYERNORM:
  case PLAN_OP_RMSNORM:
    rc = rule_norm(out, in, nin);
    break;
  case PLAN_OP_EMBEDDING:
    rc = rule_embedding(out, in);
    break;
  case PLAN_OP_TRANSPOSE:
    rc = rule_transpose(out, &in[0], attrs);
    break;
  case PLAN_OP_PERMUTE:
    for (int d = 0; d < in[0].rank; d++)
      perm[d] = norm_dim(attrs[0].ints[d], in[0].rank);
    rc = rule_permute(out, &in[0], perm);
    break;
  case PLAN_OP_RESHAPE:
    rc = rule_reshape(out, &in[0], y);
    break;
  case PLAN_OP_REDUCE_SUM:
  case PLAN_OP_REDUCE_MEAN:
    rc = rule_reduce(out, &in[0], attrs, kind == PLAN_OP_REDUCE_MEAN);
    break;
  case PLAN_OP_SPLIT:
  case PLAN_OP_CONCAT:
    rc = rule_split_concat(out, in, nin, inferred, nout, attrs);
    break;
  case PLAN_OP_CROSS_ENTROPY:
    rc = rule_cross_entropy(out, in);
    break;
  case PLAN_OP_EXPAND:
    rc = rule_expand(out, &in[0], y);
    break;
  case PLAN_OP_RELU_GRAD:
  case PLAN_OP_GELU_GRAD:
  case PLAN_OP_SILU_GRAD: {
    /* elementwise: dy, x and dx share every factor */
    int first = out->nfactors;
    same_shape(out, &in[0], -1, PLAN_FACTOR_FREE);
    carry_like_first(out, first, 1, in[1].rank);
    break;
  }
  case PLAN_OP_LAYERNORM_GRAD:
  case PLAN_OP_RMSNORM_GRAD: {
    /* as the norm: the normalised dim whole on dy, x and dx; w carries it */
    int first = out->nfactors, rx = in[0].rank;
    same_shape(out, &in[0], rx - 1, PLAN_FACTOR_NEED_REPLICATION);
    carry_like_first(out, first, 1, rx);
    carry(out, 2, 0, first + rx - 1);
    break;
  }
  case PLAN_OP_EMBEDDING_GRAD:
    rc = rule_embedding_grad(out, in, y);
    break;
  case PLAN_OP_CROSS_ENTROPY_GRAD:
    rc = rule_cross_entropy_grad(out, in);
    break;
  case PLAN_OP_WHERE: {
    /* elementwise with broadcasting, like the binary ops: all free */
    int ranks[3] = {in[0].rank, in[1].rank, in[2].rank};
    broadcast_dims(out, in, 3, ranks, y->rank, y->dims, OUT(out, 0), 0, "d");
    break;
  }
  case PLAN_OP_REPEAT_INTERLEAVE:
    rc = rule_repeat_interleave(out, &in[0], attrs);
    break;
  case PLAN_OP_TOPK:
    rc = rule_topk(out, &in[0], y);
    break;
  case PLAN_OP_GATHER:
  case PLAN_OP_SCATTER_ADD:
    rc = rule_gather_scatter(out, kind, in, y);
    break;
  case PLAN_OP_MOE_DISPATCH:
  case PLAN_OP_MOE_COMBINE:
  case PLAN_OP_MOE_WEIGHTS_GRAD:
    rc = rule_moe(out, kind, in, nin, y);
    break;
  case PLAN_OP_ATTENTION:
    rc = rule_attention(out, in, nin);
    break;
  case PLAN_OP_COUNT:
    rc = PLAN_EINVALID;
    break;
  }
  return rc;
}

int plan_op_rule(plan_rule *out, int kind, const plan_shape *in, int nin,
                 const plan_shape *outs, int nout, const plan_attr_val *attrs,
                 char *err, size_t errsz) {
  const plan_op_info *info = plan_op_info_get(kind);
  if (!out || !info)
    return plan_errf(err, errsz, "plan_op_rule: %s",
                     out ? "unknown op kind" : "no rule to fill");
  if (nout < 1 || nout > PLAN_MAX_OPERANDS || nin < 0 ||
      nin + nout > PLAN_MAX_OPERANDS)
    return plan_errf(err, errsz,
                     "%s: %d inputs and %d outputs are out of range",
                     info->name, nin, nout);
  plan_shape inferred[PLAN_MAX_OPERANDS];
  int rc =
      infer_outputs(info, in, nin, outs, nout, attrs, inferred, err, errsz);
  if (rc)
    return rc;
  memset(out, 0, sizeof *out);
  out->nin = nin;
  out->nout = nout;
  for (int i = 0; i < nin; i++)
    out->operand[i].rank = in[i].rank;
  for (int o = 0; o < nout; o++)
    out->operand[nin + o].rank = inferred[o].rank;
  rc = rule_of_kind(out, kind, in, nin, inferred, nout, attrs);
  /* The op set needs at most 23 factors (concat of 15 rank-8 inputs), so a
   * full table means factor() ran out and a factor is missing. */
  if (rc || out->nfactors >= PLAN_RULE_MAX_FACTORS)
    return plan_errf(err, errsz,
                     "%s: cannot build the sharding rule (%d factors)",
                     info->name, out->nfactors);
  return PLAN_OK;
}

int plan_op_factors(plan_op_factor *out, int max, int kind,
                    const plan_attr_val *attrs, const plan_shape *in, int nin,
                    const plan_shape *outs, int nout, char *err, size_t errsz) {
  if (kind < 0 || kind >= PLAN_OP_COUNT)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "plan_op_factors: op kind %d is unknown", kind);
  if ((!out && max > 0) || (!in && nin > 0) || !outs)
    return plan_errc(PLAN_EUSAGE, err, errsz, "plan_op_factors: NULL argument");
  plan_rule rule;
  int rc = plan_op_rule(&rule, kind, in, nin, outs, nout, attrs, err, errsz);
  if (rc)
    return rc;
  for (int f = 0; f < rule.nfactors && f < max; f++) {
    const plan_factor *x = &rule.factors[f];
    bool reduces =
        x->kind == PLAN_FACTOR_REDUCTION || x->kind == PLAN_FACTOR_MASKED;
    out[f].size = x->size;
    out[f].kind = x->kind;
    out[f].reduce = reduces ? x->reduce : -1;
    memcpy(out[f].name, x->name, sizeof out[f].name);
    out[f].name[sizeof out[f].name - 1] = 0;
  }
  return rule.nfactors;
}

int plan_op_kind_linear(int kind) {
  const plan_op_info *info = plan_op_info_get(kind);
  return info ? info->partial != PLAN_PARTIAL_NONE : -1;
}

int plan_op_check_placements(const plan_plan *p, int kind,
                             const plan_attr_val *attrs, const plan_shape *in,
                             const plan_placement *pin, int nin,
                             const plan_shape *outs, const plan_placement *pout,
                             int nout, char *err, size_t errsz) {
  if (kind < 0 || kind >= PLAN_OP_COUNT)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "plan_op_check_placements: op kind %d is unknown", kind);
  if (!p || !p->has_mesh || ((!in || !pin) && nin > 0) || !outs || !pout)
    return plan_errc(PLAN_EUSAGE, err, errsz, "plan_op_check_placements: %s",
                     p && !p->has_mesh ? "the plan has no mesh"
                                       : "NULL argument");
  plan_rule rule;
  int rc = plan_op_rule(&rule, kind, in, nin, outs, nout, attrs, err, errsz);
  if (rc)
    return rc;
  const plan_mesh *m = &p->mesh;
  return plan_rule_check_r(&rule, kind, attrs, pin, pout, m->axis_sizes,
                           m->axis_names, m->ratios, m->nratios, err, errsz);
}
