/* The canonical encoding of the mesh part: axes in their order, links,
 * hardware and submeshes with their keys in byte order, zero fields left
 * out. */
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

static void cj_hardware(cj *c, const plan_mesh *m) {
  const plan_hardware *h = m->hardware;
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
    cj_hardware(c, m);
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
  plan_buf_putc(c->b, '}');
  return PLAN_OK;
}
