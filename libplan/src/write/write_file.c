#define _XOPEN_SOURCE 700 /* realpath */
/* Saving plans: the atomic file write every saver uses (a temporary file in
 * the same folder, synced, then renamed over the target) and plan_save,
 * which writes a program reference relative to the new file's folder. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "read/plan_read.h"

/* ---- atomic writes
 * ----------------------------------------------------------------------- */

int plan_write_file_atomic(const char *path, const void *data, size_t len) {
  if (!path)
    return plan_failf(PLAN_EUSAGE, "plan_write_file_atomic: NULL path");
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  if (!tmp)
    return plan_oom();
  /* same folder, so rename() stays on one filesystem and is atomic */
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return plan_failf(PLAN_EIO, "cannot write '%s': %s", path, strerror(e));
  }
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  int e = left ? errno : 0;
  if (!e && fsync(fd) != 0)
    e = errno;
  if (close(fd) != 0 && !e)
    e = errno;
  if (!e && rename(tmp, path) != 0)
    e = errno;
  if (e) {
    unlink(tmp);
    free(tmp);
    return plan_failf(PLAN_EIO, "cannot write '%s': %s", path, strerror(e));
  }
  free(tmp);
  return PLAN_OK;
}

/* The path of file `target` relative to the folder of file `from` (both
 * as the process sees them), newly allocated; NULL when either cannot be
 * resolved or memory is short. */
static char *path_from(const char *from, const char *target) {
  char *dir = strdup(from);
  if (!dir)
    return NULL;
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = 0;
  else if (slash)
    *slash = 0;
  else
    strcpy(dir, ".");
  char *a = realpath(dir, NULL), *b = realpath(target, NULL), *out = NULL;
  free(dir);
  if (a && b) {
    /* the longest common run of whole folders: a's components all match,
     * or they match up to a '/' in both */
    size_t la = strlen(a), i = 0, common = 0;
    if (!strcmp(a, "/"))
      la = 0; /* the root: every path of b is below it */
    while (i < la && a[i] == b[i])
      i++;
    if (i == la && (b[i] == '/' || la == 0))
      common = i;
    else
      for (common = i; common > 0 && a[common] != '/'; common--)
        ;
    size_t ups = 0;
    for (size_t k = common; k < la; k++)
      ups += a[k] == '/';
    if (common < la)
      ups += 1; /* the last component of a has no trailing '/' */
    ups -= common < la && a[common] == '/' ? 1 : 0;
    const char *rest = b + common + (b[common] == '/');
    out = malloc(ups * 3 + strlen(rest) + 1);
    if (out) {
      out[0] = 0;
      for (size_t k = 0; k < ups; k++)
        strcat(out, "../");
      strcat(out, rest);
    }
  }
  free(a);
  free(b);
  return out;
}

int plan_save(const plan_plan *p, const char *path,
              const plan_write_options *opts) {
  char *text;
  size_t len;
  int rc;
  /* a program by path is written relative to the new file's folder, so
   * the saved plan finds it wherever it is saved */
  char *rebased = NULL;
  if (!p->program_inline && !(opts && opts->self_contained) && p->program &&
      p->program->file && p->program->file[0])
    rebased = path_from(path, p->program->file);
  if (rebased) {
    plan_plan moved = *p;
    moved.ref.path = rebased;
    rc = plan_write_buffer(&text, &len, &moved, opts);
    free(rebased);
  } else {
    rc = plan_write_buffer(&text, &len, p, opts);
  }
  if (rc)
    return rc;
  rc = plan_write_file_atomic(path, text, len);
  free(text);
  return rc;
}
