/* The shared pieces of the canonical encoders (canon_json.h): names sorted
 * in byte order, once per encoding, and generic values (provenance). */
#include "hash/canon_json.h"

/* ---- sorting names --------------------------------------------------------
 */

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

int plan_cj_order_make(cj_order *o, const plan_program *p, bool prepared) {
  if (prepared && p->ops_by_name && p->tensors_by_name) {
    o->ops = prepared_names(p->nops, p->ops_by_name, op_name_of, p);
    o->tens =
        prepared_names(p->ntensors, p->tensors_by_name, tensor_name_of, p);
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

void plan_cj_order_free(cj_order *o) {
  free(o->ops);
  free(o->tens);
}

/* ---- generic values (provenance) ----------------------------------------- */

int plan_cj_value(cj *c, const plan_value *v) {
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
      plan_cj_value(c, v->items[i]);
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
      rc = plan_cj_value(c, v->items[k[i].idx]);
    }
    plan_buf_putc(c->b, '}');
    free(k);
    return rc;
  }
  }
  return PLAN_OK;
}
