/* Comparing the lowered run with the reference: every replica of a
 * buffer, a partial group reduced first; each compared tensor recorded and
 * reported in topological order, the first mismatch naming the first
 * divergent op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

/* got against want (element g of a tensor): is_float whether the tensor
 * is, exact whether the mode is; rtol and atol its float-mode tolerance,
 * rms its reference's RMS. */
static inline void compare_value(bool is_float, bool exact, double got,
                                 double want, int64_t g, double rtol,
                                 double atol, double rms, diff *df) {
  df->compared++;
  bool bad;
  double ab = fabs(got - want);
  if (got == want || (isnan(got) && isnan(want))) {
    bad = false; /* identical, infinities included; or a NaN the program
                    makes too (0/0 from its inputs) */
  } else if (!is_float) {
    bad = true;
  } else if (exact) {
    /* beyond 2^53 a double holds no more integers: sums round there, and
     * their order shows in the last bits; such elements agree to 2^-40 */
    bad = !(fabs(want) >= 0x1p53 && ab <= 0x1p-40 * fabs(want));
  } else {
    bad = !(ab <= atol + rtol * fabs(want));
    if (isfinite(ab)) {
      df->err2 += ab * ab;
      df->ref2 += want * want;
    }
    if (bad) {
      double sc = ab / (fabs(want) + rms);
      if (!isfinite(ab))
        df->bad_nonfinite = true;
      else if (sc > df->max_scaled)
        df->max_scaled = sc;
    }
  }
  if (!bad)
    return;
  df->mismatches++;
  double rel = want != 0 ? ab / fabs(want) : ab;
  if (df->mismatches == 1 || ab > df->max_abs) {
    df->max_abs = ab;
    df->at = g;
    df->got = got;
    df->want = want;
  }
  if (rel > df->max_rel)
    df->max_rel = rel;
}

/* The reduced block of the group of ranks that differ from `base` only on
 * the partial axes pa[from..np): reduced one axis at a time, last first. */
void plan_vx_group_value(const vctx *c, int buf, const int *pa, int np,
                         int from, int64_t *coord, int64_t li, double *out) {
  if (from == np) {
    *out = c->bufs[buf][plan_vx_rank_at(c->m, coord)].data[li];
    return;
  }
  int a = pa[from];
  plan_reduce op = (plan_reduce)c->low->bufs[buf].pl.ax[a].reduce;
  int64_t keep = coord[a];
  double acc = 0;
  for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) {
    coord[a] = m;
    double v;
    plan_vx_group_value(c, buf, pa, np, from + 1, coord, li, &v);
    acc = m ? plan_reduce2(op, acc, v) : v;
  }
  if (op == PLAN_RED_AVG)
    acc /= (double)c->m->axis_sizes[a];
  coord[a] = keep;
  *out = acc;
}

/* Whether rank r is its partial group's representative (coordinate 0 on
 * every partial axis): group_value reduces the group from there. */
bool plan_vx_partial_leader(const vctx *c, int64_t r, const int *pa, int np) {
  for (int i = 0; i < np; i++)
    if (c->coords[r][pa[i]] != 0)
      return false;
  return true;
}

static void compare_blocks(const vctx *c, int buf, int64_t mb, diff *df);

/* Compares every replica of buffer `buf` with the reference. */
int plan_vx_compare_buffer(vctx *c, int buf, diff *df) {
  memset(df, 0, sizeof *df);
  if (!c->comm) {
    compare_blocks(c, buf, -1, df);
    return PLAN_OK;
  }
  int rc = plan_vx_dist_gather_partial(c, buf);
  if (!rc)
    compare_blocks(c, buf, -1, df);
  plan_vx_dist_drop_partial(c, buf);
  return rc ? rc : plan_vx_dist_merge_one(c, df);
}

/* The f64 reference's measure of one element: got v, want the reference's,
 * r64 the f64 reference's. */
static inline void add64(double v, double want, double r64, diff *df) {
  double dg = v - r64, dr = want - r64;
  if (isfinite(v) && isfinite(want) && isfinite(r64)) {
    df->err64 += dg * dg;
    df->base64 += dr * dr;
  } else if (!(v == want || (isnan(v) && isnan(want)))) {
    df->nonfinite = true;
  }
}

/* The comparison of buffer buf's blocks (those of microbatch mb when mb
 * >= 0), added to *df. */
static void compare_blocks(const vctx *c, int buf, int64_t mb, diff *into) {
  const vx_buf *lb = &c->low->bufs[buf];
  /* the sums in a local (registers, not stores through a pointer that
   * might alias the blocks), the arrays read once */
  diff acc = *into, *df = &acc;
  const double *ref = c->ref[lb->tensor];
  const double *ref64 = c->ref64 ? c->ref64[lb->tensor] : NULL;
  double rtol, atol, rms = c->rms[lb->tensor];
  plan_vx_default_tol(c, &c->prog->tensors[lb->tensor], &rtol, &atol);
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  bool is_float = plan_dtype_is_float(t->dtype);
  bool exact = c->o->mode == PLAN_VERIFY_EXACT;
  int pa[PLAN_MAX_MESH_AXES], np = plan_vx_partial_axes(lb, c->m->naxes, pa);
  /* pipelines: the copies of a value along the microbatch axis are made
   * by running the same steps on the same blocks (params, the sums over
   * microbatches): compared once */
  bool mb_once = c->mb_axis >= 0 && lb->pl.ax[c->mb_axis].kind == PLAN_PL_R;
  for (int64_t r = 0; r < c->nranks; r++) {
    /* one representative per group, in the process that runs it */
    if (!plan_vx_partial_leader(c, r, pa, np) || !plan_vx_owned(c, r))
      continue;
    if ((mb_once && c->coords[r][c->mb_axis] != 0) ||
        (mb >= 0 && c->coords[r][c->mb_axis] != mb))
      continue;
    const block *b = &c->bufs[buf][r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    /* a group of partial sums: its members' blocks, summed flat (the
     * general path reduces axis by axis, element by element) */
    const double *mem[64];
    int nmem = np ? plan_vx_sum_members(c, buf, pa, np, r, mem, 64) : 0;
    /* rows along the innermost dim are contiguous in both the block and
     * the global tensor: one index computation per row */
    int64_t row = t->rank ? b->local[t->rank - 1] : 1;
    for (int64_t e = 0; row > 0 && e < b->n; e += row) {
      int64_t g = plan_vx_global_index(t, b, e);
      for (int64_t i = 0; i < row; i++) {
        double v;
        if (!np) {
          v = b->data[e + i];
        } else if (nmem > 0) {
          v = mem[0][e + i];
          for (int q = 1; q < nmem; q++)
            v += mem[q][e + i];
        } else {
          plan_vx_group_value(c, buf, pa, np, 0, coord, e + i, &v);
        }
        compare_value(is_float, exact, v, ref[g + i], g + i, rtol, atol, rms,
                      df);
        if (ref64)
          add64(v, ref[g + i], ref64[g + i], df);
      }
    }
  }
  *into = acc;
}

/* Exact mode is exact while a double holds every value on its grid: the
 * ops computed whole round to 2^-10, a product of two such values is on
 * 2^-20, so past 2^33 a sum or product can round, the same in both runs
 * only by chance. A bug makes a difference of the values' own size; a
 * rounding of values that large, one below 2^-40 of them (53 bits, with
 * up to 2^13 roundings gathered). */
#define PLAN_VERIFY_EXACT_RANGE 0x1p33
#define PLAN_VERIFY_EXACT_ROUNDING 0x1p-40

void plan_vx_exact_lost(vctx *c, int buf, const diff *df) {
  const vx_buf *lb = &c->low->bufs[buf];
  /* the largest value the step that wrote buf read or made */
  int t = lb->tensor, at = t;
  double big = c->refmax[t];
  int step = c->writer ? c->writer[buf] : -1;
  if (step >= 0 && c->low->steps[step].kind == VX_STEP_OP) {
    const vx_op *op = &c->prog->ops[c->low->steps[step].op];
    for (int pass = 0; pass < 2; pass++)
      for (int j = 0; j < (pass ? op->nout : op->nin); j++) {
        int u = pass ? op->out[j] : op->in[j];
        if (c->refmax[u] > big) {
          big = c->refmax[u];
          at = u;
        }
      }
  }
  if (!(big >= PLAN_VERIFY_EXACT_RANGE) || !isfinite(df->max_abs) ||
      df->max_abs > PLAN_VERIFY_EXACT_ROUNDING * big)
    return;
  snprintf(c->exact_lost, sizeof c->exact_lost,
           "exact mode cannot be exact here: tensor '%s' reaches %.3g, past "
           "the 2^33 up to which its sums and products stay exact in a "
           "double, and the runs first differ at '%s' by %.3g, %.2g of "
           "that: a double's rounding, not a bug; verify it in float mode "
           "(--mode float)",
           c->prog->tensors[at].name, big, c->prog->tensors[t].name,
           df->max_abs, df->max_abs / big);
}

/* The record just made is within a bound: no mismatches count. */
static void accepted(vctx *c, const char *what) {
  if (c->nrecs && c->recs[c->nrecs - 1].tensor &&
      c->recs[c->nrecs - 1].what == what)
    c->recs[c->nrecs - 1].mismatches = 0;
}

void plan_vx_report_tensor(vctx *c, const char *what, const char *opname,
                           int buf, const diff *df) {
  const vx_buf *lb = &c->low->bufs[buf];
  const vx_tensor *t = &c->prog->tensors[lb->tensor];
  char pl[PLAN_PLACEMENT_STRLEN];
  plan_placement_format_in(pl, sizeof pl, c->p, &lb->pl);
  if (c->nrecs == c->cap_recs) {
    int cap = c->cap_recs ? c->cap_recs * 2 : 64;
    plan_vrecord *n = realloc(c->recs, sizeof *n * (size_t)cap);
    if (n) {
      c->recs = n;
      c->cap_recs = cap;
    }
  }
  if (c->nrecs < c->cap_recs) { /* on OOM the record is left out */
    plan_vrecord *r = &c->recs[c->nrecs++];
    r->what = what;
    r->step = c->low->train ? c->step + 1 : 0;
    r->op = plan_arena_strdup(&c->rec_arena, opname);
    r->tensor = plan_arena_strdup(&c->rec_arena, t->name);
    r->placement = plan_arena_strdup(&c->rec_arena, pl);
    r->dtype = plan_dtype_name(plan_vx_run_dtype(c, t));
    r->mismatches = df->mismatches;
    r->compared = df->compared;
    r->max_abs = df->max_abs;
    r->max_rel = df->max_rel;
    r->at = df->at;
    r->got = df->got;
    r->want = df->want;
    if (!r->op || !r->tensor || !r->placement)
      c->nrecs--;
  }
  if (df->mismatches && c->o->mode == PLAN_VERIFY_FLOAT &&
      plan_vx_depth_bound(c, t, df)) {
    plan_buf_printf(
        &c->text,
        "within bound %s '%s' (%s, as %s): %lld of %lld elements "
        "are outside the %s tolerance, but the relative error, "
        "%.3g (Frobenius) and %.3g (largest), is within the "
        "depth bound %.3g (reduction length %g)\n",
        what, t->name, opname, pl, (long long)df->mismatches,
        (long long)df->compared, plan_dtype_name(plan_vx_run_dtype(c, t)),
        df->ref2 > 0 ? sqrt(df->err2 / df->ref2) : 0, df->max_scaled,
        plan_vx_depth_eps(c, t), c->depth[lb->tensor]);
    accepted(c, what);
    return;
  }
  if (df->mismatches && !plan_vx_low_precision_bound(c, t, df) &&
      plan_vx_local_accepts(c, buf, df)) {
    plan_buf_printf(&c->text,
                    "within bound %s '%s' (%s, as %s): %lld of %lld elements "
                    "are outside the %s tolerance, but every step up to it "
                    "is within its op-local bound: rounding drift\n",
                    what, t->name, opname, pl, (long long)df->mismatches,
                    (long long)df->compared,
                    plan_dtype_name(plan_vx_run_dtype(c, t)));
    accepted(c, what);
    return;
  }
  if (df->mismatches && plan_vx_low_precision_bound(c, t, df)) {
    plan_buf_printf(&c->text,
                    "within bound %s '%s' (%s, as %s): %lld of %lld elements "
                    "are outside the %s tolerance, but the error against an "
                    "f64 reference, %g, is within %g times the "
                    "single-device program's own, %g\n",
                    what, t->name, opname, pl, (long long)df->mismatches,
                    (long long)df->compared,
                    plan_dtype_name(plan_vx_run_dtype(c, t)), sqrt(df->err64),
                    PLAN_VERIFY_LOWP_FACTOR, sqrt(df->base64));
    accepted(c, what);
    return;
  }
  if (!df->mismatches)
    return;
  if (c->equal) {
    if (c->o->mode == PLAN_VERIFY_EXACT)
      plan_vx_exact_lost(c, buf, df);
    c->equal = 0;
    c->first_op = opname;
    c->first_tensor = t->name;
    c->first_step = c->writer ? c->writer[buf] : -1;
    if (c->comm) /* the diagnoses read every rank's blocks */
      snprintf(c->diagnosis, sizeof c->diagnosis,
               "not made when distributed (each process holds one rank's "
               "blocks); verify in one process to diagnose");
    else
      plan_vx_diagnose(c, buf, df);
  }
  plan_buf_printf(&c->text,
                  "NOT EQUAL %s '%s' (%s, as %s): %lld of %lld elements "
                  "differ; largest abs error %g at global index %lld (got "
                  "%.17g, want %.17g); largest rel error %g\n",
                  what, t->name, opname, pl, (long long)df->mismatches,
                  (long long)df->compared, df->max_abs, (long long)df->at,
                  df->got, df->want, df->max_rel);
}

/* Compares buffer `buf` (microbatch mb's blocks when mb >= 0) into *df;
 * the f64 reference of the low-precision bound is computed the first time
 * a low-precision tensor misses its tolerance (a whole second reference
 * run, so only when it can change the answer). */
static int compare_some(vctx *c, int buf, int64_t mb, diff *df) {
  memset(df, 0, sizeof *df);
  compare_blocks(c, buf, mb, df);
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[buf].tensor];
  if (!df->mismatches || c->ref64 || c->o->mode != PLAN_VERIFY_FLOAT ||
      !plan_dtype_is_float(t->dtype) || plan_vx_run_dtype(c, t) == PLAN_F64 ||
      plan_vx_depth_bound(c, t, df))
    return PLAN_OK;
  int rc = plan_vx_run_reference64(c);
  if (!rc) { /* again, with the f64 reference */
    memset(df, 0, sizeof *df);
    compare_blocks(c, buf, mb, df);
  }
  return rc;
}

int plan_vx_compare_one(vctx *c, int buf, diff *df) {
  if (!c->comm)
    return compare_some(c, buf, -1, df);
  int rc = plan_vx_dist_gather_partial(c, buf); /* a partial group's blocks */
  if (!rc)
    rc = compare_some(c, buf, -1, df);
  plan_vx_dist_drop_partial(c, buf);
  return rc;
}

void plan_vx_merge_diff(diff *into, const diff *one) {
  if (one->mismatches && (!into->mismatches || one->max_abs > into->max_abs)) {
    into->max_abs = one->max_abs;
    into->at = one->at;
    into->got = one->got;
    into->want = one->want;
  }
  into->mismatches += one->mismatches;
  into->compared += one->compared;
  into->err64 += one->err64;
  into->base64 += one->base64;
  into->nonfinite |= one->nonfinite;
  into->err2 += one->err2;
  into->ref2 += one->ref2;
  into->bad_nonfinite |= one->bad_nonfinite;
  if (one->max_rel > into->max_rel)
    into->max_rel = one->max_rel;
  if (one->max_scaled > into->max_scaled)
    into->max_scaled = one->max_scaled;
}

/* Once buffer b is compared: its tensor's reference goes back to the pool
 * when every buffer of the tensor matched. */
void plan_vx_compared_buffer(vctx *c, int b) {
  c->compared[b] = true;
  int t = c->low->bufs[b].tensor;
  c->mismatched[t] |= c->diffs[b].mismatches != 0;
  if (--c->pending[t] == 0 && !c->mismatched[t] &&
      !(c->keep_ref && c->keep_ref[t])) {
    block whole = {.n = plan_vx_count_of(c->prog->tensors[t].dims,
                                         c->prog->tensors[t].rank),
                   .data = c->ref[t]};
    plan_vx_give_block(c, &whole);
    c->ref[t] = whole.data; /* NULL once pooled */
  }
}

int plan_vx_compare_microbatch(vctx *c, int b, int64_t k, bool last) {
  double t0 = plan_vx_seconds_now();
  diff one;
  int rc = compare_some(c, b, k, &one);
  plan_vx_merge_diff(&c->diffs[b], &one);
  if (!rc && last)
    plan_vx_compared_buffer(c, b);
  c->cmp_seconds += plan_vx_seconds_now() - t0;
  return rc;
}

void plan_vx_release_microbatch(vctx *c, int b, int64_t k) {
  for (int64_t r = 0; r < c->nranks; r++)
    if (c->coords[r][c->mb_axis] == k)
      plan_vx_give_rank(c, b, r);
}

/* The comparison of buffer b: made during the lowered run, or now for a
 * buffer no step wrote (zeros). */
static int diff_of(vctx *c, int b, diff **df) {
  if (!c->compared[b]) {
    int rc = plan_vx_ensure_buffer(c, b, true);
    if (rc || (rc = plan_vx_compare_one(c, b, &c->diffs[b])))
      return rc;
    c->compared[b] = true;
  }
  *df = &c->diffs[b];
  return PLAN_OK;
}

/* A pipelined program, in step order: the inputs split into microbatches,
 * each op's results, each transfer's as received, then the outputs. */
static int compare_pipelined(vctx *c) {
  const vx_lowered *l = c->low;
  const vx_pipe *pp = l->pipe;
  int rc;
  diff *df;
  for (int i = 0; i < l->nsteps; i++) {
    const vx_step *s = &l->steps[i];
    if (s->kind == VX_STEP_INPUT) {
      const vx_buf *b = &l->bufs[s->out[0]];
      if (b->pl.ax[pp->axis].kind != PLAN_PL_S)
        continue;
      if ((rc = diff_of(c, s->out[0], &df)))
        return rc;
      plan_vx_report_tensor(c, "input", "split into microbatches", s->out[0],
                            df);
    } else if (s->kind == VX_STEP_OP) {
      const vx_op *op = &c->prog->ops[s->op];
      for (int k = 0; k < op->nout; k++) {
        int b = l->produced[op->out[k]];
        if (b != s->out[k])
          continue;
        if ((rc = diff_of(c, b, &df)))
          return rc;
        plan_vx_report_tensor(c, "tensor", op->name, b, df);
      }
    } else if (s->kind == VX_STEP_TRANSFER) {
      char name[64];
      snprintf(name, sizeof name, "%s from stage %d to stage %d",
               pp->phase[i] == VX_PHASE_RECV_F ? "send_f" : "send_b",
               pp->from_stage[i], pp->stage[i]);
      const char *op = plan_arena_strdup(&c->rec_arena, name);
      if (!op)
        return plan_oom();
      if ((rc = diff_of(c, s->out[0], &df)))
        return rc;
      plan_vx_report_tensor(c, "tensor", op, s->out[0], df);
    }
  }
  for (int k = 0; k < c->prog->noutputs; k++) {
    bool placed = plan_vx_check_delivered(c, k);
    int before = c->nrecs;
    if ((rc = diff_of(c, l->delivered[k], &df)))
      return rc;
    plan_vx_report_tensor(c, "output", "as delivered", l->delivered[k], df);
    if (!placed)
      plan_vx_misplaced_record(c, before);
  }
  return PLAN_OK;
}

/* The buffers compared only because a step writes them (a collective's
 * result in no layout), in step order, named by the step. */
static int compare_written(vctx *c, bool report) {
  const vx_lowered *l = c->low;
  for (int i = 0; i < l->nsteps; i++) {
    const vx_step *s = &l->steps[i];
    for (int k = 0; k < s->nout; k++) {
      int b = s->out[k];
      if (!c->extra[b] || c->writer[b] != i)
        continue;
      diff *df;
      int rc = diff_of(c, b, &df);
      if (rc)
        return rc;
      if (!report)
        continue;
      char name[128];
      if (s->kind == VX_STEP_REDIST)
        snprintf(name, sizeof name, "%s over '%s'",
                 plan_vx_redist_kind_name(s->redist.kind),
                 c->m->axis_names[s->redist.axis]);
      else
        snprintf(name, sizeof name, "%s",
                 s->kind == VX_STEP_OP ? c->prog->ops[s->op].name : "input");
      const char *op = plan_arena_strdup(&c->rec_arena, name);
      if (!op)
        return plan_oom();
      plan_vx_report_tensor(c, "tensor", op, b, df);
    }
  }
  return PLAN_OK;
}

/* Reports every comparison in topological order, then the outputs as
 * delivered, then every other buffer a step wrote: the first mismatch is
 * the first divergent op. */
int plan_vx_compare_all(vctx *c, bool report) {
  const vx_program *prog = c->prog;
  int rc;
  diff *df;
  if (c->deadlock)
    return PLAN_OK;
  if (c->low->pipe)
    return compare_pipelined(c);
  int nops = c->low->norig_ops > 0 ? c->low->norig_ops : prog->nops;
  for (int i = 0; i < nops; i++)
    for (int k = 0; k < prog->ops[i].nout; k++) {
      int b = c->low->produced[prog->ops[i].out[k]];
      if (b < 0) /* a lowered file without a layout for it: not compared */
        continue;
      if ((rc = diff_of(c, b, &df)))
        return rc;
      if (report)
        plan_vx_report_tensor(c, "tensor", prog->ops[i].name, b, df);
    }
  for (int k = 0; k < prog->noutputs; k++) {
    /* the placement first: partial axes are reduced when compared */
    bool placed = !report || plan_vx_check_delivered(c, k);
    int before = c->nrecs;
    if ((rc = diff_of(c, c->low->delivered[k], &df)))
      return rc;
    if (report)
      plan_vx_report_tensor(c, "output", "as delivered", c->low->delivered[k],
                            df);
    if (!placed)
      plan_vx_misplaced_record(c, before);
  }
  return compare_written(c, report);
}
