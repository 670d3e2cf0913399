/* Shared by the verifier's tests: loading example plans, and the bugs the
 * corpus injects into lowered programs (each a mutation of one step). */
#ifndef TESTS_VERIFY_MUTATIONS_H
#define TESTS_VERIFY_MUTATIONS_H

#include <stdio.h>

#include "libplan/plan.h"
#include "lower.h"

/* Loads a plan file; fails the test, with the error, when it does not. */
static inline plan_plan *load(const char *path) {
  plan_plan *p = NULL;
  if (plan_load(&p, path)) {
    char buf[512];
    fprintf(stderr, "%s\n", plan_error_format(buf, sizeof buf));
  }
  assert_non_null(p);
  return p;
}

/* The first REDIST step of `kind` in a lowered program. */
static inline plan_lstep *find_step(plan_lowered *l, plan_redist_kind kind) {
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_REDIST &&
        l->steps[i].redist.kind == kind)
      return &l->steps[i];
  return NULL;
}

typedef void (*mutation)(plan_lowered *l);

/* Bug: the all-reduce after the row-parallel matmul is dropped: each rank
 * keeps its partial sum. */
static inline void drop_all_reduce(plan_lowered *l) {
  plan_lstep *s = find_step(l, PLAN_REDIST_ALL_REDUCE);
  assert_non_null(s);
  s->redist.kind = PLAN_REDIST_RELABEL; /* copies, reduces nothing */
}

/* Bug: the reduce-scatter after the attention projection runs over the
 * wrong mesh axis (dp instead of tp). */
static inline void wrong_axis(plan_lowered *l) {
  plan_lstep *s = find_step(l, PLAN_REDIST_REDUCE_SCATTER);
  assert_non_null(s);
  s->redist.axis = 0;
}

/* Bug: an all-gather that leaves a shard behind (zeros where another
 * member's piece belongs). */
static inline void skip_gather(plan_lowered *l) {
  plan_lstep *s = find_step(l, PLAN_REDIST_ALL_GATHER);
  assert_non_null(s);
  s->redist.kind = PLAN_REDIST_RELABEL; /* keeps only its own piece */
}

#endif
