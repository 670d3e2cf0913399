/* Writing a schedule and its simulation: text for people, YAML and JSON
 * (schema libplan-schedule/1) for tools, and the per-rank timeline as an
 * SVG picture. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"
#include "schedule/schedule_actions.h"

#define SCHEMA "libplan-schedule/1"

static bool is_compute(int kind) {
  return kind <= PLAN_ACT_W;
}

/* ---- shared pieces ----------------------------------------------------------
 */

/* A double-quoted string for YAML and JSON alike (both read \" \\ \uXXXX). */
static void put_quoted(plan_buf *b, const char *s) {
  plan_buf_quoted(b, s);
}

static void put_double(plan_buf *b, double v) {
  char buf[32];
  plan_buf_puts(b, plan_format_double(v, buf));
}

static double rank_bubble(const plan_schedule *s, int r) {
  return s->makespan > 0 ? 1.0 - (double)s->rank_busy[r] / (double)s->makespan
                         : 0.0;
}

static double total_bubble(const plan_schedule *s) {
  int64_t busy = 0;
  for (int r = 0; r < s->nranks; r++)
    busy += s->rank_busy[r];
  double total = (double)s->makespan * s->nranks;
  return total > 0 ? 1.0 - (double)busy / total : 0.0;
}

static const char *verdict(const plan_schedule *s) {
  return s->simulated ? "ok" : s->deadlock ? "deadlock" : "not simulated";
}

static void put_row(plan_buf *b, const plan_schedule *s, int r) {
  char a[48];
  for (int64_t i = s->off[r]; i < s->off[r + 1]; i++) {
    if (i > s->off[r])
      plan_buf_putc(b, ' ');
    plan_buf_puts(b, plan_schedule_action_name(&s->acts[i], a));
  }
}

/* ---- text ------------------------------------------------------------------
 */

static void write_text(plan_buf *b, const plan_schedule *s, const char *name) {
  plan_buf_printf(
      b, "%s%s%s, %d stage%s on %d rank%s, %lld microbatch%s\n",
      name ? name : "", name ? ": " : "", plan_schedule_kind_name(s->kind),
      s->nstages, s->nstages == 1 ? "" : "s", s->nranks,
      s->nranks == 1 ? "" : "s", (long long)s->nmb, s->nmb == 1 ? "" : "es");
  if (s->simulated || s->deadlock)
    plan_buf_printf(
        b,
        "durations: F %lld, B %lld, I %lld, W %lld, send %lld, "
        "receive %lld; %s sends\n",
        (long long)s->dur[PLAN_ACT_F], (long long)s->dur[PLAN_ACT_B],
        (long long)s->dur[PLAN_ACT_I], (long long)s->dur[PLAN_ACT_W],
        (long long)s->dur[PLAN_ACT_SEND_F], (long long)s->dur[PLAN_ACT_RECV_F],
        s->blocking ? "blocking" : "buffered");
  plan_buf_putc(b, '\n');
  int w = s->nranks > 10 ? 2 : 1;
  for (int r = 0; r < s->nranks; r++) {
    plan_buf_printf(b, "rank %*d: ", w, r);
    put_row(b, s, r);
    plan_buf_putc(b, '\n');
  }
  plan_buf_putc(b, '\n');
  if (!s->simulated) {
    plan_buf_printf(b, "%s\n",
                    s->deadlock ? "deadlock: the ranks wait on each other "
                                  "(see the findings)"
                                : "not simulated");
    return;
  }
  plan_buf_puts(b, "rank  busy  idle  bubble  peak activations  peak "
                   "pending W\n");
  for (int r = 0; r < s->nranks; r++)
    plan_buf_printf(
        b, "%4d  %4lld  %4lld  %5.1f%%  %16d  %14d\n", r,
        (long long)s->rank_busy[r], (long long)(s->makespan - s->rank_busy[r]),
        100.0 * rank_bubble(s, r), s->rank_peak[r], s->rank_peak_w[r]);
  plan_buf_puts(b, "peak activations per stage:");
  for (int st = 0; st < s->nstages; st++)
    plan_buf_printf(b, " %d", s->stage_peak[st]);
  plan_buf_putc(b, '\n');
  bool split = false;
  for (int st = 0; st < s->nstages; st++)
    split |= s->stage_peak_w[st] > 0;
  if (split) {
    plan_buf_puts(b, "peak pending W per stage:");
    for (int st = 0; st < s->nstages; st++)
      plan_buf_printf(b, " %d", s->stage_peak_w[st]);
    plan_buf_putc(b, '\n');
  }
  plan_buf_printf(b, "makespan %lld, bubble %.2f%%\n", (long long)s->makespan,
                  100.0 * total_bubble(s));
}

/* ---- YAML and JSON
 * ------------------------------------------------------------- */

/* One writer for both: JSON is written as flow YAML, so the two differ
 * only in layout (`json`: one document of flow collections). */
static void write_data(plan_buf *b, const plan_schedule *s, const char *name,
                       bool json) {
  const char *nl = json ? "" : "\n", *ind = json ? "" : "  ";
  const char *sep = json ? ", " : "\n";
#define KEY(k) plan_buf_printf(b, json ? "\"%s\": " : "%s: ", k)
#define LISTKEY(k) plan_buf_printf(b, json ? "\"%s\": [" : "%s:\n", k)
  if (json)
    plan_buf_putc(b, '{');
  KEY("schema");
  put_quoted(b, SCHEMA);
  plan_buf_puts(b, sep);
  KEY("name");
  put_quoted(b, name ? name : "");
  plan_buf_puts(b, sep);
  KEY("schedule");
  put_quoted(b, plan_schedule_kind_name(s->kind));
  plan_buf_puts(b, sep);
  KEY("ranks");
  plan_buf_printf(b, "%d%s", s->nranks, sep);
  KEY("stages");
  plan_buf_printf(b, "%d%s", s->nstages, sep);
  KEY("microbatches");
  plan_buf_printf(b, "%lld%s", (long long)s->nmb, sep);
  KEY("verdict");
  put_quoted(b, verdict(s));
  plan_buf_puts(b, sep);
  if (s->simulated || s->deadlock) {
    KEY("durations");
    plan_buf_putc(b, '{');
    for (int k = 0; k < PLAN_ACT_COUNT; k++)
      plan_buf_printf(b, json ? "%s\"%s\": %lld" : "%s%s: %lld", k ? ", " : "",
                      plan_action_word(k), (long long)s->dur[k]);
    plan_buf_printf(b, "}%s", sep);
    KEY("sends");
    put_quoted(b, s->blocking ? "blocking" : "buffered");
    plan_buf_puts(b, sep);
  }
  if (s->simulated) {
    KEY("makespan");
    plan_buf_printf(b, "%lld%s", (long long)s->makespan, sep);
    KEY("bubble");
    put_double(b, total_bubble(s));
    plan_buf_puts(b, sep);
    LISTKEY("per_rank");
    for (int r = 0; r < s->nranks; r++) {
      plan_buf_printf(b,
                      json ? "%s{\"rank\": %d, \"busy\": %lld, \"bubble\": "
                           : "%s- {rank: %d, busy: %lld, bubble: ",
                      json ? (r ? ", " : "") : ind, r,
                      (long long)s->rank_busy[r]);
      put_double(b, rank_bubble(s, r));
      plan_buf_printf(b,
                      json ? ", \"peak_activations\": %d, \"peak_pending_w\": "
                             "%d}"
                           : ", peak_activations: %d, peak_pending_w: %d}\n",
                      s->rank_peak[r], s->rank_peak_w[r]);
    }
    if (json)
      plan_buf_puts(b, "], ");
    LISTKEY("per_stage");
    for (int st = 0; st < s->nstages; st++)
      plan_buf_printf(b,
                      json ? "%s{\"stage\": %d, \"rank\": %d, "
                             "\"peak_activations\": %d, \"peak_pending_w\": %d}"
                           : "%s- {stage: %d, rank: %d, peak_activations: %d, "
                             "peak_pending_w: %d}\n",
                      json ? (st ? ", " : "") : ind, st, s->stage_rank[st],
                      s->stage_peak[st], s->stage_peak_w[st]);
    if (json)
      plan_buf_puts(b, "], ");
  }
  /* the grid, in the plan's grammar: pastes into a pipeline section */
  LISTKEY("grid");
  for (int r = 0; r < s->nranks; r++) {
    plan_buf_puts(b, json ? (r ? ", \"" : "\"") : "  - \"");
    put_row(b, s, r);
    plan_buf_puts(b, json ? "\"" : "\"\n");
  }
  if (json)
    plan_buf_puts(b, "]");
  if (s->simulated || s->deadlock) {
    /* [action, start, end] per action; -1 for actions a deadlock stopped */
    plan_buf_puts(b, json ? ", " : "");
    LISTKEY("timeline");
    char a[48];
    for (int r = 0; r < s->nranks; r++) {
      plan_buf_puts(b, json ? (r ? ", [" : "[") : "  - [");
      for (int64_t i = s->off[r]; i < s->off[r + 1]; i++)
        plan_buf_printf(b,
                        json ? "%s[\"%s\", %lld, %lld]" : "%s[%s, %lld, %lld]",
                        i > s->off[r] ? ", " : "",
                        plan_schedule_action_name(&s->acts[i], a),
                        (long long)s->start[i], (long long)s->end[i]);
      plan_buf_printf(b, "]%s", nl);
    }
    if (json)
      plan_buf_puts(b, "]");
  }
  if (json)
    plan_buf_puts(b, "}\n");
#undef KEY
#undef LISTKEY
}

/* ---- SVG ------------------------------------------------------------------
 */

static const unsigned kind_rgb[4] = {
    0x4e79a7, /* F: blue */
    0x59a14f, /* B: green */
    0xf28e2b, /* I: orange */
    0xb07aa1, /* W: purple */
};
static const char *const kind_label[4] = {
    "F forward", "B backward", "I input gradient", "W weight gradient"};

/* The colour mixed towards white by t (0..1). */
static unsigned tint(unsigned rgb, double t) {
  unsigned out = 0;
  for (int sh = 16; sh >= 0; sh -= 8) {
    double c = (double)((rgb >> sh) & 0xff);
    c = c + (255.0 - c) * t;
    out |= (unsigned)lround(c) << sh;
  }
  return out;
}

static bool light(unsigned rgb) {
  double r = (rgb >> 16) & 0xff, g = (rgb >> 8) & 0xff, bl = rgb & 0xff;
  return 0.299 * r + 0.587 * g + 0.114 * bl > 165.0;
}

/* A tick step of 1, 2 or 5 times a power of ten, at least `min` units. */
static int64_t nice_step(double min) {
  int64_t p = 1;
  while (true) {
    if ((double)p >= min)
      return p;
    if ((double)(2 * p) >= min)
      return 2 * p;
    if ((double)(5 * p) >= min)
      return 5 * p;
    if (p > INT64_MAX / 100)
      return p;
    p *= 10;
  }
}

enum { ROW_H = 26, STRIP = 7, ROW_GAP = 5, LEFT = 64, TOP = 66 };

static double row_y(int r) {
  return TOP + (double)r * (ROW_H + STRIP + ROW_GAP);
}

static void svg_legend_item(plan_buf *b, double *x, double y, unsigned rgb,
                            const char *label, bool tick) {
  if (tick)
    plan_buf_printf(b,
                    "<rect class=\"key\" x=\"%.1f\" y=\"%.1f\" width=\"3\" "
                    "height=\"%d\" fill=\"#%06x\"/>\n",
                    *x + 5, y + 2, STRIP, rgb);
  else
    plan_buf_printf(b,
                    "<rect class=\"key\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
                    "height=\"11\" rx=\"2\" fill=\"#%06x\"/>\n",
                    *x, y, rgb);
  plan_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\">", *x + 19, y + 10);
  plan_buf_put_xml(b, label);
  plan_buf_puts(b, "</text>\n");
  *x += 19 + 7.0 * (double)strlen(label) + 22;
}

/* The geometry of one timeline, worked out once for all its parts. */
typedef struct svg_frame {
  int R;        /* ranks */
  int v;        /* virtual stages per rank */
  bool ran;     /* simulated or deadlocked: there are times to show */
  int64_t span; /* the last end time, at least 1 */
  double u;     /* pixels per time unit */
  double plot_w, width, axis_y, legend_y, height;
  bool kinds[PLAN_ACT_COUNT]; /* the action kinds present */
} svg_frame;

static void svg_layout(svg_frame *f, const plan_schedule *s) {
  int R = s->nranks;
  f->R = R;
  f->ran = s->simulated || s->deadlock;
  int64_t span = 0;
  for (int64_t i = 0; i < s->nacts; i++)
    if (s->end[i] > span)
      span = s->end[i];
  if (span < 1)
    span = 1;
  f->span = span;
  double u = 1100.0 / (double)span;
  if (u > 36)
    u = 36;
  if (u < 0.5)
    u = 0.5;
  f->u = u;
  f->plot_w = u * (double)span;
  double right = 96;
  f->width = LEFT + f->plot_w + right;
  if (f->width < 760)
    f->width = 760;
  double rows_end = row_y(R) - ROW_GAP;
  f->axis_y = rows_end + 4;
  f->legend_y = f->axis_y + 30;
  f->height = f->legend_y + 30;
  f->v = s->nstages / (R > 0 ? R : 1);
  for (int k = 0; k < PLAN_ACT_COUNT; k++)
    f->kinds[k] = false;
  for (int64_t i = 0; i < s->nacts; i++)
    f->kinds[s->acts[i].kind] = true;
}

/* The document, its background, the title and the line of settings. */
static void svg_head(plan_buf *b, const plan_schedule *s, const char *name,
                     const svg_frame *f) {
  int R = f->R;
  plan_buf_printf(b,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"Helvetica, Arial, sans-serif\" "
                  "font-size=\"11\">\n",
                  f->width, f->height, f->width, f->height);
  plan_buf_printf(b,
                  "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
                  "fill=\"#ffffff\"/>\n",
                  f->width, f->height);
  /* title */
  plan_buf_puts(b, "<text x=\"16\" y=\"24\" font-size=\"15\" "
                   "font-weight=\"bold\" fill=\"#222\">");
  if (name && *name) {
    plan_buf_put_xml(b, name);
    plan_buf_puts(b, ": ");
  }
  plan_buf_printf(b, "%s, %d stage%s on %d rank%s, %lld microbatch%s",
                  plan_schedule_kind_name(s->kind), s->nstages,
                  s->nstages == 1 ? "" : "s", R, R == 1 ? "" : "s",
                  (long long)s->nmb, s->nmb == 1 ? "" : "es");
  if (s->simulated)
    plan_buf_printf(b, ", bubble %.1f%%", 100.0 * total_bubble(s));
  else if (s->deadlock)
    plan_buf_puts(b, ": DEADLOCK");
  plan_buf_puts(b, "</text>\n<text x=\"16\" y=\"42\" fill=\"#555\">");
  if (f->ran) {
    plan_buf_puts(b, "time units:");
    for (int k = 0, n = 0; k <= PLAN_ACT_W; k++)
      if (f->kinds[k])
        plan_buf_printf(b, "%s %s %lld", n++ ? "," : "", plan_action_word(k),
                        (long long)s->dur[k]);
    plan_buf_printf(b, "; %s sends", s->blocking ? "blocking" : "buffered");
  }
  if (s->simulated) {
    plan_buf_printf(b, "; makespan %lld; peak activations per stage",
                    (long long)s->makespan);
    for (int st = 0; st < s->nstages && st < 64; st++)
      plan_buf_printf(b, " %d", s->stage_peak[st]);
    if (s->nstages > 64)
      plan_buf_puts(b, " ...");
  }
  plan_buf_puts(b, "</text>\n");
  if (s->simulated)
    plan_buf_printf(b,
                    "<text x=\"%.1f\" y=\"%d\" fill=\"#555\" "
                    "text-anchor=\"end\">idle</text>\n",
                    f->width - 16, TOP - 6);
}

/* Every row's label and idle background (with its idle share), drawn
 * before any action so the actions lie over them. */
static void svg_rows(plan_buf *b, const plan_schedule *s, const svg_frame *f) {
  for (int r = 0; r < f->R; r++) {
    double y = row_y(r);
    plan_buf_printf(b,
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                    "fill=\"#222\">rank %d</text>\n",
                    LEFT - 8, y + ROW_H / 2.0 + 4, r);
    plan_buf_printf(b,
                    "<rect class=\"idle\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%d\" fill=\"#ececec\"/>\n",
                    LEFT, y, f->plot_w, ROW_H);
    if (s->simulated)
      plan_buf_printf(b,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                      "fill=\"#555\">%.1f%%</text>\n",
                      f->width - 16, y + ROW_H / 2.0 + 4,
                      100.0 * rank_bubble(s, r));
  }
}

/* One action of rank r that ran: a compute block in the row (its
 * microbatch, and stage when virtual stages share the rank, written on it
 * where it fits), or a tick in the strip under the row for a send or
 * receive. */
static void svg_action(plan_buf *b, const plan_schedule *s, const svg_frame *f,
                       int r, int64_t i) {
  const plan_action *a = &s->acts[i];
  double y = row_y(r), u = f->u;
  int R = f->R, v = f->v;
  char an[48];
  double x0 = LEFT + u * (double)s->start[i];
  double w = u * (double)(s->end[i] - s->start[i]);
  plan_schedule_action_name(a, an);
  if (!is_compute(a->kind)) {
    /* a send or receive: a tick in the strip under the row */
    bool send = a->kind == PLAN_ACT_SEND_F || a->kind == PLAN_ACT_SEND_B;
    plan_buf_printf(b,
                    "<rect data-action=\"%s\" x=\"%.1f\" y=\"%.1f\" "
                    "width=\"%.1f\" height=\"%d\" fill=\"#%s\">"
                    "<title>rank %d: %s, t %lld-%lld</title></rect>\n",
                    an, x0 - (w < 2 ? 1 : 0), y + ROW_H + 1, w < 2 ? 2 : w,
                    STRIP - 2, send ? "444444" : "aaaaaa", r, an,
                    (long long)s->start[i], (long long)s->end[i]);
    return;
  }
  unsigned rgb = kind_rgb[a->kind];
  if (v > 1)
    rgb = tint(rgb, 0.5 * (double)(a->stage / R) / (double)(v - 1));
  plan_buf_printf(b,
                  "<rect data-action=\"%s\" x=\"%.1f\" y=\"%.1f\" "
                  "width=\"%.1f\" height=\"%d\" fill=\"#%06x\" "
                  "stroke=\"#ffffff\" stroke-width=\"%s\">"
                  "<title>rank %d: %s (stage %d, microbatch %d), t "
                  "%lld-%lld</title></rect>\n",
                  an, x0, y, w, ROW_H, rgb, u >= 4 ? "1" : "0.3", r, an,
                  a->stage, a->microbatch, (long long)s->start[i],
                  (long long)s->end[i]);
  int digits = a->microbatch >= 100 ? 3 : a->microbatch >= 10 ? 2 : 1;
  if (w >= 6.5 * digits + 3) {
    const char *fg = light(rgb) ? "#222222" : "#ffffff";
    bool two = v > 1 && w >= 14;
    plan_buf_printf(b,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                    "fill=\"%s\">%d</text>\n",
                    x0 + w / 2, y + (two ? 12.0 : 17.0), fg, a->microbatch);
    if (two)
      plan_buf_printf(b,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                      "font-size=\"8\" fill=\"%s\">s%d</text>\n",
                      x0 + w / 2, y + 22.0, fg, a->stage);
  }
}

/* The actions of rank r in its row; where a deadlock stopped the rank, a
 * mark at its first action that never ran, and what it waits for. */
static void svg_rank(plan_buf *b, const plan_schedule *s, const svg_frame *f,
                     int r) {
  double y = row_y(r);
  int64_t stuck = -1;
  for (int64_t i = s->off[r]; i < s->off[r + 1]; i++) {
    if (s->end[i] < 0) {
      if (stuck < 0)
        stuck = i;
      continue;
    }
    svg_action(b, s, f, r, i);
  }
  if (stuck < 0)
    return;
  char an[48];
  double x0 = LEFT + f->u * (double)(stuck > s->off[r] ? s->end[stuck - 1] : 0);
  plan_buf_printf(b,
                  "<rect class=\"stuck\" x=\"%.1f\" y=\"%.1f\" width=\"3\" "
                  "height=\"%d\" fill=\"#d62728\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\">waits at "
                  "%s",
                  x0, y, ROW_H, x0 + 6, y + 17.0,
                  plan_schedule_action_name(&s->acts[stuck], an));
  int64_t want = s->deadlock ? s->rank_wait[r] : -1;
  if (want >= 0)
    plan_buf_printf(b, " for %s (rank %d)",
                    plan_schedule_action_name(&s->acts[want], an),
                    s->stage_rank[s->acts[want].stage]);
  plan_buf_puts(b, "</text>\n");
}

/* The time axis under the rows, ticks at a round step. */
static void svg_axis(plan_buf *b, const svg_frame *f) {
  double u = f->u, axis_y = f->axis_y;
  plan_buf_printf(b,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                  "stroke=\"#888\"/>\n",
                  LEFT, axis_y, LEFT + f->plot_w, axis_y);
  int64_t step = nice_step(48.0 / u);
  for (int64_t t = 0; t <= f->span; t += step) {
    double x = LEFT + u * (double)t;
    plan_buf_printf(b,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                    "stroke=\"#888\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                    "text-anchor=\"middle\" fill=\"#555\">%lld</text>\n",
                    x, axis_y, x, axis_y + 4, x, axis_y + 16, (long long)t);
  }
  plan_buf_printf(b,
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                  "fill=\"#555\">time</text>\n",
                  LEFT - 8, axis_y + 16);
}

/* The legend: the kinds present, idle, the ticks, the virtual stages. */
static void svg_legend(plan_buf *b, const svg_frame *f) {
  double x = LEFT, legend_y = f->legend_y;
  for (int k = 0; k <= PLAN_ACT_W; k++)
    if (f->kinds[k])
      svg_legend_item(b, &x, legend_y, kind_rgb[k], kind_label[k], false);
  svg_legend_item(b, &x, legend_y, 0xececec, "idle", false);
  if (f->kinds[PLAN_ACT_SEND_F] || f->kinds[PLAN_ACT_SEND_B]) {
    svg_legend_item(b, &x, legend_y, 0x444444, "send", true);
    svg_legend_item(b, &x, legend_y, 0xaaaaaa, "receive", true);
  }
  if (f->v > 1)
    svg_legend_item(b, &x, legend_y, tint(kind_rgb[0], 0.5),
                    "lighter: later virtual stage (sN: stage)", false);
}

/* An SVG timeline: one row per rank, the actions at their simulated
 * times, then the time axis and the legend. */
static void write_svg(plan_buf *b, const plan_schedule *s, const char *name) {
  svg_frame f;
  svg_layout(&f, s);
  svg_head(b, s, name, &f);
  svg_rows(b, s, &f);
  for (int r = 0; r < f.R; r++)
    svg_rank(b, s, &f, r);
  svg_axis(b, &f);
  svg_legend(b, &f);
  plan_buf_puts(b, "</svg>\n");
}

int plan_schedule_write(char **out, size_t *len, const plan_schedule *s,
                        const char *format, const char *name) {
  if (!out || !s || !format)
    return plan_failf(PLAN_EUSAGE, "plan_schedule_write: NULL argument");
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  if (!strcmp(format, "text"))
    write_text(&b, s, name);
  else if (!strcmp(format, "yaml"))
    write_data(&b, s, name, false);
  else if (!strcmp(format, "json"))
    write_data(&b, s, name, true);
  else if (!strcmp(format, "svg"))
    write_svg(&b, s, name);
  else
    return plan_failf(PLAN_EUSAGE,
                      "unknown schedule format '%s' (text, yaml, json, svg)",
                      format);
  return plan_buf_take(&b, out, len);
}
