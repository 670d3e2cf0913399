/* The `plan` tool's own helpers, not the library's business: reading a
 * whole file, a path's folder, numeric options parsed strictly, output to
 * a file or standard output, the temporary file a signal must remove. */
#ifndef PLAN_CLI_UTIL_H
#define PLAN_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The whole file, NUL-terminated (free with free()); NULL with the last
 * libplan error set when it cannot be read (plan_read_file: regular files
 * only, at most max_bytes; 0: PLAN_MAX_FILE_BYTES, the cap of plans and
 * programs). *len is its length in bytes. */
char *cli_read_file(const char *path, size_t *len, size_t max_bytes);

/* The folder of a path ("." when none, "/" for a file at the root), into
 * out (NUL-terminated, truncated to size). */
void cli_dirname(const char *path, char *out, size_t size);

/* The value of a numeric option `flag` of `verb`: a whole decimal number
 * (plan_parse_int: no spaces, signs only where lo < 0, nothing after it) in
 * [lo, hi]. EXIT_OK with *out set, else a usage error naming the flag
 * (exit 2). */
int cli_int_arg(const char *verb, const char *flag, const char *value,
                int64_t lo, int64_t hi, int64_t *out);
/* A finite decimal number (digits, an optional fraction and exponent; no
 * spaces, hex, inf or nan) above `above` (strictly) and at most `most`.
 * EXIT_OK with *out set, else a usage error naming the flag. */
int cli_real_arg(const char *verb, const char *flag, const char *value,
                 double above, double most, double *out);
/* Whether s[0..len) is such a number; *out set when it is. */
bool cli_parse_real(const char *s, size_t len, double *out);

/* A mesh shape given as `flag` ("dp=2,tp=4"): NAME=SIZE items, each name
 * an identifier named once, each size a whole number >= 1. EXIT_OK, else a
 * usage error in the flag's terms ("--mesh: 'tp' has no size"). */
int cli_mesh_arg(const char *verb, const char *flag, const char *mesh);
/* A hardware profile given as `flag`: EXIT_OK when the library knows it,
 * else a usage error with the nearest names. */
int cli_hardware_arg(const char *verb, const char *flag, const char *hw);

/* path (an existing file) relative to the folder dir, both resolved
 * (symlinks, '..'), into out: "my.lua", "../strategies/my.lua". 0, or -1
 * when either cannot be resolved or out is too small. */
int cli_relative_path(char *out, size_t size, const char *path,
                      const char *dir);

/* Writes text to `dest`: standard output for "-", else the file, written
 * atomically (plan_write_file_atomic). EXIT_OK, or the exit code of the
 * failure after its message. */
int cli_write_output(const char *dest, const char *text, size_t len);

#endif
