/* Internal helpers: arena, growable buffer, string map, number text, globs.
 * The last-error setters declared in util.h live in error.c, next to the
 * thread-local state they write. Every allocation failure here also sets
 * the last error (plan_oom), so callers can simply return PLAN_ENOMEM. */
#include "base/util.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "ir/ir.h"        /* plan_reduce */
#include "libplan/plan.h" /* plan_name_match */

/* ---- arena --------------------------------------------------------------- */

#define ARENA_ALIGN 16
#define ARENA_MIN_BLOCK 4096

struct plan_arena_block {
  plan_arena_block *next;
  size_t size; /* usable bytes after the header */
  size_t used;
};

/* The header is padded so that data starts 16-byte aligned (malloc gives at
 * least that on the platforms we target). */
#define ARENA_HDR                                                              \
  ((sizeof(plan_arena_block) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

static unsigned char *block_data(plan_arena_block *b) {
  return (unsigned char *)b + ARENA_HDR;
}

void plan_arena_init(plan_arena *a) {
  a->head = NULL;
  a->used_total = 0;
}

void plan_arena_free(plan_arena *a) {
  if (!a)
    return;
  plan_arena_block *b = a->head;
  while (b) {
    plan_arena_block *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
  a->used_total = 0;
}

static void arena_keep_largest(plan_arena *a, bool zero) {
  plan_arena_block *keep = NULL, *b = a->head;
  for (; b; b = b->next)
    if (!keep || b->size > keep->size)
      keep = b;
  b = a->head;
  while (b) {
    plan_arena_block *next = b->next;
    if (b != keep)
      free(b);
    b = next;
  }
  if (keep) {
    if (zero)
      memset(block_data(keep), 0, keep->used);
    keep->used = 0;
    keep->next = NULL;
  }
  a->head = keep;
  a->used_total = 0;
}

void plan_arena_reset(plan_arena *a) {
  arena_keep_largest(a, true);
}
void plan_arena_recycle(plan_arena *a) {
  arena_keep_largest(a, false);
}

/* Allocations are aligned where they start, not padded where they end, so
 * strings (align 1) pack tightly between aligned structs. */
static void *arena_alloc(plan_arena *a, size_t size, size_t align) {
  if (size == 0)
    size = 1; /* still a distinct, valid pointer */
  if (size > SIZE_MAX / 2) {
    plan_oom();
    return NULL;
  }
  plan_arena_block *b = a->head;
  size_t off = b ? (b->used + align - 1) & ~(align - 1) : 0;
  if (!b || off > b->size || b->size - off < size) {
    /* blocks double up to 1 MiB, so the last one wastes little */
    size_t bsize = !b                            ? ARENA_MIN_BLOCK
                   : b->size < ((size_t)1 << 20) ? b->size * 2
                                                 : b->size;
    if (bsize < size)
      bsize = size;
    if (bsize > SIZE_MAX - ARENA_HDR) {
      plan_oom();
      return NULL;
    }
    /* calloc: arena memory is never reused, so every allocation is zero. */
    plan_arena_block *nb = calloc(1, ARENA_HDR + bsize);
    if (!nb) {
      plan_oom();
      return NULL;
    }
    nb->size = bsize;
    nb->used = 0;
    if (b && size > b->size / 2) {
      /* A large request gets its own block behind the head, so the head's
       * free space stays usable for the small ones that follow. */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      a->head = nb;
    }
    b = nb;
    off = 0;
  }
  void *p = block_data(b) + off;
  b->used = off + size;
  a->used_total += size;
  return p;
}

void *plan_arena_alloc(plan_arena *a, size_t size) {
  return arena_alloc(a, size, ARENA_ALIGN);
}

void *plan_arena_alloc_align(plan_arena *a, size_t size, size_t align) {
  return arena_alloc(a, size,
                     align && align <= ARENA_ALIGN ? align : ARENA_ALIGN);
}

char *plan_arena_strndup(plan_arena *a, const char *s, size_t len) {
  if (len == SIZE_MAX) {
    plan_oom();
    return NULL;
  }
  char *p = arena_alloc(a, len + 1, 1);
  if (!p)
    return NULL;
  if (len)
    memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

char *plan_arena_strdup(plan_arena *a, const char *s) {
  return plan_arena_strndup(a, s, strlen(s));
}

char *plan_arena_vprintf(plan_arena *a, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *p = NULL;
  if (n >= 0) {
    p = plan_arena_alloc(a, (size_t)n + 1);
    if (p)
      vsnprintf(p, (size_t)n + 1, fmt, ap2);
  } else {
    plan_failf(PLAN_EINVALID, "bad format string");
  }
  va_end(ap2);
  return p;
}

char *plan_arena_printf(plan_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = plan_arena_vprintf(a, fmt, ap);
  va_end(ap);
  return p;
}

/* ---- growable buffer ----------------------------------------------------- */

void plan_buf_init(plan_buf *b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->failed = false;
}

void plan_buf_free(plan_buf *b) {
  if (!b)
    return;
  free(b->data);
  plan_buf_init(b);
}

void plan_buf_reset(plan_buf *b) {
  b->len = 0;
  b->failed = false;
  if (b->data)
    b->data[0] = '\0';
}

/* Makes room for `extra` more bytes plus the terminating NUL. */
static bool buf_reserve(plan_buf *b, size_t extra) {
  if (b->failed)
    return false;
  if (extra > SIZE_MAX - 1 - b->len) {
    b->failed = true;
    plan_oom();
    return false;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    plan_oom();
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void plan_buf_append_slow(plan_buf *b, const void *data, size_t len) {
  if (!buf_reserve(b, len))
    return;
  if (len)
    memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
}

void plan_buf_puts(plan_buf *b, const char *s) {
  plan_buf_append(b, s, strlen(s));
}

void plan_buf_put_xml(plan_buf *b, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '&')
      plan_buf_puts(b, "&amp;");
    else if (c == '<')
      plan_buf_puts(b, "&lt;");
    else if (c == '>')
      plan_buf_puts(b, "&gt;");
    else if (c == '"')
      plan_buf_puts(b, "&quot;");
    else if (c >= 0x20 || c == '\t')
      plan_buf_putc(b, (char)c);
  }
}

void plan_buf_printf(plan_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n >= 0 && buf_reserve(b, (size_t)n)) {
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  }
  va_end(ap2);
}

const char *plan_buf_cstr(plan_buf *b) {
  if (b->failed)
    return NULL;
  return b->data ? b->data : "";
}

int plan_buf_take(plan_buf *b, char **out, size_t *len) {
  if (!b->failed && !b->data && !(b->data = calloc(1, 1)))
    b->failed = true;
  if (b->failed) {
    plan_buf_free(b);
    return plan_oom();
  }
  *out = b->data;
  if (len)
    *len = b->len;
  memset(b, 0, sizeof *b);
  return PLAN_OK;
}

/* ---- string map ---------------------------------------------------------- */

void plan_strmap_init(plan_strmap *m) {
  m->slots = NULL;
  m->cap = 0;
  m->count = 0;
}

void plan_strmap_free(plan_strmap *m) {
  if (!m)
    return;
  free(m->slots);
  plan_strmap_init(m);
}

static size_t strmap_hash(const char *key, size_t len) {
  return (size_t)XXH3_64bits(key, len);
}

/* True when the NUL-terminated `k` equals the len bytes at `key`. */
static bool key_eq(const char *k, const char *key, size_t len) {
  return strncmp(k, key, len) == 0 && k[len] == '\0';
}

/* The stored hash of a used slot is never 0. A slot holds hash, value and
 * key pointer together, so a probe touches one cache line; the key text is
 * read only when the hash matches. */
static uint32_t slot_hash(size_t h) {
  return (uint32_t)h | 1u;
}

/* Slot holding `key` (hash h), or the empty slot where it would go. */
static size_t strmap_slot(const plan_strmap *m, const char *key, size_t len,
                          size_t h) {
  size_t mask = m->cap - 1;
  uint32_t h32 = slot_hash(h);
  size_t i = (size_t)(h32 >> 1) & mask;
  /* linear probing; load <= 2/3 keeps runs short */
  for (;; i = (i + 1) & mask) {
    const plan_strmap_slot *s = &m->slots[i];
    if (!s->hash || (s->hash == h32 && key_eq(s->key, key, len)))
      return i;
  }
}

static int strmap_grow(plan_strmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16;
  if (ncap < m->cap || ncap > SIZE_MAX / sizeof(plan_strmap_slot))
    return plan_oom();
  plan_strmap_slot *ns = calloc(ncap, sizeof *ns);
  if (!ns)
    return plan_oom();
  for (size_t i = 0; i < m->cap; i++) {
    const plan_strmap_slot *s = &m->slots[i];
    /* the new slots are written in no order: asked for a few ahead */
    if (i + 8 < m->cap && m->slots[i + 8].hash)
      PLAN_PREFETCH(&ns[(size_t)(m->slots[i + 8].hash >> 1) & (ncap - 1)]);
    if (!s->hash)
      continue;
    /* the stored hash places the key: no rehash, no key reads */
    size_t j = (size_t)(s->hash >> 1) & (ncap - 1);
    while (ns[j].hash)
      j = (j + 1) & (ncap - 1);
    ns[j] = *s;
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return PLAN_OK;
}

int plan_strmap_reserve(plan_strmap *m, size_t n) {
  while (n * 3 > m->cap * 2) {
    int rc = strmap_grow(m);
    if (rc != PLAN_OK)
      return rc;
  }
  return PLAN_OK;
}

int plan_strmap_put(plan_strmap *m, const char *key, int val) {
  size_t len = strlen(key);
  size_t h = strmap_hash(key, len);
  if (m->cap) {
    size_t i = strmap_slot(m, key, len, h);
    if (m->slots[i].hash) { /* replace */
      m->slots[i].val = val;
      return PLAN_OK;
    }
  }
  int old;
  return plan_strmap_insert(m, key, val, &old);
}

uint64_t plan_strmap_hash(const char *key, size_t len) {
  return strmap_hash(key, len);
}

void plan_strmap_prefetch(const plan_strmap *m, uint64_t h) {
  if (m->cap)
    PLAN_PREFETCH(
        &m->slots[(size_t)(slot_hash((size_t)h) >> 1) & (m->cap - 1)]);
}

int plan_strmap_insert(plan_strmap *m, const char *key, int val, int *old) {
  size_t len = strlen(key);
  return plan_strmap_insert_h(m, key, len, strmap_hash(key, len), val, old);
}

int plan_strmap_insert_h(plan_strmap *m, const char *key, size_t len,
                         uint64_t hash, int val, int *old) {
  size_t h = (size_t)hash;
  if ((m->count + 1) * 3 > m->cap * 2) {
    int rc = strmap_grow(m);
    if (rc != PLAN_OK)
      return rc;
  }
  size_t i = strmap_slot(m, key, len, h);
  plan_strmap_slot *s = &m->slots[i];
  if (s->hash) {
    *old = s->val;
    return PLAN_OK;
  }
  *old = -1;
  s->hash = slot_hash(h);
  s->val = val;
  s->key = key;
  m->count++;
  return PLAN_OK;
}

int plan_strmap_getn(const plan_strmap *m, const char *key, size_t len) {
  return plan_strmap_getn_h(m, key, len, strmap_hash(key, len));
}

int plan_strmap_getn_h(const plan_strmap *m, const char *key, size_t len,
                       uint64_t h) {
  if (!m->cap)
    return -1;
  size_t i = strmap_slot(m, key, len, (size_t)h);
  return m->slots[i].hash ? m->slots[i].val : -1;
}

int plan_strmap_get(const plan_strmap *m, const char *key) {
  return plan_strmap_getn(m, key, strlen(key));
}

/* ---- numbers ------------------------------------------------------------- */

/* Rewrites the locale's decimal point in buf as '.', in place. */
static void to_c_decimal_point(char *buf) {
  const char *dp = localeconv()->decimal_point;
  size_t dl = dp ? strlen(dp) : 0;
  if (dl == 0 || (dl == 1 && dp[0] == '.'))
    return;
  char *at = strstr(buf, dp);
  if (!at)
    return;
  *at = '.';
  memmove(at + 1, at + dl, strlen(at + dl) + 1);
}

char *plan_format_double(double v, char *buf) {
  if (isnan(v)) {
    strcpy(buf, "nan");
    return buf;
  }
  if (isinf(v)) {
    strcpy(buf, v < 0 ? "-inf" : "inf");
    return buf;
  }
  /* Try precisions in increasing order; 17 always round-trips a binary64.
   * Both snprintf and strtod use the current locale, so the round-trip
   * check is consistent; only the final text is converted to C form. */
  /* If precision p round-trips, so does every p' > p (printf rounds
   * correctly), so the smallest one is found by bisection. */
  int lo = 1, hi = 17;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (snprintf(buf, 32, "%.*g", mid, v) >= 32)
      break; /* cannot happen for %.17g of a double; keeps -O1 quiet */
    if (strtod(buf, NULL) == v)
      hi = mid;
    else
      lo = mid + 1;
  }
  if (snprintf(buf, 32, "%.*g", lo, v) >= 32)
    buf[31] = '\0';
  to_c_decimal_point(buf);
  return buf;
}

bool plan_parse_int64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (len > 0 && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == len)
    return false; /* empty, or a bare sign */
  if (s[i] == '0' && len - i > 1)
    return false; /* leading zero */
  /* Accumulate negatively so INT64_MIN parses without overflow. */
  int64_t acc = 0;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    int d = s[i] - '0';
    if (acc < (INT64_MIN + d) / 10)
      return false;
    acc = acc * 10 - d;
  }
  if (!neg) {
    if (acc == INT64_MIN)
      return false;
    acc = -acc;
  }
  *out = acc;
  return true;
}

/* The public face of the one integer parser (libplan/common.h). */
int plan_parse_int(int64_t *out, const char *s, size_t len) {
  if (!out || (!s && len))
    return PLAN_EINVALID;
  return plan_parse_int64(s ? s : "", len, out) ? PLAN_OK : PLAN_EINVALID;
}

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Length of the run of digits at s[i..len). */
static size_t digits(const char *s, size_t i, size_t len) {
  size_t n = 0;
  while (i + n < len && is_digit(s[i + n]))
    n++;
  return n;
}

static bool spelled(const char *s, size_t len, const char *a, const char *b,
                    const char *c) {
  size_t n = strlen(a); /* the three spellings have the same length */
  return len == n &&
         (memcmp(s, a, n) == 0 || memcmp(s, b, n) == 0 || memcmp(s, c, n) == 0);
}

bool plan_parse_double(const char *s, size_t len, double *out) {
  if (len == 0)
    return false;
  if (spelled(s, len, ".nan", ".NaN", ".NAN")) {
    *out = NAN;
    return true;
  }
  size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (spelled(s + i, len - i, ".inf", ".Inf", ".INF")) {
    *out = neg ? -INFINITY : INFINITY;
    return true;
  }
  /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
  size_t whole = digits(s, i, len);
  i += whole;
  if (i < len && s[i] == '.') {
    size_t frac = digits(s, i + 1, len);
    if (whole == 0 && frac == 0)
      return false;
    i += 1 + frac;
  } else if (whole == 0) {
    return false;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '-' || s[i] == '+'))
      i++;
    size_t ex = digits(s, i, len);
    if (ex == 0)
      return false;
    i += ex;
  }
  if (i != len)
    return false;

  /* The syntax is checked; strtod does the rounding. It needs a terminated
   * copy, spelled with the locale's decimal point. */
  const char *dp = localeconv()->decimal_point;
  if (!dp || !dp[0])
    dp = ".";
  size_t dl = strlen(dp);
  char small[256];
  size_t need = len + dl; /* '.' may widen to dl bytes, plus the NUL */
  char *tmp = need <= sizeof small ? small : malloc(need);
  if (!tmp) {
    plan_oom();
    return false;
  }
  size_t o = 0;
  for (size_t k = 0; k < len; k++) {
    if (s[k] == '.') {
      memcpy(tmp + o, dp, dl);
      o += dl;
    } else {
      tmp[o++] = s[k];
    }
  }
  tmp[o] = '\0';
  /* Out-of-range values saturate to +-inf or round to 0/denormal, as in
   * every YAML reader; ERANGE is therefore not an error here. */
  *out = strtod(tmp, NULL);
  if (tmp != small)
    free(tmp);
  return true;
}

int64_t plan_gcd_i64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

bool plan_mul_i64(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__)
  return !__builtin_mul_overflow(a, b, out);
#else
  if (a != 0 && b != 0) {
    if ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN))
      return false;
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : a != 0 && b < INT64_MAX / a))
      return false;
  }
  *out = a * b;
  return true;
#endif
}

bool plan_add_i64(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__)
  return !__builtin_add_overflow(a, b, out);
#else
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
    return false;
  *out = a + b;
  return true;
#endif
}

/* ---- globs --------------------------------------------------------------- */

/* Matches c against the set starting at p (just after '['). Returns the
 * length of the set text up to and including ']', or 0 when the set is not
 * closed (the '[' is then an ordinary character). */
static size_t match_set(const char *p, unsigned char c, bool *hit) {
  size_t i = 0;
  bool neg = false;
  if (p[i] == '!') {
    neg = true;
    i++;
  }
  bool in = false;
  size_t first = i;
  /* A ']' right after '[' or '[!' is a member, not the end. */
  while (p[i] && (p[i] != ']' || i == first)) {
    unsigned char lo = (unsigned char)p[i];
    if (p[i + 1] == '-' && p[i + 2] && p[i + 2] != ']') {
      unsigned char hi = (unsigned char)p[i + 2];
      if (lo <= c && c <= hi)
        in = true;
      i += 3;
    } else {
      if (c == lo)
        in = true;
      i++;
    }
  }
  if (!p[i])
    return 0;
  *hit = in != neg;
  return i + 1;
}

bool plan_glob_match(const char *pattern, const char *name) {
  /* Iterative matching with one backtrack point: on a mismatch, the last
   * '*' absorbs one more character. Earlier stars never need revisiting,
   * so the cost is O(len(pattern) * len(name)) at worst. */
  const char *p = pattern, *n = name;
  const char *star_p = NULL, *star_n = NULL;
  while (*n) {
    if (*p == '*') {
      while (*p == '*')
        p++;
      star_p = p;
      star_n = n;
      continue;
    }
    if (*p) {
      bool ok = false;
      size_t adv = 1;
      if (*p == '?') {
        ok = true;
      } else if (*p == '[') {
        bool hit = false;
        size_t sl = match_set(p + 1, (unsigned char)*n, &hit);
        if (sl) {
          ok = hit;
          adv = 1 + sl;
        } else {
          ok = *n == '[';
        }
      } else {
        ok = *p == *n;
      }
      if (ok) {
        p += adv;
        n++;
        continue;
      }
    }
    if (!star_p)
      return false;
    p = star_p;
    n = ++star_n;
  }
  while (*p == '*')
    p++;
  return *p == '\0';
}

bool plan_is_glob(const char *s) {
  return strpbrk(s, "*?[") != NULL;
}

int plan_name_match(const char *pattern, const char *name) {
  return pattern && name && plan_glob_match(pattern, name);
}

int plan_name_is_pattern(const char *s) {
  return s && plan_is_glob(s);
}

/* ---- short messages -------------------------------------------------------
 */

static void verrf(char *err, size_t errsz, const char *fmt, va_list ap) {
  if (err && errsz)
    vsnprintf(err, errsz, fmt, ap);
}

int plan_errf(char *err, size_t errsz, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verrf(err, errsz, fmt, ap);
  va_end(ap);
  return PLAN_EINVALID;
}

int plan_errc(int code, char *err, size_t errsz, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verrf(err, errsz, fmt, ap);
  va_end(ap);
  return code;
}

double plan_reduce2(int reduce, double a, double b) {
  switch (reduce) {
  case PLAN_RED_MAX:
    return a > b ? a : b;
  case PLAN_RED_MIN:
    return a < b ? a : b;
  default:
    return a + b;
  }
}

char *plan_format_dims(const int64_t *dims, int rank, char *buf) {
  if (rank < 0 || rank > 8)
    return strcpy(buf, "[?]");
  size_t n = 0;
  buf[n++] = '[';
  for (int d = 0; d < rank; d++)
    n += (size_t)snprintf(buf + n, PLAN_DIMS_STRLEN - n, "%s%lld",
                          d ? ", " : "", (long long)dims[d]);
  buf[n++] = ']';
  buf[n] = '\0';
  return buf;
}

void plan_buf_quoted(plan_buf *b, const char *s) {
  plan_buf_putc(b, '"');
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      plan_buf_putc(b, '\\');
      plan_buf_putc(b, (char)c);
    } else if (c < 0x20) {
      plan_buf_printf(b, "\\u%04x", c);
    } else {
      plan_buf_putc(b, (char)c);
    }
  }
  plan_buf_putc(b, '"');
}

int plan_grow(void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap)
    return PLAN_OK;
  if (need > INT32_MAX / 4)
    return plan_failf(PLAN_ELIMIT, "more than %d elements in one array",
                      INT32_MAX / 4);
  int ncap = *cap > 0 ? *cap : 16;
  while (ncap < need)
    ncap += ncap / 2;
  void *n = realloc(*arr, elem * (size_t)ncap);
  if (!n)
    return plan_oom();
  *arr = n;
  *cap = ncap;
  return PLAN_OK;
}
