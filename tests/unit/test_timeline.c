/* Unit tests for the timeline in modeled milliseconds (cost_timeline.c):
 * the picture is read back and its bars hold the cost model's durations
 * (each stage's F, B, I, W, collectives and sends as
 * plan_cost_report_stage gives them, and those stages add up to the
 * report's totals), the bars of a rank do not overlap and follow the
 * pipeline's dependencies, the axis ends at the modeled step, and a
 * forward-only pipeline is refused. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/libplan.h"

/* ---- reading the picture back ---------------------------------------------
 */

typedef struct bar {
  char cls[16];
  int rank, stage;
  long long mb;
  double start, ms, x, w;
} bar;

/* The value of attribute `name` of the element starting at e (up to its
 * '>'), copied to out; false when absent. */
static bool attr(const char *e, const char *name, char *out, size_t size) {
  const char *end = strchr(e, '>');
  char key[40];
  snprintf(key, sizeof key, " %s=\"", name);
  const char *a = strstr(e, key);
  if (!a || (end && a > end))
    return false;
  a += strlen(key);
  const char *q = strchr(a, '"');
  if (!q || (size_t)(q - a) >= size)
    return false;
  memcpy(out, a, (size_t)(q - a));
  out[q - a] = 0;
  return true;
}

static double num(const char *e, const char *name) {
  char v[64];
  assert_true(attr(e, name, v, sizeof v));
  return strtod(v, NULL);
}

/* Every <rect> with a data-rank: its class, rank, stage, microbatch,
 * start and length in ms, x and width. */
static bar *bars(const char *svg, int *n) {
  int cap = 64;
  bar *b = malloc(sizeof *b * (size_t)cap);
  assert_non_null(b);
  *n = 0;
  for (const char *e = strstr(svg, "<rect "); e; e = strstr(e + 1, "<rect ")) {
    char v[64];
    if (!attr(e, "data-rank", v, sizeof v) || !attr(e, "data-ms", v, sizeof v))
      continue;
    if (*n == cap) {
      cap *= 2;
      b = realloc(b, sizeof *b * (size_t)cap);
      assert_non_null(b);
    }
    bar *x = &b[(*n)++];
    assert_true(attr(e, "class", x->cls, sizeof x->cls));
    x->rank = (int)num(e, "data-rank");
    x->stage = (int)num(e, "data-stage");
    x->mb = (long long)num(e, "data-microbatch");
    x->start = num(e, "data-start-ms");
    x->ms = num(e, "data-ms");
    x->x = num(e, "x");
    x->w = num(e, "width");
  }
  return b;
}

static const bar *find(const bar *b, int n, const char *cls, int stage,
                       long long mb) {
  for (int i = 0; i < n; i++)
    if (!strcmp(b[i].cls, cls) && b[i].stage == stage && b[i].mb == mb)
      return &b[i];
  return NULL;
}

static void near(double got, double want, const char *what) {
  if (fabs(got - want) > 1e-6 * fmax(1, fabs(want)))
    fail_msg("%s: %.9g, want %.9g", what, got, want);
}

/* Pixels are written to 4 decimals. */
static void near_px(double got, double want, const char *what) {
  if (fabs(got - want) > 6e-5)
    fail_msg("%s: %.6f px, want %.6f", what, got, want);
}

/* ---- tests ----------------------------------------------------------------
 */

typedef struct run {
  plan_plan *p;
  plan_cost_model *m;
  plan_cost_report *r;
  char *svg;
} run;

static void open_run(run *x, const char *path) {
  assert_int_equal(plan_load(&x->p, path), PLAN_OK);
  assert_int_equal(plan_cost_model_new(&x->m, x->p, "h100-sxm"), PLAN_OK);
  assert_int_equal(plan_cost_plan(&x->r, x->m, x->p), PLAN_OK);
  size_t len;
  assert_int_equal(plan_cost_timeline_write(&x->svg, &len, x->r, x->p, "t"),
                   PLAN_OK);
  assert_int_equal(strlen(x->svg), len);
}

static void close_run(run *x) {
  plan_buffer_free(x->svg);
  plan_cost_report_free(x->r);
  plan_cost_model_free(x->m);
  plan_free(x->p);
}

/* The bars of one plan against its report. */
static void check_plan(const char *path, bool split) {
  run x;
  open_run(&x, path);
  int n;
  bar *b = bars(x.svg, &n);
  assert_true(n > 0);
  /* the axis: from LEFT to its end, at the modeled step */
  const char *ax = strstr(x.svg, "<line class=\"axis\"");
  assert_non_null(ax);
  double end_ms = num(ax, "data-end-ms"), x1 = num(ax, "x1"),
         x2 = num(ax, "x2");
  near(end_ms, 1e3 * plan_cost_report_step_seconds(x.r), "axis end");
  double u = (x2 - x1) / end_ms;
  /* the stages add up to the report's totals */
  size_t S = plan_cost_report_stage_count(x.r);
  assert_true(S >= 2);
  int64_t M = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(b[i].cls, "F") && b[i].stage == 0)
      M++;
  assert_true(M >= 2);
  double compute = 0, comm = 0;
  for (size_t s = 0; s < S; s++) {
    plan_cost_stage_info st;
    assert_int_equal(plan_cost_report_stage(&st, x.r, s), PLAN_OK);
    compute += (st.forward + st.backward) * (double)M + st.optimizer;
    comm += (st.forward_comm + st.backward_comm + st.send_forward +
             st.send_backward) *
                (double)M +
            st.grad_sync;
  }
  near(compute, plan_cost_report_compute_seconds(x.r), "compute");
  near(comm, plan_cost_report_comm_seconds(x.r), "communication");
  plan_cost_stage_info none;
  assert_int_equal(plan_cost_report_stage(&none, x.r, S), PLAN_ENOTFOUND);
  /* every bar: x and width are its start and length at the axis' scale */
  for (int i = 0; i < n; i++) {
    near_px(b[i].x, x1 + u * b[i].start, "bar x");
    near_px(b[i].w, u * b[i].ms, "bar width");
    assert_true(b[i].start + b[i].ms <= end_ms * (1 + 1e-9));
  }
  /* each stage's F, B (or I and W), collectives and sends */
  for (size_t s = 0; s < S; s++) {
    plan_cost_stage_info st;
    assert_int_equal(plan_cost_report_stage(&st, x.r, s), PLAN_OK);
    for (long long j = 0; j < M; j++) {
      const bar *f = find(b, n, "F", (int)s, j);
      assert_non_null(f);
      assert_int_equal(f->rank, st.rank);
      near(f->ms, 1e3 * st.forward, "F");
      const bar *bk = find(b, n, split ? "I" : "B", (int)s, j);
      assert_non_null(bk);
      near(bk->ms, 1e3 * (st.backward - (split ? st.weight_grad : 0)),
           split ? "I" : "B");
      if (split)
        near(find(b, n, "W", (int)s, j)->ms, 1e3 * st.weight_grad, "W");
      else
        assert_null(find(b, n, "W", (int)s, j));
      if (st.forward_comm > 0) {
        const bar *c = find(b, n, "coll-F", (int)s, j);
        assert_non_null(c);
        near(c->start, f->start + f->ms, "collectives after F");
      }
      /* F(s) runs after F(s - 1) and its send have ended */
      if (s > 0) {
        const bar *prev = find(b, n, "F", (int)s - 1, j);
        const bar *snd = find(b, n, "send-F", (int)s - 1, j);
        if (prev->rank == f->rank) { /* the turn of a V: nothing is sent */
          assert_null(snd);
          assert_true(f->start >= prev->start + prev->ms - 1e-6);
          continue;
        }
        assert_non_null(snd);
        const bar *pc = find(b, n, "coll-F", (int)s - 1, j);
        near(snd->start, prev->start + prev->ms + (pc ? pc->ms : 0),
             "send after F and its collectives");
        assert_true(f->start >= snd->start + snd->ms - 1e-6);
      }
    }
  }
  /* a rank's compute bars never overlap */
  for (int i = 0; i < n; i++)
    for (int k = i + 1; k < n; k++) {
      bool ci = !strcmp(b[i].cls, "F") || !strcmp(b[i].cls, "B") ||
                !strcmp(b[i].cls, "I") || !strcmp(b[i].cls, "W");
      bool ck = !strcmp(b[k].cls, "F") || !strcmp(b[k].cls, "B") ||
                !strcmp(b[k].cls, "I") || !strcmp(b[k].cls, "W");
      if (!ci || !ck || b[i].rank != b[k].rank)
        continue;
      if (!(b[i].start + b[i].ms <= b[k].start + 1e-6 ||
            b[k].start + b[k].ms <= b[i].start + 1e-6))
        fail_msg("rank %d: %s%d,%lld at %.9g+%.9g overlaps %s%d,%lld at "
                 "%.9g+%.9g",
                 b[i].rank, b[i].cls, b[i].stage, b[i].mb, b[i].start, b[i].ms,
                 b[k].cls, b[k].stage, b[k].mb, b[k].start, b[k].ms);
    }
  free(b);
  close_run(&x);
}

static void test_1f1b_bars(void **state) {
  (void)state;
  check_plan("examples/transformer4-1f1b.plan.yaml", false);
}

static void test_zb_h1_bars(void **state) {
  (void)state;
  check_plan("examples/transformer4-zb-h1.plan.yaml", true);
}

static void test_zbv_bars(void **state) {
  (void)state;
  check_plan("examples/transformer4-zbv.plan.yaml", true);
}

/* A plan without a training pipeline has no timeline in ms. */
static void test_refused(void **state) {
  (void)state;
  plan_plan *p;
  plan_cost_model *m;
  plan_cost_report *r;
  assert_int_equal(plan_load(&p, "examples/mlp-train.plan.yaml"), PLAN_OK);
  assert_int_equal(plan_cost_model_new(&m, p, "h100-sxm"), PLAN_OK);
  assert_int_equal(plan_cost_plan(&r, m, p), PLAN_OK);
  assert_int_equal(plan_cost_report_stage_count(r), 0);
  char *out = (char *)1;
  size_t len;
  assert_int_equal(plan_cost_timeline_write(&out, &len, r, p, NULL),
                   PLAN_ENOTFOUND);
  assert_null(out);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_1f1b_bars),
      cmocka_unit_test(test_zb_h1_bars),
      cmocka_unit_test(test_zbv_bars),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
