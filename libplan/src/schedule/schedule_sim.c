/* Checking and running a schedule: the static checks of spec §4.4 (every
 * action on its stage's rank, one F and one B or I+W per stage and
 * microbatch, dependencies in order on a rank, send/recv pairs), then a
 * simulation of the ranks.
 *
 * The simulation: each rank runs its list in order; an action starts when
 * the rank is free and what it needs is done. F(s) needs F(s-1) of the
 * microbatch and B/I(s) needs B/I(s+1), through a RECV where the grid has
 * one (the RECV needs its SEND), directly otherwise. With buffered sends a
 * SEND completes on its own; with blocking sends a SEND and its RECV
 * complete together once both ranks reach them. A rank that cannot go on
 * waits on exactly one action of another (or its own) rank, so when every
 * unfinished rank waits, following "waits for" from any of them ends in a
 * cycle of ranks: the deadlock, reported with each rank's position. Each
 * action runs once and each wait is woken once: O(actions + ranks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"
#include "schedule/schedule_actions.h"

typedef struct sim {
  plan_schedule *s;
  plan_diags *d;
  size_t errors;
  int rc;
  int64_t nmb;
  /* node + 1 of each action kind per (stage * nmb + microbatch); 0 = none */
  int32_t *at[PLAN_ACT_COUNT];
  /* check_cells: the cell's object name, written on its first finding */
  char *obj;
  int obj_stage;
  int64_t obj_mb;
} sim;

static void find(sim *x, plan_severity sev, const char *code,
                 const char *object, plan_pos pos, const char *fmt, ...)
    PLAN_PRINTF(6, 7);

static void find(sim *x, plan_severity sev, const char *code,
                 const char *object, plan_pos pos, const char *fmt, ...) {
  char msg[4096];
  if (x->obj && object == x->obj && !object[0])
    snprintf(x->obj, 64, "stage %d microbatch %lld", x->obj_stage,
             (long long)x->obj_mb);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int rc = plan_diags_add(x->d, sev, code, object, x->s->file, pos.line,
                          pos.col, "%s", msg);
  if (rc && !x->rc)
    x->rc = rc;
  if (sev == PLAN_SEV_ERROR)
    x->errors++;
}

static void sim_free(sim *x) {
  for (int k = 0; k < PLAN_ACT_COUNT; k++)
    free(x->at[k]);
}

/* Node of kind k at cell c, or -1. */
static int64_t node(const sim *x, int k, int64_t c) {
  return (int64_t)x->at[k][c] - 1;
}

/* The backward of a cell: its B, else its I. */
static int64_t bwd_node(const sim *x, int64_t c) {
  int64_t n = node(x, PLAN_ACT_B, c);
  return n >= 0 ? n : node(x, PLAN_ACT_I, c);
}

/* ---- static checks ----------------------------------------------------------
 */

/* Indexes the actions and reports those outside the pipeline, on the wrong
 * rank or repeated. */
static void check_actions(sim *x) {
  plan_schedule *s = x->s;
  int ns = s->nstages;
  int64_t nmb = s->nmb;
  for (int r = 0; r < s->nranks; r++)
    for (int64_t i = s->off[r]; i < s->off[r + 1]; i++) {
      const plan_action *a = &s->acts[i];
      char act[48];
      if (a->stage >= ns || a->microbatch >= nmb) {
        plan_schedule_action_name(a, act);
        find(x, PLAN_SEV_ERROR, "schedule.action", act, a->pos,
             "action %s on rank %d names stage %d / microbatch %d, but there "
             "are %d stages and %lld microbatches",
             act, r, a->stage, a->microbatch, ns, (long long)nmb);
        continue;
      }
      if (s->stage_rank[a->stage] != r) {
        plan_schedule_action_name(a, act);
        find(x, PLAN_SEV_ERROR, "schedule.rank", act, a->pos,
             "action %s is on rank %d, but stage %d runs on rank %d", act, r,
             a->stage, s->stage_rank[a->stage]);
        continue;
      }
      int64_t c = (int64_t)a->stage * nmb + a->microbatch;
      if (x->at[a->kind][c]) {
        plan_schedule_action_name(a, act);
        find(x, PLAN_SEV_ERROR, "schedule.duplicate", act, a->pos,
             "action %s appears more than once", act);
        continue;
      }
      x->at[a->kind][c] = (int32_t)(i + 1);
    }
}

/* `later` runs before `earlier` though it needs it: a schedule.order
 * finding at `later`. Both are nodes on one rank (or -1: nothing). */
static void need_before(sim *x, const char *obj, int64_t earlier,
                        int64_t later) {
  if (earlier < 0 || later < 0 || later > earlier)
    return;
  const plan_action *e = &x->s->acts[earlier], *l = &x->s->acts[later];
  char a[48], b[48];
  find(x, PLAN_SEV_ERROR, "schedule.order", obj, l->pos, "%s runs before %s",
       plan_schedule_action_name(l, a), plan_schedule_action_name(e, b));
}

static void check_cells(sim *x) {
  plan_schedule *s = x->s;
  int ns = s->nstages;
  int64_t nmb = s->nmb;
  for (int st = 0; st < ns; st++)
    for (int64_t mb = 0; mb < nmb; mb++) {
      int64_t c = (int64_t)st * nmb + mb;
      /* the object of this cell's findings, named when there is one */
      char obj[64];
      obj[0] = 0;
      x->obj = obj;
      x->obj_stage = st;
      x->obj_mb = mb;
      int r = s->stage_rank[st];
      plan_pos rp = s->off[r + 1] > s->off[r] ? s->acts[s->off[r]].pos : s->pos;
      int64_t f = node(x, PLAN_ACT_F, c), b = node(x, PLAN_ACT_B, c),
              in = node(x, PLAN_ACT_I, c), w = node(x, PLAN_ACT_W, c);
      long long m = (long long)mb;
      if (f < 0)
        find(x, PLAN_SEV_ERROR, "schedule.incomplete", obj, rp,
             "rank %d never runs the forward of stage %d, microbatch %lld "
             "(%dF%lld)",
             r, st, m, st, m);
      if (b < 0 && !(in >= 0 && w >= 0))
        find(x, PLAN_SEV_ERROR, "schedule.incomplete", obj, rp,
             "rank %d never finishes the backward of stage %d, microbatch "
             "%lld (needs %dB%lld, or %dI%lld and %dW%lld)",
             r, st, m, st, m, st, m, st, m);
      if (b >= 0 && (in >= 0 || w >= 0))
        find(x, PLAN_SEV_ERROR, "schedule.duplicate", obj, rp,
             "stage %d microbatch %lld has both a full backward (B) and a "
             "split one (I/W)",
             st, m);
      need_before(x, obj, f, b);
      need_before(x, obj, f, in);
      need_before(x, obj, in, w);
      /* a send after what it sends, a receive before what needs it */
      int64_t bw = b >= 0 ? b : in;
      need_before(x, obj, f, node(x, PLAN_ACT_SEND_F, c));
      need_before(x, obj, node(x, PLAN_ACT_RECV_F, c), f);
      need_before(x, obj, bw, node(x, PLAN_ACT_SEND_B, c));
      need_before(x, obj, node(x, PLAN_ACT_RECV_B, c), bw);
      /* consecutive stages on one rank: in dependency order */
      if (st + 1 < ns && s->stage_rank[st + 1] == r) {
        need_before(x, obj, f, node(x, PLAN_ACT_F, c + nmb));
        need_before(x, obj, bwd_node(x, c + nmb), bw);
      }
      /* send/recv pairs: stage s sends to s+1 forward, to s-1 backward;
       * the ends of the pipeline have no partner */
      bool sf = x->at[PLAN_ACT_SEND_F][c], rf = x->at[PLAN_ACT_RECV_F][c],
           sb = x->at[PLAN_ACT_SEND_B][c], rb = x->at[PLAN_ACT_RECV_B][c];
      if ((st + 1 == ns && (sf || rb)) || (st == 0 && (rf || sb)))
        find(x, PLAN_SEV_ERROR, "schedule.sendrecv", obj, rp,
             "stage %d is an end of the pipeline: it has no partner to %s", st,
             st == 0 ? "receive forward from or send backward to"
                     : "send forward to or receive backward from");
      if (st + 1 < ns && sf != (bool)x->at[PLAN_ACT_RECV_F][c + nmb])
        find(x, PLAN_SEV_ERROR, "schedule.sendrecv", obj, rp,
             "%dSEND_F%lld and %dRECV_F%lld do not pair up", st, m, st + 1, m);
      if (st > 0 && sb != (bool)x->at[PLAN_ACT_RECV_B][c - nmb])
        find(x, PLAN_SEV_ERROR, "schedule.sendrecv", obj, rp,
             "%dSEND_B%lld and %dRECV_B%lld do not pair up", st, m, st - 1, m);
    }
  x->obj = NULL;
}

/* ---- the run
 * -------------------------------------------------------------------- */

typedef struct run_state {
  int64_t *pos;     /* per rank: next action */
  int64_t *t;       /* per rank: when it is free */
  int64_t *blocked; /* per rank: the node it waits for */
  int32_t *waiter;  /* per node: rank + 1 waiting for it, 0 = none */
  int *stack;
  bool *queued;
  int sp;
} run_state;

static void wake(run_state *q, int r) {
  if (!q->queued[r]) {
    q->queued[r] = true;
    q->stack[q->sp++] = r;
  }
}

/* What node i waits for besides its rank's previous action, or -1. With
 * blocking sends a SEND or RECV names its partner. */
static int64_t dependency(const sim *x, int64_t i, bool blocking) {
  const plan_action *a = &x->s->acts[i];
  int64_t c = (int64_t)a->stage * x->nmb + a->microbatch, m = x->nmb;
  int last = x->s->nstages - 1;
  switch (a->kind) {
  case PLAN_ACT_F:
    return a->stage > 0 && !x->at[PLAN_ACT_RECV_F][c]
               ? node(x, PLAN_ACT_F, c - m)
               : -1;
  case PLAN_ACT_B:
  case PLAN_ACT_I:
    return a->stage < last && !x->at[PLAN_ACT_RECV_B][c] ? bwd_node(x, c + m)
                                                         : -1;
  case PLAN_ACT_RECV_F:
    return node(x, PLAN_ACT_SEND_F, c - m);
  case PLAN_ACT_RECV_B:
    return node(x, PLAN_ACT_SEND_B, c + m);
  case PLAN_ACT_SEND_F:
    return blocking ? node(x, PLAN_ACT_RECV_F, c + m) : -1;
  case PLAN_ACT_SEND_B:
    return blocking ? node(x, PLAN_ACT_RECV_B, c - m) : -1;
  default:
    return -1;
  }
}

static bool is_comm(int kind) {
  return kind >= PLAN_ACT_SEND_F;
}

static int rank_of(const plan_schedule *s, int64_t n) {
  return s->stage_rank[s->acts[n].stage];
}

/* Runs every rank as far as it goes. Returns the number of ranks left
 * waiting. */
static int run_ranks(const sim *x, run_state *q, const int64_t *dur,
                     bool blocking) {
  plan_schedule *s = x->s;
  for (int r = s->nranks - 1; r >= 0; r--) {
    q->pos[r] = s->off[r];
    q->t[r] = 0;
    q->blocked[r] = -1;
    wake(q, r);
  }
  for (int64_t i = 0; i < s->nacts; i++)
    s->start[i] = s->end[i] = -1;
  memset(q->waiter, 0, sizeof(int32_t) * (size_t)(s->nacts + 1));
  while (q->sp) {
    int r = q->stack[--q->sp];
    q->queued[r] = false;
    while (q->pos[r] < s->off[r + 1]) {
      int64_t i = q->pos[r];
      int kind = s->acts[i].kind;
      int64_t d = dependency(x, i, blocking);
      if (blocking && is_comm(kind) && d >= 0) {
        int p = rank_of(s, d);
        if (q->pos[p] != d || p == r) { /* the partner is not there yet */
          q->blocked[r] = d;
          break;
        }
        int64_t st = q->t[r] > q->t[p] ? q->t[r] : q->t[p];
        int64_t du =
            dur[kind] > dur[s->acts[d].kind] ? dur[kind] : dur[s->acts[d].kind];
        s->start[i] = s->start[d] = st;
        s->end[i] = s->end[d] = q->t[r] = q->t[p] = st + du;
        q->pos[r]++;
        q->pos[p]++;
        q->blocked[p] = -1;
        wake(q, p);
        continue;
      }
      int64_t st = q->t[r];
      if (d >= 0) {
        if (s->end[d] < 0) {
          q->blocked[r] = d;
          q->waiter[d] = r + 1;
          break;
        }
        if (s->end[d] > st)
          st = s->end[d];
      }
      s->start[i] = st;
      s->end[i] = q->t[r] = st + dur[kind];
      q->pos[r]++;
      if (q->waiter[i]) {
        int w = q->waiter[i] - 1;
        q->waiter[i] = 0;
        q->blocked[w] = -1;
        wake(q, w);
      }
    }
  }
  int stuck = 0;
  for (int r = 0; r < s->nranks; r++)
    stuck += q->pos[r] < s->off[r + 1];
  return stuck;
}

/* One finding per cycle of waiting ranks. */
static void report_cycles(sim *x, run_state *q, bool blocking,
                          plan_severity sev, const char *code) {
  plan_schedule *s = x->s;
  int R = s->nranks;
  /* 0 unseen, 1 on the current path, 2 done, 3 in a cycle */
  uint8_t *mark = calloc((size_t)R + 1, 1);
  int *path = malloc(sizeof(int) * ((size_t)R + 1));
  plan_buf msg;
  plan_buf_init(&msg);
  if (!mark || !path) {
    x->rc = plan_oom();
    goto done;
  }
  int stuck = 0, in_cycles = 0;
  for (int r = 0; r < R; r++)
    stuck += q->pos[r] < s->off[r + 1];
  for (int r0 = 0; r0 < R; r0++) {
    if (mark[r0] || q->pos[r0] >= s->off[r0 + 1])
      continue;
    int n = 0, r = r0;
    while (!mark[r] && q->pos[r] < s->off[r + 1] && q->blocked[r] >= 0) {
      mark[r] = 1;
      path[n++] = r;
      r = rank_of(s, q->blocked[r]);
    }
    if (mark[r] == 1) {
      /* a new cycle: from r to the end of the path; start at its lowest
       * rank */
      int first = 0;
      while (path[first] != r)
        first++;
      int len = n - first, lo = first;
      for (int k = first; k < n; k++)
        if (path[k] < path[lo])
          lo = k;
      in_cycles += len;
      for (int k = first; k < n; k++)
        mark[path[k]] = 3; /* kept: in a cycle */
      plan_buf_reset(&msg);
      if (blocking)
        plan_buf_puts(&msg, "with blocking sends (a send waits for its "
                            "receive) ");
      if (len == 1)
        plan_buf_printf(&msg, "rank %d waits for itself: ", path[lo]);
      else {
        plan_buf_puts(&msg, "ranks ");
        for (int k = 0; k < len; k++) {
          int rk = path[first + (lo - first + k) % len];
          plan_buf_printf(&msg, "%s%d",
                          k == 0         ? ""
                          : k == len - 1 ? " and "
                                         : ", ",
                          rk);
        }
        plan_buf_puts(&msg, len == 2 ? " wait on each other: "
                                     : " wait on each other in a cycle: ");
      }
      for (int k = 0; k < len; k++) {
        int rk = path[first + (lo - first + k) % len];
        int64_t head = q->pos[rk], want = q->blocked[rk];
        char a[48], b[48];
        if (k == 16 && len > 17) {
          plan_buf_printf(&msg, "; ... (%d more ranks)", len - 16);
          break;
        }
        plan_buf_printf(
            &msg, "%srank %d waits at %s for %s on rank %d", k ? "; " : "", rk,
            plan_schedule_action_name(&s->acts[head], a),
            plan_schedule_action_name(&s->acts[want], b), rank_of(s, want));
      }
      int rk = path[lo];
      char obj[32];
      snprintf(obj, sizeof obj, "rank %d", rk);
      if (msg.failed) {
        x->rc = plan_oom();
        goto done;
      }
      find(x, sev, code, obj, s->acts[q->pos[rk]].pos, "%s",
           plan_buf_cstr(&msg));
    }
    for (int k = 0; k < n; k++)
      if (mark[path[k]] == 1)
        mark[path[k]] = 2;
  }
  if (stuck > in_cycles) {
    /* ranks waiting behind a cycle: said once, at the first of them */
    int r = 0;
    while (r < R && !(q->pos[r] < s->off[r + 1] && mark[r] == 2))
      r++;
    char obj[32];
    snprintf(obj, sizeof obj, "rank %d", r < R ? r : 0);
    char a[48];
    find(x, PLAN_SEV_NOTE, code, obj, r < R ? s->acts[q->pos[r]].pos : s->pos,
         "%d more rank%s wait%s behind the deadlock (rank %d at %s)",
         stuck - in_cycles, stuck - in_cycles == 1 ? "" : "s",
         stuck - in_cycles == 1 ? "s" : "", r < R ? r : 0,
         r < R ? plan_schedule_action_name(&s->acts[q->pos[r]], a) : "?");
  }
done:
  plan_buf_free(&msg);
  free(mark);
  free(path);
}

/* Busy time, makespan and peaks after a complete run. */
static int finish_stats(plan_schedule *s, const int64_t *dur) {
  int *live = calloc((size_t)s->nstages + 1, sizeof(int));
  int *pend = calloc((size_t)s->nstages + 1, sizeof(int));
  if (!live || !pend) {
    free(live);
    free(pend);
    return plan_oom();
  }
  s->makespan = 0;
  for (int st = 0; st < s->nstages; st++)
    s->stage_peak[st] = s->stage_peak_w[st] = 0;
  for (int r = 0; r < s->nranks; r++) {
    int64_t busy = 0;
    int rl = 0, rw = 0, peak = 0, peak_w = 0;
    for (int64_t i = s->off[r]; i < s->off[r + 1]; i++) {
      const plan_action *a = &s->acts[i];
      int st = a->stage;
      if (s->end[i] > s->makespan)
        s->makespan = s->end[i];
      if (!is_comm(a->kind))
        busy += dur[a->kind];
      switch (a->kind) {
      case PLAN_ACT_F:
        live[st]++;
        rl++;
        break;
      case PLAN_ACT_B:
        live[st]--;
        rl--;
        break;
      case PLAN_ACT_I:
        live[st]--;
        rl--;
        pend[st]++;
        rw++;
        break;
      case PLAN_ACT_W:
        pend[st]--;
        rw--;
        break;
      default:
        break;
      }
      if (live[st] > s->stage_peak[st])
        s->stage_peak[st] = live[st];
      if (pend[st] > s->stage_peak_w[st])
        s->stage_peak_w[st] = pend[st];
      if (rl > peak)
        peak = rl;
      if (rw > peak_w)
        peak_w = rw;
    }
    s->rank_busy[r] = busy;
    s->rank_peak[r] = peak;
    s->rank_peak_w[r] = peak_w;
  }
  free(live);
  free(pend);
  return PLAN_OK;
}

int plan_schedule_run(plan_diags *d, plan_schedule *s,
                      const plan_schedule_options *o, size_t *errors) {
  sim x = {s, d, 0, PLAN_OK, s->nmb, {NULL}, NULL, 0, 0};
  run_state q = {0};
  plan_diags *note = NULL;
  s->simulated = s->deadlock = false;
  s->blocking = o->blocking_sends != 0;
  memcpy(s->dur, o->duration, sizeof s->dur);
  int64_t cells = (int64_t)s->nstages * s->nmb;
  if (cells > PLAN_SCHEDULE_MAX_CHECK_CELLS) {
    find(&x, PLAN_SEV_ERROR, "schedule.grid", "pipeline", s->pos,
         "the grid is too large to check (%d stages x %lld microbatches)",
         s->nstages, (long long)s->nmb);
    goto done;
  }
  for (int k = 0; k < PLAN_ACT_COUNT; k++)
    if (!(x.at[k] = calloc((size_t)cells + 1, sizeof(int32_t)))) {
      x.rc = plan_oom();
      goto done;
    }
  check_actions(&x);
  check_cells(&x);
  if (x.errors || x.rc)
    goto done;
  int R = s->nranks;
  q.pos = malloc(sizeof(int64_t) * ((size_t)R + 1));
  q.t = malloc(sizeof(int64_t) * ((size_t)R + 1));
  q.blocked = malloc(sizeof(int64_t) * ((size_t)R + 1));
  q.stack = malloc(sizeof(int) * ((size_t)R + 1));
  q.queued = calloc((size_t)R + 1, sizeof(bool));
  q.waiter = malloc(sizeof(int32_t) * ((size_t)s->nacts + 1));
  if (!q.pos || !q.t || !q.blocked || !q.stack || !q.queued || !q.waiter) {
    x.rc = plan_oom();
    goto done;
  }
  if (!s->blocking && o->note_blocking &&
      run_ranks(&x, &q, o->duration, true)) {
    /* kept aside: a deadlock with buffered sends says more */
    if ((x.rc = plan_diags_new(&note)))
      goto done;
    x.d = note;
    report_cycles(&x, &q, true, PLAN_SEV_NOTE, "schedule.blocking");
    x.d = d;
  }
  if (run_ranks(&x, &q, o->duration, s->blocking)) {
    s->deadlock = true;
    for (int r = 0; r < R; r++)
      s->rank_wait[r] = q.pos[r] < s->off[r + 1] ? q.blocked[r] : -1;
    report_cycles(&x, &q, s->blocking, PLAN_SEV_ERROR, "schedule.deadlock");
    goto done;
  }
  for (size_t i = 0; note && !x.rc && i < plan_diags_count(note); i++) {
    const plan_diag *g = plan_diags_get(note, i);
    x.rc = plan_diags_add(d, g->severity, g->code, g->object, g->file, g->line,
                          g->column, "%s", g->message);
  }
  if (!x.rc)
    x.rc = finish_stats(s, o->duration);
  s->simulated = x.rc == PLAN_OK;
done:
  free(q.pos);
  free(q.t);
  free(q.blocked);
  free(q.stack);
  free(q.queued);
  free(q.waiter);
  plan_diags_free(note);
  sim_free(&x);
  if (errors)
    *errors = x.errors;
  return x.rc;
}

int plan_schedule_simulate(plan_diags **out, plan_schedule *s,
                           const plan_schedule_options *opts) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_simulate: NULL argument");
  *out = NULL;
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  if (opts) {
    if (opts->version != PLAN_SCHEDULE_OPTIONS_VERSION)
      return plan_failf(PLAN_EUSAGE,
                        "plan_schedule_options version %u (this library: %d)",
                        opts->version, PLAN_SCHEDULE_OPTIONS_VERSION);
    o = *opts;
  }
  for (int k = 0; k < PLAN_ACT_COUNT; k++)
    if (o.duration[k] < 0 || o.duration[k] > ((int64_t)1 << 32))
      return plan_failf(PLAN_EUSAGE,
                        "the duration of %s must be 0 to 2^32, not %lld",
                        plan_action_word(k), (long long)o.duration[k]);
  plan_diags *d;
  int rc = plan_diags_new(&d);
  if (rc)
    return rc;
  if ((rc = plan_schedule_run(d, s, &o, NULL))) {
    plan_diags_free(d);
    return rc;
  }
  plan_diags_sort(d);
  *out = d;
  return PLAN_OK;
}

/* ---- validation of a plan's grid
 * ------------------------------------------------- */

int plan_schedule_validate_grid(plan_diags *d, const plan_plan *p, int ranks) {
  const plan_pipeline *pp = &p->pipeline;
  int rc;
  if (ranks > 0 && pp->grid_ranks != ranks &&
      (rc = plan_diags_add(d, PLAN_SEV_ERROR, "schedule.grid", "pipeline",
                           p->file, pp->schedule_pos.line, pp->schedule_pos.col,
                           "the grid has %d rows but the pipeline has %d ranks",
                           pp->grid_ranks, ranks)))
    return rc;
  if (pp->grid_ranks < 1)
    return ranks > 0
               ? PLAN_OK
               : plan_diags_add(d, PLAN_SEV_ERROR, "schedule.grid", "pipeline",
                                p->file, pp->schedule_pos.line,
                                pp->schedule_pos.col, "the grid has no rows");
  plan_schedule *s;
  if ((rc = plan_schedule_from_plan(&s, p)))
    return rc;
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  rc = plan_schedule_run(d, s, &o, NULL);
  plan_schedule_free(s);
  return rc;
}
