/* Single-device reference runs and reference gradients; see train_ref.h. */
#include "train_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"
#include "recipes.h"
#include "base/numeric.h"
#include "base/util.h"
#include "runner.h"

struct plan_ref_run {
  const plan_program *p;
  int ntensors;
  plan_program_tensor_info *t; /* [tensor]: the program's, read once */
  plan_ref_options o;
  const plan_runner_vtable *runner;
  double **val;   /* [tensor] */
  int64_t *count; /* [tensor] */
  /* operand copies in the kernels' dtype (inputs, then outputs) */
  void *scratch[2 * PLAN_MAX_OPERANDS];
  size_t scratch_cap[2 * PLAN_MAX_OPERANDS];
};

static int64_t elems(const plan_program_tensor_info *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= t->dims[d]; /* fits: the loader checked */
  return n;
}

/* ---- leaves -------------------------------------------------------------- */

/* The dtype a float tensor runs in. */
static plan_dtype run_dtype(const plan_ref_run *r,
                            const plan_program_tensor_info *t) {
  if (!plan_dtype_is_float(t->dtype))
    return (plan_dtype)t->dtype;
  if (r->o.mode == PLAN_VERIFY_EXACT)
    return PLAN_F64;
  return (plan_dtype)(r->o.dtype >= 0 ? r->o.dtype : t->dtype);
}

static void fill_leaf(const plan_ref_run *r, int tensor) {
  const plan_program_tensor_info *t = &r->t[tensor];
  double *v = r->val[tensor];
  int64_t n = r->count[tensor];
  bool exact = r->o.mode == PLAN_VERIFY_EXACT;
  if (t->role == PLAN_ROLE_CONST && t->recipe != PLAN_RECIPE_NONE) {
    for (int64_t k = 0; k < n; k++)
      v[k] = plan_vx_recipe_value(t, k, exact);
    return;
  }
  plan_input_spec spec = {exact ? PLAN_INPUT_EXACT : PLAN_INPUT_FLOAT, 0, 0};
  if (!plan_dtype_is_float(t->dtype)) {
    spec.kind = PLAN_INPUT_INT;
    spec.lo = t->has_range ? t->range_lo : 0;
    spec.hi = t->has_range ? t->range_hi : 2;
  }
  uint64_t key = plan_input_tensor_key(t->name);
  for (int64_t k = 0; k < n; k++)
    v[k] = plan_input_value(r->o.seed, key, k, &spec);
  plan_dtype dt = run_dtype(r, t);
  if (!exact && (dt == PLAN_BF16 || dt == PLAN_F16))
    for (int64_t k = 0; k < n; k++)
      v[k] = dt == PLAN_BF16 ? plan_round_bf16((float)v[k])
                             : plan_round_f16((float)v[k]);
}

/* ---- runs ---------------------------------------------------------------- */

void plan_ref_run_free(plan_ref_run *r) {
  if (!r)
    return;
  for (int t = 0; r->val && t < r->ntensors; t++)
    free(r->val[t]);
  free(r->val);
  free(r->t);
  free(r->count);
  for (int i = 0; i < 2 * PLAN_MAX_OPERANDS; i++)
    free(r->scratch[i]);
  free(r);
}

int plan_ref_run_new(plan_ref_run **out, const plan_program *p,
                     const plan_ref_options *opts) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_ref_run_new: NULL argument");
  *out = NULL;
  plan_ref_options def = PLAN_REF_OPTIONS_INIT;
  if (!opts)
    opts = &def;
  if (opts->dtype >= 0 && (opts->dtype >= PLAN_DTYPE_COUNT ||
                           !plan_dtype_is_float((plan_dtype)opts->dtype)))
    return plan_failf(PLAN_EUSAGE,
                      "reference run: dtype %d is not a float "
                      "dtype",
                      opts->dtype);
  plan_ref_run *r = calloc(1, sizeof *r);
  if (!r)
    return plan_oom();
  r->p = p;
  r->o = *opts;
  r->runner = plan_runner_find("cpu");
  r->ntensors = plan_program_tensor_count(p);
  size_t nt = (size_t)r->ntensors + 1;
  r->val = calloc(nt, sizeof(double *));
  r->count = calloc(nt, sizeof(int64_t));
  r->t = calloc(nt, sizeof *r->t);
  if (!r->val || !r->count || !r->t) {
    plan_ref_run_free(r);
    return plan_oom();
  }
  for (int t = 0; t < r->ntensors; t++)
    plan_program_tensor(&r->t[t], p, t); /* t is in range */
  for (int t = 0; t < r->ntensors; t++) {
    r->count[t] = elems(&r->t[t]);
    r->val[t] =
        calloc((size_t)(r->count[t] > 0 ? r->count[t] : 1), sizeof(double));
    if (!r->val[t]) {
      plan_ref_run_free(r);
      return plan_oom();
    }
    if (r->t[t].producer < 0)
      fill_leaf(r, t);
  }
  *out = r;
  return PLAN_OK;
}

double *plan_ref_run_values(plan_ref_run *r, int tensor) {
  return r && tensor >= 0 && tensor < r->ntensors ? r->val[tensor] : NULL;
}

int64_t plan_ref_run_count(const plan_ref_run *r, int tensor) {
  return r && tensor >= 0 && tensor < r->ntensors ? r->count[tensor] : -1;
}

/* The kernels' storage of a dtype: double (F64), int64_t (integers) or
 * float (F32, and BF16/F16 held as float). */
static void *operand(plan_ref_run *r, int slot, plan_dtype kd, double *src,
                     int64_t n, bool copy) {
  if (kd == PLAN_F64)
    return src;
  size_t bytes = (size_t)(n > 0 ? n : 1) * 8;
  if (r->scratch_cap[slot] < bytes) {
    void *m = malloc(bytes);
    if (!m)
      return NULL;
    free(r->scratch[slot]);
    r->scratch[slot] = m;
    r->scratch_cap[slot] = bytes;
  }
  void *d = r->scratch[slot];
  if (!copy)
    return d;
  if (!plan_dtype_is_float(kd)) {
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

static void back(plan_dtype kd, const void *src, double *dst, int64_t n) {
  if (kd == PLAN_F64)
    return; /* written in place */
  if (!plan_dtype_is_float(kd)) {
    const int64_t *x = src;
    for (int64_t i = 0; i < n; i++)
      dst[i] = (double)x[i];
  } else {
    const float *x = src;
    for (int64_t i = 0; i < n; i++)
      dst[i] = (double)x[i];
  }
}

static void view_of(plan_view *v, const plan_program_tensor_info *t,
                    plan_dtype kd) {
  memset(v, 0, sizeof *v);
  v->dtype = kd;
  v->rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    v->dims[d] = t->dims[d];
    v->global_dims[d] = t->dims[d];
  }
}

static int run_op(plan_ref_run *r, const plan_program_op_info *op) {
  plan_view vin[PLAN_MAX_OPERANDS], vout[PLAN_MAX_OPERANDS];
  for (int j = 0; j < op->nin; j++) {
    const plan_program_tensor_info *t = &r->t[op->in[j]];
    plan_dtype kd = run_dtype(r, t);
    view_of(&vin[j], t, kd);
    /* integers are int64_t whatever their declared width */
    if (!plan_dtype_is_float(kd))
      vin[j].dtype = PLAN_I64;
    vin[j].data = operand(r, j, vin[j].dtype, r->val[op->in[j]],
                          r->count[op->in[j]], true);
    if (!vin[j].data)
      return plan_oom();
  }
  for (int k = 0; k < op->nout; k++) {
    const plan_program_tensor_info *t = &r->t[op->out[k]];
    plan_dtype kd = run_dtype(r, t);
    view_of(&vout[k], t, kd);
    if (!plan_dtype_is_float(kd))
      vout[k].dtype = PLAN_I64;
    vout[k].data = operand(r, PLAN_MAX_OPERANDS + k, vout[k].dtype,
                           r->val[op->out[k]], r->count[op->out[k]], false);
    if (!vout[k].data)
      return plan_oom();
  }
  plan_kernel_ctx kc = {r->o.mode == PLAN_VERIFY_EXACT, 0};
  char err[256] = "";
  if (r->runner->run_op(op->kind, op->attrs, vin, op->nin, vout, op->nout, &kc,
                        err, sizeof err))
    return plan_failf(PLAN_EINVALID, "op '%s': %s", op->name, err);
  for (int k = 0; k < op->nout; k++)
    back(vout[k].dtype, vout[k].data, r->val[op->out[k]], r->count[op->out[k]]);
  return PLAN_OK;
}

int plan_ref_run_exec(plan_ref_run *r) {
  if (!r)
    return plan_failf(PLAN_EUSAGE, "plan_ref_run_exec: NULL argument");
  int nops = plan_program_op_count(r->p);
  for (int i = 0; i < nops; i++) {
    plan_program_op_info op;
    int rc = plan_program_op(&op, r->p, i);
    if (!rc)
      rc = run_op(r, &op);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

/* ---- reference gradients ------------------------------------------------- */

void plan_ref_grads_free(plan_ref_grads *g) {
  if (!g)
    return;
  plan_ref_run_free(g->run);
  plan_program_free(g->train);
  free(g->param);
  free(g->grad);
  free(g);
}

int plan_ref_grads_compute(plan_ref_grads **out, const plan_program *fwd,
                           const plan_ref_options *opts) {
  if (!out || !fwd)
    return plan_failf(PLAN_EUSAGE, "plan_ref_grads_compute: NULL argument");
  *out = NULL;
  plan_ref_grads *g = calloc(1, sizeof *g);
  if (!g)
    return plan_oom();
  int rc = plan_program_grad(&g->train, fwd, NULL);
  if (!rc) {
    size_t n = (size_t)plan_program_tensor_count(fwd) + 1;
    g->param = malloc(n * sizeof(int));
    g->grad = malloc(n * sizeof(int));
    rc = g->param && g->grad ? PLAN_OK : plan_oom();
  }
  for (int t = 0; !rc && t < plan_program_tensor_count(fwd); t++) {
    plan_program_tensor_info xi, *x = &xi;
    plan_program_tensor(x, fwd, t);
    if (x->role != PLAN_ROLE_PARAM || !plan_dtype_is_float(x->dtype))
      continue;
    int gt = plan_program_grad_tensor(g->train, t);
    if (gt < 0) {
      rc = plan_failf(PLAN_EINVALID, "param '%s' has no gradient", x->name);
      break;
    }
    g->param[g->nparams] = t;
    g->grad[g->nparams++] = gt;
  }
  if (!rc)
    rc = plan_ref_run_new(&g->run, g->train, opts);
  if (!rc)
    rc = plan_ref_run_exec(g->run);
  if (rc) {
    plan_ref_grads_free(g);
    return rc;
  }
  g->loss = g->run->val[plan_program_loss(fwd)][0];
  *out = g;
  return PLAN_OK;
}

const double *plan_ref_grads_values(const plan_ref_grads *g, int i) {
  return g && i >= 0 && i < g->nparams ? g->run->val[g->grad[i]] : NULL;
}
