/* The file form of pipelined lowered programs (spec/lowered-format.md,
 * "Pipelines"; lowered_io_pipe.c): every pipelined example writes, reads
 * back with the same hash, stages, phases and schedule, writes the same
 * text again and verifies with the plan's verdict in both modes; a file
 * whose receive pairs the wrong microbatch, or whose schedule runs a
 * backward before its forward's receive, loads and is NOT EQUAL; every
 * malformed pipeline field is an error at its line and column. Run from
 * the repository root (examples/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libplan/libplan.h"
#include "libplan/schedule.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "lowered_text.h"

#define MLP8 "examples/pipeline-1f1b.plan.yaml"
#define DPV "examples/transformer4-dualpipev.plan.yaml"
#define LLAMA "examples/models/llama-32l.pp.plan.yaml"

static const char *const pipelined[] = {
    MLP8,
    "examples/pipeline-grid.plan.yaml",
    "examples/transformer4-1f1b.plan.yaml",
    "examples/transformer4-interleaved.plan.yaml",
    "examples/transformer4-zb-h1.plan.yaml",
    "examples/transformer4-zbv.plan.yaml",
    DPV,
    LLAMA};

/* The first occurrence of `from` in text replaced by `to`; a new string. */
static char *replace1(const char *text, const char *from, const char *to) {
  const char *hit = strstr(text, from);
  if (!hit)
    print_message("not in the text: %s\n", from);
  assert_non_null(hit);
  size_t nf = strlen(from), nt = strlen(to), pre = (size_t)(hit - text);
  char *out = malloc(strlen(text) - nf + nt + 1);
  assert_non_null(out);
  memcpy(out, text, pre);
  memcpy(out + pre, to, nt);
  strcpy(out + pre + nt, hit + nf);
  return out;
}

static int line_of(const char *text, const char *at) {
  const char *hit = strstr(text, at);
  assert_non_null(hit);
  int line = 1;
  for (const char *q = text; q < hit; q++)
    line += *q == '\n';
  return line;
}

static int verdict(const plan_plan *p, plan_lowered *l, int mode) {
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
  plan_verify_report *r = NULL;
  int rc = l ? plan_verify_lowered(&r, p, l, &o) : plan_verify(&r, p, &o);
  ok(rc);
  int eq = plan_verify_report_equal(r);
  plan_verify_report_free(r);
  return eq;
}

/* Write, read, same hash, same text, same stages and schedule; the same
 * verdict as the plan's (the model-sized example only round-trips). */
static void test_roundtrip(void **state) {
  (void)state;
  for (size_t f = 0; f < sizeof pipelined / sizeof *pipelined; f++) {
    plan_plan *p = NULL;
    plan_lowered *l = NULL, *back;
    char *text = NULL, *again = NULL;
    size_t len;
    plan_hash h, hb;
    ok(plan_load(&p, pipelined[f]));
    ok(plan_lower(&l, p));
    ok(plan_lowered_write(&text, &len, l));
    ok(plan_lowered_hash(&h, l));
    back = read_text(text);
    ok(plan_lowered_hash(&hb, back));
    assert_true(plan_hash_equal(h, hb));
    ok(plan_lowered_write(&again, &len, back));
    assert_string_equal(text, again);
    const plan_lpipe *a = l->pipe, *b = back->pipe;
    assert_non_null(b);
    assert_int_equal(a->axis, b->axis);
    assert_int_equal(a->microbatches, b->microbatches);
    assert_int_equal(a->nstages, b->nstages);
    assert_int_equal(a->transfers, b->transfers);
    assert_int_equal(a->local_transfers, b->local_transfers);
    assert_int_equal(plan_schedule_kind_of(a->schedule),
                     plan_schedule_kind_of(b->schedule));
    assert_int_equal(plan_schedule_ranks(a->schedule),
                     plan_schedule_ranks(b->schedule));
    for (int s = 0; s < a->nstages; s++)
      assert_int_equal(plan_schedule_stage_rank(a->schedule, s),
                       plan_schedule_stage_rank(b->schedule, s));
    assert_int_equal(l->nsteps, back->nsteps);
    for (int i = 0; i < l->nsteps; i++) {
      assert_int_equal(a->stage[i], b->stage[i]);
      assert_int_equal(a->phase[i], b->phase[i]);
      assert_int_equal(a->from_stage[i], b->from_stage[i]);
      assert_int_equal(l->steps[i].kind, back->steps[i].kind);
    }
    plan_lowered_free(l);
    if (strcmp(pipelined[f], LLAMA)) {
      for (int mode = 0; mode < 2; mode++) {
        int plan_eq = verdict(p, NULL, mode);
        plan_lowered *x = read_text(text);
        assert_true(plan_eq);
        assert_int_equal(verdict(plan_lowered_plan(x), x, mode), plan_eq);
      }
    }
    plan_lowered_free(back);
    plan_buffer_free(text);
    plan_buffer_free(again);
    plan_free(p);
  }
}

/* Bugs a runtime could have, written into the file: they load, and the
 * verifier says NOT EQUAL in both modes. */
static void test_pipeline_bugs(void **state) {
  (void)state;
  plan_hash h;
  char *text = lowered_text(MLP8, NULL, &h);
  struct {
    const char *from, *to, *why;
  } bugs[] = {
      /* stage 1 receives microbatch k + 1's activations for microbatch k */
      {"from_stage: 0, stage: 1, phase: RECV_F}",
       "from_stage: 0, stage: 1, phase: RECV_F, mb_shift: 1}", NULL},
      /* the last stage runs microbatch 0's backward before it receives
       * microbatch 0's forward: the run deadlocks */
      {"\"3RECV_F0 3F0 3RECV_F1 3B0 ", "\"3B0 3RECV_F0 3F0 3RECV_F1 ",
       "deadlock"},
  };
  for (size_t k = 0; k < sizeof bugs / sizeof *bugs; k++)
    for (int mode = 0; mode < 2; mode++) {
      char *t = replace1(text, bugs[k].from, bugs[k].to);
      plan_lowered *l = read_text(t);
      plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
      o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
      plan_verify_report *r = NULL;
      ok(plan_verify_lowered(&r, plan_lowered_plan(l), l, &o));
      assert_false(plan_verify_report_equal(r));
      if (bugs[k].why)
        assert_non_null(strstr(plan_verify_report_text(r), bugs[k].why));
      plan_verify_report_free(r);
      free(t);
    }
  plan_buffer_free(text);
}

typedef struct bad {
  const char *from, *to;
  const char *at; /* the text on the error's line (NULL: `to`) */
  int col;        /* the error's column (0: not checked) */
  const char *msg;
} bad;

static void expect_bad(const char *text, const bad *b) {
  char *t = replace1(text, b->from, b->to);
  plan_lowered *l = (plan_lowered *)&l;
  int rc = plan_lowered_load_buffer(&l, t, strlen(t), "x.yaml", NULL);
  const plan_error *e = plan_error_last();
  if (rc == PLAN_OK || !strstr(e->message, b->msg) ||
      e->line != line_of(t, b->at ? b->at : b->to) ||
      (b->col && e->column != b->col))
    print_message("%s -> %s: rc %d, %s:%d:%d: %s\n", b->from, b->to, rc,
                  e->file ? e->file : "", e->line, e->column, e->message);
  assert_true(rc < 0);
  assert_null(l);
  assert_string_equal(e->file, "x.yaml");
  assert_non_null(strstr(e->message, b->msg));
  assert_int_equal(e->line, line_of(t, b->at ? b->at : b->to));
  if (b->col)
    assert_int_equal(e->column, b->col);
  free(t);
}

/* Every malformed field of the pipeline section and of a step's pipeline
 * fields: an error at its position, nothing loaded. */
static void test_bad_fields(void **state) {
  (void)state;
  plan_hash h;
  char *text = lowered_text(MLP8, NULL, &h);
  const bad cases[] = {
      {"  axis: mb\n", "  axis: nope\n", NULL, 9, "no mesh axis 'nope'"},
      {"  microbatches: 8\n", "  microbatches: 4\n", NULL, 17,
       "microbatches: 4, but the microbatch axis 'mb' has 8"},
      {"  microbatches: 8\n", "  microbatches: 0\n", NULL, 17,
       "microbatches must be 1 to"},
      {"  stages: 4\n", "  stages: 0\n", NULL, 11, "stages must be 1 to"},
      {"  schedule: 1f1b\n", "  schedule: 2f2b\n", NULL, 13, "schedule"},
      {"  stages: 4\n", "", "  axis: mb", 3, "pipeline needs 'axis'"},
      {"  stages: 4\n", "  stages: 4\n  bogus: 1\n", "  bogus", 3, "bogus"},
      {"  actions:\n", "  actions: 3\n  x-rows:\n", "  actions: 3", 12,
       "must be a sequence"},
      {"\"0F0 0SEND_F0 0F1 ", "\"0F0 0SEND_F0 0X1 ", NULL, 21,
       "'0X1' is not STAGE ACTION MICROBATCH"},
      {"\"0F0 0SEND_F0 0F1 ", "\"0F0 0SEND_F0 0F9 ", NULL, 21,
       "'0F9' is outside the pipeline"},
      {"\"1RECV_F0 1F0 ", "\"0RECV_F0 1F0 ", NULL, 8,
       "'0RECV_F0' is stage 0's, which 1f1b places on rank 0"},
      {"\"0F0 0SEND_F0 0F1 ", "\"0F0 0F0 0SEND_F0 0F1 ", NULL, 12,
       "'0F0' is there twice"},
      {" 3F7 ", " ", "\"3RECV_F0", 0, "no 3F7"},
      {" 3B7", "", "\"3RECV_F0", 0, "stage 3's backward of microbatch 7"},
      {"from_stage: 0, stage: 1, phase: RECV_F}",
       "from_stage: 0, stage: 1, phase: F}", NULL, 0,
       "a transfer runs in its receiving stage's"},
      {", stage: 0, phase: F}", "}", "{op: \"layers.0.fc\"", 0,
       "needs a 'phase'"},
      {", stage: 0, phase: F}", ", stage: 7, phase: F}", NULL, 0,
       "stage must be 0 to 3"},
      {", stage: 0, phase: F}", ", phase: F}", NULL, 0, "it needs a 'stage'"},
      {", phase: post}", ", stage: 1, phase: post}", NULL, 0,
       "it has no 'stage'"},
      {", phase: pre}", ", phase: early}", NULL, 0, "phase"},
      {"from_stage: 0, stage: 1, phase: RECV_F}", "stage: 1, phase: RECV_F}",
       NULL, 0, "needs a 'from_stage'"},
      {"from_stage: 0, stage: 1, phase: RECV_F}",
       "from_stage: 2, stage: 1, phase: RECV_F}", NULL, 0,
       "comes from an earlier stage, not stage 2"},
      {"from_stage: 0, stage: 1, phase: RECV_F}",
       "from_stage: 0, stage: 2, phase: RECV_F}", "{op: \"layers.2.fc\"", 0,
       "a transfer into stage 1 receives it"},
      {", stage: 0, phase: F}", ", stage: 0, phase: F, mb_shift: 1}", NULL, 0,
       "only an input or a transfer has an 'mb_shift'"},
      {"from_stage: 0, stage: 1, phase: RECV_F}",
       "from_stage: 0, stage: 1, phase: RECV_F, mb_shift: 8}", NULL, 0,
       "mb_shift must be -7 to 7"},
      {", stage: 0, phase: F}", ", stage: 0, phase: F, from_stage: 0}", NULL, 0,
       "only a transfer has a 'from_stage'"},
      {"out: \"loss@2\", phase: post}", "out: \"loss@2\", stage: 3, phase: F}",
       NULL, 0, "mixes microbatches"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
    expect_bad(text, &cases[k]);
  plan_buffer_free(text);
  /* dualpipev: a V of two stages per rank, a format 1.1 schedule */
  text = lowered_text(DPV, NULL, &h);
  const bad v[] = {
      {"libplan-lowered: \"1.1\"", "libplan-lowered: \"1.0\"",
       "  schedule: dualpipev", 13, "format 1.1"},
      {"  stages: 4\n", "  stages: 6\n", "    - \"", 5,
       "dualpipev places two stages on each pipeline rank"},
  };
  for (size_t k = 0; k < sizeof v / sizeof *v; k++)
    expect_bad(text, &v[k]);
  plan_buffer_free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_pipeline_bugs),
      cmocka_unit_test(test_bad_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
