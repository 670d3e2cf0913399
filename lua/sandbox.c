/* The Lua sandbox's limits (sandbox.h): the capped allocator, the count
 * hook that watches instructions and the wall clock, pcall and xpcall that
 * rethrow a tripped limit, and the environment of a sandboxed chunk. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox.h"

/* Often enough that the instructions between two hook calls are quick
 * even when each is slow (a comparison of two long strings). */
#define HOOK_EVERY 100
/* Allocations this large (or larger) also look at the clock: a VM
 * instruction that copies a long string is slow, and allocates. */
#define CLOCK_BYTES (64u << 10)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void plan_lua_sandbox_init(plan_lua_sandbox *b, const char *what, void *user) {
  memset(b, 0, sizeof *b);
  b->what = what;
  b->user = user;
  b->seconds = PLAN_LUA_SANDBOX_SECONDS;
  const char *env = getenv(PLAN_LUA_SANDBOX_SECONDS_ENV);
  if (env && *env) {
    char *end;
    double v = strtod(env, &end);
    if (!*end && v > 0 && v < 1e9)
      b->seconds = v;
  }
}

/* Trips the limit that was reached (instructions or time), if one was. */
static void over(plan_lua_sandbox *b) {
  if (b->tripped || !b->active)
    return;
  if (b->steps > PLAN_LUA_SANDBOX_STEPS)
    snprintf(b->why, sizeof b->why, "%s ran past %lld million instructions",
             b->what, PLAN_LUA_SANDBOX_STEPS / 1000000);
  else if (now() > b->deadline)
    snprintf(b->why, sizeof b->why, "%s ran past its time limit of %g s",
             b->what, b->seconds);
  else
    return;
  b->tripped = true;
}

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  plan_lua_sandbox *b = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    b->used -= old;
    return NULL;
  }
  if (nsize > old && b->active) {
    if (b->used - old + nsize > PLAN_LUA_SANDBOX_MEMORY)
      return NULL; /* Lua raises "not enough memory" */
    if (nsize - old >= CLOCK_BYTES) {
      over(b);
      if (b->tripped)
        return NULL;
    }
  }
  void *p = realloc(ptr, nsize);
  if (p)
    b->used = b->used - old + nsize;
  return p;
}

lua_State *plan_lua_sandbox_newstate(plan_lua_sandbox *b) {
  return lua_newstate(sandbox_alloc, b);
}

plan_lua_sandbox *plan_lua_sandbox_of(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* Raises the tripped limit's message at the caller's line. */
static int raise_tripped(lua_State *L) {
  luaL_where(L, 1);
  lua_pushstring(L, plan_lua_sandbox_of(L)->why);
  lua_concat(L, 2);
  return lua_error(L);
}

void plan_lua_sandbox_check(lua_State *L) {
  if (plan_lua_sandbox_of(L)->tripped)
    raise_tripped(L);
}

void plan_lua_sandbox_charge(lua_State *L, long long steps, size_t bytes) {
  plan_lua_sandbox *b = plan_lua_sandbox_of(L);
  if (steps > PLAN_LUA_SANDBOX_STEPS || steps < 0)
    steps = PLAN_LUA_SANDBOX_STEPS + 1;
  b->steps += steps;
  over(b);
  if (b->tripped)
    raise_tripped(L);
  if (bytes > PLAN_LUA_SANDBOX_MEMORY - b->used)
    luaL_error(L, "%s ran past its memory limit of %d MiB", b->what,
               (int)(PLAN_LUA_SANDBOX_MEMORY >> 20));
  b->used += bytes;
}

/* The hook: every HOOK_EVERY instructions; once tripped, it raises on
 * every call, wherever the code is. */
static void count_hook(lua_State *L, lua_Debug *ar) {
  plan_lua_sandbox *b = plan_lua_sandbox_of(L);
  b->steps += HOOK_EVERY;
  over(b);
  if (!b->tripped)
    return;
  lua_getinfo(L, "Sl", ar); /* level 0: the running function */
  if (ar->currentline > 0)
    lua_pushfstring(L, "%s:%d: %s", ar->short_src, ar->currentline, b->why);
  else
    lua_pushstring(L, b->why);
  lua_error(L);
}

/* pcall and xpcall: as Lua's, but an error once the sandbox has tripped
 * goes on up, so a limit cannot be caught and the loop go on. */
static int finish_pcall(lua_State *L, int status, int base) {
  if (status != LUA_OK) {
    if (plan_lua_sandbox_of(L)->tripped)
      return lua_error(L); /* the error object, rethrown */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, base);
  return lua_gettop(L) - base + 1;
}

static int sandbox_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  plan_lua_sandbox_check(L);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  return finish_pcall(L, status, 1);
}

static int sandbox_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  plan_lua_sandbox_check(L);
  lua_pushvalue(L, 1); /* the function */
  lua_copy(L, 2, 1);   /* the handler below it */
  lua_replace(L, 2);
  int status = lua_pcall(L, n - 2, LUA_MULTRET, 1);
  return finish_pcall(L, status, 2);
}

/* setmetatable without finalizers: Lua runs a __gc metamethod with the
 * hooks off, where no limit could stop it. (An object is finalized only
 * when its metatable has __gc as it is set, so a __gc added later is
 * never called.) */
static int sandbox_setmetatable(lua_State *L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: no __gc metamethods in the sandbox");
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

void plan_lua_sandbox_start(lua_State *L) {
  plan_lua_sandbox *b = plan_lua_sandbox_of(L);
  plan_lua_sandbox_guard(L);
  lua_pushglobaltable(L);
  lua_pushcfunction(L, sandbox_pcall);
  lua_setfield(L, -2, "pcall");
  lua_pushcfunction(L, sandbox_xpcall);
  lua_setfield(L, -2, "xpcall");
  lua_getfield(L, -1, "setmetatable");
  lua_pushcclosure(L, sandbox_setmetatable, 1);
  lua_setfield(L, -2, "setmetatable");
  lua_pop(L, 1);
  /* the string library stays the state's own: no getmetatable("") */
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  b->deadline = now() + b->seconds;
  b->active = true;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
}

int plan_lua_sandbox_start_lua(lua_State *L) {
  plan_lua_sandbox_start(L);
  return 0;
}

/* A copy of the loaded library `name` into the table on the top, as the
 * same name; without `drop` (when not NULL). */
static void copy_library(lua_State *L, const char *name, const char *drop) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_newtable(L);
  if (lua_istable(L, -2)) {
    lua_pushnil(L);
    while (lua_next(L, -3)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, -4);
    }
  }
  if (drop) {
    lua_pushnil(L);
    lua_setfield(L, -2, drop);
  }
  lua_remove(L, -2);
  lua_setfield(L, -2, name);
}

void plan_lua_sandbox_env(lua_State *L) {
  static const char *const base[] = {
      "assert", "error",  "getmetatable", "ipairs",   "next",
      "pairs",  "pcall",  "rawequal",     "rawget",   "rawlen",
      "rawset", "select", "setmetatable", "tonumber", "tostring",
      "type",   "xpcall", "_VERSION",     NULL};
  lua_newtable(L);
  for (int i = 0; base[i]; i++) {
    lua_getglobal(L, base[i]);
    lua_setfield(L, -2, base[i]);
  }
  copy_library(L, LUA_STRLIBNAME, "dump");
  copy_library(L, LUA_TABLIBNAME, NULL);
  copy_library(L, LUA_MATHLIBNAME, NULL);
  copy_library(L, LUA_UTF8LIBNAME, NULL);
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "_G");
}

int plan_lua_sandbox_load(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = luaL_checkstring(L, 2);
  if (luaL_loadbufferx(L, text, len, name, "t") != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  plan_lua_sandbox_env(L);
  lua_setupvalue(L, -2, 1); /* the chunk's _ENV */
  return 1;
}
