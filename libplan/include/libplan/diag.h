/* libplan: diagnostics, the one findings type shared by validation, drift
 * reports and (later) verification. */
#ifndef LIBPLAN_DIAG_H
#define LIBPLAN_DIAG_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum plan_severity {
  PLAN_SEV_NOTE = 0,    /* information, never changes a verdict */
  PLAN_SEV_WARNING = 1, /* suspicious, still a positive verdict */
  PLAN_SEV_ERROR = 2    /* a negative verdict */
} plan_severity;

/* One finding. All strings are borrowed from the owning plan_diags and never
 * NULL ("" when absent). `code` is a stable dotted identifier such as
 * "strategy.illegal" (the list is in spec/plan-format.md). `object` names the
 * op or tensor the finding is about. */
typedef struct plan_diag {
  plan_severity severity;
  const char *code;
  const char *message;
  const char *object;
  const char *file;
  int line;
  int column;
} plan_diag;

typedef struct plan_diags plan_diags;

PLAN_API int plan_diags_new(plan_diags **out);
PLAN_API void plan_diags_free(plan_diags *d);
PLAN_API size_t plan_diags_count(const plan_diags *d);
/* Borrowed; NULL when i is out of range. */
PLAN_API const plan_diag *plan_diags_get(const plan_diags *d, size_t i);
/* Number of findings of severity >= sev. */
PLAN_API size_t plan_diags_count_at_least(const plan_diags *d,
                                          plan_severity sev);
/* Adds a finding (strings are copied). Returns PLAN_OK or PLAN_ENOMEM. */
PLAN_API int plan_diags_add(plan_diags *d, plan_severity sev, const char *code,
                            const char *object, const char *file, int line,
                            int column, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;
/* Sorts findings by file position, then code, then object, so reports are
 * deterministic whatever order the checks ran in. */
PLAN_API void plan_diags_sort(plan_diags *d);

#ifdef __cplusplus
}
#endif
#endif
