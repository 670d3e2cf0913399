/* libFuzzer target for plan_upgrade_buffer: any bytes either fail as the
 * loader fails (with a positioned error for bad input), or give a result.
 * A file the loader reads as format 0.x always upgrades (unless it already
 * carries an x-upgraded-from key, or allows no edit in place and would
 * lose entries that name nothing in canonical layout): the result reads as the
 * current version, validates with the same verdict, has no semantic difference,
 * and upgrading it again writes nothing. Built with ASan and UBSan (`make
 * fuzz`).
 *
 * Programs given by path are resolved under /nonexistent, so the fuzzer
 * never reads the file system. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/libplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x))                                                                  \
      __builtin_trap();                                                        \
  } while (0)

static size_t errors(const plan_plan *p) {
  plan_diags *d = NULL;
  if (plan_validate(&d, p))
    return (size_t)-1;
  size_t n = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  plan_diags_free(d);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  plan_plan *old = NULL;
  int lrc = plan_load_buffer(&old, text, size, "f.yaml", "/nonexistent");
  plan_upgrade_info info;
  char *out = NULL;
  size_t len = 0;
  int rc = plan_upgrade_buffer(&out, &len, &info, text, size, "f.yaml",
                               "/nonexistent");
  if (lrc) { /* the upgrade fails as the load does */
    CHECK(rc == lrc || rc == PLAN_ENOMEM);
    CHECK(!out);
    return 0;
  }
  if (rc) {
    const plan_error *e = plan_error_last();
    /* refused: a file that already holds a record, or one that allows no
     * edit in place and would lose entries in canonical layout */
    CHECK(rc == PLAN_ENOMEM ||
          (rc == PLAN_EINVALID && strstr(e->message, "x-upgraded-from") &&
           e->line >= 1) ||
          (rc == PLAN_EINVALID && strstr(e->message, "would lose entries")));
    CHECK(!out);
    plan_free(old);
    return 0;
  }
  CHECK(info.upgraded == (info.from_major < PLAN_FORMAT_MAJOR));
  if (!info.upgraded) {
    CHECK(!out);
    plan_free(old);
    return 0;
  }
  CHECK(out && strlen(out) == len);
  plan_plan *now = NULL;
  CHECK(plan_load_buffer(&now, out, len, "f.yaml", "/nonexistent") == PLAN_OK);
  CHECK(errors(now) == errors(old));
  plan_diags *d = NULL;
  CHECK(plan_diff(&d, old, now) == PLAN_OK);
  CHECK(plan_diags_count(d) == 0);
  plan_diags_free(d);
  plan_upgrade_info again;
  char *out2 = NULL;
  CHECK(plan_upgrade_buffer(&out2, NULL, &again, out, len, "f.yaml",
                            "/nonexistent") == PLAN_OK);
  CHECK(!again.upgraded && !out2);
  free(out);
  plan_free(now);
  plan_free(old);
  return 0;
}
