/* The diagnostics list: findings with copied strings, kept in one arena so
 * a whole report is freed at once; the one text form a finding has. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/diag.h"
#include "base/util.h"

/* A finding plus its position in the list before sorting, which makes the
 * qsort-based sort stable. `d` comes first so &entry->d is what get()
 * hands out. */
typedef struct diag_entry {
  plan_diag d;
  size_t seq;
} diag_entry;

struct plan_diags {
  diag_entry *items;
  size_t count;
  size_t cap;
  plan_arena strings;
};

int plan_diags_new(plan_diags **out) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_diags_new: out is NULL");
  *out = NULL;
  plan_diags *d = calloc(1, sizeof *d);
  if (!d)
    return plan_oom();
  plan_arena_init(&d->strings);
  *out = d;
  return PLAN_OK;
}

void plan_diags_free(plan_diags *d) {
  if (!d)
    return;
  plan_arena_free(&d->strings);
  free(d->items);
  free(d);
}

size_t plan_diags_count(const plan_diags *d) {
  return d ? d->count : 0;
}

const plan_diag *plan_diags_get(const plan_diags *d, size_t i) {
  if (!d || i >= d->count)
    return NULL;
  return &d->items[i].d;
}

size_t plan_diags_count_at_least(const plan_diags *d, plan_severity sev) {
  size_t n = 0;
  for (size_t i = 0; d && i < d->count; i++)
    if (d->items[i].d.severity >= sev)
      n++;
  return n;
}

/* Copies s into the arena; NULL stays "" (shared literal, never freed). */
static const char *keep(plan_arena *a, const char *s) {
  if (!s || !*s)
    return "";
  return plan_arena_strdup(a, s);
}

int plan_diags_add(plan_diags *d, plan_severity sev, const char *code,
                   const char *object, const char *file, int line, int column,
                   const char *fmt, ...) {
  if (!d)
    return plan_failf(PLAN_EUSAGE, "plan_diags_add: list is NULL");
  if (d->count == d->cap) {
    size_t ncap = d->cap ? d->cap * 2 : 16;
    if (ncap > SIZE_MAX / sizeof *d->items)
      return plan_oom();
    diag_entry *p = realloc(d->items, ncap * sizeof *p);
    if (!p)
      return plan_oom();
    d->items = p;
    d->cap = ncap;
  }
  diag_entry e;
  e.seq = d->count;
  e.d.severity = sev;
  e.d.line = line > 0 ? line : 0;
  e.d.column = column > 0 ? column : 0;
  e.d.code = keep(&d->strings, code);
  e.d.object = keep(&d->strings, object);
  e.d.file = keep(&d->strings, file);
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    e.d.message = plan_arena_vprintf(&d->strings, fmt, ap);
    va_end(ap);
  } else {
    e.d.message = "";
  }
  /* A failed copy leaves some bytes in the arena; they are freed with it. */
  if (!e.d.code || !e.d.object || !e.d.file)
    return plan_oom();
  if (!e.d.message) /* plan_arena_vprintf set the last error: ENOMEM or EINVALID
                     */
    return plan_error_last()->code;
  d->items[d->count++] = e;
  return PLAN_OK;
}

static int cmp_int(int a, int b) {
  return (a > b) - (a < b);
}

static int cmp_entry(const void *pa, const void *pb) {
  const diag_entry *a = pa, *b = pb;
  int c;
  if ((c = strcmp(a->d.file, b->d.file)) != 0)
    return c;
  if ((c = cmp_int(a->d.line, b->d.line)) != 0)
    return c;
  if ((c = cmp_int(a->d.column, b->d.column)) != 0)
    return c;
  if ((c = strcmp(a->d.code, b->d.code)) != 0)
    return c;
  if ((c = strcmp(a->d.object, b->d.object)) != 0)
    return c;
  if ((c = strcmp(a->d.message, b->d.message)) != 0)
    return c;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

void plan_diags_sort(plan_diags *d) {
  if (!d || d->count < 2)
    return;
  /* Number the current order so ties keep it, then sort. */
  for (size_t i = 0; i < d->count; i++)
    d->items[i].seq = i;
  qsort(d->items, d->count, sizeof *d->items, cmp_entry);
}

static const char *severity_name(plan_severity s) {
  return s == PLAN_SEV_ERROR     ? "error"
         : s == PLAN_SEV_WARNING ? "warning"
                                 : "note";
}

int plan_diag_format(char *buf, size_t size, const plan_diag *g) {
  if (!g) {
    if (buf && size)
      buf[0] = '\0';
    return 0;
  }
  char at[1100] = "";
  if (g->file[0] && g->line)
    snprintf(at, sizeof at, "%.1000s:%d:%d: ", g->file, g->line, g->column);
  else if (g->file[0])
    snprintf(at, sizeof at, "%.1000s: ", g->file);
  return snprintf(buf, buf ? size : 0, "%s%s: %s [%s]", at,
                  severity_name(g->severity), g->message, g->code);
}
