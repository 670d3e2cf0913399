/* The stream simulation as an SVG timeline in modeled milliseconds
 * (plan_cost_sim_svg, docs/training-and-pipelines.md, "Communication
 * overlap"): the compute stream's lane (each op a bar; a collective run
 * on the compute stream a red bar there, the compute waiting for it; the
 * time a wait holds the compute hatched), then one lane per communication
 * stream and link, each collective a bar from its start to its end over a
 * pale band from its start point to its wait, and a tick on the compute
 * lane where it is waited. What overlaps is what lies under an op bar. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"
#include "libplan/cost.h"

enum { LEFT = 150, TOP = 70, LANE_H = 26, LANE_GAP = 10, PLOT_W = 1100 };

#define RGB_OP 0x4e79a7
#define RGB_COLL 0xf28e2b
#define RGB_SYNC 0xe15759
#define RGB_BAND 0xfbe3cc
#define RGB_WAIT 0x555555

typedef struct lane {
  int stream;
  const char *link;
} lane;

static int lane_of(const lane *ln, int n, const plan_cost_sim_step_info *o) {
  for (int i = 0; i < n; i++)
    if (ln[i].stream == o->stream && !strcmp(ln[i].link, o->link))
      return i;
  return -1;
}

/* The title, the hatch pattern and the two lines of text above the plot. */
static void svg_head(plan_buf *b, const plan_cost_sim *s, const char *name,
                     double end_ms, int width, int height) {
  plan_buf_printf(
      b,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
      "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n",
      width, height, width, height);
  plan_buf_puts(b, "<title>");
  plan_buf_put_xml(b, name ? name : "plan");
  plan_buf_puts(b, ": streams in modeled ms</title>\n");
  plan_buf_puts(b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" "
                   "patternUnits=\"userSpaceOnUse\" "
                   "patternTransform=\"rotate(45)\"><rect width=\"6\" "
                   "height=\"6\" fill=\"#ffffff\"/><line x1=\"0\" y1=\"0\" "
                   "x2=\"0\" y2=\"6\" stroke=\"#e15759\" stroke-width=\"3\"/>"
                   "</pattern></defs>\n");
  plan_buf_puts(b, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  plan_buf_printf(b, "<text x=\"%d\" y=\"22\" font-size=\"15\">", 10);
  plan_buf_put_xml(b, name ? name : "plan");
  plan_buf_printf(
      b,
      ": modeled step %.4g ms, compute %.4g ms, exposed communication "
      "%.4g ms</text>\n",
      end_ms, plan_cost_sim_compute_seconds(s) * 1e3,
      plan_cost_sim_exposed_seconds(s) * 1e3);
  plan_buf_printf(b,
                  "<text x=\"10\" y=\"42\" fill=\"#555555\">ops blue; "
                  "collectives orange on their stream's lane (the pale band: "
                  "from their start to their wait), red where the compute "
                  "runs them; hatched: the compute waits</text>\n");
}

/* The compute lane and one lane per stream and link, labelled, and the
 * time axis in ms under them. */
static void svg_lanes(plan_buf *b, const lane *ln, int nl, double span,
                      double u) {
  for (int l = 0; l <= nl; l++) {
    double y = TOP + l * (LANE_H + LANE_GAP);
    plan_buf_printf(b,
                    "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%d\" "
                    "height=\"%d\" fill=\"#f4f4f4\"/>\n",
                    LEFT, y, PLOT_W, LANE_H);
    plan_buf_printf(b,
                    "<text class=\"lane-label\" x=\"%d\" y=\"%.1f\" "
                    "text-anchor=\"end\">",
                    LEFT - 8, y + LANE_H / 2 + 4);
    if (l == 0)
      plan_buf_puts(b, "compute (stream 0)");
    else {
      plan_buf_printf(b, "stream %d: ", ln[l - 1].stream);
      plan_buf_put_xml(b, ln[l - 1].link);
    }
    plan_buf_puts(b, "</text>\n");
  }
  /* the axis */
  double step_ms = plan_cost_tick_step(span / 10);
  double ya = TOP + (nl + 1) * (LANE_H + LANE_GAP) + 4;
  for (int k = 0; k * step_ms <= span * (1 + 1e-9) && k < 1000; k++) {
    double x = LEFT + u * k * step_ms;
    plan_buf_printf(b,
                    "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.1f\" "
                    "stroke=\"#dddddd\"/><text x=\"%.2f\" y=\"%.1f\" "
                    "text-anchor=\"middle\" fill=\"#555555\">%.4g</text>\n",
                    x, TOP, x, ya, x, ya + 14, k * step_ms);
  }
  plan_buf_printf(b,
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                  "fill=\"#555555\">ms</text>\n",
                  LEFT - 8, ya + 14);
}

/* Every step as a bar: ops and the compute's waits on lane 0, each
 * collective on its stream's lane over the band from its start point to
 * its wait (on lane 0, red, when the compute runs it). */
static void svg_bars(plan_buf *b, const plan_cost_sim_step_info *st, size_t n,
                     const lane *ln, int nl, double u) {
  for (size_t i = 0; i < n; i++) {
    const plan_cost_sim_step_info *o = &st[i];
    double t0 = o->start * 1e3, t1 = o->end * 1e3;
    if (o->kind == PLAN_COST_SIM_OP && t1 > t0) {
      plan_buf_printf(b,
                      "<rect class=\"op\" x=\"%.3f\" y=\"%d\" width=\"%.3f\" "
                      "height=\"%d\" fill=\"#%06x\" stroke=\"#ffffff\" "
                      "stroke-width=\"0.3\"><title>",
                      LEFT + u * t0, TOP, u * (t1 - t0), LANE_H, RGB_OP);
      plan_buf_put_xml(b, o->name);
      plan_buf_printf(b, ": %.4g-%.4g ms</title></rect>\n", t0, t1);
    } else if (o->kind == PLAN_COST_SIM_WAIT) {
      double x = LEFT + u * t0;
      if (t1 > t0)
        plan_buf_printf(b,
                        "<rect class=\"waiting\" x=\"%.3f\" y=\"%d\" "
                        "width=\"%.3f\" height=\"%d\" fill=\"url(#hatch)\">"
                        "<title>waits for ",
                        x, TOP, u * (t1 - t0), LANE_H);
      else
        plan_buf_printf(b,
                        "<line class=\"wait\" x1=\"%.3f\" y1=\"%d\" "
                        "x2=\"%.3f\" y2=\"%d\" stroke=\"#%06x\" "
                        "stroke-width=\"1.5\"><title>wait for ",
                        x, TOP - 4, x, TOP + LANE_H + 4, RGB_WAIT);
      plan_buf_put_xml(b, o->name);
      plan_buf_printf(b, " (stream %d): %.4g-%.4g ms</title></%s>\n", o->stream,
                      t0, t1, t1 > t0 ? "rect" : "line");
    } else if (o->kind == PLAN_COST_SIM_COLLECTIVE) {
      int l = o->stream > 0 ? lane_of(ln, nl, o) + 1 : 0;
      double y = TOP + l * (LANE_H + LANE_GAP);
      if (l > 0) {
        /* the band from the start point to the wait */
        double w1 = t1;
        for (size_t j = i + 1; j < n; j++)
          if (st[j].kind == PLAN_COST_SIM_WAIT && st[j].stream == o->stream &&
              !strcmp(st[j].name, o->name)) {
            w1 = st[j].start * 1e3;
            break;
          }
        double b0 = o->issued * 1e3;
        if (w1 > b0)
          plan_buf_printf(b,
                          "<rect class=\"window\" x=\"%.3f\" y=\"%.1f\" "
                          "width=\"%.3f\" height=\"%d\" fill=\"#%06x\"/>\n",
                          LEFT + u * b0, y + 2, u * (w1 - b0), LANE_H - 4,
                          RGB_BAND);
      }
      if (t1 <= t0)
        continue;
      plan_buf_printf(b,
                      "<rect class=\"collective\" data-stream=\"%d\" "
                      "x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"%d\" "
                      "fill=\"#%06x\" stroke=\"#ffffff\" stroke-width=\"0.3\">"
                      "<title>",
                      o->stream, LEFT + u * t0, y + (l ? 5 : 0), u * (t1 - t0),
                      l ? LANE_H - 10 : LANE_H, l ? RGB_COLL : RGB_SYNC);
      plan_buf_puts(b, o->collective);
      plan_buf_puts(b, " of ");
      plan_buf_put_xml(b, o->name);
      plan_buf_printf(b, " over %s", o->axis);
      if (o->chunk_of > 0)
        plan_buf_printf(b, ", chunk %lld of %lld", (long long)o->chunk_index,
                        (long long)o->chunk_of);
      plan_buf_printf(b, ": %.4g-%.4g ms (%.4g ms alone)</title></rect>\n", t0,
                      t1, o->seconds * 1e3);
    }
  }
}

int plan_cost_sim_svg(char **out, size_t *len, const plan_cost_sim *s,
                      const char *name) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_cost_sim_svg: NULL argument");
  *out = NULL;
  if (len)
    *len = 0;
  size_t n = plan_cost_sim_step_count(s);
  plan_cost_sim_step_info *st = malloc(sizeof *st * (n + 1));
  lane *ln = malloc(sizeof *ln * (n + 1));
  if (!st || !ln) {
    free(st);
    free(ln);
    return plan_oom();
  }
  int nl = 0;
  for (size_t i = 0; i < n; i++) {
    plan_cost_sim_step(&st[i], s, i);
    if (st[i].kind == PLAN_COST_SIM_COLLECTIVE && st[i].stream > 0 &&
        lane_of(ln, nl, &st[i]) < 0)
      ln[nl++] = (lane){st[i].stream, st[i].link};
  }
  /* lanes by stream, then link */
  for (int i = 1; i < nl; i++)
    for (int j = i; j > 0 && (ln[j].stream < ln[j - 1].stream ||
                              (ln[j].stream == ln[j - 1].stream &&
                               strcmp(ln[j].link, ln[j - 1].link) < 0));
         j--) {
      lane t = ln[j];
      ln[j] = ln[j - 1];
      ln[j - 1] = t;
    }
  double end_ms = plan_cost_sim_makespan(s) * 1e3;
  double span = end_ms > 0 ? end_ms : 1;
  double u = PLOT_W / span; /* pixels per ms */
  int height = TOP + (nl + 1) * (LANE_H + LANE_GAP) + 50;
  int width = LEFT + PLOT_W + 40;
  plan_buf b;
  plan_buf_init(&b);
  svg_head(&b, s, name, end_ms, width, height);
  svg_lanes(&b, ln, nl, span, u);
  svg_bars(&b, st, n, ln, nl, u);
  plan_buf_puts(&b, "</svg>\n");
  free(st);
  free(ln);
  return plan_buf_take(&b, out, len);
}
