/* One op of either run on the runner: the verifier's inputs for the
 * leaves, the operands converted to and from the kernels' dtypes around
 * the runner's run_op, and what a runner's failure means for the
 * verdict. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"
#include "recipes.h"
#include "base/numeric.h"
#include "verify_ctx.h"

/* The dtype tensor t runs in: its own, or the run's --dtype for floats. */
plan_dtype plan_vx_run_dtype(const vctx *c, const vx_tensor *t) {
  if (!plan_dtype_is_float(t->dtype))
    return t->dtype;
  if (c->dtype >= 0)
    return (plan_dtype)c->dtype;
  if (c->policy && c->policy[t - c->prog->tensors] >= 0)
    return (plan_dtype)c->policy[t - c->prog->tensors];
  return t->dtype;
}

double plan_vx_round_run_dtype(const vctx *c, const vx_tensor *t, double v) {
  switch (plan_vx_run_dtype(c, t)) {
  case PLAN_F32:
    return (double)(float)v;
  case PLAN_BF16:
    return plan_round_bf16((float)v);
  case PLAN_F16:
    return plan_round_f16((float)v);
  default:
    return v;
  }
}

void plan_vx_fill_leaf(const vctx *c, int tensor, block *b) {
  const vx_tensor *t = &c->prog->tensors[tensor];
  bool exact = c->o->mode == PLAN_VERIFY_EXACT;
  plan_input_spec spec = {exact ? PLAN_INPUT_EXACT : PLAN_INPUT_FLOAT, 0, 0};
  if (!plan_dtype_is_float(t->dtype)) {
    spec.kind = PLAN_INPUT_INT;
    spec.lo = t->has_range ? t->range_lo : 0;
    spec.hi = t->has_range ? t->range_hi : 2;
    /* indices into a dim need a range that fits it; validation warns */
  }
  uint64_t key = plan_input_tensor_key(t->name);
  plan_program_tensor_info ti;
  plan_program_tensor(&ti, c->prog->pub, tensor);
  for (int64_t k = 0; k < b->n; k++) {
    int64_t g = plan_vx_global_index(t, b, k);
    if (t->role == PLAN_ROLE_CONST && t->recipe != PLAN_RECIPE_NONE)
      b->data[k] = plan_vx_recipe_value(&ti, g, exact);
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

/* ---- running ops --------------------------------------------------------- */

static plan_dtype kernel_dtype(const vctx *c, const vx_tensor *t) {
  if (!plan_dtype_is_float(t->dtype))
    return PLAN_I64;
  return c->o->mode == PLAN_VERIFY_EXACT || c->force64
             ? PLAN_F64
             : plan_vx_run_dtype(c, t);
}

/* A scratch buffer of the context, grown as needed and reused from op to
 * op: fresh large allocations for every operand would be fresh pages,
 * faulted in and zeroed for every op. */
static void *scratch(vctx *c, int slot, size_t bytes) {
  if (c->scratch_cap[slot] < bytes) {
    size_t cap =
        bytes > 2 * c->scratch_cap[slot] ? bytes : 2 * c->scratch_cap[slot];
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

static void set_view(plan_view *v, const vx_tensor *t, plan_dtype kd,
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
int plan_vx_run_op(vctx *c, const vx_op *op, block *const *ins,
                   block *const *outs) {
  plan_view vin[PLAN_MAX_OPERANDS], vout[PLAN_MAX_OPERANDS];
  int rc = PLAN_OK;
  char err[256] = "";
  /* a dtype policy: float inputs are read in the output's dtype */
  const vx_tensor *o0 = op->nout ? &c->prog->tensors[op->out[0]] : NULL;
  bool autocast = c->policy && o0 && plan_dtype_is_float(o0->dtype);
  for (int j = 0; j < op->nin && !rc; j++) {
    const vx_tensor *t = &c->prog->tensors[op->in[j]];
    plan_dtype kd = autocast && plan_dtype_is_float(t->dtype)
                        ? kernel_dtype(c, o0)
                        : kernel_dtype(c, t);
    set_view(&vin[j], t, kd, ins[j]);
    if (!(vin[j].data = to_kernel(c, j, kd, ins[j]->data, ins[j]->n)))
      rc = plan_oom();
  }
  for (int k = 0; k < op->nout && !rc; k++) {
    const vx_tensor *t = &c->prog->tensors[op->out[k]];
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
