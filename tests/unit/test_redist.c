/* Unit tests for redist.c. A small simulator holds every rank's local
 * tensor, builds it from a placement (partial placements get exact integer
 * shares), runs the planned steps with the per-rank semantics of redist.h,
 * and after every step checks that the ranks hold exactly the tensor under
 * the step's `after` placement. Values are their global index (scaled), so a
 * misplaced element shows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ir/placement.h"
#include "lower/redist.h"

#define MAXR 8   /* ranks in a simulated mesh */
#define MAXE 512 /* elements of a simulated tensor */

typedef struct mesh {
  int naxes;
  int64_t size[PLAN_MAX_MESH_AXES];
  int nranks;
} mesh;

typedef struct local {
  int64_t shape[PLAN_MAX_RANK];
  int64_t v[MAXE];
} local;

/* The case under test: tensor shape and mesh; M scales every value so that
 * P(avg) reductions divide exactly. */
typedef struct sim {
  const mesh *m;
  int rank;
  const int64_t *shape;
  int64_t M;
  local r[MAXR];
} sim;

static local tmp_locals[MAXR]; /* scratch for steps */
static sim check_sim;          /* scratch for checks */

static const char *fmt(const plan_placement *p) {
  static char buf[4][PLAN_PLACEMENT_STRLEN];
  static int i;
  i = (i + 1) % 4;
  return plan_placement_format(p, buf[i]);
}

static plan_placement pl(const char *text, int naxes, int rank) {
  plan_placement p;
  char err[200] = "";
  if (plan_placement_parse(&p, text, strlen(text), naxes, err, sizeof err,
                           NULL) != PLAN_OK ||
      plan_placement_normalize(&p, rank, err, sizeof err) != PLAN_OK)
    fail_msg("placement \"%s\": %s", text, err);
  return p;
}

/* ---- mesh and local tensors ---------------------------------------------- */

static mesh make_mesh(const int64_t *sizes, int naxes) {
  mesh m = {.naxes = naxes, .nranks = 1};
  for (int a = 0; a < naxes; a++)
    m.nranks *= (int)(m.size[a] = sizes[a]);
  assert_true(m.nranks <= MAXR);
  return m;
}

static void coords(const mesh *m, int r, int64_t *c) {
  for (int a = m->naxes - 1; a >= 0; a--) {
    c[a] = r % m->size[a];
    r /= (int)m->size[a];
  }
}

static int rank_of(const mesh *m, const int64_t *c) {
  int r = 0;
  for (int a = 0; a < m->naxes; a++)
    r = r * (int)m->size[a] + (int)c[a];
  return r;
}

/* The members of r's group along axis a, in coordinate order. */
static int group(const mesh *m, int r, int a, int *g) {
  int64_t c[PLAN_MAX_MESH_AXES];
  coords(m, r, c);
  for (int64_t i = 0; i < m->size[a]; i++) {
    c[a] = i;
    g[i] = rank_of(m, c);
  }
  return (int)m->size[a];
}

static int64_t numel(const local *t, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= t->shape[d];
  return n;
}

/* torch.chunk, written out independently of the library. */
static void tchunk(int64_t L, int64_t k, int64_t c, int64_t *start,
                   int64_t *len) {
  int64_t ch = (L + k - 1) / k;
  int64_t s = c * ch > L ? L : c * ch;
  *start = s;
  *len = L - s < ch ? L - s : ch;
}

/* Copies src's elements with dim-d index in [so, so + n) to dst at
 * [dof, dof + n); the other dims of both must agree. */
static void copy_block(local *dst, int64_t dof, const local *src, int64_t so,
                       int64_t n, int d, int rank) {
  int64_t outer = 1, inner = 1;
  for (int e = 0; e < rank; e++) {
    if (e != d && dst->shape[e] != src->shape[e])
      fail_msg("shape mismatch on dim %d: %lld vs %lld", e,
               (long long)dst->shape[e], (long long)src->shape[e]);
    if (e < d)
      outer *= src->shape[e];
    if (e > d)
      inner *= src->shape[e];
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < n; i++)
      memcpy(&dst->v[(o * dst->shape[d] + dof + i) * inner],
             &src->v[(o * src->shape[d] + so + i) * inner],
             (size_t)inner * sizeof(int64_t));
}

static void slice(local *dst, const local *src, int d, int64_t start, int64_t n,
                  int rank) {
  memcpy(dst->shape, src->shape, sizeof dst->shape);
  dst->shape[d] = n;
  copy_block(dst, 0, src, start, n, d, rank);
}

/* dst = the pieces concatenated along d. */
static void concat(local *dst, local *const *pieces, int np, int d, int rank) {
  memcpy(dst->shape, pieces[0]->shape, sizeof dst->shape);
  dst->shape[d] = 0;
  for (int i = 0; i < np; i++)
    dst->shape[d] += pieces[i]->shape[d];
  assert_true(numel(dst, rank) <= MAXE);
  int64_t at = 0;
  for (int i = 0; i < np; i++) {
    copy_block(dst, at, pieces[i], 0, pieces[i]->shape[d], d, rank);
    at += pieces[i]->shape[d];
  }
}

/* dst = the elementwise reduction of the pieces. */
static void reduce(local *dst, local *const *pieces, int np, int op, int rank) {
  *dst = *pieces[0];
  int64_t n = numel(dst, rank);
  for (int i = 1; i < np; i++)
    for (int d = 0; d < rank; d++)
      assert_int_equal(pieces[i]->shape[d], dst->shape[d]);
  for (int64_t e = 0; e < n; e++) {
    int64_t acc = pieces[0]->v[e];
    for (int i = 1; i < np; i++) {
      int64_t x = pieces[i]->v[e];
      if (op == PLAN_RED_SUM || op == PLAN_RED_AVG)
        acc += x;
      else if (op == PLAN_RED_MAX)
        acc = x > acc ? x : acc;
      else
        acc = x < acc ? x : acc;
    }
    if (op == PLAN_RED_AVG) {
      if (acc % np != 0)
        fail_msg("inexact average: %lld / %d", (long long)acc, np);
      acc /= np;
    }
    dst->v[e] = acc;
  }
}

/* ---- executing a step ---------------------------------------------------- */

/* Runs step st on every rank. *send and *recv get the most elements any
 * rank sends and receives, counted as redist.h defines them. */
static void run_step(sim *s, const plan_redist_step *st, int64_t *send,
                     int64_t *recv) {
  const mesh *m = s->m;
  int a = st->axis, rank = s->rank;
  int64_t ms = 0, mr = 0;
  for (int r = 0; r < m->nranks; r++) {
    int64_t c[PLAN_MAX_MESH_AXES];
    int g[MAXR];
    coords(m, r, c);
    int k = group(m, r, a, g);
    local *pieces[MAXR];
    for (int i = 0; i < k; i++)
      pieces[i] = &s->r[g[i]];
    local *out = &tmp_locals[r];
    int64_t st0, n, own = numel(&s->r[r], rank), snd = 0, rcv = 0;
    switch (st->kind) {
    case PLAN_REDIST_ALL_GATHER:
      concat(out, pieces, k, st->dim, rank);
      snd = own * (k - 1);
      rcv = numel(out, rank) - own;
      break;
    case PLAN_REDIST_ALL_REDUCE:
      reduce(out, pieces, k, st->reduce, rank);
      tchunk(own, k, c[a], &st0, &n); /* the flattened tensor in k chunks */
      snd = rcv = own - n + (k - 1) * n;
      break;
    case PLAN_REDIST_REDUCE_SCATTER: {
      static local red;
      reduce(&red, pieces, k, st->reduce, rank);
      tchunk(red.shape[st->dim], k, c[a], &st0, &n);
      slice(out, &red, st->dim, st0, n, rank);
      snd = own - numel(out, rank);
      rcv = numel(out, rank) * (k - 1);
      break;
    }
    case PLAN_REDIST_ALL_TO_ALL: {
      /* Member c[a] receives piece c[a] (along to_dim) of every member. */
      static local parts[MAXR];
      local *pp[MAXR];
      for (int i = 0; i < k; i++) {
        tchunk(pieces[i]->shape[st->to_dim], k, c[a], &st0, &n);
        slice(&parts[i], pieces[i], st->to_dim, st0, n, rank);
        pp[i] = &parts[i];
      }
      concat(out, pp, k, st->dim, rank);
      int64_t kept = numel(&parts[c[a]], rank);
      snd = own - kept;
      rcv = numel(out, rank) - kept;
      break;
    }
    case PLAN_REDIST_SLICE:
      tchunk(s->r[r].shape[st->dim], k, c[a], &st0, &n);
      slice(out, &s->r[r], st->dim, st0, n, rank);
      break;
    case PLAN_REDIST_ZERO_NON_OWNER:
      *out = s->r[r];
      if (c[a] != 0)
        memset(out->v, 0, sizeof out->v);
      break;
    case PLAN_REDIST_RELABEL:
      *out = s->r[r];
      break;
    default:
      fail_msg("unknown step kind %d", st->kind);
    }
    ms = snd > ms ? snd : ms;
    mr = rcv > mr ? rcv : mr;
  }
  for (int r = 0; r < m->nranks; r++)
    s->r[r] = tmp_locals[r];
  if (send)
    *send = ms;
  if (recv)
    *recv = mr;
}

/* ---- building and checking a distributed tensor -------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The true (scaled) value of global element g. */
static int64_t truth(const sim *s, int64_t g) {
  return s->M * (3 * g - 10);
}

/* Global linear index of local element e of a rank with offsets off. */
static int64_t global_index(const sim *s, const local *t, const int64_t *off,
                            int64_t e) {
  int64_t idx[PLAN_MAX_RANK], g = 0;
  for (int d = s->rank - 1; d >= 0; d--) {
    idx[d] = e % t->shape[d] + off[d];
    e /= t->shape[d];
  }
  for (int d = 0; d < s->rank; d++)
    g = g * s->shape[d] + idx[d];
  return g;
}

/* Rank r's share of global element g under placement p: the P axes split
 * the value exactly (sum/avg: integer shares, multiples of M, whose
 * reduction is the value; max/min: one member holds it, the others hold
 * smaller/larger numbers). Mixed families are not generated as sources. */
static int64_t share(const sim *s, const plan_placement *p, const int64_t *c,
                     int64_t g) {
  int64_t v = truth(s, g);
  int64_t G = 1, me = 0, ka = 1;
  int op = -1;
  for (int a = 0; a < s->m->naxes; a++) {
    if (p->ax[a].kind != PLAN_PL_P)
      continue;
    G *= s->m->size[a];
    me = me * s->m->size[a] + c[a];
    op = p->ax[a].reduce == PLAN_RED_AVG ? PLAN_RED_SUM : p->ax[a].reduce;
    if (p->ax[a].reduce == PLAN_RED_AVG)
      ka *= s->m->size[a];
  }
  if (op < 0)
    return v;
  if (op == PLAN_RED_SUM) {
    int64_t t[MAXR], rest = (v / s->M) * ka;
    for (int64_t i = 0; i + 1 < G; i++) {
      t[i] = (int64_t)(mix((uint64_t)g * 131 + (uint64_t)i) % 11) - 5;
      rest -= t[i];
    }
    t[G - 1] = rest;
    return s->M * t[me];
  }
  int64_t owner = (int64_t)(mix((uint64_t)g) % (uint64_t)G);
  if (me == owner)
    return v;
  int64_t delta =
      s->M * (1 + (int64_t)(mix((uint64_t)g * 7 + (uint64_t)me) % 5));
  return op == PLAN_RED_MAX ? v - delta : v + delta;
}

static void build(sim *s, const plan_placement *p) {
  for (int r = 0; r < s->m->nranks; r++) {
    int64_t c[PLAN_MAX_MESH_AXES], off[PLAN_MAX_RANK];
    coords(s->m, r, c);
    local *t = &s->r[r];
    plan_redist_local_layout(p, s->shape, s->rank, s->m->size, c, t->shape,
                             off);
    int64_t n = numel(t, s->rank);
    assert_true(n <= MAXE);
    for (int64_t e = 0; e < n; e++)
      t->v[e] = share(s, p, c, global_index(s, t, off, e));
  }
}

/* Checks that s holds the tensor under placement p: the local shapes are
 * p's layout, and after reducing p's partial axes (in mesh order) every
 * rank, replicas included, holds exactly its piece. */
static void check(const sim *s, const plan_placement *p, const char *what) {
  sim *c = &check_sim;
  *c = *s;
  for (int a = 0; a < s->m->naxes; a++)
    if (p->ax[a].kind == PLAN_PL_P) {
      plan_redist_step st = {.kind = PLAN_REDIST_ALL_REDUCE,
                             .axis = a,
                             .reduce = (plan_reduce)p->ax[a].reduce};
      run_step(c, &st, NULL, NULL);
    }
  for (int r = 0; r < s->m->nranks; r++) {
    int64_t co[PLAN_MAX_MESH_AXES], off[PLAN_MAX_RANK], shp[PLAN_MAX_RANK];
    coords(s->m, r, co);
    plan_redist_local_layout(p, s->shape, s->rank, s->m->size, co, shp, off);
    const local *t = &c->r[r];
    for (int d = 0; d < s->rank; d++)
      if (t->shape[d] != shp[d])
        fail_msg("%s: rank %d dim %d has %lld, layout of %s says %lld", what, r,
                 d, (long long)t->shape[d], fmt(p), (long long)shp[d]);
    int64_t n = numel(t, s->rank);
    for (int64_t e = 0; e < n; e++) {
      int64_t g = global_index(s, t, off, e);
      if (t->v[e] != truth(s, g))
        fail_msg("%s: rank %d element %lld (global %lld) is %lld, want %lld "
                 "under %s",
                 what, r, (long long)e, (long long)g, (long long)t->v[e],
                 (long long)truth(s, g), fmt(p));
    }
  }
}

/* Plans src -> dst, runs it and checks every intermediate placement. */
static sim run_sim;
static void verify(const mesh *m, const int64_t *shape, int rank,
                   const plan_placement *src, const plan_placement *dst,
                   plan_redist_plan *plan) {
  char err[256] = "", what[160];
  int rc = plan_redistribute(plan, shape, rank, 4, m->size, m->naxes, src, dst,
                             err, sizeof err);
  if (rc != PLAN_OK)
    fail_msg("%s -> %s: %s", fmt(src), fmt(dst), err);
  sim *s = &run_sim;
  s->m = m;
  s->rank = rank;
  s->shape = shape;
  s->M = m->nranks;
  build(s, src);
  snprintf(what, sizeof what, "%s -> %s (source)", fmt(src), fmt(dst));
  check(s, src, what);
  for (int i = 0; i < plan->nsteps; i++) {
    const plan_redist_step *st = &plan->steps[i];
    int64_t send, recv;
    run_step(s, st, &send, &recv);
    snprintf(what, sizeof what, "%s -> %s step %d (%s axis %d)", fmt(src),
             fmt(dst), i, plan_redist_kind_name(st->kind), st->axis);
    check(s, &st->after, what);
    /* The cost hook is the exact maximum over ranks (4-byte elements). */
    if (st->send_bytes != 4 * send || st->recv_bytes != 4 * recv)
      fail_msg("%s: cost %lld/%lld bytes, simulated %lld/%lld", what,
               (long long)st->send_bytes, (long long)st->recv_bytes,
               (long long)(4 * send), (long long)(4 * recv));
  }
  const plan_placement *end =
      plan->nsteps ? &plan->steps[plan->nsteps - 1].after : src;
  if (!plan_placement_equal(end, dst))
    fail_msg("%s -> %s: plan ends at %s", fmt(src), fmt(dst), fmt(end));
  check(s, dst, what);
}

/* ---- generated placements ------------------------------------------------ */

#define MAXPL 1024

typedef struct plset {
  int n;
  plan_placement p[MAXPL];
} plset;

static bool next_perm(int *v, int n) {
  int i = n - 2;
  while (i >= 0 && v[i] >= v[i + 1])
    i--;
  if (i < 0)
    return false;
  int j = n - 1;
  while (v[j] <= v[i])
    j--;
  int t = v[i];
  v[i] = v[j], v[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--)
    t = v[a], v[a] = v[b], v[b] = t;
  return true;
}

/* Adds p with every nesting order of the dims from d on. */
static void add_orders(plset *set, plan_placement *p, int rank, int d) {
  if (d == rank) {
    plan_placement q = *p;
    char err[128];
    if (plan_placement_normalize(&q, rank, err, sizeof err) != PLAN_OK)
      fail_msg("generated placement: %s", err);
    assert_true(set->n < MAXPL);
    set->p[set->n++] = q;
    return;
  }
  int axes[PLAN_MAX_MESH_AXES], m = 0, perm[PLAN_MAX_MESH_AXES];
  for (int a = 0; a < p->naxes; a++)
    if (p->ax[a].kind == PLAN_PL_S && p->ax[a].dim == d)
      axes[m++] = a;
  for (int i = 0; i < m; i++)
    perm[i] = i;
  do {
    for (int i = 0; i < m; i++)
      p->ax[axes[i]].level = (int8_t)perm[i];
    add_orders(set, p, rank, d + 1);
  } while (m > 1 && next_perm(perm, m));
}

/* Every placement over m of: R, S(d) for each dim (in every nesting
 * order), and the partial ops listed. */
static void gen(plset *set, const mesh *m, int rank, const int *ops, int nops) {
  int nopt = 1 + rank + nops;
  int64_t total = 1;
  for (int a = 0; a < m->naxes; a++)
    total *= nopt;
  set->n = 0;
  for (int64_t x = 0; x < total; x++) {
    plan_placement p;
    plan_placement_replicated(&p, m->naxes);
    int64_t y = x;
    for (int a = 0; a < m->naxes; a++, y /= nopt) {
      int o = (int)(y % nopt);
      if (o >= 1 && o <= rank) {
        p.ax[a].kind = PLAN_PL_S;
        p.ax[a].dim = (int8_t)(o - 1);
      } else if (o > rank) {
        p.ax[a].kind = PLAN_PL_P;
        p.ax[a].reduce = (uint8_t)ops[o - rank - 1];
      }
    }
    add_orders(set, &p, rank, 0);
  }
}

/* Sources must give their partial axes an order-free meaning. */
static bool one_partial_family(const plan_placement *p) {
  int fam = -1;
  for (int a = 0; a < p->naxes; a++) {
    if (p->ax[a].kind != PLAN_PL_P)
      continue;
    int f = p->ax[a].reduce == PLAN_RED_AVG ? PLAN_RED_SUM : p->ax[a].reduce;
    if (fam >= 0 && f != fam)
      return false;
    fam = f;
  }
  return true;
}

static plset gen_set;
static plan_redist_plan sweep_plan;

static void test_sweep(void **state) {
  (void)state;
  static const struct {
    int naxes;
    int64_t size[3];
  } meshes[] = {{1, {2}},    {1, {3}},       {2, {2, 2}},
                {2, {2, 3}}, {3, {2, 2, 2}}, {2, {4, 1}}};
  static const struct {
    int rank;
    int64_t shape[3];
  } shapes[] = {{1, {5}},       {1, {7}},      {1, {1}},    {1, {3}},
                {1, {8}},       {2, {5, 3}},   {2, {1, 7}}, {2, {4, 2}},
                {3, {3, 5, 2}}, {3, {1, 3, 4}}};
  static const int ops_all[] = {PLAN_RED_SUM, PLAN_RED_MAX, PLAN_RED_AVG,
                                PLAN_RED_MIN};
  long pairs = 0, steps = 0, kinds[PLAN_REDIST_COUNT] = {0};
  for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) {
    mesh m = make_mesh(meshes[i].size, meshes[i].naxes);
    for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
      int rank = shapes[j].rank;
      /* Rank-3 tensors on 3-axis meshes would be ~70k pairs: skipped. */
      if (rank == 3 && m.naxes == 3)
        continue;
      /* avg and min on small meshes; sum and max everywhere. */
      int nops = m.naxes == 1 ? 4 : (m.naxes == 2 && rank == 1 ? 4 : 2);
      gen(&gen_set, &m, rank, ops_all, nops);
      for (int s = 0; s < gen_set.n; s++) {
        if (!one_partial_family(&gen_set.p[s]))
          continue;
        for (int t = 0; t < gen_set.n; t++) {
          verify(&m, shapes[j].shape, rank, &gen_set.p[s], &gen_set.p[t],
                 &sweep_plan);
          pairs++;
          steps += sweep_plan.nsteps;
          for (int k = 0; k < sweep_plan.nsteps; k++)
            kinds[sweep_plan.steps[k].kind]++;
        }
      }
    }
  }
  printf("redist sweep: %ld placement pairs, %ld steps, all exact:", pairs,
         steps);
  for (int k = 0; k < PLAN_REDIST_COUNT; k++) {
    printf(" %s %ld", plan_redist_kind_name((plan_redist_kind)k), kinds[k]);
    assert_true(kinds[k] > 0);
  }
  printf("\n");
  assert_true(pairs >= 5000);
}

/* ---- classic cases ------------------------------------------------------- */

typedef struct expect_step {
  plan_redist_kind kind;
  int axis, dim;
} expect_step;

/* Plans and simulates src -> dst and checks the step kinds, axes and dims
 * (dim -1: not checked). */
static plan_redist_plan *classic(const int64_t *mesh_sizes, int naxes,
                                 const int64_t *shape, int rank,
                                 const char *src, const char *dst,
                                 const expect_step *want, int nwant) {
  static plan_redist_plan plan;
  static mesh m;
  m = make_mesh(mesh_sizes, naxes);
  plan_placement ps = pl(src, naxes, rank), pd = pl(dst, naxes, rank);
  verify(&m, shape, rank, &ps, &pd, &plan);
  if (plan.nsteps != nwant) {
    for (int i = 0; i < plan.nsteps; i++)
      printf("  step %d: %s axis %d dim %d\n", i,
             plan_redist_kind_name(plan.steps[i].kind), plan.steps[i].axis,
             plan.steps[i].dim);
    fail_msg("%s -> %s: %d steps, want %d", src, dst, plan.nsteps, nwant);
  }
  for (int i = 0; i < nwant; i++) {
    const plan_redist_step *s = &plan.steps[i];
    if (s->kind != want[i].kind || s->axis != want[i].axis ||
        (want[i].dim >= 0 && s->dim != want[i].dim))
      fail_msg("%s -> %s: step %d is %s axis %d dim %d, want %s axis %d dim "
               "%d",
               src, dst, i, plan_redist_kind_name(s->kind), s->axis, s->dim,
               plan_redist_kind_name(want[i].kind), want[i].axis, want[i].dim);
  }
  return &plan;
}

#define ONE(k, a, d) ((expect_step[]){{PLAN_REDIST_##k, a, d}}), 1

static void test_classic_one_axis(void **state) {
  (void)state;
  const int64_t m2[] = {2}, m4[] = {4}, sq[] = {8, 8};
  plan_redist_plan *p;
  p = classic(m2, 1, sq, 2, "S(0)", "R", ONE(ALL_GATHER, 0, 0));
  /* Even [8, 8] f32 over 2 ranks: each sends and receives half: 128 B. */
  assert_int_equal(p->steps[0].send_bytes, 128);
  assert_int_equal(p->steps[0].recv_bytes, 128);
  assert_int_equal(p->send_bytes, 128);
  assert_int_equal(p->recv_bytes, 128);
  p = classic(m2, 1, sq, 2, "P(sum)", "R", ONE(ALL_REDUCE, 0, -1));
  assert_int_equal(p->steps[0].send_bytes, 256); /* 2 (k-1)/k of 256 B */
  assert_int_equal(p->steps[0].reduce, PLAN_RED_SUM);
  p = classic(m4, 1, sq, 2, "P(avg)", "R", ONE(ALL_REDUCE, 0, -1));
  assert_int_equal(p->steps[0].reduce, PLAN_RED_AVG);
  assert_int_equal(p->steps[0].send_bytes, 384); /* 2 * 3/4 * 256 */
  p = classic(m2, 1, sq, 2, "P(sum)", "S(0)", ONE(REDUCE_SCATTER, 0, 0));
  assert_int_equal(p->steps[0].send_bytes, 128);
  assert_int_equal(p->steps[0].recv_bytes, 128);
  classic(m4, 1, sq, 2, "P(max)", "S(1)", ONE(REDUCE_SCATTER, 0, 1));
  p = classic(m2, 1, sq, 2, "S(0)", "S(1)", ONE(ALL_TO_ALL, 0, 0));
  assert_int_equal(p->steps[0].to_dim, 1);
  assert_int_equal(p->steps[0].send_bytes, 64);
  assert_int_equal(p->steps[0].recv_bytes, 64);
  p = classic(m2, 1, sq, 2, "R", "S(1)", ONE(SLICE, 0, 1));
  assert_int_equal(p->send_bytes, 0);
  classic(m2, 1, sq, 2, "R", "P(sum)", ONE(ZERO_NON_OWNER, 0, -1));
  p = classic(m4, 1, sq, 2, "R", "P(max)", ONE(RELABEL, 0, -1));
  assert_int_equal(p->steps[0].reduce, PLAN_RED_MAX);
  classic(m2, 1, sq, 2, "S(1)", "S(1)", NULL, 0);
  classic(m2, 1, sq, 2, "P(avg)", "P(avg)", NULL, 0);
  classic(m2, 1, sq, 2, "P(sum)", "P(max)",
          (expect_step[]){{PLAN_REDIST_ALL_REDUCE, 0, -1},
                          {PLAN_REDIST_RELABEL, 0, -1}},
          2);
  classic(m4, 1, sq, 2, "S(0)", "P(sum)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 0, 0},
                          {PLAN_REDIST_ZERO_NON_OWNER, 0, -1}},
          2);
  /* Uneven: 5 on 4 ranks is 2, 2, 1, 0. The largest piece goes to 3
   * members (6 elements); the empty rank receives all 5. */
  const int64_t five[] = {5};
  p = classic(m4, 1, five, 1, "S(0)", "R", ONE(ALL_GATHER, 0, 0));
  assert_int_equal(p->steps[0].send_bytes, 6 * 4);
  assert_int_equal(p->steps[0].recv_bytes, 5 * 4);
  /* 1 row on 4 ranks: only rank 0 has data. */
  const int64_t one[] = {1, 3};
  classic(m4, 1, one, 2, "S(0)", "S(1)", ONE(ALL_TO_ALL, 0, 0));
}

static void test_uneven_nesting(void **state) {
  (void)state;
  const int64_t m22[] = {2, 2}, five[] = {5};
  /* 5 rows on dp=2 x tp=2 as S(0)S(0): 2, 1, 1, 1. Gathering dp would
   * leave a strided mix; tp must go first, then dp, then tp is re-cut. */
  classic(m22, 2, five, 1, "S(0)S(0)", "RS(0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 1, 0},
                          {PLAN_REDIST_ALL_GATHER, 0, 0},
                          {PLAN_REDIST_SLICE, 1, 0}},
          3);
  /* Keeping the major level is a plain gather of the minor one. */
  classic(m22, 2, five, 1, "S(0)S(0)", "S(0)R", ONE(ALL_GATHER, 1, 0));
  classic(m22, 2, five, 1, "S(0)R", "S(0)S(0)", ONE(SLICE, 1, 0));
  /* tp already shards 0 but must become the minor level under dp. */
  classic(m22, 2, five, 1, "RS(0)", "S(0)S(0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 1, 0},
                          {PLAN_REDIST_SLICE, 0, 0},
                          {PLAN_REDIST_SLICE, 1, 0}},
          3);
  /* Reordering the levels of one dim: everything comes off and back on. */
  classic(m22, 2, five, 1, "S(0)S(0)", "S(0:1)S(0:0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 1, 0},
                          {PLAN_REDIST_ALL_GATHER, 0, 0},
                          {PLAN_REDIST_SLICE, 1, 0},
                          {PLAN_REDIST_SLICE, 0, 0}},
          4);
  const int64_t m222[] = {2, 2, 2}, seven[] = {7};
  classic(m222, 3, seven, 1, "S(0)S(0)S(0)", "RS(0)S(0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 2, 0},
                          {PLAN_REDIST_ALL_GATHER, 1, 0},
                          {PLAN_REDIST_ALL_GATHER, 0, 0},
                          {PLAN_REDIST_SLICE, 1, 0},
                          {PLAN_REDIST_SLICE, 2, 0}},
          5);
}

static void test_multi_axis(void **state) {
  (void)state;
  const int64_t m22[] = {2, 2}, sq[] = {8, 8}, r5[] = {5, 3};
  /* Swapping the dims of two axes: one gather frees dim 0, then tp moves
   * there by all-to-all, then dp is cut from R. */
  classic(m22, 2, sq, 2, "S(0)S(1)", "S(1)S(0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 0, 0},
                          {PLAN_REDIST_ALL_TO_ALL, 1, 1},
                          {PLAN_REDIST_SLICE, 0, 1}},
          3);
  /* An add that is ready goes first (cheaper gather after it). */
  classic(m22, 2, r5, 2, "S(0)R", "RS(1)",
          (expect_step[]){{PLAN_REDIST_SLICE, 1, 1},
                          {PLAN_REDIST_ALL_GATHER, 0, 0}},
          2);
  /* Both axes move to dim 1 as tp, dp: tp's all-to-all makes dp's ready. */
  classic(m22, 2, r5, 2, "S(0)S(0)", "S(1:1)S(1:0)",
          (expect_step[]){{PLAN_REDIST_ALL_TO_ALL, 1, 0},
                          {PLAN_REDIST_ALL_TO_ALL, 0, 0}},
          2);
  /* The all-reduce waits for the slice (half the data). */
  classic(m22, 2, sq, 2, "P(sum)R", "RS(0)",
          (expect_step[]){{PLAN_REDIST_SLICE, 1, 0},
                          {PLAN_REDIST_ALL_REDUCE, 0, -1}},
          2);
  /* ... and goes before a gather. */
  classic(m22, 2, sq, 2, "P(sum)S(0)", "RR",
          (expect_step[]){{PLAN_REDIST_ALL_REDUCE, 0, -1},
                          {PLAN_REDIST_ALL_GATHER, 1, 0}},
          2);
  /* ZeRO-style: the gradient's partial dp becomes the major shard. */
  classic(m22, 2, sq, 2, "P(sum)S(0)", "S(0)S(0)",
          (expect_step[]){{PLAN_REDIST_ALL_GATHER, 1, 0},
                          {PLAN_REDIST_REDUCE_SCATTER, 0, 0},
                          {PLAN_REDIST_SLICE, 1, 0}},
          3);
  classic(m22, 2, sq, 2, "P(sum)P(sum)", "S(0)S(0)",
          (expect_step[]){{PLAN_REDIST_REDUCE_SCATTER, 0, 0},
                          {PLAN_REDIST_REDUCE_SCATTER, 1, 0}},
          2);
  classic(m22, 2, sq, 2, "P(sum)P(sum)", "S(0:1)S(0:0)",
          (expect_step[]){{PLAN_REDIST_REDUCE_SCATTER, 1, 0},
                          {PLAN_REDIST_REDUCE_SCATTER, 0, 0}},
          2);
}

/* ---- layout, names, errors ----------------------------------------------- */

static void test_local_layout(void **state) {
  (void)state;
  plan_placement p = pl("S(0)S(0)", 2, 2);
  const int64_t shape[] = {5, 3}, ms[] = {2, 2};
  const int64_t want_len[] = {2, 1, 1, 1}, want_off[] = {0, 2, 3, 4};
  for (int r = 0; r < 4; r++) {
    int64_t c[2] = {r / 2, r % 2}, len[2], off[2];
    plan_redist_local_layout(&p, shape, 2, ms, c, len, off);
    assert_int_equal(len[0], want_len[r]);
    assert_int_equal(off[0], want_off[r]);
    assert_int_equal(len[1], 3);
    assert_int_equal(off[1], 0);
  }
  p = pl("S(1)P", 2, 2);
  int64_t c[2] = {1, 1}, len[2];
  plan_redist_local_layout(&p, shape, 2, ms, c, len, NULL);
  assert_int_equal(len[0], 5);
  assert_int_equal(len[1], 1);
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(plan_redist_kind_name(PLAN_REDIST_ALL_GATHER),
                      "all_gather");
  assert_string_equal(plan_redist_kind_name(PLAN_REDIST_RELABEL), "relabel");
  assert_string_equal(plan_redist_kind_name(PLAN_REDIST_COUNT), "?");
  for (int k = 0; k < PLAN_REDIST_COUNT; k++)
    assert_string_not_equal(plan_redist_kind_name((plan_redist_kind)k), "?");
}

static void test_errors(void **state) {
  (void)state;
  static plan_redist_plan plan;
  char err[200];
  const int64_t shape[] = {4, 4}, ms[] = {2, 2}, bad_ms[] = {2, 0};
  plan_placement a = pl("S(0)R", 2, 2), b = pl("RR", 2, 2);
  plan_placement one = pl("R", 1, 2);
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 4, ms, 2, &a, &one, err, sizeof err),
      PLAN_EINVALID);
  assert_non_null(strstr(err, "target placement has 1 axes"));
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 4, bad_ms, 2, &a, &b, err, sizeof err),
      PLAN_EINVALID);
  assert_non_null(strstr(err, "axis 1"));
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 0, ms, 2, &a, &b, err, sizeof err),
      PLAN_EINVALID);
  plan_placement c = a;
  c.ax[0].dim = 5; /* out of range for rank 2 */
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 4, ms, 2, &c, &b, err, sizeof err),
      PLAN_EINVALID);
  assert_non_null(strstr(err, "source placement"));
  c = pl("S(0)S(0)", 2, 2);
  c.ax[1].level = 0; /* two axes at level 0 */
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 4, ms, 2, &b, &c, err, sizeof err),
      PLAN_EINVALID);
  c = b;
  c.ax[0].kind = PLAN_PL_P;
  c.ax[0].reduce = PLAN_RED_COUNT;
  assert_int_equal(
      plan_redistribute(&plan, shape, 2, 4, ms, 2, &c, &b, NULL, 0),
      PLAN_EINVALID);
  assert_int_equal(
      plan_redistribute(&plan, shape, 9, 4, ms, 2, &a, &b, err, sizeof err),
      PLAN_EINVALID);
  /* Scalars and 0-axis meshes plan to nothing. */
  plan_placement r0 = pl("", 0, 0), p0 = pl("P", 1, 0), q0 = pl("R", 1, 0);
  assert_int_equal(
      plan_redistribute(&plan, NULL, 0, 4, NULL, 0, &r0, &r0, err, sizeof err),
      PLAN_OK);
  assert_int_equal(plan.nsteps, 0);
  assert_int_equal(
      plan_redistribute(&plan, NULL, 0, 8, ms, 1, &p0, &q0, err, sizeof err),
      PLAN_OK);
  assert_int_equal(plan.nsteps, 1);
  assert_int_equal(plan.steps[0].send_bytes, 8);
}

/* Shard ratios: a level is the same only with the same weights, the steps
 * carry the set of the level they add, and the bytes follow every rank's
 * piece (8 elements as 3:1 on dp=2: 6 and 2). */
static void test_ratios(void **state) {
  (void)state;
  int64_t w[2] = {3, 1};
  plan_ratios set = {0, 2, w};
  int64_t sizes[2] = {2, 2}, shape[1] = {8};
  plan_placement even, ratio, rep;
  plan_placement_replicated(&rep, 2);
  even = rep;
  even.ax[0] = (plan_axis_pl){PLAN_PL_S, 0, 0, -1, 0};
  ratio = even;
  ratio.ax[0].ratio = 1;
  char err[256];
  plan_redist_plan rp;
  /* S(0|3:1) -> R: one all-gather; rank 0 sends its 6, rank 1 receives 6 */
  assert_int_equal(plan_redistribute_r(&rp, shape, 1, 4, sizes, 2, &set, 1,
                                       &ratio, &rep, err, sizeof err),
                   PLAN_OK);
  assert_int_equal(rp.nsteps, 1);
  assert_int_equal(rp.steps[0].kind, PLAN_REDIST_ALL_GATHER);
  assert_int_equal(rp.steps[0].send_bytes, 6 * 4);
  assert_int_equal(rp.steps[0].recv_bytes, 6 * 4);
  /* R -> S(0|3:1): a slice that adds the set */
  assert_int_equal(plan_redistribute_r(&rp, shape, 1, 4, sizes, 2, &set, 1,
                                       &rep, &ratio, err, sizeof err),
                   PLAN_OK);
  assert_int_equal(rp.nsteps, 1);
  assert_int_equal(rp.steps[0].kind, PLAN_REDIST_SLICE);
  assert_int_equal(rp.steps[0].ratio, 1);
  assert_int_equal(rp.steps[0].after.ax[0].ratio, 1);
  /* S(0) -> S(0|3:1): not the same level: gather, then slice */
  assert_int_equal(plan_redistribute_r(&rp, shape, 1, 4, sizes, 2, &set, 1,
                                       &even, &ratio, err, sizeof err),
                   PLAN_OK);
  assert_int_equal(rp.nsteps, 2);
  assert_int_equal(rp.steps[0].kind, PLAN_REDIST_ALL_GATHER);
  assert_int_equal(rp.steps[1].kind, PLAN_REDIST_SLICE);
  assert_true(plan_placement_equal(&rp.steps[1].after, &ratio));
  assert_false(plan_placement_equal(&even, &ratio));
  /* P(sum) -> S(0|3:1): a reduce-scatter; rank 0 keeps 6 (receives 6),
   * rank 1 sends 6 */
  plan_placement part = rep;
  part.ax[0] = (plan_axis_pl){PLAN_PL_P, PLAN_RED_SUM, 0, -1, 0};
  assert_int_equal(plan_redistribute_r(&rp, shape, 1, 4, sizes, 2, &set, 1,
                                       &part, &ratio, err, sizeof err),
                   PLAN_OK);
  assert_int_equal(rp.nsteps, 1);
  assert_int_equal(rp.steps[0].kind, PLAN_REDIST_REDUCE_SCATTER);
  assert_int_equal(rp.steps[0].send_bytes, 6 * 4);
  assert_int_equal(rp.steps[0].recv_bytes, 6 * 4);
  /* the layout of either rank */
  int64_t len, off, c1[2] = {1, 0};
  plan_redist_local_layout_r(&ratio, shape, 1, sizes, &set, 1, c1, &len, &off);
  assert_int_equal(len, 2);
  assert_int_equal(off, 6);
  /* a set of another axis is refused */
  set.axis = 1;
  assert_int_equal(plan_redistribute_r(&rp, shape, 1, 4, sizes, 2, &set, 1,
                                       &rep, &ratio, err, sizeof err),
                   PLAN_EINVALID);
  assert_non_null(strstr(err, "ratio set"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_local_layout),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_classic_one_axis),
      cmocka_unit_test(test_uneven_nesting),
      cmocka_unit_test(test_multi_axis),
      cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_ratios),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
