/* The pipelined loader (a reader thread fed by the parser, ypipe.c) must
 * behave exactly like the sequential one: same result, same error with the
 * same position, same hashes and findings, on every file we have (examples,
 * conformance vectors valid and invalid, the bad-input corpus) and on a
 * large generated plan with errors planted deep inside it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "read/plan_read.h"

typedef struct outcome {
  int rc;
  char err[1400];
  char hashes[4][PLAN_HASH_STRLEN];
  size_t findings, errors;
} outcome;

static void load_mode(const char *data, size_t len, const char *name,
                      const char *dir, int mode, outcome *o) {
  memset(o, 0, sizeof *o);
  plan_plan *p = NULL;
  o->rc = plan_load_buffer_mode(&p, data, len, name, dir, mode);
  if (o->rc) {
    plan_error_format(o->err, sizeof o->err);
    assert_null(p);
    return;
  }
  for (int k = 0; k < 4; k++) {
    plan_hash h;
    if (plan_hash_part(&h, p, (plan_part)k) == PLAN_OK)
      plan_hash_format(h, o->hashes[k]);
  }
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  o->findings = plan_diags_count(d);
  o->errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  plan_diags_free(d);
  plan_free(p);
}

static void same_both_ways(const char *data, size_t len, const char *name,
                           const char *dir) {
  outcome a, b;
  load_mode(data, len, name, dir, PLAN_LOAD_SEQUENTIAL, &a);
  load_mode(data, len, name, dir, PLAN_LOAD_PIPED, &b);
  if (a.rc != b.rc || strcmp(a.err, b.err))
    fprintf(stderr, "%s:\n  sequential %d %s\n  piped      %d %s\n", name, a.rc,
            a.err, b.rc, b.err);
  assert_int_equal(a.rc, b.rc);
  assert_string_equal(a.err, b.err);
  for (int k = 0; k < 4; k++)
    assert_string_equal(a.hashes[k], b.hashes[k]);
  assert_int_equal(a.findings, b.findings);
  assert_int_equal(a.errors, b.errors);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b)
    b[n] = 0;
  *len = (size_t)n;
  return b;
}

static int every_file(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".yaml"))
      continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len = 0;
    char *data = slurp(path, &len);
    assert_non_null(data);
    same_both_ways(data, len, path, dir);
    free(data);
    n++;
  }
  closedir(d);
  return n;
}

static void test_files_agree(void **state) {
  (void)state;
  int n = every_file("examples") + every_file("spec/vectors/valid") +
          every_file("spec/vectors/invalid") + every_file("tests/corpus/bad");
  assert_true(n > 150); /* run from the repository root */
}

/* A plan of `layers` MLP layers; `bad_layer` plants an error there. */
static char *big_plan(int layers, int bad_layer, const char *what,
                      size_t *len) {
  size_t cap = (size_t)layers * 700 + 4096, n = 0;
  char *b = malloc(cap);
  assert_non_null(b);
#define OUT(...) n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__)
  OUT("libplan: \"0.1\"\nprogram:\n  tensors:\n    x: {shape: [8, 16]}\n");
  for (int i = 0; i < layers; i++)
    OUT("    w%d: {shape: [16, 16], role: param}\n", i);
  OUT("  ops:\n");
  for (int i = 0; i < layers; i++) {
    const char *kind =
        i == bad_layer && !strcmp(what, "kind") ? "matmull" : "matmul";
    char in[32];
    snprintf(in, sizeof in, i ? "a%d" : "x", i - 1);
    OUT("    - {name: l%d.mm, op: %s, in: [%s, w%d], out: h%d}\n", i, kind, in,
        i, i);
    OUT("    - {name: l%d.act, op: relu, in: [h%d], out: a%d}\n", i, i, i);
  }
  OUT("mesh:\n  axes: [dp=2, tp=2]\nplacements:\n  x: S(0)R\n");
  for (int i = 0; i < layers; i++)
    OUT("  w%d: R%s\n", i,
        i == bad_layer && !strcmp(what, "placement") ? "S(7)" : "R");
  OUT("strategies:\n");
  for (int i = 0; i < layers; i++) {
    OUT("  l%d.mm: {in: [S(0)R, RR], out: S(0)R}\n", i);
    OUT("  l%d.act: {in: [S(0)R], out: %s}\n", i,
        i == bad_layer && !strcmp(what, "strategy") ? "S(0)Q" : "S(0)R");
  }
#undef OUT
  *len = n;
  return b;
}

static void test_big_plans_agree(void **state) {
  (void)state;
  static const char *const whats[] = {"none", "kind", "placement", "strategy"};
  for (size_t w = 0; w < sizeof whats / sizeof *whats; w++) {
    size_t len;
    char *data = big_plan(3000, 2500, whats[w], &len);
    assert_true(len > 500000);
    same_both_ways(data, len, "big.yaml", NULL);
    outcome o;
    load_mode(data, len, "big.yaml", NULL, PLAN_LOAD_PIPED, &o);
    assert_int_equal(o.rc == PLAN_OK, w == 0);
    free(data);
  }
}

static void test_load_options(void **state) {
  (void)state;
  size_t len;
  char *data = big_plan(3000, -1, "none", &len);
  plan_load_options one = PLAN_LOAD_OPTIONS_INIT, dflt = PLAN_LOAD_OPTIONS_INIT;
  one.threads = 1;
  plan_plan *a, *b;
  assert_int_equal(plan_load_buffer_ext(&a, data, len, "big.yaml", NULL, &one),
                   PLAN_OK);
  assert_int_equal(plan_load_buffer_ext(&b, data, len, "big.yaml", NULL, &dflt),
                   PLAN_OK);
  plan_hash ha, hb;
  assert_int_equal(plan_hash_part(&ha, a, PLAN_PART_PLAN), PLAN_OK);
  assert_int_equal(plan_hash_part(&hb, b, PLAN_PART_PLAN), PLAN_OK);
  assert_true(plan_hash_equal(ha, hb));
  plan_free(a);
  plan_free(b);
  plan_load_options bad = PLAN_LOAD_OPTIONS_INIT;
  bad.version = 99;
  assert_int_equal(plan_load_buffer_ext(&a, data, len, "big.yaml", NULL, &bad),
                   PLAN_EUSAGE);
  assert_null(a);
  bad.version = PLAN_LOAD_OPTIONS_VERSION;
  bad.threads = 7;
  assert_int_equal(plan_load_buffer_ext(&a, data, len, "big.yaml", NULL, &bad),
                   PLAN_EUSAGE);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_files_agree),
      cmocka_unit_test(test_big_plans_agree),
      cmocka_unit_test(test_load_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
