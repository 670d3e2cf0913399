/* What every NCCL user of the CUDA runner does before a communicator
 * exists (collectives.h): the settings that make NCCL's reductions repeat
 * (the plugin's communicator, comm_nccl.cu, and the NCCL collectives of
 * nccl_check, collectives_nccl.cu), and NCCL's unique id passed from rank
 * 0 to the other ranks through a file (nccl_check's, and the plugin's
 * communicator's when not under MPI; under MPI it goes over MPI). No NCCL or
 * CUDA call here: the plugin links this file without linking NCCL, and the host
 * emulation builds it as it is. */
#include "collectives.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libplan/common.h"
#include "libplan/plan.h"
#include "base/util.h" /* plan_errc */

namespace {

/* Makes the folder that holds `path` and every folder above it that is
 * missing (mkdir -p of its dirname). */
int make_parent(const char *path, char *err, size_t errsz) {
  size_t n = strlen(path);
  char *dir = (char *)malloc(n + 1);
  if (!dir)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "out of memory");
  memcpy(dir, path, n + 1);
  char *slash = strrchr(dir, '/');
  int rc = 0;
  if (slash && slash != dir) {
    *slash = 0;
    for (char *p = dir + 1; !rc; p++) {
      bool end = !*p;
      if (*p != '/' && !end)
        continue;
      *p = 0;
      if (mkdir(dir, 0777) && errno != EEXIST)
        rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "cannot make the folder %s: %s", dir, strerror(errno));
      if (end)
        break;
      *p = '/';
    }
  }
  free(dir);
  return rc;
}

} // namespace

extern "C" void plan_cuda_nccl_determinism(char *desc, size_t size) {
  static const char *const keys[3] = {"NCCL_ALGO", "NCCL_PROTO",
                                      "NCCL_NVLS_ENABLE"};
  static const char *const vals[3] = {"Ring", "Simple", "0"};
  size_t used = 0;
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(keys[i]);
    if (!v || !v[0])
      setenv(keys[i], vals[i], 1);
    /* a value equal to ours is ours, whoever set it (an earlier call in
     * this process did, for one) */
    bool mine = !v || !v[0] || !strcmp(v, vals[i]);
    if (desc && used < size)
      used += (size_t)snprintf(desc + used, size - used, "%s%s=%s%s",
                               i ? " " : "", keys[i], mine ? vals[i] : v,
                               mine ? "" : " (user's)");
  }
}

extern "C" int plan_cuda_nccl_id_publish(const char *path, const void *id,
                                         size_t n, char *err, size_t errsz) {
  int rc = make_parent(path, err, errsz);
  if (rc)
    return rc;
  /* written whole under another name, mode 0600, then renamed: a reader
   * never sees part of it, and no other user reads it */
  size_t len = strlen(path);
  char *tmp = (char *)malloc(len + 16);
  if (!tmp)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "out of memory");
  snprintf(tmp, len + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  bool ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, id, n) == (ssize_t)n;
  if (fd >= 0 && close(fd) != 0)
    ok = false;
  if (ok && rename(tmp, path) != 0)
    ok = false;
  if (!ok) {
    rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz, "NCCL id file %s: %s", path,
                   strerror(errno));
    if (fd >= 0)
      unlink(tmp);
  }
  free(tmp);
  return rc;
}

extern "C" int plan_cuda_nccl_id_wait(const char *path, double timeout_s,
                                      void *id, size_t n, char *err,
                                      size_t errsz) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t got = read(fd, id, n);
      close(fd);
      if (got == (ssize_t)n)
        return 0;
      return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "NCCL id file %s: %s",
                       path,
                       "shorter than an ncclUniqueId (not written by rank 0?)");
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double waited = (double)(now.tv_sec - t0.tv_sec) +
                    1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
    if (waited > timeout_s) {
      char secs[32];
      snprintf(secs, sizeof secs, "%g", timeout_s);
      return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "NCCL id file %s did not appear within %s s: is rank 0 "
                       "running, and is the path on a file system every rank "
                       "sees?",
                       path, secs);
    }
    usleep(50 * 1000);
  }
}
