/* Unit tests of the public API's newer entries, through the public headers
 * alone: the lowered program (lowered.h), plan_buffer_free, plan_error_set,
 * the options init functions and plan_runner_check. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libplan/libplan.h"

static plan_plan *load(const char *path) {
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, path), PLAN_OK);
  return p;
}

/* Writes len bytes to a new temporary file; its path into path. */
static void write_temp(char *path, size_t size, const char *data, size_t len) {
  snprintf(path, size, "/tmp/plan_api_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  assert_int_equal(close(fd), 0);
}

/* The line (1-based) of the first line that starts with `prefix`. */
static int line_of(const char *text, const char *prefix) {
  int line = 1;
  for (const char *s = text; *s; line++) {
    if (!strncmp(s, prefix, strlen(prefix)))
      return line;
    const char *nl = strchr(s, '\n');
    if (!nl)
      break;
    s = nl + 1;
  }
  return 0;
}

/* A plan lowered, written, read back from a file and from memory: the
 * three hash the same and have the same steps and collectives, and the
 * file writes back as it was read, byte for byte. That holds for a
 * training step too, although the program read back numbers its tensors
 * differently from the one autodiff built (the layouts follow the
 * buffers). */
static void roundtrip(const char *file) {
  plan_plan *p = load(file);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  assert_non_null(l);
  assert_non_null(plan_lowered_plan(l));
  assert_true(plan_lowered_step_count(l) > 0);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  assert_int_equal(strlen(text), len);
  assert_int_equal(plan_is_lowered_text(text, len), 1);

  char path[64];
  write_temp(path, sizeof path, text, len);
  plan_lowered *lf = NULL, *lb = NULL;
  assert_int_equal(plan_lowered_load(&lf, path), PLAN_OK);
  assert_int_equal(plan_lowered_load_buffer(&lb, text, len, "mem.yaml", NULL),
                   PLAN_OK);
  unlink(path);

  plan_hash h, hf, hb;
  assert_int_equal(plan_lowered_hash(&h, l), PLAN_OK);
  assert_int_equal(plan_lowered_hash(&hf, lf), PLAN_OK);
  assert_int_equal(plan_lowered_hash(&hb, lb), PLAN_OK);
  assert_true(plan_hash_equal(hf, hb));
  assert_true(plan_hash_equal(h, hf));
  assert_int_equal(plan_lowered_step_count(lf), plan_lowered_step_count(l));
  static const char *const kinds[] = {
      "all_gather", "all_reduce",     "reduce_scatter", "all_to_all",
      "slice",      "zero_non_owner", "relabel"};
  int total = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    int n = plan_lowered_collective_count(l, kinds[k]);
    assert_true(n >= 0);
    total += n;
    assert_int_equal(plan_lowered_collective_count(lf, kinds[k]), n);
  }
  assert_true(total > 0);
  assert_int_equal(plan_lowered_collective_count(l, "broadcast"), -1);
  assert_int_equal(plan_lowered_collective_count(l, NULL), -1);

  /* the file's mesh is the plan's */
  const plan_plan *fp = plan_lowered_plan(lf);
  plan_hash a, b;
  assert_int_equal(plan_hash_part(&a, fp, PLAN_PART_MESH), PLAN_OK);
  assert_int_equal(plan_hash_part(&b, p, PLAN_PART_MESH), PLAN_OK);
  assert_true(plan_hash_equal(a, b));

  /* written again from the file, and read again: the same */
  char *again = NULL;
  size_t alen = 0;
  assert_int_equal(plan_lowered_write(&again, &alen, lf), PLAN_OK);
  assert_int_equal(alen, len);
  assert_memory_equal(again, text, len);
  plan_lowered *l2 = NULL;
  assert_int_equal(
      plan_lowered_load_buffer(&l2, again, alen, "again.yaml", NULL), PLAN_OK);
  plan_hash h2;
  assert_int_equal(plan_lowered_hash(&h2, l2), PLAN_OK);
  assert_true(plan_hash_equal(h2, hf));

  plan_lowered_free(l2);
  plan_buffer_free(again);
  plan_buffer_free(text);
  plan_lowered_free(lb);
  plan_lowered_free(lf);
  plan_lowered_free(l);
  plan_free(p);
}

static void test_lowered_roundtrip(void **state) {
  (void)state;
  roundtrip("examples/mlp-megatron.plan.yaml");
  roundtrip("examples/transformer-block.plan.yaml");
  roundtrip("examples/moe-experts.plan.yaml");
  roundtrip("examples/mlp-train.plan.yaml"); /* its training step */
  roundtrip("examples/transformer-train.plan.yaml");
  plan_lowered_free(NULL);
  assert_null(plan_lowered_plan(NULL));
  assert_int_equal(plan_lowered_step_count(NULL), -1);
}

/* A pipelined program lowers and has a file form (test_lowered_pipe.c
 * round-trips every pipelined example). */
static void test_lowered_pipeline(void **state) {
  (void)state;
  plan_plan *p = load("examples/pipeline-1f1b.plan.yaml");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  assert_true(plan_lowered_step_count(l) > 0);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  assert_non_null(strstr(text, "\npipeline:\n  axis: mb\n"));
  plan_buffer_free(text);
  plan_hash h;
  assert_int_equal(plan_lowered_hash(&h, l), PLAN_OK);
  plan_lowered_free(l);
  plan_free(p);
  /* a manual region needs a tracer: plan_lower refuses it */
  p = load("examples/mlp-manual.plan.yaml");
  l = (plan_lowered *)&l;
  assert_int_equal(plan_lower(&l, p), PLAN_EUNSUPPORTED);
  assert_null(l);
  plan_free(p);
  assert_int_equal(plan_lower(&l, NULL), PLAN_EUSAGE);
}

/* Every lowered-program function refuses a NULL argument with PLAN_EUSAGE
 * (or its documented answer) and touches nothing. */
static void test_lowered_null_arguments(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(NULL, p), PLAN_EUSAGE);
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  char *text = (char *)&text;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, NULL), PLAN_EUSAGE);
  assert_null(text);
  assert_int_equal(plan_lowered_write(NULL, &len, l), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_save(NULL, "x.yaml"), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_save(l, NULL), PLAN_EUSAGE);
  plan_hash h;
  assert_int_equal(plan_lowered_hash(&h, NULL), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_hash(NULL, l), PLAN_EUSAGE);
  assert_int_equal(plan_is_lowered_text(NULL, 5), 0);
  plan_lowered *r = (plan_lowered *)&r;
  assert_int_equal(plan_lowered_load_buffer(&r, NULL, 3, "x", NULL),
                   PLAN_EUSAGE);
  assert_null(r);
  assert_int_equal(plan_lowered_load_buffer(NULL, "x", 1, "x", NULL),
                   PLAN_EUSAGE);
  plan_verify_report *rep = (plan_verify_report *)&rep;
  assert_int_equal(plan_verify_lowered(&rep, NULL, l, NULL), PLAN_EUSAGE);
  assert_null(rep); /* l was taken and freed */
  assert_int_equal(plan_verify_lowered(&rep, p, NULL, NULL), PLAN_EUSAGE);
  plan_free(p);
}

/* A program given by path resolves against the lowered file's folder. */
static void test_lowered_program_by_path(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-by-path.plan.yaml");
  plan_lowered *l = NULL, *lb = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  assert_int_equal(plan_lowered_load_buffer(&lb, text, len,
                                            "examples/by-path.lowered.yaml",
                                            "examples"),
                   PLAN_OK);
  plan_hash h, hb;
  assert_int_equal(plan_lowered_hash(&h, l), PLAN_OK);
  assert_int_equal(plan_lowered_hash(&hb, lb), PLAN_OK);
  assert_true(plan_hash_equal(h, hb));
  plan_lowered *lm = NULL; /* elsewhere, the program is not found */
  assert_int_not_equal(
      plan_lowered_load_buffer(&lm, text, len, "by-path.lowered.yaml", "/"),
      PLAN_OK);
  assert_null(lm);
  plan_buffer_free(text);
  plan_lowered_free(lb);
  plan_lowered_free(l);
  plan_free(p);
}

static void test_is_lowered_text(void **state) {
  (void)state;
  const char *yes = "# written by hand\n\n  \nlibplan-lowered: \"1.0\"\n";
  assert_int_equal(plan_is_lowered_text(yes, strlen(yes)), 1);
  const char *no = "libplan: \"1.0\"\nprogram: {}\n";
  assert_int_equal(plan_is_lowered_text(no, strlen(no)), 0);
  assert_int_equal(plan_is_lowered_text("", 0), 0);
  assert_int_equal(plan_is_lowered_text("libplan-low", 11), 0);
}

/* A malformed lowered file: the error names the file, line and column. */
static void test_lowered_load_errors(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  plan_lowered_free(l);
  plan_free(p);

  /* an unknown top-level key after the steps */
  size_t blen = len + 64;
  char *bad = malloc(blen);
  assert_non_null(bad);
  snprintf(bad, blen, "%sbogus: 1\n", text);
  int want_line = line_of(bad, "bogus:");
  assert_true(want_line > 1);
  char path[64];
  write_temp(path, sizeof path, bad, strlen(bad));
  plan_lowered *lb = (plan_lowered *)&lb; /* set to NULL on failure */
  int rc = plan_lowered_load(&lb, path);
  assert_true(rc < 0);
  assert_null(lb);
  const plan_error *e = plan_error_last();
  assert_int_equal(e->code, rc);
  assert_string_equal(e->file, path);
  assert_int_equal(e->line, want_line);
  assert_int_equal(e->column, 1);
  char msg[1024], want[256];
  plan_error_format(msg, sizeof msg);
  snprintf(want, sizeof want, "%s:%d:1: error: ", path, want_line);
  assert_memory_equal(msg, want, strlen(want));
  unlink(path);

  /* a step that names a buffer nobody declared: its own line */
  const char *step = "  - {op: \"mlp.act\", in: [\"h@0\"]";
  char *at = strstr(text, step);
  assert_non_null(at);
  memcpy(at + strlen("  - {op: \"mlp.act\", in: [\""), "q", 1); /* "q@0" */
  write_temp(path, sizeof path, text, len);
  rc = plan_lowered_load(&lb, path);
  assert_true(rc < 0);
  e = plan_error_last();
  assert_string_equal(e->file, path);
  assert_int_equal(e->line, line_of(text, "  - {op: \"mlp.act\""));
  assert_true(e->column > 1);
  unlink(path);

  /* no such file: PLAN_EIO naming it; NULL arguments */
  assert_int_equal(plan_lowered_load(&lb, "/nonexistent/x.lowered.yaml"),
                   PLAN_EIO);
  assert_string_equal(plan_error_last()->file, "/nonexistent/x.lowered.yaml");
  assert_int_equal(plan_lowered_load(&lb, NULL), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_load(NULL, path), PLAN_EUSAGE);
  free(bad);
  plan_buffer_free(text);
}

/* A lowered file verifies through the public API, reduced or not. */
static void test_verify_lowered(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  plan_lowered_free(l);
  plan_free(p);

  plan_lowered *lf = NULL, *red = NULL;
  assert_int_equal(plan_lowered_load_buffer(&lf, text, len, "m.yaml", NULL),
                   PLAN_OK);
  char *sum = NULL;
  assert_int_equal(plan_reduce_lowered(&red, &sum, lf), PLAN_OK);
  assert_non_null(strstr(sum, "reduced"));
  plan_buffer_free(sum);
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_lowered(&r, plan_lowered_plan(lf), lf, NULL),
                   PLAN_OK); /* takes lf */
  assert_true(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  assert_int_equal(plan_verify_lowered(&r, plan_lowered_plan(red), red, NULL),
                   PLAN_OK); /* takes red */
  assert_true(plan_verify_report_equal(r));
  plan_verify_report_free(r);
  plan_buffer_free(text);
}

static void test_error_set(void **state) {
  (void)state;
  plan_error_clear();
  assert_int_equal(
      plan_error_set(PLAN_EINVALID, "body.lua", 3, 7, "bad %s %d", "x", 42),
      PLAN_EINVALID);
  const plan_error *e = plan_error_last();
  assert_int_equal(e->code, PLAN_EINVALID);
  assert_string_equal(e->message, "bad x 42");
  assert_string_equal(e->file, "body.lua");
  assert_int_equal(e->line, 3);
  assert_int_equal(e->column, 7);
  char buf[256];
  assert_string_equal(plan_error_format(buf, sizeof buf),
                      "body.lua:3:7: error: bad x 42");
  /* no position: file "", line and column 0 (negative ones too) */
  assert_int_equal(plan_error_set(PLAN_EUSAGE, NULL, -2, -1, "%s", "plain"),
                   PLAN_EUSAGE);
  e = plan_error_last();
  assert_string_equal(e->file, "");
  assert_int_equal(e->line, 0);
  assert_int_equal(e->column, 0);
  assert_string_equal(plan_error_format(buf, sizeof buf), "error: plain");
  /* a message may quote the current one */
  plan_error_set(PLAN_EIO, "f", 1, 0, "wrapped: %s",
                 plan_error_last()->message);
  assert_string_equal(plan_error_last()->message, "wrapped: plain");
  /* long messages are truncated, never overrun */
  char big[3000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  plan_error_set(PLAN_ELIMIT, big, 1, 1, "%s", big);
  assert_true(strlen(plan_error_last()->message) < sizeof big - 1);
  assert_true(strlen(plan_error_last()->file) < sizeof big - 1);
  plan_error_clear();
  assert_int_equal(plan_error_last()->code, PLAN_OK);
}

static void test_buffer_free(void **state) {
  (void)state;
  plan_buffer_free(NULL);
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_write_buffer(&text, &len, p, NULL), PLAN_OK);
  plan_buffer_free(text);
  assert_int_equal(plan_canonical(&text, &len, p, PLAN_PART_PLAN), PLAN_OK);
  free(text); /* the same allocator */
  plan_free(p);
}

/* Each init gives its macro's values and refuses what it does not know,
 * leaving the struct as it was. */
static void test_options_init(void **state) {
  (void)state;
  plan_load_options lo, lm = PLAN_LOAD_OPTIONS_INIT;
  memset(&lo, 0x5a, sizeof lo);
  assert_int_equal(plan_load_options_init(&lo, PLAN_LOAD_OPTIONS_VERSION),
                   PLAN_OK);
  assert_int_equal(lo.version, lm.version);
  assert_int_equal(lo.threads, lm.threads);
  memset(&lo, 0x5a, sizeof lo);
  assert_int_equal(plan_load_options_init(&lo, 2), PLAN_EUSAGE);
  assert_int_equal(plan_load_options_init(&lo, 0), PLAN_EUSAGE);
  assert_int_equal(lo.threads, 0x5a5a5a5a);
  assert_int_equal(plan_load_options_init(NULL, 1), PLAN_EUSAGE);

  plan_write_options wo, wm = PLAN_WRITE_OPTIONS_INIT;
  memset(&wo, 0x5a, sizeof wo);
  assert_int_equal(plan_write_options_init(&wo, PLAN_WRITE_OPTIONS_VERSION),
                   PLAN_OK);
  assert_int_equal(wo.version, wm.version);
  assert_int_equal(wo.self_contained, wm.self_contained);
  assert_int_equal(plan_write_options_init(&wo, 9), PLAN_EUSAGE);
  assert_int_equal(plan_write_options_init(NULL, 1), PLAN_EUSAGE);

  plan_grad_options go, gm = PLAN_GRAD_OPTIONS_INIT;
  memset(&go, 0x5a, sizeof go);
  assert_int_equal(plan_grad_options_init(&go, PLAN_GRAD_OPTIONS_VERSION),
                   PLAN_OK);
  assert_int_equal(go.version, gm.version);
  assert_int_equal(go.inputs, gm.inputs);
  assert_int_equal(plan_grad_options_init(&go, 2), PLAN_EUSAGE);
  assert_int_equal(plan_grad_options_init(NULL, 1), PLAN_EUSAGE);

  plan_schedule_options so, sm = PLAN_SCHEDULE_OPTIONS_INIT;
  memset(&so, 0x5a, sizeof so);
  assert_int_equal(
      plan_schedule_options_init(&so, PLAN_SCHEDULE_OPTIONS_VERSION), PLAN_OK);
  assert_int_equal(so.version, sm.version);
  for (int k = 0; k < PLAN_ACTION_KIND_COUNT; k++)
    assert_int_equal(so.duration[k], sm.duration[k]);
  assert_int_equal(so.blocking_sends, sm.blocking_sends);
  assert_int_equal(so.note_blocking, sm.note_blocking);
  assert_int_equal(plan_schedule_options_init(&so, 0), PLAN_EUSAGE);
  assert_int_equal(plan_schedule_options_init(NULL, 1), PLAN_EUSAGE);

  plan_ref_options ro, rm = PLAN_REF_OPTIONS_INIT;
  memset(&ro, 0x5a, sizeof ro);
  assert_int_equal(plan_ref_options_init(&ro), PLAN_OK);
  assert_int_equal(ro.mode, rm.mode);
  assert_int_equal(ro.seed, rm.seed);
  assert_int_equal(ro.dtype, rm.dtype);
  assert_int_equal(plan_ref_options_init(NULL), PLAN_EUSAGE);
}

static void assert_verify_defaults(const plan_verify_options *o,
                                   unsigned int version) {
  plan_verify_options m = PLAN_VERIFY_OPTIONS_INIT;
  assert_int_equal(o->version, version);
  assert_int_equal(o->mode, m.mode);
  assert_int_equal(o->seed, m.seed);
  assert_true(o->rtol == m.rtol && o->atol == m.atol);
  assert_ptr_equal(o->dtype, m.dtype);
  if (version >= 3) {
    assert_ptr_equal(o->tolerances, m.tolerances);
    assert_int_equal(o->ntolerances, m.ntolerances);
  }
  if (version >= 4)
    assert_ptr_equal(o->runner, m.runner);
  if (version >= 5) {
    assert_int_equal(o->world, m.world);
    assert_int_equal(o->rank, m.rank);
    assert_ptr_equal(o->rendezvous, m.rendezvous);
    assert_true(o->timeout_s == m.timeout_s);
    assert_ptr_equal(o->comm, m.comm);
  }
  if (version >= 6)
    assert_true(o->memory_limit == m.memory_limit);
}

/* Verify options: every version from 2 on, and only its fields written. */
static void test_verify_options_init(void **state) {
  (void)state;
  static const size_t ends[] = {0,
                                0,
                                offsetof(plan_verify_options, tolerances),
                                offsetof(plan_verify_options, runner),
                                offsetof(plan_verify_options, world),
                                offsetof(plan_verify_options, memory_limit),
                                sizeof(plan_verify_options)};
  for (unsigned v = 2; v <= PLAN_VERIFY_OPTIONS_VERSION; v++) {
    plan_verify_options o;
    memset(&o, 0x5a, sizeof o);
    assert_int_equal(plan_verify_options_init(&o, v), PLAN_OK);
    assert_verify_defaults(&o, v);
    const unsigned char *bytes = (const unsigned char *)&o;
    for (size_t i = ends[v]; i < sizeof o; i++)
      assert_int_equal(bytes[i], 0x5a);
  }
  plan_verify_options o;
  memset(&o, 0x5a, sizeof o);
  assert_int_equal(plan_verify_options_init(&o, 1), PLAN_EUSAGE);
  assert_int_equal(
      plan_verify_options_init(&o, PLAN_VERIFY_OPTIONS_VERSION + 1),
      PLAN_EUSAGE);
  assert_int_equal(o.version, 0x5a5a5a5au);
  assert_int_equal(plan_verify_options_init(NULL, 5), PLAN_EUSAGE);
}

static void test_runner_check(void **state) {
  (void)state;
  assert_int_equal(plan_runner_check(NULL), PLAN_OK);
  assert_int_equal(plan_runner_check("cpu"), PLAN_OK);
  assert_int_equal(plan_runner_check("tpu"), PLAN_EUSAGE);
  assert_non_null(strstr(plan_error_last()->message, "tpu"));
  /* cuda: a plugin that may not be here; either way a status and, when
   * it cannot run, the reason */
  int rc = plan_runner_check("cuda");
  assert_true(rc == PLAN_OK || rc == PLAN_EUNSUPPORTED);
  if (rc)
    assert_true(plan_error_last()->message[0] != '\0');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lowered_roundtrip),
      cmocka_unit_test(test_lowered_pipeline),
      cmocka_unit_test(test_lowered_null_arguments),
      cmocka_unit_test(test_lowered_program_by_path),
      cmocka_unit_test(test_is_lowered_text),
      cmocka_unit_test(test_lowered_load_errors),
      cmocka_unit_test(test_verify_lowered),
      cmocka_unit_test(test_error_set),
      cmocka_unit_test(test_buffer_free),
      cmocka_unit_test(test_options_init),
      cmocka_unit_test(test_verify_options_init),
      cmocka_unit_test(test_runner_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
