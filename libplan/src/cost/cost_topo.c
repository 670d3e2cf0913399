/* Collectives on the real path (format 1.1 `mesh.topology`; docs/cost.md,
 * "Topology"): where each mesh axis's groups sit on the wiring, and the
 * time of a collective over a group of physical devices.
 *
 * Levels (NVLink island, PCIe, InfiniBand): level l groups `size`
 * consecutive devices of level l - 1; a group pays the slowest link of the
 * levels up to the smallest one that holds all its members, per device and
 * direction (each device has its own link at every level, so the ring's
 * order inside the group does not matter).
 *
 * Torus (or mesh without wraparound), devices row-major over the dims: the
 * group's ring runs in the group's order; each ring edge is routed
 * dimension by dimension along the shorter way round (ties the positive
 * way). A step's latency is the longest edge's hops x the link latency;
 * its time per byte is max(longest edge's hops, the busiest directed
 * link's edges) / bandwidth: a 1-hop ring runs at the link's speed, a
 * multi-hop edge pays each hop as a link's time (store and forward, or the
 * links it shares with the rings of the other dims), contention divides the
 * link. The tree pays the farthest two members' hops per level and the
 * ring's factor per byte (its edges take the same routes); an
 * all-to-all routes every pair and pays the busiest link's load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_device.h"

/* Torus coordinates of device d (row-major). */
static void torus_coord(const plan_topology *t, int64_t d, int64_t *c) {
  for (int i = t->ndims - 1; i >= 0; i--) {
    int64_t n = t->dims[i] > 0 ? t->dims[i] : 1;
    c[i] = d % n;
    d /= n;
  }
}

/* The signed steps along dim i from a to b: the shorter way round with
 * wraparound, ties the positive way. */
static int64_t torus_delta(const plan_topology *t, int i, int64_t a,
                           int64_t b) {
  int64_t n = t->dims[i], d = b - a;
  if (t->wrap[i] && n > 0) {
    d = ((d % n) + n) % n; /* 0 .. n-1 forwards */
    if (d > n / 2)
      d -= n; /* shorter backwards; a tie stays forwards */
  }
  return d;
}

static int64_t torus_hops(const plan_topology *t, int64_t u, int64_t v) {
  int64_t a[3], b[3], h = 0;
  torus_coord(t, u, a);
  torus_coord(t, v, b);
  for (int i = 0; i < t->ndims; i++) {
    int64_t d = torus_delta(t, i, a[i], b[i]);
    h += d < 0 ? -d : d;
  }
  return h;
}

/* Appends the directed links of the route u -> v (dimension order) to
 * links[*n] (each as device x 6 + dim x 2 + direction); false when full. */
static bool route(const plan_topology *t, int64_t u, int64_t v, int64_t *links,
                  int *n, int cap) {
  int64_t c[3], b[3];
  torus_coord(t, u, c);
  torus_coord(t, v, b);
  for (int i = 0; i < t->ndims; i++) {
    int64_t d = torus_delta(t, i, c[i], b[i]);
    int dir = d > 0;
    for (int64_t s = 0; s < (d < 0 ? -d : d); s++) {
      int64_t dev = 0;
      for (int j = 0; j < t->ndims; j++)
        dev = dev * t->dims[j] + c[j];
      if (*n >= cap)
        return false;
      links[(*n)++] = dev * 6 + i * 2 + dir;
      c[i] = (c[i] + (dir ? 1 : -1) + t->dims[i]) % t->dims[i];
    }
  }
  return true;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The most times one directed link appears in links[n] (sorts them). */
static int max_load(int64_t *links, int n) {
  if (n < 1)
    return 0;
  qsort(links, (size_t)n, sizeof *links, cmp_i64);
  int best = 1, run = 1;
  for (int i = 1; i < n; i++) {
    run = links[i] == links[i - 1] ? run + 1 : 1;
    if (run > best)
      best = run;
  }
  return best;
}

enum { ROUTE_CAP = 4096 };

static void torus_group(cost_topo_axis *g, const plan_topology *t,
                        const int64_t *devs, int k) {
  g->bandwidth = t->link.bandwidth;
  g->latency = t->link.latency;
  snprintf(g->label, sizeof g->label, "torus");
  int64_t links[ROUTE_CAP];
  int n = 0;
  bool full = false;
  double hmax = 0, tmax = 0;
  for (int i = 0; i < k; i++) {
    int64_t u = devs[i], v = devs[(i + 1) % k];
    double h = (double)torus_hops(t, u, v);
    if (h > hmax)
      hmax = h;
    if (!full && !route(t, u, v, links, &n, ROUTE_CAP))
      full = true;
  }
  int ring_load = full ? (int)hmax : max_load(links, n);
  g->ring_hops = hmax > 0 ? hmax : 1;
  g->ring_factor = hmax > ring_load ? hmax : ring_load;
  if (g->ring_factor < 1)
    g->ring_factor = 1;
  n = 0;
  full = false;
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) {
      if (i == j)
        continue;
      double h = (double)torus_hops(t, devs[i], devs[j]);
      if (h > tmax)
        tmax = h;
      if (!full && !route(t, devs[i], devs[j], links, &n, ROUTE_CAP))
        full = true;
    }
  g->tree_hops = tmax > 0 ? tmax : 1;
  double load = full ? tmax * (k - 1) : max_load(links, n);
  g->a2a_factor = k > 1 && load / (k - 1) > 1 ? load / (k - 1) : 1;
}

static void levels_group(cost_topo_axis *g, const plan_topology *t,
                         const int64_t *devs, int k) {
  int64_t span = 1;
  int top = t->nlevels - 1;
  for (int l = 0; l < t->nlevels; l++) {
    int64_t sz = t->levels[l].size;
    if (sz <= 0) { /* the last level: everything */
      top = l;
      break;
    }
    span *= sz;
    bool one = true;
    for (int i = 1; i < k && one; i++)
      one = devs[i] / span == devs[0] / span;
    if (one) {
      top = l;
      break;
    }
  }
  g->bandwidth = 0;
  g->latency = 0;
  for (int l = 0; l <= top && l < t->nlevels; l++) {
    const plan_link *x = &t->levels[l].link;
    if (x->bandwidth > 0 && (g->bandwidth <= 0 || x->bandwidth < g->bandwidth))
      g->bandwidth = x->bandwidth;
    if (x->latency > g->latency)
      g->latency = x->latency;
  }
  /* a level's name is the plan's, borrowed only while the topology is
   * copied in: the label keeps the level number when it is gone */
  const char *name = top >= 0 ? t->levels[top].name : NULL;
  if (name)
    snprintf(g->label, sizeof g->label, "%s", name);
  else
    snprintf(g->label, sizeof g->label, "level %d", top);
  g->ring_factor = g->ring_hops = g->tree_hops = g->a2a_factor = 1;
}

void plan_cost_group_topo(cost_topo_axis *out, const plan_cost_model *m,
                          const int64_t *devs, int k) {
  memset(out, 0, sizeof *out);
  out->ring_factor = out->ring_hops = out->tree_hops = out->a2a_factor = 1;
  if (k < 2)
    return;
  if (m->has_topo && m->topo.kind == PLAN_TOPO_TORUS) {
    torus_group(out, &m->topo, devs, k);
    return;
  }
  if (m->has_topo) {
    levels_group(out, &m->topo, devs, k);
    return;
  }
  /* the host rule */
  int64_t H = m->devices_per_host;
  bool inter = false;
  for (int i = 1; H > 0 && i < k && !inter; i++)
    inter = devs[i] / H != devs[0] / H;
  const plan_link *l = inter ? &m->hw.inter_host : &m->hw.intra_host;
  out->bandwidth = l->bandwidth;
  out->latency = l->latency;
  snprintf(out->label, sizeof out->label, "%s",
           inter ? "inter_host" : "intra_host");
}

static double ceil_log2(int64_t k) {
  double r = 0;
  for (int64_t v = 1; v < k; v *= 2)
    r++;
  return r;
}

double plan_cost_topo_seconds(int kind, double alpha, double beta,
                              const cost_topo_axis *gl, int64_t k, double send,
                              double recv, double n, int *algorithm) {
  double inv = beta > 0 ? 1 / beta : 0;
  double ar = alpha * gl->ring_hops, ir = inv * gl->ring_factor;
  double kk = (double)k;
  *algorithm = COST_ALG_RING;
  switch (kind) {
  case PLAN_REDIST_ALL_REDUCE: {
    double ring = 2 * (kk - 1) * ar + send * ir;
    double tree = 2 * ceil_log2(k) * alpha * gl->tree_hops + 2 * n * ir;
    if (tree < ring) {
      *algorithm = COST_ALG_TREE;
      return tree;
    }
    return ring;
  }
  case PLAN_REDIST_ALL_GATHER:
    return (kk - 1) * ar + recv * ir;
  case PLAN_REDIST_REDUCE_SCATTER:
    return (kk - 1) * ar + send * ir;
  case PLAN_REDIST_ALL_TO_ALL:
    return (kk - 1) * alpha * gl->ring_hops +
           (send > recv ? send : recv) * inv * gl->a2a_factor;
  default:
    return 0;
  }
}

double plan_cost_group_seconds(const plan_cost_model *m, int kind,
                               const cost_topo_axis *gl, int64_t k, double send,
                               double recv, double n, int *algorithm) {
  int alg;
  if (!algorithm)
    algorithm = &alg;
  if (k < 2) {
    *algorithm = COST_ALG_LOCAL;
    return 0;
  }
  return plan_cost_topo_seconds(kind, gl->latency, gl->bandwidth * m->eff_link,
                                gl, k, send, recv, n, algorithm);
}

/* Keeps the worse of two groups' figures in *w. */
static void worst(cost_topo_axis *w, const cost_topo_axis *g, bool first) {
  if (first) {
    *w = *g;
    return;
  }
  if (g->bandwidth > 0 && g->bandwidth < w->bandwidth) {
    w->bandwidth = g->bandwidth;
    memcpy(w->label, g->label, sizeof w->label);
  }
  if (g->latency > w->latency)
    w->latency = g->latency;
  if (g->ring_factor > w->ring_factor)
    w->ring_factor = g->ring_factor;
  if (g->ring_hops > w->ring_hops)
    w->ring_hops = g->ring_hops;
  if (g->tree_hops > w->tree_hops)
    w->tree_hops = g->tree_hops;
  if (g->a2a_factor > w->a2a_factor)
    w->a2a_factor = g->a2a_factor;
}

int plan_cost_topo_setup(plan_cost_model *m, const plan_mesh *mesh) {
  m->has_topo = mesh->topology != NULL;
  if (!m->has_topo)
    return PLAN_OK;
  m->topo = *mesh->topology;
  int64_t stride = 1;
  for (int a = m->naxes - 1; a >= 0; a--) {
    int64_t k = m->axis_sizes[a];
    cost_topo_axis *w = &m->taxis[a];
    memset(w, 0, sizeof *w);
    w->ring_factor = w->ring_hops = w->tree_hops = w->a2a_factor = 1;
    bool first = true;
    int64_t devs[1024];
    int kk = k < 1024 ? (int)k : 1024; /* a larger group: its first 1024 */
    for (int64_t r = 0; k > 1 && r < m->ndevices; r++) {
      if ((r / stride) % k != 0)
        continue;
      for (int j = 0; j < kk; j++)
        devs[j] = m->rank_dev[r + j * stride];
      cost_topo_axis g;
      plan_cost_group_topo(&g, m, devs, kk);
      worst(w, &g, first);
      first = false;
    }
    stride *= k;
  }
  /* the level names are the plan's: not kept past setup */
  for (int l = 0; l < m->topo.nlevels; l++)
    m->topo.levels[l].name = NULL;
  return PLAN_OK;
}

void plan_cost_topo_derive(plan_cost_model *m) {
  if (!m->has_topo)
    return;
  for (int a = 0; a < m->naxes; a++) {
    const plan_link *ov = &m->axis_override[a];
    if (ov->bandwidth > 0 || ov->latency > 0)
      continue; /* the plan's own figures for the axis win */
    cost_link *l = &m->link[a];
    l->bandwidth = m->taxis[a].bandwidth * m->eff_link;
    l->latency = m->taxis[a].latency;
    l->source = COST_LINK_TOPO;
  }
}
