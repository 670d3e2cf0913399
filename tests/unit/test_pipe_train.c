/* Pipelined training steps (lower_pipe.c, verifier/verify_pipe.c): the
 * examples verify under every schedule, the steps sit in the stages and
 * phases the plan says, and the pipeline bugs of the corpus are caught with
 * the right first wrong tensor and diagnosis, in exact and float mode:
 *
 * - accumulation summed where it should average (each microbatch's loss a
 *   mean over its own samples, the gradients summed);
 * - a microbatch paired with another microbatch's labels;
 * - a send/recv off by one microbatch;
 * - gradients cleared between microbatches;
 * - a schedule that deadlocks (found while running it). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "libplan/plan.h"
#include "libplan/schedule.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "read/plan_read.h"
#include "schedule/schedule_actions.h"
#include "verify_int.h"
#include "verify_mutations.h"

#define T1F1B "examples/transformer4-1f1b.plan.yaml"
#define TZB "examples/transformer4-zb-h1.plan.yaml"
#define TINT "examples/transformer4-interleaved.plan.yaml"
#define TZBV "examples/transformer4-zbv.plan.yaml"
#define TDPV "examples/transformer4-dualpipev.plan.yaml"
#define MLP8 "examples/pipeline-1f1b.plan.yaml"
#define GRID "examples/pipeline-grid.plan.yaml"

static const char *tensor_of(const plan_lowered *l, int buf) {
  return l->plan->program->tensors[l->bufs[buf].tensor].name;
}

static plan_verify_options options(int mode) {
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
  return o;
}

/* Every example verifies, in both modes and for two seeds. */
static void test_examples_equal(void **state) {
  (void)state;
  const char *files[] = {T1F1B, TZB, TINT, TZBV, TDPV, MLP8, GRID};
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    plan_plan *p = load(files[f]);
    for (int mode = 0; mode < 2; mode++)
      for (uint64_t seed = 0; seed < 2; seed++) {
        plan_verify_options o = options(mode);
        o.seed = seed;
        plan_verify_report *r = NULL;
        assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
        if (!plan_verify_report_equal(r))
          fprintf(stderr, "%s", plan_verify_report_text(r));
        assert_true(plan_verify_report_equal(r));
        assert_non_null(strstr(plan_verify_report_text(r), "microbatches"));
        plan_verify_report_free(r);
      }
    plan_free(p);
  }
}

static void expect_equal_text(const char *text, const char *what) {
  plan_plan *p = NULL;
  if (plan_load_buffer(&p, text, strlen(text), what, "examples")) {
    char buf[512];
    fprintf(stderr, "%s\n", plan_error_format(buf, sizeof buf));
  }
  assert_non_null(p);
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_options o = options(mode);
    plan_verify_report *r = NULL;
    assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
    if (!plan_verify_report_equal(r))
      fprintf(stderr, "%s: %s", what, plan_verify_report_text(r));
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
  }
  plan_free(p);
}

/* Variants: GPipe; a forward-only pipeline; Adam with clipping by global
 * norm; a skip connection from stage 0 to stage 3 (a transfer past the
 * next stage, and its gradient back). */
static void test_variants(void **state) {
  (void)state;
  char *t = replace(read_text(T1F1B), "schedule: 1f1b", "schedule: gpipe");
  expect_equal_text(t, "gpipe.plan.yaml");
  free(t);
  t = replace(read_text(T1F1B),
              "optimizer: {kind: sgd, lr: 0.05, momentum: 0.9}",
              "optimizer: {kind: adam, lr: 0.001}\n  clip_grad_norm: 1.0");
  expect_equal_text(t, "adam-clip.plan.yaml");
  free(t);
  t = read_text(MLP8);
  char *tr = strstr(t, "training:"), *pv = strstr(t, "provenance:");
  assert_non_null(tr);
  assert_non_null(pv);
  memmove(tr, pv, strlen(pv) + 1); /* no training section */
  expect_equal_text(t, "forward.plan.yaml");
  free(t);
  t = read_text(MLP8);
  t = replace(
      t, "- {name: head,  op: matmul,        in: [a7, w_head], out: logits}",
      "- {name: skip,  op: add,           in: [a7, a1], out: a7s}\n"
      "    - {name: head,  op: matmul,        in: [a7s, w_head], out: logits}");
  t = replace(t, "layers.*.act: {in: [S(0)R], out: S(0)R}",
              "layers.*.act: {in: [S(0)R], out: S(0)R}\n"
              "  skip:         {in: [S(0)R, S(0)R], out: S(0)R}");
  t = replace(t, "- {ops: [\"layers.[67].*\", head, loss]}",
              "- {ops: [\"layers.[67].*\", skip, head, loss]}");
  plan_plan *p = NULL;
  assert_int_equal(
      plan_load_buffer(&p, t, strlen(t), "skip.plan.yaml", "examples"),
      PLAN_OK);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  /* a1 goes from stage 0 to stage 3; its gradient's contribution from
   * stage 3 goes back to stage 1, where it meets the other (the sum runs
   * in the earliest stage of its inputs) and goes on to stage 0 */
  int fwd03 = 0, back31 = 0;
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_TRANSFER) {
      fwd03 += l->pipe->from_stage[i] == 0 && l->pipe->stage[i] == 3;
      back31 += l->pipe->from_stage[i] == 3 && l->pipe->stage[i] == 1;
    }
  assert_int_equal(fwd03, 1);
  assert_int_equal(back31, 1);
  plan_lowered_free(l);
  plan_free(p);
  expect_equal_text(t, "skip.plan.yaml");
  free(t);
}

/* Where the steps run: every op in its stage, forward ops in F, the
 * backward in I or W; transfers between consecutive stages only here,
 * one each way per stage boundary (the residual stream and its gradient);
 * the accumulation over microbatches after the schedule. */
static void test_placement_of_steps(void **state) {
  (void)state;
  const char *files[] = {T1F1B, TINT};
  const int want_transfers[] = {2, 6};
  for (int f = 0; f < 2; f++) {
    plan_plan *p = load(files[f]);
    plan_lowered *l = NULL;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    const plan_lpipe *pp = l->pipe;
    assert_non_null(pp);
    assert_int_equal(pp->microbatches, 4);
    assert_int_equal(pp->transfers, want_transfers[f]);
    assert_string_equal(l->plan->mesh.axis_names[pp->axis], "mb");
    int accum = 0, nw = 0;
    for (int i = 0; i < l->nsteps; i++) {
      const plan_lstep *s = &l->steps[i];
      if (s->kind == PLAN_LSTEP_OP) {
        int fwd = l->train->map->origin[s->op];
        if (fwd >= 0)
          assert_int_equal(pp->stage[i], p->pipeline.op_stage[fwd]);
        if (s->op < l->train->map->nfwd_ops)
          assert_int_equal(pp->phase[i], PLAN_LPHASE_F);
        else
          assert_true(pp->phase[i] == PLAN_LPHASE_I ||
                      pp->phase[i] == PLAN_LPHASE_W);
        nw += pp->phase[i] == PLAN_LPHASE_W;
      } else if (s->kind == PLAN_LSTEP_TRANSFER) {
        int d = pp->phase[i] == PLAN_LPHASE_RECV_F ? 1 : -1;
        assert_int_equal(pp->stage[i] - pp->from_stage[i], d);
      } else if (s->kind == PLAN_LSTEP_REDIST && s->redist.axis == pp->axis) {
        assert_int_equal(pp->phase[i], PLAN_LPHASE_POST);
        accum += s->redist.kind == PLAN_REDIST_ALL_REDUCE;
      }
    }
    /* one accumulation per float param (the loss is summed too) */
    assert_true(accum >= l->train->nparams);
    assert_true(nw > 0);
    plan_lowered_free(l);
    plan_free(p);
  }
}

/* zbv and dualpipev place their 4 stages on 2 ranks in a V (stages 0 and
 * 3 on rank 0, 1 and 2 on rank 1): the schedule says so, the hand-over
 * between stages 1 and 2 stays on rank 1 (a local transfer, not a
 * send/recv), the forward-only plan verifies too, and a run-time wait
 * names the rank the placement gives (stage 3's F on rank 0). */
static void test_v_placement(void **state) {
  (void)state;
  const char *files[] = {TZBV, TDPV};
  static const int rank_of[4] = {0, 1, 1, 0};
  for (int f = 0; f < 2; f++) {
    plan_plan *p = load(files[f]);
    plan_lowered *l = NULL;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    const plan_lpipe *pp = l->pipe;
    for (int s = 0; s < 4; s++)
      assert_int_equal(plan_schedule_stage_rank(pp->schedule, s), rank_of[s]);
    assert_int_equal(pp->transfers, 4);
    assert_int_equal(pp->local_transfers, 2);
    int local = 0;
    for (int i = 0; i < l->nsteps; i++)
      if (l->steps[i].kind == PLAN_LSTEP_TRANSFER &&
          rank_of[pp->stage[i]] == rank_of[pp->from_stage[i]]) {
        assert_true((pp->stage[i] == 1 && pp->from_stage[i] == 2) ||
                    (pp->stage[i] == 2 && pp->from_stage[i] == 1));
        local++;
      }
    assert_int_equal(local, 2);
    /* the report counts the send/recv pairs (the call frees l) */
    plan_verify_options o = options(0);
    plan_verify_report *r = NULL;
    assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
    assert_true(plan_verify_report_equal(r));
    assert_non_null(strstr(plan_verify_report_text(r), "4 send/recv"));
    plan_verify_report_free(r);
    /* rank 0 starts with stage 3's I of microbatch 0: it waits for its
     * own 3F0, and rank 1 for 0SEND_F0 */
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    plan_schedule *sc = l->pipe->schedule;
    int64_t at = -1;
    for (int64_t i = sc->off[0]; i < sc->off[1] && at < 0; i++)
      if (sc->acts[i].stage == 3 && sc->acts[i].microbatch == 0 &&
          (sc->acts[i].kind == PLAN_ACT_I || sc->acts[i].kind == PLAN_ACT_B))
        at = i;
    assert_true(at > sc->off[0]);
    plan_action a = sc->acts[at];
    memmove(&sc->acts[sc->off[0] + 1], &sc->acts[sc->off[0]],
            sizeof a * (size_t)(at - sc->off[0]));
    sc->acts[sc->off[0]] = a;
    assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
    assert_false(plan_verify_report_equal(r));
    const char *d = plan_verify_report_diagnosis(r);
    char want[64];
    snprintf(want, sizeof want, "rank 0 waits at 3%s0 for 3F0 on rank 0",
             a.kind == PLAN_ACT_I ? "I" : "B");
    if (!strstr(d, want))
      fprintf(stderr, "diagnosis: %s\n", d);
    assert_non_null(strstr(d, want));
    plan_verify_report_free(r);
    plan_free(p);
  }
  /* forward only: the same V, no training section */
  for (int f = 0; f < 2; f++) {
    char *t = read_text(files[f]);
    char *tr = strstr(t, "training:"), *pv = strstr(t, "provenance:");
    assert_non_null(tr);
    assert_non_null(pv);
    memmove(tr, pv, strlen(pv) + 1);
    expect_equal_text(t, f ? "dualpipev-forward.plan.yaml"
                           : "zbv-forward.plan.yaml");
    free(t);
  }
}

/* ---- the bugs -------------------------------------------------------------
 */

typedef struct bug {
  const char *name;
  int (*inject)(plan_lowered *l); /* before the run; 0 when done */
  plan_verify_step_hook hook;
  const char *first_op, *first_tensor;
  const char *diagnosis[3]; /* substrings of the diagnosis */
} bug;

/* Each microbatch's loss a mean over its own samples, the gradients summed:
 * the loss's seed is m on every microbatch where the mean over the whole
 * batch wants 1 (a stand-in for a runner that computes it so). */
static int seed_times_m(void *user, const plan_lowered *l, int step, int64_t mb,
                        plan_vblock *const *bufs) {
  (void)user;
  (void)mb;
  const plan_lstep *s = &l->steps[step];
  if (s->kind != PLAN_LSTEP_INPUT ||
      strcmp(tensor_of(l, s->out[0]), "grad/loss.out"))
    return 0;
  for (int64_t r = 0; r < l->plan->mesh.ndevices; r++)
    bufs[s->out[0]][r].data[0] = (double)l->pipe->microbatches;
  return 0;
}

static int labels_shifted(plan_lowered *l) {
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_INPUT &&
        !strcmp(tensor_of(l, l->steps[i].out[0]), "labels")) {
      l->steps[i].mb_shift = 1;
      return 0;
    }
  return -1;
}

static int recv_off_by_one(plan_lowered *l) {
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_TRANSFER &&
        l->pipe->phase[i] == PLAN_LPHASE_RECV_F) {
      l->steps[i].mb_shift = 1;
      return 0;
    }
  return -1;
}

/* A runner that zeroes each gradient before every microbatch: what is
 * left after the schedule is the last microbatch's contribution. The
 * accumulation's input blocks of the last microbatch replace its sum. */
static int cleared(void *user, const plan_lowered *l, int step, int64_t mb,
                   plan_vblock *const *bufs) {
  (void)user;
  (void)mb;
  const plan_lstep *s = &l->steps[step];
  const plan_lpipe *pp = l->pipe;
  if (s->kind != PLAN_LSTEP_REDIST || s->redist.axis != pp->axis ||
      s->redist.kind != PLAN_REDIST_ALL_REDUCE ||
      strncmp(tensor_of(l, s->in[0]), "grad/", 5))
    return 0;
  const plan_mesh *m = &l->plan->mesh;
  for (int64_t r = 0; r < m->ndevices; r++) {
    /* the rank of the last microbatch at r's other coordinates */
    int64_t c[PLAN_MAX_MESH_AXES], x = r, q = 0;
    for (int a = m->naxes - 1; a >= 0; a--) {
      c[a] = x % m->axis_sizes[a];
      x /= m->axis_sizes[a];
    }
    c[pp->axis] = pp->microbatches - 1;
    for (int a = 0; a < m->naxes; a++)
      q = q * m->axis_sizes[a] + c[a];
    memcpy(bufs[s->out[0]][r].data, bufs[s->in[0]][q].data,
           sizeof(double) * (size_t)bufs[s->out[0]][r].n);
  }
  return 0;
}

static plan_verify_report *run_bug(const char *file, const bug *b, int mode) {
  plan_plan *p = load(file);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  if (b->inject)
    assert_int_equal(b->inject(l), 0);
  plan_verify_options o = options(mode);
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_lowered_hooked(&r, p, l, &o, b->hook, NULL),
                   PLAN_OK);
  plan_free(p); /* the report keeps its own strings */
  return r;
}

static void check_bug(const char *file, const bug *b) {
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_report *r = run_bug(file, b, mode);
    const char *text = plan_verify_report_text(r);
    const char *d = plan_verify_report_diagnosis(r);
    fprintf(stderr, "%s (%s mode): first divergent %s (tensor '%s')\n  %s\n",
            b->name, mode ? "float" : "exact", plan_verify_report_first_op(r),
            plan_verify_report_first_tensor(r), d ? d : "");
    assert_false(plan_verify_report_equal(r));
    if (!plan_verify_report_first_op(r) ||
        strcmp(plan_verify_report_first_op(r), b->first_op) ||
        strcmp(plan_verify_report_first_tensor(r), b->first_tensor))
      fprintf(stderr, "%s", text);
    assert_string_equal(plan_verify_report_first_op(r), b->first_op);
    assert_string_equal(plan_verify_report_first_tensor(r), b->first_tensor);
    for (int k = 0; k < 3 && b->diagnosis[k]; k++) {
      if (!strstr(d, b->diagnosis[k]))
        fprintf(stderr, "want '%s' in the diagnosis\n", b->diagnosis[k]);
      assert_non_null(strstr(d, b->diagnosis[k]));
    }
    plan_verify_report_free(r);
  }
}

static void test_accumulation_summed(void **state) {
  (void)state;
  bug b = {"accumulation summed where averaged",
           NULL,
           seed_times_m,
           "grad/loss/dlogits",
           "grad/logits",
           {"4 times the reference", "microbatches"}};
  check_bug(T1F1B, &b);
}

static void test_labels_of_another_microbatch(void **state) {
  (void)state;
  bug b = {"labels of another microbatch",
           labels_shifted,
           NULL,
           "split into microbatches",
           "labels",
           {"microbatch 0 holds microbatch 1's", "0<-1, 1<-2, 2<-3, 3<-0"}};
  check_bug(T1F1B, &b);
}

static void test_send_recv_off_by_one(void **state) {
  (void)state;
  bug b = {"send/recv off by one microbatch",
           recv_off_by_one,
           NULL,
           "send_f from stage 0 to stage 1",
           "",
           {"microbatch 0 holds microbatch 1's"}};
  /* the residual stream: its name depends on the generator */
  plan_plan *p = load(T1F1B);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_TRANSFER &&
        l->pipe->phase[i] == PLAN_LPHASE_RECV_F) {
      b.first_tensor = strdup(tensor_of(l, l->steps[i].out[0]));
      break;
    }
  plan_lowered_free(l);
  plan_free(p);
  assert_non_null(b.first_tensor);
  check_bug(T1F1B, &b);
  check_bug(TZB, &b);
  free((char *)b.first_tensor);
}

static void test_cleared_between_microbatches(void **state) {
  (void)state;
  bug b = {"gradients cleared between microbatches",
           NULL,
           cleared,
           "as delivered",
           "grad/embed.weight",
           {"microbatch 3's contribution", "cleared between microbatches"}};
  check_bug(T1F1B, &b);
}

/* A grid whose ranks wait on each other, run: the verifier names both. */
static void test_deadlock_at_run_time(void **state) {
  (void)state;
  plan_plan *p = load(GRID);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  /* rank 0 waits for the gradient of microbatch 0 before sending its
   * activation; rank 1 waits for that activation */
  const char *rows[2] = {"0RECV_B0 0F0 0SEND_F0 0B0 0F1 0SEND_F1 0B1 0F2 "
                         "0SEND_F2 0B2 0F3 0SEND_F3 0B3",
                         "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 "
                         "1RECV_F2 1F2 1B2 1RECV_F3 1F3 1B3"};
  plan_schedule *bad = NULL;
  assert_int_equal(plan_schedule_from_grid(&bad, 2, 4, rows, 2), PLAN_OK);
  plan_schedule_free(l->pipe->schedule);
  l->pipe->schedule = bad;
  plan_verify_options o = options(0);
  plan_verify_report *r = NULL;
  assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
  assert_false(plan_verify_report_equal(r));
  const char *d = plan_verify_report_diagnosis(r);
  fprintf(stderr, "deadlock: %s\n", d);
  assert_string_equal(plan_verify_report_first_op(r), "schedule");
  assert_non_null(strstr(d, "deadlocks at run time"));
  assert_non_null(strstr(d, "rank 0 waits at 0RECV_B0 for 1SEND_B0"));
  assert_non_null(strstr(d, "rank 1 waits at 1RECV_F0 for 0SEND_F0"));
  plan_verify_report_free(r);
  plan_free(p);
}

/* Shape reduction keeps each input's batch dim divisible by the
 * microbatches (nested over its devices' split): the reduced pipelines
 * verify, and a pipeline bug is found reduced, with the same first op. */
static void test_reduced(void **state) {
  (void)state;
  const char *files[] = {T1F1B, TINT, TZBV, TDPV, MLP8};
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    plan_plan *p = load(files[f]), *red = NULL;
    char *sum = NULL;
    assert_int_equal(plan_reduce_shapes(&red, &sum, p), PLAN_OK);
    assert_non_null(strstr(sum, "fewer elements"));
    plan_verify_options o = options(0);
    plan_verify_report *r = NULL;
    assert_int_equal(plan_verify(&r, red, &o), PLAN_OK);
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
    if (f == 0) { /* the send/recv bug, reduced */
      plan_lowered *l = NULL;
      assert_int_equal(plan_lower(&l, red), PLAN_OK);
      assert_int_equal(recv_off_by_one(l), 0);
      assert_int_equal(plan_verify_lowered(&r, red, l, &o), PLAN_OK);
      assert_false(plan_verify_report_equal(r));
      assert_string_equal(plan_verify_report_first_op(r),
                          "send_f from stage 0 to stage 1");
      plan_verify_report_free(r);
    }
    free(sum);
    plan_free(red);
    plan_free(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples_equal),
      cmocka_unit_test(test_variants),
      cmocka_unit_test(test_placement_of_steps),
      cmocka_unit_test(test_v_placement),
      cmocka_unit_test(test_accumulation_summed),
      cmocka_unit_test(test_labels_of_another_microbatch),
      cmocka_unit_test(test_send_recv_off_by_one),
      cmocka_unit_test(test_cleared_between_microbatches),
      cmocka_unit_test(test_deadlock_at_run_time),
      cmocka_unit_test(test_reduced),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
