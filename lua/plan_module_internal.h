/* What the files of the plan Lua module share (lua/plan_module*.c): the
 * plan userdata, the box that holds C memory across calls that can raise,
 * the argument checks and pushes of the plan's methods, and each file's
 * method table. The module uses the public API alone (the libplan headers;
 * `make check-lua-public`).
 *
 * Habits (Lua's own libraries): recoverable failures come back as
 * nil, message; misuse raises an error with the caller's position. A Lua
 * error is a longjmp, so nothing malloc'd is held in a C local across a
 * call that can raise: memory lives in a userdata with __gc (a box, or
 * the plan userdata), or is freed before the first call that can raise. */
#ifndef LIBPLAN_LUA_PLAN_MODULE_INTERNAL_H
#define LIBPLAN_LUA_PLAN_MODULE_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "libplan/cost.h"
#include "libplan/plan.h"
#include "libplan/space.h"

#define PLAN_MT "libplan.plan"

/* One applied strategy, for undo: what the op had before. */
typedef struct undo_entry {
  int op;
  bool had;
  plan_op_strategy was;
} undo_entry;

/* The plan userdata: everything it holds is freed by its __gc. */
typedef struct lplan {
  plan_plan *p;
  undo_entry *undo;
  int nundo, cap_undo;
  plan_cost_model *cost; /* made on first use, for the plan's hardware */
  char *cost_profile;
  /* cost evaluations made through this plan (p:stats()) */
  lua_Integer n_cost_op, n_cost_redist, n_cost_plan;
  /* where the plan was read from, to read it again with a region added
   * (plan_module_region.c): the folder its program path is resolved
   * against (malloc'd; NULL: "."), and whether any folder may hold that
   * program (plan.new: the path is the caller's own) */
  char *base_dir;
  bool any_root;
} lplan;

/* ---- the box ------------------------------------------------------------- */

/* A C object boxed in a userdata on the stack, released by the box's
 * __gc (or __close) with its own free function: C memory that must outlive
 * calls that can raise. The box is made empty, before the object exists,
 * and the object goes into it as soon as the C call that makes it returns:
 * the only calls that can raise (making the box, then pushing results)
 * come before the object exists or while the box holds it. */
typedef struct plan_lua_box {
  void *ptr;
  void (*release)(void *);
} plan_lua_box;

/* A new empty box on the stack. */
plan_lua_box *plan_lua_box_new(lua_State *L, void (*release)(void *));
/* Releases the boxed object now (the box stays, empty). */
void plan_lua_box_release(plan_lua_box *b);
/* Registers the box's metatable (luaopen_plan). */
void plan_lua_box_register(lua_State *L);

/* ---- the plan userdata --------------------------------------------------- */

/* nil, message from the thread's last error; returns 2. */
int plan_lua_fail(lua_State *L);
/* The plan userdata at argument `arg` (open or closed). */
lplan *plan_lua_toplan(lua_State *L, int arg);
/* The plan userdata at argument 1; raises when it is closed. */
lplan *plan_lua_live(lua_State *L);
/* A new empty plan userdata on the stack (filled by the caller). */
lplan *plan_lua_new_plan(lua_State *L);
/* Records the folder lp's program path is resolved against (a copy);
 * raises when out of memory. */
void plan_lua_set_base(lua_State *L, lplan *lp, const char *dir);

/* ---- arguments and results ----------------------------------------------- */

/* The op at argument `arg`: a name or a 1-based index; raises when none. */
int plan_lua_check_op(lua_State *L, const plan_plan *p, int arg);
/* The tensor named at argument `arg`; raises when none. */
int plan_lua_check_tensor(lua_State *L, const plan_plan *p, int arg);
void plan_lua_push_placement(lua_State *L, const plan_plan *p,
                             const plan_placement *pl);
/* Parses placement text for tensor `tensor`; raises on error. */
void plan_lua_parse_placement(lua_State *L, plan_plan *p, const char *text,
                              int tensor, plan_placement *out);
/* {in = {...}, out = {...}} of placement strings for op `op`. */
void plan_lua_push_strategy(lua_State *L, const plan_plan *p, int op,
                            const plan_placement *in,
                            const plan_placement *out);
/* Reads a strategy table at `arg` for op `op` into in/out; raises on
 * error. */
void plan_lua_check_strategy(lua_State *L, plan_plan *p, int op, int arg,
                             plan_placement *in, plan_placement *out);
/* A list of the names of op `op`'s inputs (output 0) or outputs (1). */
void plan_lua_push_operands(lua_State *L, const plan_program *prog, int op,
                            int output);

/* The cost model of lp's mesh for hardware `profile` (NULL: the plan's
 * own), made on first use and kept in lp; NULL with the thread's error
 * set when it cannot be made. */
const plan_cost_model *plan_lua_cost_model(lua_State *L, lplan *lp,
                                           const char *profile);

/* ---- the methods, by file ------------------------------------------------ */

extern const luaL_Reg plan_lua_plan_meta[];          /* plan_module_plan.c */
extern const luaL_Reg plan_lua_plan_methods[];       /* plan_module_plan.c */
extern const luaL_Reg plan_lua_space_methods[];      /* plan_module_space.c */
extern const luaL_Reg plan_lua_cost_methods[];       /* plan_module_cost.c */
extern const luaL_Reg plan_lua_verify_methods[];     /* plan_module_verify.c */
extern const luaL_Reg plan_lua_provenance_methods[]; /* .._provenance.c */
extern const luaL_Reg plan_lua_region_methods[];     /* plan_module_region.c */
extern const luaL_Reg plan_lua_hetero_methods[];     /* plan_module_hetero.c */
extern const luaL_Reg plan_lua_pricer_methods[];     /* plan_module_pricer.c */

#endif
