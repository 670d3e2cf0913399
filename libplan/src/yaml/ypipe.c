/* The parse/read pipeline of ypipe.h: a bounded queue of items and a small
 * ring of batch arenas, guarded by one mutex. The parser fills a batch with
 * items, seals it with a marker when it is full and moves to the next free
 * one; the worker frees a batch when it reaches its marker, so a batch is
 * never recycled while the worker may still read it. */
#include "yaml/ypipe.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YP_BATCHES 8
#define YP_BATCH_BYTES ((size_t)256 * 1024)
#define YP_QUEUE 16384
#define YP_CHUNK                                                               \
  512 /* items handed over per lock: a wake-up per item would                  \
         cost more than the item */

typedef struct yp_item {
  plan_yitem item;
  int batch_end; /* >= 0: a marker that closes that batch */
} yp_item;

struct plan_ypipe {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t can_push, can_pop, batch_free;
  yp_item q[YP_QUEUE];
  size_t head, tail; /* popped at head, pushed at tail */
  bool done;         /* no more items */
  bool failed;       /* the callback failed; later items are skipped */
  int worker_rc;
  int err_line, err_col;
  char err_msg[1024], err_file[512];
  plan_arena batch[YP_BATCHES];
  bool busy[YP_BATCHES]; /* sealed, not yet released by the worker */
  int cur;
  yp_item local[YP_CHUNK]; /* the parser's items not yet handed over */
  int nlocal;
  plan_ystream_fn fn;
  void *ctx;
};

static void *worker(void *arg) {
  plan_ypipe *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->head == p->tail && !p->done)
      pthread_cond_wait(&p->can_pop, &p->mu);
    if (p->head == p->tail)
      break; /* done and drained */
    /* take every item queued so far, then work without the lock; the
     * parser does not overwrite them before head moves past */
    size_t from = p->head, to = p->tail;
    bool failed = p->failed;
    pthread_mutex_unlock(&p->mu);
    size_t done = from;
    int rc = PLAN_OK;
    for (; done < to; done++) {
      const yp_item *it = &p->q[done % YP_QUEUE];
      if (it->batch_end >= 0 || failed)
        continue;
      if ((rc = p->fn(p->ctx, &it->item)) < 0)
        break;
    }
    const plan_error *e = rc < 0 ? plan_error_last() : NULL;
    pthread_mutex_lock(&p->mu);
    if (rc < 0) {
      /* the error lives in this thread: keep a copy for the caller's */
      p->failed = true;
      p->worker_rc = rc;
      p->err_line = e->line;
      p->err_col = e->column;
      snprintf(p->err_msg, sizeof p->err_msg, "%s", e->message);
      snprintf(p->err_file, sizeof p->err_file, "%s", e->file);
      done = to; /* the rest is skipped, but its batches released */
    }
    for (size_t i = from; i < to; i++) {
      const yp_item *it = &p->q[i % YP_QUEUE];
      if (it->batch_end >= 0)
        p->busy[it->batch_end] = false;
    }
    p->head = to;
    pthread_cond_broadcast(&p->can_push);
    pthread_cond_broadcast(&p->batch_free);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int plan_ypipe_start(plan_ypipe **out, plan_ystream_fn fn, void *ctx) {
  *out = NULL;
  plan_ypipe *p = calloc(1, sizeof *p);
  if (!p)
    return plan_oom();
  p->fn = fn;
  p->ctx = ctx;
  for (int i = 0; i < YP_BATCHES; i++)
    plan_arena_init(&p->batch[i]);
  if (pthread_mutex_init(&p->mu, NULL)) {
    free(p);
    return plan_failf(PLAN_EUNSUPPORTED, "no mutex for the load pipeline");
  }
  bool c1 = !pthread_cond_init(&p->can_push, NULL);
  bool c2 = !pthread_cond_init(&p->can_pop, NULL);
  bool c3 = !pthread_cond_init(&p->batch_free, NULL);
  if (!c1 || !c2 || !c3 || pthread_create(&p->thread, NULL, worker, p)) {
    if (c1)
      pthread_cond_destroy(&p->can_push);
    if (c2)
      pthread_cond_destroy(&p->can_pop);
    if (c3)
      pthread_cond_destroy(&p->batch_free);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return plan_failf(PLAN_EUNSUPPORTED, "no thread for the load pipeline");
  }
  *out = p;
  return PLAN_OK;
}

plan_arena *plan_ypipe_arena(plan_ypipe *p) {
  return &p->batch[p->cur];
}

/* Hands the locally gathered items to the worker; the mutex is held.
 * Waits for room. False once the worker has failed. */
static bool flush(plan_ypipe *p) {
  while (p->tail - p->head + (size_t)p->nlocal > YP_QUEUE && !p->failed)
    pthread_cond_wait(&p->can_push, &p->mu);
  if (p->failed)
    return false;
  for (int i = 0; i < p->nlocal; i++)
    p->q[(p->tail + (size_t)i) % YP_QUEUE] = p->local[i];
  p->tail += (size_t)p->nlocal;
  p->nlocal = 0;
  pthread_cond_signal(&p->can_pop);
  return true;
}

int plan_ypipe_push(plan_ypipe *p, const plan_yitem *item) {
  yp_item it = {*item, -1};
  p->local[p->nlocal++] = it;
  /* The current batch is owned by the parser alone until sealed, so its
   * size is read without the worker racing on it. */
  bool seal = p->batch[p->cur].used_total > YP_BATCH_BYTES;
  if (p->nlocal < YP_CHUNK - 1 && !seal)
    return PLAN_OK;
  pthread_mutex_lock(&p->mu);
  if (seal) {
    yp_item mark = {{NULL, NULL, NULL}, p->cur};
    p->busy[p->cur] = true;
    p->local[p->nlocal++] = mark;
  }
  bool ok = flush(p);
  if (ok && seal) {
    int next = (p->cur + 1) % YP_BATCHES;
    /* the worker releases batches even after a failure, so this ends */
    while (p->busy[next])
      pthread_cond_wait(&p->batch_free, &p->mu);
    p->cur = next;
    /* released by the worker: nothing reads it any more */
    plan_arena_recycle(&p->batch[next]);
  }
  int rc = p->failed ? p->worker_rc : PLAN_OK;
  pthread_mutex_unlock(&p->mu);
  return rc;
}

void plan_ypipe_drain(plan_ypipe *p) {
  pthread_mutex_lock(&p->mu);
  if (p->nlocal)
    flush(p);
  while (p->head != p->tail)
    pthread_cond_wait(&p->can_push, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

int plan_ypipe_finish(plan_ypipe *p, int parse_rc) {
  pthread_mutex_lock(&p->mu);
  if (p->nlocal)
    flush(p); /* what the parser gathered last (none if the worker failed) */
  p->done = true;
  pthread_cond_signal(&p->can_pop);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  int rc = parse_rc;
  if (p->failed) /* its item came before whatever the parser reached */
    rc = plan_fail(p->worker_rc, p->err_file, p->err_line, p->err_col, "%s",
                   p->err_msg);
  for (int i = 0; i < YP_BATCHES; i++)
    plan_arena_free(&p->batch[i]);
  pthread_cond_destroy(&p->can_push);
  pthread_cond_destroy(&p->can_pop);
  pthread_cond_destroy(&p->batch_free);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return rc;
}
