/* libplan's Lua host: a state of its own per run, with the standard
 * libraries and the `plan` module preloaded, code called under a
 * traceback handler. Shared by the search API (search_api.c) and the plan
 * tool's `plan run`; it prints nothing. */
#ifndef LIBPLAN_LUA_HOST_H
#define LIBPLAN_LUA_HOST_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

/* Opens the standard libraries (`debug` only when with_debug) and preloads
 * the plan module, so that require "plan" finds it. Raises on a memory
 * error: call it in protected mode (plan_lua_host_run's body). */
void plan_lua_host_open(lua_State *L, bool with_debug);

/* The message handler: the error object as text, with a traceback; a
 * refusal ({unsupported = "why"}, raised by util.refuse: the work cannot
 * be done here, as a size limit says) is passed on as it is. */
int plan_lua_host_traceback(lua_State *L);

/* lua_pcall of the function below its nargs arguments, under the
 * traceback handler (which is removed again): on an error, the message
 * with its traceback is on the top. */
int plan_lua_host_pcall(lua_State *L, int nargs, int nresults);

/* The error object on the top as text (never NULL: an object that is not
 * a string is named as such; a refusal's reason). */
const char *plan_lua_host_message(lua_State *L);

/* Whether the error object on the top is a refusal. */
bool plan_lua_host_refused(lua_State *L);

#define PLAN_LUA_HOST_NOSTATE (-1)

/* Makes a state, runs body(L) in protected mode with `ud` as its one
 * argument (a light userdata) and closes the state: the state never
 * outlives the call. Returns LUA_OK, or the status of an error body did not
 * catch, with its message copied into msg (size msgsize; msg may be NULL);
 * PLAN_LUA_HOST_NOSTATE when no state can be made (out of memory). */
int plan_lua_host_run(lua_CFunction body, void *ud, char *msg, size_t msgsize);

/* The same in the state L, made by the caller (NULL: none could be made),
 * closed here. */
int plan_lua_host_run_in(lua_State *L, lua_CFunction body, void *ud, char *msg,
                         size_t msgsize);

#endif
