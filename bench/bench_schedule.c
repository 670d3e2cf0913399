/* Schedule simulation benchmark: each named schedule for a 64-stage,
 * 256-microbatch pipeline, generated and simulated (the checks of an
 * explicit grid, the run of every rank, the bubble and the peak
 * activations), plus the same 1F1B as an explicit grid parsed from text.
 *
 * usage: bench_schedule [--stages S] [--microbatches M] [-n REPS]
 *
 * Per schedule, best of REPS wall-clock runs (CLOCK_MONOTONIC), after one
 * warm-up: "generate" is plan_schedule_generate (the compute order, one
 * run with implicit transfers to place the sends and receives);
 * "simulate" is plan_schedule_simulate with buffered sends (the checks,
 * the run, the statistics); "blocking" the same with blocking sends; the
 * target is judged on generate + simulate, what `plan schedule` does
 * between loading the plan and printing. interleaved-1f1b puts its 64
 * stages on 16 ranks (4 virtual stages each); the others on 64 ranks.
 *
 * Target (the issue): under 100 ms per schedule. PASS/FAIL per schedule;
 * the exit status is 0 unless something fails to run. */
#define _DEFAULT_SOURCE /* wait4, in bench_common.h */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "libplan/libplan.h"
#include "libplan/schedule.h"

#define TARGET_S 0.100

typedef struct row {
  const char *label;
  int kind, ranks;
  bool explicit_grid;
} row;

static void fail_last(const char *what) {
  char buf[1024];
  fprintf(stderr, "bench_schedule: %s: %s\n", what,
          plan_error_format(buf, sizeof buf));
}

/* The schedule's rows as grid text (one string per rank). */
static char **grid_rows(const plan_schedule *s) {
  int R = plan_schedule_ranks(s);
  char **rows = calloc((size_t)R, sizeof *rows);
  if (!rows)
    return NULL;
  for (int r = 0; r < R; r++) {
    int64_t n = plan_schedule_length(s, r);
    size_t cap = (size_t)n * 24 + 1, len = 0;
    rows[r] = malloc(cap);
    if (!rows[r])
      return NULL;
    rows[r][0] = 0;
    for (int64_t i = 0; i < n; i++) {
      plan_schedule_action a;
      plan_schedule_get(&a, s, r, i);
      len += (size_t)snprintf(
          rows[r] + len, cap - len, "%s%d%s%lld", i ? " " : "", a.stage,
          plan_action_kind_name(a.kind), (long long)a.microbatch);
    }
  }
  return rows;
}

static void free_rows(char **rows, int n) {
  for (int r = 0; rows && r < n; r++)
    free(rows[r]);
  free(rows);
}

/* One timed build: generated, or parsed from rows. */
static int build(plan_schedule **out, const row *w, int stages, int64_t m,
                 char **rows) {
  if (w->explicit_grid)
    return plan_schedule_from_grid(out, stages, m, (const char *const *)rows,
                                   w->ranks);
  return plan_schedule_generate(out, w->kind, w->ranks, stages, m);
}

static int simulate(plan_schedule *s, int blocking, size_t *findings) {
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  o.blocking_sends = blocking;
  plan_diags *d;
  int rc = plan_schedule_simulate(&d, s, &o);
  if (!rc) {
    *findings = plan_diags_count(d);
    plan_diags_free(d);
  }
  return rc;
}

int main(int argc, char **argv) {
  int stages = 64, reps = 5;
  int64_t m = 256;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--stages") && i + 1 < argc)
      stages = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--microbatches") && i + 1 < argc)
      m = atol(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_schedule [--stages S] [--microbatches M] "
                      "[-n REPS]\n");
      return 2;
    }
  }
  if (stages < 4 || stages % 4 || m < 1 || reps < 1) {
    fprintf(stderr, "bench_schedule: stages a multiple of 4, m >= 1, "
                    "reps >= 1\n");
    return 2;
  }
  const row rows_[] = {
      {"gpipe", PLAN_SCHEDULE_GPIPE, stages, false},
      {"1f1b", PLAN_SCHEDULE_1F1B, stages, false},
      {"interleaved-1f1b", PLAN_SCHEDULE_INTERLEAVED_1F1B, stages / 4, false},
      {"zb-h1", PLAN_SCHEDULE_ZB_H1, stages, false},
      {"explicit (1f1b)", PLAN_SCHEDULE_1F1B, stages, true},
  };
  printf("schedule simulation: %d stages x %lld microbatches, best of %d "
         "(ms)\n\n",
         stages, (long long)m, reps);
  printf("%-18s %5s %8s %9s %9s %9s %9s %8s %6s  %s\n", "schedule", "ranks",
         "actions", "generate", "simulate", "blocking", "total", "bubble",
         "peak", "target < 100 ms");
  int status = 0;
  for (size_t k = 0; k < sizeof rows_ / sizeof *rows_; k++) {
    const row *w = &rows_[k];
    char **text = NULL;
    if (w->explicit_grid) {
      plan_schedule *g;
      if (plan_schedule_generate(&g, w->kind, w->ranks, stages, m)) {
        fail_last(w->label);
        return 1;
      }
      text = grid_rows(g);
      plan_schedule_free(g);
      if (!text) {
        fprintf(stderr, "bench_schedule: out of memory\n");
        return 1;
      }
    }
    double best_gen = 1e9, best_sim = 1e9, best_blk = 1e9;
    size_t findings = 0;
    plan_schedule_result res = {0};
    int64_t actions = 0;
    for (int i = 0; i <= reps; i++) { /* i == 0: the warm-up */
      plan_schedule *s;
      double t0 = bench_now();
      if (build(&s, w, stages, m, text)) {
        fail_last(w->label);
        return 1;
      }
      double t1 = bench_now();
      size_t f1 = 0, f2 = 0;
      if (simulate(s, 1, &f2)) {
        fail_last(w->label);
        return 1;
      }
      double t2 = bench_now();
      if (simulate(s, 0, &f1)) {
        fail_last(w->label);
        return 1;
      }
      double t3 = bench_now();
      findings = f1 + f2;
      plan_schedule_result_get(&res, s);
      actions = 0;
      for (int r = 0; r < plan_schedule_ranks(s); r++)
        actions += plan_schedule_length(s, r);
      plan_schedule_free(s);
      if (i == 0)
        continue;
      if (t1 - t0 < best_gen)
        best_gen = t1 - t0;
      if (t2 - t1 < best_blk)
        best_blk = t2 - t1;
      if (t3 - t2 < best_sim)
        best_sim = t3 - t2;
    }
    free_rows(text, w->ranks);
    double total = best_gen + best_sim;
    bool ok = total < TARGET_S && findings == 0 && res.simulated;
    printf("%-18s %5d %8lld %9.2f %9.2f %9.2f %9.2f %7.2f%% %6d  %s\n",
           w->label, w->ranks, (long long)actions, 1e3 * best_gen,
           1e3 * best_sim, 1e3 * best_blk, 1e3 * total, 100.0 * res.bubble,
           res.peak_activations,
           ok              ? "PASS"
           : findings != 0 ? "FAIL (findings)"
                           : "FAIL");
    if (findings)
      status = 1;
  }
  printf("\n\"generate\" for the explicit grid is parsing its rows; peak: "
         "the largest per-rank peak of live activations.\n");
  return status;
}
