/* Cost reports: accessors, and the writers (text tables for people; JSON
 * and YAML with schema "libplan-cost/1", the same fields in both). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"

#define SCHEMA "libplan-cost/1"

void plan_cost_report_free(plan_cost_report *r) {
  if (!r)
    return;
  free(r->ops);
  free(r->colls);
  plan_arena_free(&r->arena);
  free(r);
}

double plan_cost_report_step_seconds(const plan_cost_report *r) {
  return r ? r->step : 0;
}

double plan_cost_report_compute_seconds(const plan_cost_report *r) {
  return r ? r->compute_fwd + r->compute_bwd + r->recompute + r->optimizer_s
           : 0;
}

double plan_cost_report_comm_seconds(const plan_cost_report *r) {
  return r ? r->comm_fwd + r->comm_bwd + r->grad_sync + r->p2p : 0;
}

int plan_cost_report_overlapped(const plan_cost_report *r) {
  return r && r->overlapped;
}

double plan_cost_report_step_no_overlap_seconds(const plan_cost_report *r) {
  return r ? r->step_plain : 0;
}

double plan_cost_report_exposed_comm_seconds(const plan_cost_report *r) {
  return r ? r->exposed : 0;
}

double plan_cost_report_bubble_seconds(const plan_cost_report *r) {
  return r ? r->bubble : 0;
}

double plan_cost_report_memory_peak(const plan_cost_report *r) {
  return r ? r->peak : 0;
}

double plan_cost_report_memory_capacity(const plan_cost_report *r) {
  return r ? r->capacity : 0;
}

int plan_cost_report_fits(const plan_cost_report *r) {
  return r && r->fits;
}

const char *plan_cost_report_reason(const plan_cost_report *r) {
  return r && r->reason ? r->reason : "";
}

size_t plan_cost_report_op_count(const plan_cost_report *r) {
  return r ? (size_t)r->nops : 0;
}

int plan_cost_report_op(plan_cost_op_info *out, const plan_cost_report *r,
                        size_t i) {
  if (!out || !r || i >= (size_t)r->nops)
    return plan_failf(PLAN_ENOTFOUND, "cost report: no op row %zu", i);
  *out = r->ops[i];
  return PLAN_OK;
}

size_t plan_cost_report_collective_count(const plan_cost_report *r) {
  return r ? (size_t)r->ncolls : 0;
}

int plan_cost_report_collective(plan_cost_collective_info *out,
                                const plan_cost_report *r, size_t i) {
  if (!out || !r || i >= (size_t)r->ncolls)
    return plan_failf(PLAN_ENOTFOUND, "cost report: no collective row %zu", i);
  *out = r->colls[i];
  return PLAN_OK;
}

size_t plan_cost_report_memory_count(const plan_cost_report *r) {
  return r ? (size_t)r->nmem : 0;
}

int plan_cost_report_memory(plan_cost_memory_info *out,
                            const plan_cost_report *r, size_t i) {
  if (!out || !r || i >= (size_t)r->nmem)
    return plan_failf(PLAN_ENOTFOUND, "cost report: no memory row %zu", i);
  *out = r->mem[i];
  return PLAN_OK;
}

size_t plan_cost_report_stage_count(const plan_cost_report *r) {
  return r ? (size_t)r->nstage_rows : 0;
}

int plan_cost_report_stage(plan_cost_stage_info *out, const plan_cost_report *r,
                           size_t i) {
  if (!out || !r || i >= (size_t)r->nstage_rows)
    return plan_failf(PLAN_ENOTFOUND, "cost report: no stage %zu", i);
  *out = r->stages[i];
  return PLAN_OK;
}

/* ---- text ---------------------------------------------------------------- */

static char *fmt_time(char *buf, size_t size, double s) {
  if (s == 0)
    snprintf(buf, size, "0");
  else if (s < 1e-6)
    snprintf(buf, size, "%.0f ns", s * 1e9);
  else if (s < 1e-3)
    snprintf(buf, size, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, size, "%.2f ms", s * 1e3);
  else
    snprintf(buf, size, "%.3f s", s);
  return buf;
}

char *plan_format_bytes(char *buf, size_t size, double bytes) {
  static const char *const unit[] = {"B",   "KiB", "MiB", "GiB",
                                     "TiB", "PiB", "EiB"};
  double v = bytes;
  int i = 0;
  while (fabs(v) >= 1024 && i < 6) {
    v /= 1024;
    i++;
  }
  if (!buf || !size)
    return buf;
  if (i == 0)
    snprintf(buf, size, "%.0f B", v);
  else
    snprintf(buf, size, "%.2f %s", v, unit[i]);
  return buf;
}

/* 1234567 -> "1.23 M" + unit (counts: FLOPs) */
static char *fmt_si(char *buf, size_t size, double v, const char *unit) {
  static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (fabs(v) >= 1000 && i < 6) {
    v /= 1000;
    i++;
  }
  if (i == 0)
    snprintf(buf, size, "%.0f %s", v, unit);
  else
    snprintf(buf, size, "%.2f %s%s", v, pre[i], unit);
  return buf;
}

static int width(const char *s, int w, int cap) {
  int n = (int)strlen(s);
  if (n > cap)
    n = cap;
  return n > w ? n : w;
}

static void text_ops(plan_buf *b, const plan_cost_report *r) {
  int wn = 2, wk = 4;
  for (int i = 0; i < r->nops; i++) {
    wn = width(r->ops[i].name, wn, 48);
    wk = width(r->ops[i].kind, wk, 20);
  }
  plan_buf_printf(b, "ops (forward on the slowest rank's blocks, per step)\n");
  plan_buf_printf(b, "  %-*s  %-*s %s %12s %12s %10s %10s  %s\n", wn, "op", wk,
                  "kind", r->pipeline ? "stage" : "", "flops", "bytes", "time",
                  r->training ? "backward" : "", "bound");
  for (int i = 0; i < r->nops; i++) {
    const plan_cost_op_info *o = &r->ops[i];
    char f[32], by[32], t[32], bt[32], st[16] = "";
    if (r->pipeline)
      snprintf(st, sizeof st, "%5d", o->stage);
    plan_buf_printf(
        b, "  %-*.48s  %-*.20s %s %12s %12s %10s %10s  %s\n", wn, o->name, wk,
        o->kind, st, fmt_si(f, sizeof f, o->flops, "FLOP"),
        plan_format_bytes(by, sizeof by, o->bytes),
        fmt_time(t, sizeof t, o->seconds),
        r->training ? fmt_time(bt, sizeof bt, o->backward_seconds) : "",
        o->bound);
  }
}

static void text_colls(plan_buf *b, const plan_cost_report *r) {
  if (!r->ncolls) {
    plan_buf_puts(b, "\ncollectives: none\n");
    return;
  }
  int wt = 6, wa = 4;
  for (int i = 0; i < r->ncolls; i++) {
    wt = width(r->colls[i].tensor, wt, 40);
    wa = width(r->colls[i].axis, wa, 16);
  }
  plan_buf_printf(b, "\ncollectives (per step%s)\n",
                  r->training ? "; backward runs the mirror of each forward "
                                "one"
                              : "");
  plan_buf_printf(b,
                  "  %-12s %-*s %-14s %-*s %5s %-10s %-10s %11s %6s %10s  %s\n",
                  "phase", wt, "tensor", "kind", wa, "axis", "group", "link",
                  "algorithm", "bytes", "calls", "time", "placements");
  for (int i = 0; i < r->ncolls; i++) {
    const plan_cost_collective_info *c = &r->colls[i];
    char by[32], t[32];
    plan_buf_printf(b,
                    "  %-12s %-*.40s %-14s %-*.16s %5lld %-10s %-10s %11s "
                    "%6.0f %10s  %s%s%s\n",
                    c->phase, wt, c->tensor, c->kind, wa, c->axis,
                    (long long)c->group, c->link, c->algorithm,
                    plan_format_bytes(by, sizeof by, c->bytes), c->calls,
                    fmt_time(t, sizeof t, c->seconds), c->from,
                    c->from[0] ? " -> " : "", c->to);
  }
}

static void text_totals(plan_buf *b, const plan_cost_report *r) {
  char a[32], c[32], d[32];
  plan_buf_puts(b, "\ntime per step\n");
  plan_buf_printf(b, "  compute       forward %s",
                  fmt_time(a, sizeof a, r->compute_fwd));
  if (r->training)
    plan_buf_printf(b, ", backward %s, recompute %s, optimizer %s",
                    fmt_time(c, sizeof c, r->compute_bwd),
                    fmt_time(d, sizeof d, r->recompute),
                    fmt_time(a, sizeof a, r->optimizer_s));
  plan_buf_printf(b, "\n  collectives   forward %s",
                  fmt_time(a, sizeof a, r->comm_fwd));
  if (r->training)
    plan_buf_printf(b, ", backward %s, gradient sync %s",
                    fmt_time(c, sizeof c, r->comm_bwd),
                    fmt_time(d, sizeof d, r->grad_sync));
  plan_buf_putc(b, '\n');
  if (r->pipeline)
    plan_buf_printf(b,
                    "  pipeline      %d stages, %lld microbatches, %s: "
                    "transfers %s, bubble %s\n",
                    r->nstages, (long long)r->microbatches, r->schedule,
                    fmt_time(a, sizeof a, r->p2p),
                    fmt_time(c, sizeof c, r->bubble));
  if (r->overlapped)
    plan_buf_printf(b,
                    "  overlap       step without overlap %s, exposed "
                    "communication %s\n",
                    fmt_time(a, sizeof a, r->step_plain),
                    fmt_time(c, sizeof c, r->exposed));
  plan_buf_printf(b, "  step          %s%s\n", fmt_time(a, sizeof a, r->step),
                  r->pipeline ? " (stages overlap: the parts above are summed "
                                "over stages)"
                              : "");
}

static void text_memory(plan_buf *b, const plan_cost_report *r) {
  plan_buf_puts(b, "\nmemory per device\n");
  plan_buf_printf(b, "  %-8s %12s %12s %12s %12s %12s %12s%s\n", "devices",
                  "parameters", "gradients", "optimizer", "activations",
                  "workspace", "total", r->pipeline ? "  in flight" : "");
  for (int i = 0; i < r->nmem; i++) {
    const plan_cost_memory_info *m = &r->mem[i];
    char g[24], v[6][32];
    if (m->stage < 0)
      snprintf(g, sizeof g, "all");
    else
      snprintf(g, sizeof g, "stage %d", m->stage);
    plan_buf_printf(b, "  %-8s %12s %12s %12s %12s %12s %12s", g,
                    plan_format_bytes(v[0], 32, m->parameters),
                    plan_format_bytes(v[1], 32, m->gradients),
                    plan_format_bytes(v[2], 32, m->optimizer),
                    plan_format_bytes(v[3], 32, m->activations),
                    plan_format_bytes(v[4], 32, m->workspace),
                    plan_format_bytes(v[5], 32, m->total));
    if (r->pipeline)
      plan_buf_printf(b, "  %9.4g", m->inflight);
    plan_buf_putc(b, '\n');
  }
  char p[32], c[32];
  if (r->capacity > 0)
    plan_buf_printf(b, "  peak %s of %s: %s\n",
                    plan_format_bytes(p, sizeof p, r->peak),
                    plan_format_bytes(c, sizeof c, r->capacity),
                    r->fits ? "fits" : "DOES NOT FIT");
  else
    plan_buf_printf(b, "  peak %s (device memory unknown)\n",
                    plan_format_bytes(p, sizeof p, r->peak));
  if (!r->fits)
    plan_buf_printf(b, "  %s\n", r->reason);
}

int plan_cost_report_text(plan_buf *b, const plan_cost_report *r) {
  plan_buf_printf(b, "plan cost: %s\n", r->file[0] ? r->file : "(plan)");
  char hosts[64];
  if (r->devices_per_host > 0)
    snprintf(hosts, sizeof hosts, "%lld host%s of %lld", (long long)r->hosts,
             r->hosts == 1 ? "" : "s", (long long)r->devices_per_host);
  else
    snprintf(hosts, sizeof hosts, "one host");
  plan_buf_printf(b, "hardware %s; mesh %s (%lld devices, %s); links %s\n",
                  r->hardware, r->mesh, (long long)r->devices, hosts,
                  r->axis_links);
  plan_buf_printf(b, "step: %s%s%s\n\n",
                  r->training ? "training (forward, backward, optimizer "
                              : "forward",
                  r->training ? r->optimizer : "", r->training ? ")" : "");
  text_ops(b, r);
  text_colls(b, r);
  text_totals(b, r);
  text_memory(b, r);
  return PLAN_OK;
}

/* ---- json and yaml ------------------------------------------------------- */

static void json_str(plan_buf *b, const char *s) {
  plan_buf_quoted(b, s);
}

static void num(plan_buf *b, double v) {
  char buf[40];
  plan_buf_puts(b, isfinite(v) ? plan_format_double(v, buf) : "null");
}

/* `"key": ` in JSON; `key: ` in YAML (first: no separator before it). */
static void key(plan_buf *b, bool yaml, bool first, const char *k,
                const char *indent) {
  if (yaml)
    plan_buf_printf(b, "%s%s%s: ", first ? "" : "\n", indent, k);
  else
    plan_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", k);
}

static void kv_num(plan_buf *b, bool yaml, bool first, const char *k, double v,
                   const char *indent) {
  key(b, yaml, first, k, indent);
  num(b, v);
}

static void kv_str(plan_buf *b, bool yaml, bool first, const char *k,
                   const char *v, const char *indent) {
  key(b, yaml, first, k, indent);
  json_str(b, v);
}

/* Rows are flow mappings in both formats (JSON is YAML's flow style). */
static void f_num(plan_buf *b, const char *k, double v, bool first) {
  plan_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", k);
  num(b, v);
}

static void f_str(plan_buf *b, const char *k, const char *v, bool first) {
  plan_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", k);
  json_str(b, v);
}

static void rows_open(plan_buf *b, bool yaml, const char *k, int n) {
  if (yaml)
    plan_buf_printf(b, "\n%s:%s", k, n ? "" : " []");
  else
    plan_buf_printf(b, ", \"%s\": [", k);
}

static void row_open(plan_buf *b, bool yaml, int i) {
  plan_buf_puts(b, yaml ? "\n  - {" : i ? ",\n  {" : "\n  {");
}

static void rows_close(plan_buf *b, bool yaml, int n) {
  if (!yaml)
    plan_buf_puts(b, n ? "\n]" : "]");
}

int plan_cost_report_json(plan_buf *b, const plan_cost_report *r, bool yaml) {
  const char *in = yaml ? "  " : "";
  if (!yaml)
    plan_buf_putc(b, '{');
  kv_str(b, yaml, true, "schema", SCHEMA, "");
  kv_str(b, yaml, false, "plan", r->file, "");
  kv_str(b, yaml, false, "program", r->program, "");
  kv_str(b, yaml, false, "hardware", r->hardware, "");
  kv_str(b, yaml, false, "mesh", r->mesh, "");
  kv_num(b, yaml, false, "devices", (double)r->devices, "");
  kv_num(b, yaml, false, "hosts", (double)r->hosts, "");
  kv_str(b, yaml, false, "links", r->axis_links, "");
  key(b, yaml, false, "training", "");
  plan_buf_puts(b, r->training ? "true" : "false");
  key(b, yaml, false, "pipeline", "");
  if (r->pipeline) {
    plan_buf_printf(b,
                    "{\"stages\": %d, \"microbatches\": %lld, "
                    "\"schedule\": ",
                    r->nstages, (long long)r->microbatches);
    json_str(b, r->schedule);
    plan_buf_putc(b, '}');
  } else {
    plan_buf_puts(b, "null");
  }
  key(b, yaml, false, "time", "");
  if (!yaml)
    plan_buf_putc(b, '{');
  kv_num(b, yaml, !yaml, "step", r->step, in);
  kv_num(b, yaml, false, "compute_forward", r->compute_fwd, in);
  kv_num(b, yaml, false, "compute_backward", r->compute_bwd, in);
  kv_num(b, yaml, false, "recompute", r->recompute, in);
  kv_num(b, yaml, false, "optimizer", r->optimizer_s, in);
  kv_num(b, yaml, false, "collectives_forward", r->comm_fwd, in);
  kv_num(b, yaml, false, "collectives_backward", r->comm_bwd, in);
  kv_num(b, yaml, false, "grad_sync", r->grad_sync, in);
  kv_num(b, yaml, false, "pipeline_transfers", r->p2p, in);
  kv_num(b, yaml, false, "bubble", r->bubble, in);
  if (r->overlapped) { /* only a plan with overlap: the rest stays as it was */
    kv_num(b, yaml, false, "step_no_overlap", r->step_plain, in);
    kv_num(b, yaml, false, "exposed_collectives", r->exposed, in);
  }
  if (!yaml)
    plan_buf_putc(b, '}');
  key(b, yaml, false, "memory", "");
  if (!yaml)
    plan_buf_putc(b, '{');
  kv_num(b, yaml, !yaml, "capacity", r->capacity, in);
  kv_num(b, yaml, false, "peak", r->peak, in);
  key(b, yaml, false, "fits", in);
  plan_buf_puts(b, r->fits ? "true" : "false");
  kv_str(b, yaml, false, "reason", r->reason, in);
  key(b, yaml, false, "devices", in);
  plan_buf_putc(b, '[');
  for (int i = 0; i < r->nmem; i++) {
    const plan_cost_memory_info *m = &r->mem[i];
    plan_buf_puts(b, i ? ", {" : "{");
    f_num(b, "stage", m->stage, true);
    f_num(b, "parameters", m->parameters, false);
    f_num(b, "gradients", m->gradients, false);
    f_num(b, "optimizer", m->optimizer, false);
    f_num(b, "activations", m->activations, false);
    f_num(b, "workspace", m->workspace, false);
    f_num(b, "total", m->total, false);
    f_num(b, "inflight", m->inflight, false);
    plan_buf_putc(b, '}');
  }
  plan_buf_putc(b, ']');
  if (!yaml)
    plan_buf_putc(b, '}');
  rows_open(b, yaml, "ops", r->nops);
  for (int i = 0; i < r->nops; i++) {
    const plan_cost_op_info *o = &r->ops[i];
    row_open(b, yaml, i);
    f_str(b, "name", o->name, true);
    f_str(b, "kind", o->kind, false);
    f_num(b, "stage", o->stage, false);
    f_num(b, "flops", o->flops, false);
    f_num(b, "bytes", o->bytes, false);
    f_num(b, "seconds", o->seconds, false);
    f_num(b, "backward_seconds", o->backward_seconds, false);
    f_str(b, "bound", o->bound, false);
    plan_buf_putc(b, '}');
  }
  rows_close(b, yaml, r->nops);
  rows_open(b, yaml, "collectives", r->ncolls);
  for (int i = 0; i < r->ncolls; i++) {
    const plan_cost_collective_info *c = &r->colls[i];
    row_open(b, yaml, i);
    f_str(b, "phase", c->phase, true);
    f_str(b, "tensor", c->tensor, false);
    f_str(b, "kind", c->kind, false);
    f_str(b, "axis", c->axis, false);
    f_str(b, "from", c->from, false);
    f_str(b, "to", c->to, false);
    f_num(b, "group", (double)c->group, false);
    f_str(b, "link", c->link, false);
    f_str(b, "algorithm", c->algorithm, false);
    f_num(b, "bytes", c->bytes, false);
    f_num(b, "calls", c->calls, false);
    f_num(b, "seconds", c->seconds, false);
    plan_buf_putc(b, '}');
  }
  rows_close(b, yaml, r->ncolls);
  plan_buf_puts(b, yaml ? "\n" : "}\n");
  return PLAN_OK;
}

int plan_cost_report_write(char **out, size_t *len, const plan_cost_report *r,
                           const char *format) {
  if (!out || !r)
    return plan_failf(PLAN_EUSAGE, "plan_cost_report_write: NULL argument");
  *out = NULL;
  const char *f = format ? format : "text";
  plan_buf b;
  plan_buf_init(&b);
  if (!strcmp(f, "text"))
    plan_cost_report_text(&b, r);
  else if (!strcmp(f, "json"))
    plan_cost_report_json(&b, r, false);
  else if (!strcmp(f, "yaml"))
    plan_cost_report_json(&b, r, true);
  else
    return plan_failf(PLAN_EUSAGE,
                      "unknown report format '%s' (text, json or yaml)", f);
  return plan_buf_take(&b, out, len);
}
