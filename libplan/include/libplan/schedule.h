/* libplan: pipeline schedules.
 *
 * A schedule is one list of actions per pipeline rank (spec/plan-format.md
 * §4.4): F, B, I, W for a (stage, microbatch), and SEND_F / RECV_F /
 * SEND_B / RECV_B between consecutive stages on different ranks. Named
 * schedules (gpipe, 1f1b, interleaved-1f1b, zb-h1; looped-bfs,
 * interleaved-zb, zbv, dualpipev, which a plan names from format 1.1 on)
 * are generated; an
 * explicit grid is taken as written, with its file positions. Both go
 * through the same checks and the same simulation, which finds deadlocks
 * (naming the ranks that wait on each other) or computes the makespan,
 * the bubble fraction and the peak number of live activations per stage
 * and rank. docs/training-and-pipelines.md explains the model. */
#ifndef LIBPLAN_SCHEDULE_H
#define LIBPLAN_SCHEDULE_H

#include "common.h"
#include "diag.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Schedules by name. */
enum {
  PLAN_SCHEDULE_GPIPE = 0,
  PLAN_SCHEDULE_1F1B = 1,
  PLAN_SCHEDULE_INTERLEAVED_1F1B = 2, /* virtual stages: s on rank s mod R */
  PLAN_SCHEDULE_ZB_H1 = 3,            /* backward split into I and W */
  PLAN_SCHEDULE_EXPLICIT = 4,         /* a plan's own grid */
  /* Named by a plan file from format 1.1 on (a 1.0 file names the kinds
   * above); zbv and dualpipev place stage s >= R on rank 2R - 1 - s. */
  PLAN_SCHEDULE_LOOPED_BFS = 5,     /* v stages per rank, breadth first */
  PLAN_SCHEDULE_INTERLEAVED_ZB = 6, /* interleaved, I/W split (ZB1P) */
  PLAN_SCHEDULE_ZBV = 7,            /* zero bubble, 2 stages per rank in a V */
  PLAN_SCHEDULE_DUALPIPEV = 8,      /* DualPipe's V form, F and B paired */
  PLAN_SCHEDULE_KIND_COUNT = 9
};

/* Action kinds, the words of the grid grammar. */
enum {
  PLAN_ACTION_F = 0,      /* forward */
  PLAN_ACTION_B = 1,      /* full backward */
  PLAN_ACTION_I = 2,      /* backward: input-gradient half */
  PLAN_ACTION_W = 3,      /* backward: weight-gradient half */
  PLAN_ACTION_SEND_F = 4, /* stage s sends its activation to s+1 */
  PLAN_ACTION_RECV_F = 5, /* stage s receives it from s-1 */
  PLAN_ACTION_SEND_B = 6, /* stage s sends its input gradient to s-1 */
  PLAN_ACTION_RECV_B = 7, /* stage s receives it from s+1 */
  PLAN_ACTION_KIND_COUNT = 8
};

/* "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "explicit", "looped-bfs",
 * "interleaved-zb", "zbv", "dualpipev"; "?" when out of range. */
PLAN_API const char *plan_schedule_kind_name(int kind);
/* The kind of a name, or -1. */
PLAN_API int plan_schedule_kind_from_name(const char *name);
/* "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"; "?". */
PLAN_API const char *plan_action_kind_name(int kind);

typedef struct plan_schedule plan_schedule;

/* The schedule of a plan's pipeline: its explicit grid (positions kept for
 * findings), or the named schedule generated for its stages, ranks (the
 * pipeline axis size, or one rank per stage without an axis) and
 * microbatches. PLAN_ENOTFOUND when the plan has no pipeline; PLAN_EINVALID
 * when the stages do not fit the schedule (plan_validate says why);
 * PLAN_ELIMIT over 2^22 stage-microbatch pairs. Free with
 * plan_schedule_free. */
PLAN_API int plan_schedule_from_plan(plan_schedule **out, const plan_plan *p);

/* Generates a named schedule (not PLAN_SCHEDULE_EXPLICIT) for `stages`
 * stages on `ranks` ranks, stage s on rank s mod ranks (zbv and dualpipev:
 * s >= ranks on rank 2 ranks - 1 - s; plan_schedule_stage_rank says).
 * gpipe, 1f1b and zb-h1 need stages == ranks; interleaved-1f1b,
 * looped-bfs and interleaved-zb a multiple of ranks (interleaved-1f1b with
 * stages == ranks is 1f1b); zbv and dualpipev 2 ranks. PLAN_EINVALID (with the
 * reason) when the shape does not fit, PLAN_ELIMIT when it is too large. */
PLAN_API int plan_schedule_generate(plan_schedule **out, int kind, int ranks,
                                    int stages, int64_t microbatches);

/* An explicit grid from text: rows[r] is rank r's actions separated by
 * spaces ("0F0 0SEND_F0 0F1 ..."); stage s runs on rank s mod nrows.
 * PLAN_EINVALID naming the row and column of an action that does not
 * parse. The checks of plan_schedule_simulate judge the rest. */
PLAN_API int plan_schedule_from_grid(plan_schedule **out, int stages,
                                     int64_t microbatches,
                                     const char *const *rows, int nrows);

PLAN_API void plan_schedule_free(plan_schedule *s);

/* How the simulation times actions. Initialise with
 * PLAN_SCHEDULE_OPTIONS_INIT. duration[kind]: time units of each action
 * kind, >= 0 (default F 1, B 2, I 1, W 1: a full backward costs twice a
 * forward; send and receive 0). blocking_sends: 0 (default) a SEND
 * completes without waiting for its RECV (buffered, as batched isend);
 * 1: a SEND and its RECV complete together, when both ranks reach them.
 * note_blocking: with buffered sends, also try blocking ones and add a
 * note (schedule.blocking) with the cycle when they would deadlock. */
typedef struct plan_schedule_options {
  unsigned int version; /* PLAN_SCHEDULE_OPTIONS_VERSION */
  int64_t duration[PLAN_ACTION_KIND_COUNT];
  int blocking_sends;
  int note_blocking;
} plan_schedule_options;
#define PLAN_SCHEDULE_OPTIONS_VERSION 1
#define PLAN_SCHEDULE_OPTIONS_INIT                                             \
  { PLAN_SCHEDULE_OPTIONS_VERSION, {1, 2, 1, 1, 0, 0, 0, 0}, 0, 0 }
/* Fills *opts as PLAN_SCHEDULE_OPTIONS_INIT does. PLAN_EUSAGE, opts
 * unchanged, for a NULL opts or a version other than 1. */
PLAN_API int plan_schedule_options_init(plan_schedule_options *opts,
                                        unsigned int version);

/* Checks the schedule and runs it. Findings (codes schedule.*, spec §6) go
 * to *out: an action outside the pipeline or on the wrong rank, a missing
 * or repeated F/B/I/W, dependencies out of order on one rank (F before B,
 * I before W, a SEND after its compute, a RECV before it), unpaired
 * send/recv, and schedule.deadlock when the ranks wait on each other (the
 * message names every rank of the cycle, the action it waits at and the
 * action it waits for). Without errors the results below are set. Returns
 * PLAN_OK unless an allocation fails or opts is malformed (PLAN_EUSAGE).
 * opts NULL: the defaults. */
PLAN_API int plan_schedule_simulate(plan_diags **out, plan_schedule *s,
                                    const plan_schedule_options *opts);

/* ---- views (borrowed from s; -1 / NULL when out of range) ---------------- */

PLAN_API int plan_schedule_kind_of(const plan_schedule *s);
PLAN_API int plan_schedule_ranks(const plan_schedule *s);
PLAN_API int plan_schedule_stages(const plan_schedule *s);
PLAN_API int64_t plan_schedule_microbatches(const plan_schedule *s);
PLAN_API int plan_schedule_stage_rank(const plan_schedule *s, int stage);
/* Number of actions of a rank. */
PLAN_API int64_t plan_schedule_length(const plan_schedule *s, int rank);

typedef struct plan_schedule_action {
  int kind; /* PLAN_ACTION_* */
  int stage;
  int64_t microbatch;
  int64_t start, end; /* simulated; -1 before a simulation or not reached */
  int line, column;   /* an explicit grid's position in the plan; else 0 */
} plan_schedule_action;

/* Action `index` of `rank`. PLAN_ENOTFOUND when out of range. */
PLAN_API int plan_schedule_get(plan_schedule_action *out,
                               const plan_schedule *s, int rank, int64_t index);

typedef struct plan_schedule_result {
  int simulated;        /* the last simulation ran every action */
  int deadlock;         /* the last simulation stopped in a deadlock */
  int64_t makespan;     /* end of the last action */
  int64_t compute;      /* time in F/B/I/W, all ranks */
  double bubble;        /* time without F/B/I/W / (ranks x makespan) */
  int peak_activations; /* largest per-rank peak (see below) */
} plan_schedule_result;

/* Peak activations: microbatches whose F has run and whose B (or I) has
 * not, the activations a stage keeps for its backward. Pending W:
 * microbatches whose I has run and whose W has not (W keeps its inputs). */
typedef struct plan_schedule_rank_stats {
  int64_t busy;  /* time in F/B/I/W */
  double bubble; /* 1 - busy / makespan */
  int peak_activations;
  int peak_pending_w;
} plan_schedule_rank_stats;

typedef struct plan_schedule_stage_stats {
  int rank;
  int peak_activations;
  int peak_pending_w;
} plan_schedule_stage_stats;

PLAN_API int plan_schedule_result_get(plan_schedule_result *out,
                                      const plan_schedule *s);
/* PLAN_ENOTFOUND out of range, PLAN_EUSAGE before a complete simulation. */
PLAN_API int plan_schedule_rank_stats_get(plan_schedule_rank_stats *out,
                                          const plan_schedule *s, int rank);
PLAN_API int plan_schedule_stage_stats_get(plan_schedule_stage_stats *out,
                                           const plan_schedule *s, int stage);

/* Writes the schedule and its last simulation as `format`: "text" (rows of
 * actions, bubble, peaks), "yaml" or "json" (schema libplan-schedule/1,
 * with the grid in the plan's grammar), or "svg" (the per-rank timeline:
 * time to the right, F/B/I/W boxes with their microbatch, idle time as
 * gaps, a legend and a title). `name` (may be NULL) heads the text and the
 * picture. *out is NUL-terminated; free it with plan_buffer_free.
 * PLAN_EUSAGE for an unknown format. */
PLAN_API int plan_schedule_write(char **out, size_t *len,
                                 const plan_schedule *s, const char *format,
                                 const char *name);

#ifdef __cplusplus
}
#endif
#endif
