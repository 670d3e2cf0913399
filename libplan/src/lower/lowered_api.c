/* Lowered programs in the public API (libplan/lowered.h) beside the file
 * form of lowered_io.c: reading one from a path (the read-only views are
 * lowered_views.c's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "lower/lower.h"

int plan_lowered_load(plan_lowered **out, const char *path) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load: NULL out");
  *out = NULL;
  plan_error_clear();
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load: NULL path");
  char *data = NULL;
  size_t len = 0;
  int rc = plan_read_file(&data, &len, path, PLAN_MAX_LOWERED_BYTES);
  if (rc)
    return rc;
  /* a program given by path is beside the file, as plan_load resolves it */
  char dir[4096];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (slash && n < sizeof dir) {
    memcpy(dir, path, n);
    dir[n] = '\0';
    if (!dir[0])
      strcpy(dir, "/");
  } else {
    dir[0] = '\0';
  }
  rc = plan_lowered_load_buffer(out, data, len, path, dir);
  free(data);
  return rc;
}
