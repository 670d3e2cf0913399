/* What common.h declares: status names, versions, content-hash text, the
 * thread-local last error and plan_buffer_free.
 *
 * The last error lives in fixed-size thread-local buffers so that setting it
 * never allocates: reporting PLAN_ENOMEM must work when memory is gone. The
 * setters declared in util.h (plan_fail, plan_failf, plan_oom) and the
 * public plan_error_set are defined here because they are the only writers
 * of that state. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/common.h"
#include "base/util.h"

#define ERR_MSG_MAX 1024
#define ERR_FILE_MAX 512

typedef struct err_state {
  int code;
  int line;
  int column;
  char message[ERR_MSG_MAX];
  char file[ERR_FILE_MAX];
} err_state;

static _Thread_local err_state tls_err;
/* The public view; its pointers are refreshed on every plan_error_last()
 * because the address of a thread-local is not a constant initialiser. */
static _Thread_local plan_error tls_view;

/* ---- status names -------------------------------------------------------- */

const char *plan_status_name(int status) {
  static const char *const names[] = {
      "ok",      "nomem", "io",    "syntax",   "schema",     "version",
      "invalid", "limit", "usage", "notfound", "unsupported"};
  if (status > 0 || status < PLAN_EUNSUPPORTED)
    return "unknown";
  return names[-status];
}

/* ---- setters ------------------------------------------------------------- */

/* Copies src into dst (capacity cap), truncating; src may overlap dst. */
static void copy_trunc(char *dst, size_t cap, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= cap)
    n = cap - 1;
  if (n)
    memmove(dst, src, n);
  dst[n] = '\0';
}

static void set_error(int code, const char *file, int line, int col,
                      const char *fmt, va_list ap) {
  /* Format into a local first: the arguments may point into the current
   * message (wrapping an error with context), and vsnprintf must not
   * overlap its output. */
  char msg[ERR_MSG_MAX];
  if (!fmt || vsnprintf(msg, sizeof msg, fmt, ap) < 0)
    msg[0] = '\0';
  copy_trunc(tls_err.file, sizeof tls_err.file, file);
  memcpy(tls_err.message, msg, strlen(msg) + 1);
  tls_err.code = code;
  tls_err.line = line > 0 ? line : 0;
  tls_err.column = col > 0 ? col : 0;
}

int plan_fail(int code, const char *file, int line, int col, const char *fmt,
              ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(code, file, line, col, fmt, ap);
  va_end(ap);
  return code;
}

int plan_failf(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(code, NULL, 0, 0, fmt, ap);
  va_end(ap);
  return code;
}

int plan_error_set(int code, const char *file, int line, int column,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(code, file, line, column, fmt, ap);
  va_end(ap);
  return code;
}

int plan_oom(void) {
  tls_err.code = PLAN_ENOMEM;
  tls_err.line = 0;
  tls_err.column = 0;
  tls_err.file[0] = '\0';
  copy_trunc(tls_err.message, sizeof tls_err.message, "out of memory");
  return PLAN_ENOMEM;
}

/* ---- readers ------------------------------------------------------------- */

const plan_error *plan_error_last(void) {
  tls_view.code = tls_err.code;
  tls_view.message = tls_err.message;
  tls_view.file = tls_err.file;
  tls_view.line = tls_err.line;
  tls_view.column = tls_err.column;
  return &tls_view;
}

void plan_error_clear(void) {
  tls_err.code = PLAN_OK;
  tls_err.line = 0;
  tls_err.column = 0;
  tls_err.message[0] = '\0';
  tls_err.file[0] = '\0';
}

char *plan_error_format(char *buf, size_t size) {
  const err_state *e = &tls_err;
  if (!buf || size == 0)
    return buf;
  if (e->file[0] && e->line && e->column)
    snprintf(buf, size, "%s:%d:%d: error: %s", e->file, e->line, e->column,
             e->message);
  else if (e->file[0] && e->line)
    snprintf(buf, size, "%s:%d: error: %s", e->file, e->line, e->message);
  else if (e->file[0])
    snprintf(buf, size, "%s: error: %s", e->file, e->message);
  else if (e->line && e->column) /* in-memory text: position only */
    snprintf(buf, size, "%d:%d: error: %s", e->line, e->column, e->message);
  else if (e->line)
    snprintf(buf, size, "%d: error: %s", e->line, e->message);
  else
    snprintf(buf, size, "error: %s", e->message);
  return buf;
}

/* ---- buffers ------------------------------------------------------------- */

/* Every buffer handed out through `char **out` comes from malloc (plan_buf,
 * strdup), so free is its release. */
void plan_buffer_free(void *buf) {
  free(buf);
}

/* ---- versions ------------------------------------------------------------ */

const char *plan_version_string(void) {
  return PLAN_VERSION_STRING;
}
int plan_version_number(void) {
  return PLAN_VERSION_NUMBER;
}
int plan_abi_version(void) {
  return PLAN_ABI_VERSION;
}

/* ---- hashes -------------------------------------------------------------- */

char *plan_hash_format(plan_hash h, char *buf) {
  /* Big-endian canonical form: high word first, most significant digit
   * first, which is what %016x already gives per word. */
  snprintf(buf, PLAN_HASH_STRLEN, "xxh3:%016" PRIx64 "%016" PRIx64, h.high,
           h.low);
  return buf;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int plan_hash_parse(plan_hash *out, const char *text) {
  plan_hash h = {0, 0};
  if (!out || !text)
    return plan_failf(PLAN_EINVALID, "hash is missing");
  if (strncmp(text, "xxh3:", 5) != 0)
    return plan_failf(PLAN_EINVALID, "hash must start with \"xxh3:\"");
  for (int i = 0; i < 32; i++) {
    int v = hex_value(text[5 + i]); /* stops at the NUL: it is not hex */
    if (v < 0)
      return plan_failf(PLAN_EINVALID,
                        "hash must be \"xxh3:\" and 32 hex digits");
    if (i < 16)
      h.high = (h.high << 4) | (uint64_t)v;
    else
      h.low = (h.low << 4) | (uint64_t)v;
  }
  if (text[37] != '\0')
    return plan_failf(PLAN_EINVALID,
                      "hash must be \"xxh3:\" and 32 hex digits");
  *out = h;
  return PLAN_OK;
}

int plan_hash_equal(plan_hash a, plan_hash b) {
  return a.high == b.high && a.low == b.low;
}
