/* Unit tests for pipeline schedules (schedule.c, schedule_sim.c,
 * schedule_out.c): every named schedule is complete, runs without deadlock
 * with buffered and blocking sends, and has its known bubble and peak
 * activations; explicit grids that deadlock are found with the ranks of
 * the cycle named; incomplete or mis-ordered grids are refused; the SVG is
 * well formed and holds every action. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/libplan.h"
#include "libplan/schedule.h"

/* ---- helpers ------------------------------------------------------------- */

static void dump(const plan_diags *d) {
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    print_message("  %s:%d:%d: [%s] %s (%s)\n", g->file, g->line, g->column,
                  g->code, g->message, g->object);
  }
}

static plan_diags *simulate(plan_schedule *s, int blocking) {
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  o.blocking_sends = blocking;
  plan_diags *d = NULL;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_OK);
  assert_non_null(d);
  return d;
}

static plan_schedule *generate(int kind, int ranks, int stages, int64_t m) {
  plan_schedule *s = NULL;
  int rc = plan_schedule_generate(&s, kind, ranks, stages, m);
  if (rc) {
    char buf[1024];
    print_message("generate %s %d/%d/%lld: %s\n", plan_schedule_kind_name(kind),
                  ranks, stages, (long long)m,
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  return s;
}

static plan_schedule *grid(int stages, int64_t m, const char *const *rows,
                           int n) {
  plan_schedule *s = NULL;
  assert_int_equal(plan_schedule_from_grid(&s, stages, m, rows, n), PLAN_OK);
  return s;
}

static const plan_diag *find_code(const plan_diags *d, const char *code) {
  for (size_t i = 0; i < plan_diags_count(d); i++)
    if (!strcmp(plan_diags_get(d, i)->code, code))
      return plan_diags_get(d, i);
  dump(d);
  print_message("no finding %s\n", code);
  return NULL;
}

/* A finding of `code` whose message holds `text` (any, when NULL). */
static void expect_finding(const plan_diags *d, const char *code,
                           const char *text) {
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (!strcmp(g->code, code) && (!text || strstr(g->message, text)))
      return;
  }
  dump(d);
  print_message("no finding %s with '%s'\n", code, text ? text : "");
  fail();
}

/* Walks the schedule through the public API: every stage and microbatch
 * has one F and one B (or one I and one W) on the stage's rank, sends and
 * receives pair up between consecutive stages on different ranks only, and
 * the times respect the dependencies. */
static void expect_complete(const plan_schedule *s) {
  int S = plan_schedule_stages(s), R = plan_schedule_ranks(s);
  int64_t m = plan_schedule_microbatches(s);
  size_t cells = (size_t)S * (size_t)m;
  int *count = calloc(cells * PLAN_ACTION_KIND_COUNT, sizeof(int));
  int64_t *end = calloc(cells * PLAN_ACTION_KIND_COUNT, sizeof(int64_t));
  int64_t *start = calloc(cells * PLAN_ACTION_KIND_COUNT, sizeof(int64_t));
  assert_non_null(count);
  assert_non_null(end);
  assert_non_null(start);
  for (int r = 0; r < R; r++) {
    int64_t prev_end = 0;
    for (int64_t i = 0; i < plan_schedule_length(s, r); i++) {
      plan_schedule_action a;
      assert_int_equal(plan_schedule_get(&a, s, r, i), PLAN_OK);
      assert_int_equal(plan_schedule_stage_rank(s, a.stage), r);
      size_t at = ((size_t)a.stage * (size_t)m + (size_t)a.microbatch) *
                      PLAN_ACTION_KIND_COUNT +
                  (size_t)a.kind;
      count[at]++;
      assert_true(a.start >= prev_end); /* one action at a time */
      prev_end = a.end;
      start[at] = a.start;
      end[at] = a.end;
    }
  }
  for (int st = 0; st < S; st++)
    for (int64_t mb = 0; mb < m; mb++) {
      size_t c = ((size_t)st * (size_t)m + (size_t)mb) * PLAN_ACTION_KIND_COUNT;
      assert_int_equal(count[c + PLAN_ACTION_F], 1);
      bool split = count[c + PLAN_ACTION_I] > 0;
      if (split) {
        assert_int_equal(count[c + PLAN_ACTION_I], 1);
        assert_int_equal(count[c + PLAN_ACTION_W], 1);
        assert_int_equal(count[c + PLAN_ACTION_B], 0);
        assert_true(start[c + PLAN_ACTION_W] >= end[c + PLAN_ACTION_I]);
      } else {
        assert_int_equal(count[c + PLAN_ACTION_B], 1);
      }
      int bk = split ? PLAN_ACTION_I : PLAN_ACTION_B;
      assert_true(start[c + (size_t)bk] >= end[c + PLAN_ACTION_F]);
      bool cross_next = st + 1 < S && plan_schedule_stage_rank(s, st + 1) !=
                                          plan_schedule_stage_rank(s, st);
      bool cross_prev = st > 0 && plan_schedule_stage_rank(s, st - 1) !=
                                      plan_schedule_stage_rank(s, st);
      assert_int_equal(count[c + PLAN_ACTION_SEND_F], cross_next);
      assert_int_equal(count[c + PLAN_ACTION_RECV_B], cross_next);
      assert_int_equal(count[c + PLAN_ACTION_RECV_F], cross_prev);
      assert_int_equal(count[c + PLAN_ACTION_SEND_B], cross_prev);
      if (st > 0) { /* F(s) after F(s-1), B(s-1) after B(s) */
        size_t p = c - (size_t)m * PLAN_ACTION_KIND_COUNT;
        assert_true(start[c + PLAN_ACTION_F] >= end[p + PLAN_ACTION_F]);
        int pk = count[p + PLAN_ACTION_I] ? PLAN_ACTION_I : PLAN_ACTION_B;
        assert_true(start[p + (size_t)pk] >= end[c + (size_t)bk]);
      }
    }
  free(count);
  free(end);
  free(start);
}

static plan_schedule_result result(const plan_schedule *s) {
  plan_schedule_result res;
  assert_int_equal(plan_schedule_result_get(&res, s), PLAN_OK);
  return res;
}

/* ---- named schedules ----------------------------------------------------- */

/* With F = 1 and B = 2 (I = W = 1), a pipeline of p ranks and m
 * microbatches: gpipe and 1f1b take (m + p - 1)(F + B), so the bubble is
 * (p - 1) / (m + p - 1); interleaved-1f1b with v stages per rank takes
 * (v m + p - 1)(F + B) for m >= p, bubble (p - 1) / (v m + p - 1) (and
 * (v p + m - 1)(F + B) below); zb-h1 takes 3m + p - 1 for m >= p: its
 * bubble (p - 1) / (3m + p - 1) is a third of 1F1B's idle time. */
static int64_t expected_makespan(int kind, int p, int v, int64_t m) {
  switch (kind) {
  case PLAN_SCHEDULE_GPIPE:
  case PLAN_SCHEDULE_1F1B:
    return 3 * (m + p - 1);
  case PLAN_SCHEDULE_INTERLEAVED_1F1B:
    return m >= p ? 3 * (v * m + p - 1) : 3 * ((int64_t)v * p + m - 1);
  default:
    return m >= p ? 3 * m + p - 1 : -1;
  }
}

static void check_named(int kind, int p, int v, int64_t m) {
  plan_schedule *s = generate(kind, p, p * v, m);
  assert_int_equal(plan_schedule_kind_of(s), kind);
  int64_t spans[2];
  for (int blocking = 0; blocking < 2; blocking++) {
    plan_diags *d = simulate(s, blocking);
    if (plan_diags_count(d)) {
      print_message("%s p=%d v=%d m=%lld blocking=%d:\n",
                    plan_schedule_kind_name(kind), p, v, (long long)m,
                    blocking);
      dump(d);
    }
    assert_int_equal(plan_diags_count(d), 0);
    plan_diags_free(d);
    plan_schedule_result res = result(s);
    assert_true(res.simulated);
    assert_false(res.deadlock);
    expect_complete(s);
    spans[blocking] = res.makespan;
  }
  /* the last run had blocking sends; run buffered again for the figures */
  plan_diags_free(simulate(s, 0));
  plan_schedule_result res = result(s);
  int64_t want = expected_makespan(kind, p, v, m);
  if (want >= 0) {
    if (res.makespan != want)
      print_message("%s p=%d v=%d m=%lld: makespan %lld, expected %lld\n",
                    plan_schedule_kind_name(kind), p, v, (long long)m,
                    (long long)res.makespan, (long long)want);
    assert_int_equal(res.makespan, want);
    int per = 3 * v;
    double bubble = 1.0 - (double)(per * m) / (double)want;
    assert_true(res.bubble > bubble - 1e-12 && res.bubble < bubble + 1e-12);
    assert_int_equal(res.compute, (int64_t)p * per * m);
  }
  /* blocking sends cost nothing where every rank steps in lockstep */
  if (kind != PLAN_SCHEDULE_INTERLEAVED_1F1B)
    assert_int_equal(spans[1], spans[0]);
  else
    assert_true(spans[1] >= spans[0]);
  /* peak activations: gpipe keeps every microbatch; 1f1b and zb-h1 p - s
   * on stage s (fewer when m is smaller) */
  for (int st = 0; st < p * v; st++) {
    plan_schedule_stage_stats ss;
    assert_int_equal(plan_schedule_stage_stats_get(&ss, s, st), PLAN_OK);
    assert_int_equal(ss.rank, st % p);
    int64_t want_peak = kind == PLAN_SCHEDULE_GPIPE ? m
                        : p - st < m                ? p - st
                                                    : m;
    if (kind != PLAN_SCHEDULE_INTERLEAVED_1F1B)
      assert_int_equal(ss.peak_activations, want_peak);
    /* zb-h1: rank r defers W's by r microbatches */
    if (kind == PLAN_SCHEDULE_ZB_H1 && m >= p)
      assert_int_equal(ss.peak_pending_w, st + 1);
    else if (kind != PLAN_SCHEDULE_ZB_H1)
      assert_int_equal(ss.peak_pending_w, 0);
  }
  if (kind == PLAN_SCHEDULE_INTERLEAVED_1F1B)
    for (int r = 0; r < p; r++) {
      /* Megatron's bound: the warm-up forwards plus one */
      plan_schedule_rank_stats rs;
      assert_int_equal(plan_schedule_rank_stats_get(&rs, s, r), PLAN_OK);
      int64_t g = m / p > 0 ? m / (m / p) + (m % (m / p) > 0) : m;
      int64_t bound = 2 * (p - r - 1) + (int64_t)(v - 1) * g + 1;
      assert_true(rs.peak_activations <= (bound < v * m ? bound : v * m));
    }
  plan_schedule_free(s);
}

static void test_gpipe_and_1f1b(void **state) {
  (void)state;
  const int ps[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    for (int64_t m = 1; m <= 17; m++) {
      check_named(PLAN_SCHEDULE_GPIPE, ps[i], 1, m);
      check_named(PLAN_SCHEDULE_1F1B, ps[i], 1, m);
    }
}

static void test_interleaved(void **state) {
  (void)state;
  const int ps[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    for (int v = 2; v <= 4; v++)
      for (int64_t m = 1; m <= 17; m++)
        check_named(PLAN_SCHEDULE_INTERLEAVED_1F1B, ps[i], v, m);
  /* the figures of Megatron's paper: p = 4, v = 2, m = 8: bubble 3/19 */
  plan_schedule *s = generate(PLAN_SCHEDULE_INTERLEAVED_1F1B, 4, 8, 8);
  plan_diags_free(simulate(s, 0));
  assert_int_equal(result(s).makespan, 57);
  plan_schedule_free(s);
  /* with one stage per rank it is 1F1B */
  s = generate(PLAN_SCHEDULE_INTERLEAVED_1F1B, 4, 4, 8);
  plan_diags_free(simulate(s, 0));
  assert_int_equal(result(s).makespan, 33);
  plan_schedule_free(s);
}

static void test_zb_h1(void **state) {
  (void)state;
  const int ps[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    for (int64_t m = 1; m <= 17; m++)
      check_named(PLAN_SCHEDULE_ZB_H1, ps[i], 1, m);
  /* a third of 1F1B's idle time: p = 4, m = 8 */
  plan_schedule *z = generate(PLAN_SCHEDULE_ZB_H1, 4, 4, 8);
  plan_schedule *f = generate(PLAN_SCHEDULE_1F1B, 4, 4, 8);
  plan_diags_free(simulate(z, 0));
  plan_diags_free(simulate(f, 0));
  plan_schedule_result rz = result(z), rf = result(f);
  assert_int_equal(4 * rz.makespan - rz.compute, 4 * 3);
  assert_int_equal(4 * rf.makespan - rf.compute, 4 * 9);
  /* and the same peak activations as 1F1B */
  assert_int_equal(rz.peak_activations, rf.peak_activations);
  plan_schedule_free(z);
  plan_schedule_free(f);
}

/* The schedules PyTorch has beyond those (tests/python/test_schedules_torch.py
 * checks their orders action for action against torch.distributed.pipelining):
 * every one complete and deadlock-free with buffered and blocking sends.
 * With F = 1, I = W = 1, B = 2, the zero-bubble ones idle only R - 1 units
 * per rank (makespan 3 v m + R - 1) once m is large enough: m >= R for
 * interleaved-zb, m >= 2R for zbv and dualpipev; looped-bfs idles as long
 * as interleaved 1F1B and keeps every microbatch of every stage. */
static void check_more(int kind, int p, int v, int64_t m) {
  plan_schedule *s = generate(kind, p, p * v, m);
  assert_int_equal(plan_schedule_kind_of(s), kind);
  for (int blocking = 1; blocking >= 0; blocking--) {
    plan_diags *d = simulate(s, blocking);
    if (plan_diags_count(d)) {
      print_message("%s p=%d v=%d m=%lld blocking=%d:\n",
                    plan_schedule_kind_name(kind), p, v, (long long)m,
                    blocking);
      dump(d);
    }
    assert_int_equal(plan_diags_count(d), 0);
    plan_diags_free(d);
    assert_true(result(s).simulated);
    expect_complete(s);
  }
  plan_schedule_result res = result(s);
  bool vshape = kind == PLAN_SCHEDULE_ZBV || kind == PLAN_SCHEDULE_DUALPIPEV;
  for (int st = 0; st < p * v; st++)
    assert_int_equal(plan_schedule_stage_rank(s, st),
                     vshape && st >= p ? 2 * p - 1 - st : st % p);
  int64_t enough = kind == PLAN_SCHEDULE_INTERLEAVED_ZB ? p : 2 * p;
  if (kind != PLAN_SCHEDULE_LOOPED_BFS && m >= enough) {
    assert_int_equal(res.makespan, 3 * v * m + p - 1);
    /* activations held on the fullest rank: interleaved-zb's warm-up plus
     * one, (v - 1) mpr + p (mpr microbatches per round); v p for zbv, one
     * more for DualPipeV's pairs */
    int64_t rounds = m / p > 0 ? m / p : 1;
    int64_t want = kind == PLAN_SCHEDULE_INTERLEAVED_ZB
                       ? (int64_t)(v - 1) * (m / rounds) + p
                       : v * p + (kind == PLAN_SCHEDULE_DUALPIPEV);
    assert_int_equal(res.peak_activations, want);
  }
  if (kind == PLAN_SCHEDULE_LOOPED_BFS) {
    plan_schedule *i = generate(PLAN_SCHEDULE_INTERLEAVED_1F1B, p, p * v, m);
    plan_diags_free(simulate(i, 0));
    if (m >= p && v > 1)
      assert_int_equal(res.makespan, result(i).makespan);
    plan_schedule_free(i);
    assert_int_equal(res.peak_activations, v * m);
  }
  plan_schedule_free(s);
}

static void test_more_kinds(void **state) {
  (void)state;
  const int ps[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    for (int64_t m = 1; m <= 17; m++) {
      for (int v = 1; v <= 3; v++) {
        check_more(PLAN_SCHEDULE_LOOPED_BFS, ps[i], v, m);
        int64_t rounds = m / ps[i] > 0 ? m / ps[i] : 1;
        if (m % rounds == 0)
          check_more(PLAN_SCHEDULE_INTERLEAVED_ZB, ps[i], v, m);
      }
      check_more(PLAN_SCHEDULE_ZBV, ps[i], 2, m);
      if (m >= 2 * ps[i])
        check_more(PLAN_SCHEDULE_DUALPIPEV, ps[i], 2, m);
    }
  /* the shapes they refuse, with the reason */
  plan_schedule *s = NULL;
  assert_int_equal(plan_schedule_generate(&s, PLAN_SCHEDULE_ZBV, 4, 4, 8),
                   PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "two stages per rank"));
  assert_int_equal(plan_schedule_generate(&s, PLAN_SCHEDULE_DUALPIPEV, 4, 8, 7),
                   PLAN_EINVALID);
  assert_non_null(
      strstr(plan_error_last()->message, "as many microbatches as stages"));
  assert_int_equal(
      plan_schedule_generate(&s, PLAN_SCHEDULE_INTERLEAVED_ZB, 2, 4, 5),
      PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "rounds of equal size"));
  assert_int_equal(
      plan_schedule_generate(&s, PLAN_SCHEDULE_LOOPED_BFS, 2, 3, 4),
      PLAN_EINVALID);
  assert_null(s);
}

/* The durations are the caller's: with F = B the bubble formula of gpipe
 * and 1f1b holds too; a transfer time stretches the critical path. */
static void test_durations(void **state) {
  (void)state;
  plan_schedule *s = generate(PLAN_SCHEDULE_1F1B, 4, 4, 8);
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  o.duration[PLAN_ACTION_B] = 1;
  plan_diags *d;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  assert_int_equal(result(s).makespan, 2 * (8 + 4 - 1));
  o.duration[PLAN_ACTION_RECV_F] = o.duration[PLAN_ACTION_RECV_B] = 1;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  assert_true(result(s).makespan > 2 * (8 + 4 - 1));
  o.blocking_sends = 1;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_OK);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  /* bad options */
  o.duration[PLAN_ACTION_F] = -1;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_EUSAGE);
  o = (plan_schedule_options)PLAN_SCHEDULE_OPTIONS_INIT;
  o.version = 99;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_EUSAGE);
  assert_null(d);
  plan_schedule_free(s);
}

static void test_generate_errors(void **state) {
  (void)state;
  plan_schedule *s = (plan_schedule *)1;
  assert_int_equal(plan_schedule_generate(&s, PLAN_SCHEDULE_1F1B, 4, 8, 4),
                   PLAN_EINVALID);
  assert_null(s);
  assert_non_null(strstr(plan_error_last()->message, "one stage per rank"));
  assert_int_equal(
      plan_schedule_generate(&s, PLAN_SCHEDULE_INTERLEAVED_1F1B, 4, 6, 4),
      PLAN_EINVALID);
  assert_int_equal(plan_schedule_generate(&s, PLAN_SCHEDULE_EXPLICIT, 2, 2, 4),
                   PLAN_EUSAGE);
  assert_int_equal(plan_schedule_generate(&s, PLAN_SCHEDULE_GPIPE, 0, 0, 4),
                   PLAN_EINVALID);
  assert_int_equal(
      plan_schedule_generate(&s, PLAN_SCHEDULE_GPIPE, 64, 64, 1000000),
      PLAN_ELIMIT);
  /* names */
  for (int k = 0; k < PLAN_SCHEDULE_KIND_COUNT; k++)
    assert_int_equal(plan_schedule_kind_from_name(plan_schedule_kind_name(k)),
                     k);
  assert_int_equal(plan_schedule_kind_from_name("2f2b"), -1);
  assert_string_equal(plan_schedule_kind_name(99), "?");
  assert_string_equal(plan_action_kind_name(PLAN_ACTION_SEND_B), "SEND_B");
  /* views out of range */
  s = generate(PLAN_SCHEDULE_GPIPE, 2, 2, 2);
  plan_schedule_action a;
  assert_int_equal(plan_schedule_get(&a, s, 2, 0), PLAN_ENOTFOUND);
  assert_int_equal(plan_schedule_get(&a, s, 0, 99), PLAN_ENOTFOUND);
  assert_int_equal(plan_schedule_get(&a, s, 0, 0), PLAN_OK);
  assert_int_equal(a.start, -1); /* not simulated yet */
  plan_schedule_rank_stats rs;
  assert_int_equal(plan_schedule_rank_stats_get(&rs, s, 0), PLAN_EUSAGE);
  assert_int_equal(plan_schedule_stage_rank(s, 5), -1);
  assert_int_equal(plan_schedule_length(s, -1), -1);
  plan_schedule_free(s);
  plan_schedule_free(NULL);
}

/* ---- explicit grids --------------------------------------------------------
 */

/* Both ranks receive first: each waits for a send the other has not
 * reached. */
static void test_deadlock_recv_first(void **state) {
  (void)state;
  const char *rows[] = {"0RECV_B0 0F0 0SEND_F0 0B0",
                        "1RECV_F0 1F0 1B0 1SEND_B0"};
  plan_schedule *s = grid(2, 1, rows, 2);
  for (int blocking = 0; blocking < 2; blocking++) {
    plan_diags *d = simulate(s, blocking);
    expect_finding(d, "schedule.deadlock", "ranks 0 and 1 wait on each other");
    expect_finding(d, "schedule.deadlock",
                   "rank 0 waits at 0RECV_B0 for 1SEND_B0 on rank 1");
    expect_finding(d, "schedule.deadlock",
                   "rank 1 waits at 1RECV_F0 for 0SEND_F0 on rank 0");
    const plan_diag *g = find_code(d, "schedule.deadlock");
    assert_int_equal(g->severity, PLAN_SEV_ERROR);
    assert_string_equal(g->object, "rank 0");
    assert_int_equal(g->line, 1); /* row 0, its first action */
    assert_int_equal(g->column, 1);
    plan_diags_free(d);
    plan_schedule_result res = result(s);
    assert_false(res.simulated);
    assert_true(res.deadlock);
  }
  plan_schedule_free(s);
}

/* Without send/recv, a rank that runs a later stage's forward first waits
 * for the stage before it, which waits behind it. */
static void test_deadlock_implicit(void **state) {
  (void)state;
  const char *rows[] = {"2F0 0F0 0B0 2B0", "1F0 3F0 3B0 1B0"};
  plan_schedule *s = grid(4, 1, rows, 2);
  plan_diags *d = simulate(s, 0);
  expect_finding(d, "schedule.deadlock",
                 "rank 0 waits at 2F0 for 1F0 on rank 1");
  expect_finding(d, "schedule.deadlock",
                 "rank 1 waits at 1F0 for 0F0 on rank 0");
  plan_diags_free(d);
  plan_schedule_free(s);
  /* three ranks in a cycle */
  const char *rows3[] = {"3F0 0F0 0B0 3B0", "1F0 4F0 4B0 1B0",
                         "2F0 5F0 5B0 2B0"};
  s = grid(6, 1, rows3, 3);
  d = simulate(s, 0);
  expect_finding(d, "schedule.deadlock",
                 "ranks 0, 2 and 1 wait on each other in a cycle: rank 0 "
                 "waits at 3F0 for 2F0 on rank 2; rank 2 waits at 2F0 for 1F0 "
                 "on rank 1; rank 1 waits at 1F0 for 0F0 on rank 0");
  plan_diags_free(d);
  plan_schedule_free(s);
  /* two ranks in a cycle, a third waiting behind them */
  const char *behind[] = {"0RECV_B0 0F0 0SEND_F0 0B0",
                          "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0",
                          "2RECV_F0 2F0 2B0 2SEND_B0"};
  s = grid(3, 1, behind, 3);
  d = simulate(s, 0);
  expect_finding(d, "schedule.deadlock", "ranks 0 and 1 wait on each other");
  size_t notes = 0, errors = 0;
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    notes += plan_diags_get(d, i)->severity == PLAN_SEV_NOTE;
    errors += plan_diags_get(d, i)->severity == PLAN_SEV_ERROR;
  }
  assert_int_equal(errors, 1);
  assert_int_equal(notes, 1); /* rank 2 waits behind */
  expect_finding(d, "schedule.deadlock", "1 more rank waits behind");
  plan_diags_free(d);
  plan_schedule_free(s);
}

/* A grid that runs with buffered sends and deadlocks when a send waits
 * for its receive: rank 0 sends microbatch 1 while rank 1 sends the
 * gradient of microbatch 0. */
static void test_blocking_only_deadlock(void **state) {
  (void)state;
  const char *rows[] = {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                        "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"};
  plan_schedule *s = grid(2, 2, rows, 2);
  plan_diags *d = simulate(s, 0);
  assert_int_equal(plan_diags_count(d), 0);
  plan_diags_free(d);
  assert_int_equal(result(s).makespan, 9);
  d = simulate(s, 1);
  expect_finding(d, "schedule.deadlock", "with blocking sends");
  expect_finding(d, "schedule.deadlock",
                 "rank 0 waits at 0SEND_F1 for 1RECV_F1 on rank 1");
  plan_diags_free(d);
  /* buffered, with the note */
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  o.note_blocking = 1;
  assert_int_equal(plan_schedule_simulate(&d, s, &o), PLAN_OK);
  assert_int_equal(plan_diags_count_at_least(d, PLAN_SEV_WARNING), 0);
  const plan_diag *g = find_code(d, "schedule.blocking");
  assert_non_null(g);
  assert_int_equal(g->severity, PLAN_SEV_NOTE);
  plan_diags_free(d);
  assert_true(result(s).simulated);
  plan_schedule_free(s);
}

static void expect_refused(const char *const *rows, int n, int stages,
                           int64_t m, const char *code, const char *text) {
  plan_schedule *s = grid(stages, m, rows, n);
  plan_diags *d = simulate(s, 0);
  expect_finding(d, code, text);
  assert_false(result(s).simulated);
  assert_false(result(s).deadlock);
  plan_diags_free(d);
  plan_schedule_free(s);
}

static void test_refused_grids(void **state) {
  (void)state;
  /* a missing backward */
  const char *missing[] = {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1"};
  expect_refused(missing, 2, 2, 2, "schedule.incomplete", "1B1");
  /* a repeated forward */
  const char *twice[] = {"0F0 0F0 0B0", "1F0 1B0"};
  expect_refused(twice, 2, 2, 1, "schedule.duplicate", "0F0 appears more");
  /* B before F, W before I */
  const char *bf[] = {"0F0 0B0", "1B0 1F0"};
  expect_refused(bf, 2, 2, 1, "schedule.order", "1B0 runs before 1F0");
  const char *wi[] = {"0F0 0B0", "1F0 1W0 1I0"};
  expect_refused(wi, 2, 2, 1, "schedule.order", "1W0 runs before 1I0");
  /* a send before what it sends, a receive after what needs it */
  const char *sf[] = {"0SEND_F0 0F0 0B0", "1RECV_F0 1F0 1B0"};
  expect_refused(sf, 2, 2, 1, "schedule.order", "0SEND_F0 runs before 0F0");
  const char *rf[] = {"0F0 0SEND_F0 0B0", "1F0 1RECV_F0 1B0"};
  expect_refused(rf, 2, 2, 1, "schedule.order", "1F0 runs before 1RECV_F0");
  const char *sb[] = {"0F0 0RECV_B0 0B0", "1F0 1SEND_B0 1B0"};
  expect_refused(sb, 2, 2, 1, "schedule.order", "1SEND_B0 runs before 1B0");
  /* consecutive stages on one rank, out of order */
  const char *one[] = {"1F0 0F0 1B0 0B0"};
  expect_refused(one, 1, 2, 1, "schedule.order", "1F0 runs before 0F0");
  const char *one_b[] = {"0F0 1F0 0B0 1B0"};
  expect_refused(one_b, 1, 2, 1, "schedule.order", "0B0 runs before 1B0");
  /* an action on the wrong rank, outside the pipeline, unpaired */
  const char *wrong[] = {"0F0 1F0 0B0", "1B0"};
  expect_refused(wrong, 2, 2, 1, "schedule.rank", "stage 1 runs on rank 1");
  const char *outside[] = {"0F0 0B0 0F1", "1F0 1B0"};
  expect_refused(outside, 2, 2, 1, "schedule.action", "microbatch 1");
  const char *unpaired[] = {"0F0 0SEND_F0 0B0", "1F0 1B0"};
  expect_refused(unpaired, 2, 2, 1, "schedule.sendrecv",
                 "0SEND_F0 and 1RECV_F0 do not pair up");
  /* a row that does not parse: its row and column */
  const char *bad[] = {"0F0 0B0", "1F0 1X0"};
  plan_schedule *s = NULL;
  assert_int_equal(plan_schedule_from_grid(&s, 2, 1, bad, 2), PLAN_EINVALID);
  assert_null(s);
  assert_int_equal(plan_error_last()->line, 2);
  assert_int_equal(plan_error_last()->column, 5);
}

/* ---- plans
 * -------------------------------------------------------------------- */

#define PLAN_HEAD                                                              \
  "libplan: \"0.1\"\n"                                                         \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [batch=8, 16]}\n"                                            \
  "  ops:\n"                                                                   \
  "    - {name: l0.a, op: relu, in: [x], out: a0}\n"                           \
  "    - {name: l1.a, op: relu, in: [a0], out: a1}\n"                          \
  "mesh:\n  axes: [pp=2]\n"                                                    \
  "strategies: {\"*\": {in: [R], out: R}}\n"                                   \
  "pipeline:\n  axis: pp\n  microbatches: 2\n"                                 \
  "  stages: [{ops: [l0.a]}, {ops: [l1.a]}]\n"

static plan_plan *load(const char *text) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", NULL);
  if (rc) {
    char buf[1200];
    print_message("load failed: %s\n", plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  return p;
}

static void test_plans(void **state) {
  (void)state;
  /* a named schedule */
  plan_plan *p = load(PLAN_HEAD "  schedule: gpipe\n");
  plan_schedule *s;
  assert_int_equal(plan_schedule_from_plan(&s, p), PLAN_OK);
  assert_int_equal(plan_schedule_kind_of(s), PLAN_SCHEDULE_GPIPE);
  assert_int_equal(plan_schedule_ranks(s), 2);
  assert_int_equal(plan_schedule_microbatches(s), 2);
  plan_diags_free(simulate(s, 0));
  assert_int_equal(result(s).makespan, 9);
  plan_schedule_free(s);
  plan_free(p);
  /* a grid that deadlocks: validation says so, at the first rank's
   * position */
  const char *t = PLAN_HEAD "  grid:\n"
                            "    - \"0RECV_B0 0F0 0SEND_F0 0B0 0F1 0B1\"\n"
                            "    - \"1RECV_F0 1F0 1B0 1SEND_B0 1F1 1B1\"\n";
  p = load(t);
  plan_diags *d;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  expect_finding(d, "schedule.deadlock", "ranks 0 and 1 wait on each other");
  const plan_diag *g = find_code(d, "schedule.deadlock");
  assert_string_equal(g->file, "t.yaml");
  assert_int_equal(g->line, 16); /* the first action of rank 0 */
  assert_int_equal(g->column, 8);
  plan_diags_free(d);
  assert_int_equal(plan_schedule_from_plan(&s, p), PLAN_OK);
  d = simulate(s, 0);
  g = find_code(d, "schedule.deadlock");
  assert_int_equal(g->line, 16);
  plan_diags_free(d);
  plan_schedule_free(s);
  plan_free(p);
  /* no pipeline */
  p = load("libplan: \"0.1\"\nprogram:\n  tensors:\n    x: {shape: [4]}\n"
           "  ops:\n    - {name: a, op: relu, in: [x], out: y}\n"
           "mesh:\n  axes: [dp=2]\n");
  assert_int_equal(plan_schedule_from_plan(&s, p), PLAN_ENOTFOUND);
  plan_free(p);
}

/* The example grid is 1F1B for 2 stages and 4 microbatches written out,
 * and (as its comment says) it runs with blocking sends too. It posts each
 * receive of a forward before the backward before it, so rank 1 waits for
 * microbatch m + 1 before it runs backward m: 19 time units where the
 * generated 1F1B, which receives when the data is ready, takes 15. */
static void test_example_grid(void **state) {
  (void)state;
  plan_plan *p = NULL;
  if (plan_load(&p, "examples/pipeline-grid.plan.yaml")) {
    print_message("run the test from the repo root\n");
    fail();
  }
  plan_schedule *s;
  assert_int_equal(plan_schedule_from_plan(&s, p), PLAN_OK);
  assert_int_equal(plan_schedule_kind_of(s), PLAN_SCHEDULE_EXPLICIT);
  for (int blocking = 0; blocking < 2; blocking++) {
    plan_diags *d = simulate(s, blocking);
    assert_int_equal(plan_diags_count(d), 0);
    plan_diags_free(d);
    assert_int_equal(result(s).makespan, 19);
  }
  expect_complete(s);
  plan_schedule_free(s);
  plan_free(p);
  s = generate(PLAN_SCHEDULE_1F1B, 2, 2, 4);
  plan_diags_free(simulate(s, 1));
  assert_int_equal(result(s).makespan, 15);
  plan_schedule_free(s);
}

/* ---- output
 * ---------------------------------------------------------------------- */

/* Tags open and close in order (a small XML well-formedness check: names,
 * nesting, quoted attributes, no stray '<' or '&'). */
static void expect_well_formed(const char *x) {
  const char *stack[64];
  size_t len[64];
  int depth = 0, roots = 0;
  const char *p = x;
  if (!strncmp(p, "<?xml", 5))
    p = strstr(p, "?>") + 2;
  while (*p) {
    if (*p == '&') {
      const char *semi = strchr(p, ';');
      assert_non_null(semi);
      assert_true(semi - p <= 6);
      p = semi + 1;
      continue;
    }
    if (*p != '<') {
      if (depth == 0)
        assert_true(*p == '\n' || *p == ' ');
      p++;
      continue;
    }
    bool closing = p[1] == '/';
    const char *n = p + 1 + closing, *e = n;
    while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') ||
           (*e >= '0' && *e <= '9'))
      e++;
    assert_true(e > n);
    /* the rest of the tag: attributes with quoted values */
    const char *q = e;
    bool inq = false;
    while (*q && (inq || *q != '>')) {
      if (*q == '"')
        inq = !inq;
      assert_true(inq || *q != '<');
      q++;
    }
    assert_int_equal(*q, '>');
    bool self = q[-1] == '/';
    if (closing) {
      assert_true(depth > 0);
      depth--;
      assert_int_equal(len[depth], (size_t)(e - n));
      assert_memory_equal(stack[depth], n, len[depth]);
    } else if (!self) {
      assert_true(depth < 64);
      if (depth == 0)
        roots++;
      stack[depth] = n;
      len[depth++] = (size_t)(e - n);
    } else if (depth == 0) {
      roots++;
    }
    p = q + 1;
  }
  assert_int_equal(depth, 0);
  assert_int_equal(roots, 1);
}

static void expect_svg_holds_all(const plan_schedule *s, const char *svg) {
  size_t n = 0;
  for (const char *p = svg; (p = strstr(p, "data-action=\"")); p++)
    n++;
  size_t total = 0;
  for (int r = 0; r < plan_schedule_ranks(s); r++) {
    total += (size_t)plan_schedule_length(s, r);
    for (int64_t i = 0; i < plan_schedule_length(s, r); i++) {
      plan_schedule_action a;
      assert_int_equal(plan_schedule_get(&a, s, r, i), PLAN_OK);
      char want[96];
      snprintf(want, sizeof want, "data-action=\"%d%s%lld\"", a.stage,
               plan_action_kind_name(a.kind), (long long)a.microbatch);
      assert_non_null(strstr(svg, want));
    }
  }
  assert_int_equal(n, total);
}

static void test_outputs(void **state) {
  (void)state;
  const int kinds[] = {PLAN_SCHEDULE_GPIPE, PLAN_SCHEDULE_1F1B,
                       PLAN_SCHEDULE_INTERLEAVED_1F1B, PLAN_SCHEDULE_ZB_H1};
  for (size_t k = 0; k < 4; k++) {
    int v = kinds[k] == PLAN_SCHEDULE_INTERLEAVED_1F1B ? 2 : 1;
    plan_schedule *s = generate(kinds[k], 4, 4 * v, 8);
    plan_diags_free(simulate(s, 0));
    char *svg;
    size_t len;
    assert_int_equal(plan_schedule_write(&svg, &len, s, "svg", "a<b>&\"c\""),
                     PLAN_OK);
    assert_int_equal(strlen(svg), len);
    expect_well_formed(svg);
    expect_svg_holds_all(s, svg);
    assert_non_null(strstr(svg, "a&lt;b&gt;&amp;&quot;c&quot;"));
    assert_non_null(strstr(svg, "bubble"));
    free(svg);
    char *text;
    assert_int_equal(plan_schedule_write(&text, &len, s, "text", "x"), PLAN_OK);
    assert_non_null(strstr(text, "makespan"));
    assert_non_null(strstr(text, "peak activations per stage"));
    free(text);
    assert_int_equal(plan_schedule_write(&text, &len, s, "yaml", "x"), PLAN_OK);
    assert_non_null(strstr(text, "schema: \"libplan-schedule/1\""));
    assert_non_null(strstr(text, "grid:\n  - \"0F0"));
    free(text);
    assert_int_equal(plan_schedule_write(&text, &len, s, "json", "x"), PLAN_OK);
    assert_non_null(strstr(text, "\"schema\": \"libplan-schedule/1\""));
    free(text);
    plan_schedule_free(s);
  }
  /* a deadlock still draws: what ran, and where each rank stopped */
  const char *rows[] = {"0RECV_B0 0F0 0SEND_F0 0B0",
                        "1RECV_F0 1F0 1B0 1SEND_B0"};
  plan_schedule *s = grid(2, 1, rows, 2);
  plan_diags_free(simulate(s, 0));
  char *svg;
  size_t len;
  assert_int_equal(plan_schedule_write(&svg, &len, s, "svg", NULL), PLAN_OK);
  expect_well_formed(svg);
  assert_non_null(strstr(svg, "DEADLOCK"));
  assert_non_null(strstr(svg, "waits at 0RECV_B0"));
  free(svg);
  assert_int_equal(plan_schedule_write(&svg, &len, s, "png", NULL),
                   PLAN_EUSAGE);
  plan_schedule_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpipe_and_1f1b),
      cmocka_unit_test(test_interleaved),
      cmocka_unit_test(test_zb_h1),
      cmocka_unit_test(test_more_kinds),
      cmocka_unit_test(test_durations),
      cmocka_unit_test(test_generate_errors),
      cmocka_unit_test(test_deadlock_recv_first),
      cmocka_unit_test(test_deadlock_implicit),
      cmocka_unit_test(test_blocking_only_deadlock),
      cmocka_unit_test(test_refused_grids),
      cmocka_unit_test(test_plans),
      cmocka_unit_test(test_example_grid),
      cmocka_unit_test(test_outputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
