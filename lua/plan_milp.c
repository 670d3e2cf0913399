/* plan.milp: a 0/1 (or bounded integer) linear program solved by CBC,
 * through its C interface (Debian's coinor-libcbc-dev), for the exact
 * `ilp` strategy (lua/strategies/ilp.lua), as AutoParallel solves its
 * sharding ILP with CBC. Part of the Lua frontend only: the core library
 * never depends on a solver.
 *
 *   plan.milp{
 *     obj  = {c1, ..., cn},           -- minimised; n columns
 *     lower = {...}, upper = {...},   -- optional, default 0 and 1
 *     integer = {true, false, ...},   -- optional, default all integer
 *     rows = {{cols = {j...}, coefs = {a...}, sense = "=" | "<=" | ">=",
 *              rhs = b}, ...},        -- 1-based column indices
 *     seconds = limit,                -- optional
 *     start = {[j] = v, ...},         -- optional: a feasible assignment
 *                                     -- of (some) integer columns, the
 *                                     -- solver's first incumbent
 *   } --> {x = {...}, objective = v, optimal = bool} | nil, message
 *
 * The model lives in a box with __gc, so an error raised while the tables
 * are read frees it; scratch arrays are Lua userdata. */
#include <Cbc_C_Interface.h>
#include <float.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <math.h>
#include <string.h>

#include "plan_milp.h"

#define MODEL_MT "libplan.cbc"

typedef struct cbc_box {
  Cbc_Model *m;
} cbc_box;

static int box_gc(lua_State *L) {
  cbc_box *b = luaL_checkudata(L, 1, MODEL_MT);
  if (b->m)
    Cbc_deleteModel(b->m);
  b->m = NULL;
  return 0;
}

/* n entries of size bytes in a userdata left on the stack (zeroed). */
static void *scratch(lua_State *L, size_t n, size_t size) {
  void *p = lua_newuserdatauv(L, n * size + 1, 0);
  memset(p, 0, n * size + 1);
  return p;
}

/* t[i] as a number, or dflt when t is not a table or t[i] is nil. */
static double field_num(lua_State *L, int t, int i, double dflt) {
  if (lua_type(L, t) != LUA_TTABLE)
    return dflt;
  lua_rawgeti(L, t, i);
  double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int l_milp(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkstack(L, 40, "milp"); /* the scratch arrays and a row's fields */
  if (lua_getfield(L, 1, "obj") != LUA_TTABLE)
    return luaL_error(L, "milp: 'obj' must be a list of numbers");
  int obj = lua_gettop(L);
  lua_Integer n = luaL_len(L, obj);
  if (n < 1 || n > 10000000)
    return luaL_error(L, "milp: %d columns", (int)n);
  lua_getfield(L, 1, "lower");
  int lo = lua_gettop(L);
  lua_getfield(L, 1, "upper");
  int hi = lua_gettop(L);
  lua_getfield(L, 1, "integer");
  int integ = lua_gettop(L);

  /* The columns' and rows' figures in scratch userdata (freed by the
   * collector if an error is raised), then the whole matrix loaded at
   * once, by columns: adding rows one by one made CBC grow its matrix
   * again for each, most of a large program's time. */
  double *cobj = scratch(L, (size_t)n, sizeof(double));
  double *clo = scratch(L, (size_t)n, sizeof(double));
  double *chi = scratch(L, (size_t)n, sizeof(double));
  char *cint = scratch(L, (size_t)n, 1);
  for (lua_Integer j = 1; j <= n; j++) {
    double c = field_num(L, obj, (int)j, 0);
    double l = field_num(L, lo, (int)j, 0), u = field_num(L, hi, (int)j, 1);
    int is_int = 1;
    if (lua_type(L, integ) == LUA_TTABLE) {
      lua_rawgeti(L, integ, (int)j);
      is_int = lua_isnil(L, -1) || lua_toboolean(L, -1);
      lua_pop(L, 1);
    }
    if (!isfinite(c) || !(l <= u))
      return luaL_error(L, "milp: column %d: bad objective or bounds", (int)j);
    cobj[j - 1] = c;
    clo[j - 1] = l;
    chi[j - 1] = u;
    cint[j - 1] = (char)is_int;
  }
  lua_Integer nr = 0;
  size_t nz_all = 0;
  int rows = 0;
  if (lua_getfield(L, 1, "rows") == LUA_TTABLE) {
    rows = lua_gettop(L);
    nr = luaL_len(L, rows);
    if (nr > INT_MAX - 1)
      return luaL_error(L, "milp: %d rows", (int)nr);
    for (lua_Integer r = 1; r <= nr; r++) { /* the nonzeros, to size */
      lua_rawgeti(L, rows, (int)r);
      luaL_checktype(L, -1, LUA_TTABLE);
      lua_getfield(L, -1, "cols");
      luaL_checktype(L, -1, LUA_TTABLE);
      nz_all += (size_t)luaL_len(L, -1);
      lua_pop(L, 2);
    }
  }
  if (nz_all > (size_t)INT_MAX - 1)
    return luaL_error(L, "milp: %d million nonzeros", (int)(nz_all / 1000000));
  /* the rows as read: row r's entries at rstart[r] .. rstart[r + 1] */
  int *rstart = scratch(L, (size_t)nr + 1, sizeof(int));
  int *rcol = scratch(L, nz_all, sizeof(int));
  double *rval = scratch(L, nz_all, sizeof(double));
  double *rlo = scratch(L, (size_t)nr, sizeof(double));
  double *rhi = scratch(L, (size_t)nr, sizeof(double));
  int *count = scratch(L, (size_t)n + 1, sizeof(int));
  size_t at = 0;
  for (lua_Integer r = 1; r <= nr; r++) {
    int top = lua_gettop(L);
    lua_rawgeti(L, rows, (int)r);
    int row = lua_gettop(L);
    lua_getfield(L, row, "cols");
    lua_getfield(L, row, "coefs");
    int cols = row + 1, coefs = row + 2;
    luaL_checktype(L, cols, LUA_TTABLE);
    luaL_checktype(L, coefs, LUA_TTABLE);
    lua_Integer nz = luaL_len(L, cols);
    if (luaL_len(L, coefs) != nz)
      return luaL_error(L, "milp: row %d: cols and coefs differ in length",
                        (int)r);
    if (at + (size_t)nz > nz_all)
      return luaL_error(L, "milp: row %d changed while read", (int)r);
    rstart[r - 1] = (int)at;
    for (lua_Integer k = 1; k <= nz; k++) {
      double j = field_num(L, cols, (int)k, 0); /* truncated, as C does */
      if (!(j >= 1 && j < (double)n + 1))
        return luaL_error(L, "milp: row %d: no column %d", (int)r,
                          j > -1e9 && j < 1e9 ? (int)j : 0);
      rcol[at] = (int)j - 1;
      rval[at++] = field_num(L, coefs, (int)k, 0);
      count[(int)j - 1]++;
    }
    lua_getfield(L, row, "sense");
    const char *sense = luaL_optstring(L, -1, "=");
    lua_getfield(L, row, "rhs");
    double rhs = luaL_optnumber(L, -1, 0);
    if (!strcmp(sense, "<=")) {
      rlo[r - 1] = -DBL_MAX;
      rhi[r - 1] = rhs;
    } else if (!strcmp(sense, ">=")) {
      rlo[r - 1] = rhs;
      rhi[r - 1] = DBL_MAX;
    } else if (!strcmp(sense, "=")) {
      rlo[r - 1] = rhi[r - 1] = rhs;
    } else {
      return luaL_error(L, "milp: row %d: sense '%s'", (int)r, sense);
    }
    lua_settop(L, top);
  }
  rstart[nr] = (int)at;
  /* by columns, each column's rows in row order */
  int *cstart = scratch(L, (size_t)n + 1, sizeof(int));
  int *crow = scratch(L, at, sizeof(int));
  double *cval = scratch(L, at, sizeof(double));
  cstart[0] = 0;
  for (lua_Integer j = 0; j < n; j++) {
    cstart[j + 1] = cstart[j] + count[j];
    count[j] = cstart[j];
  }
  for (lua_Integer r = 0; r < nr; r++)
    for (int e = rstart[r]; e < rstart[r + 1]; e++) {
      int k = count[rcol[e]]++;
      crow[k] = (int)r;
      cval[k] = rval[e];
    }

  cbc_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->m = NULL;
  luaL_setmetatable(L, MODEL_MT);
  if (!(b->m = Cbc_newModel()))
    return luaL_error(L, "milp: out of memory");
  Cbc_setLogLevel(b->m, 0);
  /* without CBC's preprocessing: stopped by the time limit just after
   * it, CBC 2.10 crashes mapping the solution back (a 4-layer Llama on
   * dp=2,tp=4,cp=2 with --seconds 10) */
  Cbc_setParameter(b->m, "preprocess", "off");
  Cbc_loadProblem(b->m, (int)n, (int)nr, cstart, crow, cval, clo, chi, cobj,
                  rlo, rhi);
  for (lua_Integer j = 0; j < n; j++)
    if (cint[j])
      Cbc_setInteger(b->m, (int)j);
  lua_getfield(L, 1, "seconds");
  if (!lua_isnil(L, -1))
    Cbc_setMaximumSeconds(b->m, luaL_checknumber(L, -1));
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "start") == LUA_TTABLE) {
    int ns = 0, cap = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) { /* count */
      cap++;
      lua_pop(L, 1);
    }
    int *idx = lua_newuserdatauv(L, sizeof(int) * (size_t)(cap + 1), 0);
    double *val = lua_newuserdatauv(L, sizeof(double) * (size_t)(cap + 1), 0);
    lua_pushnil(L);
    while (lua_next(L, -4)) {
      lua_Integer j = luaL_checkinteger(L, -2);
      if (j < 1 || j > (lua_Integer)n)
        return luaL_error(L, "milp: start column %d of %d", (int)j, (int)n);
      idx[ns] = (int)j - 1;
      val[ns++] = luaL_checknumber(L, -1);
      lua_pop(L, 1);
    }
    Cbc_setMIPStartI(b->m, ns, idx, val);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  int status = Cbc_solve(b->m);
  /* stopped by the time limit: its best solution so far, if any */
  const double *x =
      status == 0 ? Cbc_getColSolution(b->m) : Cbc_bestSolution(b->m);
  if (!x || Cbc_isProvenInfeasible(b->m)) {
    lua_pushnil(L);
    lua_pushstring(L, Cbc_isProvenInfeasible(b->m) ? "milp: infeasible"
                                                   : "milp: no solution");
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer j = 0; j < n; j++) {
    lua_pushnumber(L, x[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "x");
  lua_pushnumber(L, Cbc_getObjValue(b->m));
  lua_setfield(L, -2, "objective");
  lua_pushboolean(L, Cbc_isProvenOptimal(b->m));
  lua_setfield(L, -2, "optimal");
  return 1;
}

void plan_milp_register(lua_State *L) {
  luaL_newmetatable(L, MODEL_MT);
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_milp);
  lua_setfield(L, -2, "milp");
}
