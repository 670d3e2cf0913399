/* Internal helpers shared by the core: arena allocation, growable byte
 * buffers, a string -> int map, and setting the thread-local last error.
 * Nothing here is public API. */
#ifndef LIBPLAN_UTIL_H
#define LIBPLAN_UTIL_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "libplan/common.h"

/* C linkage: the CUDA runner's sources (C++) include this header. */
#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PLAN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PLAN_PRINTF(a, b)
#endif

/* A hint to bring the cache line at p in for reading soon. Walks over a
 * large program in an order other than memory order (ops by name, tensors
 * by a name's hash) miss the cache at nearly every step; asking for the
 * lines a few steps ahead lets those misses overlap. Never faults, even on
 * a bad address; nothing where the compiler has no such hint. */
#if defined(__GNUC__)
#define PLAN_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define PLAN_PREFETCH(p) ((void)(p))
#endif

/* ---- last error ---------------------------------------------------------- */

/* Sets the calling thread's last error and returns `code`, so callers can
 * write `return plan_fail(PLAN_EINVALID, file, line, col, "...")`. */
int plan_fail(int code, const char *file, int line, int col, const char *fmt,
              ...) PLAN_PRINTF(5, 6);
/* Same, without a position. */
int plan_failf(int code, const char *fmt, ...) PLAN_PRINTF(2, 3);
/* PLAN_ENOMEM with a fixed message (never allocates). */
int plan_oom(void);

/* ---- arena --------------------------------------------------------------- */

/* A bump allocator: many small allocations freed together. Blocks grow
 * geometrically; an allocation never moves. */
typedef struct plan_arena_block plan_arena_block;
typedef struct plan_arena {
  plan_arena_block *head;
  size_t used_total; /* bytes handed out, for memory accounting */
} plan_arena;

void plan_arena_init(plan_arena *a);
void plan_arena_free(plan_arena *a);
/* Zeroed memory aligned to 16 bytes; NULL on allocation failure. */
void *plan_arena_alloc(plan_arena *a, size_t size);
/* Zeroed memory aligned to `align` (a power of two, at most 16): small
 * arrays of ints pack tighter than the default 16. */
void *plan_arena_alloc_align(plan_arena *a, size_t size, size_t align);
/* Forgets every allocation but keeps the largest block for reuse (zeroed
 * again), so a scratch arena cycles without returning memory to the
 * system. */
void plan_arena_reset(plan_arena *a);
/* Like plan_arena_reset without zeroing: memory handed out afterwards holds
 * old bytes. For scratch use whose every field is written. */
void plan_arena_recycle(plan_arena *a);
/* Copies s (len bytes) and NUL-terminates; NULL on failure. */
char *plan_arena_strndup(plan_arena *a, const char *s, size_t len);
char *plan_arena_strdup(plan_arena *a, const char *s);
/* printf into the arena. */
char *plan_arena_printf(plan_arena *a, const char *fmt, ...) PLAN_PRINTF(2, 3);
char *plan_arena_vprintf(plan_arena *a, const char *fmt, va_list ap);

/* ---- growable arrays ------------------------------------------------------
 */

/* Grows *arr (of elements of `elem` bytes, *cap of them) to hold at least
 * `need`: by half again each time (less slack at the peak of a big load),
 * not zeroed (each element is set when it is taken, so slack is never
 * touched). PLAN_ELIMIT past INT32_MAX / 4 elements, PLAN_ENOMEM. */
int plan_grow(void **arr, int *cap, int need, size_t elem);

/* ---- growable buffer ----------------------------------------------------- */

typedef struct plan_buf {
  char *data; /* NUL-terminated when len > 0 or after plan_buf_cstr */
  size_t len;
  size_t cap;
  bool failed; /* set on the first allocation failure; later appends no-op */
} plan_buf;

void plan_buf_init(plan_buf *b);
void plan_buf_free(plan_buf *b);
void plan_buf_reset(plan_buf *b);
void plan_buf_append_slow(plan_buf *b, const void *data, size_t len);
/* The common case (room left) inline: encoders append millions of times. */
static inline void plan_buf_append(plan_buf *b, const void *data, size_t len) {
  if (len <= 64 && !b->failed && b->len + len < b->cap) {
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return;
  }
  plan_buf_append_slow(b, data, len);
}
static inline void plan_buf_putc(plan_buf *b, char c) {
  if (!b->failed && b->len + 1 < b->cap) {
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
    return;
  }
  plan_buf_append_slow(b, &c, 1);
}
void plan_buf_puts(plan_buf *b, const char *s);
void plan_buf_printf(plan_buf *b, const char *fmt, ...) PLAN_PRINTF(2, 3);
/* Appends s as XML character data (an SVG picture's text): & < > " escaped,
 * control characters but tab dropped. NULL appends nothing. */
void plan_buf_put_xml(plan_buf *b, const char *s);
/* Returns the contents as a C string ("" when empty, never NULL unless
 * failed). */
const char *plan_buf_cstr(plan_buf *b);
/* Hands the text to the caller (*out: NUL-terminated, allocated even when
 * empty; *len unless NULL) and leaves b empty; when an append failed, frees
 * b and returns PLAN_ENOMEM with *out untouched. */
int plan_buf_take(plan_buf *b, char **out, size_t *len);

/* ---- string map ---------------------------------------------------------- */

/* Open-addressing map from NUL-terminated keys (not copied: the caller keeps
 * them alive, usually in an arena) to int values. */
typedef struct plan_strmap_slot {
  uint32_t hash; /* 0: empty */
  int val;
  const char *key;
} plan_strmap_slot;

typedef struct plan_strmap {
  plan_strmap_slot *slots;
  size_t cap; /* power of two or 0 */
  size_t count;
} plan_strmap;

void plan_strmap_init(plan_strmap *m);
/* Room for n keys without growing (growing rehashes every key into a new
 * table, a cache miss each on a large map). PLAN_OK or PLAN_ENOMEM. */
int plan_strmap_reserve(plan_strmap *m, size_t n);
void plan_strmap_free(plan_strmap *m);
/* Inserts or replaces. Returns PLAN_OK or PLAN_ENOMEM. */
int plan_strmap_put(plan_strmap *m, const char *key, int val);
/* Inserts key -> val unless the key is there: then *old is its value and
 * nothing changes; else *old = -1. One probe. PLAN_OK or PLAN_ENOMEM. */
int plan_strmap_insert(plan_strmap *m, const char *key, int val, int *old);
/* Returns the value, or -1 when absent. */
int plan_strmap_get(const plan_strmap *m, const char *key);
int plan_strmap_getn(const plan_strmap *m, const char *key, size_t len);
/* The same with the key's hash computed once by the caller
 * (plan_strmap_hash of the same len bytes): a reader hashes a name as soon
 * as it sees it, asks for its slot's cache line (plan_strmap_prefetch) and
 * inserts or looks it up after the rest of the item is read, so that the
 * slot's miss overlaps that work. */
uint64_t plan_strmap_hash(const char *key, size_t len);
void plan_strmap_prefetch(const plan_strmap *m, uint64_t h);
int plan_strmap_insert_h(plan_strmap *m, const char *key, size_t len,
                         uint64_t h, int val, int *old);
int plan_strmap_getn_h(const plan_strmap *m, const char *key, size_t len,
                       uint64_t h);

/* ---- short messages ---------------------------------------------------------
 */

/* Writes a one-line reason into err (size errsz; err may be NULL) and
 * returns PLAN_EINVALID: the error style of the op registry and rules. */
int plan_errf(char *err, size_t errsz, const char *fmt, ...) PLAN_PRINTF(3, 4);
/* The same with the status to return: code. */
int plan_errc(int code, char *err, size_t errsz, const char *fmt, ...)
    PLAN_PRINTF(4, 5);
/* A reduction of two values (plan_reduce): sum and avg add, max and min
 * fold as a > b ? a : b and a < b ? a : b (NaN keeps the left one): the
 * one order every collective of the verifier and the communicators uses. */
double plan_reduce2(int reduce, double a, double b);

/* "[4, 6]" for messages; a rank out of range prints as "[?]". buf holds
 * PLAN_DIMS_STRLEN bytes. */
#define PLAN_DIMS_STRLEN (8 * 22 + 4)
char *plan_format_dims(const int64_t *dims, int rank, char *buf);

/* A double-quoted string that JSON and YAML both read: '"' and '\\' escaped,
 * control characters as \\uXXXX, everything else as is (UTF-8 passes). */
void plan_buf_quoted(plan_buf *b, const char *s);

/* ---- numbers and names --------------------------------------------------- */

/* Shortest decimal that reads back to the same double: C's %.Ng with the
 * smallest N in 1..17 that round-trips, in the C locale. buf >= 32 bytes.
 * NaN and infinities print as "nan", "inf", "-inf". */
char *plan_format_double(double v, char *buf);
/* Strict parsers over a whole string: no leading/trailing space, no empty.
 * Integers: optional sign, decimal digits, no leading zeros beyond "0";
 * underscores are not accepted. Return false on any deviation or overflow. */
bool plan_parse_int64(const char *s, size_t len, int64_t *out);
/* Floats: YAML 1.2 core spelling (decimal, optional exponent), plus ".inf",
 * "-.inf", ".nan" and their capitalised forms. */
bool plan_parse_double(const char *s, size_t len, double *out);
/* Overflow-checked arithmetic. Return false on overflow. */
bool plan_mul_i64(int64_t a, int64_t b, int64_t *out);
bool plan_add_i64(int64_t a, int64_t b, int64_t *out);
/* The greatest common divisor of a and b (>= 0; gcd(0, b) = b). */
int64_t plan_gcd_i64(int64_t a, int64_t b);

/* Glob match over names: '*' matches any run of characters (dots included,
 * so "layers.0.*" matches every op under layers.0), '?' one character,
 * '[abc]' / '[a-z]' one character of a set. */
bool plan_glob_match(const char *pattern, const char *name);
bool plan_is_glob(const char *s);

#ifdef __cplusplus
}
#endif

#endif
