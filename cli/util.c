/* The `plan` tool's own helpers (util.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "libplan/cost.h"

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

int cli_mesh_arg(const char *verb, const char *flag, const char *mesh) {
  enum { MAX_AXES = 16 };
  const char *names[MAX_AXES];
  size_t lens[MAX_AXES];
  int n = 0;
  if (!mesh[0])
    return cli_usage(verb, "%s: no axes (NAME=SIZE,..., e.g. dp=2,tp=4)", flag);
  for (const char *s = mesh;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const char *eq = memchr(s, '=', len);
    if (!len)
      return cli_usage(verb, "%s: an empty axis in '%s'", flag, mesh);
    if (!eq)
      return cli_usage(verb, "%s: '%.*s' has no size (NAME=SIZE, e.g. %.*s=2)",
                       flag, (int)len, s, (int)len, s);
    size_t nl = (size_t)(eq - s);
    bool ident = nl > 0 && !(s[0] >= '0' && s[0] <= '9');
    for (size_t i = 0; i < nl && ident; i++)
      ident = s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9');
    if (!ident)
      return cli_usage(verb,
                       "%s: '%.*s' is not an axis name (letters, digits "
                       "and '_', not starting with a digit)",
                       flag, (int)nl, s);
    int64_t size;
    const char *v = eq + 1;
    size_t vl = len - nl - 1;
    if (!vl || v[0] == '+' || v[0] == '-' ||
        plan_parse_int(&size, v, vl) != PLAN_OK || size < 1)
      return cli_usage(verb, "%s: '%.*s': the size must be a whole number >= 1",
                       flag, (int)len, s);
    for (int k = 0; k < n; k++)
      if (lens[k] == nl && !strncmp(names[k], s, nl))
        return cli_usage(verb, "%s: axis '%.*s' is named twice", flag, (int)nl,
                         s);
    if (n == MAX_AXES)
      return cli_usage(verb, "%s: more than %d axes", flag, MAX_AXES);
    names[n] = s;
    lens[n++] = nl;
    if (!end)
      return EXIT_OK;
    s = end + 1;
  }
}

int cli_hardware_arg(const char *verb, const char *flag, const char *hw) {
  if (plan_cost_profile_resolve(hw))
    return EXIT_OK;
  /* the canonical names and their short names (the part before '-') */
  const char *names[32];
  char shorts[16][32];
  size_t n = 0;
  for (int i = 0; i < plan_cost_profile_count() && i < 16; i++) {
    const char *name = plan_cost_profile_name(i);
    names[n++] = name;
    snprintf(shorts[i], sizeof shorts[i], "%.*s", (int)strcspn(name, "-"),
             name);
    names[n++] = shorts[i];
  }
  char hint[256];
  if (plan_suggest(hint, sizeof hint, hw, names, n))
    return cli_usage(verb, "%s: unknown hardware '%s'; %s", flag, hw, hint);
  /* nothing near: the canonical names (every other entry of names[]) */
  char list[256] = "";
  for (size_t i = 0; i < n; i += 2)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
             i ? ", " : "", names[i]);
  return cli_usage(verb, "%s: unknown hardware '%s' (%s, or their short names)",
                   flag, hw, list);
}

/* The length of the first component of s (after its '/'s). */
static size_t component(const char *s) {
  return strcspn(s, "/");
}

int cli_relative_path(char *out, size_t size, const char *path,
                      const char *dir) {
  char *ap = realpath(path, NULL), *ad = realpath(dir, NULL);
  int rc = -1;
  if (!ap || !ad || !size)
    goto done;
  /* skip the folders both share, component by component */
  const char *p = ap, *d = ad;
  for (;;) {
    while (*p == '/')
      p++;
    while (*d == '/')
      d++;
    size_t lp = component(p), ld = component(d);
    if (!ld || lp != ld || strncmp(p, d, lp) || !p[lp])
      break;
    p += lp;
    d += ld;
  }
  size_t n = 0;
  out[0] = '\0';
  for (; *d; d += component(d)) { /* one ".." per folder of dir left */
    while (*d == '/')
      d++;
    if (!*d)
      break;
    if (n + 4 > size)
      goto done;
    memcpy(out + n, "../", 4);
    n += 3;
  }
  if (n + strlen(p) + 1 > size)
    goto done;
  memcpy(out + n, p, strlen(p) + 1);
  rc = 0;
done:
  free(ap);
  free(ad);
  return rc;
}
