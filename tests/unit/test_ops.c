/* Unit tests for ops.c and ops_infer.c: the registry table and the
 * shape/dtype inference of every op, on good and bad shapes and attributes. */
/* cmocka needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ops.h"

/* ---- helpers ------------------------------------------------------------- */

static plan_shape mk(plan_dtype dt, int rank, const int64_t *dims) {
  plan_shape s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  s.dtype = dt;
  for (int d = 0; d < rank; d++)
    s.dims[d] = dims[d];
  return s;
}
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SH(dt, ...) mk(dt, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define SCALAR(dt) mk(dt, 0, NULL)

/* Attribute values as the loader leaves them: every default filled in. */
static void defaults(int kind, plan_attr_val *a) {
  const plan_op_info *info = plan_op_info_get(kind);
  memset(a, 0, sizeof(plan_attr_val) * PLAN_MAX_ATTRS);
  for (int i = 0; i < info->nattrs; i++) {
    a[i].i = info->attrs[i].def_i;
    a[i].f = info->attrs[i].def_f;
    a[i].b = info->attrs[i].def_b;
    a[i].s = info->attrs[i].def_s;
  }
}

static void set_ints(plan_attr_val *a, int64_t *v, int n) {
  a->ints = v;
  a->nints = n;
  a->present = true;
}

static char g_err[256];
static plan_shape g_out[PLAN_MAX_OPERANDS];

static int run(int kind, const plan_shape *in, int nin,
               const plan_attr_val *attrs, int nout) {
  g_err[0] = '\0';
  memset(g_out, 0xab, sizeof g_out);
  return plan_op_info_get(kind)->infer(in, nin, attrs, g_out, nout, g_err,
                                       sizeof g_err);
}

/* Checks output o against dtype and dims. */
static void expect_shape(int o, plan_dtype dt, int rank, const int64_t *dims) {
  if (g_out[o].rank != rank)
    fail_msg("output %d: rank %d, want %d", o, g_out[o].rank, rank);
  assert_int_equal(g_out[o].dtype, dt);
  for (int d = 0; d < rank; d++)
    if (g_out[o].dims[d] != dims[d])
      fail_msg("output %d dim %d: %lld, want %lld", o, d,
               (long long)g_out[o].dims[d], (long long)dims[d]);
  /* Unused dims are zeroed (they go into signatures). */
  for (int d = rank; d < PLAN_MAX_RANK; d++)
    assert_int_equal(g_out[o].dims[d], 0);
}
#define EXPECT(o, dt, ...)                                                     \
  expect_shape(o, dt, NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static void expect_ok(int rc) {
  if (rc != PLAN_OK)
    fail_msg("unexpected error: %s", g_err);
}

static void expect_err(int rc, const char *needle) {
  if (rc != PLAN_EINVALID)
    fail_msg("expected an error containing \"%s\", got rc %d", needle, rc);
  if (!strstr(g_err, needle))
    fail_msg("error \"%s\" lacks \"%s\"", g_err, needle);
  assert_null(strchr(g_err, '\n')); /* one line */
}

/* ---- registry ------------------------------------------------------------ */

static void test_registry_rows(void **state) {
  (void)state;
  for (int k = 0; k < PLAN_OP_COUNT; k++) {
    const plan_op_info *info = plan_op_info_get(k);
    assert_non_null(info);
    assert_non_null(info->name);
    assert_non_null(info->infer);
    assert_true(info->min_in >= 1);
    assert_true(info->max_in == -1 || info->max_in >= info->min_in);
    assert_true(info->min_out >= 1);
    assert_true(info->max_out == -1 || info->max_out >= info->min_out);
    assert_true(info->nattrs >= 0 && info->nattrs <= PLAN_MAX_ATTRS);
    assert_true(info->nattrs == 0 || info->attrs != NULL);
    for (int i = 0; i < info->nattrs; i++)
      assert_non_null(info->attrs[i].name);
    assert_int_equal(plan_op_kind_from_name(info->name), k);
    assert_string_equal(plan_op_kind_name(k), info->name);
    for (int j = 0; j < k; j++)
      assert_string_not_equal(plan_op_info_get(j)->name, info->name);
  }
  assert_null(plan_op_info_get(-1));
  assert_null(plan_op_info_get(PLAN_OP_COUNT));
  assert_int_equal(plan_op_kind_from_name("conv2d"), -1);
  assert_int_equal(plan_op_kind_from_name(NULL), -1);
  assert_int_equal(plan_op_kind_from_name("Matmul"), -1);
  assert_string_equal(plan_op_kind_name(PLAN_OP_COUNT), "unknown");
  assert_string_equal(plan_op_kind_name(-3), "unknown");
}

static void test_registry_names_and_partials(void **state) {
  (void)state;
  static const struct {
    int kind;
    const char *name;
    plan_partial_rule partial;
  } want[] = {
      {PLAN_OP_MATMUL, "matmul", PLAN_PARTIAL_PRODUCT},
      {PLAN_OP_LINEAR, "linear", PLAN_PARTIAL_LINEAR},
      {PLAN_OP_ADD, "add", PLAN_PARTIAL_ADDITIVE},
      {PLAN_OP_SUB, "sub", PLAN_PARTIAL_ADDITIVE},
      {PLAN_OP_MUL, "mul", PLAN_PARTIAL_PRODUCT},
      {PLAN_OP_DIV, "div", PLAN_PARTIAL_DIVIDEND},
      {PLAN_OP_SCALE, "scale", PLAN_PARTIAL_UNARY},
      {PLAN_OP_RELU, "relu", PLAN_PARTIAL_NONE},
      {PLAN_OP_GELU, "gelu", PLAN_PARTIAL_NONE},
      {PLAN_OP_SILU, "silu", PLAN_PARTIAL_NONE},
      {PLAN_OP_TANH, "tanh", PLAN_PARTIAL_NONE},
      {PLAN_OP_EXP, "exp", PLAN_PARTIAL_NONE},
      {PLAN_OP_SOFTMAX, "softmax", PLAN_PARTIAL_NONE},
      {PLAN_OP_LAYERNORM, "layernorm", PLAN_PARTIAL_NONE},
      {PLAN_OP_RMSNORM, "rmsnorm", PLAN_PARTIAL_NONE},
      {PLAN_OP_EMBEDDING, "embedding", PLAN_PARTIAL_TABLE},
      {PLAN_OP_TRANSPOSE, "transpose", PLAN_PARTIAL_PASS},
      {PLAN_OP_PERMUTE, "permute", PLAN_PARTIAL_PASS},
      {PLAN_OP_RESHAPE, "reshape", PLAN_PARTIAL_PASS},
      {PLAN_OP_REDUCE_SUM, "reduce_sum", PLAN_PARTIAL_UNARY},
      {PLAN_OP_REDUCE_MEAN, "reduce_mean", PLAN_PARTIAL_UNARY},
      {PLAN_OP_SPLIT, "split", PLAN_PARTIAL_PASS},
      {PLAN_OP_CONCAT, "concat", PLAN_PARTIAL_ADDITIVE},
      {PLAN_OP_CROSS_ENTROPY, "cross_entropy", PLAN_PARTIAL_NONE},
      {PLAN_OP_EXPAND, "expand", PLAN_PARTIAL_PASS},
      {PLAN_OP_RELU_GRAD, "relu_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_GELU_GRAD, "gelu_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_SILU_GRAD, "silu_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_LAYERNORM_GRAD, "layernorm_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_RMSNORM_GRAD, "rmsnorm_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_EMBEDDING_GRAD, "embedding_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_CROSS_ENTROPY_GRAD, "cross_entropy_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_WHERE, "where", PLAN_PARTIAL_SELECT},
      {PLAN_OP_REPEAT_INTERLEAVE, "repeat_interleave", PLAN_PARTIAL_PASS},
      {PLAN_OP_TOPK, "topk", PLAN_PARTIAL_NONE},
      {PLAN_OP_GATHER, "gather", PLAN_PARTIAL_FIRST},
      {PLAN_OP_SCATTER_ADD, "scatter_add", PLAN_PARTIAL_FIRST},
      {PLAN_OP_MOE_DISPATCH, "moe_dispatch", PLAN_PARTIAL_FIRST},
      {PLAN_OP_MOE_COMBINE, "moe_combine", PLAN_PARTIAL_FIRST},
      {PLAN_OP_MOE_WEIGHTS_GRAD, "moe_weights_grad", PLAN_PARTIAL_FIRST},
      {PLAN_OP_SIGMOID, "sigmoid", PLAN_PARTIAL_NONE},
      {PLAN_OP_RSQRT, "rsqrt", PLAN_PARTIAL_NONE},
      {PLAN_OP_ADD_SCALAR, "add_scalar", PLAN_PARTIAL_NONE},
      {PLAN_OP_ATTENTION, "attention", PLAN_PARTIAL_NONE},
  };
  assert_int_equal(sizeof want / sizeof want[0], PLAN_OP_COUNT);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const plan_op_info *info = plan_op_info_get(want[i].kind);
    assert_string_equal(info->name, want[i].name);
    assert_int_equal(info->partial, want[i].partial);
  }
}

static const plan_attr_spec *find_attr(int kind, const char *name) {
  const plan_op_info *info = plan_op_info_get(kind);
  for (int i = 0; i < info->nattrs; i++)
    if (!strcmp(info->attrs[i].name, name))
      return &info->attrs[i];
  fail_msg("%s has no attribute %s", info->name, name);
  return NULL;
}

static void test_registry_attr_schemas(void **state) {
  (void)state;
  const plan_attr_spec *s;
  s = find_attr(PLAN_OP_MATMUL, "transpose_a");
  assert_int_equal(s->type, PLAN_ATTR_BOOL);
  assert_false(s->def_b);
  assert_false(s->required);
  s = find_attr(PLAN_OP_MATMUL, "transpose_b");
  assert_int_equal(s->type, PLAN_ATTR_BOOL);
  s = find_attr(PLAN_OP_SCALE, "factor");
  assert_int_equal(s->type, PLAN_ATTR_FLOAT);
  assert_true(s->def_f == 1.0);
  s = find_attr(PLAN_OP_GELU, "approximate");
  assert_int_equal(s->type, PLAN_ATTR_STRING);
  assert_string_equal(s->def_s, "none");
  s = find_attr(PLAN_OP_SOFTMAX, "dim");
  assert_int_equal(s->type, PLAN_ATTR_INT);
  assert_int_equal(s->def_i, -1);
  s = find_attr(PLAN_OP_LAYERNORM, "eps");
  assert_true(s->def_f == 1e-5);
  s = find_attr(PLAN_OP_RMSNORM, "eps");
  assert_true(s->def_f == 1e-6);
  s = find_attr(PLAN_OP_TRANSPOSE, "dims");
  assert_int_equal(s->type, PLAN_ATTR_INTS);
  assert_false(s->required);
  assert_true(find_attr(PLAN_OP_PERMUTE, "perm")->required);
  assert_true(find_attr(PLAN_OP_RESHAPE, "shape")->required);
  assert_true(find_attr(PLAN_OP_REDUCE_SUM, "dims")->required);
  assert_true(find_attr(PLAN_OP_REDUCE_MEAN, "dims")->required);
  assert_int_equal(find_attr(PLAN_OP_REDUCE_MEAN, "keepdim")->type,
                   PLAN_ATTR_BOOL);
  assert_int_equal(find_attr(PLAN_OP_SPLIT, "dim")->def_i, -1);
  assert_true(find_attr(PLAN_OP_SPLIT, "sizes")->required);
  assert_int_equal(find_attr(PLAN_OP_CONCAT, "dim")->def_i, -1);
  s = find_attr(PLAN_OP_REPEAT_INTERLEAVE, "repeats");
  assert_int_equal(s->type, PLAN_ATTR_INT);
  assert_true(s->required);
  s = find_attr(PLAN_OP_REPEAT_INTERLEAVE, "dim");
  assert_int_equal(s->type, PLAN_ATTR_INT);
  assert_true(s->required && s->is_dim);
  assert_int_equal(plan_op_info_get(PLAN_OP_WHERE)->min_in, 3);
  assert_int_equal(plan_op_info_get(PLAN_OP_WHERE)->max_in, 3);
  /* Arity. */
  assert_int_equal(plan_op_info_get(PLAN_OP_SPLIT)->max_out, -1);
  assert_int_equal(plan_op_info_get(PLAN_OP_CONCAT)->max_in, -1);
  assert_int_equal(plan_op_info_get(PLAN_OP_LINEAR)->min_in, 2);
  assert_int_equal(plan_op_info_get(PLAN_OP_LINEAR)->max_in, 3);
  assert_int_equal(plan_op_info_get(PLAN_OP_LAYERNORM)->max_in, 3);
  assert_int_equal(plan_op_info_get(PLAN_OP_RMSNORM)->max_in, 2);
}

/* ---- matmul, linear ------------------------------------------------------ */

static void test_matmul(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_MATMUL, a);
  plan_shape in[2] = {SH(PLAN_F32, 8, 16), SH(PLAN_F32, 16, 64)};
  expect_ok(run(PLAN_OP_MATMUL, in, 2, a, 1));
  EXPECT(0, PLAN_F32, 8, 64);
  /* No attribute values at all: the defaults. */
  expect_ok(run(PLAN_OP_MATMUL, in, 2, NULL, 1));
  EXPECT(0, PLAN_F32, 8, 64);
  /* Batched, 2-D rhs broadcast over the batch. */
  in[0] = SH(PLAN_BF16, 2, 3, 4, 5);
  in[1] = SH(PLAN_BF16, 5, 6);
  expect_ok(run(PLAN_OP_MATMUL, in, 2, a, 1));
  EXPECT(0, PLAN_BF16, 2, 3, 4, 6);
  /* Batch dims broadcast numpy-style. */
  in[0] = SH(PLAN_F64, 2, 1, 4, 5);
  in[1] = SH(PLAN_F64, 3, 5, 6);
  expect_ok(run(PLAN_OP_MATMUL, in, 2, a, 1));
  EXPECT(0, PLAN_F64, 2, 3, 4, 6);
  /* Transposes. */
  a[0].b = true;
  a[1].b = true;
  in[0] = SH(PLAN_F32, 5, 4); /* [k, m] */
  in[1] = SH(PLAN_F32, 6, 5); /* [n, k] */
  expect_ok(run(PLAN_OP_MATMUL, in, 2, a, 1));
  EXPECT(0, PLAN_F32, 4, 6);
  a[0].b = false;
  in[0] = SH(PLAN_F32, 4, 5);
  expect_ok(run(PLAN_OP_MATMUL, in, 2, a, 1));
  EXPECT(0, PLAN_F32, 4, 6);
}

static void test_matmul_errors(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_MATMUL, a);
  plan_shape in[2] = {SH(PLAN_F32, 8, 16), SH(PLAN_F32, 32, 64)};
  int rc = run(PLAN_OP_MATMUL, in, 2, a, 1);
  expect_err(rc, "matmul: contracting dims differ: 16 vs 32");
  assert_string_equal(g_err, "matmul: contracting dims differ: 16 vs 32");
  in[0] = SH(PLAN_F32, 2, 8, 16);
  in[1] = SH(PLAN_F32, 3, 16, 4);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 1),
             "matmul: batch dims do not broadcast: [2] vs [3]");
  in[0] = SH(PLAN_F32, 16);
  in[1] = SH(PLAN_F32, 16, 4);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 1), "input 0 must have rank >= 2");
  in[0] = SH(PLAN_I32, 8, 16);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 1),
             "matmul: input 0 must be floating point, not i32");
  in[0] = SH(PLAN_F16, 8, 16);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 1),
             "matmul: inputs 0 and 1 differ in dtype: f16 vs f32");
  expect_err(run(PLAN_OP_MATMUL, in, 1, a, 1), "matmul takes 2 inputs, not 1");
  in[0] = SH(PLAN_F32, 8, 16);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 2), "matmul gives 1 output, not 2");
  /* Fine inputs, an output past int64. */
  in[0] = SH(PLAN_F32, (int64_t)1 << 32, 1);
  in[1] = SH(PLAN_F32, 1, (int64_t)1 << 32);
  expect_err(run(PLAN_OP_MATMUL, in, 2, a, 1),
             "output 0 has more elements than int64");
}

static void test_linear(void **state) {
  (void)state;
  plan_shape in[3] = {SH(PLAN_F32, 4, 8, 16), SH(PLAN_F32, 32, 16),
                      SH(PLAN_F32, 32)};
  expect_ok(run(PLAN_OP_LINEAR, in, 3, NULL, 1));
  EXPECT(0, PLAN_F32, 4, 8, 32);
  expect_ok(run(PLAN_OP_LINEAR, in, 2, NULL, 1));
  EXPECT(0, PLAN_F32, 4, 8, 32);
  in[0] = SH(PLAN_F32, 16);
  expect_ok(run(PLAN_OP_LINEAR, in, 3, NULL, 1));
  EXPECT(0, PLAN_F32, 32);
  in[0] = SH(PLAN_F32, 8, 15);
  expect_err(run(PLAN_OP_LINEAR, in, 3, NULL, 1),
             "linear: contracting dims differ: x has k = 15, w is [32, 16]");
  in[0] = SH(PLAN_F32, 8, 16);
  in[2] = SH(PLAN_F32, 16);
  expect_err(run(PLAN_OP_LINEAR, in, 3, NULL, 1),
             "linear: bias must be [32], not [16]");
  in[2] = SH(PLAN_F32, 32);
  in[1] = SH(PLAN_F32, 16);
  expect_err(run(PLAN_OP_LINEAR, in, 3, NULL, 1), "w must be [n, k]");
  in[1] = SH(PLAN_F32, 32, 16);
  in[2] = SH(PLAN_BF16, 32);
  expect_err(run(PLAN_OP_LINEAR, in, 3, NULL, 1), "differ in dtype");
  in[0] = SCALAR(PLAN_F32);
  in[2] = SH(PLAN_F32, 32);
  expect_err(run(PLAN_OP_LINEAR, in, 3, NULL, 1), "x must have rank >= 1");
  expect_err(run(PLAN_OP_LINEAR, in, 4, NULL, 1),
             "linear takes 2 to 3 inputs, not 4");
}

/* ---- elementwise --------------------------------------------------------- */

static void test_binary(void **state) {
  (void)state;
  static const int kinds[] = {PLAN_OP_ADD, PLAN_OP_SUB, PLAN_OP_MUL,
                              PLAN_OP_DIV};
  for (size_t i = 0; i < 4; i++) {
    int k = kinds[i];
    plan_shape in[2] = {SH(PLAN_F32, 4, 1, 6), SH(PLAN_F32, 5, 1)};
    expect_ok(run(k, in, 2, NULL, 1));
    EXPECT(0, PLAN_F32, 4, 5, 6);
    in[0] = SCALAR(PLAN_F32);
    in[1] = SH(PLAN_F32, 3);
    expect_ok(run(k, in, 2, NULL, 1));
    EXPECT(0, PLAN_F32, 3);
    in[0] = SH(PLAN_F32, 1, 1);
    in[1] = SH(PLAN_F32, 1);
    expect_ok(run(k, in, 2, NULL, 1));
    EXPECT(0, PLAN_F32, 1, 1);
    in[0] = SH(PLAN_F32, 4, 6);
    in[1] = SH(PLAN_F32, 5, 6);
    char want[80];
    snprintf(want, sizeof want, "%s: shapes do not broadcast: [4, 6] vs [5, 6]",
             plan_op_kind_name(k));
    expect_err(run(k, in, 2, NULL, 1), want);
    in[1] = SH(PLAN_I64, 4, 6);
    expect_err(run(k, in, 2, NULL, 1), "input 1 must be floating point");
    in[1] = SH(PLAN_F64, 4, 6);
    expect_err(run(k, in, 2, NULL, 1), "differ in dtype: f32 vs f64");
  }
}

static void test_unary(void **state) {
  (void)state;
  static const int kinds[] = {PLAN_OP_SCALE,     PLAN_OP_RELU,    PLAN_OP_GELU,
                              PLAN_OP_SILU,      PLAN_OP_TANH,    PLAN_OP_EXP,
                              PLAN_OP_SOFTMAX,   PLAN_OP_SIGMOID, PLAN_OP_RSQRT,
                              PLAN_OP_ADD_SCALAR};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    plan_attr_val a[PLAN_MAX_ATTRS];
    defaults(kinds[i], a);
    plan_shape in[1] = {SH(PLAN_F16, 2, 3, 4)};
    expect_ok(run(kinds[i], in, 1, a, 1));
    EXPECT(0, PLAN_F16, 2, 3, 4);
    expect_ok(run(kinds[i], in, 1, NULL, 1));
    in[0] = SH(PLAN_I32, 4);
    expect_err(run(kinds[i], in, 1, a, 1), "must be floating point, not i32");
    expect_err(run(kinds[i], in, 2, a, 1), "takes 1 input, not 2");
  }
  /* A scalar goes through every pointwise op. */
  plan_shape s[1] = {SCALAR(PLAN_F32)};
  expect_ok(run(PLAN_OP_RELU, s, 1, NULL, 1));
  assert_int_equal(g_out[0].rank, 0);
}

static void test_scale_gelu_attrs(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  plan_shape in[1] = {SH(PLAN_F32, 4)};
  defaults(PLAN_OP_SCALE, a);
  a[0].f = -0.5;
  expect_ok(run(PLAN_OP_SCALE, in, 1, a, 1));
  a[0].f = NAN;
  expect_err(run(PLAN_OP_SCALE, in, 1, a, 1),
             "scale: factor must be a finite number");
  a[0].f = INFINITY;
  expect_err(run(PLAN_OP_SCALE, in, 1, a, 1), "finite");
  defaults(PLAN_OP_GELU, a);
  a[0].s = "tanh";
  expect_ok(run(PLAN_OP_GELU, in, 1, a, 1));
  a[0].s = "none";
  expect_ok(run(PLAN_OP_GELU, in, 1, a, 1));
  a[0].s = "fast";
  expect_err(run(PLAN_OP_GELU, in, 1, a, 1),
             "gelu: approximate must be \"none\" or \"tanh\", not \"fast\"");
  a[0].s = "two\nlines";
  expect_err(run(PLAN_OP_GELU, in, 1, a, 1), "not \"two?lines\"");
  a[0].s = NULL; /* unset: the default */
  expect_ok(run(PLAN_OP_GELU, in, 1, a, 1));
}

static void test_softmax(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_SOFTMAX, a);
  plan_shape in[1] = {SH(PLAN_F32, 2, 8)};
  a[0].i = 0;
  expect_ok(run(PLAN_OP_SOFTMAX, in, 1, a, 1));
  a[0].i = -2;
  expect_ok(run(PLAN_OP_SOFTMAX, in, 1, a, 1));
  a[0].i = 2;
  expect_err(run(PLAN_OP_SOFTMAX, in, 1, a, 1),
             "softmax: dim 2 is out of range for rank 2");
  a[0].i = -3;
  expect_err(run(PLAN_OP_SOFTMAX, in, 1, a, 1), "dim -3 is out of range");
  in[0] = SCALAR(PLAN_F32);
  a[0].i = -1;
  expect_err(run(PLAN_OP_SOFTMAX, in, 1, a, 1), "out of range for rank 0");
}

/* ---- normalisation ------------------------------------------------------- */

static void test_norms(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_LAYERNORM, a);
  plan_shape in[3] = {SH(PLAN_BF16, 2, 5, 16), SH(PLAN_BF16, 16),
                      SH(PLAN_BF16, 16)};
  expect_ok(run(PLAN_OP_LAYERNORM, in, 3, a, 1));
  EXPECT(0, PLAN_BF16, 2, 5, 16);
  expect_ok(run(PLAN_OP_LAYERNORM, in, 2, a, 1));
  expect_ok(run(PLAN_OP_RMSNORM, in, 2, NULL, 1));
  EXPECT(0, PLAN_BF16, 2, 5, 16);
  expect_err(run(PLAN_OP_RMSNORM, in, 3, NULL, 1),
             "rmsnorm takes 2 inputs, not 3");
  in[2] = SH(PLAN_BF16, 15);
  expect_err(run(PLAN_OP_LAYERNORM, in, 3, a, 1),
             "layernorm: bias must be [16], not [15]");
  in[1] = SH(PLAN_BF16, 1, 16);
  expect_err(run(PLAN_OP_RMSNORM, in, 2, NULL, 1),
             "rmsnorm: weight must be [16], not [1, 16]");
  in[1] = SH(PLAN_F32, 16);
  expect_err(run(PLAN_OP_RMSNORM, in, 2, NULL, 1), "differ in dtype");
  in[1] = SH(PLAN_BF16, 16);
  in[2] = SH(PLAN_BF16, 16);
  a[0].f = -1;
  expect_err(run(PLAN_OP_LAYERNORM, in, 3, a, 1), "eps must be a finite");
  a[0].f = NAN;
  expect_err(run(PLAN_OP_LAYERNORM, in, 3, a, 1), "eps must be a finite");
  a[0].f = 0;
  expect_ok(run(PLAN_OP_LAYERNORM, in, 3, a, 1));
  in[0] = SCALAR(PLAN_BF16);
  expect_err(run(PLAN_OP_LAYERNORM, in, 2, a, 1), "x must have rank >= 1");
}

/* ---- embedding ----------------------------------------------------------- */

static void test_embedding(void **state) {
  (void)state;
  plan_shape in[2] = {SH(PLAN_F32, 100, 16), SH(PLAN_I64, 4, 8)};
  expect_ok(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1));
  EXPECT(0, PLAN_F32, 4, 8, 16);
  in[1] = SH(PLAN_I32, 3);
  in[0] = SH(PLAN_BF16, 100, 16);
  expect_ok(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1));
  EXPECT(0, PLAN_BF16, 3, 16);
  in[1] = SCALAR(PLAN_I32);
  expect_ok(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1));
  EXPECT(0, PLAN_BF16, 16);
  in[1] = SH(PLAN_F32, 3);
  expect_err(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1),
             "embedding: ids (input 1) must be an integer tensor, not f32");
  in[1] = SH(PLAN_I64, 3);
  in[0] = SH(PLAN_I64, 100, 16);
  expect_err(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1),
             "input 0 must be floating point");
  in[0] = SH(PLAN_F32, 100);
  expect_err(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1),
             "table must be [v, d], not rank 1");
  in[0] = SH(PLAN_F32, 100, 16);
  in[1] = SH(PLAN_I64, 1, 1, 1, 1, 1, 1, 1, 1);
  expect_err(run(PLAN_OP_EMBEDDING, in, 2, NULL, 1), "result of rank 9");
}

/* ---- data movement ------------------------------------------------------- */

static void test_transpose(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_TRANSPOSE, a);
  plan_shape in[1] = {SH(PLAN_I64, 2, 3, 4)};
  expect_ok(run(PLAN_OP_TRANSPOSE, in, 1, a, 1));
  EXPECT(0, PLAN_I64, 2, 4, 3); /* integers flow through data movement */
  expect_ok(run(PLAN_OP_TRANSPOSE, in, 1, NULL, 1));
  EXPECT(0, PLAN_I64, 2, 4, 3);
  int64_t d[3] = {0, -1, 1};
  set_ints(&a[0], d, 2);
  expect_ok(run(PLAN_OP_TRANSPOSE, in, 1, a, 1));
  EXPECT(0, PLAN_I64, 4, 3, 2);
  set_ints(&a[0], d, 3);
  expect_err(run(PLAN_OP_TRANSPOSE, in, 1, a, 1),
             "transpose: dims must name exactly two dims, not 3");
  set_ints(&a[0], d, 0);
  expect_err(run(PLAN_OP_TRANSPOSE, in, 1, a, 1), "exactly two dims, not 0");
  int64_t same[2] = {2, -1};
  set_ints(&a[0], same, 2);
  expect_err(run(PLAN_OP_TRANSPOSE, in, 1, a, 1), "name the same dim");
  int64_t far[2] = {0, 3};
  set_ints(&a[0], far, 2);
  expect_err(run(PLAN_OP_TRANSPOSE, in, 1, a, 1),
             "transpose: dims [0, 3] are out of range for rank 3");
  in[0] = SH(PLAN_F32, 5);
  expect_err(run(PLAN_OP_TRANSPOSE, in, 1, NULL, 1),
             "dims [-2, -1] are out of range for rank 1");
}

static void test_permute(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_PERMUTE, a);
  plan_shape in[1] = {SH(PLAN_F32, 2, 3, 4)};
  expect_err(run(PLAN_OP_PERMUTE, in, 1, a, 1),
             "permute: attribute perm is required");
  expect_err(run(PLAN_OP_PERMUTE, in, 1, NULL, 1), "perm is required");
  int64_t p[3] = {2, 0, 1};
  set_ints(&a[0], p, 3);
  expect_ok(run(PLAN_OP_PERMUTE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 4, 2, 3);
  int64_t q[3] = {-1, 1, -3};
  set_ints(&a[0], q, 3);
  expect_ok(run(PLAN_OP_PERMUTE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 4, 3, 2);
  int64_t dup[3] = {0, 1, -2};
  set_ints(&a[0], dup, 3);
  expect_err(run(PLAN_OP_PERMUTE, in, 1, a, 1),
             "permute: perm names dim 1 twice");
  set_ints(&a[0], p, 2);
  expect_err(run(PLAN_OP_PERMUTE, in, 1, a, 1),
             "permute: perm has 2 entries for rank 3");
  int64_t big[3] = {0, 1, 3};
  set_ints(&a[0], big, 3);
  expect_err(run(PLAN_OP_PERMUTE, in, 1, a, 1), "perm entry 3 is out of range");
  /* Rank 0: the empty permutation. */
  in[0] = SCALAR(PLAN_F32);
  set_ints(&a[0], NULL, 0);
  expect_ok(run(PLAN_OP_PERMUTE, in, 1, a, 1));
}

static void test_reshape(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_RESHAPE, a);
  plan_shape in[1] = {SH(PLAN_F32, 4, 6)};
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "reshape: attribute shape is required");
  int64_t s1[1] = {24};
  set_ints(&a[0], s1, 1);
  expect_ok(run(PLAN_OP_RESHAPE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 24);
  int64_t s2[3] = {2, -1, 3};
  set_ints(&a[0], s2, 3);
  expect_ok(run(PLAN_OP_RESHAPE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 2, 4, 3);
  in[0] = SH(PLAN_I32, 4, 6);
  expect_ok(run(PLAN_OP_RESHAPE, in, 1, a, 1));
  EXPECT(0, PLAN_I32, 2, 4, 3);
  int64_t two[2] = {-1, -1};
  set_ints(&a[0], two, 2);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "reshape: shape has more than one -1");
  int64_t bad[2] = {5, 5};
  set_ints(&a[0], bad, 2);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "reshape: cannot reshape [4, 6] (24 elements) to [5, 5] (25 "
             "elements)");
  int64_t bad2[2] = {-1, 5};
  set_ints(&a[0], bad2, 2);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "cannot infer the -1 in [-1, 5]: 24 elements of [4, 6] are not "
             "a multiple of 5");
  int64_t zero[2] = {0, 24};
  set_ints(&a[0], zero, 2);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "shape entries must be positive or -1, not 0");
  int64_t neg[2] = {-2, -12};
  set_ints(&a[0], neg, 2);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1), "not -2");
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 4, 6};
  set_ints(&a[0], nine, 9);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1),
             "reshape: shape has rank 9 (at most 8)");
  int64_t huge[3] = {INT64_MAX / 2, 4, -1};
  set_ints(&a[0], huge, 3);
  expect_err(run(PLAN_OP_RESHAPE, in, 1, a, 1), "more elements than int64");
  /* To a scalar: a written empty list. */
  in[0] = SH(PLAN_F32, 1, 1);
  set_ints(&a[0], NULL, 0);
  expect_ok(run(PLAN_OP_RESHAPE, in, 1, a, 1));
  assert_int_equal(g_out[0].rank, 0);
  /* Zero-size: -1 infers 0. */
  in[0] = SH(PLAN_F32, 0, 6);
  int64_t z[2] = {3, -1};
  set_ints(&a[0], z, 2);
  expect_ok(run(PLAN_OP_RESHAPE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 3, 0);
}

/* ---- reductions ---------------------------------------------------------- */

static void test_reduce(void **state) {
  (void)state;
  static const int kinds[] = {PLAN_OP_REDUCE_SUM, PLAN_OP_REDUCE_MEAN};
  for (int i = 0; i < 2; i++) {
    int k = kinds[i];
    const char *op = plan_op_kind_name(k);
    char want[80];
    plan_attr_val a[PLAN_MAX_ATTRS];
    defaults(k, a);
    plan_shape in[1] = {SH(PLAN_F32, 2, 3, 4)};
    snprintf(want, sizeof want, "%s: attribute dims is required", op);
    expect_err(run(k, in, 1, a, 1), want);
    int64_t d1[1] = {1};
    set_ints(&a[0], d1, 1);
    expect_ok(run(k, in, 1, a, 1));
    EXPECT(0, PLAN_F32, 2, 4);
    a[1].b = true;
    expect_ok(run(k, in, 1, a, 1));
    EXPECT(0, PLAN_F32, 2, 1, 4);
    a[1].b = false;
    int64_t all[3] = {0, -1, 1};
    set_ints(&a[0], all, 3);
    expect_ok(run(k, in, 1, a, 1));
    assert_int_equal(g_out[0].rank, 0);
    int64_t dup[2] = {2, -1};
    set_ints(&a[0], dup, 2);
    snprintf(want, sizeof want, "%s: dims name dim 2 twice", op);
    expect_err(run(k, in, 1, a, 1), want);
    set_ints(&a[0], NULL, 0);
    expect_err(run(k, in, 1, a, 1), "dims must name at least one dim");
    int64_t far[1] = {3};
    set_ints(&a[0], far, 1);
    expect_err(run(k, in, 1, a, 1), "dim 3 is out of range for rank 3");
    in[0] = SH(PLAN_I64, 2, 3, 4);
    set_ints(&a[0], d1, 1);
    expect_err(run(k, in, 1, a, 1), "must be floating point");
  }
}

/* ---- split, concat ------------------------------------------------------- */

static void test_split(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_SPLIT, a);
  plan_shape in[1] = {SH(PLAN_BF16, 4, 48)};
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 3),
             "split: attribute sizes is required");
  int64_t s[3] = {16, 16, 16};
  set_ints(&a[1], s, 3);
  expect_ok(run(PLAN_OP_SPLIT, in, 1, a, 3));
  for (int o = 0; o < 3; o++)
    EXPECT(o, PLAN_BF16, 4, 16);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 2),
             "split: sizes has 3 entries but the op has 2 outputs");
  a[0].i = 0;
  int64_t r[2] = {1, 3};
  set_ints(&a[1], r, 2);
  in[0] = SH(PLAN_I32, 4, 48);
  expect_ok(run(PLAN_OP_SPLIT, in, 1, a, 2));
  EXPECT(0, PLAN_I32, 1, 48);
  EXPECT(1, PLAN_I32, 3, 48);
  int64_t bad[2] = {2, 3};
  set_ints(&a[1], bad, 2);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 2),
             "split: sizes add up to 5 but dim 0 has size 4");
  int64_t zero[2] = {4, 0};
  set_ints(&a[1], zero, 2);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 2), "sizes must be positive, not 0");
  set_ints(&a[1], NULL, 0);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 1),
             "sizes must have at least one entry");
  a[0].i = 2;
  set_ints(&a[1], r, 2);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 2),
             "split: dim 2 is out of range for rank 2");
  /* Too many outputs for one op. */
  int64_t many[16];
  for (int i = 0; i < 16; i++)
    many[i] = 3;
  a[0].i = 1;
  in[0] = SH(PLAN_F32, 4, 48);
  set_ints(&a[1], many, 16);
  expect_err(run(PLAN_OP_SPLIT, in, 1, a, 16), "out of range");
}

static void test_concat(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_CONCAT, a);
  plan_shape in[3] = {SH(PLAN_F32, 4, 16), SH(PLAN_F32, 4, 8),
                      SH(PLAN_F32, 4, 24)};
  expect_ok(run(PLAN_OP_CONCAT, in, 3, a, 1));
  EXPECT(0, PLAN_F32, 4, 48);
  expect_ok(run(PLAN_OP_CONCAT, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 4, 16);
  a[0].i = 0;
  expect_err(run(PLAN_OP_CONCAT, in, 3, a, 1),
             "concat: input 1 is [4, 8] but input 0 is [4, 16] (only dim 0 "
             "may differ)");
  a[0].i = -1;
  in[1] = SH(PLAN_F32, 4, 8, 1);
  expect_err(run(PLAN_OP_CONCAT, in, 3, a, 1), "only dim 1 may differ");
  in[1] = SH(PLAN_I64, 4, 8);
  expect_err(run(PLAN_OP_CONCAT, in, 3, a, 1),
             "concat: inputs 0 and 1 differ in dtype: f32 vs i64");
  /* Integers concatenate. */
  in[0] = SH(PLAN_I64, 4, 16);
  in[2] = SH(PLAN_I64, 4, 24);
  expect_ok(run(PLAN_OP_CONCAT, in, 3, a, 1));
  EXPECT(0, PLAN_I64, 4, 48);
  a[0].i = 5;
  expect_err(run(PLAN_OP_CONCAT, in, 3, a, 1), "dim 5 is out of range");
  expect_err(run(PLAN_OP_CONCAT, in, 0, a, 1), "concat takes 1 to 15 inputs");
  /* The sum of a dim must fit int64. */
  a[0].i = 0;
  in[0] = SH(PLAN_F32, INT64_MAX / 2 + 1);
  in[1] = SH(PLAN_F32, INT64_MAX / 2 + 1);
  expect_err(run(PLAN_OP_CONCAT, in, 2, a, 1), "concat: dim 0 overflows int64");
}

/* ---- loss ---------------------------------------------------------------- */

static void test_cross_entropy(void **state) {
  (void)state;
  plan_shape in[2] = {SH(PLAN_F32, 8, 10), SH(PLAN_I64, 8)};
  expect_ok(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1));
  assert_int_equal(g_out[0].rank, 0);
  assert_int_equal(g_out[0].dtype, PLAN_F32);
  in[0] = SH(PLAN_BF16, 2, 4, 10);
  in[1] = SH(PLAN_I32, 2, 4);
  expect_ok(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1));
  assert_int_equal(g_out[0].rank, 0);
  assert_int_equal(g_out[0].dtype, PLAN_BF16);
  in[1] = SH(PLAN_I32, 2, 5);
  expect_err(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1),
             "cross_entropy: labels must be [2, 4] (logits without the class "
             "dim), not [2, 5]");
  in[1] = SH(PLAN_F32, 2, 4);
  expect_err(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1),
             "labels (input 1) must be an integer tensor, not f32");
  in[0] = SH(PLAN_I32, 2, 4, 10);
  in[1] = SH(PLAN_I32, 2, 4);
  expect_err(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1),
             "input 0 must be floating point");
  in[0] = SCALAR(PLAN_F32);
  expect_err(run(PLAN_OP_CROSS_ENTROPY, in, 2, NULL, 1),
             "logits must have rank >= 1");
}

/* ---- expand and the gradient ops ----------------------------------------- */

static void test_expand(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  int64_t shape[3] = {2, 4, 6};
  defaults(PLAN_OP_EXPAND, a);
  set_ints(&a[0], shape, 3);
  plan_shape in[1] = {SH(PLAN_F32, 4, 1)};
  expect_ok(run(PLAN_OP_EXPAND, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 2, 4, 6);
  in[0] = SH(PLAN_I64, 6);
  expect_ok(run(PLAN_OP_EXPAND, in, 1, a, 1));
  EXPECT(0, PLAN_I64, 2, 4, 6);
  in[0] = SCALAR(PLAN_F64);
  expect_ok(run(PLAN_OP_EXPAND, in, 1, a, 1));
  EXPECT(0, PLAN_F64, 2, 4, 6);
  in[0] = SH(PLAN_F32, 3, 6);
  expect_err(run(PLAN_OP_EXPAND, in, 1, a, 1),
             "expand: input [3, 6] does not broadcast to [2, 4, 6] (dim 0 is "
             "3, not 1 or 4)");
  in[0] = SH(PLAN_F32, 1, 2, 4, 6);
  expect_err(run(PLAN_OP_EXPAND, in, 1, a, 1), "fewer dims than the input");
  defaults(PLAN_OP_EXPAND, a);
  expect_err(run(PLAN_OP_EXPAND, in, 1, a, 1), "attribute shape is required");
  int64_t neg[1] = {-1};
  set_ints(&a[0], neg, 1);
  in[0] = SH(PLAN_F32, 1);
  expect_err(run(PLAN_OP_EXPAND, in, 1, a, 1), "must be >= 0");
}

/* ---- where, repeat_interleave -------------------------------------------- */

static void test_where(void **state) {
  (void)state;
  /* an integer mask broadcast against a and b; a float mask; integer a/b */
  plan_shape in[3] = {SH(PLAN_I64, 4, 1), SH(PLAN_F32, 6),
                      SH(PLAN_F32, 2, 1, 1)};
  expect_ok(run(PLAN_OP_WHERE, in, 3, NULL, 1));
  EXPECT(0, PLAN_F32, 2, 4, 6);
  in[0] = SH(PLAN_BF16, 4, 6);
  in[1] = SH(PLAN_F64, 4, 6);
  in[2] = SCALAR(PLAN_F64);
  expect_ok(run(PLAN_OP_WHERE, in, 3, NULL, 1));
  EXPECT(0, PLAN_F64, 4, 6);
  in[0] = SCALAR(PLAN_I32);
  in[1] = SH(PLAN_I64, 3);
  in[2] = SH(PLAN_I64, 1);
  expect_ok(run(PLAN_OP_WHERE, in, 3, NULL, 1));
  EXPECT(0, PLAN_I64, 3);
  /* a and b differ in dtype; shapes that do not broadcast (any pair) */
  in[2] = SH(PLAN_F32, 3);
  expect_err(run(PLAN_OP_WHERE, in, 3, NULL, 1),
             "where: a and b (inputs 1 and 2) differ in dtype: i64 vs f32");
  in[0] = SH(PLAN_I64, 4, 6);
  in[1] = SH(PLAN_F32, 4, 6);
  in[2] = SH(PLAN_F32, 5, 6);
  expect_err(run(PLAN_OP_WHERE, in, 3, NULL, 1),
             "where: shapes do not broadcast: cond [4, 6], a [4, 6], b [5, "
             "6]");
  in[0] = SH(PLAN_I64, 3);
  in[2] = SH(PLAN_F32, 6);
  expect_err(run(PLAN_OP_WHERE, in, 3, NULL, 1),
             "shapes do not broadcast: cond [3], a [4, 6], b [6]");
  expect_err(run(PLAN_OP_WHERE, in, 2, NULL, 1), "where takes 3 inputs, not 2");
}

static void test_repeat_interleave(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_REPEAT_INTERLEAVE, a);
  a[0].i = 3;
  a[0].present = true;
  a[1].i = 1;
  a[1].present = true;
  /* grouped-query attention: [b, kv heads, s, e] -> [b, heads, s, e] */
  plan_shape in[1] = {SH(PLAN_BF16, 2, 4, 8, 16)};
  expect_ok(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1));
  EXPECT(0, PLAN_BF16, 2, 12, 8, 16);
  a[1].i = -1;
  in[0] = SH(PLAN_I32, 5);
  expect_ok(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1));
  EXPECT(0, PLAN_I32, 15);
  a[0].i = 1;
  in[0] = SH(PLAN_F32, 2, 0);
  expect_ok(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1));
  EXPECT(0, PLAN_F32, 2, 0);
  a[0].i = 0;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1),
             "repeat_interleave: repeats must be >= 1, not 0");
  a[0].i = 2;
  a[1].i = 2;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1),
             "repeat_interleave: dim 2 is out of range for rank 2");
  in[0] = SCALAR(PLAN_F32);
  a[1].i = 0;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1),
             "the input must have rank >= 1");
  in[0] = SH(PLAN_F32, (int64_t)1 << 40);
  a[0].i = (int64_t)1 << 30;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1), "overflows int64");
  a[0].present = false;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1),
             "attribute repeats is required");
  a[0].present = true;
  a[1].present = false;
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, a, 1),
             "attribute dim is required");
  expect_err(run(PLAN_OP_REPEAT_INTERLEAVE, in, 1, NULL, 1),
             "attribute repeats is required");
}

static void test_grad_ops(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  /* activation gradients: (dy, x) of one shape and float dtype */
  plan_shape in[3] = {SH(PLAN_F32, 4, 6), SH(PLAN_F32, 4, 6), SH(PLAN_F32, 6)};
  static const int acts[3] = {PLAN_OP_RELU_GRAD, PLAN_OP_GELU_GRAD,
                              PLAN_OP_SILU_GRAD};
  for (int i = 0; i < 3; i++) {
    expect_ok(run(acts[i], in, 2, NULL, 1));
    EXPECT(0, PLAN_F32, 4, 6);
  }
  in[1] = SH(PLAN_F32, 6);
  expect_err(run(PLAN_OP_RELU_GRAD, in, 2, NULL, 1),
             "relu_grad: inputs 0 and 1 must have one shape, not [4, 6] and "
             "[6]");
  in[1] = SH(PLAN_BF16, 4, 6);
  expect_err(run(PLAN_OP_SILU_GRAD, in, 2, NULL, 1), "differ in dtype");
  defaults(PLAN_OP_GELU_GRAD, a);
  a[0].s = "fast";
  in[1] = SH(PLAN_F32, 4, 6);
  expect_err(run(PLAN_OP_GELU_GRAD, in, 2, a, 1),
             "gelu_grad: approximate must be \"none\" or \"tanh\"");
  /* norm gradients: (dy, x, w) */
  expect_ok(run(PLAN_OP_LAYERNORM_GRAD, in, 3, NULL, 1));
  EXPECT(0, PLAN_F32, 4, 6);
  expect_ok(run(PLAN_OP_RMSNORM_GRAD, in, 3, NULL, 1));
  in[2] = SH(PLAN_F32, 4);
  expect_err(run(PLAN_OP_RMSNORM_GRAD, in, 3, NULL, 1),
             "rmsnorm_grad: weight must be [6], not [4]");
  expect_err(run(PLAN_OP_LAYERNORM_GRAD, in, 2, NULL, 1),
             "layernorm_grad takes 3 inputs, not 2");
  /* embedding_grad: (dy [b.., d], ids [b..]) -> [rows, d] */
  defaults(PLAN_OP_EMBEDDING_GRAD, a);
  a[0].i = 10;
  in[0] = SH(PLAN_F32, 2, 3, 4);
  in[1] = SH(PLAN_I64, 2, 3);
  expect_ok(run(PLAN_OP_EMBEDDING_GRAD, in, 2, a, 1));
  EXPECT(0, PLAN_F32, 10, 4);
  in[1] = SH(PLAN_I64, 3, 2);
  expect_err(run(PLAN_OP_EMBEDDING_GRAD, in, 2, a, 1),
             "embedding_grad: dy must be the ids' shape [3, 2] plus the "
             "embedding dim, not [2, 3, 4]");
  in[1] = SH(PLAN_F32, 2, 3);
  expect_err(run(PLAN_OP_EMBEDDING_GRAD, in, 2, a, 1),
             "ids (input 1) must be an integer tensor");
  a[0].i = -1;
  in[1] = SH(PLAN_I64, 2, 3);
  expect_err(run(PLAN_OP_EMBEDDING_GRAD, in, 2, a, 1), "rows must be >= 0");
  /* cross_entropy_grad: (dy [], logits [b.., c], labels [b..]) */
  in[0] = SCALAR(PLAN_F32);
  in[1] = SH(PLAN_F32, 8, 10);
  in[2] = SH(PLAN_I64, 8);
  expect_ok(run(PLAN_OP_CROSS_ENTROPY_GRAD, in, 3, NULL, 1));
  EXPECT(0, PLAN_F32, 8, 10);
  in[2] = SH(PLAN_I64, 9);
  expect_err(run(PLAN_OP_CROSS_ENTROPY_GRAD, in, 3, NULL, 1),
             "cross_entropy_grad: labels must be [8]");
  in[2] = SH(PLAN_F32, 8);
  expect_err(run(PLAN_OP_CROSS_ENTROPY_GRAD, in, 3, NULL, 1),
             "labels (input 2) must be an integer tensor");
  in[0] = SH(PLAN_F32, 1);
  in[2] = SH(PLAN_I64, 8);
  expect_err(run(PLAN_OP_CROSS_ENTROPY_GRAD, in, 3, NULL, 1),
             "dy (input 0) must be a scalar [], not [1]");
}

/* ---- input validation shared by all ops ---------------------------------- */

/* attention: the result is q's shape with v's last dim; GQA heads, masks
 * that broadcast, and what is refused. */
static void test_attention(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_ATTENTION, a);
  plan_shape in[4] = {SH(PLAN_F32, 2, 4, 5, 8), SH(PLAN_F32, 2, 2, 7, 8),
                      SH(PLAN_F32, 2, 2, 7, 3), SH(PLAN_I64, 5, 7)};
  expect_ok(run(PLAN_OP_ATTENTION, in, 3, a, 1));
  EXPECT(0, PLAN_F32, 2, 4, 5, 3);
  expect_ok(run(PLAN_OP_ATTENTION, in, 4, NULL, 1));
  EXPECT(0, PLAN_F32, 2, 4, 5, 3);
  in[3] = SH(PLAN_F32, 2, 1, 5, 7);
  expect_ok(run(PLAN_OP_ATTENTION, in, 4, a, 1));
  in[3] = SH(PLAN_F64, 5, 7);
  expect_err(run(PLAN_OP_ATTENTION, in, 4, a, 1),
             "a float mask must have q's dtype f32, not f64");
  in[3] = SH(PLAN_I64, 5, 6);
  expect_err(run(PLAN_OP_ATTENTION, in, 4, a, 1),
             "the mask [5, 6] does not broadcast to [2, 4, 5, 7]");
  in[1] = SH(PLAN_F32, 2, 3, 7, 8);
  in[2] = SH(PLAN_F32, 2, 3, 7, 3);
  expect_err(run(PLAN_OP_ATTENTION, in, 3, a, 1),
             "q's 4 heads are not a multiple of k's 3");
  in[1] = SH(PLAN_F32, 2, 2, 7, 6);
  expect_err(run(PLAN_OP_ATTENTION, in, 3, a, 1), "do not fit [b, h, s, d]");
  in[1] = SH(PLAN_F32, 2, 7, 8);
  expect_err(run(PLAN_OP_ATTENTION, in, 3, a, 1),
             "k (input 1) must be [b, heads, seq, dim], not rank 3");
  in[1] = SH(PLAN_F32, 2, 2, 7, 8);
  in[2] = SH(PLAN_F32, 2, 2, 7, 3);
  a[1].f = NAN;
  expect_err(run(PLAN_OP_ATTENTION, in, 3, a, 1), "scale must be a finite");
  defaults(PLAN_OP_ADD_SCALAR, a);
  a[0].f = INFINITY;
  expect_err(run(PLAN_OP_ADD_SCALAR, in, 1, a, 1), "value must be a finite");
}

static void test_bad_inputs(void **state) {
  (void)state;
  plan_shape in[2] = {SH(PLAN_F32, 4, -1), SH(PLAN_F32, 4)};
  expect_err(run(PLAN_OP_RELU, in, 1, NULL, 1),
             "relu: input 0 dim 1 is negative (-1)");
  in[0] = SH(PLAN_F32, 4);
  in[0].rank = PLAN_MAX_RANK + 1;
  expect_err(run(PLAN_OP_RELU, in, 1, NULL, 1), "relu: input 0 has rank 9");
  in[0] = SH(PLAN_F32, 4);
  in[0].dtype = PLAN_DTYPE_COUNT;
  expect_err(run(PLAN_OP_ADD, in, 2, NULL, 1), "unknown dtype");
  in[0] = SH(PLAN_F32, INT64_MAX, 2);
  expect_err(run(PLAN_OP_ADD, in, 2, NULL, 1),
             "input 0 has more elements than int64");
  /* Every op rejects a missing output array without crashing. */
  plan_shape ok[1] = {SH(PLAN_F32, 4)};
  expect_err(plan_op_info_get(PLAN_OP_RELU)
                 ->infer(ok, 1, NULL, NULL, 1, g_err, sizeof g_err),
             "relu: no output shapes to fill");
  /* err may be NULL. */
  assert_int_equal(
      plan_op_info_get(PLAN_OP_RELU)->infer(ok, 2, NULL, g_out, 1, NULL, 0),
      PLAN_EINVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry_rows),
      cmocka_unit_test(test_registry_names_and_partials),
      cmocka_unit_test(test_registry_attr_schemas),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_matmul_errors),
      cmocka_unit_test(test_linear),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_scale_gelu_attrs),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_norms),
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_permute),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_expand),
      cmocka_unit_test(test_where),
      cmocka_unit_test(test_repeat_interleave),
      cmocka_unit_test(test_grad_ops),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
