/* The memory a verification needs (libplan/verify.h, docs/verify.md,
 * Memory): an estimate of its peak from the lowered program's shapes,
 * the memory available here (cgroup, MemAvailable), and the preflight
 * that refuses a run which would not fit before anything is allocated.
 *
 * The estimate follows what the runs allocate, in doubles: the reference
 * run keeps every tensor whole (twice in float mode: the f64 reference
 * of the low-precision bound may be needed); the lowered run holds every
 * rank's block of each buffer from the step that writes it to the last
 * step that reads it (training's params and synced gradients to the
 * end; a pipeline's buffers, and in float mode every buffer, all the run
 * long: one that matches only by the f64 bound is kept for the
 * diagnosis); the kernels' scratch
 * holds one op's operands converted, with room to grow twice; training
 * adds master copies, two moments and leaves, each on every rank and
 * whole. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/verify.h"
#include "verify_ctx.h"

/* Sum over the ranks of the elements of their blocks of `tensor`. */
static double rank_elems(const vx_lowered *l, const plan_placement *pl,
                         int tensor) {
  const vx_mesh *m = &l->mesh;
  const vx_tensor *t = &l->program.tensors[tensor];
  int64_t coord[PLAN_MAX_MESH_AXES] = {0}, local[PLAN_MAX_RANK],
          offset[PLAN_MAX_RANK];
  double n = 0;
  for (int64_t r = 0; r < m->ndevices; r++) {
    int64_t x = r;
    for (int a = m->naxes - 1; a >= 0; a--) {
      coord[a] = x % m->axis_sizes[a];
      x /= m->axis_sizes[a];
    }
    plan_vx_block_of(l, pl, tensor, coord, local, offset);
    n += (double)plan_vx_count_of(local, t->rank);
  }
  return n;
}

static double whole_elems(const vx_lowered *l, int tensor) {
  const vx_tensor *t = &l->program.tensors[tensor];
  return (double)plan_vx_count_of(t->dims, t->rank);
}

/* The lowered run's peak of live blocks, in elements: a buffer from the
 * step that first names it to its last reader (kept to the end when
 * `keep` or keep_all says so, or in a pipeline). */
static int lowered_peak(const vx_lowered *l, const bool *keep, bool keep_all,
                        double *peak) {
  size_t nb = (size_t)l->nbufs + 1;
  int *last = malloc(nb * sizeof *last);
  double *size = malloc(nb * sizeof *size);
  bool *live = calloc(nb, sizeof *live);
  if (!last || !size || !live) {
    free(last);
    free(size);
    free(live);
    return plan_oom();
  }
  for (int b = 0; b < l->nbufs; b++) {
    last[b] = keep_all || keep[b] || l->pipe ? l->nsteps : -1;
    size[b] = rank_elems(l, &l->bufs[b].pl, l->bufs[b].tensor);
  }
  for (int i = 0; i < l->nsteps; i++)
    for (int j = 0; j < l->steps[i].nin; j++)
      if (last[l->steps[i].in[j]] < i)
        last[l->steps[i].in[j]] = i;
  double now = 0, top = 0;
  for (int i = 0; i < l->nsteps; i++) {
    const vx_step *s = &l->steps[i];
    for (int pass = 0; pass < 2; pass++)
      for (int k = 0; k < (pass ? s->nout : s->nin); k++) {
        int b = pass ? s->out[k] : s->in[k];
        if (!live[b]) {
          live[b] = true;
          now += size[b];
        }
      }
    top = now > top ? now : top;
    for (int pass = 0; pass < 2; pass++)
      for (int k = 0; k < (pass ? s->nout : s->nin); k++) {
        int b = pass ? s->out[k] : s->in[k];
        if (live[b] && last[b] <= i) {
          live[b] = false;
          now -= size[b];
        }
      }
  }
  free(last);
  free(size);
  free(live);
  *peak = top;
  return PLAN_OK;
}

/* Training state, in elements: per param the master copy and two moments
 * on every rank and whole; every leaf on every rank and whole. */
static double training_elems(const vx_lowered *l) {
  const vx_train *tr = l->train;
  double n = 0;
  for (int i = 0; i < tr->nparams; i++)
    n += 3 * rank_elems(l, &tr->master[i], tr->param[i]) +
         3 * whole_elems(l, tr->param[i]);
  for (int t = 0; t < l->program.ntensors; t++)
    if (l->program.tensors[t].producer < 0 && l->produced[t] >= 0)
      n += whole_elems(l, t) + rank_elems(l, &l->bufs[l->produced[t]].pl, t);
  return n;
}

/* The kernels' scratch (verify_op.c): one slot per operand position,
 * each grown to the largest whole operand in that position (up to twice
 * that, as it grows by doubling). */
static double scratch_elems(const vx_lowered *l) {
  double top[2 * PLAN_MAX_OPERANDS] = {0}, n = 0;
  for (int i = 0; i < l->program.nops; i++) {
    const vx_op *op = &l->program.ops[i];
    for (int j = 0; j < 2 * PLAN_MAX_OPERANDS; j++) {
      int k = j < PLAN_MAX_OPERANDS ? j : j - PLAN_MAX_OPERANDS;
      if (k >= (j < PLAN_MAX_OPERANDS ? op->nin : op->nout))
        continue;
      double e = whole_elems(l, j < PLAN_MAX_OPERANDS ? op->in[k] : op->out[k]);
      top[j] = e > top[j] ? e : top[j];
    }
  }
  for (int j = 0; j < 2 * PLAN_MAX_OPERANDS; j++)
    n += 2 * top[j];
  return n;
}

int plan_vx_estimate(const vx_lowered *l, bool float_mode, uint64_t *bytes) {
  bool *keep = calloc((size_t)l->nbufs + 1, sizeof *keep);
  if (!keep)
    return plan_oom();
  if (l->train)
    for (int i = 0; i < l->train->nparams; i++) {
      if (l->produced[l->train->param[i]] >= 0)
        keep[l->produced[l->train->param[i]]] = true;
      keep[l->delivered[l->train->grad_out[i]]] = true;
    }
  double peak = 0;
  /* float mode: a buffer within tolerance only by the f64 bound counts as
   * mismatched and is kept for the diagnosis; any may be */
  int rc = lowered_peak(l, keep, float_mode, &peak);
  free(keep);
  if (rc)
    return rc;
  double ref = 0;
  for (int t = 0; t < l->program.ntensors; t++)
    ref += whole_elems(l, t);
  double n = peak + ref * (float_mode ? 2 : 1) + scratch_elems(l);
  if (l->train)
    n += training_elems(l);
  /* a quarter more: the block pool's and the allocator's slack, the
   * plan's own structures; and the bookkeeping */
  double b = 1.25 * n * (double)sizeof(double) + (4 << 20);
  *bytes = b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
  return PLAN_OK;
}

/* plan_vx_estimate of a lowered program, through a copy made for it. */
static int estimate_of(const plan_lowered *l, bool float_mode,
                       uint64_t *bytes) {
  vx_lowered *v;
  int rc = plan_vx_lowered_new(&v, l);
  if (!rc)
    rc = plan_vx_estimate(v, float_mode, bytes);
  plan_vx_lowered_free(v);
  return rc;
}

/* ---- the memory available ------------------------------------------------ */

/* The first number in file `path` (a cgroup's "max" is none): 0 when
 * there is one, else -1. */
static int read_u64(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  unsigned long long v;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (!ok)
    return -1;
  *out = (uint64_t)v;
  return 0;
}

/* A cgroup's limit less its usage, where both are read. */
static void cgroup_room(const char *limit, const char *usage, uint64_t *best) {
  uint64_t lim, use;
  if (read_u64(limit, &lim) || read_u64(usage, &use))
    return;
  uint64_t room = lim > use ? lim - use : 0;
  if (room < *best)
    *best = room;
}

/* This process's cgroup v2 folder ("0::/path" in /proc/self/cgroup). */
static void cgroup2_dir(char *dir, size_t cap) {
  snprintf(dir, cap, "/sys/fs/cgroup");
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f)
    return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) {
      line[strcspn(line, "\n")] = 0;
      if (strcmp(line + 3, "/") && !strstr(line + 3, ".."))
        snprintf(dir, cap, "/sys/fs/cgroup%s", line + 3);
      break;
    }
  fclose(f);
}

int plan_verify_memory_available(uint64_t *bytes) {
  if (!bytes)
    return plan_failf(PLAN_EUSAGE, "plan_verify_memory_available: NULL bytes");
  uint64_t best = UINT64_MAX;
  char dir[600], lim[640], use[640];
  cgroup2_dir(dir, sizeof dir);
  snprintf(lim, sizeof lim, "%s/memory.max", dir);
  snprintf(use, sizeof use, "%s/memory.current", dir);
  cgroup_room(lim, use, &best);
  cgroup_room("/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/fs/cgroup/memory/memory.usage_in_bytes", &best);
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        if (kb * 1024 < best)
          best = (uint64_t)kb * 1024;
        break;
      }
    fclose(f);
  }
  *bytes = best;
  return best == UINT64_MAX
             ? plan_failf(PLAN_EUNSUPPORTED,
                          "the memory available here cannot be read")
             : PLAN_OK;
}

/* ---- the estimate and the preflight -------------------------------------- */

/* Bytes as every output of the tool writes them: binary units scaled to
 * the value (plan_format_bytes). */
void plan_vx_format_bytes(char *out, size_t cap, uint64_t b) {
  plan_format_bytes(out, cap, (double)b);
}

int plan_verify_estimate(uint64_t *bytes, const plan_plan *p,
                         const plan_lowered *l,
                         const plan_verify_options *opts) {
  if (!bytes || (!p && !l))
    return plan_failf(PLAN_EUSAGE, "plan_verify_estimate: NULL argument");
  *bytes = 0;
  bool fl = opts && opts->mode == PLAN_VERIFY_FLOAT;
  if (l)
    return estimate_of(l, fl, bytes);
  plan_lowered *own;
  int rc = plan_lower(&own, p);
  if (rc)
    return rc;
  rc = estimate_of(own, fl, bytes);
  plan_lowered_free(own);
  return rc;
}

/* The estimate of the --reduce'd run: a lowered file's program reduced
 * as it is, a plan's shapes and mesh reduced and lowered again. */
static int reduced_estimate(const plan_plan *p, const plan_lowered *l, bool fl,
                            uint64_t *b) {
  plan_lowered *rl;
  int rc;
  if (p == plan_lowered_plan(l)) { /* a lowered file */
    rc = plan_lowered_reduce(&rl, NULL, l, PLAN_REDUCE_MESH);
  } else {
    plan_plan *rp;
    if ((rc = plan_reduce_plan(&rp, NULL, p, PLAN_REDUCE_MESH)))
      return rc;
    rc = plan_lower(&rl, rp);
    if (!rc) {
      rc = estimate_of(rl, fl, b);
      plan_lowered_free(rl);
    }
    plan_free(rp);
    return rc;
  }
  if (rc)
    return rc;
  rc = estimate_of(rl, fl, b);
  plan_lowered_free(rl);
  return rc;
}

/* The hint of the refusal ("" when the plan cannot be reduced). */
static void reduced_hint(const plan_plan *p, const plan_lowered *l, bool fl,
                         char *out, size_t cap) {
  uint64_t b;
  out[0] = 0;
  if (!reduced_estimate(p, l, fl, &b)) {
    char s[32];
    plan_vx_format_bytes(s, sizeof s, b);
    snprintf(out, cap, "; --reduce verifies the same sharding in about %s", s);
  }
}

int plan_vx_preflight(const plan_plan *p, const vx_lowered *v,
                      const plan_verify_options *o, uint64_t *need) {
  *need = 0;
  if (o->world || o->memory_limit == UINT64_MAX)
    return PLAN_OK; /* each process runs its own share: not modelled */
  bool fl = o->mode == PLAN_VERIFY_FLOAT;
  int rc = plan_vx_estimate(v, fl, need);
  if (rc)
    return rc;
  uint64_t have = o->memory_limit;
  const char *what = "the limit given";
  if (!have) {
    what = "what is free here";
    if (plan_verify_memory_available(&have))
      return PLAN_OK; /* nothing to compare with */
  }
  if (*need <= have)
    return PLAN_OK;
  char n[32], h[32], hint[128];
  plan_vx_format_bytes(n, sizeof n, *need);
  plan_vx_format_bytes(h, sizeof h, have);
  reduced_hint(p, v->pub, fl, hint, sizeof hint);
  return plan_failf(PLAN_EUNSUPPORTED,
                    "verifying %s needs about %s, %s available (%s)%s",
                    plan_file(p) ? plan_file(p) : "the plan", n, h, what, hint);
}
