/* The canonical encoding of the mesh part: axes in their order, links,
 * hardware and submeshes with their keys in byte order, zero fields left
 * out. Per-device hardware (format 1.1) is its distinct profiles in the
 * order devices first use them and each device's index into that list:
 * labels are names for the reader, not content. The topology is its levels
 * in order, or its torus. */
#include "hash/canon_json.h"

static void cj_link(cj *c, bool *first, const char *key, const plan_link *l) {
  if (l->bandwidth == 0 && l->latency == 0)
    return;
  bool f = true;
  cj_key(c, first, key);
  plan_buf_putc(c->b, '{');
  if (l->bandwidth != 0) {
    cj_key(c, &f, "bandwidth");
    cj_num(c, l->bandwidth);
  }
  if (l->latency != 0) {
    cj_key(c, &f, "latency");
    cj_num(c, l->latency);
  }
  plan_buf_putc(c->b, '}');
}

static void cj_hardware(cj *c, const plan_mesh *m, const plan_hardware *h) {
  bool first = true;
  plan_buf_putc(c->b, '{');
  bool any = false;
  for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
    any |= h->flops[d] != 0;
  if (any) {
    bool f = true;
    cj_key(c, &first, "flops");
    plan_buf_putc(c->b, '{');
    /* dtype names in byte order */
    static const plan_dtype by_name[] = {PLAN_BF16, PLAN_F16, PLAN_F32,
                                         PLAN_F64,  PLAN_I32, PLAN_I64};
    for (size_t k = 0; k < sizeof by_name / sizeof *by_name; k++)
      if (h->flops[by_name[k]] != 0) {
        cj_key(c, &f, plan_dtype_name(by_name[k]));
        cj_num(c, h->flops[by_name[k]]);
      }
    plan_buf_putc(c->b, '}');
  }
  cj_link(c, &first, "inter_host", &h->inter_host);
  cj_link(c, &first, "intra_host", &h->intra_host);
  bool anylink = false;
  for (int a = 0; a < m->naxes; a++)
    anylink |= h->axis_link[a].bandwidth != 0 || h->axis_link[a].latency != 0;
  if (anylink) {
    bool f = true;
    cj_key(c, &first, "links");
    plan_buf_putc(c->b, '{');
    named ax[PLAN_MAX_MESH_AXES] = {{NULL, 0, 0}};
    for (int a = 0; a < m->naxes; a++) {
      ax[a].name = m->axis_names[a];
      ax[a].idx = a;
    }
    qsort(ax, (size_t)m->naxes, sizeof(named), named_cmp);
    for (int k = 0; k < m->naxes; k++)
      cj_link(c, &f, ax[k].name, &h->axis_link[ax[k].idx]);
    plan_buf_putc(c->b, '}');
  }
  if (h->memory != 0) {
    cj_key(c, &first, "memory");
    cj_num(c, h->memory);
  }
  if (h->memory_bandwidth != 0) {
    cj_key(c, &first, "memory_bandwidth");
    cj_num(c, h->memory_bandwidth);
  }
  if (h->name) {
    cj_key(c, &first, "name");
    cj_str(c, h->name);
  }
  plan_buf_putc(c->b, '}');
}

int plan_cj_mesh(cj *c, const plan_mesh *m) {
  bool first = true;
  plan_buf_putc(c->b, '{');
  cj_key(c, &first, "axes");
  plan_buf_putc(c->b, '[');
  for (int a = 0; a < m->naxes; a++) {
    if (a)
      plan_buf_putc(c->b, ',');
    char buf[96];
    snprintf(buf, sizeof buf, "%s=%lld", m->axis_names[a],
             (long long)m->axis_sizes[a]);
    cj_str(c, buf);
  }
  plan_buf_putc(c->b, ']');
  if (m->devices) {
    cj_key(c, &first, "devices");
    plan_buf_putc(c->b, '[');
    for (int64_t k = 0; k < m->ndevices; k++) {
      if (k)
        plan_buf_putc(c->b, ',');
      cj_int(c, m->devices[k]);
    }
    plan_buf_putc(c->b, ']');
  }
  if (m->devices_per_host) {
    cj_key(c, &first, "devices_per_host");
    cj_int(c, m->devices_per_host);
  }
  if (m->hardware) {
    cj_key(c, &first, "hardware");
    cj_hardware(c, m, m->hardware);
  } else if (m->device_profile && m->nprofiles > 0) {
    cj_key(c, &first, "hardware");
    int rc = plan_cj_profiles(c, m);
    if (rc)
      return rc;
  }
  if (m->nsubmeshes) {
    cj_key(c, &first, "submeshes");
    plan_buf_putc(c->b, '{');
    named *s = malloc(sizeof(named) * (size_t)m->nsubmeshes);
    if (!s)
      return plan_oom();
    for (int i = 0; i < m->nsubmeshes; i++) {
      s[i].name = m->submeshes[i].name;
      s[i].idx = i;
    }
    qsort(s, (size_t)m->nsubmeshes, sizeof(named), named_cmp);
    bool f = true;
    for (int i = 0; i < m->nsubmeshes; i++) {
      const plan_submesh *sm = &m->submeshes[s[i].idx];
      cj_key(c, &f, sm->name);
      plan_buf_putc(c->b, '{');
      named ax[PLAN_MAX_MESH_AXES] = {{NULL, 0, 0}};
      int n = 0;
      for (int a = 0; a < m->naxes; a++)
        if (sm->index[a] >= 0) {
          ax[n].name = m->axis_names[a];
          ax[n++].idx = a;
        }
      qsort(ax, (size_t)n, sizeof(named), named_cmp);
      bool f2 = true;
      for (int k = 0; k < n; k++) {
        cj_key(c, &f2, ax[k].name);
        cj_int(c, sm->index[ax[k].idx]);
      }
      plan_buf_putc(c->b, '}');
    }
    free(s);
    plan_buf_putc(c->b, '}');
  }
  if (m->topology) {
    cj_key(c, &first, "topology");
    plan_cj_topology(c, m);
  }
  plan_buf_putc(c->b, '}');
  return PLAN_OK;
}

int plan_cj_profiles(cj *c, const plan_mesh *m) {
  int np = m->nprofiles;
  plan_buf *enc = calloc((size_t)np, sizeof *enc);
  int *rep = malloc(sizeof(int) * (size_t)np * 2);
  if (!enc || !rep) {
    free(enc);
    free(rep);
    return plan_oom();
  }
  int *order = rep + np; /* rep's new index, -1 until a device uses it */
  int rc = PLAN_OK;
  for (int q = 0; q < np; q++) {
    plan_buf_init(&enc[q]);
    cj e = {.b = &enc[q]};
    cj_hardware(&e, m, &m->profiles[q]);
    if (enc[q].failed)
      rc = plan_oom();
    rep[q] = q;
    order[q] = -1;
    for (int r = 0; r < q && rep[q] == q; r++)
      if (enc[r].len == enc[q].len &&
          !memcmp(enc[r].data, enc[q].data, enc[q].len))
        rep[q] = r;
  }
  int used = 0;
  for (int64_t d = 0; d < m->ndevices && !rc; d++) {
    int q = m->device_profile[d];
    if (q >= 0 && q < np && order[rep[q]] < 0)
      order[rep[q]] = used++;
  }
  bool f = true;
  plan_buf_putc(c->b, '{');
  cj_key(c, &f, "devices");
  plan_buf_putc(c->b, '[');
  for (int64_t d = 0; d < m->ndevices && !rc; d++) {
    int q = m->device_profile[d];
    if (d)
      plan_buf_putc(c->b, ',');
    cj_int(c, q >= 0 && q < np ? order[rep[q]] : -1);
  }
  plan_buf_putc(c->b, ']');
  cj_key(c, &f, "profiles");
  plan_buf_putc(c->b, '[');
  for (int k = 0; k < used && !rc; k++)
    for (int q = 0; q < np; q++)
      if (rep[q] == q && order[q] == k) {
        if (k)
          plan_buf_putc(c->b, ',');
        plan_buf_append(c->b, enc[q].data, enc[q].len);
      }
  plan_buf_putc(c->b, ']');
  plan_buf_putc(c->b, '}');
  for (int q = 0; q < np; q++)
    plan_buf_free(&enc[q]);
  free(enc);
  free(rep);
  return rc;
}

void plan_cj_topology(cj *c, const plan_mesh *m) {
  const plan_topology *t = m->topology;
  bool f = true;
  plan_buf_putc(c->b, '{');
  if (t->kind == PLAN_TOPO_TORUS) {
    cj_key(c, &f, "torus");
    bool g = true;
    plan_buf_putc(c->b, '{');
    if (t->link.bandwidth != 0) {
      cj_key(c, &g, "bandwidth");
      cj_num(c, t->link.bandwidth);
    }
    cj_key(c, &g, "dims");
    plan_buf_putc(c->b, '[');
    for (int i = 0; i < t->ndims; i++) {
      if (i)
        plan_buf_putc(c->b, ',');
      cj_int(c, t->dims[i]);
    }
    plan_buf_putc(c->b, ']');
    if (t->link.latency != 0) {
      cj_key(c, &g, "latency");
      cj_num(c, t->link.latency);
    }
    cj_key(c, &g, "wrap");
    plan_buf_putc(c->b, '[');
    for (int i = 0; i < t->ndims; i++)
      plan_buf_puts(c->b, i ? (t->wrap[i] ? ",true" : ",false")
                            : (t->wrap[i] ? "true" : "false"));
    plan_buf_puts(c->b, "]}}");
    return;
  }
  cj_key(c, &f, "levels");
  plan_buf_putc(c->b, '[');
  int64_t below = 1;
  for (int l = 0; l < t->nlevels; l++) {
    const plan_topo_level *lv = &t->levels[l];
    int64_t size = lv->size; /* 0 (made in memory): the rest, as written */
    if (size <= 0)
      size = below > 0 && m->ndevices % below == 0 ? m->ndevices / below : 1;
    below *= size;
    bool g = true;
    if (l)
      plan_buf_putc(c->b, ',');
    plan_buf_putc(c->b, '{');
    if (lv->link.bandwidth != 0) {
      cj_key(c, &g, "bandwidth");
      cj_num(c, lv->link.bandwidth);
    }
    if (lv->link.latency != 0) {
      cj_key(c, &g, "latency");
      cj_num(c, lv->link.latency);
    }
    if (lv->name) {
      cj_key(c, &g, "name");
      cj_str(c, lv->name);
    }
    cj_key(c, &g, "size");
    cj_int(c, size);
    plan_buf_putc(c->b, '}');
  }
  plan_buf_puts(c->b, "]}");
}
