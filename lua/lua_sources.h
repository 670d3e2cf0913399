/* The Lua sources the tool and plan.so carry (generated from the .lua
 * files of lua/ and lua/strategies/ by scripts/embed_lua.py): the search
 * driver and the built-in strategies, by name ("search",
 * "strategies/greedy"). */
#ifndef LIBPLAN_LUA_SOURCES_H
#define LIBPLAN_LUA_SOURCES_H

typedef struct plan_lua_source {
  const char *name;
  const char *text;
} plan_lua_source;

/* Ends with {NULL, NULL}. */
extern const plan_lua_source plan_lua_sources[];

#endif
