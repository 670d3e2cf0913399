/* The static happens-before check of a lowered program's streams
 * (spec/lowered-format.md, "Streams"). Steps run in order on the compute
 * stream; a collective with a stream is started there and completes at
 * some point before the WAIT on what it writes. So, scanning in order
 * with the set of started, unwaited collectives:
 * - a step that reads a buffer a collective in flight writes reads it
 *   before its wait (a collective started later on the same stream may:
 *   a stream runs its collectives in order);
 * - a step that writes a buffer a collective in flight reads or writes
 *   races it (the chunks of one decomposed collective excepted: each
 *   writes its own slice);
 * - a wait with no collective in flight writing its buffer has no start,
 *   and a start never waited leaves its result unusable.
 * Run when a lowered file is read and on every lowered program before it
 * is verified. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/lowered.h"
#include "lower/lower.h"

typedef struct hb {
  const plan_lowered *l;
  int *dst, *src;  /* per buffer: collectives in flight writing / reading it */
  int *dst_stream; /* per buffer: the stream of those writing it */
  int *last_start; /* per buffer: the last start writing it */
  int *src_start;  /* per buffer: the last start reading it */
  int *open;       /* started steps, -1 once waited */
  int nopen;
} hb;

static const char *buf_name(const plan_lowered *l, int b, char *buf,
                            size_t size) {
  int ord = 0;
  for (int i = 0; i < b; i++)
    ord += l->bufs[i].tensor == l->bufs[b].tensor;
  snprintf(buf, size, "%s@%d",
           l->plan->program->tensors[l->bufs[b].tensor].name, ord);
  return buf;
}

static const char *step_name(const plan_lowered *l, int i, char *buf,
                             size_t size) {
  const plan_lstep *s = &l->steps[i];
  if (s->kind == PLAN_LSTEP_OP)
    snprintf(buf, size, "step %d (op '%s')", i,
             l->plan->program->ops[s->op].name);
  else if (s->kind == PLAN_LSTEP_REDIST)
    snprintf(buf, size, "step %d (%s)", i,
             plan_redist_kind_name(s->redist.kind));
  else
    snprintf(buf, size, "step %d", i);
  return buf;
}

static bool is_start(const plan_lstep *s) {
  return s->kind == PLAN_LSTEP_REDIST && s->stream > 0;
}

int plan_lowered_check_streams(const plan_lowered *l, int *bad_step, char *why,
                               size_t why_size) {
  if (!l || !bad_step || !why || !why_size)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_check_streams: NULL argument");
  *bad_step = -1;
  why[0] = 0;
  bool any = false;
  for (int i = 0; i < l->nsteps && !any; i++)
    any = l->steps[i].stream > 0 || l->steps[i].kind == PLAN_LSTEP_WAIT;
  if (!any)
    return PLAN_OK;
  size_t nb = (size_t)l->nbufs + 1;
  hb h = {l,
          calloc(nb, sizeof(int)),
          calloc(nb, sizeof(int)),
          calloc(nb, sizeof(int)),
          malloc(nb * sizeof(int)),
          malloc(nb * sizeof(int)),
          malloc(sizeof(int) * ((size_t)l->nsteps + 1)),
          0};
  if (!h.dst || !h.src || !h.dst_stream || !h.last_start || !h.src_start ||
      !h.open) {
    free(h.dst);
    free(h.src);
    free(h.dst_stream);
    free(h.last_start);
    free(h.src_start);
    free(h.open);
    return plan_oom();
  }
  char a[PLAN_MAX_NAME + 64], b[PLAN_MAX_NAME + 64], c[PLAN_MAX_NAME + 64];
  int bad = -1;
  for (int i = 0; i < l->nsteps && bad < 0; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind == PLAN_LSTEP_WAIT) {
      int w = s->in[0];
      if (!h.dst[w]) {
        snprintf(why, why_size,
                 "step %d waits for '%s', which no collective in flight "
                 "writes: a wait without a start",
                 i, buf_name(l, w, a, sizeof a));
        bad = i;
        break;
      }
      if (h.dst_stream[w] != s->stream) {
        snprintf(why, why_size,
                 "step %d waits for '%s' on stream %d, but its collective "
                 "runs on stream %d",
                 i, buf_name(l, w, a, sizeof a), s->stream, h.dst_stream[w]);
        bad = i;
        break;
      }
      for (int k = 0; k < h.nopen; k++) {
        int j = h.open[k];
        if (j >= 0 && l->steps[j].out[0] == w) {
          h.src[l->steps[j].in[0]]--;
          h.open[k] = -1;
        }
      }
      h.dst[w] = 0;
      continue;
    }
    bool start = is_start(s);
    for (int x = 0; x < s->nin && bad < 0; x++) {
      int r = s->in[x];
      if (h.dst[r] && !(start && h.dst_stream[r] == s->stream)) {
        snprintf(why, why_size,
                 "%s reads '%s' before its wait: the collective that writes "
                 "it, started at %s, may still be running",
                 step_name(l, i, a, sizeof a), buf_name(l, r, b, sizeof b),
                 step_name(l, h.last_start[r], c, sizeof c));
        bad = i;
      }
    }
    for (int x = 0; x < s->nout && bad < 0; x++) {
      int w = s->out[x];
      if (h.src[w]) {
        snprintf(why, why_size,
                 "%s writes '%s' while the collective started at %s, which "
                 "reads it, is in flight: a buffer reused in flight",
                 step_name(l, i, a, sizeof a), buf_name(l, w, b, sizeof b),
                 step_name(l, h.src_start[w], c, sizeof c));
        bad = i;
      } else if (h.dst[w] &&
                 !(start && s->chunk_of && h.dst_stream[w] == s->stream)) {
        snprintf(why, why_size,
                 "%s writes '%s' while the collective started at %s, which "
                 "writes it, is in flight: a buffer reused in flight",
                 step_name(l, i, a, sizeof a), buf_name(l, w, b, sizeof b),
                 step_name(l, h.last_start[w], c, sizeof c));
        bad = i;
      }
    }
    if (bad >= 0 || !start)
      continue;
    h.dst[s->out[0]]++;
    h.dst_stream[s->out[0]] = s->stream;
    h.last_start[s->out[0]] = i;
    h.src[s->in[0]]++;
    h.src_start[s->in[0]] = i;
    h.open[h.nopen++] = i;
  }
  for (int k = 0; k < h.nopen && bad < 0; k++)
    if (h.open[k] >= 0) {
      int j = h.open[k];
      snprintf(why, why_size,
               "the collective started at %s, writing '%s' on stream %d, is "
               "never waited",
               step_name(l, j, a, sizeof a),
               buf_name(l, l->steps[j].out[0], b, sizeof b),
               l->steps[j].stream);
      bad = j;
    }
  free(h.dst);
  free(h.src);
  free(h.dst_stream);
  free(h.last_start);
  free(h.src_start);
  free(h.open);
  *bad_step = bad;
  return bad >= 0 ? PLAN_EINVALID : PLAN_OK;
}

int plan_lowered_inflight(const plan_lowered *l, int upto, int buf,
                          int *start) {
  /* the last start before `upto` that reads or writes buf and is not
   * waited before it (a wait names what the collective writes) */
  *start = -1;
  for (int j = 0; j < upto; j++) {
    const plan_lstep *s = &l->steps[j];
    if (is_start(s) && (s->in[0] == buf || s->out[0] == buf))
      *start = j;
    if (s->kind == PLAN_LSTEP_WAIT && *start >= 0 &&
        l->steps[*start].out[0] == s->in[0])
      *start = -1;
  }
  return *start >= 0;
}
