/* Upgrade benchmark: how long `plan upgrade` (plan_upgrade_buffer: read the
 * 0.1 text, edit its version, add the record, read the result back and
 * check every part's hash) takes against `plan validate` of the same file
 * (plan_load_buffer + plan_validate), the baseline, measured in the same
 * run. A file written as 1.0 (gen_plan.py writes the current format) is
 * given the 0.1 version line in memory: 1.0 is 0.1 unchanged.
 *
 * usage: bench_upgrade FILE [-n REPS]
 *
 * Each time is the best of REPS (default 5) wall-clock runs in this
 * process, after one untimed warm-up of each. No target is set; the ratio
 * upgrade / validate is the figure (it reads the file twice and hashes it
 * twice, so about 3 is what its design costs). */
#define _DEFAULT_SOURCE /* wait4, in bench_common.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "libplan/plan.h"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) {
    b[n] = '\0';
    *len = (size_t)n;
  }
  return b;
}

static int fail(const char *what) {
  char buf[512];
  fprintf(stderr, "bench_upgrade: %s: %s\n", what,
          plan_error_format(buf, sizeof buf));
  return 1;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else
      path = argv[i];
  }
  if (!path || reps < 1) {
    fprintf(stderr, "usage: bench_upgrade FILE [-n REPS]\n");
    return 2;
  }
  size_t len = 0;
  char *text = slurp(path, &len);
  if (!text) {
    fprintf(stderr, "bench_upgrade: cannot read %s\n", path);
    return 1;
  }
  char *v = strstr(text, "libplan: \"1.0\"");
  if (v)
    memcpy(v, "libplan: \"0.1\"", 14);
  double best_val = 1e30, best_up = 1e30;
  for (int r = 0; r <= reps; r++) { /* r == 0: the warm-up */
    double t0 = bench_now();
    plan_plan *p = NULL;
    plan_diags *d = NULL;
    if (plan_load_buffer(&p, text, len, path, NULL) || plan_validate(&d, p))
      return fail("validate");
    plan_diags_free(d);
    plan_free(p);
    double t1 = bench_now();
    char *out = NULL;
    size_t olen = 0;
    plan_upgrade_info info;
    if (plan_upgrade_buffer(&out, &olen, &info, text, len, path, NULL) ||
        !info.upgraded)
      return fail("upgrade");
    free(out);
    double t2 = bench_now();
    if (r > 0) {
      best_val = t1 - t0 < best_val ? t1 - t0 : best_val;
      best_up = t2 - t1 < best_up ? t2 - t1 : best_up;
    }
  }
  printf("upgrade %s (%.1f MB): validate %.3f s, upgrade %.3f s: %.2fx "
         "validate (best of %d)\n",
         path, (double)len / 1e6, best_val, best_up, best_up / best_val, reps);
  free(text);
  return 0;
}
