/* The verbs validate, fmt, hash and diff. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

const char usage_validate[] =
    "usage: plan validate [--program EDITED] [--format text|json] FILE...\n"
    "\n"
    "Loads each plan or program file and checks it statically: every op's\n"
    "strategy against its sharding rule, partial values into non-linear ops,\n"
    "shapes, mesh device order, pipeline stages and schedule grids, regions\n"
    "and training fields. With --program, also reports how EDITED differs\n"
    "from the program the plan was made for (drift report).\n"
    "\n"
    "Findings print as FILE:LINE:COL: SEVERITY: MESSAGE [CODE], then a\n"
    "summary line per file with its content hash (plan, or program).\n"
    "Exit: 0 valid (warnings allowed), 1 findings of severity error,\n"
    "2 unreadable input or bad usage.\n";

const char usage_fmt[] =
    "usage: plan fmt [-o OUT | --in-place | --check] [--self-contained] FILE\n"
    "\n"
    "Rewrites FILE in canonical layout: fixed key order, one line per op and\n"
    "strategy, canonical placement spellings, name patterns expanded, "
    "defaults\n"
    "omitted. Writes to standard output unless -o or --in-place; files are\n"
    "written atomically (temporary file, fsync, rename). Layout only: the\n"
    "format version is kept ('plan upgrade' changes it).\n"
    "  -o OUT            write to OUT\n"
    "  --in-place        replace FILE\n"
    "  --check           write nothing; exit 1 if FILE is not canonical\n"
    "  --self-contained  embed the program (an archive needs no other file)\n"
    "Exit: 0 done, 1 not canonical (--check), 2 unreadable input.\n";

const char usage_hash[] =
    "usage: plan hash [--part plan|program|mesh|provenance|all] [--canonical] "
    "FILE\n"
    "\n"
    "Prints the XXH3-128 content hash of a part, as xxh3:<32 hex digits>.\n"
    "The plan hash covers the program (by its hash), the mesh and every\n"
    "decision; provenance and x- keys are not part of it. Hashes ignore key\n"
    "order, layout, comments and equivalent spellings "
    "(spec/canonical-form.md).\n"
    "  --part P      plan (default for plans), program (default for program\n"
    "                files), mesh, provenance, or all (one 'part hash' per "
    "line)\n"
    "  --canonical   print the canonical encoding instead of its hash\n"
    "Exit: 0 printed, 2 unreadable input or a part the file does not have.\n";

const char usage_diff[] =
    "usage: plan diff [--format text|json] A B\n"
    "\n"
    "Semantic differences between two plans: ops and tensors added, removed\n"
    "or changed, placements, strategies, mesh axes and device order, pipeline\n"
    "stages and schedule, training and regions. Layout and spelling do not\n"
    "count. Exit: 0 same content, 1 differences found, 2 unreadable input.\n";

static int load_or_fail(plan_plan **p, const char *path) {
  if (plan_load(p, path))
    return cli_fail_last();
  return EXIT_OK;
}

int cmd_validate(int argc, char **argv) {
  const char *edited = NULL, *format = "text";
  int nfiles = 0, worst = EXIT_OK;
  char **files = calloc((size_t)argc + 1, sizeof(char *));
  if (!files)
    return EXIT_BAD_INPUT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--program") && i + 1 < argc)
      edited = argv[++i];
    else if (!strcmp(argv[i], "--format") && i + 1 < argc)
      format = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1]) {
      free(files);
      return cli_unknown_option("validate", argv[i]);
    } else
      files[nfiles++] = argv[i];
  }
  if (nfiles == 0 || (strcmp(format, "text") && strcmp(format, "json"))) {
    free(files);
    return cli_usage("validate",
                     nfiles ? "--format is text or json" : "no file given");
  }
  plan_program *ed = NULL;
  if (edited && plan_program_load(&ed, edited)) {
    free(files);
    return cli_fail_last();
  }
  for (int f = 0; f < nfiles; f++) {
    plan_plan *p;
    int rc = load_or_fail(&p, files[f]);
    if (rc) {
      worst = rc > worst ? rc : worst;
      continue;
    }
    plan_diags *d = NULL;
    if (plan_validate(&d, p)) {
      plan_free(p);
      worst = cli_fail_last();
      continue;
    }
    if (ed) {
      plan_diags *dd = NULL;
      if (plan_drift(&dd, p, ed)) {
        plan_diags_free(d);
        plan_free(p);
        worst = cli_fail_last();
        continue;
      }
      for (size_t i = 0; i < plan_diags_count(dd); i++) {
        const plan_diag *g = plan_diags_get(dd, i);
        plan_diags_add(d, g->severity, g->code, g->object, g->file, g->line,
                       g->column, "%s", g->message);
      }
      plan_diags_free(dd);
    }
    size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
    if (!strcmp(format, "json")) {
      cli_print_diags_json(stdout, d, errors ? "invalid" : "valid");
    } else {
      cli_print_diags(stdout, d);
      size_t warnings = plan_diags_count_at_least(d, PLAN_SEV_WARNING) - errors;
      /* the content hash, so a CI log says which plan was judged */
      plan_hash h;
      char hb[PLAN_HASH_STRLEN] = "";
      if (plan_hash_part(&h, p,
                         plan_has_mesh(p) ? PLAN_PART_PLAN
                                          : PLAN_PART_PROGRAM) == PLAN_OK)
        plan_hash_format(h, hb);
      printf("%s: %s (%zu error%s, %zu warning%s) %s\n", files[f],
             errors ? "invalid" : "valid", errors, errors == 1 ? "" : "s",
             warnings, warnings == 1 ? "" : "s", hb);
    }
    if (errors && worst < EXIT_NEGATIVE)
      worst = EXIT_NEGATIVE;
    plan_diags_free(d);
    plan_free(p);
  }
  plan_program_free(ed);
  free(files);
  return worst;
}

int cmd_fmt(int argc, char **argv) {
  const char *out = NULL, *file = NULL;
  bool in_place = false, check = false;
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "--in-place"))
      in_place = true;
    else if (!strcmp(argv[i], "--check"))
      check = true;
    else if (!strcmp(argv[i], "--self-contained"))
      o.self_contained = 1;
    else if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("fmt", argv[i]);
    else if (file)
      return cli_usage("fmt", "one file at a time");
    else
      file = argv[i];
  }
  if (!file)
    return cli_usage("fmt", "no file given");
  if ((out != NULL) + in_place + check > 1)
    return cli_usage("fmt", "-o, --in-place and --check exclude each other");
  if (out && !strcmp(out, "-"))
    out = NULL; /* -o -: standard output, as without -o */
  plan_plan *p;
  int rc = load_or_fail(&p, file);
  if (rc)
    return rc;
  char *text;
  size_t len;
  if (plan_write_buffer(&text, &len, p, &o)) {
    plan_free(p);
    return cli_fail_last();
  }
  plan_free(p);
  if (check) {
    size_t olen = 0;
    char *orig = cli_read_file(file, &olen, 0);
    bool same = orig && olen == len && !memcmp(orig, text, len);
    free(orig);
    plan_buffer_free(text);
    if (!same)
      printf("%s: not in canonical layout (run 'plan fmt --in-place %s')\n",
             file, file);
    return same ? EXIT_OK : EXIT_NEGATIVE;
  }
  const char *dest = in_place ? file : out;
  if (dest) {
    rc = cli_write_output(dest, text, len);
  } else {
    rc = fwrite(text, 1, len, stdout) == len ? EXIT_OK : EXIT_BAD_INPUT;
  }
  plan_buffer_free(text);
  return rc;
}

static const char *const part_names[] = {"plan", "program", "mesh",
                                         "provenance"};

int cmd_hash(int argc, char **argv) {
  const char *file = NULL, *part = NULL;
  bool canonical = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--part") && i + 1 < argc)
      part = argv[++i];
    else if (!strcmp(argv[i], "--canonical"))
      canonical = true;
    else if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("hash", argv[i]);
    else if (file)
      return cli_usage("hash", "one file at a time");
    else
      file = argv[i];
  }
  if (!file)
    return cli_usage("hash", "no file given");
  int which = -1;
  bool all = part && !strcmp(part, "all");
  if (part && !all) {
    for (int k = 0; k < 4; k++)
      if (!strcmp(part, part_names[k]))
        which = k;
    if (which < 0)
      return cli_usage("hash",
                       "--part is plan, program, mesh, provenance or all");
  }
  /* a lowered program has one hash: its content */
  plan_lowered *l;
  int lowered = cli_load_lowered(file, &l);
  if (lowered < 0)
    return cli_fail_last();
  if (lowered) {
    plan_hash lh;
    char hb[PLAN_HASH_STRLEN];
    int lrc = plan_lowered_hash(&lh, l);
    plan_lowered_free(l);
    if (lrc)
      return cli_fail_last();
    printf("%s\n", plan_hash_format(lh, hb));
    return EXIT_OK;
  }
  plan_plan *p;
  int rc = load_or_fail(&p, file);
  if (rc)
    return rc;
  if (which < 0 && !all)
    which = plan_has_mesh(p) ? PLAN_PART_PLAN : PLAN_PART_PROGRAM;
  for (int k = 0; k < 4; k++) {
    if (!all && k != which)
      continue;
    if (all &&
        ((k == PLAN_PART_PROVENANCE &&
          plan_hash_part(&(plan_hash){0, 0}, p, k)) ||
         ((k == PLAN_PART_PLAN || k == PLAN_PART_MESH) && !plan_has_mesh(p))))
      continue;
    if (canonical) {
      char *text;
      size_t len;
      if (plan_canonical(&text, &len, p, (plan_part)k)) {
        rc = cli_fail_last();
        break;
      }
      fwrite(text, 1, len, stdout);
      fputc('\n', stdout);
      plan_buffer_free(text);
      continue;
    }
    plan_hash h;
    char buf[PLAN_HASH_STRLEN];
    if (plan_hash_part(&h, p, (plan_part)k)) {
      rc = cli_fail_last();
      break;
    }
    if (all)
      printf("%-10s %s\n", part_names[k], plan_hash_format(h, buf));
    else
      printf("%s\n", plan_hash_format(h, buf));
  }
  plan_free(p);
  return rc;
}

int cmd_diff(int argc, char **argv) {
  const char *files[2] = {NULL, NULL}, *format = "text";
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc)
      format = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("diff", argv[i]);
    else if (n < 2)
      files[n++] = argv[i];
    else
      return cli_usage("diff", "two files, A and B");
  }
  if (n != 2)
    return cli_usage("diff", "two files, A and B");
  if (strcmp(format, "text") && strcmp(format, "json"))
    return cli_usage("diff", "--format is text or json");
  plan_plan *a, *b;
  int rc = load_or_fail(&a, files[0]);
  if (rc)
    return rc;
  if ((rc = load_or_fail(&b, files[1]))) {
    plan_free(a);
    return rc;
  }
  plan_diags *d;
  if (plan_diff(&d, a, b)) {
    plan_free(a);
    plan_free(b);
    return cli_fail_last();
  }
  size_t nd = plan_diags_count(d);
  if (!strcmp(format, "json")) {
    cli_print_diags_json(stdout, d, nd ? "different" : "same");
  } else {
    for (size_t i = 0; i < nd; i++) {
      const plan_diag *g = plan_diags_get(d, i);
      printf("%-15s %s\n", g->code + 5, g->message); /* drop "diff." */
    }
    if (!nd)
      printf("no differences\n");
  }
  plan_diags_free(d);
  plan_free(a);
  plan_free(b);
  return nd ? EXIT_NEGATIVE : EXIT_OK;
}
