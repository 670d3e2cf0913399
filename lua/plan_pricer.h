/* The redistribution pricer (lua/plan_module_pricer.c): p:redist_pricer's
 * userdata, which plan.dp_unit's run asks in place of a Lua callback. */
#ifndef LIBPLAN_LUA_PLAN_PRICER_H
#define LIBPLAN_LUA_PLAN_PRICER_H

#include <lua.h>

typedef struct plan_lua_pricer plan_lua_pricer;

/* The pricer at stack index arg, or NULL when it is something else. */
plan_lua_pricer *plan_lua_topricer(lua_State *L, int arg);
/* The seconds of bringing a tensor of class cls (pr:class) from placement
 * id `from` to id `to` (0 when they are equal), from the memo or priced
 * once; self is the pricer's stack index. Raises on a bad class or id. */
double plan_lua_pricer_price(lua_State *L, plan_lua_pricer *pr, int self,
                             int cls, int from, int to);
/* Registers the pricer's metatable (luaopen_plan). */
void plan_lua_pricer_register(lua_State *L);

#endif
