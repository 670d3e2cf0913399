/* The positioned YAML tree (yamldoc.h), built from libyaml's event stream.
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
#include "yaml/yamldoc.h"
#include "yaml/ypipe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <yaml.h>

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
  size_t base; /* index in the child stack of its first child */
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

/* ---- positions and messages -------------------------------------------- */

static int mark_line(yaml_mark_t m) {
  return m.line < (size_t)INT_MAX ? (int)m.line + 1 : INT_MAX;
}

static int mark_col(yaml_mark_t m) {
  return m.column < (size_t)INT_MAX ? (int)m.column + 1 : INT_MAX;
}

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

/* Converts a byte offset into the input to a 1-based line and column, the
 * way libyaml counts them (columns in characters; CR, LF, CRLF, NEL, LS and
 * PS end lines). libyaml gives only a byte offset for reader errors (bad
 * UTF-8, control characters), and the bytes before it are valid UTF-8. */
static void offset_pos(const char *d, size_t len, size_t off, int *line,
                       int *col) {
  const unsigned char *s = (const unsigned char *)d;
  size_t l = 1, c = 1, i = 0;
  if (off > len)
    off = len;
  while (i < off) {
    unsigned char ch = s[i];
    size_t brk = 0;
    if (ch == '\r')
      brk = (i + 1 < len && s[i + 1] == '\n') ? 2 : 1;
    else if (ch == '\n')
      brk = 1;
    else if (ch == 0xC2 && i + 1 < len && s[i + 1] == 0x85)
      brk = 2;
    else if (ch == 0xE2 && i + 2 < len && s[i + 1] == 0x80 &&
             (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
      brk = 3;
    if (brk) {
      l++;
      c = 1;
      i += brk;
      continue;
    }
    if ((ch & 0xC0) != 0x80) /* count characters, not continuation bytes */
      c++;
    i++;
  }
  *line = l < (size_t)INT_MAX ? (int)l : INT_MAX;
  *col = c < (size_t)INT_MAX ? (int)c : INT_MAX;
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

/* Turns the libyaml parser error into the last error. */
static int parser_error(const yaml_parser_t *p, const char *name,
                        const char *data, size_t len) {
  const char *problem = p->problem ? p->problem : "malformed YAML";
  if (p->error == YAML_MEMORY_ERROR)
    return plan_oom();
  if (p->error == YAML_READER_ERROR) {
    int line, col;
    offset_pos(data, len, p->problem_offset, &line, &col);
    if (p->problem_value < 0)
      return plan_fail(PLAN_ESYNTAX, name, line, col, "%s", problem);
    /* libyaml's value is the offending byte for UTF-8 octet problems and
     * the decoded character otherwise. */
    if (strstr(problem, "octet"))
      return plan_fail(PLAN_ESYNTAX, name, line, col, "%s (byte 0x%02X)",
                       problem, (unsigned)p->problem_value);
    return plan_fail(PLAN_ESYNTAX, name, line, col, "%s (U+%04X)", problem,
                     (unsigned)p->problem_value);
  }
  if (p->context)
    return plan_fail(PLAN_ESYNTAX, name, mark_line(p->problem_mark),
                     mark_col(p->problem_mark), "%s (%s)", problem, p->context);
  return plan_fail(PLAN_ESYNTAX, name, mark_line(p->problem_mark),
                   mark_col(p->problem_mark), "%s", problem);
}

/* ---- input ------------------------------------------------------------- */

static int io_fail(const char *path, const char *what, int err) {
  char buf[256];
  if (strerror_r(err, buf, sizeof buf) != 0)
    snprintf(buf, sizeof buf, "error %d", err);
  return plan_fail(PLAN_EIO, path, 0, 0, "cannot %s %s: %s", what, path, buf);
}

/* Reads a whole file (capped at YD_MAX_INPUT) into a malloc'd buffer. Works
 * for pipes and other files whose size stat cannot tell. */
static int read_file(const char *path, char **out, size_t *outlen) {
  struct stat sb;
  char *buf = NULL;
  size_t len = 0, cap;
  int fd;

  *out = NULL;
  *outlen = 0;
  if (!path)
    return plan_failf(PLAN_EUSAGE, "file path is NULL");
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return io_fail(path, "open", errno);
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return io_fail(path, "read", err);
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    return io_fail(path, "read", EISDIR);
  }
  if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > YD_MAX_INPUT) {
    close(fd);
    return plan_fail(PLAN_ELIMIT, path, 0, 0,
                     "%s is larger than the 1 GiB input limit", path);
  }
  /* One byte more than the size, so that reaching EOF needs no regrowth. */
  cap =
      (S_ISREG(sb.st_mode) && sb.st_size > 0) ? (size_t)sb.st_size + 1 : 65536;
  buf = malloc(cap);
  if (!buf) {
    close(fd);
    return plan_oom();
  }
  for (;;) {
    ssize_t n;
    if (len == cap) {
      size_t ncap = cap * 2;
      char *nbuf;
      if (ncap > YD_MAX_INPUT + 1)
        ncap = YD_MAX_INPUT + 1;
      if (ncap <= len) { /* already holds more than the limit allows */
        free(buf);
        close(fd);
        return plan_fail(PLAN_ELIMIT, path, 0, 0,
                         "%s is larger than the 1 GiB input limit", path);
      }
      nbuf = realloc(buf, ncap);
      if (!nbuf) {
        free(buf);
        close(fd);
        return plan_oom();
      }
      buf = nbuf;
      cap = ncap;
    }
    n = read(fd, buf + len, cap - len);
    if (n < 0) {
      int err = errno;
      if (err == EINTR)
        continue;
      free(buf);
      close(fd);
      return io_fail(path, "read", err);
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  if (len > YD_MAX_INPUT) {
    free(buf);
    return plan_fail(PLAN_ELIMIT, path, 0, 0,
                     "%s is larger than the 1 GiB input limit", path);
  }
  *out = buf;
  *outlen = len;
  return PLAN_OK;
}

/* Prepares a parser over data. The encoding is fixed to UTF-8 (plans are
 * UTF-8; libyaml would otherwise switch to UTF-16 on a BOM, and its byte
 * offsets would no longer match our line counting), and a UTF-8 BOM is
 * stripped here because a forced-encoding libyaml would count it as a
 * column. Returns PLAN_OK, or an error for UTF-16 input. */
static int parser_open(yaml_parser_t *p, const char **data, size_t *len,
                       const char *name) {
  const unsigned char *s = (const unsigned char *)*data;
  if (*len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) {
    *data += 3;
    *len -= 3;
  } else if (*len >= 2 && ((s[0] == 0xFF && s[1] == 0xFE) ||
                           (s[0] == 0xFE && s[1] == 0xFF))) {
    return plan_fail(PLAN_ESYNTAX, name, 1, 1,
                     "input is UTF-16; YAML input must be UTF-8");
  }
  if (*len > YD_MAX_INPUT)
    return plan_fail(PLAN_ELIMIT, name, 0, 0,
                     "input is larger than the 1 GiB limit");
  if (!yaml_parser_initialize(p))
    return plan_oom();
  yaml_parser_set_encoding(p, YAML_UTF8_ENCODING);
  /* libyaml asserts a non-NULL input even when it is empty. */
  yaml_parser_set_input_string(p, (const unsigned char *)(*len ? *data : ""),
                               *len);
  return PLAN_OK;
}

/* ---- tree building ----------------------------------------------------- */

static plan_ynode *new_node(yd_state *st, plan_ynode_kind kind, yaml_mark_t m) {
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

/* Copies scalar text into the arena, NUL-terminated. */
static char *copy_text(yd_state *st, const char *s, size_t len) {
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

static int push(yd_state *st, plan_ynode *n) {
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
static int attach(yd_state *st, plan_ynode *n, yaml_mark_t m) {
  yd_frame *f;
  if (st->depth == 0) {
    st->doc->root = n;
    return PLAN_OK;
  }
  f = &st->frames[st->depth - 1];
  if (f->node->kind == PLAN_Y_MAP && (st->top - f->base) % 2 == 0) {
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

/* ---- streaming ------------------------------------------------------------
 */

/* A node is about to start: if it begins an item of a stream, build that
 * item in the scratch arena. */
static void item_begin(yd_state *st) {
  if (st->item_depth || st->depth == 0)
    return;
  yd_frame *f = &st->frames[st->depth - 1];
  if (f->role != YD_STREAM)
    return;
  if (f->node->kind == PLAN_Y_MAP && (st->top - f->base) % 2 != 0)
    return; /* a value: the item began with its key */
  st->cur = &st->scratch;
  st->item_depth = st->depth;
}

static void scratch_reset(yd_state *st) {
  plan_arena_recycle(&st->scratch_arena);
  /* Start small again: a reset zeroes what was carved, so an item should
   * carve about what it uses. */
  st->scratch.slab_left = 0;
  st->scratch.chunk_left = 0;
  st->scratch.slab_next = YD_SLAB_MIN;
  st->scratch.chunk_next = YD_CHUNK_MIN;
  st->cur = &st->main;
  st->item_depth = 0;
}

/* Copies a subtree out of scratch into the document's arena. */
static plan_ynode *copy_tree(yd_state *st, const plan_ynode *n) {
  yaml_mark_t m = {0, 0, 0};
  plan_ynode *c = new_node(st, n->kind, m);
  if (!c)
    return NULL;
  c->line = n->line;
  c->col = n->col;
  if (n->kind == PLAN_Y_SCALAR) {
    c->u.scalar = n->u.scalar;
    if (!(c->u.scalar.text = copy_text(st, n->u.scalar.text, n->u.scalar.len)))
      return NULL;
  } else if (n->kind == PLAN_Y_SEQ) {
    c->u.seq.count = n->u.seq.count;
    if (n->u.seq.count) {
      c->u.seq.items = plan_arena_alloc(st->cur->arena,
                                        n->u.seq.count * sizeof(plan_ynode *));
      if (!c->u.seq.items)
        return NULL;
      for (size_t i = 0; i < n->u.seq.count; i++)
        if (!(c->u.seq.items[i] = copy_tree(st, n->u.seq.items[i])))
          return NULL;
    }
  } else {
    c->u.map.count = n->u.map.count;
    if (n->u.map.count) {
      c->u.map.pairs =
          plan_arena_alloc(st->cur->arena, n->u.map.count * sizeof(plan_ypair));
      if (!c->u.map.pairs)
        return NULL;
      for (size_t i = 0; i < n->u.map.count; i++)
        if (!(c->u.map.pairs[i].key = copy_tree(st, n->u.map.pairs[i].key)) ||
            !(c->u.map.pairs[i].value = copy_tree(st, n->u.map.pairs[i].value)))
          return NULL;
    }
  }
  return c;
}

/* A node has just completed. If it completes a stream item, hand the item
 * to the caller: consumed items leave the tree, kept ones move to the
 * document's arena. Completed entries of the root mapping are reported
 * too. */
/* Pipelined: every item is handed over (streamed ones are consumed: the
 * worker owns them now), and items keep accumulating in the pipeline's
 * batch arena instead of a recycled scratch. */
static int item_piped(yd_state *st, bool streamed, bool is_map) {
  plan_yitem item;
  yd_frame *f = &st->frames[st->depth - 1];
  item.path = f->path;
  if (streamed) /* the frame's path buffer changes later: use the stream's */
    for (const char *const *sp = st->streams; *sp; sp++)
      if (!strcmp(*sp, f->path))
        item.path = *sp;
  if (!streamed)
    item.path = "";
  item.key = is_map ? st->stack[st->top - 2] : NULL;
  item.value = st->stack[st->top - 1];
  plan_arena *before = plan_ypipe_arena(st->pipe);
  int rc = plan_ypipe_push(st->pipe, &item);
  if (rc < 0)
    return rc;
  if (streamed) {
    st->top -= is_map ? 2 : 1;
    st->nodes -= st->item_nodes;
    st->cur = &st->main;
    st->item_depth = 0;
    if (plan_ypipe_arena(st->pipe) != before) { /* a new batch */
      st->scratch.arena = plan_ypipe_arena(st->pipe);
      st->scratch.slab_left = 0;
      st->scratch.chunk_left = 0;
      st->scratch.slab_next = YD_SLAB_MIN;
      st->scratch.chunk_next = YD_CHUNK_MIN;
    }
  }
  st->item_nodes = 0;
  return PLAN_OK;
}

static int item_end(yd_state *st) {
  if (st->depth == 0 || (!st->fn && !st->pipe))
    return PLAN_OK;
  yd_frame *f = &st->frames[st->depth - 1];
  bool is_map = f->node->kind == PLAN_Y_MAP;
  size_t n = st->top - f->base;
  if (is_map && n % 2 != 0)
    return PLAN_OK; /* only a key so far */
  bool streamed = st->item_depth == st->depth;
  if (!streamed && f->role != YD_ROOT)
    return PLAN_OK;
  if (st->pipe)
    return item_piped(st, streamed, is_map);
  plan_yitem item;
  item.path = f->path;
  item.key = is_map ? st->stack[st->top - 2] : NULL;
  item.value = st->stack[st->top - 1];
  int rc = st->fn(st->ctx, &item);
  if (rc < 0)
    return rc;
  if (rc == 1) {
    st->top -= is_map ? 2 : 1;
    st->nodes -= st->item_nodes;
  } else if (streamed) {
    st->cur = &st->main;
    for (size_t k = st->top - (is_map ? 2 : 1); k < st->top; k++)
      if (!(st->stack[k] = copy_tree(st, st->stack[k])))
        return plan_oom();
  }
  if (streamed)
    scratch_reset(st);
  st->item_nodes = 0;
  return PLAN_OK;
}

/* The role and path of a collection opening as the newest child of the
 * innermost frame. */
static void frame_role(yd_state *st, yd_frame *nf, plan_ynode_kind kind) {
  nf->role = YD_PLAIN;
  nf->path[0] = 0;
  if (!st->fn && !st->pipe)
    return;
  if (st->depth == 0) {
    nf->role = kind == PLAN_Y_MAP ? YD_ROOT : YD_PLAIN;
    return;
  }
  const yd_frame *f = &st->frames[st->depth - 1];
  if ((f->role != YD_ROOT && f->role != YD_PREFIX) ||
      f->node->kind != PLAN_Y_MAP)
    return;
  const plan_ynode *key = st->stack[st->top - 2];
  size_t fl = strlen(f->path), kl = key->u.scalar.len;
  size_t pl = fl + (fl ? 1 : 0) + kl;
  if (pl >= sizeof nf->path)
    return; /* deeper than any stream */
  memcpy(nf->path, f->path, fl);
  if (fl)
    nf->path[fl] = '/';
  memcpy(nf->path + pl - kl, key->u.scalar.text, kl);
  nf->path[pl] = 0;
  for (const char *const *sp = st->streams; sp && *sp; sp++) {
    if (!strcmp(*sp, nf->path)) {
      nf->role = YD_STREAM;
      return;
    }
    if (!strncmp(*sp, nf->path, pl) && (*sp)[pl] == '/')
      nf->role = YD_PREFIX;
  }
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
static int count_node(yd_state *st, yaml_mark_t m) {
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
  if ((rc = check_tag(st, ev->data.scalar.tag, PLAN_Y_SCALAR, m, &tag)))
    return rc;
  if (len > PLAN_YAML_MAX_SCALAR)
    return fail_at(st, PLAN_ELIMIT, m,
                   "scalar of %zu bytes is longer than the limit of %u bytes",
                   len, (unsigned)PLAN_YAML_MAX_SCALAR);
  /* A raw NUL is refused by libyaml's reader; this catches the escapes
   * "\0", "\x00" and "\u0000" of double-quoted scalars, which would
   * silently cut the C string. */
  if (len && memchr(value, 0, len))
    return fail_at(st, PLAN_ESYNTAX, m, "scalar contains a NUL character");
  if ((rc = count_node(st, m)))
    return rc;
  item_begin(st);
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
  if ((rc = check_tag(st, tag, kind, m, &unused)))
    return rc;
  if (st->depth >= PLAN_YAML_MAX_DEPTH)
    return fail_at(st, PLAN_ELIMIT, m, "nesting deeper than %d levels",
                   PLAN_YAML_MAX_DEPTH);
  if ((rc = count_node(st, m)))
    return rc;
  item_begin(st);
  if (!(n = new_node(st, kind, m)))
    return plan_oom();
  if ((rc = attach(st, n, m)))
    return rc;
  f = &st->frames[st->depth];
  frame_role(st, f, kind);
  st->depth++;
  f->node = n;
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

static int build(yd_state *st) {
  bool done = false;
  int rc = PLAN_OK;
  while (!done && rc == PLAN_OK) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&st->parser, &ev))
      return parser_error(&st->parser, st->name, st->data, st->len);
    rc = on_event(st, &ev, &done);
    yaml_event_delete(&ev);
  }
  return rc;
}

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

  rc = parser_open(&st->parser, &data, &len, name);
  if (rc != PLAN_OK) {
    free(st->stack);
    free(st);
    return rc;
  }
  st->data = data;
  st->len = len;
  doc->file = plan_arena_strdup(&doc->arena, name ? name : "");
  rc = doc->file ? build(st) : plan_oom();

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
  if ((rc = read_file(path, &buf, &len)) != PLAN_OK)
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

int plan_ydoc_scan_events(const char *path, size_t *nevents) {
  yaml_parser_t parser;
  const char *data;
  char *buf;
  size_t len, n = 0;
  int rc;

  if (nevents)
    *nevents = 0;
  if ((rc = read_file(path, &buf, &len)) != PLAN_OK)
    return rc;
  data = buf ? buf : "";
  if ((rc = parser_open(&parser, &data, &len, path)) != PLAN_OK) {
    free(buf);
    return rc;
  }
  for (;;) {
    yaml_event_t ev;
    yaml_event_type_t type;
    if (!yaml_parser_parse(&parser, &ev)) {
      rc = parser_error(&parser, path, data, len);
      break;
    }
    type = ev.type;
    yaml_event_delete(&ev);
    n++;
    if (type == YAML_STREAM_END_EVENT)
      break;
  }
  yaml_parser_delete(&parser);
  free(buf);
  if (rc == PLAN_OK && nevents)
    *nevents = n;
  return rc;
}

const plan_ynode *plan_ymap_get(const plan_ynode *map, const char *key) {
  size_t klen;
  if (!map || !key || map->kind != PLAN_Y_MAP)
    return NULL;
  klen = strlen(key);
  for (size_t i = 0; i < map->u.map.count; i++) {
    const plan_ynode *k = map->u.map.pairs[i].key;
    if (k->u.scalar.len == klen && memcmp(k->u.scalar.text, key, klen) == 0)
      return map->u.map.pairs[i].value;
  }
  return NULL;
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
    if (!(c->u.scalar.text = plan_arena_strndup(a, n->u.scalar.text,
                                                n->u.scalar.len)))
      return NULL;
  } else if (n->kind == PLAN_Y_SEQ) {
    if (n->u.seq.count) {
      c->u.seq.items = plan_arena_alloc(a, n->u.seq.count * sizeof(plan_ynode *));
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
      if (!(c->u.map.pairs[i].key = plan_ynode_copy(a, n->u.map.pairs[i].key)) ||
          !(c->u.map.pairs[i].value =
                plan_ynode_copy(a, n->u.map.pairs[i].value)))
        return NULL;
  }
  return c;
}
