/* The plan module's checks of a plan: validation, verification (manual
 * regions' bodies traced as Lua) and the differences between two plans. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/diag.h"
#include "libplan/plan.h"
#include "libplan/verify.h"
#include "plan_module_internal.h"
#include "region_trace.h"

static void release_report(void *r) {
  plan_verify_report_free(r);
}

static void release_diags(void *d) {
  plan_diags_free(d);
}

/* The findings of d as a list of strings in the one text form the tool
 * prints too (plan_diag_format: "file:line:col: severity: message
 * [code]"), in d's order; no_file leaves the file out. */
static void push_findings(lua_State *L, const plan_diags *d, bool no_file) {
  size_t n = plan_diags_count(d);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    char line[2048];
    plan_diag g = *plan_diags_get(d, i);
    if (no_file)
      g.file = "";
    plan_diag_format(line, sizeof line, &g);
    lua_pushstring(L, line);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* ok, {findings...}: each finding a string (push_findings) in the order
 * validation gives. */
static int m_validate(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  luaL_checkstack(L, 4, "validate");
  plan_lua_box *b = plan_lua_box_new(L, release_diags);
  plan_diags *d;
  if (plan_validate(&d, lp->p))
    return plan_lua_fail(L);
  b->ptr = d;
  lua_pushboolean(L, plan_diags_count_at_least(d, PLAN_SEV_ERROR) == 0);
  push_findings(L, d, false);
  plan_lua_box_release(b);
  return 2;
}

/* verify's option `name` of the options table at index 2: a string, or
 * NULL when absent; left on the stack (a value in a slot of its own stays
 * alive while the call runs, whatever Lua code runs meanwhile). */
/* The integer at stack index idx, or (nil there) the first of the
 * launcher's variables names[0..n) that is set; an error when neither. */
static lua_Integer env_or_integer(lua_State *L, int idx,
                                  const char *const *names, int n,
                                  const char *what) {
  if (!lua_isnil(L, idx))
    return luaL_checkinteger(L, idx);
  for (int i = 0; i < n; i++) {
    const char *v = getenv(names[i]);
    char *e;
    if (!v || !v[0])
      continue;
    long long x = strtoll(v, &e, 10);
    if (*e)
      return luaL_error(L, "verify: %s from %s is not an integer", what,
                        names[i]);
    return (lua_Integer)x;
  }
  return luaL_error(L,
                    "verify: distributed runs under a launcher (mpirun, "
                    "srun, torchrun), or needs %s",
                    what);
}

static const char *opt_string(lua_State *L, const char *name) {
  if (lua_getfield(L, 2, name) == LUA_TNIL)
    return NULL;
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "verify: %s must be a string", name);
  return lua_tostring(L, -1);
}

/* equal, report text, {first_op, first_tensor, diagnosis} | nil, message */
static int m_verify(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  plan_lua_box *b = plan_lua_box_new(L, release_report); /* for the report */
  int top = lua_gettop(L);
  if (lua_istable(L, 2)) {
    const char *mode = opt_string(L, "mode");
    if (mode && !strcmp(mode, "float"))
      o.mode = PLAN_VERIFY_FLOAT;
    else if (mode && strcmp(mode, "exact"))
      return luaL_error(L, "verify: mode is 'exact' or 'float'");
    lua_getfield(L, 2, "seed");
    o.seed = (uint64_t)luaL_optinteger(L, -1, 0);
    o.dtype = opt_string(L, "dtype");
    if (o.dtype)
      o.mode = PLAN_VERIFY_FLOAT;
    o.runner = opt_string(L, "runner"); /* "cpu" (nil) or "cuda" */
    /* one process of a distributed verification (docs/gpu.md):
     * distributed = true (under mpirun or srun), or the folder where rank
     * 0 leaves NCCL's id (torchrun); rank and world_size default to the
     * launcher's */
    lua_getfield(L, 2, "distributed");
    bool dist = lua_toboolean(L, -1);
    lua_pop(L, 1);
    o.rendezvous = NULL;
    lua_getfield(L, 2, "distributed");
    if (lua_type(L, -1) == LUA_TSTRING)
      o.rendezvous = lua_tostring(L, -1); /* kept on the stack */
    else if (dist && lua_type(L, -1) != LUA_TBOOLEAN)
      return luaL_error(L, "verify: distributed is true or a folder");
    o.comm = opt_string(L, "comm");
    lua_getfield(L, 2, "rank");
    lua_getfield(L, 2, "world_size");
    lua_getfield(L, 2, "timeout");
    bool given =
        !lua_isnil(L, -3) || !lua_isnil(L, -2) || !lua_isnil(L, -1) || o.comm;
    if (!dist && given)
      return luaL_error(L, "verify: rank, world_size, timeout and comm go "
                           "with distributed");
    if (dist) {
      static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_NTASKS", "WORLD_SIZE"};
      static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                          "SLURM_PROCID", "RANK"};
      lua_Integer rank = env_or_integer(L, -3, ranks, 4, "rank");
      lua_Integer world = env_or_integer(L, -2, sizes, 4, "world_size");
      o.timeout_s = luaL_optnumber(L, -1, 0);
      if (world < 1 || world > 1 << 20 || rank < 0 || rank >= world)
        return luaL_error(L, "verify: rank must lie in [0, world_size)");
      if (!(o.timeout_s >= 0 && o.timeout_s < 1e9))
        return luaL_error(L, "verify: timeout must be >= 0 seconds");
      o.rank = (int)rank;
      o.world = (int)world;
    }
  }
  plan_verify_report *r; /* manual regions: their bodies traced in Lua */
  int rc = plan_verify_traced(&r, lp->p, &o, plan_lua_trace_region, NULL);
  if (!rc)
    b->ptr = r;
  lua_settop(L, top); /* the options' values are not needed past here */
  if (rc)
    return plan_lua_fail(L);
  lua_pushboolean(L, plan_verify_report_equal(r));
  lua_pushstring(L, plan_verify_report_text(r));
  lua_createtable(L, 0, 3);
  const char *f[3] = {plan_verify_report_first_op(r),
                      plan_verify_report_first_tensor(r),
                      plan_verify_report_diagnosis(r)};
  static const char *const names[] = {"first_op", "first_tensor", "diagnosis"};
  for (int i = 0; i < 3; i++)
    if (f[i]) {
      lua_pushstring(L, f[i]);
      lua_setfield(L, -2, names[i]);
    }
  plan_lua_box_release(b);
  return 3;
}

/* p:verify_estimate{mode = "exact"|"float"}: the bytes verifying would
 * take (docs/verify.md, Memory) | nil, message */
static int m_verify_estimate(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  if (lua_istable(L, 2)) {
    const char *mode = opt_string(L, "mode");
    if (mode && !strcmp(mode, "float"))
      o.mode = PLAN_VERIFY_FLOAT;
    else if (mode && strcmp(mode, "exact"))
      return luaL_error(L, "verify_estimate: mode is 'exact' or 'float'");
  }
  uint64_t bytes;
  if (plan_verify_estimate(&bytes, lp->p, NULL, &o))
    return plan_lua_fail(L);
  lua_pushinteger(L,
                  bytes > (uint64_t)INT64_MAX ? INT64_MAX : (lua_Integer)bytes);
  return 1;
}

/* p:diff(q): the semantic differences, notes in the findings' text form
 * without a file (push_findings: they are about two plans, at no line;
 * empty when the plans are equal in content). */
static int m_diff(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  lplan *lq = plan_lua_toplan(L, 2);
  if (!lq->p)
    return luaL_error(L, "the other plan is closed");
  plan_lua_box *b = plan_lua_box_new(L, release_diags);
  plan_diags *d;
  if (plan_diff(&d, lp->p, lq->p))
    return plan_lua_fail(L);
  b->ptr = d;
  push_findings(L, d, true);
  plan_lua_box_release(b);
  return 1;
}

const luaL_Reg plan_lua_verify_methods[] = {
    {"validate", m_validate},
    {"verify", m_verify},
    {"verify_estimate", m_verify_estimate},
    {"diff", m_diff},
    {NULL, NULL}};
