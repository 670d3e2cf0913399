/* `plan run SCRIPT.lua [ARGS...]`: runs a Lua script with the `plan`
 * module (`local plan = require "plan"`), in libplan's Lua host
 * (lua/lua_host.h). */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lua_host.h"
#include "util.h"

const char usage_run[] =
    "usage: plan run SCRIPT.lua [ARGS...]\n"
    "\n"
    "Runs a Lua 5.4 script with the standard libraries and the 'plan' module\n"
    "(local plan = require \"plan\"; see docs/lua.md). The script sees its\n"
    "arguments in 'arg' and as '...'. An error raised by the script prints\n"
    "its message with a traceback.\n"
    "Exit: 0 when the script ends, the integer it returns when it returns\n"
    "one, 1 when it raises an error, 2 when it cannot be read or compiled.\n";

typedef struct run_args {
  const char *script;
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

/* In protected mode: libraries, the preloaded module, `arg`, the script. */
static int run_main(lua_State *L) {
  run_args *r = lua_touserdata(L, 1);
  plan_lua_host_open(L, true);
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
  return 0;
}

int cmd_run(int argc, char **argv) {
  int first = 1;
  if (first < argc && !strcmp(argv[first], "--"))
    first++;
  if (first >= argc)
    return cli_usage("run", "no script given");
  run_args r = {argv[first], argc - first - 1, argv + first + 1, EXIT_OK};
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
