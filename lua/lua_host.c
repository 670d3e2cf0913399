/* libplan's Lua host (lua_host.h). Setup happens inside the protected
 * call, as lua.c does, so even a memory error while opening the libraries
 * is reported rather than fatal. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "lua_host.h"
#include "plan_module.h"

void plan_lua_host_open(lua_State *L, bool with_debug) {
  static const luaL_Reg libs[] = {
      {LUA_GNAME, luaopen_base},          {LUA_LOADLIBNAME, luaopen_package},
      {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
      {LUA_IOLIBNAME, luaopen_io},        {LUA_OSLIBNAME, luaopen_os},
      {LUA_STRLIBNAME, luaopen_string},   {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8},    {NULL, NULL}};
  for (const luaL_Reg *lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  if (with_debug) {
    luaL_requiref(L, LUA_DBLIBNAME, luaopen_debug, 1);
    lua_pop(L, 1);
  }
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_plan);
  lua_setfield(L, -2, "plan");
  lua_pop(L, 1);
}

/* The message of a refusal, an error object {unsupported = "why"} (a
 * strategy's "cannot run here", util.refuse), or NULL. */
static const char *refusal(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE)
    return NULL;
  lua_getfield(L, idx, "unsupported");
  const char *why = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  lua_pop(L, 1); /* the table keeps the string */
  return why;
}

bool plan_lua_host_refused(lua_State *L) {
  return refusal(L, -1) != NULL;
}

int plan_lua_host_traceback(lua_State *L) {
  if (refusal(L, 1))
    return 1; /* as it is: a refusal, not a bug, has no traceback */
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg =
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int plan_lua_host_pcall(lua_State *L, int nargs, int nresults) {
  int fn = lua_gettop(L) - nargs; /* the function's slot */
  lua_pushcfunction(L, plan_lua_host_traceback);
  lua_insert(L, fn); /* the handler below the function */
  int rc = lua_pcall(L, nargs, nresults, fn);
  lua_remove(L, fn);
  return rc;
}

const char *plan_lua_host_message(lua_State *L) {
  const char *why = refusal(L, -1);
  if (why)
    return why;
  const char *msg = lua_tostring(L, -1);
  return msg ? msg : "(an error object that is not a string)";
}

int plan_lua_host_run(lua_CFunction body, void *ud, char *msg, size_t msgsize) {
  return plan_lua_host_run_in(luaL_newstate(), body, ud, msg, msgsize);
}

int plan_lua_host_run_in(lua_State *L, lua_CFunction body, void *ud, char *msg,
                         size_t msgsize) {
  if (!L) {
    if (msg && msgsize)
      snprintf(msg, msgsize, "cannot create a Lua state (out of memory)");
    return PLAN_LUA_HOST_NOSTATE;
  }
  lua_pushcfunction(L, body);
  lua_pushlightuserdata(L, ud);
  int rc = lua_pcall(L, 1, 0, 0);
  if (rc != LUA_OK && msg && msgsize)
    snprintf(msg, msgsize, "%s", plan_lua_host_message(L));
  lua_close(L);
  return rc;
}
