/* alloc_limit: a Lua C module for the Lua tests (built by tests/lua/run.sh,
 * never part of the plan module). It runs a function with the state's
 * allocator refusing memory from a chosen allocation on, so a test can
 * raise a memory error at every allocation point of a module function in
 * turn; in the sanitizer build the leak checker then finds any C memory
 * that a raise loses.
 *
 *   alloc_limit.run(n, f, ...) --> refused, ok, results or error...
 *
 * calls f(...) in protected mode with every new or growing block from the
 * n-th on refused (n >= 1; shrinking and freeing always work, as Lua
 * needs); `refused` says whether any block was, `ok` and the rest are
 * what pcall returns. The allocator is restored before anything else
 * runs. */
#include <lauxlib.h>
#include <lua.h>

typedef struct limit {
  lua_Alloc f; /* the allocator wrapped */
  void *ud;
  lua_Integer left; /* growths still allowed, plus one */
  int refused;
} limit;

static void *limited(void *ud, void *ptr, size_t osize, size_t nsize) {
  limit *l = ud;
  size_t old = ptr ? osize : 0;
  if (nsize > old) {
    if (l->left <= 1) { /* refused, and so is every later one */
      l->refused = 1;
      return NULL;
    }
    l->left--;
  }
  return l->f(l->ud, ptr, osize, nsize);
}

static int l_run(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  luaL_argcheck(L, n >= 1, 1, "the first refused allocation counts from 1");
  int nargs = lua_gettop(L) - 2;
  limit lim = {NULL, NULL, n, 0};
  lim.f = lua_getallocf(L, &lim.ud);
  lua_setallocf(L, limited, &lim);
  int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
  lua_setallocf(L, lim.f, lim.ud);
  luaL_checkstack(L, 2, "alloc_limit.run: results");
  lua_pushboolean(L, lim.refused);
  lua_replace(L, 1);
  lua_pushboolean(L, status == LUA_OK);
  lua_insert(L, 2);
  return lua_gettop(L);
}

int luaopen_alloc_limit(lua_State *L);

int luaopen_alloc_limit(lua_State *L) {
  static const luaL_Reg fns[] = {{"run", l_run}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
