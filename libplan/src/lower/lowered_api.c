/* Lowered programs in the public API (libplan/lowered.h) beside the file
 * form of lowered_io.c: reading one from a path (the read-only views are
 * lowered_views.c's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "lower/lower.h"

int plan_lowered_load(plan_lowered **out, const char *path) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load: NULL out");
  *out = NULL;
  plan_error_clear();
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load: NULL path");
  char *data = NULL;
  size_t len = 0;
  int rc = plan_read_file(&data, &len, path, PLAN_MAX_LOWERED_BYTES);
  if (rc)
    return rc;
  /* a program given by path is beside the file, as plan_load resolves it */
  char dir[4096];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (slash && n < sizeof dir) {
    memcpy(dir, path, n);
    dir[n] = '\0';
    if (!dir[0])
      strcpy(dir, "/");
  } else {
    dir[0] = '\0';
  }
  rc = plan_lowered_load_buffer(out, data, len, path, dir);
  free(data);
  return rc;
}

int plan_lowered_renumber(plan_lowered *l, int *unwritten) {
  if (unwritten)
    *unwritten = -1;
  int *newi = malloc(sizeof(int) * ((size_t)l->nbufs + 1));
  plan_lbuf *nb = calloc((size_t)l->nbufs + 1, sizeof(plan_lbuf));
  if (!newi || !nb) {
    free(newi);
    free(nb);
    return plan_oom();
  }
  int next = 0;
  for (int b = 0; b < l->nbufs; b++)
    newi[b] = -1;
  for (int i = 0; i < l->nsteps; i++)
    for (int k = 0; k < l->steps[i].nout; k++) {
      int b = l->steps[i].out[k];
      if (newi[b] < 0) {
        newi[b] = next;
        nb[next++] = l->bufs[b];
      }
    }
  for (int b = 0; b < l->nbufs; b++)
    if (newi[b] < 0) {
      if (unwritten && *unwritten < 0)
        *unwritten = b;
      newi[b] = next;
      nb[next++] = l->bufs[b];
    }
  for (int i = 0; i < l->nsteps; i++) {
    plan_lstep *s = &l->steps[i];
    const plan_lstep *prev = i > 0 ? &l->steps[i - 1] : NULL;
    if (!(prev && s->in && prev->in == s->in))
      for (int k = 0; k < s->nin; k++)
        s->in[k] = newi[s->in[k]];
    if (!(prev && s->out && prev->out == s->out))
      for (int k = 0; k < s->nout; k++)
        s->out[k] = newi[s->out[k]];
  }
  const plan_program *prog = l->plan->program;
  for (int t = 0; t < prog->ntensors; t++)
    if (l->produced[t] >= 0)
      l->produced[t] = newi[l->produced[t]];
  for (int k = 0; k < prog->noutputs; k++)
    if (l->delivered[k] >= 0)
      l->delivered[k] = newi[l->delivered[k]];
  free(l->bufs);
  l->bufs = nb;
  l->cap_bufs = l->nbufs;
  free(newi);
  return PLAN_OK;
}
