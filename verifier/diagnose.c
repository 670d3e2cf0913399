/* Diagnoses: when a tensor differs from the reference, the usual causes
 * read from the numbers and the lowered steps (docs/verify.md
 * "Diagnoses"): partial sums, replicas that drift apart, a ratio equal to
 * an axis size, a shard on the wrong dim, pieces in the wrong order,
 * displaced slices (an uneven shard unpadded wrongly), a non-linear op on
 * partial values, a step that breaks its op's sharding rule, zeros. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

/* The global value of buffer `buf` as one replica holds it (partial axes
 * reduced), into out[global index], reading the blocks as placement `as`
 * (the declared one, or a candidate with the same local shapes). */
static void global_value_as(const vctx *c, int buf, const plan_placement *as,
                            double *out) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int pa[PLAN_MAX_MESH_AXES], np = plan_vx_partial_axes(lb, c->m->naxes, pa);
  for (int64_t r = c->nranks - 1; r >= 0; r--) { /* rank 0's copy last */
    if (!plan_vx_partial_leader(c, r, pa, np))
      continue;
    block b;
    plan_vx_layout(c, as, lb->tensor, r, &b);
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    for (int64_t e = 0; e < b.n; e++)
      plan_vx_group_value(c, buf, pa, np, 0, coord, e,
                          &out[plan_vx_global_index(t, &b, e)]);
  }
}

static void global_value(const vctx *c, int buf, double *out) {
  global_value_as(c, buf, &c->low->bufs[buf].pl, out);
}

/* Whether got equals the reference of tensor t everywhere (within the
 * comparison's tolerance). */
static bool all_close(const vctx *c, const vx_tensor *t, const double *got,
                      const double *ref, int64_t n) {
  double rtol = 0, atol = 0;
  if (c->o->mode == PLAN_VERIFY_FLOAT && plan_dtype_is_float(t->dtype))
    plan_vx_diag_tol(c, t, &rtol, &atol);
  for (int64_t i = 0; i < n; i++)
    if (!(got[i] == ref[i] || (isnan(got[i]) && isnan(ref[i])) ||
          fabs(got[i] - ref[i]) <= atol + rtol * fabs(ref[i])))
      return false;
  return true;
}

/* Whether every rank's block under placement `a` has the same shape as
 * under `b`. */
static bool same_local_shapes(const vctx *c, int tensor,
                              const plan_placement *a,
                              const plan_placement *b) {
  const vx_tensor *t = &c->prog->tensors[tensor];
  for (int64_t r = 0; r < c->nranks; r++) {
    block x, y;
    plan_vx_layout(c, a, tensor, r, &x);
    plan_vx_layout(c, b, tensor, r, &y);
    if (memcmp(x.local, y.local, sizeof(int64_t) * (size_t)t->rank))
      return false;
  }
  return true;
}

/* A shard on the wrong dim (or nested in the wrong order): the blocks, read
 * as another placement with the same local shapes (the S axes moved to
 * other dims, or the nesting of a dim's axes reversed), are the reference.
 * A transpose whose output placement did not move with its dims, say. */
static bool diagnose_layout(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int64_t n = plan_vx_count_of(t->dims, t->rank);
  int sa[PLAN_MAX_MESH_AXES], ns = 0;
  for (int a = 0; a < c->m->naxes; a++)
    if (lb->pl.ax[a].kind == PLAN_PL_S)
      sa[ns++] = a;
  if (!ns || t->rank < 1 || n <= 0 || n > (1 << 22))
    return false;
  int64_t ncand = 1;
  for (int i = 0; i < ns && ncand <= 4096; i++)
    ncand *= t->rank;
  if (ncand > 4096)
    return false;
  double *got = malloc(sizeof(double) * (size_t)n);
  if (!got)
    return false;
  bool found = false;
  for (int64_t k = 0; k < ncand * 2 && !found; k++) {
    plan_placement cand = lb->pl;
    int64_t code = k / 2;
    for (int i = 0; i < ns; i++, code /= t->rank) {
      cand.ax[sa[i]].dim = (int8_t)(code % t->rank);
      cand.ax[sa[i]].level = -1;
    }
    if (plan_placement_resolve(&cand, t->rank))
      continue;  /* not a placement of this tensor */
    if (k % 2) { /* the nesting of every multi-axis dim reversed */
      bool multi = false;
      for (int d = 0; d < t->rank; d++) {
        int axes[PLAN_MAX_MESH_AXES],
            na = plan_placement_dim_axes(&cand, d, axes);
        for (int i = 0; i < na; i++)
          cand.ax[axes[i]].level = (int8_t)(na - 1 - i);
        multi |= na > 1;
      }
      if (!multi)
        continue;
    }
    if (plan_placement_equal(&cand, &lb->pl) ||
        !same_local_shapes(c, lb->tensor, &cand, &lb->pl))
      continue;
    global_value_as(c, buf, &cand, got);
    if (!all_close(c, t, got, c->ref[lb->tensor], n))
      continue;
    char want[PLAN_PLACEMENT_STRLEN], have[PLAN_PLACEMENT_STRLEN];
    plan_placement_format_in(have, sizeof have, c->p, &cand);
    plan_placement_format_in(want, sizeof want, c->p, &lb->pl);
    snprintf(c->diagnosis, sizeof c->diagnosis,
             k % 2 ? "the blocks hold '%s' as %s, but the buffer declares %s: "
                     "the shards of a dim nest in the wrong order"
                   : "the blocks hold '%s' as %s, but the buffer declares %s: "
                     "a shard on the wrong dim (a placement that did not "
                     "follow the op's dims)",
             t->name, have, want);
    found = true;
  }
  free(got);
  return found;
}

/* Whether piece i of `x` equals piece j of `y`: pieces are the k equal
 * slices of dim d (outer x dim x inner layout). */
static bool piece_equal(const double *x, int64_t i, const double *y, int64_t j,
                        int64_t outer, int64_t len, int64_t chunk,
                        int64_t inner, double rtol, double atol) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t q = 0; q < chunk * inner; q++) {
      double u = x[(o * len + i * chunk) * inner + q],
             v = y[(o * len + j * chunk) * inner + q];
      if (!(u == v || fabs(u - v) <= atol + rtol * fabs(v)))
        return false;
    }
  return true;
}

/* For a diagnosis: the global value of buffer buf (newly allocated; NULL
 * when the tensor is too large to diagnose or memory is short) and the
 * diagnoses' tolerances. */
static double *diag_global(const vctx *c, int buf, double *rtol, double *atol) {
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[buf].tensor];
  int64_t n = plan_vx_count_of(t->dims, t->rank);
  *rtol = *atol = 0;
  if (n <= 0 || n > (1 << 22))
    return NULL;
  double *got = malloc(sizeof(double) * (size_t)n);
  if (!got)
    return NULL;
  global_value(c, buf, got);
  if (c->o->mode == PLAN_VERIFY_FLOAT && plan_dtype_is_float(t->dtype))
    plan_vx_diag_tol(c, t, rtol, atol);
  return got;
}

/* Pieces in the wrong place: along some dim, cut into k equal pieces for k
 * an axis size, every piece equals a piece of the reference, but not its
 * own (an all-gather in the wrong rank order, shards from the wrong ranks),
 * or two pieces are copies of one reference piece (a duplicated shard). */
static bool diagnose_pieces(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  double rtol, atol;
  double *got = diag_global(c, buf, &rtol, &atol);
  if (!got)
    return false;
  const double *ref = c->ref[lb->tensor];
  bool found = false;
  for (int d = 0; d < t->rank && !found; d++)
    for (int a = 0; a < c->m->naxes && !found; a++) {
      int64_t k = c->m->axis_sizes[a];
      if (k < 2 || k > 64 || t->dims[d] % k)
        continue;
      int64_t len = t->dims[d], chunk = len / k, outer = 1, inner = 1;
      for (int e = 0; e < d; e++)
        outer *= t->dims[e];
      for (int e = d + 1; e < t->rank; e++)
        inner *= t->dims[e];
      int64_t src[64];
      bool all = true, moved = false;
      for (int64_t i = 0; i < k && all; i++) {
        src[i] = -1;
        for (int64_t j = 0; j < k && src[i] < 0; j++)
          if (piece_equal(got, i, ref, j, outer, len, chunk, inner, rtol, atol))
            src[i] = j;
        all = src[i] >= 0;
        moved |= src[i] != i;
      }
      if (!all || !moved)
        continue;
      char list[256] = "";
      size_t u = 0;
      for (int64_t i = 0; i < k && u < sizeof list - 40; i++)
        if (src[i] != i)
          u += (size_t)snprintf(list + u, sizeof list - u, "%s%lld<-%lld",
                                u ? ", " : "", (long long)i, (long long)src[i]);
      char axes[160] = "";
      size_t v = 0;
      for (int b = 0; b < c->m->naxes && v < sizeof axes - 70; b++)
        if (c->m->axis_sizes[b] == k)
          v += (size_t)snprintf(axes + v, sizeof axes - v, "%s'%s'",
                                v ? " or " : "", c->m->axis_names[b]);
      bool dup = false;
      for (int64_t i = 0; i < k; i++)
        for (int64_t j = i + 1; j < k; j++)
          dup |= src[i] == src[j];
      snprintf(c->diagnosis, sizeof c->diagnosis,
               dup ? "dim %d of '%s' in %lld pieces (the size of axis %s): "
                     "pieces hold copies of other pieces (%s): a shard "
                     "duplicated, one taken from the wrong rank"
                   : "dim %d of '%s' in %lld pieces (the size of axis %s): "
                     "the pieces are in the wrong order (%s, piece<-reference "
                     "piece): an all-gather in the wrong rank order, or "
                     "shards from the wrong ranks",
               d, t->name, (long long)k, axes, list);
      found = true;
    }
  free(got);
  return found;
}

/* The op step that wrote buffer `buf`, or NULL (an input or a collective). */
static const vx_step *writer_op(const vctx *c, int buf) {
  for (int i = 0; i < c->low->nsteps; i++) {
    const vx_step *s = &c->low->steps[i];
    for (int k = 0; k < s->nout; k++)
      if (s->out[k] == buf)
        return s->kind == VX_STEP_OP ? s : NULL;
  }
  return NULL;
}

/* A buffer upstream of `buf` (itself, or an input of the steps that led to
 * it, a few steps back) that is sharded unevenly: described into why. */
static bool uneven_upstream(const vctx *c, int buf, int depth, char *why,
                            size_t whysz) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  for (int d = 0; d < t->rank; d++) {
    int axes[PLAN_MAX_MESH_AXES],
        na = plan_placement_dim_axes(&lb->pl, d, axes);
    if (na &&
        !plan_placement_dim_even(&lb->pl, d, t->dims[d], c->m->axis_sizes)) {
      bool ratios = false;
      for (int k = 0; k < na; k++)
        ratios = ratios || lb->pl.ax[axes[k]].ratio;
      snprintf(why, whysz, "'%s' is sharded %s (dim %d, %lld over '%s'%s)",
               t->name, ratios ? "with ratios" : "unevenly", d,
               (long long)t->dims[d], c->m->axis_names[axes[0]],
               na > 1 ? " and more" : "");
      return true;
    }
  }
  if (depth <= 0)
    return false;
  for (int i = 0; i < c->low->nsteps; i++) {
    const vx_step *s = &c->low->steps[i];
    bool writes = false;
    for (int k = 0; k < s->nout; k++)
      writes |= s->out[k] == buf;
    if (!writes)
      continue;
    for (int j = 0; j < s->nin; j++)
      if (uneven_upstream(c, s->in[j], depth - 1, why, whysz))
        return true;
    return false;
  }
  return false;
}

/* A roll, shift or permutation along a dim: every slice of the tensor along
 * dim d is a slice of the reference (or zeros), some displaced. Seen where
 * an uneven shard was unpadded wrongly (the pad lands inside the tensor and
 * the rows after it move), or a gather took the wrong offsets. */
static bool diagnose_slices(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int64_t n = plan_vx_count_of(t->dims, t->rank);
  double rtol, atol;
  double *got = diag_global(c, buf, &rtol, &atol);
  if (!got)
    return false;
  const double *ref = c->ref[lb->tensor];
  bool found = false;
  for (int d = 0; d < t->rank && !found; d++) {
    int64_t len = t->dims[d], outer = 1, inner = 1;
    if (len < 2 || len > 4096 || n * len > ((int64_t)1 << 26))
      continue;
    for (int e = 0; e < d; e++)
      outer *= t->dims[e];
    for (int e = d + 1; e < t->rank; e++)
      inner *= t->dims[e];
    char list[256] = "";
    size_t u = 0;
    bool all = true, moved = false;
    for (int64_t i = 0; i < len && all; i++) {
      int64_t src = -1;
      if (piece_equal(got, i, ref, i, outer, len, 1, inner, rtol, atol))
        continue;
      for (int64_t j = 0; j < len && src < 0; j++)
        if (j != i &&
            piece_equal(got, i, ref, j, outer, len, 1, inner, rtol, atol))
          src = j;
      bool zero = true;
      for (int64_t o = 0; o < outer && zero && src < 0; o++)
        for (int64_t q = 0; q < inner && zero; q++)
          zero = got[(o * len + i) * inner + q] == 0;
      all = src >= 0 || zero;
      moved = true;
      if (u < sizeof list - 40) {
        if (src >= 0)
          u += (size_t)snprintf(list + u, sizeof list - u, "%s%lld<-%lld",
                                u ? ", " : "", (long long)i, (long long)src);
        else
          u += (size_t)snprintf(list + u, sizeof list - u, "%s%lld<-zeros",
                                u ? ", " : "", (long long)i);
      }
    }
    if (!all || !moved)
      continue;
    int w = snprintf(c->diagnosis, sizeof c->diagnosis,
                     "along dim %d of '%s' the slices are the reference's, "
                     "displaced (%s; slice<-reference slice): a roll, shift "
                     "or permutation along the dim",
                     d, t->name, list);
    char why[300];
    if (w > 0 && (size_t)w < sizeof c->diagnosis &&
        uneven_upstream(c, buf, 6, why, sizeof why))
      snprintf(c->diagnosis + w, sizeof c->diagnosis - (size_t)w,
               "; %s: an uneven shard padded or unpadded wrongly", why);
    found = true;
  }
  free(got);
  return found;
}

/* A non-linear op run on partial sums: the step that wrote `buf` is an op
 * whose kind passes no P input (gelu(a) + gelu(b) != gelu(a + b)), and one
 * of its inputs is P along some axis. */
static bool diagnose_partial_input(vctx *c, int buf) {
  const vx_step *s = writer_op(c, buf);
  if (!s)
    return false;
  const vx_op *op = &c->prog->ops[s->op];
  if (plan_op_kind_linear(op->kind) != 0)
    return false;
  for (int j = 0; j < s->nin; j++) {
    const vx_buf *ib = &c->low->bufs[s->in[j]];
    for (int a = 0; a < c->m->naxes; a++)
      if (ib->pl.ax[a].kind == PLAN_PL_P) {
        snprintf(c->diagnosis, sizeof c->diagnosis,
                 "op '%s' (%s, not linear) ran on partial values of '%s' "
                 "(P along '%s'): its input must be reduced first (an "
                 "all-reduce or reduce-scatter before it; statically, "
                 "strategy.partial)",
                 op->name, plan_op_kind_name(op->kind),
                 c->prog->tensors[ib->tensor].name, c->m->axis_names[a]);
        return true;
      }
  }
  return false;
}

/* The op step that wrote `buf` ran on blocks its sharding rule does not
 * allow (the static check a lowered file skips): the rule's reason into
 * why, or false. A fused dim split while sharded lands here (the rule
 * makes a split dim need-replication). */
static bool rule_violation(const vctx *c, int buf, char *why, size_t whysz) {
  const vx_step *s = writer_op(c, buf);
  if (!s)
    return false;
  const vx_op *op = &c->prog->ops[s->op];
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_placement pin[PLAN_MAX_OPERANDS], pout[PLAN_MAX_OPERANDS];
  for (int j = 0; j < s->nin + s->nout; j++) {
    bool o = j >= s->nin;
    int k = o ? j - s->nin : j;
    const vx_buf *lb = &c->low->bufs[o ? s->out[k] : s->in[k]];
    const vx_tensor *t = &c->prog->tensors[lb->tensor];
    plan_shape *sh = o ? &out[k] : &in[k];
    sh->rank = t->rank;
    memcpy(sh->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    sh->dtype = t->dtype;
    if (o)
      pout[k] = lb->pl;
    else
      pin[k] = lb->pl;
  }
  char err[256] = "";
  /* only a rule the shapes build can be violated */
  bool bad =
      plan_op_factors(NULL, 0, op->kind, op->attrs, in, s->nin, out, s->nout,
                      err, sizeof err) >= 0 &&
      plan_op_check_placements(c->p, op->kind, op->attrs, in, pin, s->nin, out,
                               pout, s->nout, err, sizeof err) != PLAN_OK;
  if (bad)
    snprintf(why, whysz,
             "op '%s' ran on blocks its sharding rule does not "
             "allow (%s)",
             op->name, err);
  return bad;
}

/* Whether block b of tensor t equals the reference (within tolerance). */
static bool block_matches(const vctx *c, const vx_tensor *t, const block *b,
                          double rtol, double atol) {
  const double *ref = c->ref[t - c->prog->tensors];
  for (int64_t e = 0; e < b->n; e++) {
    double v = b->data[e], want = ref[plan_vx_global_index(t, b, e)];
    if (!(v == want || (isnan(v) && isnan(want)) ||
          fabs(v - want) <= atol + rtol * fabs(want)))
      return false;
  }
  return true;
}

/* Replicas that drift apart: along an R axis, the copies in a group differ
 * from each other. Names a rank that holds the reference and one that does
 * not, when there are such, and the step's broken rule when there is one. */
static bool diagnose_drift(vctx *c, int buf) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  double rtol = 0, atol = 0;
  if (c->o->mode == PLAN_VERIFY_FLOAT && plan_dtype_is_float(t->dtype))
    plan_vx_diag_tol(c, t, &rtol, &atol);
  for (int a = 0; a < c->m->naxes; a++) {
    if (lb->pl.ax[a].kind != PLAN_PL_R || c->m->axis_sizes[a] < 2)
      continue;
    int64_t groups = 0, drifted = 0, good = -1, bad = -1;
    for (int64_t r = 0; r < c->nranks; r++) {
      if (c->coords[r][a] != 0)
        continue;
      groups++;
      const block *b0 = &c->bufs[buf][r];
      int64_t coord[PLAN_MAX_MESH_AXES];
      memcpy(coord, c->coords[r], sizeof coord);
      bool differ = false;
      for (int64_t m = 1; m < c->m->axis_sizes[a]; m++) {
        coord[a] = m;
        const block *b = &c->bufs[buf][plan_vx_rank_at(c->m, coord)];
        for (int64_t e = 0; e < b->n && !differ; e++)
          differ = !(b->data[e] == b0->data[e] ||
                     (isnan(b->data[e]) && isnan(b0->data[e])));
      }
      if (!differ)
        continue;
      drifted++;
      for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) {
        coord[a] = m;
        int64_t q = plan_vx_rank_at(c->m, coord);
        bool ok = block_matches(c, t, &c->bufs[buf][q], rtol, atol);
        if (ok && good < 0)
          good = q;
        if (!ok && bad < 0)
          bad = q;
      }
    }
    if (!drifted)
      continue;
    int w = snprintf(c->diagnosis, sizeof c->diagnosis,
                     "the replicas of '%s' along '%s' drifted apart: they "
                     "differ from each other in %lld of %lld groups",
                     t->name, c->m->axis_names[a], (long long)drifted,
                     (long long)groups);
    if (good >= 0 && bad >= 0 && w > 0 && (size_t)w < sizeof c->diagnosis)
      w += snprintf(c->diagnosis + w, sizeof c->diagnosis - (size_t)w,
                    " (rank %lld holds the reference, rank %lld does not)",
                    (long long)good, (long long)bad);
    char why[400];
    if (w > 0 && (size_t)w < sizeof c->diagnosis &&
        rule_violation(c, buf, why, sizeof why))
      snprintf(c->diagnosis + w, sizeof c->diagnosis - (size_t)w, "; %s", why);
    return true;
  }
  return false;
}

/* The usual causes, from the numbers (docs/verify.md, "Diagnoses"). */
/* A constant ratio equal to an axis size (naming every axis that size). */
static bool diagnose_ratio(vctx *c, const diff *df, double rtol) {
  if (df->want != 0) {
    double ratio = df->got / df->want;
    /* exact mode: the ratio is exact; float mode: within the dtype's
     * tolerance (the same slack as the partial sums) */
    double rt = c->o->mode == PLAN_VERIFY_FLOAT ? rtol : 1e-9;
    for (int inv = 0; inv < 2; inv++) {
      char axes[256] = "";
      size_t u = 0;
      double k = 0;
      for (int a = 0; a < c->m->naxes; a++) {
        double ka = (double)c->m->axis_sizes[a];
        if (ka < 2)
          continue;
        bool hit = inv ? fabs(ratio * ka - 1) < rt : fabs(ratio - ka) < rt * ka;
        if (hit && (k == 0 || ka == k) && u < sizeof axes - 70) {
          k = ka;
          u += (size_t)snprintf(axes + u, sizeof axes - u, "%s'%s'",
                                u ? " or " : "", c->m->axis_names[a]);
        }
      }
      if (k == 0)
        continue;
      bool mb = c->low->pipe && (double)c->low->pipe->microbatches == k;
      if (!inv && mb)
        snprintf(c->diagnosis, sizeof c->diagnosis,
                 "values are %g times the reference, the size of axis %s, "
                 "the number of microbatches: each microbatch's loss a mean "
                 "over its own samples and the gradients summed over the "
                 "microbatches (accumulation must average them)",
                 k, axes);
      else if (!inv)
        snprintf(c->diagnosis, sizeof c->diagnosis,
                 "values are %g times the reference, the size of axis %s: a "
                 "reduction too many (a sum where a mean was needed, or a "
                 "value counted once per rank)",
                 k, axes);
      else
        snprintf(c->diagnosis, sizeof c->diagnosis,
                 "values are 1/%g of the reference, the size of axis %s: a "
                 "mean where a sum was needed, or a reduction missing",
                 k, axes);
      return true;
    }
  }
  return false;
}

void plan_vx_diagnose(vctx *c, int buf, const diff *df) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  const double *ref = c->ref[lb->tensor];
  c->diagnosis[0] = 0;
  /* how close a sum of partials must come: in float mode the ranks rounded
   * their partials to the dtype, so the test is on norms, with the slack
   * of the low-precision bound */
  double rtol = 1e-6, atol = 1e-6;
  if (c->o->mode == PLAN_VERIFY_FLOAT && plan_dtype_is_float(t->dtype)) {
    plan_vx_diag_tol(c, t, &rtol, &atol);
    rtol *= PLAN_VERIFY_LOWP_FACTOR;
  }
  /* a pipelined run hands back the blocks of microbatches that matched
   * before the first that did not: only the diagnoses that need no other
   * microbatch's blocks apply */
  bool whole = true;
  for (int64_t r = 0; r < c->nranks; r++)
    whole &= c->bufs[buf][r].data || c->bufs[buf][r].n <= 0;
  if (!whole) {
    if (!plan_vx_diagnose_microbatches(c, buf))
      diagnose_ratio(c, df, rtol);
    return;
  }
  if (diagnose_partial_input(c, buf) || plan_vx_diagnose_microbatches(c, buf))
    return;
  /* partial sums: along an R axis, the ranks' blocks sum to the reference */
  for (int a = 0; a < c->m->naxes; a++) {
    if (lb->pl.ax[a].kind != PLAN_PL_R || c->m->axis_sizes[a] < 2)
      continue;
    bool any = false, differ = false;
    double err2 = 0, want2 = 0, n = 0;
    for (int64_t r = 0; r < c->nranks; r++) {
      if (c->coords[r][a] != 0)
        continue;
      const block *b = &c->bufs[buf][r];
      int64_t coord[PLAN_MAX_MESH_AXES];
      memcpy(coord, c->coords[r], sizeof coord);
      for (int64_t e = 0; e < b->n; e++) {
        double s = 0, first = b->data[e];
        for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) {
          coord[a] = m;
          double v = c->bufs[buf][plan_vx_rank_at(c->m, coord)].data[e];
          s += v;
          differ |= v != first;
        }
        double want = ref[plan_vx_global_index(t, b, e)];
        err2 += (s - want) * (s - want);
        want2 += want * want;
        n++;
        any = true;
      }
    }
    bool all = sqrt(err2) <= rtol * sqrt(want2) + atol * sqrt(n);
    /* identical replicas are a wrong reduction, not a missing one */
    if (all && any && differ) {
      snprintf(c->diagnosis, sizeof c->diagnosis,
               "the ranks along '%s' hold partial sums of '%s': their sum is "
               "the reference, so a reduction over '%s' (an all-reduce) is "
               "missing",
               c->m->axis_names[a], t->name, c->m->axis_names[a]);
      return;
    }
  }
  if (diagnose_drift(c, buf))
    return;
  if (diagnose_ratio(c, df, rtol))
    return;
  if (diagnose_layout(c, buf) || diagnose_pieces(c, buf) ||
      diagnose_slices(c, buf))
    return;
  char why[400];
  if (rule_violation(c, buf, why, sizeof why)) {
    const vx_op *op = &c->prog->ops[writer_op(c, buf)->op];
    bool fused = op->kind == PLAN_OP_SPLIT || op->kind == PLAN_OP_CONCAT;
    snprintf(c->diagnosis, sizeof c->diagnosis, "%s%s", why,
             fused ? ": the fused dim is sharded, so each rank's block holds "
                     "a mix of the parts (the fused-QKV bug): split before "
                     "sharding, or gather first"
                   : "");
    return;
  }
  if (df->got == 0 && df->want != 0)
    snprintf(c->diagnosis, sizeof c->diagnosis,
             "zeros where the reference has values: a shard from the wrong "
             "group or rank, or a contribution that never arrived");
}
