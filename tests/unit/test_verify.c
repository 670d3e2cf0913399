/* The numerical verifier: every forward example verifies equal in both
 * modes, and bugs injected into lowered programs (the bug corpus of issue
 * 3, first entries) are caught with the right first divergent op and
 * diagnosis. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "read/plan_read.h"
#include "verify_int.h"
#include "verify_mutations.h"

static void test_examples_equal(void **state) {
  (void)state;
  static const char *const files[] = {
      "examples/mlp-megatron.plan.yaml", "examples/mlp-by-path.plan.yaml",
      "examples/transformer-block.plan.yaml", "examples/moe-experts.plan.yaml"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    for (int mode = 0; mode < 2; mode++)
      for (uint64_t seed = 0; seed < 3; seed++) {
        plan_plan *p = load(files[i]);
        plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
        o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
        o.seed = seed;
        plan_verify_report *r;
        assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
        if (!plan_verify_report_equal(r))
          fprintf(stderr, "%s", plan_verify_report_text(r));
        assert_true(plan_verify_report_equal(r));
        assert_null(plan_verify_report_first_op(r));
        plan_verify_report_free(r);
        plan_free(p);
      }
}

/* --dtype: every example verifies at bf16 and f16 in float mode (the
 * low-precision bound decides), and only float dtypes are taken. */
static void test_run_dtype(void **state) {
  (void)state;
  static const char *const files[] = {"examples/mlp-megatron.plan.yaml",
                                      "examples/transformer-block.plan.yaml",
                                      "examples/moe-experts.plan.yaml"};
  static const char *const dts[] = {"bf16", "f16", "f64"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    for (size_t d = 0; d < 3; d++)
      for (uint64_t seed = 0; seed < 2; seed++) {
        plan_plan *p = load(files[i]);
        plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
        o.mode = PLAN_VERIFY_FLOAT;
        o.seed = seed;
        o.dtype = dts[d];
        plan_verify_report *r;
        assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
        if (!plan_verify_report_equal(r))
          fprintf(stderr, "%s %s: %s", files[i], dts[d],
                  plan_verify_report_text(r));
        assert_true(plan_verify_report_equal(r));
        plan_verify_report_free(r);
        plan_free(p);
      }
  plan_plan *p = load(files[0]);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  o.dtype = "i32";
  plan_verify_report *r;
  assert_int_equal(plan_verify(&r, p, &o), PLAN_EUSAGE);
  assert_null(r);
  plan_free(p);
}

static void test_collective_counts(void **state) {
  (void)state;
  plan_plan *p = load("examples/transformer-block.plan.yaml");
  plan_verify_report *r;
  assert_int_equal(plan_verify(&r, p, NULL), PLAN_OK);
  /* sequence parallel: an all-gather before each column-parallel block and
   * a reduce-scatter after each row-parallel one */
  assert_int_equal(plan_verify_report_collectives(r, "all_gather"), 2);
  assert_int_equal(plan_verify_report_collectives(r, "reduce_scatter"), 2);
  assert_int_equal(plan_verify_report_collectives(r, "all_reduce"), 0);
  plan_verify_report_free(r);
  plan_free(p);
}

static plan_verify_report *run_mutated(const char *file, mutation m,
                                       plan_plan **pp) {
  plan_plan *p = load(file);
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  m(l);
  plan_verify_report *r;
  assert_int_equal(plan_verify_lowered(&r, p, l, NULL), PLAN_OK);
  *pp = p;
  return r;
}

static void test_dropped_all_reduce(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/mlp-megatron.plan.yaml", drop_all_reduce, &p);
  assert_false(plan_verify_report_equal(r));
  assert_string_equal(plan_verify_report_first_tensor(r), "y");
  assert_non_null(strstr(plan_verify_report_diagnosis(r), "partial sums"));
  assert_non_null(strstr(plan_verify_report_diagnosis(r), "'tp'"));
  plan_verify_report_free(r);
  plan_free(p);
}

/* Bug: a mean where a sum was needed. */
static void mean_not_sum(plan_lowered *l) {
  plan_lstep *s = find_step(l, PLAN_REDIST_ALL_REDUCE);
  assert_non_null(s);
  s->redist.reduce = PLAN_RED_AVG;
}

static void test_mean_where_sum(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/mlp-megatron.plan.yaml", mean_not_sum, &p);
  assert_false(plan_verify_report_equal(r));
  assert_non_null(strstr(plan_verify_report_diagnosis(r), "1/2"));
  plan_verify_report_free(r);
  plan_free(p);
}

static void test_wrong_axis(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/transformer-block.plan.yaml", wrong_axis, &p);
  assert_false(plan_verify_report_equal(r));
  /* the projection's own output is right; its first consumer is not */
  assert_string_equal(plan_verify_report_first_op(r), "block.res1");
  plan_verify_report_free(r);
  plan_free(p);
}

static void test_gather_left_out(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/transformer-block.plan.yaml", skip_gather, &p);
  assert_false(plan_verify_report_equal(r));
  assert_string_equal(plan_verify_report_first_op(r), "block.attn.qkv");
  plan_verify_report_free(r);
  plan_free(p);
}

/* Bug: the first all-gather concatenates the group in reverse rank order;
 * and a variant where every position gets rank 0's block. */
static void set_gather_order(plan_lowered *l, bool duplicate) {
  plan_lstep *s = find_step(l, PLAN_REDIST_ALL_GATHER);
  assert_non_null(s);
  int64_t k = l->plan->mesh.axis_sizes[s->redist.axis];
  s->group_order = plan_arena_alloc(&l->arena, sizeof(int64_t) * (size_t)k);
  assert_non_null(s->group_order);
  for (int64_t m = 0; m < k; m++)
    s->group_order[m] = duplicate ? 0 : k - 1 - m;
}
static void reverse_gather(plan_lowered *l) {
  set_gather_order(l, false);
}
static void duplicate_gather(plan_lowered *l) {
  set_gather_order(l, true);
}

static void test_gather_order(void **state) {
  (void)state;
  mutation ms[2] = {reverse_gather, duplicate_gather};
  const char *words[2] = {"wrong order", "copies of other pieces"};
  for (int i = 0; i < 2; i++) {
    plan_plan *p;
    plan_verify_report *r =
        run_mutated("examples/transformer-block.plan.yaml", ms[i], &p);
    assert_false(plan_verify_report_equal(r));
    /* the gathered activations feed the QKV projection first */
    assert_non_null(strstr(plan_verify_report_first_op(r), "qkv"));
    if (!strstr(plan_verify_report_diagnosis(r), words[i]))
      fprintf(stderr, "%s\n", plan_verify_report_diagnosis(r));
    assert_non_null(strstr(plan_verify_report_diagnosis(r), words[i]));
    plan_verify_report_free(r);
    plan_free(p);
  }
}

/* Bug: the all-to-all that moves the dispatched slots from token groups to
 * experts is left out: each rank keeps the slots it already held, zeros
 * for the rest. The experts' first matmul reads the wrong slots; in
 * training the loss and every gradient follow. */
static void skip_all_to_all(plan_lowered *l) {
  plan_lstep *s = find_step(l, PLAN_REDIST_ALL_TO_ALL);
  assert_non_null(s);
  s->redist.kind = PLAN_REDIST_RELABEL;
}

static void test_moe_all_to_all_left_out(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/moe-train.plan.yaml", skip_all_to_all, &p);
  assert_false(plan_verify_report_equal(r));
  const char *first = plan_verify_report_first_op(r);
  if (strcmp(first, "experts.fc1"))
    fprintf(stderr, "first op %s: %s\n", first,
            plan_verify_report_diagnosis(r));
  assert_string_equal(first, "experts.fc1");
  plan_verify_report_free(r);
  plan_free(p);
}

/* A group order survives writing and reading, counts in the hash, and is
 * run as written. */
static void test_gather_order_file(void **state) {
  (void)state;
  plan_plan *p = load("examples/transformer-block.plan.yaml");
  plan_lowered *l, *l2;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  plan_hash h0, h1;
  assert_int_equal(plan_lowered_hash(&h0, l), PLAN_OK);
  reverse_gather(l);
  assert_int_equal(plan_lowered_hash(&h1, l), PLAN_OK);
  assert_false(plan_hash_equal(h0, h1));
  char *text;
  size_t n;
  assert_int_equal(plan_lowered_write(&text, &n, l), PLAN_OK);
  assert_non_null(strstr(text, "order: [1, 0]"));
  assert_int_equal(
      plan_lowered_load_buffer(&l2, text, n, "low.yaml", "examples"), PLAN_OK);
  plan_lowered_free(l);
  plan_verify_report *r;
  assert_int_equal(plan_verify_lowered(&r, l2->plan, l2, NULL), PLAN_OK);
  assert_false(plan_verify_report_equal(r));
  assert_non_null(strstr(plan_verify_report_diagnosis(r), "wrong order"));
  plan_verify_report_free(r);
  free(text);
  plan_free(p);
}

static void test_reports(void **state) {
  (void)state;
  plan_plan *p;
  plan_verify_report *r =
      run_mutated("examples/mlp-megatron.plan.yaml", drop_all_reduce, &p);
  char *t;
  size_t n;
  assert_int_equal(plan_verify_report_write(&t, &n, r, "json"), PLAN_OK);
  assert_non_null(strstr(t, "\"schema\": \"libplan-verify/1\""));
  assert_non_null(strstr(t, "\"verdict\": \"not_equal\""));
  assert_non_null(strstr(t, "\"diagnosis\": \"the ranks along 'tp'"));
  assert_int_equal(strlen(t), n);
  free(t);
  assert_int_equal(plan_verify_report_write(&t, &n, r, "yaml"), PLAN_OK);
  assert_non_null(strstr(t, "verdict: not_equal\n"));
  free(t);
  assert_int_equal(plan_verify_report_write(&t, &n, r, "junit"), PLAN_OK);
  assert_non_null(strstr(t, "failures=\"1\""));
  assert_non_null(strstr(t, "<failure message="));
  free(t);
  assert_int_equal(plan_verify_report_write(&t, &n, r, "pdf"), PLAN_EUSAGE);
  assert_null(t);
  plan_verify_report_free(r);
  plan_free(p);
}

/* Lowered files: write, read, write is the identity; the hash survives;
 * the read program verifies equal. */
static void test_lowered_files(void **state) {
  (void)state;
  static const char *const files[] = {"examples/mlp-megatron.plan.yaml",
                                      "examples/transformer-block.plan.yaml",
                                      "examples/moe-experts.plan.yaml"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    plan_plan *p = load(files[i]);
    plan_lowered *l, *l2;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    char *t1, *t2;
    size_t n1, n2;
    assert_int_equal(plan_lowered_write(&t1, &n1, l), PLAN_OK);
    assert_true(plan_is_lowered_text(t1, n1));
    assert_int_equal(
        plan_lowered_load_buffer(&l2, t1, n1, "low.yaml", "examples"), PLAN_OK);
    assert_int_equal(plan_lowered_write(&t2, &n2, l2), PLAN_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(t1, t2, n1);
    plan_hash h1, h2;
    assert_int_equal(plan_lowered_hash(&h1, l), PLAN_OK);
    assert_int_equal(plan_lowered_hash(&h2, l2), PLAN_OK);
    assert_true(plan_hash_equal(h1, h2));
    plan_lowered_free(l);
    plan_verify_report *r;
    assert_int_equal(plan_verify_lowered(&r, l2->plan, l2, NULL), PLAN_OK);
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
    free(t1);
    free(t2);
    plan_free(p);
  }
}

/* Float mode, bf16: the ranks round their partial sums to bf16 before the
 * all-reduce, so a correct row-parallel matmul differs element by element
 * from the single-device program, but it is accepted by the f64-reference
 * bound. The bound must not forgive a real bug: the same plan with its
 * all-reduce dropped stays NOT EQUAL. */
static const char rowpar_bf16[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: rowpar\n"
    "  tensors:\n"
    "    a: {shape: [4, 16], dtype: bf16, role: input}\n"
    "    b: {shape: [16, 8], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: mm, op: matmul, in: [a, b], out: y}\n"
    "  outputs: [y]\n"
    "mesh: {axes: [tp=2]}\n"
    "placements: {a: S(1), b: S(0)}\n"
    "strategies:\n"
    "  mm: {in: [S(1), S(0)], out: P(sum)}\n";

/* The all-reduce of p dropped is NOT EQUAL under options o, diagnosed as
 * partial sums. */
static void assert_partial_sums_caught(const plan_plan *p,
                                       const plan_verify_options *o) {
  plan_lowered *l;
  plan_verify_report *r;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  drop_all_reduce(l);
  assert_int_equal(plan_verify_lowered(&r, p, l, o), PLAN_OK);
  assert_false(plan_verify_report_equal(r));
  assert_non_null(strstr(plan_verify_report_diagnosis(r), "partial sums"));
  plan_verify_report_free(r);
}

static void test_low_precision_bound(void **state) {
  (void)state;
  plan_plan *p = NULL;
  assert_int_equal(plan_load_buffer(&p, rowpar_bf16, strlen(rowpar_bf16),
                                    "rowpar.plan.yaml", "."),
                   PLAN_OK);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  plan_verify_report *r;
  assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
  assert_true(plan_verify_report_equal(r));
  /* seed 0 puts elements outside bf16's per-element tolerance */
  assert_non_null(strstr(plan_verify_report_text(r), "within bound"));
  plan_verify_report_free(r);

  assert_partial_sums_caught(p, &o);
  plan_free(p);
}

/* The depth bound: with an elementwise tolerance far below the reduction
 * order's rounding (rtol 1e-300), f32 and f64 plans still verify, each
 * tensor within eps = 8 u sqrt(reduction length); a dropped all-reduce,
 * under the same tolerance, does not. */
static void test_depth_bound(void **state) {
  (void)state;
  static const char *const dts[] = {"f32", "f64"};
  for (int d = 0; d < 2; d++) {
    plan_plan *p = load("examples/transformer-block.plan.yaml");
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = PLAN_VERIFY_FLOAT;
    o.rtol = 1e-300;
    o.dtype = dts[d];
    plan_verify_report *r;
    assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
    if (!plan_verify_report_equal(r))
      fprintf(stderr, "%s", plan_verify_report_text(r));
    assert_true(plan_verify_report_equal(r));
    if (d == 0) /* f32: the reduction order shows */
      assert_non_null(strstr(plan_verify_report_text(r), "depth bound"));
    plan_verify_report_free(r);
    plan_free(p);

    p = load("examples/mlp-megatron.plan.yaml");
    assert_partial_sums_caught(p, &o);
    plan_free(p);
  }
}

/* Per-tensor tolerances: a glob that covers the broken tensor hides its
 * mismatch (the first divergence moves on); one that covers another
 * tensor changes nothing. Options of version 2 still work. */
/* The runner option (version 4): NULL and "cpu" run the CPU runner and
 * say so; an unknown name is a usage error; "cuda" without its plugin
 * cannot run here and says why; a version-3 caller's struct ends before
 * the field, which is not read. */
static void test_runner_option(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  plan_verify_report *r;
  assert_int_equal(o.version, 6);
  assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
  assert_string_equal(plan_verify_report_runner(r), "cpu");
  assert_true(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  o.runner = "cpu";
  assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
  assert_string_equal(plan_verify_report_runner(r), "cpu");
  plan_verify_report_free(r);
  o.runner = "tpu";
  assert_int_equal(plan_verify(&r, p, &o), PLAN_EUSAGE);
  assert_null(r);
  assert_non_null(strstr(plan_error_last()->message, "no runner named 'tpu'"));
  o.version = 3; /* the runner field is past a version-3 struct */
  assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
  assert_string_equal(plan_verify_report_runner(r), "cpu");
  plan_verify_report_free(r);
  o.version = 7;
  assert_int_equal(plan_verify(&r, p, &o), PLAN_EUSAGE);
  o.version = 4;
  o.runner = "cuda";
  setenv("PLAN_CUDA_PLUGIN", "/nonexistent/libplan-cuda.so", 1);
  assert_int_equal(plan_verify(&r, p, &o), PLAN_EUNSUPPORTED);
  assert_null(r);
  assert_non_null(strstr(plan_error_last()->message,
                         "plugin /nonexistent/libplan-cuda.so (from "
                         "PLAN_CUDA_PLUGIN) not found"));
  unsetenv("PLAN_CUDA_PLUGIN");
  plan_free(p);
}

static void test_tensor_tolerances(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    plan_plan *p = load("examples/transformer-block.plan.yaml");
    plan_lowered *l;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    wrong_axis(l);
    plan_verify_tolerance tol[] = {{"nothing.*", 0, 0},
                                   {k == 1 ? "r*" : "h*", 1e9, 1e9}};
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = PLAN_VERIFY_FLOAT;
    if (k == 2) {
      o.version = 2; /* no tolerances field read */
    } else {
      o.tolerances = tol;
      o.ntolerances = 2;
    }
    plan_verify_report *r;
    assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
    assert_false(plan_verify_report_equal(r));
    /* r1 (block.res1) is the first wrong tensor; with r* loose, ln2's h2 */
    assert_string_equal(plan_verify_report_first_op(r),
                        k == 1 ? "block.ln2" : "block.res1");
    plan_verify_report_free(r);
    plan_free(p);
  }
}

/* A runner whose padded all-gather unpads uneven shards wrongly: it pads
 * every block along the gathered dim to the chunk size, gathers, and then
 * keeps piece lengths computed as "floor(n/k), the remainder on the last
 * rank" instead of torch.chunk's: for 5 rows over 2 ranks it keeps 2 rows
 * of the first piece and 3 of the second, the last of them padding. */
static int unpad_wrongly(void *user, const plan_lowered *l, int step,
                         int64_t mb, plan_vblock *const *bufs) {
  (void)mb;
  int *hits = user;
  const plan_lstep *s = &l->steps[step];
  if (s->kind != PLAN_LSTEP_REDIST || s->redist.kind != PLAN_REDIST_ALL_GATHER)
    return 0;
  const plan_mesh *m = &l->plan->mesh;
  int64_t k = m->axis_sizes[s->redist.axis];
  int dim = s->redist.dim;
  const plan_tensor *t = &l->plan->program->tensors[l->bufs[s->out[0]].tensor];
  int64_t len = t->dims[dim], chunk = (len + k - 1) / k;
  if (t->rank != 2 || dim != 0 || len % k == 0 || m->naxes != 1)
    return 0;
  int64_t cols = t->dims[1];
  for (int64_t r = 0; r < m->ndevices; r++) {
    plan_vblock *out = &bufs[s->out[0]][r];
    int64_t at = 0;
    for (int64_t q = 0; q < k; q++) {
      const plan_vblock *in = &bufs[s->in[0]][q];
      int64_t keep = q < k - 1 ? len / k : len - (len / k) * (k - 1);
      for (int64_t i = 0; i < keep && at < len; i++, at++)
        for (int64_t j = 0; j < cols; j++) /* past the block: padding */
          out->data[at * cols + j] =
              i < in->local[0] && i < chunk ? in->data[i * cols + j] : 0;
    }
  }
  (*hits)++;
  return 0;
}

/* Bug: uneven shards unpadded wrongly by the runner's all-gather. The
 * first op that reads the gathered rows diverges, and the diagnosis names
 * the shift and the uneven shard it came from. */
static void test_uneven_unpadded_wrongly(void **state) {
  (void)state;
  static const char text[] =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  name: uneven\n"
      "  tensors:\n"
      "    x: {shape: [5, 4], role: input}\n"
      "    w: {shape: [4, 6], role: param}\n"
      "  ops:\n"
      "    - {name: mm, op: matmul, in: [x, w], out: y}\n"
      "  outputs: [y]\n"
      "mesh: {axes: [dp=2]}\n"
      "placements: {x: S(0), w: R}\n"
      "strategies:\n"
      "  mm: {in: [R, R], out: R}\n";
  plan_plan *p = NULL;
  assert_int_equal(
      plan_load_buffer(&p, text, sizeof text - 1, "uneven.yaml", "."), PLAN_OK);
  for (int bug = 0; bug < 2; bug++) {
    plan_lowered *l;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    int hits = 0;
    plan_verify_report *r;
    assert_int_equal(plan_verify_lowered_hooked(
                         &r, p, l, NULL, bug ? unpad_wrongly : NULL, &hits),
                     PLAN_OK);
    assert_int_equal(hits, bug);
    assert_int_equal(plan_verify_report_equal(r), !bug);
    if (bug) {
      assert_string_equal(plan_verify_report_first_op(r), "mm");
      const char *d = plan_verify_report_diagnosis(r);
      assert_non_null(strstr(d, "along dim 0 of 'y'"));
      assert_non_null(strstr(d, "2<-3, 3<-4, 4<-zeros"));
      assert_non_null(
          strstr(d, "'x' is sharded unevenly (dim 0, 5 over 'dp')"));
    }
    plan_verify_report_free(r);
  }
  plan_free(p);
}

static void test_not_lowered_yet(void **state) {
  (void)state;
  plan_plan *p = load("spec/vectors/valid/regions.yaml"); /* manual region */
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify(&r, p, NULL), PLAN_EUNSUPPORTED);
  assert_null(r);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples_equal),
      cmocka_unit_test(test_collective_counts),
      cmocka_unit_test(test_run_dtype),
      cmocka_unit_test(test_dropped_all_reduce),
      cmocka_unit_test(test_gather_order),
      cmocka_unit_test(test_moe_all_to_all_left_out),
      cmocka_unit_test(test_gather_order_file),
      cmocka_unit_test(test_low_precision_bound),
      cmocka_unit_test(test_mean_where_sum),
      cmocka_unit_test(test_wrong_axis),
      cmocka_unit_test(test_gather_left_out),
      cmocka_unit_test(test_reports),
      cmocka_unit_test(test_lowered_files),
      cmocka_unit_test(test_uneven_unpadded_wrongly),
      cmocka_unit_test(test_depth_bound),
      cmocka_unit_test(test_tensor_tolerances),
      cmocka_unit_test(test_runner_option),
      cmocka_unit_test(test_not_lowered_yet),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
