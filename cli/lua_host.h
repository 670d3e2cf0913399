/* The tool's Lua host: a state with the standard libraries and the `plan`
 * module preloaded, scripts run under a traceback handler. Used by
 * `plan run` and `plan search`. */
#ifndef PLAN_CLI_LUA_HOST_H
#define PLAN_CLI_LUA_HOST_H

/* Runs a Lua chunk: the file `script` (when text is NULL) or the embedded
 * source `text` named `name`, with the global `arg` = {[0] = name,
 * args...}. Returns EXIT_OK; EXIT_BAD_INPUT when the chunk cannot be read
 * or does not compile; EXIT_NEGATIVE when it raises (the traceback on
 * stderr); or the integer the chunk returns, when it returns one. */
int cli_lua_run(const char *name, const char *text, int argc,
                char *const *argv);

#endif
