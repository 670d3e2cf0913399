/* The verifier's checks of each step on its own (docs/verify.md, "Op-local
 * checks"): a consumer reading a partial buffer deep in a bf16 chain is
 * caught at its op in float mode while the unmutated chain verifies equal
 * (its end-to-end drift is rounding); a replica that drifts by one ulp is
 * reported with both ranks; a faulty kernel in a pipeline's stage, too
 * small for the end-to-end comparison, is caught by its op's own check on
 * each microbatch; a gathered buffer that is in no layout is compared. */
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

#define DEEP_BF16 "examples/models/llama-32l.recipe.plan.yaml"

/* The deep bf16 model, reduced and lowered. */
static plan_lowered *deep_lowered(plan_plan **pp) {
  plan_plan *p = load(DEEP_BF16), *small = NULL;
  char *summary = NULL;
  assert_int_equal(plan_reduce_shapes(&small, &summary, p), PLAN_OK);
  free(summary);
  plan_free(p);
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, small), PLAN_OK);
  *pp = small;
  return l;
}

/* Bug: op `name` reads, in place of an all-reduce's result, the partial
 * sums that all-reduce reduced (same tensor, same block shape). */
static void read_partial(plan_lowered *l, const plan_program *prog,
                         const char *name) {
  for (int j = 0; j < l->nsteps; j++) {
    plan_lstep *u = &l->steps[j];
    if (u->kind != PLAN_LSTEP_OP || strcmp(prog->ops[u->op].name, name))
      continue;
    for (int i = 0; i < j; i++) {
      const plan_lstep *s = &l->steps[i];
      for (int k = 0; k < u->nin; k++)
        if (s->kind == PLAN_LSTEP_REDIST &&
            s->redist.kind == PLAN_REDIST_ALL_REDUCE && u->in[k] == s->out[0]) {
          u->in[k] = s->in[0];
          return;
        }
    }
  }
  fail_msg("op '%s' reads no all-reduce's result", name);
}

static plan_verify_report *verify_float(const plan_plan *p, plan_lowered *l,
                                        uint64_t seed) {
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  o.seed = seed;
  plan_verify_report *r;
  assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
  return r;
}

/* The unmutated model is equal at seeds 0 and 2 (seed 2, at these reduced
 * shapes, has tensors accepted only by the op-local bound: the kind of
 * seed that was a false alarm before it). Layer 28's residual
 * add reading the down projection's partial sums, seven eighths of the way
 * down, was EQUAL at seed 0 before the op-local check (the low-precision
 * bound took it); it is caught at that op. */
static void test_deep_bf16_partial_read(void **state) {
  (void)state;
  for (uint64_t seed = 0; seed < 4; seed += 2) {
    plan_plan *p;
    plan_lowered *l = deep_lowered(&p);
    plan_verify_report *r = verify_float(p, l, seed);
    if (!plan_verify_report_equal(r))
      fprintf(stderr, "%s", plan_verify_report_text(r));
    assert_true(plan_verify_report_equal(r));
    if (seed == 2)
      assert_non_null(strstr(plan_verify_report_text(r), "op-local bound"));
    plan_verify_report_free(r);
    if (seed == 0) {
      assert_int_equal(plan_lower(&l, p), PLAN_OK);
      read_partial(l, p->program, "layers.28.mlp_res");
      r = verify_float(p, l, seed);
      assert_false(plan_verify_report_equal(r));
      assert_string_equal(plan_verify_report_first_op(r), "layers.28.mlp_res");
      assert_non_null(strstr(plan_verify_report_text(r),
                             "NOT EQUAL locally: op 'layers.28.mlp_res'"));
      assert_true(strlen(plan_verify_report_diagnosis(r)) > 0);
      plan_verify_report_free(r);
    }
    plan_free(p);
  }
}

/* A faulty runner's stand-in: after the first step (op or collective) that
 * writes a
 * buffer replicated along an axis, one copy moves by one ulp at
 * element 0 (well within float mode's tolerance). */
typedef struct drift {
  const plan_mesh *m;
  int step; /* the step it changed, -1 before */
  int64_t rank;
} drift;

static int drift_one(void *user, const plan_lowered *low, int step, int64_t mb,
                     plan_vblock *const *bufs) {
  drift *d = user;
  (void)mb;
  const plan_lstep *s = &low->steps[step];
  if (d->step >= 0 || s->kind == PLAN_LSTEP_INPUT)
    return 0;
  const plan_lbuf *b = &low->bufs[s->out[0]];
  const plan_mesh *m = d->m;
  /* the rank whose coordinate along the last R axis is 1, others 0 */
  for (int a = m->naxes - 1; a >= 0; a--)
    if (b->pl.ax[a].kind == PLAN_PL_R && m->axis_sizes[a] > 1) {
      int64_t stride = 1;
      for (int x = m->naxes - 1; x > a; x--)
        stride *= m->axis_sizes[x];
      plan_vblock *blk = &bufs[s->out[0]][stride];
      if (blk->n < 1 || blk->data[0] == 0)
        return 0;
      blk->data[0] *= 1 + 0x1p-23;
      d->step = step;
      d->rank = stride;
      return 0;
    }
  return 0;
}

static void test_replica_drift(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++)
    for (int bug = 0; bug < 2; bug++) {
      plan_plan *p = load("examples/mlp-megatron.plan.yaml");
      plan_lowered *l;
      assert_int_equal(plan_lower(&l, p), PLAN_OK);
      plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
      o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
      drift d = {&p->mesh, -1, -1};
      plan_verify_report *r;
      assert_int_equal(
          plan_verify_lowered_hooked(&r, p, l, &o, bug ? drift_one : NULL, &d),
          PLAN_OK);
      assert_int_equal(plan_verify_report_equal(r), !bug);
      if (bug) {
        assert_true(d.step >= 0);
        char want[128];
        snprintf(want, sizeof want, "ranks 0 and %lld differ at element",
                 (long long)d.rank);
        assert_non_null(strstr(plan_verify_report_text(r), "drifted: buffer"));
        assert_non_null(strstr(plan_verify_report_text(r), want));
        if (mode) /* the end-to-end comparison takes one ulp for noise */
          assert_non_null(strstr(plan_verify_report_diagnosis(r), want));
      }
      plan_verify_report_free(r);
      plan_free(p);
    }
}

/* A faulty kernel in a pipeline's stage: op `name`'s result, on the ranks
 * of the microbatch it just ran for, is 1e-6 too large everywhere (every
 * replica alike). Within the f32 tolerance (1.3e-6) end to end, outside
 * the elementwise op's own bound (8 u_acc RMS, 4.8e-7 RMS). */
typedef struct faulty {
  const char *name;
  int step; /* its lowered step */
  int runs; /* the microbatches it changed */
} faulty;

static int faulty_op(void *user, const plan_lowered *low, int step, int64_t mb,
                     plan_vblock *const *bufs) {
  faulty *f = user;
  if (step != f->step || mb < 0)
    return 0;
  const plan_mesh *m = &low->pipe->xplan->mesh;
  const plan_lstep *s = &low->steps[step];
  for (int64_t r = 0; r < m->ndevices; r++) {
    int64_t x = r, coord = 0;
    for (int a = m->naxes - 1; a >= 0; a--) {
      if (a == low->pipe->axis)
        coord = x % m->axis_sizes[a];
      x /= m->axis_sizes[a];
    }
    plan_vblock *blk = &bufs[s->out[0]][r];
    for (int64_t e = 0; coord == mb && blk->data && e < blk->n; e++)
      blk->data[e] *= 1 + 1e-6;
  }
  f->runs++;
  return 0;
}

static void test_pipeline_local(void **state) {
  (void)state;
  for (int bug = 0; bug < 2; bug++) {
    plan_plan *p = load("examples/transformer4-1f1b.plan.yaml");
    plan_lowered *l;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    assert_non_null(l->pipe);
    int64_t microbatches = l->pipe->microbatches; /* l is the verifier's */
    faulty f = {"layers.1.mlp.act", -1, 0};
    for (int i = 0; i < l->nsteps; i++)
      if (l->steps[i].kind == PLAN_LSTEP_OP &&
          !strcmp(l->plan->program->ops[l->steps[i].op].name, f.name))
        f.step = i;
    assert_true(f.step >= 0);
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = PLAN_VERIFY_FLOAT;
    plan_verify_report *r;
    assert_int_equal(
        plan_verify_lowered_hooked(&r, p, l, &o, bug ? faulty_op : NULL, &f),
        PLAN_OK);
    const char *text = plan_verify_report_text(r);
    if (plan_verify_report_equal(r) == bug)
      fail_msg("%s", text);
    if (bug) {
      /* every microbatch's run of it was changed, and only the op's own
       * check saw it: the end-to-end comparison accepted every tensor */
      assert_int_equal(f.runs, (int)microbatches);
      assert_non_null(strstr(text, "NOT EQUAL locally: op 'layers.1.mlp.act'"));
      assert_non_null(strstr(text, "in microbatch 0"));
      assert_null(strstr(text, "NOT EQUAL tensor"));
      assert_null(strstr(text, "NOT EQUAL output"));
      assert_string_equal(plan_verify_report_first_op(r), f.name);
    }
    plan_verify_report_free(r);
    plan_free(p);
  }
}

/* A sum that cancels: the reduced 4-layer transformer's last k-projection
 * weight gradient at seed 3 is near 1e-8, made of products far larger, so
 * a microbatch's ranks (each summing its rows) and the reference kernel
 * (all of them) differ by more than the result's own bound; within the
 * bound of the terms' magnitudes, it is EQUAL. */
static void test_cancelling_sum(void **state) {
  (void)state;
  plan_plan *p = load("examples/transformer4-1f1b.plan.yaml"), *small = NULL;
  char *summary = NULL;
  assert_int_equal(plan_reduce_shapes(&small, &summary, p), PLAN_OK);
  free(summary);
  plan_free(p);
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, small), PLAN_OK);
  plan_verify_report *r = verify_float(small, l, 3);
  if (!plan_verify_report_equal(r))
    fail_msg("%s", plan_verify_report_text(r));
  plan_verify_report_free(r);
  plan_free(small);
}

/* A lowered file whose second all-gather (over dp, in the wrong rank
 * order) writes a buffer in neither the layouts nor the outputs, read by
 * no step: compared because a step writes it. */
static const char gathered[] =
    "libplan-lowered: \"0.1\"\n"
    "program:\n"
    "  name: colpar\n"
    "  tensors:\n"
    "    \"x\": {shape: [batch=8, hidden=16]}\n"
    "    w1: {shape: [16, 64], role: param}\n"
    "  ops:\n"
    "    - {name: fc1, op: matmul, in: [\"x\", w1], out: h}\n"
    "  outputs: [h]\n"
    "mesh:\n"
    "  axes: [dp=2, tp=2]\n"
    "buffers:\n"
    "  \"x@0\": {tensor: \"x\", placement: \"S(0)R\"}\n"
    "  \"w1@0\": {tensor: \"w1\", placement: \"RS(1)\"}\n"
    "  \"h@0\": {tensor: \"h\", placement: \"S(0)S(1)\"}\n"
    "  \"h@1\": {tensor: \"h\", placement: \"S(0)R\"}\n"
    "  \"h@2\": {tensor: \"h\", placement: \"RS(1)\"}\n"
    "steps:\n"
    "  - {input: \"x@0\"}\n"
    "  - {input: \"w1@0\"}\n"
    "  - {op: \"fc1\", in: [\"x@0\", \"w1@0\"], out: [\"h@0\"]}\n"
    "  - {collective: all_gather, axis: tp, dim: 1, in: \"h@0\", out: "
    "\"h@1\"}\n"
    "  - {collective: all_gather, axis: dp, dim: 0, ORDER in: \"h@0\", out: "
    "\"h@2\"}\n"
    "layouts: {\"x\": \"x@0\", \"w1\": \"w1@0\", \"h\": \"h@0\"}\n"
    "outputs: {\"h\": \"h@1\"}\n";

static void test_gathered_not_in_layouts(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++)
    for (int bug = 0; bug < 2; bug++) {
      char *text = strdup(gathered);
      assert_non_null(text);
      text = replace(text, "ORDER ", bug ? "order: [1, 0], " : "");
      plan_lowered *l;
      assert_int_equal(plan_lowered_load_buffer(&l, text, strlen(text),
                                                "gathered.yaml", "."),
                       PLAN_OK);
      plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
      o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
      plan_verify_report *r;
      assert_int_equal(plan_verify_lowered(&r, l->plan, l, &o), PLAN_OK);
      assert_int_equal(plan_verify_report_equal(r), !bug);
      if (bug) {
        assert_string_equal(plan_verify_report_first_op(r),
                            "all_gather over 'dp'");
        assert_string_equal(plan_verify_report_first_tensor(r), "h");
        assert_non_null(strstr(plan_verify_report_diagnosis(r), "wrong order"));
      }
      plan_verify_report_free(r);
      free(text);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deep_bf16_partial_read),
      cmocka_unit_test(test_replica_drift),
      cmocka_unit_test(test_pipeline_local),
      cmocka_unit_test(test_cancelling_sum),
      cmocka_unit_test(test_gathered_not_in_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
