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
 *   (c) plan_hash_part(PLAN) on the loaded plan (it hashes the program
 *       inside); plan_program_hash alone for reference
 *   (d) phases of (b): file read, YAML tree (plan_ydoc_parse_buffer), IR
 *       conversion (plan_load_buffer minus the tree), validate, free.
 * Peak memory is the peak RSS (ru_maxrss from wait4) of a fresh child
 * process (this program re-executed) that does (b) once; an idle child gives
 * the process's own floor. A heap breakdown (glibc mallinfo2) shows what the
 * file buffer, the YAML tree and the IR hold.
 *
 * Targets (the issue): (b)/(a) <= 1.5, (c)/(b) < 0.10, peak RSS of (b) <=
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

#include "libplan/libplan.h"
#include "yamldoc.h"

#define MAX_REPS 100

static const char *g_path;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die_last(const char *what) {
  const plan_error *e = plan_error_last();
  fprintf(stderr, "bench_load: %s failed: %s:%d:%d: %s\n", what,
          e && e->file ? e->file : "", e ? e->line : 0, e ? e->column : 0,
          e ? e->message : "?");
  exit(2);
}

/* ---- the steps ------------------------------------------------------------ */

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

static char *g_data;
static size_t g_len;

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

static char g_dir[4096];

static void step_load_buffer(void) {
  plan_plan *p;
  if (plan_load_buffer(&p, g_data, g_len, g_path, g_dir))
    die_last("plan_load_buffer");
  plan_free(p);
}

static void step_full_void(void) { (void)step_full(); }

static plan_plan *g_plan;

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

/* plan_load alone, then free, timed separately. */
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

/* ---- timing ----------------------------------------------------------------- */

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

/* ---- peak RSS of a fresh child ------------------------------------------------ */

/* Re-executes this program as `--child MODE FILE`; returns its ru_maxrss in
 * KiB, or -1. */
static long child_peak_kib(const char *self, const char *mode) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execl(self, self, "--child", mode, g_path, (char *)NULL);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid)
    return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_load: child '%s' failed (status %d)\n", mode,
            status);
    return -1;
  }
  return ru.ru_maxrss;
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
  return 1;
}

/* ---- heap breakdown ------------------------------------------------------------ */

static size_t heap_now(void) {
#if defined(__GLIBC__)
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

static void heap_breakdown(size_t file_size) {
  size_t h0 = heap_now();
  char *data;
  size_t len;
  read_all(g_path, &data, &len);
  size_t h1 = heap_now();
  plan_ydoc doc;
  if (plan_ydoc_parse_buffer(&doc, data, len, g_path))
    die_last("plan_ydoc_parse_buffer");
  size_t h2 = heap_now();
  size_t arena = doc.arena.used_total;
  plan_ydoc_free(&doc);
  plan_plan *p;
  if (plan_load_buffer(&p, data, len, g_path, g_dir))
    die_last("plan_load_buffer");
  size_t h3 = heap_now();
  plan_diags *d;
  if (plan_validate(&d, p))
    die_last("plan_validate");
  size_t h4 = heap_now();
  plan_diags_free(d);
  plan_free(p);
  free(data);
  double F = (double)file_size, M = 1024.0 * 1024.0;
  printf("\nheap breakdown (glibc mallinfo2, live bytes)\n");
  printf("  file buffer               %9.1f MiB  %5.2fx file\n",
         (double)(h1 - h0) / M, (double)(h1 - h0) / F);
  printf("  YAML tree (plan_ydoc)     %9.1f MiB  %5.2fx file  (arena handed "
         "out %.1f MiB)\n",
         (double)(h2 - h1) / M, (double)(h2 - h1) / F, (double)arena / M);
  printf("  IR (plan + program)       %9.1f MiB  %5.2fx file  (after the "
         "tree is freed)\n",
         (double)(h3 - h1) / M, (double)(h3 - h1) / F);
  printf("  validate extra (diags)    %9.1f MiB\n",
         (double)(h4 > h3 ? h4 - h3 : 0) / M);
  printf("  during load the file buffer, the tree and the IR are live at "
         "once:\n  lower bound of the heap peak %.1f MiB = %.2fx file\n",
         (double)(h2 - h0 + h3 - h1) / M, (double)(h2 - h0 + h3 - h1) / F);
}

/* ---- main ------------------------------------------------------------------------- */

static const char *verdict(int ok) { return ok ? "PASS" : "FAIL"; }

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return child_main(argv[2], argv[3]);
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
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

  /* Peak memory first, in fresh processes. */
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl > 0)
    self[sl] = 0;
  else
    snprintf(self, sizeof self, "%s", argv[0]);
  long rss_idle = child_peak_kib(self, "idle");
  long rss_scan = child_peak_kib(self, "scan");
  long rss_full = child_peak_kib(self, "full");

  /* What the plan is. */
  plan_plan *p;
  double t0 = now();
  if (plan_load(&p, g_path))
    die_last("plan_load");
  double first_load = now() - t0;
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
  printf("file      %s\n", g_path);
  printf("size      %.1f MiB (%zu bytes); %zu YAML events\n",
         (double)fsize / (1024.0 * 1024.0), fsize, nevents);
  printf("plan      %d ops, %d tensors, mesh of %lld devices; validate: %zu "
         "error%s, %zu warning%s\n",
         plan_program_op_count(prog), plan_program_tensor_count(prog),
         (long long)plan_mesh_device_count(p), errors, errors == 1 ? "" : "s",
         warnings, warnings == 1 ? "" : "s");
  printf("reps      best of %d (first cold-ish load: %.1f ms)\n\n", reps,
         first_load * 1e3);
  if (errors)
    printf("note: the plan has validation errors; timings still stand\n\n");

  /* Timings. */
  timing a = measure(step_scan, reps);
  timing b = measure(step_full_void, reps);
  g_plan = p;
  timing c = measure(step_hash_plan, reps);
  timing cp = measure(step_hash_program, reps);
  timing v = measure(step_validate, reps);
  g_plan = NULL;
  plan_free(p);
  read_all(g_path, &g_data, &g_len);
  timing rd = measure(step_read, reps);
  timing tr = measure(step_tree, reps);
  timing lb = measure(step_load_buffer, reps);
  for (int i = 0; i < reps + 1; i++)
    step_load_free();
  free(g_data);
  g_data = NULL;

  double ms = 1e3;
  printf("%-44s %10s %10s %8s\n", "step", "best ms", "median ms", "ratio");
  printf("%-44s %10.1f %10.1f %8s\n", "(a) libyaml events (scan_events)",
         a.best * ms, a.median * ms, "1.00");
  printf("%-44s %10.1f %10.1f %7.2fx  (b)/(a)\n",
         "(b) load + validate + hash(PLAN) + free", b.best * ms,
         b.median * ms, b.best / a.best);
  printf("%-44s %10.1f %10.1f %7.1f%%  (c)/(b)\n", "(c) hash_part(PLAN)",
         c.best * ms, c.median * ms, 100.0 * c.best / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%  of (b)\n",
         "    program_hash alone (inside (c))", cp.best * ms, cp.median * ms,
         100.0 * cp.best / b.best);
  printf("(d) phases of (b)\n");
  printf("%-44s %10.1f %10.1f %7.1f%%\n", "    plan_load (read + tree + IR)",
         g_load_best * ms, g_load_best * ms, 100.0 * g_load_best / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%\n", "      file read", rd.best * ms,
         rd.median * ms, 100.0 * rd.best / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%\n",
         "      YAML tree (ydoc_parse_buffer + free)", tr.best * ms,
         tr.median * ms, 100.0 * tr.best / b.best);
  double ir = lb.best - tr.best;
  printf("%-44s %10.1f %10s %7.1f%%\n",
         "      IR conversion (load_buffer - tree)", ir * ms, "",
         100.0 * ir / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%\n", "    validate", v.best * ms,
         v.median * ms, 100.0 * v.best / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%\n", "    hash (c)", c.best * ms,
         c.median * ms, 100.0 * c.best / b.best);
  printf("%-44s %10.1f %10.1f %7.1f%%\n", "    plan_free", g_free_best * ms,
         g_free_best * ms, 100.0 * g_free_best / b.best);

  double F = (double)fsize;
  printf("\npeak RSS (fresh child, ru_maxrss)\n");
  printf("  idle process              %9.1f MiB\n", rss_idle / 1024.0);
  printf("  (a) scan_events           %9.1f MiB  %5.2fx file\n",
         rss_scan / 1024.0, rss_scan * 1024.0 / F);
  printf("  (b) load+validate+hash    %9.1f MiB  %5.2fx file  (%.2fx net of "
         "the idle process)\n",
         rss_full / 1024.0, rss_full * 1024.0 / F,
         (rss_full - rss_idle) * 1024.0 / F);

  heap_breakdown(fsize);

  double r_time = b.best / a.best, r_hash = c.best / b.best;
  double r_mem = rss_full * 1024.0 / F;
  printf("\ntargets\n");
  printf("  (b)/(a) <= 1.50           %7.2f   %s\n", r_time,
         verdict(r_time <= 1.5));
  printf("  (c)/(b) <  10%%            %6.1f%%   %s\n", 100.0 * r_hash,
         verdict(r_hash < 0.10));
  printf("  peak RSS(b)/file <= 4.00  %7.2f   %s\n", r_mem,
         verdict(rss_full > 0 && r_mem <= 4.0));
  return 0;
}
