/* The `plan` tool's own helpers (util.h). */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

char *cli_read_file(const char *path, size_t *len, size_t max_bytes) {
  char *data = NULL;
  if (plan_read_file(&data, len, path, max_bytes))
    return NULL;
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

int cli_int_arg(const char *verb, const char *flag, const char *value,
                int64_t lo, int64_t hi, int64_t *out) {
  int64_t v;
  /* a '+' or a '-' only where negative numbers are allowed */
  bool signed_ok = lo < 0 || (value[0] != '-' && value[0] != '+');
  if (signed_ok && plan_parse_int(&v, value, strlen(value)) == PLAN_OK &&
      v >= lo && v <= hi) {
    *out = v;
    return EXIT_OK;
  }
  if (lo == INT64_MIN && hi == INT64_MAX)
    return cli_usage(verb, "%s takes a whole number, not '%s'", flag, value);
  return cli_usage(verb, "%s takes a whole number from %lld to %lld, not '%s'",
                   flag, (long long)lo, (long long)hi, value);
}

bool cli_parse_real(const char *s, size_t len, double *out) {
  /* the spelling first: strtod alone would take spaces, hex, inf and nan */
  size_t i = 0, digits = 0;
  if (i < len && (s[i] == '-' || s[i] == '+'))
    i++;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
    digits++;
  if (i < len && s[i] == '.')
    for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
      digits++;
  if (!digits)
    return false;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    size_t e = ++i;
    if (i < len && (s[i] == '-' || s[i] == '+'))
      e = ++i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
      ;
    if (i == e)
      return false;
  }
  if (i != len || len >= 64)
    return false;
  char buf[64];
  memcpy(buf, s, len);
  buf[len] = '\0';
  errno = 0;
  double v = strtod(buf, NULL);
  if (!isfinite(v) || errno == ERANGE)
    return false;
  *out = v;
  return true;
}

int cli_real_arg(const char *verb, const char *flag, const char *value,
                 double above, double most, double *out) {
  double v;
  if (cli_parse_real(value, strlen(value), &v) && v > above && v <= most) {
    *out = v;
    return EXIT_OK;
  }
  return cli_usage(verb, "%s takes a number above %g, not '%s'", flag, above,
                   value);
}

int cli_write_output(const char *dest, const char *text, size_t len) {
  if (!strcmp(dest, "-")) {
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
      fprintf(stderr, "plan: cannot write to standard output: %s\n",
              strerror(errno));
      return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
  }
  return plan_write_file_atomic(dest, text, len) ? cli_fail_last() : EXIT_OK;
}
