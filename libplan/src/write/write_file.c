#define _XOPEN_SOURCE 700 /* realpath, fchown */
/* Saving plans: the atomic file write every saver uses (a temporary file in
 * the same folder, synced, then renamed over the target; only a regular
 * file or a new name is replaced, a symlink is followed, the mode kept)
 * and plan_save, which writes a program reference relative to the new
 * file's folder. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "read/plan_read.h"

/* ---- atomic writes
 * ----------------------------------------------------------------------- */

/* What a file that is not regular is, for the message. */
static const char *kind_of(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

/* The file a write to `path` replaces, newly allocated in *target: path
 * itself, or the regular file a symlink leads to (so the link stays a
 * link). *st its status and *exists whether there is one. Refuses (PLAN_EIO)
 * anything but a regular file or a new name, and a file with other hard
 * links, which a rename would leave holding the old text. */
static int write_target(const char *path, char **target, struct stat *st,
                        bool *exists) {
  *target = NULL;
  *exists = false;
  if (lstat(path, st) != 0) {
    if (errno != ENOENT)
      return plan_failf(PLAN_EIO, "cannot write '%s': %s", path,
                        strerror(errno));
    *target = strdup(path);
    return *target ? PLAN_OK : plan_oom();
  }
  if (S_ISLNK(st->st_mode)) {
    *target = realpath(path, NULL);
    if (!*target || stat(*target, st) != 0)
      return plan_failf(PLAN_EIO,
                        "cannot write '%s': a symlink that leads to no file "
                        "(%s)",
                        path, strerror(errno));
  } else if (!(*target = strdup(path))) {
    return plan_oom();
  }
  if (!S_ISREG(st->st_mode))
    return plan_failf(PLAN_EIO,
                      "cannot write '%s': it is %s, not a regular file, and is "
                      "not replaced",
                      path, kind_of(st->st_mode));
  if (st->st_nlink > 1)
    return plan_failf(PLAN_EIO,
                      "cannot write '%s': it has %lu hard links, which "
                      "replacing it would leave with the old content",
                      path, (unsigned long)st->st_nlink);
  *exists = true;
  return PLAN_OK;
}

/* Creates the temporary file beside `target`: ".NAME.tmp.XXXXXX", hidden
 * and never ending in the target's extension, so a leftover of a killed run
 * is not mistaken for a plan; O_EXCL, so it never collides with another
 * run's and never follows a link someone put there. Its name in *tmp. */
static int open_temp(const char *target, mode_t mode, char **tmp) {
  const char *slash = strrchr(target, '/');
  size_t dl = slash ? (size_t)(slash - target) + 1 : 0, n = strlen(target);
  *tmp = malloc(n + 32);
  if (!*tmp)
    return -1;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
               ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)tmp;
  static const char digits[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int attempt = 0; attempt < 100; attempt++) {
    /* splitmix64: a fresh suffix per attempt */
    uint64_t z = (x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    char suffix[7];
    for (int k = 0; k < 6; k++, z /= 62)
      suffix[k] = digits[z % 62];
    suffix[6] = '\0';
    snprintf(*tmp, n + 32, "%.*s.%s.tmp.%s", (int)dl, target, target + dl,
             suffix);
    int fd =
        open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/* Writes all of data to fd, then syncs it; 0 or an errno. */
static int write_all(int fd, const char *p, size_t left) {
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return errno;
    p += w;
    left -= (size_t)w;
  }
  return fsync(fd) != 0 ? errno : 0;
}

/* The temporary file's life, from creation to rename or removal: the
 * target's mode (and owner, where allowed) kept, synced, renamed. */
static int write_via_temp(const char *path, const char *target,
                          const struct stat *st, bool exists, const void *data,
                          size_t len) {
  char *tmp = NULL;
  /* a new file gets 0666 less the umask, as any created file does */
  int fd = open_temp(target, exists ? 0600 : 0666, &tmp);
  if (fd < 0) {
    int e = errno;
    bool named = tmp != NULL;
    free(tmp);
    return named ? plan_failf(PLAN_EIO, "cannot write '%s': %s", path,
                              strerror(e))
                 : plan_oom();
  }
  int e = 0;
  if (exists) {
    /* the owner first: fchown may clear set-id bits that fchmod restores */
    if (fchown(fd, st->st_uid, st->st_gid) != 0 && errno != EPERM)
      e = errno;
    if (!e && fchmod(fd, st->st_mode & 07777) != 0)
      e = errno;
  }
  if (!e)
    e = write_all(fd, data, len);
  if (close(fd) != 0 && !e)
    e = errno;
  if (!e && rename(tmp, target) != 0)
    e = errno;
  if (e)
    unlink(tmp);
  free(tmp);
  if (e)
    return plan_failf(PLAN_EIO, "cannot write '%s': %s", path, strerror(e));
  return PLAN_OK;
}

int plan_write_file_atomic(const char *path, const void *data, size_t len) {
  if (!path || (!data && len))
    return plan_failf(PLAN_EUSAGE, "plan_write_file_atomic: NULL argument");
  char *target;
  struct stat st;
  bool exists;
  int rc = write_target(path, &target, &st, &exists);
  if (rc) {
    free(target);
    return rc;
  }
  /* While the temporary file exists, this thread holds back the signals
   * that end a process by default: one that arrives lands once the file
   * is renamed or removed, so an interrupted run leaves no temporary file
   * behind (the library installs no handler; SIGKILL can still leave one,
   * hidden and named as such, and the target intact). */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigaddset(&block, SIGQUIT);
  bool masked = pthread_sigmask(SIG_BLOCK, &block, &old) == 0;
  rc = write_via_temp(path, target, &st, exists, data, len);
  if (masked)
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  free(target);
  return rc;
}

char *plan_path_from(const char *from, const char *target) {
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
    rebased = plan_path_from(path, p->program->file);
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
