/* A user's program of libplan-search, built against an installed prefix
 * (tests/install/run.sh): searches a plan for PROGRAM on dp=2,tp=2 with
 * the megatron strategy, in-process, and prints its plan hash. Exit 0
 * found, 1 the strategy failed, 2 unreadable input or bad usage. */
#include <libplan/libplan.h>
#include <libplan/search.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: search PROGRAM\n");
    return 2;
  }
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.strategy = "megatron";
  o.mesh = "dp=2,tp=2";
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p = NULL;
  int rc = plan_search(&p, &info, argv[1], &o);
  int code = 0;
  if (rc == PLAN_OK) {
    plan_hash h;
    char text[PLAN_HASH_STRLEN];
    if (plan_hash_part(&h, p, PLAN_PART_PLAN) == PLAN_OK)
      printf("%s\n", plan_hash_format(h, text));
    else
      code = 2;
    plan_free(p);
  } else {
    char buf[1024];
    fprintf(stderr, "search: %s\n",
            info.details ? info.details : plan_error_format(buf, sizeof buf));
    code = info.strategy_ran ? 1 : 2;
  }
  plan_search_info_clear(&info);
  return code;
}
