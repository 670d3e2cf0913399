/* Unit tests for a program's views by index (libplan/program.h): every
 * field of plan_program_tensor_info and plan_program_op_info against the
 * accessors that read one field each and against the program text, through
 * the public headers alone; a bad index or a NULL is PLAN_EUSAGE and
 * leaves the struct as it was. And an op's sharding factors (ops.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "libplan/libplan.h"

static const char *const text =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  tensors:\n"
    "    x: {shape: [batch=2, 4], dtype: bf16}\n"
    "    ids: {shape: [2], dtype: i64, range: [3, 9]}\n"
    "    w: {shape: [4, 6], dtype: bf16, role: param}\n"
    "    mask: {shape: [2, batch=2], role: const, init: {recipe: "
    "causal_mask, "
    "fill: -7}}\n"
    "    cos: {shape: [2, 6], role: const, init: {recipe: rope_cos, "
    "theta: 500}}\n"
    "  ops:\n"
    "    - {name: fc, op: matmul, in: [x, w], out: y}\n"
    "    - {name: sum, op: reduce_sum, in: [y], out: loss, attrs: {dims: [0, "
    "1]}}\n"
    "  loss: loss\n";

static plan_program *load(void) {
  plan_program *p = NULL;
  assert_int_equal(plan_program_load_buffer(&p, text, strlen(text), "views"),
                   PLAN_OK);
  return p;
}

static void test_tensors(void **state) {
  (void)state;
  plan_program *p = load();
  int n = plan_program_tensor_count(p);
  assert_true(n >= 7);
  for (int t = 0; t < n; t++) {
    plan_program_tensor_info ti;
    assert_int_equal(plan_program_tensor(&ti, p, t), PLAN_OK);
    assert_string_equal(ti.name, plan_program_tensor_name(p, t));
    int64_t dims[8];
    assert_int_equal(ti.rank, plan_program_tensor_shape(p, t, dims, 8));
    for (int d = 0; d < ti.rank; d++)
      assert_int_equal(ti.dims[d], dims[d]);
    assert_string_equal(plan_dtype_name((plan_dtype)ti.dtype),
                        plan_program_tensor_dtype(p, t));
    static const char *const roles[] = {"input", "param", "const", "activation",
                                        "output"};
    assert_true(ti.role >= 0 && ti.role < PLAN_ROLE_COUNT);
    assert_string_equal(roles[ti.role], plan_program_tensor_role(p, t));
    assert_int_equal(ti.producer, plan_program_tensor_producer(p, t));
    if (ti.producer >= 0)
      assert_int_equal(plan_program_op_output(p, ti.producer, ti.producer_slot),
                       t);
    else
      assert_int_equal(ti.producer_slot, -1);
  }
  plan_program_tensor_info ti;
  assert_int_equal(
      plan_program_tensor(&ti, p, plan_program_tensor_find(p, "ids")), PLAN_OK);
  assert_int_equal(ti.has_range, 1);
  assert_int_equal(ti.range_lo, 3);
  assert_int_equal(ti.range_hi, 9);
  assert_int_equal(ti.recipe, PLAN_RECIPE_NONE);
  assert_int_equal(
      plan_program_tensor(&ti, p, plan_program_tensor_find(p, "x")), PLAN_OK);
  assert_int_equal(ti.has_range, 0);
  assert_int_equal(ti.dtype, PLAN_BF16);
  assert_int_equal(ti.role, PLAN_ROLE_INPUT);
  assert_int_equal(
      plan_program_tensor(&ti, p, plan_program_tensor_find(p, "mask")),
      PLAN_OK);
  assert_int_equal(ti.role, PLAN_ROLE_CONST);
  assert_int_equal(ti.recipe, PLAN_RECIPE_CAUSAL_MASK);
  assert_true(ti.recipe_fill == -7.0);
  assert_int_equal(
      plan_program_tensor(&ti, p, plan_program_tensor_find(p, "cos")), PLAN_OK);
  assert_int_equal(ti.recipe, PLAN_RECIPE_ROPE_COS);
  assert_true(ti.recipe_theta == 500.0);
  assert_int_equal(
      plan_program_tensor(&ti, p, plan_program_tensor_find(p, "loss")),
      PLAN_OK);
  assert_int_equal(ti.rank, 0);
  assert_int_equal(plan_program_loss(p), plan_program_tensor_find(p, "loss"));
  assert_int_equal(plan_program_loss(NULL), -1);
  /* the dim microbatches split: the named batch dim (of a const too), else
   * dim 0 of an input; none for a param, a scalar or a bad index */
  static const struct {
    const char *name;
    int dim;
  } batch[] = {{"x", 0},    {"ids", 0},  {"w", -1},
               {"mask", 1}, {"cos", -1}, {"loss", -1}};
  for (size_t i = 0; i < sizeof batch / sizeof batch[0]; i++)
    assert_int_equal(plan_program_tensor_batch_dim(
                         p, plan_program_tensor_find(p, batch[i].name)),
                     batch[i].dim);
  assert_int_equal(plan_program_tensor_batch_dim(p, n), -1);
  assert_int_equal(plan_program_tensor_batch_dim(NULL, 0), -1);
  /* a bad index or NULL: PLAN_EUSAGE, the struct as it was */
  memset(&ti, 0x5a, sizeof ti);
  plan_program_tensor_info before = ti;
  assert_int_equal(plan_program_tensor(&ti, p, n), PLAN_EUSAGE);
  assert_int_equal(plan_program_tensor(&ti, p, -1), PLAN_EUSAGE);
  assert_int_equal(plan_program_tensor(&ti, NULL, 0), PLAN_EUSAGE);
  assert_memory_equal(&ti, &before, sizeof ti);
  assert_int_equal(plan_program_tensor(NULL, p, 0), PLAN_EUSAGE);
  plan_program_free(p);
}

static void test_ops(void **state) {
  (void)state;
  plan_program *p = load();
  int n = plan_program_op_count(p);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) {
    plan_program_op_info oi;
    assert_int_equal(plan_program_op(&oi, p, i), PLAN_OK);
    assert_string_equal(oi.name, plan_program_op_name(p, i));
    assert_string_equal(plan_op_kind_name(oi.kind), plan_program_op_kind(p, i));
    assert_int_equal(oi.nin, plan_program_op_input_count(p, i));
    assert_int_equal(oi.nout, plan_program_op_output_count(p, i));
    for (int j = 0; j < oi.nin; j++)
      assert_int_equal(oi.in[j], plan_program_op_input(p, i, j));
    for (int k = 0; k < oi.nout; k++)
      assert_int_equal(oi.out[k], plan_program_op_output(p, i, k));
  }
  /* reduce_sum's dims attribute, in its schema's slot */
  plan_program_op_info oi;
  assert_int_equal(plan_program_op(&oi, p, plan_program_op_find(p, "sum")),
                   PLAN_OK);
  int na = 0;
  const plan_attr_spec *spec = plan_op_attrs(oi.kind, &na);
  int slot = -1;
  for (int a = 0; a < na; a++)
    if (!strcmp(spec[a].name, "dims"))
      slot = a;
  assert_true(slot >= 0);
  assert_non_null(oi.attrs);
  assert_int_equal(oi.attrs[slot].nints, 2);
  assert_int_equal(oi.attrs[slot].ints[1], 1);
  memset(&oi, 0x5a, sizeof oi);
  plan_program_op_info before = oi;
  assert_int_equal(plan_program_op(&oi, p, n), PLAN_EUSAGE);
  assert_int_equal(plan_program_op(&oi, NULL, 0), PLAN_EUSAGE);
  assert_memory_equal(&oi, &before, sizeof oi);
  assert_int_equal(plan_program_op(NULL, p, 0), PLAN_EUSAGE);
  plan_program_free(p);
}

static plan_shape shape(int rank, const int64_t *dims) {
  plan_shape s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  s.dtype = PLAN_F32;
  for (int d = 0; d < rank; d++)
    s.dims[d] = dims[d];
  return s;
}

static void test_factors(void **state) {
  (void)state;
  /* matmul [4, 6] x [6, 8]: m and n free, k (6) summed */
  plan_shape in[2] = {shape(2, (int64_t[]){4, 6}), shape(2, (int64_t[]){6, 8})};
  plan_shape out[1] = {shape(2, (int64_t[]){4, 8})};
  plan_op_factor f[PLAN_MAX_FACTORS];
  char err[128] = "";
  int n = plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_MATMUL, NULL, in, 2, out,
                          1, err, sizeof err);
  assert_int_equal(n, 3);
  int64_t free_product = 1;
  int nred = 0;
  for (int i = 0; i < n; i++) {
    assert_true(f[i].name[0] != 0);
    if (f[i].kind == PLAN_FACTOR_REDUCTION) {
      nred++;
      assert_int_equal(f[i].size, 6);
      assert_int_equal(f[i].reduce, PLAN_RED_SUM);
    } else {
      assert_int_equal(f[i].kind, PLAN_FACTOR_FREE);
      assert_int_equal(f[i].reduce, -1);
      free_product *= f[i].size;
    }
  }
  assert_int_equal(nred, 1);
  assert_int_equal(free_product, 32);
  /* fewer slots than factors: the count, and only that many written */
  plan_op_factor one[2];
  memset(one, 0x5a, sizeof one);
  plan_op_factor untouched = one[1];
  assert_int_equal(
      plan_op_factors(one, 1, PLAN_OP_MATMUL, NULL, in, 2, out, 1, NULL, 0), 3);
  assert_memory_equal(&one[1], &untouched, sizeof untouched);
  assert_int_equal(
      plan_op_factors(NULL, 0, PLAN_OP_MATMUL, NULL, in, 2, out, 1, NULL, 0),
      3);
  /* softmax over its last dim: that dim needs replication */
  plan_shape x[1] = {shape(2, (int64_t[]){3, 5})};
  n = plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_SOFTMAX, NULL, x, 1, x, 1,
                      err, sizeof err);
  assert_int_equal(n, 2);
  int nrep = 0;
  for (int i = 0; i < n; i++)
    if (f[i].kind == PLAN_FACTOR_NEED_REPLICATION) {
      nrep++;
      assert_int_equal(f[i].size, 5);
    }
  assert_int_equal(nrep, 1);
  /* shapes that do not fit, a bad kind, NULL arrays */
  in[1] = shape(2, (int64_t[]){7, 8});
  err[0] = 0;
  assert_int_equal(plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_MATMUL, NULL,
                                   in, 2, out, 1, err, sizeof err),
                   PLAN_EINVALID);
  assert_true(err[0] != 0);
  assert_int_equal(plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_COUNT, NULL, in,
                                   2, out, 1, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_MATMUL, NULL,
                                   NULL, 2, out, 1, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(plan_op_factors(NULL, 4, PLAN_OP_MATMUL, NULL, in, 2, out, 1,
                                   err, sizeof err),
                   PLAN_EUSAGE);
}

/* Linear kinds, and a strategy against a matmul's rule on a dp x tp mesh. */
static void test_rule_checks(void **state) {
  (void)state;
  assert_int_equal(plan_op_kind_linear(PLAN_OP_MATMUL), 1);
  assert_int_equal(plan_op_kind_linear(PLAN_OP_ADD), 1);
  assert_int_equal(plan_op_kind_linear(PLAN_OP_RESHAPE), 1);
  assert_int_equal(plan_op_kind_linear(PLAN_OP_RELU), 0);
  assert_int_equal(plan_op_kind_linear(PLAN_OP_SOFTMAX), 0);
  assert_int_equal(plan_op_kind_linear(-1), -1);
  assert_int_equal(plan_op_kind_linear(PLAN_OP_COUNT), -1);
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, "examples/mlp-megatron.plan.yaml"), PLAN_OK);
  assert_int_equal(plan_mesh_axis_count(p), 2); /* dp=2, tp=2 */
  plan_shape in[2] = {shape(2, (int64_t[]){4, 8}), shape(2, (int64_t[]){8, 6})};
  plan_shape out[1] = {shape(2, (int64_t[]){4, 6})};
  static const struct {
    const char *x, *w, *y;
    int rc;
  } cases[] = {
      {"S(0)R", "RS(1)", "S(0)S(1)", PLAN_OK},      /* column parallel */
      {"S(0)S(1)", "RS(0)", "S(0)P(sum)", PLAN_OK}, /* row parallel */
      {"S(0)S(1)", "RR", "S(0)R", PLAN_EINVALID},   /* k sharded on x only */
      {"S(0)R", "RS(1)", "S(0)R", PLAN_EINVALID},   /* not what it derives */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    plan_placement pin[2], pout[1];
    assert_int_equal(plan_placement_parse_text(&pin[0], cases[i].x, 2), 0);
    assert_int_equal(plan_placement_parse_text(&pin[1], cases[i].w, 2), 0);
    assert_int_equal(plan_placement_parse_text(&pout[0], cases[i].y, 2), 0);
    assert_int_equal(plan_placement_resolve(&pin[0], 2), 0);
    assert_int_equal(plan_placement_resolve(&pin[1], 2), 0);
    assert_int_equal(plan_placement_resolve(&pout[0], 2), 0);
    char err[256] = "";
    int rc = plan_op_check_placements(p, PLAN_OP_MATMUL, NULL, in, pin, 2, out,
                                      pout, 1, err, sizeof err);
    if (rc != cases[i].rc)
      fail_msg("%s x %s -> %s: %d (%s)", cases[i].x, cases[i].w, cases[i].y, rc,
               err);
    assert_true(rc == PLAN_OK || err[0] != 0);
  }
  plan_placement r[2];
  assert_int_equal(plan_placement_parse_text(&r[0], "RR", 2), 0);
  r[1] = r[0];
  assert_int_equal(plan_op_check_placements(NULL, PLAN_OP_MATMUL, NULL, in, r,
                                            2, out, r, 1, NULL, 0),
                   PLAN_EUSAGE);
  assert_int_equal(plan_op_check_placements(p, PLAN_OP_COUNT, NULL, in, r, 2,
                                            out, r, 1, NULL, 0),
                   PLAN_EUSAGE);
  assert_int_equal(plan_op_check_placements(p, PLAN_OP_MATMUL, NULL, in, NULL,
                                            2, out, r, 1, NULL, 0),
                   PLAN_EUSAGE);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tensors),
      cmocka_unit_test(test_ops),
      cmocka_unit_test(test_factors),
      cmocka_unit_test(test_rule_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
