/* The plan module's search primitives: an op's legal strategies, its
 * strategy, applying one and undoing it, and the placements of leaves and
 * program outputs. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "libplan/space.h"
#include "plan_module_internal.h"

/* The legal strategies of an op, a list of {in, out}, all-R first. */
static int m_strategies(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  /* a memory error while building frees it */
  plan_lua_box *b = plan_lua_box_new(L, plan_buffer_free);
  plan_op_strategy *list;
  int n;
  if (plan_op_strategies(&list, &n, lp->p, op))
    return plan_lua_fail(L);
  b->ptr = list;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    plan_lua_push_strategy(L, lp->p, op, list[i].in, list[i].out);
    lua_rawseti(L, -2, i + 1);
  }
  plan_lua_box_release(b);
  return 1;
}

/* The op's current strategy, or nil. */
static int m_strategy(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  plan_op_strategy s;
  if (plan_get_strategy(&s, lp->p, op))
    return 0;
  plan_lua_push_strategy(L, lp->p, op, s.in, s.out);
  return 1;
}

/* p:apply(op, {in = ..., out = ...}): sets the op's strategy; undo with
 * p:undo(). The strategy is taken as given (p:validate() judges it). */
static int m_apply(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int op = plan_lua_check_op(L, lp->p, 2);
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  plan_lua_check_strategy(L, lp->p, op, 3, in, out);
  if (lp->nundo == lp->cap_undo) {
    int cap = lp->cap_undo ? 2 * lp->cap_undo : 64;
    undo_entry *u = realloc(lp->undo, sizeof *u * (size_t)cap);
    if (!u)
      return luaL_error(L, "out of memory");
    lp->undo = u;
    lp->cap_undo = cap;
  }
  undo_entry *u = &lp->undo[lp->nundo];
  u->op = op;
  u->had = plan_get_strategy(&u->was, lp->p, op) == PLAN_OK;
  if (plan_set_strategy(lp->p, op, in, out))
    return plan_lua_fail(L);
  lp->nundo++;
  lua_pushboolean(L, 1);
  return 1;
}

static int m_undo(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  if (!lp->nundo) {
    lua_pushboolean(L, 0);
    return 1;
  }
  undo_entry *u = &lp->undo[--lp->nundo];
  if (u->had) {
    if (plan_set_strategy(lp->p, u->op, u->was.in, u->was.out))
      return plan_lua_fail(L);
  } else {
    plan_clear_strategy(lp->p, u->op);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* p:clear_strategy(op): the op has no strategy (not undoable). */
static int m_clear_strategy(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  plan_clear_strategy(lp->p, plan_lua_check_op(L, lp->p, 2));
  return 0;
}

/* The index of tensor t among the program's outputs, -1 when it is none. */
static int output_index(const plan_program *prog, int t) {
  int n = plan_program_output_count(prog);
  for (int k = 0; k < n; k++)
    if (plan_program_output(prog, k) == t)
      return k;
  return -1;
}

/* p:placement(tensor): a leaf's storage placement (or an output's
 * delivered one with p:placement(name, "output")). */
static int m_placement(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int t = plan_lua_check_tensor(L, lp->p, 2);
  const plan_plan *p = lp->p;
  const plan_program *prog = plan_get_program(p);
  plan_placement pl;
  if (plan_program_tensor_producer(prog, t) >= 0) {
    int n = plan_program_output_count(prog);
    for (int k = 0; k < n; k++)
      if (plan_program_output(prog, k) == t &&
          plan_get_output_placement(&pl, p, k) == PLAN_OK) {
        plan_lua_push_placement(L, p, &pl);
        return 1;
      }
    return 0;
  }
  if (plan_get_placement(&pl, p, t))
    return 0;
  plan_lua_push_placement(L, p, &pl);
  return 1;
}

/* p:set_placement(tensor, text | nil): a leaf's storage placement, or a
 * program output's delivered one. */
static int m_set_placement(lua_State *L) {
  lplan *lp = plan_lua_live(L);
  int t = plan_lua_check_tensor(L, lp->p, 2);
  plan_plan *p = lp->p;
  const plan_program *prog = plan_get_program(p);
  plan_placement pl;
  bool has = !lua_isnoneornil(L, 3);
  if (has)
    plan_lua_parse_placement(L, p, luaL_checkstring(L, 3), t, &pl);
  int rc;
  if (plan_program_tensor_producer(prog, t) < 0) {
    rc = plan_set_placement(p, t, has ? &pl : NULL);
  } else {
    int k = output_index(prog, t);
    if (k < 0)
      return luaL_error(L, "'%s' is neither a leaf nor a program output",
                        plan_program_tensor_name(prog, t));
    rc = plan_set_output_placement(p, k, has ? &pl : NULL);
  }
  if (rc)
    return plan_lua_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

const luaL_Reg plan_lua_space_methods[] = {{"strategies", m_strategies},
                                           {"strategy", m_strategy},
                                           {"apply", m_apply},
                                           {"undo", m_undo},
                                           {"clear_strategy", m_clear_strategy},
                                           {"placement", m_placement},
                                           {"set_placement", m_set_placement},
                                           {NULL, NULL}};
