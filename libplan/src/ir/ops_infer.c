/* Shape and dtype inference of every op (the `infer` column of the registry
 * in ops.c). Inference functions never allocate and keep no state: every
 * result goes into the caller's plan_shape array and every problem into a
 * one-line reason ("matmul: contracting dims differ: 16 vs 32"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/ops_infer.h"

/* ---- small helpers ------------------------------------------------------- */


#define SHAPE_STRLEN PLAN_DIMS_STRLEN
#define fmt_dims plan_format_dims

/* Resolves a dim attribute (negative counts from the end) against rank. */
static bool norm_dim(int64_t d, int rank, int *out) {
  if (d < -(int64_t)rank || d >= (int64_t)rank)
    return false;
  *out = (int)(d < 0 ? d + rank : d);
  return true;
}

static bool dtype_ok(plan_dtype t) {
  return (int)t >= 0 && t < PLAN_DTYPE_COUNT;
}

/* The schema of a kind (reduce_sum and reduce_mean share one). */
#define SPEC(kind) (plan_op_info_get(kind)->attrs)

/* The attribute values may be NULL for an op built in memory: every field
 * then takes the schema default. With values, the loader has already filled
 * the defaults of absent scalars (plan_program_fill_attr_defaults). */
static int64_t attr_int(const plan_attr_val *a, const plan_attr_spec *s,
                        int i) {
  return a ? a[i].i : s[i].def_i;
}
static double attr_float(const plan_attr_val *a, const plan_attr_spec *s,
                         int i) {
  return a ? a[i].f : s[i].def_f;
}
static bool attr_bool(const plan_attr_val *a, const plan_attr_spec *s, int i) {
  return a ? a[i].b : s[i].def_b;
}
static const char *attr_string(const plan_attr_val *a, const plan_attr_spec *s,
                               int i) {
  return a && a[i].s ? a[i].s : s[i].def_s;
}
/* An INTS attribute: false when absent (neither written nor given a list). A
 * written empty list (`shape: []`) is present. */
static bool attr_ints(const plan_attr_val *a, int i, const int64_t **v,
                      int *n) {
  if (!a || (!a[i].present && a[i].nints <= 0)) {
    *v = NULL;
    *n = 0;
    return false;
  }
  *v = a[i].ints;
  *n = a[i].nints > 0 && a[i].ints ? a[i].nints : 0;
  return true;
}

/* ---- shared checks ------------------------------------------------------- */

/* Checks what every inference needs before looking at the op: arities
 * (the function pointer may be called without the loader's checks), sane
 * input shapes and known dtypes. want_out < 0: the op checks nout itself. */
static int prelude(int kind, const plan_shape *in, int nin, plan_shape *out,
                   int nout, int want_out, char *err, size_t errsz) {
  const plan_op_info *info = plan_op_info_get(kind);
  int max_in = info->max_in < 0 ? PLAN_MAX_OPERANDS - 1 : info->max_in;
  if (nin < info->min_in || nin > max_in || (nin > 0 && !in)) {
    if (info->min_in == max_in)
      return plan_errf(err, errsz, "%s takes %d input%s, not %d", info->name,
                  info->min_in, info->min_in == 1 ? "" : "s", nin);
    return plan_errf(err, errsz, "%s takes %d to %d inputs, not %d", info->name,
                info->min_in, max_in, nin);
  }
  if (want_out >= 0 && nout != want_out)
    return plan_errf(err, errsz, "%s gives %d output%s, not %d", info->name,
                want_out, want_out == 1 ? "" : "s", nout);
  if (nout < 1 || nin + nout > PLAN_MAX_OPERANDS)
    return plan_errf(err, errsz, "%s: %d outputs is out of range", info->name, nout);
  if (!out)
    return plan_errf(err, errsz, "%s: no output shapes to fill", info->name);
  for (int i = 0; i < nin; i++) {
    const plan_shape *s = &in[i];
    if (s->rank < 0 || s->rank > PLAN_MAX_RANK)
      return plan_errf(err, errsz, "%s: input %d has rank %d (at most %d)",
                  info->name, i, s->rank, PLAN_MAX_RANK);
    if (!dtype_ok(s->dtype))
      return plan_errf(err, errsz, "%s: input %d has an unknown dtype (%d)",
                  info->name, i, (int)s->dtype);
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) {
      if (s->dims[d] < 0)
        return plan_errf(err, errsz, "%s: input %d dim %d is negative (%lld)",
                    info->name, i, d, (long long)s->dims[d]);
      if (!plan_mul_i64(n, s->dims[d], &n))
        return plan_errf(err, errsz, "%s: input %d has more elements than int64",
                    info->name, i);
    }
  }
  /* Outputs start zeroed so unused dims never carry garbage into hashes. */
  memset(out, 0, sizeof *out * (size_t)nout);
  return PLAN_OK;
}

/* Output element counts must fit int64 (a matmul of [2^32, 1] x [1, 2^32]
 * has fine inputs and an unrepresentable output). */
static int finish(int kind, const plan_shape *out, int nout, char *err,
                  size_t errsz) {
  for (int o = 0; o < nout; o++) {
    int64_t n = 1;
    for (int d = 0; d < out[o].rank; d++)
      if (!plan_mul_i64(n, out[o].dims[d], &n))
        return plan_errf(err, errsz, "%s: output %d has more elements than int64",
                    plan_op_kind_name(kind), o);
  }
  return PLAN_OK;
}

/* Inputs selected by `mask` must be floating point and of one dtype, which
 * becomes *dt. */
static int float_inputs(int kind, const plan_shape *in, int nin, unsigned mask,
                        plan_dtype *dt, char *err, size_t errsz) {
  const char *op = plan_op_kind_name(kind);
  int first = -1;
  for (int i = 0; i < nin; i++) {
    if (!(mask >> i & 1u))
      continue;
    if (!plan_dtype_is_float(in[i].dtype))
      return plan_errf(err, errsz, "%s: input %d must be floating point, not %s", op,
                  i, plan_dtype_name(in[i].dtype));
    if (first < 0)
      first = i;
    else if (in[i].dtype != in[first].dtype)
      return plan_errf(err, errsz, "%s: inputs %d and %d differ in dtype: %s vs %s",
                  op, first, i, plan_dtype_name(in[first].dtype),
                  plan_dtype_name(in[i].dtype));
  }
  *dt = in[first < 0 ? 0 : first].dtype;
  return PLAN_OK;
}

static int int_input(int kind, const plan_shape *in, int i, const char *what,
                     char *err, size_t errsz) {
  if (plan_dtype_is_float(in[i].dtype))
    return plan_errf(err, errsz,
                "%s: %s (input %d) must be an integer tensor, not %s",
                plan_op_kind_name(kind), what, i, plan_dtype_name(in[i].dtype));
  return PLAN_OK;
}

static void copy_shape(plan_shape *dst, const plan_shape *src) {
  dst->rank = src->rank;
  for (int d = 0; d < src->rank; d++)
    dst->dims[d] = src->dims[d];
  dst->dtype = src->dtype;
}

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
  int rc = prelude(PLAN_OP_MATMUL, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(PLAN_OP_MATMUL, in, nin, 3u, &dt, err, errsz)))
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
    return plan_errf(err, errsz, "matmul: contracting dims differ: %lld vs %lld",
                (long long)ka, (long long)kb);
  int nb, bad;
  if (!broadcast(a->dims, ra - 2, b->dims, rb - 2, out->dims, &nb, &bad)) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz, "matmul: batch dims do not broadcast: %s vs %s",
                fmt_dims(a->dims, ra - 2, sa), fmt_dims(b->dims, rb - 2, sb));
  }
  out->rank = nb + 2;
  out->dims[nb] = m;
  out->dims[nb + 1] = n;
  out->dtype = dt;
  return finish(PLAN_OP_MATMUL, out, nout, err, errsz);
}

int plan_infer_linear(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_LINEAR, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(PLAN_OP_LINEAR, in, nin, 7u, &dt, err, errsz)))
    return rc;
  const plan_shape *x = &in[0], *w = &in[1];
  if (x->rank < 1)
    return plan_errf(err, errsz, "linear: x must have rank >= 1 ([.., k])");
  if (w->rank != 2)
    return plan_errf(err, errsz, "linear: w must be [n, k], not rank %d", w->rank);
  int64_t k = x->dims[x->rank - 1];
  if (w->dims[1] != k)
    return plan_errf(err, errsz,
                "linear: contracting dims differ: x has k = %lld, w is "
                "[%lld, %lld] ([n, k])",
                (long long)k, (long long)w->dims[0], (long long)w->dims[1]);
  int64_t n = w->dims[0];
  if (nin == 3 && (in[2].rank != 1 || in[2].dims[0] != n)) {
    char s[SHAPE_STRLEN];
    return plan_errf(err, errsz, "linear: bias must be [%lld], not %s", (long long)n,
                fmt_dims(in[2].dims, in[2].rank, s));
  }
  copy_shape(out, x);
  out->dims[x->rank - 1] = n;
  out->dtype = dt;
  return finish(PLAN_OP_LINEAR, out, nout, err, errsz);
}

/* ---- elementwise --------------------------------------------------------- */

static int infer_binary(int kind, PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, 3u, &dt, err, errsz)))
    return rc;
  int bad;
  if (!broadcast(in[0].dims, in[0].rank, in[1].dims, in[1].rank, out->dims,
                 &out->rank, &bad)) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz, "%s: shapes do not broadcast: %s vs %s",
                plan_op_kind_name(kind), fmt_dims(in[0].dims, in[0].rank, sa),
                fmt_dims(in[1].dims, in[1].rank, sb));
  }
  out->dtype = dt;
  return finish(kind, out, nout, err, errsz);
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
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, 1u, &dt, err, errsz)))
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

int plan_infer_softmax(PLAN_INFER_ARGS) {
  int rc = infer_unary(PLAN_OP_SOFTMAX, in, nin, attrs, out, nout, err, errsz);
  if (rc)
    return rc;
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_SOFTMAX), 0);
  int dim;
  if (!norm_dim(d, in[0].rank, &dim))
    return plan_errf(err, errsz, "softmax: dim %lld is out of range for rank %d",
                (long long)d, in[0].rank);
  return PLAN_OK;
}

/* ---- normalisation ------------------------------------------------------- */

static int infer_norm(int kind, const plan_attr_spec *spec, PLAN_INFER_ARGS) {
  const char *op = plan_op_kind_name(kind);
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, (1u << nin) - 1, &dt, err, errsz)))
    return rc;
  const plan_shape *x = &in[0];
  if (x->rank < 1)
    return plan_errf(err, errsz, "%s: x must have rank >= 1 ([.., d])", op);
  int64_t d = x->dims[x->rank - 1];
  for (int i = 1; i < nin; i++)
    if (in[i].rank != 1 || in[i].dims[0] != d) {
      char s[SHAPE_STRLEN];
      return plan_errf(err, errsz, "%s: %s must be [%lld], not %s", op,
                  i == 1 ? "weight" : "bias", (long long)d,
                  fmt_dims(in[i].dims, in[i].rank, s));
    }
  double eps = attr_float(attrs, spec, 0);
  if (!isfinite(eps) || eps < 0)
    return plan_errf(err, errsz, "%s: eps must be a finite number >= 0", op);
  copy_shape(out, x);
  return PLAN_OK;
}

int plan_infer_layernorm(PLAN_INFER_ARGS) {
  return infer_norm(PLAN_OP_LAYERNORM, SPEC(PLAN_OP_LAYERNORM), in, nin, attrs,
                    out, nout, err, errsz);
}
int plan_infer_rmsnorm(PLAN_INFER_ARGS) {
  return infer_norm(PLAN_OP_RMSNORM, SPEC(PLAN_OP_RMSNORM), in, nin, attrs, out,
                    nout, err, errsz);
}

/* ---- embedding ----------------------------------------------------------- */

int plan_infer_embedding(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_EMBEDDING, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(PLAN_OP_EMBEDDING, in, nin, 1u, &dt, err, errsz)) ||
      (rc = int_input(PLAN_OP_EMBEDDING, in, 1, "ids", err, errsz)))
    return rc;
  const plan_shape *t = &in[0], *ids = &in[1];
  if (t->rank != 2)
    return plan_errf(err, errsz, "embedding: table must be [v, d], not rank %d",
                t->rank);
  if (ids->rank + 1 > PLAN_MAX_RANK)
    return plan_errf(err, errsz,
                "embedding: ids of rank %d give a result of rank "
                "%d (at most %d)",
                ids->rank, ids->rank + 1, PLAN_MAX_RANK);
  copy_shape(out, ids);
  out->dims[ids->rank] = t->dims[1];
  out->rank = ids->rank + 1;
  out->dtype = dt;
  return finish(PLAN_OP_EMBEDDING, out, nout, err, errsz);
}

/* ---- data movement ------------------------------------------------------- */

int plan_infer_transpose(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_TRANSPOSE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  static const int64_t def[2] = {-2, -1};
  const int64_t *v;
  int n;
  if (!attr_ints(attrs, 0, &v, &n)) {
    v = def;
    n = 2;
  }
  if (n != 2)
    return plan_errf(err, errsz,
                "transpose: dims must name exactly two dims, not %d", n);
  int d0, d1, r = in[0].rank;
  if (!norm_dim(v[0], r, &d0) || !norm_dim(v[1], r, &d1))
    return plan_errf(err, errsz,
                "transpose: dims [%lld, %lld] are out of range "
                "for rank %d",
                (long long)v[0], (long long)v[1], r);
  if (d0 == d1)
    return plan_errf(err, errsz, "transpose: dims [%lld, %lld] name the same dim",
                (long long)v[0], (long long)v[1]);
  copy_shape(out, &in[0]);
  out->dims[d0] = in[0].dims[d1];
  out->dims[d1] = in[0].dims[d0];
  return PLAN_OK;
}

int plan_infer_permute(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_PERMUTE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "permute: attribute perm is required");
  if (n != r)
    return plan_errf(err, errsz, "permute: perm has %d entries for rank %d", n, r);
  bool seen[PLAN_MAX_RANK] = {false};
  copy_shape(out, &in[0]);
  for (int j = 0; j < n; j++) {
    int d;
    if (!norm_dim(v[j], r, &d))
      return plan_errf(err, errsz,
                  "permute: perm entry %lld is out of range for "
                  "rank %d",
                  (long long)v[j], r);
    if (seen[d])
      return plan_errf(err, errsz, "permute: perm names dim %d twice", d);
    seen[d] = true;
    out->dims[j] = in[0].dims[d];
  }
  return PLAN_OK;
}

int plan_infer_reshape(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_RESHAPE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "reshape: attribute shape is required");
  if (n > PLAN_MAX_RANK)
    return plan_errf(err, errsz, "reshape: shape has rank %d (at most %d)", n,
                PLAN_MAX_RANK);
  int64_t count = 1, known = 1;
  for (int d = 0; d < in[0].rank; d++)
    plan_mul_i64(count, in[0].dims[d], &count); /* fits: prelude checked */
  int infer_at = -1;
  for (int j = 0; j < n; j++) {
    if (v[j] == -1) {
      if (infer_at >= 0)
        return plan_errf(err, errsz, "reshape: shape has more than one -1");
      infer_at = j;
      continue;
    }
    if (v[j] < 1)
      return plan_errf(err, errsz,
                  "reshape: shape entries must be positive or -1, not %lld",
                  (long long)v[j]);
    if (!plan_mul_i64(known, v[j], &known))
      return plan_errf(err, errsz, "reshape: shape has more elements than int64");
  }
  char si[SHAPE_STRLEN], so[SHAPE_STRLEN];
  for (int j = 0; j < n; j++)
    out->dims[j] = v[j];
  out->rank = n;
  if (infer_at >= 0) {
    if (count % known)
      return plan_errf(err, errsz,
                  "reshape: cannot infer the -1 in %s: %lld "
                  "elements of %s are not a multiple of %lld",
                  fmt_dims(v, n, so), (long long)count,
                  fmt_dims(in[0].dims, in[0].rank, si), (long long)known);
    out->dims[infer_at] = count / known;
  } else if (known != count) {
    return plan_errf(err, errsz,
                "reshape: cannot reshape %s (%lld elements) to "
                "%s (%lld elements)",
                fmt_dims(in[0].dims, in[0].rank, si), (long long)count,
                fmt_dims(v, n, so), (long long)known);
  }
  out->dtype = in[0].dtype;
  return PLAN_OK;
}

/* ---- reductions ---------------------------------------------------------- */

static int infer_reduce(int kind, PLAN_INFER_ARGS) {
  const char *op = plan_op_kind_name(kind);
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, 1u, &dt, err, errsz)))
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "%s: attribute dims is required", op);
  if (n == 0)
    return plan_errf(err, errsz, "%s: dims must name at least one dim", op);
  bool red[PLAN_MAX_RANK] = {false};
  for (int j = 0; j < n; j++) {
    int d;
    if (!norm_dim(v[j], r, &d))
      return plan_errf(err, errsz, "%s: dim %lld is out of range for rank %d", op,
                  (long long)v[j], r);
    if (red[d])
      return plan_errf(err, errsz, "%s: dims name dim %d twice", op, d);
    red[d] = true;
  }
  bool keep = attr_bool(attrs, SPEC(PLAN_OP_REDUCE_SUM), 1);
  out->rank = 0;
  for (int d = 0; d < r; d++) {
    if (!red[d])
      out->dims[out->rank++] = in[0].dims[d];
    else if (keep)
      out->dims[out->rank++] = 1;
  }
  out->dtype = dt;
  return PLAN_OK;
}

int plan_infer_reduce_sum(PLAN_INFER_ARGS) {
  return infer_reduce(PLAN_OP_REDUCE_SUM, in, nin, attrs, out, nout, err,
                      errsz);
}
int plan_infer_reduce_mean(PLAN_INFER_ARGS) {
  return infer_reduce(PLAN_OP_REDUCE_MEAN, in, nin, attrs, out, nout, err,
                      errsz);
}

/* ---- split, concat ------------------------------------------------------- */

int plan_infer_split(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_SPLIT, in, nin, out, nout, -1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank, dim;
  if (!attr_ints(attrs, 1, &v, &n))
    return plan_errf(err, errsz, "split: attribute sizes is required");
  if (n < 1)
    return plan_errf(err, errsz, "split: sizes must have at least one entry");
  if (n != nout)
    return plan_errf(err, errsz,
                "split: sizes has %d entries but the op has %d "
                "output%s",
                n, nout, nout == 1 ? "" : "s");
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_SPLIT), 0);
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz, "split: dim %lld is out of range for rank %d",
                (long long)d, r);
  int64_t sum = 0;
  for (int j = 0; j < n; j++) {
    if (v[j] < 1)
      return plan_errf(err, errsz, "split: sizes must be positive, not %lld",
                  (long long)v[j]);
    if (!plan_add_i64(sum, v[j], &sum))
      return plan_errf(err, errsz, "split: sizes overflow int64");
  }
  if (sum != in[0].dims[dim])
    return plan_errf(err, errsz,
                "split: sizes add up to %lld but dim %d has size "
                "%lld",
                (long long)sum, dim, (long long)in[0].dims[dim]);
  for (int j = 0; j < n; j++) {
    copy_shape(&out[j], &in[0]);
    out[j].dims[dim] = v[j];
  }
  return PLAN_OK;
}

int plan_infer_concat(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_CONCAT, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  int r = in[0].rank, dim;
  int64_t d = attr_int(attrs, SPEC(PLAN_OP_CONCAT), 0);
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz, "concat: dim %lld is out of range for rank %d",
                (long long)d, r);
  int64_t sum = 0;
  char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
  for (int i = 0; i < nin; i++) {
    if (in[i].dtype != in[0].dtype)
      return plan_errf(err, errsz,
                  "concat: inputs 0 and %d differ in dtype: %s vs "
                  "%s",
                  i, plan_dtype_name(in[0].dtype),
                  plan_dtype_name(in[i].dtype));
    bool same = in[i].rank == r;
    for (int j = 0; same && j < r; j++)
      same = j == dim || in[i].dims[j] == in[0].dims[j];
    if (!same)
      return plan_errf(err, errsz,
                  "concat: input %d is %s but input 0 is %s (only "
                  "dim %d may differ)",
                  i, fmt_dims(in[i].dims, in[i].rank, sa),
                  fmt_dims(in[0].dims, r, sb), dim);
    if (!plan_add_i64(sum, in[i].dims[dim], &sum))
      return plan_errf(err, errsz, "concat: dim %d overflows int64", dim);
  }
  copy_shape(out, &in[0]);
  out->dims[dim] = sum;
  return finish(PLAN_OP_CONCAT, out, nout, err, errsz);
}

/* ---- loss ---------------------------------------------------------------- */

int plan_infer_cross_entropy(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_CROSS_ENTROPY, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc =
           float_inputs(PLAN_OP_CROSS_ENTROPY, in, nin, 1u, &dt, err, errsz)) ||
      (rc = int_input(PLAN_OP_CROSS_ENTROPY, in, 1, "labels", err, errsz)))
    return rc;
  const plan_shape *lg = &in[0], *lb = &in[1];
  if (lg->rank < 1)
    return plan_errf(err, errsz,
                "cross_entropy: logits must have rank >= 1 "
                "([.., c])");
  bool same = lb->rank == lg->rank - 1;
  for (int d = 0; same && d < lb->rank; d++)
    same = lb->dims[d] == lg->dims[d];
  if (!same) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                "cross_entropy: labels must be %s (logits "
                "without the class dim), not %s",
                fmt_dims(lg->dims, lg->rank - 1, sa),
                fmt_dims(lb->dims, lb->rank, sb));
  }
  out->rank = 0;
  out->dtype = dt;
  return PLAN_OK;
}

/* ---- expand -------------------------------------------------------------- */

int plan_infer_expand(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_EXPAND, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const int64_t *v;
  int n, r = in[0].rank;
  if (!attr_ints(attrs, 0, &v, &n))
    return plan_errf(err, errsz, "expand: attribute shape is required");
  if (n > PLAN_MAX_RANK)
    return plan_errf(err, errsz, "expand: shape has rank %d (at most %d)", n,
                     PLAN_MAX_RANK);
  char si[SHAPE_STRLEN], so[SHAPE_STRLEN];
  if (n < r)
    return plan_errf(err, errsz,
                     "expand: shape %s has fewer dims than the input %s",
                     fmt_dims(v, n, so), fmt_dims(in[0].dims, r, si));
  for (int j = 0; j < n; j++) {
    int ji = j - (n - r);
    if (v[j] < 0)
      return plan_errf(err, errsz,
                       "expand: shape entries must be >= 0, not %lld",
                       (long long)v[j]);
    /* numpy broadcasting: an input dim is 1 or the size itself */
    if (ji >= 0 && in[0].dims[ji] != 1 && in[0].dims[ji] != v[j])
      return plan_errf(err, errsz,
                       "expand: input %s does not broadcast to %s (dim %d is "
                       "%lld, not 1 or %lld)",
                       fmt_dims(in[0].dims, r, si), fmt_dims(v, n, so), ji,
                       (long long)in[0].dims[ji], (long long)v[j]);
    out->dims[j] = v[j];
  }
  out->rank = n;
  out->dtype = in[0].dtype;
  return finish(PLAN_OP_EXPAND, out, nout, err, errsz);
}

/* ---- where, repeat_interleave -------------------------------------------- */

/* where: (cond, a, b) -> out, out[i] = cond[i] != 0 ? a[i] : b[i] with the
 * three broadcast together (numpy). cond may have any dtype: an integer
 * mask (the convention for non-float data: ids, labels; `range: [0, 2]`
 * makes the generator give 0s and 1s) or a float one (a const recipe);
 * a and b share one dtype, the output's. */
int plan_infer_where(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_WHERE, in, nin, out, nout, 1, err, errsz);
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
  return finish(PLAN_OP_WHERE, out, nout, err, errsz);
}

/* repeat_interleave: [.., n, ..] -> [.., n * repeats, ..] along dim, each
 * slice repeated in place (slice j of the output is slice j / repeats of
 * the input); any dtype. */
int plan_infer_repeat_interleave(PLAN_INFER_ARGS) {
  int rc =
      prelude(PLAN_OP_REPEAT_INTERLEAVE, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  const plan_attr_spec *spec = SPEC(PLAN_OP_REPEAT_INTERLEAVE);
  int r = in[0].rank, dim;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz,
                     "repeat_interleave: attribute repeats is required");
  if (!attrs[1].present)
    return plan_errf(err, errsz,
                     "repeat_interleave: attribute dim is required");
  int64_t rep = attr_int(attrs, spec, 0), d = attr_int(attrs, spec, 1);
  if (r < 1)
    return plan_errf(err, errsz,
                     "repeat_interleave: the input must have rank >= 1, not "
                     "0");
  if (!norm_dim(d, r, &dim))
    return plan_errf(err, errsz,
                     "repeat_interleave: dim %lld is out of range for rank %d",
                     (long long)d, r);
  if (rep < 1)
    return plan_errf(err, errsz,
                     "repeat_interleave: repeats must be >= 1, not %lld",
                     (long long)rep);
  copy_shape(out, &in[0]);
  if (!plan_mul_i64(in[0].dims[dim], rep, &out->dims[dim]))
    return plan_errf(err, errsz,
                     "repeat_interleave: dim %d (%lld) times %lld overflows "
                     "int64",
                     dim, (long long)in[0].dims[dim], (long long)rep);
  return finish(PLAN_OP_REPEAT_INTERLEAVE, out, nout, err, errsz);
}

/* ---- topk, gather, scatter_add, mixture of experts ---------------------- */

/* Integer input i must have exactly the dims `dims` (rank r). */
static int int_shaped(int kind, const plan_shape *in, int i, const char *what,
                      const int64_t *dims, int r, char *err, size_t errsz) {
  int rc = int_input(kind, in, i, what, err, errsz);
  if (rc)
    return rc;
  bool ok = in[i].rank == r;
  for (int d = 0; ok && d < r; d++)
    ok = in[i].dims[d] == dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(err, errsz, "%s: %s (input %d) is %s, not %s",
                     plan_op_kind_name(kind), what, i,
                     fmt_dims(in[i].dims, in[i].rank, a), fmt_dims(dims, r, b));
  }
  return PLAN_OK;
}

/* topk: x [.., n] -> values [.., k] (x's dtype), indices [.., k] (i64): the
 * k largest along the last dim, largest first, ties to the lower index. */
int plan_infer_topk(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_TOPK, in, nin, out, nout, 2, err, errsz);
  plan_dtype dt;
  if (rc || (rc = float_inputs(PLAN_OP_TOPK, in, nin, 1u, &dt, err, errsz)))
    return rc;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz, "topk: attribute k is required");
  int64_t k = attr_int(attrs, SPEC(PLAN_OP_TOPK), 0);
  int r = in[0].rank;
  if (r < 1)
    return plan_errf(err, errsz, "topk: the input must have rank >= 1, not 0");
  if (k < 1 || k > in[0].dims[r - 1])
    return plan_errf(err, errsz,
                     "topk: k must be in [1, %lld] (the last dim), not %lld",
                     (long long)in[0].dims[r - 1], (long long)k);
  copy_shape(&out[0], &in[0]);
  out[0].dims[r - 1] = k;
  copy_shape(&out[1], &out[0]);
  out[1].dtype = PLAN_I64;
  return finish(PLAN_OP_TOPK, out, nout, err, errsz);
}

/* gather: x [.., n], idx [.., k] (integers in [0, n), the same leading
 * dims) -> [.., k], out[.., j] = x[.., idx[.., j]]. */
int plan_infer_gather(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_GATHER, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc || (rc = float_inputs(PLAN_OP_GATHER, in, nin, 1u, &dt, err, errsz)) ||
      (rc = int_input(PLAN_OP_GATHER, in, 1, "idx", err, errsz)))
    return rc;
  int r = in[0].rank;
  bool ok = r >= 1 && in[1].rank == r;
  for (int d = 0; ok && d + 1 < r; d++)
    ok = in[1].dims[d] == in[0].dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "gather: x %s and idx %s must have one rank (>= 1) and "
                     "the same dims but the last",
                     fmt_dims(in[0].dims, r, a),
                     fmt_dims(in[1].dims, in[1].rank, b));
  }
  copy_shape(out, &in[1]);
  out->dtype = dt;
  return finish(PLAN_OP_GATHER, out, nout, err, errsz);
}

/* scatter_add: src [.., k], idx [.., k] (integers in [0, size)) -> [..,
 * size], zeros with src[.., j] added at [.., idx[.., j]]. */
int plan_infer_scatter_add(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_SCATTER_ADD, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc ||
      (rc = float_inputs(PLAN_OP_SCATTER_ADD, in, nin, 1u, &dt, err, errsz)))
    return rc;
  if (!attrs || !attrs[0].present)
    return plan_errf(err, errsz, "scatter_add: attribute size is required");
  int64_t size = attr_int(attrs, SPEC(PLAN_OP_SCATTER_ADD), 0);
  int r = in[0].rank;
  if (r < 1)
    return plan_errf(err, errsz,
                     "scatter_add: src must have rank >= 1, not 0");
  if (size < 1)
    return plan_errf(err, errsz, "scatter_add: size must be >= 1, not %lld",
                     (long long)size);
  if ((rc = int_shaped(PLAN_OP_SCATTER_ADD, in, 1, "idx", in[0].dims, r, err,
                       errsz)))
    return rc;
  copy_shape(out, &in[0]);
  out->dims[r - 1] = size;
  return finish(PLAN_OP_SCATTER_ADD, out, nout, err, errsz);
}

/* The routing of the mixture-of-experts ops: idx [g, t, k] integers
 * (input i), and the optional weights [g, t, k] of dtype dt (input wi). */
static int moe_routing(int kind, const plan_shape *in, int nin, int i, int wi,
                       const int64_t *gt, plan_dtype dt, char *err,
                       size_t errsz) {
  if (in[i].rank != 3 || in[i].dims[0] != gt[0] || in[i].dims[1] != gt[1]) {
    char a[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "%s: idx (input %d) is %s, not [%lld, %lld, k] (groups, "
                     "tokens, choices)",
                     plan_op_kind_name(kind), i,
                     fmt_dims(in[i].dims, in[i].rank, a), (long long)gt[0],
                     (long long)gt[1]);
  }
  int rc = int_input(kind, in, i, "idx", err, errsz);
  if (rc || wi >= nin)
    return rc;
  if (in[wi].dtype != dt)
    return plan_errf(err, errsz, "%s: the weights (input %d) are %s, not %s",
                     plan_op_kind_name(kind), wi,
                     plan_dtype_name(in[wi].dtype), plan_dtype_name(dt));
  bool ok = in[wi].rank == 3;
  for (int d = 0; ok && d < 3; d++)
    ok = in[wi].dims[d] == in[i].dims[d];
  if (!ok) {
    char a[SHAPE_STRLEN], b[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "%s: the weights (input %d) are %s, not idx's %s",
                     plan_op_kind_name(kind), wi,
                     fmt_dims(in[wi].dims, in[wi].rank, a),
                     fmt_dims(in[i].dims, 3, b));
  }
  return PLAN_OK;
}

/* moe_dispatch: x [g, t, h], idx [g, t, k] [, w [g, t, k]] -> [experts, g,
 * capacity, h]. Slot c of expert e in group g holds the c-th (token-major,
 * then choice) token of g routed to e (times its weight); a choice past
 * the capacity is dropped. */
int plan_infer_moe_dispatch(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_MOE_DISPATCH, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc ||
      (rc = float_inputs(PLAN_OP_MOE_DISPATCH, in, 1, 1u, &dt, err, errsz)))
    return rc;
  if (!attrs || !attrs[0].present || !attrs[1].present)
    return plan_errf(err, errsz,
                     "moe_dispatch: attributes experts and capacity are "
                     "required");
  const plan_attr_spec *spec = SPEC(PLAN_OP_MOE_DISPATCH);
  int64_t e = attr_int(attrs, spec, 0), cap = attr_int(attrs, spec, 1);
  if (e < 1 || cap < 1)
    return plan_errf(err, errsz,
                     "moe_dispatch: experts and capacity must be >= 1, not "
                     "%lld and %lld",
                     (long long)e, (long long)cap);
  if (in[0].rank != 3)
    return plan_errf(err, errsz,
                     "moe_dispatch: x must be [groups, tokens, hidden], not "
                     "rank %d",
                     in[0].rank);
  if ((rc = moe_routing(PLAN_OP_MOE_DISPATCH, in, nin, 1, 2, in[0].dims, dt,
                        err, errsz)))
    return rc;
  out->rank = 4;
  out->dims[0] = e;
  out->dims[1] = in[0].dims[0];
  out->dims[2] = cap;
  out->dims[3] = in[0].dims[2];
  out->dtype = dt;
  return finish(PLAN_OP_MOE_DISPATCH, out, nout, err, errsz);
}

/* moe_combine: y [e, g, c, h], idx [g, t, k] [, w] -> [g, t, h]: each
 * token's choices read back from the slots moe_dispatch gave them (the
 * same capacity, y's dim 2), weighted and summed; dropped ones add 0. */
int plan_infer_moe_combine(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_MOE_COMBINE, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc ||
      (rc = float_inputs(PLAN_OP_MOE_COMBINE, in, 1, 1u, &dt, err, errsz)))
    return rc;
  if (in[0].rank != 4)
    return plan_errf(err, errsz,
                     "moe_combine: y must be [experts, groups, capacity, "
                     "hidden], not rank %d",
                     in[0].rank);
  int64_t gt[2] = {in[0].dims[1], in[1].rank == 3 ? in[1].dims[1] : 0};
  if ((rc = moe_routing(PLAN_OP_MOE_COMBINE, in, nin, 1, 2, gt, dt, err,
                        errsz)))
    return rc;
  out->rank = 3;
  out->dims[0] = gt[0];
  out->dims[1] = gt[1];
  out->dims[2] = in[0].dims[3];
  out->dtype = dt;
  return finish(PLAN_OP_MOE_COMBINE, out, nout, err, errsz);
}

/* moe_weights_grad: a [g, t, h], b [e, g, c, h], idx [g, t, k] -> [g, t,
 * k]: out[g, t, j] = a[g, t, :] . b[idx, g, slot, :] (0 when dropped), the
 * gradient of the weights of moe_combine (a = dout, b = y) and of a
 * weighted moe_dispatch (a = x, b = dout). */
int plan_infer_moe_weights_grad(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, out, nout, 1, err, errsz);
  plan_dtype dt;
  if (rc || (rc = float_inputs(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, 3u, &dt, err,
                               errsz)))
    return rc;
  const plan_shape *a = &in[0], *b = &in[1];
  if (a->rank != 3 || b->rank != 4 || b->dims[1] != a->dims[0] ||
      b->dims[3] != a->dims[2]) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "moe_weights_grad: a %s and b %s are not [g, t, h] and "
                     "[e, g, c, h]",
                     fmt_dims(a->dims, a->rank, sa),
                     fmt_dims(b->dims, b->rank, sb));
  }
  if ((rc = moe_routing(PLAN_OP_MOE_WEIGHTS_GRAD, in, nin, 2, 3, a->dims, dt,
                        err, errsz)))
    return rc;
  copy_shape(out, &in[2]);
  out->dtype = dt;
  return finish(PLAN_OP_MOE_WEIGHTS_GRAD, out, nout, err, errsz);
}

/* ---- gradient ops -------------------------------------------------------- */

/* Inputs a and b have the same shape (no broadcasting). */
static int same_dims(int kind, const plan_shape *in, int a, int b, char *err,
                     size_t errsz) {
  bool same = in[a].rank == in[b].rank;
  for (int d = 0; same && d < in[a].rank; d++)
    same = in[a].dims[d] == in[b].dims[d];
  if (same)
    return PLAN_OK;
  char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
  return plan_errf(err, errsz,
                   "%s: inputs %d and %d must have one shape, not %s and %s",
                   plan_op_kind_name(kind), a, b,
                   fmt_dims(in[a].dims, in[a].rank, sa),
                   fmt_dims(in[b].dims, in[b].rank, sb));
}

/* relu_grad, gelu_grad, silu_grad: (dy, x) -> dx, all one shape. */
static int infer_act_grad(int kind, PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, 3u, &dt, err, errsz)) ||
      (rc = same_dims(kind, in, 0, 1, err, errsz)))
    return rc;
  copy_shape(out, &in[1]);
  return PLAN_OK;
}

int plan_infer_relu_grad(PLAN_INFER_ARGS) {
  return infer_act_grad(PLAN_OP_RELU_GRAD, in, nin, attrs, out, nout, err,
                        errsz);
}
int plan_infer_gelu_grad(PLAN_INFER_ARGS) {
  int rc = infer_act_grad(PLAN_OP_GELU_GRAD, in, nin, attrs, out, nout, err,
                          errsz);
  return rc ? rc : check_approximate(PLAN_OP_GELU_GRAD, attrs, err, errsz);
}
int plan_infer_silu_grad(PLAN_INFER_ARGS) {
  return infer_act_grad(PLAN_OP_SILU_GRAD, in, nin, attrs, out, nout, err,
                        errsz);
}

/* layernorm_grad, rmsnorm_grad: (dy, x, w) -> dx; the norm's own checks on
 * (x, w) and dy shaped like x. */
static int infer_norm_grad(int kind, int fwd, PLAN_INFER_ARGS) {
  int rc = prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(kind, in, nin, 7u, &dt, err, errsz)) ||
      (rc = same_dims(kind, in, 0, 1, err, errsz)))
    return rc;
  /* (x, w) as the forward norm sees them */
  if ((rc = infer_norm(fwd, SPEC(kind), in + 1, 2, attrs, out, nout, err,
                       errsz))) {
    /* the forward names itself and counts x as input 0: say it again */
    char why[200];
    snprintf(why, sizeof why, "%s", err ? err : "");
    const char *tail = strchr(why, ':');
    return plan_errf(err, errsz, "%s%s", plan_op_kind_name(kind),
                     tail ? tail : ": bad x or weight");
  }
  return PLAN_OK;
}

int plan_infer_layernorm_grad(PLAN_INFER_ARGS) {
  return infer_norm_grad(PLAN_OP_LAYERNORM_GRAD, PLAN_OP_LAYERNORM, in, nin,
                         attrs, out, nout, err, errsz);
}
int plan_infer_rmsnorm_grad(PLAN_INFER_ARGS) {
  return infer_norm_grad(PLAN_OP_RMSNORM_GRAD, PLAN_OP_RMSNORM, in, nin, attrs,
                         out, nout, err, errsz);
}

/* embedding_grad: (dy [b.., d], ids [b..]) -> [rows, d], the rows of dy
 * summed into the rows their ids name. */
int plan_infer_embedding_grad(PLAN_INFER_ARGS) {
  int rc = prelude(PLAN_OP_EMBEDDING_GRAD, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(PLAN_OP_EMBEDDING_GRAD, in, nin, 1u, &dt, err,
                         errsz)) ||
      (rc = int_input(PLAN_OP_EMBEDDING_GRAD, in, 1, "ids", err, errsz)))
    return rc;
  const plan_shape *dy = &in[0], *ids = &in[1];
  bool same = dy->rank == ids->rank + 1;
  for (int d = 0; same && d < ids->rank; d++)
    same = dy->dims[d] == ids->dims[d];
  if (!same) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "embedding_grad: dy must be the ids' shape %s plus the "
                     "embedding dim, not %s",
                     fmt_dims(ids->dims, ids->rank, sb),
                     fmt_dims(dy->dims, dy->rank, sa));
  }
  int64_t rows = attr_int(attrs, SPEC(PLAN_OP_EMBEDDING_GRAD), 0);
  if (rows < 0)
    return plan_errf(err, errsz, "embedding_grad: rows must be >= 0, not %lld",
                     (long long)rows);
  out->rank = 2;
  out->dims[0] = rows;
  out->dims[1] = dy->dims[dy->rank - 1];
  out->dtype = dt;
  return finish(PLAN_OP_EMBEDDING_GRAD, out, nout, err, errsz);
}

/* cross_entropy_grad: (dy [], logits [b.., c], labels [b..]) -> [b.., c]:
 * dy (softmax(logits) - onehot(labels)) / count(b..). */
int plan_infer_cross_entropy_grad(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc =
      prelude(PLAN_OP_CROSS_ENTROPY_GRAD, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = float_inputs(PLAN_OP_CROSS_ENTROPY_GRAD, in, nin, 3u, &dt, err,
                         errsz)) ||
      (rc = int_input(PLAN_OP_CROSS_ENTROPY_GRAD, in, 2, "labels", err,
                      errsz)))
    return rc;
  if (in[0].rank != 0) {
    char s[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "cross_entropy_grad: dy (input 0) must be a scalar [], "
                     "not %s",
                     fmt_dims(in[0].dims, in[0].rank, s));
  }
  /* (logits, labels) as cross_entropy sees them */
  plan_shape loss;
  if ((rc = plan_infer_cross_entropy(in + 1, 2, NULL, &loss, 1, err, errsz))) {
    char why[200];
    snprintf(why, sizeof why, "%s", err ? err : "");
    const char *tail = strchr(why, ':');
    return plan_errf(err, errsz, "cross_entropy_grad%s",
                     tail ? tail : ": bad logits or labels");
  }
  copy_shape(out, &in[1]);
  return PLAN_OK;
}
