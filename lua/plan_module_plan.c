/* The plan userdata of the plan module: its lifetime (__gc, __close,
 * close), what it holds (ops, tensors, mesh, outputs, devices, pinned
 * regions, the cost calls made through it) and writing it out (hash, text,
 * save, the lowered program). */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/lowered.h"
#include "libplan/ops.h"
#include "libplan/program.h"
#include "region_trace.h"
#include "libplan/plan.h"
#include "libplan/space.h"
#include "plan_module_internal.h"

static int m_gc(lua_State *L) {
  lplan *lp = plan_lua_toplan(L, 1);
  plan_cost_model_free(lp->cost);
  free(lp->cost_profile);
  free(lp->undo);
  free(lp->base_dir);
  plan_free(lp->p);
  memset(lp, 0, sizeof *lp);
  return 0;
}

static int m_tostring(lua_State *L) {
  lplan *lp = plan_lua_toplan(L, 1);
  if (!lp->p) {
    lua_pushliteral(L, "plan (closed)");
    return 1;
  }
  const plan_plan *p = lp->p;
  const plan_program *prog = plan_get_program(p);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "plan '%s' (%d ops", plan_program_name(prog),
                  plan_program_op_count(prog));
  luaL_addvalue(&b);
  for (int a = 0; a < plan_mesh_axis_count(p); a++) {
    lua_pushfstring(L, "%s%s=%d", a ? " x " : "; mesh ",
                    plan_mesh_axis_name(p, a), (int)plan_mesh_axis_size(p, a));
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return 1;
}

static int m_hash(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_hash h;
  if (plan_hash_part(&h, lp->p, PLAN_PART_PLAN))
    return plan_lua_fail(L);
  char buf[64];
  lua_pushstring(L, plan_hash_format(h, buf));
  return 1;
}

static int m_text(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  o.self_contained = lua_toboolean(L, 2);
  plan_lua_box *b = plan_lua_box_new(L, free);
  char *text;
  size_t len;
  if (plan_write_buffer(&text, &len, lp->p, &o))
    return plan_lua_fail(L);
  b->ptr = text;
  lua_pushlstring(L, text ? text : "", text ? len : 0);
  plan_lua_box_release(b);
  return 1;
}

static int m_save(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const char *path = luaL_checkstring(L, 2);
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "self_contained");
    o.self_contained = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  if (plan_save(lp->p, path, &o))
    return plan_lua_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int m_lower(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const char *path = luaL_checkstring(L, 2);
  plan_lowered *l;
  if (plan_lower_traced(&l, lp->p, plan_lua_trace_region, NULL))
    return plan_lua_fail(L);
  char *text;
  size_t len;
  int rc = plan_lowered_write(&text, &len, l);
  plan_lowered_free(l);
  if (rc)
    return plan_lua_fail(L);
  rc = plan_write_file_atomic(path, text, len);
  plan_buffer_free(text);
  if (rc)
    return plan_lua_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int m_ops(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const plan_program *prog = plan_get_program(lp->p);
  int n = plan_program_op_count(prog);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, plan_program_op_name(prog, i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* {name, kind, index, inputs = {...}, outputs = {...}} */
static int m_op(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  const plan_program *prog = plan_get_program(lp->p);
  lua_createtable(L, 0, 5);
  lua_pushstring(L, plan_program_op_name(prog, op));
  lua_setfield(L, -2, "name");
  lua_pushstring(L, plan_program_op_kind(prog, op));
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, op + 1);
  lua_setfield(L, -2, "index");
  plan_lua_push_operands(L, prog, op, 0);
  lua_setfield(L, -2, "inputs");
  plan_lua_push_operands(L, prog, op, 1);
  lua_setfield(L, -2, "outputs");
  return 1;
}

/* p:op_key(op): the op's structure as a string: its kind, its attribute
 * values in schema order, and each operand's dtype, shape and role. Two
 * ops with one key have the same strategies and, but for what the cost
 * model keys on names (calibrations), the same costs: the search's
 * repeated-layer detection compares them. */
static void key_tensor(luaL_Buffer *b, const plan_program *prog, int t) {
  plan_program_tensor_info ti;
  char num[32];
  if (plan_program_tensor(&ti, prog, t)) {
    luaL_addstring(b, "?");
    return;
  }
  snprintf(num, sizeof num, " %d:%d[", ti.dtype, ti.role);
  luaL_addstring(b, num);
  for (int d = 0; d < ti.rank; d++) {
    snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)ti.dims[d]);
    luaL_addstring(b, num);
  }
  luaL_addchar(b, ']');
}

static int m_op_key(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  const plan_program *prog = plan_get_program(lp->p);
  plan_program_op_info oi;
  if (plan_program_op(&oi, prog, op))
    return plan_lua_fail(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, plan_op_kind_name(oi.kind));
  int na = 0;
  const plan_attr_spec *spec = plan_op_attrs(oi.kind, &na);
  char num[64];
  for (int a = 0; a < na && spec && oi.attrs; a++) {
    const plan_attr_val *v = &oi.attrs[a];
    luaL_addchar(&b, ' ');
    switch (spec[a].type) {
    case PLAN_ATTR_INT:
      snprintf(num, sizeof num, "%lld", (long long)v->i);
      luaL_addstring(&b, num);
      break;
    case PLAN_ATTR_INTS:
      for (int k = 0; k < v->nints; k++) {
        snprintf(num, sizeof num, k ? ",%lld" : "%lld", (long long)v->ints[k]);
        luaL_addstring(&b, num);
      }
      break;
    case PLAN_ATTR_FLOAT:
      snprintf(num, sizeof num, "%.17g", v->f);
      luaL_addstring(&b, num);
      break;
    case PLAN_ATTR_BOOL:
      luaL_addchar(&b, v->b ? 't' : 'f');
      break;
    case PLAN_ATTR_STRING:
      luaL_addstring(&b, v->s ? v->s : "-");
      break;
    }
  }
  luaL_addstring(&b, " |");
  for (int j = 0; j < oi.nin; j++)
    key_tensor(&b, prog, oi.in[j]);
  luaL_addstring(&b, " >");
  for (int k = 0; k < oi.nout; k++)
    key_tensor(&b, prog, oi.out[k]);
  luaL_pushresult(&b);
  return 1;
}

/* {name, shape = {...}, dtype, role, producer = op name | nil} */
static int m_tensor(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int t = plan_lua_check_tensor(L, lp->p, 2);
  const plan_program *prog = plan_get_program(lp->p);
  int64_t dims[PLAN_MAX_RANK];
  int rank = plan_program_tensor_shape(prog, t, dims, PLAN_MAX_RANK);
  lua_createtable(L, 0, 5);
  lua_pushstring(L, plan_program_tensor_name(prog, t));
  lua_setfield(L, -2, "name");
  lua_createtable(L, rank, 0);
  for (int d = 0; d < rank; d++) {
    lua_pushinteger(L, dims[d]);
    lua_rawseti(L, -2, d + 1);
  }
  lua_setfield(L, -2, "shape");
  lua_pushstring(L, plan_program_tensor_dtype(prog, t));
  lua_setfield(L, -2, "dtype");
  lua_pushstring(L, plan_program_tensor_role(prog, t));
  lua_setfield(L, -2, "role");
  int producer = plan_program_tensor_producer(prog, t);
  if (producer >= 0) {
    lua_pushstring(L, plan_program_op_name(prog, producer));
    lua_setfield(L, -2, "producer");
  }
  return 1;
}

/* {{name = "dp", size = 2}, ...} */
static int m_mesh(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const plan_plan *p = lp->p;
  int naxes = plan_mesh_axis_count(p);
  lua_createtable(L, naxes, 0);
  for (int a = 0; a < naxes; a++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, plan_mesh_axis_name(p, a));
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, plan_mesh_axis_size(p, a));
    lua_setfield(L, -2, "size");
    lua_rawseti(L, -2, a + 1);
  }
  return 1;
}

/* p:outputs(): the program's outputs, in order. */
static int m_outputs(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const plan_program *prog = plan_get_program(lp->p);
  int n = plan_program_output_count(prog);
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    lua_pushstring(
        L, plan_program_tensor_name(prog, plan_program_output(prog, k)));
    lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

/* p:overlap(): the plan's overlap entries (format 1.1), a list of tables
 * {select = "input" | "param" | "grad_sync", pattern, operand (input,
 * when given), chunks, dim (when given), stream, start, start_op, wait,
 * wait_op} (docs/lua.md). */
static int m_overlap(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int n = plan_overlap_count(lp->p);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    plan_overlap_info e;
    if (plan_overlap_entry(&e, lp->p, i))
      return luaL_error(L, "%s", plan_error_last()->message);
    lua_createtable(L, 0, 10);
    lua_pushstring(L, e.select);
    lua_setfield(L, -2, "select");
    lua_pushstring(L, e.pattern);
    lua_setfield(L, -2, "pattern");
    if (e.operand >= 0) {
      lua_pushinteger(L, e.operand);
      lua_setfield(L, -2, "operand");
    }
    lua_pushinteger(L, (lua_Integer)e.chunks);
    lua_setfield(L, -2, "chunks");
    if (e.dim >= 0) {
      lua_pushinteger(L, e.dim);
      lua_setfield(L, -2, "dim");
    }
    lua_pushinteger(L, e.stream);
    lua_setfield(L, -2, "stream");
    lua_pushstring(L, e.start);
    lua_setfield(L, -2, "start");
    if (e.start_op) {
      lua_pushstring(L, e.start_op);
      lua_setfield(L, -2, "start_op");
    }
    lua_pushstring(L, e.wait);
    lua_setfield(L, -2, "wait");
    if (e.wait_op) {
      lua_pushstring(L, e.wait_op);
      lua_setfield(L, -2, "wait_op");
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* p:pinned(op): whether a pinned region holds the op (its strategy is a
 * constraint every search keeps). */
static int m_pinned(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  lua_pushboolean(L, plan_op_pinned(lp->p, op));
  return 1;
}

/* p:devices(): the physical device of each logical rank (row-major over
 * the mesh axes), a list. */
static int m_devices(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int64_t n = plan_mesh_device_count(lp->p);
  lua_createtable(L, (int)n, 0);
  for (int64_t r = 0; r < n; r++) {
    lua_pushinteger(L, plan_mesh_device(lp->p, r));
    lua_rawseti(L, -2, r + 1);
  }
  return 1;
}

/* p:set_devices(list | nil): a new device order (a permutation of
 * 0..n-1; nil: iota); the costs follow it. */
static int m_set_devices(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int64_t n = plan_mesh_device_count(lp->p);
  int rc;
  if (lua_isnoneornil(L, 2)) {
    rc = plan_set_mesh_devices(lp->p, NULL);
  } else {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (luaL_len(L, 2) != n)
      return luaL_error(L, "set_devices: %d devices for a mesh of %d",
                        (int)luaL_len(L, 2), (int)n);
    int64_t *d = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n + 1), 0);
    for (int64_t r = 0; r < n; r++) {
      lua_rawgeti(L, 2, r + 1);
      d[r] = (int64_t)luaL_checkinteger(L, -1);
      lua_pop(L, 1);
    }
    rc = plan_set_mesh_devices(lp->p, d);
  }
  if (!rc && lp->cost)
    rc = plan_cost_model_update_mesh(lp->cost, lp->p);
  if (rc)
    return plan_lua_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* p:stats(): {cost_op = n, cost_redist = n, cost_plan = n}, the cost
 * evaluations made through this plan. */
static int m_stats(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, lp->n_cost_op);
  lua_setfield(L, -2, "cost_op");
  lua_pushinteger(L, lp->n_cost_redist);
  lua_setfield(L, -2, "cost_redist");
  lua_pushinteger(L, lp->n_cost_plan);
  lua_setfield(L, -2, "cost_plan");
  return 1;
}

const luaL_Reg plan_lua_plan_meta[] = {{"__gc", m_gc},
                                       {"__close", m_gc},
                                       {"__tostring", m_tostring},
                                       {NULL, NULL}};

const luaL_Reg plan_lua_plan_methods[] = {{"close", m_gc},
                                          {"hash", m_hash},
                                          {"text", m_text},
                                          {"save", m_save},
                                          {"lower", m_lower},
                                          {"ops", m_ops},
                                          {"op", m_op},
                                          {"op_key", m_op_key},
                                          {"tensor", m_tensor},
                                          {"mesh", m_mesh},
                                          {"outputs", m_outputs},
                                          {"overlap", m_overlap},
                                          {"pinned", m_pinned},
                                          {"devices", m_devices},
                                          {"set_devices", m_set_devices},
                                          {"stats", m_stats},
                                          {NULL, NULL}};
