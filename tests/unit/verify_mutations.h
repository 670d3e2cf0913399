/* Shared by the verifier's tests: loading example plans, and the bugs the
 * corpus injects into lowered programs (each a mutation of one step). */
#ifndef TESTS_VERIFY_MUTATIONS_H
#define TESTS_VERIFY_MUTATIONS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "lower/lower.h"

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

/* The whole text of a file (malloc'd, NUL-terminated); fails the test
 * when it cannot be read. */
static inline char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *s = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *m = realloc(s, cap);
      assert_non_null(m);
      s = m;
    }
    size_t got = fread(s + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  s[n] = 0;
  return s;
}

/* s with the first `from` replaced by `to` (s is freed); fails the test
 * when s has no `from`. */
static inline char *replace(char *s, const char *from, const char *to) {
  char *at = strstr(s, from);
  if (!at)
    fail_msg("'%s' not found", from);
  size_t a = (size_t)(at - s), nf = strlen(from), nt = strlen(to);
  size_t rest = strlen(at + nf);
  char *r = malloc(a + nt + rest + 1);
  assert_non_null(r);
  memcpy(r, s, a);
  memcpy(r + a, to, nt);
  memcpy(r + a + nt, at + nf, rest + 1);
  free(s);
  return r;
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
