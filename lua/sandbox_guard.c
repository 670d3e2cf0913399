/* The sandbox's guarded library functions (sandbox.h): the string and
 * table functions whose loops run in C, where the count hook cannot see
 * them. Each charges its work to the sandbox (plan_lua_sandbox_charge,
 * which also looks at the clock) before it starts, and refuses what would
 * run past a limit:
 * - string.rep: a result over the memory left is refused before it is
 *   made; an empty result is made at once (rep("", 2^62) loops no more);
 * - string.find, match, gmatch, gsub: a pattern whose worst case on the
 *   subject (the start positions times the subject's length for each
 *   repetition item, %b and back reference, times the pattern's length)
 *   is over PATTERN_LIMIT is refused; then the stock function runs;
 * - table.move, insert, remove: written here, the elements they move
 *   charged first; table.concat and table.sort: the elements they join or
 *   sort charged first, then the stock function;
 * - utf8.len and utf8.offset: the subject's length charged first. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdbool.h>
#include <string.h>

#include "sandbox.h"

/* The most elementary steps a pattern call may take at worst. */
#define PATTERN_LIMIT 1.5e8

/* The elements between i and j as a charge (0 when none). */
static long long span(lua_Integer i, lua_Integer j) {
  if (j < i)
    return 0;
  lua_Unsigned n = (lua_Unsigned)j - (lua_Unsigned)i;
  return n >= (lua_Unsigned)PLAN_LUA_SANDBOX_STEPS ? PLAN_LUA_SANDBOX_STEPS + 1
                                                   : (long long)n + 1;
}

/* ---- string.rep ---------------------------------------------------------- */

static int guarded_rep(lua_State *L) {
  size_t l, lsep;
  const char *s = luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char *sep = luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || l + lsep == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  plan_lua_sandbox *b = plan_lua_sandbox_of(L);
  size_t room = PLAN_LUA_SANDBOX_MEMORY - b->used;
  if ((lua_Unsigned)n > room / (l + lsep) + 1 ||
      (lua_Unsigned)n * l + ((lua_Unsigned)n - 1) * lsep > room)
    return luaL_error(L,
                      "string.rep: a result of more than %d MiB is over "
                      "%s's memory limit",
                      (int)(room >> 20), b->what);
  size_t total = (size_t)n * l + ((size_t)n - 1) * lsep;
  plan_lua_sandbox_charge(L, (long long)(total / 16), 0);
  luaL_Buffer buf;
  char *p = luaL_buffinitsize(L, &buf, total);
  for (lua_Integer k = 0; k < n; k++) {
    memcpy(p, s, l);
    p += l;
    if (lsep && k + 1 < n) {
      memcpy(p, sep, lsep);
      p += lsep;
    }
  }
  luaL_pushresultsize(&buf, total);
  return 1;
}

/* ---- the pattern functions ----------------------------------------------- */

/* The end of the set that starts at p[i] ('['), as Lua's matcher reads
 * it: the first character (after a '^') is in the set even if it is ']'. */
static size_t set_end(const char *p, size_t m, size_t i) {
  size_t j = i + 1;
  if (j < m && p[j] == '^')
    j++;
  do {
    if (j >= m)
      return m;
    if (p[j++] == '%' && j < m)
      j++;
  } while (j < m && p[j] != ']');
  return j < m ? j + 1 : m;
}

/* The worst case of matching pattern p (length m) on a subject of n
 * bytes: every start position, and for each item that can match a run
 * (a repeated class, %b, a back reference) every length of the run. */
static double pattern_cost(const char *p, size_t m, size_t n, bool anchors) {
  double nn = (double)n + 1, cost = (double)m + 1;
  size_t i = 0;
  if (anchors && m && p[0] == '^')
    i = 1;
  else
    cost *= nn;
  while (i < m && cost < 1e300) {
    char c = p[i];
    if (c == '(' || c == ')') {
      i++;
      continue;
    }
    if (c == '%' && i + 1 < m) {
      char d = p[i + 1];
      if (d == 'b' || (d >= '0' && d <= '9')) {
        cost *= nn;
        i += d == 'b' ? 4 : 2;
        continue;
      }
      if (d == 'f') {
        i += 2;
        if (i < m && p[i] == '[')
          i = set_end(p, m, i);
        continue;
      }
      i += 2;
    } else {
      i = c == '[' ? set_end(p, m, i) : i + 1;
    }
    if (i < m && (p[i] == '*' || p[i] == '+' || p[i] == '-')) {
      cost *= nn;
      i++;
    } else if (i < m && p[i] == '?') {
      cost *= 2;
      i++;
    }
  }
  return cost;
}

/* Checks the call's pattern (argument 2) against its subject (argument
 * 1), charges the scan, and calls the stock function (upvalue 1) with the
 * same arguments. `plain`: the pattern is plain text (find's 4th). */
static int guarded_match(lua_State *L, const char *name, bool anchors,
                         bool plain) {
  size_t n, m;
  luaL_checklstring(L, 1, &n);
  const char *p = luaL_checklstring(L, 2, &m);
  double cost = plain ? ((double)n + 1) * ((double)m + 1)
                      : pattern_cost(p, m, n, anchors);
  if (cost > PATTERN_LIMIT)
    return luaL_error(L,
                      "string.%s: the pattern may take too long on a subject "
                      "of %d bytes (over %s's pattern limit)",
                      name, (int)(n < 2147483647 ? n : 2147483647),
                      plan_lua_sandbox_of(L)->what);
  plan_lua_sandbox_charge(L, (long long)((n + m) / 4), 0);
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, LUA_MULTRET);
  return lua_gettop(L);
}

static int guarded_find(lua_State *L) {
  return guarded_match(L, "find", true, lua_toboolean(L, 4));
}

static int guarded_smatch(lua_State *L) {
  return guarded_match(L, "match", true, false);
}

static int guarded_gmatch(lua_State *L) {
  return guarded_match(L, "gmatch", false, false);
}

static int guarded_gsub(lua_State *L) {
  return guarded_match(L, "gsub", true, false);
}

/* ---- the table functions ------------------------------------------------- */

/* Argument `arg` is a table, or has a metatable (that may make it one). */
static void check_table(lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TTABLE)
    return;
  if (!lua_getmetatable(L, arg))
    luaL_typeerror(L, arg, "table");
  lua_pop(L, 1);
}

static int guarded_move(lua_State *L) {
  check_table(L, 1);
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int tt = !lua_isnoneornil(L, 5) ? 5 : 1; /* the destination table */
  check_table(L, tt);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3,
                  "too many elements to move");
    lua_Integer n = e - f;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n, 4, "destination wrap around");
    plan_lua_sandbox_charge(L, span(f, e), 0);
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
      for (lua_Integer i = 0; i <= n; i++) {
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    } else {
      for (lua_Integer i = n; i >= 0; i--) {
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    }
  }
  lua_pushvalue(L, tt);
  return 1;
}

static int guarded_insert(lua_State *L) {
  check_table(L, 1);
  lua_Integer e = luaL_len(L, 1) + 1; /* the first empty slot */
  lua_Integer pos;
  switch (lua_gettop(L)) {
  case 2:
    pos = e;
    break;
  case 3:
    pos = luaL_checkinteger(L, 2);
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2,
                  "position out of bounds");
    plan_lua_sandbox_charge(L, span(pos, e), 0);
    for (lua_Integer i = e; i > pos; i--) {
      lua_geti(L, 1, i - 1);
      lua_seti(L, 1, i);
    }
    break;
  default:
    return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

static int guarded_remove(lua_State *L) {
  check_table(L, 1);
  lua_Integer size = luaL_len(L, 1);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size)
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2,
                  "position out of bounds");
  plan_lua_sandbox_charge(L, span(pos, size), 0);
  lua_geti(L, 1, pos);
  for (; pos < size; pos++) {
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}

/* table.concat: the range made explicit (so the length is asked once),
 * charged, then the stock function (upvalue 1). */
static int guarded_concat(lua_State *L) {
  lua_Integer i = luaL_optinteger(L, 3, 1);
  lua_Integer j =
      lua_isnoneornil(L, 4) ? luaL_len(L, 1) : luaL_checkinteger(L, 4);
  plan_lua_sandbox_charge(L, span(i, j), 0);
  lua_settop(L, 2);
  lua_pushinteger(L, i);
  lua_pushinteger(L, j);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 4, 1);
  return 1;
}

/* table.sort: n log n charged for the elements the table holds (a
 * length from __len without elements fails at the first comparison, or
 * calls Lua, which the hook counts), then the stock function. */
static int guarded_sort(lua_State *L) {
  long long n = lua_type(L, 1) == LUA_TTABLE ? (long long)lua_rawlen(L, 1) : 0;
  long long log = 1;
  while ((1LL << log) < n && log < 62)
    log++;
  plan_lua_sandbox_charge(L, n > PLAN_LUA_SANDBOX_STEPS ? n : n * log / 4, 0);
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, 0);
  return 0;
}

/* utf8.len, utf8.offset: a scan of the subject (argument 1), charged. */
static int guarded_scan(lua_State *L) {
  size_t n;
  luaL_checklstring(L, 1, &n);
  plan_lua_sandbox_charge(L, (long long)(n / 4), 0);
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, LUA_MULTRET);
  return lua_gettop(L);
}

/* ---- installing them ----------------------------------------------------- */

/* lib[name] = fn, with the stock lib[name] as its upvalue; lib on top. */
static void guard(lua_State *L, const char *name, lua_CFunction fn) {
  lua_getfield(L, -1, name);
  lua_pushcclosure(L, fn, 1);
  lua_setfield(L, -2, name);
}

/* Every library function the sandbox replaces with its guarded form. */
static const struct {
  const char *lib, *name;
  lua_CFunction fn;
} guarded[] = {
    {LUA_STRLIBNAME, "rep", guarded_rep},
    {LUA_STRLIBNAME, "find", guarded_find},
    {LUA_STRLIBNAME, "match", guarded_smatch},
    {LUA_STRLIBNAME, "gmatch", guarded_gmatch},
    {LUA_STRLIBNAME, "gsub", guarded_gsub},
    {LUA_TABLIBNAME, "move", guarded_move},
    {LUA_TABLIBNAME, "insert", guarded_insert},
    {LUA_TABLIBNAME, "remove", guarded_remove},
    {LUA_TABLIBNAME, "concat", guarded_concat},
    {LUA_TABLIBNAME, "sort", guarded_sort},
    {LUA_UTF8LIBNAME, "len", guarded_scan},
    {LUA_UTF8LIBNAME, "offset", guarded_scan},
};

void plan_lua_sandbox_guard(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++) {
    lua_getfield(L, -1, guarded[i].lib);
    if (lua_istable(L, -1))
      guard(L, guarded[i].name, guarded[i].fn);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}
