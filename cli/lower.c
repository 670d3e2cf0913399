/* `plan lower`: the plan's lowered program as a file, and helpers the
 * verbs that read lowered programs share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "region_trace.h"
#include "util.h"

const char usage_lower[] =
    "usage: plan lower [-o FILE] PLAN\n"
    "\n"
    "Lowers PLAN to the SPMD program every rank runs: distributed buffers\n"
    "(a tensor in a placement), steps (inputs, local ops, collectives along\n"
    "one mesh axis), the layout of every tensor and the outputs as\n"
    "delivered (spec/lowered-format.md). Writes to standard output, or\n"
    "atomically to FILE. 'plan verify' runs the result; 'plan hash' prints\n"
    "its content hash. A manual region's body runs in the Lua sandbox and\n"
    "the file carries its traced ops, so it verifies from the file alone.\n"
    "A pipelined plan lowers over its microbatch mesh, with its stages and\n"
    "schedule (the pipeline section).\n"
    "Exit: 0 written, 1 the plan is invalid, 2 unreadable input or bad usage,\n"
    "3 not lowered here yet (stages on submeshes).\n";

int cli_load_lowered(const char *file, plan_lowered **out) {
  size_t flen = 0;
  char *fdata = cli_read_file(file, &flen, PLAN_MAX_LOWERED_BYTES);
  if (!fdata)
    return -1;
  int lowered = plan_is_lowered_text(fdata, flen);
  if (lowered) {
    char dir[4096];
    cli_dirname(file, dir, sizeof dir);
    if (plan_lowered_load_buffer(out, fdata, flen, file, dir))
      lowered = -1;
  }
  free(fdata);
  return lowered;
}

int cli_load_valid(const char *file, FILE *f, const char *not_done,
                   plan_plan **out) {
  return cli_load_valid_except(file, f, not_done, NULL, out);
}

int cli_load_valid_except(const char *file, FILE *f, const char *not_done,
                          const char *except, plan_plan **out) {
  plan_plan *p;
  *out = NULL;
  if (plan_load(&p, file))
    return cli_fail_last();
  plan_diags *d = NULL;
  if (plan_validate(&d, p)) {
    plan_free(p);
    return cli_fail_last();
  }
  size_t errors = 0, nx = except ? strlen(except) : 0;
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    errors += g->severity == PLAN_SEV_ERROR &&
              !(except && !strncmp(g->code, except, nx));
  }
  if (errors) {
    cli_print_diags(f, d);
    fprintf(f, "%s: invalid (%zu error%s): not %s\n", file, errors,
            errors == 1 ? "" : "s", not_done);
    plan_diags_free(d);
    plan_free(p);
    return EXIT_NEGATIVE;
  }
  plan_diags_free(d);
  *out = p;
  return EXIT_OK;
}

int cmd_lower(int argc, char **argv) {
  const char *file = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("lower", argv[i]);
    else if (file)
      return cli_usage("lower", "one plan at a time");
    else
      file = argv[i];
  }
  if (!file)
    return cli_usage("lower", "no plan given");
  plan_plan *p;
  int vrc = cli_load_valid(file, stderr, "lowered", &p);
  if (vrc)
    return vrc;
  plan_lowered *l;
  /* a manual region's body runs in the Lua sandbox; the file carries its
   * traced ops */
  if (plan_lower_traced(&l, p, plan_lua_trace_region, NULL)) {
    plan_free(p);
    return cli_fail_last();
  }
  int rc;
  if (out && strcmp(out, "-")) {
    /* a program by path is written relative to FILE's folder */
    rc = plan_lowered_save(l, out) ? cli_fail_last() : EXIT_OK;
    plan_lowered_free(l);
    plan_free(p);
    return rc;
  }
  char *text;
  size_t len;
  rc = plan_lowered_write(&text, &len, l);
  plan_lowered_free(l);
  plan_free(p);
  if (rc)
    return cli_fail_last();
  if (out)
    rc = cli_write_output(out, text, len);
  else
    rc = fwrite(text, 1, len, stdout) == len ? EXIT_OK : EXIT_BAD_INPUT;
  plan_buffer_free(text);
  return rc;
}
