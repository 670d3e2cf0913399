/* The YAML tree builder (yamldoc.h): libyaml's events become positioned
 * nodes, with the hostile-input limits checked as each event arrives.
 *
 * Shape of the builder, and why:
 * - Nodes are carved from slabs and scalar text from chunks that both come
 *   from the document's arena: one arena call per few thousand nodes rather
 *   than one per node, and short strings are packed without the arena's
 *   16-byte alignment (keys like "op" would otherwise cost 16 bytes each).
 * - Children of the collections that are still open sit on one shared
 *   malloc'd pointer stack; when a collection ends its slice is copied into
 *   an exact-size arena array and popped. So the tree never holds slack and
 *   there is no per-collection malloc.
 * - Limits are checked as each event arrives, so hostile input is refused at
 *   the first offending node rather than after building something big.
 * - Duplicate keys are found as each key arrives (so the error is at the
 *   second key in document order): a linear scan for small mappings, and a
 *   seeded hash table once a mapping grows past YD_LINEAR_KEYS keys, so a
 *   mapping costs O(n) expected however large it is. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "yaml/ydoc_state.h"

/* ---- positions and messages ---------------------------------------------- */

static int fail_at(const yd_state *st, int code, yaml_mark_t m, const char *fmt,
                   ...) PLAN_PRINTF(4, 5);

static int fail_at(const yd_state *st, int code, yaml_mark_t m, const char *fmt,
                   ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
    msg[0] = '\0';
  va_end(ap);
  return plan_fail(code, st->name, mark_line(m), mark_col(m), "%s", msg);
}

/* Writes text for a message: at most about 60 bytes, cut on a character
 * boundary, with control characters and quotes escaped, so that a hostile
 * key cannot garble or flood the error line. */
static void msg_text(char *out, size_t outsz, const char *s, size_t len) {
  size_t o = 0, i = 0;
  const size_t room = outsz - 8; /* leaves space for an escape and "..." */
  while (i < len && o + 4 < room && o < 60) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch == 0x7F || ch == '\'' || ch == '\\') {
      if (ch == '\'' || ch == '\\') {
        out[o++] = '\\';
        out[o++] = (char)ch;
      } else {
        static const char hex[] = "0123456789abcdef";
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[ch >> 4];
        out[o++] = hex[ch & 15];
      }
    } else {
      out[o++] = (char)ch;
    }
    i++;
  }
  if (i < len) {
    while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80)
      o--; /* drop a cut multi-byte character's tail */
    if (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0xC0)
      o--; /* and its lead byte */
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
}

/* ---- tree building ----------------------------------------------------- */

/* The builder's own calls are inlined: they run once per event. */
static inline plan_ynode *new_node(yd_state *st, plan_ynode_kind kind,
                                   yaml_mark_t m) {
  plan_ynode *n;
  yd_cursor *c = st->cur;
  if (!c->slab_left) {
    c->slab = plan_arena_alloc(c->arena, c->slab_next * sizeof(plan_ynode));
    if (!c->slab)
      return NULL;
    c->slab_left = c->slab_next;
    if (c->slab_next < YD_SLAB_MAX)
      c->slab_next *= 2;
  }
  n = c->slab++;
  c->slab_left--;
  n->kind = kind;
  n->line = mark_line(m);
  n->col = mark_col(m);
  return n;
}

plan_ynode *plan_yd_new_node(yd_state *st, plan_ynode_kind kind,
                             yaml_mark_t m) {
  return new_node(st, kind, m);
}

/* Copies scalar text into the arena, NUL-terminated. */
static inline char *copy_text(yd_state *st, const char *s, size_t len) {
  size_t need = len + 1;
  char *p;
  yd_cursor *c = st->cur;
  if (need > c->chunk_next / 4)
    return plan_arena_strndup(c->arena, s, len);
  if (need > c->chunk_left) {
    c->chunk = plan_arena_alloc(c->arena, c->chunk_next);
    if (!c->chunk) {
      c->chunk_left = 0;
      return NULL;
    }
    c->chunk_left = c->chunk_next;
    if (c->chunk_next < YD_CHUNK_MAX)
      c->chunk_next *= 2;
  }
  p = c->chunk;
  memcpy(p, s, len);
  p[len] = '\0';
  c->chunk += need;
  c->chunk_left -= need;
  return p;
}

char *plan_yd_copy_text(yd_state *st, const char *s, size_t len) {
  return copy_text(st, s, len);
}

static inline int push(yd_state *st, plan_ynode *n) {
  if (st->top == st->cap) {
    size_t ncap = st->cap * 2;
    plan_ynode **ns = realloc(st->stack, ncap * sizeof *ns);
    if (!ns)
      return plan_oom();
    st->stack = ns;
    st->cap = ncap;
  }
  st->stack[st->top++] = n;
  return PLAN_OK;
}

static uint32_t key_hash(const yd_state *st, const plan_ynode *k) {
  uint64_t h =
      XXH3_64bits_withSeed(k->u.scalar.text, k->u.scalar.len, st->seed);
  return (uint32_t)(h ^ (h >> 32));
}

static bool same_text(const plan_ynode *a, const plan_ynode *b) {
  return a->u.scalar.len == b->u.scalar.len &&
         memcmp(a->u.scalar.text, b->u.scalar.text, a->u.scalar.len) == 0;
}

/* Puts pair index `pair` with hash h into the table, which has room. */
static void keytab_place(yd_keytab *t, uint32_t h, size_t pair) {
  size_t i = h & t->mask;
  while (t->slots[i].pair)
    i = (i + 1) & t->mask;
  t->slots[i].hash = h;
  t->slots[i].pair = (uint32_t)(pair + 1);
  t->count++;
}

/* Grows the table so that one more key keeps it at most half full. */
static int keytab_reserve(yd_keytab *t) {
  size_t cap = t->slots ? t->mask + 1 : 0;
  size_t ncap;
  yd_slot *old = t->slots, *ns;
  if ((t->count + 1) * 2 <= cap)
    return PLAN_OK;
  ncap = cap ? cap * 2 : 64;
  ns = calloc(ncap, sizeof *ns);
  if (!ns)
    return plan_oom();
  t->slots = ns;
  t->mask = ncap - 1;
  t->count = 0;
  for (size_t i = 0; i < cap; i++)
    if (old[i].pair)
      keytab_place(t, old[i].hash, old[i].pair - 1);
  free(old);
  return PLAN_OK;
}

/* Reports a duplicate of `first` at key k. */
static int dup_fail(const yd_state *st, const plan_ynode *k,
                    const plan_ynode *first) {
  char text[96];
  msg_text(text, sizeof text, k->u.scalar.text, k->u.scalar.len);
  return plan_fail(PLAN_ESCHEMA, st->name, k->line, k->col,
                   "duplicate key '%s' (first at line %d)", text, first->line);
}

/* Checks the new key k of the mapping f against its earlier keys. The keys
 * sit at even offsets from f->base on the child stack. */
static int check_key(yd_state *st, yd_frame *f, const plan_ynode *k) {
  size_t npairs = (st->top - f->base) / 2;
  plan_ynode **keys = st->stack + f->base;
  uint32_t h;
  size_t i;
  int rc;

  if (!f->keys.slots && npairs < YD_LINEAR_KEYS) {
    for (i = 0; i < npairs; i++)
      if (same_text(keys[2 * i], k))
        return dup_fail(st, k, keys[2 * i]);
    return PLAN_OK;
  }
  if (!f->keys.slots) { /* the mapping just became large: index it */
    if ((rc = keytab_reserve(&f->keys)) != PLAN_OK)
      return rc;
    for (i = 0; i < npairs; i++)
      keytab_place(&f->keys, key_hash(st, keys[2 * i]), i);
  }
  if ((rc = keytab_reserve(&f->keys)) != PLAN_OK)
    return rc;
  h = key_hash(st, k);
  i = h & f->keys.mask;
  while (f->keys.slots[i].pair) {
    const yd_slot *s = &f->keys.slots[i];
    if (s->hash == h && same_text(keys[2 * (size_t)(s->pair - 1)], k))
      return dup_fail(st, k, keys[2 * (size_t)(s->pair - 1)]);
    i = (i + 1) & f->keys.mask;
  }
  f->keys.slots[i].hash = h;
  f->keys.slots[i].pair = (uint32_t)(npairs + 1);
  f->keys.count++;
  return PLAN_OK;
}

/* Adds node n (whose event started at m) to the innermost open collection,
 * or makes it the root. */
static inline int attach(yd_state *st, plan_ynode *n, yaml_mark_t m) {
  yd_frame *f;
  if (st->depth == 0) {
    st->doc->root = n;
    return PLAN_OK;
  }
  f = &st->frames[st->depth - 1];
  if (f->kind == PLAN_Y_MAP && (st->top - f->base) % 2 == 0) {
    int rc;
    if (n->kind != PLAN_Y_SCALAR)
      return fail_at(st, PLAN_ESCHEMA, m, "mapping keys must be scalars");
    /* A stream's entries are dropped as they are consumed, so the caller
     * checks their keys for duplicates (it sees every one). */
    if (f->role != YD_STREAM && (rc = check_key(st, f, n)) != PLAN_OK)
      return rc;
  }
  return push(st, n);
}

/* ---- events -------------------------------------------------------------- */

/* A node has just completed: inside a stream item's own collections there
 * is nothing to hand over yet, which is most nodes of a streamed file. */
static inline int item_end(yd_state *st) {
  if (st->item_depth && st->item_depth != st->depth)
    return PLAN_OK;
  return plan_yd_item_end(st);
}

/* Validates an explicit tag for a node of the given kind. Only the core
 * schema tags are accepted; *short_tag is set to the scalar's tag name. */
static int check_tag(const yd_state *st, const yaml_char_t *tag,
                     plan_ynode_kind kind, yaml_mark_t m,
                     const char **short_tag) {
  static const char *const scalar_tags[] = {"str", "int", "float", "bool",
                                            "null"};
  const size_t plen = sizeof YD_CORE_TAG - 1;
  const char *t = (const char *)tag;
  char text[96];

  *short_tag = NULL;
  if (!t)
    return PLAN_OK;
  if (strncmp(t, YD_CORE_TAG, plen) == 0) {
    const char *sfx = t + plen;
    if (kind == PLAN_Y_SCALAR) {
      for (size_t i = 0; i < sizeof scalar_tags / sizeof *scalar_tags; i++)
        if (strcmp(sfx, scalar_tags[i]) == 0) {
          *short_tag = scalar_tags[i];
          return PLAN_OK;
        }
    } else if (strcmp(sfx, kind == PLAN_Y_MAP ? "map" : "seq") == 0) {
      return PLAN_OK;
    }
    msg_text(text, sizeof text, sfx, strlen(sfx));
    return fail_at(st, PLAN_ESCHEMA, m, "unsupported tag '!!%s' on a %s", text,
                   kind == PLAN_Y_SCALAR ? "scalar"
                   : kind == PLAN_Y_MAP  ? "mapping"
                                         : "sequence");
  }
  msg_text(text, sizeof text, t, strlen(t));
  return fail_at(st, PLAN_ESCHEMA, m, "unsupported tag '%s'", text);
}

/* Counts nodes held in memory: a consumed stream item gives its nodes back,
 * so the limit bounds memory, not the length of a streamed file. */
static inline int count_node(yd_state *st, yaml_mark_t m) {
  if (st->nodes >= st->max_nodes)
    return fail_at(st, PLAN_ELIMIT, m, "more than %zu nodes in the document",
                   st->max_nodes);
  st->nodes++;
  if (st->item_depth ||
      (st->depth && st->frames[st->depth - 1].role == YD_STREAM))
    st->item_nodes++;
  return PLAN_OK;
}

static int on_scalar(yd_state *st, const yaml_event_t *ev) {
  yaml_mark_t m = ev->start_mark;
  const char *value = (const char *)ev->data.scalar.value;
  size_t len = ev->data.scalar.length;
  const char *tag;
  plan_ynode *n;
  int rc;

  if (ev->data.scalar.anchor)
    return fail_at(st, PLAN_ESCHEMA, m, "anchors and aliases are not allowed");
  tag = NULL;
  if (ev->data.scalar.tag &&
      (rc = check_tag(st, ev->data.scalar.tag, PLAN_Y_SCALAR, m, &tag)))
    return rc;
  if (len > PLAN_YAML_MAX_SCALAR)
    return fail_at(st, PLAN_ELIMIT, m,
                   "scalar of %zu bytes is longer than the limit of %u bytes",
                   len, (unsigned)PLAN_YAML_MAX_SCALAR);
  /* A raw NUL is refused by libyaml's reader; this catches the escapes
   * "\0", "\x00" and "\u0000" of double-quoted scalars (the only style
   * with escapes), which would silently cut the C string. */
  if (ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE && len &&
      memchr(value, 0, len))
    return fail_at(st, PLAN_ESYNTAX, m, "scalar contains a NUL character");
  if ((rc = count_node(st, m)))
    return rc;
  if (!st->item_depth)
    plan_yd_item_begin(st);
  if (!(n = new_node(st, PLAN_Y_SCALAR, m)))
    return plan_oom();
  if (!(n->u.scalar.text = copy_text(st, value, len)))
    return plan_oom();
  n->u.scalar.len = len;
  n->u.scalar.tag = tag;
  switch (ev->data.scalar.style) {
  case YAML_SINGLE_QUOTED_SCALAR_STYLE:
  case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
    n->u.scalar.style = PLAN_Y_QUOTED;
    break;
  case YAML_LITERAL_SCALAR_STYLE:
  case YAML_FOLDED_SCALAR_STYLE:
    n->u.scalar.style = PLAN_Y_BLOCK;
    break;
  default:
    n->u.scalar.style = PLAN_Y_PLAIN;
    break;
  }
  if ((rc = attach(st, n, m)))
    return rc;
  return item_end(st);
}

static int on_start(yd_state *st, const yaml_event_t *ev,
                    plan_ynode_kind kind) {
  yaml_mark_t m = ev->start_mark;
  const yaml_char_t *anchor = kind == PLAN_Y_MAP
                                  ? ev->data.mapping_start.anchor
                                  : ev->data.sequence_start.anchor;
  const yaml_char_t *tag = kind == PLAN_Y_MAP ? ev->data.mapping_start.tag
                                              : ev->data.sequence_start.tag;
  const char *unused;
  plan_ynode *n;
  yd_frame *f;
  int rc;

  if (anchor)
    return fail_at(st, PLAN_ESCHEMA, m, "anchors and aliases are not allowed");
  if (tag && (rc = check_tag(st, tag, kind, m, &unused)))
    return rc;
  if (st->depth >= PLAN_YAML_MAX_DEPTH)
    return fail_at(st, PLAN_ELIMIT, m, "nesting deeper than %d levels",
                   PLAN_YAML_MAX_DEPTH);
  if ((rc = count_node(st, m)))
    return rc;
  if (!st->item_depth)
    plan_yd_item_begin(st);
  if (!(n = new_node(st, kind, m)))
    return plan_oom();
  if ((rc = attach(st, n, m)))
    return rc;
  f = &st->frames[st->depth];
  plan_yd_frame_role(st, f, kind);
  st->depth++;
  f->node = n;
  f->kind = kind;
  f->base = st->top;
  f->keys.slots = NULL;
  f->keys.mask = 0;
  f->keys.count = 0;
  return PLAN_OK;
}

/* Closes the innermost collection: its children move from the stack into an
 * exact-size arena array. */
static int on_end(yd_state *st) {
  yd_frame *f = &st->frames[st->depth - 1];
  plan_ynode *n = f->node;
  plan_ynode **kids = st->stack + f->base;
  size_t count = st->top - f->base;

  if (n->kind == PLAN_Y_MAP) {
    size_t npairs = count / 2; /* libyaml always closes a key with a value */
    n->u.map.pairs = NULL;     /* scratch memory is not zeroed */
    if (npairs) {
      plan_ypair *pairs =
          plan_arena_alloc(st->cur->arena, npairs * sizeof *pairs);
      if (!pairs)
        return plan_oom();
      for (size_t i = 0; i < npairs; i++) {
        pairs[i].key = kids[2 * i];
        pairs[i].value = kids[2 * i + 1];
      }
      n->u.map.pairs = pairs;
    }
    n->u.map.count = npairs;
  } else {
    n->u.seq.items = NULL;
    if (count) {
      plan_ynode **items =
          plan_arena_alloc(st->cur->arena, count * sizeof *items);
      if (!items)
        return plan_oom();
      memcpy(items, kids, count * sizeof *items);
      n->u.seq.items = items;
    }
    n->u.seq.count = count;
  }
  free(f->keys.slots);
  f->keys.slots = NULL;
  st->top = f->base;
  st->depth--;
  return item_end(st);
}

static int on_event(yd_state *st, const yaml_event_t *ev, bool *done) {
  switch (ev->type) {
  case YAML_STREAM_START_EVENT:
  case YAML_DOCUMENT_END_EVENT:
  case YAML_NO_EVENT:
    return PLAN_OK;
  case YAML_DOCUMENT_START_EVENT:
    if (st->ndocs++)
      return fail_at(st, PLAN_ESYNTAX, ev->start_mark,
                     "more than one document");
    return PLAN_OK;
  case YAML_STREAM_END_EVENT:
    *done = true;
    if (!st->ndocs)
      return plan_fail(PLAN_ESYNTAX, st->name, 1, 1, "empty document");
    return PLAN_OK;
  case YAML_ALIAS_EVENT:
    return fail_at(st, PLAN_ESCHEMA, ev->start_mark,
                   "anchors and aliases are not allowed");
  case YAML_SCALAR_EVENT:
    return on_scalar(st, ev);
  case YAML_SEQUENCE_START_EVENT:
    return on_start(st, ev, PLAN_Y_SEQ);
  case YAML_MAPPING_START_EVENT:
    return on_start(st, ev, PLAN_Y_MAP);
  case YAML_SEQUENCE_END_EVENT:
  case YAML_MAPPING_END_EVENT:
    return on_end(st);
  }
  return PLAN_OK;
}

int plan_yd_build(yd_state *st) {
  bool done = false;
  int rc = PLAN_OK;
  while (!done && rc == PLAN_OK) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&st->parser, &ev))
      return plan_yd_parser_error(&st->parser, st->name, st->data, st->len);
    rc = on_event(st, &ev, &done);
    yaml_event_delete(&ev);
  }
  return rc;
}
