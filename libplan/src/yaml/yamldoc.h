/* A positioned YAML document tree built from libyaml's event stream, with
 * limits against hostile input enforced while parsing:
 * - exactly one document (an empty stream or a second document is an error);
 * - anchors and aliases are refused (no alias bombs; plans use name patterns);
 * - nesting deeper than PLAN_YAML_MAX_DEPTH is refused;
 * - a scalar longer than PLAN_YAML_MAX_SCALAR bytes is refused;
 * - more than PLAN_YAML_MAX_NODES nodes held at once is refused (streamed
 *   items that were consumed no longer count);
 * - duplicate mapping keys are refused (at the second key);
 * - mapping keys must be scalars;
 * - libyaml's own checks: UTF-8, control characters (NUL), tabs as
 *   indentation.
 * Tags other than the core ones (!!str, !!int, !!float, !!bool, !!null,
 * !!map, !!seq) are refused.
 *
 * Every node carries its 1-based line and column. All memory lives in one
 * arena owned by the document. */
#ifndef LIBPLAN_YAMLDOC_H
#define LIBPLAN_YAMLDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

#define PLAN_YAML_MAX_DEPTH 64
#define PLAN_YAML_MAX_SCALAR (1u << 20) /* 1 MiB */
#define PLAN_YAML_MAX_NODES ((size_t)8 * 1024 * 1024)

typedef enum plan_ynode_kind {
  PLAN_Y_SCALAR = 1,
  PLAN_Y_SEQ = 2,
  PLAN_Y_MAP = 3
} plan_ynode_kind;

/* How a scalar was written; plain scalars are typed by the reader that
 * consumes them (schema-directed), quoted ones are always strings. */
typedef enum plan_yscalar_style {
  PLAN_Y_PLAIN = 0,
  PLAN_Y_QUOTED = 1, /* single or double quoted */
  PLAN_Y_BLOCK = 2   /* literal | or folded > */
} plan_yscalar_style;

typedef struct plan_ynode plan_ynode;

/* A mapping entry: key is always a scalar node. */
typedef struct plan_ypair {
  plan_ynode *key;
  plan_ynode *value;
} plan_ypair;

struct plan_ynode {
  plan_ynode_kind kind;
  int line; /* 1-based */
  int col;  /* 1-based */
  union {
    struct {
      const char *text; /* NUL-terminated, may contain no NUL (refused) */
      size_t len;
      plan_yscalar_style style;
      /* Explicit core tag, or NULL: "str", "int", "float", "bool", "null" */
      const char *tag;
    } scalar;
    struct {
      plan_ynode **items;
      size_t count;
    } seq;
    struct {
      plan_ypair *pairs;
      size_t count;
    } map;
  } u;
};

typedef struct plan_ydoc {
  plan_arena arena;
  plan_ynode *root; /* never NULL after a successful parse */
  const char *file; /* name used in errors (copied into the arena) */
} plan_ydoc;

/* Parses a whole file / buffer. On failure returns a negative status with the
 * last error set to "file:line:col" and a message saying what is wrong and
 * where (PLAN_ESYNTAX for YAML errors, PLAN_ELIMIT for limits, PLAN_ESCHEMA
 * for duplicate keys, non-scalar keys and unknown tags, PLAN_EIO for read
 * errors). On success *doc owns everything; free with plan_ydoc_free. */
int plan_ydoc_parse_file(plan_ydoc *doc, const char *path);
int plan_ydoc_parse_buffer(plan_ydoc *doc, const char *data, size_t len,
                           const char *name);
void plan_ydoc_free(plan_ydoc *doc);

/* Streaming parse, so large documents never exist whole in memory.
 * `streams` is a NULL-terminated list of key paths from the root
 * ("program/ops", "strategies"): each item of those collections (a sequence
 * item, or a mapping entry's key and value) is built in a scratch area and
 * handed to fn as soon as it completes; when fn returns 1 the item is
 * consumed and leaves the tree (its memory is reused for the next item), 0
 * keeps it in the tree, a negative status aborts the parse. fn also hears of
 * every completed entry of the root mapping (path ""), in file order, so a
 * reader can act on `program` before `strategies` arrive. Duplicate keys of
 * a stream mapping are the caller's to check. */
typedef struct plan_yitem {
  const char *path;      /* the stream ("program/ops"), "" for root entries */
  const plan_ynode *key; /* mapping entries; NULL for sequence items */
  const plan_ynode *value;
} plan_yitem;
typedef int (*plan_ystream_fn)(void *ctx, const plan_yitem *item);
int plan_ydoc_parse_stream(plan_ydoc *doc, const char *data, size_t len,
                           const char *name, const char *const *streams,
                           plan_ystream_fn fn, void *ctx);
/* Pipelined streaming (ypipe.h): items and root entries go to the pipe's
 * worker in document order; every streamed item is consumed. */
struct plan_ypipe;
int plan_ydoc_parse_piped(plan_ydoc *doc, const char *data, size_t len,
                          const char *name, const char *const *streams,
                          struct plan_ypipe *pipe);
/* Deep copy of a subtree into an arena (NULL on allocation failure). */
plan_ynode *plan_ynode_copy(plan_arena *a, const plan_ynode *n);
/* The same with another node limit (tests use a small one). */
int plan_ydoc_parse_limited(plan_ydoc *doc, const char *data, size_t len,
                            const char *name, const char *const *streams,
                            plan_ystream_fn fn, void *ctx, size_t max_nodes);

/* Parses only libyaml's event stream, building nothing: the baseline of the
 * load benchmark. Returns PLAN_OK or PLAN_ESYNTAX/PLAN_EIO. */
int plan_ydoc_scan_events(const char *path, size_t *nevents);

/* Lookup helpers for readers. plan_ymap_get is inline: readers call it
 * with a literal key several times per op of a large plan, and inlined the
 * key's length and comparison are constants. */
static inline const plan_ynode *plan_ymap_get(const plan_ynode *map,
                                              const char *key) {
  if (!map || !key || map->kind != PLAN_Y_MAP)
    return NULL;
  size_t klen = strlen(key);
  for (size_t i = 0; i < map->u.map.count; i++) {
    const plan_ynode *k = map->u.map.pairs[i].key;
    if (k->u.scalar.len == klen && memcmp(k->u.scalar.text, key, klen) == 0)
      return map->u.map.pairs[i].value;
  }
  return NULL;
}
bool plan_yscalar_is(const plan_ynode *n, const char *text);
/* A plain scalar that YAML's core schema reads as null: "", "~", "null",
 * "Null", "NULL". */
bool plan_yscalar_is_null(const plan_ynode *n);

#endif
