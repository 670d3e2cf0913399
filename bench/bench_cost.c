/* Cost model speed: how many op and redistribution cost evaluations per
 * second a search gets, and how long pricing a whole plan takes.
 *
 * usage: bench_cost [-n REPS] [--hardware NAME] PLAN...
 *
 * The plans are Llama-style decoder stacks written by bench/gen_plan.py
 * (run.sh makes 8 and 32 layers on dp x tp = 2x4 and 8x8). For each plan,
 * with the h100 profile unless --hardware says otherwise, each measured
 * for at least 0.3 s (best of REPS such runs), through the struct-based
 * pricing a search calls (libplan/space.h):
 *   op (plan)        plan_cost_op_seconds on every op, its own strategy
 *   op (replicated)  the same with every operand R (another strategy: other
 *                    block sizes, compute instead of memory bound)
 *   redist (pairs)   plan_cost_redist_seconds from each input's producer
 *                    placement to what its consumer's strategy needs (most
 *                    pairs are equal: what a search sees along a chain)
 *   redist (to R)    the same from every sharded or partial producer
 *                    placement to R: all-gathers and all-reduces, every
 *                    call plans and prices real steps
 *   candidate        what a search pays per candidate strategy of an op:
 *                    the op's cost plus each input's redistribution from its
 *                    producer (the to-R set), counted as 1 + nin
 *                    evaluations
 *   plan             plan_cost_plan on the whole plan (the `plan cost` work
 *                    without loading), best of REPS
 * The target (docs/cost.md): at least 1e6 evaluations/s (candidate row), so
 * that a search over a 32-layer model, which needs on the order of 1e5 of
 * them with the dynamic program over layers, runs well under 1 s.
 * PASS/FAIL per plan; the exit status is 0 unless something fails to run. */
#define _DEFAULT_SOURCE /* wait4, in bench_common.h */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "libplan/libplan.h"

#define TARGET 1e6
#define MIN_SECONDS 0.3

typedef struct pair {
  int tensor;
  plan_placement from, to;
} pair;

typedef struct bench {
  const plan_plan *p;
  const plan_cost_model *m;
  pair *pairs, *to_r;
  int npairs, nto_r;
  int *op_first, *op_count; /* per op: its inputs in to_r */
} bench;

static volatile double sink;

static void replicated(plan_placement *pl, int naxes) {
  memset(pl, 0, sizeof *pl);
  pl->naxes = (uint8_t)naxes;
}

static bool is_replicated(const plan_placement *pl) {
  for (int a = 0; a < pl->naxes; a++)
    if (pl->ax[a].kind != PLAN_PL_R)
      return false;
  return true;
}

/* How tensor t is produced: its producer's output placement, or the
 * leaf's stored one (R when the plan states none). */
static int produced(plan_placement *out, const plan_plan *p, int t) {
  const plan_program *prog = plan_get_program(p);
  int op = plan_program_tensor_producer(prog, t);
  if (op < 0) {
    if (plan_get_placement(out, p, t))
      replicated(out, plan_mesh_axis_count(p));
    return 0;
  }
  plan_op_strategy s;
  if (plan_get_strategy(&s, p, op))
    return -1;
  for (int k = 0; k < plan_program_op_output_count(prog, op); k++)
    if (plan_program_op_output(prog, op, k) == t) {
      *out = s.out[k];
      return 0;
    }
  return -1;
}

static int setup(bench *b) {
  const plan_program *prog = plan_get_program(b->p);
  int nops = plan_program_op_count(prog), n = 0;
  for (int i = 0; i < nops; i++)
    n += plan_program_op_input_count(prog, i);
  b->pairs = calloc((size_t)n + 1, sizeof *b->pairs);
  b->to_r = calloc((size_t)n + 1, sizeof *b->to_r);
  b->op_first = calloc((size_t)nops + 1, sizeof(int));
  b->op_count = calloc((size_t)nops + 1, sizeof(int));
  if (!b->pairs || !b->to_r || !b->op_first || !b->op_count)
    return -1;
  for (int i = 0; i < nops; i++) {
    plan_op_strategy s;
    if (plan_get_strategy(&s, b->p, i))
      return -1;
    b->op_first[i] = b->nto_r;
    for (int j = 0; j < plan_program_op_input_count(prog, i); j++) {
      pair *q = &b->pairs[b->npairs++];
      q->tensor = plan_program_op_input(prog, i, j);
      if (produced(&q->from, b->p, q->tensor))
        return -1;
      q->to = s.in[j];
      if (!is_replicated(&q->from)) {
        pair *r = &b->to_r[b->nto_r++];
        r->tensor = q->tensor;
        r->from = q->from;
        replicated(&r->to, plan_mesh_axis_count(b->p));
      }
    }
    b->op_count[i] = b->nto_r - b->op_first[i];
  }
  return 0;
}

enum { OP_PLAN, OP_REPL, RD_PAIRS, RD_TO_R, CANDIDATE, NKINDS };
static const char *const kind_names[NKINDS] = {"op (plan)", "op (replicated)",
                                               "redist (pairs)",
                                               "redist (to R)", "candidate"};

/* One pass over the plan; returns the evaluations made. */
static long pass(const bench *b, int kind) {
  int nops = plan_program_op_count(plan_get_program(b->p));
  plan_placement repl[PLAN_MAX_OPERANDS];
  for (int j = 0; j < PLAN_MAX_OPERANDS; j++)
    replicated(&repl[j], plan_mesh_axis_count(b->p));
  double acc = 0, t;
  long n = 0;
  switch (kind) {
  case OP_PLAN:
  case OP_REPL:
    for (int i = 0; i < nops; i++) {
      plan_cost_op_seconds(&t, b->m, b->p, i, kind == OP_REPL ? repl : NULL,
                           kind == OP_REPL ? repl : NULL);
      acc += t;
      n++;
    }
    break;
  case RD_PAIRS:
  case RD_TO_R: {
    const pair *v = kind == RD_PAIRS ? b->pairs : b->to_r;
    int cnt = kind == RD_PAIRS ? b->npairs : b->nto_r;
    for (int i = 0; i < cnt; i++) {
      plan_cost_redist_seconds(&t, b->m, b->p, v[i].tensor, &v[i].from,
                               &v[i].to);
      acc += t;
      n++;
    }
    break;
  }
  default:
    for (int i = 0; i < nops; i++) {
      plan_cost_op_seconds(&t, b->m, b->p, i, repl, repl);
      acc += t;
      n++;
      for (int k = 0; k < b->op_count[i]; k++) {
        const pair *q = &b->to_r[b->op_first[i] + k];
        plan_cost_redist_seconds(&t, b->m, b->p, q->tensor, &q->from, &q->to);
        acc += t;
        n++;
      }
    }
  }
  sink = acc;
  return n;
}

/* Evaluations per second: passes repeated for MIN_SECONDS, best of reps. */
static double rate(const bench *b, int kind, int reps) {
  double best = 0;
  pass(b, kind); /* warm up */
  for (int r = 0; r < reps; r++) {
    long n = 0;
    double t0 = bench_now(), t1;
    do {
      n += pass(b, kind);
      t1 = bench_now();
    } while (t1 - t0 < MIN_SECONDS);
    double v = (double)n / (t1 - t0);
    if (v > best)
      best = v;
  }
  return best;
}

static int run(const char *file, const char *hw, int reps, int *fails) {
  plan_plan *p;
  if (plan_load(&p, file)) {
    char buf[1024];
    fprintf(stderr, "bench_cost: %s\n", plan_error_format(buf, sizeof buf));
    return -1;
  }
  plan_cost_model *m;
  if (plan_cost_model_new(&m, p, hw)) {
    char buf[1024];
    fprintf(stderr, "bench_cost: %s\n", plan_error_format(buf, sizeof buf));
    plan_free(p);
    return -1;
  }
  bench b = {.p = p, .m = m};
  int rc = setup(&b);
  if (!rc) {
    char mesh[128] = "";
    for (int a = 0; a < plan_mesh_axis_count(p); a++)
      snprintf(mesh + strlen(mesh), sizeof mesh - strlen(mesh), "%s%s=%lld",
               a ? "x" : "", plan_mesh_axis_name(p, a),
               (long long)plan_mesh_axis_size(p, a));
    const char *base = strrchr(file, '/');
    printf("%s: %d ops, %d tensors, mesh %s, %d producer->consumer pairs "
           "(%d to R)\n",
           base ? base + 1 : file, plan_program_op_count(plan_get_program(p)),
           plan_program_tensor_count(plan_get_program(p)), mesh, b.npairs,
           b.nto_r);
    double cand = 0;
    for (int k = 0; k < NKINDS; k++) {
      double v = rate(&b, k, reps);
      printf("  %-18s %12.3g evaluations/s  (%6.0f ns each)\n", kind_names[k],
             v, 1e9 / v);
      if (k == CANDIDATE)
        cand = v;
    }
    double best = 1e30;
    plan_cost_report *r = NULL;
    for (int i = 0; i < reps + 1; i++) {
      double t0 = bench_now();
      if (plan_cost_plan(&r, m, p)) {
        rc = -1;
        break;
      }
      double t = bench_now() - t0;
      if (i > 0 && t < best)
        best = t;
      if (i < reps)
        plan_cost_report_free(r), r = NULL;
    }
    if (!rc) {
      printf("  %-18s %12.3f ms  (modeled step %.2f ms, peak memory %.2f GB "
             "per device)\n",
             "plan_cost_plan", best * 1e3,
             plan_cost_report_step_seconds(r) * 1e3,
             plan_cost_report_memory_peak(r) / 1e9);
      bool ok = cand >= TARGET;
      printf("  target: >= %.0e evaluations/s (candidate row): %s\n\n", TARGET,
             ok ? "PASS" : "FAIL");
      *fails += !ok;
    }
    plan_cost_report_free(r);
  }
  free(b.pairs);
  free(b.to_r);
  free(b.op_first);
  free(b.op_count);
  plan_cost_model_free(m);
  plan_free(p);
  return rc;
}

int main(int argc, char **argv) {
  int reps = 3, fails = 0, nfiles = 0;
  const char *hw = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1)
        reps = 1;
    } else if (!strcmp(argv[i], "--hardware") && i + 1 < argc) {
      hw = argv[++i];
    } else if (argv[i][0] == '-') {
      fprintf(stderr,
              "usage: bench_cost [-n REPS] [--hardware NAME] PLAN...\n");
      return 2;
    } else {
      nfiles++;
      if (run(argv[i], hw, reps, &fails))
        return 1;
    }
  }
  if (!nfiles) {
    fprintf(stderr, "usage: bench_cost [-n REPS] [--hardware NAME] PLAN...\n");
    return 2;
  }
  printf("cost model: %s\n", fails ? "FAIL (a target missed)" : "PASS");
  return 0;
}
