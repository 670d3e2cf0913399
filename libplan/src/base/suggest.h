/* Did-you-mean inside the core: plan_suggest (diag.h) over the names of an
 * array of structs, and the " (did you mean 'x'?)" text messages append. */
#ifndef LIBPLAN_SUGGEST_H
#define LIBPLAN_SUGGEST_H

#include <stddef.h>

/* The size of a hint buffer: the sentence and two names of 60 bytes. */
#define PLAN_HINT_SIZE 192

/* Writes "; did you mean 'a'?" (or "... 'a' or 'b'?") into hint for the
 * names at `offset` in each of `count` structs `stride` bytes apart from
 * `base` (a const char * member), or "" when none is near. */
void plan_hint_field(char *hint, size_t size, const char *word,
                     const void *base, size_t count, size_t stride,
                     size_t offset);
/* The same over a list of names (NULL-terminated, or `count` long). */
void plan_hint_names(char *hint, size_t size, const char *word,
                     const char *const *names, size_t count);

#endif
