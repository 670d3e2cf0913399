/* The plan module's provenance: the plan's provenance mapping as Lua
 * values, and Lua values stored as one. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan_module_internal.h"

static void push_value(lua_State *L, const plan_value *v) {
  luaL_checkstack(L, 4, "provenance too deep");
  switch (v ? v->kind : PLAN_V_NULL) {
  case PLAN_V_BOOL:
    lua_pushboolean(L, v->b);
    break;
  case PLAN_V_INT:
    lua_pushinteger(L, (lua_Integer)v->i);
    break;
  case PLAN_V_FLOAT:
    lua_pushnumber(L, v->f);
    break;
  case PLAN_V_STRING:
    lua_pushstring(L, v->s);
    break;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    lua_createtable(L, v->kind == PLAN_V_SEQ ? v->n : 0,
                    v->kind == PLAN_V_MAP ? v->n : 0);
    for (int i = 0; i < v->n; i++) {
      push_value(L, v->items[i]);
      if (v->kind == PLAN_V_SEQ)
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
  if (!lp->p->provenance)
    return 0;
  push_value(L, lp->p->provenance);
  return 1;
}

static int cmp_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The Lua value at idx as a plan_value in the plan's arena (tables with
 * keys 1..n are sequences, others maps with their keys sorted, so the
 * result never depends on Lua's table order); raises on other types. */
static plan_value *to_value(lua_State *L, plan_plan *p, int idx, int depth) {
  idx = lua_absindex(L, idx);
  if (depth > 16)
    luaL_error(L, "provenance: nested too deep");
  luaL_checkstack(L, 4, "provenance too deep");
  plan_value *v = plan_arena_alloc(&p->arena, sizeof *v);
  if (!v)
    luaL_error(L, "out of memory");
  memset(v, 0, sizeof *v);
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    v->kind = PLAN_V_BOOL;
    v->b = lua_toboolean(L, idx);
    return v;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      v->kind = PLAN_V_INT;
      v->i = (int64_t)lua_tointeger(L, idx);
    } else {
      v->kind = PLAN_V_FLOAT;
      v->f = lua_tonumber(L, idx);
    }
    return v;
  case LUA_TSTRING:
    v->kind = PLAN_V_STRING;
    v->s = plan_arena_strdup(&p->arena, lua_tostring(L, idx));
    if (!v->s)
      luaL_error(L, "out of memory");
    return v;
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
  v->kind = seq ? PLAN_V_SEQ : PLAN_V_MAP;
  v->n = count;
  v->items =
      plan_arena_alloc(&p->arena, sizeof *v->items * (size_t)(count + 1));
  if (!v->items)
    luaL_error(L, "out of memory");
  if (seq) {
    for (int i = 0; i < count; i++) {
      lua_rawgeti(L, idx, i + 1);
      v->items[i] = to_value(L, p, -1, depth + 1);
      lua_pop(L, 1);
    }
    return v;
  }
  v->keys = plan_arena_alloc(&p->arena, sizeof *v->keys * (size_t)(count + 1));
  if (!v->keys)
    luaL_error(L, "out of memory");
  int k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "provenance: map keys must be strings");
    v->keys[k] = plan_arena_strdup(&p->arena, lua_tostring(L, -1));
    if (!v->keys[k++])
      luaL_error(L, "out of memory");
  }
  qsort(v->keys, (size_t)count, sizeof *v->keys, cmp_keys);
  for (int i = 0; i < count; i++) {
    lua_getfield(L, idx, v->keys[i]);
    v->items[i] = to_value(L, p, -1, depth + 1);
    lua_pop(L, 1);
  }
  return v;
}

/* p:set_provenance(table | nil): how the plan was made (a free mapping,
 * hashed apart from the plan; spec §4.7). */
static int m_set_provenance(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  if (lua_isnoneornil(L, 2)) {
    lp->p->provenance = NULL;
    return 0;
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  plan_value *v = to_value(L, lp->p, 2, 0);
  if (v->kind != PLAN_V_MAP && v->n)
    return luaL_error(L, "provenance is a mapping");
  v->kind = PLAN_V_MAP;
  lp->p->provenance = v;
  return 0;
}

const luaL_Reg plan_lua_provenance_methods[] = {
    {"provenance", m_provenance},
    {"set_provenance", m_set_provenance},
    {NULL, NULL}};
