/* A plan's provenance as public values (libplan/plan.h): the generic
 * value tree the reader keeps (plan_value, in the plan's arena) copied out
 * into one malloc'd block of plan_provenance_value, and a caller's tree
 * checked and copied in. */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ir/ir.h"
#include "libplan/plan.h"
#include "read/plan_read.h"

#define MAX_DEPTH 64

#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(PLAN_VALUE_NULL, PLAN_V_NULL) &&
                   SAME(PLAN_VALUE_BOOL, PLAN_V_BOOL) &&
                   SAME(PLAN_VALUE_INT, PLAN_V_INT) &&
                   SAME(PLAN_VALUE_FLOAT, PLAN_V_FLOAT) &&
                   SAME(PLAN_VALUE_STRING, PLAN_V_STRING) &&
                   SAME(PLAN_VALUE_SEQ, PLAN_V_SEQ) &&
                   SAME(PLAN_VALUE_MAP, PLAN_V_MAP),
               "public value types follow the reader's");

/* ---- out: one block ------------------------------------------------------ */

typedef struct block_size {
  size_t nodes, keys, bytes;
} block_size;

static void measure(const plan_value *v, block_size *z) {
  if (!v)
    return;
  if (v->kind == PLAN_V_STRING)
    z->bytes += strlen(v->s ? v->s : "") + 1;
  if (v->kind != PLAN_V_SEQ && v->kind != PLAN_V_MAP)
    return;
  z->nodes += (size_t)v->n;
  if (v->kind == PLAN_V_MAP) {
    z->keys += (size_t)v->n;
    for (int i = 0; i < v->n; i++)
      z->bytes += strlen(v->keys[i]) + 1;
  }
  for (int i = 0; i < v->n; i++)
    measure(v->items[i], z);
}

typedef struct block_cursor {
  plan_provenance_value *node;
  const char **key;
  char *byte;
} block_cursor;

static const char *put_string(block_cursor *c, const char *s) {
  size_t n = strlen(s) + 1;
  char *at = c->byte;
  memcpy(at, s, n);
  c->byte += n;
  return at;
}

/* Fills *d from v; its children come from the cursor's arrays. */
static void fill(plan_provenance_value *d, const plan_value *v,
                 block_cursor *c) {
  memset(d, 0, sizeof *d);
  if (!v)
    return;
  d->type = (int)v->kind;
  switch (v->kind) {
  case PLAN_V_BOOL:
    d->boolean = v->b ? 1 : 0;
    return;
  case PLAN_V_INT:
    d->integer = v->i;
    return;
  case PLAN_V_FLOAT:
    d->number = v->f;
    return;
  case PLAN_V_STRING:
    d->string = put_string(c, v->s ? v->s : "");
    return;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    break;
  default:
    d->type = PLAN_VALUE_NULL;
    return;
  }
  plan_provenance_value *items = c->node;
  c->node += v->n;
  d->count = v->n;
  d->items = items;
  if (v->kind == PLAN_V_MAP) {
    const char **keys = c->key;
    c->key += v->n;
    for (int i = 0; i < v->n; i++)
      keys[i] = put_string(c, v->keys[i]);
    d->keys = keys;
  }
  for (int i = 0; i < v->n; i++)
    fill(&items[i], v->items[i], c);
}

int plan_get_provenance(plan_provenance_value **out, const plan_plan *p) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_get_provenance: NULL argument");
  *out = NULL;
  if (!p->provenance)
    return plan_failf(PLAN_ENOTFOUND, "the plan has no provenance");
  block_size z = {1, 0, 0};
  measure(p->provenance, &z);
  size_t size = z.nodes * sizeof(plan_provenance_value) +
                z.keys * sizeof(const char *) + z.bytes;
  plan_provenance_value *root = malloc(size);
  if (!root)
    return plan_oom();
  block_cursor c = {root + 1, (const char **)(void *)(root + z.nodes),
                    (char *)(root + z.nodes) + z.keys * sizeof(const char *)};
  fill(root, p->provenance, &c);
  *out = root;
  return PLAN_OK;
}

/* ---- in: checked, then copied into the plan's arena ---------------------- */

static int cmp_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* PLAN_OK when the keys of a map are distinct. */
static int distinct_keys(const plan_provenance_value *v) {
  if (v->count < 2)
    return PLAN_OK;
  const char **sorted = malloc(sizeof *sorted * (size_t)v->count);
  if (!sorted)
    return plan_oom();
  memcpy(sorted, v->keys, sizeof *sorted * (size_t)v->count);
  qsort(sorted, (size_t)v->count, sizeof *sorted, cmp_keys);
  int rc = PLAN_OK;
  for (int i = 1; i < v->count && !rc; i++)
    if (!strcmp(sorted[i - 1], sorted[i]))
      rc = plan_failf(PLAN_EINVALID, "provenance: key '%s' twice in a map",
                      sorted[i]);
  free(sorted);
  return rc;
}

static int check(const plan_provenance_value *v, int depth) {
  if (depth > MAX_DEPTH)
    return plan_failf(PLAN_ELIMIT, "provenance: nested over %d deep",
                      MAX_DEPTH);
  switch (v->type) {
  case PLAN_VALUE_NULL:
  case PLAN_VALUE_BOOL:
  case PLAN_VALUE_INT:
  case PLAN_VALUE_FLOAT:
    return PLAN_OK;
  case PLAN_VALUE_STRING:
    return v->string ? PLAN_OK
                     : plan_failf(PLAN_EINVALID, "provenance: NULL string");
  case PLAN_VALUE_SEQ:
  case PLAN_VALUE_MAP:
    break;
  default:
    return plan_failf(PLAN_EINVALID, "provenance: no value type %d", v->type);
  }
  if (v->count < 0 || (v->count && !v->items))
    return plan_failf(PLAN_EINVALID,
                      "provenance: a list or map of %d values "
                      "without them",
                      v->count);
  int rc;
  if (v->type == PLAN_VALUE_MAP) {
    if (v->count && !v->keys)
      return plan_failf(PLAN_EINVALID, "provenance: a map without keys");
    for (int i = 0; i < v->count; i++)
      if (!v->keys[i])
        return plan_failf(PLAN_EINVALID, "provenance: a NULL key");
    if ((rc = distinct_keys(v)))
      return rc;
  }
  for (int i = 0; i < v->count; i++)
    if ((rc = check(&v->items[i], depth + 1)))
      return rc;
  return PLAN_OK;
}

static plan_value *copy_in(plan_arena *a, const plan_provenance_value *v) {
  plan_value *d = plan_arena_alloc(a, sizeof *d);
  if (!d)
    return NULL;
  memset(d, 0, sizeof *d);
  d->kind = (plan_value_kind)v->type;
  switch (v->type) {
  case PLAN_VALUE_BOOL:
    d->b = v->boolean != 0;
    return d;
  case PLAN_VALUE_INT:
    d->i = v->integer;
    return d;
  case PLAN_VALUE_FLOAT:
    d->f = v->number;
    return d;
  case PLAN_VALUE_STRING:
    return (d->s = plan_arena_strdup(a, v->string)) ? d : NULL;
  case PLAN_VALUE_SEQ:
  case PLAN_VALUE_MAP:
    break;
  default:
    return d;
  }
  d->n = v->count;
  d->items = plan_arena_alloc(a, sizeof *d->items * (size_t)(v->count + 1));
  if (!d->items)
    return NULL;
  if (v->type == PLAN_VALUE_MAP) {
    d->keys = plan_arena_alloc(a, sizeof *d->keys * (size_t)(v->count + 1));
    if (!d->keys)
      return NULL;
    for (int i = 0; i < v->count; i++)
      if (!(d->keys[i] = plan_arena_strdup(a, v->keys[i])))
        return NULL;
  }
  for (int i = 0; i < v->count; i++)
    if (!(d->items[i] = copy_in(a, &v->items[i])))
      return NULL;
  return d;
}

int plan_set_provenance(plan_plan *p, const plan_provenance_value *v) {
  if (!p)
    return plan_failf(PLAN_EUSAGE, "plan_set_provenance: NULL plan");
  if (!v) {
    p->provenance = NULL;
    return PLAN_OK;
  }
  if (v->type != PLAN_VALUE_MAP)
    return plan_failf(PLAN_EINVALID, "provenance is a mapping");
  int rc;
  if ((rc = check(v, 0)))
    return rc;
  plan_value *copy = copy_in(&p->arena, v);
  if (!copy)
    return plan_oom();
  p->provenance = copy;
  return PLAN_OK;
}
