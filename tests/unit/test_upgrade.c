/* Unit tests for upgrade.c: plan_upgrade_buffer rewrites a 0.1 file as the
 * current format, keeps its layout, records the old hashes and refuses what
 * it cannot read; plus the version policy it relies on (0.1 read as it is,
 * with a version.old note). Run from the repository root. */
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

#define BODY                                                                   \
  "program:\n"                                                                 \
  "  name: mlp\n"                                                              \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "    w: {shape: [16, 4], role: param}\n"                                     \
  "  ops:\n"                                                                   \
  "    - {name: fc, op: matmul, in: [x, w], out: y}  # the only op\n"          \
  "mesh:\n"                                                                    \
  "  axes: [dp=2]\n"                                                           \
  "placements:\n"                                                              \
  "  x: S(0)\n"                                                                \
  "strategies:\n"                                                              \
  "  fc: {in: [S(0), R], out: S(0)}\n"                                         \
  "provenance: {strategy: hand}\n"

static const char old_text[] = "# a small plan\n"
                               "libplan: \"0.1\"   # the version\n" BODY;

static plan_plan *load(const char *text, size_t len) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, len, "t.yaml", NULL);
  if (rc) {
    char buf[512];
    fail_msg("load failed: %s\n%s", plan_error_format(buf, sizeof buf), text);
  }
  return p;
}

static void hashes(plan_hash out[PLAN_UPGRADE_PARTS], const plan_plan *p) {
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++)
    assert_int_equal(plan_hash_part(&out[k], p, (plan_part)k), PLAN_OK);
}

static char *upgrade(plan_upgrade_info *info, const char *text, size_t len) {
  char *out = NULL;
  size_t n = 0;
  int rc = plan_upgrade_buffer(&out, &n, info, text, len, "t.yaml", NULL);
  if (rc) {
    char buf[512];
    fail_msg("upgrade failed: %s", plan_error_format(buf, sizeof buf));
  }
  assert_non_null(out);
  assert_int_equal(strlen(out), n);
  return out;
}

/* The result: the same text with the version line changed and the record
 * inserted after it; every hash reported before and after is what
 * plan_hash_part gives for the old and the new file. */
static void test_upgrade_text(void **state) {
  (void)state;
  plan_upgrade_info info;
  char *out = upgrade(&info, old_text, strlen(old_text));
  assert_int_equal(info.upgraded, 1);
  assert_int_equal(info.layout_kept, 1);
  assert_int_equal(info.program_by_path, 0);
  assert_int_equal(info.from_major, 0);
  assert_int_equal(info.from_minor, 1);
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++)
    assert_int_equal(info.has[k], 1);
  /* layout, comments and line numbers kept: the version replaced where it
   * stands, the record appended as the last key */
  static const char head[] =
      "# a small plan\nlibplan: \"1.0\"   # the version\n";
  assert_true(!strncmp(out, head, strlen(head)));
  assert_true(!strncmp(out + strlen(head), BODY, strlen(BODY)));
  const char *rec = out + strlen(head) + strlen(BODY);
  assert_true(!strncmp(rec, "x-upgraded-from:\n  libplan: \"0.1\"\n", 34));
  assert_null(strstr(rec + 1, "x-upgraded-from"));
  plan_plan *o = load(old_text, strlen(old_text));
  plan_plan *n = load(out, strlen(out));
  plan_hash ho[PLAN_UPGRADE_PARTS], hn[PLAN_UPGRADE_PARTS];
  hashes(ho, o);
  hashes(hn, n);
  static const char *const names[] = {"plan", "program", "mesh", "provenance"};
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++) {
    assert_true(plan_hash_equal(info.before[k], ho[k]));
    assert_true(plan_hash_equal(info.after[k], hn[k]));
    assert_false(plan_hash_equal(ho[k], hn[k])); /* the version is hashed */
    /* the record holds the old hash of every part */
    char line[80], hb[PLAN_HASH_STRLEN];
    snprintf(line, sizeof line, "\n  %s: \"%s\"\n", names[k],
             plan_hash_format(ho[k], hb));
    assert_non_null(strstr(rec, line));
  }
  /* the same content: no semantic difference, and the new file validates
   * without the version note the old one gets */
  plan_diags *d = NULL;
  assert_int_equal(plan_diff(&d, o, n), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  assert_int_equal(plan_validate(&d, n), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  assert_int_equal(plan_validate(&d, o), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 1);
  const plan_diag *g = plan_diags_get(d, 0);
  assert_string_equal(g->code, "version.old");
  assert_int_equal(g->severity, PLAN_SEV_NOTE);
  assert_int_equal(g->line, 2);
  assert_int_equal(g->column, 10);
  plan_diags_free(d);

  /* upgrading the result again: already current, nothing written */
  plan_upgrade_info again;
  char *none = (char *)"untouched";
  size_t nlen = 7;
  assert_int_equal(plan_upgrade_buffer(&none, &nlen, &again, out, strlen(out),
                                       "t.yaml", NULL),
                   PLAN_OK);
  assert_null(none);
  assert_int_equal(again.upgraded, 0);
  assert_int_equal(again.from_major, PLAN_FORMAT_MAJOR);
  assert_true(
      plan_hash_equal(again.before[PLAN_PART_PLAN], hn[PLAN_PART_PLAN]));
  plan_free(o);
  plan_free(n);
  free(out);
}

/* Spellings of the version line the edit handles, and a CRLF file whose
 * added lines end as its own do. */
static void test_spellings(void **state) {
  (void)state;
  static const char *const heads[] = {"libplan: 0.1\n", "libplan: '0.1'\n",
                                      "libplan:   \"0.1\"\n"};
  for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", heads[i], BODY);
    plan_upgrade_info info;
    char *out = upgrade(&info, text, strlen(text));
    assert_int_equal(info.layout_kept, 1);
    assert_true(!strncmp(out, "libplan: ", 9));
    assert_non_null(strstr(out, "\"1.0\"\nprogram:\n"));
    assert_non_null(strstr(out, "\nx-upgraded-from:\n"));
    free(out);
  }
  /* CRLF */
  char crlf[2048];
  size_t n = 0;
  for (const char *s = old_text; *s; s++) {
    if (*s == '\n')
      crlf[n++] = '\r';
    crlf[n++] = *s;
  }
  crlf[n] = 0;
  plan_upgrade_info info;
  char *out = upgrade(&info, crlf, n);
  assert_int_equal(info.layout_kept, 1);
  for (const char *s = out; *s; s++)
    if (*s == '\n')
      assert_true(s > out && s[-1] == '\r');
  assert_non_null(
      strstr(out, "\r\nx-upgraded-from:\r\n  libplan: \"0.1\"\r\n"));
  plan_upgrade_info again;
  char *none = NULL;
  assert_int_equal(plan_upgrade_buffer(&none, NULL, &again, out, strlen(out),
                                       "t.yaml", NULL),
                   PLAN_OK);
  assert_int_equal(again.upgraded, 0);
  free(out);
}

/* A file without a final line break gets one before the record; in one
 * with document markers (and a quoted key) the record goes before the end
 * marker, since nothing may follow it. */
static void test_file_ends(void **state) {
  (void)state;
  static const char nobreak[] = "libplan: \"0.1\"\nprogram: {ops: []}";
  plan_upgrade_info info;
  char *out = upgrade(&info, nobreak, strlen(nobreak));
  assert_int_equal(info.layout_kept, 1);
  assert_true(!strncmp(out,
                       "libplan: \"1.0\"\nprogram: {ops: []}\n"
                       "x-upgraded-from:\n",
                       strlen("libplan: \"1.0\"\nprogram: {ops: []}\n"
                              "x-upgraded-from:\n")));
  free(out);
  static const char marker[] =
      "---\n'libplan': '0.1'\nprogram: {ops: []}\n...\n# the end\n";
  out = upgrade(&info, marker, strlen(marker));
  assert_int_equal(info.layout_kept, 1);
  assert_true(!strncmp(out,
                       "---\n'libplan': \"1.0\"\nprogram: {ops: []}\n"
                       "x-upgraded-from:\n",
                       strlen("---\n'libplan': \"1.0\"\nprogram: {ops: []}\n"
                              "x-upgraded-from:\n")));
  assert_non_null(strstr(out, "\n...\n# the end\n"));
  free(out);
}

/* A root in flow style has no version line to edit: the result is in
 * canonical layout (the record last, as plan fmt writes x- keys), still the
 * same content. */
static void test_canonical_fallback(void **state) {
  (void)state;
  static const char flow[] =
      "{libplan: \"0.1\", program: {tensors: {x: {shape: [4]}}, ops: "
      "[{name: a, op: relu, in: x, out: y}]}}\n";
  plan_upgrade_info info;
  char *out = upgrade(&info, flow, strlen(flow));
  assert_int_equal(info.upgraded, 1);
  assert_int_equal(info.layout_kept, 0);
  assert_int_equal(info.has[PLAN_PART_PLAN], 0); /* a program file */
  assert_int_equal(info.has[PLAN_PART_PROGRAM], 1);
  assert_true(!strncmp(out, "libplan: \"1.0\"\n", 15));
  plan_plan *n = load(out, strlen(out));
  char *again = NULL;
  size_t alen = 0;
  assert_int_equal(plan_write_buffer(&again, &alen, n, NULL), PLAN_OK);
  assert_string_equal(again, out); /* canonical */
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, n, PLAN_PART_PROGRAM), PLAN_OK);
  assert_true(plan_hash_equal(h, info.after[PLAN_PART_PROGRAM]));
  free(again);
  plan_free(n);
  free(out);
}

/* A program by path is left as it is: its hash does not change, the plan's
 * does. */
static void test_program_by_path(void **state) {
  (void)state;
  static const char text[] = "libplan: \"0.1\"\n"
                             "program: {path: mlp-program.yaml}\n"
                             "mesh: {axes: [dp=2, tp=2]}\n";
  plan_upgrade_info info;
  char *out = NULL;
  assert_int_equal(plan_upgrade_buffer(&out, NULL, &info, text, strlen(text),
                                       "p.yaml", "examples"),
                   PLAN_OK);
  assert_non_null(out);
  assert_int_equal(info.program_by_path, 1);
  assert_true(plan_hash_equal(info.before[PLAN_PART_PROGRAM],
                              info.after[PLAN_PART_PROGRAM]));
  assert_false(
      plan_hash_equal(info.before[PLAN_PART_PLAN], info.after[PLAN_PART_PLAN]));
  assert_non_null(strstr(out, "program: {path: mlp-program.yaml}\n"));
  free(out);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

/* The program file upgraded first, then the plan that records its hash:
 * the recorded hash is brought along, and the old hashes are the plan's
 * before either upgrade. A recorded hash that matches neither version is
 * drift, left for validation to report. */
static void test_program_upgraded_first(void **state) {
  (void)state;
  static const char prog01[] =
      "libplan: \"0.1\"\nprogram:\n  tensors: {x: {shape: [8]}}\n"
      "  ops: [{name: a, op: relu, in: x, out: y}]\n";
  char dir[] = "/tmp/libplan-upgrade.XXXXXX";
  assert_non_null(mkdtemp(dir));
  write_file(dir, "prog.yaml", prog01);
  /* the plan as archived: 0.1, recording the 0.1 program's hash */
  plan_program *pr = NULL;
  assert_int_equal(
      plan_program_load_buffer(&pr, prog01, strlen(prog01), "prog.yaml"),
      PLAN_OK);
  plan_hash h01, h10;
  assert_int_equal(plan_program_hash(&h01, pr), PLAN_OK);
  plan_program_free(pr);
  char hb[PLAN_HASH_STRLEN], text[512];
  snprintf(text, sizeof text,
           "libplan: \"0.1\"\nprogram:\n  path: prog.yaml\n  hash: \"%s\"\n"
           "mesh: {axes: [dp=2]}\nstrategies:\n  a: {in: [S(0)], out: S(0)}\n",
           plan_hash_format(h01, hb));
  plan_plan *archived = NULL;
  assert_int_equal(
      plan_load_buffer(&archived, text, strlen(text), "p.yaml", dir), PLAN_OK);
  plan_hash plan01;
  assert_int_equal(plan_hash_part(&plan01, archived, PLAN_PART_PLAN), PLAN_OK);
  plan_free(archived);
  /* the program file upgraded on its own */
  plan_upgrade_info pi;
  char *p10 = NULL;
  assert_int_equal(plan_upgrade_buffer(&p10, NULL, &pi, prog01, strlen(prog01),
                                       "prog.yaml", dir),
                   PLAN_OK);
  write_file(dir, "prog.yaml", p10);
  h10 = pi.after[PLAN_PART_PROGRAM];
  free(p10);
  /* then the plan */
  plan_upgrade_info info;
  char *out = NULL;
  assert_int_equal(
      plan_upgrade_buffer(&out, NULL, &info, text, strlen(text), "p.yaml", dir),
      PLAN_OK);
  assert_int_equal(info.program_rehashed, 1);
  assert_true(plan_hash_equal(info.before[PLAN_PART_PROGRAM], h01));
  assert_true(plan_hash_equal(info.after[PLAN_PART_PROGRAM], h10));
  assert_true(plan_hash_equal(info.before[PLAN_PART_PLAN], plan01));
  char want[64];
  snprintf(want, sizeof want, "hash: \"%s\"", plan_hash_format(h10, hb));
  assert_non_null(strstr(out, want));
  plan_plan *n = NULL;
  assert_int_equal(plan_load_buffer(&n, out, strlen(out), "p.yaml", dir),
                   PLAN_OK);
  plan_diags *d = NULL;
  assert_int_equal(plan_validate(&d, n), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0); /* no program.changed */
  plan_diags_free(d);
  plan_free(n);
  free(out);
  /* a recorded hash of neither version: left as it is */
  snprintf(text, sizeof text,
           "libplan: \"0.1\"\nprogram:\n  path: prog.yaml\n  hash: "
           "\"xxh3:0123456789abcdef0123456789abcdef\"\n"
           "mesh: {axes: [dp=2]}\nstrategies:\n  a: {in: [S(0)], out: S(0)}\n");
  assert_int_equal(
      plan_upgrade_buffer(&out, NULL, &info, text, strlen(text), "p.yaml", dir),
      PLAN_OK);
  assert_int_equal(info.program_rehashed, 0);
  assert_non_null(strstr(out, "xxh3:0123456789abcdef0123456789abcdef"));
  free(out);
  char path[512];
  snprintf(path, sizeof path, "%s/prog.yaml", dir);
  assert_int_equal(remove(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* What cannot be upgraded: nothing returned, the error positioned. */
static void test_refusals(void **state) {
  (void)state;
  struct {
    const char *text;
    int code, line, col;
    const char *msg;
  } cases[] = {
      {"libplan: \"2.0\"\n" BODY, PLAN_EVERSION, 1, 10, "2.0"},
      {"libplan: \"0.2\"\n" BODY, PLAN_EVERSION, 1, 10, "does not exist"},
      {"libplan: \"0.1\"\nx-upgraded-from: {libplan: \"0.0\"}\n" BODY,
       PLAN_EINVALID, 2, 1, "x-upgraded-from"},
      {"libplan: \"0.1\"\nprogram: {ops: [\n", PLAN_ESYNTAX, 0, 0, ""},
      /* no edit in place (flow style), and the canonical layout would drop
       * the strategy of an op the program lacks */
      {"{libplan: \"0.1\", program: {tensors: {x: {shape: [4]}}, ops: "
       "[{name: a, op: relu, in: x, out: y}]}, mesh: {axes: [dp=2]}, "
       "strategies: {zz: {in: [R], out: R}}}\n",
       PLAN_EINVALID, 1, 11, "would lose entries"},
      {"libplan: \"0.1\"\nprogram: {path: none.yaml}\nmesh: {axes: [dp=2]}\n",
       PLAN_EIO, 2, 17, "none.yaml"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    plan_upgrade_info info;
    char *out = (char *)"untouched";
    int rc = plan_upgrade_buffer(&out, NULL, &info, cases[i].text,
                                 strlen(cases[i].text), "t.yaml", NULL);
    const plan_error *e = plan_error_last();
    if (rc != cases[i].code)
      fail_msg("case %zu: status %d, wanted %d: %s", i, rc, cases[i].code,
               e->message);
    assert_null(out);
    assert_string_equal(e->file, "t.yaml");
    if (cases[i].line) {
      assert_int_equal(e->line, cases[i].line);
      assert_int_equal(e->column, cases[i].col);
    }
    assert_non_null(strstr(e->message, cases[i].msg));
  }
  plan_upgrade_info info;
  char *out;
  assert_int_equal(
      plan_upgrade_buffer(&out, NULL, NULL, "x", 1, "t.yaml", NULL),
      PLAN_EUSAGE);
  assert_int_equal(plan_upgrade_buffer(NULL, NULL, &info, "x", 1, NULL, NULL),
                   PLAN_EUSAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_upgrade_text),
      cmocka_unit_test(test_spellings),
      cmocka_unit_test(test_file_ends),
      cmocka_unit_test(test_canonical_fallback),
      cmocka_unit_test(test_program_by_path),
      cmocka_unit_test(test_program_upgraded_first),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
