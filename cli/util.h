/* The `plan` tool's own helpers, not the library's business: reading a
 * whole file, a path's folder, strict integer parsing. */
#ifndef PLAN_CLI_UTIL_H
#define PLAN_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The whole file, NUL-terminated (free with free()); NULL with the last
 * libplan error set (plan_error_set: PLAN_EIO, PLAN_ENOMEM) when it cannot
 * be read. *len is its length in bytes. */
char *cli_read_file(const char *path, size_t *len);

/* The folder of a path ("." when none, "/" for a file at the root), into
 * out (NUL-terminated, truncated to size). */
void cli_dirname(const char *path, char *out, size_t size);

/* A whole decimal integer s[0..len): an optional sign, digits, no leading
 * zeros beyond "0", nothing else (no spaces, no underscores). False on any
 * deviation or overflow, *out untouched. */
bool cli_parse_int64(const char *s, size_t len, int64_t *out);

#endif
