/* Load benchmark: how `plan validate` (load + validate + hash) compares with
 * libyaml merely parsing the same file into events, how much of it hashing
 * takes, and how much memory it needs for the file's size.
 *
 * usage: bench_load FILE [-n REPS]
 *
 * Every time is the best of REPS (default 5) wall-clock runs in this process
 * (CLOCK_MONOTONIC), after one untimed warm-up of each step:
 *   (a) plan_ydoc_scan_events: read the file, libyaml events only (baseline)
 *   (b) plan_load + plan_validate + plan_hash_part(PLAN) + frees: what
 *       `plan validate` does, plus hashing
 *   (c) plan_hash_part(PLAN) on the loaded plan. A large plan is loaded
 *       pipelined (a reader thread beside the parser) and the program hash
 *       is prepared on a third thread during the load, so (c) is mostly the
 *       plan part; (c1) is the whole hash from scratch, on a plan loaded
 *       without the pipeline, and (b1) is (b) on one thread.
 *   (d) phases of (b): file read; the YAML side of the load (the streaming
 *       parse plan_load does, with a callback that consumes every streamed
 *       item and builds nothing); the IR conversion (plan_load_buffer minus
 *       that); validate; hash; free. The whole-tree parse
 *       (plan_ydoc_parse_buffer) is shown for reference.
 * Peak memory is the peak RSS (ru_maxrss from wait4) of a fresh child
 * process (this program re-executed) that does (b) once; an idle child gives
 * the process's own floor. A second child reports its peak after each step
 * of (b) and the resident size of the loaded plan.
 *
 * Targets (the issue): (b)/(a) <= 1.5 and (b1)/(a) <= 1.5 (pipelined and
 * on one thread), (c)/(b) < 0.10, peak RSS of (b) <=
 * 4 x file size. The result is printed with PASS/FAIL; the exit status is 0
 * unless something fails to run (a benchmark is not a test). */
#define _DEFAULT_SOURCE /* wait4 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "libplan/libplan.h"
#include "read/plan_read.h"
#include "yaml/yamldoc.h"

#define MAX_REPS 100

/* The collections plan_load streams (load_streams in plan_read.c). */
static const char *const load_streams[] = {"program/tensors", "program/ops",
                                           "strategies", "placements", NULL};

static const char *g_path;
static char g_dir[4096];
static char *g_data;
static size_t g_len;
static plan_plan *g_plan;

static double now(void) {
  return bench_now();
}

static void die_last(const char *what) {
  const plan_error *e = plan_error_last();
  fprintf(stderr, "bench_load: %s failed: %s:%d:%d: %s\n", what,
          e && e->file ? e->file : "", e ? e->line : 0, e ? e->column : 0,
          e && e->message ? e->message : "?");
  exit(2);
}

static void read_all(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat sb;
  if (!f || fstat(fileno(f), &sb)) {
    fprintf(stderr, "bench_load: cannot read %s: %s\n", path, strerror(errno));
    exit(2);
  }
  *len = (size_t)sb.st_size;
  *data = malloc(*len + 1);
  if (!*data || fread(*data, 1, *len, f) != *len) {
    fprintf(stderr, "bench_load: cannot read %s\n", path);
    exit(2);
  }
  (*data)[*len] = 0;
  fclose(f);
}

/* ---- the steps ------------------------------------------------------------
 */

static void step_scan(void) {
  size_t n;
  if (plan_ydoc_scan_events(g_path, &n))
    die_last("plan_ydoc_scan_events");
}

/* (b): returns the number of error findings. */
static size_t step_full(void) {
  plan_plan *p;
  plan_diags *d;
  plan_hash h;
  if (plan_load(&p, g_path))
    die_last("plan_load");
  if (plan_validate(&d, p))
    die_last("plan_validate");
  if (plan_hash_part(&h, p, PLAN_PART_PLAN))
    die_last("plan_hash_part");
  size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  plan_diags_free(d);
  plan_free(p);
  return errors;
}

static void step_full_void(void) {
  (void)step_full();
}

/* (b1): the same on one thread (no pipeline, nothing prepared early). */
static void step_full_seq(void) {
  char *data;
  size_t len;
  read_all(g_path, &data, &len);
  plan_plan *p;
  plan_diags *d;
  plan_hash h;
  if (plan_load_buffer_mode(&p, data, len, g_path, g_dir, PLAN_LOAD_SEQUENTIAL))
    die_last("plan_load_buffer_mode");
  free(data);
  if (plan_validate(&d, p))
    die_last("plan_validate");
  if (plan_hash_part(&h, p, PLAN_PART_PLAN))
    die_last("plan_hash_part");
  plan_diags_free(d);
  plan_free(p);
}

static void step_read(void) {
  char *d;
  size_t n;
  read_all(g_path, &d, &n);
  free(d);
}

static void step_tree(void) {
  plan_ydoc doc;
  if (plan_ydoc_parse_buffer(&doc, g_data, g_len, g_path))
    die_last("plan_ydoc_parse_buffer");
  plan_ydoc_free(&doc);
}

/* Consumes every streamed item, keeps root entries: the YAML work of
 * plan_load without the readers. */
static int consume_item(void *ctx, const plan_yitem *it) {
  (void)ctx;
  return it->path[0] ? 1 : 0;
}

static void step_stream(void) {
  plan_ydoc doc;
  if (plan_ydoc_parse_stream(&doc, g_data, g_len, g_path, load_streams,
                             consume_item, NULL))
    die_last("plan_ydoc_parse_stream");
  plan_ydoc_free(&doc);
}

static void step_load_buffer(void) {
  plan_plan *p;
  if (plan_load_buffer_mode(&p, g_data, g_len, g_path, g_dir,
                            PLAN_LOAD_SEQUENTIAL))
    die_last("plan_load_buffer_mode");
  plan_free(p);
}

static void step_hash_plan(void) {
  plan_hash h;
  if (plan_hash_part(&h, g_plan, PLAN_PART_PLAN))
    die_last("plan_hash_part");
}

static void step_hash_program(void) {
  plan_hash h;
  if (plan_program_hash(&h, plan_get_program(g_plan)))
    die_last("plan_program_hash");
}

static void step_validate(void) {
  plan_diags *d;
  if (plan_validate(&d, g_plan))
    die_last("plan_validate");
  plan_diags_free(d);
}

/* plan_load and plan_free, timed apart. */
static double g_load_best = 1e30, g_free_best = 1e30;
static void step_load_free(void) {
  plan_plan *p;
  double t0 = now();
  if (plan_load(&p, g_path))
    die_last("plan_load");
  double t1 = now();
  plan_free(p);
  double t2 = now();
  if (t1 - t0 < g_load_best)
    g_load_best = t1 - t0;
  if (t2 - t1 < g_free_best)
    g_free_best = t2 - t1;
}

/* ---- timing -----------------------------------------------------------------
 */

typedef struct timing {
  double best, median;
} timing;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static timing measure(void (*fn)(void), int reps) {
  double t[MAX_REPS];
  fn(); /* warm-up: page cache, allocator, lazy binding */
  for (int i = 0; i < reps; i++) {
    double t0 = now();
    fn();
    t[i] = now() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  timing r = {t[0], t[reps / 2]};
  return r;
}

/* ---- memory, in fresh children
 * ------------------------------------------------ */

static long maxrss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Current resident size in KiB (Linux /proc/self/statm), or -1. */
static long rss_now_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size, res;
  if (!f)
    return -1;
  int ok = fscanf(f, "%ld %ld", &size, &res) == 2;
  fclose(f);
  return ok ? res * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

/* The peak after each step of (b), and what the loaded plan keeps. Written
 * as "name value" lines on stdout (a pipe to the parent). */
static void child_steps(void) {
  printf("start %ld\n", maxrss_kib());
  read_all(g_path, &g_data, &g_len);
  printf("read %ld\n", maxrss_kib());
  const char *slash = strrchr(g_path, '/');
  if (slash && (size_t)(slash - g_path) < sizeof g_dir)
    memcpy(g_dir, g_path, (size_t)(slash - g_path));
  plan_plan *p;
  if (plan_load_buffer(&p, g_data, g_len, g_path, g_dir))
    die_last("plan_load_buffer");
  printf("load %ld\n", maxrss_kib());
  free(g_data);
  malloc_trim(0);
  printf("plan_resident %ld\n", rss_now_kib());
  plan_diags *d;
  if (plan_validate(&d, p))
    die_last("plan_validate");
  plan_diags_free(d);
  printf("validate %ld\n", maxrss_kib());
  plan_hash h;
  if (plan_hash_part(&h, p, PLAN_PART_PLAN))
    die_last("plan_hash_part");
  printf("hash %ld\n", maxrss_kib());
  plan_free(p);
  malloc_trim(0);
  printf("after_free %ld\n", rss_now_kib());
}

static int child_main(const char *mode, const char *path) {
  g_path = path;
  if (!strcmp(mode, "idle"))
    return 0;
  if (!strcmp(mode, "scan")) {
    step_scan();
    return 0;
  }
  if (!strcmp(mode, "full")) {
    step_full();
    return 0;
  }
  if (!strcmp(mode, "steps")) {
    child_steps();
    return 0;
  }
  return 1;
}

/* Re-executes this program as `--child MODE FILE`; returns its ru_maxrss in
 * KiB, or -1. With out != NULL, the child's stdout is read into out. */
static long child_run(const char *self, const char *mode, char *out,
                      size_t outsz) {
  char *const av[] = {(char *)self, "--child", (char *)mode, (char *)g_path,
                      NULL};
  return bench_child("bench_load", self, av, out, outsz);
}

static long field(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *s = text; s && *s;
       s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
    if (!strncmp(s, name, n) && s[n] == ' ')
      return atol(s + n + 1);
  return -1;
}

/* ---- main
 * ------------------------------------------------------------------------- */

static const char *verdict(int ok) {
  return ok ? "PASS" : "FAIL";
}

static void row(const char *what, timing t, double ref, const char *note) {
  printf("%-46s %9.2f %9.2f %7.1f%%%s\n", what, t.best * 1e3, t.median * 1e3,
         100.0 * t.best / ref, note);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return child_main(argv[2], argv[3]);
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (argv[i][0] == '-' || g_path) {
      fprintf(stderr, "usage: bench_load FILE [-n REPS]\n");
      return 2;
    } else {
      g_path = argv[i];
    }
  }
  if (!g_path || reps < 1 || reps > MAX_REPS) {
    fprintf(stderr, "usage: bench_load FILE [-n REPS (1..%d)]\n", MAX_REPS);
    return 2;
  }
  const char *slash = strrchr(g_path, '/');
  if (slash && (size_t)(slash - g_path) < sizeof g_dir)
    memcpy(g_dir, g_path, (size_t)(slash - g_path));

  struct stat sb;
  if (stat(g_path, &sb)) {
    fprintf(stderr, "bench_load: %s: %s\n", g_path, strerror(errno));
    return 2;
  }
  size_t fsize = (size_t)sb.st_size;
  double F = (double)fsize, MiB = 1024.0 * 1024.0;

  /* Memory first, in fresh processes. */
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl > 0)
    self[sl] = 0;
  else
    snprintf(self, sizeof self, "%s", argv[0]);
  long rss_idle = child_run(self, "idle", NULL, 0);
  long rss_scan = child_run(self, "scan", NULL, 0);
  long rss_full = child_run(self, "full", NULL, 0);
  char steps[1024] = "";
  if (child_run(self, "steps", steps, sizeof steps) < 0)
    steps[0] = 0;

  /* What the plan is. */
  plan_plan *p;
  if (plan_load(&p, g_path))
    die_last("plan_load");
  plan_diags *d;
  if (plan_validate(&d, p))
    die_last("plan_validate");
  size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  size_t warnings = plan_diags_count_at_least(d, PLAN_SEV_WARNING) - errors;
  plan_diags_free(d);
  const plan_program *prog = plan_get_program(p);
  size_t nevents = 0;
  if (plan_ydoc_scan_events(g_path, &nevents))
    die_last("plan_ydoc_scan_events");
  printf("file   %s\n", g_path);
  printf("size   %.1f MiB (%zu bytes), %zu YAML events\n", F / MiB, fsize,
         nevents);
  printf("plan   %d ops, %d tensors, %lld devices; validate: %zu error%s, "
         "%zu warning%s\n",
         plan_program_op_count(prog), plan_program_tensor_count(prog),
         (long long)plan_mesh_device_count(p), errors, errors == 1 ? "" : "s",
         warnings, warnings == 1 ? "" : "s");
  printf("times  best and median of %d runs, after a warm-up\n\n", reps);
  if (errors)
    printf("note: the plan has validation errors; the times still stand\n\n");

  /* Times. */
  timing a = measure(step_scan, reps);
  timing b = measure(step_full_void, reps);
  g_plan = p;
  timing c = measure(step_hash_plan, reps);
  timing cp = measure(step_hash_program, reps);
  timing v = measure(step_validate, reps);
  g_plan = NULL;
  plan_free(p);
  timing b1 = measure(step_full_seq, reps);
  {
    char *data;
    size_t len;
    read_all(g_path, &data, &len);
    if (plan_load_buffer_mode(&p, data, len, g_path, g_dir,
                              PLAN_LOAD_SEQUENTIAL))
      die_last("plan_load_buffer_mode");
    free(data);
  }
  g_plan = p;
  timing c1 = measure(step_hash_plan, reps);
  g_plan = NULL;
  plan_free(p);
  read_all(g_path, &g_data, &g_len);
  timing rd = measure(step_read, reps);
  timing ys = measure(step_stream, reps);
  timing yt = measure(step_tree, reps);
  timing lb = measure(step_load_buffer, reps);
  free(g_data);
  g_data = NULL;
  step_load_free(); /* warm-up */
  for (int i = 0; i < reps; i++)
    step_load_free();
  timing ld = {g_load_best, g_load_best}, fr = {g_free_best, g_free_best};
  timing ir = {lb.best - ys.best, lb.median - ys.median};

  double B = b.best;
  printf("%-46s %9s %9s %8s\n", "step", "best ms", "median ms", "of (b)");
  row("(a) libyaml events only (scan_events)", a, B, "");
  row("(b) load + validate + hash(PLAN) + free", b, B, "");
  row("(c) plan_hash_part(PLAN)", c, B, "");
  row("    plan_program_hash (part of (c))", cp, B,
      "  (prepared during the load)");
  row("(b1) (b) on one thread, no pipeline", b1, B, "");
  row("(c1) hash from scratch (plan loaded as b1)", c1, B, "");
  printf("(d) phases, measured on one thread\n");
  row("    plan_load (pipelined, as in (b))", ld, B, "");
  row("      read the file", rd, B, "");
  row("      YAML, streamed as plan_load does", ys, B, "");
  row("      IR readers, one thread (load - YAML)", ir, B, "");
  row("    plan_validate", v, B, "");
  row("    plan_hash_part(PLAN) (c; c1 on one thread)", c, B, "");
  row("    plan_free", fr, B, "");
  row("    for reference: whole YAML tree", yt, B, "  (not used by plan_load)");
  printf("\n  (b)/(a) = %.2f   (b1)/(a) = %.2f   (c1)/(b) = %.1f%%   "
         "(c1)/(b1) = %.1f%%\n",
         b.best / a.best, b1.best / a.best, 100.0 * c1.best / b.best,
         100.0 * c1.best / b1.best);

  printf("\npeak RSS (ru_maxrss of a fresh child)\n");
  printf("  idle process                  %8.1f MiB\n", rss_idle / 1024.0);
  printf("  (a) scan_events               %8.1f MiB  %5.2fx file\n",
         rss_scan / 1024.0, rss_scan * 1024.0 / F);
  printf("  (b) load+validate+hash        %8.1f MiB  %5.2fx file\n",
         rss_full / 1024.0, rss_full * 1024.0 / F);
  if (steps[0]) {
    long st0 = field(steps, "start"), srd = field(steps, "read"),
         sld = field(steps, "load"), sres = field(steps, "plan_resident"),
         sv = field(steps, "validate"), sh = field(steps, "hash");
    printf("  peak after each step of (b):\n");
    printf("    start                       %8.1f MiB\n", st0 / 1024.0);
    printf("    file read into memory       %8.1f MiB  %5.2fx file\n",
           srd / 1024.0, srd * 1024.0 / F);
    printf("    plan_load_buffer            %8.1f MiB  %5.2fx file\n",
           sld / 1024.0, sld * 1024.0 / F);
    printf("    plan_validate               %8.1f MiB  %5.2fx file\n",
           sv / 1024.0, sv * 1024.0 / F);
    printf("    plan_hash_part              %8.1f MiB  %5.2fx file\n",
           sh / 1024.0, sh * 1024.0 / F);
    printf("  resident loaded plan (IR)     %8.1f MiB  %5.2fx file  (file "
           "buffer freed, heap trimmed, less the start)\n",
           (sres - st0) / 1024.0, (sres - st0) * 1024.0 / F);
    printf("  load peak above file + IR     %8.1f MiB  %5.2fx file  "
           "(parser, tree, scratch, growth slack)\n",
           (sld - srd - (sres - st0)) / 1024.0,
           (sld - srd - (sres - st0)) * 1024.0 / F);
  }

  double r_time = b.best / a.best, r_time1 = b1.best / a.best,
         r_hash = c.best / b.best;
  double r_mem = rss_full * 1024.0 / F;
  printf("\ntargets\n");
  printf("  (b)/(a) <= 1.50              %7.2f   %s\n", r_time,
         verdict(r_time <= 1.5));
  printf("  (b1)/(a) <= 1.50 (one thread) %6.2f   %s\n", r_time1,
         verdict(r_time1 <= 1.5));
  printf("  (c)/(b) <  10%%               %6.1f%%   %s\n", 100.0 * r_hash,
         verdict(r_hash < 0.10));
  printf("  peak RSS (b) / file <= 4.00  %7.2f   %s\n", r_mem,
         verdict(rss_full > 0 && r_mem <= 4.0));
  return 0;
}
