/* Unit tests for the factor-based sharding rules: plan_op_rule (the factors
 * of each op), plan_rule_infer_out (derived output placements) and
 * plan_rule_check (whole strategies), on the cases of spec/sharding-rules.md.
 */
/* cmocka needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <string.h>

#include "ir/ops.h"
#include "ir/placement.h"

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
#define F32(...) SH(PLAN_F32, __VA_ARGS__)
#define I64(...) SH(PLAN_I64, __VA_ARGS__)

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

/* The mesh of a test: names and sizes. */
typedef struct mesh {
  int naxes;
  const char *names[PLAN_MAX_MESH_AXES];
  int64_t sizes[PLAN_MAX_MESH_AXES];
} mesh;

static const mesh DPTP = {2, {"dp", "tp"}, {2, 2}};

/* One op instance under test. */
typedef struct opcase {
  int kind;
  plan_attr_val attrs[PLAN_MAX_ATTRS];
  bool use_attrs;
  plan_rule rule;
  mesh m;
} opcase;

static char g_err[512];
static char g_res[512];

static void build(opcase *c, int kind, const plan_shape *in, int nin, int nout,
                  const plan_attr_val *attrs, const mesh *m) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->m = *m;
  if (attrs) {
    memcpy(c->attrs, attrs, sizeof c->attrs);
    c->use_attrs = true;
  }
  plan_shape out[PLAN_MAX_OPERANDS];
  int rc = plan_op_info_get(kind)->infer(in, nin, attrs, out, nout, g_err,
                                         sizeof g_err);
  if (rc)
    fail_msg("infer: %s", g_err);
  rc = plan_op_rule(&c->rule, kind, in, nin, out, nout, attrs, g_err,
                    sizeof g_err);
  if (rc)
    fail_msg("rule: %s", g_err);
}

static plan_placement parse(const char *text, int naxes, int rank) {
  plan_placement p;
  char err[200];
  size_t off;
  if (plan_placement_parse(&p, text, strlen(text), naxes, err, sizeof err,
                           &off) ||
      plan_placement_normalize(&p, rank, err, sizeof err))
    fail_msg("placement \"%s\": %s", text, err);
  return p;
}

/* Placements of the inputs given as texts. */
static void parse_inputs(const opcase *c, const char *const *in,
                         plan_placement *pl) {
  for (int i = 0; i < c->rule.nin; i++)
    pl[i] = parse(in[i], c->m.naxes, c->rule.operand[i].rank);
}

/* Derives the outputs; on success g_res holds them joined with " | ". */
static int derive(const opcase *c, const char *const *in) {
  plan_placement pl[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  parse_inputs(c, in, pl);
  g_err[0] = g_res[0] = '\0';
  int rc =
      plan_rule_infer_out(&c->rule, c->kind, c->use_attrs ? c->attrs : NULL, pl,
                          c->m.sizes, c->m.names, out, g_err, sizeof g_err);
  if (rc == PLAN_OK) {
    size_t n = 0;
    for (int o = 0; o < c->rule.nout; o++) {
      char b[PLAN_PLACEMENT_STRLEN];
      n += (size_t)snprintf(g_res + n, sizeof g_res - n, "%s%s", o ? " | " : "",
                            plan_placement_format(&out[o], b));
    }
  }
  return rc;
}

static int check(const opcase *c, const char *const *in,
                 const char *const *outs) {
  plan_placement pl[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  parse_inputs(c, in, pl);
  for (int o = 0; o < c->rule.nout; o++)
    out[o] = parse(outs[o], c->m.naxes, c->rule.operand[c->rule.nin + o].rank);
  g_err[0] = '\0';
  return plan_rule_check(&c->rule, c->kind, c->use_attrs ? c->attrs : NULL, pl,
                         out, c->m.sizes, c->m.names, g_err, sizeof g_err);
}

#define IN(...) ((const char *const[]){__VA_ARGS__})

static void expect_out(const opcase *c, const char *const *in,
                       const char *want) {
  int rc = derive(c, in);
  if (rc)
    fail_msg("%s: derive failed: %s", plan_op_kind_name(c->kind), g_err);
  if (strcmp(g_res, want))
    fail_msg("%s: derived \"%s\", want \"%s\"", plan_op_kind_name(c->kind),
             g_res, want);
  /* Whatever derive gives, check accepts. */
  const char *outs[PLAN_MAX_OPERANDS];
  char copy[512], *save = NULL;
  snprintf(copy, sizeof copy, "%s", g_res);
  int n = 0;
  for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save))
    outs[n++] = t;
  assert_int_equal(n, c->rule.nout);
  if (check(c, in, outs))
    fail_msg("check rejects its own derivation: %s", g_err);
}

static void expect_illegal(const opcase *c, const char *const *in,
                           const char *needle) {
  int rc = derive(c, in);
  if (rc != PLAN_EINVALID)
    fail_msg("%s: expected an error with \"%s\", derived \"%s\"",
             plan_op_kind_name(c->kind), needle, g_res);
  if (!strstr(g_err, needle))
    fail_msg("error \"%s\" lacks \"%s\"", g_err, needle);
  assert_null(strchr(g_err, '\n'));
}

/* ---- Megatron MLP -------------------------------------------------------- */

static void test_megatron_mlp(void **state) {
  (void)state;
  opcase fc1, fc2;
  plan_shape in1[2] = {F32(8, 16), F32(16, 64)};
  build(&fc1, PLAN_OP_MATMUL, in1, 2, 1, NULL, &DPTP);
  /* Column parallel: w1 split by columns, x split by batch. */
  expect_out(&fc1, IN("S(0)R", "RS(1)"), "S(0)S(1)");
  plan_shape in2[2] = {F32(8, 64), F32(64, 16)};
  build(&fc2, PLAN_OP_MATMUL, in2, 2, 1, NULL, &DPTP);
  /* Row parallel: k sharded on tp gives a partial sum. */
  expect_out(&fc2, IN("S(0)S(1)", "RS(0)"), "S(0)P(sum)");
  assert_int_equal(check(&fc2, IN("S(0)S(1)", "RS(0)"), IN("S(0)P(sum)")),
                   PLAN_OK);
  assert_int_equal(check(&fc2, IN("S(0)S(1)", "RS(0)"), IN("S(0)R")),
                   PLAN_EINVALID);
  assert_string_equal(
      g_err,
      "matmul: output 0 should be S(0)P(sum) but the strategy says S(0)R");
  /* k sharded on one side only. */
  expect_illegal(&fc2, IN("S(0)S(1)", "RR"),
                 "matmul: input 0 shards dim 1 (factor k) along tp but input "
                 "1 does not (it is R there)");
  expect_illegal(&fc2, IN("S(0)R", "RS(0)"),
                 "input 1 shards dim 0 (factor k) along tp but input 0 does "
                 "not");
  /* A P(sum) lhs with an R rhs along tp, batch on dp. */
  expect_out(&fc2, IN("S(0)P(sum)", "RR"), "S(0)P(sum)");
  expect_out(&fc2, IN("RP(avg)", "RR"), "RP(avg)");
  /* Sharding m on lhs and n on rhs along different axes. */
  expect_out(&fc1, IN("S(0)R", "RR"), "S(0)R");
  expect_out(&fc1, IN("RR", "S(1)R"), "S(1)R");
  /* Two factors along one axis. */
  expect_illegal(&fc1, IN("RS(0)", "RS(1)"),
                 "matmul: input 0 shards dim 0 (factor m) along tp but input "
                 "1 shards dim 1 (factor n)");
  /* P and S along one axis. */
  expect_illegal(&fc1, IN("P(sum)R", "S(1)R"),
                 "matmul: input 0 is P(sum) along dp while input 1 shards dim "
                 "1 (factor n) there");
  expect_illegal(&fc1, IN("RP", "RP"), "inputs 0 and 1 are both partial");
  expect_illegal(&fc1, IN("RP(max)", "RR"),
                 "input 0 is P(max) along tp; only P(sum) and P(avg)");
}

static void test_matmul_batch(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(2, 4, 5), F32(5, 6)};
  build(&c, PLAN_OP_MATMUL, in, 2, 1, NULL, &DPTP);
  /* The rhs lacks the batch factor: R along the batch-sharded axis. */
  expect_out(&c, IN("S(0)R", "RR"), "S(0)R");
  expect_out(&c, IN("S(0)S(2)", "RS(0)"), "S(0)P(sum)");
  /* Broadcast size-1 batch dim: the factor is on the other side only. */
  plan_shape in2[2] = {F32(1, 4, 5), F32(3, 5, 6)};
  build(&c, PLAN_OP_MATMUL, in2, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("RR", "S(0)R"), "S(0)R");
  expect_illegal(&c, IN("S(0)R", "S(0)R"),
                 "matmul: input 0 dim 0 is a broadcast size-1 dim and cannot "
                 "be sharded");
  /* Transposed operands move the letters. */
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_MATMUL, a);
  a[0].b = true;
  a[1].b = true;
  plan_shape in3[2] = {F32(16, 8), F32(64, 16)}; /* [k, m], [n, k] */
  build(&c, PLAN_OP_MATMUL, in3, 2, 1, a, &DPTP);
  expect_out(&c, IN("S(1)S(0)", "RS(1)"), "S(0)P(sum)");
  expect_out(&c, IN("RR", "S(0)R"), "S(1)R");
  expect_illegal(&c, IN("S(1)S(0)", "RS(0)"),
                 "input 0 shards dim 0 (factor k) along tp but input 1 "
                 "shards dim 0 (factor n)");
}

/* ---- elementwise --------------------------------------------------------- */

static void test_add_sub(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(4, 6), F32(4, 6)};
  static const int kinds[] = {PLAN_OP_ADD, PLAN_OP_SUB};
  for (int k = 0; k < 2; k++) {
    build(&c, kinds[k], in, 2, 1, NULL, &DPTP);
    expect_out(&c, IN("P(sum)R", "P(sum)R"), "P(sum)R");
    expect_out(&c, IN("S(0)P(avg)", "S(0)P(avg)"), "S(0)P(avg)");
    expect_illegal(&c, IN("P(sum)R", "RR"),
                   "input 1 is R along dp while input 0 is P(sum)");
    expect_illegal(&c, IN("RR", "RP(sum)"),
                   "input 0 is R along tp while input 1 is P(sum)");
    expect_illegal(&c, IN("P(sum)R", "P(avg)R"),
                   "input 1 is P(avg) along dp while input 0 is P(sum)");
    expect_illegal(&c, IN("P(max)R", "P(max)R"),
                   "P(max) along dp does not pass through");
    expect_out(&c, IN("S(1)S(0)", "S(1)S(0)"), "S(1)S(0)");
    expect_illegal(&c, IN("S(1)R", "S(0)R"),
                   "factor d1) along dp but input 1 "
                   "shards dim 0 (factor d0)");
  }
  /* Broadcasting: a missing dim is R, a size-1 dim cannot be sharded. */
  plan_shape bc[2] = {F32(4, 6), F32(6)};
  build(&c, PLAN_OP_ADD, bc, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "RS(0)"), "S(0)S(1)");
  expect_illegal(&c, IN("S(0)R", "S(0)R"),
                 "input 0 shards dim 0 (factor d0) along dp but input 1 "
                 "shards dim 0 (factor d1)");
  expect_illegal(&c, IN("RS(1)", "RR"), "but input 1 does not");
  plan_shape b1[2] = {F32(4, 6), F32(1, 6)};
  build(&c, PLAN_OP_ADD, b1, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R", "RR"), "S(0)R");
  expect_illegal(&c, IN("S(0)R", "S(0)R"),
                 "add: input 1 dim 0 is a broadcast size-1 dim");
  /* Size-1 on both sides is a real (tiny) factor. */
  plan_shape ones[2] = {F32(1, 6), F32(1, 6)};
  build(&c, PLAN_OP_ADD, ones, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R", "S(0)R"), "S(0)R");
}

static void test_mul_div(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(4, 6), F32(4, 6)};
  build(&c, PLAN_OP_MUL, in, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("P(sum)R", "RR"), "P(sum)R");
  expect_out(&c, IN("RR", "RP(avg)"), "RP(avg)");
  expect_illegal(&c, IN("P(sum)R", "P(sum)R"),
                 "mul: inputs 0 and 1 are both partial along dp");
  expect_illegal(&c, IN("P(max)R", "RR"), "only P(sum) and P(avg)");
  build(&c, PLAN_OP_DIV, in, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("P(sum)S(1)", "RS(1)"), "P(sum)S(1)");
  expect_illegal(&c, IN("RR", "P(sum)R"),
                 "div: the divisor (input 1) is P(sum) along dp; only the "
                 "dividend may be partial");
  expect_illegal(&c, IN("P(sum)R", "P(sum)R"), "divisor (input 1)");
  expect_illegal(&c, IN("P(min)R", "RR"), "only P(sum) and P(avg)");
  expect_illegal(&c, IN("P(sum)R", "S(0)R"),
                 "div: input 0 is P(sum) along dp while input 1 shards dim 0");
}

static void test_unary_partial(void **state) {
  (void)state;
  opcase c;
  plan_shape in[1] = {F32(4, 6)};
  static const int nonlinear[] = {
      PLAN_OP_RELU, PLAN_OP_GELU,    PLAN_OP_SILU,  PLAN_OP_TANH,
      PLAN_OP_EXP,  PLAN_OP_SIGMOID, PLAN_OP_RSQRT, PLAN_OP_ADD_SCALAR};
  for (int k = 0; k < (int)(sizeof nonlinear / sizeof nonlinear[0]); k++) {
    build(&c, nonlinear[k], in, 1, 1, NULL, &DPTP);
    expect_out(&c, IN("S(0)S(1)"), "S(0)S(1)");
    expect_out(&c, IN("RS(0)"), "RS(0)");
    char want[120];
    snprintf(want, sizeof want,
             "%s: input 0 is P(sum) along tp, but %s is not linear",
             plan_op_kind_name(nonlinear[k]), plan_op_kind_name(nonlinear[k]));
    expect_illegal(&c, IN("S(0)P(sum)"), want);
  }
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_SCALE, a);
  a[0].f = 2.0;
  build(&c, PLAN_OP_SCALE, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("P(sum)S(1)"), "P(sum)S(1)");
  expect_out(&c, IN("P(max)P(min)"), "P(max)P(min)");
  a[0].f = -1.0;
  build(&c, PLAN_OP_SCALE, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("P(avg)R"), "P(avg)R");
  expect_illegal(&c, IN("P(max)R"),
                 "scale: P(max) along dp passes only a factor >= 0, not -1");
  /* Default factor 1 without attribute values. */
  build(&c, PLAN_OP_SCALE, in, 1, 1, NULL, &DPTP);
  expect_out(&c, IN("RP(min)"), "RP(min)");
}

static void test_softmax_norms(void **state) {
  (void)state;
  opcase c;
  plan_shape in[1] = {F32(4, 8)};
  build(&c, PLAN_OP_SOFTMAX, in, 1, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R"), "S(0)R");
  expect_illegal(&c, IN("RS(1)"),
                 "softmax: dim 1 must be replicated (sharded along tp)");
  assert_string_equal(g_err,
                      "softmax: dim 1 must be replicated (sharded along tp)");
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_SOFTMAX, a);
  a[0].i = 0;
  build(&c, PLAN_OP_SOFTMAX, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("RS(1)"), "RS(1)");
  expect_illegal(&c, IN("S(0)R"), "softmax: dim 0 must be replicated");
  expect_illegal(&c, IN("P(sum)R"), "softmax is not linear");

  plan_shape ln[3] = {F32(2, 5, 16), F32(16), F32(16)};
  build(&c, PLAN_OP_LAYERNORM, ln, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "RR", "RR"), "S(0)S(1)");
  expect_illegal(&c, IN("RS(2)", "RS(0)", "RS(0)"),
                 "layernorm: dim 2 of input 0 must be replicated (sharded "
                 "along tp)");
  expect_illegal(&c, IN("RR", "RS(0)", "RR"),
                 "dim 0 of input 1 must be replicated");
  /* A sharded weight with the x batch sharded: the weight lacks b. */
  expect_illegal(&c, IN("S(0)R", "S(0)R", "RR"), "input 1 shards dim 0");
  build(&c, PLAN_OP_RMSNORM, ln, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(1)", "RR"), "RS(1)");
  expect_illegal(&c, IN("RP", "RR"), "rmsnorm is not linear");
}

/* ---- linear, embedding --------------------------------------------------- */

static void test_linear(void **state) {
  (void)state;
  opcase c;
  plan_shape in[3] = {F32(8, 16), F32(32, 16), F32(32)};
  build(&c, PLAN_OP_LINEAR, in, 3, 1, NULL, &DPTP);
  /* Column parallel: n sharded, bias sharded with it. */
  expect_out(&c, IN("S(0)R", "RS(0)", "RS(0)"), "S(0)S(1)");
  expect_illegal(&c, IN("S(0)R", "RS(0)", "RR"),
                 "linear: input 1 shards dim 0 (factor n) along tp but input "
                 "2 does not");
  /* Row parallel: k sharded; the bias must enter as P(sum). */
  expect_illegal(&c, IN("S(0)S(1)", "RS(1)", "RR"),
                 "linear: input 2 must be P(sum) along tp because factor k "
                 "(dim 1 of input 0) is sharded there");
  expect_out(&c, IN("S(0)S(1)", "RS(1)", "RP(sum)"), "S(0)P(sum)");
  expect_illegal(&c, IN("S(0)S(1)", "RS(1)", "RP(avg)"),
                 "input 2 is P(avg) along tp while input 0 shards dim 1");
  /* The bias may not be P where the sharded factor is free. */
  expect_illegal(&c, IN("S(0)R", "RR", "P(sum)R"),
                 "input 2 is P(sum) along dp while input 0 shards dim 0");
  /* Partial x. */
  expect_out(&c, IN("RP(sum)", "RR", "RP(sum)"), "RP(sum)");
  expect_out(&c, IN("RR", "RP(avg)", "RP(avg)"), "RP(avg)");
  expect_illegal(&c, IN("RP(sum)", "RR", "RR"),
                 "linear: the bias (input 2) must be P(sum) along tp like "
                 "input 0, not R");
  expect_illegal(&c, IN("RR", "RR", "RP(sum)"),
                 "the bias (input 2) is P(sum) along tp but neither x nor w");
  expect_illegal(&c, IN("RP", "RP", "RP"), "inputs 0 and 1 are both partial");
  /* Without a bias. */
  build(&c, PLAN_OP_LINEAR, in, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "RS(1)"), "S(0)P(sum)");
  expect_out(&c, IN("RP(sum)", "RR"), "RP(sum)");
}

static void test_embedding(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(100, 16), I64(4, 8)};
  build(&c, PLAN_OP_EMBEDDING, in, 2, 1, NULL, &DPTP);
  /* Row-sharded (vocab-parallel) table: masked partial sum. */
  expect_out(&c, IN("RS(0)", "S(0)R"), "S(0)P(sum)");
  expect_out(&c, IN("RS(1)", "S(1)R"), "S(1)S(2)");
  expect_illegal(&c, IN("RS(0)", "RS(0)"),
                 "input 0 shards dim 0 (factor v) along tp but input 1 shards "
                 "dim 0 (factor b0)");
  expect_out(&c, IN("P(sum)R", "RR"), "P(sum)R");
  expect_illegal(&c, IN("RR", "P(sum)R"),
                 "embedding: the ids (input 1) are P(sum) along dp");
  expect_illegal(&c, IN("P(max)R", "RR"), "only P(sum) and P(avg)");
}

/* ---- data movement ------------------------------------------------------- */

static void test_transpose_permute(void **state) {
  (void)state;
  opcase c;
  plan_shape in[1] = {F32(2, 3, 4)};
  build(&c, PLAN_OP_TRANSPOSE, in, 1, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(2)"), "S(0)S(1)");
  expect_out(&c, IN("P(max)S(1)"), "P(max)S(2)");
  /* Nesting order travels with the factor. */
  expect_out(&c, IN("S(2:1)S(2:0)"), "S(1:1)S(1:0)");
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_PERMUTE, a);
  int64_t p[3] = {2, 0, 1};
  set_ints(&a[0], p, 3);
  build(&c, PLAN_OP_PERMUTE, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(2)"), "S(1)S(0)");
  expect_out(&c, IN("S(2)S(2)"), "S(0)S(0)");
  expect_out(&c, IN("P(min)P(avg)"), "P(min)P(avg)");
}

static void test_reshape_merge(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_RESHAPE, a);
  int64_t s24[1] = {24};
  set_ints(&a[0], s24, 1);
  plan_shape in[1] = {F32(4, 6)};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &DPTP);
  /* The merged dim is compound (4 major, 6 minor): sharding it on an axis
   * of 2 is sharding the 4. */
  expect_out(&c, IN("S(0)R"), "S(0)R");
  expect_out(&c, IN("S(0)S(0)"), "S(0)S(0)");
  expect_out(&c, IN("P(sum)R"), "P(sum)R");
  expect_illegal(&c, IN("S(1)R"),
                 "reshape: factor r1 (dim 1 of input 0) is sharded along dp "
                 "but output 0 holds it as the minor part of dim 0");
  /* On an axis of 8 the 4 cannot be sharded evenly: the merged dim's chunks
   * of 3 cut across rows. */
  mesh m8 = {2, {"dp", "tp"}, {1, 8}};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &m8);
  expect_illegal(&c, IN("RS(0)"),
                 "reshape: dim 0 of output 0 is compound (major part r0 of "
                 "size 4); sharding it along [tp] (8 shards) needs 4 to "
                 "divide by 8");
  mesh m3 = {2, {"dp", "tp"}, {2, 3}};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &m3);
  expect_illegal(&c, IN("RS(0)"), "needs 4 to divide by 3");
  /* Both axes together: 4 shards of the 4. */
  mesh m22 = {2, {"dp", "tp"}, {2, 2}};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &m22);
  expect_out(&c, IN("S(0:1)S(0:0)"), "S(0:1)S(0:0)");
  /* Three dims merged, with a size-1 dim that stays out of the group. */
  int64_t s48[2] = {48, 1};
  set_ints(&a[0], s48, 2);
  plan_shape in3[1] = {F32(4, 1, 2, 6)};
  build(&c, PLAN_OP_RESHAPE, in3, 1, 1, a, &DPTP);
  expect_out(&c, IN("S(0)R"), "S(0)R");
  expect_illegal(&c, IN("S(1)R"), "reshape: dim 1 must be replicated");
  expect_illegal(&c, IN("S(2)R"), "minor part of dim 0");
}

static void test_reshape_split(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_RESHAPE, a);
  int64_t s[3] = {4, 6, -1};
  set_ints(&a[0], s, 3);
  plan_shape in[1] = {F32(24, 5)};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &DPTP);
  /* The input dim is compound of the output dims 4 (major) and 6. */
  expect_out(&c, IN("S(0)S(1)"), "S(0)S(2)");
  expect_out(&c, IN("S(0)S(0)"), "S(0)S(0)");
  mesh m8 = {1, {"tp"}, {8}};
  build(&c, PLAN_OP_RESHAPE, in, 1, 1, a, &m8);
  expect_illegal(&c, IN("S(0)"),
                 "reshape: dim 0 of input 0 is compound (major part r0 of "
                 "size 4)");
  expect_out(&c, IN("S(1)"), "S(2)");
  /* A regrouping that is neither split nor merge is need-replication. */
  int64_t t[2] = {4, 6};
  set_ints(&a[0], t, 2);
  plan_shape in2[1] = {F32(6, 4)};
  build(&c, PLAN_OP_RESHAPE, in2, 1, 1, a, &DPTP);
  expect_illegal(&c, IN("S(0)R"), "reshape: dim 0 must be replicated");
  expect_illegal(&c, IN("RS(1)"), "reshape: dim 1 must be replicated");
  expect_out(&c, IN("P(avg)R"), "P(avg)R");
  /* An added size-1 dim is its own factor, the others map one to one. */
  int64_t u[3] = {1, 6, 4};
  set_ints(&a[0], u, 3);
  build(&c, PLAN_OP_RESHAPE, in2, 1, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(1)"), "S(1)S(2)");
}

/* ---- reductions ---------------------------------------------------------- */

static void test_reduce(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_REDUCE_MEAN, a);
  int64_t d0[1] = {0};
  set_ints(&a[0], d0, 1);
  plan_shape in[1] = {F32(8, 6)};
  build(&c, PLAN_OP_REDUCE_MEAN, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(1)"), "P(sum)S(0)");
  /* Even shards: P(avg) is also right. */
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(avg)R")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(sum)R")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)S(0)"), IN("P(avg)P(avg)")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)S(0)"), IN("P(avg)P(sum)")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(max)R")), PLAN_EINVALID);
  /* Partial input passes: sum/avg only. */
  expect_out(&c, IN("P(avg)R"), "P(avg)R");
  expect_illegal(&c, IN("P(max)R"),
                 "reduce_mean: P(max) along dp does not pass through "
                 "reduce_mean");
  /* Uneven shards (7 rows on 2): P(avg) is wrong, P(sum) right. */
  plan_shape odd[1] = {F32(7, 6)};
  build(&c, PLAN_OP_REDUCE_MEAN, odd, 1, 1, a, &DPTP);
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(sum)R")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(avg)R")), PLAN_EINVALID);
  assert_string_equal(g_err,
                      "reduce_mean: output 0 should be P(sum)R but the "
                      "strategy says P(avg)R (P(avg) needs evenly sharded "
                      "reduced dims)");
  /* 8 rows on dp=2 x tp=2 nested: even; 6 rows: 3 then 2, 1: uneven. */
  plan_shape six[1] = {F32(6, 6)};
  build(&c, PLAN_OP_REDUCE_MEAN, six, 1, 1, a, &DPTP);
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(avg)R")), PLAN_OK);
  assert_int_equal(check(&c, IN("S(0)S(0)"), IN("P(avg)P(avg)")),
                   PLAN_EINVALID);
  /* reduce_sum never takes P(avg) for a sharded reduction. */
  defaults(PLAN_OP_REDUCE_SUM, a);
  set_ints(&a[0], d0, 1);
  a[1].b = true;
  build(&c, PLAN_OP_REDUCE_SUM, in, 1, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(1)"), "P(sum)S(1)");
  assert_int_equal(check(&c, IN("S(0)R"), IN("P(avg)R")), PLAN_EINVALID);
  /* The kept size-1 dim carries nothing. */
  assert_int_equal(check(&c, IN("S(0)R"), IN("S(0)R")), PLAN_EINVALID);
  assert_string_equal(g_err, "reduce_sum: output 0 should be P(sum)R but the "
                             "strategy says S(0)R");
}

static void test_split_concat(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_SPLIT, a);
  int64_t s[3] = {16, 16, 16};
  set_ints(&a[1], s, 3);
  plan_shape in[1] = {F32(4, 48)};
  build(&c, PLAN_OP_SPLIT, in, 1, 3, a, &DPTP);
  expect_out(&c, IN("S(0)R"), "S(0)R | S(0)R | S(0)R");
  expect_out(&c, IN("P(sum)S(0)"), "P(sum)S(0) | P(sum)S(0) | P(sum)S(0)");
  /* The fused-QKV bug: sharding the fused dim, then splitting. */
  expect_illegal(&c, IN("RS(1)"),
                 "split: dim 1 must be replicated (sharded along tp)");
  /* concat: the fused dim replicated, the others sharded alike. */
  defaults(PLAN_OP_CONCAT, a);
  plan_shape cin[3] = {F32(4, 16), F32(4, 16), F32(4, 16)};
  build(&c, PLAN_OP_CONCAT, cin, 3, 1, a, &DPTP);
  expect_out(&c, IN("S(0)R", "S(0)R", "S(0)R"), "S(0)R");
  expect_out(&c, IN("P(sum)R", "P(sum)R", "P(sum)R"), "P(sum)R");
  expect_illegal(&c, IN("S(0)R", "RR", "S(0)R"),
                 "concat: input 0 shards dim 0 (factor d0) along dp but input "
                 "1 does not");
  expect_illegal(&c, IN("P(sum)R", "RR", "P(sum)R"),
                 "concat: input 1 is R along dp while input 0 is P(sum)");
  expect_illegal(&c, IN("RS(1)", "RS(1)", "RS(1)"),
                 "concat: dim 1 of input 0 must be replicated");
}

static void test_cross_entropy(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(2, 8, 10), I64(2, 8)};
  build(&c, PLAN_OP_CROSS_ENTROPY, in, 2, 1, NULL, &DPTP);
  /* Batch-sharded loss: each rank holds its share of the mean. */
  expect_out(&c, IN("S(0)R", "S(0)R"), "P(sum)R");
  expect_out(&c, IN("S(0)S(1)", "S(0)S(1)"), "P(sum)P(sum)");
  expect_illegal(&c, IN("S(0)R", "RR"),
                 "cross_entropy: input 0 shards dim 0 (factor b0) along dp "
                 "but input 1 does not");
  /* Vocab-parallel: the classes split, the op all-reduces inside, every
   * rank holds the whole loss. */
  expect_out(&c, IN("RS(2)", "RR"), "RR");
  expect_out(&c, IN("S(0)S(2)", "S(0)R"), "P(sum)R");
  expect_illegal(&c, IN("P(sum)R", "RR"), "cross_entropy is not linear");
}

/* ---- nesting, unevenness, mesh shapes ------------------------------------ */

static void test_nesting_order(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(8, 6), F32(8, 6)};
  build(&c, PLAN_OP_ADD, in, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(0)", "S(0)S(0)"), "S(0)S(0)");
  expect_out(&c, IN("S(0:1)S(0:0)", "S(0:1)S(0:0)"), "S(0:1)S(0:0)");
  expect_illegal(&c, IN("S(0:1)S(0:0)", "S(0)S(0)"),
                 "add: inputs 0 and 1 shard factor d0 in different nesting "
                 "orders: [tp, dp] vs [dp, tp]");
  /* Three axes, a factor on two of them. */
  mesh m3 = {3, {"pp", "dp", "tp"}, {2, 2, 2}};
  build(&c, PLAN_OP_ADD, in, 2, 1, NULL, &m3);
  expect_out(&c, IN("RS(0:1)S(0:0)", "RS(0:1)S(0:0)"), "RS(0:1)S(0:0)");
  expect_out(&c, IN("S(1)S(0)S(0)", "S(1)S(0)S(0)"), "S(1)S(0)S(0)");
  /* Levels of the output follow the inputs even when the dim moves. */
  plan_shape mm[2] = {F32(8, 16), F32(16, 4)};
  build(&c, PLAN_OP_MATMUL, mm, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0:1)S(0:0)", "RR"), "S(0:1)S(0:0)");
  expect_illegal(&c, IN("S(1:1)S(1:0)", "S(0)S(0)"),
                 "shard factor k in different nesting orders");
}

static void test_uneven_and_small_axes(void **state) {
  (void)state;
  opcase c;
  /* Uneven free factors are fine (torch.chunk). */
  plan_shape in[2] = {F32(5, 16), F32(16, 3)};
  build(&c, PLAN_OP_MATMUL, in, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R", "RS(1)"), "S(0)S(1)");
  expect_out(&c, IN("S(0)S(0)", "RR"), "S(0)S(0)");
  /* Uneven reductions are fine too (a P(sum) of uneven parts). */
  plan_shape in2[2] = {F32(4, 5), F32(5, 4)};
  build(&c, PLAN_OP_MATMUL, in2, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(1)", "RS(0)"), "RP(sum)");
  /* Size-1 mesh axes behave like any other. */
  mesh m1 = {3, {"pp", "dp", "tp"}, {1, 2, 1}};
  build(&c, PLAN_OP_MATMUL, in, 2, 1, NULL, &m1);
  expect_out(&c, IN("S(0)S(0)R", "RRS(1)"), "S(0)S(0)S(1)");
  expect_out(&c, IN("RRS(1)", "RRS(0)"), "RRP(sum)");
  expect_out(&c, IN("RRP", "RRR"), "RRP(sum)");
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_RESHAPE, a);
  int64_t s[1] = {12};
  set_ints(&a[0], s, 1);
  plan_shape r[1] = {F32(2, 6)};
  build(&c, PLAN_OP_RESHAPE, r, 1, 1, a, &m1);
  /* 2 over 1 x 2 x 1 = 2 shards: divisible. */
  expect_out(&c, IN("S(0)S(0)S(0)"), "S(0)S(0)S(0)");
  mesh m4 = {2, {"a", "b"}, {1, 4}};
  build(&c, PLAN_OP_RESHAPE, r, 1, 1, a, &m4);
  expect_out(&c, IN("S(0)R"), "S(0)R");
  expect_illegal(&c, IN("RS(0)"), "needs 2 to divide by 4");
  /* One-axis mesh, one-element tensors. */
  mesh one = {1, {"x"}, {1}};
  plan_shape t[2] = {F32(1, 1), F32(1, 1)};
  build(&c, PLAN_OP_MATMUL, t, 2, 1, NULL, &one);
  expect_out(&c, IN("S(0)", "R"), "S(0)");
  expect_out(&c, IN("S(1)", "S(0)"), "P(sum)");
}

/* ---- expand and the gradient ops ----------------------------------------- */

static void test_expand_rule(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  int64_t to[3] = {2, 4, 6};
  defaults(PLAN_OP_EXPAND, a);
  set_ints(&a[0], to, 3);
  plan_shape in[1] = {F32(4, 1)};
  build(&c, PLAN_OP_EXPAND, in, 1, 1, a, &DPTP);
  /* the kept dim carries its sharding; partial values pass */
  expect_out(&c, IN("S(0)R"), "S(1)R");
  expect_out(&c, IN("P(sum)P(avg)"), "P(sum)P(avg)");
  /* a broadcast size-1 dim cannot be sharded */
  expect_illegal(&c, IN("RS(1)"), "broadcast size-1 dim");
}

/* ---- where, repeat_interleave -------------------------------------------- */

static void test_where_rule(void **state) {
  (void)state;
  opcase c;
  /* cond [4, 1] (an integer mask), a [4, 6], b [6] */
  plan_shape in[3] = {I64(4, 1), F32(4, 6), F32(6)};
  build(&c, PLAN_OP_WHERE, in, 3, 1, NULL, &DPTP);
  /* every factor free: rows shard cond and a, columns shard a and b */
  expect_out(&c, IN("S(0)R", "S(0)S(1)", "RS(0)"), "S(0)S(1)");
  expect_out(&c, IN("RR", "RS(1)", "RS(0)"), "RS(1)");
  expect_illegal(&c, IN("S(0)R", "RR", "RR"),
                 "input 0 shards dim 0 (factor d0) along dp but input 1 does "
                 "not");
  expect_illegal(&c, IN("RS(1)", "RR", "RR"), "broadcast size-1 dim");
  /* a and b partial alike, of any kind; cond replicated */
  expect_out(&c, IN("RR", "P(sum)P(avg)", "P(sum)P(avg)"), "P(sum)P(avg)");
  expect_out(&c, IN("RR", "P(max)R", "P(max)R"), "P(max)R");
  expect_out(&c, IN("S(0)R", "S(0)P(min)", "RP(min)"), "S(0)P(min)");
  expect_illegal(&c, IN("RR", "P(sum)R", "RR"),
                 "where: input 2 is R along dp while input 1 is P(sum): a and "
                 "b (inputs 1 and 2) must be partial in the same way, or "
                 "neither");
  expect_illegal(&c, IN("RR", "RR", "P(sum)R"), "input 1 is R along dp");
  expect_illegal(&c, IN("RR", "P(sum)R", "P(avg)R"), "in the same way");
  expect_illegal(&c, IN("P(sum)R", "P(sum)R", "P(sum)R"),
                 "where: the condition (input 0) is P(sum) along dp; it "
                 "selects, so it cannot be partial");
  /* sharded and partial along one axis */
  expect_illegal(&c, IN("S(0)R", "P(sum)R", "P(sum)R"),
                 "either sharded or partial");
}

static void test_repeat_interleave_rule(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_REPEAT_INTERLEAVE, a);
  a[0].i = 3;
  a[0].present = true;
  a[1].i = 1;
  a[1].present = true;
  /* kv heads [b 4, h 4, e 6] -> [4, 12, 6]: the heads' n is major */
  plan_shape in[1] = {F32(4, 4, 6)};
  build(&c, PLAN_OP_REPEAT_INTERLEAVE, in, 1, 1, a, &DPTP);
  assert_int_equal(c.rule.operand[1].nf[1], 2);
  expect_out(&c, IN("S(0)S(1)"), "S(0)S(1)");
  expect_out(&c, IN("S(1)S(1)"), "S(1)S(1)");
  expect_out(&c, IN("RS(2)"), "RS(2)");
  /* data movement: any partial passes */
  expect_out(&c, IN("P(max)P(sum)"), "P(max)P(sum)");
  /* the output's r is minor: no input shards it, S cannot name it alone */
  assert_int_equal(check(&c, IN("RR"), IN("RS(1)")), PLAN_EINVALID);
  /* n = 3 over 2 ranks: chunks of the repeated dim are not repeats of
   * the input's chunks */
  plan_shape odd[1] = {F32(4, 3, 6)};
  build(&c, PLAN_OP_REPEAT_INTERLEAVE, odd, 1, 1, a, &DPTP);
  expect_illegal(&c, IN("RS(1)"), "compound");
  /* repeats 1: the output dim is the input's, uneven shards allowed */
  a[0].i = 1;
  build(&c, PLAN_OP_REPEAT_INTERLEAVE, odd, 1, 1, a, &DPTP);
  assert_int_equal(c.rule.operand[1].nf[1], 1);
  expect_out(&c, IN("RS(1)"), "RS(1)");
}

static void test_grad_op_rules(void **state) {
  (void)state;
  opcase c;
  /* elementwise: dy and x shard alike; only dy may be partial */
  plan_shape act[2] = {F32(4, 6), F32(4, 6)};
  build(&c, PLAN_OP_GELU_GRAD, act, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "S(0)S(1)"), "S(0)S(1)");
  expect_out(&c, IN("P(sum)R", "RR"), "P(sum)R");
  expect_illegal(&c, IN("RR", "P(sum)R"),
                 "only the output gradient (input 0) may be partial");
  expect_illegal(&c, IN("P(max)R", "RR"), "only P(sum) and P(avg)");
  expect_illegal(&c, IN("S(0)R", "RR"), "does not");
  /* norms: the normalised dim whole */
  plan_shape norm[3] = {F32(4, 6), F32(4, 6), F32(6)};
  build(&c, PLAN_OP_LAYERNORM_GRAD, norm, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R", "S(0)R", "RR"), "S(0)R");
  expect_illegal(&c, IN("RS(1)", "RS(1)", "RS(0)"), "must be replicated");
  /* embedding_grad: samples sharded give partial sums of the table */
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_EMBEDDING_GRAD, a);
  a[0].i = 10;
  plan_shape emb[2] = {F32(4, 3, 6), I64(4, 3)};
  build(&c, PLAN_OP_EMBEDDING_GRAD, emb, 2, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "S(0)S(1)"), "P(sum)P(sum)");
  expect_out(&c, IN("RS(2)", "RR"), "RS(1)");
  expect_out(&c, IN("P(sum)R", "RR"), "P(sum)R");
  /* cross_entropy_grad: rows on their own, the classes whole */
  plan_shape ce[3] = {mk(PLAN_F32, 0, NULL), F32(4, 6), I64(4)};
  build(&c, PLAN_OP_CROSS_ENTROPY_GRAD, ce, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("RR", "S(0)R", "S(0)R"), "S(0)R");
  expect_out(&c, IN("RP(sum)", "S(0)R", "S(0)R"), "S(0)P(sum)");
  /* a partial dy beside sharded rows would mix the two on one rank */
  expect_illegal(&c, IN("P(sum)R", "S(0)R", "S(0)R"),
                 "either sharded or partial");
  /* vocab-parallel: dx keeps the logits' class split */
  expect_out(&c, IN("RR", "RS(1)", "RR"), "RS(1)");
  expect_out(&c, IN("RR", "S(0)S(1)", "S(0)R"), "S(0)S(1)");
}

/* ---- routing and mixture of experts -------------------------------------- */

static void test_route_rules(void **state) {
  (void)state;
  opcase c;
  plan_attr_val a[PLAN_MAX_ATTRS];
  /* topk: rows free, the last dim whole */
  defaults(PLAN_OP_TOPK, a);
  a[0].i = 2;
  a[0].present = true;
  plan_shape tk[1] = {F32(4, 6)};
  build(&c, PLAN_OP_TOPK, tk, 1, 2, a, &DPTP);
  expect_out(&c, IN("S(0)R"), "S(0)R | S(0)R");
  expect_illegal(&c, IN("RS(1)"), "must be replicated");
  expect_illegal(&c, IN("P(sum)R"), "not linear");
  /* gather: x's last dim sharded is a masked partial sum; k free */
  plan_shape ga[2] = {F32(4, 6), I64(4, 3)};
  build(&c, PLAN_OP_GATHER, ga, 2, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(1)", "RR"), "RP(sum)");
  expect_out(&c, IN("S(0)R", "S(0)S(1)"), "S(0)S(1)");
  expect_illegal(&c, IN("RR", "P(sum)R"), "partial");
  /* scatter_add: the choices sharded give a partial sum */
  defaults(PLAN_OP_SCATTER_ADD, a);
  a[0].i = 8;
  a[0].present = true;
  plan_shape sc[2] = {F32(4, 6), I64(4, 6)};
  build(&c, PLAN_OP_SCATTER_ADD, sc, 2, 1, a, &DPTP);
  expect_out(&c, IN("RS(1)", "RS(1)"), "RP(sum)");
  /* moe_dispatch: groups free (tokens S(0) -> slots S(1)), tokens within a
   * group whole */
  defaults(PLAN_OP_MOE_DISPATCH, a);
  a[0].i = 4;
  a[1].i = 3;
  a[0].present = a[1].present = true;
  plan_shape di[3] = {F32(2, 5, 4), I64(2, 5, 2), F32(2, 5, 2)};
  build(&c, PLAN_OP_MOE_DISPATCH, di, 3, 1, a, &DPTP);
  expect_out(&c, IN("S(0)S(2)", "S(0)R", "S(0)R"), "S(1)S(3)");
  expect_illegal(&c, IN("S(1)R", "S(1)R", "S(1)R"), "must be replicated");
  expect_out(&c, IN("P(sum)R", "RR", "RR"), "P(sum)R");
  /* moe_combine: experts sharded reduce; groups free */
  plan_shape co[3] = {F32(4, 2, 3, 4), I64(2, 5, 2), F32(2, 5, 2)};
  build(&c, PLAN_OP_MOE_COMBINE, co, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)R", "RR", "RR"), "P(sum)R");
  expect_out(&c, IN("S(1)S(3)", "S(0)R", "S(0)R"), "S(0)S(2)");
  expect_illegal(&c, IN("RS(2)", "RR", "RR"), "must be replicated");
  /* moe_weights_grad: experts and hidden both reduce */
  plan_shape wg[3] = {F32(2, 5, 4), F32(4, 2, 3, 4), I64(2, 5, 2)};
  build(&c, PLAN_OP_MOE_WEIGHTS_GRAD, wg, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(2)", "S(0)S(3)", "RR"), "P(sum)P(sum)");
  expect_out(&c, IN("S(0)R", "S(1)R", "S(0)R"), "S(0)R");
}

/* ---- every op: all-R in, all-R out; rule structure ----------------------- */

static void test_all_ops_replicated(void **state) {
  (void)state;
  plan_attr_val a[PLAN_MAX_ATTRS];
  int64_t perm[2] = {1, 0}, shape[1] = {24}, dims[1] = {1}, sizes[2] = {2, 4};
  int64_t expand_to[3] = {2, 4, 6};
  for (int k = 0; k < PLAN_OP_COUNT; k++) {
    defaults(k, a);
    plan_shape in[3] = {F32(4, 6), F32(4, 6), F32(6)};
    int nin = 2, nout = 1;
    switch ((plan_op_kind)k) {
    case PLAN_OP_MATMUL:
      in[1] = F32(6, 3);
      break;
    case PLAN_OP_LINEAR:
      in[1] = F32(3, 6);
      in[2] = F32(3);
      nin = 3;
      break;
    case PLAN_OP_LAYERNORM:
      nin = 3;
      /* fall through */
    case PLAN_OP_RMSNORM:
      in[1] = F32(6);
      in[2] = F32(6);
      break;
    case PLAN_OP_EMBEDDING:
      in[1] = I64(3);
      break;
    case PLAN_OP_CROSS_ENTROPY:
      in[1] = I64(4);
      break;
    case PLAN_OP_PERMUTE:
      set_ints(&a[0], perm, 2);
      nin = 1;
      break;
    case PLAN_OP_RESHAPE:
      set_ints(&a[0], shape, 1);
      nin = 1;
      break;
    case PLAN_OP_REDUCE_SUM:
    case PLAN_OP_REDUCE_MEAN:
      set_ints(&a[0], dims, 1);
      nin = 1;
      break;
    case PLAN_OP_SPLIT:
      a[0].i = 1;
      set_ints(&a[1], sizes, 2);
      nin = 1;
      nout = 2;
      break;
    case PLAN_OP_EXPAND:
      set_ints(&a[0], expand_to, 3);
      nin = 1;
      break;
    case PLAN_OP_WHERE:
      in[0] = I64(4, 1);
      nin = 3;
      break;
    case PLAN_OP_REPEAT_INTERLEAVE:
      a[0].i = 2;
      a[0].present = true;
      a[1].i = 0;
      a[1].present = true;
      nin = 1;
      break;
    case PLAN_OP_TOPK:
      a[0].i = 2;
      a[0].present = true;
      nin = 1;
      nout = 2;
      break;
    case PLAN_OP_GATHER:
      in[1] = I64(4, 3);
      break;
    case PLAN_OP_ATTENTION:
      in[0] = F32(2, 4, 3, 2);
      in[1] = F32(2, 2, 5, 2);
      in[2] = F32(2, 2, 5, 3);
      nin = 3;
      break;
    case PLAN_OP_SCATTER_ADD:
      in[1] = I64(4, 6);
      a[0].i = 8;
      a[0].present = true;
      break;
    case PLAN_OP_MOE_DISPATCH:
      in[0] = F32(2, 5, 3);
      in[1] = I64(2, 5, 2);
      in[2] = F32(2, 5, 2);
      a[0].i = 4;
      a[1].i = 3;
      a[0].present = a[1].present = true;
      nin = 3;
      break;
    case PLAN_OP_MOE_COMBINE:
      in[0] = F32(4, 2, 3, 3);
      in[1] = I64(2, 5, 2);
      in[2] = F32(2, 5, 2);
      nin = 3;
      break;
    case PLAN_OP_MOE_WEIGHTS_GRAD:
      in[0] = F32(2, 5, 3);
      in[1] = F32(4, 2, 3, 3);
      in[2] = I64(2, 5, 2);
      nin = 3;
      break;
    case PLAN_OP_LAYERNORM_GRAD:
    case PLAN_OP_RMSNORM_GRAD:
      nin = 3;
      break;
    case PLAN_OP_EMBEDDING_GRAD:
      in[0] = F32(4, 3, 6);
      in[1] = I64(4, 3);
      a[0].i = 10;
      break;
    case PLAN_OP_CROSS_ENTROPY_GRAD:
      in[0] = mk(PLAN_F32, 0, NULL);
      in[1] = F32(4, 6);
      in[2] = I64(4);
      nin = 3;
      break;
    case PLAN_OP_ADD:
    case PLAN_OP_SUB:
    case PLAN_OP_MUL:
    case PLAN_OP_DIV:
    case PLAN_OP_CONCAT:
    case PLAN_OP_RELU_GRAD:
    case PLAN_OP_GELU_GRAD:
    case PLAN_OP_SILU_GRAD:
      break;
    default:
      nin = 1;
      break;
    }
    opcase c;
    build(&c, k, in, nin, nout, a, &DPTP);
    assert_int_equal(c.rule.nin, nin);
    assert_int_equal(c.rule.nout, nout);
    /* Every factor is named, every carried factor exists, no operand has
     * more factors on a dim than its rank allows. */
    for (int f = 0; f < c.rule.nfactors; f++)
      assert_true(c.rule.factors[f].name[0] != '\0');
    for (int o = 0; o < nin + nout; o++)
      for (int d = 0; d < c.rule.operand[o].rank; d++)
        for (int t = 0; t < c.rule.operand[o].nf[d]; t++)
          assert_true(c.rule.operand[o].f[d][t] < c.rule.nfactors);
    const char *rr[4] = {"RR", "RR", "RR", "RR"};
    assert_int_equal(derive(&c, rr), PLAN_OK);
    assert_string_equal(g_res, nout == 1 ? "RR" : "RR | RR");
  }
}

/* attention: batch, heads (the kv heads major, as GQA's repeat gives) and
 * the query sequence shard; the keys and the dot-product dim do not. */
static void test_attention_rule(void **state) {
  (void)state;
  opcase c;
  plan_shape in[4] = {F32(2, 4, 6, 8), F32(2, 2, 5, 8), F32(2, 2, 5, 3),
                      I64(6, 5)};
  build(&c, PLAN_OP_ATTENTION, in, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("S(0)S(1)", "S(0)S(1)", "S(0)S(1)"), "S(0)S(1)");
  /* context parallelism: the queries sharded, k and v whole */
  expect_out(&c, IN("S(0)S(2)", "S(0)R", "S(0)R"), "S(0)S(2)");
  expect_out(&c, IN("RR", "RR", "RS(3)"), "RS(3)");
  expect_illegal(&c, IN("RS(2)", "RS(2)", "RS(2)"), "(factor sk)");
  expect_illegal(&c, IN("RR", "RS(2)", "RS(2)"), "must be replicated");
  expect_illegal(&c, IN("RS(3)", "RS(3)", "RR"), "must be replicated");
  expect_illegal(&c, IN("RS(1)", "RR", "RR"), "tp");
  expect_illegal(&c, IN("P(sum)R", "RR", "RR"), "not linear");
  /* the mask follows the queries */
  build(&c, PLAN_OP_ATTENTION, in, 4, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(2)", "RR", "RR", "RS(0)"), "RS(2)");
  expect_illegal(&c, IN("RR", "RR", "RR", "RS(1)"), "must be replicated");
  /* one kv head: the query heads shard alone */
  in[1] = F32(2, 1, 5, 8);
  in[2] = F32(2, 1, 5, 3);
  build(&c, PLAN_OP_ATTENTION, in, 3, 1, NULL, &DPTP);
  expect_out(&c, IN("RS(1)", "RR", "RR"), "RS(1)");
}

static void test_rule_factors(void **state) {
  (void)state;
  opcase c;
  plan_shape in[2] = {F32(3, 8, 16), F32(16, 4)};
  build(&c, PLAN_OP_MATMUL, in, 2, 1, NULL, &DPTP);
  const plan_rule *r = &c.rule;
  assert_int_equal(r->nfactors, 4); /* b0 m k n */
  int k = r->operand[0].f[2][0];
  assert_string_equal(r->factors[k].name, "k");
  assert_int_equal(r->factors[k].kind, PLAN_FACTOR_REDUCTION);
  assert_int_equal(r->factors[k].reduce, PLAN_RED_SUM);
  assert_int_equal(r->factors[k].size, 16);
  assert_int_equal(r->operand[1].f[0][0], k);
  assert_int_equal(r->operand[1].nf[0], 1);
  /* The 2-D rhs has no batch factor; the output carries b0 m n. */
  assert_int_equal(r->operand[2].rank, 3);
  assert_string_equal(r->factors[r->operand[2].f[0][0]].name, "b0");
  assert_string_equal(r->factors[r->operand[2].f[2][0]].name, "n");
  /* reshape merge: output dim compound of two factors, major first. */
  plan_attr_val a[PLAN_MAX_ATTRS];
  defaults(PLAN_OP_RESHAPE, a);
  int64_t s[2] = {24, 5};
  set_ints(&a[0], s, 2);
  plan_shape rin[1] = {F32(4, 6, 5)};
  build(&c, PLAN_OP_RESHAPE, rin, 1, 1, a, &DPTP);
  r = &c.rule;
  assert_int_equal(r->operand[1].nf[0], 2);
  assert_int_equal(r->operand[1].f[0][0], r->operand[0].f[0][0]);
  assert_int_equal(r->operand[1].f[0][1], r->operand[0].f[1][0]);
  assert_int_equal(r->factors[r->operand[1].f[0][0]].size, 4);
  assert_int_equal(r->operand[1].f[1][0], r->operand[0].f[2][0]);
  /* linear's bias is additive. */
  plan_shape lin[3] = {F32(8, 16), F32(32, 16), F32(32)};
  build(&c, PLAN_OP_LINEAR, lin, 3, 1, NULL, &DPTP);
  assert_true(c.rule.operand[2].additive);
  assert_false(c.rule.operand[0].additive);
  /* reduce_mean's reduced factor may be stated P(avg) when even. */
  defaults(PLAN_OP_REDUCE_MEAN, a);
  int64_t d[1] = {-1};
  set_ints(&a[0], d, 1);
  build(&c, PLAN_OP_REDUCE_MEAN, lin, 1, 1, a, &DPTP);
  assert_true(c.rule.factors[c.rule.operand[0].f[1][0]].avg_if_even);
  assert_false(c.rule.factors[c.rule.operand[0].f[0][0]].avg_if_even);
  /* embedding's vocabulary is masked. */
  plan_shape emb[2] = {F32(100, 16), I64(4)};
  build(&c, PLAN_OP_EMBEDDING, emb, 2, 1, NULL, &DPTP);
  assert_int_equal(c.rule.factors[c.rule.operand[0].f[0][0]].kind,
                   PLAN_FACTOR_MASKED);
}

static void test_api_errors(void **state) {
  (void)state;
  plan_rule r;
  plan_shape in[2] = {F32(8, 16), F32(16, 4)};
  plan_shape bad[1] = {F32(8, 5)};
  assert_int_equal(plan_op_rule(&r, PLAN_OP_MATMUL, in, 2, bad, 1, NULL, g_err,
                                sizeof g_err),
                   PLAN_EINVALID);
  assert_string_equal(g_err,
                      "matmul: output 0 is [8, 5] but the op gives [8, 4]");
  assert_int_equal(plan_op_rule(&r, PLAN_OP_COUNT, in, 2, NULL, 1, NULL, g_err,
                                sizeof g_err),
                   PLAN_EINVALID);
  plan_shape badin[2] = {F32(8, 16), F32(15, 4)};
  assert_int_equal(plan_op_rule(&r, PLAN_OP_MATMUL, badin, 2, NULL, 1, NULL,
                                g_err, sizeof g_err),
                   PLAN_EINVALID);
  assert_string_equal(g_err, "matmul: contracting dims differ: 16 vs 15");
  /* outs may be NULL: the rule uses the inferred shapes. */
  assert_int_equal(plan_op_rule(&r, PLAN_OP_MATMUL, in, 2, NULL, 1, NULL, g_err,
                                sizeof g_err),
                   PLAN_OK);

  opcase c;
  build(&c, PLAN_OP_MATMUL, in, 2, 1, NULL, &DPTP);
  plan_placement pl[2], out[1];
  pl[0] = parse("S(0)R", 2, 2);
  pl[1] = parse("R", 1, 2);
  assert_int_equal(plan_rule_infer_out(&c.rule, c.kind, NULL, pl, c.m.sizes,
                                       c.m.names, out, g_err, sizeof g_err),
                   PLAN_EINVALID);
  assert_non_null(strstr(g_err, "input 1 has a placement over 1 mesh axes"));
  pl[1] = parse("RR", 2, 2);
  pl[0].ax[1].kind = PLAN_PL_S;
  pl[0].ax[1].dim = 2;
  assert_int_equal(plan_rule_infer_out(&c.rule, c.kind, NULL, pl, c.m.sizes,
                                       c.m.names, out, g_err, sizeof g_err),
                   PLAN_EINVALID);
  assert_string_equal(g_err, "matmul: input 0 is S(2) along tp but has rank 2");
  assert_int_equal(plan_rule_infer_out(NULL, c.kind, NULL, pl, c.m.sizes,
                                       c.m.names, out, g_err, sizeof g_err),
                   PLAN_EUSAGE);
  assert_int_equal(plan_rule_check(&c.rule, c.kind, NULL, pl, NULL, c.m.sizes,
                                   c.m.names, g_err, sizeof g_err),
                   PLAN_EUSAGE);
  /* Without axis names messages name axes by index. */
  pl[0] = parse("RS(0)", 2, 2);
  assert_int_equal(plan_rule_infer_out(&c.rule, c.kind, NULL, pl, c.m.sizes,
                                       NULL, out, NULL, 0),
                   PLAN_OK);
  pl[0] = parse("RP", 2, 2);
  pl[1] = parse("RP", 2, 2);
  assert_int_equal(plan_rule_infer_out(&c.rule, c.kind, NULL, pl, c.m.sizes,
                                       NULL, out, g_err, sizeof g_err),
                   PLAN_EINVALID);
  assert_non_null(strstr(g_err, "along axis 1"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_mlp),
      cmocka_unit_test(test_matmul_batch),
      cmocka_unit_test(test_add_sub),
      cmocka_unit_test(test_mul_div),
      cmocka_unit_test(test_unary_partial),
      cmocka_unit_test(test_softmax_norms),
      cmocka_unit_test(test_linear),
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_transpose_permute),
      cmocka_unit_test(test_reshape_merge),
      cmocka_unit_test(test_reshape_split),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_split_concat),
      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_nesting_order),
      cmocka_unit_test(test_uneven_and_small_axes),
      cmocka_unit_test(test_expand_rule),
      cmocka_unit_test(test_where_rule),
      cmocka_unit_test(test_repeat_interleave_rule),
      cmocka_unit_test(test_grad_op_rules),
      cmocka_unit_test(test_all_ops_replicated),
      cmocka_unit_test(test_route_rules),
      cmocka_unit_test(test_rule_factors),
      cmocka_unit_test(test_attention_rule),
      cmocka_unit_test(test_api_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
