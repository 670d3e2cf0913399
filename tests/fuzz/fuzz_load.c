/* libFuzzer target for the plan loader and everything a loaded plan goes
 * through: any bytes either load, or fail with a positioned error; a plan
 * that loads validates, writes in canonical layout, reloads from that text
 * and hashes exactly as before, part by part, and its second writing is
 * byte-identical to the first. Built with ASan and UBSan (`make fuzz`), so
 * crashes, leaks and undefined behaviour are findings too.
 *
 * Programs given by path are resolved under /nonexistent, so the fuzzer
 * never reads the file system. Aborting (__builtin_trap) is how a fuzz
 * target reports a broken invariant; the library itself never aborts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/libplan.h"
#include "read/plan_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x))                                                                  \
      __builtin_trap();                                                        \
  } while (0)

static const int parts[] = {PLAN_PART_PLAN, PLAN_PART_PROGRAM, PLAN_PART_MESH,
                            PLAN_PART_PROVENANCE};
#define NPARTS 4

static void hash_all(const plan_plan *p, int rc[NPARTS], plan_hash h[NPARTS]) {
  for (int k = 0; k < NPARTS; k++) {
    h[k].high = h[k].low = 0;
    rc[k] = plan_hash_part(&h[k], p, (plan_part)parts[k]);
    CHECK(rc[k] == PLAN_OK || rc[k] == PLAN_ENOTFOUND || rc[k] == PLAN_ENOMEM);
  }
}

static void load_error_ok(int rc) {
  const plan_error *e = plan_error_last();
  CHECK(rc < 0);
  CHECK(e->code == rc);
  CHECK(e->message && e->message[0]);
  /* every input error names a position; resource errors may not */
  if (rc == PLAN_ESYNTAX || rc == PLAN_ESCHEMA || rc == PLAN_EINVALID ||
      rc == PLAN_EVERSION)
    CHECK(e->line >= 1 && e->column >= 1);
}

/* The pipelined loader (a reader thread beside the parser) must give the
 * same answer as the sequential one on any input: same status, same error
 * position and message, same hashes. Checked on every input: fuzz inputs
 * are small, so the default would never pipeline them. */
static void pipeline_agrees(const uint8_t *data, size_t size, int rc_seq,
                            const plan_plan *seq) {
  char msg[1024];
  const plan_error *e = plan_error_last();
  int line = e->line, col = e->column;
  strncpy(msg, e->message, sizeof msg - 1);
  msg[sizeof msg - 1] = 0;
  plan_plan *q = NULL;
  int rc = plan_load_buffer_mode(&q, (const char *)data, size, "fuzz.yaml",
                                 "/nonexistent", PLAN_LOAD_PIPED);
  if (rc == PLAN_ENOMEM || rc_seq == PLAN_ENOMEM) {
    plan_free(q);
    return;
  }
  CHECK(rc == rc_seq);
  if (rc != PLAN_OK) {
    e = plan_error_last();
    CHECK(e->line == line && e->column == col && !strcmp(e->message, msg));
    return;
  }
  int r1[NPARTS], r2[NPARTS];
  plan_hash h1[NPARTS], h2[NPARTS];
  hash_all(seq, r1, h1);
  hash_all(q, r2, h2);
  for (int k = 0; k < NPARTS; k++)
    CHECK(r1[k] == r2[k] && plan_hash_equal(h1[k], h2[k]));
  plan_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer_mode(&p, (const char *)data, size, "fuzz.yaml",
                                 "/nonexistent", PLAN_LOAD_SEQUENTIAL);
  pipeline_agrees(data, size, rc, p);
  if (rc != PLAN_OK) {
    CHECK(p == NULL);
    load_error_ok(rc);
    return 0;
  }
  CHECK(p != NULL);

  /* validation always answers */
  plan_diags *d = NULL;
  rc = plan_validate(&d, p);
  CHECK(rc == PLAN_OK || rc == PLAN_ENOMEM);
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    CHECK(g && g->code[0] && g->message[0]);
  }
  plan_diags_free(d);

  /* a plan is its own diff and drift */
  d = NULL;
  if (plan_diff(&d, p, p) == PLAN_OK)
    CHECK(plan_diags_count(d) == 0);
  plan_diags_free(d);
  d = NULL;
  if (plan_drift(&d, p, plan_get_program(p)) == PLAN_OK)
    CHECK(plan_diags_count_at_least(d, PLAN_SEV_WARNING) == 0);
  plan_diags_free(d);

  int rc0[NPARTS];
  plan_hash h0[NPARTS];
  hash_all(p, rc0, h0);

  /* write, reload (self-contained, so no file is needed), compare */
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  o.self_contained = 1;
  char *w1 = NULL;
  size_t n1 = 0;
  rc = plan_write_buffer(&w1, &n1, p, &o);
  CHECK(rc == PLAN_OK || rc == PLAN_ENOMEM);
  if (rc == PLAN_OK) {
    CHECK(w1 && strlen(w1) == n1);
    plan_plan *q = NULL;
    rc = plan_load_buffer(&q, w1, n1, "fuzz-written.yaml", "/nonexistent");
    CHECK(rc == PLAN_OK); /* whatever loads must reload from its writing */
    int rc1[NPARTS];
    plan_hash h1[NPARTS];
    hash_all(q, rc1, h1);
    for (int k = 0; k < NPARTS; k++) {
      CHECK(rc0[k] == rc1[k]);
      if (rc0[k] == PLAN_OK)
        CHECK(plan_hash_equal(h0[k], h1[k]));
    }
    char *w2 = NULL;
    size_t n2 = 0;
    if (plan_write_buffer(&w2, &n2, q, &o) == PLAN_OK)
      CHECK(n1 == n2 && memcmp(w1, w2, n1) == 0);
    free(w2);
    plan_free(q);
  }
  free(w1);

  /* the plain writer too (a by-path plan keeps its path) */
  char *w = NULL;
  if (plan_write_buffer(&w, NULL, p, NULL) == PLAN_OK)
    CHECK(w != NULL);
  free(w);

  /* canonical encodings are NUL-free and hash to the part hashes */
  for (int k = 0; k < NPARTS; k++) {
    char *c = NULL;
    size_t len = 0;
    int crc = plan_canonical(&c, &len, p, (plan_part)parts[k]);
    if (crc == PLAN_OK) {
      CHECK(strlen(c) == len);
      CHECK(rc0[k] == PLAN_OK);
    }
    free(c);
  }
  plan_free(p);
  return 0;
}
