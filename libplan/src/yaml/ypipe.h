/* A two-stage pipeline for streamed YAML: the parsing thread builds stream
 * items (ydoc_stream.c) into batch arenas and hands them over; a worker thread
 * runs the reader callback on them in document order. On two or more cores
 * reading a large plan then costs about as much as parsing it.
 *
 * Order and errors are as in a sequential parse: items reach the callback
 * in document order, and the error reported is the first one in document
 * order (a callback failure on an item wins over a parse error after it).
 * The worker's error is raised again in the caller's thread, where
 * plan_error_last() reads it. */
#ifndef LIBPLAN_YPIPE_H
#define LIBPLAN_YPIPE_H

#include "yaml/yamldoc.h"

typedef struct plan_ypipe plan_ypipe;

/* Starts the worker. PLAN_OK, or a negative status when no thread could be
 * made (callers then parse sequentially). */
int plan_ypipe_start(plan_ypipe **out, plan_ystream_fn fn, void *ctx);

/* The arena to build the next item in. It changes after a push that filled
 * the current batch, so ask again after every push. */
plan_arena *plan_ypipe_arena(plan_ypipe *p);

/* Hands an item to the worker (its nodes live in plan_ypipe_arena, or in
 * the document's arena for root entries). Blocks while the worker is far
 * behind. Returns PLAN_OK, or a negative status once the worker has failed:
 * the parse should then stop. */
int plan_ypipe_push(plan_ypipe *p, const plan_yitem *item);

/* Waits until the worker has taken and finished every item pushed so far
 * (it may still read them until then). Used before memory that root
 * entries live in is freed. */
void plan_ypipe_drain(plan_ypipe *p);

/* Ends the pipeline: lets the worker finish the items it has, joins it and
 * frees everything. parse_rc is the parser's own result. Returns the first
 * error in document order (re-raised in this thread) or PLAN_OK. */
int plan_ypipe_finish(plan_ypipe *p, int parse_rc);

#endif
