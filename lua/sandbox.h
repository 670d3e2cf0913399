/* The Lua sandbox's limits (sandbox.c) and guarded library functions
 * (sandbox_guard.c): what a manual region's body (region_trace.c) and a
 * replay's embedded strategy script (search_api.c) run under.
 *
 * A sandboxed state is made with the sandbox's allocator, which caps the
 * bytes it holds; plan_lua_sandbox_start sets a count hook that counts VM
 * instructions and watches the wall clock, replaces pcall and xpcall with
 * versions that cannot swallow a limit, and replaces the library functions
 * whose C loops the hook cannot see (string.rep, the pattern functions,
 * table.move, insert, remove, concat, sort, utf8.len, offset) with guarded
 * ones that charge their work and refuse what would run past a limit, and
 * setmetatable with one that refuses __gc (finalizers run unhooked). Once the
 * instruction or time limit trips it stays tripped: every later hook call,
 * guarded call and pcall raises again, so nothing catches it and goes on. */
#ifndef LIBPLAN_LUA_SANDBOX_H
#define LIBPLAN_LUA_SANDBOX_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#define PLAN_LUA_SANDBOX_MEMORY (256u << 20) /* bytes a state may hold */
#define PLAN_LUA_SANDBOX_STEPS 100000000LL   /* VM instructions */
#define PLAN_LUA_SANDBOX_SECONDS 10.0        /* wall clock, by default */
#define PLAN_LUA_SANDBOX_SECONDS_ENV "LIBPLAN_SANDBOX_SECONDS"

typedef struct plan_lua_sandbox {
  const char *what; /* "the body", "the script": the messages' subject */
  void *user;       /* the caller's (region_trace.c: the plan_trace) */
  size_t used;      /* bytes the state holds plus what its calls made */
  long long steps;  /* instructions run, plus guarded calls' work */
  double seconds;   /* the wall-clock limit */
  double deadline;  /* monotonic seconds at which it trips */
  bool active;      /* started: the limits hold (before, only counting) */
  bool tripped;     /* the instruction or time limit was reached */
  char why[160];    /* once tripped: the limit's message */
} plan_lua_sandbox;

/* Sets b up, not yet started: limits as above. The time limit is
 * $LIBPLAN_SANDBOX_SECONDS when that is a number above 0, else 10 s. */
void plan_lua_sandbox_init(plan_lua_sandbox *b, const char *what, void *user);

/* A new state whose allocator is b's (NULL when memory is gone). */
lua_State *plan_lua_sandbox_newstate(plan_lua_sandbox *b);

/* The sandbox of a state made by plan_lua_sandbox_newstate. */
plan_lua_sandbox *plan_lua_sandbox_of(lua_State *L);

/* Starts the limits on L (its libraries open; the clock starts now): the
 * count hook, pcall, xpcall and setmetatable in the global table, the guarded
 * library functions in the loaded string, table and utf8 libraries, and the
 * string metatable hidden from getmetatable. Raises on a memory error. */
void plan_lua_sandbox_start(lua_State *L);

/* plan_lua_sandbox_start as a Lua C function (no arguments). */
int plan_lua_sandbox_start_lua(lua_State *L);

/* Pushes a fresh environment for a sandboxed chunk in a state that has
 * more: the base library's safe functions (no dofile, loadfile, load,
 * require, print, collectgarbage) and copies of string (without dump),
 * table, math and utf8; no io, os, debug, package or coroutine. */
void plan_lua_sandbox_env(lua_State *L);

/* load(text, chunkname) for a sandboxed chunk, as a Lua C function: the
 * chunk (text only) with a fresh plan_lua_sandbox_env as its _ENV; or nil
 * and the message. */
int plan_lua_sandbox_load(lua_State *L);

/* Charges work that a C function does without VM instructions: `steps`
 * more instructions and `bytes` more memory (held until the state ends).
 * Raises at the limit; a tripped sandbox raises on every call. */
void plan_lua_sandbox_charge(lua_State *L, long long steps, size_t bytes);

/* Raises the limit's error when the sandbox has tripped; else returns. */
void plan_lua_sandbox_check(lua_State *L);

/* Installs the guarded string and table functions (sandbox_guard.c) in
 * the loaded libraries of L. */
void plan_lua_sandbox_guard(lua_State *L);

#endif
