/* The placement search: device assignments on the mesh's topology as
 * curves through the physical devices composed with orders of the mesh
 * axes, each priced with the cost model (placement_search.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "cost/cost_model.h"
#include "libplan/cost.h"
#include "libplan/space.h"
#include "read/plan_read.h"
#include "search/placement_search.h"

static int64_t torus_count(const plan_topology *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndims; i++)
    n *= t->dims[i];
  return n;
}

static int64_t torus_id(const plan_topology *t, const int64_t *c) {
  int64_t d = 0;
  for (int i = 0; i < t->ndims; i++)
    d = d * t->dims[i] + c[i];
  return d;
}

int plan_placement_curve(int64_t *curve, const plan_topology *t, int64_t n,
                         const char *which) {
  if (t->kind == PLAN_TOPO_TORUS) {
    if (torus_count(t) != n)
      return PLAN_ENOTFOUND;
    bool snake = !strcmp(which, "snake"), tiled = !strcmp(which, "tiled");
    if (!snake && !tiled && strcmp(which, "row-major"))
      return PLAN_ENOTFOUND;
    if (tiled && (t->ndims != 2 || t->dims[0] % 2 || t->dims[1] % 2))
      return PLAN_ENOTFOUND;
    for (int64_t i = 0; i < n; i++) {
      int64_t c[3] = {0, 0, 0}, x = i;
      if (tiled) {
        /* 2x2 tiles row-major, each walked round as a cycle */
        static const int64_t dr[4] = {0, 0, 1, 1}, dc[4] = {0, 1, 1, 0};
        int64_t tile = i / 4, j = i % 4, across = t->dims[1] / 2;
        c[0] = 2 * (tile / across) + dr[j];
        c[1] = 2 * (tile % across) + dc[j];
      } else {
        for (int d = t->ndims - 1; d >= 0; d--) {
          c[d] = x % t->dims[d];
          x /= t->dims[d];
        }
        /* boustrophedon: a digit runs backwards when the digits above it
         * sum to an odd number, so every step is one hop */
        int64_t above = 0;
        for (int d = 0; snake && d < t->ndims; d++) {
          int64_t own = c[d];
          if (above % 2)
            c[d] = t->dims[d] - 1 - c[d];
          above += own;
        }
      }
      curve[i] = torus_id(t, c);
    }
    return PLAN_OK;
  }
  bool inter = !strcmp(which, "interleaved");
  if (!inter && strcmp(which, "host-major"))
    return PLAN_ENOTFOUND;
  /* the groups of the level below the last: islands (or hosts) */
  int64_t g = 1;
  for (int l = 0; l + 1 < t->nlevels; l++)
    g *= t->levels[l].size > 0 ? t->levels[l].size : 1;
  if (inter && (g < 2 || n % g || n / g < 2))
    return PLAN_ENOTFOUND;
  int64_t groups = inter ? n / g : 1;
  for (int64_t i = 0; i < n; i++)
    curve[i] = inter ? (i % groups) * g + i / groups : i;
  return PLAN_OK;
}

/* The next permutation of a[n] in lexicographic order; false after the
 * last. */
static bool next_perm(int *a, int n) {
  int i = n - 2;
  while (i >= 0 && a[i] >= a[i + 1])
    i--;
  if (i < 0)
    return false;
  int j = n - 1;
  while (a[j] <= a[i])
    j--;
  int x = a[i];
  a[i] = a[j];
  a[j] = x;
  for (int lo = i + 1, hi = n - 1; lo < hi; lo++, hi--) {
    x = a[lo];
    a[lo] = a[hi];
    a[hi] = x;
  }
  return true;
}

/* devs[r] = curve[the rank's coordinates read in axis order `order`]. */
static void compose(int64_t *devs, const int64_t *curve, const plan_mesh *mesh,
                    const int *order, int norder) {
  for (int64_t r = 0; r < mesh->ndevices; r++) {
    int64_t coord[PLAN_MAX_MESH_AXES] = {0}, x = r;
    for (int a = mesh->naxes - 1; a >= 0; a--) {
      coord[a] = x % mesh->axis_sizes[a];
      x /= mesh->axis_sizes[a];
    }
    int64_t lin = 0;
    for (int i = 0; i < norder; i++)
      lin = lin * mesh->axis_sizes[order[i]] + coord[order[i]];
    devs[r] = curve[lin];
  }
}

static int price(double *step, plan_cost_model *m, plan_plan *p) {
  int rc = plan_cost_model_update_mesh(m, p);
  plan_cost_report *r = NULL;
  if (!rc)
    rc = plan_cost_plan(&r, m, p);
  *step = rc ? 0 : plan_cost_report_step_seconds(r);
  plan_cost_report_free(r);
  return rc;
}

/* The axis order text "dp,tp" of order[0..norder). */
static void order_text(char *buf, size_t size, const plan_mesh *mesh,
                       const int *order, int norder) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < norder && len < size; i++) {
    snprintf(buf + len, size - len, "%s%s", i ? "," : "",
             mesh->axis_names[order[i]]);
    len = strlen(buf);
  }
}

static void record(plan_placement_candidate *list, int cap, int *listed,
                   const char *curve, const char *order, double step) {
  if (!list || *listed >= cap)
    return;
  plan_placement_candidate *c = &list[(*listed)++];
  snprintf(c->curve, sizeof c->curve, "%s", curve);
  snprintf(c->order, sizeof c->order, "%s", order);
  c->step = step;
}

/* The search, recording every candidate into list[0..cap) when given. */
static int search(plan_placement_choice *out, plan_plan *p, const char *profile,
                  plan_placement_candidate *list, int cap, int *listed) {
  memset(out, 0, sizeof *out);
  if (!p || !p->has_mesh || !p->mesh.topology)
    return plan_failf(PLAN_EUSAGE,
                      "placement search: the plan's mesh has no topology");
  clock_t t0 = clock();
  const plan_mesh *mesh = &p->mesh;
  int64_t *orig = p->mesh.devices; /* the plan's arena keeps it */
  int64_t n = mesh->ndevices;
  int64_t *buf = malloc(sizeof(int64_t) * 3 * (size_t)(n > 0 ? n : 1));
  if (!buf)
    return plan_oom();
  int64_t *curve = buf, *devs = buf + n, *best = buf + 2 * n;
  for (int64_t r = 0; r < n; r++)
    best[r] = mesh->devices ? mesh->devices[r] : r;
  plan_cost_model *m = NULL;
  int rc = plan_cost_model_new(&m, p, profile);
  if (!rc)
    rc = price(&out->default_step, m, p);
  out->step = out->default_step;
  out->candidates = 1;
  snprintf(out->curve, sizeof out->curve, "default");
  if (!rc)
    record(list, cap, listed, "default", "", out->step);
  static const char *const curves[] = {"row-major", "snake", "tiled",
                                       "host-major", "interleaved"};
  for (size_t c = 0; !rc && c < sizeof curves / sizeof curves[0]; c++) {
    if (plan_placement_curve(curve, mesh->topology, n, curves[c]))
      continue;
    int order[PLAN_MAX_MESH_AXES], norder = 0;
    for (int a = 0; a < mesh->naxes; a++)
      if (mesh->axis_sizes[a] > 1)
        order[norder++] = a;
    do {
      compose(devs, curve, mesh, order, norder);
      double step;
      if ((rc = plan_set_mesh_devices(p, devs)) || (rc = price(&step, m, p)))
        break;
      out->candidates++;
      char text[sizeof out->order];
      order_text(text, sizeof text, mesh, order, norder);
      record(list, cap, listed, curves[c], text, step);
      if (step < out->step) {
        out->step = step;
        memcpy(best, devs, sizeof(int64_t) * (size_t)n);
        snprintf(out->curve, sizeof out->curve, "%s", curves[c]);
        snprintf(out->order, sizeof out->order, "%s", text);
      }
    } while (next_perm(order, norder));
  }
  if (!rc)
    rc = plan_set_mesh_devices(p, best);
  if (rc)
    p->mesh.devices = orig;
  plan_cost_model_free(m);
  free(buf);
  out->seconds = (double)(clock() - t0) / CLOCKS_PER_SEC;
  return rc;
}

int plan_placement_search(plan_placement_choice *out, plan_plan *p,
                          const char *profile) {
  return search(out, p, profile, NULL, 0, NULL);
}

int plan_search_placement(plan_placement_result *out, plan_plan *p,
                          const plan_placement_options *opts) {
  static const plan_placement_options defaults = PLAN_PLACEMENT_OPTIONS_INIT;
  if (!opts)
    opts = &defaults;
  if (!out || !p || !p->has_mesh)
    return plan_failf(
        PLAN_EUSAGE, "plan_search_placement: no result or no plan with a mesh");
  if (opts->version != PLAN_PLACEMENT_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE,
                      "plan_search_placement: options version %u, this "
                      "library knows %u",
                      opts->version, PLAN_PLACEMENT_OPTIONS_VERSION);
  memset(out, 0, sizeof *out);
  /* the mesh's own, put back after the what-ifs (the arena keeps both) */
  plan_mesh *mesh = &p->mesh;
  plan_topology *topo = mesh->topology;
  plan_hardware *hardware = mesh->hardware, *profiles = mesh->profiles;
  int nprofiles = mesh->nprofiles, *device_profile = mesh->device_profile;
  int64_t *devices = mesh->devices;
  int rc = PLAN_OK;
  if (opts->topology)
    rc = plan_set_mesh_topology(p, opts->topology);
  if (!rc && opts->device_hardware)
    rc = plan_set_mesh_device_hardware(p, opts->device_hardware);
  plan_placement_choice ch;
  memset(&ch, 0, sizeof ch);
  if (!rc)
    rc = search(&ch, p, opts->device_hardware ? NULL : opts->profile, out->list,
                PLAN_PLACEMENT_MAX_CANDIDATES, &out->listed);
  mesh->topology = topo;
  mesh->hardware = hardware;
  mesh->profiles = profiles;
  mesh->nprofiles = nprofiles;
  mesh->device_profile = device_profile;
  if (rc || !opts->keep)
    mesh->devices = devices;
  snprintf(out->best.curve, sizeof out->best.curve, "%s", ch.curve);
  snprintf(out->best.order, sizeof out->best.order, "%s", ch.order);
  out->best.step = ch.step;
  out->default_step = ch.default_step;
  out->candidates = ch.candidates;
  out->seconds = ch.seconds;
  return rc;
}

/* ---- what-if topology and hardware ----------------------------------------
 */

static int check_link(double bandwidth, double latency, const char *what) {
  if (!(bandwidth > 0) || !(latency >= 0) || bandwidth > 1e300 ||
      latency > 1e300)
    return plan_failf(PLAN_EINVALID,
                      "topology: %s needs a positive bandwidth and a "
                      "latency >= 0 (got %g, %g)",
                      what, bandwidth, latency);
  return PLAN_OK;
}

int plan_set_mesh_topology(plan_plan *p, const plan_topology_spec *t) {
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_set_mesh_topology: no mesh");
  if (!t) {
    p->mesh.topology = NULL;
    return PLAN_OK;
  }
  int64_t n = p->mesh.ndevices;
  plan_topology topo;
  memset(&topo, 0, sizeof topo);
  int rc;
  if (t->torus) {
    if (t->ndims < 1 || t->ndims > 3)
      return plan_failf(PLAN_EINVALID,
                        "topology: a torus has 1 to 3 dims, not %d", t->ndims);
    int64_t count = 1;
    for (int d = 0; d < t->ndims; d++) {
      if (t->dims[d] < 1 || t->dims[d] > n)
        return plan_failf(PLAN_EINVALID, "topology: torus dim %d is %lld", d,
                          (long long)t->dims[d]);
      count *= t->dims[d];
      topo.dims[d] = t->dims[d];
      topo.wrap[d] = t->wrap[d] != 0;
    }
    if (count != n)
      return plan_failf(PLAN_EINVALID,
                        "topology: the torus has %lld devices, the mesh %lld",
                        (long long)count, (long long)n);
    if ((rc = check_link(t->bandwidth, t->latency, "the torus link")))
      return rc;
    topo.kind = PLAN_TOPO_TORUS;
    topo.ndims = t->ndims;
    topo.link = (plan_link){t->bandwidth, t->latency};
  } else {
    if (t->nlevels < 1 || t->nlevels > PLAN_TOPOLOGY_MAX_LEVELS)
      return plan_failf(PLAN_EINVALID, "topology: 1 to %d levels, not %d",
                        PLAN_TOPOLOGY_MAX_LEVELS, t->nlevels);
    int64_t span = 1;
    for (int l = 0; l < t->nlevels; l++) {
      bool last = l + 1 == t->nlevels;
      int64_t sz = t->level_size[l];
      /* the last level spans everything: 0, or the groups left; a size
       * past n / span is refused before it is multiplied */
      if (sz < 0 || sz > n / span ||
          (last ? sz != 0 && sz * span != n : sz < 1 || n % (span * sz)))
        return plan_failf(PLAN_EINVALID,
                          "topology: level %d's groups of %lld do not divide "
                          "the mesh's %lld devices",
                          l + 1, (long long)sz, (long long)n);
      char what[32];
      snprintf(what, sizeof what, "level %d", l + 1);
      if ((rc = check_link(t->level_bandwidth[l], t->level_latency[l], what)))
        return rc;
      const char *name = NULL;
      if (t->level_name[l] &&
          !(name = plan_arena_strdup(&p->arena, t->level_name[l])))
        return plan_oom();
      topo.levels[l] = (plan_topo_level){
          name, last ? 0 : sz, {t->level_bandwidth[l], t->level_latency[l]}};
      if (!last)
        span *= sz;
    }
    topo.kind = PLAN_TOPO_LEVELS;
    topo.nlevels = t->nlevels;
  }
  plan_topology *copy = plan_arena_alloc(&p->arena, sizeof *copy);
  if (!copy)
    return plan_oom();
  *copy = topo;
  p->mesh.topology = copy;
  return PLAN_OK;
}

int plan_mesh_topology_kind(const plan_plan *p) {
  if (!p || !p->has_mesh || !p->mesh.topology)
    return -1;
  return p->mesh.topology->kind == PLAN_TOPO_TORUS ? 1 : 0;
}

int plan_set_mesh_device_hardware(plan_plan *p, const char *const *names) {
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_set_mesh_device_hardware: no mesh");
  plan_mesh *mesh = &p->mesh;
  if (!names) {
    mesh->profiles = NULL;
    mesh->nprofiles = 0;
    mesh->device_profile = NULL;
    return PLAN_OK;
  }
  int64_t n = mesh->ndevices;
  for (int64_t d = 0; d < n; d++)
    if (!names[d] || !plan_cost_profile_resolve(names[d]))
      return plan_failf(PLAN_ENOTFOUND,
                        "device %lld: unknown hardware profile '%s' (built "
                        "in: %s)",
                        (long long)d, names[d] ? names[d] : "(null)",
                        plan_cost_profile_list());
  /* the distinct profiles first (a built-in's canonical name is static),
   * so only they are allocated */
  int *devp = plan_arena_alloc(&p->arena, sizeof(int) * (size_t)(n + 1));
  const char **canon = malloc(sizeof *canon * (size_t)(n + 1));
  if (!devp || !canon) {
    free(canon);
    return plan_oom();
  }
  int nprof = 0;
  for (int64_t d = 0; d < n; d++) {
    const char *c = plan_cost_profile_resolve(names[d]);
    int q = 0;
    while (q < nprof && strcmp(canon[q], c))
      q++;
    if (q == nprof)
      canon[nprof++] = c;
    devp[d] = q;
  }
  plan_hardware *prof =
      plan_arena_alloc(&p->arena, sizeof(plan_hardware) * (size_t)nprof);
  if (!prof) {
    free(canon);
    return plan_oom();
  }
  for (int q = 0; q < nprof; q++) {
    memset(&prof[q], 0, sizeof prof[q]);
    if (!(prof[q].name = plan_arena_strdup(&p->arena, canon[q]))) {
      free(canon);
      return plan_oom();
    }
  }
  free(canon);
  /* per-device hardware replaces the mesh's one profile: a file holds
   * one or the other (`hardware:`) */
  mesh->hardware = NULL;
  mesh->profiles = prof;
  mesh->nprofiles = nprof;
  mesh->device_profile = devp;
  return PLAN_OK;
}

/* ---- the physical side of a mesh, for a plan of another shape ------------ */

static int copy_hw(plan_arena *a, plan_hardware *dst, const plan_hardware *src,
                   const plan_mesh *from, const plan_mesh *to) {
  *dst = *src;
  if ((src->name && !(dst->name = plan_arena_strdup(a, src->name))) ||
      (src->label && !(dst->label = plan_arena_strdup(a, src->label))))
    return plan_oom();
  /* per-axis link overrides follow the axis by name */
  for (int k = 0; k < PLAN_MAX_MESH_AXES; k++)
    dst->axis_link[k] = (plan_link){0, 0};
  for (int k = 0; k < from->naxes; k++) {
    int j = plan_mesh_axis_find(to, from->axis_names[k]);
    if (j >= 0)
      dst->axis_link[j] = src->axis_link[k];
  }
  return PLAN_OK;
}

int plan_mesh_copy_physical(plan_plan *dst, const plan_plan *src) {
  if (!dst || !src || !dst->has_mesh || !src->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_mesh_copy_physical: no mesh");
  plan_mesh *to = &dst->mesh;
  const plan_mesh *from = &src->mesh;
  if (to->ndevices != from->ndevices)
    return plan_failf(PLAN_EINVALID,
                      "plan_mesh_copy_physical: %lld devices, not %lld",
                      (long long)to->ndevices, (long long)from->ndevices);
  plan_arena *a = &dst->arena;
  int64_t n = from->ndevices;
  plan_hardware *hw = NULL, *prof = NULL;
  int *devp = NULL;
  plan_topology *topo = NULL;
  int rc;
  if (from->hardware) {
    if (!(hw = plan_arena_alloc(a, sizeof *hw)))
      return plan_oom();
    if ((rc = copy_hw(a, hw, from->hardware, from, to)))
      return rc;
  }
  if (from->device_profile && from->nprofiles > 0) {
    prof = plan_arena_alloc(a, sizeof *prof * (size_t)from->nprofiles);
    devp = plan_arena_alloc(a, sizeof *devp * (size_t)n);
    if (!prof || !devp)
      return plan_oom();
    for (int k = 0; k < from->nprofiles; k++)
      if ((rc = copy_hw(a, &prof[k], &from->profiles[k], from, to)))
        return rc;
    memcpy(devp, from->device_profile, sizeof *devp * (size_t)n);
  }
  if (from->topology) {
    if (!(topo = plan_arena_alloc(a, sizeof *topo)))
      return plan_oom();
    *topo = *from->topology;
    for (int l = 0; l < topo->nlevels; l++)
      if (topo->levels[l].name &&
          !(topo->levels[l].name = plan_arena_strdup(a, topo->levels[l].name)))
        return plan_oom();
  }
  /* all allocated: change nothing before this point */
  to->devices_per_host = from->devices_per_host;
  to->hardware = hw;
  to->profiles = prof;
  to->nprofiles = prof ? from->nprofiles : 0;
  to->device_profile = devp;
  to->topology = topo;
  return PLAN_OK;
}
