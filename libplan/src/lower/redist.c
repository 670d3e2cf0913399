/* The redistribution planner (see redist.h for the per-rank meaning of each
 * step). The plan works on the ordered list of axes sharding each dim, major
 * to minor. A sharding can only be taken off a dim at its minor end (an
 * all-gather of a middle level would leave every rank a strided mix of
 * pieces when the chunks are uneven) and only put on at the minor end, so
 * for each dim the planner keeps the longest common major prefix of the
 * current and target lists, peels the rest off minor-first, and then grows
 * the list to the target's major-first. */
#include "lower/redist.h"

#include "ir/placement.h"

static const char *const kind_names[] = {
    "all_gather", "all_reduce",     "reduce_scatter", "all_to_all",
    "slice",      "zero_non_owner", "relabel"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == PLAN_REDIST_COUNT,
               "kind_names must name every plan_redist_kind");

const char *plan_redist_kind_name(plan_redist_kind k) {
  return (unsigned)k < PLAN_REDIST_COUNT ? kind_names[k] : "?";
}

/* ---- saturating arithmetic ----------------------------------------------- */

static int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return plan_mul_i64(a, b, &r) ? r : INT64_MAX;
}

static int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return plan_add_i64(a, b, &r) ? r : INT64_MAX;
}

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/* ---- layout -------------------------------------------------------------- */

void plan_redist_local_layout(const plan_placement *p, const int64_t *shape,
                              int rank, const int64_t *mesh_sizes,
                              const int64_t *coord, int64_t *local_shape,
                              int64_t *offset) {
  plan_redist_local_layout_r(p, shape, rank, mesh_sizes, NULL, 0, coord,
                             local_shape, offset);
}

void plan_redist_local_layout_r(const plan_placement *p, const int64_t *shape,
                                int rank, const int64_t *mesh_sizes,
                                const plan_ratios *sets, int nsets,
                                const int64_t *coord, int64_t *local_shape,
                                int64_t *offset) {
  for (int d = 0; d < rank; d++) {
    int64_t off, len;
    plan_placement_dim_range_r(p, d, shape[d], mesh_sizes, coord, sets, nsets,
                               &off, &len);
    if (local_shape)
      local_shape[d] = len;
    if (offset)
      offset[d] = off;
  }
}

/* Piece r of a length-L piece cut into k torch.chunks. */
static int64_t chunk_len(int64_t L, int64_t k, int64_t r) {
  int64_t ch = L / k + (L % k != 0);
  int64_t start;
  if (!plan_mul_i64(r, ch, &start) || start > L)
    start = L;
  return L - start < ch ? L - start : ch;
}

/* Adds to rs[] the coordinates at which the piece length of L in k chunks
 * can change (full chunks, the remainder, the empty tail): evaluating a
 * function of the piece lengths at these covers every coordinate. */
static int chunk_coords(int64_t L, int64_t k, int64_t *rs, int n) {
  int64_t ch = L / k + (L % k != 0);
  int64_t q = ch > 0 ? L / ch : 0; /* full chunks */
  int64_t cand[5] = {0, q - 1, q, q + 1, k - 1};
  for (int i = 0; i < 5; i++)
    if (cand[i] >= 0 && cand[i] < k)
      rs[n++] = cand[i];
  return n;
}

#define LEN_SET_CAP 128

/* The distinct lengths of the pieces of a dim of global size `size` after
 * the first `depth` levels of the axes in axes[] (major to minor). At most 3
 * new lengths arise per length and level, and they collapse quickly; past
 * LEN_SET_CAP the set is cut (the costs then become a lower bound). */
static int piece_lengths(int64_t size, const int *axes, int depth,
                         const int64_t *mesh, int64_t out[LEN_SET_CAP]) {
  /* the levels' product divides the size: every level is even, one
   * length (what the walk below finds, without it) */
  int64_t prod = 1;
  for (int l = 0; l < depth && prod > 0; l++)
    prod = mesh[axes[l]] > 0 ? sat_mul(prod, mesh[axes[l]]) : 0;
  if (prod > 0 && prod < INT64_MAX && size >= 0 && size % prod == 0) {
    out[0] = size / prod;
    return 1;
  }
  int n = 1;
  out[0] = size;
  for (int l = 0; l < depth; l++) {
    int64_t k = mesh[axes[l]];
    int64_t next[LEN_SET_CAP];
    int m = 0;
    for (int i = 0; i < n; i++) {
      int64_t rs[5];
      int nr = chunk_coords(out[i], k, rs, 0);
      for (int j = 0; j < nr; j++) {
        int64_t v = chunk_len(out[i], k, rs[j]);
        bool seen = false;
        for (int t = 0; t < m && !seen; t++)
          seen = next[t] == v;
        if (!seen && m < LEN_SET_CAP)
          next[m++] = v;
      }
    }
    for (int i = 0; i < m; i++)
      out[i] = next[i];
    n = m;
  }
  return n;
}

/* The mesh and its ratio sets: what a layout needs. */
typedef struct lay {
  const int64_t *mesh;
  int naxes;
  const plan_ratios *sets;
  int nsets;
} lay;

/* Steps coord to the next combination of the coordinates of the axes in
 * axes[0..n) (row-major); false after the last. */
static bool next_coord(int64_t *coord, const int *axes, int n,
                       const int64_t *mesh) {
  int t = n - 1;
  while (t >= 0 && ++coord[axes[t]] >= mesh[axes[t]])
    coord[axes[t--]] = 0;
  return t >= 0;
}

/* The largest local length of dim d over all ranks: with equal chunks the
 * first piece at every level (torch.chunk puts the remainder last); with
 * ratios the largest over the coordinates of the axes sharding d. */
static int64_t max_len(const plan_placement *p, int d, const int64_t *shape,
                       const lay *L) {
  int64_t coord[PLAN_MAX_MESH_AXES] = {0}, off, len, best = 0;
  int axes[PLAN_MAX_MESH_AXES], n = 0;
  bool ratios = false;
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++)
    ratios = ratios || (p->ax[a].kind == PLAN_PL_S && p->ax[a].dim == d &&
                        p->ax[a].ratio);
  if (!ratios) {
    /* torch.chunk's first piece at every level, the largest: nested
     * ceilings, ceil(ceil(n / a) / b) = ceil(n / (a b)), so the axes'
     * order does not matter (plan_placement_dim_range_r at coordinate 0,
     * without its walk) */
    int64_t l = shape[d] > 0 ? shape[d] : 0;
    for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++)
      if (p->ax[a].kind == PLAN_PL_S && p->ax[a].dim == d) {
        int64_t k = L->mesh[a] > 0 ? L->mesh[a] : 1;
        l = l / k + (l % k != 0);
      }
    return l;
  }
  n = plan_placement_dim_axes(p, d, axes); /* the coordinates walked */
  do {
    plan_placement_dim_range_r(p, d, shape[d], L->mesh, coord, L->sets,
                               L->nsets, &off, &len);
    best = max64(best, len);
  } while (ratios && next_coord(coord, axes, n, L->mesh));
  return best;
}

/* The largest product of local lengths over the dims other than x and y.
 * Distinct dims are sharded by distinct axes, so the maxima are
 * independent and multiply. */
static int64_t others_max(const plan_placement *p, const int64_t *shape,
                          int rank, const lay *L, int x, int y) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    if (d != x && d != y)
      n = sat_mul(n, max_len(p, d, shape, L));
  return n;
}

/* The elements of a rank's local block, and of the overlap of two of its
 * blocks (the part an all-to-all keeps). */
static int64_t block_elems(const plan_placement *p, const int64_t *shape,
                           int rank, const lay *L, const int64_t *coord,
                           const plan_placement *q, int64_t *common) {
  int64_t n = 1, c = 1;
  for (int d = 0; d < rank; d++) {
    int64_t o1, l1, o2, l2;
    plan_placement_dim_range_r(p, d, shape[d], L->mesh, coord, L->sets,
                               L->nsets, &o1, &l1);
    n = sat_mul(n, l1);
    if (q) {
      plan_placement_dim_range_r(q, d, shape[d], L->mesh, coord, L->sets,
                                 L->nsets, &o2, &l2);
      int64_t lo = max64(o1, o2), hi = o1 + l1 < o2 + l2 ? o1 + l1 : o2 + l2;
      c = sat_mul(c, hi > lo ? hi - lo : 0);
    }
  }
  if (common)
    *common = c;
  return n;
}

/* The bytes of a step whose pieces follow ratios, from every rank's blocks
 * before and after it (at most 2^16 ranks are looked at; past that the
 * figures are a lower bound). */
static void step_cost_ratios(const plan_redist_step *s, const int64_t *shape,
                             int rank, const lay *L, int64_t *send,
                             int64_t *recv) {
  int axes[PLAN_MAX_MESH_AXES];
  for (int a = 0; a < L->naxes; a++)
    axes[a] = a;
  int64_t coord[PLAN_MAX_MESH_AXES] = {0}, k = L->mesh[s->axis];
  int64_t count = 0;
  do {
    int64_t kept,
        b = block_elems(&s->before, shape, rank, L, coord, &s->after, &kept);
    int64_t f = block_elems(&s->after, shape, rank, L, coord, NULL, NULL);
    switch (s->kind) {
    case PLAN_REDIST_ALL_GATHER: /* my piece to k - 1, the rest to me */
      *send = max64(*send, sat_mul(b, k - 1));
      *recv = max64(*recv, f - b);
      break;
    case PLAN_REDIST_REDUCE_SCATTER: /* the others' parts out, mine in */
      *send = max64(*send, b - f);
      *recv = max64(*recv, sat_mul(f, k - 1));
      break;
    case PLAN_REDIST_ALL_TO_ALL:
      *send = max64(*send, b - kept);
      *recv = max64(*recv, f - kept);
      break;
    default:
      break;
    }
  } while (++count < (1 << 16) && next_coord(coord, axes, L->naxes, L->mesh));
}

/* Fills send_bytes and recv_bytes of step s (whose `before` is set). */
static void step_cost(plan_redist_step *s, const int64_t *shape, int rank,
                      int64_t esize, const lay *L) {
  const plan_placement *p = &s->before;
  const int64_t *mesh = L->mesh;
  int64_t k = mesh[s->axis], send = 0, recv = 0;
  int axes[PLAN_MAX_MESH_AXES];
  int64_t ls[LEN_SET_CAP], ls2[LEN_SET_CAP], rs[10];
  bool ratios = L->sets && (plan_placement_has_ratios(&s->before) ||
                            plan_placement_has_ratios(&s->after));
  if (ratios && s->kind != PLAN_REDIST_ALL_REDUCE)
    step_cost_ratios(s, shape, rank, L, &send, &recv);
  else
    switch (s->kind) {
    case PLAN_REDIST_ALL_GATHER:
    case PLAN_REDIST_REDUCE_SCATTER: {
      bool gather = s->kind == PLAN_REDIST_ALL_GATHER;
      int m = plan_placement_dim_axes(p, s->dim, axes);
      /* Gather: the group's pieces split the piece one level up; scatter:
       * they split the current piece. */
      int n = piece_lengths(shape[s->dim], axes, gather ? m - 1 : m, mesh, ls);
      for (int i = 0; i < n; i++) {
        /* k even chunks (k >= 1, checked on entry): every coordinate's
         * are alike */
        int nr =
            ls[i] % k == 0 ? (rs[0] = 0, 1) : chunk_coords(ls[i], k, rs, 0);
        for (int j = 0; j < nr; j++) {
          int64_t own = chunk_len(ls[i], k, rs[j]);
          int64_t mine = sat_mul(own, k - 1), rest = ls[i] - own;
          send = max64(send, gather ? mine : rest);
          recv = max64(recv, gather ? rest : mine);
        }
      }
      int64_t o = others_max(p, shape, rank, L, s->dim, -1);
      send = sat_mul(send, o);
      recv = sat_mul(recv, o);
      break;
    }
    case PLAN_REDIST_ALL_TO_ALL: {
      int mi = plan_placement_dim_axes(p, s->dim, axes);
      int ni = piece_lengths(shape[s->dim], axes, mi - 1, mesh, ls);
      int mj = plan_placement_dim_axes(p, s->to_dim, axes);
      int nj = piece_lengths(shape[s->to_dim], axes, mj, mesh, ls2);
      for (int a = 0; a < ni; a++)
        for (int b = 0; b < nj; b++) {
          int64_t I = ls[a], J = ls2[b];
          int nr;
          if (I % k == 0 && J % k == 0) { /* even: all alike */
            rs[0] = 0;
            nr = 1;
          } else {
            nr = chunk_coords(I, k, rs, 0);
            nr = chunk_coords(J, k, rs, nr);
          }
          for (int j = 0; j < nr; j++) {
            int64_t ir = chunk_len(I, k, rs[j]), jr = chunk_len(J, k, rs[j]);
            send = max64(send, sat_mul(ir, J - jr));
            recv = max64(recv, sat_mul(I - ir, jr));
          }
        }
      int64_t o = others_max(p, shape, rank, L, s->dim, s->to_dim);
      send = sat_mul(send, o);
      recv = sat_mul(recv, o);
      break;
    }
    case PLAN_REDIST_ALL_REDUCE: {
      /* Reduce-scatter plus all-gather of the flattened tensor in k chunks:
       * n - c + (k - 1) c each way for a rank whose chunk is c; the first
       * chunk is the largest. */
      int64_t n = others_max(p, shape, rank, L, -1, -1);
      int64_t c = n / k + (n % k != 0);
      send = recv = k > 1 ? sat_add(n, sat_mul(k - 2, c)) : 0;
      break;
    }
    default:
      break; /* local */
    }
  s->send_bytes = sat_mul(send, esize);
  s->recv_bytes = sat_mul(recv, esize);
}

/* ---- placement edits ----------------------------------------------------- */

static void set_r(plan_axis_pl *e) {
  e->kind = PLAN_PL_R;
  e->reduce = PLAN_RED_SUM;
  e->dim = 0;
  e->level = -1;
  e->ratio = 0;
}

/* Makes axis a shard dim d as its new minor-most level, in pieces of ratio
 * set `ratio` (0: torch.chunk). */
static void add_minor(plan_placement *p, int a, int d, int ratio) {
  int m = 0; /* the axes sharding d now: plan_placement_dim_axes's count */
  for (int b = 0; b < p->naxes && b < PLAN_MAX_MESH_AXES; b++)
    m += p->ax[b].kind == PLAN_PL_S && p->ax[b].dim == d;
  p->ax[a].kind = PLAN_PL_S;
  p->ax[a].reduce = PLAN_RED_SUM;
  p->ax[a].dim = (int8_t)d;
  p->ax[a].level = (int8_t)m;
  p->ax[a].ratio = (uint8_t)ratio;
}

/* Applies step s to placement p; false when its precondition fails (an
 * internal error: the planner only emits steps that apply). */
static bool apply_step(plan_placement *p, const plan_redist_step *s);

bool plan_redist_apply(plan_placement *p, const plan_redist_step *s) {
  if (s->axis < 0 || s->axis >= p->naxes || (int)s->kind < 0 ||
      s->kind >= PLAN_REDIST_COUNT)
    return false;
  return apply_step(p, s);
}

static bool apply_step(plan_placement *p, const plan_redist_step *s) {
  plan_axis_pl *e = &p->ax[s->axis];
  int axes[PLAN_MAX_MESH_AXES], m;
  switch (s->kind) {
  case PLAN_REDIST_ALL_GATHER:
  case PLAN_REDIST_ALL_TO_ALL:
    m = plan_placement_dim_axes(p, s->dim, axes);
    if (e->kind != PLAN_PL_S || e->dim != s->dim || axes[m - 1] != s->axis)
      return false;
    set_r(e);
    if (s->kind == PLAN_REDIST_ALL_TO_ALL) {
      if (s->to_dim == s->dim)
        return false;
      add_minor(p, s->axis, s->to_dim, s->ratio);
    }
    return true;
  case PLAN_REDIST_ALL_REDUCE:
    if (e->kind != PLAN_PL_P || e->reduce != s->reduce)
      return false;
    set_r(e);
    return true;
  case PLAN_REDIST_REDUCE_SCATTER:
  case PLAN_REDIST_SLICE:
    if (s->kind == PLAN_REDIST_SLICE
            ? e->kind != PLAN_PL_R
            : e->kind != PLAN_PL_P || e->reduce != s->reduce)
      return false;
    add_minor(p, s->axis, s->dim, s->ratio);
    return true;
  case PLAN_REDIST_ZERO_NON_OWNER:
  case PLAN_REDIST_RELABEL:
    if (e->kind != PLAN_PL_R)
      return false;
    e->kind = PLAN_PL_P;
    e->reduce = (uint8_t)s->reduce;
    e->dim = 0;
    e->level = -1;
    e->ratio = 0;
    return true;
  default:
    return false;
  }
}

/* ---- planning ------------------------------------------------------------ */

/* True when the first n axes of dst's list for dim d are cur's list, with
 * the same ratio sets (a level with other pieces is another level). */
static bool is_prefix(const plan_placement *cur, const plan_placement *dst,
                      int d, int *ncur) {
  int ca[PLAN_MAX_MESH_AXES], da[PLAN_MAX_MESH_AXES];
  int nc = plan_placement_dim_axes(cur, d, ca);
  int nd = plan_placement_dim_axes(dst, d, da);
  if (ncur)
    *ncur = nc;
  if (nc > nd)
    return false;
  for (int i = 0; i < nc; i++)
    if (ca[i] != da[i] || cur->ax[ca[i]].ratio != dst->ax[da[i]].ratio)
      return false;
  return true;
}

/* True when axis a's target sharding S(d) at level p can be put on now:
 * dim d holds exactly the target's first p levels. */
static bool can_add(const plan_placement *cur, const plan_placement *dst,
                    int a) {
  if (dst->ax[a].kind != PLAN_PL_S)
    return false;
  int d = dst->ax[a].dim, n;
  return is_prefix(cur, dst, d, &n) && n == dst->ax[a].level;
}

static void push(plan_redist_plan *out, plan_redist_kind kind, int axis,
                 int dim, int to_dim, int reduce, int ratio) {
  plan_redist_step *s = &out->steps[out->nsteps++];
  s->kind = kind;
  s->axis = axis;
  s->dim = dim;
  s->to_dim = to_dim;
  s->reduce = (plan_reduce)reduce;
  s->ratio = ratio;
}

/* The axes sharding each dim of a placement, major to minor
 * (plan_placement_dim_axes of every dim, found once). */
typedef struct dim_lists {
  int n[PLAN_MAX_RANK];
  int axes[PLAN_MAX_RANK][PLAN_MAX_MESH_AXES];
} dim_lists;

static void dim_lists_of(dim_lists *l, const plan_placement *p, int rank) {
  /* plan_placement_dim_axes of each dim, in one walk of the axes: by
   * level, ties in mesh order, an axis without a level after the axes
   * before it on its dim */
  int lv[PLAN_MAX_RANK][PLAN_MAX_MESH_AXES];
  for (int d = 0; d < rank; d++)
    l->n[d] = 0;
  int naxes = p->naxes > PLAN_MAX_MESH_AXES ? PLAN_MAX_MESH_AXES : p->naxes;
  for (int a = 0; a < naxes; a++) {
    int d = p->ax[a].dim;
    if (p->ax[a].kind != PLAN_PL_S || d < 0 || d >= rank)
      continue;
    int k = p->ax[a].level >= 0 ? p->ax[a].level : l->n[d], j = l->n[d]++;
    while (j > 0 && lv[d][j - 1] > k) {
      l->axes[d][j] = l->axes[d][j - 1];
      lv[d][j] = lv[d][j - 1];
      j--;
    }
    l->axes[d][j] = a;
    lv[d][j] = k;
  }
}

/* is_prefix on the lists of cur (c) and dst (t). */
static bool is_prefix_l(const plan_placement *cur, const dim_lists *c,
                        const plan_placement *dst, const dim_lists *t, int d) {
  int nc = c->n[d];
  if (nc > t->n[d])
    return false;
  for (int i = 0; i < nc; i++)
    if (c->axes[d][i] != t->axes[d][i] ||
        cur->ax[c->axes[d][i]].ratio != dst->ax[t->axes[d][i]].ratio)
      return false;
  return true;
}

/* can_add on the lists. */
static bool can_add_l(const plan_placement *cur, const dim_lists *c,
                      const plan_placement *dst, const dim_lists *t, int a,
                      int rank) {
  if (dst->ax[a].kind != PLAN_PL_S)
    return false;
  int d = dst->ax[a].dim;
  if (d < 0 || d >= rank) /* past the lists: as can_add finds it */
    return can_add(cur, dst, a);
  return is_prefix_l(cur, c, dst, t, d) && c->n[d] == dst->ax[a].level;
}

/* The sharding steps: adds whenever ready (they shrink the data), else one
 * removal from the minor end of a dim whose list is not a target prefix,
 * preferring an all-to-all straight into the target dim. Ends with cur's
 * shardings equal to dst's. Each axis is removed at most once and added at
 * most once. The dims' lists of dst are found once, cur's once per pass
 * (cur changes only at a pass's end). */
static void plan_shardings(plan_redist_plan *out, plan_placement *cur,
                           const plan_placement *dst, int rank) {
  int naxes = cur->naxes;
  dim_lists t, c;
  dim_lists_of(&t, dst, rank);
  /* Each pass adds or removes a sharding; the bound only guards the array
   * against a planner bug (the replay then reports it). */
  while (out->nsteps < 2 * PLAN_MAX_MESH_AXES) {
    int a, d;
    dim_lists_of(&c, cur, rank);
    for (a = 0; a < naxes; a++)
      if (cur->ax[a].kind != PLAN_PL_S && can_add_l(cur, &c, dst, &t, a, rank))
        break;
    if (a < naxes) {
      const plan_axis_pl *e = &cur->ax[a];
      if (e->kind == PLAN_PL_P)
        push(out, PLAN_REDIST_REDUCE_SCATTER, a, dst->ax[a].dim, -1, e->reduce,
             dst->ax[a].ratio);
      else
        push(out, PLAN_REDIST_SLICE, a, dst->ax[a].dim, -1, PLAN_RED_SUM,
             dst->ax[a].ratio);
      apply_step(cur, &out->steps[out->nsteps - 1]);
      continue;
    }
    int gather_dim = -1, gather_axis = -1, move_axis = -1, move_dim = -1;
    for (d = 0; d < rank && move_axis < 0; d++) {
      if (is_prefix_l(cur, &c, dst, &t, d))
        continue;
      int m = c.n[d];
      int last = c.axes[d][m - 1];
      if (dst->ax[last].kind == PLAN_PL_S && dst->ax[last].dim != d &&
          can_add_l(cur, &c, dst, &t, last, rank)) {
        move_axis = last;
        move_dim = d;
      } else if (gather_dim < 0) {
        gather_dim = d;
        gather_axis = last;
      }
    }
    if (move_axis >= 0)
      push(out, PLAN_REDIST_ALL_TO_ALL, move_axis, move_dim,
           dst->ax[move_axis].dim, PLAN_RED_SUM, dst->ax[move_axis].ratio);
    else if (gather_dim >= 0)
      push(out, PLAN_REDIST_ALL_GATHER, gather_axis, gather_dim, -1,
           PLAN_RED_SUM, 0);
    else
      return;
    apply_step(cur, &out->steps[out->nsteps - 1]);
  }
}

static int64_t local_elems(const plan_placement *p, const int64_t *shape,
                           int rank, const lay *L) {
  return others_max(p, shape, rank, L, -1, -1);
}

static int check_placement(const plan_placement *p, const char *which,
                           int naxes, int rank, const lay *L,
                           plan_placement *out, char *err, size_t errsz) {
  if (!p)
    return plan_errf(err, errsz, "redistribute: no %s placement", which);
  if (p->naxes != naxes)
    return plan_errf(err, errsz,
                     "redistribute: %s placement has %d axes but the mesh "
                     "has %d",
                     which, p->naxes, naxes);
  for (int a = 0; a < naxes; a++) {
    const plan_axis_pl *e = &p->ax[a];
    if (e->kind > PLAN_PL_P ||
        (e->kind == PLAN_PL_P && e->reduce >= PLAN_RED_COUNT))
      return plan_errf(err, errsz,
                       "redistribute: %s placement: bad entry on axis %d",
                       which, a);
    /* a set of another axis or size would lay the pieces out wrongly */
    if (e->kind == PLAN_PL_S && e->ratio && L->sets &&
        (e->ratio > L->nsets || L->sets[e->ratio - 1].axis != a ||
         L->sets[e->ratio - 1].n != L->mesh[a]))
      return plan_errf(err, errsz,
                       "redistribute: %s placement: axis %d names ratio set "
                       "%d, which is not a set of that axis",
                       which, a, e->ratio);
  }
  *out = *p;
  char why[160];
  if (plan_placement_normalize(out, rank, why, sizeof why) != PLAN_OK)
    return plan_errf(err, errsz, "redistribute: %s placement: %s", which, why);
  return PLAN_OK;
}

int plan_redistribute(plan_redist_plan *out, const int64_t *shape, int rank,
                      int dtype_size, const int64_t *mesh_sizes, int naxes,
                      const plan_placement *src, const plan_placement *dst,
                      char *err, size_t errsz) {
  return plan_redistribute_r(out, shape, rank, dtype_size, mesh_sizes, naxes,
                             NULL, 0, src, dst, err, errsz);
}

int plan_redistribute_r(plan_redist_plan *out, const int64_t *shape, int rank,
                        int dtype_size, const int64_t *mesh_sizes, int naxes,
                        const plan_ratios *sets, int nsets,
                        const plan_placement *src, const plan_placement *dst,
                        char *err, size_t errsz) {
  lay L = {mesh_sizes, naxes, sets, sets ? nsets : 0};
  if (!out)
    return plan_errf(err, errsz, "redistribute: no output plan");
  out->nsteps = 0;
  out->send_bytes = out->recv_bytes = 0;
  if (naxes < 0 || naxes > PLAN_MAX_MESH_AXES)
    return plan_errf(err, errsz, "redistribute: a mesh has 0..%d axes, not %d",
                     PLAN_MAX_MESH_AXES, naxes);
  if (rank < 0 || rank > PLAN_MAX_RANK)
    return plan_errf(err, errsz, "redistribute: rank %d is out of range 0..%d",
                     rank, PLAN_MAX_RANK);
  if (dtype_size <= 0)
    return plan_errf(err, errsz, "redistribute: dtype size %d is not positive",
                     dtype_size);
  if ((rank > 0 && !shape) || (naxes > 0 && !mesh_sizes))
    return plan_errf(err, errsz, "redistribute: no shape or mesh sizes");
  for (int d = 0; d < rank; d++)
    if (shape[d] < 0)
      return plan_errf(err, errsz, "redistribute: dim %d has size %lld", d,
                       (long long)shape[d]);
  for (int a = 0; a < naxes; a++)
    if (mesh_sizes[a] < 1)
      return plan_errf(err, errsz, "redistribute: mesh axis %d has size %lld",
                       a, (long long)mesh_sizes[a]);
  int rc =
      check_placement(src, "source", naxes, rank, &L, &out->src, err, errsz);
  if (rc == PLAN_OK)
    rc = check_placement(dst, "target", naxes, rank, &L, &out->dst, err, errsz);
  if (rc != PLAN_OK)
    return rc;
  const plan_placement *to = &out->dst;

  /* 1. Shardings (with reduce-scatters for partial axes that become
   * shards). */
  plan_placement cur = out->src;
  plan_shardings(out, &cur, to, rank);
  int ncore = out->nsteps;

  /* 2. All-reduces of the partial axes that stay P(op) in neither cur nor
   * dst, at the step boundary where the local tensor is smallest (they act
   * elementwise, so any point is correct). */
  int ar_axes[PLAN_MAX_MESH_AXES], nar = 0;
  for (int a = 0; a < naxes; a++) {
    const plan_axis_pl *e = &cur.ax[a], *t = &to->ax[a];
    if (e->kind == PLAN_PL_P &&
        !(t->kind == PLAN_PL_P && t->reduce == e->reduce))
      ar_axes[nar++] = a;
  }
  if (nar > 0) {
    plan_placement p = out->src;
    int best = 0;
    int64_t best_n = local_elems(&p, shape, rank, &L);
    for (int i = 0; i < ncore; i++) {
      apply_step(&p, &out->steps[i]);
      int64_t n = local_elems(&p, shape, rank, &L);
      if (n < best_n) {
        best_n = n;
        best = i + 1;
      }
    }
    for (int i = ncore - 1; i >= best; i--)
      out->steps[i + nar] = out->steps[i];
    int saved = out->nsteps;
    out->nsteps = best;
    for (int i = 0; i < nar; i++)
      push(out, PLAN_REDIST_ALL_REDUCE, ar_axes[i], -1, -1,
           cur.ax[ar_axes[i]].reduce, 0);
    out->nsteps = saved + nar;
  }

  /* 3. R -> P last: the data is then as small as it gets, and zeroing is
   * local. */
  for (int a = 0; a < naxes; a++) {
    const plan_axis_pl *t = &to->ax[a];
    if (t->kind != PLAN_PL_P ||
        (cur.ax[a].kind == PLAN_PL_P && cur.ax[a].reduce == t->reduce))
      continue;
    push(out,
         t->reduce == PLAN_RED_SUM ? PLAN_REDIST_ZERO_NON_OWNER
                                   : PLAN_REDIST_RELABEL,
         a, -1, -1, t->reduce, 0);
  }

  /* Replay: placements and costs of each step, and a check that the plan
   * ends where it should. */
  plan_placement p = out->src;
  for (int i = 0; i < out->nsteps; i++) {
    plan_redist_step *s = &out->steps[i];
    s->before = p;
    if (!apply_step(&p, s))
      return plan_errf(err, errsz,
                       "redistribute: internal error: step %d (%s) does not "
                       "apply",
                       i, plan_redist_kind_name(s->kind));
    s->after = p;
    step_cost(s, shape, rank, dtype_size, &L);
    out->send_bytes = sat_add(out->send_bytes, s->send_bytes);
    out->recv_bytes = sat_add(out->recv_bytes, s->recv_bytes);
  }
  if (!plan_placement_equal(&p, to)) {
    char a[PLAN_PLACEMENT_STRLEN], b[PLAN_PLACEMENT_STRLEN];
    return plan_errf(
        err, errsz, "redistribute: internal error: plan ends at %s, not %s",
        plan_placement_format(&p, a), plan_placement_format(to, b));
  }
  return PLAN_OK;
}
