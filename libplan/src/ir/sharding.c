/* Judging placements against an op's factor rule (sharding_rules.c builds
 * the rule): derive the output placements from the input placements, mesh
 * axis by mesh axis, and check a whole strategy against that derivation.
 *
 * Along one mesh axis an operand is R, S or P, and the axis is judged on its
 * own:
 *   - some input S: the inputs name one factor (the major factor of the dim
 *     they shard); every input carrying it must shard it, the others must be
 *     R (an `additive` input must be P(sum) when the factor is a reduction:
 *     linear's bias); a free factor shards the outputs that carry it, a
 *     reduction or masked factor makes them P, a need-replication factor is
 *     an error;
 *   - else some input P: the op's partial rule (ops.h) decides;
 *   - else every output is R.
 * Then, across axes, the nesting order of the axes sharding a factor must
 * agree between inputs (outputs take it), and a compound (reshape-merged) dim
 * may be sharded only where its major factor divides evenly. */
#include "ir/ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/placement.h"

/* What produced the entry of the outputs along one axis: the factor sharded
 * there (-1 when none) and an input dim sharding it, kept so plan_rule_check
 * can test whether a reduction is evenly sharded (P(avg) for reduce_mean). */
typedef struct axis_src {
  int factor;
  int input, dim;
} axis_src;

/* Everything the per-axis steps share. */
typedef struct judge {
  const plan_rule *rule;
  const plan_op_info *info;
  int kind;
  const plan_attr_val *attrs;
  const plan_placement *in;
  plan_placement *out;
  const int64_t *mesh_sizes;
  const plan_ratios *sets; /* the plan's ratio sets (NULL: none known) */
  int nsets;
  int naxes;
  const char *ax[PLAN_MAX_MESH_AXES]; /* axis names for messages */
  char ax_buf[PLAN_MAX_MESH_AXES][20];
  axis_src src[PLAN_MAX_MESH_AXES];
  char *err;
  size_t errsz;
} judge;

static const char *red_name(int r) {
  static const char *const names[PLAN_RED_COUNT] = {"sum", "avg", "max", "min"};
  return r >= 0 && r < PLAN_RED_COUNT ? names[r] : "?";
}

/* One placement entry as text: "R", "S(1)", "P(sum)". */
static const char *entry_str(const plan_axis_pl *e, char buf[24]) {
  if (e->kind == PLAN_PL_S)
    snprintf(buf, 24, "S(%d)", e->dim);
  else if (e->kind == PLAN_PL_P)
    snprintf(buf, 24, "P(%s)", red_name(e->reduce));
  else
    snprintf(buf, 24, "R");
  return buf;
}

/* An S entry with its ratios, "S(0|3:2)" (the set's index when the sets
 * are not known, "S(0|set 1)"); other entries as entry_str. */
static const char *ratio_str(const judge *j, const plan_axis_pl *e,
                             char buf[96]) {
  if (e->kind != PLAN_PL_S || !e->ratio) {
    char eb[24];
    snprintf(buf, 96, "%s", entry_str(e, eb));
    return buf;
  }
  if (!j->sets || e->ratio > j->nsets) {
    snprintf(buf, 96, "S(%d|set %d)", e->dim, e->ratio);
    return buf;
  }
  const plan_ratios *r = &j->sets[e->ratio - 1];
  size_t k = (size_t)snprintf(buf, 96, "S(%d|", e->dim);
  for (int i = 0; i < r->n && k < 90; i++)
    k += (size_t)snprintf(buf + k, 96 - k, "%s%lld", i ? ":" : "",
                          (long long)r->w[i]);
  if (k < 95)
    snprintf(buf + k, 96 - k, ")");
  return buf;
}

/* Where operand `opnd` carries factor f: its dim, and whether f is the dim's
 * major factor (the only one sharding the dim can shard). */
static bool find_factor(const plan_rule *r, int opnd, int f, int *dim,
                        bool *major) {
  const plan_rule_operand *o = &r->operand[opnd];
  for (int d = 0; d < o->rank && d < PLAN_MAX_RANK; d++)
    for (int t = 0; t < o->nf[d] && t < PLAN_RULE_MAX_COMPOUND; t++)
      if (o->f[d][t] == f) {
        *dim = d;
        *major = t == 0;
        return true;
      }
  return false;
}

static bool linear_reduce(int red) {
  return red == PLAN_RED_SUM || red == PLAN_RED_AVG;
}

/* Some input is S along axis a. */
static int shard_axis(judge *j, int a, int first_s) {
  const plan_rule *r = j->rule;
  const char *op = j->info->name, *ax = j->ax[a];
  char eb[24];
  int F = -1, d = -1;
  for (int i = first_s; i < r->nin; i++) {
    const plan_axis_pl *e = &j->in[i].ax[a];
    if (e->kind != PLAN_PL_S)
      continue;
    if (r->operand[i].nf[e->dim] == 0)
      return plan_errf(
          j->err, j->errsz,
          "%s: input %d dim %d is a broadcast size-1 dim and cannot "
          "be sharded (S(%d) along %s)",
          op, i, e->dim, e->dim, ax);
    int fi = r->operand[i].f[e->dim][0];
    if (F < 0) {
      F = fi;
      d = e->dim;
      /* Said first: the other inputs' factors of a need-replication dim
       * (split/concat parts) differ too, and would hide the reason. */
      if (r->factors[F].kind == PLAN_FACTOR_NEED_REPLICATION) {
        if (r->nin == 1)
          return plan_errf(j->err, j->errsz,
                           "%s: dim %d must be replicated (sharded along %s)",
                           op, d, ax);
        return plan_errf(j->err, j->errsz,
                         "%s: dim %d of input %d must be replicated (sharded "
                         "along %s)",
                         op, d, first_s, ax);
      }
    } else if (fi != F) {
      return plan_errf(
          j->err, j->errsz,
          "%s: input %d shards dim %d (factor %s) along %s but input "
          "%d shards dim %d (factor %s)",
          op, first_s, d, r->factors[F].name, ax, i, e->dim,
          r->factors[fi].name);
    }
  }
  if (F < 0) /* first_s is S, so this cannot happen */
    return plan_errf(j->err, j->errsz, "%s: no sharded input along %s", op, ax);
  const plan_factor *pf = &r->factors[F];
  const char *fn = pf->name;
  bool reduction =
      pf->kind == PLAN_FACTOR_REDUCTION || pf->kind == PLAN_FACTOR_MASKED;
  for (int i = 0; i < r->nin; i++) {
    const plan_axis_pl *e = &j->in[i].ax[a];
    int cd;
    bool major;
    bool has = find_factor(r, i, F, &cd, &major);
    if (e->kind == PLAN_PL_P) {
      /* Only an additive input may hold P beside a sharded reduction. */
      if (has ||
          !(r->operand[i].additive && reduction && e->reduce == pf->reduce))
        return plan_errf(
            j->err, j->errsz,
            "%s: input %d is %s along %s while input %d shards dim "
            "%d (factor %s) there; along one axis the inputs are "
            "either sharded or partial",
            op, i, entry_str(e, eb), ax, first_s, d, fn);
    } else if (has) {
      if (!major)
        return plan_errf(
            j->err, j->errsz,
            "%s: input %d shards dim %d (factor %s) along %s, but "
            "input %d holds factor %s as the minor part of dim %d, "
            "which cannot be sharded alone",
            op, first_s, d, fn, ax, i, fn, cd);
      if (e->kind != PLAN_PL_S)
        return plan_errf(j->err, j->errsz,
                         "%s: input %d shards dim %d (factor %s) along %s but "
                         "input %d does not (it is %s there)",
                         op, first_s, d, fn, ax, i, entry_str(e, eb));
      /* One factor, one layout: the pieces must be the same on every
       * input that shards it. */
      const plan_axis_pl *e0 = &j->in[first_s].ax[a];
      if (e->ratio != e0->ratio) {
        char r0[96], r1[96];
        return plan_errf(j->err, j->errsz,
                         "%s: ratios differ along %s (factor %s): input %d is "
                         "%s, input %d is %s",
                         op, ax, fn, first_s, ratio_str(j, e0, r0), i,
                         ratio_str(j, e, r1));
      }
    } else if (r->operand[i].additive && reduction) {
      /* R: each rank would add the whole value to its partial result. */
      return plan_errf(
          j->err, j->errsz,
          "%s: input %d must be P(%s) along %s because factor %s (dim "
          "%d of input %d) is sharded there; as R it would be added "
          "on every rank",
          op, i, red_name(pf->reduce), ax, fn, d, first_s);
    }
  }
  for (int o = 0; o < r->nout; o++) {
    plan_axis_pl *e = &j->out[o].ax[a];
    int cd;
    bool major;
    bool has = find_factor(r, r->nin + o, F, &cd, &major);
    if (pf->kind == PLAN_FACTOR_COLLECTIVE && !has)
      continue; /* the op's own all-reduces leave it whole (R) here */
    if (pf->kind != PLAN_FACTOR_FREE && pf->kind != PLAN_FACTOR_COLLECTIVE) {
      /* Sharding a reduced factor leaves each rank a partial result. */
      e->kind = PLAN_PL_P;
      e->reduce = pf->reduce;
      continue;
    }
    if (!has)
      return plan_errf(
          j->err, j->errsz,
          "%s: factor %s (dim %d of input %d) is sharded along %s but "
          "output %d has no dim for it",
          op, fn, d, first_s, ax, o);
    if (!major)
      return plan_errf(
          j->err, j->errsz,
          "%s: factor %s (dim %d of input %d) is sharded along %s but "
          "output %d holds it as the minor part of dim %d, which S "
          "cannot express",
          op, fn, d, first_s, ax, o, cd);
    e->kind = PLAN_PL_S;
    e->dim = (int8_t)cd;
    e->level = 0;                          /* set by order_levels */
    e->ratio = j->in[first_s].ax[a].ratio; /* the pieces the inputs have */
  }
  j->src[a].factor = F;
  j->src[a].input = first_s;
  j->src[a].dim = d;
  return PLAN_OK;
}

/* No input is S along axis a and some input is P: the op's partial rule. */
static int partial_axis(judge *j, int a, int first_p) {
  const plan_rule *r = j->rule;
  const char *op = j->info->name, *ax = j->ax[a];
  char eb[24], eb2[24];
  const plan_axis_pl *in0 = &j->in[0].ax[a];
  int pk = j->in[first_p].ax[a].reduce;
  const char *pks = entry_str(&j->in[first_p].ax[a], eb2);
  switch (j->info->partial) {
  case PLAN_PARTIAL_NONE:
    return plan_errf(
        j->err, j->errsz,
        "%s: input %d is %s along %s, but %s is not linear: reduce it "
        "first",
        op, first_p, pks, ax, op);
  case PLAN_PARTIAL_PASS:
  case PLAN_PARTIAL_ADDITIVE:
    for (int i = 0; i < r->nin; i++) {
      const plan_axis_pl *e = &j->in[i].ax[a];
      if (e->kind != PLAN_PL_P || e->reduce != pk)
        return plan_errf(j->err, j->errsz,
                         "%s: input %d is %s along %s while input %d is %s: %s "
                         "needs every input partial in the same way, or none",
                         op, i, entry_str(e, eb), ax, first_p, pks, op);
    }
    if (j->info->partial == PLAN_PARTIAL_ADDITIVE && !linear_reduce(pk))
      return plan_errf(
          j->err, j->errsz,
          "%s: %s along %s does not pass through %s; only P(sum) and "
          "P(avg) do",
          op, pks, ax, op);
    break;
  case PLAN_PARTIAL_UNARY:
    if (!linear_reduce(pk)) {
      if (j->kind != PLAN_OP_SCALE)
        return plan_errf(
            j->err, j->errsz,
            "%s: %s along %s does not pass through %s; only P(sum) "
            "and P(avg) do",
            op, pks, ax, op);
      /* max/min commute with scaling only by a non-negative factor. */
      double f = j->attrs ? j->attrs[0].f : j->info->attrs[0].def_f;
      if (!(f >= 0))
        return plan_errf(j->err, j->errsz,
                         "scale: %s along %s passes only a factor >= 0, not %g",
                         pks, ax, f);
    }
    break;
  case PLAN_PARTIAL_PRODUCT:
  case PLAN_PARTIAL_LINEAR: {
    const plan_axis_pl *in1 = &j->in[1].ax[a];
    if (in0->kind == PLAN_PL_P && in1->kind == PLAN_PL_P)
      return plan_errf(
          j->err, j->errsz,
          "%s: inputs 0 and 1 are both partial along %s; the product "
          "of partial values is not partial: reduce one first",
          op, ax);
    if (in0->kind != PLAN_PL_P && in1->kind != PLAN_PL_P)
      /* Only linear's bias can be partial here. */
      return plan_errf(
          j->err, j->errsz,
          "%s: the bias (input %d) is %s along %s but neither x nor w "
          "is; the sum over ranks would multiply x w by their number",
          op, first_p, pks, ax);
    int p = in0->kind == PLAN_PL_P ? 0 : 1;
    pk = j->in[p].ax[a].reduce;
    pks = entry_str(&j->in[p].ax[a], eb2);
    if (!linear_reduce(pk))
      return plan_errf(
          j->err, j->errsz,
          "%s: input %d is %s along %s; only P(sum) and P(avg) pass "
          "through %s",
          op, p, pks, ax, op);
    if (r->nin == 3) {
      const plan_axis_pl *e = &j->in[2].ax[a];
      if (e->kind != PLAN_PL_P || e->reduce != pk)
        return plan_errf(
            j->err, j->errsz,
            "%s: the bias (input 2) must be %s along %s like input "
            "%d, not %s; else it is added once per rank",
            op, pks, ax, p, entry_str(e, eb));
    }
    break;
  }
  case PLAN_PARTIAL_DIVIDEND:
  case PLAN_PARTIAL_TABLE:
    if (j->in[1].ax[a].kind == PLAN_PL_P)
      return plan_errf(
          j->err, j->errsz,
          j->info->partial == PLAN_PARTIAL_DIVIDEND
              ? "%s: the divisor (input 1) is %s along %s; only the "
                "dividend may be partial"
              : "%s: the ids (input 1) are %s along %s; only the "
                "table may be partial",
          op, entry_str(&j->in[1].ax[a], eb), ax);
    if (!linear_reduce(pk))
      return plan_errf(
          j->err, j->errsz,
          "%s: input 0 is %s along %s; only P(sum) and P(avg) pass "
          "through %s",
          op, pks, ax, op);
    break;
  case PLAN_PARTIAL_SELECT:
    /* where(cond, a, b): summing (or averaging, or taking the max or min
     * of) where(cond, a_r, b_r) over the ranks is where(cond, sum a_r,
     * sum b_r) only when a and b are both partial in that way: an R
     * operand would be counted once per rank where it is selected. */
    if (in0->kind == PLAN_PL_P)
      return plan_errf(
          j->err, j->errsz,
          "%s: the condition (input 0) is %s along %s; it selects, "
          "so it cannot be partial: reduce it first",
          op, entry_str(in0, eb), ax);
    for (int i = 1; i < r->nin; i++) {
      const plan_axis_pl *e = &j->in[i].ax[a];
      if (e->kind != PLAN_PL_P || e->reduce != pk)
        return plan_errf(
            j->err, j->errsz,
            "%s: input %d is %s along %s while input %d is %s: a and "
            "b (inputs 1 and 2) must be partial in the same way, or "
            "neither",
            op, i, entry_str(e, eb), ax, first_p, pks);
    }
    break;
  case PLAN_PARTIAL_FIRST:
    if (first_p != 0)
      return plan_errf(j->err, j->errsz,
                       "%s: input %d is %s along %s; only the output gradient "
                       "(input 0) may be partial",
                       op, first_p, pks, ax);
    for (int i = 1; i < r->nin; i++)
      if (j->in[i].ax[a].kind == PLAN_PL_P)
        return plan_errf(
            j->err, j->errsz,
            "%s: input %d is %s along %s; only the output gradient "
            "(input 0) may be partial",
            op, i, entry_str(&j->in[i].ax[a], eb), ax);
    if (!linear_reduce(pk))
      return plan_errf(
          j->err, j->errsz,
          "%s: input 0 is %s along %s; only P(sum) and P(avg) pass "
          "through %s",
          op, pks, ax, op);
    break;
  }
  for (int o = 0; o < r->nout; o++) {
    j->out[o].ax[a].kind = PLAN_PL_P;
    j->out[o].ax[a].reduce = (uint8_t)pk;
  }
  return PLAN_OK;
}

static const char *axes_str(const judge *j, const int *axes, int n, char *buf,
                            size_t size) {
  size_t k = 0;
  buf[0] = '\0';
  for (int t = 0; t < n && k < size; t++)
    k += (size_t)snprintf(buf + k, size - k, "%s%s", t ? ", " : "",
                          j->ax[axes[t]]);
  return buf;
}

/* The axes sharding one factor must nest in the same order on every input
 * that carries it (a producer's S(0)S(0) over [dp, tp] is not the layout
 * [tp, dp]); the outputs take that order as their levels. */
static int order_levels(judge *j) {
  const plan_rule *r = j->rule;
  for (int F = 0; F < r->nfactors; F++) {
    int ref = -1, nref = 0, ref_axes[PLAN_MAX_MESH_AXES];
    for (int i = 0; i < r->nin; i++) {
      int cd, axes[PLAN_MAX_MESH_AXES];
      bool major;
      if (!find_factor(r, i, F, &cd, &major) || !major)
        continue;
      int n = plan_placement_dim_axes(&j->in[i], cd, axes);
      if (n == 0)
        continue;
      if (ref < 0) {
        ref = i;
        nref = n;
        memcpy(ref_axes, axes, sizeof axes);
        continue;
      }
      bool same = n == nref;
      for (int t = 0; same && t < n; t++)
        same = axes[t] == ref_axes[t];
      if (!same) {
        char b1[PLAN_MAX_MESH_AXES * 20], b2[PLAN_MAX_MESH_AXES * 20];
        return plan_errf(j->err, j->errsz,
                         "%s: inputs %d and %d shard factor %s in different "
                         "nesting orders: [%s] vs [%s]",
                         j->info->name, ref, i, r->factors[F].name,
                         axes_str(j, ref_axes, nref, b1, sizeof b1),
                         axes_str(j, axes, n, b2, sizeof b2));
      }
    }
    if (ref < 0)
      continue;
    for (int o = 0; o < r->nout; o++) {
      int cd;
      bool major;
      if (!find_factor(r, r->nin + o, F, &cd, &major) || !major)
        continue;
      for (int a = 0; a < j->naxes; a++) {
        plan_axis_pl *e = &j->out[o].ax[a];
        if (e->kind != PLAN_PL_S || e->dim != cd)
          continue;
        for (int t = 0; t < nref; t++)
          if (ref_axes[t] == a)
            e->level = (int8_t)t;
      }
    }
  }
  return PLAN_OK;
}

/* The first piece boundary of dim d (global size `size`) that is not a
 * multiple of `inner`, over every combination of coordinates of the mesh
 * axes axes[0..n) (the others 0, at most 2^16 combinations); -1 when every
 * boundary is. */
static int64_t dim_piece_bad(const judge *j, const plan_placement *p, int d,
                             int64_t size, int64_t inner, const int *axes,
                             int n) {
  int64_t coord[PLAN_MAX_MESH_AXES] = {0};
  for (int64_t count = 0; count < (1 << 16); count++) {
    int64_t off, len;
    plan_placement_dim_range_r(p, d, size, j->mesh_sizes, coord, j->sets,
                               j->nsets, &off, &len);
    if (off % inner || len % inner)
      return off % inner ? off : off + len;
    int t = n - 1;
    while (t >= 0 && ++coord[axes[t]] >= j->mesh_sizes[axes[t]])
      coord[axes[t--]] = 0;
    if (t < 0)
      break;
  }
  return -1;
}

/* A compound dim sharded with ratios: every piece boundary must fall on a
 * whole element of the major factor (a multiple of the minor parts'
 * product), checked piece by piece. */
static int compound_ratio_check(judge *j, int opnd, const plan_placement *p,
                                int d, const int *axes, int n) {
  const plan_rule *r = j->rule;
  const plan_rule_operand *o = &r->operand[opnd];
  const plan_factor *major = &r->factors[o->f[d][0]];
  bool is_in = opnd < r->nin;
  char b[PLAN_MAX_MESH_AXES * 20];
  if (!j->sets)
    return plan_errf(j->err, j->errsz,
                     "%s: dim %d of %s %d is compound (major part %s); its "
                     "ratio pieces along [%s] cannot be checked without the "
                     "plan's ratio sets",
                     j->info->name, d, is_in ? "input" : "output",
                     is_in ? opnd : opnd - r->nin, major->name,
                     axes_str(j, axes, n, b, sizeof b));
  int64_t size = 1;
  for (int t = 0; t < o->nf[d]; t++)
    size *= r->factors[o->f[d][t]].size;
  int64_t inner = major->size > 0 ? size / major->size : 1;
  if (inner <= 1)
    return PLAN_OK;
  int64_t at = dim_piece_bad(j, p, d, size, inner, axes, n);
  if (at < 0)
    return PLAN_OK;
  return plan_errf(j->err, j->errsz,
                   "%s: dim %d of %s %d is compound (major part %s of size "
                   "%lld); its ratio pieces along [%s] must cut it at "
                   "multiples of %lld, but one cuts at %lld",
                   j->info->name, d, is_in ? "input" : "output",
                   is_in ? opnd : opnd - r->nin, major->name,
                   (long long)major->size, axes_str(j, axes, n, b, sizeof b),
                   (long long)inner, (long long)at);
}

/* A compound dim (reshape) shards its major factor: the layout equals
 * sharding that factor only when it divides into the shards exactly
 * ([4, 6] -> [24] sharded 2 ways is 12 + 12 = rows 0-1 and 2-3; 8 ways would
 * split rows). */
static int compound_check(judge *j, int opnd, const plan_placement *p) {
  const plan_rule *r = j->rule;
  const plan_rule_operand *o = &r->operand[opnd];
  if (!j->mesh_sizes)
    return PLAN_OK;
  for (int d = 0; d < o->rank; d++) {
    if (o->nf[d] < 2)
      continue;
    int axes[PLAN_MAX_MESH_AXES];
    int n = plan_placement_dim_axes(p, d, axes);
    if (n == 0)
      continue;
    int64_t prod = 1;
    bool ratios = false;
    for (int t = 0; t < n; t++) {
      if (j->mesh_sizes[axes[t]] > 0 &&
          !plan_mul_i64(prod, j->mesh_sizes[axes[t]], &prod))
        prod = INT64_MAX; /* more shards than any factor has elements */
      ratios = ratios || p->ax[axes[t]].ratio;
    }
    const plan_factor *major = &r->factors[o->f[d][0]];
    bool is_in = opnd < r->nin;
    if (ratios) {
      int rc = compound_ratio_check(j, opnd, p, d, axes, n);
      if (rc)
        return rc;
      continue;
    }
    if (prod > 0 && major->size % prod == 0)
      continue;
    char b[PLAN_MAX_MESH_AXES * 20];
    return plan_errf(
        j->err, j->errsz,
        "%s: dim %d of %s %d is compound (major part %s of size "
        "%lld); sharding it along [%s] (%lld shards) needs %lld to "
        "divide by %lld",
        j->info->name, d, is_in ? "input" : "output",
        is_in ? opnd : opnd - r->nin, major->name, (long long)major->size,
        axes_str(j, axes, n, b, sizeof b), (long long)prod,
        (long long)major->size, (long long)prod);
  }
  return PLAN_OK;
}

static int judge_run(judge *j) {
  const plan_rule *r = j->rule;
  const char *op = j->info->name;
  if (r->nin < 1 || r->nout < 1 || r->nin + r->nout > PLAN_MAX_OPERANDS)
    return plan_errf(j->err, j->errsz,
                     "%s: the rule has %d inputs and %d outputs", op, r->nin,
                     r->nout);
  j->naxes = j->in[0].naxes;
  if (j->naxes > PLAN_MAX_MESH_AXES)
    return plan_errf(j->err, j->errsz, "%s: %d mesh axes (at most %d)", op,
                     j->naxes, PLAN_MAX_MESH_AXES);
  for (int i = 0; i < r->nin; i++) {
    if (j->in[i].naxes != j->naxes)
      return plan_errf(
          j->err, j->errsz,
          "%s: input %d has a placement over %d mesh axes, input 0 "
          "over %d",
          op, i, j->in[i].naxes, j->naxes);
    for (int a = 0; a < j->naxes; a++) {
      const plan_axis_pl *e = &j->in[i].ax[a];
      if (e->kind > PLAN_PL_P ||
          (e->kind == PLAN_PL_P && e->reduce >= PLAN_RED_COUNT))
        return plan_errf(j->err, j->errsz,
                         "%s: input %d has an unknown placement along %s", op,
                         i, j->ax[a]);
      if (e->kind == PLAN_PL_S && (e->dim < 0 || e->dim >= r->operand[i].rank))
        return plan_errf(j->err, j->errsz,
                         "%s: input %d is S(%d) along %s but has rank %d", op,
                         i, e->dim, j->ax[a], r->operand[i].rank);
      if (e->kind == PLAN_PL_S && e->ratio && j->sets &&
          (e->ratio > j->nsets || j->sets[e->ratio - 1].axis != a))
        return plan_errf(j->err, j->errsz,
                         "%s: input %d along %s names ratio set %d, which "
                         "is not a set of that axis",
                         op, i, j->ax[a], e->ratio);
    }
  }
  for (int o = 0; o < r->nout; o++) {
    memset(&j->out[o], 0, sizeof j->out[o]);
    j->out[o].naxes = (uint8_t)j->naxes; /* all R (kind 0) */
  }
  int rc;
  for (int a = 0; a < j->naxes; a++) {
    int first_s = -1, first_p = -1;
    j->src[a].factor = -1;
    for (int i = r->nin - 1; i >= 0; i--) {
      if (j->in[i].ax[a].kind == PLAN_PL_S)
        first_s = i;
      else if (j->in[i].ax[a].kind == PLAN_PL_P)
        first_p = i;
    }
    if (first_s >= 0)
      rc = shard_axis(j, a, first_s);
    else if (first_p >= 0)
      rc = partial_axis(j, a, first_p);
    else
      rc = PLAN_OK;
    if (rc)
      return rc;
  }
  if ((rc = order_levels(j)))
    return rc;
  for (int i = 0; i < r->nin; i++)
    if ((rc = compound_check(j, i, &j->in[i])))
      return rc;
  for (int o = 0; o < r->nout; o++)
    if ((rc = compound_check(j, r->nin + o, &j->out[o])))
      return rc;
  return PLAN_OK;
}

static int judge_init(judge *j, const plan_rule *rule, int kind,
                      const plan_attr_val *attrs, const plan_placement *in,
                      const int64_t *mesh_sizes, const char *const *axis_names,
                      const plan_ratios *sets, int nsets, plan_placement *out,
                      char *err, size_t errsz) {
  memset(j, 0, sizeof *j);
  j->sets = sets;
  j->nsets = sets ? nsets : 0;
  j->err = err;
  j->errsz = errsz;
  j->info = plan_op_info_get(kind);
  if (!rule || !in || !out || !j->info || rule->nin < 1) {
    plan_errf(err, errsz, "sharding rule: %s",
              j->info ? "missing rule, inputs or outputs" : "unknown op kind");
    return PLAN_EUSAGE;
  }
  j->rule = rule;
  j->kind = kind;
  j->attrs = attrs;
  j->in = in;
  j->out = out;
  j->mesh_sizes = mesh_sizes;
  for (int a = 0; a < PLAN_MAX_MESH_AXES; a++) {
    /* axis_names has one entry per mesh axis: read no further */
    if (a < in[0].naxes && axis_names && axis_names[a]) {
      j->ax[a] = axis_names[a];
    } else {
      snprintf(j->ax_buf[a], sizeof j->ax_buf[a], "axis %d", a);
      j->ax[a] = j->ax_buf[a];
    }
  }
  return PLAN_OK;
}

int plan_rule_infer_out_r(const plan_rule *rule, int kind,
                          const plan_attr_val *attrs, const plan_placement *in,
                          const int64_t *mesh_sizes,
                          const char *const *axis_names,
                          const plan_ratios *sets, int nsets,
                          plan_placement *out, char *err, size_t errsz) {
  judge j;
  int rc = judge_init(&j, rule, kind, attrs, in, mesh_sizes, axis_names, sets,
                      nsets, out, err, errsz);
  return rc ? rc : judge_run(&j);
}

int plan_rule_infer_out(const plan_rule *rule, int kind,
                        const plan_attr_val *attrs, const plan_placement *in,
                        const int64_t *mesh_sizes,
                        const char *const *axis_names, plan_placement *out,
                        char *err, size_t errsz) {
  return plan_rule_infer_out_r(rule, kind, attrs, in, mesh_sizes, axis_names,
                               NULL, 0, out, err, errsz);
}

/* Size of dim d of operand opnd, from its factors. */
static int64_t dim_size(const plan_rule *r, int opnd, int d) {
  int64_t n = 1;
  for (int t = 0; t < r->operand[opnd].nf[d]; t++)
    n *= r->factors[r->operand[opnd].f[d][t]].size;
  return n;
}

int plan_rule_check(const plan_rule *rule, int kind, const plan_attr_val *attrs,
                    const plan_placement *in, const plan_placement *out,
                    const int64_t *mesh_sizes, const char *const *axis_names,
                    char *err, size_t errsz) {
  return plan_rule_check_r(rule, kind, attrs, in, out, mesh_sizes, axis_names,
                           NULL, 0, err, errsz);
}

int plan_rule_check_r(const plan_rule *rule, int kind,
                      const plan_attr_val *attrs, const plan_placement *in,
                      const plan_placement *out, const int64_t *mesh_sizes,
                      const char *const *axis_names, const plan_ratios *sets,
                      int nsets, char *err, size_t errsz) {
  plan_placement want[PLAN_MAX_OPERANDS];
  judge j;
  int rc = judge_init(&j, rule, kind, attrs, in, mesh_sizes, axis_names, sets,
                      nsets, want, err, errsz);
  if (rc)
    return rc;
  if (!out) {
    plan_errf(err, errsz, "%s: no output placements to check", j.info->name);
    return PLAN_EUSAGE;
  }
  if ((rc = judge_run(&j)))
    return rc;
  for (int o = 0; o < rule->nout; o++) {
    if (plan_placement_equal(&want[o], &out[o]))
      continue;
    /* A sharded mean may be stated as P(avg) where every shard has the same
     * size (then the mean of local means is the mean). */
    plan_placement alt = want[o];
    bool uneven = false;
    for (int a = 0; a < j.naxes && a < out[o].naxes; a++) {
      const axis_src *s = &j.src[a];
      plan_axis_pl *e = &alt.ax[a];
      if (s->factor < 0 || !rule->factors[s->factor].avg_if_even ||
          e->kind != PLAN_PL_P || e->reduce != PLAN_RED_SUM ||
          out[o].ax[a].kind != PLAN_PL_P ||
          out[o].ax[a].reduce != PLAN_RED_AVG || !mesh_sizes)
        continue;
      if (plan_placement_dim_even(&in[s->input], s->dim,
                                  dim_size(rule, s->input, s->dim), mesh_sizes))
        e->reduce = PLAN_RED_AVG;
      else
        uneven = true;
    }
    if (plan_placement_equal(&alt, &out[o]))
      continue;
    char b1[PLAN_PLACEMENT_STRLEN], b2[PLAN_PLACEMENT_STRLEN];
    for (int a = 0; a < j.naxes && a < out[o].naxes; a++) {
      const plan_axis_pl *x = &want[o].ax[a], *y = &out[o].ax[a];
      if (x->kind == PLAN_PL_S && y->kind == PLAN_PL_S && x->dim == y->dim &&
          x->ratio != y->ratio) {
        char r0[96], r1[96];
        return plan_errf(err, errsz,
                         "%s: output %d should be %s along %s (the pieces "
                         "of its inputs) but the strategy says %s",
                         j.info->name, o, ratio_str(&j, x, r0), j.ax[a],
                         ratio_str(&j, y, r1));
      }
    }
    return plan_errf(
        err, errsz, "%s: output %d should be %s but the strategy says %s%s",
        j.info->name, o, plan_placement_format(&want[o], b1),
        plan_placement_format(&out[o], b2),
        uneven ? " (P(avg) needs evenly sharded reduced dims)" : "");
  }
  return PLAN_OK;
}
