/* Manual regions' bodies, run as Lua in a sandbox (libplan/trace.h;
 * docs/lua.md, "Manual regions").
 *
 * Each body runs once, at lowering, in a fresh Lua state of its own: the
 * base library without its loaders (no dofile, loadfile, load, require,
 * print, collectgarbage), string, table, math and utf8; no io, os or debug.
 * It runs under the sandbox's limits (sandbox.h: memory, the ops it
 * traces included; instructions, which pcall cannot swallow; wall clock;
 * guarded string and table functions), so a runaway body stops with an
 * error naming its region and line.
 * The chunk is text only (no bytecode) and is numbered with the plan
 * file's lines, so errors point into the plan.
 *
 * The body returns a function of the region's boundary inputs, in their
 * order, that returns its outputs. Values are rank-local tensors: every op
 * of the registry is a global function of that name (`gelu(h)`,
 * `matmul(a, b)`, `softmax(x, {dim = -1})`: tensors, then an optional
 * table of attributes; `outputs = n` for an op with several), and the
 * collectives are `all_reduce(x, axis)`, `all_gather(x, axis [, dim])`,
 * `reduce_scatter(x, axis, dim)` and `all_to_all(x, axis, dim, to_dim)`.
 * `tostring(x)` describes a tensor (name, global shape, placement). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "libplan/space.h"
#include "libplan/trace.h"
#include "region_trace.h"
#include "sandbox.h"

#define TENSOR_MT "plan.region.tensor"
/* What the trace holds for an op or collective, besides its attributes'
 * text: charged to the body's memory, so a body that makes ops without end
 * stops at the cap. */
#define OP_BYTES 1024

static plan_trace *trace_of(lua_State *L) {
  return plan_lua_sandbox_of(L)->user;
}

/* ---- tensors ----------------------------------------------------------------
 */

static void push_tensor(lua_State *L, int h) {
  int *u = lua_newuserdatauv(L, sizeof(int), 0);
  *u = h;
  luaL_setmetatable(L, TENSOR_MT);
}

static int check_tensor(lua_State *L, int idx) {
  return *(int *)luaL_checkudata(L, idx, TENSOR_MT);
}

static int tensor_tostring(lua_State *L) {
  char buf[256];
  plan_trace_describe(trace_of(L), check_tensor(L, 1), buf, sizeof buf);
  lua_pushstring(L, buf);
  return 1;
}

/* Raises msg at the body's line. */
static int raise_at_line(lua_State *L, const char *msg) {
  luaL_where(L, 1);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

/* A builder call failed: its message, at the body's line. */
static int builder_error(lua_State *L) {
  return raise_at_line(L, plan_error_last()->message);
}

/* ---- ops --------------------------------------------------------------------
 */

/* One attribute of an op call, read from the call's table. The builder
 * holds what it is given (names, strings, lists) until the op, and a
 * staged attribute stays staged until the next op: so an op call reads
 * and checks everything first, where a Lua error may be raised, and only
 * then stages the attributes and makes the op, with nothing that can
 * raise in between; the body may catch an error and go on. */
typedef struct call_attr {
  const char *name;
  int type; /* LUA_TNUMBER, LUA_TBOOLEAN, LUA_TSTRING or LUA_TTABLE */
  int integer;
  lua_Integer i;
  lua_Number f;
  const char *s;
  const int64_t *v;
  int n;
} call_attr;

/* The int list at the top of the stack into a userdata left there. */
static const int64_t *read_list(lua_State *L, const char *name, int *n) {
  lua_Integer len = luaL_len(L, -1);
  if (len < 0 || len > PLAN_MAX_RANK * 4)
    luaL_error(L, "attribute '%s': a list of at most %d", name,
               PLAN_MAX_RANK * 4);
  int64_t *v = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(len + 1), 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, -2, i);
    v[i - 1] = (int64_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  *n = (int)len;
  return v;
}

/* Reads the attributes of table idx ("outputs" into *nout) into an array
 * left on the stack, with a table above it that holds the names, strings
 * and lists they point to; their count into *na. The caller's table is
 * left as it was. */
static call_attr *read_attrs(lua_State *L, int idx, int *nout, int *na) {
  int cap = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    cap++;
    lua_pop(L, 1);
  }
  call_attr *a = lua_newuserdatauv(L, sizeof *a * (size_t)(cap + 1), 0);
  lua_createtable(L, 2 * cap, 0);
  int held = lua_gettop(L), nheld = 0, n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "attribute names are strings");
    if (n == cap)
      luaL_error(L, "the attribute table changed while it was read");
    const char *k = lua_tostring(L, -2);
    lua_pushvalue(L, -2);
    lua_rawseti(L, held, ++nheld);
    call_attr *c = &a[n];
    memset(c, 0, sizeof *c);
    c->name = k;
    c->type = lua_type(L, -1);
    if (!strcmp(k, "outputs")) {
      *nout = (int)luaL_checkinteger(L, -1);
      lua_pop(L, 1);
      continue;
    }
    if (c->type == LUA_TNUMBER) {
      c->integer = lua_isinteger(L, -1);
      c->i = lua_tointeger(L, -1);
      c->f = lua_tonumber(L, -1);
    } else if (c->type == LUA_TBOOLEAN) {
      c->i = lua_toboolean(L, -1);
    } else if (c->type == LUA_TSTRING) {
      c->s = lua_tostring(L, -1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, held, ++nheld);
    } else if (c->type == LUA_TTABLE) {
      c->v = read_list(L, k, &c->n);
      lua_rawseti(L, held, ++nheld);
    } else {
      luaL_error(L, "attribute '%s' is a number, boolean, string or list", k);
    }
    n++;
    lua_pop(L, 1);
  }
  *na = n;
  return a;
}

static int stage_attr(plan_trace *t, const call_attr *c) {
  switch (c->type) {
  case LUA_TNUMBER:
    return c->integer ? plan_trace_attr_int(t, c->name, c->i)
                      : plan_trace_attr_float(t, c->name, c->f);
  case LUA_TBOOLEAN:
    return plan_trace_attr_bool(t, c->name, (int)c->i);
  case LUA_TSTRING:
    return plan_trace_attr_string(t, c->name, c->s);
  default:
    return plan_trace_attr_ints(t, c->name, c->v, c->n);
  }
}

/* Stages the attributes; on a refusal, drops those staged (a refused
 * plan_trace_op takes them, as every plan_trace_op does) and raises the
 * refusal's message. */
static void stage_attrs(lua_State *L, plan_trace *t, const char *op,
                        const call_attr *a, int na) {
  for (int i = 0; i < na; i++)
    if (stage_attr(t, &a[i])) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", plan_error_last()->message);
      int none[1];
      plan_trace_op(t, op, NULL, 0, none, 0);
      raise_at_line(L, msg);
    }
}

static int op_call(lua_State *L) {
  plan_trace *t = trace_of(L);
  const char *name = lua_tostring(L, lua_upvalueindex(1));
  int min_out;
  if (plan_op_kind_operands(NULL, NULL, &min_out, NULL,
                            plan_op_kind_from_name(name)))
    min_out = 1;
  int top = lua_gettop(L), nin = top, nout = min_out, na = 0;
  const call_attr *attrs = NULL;
  if (top > 0 && lua_type(L, top) == LUA_TTABLE) {
    nin = top - 1;
    attrs = read_attrs(L, top, &nout, &na);
  }
  if (nin > PLAN_MAX_OPERANDS - 1 || nout < 1 || nin + nout > PLAN_MAX_OPERANDS)
    return luaL_error(L, "%s: too many operands", name);
  size_t bytes = OP_BYTES * (size_t)nout;
  for (int i = 0; i < na; i++)
    bytes += (attrs[i].s ? strlen(attrs[i].s) : 0) +
             sizeof(int64_t) * (size_t)attrs[i].n + strlen(attrs[i].name);
  plan_lua_sandbox_charge(L, 0, bytes);
  int in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  for (int j = 0; j < nin; j++)
    in[j] = check_tensor(L, j + 1);
  luaL_checkstack(L, nout, "the op's outputs");
  int base = lua_gettop(L);
  for (int k = 0; k < nout; k++) /* made before the op, bound after */
    push_tensor(L, -1);
  stage_attrs(L, t, name, attrs, na);
  if (plan_trace_op(t, name, in, nin, out, nout) < 0)
    return builder_error(L);
  for (int k = 0; k < nout; k++)
    *(int *)lua_touserdata(L, base + 1 + k) = out[k];
  return nout;
}

static int collective(lua_State *L) {
  plan_trace *t = trace_of(L);
  const char *kind = lua_tostring(L, lua_upvalueindex(1));
  int h = check_tensor(L, 1);
  const char *axis = luaL_checkstring(L, 2);
  int dim = (int)luaL_optinteger(L, 3, -1);
  int to_dim = (int)luaL_optinteger(L, 4, -1);
  plan_lua_sandbox_charge(L, 0, OP_BYTES);
  push_tensor(L, -1); /* made before the collective, bound after */
  int nh = plan_trace_collective(t, kind, h, axis, dim, to_dim);
  if (nh < 0)
    return builder_error(L);
  *(int *)lua_touserdata(L, -1) = nh;
  return 1;
}

/* ---- the sandbox ------------------------------------------------------------
 */

static void open_sandbox(lua_State *L) {
  static const luaL_Reg libs[] = {
      {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
      {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};
  for (const luaL_Reg *l = libs; l->name; l++) {
    luaL_requiref(L, l->name, l->func, 1);
    lua_pop(L, 1);
  }
  static const char *const removed[] = {
      "dofile", "loadfile", "load", "require", "print", "collectgarbage", NULL};
  for (int i = 0; removed[i]; i++) {
    lua_pushnil(L);
    lua_setglobal(L, removed[i]);
  }
  plan_lua_sandbox_start(L);
  luaL_newmetatable(L, TENSOR_MT);
  lua_pushcfunction(L, tensor_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "tensor");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
  for (int k = 0; k < plan_op_kind_count(); k++) {
    lua_pushstring(L, plan_op_kind_name(k));
    lua_pushcclosure(L, op_call, 1);
    lua_setglobal(L, plan_op_kind_name(k));
  }
  static const char *const colls[] = {"all_reduce", "all_gather",
                                      "reduce_scatter", "all_to_all", NULL};
  for (int i = 0; colls[i]; i++) {
    lua_pushstring(L, colls[i]);
    lua_pushcclosure(L, collective, 1);
    lua_setglobal(L, colls[i]);
  }
}

/* Runs in protected mode: the body, its function, the outputs bound. */
static int run_body(lua_State *L) {
  plan_trace *t = trace_of(L);
  const char *body = plan_trace_body(t);
  int line = plan_trace_body_line(t);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i < line; i++) /* numbered as in the plan file */
    luaL_addchar(&b, '\n');
  luaL_addstring(&b, body ? body : "");
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  lua_pushfstring(L, "@%s", plan_trace_file(t));
  if (luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t"))
    return lua_error(L);
  lua_call(L, 0, 1);
  if (lua_type(L, -1) != LUA_TFUNCTION)
    return luaL_error(L,
                      "the body returns %s, not a function of the "
                      "region's inputs",
                      luaL_typename(L, -1));
  int nin = plan_trace_ninputs(t), nout = plan_trace_noutputs(t);
  luaL_checkstack(L, nin + nout + 4, "the region's inputs");
  for (int k = 0; k < nin; k++) {
    int h = plan_trace_input(t, k);
    if (h < 0)
      return builder_error(L);
    push_tensor(L, h);
  }
  int base = lua_gettop(L) - nin - 1;
  lua_call(L, nin, LUA_MULTRET);
  int got = lua_gettop(L) - base;
  if (got != nout)
    return luaL_error(L,
                      "the body's function returns %d values for %d "
                      "outputs",
                      got, nout);
  for (int k = 0; k < nout; k++) {
    if (!luaL_testudata(L, base + 1 + k, TENSOR_MT))
      return luaL_error(L, "output '%s' is %s, not a tensor",
                        plan_trace_output_name(t, k),
                        luaL_typename(L, base + 1 + k));
    if (plan_trace_set_output(t, k, check_tensor(L, base + 1 + k)) < 0)
      return builder_error(L);
  }
  return 0;
}

static int setup_and_run(lua_State *L) {
  open_sandbox(L);
  return run_body(L);
}

int plan_lua_trace_region(void *user, plan_trace *t) {
  (void)user;
  plan_lua_sandbox box;
  plan_lua_sandbox_init(&box, "the body", t);
  lua_State *L = plan_lua_sandbox_newstate(&box);
  if (!L)
    return plan_error_set(PLAN_ENOMEM, NULL, 0, 0,
                          "manual region '%s': no Lua state",
                          plan_trace_region(t));
  int rc = PLAN_OK;
  lua_pushcfunction(L, setup_and_run);
  int status = lua_pcall(L, 0, 0, 0);
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    char limit[200];
    if (box.tripped && (!msg || !strstr(msg, box.why))) /* caught as other */
      msg = box.why;
    else if (status == LUA_ERRMEM) {
      snprintf(limit, sizeof limit,
               "the body ran past its memory limit of %d MiB",
               (int)(PLAN_LUA_SANDBOX_MEMORY >> 20));
      msg = limit;
    }
    if (!msg)
      msg = "the body failed";
    char head[300];
    snprintf(head, sizeof head, "manual region '%s': ", plan_trace_region(t));
    /* "FILE:LINE: " first, then the region (a builder's message names it
     * already) */
    const char *file = plan_trace_file(t), *rest = msg;
    size_t fl = strlen(file);
    if (fl && !strncmp(msg, file, fl) && msg[fl] == ':') {
      const char *q = msg + fl + 1;
      while (*q >= '0' && *q <= '9')
        q++;
      if (q > msg + fl + 1 && q[0] == ':' && q[1] == ' ')
        rest = q + 2;
    }
    const char *region = strstr(rest, head) == rest ? "" : head;
    if (rest == msg) /* no line of its own: the body's first */
      rc = plan_error_set(PLAN_EINVALID, file, plan_trace_body_line(t), 1,
                          "%s%s", region, msg);
    else
      rc = plan_error_set(PLAN_EINVALID, NULL, 0, 0, "%.*s%s%s",
                          (int)(rest - msg), msg, region, rest);
  }
  lua_close(L);
  return rc;
}
