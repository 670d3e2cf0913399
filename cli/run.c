/* `plan run SCRIPT.lua [ARGS...]`: runs a Lua script with the `plan`
 * module (`local plan = require "plan"`), in libplan's Lua host
 * (lua/lua_host.h); with -i, then an interactive session on standard
 * input (lua/repl.lua), as `lua -i`. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "line_edit.h"
#include "lua_host.h"
#include "lua_sources.h"
#include "util.h"

const char usage_run[] =
    "usage: plan run [-i] SCRIPT.lua [--] [ARGS...]\n"
    "       plan run -i\n"
    "\n"
    "Runs a Lua 5.4 script with the standard libraries and the 'plan' module\n"
    "(local plan = require \"plan\"; see docs/lua.md). The script sees its\n"
    "arguments in 'arg' and as '...' (a '--' after the script is skipped).\n"
    "An error raised by the script prints its message with a traceback.\n"
    "  -i   then read Lua from standard input, a line at a time, as lua -i\n"
    "       does: 'plan' is a global, each expression's values are printed\n"
    "       (a plan as its table of ops and strategies), the last in '_'.\n"
    "Exit: 0 when the script ends, the integer it returns when it returns\n"
    "one, 1 when it raises an error, 2 when it cannot be read or compiled.\n";

typedef struct run_args {
  const char *script; /* NULL: none (plan run -i) */
  bool interactive;
  int argc;
  char *const *argv;
  int status; /* what the script made of it */
} run_args;

/* Loads the script as luaL_loadfile would (a first line starting with '#'
 * skipped, line numbers kept), but read as every file of the tool is: a
 * regular file only, so a FIFO fails at once instead of waiting. */
static int load_script(lua_State *L, const char *path) {
  size_t len;
  char *text = cli_read_file(path, &len, 0);
  if (!text) {
    char buf[1400];
    lua_pushstring(L, plan_error_format(buf, sizeof buf));
    return LUA_ERRFILE;
  }
  const char *s = text;
  if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) { /* a UTF-8 BOM */
    s += 3;
    len -= 3;
  }
  if (len > 0 && s[0] == '#') { /* a shebang line: kept as an empty line */
    while (len > 0 && s[0] != '\n') {
      s++;
      len--;
    }
  }
  lua_pushfstring(L, "@%s", path);
  int rc = luaL_loadbufferx(L, s, len, lua_tostring(L, -1), NULL);
  lua_remove(L, -2); /* the chunk name */
  free(text);
  return rc;
}

/* The interactive session (lua/repl.lua) over standard input and output;
 * an error of the session itself is exit 1. */
static int run_repl(lua_State *L, run_args *r) {
  const char *src = NULL;
  for (int i = 0; plan_lua_sources[i].name; i++)
    if (!strcmp(plan_lua_sources[i].name, "repl"))
      src = plan_lua_sources[i].text;
  if (!src || luaL_loadbufferx(L, src, strlen(src), "=repl.lua", "t") ||
      plan_lua_host_pcall(L, 0, 1)) {
    fprintf(stderr, "plan: %s\n",
            src ? plan_lua_host_message(L) : "the session is not built in");
    r->status = EXIT_NEGATIVE;
    return 0;
  }
  lua_getglobal(L, "io");
  lua_getfield(L, -1, "stdin");
  lua_getfield(L, -2, "stdout");
  lua_remove(L, -3);
  int nargs = 2 + plan_cli_push_line_editor(L);
  if (plan_lua_host_pcall(L, nargs, 0)) {
    fprintf(stderr, "plan: %s\n", plan_lua_host_message(L));
    r->status = EXIT_NEGATIVE;
  }
  return 0;
}

/* In protected mode: libraries, the preloaded module, `arg`, the script;
 * with -i, the session after it. */
static int run_main(lua_State *L) {
  run_args *r = lua_touserdata(L, 1);
  plan_lua_host_open(L, true);
  if (!r->script)
    return run_repl(L, r);
  luaL_checkstack(L, r->argc + 3, "too many arguments");
  lua_createtable(L, r->argc, 1);
  lua_pushstring(L, r->script);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < r->argc; i++) {
    lua_pushstring(L, r->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  if (load_script(L, r->script)) {
    fprintf(stderr, "plan: %s\n", plan_lua_host_message(L));
    r->status = EXIT_BAD_INPUT;
    return 0;
  }
  for (int i = 0; i < r->argc; i++)
    lua_pushstring(L, r->argv[i]);
  if (plan_lua_host_pcall(L, r->argc, 1)) {
    fprintf(stderr, "plan: %s\n", plan_lua_host_message(L));
    r->status = EXIT_NEGATIVE;
    return 0;
  }
  r->status = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : EXIT_OK;
  lua_pop(L, 1);
  return r->interactive ? run_repl(L, r) : 0;
}

int cmd_run(int argc, char **argv) {
  int first = 1;
  bool interactive = false;
  if (first < argc && !strcmp(argv[first], "-i")) {
    interactive = true;
    first++;
  }
  if (first < argc && !strcmp(argv[first], "--"))
    first++;
  if (first >= argc && !interactive)
    return cli_usage("run", "no script given");
  const char *script = first < argc ? argv[first] : NULL;
  int rest = script ? first + 1 : argc;
  if (rest < argc && !strcmp(argv[rest], "--")) /* plan run FILE -- ARGS */
    rest++;
  run_args r = {script, interactive, argc - rest, argv + rest, EXIT_OK};
  char msg[1024];
  int rc = plan_lua_host_run(run_main, &r, msg, sizeof msg);
  if (rc == PLAN_LUA_HOST_NOSTATE) {
    fprintf(stderr, "plan: %s\n", msg);
    return EXIT_BAD_INPUT;
  }
  if (rc != LUA_OK) {
    fprintf(stderr, "plan: %s\n", msg);
    return EXIT_NEGATIVE;
  }
  return r.status;
}
