/* The `plan` Lua module's loader (lua/plan_module.c). */
#ifndef LIBPLAN_LUA_PLAN_MODULE_H
#define LIBPLAN_LUA_PLAN_MODULE_H

#include <lua.h>

#include "libplan/common.h"

/* The one symbol plan.so exports (a stock lua5.4 looks it up by name); the
 * rest is built with -fvisibility=hidden. */
PLAN_API int luaopen_plan(lua_State *L);

#endif
