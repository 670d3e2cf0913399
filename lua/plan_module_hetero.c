/* The plan module's view of a heterogeneous mesh, for the ratio LP and the
 * stage sizing (lua/ratios.lua): the hardware of each physical device. */
#include <lauxlib.h>
#include <lua.h>

#include "libplan/cost.h"
#include "libplan/plan.h"
#include "plan_module_internal.h"

/* p:device_hardware(): nil when the mesh gives every device the same
 * hardware; else a list by physical device id (1-based) of {name = the
 * profile's name, memory = bytes per device, flops = bf16 FLOP/s}, the
 * figures from the cost model of that built-in profile (0 when the name is
 * no built-in one). */
static int m_device_hardware(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int64_t n = plan_mesh_device_count(lp->p);
  if (n < 1 || !plan_mesh_device_hardware(lp->p, 0)) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, (int)n, 0);
  for (int64_t d = 0; d < n; d++) {
    const char *name = plan_mesh_device_hardware(lp->p, d);
    double memory = 0, flops = 0;
    plan_cost_model *m = NULL;
    if (name && plan_cost_profile_resolve(name) &&
        !plan_cost_model_new(&m, lp->p, name)) {
      /* a figure the model lacks stays 0 */
      if (plan_cost_model_get(&memory, m, "memory"))
        memory = 0;
      if (plan_cost_model_get(&flops, m, "flops.bf16"))
        flops = 0;
    }
    plan_cost_model_free(m);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, name ? name : "");
    lua_setfield(L, -2, "name");
    lua_pushnumber(L, memory);
    lua_setfield(L, -2, "memory");
    lua_pushnumber(L, flops);
    lua_setfield(L, -2, "flops");
    lua_rawseti(L, -2, (int)d + 1);
  }
  return 1;
}

/* p:hardware_figure(profile, name): a figure of a built-in profile's cost
 * model ("memory", "flops.bf16", ...; libplan/cost.h), or nil and a
 * message. */
static int m_hardware_figure(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const char *profile = luaL_checkstring(L, 2);
  const char *name = luaL_checkstring(L, 3);
  plan_cost_model *m = NULL;
  double v = 0;
  int rc = plan_cost_model_new(&m, lp->p, profile);
  if (!rc)
    rc = plan_cost_model_get(&v, m, name);
  plan_cost_model_free(m);
  if (rc)
    return plan_lua_fail(L);
  lua_pushnumber(L, v);
  return 1;
}

const luaL_Reg plan_lua_hetero_methods[] = {
    {"device_hardware", m_device_hardware},
    {"hardware_figure", m_hardware_figure},
    {NULL, NULL}};
