/* plan.milp (lua/plan_milp.c): a MILP solved by CBC, for the ilp strategy. */
#ifndef LIBPLAN_LUA_PLAN_MILP_H
#define LIBPLAN_LUA_PLAN_MILP_H

#include <lua.h>

/* Sets field "milp" in the module table at the top of the stack. */
void plan_milp_register(lua_State *L);

#endif
