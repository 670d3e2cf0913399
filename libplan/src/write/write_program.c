/* The program and mesh sections of a plan in the canonical layout (emit.h):
 * the program inline (tensors that inference cannot give, one line per
 * op) or by reference with its hash and signatures, and the mesh (with its
 * format 1.1 per-device hardware and topology). */
#include <stdio.h>
#include <string.h>

#include "libplan/cost.h"
#include "ir/ops.h"
#include "read/plan_read.h"
#include "write/emit.h"

static void w_shape(plan_buf *b, const plan_tensor *t) {
  plan_buf_putc(b, '[');
  for (int d = 0; d < t->rank; d++) {
    if (d)
      plan_buf_puts(b, ", ");
    if (t->dim_names && t->dim_names[d]) {
      char buf[96];
      snprintf(buf, sizeof buf, "%s=%lld", t->dim_names[d],
               (long long)t->dims[d]);
      plan_w_str(b, buf);
    } else {
      plan_buf_printf(b, "%lld", (long long)t->dims[d]);
    }
  }
  plan_buf_putc(b, ']');
}

static void w_names(plan_buf *b, const plan_program *p, const int *t, int n,
                    bool bare_single) {
  if (n == 1 && bare_single) {
    plan_w_str(b, p->tensors[t[0]].name);
    return;
  }
  plan_buf_putc(b, '[');
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_puts(b, ", ");
    plan_w_str(b, p->tensors[t[i]].name);
  }
  plan_buf_putc(b, ']');
}

static void w_attrs(plan_buf *b, const plan_op *op) {
  const plan_op_info *info = plan_op_info_get(op->kind);
  bool any = false;
  for (int k = 0; k < info->nattrs; k++) {
    const plan_attr_spec *s = &info->attrs[k];
    const plan_attr_val *a = &op->attrs[k];
    bool def;
    switch (s->type) {
    case PLAN_ATTR_INT: /* a required value is written even when it
                           equals the schema's placeholder */
      def = !s->required && a->i == s->def_i;
      break;
    case PLAN_ATTR_FLOAT:
      def = a->f == s->def_f;
      break;
    case PLAN_ATTR_BOOL:
      def = a->b == s->def_b;
      break;
    case PLAN_ATTR_STRING:
      def = !a->s || (s->def_s && !strcmp(a->s, s->def_s));
      break;
    default: /* a written empty list (reshape to a scalar) is not absent */
      def = !a->present && a->nints <= 0;
    }
    if (def)
      continue;
    plan_buf_puts(b, any ? ", " : ", attrs: {");
    any = true;
    plan_buf_puts(b, s->name);
    plan_buf_puts(b, ": ");
    switch (s->type) {
    case PLAN_ATTR_INT:
      plan_buf_printf(b, "%lld", (long long)a->i);
      break;
    case PLAN_ATTR_FLOAT:
      plan_w_num(b, a->f);
      break;
    case PLAN_ATTR_BOOL:
      plan_buf_puts(b, a->b ? "true" : "false");
      break;
    case PLAN_ATTR_STRING:
      plan_w_str(b, a->s);
      break;
    case PLAN_ATTR_INTS:
      plan_buf_putc(b, '[');
      for (int i = 0; i < a->nints; i++)
        plan_buf_printf(b, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
      plan_buf_putc(b, ']');
      break;
    }
  }
  if (any)
    plan_buf_putc(b, '}');
}

static bool tensor_written(const plan_tensor *t) {
  if (t->producer < 0 || t->ext)
    return true;
  for (int d = 0; d < t->rank; d++)
    if (t->dim_names && t->dim_names[d])
      return true;
  return false;
}

void plan_w_op(plan_buf *b, const plan_program *p, int i) {
  const plan_op *op = &p->ops[i];
  plan_buf_puts(b, "{name: ");
  plan_w_str(b, op->name);
  plan_buf_printf(b, ", op: %s, in: ", plan_op_kind_name(op->kind));
  w_names(b, p, op->in, op->nin, false);
  plan_buf_puts(b, ", out: ");
  w_names(b, p, op->out, op->nout, true);
  w_attrs(b, op);
  plan_w_ext_flow(b, op->ext);
  plan_buf_putc(b, '}');
}

void plan_w_program(plan_buf *b, const plan_program *p) {
  plan_buf_puts(b, "program:\n");
  if (p->name && p->name[0]) {
    plan_buf_puts(b, "  name: ");
    plan_w_str(b, p->name);
    plan_buf_putc(b, '\n');
  }
  bool anyt = false;
  for (int i = 0; i < p->ntensors; i++)
    anyt |= tensor_written(&p->tensors[i]);
  if (anyt)
    plan_buf_puts(b, "  tensors:\n");
  for (int i = 0; i < p->ntensors; i++) {
    const plan_tensor *t = &p->tensors[i];
    if (!tensor_written(t))
      continue;
    plan_w_indent(b, 4);
    plan_w_str(b, t->name);
    plan_buf_puts(b, ": {shape: ");
    w_shape(b, t);
    if (t->dtype != PLAN_F32 || t->producer >= 0)
      plan_buf_printf(b, ", dtype: %s", plan_dtype_name(t->dtype));
    if (t->producer < 0 && t->role != PLAN_ROLE_INPUT)
      plan_buf_printf(b, ", role: %s", plan_role_name(t->role));
    if (t->has_range)
      plan_buf_printf(b, ", range: [%lld, %lld]", (long long)t->range_lo,
                      (long long)t->range_hi);
    if (t->recipe != PLAN_RECIPE_NONE) {
      plan_buf_printf(b, ", init: {recipe: %s", plan_recipe_name(t->recipe));
      if (t->recipe_theta != 10000.0) {
        plan_buf_puts(b, ", theta: ");
        plan_w_num(b, t->recipe_theta);
      }
      if (t->recipe_fill != -1e9) {
        plan_buf_puts(b, ", fill: ");
        plan_w_num(b, t->recipe_fill);
      }
      plan_buf_putc(b, '}');
    }
    plan_w_ext_flow(b, t->ext);
    plan_buf_puts(b, "}\n");
  }
  /* an empty block would read back as null */
  plan_buf_puts(b, p->nops ? "  ops:\n" : "  ops: []\n");
  for (int i = 0; i < p->nops; i++) {
    plan_buf_puts(b, "    - ");
    plan_w_op(b, p, i);
    plan_buf_putc(b, '\n');
  }
  if (p->outputs_explicit || p->noutputs) {
    plan_buf_puts(b, "  outputs: ");
    w_names(b, p, p->outputs, p->noutputs, false);
    plan_buf_putc(b, '\n');
  }
  if (p->loss >= 0) {
    plan_buf_puts(b, "  loss: ");
    plan_w_str(b, p->tensors[p->loss].name);
    plan_buf_putc(b, '\n');
  }
  plan_w_ext(b, p->ext, 2);
}

void plan_w_program_ref(plan_buf *b, const plan_plan *p) {
  const plan_program_ref *r = &p->ref;
  const plan_program *prog = plan_program_sigs(p->program);
  char hbuf[PLAN_HASH_STRLEN];
  plan_hash h = r->hash;
  if (!r->has_hash)
    plan_program_hash(&h, prog);
  plan_buf_puts(b, "program:\n  path: ");
  plan_w_str(b, r->path);
  plan_buf_printf(b, "\n  hash: \"%s\"\n  signatures:\n",
                  plan_hash_format(h, hbuf));
  /* the signatures of the program the plan was made for: as recorded, or
   * the current program's when none were */
  if (r->nops || r->ntensors) {
    plan_buf_puts(b, r->nops ? "    ops:\n" : "    ops: {}\n");
    for (int i = 0; i < r->nops; i++) {
      plan_w_indent(b, 6);
      plan_w_str(b, r->op_names[i]);
      plan_buf_printf(b, ": \"%016llx\"\n", (unsigned long long)r->op_sigs[i]);
    }
    plan_buf_puts(b, r->ntensors ? "    tensors:\n" : "    tensors: {}\n");
    for (int i = 0; i < r->ntensors; i++) {
      plan_w_indent(b, 6);
      plan_w_str(b, r->tensor_names[i]);
      plan_buf_printf(b, ": \"%016llx\"\n",
                      (unsigned long long)r->tensor_sigs[i]);
    }
    return;
  }
  plan_buf_puts(b, prog->nops ? "    ops:\n" : "    ops: {}\n");
  for (int i = 0; i < prog->nops; i++) {
    plan_w_indent(b, 6);
    plan_w_str(b, prog->ops[i].name);
    plan_buf_printf(b, ": \"%016llx\"\n",
                    (unsigned long long)plan_program_op_signature(prog, i));
  }
  plan_buf_puts(b, prog->ntensors ? "    tensors:\n" : "    tensors: {}\n");
  for (int i = 0; i < prog->ntensors; i++) {
    plan_w_indent(b, 6);
    plan_w_str(b, prog->tensors[i].name);
    plan_buf_printf(b, ": \"%016llx\"\n",
                    (unsigned long long)plan_program_tensor_signature(prog, i));
  }
}

/* ---- mesh
 * ------------------------------------------------------------------------- */

static void w_link(plan_buf *b, const char *key, const plan_link *l, int ind) {
  if (l->bandwidth == 0 && l->latency == 0)
    return;
  plan_w_indent(b, ind);
  plan_buf_printf(b, "%s: {bandwidth: ", key);
  plan_w_num(b, l->bandwidth);
  plan_buf_puts(b, ", latency: ");
  plan_w_num(b, l->latency);
  plan_buf_puts(b, "}\n");
}

/* ", key: {bandwidth: B, latency: L}" inside a flow mapping, or nothing. */
static void w_link_flow(plan_buf *b, const char *key, const plan_link *l,
                        bool *first) {
  if (l->bandwidth == 0 && l->latency == 0)
    return;
  plan_buf_printf(b, "%s%s: {bandwidth: ", *first ? "" : ", ", key);
  plan_w_num(b, l->bandwidth);
  plan_buf_puts(b, ", latency: ");
  plan_w_num(b, l->latency);
  plan_buf_putc(b, '}');
  *first = false;
}

/* " key: v" of the figures a link's owner carries inline (levels, torus). */
static void w_link_figs(plan_buf *b, const plan_link *l) {
  if (l->bandwidth != 0) {
    plan_buf_puts(b, ", bandwidth: ");
    plan_w_num(b, l->bandwidth);
  }
  if (l->latency != 0) {
    plan_buf_puts(b, ", latency: ");
    plan_w_num(b, l->latency);
  }
}

static bool hw_only_name(const plan_hardware *h, int naxes) {
  if (!h->name || h->memory != 0 || h->memory_bandwidth != 0 ||
      h->intra_host.bandwidth != 0 || h->intra_host.latency != 0 ||
      h->inter_host.bandwidth != 0 || h->inter_host.latency != 0)
    return false;
  for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
    if (h->flops[d] != 0)
      return false;
  for (int a = 0; a < naxes; a++)
    if (h->axis_link[a].bandwidth != 0 || h->axis_link[a].latency != 0)
      return false;
  return true;
}

/* A profile's label: its own, or "p1", "p2", ... for profiles made in
 * memory without one. */
static void w_label(plan_buf *b, const plan_hardware *h, int q) {
  if (h->label)
    plan_w_str(b, h->label);
  else
    plan_buf_printf(b, "p%d", q + 1);
}

/* hardware: {profiles: {LABEL: PROFILE}, devices: [LABEL, ...]}: a
 * profile with a built-in name and nothing else is that name, others a
 * flow mapping of the single form's fields. */
static void w_profiles(plan_buf *b, const plan_mesh *m) {
  plan_buf_puts(b, "  hardware:\n    profiles:\n");
  for (int q = 0; q < m->nprofiles; q++) {
    const plan_hardware *h = &m->profiles[q];
    plan_w_indent(b, 6);
    w_label(b, h, q);
    plan_buf_puts(b, ": ");
    if (hw_only_name(h, m->naxes) && plan_cost_profile_resolve(h->name)) {
      plan_w_str(b, h->name);
      plan_buf_putc(b, '\n');
      continue;
    }
    bool first = true;
    plan_buf_putc(b, '{');
    if (h->name) {
      plan_buf_puts(b, "name: ");
      plan_w_str(b, h->name);
      first = false;
    }
    bool anyf = false;
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
      if (h->flops[d] != 0) {
        plan_buf_puts(b, anyf ? ", " : first ? "flops: {" : ", flops: {");
        anyf = true;
        first = false;
        plan_buf_printf(b, "%s: ", plan_dtype_name((plan_dtype)d));
        plan_w_num(b, h->flops[d]);
      }
    if (anyf)
      plan_buf_putc(b, '}');
    if (h->memory != 0) {
      plan_buf_puts(b, first ? "memory: " : ", memory: ");
      plan_w_num(b, h->memory);
      first = false;
    }
    if (h->memory_bandwidth != 0) {
      plan_buf_puts(b, first ? "memory_bandwidth: " : ", memory_bandwidth: ");
      plan_w_num(b, h->memory_bandwidth);
      first = false;
    }
    w_link_flow(b, "intra_host", &h->intra_host, &first);
    w_link_flow(b, "inter_host", &h->inter_host, &first);
    bool anyl = false;
    for (int a = 0; a < m->naxes; a++)
      if (h->axis_link[a].bandwidth != 0 || h->axis_link[a].latency != 0) {
        if (!anyl)
          plan_buf_puts(b, first ? "links: {" : ", links: {");
        first = false;
        bool f2 = !anyl;
        anyl = true;
        w_link_flow(b, m->axis_names[a], &h->axis_link[a], &f2);
      }
    if (anyl)
      plan_buf_putc(b, '}');
    plan_buf_puts(b, "}\n");
  }
  plan_buf_puts(b, "    devices: [");
  for (int64_t d = 0; d < m->ndevices; d++) {
    int q = m->device_profile[d];
    if (d)
      plan_buf_puts(b, ", ");
    if (q >= 0 && q < m->nprofiles)
      w_label(b, &m->profiles[q], q);
  }
  plan_buf_puts(b, "]\n");
}

/* Levels: the last one's size 0 (made in memory: "everything") is written
 * as the groups it joins. */
static void w_topology(plan_buf *b, const plan_topology *t, int64_t ndev) {
  plan_buf_puts(b, "  topology:\n");
  if (t->kind == PLAN_TOPO_TORUS) {
    plan_buf_puts(b, "    torus: {dims: [");
    for (int i = 0; i < t->ndims; i++)
      plan_buf_printf(b, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    plan_buf_puts(b, "], wrap: [");
    for (int i = 0; i < t->ndims; i++)
      plan_buf_printf(b, "%s%s", i ? ", " : "", t->wrap[i] ? "true" : "false");
    plan_buf_putc(b, ']');
    w_link_figs(b, &t->link);
    plan_buf_puts(b, "}\n");
    return;
  }
  plan_buf_puts(b, "    levels:\n");
  for (int l = 0; l < t->nlevels; l++) {
    const plan_topo_level *lv = &t->levels[l];
    plan_buf_puts(b, "      - {");
    if (lv->name) {
      plan_buf_puts(b, "name: ");
      plan_w_str(b, lv->name);
      plan_buf_puts(b, ", ");
    }
    int64_t size = lv->size, below = 1;
    for (int k = 0; k < l; k++)
      below *= t->levels[k].size > 0 ? t->levels[k].size : 1;
    if (size <= 0)
      size = below > 0 && ndev % below == 0 ? ndev / below : 1;
    plan_buf_printf(b, "size: %lld", (long long)size);
    w_link_figs(b, &lv->link);
    plan_buf_puts(b, "}\n");
  }
}

void plan_w_mesh(plan_buf *b, const plan_mesh *m) {
  plan_buf_puts(b, "mesh:\n  axes: [");
  for (int a = 0; a < m->naxes; a++)
    plan_buf_printf(b, "%s%s=%lld", a ? ", " : "", m->axis_names[a],
                    (long long)m->axis_sizes[a]);
  plan_buf_puts(b, "]\n");
  if (m->devices) {
    plan_buf_puts(b, "  devices: [");
    for (int64_t k = 0; k < m->ndevices; k++)
      plan_buf_printf(b, "%s%lld", k ? ", " : "", (long long)m->devices[k]);
    plan_buf_puts(b, "]\n");
  }
  if (m->devices_per_host)
    plan_buf_printf(b, "  devices_per_host: %lld\n",
                    (long long)m->devices_per_host);
  if (m->nsubmeshes) {
    plan_buf_puts(b, "  submeshes:\n");
    for (int i = 0; i < m->nsubmeshes; i++) {
      const plan_submesh *s = &m->submeshes[i];
      plan_w_indent(b, 4);
      plan_w_str(b, s->name);
      plan_buf_puts(b, ": {");
      bool first = true;
      for (int a = 0; a < m->naxes; a++)
        if (s->index[a] >= 0) {
          plan_buf_printf(b, "%s%s: %lld", first ? "" : ", ", m->axis_names[a],
                          (long long)s->index[a]);
          first = false;
        }
      plan_buf_puts(b, "}\n");
    }
  }
  if (m->hardware) {
    const plan_hardware *h = m->hardware;
    plan_buf_puts(b, "  hardware:\n");
    if (h->name) {
      plan_buf_puts(b, "    name: ");
      plan_w_str(b, h->name);
      plan_buf_putc(b, '\n');
    }
    bool anyf = false;
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
      if (h->flops[d] != 0) {
        plan_buf_puts(b, anyf ? ", " : "    flops: {");
        anyf = true;
        plan_buf_printf(b, "%s: ", plan_dtype_name((plan_dtype)d));
        plan_w_num(b, h->flops[d]);
      }
    if (anyf)
      plan_buf_puts(b, "}\n");
    if (h->memory != 0) {
      plan_buf_puts(b, "    memory: ");
      plan_w_num(b, h->memory);
      plan_buf_putc(b, '\n');
    }
    if (h->memory_bandwidth != 0) {
      plan_buf_puts(b, "    memory_bandwidth: ");
      plan_w_num(b, h->memory_bandwidth);
      plan_buf_putc(b, '\n');
    }
    w_link(b, "intra_host", &h->intra_host, 4);
    w_link(b, "inter_host", &h->inter_host, 4);
    bool anyl = false;
    for (int a = 0; a < m->naxes; a++)
      if (h->axis_link[a].bandwidth != 0 || h->axis_link[a].latency != 0) {
        if (!anyl)
          plan_buf_puts(b, "    links:\n");
        anyl = true;
        w_link(b, m->axis_names[a], &h->axis_link[a], 6);
      }
  }
  if (m->device_profile && m->nprofiles > 0)
    w_profiles(b, m);
  if (m->topology)
    w_topology(b, m->topology, m->ndevices);
  plan_w_ext(b, m->ext, 2);
}

void plan_write_program_and_mesh(plan_buf *b, const plan_plan *p,
                                 bool self_contained) {
  if (p->program_inline || self_contained)
    plan_w_program(b, p->program);
  else
    plan_w_program_ref(b, p);
  if (p->has_mesh)
    plan_w_mesh(b, &p->mesh);
}
