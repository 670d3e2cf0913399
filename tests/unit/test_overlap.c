/* Communication overlap (spec/plan-format.md 4.8, spec/lowered-format.md
 * "Streams"): the entries as data (views, hash, a plan without them
 * unchanged), where lowering puts starts, chunks and waits, the positioned
 * findings of plan_validate, the happens-before check of the streams (in
 * memory: NOT EQUAL with the diagnosis), and chunked collectives that
 * reassemble exactly. Run from the repository root (examples/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libplan/libplan.h"
#include "libplan/verify.h"
#include "lower/lower.h"

#define FSDP "examples/fsdp-tp-overlap.plan.yaml"
#define MLP "examples/mlp-overlap.plan.yaml"
#define TRAIN "examples/mlp-train.plan.yaml"

static void ok(int rc) {
  if (rc != PLAN_OK) {
    char buf[1200];
    print_message("unexpected failure: %s\n",
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
}

static plan_lowered *read_text(const char *text) {
  plan_lowered *l = NULL;
  ok(plan_lowered_load_buffer(&l, text, strlen(text), "x.yaml", NULL));
  return l;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

/* The step index of op `name` in l, or -1. */
static int op_step(const plan_lowered *l, const char *name) {
  const plan_program *prog = plan_lowered_plan(l)->program;
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_OP &&
        !strcmp(prog->ops[l->steps[i].op].name, name))
      return i;
  return -1;
}

/* The step that writes buffer b first, and the tensor name of b. */
static const char *buf_tensor(const plan_lowered *l, int b) {
  return plan_lowered_plan(l)->program->tensors[l->bufs[b].tensor].name;
}

static void test_entries_as_data(void **state) {
  (void)state;
  plan_plan *p = NULL;
  ok(plan_load(&p, FSDP));
  assert_int_equal(plan_overlap_count(p), 3);
  plan_overlap_info e;
  ok(plan_overlap_entry(&e, p, 0));
  assert_string_equal(e.select, "param");
  assert_string_equal(e.pattern, "layers.1.*");
  assert_string_equal(e.start, "after");
  assert_string_equal(e.start_op, "layers.0.fc1");
  assert_string_equal(e.wait, "in_place");
  assert_null(e.wait_op);
  ok(plan_overlap_entry(&e, p, 2));
  assert_string_equal(e.select, "grad_sync");
  assert_int_equal(e.stream, 2);
  assert_string_equal(e.wait, "end");
  assert_int_equal(plan_overlap_entry(&e, p, 3), PLAN_EUSAGE);
  /* the section is hashed: the plan without it hashes apart, and its
   * canonical text has no "overlap" */
  char *text = slurp(FSDP);
  char *cut = strstr(text, "\noverlap:\n");
  assert_non_null(cut);
  cut[1] = 0;
  plan_plan *q = NULL;
  ok(plan_load_buffer(&q, text, strlen(text), "q.yaml", NULL));
  plan_hash a, b;
  ok(plan_hash_part(&a, p, PLAN_PART_PLAN));
  ok(plan_hash_part(&b, q, PLAN_PART_PLAN));
  assert_false(plan_hash_equal(a, b));
  ok(plan_hash_part(&a, p, PLAN_PART_PROGRAM));
  ok(plan_hash_part(&b, q, PLAN_PART_PROGRAM));
  assert_true(plan_hash_equal(a, b));
  char *canon = NULL;
  size_t len;
  ok(plan_canonical(&canon, &len, q, PLAN_PART_PLAN));
  assert_null(strstr(canon, "overlap"));
  assert_non_null(strstr(canon, "\"libplan\":\"1.0\""));
  plan_buffer_free(canon);
  /* nor does its lowered program have a stream or a wait */
  plan_lowered *l = NULL;
  char *lt = NULL;
  ok(plan_lower(&l, q));
  ok(plan_lowered_write(&lt, &len, l));
  assert_null(strstr(lt, "stream"));
  assert_null(strstr(lt, "wait"));
  plan_buffer_free(lt);
  plan_lowered_free(l);
  plan_free(q);
  plan_free(p);
  free(text);
}

static void test_where_lowering_puts_them(void **state) {
  (void)state;
  plan_plan *p = NULL;
  plan_lowered *l = NULL;
  ok(plan_load(&p, FSDP));
  ok(plan_lower(&l, p));
  int fc1 = op_step(l, "layers.0.fc1"), l1 = op_step(l, "layers.1.fc1");
  assert_true(fc1 >= 0 && l1 > fc1);
  /* layer 1's gathers started right after layer 0's first matmul */
  for (int k = 1; k <= 2; k++) {
    const plan_lstep *s = &l->steps[fc1 + k];
    assert_int_equal(s->kind, PLAN_LSTEP_REDIST);
    assert_int_equal(s->stream, 1);
    assert_int_equal(s->redist.kind, PLAN_REDIST_ALL_GATHER);
    assert_non_null(strstr(buf_tensor(l, s->in[0]), "layers.1.w"));
  }
  /* the chunked gather of layer 1's input: two slices along dim 1 */
  int chunks = 0, waits = 0, grad_starts = 0;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    plan_lowered_sched_info si;
    ok(plan_lowered_step_sched(&si, l, i));
    assert_int_equal(si.stream, s->stream);
    if (s->chunk_of) {
      assert_int_equal(si.chunk_of, 2);
      assert_int_equal(si.chunk_dim, 1);
      assert_int_equal(si.chunk_at, chunks);
      assert_string_equal(buf_tensor(l, s->out[0]), "layers.1.x");
      assert_true(i < l1);
      chunks++;
    }
    if (s->kind == PLAN_LSTEP_WAIT) {
      plan_lowered_step_info st;
      ok(plan_lowered_step(&st, l, i));
      assert_string_equal(st.kind, "wait");
      waits++;
    }
    if (s->stream == 2 &&
        s->kind ==
            PLAN_LSTEP_REDIST) { /* right after the step that makes its input */
      grad_starts++;
      assert_int_equal(l->steps[i - 1].kind, PLAN_LSTEP_OP);
      assert_int_equal(l->steps[i - 1].out[0], s->in[0]);
    }
  }
  assert_int_equal(chunks, 2);
  assert_int_equal(grad_starts, 4);
  assert_int_equal(waits, 2 + 1 + 4); /* the gathers, the chunks, the grads */
  /* the gradients' waits are the last steps */
  for (int k = 1; k <= 4; k++)
    assert_int_equal(l->steps[l->nsteps - k].kind, PLAN_LSTEP_WAIT);
  int bad;
  char why[512];
  ok(plan_lowered_check_streams(l, &bad, why, sizeof why));
  /* the file form reads back to the same program and hash */
  plan_hash h1, h2;
  char *text = NULL;
  size_t len;
  ok(plan_lowered_hash(&h1, l));
  ok(plan_lowered_write(&text, &len, l));
  plan_lowered *r = read_text(text);
  ok(plan_lowered_hash(&h2, r));
  assert_true(plan_hash_equal(h1, h2));
  assert_int_equal(r->nsteps, l->nsteps);
  plan_lowered_free(r);
  plan_buffer_free(text);
  plan_lowered_free(l);
  plan_free(p);
}

/* mlp-train with one overlap entry in place of its x- tail. */
static plan_plan *train_with(const char *entry) {
  char *text = slurp(TRAIN);
  char *cut = strstr(text, "x-upgraded-from:");
  assert_non_null(cut);
  *cut = 0;
  char *v = strstr(text, "libplan: \"1.0\"");
  assert_non_null(v);
  v[12] = '1';
  size_t n = strlen(text) + strlen(entry) + 32;
  char *doc = malloc(n);
  assert_non_null(doc);
  snprintf(doc, n, "%soverlap:\n  - %s\n", text, entry);
  plan_plan *p = NULL;
  ok(plan_load_buffer(&p, doc, strlen(doc), "t.yaml", NULL));
  free(doc);
  free(text);
  return p;
}

static void test_findings(void **state) {
  (void)state;
  /* each finding at the field it is about: `at` the text where it starts
   * (NULL: the entry itself, column 5) */
  static const struct {
    const char *entry, *code, *words, *at;
  } cases[] = {
      {"{grad_sync: w2, start: ready, wait: \"before grad/mlp.fc2/db\"}",
       "overlap.order", "comes before the start", "\"before"},
      {"{grad_sync: \"nope*\"}", "overlap.unmatched", "selects no collective",
       NULL},
      {"{input: mlp.loss, operand: 0, chunks: 3}", "overlap.chunks",
       "3 chunks divide no dim of 'logits'", "3}"},
      {"{input: mlp.loss, operand: 0, chunks: 2, dim: 2}", "overlap.chunks",
       "has no dim", "2,"},
      {"{input: mlp.loss, operand: 0, start: \"after mlp.fc1\"}",
       "overlap.order", "before its input is made (by op 'mlp.fc2')",
       "\"after"},
      {"{input: mlp.loss, operand: 0, start: \"after mlp.nope\"}",
       "overlap.name", "no op 'mlp.nope'", "\"after"},
      {"{input: mlp.loss, operand: 0, wait: \"before grad/mlp.fc2/da\"}",
       "overlap.order", "reads the result", "\"before"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    plan_plan *p = train_with(cases[i].entry);
    int col =
        cases[i].at
            ? 5 + (int)(strstr(cases[i].entry, cases[i].at) - cases[i].entry)
            : 5;
    plan_diags *d = NULL;
    ok(plan_validate(&d, p));
    const plan_diag *f = NULL;
    for (size_t k = 0; k < plan_diags_count(d); k++)
      if (!strcmp(plan_diags_get(d, k)->code, cases[i].code))
        f = plan_diags_get(d, k);
    if (!f || !strstr(f->message, cases[i].words) || f->column != col)
      for (size_t k = 0; k < plan_diags_count(d); k++)
        print_message(
            "case %zu: %s:%d:%d %s [%s]\n", i, plan_diags_get(d, k)->file,
            plan_diags_get(d, k)->line, plan_diags_get(d, k)->column,
            plan_diags_get(d, k)->message, plan_diags_get(d, k)->code);
    assert_non_null(f);
    assert_non_null(strstr(f->message, cases[i].words));
    assert_int_equal(f->severity, PLAN_SEV_ERROR);
    assert_int_equal(f->line, 54);
    assert_int_equal(f->column, col);
    /* and lowering refuses it, at the same place */
    plan_lowered *l = NULL;
    assert_int_equal(plan_lower(&l, p), PLAN_EINVALID);
    assert_null(l);
    assert_int_equal(plan_error_last()->line, 54);
    plan_diags_free(d);
    plan_free(p);
  }
  /* a collective two entries select */
  plan_plan *p = train_with("{grad_sync: w2}\n  - {grad_sync: \"w*\"}");
  plan_diags *d = NULL;
  ok(plan_validate(&d, p));
  bool dup = false;
  for (size_t k = 0; k < plan_diags_count(d); k++)
    dup |= !strcmp(plan_diags_get(d, k)->code, "overlap.duplicate");
  assert_true(dup);
  plan_diags_free(d);
  plan_free(p);
}

/* Moves step `from` to index `to` of l (in memory). */
static void move_step(plan_lowered *l, int from, int to) {
  plan_lstep s = l->steps[from];
  if (from < to)
    memmove(&l->steps[from], &l->steps[from + 1],
            sizeof s * (size_t)(to - from));
  else
    memmove(&l->steps[to + 1], &l->steps[to], sizeof s * (size_t)(from - to));
  l->steps[to] = s;
}

static int wait_step(const plan_lowered *l) {
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_WAIT)
      return i;
  return -1;
}

static void test_streams_checked_in_memory(void **state) {
  (void)state;
  plan_plan *p = NULL;
  ok(plan_load(&p, MLP));
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  for (int mode = 0; mode < 2; mode++) {
    o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    /* as lowered: EQUAL, the chunks reassembled exactly */
    plan_lowered *l = NULL;
    plan_verify_report *r = NULL;
    ok(plan_lower(&l, p));
    ok(plan_verify_lowered(&r, p, l, &o));
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
    /* the wait after its reader: NOT EQUAL, said why */
    ok(plan_lower(&l, p));
    int w = wait_step(l);
    assert_true(w > 0 && l->steps[w + 1].kind == PLAN_LSTEP_OP);
    move_step(l, w, w + 1);
    int bad;
    char why[512];
    assert_int_equal(plan_lowered_check_streams(l, &bad, why, sizeof why),
                     PLAN_EINVALID);
    assert_int_equal(bad, w);
    ok(plan_verify_lowered(&r, p, l, &o));
    assert_false(plan_verify_report_equal(r));
    assert_non_null(strstr(plan_verify_report_diagnosis(r), "before its wait"));
    assert_string_equal(plan_verify_report_first_op(r), "mlp.out");
    plan_verify_report_free(r);
  }
  /* never waited */
  plan_lowered *l = NULL;
  ok(plan_lower(&l, p));
  int w = wait_step(l), bad;
  move_step(l, w, l->nsteps - 1);
  l->nsteps--;
  char why[512];
  /* the reader now comes first */
  assert_int_equal(plan_lowered_check_streams(l, &bad, why, sizeof why),
                   PLAN_EINVALID);
  assert_non_null(strstr(why, "before its wait"));
  /* without the reader: a start no one waits */
  l->nsteps = w;
  assert_int_equal(plan_lowered_check_streams(l, &bad, why, sizeof why),
                   PLAN_EINVALID);
  assert_non_null(strstr(why, "never waited"));
  assert_int_equal(bad, w - 2);
  plan_lowered_free(l);
  plan_free(p);
}

static void test_chunks_reassembled_in_order(void **state) {
  (void)state;
  plan_plan *p = NULL;
  ok(plan_load(&p, MLP));
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  plan_lowered *l = NULL;
  plan_verify_report *r = NULL;
  ok(plan_lower(&l, p));
  int c0 = -1;
  for (int i = 0; i < l->nsteps && c0 < 0; i++)
    if (l->steps[i].chunk_of)
      c0 = i;
  assert_true(c0 >= 0 && l->steps[c0 + 1].chunk_of == 2);
  l->steps[c0].chunk_at = 1; /* swapped: every slice written, misplaced */
  l->steps[c0 + 1].chunk_at = 0;
  int bad;
  char why[512];
  ok(plan_lowered_check_streams(l, &bad, why, sizeof why));
  ok(plan_verify_lowered(&r, p, l, &o));
  assert_false(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entries_as_data),
      cmocka_unit_test(test_where_lowering_puts_them),
      cmocka_unit_test(test_findings),
      cmocka_unit_test(test_streams_checked_in_memory),
      cmocka_unit_test(test_chunks_reassembled_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
