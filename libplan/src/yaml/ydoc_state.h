/* The state of the YAML tree builder (yamldoc.h), shared by its files:
 * ydoc_input.c (the input and libyaml's parser and errors), ydoc_build.c
 * (events to nodes, with the limits), ydoc_stream.c (stream items handed
 * to the caller) and yamldoc.c (the entry points). */
#ifndef LIBPLAN_YDOC_STATE_H
#define LIBPLAN_YDOC_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "yaml/yamldoc.h"

/* Largest input read or parsed. It also keeps every line and column below
 * INT_MAX, so the int positions of plan_ynode cannot overflow. */
#define YD_MAX_INPUT ((size_t)1 << 30)

/* Mappings up to this many keys are checked for duplicates by a linear
 * scan; beyond it a hash table is built. */
#define YD_LINEAR_KEYS 16

/* Node slabs grow from YD_SLAB_MIN to YD_SLAB_MAX nodes, text chunks from
 * YD_CHUNK_MIN to YD_CHUNK_MAX bytes: small documents stay small, large ones
 * make few arena calls. Text needing more than a quarter of the current
 * chunk size gets its own arena allocation, so a chunk is never abandoned
 * with more than a quarter of it unused (and text always fits a chunk). */
#define YD_SLAB_MIN 16
#define YD_SLAB_MAX 4096
#define YD_CHUNK_MIN 256
#define YD_CHUNK_MAX 65536

#define YD_CORE_TAG "tag:yaml.org,2002:"

/* One slot of a mapping's key table: the key's 32-bit hash, and the index of
 * its pair within the mapping plus one (0 marks an empty slot). */
typedef struct yd_slot {
  uint32_t hash;
  uint32_t pair;
} yd_slot;

typedef struct yd_keytab {
  yd_slot *slots; /* NULL until the mapping passes YD_LINEAR_KEYS keys */
  size_t mask;    /* capacity - 1; capacity is a power of two */
  size_t count;
} yd_keytab;

/* Where new nodes and text go: the document's arena, or the scratch arena
 * that holds one streamed item at a time. */
typedef struct yd_cursor {
  plan_arena *arena;
  plan_ynode *slab;
  size_t slab_left, slab_next;
  char *chunk;
  size_t chunk_left, chunk_next;
} yd_cursor;

/* What an open collection is to a streaming caller. */
enum {
  YD_PLAIN = 0,  /* nothing: its children are built into the tree */
  YD_ROOT = 1,   /* the root mapping: fn hears of each completed entry */
  YD_PREFIX = 2, /* on the way to a stream: its path prefixes one */
  YD_STREAM = 3  /* a stream: each item is built in scratch, handed to fn,
                    and dropped when fn consumes it */
};

/* An open collection. */
typedef struct yd_frame {
  plan_ynode *node;
  plan_ynode_kind kind; /* node->kind, without following the pointer */
  size_t base;          /* index in the child stack of its first child */
  yd_keytab keys;
  int role;       /* YD_* */
  char path[128]; /* "program/ops": keys from the root, for streams */
} yd_frame;

typedef struct yd_state {
  plan_ydoc *doc;
  const char *name; /* the caller's name for errors; NULL for none */
  const char *data; /* the text given to libyaml (BOM removed) */
  size_t len;
  yaml_parser_t parser;

  plan_ynode **stack; /* children of the open collections */
  size_t top, cap;
  yd_frame frames[PLAN_YAML_MAX_DEPTH];
  int depth;

  size_t nodes, max_nodes;
  size_t item_nodes; /* nodes of the stream item being built */
  yd_cursor main, scratch, *cur;
  plan_arena scratch_arena;
  int item_depth; /* depth of the stream whose item is in scratch; 0: none */

  const char *const *streams; /* NULL-terminated paths, or NULL */
  struct plan_ypipe *pipe;    /* items go to a worker thread (ypipe.h) */
  plan_ystream_fn fn;
  void *ctx;

  uint64_t seed;
  int ndocs;
} yd_state;

static inline int mark_line(yaml_mark_t m) {
  return m.line < (size_t)INT_MAX ? (int)m.line + 1 : INT_MAX;
}

static inline int mark_col(yaml_mark_t m) {
  return m.column < (size_t)INT_MAX ? (int)m.column + 1 : INT_MAX;
}

/* ---- input (ydoc_input.c) ------------------------------------------------ */

/* Reads a whole file (capped at YD_MAX_INPUT) into a malloc'd buffer. Works
 * for pipes and other files whose size stat cannot tell. */
int plan_yd_read_file(const char *path, char **out, size_t *outlen);
/* Prepares a parser over data, as UTF-8 with a BOM stripped (*data and
 * *len move past it). Returns PLAN_OK, or an error for UTF-16 input. */
int plan_yd_parser_open(yaml_parser_t *p, const char **data, size_t *len,
                        const char *name);
/* Turns the libyaml parser error into the last error. */
int plan_yd_parser_error(const yaml_parser_t *p, const char *name,
                         const char *data, size_t len);

/* ---- tree building (ydoc_build.c) ---------------------------------------- */

/* A new node, or text NUL-terminated, from the current cursor (the
 * document's arena or the scratch). NULL when memory is short. */
plan_ynode *plan_yd_new_node(yd_state *st, plan_ynode_kind kind, yaml_mark_t m);
char *plan_yd_copy_text(yd_state *st, const char *s, size_t len);
/* Reads every event of the parser into the tree. */
int plan_yd_build(yd_state *st);

/* ---- streaming (ydoc_stream.c) ------------------------------------------- */

/* A node is about to start: if it begins an item of a stream, build that
 * item in the scratch arena. */
void plan_yd_item_begin(yd_state *st);
/* A node has just completed: hands a completed stream item or root entry
 * to the caller. */
int plan_yd_item_end(yd_state *st);
/* The role and path of a collection opening as the newest child of the
 * innermost frame. */
void plan_yd_frame_role(yd_state *st, yd_frame *nf, plan_ynode_kind kind);

#endif
