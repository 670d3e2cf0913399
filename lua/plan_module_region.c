/* Regions made from a Lua session: p:pin{...} and p:manual{...} add a
 * pinned or a manual region (spec/plan-format.md §4.6) to the plan. The
 * arguments are checked here, so that a mistake is reported at the
 * script's line, in the script's terms (an unknown op with the nearest
 * names, an op without a strategy to keep, a body that does not compile);
 * the region then goes into the plan's own text, which is read again, so
 * that a region made here is saved, hashed, validated, verified and
 * replayed exactly as one written in YAML. A region the plan's checks
 * refuse (an op already in another region) leaves the plan as it was. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/diag.h"
#include "libplan/plan.h"
#include "libplan/space.h"
#include "plan_module_internal.h"

/* ---- names and patterns -------------------------------------------------- */

/* The op names, for did-you-mean (a userdata-free list on the stack is not
 * needed: the names are the program's own, valid while the plan is). */
static void raise_unknown_op(lua_State *L, const plan_plan *p, const char *what,
                             const char *name) {
  const plan_program *prog = plan_get_program(p);
  int n = plan_program_op_count(prog);
  const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0);
  for (int i = 0; i < n; i++)
    names[i] = plan_program_op_name(prog, i);
  char hint[256];
  if (plan_suggest(hint, sizeof hint, name, names, (size_t)n))
    luaL_error(L, "%s: no op '%s'; %s", what, name, hint);
  luaL_error(L, "%s: no op '%s'", what, name);
}

/* Calls fn(op) for each op the pattern names; raises when it names none. */
static void for_pattern(lua_State *L, const plan_plan *p, const char *what,
                        const char *pat, void (*fn)(lua_State *, int, void *),
                        void *ctx) {
  const plan_program *prog = plan_get_program(p);
  if (!plan_name_is_pattern(pat)) {
    int op = plan_program_op_find(prog, pat);
    if (op < 0)
      raise_unknown_op(L, p, what, pat);
    fn(L, op, ctx);
    return;
  }
  int hits = 0;
  for (int i = 0; i < plan_program_op_count(prog); i++)
    if (plan_name_match(pat, plan_program_op_name(prog, i))) {
      fn(L, i, ctx);
      hits++;
    }
  if (!hits)
    luaL_error(L, "%s: the pattern '%s' matches no op", what, pat);
}

/* ---- the region's text, in pieces --------------------------------------- */

/* The region's YAML is gathered as strings in a table (at stack index
 * `acc`), so that the checks between the pieces may use the stack freely. */
static void put(lua_State *L, int acc, const char *s) {
  lua_pushstring(L, s);
  lua_rawseti(L, acc, (lua_Integer)luaL_len(L, acc) + 1);
}

/* s as a YAML double-quoted scalar, into the pieces. */
static void put_quoted(lua_State *L, int acc, const char *s, size_t len) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '"');
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, (char)c);
    } else if (c == '\n') {
      luaL_addstring(&b, "\\n");
    } else if (c == '\t') {
      luaL_addstring(&b, "\\t");
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\x%02x", c);
      luaL_addstring(&b, esc);
    } else {
      luaL_addchar(&b, (char)c);
    }
  }
  luaL_addchar(&b, '"');
  luaL_pushresult(&b);
  lua_rawseti(L, acc, (lua_Integer)luaL_len(L, acc) + 1);
}

static void put_qstring(lua_State *L, int acc, const char *s) {
  put_quoted(L, acc, s, strlen(s));
}

/* The pieces, joined, on the stack. */
static void push_joined(lua_State *L, int acc) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_Integer n = luaL_len(L, acc);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, acc, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
}

/* The keys of the table at `tab` (strings, else raises), sorted, as a list
 * on the stack. */
static void push_sorted_keys(lua_State *L, int tab, const char *what,
                             const char *field, const char *of) {
  lua_newtable(L);
  int keys = lua_gettop(L);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, tab)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: the keys of '%s' are %s", what, field, of);
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, ++n);
  }
  /* insertion sort: the lists are short, and no library is assumed */
  for (lua_Integer i = 2; i <= n; i++)
    for (lua_Integer j = i; j > 1; j--) {
      lua_rawgeti(L, keys, j - 1);
      lua_rawgeti(L, keys, j);
      if (strcmp(lua_tostring(L, -2), lua_tostring(L, -1)) <= 0) {
        lua_pop(L, 2);
        break;
      }
      lua_rawseti(L, keys, j - 1);
      lua_rawseti(L, keys, j);
    }
}

/* `ops` of the argument table (a name or pattern, or a list of them) as a
 * flow list in the pieces; fn is called for each op they name. */
static void put_ops(lua_State *L, int acc, const plan_plan *p, const char *what,
                    void (*fn)(lua_State *, int, void *), void *ctx) {
  int top = lua_gettop(L);
  lua_getfield(L, 1, "ops");
  if (lua_type(L, -1) == LUA_TSTRING) {
    lua_createtable(L, 1, 0);
    lua_insert(L, -2);
    lua_rawseti(L, -2, 1);
  }
  if (!lua_istable(L, -1) || luaL_len(L, -1) < 1)
    luaL_error(L, "%s: 'ops' must be an op name or pattern, or a list of them",
               what);
  int list = lua_gettop(L);
  lua_Integer n = luaL_len(L, list);
  put(L, acc, ", ops: [");
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: ops[%d] is not a string", what, (int)i);
    const char *pat = lua_tostring(L, -1);
    for_pattern(L, p, what, pat, fn, ctx);
    if (i > 1)
      put(L, acc, ", ");
    put_qstring(L, acc, pat);
    lua_pop(L, 1);
  }
  put(L, acc, "]");
  lua_settop(L, top);
}

/* `name` of the argument table: a non-empty string, or NULL when absent
 * (the argument table holds it). */
static const char *opt_name(lua_State *L, const char *what) {
  const char *name = NULL;
  if (lua_getfield(L, 1, "name") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING || !lua_tostring(L, -1)[0])
      luaL_error(L, "%s: 'name' must be a non-empty string", what);
    name = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return name;
}

/* ---- splicing and reading again ------------------------------------------ */

/* Where the plan text's top-level `regions:` line starts, or NULL. */
static const char *regions_section(const char *text) {
  if (!strncmp(text, "regions:\n", 9))
    return text;
  const char *s = strstr(text, "\nregions:\n");
  return s ? s + 1 : NULL;
}

/* The end of the section starting at sec: the next line that starts in
 * column 0 (or the end). */
static const char *section_end(const char *sec, const char *end) {
  const char *s = strchr(sec, '\n');
  s = s ? s + 1 : end;
  while (s < end && (*s == ' ' || *s == '\n')) {
    const char *nl = strchr(s, '\n');
    s = nl ? nl + 1 : end;
  }
  return s;
}

/* A name "pinned-N" no region of the text has yet, on the stack. */
static void push_free_name(lua_State *L, const char *text, const char *prefix) {
  for (int k = 1;; k++) {
    lua_pushfstring(L, "name: %s-%d\n", prefix, k);
    lua_pushfstring(L, "name: \"%s-%d\"", prefix, k);
    lua_pushfstring(L, "name: %s-%d,", prefix, k);
    bool used = strstr(text, lua_tostring(L, -1)) ||
                strstr(text, lua_tostring(L, -2)) ||
                strstr(text, lua_tostring(L, -3));
    lua_pop(L, 3);
    if (!used) {
      lua_pushfstring(L, "%s-%d", prefix, k);
      return;
    }
  }
}

/* The region findings (errors) of a plan's validation, as a set of
 * messages on the stack. */
static void push_region_findings(lua_State *L, const plan_plan *p) {
  lua_newtable(L);
  plan_diags *d = NULL;
  if (plan_validate(&d, p) != PLAN_OK || !d)
    return;
  plan_lua_box *b = plan_lua_box_new(L, (void (*)(void *))plan_diags_free);
  b->ptr = d;
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (g->severity == PLAN_SEV_ERROR && !strncmp(g->code, "region.", 7)) {
      lua_pushstring(L, g->message);
      lua_pushboolean(L, 1);
      lua_rawset(L, -4);
    }
  }
  plan_lua_box_release(b);
  lua_pop(L, 1);
}

/* Adds the region whose pieces are at `acc` (the name left out when
 * `name` is NULL: "PREFIX-N" then) to lp's plan: the plan's text with the
 * region at the end of its regions, read again as the plan was. Raises,
 * with the plan as it was, when it does not read or when validation finds
 * a region error it did not find before. */
static void add_region(lua_State *L, lplan *lp, const char *what, int acc,
                       const char *name, const char *prefix) {
  int top = lua_gettop(L);
  push_region_findings(L, lp->p);
  int before = lua_gettop(L);
  plan_lua_box *tb = plan_lua_box_new(L, free);
  char *text;
  size_t len;
  if (plan_write_buffer(&text, &len, lp->p, NULL))
    luaL_error(L, "%s: %s", what, plan_error_last()->message);
  tb->ptr = text;
  /* the entry: "  - {name: N" and the pieces */
  lua_newtable(L);
  int entry = lua_gettop(L);
  put(L, entry, "  - {name: ");
  if (name) {
    put_qstring(L, entry, name);
  } else {
    push_free_name(L, text, prefix);
    put_qstring(L, entry, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  push_joined(L, acc);
  lua_rawseti(L, entry, (lua_Integer)luaL_len(L, entry) + 1);
  put(L, entry, "}\n");
  const char *sec = regions_section(text);
  const char *end = sec ? section_end(sec, text + len) : text + len;
  lua_newtable(L);
  int doc = lua_gettop(L);
  lua_pushlstring(L, text, (size_t)(end - text));
  lua_rawseti(L, doc, 1);
  put(L, doc, (end > text && end[-1] != '\n') ? "\n" : "");
  put(L, doc, sec ? "" : "regions:\n");
  push_joined(L, entry);
  lua_rawseti(L, doc, 4);
  lua_pushlstring(L, end, len - (size_t)(end - text));
  lua_rawseti(L, doc, 5);
  push_joined(L, doc);
  plan_lua_box_release(tb);
  size_t nlen;
  const char *ntext = lua_tolstring(L, -1, &nlen);
  plan_lua_box *pb = plan_lua_box_new(L, (void (*)(void *))plan_free);
  plan_plan *np = NULL;
  const char *file = plan_file(lp->p);
  int rc = plan_load_buffer_root(
      &np, ntext, nlen, file && file[0] ? file : "<plan>",
      lp->base_dir ? lp->base_dir : ".", lp->any_root ? "/" : NULL, NULL);
  pb->ptr = np;
  if (rc) /* the message alone: its position is in text no one wrote */
    luaL_error(L, "%s: %s", what, plan_error_last()->message);
  push_region_findings(L, np);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, before) == LUA_TNIL)
      luaL_error(L, "%s: %s", what, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  pb->ptr = NULL; /* the new plan changes hands */
  plan_free(lp->p);
  lp->p = np;
  plan_cost_model_free(lp->cost); /* made again for the new plan */
  lp->cost = NULL;
  free(lp->cost_profile);
  lp->cost_profile = NULL;
  lua_settop(L, top);
}

/* ---- p:pin --------------------------------------------------------------- */

typedef struct pin_ctx {
  lplan *lp;
  int strategy; /* stack index of the strategy to apply */
  const char *what;
} pin_ctx;

/* Sets op's strategy as p:apply does, kept on the undo stack (so that a
 * refused pin takes it back). */
static void pin_apply(lua_State *L, int op, void *ctx) {
  pin_ctx *c = ctx;
  lplan *lp = c->lp;
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_lua_check_strategy(L, lp->p, op, c->strategy, in, out);
  if (lp->nundo == lp->cap_undo) {
    int cap = lp->cap_undo ? 2 * lp->cap_undo : 64;
    undo_entry *u = realloc(lp->undo, sizeof *u * (size_t)cap);
    if (!u)
      luaL_error(L, "out of memory");
    lp->undo = u;
    lp->cap_undo = cap;
  }
  undo_entry *u = &lp->undo[lp->nundo];
  u->op = op;
  u->had = plan_get_strategy(&u->was, lp->p, op) == PLAN_OK;
  if (plan_set_strategy(lp->p, op, in, out))
    luaL_error(L, "%s: %s", c->what, plan_error_last()->message);
  lp->nundo++;
}

/* Takes back the strategies set since undo entry `mark`. */
static void undo_to(lplan *lp, int mark) {
  while (lp->nundo > mark) {
    undo_entry *u = &lp->undo[--lp->nundo];
    if (!u->had || plan_set_strategy(lp->p, u->op, u->was.in, u->was.out))
      plan_clear_strategy(lp->p, u->op);
  }
}

typedef struct add_args {
  lplan *lp;
  const char *what, *name, *prefix;
} add_args;

/* add_region in protected mode: the add_args at 1, the pieces at 2. */
static int add_protected(lua_State *L) {
  add_args *a = lua_touserdata(L, 1);
  add_region(L, a->lp, a->what, 2, a->name, a->prefix);
  return 0;
}

/* A pinned op must have a strategy for the region to keep. */
static void pin_check(lua_State *L, int op, void *ctx) {
  pin_ctx *c = ctx;
  plan_op_strategy s;
  if (plan_get_strategy(&s, c->lp->p, op) != PLAN_OK)
    luaL_error(L,
               "%s: op '%s' has no strategy to keep (give it one with "
               "strategies = {[op] = {in = {...}, out = {...}}}, or p:apply)",
               c->what, plan_program_op_name(plan_get_program(c->lp->p), op));
}

/* p:pin{ops = NAMES, strategies = {[op or pattern] = strategy}, name =
 * NAME}: sets the strategies given (in the order of their keys), then pins
 * the ops to theirs. */
static int m_pin(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const char *what = "pin";
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_rotate(L, 1, 1); /* the argument at 1, the plan at 2 (kept alive) */
  pin_ctx c = {lp, 0, what};
  int mark = lp->nundo;
  int t = lua_gettop(L);
  int kind = lua_getfield(L, 1, "strategies");
  if (kind == LUA_TTABLE) {
    int st = lua_gettop(L);
    push_sorted_keys(L, st, what, "strategies", "op names or patterns");
    int keys = lua_gettop(L);
    for (lua_Integer k = 1; k <= luaL_len(L, keys); k++) {
      lua_rawgeti(L, keys, k);
      const char *pat = lua_tostring(L, -1);
      lua_pushvalue(L, -1);
      lua_rawget(L, st);
      c.strategy = lua_gettop(L);
      for_pattern(L, lp->p, what, pat, pin_apply, &c);
      lua_pop(L, 2);
    }
  } else if (kind != LUA_TNIL) {
    luaL_error(L, "%s: 'strategies' must be a table {[op] = strategy}", what);
  }
  lua_settop(L, t);
  const char *name = opt_name(L, what);
  lua_newtable(L);
  int acc = lua_gettop(L);
  put(L, acc, ", kind: pinned");
  put_ops(L, acc, lp->p, what, pin_check, &c);
  add_args a = {lp, what, name, "pinned"};
  lua_pushcfunction(L, add_protected);
  lua_pushlightuserdata(L, &a);
  lua_pushvalue(L, acc);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    undo_to(lp, mark); /* the plan as it was: its strategies too */
    luaL_where(L, 1);  /* the script's line, as a raise from here has */
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- p:manual ------------------------------------------------------------ */

static void no_check(lua_State *L, int op, void *ctx) {
  (void)L;
  (void)op;
  (void)ctx;
}

/* The boundary placements at field `key` ({tensor = placement}), each
 * checked, in the order of the tensor names, into the pieces. */
static void put_boundary(lua_State *L, int acc, const plan_plan *p,
                         const char *what, const char *key) {
  int top = lua_gettop(L);
  int kind = lua_getfield(L, 1, key);
  if (kind == LUA_TNIL) {
    lua_settop(L, top);
    return;
  }
  if (kind != LUA_TTABLE)
    luaL_error(L, "%s: '%s' must be a table {tensor = placement}", what, key);
  int tab = lua_gettop(L);
  push_sorted_keys(L, tab, what, key, "tensor names");
  int keys = lua_gettop(L);
  put(L, acc, ", ");
  put(L, acc, key);
  put(L, acc, ": {");
  const plan_program *prog = plan_get_program(p);
  for (lua_Integer k = 1; k <= luaL_len(L, keys); k++) {
    lua_rawgeti(L, keys, k);
    const char *tname = lua_tostring(L, -1);
    int ti = plan_program_tensor_find(prog, tname);
    if (ti < 0) {
      int n = plan_program_tensor_count(prog);
      const char **names =
          lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0);
      for (int i = 0; i < n; i++)
        names[i] = plan_program_tensor_name(prog, i);
      char hint[256] = "";
      if (plan_suggest(hint + 2, sizeof hint - 2, tname, names, (size_t)n))
        memcpy(hint, "; ", 2);
      luaL_error(L, "%s: %s: no tensor '%s'%s", what, key, tname, hint);
    }
    lua_pushvalue(L, -1);
    lua_rawget(L, tab);
    const char *pl =
        lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!pl)
      luaL_error(L, "%s: %s['%s'] is not a placement string", what, key, tname);
    plan_placement parsed;
    if (plan_placement_for_tensor(&parsed, p, ti, pl))
      luaL_error(L, "%s: %s['%s']: %s", what, key, tname,
                 plan_error_last()->message);
    if (k > 1)
      put(L, acc, ", ");
    put_qstring(L, acc, tname);
    put(L, acc, ": ");
    put_qstring(L, acc, pl);
    lua_pop(L, 2);
  }
  put(L, acc, "}");
  lua_settop(L, top);
}

/* p:manual{name = NAME, ops = NAMES, inputs = {t = pl}, outputs = {t =
 * pl}, body = LUA}: a manual region; the body is compiled here (not run:
 * it runs at lowering, in the sandbox) so that a syntax error is the
 * script's. */
static int m_manual(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  const char *what = "manual";
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_rotate(L, 1, 1);
  const char *name = opt_name(L, what);
  if (!name)
    luaL_error(L, "%s: the region needs a 'name'", what);
  if (lua_getfield(L, 1, "body") != LUA_TSTRING)
    luaL_error(L, "%s: region '%s' needs a Lua 'body' (a string)", what, name);
  size_t blen;
  const char *body = lua_tolstring(L, -1, &blen);
  /* a body reads as a YAML block scalar does: ending in one newline */
  if (!blen || body[blen - 1] != '\n') {
    lua_pushfstring(L, "%s\n", body);
    lua_replace(L, -2);
    body = lua_tolstring(L, -1, &blen);
  }
  lua_pushfstring(L, "=manual region '%s', body line", name);
  if (luaL_loadbufferx(L, body, blen, lua_tostring(L, -1), "t") != LUA_OK)
    luaL_error(L, "%s", lua_tostring(L, -1));
  lua_pop(L, 2);
  lua_newtable(L);
  int acc = lua_gettop(L);
  put(L, acc, ", kind: manual");
  put_ops(L, acc, lp->p, what, no_check, NULL);
  put_boundary(L, acc, lp->p, what, "inputs");
  put_boundary(L, acc, lp->p, what, "outputs");
  put(L, acc, ", body: ");
  put_quoted(L, acc, body, blen);
  add_region(L, lp, what, acc, name, "manual");
  lua_pushboolean(L, 1);
  return 1;
}

const luaL_Reg plan_lua_region_methods[] = {
    {"pin", m_pin}, {"manual", m_manual}, {NULL, NULL}};
