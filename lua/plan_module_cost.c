/* The plan module's costs: an op's compute under a strategy, a
 * redistribution, the whole plan's step and memory, from the cost model
 * of the plan's mesh (made on first use, kept in the plan userdata). */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/space.h"
#include "plan_module_internal.h"

/* The cost model of this plan's mesh, made on first use (or when another
 * hardware profile is asked for). */
static const plan_cost_model *cost_model(lua_State *L, lplan *lp,
                                         const char *profile) {
  if (lp->cost &&
      ((!profile && !lp->cost_profile) ||
       (profile && lp->cost_profile && !strcmp(profile, lp->cost_profile))))
    return lp->cost;
  plan_cost_model_free(lp->cost);
  lp->cost = NULL;
  free(lp->cost_profile);
  lp->cost_profile = NULL;
  if (profile && !(lp->cost_profile = strdup(profile)))
    luaL_error(L, "out of memory");
  if (plan_cost_model_new(&lp->cost, lp->p, profile))
    return NULL;
  return lp->cost;
}

/* p:cost_op(op, strategy [, hardware]): seconds of the op's local compute
 * under the strategy (the slowest rank). */
static int m_cost_op(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_lua_check_strategy(L, lp->p, op, 3, in, out);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 4, NULL));
  double s;
  lp->n_cost_op++;
  if (!m || plan_cost_op_seconds(&s, m, lp->p, op, in, out))
    return plan_lua_fail(L);
  lua_pushnumber(L, s);
  return 1;
}

/* p:cost_op_rank(op, strategy, rank [, hardware]): seconds of the op's
 * local compute on logical rank `rank` (1-based, as p:devices() lists the
 * ranks): its own piece (ratios included) on its own device's hardware. */
static int m_cost_op_rank(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_lua_check_strategy(L, lp->p, op, 3, in, out);
  lua_Integer rank = luaL_checkinteger(L, 4);
  if (rank < 1 || rank > plan_mesh_device_count(lp->p))
    return luaL_error(L, "cost_op_rank: rank %d of %d", (int)rank,
                      (int)plan_mesh_device_count(lp->p));
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 5, NULL));
  double s;
  lp->n_cost_op++;
  if (!m ||
      plan_cost_op_seconds_rank(&s, m, lp->p, op, (int64_t)rank - 1, in, out))
    return plan_lua_fail(L);
  lua_pushnumber(L, s);
  return 1;
}

/* p:cost_redist(tensor, from, to [, hardware]): seconds to change the
 * tensor's placement (the collectives lowering would insert). */
static int m_cost_redist(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int t = plan_lua_check_tensor(L, lp->p, 2);
  plan_placement a, b;
  plan_lua_parse_placement(L, lp->p, luaL_checkstring(L, 3), t, &a);
  plan_lua_parse_placement(L, lp->p, luaL_checkstring(L, 4), t, &b);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 5, NULL));
  double s;
  lp->n_cost_redist++;
  if (!m || plan_cost_redist_seconds(&s, m, lp->p, t, &a, &b))
    return plan_lua_fail(L);
  lua_pushnumber(L, s);
  return 1;
}

/* p:cost([hardware]): {step = seconds, memory = peak bytes per device,
 * fits = bool, text = the breakdown} */
static int m_cost(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 2, NULL));
  plan_lua_box *b = plan_lua_box_new(L, plan_buffer_free); /* the text */
  plan_cost_report *r;
  lp->n_cost_plan++;
  if (!m || plan_cost_plan(&r, m, lp->p))
    return plan_lua_fail(L);
  double step = plan_cost_report_step_seconds(r);
  double mem = (double)plan_cost_report_memory_peak(r);
  int fits = plan_cost_report_fits(r);
  char *text = NULL;
  size_t len = 0;
  int rc = plan_cost_report_write(&text, &len, r, "text");
  plan_cost_report_free(r);
  if (rc)
    return plan_lua_fail(L);
  b->ptr = text;
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, step);
  lua_setfield(L, -2, "step");
  lua_pushnumber(L, mem);
  lua_setfield(L, -2, "memory");
  lua_pushboolean(L, fits);
  lua_setfield(L, -2, "fits");
  lua_pushlstring(L, text ? text : "", text ? len : 0);
  lua_setfield(L, -2, "text");
  plan_lua_box_release(b);
  return 1;
}

const luaL_Reg plan_lua_cost_methods[] = {{"cost", m_cost},
                                          {"cost_op", m_cost_op},
                                          {"cost_op_rank", m_cost_op_rank},
                                          {"cost_redist", m_cost_redist},
                                          {NULL, NULL}};
