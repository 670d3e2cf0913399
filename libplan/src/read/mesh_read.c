/* Reading the `mesh:` mapping: named axes, device order (explicit or iota
 * with reshape/transpose, as GSPMD), hosts, sub-meshes and the hardware
 * model (spec/plan-format.md, "mesh"); per-device hardware and the
 * topology (format 1.1) are read in mesh_hetero.c. */
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"

#define PLAN_MAX_DEVICES (1 << 22)

static const char *const mesh_keys[] = {
    "axes",     "devices", "devices_per_host", "submeshes", "hardware",
    "topology", NULL};
static const char *const hw_keys[] = {
    "name",       "flops", "memory",   "memory_bandwidth", "intra_host",
    "inter_host", "links", "profiles", "devices",          NULL};
static const char *const link_keys[] = {"bandwidth", "latency", NULL};
static const char *const iota_keys[] = {"iota", "transpose", NULL};

static bool is_ident(const char *s, size_t n) {
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

int plan_rd_need_format_1_1(const plan_reader *rd, const plan_ynode *at,
                            const char *field) {
  if (rd->ver_major > 1 || (rd->ver_major == 1 && rd->ver_minor >= 1))
    return PLAN_OK;
  return plan_rd_fail(rd, at, PLAN_EVERSION,
                      "%s is a format 1.1 field, but the file is format "
                      "%d.%d: write 'libplan: \"1.1\"'",
                      field, rd->ver_major, rd->ver_minor);
}

int plan_mesh_axis_find(const plan_mesh *m, const char *name) {
  for (int a = 0; a < m->naxes; a++)
    if (!strcmp(m->axis_names[a], name))
      return a;
  return -1;
}

static int read_axes(const plan_reader *rd, const plan_ynode *n, plan_mesh *m) {
  int rc = plan_rd_expect_seq(rd, n, "mesh axes ([NAME=SIZE, ...])");
  if (rc)
    return rc;
  if (n->u.seq.count == 0 || n->u.seq.count > PLAN_MAX_MESH_AXES)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "a mesh has 1 to %d axes, not %zu",
                        PLAN_MAX_MESH_AXES, n->u.seq.count);
  m->naxes = (int)n->u.seq.count;
  m->ndevices = 1;
  for (int a = 0; a < m->naxes; a++) {
    const plan_ynode *e = n->u.seq.items[a];
    if ((rc = plan_rd_expect_scalar(rd, e, "a mesh axis")))
      return rc;
    const char *t = e->u.scalar.text;
    const char *eq = strchr(t, '=');
    if (!eq || !is_ident(t, (size_t)(eq - t)))
      return plan_rd_fail(rd, e, PLAN_ESCHEMA,
                          "mesh axis '%.40s' must be NAME=SIZE with NAME an "
                          "identifier",
                          t);
    int64_t size;
    if (!plan_parse_int64(eq + 1, strlen(eq + 1), &size) || size < 1)
      return plan_rd_fail(rd, e, PLAN_EINVALID,
                          "mesh axis '%.40s' needs a size >= 1", t);
    if ((size_t)(eq - t) == 5 && !strncmp(t, "order", 5))
      return plan_rd_fail(
          rd, e, PLAN_EINVALID,
          "'order' is reserved (the map form of a placement uses "
          "it for the nesting order); name the axis otherwise");
    m->axis_names[a] = plan_arena_strndup(rd->arena, t, (size_t)(eq - t));
    if (!m->axis_names[a])
      return plan_oom();
    for (int b = 0; b < a; b++)
      if (!strcmp(m->axis_names[a], m->axis_names[b]))
        return plan_rd_fail(rd, e, PLAN_EINVALID,
                            "mesh axis '%s' is named twice", m->axis_names[a]);
    m->axis_sizes[a] = size;
    if (!plan_mul_i64(m->ndevices, size, &m->ndevices) ||
        m->ndevices > PLAN_MAX_DEVICES)
      return plan_rd_fail(rd, e, PLAN_ELIMIT,
                          "the mesh has more than %d devices",
                          PLAN_MAX_DEVICES);
  }
  return PLAN_OK;
}

/* Flattens nested sequences of device ids into m->devices. */
static int flatten_devices(const plan_reader *rd, const plan_ynode *n,
                           plan_mesh *m, int64_t *count, int depth) {
  if (n->kind == PLAN_Y_SCALAR) {
    int64_t v;
    int rc = plan_rd_int(rd, n, "a device id", &v);
    if (rc)
      return rc;
    if (v < 0)
      return plan_rd_fail(rd, n, PLAN_EINVALID, "device id %lld is negative",
                          (long long)v);
    if (*count >= m->ndevices)
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "more device ids than the mesh's %lld devices",
                          (long long)m->ndevices);
    m->devices[(*count)++] = v;
    return PLAN_OK;
  }
  if (n->kind != PLAN_Y_SEQ || depth > PLAN_MAX_MESH_AXES)
    return plan_rd_fail(
        rd, n, PLAN_ESCHEMA,
        "devices must be 'iota', a (nested) list of device ids, or "
        "{iota: [..], transpose: [..]}");
  for (size_t i = 0; i < n->u.seq.count; i++) {
    int rc = flatten_devices(rd, n->u.seq.items[i], m, count, depth + 1);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

/* devices = arange(N).reshape(dims).transpose(perm).flatten() */
static int iota_devices(const plan_reader *rd, const plan_ynode *n,
                        plan_mesh *m) {
  int rc = plan_rd_check_keys(rd, n, iota_keys, "devices", NULL);
  if (rc)
    return rc;
  const plan_ynode *dn = plan_ymap_get(n, "iota");
  if (!dn)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "devices mapping needs 'iota: [dims]'");
  int64_t *dims, *perm = NULL;
  int nd, np = 0;
  if ((rc = plan_rd_int_list(rd, dn, "iota", &dims, &nd, PLAN_MAX_RANK)))
    return rc;
  int64_t total = 1;
  for (int i = 0; i < nd; i++)
    if (dims[i] < 1 || !plan_mul_i64(total, dims[i], &total))
      return plan_rd_fail(rd, dn, PLAN_EINVALID, "iota dims must be >= 1");
  if (nd == 0 || total != m->ndevices)
    return plan_rd_fail(rd, dn, PLAN_EINVALID,
                        "iota dims hold %lld devices but the mesh has %lld",
                        (long long)total, (long long)m->ndevices);
  const plan_ynode *tn = plan_ymap_get(n, "transpose");
  if (tn) {
    if ((rc = plan_rd_int_list(rd, tn, "transpose", &perm, &np, PLAN_MAX_RANK)))
      return rc;
    bool seen[PLAN_MAX_RANK] = {false};
    if (np != nd)
      return plan_rd_fail(rd, tn, PLAN_EINVALID,
                          "transpose must list each of the %d iota dims once",
                          nd);
    for (int i = 0; i < np; i++) {
      if (perm[i] < 0 || perm[i] >= nd || seen[perm[i]])
        return plan_rd_fail(rd, tn, PLAN_EINVALID,
                            "transpose must be a permutation of 0..%d", nd - 1);
      seen[perm[i]] = true;
    }
  }
  /* strides of the source (row-major over dims) */
  int64_t stride[PLAN_MAX_RANK], tdims[PLAN_MAX_RANK], tstride[PLAN_MAX_RANK];
  stride[nd - 1] = 1;
  for (int i = nd - 2; i >= 0; i--)
    stride[i] = stride[i + 1] * dims[i + 1];
  for (int i = 0; i < nd; i++) {
    int src = perm ? (int)perm[i] : i;
    tdims[i] = dims[src];
    tstride[i] = stride[src];
  }
  int64_t idx[PLAN_MAX_RANK] = {0};
  for (int64_t k = 0; k < total; k++) {
    int64_t off = 0;
    for (int i = 0; i < nd; i++)
      off += idx[i] * tstride[i];
    m->devices[k] = off;
    for (int i = nd - 1; i >= 0; i--) {
      if (++idx[i] < tdims[i])
        break;
      idx[i] = 0;
    }
  }
  return PLAN_OK;
}

static int read_devices(const plan_reader *rd, const plan_ynode *n,
                        plan_mesh *m) {
  m->devices_pos = plan_rd_pos(n);
  if (plan_yscalar_is(n, "iota"))
    return PLAN_OK; /* identity: devices stays NULL */
  if (n->kind == PLAN_Y_SCALAR)
    return plan_rd_fail(
        rd, n, PLAN_ESCHEMA,
        "devices must be 'iota', a (nested) list of device ids, or "
        "{iota: [..], transpose: [..]}, not '%.40s'",
        n->u.scalar.text);
  m->devices =
      plan_arena_alloc(rd->arena, sizeof(int64_t) * (size_t)m->ndevices);
  if (!m->devices)
    return plan_oom();
  int rc;
  if (n->kind == PLAN_Y_MAP) {
    rc = iota_devices(rd, n, m);
  } else {
    int64_t count = 0;
    rc = flatten_devices(rd, n, m, &count, 0);
    if (!rc && count != m->ndevices)
      rc = plan_rd_fail(rd, n, PLAN_EINVALID,
                        "devices lists %lld ids but the mesh has %lld devices",
                        (long long)count, (long long)m->ndevices);
  }
  if (rc)
    return rc;
  /* An identity order is the default: drop it so hashes agree. */
  bool ident = true;
  for (int64_t k = 0; k < m->ndevices && ident; k++)
    ident = m->devices[k] == k;
  if (ident)
    m->devices = NULL;
  return PLAN_OK;
}

static int read_link(const plan_reader *rd, const plan_ynode *n, plan_link *l) {
  int rc = plan_rd_expect_map(rd, n, "a link");
  if (rc || (rc = plan_rd_check_keys(rd, n, link_keys, "a link", NULL)))
    return rc;
  const plan_ynode *v;
  if ((v = plan_ymap_get(n, "bandwidth")) &&
      (rc = plan_rd_number(rd, v, "bandwidth", &l->bandwidth)))
    return rc;
  if ((v = plan_ymap_get(n, "latency")) &&
      (rc = plan_rd_number(rd, v, "latency", &l->latency)))
    return rc;
  if (l->bandwidth < 0 || l->latency < 0)
    return plan_rd_fail(rd, n, PLAN_EINVALID, "link figures must be >= 0");
  return PLAN_OK;
}

static int read_hardware(const plan_reader *rd, const plan_ynode *n,
                         plan_mesh *m) {
  int rc = plan_rd_expect_map(rd, n, "hardware");
  if (rc || (rc = plan_rd_check_keys(rd, n, hw_keys, "hardware", NULL)))
    return rc;
  if (plan_ymap_get(n, "profiles") || plan_ymap_get(n, "devices"))
    return plan_mesh_read_profiles(rd, n, m);
  plan_hardware *h = plan_arena_alloc(rd->arena, sizeof *h);
  if (!h)
    return plan_oom();
  m->hardware = h;
  return plan_mesh_read_hw(rd, n, m, h);
}

int plan_mesh_read_hw(const plan_reader *rd, const plan_ynode *n,
                      const plan_mesh *m, plan_hardware *h) {
  int rc;
  h->pos = plan_rd_pos(n);
  const plan_ynode *v;
  if ((v = plan_ymap_get(n, "name")) &&
      (rc = plan_rd_name(rd, v, "hardware name", &h->name)))
    return rc;
  if ((v = plan_ymap_get(n, "flops"))) {
    if ((rc = plan_rd_expect_map(rd, v, "flops")))
      return rc;
    for (size_t i = 0; i < v->u.map.count; i++) {
      const plan_ynode *k = v->u.map.pairs[i].key;
      int dt = plan_dtype_from_name(k->u.scalar.text);
      if (dt < 0)
        return plan_rd_fail(rd, k, PLAN_ESCHEMA,
                            "unknown dtype '%.40s' in flops", k->u.scalar.text);
      if ((rc = plan_rd_number(rd, v->u.map.pairs[i].value, "flops",
                               &h->flops[dt])))
        return rc;
      if (h->flops[dt] < 0)
        return plan_rd_fail(rd, v->u.map.pairs[i].value, PLAN_EINVALID,
                            "flops must be >= 0");
    }
  }
  if ((v = plan_ymap_get(n, "memory")) &&
      (rc = plan_rd_number(rd, v, "memory", &h->memory)))
    return rc;
  if ((v = plan_ymap_get(n, "memory_bandwidth")) &&
      (rc = plan_rd_number(rd, v, "memory_bandwidth", &h->memory_bandwidth)))
    return rc;
  if (h->memory < 0 || h->memory_bandwidth < 0)
    return plan_rd_fail(rd, n, PLAN_EINVALID, "hardware figures must be >= 0");
  if ((v = plan_ymap_get(n, "intra_host")) &&
      (rc = read_link(rd, v, &h->intra_host)))
    return rc;
  if ((v = plan_ymap_get(n, "inter_host")) &&
      (rc = read_link(rd, v, &h->inter_host)))
    return rc;
  if ((v = plan_ymap_get(n, "links"))) {
    if ((rc = plan_rd_expect_map(rd, v, "links")))
      return rc;
    for (size_t i = 0; i < v->u.map.count; i++) {
      const plan_ynode *k = v->u.map.pairs[i].key;
      int a = plan_mesh_axis_find(m, k->u.scalar.text);
      if (a < 0)
        return plan_rd_fail(rd, k, PLAN_EINVALID, "links: no mesh axis '%.40s'",
                            k->u.scalar.text);
      if ((rc = read_link(rd, v->u.map.pairs[i].value, &h->axis_link[a])))
        return rc;
    }
  }
  return PLAN_OK;
}

static int read_submeshes(const plan_reader *rd, const plan_ynode *n,
                          plan_mesh *m) {
  int rc = plan_rd_expect_map(rd, n, "submeshes");
  if (rc)
    return rc;
  m->nsubmeshes = (int)n->u.map.count;
  m->submeshes =
      plan_arena_alloc(rd->arena, sizeof(plan_submesh) * (n->u.map.count + 1));
  if (!m->submeshes)
    return plan_oom();
  for (size_t i = 0; i < n->u.map.count; i++) {
    plan_submesh *s = &m->submeshes[i];
    const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
    if ((rc = plan_rd_name(rd, k, "a submesh name", &s->name)))
      return rc;
    s->pos = plan_rd_pos(k);
    for (int a = 0; a < PLAN_MAX_MESH_AXES; a++)
      s->index[a] = -1;
    if ((rc = plan_rd_expect_map(rd, v, "a submesh ({AXIS: INDEX, ...})")))
      return rc;
    for (size_t j = 0; j < v->u.map.count; j++) {
      const plan_ynode *ak = v->u.map.pairs[j].key;
      int a = plan_mesh_axis_find(m, ak->u.scalar.text);
      if (a < 0)
        return plan_rd_fail(rd, ak, PLAN_EINVALID,
                            "submesh '%s': no mesh axis '%.40s'", s->name,
                            ak->u.scalar.text);
      int64_t idx;
      if ((rc = plan_rd_int(rd, v->u.map.pairs[j].value, "a submesh index",
                            &idx)))
        return rc;
      if (idx < 0 || idx >= m->axis_sizes[a])
        return plan_rd_fail(
            rd, v->u.map.pairs[j].value, PLAN_EINVALID,
            "submesh '%s': index %lld is outside axis %s (size %lld)", s->name,
            (long long)idx, m->axis_names[a], (long long)m->axis_sizes[a]);
      s->index[a] = idx;
    }
  }
  return PLAN_OK;
}

int plan_mesh_read(const plan_reader *rd, const plan_ynode *n, plan_mesh *m) {
  int rc = plan_rd_expect_map(rd, n, "mesh");
  if (rc || (rc = plan_rd_check_keys(rd, n, mesh_keys, "mesh", &m->ext)))
    return rc;
  m->pos = plan_rd_pos(n);
  const plan_ynode *v = plan_ymap_get(n, "axes");
  if (!v)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "mesh needs 'axes: [NAME=SIZE, ...]'");
  m->axes_pos = plan_rd_pos(v);
  if ((rc = read_axes(rd, v, m)))
    return rc;
  if ((v = plan_ymap_get(n, "devices")) && (rc = read_devices(rd, v, m)))
    return rc;
  if ((v = plan_ymap_get(n, "devices_per_host"))) {
    if ((rc = plan_rd_int(rd, v, "devices_per_host", &m->devices_per_host)))
      return rc;
    if (m->devices_per_host < 1)
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "devices_per_host must be >= 1");
  }
  if ((v = plan_ymap_get(n, "submeshes")) && (rc = read_submeshes(rd, v, m)))
    return rc;
  if ((v = plan_ymap_get(n, "hardware")) && (rc = read_hardware(rd, v, m)))
    return rc;
  if ((v = plan_ymap_get(n, "topology")) &&
      (rc = plan_mesh_read_topology(rd, n, v, m)))
    return rc;
  return PLAN_OK;
}
