/* Inference of matmul, linear and the elementwise ops (binary with
 * broadcasting, unary, where), and of the activations' gradients. */
#include <math.h>
#include <string.h>

#include "ir/ops_infer_checks.h"

/* Numpy broadcasting of two dim lists aligned at the right. On a clash sets
 * *bad to the output dim index and returns false. */
static bool broadcast(const int64_t *a, int ra, const int64_t *b, int rb,
                      int64_t *o, int *ro, int *bad) {
  int r = ra > rb ? ra : rb;
  for (int j = 0; j < r; j++) {
    int ja = j - (r - ra), jb = j - (r - rb);
    int64_t da = ja >= 0 ? a[ja] : 1, db = jb >= 0 ? b[jb] : 1;
    if (da != db && da != 1 && db != 1) {
      *bad = j;
      return false;
    }
    o[j] = da == 1 ? db : da;
  }
  *ro = r;
  return true;
}

/* ---- matmul, linear ------------------------------------------------------ */

int plan_infer_matmul(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_MATMUL, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_MATMUL, in, nin, 3u, &dt, err,
                                    errsz)))
    return rc;
  const plan_shape *a = &in[0], *b = &in[1];
  for (int i = 0; i < 2; i++)
    if (in[i].rank < 2)
      return plan_errf(err, errsz,
                       "matmul: input %d must have rank >= 2 ([.., m, k] / "
                       "[.., k, n]), not %d",
                       i, in[i].rank);
  bool ta = attr_bool(attrs, SPEC(PLAN_OP_MATMUL), 0);
  bool tb = attr_bool(attrs, SPEC(PLAN_OP_MATMUL), 1);
  int ra = a->rank, rb = b->rank;
  int64_t m = a->dims[ta ? ra - 1 : ra - 2], ka = a->dims[ta ? ra - 2 : ra - 1];
  int64_t kb = b->dims[tb ? rb - 1 : rb - 2], n = b->dims[tb ? rb - 2 : rb - 1];
  if (ka != kb)
    return plan_errf(err, errsz,
                     "matmul: contracting dims differ: %lld vs %lld",
                     (long long)ka, (long long)kb);
  int nb, bad;
  if (!broadcast(a->dims, ra - 2, b->dims, rb - 2, out->dims, &nb, &bad)) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(
        err, errsz, "matmul: batch dims do not broadcast: %s vs %s",
        fmt_dims(a->dims, ra - 2, sa), fmt_dims(b->dims, rb - 2, sb));
  }
  out->rank = nb + 2;
  out->dims[nb] = m;
  out->dims[nb + 1] = n;
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_MATMUL, out, nout, err, errsz);
}

int plan_infer_linear(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc =
      plan_infer_prelude(PLAN_OP_LINEAR, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_LINEAR, in, nin, 7u, &dt, err,
                                    errsz)))
    return rc;
  const plan_shape *x = &in[0], *w = &in[1];
  if (x->rank < 1)
    return plan_errf(err, errsz, "linear: x must have rank >= 1 ([.., k])");
  if (w->rank != 2)
    return plan_errf(err, errsz, "linear: w must be [n, k], not rank %d",
                     w->rank);
  int64_t k = x->dims[x->rank - 1];
  if (w->dims[1] != k)
    return plan_errf(err, errsz,
                     "linear: contracting dims differ: x has k = %lld, w is "
                     "[%lld, %lld] ([n, k])",
                     (long long)k, (long long)w->dims[0],
                     (long long)w->dims[1]);
  int64_t n = w->dims[0];
  if (nin == 3 && (in[2].rank != 1 || in[2].dims[0] != n)) {
    char s[SHAPE_STRLEN];
    return plan_errf(err, errsz, "linear: bias must be [%lld], not %s",
                     (long long)n, fmt_dims(in[2].dims, in[2].rank, s));
  }
  copy_shape(out, x);
  out->dims[x->rank - 1] = n;
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_LINEAR, out, nout, err, errsz);
}

/* ---- elementwise --------------------------------------------------------- */

static int infer_binary(int kind, PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, 3u, &dt, err, errsz)))
    return rc;
  int bad;
  if (!broadcast(in[0].dims, in[0].rank, in[1].dims, in[1].rank, out->dims,
                 &out->rank, &bad)) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz, "%s: shapes do not broadcast: %s vs %s",
                     plan_op_kind_name(kind),
                     fmt_dims(in[0].dims, in[0].rank, sa),
                     fmt_dims(in[1].dims, in[1].rank, sb));
  }
  out->dtype = dt;
  return plan_infer_finish(kind, out, nout, err, errsz);
}

int plan_infer_add(PLAN_INFER_ARGS) {
  return infer_binary(PLAN_OP_ADD, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_sub(PLAN_INFER_ARGS) {
  return infer_binary(PLAN_OP_SUB, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_mul(PLAN_INFER_ARGS) {
  return infer_binary(PLAN_OP_MUL, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_div(PLAN_INFER_ARGS) {
  return infer_binary(PLAN_OP_DIV, in, nin, attrs, out, nout, err, errsz);
}

static int infer_unary(int kind, PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, 1u, &dt, err, errsz)))
    return rc;
  copy_shape(out, &in[0]);
  return PLAN_OK;
}

int plan_infer_scale(PLAN_INFER_ARGS) {
  int rc = infer_unary(PLAN_OP_SCALE, in, nin, attrs, out, nout, err, errsz);
  if (rc)
    return rc;
  double f = attr_float(attrs, SPEC(PLAN_OP_SCALE), 0);
  if (!isfinite(f))
    return plan_errf(err, errsz, "scale: factor must be a finite number");
  return PLAN_OK;
}
int plan_infer_relu(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_RELU, in, nin, attrs, out, nout, err, errsz);
}
/* gelu and gelu_grad: `approximate` is "none" or "tanh". */
static int check_approximate(int kind, const plan_attr_val *attrs, char *err,
                             size_t errsz) {
  const char *s = attr_string(attrs, SPEC(kind), 0);
  if (strcmp(s, "none") && strcmp(s, "tanh")) {
    /* Quoted with control characters masked: the reason stays one line. */
    char q[41];
    size_t n = 0;
    for (; n < sizeof q - 1 && s[n]; n++)
      q[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    q[n] = '\0';
    return plan_errf(err, errsz,
                     "%s: approximate must be \"none\" or \"tanh\", not \"%s\"",
                     plan_op_kind_name(kind), q);
  }
  return PLAN_OK;
}

int plan_infer_gelu(PLAN_INFER_ARGS) {
  int rc = infer_unary(PLAN_OP_GELU, in, nin, attrs, out, nout, err, errsz);
  if (rc)
    return rc;
  return check_approximate(PLAN_OP_GELU, attrs, err, errsz);
}
int plan_infer_silu(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_SILU, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_tanh(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_TANH, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_exp(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_EXP, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_sigmoid(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_SIGMOID, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_rsqrt(PLAN_INFER_ARGS) {
  return infer_unary(PLAN_OP_RSQRT, in, nin, attrs, out, nout, err, errsz);
}
int plan_infer_add_scalar(PLAN_INFER_ARGS) {
  int rc =
      infer_unary(PLAN_OP_ADD_SCALAR, in, nin, attrs, out, nout, err, errsz);
  if (rc)
    return rc;
  if (!isfinite(attr_float(attrs, SPEC(PLAN_OP_ADD_SCALAR), 0)))
    return plan_errf(err, errsz, "add_scalar: value must be a finite number");
  return PLAN_OK;
}

int plan_infer_softmax(PLAN_INFER_ARGS) {
  int rc = infer_unary(PLAN_OP_SOFTMAX, in, nin, attrs, out, nout, err, errsz);
  if (rc)
    return rc;
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_SOFTMAX), 0);
  int dim;
  if (!norm_dim(d, in[0].rank, &dim))
    return plan_errf(err, errsz,
                     "softmax: dim %lld is out of range for rank %d",
                     (long long)d, in[0].rank);
  return PLAN_OK;
}

/* ---- where, repeat_interleave -------------------------------------------- */

/* where: (cond, a, b) -> out, out[i] = cond[i] != 0 ? a[i] : b[i] with the
 * three broadcast together (numpy). cond may have any dtype: an integer
 * mask (the convention for non-float data: ids, labels; `range: [0, 2]`
 * makes the generator give 0s and 1s) or a float one (a const recipe);
 * a and b share one dtype, the output's. */
int plan_infer_where(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(PLAN_OP_WHERE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  if (in[1].dtype != in[2].dtype)
    return plan_errf(err, errsz,
                     "where: a and b (inputs 1 and 2) differ in dtype: %s vs "
                     "%s",
                     plan_dtype_name(in[1].dtype),
                     plan_dtype_name(in[2].dtype));
  int64_t ab[PLAN_MAX_RANK];
  int rab, bad;
  if (!broadcast(in[1].dims, in[1].rank, in[2].dims, in[2].rank, ab, &rab,
                 &bad) ||
      !broadcast(in[0].dims, in[0].rank, ab, rab, out->dims, &out->rank,
                 &bad)) {
    char sc[SHAPE_STRLEN], sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "where: shapes do not broadcast: cond %s, a %s, b %s",
                     fmt_dims(in[0].dims, in[0].rank, sc),
                     fmt_dims(in[1].dims, in[1].rank, sa),
                     fmt_dims(in[2].dims, in[2].rank, sb));
  }
  out->dtype = in[1].dtype;
  return plan_infer_finish(PLAN_OP_WHERE, out, nout, err, errsz);
}

/* ---- activation gradients ------------------------------------------------ */

/* relu_grad, gelu_grad, silu_grad: (dy, x) -> dx, all one shape. */
static int infer_act_grad(int kind, PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, 3u, &dt, err, errsz)) ||
      (rc = plan_infer_same_dims(kind, in, 0, 1, err, errsz)))
    return rc;
  copy_shape(out, &in[1]);
  return PLAN_OK;
}

int plan_infer_relu_grad(PLAN_INFER_ARGS) {
  return infer_act_grad(PLAN_OP_RELU_GRAD, in, nin, attrs, out, nout, err,
                        errsz);
}
int plan_infer_gelu_grad(PLAN_INFER_ARGS) {
  int rc =
      infer_act_grad(PLAN_OP_GELU_GRAD, in, nin, attrs, out, nout, err, errsz);
  return rc ? rc : check_approximate(PLAN_OP_GELU_GRAD, attrs, err, errsz);
}
int plan_infer_silu_grad(PLAN_INFER_ARGS) {
  return infer_act_grad(PLAN_OP_SILU_GRAD, in, nin, attrs, out, nout, err,
                        errsz);
}
