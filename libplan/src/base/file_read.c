/* Reading a whole file safely (plan_read_file, libplan/common.h): opened
 * without blocking so a FIFO cannot hang the caller, refused unless it is a
 * regular file, and capped before and while it is read, so /dev/zero or a
 * file that grows under us ends with an error, not a loop. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

/* What a file that is not regular is, for the message. */
static const char *kind_of(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

/* "256 MiB", "1 GiB": the cap as the messages say it. */
static void cap_text(size_t cap, char *buf, size_t size) {
  if (cap >= ((size_t)1 << 30) && cap % ((size_t)1 << 30) == 0)
    snprintf(buf, size, "%zu GiB", cap >> 30);
  else if (cap >= ((size_t)1 << 20) && cap % ((size_t)1 << 20) == 0)
    snprintf(buf, size, "%zu MiB", cap >> 20);
  else
    snprintf(buf, size, "%zu bytes", cap);
}

static int too_large(const char *path, size_t cap) {
  char c[32];
  cap_text(cap, c, sizeof c);
  return plan_fail(PLAN_ELIMIT, path, 0, 0, "'%s' is larger than the %s limit",
                   path, c);
}

static int io_error(const char *path, int err) {
  return plan_fail(PLAN_EIO, path, 0, 0, "cannot read '%s': %s", path,
                   strerror(err));
}

/* The bytes of the open regular file fd (st_size of them expected), read
 * until end of file or past cap. */
static int read_fd(int fd, const char *path, size_t expect, size_t cap,
                   char **out, size_t *outlen) {
  /* one byte more than expected, so reaching the end needs no regrowth */
  size_t len = 0, room = expect < cap ? expect + 1 : cap + 1;
  if (room < 4096)
    room = 4096;
  char *buf = malloc(room + 1);
  if (!buf)
    return plan_oom();
  for (;;) {
    if (len == room) { /* the file grew: grow up to one byte past cap */
      if (len > cap) {
        free(buf);
        return too_large(path, cap);
      }
      size_t more = room > cap / 2 ? cap + 1 : room * 2;
      char *grown = realloc(buf, more + 1);
      if (!grown) {
        free(buf);
        return plan_oom();
      }
      buf = grown;
      room = more;
    }
    ssize_t n = read(fd, buf + len, room - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      free(buf);
      return io_error(path, e);
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  if (len > cap) {
    free(buf);
    return too_large(path, cap);
  }
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return PLAN_OK;
}

int plan_read_file(char **out, size_t *len, const char *path,
                   size_t max_bytes) {
  if (!out || !len || !path)
    return plan_failf(PLAN_EUSAGE, "plan_read_file: NULL argument");
  *out = NULL;
  *len = 0;
  size_t cap = max_bytes ? max_bytes : PLAN_MAX_FILE_BYTES;
  /* O_NONBLOCK: opening a FIFO with no writer would wait for good */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return io_error(path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return io_error(path, e);
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return io_error(path, EISDIR);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return plan_fail(PLAN_EIO, path, 0, 0,
                     "cannot read '%s': %s, not a regular file", path,
                     kind_of(st.st_mode));
  }
  if (st.st_size < 0 || (uintmax_t)st.st_size > cap) {
    close(fd);
    return too_large(path, cap);
  }
  /* a regular file: reads may block again (NFS), as they normally do */
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    return io_error(path, e);
  }
  int rc = read_fd(fd, path, (size_t)st.st_size, cap, out, len);
  close(fd);
  return rc;
}
