/* `plan run SCRIPT.lua [ARGS...]`: runs a Lua script with the `plan`
 * module (`local plan = require "plan"`). */
#include <string.h>

#include "cli.h"
#include "lua_host.h"

const char usage_run[] =
    "usage: plan run SCRIPT.lua [ARGS...]\n"
    "\n"
    "Runs a Lua 5.4 script with the standard libraries and the 'plan' module\n"
    "(local plan = require \"plan\"; see docs/lua.md). The script sees its\n"
    "arguments in 'arg' and as '...'. An error raised by the script prints\n"
    "its message with a traceback.\n"
    "Exit: 0 when the script ends, the integer it returns when it returns\n"
    "one, 1 when it raises an error, 2 when it cannot be read or compiled.\n";

int cmd_run(int argc, char **argv) {
  int first = 1;
  if (first < argc && !strcmp(argv[first], "--"))
    first++;
  if (first >= argc)
    return cli_usage("run", "no script given");
  return cli_lua_run(argv[first], NULL, argc - first - 1, argv + first + 1);
}
