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
 * form wants.
 *
 * Names come from untrusted files, so the sort is guarded the way introsort
 * guards quicksort: pending parts live on a heap stack, not the C stack, and
 * a part that has been partitioned 2 log2(n) times at the same depth without
 * finishing is heapsorted, so no order of names costs more than O(n log n)
 * comparisons or recursion at all. */
static void swap_named(named *a, named *b) {
  named t = *a;
  *a = *b;
  *b = t;
}

/* Bytes d..d+7 of s, zero past its end. The entries of a part share their
 * first d bytes, none of them NUL, so only bytes from d on are read. */
static uint64_t chunk_at(const char *s, size_t d) {
  uint64_t k = 0;
  size_t i = 0;
  for (s += d; i < 8 && s[i]; i++)
    k = k << 8 | (unsigned char)s[i];
  for (; i < 8; i++)
    k <<= 8;
  return k;
}

/* The names of a deeper part lie anywhere in memory: they are asked for a
 * few entries ahead (PLAN_PREFETCH). */
#define CHUNK_AHEAD 8

static void load_chunks(named *v, size_t n, size_t d) {
  for (size_t i = 0; i < n; i++) {
    if (i + CHUNK_AHEAD < n)
      PLAN_PREFETCH(v[i + CHUNK_AHEAD].name + d);
    v[i].key = chunk_at(v[i].name, d);
  }
}

/* Entries that share their first d bytes, by the rest. */
static int named_cmp_at(const named *x, const named *y, size_t d) {
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return strcmp(x->name + d, y->name + d);
}

static void insertion_sort(named *v, size_t n, size_t d) {
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && named_cmp_at(&v[j - 1], &v[j], d) > 0; j--)
      swap_named(&v[j - 1], &v[j]);
}

static void sift_down(named *v, size_t root, size_t n, size_t d) {
  for (size_t c; (c = 2 * root + 1) < n; root = c) {
    if (c + 1 < n && named_cmp_at(&v[c], &v[c + 1], d) < 0)
      c++;
    if (named_cmp_at(&v[root], &v[c], d) >= 0)
      return;
    swap_named(&v[root], &v[c]);
  }
}

/* The fallback: O(n log n) whatever the order, no extra memory. */
static void heap_sort(named *v, size_t n, size_t d) {
  for (size_t i = n / 2; i-- > 0;)
    sift_down(v, i, n, d);
  for (size_t end = n; end > 1; end--) {
    swap_named(&v[0], &v[end - 1]);
    sift_down(v, 0, end - 1, d);
  }
}

/* How many partitions a part of n entries may take at one depth. */
static int depth_budget(size_t n) {
  int b = 0;
  for (; n > 1; n >>= 1)
    b += 2;
  return b;
}

/* The median of the keys at i, j, k moved to v[0]: a sorted or reversed
 * part splits in half. */
static void pivot_to_front(named *v, size_t i, size_t j, size_t k) {
  uint64_t a = v[i].key, b = v[j].key, c = v[k].key;
  size_t m =
      a < b ? (b < c ? j : (a < c ? k : i)) : (a < c ? i : (b < c ? k : j));
  swap_named(&v[0], &v[m]);
}

typedef struct sort_part {
  named *v;
  size_t n, d;
  int budget;
} sort_part;

typedef struct sort_stack {
  sort_part *parts;
  size_t len, cap;
} sort_stack;

static int stack_push(sort_stack *s, named *v, size_t n, size_t d, int budget) {
  if (n < 2)
    return PLAN_OK;
  if (s->len == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 64;
    sort_part *np = realloc(s->parts, ncap * sizeof *np);
    if (!np)
      return plan_oom();
    s->parts = np;
    s->cap = ncap;
  }
  s->parts[s->len++] = (sort_part){v, n, d, budget};
  return PLAN_OK;
}

/* One part: v[0..n) all share the first d bytes and carry chunk d in .key.
 * Its smaller and larger entries are pushed; the equal ones, when their
 * names go on, are followed 8 bytes deeper in this loop. */
static int sort_part_run(sort_stack *s, sort_part p) {
  named *v = p.v;
  size_t n = p.n, d = p.d;
  int budget = p.budget;
  while (n > 1) {
    if (n < 8) {
      insertion_sort(v, n, d);
      return PLAN_OK;
    }
    if (budget-- <= 0) {
      heap_sort(v, n, d);
      return PLAN_OK;
    }
    if (n < 64)
      pivot_to_front(v, 0, n / 2, n - 1);
    else
      pivot_to_front(v, n / 4, n / 2, n - 1 - n / 4);
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
    int rc = stack_push(s, v, lt, d, budget);
    if (!rc)
      rc = stack_push(s, v + gt, n - gt, d, budget);
    if (rc)
      return rc;
    if ((pivot & 0xff) == 0)
      return PLAN_OK; /* the equal names end inside this chunk: all equal */
    v += lt;
    n = gt - lt;
    d += 8;
    load_chunks(v, n, d);
    budget = depth_budget(n);
  }
  return PLAN_OK;
}

/* v[0..n) by name, byte order. PLAN_OK or the OOM status. */
static int mkqsort(named *v, size_t n) {
  sort_stack s = {0};
  load_chunks(v, n, 0);
  int rc = stack_push(&s, v, n, 0, depth_budget(n));
  while (!rc && s.len)
    rc = sort_part_run(&s, s.parts[--s.len]);
  free(s.parts);
  return rc;
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
  if (mkqsort(v, (size_t)n)) {
    free(v);
    return NULL;
  }
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
