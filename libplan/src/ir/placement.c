/* Placements: the compact spelling, nesting levels, and the layout of a
 * sharded dim on a mesh (torch.chunk, nested major to minor as DTensor). */
#include "ir/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const reduce_names[PLAN_RED_COUNT] = {"sum", "avg", "max",
                                                         "min"};

static void set_err(char *err, size_t errsz, const char *fmt, ...)
    PLAN_PRINTF(3, 4);
static void set_err(char *err, size_t errsz, const char *fmt, ...) {
  if (!err || errsz == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct cursor {
  const char *s;
  size_t len;
  size_t i;
} cursor;

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(cursor *c) {
  while (c->i < c->len && is_ws(c->s[c->i]))
    c->i++;
}

static bool at_end(const cursor *c) {
  return c->i >= c->len;
}

/* Consumes `word` if the text continues with it. */
static bool eat(cursor *c, const char *word) {
  size_t n = strlen(word);
  if (c->len - c->i < n || memcmp(c->s + c->i, word, n) != 0)
    return false;
  c->i += n;
  return true;
}

/* Reads an optionally negative decimal integer (no '+', no leading zeros)
 * into *v. False when there is none or it does not fit. */
static bool read_int(cursor *c, bool allow_minus, int64_t *v) {
  size_t start = c->i;
  if (allow_minus && c->i < c->len && c->s[c->i] == '-')
    c->i++;
  while (c->i < c->len && c->s[c->i] >= '0' && c->s[c->i] <= '9')
    c->i++;
  return plan_parse_int64(c->s + start, c->i - start, v);
}

/* Shows the text at an entry in an error message: up to its first ')' or
 * a dozen bytes. */
static int entry_len(const cursor *c, size_t start) {
  size_t n = 0;
  while (start + n < c->len && n < 12) {
    n++;
    if (c->s[start + n - 1] == ')')
      break;
  }
  return (int)n;
}

/* Parses the weights "w0:w1:..." after '|' into a new malloc'd array;
 * each a positive decimal integer of at most PLAN_RATIO_WEIGHT_MAX. */
static bool parse_weights(cursor *c, int64_t **out, int *count, char *err,
                          size_t errsz) {
  int64_t *w = NULL;
  int n = 0, cap = 0;
  for (;;) {
    skip_ws(c);
    int64_t v;
    if (!read_int(c, false, &v)) {
      set_err(err, errsz,
              "S(d|w0:w1:...) needs weights written as decimal integers");
      goto fail;
    }
    if (v < 1 || v > PLAN_RATIO_WEIGHT_MAX) {
      set_err(err, errsz, "shard weight %lld is out of range (1..%lld)",
              (long long)v, (long long)PLAN_RATIO_WEIGHT_MAX);
      goto fail;
    }
    if (n == PLAN_RATIO_COUNT_MAX) {
      set_err(err, errsz, "more than %d shard weights", PLAN_RATIO_COUNT_MAX);
      goto fail;
    }
    if (n == cap) {
      int ncap = cap ? cap * 2 : 8;
      int64_t *nw = realloc(w, sizeof *w * (size_t)ncap);
      if (!nw) {
        set_err(err, errsz, "out of memory");
        goto fail;
      }
      w = nw;
      cap = ncap;
    }
    w[n++] = v;
    skip_ws(c);
    if (!eat(c, ":"))
      break;
  }
  *out = w;
  *count = n;
  return true;
fail:
  free(w);
  return false;
}

/* Parses "(d)", "(d:k)", "(d|w...)" or "(d:k|w...)" after S / Shard; the
 * weights go to the sink for mesh axis `axis`. */
static bool parse_dim_spec(cursor *c, plan_axis_pl *e,
                           const plan_ratio_sink *sink, int axis, char *err,
                           size_t errsz) {
  if (!eat(c, "(")) {
    set_err(err, errsz, "S needs a dim: S(d)");
    return false;
  }
  skip_ws(c);
  int64_t d;
  if (!read_int(c, true, &d)) {
    set_err(err, errsz, "S(...) needs a dim written as a decimal integer");
    return false;
  }
  if (d < -PLAN_MAX_RANK || d >= PLAN_MAX_RANK) {
    set_err(err, errsz,
            "dim %lld is out of range (tensors have at most %d dims)",
            (long long)d, PLAN_MAX_RANK);
    return false;
  }
  e->dim = (int8_t)d;
  skip_ws(c);
  if (eat(c, ":")) {
    skip_ws(c);
    int64_t k;
    if (!read_int(c, false, &k)) {
      set_err(err, errsz, "S(d:k) needs a nesting level k after ':'");
      return false;
    }
    if (k >= PLAN_MAX_MESH_AXES) {
      set_err(err, errsz, "nesting level %lld is out of range (0..%d)",
              (long long)k, PLAN_MAX_MESH_AXES - 1);
      return false;
    }
    e->level = (int8_t)k;
    skip_ws(c);
  }
  if (eat(c, "|")) {
    if (!sink || !sink->intern) {
      set_err(err, errsz,
              "shard ratios S(d|w0:w1:...) need a plan's mesh (format 1.1)");
      return false;
    }
    int64_t *w;
    int n;
    if (!parse_weights(c, &w, &n, err, errsz))
      return false;
    skip_ws(c);
    /* interned once the entry is whole: a bad entry leaves no set */
    int k = 0;
    if (!eat(c, ")"))
      set_err(err, errsz, "expected ')' to close S(...)");
    else
      k = sink->intern(sink->ctx, axis, w, n, err, errsz);
    free(w);
    if (k <= 0)
      return false;
    e->ratio = (uint8_t)k;
    return true;
  }
  if (!eat(c, ")")) {
    set_err(err, errsz, "expected ')' to close S(...)");
    return false;
  }
  return true;
}

/* Parses "(op)" after P, or "()" / "(op)" after Partial. */
static bool parse_reduce(cursor *c, bool allow_empty, plan_axis_pl *e,
                         char *err, size_t errsz) {
  if (!eat(c, "(")) {
    set_err(err, errsz, "Partial needs parentheses: Partial() or Partial(op)");
    return false;
  }
  skip_ws(c);
  e->reduce = PLAN_RED_SUM;
  size_t start = c->i;
  while (c->i < c->len && c->s[c->i] >= 'a' && c->s[c->i] <= 'z')
    c->i++;
  size_t n = c->i - start;
  if (n == 0 && !allow_empty) {
    set_err(err, errsz, "P(...) needs a reduce op: sum, avg, max or min");
    return false;
  }
  if (n > 0) {
    int found = -1;
    for (int r = 0; r < PLAN_RED_COUNT; r++)
      if (strlen(reduce_names[r]) == n &&
          memcmp(c->s + start, reduce_names[r], n) == 0)
        found = r;
    if (found < 0) {
      set_err(err, errsz,
              "unknown reduce op '%.*s' (expected sum, avg, max or min)",
              (int)(n > 16 ? 16 : n), c->s + start);
      return false;
    }
    e->reduce = (uint8_t)found;
  }
  skip_ws(c);
  if (!eat(c, ")")) {
    set_err(err, errsz, "expected ')' to close P(...)");
    return false;
  }
  return true;
}

/* One entry at the cursor (which is at a non-space byte). */
static bool parse_entry(cursor *c, plan_axis_pl *e, const plan_ratio_sink *sink,
                        int axis, char *err, size_t errsz) {
  e->kind = PLAN_PL_R;
  e->reduce = PLAN_RED_SUM;
  e->dim = 0;
  e->level = -1;
  e->ratio = 0;
  /* Long spellings first: "Replicate" must not read as R + "eplicate". */
  if (eat(c, "Replicate")) {
    bool open = eat(c, "(");
    skip_ws(c);
    if (!open || !eat(c, ")")) {
      set_err(err, errsz, "expected Replicate()");
      return false;
    }
    return true;
  }
  if (eat(c, "Shard")) {
    e->kind = PLAN_PL_S;
    return parse_dim_spec(c, e, sink, axis, err, errsz);
  }
  if (eat(c, "Partial")) {
    e->kind = PLAN_PL_P;
    return parse_reduce(c, true, e, err, errsz);
  }
  if (eat(c, "R"))
    return true;
  if (eat(c, "S")) {
    e->kind = PLAN_PL_S;
    return parse_dim_spec(c, e, sink, axis, err, errsz);
  }
  if (eat(c, "P")) {
    e->kind = PLAN_PL_P;
    e->reduce = PLAN_RED_SUM;
    if (!at_end(c) && c->s[c->i] == '(')
      return parse_reduce(c, false, e, err, errsz);
    return true;
  }
  set_err(err, errsz,
          "unknown placement entry \"%.*s\" (expected R, S(d), S(d:k), P or "
          "P(sum|avg|max|min))",
          entry_len(c, c->i), c->s + c->i);
  return false;
}

/* After an R or P entry: weights there are a mistake worth naming. */
static bool no_weights_after(const cursor *c, char *err, size_t errsz) {
  size_t i = c->i;
  while (i < c->len && is_ws(c->s[i]))
    i++;
  if (i < c->len && c->s[i] == '|') {
    set_err(err, errsz,
            "shard ratios ('|w0:w1:...') belong inside S(...), "
            "not after an R or P entry");
    return false;
  }
  return true;
}

int plan_placement_parse(plan_placement *out, const char *text, size_t len,
                         int naxes, char *err, size_t errsz, size_t *err_off) {
  return plan_placement_parse_r(out, text, len, naxes, NULL, err, errsz,
                                err_off);
}

int plan_placement_parse_r(plan_placement *out, const char *text, size_t len,
                           int naxes, const plan_ratio_sink *sink, char *err,
                           size_t errsz, size_t *err_off) {
  size_t dummy_off;
  if (!err_off)
    err_off = &dummy_off;
  *err_off = 0;
  if (naxes < 0 || naxes > PLAN_MAX_MESH_AXES) {
    set_err(err, errsz, "a mesh has 0..%d axes, not %d", PLAN_MAX_MESH_AXES,
            naxes);
    return PLAN_EINVALID;
  }
  if (!text && len)
    return PLAN_EUSAGE;
  cursor c = {text ? text : "", len, 0};
  plan_placement p;
  plan_placement_replicated(&p, naxes);
  int count = 0;
  size_t first_extra = 0;
  for (;;) {
    skip_ws(&c);
    if (at_end(&c))
      break;
    size_t start = c.i;
    plan_axis_pl e;
    int axis = (sink ? sink->axis : 0) + count;
    if (!parse_entry(&c, &e, count < naxes ? sink : NULL, axis, err, errsz) ||
        (e.kind != PLAN_PL_S && !no_weights_after(&c, err, errsz))) {
      *err_off = start; /* errors point at the offending entry */
      return PLAN_EINVALID;
    }
    /* Entries past the mesh are still parsed so the count is exact. */
    if (count < naxes)
      p.ax[count] = e;
    else if (count == naxes)
      first_extra = start;
    if (count < 1000) /* bound the count for pathological input */
      count++;
  }
  if (count != naxes) {
    set_err(err, errsz, "placement has %d entr%s but the mesh has %d ax%s",
            count, count == 1 ? "y" : "ies", naxes, naxes == 1 ? "is" : "es");
    *err_off = count > naxes ? first_extra : len;
    return PLAN_EINVALID;
  }
  *out = p;
  return PLAN_OK;
}

/* ---- normalisation ------------------------------------------------------- */

int plan_placement_normalize(plan_placement *p, int rank, char *err,
                             size_t errsz) {
  if (rank < 0 || rank > PLAN_MAX_RANK) {
    set_err(err, errsz, "rank %d is out of range (0..%d)", rank, PLAN_MAX_RANK);
    return PLAN_EINVALID;
  }
  if (p->naxes > PLAN_MAX_MESH_AXES) {
    set_err(err, errsz, "placement has %d axes; at most %d are supported",
            p->naxes, PLAN_MAX_MESH_AXES);
    return PLAN_EINVALID;
  }
  /* Work on a copy so a failure leaves *p as it was. */
  plan_placement q = *p;
  for (int a = 0; a < q.naxes; a++) {
    plan_axis_pl *e = &q.ax[a];
    if (e->kind != PLAN_PL_S) {
      /* Canonical filler so memberwise comparison stays meaningful. */
      e->dim = 0;
      e->level = -1;
      e->ratio = 0;
      if (e->kind != PLAN_PL_P)
        e->reduce = PLAN_RED_SUM;
      continue;
    }
    int d = e->dim;
    if (d < 0)
      d += rank;
    if (d < 0 || d >= rank) {
      set_err(err, errsz, "S(%d) is out of range for a tensor of rank %d",
              e->dim, rank);
      return PLAN_EINVALID;
    }
    e->dim = (int8_t)d;
    e->reduce = PLAN_RED_SUM;
  }
  for (int d = 0; d < rank; d++) {
    int axes[PLAN_MAX_MESH_AXES];
    int n = 0, given = 0;
    for (int a = 0; a < q.naxes; a++) {
      if (q.ax[a].kind == PLAN_PL_S && q.ax[a].dim == d) {
        axes[n++] = a;
        given += q.ax[a].level >= 0;
      }
    }
    if (n == 0)
      continue;
    if (given == 0) {
      for (int i = 0; i < n; i++)
        q.ax[axes[i]].level = (int8_t)i;
      continue;
    }
    if (given != n) {
      set_err(err, errsz,
              "dim %d: give a nesting level (S(%d:k)) on every axis that "
              "shards it, or on none",
              d, d);
      return PLAN_EINVALID;
    }
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
      int k = q.ax[axes[i]].level;
      if (k >= n || (seen & (1u << k))) {
        set_err(err, errsz,
                "dim %d: nesting levels must be 0..%d, each once, over the "
                "%d axes that shard it",
                d, n - 1, n);
        return PLAN_EINVALID;
      }
      seen |= 1u << k;
    }
  }
  *p = q;
  return PLAN_OK;
}

/* ---- queries ------------------------------------------------------------- */

/* The level of axis a, or its mesh-order rank among the axes sharding the
 * same dim when no level is set (an unnormalised placement). */
static int effective_level(const plan_placement *p, int a) {
  if (p->ax[a].level >= 0)
    return p->ax[a].level;
  int k = 0;
  for (int b = 0; b < a; b++)
    if (p->ax[b].kind == PLAN_PL_S && p->ax[b].dim == p->ax[a].dim)
      k++;
  return k;
}

int plan_placement_dim_axes(const plan_placement *p, int dim,
                            int axes[PLAN_MAX_MESH_AXES]) {
  if (!p || !axes)
    return 0;
  int n = 0, lv[PLAN_MAX_MESH_AXES];
  int naxes = p->naxes > PLAN_MAX_MESH_AXES ? PLAN_MAX_MESH_AXES : p->naxes;
  for (int a = 0; a < naxes; a++) {
    if (p->ax[a].kind != PLAN_PL_S || p->ax[a].dim != dim)
      continue;
    /* Insertion by level, ties in mesh order. An axis without a level
     * has effective_level's: the axes before it sharding this dim, which
     * are the n listed so far (this runs millions of times a search). */
    int k = p->ax[a].level >= 0 ? p->ax[a].level : n, j = n++;
    while (j > 0 && lv[j - 1] > k) {
      axes[j] = axes[j - 1];
      lv[j] = lv[j - 1];
      j--;
    }
    axes[j] = a;
    lv[j] = k;
  }
  return n;
}

/* True when the levels of `dim` are not simply the mesh order. */
static bool dim_reordered(const plan_placement *p, int dim) {
  int k = 0;
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++) {
    if (p->ax[a].kind != PLAN_PL_S || p->ax[a].dim != dim)
      continue;
    if (p->ax[a].level >= 0 && p->ax[a].level != k)
      return true;
    k++;
  }
  return false;
}

/* Small writers instead of snprintf: canonical encodings format a
 * placement per operand of every op. Each entry needs at most 12 bytes. */
static char *put_s(char *at, const char *s) {
  while (*s)
    *at++ = *s++;
  return at;
}

static char *put_i(char *at, int v) {
  char tmp[8];
  int n = 0;
  unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
  if (v < 0)
    *at++ = '-';
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u && n < (int)sizeof tmp);
  while (n)
    *at++ = tmp[--n];
  return at;
}

bool plan_placement_entry_head(const plan_placement *p, int a, char *buf) {
  const plan_axis_pl *e = &p->ax[a];
  char *at = buf;
  bool open = false;
  if (e->kind == PLAN_PL_S) {
    at = put_i(put_s(at, "S("), e->dim);
    if (dim_reordered(p, e->dim))
      at = put_i(put_s(at, ":"), effective_level(p, a));
    open = true;
  } else if (e->kind == PLAN_PL_P) {
    at =
        put_s(put_s(put_s(at, "P("),
                    e->reduce < PLAN_RED_COUNT ? reduce_names[e->reduce] : "?"),
              ")");
  } else {
    at = put_s(at, e->kind == PLAN_PL_R ? "R" : "?");
  }
  *at = '\0';
  return open;
}

char *plan_placement_format(const plan_placement *p, char *buf) {
  char *at = buf;
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++) {
    if (!plan_placement_entry_head(p, a, at)) {
      at += strlen(at);
      continue;
    }
    at += strlen(at);
    if (p->ax[a].ratio) /* the set's number: its weights are the plan's */
      at = put_i(put_s(at, "|#"), p->ax[a].ratio);
    at = put_s(at, ")");
  }
  *at = '\0';
  return buf;
}

bool plan_placement_has_ratios(const plan_placement *p) {
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++)
    if (p->ax[a].kind == PLAN_PL_S && p->ax[a].ratio)
      return true;
  return false;
}

bool plan_placement_is_replicated(const plan_placement *p) {
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++)
    if (p->ax[a].kind != PLAN_PL_R)
      return false;
  return true;
}

bool plan_placement_equal(const plan_placement *a, const plan_placement *b) {
  if (!a || !b)
    return a == b;
  if (a->naxes != b->naxes)
    return false;
  for (int i = 0; i < a->naxes && i < PLAN_MAX_MESH_AXES; i++) {
    const plan_axis_pl *x = &a->ax[i], *y = &b->ax[i];
    if (x->kind != y->kind)
      return false;
    /* Only the fields that mean something for the kind are compared. */
    if (x->kind == PLAN_PL_S &&
        (x->dim != y->dim || x->ratio != y->ratio ||
         effective_level(a, i) != effective_level(b, i)))
      return false;
    if (x->kind == PLAN_PL_P && x->reduce != y->reduce)
      return false;
  }
  return true;
}

void plan_placement_replicated(plan_placement *out, int naxes) {
  if (naxes < 0)
    naxes = 0;
  if (naxes > PLAN_MAX_MESH_AXES)
    naxes = PLAN_MAX_MESH_AXES;
  memset(out, 0, sizeof *out);
  out->naxes = (uint8_t)naxes;
  for (int a = 0; a < PLAN_MAX_MESH_AXES; a++) {
    out->ax[a].kind = PLAN_PL_R;
    out->ax[a].level = -1;
  }
}

/* ---- layout -------------------------------------------------------------- */

/* floor(len * wi / w) without overflow for len < 2^62 and w < 2^31:
 * len = q w + r gives q wi + floor(r wi / w). */
static int64_t ratio_point(int64_t len, int64_t wi, int64_t w) {
  return (len / w) * wi + (len % w) * wi / w;
}

/* The set an entry names, or NULL for torch.chunk's equal pieces. */
static const plan_ratios *entry_ratios(const plan_axis_pl *e,
                                       const plan_ratios *sets, int nsets) {
  if (!e->ratio || !sets || e->ratio > nsets)
    return NULL;
  return &sets[e->ratio - 1];
}

void plan_placement_dim_range_r(const plan_placement *p, int dim, int64_t size,
                                const int64_t *mesh_sizes, const int64_t *coord,
                                const plan_ratios *sets, int nsets,
                                int64_t *offset, int64_t *length) {
  int axes[PLAN_MAX_MESH_AXES];
  int n = plan_placement_dim_axes(p, dim, axes);
  int64_t off = 0, len = size > 0 ? size : 0;
  /* Nested torch.chunk: each level splits the piece the previous one left. */
  for (int i = 0; i < n; i++) {
    int64_t k = mesh_sizes[axes[i]] > 0 ? mesh_sizes[axes[i]] : 1;
    int64_t c = coord[axes[i]];
    const plan_ratios *r = entry_ratios(&p->ax[axes[i]], sets, nsets);
    int64_t start, piece;
    if (r && r->n == k && c >= 0 && c < k) {
      int64_t w = 0, wi = 0;
      for (int64_t j = 0; j < k; j++) {
        if (j == c)
          wi = w;
        w += r->w[j];
      }
      start = ratio_point(len, wi, w);
      piece = ratio_point(len, wi + r->w[c], w) - start;
    } else {
      int64_t chunk = len / k + (len % k != 0);
      if (c < 0 || !plan_mul_i64(c, chunk, &start) || start > len)
        start = len; /* past the end: an empty piece */
      piece = len - start < chunk ? len - start : chunk;
    }
    off += start;
    len = piece;
  }
  *offset = off;
  *length = len;
}

void plan_placement_dim_range(const plan_placement *p, int dim, int64_t size,
                              const int64_t *mesh_sizes, const int64_t *coord,
                              int64_t *offset, int64_t *length) {
  plan_placement_dim_range_r(p, dim, size, mesh_sizes, coord, NULL, 0, offset,
                             length);
}

bool plan_placement_dim_even(const plan_placement *p, int dim, int64_t size,
                             const int64_t *mesh_sizes) {
  if (!p || !mesh_sizes)
    return false;
  int axes[PLAN_MAX_MESH_AXES];
  int n = plan_placement_dim_axes(p, dim, axes);
  int64_t len = size;
  for (int i = 0; i < n; i++) {
    int64_t k = mesh_sizes[axes[i]];
    if (p->ax[axes[i]].ratio)
      return false; /* ratio pieces are unequal by intent */
    if (k <= 0 || len % k != 0)
      return false;
    len /= k;
  }
  return true;
}
