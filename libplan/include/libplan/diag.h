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

/* One finding as every front end prints it (the tool, the Lua module, the
 * Python binding): "FILE:LINE:COL: SEVERITY: MESSAGE [CODE]", the position
 * as far as there is one ("FILE: ..." without a line; nothing without a
 * file), NUL-terminated and truncated to `size`. Returns the length the
 * whole text has (as snprintf), or 0 for a NULL finding. */
PLAN_API int plan_diag_format(char *buf, size_t size, const plan_diag *g);

/* Did-you-mean: the one or two of names[0..count) nearest to `word` by
 * edit distance (insertions, deletions, substitutions, swaps of
 * neighbours), within a third of the word's length (at least 1 edit); a
 * name equal to `word` is never suggested, and a NULL entry ends the list
 * early. Writes "did you mean 'a'?" or "did you mean 'a' or 'b'?" into buf
 * ("" when none is near; truncated to `size`) and returns how many (0, 1
 * or 2). */
PLAN_API int plan_suggest(char *buf, size_t size, const char *word,
                          const char *const *names, size_t count);

#ifdef __cplusplus
}
#endif
#endif
