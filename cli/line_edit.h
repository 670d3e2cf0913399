/* Line editing and history for `plan run -i` (line_edit.c). */
#ifndef PLAN_CLI_LINE_EDIT_H
#define PLAN_CLI_LINE_EDIT_H

#include <lua.h>

/* On a terminal with libedit installed, pushes a line editor (a value
 * with :read(prompt), history kept) and returns 1; else pushes nothing
 * and returns 0. */
int plan_cli_push_line_editor(lua_State *L);

#endif
