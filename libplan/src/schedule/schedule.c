/* Pipeline schedules: the shared representation, the named schedules'
 * generators, explicit grids, and the views.
 *
 * Every schedule is a list of actions per rank. The named ones are built
 * in two steps: the compute order of each rank (F, B, I, W) from the
 * schedule's rule, then the sends and receives. For those, the compute
 * order is run once with implicit transfers (unit times, plan_schedule_run);
 * every transfer gets the time its data is ready, and each rank's
 * sends and receives are placed at those times, ties broken by one global
 * key. Both ends of every transfer then sit at the same point of one
 * global order that respects every dependency, so the schedule cannot
 * deadlock even when a send waits for its receive, whatever the
 * durations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"
#include "schedule/schedule_actions.h"

_Static_assert(PLAN_SCHEDULE_GPIPE == (int)PLAN_SCHED_GPIPE &&
                   PLAN_SCHEDULE_1F1B == (int)PLAN_SCHED_1F1B &&
                   PLAN_SCHEDULE_INTERLEAVED_1F1B ==
                       (int)PLAN_SCHED_INTERLEAVED_1F1B &&
                   PLAN_SCHEDULE_ZB_H1 == (int)PLAN_SCHED_ZB_H1 &&
                   PLAN_SCHEDULE_EXPLICIT == (int)PLAN_SCHED_EXPLICIT &&
                   PLAN_SCHEDULE_LOOPED_BFS == (int)PLAN_SCHED_LOOPED_BFS &&
                   PLAN_SCHEDULE_INTERLEAVED_ZB ==
                       (int)PLAN_SCHED_INTERLEAVED_ZB &&
                   PLAN_SCHEDULE_ZBV == (int)PLAN_SCHED_ZBV &&
                   PLAN_SCHEDULE_DUALPIPEV == (int)PLAN_SCHED_DUALPIPEV &&
                   PLAN_SCHEDULE_KIND_COUNT == (int)PLAN_SCHED_COUNT,
               "public and internal schedule kinds agree");
_Static_assert(PLAN_ACTION_F == (int)PLAN_ACT_F &&
                   PLAN_ACTION_B == (int)PLAN_ACT_B &&
                   PLAN_ACTION_I == (int)PLAN_ACT_I &&
                   PLAN_ACTION_W == (int)PLAN_ACT_W &&
                   PLAN_ACTION_SEND_F == (int)PLAN_ACT_SEND_F &&
                   PLAN_ACTION_RECV_F == (int)PLAN_ACT_RECV_F &&
                   PLAN_ACTION_SEND_B == (int)PLAN_ACT_SEND_B &&
                   PLAN_ACTION_RECV_B == (int)PLAN_ACT_RECV_B &&
                   PLAN_ACTION_KIND_COUNT == (int)PLAN_ACT_COUNT,
               "public and internal action kinds agree");

/* The plan file's spellings: the first PLAN_SCHED_FILE_COUNT_1_0 from format
 * 1.0, the rest from 1.1. */
const char *const plan_schedule_names[PLAN_SCHED_COUNT] = {
    "gpipe",          "1f1b",     "interleaved-1f1b",
    "zb-h1",          "explicit", "looped-bfs",
    "interleaved-zb", "zbv",      "dualpipev"};

const char *plan_schedule_kind_name(int kind) {
  return kind >= 0 && kind < PLAN_SCHED_COUNT ? plan_schedule_names[kind] : "?";
}

int plan_schedule_kind_from_name(const char *name) {
  for (int k = 0; name && k < PLAN_SCHED_COUNT; k++)
    if (!strcmp(name, plan_schedule_names[k]))
      return k;
  return -1;
}

const char *plan_action_kind_name(int kind) {
  return plan_action_word(kind);
}

char *plan_schedule_action_name(const plan_action *a, char *buf) {
  snprintf(buf, 48, "%d%s%d", (int)a->stage, plan_action_word(a->kind),
           (int)a->microbatch);
  return buf;
}

/* ---- allocation ------------------------------------------------------------
 */

void plan_schedule_free(plan_schedule *s) {
  if (!s)
    return;
  free(s->stage_rank);
  free(s->acts);
  free(s->off);
  free(s->file);
  free(s->start);
  free(s->end);
  free(s->rank_busy);
  free(s->rank_wait);
  free(s->rank_peak);
  free(s->rank_peak_w);
  free(s->stage_peak);
  free(s->stage_peak_w);
  free(s);
}

int plan_schedule_alloc(plan_schedule **out, int kind, int nranks, int nstages,
                        int64_t nmb, int64_t nacts) {
  *out = NULL;
  if (nranks < 1 || nstages < 1 || nmb < 1 || nacts < 0 ||
      nacts > (int64_t)1 << 30)
    return plan_failf(PLAN_ELIMIT,
                      "a schedule of %d ranks, %d stages and %lld actions is "
                      "out of range",
                      nranks, nstages, (long long)nacts);
  plan_schedule *s = calloc(1, sizeof *s);
  if (!s)
    return plan_oom();
  s->kind = kind;
  s->nranks = nranks;
  s->nstages = nstages;
  s->nmb = nmb;
  s->nacts = nacts;
  size_t na = (size_t)nacts + 1, nr = (size_t)nranks + 1,
         ns = (size_t)nstages + 1;
  s->stage_rank = malloc(sizeof(int) * ns);
  s->acts = calloc(na, sizeof(plan_action));
  s->off = calloc(nr, sizeof(int64_t));
  s->file = calloc(1, 1);
  s->start = malloc(sizeof(int64_t) * na);
  s->end = malloc(sizeof(int64_t) * na);
  s->rank_busy = calloc(nr, sizeof(int64_t));
  s->rank_wait = calloc(nr, sizeof(int64_t));
  s->rank_peak = calloc(nr, sizeof(int));
  s->rank_peak_w = calloc(nr, sizeof(int));
  s->stage_peak = calloc(ns, sizeof(int));
  s->stage_peak_w = calloc(ns, sizeof(int));
  if (!s->stage_rank || !s->acts || !s->off || !s->file || !s->start ||
      !s->end || !s->rank_busy || !s->rank_wait || !s->rank_peak ||
      !s->rank_peak_w || !s->stage_peak || !s->stage_peak_w) {
    plan_schedule_free(s);
    return plan_oom();
  }
  for (int i = 0; i < nstages; i++)
    s->stage_rank[i] = i % nranks;
  for (int64_t i = 0; i < nacts; i++)
    s->start[i] = s->end[i] = -1;
  *out = s;
  return PLAN_OK;
}

/* ---- compute orders of the named schedules ---------------------------------
 */

typedef struct emitter {
  plan_action *a;
  int64_t n;
} emitter;

static void emit(emitter *e, int kind, int stage, int64_t mb) {
  plan_action *a = &e->a[e->n++];
  a->kind = (uint8_t)kind;
  a->stage = stage;
  a->microbatch = (int32_t)mb;
}

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* GPipe: every forward, then every backward, in microbatch order. */
static void gen_gpipe(emitter *e, int r, int64_t m) {
  for (int64_t i = 0; i < m; i++)
    emit(e, PLAN_ACT_F, r, i);
  for (int64_t i = 0; i < m; i++)
    emit(e, PLAN_ACT_B, r, i);
}

/* 1F1B: p - r - 1 warm-up forwards, then one forward and one backward in
 * turn, then the remaining backwards. Stage r keeps at most p - r
 * microbatches' activations. */
static void gen_1f1b(emitter *e, int r, int p, int64_t m) {
  int64_t w = min64(p - r - 1, m);
  for (int64_t i = 0; i < w; i++)
    emit(e, PLAN_ACT_F, r, i);
  for (int64_t i = 0; i < m - w; i++) {
    emit(e, PLAN_ACT_F, r, w + i);
    emit(e, PLAN_ACT_B, r, i);
  }
  for (int64_t i = m - w; i < m; i++)
    emit(e, PLAN_ACT_B, r, i);
}

/* ZB-H1: the 1F1B order with each backward split into I (the input
 * gradient, which the previous stage waits for) and W (the weight
 * gradient, which nobody waits for). Rank r runs the W of microbatch k - r
 * after the I of k: the last ranks, whose 1F1B warm-up is short, defer
 * the most W's and so run their I's early, and the deferred W's fill the
 * cool-down where 1F1B idles. Microbatches held until their W stay at most
 * p on every rank, the peak of 1F1B's first stage. */
static void gen_zbh1(emitter *e, int r, int p, int64_t m) {
  int64_t w = min64(p - r, m);
  for (int64_t i = 0; i < w; i++)
    emit(e, PLAN_ACT_F, r, i);
  for (int64_t k = 0; k < m; k++) {
    emit(e, PLAN_ACT_I, r, k);
    if (k >= r)
      emit(e, PLAN_ACT_W, r, k - r);
    if (k + p - r < m)
      emit(e, PLAN_ACT_F, r, k + p - r);
  }
  for (int64_t k = m - r > 0 ? m - r : 0; k < m; k++)
    emit(e, PLAN_ACT_W, r, k);
}

/* Interleaved 1F1B (Megatron's order): rank r holds the v stages r, r + p,
 * ..., and runs v * m forward and v * m backward steps. Microbatches go in
 * groups (p of them when p divides m; else floor(m / p) groups as even as
 * can be, larger first): a group runs its forwards on chunk 0, then chunk
 * 1, ...; its backwards on the last chunk first. The warm-up is
 * 2 (p - r - 1) + (v - 1) g forwards, g the first group's size. */
typedef struct groups {
  int64_t n, base, extra; /* extra groups of base + 1, then base */
} groups;

static groups make_groups(int p, int64_t m) {
  groups g;
  g.n = m / p > 0 ? m / p : 1;
  g.base = m / g.n;
  g.extra = m % g.n;
  return g;
}

static void interleaved_step(int64_t k, const groups *gs, int v, bool fwd,
                             int p, int r, int *stage, int64_t *mb) {
  int64_t big = gs->base + 1, split = v * gs->extra * big;
  int64_t j, first, g;
  if (k < split) {
    j = k / (v * big);
    first = j * big;
    g = big;
  } else {
    j = (k - split) / (v * gs->base);
    first = gs->extra * big + j * gs->base;
    g = gs->base;
  }
  int64_t in = k - v * first;
  int chunk = (int)(in / g);
  if (!fwd)
    chunk = v - 1 - chunk;
  *stage = chunk * p + r;
  *mb = first + in % g;
}

static void gen_interleaved(emitter *e, int r, int p, int v, int64_t m) {
  groups gs = make_groups(p, m);
  int64_t total = (int64_t)v * m;
  int64_t g0 = gs.base + (gs.extra > 0);
  int64_t w = min64(2 * (int64_t)(p - r - 1) + (int64_t)(v - 1) * g0, total);
  int st;
  int64_t mb;
  for (int64_t k = 0; k < w; k++) {
    interleaved_step(k, &gs, v, true, p, r, &st, &mb);
    emit(e, PLAN_ACT_F, st, mb);
  }
  for (int64_t i = 0; i < total - w; i++) {
    interleaved_step(w + i, &gs, v, true, p, r, &st, &mb);
    emit(e, PLAN_ACT_F, st, mb);
    interleaved_step(i, &gs, v, false, p, r, &st, &mb);
    emit(e, PLAN_ACT_B, st, mb);
  }
  for (int64_t i = total - w; i < total; i++) {
    interleaved_step(i, &gs, v, false, p, r, &st, &mb);
    emit(e, PLAN_ACT_B, st, mb);
  }
}

/* Looped BFS (breadth first): rank r holds the v stages r, r + R, ...; it
 * runs every microbatch's forward on its first stage, then on the next,
 * ...; then the backwards from its last stage to its first, each stage's
 * microbatches in reverse order (the last forward's is ready first). */
static void gen_looped_bfs(emitter *e, int r, int p, int v, int64_t m) {
  for (int c = 0; c < v; c++)
    for (int64_t i = 0; i < m; i++)
      emit(e, PLAN_ACT_F, c * p + r, i);
  for (int c = v - 1; c >= 0; c--)
    for (int64_t i = m - 1; i >= 0; i--)
      emit(e, PLAN_ACT_B, c * p + r, i);
}

/* Per-stage counters: the next microbatch of each action kind on a stage,
 * so an order can be written as a sequence of stages. */
typedef struct counters {
  int64_t *next; /* [stage * 3 + {0 F, 1 I or B, 2 W}] */
} counters;

static void emit_next(emitter *e, counters *c, int kind, int stage) {
  int slot = kind == PLAN_ACT_F ? 0 : kind == PLAN_ACT_W ? 2 : 1;
  emit(e, kind, stage, c->next[stage * 3 + slot]++);
}

/* Interleaved zero bubble (ZB1P, as PyTorch orders it): interleaved 1F1B
 * with rounds of microbatches (max(1, m / R) rounds of m / rounds) and each
 * backward split into I and W. The warm-up is (v - 1) mpr + R - r - 1
 * forwards (mpr microbatches per round); forward step k runs on chunk
 * (k / mpr) mod v, backward step k on chunk v - 1 - ((k - w) / mpr) mod v.
 * Each I is followed by the W of the oldest I still waiting once r of them
 * wait, so rank r defers r weight halves and runs them in the cool-down. */
static void gen_interleaved_zb(emitter *e, counters *c, int r, int p, int v,
                               int64_t m) {
  int64_t rounds = m / p > 0 ? m / p : 1, mpr = m / rounds;
  int64_t total = (int64_t)v * m;
  int64_t w = min64((int64_t)(v - 1) * mpr + (p - 1 - r), total);
#define ZB_F(k) ((int)(((k) / mpr) % v) * p + r)
#define ZB_B(k) ((int)(v - 1 - (((k)-w) / mpr) % v) * p + r)
  int64_t weights = 0; /* W's emitted; backward step w + weights is next */
  for (int64_t k = 0; k < total + w; k++) {
    if (k < w) {
      emit_next(e, c, PLAN_ACT_F, ZB_F(k));
      continue;
    }
    if (k < total)
      emit_next(e, c, PLAN_ACT_F, ZB_F(k));
    emit_next(e, c, PLAN_ACT_I, ZB_B(k));
    if (k - w >= r) {
      emit_next(e, c, PLAN_ACT_W, ZB_B(w + weights));
      weights++;
    }
  }
  for (; weights < total; weights++)
    emit_next(e, c, PLAN_ACT_W, ZB_B(w + weights));
#undef ZB_F
#undef ZB_B
}

/* ZBV zero bubble (as PyTorch orders it): R ranks, 2R stages in a V, rank r
 * holding stage r (chunk 0) and stage 2R - 1 - r (chunk 1). Written for
 * n = max(2R - 1, m) microbatches; the actions of microbatches past m are
 * then dropped. Warm-up: 2 (R - r) - 1 chunk-0 forwards; r pairs (chunk-1
 * F, chunk-0 F); R - r triples (chunk-1 F, I, W). Steady state, until both
 * chunks have run n forwards: a chunk-0 F (while any is left), chunk-0 I
 * and W, chunk-1 F, I and W. Cool-down: r pairs of I (chunk 0, chunk 1);
 * R - r chunk-0 (I, W); then the deferred W's, chunk 1 first. */
static void gen_zbv(emitter *e, int r, int p, int64_t m) {
  int s0 = r, s1 = 2 * p - 1 - r;
  int64_t n = m > 2 * p - 1 ? m : 2 * p - 1;
  int64_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  int64_t start = e->n;
  for (int i = 0; i < 2 * (p - r) - 1; i++)
    emit(e, PLAN_ACT_F, s0, f0++);
  for (int i = 0; i < r; i++) {
    emit(e, PLAN_ACT_F, s1, f1++);
    emit(e, PLAN_ACT_F, s0, f0++);
  }
  for (int i = 0; i < p - r; i++) {
    emit(e, PLAN_ACT_F, s1, f1++);
    emit(e, PLAN_ACT_I, s1, b1);
    emit(e, PLAN_ACT_W, s1, b1++);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n)
      emit(e, PLAN_ACT_F, s0, f0++);
    emit(e, PLAN_ACT_I, s0, b0);
    emit(e, PLAN_ACT_W, s0, b0++);
    emit(e, PLAN_ACT_F, s1, f1++);
    emit(e, PLAN_ACT_I, s1, b1);
    emit(e, PLAN_ACT_W, s1, b1++);
  }
  int64_t w0 = b0, w1 = b1;
  for (int i = 0; i < r; i++) {
    emit(e, PLAN_ACT_I, s0, b0++);
    emit(e, PLAN_ACT_I, s1, b1++);
  }
  for (int i = 0; i < p - r; i++) {
    emit(e, PLAN_ACT_I, s0, b0++);
    emit(e, PLAN_ACT_W, s0, w0++);
  }
  while (w1 < b1)
    emit(e, PLAN_ACT_W, s1, w1++);
  while (w0 < b0)
    emit(e, PLAN_ACT_W, s0, w0++);
  /* drop the padding microbatches */
  int64_t k = start;
  for (int64_t i = start; i < e->n; i++)
    if (e->a[i].microbatch < m)
      e->a[k++] = e->a[i];
  e->n = k;
}

/* DualPipeV (as PyTorch orders it): the V placement of ZBV, m >= 2R. Most
 * steps pair a forward of one chunk with a full backward of the other
 * (PyTorch's OVERLAP_F_B, one compound action there); here the pair is its
 * F, then its B, on the rank's one compute stream. With s0 = r, s1 =
 * 2R - 1 - r: 2 (R - r - 1) F(s0); r + 1 pairs F(s0) F(s1); R - r - 1
 * times I(s1), a pending W, F(s1); m - 2R + r + 1 times F(s0)+B(s1)
 * then F(s1)+B(s0); R - r - 1 times B(s1), F(s1)+B(s0); r + 1 times the
 * backward of s1, then of s0, full until the middle step and I halves
 * from it (s1's I first on odd ranks); R - r - 1 times a pending W and
 * s0's backward; then r + 1 pending W's. A pending W is the oldest I
 * without its W. */
typedef struct dualpipe {
  emitter *e;
  counters *c;
  int64_t *wq; /* pending W's: stage * 2^32 + microbatch, oldest first */
  int64_t wq_head, wq_tail;
} dualpipe;

static void dp_f(dualpipe *d, int stage) {
  emit_next(d->e, d->c, PLAN_ACT_F, stage);
}

static void dp_back(dualpipe *d, int stage, bool split) {
  int64_t mb = d->c->next[stage * 3 + 1]++;
  emit(d->e, split ? PLAN_ACT_I : PLAN_ACT_B, stage, mb);
  if (split)
    d->wq[d->wq_tail++] = (int64_t)stage << 32 | mb;
}

static void dp_w(dualpipe *d) {
  if (d->wq_head == d->wq_tail)
    return;
  int64_t x = d->wq[d->wq_head++];
  emit(d->e, PLAN_ACT_W, (int)(x >> 32), x & 0xffffffff);
}

static void gen_dualpipev(dualpipe *d, int r, int p, int64_t m) {
  int s0 = r, s1 = 2 * p - 1 - r;
  d->wq_head = d->wq_tail = 0;
  for (int i = 0; i < 2 * (p - r - 1); i++)
    dp_f(d, s0);
  for (int i = 0; i < r + 1; i++) {
    dp_f(d, s0);
    dp_f(d, s1);
  }
  for (int i = 0; i < p - r - 1; i++) {
    dp_back(d, s1, true);
    dp_w(d);
    dp_f(d, s1);
  }
  for (int64_t i = 0; i < m - 2 * p + r + 1; i++) {
    dp_f(d, s0); /* the last rank's first step is not a pair in PyTorch */
    dp_back(d, s1, false);
    dp_f(d, s1);
    dp_back(d, s0, false);
  }
  for (int i = 0; i < p - r - 1; i++) {
    dp_back(d, s1, false);
    dp_f(d, s1);
    dp_back(d, s0, false);
  }
  bool zb = false;
  for (int i = 0; i < r + 1; i++) {
    if (i == (r + 1) / 2 && r % 2 == 1)
      zb = true;
    dp_back(d, s1, zb);
    if (i == (r + 1) / 2 && r % 2 == 0)
      zb = true;
    dp_back(d, s0, zb);
  }
  for (int i = 0; i < p - r - 1; i++) {
    dp_w(d);
    dp_back(d, s0, zb);
  }
  for (int i = 0; i < r + 1; i++)
    dp_w(d);
}

/* Stage s's rank under a kind's placement: the V kinds put stage s < R on
 * rank s and stage s >= R on rank 2R - 1 - s; the others s mod R. */
int plan_schedule_kind_stage_rank(int kind, int ranks, int stage) {
  if ((kind == PLAN_SCHED_ZBV || kind == PLAN_SCHED_DUALPIPEV) &&
      stage >= ranks)
    return 2 * ranks - 1 - stage;
  return stage % ranks;
}

/* ---- sends and receives
 * ------------------------------------------------------ */

/* One end of a transfer: at time t (when the data is ready), on `rank`. The
 * transfer is named by its direction (0 forward, 1 backward), the sending
 * stage and the microbatch; that name orders transfers of equal t the
 * same way on both ends. */
typedef struct comm_end {
  int64_t t;
  int rank, dir, stage; /* stage: the sender */
  int32_t mb;
  uint8_t kind;
  int32_t act_stage; /* the stage the action belongs to */
} comm_end;

static int cmp_comm(const void *x, const void *y) {
  const comm_end *a = x, *b = y;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  if (a->t != b->t)
    return a->t < b->t ? -1 : 1;
  if (a->dir != b->dir)
    return a->dir < b->dir ? -1 : 1;
  if (a->stage != b->stage)
    return a->stage < b->stage ? -1 : 1;
  return a->mb < b->mb ? -1 : a->mb > b->mb;
}

/* The schedule `c` (compute only, run) with its transfers added. */
static int add_comm(plan_schedule **out, const plan_schedule *c) {
  int S = c->nstages;
  int64_t m = c->nmb, cells = (int64_t)S * m;
  int64_t *fwd_end = malloc(sizeof(int64_t) * (size_t)(cells + 1));
  int64_t *bwd_end = malloc(sizeof(int64_t) * (size_t)(cells + 1));
  comm_end *ev = NULL;
  int64_t nev = 0;
  int rc = PLAN_OK;
  if (!fwd_end || !bwd_end) {
    rc = plan_oom();
    goto done;
  }
  for (int64_t i = 0; i < c->nacts; i++) {
    const plan_action *a = &c->acts[i];
    int64_t cell = (int64_t)a->stage * m + a->microbatch;
    if (a->kind == PLAN_ACT_F)
      fwd_end[cell] = c->end[i];
    else if (a->kind == PLAN_ACT_B || a->kind == PLAN_ACT_I)
      bwd_end[cell] = c->end[i];
  }
  int64_t cap = 4 * cells + 1;
  ev = malloc(sizeof(comm_end) * (size_t)cap);
  if (!ev) {
    rc = plan_oom();
    goto done;
  }
  for (int s = 0; s < S; s++)
    for (int64_t mb = 0; mb < m; mb++) {
      int64_t cell = (int64_t)s * m + mb;
      int r = c->stage_rank[s];
      if (s + 1 < S && c->stage_rank[s + 1] != r) {
        int q = c->stage_rank[s + 1];
        ev[nev++] =
            (comm_end){fwd_end[cell], r, 0, s, (int32_t)mb, PLAN_ACT_SEND_F, s};
        ev[nev++] = (comm_end){fwd_end[cell],   q,    0, s, (int32_t)mb,
                               PLAN_ACT_RECV_F, s + 1};
      }
      if (s > 0 && c->stage_rank[s - 1] != r) {
        int q = c->stage_rank[s - 1];
        ev[nev++] =
            (comm_end){bwd_end[cell], r, 1, s, (int32_t)mb, PLAN_ACT_SEND_B, s};
        ev[nev++] = (comm_end){bwd_end[cell],   q,    1, s, (int32_t)mb,
                               PLAN_ACT_RECV_B, s - 1};
      }
    }
  qsort(ev, (size_t)nev, sizeof *ev, cmp_comm);
  plan_schedule *s;
  if ((rc = plan_schedule_alloc(&s, c->kind, c->nranks, S, m, c->nacts + nev)))
    goto done;
  memcpy(s->stage_rank, c->stage_rank, sizeof(int) * (size_t)S);
  /* merge: a transfer ready at t goes before the compute that starts at t */
  int64_t n = 0, e = 0;
  for (int r = 0; r < c->nranks; r++) {
    s->off[r] = n;
    for (int64_t i = c->off[r]; i < c->off[r + 1]; i++) {
      while (e < nev && ev[e].rank == r && ev[e].t <= c->start[i]) {
        s->acts[n++] =
            (plan_action){ev[e].kind, ev[e].act_stage, ev[e].mb, {0, 0}};
        e++;
      }
      s->acts[n++] = c->acts[i];
    }
    while (e < nev && ev[e].rank == r) {
      s->acts[n++] =
          (plan_action){ev[e].kind, ev[e].act_stage, ev[e].mb, {0, 0}};
      e++;
    }
  }
  s->off[c->nranks] = n;
  *out = s;
done:
  free(fwd_end);
  free(bwd_end);
  free(ev);
  return rc;
}

/* Why `kind` cannot run `stages` stages on `ranks` ranks with m
 * microbatches, or NULL when it can. */
static const char *shape_misfit(int kind, int ranks, int stages, int64_t m) {
  switch (kind) {
  case PLAN_SCHED_INTERLEAVED_1F1B:
  case PLAN_SCHED_LOOPED_BFS:
    return stages % ranks ? "the stages must be a multiple of the ranks" : NULL;
  case PLAN_SCHED_INTERLEAVED_ZB: {
    if (stages % ranks)
      return "the stages must be a multiple of the ranks";
    int64_t rounds = m / ranks > 0 ? m / ranks : 1;
    return m % rounds ? "the microbatches must split into rounds of equal "
                        "size (a multiple of max(1, m / ranks))"
                      : NULL;
  }
  case PLAN_SCHED_ZBV:
    return stages != 2 * ranks ? "this schedule runs two stages per rank"
                               : NULL;
  case PLAN_SCHED_DUALPIPEV:
    return stages != 2 * ranks ? "this schedule runs two stages per rank"
           : m < stages        ? "it needs at least as many microbatches as "
                                 "stages"
                               : NULL;
  default:
    return stages != ranks ? "this schedule runs one stage per rank" : NULL;
  }
}

int plan_schedule_generate(plan_schedule **out, int kind, int ranks, int stages,
                           int64_t microbatches) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_generate: NULL out");
  *out = NULL;
  if (kind < 0 || kind >= PLAN_SCHED_COUNT || kind == PLAN_SCHED_EXPLICIT)
    return plan_failf(PLAN_EUSAGE,
                      "plan_schedule_generate: %d is not a named schedule",
                      kind);
  if (ranks < 1 || stages < 1 || microbatches < 1)
    return plan_failf(PLAN_EINVALID,
                      "a schedule needs at least one rank, stage and "
                      "microbatch (%d, %d, %lld)",
                      ranks, stages, (long long)microbatches);
  const char *why = shape_misfit(kind, ranks, stages, microbatches);
  if (why)
    return plan_failf(PLAN_EINVALID,
                      "%s of %d stages on %d ranks with %lld "
                      "microbatches: %s",
                      plan_schedule_names[kind], stages, ranks,
                      (long long)microbatches, why);
  int64_t cells = (int64_t)stages * microbatches;
  if (microbatches > PLAN_SCHEDULE_MAX_CELLS || cells > PLAN_SCHEDULE_MAX_CELLS)
    return plan_failf(PLAN_ELIMIT,
                      "a schedule of %d stages x %lld microbatches is too "
                      "large to generate (at most %lld pairs)",
                      stages, (long long)microbatches,
                      (long long)PLAN_SCHEDULE_MAX_CELLS);
  int v = stages / ranks;
  int asked = kind;
  if (kind == PLAN_SCHED_INTERLEAVED_1F1B && v == 1)
    kind = PLAN_SCHED_1F1B; /* generate 1F1B, report what was asked */
  int per = kind == PLAN_SCHED_ZB_H1 || kind >= PLAN_SCHED_LOOPED_BFS ? 3 : 2;
  plan_schedule *c;
  /* zbv is written for at least 2R - 1 microbatches, then cut to m */
  int64_t written = kind == PLAN_SCHED_ZBV && microbatches < 2 * ranks - 1
                        ? (int64_t)stages * (2 * ranks - 1)
                        : cells;
  int rc =
      plan_schedule_alloc(&c, kind, ranks, stages, microbatches, written * per);
  if (rc)
    return rc;
  for (int st = 0; st < stages; st++)
    c->stage_rank[st] = plan_schedule_kind_stage_rank(kind, ranks, st);
  counters cnt = {calloc((size_t)stages * 3, sizeof(int64_t))};
  int64_t *wq = calloc((size_t)cells + 1, sizeof(int64_t));
  if (!cnt.next || !wq) {
    free(cnt.next);
    free(wq);
    plan_schedule_free(c);
    return plan_oom();
  }
  emitter e = {c->acts, 0};
  dualpipe dp = {&e, &cnt, wq, 0, 0};
  for (int r = 0; r < ranks; r++) {
    c->off[r] = e.n;
    switch (kind) {
    case PLAN_SCHED_GPIPE:
      gen_gpipe(&e, r, microbatches);
      break;
    case PLAN_SCHED_1F1B:
      gen_1f1b(&e, r, ranks, microbatches);
      break;
    case PLAN_SCHED_ZB_H1:
      gen_zbh1(&e, r, ranks, microbatches);
      break;
    case PLAN_SCHED_INTERLEAVED_1F1B:
      gen_interleaved(&e, r, ranks, v, microbatches);
      break;
    case PLAN_SCHED_LOOPED_BFS:
      gen_looped_bfs(&e, r, ranks, v, microbatches);
      break;
    case PLAN_SCHED_INTERLEAVED_ZB:
      gen_interleaved_zb(&e, &cnt, r, ranks, v, microbatches);
      break;
    case PLAN_SCHED_ZBV:
      gen_zbv(&e, r, ranks, microbatches);
      break;
    default:
      gen_dualpipev(&dp, r, ranks, microbatches);
      break;
    }
  }
  c->off[ranks] = e.n;
  c->nacts = e.n; /* the kinds that split backwards only in part use less */
  free(cnt.next);
  free(wq);
  /* time the compute order with implicit transfers to place the sends */
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  plan_diags *d;
  if ((rc = plan_diags_new(&d))) {
    plan_schedule_free(c);
    return rc;
  }
  size_t errors = 0;
  rc = plan_schedule_run(d, c, &o, &errors);
  if (!rc && errors) {
    const plan_diag *g = plan_diags_get(d, 0);
    rc = plan_failf(PLAN_EINVALID, "the generated %s schedule fails: %s",
                    plan_schedule_names[kind], g ? g->message : "?");
  }
  plan_diags_free(d);
  plan_schedule *s = NULL;
  if (!rc)
    rc = add_comm(&s, c);
  plan_schedule_free(c);
  if (rc)
    return rc;
  s->kind = asked;
  *out = s;
  return PLAN_OK;
}

/* ---- explicit grids
 * ----------------------------------------------------------- */

int plan_schedule_from_grid(plan_schedule **out, int stages,
                            int64_t microbatches, const char *const *rows,
                            int nrows) {
  if (!out || (!rows && nrows))
    return plan_failf(PLAN_EUSAGE, "plan_schedule_from_grid: NULL argument");
  *out = NULL;
  if (nrows < 1 || nrows > 65536)
    return plan_failf(PLAN_EINVALID, "a grid has 1 to 65536 rows, not %d",
                      nrows);
  int64_t n = 0;
  for (int r = 0; r < nrows; r++) {
    if (!rows[r])
      return plan_failf(PLAN_EUSAGE, "plan_schedule_from_grid: row %d is NULL",
                        r);
    bool in = false;
    for (const char *c = rows[r]; *c; c++) {
      n += !in && *c != ' ';
      in = *c != ' ';
    }
  }
  plan_schedule *s;
  int rc = plan_schedule_alloc(&s, PLAN_SCHED_EXPLICIT, nrows, stages,
                               microbatches, n);
  if (rc)
    return rc;
  n = 0;
  for (int r = 0; r < nrows; r++) {
    s->off[r] = n;
    const char *t = rows[r];
    size_t i = 0, len = strlen(t);
    while (i < len) {
      while (i < len && t[i] == ' ')
        i++;
      size_t j = i;
      while (j < len && t[j] != ' ')
        j++;
      if (j > i) {
        if (plan_action_parse(&s->acts[n], t + i, j - i)) {
          plan_schedule_free(s);
          return plan_fail(PLAN_EINVALID, "", r + 1, (int)i + 1,
                           "row %d: action '%.*s' is not STAGE ACTION "
                           "MICROBATCH (e.g. 0F1, 2B0, 1I3, 1W3, 0SEND_F2)",
                           r, (int)(j - i), t + i);
        }
        s->acts[n].pos = (plan_pos){r + 1, (int)i + 1};
        n++;
      }
      i = j;
    }
  }
  s->off[nrows] = n;
  *out = s;
  return PLAN_OK;
}

/* The plan's grid as written, positions kept. */
static int from_plan_grid(plan_schedule **out, const plan_plan *p) {
  const plan_pipeline *pp = &p->pipeline;
  if (pp->grid_ranks < 1)
    return plan_fail(PLAN_EINVALID, p->file, pp->schedule_pos.line,
                     pp->schedule_pos.col, "the grid has no rows");
  int64_t n = 0;
  for (int r = 0; r < pp->grid_ranks; r++)
    n += pp->grid_len[r];
  plan_schedule *s;
  int rc = plan_schedule_alloc(&s, PLAN_SCHED_EXPLICIT, pp->grid_ranks,
                               pp->nstages, pp->microbatches, n);
  if (rc)
    return rc;
  free(s->file);
  s->file = strdup(p->file ? p->file : "");
  if (!s->file) {
    plan_schedule_free(s);
    return plan_oom();
  }
  s->pos = pp->schedule_pos;
  n = 0;
  for (int r = 0; r < pp->grid_ranks; r++) {
    s->off[r] = n;
    if (pp->grid_len[r])
      memcpy(&s->acts[n], pp->grid[r],
             sizeof(plan_action) * (size_t)pp->grid_len[r]);
    n += pp->grid_len[r];
  }
  s->off[pp->grid_ranks] = n;
  *out = s;
  return PLAN_OK;
}

int plan_schedule_from_plan(plan_schedule **out, const plan_plan *p) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_from_plan: NULL argument");
  *out = NULL;
  const plan_pipeline *pp = &p->pipeline;
  if (!pp->present)
    return plan_failf(PLAN_ENOTFOUND, "%s has no pipeline section",
                      p->file && p->file[0] ? p->file : "the plan");
  if (pp->schedule == PLAN_SCHED_EXPLICIT)
    return from_plan_grid(out, p);
  int64_t ranks = pp->axis >= 0 ? p->mesh.axis_sizes[pp->axis] : pp->nstages;
  if (ranks < 1 || ranks > 65536)
    return plan_failf(PLAN_EINVALID, "a pipeline of %lld ranks",
                      (long long)ranks);
  int rc = plan_schedule_generate(out, pp->schedule, (int)ranks, pp->nstages,
                                  pp->microbatches);
  if (rc == PLAN_EINVALID) {
    /* say where: the pipeline's position */
    const plan_error *e = plan_error_last();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", e->message);
    return plan_fail(rc, p->file, pp->pos.line, pp->pos.col, "%s", msg);
  }
  return rc;
}

/* ---- views ----------------------------------------------------------------
 */

int plan_schedule_kind_of(const plan_schedule *s) {
  return s ? s->kind : -1;
}
int plan_schedule_ranks(const plan_schedule *s) {
  return s ? s->nranks : -1;
}
int plan_schedule_stages(const plan_schedule *s) {
  return s ? s->nstages : -1;
}
int64_t plan_schedule_microbatches(const plan_schedule *s) {
  return s ? s->nmb : -1;
}
int plan_schedule_stage_rank(const plan_schedule *s, int stage) {
  return s && stage >= 0 && stage < s->nstages ? s->stage_rank[stage] : -1;
}
int64_t plan_schedule_length(const plan_schedule *s, int rank) {
  return s && rank >= 0 && rank < s->nranks ? s->off[rank + 1] - s->off[rank]
                                            : -1;
}

int plan_schedule_get(plan_schedule_action *out, const plan_schedule *s,
                      int rank, int64_t index) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_get: NULL argument");
  if (rank < 0 || rank >= s->nranks || index < 0 ||
      index >= s->off[rank + 1] - s->off[rank])
    return plan_failf(PLAN_ENOTFOUND, "no action %lld on rank %d",
                      (long long)index, rank);
  int64_t i = s->off[rank] + index;
  const plan_action *a = &s->acts[i];
  *out =
      (plan_schedule_action){a->kind,   a->stage,    a->microbatch, s->start[i],
                             s->end[i], a->pos.line, a->pos.col};
  return PLAN_OK;
}

int plan_schedule_result_get(plan_schedule_result *out,
                             const plan_schedule *s) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_result_get: NULL argument");
  memset(out, 0, sizeof *out);
  out->simulated = s->simulated;
  out->deadlock = s->deadlock;
  if (!s->simulated)
    return PLAN_OK;
  out->makespan = s->makespan;
  for (int r = 0; r < s->nranks; r++) {
    out->compute += s->rank_busy[r];
    if (s->rank_peak[r] > out->peak_activations)
      out->peak_activations = s->rank_peak[r];
  }
  double total = (double)s->makespan * s->nranks;
  out->bubble = total > 0 ? 1.0 - (double)out->compute / total : 0.0;
  return PLAN_OK;
}

int plan_schedule_rank_stats_get(plan_schedule_rank_stats *out,
                                 const plan_schedule *s, int rank) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_rank_stats_get: NULL");
  if (rank < 0 || rank >= s->nranks)
    return plan_failf(PLAN_ENOTFOUND, "no rank %d", rank);
  if (!s->simulated)
    return plan_failf(PLAN_EUSAGE, "the schedule has not been simulated");
  out->busy = s->rank_busy[rank];
  out->bubble =
      s->makespan > 0 ? 1.0 - (double)out->busy / (double)s->makespan : 0.0;
  out->peak_activations = s->rank_peak[rank];
  out->peak_pending_w = s->rank_peak_w[rank];
  return PLAN_OK;
}

int plan_schedule_stage_stats_get(plan_schedule_stage_stats *out,
                                  const plan_schedule *s, int stage) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_stage_stats_get: NULL");
  if (stage < 0 || stage >= s->nstages)
    return plan_failf(PLAN_ENOTFOUND, "no stage %d", stage);
  if (!s->simulated)
    return plan_failf(PLAN_EUSAGE, "the schedule has not been simulated");
  out->rank = s->stage_rank[stage];
  out->peak_activations = s->stage_peak[stage];
  out->peak_pending_w = s->stage_peak_w[stage];
  return PLAN_OK;
}
