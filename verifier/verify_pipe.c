/* Running a pipelined program (vx_program.h, vx_pipe): every pipeline rank
 * runs its schedule's actions in order, in one deterministic event loop.
 *
 * A rank runs its next action once what it needs has happened at run
 * time: an F its activations (its RECV_F, or the previous stage's F when
 * the schedule has no receive for it), a B or I its own F and the next
 * stage's input gradient (RECV_B, or that stage's B or I), a W its I, a
 * SEND the compute it sends, a RECV its SEND (buffered sends, as batched
 * isend). An action runs the steps of its stage and phase for its
 * microbatch: on the ranks of the microbatch mesh whose mb coordinate is
 * that microbatch. When no rank can go on and some have actions left, the
 * schedule deadlocks: the verdict names every waiting rank, the action it
 * waits at and what it waits for. After the schedule, the steps after it
 * (the sum over microbatches, the gradient sync, the delivery) run on
 * every rank, and then every step's results are compared in step order,
 * so that the first divergent tensor is the first in the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/schedule.h"
#include "verify_ctx.h"

enum { PH_F, PH_I, PH_W, PH_RF, PH_RB, PH_N };

typedef struct prun {
  vctx *c;
  const vx_pipe *pp;
  int S, R;
  int64_t M;
  /* [stage * M + microbatch]: what has happened */
  uint8_t *done_f, *done_i, *done_w, *sent_f, *sent_b, *recv_f, *recv_b;
  /* whether the schedule has the receive (else the transfer is implicit) */
  uint8_t *has_rf, *has_rb;
  int *runs; /* [step]: the microbatches it has run for */
  /* the steps of each (stage, phase) group g = stage * PH_N + phase, in
   * step order: order[start[g] .. start[g + 1]) */
  int *order, *start;
  /* Buffers compared and handed back microbatch by microbatch (split
   * along mb, not partial, written by a stage): what a microbatch's
   * activations cost is held only while some step still reads them. */
  uint8_t *per_mb; /* [buffer] */
  uint8_t *hold;   /* [buffer]: a microbatch mismatched: keep every block */
  int *mb_done;    /* [buffer]: microbatches compared */
  int *mb_readers; /* [buffer * M + k]: reads of microbatch k to come */
} prun;

static int phase_of(int ph) {
  switch (ph) {
  case VX_PHASE_F:
    return PH_F;
  case VX_PHASE_I:
    return PH_I;
  case VX_PHASE_W:
    return PH_W;
  case VX_PHASE_RECV_F:
    return PH_RF;
  case VX_PHASE_RECV_B:
    return PH_RB;
  }
  return -1;
}

int plan_vx_run_transfer(vctx *c, const vx_step *s) {
  const vx_pipe *pp = c->low->pipe;
  int64_t m = pp->microbatches;
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  for (int64_t r = 0; r < c->nranks; r++) {
    if (!plan_vx_in_mb(c, r))
      continue;
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    coord[pp->axis] = ((coord[pp->axis] + s->mb_shift) % m + m) % m;
    const block *sb = &src[plan_vx_rank_at(c->m, coord)];
    if (!c->written[(size_t)s->in[0] * (size_t)m + (size_t)coord[pp->axis]] ||
        !src[plan_vx_rank_at(c->m, coord)].data) {
      /* a microbatch not computed yet: its blocks hold nothing */
      memset(dst[r].data, 0, sizeof(double) * (size_t)dst[r].n);
      continue;
    }
    if (sb->n != dst[r].n)
      return plan_failf(PLAN_EINVALID,
                        "send/recv of '%s': the microbatches' blocks differ "
                        "in size",
                        c->prog->tensors[c->low->bufs[s->out[0]].tensor].name);
    memcpy(dst[r].data, sb->data, sizeof(double) * (size_t)sb->n);
  }
  return PLAN_OK;
}

/* An INPUT step with mb_shift: microbatch k's blocks hold microbatch
 * k + shift's data (the blocks of a split leaf are alike in size). */
static int shift_input(vctx *c, const vx_step *s) {
  const vx_pipe *pp = c->low->pipe;
  int64_t m = pp->microbatches;
  block *b = c->bufs[s->out[0]];
  double **data = malloc(sizeof(double *) * (size_t)c->nranks);
  if (!data)
    return plan_oom();
  for (int64_t r = 0; r < c->nranks; r++) {
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    coord[pp->axis] = ((coord[pp->axis] + s->mb_shift) % m + m) % m;
    int64_t q = plan_vx_rank_at(c->m, coord);
    if (b[q].n != b[r].n) { /* uneven: left as it is */
      free(data);
      return PLAN_OK;
    }
    data[r] = b[q].data;
  }
  for (int64_t r = 0; r < c->nranks; r++)
    b[r].data = data[r];
  free(data);
  return PLAN_OK;
}

/* Step i has run for one more microbatch; once it has run for all (once,
 * before or after the schedule), what it wrote is compared and the blocks
 * no step will read again go back to the pool: the run's memory stays near
 * the unpipelined run's. The inputs of the steps after the schedule stay
 * (the diagnoses of the sum over microbatches read them). */
static bool first_read(const vx_step *s, int j) {
  for (int q = 0; q < j; q++)
    if (s->in[q] == s->in[j])
      return false;
  return true;
}

static void release_if_done(prun *x, int b, int64_t k) {
  if (!x->hold[b] && x->mb_readers[(size_t)b * (size_t)x->M + (size_t)k] == 0)
    plan_vx_release_microbatch(x->c, b, k);
}

static int ran(prun *x, int i, int64_t k) {
  vctx *c = x->c;
  const vx_step *s = &c->low->steps[i];
  int ph = x->pp->phase[i], rc;
  /* its own check, on this microbatch's blocks while they are held */
  if (k >= 0) {
    double t0 = plan_vx_seconds_now();
    rc = plan_vx_check_local(c, i, k);
    c->cmp_seconds += plan_vx_seconds_now() - t0;
    if (rc)
      return rc;
  }
  for (int o = 0; k >= 0 && o < s->nout; o++) {
    int b = s->out[o];
    if (!x->per_mb[b])
      continue;
    if ((rc = plan_vx_compare_microbatch(c, b, k, ++x->mb_done[b] == x->M)))
      return rc;
    x->hold[b] |= c->diffs[b].mismatches != 0;
    release_if_done(x, b, k);
  }
  for (int j = 0; k >= 0 && j < s->nin; j++) {
    int b = s->in[j];
    if (!x->per_mb[b] || !first_read(s, j))
      continue;
    x->mb_readers[(size_t)b * (size_t)x->M + (size_t)k]--;
    release_if_done(x, b, k);
  }
  bool whole = ph == VX_PHASE_PRE || ph == VX_PHASE_POST;
  if (++x->runs[i] < (whole ? 1 : x->M))
    return PLAN_OK;
  for (int j = 0; j < s->nin && ph != VX_PHASE_POST; j++)
    if (first_read(s, j)) /* a buffer read twice by one step counts once */
      c->readers_left[s->in[j]]--;
  return plan_vx_after_step(c, i);
}

/* Runs the steps of (stage, phase) for microbatch k. */
static int run_part(prun *x, int stage, int ph, int64_t k) {
  vctx *c = x->c;
  int rc = PLAN_OK;
  c->mb_now = k;
  int g = stage * PH_N + ph;
  for (int j = x->start[g]; j < x->start[g + 1] && !rc; j++)
    if (!(rc = plan_vx_exec_step(c, x->order[j])))
      rc = ran(x, x->order[j], k);
  c->mb_now = -1;
  return rc;
}

static void action_name(char *buf, size_t n, int kind, int stage, int64_t k) {
  snprintf(buf, n, "%d%s%lld", stage, plan_action_kind_name(kind),
           (long long)k);
}

/* Whether action a can run now; else what it waits for, into why. */
static bool ready(const prun *x, const plan_schedule_action *a, char *why,
                  size_t n) {
  int s = a->stage;
  int64_t k = a->microbatch, i = (int64_t)s * x->M + k;
  int need_kind = -1, need_stage = s;
  switch (a->kind) {
  case PLAN_ACTION_F:
    if (s > 0 && x->has_rf[i] && !x->recv_f[i])
      need_kind = PLAN_ACTION_RECV_F;
    else if (s > 0 && !x->has_rf[i] && !x->done_f[i - x->M])
      need_kind = PLAN_ACTION_F, need_stage = s - 1;
    break;
  case PLAN_ACTION_B:
  case PLAN_ACTION_I:
    if (!x->done_f[i])
      need_kind = PLAN_ACTION_F;
    else if (s < x->S - 1 && x->has_rb[i] && !x->recv_b[i])
      need_kind = PLAN_ACTION_RECV_B;
    else if (s < x->S - 1 && !x->has_rb[i] && !x->done_i[i + x->M])
      need_kind = PLAN_ACTION_I, need_stage = s + 1;
    break;
  case PLAN_ACTION_W:
    if (!x->done_i[i])
      need_kind = PLAN_ACTION_I;
    break;
  case PLAN_ACTION_SEND_F:
    if (!x->done_f[i])
      need_kind = PLAN_ACTION_F;
    break;
  case PLAN_ACTION_SEND_B:
    if (!x->done_i[i])
      need_kind = PLAN_ACTION_I;
    break;
  case PLAN_ACTION_RECV_F:
    if (s == 0 || !x->sent_f[i - x->M])
      need_kind = PLAN_ACTION_SEND_F, need_stage = s - 1;
    break;
  case PLAN_ACTION_RECV_B:
    if (s >= x->S - 1 || !x->sent_b[i + x->M])
      need_kind = PLAN_ACTION_SEND_B, need_stage = s + 1;
    break;
  }
  if (need_kind < 0)
    return true;
  char what[64];
  action_name(what, sizeof what, need_kind, need_stage, k);
  if (need_kind == PLAN_ACTION_I)
    snprintf(what + strlen(what), sizeof what - strlen(what), " (or %dB%lld)",
             need_stage, (long long)k);
  if (need_stage >= 0 && need_stage < x->S)
    snprintf(why, n, "%s on rank %d", what,
             plan_schedule_stage_rank(x->pp->schedule, need_stage));
  else
    snprintf(why, n, "%s, which no stage sends", what);
  return false;
}

static int run_action(prun *x, const plan_schedule_action *a) {
  int s = a->stage, rc = PLAN_OK;
  int64_t k = a->microbatch, i = (int64_t)s * x->M + k;
  switch (a->kind) {
  case PLAN_ACTION_F:
    if (s > 0 && !x->has_rf[i]) /* the activations arrive implicitly */
      rc = run_part(x, s, PH_RF, k);
    if (!rc)
      rc = run_part(x, s, PH_F, k);
    x->done_f[i] = 1;
    break;
  case PLAN_ACTION_B:
  case PLAN_ACTION_I:
    if (s < x->S - 1 && !x->has_rb[i])
      rc = run_part(x, s, PH_RB, k);
    if (!rc)
      rc = run_part(x, s, PH_I, k);
    x->done_i[i] = 1;
    if (!rc && a->kind == PLAN_ACTION_B) {
      rc = run_part(x, s, PH_W, k);
      x->done_w[i] = 1;
    }
    break;
  case PLAN_ACTION_W:
    rc = run_part(x, s, PH_W, k);
    x->done_w[i] = 1;
    break;
  case PLAN_ACTION_SEND_F:
    x->sent_f[i] = 1;
    break;
  case PLAN_ACTION_SEND_B:
    x->sent_b[i] = 1;
    break;
  case PLAN_ACTION_RECV_F:
    rc = run_part(x, s, PH_RF, k);
    x->recv_f[i] = 1;
    break;
  case PLAN_ACTION_RECV_B:
    rc = run_part(x, s, PH_RB, k);
    x->recv_b[i] = 1;
    break;
  }
  return rc;
}

/* The verdict of a run that cannot finish. */
static void stuck(prun *x, const char *what) {
  vctx *c = x->c;
  c->equal = 0;
  c->deadlock = true;
  c->first_op = "schedule";
  c->first_tensor = "";
  snprintf(c->diagnosis, sizeof c->diagnosis, "%s", what);
}

/* Each rank's actions in order, until all have run or none can go on. */
static int run_schedule(prun *x) {
  const plan_schedule *sc = x->pp->schedule;
  int64_t *pos = calloc((size_t)x->R, sizeof(int64_t));
  if (!pos)
    return plan_oom();
  int rc = PLAN_OK;
  for (;;) {
    bool progress = false, left = false;
    for (int r = 0; r < x->R && !rc; r++) {
      plan_schedule_action a;
      char why[128];
      while (!rc && !plan_schedule_get(&a, sc, r, pos[r]) &&
             ready(x, &a, why, sizeof why)) {
        rc = run_action(x, &a);
        pos[r]++;
        progress = true;
      }
      left |= pos[r] < plan_schedule_length(sc, r);
    }
    if (rc || !left)
      break;
    if (progress)
      continue;
    /* a deadlock: every rank with actions left waits */
    char msg[sizeof x->c->diagnosis], why[128], at[64];
    size_t n = (size_t)snprintf(msg, sizeof msg,
                                "the schedule deadlocks at run time:");
    for (int r = 0; r < x->R; r++) {
      plan_schedule_action a;
      if (plan_schedule_get(&a, sc, r, pos[r]))
        continue;
      ready(x, &a, why, sizeof why);
      action_name(at, sizeof at, a.kind, a.stage, a.microbatch);
      if (n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n,
                              "%s rank %d waits at %s for %s",
                              n > 40 ? ";" : "", r, at, why);
    }
    stuck(x, msg);
    break;
  }
  free(pos);
  if (rc || x->c->deadlock)
    return rc;
  /* every stage ran every microbatch's forward and backward */
  for (int s = 0; s < x->S; s++)
    for (int64_t k = 0; k < x->M; k++) {
      int64_t i = (int64_t)s * x->M + k;
      if (x->done_f[i] && x->done_w[i])
        continue;
      char msg[160];
      snprintf(msg, sizeof msg,
               "the schedule never runs stage %d's %s of microbatch %lld", s,
               x->done_f[i] ? "backward" : "forward", (long long)k);
      stuck(x, msg);
      return PLAN_OK;
    }
  return PLAN_OK;
}

int plan_vx_run_pipeline(vctx *c) {
  const vx_lowered *l = c->low;
  prun x;
  memset(&x, 0, sizeof x);
  x.c = c;
  x.pp = l->pipe;
  x.S = x.pp->nstages;
  x.R = plan_schedule_ranks(x.pp->schedule);
  x.M = x.pp->microbatches;
  size_t n = (size_t)x.S * (size_t)x.M + 1;
  uint8_t *flags = calloc(9 * n, 1);
  if (!flags)
    return plan_oom();
  uint8_t **f[9] = {&x.done_f, &x.done_i, &x.done_w, &x.sent_f, &x.sent_b,
                    &x.recv_f, &x.recv_b, &x.has_rf, &x.has_rb};
  for (int i = 0; i < 9; i++)
    *f[i] = flags + (size_t)i * n;
  for (int r = 0; r < x.R; r++) {
    plan_schedule_action a;
    for (int64_t j = 0; !plan_schedule_get(&a, x.pp->schedule, r, j); j++) {
      int64_t i = (int64_t)a.stage * x.M + a.microbatch;
      if (a.stage < 0 || a.stage >= x.S || a.microbatch < 0 ||
          a.microbatch >= x.M)
        continue;
      if (a.kind == PLAN_ACTION_RECV_F)
        x.has_rf[i] = 1;
      if (a.kind == PLAN_ACTION_RECV_B)
        x.has_rb[i] = 1;
    }
  }
  /* runs, order, start and a cursor in one block (freed with runs) */
  size_t ngroups = (size_t)x.S * PH_N;
  x.runs = calloc(2 * ((size_t)l->nsteps + 1) + 2 * (ngroups + 1), sizeof(int));
  if (x.runs) { /* a stable counting sort of the steps by group */
    x.order = x.runs + l->nsteps + 1;
    x.start = x.order + l->nsteps + 1;
    int *cur = x.start + ngroups + 1;
    for (int i = 0; i < l->nsteps; i++)
      if (x.pp->stage[i] >= 0 && phase_of(x.pp->phase[i]) >= 0)
        x.start[x.pp->stage[i] * PH_N + phase_of(x.pp->phase[i]) + 1]++;
    for (size_t g = 0; g < ngroups; g++)
      x.start[g + 1] += x.start[g];
    for (size_t g = 0; g < ngroups; g++)
      cur[g] = x.start[g];
    for (int i = 0; i < l->nsteps; i++)
      if (x.pp->stage[i] >= 0 && phase_of(x.pp->phase[i]) >= 0)
        x.order[cur[x.pp->stage[i] * PH_N + phase_of(x.pp->phase[i])]++] = i;
  }
  c->readers_left = calloc((size_t)l->nbufs + 1, sizeof(int));
  c->written = calloc(((size_t)l->nbufs + 1) * (size_t)x.M, 1);
  if (!x.runs || !c->readers_left || !c->written) {
    free(flags);
    free(x.runs);
    return plan_oom();
  }
  size_t nb = (size_t)l->nbufs + 1;
  /* leaves replicated along mb: one block for every microbatch */
  c->shared = calloc(nb, sizeof(bool));
  if (!c->shared) {
    free(flags), free(x.runs);
    return plan_oom();
  }
  /* ... and what the steps after the schedule make R along mb: the sums
   * over microbatches and what follows them, computed once (mb_owned) */
  for (int i = 0; i < l->nsteps; i++) {
    const vx_step *st = &l->steps[i];
    bool pre = st->kind == VX_STEP_INPUT && !st->mb_shift;
    bool post = x.pp->phase[i] == VX_PHASE_POST;
    for (int o = 0; (pre || post) && o < st->nout; o++)
      if (l->bufs[st->out[o]].pl.ax[x.pp->axis].kind == PLAN_PL_R)
        c->shared[st->out[o]] = true;
  }
  x.per_mb = calloc(nb, 1);
  x.hold = calloc(nb, 1);
  x.mb_done = calloc(nb, sizeof(int));
  x.mb_readers = calloc(nb * (size_t)x.M, sizeof(int));
  if (!x.per_mb || !x.hold || !x.mb_done || !x.mb_readers) {
    free(flags), free(x.runs), free(x.per_mb), free(x.hold);
    free(x.mb_done), free(x.mb_readers);
    return plan_oom();
  }
  for (int i = 0; i < l->nsteps; i++) {
    int ph = x.pp->phase[i];
    for (int o = 0; o < l->steps[i].nout; o++) {
      int b = l->steps[i].out[o];
      const vx_buf *lb = &l->bufs[b];
      x.per_mb[b] = c->needs_cmp[b] && ph != VX_PHASE_PRE &&
                    ph != VX_PHASE_POST &&
                    lb->pl.ax[x.pp->axis].kind == PLAN_PL_S &&
                    !plan_vx_partial_axes(lb, c->m->naxes, NULL) &&
                    !(c->keep_buf && c->keep_buf[b]);
    }
  }
  for (int i = 0; i < l->nsteps; i++)
    for (int j = 0; j < l->steps[i].nin; j++) {
      int b = l->steps[i].in[j];
      if (!first_read(&l->steps[i], j))
        continue;
      c->readers_left[b]++;
      /* a step after the schedule reads every microbatch, and keeps them */
      for (int64_t k = 0; x.per_mb[b] && k < x.M; k++)
        x.mb_readers[(size_t)b * (size_t)x.M + (size_t)k] +=
            x.pp->phase[i] == VX_PHASE_POST ? 1 << 20 : 1;
    }
  int rc = PLAN_OK;
  /* before the schedule: the leaves, on every rank */
  for (int i = 0; i < l->nsteps && !rc; i++)
    if (x.pp->phase[i] == VX_PHASE_PRE) {
      rc = plan_vx_exec_step(c, i);
      if (!rc && l->steps[i].kind == VX_STEP_INPUT && l->steps[i].mb_shift)
        rc = shift_input(c, &l->steps[i]);
      if (!rc)
        rc = ran(&x, i, -1);
    }
  if (!rc)
    rc = run_schedule(&x);
  for (int i = 0; i < l->nsteps && !rc && !c->deadlock; i++) {
    if (x.pp->phase[i] != VX_PHASE_POST)
      continue;
    /* a result shared along mb: computed on microbatch 0's ranks */
    bool once = true;
    for (int o = 0; o < l->steps[i].nout; o++)
      once &= c->shared[l->steps[i].out[o]];
    c->mb_now = once ? 0 : -1;
    rc = plan_vx_exec_step(c, i);
    c->mb_now = -1;
    if (!rc)
      rc = ran(&x, i, -1);
  }
  free(flags);
  free(x.runs);
  free(x.per_mb);
  free(x.hold);
  free(x.mb_done);
  free(x.mb_readers);
  return rc;
}
