/* The plan module's provenance: the plan's provenance mapping as Lua
 * values, and Lua values stored as one (plan_provenance_value trees built
 * in Lua-owned memory, which the plan copies). */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "plan_module_internal.h"

static void push_value(lua_State *L, const plan_provenance_value *v) {
  luaL_checkstack(L, 4, "provenance too deep");
  switch (v->type) {
  case PLAN_VALUE_BOOL:
    lua_pushboolean(L, v->boolean);
    break;
  case PLAN_VALUE_INT:
    lua_pushinteger(L, (lua_Integer)v->integer);
    break;
  case PLAN_VALUE_FLOAT:
    lua_pushnumber(L, v->number);
    break;
  case PLAN_VALUE_STRING:
    lua_pushstring(L, v->string);
    break;
  case PLAN_VALUE_SEQ:
  case PLAN_VALUE_MAP:
    lua_createtable(L, v->type == PLAN_VALUE_SEQ ? v->count : 0,
                    v->type == PLAN_VALUE_MAP ? v->count : 0);
    for (int i = 0; i < v->count; i++) {
      push_value(L, &v->items[i]);
      if (v->type == PLAN_VALUE_SEQ)
        lua_rawseti(L, -2, i + 1);
      else
        lua_setfield(L, -2, v->keys[i]);
    }
    break;
  default:
    lua_pushnil(L);
  }
}

/* p:provenance(): the provenance mapping as a table, or nil. */
static int m_provenance(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_lua_box *b = plan_lua_box_new(L, plan_buffer_free);
  plan_provenance_value *v;
  int rc = plan_get_provenance(&v, lp->p);
  if (rc == PLAN_ENOTFOUND)
    return 0;
  if (rc)
    return plan_lua_fail(L);
  b->ptr = v;
  push_value(L, v);
  plan_lua_box_release(b);
  return 1;
}

static int cmp_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A zeroed userdata of `size` bytes, anchored in the table at `anchors`
 * so that it lives as long as that table. */
static void *anchored(lua_State *L, int anchors, size_t size) {
  void *ud = lua_newuserdatauv(L, size, 0);
  memset(ud, 0, size);
  lua_rawseti(L, anchors, (lua_Integer)luaL_len(L, anchors) + 1);
  return ud;
}

/* The Lua value at idx into *v: tables with keys 1..n are sequences,
 * others maps with their keys sorted, so the result never depends on
 * Lua's table order; raises on other types. Arrays and the strings they
 * point to are Lua's: userdata kept in the table at `anchors` and the
 * strings of the tables read (which the caller keeps alive). */
static void to_value(lua_State *L, int anchors, int idx, int depth,
                     plan_provenance_value *v) {
  idx = lua_absindex(L, idx);
  if (depth > 16)
    luaL_error(L, "provenance: nested too deep");
  luaL_checkstack(L, 4, "provenance too deep");
  memset(v, 0, sizeof *v);
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    v->type = PLAN_VALUE_BOOL;
    v->boolean = lua_toboolean(L, idx);
    return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      v->type = PLAN_VALUE_INT;
      v->integer = (int64_t)lua_tointeger(L, idx);
    } else {
      v->type = PLAN_VALUE_FLOAT;
      v->number = lua_tonumber(L, idx);
    }
    return;
  case LUA_TSTRING:
    v->type = PLAN_VALUE_STRING;
    v->string = lua_tostring(L, idx);
    return;
  case LUA_TTABLE:
    break;
  default:
    luaL_error(L, "provenance: a %s cannot be stored", luaL_typename(L, idx));
  }
  lua_Integer n = luaL_len(L, idx);
  int count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    lua_pop(L, 1);
  }
  bool seq = count == n;
  v->type = seq ? PLAN_VALUE_SEQ : PLAN_VALUE_MAP;
  v->count = count;
  plan_provenance_value *items =
      anchored(L, anchors, sizeof *items * (size_t)(count + 1));
  v->items = items;
  if (seq) {
    for (int i = 0; i < count; i++) {
      lua_rawgeti(L, idx, i + 1);
      to_value(L, anchors, -1, depth + 1, &items[i]);
      lua_pop(L, 1);
    }
    return;
  }
  const char **keys = anchored(L, anchors, sizeof *keys * (size_t)(count + 1));
  v->keys = keys;
  int k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "provenance: map keys must be strings");
    keys[k++] = lua_tostring(L, -1); /* held by the table */
  }
  qsort(keys, (size_t)count, sizeof *keys, cmp_keys);
  for (int i = 0; i < count; i++) {
    lua_getfield(L, idx, keys[i]);
    to_value(L, anchors, -1, depth + 1, &items[i]);
    lua_pop(L, 1);
  }
}

/* p:set_provenance(table | nil): how the plan was made (a free mapping,
 * hashed apart from the plan; spec §4.7). */
static int m_set_provenance(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  if (lua_isnoneornil(L, 2)) {
    plan_set_provenance(lp->p, NULL);
    return 0;
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_newtable(L); /* anchors the arrays until the plan has its copy */
  int anchors = lua_gettop(L);
  plan_provenance_value v;
  to_value(L, anchors, 2, 0, &v);
  if (v.type != PLAN_VALUE_MAP && v.count)
    return luaL_error(L, "provenance is a mapping");
  v.type = PLAN_VALUE_MAP;
  if (plan_set_provenance(lp->p, &v))
    return luaL_error(L, "%s", plan_error_last()->message);
  return 0;
}

const luaL_Reg plan_lua_provenance_methods[] = {
    {"provenance", m_provenance},
    {"set_provenance", m_set_provenance},
    {NULL, NULL}};
