/* plan.dp_unit: the inner loop of the dp strategy (lua/strategies/dp.lua),
 * the DP over one unit's ops from an entry state, on placements as
 * integer ids (the strategy numbers them). Part of the Lua frontend only.
 *
 *   local u = plan.dp_unit{
 *     nentry = n,                    -- live placements before the unit
 *     ops = {{cost = {c...},         -- compute seconds of each strategy
 *             nin = k, nout = m,
 *             sin = {id...},         -- strategy s's input j: [s*k + j]
 *             sout = {id...},        -- strategy s's output j: [s*m + j]
 *             inpos = {p...},        -- input j's index in the live list
 *                                    -- before the op, 0: not live
 *             src = {code...},       -- the live list after the op: code
 *                                    -- k > 0 the live entry k before,
 *                                    -- -k output k, -1000 - j input j
 *             cls = {c...}}, ...}    -- input j's class in the pricer
 *                                    -- (pr:class; needed with a pricer)
 *   }
 *   u:run({id...}, limit, redist) --> {{cost, arr = {id...},
 *                                       choice = {s...}}...}, exact
 *
 * redist is a pricer (p:redist_pricer, plan_pricer.h: asked for class
 * cls[j]) or a function: redist(op, j, from, to) gives the seconds of
 * bringing op's input j from placement id `from` to `to` (ids differ);
 * the unit asks each once, over all its runs, and may ask pairs no
 * transition needs (a row's lists price what the first state with a
 * bound may want). A transition costs the strategy's compute plus its live
 * inputs' redistributions; two partial plans that reach one live state
 * keep the cheaper (ties: the earlier); past `limit` states the cheapest
 * are kept (ties: the earlier made), in that order, and `exact` is
 * false. The states come back in the order they were made, or by cost
 * when cut. The unit owns its memory (freed with it), so a callback that
 * raises leaks nothing. */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan_dp.h"
#include "plan_pricer.h"

#define UNIT_MT "libplan.dpunit"

typedef struct dop {
  int n, nin, nout, nn;
  double *cost;
  int *sin, *sout, *inpos, *src;
  int *cls;     /* input j's class in the pricer (NULL: none given) */
  int j0;       /* the first input live before the op, -1: none */
  int *order;   /* the strategies by cost (ties: by number) */
  double *umin; /* the least compute of a strategy wanting input j0's
                   distinct placement x (dop.uid) */
  /* the distinct placements the strategies ask of each input: input j's
   * are uid[uoff[j] .. uoff[j + 1]); strategy s's input j is
   * uid[uoff[j] + sinu[s * nin + j]] */
  int *uid, *uoff, *sinu;
} dop;

typedef struct level {
  int count, nn;
  double *cost;
  int *back, *si, *arr;
  size_t cap; /* entries allocated */
} level;

typedef struct ranked {
  double cost;
  int q;
} ranked;

typedef struct dunit {
  int nops, nentry;
  dop *ops;
  level *lv; /* nops + 1 */
  /* The redistribution memo, a row per (op, input, from): the seconds
   * of bringing that input from `from` to each of the placements its
   * strategies ask (dop.uid), -1 until asked. A state finds its rows once
   * per input and then reads them in place, where a lookup per strategy
   * and input was most of a large search's time (cache misses). */
  uint64_t *keys; /* 0: empty */
  size_t *rows;   /* the row's offset in pool */
  size_t cap, used;
  double *pool; /* each row after a header: its sorted list's offset in
                   spool plus one (0: none yet), an integer */
  size_t pool_len, pool_cap;
  /* A row's strategies by their lower bound from it (row_sorted) */
  int *spool;
  size_t spool_len, spool_cap;
  /* scratch of a step */
  int *slot;
  size_t slot_cap;
  int *cand; /* a state's strategies within the bound */
  size_t cand_cap;
  uint64_t *bits; /* cand_cap bits */
  ranked *rank;
  size_t rank_cap;
} dunit;

static void unit_free(dunit *u) {
  if (u->ops)
    for (int i = 0; i < u->nops; i++) {
      free(u->ops[i].cost);
      free(u->ops[i].sin);
      free(u->ops[i].sout);
      free(u->ops[i].inpos);
      free(u->ops[i].src);
      free(u->ops[i].uid);
      free(u->ops[i].uoff);
      free(u->ops[i].sinu);
      free(u->ops[i].cls);
      free(u->ops[i].order);
      free(u->ops[i].umin);
    }
  if (u->lv)
    for (int i = 0; i <= u->nops; i++) {
      free(u->lv[i].cost);
      free(u->lv[i].back);
      free(u->lv[i].si);
      free(u->lv[i].arr);
    }
  free(u->ops);
  free(u->lv);
  free(u->keys);
  free(u->rows);
  free(u->pool);
  free(u->spool);
  free(u->slot);
  free(u->cand);
  free(u->bits);
  free(u->rank);
  memset(u, 0, sizeof *u);
}

static int unit_gc(lua_State *L) {
  unit_free(luaL_checkudata(L, 1, UNIT_MT));
  return 0;
}

static void *xcalloc(lua_State *L, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p)
    luaL_error(L, "dp_unit: out of memory");
  return p;
}

static int field_table(lua_State *L, int t, const char *name) {
  if (lua_getfield(L, t, name) != LUA_TTABLE)
    return luaL_error(L, "dp_unit: field '%s' is not a table", name);
  return lua_gettop(L);
}

static int field_int(lua_State *L, int t, const char *name) {
  lua_getfield(L, t, name);
  int isnum;
  lua_Integer v = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum)
    return luaL_error(L, "dp_unit: field '%s' is not an integer", name);
  return (int)v;
}

/* t[1..n] as integers into a (n entries). */
static void read_ints(lua_State *L, int t, int *a, int n) {
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, t, k + 1);
    int isnum;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum)
      luaL_error(L, "dp_unit: entry %d is not an integer", k + 1);
    a[k] = (int)v;
  }
}

/* Field `name` of table o, n integers, into *dst (owned by the unit
 * from the start, so an error reading it leaks nothing). */
static void field_ints(lua_State *L, int o, const char *name, int **dst,
                       int n) {
  int t = field_table(L, o, name);
  if ((int)lua_rawlen(L, t) < n)
    luaL_error(L, "dp_unit: field '%s' has %d entries, not %d", name,
               (int)lua_rawlen(L, t), n);
  *dst = xcalloc(L, (size_t)n, sizeof **dst);
  read_ints(L, t, *dst, n);
  lua_pop(L, 1);
}

/* d's distinct input placements (dop.uid): a linear search over each
 * input's list, which the strategies of one op keep short. */
static void distinct_inputs(lua_State *L, dop *d) {
  size_t nall = (size_t)d->n * (size_t)d->nin;
  d->uid = xcalloc(L, nall, sizeof *d->uid);
  d->uoff = xcalloc(L, (size_t)d->nin + 1, sizeof *d->uoff);
  d->sinu = xcalloc(L, nall, sizeof *d->sinu);
  int used = 0;
  for (int j = 0; j < d->nin; j++) {
    d->uoff[j] = used;
    for (int s = 0; s < d->n; s++) {
      int id = d->sin[(size_t)s * (size_t)d->nin + (size_t)j], x = d->uoff[j];
      while (x < used && d->uid[x] != id)
        x++;
      if (x == used)
        d->uid[used++] = id;
      d->sinu[(size_t)s * (size_t)d->nin + (size_t)j] = x - d->uoff[j];
    }
  }
  d->uoff[d->nin] = used;
}

/* The strategies of d by cost, ties by number (insertion into place: an
 * op's list is short and this runs once per unit). */
static void cost_order(lua_State *L, dop *d) {
  d->order = xcalloc(L, (size_t)d->n, sizeof *d->order);
  for (int s = 0; s < d->n; s++) {
    int j = s;
    while (j > 0 && d->cost[d->order[j - 1]] > d->cost[s]) {
      d->order[j] = d->order[j - 1];
      j--;
    }
    d->order[j] = s;
  }
}

static int l_dp_unit(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  dunit *u = lua_newuserdatauv(L, sizeof *u, 0); /* 2 */
  memset(u, 0, sizeof *u);
  luaL_setmetatable(L, UNIT_MT);
  u->nentry = field_int(L, 1, "nentry");
  int ot = field_table(L, 1, "ops"); /* 3 */
  int nops = (int)lua_rawlen(L, ot);
  if (nops > 65535)
    return luaL_error(L, "dp_unit: %d ops in one unit", nops);
  u->ops = xcalloc(L, (size_t)nops, sizeof *u->ops);
  u->nops = nops;
  u->lv = xcalloc(L, (size_t)nops + 1, sizeof *u->lv);
  for (int i = 0; i < nops; i++) {
    lua_rawgeti(L, ot, i + 1);
    int o = lua_gettop(L);
    dop *d = &u->ops[i];
    d->nin = field_int(L, o, "nin");
    d->nout = field_int(L, o, "nout");
    if (d->nin < 0 || d->nin > 255 || d->nout < 0)
      return luaL_error(L, "dp_unit: op %d has %d inputs", i + 1, d->nin);
    int t = field_table(L, o, "cost");
    d->n = (int)lua_rawlen(L, t);
    d->cost = xcalloc(L, (size_t)d->n, sizeof *d->cost);
    for (int s = 0; s < d->n; s++) {
      lua_rawgeti(L, t, s + 1);
      d->cost[s] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    field_ints(L, o, "sin", &d->sin, d->n * d->nin);
    field_ints(L, o, "sout", &d->sout, d->n * d->nout);
    field_ints(L, o, "inpos", &d->inpos, d->nin);
    lua_getfield(L, o, "cls");
    bool has_cls = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (has_cls)
      field_ints(L, o, "cls", &d->cls, d->nin);
    distinct_inputs(L, d);
    cost_order(L, d);
    d->j0 = -1;
    for (int j = 0; j < d->nin && d->j0 < 0; j++)
      if (d->inpos[j] > 0)
        d->j0 = j;
    if (d->j0 >= 0) {
      int j = d->j0, nu = d->uoff[j + 1] - d->uoff[j];
      d->umin = xcalloc(L, (size_t)nu, sizeof *d->umin);
      for (int x = 0; x < nu; x++)
        d->umin[x] = HUGE_VAL;
      for (int s = 0; s < d->n; s++) {
        double *m = &d->umin[d->sinu[(size_t)s * (size_t)d->nin + (size_t)j]];
        if (d->cost[s] < *m)
          *m = d->cost[s];
      }
    }
    t = field_table(L, o, "src");
    d->nn = (int)lua_rawlen(L, t);
    lua_pop(L, 1);
    field_ints(L, o, "src", &d->src, d->nn);
    int before = i ? u->ops[i - 1].nn : u->nentry;
    for (int j = 0; j < d->nin; j++)
      if (d->inpos[j] < 0 || d->inpos[j] > before)
        return luaL_error(L, "dp_unit: op %d input %d: live index %d of %d",
                          i + 1, j + 1, d->inpos[j], before);
    for (int m = 0; m < d->nn; m++) {
      int c = d->src[m];
      if (c > before || (c <= 0 && c > -1000 && -c > d->nout) ||
          (c <= -1000 && (-c - 1000 < 1 || -c - 1000 > d->nin)))
        return luaL_error(L, "dp_unit: op %d: bad live source %d", i + 1, c);
    }
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  return 1;
}

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

static void memo_grow(lua_State *L, dunit *u) {
  size_t cap = u->cap ? u->cap * 2 : 4096;
  uint64_t *keys = calloc(cap, sizeof *keys);
  size_t *rows = calloc(cap, sizeof *rows);
  if (!keys || !rows) {
    free(keys);
    free(rows);
    luaL_error(L, "dp_unit: out of memory");
  }
  for (size_t i = 0; i < u->cap; i++) {
    if (!u->keys[i])
      continue;
    size_t h = mix(u->keys[i]) & (cap - 1);
    while (keys[h])
      h = (h + 1) & (cap - 1);
    keys[h] = u->keys[i];
    rows[h] = u->rows[i];
  }
  free(u->keys);
  free(u->rows);
  u->keys = keys;
  u->rows = rows;
  u->cap = cap;
}

/* The offset in u->pool of the row of op i's input j from `from` (a new
 * row of -1 the first time). */
static size_t row_of(lua_State *L, dunit *u, int i, int j, int from) {
  uint64_t key =
      ((((uint64_t)i << 8) | (uint64_t)j) << 32 | (uint64_t)(uint32_t)from) + 1;
  size_t h = mix(key) & (u->cap - 1);
  while (u->keys[h]) {
    if (u->keys[h] == key)
      return u->rows[h];
    h = (h + 1) & (u->cap - 1);
  }
  const dop *d = &u->ops[i];
  size_t width = (size_t)(d->uoff[j + 1] - d->uoff[j]) + 1;
  if (u->pool_len + width > u->pool_cap) {
    size_t cap = u->pool_cap ? u->pool_cap : 4096;
    while (cap < u->pool_len + width)
      cap *= 2;
    double *pool = realloc(u->pool, sizeof *pool * cap);
    if (!pool)
      luaL_error(L, "dp_unit: out of memory");
    u->pool = pool;
    u->pool_cap = cap;
  }
  size_t off = u->pool_len + 1;
  u->pool[off - 1] = 0;
  for (size_t x = 0; x + 1 < width; x++)
    u->pool[off + x] = -1;
  u->pool_len += width;
  if (2 * (u->used + 1) > u->cap) {
    memo_grow(L, u);
    h = mix(key) & (u->cap - 1);
    while (u->keys[h])
      h = (h + 1) & (u->cap - 1);
  }
  u->keys[h] = key;
  u->rows[h] = off;
  u->used++;
  return off;
}

/* The seconds of op i's input j from `from` to `to`, of the pricer or
 * the callback at stack index 4 (once: the row keeps it). */
static double ask(lua_State *L, dunit *u, plan_lua_pricer *pr, int i, int j,
                  int from, int to) {
  if (pr) {
    const dop *d = &u->ops[i];
    if (!d->cls)
      luaL_error(L, "dp_unit: op %d has no 'cls' for the pricer", i + 1);
    return plan_lua_pricer_price(L, pr, 4, d->cls[j], from, to);
  }
  lua_pushvalue(L, 4);
  lua_pushinteger(L, i + 1);
  lua_pushinteger(L, j + 1);
  lua_pushinteger(L, from);
  lua_pushinteger(L, to);
  lua_call(L, 4, 1);
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Level lv room for cap states of nn entries. */
static void level_room(lua_State *L, level *lv, size_t cap, int nn) {
  if (lv->cap >= cap && lv->nn == nn)
    return;
  if (lv->cap < cap)
    lv->cap = cap;
  free(lv->cost);
  free(lv->back);
  free(lv->si);
  free(lv->arr);
  lv->cost = malloc(sizeof *lv->cost * lv->cap);
  lv->back = malloc(sizeof *lv->back * lv->cap);
  lv->si = malloc(sizeof *lv->si * lv->cap);
  lv->arr = malloc(sizeof *lv->arr * (lv->cap * (size_t)nn + 1));
  lv->nn = nn;
  if (!lv->cost || !lv->back || !lv->si || !lv->arr) {
    lv->cap = 0;
    luaL_error(L, "dp_unit: out of memory");
  }
}

static int by_cost(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  return x->q < y->q ? -1 : x->q > y->q;
}

static void rank_room(lua_State *L, dunit *u, size_t n) {
  if (u->rank_cap >= n)
    return;
  free(u->rank);
  u->rank = malloc(sizeof *u->rank * n);
  u->rank_cap = u->rank ? n : 0;
  if (!u->rank)
    luaL_error(L, "dp_unit: out of memory");
}

static void select_first(ranked *a, size_t n, size_t k);

/* The limit-th smallest of the count costs made so far (count > limit). */
static double kth_cost(lua_State *L, dunit *u, const double *cost, int count,
                       int limit) {
  rank_room(L, u, (size_t)count);
  for (int q = 0; q < count; q++)
    u->rank[q] = (ranked){cost[q], q};
  select_first(u->rank, (size_t)count, (size_t)limit);
  double t = u->rank[0].cost;
  for (int r = 1; r < limit; r++)
    if (u->rank[r].cost > t)
      t = u->rank[r].cost;
  return t;
}

static uint64_t state_hash(const int *a, int nn) {
  uint64_t hv = 1469598103934665603ULL;
  for (int m = 0; m < nn; m++)
    hv = (hv ^ (uint64_t)(uint32_t)a[m]) * 1099511628211ULL;
  return mix(hv);
}

/* The step's table of the states made, grown as they are: a slot holds a
 * state's number or -1. Sized by the states made, not by every
 * transition a step could make (clearing that was a large part of a
 * step). */
static void slots_room(lua_State *L, dunit *u, size_t hcap, const level *nv,
                       int count) {
  if (u->slot_cap < hcap) {
    free(u->slot);
    u->slot = malloc(sizeof *u->slot * hcap);
    u->slot_cap = u->slot ? hcap : 0;
    if (!u->slot)
      luaL_error(L, "dp_unit: out of memory");
  }
  for (size_t h = 0; h < hcap; h++)
    u->slot[h] = -1;
  for (int q = 0; q < count; q++) {
    size_t h =
        state_hash(nv->arr + (size_t)q * (size_t)nv->nn, nv->nn) & (hcap - 1);
    while (u->slot[h] >= 0)
      h = (h + 1) & (hcap - 1);
    u->slot[h] = q;
  }
}

/* Sorts a[0..n) by before() (an in-place quicksort, median of three,
 * short ranges by insertion): the order is total, so any sort gives the
 * same result. */
static bool before(const ranked *x, const ranked *y);
static void sort_ranked(ranked *a, size_t n) {
  while (n > 16) {
    size_t mid = n / 2;
    ranked *x = &a[0], *y = &a[mid], *z = &a[n - 1], *m;
    if (before(x, y))
      m = before(y, z) ? y : (before(x, z) ? z : x);
    else
      m = before(x, z) ? x : (before(y, z) ? z : y);
    ranked t = *m;
    *m = a[n - 1];
    a[n - 1] = t;
    size_t store = 0;
    for (size_t i = 0; i + 1 < n; i++)
      if (before(&a[i], &t)) {
        ranked v = a[i];
        a[i] = a[store];
        a[store++] = v;
      }
    a[n - 1] = a[store];
    a[store] = t;
    /* the shorter side by recursion, the longer by the loop */
    if (store < n - store - 1) {
      sort_ranked(a, store);
      a += store + 1;
      n -= store + 1;
    } else {
      sort_ranked(a + store + 1, n - store - 1);
      n = store;
    }
  }
  for (size_t i = 1; i < n; i++) {
    ranked v = a[i];
    size_t j = i;
    while (j > 0 && before(&v, &a[j - 1])) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = v;
  }
}

/* Moves the entries of a[0..n) whose cost is within t to its front;
 * returns how many. */
static size_t within_first(ranked *a, size_t n, double t) {
  size_t k = 0;
  for (size_t x = 0; x < n; x++)
    if (a[x].cost <= t) {
      ranked v = a[x];
      a[x] = a[k];
      a[k++] = v;
    }
  return k;
}

/* A row's lists after a head: the first list's length, the sorted parts'
 * lengths of each, and the t they were made for (a double). */
#define ROW_HEAD (3 + (int)(sizeof(double) / sizeof(int)))

/* The strategies of op i for the states whose input j0 stands at `from`
 * (the row at off), as two lists by a lower bound of a transition's cost
 * past the state's own: first those whose redistribution from `from` is
 * known, by compute plus that redistribution, then the others, by
 * compute alone (a redistribution is never negative), ties by number.
 * Made once per row, by the first state that has a bound, t its room
 * under the bound: the placements a strategy within t wants are priced
 * first, as that state's loop would price them, and only the part of
 * each list within t is sorted (a later state's room is mostly less),
 * the rest kept after it unsorted. Returns the row's head (ROW_HEAD),
 * then the lists. */
static int *row_sorted(lua_State *L, dunit *u, plan_lua_pricer *pr, int i,
                       size_t off, int from, double t) {
  const dop *d = &u->ops[i];
  size_t have = (size_t)u->pool[off - 1];
  if (have)
    return u->spool + (have - 1);
  int j = d->j0, nu = d->uoff[j + 1] - d->uoff[j];
  double *row = u->pool + off;
  for (int x = 0; x < nu; x++) {
    int to = d->uid[d->uoff[j] + x];
    if (row[x] < 0 && to != from && d->umin[x] <= t)
      row[x] = ask(L, u, pr, i, j, from, to);
  }
  size_t n = (size_t)d->n, known = 0;
  rank_room(L, u, n);
  ranked *a = u->rank;
  for (int s = 0; s < d->n; s++) { /* the known first, in place */
    size_t k = (size_t)s * (size_t)d->nin + (size_t)j;
    bool same = d->sin[k] == from;
    double r = same ? 0 : row[d->sinu[k]];
    if (same || r >= 0) {
      if ((size_t)s != known)
        a[s] = a[known];
      a[known++] = (ranked){d->cost[s] + r, s};
    } else {
      a[s] = (ranked){d->cost[s], s};
    }
  }
  /* each list's part within t sorted, the rest after it as it lies */
  size_t ks = within_first(a, known, t),
         us = within_first(a + known, n - known, t);
  sort_ranked(a, ks);
  sort_ranked(a + known, us);
  if (u->spool_len + n + ROW_HEAD > u->spool_cap) {
    size_t cap = u->spool_cap ? u->spool_cap : 4096;
    while (cap < u->spool_len + n + ROW_HEAD)
      cap *= 2;
    int *sp = realloc(u->spool, sizeof *sp * cap);
    if (!sp)
      luaL_error(L, "dp_unit: out of memory");
    u->spool = sp;
    u->spool_cap = cap;
  }
  size_t at = u->spool_len;
  u->spool[at] = (int)known;
  u->spool[at + 1] = (int)ks;
  u->spool[at + 2] = (int)us;
  memcpy(u->spool + at + 3, &t, sizeof t);
  for (size_t x = 0; x < n; x++)
    u->spool[at + ROW_HEAD + x] = a[x].q;
  u->spool_len += n + ROW_HEAD;
  u->pool[off - 1] = (double)(at + 1);
  return u->spool + at;
}

/* Grows the sorted parts of a row's lists (row_sorted) to room t, past
 * the room they were made for: the entries of each list's rest within t
 * are sorted onto the end of its sorted part, which stays sorted (they
 * all exceed the old room, which every entry before them is within). */
static void extend_row(lua_State *L, dunit *u, const dop *d, const double *r0,
                       int from, int *head, double t) {
  int known = head[0], *a = head + ROW_HEAD;
  rank_room(L, u, (size_t)d->n);
  for (int list = 0; list < 2; list++) {
    int lo = list ? known : 0, hi = list ? d->n : known;
    int *sorted = &head[1 + list];
    int m = 0;
    for (int x = lo + *sorted; x < hi; x++) {
      int s = a[x];
      size_t k = (size_t)s * (size_t)d->nin + (size_t)d->j0;
      double lb = list ? d->cost[s]
                       : d->cost[s] + (d->sin[k] == from ? 0 : r0[d->sinu[k]]);
      u->rank[m++] = (ranked){lb, s};
    }
    size_t in = within_first(u->rank, (size_t)m, t);
    sort_ranked(u->rank, in);
    for (size_t x = 0; x < (size_t)m; x++)
      a[lo + *sorted + (int)x] = u->rank[x].q;
    *sorted += (int)in;
  }
  memcpy(head + 3, &t, sizeof t);
}

/* Sorts the distinct numbers a[0..k), each below n, ascending: by
 * insertion for a few, else through a bit per number. */
static void in_order(dunit *u, int *a, int k, int n) {
  if (k <= 24) {
    for (int i = 1; i < k; i++) {
      int v = a[i], j = i;
      while (j > 0 && a[j - 1] > v) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = v;
    }
    return;
  }
  uint64_t *bits = u->bits;
  size_t words = (size_t)n / 64 + 1;
  memset(bits, 0, sizeof *bits * words);
  for (int i = 0; i < k; i++)
    bits[a[i] / 64] |= (uint64_t)1 << (a[i] % 64);
  int m = 0;
  for (size_t w = 0; w < words; w++)
    for (uint64_t b = bits[w]; b; b &= b - 1)
      a[m++] = (int)(w * 64) + __builtin_ctzll(b);
}

/* One op's step from level pv into *nv. Once more than `limit` states are
 * made, a transition dearer than the limit-th cheapest so far is not made:
 * costs only fall and states are only added, so it could never be among
 * the `limit` kept (the bound is refreshed as the states double). *pruned
 * says whether any was left out (the level is then cut, as when over).
 * A state's strategies whose compute alone passes the bound are skipped
 * without being looked at (d->order: by cost, so they are a suffix of it,
 * found by bisection with the sum the loop would form); the others are
 * taken in their own order, so the states, their order and the bound's
 * refreshes are those of the plain loop over every strategy. */
static void step(lua_State *L, dunit *u, plan_lua_pricer *pr, int i,
                 const level *pv, level *nv, int limit, bool *pruned) {
  const dop *d = &u->ops[i];
  int nn = d->nn;
  size_t cap = (size_t)pv->count * (size_t)(d->n > 0 ? d->n : 1);
  level_room(L, nv, cap, nn);
  size_t hcap = 64;
  while (hcap < 2 * cap && hcap < 1024)
    hcap *= 2;
  slots_room(L, u, hcap, nv, 0);
  if (u->cand_cap < (size_t)d->n) {
    free(u->cand);
    free(u->bits);
    u->cand = malloc(sizeof *u->cand * (size_t)(d->n > 0 ? d->n : 1));
    u->bits = malloc(sizeof *u->bits * ((size_t)d->n / 64 + 1));
    u->cand_cap = u->cand && u->bits ? (size_t)d->n : 0;
    if (!u->cand || !u->bits)
      luaL_error(L, "dp_unit: out of memory");
  }
  int count = 0, next_check = 4 * limit;
  double bound = HUGE_VAL;
  *pruned = false;
  size_t row[256]; /* nin <= 255 */
  for (int st = 0; st < pv->count; st++) {
    const int *sarr = pv->arr + (size_t)st * (size_t)pv->nn;
    double base = pv->cost[st];
    for (int j = 0; j < d->nin; j++)
      if (d->inpos[j] > 0)
        row[j] = row_of(L, u, i, j, sarr[d->inpos[j] - 1]);
    /* the strategies that can be within the bound (with a margin over
     * the rounding of the loop's own sum, which then decides): prefixes
     * of lists by lower bounds of their cost */
    int within = d->n;
    const int *cand = NULL;
    if (bound < HUGE_VAL) {
      double t = bound - base + 1e-9 * bound;
      int *c = u->cand;
      within = 0;
      if (d->j0 >= 0) {
        int from = sarr[d->inpos[d->j0] - 1];
        const double *r0 = u->pool + row[d->j0];
        int *head = row_sorted(L, u, pr, i, row[d->j0], from, t);
        double made;
        memcpy(&made, head + 3, sizeof made);
        if (t > made) /* more room than the sorted parts were made for */
          extend_row(L, u, d, r0, from, head, t);
        int known = head[0], ks = head[1], us = head[2];
        const int *a = head + ROW_HEAD;
        for (int x = 0; x < ks; x++) {
          int s = a[x];
          size_t k = (size_t)s * (size_t)d->nin + (size_t)d->j0;
          if (d->cost[s] + (d->sin[k] == from ? 0 : r0[d->sinu[k]]) > t)
            break;
          c[within++] = s;
        }
        for (int x = known; x < known + us && d->cost[a[x]] <= t; x++)
          c[within++] = a[x];
      } else {
        while (within < d->n && d->cost[d->order[within]] <= t) {
          c[within] = d->order[within];
          within++;
        }
      }
      if (within < d->n) {
        *pruned = true; /* the others pass the bound in any order */
        if (within == 0)
          continue;
        { /* those alone, in their own order */
          in_order(u, c, within, d->n);
          cand = c;
        }
      }
    }
    int span = cand ? within : d->n;
    for (int x = 0; x < span; x++) {
      int s = cand ? cand[x] : x;
      double c = base + d->cost[s];
      const int *sin = d->sin + (size_t)s * (size_t)d->nin;
      const int *sinu = d->sinu + (size_t)s * (size_t)d->nin;
      const int *sout = d->sout + (size_t)s * (size_t)d->nout;
      for (int j = 0; j < d->nin && c <= bound; j++) {
        int k = d->inpos[j];
        if (k <= 0 || sarr[k - 1] == sin[j])
          continue;
        double *r = &u->pool[row[j] + (size_t)sinu[j]];
        if (*r < 0)
          *r = ask(L, u, pr, i, j, sarr[k - 1], sin[j]);
        c += *r;
      }
      if (c > bound) { /* seconds are never negative: no cheaper later */
        *pruned = true;
        continue;
      }
      int *na = nv->arr + (size_t)count * (size_t)nn;
      for (int m = 0; m < nn; m++) {
        int code = d->src[m];
        na[m] = code > 0       ? sarr[code - 1]
                : code > -1000 ? sout[-code - 1]
                               : sin[-code - 1001];
      }
      size_t h = state_hash(na, nn) & (hcap - 1);
      int found = -1;
      while (u->slot[h] >= 0) {
        int q = u->slot[h];
        if (!memcmp(nv->arr + (size_t)q * (size_t)nn, na,
                    sizeof(int) * (size_t)nn)) {
          found = q;
          break;
        }
        h = (h + 1) & (hcap - 1);
      }
      if (found < 0) {
        u->slot[h] = count;
        nv->cost[count] = c;
        nv->back[count] = st;
        nv->si[count] = s;
        if (++count >= next_check) {
          bound = kth_cost(L, u, nv->cost, count, limit);
          next_check *= 2;
        }
        if (2 * (size_t)count > hcap) {
          hcap *= 2;
          slots_room(L, u, hcap, nv, count);
        }
      } else if (c < nv->cost[found]) {
        nv->cost[found] = c;
        nv->back[found] = st;
        nv->si[found] = s;
      }
    }
  }
  nv->count = count;
}

static bool before(const ranked *x, const ranked *y) {
  return x->cost != y->cost ? x->cost < y->cost : x->q < y->q;
}

/* Moves the k first of a[0..n) in by_cost's order into a[0..k), in any
 * order (quickselect: linear on average, where sorting all n states of a
 * step was most of a large search's time). The order is total (q is
 * unique), so the k chosen are the same as a full sort's. */
static void select_first(ranked *a, size_t n, size_t k) {
  size_t lo = 0, hi = n; /* the k-th lies in [lo, hi) */
  while (hi - lo > 16) {
    size_t mid = lo + (hi - lo) / 2;
    /* median of three as the pivot, moved to hi - 1 */
    ranked *x = &a[lo], *y = &a[mid], *z = &a[hi - 1], *m;
    if (before(x, y))
      m = before(y, z) ? y : (before(x, z) ? z : x);
    else
      m = before(x, z) ? x : (before(y, z) ? z : y);
    ranked t = *m;
    *m = a[hi - 1];
    a[hi - 1] = t;
    size_t store = lo;
    for (size_t i = lo; i + 1 < hi; i++)
      if (before(&a[i], &t)) {
        ranked u = a[i];
        a[i] = a[store];
        a[store++] = u;
      }
    a[hi - 1] = a[store];
    a[store] = t;
    if (store == k || store + 1 == k)
      return; /* a[0..store] are the store + 1 first */
    if (store > k)
      hi = store;
    else
      lo = store + 1;
  }
  /* a short range: sorted, which places its first ones */
  qsort(a + lo, hi - lo, sizeof *a, by_cost);
}

/* Past limit states: the cheapest (ties: the earlier made), in that
 * order. */
static void cut(lua_State *L, dunit *u, level *lv, int limit) {
  int count = lv->count, nn = lv->nn;
  if (limit > count)
    limit = count;
  rank_room(L, u, (size_t)count);
  ranked *idx = u->rank;
  for (int q = 0; q < count; q++)
    idx[q] = (ranked){lv->cost[q], q};
  select_first(idx, (size_t)count, (size_t)limit);
  qsort(idx, (size_t)limit, sizeof *idx, by_cost);
  /* in place: the kept states in rank order, through a copy of each */
  double *cost = malloc(sizeof *cost * (size_t)limit);
  int *back = malloc(sizeof *back * (size_t)limit);
  int *si = malloc(sizeof *si * (size_t)limit);
  int *arr = malloc(sizeof *arr * ((size_t)limit * (size_t)nn + 1));
  if (!cost || !back || !si || !arr) {
    free(cost);
    free(back);
    free(si);
    free(arr);
    luaL_error(L, "dp_unit: out of memory");
  }
  for (int r = 0; r < limit; r++) {
    int q = idx[r].q;
    cost[r] = lv->cost[q];
    back[r] = lv->back[q];
    si[r] = lv->si[q];
    memcpy(arr + (size_t)r * (size_t)nn, lv->arr + (size_t)q * (size_t)nn,
           sizeof(int) * (size_t)nn);
  }
  memcpy(lv->cost, cost, sizeof *cost * (size_t)limit);
  memcpy(lv->back, back, sizeof *back * (size_t)limit);
  memcpy(lv->si, si, sizeof *si * (size_t)limit);
  memcpy(lv->arr, arr, sizeof *arr * (size_t)limit * (size_t)nn);
  free(cost);
  free(back);
  free(si);
  free(arr);
  lv->count = limit;
}

static int l_unit_run(lua_State *L) {
  dunit *u = luaL_checkudata(L, 1, UNIT_MT);
  luaL_checktype(L, 2, LUA_TTABLE);
  int limit = (int)luaL_checkinteger(L, 3);
  plan_lua_pricer *pr = plan_lua_topricer(L, 4);
  if (!pr)
    luaL_checktype(L, 4, LUA_TFUNCTION);
  lua_settop(L, 4);
  if (limit < 1)
    limit = 1;
  if ((int)lua_rawlen(L, 2) != u->nentry)
    return luaL_error(L, "dp_unit: an entry of %d placements, not %d",
                      (int)lua_rawlen(L, 2), u->nentry);
  if (!u->cap)
    memo_grow(L, u);
  level *lv = u->lv;
  level_room(L, &lv[0], 1, u->nentry);
  read_ints(L, 2, lv[0].arr, u->nentry);
  lv[0].count = 1;
  lv[0].cost[0] = 0;
  int exact = 1;
  for (int i = 0; i < u->nops; i++) {
    bool pruned;
    step(L, u, pr, i, &lv[i], &lv[i + 1], limit, &pruned);
    if (lv[i + 1].count > limit || pruned) {
      exact = 0;
      cut(L, u, &lv[i + 1], limit);
    }
  }
  const level *fv = &lv[u->nops];
  lua_createtable(L, fv->count, 0);
  for (int r = 0; r < fv->count; r++) {
    lua_createtable(L, 0, 3);
    lua_pushnumber(L, fv->cost[r]);
    lua_setfield(L, -2, "cost");
    lua_createtable(L, fv->nn, 0);
    for (int m = 0; m < fv->nn; m++) {
      lua_pushinteger(L, fv->arr[(size_t)r * (size_t)fv->nn + (size_t)m]);
      lua_rawseti(L, -2, m + 1);
    }
    lua_setfield(L, -2, "arr");
    lua_createtable(L, u->nops, 0);
    int q = r;
    for (int i = u->nops; i > 0; i--) {
      lua_pushinteger(L, lv[i].si[q] + 1);
      lua_rawseti(L, -2, i);
      q = lv[i].back[q];
    }
    lua_setfield(L, -2, "choice");
    lua_rawseti(L, -2, r + 1);
  }
  lua_pushboolean(L, exact);
  return 2;
}

void plan_dp_register(lua_State *L) {
  if (luaL_newmetatable(L, UNIT_MT)) {
    lua_pushcfunction(L, unit_gc);
    lua_setfield(L, -2, "__gc");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, l_unit_run);
    lua_setfield(L, -2, "run");
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_dp_unit);
  lua_setfield(L, -2, "dp_unit");
}
