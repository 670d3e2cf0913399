/* Pipeline schedules inside the core: the representation every schedule
 * shares (generated or explicit), the checks and simulation
 * (schedule_sim.c) and the writers (schedule_out.c). The public view is
 * libplan/schedule.h. */
#ifndef LIBPLAN_SCHEDULE_ACTIONS_H
#define LIBPLAN_SCHEDULE_ACTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "libplan/schedule.h"

/* Generation and simulation hold per (stage, microbatch) indexes; beyond
 * this many pairs a schedule is refused (PLAN_ELIMIT). */
#define PLAN_SCHEDULE_MAX_CELLS ((int64_t)1 << 22)
/* Static checks of an explicit grid stop beyond this many pairs (a
 * schedule.grid finding), as validation always did. */
#define PLAN_SCHEDULE_MAX_CHECK_CELLS ((int64_t)50000000)

struct plan_schedule {
  int kind; /* plan_schedule_kind */
  int nranks, nstages;
  int64_t nmb;
  int *stage_rank; /* per stage */
  /* all actions, rank after rank: rank r owns acts[off[r] .. off[r+1]) */
  plan_action *acts;
  int64_t nacts;
  int64_t *off; /* nranks + 1 */
  char *file;   /* where an explicit grid's positions point; "" if none */
  plan_pos pos; /* the grid itself (findings about a whole rank) */
  /* the last simulation */
  bool simulated, deadlock;
  int64_t *start, *end; /* per action; -1 when not run */
  int64_t makespan;
  int64_t *rank_busy; /* per rank */
  int64_t *rank_wait; /* per rank after a deadlock: the action awaited, -1 */
  int *rank_peak, *rank_peak_w;   /* per rank */
  int *stage_peak, *stage_peak_w; /* per stage */
  int64_t dur[PLAN_ACT_COUNT];    /* durations of that run */
  bool blocking;                  /* that run's send semantics */
};

/* An empty schedule for `nranks` ranks and `nacts` actions (acts, off and
 * the result arrays allocated, times -1). stage_rank[s] = s mod nranks. */
int plan_schedule_alloc(plan_schedule **out, int kind, int nranks, int nstages,
                        int64_t nmb, int64_t nacts);

/* The rank of `stage` under a named kind's placement: s mod ranks, or
 * for the V kinds (zbv, dualpipev) s < R on rank s and s >= R on rank
 * 2R - 1 - s. */
int plan_schedule_kind_stage_rank(int kind, int ranks, int stage);

/* The static checks, then (when they found no error) the simulation
 * (schedule_sim.c). `d` receives the findings; *errors (may be NULL)
 * counts the errors added. */
int plan_schedule_run(plan_diags *d, plan_schedule *s,
                      const plan_schedule_options *o, size_t *errors);

/* Validation of a plan's explicit grid (validate.c): the grid's rows
 * against `ranks` (the pipeline axis size, 0 when there is none), the
 * static checks, and a simulation with buffered sends (schedule.deadlock). */
int plan_schedule_validate_grid(plan_diags *d, const plan_plan *p, int ranks);

/* "0F1", "1SEND_B3": the action's spelling in the grid grammar. buf holds
 * 48 bytes. */
char *plan_schedule_action_name(const plan_action *a, char *buf);

#endif
