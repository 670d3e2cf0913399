/* The file form of a pipelined lowered program (spec/lowered-format.md,
 * "Pipelines"; lowered_io_pipe.h).
 *
 * A pipelined program is written over its microbatch mesh (lower_pipe.c):
 * the `pipeline:` section names the microbatch axis and count, the number
 * of stages and the schedule (its kind, which places the stages on
 * pipeline ranks, and every rank's actions in the plan's grid grammar),
 * and every step says where it runs (`stage`, `phase`). Reading checks
 * what the verifier's run relies on: every action in range and on its
 * stage's rank, each stage's forward and backward once per microbatch, and
 * each step reading only what its stage holds when it runs. The order of
 * the actions is not judged here: a schedule that cannot run (a backward
 * before its forward's receive) deadlocks when it is verified, which is
 * the verdict (NOT EQUAL), as a runtime would hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowered_io_pipe.h"
#include "read/plan_read.h"
#include "schedule/schedule_actions.h"

static const char *const phase_names[PLAN_LPHASE_COUNT] = {
    "pre", "F", "I", "W", "RECV_F", "RECV_B", "post"};

const char *plan_lphase_name(int phase) {
  return phase >= 0 && phase < PLAN_LPHASE_COUNT ? phase_names[phase] : "?";
}

/* ---- writing
 * ----------------------------------------------------------------- */

int plan_lpipe_write_section(plan_buf *b, const plan_lowered *l) {
  const plan_lpipe *pp = l->pipe;
  const plan_schedule *sc = pp->schedule;
  if (!sc)
    return plan_failf(PLAN_EINVALID, "a pipelined program without a schedule");
  plan_buf_printf(b,
                  "pipeline:\n  axis: %s\n  microbatches: %lld\n  stages: %d\n"
                  "  schedule: %s\n  actions:\n",
                  l->plan->mesh.axis_names[pp->axis],
                  (long long)pp->microbatches, pp->nstages,
                  plan_schedule_kind_name(sc->kind));
  char w[48];
  for (int r = 0; r < sc->nranks; r++) {
    plan_buf_puts(b, "    - \"");
    for (int64_t j = sc->off[r]; j < sc->off[r + 1]; j++) {
      if (j > sc->off[r])
        plan_buf_putc(b, ' ');
      plan_buf_puts(b, plan_schedule_action_name(&sc->acts[j], w));
    }
    plan_buf_puts(b, "\"\n");
  }
  return PLAN_OK;
}

void plan_lpipe_write_step_fields(plan_buf *b, const plan_lowered *l, int i) {
  const plan_lpipe *pp = l->pipe;
  if (pp->from_stage[i] >= 0)
    plan_buf_printf(b, ", from_stage: %d", pp->from_stage[i]);
  if (pp->stage[i] >= 0)
    plan_buf_printf(b, ", stage: %d", pp->stage[i]);
  plan_buf_printf(b, ", phase: %s", plan_lphase_name(pp->phase[i]));
  if (l->steps[i].mb_shift)
    plan_buf_printf(b, ", mb_shift: %lld", (long long)l->steps[i].mb_shift);
}

bool plan_lpipe_needs_1_1(const plan_lowered *l) {
  return l->pipe && l->pipe->schedule &&
         l->pipe->schedule->kind >= PLAN_SCHED_FILE_COUNT_1_0;
}

/* ---- reading
 * ----------------------------------------------------------------- */

static int int_in(const plan_reader *rd, const plan_ynode *n, const char *what,
                  int64_t lo, int64_t hi, int64_t *out) {
  int rc = plan_rd_int(rd, n, what, out);
  if (!rc && (*out < lo || *out > hi))
    rc = plan_rd_fail(rd, n, PLAN_EINVALID, "%s must be %lld to %lld, not %lld",
                      what, (long long)lo, (long long)hi, (long long)*out);
  return rc;
}

/* A failure at column `off` of a row's text. */
static int fail_in_row(const plan_reader *rd, const plan_ynode *row, size_t off,
                       const char *fmt, const char *a, int r, int64_t j) {
  plan_ynode at = *row;
  at.col += (int)off + (row->u.scalar.style == PLAN_Y_QUOTED);
  char msg[256];
  snprintf(msg, sizeof msg, fmt, r, (long long)j, a);
  return plan_rd_fail(rd, &at, PLAN_EINVALID, "%s", msg);
}

/* The rows of `actions` into a schedule of kind k. */
static int read_actions(const plan_reader *rd, const plan_ynode *an, int k,
                        int S, int64_t M, plan_schedule **out) {
  int rc = plan_rd_expect_seq(rd, an, "actions");
  if (rc)
    return rc;
  size_t R = an->u.seq.count;
  if (R < 1 || R > 65536)
    return plan_rd_fail(rd, an, PLAN_EINVALID,
                        "actions: one row per pipeline rank, 1 to 65536, not "
                        "%zu",
                        R);
  if (k == PLAN_SCHED_ZBV || k == PLAN_SCHED_DUALPIPEV) {
    if ((size_t)S != 2 * R)
      return plan_rd_fail(rd, an, PLAN_EINVALID,
                          "%s places two stages on each pipeline rank, in a "
                          "V: %d stages need %d rows of actions, not %zu",
                          plan_schedule_kind_name(k), S, (S + 1) / 2, R);
  } else if ((size_t)S < R) {
    return plan_rd_fail(rd, an, PLAN_EINVALID,
                        "actions: %zu rows for %d stages: every pipeline "
                        "rank runs a stage",
                        R, S);
  }
  if ((int64_t)S * M > PLAN_SCHEDULE_MAX_CELLS)
    return plan_rd_fail(rd, an, PLAN_EINVALID,
                        "%d stages x %lld microbatches is over the %lld "
                        "pairs a schedule holds",
                        S, (long long)M, (long long)PLAN_SCHEDULE_MAX_CELLS);
  int64_t n = 0;
  for (size_t r = 0; r < R; r++) {
    const plan_ynode *row = an->u.seq.items[r];
    if ((rc = plan_rd_expect_scalar(rd, row, "a row of actions")))
      return rc;
    bool in = false;
    for (const char *c = row->u.scalar.text; *c; c++) {
      n += !in && *c != ' ';
      in = *c != ' ';
    }
  }
  plan_schedule *sc;
  if ((rc = plan_schedule_alloc(&sc, k, (int)R, S, M, n)))
    return rc;
  for (int s = 0; s < S; s++)
    sc->stage_rank[s] = plan_schedule_kind_stage_rank(k, (int)R, s);
  /* each (stage, microbatch, kind) once */
  uint8_t *seen = calloc((size_t)S * (size_t)M * PLAN_ACT_COUNT + 1, 1);
  if (!seen) {
    plan_schedule_free(sc);
    return plan_oom();
  }
  n = 0;
  for (size_t r = 0; r < R && !rc; r++) {
    const plan_ynode *row = an->u.seq.items[r];
    const char *t = row->u.scalar.text;
    size_t i = 0, len = strlen(t);
    sc->off[r] = n;
    while (i < len && !rc) {
      while (i < len && t[i] == ' ')
        i++;
      size_t j = i;
      while (j < len && t[j] != ' ')
        j++;
      if (j == i)
        break;
      char word[48];
      snprintf(word, sizeof word, "%.*s", (int)(j - i < 40 ? j - i : 40),
               t + i);
      plan_action *a = &sc->acts[n];
      if (plan_action_parse(a, t + i, j - i)) {
        rc = fail_in_row(rd, row, i,
                         "actions: rank %d, action %lld: '%s' is not STAGE "
                         "ACTION MICROBATCH (0F1, 2B0, 1I3, 1W3, 0SEND_F2)",
                         word, (int)r, n - sc->off[r]);
        break;
      }
      a->pos = (plan_pos){row->line, row->col + (int)i};
      if (a->stage < 0 || a->stage >= S || a->microbatch < 0 ||
          a->microbatch >= M) {
        char what[160];
        snprintf(what, sizeof what,
                 "actions: rank %%d, action %%lld: '%%s' is outside the "
                 "pipeline (stages 0..%d, microbatches 0..%lld)",
                 S - 1, (long long)M - 1);
        rc = fail_in_row(rd, row, i, what, word, (int)r, n - sc->off[r]);
        break;
      }
      if (sc->stage_rank[a->stage] != (int)r) {
        char what[160];
        snprintf(what, sizeof what,
                 "actions: rank %%d, action %%lld: '%%s' is stage %d's, "
                 "which %s places on rank %d",
                 a->stage, plan_schedule_kind_name(k),
                 sc->stage_rank[a->stage]);
        rc = fail_in_row(rd, row, i, what, word, (int)r, n - sc->off[r]);
        break;
      }
      uint8_t *x =
          &seen[((size_t)a->stage * (size_t)M + (size_t)a->microbatch) *
                    PLAN_ACT_COUNT +
                a->kind];
      if (*x) {
        rc = fail_in_row(rd, row, i,
                         "actions: rank %d, action %lld: '%s' is there "
                         "twice (each action runs once)",
                         word, (int)r, n - sc->off[r]);
        break;
      }
      *x = 1;
      n++;
      i = j;
    }
  }
  if (!rc)
    sc->off[R] = n;
  for (int s = 0; s < S && !rc; s++)
    for (int64_t m = 0; m < M && !rc; m++) {
      const uint8_t *x =
          &seen[((size_t)s * (size_t)M + (size_t)m) * PLAN_ACT_COUNT];
      const plan_ynode *row = an->u.seq.items[sc->stage_rank[s]];
      if (!x[PLAN_ACT_F])
        rc = plan_rd_fail(rd, row, PLAN_EINVALID,
                          "actions: no %dF%lld on stage %d's rank: every "
                          "stage runs every microbatch's forward",
                          s, (long long)m, s);
      else if (!(x[PLAN_ACT_B] ? !x[PLAN_ACT_I] && !x[PLAN_ACT_W]
                               : x[PLAN_ACT_I] && x[PLAN_ACT_W]))
        rc = plan_rd_fail(rd, row, PLAN_EINVALID,
                          "actions: stage %d's backward of microbatch %lld "
                          "is %dB%lld, or %dI%lld and %dW%lld, once",
                          s, (long long)m, s, (long long)m, s, (long long)m, s,
                          (long long)m);
    }
  free(seen);
  if (rc) {
    plan_schedule_free(sc);
    return rc;
  }
  *out = sc;
  return PLAN_OK;
}

int plan_lpipe_read_section(const plan_reader *rd, plan_lowered *l,
                            const plan_ynode *n) {
  static const char *const keys[] = {"axis",     "microbatches", "stages",
                                     "schedule", "actions",      NULL};
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "pipeline")) ||
      (rc = plan_rd_check_keys(rd, n, keys, "pipeline", NULL)))
    return rc;
  const plan_ynode *xn = plan_ymap_get(n, "axis"),
                   *mn = plan_ymap_get(n, "microbatches"),
                   *sn = plan_ymap_get(n, "stages"),
                   *kn = plan_ymap_get(n, "schedule"),
                   *an = plan_ymap_get(n, "actions");
  if (!xn || !mn || !sn || !kn || !an)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "pipeline needs 'axis', 'microbatches', 'stages', "
                        "'schedule' and 'actions'");
  const plan_mesh *m = &l->plan->mesh;
  if ((rc = plan_rd_expect_scalar(rd, xn, "axis")))
    return rc;
  int axis = plan_mesh_axis_find(m, xn->u.scalar.text);
  if (axis < 0)
    return plan_rd_fail(rd, xn, PLAN_EINVALID,
                        "pipeline: no mesh axis '%.40s' (the microbatch axis "
                        "is an axis of the mesh)",
                        xn->u.scalar.text);
  int64_t M, S;
  if ((rc = int_in(rd, mn, "microbatches", 1, 1000000, &M)) ||
      (rc = int_in(rd, sn, "stages", 1, 65536, &S)))
    return rc;
  if (M != m->axis_sizes[axis])
    return plan_rd_fail(rd, mn, PLAN_EINVALID,
                        "microbatches: %lld, but the microbatch axis '%s' "
                        "has %lld ranks (one per microbatch)",
                        (long long)M, m->axis_names[axis],
                        (long long)m->axis_sizes[axis]);
  int k;
  plan_reader vr = *rd; /* the file's version, which its plan read */
  vr.ver_major = l->plan->version_major;
  vr.ver_minor = l->plan->version_minor;
  if ((rc = plan_rd_schedule_name(&vr, kn, &k)))
    return rc;
  plan_lpipe *pp = calloc(1, sizeof *pp);
  if (!pp)
    return plan_oom();
  pp->axis = axis;
  pp->microbatches = M;
  pp->nstages = (int)S;
  l->pipe = pp;
  return read_actions(rd, an, k, (int)S, M, &pp->schedule);
}

int plan_lpipe_alloc_steps(plan_lowered *l, int nsteps) {
  plan_lpipe *pp = l->pipe;
  size_t n = (size_t)nsteps + 1;
  pp->stage = malloc(n * sizeof(int));
  pp->from_stage = malloc(n * sizeof(int));
  pp->phase = malloc(n);
  if (!pp->stage || !pp->from_stage || !pp->phase)
    return plan_oom();
  for (size_t i = 0; i < n; i++) {
    pp->stage[i] = pp->from_stage[i] = -1;
    pp->phase[i] = PLAN_LPHASE_PRE;
  }
  return PLAN_OK;
}

static bool pipe_key(const char *k) {
  return !strcmp(k, "stage") || !strcmp(k, "phase") ||
         !strcmp(k, "from_stage") || !strcmp(k, "mb_shift");
}

int plan_lpipe_strip_step(const plan_reader *rd, const plan_ynode *n,
                          plan_ynode *out) {
  *out = *n;
  if (n->kind != PLAN_Y_MAP)
    return PLAN_OK;
  plan_ypair *pairs =
      plan_arena_alloc(rd->arena, sizeof(plan_ypair) * (n->u.map.count + 1));
  if (!pairs)
    return plan_oom();
  size_t c = 0;
  for (size_t i = 0; i < n->u.map.count; i++)
    if (!pipe_key(n->u.map.pairs[i].key->u.scalar.text))
      pairs[c++] = n->u.map.pairs[i];
  out->u.map.pairs = pairs;
  out->u.map.count = c;
  return PLAN_OK;
}

static bool stage_phase(int ph) {
  return ph != PLAN_LPHASE_PRE && ph != PLAN_LPHASE_POST;
}

int plan_lpipe_read_step(const plan_reader *rd, plan_lowered *l,
                         const plan_ynode *n, int idx) {
  plan_lpipe *pp = l->pipe;
  plan_lstep *s = &l->steps[idx];
  const plan_ynode *pn = plan_ymap_get(n, "phase"),
                   *sn = plan_ymap_get(n, "stage"),
                   *fn = plan_ymap_get(n, "from_stage"),
                   *xn = plan_ymap_get(n, "mb_shift");
  int rc, ph;
  if (!pn)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "a step of a pipelined program needs a 'phase' (pre, "
                        "F, I, W, RECV_F, RECV_B or post)");
  if ((rc = plan_rd_enum(rd, pn, "phase", phase_names, PLAN_LPHASE_COUNT, &ph)))
    return rc;
  pp->phase[idx] = (uint8_t)ph;
  bool xfer = s->kind == PLAN_LSTEP_TRANSFER;
  bool recv = ph == PLAN_LPHASE_RECV_F || ph == PLAN_LPHASE_RECV_B;
  if (xfer != recv)
    return plan_rd_fail(rd, pn, PLAN_EINVALID,
                        xfer ? "a transfer runs in its receiving stage's "
                               "RECV_F or RECV_B phase"
                             : "phase %s is a transfer's (a step that "
                               "receives a buffer another stage wrote)",
                        plan_lphase_name(ph));
  if (s->kind == PLAN_LSTEP_INPUT && ph != PLAN_LPHASE_PRE)
    return plan_rd_fail(rd, pn, PLAN_EINVALID,
                        "an input step runs before the schedule (phase pre)");
  /* a stage's step runs for one microbatch at a time: what mixes them (the
   * accumulation over microbatches) runs after the schedule */
  if (s->kind == PLAN_LSTEP_REDIST && s->redist.axis == pp->axis &&
      stage_phase(ph))
    return plan_rd_fail(rd, pn, PLAN_EINVALID,
                        "a collective along the microbatch axis '%s' mixes "
                        "microbatches: it runs before or after the schedule "
                        "(phase pre or post), not in phase %s",
                        l->plan->mesh.axis_names[pp->axis],
                        plan_lphase_name(ph));
  int64_t v;
  if (stage_phase(ph) != (sn != NULL))
    return plan_rd_fail(rd, sn ? sn : n, PLAN_EINVALID,
                        sn ? "a step of phase %s runs on every rank, in no "
                             "stage: it has no 'stage'"
                           : "a step of phase %s runs in a stage: it needs a "
                             "'stage'",
                        plan_lphase_name(ph));
  if (sn) {
    if ((rc = int_in(rd, sn, "stage", 0, pp->nstages - 1, &v)))
      return rc;
    pp->stage[idx] = (int)v;
  }
  if (xfer != (fn != NULL))
    return plan_rd_fail(rd, fn ? fn : n, PLAN_EINVALID,
                        fn ? "only a transfer has a 'from_stage'"
                           : "a transfer needs a 'from_stage' (the stage that "
                             "sends)");
  if (fn) {
    if ((rc = int_in(rd, fn, "from_stage", 0, pp->nstages - 1, &v)))
      return rc;
    pp->from_stage[idx] = (int)v;
    bool fwd = ph == PLAN_LPHASE_RECV_F;
    if (v == pp->stage[idx] || (fwd && v > pp->stage[idx]) ||
        (!fwd && v < pp->stage[idx]))
      return plan_rd_fail(rd, fn, PLAN_EINVALID,
                          "a %s transfer into stage %d comes from an %s stage, "
                          "not stage %lld",
                          fwd ? "forward (RECV_F)" : "backward (RECV_B)",
                          pp->stage[idx], fwd ? "earlier" : "later",
                          (long long)v);
  }
  if (xn) {
    if (!xfer && s->kind != PLAN_LSTEP_INPUT)
      return plan_rd_fail(rd, xn, PLAN_EINVALID,
                          "only an input or a transfer has an 'mb_shift'");
    if ((rc = int_in(rd, xn, "mb_shift", 1 - pp->microbatches,
                     pp->microbatches - 1, &v)))
      return rc;
    s->mb_shift = v;
  }
  return PLAN_OK;
}

/* Whether a step of phase ph in a stage may read what phase pw of the same
 * stage wrote: a phase that runs before it for the same microbatch. */
static bool runs_before(int pw, int ph) {
  switch (ph) {
  case PLAN_LPHASE_F:
    return pw == PLAN_LPHASE_F || pw == PLAN_LPHASE_RECV_F;
  case PLAN_LPHASE_I:
    return pw != PLAN_LPHASE_W && pw != PLAN_LPHASE_POST;
  case PLAN_LPHASE_W:
    return pw != PLAN_LPHASE_POST;
  }
  return false;
}

int plan_lpipe_check_steps(const plan_reader *rd, plan_lowered *l,
                           const plan_ynode *steps, const int *written) {
  plan_lpipe *pp = l->pipe;
  const plan_program *prog = l->plan->program;
  pp->transfers = pp->local_transfers = 0;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    const plan_ynode *n = steps->u.seq.items[i];
    int ph = pp->phase[i], t = pp->stage[i];
    bool xfer = s->kind == PLAN_LSTEP_TRANSFER;
    for (int j = 0; j < s->nin && ph != PLAN_LPHASE_POST; j++) {
      int w = written[s->in[j]];
      int pw = pp->phase[w], sw = pp->stage[w];
      const char *tn = prog->tensors[l->bufs[s->in[j]].tensor].name;
      if (pw == PLAN_LPHASE_PRE)
        continue;
      if (ph == PLAN_LPHASE_PRE)
        return plan_rd_fail(rd, n, PLAN_EINVALID,
                            "step %d runs before the schedule but reads '%s', "
                            "which step %d (phase %s) writes later",
                            i, tn, w, plan_lphase_name(pw));
      if (xfer) {
        int want = ph == PLAN_LPHASE_RECV_F ? PLAN_LPHASE_F : PLAN_LPHASE_I;
        if (sw != pp->from_stage[i] || pw != want)
          return plan_rd_fail(rd, n, PLAN_EINVALID,
                              "transfer %d sends '%s' from stage %d's %s "
                              "phase, but step %d writes it in %s%d's %s "
                              "phase",
                              i, tn, pp->from_stage[i], plan_lphase_name(want),
                              w, sw < 0 ? "no stage" : "stage ",
                              sw < 0 ? 0 : sw, plan_lphase_name(pw));
        continue;
      }
      if (sw != t)
        return plan_rd_fail(rd, n, PLAN_EINVALID,
                            "step %d (stage %d) reads '%s', which step %d "
                            "writes in %s %d: a transfer into stage %d "
                            "receives it first",
                            i, t, tn, w,
                            sw < 0 ? "the steps after the schedule, not stage"
                                   : "stage",
                            sw, t);
      if (!runs_before(pw, ph))
        return plan_rd_fail(rd, n, PLAN_EINVALID,
                            "step %d (stage %d, phase %s) reads '%s', which "
                            "step %d writes in phase %s: it runs later for "
                            "the same microbatch",
                            i, t, plan_lphase_name(ph), tn, w,
                            plan_lphase_name(pw));
    }
    if (xfer) {
      const plan_lbuf *bi = &l->bufs[s->in[0]], *bo = &l->bufs[s->out[0]];
      if (bi->tensor != bo->tensor || !plan_placement_equal(&bi->pl, &bo->pl))
        return plan_rd_fail(rd, n, PLAN_EINVALID,
                            "a transfer's buffers hold one tensor in one "
                            "placement");
      if (plan_schedule_stage_rank(pp->schedule, pp->from_stage[i]) ==
          plan_schedule_stage_rank(pp->schedule, t))
        pp->local_transfers++;
      else
        pp->transfers++;
    }
  }
  return PLAN_OK;
}
