/* Manual regions through the C tracer interface (libplan/trace.h), with
 * tracers written in C: what the Lua host does, without Lua. The region of
 * examples/mlp-manual.plan.yaml (gelu, the row-parallel fc2 and its
 * all-reduce) traced right verifies equal; traced with relu it is caught
 * at the region's output; the builder refuses what the placements do not
 * allow, and an output left unset or in another placement. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/lowered.h"
#include "libplan/plan.h"
#include "libplan/trace.h"
#include "libplan/verify.h"
#include "lower/lower.h"

#define MANUAL "examples/mlp-manual.plan.yaml"

typedef struct how {
  const char *act;  /* "gelu" or a wrong op */
  bool reduce;      /* all-reduce the partial sums */
  const char *axis; /* of the all-reduce */
  bool set_output;
  int calls;
} how;

static int trace_mlp(void *user, plan_trace *t) {
  how *w = user;
  w->calls++;
  assert_string_equal(plan_trace_region(t), "row-parallel-by-hand");
  assert_int_equal(plan_trace_ninputs(t), 2);
  assert_string_equal(plan_trace_input_name(t, 0), "h");
  assert_string_equal(plan_trace_input_name(t, 1), "w2");
  assert_int_equal(plan_trace_noutputs(t), 1);
  assert_string_equal(plan_trace_output_name(t, 0), "y");
  assert_true(plan_trace_body_line(t) > 40);
  int h = plan_trace_input(t, 0), w2 = plan_trace_input(t, 1);
  char d[128];
  plan_trace_describe(t, h, d, sizeof d);
  assert_string_equal(d, "h [8, 64] S(0)S(1)");
  int a, y, rc;
  if ((rc = plan_trace_op(t, w->act, &h, 1, &a, 1)) < 0)
    return rc;
  int in[2] = {a, w2};
  if ((rc = plan_trace_op(t, "matmul", in, 2, &y, 1)) < 0)
    return rc;
  plan_trace_describe(t, y, d, sizeof d);
  assert_non_null(strstr(d, "S(0)P(sum)")); /* the rule's partial sums */
  if (w->reduce &&
      (y = plan_trace_collective(t, "all_reduce", y, w->axis, -1, -1)) < 0)
    return y;
  if (w->set_output && (rc = plan_trace_set_output(t, 0, y)) < 0)
    return rc;
  return PLAN_OK;
}

static plan_plan *load_manual(void) {
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, MANUAL), PLAN_OK);
  return p;
}

static void test_traced(void **state) {
  (void)state;
  plan_plan *p = load_manual();
  for (int mode = 0; mode < 2; mode++) {
    how w = {"gelu", true, "tp", true, 0};
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    plan_verify_report *r = NULL;
    assert_int_equal(plan_verify_traced(&r, p, &o, trace_mlp, &w), PLAN_OK);
    assert_int_equal(w.calls, 1);
    if (!plan_verify_report_equal(r))
      fprintf(stderr, "%s", plan_verify_report_text(r));
    assert_true(plan_verify_report_equal(r));
    /* the traced all-reduce, and no other */
    assert_int_equal(plan_verify_report_collectives(r, "all_reduce"), 1);
    plan_verify_report_free(r);
  }
  plan_free(p);
}

static void test_wrong_body(void **state) {
  (void)state;
  plan_plan *p = load_manual();
  how w = {"relu", true, "tp", true, 0};
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_traced(&r, p, NULL, trace_mlp, &w), PLAN_OK);
  assert_false(plan_verify_report_equal(r));
  assert_string_equal(plan_verify_report_first_op(r), "mlp.fc2");
  assert_string_equal(plan_verify_report_first_tensor(r), "y");
  plan_verify_report_free(r);
  plan_free(p);
}

static void test_refusals(void **state) {
  (void)state;
  plan_plan *p = load_manual();
  plan_verify_report *r = NULL;
  /* no tracer: the body needs a host */
  assert_int_equal(plan_verify(&r, p, NULL), PLAN_EUNSUPPORTED);
  assert_non_null(strstr(plan_error_last()->message, "Lua host"));
  struct {
    how w;
    const char *msg;
  } cases[] = {
      {{"gelu", false, "tp", true, 0},
       "output 'y' comes out as 'row-parallel-by-hand/2.matmul' in "
       "S(0)P(sum), where its boundary says S(0)R"},
      {{"gelu", true, "dp", true, 0},
       "all_reduce along 'dp' of 'row-parallel-by-hand/2.matmul'"},
      {{"gelu", true, "nope", true, 0}, "no mesh axis 'nope'"},
      {{"gelu", true, "tp", false, 0}, "the body leaves output 'y' unset"},
      {{"softmaxx", true, "tp", true, 0}, "no op 'softmaxx' in the registry"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_int_equal(plan_verify_traced(&r, p, NULL, trace_mlp, &cases[i].w),
                     PLAN_EINVALID);
    assert_null(r);
    const char *m = plan_error_last()->message;
    if (!strstr(m, cases[i].msg))
      fprintf(stderr, "got: %s\nwant: %s\n", m, cases[i].msg);
    assert_non_null(strstr(m, cases[i].msg));
    assert_non_null(strstr(m, "manual region 'row-parallel-by-hand'"));
  }
  plan_free(p);
}

/* An op on blocks whose placements its rule refuses: the builder says
 * why. */
static int trace_illegal(void *user, plan_trace *t) {
  (void)user;
  int h = plan_trace_input(t, 0), w2 = plan_trace_input(t, 1), y;
  int in[2] = {w2, h}; /* [64,16] x [8,64]: the shapes do not fit */
  int rc = plan_trace_op(t, "matmul", in, 2, &y, 1);
  return rc < 0 ? rc : PLAN_OK;
}

static int trace_attrs(void *user, plan_trace *t) {
  (void)user;
  int h = plan_trace_input(t, 0), a;
  /* gelu's attribute by name; a wrong name and a wrong type refused */
  assert_int_equal(plan_trace_attr_string(t, "approximate", "tanh"), PLAN_OK);
  assert_true(plan_trace_op(t, "gelu", &h, 1, &a, 1) >= 0);
  assert_int_equal(plan_trace_attr_int(t, "nope", 1), PLAN_OK);
  assert_true(plan_trace_op(t, "gelu", &h, 1, &a, 1) < 0);
  assert_non_null(
      strstr(plan_error_last()->message, "gelu has no attribute 'nope'"));
  assert_int_equal(plan_trace_attr_int(t, "approximate", 1), PLAN_OK);
  assert_true(plan_trace_op(t, "gelu", &h, 1, &a, 1) < 0);
  assert_non_null(strstr(plan_error_last()->message, "another type"));
  return plan_failf(PLAN_EINVALID, "stop here");
}

static void test_builder_errors(void **state) {
  (void)state;
  plan_plan *p = load_manual();
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_traced(&r, p, NULL, trace_illegal, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "matmul"));
  assert_int_equal(plan_verify_traced(&r, p, NULL, trace_attrs, NULL),
                   PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "stop here"));
  plan_free(p);
}

/* The lowered program as a file: the plan's program (no traced op in it),
 * the region with its body's hash, the ops it replaces and its traced
 * ops, and the step that gives y the traced value. */
static char *lowered_manual(const char *act, plan_hash *h) {
  plan_plan *p = load_manual();
  how w = {act, true, "tp", true, 0};
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower_traced(&l, p, trace_mlp, &w), PLAN_OK);
  char *text = NULL;
  size_t len;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  assert_int_equal(plan_lowered_hash(h, l), PLAN_OK);
  plan_lowered_free(l);
  plan_free(p);
  return text;
}

static plan_lowered *read_lowered(const char *text) {
  plan_lowered *l = NULL;
  int rc = plan_lowered_load_buffer(&l, text, strlen(text), "m.yaml", NULL);
  if (rc) {
    char b[1200];
    fprintf(stderr, "%s\n", plan_error_format(b, sizeof b));
  }
  assert_int_equal(rc, PLAN_OK);
  return l;
}

static int verify_file(const char *text, plan_verify_report **rep) {
  plan_lowered *l = read_lowered(text);
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_lowered(&r, plan_lowered_plan(l), l, NULL),
                   PLAN_OK);
  int eq = plan_verify_report_equal(r);
  if (rep)
    *rep = r;
  else
    plan_verify_report_free(r);
  return eq;
}

static void test_file_form(void **state) {
  (void)state;
  plan_hash h0, h1, h2;
  char *text = lowered_manual("gelu", &h0);
  const char *regions = strstr(text, "\nregions:\n");
  assert_non_null(regions);
  /* the program section is the plan's: the traced ops are the region's */
  char *prog = strndup(text, (size_t)(regions - text));
  assert_null(strstr(prog, "row-parallel-by-hand/"));
  free(prog);
  assert_non_null(strstr(regions, "  - name: \"row-parallel-by-hand\"\n"
                                  "    body_hash: \"xxh3:"));
  assert_non_null(strstr(regions, "replaces: [\"mlp.act\", \"mlp.fc2\"]"));
  assert_non_null(strstr(regions, "op: gelu, in: [h]"));
  assert_non_null(strstr(text, "{bind: \"y@0\", from: "));
  /* read back: the same text and hash, EQUAL from the file alone */
  plan_lowered *l = read_lowered(text);
  char *again = NULL;
  size_t len;
  assert_int_equal(plan_lowered_write(&again, &len, l), PLAN_OK);
  assert_string_equal(text, again);
  assert_int_equal(plan_lowered_hash(&h1, l), PLAN_OK);
  assert_true(plan_hash_equal(h0, h1));
  plan_lowered_free(l);
  assert_int_equal(verify_file(text, NULL), 1);
  /* another body: another program (and hash), NOT EQUAL at the region's
   * output */
  char *relu = lowered_manual("relu", &h2);
  assert_false(plan_hash_equal(h0, h2));
  plan_verify_report *r = NULL;
  assert_int_equal(verify_file(relu, &r), 0);
  assert_string_equal(plan_verify_report_first_op(r), "mlp.fc2");
  assert_string_equal(plan_verify_report_first_tensor(r), "y");
  plan_verify_report_free(r);
  /* the body's hash is covered by the lowered program's */
  char *other = strdup(text);
  char *hb = strstr(other, "body_hash: \"xxh3:") + strlen("body_hash: \"xxh3:");
  *hb = *hb == '0' ? '1' : '0';
  plan_lowered *lo = read_lowered(other);
  assert_int_equal(plan_lowered_hash(&h2, lo), PLAN_OK);
  assert_false(plan_hash_equal(h0, h2));
  plan_lowered_free(lo);
  plan_buffer_free(again);
  plan_buffer_free(relu);
  plan_buffer_free(text);
  free(other);
}

/* Malformed regions and binds: errors at their positions. */
static void test_file_errors(void **state) {
  (void)state;
  plan_hash h;
  char *text = lowered_manual("gelu", &h);
  static const struct {
    const char *from, *to, *words;
  } cases[] = {
      {"replaces: [\"mlp.act\"", "replaces: [\"mlp.nope\"",
       "the program has no op 'mlp.nope'"},
      {"body_hash: \"xxh3:", "body_hash: \"xx:", "is not a hash"},
      {"op: gelu, in: [h]", "op: gelu, in: [hh]", "'hh'"},
      {"{bind: \"y@0\"", "{bind: \"h@0\"", "a bind step gives"},
      {"    replaces:", "    replace:", "replace"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *at = strstr(text, cases[i].from);
    assert_non_null(at);
    size_t n = strlen(text) + strlen(cases[i].to) + 1;
    char *bad = malloc(n);
    assert_non_null(bad);
    snprintf(bad, n, "%.*s%s%s", (int)(at - text), text, cases[i].to,
             at + strlen(cases[i].from));
    plan_lowered *l = NULL;
    int rc = plan_lowered_load_buffer(&l, bad, strlen(bad), "m.yaml", NULL);
    char msg[1200];
    plan_error_format(msg, sizeof msg);
    if (rc == PLAN_OK || !strstr(msg, cases[i].words) ||
        !strstr(msg, "m.yaml:"))
      fprintf(stderr, "case %zu: rc %d: %s\n", i, rc, msg);
    assert_int_not_equal(rc, PLAN_OK);
    assert_null(l);
    assert_non_null(strstr(msg, cases[i].words));
    assert_non_null(strstr(msg, "m.yaml:"));
    free(bad);
  }
  plan_buffer_free(text);
}

/* The regions view: one region, the plan's program as the reference (its
 * ops and tensors before the traced ones), the region's traced ops after
 * them, the ops it replaces among the plan's, its body's hash as the file
 * form records it; the same read back from the file. */
static void check_regions_view(const plan_lowered *l, const plan_plan *ref) {
  plan_lowered_regions_info rg;
  assert_int_equal(plan_lowered_regions(&rg, l), PLAN_OK);
  assert_int_equal(rg.regions, 1);
  assert_non_null(rg.reference);
  if (ref)
    assert_ptr_equal(rg.reference, ref);
  const plan_program *orig = plan_get_program(rg.reference);
  const plan_program *prog = plan_get_program(plan_lowered_plan(l));
  assert_int_equal(rg.orig_ops, plan_program_op_count(orig));
  assert_int_equal(rg.orig_tensors, plan_program_tensor_count(orig));
  assert_true(plan_program_op_count(prog) > rg.orig_ops);
  plan_lowered_region_info ri;
  assert_int_equal(plan_lowered_region(&ri, l, 0), PLAN_OK);
  assert_string_equal(ri.name, "row-parallel-by-hand");
  assert_int_equal(ri.op_begin, rg.orig_ops);
  assert_int_equal(ri.op_end, plan_program_op_count(prog));
  assert_true(ri.nreplaces > 0);
  bool fc2 = false;
  for (int k = 0; k < ri.nreplaces; k++) {
    assert_true(ri.replaces[k] >= 0 && ri.replaces[k] < rg.orig_ops);
    fc2 = fc2 || !strcmp(plan_program_op_name(orig, ri.replaces[k]), "mlp.fc2");
  }
  assert_true(fc2);
  assert_true(ri.body_hash.high || ri.body_hash.low);
  assert_int_equal(plan_lowered_region(&ri, l, 1), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_regions(NULL, l), PLAN_EUSAGE);
}

static void test_regions_view(void **state) {
  (void)state;
  plan_plan *p = load_manual();
  how w = {"gelu", true, "tp", true, 0};
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower_traced(&l, p, trace_mlp, &w), PLAN_OK);
  check_regions_view(l, p);
  char *text = NULL;
  size_t len;
  assert_int_equal(plan_lowered_write(&text, &len, l), PLAN_OK);
  plan_lowered_region_info a;
  assert_int_equal(plan_lowered_region(&a, l, 0), PLAN_OK);
  plan_lowered *f = read_lowered(text);
  check_regions_view(f, NULL);
  plan_lowered_region_info b;
  assert_int_equal(plan_lowered_region(&b, f, 0), PLAN_OK);
  assert_true(plan_hash_equal(a.body_hash, b.body_hash));
  plan_lowered_free(f);
  free(text);
  plan_lowered_free(l);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_traced),
      cmocka_unit_test(test_wrong_body),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_file_form),
      cmocka_unit_test(test_file_errors),
      cmocka_unit_test(test_regions_view),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
