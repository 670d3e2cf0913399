/* Manual regions' bodies run as sandboxed Lua (region_trace.c): the
 * tracer the plan tool and the Lua module hand to plan_verify_traced. */
#ifndef LIBPLAN_LUA_REGION_TRACE_H
#define LIBPLAN_LUA_REGION_TRACE_H

#include "libplan/trace.h"

/* A plan_region_tracer: runs plan_trace_region(t)'s body (user unused). */
int plan_lua_trace_region(void *user, plan_trace *t);

#endif
