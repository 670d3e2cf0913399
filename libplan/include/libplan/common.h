/* libplan: status codes, versions and the thread-local last error.
 *
 * Conventions for the whole API (see docs/architecture.md):
 * - every function that can fail returns int: PLAN_OK (0) or a negative
 *   PLAN_E* code; the out-parameter comes first and is named `out`;
 * - an object returned through `**out` is owned by the caller and freed with
 *   the type's own free function, which accepts NULL;
 * - a pointer returned as a value is borrowed from its parent object;
 * - on failure the last error of the calling thread holds a message and,
 *   where the failure is about input, the file, line and column (1-based).
 */
#ifndef LIBPLAN_COMMON_H
#define LIBPLAN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API. The library is built with -fvisibility=hidden, so
 * only what a header declares with PLAN_API is exported from libplan.so;
 * every other function is internal, whatever its linkage. */
#if defined(__GNUC__) || defined(__clang__)
#define PLAN_API __attribute__((visibility("default")))
#else
#define PLAN_API
#endif

/* Library version (semantic versioning; separate from the format version). */
#define PLAN_VERSION_MAJOR 0
#define PLAN_VERSION_MINOR 1
#define PLAN_VERSION_PATCH 0
#define PLAN_VERSION_STRING "0.1.0"
#define PLAN_VERSION_NUMBER                                                    \
  (PLAN_VERSION_MAJOR * 10000 + PLAN_VERSION_MINOR * 100 + PLAN_VERSION_PATCH)

/* ABI version: bumped with every incompatible change of the public API;
 * it is the SONAME suffix (libplan.so.N) and what bindings check at load. */
#define PLAN_ABI_VERSION 0

/* The newest plan format version this library reads and writes. It reads
 * 1.0 and 1.1, and writes each document as the lowest of them that holds
 * its content: 1.1 only for a plan with a 1.1 field (shard ratios,
 * per-device hardware, a topology). It also reads format 0.1, the
 * pre-release form of 1.0 (same content, its own version kept and hashed);
 * `plan upgrade` rewrites such a file as PLAN_FORMAT_BASE_STRING. */
#define PLAN_FORMAT_MAJOR 1
#define PLAN_FORMAT_MINOR 1
#define PLAN_FORMAT_STRING "1.1"
/* The first version of the major: what content without a newer field is
 * written as. */
#define PLAN_FORMAT_BASE_STRING "1.0"
/* The last pre-release format: 0.MINOR files up to this minor are read. */
#define PLAN_FORMAT_PRERELEASE_MINOR 1

/* Status codes. Every failing call returns one of these. */
enum {
  PLAN_OK = 0,
  PLAN_ENOMEM = -1,  /* an allocation failed */
  PLAN_EIO = -2,     /* a file could not be read or written */
  PLAN_ESYNTAX = -3, /* not well-formed YAML (or not UTF-8) */
  PLAN_ESCHEMA =
      -4, /* wrong structure: unknown field, wrong type, missing field */
  PLAN_EVERSION = -5, /* a format version this library cannot read */
  PLAN_EINVALID = -6, /* well-formed but meaningless: unknown op, dangling name,
                         cycle, bad shape, illegal placement spelling */
  PLAN_ELIMIT = -7,   /* over a documented limit: nesting, size, count */
  PLAN_EUSAGE = -8,   /* bad argument from the caller */
  PLAN_ENOTFOUND = -9,    /* a named object does not exist */
  PLAN_EUNSUPPORTED = -10 /* valid, but not available here */
};

/* Short stable name of a status code ("ok", "nomem", "io", "syntax",
 * "schema", "version", "invalid", "limit", "usage", "notfound",
 * "unsupported"), as used in conformance vectors. Never NULL. */
PLAN_API const char *plan_status_name(int status);

/* The calling thread's last error. Fields are never NULL: message is "" and
 * file is "" when unset; line and column are 1-based, 0 when unknown. The
 * struct is valid until the next libplan call on this thread. */
typedef struct plan_error {
  int code;
  const char *message;
  const char *file;
  int line;
  int column;
} plan_error;

PLAN_API const plan_error *plan_error_last(void);
PLAN_API void plan_error_clear(void);

/* Sets the calling thread's last error: code, the file, line and column
 * it is about (file NULL or "", line and column 0 when there is none) and
 * a printf-style message, truncated to 1023 bytes. For embedders and
 * tracers (libplan/trace.h) whose own failures should read like the
 * library's. Never allocates. Returns `code`, so a caller can write
 * `return plan_error_set(PLAN_EINVALID, NULL, 0, 0, "...", ...);`. */
PLAN_API int plan_error_set(int code, const char *file, int line, int column,
                            const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Formats the last error as "file:line:col: error: message" into buf
 * (always NUL-terminated, truncated to size). Returns buf. */
PLAN_API char *plan_error_format(char *buf, size_t size);

/* Frees a buffer the library returned through a `char **out` parameter
 * (plan_write_buffer, plan_canonical, the *_write functions, summaries);
 * accepts NULL. The library allocates them with malloc, so free() frees
 * them as well; this function lets a binding or a program with another C
 * runtime free them without reaching for the library's allocator itself. */
PLAN_API void plan_buffer_free(void *buf);

/* ---- files and numbers ----------------------------------------------------
 */

/* The most bytes a plan or program file may have (plan_load, a program by
 * path, plan_read_file's default), and a lowered program file (whose steps
 * and layouts make it larger than its plan). */
#define PLAN_MAX_FILE_BYTES ((size_t)256 << 20)
#define PLAN_MAX_LOWERED_BYTES ((size_t)1 << 30)

/* Reads the whole regular file `path` into a newly allocated NUL-terminated
 * buffer (*out, *len bytes without the NUL; free it with plan_buffer_free).
 * The file is opened without blocking (a FIFO never hangs the call) and
 * refused unless it is a regular file; it may hold at most max_bytes (0:
 * PLAN_MAX_FILE_BYTES), checked against its size before the read and while
 * it is read. PLAN_EIO (cannot open or read; not a regular file),
 * PLAN_ELIMIT (too large), PLAN_ENOMEM, PLAN_EUSAGE; the last error names
 * the file and never quotes its content; *out = NULL on failure. */
PLAN_API int plan_read_file(char **out, size_t *len, const char *path,
                            size_t max_bytes);

/* Parses a whole decimal integer s[0..len): an optional sign, digits, no
 * leading zeros beyond "0", nothing else (no spaces, no underscores, no
 * trailing text). PLAN_OK with *out set, else PLAN_EINVALID (empty, any
 * other character, out of the int64 range) with *out untouched. */
PLAN_API int plan_parse_int(int64_t *out, const char *s, size_t len);

/* Runtime versions. */
PLAN_API const char *plan_version_string(void);
PLAN_API int plan_version_number(void);
PLAN_API int plan_abi_version(void);

/* A 128-bit content hash (XXH3-128). Printed as "xxh3:" followed by the 32
 * hex digits of its big-endian canonical form. */
typedef struct plan_hash {
  uint64_t high;
  uint64_t low;
} plan_hash;

#define PLAN_HASH_STRLEN 38 /* "xxh3:" + 32 hex + NUL */

/* Writes the printed form into buf (at least PLAN_HASH_STRLEN bytes). */
PLAN_API char *plan_hash_format(plan_hash h, char *buf);
/* Parses "xxh3:<32 hex>". Returns PLAN_OK or PLAN_EINVALID. */
PLAN_API int plan_hash_parse(plan_hash *out, const char *text);
PLAN_API int plan_hash_equal(plan_hash a, plan_hash b);

/* ---- ABI check ----------------------------------------------------------- */

/* sizeof of the public struct named `type_name` by its C name without the
 * `struct` keyword ("plan_error", "plan_hash", "plan_load_options",
 * "plan_verify_options", "plan_ref_options", ...: every struct of fixed
 * layout the headers declare, verify.h's included, in both libraries);
 * 0 for NULL or a name that is not one. A binding that mirrors the structs
 * by hand compares its sizes with these when it loads the library. */
PLAN_API size_t plan_abi_sizeof(const char *type_name);

#ifdef __cplusplus
}
#endif
#endif
