/* Shared by the benchmarks: a monotonic clock, and running this program
 * again as a child process, so each figure (time, peak memory) is measured
 * in a fresh process of its own. */
#ifndef LIBPLAN_BENCH_COMMON_H
#define LIBPLAN_BENCH_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs `path` with `argv` in a child process and waits for it. With out !=
 * NULL, the child's stdout is read into out (NUL-terminated). Returns the
 * child's peak RSS (ru_maxrss, KiB), or -1 when it cannot run or exits
 * non-zero (said on stderr, named `who`). */
static inline long bench_child(const char *who, const char *path,
                               char *const argv[], char *out, size_t outsz) {
  int fds[2] = {-1, -1};
  if (out && pipe(fds))
    return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    if (out) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
    }
    execv(path, argv);
    _exit(127);
  }
  if (out) {
    size_t n = 0;
    ssize_t r;
    close(fds[1]);
    while (n + 1 < outsz && (r = read(fds[0], out + n, outsz - 1 - n)) != 0) {
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        break;
      n += (size_t)r;
    }
    out[n] = 0;
    close(fds[0]);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid)
    return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s: child '%s' failed (status %d)\n", who,
            argv[2] ? argv[2] : "?", status);
    return -1;
  }
  return ru.ru_maxrss;
}

#endif
