/* Line editing and history for `plan run -i` on a terminal: libedit's
 * readline interface, loaded when the session starts (libedit.so.2), so
 * the tool needs no build dependency and runs where it is missing (then
 * lines are read plainly). History goes to $PLAN_HISTORY, else
 * ~/.plan_history, read at the start and written after every line. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "line_edit.h"

typedef struct line_edit {
  void *lib;
  char *(*readline)(const char *prompt);
  int (*add_history)(const char *line);
  int (*read_history)(const char *path);
  int (*write_history)(const char *path);
  char path[4096]; /* "" when there is no history file */
} line_edit;

#define EDITOR_META "plan.line_edit"

static int editor_gc(lua_State *L) {
  line_edit *e = luaL_checkudata(L, 1, EDITOR_META);
  if (e->lib)
    dlclose(e->lib);
  e->lib = NULL;
  return 0;
}

/* editor:read(prompt): the next line without its newline, or nil at the
 * end of input. */
static int editor_read(lua_State *L) {
  line_edit *e = luaL_checkudata(L, 1, EDITOR_META);
  const char *prompt = luaL_optstring(L, 2, "> ");
  char *line = e->readline(prompt);
  if (!line) {
    lua_pushnil(L);
    return 1;
  }
  if (line[0]) {
    e->add_history(line);
    if (e->path[0])
      e->write_history(e->path);
  }
  lua_pushstring(L, line);
  free(line); /* readline's malloc */
  return 1;
}

static void *sym(void *lib, const char *name) {
  return dlsym(lib, name);
}

int plan_cli_push_line_editor(lua_State *L) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
    return 0;
  void *lib = dlopen("libedit.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return 0;
  line_edit *e = lua_newuserdatauv(L, sizeof *e, 0);
  memset(e, 0, sizeof *e);
  *(void **)&e->readline = sym(lib, "readline");
  *(void **)&e->add_history = sym(lib, "add_history");
  *(void **)&e->read_history = sym(lib, "read_history");
  *(void **)&e->write_history = sym(lib, "write_history");
  if (!e->readline || !e->add_history || !e->read_history ||
      !e->write_history) {
    dlclose(lib);
    lua_pop(L, 1);
    return 0;
  }
  e->lib = lib;
  const char *hist = getenv("PLAN_HISTORY"), *home = getenv("HOME");
  if (hist && hist[0])
    snprintf(e->path, sizeof e->path, "%s", hist);
  else if (home && home[0])
    snprintf(e->path, sizeof e->path, "%s/.plan_history", home);
  if (strlen(e->path) >= sizeof e->path - 1)
    e->path[0] = '\0'; /* cut short: no history rather than another file */
  if (e->path[0])
    e->read_history(e->path); /* none yet is fine */
  if (luaL_newmetatable(L, EDITOR_META)) {
    lua_pushcfunction(L, editor_gc);
    lua_setfield(L, -2, "__gc");
    lua_newtable(L);
    lua_pushcfunction(L, editor_read);
    lua_setfield(L, -2, "read");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  return 1;
}
