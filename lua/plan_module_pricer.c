/* p:redist_pricer(placements [, hardware]): the redistribution prices of
 * the dp strategy's units, in C. A search numbers its placements (ids,
 * 1-based, placements[id] the text) and asks the seconds of bringing a
 * tensor from one id to another millions of times, most of them asked
 * before; the pricer answers from a memo keyed by (class, from, to), a
 * class being the tensors of one role, dtype and shape (a redistribution's
 * time depends on nothing else of the tensor), and parses each placement
 * once per class. The memo is a dense row of prices per (class, from),
 * indexed by `to` (a unit asks a row's prices one after another: they
 * lie together), with a hash for ids numbered after a row was made and
 * for everything past 64 MiB of rows. A miss is priced as p:cost_redist prices
 * it (and counted in p:stats() the same way); a pair the planner cannot change
 * is priced 0, as the search's callback did.
 *
 *   local pr = p:redist_pricer(pl_of, "h100")
 *   local c = pr:class("layers.0.ln1.out")   -- an integer, 1-based
 *   pr:price(c, from, to)                    -- seconds (0 when from == to)
 *   pr:stats()                               -- {classes, priced, memo}
 *
 * plan.dp_unit's run takes the pricer in place of its callback
 * (plan_pricer.h). The pricer keeps its plan and its placements table
 * alive (user values 1 and 2; 3 maps a class's key to its number). */
#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_module_internal.h"
#include "plan_pricer.h"

#define PRICER_MT "libplan.pricer"
#define PRICER_MAX_ID ((1 << 24) - 1)
#define PRICER_MAX_CLASSES ((1 << 15) - 1)

typedef struct pclass {
  int tensor;         /* the tensor its placements are parsed for */
  int cap;            /* entries of pl and parsed */
  plan_placement *pl; /* by id - 1 */
  uint8_t *parsed;
} pclass;

/* A dense row of the memo: the prices from one placement of a class to
 * the ids 1..width, -1 until priced. A unit asks a row's prices one
 * after another, so they lie together; ids past the width (numbered
 * after the row was made) go to the hash memo. */
typedef struct prow {
  double *v;
  int width;
} prow;

/* at most this many dense entries in all (64 MiB); past it, the hash */
#define PRICER_DENSE_MAX ((size_t)8 << 20)

struct plan_lua_pricer {
  char *profile; /* NULL: the plan's own hardware */
  pclass *cls;
  int ncls, capcls;
  uint64_t *keys; /* 0: empty */
  double *vals;
  size_t cap, used;
  /* the dense rows, found by (class, from) */
  uint64_t *rkeys; /* 0: empty */
  int *ridx;       /* the row's index in rows */
  size_t rcap, rused;
  prow *rows;
  size_t nrows, caprows, dense, dense_used;
  lua_Integer priced;
};

static void pricer_free(plan_lua_pricer *pr) {
  for (int c = 0; c < pr->ncls; c++) {
    free(pr->cls[c].pl);
    free(pr->cls[c].parsed);
  }
  free(pr->cls);
  free(pr->keys);
  free(pr->vals);
  for (size_t r = 0; r < pr->nrows; r++)
    free(pr->rows[r].v);
  free(pr->rows);
  free(pr->rkeys);
  free(pr->ridx);
  free(pr->profile);
  memset(pr, 0, sizeof *pr);
}

static int pricer_gc(lua_State *L) {
  pricer_free(luaL_checkudata(L, 1, PRICER_MT));
  return 0;
}

plan_lua_pricer *plan_lua_topricer(lua_State *L, int arg) {
  return luaL_testudata(L, arg, PRICER_MT);
}

static void oom(lua_State *L) {
  luaL_error(L, "redist_pricer: out of memory");
}

/* p:redist_pricer(placements [, hardware]) */
static int m_redist_pricer(lua_State *L) {
  plan_lua_live(L); /* raises when the plan is closed */
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *hw = luaL_optstring(L, 3, NULL);
  plan_lua_pricer *pr = lua_newuserdatauv(L, sizeof *pr, 3);
  memset(pr, 0, sizeof *pr);
  luaL_setmetatable(L, PRICER_MT);
  if (hw && !(pr->profile = strdup(hw)))
    oom(L);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, -2, 2);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 3);
  return 1;
}

/* The class of tensor `name` (1-based), made on first sight: its key is
 * what the search's own memo keyed on, "role dtype[d0,d1,...]". */
static int class_of(lua_State *L, plan_lua_pricer *pr, int self,
                    const char *name) {
  lua_getiuservalue(L, self, 1);
  lplan *lp = plan_lua_toplan(L, -1);
  lua_pop(L, 1);
  if (!lp || !lp->p)
    return luaL_error(L, "redist_pricer: the plan is closed");
  const plan_program *prog = plan_get_program(lp->p);
  int t = plan_program_tensor_find(prog, name);
  if (t < 0)
    return luaL_error(L, "no tensor '%s'", name);
  int64_t dims[PLAN_MAX_RANK];
  int rank = plan_program_tensor_shape(prog, t, dims, PLAN_MAX_RANK);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, plan_program_tensor_role(prog, t));
  luaL_addchar(&b, ' ');
  luaL_addstring(&b, plan_program_tensor_dtype(prog, t));
  luaL_addchar(&b, '[');
  for (int d = 0; d < rank; d++) {
    char num[32];
    snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)dims[d]);
    luaL_addstring(&b, num);
  }
  luaL_addchar(&b, ']');
  luaL_pushresult(&b); /* the key */
  lua_getiuservalue(L, self, 3);
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) == LUA_TNUMBER) {
    int c = (int)lua_tointeger(L, -1);
    lua_pop(L, 3);
    return c;
  }
  lua_pop(L, 1);
  if (pr->ncls >= PRICER_MAX_CLASSES)
    return luaL_error(L, "redist_pricer: more than %d tensor classes",
                      PRICER_MAX_CLASSES);
  if (pr->ncls == pr->capcls) {
    int cap = pr->capcls ? 2 * pr->capcls : 16;
    pclass *cls = realloc(pr->cls, sizeof *cls * (size_t)cap);
    if (!cls)
      oom(L);
    pr->cls = cls;
    pr->capcls = cap;
  }
  pr->cls[pr->ncls] = (pclass){.tensor = t};
  int c = ++pr->ncls;
  lua_pushvalue(L, -2);
  lua_pushinteger(L, c);
  lua_rawset(L, -3);
  lua_pop(L, 2);
  return c;
}

static int m_class(lua_State *L) {
  plan_lua_pricer *pr = luaL_checkudata(L, 1, PRICER_MT);
  lua_pushinteger(L, class_of(L, pr, 1, luaL_checkstring(L, 2)));
  return 1;
}

/* Placement `id` parsed for class c (once). */
static const plan_placement *placement(lua_State *L, int self, lplan *lp,
                                       pclass *c, int id) {
  if (id > c->cap) {
    int cap = c->cap ? c->cap : 64;
    while (cap < id)
      cap *= 2;
    plan_placement *pl = realloc(c->pl, sizeof *pl * (size_t)cap);
    if (!pl)
      oom(L);
    c->pl = pl;
    uint8_t *parsed = realloc(c->parsed, (size_t)cap);
    if (!parsed) {
      oom(L);
      return NULL; /* not reached: oom raises a Lua error */
    }
    memset(parsed + c->cap, 0, (size_t)(cap - c->cap));
    c->parsed = parsed;
    c->cap = cap;
  }
  if (!c->parsed[id - 1]) {
    lua_getiuservalue(L, self, 2);
    if (lua_rawgeti(L, -1, id) != LUA_TSTRING)
      luaL_error(L, "redist_pricer: no placement %d", id);
    plan_lua_parse_placement(L, lp->p, lua_tostring(L, -1), c->tensor,
                             &c->pl[id - 1]);
    lua_pop(L, 2);
    c->parsed[id - 1] = 1;
  }
  return &c->pl[id - 1];
}

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* Doubles an open-addressing table of keys (0: empty) and values of
 * `size` bytes each (first: its capacity when empty), moving every entry. */
static void table_grow(lua_State *L, uint64_t **keys, void **vals, size_t size,
                       size_t *cap, size_t first) {
  size_t ncap = *cap ? *cap * 2 : first;
  uint64_t *nk = calloc(ncap, sizeof *nk);
  char *nv = malloc(ncap * size);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    oom(L);
  }
  const char *ov = *vals;
  for (size_t i = 0; i < *cap; i++) {
    if (!(*keys)[i])
      continue;
    size_t h = mix((*keys)[i]) & (ncap - 1);
    while (nk[h])
      h = (h + 1) & (ncap - 1);
    nk[h] = (*keys)[i];
    memcpy(nv + h * size, ov + i * size, size);
  }
  free(*keys);
  free(*vals);
  *keys = nk;
  *vals = nv;
  *cap = ncap;
}

/* The slot for a new key whose probe ended at h, the table grown first
 * when it would be over half full (the probe then made again); the key
 * is set and counted, the caller sets the value. */
static size_t table_insert(lua_State *L, uint64_t **keys, void **vals,
                           size_t size, size_t *cap, size_t *used, size_t first,
                           uint64_t key, size_t h) {
  if (2 * (*used + 1) > *cap) {
    table_grow(L, keys, vals, size, cap, first);
    h = mix(key) & (*cap - 1);
    while ((*keys)[h])
      h = (h + 1) & (*cap - 1);
  }
  (*keys)[h] = key;
  (*used)++;
  return h;
}

/* the tables' first capacities */
#define MEMO_FIRST ((size_t)1 << 14)
#define ROWS_FIRST ((size_t)1024)

static void memo_grow(lua_State *L, plan_lua_pricer *pr) {
  void *vals = pr->vals;
  table_grow(L, &pr->keys, &vals, sizeof *pr->vals, &pr->cap, MEMO_FIRST);
  pr->vals = vals;
}

static void rows_grow(lua_State *L, plan_lua_pricer *pr) {
  void *idx = pr->ridx;
  table_grow(L, &pr->rkeys, &idx, sizeof *pr->ridx, &pr->rcap, ROWS_FIRST);
  pr->ridx = idx;
}

/* The dense row of (cls, from), made the first time as wide as the ids
 * numbered so far; NULL past the memory bound. */
static prow *dense_row(lua_State *L, plan_lua_pricer *pr, int self, int cls,
                       int from) {
  uint64_t key = ((uint64_t)cls << 24 | (uint64_t)from) + 1;
  if (!pr->rcap)
    rows_grow(L, pr);
  size_t h = mix(key) & (pr->rcap - 1);
  while (pr->rkeys[h]) {
    if (pr->rkeys[h] == key)
      return &pr->rows[pr->ridx[h]];
    h = (h + 1) & (pr->rcap - 1);
  }
  if (pr->dense >= PRICER_DENSE_MAX)
    return NULL; /* full: the hash memo from here on */
  lua_getiuservalue(L, self, 2);
  size_t ids = lua_rawlen(L, -1);
  lua_pop(L, 1);
  size_t width = (ids + 63) / 64 * 64;
  if (width > PRICER_MAX_ID)
    width = PRICER_MAX_ID;
  if (pr->dense + width > PRICER_DENSE_MAX) {
    pr->dense = PRICER_DENSE_MAX;
    return NULL;
  }
  if (pr->nrows == pr->caprows) {
    size_t cap = pr->caprows ? 2 * pr->caprows : 256;
    prow *rows = realloc(pr->rows, sizeof *rows * cap);
    if (!rows)
      oom(L);
    pr->rows = rows;
    pr->caprows = cap;
  }
  double *v = malloc(sizeof *v * (width ? width : 1));
  if (!v)
    oom(L);
  for (size_t x = 0; x < width; x++)
    v[x] = -1;
  /* kept before the keys grow, so an error there leaks nothing */
  size_t r = pr->nrows++;
  pr->rows[r] = (prow){v, (int)width};
  pr->dense += width;
  void *idx = pr->ridx;
  h = table_insert(L, &pr->rkeys, &idx, sizeof *pr->ridx, &pr->rcap, &pr->rused,
                   ROWS_FIRST, key, h);
  pr->ridx = idx;
  pr->ridx[h] = (int)r;
  return &pr->rows[r];
}

/* The seconds of bringing a tensor of class c from `from` to `to`, priced
 * now (the memo missed). */
static double price_now(lua_State *L, plan_lua_pricer *pr, int self, int cls,
                        int from, int to);

double plan_lua_pricer_price(lua_State *L, plan_lua_pricer *pr, int self,
                             int cls, int from, int to) {
  if (from == to)
    return 0;
  if (cls < 1 || cls > pr->ncls)
    luaL_error(L, "redist_pricer: no class %d", cls);
  if (from < 1 || to < 1 || from > PRICER_MAX_ID || to > PRICER_MAX_ID)
    luaL_error(L, "redist_pricer: placement id %d out of range",
               from < 1 || from > PRICER_MAX_ID ? from : to);
  prow *row = dense_row(L, pr, self, cls, from);
  if (row && to <= row->width) {
    double *v = &row->v[to - 1];
    if (*v < 0) {
      *v = price_now(L, pr, self, cls, from, to); /* makes no row */
      pr->dense_used++;
    }
    return *v;
  }
  uint64_t key =
      (((uint64_t)cls << 48) | ((uint64_t)from << 24) | (uint64_t)to);
  if (!pr->cap)
    memo_grow(L, pr);
  size_t h = mix(key) & (pr->cap - 1);
  while (pr->keys[h]) {
    if (pr->keys[h] == key)
      return pr->vals[h];
    h = (h + 1) & (pr->cap - 1);
  }
  double s = price_now(L, pr, self, cls, from, to);
  void *vals = pr->vals;
  h = table_insert(L, &pr->keys, &vals, sizeof *pr->vals, &pr->cap, &pr->used,
                   MEMO_FIRST, key, h);
  pr->vals = vals;
  pr->vals[h] = s;
  return s;
}

static double price_now(lua_State *L, plan_lua_pricer *pr, int self, int cls,
                        int from, int to) {
  lua_getiuservalue(L, self, 1);
  lplan *lp = plan_lua_toplan(L, -1);
  lua_pop(L, 1);
  if (!lp || !lp->p)
    luaL_error(L, "redist_pricer: the plan is closed");
  pclass *c = &pr->cls[cls - 1];
  /* parse both first: parsing `to` may grow c->pl and move `from` */
  placement(L, self, lp, c, from);
  const plan_placement *b = placement(L, self, lp, c, to);
  const plan_placement *a = placement(L, self, lp, c, from);
  const plan_cost_model *m = plan_lua_cost_model(L, lp, pr->profile);
  double s = 0;
  lp->n_cost_redist++;
  pr->priced++;
  /* a pair the planner cannot change (or no model) is priced 0, as the
   * search's callback priced p:cost_redist's nil */
  if (!m || plan_cost_redist_seconds(&s, m, lp->p, c->tensor, a, b))
    s = 0;
  return s;
}

static int m_price(lua_State *L) {
  plan_lua_pricer *pr = luaL_checkudata(L, 1, PRICER_MT);
  int cls = (int)luaL_checkinteger(L, 2);
  int from = (int)luaL_checkinteger(L, 3);
  int to = (int)luaL_checkinteger(L, 4);
  lua_pushnumber(L, plan_lua_pricer_price(L, pr, 1, cls, from, to));
  return 1;
}

static int m_stats(lua_State *L) {
  plan_lua_pricer *pr = luaL_checkudata(L, 1, PRICER_MT);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, pr->ncls);
  lua_setfield(L, -2, "classes");
  lua_pushinteger(L, pr->priced);
  lua_setfield(L, -2, "priced");
  lua_pushinteger(L, (lua_Integer)(pr->used + pr->dense_used));
  lua_setfield(L, -2, "memo");
  return 1;
}

void plan_lua_pricer_register(lua_State *L) {
  if (luaL_newmetatable(L, PRICER_MT)) {
    lua_pushcfunction(L, pricer_gc);
    lua_setfield(L, -2, "__gc");
    static const luaL_Reg methods[] = {{"class", m_class},
                                       {"price", m_price},
                                       {"stats", m_stats},
                                       {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

const luaL_Reg plan_lua_pricer_methods[] = {{"redist_pricer", m_redist_pricer},
                                            {NULL, NULL}};
