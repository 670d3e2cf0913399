/* libFuzzer target for lowered programs (spec/lowered-format.md): any bytes
 * either load, or fail with a positioned error; a lowered program that
 * loads writes, reloads from that text with the same hash, and writes
 * byte-identically a second time. Small programs are also verified: the
 * verifier must answer (equal or not) or fail cleanly, never crash or read
 * out of bounds, whatever steps a hand-written file holds.
 *
 * Programs given by path are resolved under /nonexistent, so the fuzzer
 * never reads the file system. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/libplan.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "read/plan_read.h"
#include "verify_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x))                                                                  \
      __builtin_trap();                                                        \
  } while (0)

/* Elements the simulated ranks would hold, to keep verification small. */
static int64_t sim_elements(const plan_lowered *l) {
  const plan_program *prog = l->plan->program;
  int64_t ranks = 1, n = 0;
  for (int a = 0; a < l->plan->mesh.naxes; a++)
    ranks *= l->plan->mesh.axis_sizes[a];
  for (int t = 0; t < prog->ntensors; t++) {
    int64_t e = 1;
    for (int d = 0; d < prog->tensors[t].rank; d++)
      e *= prog->tensors[t].dims[d];
    n += e;
    if (n > (1 << 20))
      return INT64_MAX;
  }
  return ranks > 64 ? INT64_MAX : n * ranks;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan_lowered *l = NULL;
  int rc = plan_lowered_load_buffer(&l, (const char *)data, size,
                                    "fuzz.lowered.yaml", "/nonexistent");
  if (rc) {
    const plan_error *e = plan_error_last();
    CHECK(!l);
    CHECK(e->code == rc && e->message && e->message[0]);
    if (rc == PLAN_ESYNTAX || rc == PLAN_ESCHEMA || rc == PLAN_EINVALID)
      CHECK(e->line >= 1 && e->column >= 1);
    return 0;
  }
  char *t1 = NULL, *t2 = NULL;
  size_t n1 = 0, n2 = 0;
  plan_hash h1, h2;
  if (plan_lowered_write(&t1, &n1, l) == PLAN_OK &&
      plan_lowered_hash(&h1, l) == PLAN_OK) {
    plan_lowered *l2 = NULL;
    rc = plan_lowered_load_buffer(&l2, t1, n1, "again.lowered.yaml",
                                  "/nonexistent");
    CHECK(rc == PLAN_OK || rc == PLAN_ENOMEM);
    if (!rc) {
      CHECK(plan_lowered_hash(&h2, l2) == PLAN_OK);
      /* the format version counts in the hash, and the writer writes the
       * current one (as for plans): an older minor version rehashes */
      if (l->plan->version_minor == PLAN_FORMAT_MINOR &&
          l->plan->program->version_minor == PLAN_FORMAT_MINOR)
        CHECK(plan_hash_equal(h1, h2));
      CHECK(plan_lowered_write(&t2, &n2, l2) == PLAN_OK);
      CHECK(n1 == n2 && !memcmp(t1, t2, n1));
      plan_lowered_free(l2);
    }
  }
  free(t1);
  free(t2);
  if (sim_elements(l) <= (1 << 16)) {
    plan_verify_report *r = NULL;
    rc = plan_verify_lowered(&r, l->plan, l, NULL); /* takes l */
    CHECK(rc == PLAN_OK || rc < 0);
    CHECK(!rc == !!r);
    plan_verify_report_free(r);
  } else {
    plan_lowered_free(l);
  }
  return 0;
}
