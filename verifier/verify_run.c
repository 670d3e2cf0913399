/* The two runs: the lowered program step by step on simulated ranks,
 * comparing each buffer as its step writes it, and the reference program
 * on one device, every tensor whole. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

/* reduce_mean's kernel divides a rank's local sum by the GLOBAL count, the
 * partial a P(sum) output wants. An output stated P(avg) along axes that
 * split a reduced dim wants each rank's local MEAN (legal when the split is
 * even): local sum / (global count / those axes' sizes), i.e. the kernel's
 * result times the product of those sizes. */
static double mean_avg_scale(const vctx *c, const vx_step *s, const vx_op *op) {
  if (op->kind != PLAN_OP_REDUCE_MEAN || !op->attrs)
    return 1;
  const plan_placement *in = &c->low->bufs[s->in[0]].pl;
  const plan_placement *out = &c->low->bufs[s->out[0]].pl;
  const plan_attr_val *dims = &op->attrs[0];
  double f = 1;
  for (int a = 0; a < c->m->naxes; a++) {
    if (out->ax[a].kind != PLAN_PL_P || out->ax[a].reduce != PLAN_RED_AVG ||
        in->ax[a].kind != PLAN_PL_S)
      continue;
    for (int i = 0; i < dims->nints; i++)
      if (dims->ints[i] == in->ax[a].dim)
        f *= (double)c->m->axis_sizes[a];
  }
  return f;
}

/* After step i: compare what it wrote, and hand back the buffers no later
 * step reads (kept when they mismatched: the diagnosis reads them). */
int plan_vx_after_step(vctx *c, int i) {
  const vx_step *s = &c->low->steps[i];
  double tl = plan_vx_seconds_now(); /* a check: the comparison's time */
  int rc = plan_vx_check_local(c, i, -1);
  c->cmp_seconds += plan_vx_seconds_now() - tl;
  if (rc)
    return rc;
  for (int k = 0; k < s->nout; k++) {
    int b = s->out[k];
    /* a chunked collective's buffer is whole after its last slice */
    if (c->needs_cmp[b] && !c->compared[b] && c->writer[b] <= i) {
      double t0 = plan_vx_seconds_now();
      rc = plan_vx_compare_one(c, b, &c->diffs[b]);
      c->cmp_seconds += plan_vx_seconds_now() - t0;
      if (rc)
        return rc;
      plan_vx_compared_buffer(c, b);
    }
  }
  for (int pass = 0; pass < 2; pass++) {
    int n = pass ? s->nout : s->nin;
    for (int k = 0; k < n; k++) {
      int b = pass ? s->out[k] : s->in[k];
      /* read again later: by a later step, or (pipelines) by a step that
       * has not run for every microbatch yet */
      bool later =
          c->readers_left ? c->readers_left[b] > 0 : c->last_use[b] > i;
      later |= pass && c->writer[b] > i; /* more slices to come */
      if (later || (c->keep_buf && c->keep_buf[b]) ||
          (c->needs_cmp[b] && (!c->compared[b] || c->diffs[b].mismatches)))
        continue;
      for (int64_t r = 0; r < c->nranks; r++)
        plan_vx_give_rank(c, b, r);
    }
  }
  return PLAN_OK;
}

/* The blocks, comparisons and bookkeeping of one lowered run. */
static int setup_run(vctx *c) {
  const vx_lowered *l = c->low;
  size_t nb = (size_t)l->nbufs + 1;
  c->bufs = calloc(nb, sizeof(block *));
  c->diffs = calloc(nb, sizeof *c->diffs);
  c->compared = calloc(nb, sizeof(bool));
  c->needs_cmp = calloc(nb, sizeof(bool));
  c->last_use = malloc(nb * sizeof(int));
  c->pending = calloc((size_t)c->prog->ntensors + 1, sizeof(int));
  c->mismatched = calloc((size_t)c->prog->ntensors + 1, sizeof(bool));
  c->extra = calloc(nb, sizeof(bool));
  c->writer = malloc(nb * sizeof(int));
  if (!c->bufs || !c->diffs || !c->compared || !c->needs_cmp || !c->last_use ||
      !c->pending || !c->mismatched || !c->extra || !c->writer)
    return plan_oom();
  /* each step checked on its own inputs: float mode, where the end-to-end
   * comparison cannot tell a deep chain's drift from a bug; not when
   * distributed (docs/verify.md, "Op-local checks") */
  c->local_on = c->o->mode == PLAN_VERIFY_FLOAT && !c->comm;
  c->local_fail = INT_MAX;
  for (int b = 0; b < l->nbufs; b++) {
    c->last_use[b] = c->writer[b] = -1;
    c->bufs[b] = calloc((size_t)c->nranks, sizeof(block));
    if (!c->bufs[b])
      return plan_oom();
    for (int64_t r = 0; r < c->nranks; r++)
      plan_vx_layout(c, &l->bufs[b].pl, l->bufs[b].tensor, r, &c->bufs[b][r]);
  }
  /* every tensor the reference has (not a manual region's traced ones) */
  int nt = l->norig_tensors > 0 ? l->norig_tensors : c->prog->ntensors;
  for (int t = 0; t < nt; t++)
    if (l->produced[t] >= 0)
      c->needs_cmp[l->produced[t]] = true;
  for (int k = 0; k < c->prog->noutputs; k++)
    c->needs_cmp[l->delivered[k]] = true;
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == VX_STEP_TRANSFER) /* as received */
      c->needs_cmp[l->steps[i].out[0]] = true;
  for (int i = 0; i < l->nsteps; i++)
    for (int k = 0; k < l->steps[i].nout; k++) {
      int b = l->steps[i].out[k];
      c->writer[b] = i;
      /* every buffer a step writes (a collective's result not in the
       * layouts too) is its tensor in its placement; pipelines compare
       * what their schedule reports */
      if (!l->pipe && !c->needs_cmp[b] && l->bufs[b].tensor < nt)
        c->needs_cmp[b] = c->extra[b] = true;
    }
  for (int b = 0; b < l->nbufs; b++)
    c->pending[l->bufs[b].tensor] += c->needs_cmp[b];
  for (int i = 0; i < l->nsteps; i++)
    for (int j = 0; j < l->steps[i].nin; j++)
      c->last_use[l->steps[i].in[j]] = i;
  return PLAN_OK;
}

static int run_input(vctx *c, const vx_step *s) {
  const vx_lowered *l = c->low;
  const vx_buf *b = &l->bufs[s->out[0]];
  for (int64_t r = 0; r < c->nranks; r++) {
    block *blk = &c->bufs[s->out[0]][r];
    if (plan_vx_shared_copy(c, s->out[0], r) || !plan_vx_owned(c, r))
      continue; /* its owner's block, filled; another process's */
    /* a replica: copy the first rank's block that has the same place
     * (not for a partial leaf, zeroed on non-owners below; nor when the
     * first is in another process: filled again, the same values) */
    int64_t q = plan_vx_partial_axes(b, c->m->naxes, NULL) || c->comm ? r : 0;
    block *rb = c->bufs[s->out[0]];
    while (q < r && (memcmp(rb[q].offset, blk->offset, sizeof blk->offset) ||
                     memcmp(rb[q].local, blk->local, sizeof blk->local)))
      q++;
    if (c->leaf_blk && c->leaf_blk[b->tensor])
      memcpy(blk->data, c->leaf_blk[b->tensor][r],
             sizeof(double) * (size_t)blk->n);
    else if (q < r)
      memcpy(blk->data, rb[q].data, sizeof(double) * (size_t)blk->n);
    else
      plan_vx_fill_leaf(c, b->tensor, blk);
    /* a leaf stored as a partial sum: the owner holds it */
    for (int a = 0; a < c->m->naxes; a++)
      if (b->pl.ax[a].kind == PLAN_PL_P && b->pl.ax[a].reduce == PLAN_RED_SUM &&
          c->coords[r][a] != 0)
        memset(blk->data, 0, sizeof(double) * (size_t)blk->n);
  }
  return PLAN_OK;
}

/* Step i on every rank, or (pipelines, c->mb_now >= 0) on the ranks of
 * microbatch c->mb_now; then the hook. */
int plan_vx_exec_step(vctx *c, int i) {
  const vx_lowered *l = c->low;
  const vx_step *s = &l->steps[i];
  int rc = PLAN_OK, pa[PLAN_MAX_MESH_AXES], np;
  for (int j = 0; j < s->nin && !rc; j++)
    rc = plan_vx_ensure_buffer(c, s->in[j], true);
  for (int k = 0; k < s->nout && !rc; k++)
    rc = plan_vx_ensure_buffer(c, s->out[k], false);
  if (rc)
    return rc;
  if (s->kind == VX_STEP_WAIT) {
    /* a start ran as its collective: a wait changes nothing */
  } else if (s->kind == VX_STEP_INPUT) {
    rc = run_input(c, s);
  } else if (s->kind == VX_STEP_REDIST) {
    rc = plan_vx_run_redist(c, s);
  } else if (s->kind == VX_STEP_TRANSFER) {
    rc = plan_vx_run_transfer(c, s);
  } else if ((np = plan_vx_class_axes(c, s, pa)) > 0) {
    rc = plan_vx_run_class_split(c, s, pa, np);
  } else {
    const vx_op *op = &c->prog->ops[s->op];
    double scale = mean_avg_scale(c, s, op);
    for (int64_t r = 0; r < c->nranks && !rc; r++) {
      if (!plan_vx_runs(c, r))
        continue;
      block *ins[PLAN_MAX_OPERANDS], *outs[PLAN_MAX_OPERANDS];
      for (int j = 0; j < s->nin; j++)
        ins[j] = &c->bufs[s->in[j]][r];
      for (int k = 0; k < s->nout; k++)
        outs[k] = &c->bufs[s->out[k]][r];
      rc = plan_vx_run_op(c, op, ins, outs);
      for (int64_t e = 0; !rc && scale != 1 && e < outs[0]->n; e++)
        outs[0]->data[e] *= scale;
    }
  }
  for (int k = 0; !rc && c->written && k < s->nout; k++) {
    /* pipelines: which microbatches' blocks hold values */
    uint8_t *w = c->written + (size_t)s->out[k] * (size_t)l->pipe->microbatches;
    if (c->mb_now >= 0)
      w[c->mb_now] = 1;
    else
      memset(w, 1, (size_t)l->pipe->microbatches);
  }
  if (!rc && c->hook)
    rc = c->hook(c->hook_user, l->pub, i, c->mb_now, c->bufs);
  if (!rc)
    rc = plan_vx_check_replicas(c, i);
  return rc;
}

int plan_vx_run_lowered(vctx *c) {
  int rc = setup_run(c);
  if (rc)
    return rc;
  if (c->low->pipe) /* action by action; compared once it has run */
    return plan_vx_run_pipeline(c);
  for (int i = 0; i < c->low->nsteps; i++)
    if ((rc = plan_vx_exec_step(c, i)) || (rc = plan_vx_after_step(c, i)))
      return rc;
  return PLAN_OK;
}

/* The program on one device, every tensor whole, into *dst[tensor]. */
int plan_vx_run_reference(vctx *c, double ***dst) {
  const vx_program *prog = c->prog;
  double **ref = *dst = calloc((size_t)prog->ntensors + 1, sizeof(double *));
  if (!ref)
    return plan_oom();
  block *whole = calloc((size_t)prog->ntensors + 1, sizeof(block));
  if (!whole)
    return plan_oom();
  int rc = PLAN_OK;
  for (int t = 0; t < prog->ntensors && !rc; t++) {
    const vx_tensor *x = &prog->tensors[t];
    memcpy(whole[t].local, x->dims, sizeof(int64_t) * (size_t)x->rank);
    whole[t].n = plan_vx_count_of(x->dims, x->rank);
    if ((rc = plan_vx_alloc_block(&whole[t])))
      break;
    if (x->producer < 0 && c->leaf_ref && c->leaf_ref[t])
      memcpy(whole[t].data, c->leaf_ref[t],
             sizeof(double) * (size_t)whole[t].n);
    else if (x->producer < 0)
      plan_vx_fill_leaf(c, t, &whole[t]);
  }
  /* a manual region's traced ops are the lowered run's: the reference
   * runs the region's own ops */
  int nops = c->low->norig_ops > 0 ? c->low->norig_ops : prog->nops;
  for (int i = 0; i < nops && !rc; i++) {
    const vx_op *op = &prog->ops[i];
    block *ins[PLAN_MAX_OPERANDS], *outs[PLAN_MAX_OPERANDS];
    for (int j = 0; j < op->nin; j++)
      ins[j] = &whole[op->in[j]];
    for (int k = 0; k < op->nout; k++)
      outs[k] = &whole[op->out[k]];
    rc = plan_vx_run_op(c, op, ins, outs);
  }
  for (int t = 0; t < prog->ntensors; t++)
    ref[t] = whole[t].data; /* kept; freed with the context */
  free(whole);
  return rc;
}

/* Float mode: the f64 reference of the low-precision bound, when the
 * program has f32, bf16 or f16 tensors. */
int plan_vx_run_reference64(vctx *c) {
  if (c->o->mode != PLAN_VERIFY_FLOAT)
    return PLAN_OK;
  bool lowp = false;
  for (int t = 0; t < c->prog->ntensors; t++)
    lowp |= plan_dtype_is_float(c->prog->tensors[t].dtype) &&
            plan_vx_run_dtype(c, &c->prog->tensors[t]) != PLAN_F64;
  if (!lowp)
    return PLAN_OK;
  c->force64 = true;
  int rc = plan_vx_run_reference(c, &c->ref64);
  c->force64 = false;
  return rc;
}
