/* `plan search` and `plan replay`: thin hosts of the search driver
 * (lua/search.lua, embedded), which runs a strategy (lua/strategies/, or
 * the user's Lua file) over the plan module's primitives. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lua_host.h"
#include "util.h"
#include "lua_sources.h"

const char usage_search[] =
    "usage: plan search PROGRAM --mesh dp=2,tp=4 [--strategy NAME|FILE.lua]\n"
    "                   [--hardware NAME] [--seed N] [--width N] [--limit N] [--seconds N]\n"
    "                   [--self-contained] -o PLAN\n"
    "       plan search PLAN [options] -o PLAN   (--devices search)\n"
    "\n"
    "Searches a plan for PROGRAM on a mesh (or makes again every decision of\n"
    "PLAN but its pinned regions), with a built-in strategy (megatron,\n"
    "greedy, beam, dp, ilp, exhaustive; default greedy) or a Lua file\n"
    "(docs/lua.md),\n"
    "priced by the cost model (--hardware h100, h200, a100; default the\n"
    "plan's own or h100). Writes the plan with its provenance (strategy,\n"
    "script hash, parameters, seed, library version, modeled cost), so\n"
    "'plan replay' can make it again.\n"
    "  --width N    beam's width (default 8)\n"
    "  --limit N    dp's most states per step (default 64), exhaustive's\n"
    "               most combinations (default 100000)\n"
    "  --seconds N  ilp's solver time limit (default 60)\n"
    "  --devices search  also choose the device order (each order of the\n"
    "               mesh axes over the devices) by the modeled step time\n"
    "Exit: 0 written, 1 the strategy failed or made an invalid plan,\n"
    "2 unreadable input or bad usage.\n";

const char usage_replay[] =
    "usage: plan replay PLAN\n"
    "\n"
    "Makes PLAN again from its provenance (the strategy, its parameters and\n"
    "seed; every decision but the pinned regions' is cleared first) and\n"
    "compares the plan hashes. Prints the differences when they differ.\n"
    "Exit: 0 the same plan, 1 a different plan, 2 unreadable input or no\n"
    "search in the provenance.\n";

static const char *driver(void) {
  for (int i = 0; plan_lua_sources[i].name; i++)
    if (!strcmp(plan_lua_sources[i].name, "search"))
      return plan_lua_sources[i].text;
  return NULL;
}

#define MAX_ARGS 16

int cmd_search(int argc, char **argv) {
  static const char *const valued[] = {
      "--mesh", "--strategy", "--hardware", "--seed", "--width",
      "--limit", "-o", "--seconds", "--devices", NULL};
  static const char *const keys[] = {"mesh",  "strategy", "hardware",
                                     "seed",  "width",    "limit",
                                     "out",   "seconds",  "devices",
                                     NULL};
  char buf[MAX_ARGS][1100];
  char *args[MAX_ARGS];
  int n = 0;
  const char *input = NULL, *out = NULL;
  bool self_contained = false, mesh = false;
  for (int i = 1; i < argc; i++) {
    int k = 0;
    while (valued[k] && strcmp(argv[i], valued[k]))
      k++;
    if (valued[k]) {
      if (i + 1 >= argc)
        return cli_usage("search", "%s needs a value", argv[i]);
      if (strlen(argv[i + 1]) > 1000 || n >= MAX_ARGS - 3)
        return cli_usage("search", "%s: value too long", argv[i]);
      snprintf(buf[n], sizeof buf[n], "%s=%s", keys[k], argv[++i]);
      args[n] = buf[n];
      n++;
      out = k == 6 ? argv[i] : out;
      mesh |= k == 0;
    } else if (!strcmp(argv[i], "--self-contained")) {
      self_contained = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage("search", "unknown option '%s'", argv[i]);
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
  char *text = cli_read_file(input, &len);
  if (!text)
    return cli_fail_last();
  bool is_plan = strstr(text, "\nmesh:") || !strncmp(text, "mesh:", 5);
  free(text);
  if (!is_plan && !mesh)
    return cli_usage("search", "a program needs --mesh (e.g. dp=2,tp=4)");
  snprintf(buf[n], sizeof buf[n], "%s=%s", is_plan ? "plan" : "program",
           input);
  args[n] = buf[n];
  n++;
  if (self_contained) {
    snprintf(buf[n], sizeof buf[n], "self_contained=1");
    args[n] = buf[n];
    n++;
  }
  const char *src = driver();
  if (!src)
    return cli_usage("search", "the search driver is not built in");
  return cli_lua_run("=search.lua", src, n, args);
}

int cmd_replay(int argc, char **argv) {
  const char *input = NULL;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1])
      return cli_usage("replay", "unknown option '%s'", argv[i]);
    if (input)
      return cli_usage("replay", "one plan at a time");
    input = argv[i];
  }
  if (!input)
    return cli_usage("replay", "no plan given");
  if (strlen(input) > 1000)
    return cli_usage("replay", "path too long");
  char a[1100];
  snprintf(a, sizeof a, "plan=%s", input);
  char mode[] = "mode=replay";
  char *args[2] = {mode, a};
  const char *src = driver();
  if (!src)
    return cli_usage("replay", "the search driver is not built in");
  return cli_lua_run("=search.lua", src, 2, args);
}
