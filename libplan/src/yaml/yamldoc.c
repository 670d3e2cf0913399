/* The positioned YAML tree (yamldoc.h): the entry points that parse a file
 * or a buffer (whole, streamed or pipelined) and the lookups readers use.
 * The builder itself is in ydoc_build.c, its streaming in ydoc_stream.c,
 * its input in ydoc_input.c. */
#include <stdlib.h>
#include <string.h>

#include "yaml/ydoc_state.h"
#include "yaml/ypipe.h"

/* ---- public API -------------------------------------------------------- */

int plan_ydoc_parse_buffer(plan_ydoc *doc, const char *data, size_t len,
                           const char *name) {
  return plan_ydoc_parse_stream(doc, data, len, name, NULL, NULL, NULL);
}

int plan_ydoc_parse_stream(plan_ydoc *doc, const char *data, size_t len,
                           const char *name, const char *const *streams,
                           plan_ystream_fn fn, void *ctx) {
  return plan_ydoc_parse_limited(doc, data, len, name, streams, fn, ctx,
                                 PLAN_YAML_MAX_NODES);
}

static int parse_common(plan_ydoc *doc, const char *data, size_t len,
                        const char *name, const char *const *streams,
                        plan_ystream_fn fn, void *ctx, size_t max_nodes,
                        struct plan_ypipe *pipe);

int plan_ydoc_parse_limited(plan_ydoc *doc, const char *data, size_t len,
                            const char *name, const char *const *streams,
                            plan_ystream_fn fn, void *ctx, size_t max_nodes) {
  return parse_common(doc, data, len, name, streams, fn, ctx, max_nodes, NULL);
}

int plan_ydoc_parse_piped(plan_ydoc *doc, const char *data, size_t len,
                          const char *name, const char *const *streams,
                          struct plan_ypipe *pipe) {
  return parse_common(doc, data, len, name, streams, NULL, NULL,
                      PLAN_YAML_MAX_NODES, pipe);
}

static int parse_common(plan_ydoc *doc, const char *data, size_t len,
                        const char *name, const char *const *streams,
                        plan_ystream_fn fn, void *ctx, size_t max_nodes,
                        struct plan_ypipe *pipe) {
  yd_state *st;
  int rc;

  if (!doc)
    return plan_failf(PLAN_EUSAGE, "plan_ydoc_parse_buffer: doc is NULL");
  memset(doc, 0, sizeof *doc);
  plan_arena_init(&doc->arena);
  if (!data && len)
    return plan_failf(PLAN_EUSAGE, "plan_ydoc_parse_buffer: data is NULL");
  if (!data)
    data = "";
  /* The state holds libyaml's parser and the frame array (a few KiB); it
   * lives on the heap to keep the caller's stack small. */
  st = calloc(1, sizeof *st);
  if (!st)
    return plan_oom();
  /* The child stack exists from the start so that slices of it are never
   * offsets from a NULL pointer. */
  st->cap = 256;
  st->stack = malloc(st->cap * sizeof *st->stack);
  if (!st->stack) {
    free(st);
    return plan_oom();
  }
  st->doc = doc;
  st->name = name;
  st->main.arena = &doc->arena;
  st->main.slab_next = YD_SLAB_MIN;
  st->main.chunk_next = YD_CHUNK_MIN;
  plan_arena_init(&st->scratch_arena);
  st->scratch.arena = &st->scratch_arena;
  st->scratch.slab_next = YD_SLAB_MIN;
  st->scratch.chunk_next = YD_CHUNK_MIN;
  st->cur = &st->main;
  st->streams = streams;
  st->fn = fn;
  st->ctx = ctx;
  st->max_nodes = max_nodes;
  st->pipe = pipe;
  if (pipe)
    st->scratch.arena = plan_ypipe_arena(pipe);
  /* Seeding the key hash per parse from addresses (randomised by ASLR)
   * keeps crafted colliding keys from making big mappings quadratic,
   * without global state. */
  st->seed = (uint64_t)(uintptr_t)st ^ ((uint64_t)(uintptr_t)&rc << 17) ^
             (uint64_t)(uintptr_t)data;

  rc = plan_yd_parser_open(&st->parser, &data, &len, name);
  if (rc != PLAN_OK) {
    free(st->stack);
    free(st);
    return rc;
  }
  st->data = data;
  st->len = len;
  doc->file = plan_arena_strdup(&doc->arena, name ? name : "");
  rc = doc->file ? plan_yd_build(st) : plan_oom();

  for (int i = 0; i < st->depth; i++) /* open collections after an error */
    free(st->frames[i].keys.slots);
  free(st->stack);
  yaml_parser_delete(&st->parser);
  plan_arena_free(&st->scratch_arena);
  free(st);
  if (rc != PLAN_OK) {
    /* the worker may still be reading root entries in the document */
    if (pipe)
      plan_ypipe_drain(pipe);
    plan_ydoc_free(doc);
  }
  return rc;
}

int plan_ydoc_parse_file(plan_ydoc *doc, const char *path) {
  char *buf;
  size_t len;
  int rc;
  if (!doc)
    return plan_failf(PLAN_EUSAGE, "plan_ydoc_parse_file: doc is NULL");
  memset(doc, 0, sizeof *doc);
  plan_arena_init(&doc->arena);
  if ((rc = plan_yd_read_file(path, &buf, &len)) != PLAN_OK)
    return rc;
  rc = plan_ydoc_parse_buffer(doc, buf, len, path);
  free(buf);
  return rc;
}

void plan_ydoc_free(plan_ydoc *doc) {
  if (!doc)
    return;
  plan_arena_free(&doc->arena);
  memset(doc, 0, sizeof *doc);
  plan_arena_init(&doc->arena);
}

bool plan_yscalar_is(const plan_ynode *n, const char *text) {
  size_t len;
  if (!n || !text || n->kind != PLAN_Y_SCALAR)
    return false;
  len = strlen(text);
  return n->u.scalar.len == len && memcmp(n->u.scalar.text, text, len) == 0;
}

bool plan_yscalar_is_null(const plan_ynode *n) {
  const char *t;
  if (!n || n->kind != PLAN_Y_SCALAR)
    return false;
  if (n->u.scalar.tag) /* an explicit tag decides: !!str null is a string */
    return strcmp(n->u.scalar.tag, "null") == 0;
  if (n->u.scalar.style != PLAN_Y_PLAIN)
    return false;
  t = n->u.scalar.text;
  return n->u.scalar.len == 0 || strcmp(t, "~") == 0 ||
         strcmp(t, "null") == 0 || strcmp(t, "Null") == 0 ||
         strcmp(t, "NULL") == 0;
}

plan_ynode *plan_ynode_copy(plan_arena *a, const plan_ynode *n) {
  plan_ynode *c = plan_arena_alloc(a, sizeof *c);
  if (!c)
    return NULL;
  *c = *n;
  if (n->kind == PLAN_Y_SCALAR) {
    if (!(c->u.scalar.text =
              plan_arena_strndup(a, n->u.scalar.text, n->u.scalar.len)))
      return NULL;
  } else if (n->kind == PLAN_Y_SEQ) {
    if (n->u.seq.count) {
      c->u.seq.items =
          plan_arena_alloc(a, n->u.seq.count * sizeof(plan_ynode *));
      if (!c->u.seq.items)
        return NULL;
      for (size_t i = 0; i < n->u.seq.count; i++)
        if (!(c->u.seq.items[i] = plan_ynode_copy(a, n->u.seq.items[i])))
          return NULL;
    }
  } else if (n->u.map.count) {
    c->u.map.pairs = plan_arena_alloc(a, n->u.map.count * sizeof(plan_ypair));
    if (!c->u.map.pairs)
      return NULL;
    for (size_t i = 0; i < n->u.map.count; i++)
      if (!(c->u.map.pairs[i].key =
                plan_ynode_copy(a, n->u.map.pairs[i].key)) ||
          !(c->u.map.pairs[i].value =
                plan_ynode_copy(a, n->u.map.pairs[i].value)))
        return NULL;
  }
  return c;
}
