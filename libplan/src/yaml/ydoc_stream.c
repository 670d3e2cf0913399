/* Streaming in the YAML tree builder (ydoc_state.h): the items of the
 * chosen collections are built in a scratch arena and handed to the
 * caller's callback (or the pipeline's worker) as each completes; consumed
 * ones leave the tree and their memory serves the next item. Completed
 * entries of the root mapping are reported too. */
#include <string.h>

#include "yaml/ydoc_state.h"
#include "yaml/ypipe.h"

/* A node is about to start: if it begins an item of a stream, build that
 * item in the scratch arena. */
void plan_yd_item_begin(yd_state *st) {
  if (st->item_depth || st->depth == 0)
    return;
  yd_frame *f = &st->frames[st->depth - 1];
  if (f->role != YD_STREAM)
    return;
  if (f->kind == PLAN_Y_MAP && (st->top - f->base) % 2 != 0)
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
  plan_ynode *c = plan_yd_new_node(st, n->kind, m);
  if (!c)
    return NULL;
  c->line = n->line;
  c->col = n->col;
  if (n->kind == PLAN_Y_SCALAR) {
    c->u.scalar = n->u.scalar;
    if (!(c->u.scalar.text =
              plan_yd_copy_text(st, n->u.scalar.text, n->u.scalar.len)))
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

/* A node has just completed. If it completes a stream item, hand the item
 * to the caller: consumed items leave the tree, kept ones move to the
 * document's arena. Completed entries of the root mapping are reported
 * too. */
int plan_yd_item_end(yd_state *st) {
  if (st->depth == 0 || (!st->fn && !st->pipe))
    return PLAN_OK;
  yd_frame *f = &st->frames[st->depth - 1];
  bool is_map = f->kind == PLAN_Y_MAP;
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
void plan_yd_frame_role(yd_state *st, yd_frame *nf, plan_ynode_kind kind) {
  nf->role = YD_PLAIN;
  nf->path[0] = 0;
  if (!st->fn && !st->pipe)
    return;
  if (st->depth == 0) {
    nf->role = kind == PLAN_Y_MAP ? YD_ROOT : YD_PLAIN;
    return;
  }
  const yd_frame *f = &st->frames[st->depth - 1];
  if ((f->role != YD_ROOT && f->role != YD_PREFIX) || f->kind != PLAN_Y_MAP)
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
