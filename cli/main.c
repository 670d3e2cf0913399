/* `plan`: the command-line tool over libplan. Dispatches verbs, prints
 * errors with positions, and maps outcomes to the shared exit codes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_verb verbs[] = {
    {"validate", "check a plan statically (rules, shapes, mesh, pipeline)",
     usage_validate, cmd_validate},
    {"fmt", "rewrite a plan in canonical layout", usage_fmt, cmd_fmt},
    {"upgrade", "rewrite a file of an older format version as the current one",
     usage_upgrade, cmd_upgrade},
    {"hash", "print content hashes (plan, program, mesh, provenance)",
     usage_hash, cmd_hash},
    {"show", "print a readable table of ops, shapes, placements, stages",
     usage_show, cmd_show},
    {"diff", "semantic differences between two plans", usage_diff, cmd_diff},
    {"cost", "modeled step time per op and collective, memory, fit", usage_cost,
     cmd_cost},
    {"lower", "write the plan's lowered program (rank-local steps)",
     usage_lower, cmd_lower},
    {"verify", "run the plan on simulated ranks and compare with the program",
     usage_verify, cmd_verify},
    {"schedule", "simulate the pipeline schedule: bubble, memory, deadlocks",
     usage_schedule, cmd_schedule},
    {"run", "run a Lua script with the plan module", usage_run, cmd_run},
    {"search", "search a plan for a program on a mesh (a Lua strategy)",
     usage_search, cmd_search},
    {"replay", "make a plan again from its provenance and compare",
     usage_replay, cmd_replay},
};

static void print_help(FILE *f) {
  fprintf(f,
          "usage: plan VERB [options] FILE...\n"
          "\n"
          "libplan %s, plan format %s. Verbs:\n",
          plan_version_string(), PLAN_FORMAT_STRING);
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
  fprintf(f, "\n"
             "Every verb takes --help. Exit codes: 0 ok, 1 negative verdict\n"
             "(findings or differences), 2 unreadable input or bad usage,\n"
             "3 cannot run here.\n"
             "\n"
             "--program-root DIR (with any verb): a program by path may lie\n"
             "anywhere under DIR, not only in the plan's own folder tree.\n");
}

int cli_fail_last(void) {
  char buf[2048];
  fprintf(stderr, "plan: %s\n", plan_error_format(buf, sizeof buf));
  return plan_error_last()->code == PLAN_EUNSUPPORTED ? EXIT_CANNOT_RUN
                                                      : EXIT_BAD_INPUT;
}

int cli_fail_in(const char *file) {
  const plan_error *e = plan_error_last();
  if (e->file[0] || !file)
    return cli_fail_last();
  /* an error of the run itself (out of memory on a huge shape): still say
   * which file it was about */
  fprintf(stderr, "plan: %s: error: %s\n", file,
          e->code == PLAN_ENOMEM
              ? "out of memory (its tensors are too large to run here; "
                "--reduce verifies a smaller program of the same structure)"
              : e->message);
  return e->code == PLAN_EUNSUPPORTED ? EXIT_CANNOT_RUN : EXIT_BAD_INPUT;
}

int cli_usage(const char *verb, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "plan %s: ", verb);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(see 'plan %s --help')\n", verb);
  return EXIT_BAD_INPUT;
}

bool cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--"))
      break;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
      return true;
  }
  return false;
}

static const char *sev_name(plan_severity s) {
  return s == PLAN_SEV_ERROR     ? "error"
         : s == PLAN_SEV_WARNING ? "warning"
                                 : "note";
}

void cli_print_diags(FILE *f, const plan_diags *d) {
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    char buf[4096];
    plan_diag_format(buf, sizeof buf, plan_diags_get(d, i));
    fprintf(f, "%s\n", buf);
  }
}

/* The flags a verb's usage text names ("--strategy", "-o"), for
 * did-you-mean; at most `max`, into names (pointing into store). */
static size_t usage_flags(const char *usage, const char **names, size_t max,
                          char *store, size_t size) {
  size_t n = 0, used = 0;
  for (const char *s = usage; *s && n < max; s++) {
    if (*s != '-' || (s > usage && s[-1] != ' ' && s[-1] != '[' &&
                      s[-1] != '|' && s[-1] != '\n'))
      continue;
    size_t l = 1;
    while (s[l] == '-' || (s[l] >= 'a' && s[l] <= 'z') ||
           (s[l] >= '0' && s[l] <= '9'))
      l++;
    if (l < 2 || used + l + 1 > size)
      continue;
    memcpy(store + used, s, l);
    store[used + l] = '\0';
    names[n++] = store + used;
    used += l + 1;
    s += l - 1;
  }
  return n;
}

int cli_unknown_option(const char *verb, const char *arg) {
  const char *usage = "";
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    if (!strcmp(verbs[i].name, verb))
      usage = verbs[i].usage;
  const char *names[64];
  char store[2048], hint[256];
  size_t n = usage_flags(usage, names, 64, store, sizeof store);
  if (plan_suggest(hint, sizeof hint, arg, names, n))
    return cli_usage(verb, "unknown option '%s'; %s", arg, hint);
  return cli_usage(verb, "unknown option '%s'", arg);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void cli_print_diags_json(FILE *f, const plan_diags *d, const char *verdict) {
  fprintf(f, "{\"schema\": \"libplan-findings/1\", \"verdict\": ");
  json_str(f, verdict);
  fprintf(f, ", \"findings\": [");
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    fprintf(f, "%s\n  {\"severity\": \"%s\", \"code\": ", i ? "," : "",
            sev_name(g->severity));
    json_str(f, g->code);
    fprintf(f, ", \"object\": ");
    json_str(f, g->object);
    fprintf(f, ", \"file\": ");
    json_str(f, g->file);
    fprintf(f, ", \"line\": %d, \"column\": %d, \"message\": ", g->line,
            g->column);
    json_str(f, g->message);
    fputc('}', f);
  }
  fprintf(f, "]}\n");
}

/* Takes --program-root DIR out of argv (before a "--"), for every verb:
 * the library reads it as PLAN_PROGRAM_ROOT, also where a verb loads
 * through the search or upgrade calls. 0, or the exit code of a usage
 * error. */
static int take_program_root(int *argc, char **argv) {
  int n = 1;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--")) {
      while (i < *argc)
        argv[n++] = argv[i++];
      break;
    }
    if (strcmp(argv[i], "--program-root")) {
      argv[n++] = argv[i];
      continue;
    }
    if (i + 1 >= *argc || !argv[i + 1][0]) {
      fprintf(stderr, "plan: --program-root needs a folder\n");
      return EXIT_BAD_INPUT;
    }
    if (setenv("PLAN_PROGRAM_ROOT", argv[++i], 1) != 0) {
      fprintf(stderr, "plan: --program-root: cannot set it\n");
      return EXIT_BAD_INPUT;
    }
  }
  argv[n] = NULL;
  *argc = n;
  return 0;
}

int main(int argc, char **argv) {
  cli_signals_init();
  int prc = take_program_root(&argc, argv);
  if (prc)
    return prc;
  if (argc < 2) {
    print_help(stderr);
    return EXIT_BAD_INPUT;
  }
  const char *v = argv[1];
  if (!strcmp(v, "-h") || !strcmp(v, "--help") || !strcmp(v, "help")) {
    if (argc > 2 && strcmp(v, "help") == 0) {
      for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        if (!strcmp(verbs[i].name, argv[2])) {
          fputs(verbs[i].usage, stdout);
          return EXIT_OK;
        }
    }
    print_help(stdout);
    return EXIT_OK;
  }
  if (!strcmp(v, "--version") || !strcmp(v, "version")) {
    printf("plan (libplan) %s, plan format %s\n", plan_version_string(),
           PLAN_FORMAT_STRING);
    return EXIT_OK;
  }
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    if (!strcmp(verbs[i].name, v)) {
      if (cli_wants_help(argc - 1, argv + 1)) {
        fputs(verbs[i].usage, stdout);
        return EXIT_OK;
      }
      return verbs[i].run(argc - 1, argv + 1);
    }
  const char *names[sizeof verbs / sizeof *verbs + 2];
  size_t n = 0;
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    names[n++] = verbs[i].name;
  names[n++] = "help";
  names[n++] = "version";
  char hint[256];
  /* a near miss gets the nearest verbs, not the whole usage */
  if (plan_suggest(hint, sizeof hint, v, names, n)) {
    fprintf(stderr, "plan: unknown command '%s'; %s\n", v, hint);
    return EXIT_BAD_INPUT;
  }
  fprintf(stderr, "plan: unknown command '%s'\n\n", v);
  print_help(stderr);
  return EXIT_BAD_INPUT;
}
