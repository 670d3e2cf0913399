/* Reading the format 1.1 parts of `mesh:` (spec/plan-format.md §3.2, §3.3):
 * per-device hardware (`hardware: {profiles: {LABEL: PROFILE}, devices:
 * [LABEL, ...]}`, a profile a built-in name or a full hardware map, one
 * label per physical device) and the topology (`levels` of a hierarchy or
 * one `torus`). Each figure is checked finite and >= 0, each count against
 * the mesh's devices, before anything is built from it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "base/suggest.h"
#include "cost/cost_model.h"
#include "read/plan_read.h"

/* Profiles a mesh may name: labels are looked up for every device. */
#define PLAN_MAX_PROFILES 256

static const char *const profile_keys[] = {"profiles", "devices", NULL};
static const char *const topo_keys[] = {"levels", "torus", NULL};
static const char *const level_keys[] = {"name", "size", "bandwidth", "latency",
                                         NULL};
static const char *const torus_keys[] = {"dims", "wrap", "bandwidth", "latency",
                                         NULL};

/* The key node of `key` in map n (NULL when absent). */
static const plan_ynode *key_node(const plan_ynode *n, const char *key) {
  for (size_t i = 0; n->kind == PLAN_Y_MAP && i < n->u.map.count; i++)
    if (!strcmp(n->u.map.pairs[i].key->u.scalar.text, key))
      return n->u.map.pairs[i].key;
  return NULL;
}

/* A figure >= 0 (finite: plan_rd_number refuses NaN and infinities). */
static int read_fig(const plan_reader *rd, const plan_ynode *map,
                    const char *key, double *out) {
  const plan_ynode *v = plan_ymap_get(map, key);
  if (!v)
    return PLAN_OK;
  int rc = plan_rd_number(rd, v, key, out);
  if (rc)
    return rc;
  if (*out < 0)
    return plan_rd_fail(rd, v, PLAN_EINVALID, "%s must be >= 0, not %g", key,
                        *out);
  return PLAN_OK;
}

/* ---- per-device hardware ------------------------------------------------- */

/* A built-in profile's name, kept canonical (an alias, `h100`, is the
 * profile `h100-sxm`: written and hashed as that), or did-you-mean over
 * the built-in names. */
static int builtin_profile(const plan_reader *rd, const plan_ynode *v,
                           const char *label, plan_hardware *h) {
  int rc = plan_rd_name(rd, v, "a hardware profile", &h->name);
  if (rc)
    return rc;
  const char *canon = plan_cost_profile_resolve(h->name);
  if (canon) {
    h->name = canon; /* the built-in table's own string */
    return PLAN_OK;
  }
  const char *names[32];
  int n = plan_cost_profile_count();
  if (n > 31)
    n = 31;
  for (int i = 0; i < n; i++)
    names[i] = plan_cost_profile_name(i);
  names[n] = NULL;
  char hint[PLAN_HINT_SIZE];
  plan_hint_names(hint, sizeof hint, h->name, names, (size_t)n);
  return plan_rd_fail(rd, v, PLAN_EINVALID,
                      "profile '%s': unknown hardware profile '%.60s'%s "
                      "(built in: %s; or give a hardware map)",
                      label, h->name, hint, plan_cost_profile_list());
}

static int read_profile_map(const plan_reader *rd, const plan_ynode *pn,
                            plan_mesh *m) {
  int rc = plan_rd_expect_map(rd, pn, "hardware profiles ({LABEL: PROFILE})");
  if (rc)
    return rc;
  size_t np = pn->u.map.count;
  if (np == 0)
    return plan_rd_fail(rd, pn, PLAN_ESCHEMA,
                        "hardware profiles must name at least one profile");
  if (np > PLAN_MAX_PROFILES)
    return plan_rd_fail(rd, pn, PLAN_ELIMIT, "more than %d hardware profiles",
                        PLAN_MAX_PROFILES);
  m->profiles = plan_arena_alloc(rd->arena, sizeof(plan_hardware) * np);
  if (!m->profiles)
    return plan_oom();
  memset(m->profiles, 0, sizeof(plan_hardware) * np);
  m->nprofiles = (int)np;
  for (size_t i = 0; i < np; i++) {
    const plan_ynode *k = pn->u.map.pairs[i].key, *v = pn->u.map.pairs[i].value;
    plan_hardware *h = &m->profiles[i];
    if ((rc = plan_rd_name(rd, k, "a profile label", &h->label)))
      return rc;
    if (v->kind == PLAN_Y_SCALAR) {
      h->pos = plan_rd_pos(v);
      rc = builtin_profile(rd, v, h->label, h);
    } else if (v->kind == PLAN_Y_MAP) {
      const plan_ynode *bad = key_node(v, "profiles");
      if (!bad)
        bad = key_node(v, "devices");
      if (bad)
        return plan_rd_fail(rd, bad, PLAN_ESCHEMA,
                            "profile '%s': '%s' belongs to mesh.hardware, "
                            "not inside a profile",
                            h->label, bad->u.scalar.text);
      rc = plan_rd_check_keys(
          rd, v,
          (const char *const[]){"name", "flops", "memory", "memory_bandwidth",
                                "intra_host", "inter_host", "links", NULL},
          "a hardware profile", NULL);
      if (!rc)
        rc = plan_mesh_read_hw(rd, v, m, h);
    } else {
      rc = plan_rd_fail(rd, v, PLAN_ESCHEMA,
                        "profile '%s' must be a built-in profile name or a "
                        "hardware map",
                        h->label);
    }
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

static int read_device_labels(const plan_reader *rd, const plan_ynode *dn,
                              plan_mesh *m) {
  int rc = plan_rd_expect_seq(rd, dn, "hardware devices ([LABEL, ...])");
  if (rc)
    return rc;
  /* the count first: a hostile list is refused before it is looked at */
  if ((int64_t)dn->u.seq.count != m->ndevices)
    return plan_rd_fail(rd, dn, PLAN_EINVALID,
                        "hardware devices lists %zu labels but the mesh has "
                        "%lld devices (one label per physical device id)",
                        dn->u.seq.count, (long long)m->ndevices);
  m->device_profile =
      plan_arena_alloc(rd->arena, sizeof(int) * (size_t)m->ndevices);
  if (!m->device_profile)
    return plan_oom();
  int last = 0;
  for (int64_t d = 0; d < m->ndevices; d++) {
    const plan_ynode *e = dn->u.seq.items[d];
    if ((rc = plan_rd_expect_scalar(rd, e, "a profile label")))
      return rc;
    const char *t = e->u.scalar.text;
    int q = -1;
    if (!strcmp(t, m->profiles[last].label))
      q = last; /* runs of one label are the common case */
    for (int k = 0; q < 0 && k < m->nprofiles; k++)
      if (!strcmp(t, m->profiles[k].label))
        q = k;
    if (q < 0) {
      char hint[PLAN_HINT_SIZE];
      plan_hint_field(hint, sizeof hint, t, m->profiles, (size_t)m->nprofiles,
                      sizeof(plan_hardware), offsetof(plan_hardware, label));
      return plan_rd_fail(rd, e, PLAN_EINVALID,
                          "device %lld: no hardware profile '%.60s'%s",
                          (long long)d, t, hint);
    }
    m->device_profile[d] = last = q;
  }
  return PLAN_OK;
}

int plan_mesh_read_profiles(const plan_reader *rd, const plan_ynode *hw,
                            plan_mesh *m) {
  const plan_ynode *pk = key_node(hw, "profiles"),
                   *dk = key_node(hw, "devices");
  int rc = plan_rd_need_format_1_1(rd, pk ? pk : dk,
                                   pk ? "mesh.hardware.profiles"
                                      : "mesh.hardware.devices");
  if (rc)
    return rc;
  for (size_t i = 0; i < hw->u.map.count; i++) {
    const plan_ynode *k = hw->u.map.pairs[i].key;
    const char *key = k->u.scalar.text;
    bool ok = !strncmp(key, "x-", 2);
    for (const char *const *kn = profile_keys; *kn && !ok; kn++)
      ok = !strcmp(*kn, key);
    if (!ok)
      return plan_rd_fail(rd, k, PLAN_ESCHEMA,
                          "'%s' does not go with per-device hardware: give it "
                          "inside a profile ({LABEL: {%s: ...}})",
                          key, key);
  }
  if (!pk)
    return plan_rd_fail(rd, dk, PLAN_ESCHEMA,
                        "per-device hardware needs 'profiles: {LABEL: "
                        "PROFILE, ...}' beside 'devices'");
  if (!dk)
    return plan_rd_fail(rd, pk, PLAN_ESCHEMA,
                        "per-device hardware needs 'devices: [LABEL, ...]', "
                        "one label per physical device");
  if ((rc = read_profile_map(rd, plan_ymap_get(hw, "profiles"), m)))
    return rc;
  return read_device_labels(rd, plan_ymap_get(hw, "devices"), m);
}

/* ---- topology ------------------------------------------------------------ */

static int read_link_figs(const plan_reader *rd, const plan_ynode *n,
                          plan_link *l) {
  int rc = read_fig(rd, n, "bandwidth", &l->bandwidth);
  if (!rc)
    rc = read_fig(rd, n, "latency", &l->latency);
  return rc;
}

static int read_levels(const plan_reader *rd, const plan_ynode *n,
                       const plan_mesh *m, plan_topology *t) {
  int rc = plan_rd_expect_seq(rd, n,
                              "topology levels ([{name, size, "
                              "bandwidth, latency}, ...])");
  if (rc)
    return rc;
  if (n->u.seq.count == 0 || n->u.seq.count > PLAN_MAX_TOPO_LEVELS)
    return plan_rd_fail(rd, n, PLAN_ELIMIT,
                        "a topology has 1 to %d levels, not %zu",
                        PLAN_MAX_TOPO_LEVELS, n->u.seq.count);
  t->kind = PLAN_TOPO_LEVELS;
  t->nlevels = (int)n->u.seq.count;
  int64_t total = 1;
  for (int l = 0; l < t->nlevels; l++) {
    const plan_ynode *e = n->u.seq.items[l];
    plan_topo_level *lv = &t->levels[l];
    if ((rc = plan_rd_expect_map(rd, e, "a topology level")) ||
        (rc = plan_rd_check_keys(rd, e, level_keys, "a topology level", NULL)))
      return rc;
    const plan_ynode *v;
    if ((v = plan_ymap_get(e, "name")) &&
        (rc = plan_rd_name(rd, v, "a level name", &lv->name)))
      return rc;
    if (!(v = plan_ymap_get(e, "size")))
      return plan_rd_fail(rd, e, PLAN_ESCHEMA,
                          "a topology level needs 'size' (how many groups of "
                          "the level below, or devices, it joins)");
    if ((rc = plan_rd_int(rd, v, "a level size", &lv->size)))
      return rc;
    if (lv->size < 1)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "a level size must be >= 1");
    if (total >= 0 && !plan_mul_i64(total, lv->size, &total))
      total = -1; /* overflows: reported below */
    if ((rc = read_link_figs(rd, e, &lv->link)))
      return rc;
  }
  if (total != m->ndevices)
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "the topology levels hold %s%lld devices (the product "
                        "of their sizes) but the mesh has %lld",
                        total < 0 ? "more than " : "",
                        (long long)(total < 0 ? INT64_MAX : total),
                        (long long)m->ndevices);
  return PLAN_OK;
}

static int read_torus(const plan_reader *rd, const plan_ynode *n,
                      const plan_mesh *m, plan_topology *t) {
  int rc = plan_rd_expect_map(rd, n,
                              "a torus ({dims, wrap, bandwidth, "
                              "latency})");
  if (rc || (rc = plan_rd_check_keys(rd, n, torus_keys, "a torus", NULL)))
    return rc;
  t->kind = PLAN_TOPO_TORUS;
  const plan_ynode *dn = plan_ymap_get(n, "dims");
  if (!dn)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "a torus needs 'dims: [..]'");
  if ((rc = plan_rd_expect_seq(rd, dn, "torus dims")))
    return rc;
  if (dn->u.seq.count == 0 || dn->u.seq.count > 3)
    return plan_rd_fail(rd, dn, PLAN_ELIMIT, "a torus has 1 to 3 dims, not %zu",
                        dn->u.seq.count);
  t->ndims = (int)dn->u.seq.count;
  int64_t total = 1;
  for (int i = 0; i < t->ndims; i++) {
    const plan_ynode *e = dn->u.seq.items[i];
    if ((rc = plan_rd_int(rd, e, "a torus dim", &t->dims[i])))
      return rc;
    if (t->dims[i] < 1)
      return plan_rd_fail(rd, e, PLAN_EINVALID, "torus dims must be >= 1");
    if (total >= 0 && !plan_mul_i64(total, t->dims[i], &total))
      total = -1; /* overflows */
    t->wrap[i] = true;
  }
  if (total != m->ndevices)
    return plan_rd_fail(rd, dn, PLAN_EINVALID,
                        "the torus dims hold %s%lld devices but the mesh has "
                        "%lld",
                        total < 0 ? "more than " : "",
                        (long long)(total < 0 ? INT64_MAX : total),
                        (long long)m->ndevices);
  const plan_ynode *wn = plan_ymap_get(n, "wrap");
  if (wn) {
    if ((rc = plan_rd_expect_seq(rd, wn, "torus wrap ([true, ...])")))
      return rc;
    if ((int)wn->u.seq.count != t->ndims)
      return plan_rd_fail(rd, wn, PLAN_EINVALID,
                          "torus wrap has %zu entries for %d dims",
                          wn->u.seq.count, t->ndims);
    for (int i = 0; i < t->ndims; i++)
      if ((rc = plan_rd_bool(rd, wn->u.seq.items[i], "a torus wrap",
                             &t->wrap[i])))
        return rc;
  }
  return read_link_figs(rd, n, &t->link);
}

int plan_mesh_read_topology(const plan_reader *rd, const plan_ynode *mesh,
                            const plan_ynode *v, plan_mesh *m) {
  int rc =
      plan_rd_need_format_1_1(rd, key_node(mesh, "topology"), "mesh.topology");
  if (rc || (rc = plan_rd_expect_map(rd, v, "topology")) ||
      (rc = plan_rd_check_keys(rd, v, topo_keys, "topology", NULL)))
    return rc;
  const plan_ynode *lv = plan_ymap_get(v, "levels"),
                   *tv = plan_ymap_get(v, "torus");
  if (lv && tv)
    return plan_rd_fail(rd, key_node(v, "torus"), PLAN_ESCHEMA,
                        "a topology is either 'levels' or a 'torus', not both");
  if (!lv && !tv)
    return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                        "topology needs 'levels: [..]' or 'torus: {..}'");
  plan_topology *t = plan_arena_alloc(rd->arena, sizeof *t);
  if (!t)
    return plan_oom();
  memset(t, 0, sizeof *t);
  t->pos = plan_rd_pos(v);
  rc = lv ? read_levels(rd, lv, m, t) : read_torus(rd, tv, m, t);
  if (rc)
    return rc;
  m->topology = t;
  return PLAN_OK;
}
