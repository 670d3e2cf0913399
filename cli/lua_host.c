/* The tool's Lua host (lua_host.h). Setup happens inside a protected call,
 * as lua.c does, so even a memory error while opening the libraries is
 * reported rather than fatal. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lua_host.h"
#include "plan_module.h"

/* An error message for stderr: the error object is not always a string. */
static const char *message(lua_State *L) {
  const char *msg = lua_tostring(L, -1);
  return msg ? msg : "(an error object that is not a string)";
}

/* The message handler: the error with a traceback. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

typedef struct host_args {
  const char *name, *text;
  int argc;
  char *const *argv;
  int status; /* what the chunk made of it */
} host_args;

/* In protected mode: libraries, the preloaded module, `arg`, the chunk. */
static int host_main(lua_State *L) {
  host_args *h = lua_touserdata(L, 1);
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_plan);
  lua_setfield(L, -2, "plan");
  lua_pop(L, 1);
  luaL_checkstack(L, h->argc + 3, "too many arguments");
  lua_createtable(L, h->argc, 1);
  lua_pushstring(L, h->name);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < h->argc; i++) {
    lua_pushstring(L, h->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  int rc = h->text ? luaL_loadbuffer(L, h->text, strlen(h->text), h->name)
                   : luaL_loadfile(L, h->name);
  if (rc) {
    fprintf(stderr, "plan: %s\n", message(L));
    h->status = EXIT_BAD_INPUT;
    return 0;
  }
  for (int i = 0; i < h->argc; i++)
    lua_pushstring(L, h->argv[i]);
  lua_pushcfunction(L, traceback);
  int fn = lua_gettop(L) - h->argc - 1;
  lua_insert(L, fn); /* the handler below the chunk */
  if (lua_pcall(L, h->argc, 1, fn)) {
    fprintf(stderr, "plan: %s\n", message(L));
    h->status = EXIT_NEGATIVE;
    return 0;
  }
  h->status = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : EXIT_OK;
  return 0;
}

int cli_lua_run(const char *name, const char *text, int argc,
                char *const *argv) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "plan: cannot create a Lua state (out of memory)\n");
    return EXIT_BAD_INPUT;
  }
  host_args h = {name, text, argc, argv, EXIT_OK};
  lua_pushcfunction(L, host_main);
  lua_pushlightuserdata(L, &h);
  if (lua_pcall(L, 1, 0, 0)) {
    fprintf(stderr, "plan: %s\n", message(L));
    h.status = EXIT_NEGATIVE;
  }
  lua_close(L);
  return h.status;
}
