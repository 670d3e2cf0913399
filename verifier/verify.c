/* Numerical verification (libplan/verify.h): lower the plan, run it on
 * simulated ranks with the CPU kernels, run the reference program, and
 * compare every tensor from every replica.
 *
 * All values are kept as doubles between steps (f32, bf16 and f16 values and
 * integers up to 2^53 are exact in a double) and converted to the kernel's
 * dtype around each op, so one executor serves both modes. Collectives are
 * executed by global index: a rank's new block takes each element from the
 * group member whose old block holds it, or reduces over the members, in
 * coordinate order (a fixed order: runs repeat bit for bit). The context
 * is in vctx.h; the diagnoses of a divergence are in diagnose.c, a training
 * step's optimizer update in verify_train.c. */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/autodiff.h"
#include "inputs.h"
#include "runner.h"
#include "libplan/schedule.h"
#include "libplan/trace.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "read/plan_read.h"
#include "base/numeric.h"
#include "verify_int.h"

#include "vctx.h"

int64_t plan_vx_count_of(const int64_t *dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  return n;
}

int64_t plan_vx_rank_at(const plan_mesh *m, const int64_t *coord) {
  int64_t r = 0;
  for (int a = 0; a < m->naxes; a++)
    r = r * m->axis_sizes[a] + coord[a];
  return r;
}

void plan_vx_layout(const vctx *c, const plan_placement *pl, int tensor,
                   int64_t r, block *b) {
  const plan_tensor *t = &c->prog->tensors[tensor];
  plan_redist_local_layout(pl, t->dims, t->rank, c->m->axis_sizes,
                           c->coords[r], b->local, b->offset);
  b->n = plan_vx_count_of(b->local, t->rank);
}

/* Global row-major index of local element k of a block. */
int64_t plan_vx_global_index(const plan_tensor *t, const block *b, int64_t k) {
  int64_t idx[PLAN_MAX_RANK] = {0}, g = 0;
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = b->local[d] ? k % b->local[d] : 0;
    k = b->local[d] ? k / b->local[d] : 0;
  }
  for (int d = 0; d < t->rank; d++)
    g = g * t->dims[d] + b->offset[d] + idx[d];
  return g;
}

int64_t plan_vx_local_index(const plan_tensor *t, const block *b, int64_t g) {
  int64_t idx[PLAN_MAX_RANK] = {0};
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = g % t->dims[d];
    g /= t->dims[d];
  }
  int64_t k = 0;
  for (int d = 0; d < t->rank; d++) {
    int64_t i = idx[d] - b->offset[d];
    if (i < 0 || i >= b->local[d])
      return -1;
    k = k * b->local[d] + i;
  }
  return k;
}

/* ---- inputs ----------------------------------------------------------------- */

static double recipe_value(const plan_tensor *t, int64_t g, bool exact) {
  int64_t idx[PLAN_MAX_RANK] = {0};
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = g % t->dims[d];
    g /= t->dims[d];
  }
  double v = 0;
  switch (t->recipe) {
  case PLAN_RECIPE_ONES:
    return 1;
  case PLAN_RECIPE_CAUSAL_MASK:
    return idx[t->rank - 1] <= idx[t->rank - 2] ? 0 : t->recipe_fill;
  case PLAN_RECIPE_ROPE_COS:
  case PLAN_RECIPE_ROPE_SIN: {
    int64_t half = t->dims[1] / 2, i = idx[1] % half;
    double ang = (double)idx[0] * pow(t->recipe_theta, -2.0 * (double)i /
                                                           (double)t->dims[1]);
    v = t->recipe == PLAN_RECIPE_ROPE_COS ? cos(ang) : sin(ang);
    return exact ? plan_dyadic_round(v, PLAN_KERNEL_DYADIC_BITS) : v;
  }
  default:
    return 0;
  }
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The dtype tensor t runs in: its own, or the run's --dtype for floats. */
plan_dtype plan_vx_run_dtype(const vctx *c, const plan_tensor *t) {
  if (!plan_dtype_is_float(t->dtype))
    return t->dtype;
  if (c->dtype >= 0)
    return (plan_dtype)c->dtype;
  if (c->policy && c->policy[t - c->prog->tensors] >= 0)
    return (plan_dtype)c->policy[t - c->prog->tensors];
  return t->dtype;
}

void plan_vx_fill_leaf(const vctx *c, int tensor, block *b) {
  const plan_tensor *t = &c->prog->tensors[tensor];
  bool exact = c->o->mode == PLAN_VERIFY_EXACT;
  plan_input_spec spec = {exact ? PLAN_INPUT_EXACT : PLAN_INPUT_FLOAT, 0, 0};
  if (!plan_dtype_is_float(t->dtype)) {
    spec.kind = PLAN_INPUT_INT;
    spec.lo = t->has_range ? t->range_lo : 0;
    spec.hi = t->has_range ? t->range_hi : 2;
    /* indices into a dim need a range that fits it; validation warns */
  }
  uint64_t key = plan_input_tensor_key(t->name);
  for (int64_t k = 0; k < b->n; k++) {
    int64_t g = plan_vx_global_index(t, b, k);
    if (t->role == PLAN_ROLE_CONST && t->recipe != PLAN_RECIPE_NONE)
      b->data[k] = recipe_value(t, g, exact);
    else
      b->data[k] = plan_input_value(c->o->seed, key, g, &spec);
  }
  /* float mode: inputs in the tensor's own precision */
  plan_dtype dt = plan_vx_run_dtype(c, t);
  if (!exact && (dt == PLAN_BF16 || dt == PLAN_F16))
    for (int64_t k = 0; k < b->n; k++)
      b->data[k] = dt == PLAN_BF16 ? plan_round_bf16((float)b->data[k])
                                         : plan_round_f16((float)b->data[k]);
}

/* ---- running ops ------------------------------------------------------------ */

static plan_dtype kernel_dtype(const vctx *c, const plan_tensor *t) {
  if (!plan_dtype_is_float(t->dtype))
    return PLAN_I64;
  return c->o->mode == PLAN_VERIFY_EXACT || c->force64 ? PLAN_F64
                                                      : plan_vx_run_dtype(c, t);
}

/* A scratch buffer of the context, grown as needed and reused from op to
 * op: fresh large allocations for every operand would be fresh pages,
 * faulted in and zeroed for every op. */
static void *scratch(vctx *c, int slot, size_t bytes) {
  if (c->scratch_cap[slot] < bytes) {
    size_t cap = bytes > 2 * c->scratch_cap[slot] ? bytes
                                                   : 2 * c->scratch_cap[slot];
    void *n = malloc(cap ? cap : 1);
    if (!n)
      return NULL;
    free(c->scratch[slot]);
    c->scratch[slot] = n;
    c->scratch_cap[slot] = cap;
  }
  return c->scratch[slot];
}

/* The operand in the kernel's dtype: the block itself when that is f64,
 * else a converted copy in scratch slot `slot`. */
static void *to_kernel(vctx *c, int slot, plan_dtype kd, double *src,
                       int64_t n) {
  if (kd == PLAN_F64)
    return src;
  void *d = scratch(c, slot, (size_t)(n > 0 ? n : 1) * 8);
  if (!d)
    return NULL;
  if (kd == PLAN_I64) {
    int64_t *o = d;
    for (int64_t i = 0; i < n; i++)
      o[i] = (int64_t)src[i];
  } else {
    float *o = d;
    for (int64_t i = 0; i < n; i++)
      o[i] = (float)src[i];
  }
  return d;
}

static void from_kernel(plan_dtype kd, const void *src, double *dst,
                        int64_t n) {
  if (kd == PLAN_F64) {
    if (src != dst)
      memcpy(dst, src, sizeof(double) * (size_t)n);
  } else if (kd == PLAN_I64) {
    const int64_t *x = src;
    for (int64_t i = 0; i < n; i++)
      dst[i] = (double)x[i];
  } else {
    const float *x = src;
    for (int64_t i = 0; i < n; i++)
      dst[i] = (double)x[i];
  }
}

static void set_view(plan_view *v, const plan_tensor *t, plan_dtype kd,
                     const block *b) {
  memset(v, 0, sizeof *v);
  v->dtype = kd;
  v->rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    v->dims[d] = b->local[d];
    v->global_dims[d] = t->dims[d];
    v->offset[d] = b->offset[d];
  }
}

/* What a runner's failure means for the verification: a shape or an index
 * the op refuses is the plan's (EINVALID); the host out of memory stays
 * ENOMEM; a device out of memory, a driver or launch failure, an op the
 * runner cannot do is the machine's: "cannot run here" (EUNSUPPORTED). */
static int runner_failure(int st, const plan_runner_vtable *runner) {
  if (st == PLAN_EINVALID || st == PLAN_EUSAGE)
    return PLAN_EINVALID;
  if (st == PLAN_ENOMEM && plan_runner_is_cpu(runner))
    return PLAN_ENOMEM;
  return PLAN_EUNSUPPORTED;
}

/* One op on blocks: ins[j] / outs[k] are the blocks of the operands. An
 * output in f64 is written in place (the kernel writes every element); an
 * input in f64 is read in place, unless the op also writes that block. */
static int run_op(vctx *c, const plan_op *op, block *const *ins,
                  block *const *outs) {
  plan_view vin[PLAN_MAX_OPERANDS], vout[PLAN_MAX_OPERANDS];
  int rc = PLAN_OK;
  char err[256] = "";
  /* a dtype policy: float inputs are read in the output's dtype */
  const plan_tensor *o0 = op->nout ? &c->prog->tensors[op->out[0]] : NULL;
  bool autocast = c->policy && o0 && plan_dtype_is_float(o0->dtype);
  for (int j = 0; j < op->nin && !rc; j++) {
    const plan_tensor *t = &c->prog->tensors[op->in[j]];
    plan_dtype kd = autocast && plan_dtype_is_float(t->dtype)
                        ? kernel_dtype(c, o0)
                        : kernel_dtype(c, t);
    set_view(&vin[j], t, kd, ins[j]);
    if (!(vin[j].data = to_kernel(c, j, kd, ins[j]->data, ins[j]->n)))
      rc = plan_oom();
  }
  for (int k = 0; k < op->nout && !rc; k++) {
    const plan_tensor *t = &c->prog->tensors[op->out[k]];
    plan_dtype kd = kernel_dtype(c, t);
    set_view(&vout[k], t, kd, outs[k]);
    size_t n = (size_t)(outs[k]->n > 0 ? outs[k]->n : 1);
    vout[k].data = kd == PLAN_F64 ? (void *)outs[k]->data
                                  : scratch(c, PLAN_MAX_OPERANDS + k, n * 8);
    if (!vout[k].data)
      rc = plan_oom();
  }
  /* a plugin runner may lack a kernel: that is "cannot run here", not a
   * wrong plan (the CPU runner has every op) */
  if (!rc && !plan_runner_is_cpu(c->runner) && op->nout &&
      !c->runner->supports_op(op->kind, vout[0].dtype))
    return plan_failf(PLAN_EUNSUPPORTED,
                      "runner '%s' has no kernel for op '%s' (%s, %s)",
                      c->runner->name, op->name, plan_op_kind_name(op->kind),
                      plan_dtype_name(vout[0].dtype));
  plan_kernel_ctx kc = {c->o->mode == PLAN_VERIFY_EXACT, 0};
  int st = rc ? PLAN_OK
              : c->runner->run_op(op->kind, op->attrs, vin, op->nin, vout,
                                  op->nout, &kc, err, sizeof err);
  if (st)
    rc = plan_failf(runner_failure(st, c->runner), "op '%s' on runner '%s': %s",
                    op->name, c->runner->name, err);
  for (int k = 0; !rc && k < op->nout; k++)
    from_kernel(vout[k].dtype, vout[k].data, outs[k]->data, outs[k]->n);
  if (!rc && c->grid_op && c->grid_op[op - c->prog->ops])
    for (int k = 0; k < op->nout; k++)
      if (plan_dtype_is_float(c->prog->tensors[op->out[k]].dtype))
        for (int64_t e = 0; e < outs[k]->n; e++)
          outs[k]->data[e] =
              plan_dyadic_round(outs[k]->data[e], PLAN_KERNEL_DYADIC_BITS);
  return rc;
}

static int alloc_block(block *b) {
  b->data = calloc((size_t)(b->n > 0 ? b->n : 1), sizeof(double));
  return b->data ? PLAN_OK : plan_oom();
}

/* A block's memory: a pooled one of at least n (and at most about twice
 * n) elements, else a fresh one. Pooled memory is not zeroed: the step that
 * writes a buffer writes every element. */
static int take_block(vctx *c, block *b) {
  int64_t n = b->n > 0 ? b->n : 1, best = -1;
  for (int i = 0; i < c->npool; i++)
    if (c->pool_n[i] >= n && c->pool_n[i] <= 8 * n + 4096 &&
        (best < 0 || c->pool_n[i] < c->pool_n[best]))
      best = i;
  if (best >= 0) {
    b->data = c->pool[best];
    c->pool[best] = c->pool[c->npool - 1];
    c->pool_n[best] = c->pool_n[--c->npool];
    return PLAN_OK;
  }
  return alloc_block(b);
}

static void give_block(vctx *c, block *b) {
  if (!b->data)
    return;
  if (c->npool == c->cap_pool) {
    int cap = c->cap_pool ? 2 * c->cap_pool : 64;
    double **np = realloc(c->pool, sizeof *np * (size_t)cap);
    if (np)
      c->pool = np;
    int64_t *nn = np ? realloc(c->pool_n, sizeof *nn * (size_t)cap) : NULL;
    if (nn)
      c->pool_n = nn;
    if (!np || !nn) { /* no room to pool it: free it */
      free(b->data);
      b->data = NULL;
      return;
    }
    c->cap_pool = cap;
  }
  c->pool[c->npool] = b->data;
  c->pool_n[c->npool++] = b->n > 0 ? b->n : 1;
  b->data = NULL;
}

double *plan_vx_take_array(vctx *c, int64_t n, bool zero) {
  block b;
  memset(&b, 0, sizeof b);
  b.n = n > 0 ? n : 1;
  if (take_block(c, &b))
    return NULL;
  if (zero)
    memset(b.data, 0, sizeof(double) * (size_t)b.n);
  return b.data;
}

/* Rank r's block of buffer b back to the pool (a shared copy is only
 * let go: its owner's block is given once). */
static void give_rank(vctx *c, int b, int64_t r) {
  if (plan_vx_shared_copy(c, b, r))
    c->bufs[b][r].data = NULL;
  else
    give_block(c, &c->bufs[b][r]);
}

/* The mesh axes along which buffer lb is partial, into pa; their count. */
int plan_vx_partial_axes(const plan_lbuf *lb, int naxes, int *pa) {
  int np = 0;
  for (int a = 0; a < naxes; a++)
    if (lb->pl.ax[a].kind == PLAN_PL_P) {
      if (pa)
        pa[np] = a;
      np++;
    }
  return np;
}

/* ---- collectives ------------------------------------------------------------ */


/* The runner's all-reduce (a device-side one) of the group of rank r, the
 * group's first member: member 0's block is copied into r's result block,
 * which then takes the reduction; the runner reduces in member order, so
 * the bits are those of the host loop below. */
static int runner_all_reduce(vctx *c, const plan_lstep *s, int64_t k,
                             int64_t r) {
  const plan_redist_step *st = &s->redist;
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  block *d = &dst[r];
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  double **blocks = malloc(sizeof *blocks * (size_t)k);
  if (!blocks)
    return plan_oom();
  for (int64_t m = 0; m < k; m++) {
    coord[st->axis] = m;
    const block *sb = &src[plan_vx_rank_at(c->m, coord)];
    if (sb->n != d->n || dst[plan_vx_rank_at(c->m, coord)].n != d->n) {
      free(blocks);
      return plan_failf(PLAN_EINVALID,
                        "all_reduce: the group's blocks differ in size");
    }
    blocks[m] = m ? sb->data : d->data;
    if (!m && d->data != sb->data)
      memcpy(d->data, sb->data, sizeof(double) * (size_t)d->n);
  }
  char err[256] = "";
  int rc = c->runner->all_reduce(blocks, (int)k, d->n, st->reduce, err,
                                 sizeof err);
  free(blocks);
  if (rc)
    return plan_failf(rc, "runner '%s': all_reduce: %s", c->runner->name,
                      err);
  return PLAN_OK;
}

/* An all-reduce turns P into R along one axis: the group's blocks and the
 * result have one layout, so element e of every member reduces into
 * element e, in coordinate order (bit-for-bit as the general path). */
static int run_all_reduce(vctx *c, const plan_lstep *s, int64_t k) {
  const plan_redist_step *st = &s->redist;
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  int a = st->axis;
  if (c->comm)
    return plan_vx_dist_all_reduce(c, s, k);
  /* the group's first member reduces in coordinate order; the others copy
   * its result (every member would compute the same bits) */
  for (int64_t r = 0; r < c->nranks; r++) {
    if (c->coords[r][a] != 0 || !plan_vx_in_mb(c, r))
      continue;
    block *d = &dst[r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    if (c->runner->all_reduce) {
      int rc = runner_all_reduce(c, s, k, r);
      if (rc)
        return rc;
    }
    for (int64_t m = 0; m < k && !c->runner->all_reduce; m++) {
      coord[a] = m;
      const block *sb = &src[plan_vx_rank_at(c->m, coord)];
      if (sb->n != d->n || dst[plan_vx_rank_at(c->m, coord)].n != d->n)
        return plan_failf(PLAN_EINVALID,
                          "all_reduce: the group's blocks differ in size");
      double *x = d->data;
      const double *y = sb->data;
      if (!m)
        memcpy(x, y, sizeof(double) * (size_t)d->n);
      else if (st->reduce == PLAN_RED_SUM || st->reduce == PLAN_RED_AVG)
        for (int64_t e = 0; e < d->n; e++)
          x[e] += y[e];
      else
        for (int64_t e = 0; e < d->n; e++)
          x[e] = plan_reduce2(st->reduce, x[e], y[e]);
    }
    if (st->reduce == PLAN_RED_AVG && !c->runner->all_reduce)
      for (int64_t e = 0; e < d->n; e++)
        d->data[e] /= (double)k;
    for (int64_t m = 1; m < k; m++) {
      coord[a] = m;
      double *q = dst[plan_vx_rank_at(c->m, coord)].data;
      if (q != d->data) /* a shared copy is the result already */
        memcpy(q, d->data, sizeof(double) * (size_t)d->n);
    }
  }
  return PLAN_OK;
}

/* A reduce-scatter on the runner's all-reduce (see runner_all_reduce):
 * each member's values of the elements of rank r's new block are gathered
 * in the order the host loop below reads them, then folded by the runner
 * in member order, into r's block. *done is false when some member lacks
 * an element: the host loop then writes the whole block itself (or
 * reports the gap). */
static int runner_reduce_scatter(vctx *c, const plan_lstep *s, int64_t k,
                                 int64_t r, bool *done) {
  const plan_redist_step *st = &s->redist;
  const plan_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  block *src = c->bufs[s->in[0]], *d = &c->bufs[s->out[0]][r];
  int a = st->axis;
  *done = false;
  double **blocks = calloc((size_t)k, sizeof *blocks);
  if (!blocks)
    return plan_oom();
  int rc = PLAN_OK;
  bool whole = true;
  for (int64_t m = 0; m < k && !rc && whole; m++) {
    blocks[m] = m ? malloc(sizeof(double) * (size_t)(d->n > 0 ? d->n : 1))
                  : d->data;
    if (!blocks[m]) {
      rc = plan_oom();
      break;
    }
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    coord[a] = m;
    const block *sb = &src[plan_vx_rank_at(c->m, coord)];
    if (s->group_order) /* position m holds the block of order[m] */
      coord[a] = s->group_order[m];
    const block *vb = &src[plan_vx_rank_at(c->m, coord)];
    for (int64_t e = 0; e < d->n && whole; e++) {
      int64_t li = plan_vx_local_index(t, sb, plan_vx_global_index(t, d, e));
      whole = li >= 0 && li < vb->n;
      if (whole)
        blocks[m][e] = vb->data[li];
    }
  }
  if (!rc && whole) {
    char err[256] = "";
    rc = c->runner->all_reduce(blocks, (int)k, d->n, st->reduce, err,
                               sizeof err);
    if (rc)
      rc = plan_failf(rc, "runner '%s': reduce_scatter: %s", c->runner->name,
                      err);
    else
      *done = true;
  }
  for (int64_t m = 1; m < k; m++)
    free(blocks[m]);
  free(blocks);
  return rc;
}

int64_t plan_vx_redist_source(const vctx *c, const plan_lstep *s, int64_t d,
                         int64_t g, int64_t *li) {
  const plan_redist_step *st = &s->redist;
  const plan_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  const block *src = c->bufs[s->in[0]];
  int a = st->axis;
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[d], sizeof coord);
  for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) { /* coordinate order */
    coord[a] = m;
    *li = plan_vx_local_index(t, &src[plan_vx_rank_at(c->m, coord)], g);
    if (*li < 0)
      continue;
    if (s->group_order) /* position m holds the block of order[m] */
      coord[a] = s->group_order[m];
    int64_t q = plan_vx_rank_at(c->m, coord);
    return *li < src[q].n ? q : -2; /* the reader allows even pieces only */
  }
  return -1;
}

static int run_redist(vctx *c, const plan_lstep *s) {
  const plan_redist_step *st = &s->redist;
  const plan_lbuf *ob = &c->low->bufs[s->out[0]];
  const plan_tensor *t = &c->prog->tensors[ob->tensor];
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  int a = st->axis;
  int64_t k = c->m->axis_sizes[a];
  if (st->kind == PLAN_REDIST_ALL_REDUCE)
    return run_all_reduce(c, s, k);
  bool local = st->kind == PLAN_REDIST_ZERO_NON_OWNER ||
               st->kind == PLAN_REDIST_RELABEL;
  if (c->comm && st->kind == PLAN_REDIST_REDUCE_SCATTER)
    return plan_vx_dist_reduce_scatter(c, s, k);
  if (c->comm && !local)
    return plan_vx_dist_redist(c, s);
  for (int64_t r = 0; r < c->nranks; r++) {
    if (!plan_vx_runs(c, r))
      continue;
    if (st->kind == PLAN_REDIST_REDUCE_SCATTER && c->runner->all_reduce) {
      bool done;
      int rc = runner_reduce_scatter(c, s, k, r, &done);
      if (rc)
        return rc;
      if (done)
        continue;
    }
    block *d = &dst[r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    bool reduce = st->kind == PLAN_REDIST_ALL_REDUCE ||
                  st->kind == PLAN_REDIST_REDUCE_SCATTER;
    for (int64_t e = 0; e < d->n; e++) {
      int64_t g = plan_vx_global_index(t, d, e);
      if (st->kind == PLAN_REDIST_ZERO_NON_OWNER && c->coords[r][a] != 0) {
        d->data[e] = 0;
        continue;
      }
      if (local) {
        int64_t li = plan_vx_local_index(t, &src[r], g);
        d->data[e] = li >= 0 ? src[r].data[li] : 0;
        continue;
      }
      if (!reduce) {
        int64_t li, q = plan_vx_redist_source(c, s, r, g, &li);
        if (q == -2)
          return plan_failf(PLAN_EINVALID,
                            "all_gather of '%s': its order needs even "
                            "pieces", t->name);
        if (q < 0)
          return plan_failf(PLAN_EINVALID,
                            "%s of '%s': no rank of the group holds an "
                            "element",
                            plan_redist_kind_name(st->kind), t->name);
        d->data[e] = src[q].data[li];
        continue;
      }
      double acc = 0;
      bool have = false;
      for (int64_t m = 0; m < k; m++) { /* the group, in coordinate order */
        coord[a] = m;
        const block *sb = &src[plan_vx_rank_at(c->m, coord)];
        int64_t li = plan_vx_local_index(t, sb, g);
        if (li < 0)
          continue;
        if (s->group_order) { /* position m holds the block of order[m] */
          coord[a] = s->group_order[m];
          sb = &src[plan_vx_rank_at(c->m, coord)];
          if (li >= sb->n) /* the reader allows even pieces only */
            return plan_failf(PLAN_EINVALID,
                              "all_gather of '%s': its order needs even "
                              "pieces", t->name);
        }
        acc = have ? plan_reduce2(st->reduce, acc, sb->data[li]) : sb->data[li];
        have = true;
      }
      if (reduce && st->reduce == PLAN_RED_AVG)
        acc /= (double)k;
      if (!have)
        return plan_failf(PLAN_EINVALID,
                          "%s of '%s': no rank of the group holds an element",
                          plan_redist_kind_name(st->kind), t->name);
      d->data[e] = acc;
    }
  }
  return PLAN_OK;
}

/* ---- the two runs ----------------------------------------------------------- */

/* reduce_mean's kernel divides a rank's local sum by the GLOBAL count, the
 * partial a P(sum) output wants. An output stated P(avg) along axes that
 * split a reduced dim wants each rank's local MEAN (legal when the split is
 * even): local sum / (global count / those axes' sizes), i.e. the kernel's
 * result times the product of those sizes. */
static double mean_avg_scale(const vctx *c, const plan_lstep *s,
                             const plan_op *op) {
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

static int compare_one(vctx *c, int buf, diff *df);
static void compared_buffer(vctx *c, int b);

/* Every block of buffer b allocated (zeros when fresh: a buffer read
 * before any step wrote it, which only a benchmark's stripped program
 * does, reads as zeros). */
int plan_vx_ensure_buffer(vctx *c, int b, bool zero) {
  for (int64_t r = 0; r < c->nranks; r++) {
    block *blk = &c->bufs[b][r];
    if (blk->data)
      continue;
    if (plan_vx_shared_copy(c, b, r)) { /* the owner's block (made first) */
      blk->data = c->bufs[b][plan_vx_mb_first(c, r)].data;
      continue;
    }
    if (!plan_vx_runs(c, r)) /* pipelines: this microbatch's; this process's */
      continue;
    int rc = take_block(c, blk);
    if (rc)
      return rc;
    if (zero) /* pooled memory is not */
      memset(blk->data, 0, sizeof(double) * (size_t)(blk->n > 0 ? blk->n : 1));
  }
  return PLAN_OK;
}

/* After step i: compare what it wrote, and hand back the buffers no later
 * step reads (kept when they mismatched: the diagnosis reads them). */
int plan_vx_after_step(vctx *c, int i) {
  const plan_lstep *s = &c->low->steps[i];
  int rc;
  for (int k = 0; k < s->nout; k++) {
    int b = s->out[k];
    if (c->needs_cmp[b] && !c->compared[b]) {
      double t0 = seconds_now();
      rc = compare_one(c, b, &c->diffs[b]);
      c->cmp_seconds += seconds_now() - t0;
      if (rc)
        return rc;
      compared_buffer(c, b);
    }
  }
  for (int pass = 0; pass < 2; pass++) {
    int n = pass ? s->nout : s->nin;
    for (int k = 0; k < n; k++) {
      int b = pass ? s->out[k] : s->in[k];
      /* read again later: by a later step, or (pipelines) by a step that
       * has not run for every microbatch yet */
      bool later = c->readers_left ? c->readers_left[b] > 0
                                   : c->last_use[b] > i;
      if (later || (c->keep_buf && c->keep_buf[b]) ||
          (c->needs_cmp[b] && (!c->compared[b] || c->diffs[b].mismatches)))
        continue;
      for (int64_t r = 0; r < c->nranks; r++)
        give_rank(c, b, r);
    }
  }
  return PLAN_OK;
}

/* The blocks, comparisons and bookkeeping of one lowered run. */
static int setup_run(vctx *c) {
  const plan_lowered *l = c->low;
  size_t nb = (size_t)l->nbufs + 1;
  c->bufs = calloc(nb, sizeof(block *));
  c->diffs = calloc(nb, sizeof *c->diffs);
  c->compared = calloc(nb, sizeof(bool));
  c->needs_cmp = calloc(nb, sizeof(bool));
  c->last_use = malloc(nb * sizeof(int));
  c->pending = calloc((size_t)c->prog->ntensors + 1, sizeof(int));
  c->mismatched = calloc((size_t)c->prog->ntensors + 1, sizeof(bool));
  if (!c->bufs || !c->diffs || !c->compared || !c->needs_cmp ||
      !c->last_use || !c->pending || !c->mismatched)
    return plan_oom();
  for (int b = 0; b < l->nbufs; b++) {
    c->last_use[b] = -1;
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
    if (l->steps[i].kind == PLAN_LSTEP_TRANSFER) /* as received */
      c->needs_cmp[l->steps[i].out[0]] = true;
  for (int b = 0; b < l->nbufs; b++)
    c->pending[l->bufs[b].tensor] += c->needs_cmp[b];
  for (int i = 0; i < l->nsteps; i++)
    for (int j = 0; j < l->steps[i].nin; j++)
      c->last_use[l->steps[i].in[j]] = i;
  return PLAN_OK;
}

static int run_input(vctx *c, const plan_lstep *s) {
  const plan_lowered *l = c->low;
  const plan_lbuf *b = &l->bufs[s->out[0]];
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
      if (b->pl.ax[a].kind == PLAN_PL_P &&
          b->pl.ax[a].reduce == PLAN_RED_SUM && c->coords[r][a] != 0)
        memset(blk->data, 0, sizeof(double) * (size_t)blk->n);
  }
  return PLAN_OK;
}

/* Step i on every rank, or (pipelines, c->mb_now >= 0) on the ranks of
 * microbatch c->mb_now; then the hook. */
int plan_vx_exec_step(vctx *c, int i) {
  const plan_lowered *l = c->low;
  const plan_lstep *s = &l->steps[i];
  int rc = PLAN_OK;
  for (int j = 0; j < s->nin && !rc; j++)
    rc = plan_vx_ensure_buffer(c, s->in[j], true);
  for (int k = 0; k < s->nout && !rc; k++)
    rc = plan_vx_ensure_buffer(c, s->out[k], false);
  if (rc)
    return rc;
  if (s->kind == PLAN_LSTEP_INPUT) {
    rc = run_input(c, s);
  } else if (s->kind == PLAN_LSTEP_REDIST) {
    rc = run_redist(c, s);
  } else if (s->kind == PLAN_LSTEP_TRANSFER) {
    rc = plan_vx_run_transfer(c, s);
  } else {
    const plan_op *op = &c->prog->ops[s->op];
    double scale = mean_avg_scale(c, s, op);
    for (int64_t r = 0; r < c->nranks && !rc; r++) {
      if (!plan_vx_runs(c, r))
        continue;
      block *ins[PLAN_MAX_OPERANDS], *outs[PLAN_MAX_OPERANDS];
      for (int j = 0; j < s->nin; j++)
        ins[j] = &c->bufs[s->in[j]][r];
      for (int k = 0; k < s->nout; k++)
        outs[k] = &c->bufs[s->out[k]][r];
      rc = run_op(c, op, ins, outs);
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
    rc = c->hook(c->hook_user, l, i, c->mb_now, c->bufs);
  return rc;
}

static int run_lowered(vctx *c) {
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
static int run_reference(vctx *c, double ***dst) {
  const plan_program *prog = c->prog;
  double **ref = *dst = calloc((size_t)prog->ntensors + 1, sizeof(double *));
  if (!ref)
    return plan_oom();
  block *whole = calloc((size_t)prog->ntensors + 1, sizeof(block));
  if (!whole)
    return plan_oom();
  int rc = PLAN_OK;
  for (int t = 0; t < prog->ntensors && !rc; t++) {
    const plan_tensor *x = &prog->tensors[t];
    memcpy(whole[t].local, x->dims, sizeof(int64_t) * (size_t)x->rank);
    whole[t].n = plan_vx_count_of(x->dims, x->rank);
    if ((rc = alloc_block(&whole[t])))
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
    const plan_op *op = &prog->ops[i];
    block *ins[PLAN_MAX_OPERANDS], *outs[PLAN_MAX_OPERANDS];
    for (int j = 0; j < op->nin; j++)
      ins[j] = &whole[op->in[j]];
    for (int k = 0; k < op->nout; k++)
      outs[k] = &whole[op->out[k]];
    rc = run_op(c, op, ins, outs);
  }
  for (int t = 0; t < prog->ntensors; t++)
    ref[t] = whole[t].data; /* kept; freed with the context */
  free(whole);
  return rc;
}

/* Float mode: the f64 reference of the low-precision bound, when the
 * program has f32, bf16 or f16 tensors. */
static int run_reference64(vctx *c) {
  if (c->o->mode != PLAN_VERIFY_FLOAT)
    return PLAN_OK;
  bool lowp = false;
  for (int t = 0; t < c->prog->ntensors; t++)
    lowp |= plan_dtype_is_float(c->prog->tensors[t].dtype) &&
            plan_vx_run_dtype(c, &c->prog->tensors[t]) != PLAN_F64;
  if (!lowp)
    return PLAN_OK;
  c->force64 = true;
  int rc = run_reference(c, &c->ref64);
  c->force64 = false;
  return rc;
}

/* ---- comparing -------------------------------------------------------------- */

/* The slack of float mode's depth bound (depth_bound). */
#define PLAN_VERIFY_DEPTH_FACTOR 8.0


/* torch.testing.assert_close's defaults. */
static void dtype_tol(plan_dtype d, double *rtol, double *atol) {
  switch (d) {
  case PLAN_F64:
    *rtol = 1e-7, *atol = 1e-7;
    break;
  case PLAN_BF16:
    *rtol = 1.6e-2, *atol = 1e-5;
    break;
  case PLAN_F16:
    *rtol = 1e-3, *atol = 1e-5;
    break;
  default:
    *rtol = 1.3e-6, *atol = 1e-5;
  }
}

/* The tolerances of tensor t: the dtype's (torch.testing.assert_close
 * defaults), else the run's, else the first per-tensor entry matching it. */
static void tolerance_of(const vctx *c, const plan_tensor *t, double *rtol,
                         double *atol) {
  for (int i = 0; i < c->o->ntolerances; i++) {
    const plan_verify_tolerance *e = &c->o->tolerances[i];
    if (e->tensor && plan_glob_match(e->tensor, t->name)) {
      *rtol = e->rtol;
      *atol = e->atol;
      return;
    }
  }
  *rtol = c->o->rtol;
  *atol = c->o->atol;
  if (*rtol > 0 || *atol > 0)
    return;
  dtype_tol(plan_vx_run_dtype(c, t), rtol, atol);
  /* a dtype policy: every tensor of the step is computed from values in
   * the compute dtype, and holds no more of their precision (an f32
   * gradient of bf16 activations, the loss of bf16 logits) */
  int cd = c->policy ? c->p->training.compute_dtype : -1;
  if (cd >= 0 && plan_dtype_is_float(t->dtype)) {
    double cr, ca;
    dtype_tol((plan_dtype)cd, &cr, &ca);
    if (cr > *rtol)
      *rtol = cr, *atol = ca > *atol ? ca : *atol;
  }
}

void plan_vx_default_tol(const vctx *c, const plan_tensor *t, double *rtol,
                        double *atol) {
  int i = (int)(t - c->prog->tensors);
  *rtol = c->rtol[i];
  *atol = c->atol[i];
}

/* The diagnoses' test of "equal up to float noise": the tensor's tolerance,
 * at least the dtype's (a tolerance tightened for the comparison must not
 * make a sum of partials look unlike the reference). */
void plan_vx_diag_tol(const vctx *c, const plan_tensor *t, double *rtol,
                     double *atol) {
  double r, a;
  plan_vx_default_tol(c, t, rtol, atol);
  dtype_tol(plan_vx_run_dtype(c, t), &r, &a);
  *rtol = fmax(*rtol, r);
  *atol = fmax(*atol, a);
}

/* The reduction length an op adds: the product of the sizes of the
 * factors it sums over (matmul's k, a norm's or softmax's dim, a reduced
 * dim), from its sharding rule. */
static double op_reduction_length(const plan_program *prog, const plan_op *op) {
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  for (int j = 0; j < op->nin + op->nout; j++) {
    const plan_tensor *t =
        &prog->tensors[j < op->nin ? op->in[j] : op->out[j - op->nin]];
    plan_shape *sh = j < op->nin ? &in[j] : &out[j - op->nin];
    sh->rank = t->rank;
    memcpy(sh->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    sh->dtype = t->dtype;
  }
  plan_rule rule;
  char err[160];
  if (plan_op_rule(&rule, op->kind, in, op->nin, out, op->nout, op->attrs,
                   err, sizeof err))
    return 1;
  /* need-replication factors are sums only in the normalising ops (split,
   * concat and reshape move data) */
  bool norm = op->kind == PLAN_OP_SOFTMAX || op->kind == PLAN_OP_LAYERNORM ||
              op->kind == PLAN_OP_RMSNORM || op->kind == PLAN_OP_CROSS_ENTROPY;
  double n = 1;
  for (int f = 0; f < rule.nfactors; f++)
    if (rule.factors[f].kind == PLAN_FACTOR_REDUCTION ||
        (norm && rule.factors[f].kind == PLAN_FACTOR_NEED_REPLICATION))
      n *= (double)rule.factors[f].size;
  return n > 1 ? n : 0;
}

/* Per-tensor tolerances, reduction depths and reference RMS (after the
 * reference run). */
static int init_tolerances(vctx *c) {
  const plan_program *prog = c->prog;
  size_t n = (size_t)prog->ntensors + 1;
  if (!(c->rtol = calloc(n, sizeof(double))) ||
      !(c->atol = calloc(n, sizeof(double))) ||
      !(c->depth = calloc(n, sizeof(double))) ||
      !(c->rms = calloc(n, sizeof(double))))
    return plan_oom();
  for (int t = 0; t < prog->ntensors; t++) {
    tolerance_of(c, &prog->tensors[t], &c->rtol[t], &c->atol[t]);
    const plan_tensor *x = &prog->tensors[t];
    int64_t cnt = plan_vx_count_of(x->dims, x->rank);
    double s = 0;
    for (int64_t i = 0; c->ref[t] && i < cnt; i++)
      if (isfinite(c->ref[t][i]))
        s += c->ref[t][i] * c->ref[t][i];
    c->rms[t] = cnt > 0 ? sqrt(s / (double)cnt) : 0;
  }
  for (int i = 0; i < prog->nops; i++) { /* ops are in topological order */
    const plan_op *op = &prog->ops[i];
    double d = 0;
    for (int j = 0; j < op->nin; j++)
      d = fmax(d, c->depth[op->in[j]]);
    d += op_reduction_length(prog, op);
    for (int k = 0; k < op->nout; k++)
      c->depth[op->out[k]] = d;
  }
  return PLAN_OK;
}

/* Unit roundoff of the dtypes the depth bound serves (f64 and f32; the
 * low-precision bound serves bf16 and f16), else 0. */
static double depth_unit(plan_dtype d) {
  return d == PLAN_F64 ? 0x1p-53 : d == PLAN_F32 ? 0x1p-24 : 0;
}

static void compare_value(const vctx *c, const plan_tensor *t, double got,
                          double want, int64_t g, diff *df) {
  df->compared++;
  bool bad;
  double ab = fabs(got - want);
  if (got == want || (isnan(got) && isnan(want))) {
    bad = false; /* identical, infinities included; or a NaN the program
                    makes too (0/0 from its inputs) */
  } else if (!plan_dtype_is_float(t->dtype)) {
    bad = true;
  } else if (c->o->mode == PLAN_VERIFY_EXACT) {
    /* beyond 2^53 a double holds no more integers: sums round there, and
     * their order shows in the last bits; such elements agree to 2^-40 */
    bad = !(fabs(want) >= 0x1p53 && ab <= 0x1p-40 * fabs(want));
  } else {
    double rtol, atol;
    plan_vx_default_tol(c, t, &rtol, &atol);
    bad = !(ab <= atol + rtol * fabs(want));
    if (isfinite(ab)) {
      df->err2 += ab * ab;
      df->ref2 += want * want;
    }
    if (bad) {
      double sc = ab / (fabs(want) + c->rms[t - c->prog->tensors]);
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

/* The blocks of the partial group led by coord when every partial axis
 * sums (P(sum)), at most max of them, into mem; their count, or 0 when the
 * group needs the general path (another reduction, too large, a block
 * missing). */
static int group_members(const vctx *c, int buf, const int *pa, int np,
                         const int64_t *coord, const double **mem, int max) {
  int64_t n = 1;
  for (int i = 0; i < np; i++) {
    if (c->low->bufs[buf].pl.ax[pa[i]].reduce != PLAN_RED_SUM)
      return 0;
    n *= c->m->axis_sizes[pa[i]];
  }
  if (n > max)
    return 0;
  int64_t at[PLAN_MAX_MESH_AXES];
  memcpy(at, coord, sizeof at);
  for (int64_t k = 0; k < n; k++) {
    int64_t x = k;
    for (int i = np - 1; i >= 0; i--) {
      at[pa[i]] = x % c->m->axis_sizes[pa[i]];
      x /= c->m->axis_sizes[pa[i]];
    }
    const block *q = &c->bufs[buf][plan_vx_rank_at(c->m, at)];
    if (!q->data)
      return 0;
    mem[k] = q->data;
  }
  return (int)n;
}

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

/* The comparison of buffer buf's blocks (those of microbatch mb when mb
 * >= 0), added to *df. */
static void compare_blocks(const vctx *c, int buf, int64_t mb, diff *df) {
  const plan_lbuf *lb = &c->low->bufs[buf];
  const plan_tensor *t = &c->prog->tensors[lb->tensor];
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
    int nmem = np ? group_members(c, buf, pa, np, coord, mem, 64) : 0;
    /* rows along the innermost dim are contiguous in both the block and
     * the global tensor: one index computation per row */
    int64_t row = t->rank ? b->local[t->rank - 1] : 1;
    for (int64_t e0 = 0, e = 0, g = 0; row > 0 && e < b->n; e++, g++) {
      if (e == e0) { /* a new row */
        g = plan_vx_global_index(t, b, e);
        e0 += row;
      }
      double v;
      if (nmem > 0) {
        v = mem[0][e];
        for (int q = 1; q < nmem; q++)
          v += mem[q][e];
      } else if (np) {
        plan_vx_group_value(c, buf, pa, np, 0, coord, e, &v);
      } else {
        v = b->data[e];
      }
      compare_value(c, t, v, c->ref[lb->tensor][g], g, df);
      if (c->ref64 && c->ref64[lb->tensor]) {
        double r64 = c->ref64[lb->tensor][g], want = c->ref[lb->tensor][g],
               dg = v - r64, dr = want - r64;
        if (isfinite(v) && isfinite(want) && isfinite(r64)) {
          df->err64 += dg * dg;
          df->base64 += dr * dr;
        } else if (!(v == want || (isnan(v) && isnan(want)))) {
          df->nonfinite = true;
        }
      }
    }
  }
}


/* DESIGN §3: a float-mode mismatch in f32, bf16 or f16 is accepted when the
 * distributed run is not much worse than the single-device run in the same
 * dtype, both measured against an f64 reference (Frobenius norms):
 *   |got - ref64| <= LOWP_FACTOR * |ref - ref64| + atol * sqrt(n).
 * Ranks that round their partial sums to bf16 before an all-reduce differ
 * from the reference element by element, yet are no less accurate. A real
 * bug (a missing reduction, a wrong shard) is far outside this bound
 * (PLAN_VERIFY_LOWP_FACTOR, vctx.h). */
static bool low_precision_bound(const vctx *c, const plan_tensor *t,
                                const diff *df) {
  if (df->nonfinite || !c->ref64 || !c->ref64[t - c->prog->tensors] ||
      !plan_dtype_is_float(t->dtype) || plan_vx_run_dtype(c, t) == PLAN_F64)
    return false;
  double rtol, atol;
  plan_vx_default_tol(c, t, &rtol, &atol);
  return sqrt(df->err64) <= PLAN_VERIFY_LOWP_FACTOR * sqrt(df->base64) +
                                atol * sqrt((double)df->compared);
}

/* TTrace's idea (DESIGN §3): float error grows with the reductions behind
 * a tensor, so f64 and f32 tensors outside the elementwise tolerance are
 * accepted when, with K the reduction length along the deepest path from
 * the inputs and u the unit roundoff, eps = DEPTH_FACTOR u sqrt(K) bounds
 * both the relative Frobenius error and every element's error relative to
 * |ref| + RMS(ref) (so one wrong element in a big tensor is not averaged
 * away). bf16 and f16 are left to the low-precision bound: their u makes
 * such a bound too loose to catch a dropped reduction. */
static double depth_eps(const vctx *c, const plan_tensor *t) {
  double u = depth_unit(plan_vx_run_dtype(c, t));
  return PLAN_VERIFY_DEPTH_FACTOR * u *
         sqrt(fmax(c->depth[t - c->prog->tensors], 1));
}

static bool depth_bound(const vctx *c, const plan_tensor *t, const diff *df) {
  if (!plan_dtype_is_float(t->dtype)) /* integers compare exactly */
    return false;
  double eps = depth_eps(c, t);
  return eps > 0 && !df->bad_nonfinite && df->max_scaled <= eps &&
         sqrt(df->err2) <= eps * sqrt(df->ref2);
}

/* The record just made is within a bound: no mismatches count. */
static void accepted(vctx *c, const char *what) {
  if (c->nrecs && c->recs[c->nrecs - 1].tensor &&
      c->recs[c->nrecs - 1].what == what)
    c->recs[c->nrecs - 1].mismatches = 0;
}

void plan_vx_report_tensor(vctx *c, const char *what, const char *opname,
                          int buf, const diff *df) {
  const plan_lbuf *lb = &c->low->bufs[buf];
  const plan_tensor *t = &c->prog->tensors[lb->tensor];
  char pl[PLAN_PLACEMENT_STRLEN];
  plan_placement_format(&lb->pl, pl);
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
      depth_bound(c, t, df)) {
    plan_buf_printf(&c->text,
                    "within bound %s '%s' (%s, as %s): %lld of %lld elements "
                    "are outside the %s tolerance, but the relative error, "
                    "%.3g (Frobenius) and %.3g (largest), is within the "
                    "depth bound %.3g (reduction length %g)\n",
                    what, t->name, opname, pl, (long long)df->mismatches,
                    (long long)df->compared, plan_dtype_name(plan_vx_run_dtype(c, t)),
                    df->ref2 > 0 ? sqrt(df->err2 / df->ref2) : 0,
                    df->max_scaled, depth_eps(c, t),
                    c->depth[lb->tensor]);
    accepted(c, what);
    return;
  }
  if (df->mismatches && low_precision_bound(c, t, df)) {
    plan_buf_printf(&c->text,
                    "within bound %s '%s' (%s, as %s): %lld of %lld elements "
                    "are outside the %s tolerance, but the error against an "
                    "f64 reference, %g, is within %g times the "
                    "single-device program's own, %g\n",
                    what, t->name, opname, pl, (long long)df->mismatches,
                    (long long)df->compared, plan_dtype_name(plan_vx_run_dtype(c, t)),
                    sqrt(df->err64), PLAN_VERIFY_LOWP_FACTOR,
                    sqrt(df->base64));
    accepted(c, what);
    return;
  }
  if (!df->mismatches)
    return;
  if (c->equal) {
    c->equal = 0;
    c->first_op = opname;
    c->first_tensor = t->name;
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
  const plan_tensor *t = &c->prog->tensors[c->low->bufs[buf].tensor];
  if (!df->mismatches || c->ref64 || c->o->mode != PLAN_VERIFY_FLOAT ||
      !plan_dtype_is_float(t->dtype) || plan_vx_run_dtype(c, t) == PLAN_F64 ||
      depth_bound(c, t, df))
    return PLAN_OK;
  int rc = run_reference64(c);
  if (!rc) { /* again, with the f64 reference */
    memset(df, 0, sizeof *df);
    compare_blocks(c, buf, mb, df);
  }
  return rc;
}

static int compare_one(vctx *c, int buf, diff *df) {
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
static void compared_buffer(vctx *c, int b) {
  c->compared[b] = true;
  int t = c->low->bufs[b].tensor;
  c->mismatched[t] |= c->diffs[b].mismatches != 0;
  if (--c->pending[t] == 0 && !c->mismatched[t] &&
      !(c->keep_ref && c->keep_ref[t])) {
    block whole = {.n = plan_vx_count_of(c->prog->tensors[t].dims,
                                    c->prog->tensors[t].rank),
                   .data = c->ref[t]};
    give_block(c, &whole);
    c->ref[t] = whole.data; /* NULL once pooled */
  }
}

int plan_vx_compare_microbatch(vctx *c, int b, int64_t k, bool last) {
  double t0 = seconds_now();
  diff one;
  int rc = compare_some(c, b, k, &one);
  plan_vx_merge_diff(&c->diffs[b], &one);
  if (!rc && last)
    compared_buffer(c, b);
  c->cmp_seconds += seconds_now() - t0;
  return rc;
}

void plan_vx_release_microbatch(vctx *c, int b, int64_t k) {
  for (int64_t r = 0; r < c->nranks; r++)
    if (c->coords[r][c->mb_axis] == k)
      give_rank(c, b, r);
}

/* The comparison of buffer b: made during the lowered run, or now for a
 * buffer no step wrote (zeros). */
static int diff_of(vctx *c, int b, diff **df) {
  if (!c->compared[b]) {
    int rc = plan_vx_ensure_buffer(c, b, true);
    if (rc || (rc = compare_one(c, b, &c->diffs[b])))
      return rc;
    c->compared[b] = true;
  }
  *df = &c->diffs[b];
  return PLAN_OK;
}

/* A pipelined program, in step order: the inputs split into microbatches,
 * each op's results, each transfer's as received, then the outputs. */
static int compare_pipelined(vctx *c) {
  const plan_lowered *l = c->low;
  const plan_lpipe *pp = l->pipe;
  int rc;
  diff *df;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind == PLAN_LSTEP_INPUT) {
      const plan_lbuf *b = &l->bufs[s->out[0]];
      if (b->pl.ax[pp->axis].kind != PLAN_PL_S)
        continue;
      if ((rc = diff_of(c, s->out[0], &df)))
        return rc;
      plan_vx_report_tensor(c, "input", "split into microbatches", s->out[0], df);
    } else if (s->kind == PLAN_LSTEP_OP) {
      const plan_op *op = &c->prog->ops[s->op];
      for (int k = 0; k < op->nout; k++) {
        int b = l->produced[op->out[k]];
        if (b != s->out[k])
          continue;
        if ((rc = diff_of(c, b, &df)))
          return rc;
        plan_vx_report_tensor(c, "tensor", op->name, b, df);
      }
    } else if (s->kind == PLAN_LSTEP_TRANSFER) {
      char name[64];
      snprintf(name, sizeof name, "%s from stage %d to stage %d",
               pp->phase[i] == PLAN_LPHASE_RECV_F ? "send_f" : "send_b",
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
    if ((rc = diff_of(c, l->delivered[k], &df)))
      return rc;
    plan_vx_report_tensor(c, "output", "as delivered", l->delivered[k], df);
  }
  return PLAN_OK;
}

/* Reports every comparison in topological order, then the outputs as
 * delivered: the first mismatch is the first divergent op. */
static int compare_all(vctx *c, bool report) {
  const plan_program *prog = c->prog;
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
    if ((rc = diff_of(c, c->low->delivered[k], &df)))
      return rc;
    if (report)
      plan_vx_report_tensor(c, "output", "as delivered", c->low->delivered[k],
                       df);
  }
  return PLAN_OK;
}

/* ---- report ----------------------------------------------------------------- */


static char *dup_or_empty(const char *s) {
  size_t n = s ? strlen(s) : 0;
  char *d = malloc(n + 1);
  if (d) {
    if (n)
      memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* What one run (of several training steps) allocates. */
static void free_run(vctx *c) {
  if (c->bufs && c->low)
    for (int b = 0; b < c->low->nbufs; b++) {
      if (!c->bufs[b])
        continue;
      for (int64_t r = 0; r < c->nranks; r++)
        if (!plan_vx_shared_copy(c, b, r))
          free(c->bufs[b][r].data);
      free(c->bufs[b]);
    }
  free(c->bufs);
  free(c->diffs);
  free(c->compared);
  free(c->needs_cmp);
  free(c->last_use);
  free(c->pending);
  free(c->mismatched);
  free(c->readers_left);
  c->readers_left = NULL;
  free(c->written);
  c->written = NULL;
  free(c->shared);
  c->shared = NULL;
  if (c->ref64)
    for (int t = 0; t < c->prog->ntensors; t++)
      free(c->ref64[t]);
  free(c->ref64);
  if (c->ref)
    for (int t = 0; t < c->prog->ntensors; t++)
      free(c->ref[t]);
  free(c->ref);
  free(c->rtol);
  free(c->atol);
  free(c->depth);
  free(c->rms);
  c->bufs = NULL;
  c->diffs = NULL;
  c->compared = c->needs_cmp = c->mismatched = NULL;
  c->last_use = c->pending = NULL;
  c->ref64 = c->ref = NULL;
  c->rtol = c->atol = c->depth = c->rms = NULL;
}

/* Per-rank arrays; a pipelined run shares them along the microbatch axis
 * (plan_vx_mb_first owns each). */
static void free_blocks(const vctx *c, double ***b, int n) {
  for (int i = 0; b && i < n; i++) {
    for (int64_t r = 0; b[i] && r < c->nranks; r++)
      if (plan_vx_mb_first(c, r) == r)
        free(b[i][r]);
    free(b[i]);
  }
  free(b);
}

static void free_ctx(vctx *c) {
  free_run(c);
  for (int i = 0; i < c->npool; i++)
    free(c->pool[i]);
  free(c->pool);
  free(c->pool_n);
  if (c->low && c->low->train) {
    int np = c->low->train->nparams;
    free_blocks(c, c->master, np);
    free_blocks(c, c->mom, np);
    free_blocks(c, c->vel, np);
    free_blocks(c, c->leaf_blk, c->prog->ntensors);
    for (int i = 0; c->ref_mom && i < np; i++)
      free(c->ref_mom[i]);
    for (int i = 0; c->ref_vel && i < np; i++)
      free(c->ref_vel[i]);
    for (int t = 0; c->leaf_ref && t < c->prog->ntensors; t++)
      free(c->leaf_ref[t]);
  }
  free(c->coords); /* after the blocks: a pipeline's owners use them */
  plan_vx_dist_close(c);
  free(c->ref_mom);
  free(c->ref_vel);
  free(c->leaf_ref);
  free(c->keep_ref);
  free(c->keep_buf);
  free(c->master_buf);
  free(c->grid_op);
  free(c->policy);
  for (int i = 0; i < PLAN_MAX_OPERANDS * 2; i++)
    free(c->scratch[i]);
  plan_buf_free(&c->text);
  free(c->recs);
  plan_arena_free(&c->rec_arena);
  plan_lowered_free(c->low);
}

int plan_verify(plan_verify_report **out, const plan_plan *p,
                const plan_verify_options *opts) {
  return plan_verify_traced(out, p, opts, NULL, NULL); /* no Lua host */
}

int plan_verify_traced(plan_verify_report **out, const plan_plan *p,
                       const plan_verify_options *opts,
                       plan_region_tracer tracer, void *user) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_verify: no place for the report");
  *out = NULL;
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_verify: a plan with a mesh is needed");
  plan_lowered *low;
  int rc = plan_lower_traced(&low, p, tracer, user);
  if (rc)
    return rc;
  return plan_verify_lowered(out, p, low, opts);
}

int plan_verify_lowered(plan_verify_report **out, const plan_plan *p,
                        plan_lowered *low, const plan_verify_options *opts) {
  return plan_verify_lowered_hooked(out, p, low, opts, NULL, NULL);
}

int plan_verify_lowered_hooked(plan_verify_report **out, const plan_plan *p,
                               plan_lowered *low,
                               const plan_verify_options *opts,
                               plan_verify_step_hook hook, void *user) {
  *out = NULL;
  plan_verify_options dflt = PLAN_VERIFY_OPTIONS_INIT;
  if (!opts)
    opts = &dflt;
  if (opts->version < 2 || opts->version > PLAN_VERIFY_OPTIONS_VERSION) {
    plan_lowered_free(low);
    return plan_failf(PLAN_EUSAGE,
                      "plan_verify_options version %u is not 2 to %d",
                      opts->version, PLAN_VERIFY_OPTIONS_VERSION);
  }
  /* an older caller's struct ends before the newer fields */
  plan_verify_options full = PLAN_VERIFY_OPTIONS_INIT;
  memcpy(&full, opts,
         opts->version == 2   ? offsetof(plan_verify_options, tolerances)
         : opts->version == 3 ? offsetof(plan_verify_options, runner)
         : opts->version == 4 ? offsetof(plan_verify_options, world)
                              : sizeof full);
  opts = &full;
  int dtype = -1;
  if (opts->dtype) {
    dtype = plan_dtype_from_name(opts->dtype);
    if (dtype < 0 || !plan_dtype_is_float((plan_dtype)dtype)) {
      plan_lowered_free(low);
      return plan_failf(PLAN_EUSAGE,
                        "dtype '%s' is not f64, f32, bf16 or f16",
                        opts->dtype);
    }
  }
  vctx c;
  memset(&c, 0, sizeof c);
  c.dtype = dtype;
  c.p = low->plan ? low->plan : p; /* a training step: its own plan */
  c.prog = c.p->program;
  c.m = &c.p->mesh;
  c.o = opts;
  c.equal = 1;
  c.low = low; /* owned from here: freed with the context */
  c.hook = hook;
  c.hook_user = user;
  c.mb_axis = low->pipe ? low->pipe->axis : -1;
  c.mb_now = -1;
  c.runner = plan_runner_find(opts->runner); /* the reason, when NULL */
  if (!c.runner) {
    plan_lowered_free(low);
    return plan_error_last()->code;
  }
  if (c.runner->api_version != PLAN_RUNNER_API_VERSION) {
    plan_lowered_free(low);
    return plan_failf(PLAN_EUNSUPPORTED, "runner '%s' has API version %d, not %d",
                      c.runner->name, c.runner->api_version,
                      PLAN_RUNNER_API_VERSION);
  }
  plan_buf_init(&c.text);
  plan_arena_init(&c.rec_arena);
  int rc;
  c.nranks = c.m->ndevices;
  c.coords = calloc((size_t)c.nranks, sizeof *c.coords);
  if (!c.coords) {
    free_ctx(&c);
    return plan_oom();
  }
  for (int64_t r = 0; r < c.nranks; r++) {
    int64_t x = r;
    for (int a = c.m->naxes - 1; a >= 0; a--) {
      c.coords[r][a] = x % c.m->axis_sizes[a];
      x /= c.m->axis_sizes[a];
    }
  }
  if (opts->world && (rc = plan_vx_dist_open(&c, p))) {
    free_ctx(&c);
    return rc;
  }
  double secs[3] = {0, 0, 0};
  c.nsteps = 1;
  rc = plan_vx_setup_grid(&c);
  if (!rc && low->train) {
    c.nsteps = c.p->training.steps > 1 ? (int)c.p->training.steps : 1;
    rc = plan_vx_setup_train(&c);
  }
  for (c.step = 0; !rc && c.step < c.nsteps; c.step++) {
    if (c.step)
      free_run(&c);
    double t0 = seconds_now();
    if ((rc = run_reference(&c, &c.ref)) || (rc = init_tolerances(&c)))
      break;
    /* distributed: the low-precision bound sums every process's errors
     * against the f64 reference, so each needs it */
    if (c.comm && (rc = run_reference64(&c)))
      break;
    double t1 = seconds_now();
    if ((rc = run_lowered(&c))) /* comparing as it goes */
      break;
    double t2 = seconds_now();
    /* distributed: every process's comparisons first, merged */
    if (c.comm && !(rc = compare_all(&c, false)))
      rc = plan_vx_dist_merge_diffs(&c);
    if (!rc)
      rc = compare_all(&c, true);
    if (!rc && c.equal && low->train)
      rc = plan_vx_optimizer_step(&c);
    secs[0] += t1 - t0;
    secs[1] += t2 - t1;
    secs[2] += seconds_now() - t2;
    if (!c.equal)
      break;
  }
  if (rc) {
    free_ctx(&c);
    return rc;
  }
  plan_verify_report *rep = calloc(1, sizeof *rep);
  if (!rep) {
    free_ctx(&c);
    return plan_oom();
  }
  rep->equal = c.equal;
  rep->seconds_reference = secs[0];
  rep->seconds_lowered = secs[1] - c.cmp_seconds;
  rep->seconds_compare = secs[2] + c.cmp_seconds;
  memcpy(rep->collectives, c.low->collectives, sizeof rep->collectives);
  rep->mode = opts->mode;
  rep->seed = opts->seed;
  rep->runner = dup_or_empty(c.runner->name);
  rep->ranks = c.nranks;
  /* the records move to the report, with their strings */
  rep->recs = c.recs;
  rep->nrecs = c.nrecs;
  rep->arena = c.rec_arena;
  c.recs = NULL;
  c.nrecs = 0;
  plan_arena_init(&c.rec_arena);
  rep->file = dup_or_empty(p->file);
  if (low->train) {
    const plan_training *o = &c.p->training;
    if (o->optimizer == PLAN_OPT_NONE)
      plan_buf_printf(&c.text, "training: gradients of %d params, no "
                      "optimizer\n", low->train->nparams);
    else if (o->optimizer == PLAN_OPT_ADAM)
      plan_buf_printf(&c.text,
                      "training: %d of %d adam steps (lr %g, betas %g %g, "
                      "eps %g, weight decay %g, clip %g, loss scale %g) on "
                      "%d params, compared: loss, every gradient, updated "
                      "params and both moments on every replica\n",
                      c.equal ? c.nsteps : c.step + 1, c.nsteps, o->lr,
                      o->beta1, o->beta2, o->eps, o->weight_decay,
                      o->clip_grad_norm, o->loss_scale, low->train->nparams);
    else
      plan_buf_printf(&c.text,
                      "training: %d of %d sgd steps (lr %g, momentum %g, "
                      "weight decay %g, clip %g, loss scale %g) on %d "
                      "params, compared: loss, every gradient, updated "
                      "params on every replica\n",
                      c.equal ? c.nsteps : c.step + 1, c.nsteps, o->lr,
                      o->momentum, o->weight_decay, o->clip_grad_norm,
                      o->loss_scale, low->train->nparams);
  }
  plan_buf_printf(&c.text, "%s: %s (%s mode, seed %llu, ", p->file,
                  c.equal ? "EQUAL" : "NOT EQUAL",
                  opts->mode == PLAN_VERIFY_EXACT ? "exact" : "float",
                  (unsigned long long)opts->seed);
  if (low->pipe)
    plan_buf_printf(&c.text,
                    "%lld ranks, %d stages, %lld microbatches, %s, %d "
                    "send/recv; ",
                    (long long)p->mesh.ndevices, low->pipe->nstages,
                    (long long)low->pipe->microbatches,
                    plan_schedule_kind_name(
                        plan_schedule_kind_of(low->pipe->schedule)),
                    low->pipe->transfers);
  else
    plan_buf_printf(&c.text, "%lld ranks; ", (long long)c.nranks);
  bool first = true;
  for (int k = 0; k < PLAN_REDIST_COUNT; k++)
    if (c.low->collectives[k] && k != PLAN_REDIST_SLICE &&
        k != PLAN_REDIST_RELABEL && k != PLAN_REDIST_ZERO_NON_OWNER) {
      plan_buf_printf(&c.text, "%s%d %s", first ? "" : ", ",
                      c.low->collectives[k],
                      plan_redist_kind_name((plan_redist_kind)k));
      first = false;
    }
  plan_buf_printf(&c.text, "%s)\n", first ? "no collectives" : "");
  if (c.deadlock) {
    plan_buf_printf(&c.text, "the schedule did not finish\n");
    plan_buf_printf(&c.text, "diagnosis: %s\n", c.diagnosis);
  } else if (!c.equal) {
    plan_buf_printf(&c.text, "first divergent op: %s (tensor '%s')\n",
                    c.first_op, c.first_tensor);
    if (c.diagnosis[0])
      plan_buf_printf(&c.text, "diagnosis: %s\n", c.diagnosis);
  }
  if (c.runner->describe) { /* the default runner goes without saying */
    char where[512] = "";
    c.runner->describe(where, sizeof where);
    plan_buf_printf(&c.text, "runner: %s%s%s\n", c.runner->name,
                    where[0] ? ": " : "", where);
  }
  if (c.comm) {
    char how[512] = "";
    c.comm->ops->describe(c.comm, how, sizeof how);
    plan_buf_printf(&c.text,
                    "distributed: %d processes, one rank each, compared "
                    "where they ran; %s\n",
                    c.comm->world, how);
  }
  rep->text = dup_or_empty(plan_buf_cstr(&c.text));
  if (!rep->file || !rep->runner) {
    free_ctx(&c);
    plan_verify_report_free(rep);
    return plan_oom();
  }
  rep->first_op = dup_or_empty(c.first_op);
  rep->first_tensor = dup_or_empty(c.first_tensor);
  rep->diagnosis = dup_or_empty(c.diagnosis);
  c.dist_done = true; /* every collective made: a clean close */
  free_ctx(&c);
  if (!rep->text || !rep->first_op || !rep->first_tensor || !rep->diagnosis) {
    plan_verify_report_free(rep);
    return plan_oom();
  }
  *out = rep;
  return PLAN_OK;
}

void plan_verify_report_free(plan_verify_report *r) {
  if (!r)
    return;
  free(r->file);
  free(r->runner);
  free(r->recs);
  plan_arena_free(&r->arena);
  free(r->text);
  free(r->first_op);
  free(r->first_tensor);
  free(r->diagnosis);
  free(r);
}

int plan_verify_report_equal(const plan_verify_report *r) { return r->equal; }
const char *plan_verify_report_runner(const plan_verify_report *r) {
  return r->runner;
}
const char *plan_verify_report_text(const plan_verify_report *r) {
  return r->text;
}
const char *plan_verify_report_first_op(const plan_verify_report *r) {
  return r->equal ? NULL : r->first_op;
}
const char *plan_verify_report_first_tensor(const plan_verify_report *r) {
  return r->equal ? NULL : r->first_tensor;
}
const char *plan_verify_report_diagnosis(const plan_verify_report *r) {
  return r->diagnosis;
}
int plan_verify_report_collectives(const plan_verify_report *r,
                                   const char *kind) {
  for (int k = 0; k < PLAN_REDIST_COUNT; k++)
    if (!strcmp(plan_redist_kind_name((plan_redist_kind)k), kind))
      return r->collectives[k];
  return 0;
}
