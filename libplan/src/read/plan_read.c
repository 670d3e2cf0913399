/* Reading a plan document (plan_load and its variants): the parse streamed
 * or pipelined, the version, the program (inline here, by path in
 * plan_program_ref.c) and the mesh, then the decisions (plan_decisions.c)
 * and the other sections (plan_sections.c) in their order. Loading checks
 * well-formedness only; plan_validate judges the decisions. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "read/plan_doc.h"
#include "yaml/ypipe.h"

static const char *const top_keys[] = {
    "libplan",  "program",  "mesh",    "placements", "strategies", "outputs",
    "pipeline", "training", "regions", "overlap",    "provenance", NULL};

/* ---- the document
 * ------------------------------------------------------------- */

static int alloc_per_program(plan_plan *p) {
  const plan_program *prog = p->program;
  p->placements = plan_arena_alloc(&p->arena, sizeof(plan_tensor_pl) *
                                                  (size_t)(prog->ntensors + 1));
  p->out_pl = plan_arena_alloc(&p->arena, sizeof(plan_tensor_pl) *
                                              (size_t)(prog->noutputs + 1));
  p->strategies = plan_arena_alloc(&p->arena, sizeof(plan_strategy) *
                                                  (size_t)(prog->nops + 1));
  if (!p->placements || !p->out_pl || !p->strategies)
    return plan_oom();
  return PLAN_OK;
}

/* Loading streams: the big collections (ops, tensors, strategies,
 * placements) are read item by item while libyaml parses, so a 100k-op plan
 * never exists whole as a YAML tree. Anything that arrives before what it
 * needs (a strategy before the program, say) stays in the tree and is read
 * when the parse is over. */
typedef struct deferred_item {
  const char *path;
  plan_ynode *key, *value;
} deferred_item;

typedef struct load_ctx {
  plan_plan *p;
  plan_reader rd;
  const char *base_dir;
  const char *program_root; /* NULL: the default (plan_read_program_ref) */
  size_t len;               /* the document's size, for the reserve */
  bool have_version, program_done, mesh_done;
  /* Pipelined loads cannot leave an item in the tree for later: items that
   * must wait are copied here instead and read at the same point. */
  bool piped;
  /* the program's hash and name order, computed on a third thread while
   * the parser and the reader go on (see load_program) */
  pthread_t prep_thread;
  bool prep_running;
  int prep_rc;
  plan_error prep_err;
  char prep_msg[1024], prep_file[512];
  plan_arena defer_arena;
  deferred_item *deferred;
  int ndeferred, cap_deferred;
  struct plan_pl_cache pl_cache; /* p->pl_cache while loading */
} load_ctx;

/* An item read later: kept in the tree, or copied aside when pipelined.
 * Returns the callback's answer (0: keep, 1: consumed) or a status. */
static int defer_item(load_ctx *c, const plan_yitem *it) {
  if (!c->piped)
    return 0;
  if (c->ndeferred == c->cap_deferred) {
    int cap = c->cap_deferred ? c->cap_deferred * 2 : 64;
    deferred_item *d = realloc(c->deferred, sizeof *d * (size_t)cap);
    if (!d)
      return plan_oom();
    c->deferred = d;
    c->cap_deferred = cap;
  }
  deferred_item *d = &c->deferred[c->ndeferred];
  d->path = it->path;
  d->key = it->key ? plan_ynode_copy(&c->defer_arena, it->key) : NULL;
  d->value = plan_ynode_copy(&c->defer_arena, it->value);
  if ((it->key && !d->key) || !d->value)
    return plan_oom();
  c->ndeferred++;
  return 1;
}

/* Reads the deferred items of one stream; for strategies, exact names in a
 * first pass and patterns in a second, as read_strategies does. */
static int read_deferred(load_ctx *c, const char *path) {
  int rc = PLAN_OK;
  plan_plan *p = c->p;
  bool strat = !strcmp(path, "strategies");
  for (int pass = 0; !rc && pass < (strat ? 2 : 1); pass++)
    for (int i = 0; !rc && i < c->ndeferred; i++) {
      deferred_item *d = &c->deferred[i];
      if (strcmp(d->path, path))
        continue;
      if (strat && plan_is_glob(d->key->u.scalar.text) != (pass == 1))
        continue;
      if (!strcmp(path, "program/ops") || !strcmp(path, "program/tensors")) {
        plan_reader prd = c->rd;
        prd.arena = &p->program->arena;
        rc = d->key
                 ? plan_program_add_tensor(&prd, p->program, d->key, d->value)
                 : plan_program_add_op(&prd, p->program, d->value);
      } else if (strat) {
        rc = plan_read_strategy_entry(&c->rd, p, d->key, d->value);
      } else {
        rc = plan_read_placement_entry(&c->rd, p, d->key, d->value);
      }
    }
  return rc;
}

static const char *const load_streams[] = {"program/tensors", "program/ops",
                                           "strategies", "placements", NULL};

/* Items a large document may hold, judged by its size: a flow-style op or
 * tensor line of a generated plan takes 100 to 250 bytes. Only a first
 * reserve (the arrays and maps still grow past it); the arrays' generous
 * one costs address space only, the maps' (memory) is nearer the mean. */
#define LOAD_BYTES_PER_ITEM 128
#define LOAD_BYTES_PER_NAME 192

static int ensure_program(load_ctx *c) {
  if (c->p->program)
    return PLAN_OK;
  if (!(c->p->program = plan_program_new(c->p->file)))
    return plan_oom();
  if (c->len >= PLAN_PIPE_MIN_BYTES) {
    size_t items = c->len / LOAD_BYTES_PER_ITEM;
    int n = items < (size_t)INT32_MAX / 8 ? (int)items : INT32_MAX / 8;
    return plan_program_reserve(c->p->program, n, n,
                                c->len / LOAD_BYTES_PER_NAME);
  }
  return PLAN_OK;
}

static void *prepare_main(void *arg) {
  load_ctx *c = arg;
  c->prep_rc = plan_canon_program_prepare(c->p->program);
  if (c->prep_rc) { /* keep the error: it belongs to this thread */
    const plan_error *e = plan_error_last();
    snprintf(c->prep_msg, sizeof c->prep_msg, "%s", e->message);
    snprintf(c->prep_file, sizeof c->prep_file, "%s", e->file);
  }
  return NULL;
}

/* Joins the preparing thread; its error, if any, becomes this thread's. */
static int prepare_join(load_ctx *c) {
  if (!c->prep_running)
    return PLAN_OK;
  pthread_join(c->prep_thread, NULL);
  c->prep_running = false;
  if (c->prep_rc)
    return plan_fail(c->prep_rc, c->prep_file, 0, 0, "%s", c->prep_msg);
  return PLAN_OK;
}

static int load_program(load_ctx *c, const plan_ynode *v) {
  plan_plan *p = c->p;
  int rc;
  if ((rc = plan_rd_expect_map(&c->rd, v, "program")))
    return rc;
  if (plan_ymap_get(v, "path")) {
    p->program_inline = false;
    plan_program_free(p->program);
    p->program = NULL;
    if ((rc =
             plan_read_program_ref(&c->rd, v, p, c->base_dir, c->program_root)))
      return rc;
  } else {
    p->program_inline = true;
    if ((rc = ensure_program(c)))
      return rc;
    plan_reader prd = c->rd;
    prd.arena = &p->program->arena;
    if ((rc = plan_program_read(&prd, v, p->program)) ||
        (rc = plan_program_finish(&prd, p->program)))
      return rc;
    /* Pipelined, the program is final long before the parse ends: its
     * hash and name order (most of any later plan hash) are computed on a
     * third thread meanwhile. It only reads the program; the reader goes
     * on writing the plan's own tables. */
    if (c->piped) {
      if (pthread_create(&c->prep_thread, NULL, prepare_main, c) == 0)
        c->prep_running = true;
      else if ((rc = plan_canon_program_prepare(p->program)))
        return rc;
    }
  }
  if ((rc = alloc_per_program(p)))
    return rc;
  c->program_done = true;
  return PLAN_OK;
}

static int load_mesh(load_ctx *c, const plan_ynode *v) {
  c->p->has_mesh = true;
  c->p->mesh_pos = plan_rd_pos(v);
  c->mesh_done = true;
  return plan_mesh_read(&c->rd, v, &c->p->mesh);
}

static int on_item(void *vctx, const plan_yitem *it) {
  load_ctx *c = vctx;
  plan_plan *p = c->p;
  int rc;
  if (!it->key && !it->path[0])
    return 0;
  if (!it->path[0]) { /* a root entry is complete */
    const char *key = it->key->u.scalar.text;
    if (!strcmp(key, "libplan")) {
      plan_ynode root = {.kind = PLAN_Y_MAP};
      plan_ypair pair = {(plan_ynode *)it->key, (plan_ynode *)it->value};
      root.u.map.pairs = &pair;
      root.u.map.count = 1;
      if ((rc = plan_read_version(&c->rd, &root)))
        return rc;
      p->version_major = c->rd.ver_major;
      p->version_minor = c->rd.ver_minor;
      p->version_pos = c->rd.ver_pos;
      c->have_version = true;
    } else if (c->have_version && !strcmp(key, "program")) {
      if ((rc = load_program(c, it->value)))
        return rc;
    } else if (c->have_version && !strcmp(key, "mesh")) {
      if ((rc = load_mesh(c, it->value)))
        return rc;
    }
    return 0; /* root entries stay in the tree */
  }
  /* A collection of the wrong kind (ops as a mapping, strategies as a
   * sequence) stays in the tree, where the type error is reported; when
   * pipelined its items are dropped (the collection node, left empty,
   * still carries the type and position for that error). */
  bool want_key = strcmp(it->path, "program/ops") != 0;
  if (want_key != (it->key != NULL))
    return c->piped ? 1 : 0;
  if (!c->have_version)
    return defer_item(c, it);
  if (!strcmp(it->path, "program/ops") ||
      !strcmp(it->path, "program/tensors")) {
    if ((rc = ensure_program(c)))
      return rc;
    plan_reader prd = c->rd;
    prd.arena = &p->program->arena;
    rc = it->key ? plan_program_add_tensor(&prd, p->program, it->key, it->value)
                 : plan_program_add_op(&prd, p->program, it->value);
    return rc ? rc : 1;
  }
  if (!c->program_done || !c->mesh_done)
    return defer_item(c, it);
  /* Patterns wait in the tree until every exact name is in (read_rest):
   * an exact name wins over them wherever it is written, also where the
   * pattern's placements would not fit the op or two patterns overlap. */
  if (!strcmp(it->path, "strategies") && plan_is_glob(it->key->u.scalar.text))
    return defer_item(c, it);
  rc = !strcmp(it->path, "strategies")
           ? plan_read_strategy_entry(&c->rd, p, it->key, it->value)
           : plan_read_placement_entry(&c->rd, p, it->key, it->value);
  return rc ? rc : 1;
}

/* What streaming left in the tree. */
static int read_rest(load_ctx *c, const plan_ydoc *doc) {
  plan_plan *p = c->p;
  plan_reader *rd = &c->rd;
  const plan_ynode *root = doc->root, *v;
  int rc;
  if (!c->have_version) {
    if ((rc = plan_read_version(rd, root)))
      return rc;
    p->version_major = rd->ver_major;
    p->version_minor = rd->ver_minor;
    p->version_pos = rd->ver_pos;
  }
  if ((rc = plan_rd_check_doc_start(rd, root, top_keys)) ||
      (rc = plan_rd_check_keys(rd, root, top_keys, "the document", &p->ext)))
    return rc;
  if (!(v = plan_ymap_get(root, "program")))
    return plan_rd_fail(rd, root, PLAN_ESCHEMA,
                        "the document has no 'program'");
  if (!c->program_done && c->ndeferred) {
    if ((rc = ensure_program(c)) ||
        (rc = read_deferred(c, "program/tensors")) ||
        (rc = read_deferred(c, "program/ops")))
      return rc;
  }
  if (!c->program_done && (rc = load_program(c, v)))
    return rc;
  if (!(v = plan_ymap_get(root, "mesh"))) {
    /* A program-only document: nothing else may be present. */
    static const char *const need_mesh[] = {
        "placements", "strategies", "outputs", "pipeline",
        "training",   "regions",    "overlap", NULL};
    for (const char *const *k = need_mesh; *k; k++)
      if (plan_ymap_get(root, *k))
        return plan_rd_fail(rd, root, PLAN_ESCHEMA,
                            "'%s' needs a 'mesh' in the same document", *k);
  } else {
    if (!c->mesh_done && (rc = load_mesh(c, v)))
      return rc;
    const plan_ynode *pl = plan_ymap_get(root, "placements");
    const plan_ynode *st = plan_ymap_get(root, "strategies");
    /* a wrong-kind collection reports its type first, as unpiped */
    if (pl && (rc = plan_rd_expect_map(rd, pl, "placements")))
      return rc;
    if (st && (rc = plan_rd_expect_map(rd, st, "strategies")))
      return rc;
    if ((rc = read_deferred(c, "placements")))
      return rc;
    if (pl && (rc = plan_read_tensor_placements(rd, pl, p)))
      return rc;
    if ((rc = read_deferred(c, "strategies")))
      return rc;
    if (st && (rc = plan_read_strategies(rd, st, p)))
      return rc;
    if ((v = plan_ymap_get(root, "outputs")) &&
        (rc = plan_read_output_placements(rd, v, p)))
      return rc;
  }
  return plan_sections_read(rd, root, p);
}

static plan_plan *plan_new(const char *file) {
  plan_plan *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  plan_arena_init(&p->arena);
  p->file = plan_arena_strdup(&p->arena, file ? file : "");
  p->pipeline.axis = -1;
  if (!p->file) {
    plan_free(p);
    return NULL;
  }
  return p;
}

int plan_load_buffer(plan_plan **out, const char *data, size_t len,
                     const char *name, const char *base_dir) {
  return plan_load_buffer_mode(out, data, len, name, base_dir, PLAN_LOAD_AUTO);
}

int plan_from_root(plan_plan **out, const plan_ynode *root, const char *file,
                   const char *base_dir) {
  *out = NULL;
  plan_plan *p = plan_new(file);
  if (!p)
    return plan_oom();
  load_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  p->pl_cache = &c.pl_cache;
  c.rd.file = p->file;
  c.rd.arena = &p->arena;
  c.base_dir = base_dir;
  plan_arena_init(&c.defer_arena);
  plan_ydoc doc;
  memset(&doc, 0, sizeof doc);
  doc.root = (plan_ynode *)root;
  int rc = read_rest(&c, &doc);
  int prc = prepare_join(&c);
  if (!rc)
    rc = prc;
  free(c.deferred);
  plan_arena_free(&c.defer_arena);
  p->pl_cache = NULL;
  if (rc) {
    plan_free(p);
    return rc;
  }
  *out = p;
  return PLAN_OK;
}

int plan_load_buffer_mode(plan_plan **out, const char *data, size_t len,
                          const char *name, const char *base_dir, int mode) {
  return plan_load_buffer_in(out, data, len, name, base_dir, mode, NULL);
}

int plan_load_buffer_in(plan_plan **out, const char *data, size_t len,
                        const char *name, const char *base_dir, int mode,
                        const char *program_root) {
  *out = NULL;
  plan_error_clear();
  if (!data && len)
    return plan_failf(PLAN_EUSAGE, "plan_load_buffer: NULL data");
  plan_plan *p = plan_new(name);
  if (!p)
    return plan_oom();
  load_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  p->pl_cache = &c.pl_cache;
  c.rd.file = p->file;
  c.rd.arena = &p->arena;
  c.base_dir = base_dir;
  c.program_root = program_root;
  c.len = len;
  plan_arena_init(&c.defer_arena);
  plan_ydoc doc;
  int rc;
  plan_ypipe *pipe = NULL;
  /* Big documents are read on a second thread while libyaml parses; small
   * ones are not worth the thread. */
  if (mode == PLAN_LOAD_PIPED ||
      (mode == PLAN_LOAD_AUTO && len >= PLAN_PIPE_MIN_BYTES))
    if (plan_ypipe_start(&pipe, on_item, &c) != PLAN_OK)
      pipe = NULL; /* no thread here: read sequentially */
  if (pipe) {
    c.piped = true;
    rc = plan_ydoc_parse_piped(&doc, data ? data : "", len, p->file,
                               load_streams, pipe);
    rc = plan_ypipe_finish(pipe, rc);
  } else {
    rc = plan_ydoc_parse_stream(&doc, data ? data : "", len, p->file,
                                load_streams, on_item, &c);
  }
  if (!rc)
    rc = read_rest(&c, &doc);
  /* the hash thread overlapped the rest of the load; it is joined on every
   * path before the program can be freed */
  int prc = prepare_join(&c);
  if (!rc)
    rc = prc;
  plan_ydoc_free(&doc);
  free(c.deferred);
  plan_arena_free(&c.defer_arena);
  p->pl_cache = NULL;
  if (rc) {
    plan_free(p);
    return rc;
  }
  *out = p;
  return PLAN_OK;
}

static int load_mode_of(const plan_load_options *o, int *mode) {
  *mode = PLAN_LOAD_AUTO;
  if (!o)
    return PLAN_OK;
  if (o->version != PLAN_LOAD_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE, "plan_load_options version %u is not %d",
                      o->version, PLAN_LOAD_OPTIONS_VERSION);
  if (o->threads < 0 || o->threads > 1)
    return plan_failf(PLAN_EUSAGE, "plan_load_options.threads is 0 or 1");
  *mode = o->threads == 1 ? PLAN_LOAD_SEQUENTIAL : PLAN_LOAD_AUTO;
  return PLAN_OK;
}

int plan_load_buffer_ext(plan_plan **out, const char *data, size_t len,
                         const char *name, const char *base_dir,
                         const plan_load_options *opts) {
  int mode, rc;
  *out = NULL;
  if ((rc = load_mode_of(opts, &mode)))
    return rc;
  return plan_load_buffer_mode(out, data, len, name, base_dir, mode);
}

int plan_load_buffer_root(plan_plan **out, const char *data, size_t len,
                          const char *name, const char *base_dir,
                          const char *program_root,
                          const plan_load_options *opts) {
  int mode, rc;
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_load_buffer: NULL out");
  *out = NULL;
  if ((rc = load_mode_of(opts, &mode)))
    return rc;
  return plan_load_buffer_in(out, data, len, name, base_dir, mode,
                             program_root);
}

int plan_load(plan_plan **out, const char *path) {
  return plan_load_ext(out, path, NULL);
}

int plan_load_ext(plan_plan **out, const char *path,
                  const plan_load_options *opts) {
  return plan_load_root(out, path, NULL, opts);
}

int plan_load_root(plan_plan **out, const char *path, const char *program_root,
                   const plan_load_options *opts) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_load: NULL out");
  *out = NULL;
  plan_error_clear();
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_load: NULL path");
  char *data = NULL;
  size_t len = 0;
  int rc = plan_read_file(&data, &len, path, 0);
  if (rc)
    return plan_fail(rc, path, 0, 0, "%s", plan_error_last()->message);
  /* Resolve a program path relative to the plan's folder. */
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (slash && (size_t)(slash - path) < sizeof dir) {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    if (!dir[0])
      strcpy(dir, "/");
  } else {
    dir[0] = 0;
  }
  int mode;
  if (!(rc = load_mode_of(opts, &mode)))
    rc = plan_load_buffer_in(out, data, len, path, dir, mode, program_root);
  free(data);
  return rc;
}

void plan_free(plan_plan *p) {
  if (!p)
    return;
  plan_program_free(p->program);
  free(p->uses);
  free(p->glob_index);
  plan_strmap_free(&p->use_keys);
  free(p->intern.slots);
  plan_arena_free(&p->arena);
  free(p);
}

plan_program *plan_take_program(plan_plan *p) {
  plan_program *prog = p->program;
  p->program = NULL;
  return prog;
}

const plan_program *plan_get_program(const plan_plan *p) {
  return p->program;
}
int plan_has_mesh(const plan_plan *p) {
  return p->has_mesh;
}
const char *plan_file(const plan_plan *p) {
  return p->file;
}
