/* What the canonical encoders of hash/ share (spec/canonical-form.md): the
 * compact JSON writer, names in byte order, and each part's encoder.
 *
 * The writer's primitives are static inline: they run once per key, name
 * and number of a 100k-op plan, and each encoder file keeps them inlined as
 * when all of hash/ was one file. */
#ifndef LIBPLAN_CANON_JSON_H
#define LIBPLAN_CANON_JSON_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/plan.h"
#include "ir/ops.h"
#include "read/plan_read.h"

/* The JSON writer: text goes to b; with hs set, b is emptied into the hash
 * every 64 KiB (cj_flush, called between ops and tensors). */
/* Placements remembered by the writer: a layer's ops use a few dozen. */
#define CJ_PL_SEEN 64

typedef struct cj {
  plan_buf *b;
  XXH3_state_t *hs; /* when set, the buffer is flushed into it */
  /* the last floats printed: repeated layers repeat their attributes, and
   * the shortest round-trip spelling takes several printf/strtod rounds */
  double fval[4];
  char ftext[4][40];
  int fnext, fcount;
  const plan_mesh *mesh; /* whose shard ratio sets placements name */
  /* placements formatted lately, by address: a plan's strategies share
   * interned placement arrays, so one address comes back for many ops */
  struct {
    const plan_placement *pl;
    size_t len;
    char text[PLAN_PLACEMENT_STRLEN];
  } pl_seen[CJ_PL_SEEN];
} cj;

static inline void cj_flush(cj *c) {
  if (c->hs && c->b->len >= 65536) {
    XXH3_128bits_update(c->hs, c->b->data, c->b->len);
    c->b->len = 0;
  }
}

/* Whether any of the 8 bytes of w is below 0x20, a '"' or a '\\' (the
 * bytes a JSON string escapes), by the carry-free test for a zero byte. */
static inline bool cj_word_special(uint64_t w) {
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
  uint64_t ctl = (w & ~highs) + (ones * (0x80 - 0x20)); /* high bit: >= 0x20 */
  ctl = ~(ctl | w) & highs; /* set where the byte is below 0x20 */
  uint64_t zq = (((q & ~highs) + ~highs) | q) & highs;
  uint64_t zb = (((bs & ~highs) + ~highs) | bs) & highs;
  return ctl || (zq & zb) != highs;
}

static inline void cj_str(cj *c, const char *s) {
  plan_buf *b = c->b;
  /* Names and keys rarely need an escape: check 8 bytes at a time and
   * copy the whole string at once when none does. */
  size_t len = strlen(s), i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    if (cj_word_special(w))
      break;
  }
  if (i + 8 > len) {
    for (; i < len; i++) {
      unsigned char ch = (unsigned char)s[i];
      if (ch < 0x20 || ch == '"' || ch == '\\')
        break;
    }
    if (i == len) {
      plan_buf_putc(b, '"');
      plan_buf_append(b, s, len);
      plan_buf_putc(b, '"');
      return;
    }
  }
  plan_buf_putc(b, '"');
  const char *run = s;
  for (;; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch > '\\' || (ch >= 0x20 && ch != '"' && ch != '\\'))
      continue; /* the common case: one compare for letters */
    if (!ch)
      break;
    plan_buf_append(b, run, (size_t)(s - run));
    if (ch == '"' || ch == '\\') {
      plan_buf_putc(b, '\\');
      plan_buf_putc(b, (char)ch);
    } else if (ch == '\n') {
      plan_buf_puts(b, "\\n");
    } else if (ch == '\t') {
      plan_buf_puts(b, "\\t");
    } else if (ch == '\r') {
      plan_buf_puts(b, "\\r");
    } else {
      plan_buf_printf(b, "\\u%04x", ch);
    }
    run = s + 1;
  }
  plan_buf_append(b, run, (size_t)(s - run));
  plan_buf_putc(b, '"');
}

/* Object keys: `first` tracks whether a comma is needed. */
static inline void cj_key(cj *c, bool *first, const char *key) {
  if (!*first)
    plan_buf_putc(c->b, ',');
  *first = false;
  cj_str(c, key);
  plan_buf_putc(c->b, ':');
}

static inline void cj_sep(cj *c, bool *first) {
  if (!*first)
    plan_buf_putc(c->b, ',');
  *first = false;
}

/* Decimal without printf: encodings print hundreds of thousands of ints. */
static inline void cj_int(cj *c, int64_t v) {
  char buf[24], *e = buf + sizeof buf, *s = e;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--s = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *--s = '-';
  plan_buf_append(c->b, s, (size_t)(e - s));
}

static inline void cj_num(cj *c, double v) {
  if (v == 0) { /* -0.0 and 0.0 are the same number here */
    plan_buf_putc(c->b, '0');
    return;
  }
  for (int i = 0; i < c->fcount; i++)
    if (c->fval[i] == v && (v != 0 || signbit(c->fval[i]) == signbit(v))) {
      plan_buf_puts(c->b, c->ftext[i]);
      return;
    }
  int k = c->fnext;
  c->fnext = (c->fnext + 1) % 4;
  if (c->fcount < 4)
    c->fcount++;
  c->fval[k] = v;
  plan_buf_puts(c->b, plan_format_double(v, c->ftext[k]));
}

static inline void cj_pl(cj *c, const plan_placement *p) {
  char buf[PLAN_PLACEMENT_STRLEN];
  if (c->mesh && plan_placement_has_ratios(p)) {
    /* the weights written out; the text needs no escapes */
    plan_buf_putc(c->b, '"');
    plan_placement_put(c->b, p, c->mesh->ratios, c->mesh->nratios);
    plan_buf_putc(c->b, '"');
    return;
  }
  size_t slot = ((uintptr_t)p / sizeof *p) % CJ_PL_SEEN;
  if (c->pl_seen[slot].pl != p) {
    plan_placement_format(p, buf);
    memcpy(c->pl_seen[slot].text, buf, sizeof buf);
    c->pl_seen[slot].len = strlen(buf);
    c->pl_seen[slot].pl = p;
  }
  /* the placement text ("S(0)R", "P(sum)") needs no escapes */
  plan_buf_putc(c->b, '"');
  plan_buf_append(c->b, c->pl_seen[slot].text, c->pl_seen[slot].len);
  plan_buf_putc(c->b, '"');
}

/* ---- sorting names (canon_json.c) ---------------------------------------- */

typedef struct named {
  const char *name;
  int idx;
  uint64_t key; /* sorting scratch, see mkqsort */
} named;

static inline int named_cmp(const void *a, const void *b) {
  return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* Ops and tensors sorted by name: computed once per encoding and shared by
 * the program and plan parts (sorting 100k names is most of a hash). */
typedef struct cj_order {
  named *ops, *tens;
} cj_order;

/* Lines the encoders read a few ops ahead along the name order (see
 * PLAN_PREFETCH): each op's struct and name, then its operand arrays, then
 * their tensors, then those tensors' names, each stage using what an
 * earlier one brought in. `k` is the op being encoded now. */
#define CJ_AHEAD 16
static inline void cj_prefetch_ops(const plan_program *p, const named *ops,
                                   int k) {
  int n = p->nops;
  if (k + CJ_AHEAD < n) {
    PLAN_PREFETCH(&p->ops[ops[k + CJ_AHEAD].idx]);
    PLAN_PREFETCH(ops[k + CJ_AHEAD].name);
  }
  if (k + CJ_AHEAD / 2 < n) {
    const plan_op *o = &p->ops[ops[k + CJ_AHEAD / 2].idx];
    PLAN_PREFETCH(o->in);
    PLAN_PREFETCH(o->out);
  }
  if (k + CJ_AHEAD / 4 < n) {
    const plan_op *o = &p->ops[ops[k + CJ_AHEAD / 4].idx];
    for (int j = 0; j < o->nin; j++)
      PLAN_PREFETCH(&p->tensors[o->in[j]]);
    for (int j = 0; j < o->nout; j++)
      PLAN_PREFETCH(&p->tensors[o->out[j]]);
  }
  if (k + CJ_AHEAD / 8 < n) {
    const plan_op *o = &p->ops[ops[k + CJ_AHEAD / 8].idx];
    for (int j = 0; j < o->nin; j++)
      PLAN_PREFETCH(p->tensors[o->in[j]].name);
    for (int j = 0; j < o->nout; j++)
      PLAN_PREFETCH(p->tensors[o->out[j]].name);
  }
}

/* The same for a walk over the tensors in name order: the whole struct. */
static inline void cj_prefetch_tensors(const plan_program *p, const named *tens,
                                       int k) {
  if (k + CJ_AHEAD < p->ntensors) {
    const char *t = (const char *)&p->tensors[tens[k + CJ_AHEAD].idx];
    PLAN_PREFETCH(t);
    PLAN_PREFETCH(t + sizeof(plan_tensor) - 1);
  }
}

/* The sorted order; with `prepared`, from the program's prepared
 * permutation when it has one. Returns PLAN_OK or the OOM status. */
int plan_cj_order_make(cj_order *o, const plan_program *p, bool prepared);
void plan_cj_order_free(cj_order *o);

/* ---- the encoders -------------------------------------------------------- */

/* A generic value, map keys in byte order and x- keys left out
 * (provenance; canon_json.c). */
int plan_cj_value(cj *c, const plan_value *v);

/* The program part (canon_program.c), and the pieces of it that op and
 * tensor signatures hash. `full` adds shape and dtype for produced tensors
 * (signatures); the program encoding leaves them to inference. */
int plan_cj_program(cj *c, const plan_program *p, const cj_order *ord);
void plan_cj_attrs(cj *c, const plan_op *op);
void plan_cj_tensor(cj *c, const plan_tensor *t, bool full);

/* The mesh part (canon_mesh.c). */
int plan_cj_mesh(cj *c, const plan_mesh *m);
/* Per-device hardware ({"devices": [...], "profiles": [...]}) and the
 * topology, as the mesh part holds them (canon_mesh.c). */
int plan_cj_profiles(cj *c, const plan_mesh *m);
void plan_cj_topology(cj *c, const plan_mesh *m);

/* The plan part (canon_plan.c), over the program hash `ph` it records. */
int plan_cj_plan(cj *c, const plan_plan *p, const cj_order *ord, plan_hash ph);

#endif
