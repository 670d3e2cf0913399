/* A training pipeline's timeline in modeled milliseconds, as an SVG
 * picture: the schedule's action lists run with the cost report's
 * per-stage durations (plan_cost_schedule_actions, the run the step time
 * comes from), each rank drawn as three lanes: compute (F, B, I, W, then
 * the optimizer), the collectives each action runs (then the gradient
 * synchronisation), and its sends, with an arrow from each send to the
 * rank that receives it. An action runs its compute, then its
 * collectives, then its send (the model prices them one after the other),
 * so a gap in the compute lane over a bar in another lane is communication
 * the compute waits for. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"
#include "libplan/schedule.h"
#include "schedule/schedule_actions.h"

enum { LEFT = 64, TOP = 66, LANE_C = 24, LANE_X = 9, LANE_GAP = 2 };
enum { RANK_GAP = 12, PLOT_W = 1000 };

static const unsigned act_rgb[4] = {0x4e79a7, 0x59a14f, 0xf28e2b, 0xb07aa1};
static const char *const act_label[4] = {
    "F forward", "B backward", "I input gradient", "W weight gradient"};
#define RGB_OPT 0x9c755f
#define RGB_COLL 0xe15759
#define RGB_SEND 0x333333
#define RGB_RECV 0x999999

static double rank_y(int r) {
  return TOP + (double)r * (LANE_C + 2 * (LANE_X + LANE_GAP) + RANK_GAP);
}

/* A tick step of 1, 2 or 5 times a power of ten, at least `min` (the
 * time axis of both SVG timelines, cost_sim_svg.c too). */
double plan_cost_tick_step(double min) {
  if (!(min > 0))
    return 1;
  double p = pow(10, floor(log10(min)));
  for (int i = 0; i < 4; i++, p *= 10) {
    if (p >= min)
      return p;
    if (2 * p >= min)
      return 2 * p;
    if (5 * p >= min)
      return 5 * p;
  }
  return p;
}

typedef struct tl {
  plan_buf *b;
  double u; /* pixels per millisecond */
} tl;

static double px(const tl *t, double ms) {
  return LEFT + t->u * ms;
}

/* One bar: lane 0 compute, 1 collectives, 2 sends. */
static void bar(const tl *t, const char *cls, int rank, int lane, double t0,
                double ms, unsigned rgb, const char *what, int stage,
                int64_t mb) {
  double y =
      rank_y(rank) +
      (lane == 0 ? 0 : LANE_C + LANE_GAP + (lane - 1) * (LANE_X + LANE_GAP));
  int h = lane == 0 ? LANE_C : LANE_X;
  plan_buf_printf(t->b,
                  "<rect class=\"%s\" data-rank=\"%d\" data-stage=\"%d\" "
                  "data-microbatch=\"%lld\" data-start-ms=\"%.9g\" "
                  "data-ms=\"%.9g\" x=\"%.4f\" y=\"%.1f\" width=\"%.4f\" "
                  "height=\"%d\" fill=\"#%06x\"><title>rank %d: %s",
                  cls, rank, stage, (long long)mb, t0, ms, px(t, t0), y,
                  t->u * ms, h, rgb, rank, what);
  if (stage >= 0)
    plan_buf_printf(t->b, " (stage %d", stage);
  if (mb >= 0)
    plan_buf_printf(t->b, ", microbatch %lld", (long long)mb);
  plan_buf_printf(t->b, "%s, %.4g-%.4g ms</title></rect>\n",
                  stage >= 0 ? ")" : "", t0, t0 + ms);
  /* the microbatch on a compute bar wide enough for it */
  if (lane == 0 && mb >= 0 && t->u * ms >= (mb >= 10 ? 16 : 10))
    plan_buf_printf(t->b,
                    "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" "
                    "fill=\"#ffffff\">%lld</text>\n",
                    px(t, t0) + t->u * ms / 2, y + 16, (long long)mb);
}

static void legend_item(plan_buf *b, double *x, double y, unsigned rgb,
                        const char *label) {
  plan_buf_printf(b,
                  "<rect class=\"key\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
                  "height=\"11\" fill=\"#%06x\"/>\n<text x=\"%.1f\" "
                  "y=\"%.1f\">%s</text>\n",
                  *x, y, rgb, *x + 19, y + 10, label);
  *x += 19 + 6.5 * (double)strlen(label) + 20;
}

/* The compute, collective and send parts of action i of rank r. */
static void draw_action(const tl *t, const plan_schedule *sc,
                        const plan_cost_stage_info *st, const double *t0,
                        const double *t1, int r, int64_t i) {
  const plan_action *a = &sc->acts[i];
  if (a->kind > PLAN_ACT_W || a->stage < 0 || a->stage >= sc->nstages)
    return;
  const plan_cost_stage_info *s = &st[a->stage];
  double comm = 0, send = 0;
  if (a->kind == PLAN_ACT_F) {
    comm = s->forward_comm;
    send = a->stage + 1 < sc->nstages ? s->send_forward : 0;
  } else if (a->kind != PLAN_ACT_W) {
    comm = s->backward_comm;
    send = a->stage > 0 ? s->send_backward : 0;
  }
  double total = (t1[i] - t0[i]) * 1e3, cms = comm * 1e3, sms = send * 1e3;
  double work = total - cms - sms;
  if (work < 0)
    work = 0;
  char what[48];
  plan_schedule_action_name(a, what);
  bar(t, plan_action_kind_name(a->kind), r, 0, t0[i] * 1e3, work,
      act_rgb[a->kind], what, a->stage, a->microbatch);
  if (cms > 0) {
    char w2[96], cls[16];
    snprintf(w2, sizeof w2, "collectives of %s", what);
    snprintf(cls, sizeof cls, "coll-%s", plan_action_kind_name(a->kind));
    bar(t, cls, r, 1, t0[i] * 1e3 + work, cms, RGB_COLL, w2, a->stage,
        a->microbatch);
  }
  /* the send, and an arrow to the rank of the stage it feeds */
  int to = a->kind == PLAN_ACT_F ? a->stage + 1 : a->stage - 1;
  if (to < 0 || to >= sc->nstages || sc->stage_rank[to] == r)
    return;
  char w3[96], cls3[16];
  snprintf(w3, sizeof w3, "send of %s to rank %d", what, sc->stage_rank[to]);
  snprintf(cls3, sizeof cls3, "send-%s", plan_action_kind_name(a->kind));
  double s0 = t0[i] * 1e3 + work + cms;
  bar(t, cls3, r, 2, s0, sms, RGB_SEND, w3, a->stage, a->microbatch);
  int rr = sc->stage_rank[to];
  double x = px(t, s0 + sms);
  double y0 = rank_y(r) + LANE_C + 2 * LANE_GAP + LANE_X + LANE_X / 2.0;
  double y1 = rank_y(rr) + LANE_C + 2 * LANE_GAP + LANE_X + LANE_X / 2.0;
  plan_buf_printf(t->b,
                  "<line class=\"arrow\" data-from=\"%d\" data-to=\"%d\" "
                  "x1=\"%.4f\" y1=\"%.1f\" x2=\"%.4f\" y2=\"%.1f\" "
                  "stroke=\"#%06x\" stroke-width=\"1\" "
                  "marker-end=\"url(#head)\"/>\n"
                  "<rect class=\"recv\" data-rank=\"%d\" data-stage=\"%d\" "
                  "data-microbatch=\"%lld\" data-start-ms=\"%.9g\" "
                  "x=\"%.4f\" y=\"%.1f\" width=\"2\" height=\"%d\" "
                  "fill=\"#%06x\"><title>rank %d receives from rank %d "
                  "(%s), %.4g ms</title></rect>\n",
                  r, rr, x, y0, x, y1 + (y1 > y0 ? -4 : 4), RGB_SEND, rr, to,
                  (long long)a->microbatch, s0 + sms, x - 1, y1 - LANE_X / 2.0,
                  LANE_X, RGB_RECV, rr, r, what, s0 + sms);
}

int plan_cost_timeline_write(char **out, size_t *len, const plan_cost_report *r,
                             const plan_plan *p, const char *name) {
  if (!out || !r || !p)
    return plan_failf(PLAN_EUSAGE, "plan_cost_timeline_write: NULL argument");
  *out = NULL;
  if (!r->pipeline || !r->training || r->nstage_rows < 1)
    return plan_failf(PLAN_ENOTFOUND, "the timeline in milliseconds needs a "
                                      "training pipeline");
  plan_schedule *sc = NULL;
  int rc = plan_schedule_from_plan(&sc, p);
  if (rc)
    return rc;
  if (sc->nstages != r->nstage_rows) {
    plan_schedule_free(sc);
    return plan_failf(PLAN_EUSAGE, "the report is not of this plan");
  }
  int S = sc->nstages, R = sc->nranks;
  double *d =
      malloc(sizeof(double) * ((size_t)S * 3 + (size_t)sc->nacts * 2 + 1));
  if (!d) {
    plan_schedule_free(sc);
    return plan_oom();
  }
  double *fwd = d, *bwd = d + S, *wgt = d + 2 * S, *t0 = d + 3 * S,
         *t1 = t0 + sc->nacts;
  const plan_cost_stage_info *st = r->stages;
  for (int s = 0; s < S; s++) {
    fwd[s] = st[s].forward + st[s].forward_comm + st[s].send_forward;
    bwd[s] = st[s].backward + st[s].backward_comm + st[s].send_backward;
    wgt[s] = st[s].weight_grad;
  }
  for (int64_t i = 0; i < sc->nacts; i++)
    t0[i] = t1[i] = -1;
  double makespan, bubble;
  rc = plan_cost_schedule_actions(&makespan, &bubble, NULL, sc, fwd, bwd, wgt,
                                  t0, t1);
  if (rc) {
    free(d);
    plan_schedule_free(sc);
    return rc < 0 ? plan_failf(PLAN_EINVALID, "the schedule deadlocks") : rc;
  }
  /* after the schedule: each rank's gradient synchronisation, then its
   * optimizer, for its costliest stage (the step adds the largest) */
  double tail = 0;
  for (int s = 0; s < S; s++)
    tail = fmax(tail, st[s].grad_sync + st[s].optimizer);
  double end_ms = (makespan + tail) * 1e3;
  plan_buf b;
  plan_buf_init(&b);
  tl t = {&b, end_ms > 0 ? PLOT_W / end_ms : 1};
  double width = LEFT + PLOT_W + 40;
  double axis_y = rank_y(R) - RANK_GAP + 6;
  double legend_y = axis_y + 34, height = legend_y + 30;
  plan_buf_printf(&b,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"Helvetica, Arial, sans-serif\" "
                  "font-size=\"11\">\n"
                  "<defs><marker id=\"head\" markerWidth=\"6\" "
                  "markerHeight=\"6\" refX=\"5\" refY=\"3\" orient=\"auto\">"
                  "<path d=\"M0,0 L6,3 L0,6 z\" fill=\"#%06x\"/></marker>"
                  "</defs>\n"
                  "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
                  "fill=\"#ffffff\"/>\n",
                  width, height, width, height, RGB_SEND, width, height);
  plan_buf_puts(&b, "<text x=\"16\" y=\"24\" font-size=\"15\" "
                    "font-weight=\"bold\" fill=\"#222\">");
  if (name && *name) {
    plan_buf_put_xml(&b, name);
    plan_buf_puts(&b, ": ");
  }
  plan_buf_printf(&b,
                  "%s, %d stage%s on %d rank%s, %lld microbatch%s, step "
                  "%.4g ms</text>\n<text x=\"16\" y=\"42\" fill=\"#555\">"
                  "modeled on ",
                  plan_schedule_kind_name(sc->kind), S, S == 1 ? "" : "s", R,
                  R == 1 ? "" : "s", (long long)sc->nmb,
                  sc->nmb == 1 ? "" : "es", end_ms);
  plan_buf_put_xml(&b, r->hardware);
  plan_buf_printf(&b,
                  "; schedule %.4g ms, bubble %.4g ms, then gradient sync "
                  "and optimizer %.4g ms</text>\n",
                  makespan * 1e3, bubble * 1e3, tail * 1e3);
  for (int k = 0; k < R; k++) {
    double y = rank_y(k);
    plan_buf_printf(&b,
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                    "fill=\"#222\">rank %d</text>\n"
                    "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%d\" "
                    "height=\"%d\" fill=\"#ececec\"/>\n",
                    LEFT - 8, y + LANE_C / 2.0 + 4, k, LEFT, y, PLOT_W,
                    LANE_C + 2 * (LANE_X + LANE_GAP));
  }
  for (int k = 0; k < R; k++)
    for (int64_t i = sc->off[k]; i < sc->off[k + 1]; i++)
      draw_action(&t, sc, st, t0, t1, k, i);
  for (int k = 0; k < R; k++) {
    int worst = -1;
    for (int s = 0; s < S; s++)
      if (sc->stage_rank[s] == k &&
          (worst < 0 || st[s].grad_sync + st[s].optimizer >
                            st[worst].grad_sync + st[worst].optimizer))
        worst = s;
    if (worst < 0)
      continue;
    double m0 = makespan * 1e3, sy = st[worst].grad_sync * 1e3;
    if (sy > 0)
      bar(&t, "grad_sync", k, 1, m0, sy, RGB_COLL, "gradient synchronisation",
          worst, -1);
    if (st[worst].optimizer > 0)
      bar(&t, "optimizer", k, 0, m0 + sy, st[worst].optimizer * 1e3, RGB_OPT,
          "optimizer", worst, -1);
  }
  /* the axis, in milliseconds */
  plan_buf_printf(&b,
                  "<line class=\"axis\" data-end-ms=\"%.9g\" x1=\"%d\" "
                  "y1=\"%.1f\" x2=\"%.4f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
                  end_ms, LEFT, axis_y, px(&t, end_ms), axis_y);
  double step = plan_cost_tick_step(60.0 / t.u);
  for (int k = 0; (double)k * step <= end_ms * (1 + 1e-12); k++) {
    double ms = (double)k * step, x = px(&t, ms);
    plan_buf_printf(&b,
                    "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
                    "stroke=\"#888\"/>\n<text x=\"%.2f\" y=\"%.1f\" "
                    "text-anchor=\"middle\" fill=\"#555\">%.4g</text>\n",
                    x, axis_y, x, axis_y + 4, x, axis_y + 16, ms);
  }
  plan_buf_printf(&b,
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                  "fill=\"#555\">ms</text>\n",
                  LEFT - 8, axis_y + 16);
  double x = LEFT;
  bool split = false;
  for (int64_t i = 0; i < sc->nacts; i++)
    split |= sc->acts[i].kind == PLAN_ACT_I;
  legend_item(&b, &x, legend_y, act_rgb[0], act_label[0]);
  if (split) {
    legend_item(&b, &x, legend_y, act_rgb[2], act_label[2]);
    legend_item(&b, &x, legend_y, act_rgb[3], act_label[3]);
  } else {
    legend_item(&b, &x, legend_y, act_rgb[1], act_label[1]);
  }
  legend_item(&b, &x, legend_y, RGB_OPT, "optimizer");
  legend_item(&b, &x, legend_y, RGB_COLL, "collectives (2nd lane)");
  legend_item(&b, &x, legend_y, RGB_SEND,
              "sends (3rd lane), arrow to receiver");
  plan_buf_puts(&b, "</svg>\n");
  free(d);
  plan_schedule_free(sc);
  return plan_buf_take(&b, out, len);
}
