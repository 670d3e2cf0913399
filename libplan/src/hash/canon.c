/* The canonical encoding of programs, meshes, plans and provenance, and the
 * hashes over it (spec/canonical-form.md).
 *
 * The encoding is compact JSON built from the IR, never from the text: keys
 * in byte order, fields equal to their default omitted, name patterns
 * expanded, placements in their canonical compact spelling, numbers in the
 * shortest round-trip spelling. So two files that mean the same thing encode
 * the same bytes whatever their key order, style, comments or spellings.
 *
 * Large encodings are hashed as they are produced (a streaming XXH3 state fed
 * every 64 KiB) so hashing a 100k-op plan needs no second copy of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/plan.h"
#include "ir/ops.h"
#include "read/plan_read.h"

typedef struct cj {
  plan_buf *b;
  XXH3_state_t *hs; /* when set, the buffer is flushed into it */
  /* the last floats printed: repeated layers repeat their attributes, and
   * the shortest round-trip spelling takes several printf/strtod rounds */
  double fval[4];
  char ftext[4][40];
  int fnext, fcount;
} cj;

static void cj_flush(cj *c) {
  if (c->hs && c->b->len >= 65536) {
    XXH3_128bits_update(c->hs, c->b->data, c->b->len);
    c->b->len = 0;
  }
}

static void cj_str(cj *c, const char *s) {
  plan_buf *b = c->b;
  plan_buf_putc(b, '"');
  const char *run = s;
  for (;; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch > '\\' || (ch >= 0x20 && ch != '"' && ch != '\\'))
      continue; /* the common case: one compare for letters */
    if (!ch)
      break;
    plan_buf_append(b, run, (size_t)(s - run));
    if (ch == '"' || ch == '\\') {
      plan_buf_putc(b, '\\');
      plan_buf_putc(b, (char)ch);
    } else if (ch == '\n') {
      plan_buf_puts(b, "\\n");
    } else if (ch == '\t') {
      plan_buf_puts(b, "\\t");
    } else if (ch == '\r') {
      plan_buf_puts(b, "\\r");
    } else {
      plan_buf_printf(b, "\\u%04x", ch);
    }
    run = s + 1;
  }
  plan_buf_append(b, run, (size_t)(s - run));
  plan_buf_putc(b, '"');
}

/* Object keys: `first` tracks whether a comma is needed. */
static void cj_key(cj *c, bool *first, const char *key) {
  if (!*first)
    plan_buf_putc(c->b, ',');
  *first = false;
  cj_str(c, key);
  plan_buf_putc(c->b, ':');
}

static void cj_sep(cj *c, bool *first) {
  if (!*first)
    plan_buf_putc(c->b, ',');
  *first = false;
}

/* Decimal without printf: encodings print hundreds of thousands of ints. */
static void cj_int(cj *c, int64_t v) {
  char buf[24], *e = buf + sizeof buf, *s = e;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--s = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *--s = '-';
  plan_buf_append(c->b, s, (size_t)(e - s));
}

static void cj_num(cj *c, double v) {
  if (v == 0) { /* -0.0 and 0.0 are the same number here */
    plan_buf_putc(c->b, '0');
    return;
  }
  for (int i = 0; i < c->fcount; i++)
    if (c->fval[i] == v && (v != 0 || signbit(c->fval[i]) == signbit(v))) {
      plan_buf_puts(c->b, c->ftext[i]);
      return;
    }
  int k = c->fnext;
  c->fnext = (c->fnext + 1) % 4;
  if (c->fcount < 4)
    c->fcount++;
  c->fval[k] = v;
  plan_buf_puts(c->b, plan_format_double(v, c->ftext[k]));
}

static void cj_pl(cj *c, const plan_placement *p) {
  char buf[PLAN_PLACEMENT_STRLEN];
  cj_str(c, plan_placement_format(p, buf));
}

/* ---- sorting names ----------------------------------------------------------
 */

typedef struct named {
  const char *name;
  int idx;
  uint64_t key; /* sorting scratch, see mkqsort */
} named;

static int named_cmp(const void *a, const void *b) {
  return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* Multikey quicksort (Bentley and Sedgewick, "Fast algorithms for sorting
 * and searching strings", 1997) on 8-byte chunks: names like
 * layers.17.attn.q share long prefixes, which strcmp-based sorts compare
 * again and again, and chasing each name's pointer per byte is a cache miss.
 * Each entry carries the 8 bytes of its name at the current depth as a
 * big-endian integer (zero past the end), so partitions compare integers and
 * the names are read once per 8 bytes of depth. Byte order, as the canonical
 * form wants. */
static void swap_named(named *a, named *b) {
  named t = *a;
  *a = *b;
  *b = t;
}

static uint64_t chunk_at(const char *s, size_t d) {
  uint64_t k = 0;
  size_t n = strnlen(s, d + 8);
  for (size_t i = 0; i < 8; i++)
    k = k << 8 | (d + i < n ? (unsigned char)s[d + i] : 0);
  return k;
}

static void load_chunks(named *v, size_t n, size_t d) {
  for (size_t i = 0; i < n; i++)
    v[i].key = chunk_at(v[i].name, d);
}

/* v[0..n) all share the first d bytes and carry chunk d in .key */
static void mkqsort(named *v, size_t n, size_t d) {
  while (n > 1) {
    if (n < 8) { /* insertion sort: key, then the rest of the strings */
      for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
          const named *x = &v[j - 1], *y = &v[j];
          if (x->key < y->key ||
              (x->key == y->key && strcmp(x->name + d, y->name + d) <= 0))
            break;
          swap_named(&v[j - 1], &v[j]);
        }
      return;
    }
    swap_named(&v[0], &v[n / 2]);
    uint64_t pivot = v[0].key;
    size_t lt = 0, gt = n, i = 0;
    /* v[0..lt) < pivot, v[lt..i) == pivot, v[gt..n) > pivot */
    while (i < gt) {
      uint64_t c = v[i].key;
      if (c < pivot)
        swap_named(&v[lt++], &v[i++]);
      else if (c > pivot)
        swap_named(&v[i], &v[--gt]);
      else
        i++;
    }
    mkqsort(v, lt, d);
    mkqsort(v + gt, n - gt, d);
    if ((pivot & 0xff) == 0)
      return; /* the equal names end inside this chunk: all equal */
    /* the equal part, 8 bytes deeper (a loop, not recursion) */
    v += lt;
    n = gt - lt;
    d += 8;
    load_chunks(v, n, d);
  }
}

/* An array of (name, index) sorted by name; NULL on OOM. */
static named *sorted_names(int n, const char *(*get)(const void *, int),
                           const void *ctx) {
  named *v = malloc(sizeof(named) * ((size_t)n + 1));
  if (!v)
    return NULL;
  for (int i = 0; i < n; i++) {
    v[i].name = get(ctx, i);
    v[i].idx = i;
  }
  load_chunks(v, (size_t)n, 0);
  mkqsort(v, (size_t)n, 0);
  return v;
}

static const char *op_name_of(const void *ctx, int i) {
  return ((const plan_program *)ctx)->ops[i].name;
}
static const char *tensor_name_of(const void *ctx, int i) {
  return ((const plan_program *)ctx)->tensors[i].name;
}

/* A sorted list of the op names flagged in `flags` (per op index). */
static void cj_op_set(cj *c, const plan_program *prog, const named *byname,
                      const bool *flags) {
  bool first = true;
  plan_buf_putc(c->b, '[');
  for (int k = 0; k < prog->nops; k++)
    if (flags[byname[k].idx]) {
      cj_sep(c, &first);
      cj_str(c, byname[k].name);
    }
  plan_buf_putc(c->b, ']');
}

/* ---- program
 * ------------------------------------------------------------------ */

static void cj_attrs(cj *c, const plan_op *op) {
  const plan_op_info *info = plan_op_info_get(op->kind);
  bool first = true;
  plan_buf_putc(c->b, '{');
  /* schema order is fixed; emit in key order */
  int order[PLAN_MAX_ATTRS + 4];
  int n = info->nattrs;
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(info->attrs[order[j - 1]].name,
                                    info->attrs[order[j]].name) > 0;
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int k = 0; k < n; k++) {
    const plan_attr_spec *s = &info->attrs[order[k]];
    const plan_attr_val *a = &op->attrs[order[k]];
    switch (s->type) {
    case PLAN_ATTR_INT:
      if (a->i != s->def_i) {
        cj_key(c, &first, s->name);
        cj_int(c, a->i);
      }
      break;
    case PLAN_ATTR_FLOAT:
      if (a->f != s->def_f) {
        cj_key(c, &first, s->name);
        cj_num(c, a->f);
      }
      break;
    case PLAN_ATTR_BOOL:
      if (a->b != s->def_b) {
        cj_key(c, &first, s->name);
        plan_buf_puts(c->b, a->b ? "true" : "false");
      }
      break;
    case PLAN_ATTR_STRING:
      if (a->s && (!s->def_s || strcmp(a->s, s->def_s))) {
        cj_key(c, &first, s->name);
        cj_str(c, a->s);
      }
      break;
    case PLAN_ATTR_INTS:
      if (a->present || a->nints > 0) { /* `shape: []` is written */
        cj_key(c, &first, s->name);
        plan_buf_putc(c->b, '[');
        for (int i = 0; i < a->nints; i++) {
          if (i)
            plan_buf_putc(c->b, ',');
          cj_int(c, a->ints[i]);
        }
        plan_buf_putc(c->b, ']');
      }
      break;
    }
  }
  plan_buf_putc(c->b, '}');
}

static void cj_names(cj *c, const plan_program *prog, const int *t, int n) {
  plan_buf_putc(c->b, '[');
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_putc(c->b, ',');
    cj_str(c, prog->tensors[t[i]].name);
  }
  plan_buf_putc(c->b, ']');
}

static bool has_dim_names(const plan_tensor *t) {
  for (int d = 0; d < t->rank; d++)
    if (t->dim_names && t->dim_names[d])
      return true;
  return false;
}

/* The fields of a tensor. `full` adds shape and dtype for produced tensors
 * (signatures); the program encoding leaves them to inference. */
static void cj_tensor(cj *c, const plan_tensor *t, bool full) {
  bool first = true, leaf = t->producer < 0;
  plan_buf_putc(c->b, '{');
  if ((leaf || full) && t->dtype != PLAN_F32) {
    cj_key(c, &first, "dtype");
    cj_str(c, plan_dtype_name(t->dtype));
  }
  if (t->recipe != PLAN_RECIPE_NONE) {
    bool f2 = true;
    cj_key(c, &first, "init");
    plan_buf_putc(c->b, '{');
    if (t->recipe_fill != -1e9) {
      cj_key(c, &f2, "fill");
      cj_num(c, t->recipe_fill);
    }
    cj_key(c, &f2, "recipe");
    cj_str(c, plan_recipe_name(t->recipe));
    if (t->recipe_theta != 10000.0) {
      cj_key(c, &f2, "theta");
      cj_num(c, t->recipe_theta);
    }
    plan_buf_putc(c->b, '}');
  }
  if (has_dim_names(t)) {
    cj_key(c, &first, "names");
    plan_buf_putc(c->b, '[');
    for (int d = 0; d < t->rank; d++) {
      if (d)
        plan_buf_putc(c->b, ',');
      cj_str(c, t->dim_names[d] ? t->dim_names[d] : "");
    }
    plan_buf_putc(c->b, ']');
  }
  if (t->has_range) {
    cj_key(c, &first, "range");
    plan_buf_putc(c->b, '[');
    cj_int(c, t->range_lo);
    plan_buf_putc(c->b, ',');
    cj_int(c, t->range_hi);
    plan_buf_putc(c->b, ']');
  }
  if (leaf && t->role != PLAN_ROLE_INPUT) {
    cj_key(c, &first, "role");
    cj_str(c, plan_role_name(t->role));
  }
  if (leaf || full) {
    cj_key(c, &first, "shape");
    plan_buf_putc(c->b, '[');
    for (int d = 0; d < t->rank; d++) {
      if (d)
        plan_buf_putc(c->b, ',');
      cj_int(c, t->dims[d]);
    }
    plan_buf_putc(c->b, ']');
  }
  plan_buf_putc(c->b, '}');
}

/* Outputs are a set: omitted when they are the default (every produced
 * tensor nothing consumes). */
static bool outputs_are_default(const plan_program *p, char *consumed) {
  for (int i = 0; i < p->nops; i++)
    for (int j = 0; j < p->ops[i].nin; j++)
      consumed[p->ops[i].in[j]] = 1;
  int ndef = 0;
  for (int t = 0; t < p->ntensors; t++)
    if (p->tensors[t].producer >= 0 && !consumed[t])
      ndef++;
  if (ndef != p->noutputs)
    return false;
  for (int i = 0; i < p->noutputs; i++)
    if (consumed[p->outputs[i]])
      return false;
  return true;
}

/* Ops and tensors sorted by name: computed once per encoding and shared by
 * the program and plan parts (sorting 100k names is most of a hash). */
typedef struct order {
  named *ops, *tens;
} order;

/* The sorted order, from the program's prepared permutation if it has one. */
static named *prepared_names(int n, const int *perm,
                             const char *(*get)(const void *, int),
                             const void *ctx) {
  named *v = malloc(sizeof(named) * ((size_t)n + 1));
  if (!v)
    return NULL;
  for (int i = 0; i < n; i++) {
    v[i].idx = perm[i];
    v[i].name = get(ctx, perm[i]);
    v[i].key = 0;
  }
  return v;
}

static int order_make(order *o, const plan_program *p) {
  if (p->ops_by_name && p->tensors_by_name) {
    o->ops = prepared_names(p->nops, p->ops_by_name, op_name_of, p);
    o->tens = prepared_names(p->ntensors, p->tensors_by_name, tensor_name_of, p);
  } else {
    o->ops = sorted_names(p->nops, op_name_of, p);
    o->tens = sorted_names(p->ntensors, tensor_name_of, p);
  }
  if (!o->ops || !o->tens) {
    free(o->ops);
    free(o->tens);
    return plan_oom();
  }
  return PLAN_OK;
}

static void order_free(order *o) {
  free(o->ops);
  free(o->tens);
}

static int cj_program(cj *c, const plan_program *p, const order *ord) {
  const named *ops = ord->ops, *tens = ord->tens;
  char *consumed = calloc((size_t)p->ntensors + 1, 1);
  if (!consumed)
    return plan_oom();
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (p->loss >= 0) {
    cj_key(c, &first, "loss");
    cj_str(c, p->tensors[p->loss].name);
  }
  if (p->name && p->name[0]) {
    cj_key(c, &first, "name");
    cj_str(c, p->name);
  }
  cj_key(c, &first, "ops");
  plan_buf_putc(c->b, '{');
  for (int k = 0; k < p->nops; k++) {
    const plan_op *op = &p->ops[ops[k].idx];
    if (k)
      plan_buf_putc(c->b, ',');
    cj_str(c, op->name);
    plan_buf_puts(c->b, ":{\"attrs\":");
    cj_attrs(c, op);
    plan_buf_puts(c->b, ",\"in\":");
    cj_names(c, p, op->in, op->nin);
    plan_buf_puts(c->b, ",\"op\":");
    cj_str(c, plan_op_kind_name(op->kind));
    plan_buf_puts(c->b, ",\"out\":");
    cj_names(c, p, op->out, op->nout);
    plan_buf_putc(c->b, '}');
    cj_flush(c);
  }
  plan_buf_putc(c->b, '}');
  if (!outputs_are_default(p, consumed)) {
    cj_key(c, &first, "outputs");
    plan_buf_putc(c->b, '[');
    bool f2 = true;
    char *is_out = consumed; /* reuse as a flag array */
    memset(is_out, 0, (size_t)p->ntensors + 1);
    for (int i = 0; i < p->noutputs; i++)
      is_out[p->outputs[i]] = 1;
    for (int k = 0; k < p->ntensors; k++)
      if (is_out[tens[k].idx]) {
        cj_sep(c, &f2);
        cj_str(c, tens[k].name);
      }
    plan_buf_putc(c->b, ']');
  }
  cj_key(c, &first, "tensors");
  plan_buf_putc(c->b, '{');
  bool f3 = true;
  for (int k = 0; k < p->ntensors; k++) {
    const plan_tensor *t = &p->tensors[tens[k].idx];
    if (t->producer >= 0 && !has_dim_names(t))
      continue; /* fully inferred */
    cj_key(c, &f3, t->name);
    cj_tensor(c, t, false);
    cj_flush(c);
  }
  plan_buf_puts(c->b, "}}");
  free(consumed);
  return PLAN_OK;
}

/* ---- signatures
 * ------------------------------------------------------------------- */

void plan_canon_program_sigs(plan_program *p) {
  p->op_sigs = calloc((size_t)p->nops + 1, sizeof(uint64_t));
  p->tensor_sigs = calloc((size_t)p->ntensors + 1, sizeof(uint64_t));
  if (!p->op_sigs || !p->tensor_sigs) {
    /* no memory: every signature reads as 0 (drift then reports changes) */
    free(p->op_sigs);
    free(p->tensor_sigs);
    p->op_sigs = p->tensor_sigs = NULL;
    return;
  }
  plan_buf b;
  plan_buf_init(&b);
  cj c = {.b = &b};
  for (int t = 0; t < p->ntensors; t++) {
    plan_buf_reset(&b);
    cj_str(&c, p->tensors[t].name);
    cj_tensor(&c, &p->tensors[t], true);
    p->tensor_sigs[t] = XXH3_64bits(b.data, b.len);
  }
  for (int i = 0; i < p->nops; i++) {
    const plan_op *op = &p->ops[i];
    plan_buf_reset(&b);
    cj_str(&c, plan_op_kind_name(op->kind));
    cj_attrs(&c, op);
    for (int j = 0; j < op->nin; j++) {
      const plan_tensor *t = &p->tensors[op->in[j]];
      cj_str(&c, t->name);
      cj_tensor(&c, t, true);
    }
    p->op_sigs[i] = XXH3_64bits(b.data, b.len);
  }
  /* On OOM the signatures degrade to hashes of partial text; the buffer
   * records the failure and loads report it through other allocations. */
  plan_buf_free(&b);
}

/* ---- mesh
 * ------------------------------------------------------------------------- */

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

static int cj_mesh(cj *c, const plan_mesh *m) {
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

/* ---- generic values (provenance)
 * ---------------------------------------------------- */

static int cj_value(cj *c, const plan_value *v) {
  switch (v->kind) {
  case PLAN_V_NULL:
    plan_buf_puts(c->b, "null");
    break;
  case PLAN_V_BOOL:
    plan_buf_puts(c->b, v->b ? "true" : "false");
    break;
  case PLAN_V_INT:
    cj_int(c, v->i);
    break;
  case PLAN_V_FLOAT:
    cj_num(c, v->f);
    break;
  case PLAN_V_STRING:
    cj_str(c, v->s);
    break;
  case PLAN_V_SEQ:
    plan_buf_putc(c->b, '[');
    for (int i = 0; i < v->n; i++) {
      if (i)
        plan_buf_putc(c->b, ',');
      cj_value(c, v->items[i]);
    }
    plan_buf_putc(c->b, ']');
    break;
  case PLAN_V_MAP: {
    named *k = malloc(sizeof(named) * ((size_t)v->n + 1));
    if (!k)
      return plan_oom();
    for (int i = 0; i < v->n; i++) {
      k[i].name = v->keys[i];
      k[i].idx = i;
    }
    qsort(k, (size_t)v->n, sizeof(named), named_cmp);
    bool first = true;
    plan_buf_putc(c->b, '{');
    int rc = PLAN_OK;
    for (int i = 0; i < v->n && !rc; i++) {
      if (!strncmp(k[i].name, "x-", 2))
        continue;
      cj_key(c, &first, k[i].name);
      rc = cj_value(c, v->items[k[i].idx]);
    }
    plan_buf_putc(c->b, '}');
    free(k);
    return rc;
  }
  }
  return PLAN_OK;
}

/* ---- plan
 * ----------------------------------------------------------------------------
 */

static void cj_optimizer(cj *c, bool *first, const plan_training *tr) {
  if (tr->optimizer == PLAN_OPT_NONE)
    return;
  bool f = true, adam = tr->optimizer == PLAN_OPT_ADAM;
  cj_key(c, first, "optimizer");
  plan_buf_putc(c->b, '{');
  if (adam && tr->beta1 != 0.9) {
    cj_key(c, &f, "beta1");
    cj_num(c, tr->beta1);
  }
  if (adam && tr->beta2 != 0.999) {
    cj_key(c, &f, "beta2");
    cj_num(c, tr->beta2);
  }
  if (adam && tr->eps != 1e-8) {
    cj_key(c, &f, "eps");
    cj_num(c, tr->eps);
  }
  cj_key(c, &f, "kind");
  cj_str(c, adam ? "adam" : "sgd");
  if (tr->lr != (adam ? 1e-3 : 0.01)) {
    cj_key(c, &f, "lr");
    cj_num(c, tr->lr);
  }
  if (!adam && tr->momentum != 0) {
    cj_key(c, &f, "momentum");
    cj_num(c, tr->momentum);
  }
  if (tr->weight_decay != 0) {
    cj_key(c, &f, "weight_decay");
    cj_num(c, tr->weight_decay);
  }
  plan_buf_putc(c->b, '}');
}

static void cj_training(cj *c, const plan_plan *p, const named *ops,
                        const named *tens) {
  const plan_training *tr = &p->training;
  const plan_program *prog = p->program;
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (tr->clip_grad_norm != 0) {
    cj_key(c, &first, "clip_grad_norm");
    cj_num(c, tr->clip_grad_norm);
  }
  int dts[4] = {tr->accum_dtype, tr->compute_dtype, tr->grad_dtype,
                tr->param_dtype};
  static const char *const dkeys[4] = {"accum", "compute", "grad", "param"};
  if (dts[0] >= 0 || dts[1] >= 0 || dts[2] >= 0 || dts[3] >= 0) {
    bool f = true;
    cj_key(c, &first, "dtypes");
    plan_buf_putc(c->b, '{');
    for (int i = 0; i < 4; i++)
      if (dts[i] >= 0) {
        cj_key(c, &f, dkeys[i]);
        cj_str(c, plan_dtype_name((plan_dtype)dts[i]));
      }
    plan_buf_putc(c->b, '}');
  }
  bool anysync = false, anystate = false, anyrec = false;
  for (int t = 0; t < prog->ntensors; t++) {
    anysync |= tr->params[t].sync != PLAN_SYNC_AUTO;
    anystate |= tr->params[t].has_state_pl;
  }
  for (int i = 0; i < prog->nops; i++)
    anyrec |= tr->recompute[i];
  static const char *const sync_names[PLAN_SYNC_COUNT] = {
      "auto", "all_reduce", "reduce_scatter", "none"};
  if (anysync) {
    bool f = true;
    cj_key(c, &first, "grad_sync");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      const plan_param_train *pt = &tr->params[tens[k].idx];
      if (pt->sync != PLAN_SYNC_AUTO) {
        cj_key(c, &f, tens[k].name);
        cj_str(c, sync_names[pt->sync]);
      }
    }
    plan_buf_putc(c->b, '}');
  }
  if (tr->loss_scale != 1.0) {
    cj_key(c, &first, "loss_scale");
    cj_num(c, tr->loss_scale);
  }
  cj_optimizer(c, &first, tr);
  if (anystate) {
    bool f = true;
    cj_key(c, &first, "optimizer_state");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      const plan_param_train *pt = &tr->params[tens[k].idx];
      if (pt->has_state_pl) {
        cj_key(c, &f, tens[k].name);
        cj_pl(c, &pt->state_pl);
      }
    }
    plan_buf_putc(c->b, '}');
  }
  if (anyrec) {
    cj_key(c, &first, "recompute");
    cj_op_set(c, prog, ops, tr->recompute);
  }
  if (tr->steps != 1) {
    cj_key(c, &first, "steps");
    cj_int(c, tr->steps);
  }
  plan_buf_putc(c->b, '}');
}

static int cj_pipeline(cj *c, const plan_plan *p, const named *ops) {
  const plan_pipeline *pp = &p->pipeline;
  const plan_program *prog = p->program;
  static const char *const sched[PLAN_SCHED_COUNT] = {
      "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "explicit"};
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (pp->axis >= 0) {
    cj_key(c, &first, "axis");
    cj_str(c, p->mesh.axis_names[pp->axis]);
  }
  if (pp->schedule == PLAN_SCHED_EXPLICIT) {
    cj_key(c, &first, "grid");
    plan_buf_putc(c->b, '[');
    for (int r = 0; r < pp->grid_ranks; r++) {
      if (r)
        plan_buf_putc(c->b, ',');
      plan_buf_putc(c->b, '[');
      for (int i = 0; i < pp->grid_len[r]; i++) {
        const plan_action *a = &pp->grid[r][i];
        char buf[64];
        snprintf(buf, sizeof buf, "%d%s%d", a->stage, plan_action_word(a->kind),
                 a->microbatch);
        if (i)
          plan_buf_putc(c->b, ',');
        cj_str(c, buf);
      }
      plan_buf_putc(c->b, ']');
    }
    plan_buf_putc(c->b, ']');
  }
  if (pp->microbatches != 1) {
    cj_key(c, &first, "microbatches");
    cj_int(c, pp->microbatches);
  }
  if (pp->schedule != PLAN_SCHED_1F1B && pp->schedule != PLAN_SCHED_EXPLICIT) {
    cj_key(c, &first, "schedule");
    cj_str(c, sched[pp->schedule]);
  }
  cj_key(c, &first, "stages");
  plan_buf_putc(c->b, '[');
  bool *member = calloc((size_t)prog->nops + 1, 1);
  if (!member)
    return plan_oom();
  for (int s = 0; s < pp->nstages; s++) {
    if (s)
      plan_buf_putc(c->b, ',');
    for (int i = 0; i < prog->nops; i++)
      member[i] = pp->op_stage[i] == s;
    plan_buf_puts(c->b, "{\"ops\":");
    cj_op_set(c, prog, ops, member);
    if (pp->stages[s].submesh >= 0) {
      plan_buf_puts(c->b, ",\"submesh\":");
      cj_str(c, p->mesh.submeshes[pp->stages[s].submesh].name);
    }
    plan_buf_putc(c->b, '}');
  }
  free(member);
  plan_buf_puts(c->b, "]}");
  return PLAN_OK;
}

static void cj_boundaries(cj *c, const plan_program *prog,
                          const plan_boundary *b, int n) {
  /* few entries: insertion order by name */
  int idx[64], m = n < 64 ? n : 64;
  for (int i = 0; i < m; i++)
    idx[i] = i;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && strcmp(prog->tensors[b[idx[j - 1]].tensor].name,
                                    prog->tensors[b[idx[j]].tensor].name) > 0;
         j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  bool f = true;
  plan_buf_putc(c->b, '{');
  for (int i = 0; i < m; i++) {
    cj_key(c, &f, prog->tensors[b[idx[i]].tensor].name);
    cj_pl(c, &b[idx[i]].pl);
  }
  plan_buf_putc(c->b, '}');
}

static void cj_regions(cj *c, const plan_plan *p, const named *ops) {
  static const char *const kinds[PLAN_REGION_COUNT] = {"pinned", "manual"};
  const plan_program *prog = p->program;
  int idx[256], n = p->nregions < 256 ? p->nregions : 256;
  for (int i = 0; i < n; i++)
    idx[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(p->regions[idx[j - 1]].name,
                                    p->regions[idx[j]].name) > 0;
         j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  bool first = true;
  plan_buf_putc(c->b, '{');
  for (int i = 0; i < n; i++) {
    const plan_region *r = &p->regions[idx[i]];
    bool f = true;
    cj_key(c, &first, r->name);
    plan_buf_putc(c->b, '{');
    if (r->body) {
      cj_key(c, &f, "body");
      cj_str(c, r->body);
    }
    if (r->ninputs) {
      cj_key(c, &f, "inputs");
      cj_boundaries(c, prog, r->inputs, r->ninputs);
    }
    cj_key(c, &f, "kind");
    cj_str(c, kinds[r->kind]);
    cj_key(c, &f, "ops");
    cj_op_set(c, prog, ops, r->ops);
    if (r->noutputs) {
      cj_key(c, &f, "outputs");
      cj_boundaries(c, prog, r->outputs, r->noutputs);
    }
    plan_buf_putc(c->b, '}');
  }
  plan_buf_putc(c->b, '}');
}

static int program_hash_ord(plan_hash *out, const plan_program *prog,
                            const order *ord);

static int cj_plan(cj *c, const plan_plan *p, const order *ord) {
  const plan_program *prog = p->program;
  plan_hash ph;
  int rc = prog->hash_cached ? (ph = prog->hash, PLAN_OK)
                              : program_hash_ord(&ph, prog, ord);
  if (rc)
    return rc;
  const named *ops = ord->ops, *tens = ord->tens;
  bool first = true;
  plan_buf_putc(c->b, '{');
  cj_key(c, &first, "libplan");
  plan_buf_printf(c->b, "\"%d.%d\"", p->version_major, p->version_minor);
  cj_key(c, &first, "mesh");
  if ((rc = cj_mesh(c, &p->mesh)))
    goto done;
  bool anyout = false;
  for (int i = 0; i < prog->noutputs; i++)
    anyout |=
        p->out_pl[i].set && !plan_placement_is_replicated(&p->out_pl[i].pl);
  if (anyout) {
    bool f = true;
    cj_key(c, &first, "outputs");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++)
      for (int i = 0; i < prog->noutputs; i++)
        if (prog->outputs[i] == tens[k].idx && p->out_pl[i].set &&
            !plan_placement_is_replicated(&p->out_pl[i].pl)) {
          cj_key(c, &f, tens[k].name);
          cj_pl(c, &p->out_pl[i].pl);
        }
    plan_buf_putc(c->b, '}');
  }
  if (p->pipeline.present) {
    cj_key(c, &first, "pipeline");
    if ((rc = cj_pipeline(c, p, ops)))
      goto done;
  }
  bool anypl = false;
  for (int t = 0; t < prog->ntensors; t++)
    anypl |= p->placements[t].set &&
             !plan_placement_is_replicated(&p->placements[t].pl);
  if (anypl) {
    bool f = true;
    cj_key(c, &first, "placements");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      const plan_tensor_pl *tp = &p->placements[tens[k].idx];
      if (tp->set && !plan_placement_is_replicated(&tp->pl)) {
        cj_key(c, &f, tens[k].name);
        cj_pl(c, &tp->pl);
      }
    }
    plan_buf_putc(c->b, '}');
  }
  char hbuf[PLAN_HASH_STRLEN];
  cj_key(c, &first, "program");
  cj_str(c, plan_hash_format(ph, hbuf));
  if (p->nregions) {
    cj_key(c, &first, "regions");
    cj_regions(c, p, ops);
  }
  cj_key(c, &first, "strategies");
  plan_buf_putc(c->b, '{');
  bool f = true;
  for (int k = 0; k < prog->nops; k++) {
    const plan_strategy *s = &p->strategies[ops[k].idx];
    const plan_op *op = &prog->ops[ops[k].idx];
    if (!s->set)
      continue;
    cj_key(c, &f, op->name);
    plan_buf_puts(c->b, "{\"in\":[");
    for (int j = 0; j < op->nin; j++) {
      if (j)
        plan_buf_putc(c->b, ',');
      cj_pl(c, &s->in[j]);
    }
    plan_buf_puts(c->b, "],\"out\":[");
    for (int j = 0; j < op->nout; j++) {
      if (j)
        plan_buf_putc(c->b, ',');
      cj_pl(c, &s->out[j]);
    }
    plan_buf_puts(c->b, "]}");
    cj_flush(c);
  }
  plan_buf_putc(c->b, '}');
  if (p->training.present) {
    cj_key(c, &first, "training");
    cj_training(c, p, ops, tens);
  }
  plan_buf_putc(c->b, '}');
done:
  return rc;
}

/* One section's canonical encoding: "mesh", "training", "pipeline",
 * "regions" (empty when absent). Used by diff to compare sections. */
int plan_canon_section(plan_buf *b, const plan_plan *p, const char *which) {
  cj c = {.b = b};
  const plan_program *prog = p->program;
  int rc = PLAN_OK;
  if (!strcmp(which, "mesh"))
    return p->has_mesh ? cj_mesh(&c, &p->mesh) : PLAN_OK;
  named *ops = sorted_names(prog->nops, op_name_of, prog);
  named *tens = sorted_names(prog->ntensors, tensor_name_of, prog);
  if (!ops || !tens) {
    free(ops);
    free(tens);
    return plan_oom();
  }
  if (!strcmp(which, "training") && p->training.present)
    cj_training(&c, p, ops, tens);
  else if (!strcmp(which, "pipeline") && p->pipeline.present)
    rc = cj_pipeline(&c, p, ops);
  else if (!strcmp(which, "regions") && p->nregions)
    cj_regions(&c, p, ops);
  free(ops);
  free(tens);
  if (!rc && b->failed)
    rc = plan_oom();
  return rc;
}

/* ---- entry points
 * ----------------------------------------------------------------------- */

static int encode_program(cj *c, const plan_program *prog, const order *ord) {
  /* the program's own document version, so a program hashes the same
   * inline, by path or standalone */
  plan_buf_printf(c->b,
                  "{\"libplan\":\"%d.%d\",\"program\":", prog->version_major,
                  prog->version_minor);
  int rc = cj_program(c, prog, ord);
  if (rc)
    return rc;
  plan_buf_putc(c->b, '}');
  return PLAN_OK;
}

static int encode(cj *c, const plan_plan *p, const plan_program *prog,
                  plan_part part) {
  int vmaj = p ? p->version_major : prog->version_major;
  int vmin = p ? p->version_minor : prog->version_minor;
  order ord;
  int rc;
  switch (part) {
  case PLAN_PART_PLAN:
    if (!p->has_mesh)
      return plan_failf(PLAN_ENOTFOUND,
                        "a program-only document has no plan part");
    if ((rc = order_make(&ord, prog)))
      return rc;
    rc = cj_plan(c, p, &ord);
    order_free(&ord);
    return rc;
  case PLAN_PART_PROGRAM:
    if ((rc = order_make(&ord, prog)))
      return rc;
    rc = encode_program(c, prog, &ord);
    order_free(&ord);
    return rc;
  case PLAN_PART_MESH:
    if (!p->has_mesh)
      return plan_failf(PLAN_ENOTFOUND, "the document has no mesh");
    plan_buf_printf(c->b, "{\"libplan\":\"%d.%d\",\"mesh\":", vmaj, vmin);
    if ((rc = cj_mesh(c, &p->mesh)))
      return rc;
    plan_buf_putc(c->b, '}');
    return PLAN_OK;
  case PLAN_PART_PROVENANCE:
    if (!p->provenance)
      return plan_failf(PLAN_ENOTFOUND, "the plan has no provenance");
    plan_buf_printf(c->b, "{\"libplan\":\"%d.%d\",\"provenance\":", vmaj, vmin);
    if ((rc = cj_value(c, p->provenance)))
      return rc;
    plan_buf_putc(c->b, '}');
    return PLAN_OK;
  }
  return plan_failf(PLAN_EUSAGE, "unknown plan part %d", (int)part);
}

int plan_canon_encode(plan_buf *b, const plan_plan *p, plan_part part) {
  cj c = {.b = b};
  int rc = encode(&c, p, p->program, part);
  if (!rc && b->failed)
    rc = plan_oom();
  return rc;
}

/* Hashes what `enc` writes, streaming it into XXH3-128. */
typedef struct hash_job {
  const plan_plan *p;
  const plan_program *prog;
  plan_part part;
  const order *ord; /* for the program part inside a plan */
} hash_job;

static int hash_run(plan_hash *out, const hash_job *j) {
  plan_buf b;
  plan_buf_init(&b);
  XXH3_state_t *hs = XXH3_createState();
  if (!hs)
    return plan_oom();
  XXH3_128bits_reset(hs);
  cj c = {.b = &b, .hs = hs};
  int rc = j->ord ? encode_program(&c, j->prog, j->ord)
                  : encode(&c, j->p, j->prog, j->part);
  if (!rc && b.failed)
    rc = plan_oom();
  if (!rc) {
    XXH3_128bits_update(hs, b.data, b.len);
    XXH128_hash_t h = XXH3_128bits_digest(hs);
    out->high = h.high64;
    out->low = h.low64;
  }
  XXH3_freeState(hs);
  plan_buf_free(&b);
  return rc;
}

static int program_hash_ord(plan_hash *out, const plan_program *prog,
                            const order *ord) {
  hash_job j = {NULL, prog, PLAN_PART_PROGRAM, ord};
  return hash_run(out, &j);
}

int plan_program_hash(plan_hash *out, const plan_program *prog) {
  if (!out || !prog)
    return plan_failf(PLAN_EUSAGE, "plan_program_hash: NULL argument");
  if (prog->hash_cached) {
    *out = prog->hash;
    return PLAN_OK;
  }
  hash_job j = {NULL, prog, PLAN_PART_PROGRAM, NULL};
  return hash_run(out, &j);
}

int plan_canon_program_prepare(plan_program *p) {
  order o;
  int rc = order_make(&o, p);
  if (rc)
    return rc;
  int *ops = malloc(sizeof(int) * ((size_t)p->nops + 1));
  int *tens = malloc(sizeof(int) * ((size_t)p->ntensors + 1));
  if (!ops || !tens) {
    free(ops);
    free(tens);
    order_free(&o);
    return plan_oom();
  }
  for (int i = 0; i < p->nops; i++)
    ops[i] = o.ops[i].idx;
  for (int i = 0; i < p->ntensors; i++)
    tens[i] = o.tens[i].idx;
  if ((rc = program_hash_ord(&p->hash, p, &o))) {
    free(ops);
    free(tens);
    order_free(&o);
    return rc;
  }
  order_free(&o);
  p->ops_by_name = ops;
  p->tensors_by_name = tens;
  p->hash_cached = true;
  return PLAN_OK;
}

int plan_hash_part(plan_hash *out, const plan_plan *p, plan_part part) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_hash_part: NULL argument");
  hash_job j = {p, p->program, part, NULL};
  return hash_run(out, &j);
}

int plan_canonical(char **out, size_t *len, const plan_plan *p,
                   plan_part part) {
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  int rc = plan_canon_encode(&b, p, part);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, len);
}
