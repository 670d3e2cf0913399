/* The pipeline schedule's time and memory for the cost model.
 *
 * Training pipelines run the schedule module's action lists (the named
 * schedule generated for the plan's stages, ranks and microbatches, or
 * the plan's explicit grid: plan_schedule_from_plan) with each stage's own
 * durations: every rank executes its actions in order, an action starts
 * when its rank is free and its dependencies are done (F(s, j) after
 * F(s-1, j); B or I (s, j) after F(s, j) and B or I (s+1, j); W after I),
 * sends and receives take no time of their own (a stage's transfers are in
 * its F and B). The schedule module's own simulation times every stage
 * alike (integer units per action kind); stages of unequal cost need this
 * one. The activations a stage holds follow from the order of its rank's
 * actions alone: +1 at each F, -1 at its B, or at its W when the backward
 * is split (W reads the saved inputs).
 *
 * Forward-only pipelines stream: m max_r t_r + (sum_r t_r - max_r t_r),
 * one microbatch in flight per stage. The same closed forms price a
 * schedule that cannot be generated (plan_cost_schedule_closed_form):
 *   gpipe, 1f1b:       m max_r t_r + (sum_r t_r - max_r t_r)
 *   interleaved-1f1b:  the fill and drain divided by v = stages / ranks
 *   zb-h1:             the fill made of t_r - 2 w_r (ZB-H1's
 *                      (R - 1)(F + B - W), B the input-gradient half)
 * with t_r one microbatch's forward + backward on rank r. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"
#include "schedule/schedule_actions.h"

static int pipeline_ranks(const plan_plan *p) {
  const plan_pipeline *pp = &p->pipeline;
  if (pp->axis >= 0 && pp->axis < p->mesh.naxes)
    return (int)p->mesh.axis_sizes[pp->axis];
  return pp->nstages > 0 ? pp->nstages : 1;
}

int plan_cost_schedule_closed_form(double *step, double *bubble,
                                   const plan_plan *p, const double *fwd,
                                   const double *bwd, const double *wgt,
                                   int nstages) {
  *step = *bubble = 0;
  if (nstages < 1)
    return PLAN_OK;
  int R = pipeline_ranks(p);
  double *t = calloc((size_t)R * 2, sizeof(double));
  if (!t)
    return plan_oom();
  double *w = t + R;
  for (int s = 0; s < nstages; s++) {
    int r = plan_schedule_kind_stage_rank(p->pipeline.schedule, R, s);
    t[r] += fwd[s] + bwd[s];
    w[r] += wgt[s];
  }
  double m =
      (double)(p->pipeline.microbatches > 0 ? p->pipeline.microbatches : 1);
  double v = nstages > R ? (double)nstages / R : 1;
  double tmax = 0, sum = 0;
  int rmax = 0;
  for (int r = 0; r < R; r++) {
    if (t[r] > tmax) {
      tmax = t[r];
      rmax = r;
    }
    sum += t[r];
  }
  double fill = sum - tmax;
  if (p->training.present &&
      p->pipeline.schedule == PLAN_SCHED_INTERLEAVED_1F1B)
    fill /= v;
  else if (p->training.present && p->pipeline.schedule == PLAN_SCHED_ZB_H1) {
    fill = 0;
    for (int r = 0; r < R; r++)
      if (r != rmax)
        fill += fmax(0, t[r] - 2 * w[r]);
  }
  free(t);
  *step = m * tmax + fill;
  *bubble = fill;
  return PLAN_OK;
}

/* Runs the action lists; -1 when they deadlock (cannot happen for a
 * validated plan), else PLAN_OK or PLAN_ENOMEM. A send or receive takes
 * no time: it starts and ends when its rank reaches it. */
int plan_cost_schedule_actions(double *step, double *bubble, double *inflight,
                               const plan_schedule *sc, const double *fwd,
                               const double *bwd, const double *wgt, double *t0,
                               double *t1) {
  int S = sc->nstages, R = sc->nranks;
  int64_t M = sc->nmb, cells = (int64_t)S * M;
  double *end_f = malloc(sizeof(double) * (size_t)cells * 3);
  double *t_free = calloc((size_t)R * 2, sizeof(double));
  int64_t *pos = calloc((size_t)R, sizeof(int64_t));
  double *live = calloc((size_t)S * 3, sizeof(double));
  if (!end_f || !t_free || !pos || !live) {
    free(end_f);
    free(t_free);
    free(pos);
    free(live);
    return plan_oom();
  }
  double *end_b = end_f + cells, *end_w = end_b + cells; /* B or I; W */
  /* at_peak[s]: stage s's activations held when its rank holds the most
   * (several stages share a rank under interleaved and V schedules: the
   * device holds their sum at one moment, not each stage's own peak) */
  double *busy = t_free + R, *peak = live + S, *at_peak = peak + S;
  for (int64_t i = 0; i < cells * 3; i++)
    end_f[i] = -1;
  /* activations held: from the order of each rank's actions */
  for (int r = 0; r < R; r++) {
    bool split = false;
    for (int64_t i = sc->off[r]; i < sc->off[r + 1]; i++)
      split |= sc->acts[i].kind == PLAN_ACT_I;
    double held = 0, most = 0;
    for (int64_t i = sc->off[r]; i < sc->off[r + 1]; i++) {
      const plan_action *a = &sc->acts[i];
      if (a->stage < 0 || a->stage >= S)
        continue;
      if (a->kind == PLAN_ACT_F) {
        if (++live[a->stage] > peak[a->stage])
          peak[a->stage] = live[a->stage];
        if (++held > most) { /* this rank's stages: only they are live */
          most = held;
          for (int64_t k = sc->off[r]; k < sc->off[r + 1]; k++) {
            int st = sc->acts[k].stage;
            if (st >= 0 && st < S)
              at_peak[st] = live[st];
          }
        }
      } else if (a->kind == (split ? PLAN_ACT_W : PLAN_ACT_B)) {
        live[a->stage]--;
        held--;
      }
    }
  }
  int64_t left = 0;
  for (int r = 0; r < R; r++)
    left += sc->off[r + 1] - sc->off[r];
  int rc = PLAN_OK;
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < R; r++) {
      while (sc->off[r] + pos[r] < sc->off[r + 1]) {
        const plan_action *a = &sc->acts[sc->off[r] + pos[r]];
        int s = a->stage;
        int64_t j = a->microbatch, c = (int64_t)s * M + j;
        double dep = 0, dur = 0, *endp = NULL;
        bool ready = true;
        if (s < 0 || s >= S || j < 0 || j >= M || a->kind >= PLAN_ACT_SEND_F) {
          /* transfers are priced inside F and B */
        } else if (a->kind == PLAN_ACT_F) {
          if (s > 0)
            ready = (dep = end_f[c - M]) >= 0;
          dur = fwd[s];
          endp = &end_f[c];
        } else if (a->kind == PLAN_ACT_B || a->kind == PLAN_ACT_I) {
          ready = (dep = end_f[c]) >= 0;
          if (ready && s + 1 < S) {
            ready = end_b[c + M] >= 0;
            dep = fmax(dep, end_b[c + M]);
          }
          dur = a->kind == PLAN_ACT_B ? bwd[s] : fmax(0, bwd[s] - wgt[s]);
          endp = &end_b[c];
        } else { /* W */
          ready = (dep = end_b[c]) >= 0;
          dur = fmin(wgt[s], bwd[s]);
          endp = &end_w[c];
        }
        if (!ready)
          break;
        double start = fmax(t_free[r], dep);
        if (t0)
          t0[sc->off[r] + pos[r]] = start;
        if (t1)
          t1[sc->off[r] + pos[r]] = start + dur;
        t_free[r] = start + dur;
        busy[r] += dur;
        if (endp)
          *endp = start + dur;
        pos[r]++;
        left--;
        progress = true;
      }
    }
    if (!progress) {
      rc = -1;
      break;
    }
  }
  if (rc == PLAN_OK) {
    double makespan = 0, most = 0;
    for (int r = 0; r < R; r++) {
      makespan = fmax(makespan, t_free[r]);
      most = fmax(most, busy[r]);
    }
    *step = makespan;
    *bubble = makespan - most;
    for (int s = 0; inflight && s < S; s++)
      inflight[s] = peak[s] > 0 ? at_peak[s] : 1;
  }
  free(end_f);
  free(t_free);
  free(pos);
  free(live);
  return rc;
}

int plan_cost_schedule_time(double *step, double *bubble, double *inflight,
                            const plan_plan *p, const double *fwd,
                            const double *bwd, const double *wgt, int nstages) {
  *step = *bubble = 0;
  for (int s = 0; inflight && s < nstages; s++)
    inflight[s] = 1;
  if (nstages < 1)
    return PLAN_OK;
  if (p->training.present) {
    plan_schedule *sc = NULL;
    if (plan_schedule_from_plan(&sc, p) == PLAN_OK && sc->nstages == nstages) {
      int rc = plan_cost_schedule_actions(step, bubble, inflight, sc, fwd, bwd,
                                          wgt, NULL, NULL);
      plan_schedule_free(sc);
      if (rc != -1)
        return rc;
    } else {
      plan_schedule_free(sc);
    }
    /* not generated (too large, or stages that do not fit it): the closed
     * forms, GPipe's memory */
    double m =
        (double)(p->pipeline.microbatches > 0 ? p->pipeline.microbatches : 1);
    for (int s = 0; inflight && s < nstages; s++)
      inflight[s] = m;
  }
  return plan_cost_schedule_closed_form(step, bubble, p, fwd, bwd, wgt,
                                        nstages);
}
