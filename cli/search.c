/* `plan search` and `plan replay`: the options, a call to plan_search or
 * plan_replay (libplan/search.h, which run the Lua search driver), and
 * what they print and write. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "libplan/cost.h"
#include "libplan/search.h"
#include "util.h"

const char usage_search[] =
    "usage: plan search PROGRAM --mesh dp=2,tp=4 [--strategy NAME|FILE.lua]\n"
    "                   [--hardware NAME] [--seed N] [--width N] [--limit N] "
    "[--seconds N]\n"
    "                   [--self-contained] [--no-share] [--quiet] [--overlap]\n"
    "                   -o PLAN\n"
    "       plan search PLAN [options] -o PLAN   (--devices search)\n"
    "                   [--placement search] [--topology SPEC]\n"
    "                   [--mesh-shape search]\n"
    "       plan search PLAN --devices N [--hosts H] [options] -o PLAN\n"
    "\n"
    "Searches a plan for PROGRAM on a mesh (or makes again every decision of\n"
    "PLAN but its pinned regions), with a built-in strategy (megatron,\n"
    "greedy, beam, dp, ilp, exhaustive, hetero; default greedy) or a Lua\n"
    "file (docs/lua.md; hetero: docs/heterogeneous.md),\n"
    "priced by the cost model (--hardware h100, h200, a100; default the\n"
    "plan's own or h100). Writes the plan with its provenance (strategy,\n"
    "script hash, parameters, seed, library version, modeled cost), so\n"
    "'plan replay' can make it again.\n"
    "  --width N    beam's width (default 8)\n"
    "  --no-share   dp and ilp solve every copy of a repeated layer on its\n"
    "               own, greedy and beam price every op (by default once\n"
    "               per layer; the plans are the same but ilp's)\n"
    "  --quiet      no progress on stderr (by default a line every few\n"
    "               seconds, or one updated in place on a terminal)\n"
    "  --limit N    dp's most states per step (default 64), exhaustive's\n"
    "               most combinations (default 100000)\n"
    "  --seconds N  ilp's solver time limit, and the device order search's\n"
    "               (default 60)\n"
    "  --devices search  also choose the device order (each order of the\n"
    "               mesh axes over the devices, until --seconds) by the\n"
    "               modeled step time\n"
    "  --placement search  then choose the device assignment on the mesh's\n"
    "               topology (curves through the devices: row-major, snake,\n"
    "               2x2 tiles; host-major, interleaved; with every axis\n"
    "               order) by the modeled step; notes the gain\n"
    "  --topology SPEC  what-if topology for the placement and shape\n"
    "               searches, links from the hardware: torus:4x4,\n"
    "               torus:4x2:nowrap, levels:nvlink=4,ib\n"
    "  --overlap    then choose the plan's communication overlap: per\n"
    "               collective of one repeated layer its chunks (1, 2, 4)\n"
    "               and its start and wait points (a scheduling problem\n"
    "               solved by CBC), applied to every copy of the layer;\n"
    "               notes the modeled gain (STRATEGY+overlap does the same)\n"
    "  --devices N [--hosts H]  the joint search: the mesh over dp, fsdp,\n"
    "               cp, tp and pp for N devices on H hosts (tp within a\n"
    "               host),\n"
    "               the pipeline's stages (balanced by the cost model),\n"
    "               microbatches and recomputation, and the recipe (megatron,\n"
    "               fsdp, and --strategy when given) chosen together by the\n"
    "               modeled step among the plans that fit in memory; PLAN has\n"
    "               a training section; notes each recipe's best\n"
    "  --mesh-shape search  try every factorisation of the device count\n"
    "               over the mesh's axis names (sizes 1 allowed; a program\n"
    "               or a plan without pinned regions) and keep the least\n"
    "               modeled step\n"
    "Exit: 0 written, 1 the strategy failed or made an invalid plan,\n"
    "2 unreadable input or bad usage.\n";

const char usage_replay[] =
    "usage: plan replay PLAN [--strategy FILE.lua | --trust-embedded-script]\n"
    "\n"
    "Makes PLAN again from its provenance (the strategy, its parameters and\n"
    "seed; every decision but the pinned regions' is cleared first) and\n"
    "compares the plan hashes. Prints the differences when they differ.\n"
    "Nothing in PLAN is trusted: a built-in strategy runs by its name; a\n"
    "plan made with a strategy file needs that file named,\n"
    "  --strategy FILE.lua      its hash must be the one the provenance "
    "records\n"
    "or the script the provenance carries (--self-contained) run in the\n"
    "sandbox (docs/lua.md, \"Replay\"),\n"
    "  --trust-embedded-script  no io, os or require; limits on memory,\n"
    "                           instructions and time\n"
    "Exit: 0 the same plan, 1 a different plan or the strategy failed,\n"
    "2 unreadable input, no search in the provenance, or a strategy file\n"
    "neither named nor trusted (or not the recorded one).\n";

/* One valued option of plan search into o; EXIT_OK or a usage error. */
static int search_option(plan_search_options *o, const char *name,
                         const char *v, const char **out) {
  int64_t i = 0;
  int rc = EXIT_OK;
  if (!strcmp(name, "--mesh") && !(rc = cli_mesh_arg("search", name, v)))
    o->mesh = v;
  else if (!strcmp(name, "--strategy"))
    o->strategy = v;
  else if (!strcmp(name, "--hardware") &&
           !(rc = cli_hardware_arg("search", name, v)))
    o->hardware = v;
  else if (!strcmp(name, "-o"))
    *out = v;
  else if (!strcmp(name, "--devices") && !strcmp(v, "search"))
    o->devices = 1;
  else if (!strcmp(name, "--devices") && (v[0] < '0' || v[0] > '9'))
    return cli_usage("search",
                     "--devices takes 'search' or a device count, not '%s'", v);
  else if (!strcmp(name, "--devices") &&
           !(rc = cli_int_arg("search", name, v, 1, 1 << 22, &i)))
    o->joint_devices = (int)i;
  else if (!strcmp(name, "--hosts") &&
           !(rc = cli_int_arg("search", name, v, 1, 1 << 22, &i)))
    o->joint_hosts = (int)i;
  else if ((!strcmp(name, "--placement") || !strcmp(name, "--mesh-shape")) &&
           strcmp(v, "search"))
    return cli_usage("search", "%s takes 'search', not '%s'", name, v);
  else if (!strcmp(name, "--placement"))
    o->placement = 1;
  else if (!strcmp(name, "--mesh-shape"))
    o->mesh_shape = 1;
  else if (!strcmp(name, "--topology"))
    o->topology = v;
  else if (!strcmp(name, "--seed") &&
           !(rc = cli_int_arg("search", name, v, INT64_MIN, INT64_MAX, &i)))
    o->seed = i;
  else if (!strcmp(name, "--width") &&
           !(rc = cli_int_arg("search", name, v, 1, INT32_MAX, &i)))
    o->width = (int)i;
  else if (!strcmp(name, "--limit") &&
           !(rc = cli_int_arg("search", name, v, 1, INT64_MAX, &i)))
    o->limit = i;
  else if (!strcmp(name, "--seconds"))
    rc = cli_real_arg("search", name, v, 0, 1e9, &o->seconds);
  return rc;
}

/* A failed search or replay: the whole story on stderr; exit 1 when the
 * strategy failed, 3 when it refused work past its limits (cannot run
 * here), 2 when the input or the strategy could not be used. */
static int report_failure(const char *verb, const plan_search_info *info) {
  char buf[1400];
  const char *text =
      info->details ? info->details : plan_error_format(buf, sizeof buf);
  if (plan_error_last()->code == PLAN_EUNSUPPORTED) {
    fprintf(stderr, "plan %s: %s\n", verb, text);
    return EXIT_CANNOT_RUN;
  }
  if (info->strategy_ran) {
    fprintf(stderr, "plan: %s\n", text);
    return EXIT_NEGATIVE;
  }
  fprintf(stderr, "plan %s: %s\n", verb, text);
  return EXIT_BAD_INPUT;
}

/* The plan's mesh as "dp=2,tp=4" into buf. */
static const char *mesh_text(const plan_plan *p, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int a = 0; a < plan_mesh_axis_count(p) && n < size; a++) {
    int w = snprintf(buf + n, size - n, "%s%s=%lld", a ? "," : "",
                     plan_mesh_axis_name(p, a),
                     (long long)plan_mesh_axis_size(p, a));
    n += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

/* A strategy file's path as the provenance records it: relative to the
 * folder of the plan file written, which is where replay resolves it
 * against (as a program path is), so that the plan replays from any
 * working folder. Left as given when it cannot be resolved. */
static int record_strategy(plan_plan *p, const char *strategy,
                           const char *out) {
  size_t n = strlen(strategy);
  if (n < 4 || strcmp(strategy + n - 4, ".lua") || !strcmp(out, "-"))
    return PLAN_OK;
  char dir[4096], rel[4096];
  cli_dirname(out, dir, sizeof dir);
  if (cli_relative_path(rel, sizeof rel, strategy, dir) ||
      !strcmp(rel, strategy))
    return PLAN_OK;
  plan_provenance_value *v;
  if (plan_get_provenance(&v, p))
    return PLAN_OK;
  int rc = PLAN_OK;
  plan_provenance_value *items = NULL;
  if (v->type == PLAN_VALUE_MAP && v->count > 0 &&
      (items = malloc(sizeof *items * (size_t)v->count))) {
    memcpy(items, v->items, sizeof *items * (size_t)v->count);
    for (int i = 0; i < v->count; i++)
      if (!strcmp(v->keys[i], "strategy") && items[i].type == PLAN_VALUE_STRING)
        items[i].string = rel;
    plan_provenance_value m = *v;
    m.items = items;
    rc = plan_set_provenance(p, &m);
  }
  free(items);
  plan_buffer_free(v);
  return rc;
}

/* Writes the plan found to `out` ("-": standard output) and says what it
 * is (on standard error when the plan went to standard output). */
static int search_write(plan_plan *p, const plan_search_info *info,
                        const plan_search_options *o, const char *out) {
  char buf[1400], hash[PLAN_HASH_STRLEN], mesh[1100];
  plan_write_options w = PLAN_WRITE_OPTIONS_INIT;
  w.self_contained = o->self_contained;
  plan_hash h;
  bool to_stdout = !strcmp(out, "-");
  int rc = o->strategy ? record_strategy(p, o->strategy, out) : PLAN_OK;
  if (!rc && to_stdout) {
    char *text = NULL;
    size_t len = 0;
    rc = plan_write_buffer(&text, &len, p, &w);
    if (!rc && cli_write_output("-", text, len) != EXIT_OK) {
      plan_buffer_free(text);
      return EXIT_BAD_INPUT;
    }
    plan_buffer_free(text);
  } else if (!rc) {
    rc = plan_save(p, out, &w);
  }
  if (rc || plan_hash_part(&h, p, PLAN_PART_PLAN)) {
    fprintf(stderr, "plan search: %s\n", plan_error_format(buf, sizeof buf));
    return EXIT_BAD_INPUT;
  }
  double evals = (double)info->cost_evaluations;
  char mem[32];
  fprintf(to_stdout ? stderr : stdout,
          "%s: strategy %s on %s: modeled step %.3f ms, peak memory %s "
          "per device%s; %lld cost evaluations in %.3f s (%.0f/s); plan %s\n",
          to_stdout ? "(standard output)" : out,
          o->joint_devices ? "joint search"
          : o->strategy    ? o->strategy
                           : "greedy",
          o->mesh && !o->mesh_shape && !o->joint_devices
              ? o->mesh
              : mesh_text(p, mesh, sizeof mesh),
          info->step_seconds * 1e3,
          plan_format_bytes(mem, sizeof mem, info->memory_bytes),
          info->fits ? "" : " (does not fit)",
          (long long)info->cost_evaluations, info->seconds,
          info->seconds > 0 ? evals / info->seconds : 0.0,
          plan_hash_format(h, hash));
  return EXIT_OK;
}

/* Progress on stderr (plan_search_options.progress): on a terminal one
 * line updated in place at most every 0.1 s, otherwise a line every few
 * seconds (PLAN_PROGRESS_SECONDS, default 3); cleared or ended when the
 * search returns. */
typedef struct progress_state {
  bool tty, shown;
  double every, last, start;
} progress_state;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void show_progress(void *ctx, const char *what, int64_t done,
                          int64_t total) {
  progress_state *ps = ctx;
  double t = now_seconds();
  if (t - ps->last < ps->every)
    return;
  ps->last = t;
  char line[160];
  if (total > 0)
    snprintf(line, sizeof line, "plan search: %s %lld/%lld (%.0f%%), %.1f s",
             what, (long long)done, (long long)total,
             100.0 * (double)done / (double)total, t - ps->start);
  else
    snprintf(line, sizeof line, "plan search: %s, %.1f s", what, t - ps->start);
  if (ps->tty)
    fprintf(stderr, "\r%s\033[K", line);
  else
    fprintf(stderr, "%s\n", line);
  fflush(stderr);
  ps->shown = true;
}

int cmd_search(int argc, char **argv) {
  static const char *const valued[] = {
      "--mesh",     "--strategy",   "--hardware", "--seed",    "--width",
      "--limit",    "-o",           "--seconds",  "--devices", "--placement",
      "--topology", "--mesh-shape", "--hosts",    NULL};
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  const char *input = NULL, *out = NULL;
  bool quiet = false, overlap = false;
  for (int i = 1; i < argc; i++) {
    int k = 0;
    while (valued[k] && strcmp(argv[i], valued[k]))
      k++;
    if (valued[k]) {
      if (i + 1 >= argc)
        return cli_usage("search", "%s needs a value", argv[i]);
      if (strlen(argv[i + 1]) > 1000)
        return cli_usage("search", "%s: value too long", argv[i]);
      int rc = search_option(&o, argv[i], argv[i + 1], &out);
      if (rc)
        return rc;
      i++;
    } else if (!strcmp(argv[i], "--self-contained")) {
      o.self_contained = 1;
    } else if (!strcmp(argv[i], "--no-share")) {
      o.no_share = 1;
    } else if (!strcmp(argv[i], "--quiet")) {
      quiet = true;
    } else if (!strcmp(argv[i], "--overlap")) {
      overlap = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_unknown_option("search", argv[i]);
    } else if (input) {
      return cli_usage("search", "one program or plan at a time");
    } else {
      input = argv[i];
    }
  }
  if (!input)
    return cli_usage("search", "no program or plan given");
  if (!out)
    return cli_usage("search", "no output: -o PLAN");
  if (strlen(input) > 1000)
    return cli_usage("search", "path too long");
  /* a file with a mesh is a plan to search again; else a program, which
   * needs --mesh */
  size_t len;
  char *text = cli_read_file(input, &len, 0);
  if (!text)
    return cli_fail_last();
  bool is_plan = strstr(text, "\nmesh:") || !strncmp(text, "mesh:", 5);
  free(text);
  if (o.joint_hosts && !o.joint_devices)
    return cli_usage("search", "--hosts goes with --devices N");
  if (!is_plan && !o.mesh && !o.joint_devices) /* the joint search's own */
    return cli_usage("search", "a program needs --mesh (e.g. dp=2,tp=4)");
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p;
  progress_state ps = {.tty = isatty(STDERR_FILENO), .every = 0.1};
  if (!ps.tty) {
    const char *e = getenv("PLAN_PROGRESS_SECONDS");
    ps.every = e && atof(e) >= 0 ? atof(e) : 3;
  }
  ps.start = ps.last = now_seconds();
  if (!quiet) {
    o.progress = show_progress;
    o.progress_ctx = &ps;
  }
  /* --overlap: the strategy, then the overlap search (STRATEGY+overlap) */
  const char *strategy = o.strategy;
  char with_overlap[1100];
  if (overlap) {
    snprintf(with_overlap, sizeof with_overlap, "%s+overlap",
             strategy ? strategy : "greedy");
    o.strategy = with_overlap;
  }
  int rc = plan_search(&p, &info, input, &o);
  o.strategy = strategy;
  if (ps.shown && ps.tty)
    fputs("\r\033[K", stderr);
  if (info.notes)
    fputs(info.notes, stderr);
  rc = rc ? report_failure("search", &info) : search_write(p, &info, &o, out);
  plan_free(p);
  plan_search_info_clear(&info);
  return rc;
}

/* Prints each line of text with an indent. */
static void print_indented(const char *text) {
  for (const char *s = text; s && *s;) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    printf("  %.*s\n", (int)n, s);
    s += n + (nl != NULL);
  }
}

int cmd_replay(int argc, char **argv) {
  const char *input = NULL;
  plan_replay_options o = PLAN_REPLAY_OPTIONS_INIT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--strategy")) {
      if (i + 1 >= argc)
        return cli_usage("replay", "--strategy needs a value");
      if (strlen(argv[i + 1]) > 1000)
        return cli_usage("replay", "--strategy: value too long");
      o.strategy = argv[++i];
      continue;
    }
    if (!strcmp(argv[i], "--trust-embedded-script")) {
      o.trust_embedded_script = 1;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("replay", argv[i]);
    if (input)
      return cli_usage("replay", "one plan at a time");
    input = argv[i];
  }
  if (!input)
    return cli_usage("replay", "no plan given");
  if (strlen(input) > 1000)
    return cli_usage("replay", "path too long");
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_replay_result *r;
  if (o.strategy && o.trust_embedded_script)
    return cli_usage(
        "replay", "--strategy and --trust-embedded-script: one or the other");
  int rc = plan_replay_ext(&r, &info, input, &o);
  if (info.notes)
    fputs(info.notes, stderr);
  if (rc) {
    rc = report_failure("replay", &info);
  } else {
    char a[PLAN_HASH_STRLEN], b[PLAN_HASH_STRLEN];
    if (r->note)
      fprintf(stderr, "plan replay: note: %s\n", r->note);
    if (r->same) {
      printf("%s: replayed: %s (strategy %s)\n", input,
             plan_hash_format(r->replayed, a), r->strategy);
    } else {
      printf("%s: replay differs: recorded %s, replayed %s\n", input,
             plan_hash_format(r->recorded, a),
             plan_hash_format(r->replayed, b));
      print_indented(r->diff);
    }
    rc = r->same ? EXIT_OK : EXIT_NEGATIVE;
  }
  plan_replay_result_free(r);
  plan_search_info_clear(&info);
  return rc;
}
