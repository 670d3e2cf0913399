/* The plan module's view of a heterogeneous mesh, for the ratio LP and the
 * stage sizing (lua/ratios.lua): the hardware of each physical device;
 * what-if topology and hardware, and the placement search on the
 * topology (docs/heterogeneous.md). */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

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
  /* one cost model per distinct profile, not per device: the figures of
   * the last name asked for are kept (devices of one profile are usually
   * adjacent, and a device list names a handful of profiles) */
  const char *last = NULL;
  double memory = 0, flops = 0;
  for (int64_t d = 0; d < n; d++) {
    const char *name = plan_mesh_device_hardware(lp->p, d);
    if (!last || !name || strcmp(name, last)) {
      memory = flops = 0;
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
      last = name;
    }
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

/* A link's figure `field` of table `idx`, or `dflt` when absent. */
static double link_field(lua_State *L, int idx, const char *field,
                         double dflt) {
  double v = dflt;
  if (lua_getfield(L, idx, field) != LUA_TNIL) {
    if (!lua_isnumber(L, -1))
      luaL_error(L, "topology: %s must be a number", field);
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* A figure of the plan's hardware (profile NULL) or of a built-in one. */
static double figure(lplan *lp, const char *profile, const char *name) {
  plan_cost_model *m = NULL;
  double v = 0;
  if (plan_cost_model_new(&m, lp->p, profile) ||
      plan_cost_model_get(&v, m, name))
    v = 0;
  plan_cost_model_free(m);
  return v;
}

/* Reads a topology table at `idx` (the file's spelling: {levels = {{name,
 * size, bandwidth, latency}...}} or {torus = {dims = {4, 4}, wrap = true |
 * {true, false}, bandwidth, latency}}) into *t; a link's missing figures
 * are the hardware's (`profile`, NULL: the plan's): intra_host for the
 * torus and the inner levels, inter_host for the last level. The level
 * names are borrowed from the table. Raises on a malformed table. */
static void check_topology(lua_State *L, lplan *lp, int idx,
                           const char *profile, plan_topology_spec *t) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  memset(t, 0, sizeof *t);
  double ibw = figure(lp, profile, "intra_host.bandwidth");
  double ilat = figure(lp, profile, "intra_host.latency");
  double obw = figure(lp, profile, "inter_host.bandwidth");
  double olat = figure(lp, profile, "inter_host.latency");
  if (lua_getfield(L, idx, "torus") == LUA_TTABLE) {
    int tt = lua_gettop(L);
    t->torus = 1;
    if (lua_getfield(L, tt, "dims") != LUA_TTABLE)
      luaL_error(L, "topology: torus.dims must be a list of 1 to 3 sizes");
    t->ndims = (int)luaL_len(L, -1);
    if (t->ndims < 1 || t->ndims > 3)
      luaL_error(L, "topology: torus.dims has %d entries, not 1 to 3",
                 t->ndims);
    for (int d = 0; d < t->ndims; d++) {
      lua_rawgeti(L, -1, d + 1);
      if (!lua_isinteger(L, -1))
        luaL_error(L, "topology: torus.dims[%d] must be an integer", d + 1);
      t->dims[d] = (int64_t)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    int wt = lua_getfield(L, tt, "wrap");
    for (int d = 0; d < t->ndims; d++) {
      if (wt == LUA_TNIL)
        t->wrap[d] = 1;
      else if (wt == LUA_TBOOLEAN)
        t->wrap[d] = lua_toboolean(L, -1);
      else if (wt == LUA_TTABLE) {
        lua_rawgeti(L, -1, d + 1);
        t->wrap[d] = lua_toboolean(L, -1);
        lua_pop(L, 1);
      } else
        luaL_error(L, "topology: torus.wrap must be a boolean or a list");
    }
    lua_pop(L, 1);
    t->bandwidth = link_field(L, tt, "bandwidth", ibw);
    t->latency = link_field(L, tt, "latency", ilat);
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "levels") != LUA_TTABLE)
    luaL_error(L, "topology: a table with 'levels' or 'torus'");
  int lt = lua_gettop(L);
  t->nlevels = (int)luaL_len(L, lt);
  if (t->nlevels < 1 || t->nlevels > PLAN_TOPOLOGY_MAX_LEVELS)
    luaL_error(L, "topology: %d levels, not 1 to %d", t->nlevels,
               PLAN_TOPOLOGY_MAX_LEVELS);
  for (int l = 0; l < t->nlevels; l++) {
    bool last = l + 1 == t->nlevels;
    if (lua_rawgeti(L, lt, l + 1) != LUA_TTABLE)
      luaL_error(L, "topology: levels[%d] must be a table", l + 1);
    int e = lua_gettop(L);
    if (lua_getfield(L, e, "name") == LUA_TSTRING)
      t->level_name[l] = lua_tostring(L, -1); /* the table keeps it */
    lua_pop(L, 1);
    if (lua_getfield(L, e, "size") != LUA_TNIL) {
      if (!lua_isinteger(L, -1))
        luaL_error(L, "topology: levels[%d].size must be an integer", l + 1);
      t->level_size[l] = (int64_t)lua_tointeger(L, -1);
    } else if (!last)
      luaL_error(L, "topology: levels[%d] needs a size", l + 1);
    lua_pop(L, 1);
    t->level_bandwidth[l] = link_field(L, e, "bandwidth", last ? obw : ibw);
    t->level_latency[l] = link_field(L, e, "latency", last ? olat : ilat);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Reads a list of n profile names at `idx` into a userdata array pushed on
 * the stack (the strings stay the table's); raises on a bad list. */
static const char **check_names(lua_State *L, int idx, int64_t n) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  if (luaL_len(L, idx) != n)
    luaL_error(L, "device_hardware: %d names for %d devices",
               (int)luaL_len(L, idx), (int)n);
  const char **names =
      lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (int64_t d = 0; d < n; d++) {
    if (lua_rawgeti(L, idx, d + 1) != LUA_TSTRING)
      luaL_error(L, "device_hardware[%d] must be a profile name", (int)d + 1);
    names[d] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return names;
}

/* The cached cost model no longer matches the mesh's hardware. */
static void drop_model(lplan *lp) {
  plan_cost_model_free(lp->cost);
  lp->cost = NULL;
}

/* p:topology(): "torus", "levels" or nil, the kind of the mesh's
 * topology. */
static int m_topology(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int k = plan_mesh_topology_kind(lp->p);
  if (k < 0)
    lua_pushnil(L);
  else
    lua_pushstring(L, k ? "torus" : "levels");
  return 1;
}

/* p:set_topology(t | nil [, hardware]): the mesh's topology, a table as
 * the file spells it (missing link figures: the hardware's); true, or nil
 * and a message. */
static int m_set_topology(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_topology_spec t;
  int rc;
  if (lua_isnoneornil(L, 2))
    rc = plan_set_mesh_topology(lp->p, NULL);
  else {
    check_topology(L, lp, 2, luaL_optstring(L, 3, NULL), &t);
    rc = plan_set_mesh_topology(lp->p, &t);
  }
  if (rc)
    return plan_lua_fail(L);
  drop_model(lp);
  lua_pushboolean(L, 1);
  return 1;
}

/* p:set_device_hardware(list | nil): physical device d's built-in profile
 * is list[d + 1]; true, or nil and a message. */
static int m_set_device_hardware(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int rc;
  if (lua_isnoneornil(L, 2))
    rc = plan_set_mesh_device_hardware(lp->p, NULL);
  else
    rc = plan_set_mesh_device_hardware(
        lp->p, check_names(L, 2, plan_mesh_device_count(lp->p)));
  if (rc)
    return plan_lua_fail(L);
  drop_model(lp);
  lua_pushboolean(L, 1);
  return 1;
}

/* q:copy_physical_from(p): q's mesh takes p's hardware, per-device
 * profiles, topology and hosts (the same devices in another shape); true,
 * or nil and a message. */
static int m_copy_physical_from(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  lplan *src = plan_lua_toplan(L, 2);
  if (!src->p)
    return luaL_error(L, "the plan is closed");
  if (plan_mesh_copy_physical(lp->p, src->p))
    return plan_lua_fail(L);
  drop_model(lp);
  lua_pushboolean(L, 1);
  return 1;
}

static void push_candidate(lua_State *L, const plan_placement_candidate *c) {
  lua_createtable(L, 0, 3);
  lua_pushstring(L, c->curve);
  lua_setfield(L, -2, "curve");
  lua_pushstring(L, c->order);
  lua_setfield(L, -2, "order");
  lua_pushnumber(L, c->step);
  lua_setfield(L, -2, "step");
}

/* p:search_placement{topology = t, device_hardware = list, hardware =
 * name, apply = bool}: the placement search (what-if topology and
 * hardware for this call only). Returns {curve, order, step, default,
 * gain = default / step, devices = the best order (0-based ids by rank),
 * candidates = n priced, list = {{curve, order, step}...}, seconds};
 * with apply, p's devices become the best order. nil and a message when
 * there is no topology or a what-if is refused. */
static int m_search_placement(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  if (lua_isnoneornil(L, 2))
    lua_newtable(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  plan_placement_options o = PLAN_PLACEMENT_OPTIONS_INIT;
  if (lua_getfield(L, 2, "hardware") != LUA_TNIL)
    o.profile = luaL_checkstring(L, -1); /* stays on the stack */
  plan_topology_spec t;
  if (lua_getfield(L, 2, "topology") != LUA_TNIL) {
    check_topology(L, lp, -1, o.profile, &t);
    o.topology = &t;
  }
  if (lua_getfield(L, 2, "device_hardware") != LUA_TNIL)
    o.device_hardware = check_names(L, -1, plan_mesh_device_count(lp->p));
  lua_getfield(L, 2, "apply");
  bool apply = lua_toboolean(L, -1);
  lua_pop(L, 1);
  /* the order before, to put back without apply */
  int64_t n = plan_mesh_device_count(lp->p);
  int64_t *before = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n + 1), 0);
  for (int64_t r = 0; r < n; r++)
    before[r] = plan_mesh_device(lp->p, r);
  plan_placement_result *res = lua_newuserdatauv(L, sizeof *res, 0);
  o.keep = 1;
  if (plan_search_placement(res, lp->p, &o))
    return plan_lua_fail(L);
  lua_createtable(L, 0, 10);
  lua_pushstring(L, res->best.curve);
  lua_setfield(L, -2, "curve");
  lua_pushstring(L, res->best.order);
  lua_setfield(L, -2, "order");
  lua_pushnumber(L, res->best.step);
  lua_setfield(L, -2, "step");
  lua_pushnumber(L, res->default_step);
  lua_setfield(L, -2, "default");
  lua_pushnumber(L,
                 res->best.step > 0 ? res->default_step / res->best.step : 1);
  lua_setfield(L, -2, "gain");
  lua_pushinteger(L, res->candidates);
  lua_setfield(L, -2, "candidates");
  lua_pushnumber(L, res->seconds);
  lua_setfield(L, -2, "seconds");
  lua_createtable(L, (int)n, 0);
  for (int64_t r = 0; r < n; r++) {
    lua_pushinteger(L, plan_mesh_device(lp->p, r));
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "devices");
  lua_createtable(L, res->listed, 0);
  for (int i = 0; i < res->listed; i++) {
    push_candidate(L, &res->list[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "list");
  int rc = apply ? 0 : plan_set_mesh_devices(lp->p, before);
  if (!rc && lp->cost)
    rc = plan_cost_model_update_mesh(lp->cost, lp->p);
  if (rc)
    return plan_lua_fail(L);
  return 1;
}

const luaL_Reg plan_lua_hetero_methods[] = {
    {"device_hardware", m_device_hardware},
    {"hardware_figure", m_hardware_figure},
    {"topology", m_topology},
    {"set_topology", m_set_topology},
    {"set_device_hardware", m_set_device_hardware},
    {"copy_physical_from", m_copy_physical_from},
    {"search_placement", m_search_placement},
    {NULL, NULL}};
