/* The `plan` Lua module (luaopen_plan): the module table (loading,
 * parsing and making plans, hashing text, the embedded Lua sources) and
 * the plan userdata's metatable, whose methods live in plan_module_*.c:
 * the userdata itself (plan), the search primitives (space), costs (cost),
 * checks (verify) and provenance. Linked into the `plan` tool (`plan run`,
 * `plan search`) and built as plan.so for a stock lua5.4. The habits its
 * files keep: plan_module_internal.h. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/diag.h"
#include "libplan/plan.h"
#include "lua_sources.h"
#include "plan_dp.h"
#include "plan_milp.h"
#include "plan_module.h"
#include "plan_module_internal.h"
#include "plan_pricer.h"

static int l_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lplan *lp = plan_lua_new_plan(L);
  /* the folder of the file, as plan_load resolves its program path */
  const char *slash = strrchr(path, '/');
  if (!slash)
    plan_lua_set_base(L, lp, ".");
  else if (slash == path)
    plan_lua_set_base(L, lp, "/");
  else {
    lua_pushlstring(L, path, (size_t)(slash - path));
    plan_lua_set_base(L, lp, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  if (plan_load(&lp->p, path))
    return plan_lua_fail(L);
  return 1;
}

static int l_parse(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "<string>");
  const char *base = luaL_optstring(L, 3, ".");
  lplan *lp = plan_lua_new_plan(L);
  plan_lua_set_base(L, lp, base);
  if (plan_load_buffer(&lp->p, text, len, name, base))
    return plan_lua_fail(L);
  return 1;
}

/* Whether a mesh shape ("dp=2,tp=4") holds only what a shape may: names,
 * sizes, '=' and ','; the plan reader then judges it (with a position), and
 * nothing in it can add YAML structure. */
static bool mesh_shape_ok(const char *s) {
  for (; *s; s++)
    if (!(*s == '_' || *s == '=' || *s == ',' || *s == ' ' ||
          (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

/* plan.new{program = PATH, mesh = "dp=2,tp=4"}: an empty plan for a
 * program file on a mesh (no decisions yet). */
static int l_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "program");
  const char *prog = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "mesh");
  const char *mesh = luaL_checkstring(L, -1);
  if (!mesh[0] || !mesh_shape_ok(mesh)) {
    lua_pushnil(L);
    lua_pushfstring(L, "plan.new: mesh '%s' is not NAME=SIZE[,NAME=SIZE...]",
                    mesh);
    return 2;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "libplan: \"" PLAN_FORMAT_BASE_STRING
                     "\"\nprogram: {path: \"");
  for (const char *s = prog; *s; s++) { /* a YAML double-quoted string */
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, (char)c);
    } else if (c < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\x%02x", c);
      luaL_addstring(&b, esc);
    } else {
      luaL_addchar(&b, (char)c);
    }
  }
  luaL_addstring(&b, "\"}\nmesh: {axes: [");
  for (const char *s = mesh; *s; s++) /* "dp=2,tp=4" -> dp=2, tp=4 */
    if (*s == ',')
      luaL_addstring(&b, ", ");
    else
      luaL_addchar(&b, *s);
  luaL_addstring(&b, "]}\n");
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  lplan *lp = plan_lua_new_plan(L);
  plan_lua_set_base(L, lp, ".");
  lp->any_root = true;
  /* the program path is the caller's own argument, not a file's content:
   * any folder may hold it */
  if (plan_load_buffer_root(&lp->p, text, len, "<plan.new>", ".", "/", NULL)) {
    const plan_error *e = plan_error_last();
    if (strcmp(e->file, "<plan.new>"))
      return plan_lua_fail(L); /* about the program file: its position */
    /* about the arguments: at the caller's line, not in the text made of
     * them */
    lua_pushnil(L);
    luaL_where(L, 1);
    lua_pushfstring(L, "plan.new: %s", e->message);
    lua_concat(L, 2);
    return 2;
  }
  return 1;
}

/* plan.hash_text(s): "xxh3:<32 hex>" of a string (a strategy script's
 * hash in provenance). */
static int l_hash_text(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  XXH128_hash_t h = XXH3_128bits(s, len);
  plan_hash ph = {h.high64, h.low64};
  char buf[64];
  lua_pushstring(L, plan_hash_format(ph, buf));
  return 1;
}

/* plan.source(name): the text of an embedded Lua source ("search",
 * "strategies/greedy"), or nil; plan.source() lists their names. */
static int l_source(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_newtable(L);
    for (int i = 0; plan_lua_sources[i].name; i++) {
      lua_pushstring(L, plan_lua_sources[i].name);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  const char *name = luaL_checkstring(L, 1);
  for (int i = 0; plan_lua_sources[i].name; i++)
    if (!strcmp(plan_lua_sources[i].name, name)) {
      lua_pushstring(L, plan_lua_sources[i].text);
      return 1;
    }
  return 0;
}

/* plan.suggest(word, names): "did you mean 'a'?" (or "'a' or 'b'") for the
 * one or two names nearest to word (plan_suggest), or nil. */
static int l_suggest(lua_State *L) {
  const char *word = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 2);
  if (n > 100000)
    n = 100000;
  const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0);
  int kept = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    if (lua_type(L, -1) == LUA_TSTRING) /* the table keeps the string */
      names[kept++] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  char buf[512];
  if (!plan_suggest(buf, sizeof buf, word, names, (size_t)kept))
    return 0;
  lua_pushstring(L, buf);
  return 1;
}

static const luaL_Reg module_fns[] = {
    {"load", l_load},     {"parse", l_parse},
    {"new", l_new},       {"hash_text", l_hash_text},
    {"source", l_source}, {"suggest", l_suggest},
    {NULL, NULL}};

/* The box's metatable and the plan's, its methods gathered from the files
 * that make them. */
static void createmeta(lua_State *L) {
  static const luaL_Reg *const methods[] = {
      plan_lua_plan_methods,       plan_lua_space_methods,
      plan_lua_cost_methods,       plan_lua_verify_methods,
      plan_lua_provenance_methods, plan_lua_region_methods,
      plan_lua_hetero_methods,     plan_lua_pricer_methods};
  plan_lua_box_register(L);
  luaL_newmetatable(L, PLAN_MT);
  luaL_setfuncs(L, plan_lua_plan_meta, 0);
  lua_createtable(L, 0, 32);
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
    luaL_setfuncs(L, methods[i], 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

int luaopen_plan(lua_State *L) {
  luaL_newlib(L, module_fns);
  createmeta(L);
  lua_pushstring(L, plan_version_string());
  lua_setfield(L, -2, "version");
  plan_milp_register(L);
  plan_dp_register(L);
  plan_lua_pricer_register(L);
  return 1;
}
