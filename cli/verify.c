/* `plan verify`: run a plan and its single-device program on a runner's
 * simulated ranks (the CPU runner, or the CUDA plugin's virtual ranks), or
 * as one process per rank (--distributed), and compare every tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "libplan/verify.h"
#include "util.h"
#include "region_trace.h"

const char usage_verify[] =
    "usage: plan verify [--mode exact|float] [--dtype T] [--seed N] [--runner "
    "R]\n"
    "                   [--rtol X --atol Y] [--tol TENSOR=RTOL,ATOL]... "
    "[--reduce[=auto|shapes]]\n"
    "                   [--memory-limit SIZE]\n"
    "                   [--report text|yaml|json|junit [--out FILE]]\n"
    "                   [--distributed[=DIR] [--timeout S] [--comm mpi|nccl]]\n"
    "                   PLAN|LOWERED\n"
    "\n"
    "Lowers PLAN to rank-local steps with explicit collectives, runs them on\n"
    "a runner (every rank simulated in this process) and runs the\n"
    "single-device program on the same kernels; then compares every tensor\n"
    "the plan produces, from every replica, and names the first divergent op\n"
    "in topological order with a diagnosis of the usual causes. A lowered\n"
    "program (spec/lowered-format.md: from 'plan lower', by hand or by "
    "another\n"
    "tool) is run as it is: the contract is that it computes the reference\n"
    "program under its declared layouts.\n"
    "  --mode exact  small-integer inputs in f64; inexact results rounded to "
    "a\n"
    "                dyadic grid in both runs, so results must be identical\n"
    "                (the default)\n"
    "  --mode float  random inputs in each tensor's dtype; per-dtype "
    "tolerances,\n"
    "                and for f32/bf16/f16 a bound against an f64 reference\n"
    "                (no worse than 4x the single-device program's error)\n"
    "  --dtype T     float mode (implied) with every float tensor in T: f64,\n"
    "                f32, bf16 or f16, to check a plan at another precision\n"
    "  --seed N      input seed (default 0)\n"
    "  --reduce      verify a smaller program with the same sharding "
    "structure:\n"
    "                every sharded dim keeps its divisibility or its uneven\n"
    "                shard pattern (at least 2 per shard where it had them),\n"
    "                every other dim shrinks to 2, and each mesh axis to its\n"
    "                smallest divisor (2 for even sizes) unless its ranks are\n"
    "                named one by one (the pipeline's); prints what was\n"
    "                reduced (a lowered program: its program, steps "
    "unchanged)\n"
    "  --reduce auto reduce only when the full run does not fit in memory\n"
    "  --reduce shapes  reduce the shapes, keep the mesh (what a distributed\n"
    "                run, one process per rank, always does)\n"
    "  --memory-limit SIZE  the memory the run may use (bytes, or with K, M,\n"
    "                G, T and B or iB: 512MB, 2GiB; default: what is free\n"
    "                here, cgroup and MemAvailable); a run estimated over it\n"
    "                is refused with the figures (exit 3), before it starts\n"
    "  --rtol X --atol Y  float mode: these tolerances for every tensor,\n"
    "                instead of the dtype's\n"
    "  --tol TENSOR=RTOL,ATOL  float mode: these for a tensor, or for the\n"
    "                tensors a glob matches (\"attn.*\"); the first match "
    "wins\n"
    "  --runner R    cpu (the default: OpenBLAS, in this process) or cuda "
    "(the\n"
    "                plugin libplan-cuda.so from `make cuda`, on one GPU with\n"
    "                every rank virtual; docs/gpu.md); exit 3 with the reason\n"
    "                when it is not built or finds no GPU\n"
    "  --report F    the report's format: text (default), yaml or json "
    "(schema\n"
    "                libplan-verify/1), junit (XML for CI)\n"
    "  --out FILE    write the report to FILE (atomically) instead of stdout\n"
    "  --distributed[=DIR]  run as one process of a distributed "
    "verification:\n"
    "                one process per mesh rank, started by mpirun or srun\n"
    "                (rank and world from MPI), or by torchrun (RANK,\n"
    "                WORLD_SIZE) with --comm nccl; each runs its rank's "
    "share,\n"
    "                the collectives over MPI (cpu) or NCCL (cuda, the GPU\n"
    "                LOCAL_RANK names). DIR: a fresh folder every process\n"
    "                sees, where rank 0 leaves NCCL's id when not under MPI.\n"
    "                Rank 0 writes the report; every process exits with the\n"
    "                verdict, 3 when a peer fails (docs/gpu.md)\n"
    "  --timeout S   how long a process waits for the others (default 300)\n"
    "  --comm C      the collectives' transport: nccl (cuda's default) or\n"
    "                mpi (the cpu runner's; with cuda, several processes\n"
    "                on one GPU)\n"
    "A training plan verifies its training step (loss, every gradient, the\n"
    "optimizer's update over its steps); a pipelined one runs each pipeline\n"
    "rank's schedule, microbatch by microbatch (a deadlock is reported).\n"
    "A manual region's Lua body runs once, in a sandbox, and is traced into\n"
    "lowered ops and collectives; the region's outputs are compared with\n"
    "the ops it replaces (docs/lua.md, Manual regions).\n"
    "Exit: 0 equal, 1 not equal or invalid plan, 2 unreadable input or bad\n"
    "usage, 3 cannot run here (a runner missing, not enough memory: also\n"
    "when an allocation fails mid-run).\n";

/* Writes the report (to stdout or atomically to outfile), frees it and
 * returns the verdict's exit code. */
static int cli_emit_report(plan_verify_report *r, const char *file,
                           const char *format, const char *outfile) {
  char *text;
  size_t len;
  if (!file) { /* distributed, not rank 0: the verdict alone */
    int rc = plan_verify_report_equal(r) ? EXIT_OK : EXIT_NEGATIVE;
    plan_verify_report_free(r);
    return rc;
  }
  if (plan_verify_report_write(&text, &len, r, format)) {
    plan_verify_report_free(r);
    return cli_fail_last();
  }
  if (outfile) {
    int wrc = cli_write_output(outfile, text, len);
    if (wrc) {
      plan_buffer_free(text);
      plan_verify_report_free(r);
      return wrc;
    }
    /* the verdict still goes to the terminal */
    printf("%s: %s (report in %s)\n", file,
           plan_verify_report_equal(r) ? "EQUAL" : "NOT EQUAL", outfile);
  } else {
    fwrite(text, 1, len, stdout);
  }
  plan_buffer_free(text);
  int rc = plan_verify_report_equal(r) ? EXIT_OK : EXIT_NEGATIVE;
  plan_verify_report_free(r);
  return rc;
}

/* An integer in [lo, hi] from the first of the environment variables
 * names[0..n) that is set; -1 when none is, -2 when it is not such a
 * number. */
static int env_int(const char *const *names, int n, int lo, int hi) {
  const char *v = NULL;
  for (int i = 0; i < n && (!v || !v[0]); i++)
    v = getenv(names[i]);
  if (!v || !v[0])
    return -1;
  int64_t x;
  if (v[0] == '+' || plan_parse_int(&x, v, strlen(v)) || x < lo || x > hi)
    return -2;
  return (int)x;
}

/* --distributed: this process's rank and the world size, from the
 * launcher's environment: mpirun's (Open MPI), srun's (PMI, Slurm), or
 * torchrun's (RANK, WORLD_SIZE; NCCL with the id in a shared folder). */
static int distributed_ranks(plan_verify_options *o) {
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                      "SLURM_NTASKS", "WORLD_SIZE"};
  static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                      "SLURM_PROCID", "RANK"};
  o->world = env_int(sizes, 4, 1, 1 << 20);
  o->rank = env_int(ranks, 4, 0, 1 << 20);
  if (o->world == -1 || o->rank == -1)
    return cli_usage("verify", "--distributed runs under a launcher: mpirun "
                               "or srun (MPI), or torchrun (RANK and "
                               "WORLD_SIZE, with --comm nccl)");
  if (o->world < 0 || o->rank < 0 || o->rank >= o->world)
    return cli_usage("verify", "the launcher's rank and world size are not a "
                               "rank of a world (0 <= RANK < WORLD_SIZE)");
  return 0;
}

/* A tolerance: a finite number >= 0 (cli_parse_real's spelling), up to
 * `stop` or the end of s; *end on the stop. */
static bool parse_tol(const char *s, char stop, double *out, const char **end) {
  const char *e = stop ? strchr(s, stop) : s + strlen(s);
  if (!e || !cli_parse_real(s, (size_t)(e - s), out) || !(*out >= 0) ||
      *out > 1e300)
    return false;
  *end = e;
  return true;
}

/* A size: digits, then optionally K, M, G or T with B (powers of 1000)
 * or iB (of 1024), or B alone; at least one byte. */
static bool parse_size(const char *s, uint64_t *out) {
  uint64_t n = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (n > (UINT64_MAX - 9) / 10)
      return false;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  if (p == s)
    return false;
  static const char units[] = "KMGT";
  const char *u = *p ? strchr(units, *p) : NULL;
  int e = u ? (int)(u - units) + 1 : 0;
  uint64_t base = 1000;
  if (e && !strcmp(p + 1, "iB"))
    base = 1024;
  else if (e ? strcmp(p + 1, "B") : *p && strcmp(p, "B"))
    return false;
  for (int k = 0; k < e; k++) {
    if (n > UINT64_MAX / base)
      return false;
    n *= base;
  }
  *out = n;
  return n > 0;
}

#define CLI_MAX_TOLS 64

/* What the command line asks for. The options' tolerances point into
 * tols, so the struct stays where it was made. */
typedef struct verify_args {
  const char *file, *format, *outfile;
  plan_verify_options o;
  bool mode_given, tol_given, reduce, reduce_auto, reduce_shapes, distributed;
  plan_verify_tolerance tols[CLI_MAX_TOLS];
  char tol_names[CLI_MAX_TOLS][256];
  int ntols;
} verify_args;

/* --rtol, --atol and --tol at argv[*i]: 1 when it was one of them (*i on
 * its value), 0 when not, else the usage error's exit code (negated). */
static int parse_tolerance(verify_args *v, int argc, char **argv, int *i) {
  const char *a = argv[*i], *end;
  if (*i + 1 >= argc)
    return 0;
  if (!strcmp(a, "--rtol") || !strcmp(a, "--atol")) {
    bool r = a[2] == 'r';
    if (!parse_tol(argv[++*i], 0, r ? &v->o.rtol : &v->o.atol, &end))
      return -cli_usage("verify", "%s takes a number >= 0", a);
    v->tol_given = true;
    return 1;
  }
  if (strcmp(a, "--tol"))
    return 0;
  const char *t = argv[++*i], *eq = strchr(t, '=');
  plan_verify_tolerance *tol = &v->tols[v->ntols];
  if (v->ntols == CLI_MAX_TOLS)
    return -cli_usage("verify", "at most %d --tol", CLI_MAX_TOLS);
  if (!eq || eq == t || eq - t >= 256 ||
      !parse_tol(eq + 1, ',', &tol->rtol, &end) ||
      !parse_tol(end + 1, 0, &tol->atol, &end))
    return -cli_usage("verify", "--tol is TENSOR=RTOL,ATOL, not '%s'", t);
  memcpy(v->tol_names[v->ntols], t, (size_t)(eq - t));
  v->tol_names[v->ntols][eq - t] = 0;
  tol->tensor = v->tol_names[v->ntols++];
  v->tol_given = true;
  return 1;
}

/* Whether path names a folder: the argument after --distributed is its
 * folder when it is one (a plan is a file). */
static bool cli_is_dir(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* Every option other than the tolerances, at argv[*i]: EXIT_OK (*i on the
 * option's last word) or the exit code of a usage error, or of a runner
 * that cannot run here (exit 3, before anything is loaded). */
static int parse_option(verify_args *v, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  plan_verify_options *o = &v->o;
  bool has = *i + 1 < argc;
  if (!strcmp(a, "--mode") && has) {
    const char *m = argv[++*i];
    if (!strcmp(m, "exact"))
      o->mode = PLAN_VERIFY_EXACT;
    else if (!strcmp(m, "float"))
      o->mode = PLAN_VERIFY_FLOAT;
    else
      return cli_usage("verify", "--mode is exact or float");
    v->mode_given = true;
  } else if (!strcmp(a, "--dtype") && has) {
    o->dtype = argv[++*i];
    if (strcmp(o->dtype, "f64") && strcmp(o->dtype, "f32") &&
        strcmp(o->dtype, "bf16") && strcmp(o->dtype, "f16"))
      return cli_usage("verify", "--dtype is f64, f32, bf16 or f16");
  } else if (!strcmp(a, "--seed") && has) {
    int64_t seed;
    int rc = cli_int_arg("verify", a, argv[++*i], 0, INT64_MAX, &seed);
    if (rc)
      return rc;
    o->seed = (uint64_t)seed;
  } else if (!strcmp(a, "--reduce") && has && !strcmp(argv[*i + 1], "auto")) {
    v->reduce_auto = true;
    ++*i;
  } else if (!strcmp(a, "--reduce=auto")) {
    v->reduce_auto = true;
  } else if ((!strcmp(a, "--reduce") && has &&
              !strcmp(argv[*i + 1], "shapes")) ||
             !strcmp(a, "--reduce=shapes")) {
    v->reduce = v->reduce_shapes = true;
    *i += a[8] != '=';
  } else if (!strcmp(a, "--reduce")) {
    v->reduce = true;
  } else if (!strcmp(a, "--memory-limit") && has) {
    if (!parse_size(argv[++*i], &o->memory_limit))
      return cli_usage("verify",
                       "--memory-limit is a size: bytes, or N with K, M, G "
                       "or T and B or iB (512MB, 2GiB), not '%s'",
                       argv[*i]);
  } else if (!strcmp(a, "--report") && has) {
    v->format = argv[++*i];
    if (strcmp(v->format, "text") && strcmp(v->format, "yaml") &&
        strcmp(v->format, "json") && strcmp(v->format, "junit"))
      return cli_usage("verify", "--report is text, yaml, json or junit");
  } else if (!strcmp(a, "--out") && has) {
    v->outfile = argv[++*i];
  } else if (!strcmp(a, "--distributed")) {
    v->distributed = true;
    if (has && cli_is_dir(argv[*i + 1])) /* the NCCL id's folder */
      o->rendezvous = argv[++*i];
  } else if (!strncmp(a, "--distributed=", 14)) {
    v->distributed = true;
    o->rendezvous = a + 14;
    if (!o->rendezvous[0])
      return cli_usage("verify", "--distributed= needs a folder");
  } else if (!strcmp(a, "--timeout") && has) {
    int rc = cli_real_arg("verify", a, argv[++*i], 0, 1e9, &o->timeout_s);
    if (rc)
      return rc;
  } else if (!strcmp(a, "--comm") && has) {
    o->comm = argv[++*i];
    if (strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl"))
      return cli_usage("verify", "--comm is mpi or nccl");
  } else if (!strcmp(a, "--runner") && has) {
    o->runner = argv[++*i];
    if (strcmp(o->runner, "cpu") && strcmp(o->runner, "cuda"))
      return cli_usage("verify", "--runner is cpu or cuda");
    if (plan_runner_check(o->runner))
      return cli_fail_last(); /* exit 3 with the reason */
  } else if (a[0] == '-' && a[1]) {
    return cli_unknown_option("verify", a);
  } else if (v->file) {
    return cli_usage("verify", v->distributed
                                   ? "one plan at a time (NCCL's id folder "
                                     "goes as --distributed=DIR)"
                                   : "one plan at a time");
  } else {
    v->file = a;
  }
  return EXIT_OK;
}

/* The options that go together, and the ranks of a distributed run. */
static int check_args(verify_args *v) {
  plan_verify_options *o = &v->o;
  if (!v->file)
    return cli_usage("verify", "no plan given");
  if (o->dtype && v->mode_given && o->mode == PLAN_VERIFY_EXACT)
    return cli_usage("verify", "--dtype needs float mode (exact mode is f64)");
  if (o->dtype)
    o->mode = PLAN_VERIFY_FLOAT;
  if (v->tol_given && o->mode != PLAN_VERIFY_FLOAT)
    return cli_usage("verify", "tolerances need float mode (exact mode "
                               "compares bits)");
  o->ntolerances = v->ntols;
  if (v->reduce && v->reduce_auto)
    return cli_usage("verify", "--reduce or --reduce auto, not both");
  if ((o->timeout_s > 0 || o->comm) && !v->distributed)
    return cli_usage("verify", "--timeout and --comm go with --distributed");
  if (o->comm && !strcmp(o->comm, "nccl") &&
      (!o->runner || strcmp(o->runner, "cuda")))
    return cli_usage("verify", "--comm nccl goes with --runner cuda");
  return v->distributed ? distributed_ranks(o) : 0;
}

static int parse_args(verify_args *v, int argc, char **argv) {
  memset(v, 0, sizeof *v);
  v->format = "text";
  if (plan_verify_options_init(&v->o, PLAN_VERIFY_OPTIONS_VERSION))
    return cli_fail_last();
  v->o.tolerances = v->tols;
  for (int i = 1; i < argc; i++) {
    int rc = parse_tolerance(v, argc, argv, &i);
    if (rc < 0)
      return -rc;
    if (!rc && (rc = parse_option(v, argc, argv, &i)))
      return rc;
  }
  return check_args(v);
}

/* The reduction line goes before the verdict: on stdout beside a text
 * report (or a report written to a file), else on stderr so that a YAML,
 * JSON or JUnit report on stdout stays one document. */
static void print_reduction(const char *sum, const char *format,
                            const char *outfile) {
  FILE *f = outfile || !strcmp(format, "text") ? stdout : stderr;
  fprintf(f, "%s\n", sum);
}

/* A verification that could not run: out of memory mid-run is exit 3
 * (cannot run here), with the library's message naming the file. */
static int verify_fail(const char *file) {
  const plan_error *e = plan_error_last();
  if (e->code != PLAN_ENOMEM)
    return cli_fail_in(file);
  fprintf(stderr,
          "plan: %s: error: %s (--reduce verifies a smaller "
          "program of the same structure)\n",
          file, e->message && e->message[0] ? e->message : "out of memory");
  return EXIT_CANNOT_RUN;
}

/* --reduce auto: whether the full run would not fit (the limit given, or
 * the memory here); when the estimate cannot be made, the full run's
 * preflight says so. */
static bool too_big(const verify_args *v, const plan_plan *p,
                    const plan_lowered *l) {
  uint64_t need, have = v->o.memory_limit;
  if (plan_verify_estimate(&need, p, l, &v->o))
    return false;
  if (!have && plan_verify_memory_available(&have))
    return false;
  return need > have;
}

/* What --reduce reduces: the mesh too, unless told not to or each rank is
 * a process of its own. */
static unsigned reduce_what(const verify_args *v) {
  return v->reduce_shapes || v->distributed ? 0 : PLAN_REDUCE_MESH;
}

/* A reduced program holds few elements a rank. Exact mode draws them from
 * 7 values and rounds what it computes to a grid: a misplaced block can
 * match its place by chance (a norm over 2 elements gives only +-1), and a
 * deep network's gradients can round to zero alike in every microbatch.
 * Float mode's random inputs miss what exactness shows: a partial
 * gradient left unreduced where the width-2 layers leave the true one
 * near zero. So a reduced run that is EQUAL runs once more in the other
 * mode, same seed (not a distributed one: its processes are the mesh's).
 * How many runs. */
static int reduced_runs(const verify_args *v, bool reduced) {
  return reduced && !v->distributed ? 2 : 1;
}

/* The reduction's summary, saying which runs the verification makes. */
static void show_reduction(const verify_args *v, const char *sum,
                           const char *shown) {
  if (!shown)
    return;
  size_t n = strlen(sum) + 80;
  char *line = reduced_runs(v, true) > 1 ? malloc(n) : NULL;
  if (line) {
    snprintf(line, n, "%s; %s mode, then %s mode", sum,
             v->o.mode == PLAN_VERIFY_EXACT ? "exact" : "float",
             v->o.mode == PLAN_VERIFY_EXACT ? "float" : "exact");
    print_reduction(line, v->format, v->outfile);
    free(line);
    return;
  }
  print_reduction(sum, v->format, v->outfile);
}

/* Runs `run` as reduced_runs says (the second run in the other mode); *r:
 * the first NOT EQUAL report, else the first. */
typedef int (*verify_run_fn)(plan_verify_report **r, const void *what,
                             const plan_verify_options *o);

static int run_seeds(plan_verify_report **r, const verify_args *v, bool reduced,
                     verify_run_fn run, const void *what) {
  plan_verify_options o = v->o;
  int rc = run(r, what, &o);
  if (rc || reduced_runs(v, reduced) < 2 || !plan_verify_report_equal(*r))
    return rc;
  plan_verify_report *other = NULL;
  if (o.mode == PLAN_VERIFY_EXACT) {
    o.mode = PLAN_VERIFY_FLOAT;
  } else { /* exact mode has no dtype or tolerances */
    o.mode = PLAN_VERIFY_EXACT;
    o.dtype = NULL;
    o.rtol = o.atol = 0;
    o.tolerances = NULL;
    o.ntolerances = 0;
  }
  /* the other run that cannot be made here (exact mode past the doubles'
   * exact range), or that agrees: the first run's report */
  if (run(&other, what, &o) || plan_verify_report_equal(other)) {
    plan_verify_report_free(other);
    return PLAN_OK;
  }
  plan_verify_report_free(*r);
  *r = other;
  return PLAN_OK;
}

/* A lowered program to run once per run: plan_verify_lowered takes the
 * program it runs, so each run reads its own copy from the text. */
typedef struct lowered_runs {
  plan_lowered *l; /* the first run's */
  char *text;      /* NULL for one run */
  size_t len;
  const char *name;
} lowered_runs;

static int run_lowered(plan_verify_report **r, const void *what,
                       const plan_verify_options *o) {
  lowered_runs *lr = (lowered_runs *)what;
  plan_lowered *l = lr->l;
  lr->l = NULL;
  if (!l && plan_lowered_load_buffer(&l, lr->text, lr->len, lr->name, NULL))
    return plan_error_last()->code;
  return plan_verify_lowered(r, plan_lowered_plan(l), l, o);
}

static int run_plan(plan_verify_report **r, const void *what,
                    const plan_verify_options *o) {
  return plan_verify_traced(r, what, o, plan_lua_trace_region, NULL);
}

/* A lowered program runs as written (reduced first with --reduce); takes
 * l. `shown` is the file the report names, NULL on a distributed run's
 * other ranks. */
static int verify_lowered(const verify_args *v, plan_lowered *l,
                          const char *shown) {
  bool reduced = false;
  if (v->reduce || (v->reduce_auto && too_big(v, NULL, l))) {
    plan_lowered *rl;
    char *sum;
    int rrc = plan_lowered_reduce(&rl, &sum, l, reduce_what(v));
    plan_lowered_free(l);
    if (rrc)
      return cli_fail_in(v->file);
    show_reduction(v, sum, shown);
    plan_buffer_free(sum);
    l = rl;
    reduced = true;
  }
  lowered_runs lr = {l, NULL, 0, v->file};
  if (reduced_runs(v, reduced) > 1 &&
      plan_lowered_write(&lr.text, &lr.len, l)) {
    plan_lowered_free(l);
    return cli_fail_in(v->file);
  }
  plan_verify_report *r;
  int rc = run_seeds(&r, v, reduced, run_lowered, &lr);
  plan_lowered_free(lr.l); /* not run when the first run failed to start */
  plan_buffer_free(lr.text);
  if (rc)
    return verify_fail(v->file);
  return cli_emit_report(r, shown, v->format, v->outfile);
}

/* A plan: validated first (an invalid plan is not run), reduced with
 * --reduce, then lowered and run, its manual regions' bodies as Lua. */
static int verify_plan(const verify_args *v, const char *shown) {
  plan_plan *p;
  int vrc = cli_load_valid(v->file, stdout, "verified", &p);
  if (vrc)
    return vrc;
  bool reduced = false;
  if (v->reduce || (v->reduce_auto && too_big(v, p, NULL))) {
    plan_plan *rp;
    char *sum;
    if (plan_reduce_plan(&rp, &sum, p, reduce_what(v))) {
      plan_free(p);
      return cli_fail_in(v->file); /* 3 for pipelines, else 2 */
    }
    plan_free(p);
    p = rp;
    show_reduction(v, sum, shown);
    plan_buffer_free(sum);
    reduced = true;
  }
  plan_verify_report *r;
  int rc = run_seeds(&r, v, reduced, run_plan, p);
  if (rc) {
    plan_free(p);
    return verify_fail(v->file); /* 3 for what cannot run here, else 2 */
  }
  rc = cli_emit_report(r, shown, v->format, v->outfile);
  plan_free(p);
  return rc;
}

int cmd_verify(int argc, char **argv) {
  verify_args v;
  int rc = parse_args(&v, argc, argv);
  if (rc)
    return rc;
  /* distributed: rank 0 speaks for every process */
  const char *shown = v.distributed && v.o.rank ? NULL : v.file;
  plan_lowered *l;
  int lowered = cli_load_lowered(v.file, &l);
  if (lowered < 0)
    return cli_fail_last();
  return lowered ? verify_lowered(&v, l, shown) : verify_plan(&v, shown);
}
