#define _XOPEN_SOURCE 700 /* realpath */
/* The verb upgrade: a file of an older format version rewritten as the
 * current one (plan_upgrade_buffer), old and new hashes printed. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

const char usage_upgrade[] =
    "usage: plan upgrade [-o OUT | --in-place] FILE\n"
    "\n"
    "Rewrites a plan or program file of an older format version (0.1, the\n"
    "pre-release form of " PLAN_FORMAT_BASE_STRING
    ") as format " PLAN_FORMAT_BASE_STRING
    ". The content stays the same: only\n"
    "the version line changes (comments, layout and line numbers are kept;\n"
    "a file laid out otherwise is written in canonical layout) and an\n"
    "x-upgraded-from key, appended as the last top-level key, records the\n"
    "old version and the old hash of every part. The result is read back\n"
    "before it is written: with its version set back, every part must hash\n"
    "as the file did. The version is part of every hash, so the new hashes\n"
    "differ; both are printed (to standard error when the result goes to\n"
    "standard output). A program given by path is another file and is left\n"
    "as it is: a plan may refer to a program file of format 0.1, whose hash\n"
    "the plan records. To upgrade both, upgrade the program file first, then\n"
    "the plans that refer to it: each then records the program's new hash.\n"
    "Writes to standard output unless -o or --in-place; files are written\n"
    "atomically.\n"
    "  -o OUT        write to OUT (beside FILE when the program is by path)\n"
    "  --in-place    replace FILE\n"
    "A file already of the current major: says so, writes nothing. Lowered\n"
    "programs and calibration files have versions of their own and are not\n"
    "upgraded here (lower the upgraded plan again).\n"
    "Exit: 0 upgraded or already current, 2 unreadable input, a newer\n"
    "format or bad usage (nothing written).\n";

static const char *const part_names[PLAN_UPGRADE_PARTS] = {
    "plan", "program", "mesh", "provenance"};

/* Whether the folders of paths a and b are the same folder. */
static bool same_folder(const char *a, const char *b) {
  char da[4096], db[4096];
  cli_dirname(a, da, sizeof da);
  cli_dirname(b, db, sizeof db);
  char *ra = realpath(da, NULL), *rb = realpath(db, NULL);
  bool same = ra && rb && !strcmp(ra, rb);
  free(ra);
  free(rb);
  return same;
}

int cmd_upgrade(int argc, char **argv) {
  const char *out = NULL, *file = NULL;
  bool in_place = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "--in-place"))
      in_place = true;
    else if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("upgrade", argv[i]);
    else if (file)
      return cli_usage("upgrade", "one file at a time");
    else
      file = argv[i];
  }
  if (!file)
    return cli_usage("upgrade", "no file given");
  if (out && in_place)
    return cli_usage("upgrade", "-o and --in-place exclude each other");
  if (out && !strcmp(out, "-"))
    out = NULL; /* -o -: standard output, as without -o */
  size_t len = 0;
  char *data = cli_read_file(file, &len, 0);
  if (!data)
    return cli_fail_last();
  if (plan_is_lowered_text(data, len)) {
    free(data);
    fprintf(stderr,
            "plan: %s: error: a lowered program is not upgraded; lower the "
            "upgraded plan again\n",
            file);
    return EXIT_BAD_INPUT;
  }
  char dir[4096];
  cli_dirname(file, dir, sizeof dir);
  plan_upgrade_info info;
  char *text = NULL;
  size_t tlen = 0;
  int rc = plan_upgrade_buffer(&text, &tlen, &info, data, len, file, dir);
  free(data);
  if (rc)
    return cli_fail_last();
  const char *dest = in_place ? file : out;
  FILE *msg = dest ? stdout : stderr;
  if (!info.upgraded) {
    fprintf(msg,
            "%s: already format %d.%d (this tool reads %s to %s): nothing "
            "to do\n",
            file, info.from_major, info.from_minor, PLAN_FORMAT_BASE_STRING,
            PLAN_FORMAT_STRING);
    return EXIT_OK;
  }
  if (dest && info.program_by_path && !same_folder(file, dest)) {
    plan_buffer_free(text);
    fprintf(stderr,
            "plan: %s: error: the program is a path relative to this file's "
            "folder; write the result there (or embed the program first: "
            "plan fmt --self-contained)\n",
            file);
    return EXIT_BAD_INPUT;
  }
  if (dest) {
    rc = cli_write_output(dest, text, tlen);
  } else {
    rc = fwrite(text, 1, tlen, stdout) == tlen ? EXIT_OK : EXIT_BAD_INPUT;
  }
  plan_buffer_free(text);
  if (rc)
    return rc;
  fprintf(msg, "%s: format %d.%d -> %s%s%s\n", file, info.from_major,
          info.from_minor, PLAN_FORMAT_BASE_STRING, dest ? ", written to " : "",
          dest ? dest : "");
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++) {
    char a[PLAN_HASH_STRLEN], b[PLAN_HASH_STRLEN];
    if (info.has[k])
      fprintf(msg, "  %-10s %s -> %s\n", part_names[k],
              plan_hash_format(info.before[k], a),
              plan_hash_format(info.after[k], b));
  }
  if (!info.layout_kept)
    fprintf(msg, "  written in canonical layout (the file's layout allows "
                 "no edit in place)\n");
  if (info.program_rehashed)
    fprintf(msg, "  the program is another file, upgraded before: the plan "
                 "now records its new hash\n");
  else if (info.program_by_path)
    fprintf(msg, "  the program is another file, left as it is (its hash, "
                 "which the plan records, is unchanged)\n");
  return EXIT_OK;
}
