/* A user's program of libplan-verify, built against an installed prefix
 * (tests/install/run.sh): verifies a plan on the CPU runner and prints
 * EQUAL or NOT EQUAL. Exit 0 equal, 1 not equal, 2 unreadable input,
 * 3 the check could not run. */
#include <libplan/libplan.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: verify PLAN\n");
    return 2;
  }
  char msg[512];
  plan_plan *p = NULL;
  if (plan_load(&p, argv[1]) != PLAN_OK) {
    fprintf(stderr, "verify: %s\n", plan_error_format(msg, sizeof msg));
    return 2;
  }
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  plan_verify_report *r = NULL;
  if (plan_verify(&r, p, &o) != PLAN_OK) {
    fprintf(stderr, "verify: %s\n", plan_error_format(msg, sizeof msg));
    plan_free(p);
    return 3;
  }
  int equal = plan_verify_report_equal(r);
  printf("%s\n", equal ? "EQUAL" : "NOT EQUAL");
  plan_verify_report_free(r);
  plan_free(p);
  return equal ? 0 : 1;
}
