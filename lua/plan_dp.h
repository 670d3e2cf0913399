/* plan.dp_run (lua/plan_dp.c): the dp strategy's DP over one unit. */
#ifndef LIBPLAN_LUA_PLAN_DP_H
#define LIBPLAN_LUA_PLAN_DP_H

#include <lua.h>

/* Sets field "dp_run" in the module table at the top of the stack. */
void plan_dp_register(lua_State *L);

#endif
