/* The `plan` tool's own helpers (util.h). */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/common.h"

/* Ends a failed read: closes f, frees data, sets the error. */
static char *read_failed(FILE *f, char *data, int code, const char *path) {
  fclose(f);
  free(data);
  plan_error_set(code, NULL, 0, 0, "cannot read '%s'", path);
  return NULL;
}

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    plan_error_set(PLAN_EIO, NULL, 0, 0, "cannot read '%s': %s", path,
                   strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *data = malloc(cap);
  if (!data)
    return read_failed(f, NULL, PLAN_ENOMEM, path);
  for (;;) {
    if (cap - n < 2) { /* room for a byte and the NUL */
      char *grown = cap > SIZE_MAX / 2 ? NULL : realloc(data, cap * 2);
      if (!grown)
        return read_failed(f, data, PLAN_ENOMEM, path);
      data = grown;
      cap *= 2;
    }
    size_t got = fread(data + n, 1, cap - n - 1, f);
    if (got == 0)
      break;
    n += got;
  }
  if (ferror(f))
    return read_failed(f, data, PLAN_EIO, path);
  fclose(f);
  data[n] = '\0';
  *len = n;
  return data;
}

void cli_dirname(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (!slash)
    snprintf(out, size, ".");
  else if (n == 0)
    snprintf(out, size, "/");
  else
    snprintf(out, size, "%.*s", (int)n, path);
}

bool cli_parse_int64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (len > 0 && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == len)
    return false; /* empty, or a bare sign */
  if (s[i] == '0' && len - i > 1)
    return false; /* leading zero */
  /* accumulated negatively, so INT64_MIN parses without overflow */
  int64_t acc = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    int d = s[i] - '0';
    if (acc < (INT64_MIN + d) / 10)
      return false;
    acc = acc * 10 - d;
  }
  if (!neg) {
    if (acc == INT64_MIN)
      return false;
    acc = -acc;
  }
  *out = acc;
  return true;
}
