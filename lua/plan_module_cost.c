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

const plan_cost_model *plan_lua_cost_model(lua_State *L, lplan *lp,
                                           const char *profile) {
  return cost_model(L, lp, profile);
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
 * fits = bool, text = the breakdown, step_no_overlap = seconds (the step
 * with every collective on the compute stream), exposed = seconds of
 * communication the compute waits for, overlapped = bool (the step was
 * priced with the plan's overlap)} */
static int m_cost(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 2, NULL));
  plan_lua_box *b = plan_lua_box_new(L, plan_buffer_free); /* the text */
  plan_cost_report *r;
  lp->n_cost_plan++;
  if (!m || plan_cost_plan(&r, m, lp->p))
    return plan_lua_fail(L);
  double step = plan_cost_report_step_seconds(r);
  double plain = plan_cost_report_step_no_overlap_seconds(r);
  double exposed = plan_cost_report_exposed_comm_seconds(r);
  int overlapped = plan_cost_report_overlapped(r);
  double mem = (double)plan_cost_report_memory_peak(r);
  int fits = plan_cost_report_fits(r);
  char *text = NULL;
  size_t len = 0;
  int rc = plan_cost_report_write(&text, &len, r, "text");
  plan_cost_report_free(r);
  if (rc)
    return plan_lua_fail(L);
  b->ptr = text;
  lua_createtable(L, 0, 7);
  lua_pushnumber(L, step);
  lua_setfield(L, -2, "step");
  lua_pushnumber(L, plain);
  lua_setfield(L, -2, "step_no_overlap");
  lua_pushnumber(L, exposed);
  lua_setfield(L, -2, "exposed");
  lua_pushboolean(L, overlapped);
  lua_setfield(L, -2, "overlapped");
  lua_pushnumber(L, mem);
  lua_setfield(L, -2, "memory");
  lua_pushboolean(L, fits);
  lua_setfield(L, -2, "fits");
  lua_pushlstring(L, text ? text : "", text ? len : 0);
  lua_setfield(L, -2, "text");
  plan_lua_box_release(b);
  return 1;
}

static void set_str(lua_State *L, const char *k, const char *v) {
  lua_pushstring(L, v ? v : "");
  lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static void free_sim(void *s) {
  plan_cost_sim_free(s);
}

/* p:simulate([{plain = bool, serial = bool, hardware = NAME}]): the plan's
 * lowered program run on its streams (plan_cost_simulate; plain: without
 * its overlap, serial: every collective on the compute stream) ->
 * {makespan, compute, exposed, steps = {{kind = "op" | "collective" |
 * "wait" | "input", name, collective, axis, link, stream, chunk_index,
 * chunk_of, seconds, start, ending, origin_op, origin_operand (0-based, -1
 * none), param, grad_of, ready, reader (1-based step numbers; 0 none,
 * reader past the last step: none), chunkable = {1, 2, 4...},
 * chunk_seconds = {1 chunk, 2, 4}}, ...}} | nil, message */
static int m_simulate(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  unsigned flags = 0;
  const char *hw = NULL;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "plain"), lua_toboolean(L, -1))
      flags |= PLAN_COST_SIM_PLAIN;
    if (lua_getfield(L, 2, "serial"), lua_toboolean(L, -1))
      flags |= PLAN_COST_SIM_SERIAL;
    lua_getfield(L, 2, "hardware");
    hw = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
    lua_pop(L, 3);
  }
  const plan_cost_model *m = cost_model(L, lp, hw);
  plan_lua_box *b = plan_lua_box_new(L, free_sim);
  plan_cost_sim *s = NULL;
  lp->n_cost_plan++;
  if (!m || plan_cost_simulate(&s, m, lp->p, flags))
    return plan_lua_fail(L);
  b->ptr = s;
  size_t n = plan_cost_sim_step_count(s);
  lua_createtable(L, 0, 4);
  set_num(L, "makespan", plan_cost_sim_makespan(s));
  set_num(L, "compute", plan_cost_sim_compute_seconds(s));
  set_num(L, "exposed", plan_cost_sim_exposed_seconds(s));
  lua_createtable(L, (int)n, 0);
  static const char *const kinds[] = {"input", "op", "collective", "wait"};
  for (size_t i = 0; i < n; i++) {
    plan_cost_sim_step_info o;
    if (plan_cost_sim_step(&o, s, i))
      return plan_lua_fail(L);
    lua_createtable(L, 0, 20);
    set_str(L, "kind", o.kind >= 0 && o.kind < 4 ? kinds[o.kind] : "input");
    set_str(L, "name", o.name);
    set_str(L, "collective", o.collective);
    set_str(L, "axis", o.axis);
    set_str(L, "link", o.link);
    set_int(L, "stream", o.stream);
    set_int(L, "chunk_index", o.chunk_index);
    set_int(L, "chunk_of", o.chunk_of);
    set_num(L, "seconds", o.seconds);
    set_num(L, "start", o.start);
    set_num(L, "ending", o.end);
    set_str(L, "origin_op", o.origin_op);
    set_int(L, "origin_operand", o.origin_operand);
    set_str(L, "param", o.param);
    set_str(L, "grad_of", o.grad_of);
    set_int(L, "ready", o.ready + 1);
    set_int(L, "reader", o.reader + 1);
    lua_createtable(L, 3, 0);
    for (int k = 0, j = 0; k < 3; k++)
      if (o.chunkable & (1u << k)) {
        lua_pushinteger(L, 1 << k);
        lua_rawseti(L, -2, ++j);
      }
    lua_setfield(L, -2, "chunkable");
    lua_createtable(L, 3, 0);
    for (int k = 0; k < 3; k++) {
      lua_pushnumber(L, o.chunk_seconds[k]);
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "chunk_seconds");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "steps");
  plan_lua_box_release(b);
  return 1;
}

const luaL_Reg plan_lua_cost_methods[] = {{"cost", m_cost},
                                          {"simulate", m_simulate},
                                          {"cost_op", m_cost_op},
                                          {"cost_op_rank", m_cost_op_rank},
                                          {"cost_redist", m_cost_redist},
                                          {NULL, NULL}};
