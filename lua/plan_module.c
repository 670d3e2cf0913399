/* The `plan` Lua module (luaopen_plan): plans as userdata, with the search
 * primitives (an op's legal strategies, apply and undo), validation,
 * verification, hashing, saving and costs. Linked into the `plan` tool
 * (`plan run`, `plan search`) and built as plan.so for a stock lua5.4.
 *
 * Habits (Lua's own libraries): recoverable failures come back as
 * nil, message; misuse raises an error with the caller's position. A Lua
 * error is a longjmp, so nothing malloc'd is held in a C local across a
 * call that can raise: memory lives in a userdata with __gc, or is freed
 * before the first call that can raise. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/plan.h"
#include "libplan/verify.h"
#include "libplan/cost.h"
#include "cost/cost_model.h"
#include "lower/lower.h"
#include "lua_sources.h"
#include "ir/placement.h"
#include "read/plan_read.h"
#include "plan_milp.h"
#include "plan_module.h"
#include "region_trace.h"
#include "search/strategy_space.h"

#define PLAN_MT "libplan.plan"
#define toplan(L) ((lplan *)luaL_checkudata(L, 1, PLAN_MT))

/* One applied strategy, for undo: what the op had before. */
typedef struct undo_entry {
  int op;
  bool had;
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
} undo_entry;

typedef struct lplan {
  plan_plan *p;
  undo_entry *undo;
  int nundo, cap_undo;
  plan_cost_model *cost; /* made on first use, for the plan's hardware */
  char *cost_profile;
  /* cost evaluations made through this plan (p:stats()) */
  lua_Integer n_cost_op, n_cost_redist, n_cost_plan;
} lplan;

/* ---- helpers ----------------------------------------------------------------- */

#define BOX_MT "libplan.box"

/* A C object boxed in a userdata on the stack, released by the box's
 * __gc (or __close) with its own free function: C memory that must outlive
 * calls that can raise. The box is made empty, before the object exists,
 * and the object goes into it as soon as the C call that makes it returns:
 * the only calls that can raise (making the box, then pushing results)
 * come before the object exists or while the box holds it. */
typedef struct cbox {
  void *ptr;
  void (*release)(void *);
} cbox;

static cbox *box_new(lua_State *L, void (*release)(void *)) {
  cbox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ptr = NULL;
  b->release = release;
  luaL_setmetatable(L, BOX_MT);
  return b;
}

/* Releases the boxed object now (the box stays, empty). */
static void box_release(cbox *b) {
  if (b->ptr && b->release)
    b->release(b->ptr);
  b->ptr = NULL;
}

static int box_gc(lua_State *L) {
  box_release(luaL_checkudata(L, 1, BOX_MT));
  return 0;
}

static void release_report(void *r) { plan_verify_report_free(r); }
static void release_diags(void *d) { plan_diags_free(d); }

/* nil, message from the thread's last error; returns 2. */
static int push_fail(lua_State *L) {
  char buf[1024];
  lua_pushnil(L);
  lua_pushstring(L, plan_error_format(buf, sizeof buf));
  return 2;
}

static lplan *live(lua_State *L) {
  lplan *lp = toplan(L);
  if (!lp->p)
    luaL_error(L, "the plan is closed");
  return lp;
}

/* A new empty plan userdata on the stack (filled by the caller). */
static lplan *new_lplan(lua_State *L) {
  lplan *lp = lua_newuserdatauv(L, sizeof *lp, 0);
  memset(lp, 0, sizeof *lp);
  luaL_setmetatable(L, PLAN_MT);
  return lp;
}

/* The op at argument `arg`: a name or a 1-based index. */
static int check_op(lua_State *L, const plan_plan *p, int arg) {
  const plan_program *prog = p->program;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || i > prog->nops)
      luaL_argerror(L, arg, "no op with that index");
    return (int)i - 1;
  }
  const char *name = luaL_checkstring(L, arg);
  int op = plan_program_op_find(prog, name);
  if (op < 0)
    luaL_error(L, "no op '%s'", name);
  return op;
}

static int check_tensor(lua_State *L, const plan_plan *p, int arg) {
  const char *name = luaL_checkstring(L, arg);
  int t = plan_program_tensor_find(p->program, name);
  if (t < 0)
    luaL_error(L, "no tensor '%s'", name);
  return t;
}

static void push_placement(lua_State *L, const plan_placement *pl) {
  char buf[PLAN_PLACEMENT_STRLEN];
  lua_pushstring(L, plan_placement_format(pl, buf));
}

/* Parses placement text for a tensor of rank `rank`; raises on error. */
static void parse_placement(lua_State *L, const plan_plan *p, const char *text,
                            int rank, plan_placement *out) {
  char err[200];
  size_t off;
  if (plan_placement_parse(out, text, strlen(text), p->mesh.naxes, err,
                           sizeof err, &off) ||
      plan_placement_normalize(out, rank, err, sizeof err))
    luaL_error(L, "placement '%s': %s", text, err);
}

/* {in = {...}, out = {...}} of placement strings. */
static void push_strategy(lua_State *L, const plan_op *o,
                          const plan_placement *in, const plan_placement *out) {
  lua_createtable(L, 0, 2);
  lua_createtable(L, o->nin, 0);
  for (int j = 0; j < o->nin; j++) {
    push_placement(L, &in[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "in");
  lua_createtable(L, o->nout, 0);
  for (int k = 0; k < o->nout; k++) {
    push_placement(L, &out[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "out");
}

/* Reads a strategy table at `arg` for op o into in/out; raises on error. */
static void check_strategy(lua_State *L, const plan_plan *p, const plan_op *o,
                           int arg, plan_placement *in, plan_placement *out) {
  luaL_checktype(L, arg, LUA_TTABLE);
  for (int side = 0; side < 2; side++) {
    int n = side ? o->nout : o->nin;
    const int *ts = side ? o->out : o->in;
    if (lua_getfield(L, arg, side ? "out" : "in") != LUA_TTABLE)
      luaL_error(L, "op '%s': the strategy needs '%s', a list of %d "
                    "placements", o->name, side ? "out" : "in", n);
    if ((int)luaL_len(L, -1) != n)
      luaL_error(L, "op '%s': '%s' has %d placements, the op %d", o->name,
                 side ? "out" : "in", (int)luaL_len(L, -1), n);
    for (int j = 0; j < n; j++) {
      lua_rawgeti(L, -1, j + 1);
      const char *text = lua_tostring(L, -1);
      if (!text)
        luaL_error(L, "op '%s': placement %d of '%s' is not a string",
                   o->name, j + 1, side ? "out" : "in");
      parse_placement(L, p, text, p->program->tensors[ts[j]].rank,
                      side ? &out[j] : &in[j]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* ---- module functions -------------------------------------------------------- */

static int l_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lplan *lp = new_lplan(L);
  if (plan_load(&lp->p, path))
    return push_fail(L);
  return 1;
}

static int l_parse(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "<string>");
  const char *base = luaL_optstring(L, 3, ".");
  lplan *lp = new_lplan(L);
  if (plan_load_buffer(&lp->p, text, len, name, base))
    return push_fail(L);
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
  luaL_addstring(&b, "libplan: \"" PLAN_FORMAT_STRING "\"\nprogram: {path: \"");
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
  lplan *lp = new_lplan(L);
  if (plan_load_buffer(&lp->p, text, len, "<plan.new>", "."))
    return push_fail(L);
  return 1;
}

/* ---- plan methods ------------------------------------------------------------ */

static int m_hash(lua_State *L) {
  lplan *lp = live(L);
  plan_hash h;
  if (plan_hash_part(&h, lp->p, PLAN_PART_PLAN))
    return push_fail(L);
  char buf[64];
  lua_pushstring(L, plan_hash_format(h, buf));
  return 1;
}

static int m_text(lua_State *L) {
  lplan *lp = live(L);
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  o.self_contained = lua_toboolean(L, 2);
  cbox *b = box_new(L, free);
  char *text;
  size_t len;
  if (plan_write_buffer(&text, &len, lp->p, &o))
    return push_fail(L);
  b->ptr = text;
  lua_pushlstring(L, text ? text : "", text ? len : 0);
  box_release(b);
  return 1;
}

static int m_save(lua_State *L) {
  lplan *lp = live(L);
  const char *path = luaL_checkstring(L, 2);
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "self_contained");
    o.self_contained = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  if (plan_save(lp->p, path, &o))
    return push_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* ok, {findings...}: each finding a string "file:line:col: severity: code:
 * message" in the order validation gives. */
static int m_validate(lua_State *L) {
  lplan *lp = live(L);
  luaL_checkstack(L, 4, "validate");
  cbox *b = box_new(L, release_diags);
  plan_diags *d;
  if (plan_validate(&d, lp->p))
    return push_fail(L);
  b->ptr = d;
  size_t n = plan_diags_count(d);
  lua_pushboolean(L, plan_diags_count_at_least(d, PLAN_SEV_ERROR) == 0);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const plan_diag *g = plan_diags_get(d, i);
    static const char *const sev[] = {"note", "warning", "error"};
    char line[1400];
    snprintf(line, sizeof line, "%s:%d:%d: %s: %s: %s", g->file, g->line,
             g->column, sev[g->severity], g->code, g->message);
    lua_pushstring(L, line);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  box_release(b);
  return 2;
}

/* verify's option `name` of the options table at index 2: a string, or
 * NULL when absent; left on the stack (a value in a slot of its own stays
 * alive while the call runs, whatever Lua code runs meanwhile). */
static const char *opt_string(lua_State *L, const char *name) {
  if (lua_getfield(L, 2, name) == LUA_TNIL)
    return NULL;
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "verify: %s must be a string", name);
  return lua_tostring(L, -1);
}

/* equal, report text, {first_op, first_tensor, diagnosis} | nil, message */
static int m_verify(lua_State *L) {
  lplan *lp = live(L);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  cbox *b = box_new(L, release_report); /* for the report */
  int top = lua_gettop(L);
  if (lua_istable(L, 2)) {
    const char *mode = opt_string(L, "mode");
    if (mode && !strcmp(mode, "float"))
      o.mode = PLAN_VERIFY_FLOAT;
    else if (mode && strcmp(mode, "exact"))
      return luaL_error(L, "verify: mode is 'exact' or 'float'");
    lua_getfield(L, 2, "seed");
    o.seed = (uint64_t)luaL_optinteger(L, -1, 0);
    o.dtype = opt_string(L, "dtype");
    if (o.dtype)
      o.mode = PLAN_VERIFY_FLOAT;
    o.runner = opt_string(L, "runner"); /* "cpu" (nil) or "cuda" */
    /* one process of a distributed verification (docs/gpu.md) */
    o.rendezvous = opt_string(L, "distributed");
    o.comm = opt_string(L, "comm");
    lua_getfield(L, 2, "rank");
    lua_getfield(L, 2, "world_size");
    lua_getfield(L, 2, "timeout");
    bool given = !lua_isnil(L, -3) || !lua_isnil(L, -2) ||
                 !lua_isnil(L, -1) || o.comm;
    if (!o.rendezvous && given)
      return luaL_error(L, "verify: rank, world_size, timeout and comm go "
                           "with distributed");
    if (o.rendezvous) {
      lua_Integer rank = luaL_checkinteger(L, -3);
      lua_Integer world = luaL_checkinteger(L, -2);
      o.timeout_s = luaL_optnumber(L, -1, 0);
      if (world < 1 || world > 1 << 20 || rank < 0 || rank >= world)
        return luaL_error(L, "verify: rank must lie in [0, world_size)");
      if (!(o.timeout_s >= 0 && o.timeout_s < 1e9))
        return luaL_error(L, "verify: timeout must be >= 0 seconds");
      o.rank = (int)rank;
      o.world = (int)world;
    }
  }
  plan_verify_report *r; /* manual regions: their bodies traced in Lua */
  int rc = plan_verify_traced(&r, lp->p, &o, plan_lua_trace_region, NULL);
  if (!rc)
    b->ptr = r;
  lua_settop(L, top); /* the options' values are not needed past here */
  if (rc)
    return push_fail(L);
  lua_pushboolean(L, plan_verify_report_equal(r));
  lua_pushstring(L, plan_verify_report_text(r));
  lua_createtable(L, 0, 3);
  const char *f[3] = {plan_verify_report_first_op(r),
                      plan_verify_report_first_tensor(r),
                      plan_verify_report_diagnosis(r)};
  static const char *const names[] = {"first_op", "first_tensor",
                                      "diagnosis"};
  for (int i = 0; i < 3; i++)
    if (f[i]) {
      lua_pushstring(L, f[i]);
      lua_setfield(L, -2, names[i]);
    }
  box_release(b);
  return 3;
}

static int m_ops(lua_State *L) {
  lplan *lp = live(L);
  const plan_program *prog = lp->p->program;
  lua_createtable(L, prog->nops, 0);
  for (int i = 0; i < prog->nops; i++) {
    lua_pushstring(L, prog->ops[i].name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static void push_names(lua_State *L, const plan_program *prog, const int *ts,
                       int n) {
  lua_createtable(L, n, 0);
  for (int j = 0; j < n; j++) {
    lua_pushstring(L, prog->tensors[ts[j]].name);
    lua_rawseti(L, -2, j + 1);
  }
}

/* {name, kind, index, inputs = {...}, outputs = {...}} */
static int m_op(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  const plan_program *prog = lp->p->program;
  const plan_op *o = &prog->ops[op];
  lua_createtable(L, 0, 5);
  lua_pushstring(L, o->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, plan_program_op_kind(prog, op));
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, op + 1);
  lua_setfield(L, -2, "index");
  push_names(L, prog, o->in, o->nin);
  lua_setfield(L, -2, "inputs");
  push_names(L, prog, o->out, o->nout);
  lua_setfield(L, -2, "outputs");
  return 1;
}

/* {name, shape = {...}, dtype, role, producer = op name | nil} */
static int m_tensor(lua_State *L) {
  lplan *lp = live(L);
  int t = check_tensor(L, lp->p, 2);
  const plan_program *prog = lp->p->program;
  const plan_tensor *x = &prog->tensors[t];
  lua_createtable(L, 0, 5);
  lua_pushstring(L, x->name);
  lua_setfield(L, -2, "name");
  lua_createtable(L, x->rank, 0);
  for (int d = 0; d < x->rank; d++) {
    lua_pushinteger(L, x->dims[d]);
    lua_rawseti(L, -2, d + 1);
  }
  lua_setfield(L, -2, "shape");
  lua_pushstring(L, plan_program_tensor_dtype(prog, t));
  lua_setfield(L, -2, "dtype");
  lua_pushstring(L, plan_program_tensor_role(prog, t));
  lua_setfield(L, -2, "role");
  if (x->producer >= 0) {
    lua_pushstring(L, prog->ops[x->producer].name);
    lua_setfield(L, -2, "producer");
  }
  return 1;
}

/* {{name = "dp", size = 2}, ...} */
static int m_mesh(lua_State *L) {
  lplan *lp = live(L);
  const plan_mesh *m = &lp->p->mesh;
  lua_createtable(L, m->naxes, 0);
  for (int a = 0; a < m->naxes; a++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, m->axis_names[a]);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, m->axis_sizes[a]);
    lua_setfield(L, -2, "size");
    lua_rawseti(L, -2, a + 1);
  }
  return 1;
}

/* The legal strategies of an op, a list of {in, out}, all-R first. */
static int m_strategies(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  cbox *b = box_new(L, free); /* a memory error while building frees it */
  plan_op_strategy *list;
  int n;
  if (plan_op_strategies(&list, &n, lp->p, op))
    return push_fail(L);
  b->ptr = list;
  const plan_op *o = &lp->p->program->ops[op];
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_strategy(L, o, list[i].in, list[i].out);
    lua_rawseti(L, -2, i + 1);
  }
  box_release(b);
  return 1;
}

/* The op's current strategy, or nil. */
static int m_strategy(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  const plan_strategy *s = &lp->p->strategies[op];
  if (!s->set)
    return 0;
  push_strategy(L, &lp->p->program->ops[op], s->in, s->out);
  return 1;
}

/* p:apply(op, {in = ..., out = ...}): sets the op's strategy; undo with
 * p:undo(). The strategy is taken as given (p:validate() judges it). */
static int m_apply(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  const plan_op *o = &lp->p->program->ops[op];
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  check_strategy(L, lp->p, o, 3, in, out);
  if (lp->nundo == lp->cap_undo) {
    int cap = lp->cap_undo ? 2 * lp->cap_undo : 64;
    undo_entry *u = realloc(lp->undo, sizeof *u * (size_t)cap);
    if (!u)
      return luaL_error(L, "out of memory");
    lp->undo = u;
    lp->cap_undo = cap;
  }
  undo_entry *u = &lp->undo[lp->nundo];
  const plan_strategy *s = &lp->p->strategies[op];
  u->op = op;
  u->had = s->set;
  if (s->set) {
    memcpy(u->in, s->in, sizeof *u->in * (size_t)o->nin);
    memcpy(u->out, s->out, sizeof *u->out * (size_t)o->nout);
  }
  if (plan_set_strategy(lp->p, op, in, out))
    return push_fail(L);
  lp->nundo++;
  lua_pushboolean(L, 1);
  return 1;
}

static int m_undo(lua_State *L) {
  lplan *lp = live(L);
  if (!lp->nundo) {
    lua_pushboolean(L, 0);
    return 1;
  }
  undo_entry *u = &lp->undo[--lp->nundo];
  if (u->had) {
    if (plan_set_strategy(lp->p, u->op, u->in, u->out))
      return push_fail(L);
  } else {
    plan_clear_strategy(lp->p, u->op);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* p:placement(tensor): a leaf's storage placement (or an output's
 * delivered one with p:placement(name, "output")). */
static int m_placement(lua_State *L) {
  lplan *lp = live(L);
  int t = check_tensor(L, lp->p, 2);
  const plan_plan *p = lp->p;
  if (p->program->tensors[t].producer >= 0) {
    for (int k = 0; k < p->program->noutputs; k++)
      if (p->program->outputs[k] == t && p->out_pl[k].set) {
        push_placement(L, &p->out_pl[k].pl);
        return 1;
      }
    return 0;
  }
  if (!p->placements[t].set)
    return 0;
  push_placement(L, &p->placements[t].pl);
  return 1;
}

/* p:set_placement(tensor, text | nil): a leaf's storage placement, or a
 * program output's delivered one. */
static int m_set_placement(lua_State *L) {
  lplan *lp = live(L);
  int t = check_tensor(L, lp->p, 2);
  plan_plan *p = lp->p;
  plan_placement pl;
  bool has = !lua_isnoneornil(L, 3);
  if (has)
    parse_placement(L, p, luaL_checkstring(L, 3), p->program->tensors[t].rank,
                    &pl);
  int rc;
  if (p->program->tensors[t].producer < 0) {
    rc = plan_set_placement(p, t, has ? &pl : NULL);
  } else {
    int k = 0;
    while (k < p->program->noutputs && p->program->outputs[k] != t)
      k++;
    if (k == p->program->noutputs)
      return luaL_error(L, "'%s' is neither a leaf nor a program output",
                        p->program->tensors[t].name);
    rc = plan_set_output_placement(p, k, has ? &pl : NULL);
  }
  if (rc)
    return push_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* The cost model of this plan's mesh, made on first use (or when another
 * hardware profile is asked for). */
static const plan_cost_model *cost_model(lua_State *L, lplan *lp,
                                         const char *profile) {
  if (lp->cost && ((!profile && !lp->cost_profile) ||
                   (profile && lp->cost_profile &&
                    !strcmp(profile, lp->cost_profile))))
    return lp->cost;
  plan_cost_model_free(lp->cost);
  lp->cost = NULL;
  free(lp->cost_profile);
  lp->cost_profile = NULL;
  if (profile && !(lp->cost_profile = strdup(profile)))
    luaL_error(L, "out of memory");
  if (plan_cost_model_new(&lp->cost, lp->p, profile))
    return NULL;
  return lp->cost;
}

/* p:cost_op(op, strategy [, hardware]): seconds of the op's local compute
 * under the strategy (the slowest rank). */
static int m_cost_op(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  const plan_op *o = &lp->p->program->ops[op];
  plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  check_strategy(L, lp->p, o, 3, in, out);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 4, NULL));
  double s;
  lp->n_cost_op++;
  if (!m || plan_cost_op_seconds(&s, m, lp->p, op, in, out))
    return push_fail(L);
  lua_pushnumber(L, s);
  return 1;
}

/* p:cost_redist(tensor, from, to [, hardware]): seconds to change the
 * tensor's placement (the collectives lowering would insert). */
static int m_cost_redist(lua_State *L) {
  lplan *lp = live(L);
  int t = check_tensor(L, lp->p, 2);
  int rank = lp->p->program->tensors[t].rank;
  plan_placement a, b;
  parse_placement(L, lp->p, luaL_checkstring(L, 3), rank, &a);
  parse_placement(L, lp->p, luaL_checkstring(L, 4), rank, &b);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 5, NULL));
  double s;
  lp->n_cost_redist++;
  if (!m || plan_cost_redist_seconds(&s, m, lp->p, t, &a, &b))
    return push_fail(L);
  lua_pushnumber(L, s);
  return 1;
}

/* p:cost([hardware]): {step = seconds, memory = peak bytes per device,
 * fits = bool, text = the breakdown} */
static int m_cost(lua_State *L) {
  lplan *lp = live(L);
  const plan_cost_model *m = cost_model(L, lp, luaL_optstring(L, 2, NULL));
  cbox *b = box_new(L, free); /* for the text */
  plan_cost_report *r;
  lp->n_cost_plan++;
  if (!m || plan_cost_plan(&r, m, lp->p))
    return push_fail(L);
  double step = plan_cost_report_step_seconds(r);
  double mem = (double)plan_cost_report_memory_peak(r);
  int fits = plan_cost_report_fits(r);
  char *text = NULL;
  size_t len = 0;
  int rc = plan_cost_report_write(&text, &len, r, "text");
  plan_cost_report_free(r);
  if (rc)
    return push_fail(L);
  b->ptr = text;
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, step);
  lua_setfield(L, -2, "step");
  lua_pushnumber(L, mem);
  lua_setfield(L, -2, "memory");
  lua_pushboolean(L, fits);
  lua_setfield(L, -2, "fits");
  lua_pushlstring(L, text ? text : "", text ? len : 0);
  lua_setfield(L, -2, "text");
  box_release(b);
  return 1;
}


static int m_lower(lua_State *L) {
  lplan *lp = live(L);
  const char *path = luaL_checkstring(L, 2);
  plan_lowered *l;
  if (plan_lower(&l, lp->p))
    return push_fail(L);
  char *text;
  size_t len;
  int rc = plan_lowered_write(&text, &len, l);
  plan_lowered_free(l);
  if (rc)
    return push_fail(L);
  rc = plan_write_file_atomic(path, text, len);
  free(text);
  if (rc)
    return push_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* p:pinned(op): whether a pinned region holds the op (its strategy is a
 * constraint every search keeps). */
static int m_pinned(lua_State *L) {
  lplan *lp = live(L);
  int op = check_op(L, lp->p, 2);
  bool pinned = false;
  for (int i = 0; i < lp->p->nregions && !pinned; i++) {
    const plan_region *r = &lp->p->regions[i];
    pinned = r->kind == PLAN_REGION_PINNED && r->ops && r->ops[op];
  }
  lua_pushboolean(L, pinned);
  return 1;
}

static void push_value(lua_State *L, const plan_value *v) {
  luaL_checkstack(L, 4, "provenance too deep");
  switch (v ? v->kind : PLAN_V_NULL) {
  case PLAN_V_BOOL:
    lua_pushboolean(L, v->b);
    break;
  case PLAN_V_INT:
    lua_pushinteger(L, (lua_Integer)v->i);
    break;
  case PLAN_V_FLOAT:
    lua_pushnumber(L, v->f);
    break;
  case PLAN_V_STRING:
    lua_pushstring(L, v->s);
    break;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    lua_createtable(L, v->kind == PLAN_V_SEQ ? v->n : 0,
                    v->kind == PLAN_V_MAP ? v->n : 0);
    for (int i = 0; i < v->n; i++) {
      push_value(L, v->items[i]);
      if (v->kind == PLAN_V_SEQ)
        lua_rawseti(L, -2, i + 1);
      else
        lua_setfield(L, -2, v->keys[i]);
    }
    break;
  default:
    lua_pushnil(L);
  }
}

/* p:provenance(): the provenance mapping as a table, or nil. */
static int m_provenance(lua_State *L) {
  lplan *lp = live(L);
  if (!lp->p->provenance)
    return 0;
  push_value(L, lp->p->provenance);
  return 1;
}

static int cmp_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The Lua value at idx as a plan_value in the plan's arena (tables with
 * keys 1..n are sequences, others maps with their keys sorted, so the
 * result never depends on Lua's table order); raises on other types. */
static plan_value *to_value(lua_State *L, plan_plan *p, int idx, int depth) {
  idx = lua_absindex(L, idx);
  if (depth > 16)
    luaL_error(L, "provenance: nested too deep");
  luaL_checkstack(L, 4, "provenance too deep");
  plan_value *v = plan_arena_alloc(&p->arena, sizeof *v);
  if (!v)
    luaL_error(L, "out of memory");
  memset(v, 0, sizeof *v);
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    v->kind = PLAN_V_BOOL;
    v->b = lua_toboolean(L, idx);
    return v;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      v->kind = PLAN_V_INT;
      v->i = (int64_t)lua_tointeger(L, idx);
    } else {
      v->kind = PLAN_V_FLOAT;
      v->f = lua_tonumber(L, idx);
    }
    return v;
  case LUA_TSTRING:
    v->kind = PLAN_V_STRING;
    v->s = plan_arena_strdup(&p->arena, lua_tostring(L, idx));
    if (!v->s)
      luaL_error(L, "out of memory");
    return v;
  case LUA_TTABLE:
    break;
  default:
    luaL_error(L, "provenance: a %s cannot be stored", luaL_typename(L, idx));
  }
  lua_Integer n = luaL_len(L, idx);
  int count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    lua_pop(L, 1);
  }
  bool seq = count == n;
  v->kind = seq ? PLAN_V_SEQ : PLAN_V_MAP;
  v->n = count;
  v->items = plan_arena_alloc(&p->arena, sizeof *v->items * (size_t)(count + 1));
  if (!v->items)
    luaL_error(L, "out of memory");
  if (seq) {
    for (int i = 0; i < count; i++) {
      lua_rawgeti(L, idx, i + 1);
      v->items[i] = to_value(L, p, -1, depth + 1);
      lua_pop(L, 1);
    }
    return v;
  }
  v->keys = plan_arena_alloc(&p->arena, sizeof *v->keys * (size_t)(count + 1));
  if (!v->keys)
    luaL_error(L, "out of memory");
  int k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "provenance: map keys must be strings");
    v->keys[k] = plan_arena_strdup(&p->arena, lua_tostring(L, -1));
    if (!v->keys[k++])
      luaL_error(L, "out of memory");
  }
  qsort(v->keys, (size_t)count, sizeof *v->keys, cmp_keys);
  for (int i = 0; i < count; i++) {
    lua_getfield(L, idx, v->keys[i]);
    v->items[i] = to_value(L, p, -1, depth + 1);
    lua_pop(L, 1);
  }
  return v;
}

/* p:set_provenance(table | nil): how the plan was made (a free mapping,
 * hashed apart from the plan; spec §4.7). */
static int m_set_provenance(lua_State *L) {
  lplan *lp = live(L);
  if (lua_isnoneornil(L, 2)) {
    lp->p->provenance = NULL;
    return 0;
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  plan_value *v = to_value(L, lp->p, 2, 0);
  if (v->kind != PLAN_V_MAP && v->n)
    return luaL_error(L, "provenance is a mapping");
  v->kind = PLAN_V_MAP;
  lp->p->provenance = v;
  return 0;
}

/* p:diff(q): the semantic differences (strings; empty when the plans are
 * equal in content). */
static int m_diff(lua_State *L) {
  lplan *lp = live(L);
  lplan *lq = luaL_checkudata(L, 2, PLAN_MT);
  if (!lq->p)
    return luaL_error(L, "the other plan is closed");
  cbox *b = box_new(L, release_diags);
  plan_diags *d;
  if (plan_diff(&d, lp->p, lq->p))
    return push_fail(L);
  b->ptr = d;
  size_t n = plan_diags_count(d);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const plan_diag *g = plan_diags_get(d, i);
    lua_pushfstring(L, "%s: %s", g->code, g->message);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  box_release(b);
  return 1;
}

/* p:devices(): the physical device of each logical rank (row-major over
 * the mesh axes), a list. */
static int m_devices(lua_State *L) {
  lplan *lp = live(L);
  const plan_mesh *m = &lp->p->mesh;
  lua_createtable(L, (int)m->ndevices, 0);
  for (int64_t r = 0; r < m->ndevices; r++) {
    lua_pushinteger(L, m->devices ? m->devices[r] : r);
    lua_rawseti(L, -2, r + 1);
  }
  return 1;
}

/* p:set_devices(list | nil): a new device order (a permutation of
 * 0..n-1; nil: iota); the costs follow it. */
static int m_set_devices(lua_State *L) {
  lplan *lp = live(L);
  int64_t n = lp->p->mesh.ndevices;
  int rc;
  if (lua_isnoneornil(L, 2)) {
    rc = plan_set_mesh_devices(lp->p, NULL);
  } else {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (luaL_len(L, 2) != n)
      return luaL_error(L, "set_devices: %d devices for a mesh of %d",
                        (int)luaL_len(L, 2), (int)n);
    int64_t *d = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n + 1), 0);
    for (int64_t r = 0; r < n; r++) {
      lua_rawgeti(L, 2, r + 1);
      d[r] = (int64_t)luaL_checkinteger(L, -1);
      lua_pop(L, 1);
    }
    rc = plan_set_mesh_devices(lp->p, d);
  }
  if (!rc && lp->cost)
    rc = plan_cost_model_update_mesh(lp->cost, lp->p);
  if (rc)
    return push_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* p:outputs(): the program's outputs, in order. */
static int m_outputs(lua_State *L) {
  lplan *lp = live(L);
  const plan_program *prog = lp->p->program;
  push_names(L, prog, prog->outputs, prog->noutputs);
  return 1;
}

/* p:clear_strategy(op): the op has no strategy (not undoable). */
static int m_clear_strategy(lua_State *L) {
  lplan *lp = live(L);
  plan_clear_strategy(lp->p, check_op(L, lp->p, 2));
  return 0;
}

/* p:stats(): {cost_op = n, cost_redist = n, cost_plan = n}, the cost
 * evaluations made through this plan. */
static int m_stats(lua_State *L) {
  lplan *lp = live(L);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, lp->n_cost_op);
  lua_setfield(L, -2, "cost_op");
  lua_pushinteger(L, lp->n_cost_redist);
  lua_setfield(L, -2, "cost_redist");
  lua_pushinteger(L, lp->n_cost_plan);
  lua_setfield(L, -2, "cost_plan");
  return 1;
}

/* ---- metamethods ------------------------------------------------------------- */

static int m_gc(lua_State *L) {
  lplan *lp = toplan(L);
  plan_cost_model_free(lp->cost);
  free(lp->cost_profile);
  free(lp->undo);
  plan_free(lp->p);
  memset(lp, 0, sizeof *lp);
  return 0;
}

static int m_tostring(lua_State *L) {
  lplan *lp = toplan(L);
  if (!lp->p) {
    lua_pushliteral(L, "plan (closed)");
    return 1;
  }
  const plan_plan *p = lp->p;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_pushfstring(L, "plan '%s' (%d ops", plan_program_name(p->program),
                  p->program->nops);
  luaL_addvalue(&b);
  for (int a = 0; a < p->mesh.naxes; a++) {
    lua_pushfstring(L, "%s%s=%d", a ? " x " : "; mesh ", p->mesh.axis_names[a],
                    (int)p->mesh.axis_sizes[a]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
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

static const luaL_Reg module_fns[] = {
    {"load", l_load},           {"parse", l_parse},   {"new", l_new},
    {"hash_text", l_hash_text}, {"source", l_source}, {NULL, NULL}};

static const luaL_Reg plan_methods[] = {
    {"hash", m_hash},
    {"text", m_text},
    {"save", m_save},
    {"validate", m_validate},
    {"verify", m_verify},
    {"ops", m_ops},
    {"op", m_op},
    {"tensor", m_tensor},
    {"mesh", m_mesh},
    {"strategies", m_strategies},
    {"strategy", m_strategy},
    {"apply", m_apply},
    {"undo", m_undo},
    {"placement", m_placement},
    {"set_placement", m_set_placement},
    {"cost", m_cost},
    {"cost_op", m_cost_op},
    {"cost_redist", m_cost_redist},
    {"lower", m_lower},
    {"pinned", m_pinned},
    {"provenance", m_provenance},
    {"set_provenance", m_set_provenance},
    {"diff", m_diff},
    {"outputs", m_outputs},
    {"devices", m_devices},
    {"set_devices", m_set_devices},
    {"clear_strategy", m_clear_strategy},
    {"stats", m_stats},
    {"close", m_gc},
    {NULL, NULL}};

static const luaL_Reg plan_meta[] = {{"__gc", m_gc},
                                     {"__close", m_gc},
                                     {"__tostring", m_tostring},
                                     {"__index", NULL}, /* set below */
                                     {NULL, NULL}};

static void createmeta(lua_State *L) {
  luaL_newmetatable(L, BOX_MT);
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, box_gc);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  luaL_newmetatable(L, PLAN_MT);
  luaL_setfuncs(L, plan_meta, 0);
  luaL_newlibtable(L, plan_methods);
  luaL_setfuncs(L, plan_methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

int luaopen_plan(lua_State *L) {
  luaL_newlib(L, module_fns);
  createmeta(L);
  lua_pushstring(L, plan_version_string());
  lua_setfield(L, -2, "version");
  plan_milp_register(L);
  return 1;
}
