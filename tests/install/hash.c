/* A user's program of the core library, built against an installed prefix
 * (tests/install/run.sh): loads a plan, validates it and prints its plan
 * hash. Exit 0 valid, 1 findings of severity error, 2 unreadable input,
 * 3 a library that is not the one the headers describe. */
#include <libplan/libplan.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
  char msg[512];
  fprintf(stderr, "hash: %s: %s\n", what, plan_error_format(msg, sizeof msg));
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hash PLAN\n");
    return 2;
  }
  if (plan_abi_version() != PLAN_ABI_VERSION ||
      strcmp(plan_version_string(), PLAN_VERSION_STRING)) {
    fprintf(stderr, "hash: library %s (ABI %d), headers %s (ABI %d)\n",
            plan_version_string(), plan_abi_version(), PLAN_VERSION_STRING,
            PLAN_ABI_VERSION);
    return 3;
  }
  plan_plan *p = NULL;
  if (plan_load(&p, argv[1]) != PLAN_OK)
    return fail("load");
  plan_diags *d = NULL;
  if (plan_validate(&d, p) != PLAN_OK) {
    plan_free(p);
    return fail("validate");
  }
  size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  plan_diags_free(d);
  plan_hash h;
  if (plan_hash_part(&h, p, PLAN_PART_PLAN) != PLAN_OK) {
    plan_free(p);
    return fail("hash");
  }
  char buf[PLAN_HASH_STRLEN];
  printf("%s\n", plan_hash_format(h, buf));
  plan_free(p);
  return errors ? 1 : 0;
}
