/* Shard ratio sets (format 1.1): interning a placement's weight lists into
 * the plan's mesh (reduced by their gcd, one set per axis and weights),
 * finding and comparing sets, and the canonical compact form with the
 * weights written out (S(0|3:2)R). */
#include <stdio.h>
#include <string.h>

#include "ir/placement.h"

static int64_t weights_gcd(const int64_t *w, int n) {
  int64_t g = 0;
  for (int i = 0; i < n; i++)
    g = plan_gcd_i64(g, w[i]);
  return g > 0 ? g : 1;
}

/* True when set r holds w[0..n) once both are divided by their gcd (r's
 * weights are stored reduced). */
static bool holds(const plan_ratios *r, int axis, const int64_t *w, int n,
                  int64_t g) {
  if (r->axis != axis || r->n != n)
    return false;
  for (int i = 0; i < n; i++)
    if (r->w[i] != w[i] / g)
      return false;
  return true;
}

int plan_ratios_find(const plan_mesh *m, int axis, const int64_t *w, int n) {
  if (!m || !w || n <= 0)
    return 0;
  int64_t g = weights_gcd(w, n);
  for (int k = 0; k < m->nratios; k++)
    if (holds(&m->ratios[k], axis, w, n, g))
      return k + 1;
  return 0;
}

bool plan_ratios_same(const plan_ratios *a, const plan_ratios *b) {
  if (!a || !b)
    return a == b;
  return plan_ratios_find(
             &(plan_mesh){.ratios = (plan_ratios *)a, .nratios = 1}, b->axis,
             b->w, b->n) == 1;
}

/* The sets live in the arena: the array is reallocated (copied) when its
 * count reaches a power of two, so no capacity needs keeping. */
static bool grow_sets(plan_mesh *m, plan_arena *a) {
  int n = m->nratios;
  if (n > 0 && (n & (n - 1)) != 0)
    return true; /* room left */
  int cap = n ? 2 * n : 1;
  plan_ratios *nr = plan_arena_alloc(a, sizeof *nr * (size_t)cap);
  if (!nr)
    return false;
  if (n)
    memcpy(nr, m->ratios, sizeof *nr * (size_t)n);
  m->ratios = nr;
  return true;
}

int plan_ratios_intern(plan_mesh *m, plan_arena *a, int axis, const int64_t *w,
                       int n, char *err, size_t errsz) {
  if (axis < 0 || axis >= m->naxes) {
    snprintf(err, errsz, "shard ratios on a mesh axis that does not exist");
    return 0;
  }
  if (n != m->axis_sizes[axis]) {
    snprintf(err, errsz,
             "%d shard weight%s for mesh axis %s of size %lld: give one per "
             "index of the axis",
             n, n == 1 ? "" : "s", m->axis_names[axis],
             (long long)m->axis_sizes[axis]);
    return 0;
  }
  /* The layout computes floor(len * W_i / W) exactly for W < 2^31. */
  int64_t sum = 0;
  for (int i = 0; i < n; i++) {
    sum += w[i];
    if (w[i] < 1 || sum > INT32_MAX) {
      snprintf(err, errsz,
               w[i] < 1 ? "shard weights are positive integers"
                        : "the shard weights of axis %s sum to more than "
                          "2^31 - 1",
               m->axis_names[axis]);
      return 0;
    }
  }
  int k = plan_ratios_find(m, axis, w, n);
  if (k)
    return k;
  if (m->nratios >= PLAN_MAX_RATIO_SETS) {
    snprintf(err, errsz, "more than %d distinct sets of shard ratios",
             PLAN_MAX_RATIO_SETS);
    return 0;
  }
  int64_t g = weights_gcd(w, n);
  int64_t *copy = plan_arena_alloc(a, sizeof *copy * (size_t)n);
  if (!copy || !grow_sets(m, a)) {
    plan_oom();
    snprintf(err, errsz, "out of memory");
    return 0;
  }
  for (int i = 0; i < n; i++)
    copy[i] = w[i] / g;
  m->ratios[m->nratios] = (plan_ratios){axis, n, copy};
  return ++m->nratios;
}

/* ---- the compact form with weights --------------------------------------- */

void plan_placement_put(plan_buf *b, const plan_placement *p,
                        const plan_ratios *sets, int nsets) {
  char head[PLAN_PLACEMENT_STRLEN];
  for (int a = 0; a < p->naxes && a < PLAN_MAX_MESH_AXES; a++) {
    bool open = plan_placement_entry_head(p, a, head);
    plan_buf_puts(b, head);
    if (!open)
      continue;
    int k = p->ax[a].ratio;
    if (k && sets && k <= nsets) {
      const plan_ratios *r = &sets[k - 1];
      for (int i = 0; i < r->n; i++)
        plan_buf_printf(b, i ? ":%lld" : "|%lld", (long long)r->w[i]);
    } else if (k) {
      plan_buf_printf(b, "|#%d", k); /* no such set: left as the number */
    }
    plan_buf_putc(b, ')');
  }
}

size_t plan_placement_format_r(const plan_placement *p, const plan_ratios *sets,
                               int nsets, char *buf, size_t size) {
  plan_buf b;
  plan_buf_init(&b);
  plan_placement_put(&b, p, sets, nsets);
  const char *s = b.failed ? "" : plan_buf_cstr(&b);
  size_t n = strlen(s);
  if (size) {
    size_t c = n < size - 1 ? n : size - 1;
    memcpy(buf, s, c);
    buf[c] = '\0';
  }
  plan_buf_free(&b);
  return n;
}
