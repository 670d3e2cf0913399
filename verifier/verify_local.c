/* Checks of each step on its own (docs/verify.md, "Op-local checks"): the
 * replicas a step writes agree bit for bit (every mode), and in float mode
 * each step's result is compared with what follows from the distributed
 * run's own inputs: an op against the reference kernel, in the dtype the
 * reference run computes it in, on its reassembled inputs; a collective
 * against its input's value. The bound of one step cannot widen with the
 * depth of the program. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"
#include "base/numeric.h"
#include "verify_ctx.h"

/* The slack of the op-local bounds (op_bound). */
#define PLAN_VERIFY_LOCAL_FACTOR 8.0

/* Unit roundoff of a float dtype. */
static double unit_of(plan_dtype d) {
  switch (d) {
  case PLAN_F64:
    return 0x1p-53;
  case PLAN_BF16:
    return 0x1p-8;
  case PLAN_F16:
    return 0x1p-11;
  default:
    return 0x1p-24;
  }
}

/* Half the spacing of the dtype's subnormals: what one rounding to it may
 * move a value below its smallest normal by, whatever the value (u |x|
 * bounds it only above). */
static double tiny_of(plan_dtype d) {
  switch (d) {
  case PLAN_F64:
    return 0x1p-1074 / 2;
  case PLAN_BF16:
    return 0x1p-134;
  case PLAN_F16:
    return 0x1p-25;
  default:
    return 0x1p-150;
  }
}

/* The first failure of a step's own check: it decides the verdict when the
 * end-to-end comparison does not (plan_vx_local_verdict). */
static void local_failure(vctx *c, int step, const char *op,
                          const char *tensor) {
  if (step >= c->local_fail)
    return;
  c->local_fail = step;
  c->local_is_op = c->low->steps[step].kind == VX_STEP_OP;
  c->local_op = op;
  c->local_tensor = tensor;
}

/* A step's name in a report: its op's, or "all_gather over 'tp'" (kept in
 * the records' arena). */
static const char *step_name(vctx *c, const vx_step *s) {
  if (s->kind == VX_STEP_OP)
    return c->prog->ops[s->op].name;
  if (s->kind != VX_STEP_REDIST)
    return s->kind == VX_STEP_TRANSFER ? "send/recv" : "input";
  char name[128];
  snprintf(name, sizeof name, "%s over '%s'",
           plan_vx_redist_kind_name(s->redist.kind),
           c->m->axis_names[s->redist.axis]);
  const char *nm = plan_arena_strdup(&c->rec_arena, name);
  return nm ? nm : "a collective";
}

/* ---- replicas ------------------------------------------------------------ */

/* The rank that rank r's block of buffer b is a replica of: r with
 * coordinate 0 on every R axis but a pipeline's microbatch axis. */
static int64_t replica_leader(const vctx *c, const vx_buf *lb, int64_t r) {
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  for (int a = 0; a < c->m->naxes; a++)
    if (lb->pl.ax[a].kind == PLAN_PL_R && a != c->mb_axis)
      coord[a] = 0;
  return plan_vx_rank_at(c->m, coord);
}

int plan_vx_check_replicas(vctx *c, int i) {
  const vx_step *s = &c->low->steps[i];
  if (c->comm) /* one rank per process: no replica here to compare */
    return PLAN_OK;
  for (int k = 0; k < s->nout; k++) {
    int b = s->out[k];
    const vx_buf *lb = &c->low->bufs[b];
    if (c->writer[b] > i) /* a chunked collective: slices still to come */
      continue;
    for (int64_t r = 0; r < c->nranks; r++) {
      int64_t q = replica_leader(c, lb, r);
      const block *x = &c->bufs[b][r], *y = &c->bufs[b][q];
      if (q == r || !plan_vx_runs(c, r) || !plan_vx_runs(c, q) || !x->data ||
          !y->data || x->n != y->n)
        continue;
      int64_t e = 0;
      while (e < x->n && (x->data[e] == y->data[e] ||
                          (isnan(x->data[e]) && isnan(y->data[e]))))
        e++;
      if (e == x->n)
        continue;
      const vx_tensor *t = &c->prog->tensors[lb->tensor];
      char pl[PLAN_PLACEMENT_STRLEN];
      plan_placement_format_in(pl, sizeof pl, c->p, &lb->pl);
      int64_t g = plan_vx_global_index(t, x, e);
      plan_buf_printf(&c->text,
                      "drifted: buffer '%s' (as %s), ranks %lld and %lld "
                      "differ at element %lld (got %.17g vs %.17g)\n",
                      t->name, pl, (long long)q, (long long)r, (long long)g,
                      y->data[e], x->data[e]);
      if (i < c->local_fail) {
        snprintf(c->local_diag, sizeof c->local_diag,
                 "drifted: buffer '%s' (as %s), ranks %lld and %lld differ at "
                 "element %lld (got %.17g vs %.17g); replicas computed by the "
                 "same kernels from the same inputs agree bit for bit",
                 t->name, pl, (long long)q, (long long)r, (long long)g,
                 y->data[e], x->data[e]);
        local_failure(c, i, step_name(c, s), t->name);
      }
      break; /* one report per buffer */
    }
  }
  return PLAN_OK;
}

/* ---- reassembling a buffer ----------------------------------------------- */

/* Element e of the partial group led by rank r, reduced (the general
 * path), and the magnitudes it adds into *m. */
static double group_element(const vctx *c, int b, const int *pa, int np,
                            int64_t r, int64_t e, double *m) {
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  double v;
  plan_vx_group_value(c, b, pa, np, 0, coord, e, &v);
  int64_t nmem = plan_vx_group_size(c->m, pa, np);
  *m = 0;
  for (int64_t k = 0; k < nmem; k++) {
    const block *q = &c->bufs[b][plan_vx_group_member(c->m, pa, np, coord, k)];
    if (q->data && e < q->n)
      *m += fabs(q->data[e]);
  }
  return v;
}

/* The rank with coordinate mb on the microbatch axis and 0 elsewhere (0
 * when mb < 0): where a whole buffer's value is, for microbatch mb. */
static int64_t mb_rank0(const vctx *c, int64_t mb) {
  int64_t coord[PLAN_MAX_MESH_AXES] = {0};
  if (mb >= 0)
    coord[c->mb_axis] = mb;
  return plan_vx_rank_at(c->m, coord);
}

/* Whether rank r takes part in microbatch mb (every rank when mb < 0). */
static bool in_mb(const vctx *c, int64_t r, int64_t mb) {
  return mb < 0 || c->coords[r][c->mb_axis] == mb;
}

/* The part of buffer b's tensor that microbatch mb's ranks hold, as a
 * block (its shape and offset): the whole tensor when mb < 0 or b is not
 * split along the microbatch axis, else the slice those ranks' blocks
 * cover. false when that slice is not one box (the microbatch axis nested
 * inside another on the same dim): not checked. */
static bool mb_region(const vctx *c, int b, int64_t mb, block *reg) {
  const vx_buf *lb = &c->low->bufs[b];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  memset(reg, 0, sizeof *reg);
  memcpy(reg->local, t->dims, sizeof(int64_t) * (size_t)t->rank);
  reg->n = plan_vx_count_of(t->dims, t->rank);
  if (mb < 0 || lb->pl.ax[c->mb_axis].kind != PLAN_PL_S)
    return true;
  int64_t lo[PLAN_MAX_RANK], hi[PLAN_MAX_RANK], held = 0;
  for (int d = 0; d < t->rank; d++) {
    lo[d] = t->dims[d];
    hi[d] = 0;
  }
  for (int64_t r = 0; r < c->nranks; r++) {
    const block *x = &c->bufs[b][r];
    if (!in_mb(c, r, mb) || x->n == 0)
      continue;
    for (int d = 0; d < t->rank; d++) {
      if (x->offset[d] < lo[d])
        lo[d] = x->offset[d];
      if (x->offset[d] + x->local[d] > hi[d])
        hi[d] = x->offset[d] + x->local[d];
    }
  }
  /* the distinct blocks (one per replica group) must fill the box */
  int pa[PLAN_MAX_MESH_AXES], np = plan_vx_partial_axes(lb, c->m->naxes, pa);
  for (int64_t r = 0; r < c->nranks; r++)
    if (in_mb(c, r, mb) && plan_vx_partial_leader(c, r, pa, np) &&
        replica_leader(c, lb, r) == r)
      held += c->bufs[b][r].n;
  for (int d = 0; d < t->rank; d++) {
    reg->offset[d] = hi[d] > lo[d] ? lo[d] : 0;
    reg->local[d] = hi[d] > lo[d] ? hi[d] - lo[d] : 0;
  }
  reg->n = plan_vx_count_of(reg->local, t->rank);
  return reg->n == held;
}

/* The index in region reg of local element k of block x. */
static int64_t region_index(int rank, const block *reg, const block *x,
                            int64_t k) {
  int64_t idx[PLAN_MAX_RANK] = {0}, g = 0;
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = x->local[d] ? k % x->local[d] : 0;
    k = x->local[d] ? k / x->local[d] : 0;
  }
  for (int d = 0; d < rank; d++)
    g = g * reg->local[d] + x->offset[d] - reg->offset[d] + idx[d];
  return g;
}

/* Buffer b's value over region reg (mb_region) into out, each element
 * from the first block that holds it, its partial group reduced; into mag
 * (may be NULL) the sum of the magnitudes the reduction added, the scale
 * its rounding errors have. mb >= 0 (pipelines): microbatch mb's blocks
 * only, its own part along the microbatch axis (a microbatch's gradient
 * is partial there: the sum over microbatches comes after). */
static void reassemble(const vctx *c, int b, int64_t mb, const block *reg,
                       double *out, double *mag) {
  const vx_buf *lb = &c->low->bufs[b];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int pa[PLAN_MAX_MESH_AXES], np = plan_vx_partial_axes(lb, c->m->naxes, pa);
  if (mb >= 0) { /* the microbatch's own part along the microbatch axis */
    int w = 0;
    for (int i = 0; i < np; i++)
      if (pa[i] != c->mb_axis)
        pa[w++] = pa[i];
    np = w;
  }
  for (int64_t r = 0; r < c->nranks; r++) {
    if (!in_mb(c, r, mb) || !plan_vx_partial_leader(c, r, pa, np) ||
        replica_leader(c, lb, r) != r)
      continue;
    const block *x = &c->bufs[b][r];
    const double *mem[64];
    int nmem = np ? plan_vx_sum_members(c, b, pa, np, r, mem, 64) : 0;
    /* rows along the innermost dim are contiguous in the block and in the
     * region: one index computation per row */
    int64_t row = t->rank ? x->local[t->rank - 1] : 1;
    const double *xd = x->data;
    if (!np && xd && row > 0) { /* no partial group: rows copied */
      for (int64_t e = 0; e < x->n; e += row) {
        int64_t g = region_index(t->rank, reg, x, e);
        memcpy(out + g, xd + e, sizeof(double) * (size_t)row);
        for (int64_t i = 0; mag && i < row; i++)
          mag[g + i] = fabs(xd[e + i]);
      }
      continue;
    }
    for (int64_t e0 = 0, e = 0, g = 0; x->data && row > 0 && e < x->n;
         e++, g++) {
      if (e == e0) {
        g = region_index(t->rank, reg, x, e);
        e0 += row;
      }
      double v = x->data[e], m = fabs(v);
      if (nmem > 0) {
        v = mem[0][e];
        m = fabs(v);
        for (int q = 1; q < nmem; q++) {
          v += mem[q][e];
          m += fabs(mem[q][e]);
        }
      } else if (np) {
        v = group_element(c, b, pa, np, r, e, &m);
      }
      out[g] = v;
      if (mag)
        mag[g] = m;
    }
  }
}

/* ---- comparing one step's result ----------------------------------------- */

typedef struct local_cmp {
  int64_t bad, n, at;
  double got, want, worst, err2, ref2;
  bool nonfinite;
} local_cmp;

/* The bound of one step: element i may differ by
 *   rel (|want_i| + mag_i) + acc RMS(want) + term terms_i
 * (mag_i: the magnitudes a partial result's reduction adds, else 0;
 * terms_i: the sum of the magnitudes of the terms a matmul or a
 * reduction adds, when terms is not NULL), and the whole by norm |want| + term
 * |terms| + rel |mag| (Frobenius: each part of a partial result rounds on
 * its own, so where the parts cancel their roundings are not small against
 * |want|). */
typedef struct local_bound {
  double rel, acc, norm, term;
  const double *terms;
  double floor; /* an absolute allowance per element: subnormal roundings */
} local_bound;

/* got against want (count elements; mag: the partials' magnitudes, or
 * NULL) within bound b. Integers compare exactly. */
static void compare_local(const double *got, const double *want,
                          const double *mag, int64_t count, bool is_float,
                          const local_bound *b, local_cmp *lc) {
  memset(lc, 0, sizeof *lc);
  lc->n = count;
  double s = 0;
  for (int64_t g = 0; g < count; g++)
    if (isfinite(want[g]))
      s += want[g] * want[g];
  double rms = count > 0 ? sqrt(s / (double)count) : 0, t2 = 0;
  for (int64_t g = 0; b->terms && g < count; g++)
    if (isfinite(b->terms[g]))
      t2 += b->terms[g] * b->terms[g];
  double m2 = 0; /* a partial result's parts each round: rel |parts| */
  for (int64_t g = 0; mag && g < count; g++)
    if (isfinite(mag[g]))
      m2 += mag[g] * mag[g];
  for (int64_t g = 0; g < count; g++) {
    double x = got[g], y = want[g];
    if (x == y || (isnan(x) && isnan(y)))
      continue;
    double ab = fabs(x - y);
    double lim = b->rel * (fabs(y) + (mag ? mag[g] : 0)) + b->acc * rms +
                 (b->terms ? b->term * b->terms[g] : 0) + b->floor;
    bool bad = !is_float || !isfinite(ab) || ab > lim;
    if (isfinite(ab)) {
      lc->err2 += ab * ab;
    } else {
      lc->nonfinite = true;
    }
    if (!bad)
      continue;
    double rel = lim > 0 ? ab / lim : INFINITY;
    if (!lc->bad++ || rel > lc->worst) {
      lc->worst = rel;
      lc->at = g;
      lc->got = x;
      lc->want = y;
    }
  }
  lc->ref2 = s;
  if (is_float && !lc->bad &&
      (lc->nonfinite ||
       sqrt(lc->err2) > b->norm * sqrt(s) + b->term * sqrt(t2) +
                            b->rel * sqrt(m2) + b->floor * sqrt((double)count)))
    lc->bad = -1; /* the norm clause */
}

static void report_local(vctx *c, int step, int64_t mb, const char *what,
                         const char *op, bool is_op, int b, const local_cmp *lc,
                         const local_bound *lb_, double k) {
  const vx_buf *lb = &c->low->bufs[b];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  char pl[PLAN_PLACEMENT_STRLEN], line[768];
  const char *q = is_op ? "op '" : "";
  plan_placement_format_in(pl, sizeof pl, c->p, &lb->pl);
  char own[64] = "";
  if (mb >= 0)
    snprintf(own, sizeof own, " in microbatch %lld", (long long)mb);
  if (lc->bad > 0)
    snprintf(line, sizeof line,
             "%s%s%s (tensor '%s', as %s) is not what follows from %s%s: "
             "%lld of %lld elements outside the "
             "local bound %.3g |want| + %.3g RMS (reduction length %g); "
             "element %lld got %.17g, want %.17g",
             q, op, is_op ? "'" : "", t->name, pl, what, own,
             (long long)lc->bad, (long long)lc->n, lb_->rel, lb_->acc, k,
             (long long)lc->at, lc->got, lc->want);
  else
    snprintf(line, sizeof line,
             "%s%s%s (tensor '%s', as %s) is not what follows from %s%s: "
             "relative error %.3g (Frobenius), "
             "outside the local bound %.3g (reduction length %g)",
             q, op, is_op ? "'" : "", t->name, pl, what, own,
             lc->ref2 > 0 ? sqrt(lc->err2 / lc->ref2) : INFINITY, lb_->norm, k);
  plan_buf_printf(&c->text, "NOT EQUAL locally: %s\n", line);
  if (step < c->local_fail) {
    snprintf(c->local_diag, sizeof c->local_diag, "%s", line);
    local_failure(c, step, op, t->name);
  }
}

/* Whether every rank holds buffer b whole (R on every axis): the block of
 * microbatch mb's first rank (mb_rank0) is its value. */
static bool whole(const vctx *c, int b, int64_t mb) {
  for (int a = 0; a < c->m->naxes; a++)
    if (c->low->bufs[b].pl.ax[a].kind != PLAN_PL_R)
      return false;
  return c->bufs[b][mb_rank0(c, mb)].data != NULL;
}

/* Buffer b's value over region reg, for microbatch mb: a whole buffer's
 * block (*own false), else reassembled into a fresh array (*own true),
 * with the partials' magnitudes into mag when not NULL. */
static int view_of(vctx *c, int b, int64_t mb, const block *reg, double **out,
                   bool *own, double *mag) {
  if (whole(c, b, mb) && !mag) {
    *out = c->bufs[b][mb_rank0(c, mb)].data;
    *own = false;
    return PLAN_OK;
  }
  if (!(*out = plan_vx_take_array(c, reg->n, true)))
    return PLAN_ENOMEM;
  *own = true;
  reassemble(c, b, mb, reg, *out, mag);
  return PLAN_OK;
}

/* An array of region reg's size back to the pool. */
static void give(vctx *c, const block *reg, double *data) {
  if (!data)
    return;
  block w = *reg;
  w.data = data;
  plan_vx_give_block(c, &w);
}

/* The bound of an op's result in tensor t, K its reduction length: the
 * same kernel on the same inputs gives the same bits but where the ranks
 * sum in another order. A partial result (split) rounds each rank's part:
 * 2 u (|want| + the parts' magnitudes); a reduction may round the other
 * way: 2 u |want|; both may accumulate in another order: 8 K u_acc RMS (u:
 * the output dtype's unit roundoff, u_acc: the kernel's accumulator's, f32
 * below f64). An elementwise op on whole blocks must match bit for bit but
 * for that last term. */
static local_bound op_bound(const vctx *c, const vx_tensor *t, double k,
                            bool split, bool partial_in, int64_t parts) {
  plan_dtype d = plan_vx_run_dtype(c, t);
  double u = unit_of(d), ua = d == PLAN_F64 ? 0x1p-53 : 0x1p-24;
  local_bound b;
  b.rel = split || k > 0 ? 2 * u : 0;
  b.acc = PLAN_VERIFY_LOCAL_FACTOR * fmax(k, 1) * ua;
  /* a linear op on partial inputs into a partial result: each rank read
   * its part as is, the reference kernel reads their sum, which a runner
   * may round to the dtype (the GPU runner does): u of each input, through
   * K terms */
  if (split && partial_in)
    b.acc = fmax(b.acc, PLAN_VERIFY_LOCAL_FACTOR * u * sqrt(fmax(k, 1)));
  b.norm = PLAN_VERIFY_LOCAL_FACTOR * u * sqrt(fmax(k, 1));
  /* a sum may cancel: its accumulation error scales with the magnitudes
   * of the terms it adds, not with the result (sum_terms) */
  b.term = PLAN_VERIFY_LOCAL_FACTOR * fmax(k, 1) * ua;
  b.terms = NULL;
  /* each rounding of rel's also errs by up to tiny below the dtype's
   * normals: the result's, and each rank's part of a partial one */
  b.floor = split || k > 0 ? (double)(parts + 1) * tiny_of(d) : 0;
  return b;
}

/* Whether op's result is a sum of terms each the product of one element
 * of each input (a matmul, a reduction's sum, an embedding's gradient):
 * then the kernel on the inputs' magnitudes gives the terms'. */
static bool sums_terms(const vx_op *op) {
  return op->kind == PLAN_OP_MATMUL || op->kind == PLAN_OP_LINEAR ||
         op->kind == PLAN_OP_REDUCE_SUM || op->kind == PLAN_OP_REDUCE_MEAN ||
         op->kind == PLAN_OP_EMBEDDING_GRAD;
}

/* Such an op's sums of the magnitudes of the terms each element adds: the
 * same kernel on the inputs' absolute values, into terms (room for region
 * out's elements). The bound of a sum that cancels (a gradient near zero
 * from terms far larger) follows from them. */
static int sum_terms(vctx *c, const vx_op *op, block *const *pin,
                     const block *out, double *terms) {
  block ab[PLAN_MAX_OPERANDS], *pab[PLAN_MAX_OPERANDS], to = *out;
  int rc = PLAN_OK, j = 0;
  for (; j < op->nin && !rc; j++) {
    ab[j] = *pin[j];
    if (!(ab[j].data = plan_vx_take_array(c, pin[j]->n, false))) {
      rc = PLAN_ENOMEM;
      break;
    }
    for (int64_t e = 0; e < pin[j]->n; e++)
      ab[j].data[e] = fabs(pin[j]->data[e]);
    pab[j] = &ab[j];
  }
  to.data = terms;
  block *pto = &to;
  if (!rc)
    rc = plan_vx_run_op(c, op, pab, &pto);
  while (j-- > 0)
    plan_vx_give_block(c, &ab[j]);
  return rc;
}

/* An op step: the reference kernel on the reassembled inputs (in the
 * op's dtype, as the reference run: the same kernel on the same inputs
 * differs from the ranks' result only where the op's reduction is split
 * over ranks, each partial rounded on its own; an f64 kernel would need a
 * bound for the op's conditioning, as a layernorm's backward loses digits
 * to cancellation in f32), its
 * results against the reassembled outputs, within op_bound. */
static int check_op(vctx *c, int i, int64_t mb, const char *what) {
  const vx_step *s = &c->low->steps[i];
  const vx_op *op = &c->prog->ops[s->op];
  bool all_whole = true;
  for (int j = 0; j < s->nin + s->nout; j++)
    all_whole &= whole(c, j < s->nin ? s->in[j] : s->out[j - s->nin], mb);
  if (all_whole) /* a rank ran the reference kernel on these very inputs;
                    its replicas are checked bit for bit */
    return PLAN_OK;
  /* each operand's region: the whole tensor, or microbatch mb's slice */
  block win[PLAN_MAX_OPERANDS], wout[PLAN_MAX_OPERANDS];
  for (int j = 0; j < s->nin + s->nout; j++)
    if (!mb_region(c, j < s->nin ? s->in[j] : s->out[j - s->nin], mb,
                   j < s->nin ? &win[j] : &wout[j - s->nin]))
      return PLAN_OK; /* not one box: not checked */
  double *in[PLAN_MAX_OPERANDS] = {0}, *want[PLAN_MAX_OPERANDS] = {0};
  double *got[PLAN_MAX_OPERANDS] = {0}, *mag[PLAN_MAX_OPERANDS] = {0};
  bool own_in[PLAN_MAX_OPERANDS] = {0}, own_got[PLAN_MAX_OPERANDS] = {0};
  block *pin[PLAN_MAX_OPERANDS], *pout[PLAN_MAX_OPERANDS];
  int rc = PLAN_OK;
  for (int j = 0; j < s->nin && !rc; j++) {
    rc = view_of(c, s->in[j], mb, &win[j], &in[j], &own_in[j], NULL);
    win[j].data = in[j];
    pin[j] = &win[j];
  }
  for (int k = 0; k < s->nout && !rc; k++) {
    bool split =
        plan_vx_partial_axes(&c->low->bufs[s->out[k]], c->m->naxes, NULL) > 0;
    if (!(want[k] = plan_vx_take_array(c, wout[k].n, true)) ||
        (split && !(mag[k] = plan_vx_take_array(c, wout[k].n, true))))
      rc = PLAN_ENOMEM;
    else
      rc = view_of(c, s->out[k], mb, &wout[k], &got[k], &own_got[k], mag[k]);
    wout[k].data = want[k];
    pout[k] = &wout[k];
  }
  if (!rc) /* as the reference run computes it: in the op's dtype */
    rc = plan_vx_run_op(c, op, pin, pout);
  double red = plan_vx_op_reduction_length(c->prog, op);
  bool partial_in = false;
  for (int j = 0; j < s->nin; j++)
    partial_in |=
        plan_vx_partial_axes(&c->low->bufs[s->in[j]], c->m->naxes, NULL) > 0;
  for (int k = 0; k < s->nout && !rc; k++) {
    const vx_tensor *t = &c->prog->tensors[op->out[k]];
    int pa[PLAN_MAX_MESH_AXES];
    int np = plan_vx_partial_axes(&c->low->bufs[s->out[k]], c->m->naxes, pa);
    int64_t parts = 1;
    for (int a = 0; a < np; a++)
      parts *= c->m->axis_sizes[pa[a]];
    local_bound b = op_bound(c, t, red, mag[k] != NULL, partial_in, parts);
    local_cmp lc;
    bool is_float = plan_dtype_is_float(t->dtype);
    compare_local(got[k], want[k], mag[k], wout[k].n, is_float, &b, &lc);
    if (lc.bad && is_float && sums_terms(op)) {
      double *terms = plan_vx_take_array(c, wout[k].n, false);
      if (!terms || (rc = sum_terms(c, op, pin, &wout[k], terms))) {
        rc = rc ? rc : PLAN_ENOMEM;
        give(c, &wout[k], terms);
        break;
      }
      b.terms = terms;
      compare_local(got[k], want[k], mag[k], wout[k].n, is_float, &b, &lc);
      give(c, &wout[k], terms);
    }
    lc.at = plan_vx_global_index(t, &wout[k], lc.at);
    if (lc.bad)
      report_local(c, i, mb, what, op->name, true, s->out[k], &lc, &b, red);
  }
  for (int j = 0; j < s->nin; j++)
    if (own_in[j])
      give(c, &win[j], in[j]);
  for (int k = 0; k < s->nout; k++) {
    give(c, &wout[k], want[k]);
    give(c, &wout[k], mag[k]);
    if (own_got[k])
      give(c, &wout[k], got[k]);
  }
  return rc;
}

/* A collective: its output holds its input's tensor in another placement,
 * so their reassembled values agree up to the order of a reduction's sum
 * of doubles. A pipeline's transfer (a send/recv: a copy of one
 * microbatch's blocks) too. */
static int check_redist(vctx *c, int i, int64_t mb, const char *what) {
  const vx_step *s = &c->low->steps[i];
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  block rin, rout;
  /* over the microbatch axis, or slices that differ: not one microbatch's */
  if ((mb >= 0 && s->kind == VX_STEP_REDIST && s->redist.axis == c->mb_axis) ||
      !mb_region(c, s->in[0], mb, &rin) ||
      !mb_region(c, s->out[0], mb, &rout) || rin.n != rout.n ||
      memcmp(rin.offset, rout.offset, sizeof rin.offset))
    return PLAN_OK;
  int64_t n = rout.n;
  double *want = plan_vx_take_array(c, n, true);
  double *mag = want ? plan_vx_take_array(c, n, true) : NULL;
  double *got = mag ? plan_vx_take_array(c, n, true) : NULL;
  int rc = got ? PLAN_OK : PLAN_ENOMEM;
  if (!rc) {
    reassemble(c, s->in[0], mb, &rin, want, mag);
    reassemble(c, s->out[0], mb, &rout, got, NULL);
    /* a reduction sums k doubles, in another order than reassemble */
    vx_redist_kind kd = s->redist.kind;
    double k = kd == VX_REDIST_ALL_REDUCE || kd == VX_REDIST_REDUCE_SCATTER
                   ? (double)c->m->axis_sizes[s->redist.axis]
                   : 1;
    local_bound b = {PLAN_VERIFY_LOCAL_FACTOR * 0x1p-53 * k,
                     0,
                     PLAN_VERIFY_LOCAL_FACTOR * 0x1p-53 * k,
                     0,
                     NULL,
                     0};
    local_cmp lc;
    compare_local(got, want, mag, n, plan_dtype_is_float(t->dtype), &b, &lc);
    lc.at = plan_vx_global_index(t, &rout, lc.at);
    if (lc.bad) {
      report_local(c, i, mb, what, step_name(c, s), false, s->out[0], &lc, &b,
                   k);
    }
  }
  give(c, &rout, want);
  give(c, &rout, mag);
  give(c, &rout, got);
  return rc;
}

/* ---- exact mode: steps the run's values cannot check -----------------------
 */

/* Whether buffer b holds a manual region's traced tensor (no reference
 * value: check_traced). */
static bool traced(const vctx *c, int b) {
  return c->low->norig_tensors > 0 &&
         c->low->bufs[b].tensor >= c->low->norig_tensors;
}

/* Whether step s is one collective that moves one tensor to another
 * placement (what check_redist checks); not one chunk of a chunked one,
 * whose result is whole only with its last slice. */
static bool same_tensor_redist(const vctx *c, const vx_step *s) {
  return s->kind == VX_STEP_REDIST && s->nin == 1 && s->nout == 1 &&
         !s->chunk_of &&
         c->low->bufs[s->in[0]].tensor == c->low->bufs[s->out[0]].tensor;
}

/* The first output of step s that is sharded or partial (not whole on
 * every rank) and whose every reference value is one and the same: no
 * layout of it can be told from another by those values (a softmax that
 * exact mode's integer inputs saturate to one-hot has a backward of
 * zeros). -1 when none. */
static int constant_output(const vctx *c, const vx_step *s) {
  for (int k = 0; k < s->nout; k++) {
    const vx_buf *lb = &c->low->bufs[s->out[k]];
    if (traced(c, s->out[k])) /* check_traced */
      continue;
    const vx_tensor *t = &c->prog->tensors[lb->tensor];
    const double *ref = c->ref ? c->ref[lb->tensor] : NULL;
    bool sharded = false;
    for (int a = 0; a < c->m->naxes; a++)
      sharded |= lb->pl.ax[a].kind != PLAN_PL_R && c->m->axis_sizes[a] > 1;
    int64_t n = plan_vx_count_of(t->dims, t->rank);
    if (!sharded || !ref || n < 2 || !plan_dtype_is_float(t->dtype))
      continue;
    int64_t e = 1;
    while (e < n && ref[e] == ref[0])
      e++;
    if (e == n)
      return k;
  }
  return -1;
}

/* Rank r's fresh block of input buffer b: exact mode's values (small
 * integers) under another key, so the shards tile one tensor and the
 * replicas agree; along P(sum) axes the value is on the group's first
 * rank, zeros on the others (their sum), along another reduction's on
 * every rank. */
static void fresh_block(const vctx *c, int b, int64_t r, block *x) {
  const vx_buf *lb = &c->low->bufs[b];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  int sa[PLAN_MAX_MESH_AXES], ns = 0;
  for (int a = 0; a < c->m->naxes; a++)
    if (lb->pl.ax[a].kind == PLAN_PL_P && lb->pl.ax[a].reduce == PLAN_RED_SUM)
      sa[ns++] = a;
  bool lead = plan_vx_partial_leader(c, r, sa, ns);
  plan_input_spec spec = {PLAN_INPUT_EXACT, 0, 0};
  uint64_t key = plan_input_tensor_key(t->name) ^ 0x9e3779b97f4a7c15ull;
  for (int64_t k = 0; k < x->n; k++)
    x->data[k] = lead ? plan_input_value(c->o->seed, key,
                                         plan_vx_global_index(t, x, k), &spec)
                      : 0;
}

/* Exact mode compares with ==, but a tensor whose values are all equal
 * holds the same values in every layout: a shard on the wrong dim, or
 * blocks in the wrong order, of that tensor goes unseen. A step that
 * writes one (constant_output) is run once more on fresh inputs (its
 * float inputs drawn anew, fresh_block; integer ones as the run made
 * them), and the reference kernel on the reassembled fresh inputs must
 * give its reassembled outputs (check_op). A collective over such a
 * tensor (a gradient of zeros summed twice) is run on fresh blocks of its
 * input the same way, and must give what they reassemble to
 * (check_redist). In a pipeline, a stage's step is checked on the blocks
 * of the microbatch mb it has just run for (the rest, mb < 0, once). Not
 * when distributed (no rank's blocks here but its own). */
static int check_fresh(vctx *c, int i, int64_t mb) {
  const vx_step *s = &c->low->steps[i];
  const vx_pipe *pp = c->low->pipe;
  bool redist = same_tensor_redist(c, s);
  bool whole =
      !pp || pp->phase[i] == VX_PHASE_PRE || pp->phase[i] == VX_PHASE_POST;
  if (c->o->mode != PLAN_VERIFY_EXACT || c->comm ||
      (s->kind != VX_STEP_OP && !redist) || whole != (mb < 0))
    return PLAN_OK;
  int k0 = constant_output(c, s);
  if (k0 < 0)
    return PLAN_OK;
  int n = s->nin + s->nout, rc = PLAN_OK;
  block *saved[PLAN_MAX_OPERANDS * 2] = {0},
                                   *fresh[PLAN_MAX_OPERANDS * 2] = {0};
  for (int j = 0; j < n && !rc; j++) {
    int b = j < s->nin ? s->in[j] : s->out[j - s->nin];
    const vx_tensor *t = &c->prog->tensors[c->low->bufs[b].tensor];
    bool dup = false; /* an operand read twice: drawn once */
    for (int q = 0; q < j; q++)
      dup |= b == (q < s->nin ? s->in[q] : s->out[q - s->nin]);
    if (dup || (j < s->nin && !plan_dtype_is_float(t->dtype)))
      continue;
    if (!(fresh[j] = calloc((size_t)c->nranks, sizeof(block)))) {
      rc = plan_oom();
      break;
    }
    for (int64_t r = 0; r < c->nranks && !rc; r++) {
      fresh[j][r] = c->bufs[b][r];
      fresh[j][r].data = NULL;
      if (!c->bufs[b][r].data)
        continue;
      if (!(fresh[j][r].data = plan_vx_take_array(c, fresh[j][r].n, true)))
        rc = PLAN_ENOMEM;
      else if (j < s->nin)
        fresh_block(c, b, r, &fresh[j][r]);
    }
    saved[j] = c->bufs[b];
    c->bufs[b] = fresh[j];
  }
  if (!rc) { /* the step as the run ran it, but for a faulty runner's hook */
    plan_verify_step_hook hook = c->hook;
    c->hook = NULL;
    rc = plan_vx_exec_step(c, i);
    c->hook = hook;
  }
  if (!rc) {
    char what[256];
    snprintf(what, sizeof what,
             "fresh inputs (exact mode: in the run every element of tensor "
             "'%s' was equal, so no layout of it could be told apart)",
             c->prog->tensors[c->low->bufs[s->out[k0]].tensor].name);
    rc = redist ? check_redist(c, i, mb, what) : check_op(c, i, mb, what);
  }
  for (int j = n - 1; j >= 0; j--) {
    if (!fresh[j])
      continue;
    int b = j < s->nin ? s->in[j] : s->out[j - s->nin];
    if (saved[j])
      c->bufs[b] = saved[j];
    for (int64_t r = 0; r < c->nranks; r++)
      if (fresh[j][r].data)
        plan_vx_give_block(c, &fresh[j][r]);
    free(fresh[j]);
  }
  return rc;
}

/* Exact mode: a manual region's traced tensor has no reference value to
 * compare (only the program's own tensors have one), so the step that
 * writes it is checked against the reference kernel on the run's own
 * inputs, as float mode checks every step: a traced buffer declared in a
 * placement its step does not make is seen there. */
static int check_traced(vctx *c, int i, int64_t mb) {
  const vx_step *s = &c->low->steps[i];
  bool any = false;
  for (int k = 0; k < s->nout; k++)
    any |= traced(c, s->out[k]);
  if (!any || c->comm)
    return PLAN_OK;
  if (s->kind == VX_STEP_OP)
    return check_op(c, i, mb, "the distributed run's own inputs");
  if (same_tensor_redist(c, s))
    return check_redist(c, i, mb, "the distributed run's own input");
  return PLAN_OK;
}

int plan_vx_check_local(vctx *c, int i, int64_t mb) {
  if (!c->local_on) {
    int rc = c->o->mode == PLAN_VERIFY_EXACT ? check_traced(c, i, mb) : 0;
    return rc ? rc : check_fresh(c, i, mb);
  }
  /* a pipelined step of the schedule is checked microbatch by microbatch,
   * as it runs (mb >= 0); before and after the schedule, once (mb < 0) */
  const vx_pipe *pp = c->low->pipe;
  if (pp && mb < 0 && pp->phase[i] != VX_PHASE_PRE &&
      pp->phase[i] != VX_PHASE_POST)
    return PLAN_OK;
  const vx_step *s = &c->low->steps[i];
  if (s->kind == VX_STEP_OP)
    return check_op(c, i, mb, "the distributed run's own inputs");
  if (s->kind == VX_STEP_REDIST && s->nin == 1 && s->nout == 1 &&
      !s->chunk_of) /* a chunk's result is whole with its last slice */
    return check_redist(c, i, mb, "the distributed run's own input");
  /* a receive holds what its stage's sender computed for the microbatch */
  if (s->kind == VX_STEP_TRANSFER && mb >= 0)
    return check_redist(c, i, mb, "what the sending stage computed");
  return PLAN_OK; /* an input: the verifier's own values; a send/recv */
}

bool plan_vx_local_accepts(const vctx *c, int buf, const diff *df) {
  if (!c->local_on || df->bad_nonfinite || c->writer[buf] < 0 ||
      c->writer[buf] >= c->local_fail)
    return false;
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[buf].tensor];
  if (!plan_dtype_is_float(t->dtype))
    return false;
  plan_dtype d = plan_vx_run_dtype(c, t);
  int cd = c->policy ? c->low->training.compute_dtype : -1;
  return d == PLAN_BF16 || d == PLAN_F16 || cd == PLAN_BF16 || cd == PLAN_F16;
}

void plan_vx_local_verdict(vctx *c) {
  /* The end-to-end diagnosis of the same step says more; an earlier op's
   * own failure is the first divergence (drift hid it end to end). A
   * collective's stays with the op that reads its result, as the
   * end-to-end comparison names it (docs/verify.md, "Diagnoses"). */
  if (c->local_fail == INT_MAX ||
      (!c->equal && (c->first_step <= c->local_fail || !c->local_is_op)))
    return;
  c->equal = 0;
  c->first_op = c->local_op;
  c->first_tensor = c->local_tensor;
  snprintf(c->diagnosis, sizeof c->diagnosis, "%s", c->local_diag);
}
