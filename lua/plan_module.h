/* The `plan` Lua module's loader (lua/plan_module.c). */
#ifndef LIBPLAN_LUA_PLAN_MODULE_H
#define LIBPLAN_LUA_PLAN_MODULE_H

#include <lua.h>

int luaopen_plan(lua_State *L);

#endif
