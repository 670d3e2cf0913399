/* Verifier speed benchmark: how the numerical verifier's lowered
 * (distributed) run compares with its reference run, per FLOP and in
 * memory, and how its matmul path compares with raw OpenBLAS.
 *
 * usage: bench_verify [--batch B] [--seq S] [--hidden H] [--heads N]
 *                     [--ffn F] [--dp D] [--tp T] [-n REPS]
 *                     [--child-reps N] [--quick]
 *
 * The plan (written here, modelled on examples/transformer-block.plan.yaml)
 * is a pre-norm transformer block, f32, batch 8, seq 512, hidden 1024, 16
 * heads, MLP 4 x hidden by default, on a dp x tp = 2 x 4 mesh: Megatron
 * tensor parallelism (column-parallel fused QKV and fc1, row-parallel
 * output projection and fc2 leaving P(sum) over tp, all-reduced for the
 * residual adds; norms and residual adds replicated over tp) plus data
 * parallelism on the batch. The same program on a one-device mesh, every
 * placement R, is the reference-sized run. Verification is in float mode.
 *
 * Phases. The public API runs everything at once (lower, the reference
 * run, the lowered run, the comparison, and a reference in f64 only when
 * a low-precision tensor misses its tolerance), so the phases are separated by
 * subtraction, with the internal entry plan_verify_lowered (verify_int.h, as
 * tests/unit/ test_verify.c uses it) on the same lowered program with steps
 * removed: full      every step noredist  the REDIST steps removed (ops run on
 * stale blocks: same shapes) inputs    only the INPUT steps (leaf blocks
 * filled) none      no steps (buffers allocated, compared as zeros) so, per
 * mesh, fill = inputs - none, ops = noredist - inputs, collectives = full -
 * noredist, and the run = full - none. "none" itself is the rest of
 * plan_verify: both reference runs and the comparison. The reference run is
 * the one-device program's run (full - none on the 1-device mesh): the same
 * executor on whole tensors, the op list run_reference runs. Each figure is
 * one fresh child process (this program re-executed), timed with
 * CLOCK_MONOTONIC around plan_verify_lowered; its peak RSS is ru_maxrss
 * from wait4. The memory target compares the peak of verifying the plan
 * ("full" on the mesh) with the peak of the reference run alone ("none" on
 * the one-device mesh). The run's own memory is the peak of "full" minus the
 * peak of "none" (the blocks it touches); the accounting line adds up the
 * blocks' sizes from the layouts.
 *
 * FLOPs: matmul and linear 2mnk (+ the bias), other computing ops one per
 * output element (softmax and the norms five), data movement none; summed
 * over every rank's local blocks, so replicated compute counts.
 *
 * Matmul path: for every matmul/linear of the lowered program (rank 0's
 * local shapes) and of the reference, best of REPS: raw cblas_sgemm on f32
 * arrays (the kernel's own decomposition: one gemm, or one per batch); the
 * CPU runner's run_op on f32 views; and the verifier's path around it
 * (doubles converted to f32 copies for every operand and the output,
 * run_op, the result converted back, the copies freed: what run_op in
 * verifier/verify.c does; keep in step with it).
 *
 * The verifier's copy: plan_vx_lowered_new (vx_program.c, what every
 * verification makes first) on the mesh's lowered program, best of 3 x
 * REPS, and its share of the lowered run; every buffer's block on every
 * rank laid out through the public plan_lowered_placement_block (the
 * verifier's call) and through the core's plan_redist_local_layout_r, the
 * same blocks, timed in the same run.
 *
 * Targets (the issue): lowered time per FLOP <= 1.5 x reference's; the
 * verifier's matmul path >= 80 % of raw sgemm GFLOP/s; the lowered run's
 * memory <= 3 x the reference run's. PASS/FAIL per target; the exit status
 * is 0 unless something fails to run (a benchmark is not a test). */
#define _DEFAULT_SOURCE /* wait4 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "libplan/libplan.h"
#include "kernels.h"
#include "lower/lower.h"
#include "ir/ops.h"
#include "read/plan_read.h"
#include "runner.h"
#include "verify_int.h"

typedef struct size_cfg {
  long batch, seq, hidden, heads, ffn, dp, tp;
} size_cfg;

static size_cfg g_cfg = {8, 512, 1024, 16, 0, 2, 4};
static int g_reps = 3;  /* matmul timings: best of */
static int g_vreps = 1; /* children per phase: best of */

static double now(void) {
  return bench_now();
}

static void die_last(const char *what) {
  const plan_error *e = plan_error_last();
  fprintf(stderr, "bench_verify: %s failed: %s\n", what,
          e && e->message ? e->message : "?");
  exit(2);
}

/* ---- the plan --------------------------------------------------------------
 */

typedef struct sbuf {
  char *s;
  size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k =
        vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k >= 0 && b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = (b->cap ? b->cap * 2 : 8192) + (size_t)(k > 0 ? k : 0);
    char *s = realloc(b->s, cap);
    if (!s) {
      fprintf(stderr, "bench_verify: out of memory\n");
      exit(2);
    }
    b->s = s;
    b->cap = cap;
  }
}

/* The block as YAML. one != 0: one device, every placement R. */
static char *plan_yaml(const size_cfg *c, int one, size_t *len) {
  long B = c->batch, S = c->seq, H = c->hidden, NH = c->heads, D = H / NH;
  long F = c->ffn;
  sbuf b = {0};
  /* placements on a dp x tp mesh, or R on the one-device mesh */
#define PL(two, single) (one ? (single) : (two))
  put(&b, "libplan: \"0.1\"\nprogram:\n  name: bench-verify-block\n"
          "  tensors:\n");
  put(&b, "    x: {shape: [%ld, %ld, %ld], dtype: f32, role: input}\n", B, S,
      H);
  put(&b, "    ln1_w: {shape: [%ld], dtype: f32, role: param}\n", H);
  put(&b, "    ln1_b: {shape: [%ld], dtype: f32, role: param}\n", H);
  put(&b, "    w_qkv: {shape: [%ld, %ld], dtype: f32, role: param}\n", 3 * H,
      H);
  put(&b, "    b_qkv: {shape: [%ld], dtype: f32, role: param}\n", 3 * H);
  put(&b,
      "    mask: {shape: [%ld, %ld], dtype: f32, role: const, init: "
      "{recipe: causal_mask}}\n",
      S, S);
  put(&b, "    w_o: {shape: [%ld, %ld], dtype: f32, role: param}\n", H, H);
  put(&b, "    ln2_w: {shape: [%ld], dtype: f32, role: param}\n", H);
  put(&b, "    ln2_b: {shape: [%ld], dtype: f32, role: param}\n", H);
  put(&b, "    w_fc1: {shape: [%ld, %ld], dtype: f32, role: param}\n", F, H);
  put(&b, "    b_fc1: {shape: [%ld], dtype: f32, role: param}\n", F);
  put(&b, "    w_fc2: {shape: [%ld, %ld], dtype: f32, role: param}\n", F, H);
  put(&b, "  ops:\n");
  put(&b, "    - {name: ln1, op: layernorm, in: [x, ln1_w, ln1_b], out: h1}\n"
          "    - {name: qkv, op: linear, in: [h1, w_qkv, b_qkv], out: qkv}\n");
  put(&b,
      "    - {name: heads, op: reshape, in: [qkv], out: qkv4, attrs: {shape: "
      "[%ld, %ld, %ld, %ld]}}\n",
      B, S, NH, 3 * D);
  put(&b, "    - {name: perm_in, op: permute, in: [qkv4], out: qkvh, attrs: "
          "{perm: [0, 2, 1, 3]}}\n");
  put(&b,
      "    - {name: split, op: split, in: [qkvh], out: [q, k, v], attrs: "
      "{dim: -1, sizes: [%ld, %ld, %ld]}}\n",
      D, D, D);
  put(&b, "    - {name: scores, op: matmul, in: [q, k], out: s, attrs: "
          "{transpose_b: true}}\n");
  put(&b,
      "    - {name: scale, op: scale, in: [s], out: s_scaled, attrs: "
      "{factor: %.17g}}\n",
      1.0 / sqrt((double)D));
  put(&b,
      "    - {name: mask, op: add, in: [s_scaled, mask], out: s_masked}\n"
      "    - {name: softmax, op: softmax, in: [s_masked], out: probs, attrs: "
      "{dim: -1}}\n"
      "    - {name: context, op: matmul, in: [probs, v], out: ctx}\n"
      "    - {name: perm_out, op: permute, in: [ctx], out: ctx_t, attrs: "
      "{perm: [0, 2, 1, 3]}}\n");
  put(&b,
      "    - {name: merge, op: reshape, in: [ctx_t], out: ctx_m, attrs: "
      "{shape: [%ld, %ld, %ld]}}\n",
      B, S, H);
  put(&b, "    - {name: proj, op: matmul, in: [ctx_m, w_o], out: attn_out}\n"
          "    - {name: res1, op: add, in: [x, attn_out], out: r1}\n"
          "    - {name: ln2, op: layernorm, in: [r1, ln2_w, ln2_b], out: h2}\n"
          "    - {name: fc1, op: linear, in: [h2, w_fc1, b_fc1], out: f1}\n"
          "    - {name: act, op: gelu, in: [f1], out: f1a}\n"
          "    - {name: fc2, op: matmul, in: [f1a, w_fc2], out: f2}\n"
          "    - {name: res2, op: add, in: [r1, f2], out: y}\n"
          "  outputs: [y]\n");
  if (one)
    put(&b, "mesh:\n  axes: [dev=1]\n  devices: iota\n");
  else
    put(&b, "mesh:\n  axes: [dp=%ld, tp=%ld]\n  devices: iota\n", c->dp, c->tp);
  const char *leaves[][2] = {
      {"x", "S(0)R"},     {"ln1_w", "RR"},    {"ln1_b", "RR"},
      {"w_qkv", "RS(0)"}, {"b_qkv", "RS(0)"}, {"mask", "RR"},
      {"w_o", "RS(0)"},   {"ln2_w", "RR"},    {"ln2_b", "RR"},
      {"w_fc1", "RS(0)"}, {"b_fc1", "RS(0)"}, {"w_fc2", "RS(0)"}};
  put(&b, "placements:\n");
  for (size_t i = 0; i < sizeof leaves / sizeof *leaves; i++)
    put(&b, "  %s: %s\n", leaves[i][0], PL(leaves[i][1], "R"));
  /* op, operand counts (in, out), its two-axis strategy */
  static const struct {
    const char *op;
    int nin, nout;
    const char *strategy;
  } strat[] = {
      {"ln1", 3, 1, "[S(0)R, RR, RR], out: S(0)R"},
      {"qkv", 3, 1, "[S(0)R, RS(0), RS(0)], out: S(0)S(2)"},
      {"heads", 1, 1, "[S(0)S(2)], out: S(0)S(2)"},
      {"perm_in", 1, 1, "[S(0)S(2)], out: S(0)S(1)"},
      {"split", 1, 3, "[S(0)S(1)], out: [S(0)S(1), S(0)S(1), S(0)S(1)]"},
      {"scores", 2, 1, "[S(0)S(1), S(0)S(1)], out: S(0)S(1)"},
      {"scale", 1, 1, "[S(0)S(1)], out: S(0)S(1)"},
      {"mask", 2, 1, "[S(0)S(1), RR], out: S(0)S(1)"},
      {"softmax", 1, 1, "[S(0)S(1)], out: S(0)S(1)"},
      {"context", 2, 1, "[S(0)S(1), S(0)S(1)], out: S(0)S(1)"},
      {"perm_out", 1, 1, "[S(0)S(1)], out: S(0)S(2)"},
      {"merge", 1, 1, "[S(0)S(2)], out: S(0)S(2)"},
      {"proj", 2, 1, "[S(0)S(2), RS(0)], out: S(0)P(sum)"},
      {"res1", 2, 1, "[S(0)R, S(0)R], out: S(0)R"},
      {"ln2", 3, 1, "[S(0)R, RR, RR], out: S(0)R"},
      {"fc1", 3, 1, "[S(0)R, RS(0), RS(0)], out: S(0)S(2)"},
      {"act", 1, 1, "[S(0)S(2)], out: S(0)S(2)"},
      {"fc2", 2, 1, "[S(0)S(2), RS(0)], out: S(0)P(sum)"},
      {"res2", 2, 1, "[S(0)R, S(0)R], out: S(0)R"}};
  put(&b, "strategies:\n");
  for (size_t i = 0; i < sizeof strat / sizeof *strat; i++) {
    if (!one) {
      put(&b, "  %s: {in: %s}\n", strat[i].op, strat[i].strategy);
      continue;
    }
    put(&b, "  %s: {in: [", strat[i].op); /* every operand R */
    for (int j = 0; j < strat[i].nin; j++)
      put(&b, "%sR", j ? ", " : "");
    put(&b, "], out: %s", strat[i].nout > 1 ? "[" : "");
    for (int j = 0; j < strat[i].nout; j++)
      put(&b, "%sR", j ? ", " : "");
    put(&b, "%s}\n", strat[i].nout > 1 ? "]" : "");
  }
  put(&b, "outputs:\n  y: %s\n", PL("S(0)R", "R"));
#undef PL
  *len = b.n;
  return b.s;
}

static plan_plan *load_plan(int one) {
  size_t len;
  char *yaml = plan_yaml(&g_cfg, one, &len);
  plan_plan *p;
  if (plan_load_buffer(&p, yaml, len,
                       one ? "bench-verify-1dev.yaml" : "bench-verify.yaml",
                       NULL))
    die_last("plan_load_buffer");
  free(yaml);
  plan_diags *d;
  if (plan_validate(&d, p))
    die_last("plan_validate");
  if (plan_diags_count_at_least(d, PLAN_SEV_ERROR)) {
    fprintf(stderr, "bench_verify: the generated plan does not validate\n");
    exit(2);
  }
  plan_diags_free(d);
  return p;
}

static plan_lowered *lower_plan(const plan_plan *p) {
  plan_lowered *l;
  if (plan_lower(&l, p))
    die_last("plan_lower");
  return l;
}

/* ---- local shapes and FLOPs
 * -------------------------------------------------- */

static int64_t count_of(const int64_t *d, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= d[i];
  return n;
}

static void rank_coord(const plan_mesh *m, int64_t r, int64_t *coord) {
  for (int a = m->naxes - 1; a >= 0; a--) {
    coord[a] = r % m->axis_sizes[a];
    r /= m->axis_sizes[a];
  }
}

/* Rank r's view (dims, global dims, offset; no data) of lowered buffer b. */
static void buf_view(const plan_lowered *l, int b, int64_t r, plan_dtype dt,
                     plan_view *v) {
  const plan_plan *p = l->plan;
  const plan_tensor *t = &p->program->tensors[l->bufs[b].tensor];
  int64_t coord[PLAN_MAX_MESH_AXES] = {0};
  rank_coord(&p->mesh, r, coord);
  memset(v, 0, sizeof *v);
  v->dtype = dt;
  v->rank = t->rank;
  plan_redist_local_layout(&l->bufs[b].pl, t->dims, t->rank, p->mesh.axis_sizes,
                           coord, v->dims, v->offset);
  memcpy(v->global_dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
}

static void step_views(const plan_lowered *l, const plan_lstep *s, int64_t r,
                       plan_view *in, plan_view *out) {
  for (int j = 0; j < s->nin; j++)
    buf_view(l, s->in[j], r, PLAN_F32, &in[j]);
  for (int k = 0; k < s->nout; k++)
    buf_view(l, s->out[k], r, PLAN_F32, &out[k]);
}

typedef struct mm_shape {
  int64_t m, n, k, batch;
  bool ta, tb, fold, bias;
} mm_shape;

static mm_shape mm_of(const plan_op *op, const plan_view *in,
                      const plan_view *out) {
  mm_shape s;
  memset(&s, 0, sizeof s);
  if (op->kind == PLAN_OP_LINEAR) {
    s.k = in[0].dims[in[0].rank - 1];
    s.m = count_of(in[0].dims, in[0].rank - 1);
    s.n = in[1].dims[0];
    s.batch = 1;
    s.tb = true;
    s.fold = true;
    s.bias = op->nin > 2;
    return s;
  }
  const plan_view *a = &in[0], *b = &in[1];
  s.ta = op->attrs && op->attrs[0].b;
  s.tb = op->attrs && op->attrs[1].b;
  s.m = a->dims[s.ta ? a->rank - 1 : a->rank - 2];
  s.k = a->dims[s.ta ? a->rank - 2 : a->rank - 1];
  s.n = b->dims[s.tb ? b->rank - 2 : b->rank - 1];
  s.batch = count_of(out->dims, out->rank - 2);
  s.fold = !s.ta && b->rank == 2;
  return s;
}

static double op_flops(const plan_op *op, const plan_view *in,
                       const plan_view *out) {
  double n = (double)count_of(out[0].dims, out[0].rank);
  switch (op->kind) {
  case PLAN_OP_MATMUL:
  case PLAN_OP_LINEAR: {
    mm_shape s = mm_of(op, in, out);
    return 2.0 * (double)s.m * (double)s.n * (double)s.k * (double)s.batch +
           (s.bias ? (double)(s.m * s.n) : 0);
  }
  case PLAN_OP_SOFTMAX:
  case PLAN_OP_LAYERNORM:
  case PLAN_OP_RMSNORM:
    return 5 * n;
  case PLAN_OP_TRANSPOSE:
  case PLAN_OP_PERMUTE:
  case PLAN_OP_RESHAPE:
  case PLAN_OP_SPLIT:
  case PLAN_OP_CONCAT:
    return 0;
  default:
    return n;
  }
}

typedef struct totals {
  double flops, mm_flops;
  double block_bytes; /* every buffer's blocks, as doubles */
} totals;

static totals count_lowered(const plan_lowered *l) {
  totals t = {0, 0, 0};
  int64_t nr = l->plan->mesh.ndevices;
  for (int b = 0; b < l->nbufs; b++)
    for (int64_t r = 0; r < nr; r++) {
      plan_view v;
      buf_view(l, b, r, PLAN_F64, &v);
      t.block_bytes += 8.0 * (double)count_of(v.dims, v.rank);
    }
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind != PLAN_LSTEP_OP)
      continue;
    const plan_op *op = &l->plan->program->ops[s->op];
    for (int64_t r = 0; r < nr; r++) {
      plan_view in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
      step_views(l, s, r, in, out);
      double f = op_flops(op, in, out);
      t.flops += f;
      if (op->kind == PLAN_OP_MATMUL || op->kind == PLAN_OP_LINEAR)
        t.mm_flops += f;
    }
  }
  return t;
}

/* ---- children: one verification each
 * ------------------------------------------ */

enum { STRIP_FULL, STRIP_NOREDIST, STRIP_INPUTS, STRIP_NONE, STRIP_COUNT };
static const char *const strip_names[] = {"full", "noredist", "inputs", "none"};

static void strip(plan_lowered *l, int how) {
  int n = 0;
  for (int i = 0; i < l->nsteps; i++) {
    plan_lstep_kind k = l->steps[i].kind;
    bool keep = how == STRIP_FULL ||
                (how == STRIP_NOREDIST && k != PLAN_LSTEP_REDIST) ||
                (how == STRIP_INPUTS && k == PLAN_LSTEP_INPUT);
    if (keep)
      l->steps[n++] = l->steps[i];
  }
  l->nsteps = n; /* the steps' operand lists live in the arena */
}

/* MODE is "dist:STRIP" or "one:STRIP"; prints "name value" lines. */
static int child_main(const char *mode) {
  int one = !strncmp(mode, "one:", 4);
  const char *how = strchr(mode, ':');
  if (!how)
    return 2;
  int h = 0;
  while (h < STRIP_COUNT && strcmp(strip_names[h], how + 1))
    h++;
  if (h == STRIP_COUNT)
    return 2;
  plan_plan *p = load_plan(one);
  double t0 = now();
  plan_lowered *l = lower_plan(p);
  double t1 = now();
  strip(l, h);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = PLAN_VERIFY_FLOAT;
  /* stripped runs compare stale or zero blocks: an unbounded tolerance
   * keeps them on the comparison's equal path, as the full run is, so the
   * verifier does not run its f64 reference (made only for low-precision
   * mismatches) in them alone */
  if (h != STRIP_FULL)
    o.rtol = o.atol = 1e300;
  plan_verify_report *rep;
  double t2 = now();
  if (plan_verify_lowered(&rep, p, l, &o))
    die_last("plan_verify_lowered");
  double t3 = now();
  printf("lower %.6f\nverify %.6f\nequal %d\n", t1 - t0, t3 - t2,
         plan_verify_report_equal(rep));
  printf("phase_ref %.6f\nphase_low %.6f\nphase_cmp %.6f\n",
         rep->seconds_reference, rep->seconds_lowered, rep->seconds_compare);
  if (h == STRIP_FULL && !plan_verify_report_equal(rep))
    fprintf(stderr, "%s", plan_verify_report_text(rep));
  plan_verify_report_free(rep);
  plan_free(p);
  return 0;
}

static char **g_argv;
static int g_argc;

typedef struct child_res {
  double lower, verify;
  double phase_ref, phase_low, phase_cmp; /* timed inside the verifier */
  int equal;
  long rss_kib;
} child_res;

/* Re-executes this program as `--child MODE <the same options>`. */
static int child_run(const char *mode, child_res *res) {
  char **av = calloc((size_t)g_argc + 3, sizeof *av);
  if (!av)
    return -1;
  av[0] = g_argv[0];
  av[1] = "--child";
  av[2] = (char *)mode;
  for (int i = 1; i < g_argc; i++)
    av[i + 2] = g_argv[i];
  char out[512];
  long rss = bench_child("bench_verify", "/proc/self/exe", av, out, sizeof out);
  free(av);
  if (rss < 0)
    return -1;
  memset(res, 0, sizeof *res);
  const char *s;
  if ((s = strstr(out, "lower ")))
    res->lower = atof(s + 6);
  if ((s = strstr(out, "verify ")))
    res->verify = atof(s + 7);
  if ((s = strstr(out, "equal ")))
    res->equal = atoi(s + 6);
  if ((s = strstr(out, "phase_ref ")))
    res->phase_ref = atof(s + 10);
  if ((s = strstr(out, "phase_low ")))
    res->phase_low = atof(s + 10);
  if ((s = strstr(out, "phase_cmp ")))
    res->phase_cmp = atof(s + 10);
  res->rss_kib = rss;
  return 0;
}

/* Best of reps children for one mode (time), the smallest peak too. */
static int measure(const char *mode, int reps, child_res *best) {
  for (int i = 0; i < reps; i++) {
    child_res r;
    if (child_run(mode, &r))
      return -1;
    if (!i || r.verify < best->verify) {
      long rss = i && best->rss_kib < r.rss_kib ? best->rss_kib : r.rss_kib;
      *best = r;
      best->rss_kib = rss;
    }
  }
  return 0;
}

/* ---- the matmul path
 * ------------------------------------------------------------ */

static void fill_f(float *a, int64_t n, unsigned seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    a[i] = (float)((double)(seed >> 8) / 16777216.0 - 0.5);
  }
}

/* verifier/verify.c's to_kernel / from_kernel for an f32 kernel: into
 * the context's scratch buffer, which stays allocated from op to op */
static float *to_f32(float *d, const double *src, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    d[i] = (float)src[i];
  return d;
}

static void from_f32(const float *src, double *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = (double)src[i];
}

static void raw_gemm(const mm_shape *s, const float *a, const float *b,
                     float *c) {
  CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = s->tb ? CblasTrans : CblasNoTrans;
  int lda = (int)(s->ta ? s->m : s->k), ldb = (int)(s->tb ? s->k : s->n);
  if (s->fold) {
    cblas_sgemm(CblasRowMajor, ta, tb, (int)(s->batch * s->m), (int)s->n,
                (int)s->k, 1, a, lda, b, ldb, 0, c, (int)s->n);
    return;
  }
  for (int64_t q = 0; q < s->batch; q++)
    cblas_sgemm(CblasRowMajor, ta, tb, (int)s->m, (int)s->n, (int)s->k, 1,
                a + q * s->m * s->k, lda, b + q * s->k * s->n, ldb, 0,
                c + q * s->m * s->n, (int)s->n);
}

typedef struct mm_time {
  double flops, raw, runner, verifier, convert; /* seconds, best of reps */
} mm_time;

/* Times one op step's matmul three ways on rank 0's blocks. */
static int time_matmul(const plan_lowered *l, const plan_lstep *s,
                       mm_time *res) {
  const plan_op *op = &l->plan->program->ops[s->op];
  const plan_runner_vtable *rv = plan_cpu_runner();
  plan_view in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  step_views(l, s, 0, in, out);
  mm_shape sh = mm_of(op, in, out);
  int64_t n_in[PLAN_MAX_OPERANDS], n_out = count_of(out[0].dims, out[0].rank);
  float *fin[PLAN_MAX_OPERANDS] = {NULL};
  double *din[PLAN_MAX_OPERANDS] = {NULL};
  float *fout = malloc(4 * (size_t)n_out);
  double *dout = calloc((size_t)n_out, 8);
  int rc = fout && dout ? 0 : -1;
  for (int j = 0; j < s->nin && !rc; j++) {
    n_in[j] = count_of(in[j].dims, in[j].rank);
    fin[j] = malloc(4 * (size_t)n_in[j]);
    din[j] = malloc(8 * (size_t)n_in[j]);
    if (!fin[j] || !din[j]) {
      rc = -1;
      break;
    }
    fill_f(fin[j], n_in[j], 17u + (unsigned)j);
    from_f32(fin[j], din[j], n_in[j]);
    in[j].data = fin[j];
  }
  out[0].data = fout;
  float *scratch[PLAN_MAX_OPERANDS + 1] = {NULL};
  for (int j = 0; j <= s->nin && !rc; j++) {
    int64_t n = j < s->nin ? n_in[j] : n_out;
    if (!(scratch[j < s->nin ? j : PLAN_MAX_OPERANDS] =
              calloc((size_t)(n > 0 ? n : 1), 4)))
      rc = -1;
  }
  memset(res, 0, sizeof *res);
  res->flops =
      2.0 * (double)sh.m * (double)sh.n * (double)sh.k * (double)sh.batch;
  char err[256];
  plan_kernel_ctx kc = {false, 0};
  for (int rep = 0; rep <= g_reps && !rc; rep++) { /* rep 0: warm-up */
    double t0 = now();
    raw_gemm(&sh, fin[0], fin[1], fout);
    double t1 = now();
    if (rv->run_op(op->kind, op->attrs, in, op->nin, out, 1, &kc, err,
                   sizeof err)) {
      fprintf(stderr, "bench_verify: run_op: %s\n", err);
      rc = -1;
      break;
    }
    double t2 = now();
    /* the verifier's path (verifier/verify.c run_op): f32 copies of every
     * operand in the context's scratch buffers (allocated before the first
     * op, reused: warm after it), the kernel into an f32 scratch output,
     * the result back to the double block */
    plan_view vin[PLAN_MAX_OPERANDS], vout = out[0];
    for (int j = 0; j < s->nin; j++) {
      vin[j] = in[j];
      vin[j].data = to_f32(scratch[j], din[j], n_in[j]);
    }
    vout.data = scratch[PLAN_MAX_OPERANDS];
    double t3 = now();
    if (rv->run_op(op->kind, op->attrs, vin, op->nin, &vout, 1, &kc, err,
                   sizeof err))
      rc = -1;
    double t4 = now();
    from_f32(vout.data, dout, n_out);
    double t5 = now();
    if (rep == 1 || t1 - t0 < res->raw)
      res->raw = t1 - t0;
    if (rep == 1 || t2 - t1 < res->runner)
      res->runner = t2 - t1;
    if (rep == 1 || t5 - t2 < res->verifier) {
      res->verifier = t5 - t2;
      res->convert = (t3 - t2) + (t5 - t4);
    }
  }
  for (int j = 0; j < s->nin; j++) {
    free(fin[j]);
    free(din[j]);
  }
  for (int j = 0; j <= PLAN_MAX_OPERANDS; j++)
    free(scratch[j]);
  free(fout);
  free(dout);
  return rc;
}

static int matmul_section(const char *title, const plan_lowered *l,
                          mm_time *sum) {
  printf("%s\n", title);
  printf("  %-8s %-26s %9s %9s %9s %9s  %s\n", "op", "m x n x k (x batch)",
         "raw GF/s", "run_op", "verifier", "convert", "verifier/raw");
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind != PLAN_LSTEP_OP)
      continue;
    const plan_op *op = &l->plan->program->ops[s->op];
    if (op->kind != PLAN_OP_MATMUL && op->kind != PLAN_OP_LINEAR)
      continue;
    plan_view in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
    step_views(l, s, 0, in, out);
    mm_shape sh = mm_of(op, in, out);
    mm_time t;
    if (time_matmul(l, s, &t))
      return -1;
    char shape[64];
    snprintf(shape, sizeof shape, "%lld x %lld x %lld%s", (long long)sh.m,
             (long long)sh.n, (long long)sh.k, sh.batch > 1 ? " x" : "");
    if (sh.batch > 1)
      snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " %lld",
               (long long)sh.batch);
    printf("  %-8s %-26s %9.1f %9.1f %9.1f %8.1f%%  %6.1f%%\n", op->name, shape,
           t.flops / t.raw * 1e-9, t.flops / t.runner * 1e-9,
           t.flops / t.verifier * 1e-9, 100.0 * t.convert / t.verifier,
           100.0 * t.raw / t.verifier);
    sum->flops += t.flops;
    sum->raw += t.raw;
    sum->runner += t.runner;
    sum->verifier += t.verifier;
    sum->convert += t.convert;
  }
  return 0;
}

/* ---- main
 * ------------------------------------------------------------------------ */

/* The verifier's own copy of the lowered program (vx_program.c), made once
 * per verification from the public views: its cost, best of reps; and the
 * blocks of every buffer on every rank laid out through the public
 * plan_lowered_placement_block (what the verifier calls) against the
 * core's plan_redist_local_layout_r it replaced, best of reps each, in the
 * same run. */
static int time_copy(const plan_lowered *l, double *copy_s, double *pub_s,
                     double *core_s) {
  *copy_s = *pub_s = *core_s = 1e30;
  const plan_mesh *m = &l->plan->mesh;
  int64_t sink = 0;
  for (int rep = 0; rep < g_reps * 3; rep++) {
    double t0 = now();
    vx_lowered *v;
    if (plan_vx_lowered_new(&v, l))
      return 1;
    double t1 = now();
    for (int b = 0; b < v->nbufs; b++)
      for (int64_t r = 0; r < m->ndevices; r++) {
        int64_t coord[PLAN_MAX_MESH_AXES], d[PLAN_MAX_RANK], o[PLAN_MAX_RANK];
        rank_coord(m, r, coord);
        plan_vx_block_of(v, &v->bufs[b].pl, v->bufs[b].tensor, coord, d, o);
        sink += d[0] + o[0];
      }
    double t2 = now();
    for (int b = 0; b < l->nbufs; b++)
      for (int64_t r = 0; r < m->ndevices; r++) {
        int64_t coord[PLAN_MAX_MESH_AXES], d[PLAN_MAX_RANK], o[PLAN_MAX_RANK];
        rank_coord(m, r, coord);
        const plan_tensor *t = &l->plan->program->tensors[l->bufs[b].tensor];
        plan_redist_local_layout_r(&l->bufs[b].pl, t->dims, t->rank,
                                   m->axis_sizes, m->ratios, m->nratios, coord,
                                   d, o);
        sink -= d[0] + o[0];
      }
    double t3 = now();
    plan_vx_lowered_free(v);
    *copy_s = fmin(*copy_s, t1 - t0);
    *pub_s = fmin(*pub_s, t2 - t1);
    *core_s = fmin(*core_s, t3 - t2);
  }
  return sink != 0; /* both give the same blocks */
}

static const char *verdict(int ok) {
  return ok ? "PASS" : "FAIL";
}

static long opt_long(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "bench_verify: %s needs a value\n", argv[*i]);
    exit(2);
  }
  return atol(argv[++*i]);
}

int main(int argc, char **argv) {
  const char *child = NULL;
  int quick = 0;
  g_argc = argc;
  g_argv = argv;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--child") && i + 1 < argc) {
      child = argv[++i];
      g_argv = argv + i; /* not used by children */
    } else if (!strcmp(a, "--batch"))
      g_cfg.batch = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--seq"))
      g_cfg.seq = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--hidden"))
      g_cfg.hidden = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--heads"))
      g_cfg.heads = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--ffn"))
      g_cfg.ffn = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--dp"))
      g_cfg.dp = opt_long(argc, argv, &i);
    else if (!strcmp(a, "--tp"))
      g_cfg.tp = opt_long(argc, argv, &i);
    else if (!strcmp(a, "-n"))
      g_reps = (int)opt_long(argc, argv, &i);
    else if (!strcmp(a, "--child-reps"))
      g_vreps = (int)opt_long(argc, argv, &i);
    else if (!strcmp(a, "--quick"))
      quick = 1;
    else {
      fprintf(stderr, "usage: bench_verify [--batch B] [--seq S] [--hidden H] "
                      "[--heads N] [--ffn F] [--dp D] [--tp T] [-n REPS] "
                      "[--child-reps N] [--quick]\n");
      return 2;
    }
  }
  if (!g_cfg.ffn)
    g_cfg.ffn = 4 * g_cfg.hidden;
  if (g_reps < 1)
    g_reps = 1;
  if (g_vreps < 1)
    g_vreps = 1;
  if (g_cfg.heads < 1 || g_cfg.hidden % g_cfg.heads || g_cfg.dp < 1 ||
      g_cfg.tp < 1) {
    fprintf(stderr, "bench_verify: bad sizes\n");
    return 2;
  }
  if (child)
    return child_main(child);
  g_argv = argv;

  printf("transformer block: batch %ld, seq %ld, hidden %ld, %ld heads of "
         "%ld, ffn %ld, f32; mesh dp=%ld x tp=%ld (%ld ranks), float mode\n",
         g_cfg.batch, g_cfg.seq, g_cfg.hidden, g_cfg.heads,
         g_cfg.hidden / g_cfg.heads, g_cfg.ffn, g_cfg.dp, g_cfg.tp,
         g_cfg.dp * g_cfg.tp);
  plan_plan *pd = load_plan(0), *p1 = load_plan(1);
  plan_lowered *ld = lower_plan(pd), *l1 = lower_plan(p1);
  totals td = count_lowered(ld), t1 = count_lowered(l1);
  printf("FLOPs: lowered %.2f G over all ranks (matmul %.2f G), reference "
         "%.2f G (matmul %.2f G); %d lowered steps, collectives:",
         td.flops * 1e-9, td.mm_flops * 1e-9, t1.flops * 1e-9,
         t1.mm_flops * 1e-9, ld->nsteps);
  for (int k = 0; k < PLAN_REDIST_COUNT; k++)
    if (ld->collectives[k])
      printf(" %d %s", ld->collectives[k],
             plan_redist_kind_name((plan_redist_kind)k));
  printf("\n\n");

  /* ---- phases, one child each ---- */
  int vreps = g_vreps;
  child_res rd[STRIP_COUNT], r1[STRIP_COUNT];
  memset(rd, 0, sizeof rd);
  memset(r1, 0, sizeof r1);
  char mode[32];
  for (int h = 0; h < STRIP_COUNT; h++) {
    if (quick && (h == STRIP_NOREDIST || h == STRIP_INPUTS))
      continue;
    snprintf(mode, sizeof mode, "dist:%s", strip_names[h]);
    if (measure(mode, vreps, &rd[h]))
      return 2;
    if (h == STRIP_NOREDIST)
      continue; /* the one-device plan has no collectives */
    snprintf(mode, sizeof mode, "one:%s", strip_names[h]);
    if (measure(mode, vreps, &r1[h]))
      return 2;
  }
  r1[STRIP_NOREDIST] = r1[STRIP_FULL];
  if (!rd[STRIP_FULL].equal)
    printf("warning: the distributed plan did not verify EQUAL\n");
  printf("%-44s %10s %10s %12s\n", "phase (wall s, one child each)", "lowered",
         "reference", "peak RSS MiB");
  printf("%-44s %10.3f %10.3f\n", "plan_lower", rd[STRIP_FULL].lower,
         r1[STRIP_FULL].lower);
  printf("%-44s %10.3f %10.3f %6.0f %5.0f\n",
         "plan_verify_lowered, every step (full)", rd[STRIP_FULL].verify,
         r1[STRIP_FULL].verify, rd[STRIP_FULL].rss_kib / 1024.0,
         r1[STRIP_FULL].rss_kib / 1024.0);
  printf("%-44s %10.3f %10.3f %6.0f %5.0f\n",
         "  no steps: reference run + compare", rd[STRIP_NONE].verify,
         r1[STRIP_NONE].verify, rd[STRIP_NONE].rss_kib / 1024.0,
         r1[STRIP_NONE].rss_kib / 1024.0);
  double wd = rd[STRIP_FULL].verify - rd[STRIP_NONE].verify;
  double w1 = r1[STRIP_FULL].verify - r1[STRIP_NONE].verify;
  if (!quick) {
    printf("%-44s %10.3f %10.3f\n", "  run: input fill (inputs - none)",
           rd[STRIP_INPUTS].verify - rd[STRIP_NONE].verify,
           r1[STRIP_INPUTS].verify - r1[STRIP_NONE].verify);
    printf("%-44s %10.3f %10.3f\n", "  run: ops (noredist - inputs)",
           rd[STRIP_NOREDIST].verify - rd[STRIP_INPUTS].verify,
           r1[STRIP_FULL].verify - r1[STRIP_INPUTS].verify);
    printf("%-44s %10.3f %10s\n", "  run: collectives (full - noredist)",
           rd[STRIP_FULL].verify - rd[STRIP_NOREDIST].verify, "-");
  }
  printf("%-44s %10.3f %10.3f\n", "  the run (full - none)", wd, w1);
  /* the same verification timed inside: its reference run is the
   * one-device program, its lowered run the plan's, so the per-FLOP
   * target is judged on these, not on differences between processes */
  const child_res *fd = &rd[STRIP_FULL];
  printf("%-44s %10.3f %10.3f\n", "timed inside plan_verify_lowered: the runs",
         fd->phase_low, fd->phase_ref);
  printf("%-44s %10.3f\n", "  the comparison", fd->phase_cmp);
  printf("%-44s %10.2f %10.2f\n", "  ms per GFLOP", wd / td.flops * 1e12,
         w1 / t1.flops * 1e12);
  printf("%-44s %10.2f %10.2f\n", "  effective GFLOP/s", td.flops / wd * 1e-9,
         t1.flops / w1 * 1e-9);
  double mem_d = (double)(rd[STRIP_FULL].rss_kib - rd[STRIP_NONE].rss_kib);
  double mem_1 = (double)(r1[STRIP_FULL].rss_kib - r1[STRIP_NONE].rss_kib);
  printf("%-44s %10.0f %10.0f\n", "  the run's memory, MiB (peak full - none)",
         mem_d / 1024, mem_1 / 1024);
  printf("%-44s %10.0f %10.0f\n", "  blocks held, MiB (from the layouts)",
         td.block_bytes / 1048576, t1.block_bytes / 1048576);
  printf("\n");

  /* ---- the verifier's copy of the lowered program ---- */
  double copy_s, pub_s, core_s;
  if (time_copy(ld, &copy_s, &pub_s, &core_s)) {
    fprintf(stderr, "bench_verify: the copy's blocks differ from the core's\n");
    return 2;
  }
  printf("the verifier's copy of the lowered program (vx_program.c), best "
         "of %d:\n",
         g_reps * 3);
  printf("  %-42s %10.1f us  (%.4f%% of the lowered run)\n", "made once",
         copy_s * 1e6, 100 * copy_s / fd->phase_low);
  printf("  %-42s %10.1f us\n", "every block laid out, public view",
         pub_s * 1e6);
  printf("  %-42s %10.1f us  (public / core %.2fx)\n",
         "the same, the core's layout", core_s * 1e6,
         core_s > 0 ? pub_s / core_s : 1.0);
  printf("\n");

  /* ---- the matmul path ---- */
  mm_time sd = {0, 0, 0, 0, 0}, s1 = {0, 0, 0, 0, 0};
  if (matmul_section(
          "matmul path, lowered (rank 0's blocks), best of reps:", ld, &sd) ||
      matmul_section("matmul path, reference:", l1, &s1))
    return 2;
  mm_time all = {sd.flops + s1.flops, sd.raw + s1.raw, sd.runner + s1.runner,
                 sd.verifier + s1.verifier, sd.convert + s1.convert};
  printf("  %-35s %9.1f %9.1f %9.1f %8.1f%%  %6.1f%%\n", "all of the above",
         all.flops / all.raw * 1e-9, all.flops / all.runner * 1e-9,
         all.flops / all.verifier * 1e-9, 100.0 * all.convert / all.verifier,
         100.0 * all.raw / all.verifier);
  printf("\n");

  double per_flop = (fd->phase_low / td.flops) / (fd->phase_ref / t1.flops);
  double mm_ratio = all.raw / all.verifier;
  /* the whole verification of the plan against the reference run alone
   * (the one-device program with no lowered steps): the incremental
   * figures above say little now that the one-device run reuses its
   * reference's memory for its blocks */
  double mem_ratio =
      (double)rd[STRIP_FULL].rss_kib / (double)r1[STRIP_NONE].rss_kib;
  printf("targets:\n");
  printf("  lowered / reference time per FLOP        %6.2fx   (<= 1.5x)   %s\n",
         per_flop, verdict(per_flop <= 1.5));
  printf(
      "  verifier matmul path / raw sgemm GFLOP/s %6.1f%%   (>= 80%%)    %s\n",
      100 * mm_ratio, verdict(mm_ratio >= 0.8));
  printf("  verify peak / reference run peak (RSS)   %6.2fx   (<= 3x)     %s\n",
         mem_ratio, verdict(mem_ratio <= 3));
  printf("  (the runs' own memory, full - none: %.2fx; blocks from the "
         "layouts: %.2fx;\n   runner's own run_op / raw: %.1f%%)\n",
         mem_d / mem_1, td.block_bytes / t1.block_bytes,
         100.0 * all.raw / all.runner);
  plan_lowered_free(ld);
  plan_lowered_free(l1);
  plan_free(pd);
  plan_free(p1);
  return 0;
}
