/* `plan schedule`: a plan's pipeline schedule, simulated: per-rank action
 * rows, bubble fraction, peak activations, deadlocks with the ranks that
 * wait on each other, and the timeline as an SVG picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "libplan/cost.h"
#include "libplan/schedule.h"
#include "util.h"

const char usage_schedule[] =
    "usage: plan schedule [--format text|yaml|json] [--svg FILE]\n"
    "                     [--time ms|units] [--hardware NAME]\n"
    "                     [--sends buffered|blocking] [--durations K=N,...]\n"
    "                     [--schedule NAME] [--microbatches N] PLAN\n"
    "\n"
    "Builds the schedule of PLAN's pipeline (the named schedule generated\n"
    "for its stages, ranks and microbatches, or its explicit grid), checks\n"
    "it and simulates the ranks: each runs its actions in order, a forward\n"
    "waits for the previous stage's, a backward for the next stage's, a\n"
    "receive for its send. Prints each rank's actions, the bubble fraction\n"
    "(idle time over total) per rank and overall, and the peak number of\n"
    "live activations per stage (microbatches whose F ran and whose B or I\n"
    "has not). A deadlock is reported with the cycle of ranks that wait on\n"
    "each other, each at the action it waits at and for.\n"
    "A plan without a pipeline is drawn (--svg, in modeled milliseconds) as\n"
    "its streams: the compute stream's ops and one lane per communication\n"
    "stream and link, each collective from its start to its end, so the\n"
    "communication overlap is visible (docs/training-and-pipelines.md).\n"
    "  --format F      text (default), yaml or json (schema\n"
    "                  libplan-schedule/1: rows as a grid for a plan, stats,\n"
    "                  and each action's start and end)\n"
    "  --svg FILE      write the per-rank timeline as an SVG picture\n"
    "                  (atomically), also after a deadlock\n"
    "  --time ms       the picture in modeled milliseconds (the default for\n"
    "                  a training pipeline): each stage's F, B, I, W, its\n"
    "                  collectives and sends at the cost model's durations,\n"
    "                  as 'plan cost' prices the step\n"
    "  --time units    the picture in the simulation's time units (the\n"
    "                  default with --durations, --schedule, --microbatches,\n"
    "                  a forward-only pipeline or a deadlock)\n"
    "  --hardware NAME the profile of --time ms (as 'plan cost')\n"
    "  --sends MODE    buffered (default): a send completes on its own, and a\n"
    "                  note says whether blocking sends would deadlock;\n"
    "                  blocking: a send waits for its receive\n"
    "  --durations K=N,...  time units of F, B, I, W, SEND, RECV (or one of\n"
    "                  SEND_F, RECV_F, SEND_B, RECV_B); default\n"
    "                  F=1,B=2,I=1,W=1,SEND=0,RECV=0\n"
    "  --schedule NAME generate gpipe, 1f1b, interleaved-1f1b, zb-h1,\n"
    "                  looped-bfs, interleaved-zb, zbv or dualpipev for\n"
    "                  the plan's stages and ranks instead of its own\n"
    "  --microbatches N  with a named schedule: this many microbatches\n"
    "The plan is validated first (as 'plan validate'). Exit: 0 the schedule\n"
    "runs, 1 invalid plan, schedule findings or a deadlock, 2 unreadable\n"
    "input or bad usage.\n";

/* "F=1,B=2,SEND=1": sets o->duration. False on a bad item. */
static bool parse_durations(const char *text, plan_schedule_options *o,
                            char *bad, size_t badsz) {
  const char *p = text;
  while (*p) {
    const char *eq = strchr(p, '=');
    const char *end = strchr(p, ',');
    if (!end)
      end = p + strlen(p);
    if (!eq || eq > end) {
      snprintf(bad, badsz, "'%.*s' is not KIND=N", (int)(end - p), p);
      return false;
    }
    int64_t v;
    if (plan_parse_int(&v, eq + 1, (size_t)(end - eq - 1)) || eq[1] == '+' ||
        v < 0 || v > ((int64_t)1 << 32)) {
      snprintf(bad, badsz, "'%.*s' needs a whole number 0 to 2^32",
               (int)(end - p), p);
      return false;
    }
    size_t kl = (size_t)(eq - p);
    bool found = false;
    for (int k = 0; k < PLAN_ACTION_KIND_COUNT; k++) {
      const char *w = plan_action_kind_name(k);
      /* SEND and RECV name both directions */
      bool both = (kl == 4 && !strncmp(p, w, 4) && strlen(w) == 6);
      if ((strlen(w) == kl && !strncmp(p, w, kl)) || both) {
        o->duration[k] = v;
        found = true;
      }
    }
    if (!found) {
      snprintf(bad, badsz,
               "unknown action kind '%.*s' (F, B, I, W, SEND, RECV, SEND_F, "
               "RECV_F, SEND_B, RECV_B)",
               (int)kl, p);
      return false;
    }
    p = *end ? end + 1 : end;
  }
  return true;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int write_out(const plan_schedule *s, const char *format,
                     const char *name, const char *path) {
  char *text;
  size_t len;
  if (plan_schedule_write(&text, &len, s, format, name))
    return cli_fail_last();
  int rc = EXIT_OK;
  if (path)
    rc = cli_write_output(path, text, len);
  else if (fwrite(text, 1, len, stdout) != len)
    rc = EXIT_BAD_INPUT;
  plan_buffer_free(text);
  return rc;
}

/* The streams of plan p (no pipeline) in modeled milliseconds. */
static int write_streams(const plan_plan *p, const char *hw, const char *name,
                         const char *path) {
  plan_cost_model *m = NULL;
  plan_cost_sim *s = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = EXIT_OK;
  if (plan_cost_model_new(&m, p, hw) || plan_cost_simulate(&s, m, p, 0) ||
      plan_cost_sim_svg(&text, &len, s, name))
    rc = cli_fail_last();
  else
    rc = cli_write_output(path, text, len);
  plan_buffer_free(text);
  plan_cost_sim_free(s);
  plan_cost_model_free(m);
  return rc;
}

/* The timeline in modeled milliseconds of plan p; -1 (nothing written)
 * when p does not train. */
static int write_ms(const plan_plan *p, const char *hw, const char *name,
                    const char *path) {
  plan_cost_model *m = NULL;
  plan_cost_report *r = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = EXIT_OK, e = PLAN_OK;
  if (plan_cost_model_new(&m, p, hw) || plan_cost_plan(&r, m, p) ||
      (e = plan_cost_timeline_write(&text, &len, r, p, name)))
    rc = e == PLAN_ENOTFOUND ? -1 : cli_fail_last();
  else
    rc = cli_write_output(path, text, len);
  plan_buffer_free(text);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  return rc;
}

int cmd_schedule(int argc, char **argv) {
  const char *file = NULL, *format = "text", *svg = NULL, *kind_name = NULL;
  const char *time = NULL, *hw = NULL;
  int64_t microbatches = 0;
  plan_schedule_options o = PLAN_SCHEDULE_OPTIONS_INIT;
  o.note_blocking = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--format") && has) {
      format = argv[++i];
      if (strcmp(format, "text") && strcmp(format, "yaml") &&
          strcmp(format, "json"))
        return cli_usage("schedule", "--format takes text, yaml or json");
    } else if (!strcmp(a, "--svg") && has) {
      svg = argv[++i];
    } else if (!strcmp(a, "--time") && has) {
      time = argv[++i];
      if (strcmp(time, "ms") && strcmp(time, "units"))
        return cli_usage("schedule", "--time takes ms or units");
    } else if (!strcmp(a, "--hardware") && has) {
      hw = argv[++i];
    } else if (!strcmp(a, "--sends") && has) {
      const char *m = argv[++i];
      if (!strcmp(m, "blocking"))
        o.blocking_sends = 1;
      else if (!strcmp(m, "buffered"))
        o.blocking_sends = 0;
      else
        return cli_usage("schedule", "--sends takes buffered or blocking");
    } else if (!strcmp(a, "--durations") && has) {
      char bad[256];
      if (!parse_durations(argv[++i], &o, bad, sizeof bad))
        return cli_usage("schedule", "--durations: %s", bad);
    } else if (!strcmp(a, "--schedule") && has) {
      kind_name = argv[++i];
      int k = plan_schedule_kind_from_name(kind_name);
      if (k < 0 || k == PLAN_SCHEDULE_EXPLICIT)
        return cli_usage("schedule",
                         "--schedule takes gpipe, 1f1b, interleaved-1f1b, "
                         "zb-h1, looped-bfs, interleaved-zb, zbv or "
                         "dualpipev, not '%s'",
                         kind_name);
    } else if (!strcmp(a, "--microbatches") && has) {
      int rc = cli_int_arg("schedule", a, argv[++i], 1, 1000000, &microbatches);
      if (rc)
        return rc;
    } else if (a[0] == '-' && a[1]) {
      return cli_unknown_option("schedule", a);
    } else if (file) {
      return cli_usage("schedule", "one plan at a time");
    } else {
      file = a;
    }
  }
  if (!file)
    return cli_usage("schedule", "no plan given");
  bool changed = kind_name || microbatches || o.duration[0] != 1 ||
                 o.duration[1] != 2 || o.duration[2] != 1 || o.duration[3] != 1;
  for (int k = PLAN_ACTION_SEND_F; k < PLAN_ACTION_KIND_COUNT; k++)
    changed |= o.duration[k] != 0;
  if (time && !strcmp(time, "ms") && changed)
    return cli_usage("schedule", "--time ms draws the plan's own schedule "
                                 "at the cost model's durations: not with "
                                 "--durations, --schedule or --microbatches");
  if (hw && (!time || strcmp(time, "ms")) && changed)
    return cli_usage("schedule", "--hardware goes with --time ms");
  if (hw) {
    int hrc = cli_hardware_arg("schedule", "--hardware", hw);
    if (hrc)
      return hrc;
  }
  bool text = !strcmp(format, "text");
  FILE *msg = text ? stdout : stderr;
  plan_plan *p;
  /* the schedule's own findings are left to the simulation, which reports
   * them again and still draws a schedule that deadlocks */
  int rc = cli_load_valid_except(file, msg, "scheduled", "schedule.", &p);
  if (rc)
    return rc;
  if (plan_stage_count(p) == 0 && svg && !changed &&
      (!time || !strcmp(time, "ms"))) {
    /* no pipeline: the streams */
    rc = write_streams(p, hw, base_name(file), svg);
    if (!rc && text)
      printf("streams of %s written to %s\n", file, svg);
    plan_free(p);
    return rc;
  }
  plan_schedule *s;
  if (plan_schedule_from_plan(&s, p)) {
    plan_free(p);
    return cli_fail_last();
  }

  if (kind_name || microbatches) {
    int kind = kind_name ? plan_schedule_kind_from_name(kind_name)
                         : plan_schedule_kind_of(s);
    if (kind == PLAN_SCHEDULE_EXPLICIT) {
      plan_schedule_free(s);
      plan_free(p);
      return cli_usage("schedule",
                       "%s has an explicit grid: --microbatches "
                       "goes with a named schedule (--schedule)",
                       file);
    }
    plan_schedule *g;
    plan_free(p);
    p = NULL;
    rc = plan_schedule_generate(
        &g, kind, plan_schedule_ranks(s), plan_schedule_stages(s),
        microbatches ? microbatches : plan_schedule_microbatches(s));
    plan_schedule_free(s);
    if (rc)
      return cli_fail_last();
    s = g;
  }
  plan_diags *d;
  if (plan_schedule_simulate(&d, s, &o)) {
    plan_schedule_free(s);
    plan_free(p);
    return cli_fail_last();
  }
  /* the findings after a text report (its last lines are the verdict),
   * before a YAML or JSON one (on stderr) */
  if (!text)
    cli_print_diags(msg, d);
  rc = write_out(s, format, file, NULL);
  if (text)
    cli_print_diags(msg, d);
  size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  plan_diags_free(d);
  plan_schedule_result res;
  plan_schedule_result_get(&res, s);
  if (!rc && svg && !res.simulated && !res.deadlock)
    fprintf(msg, "no timeline: the schedule did not run\n");
  else if (!rc && svg && res.simulated && p && (!time || !strcmp(time, "ms")))
    rc = write_ms(p, hw, base_name(file), svg);
  else if (!rc && svg)
    rc = write_out(s, "svg", base_name(file), svg);
  if (rc == -1 && time)
    rc = cli_usage("schedule",
                   "--time ms: %s does not train (a forward-only "
                   "pipeline is drawn in units)",
                   file);
  else if (rc == -1)
    rc = write_out(s, "svg", base_name(file), svg);
  if (!rc && text && svg && (res.simulated || res.deadlock))
    printf("timeline written to %s\n", svg);
  plan_schedule_free(s);
  plan_free(p);
  if (rc)
    return rc;
  return errors ? EXIT_NEGATIVE : EXIT_OK;
}
