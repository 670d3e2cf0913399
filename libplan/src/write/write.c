#define _XOPEN_SOURCE 700 /* realpath */
/* Writing plans as YAML in the canonical layout (`plan fmt`): fixed section
 * and key order, one line per op and strategy, placements in their compact
 * spelling, patterns expanded, defaults left out. Reading the output back
 * gives the same IR (load, save, load is the identity) and the same hashes.
 * Also the atomic file write every saver uses. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "ir/ops.h"
#include "read/plan_read.h"

/* ---- scalars --------------------------------------------------------------
 */

static bool looks_typed(const char *s) {
  int64_t i;
  double d;
  size_t n = strlen(s);
  static const char *const words[] = {
      "",      "~",     "null",  "Null", "NULL", "true", "True", "TRUE",
      "false", "False", "FALSE", "yes",  "no",   "on",   "off",  "Yes",
      "No",    "On",    "Off",   "y",    "n",    "Y",    "N",    NULL};
  for (const char *const *w = words; *w; w++)
    if (!strcmp(s, *w))
      return true;
  return plan_parse_int64(s, n, &i) || plan_parse_double(s, n, &d) ||
         strspn(s, "0123456789+-.eExXoObB_:") == n;
}

static bool plain_safe(const char *s) {
  if (!*s || looks_typed(s))
    return false;
  unsigned char c0 = (unsigned char)s[0];
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') ||
        (c0 >= '0' && c0 <= '9') || c0 == '_' || c0 == '/' || c0 == '.' ||
        c0 == '('))
    return false;
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("_.-/()=+", c);
    if (!ok)
      return false;
  }
  return true;
}

static void w_str(plan_buf *b, const char *s) {
  if (plain_safe(s)) {
    plan_buf_puts(b, s);
    return;
  }
  plan_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"':
      plan_buf_puts(b, "\\\"");
      break;
    case '\\':
      plan_buf_puts(b, "\\\\");
      break;
    case '\n':
      plan_buf_puts(b, "\\n");
      break;
    case '\t':
      plan_buf_puts(b, "\\t");
      break;
    case '\r':
      plan_buf_puts(b, "\\r");
      break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        plan_buf_printf(b, "\\x%02x", *p);
      else
        plan_buf_putc(b, (char)*p);
    }
  }
  plan_buf_putc(b, '"');
}

static void w_num(plan_buf *b, double v) {
  char buf[40];
  if (v != v)
    plan_buf_puts(b, ".nan");
  else if (v > 1.7976931348623157e308)
    plan_buf_puts(b, ".inf");
  else if (v < -1.7976931348623157e308)
    plan_buf_puts(b, "-.inf");
  else if (v == 0 && signbit(v))
    plan_buf_puts(b, "-0.0"); /* "-0" would read back as the integer 0 */
  else
    plan_buf_puts(b, plan_format_double(v, buf));
}

static void w_pl(plan_buf *b, const plan_placement *p) {
  char buf[PLAN_PLACEMENT_STRLEN];
  w_str(b, plan_placement_format(p, buf));
}

static void indent(plan_buf *b, int n) {
  for (int i = 0; i < n; i++)
    plan_buf_putc(b, ' ');
}

/* A literal block scalar keeps Lua bodies readable; only text that the block
 * form reproduces exactly qualifies. */
static bool block_safe(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || s[0] == ' ' || s[0] == '\n')
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c < 0x20 && c != '\n') || c == 0x7f)
      return false;
    if (c == '\n' && i > 0 && s[i - 1] == ' ')
      return false;
  }
  return s[n - 1] != ' ';
}

static void w_text(plan_buf *b, const char *s, int ind) {
  if (!block_safe(s)) {
    w_str(b, s);
    plan_buf_putc(b, '\n');
    return;
  }
  size_t n = strlen(s);
  int trailing = 0;
  while (trailing < (int)n && s[n - 1 - (size_t)trailing] == '\n')
    trailing++;
  plan_buf_puts(b, trailing == 0 ? "|-\n" : trailing == 1 ? "|\n" : "|+\n");
  const char *p = s;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      indent(b, ind);
      plan_buf_append(b, p, len);
    }
    plan_buf_putc(b, '\n');
    if (!e)
      break;
    p = e + 1;
  }
}

/* Generic values in block style (provenance, x- keys). */
static void w_value(plan_buf *b, const plan_value *v, int ind);

/* A value after "key:" or "-": scalars follow on the same line after
 * `lead` (a space), collections start on the next lines. No trailing
 * spaces. */
static void w_value_inline(plan_buf *b, const plan_value *v, int ind,
                           const char *lead) {
  bool nested = (v->kind == PLAN_V_SEQ || v->kind == PLAN_V_MAP) && v->n > 0;
  if (!nested)
    plan_buf_puts(b, lead);
  switch (v->kind) {
  case PLAN_V_NULL:
    plan_buf_puts(b, "null\n");
    return;
  case PLAN_V_BOOL:
    plan_buf_puts(b, v->b ? "true\n" : "false\n");
    return;
  case PLAN_V_INT:
    plan_buf_printf(b, "%lld\n", (long long)v->i);
    return;
  case PLAN_V_FLOAT:
    w_num(b, v->f);
    plan_buf_putc(b, '\n');
    return;
  case PLAN_V_STRING:
    if (v->block || strchr(v->s, '\n'))
      w_text(b, v->s, ind);
    else {
      w_str(b, v->s);
      plan_buf_putc(b, '\n');
    }
    return;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    if (!nested) {
      plan_buf_puts(b, v->kind == PLAN_V_SEQ ? "[]\n" : "{}\n");
      return;
    }
    plan_buf_putc(b, '\n');
    w_value(b, v, ind);
    return;
  }
}

static void w_value(plan_buf *b, const plan_value *v, int ind) {
  for (int i = 0; i < v->n; i++) {
    indent(b, ind);
    if (v->kind == PLAN_V_SEQ) {
      plan_buf_putc(b, '-');
      w_value_inline(b, v->items[i], ind + 2, " ");
    } else {
      w_str(b, v->keys[i]);
      plan_buf_putc(b, ':');
      w_value_inline(b, v->items[i], ind + 2, " ");
    }
  }
}

/* Flow style, for x- keys inside the one-line ops and tensors. */
static void w_value_flow(plan_buf *b, const plan_value *v) {
  switch (v->kind) {
  case PLAN_V_NULL:
    plan_buf_puts(b, "null");
    return;
  case PLAN_V_BOOL:
    plan_buf_puts(b, v->b ? "true" : "false");
    return;
  case PLAN_V_INT:
    plan_buf_printf(b, "%lld", (long long)v->i);
    return;
  case PLAN_V_FLOAT:
    w_num(b, v->f);
    return;
  case PLAN_V_STRING:
    w_str(b, v->s); /* quoted whenever not a safe plain scalar */
    return;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    plan_buf_putc(b, v->kind == PLAN_V_SEQ ? '[' : '{');
    for (int i = 0; i < v->n; i++) {
      if (i)
        plan_buf_puts(b, ", ");
      if (v->kind == PLAN_V_MAP) {
        w_str(b, v->keys[i]);
        plan_buf_puts(b, ": ");
      }
      w_value_flow(b, v->items[i]);
    }
    plan_buf_putc(b, v->kind == PLAN_V_SEQ ? ']' : '}');
    return;
  }
}

static void w_ext_flow(plan_buf *b, const plan_ext *e) {
  for (int i = 0; e && i < e->n; i++) {
    plan_buf_puts(b, ", ");
    w_str(b, e->keys[i]);
    plan_buf_puts(b, ": ");
    w_value_flow(b, e->vals[i]);
  }
}

static void w_ext(plan_buf *b, const plan_ext *e, int ind) {
  if (!e)
    return;
  for (int i = 0; i < e->n; i++) {
    indent(b, ind);
    w_str(b, e->keys[i]);
    plan_buf_putc(b, ':');
    w_value_inline(b, e->vals[i], ind + 2, " ");
  }
}

/* ---- program
 * -------------------------------------------------------------------- */

static void w_shape(plan_buf *b, const plan_tensor *t) {
  plan_buf_putc(b, '[');
  for (int d = 0; d < t->rank; d++) {
    if (d)
      plan_buf_puts(b, ", ");
    if (t->dim_names && t->dim_names[d]) {
      char buf[96];
      snprintf(buf, sizeof buf, "%s=%lld", t->dim_names[d],
               (long long)t->dims[d]);
      w_str(b, buf);
    } else {
      plan_buf_printf(b, "%lld", (long long)t->dims[d]);
    }
  }
  plan_buf_putc(b, ']');
}

static void w_names(plan_buf *b, const plan_program *p, const int *t, int n,
                    bool bare_single) {
  if (n == 1 && bare_single) {
    w_str(b, p->tensors[t[0]].name);
    return;
  }
  plan_buf_putc(b, '[');
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_puts(b, ", ");
    w_str(b, p->tensors[t[i]].name);
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
      w_num(b, a->f);
      break;
    case PLAN_ATTR_BOOL:
      plan_buf_puts(b, a->b ? "true" : "false");
      break;
    case PLAN_ATTR_STRING:
      w_str(b, a->s);
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

static void w_program(plan_buf *b, const plan_program *p) {
  plan_buf_puts(b, "program:\n");
  if (p->name && p->name[0]) {
    plan_buf_puts(b, "  name: ");
    w_str(b, p->name);
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
    indent(b, 4);
    w_str(b, t->name);
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
        w_num(b, t->recipe_theta);
      }
      if (t->recipe_fill != -1e9) {
        plan_buf_puts(b, ", fill: ");
        w_num(b, t->recipe_fill);
      }
      plan_buf_putc(b, '}');
    }
    w_ext_flow(b, t->ext);
    plan_buf_puts(b, "}\n");
  }
  /* an empty block would read back as null */
  plan_buf_puts(b, p->nops ? "  ops:\n" : "  ops: []\n");
  for (int i = 0; i < p->nops; i++) {
    const plan_op *op = &p->ops[i];
    plan_buf_puts(b, "    - {name: ");
    w_str(b, op->name);
    plan_buf_printf(b, ", op: %s, in: ", plan_op_kind_name(op->kind));
    w_names(b, p, op->in, op->nin, false);
    plan_buf_puts(b, ", out: ");
    w_names(b, p, op->out, op->nout, true);
    w_attrs(b, op);
    w_ext_flow(b, op->ext);
    plan_buf_puts(b, "}\n");
  }
  if (p->outputs_explicit || p->noutputs) {
    plan_buf_puts(b, "  outputs: ");
    w_names(b, p, p->outputs, p->noutputs, false);
    plan_buf_putc(b, '\n');
  }
  if (p->loss >= 0) {
    plan_buf_puts(b, "  loss: ");
    w_str(b, p->tensors[p->loss].name);
    plan_buf_putc(b, '\n');
  }
  w_ext(b, p->ext, 2);
}

static void w_program_ref(plan_buf *b, const plan_plan *p) {
  const plan_program_ref *r = &p->ref;
  const plan_program *prog = plan_program_sigs(p->program);
  char hbuf[PLAN_HASH_STRLEN];
  plan_hash h = r->hash;
  if (!r->has_hash)
    plan_program_hash(&h, prog);
  plan_buf_puts(b, "program:\n  path: ");
  w_str(b, r->path);
  plan_buf_printf(b, "\n  hash: \"%s\"\n  signatures:\n",
                  plan_hash_format(h, hbuf));
  /* the signatures of the program the plan was made for: as recorded, or
   * the current program's when none were */
  if (r->nops || r->ntensors) {
    plan_buf_puts(b, r->nops ? "    ops:\n" : "    ops: {}\n");
    for (int i = 0; i < r->nops; i++) {
      indent(b, 6);
      w_str(b, r->op_names[i]);
      plan_buf_printf(b, ": \"%016llx\"\n", (unsigned long long)r->op_sigs[i]);
    }
    plan_buf_puts(b, r->ntensors ? "    tensors:\n" : "    tensors: {}\n");
    for (int i = 0; i < r->ntensors; i++) {
      indent(b, 6);
      w_str(b, r->tensor_names[i]);
      plan_buf_printf(b, ": \"%016llx\"\n",
                      (unsigned long long)r->tensor_sigs[i]);
    }
    return;
  }
  plan_buf_puts(b, prog->nops ? "    ops:\n" : "    ops: {}\n");
  for (int i = 0; i < prog->nops; i++) {
    indent(b, 6);
    w_str(b, prog->ops[i].name);
    plan_buf_printf(b, ": \"%016llx\"\n", (unsigned long long)plan_program_op_signature(prog, i));
  }
  plan_buf_puts(b, prog->ntensors ? "    tensors:\n" : "    tensors: {}\n");
  for (int i = 0; i < prog->ntensors; i++) {
    indent(b, 6);
    w_str(b, prog->tensors[i].name);
    plan_buf_printf(b, ": \"%016llx\"\n",
                    (unsigned long long)plan_program_tensor_signature(prog, i));
  }
}

/* ---- mesh
 * ------------------------------------------------------------------------- */

static void w_link(plan_buf *b, const char *key, const plan_link *l, int ind) {
  if (l->bandwidth == 0 && l->latency == 0)
    return;
  indent(b, ind);
  plan_buf_printf(b, "%s: {bandwidth: ", key);
  w_num(b, l->bandwidth);
  plan_buf_puts(b, ", latency: ");
  w_num(b, l->latency);
  plan_buf_puts(b, "}\n");
}

static void w_mesh(plan_buf *b, const plan_mesh *m) {
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
      indent(b, 4);
      w_str(b, s->name);
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
      w_str(b, h->name);
      plan_buf_putc(b, '\n');
    }
    bool anyf = false;
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
      if (h->flops[d] != 0) {
        plan_buf_puts(b, anyf ? ", " : "    flops: {");
        anyf = true;
        plan_buf_printf(b, "%s: ", plan_dtype_name((plan_dtype)d));
        w_num(b, h->flops[d]);
      }
    if (anyf)
      plan_buf_puts(b, "}\n");
    if (h->memory != 0) {
      plan_buf_puts(b, "    memory: ");
      w_num(b, h->memory);
      plan_buf_putc(b, '\n');
    }
    if (h->memory_bandwidth != 0) {
      plan_buf_puts(b, "    memory_bandwidth: ");
      w_num(b, h->memory_bandwidth);
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
  w_ext(b, m->ext, 2);
}

/* ---- plan sections
 * ------------------------------------------------------------------- */

static void w_op_list(plan_buf *b, const plan_program *prog,
                      const bool *flags) {
  plan_buf_putc(b, '[');
  bool first = true;
  for (int i = 0; i < prog->nops; i++)
    if (flags[i]) {
      if (!first)
        plan_buf_puts(b, ", ");
      first = false;
      w_str(b, prog->ops[i].name);
    }
  plan_buf_putc(b, ']');
}

static int w_pipeline(plan_buf *b, const plan_plan *p) {
  const plan_pipeline *pp = &p->pipeline;
  const plan_program *prog = p->program;
  static const char *const sched[PLAN_SCHED_COUNT] = {
      "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "explicit"};
  plan_buf_puts(b, "pipeline:\n");
  if (pp->axis >= 0)
    plan_buf_printf(b, "  axis: %s\n", p->mesh.axis_names[pp->axis]);
  plan_buf_printf(b, "  microbatches: %lld\n", (long long)pp->microbatches);
  plan_buf_printf(b, "  schedule: %s\n", sched[pp->schedule]);
  plan_buf_puts(b, "  stages:\n");
  bool *member = calloc((size_t)prog->nops + 1, 1);
  if (!member)
    return plan_oom();
  for (int s = 0; s < pp->nstages; s++) {
    for (int i = 0; i < prog->nops; i++)
      member[i] = pp->op_stage[i] == s;
    plan_buf_puts(b, "    - {ops: ");
    w_op_list(b, prog, member);
    if (pp->stages[s].submesh >= 0) {
      plan_buf_puts(b, ", submesh: ");
      w_str(b, p->mesh.submeshes[pp->stages[s].submesh].name);
    }
    plan_buf_puts(b, "}\n");
  }
  free(member);
  if (pp->schedule == PLAN_SCHED_EXPLICIT) {
    plan_buf_puts(b, "  grid:\n");
    for (int r = 0; r < pp->grid_ranks; r++) {
      plan_buf_puts(b, "    - \"");
      for (int i = 0; i < pp->grid_len[r]; i++) {
        const plan_action *a = &pp->grid[r][i];
        plan_buf_printf(b, "%s%d%s%d", i ? " " : "", a->stage,
                        plan_action_word(a->kind), a->microbatch);
      }
      plan_buf_puts(b, "\"\n");
    }
  }
  w_ext(b, pp->ext, 2);
  return PLAN_OK;
}

static void w_training(plan_buf *b, const plan_plan *p) {
  const plan_training *tr = &p->training;
  const plan_program *prog = p->program;
  static const char *const sync_names[PLAN_SYNC_COUNT] = {
      "auto", "all_reduce", "reduce_scatter", "none"};
  size_t start = b->len;
  plan_buf_puts(b, "training:\n");
  if (tr->optimizer != PLAN_OPT_NONE) {
    bool adam = tr->optimizer == PLAN_OPT_ADAM;
    plan_buf_printf(b, "  optimizer: {kind: %s, lr: ", adam ? "adam" : "sgd");
    w_num(b, tr->lr);
    if (adam) {
      plan_buf_puts(b, ", beta1: ");
      w_num(b, tr->beta1);
      plan_buf_puts(b, ", beta2: ");
      w_num(b, tr->beta2);
      plan_buf_puts(b, ", eps: ");
      w_num(b, tr->eps);
    } else if (tr->momentum != 0) {
      plan_buf_puts(b, ", momentum: ");
      w_num(b, tr->momentum);
    }
    if (tr->weight_decay != 0) {
      plan_buf_puts(b, ", weight_decay: ");
      w_num(b, tr->weight_decay);
    }
    plan_buf_puts(b, "}\n");
  }
  if (tr->steps != 1)
    plan_buf_printf(b, "  steps: %lld\n", (long long)tr->steps);
  int dts[4] = {tr->param_dtype, tr->compute_dtype, tr->grad_dtype,
                tr->accum_dtype};
  static const char *const dkeys[4] = {"param", "compute", "grad", "accum"};
  bool anyd = false;
  for (int i = 0; i < 4; i++)
    if (dts[i] >= 0) {
      plan_buf_puts(b, anyd ? ", " : "  dtypes: {");
      anyd = true;
      plan_buf_printf(b, "%s: %s", dkeys[i],
                      plan_dtype_name((plan_dtype)dts[i]));
    }
  if (anyd)
    plan_buf_puts(b, "}\n");
  if (tr->clip_grad_norm != 0) {
    plan_buf_puts(b, "  clip_grad_norm: ");
    w_num(b, tr->clip_grad_norm);
    plan_buf_putc(b, '\n');
  }
  if (tr->loss_scale != 1) {
    plan_buf_puts(b, "  loss_scale: ");
    w_num(b, tr->loss_scale);
    plan_buf_putc(b, '\n');
  }
  bool any = false;
  for (int t = 0; t < prog->ntensors; t++)
    if (tr->params[t].sync != PLAN_SYNC_AUTO) {
      if (!any)
        plan_buf_puts(b, "  grad_sync:\n");
      any = true;
      indent(b, 4);
      w_str(b, prog->tensors[t].name);
      plan_buf_printf(b, ": %s\n", sync_names[tr->params[t].sync]);
    }
  any = false;
  for (int t = 0; t < prog->ntensors; t++)
    if (tr->params[t].has_state_pl) {
      if (!any)
        plan_buf_puts(b, "  optimizer_state:\n");
      any = true;
      indent(b, 4);
      w_str(b, prog->tensors[t].name);
      plan_buf_puts(b, ": ");
      w_pl(b, &tr->params[t].state_pl);
      plan_buf_putc(b, '\n');
    }
  any = false;
  for (int i = 0; i < prog->nops; i++)
    any |= tr->recompute[i];
  if (any) {
    plan_buf_puts(b, "  recompute: ");
    w_op_list(b, prog, tr->recompute);
    plan_buf_putc(b, '\n');
  }
  w_ext(b, tr->ext, 2);
  if (!b->failed && b->len == start + strlen("training:\n")) {
    /* all defaults: an empty block would read back as null, not as the
     * training mode the section's presence selects */
    b->len = start;
    plan_buf_puts(b, "training: {}\n");
  }
}

static void w_boundaries(plan_buf *b, const char *key, const plan_program *prog,
                         const plan_boundary *bd, int n) {
  if (!n)
    return;
  plan_buf_printf(b, "    %s: {", key);
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_puts(b, ", ");
    w_str(b, prog->tensors[bd[i].tensor].name);
    plan_buf_puts(b, ": ");
    w_pl(b, &bd[i].pl);
  }
  plan_buf_puts(b, "}\n");
}

static void w_regions(plan_buf *b, const plan_plan *p) {
  static const char *const kinds[PLAN_REGION_COUNT] = {"pinned", "manual"};
  plan_buf_puts(b, "regions:\n");
  for (int i = 0; i < p->nregions; i++) {
    const plan_region *r = &p->regions[i];
    plan_buf_puts(b, "  - name: ");
    w_str(b, r->name);
    plan_buf_printf(b, "\n    kind: %s\n    ops: ", kinds[r->kind]);
    w_op_list(b, p->program, r->ops);
    plan_buf_putc(b, '\n');
    w_boundaries(b, "inputs", p->program, r->inputs, r->ninputs);
    w_boundaries(b, "outputs", p->program, r->outputs, r->noutputs);
    if (r->body) {
      plan_buf_puts(b, "    body: ");
      w_text(b, r->body, 6);
    }
    w_ext(b, r->ext, 4);
  }
}

void plan_write_program_and_mesh(plan_buf *b, const plan_plan *p,
                            bool self_contained) {
  if (p->program_inline || self_contained)
    w_program(b, p->program);
  else
    w_program_ref(b, p);
  if (p->has_mesh)
    w_mesh(b, &p->mesh);
}

static int w_plan(plan_buf *b, const plan_plan *p,
                  const plan_write_options *o) {
  const plan_program *prog = p->program;
  plan_buf_printf(b, "libplan: \"%d.%d\"\n", p->version_major,
                  p->version_minor);
  if (p->program_inline || (o && o->self_contained))
    w_program(b, prog);
  else
    w_program_ref(b, p);
  if (!p->has_mesh)
    goto tail;
  w_mesh(b, &p->mesh);
  bool any = false;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor_pl *tp = &p->placements[t];
    if (!tp->set || plan_placement_is_replicated(&tp->pl))
      continue;
    if (!any)
      plan_buf_puts(b, "placements:\n");
    any = true;
    indent(b, 2);
    w_str(b, prog->tensors[t].name);
    plan_buf_puts(b, ": ");
    w_pl(b, &tp->pl);
    plan_buf_putc(b, '\n');
  }
  any = false;
  for (int i = 0; i < prog->nops; i++) {
    const plan_strategy *s = &p->strategies[i];
    const plan_op *op = &prog->ops[i];
    if (!s->set)
      continue;
    if (!any)
      plan_buf_puts(b, "strategies:\n");
    any = true;
    indent(b, 2);
    w_str(b, op->name);
    plan_buf_puts(b, ": {in: [");
    for (int j = 0; j < op->nin; j++) {
      if (j)
        plan_buf_puts(b, ", ");
      w_pl(b, &s->in[j]);
    }
    plan_buf_puts(b, "], out: ");
    if (op->nout == 1) {
      w_pl(b, &s->out[0]);
    } else {
      plan_buf_putc(b, '[');
      for (int j = 0; j < op->nout; j++) {
        if (j)
          plan_buf_puts(b, ", ");
        w_pl(b, &s->out[j]);
      }
      plan_buf_putc(b, ']');
    }
    plan_buf_puts(b, "}\n");
  }
  any = false;
  for (int i = 0; i < prog->noutputs; i++) {
    const plan_tensor_pl *tp = &p->out_pl[i];
    if (!tp->set || plan_placement_is_replicated(&tp->pl))
      continue;
    if (!any)
      plan_buf_puts(b, "outputs:\n");
    any = true;
    indent(b, 2);
    w_str(b, prog->tensors[prog->outputs[i]].name);
    plan_buf_puts(b, ": ");
    w_pl(b, &tp->pl);
    plan_buf_putc(b, '\n');
  }
  if (p->pipeline.present) {
    int rc = w_pipeline(b, p);
    if (rc)
      return rc;
  }
  if (p->training.present)
    w_training(b, p);
  if (p->nregions)
    w_regions(b, p);
tail:
  if (p->provenance) {
    plan_buf_puts(b, "provenance:");
    w_value_inline(b, p->provenance, 2, " ");
  }
  w_ext(b, p->ext, 0);
  return PLAN_OK;
}

int plan_program_write_buffer(char **out, size_t *len,
                              const plan_program *p) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_program_write_buffer: NULL argument");
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  plan_buf_printf(&b, "libplan: \"%d.%d\"\n", p->version_major,
                  p->version_minor);
  w_program(&b, p);
  return plan_buf_take(&b, out, len);
}

int plan_write_buffer(char **out, size_t *len, const plan_plan *p,
                      const plan_write_options *opts) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_write_buffer: NULL argument");
  *out = NULL;
  if (opts && opts->version != PLAN_WRITE_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE, "plan_write_options version %u is not %d",
                      opts->version, PLAN_WRITE_OPTIONS_VERSION);
  plan_buf b;
  plan_buf_init(&b);
  int rc = w_plan(&b, p, opts);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, len);
}

/* ---- atomic writes
 * ----------------------------------------------------------------------- */

int plan_write_file_atomic(const char *path, const void *data, size_t len) {
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_write_file_atomic: NULL path");
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  if (!tmp)
    return plan_oom();
  /* same folder, so rename() stays on one filesystem and is atomic */
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return plan_failf(PLAN_EIO, "cannot write '%s': %s", path, strerror(e));
  }
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  int e = left ? errno : 0;
  if (!e && fsync(fd) != 0)
    e = errno;
  if (close(fd) != 0 && !e)
    e = errno;
  if (!e && rename(tmp, path) != 0)
    e = errno;
  if (e) {
    unlink(tmp);
    free(tmp);
    return plan_failf(PLAN_EIO, "cannot write '%s': %s", path, strerror(e));
  }
  free(tmp);
  return PLAN_OK;
}

/* The path of file `target` relative to the folder of file `from` (both
 * as the process sees them), newly allocated; NULL when either cannot be
 * resolved or memory is short. */
static char *path_from(const char *from, const char *target) {
  char *dir = strdup(from);
  if (!dir)
    return NULL;
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = 0;
  else if (slash)
    *slash = 0;
  else
    strcpy(dir, ".");
  char *a = realpath(dir, NULL), *b = realpath(target, NULL), *out = NULL;
  free(dir);
  if (a && b) {
    /* the longest common run of whole folders: a's components all match,
     * or they match up to a '/' in both */
    size_t la = strlen(a), i = 0, common = 0;
    if (!strcmp(a, "/"))
      la = 0; /* the root: every path of b is below it */
    while (i < la && a[i] == b[i])
      i++;
    if (i == la && (b[i] == '/' || la == 0))
      common = i;
    else
      for (common = i; common > 0 && a[common] != '/'; common--)
        ;
    size_t ups = 0;
    for (size_t k = common; k < la; k++)
      ups += a[k] == '/';
    if (common < la)
      ups += 1; /* the last component of a has no trailing '/' */
    ups -= common < la && a[common] == '/' ? 1 : 0;
    const char *rest = b + common + (b[common] == '/');
    out = malloc(ups * 3 + strlen(rest) + 1);
    if (out) {
      out[0] = 0;
      for (size_t k = 0; k < ups; k++)
        strcat(out, "../");
      strcat(out, rest);
    }
  }
  free(a);
  free(b);
  return out;
}

int plan_save(const plan_plan *p, const char *path,
              const plan_write_options *opts) {
  char *text;
  size_t len;
  int rc;
  /* a program by path is written relative to the new file's folder, so
   * the saved plan finds it wherever it is saved */
  char *rebased = NULL;
  if (!p->program_inline && !(opts && opts->self_contained) && p->program &&
      p->program->file && p->program->file[0])
    rebased = path_from(path, p->program->file);
  if (rebased) {
    plan_plan moved = *p;
    moved.ref.path = rebased;
    rc = plan_write_buffer(&text, &len, &moved, opts);
    free(rebased);
  } else {
    rc = plan_write_buffer(&text, &len, p, opts);
  }
  if (rc)
    return rc;
  rc = plan_write_file_atomic(path, text, len);
  free(text);
  return rc;
}
