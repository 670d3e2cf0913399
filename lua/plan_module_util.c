/* The helpers the plan module's files share (plan_module_internal.h): the
 * box that holds C memory across calls that can raise, the plan userdata
 * and the argument checks and pushes of its methods. */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "plan_module_internal.h"

#define BOX_MT "libplan.box"

plan_lua_box *plan_lua_box_new(lua_State *L, void (*release)(void *)) {
  plan_lua_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ptr = NULL;
  b->release = release;
  luaL_setmetatable(L, BOX_MT);
  return b;
}

/* Releases the boxed object now (the box stays, empty). */
void plan_lua_box_release(plan_lua_box *b) {
  if (b->ptr && b->release)
    b->release(b->ptr);
  b->ptr = NULL;
}

static int box_gc(lua_State *L) {
  plan_lua_box_release(luaL_checkudata(L, 1, BOX_MT));
  return 0;
}

void plan_lua_box_register(lua_State *L) {
  luaL_newmetatable(L, BOX_MT);
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
}

lplan *plan_lua_toplan(lua_State *L, int arg) {
  return luaL_checkudata(L, arg, PLAN_MT);
}

/* nil, message from the thread's last error; returns 2. */
int plan_lua_fail(lua_State *L) {
  char buf[1024];
  lua_pushnil(L);
  lua_pushstring(L, plan_error_format(buf, sizeof buf));
  return 2;
}

lplan *plan_lua_live(lua_State *L) {
  lplan *lp = plan_lua_toplan(L, 1);
  if (!lp->p)
    luaL_error(L, "the plan is closed");
  return lp;
}

/* A new empty plan userdata on the stack (filled by the caller). */
lplan *plan_lua_new_plan(lua_State *L) {
  lplan *lp = lua_newuserdatauv(L, sizeof *lp, 0);
  memset(lp, 0, sizeof *lp);
  luaL_setmetatable(L, PLAN_MT);
  return lp;
}

void plan_lua_set_base(lua_State *L, lplan *lp, const char *dir) {
  size_t n = strlen(dir);
  char *copy = malloc(n + 1);
  if (!copy)
    luaL_error(L, "out of memory");
  memcpy(copy, dir, n + 1);
  free(lp->base_dir);
  lp->base_dir = copy;
}

/* The op at argument `arg`: a name or a 1-based index. */
int plan_lua_check_op(lua_State *L, const plan_plan *p, int arg) {
  const plan_program *prog = plan_get_program(p);
  if (lua_type(L, arg) == LUA_TNUMBER) {
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || i > plan_program_op_count(prog))
      luaL_argerror(L, arg, "no op with that index");
    return (int)i - 1;
  }
  const char *name = luaL_checkstring(L, arg);
  int op = plan_program_op_find(prog, name);
  if (op < 0)
    luaL_error(L, "no op '%s'", name);
  return op;
}

int plan_lua_check_tensor(lua_State *L, const plan_plan *p, int arg) {
  const char *name = luaL_checkstring(L, arg);
  int t = plan_program_tensor_find(plan_get_program(p), name);
  if (t < 0)
    luaL_error(L, "no tensor '%s'", name);
  return t;
}

/* Shard ratios as their weights (S(0|3:1)R), the spelling that reads
 * back; a long weight list is built on the heap. */
void plan_lua_push_placement(lua_State *L, const plan_plan *p,
                             const plan_placement *pl) {
  char buf[PLAN_PLACEMENT_STRLEN];
  if (!p) {
    plan_placement_format_text(buf, sizeof buf, pl);
    lua_pushstring(L, buf);
    return;
  }
  if (plan_placement_format_in(buf, sizeof buf, p, pl) != PLAN_ELIMIT) {
    lua_pushstring(L, buf);
    return;
  }
  size_t size = sizeof buf;
  for (;;) {
    size *= 4;
    char *big = lua_newuserdatauv(L, size, 0);
    if (plan_placement_format_in(big, size, p, pl) != PLAN_ELIMIT) {
      lua_pushstring(L, big);
      lua_remove(L, -2);
      return;
    }
    lua_pop(L, 1);
  }
}

/* Parses placement text for tensor `tensor`, new shard ratios added to
 * p's sets; raises on error. */
void plan_lua_parse_placement(lua_State *L, plan_plan *p, const char *text,
                              int tensor, plan_placement *out) {
  if (plan_placement_for_tensor_in(out, p, tensor, text))
    luaL_error(L, "%s", plan_error_last()->message);
}

/* {in = {...}, out = {...}} of placement strings. */
void plan_lua_push_strategy(lua_State *L, const plan_plan *p, int op,
                            const plan_placement *in,
                            const plan_placement *out) {
  const plan_program *prog = plan_get_program(p);
  int nin = plan_program_op_input_count(prog, op);
  int nout = plan_program_op_output_count(prog, op);
  lua_createtable(L, 0, 2);
  lua_createtable(L, nin, 0);
  for (int j = 0; j < nin; j++) {
    plan_lua_push_placement(L, p, &in[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "in");
  lua_createtable(L, nout, 0);
  for (int k = 0; k < nout; k++) {
    plan_lua_push_placement(L, p, &out[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "out");
}

/* Reads a strategy table at `arg` for op `op` into in/out; raises on
 * error. */
void plan_lua_check_strategy(lua_State *L, plan_plan *p, int op, int arg,
                             plan_placement *in, plan_placement *out) {
  const plan_program *prog = plan_get_program(p);
  const char *name = plan_program_op_name(prog, op);
  luaL_checktype(L, arg, LUA_TTABLE);
  for (int side = 0; side < 2; side++) {
    int n = side ? plan_program_op_output_count(prog, op)
                 : plan_program_op_input_count(prog, op);
    if (lua_getfield(L, arg, side ? "out" : "in") != LUA_TTABLE)
      luaL_error(L,
                 "op '%s': the strategy needs '%s', a list of %d "
                 "placements",
                 name, side ? "out" : "in", n);
    if ((int)luaL_len(L, -1) != n)
      luaL_error(L, "op '%s': '%s' has %d placements, the op %d", name,
                 side ? "out" : "in", (int)luaL_len(L, -1), n);
    for (int j = 0; j < n; j++) {
      lua_rawgeti(L, -1, j + 1);
      const char *text = lua_tostring(L, -1);
      if (!text)
        luaL_error(L, "op '%s': placement %d of '%s' is not a string", name,
                   j + 1, side ? "out" : "in");
      int t = side ? plan_program_op_output(prog, op, j)
                   : plan_program_op_input(prog, op, j);
      plan_lua_parse_placement(L, p, text, t, side ? &out[j] : &in[j]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* A list of the names of op `op`'s inputs (output 0) or outputs (1). */
void plan_lua_push_operands(lua_State *L, const plan_program *prog, int op,
                            int output) {
  int n = output ? plan_program_op_output_count(prog, op)
                 : plan_program_op_input_count(prog, op);
  lua_createtable(L, n, 0);
  for (int j = 0; j < n; j++) {
    int t = output ? plan_program_op_output(prog, op, j)
                   : plan_program_op_input(prog, op, j);
    lua_pushstring(L, plan_program_tensor_name(prog, t));
    lua_rawseti(L, -2, j + 1);
  }
}
