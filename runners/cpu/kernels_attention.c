/* The CPU kernel of fused attention: out[b, i, s] = softmax_j(scale q[b, i,
 * s] . k[b, i / g, j] + mask) v[b, i / g, j], g = h / hk query heads per
 * key/value head (runners/runner_op.h states the local semantics).
 *
 * Every rank holds whole keys (the rule keeps sk and d whole), and a
 * block's queries, heads and batch rows are found by their global
 * positions (the views' offsets): the kv head of a query head, the mask
 * element of a (query, key) pair and the causal cut (key j seen by query i
 * when j <= i, top-left aligned as torch's is_causal) do not depend on how
 * the tensors are sharded. A hidden key's score is -1e9 (an integer
 * mask's zero replaces the score; the causal cut adds -1e9), as the
 * unfused form with a -1e9 fill gives: its weight underflows to 0, and a
 * query that sees no key weighs all keys alike (where torch gives NaN).
 *
 * Arithmetic is in double whatever the dtype, in a fixed order per output
 * row, so every block computes its rows as the whole tensor does; each
 * result is stored once (rounded to the dyadic grid in exact mode; the
 * dispatcher rounds BF16 / F16). Kernels allocate nothing: the weighted
 * sum of v runs over dv in chunks on the stack, the scores recomputed per
 * chunk. */
#include <math.h>

#include "kernels_attention.h"
#include "kernels_int.h"
#include "base/numeric.h"
#include "libplan/ops.h"

#define CHUNK 64

static int64_t global_dim(const plan_view *v, int d) {
  return v->global_dims[d] > 0 ? v->global_dims[d] : v->dims[d];
}

/* The mask, broadcast to [b, h, s, sk] by global position. */
typedef struct amask {
  const plan_view *m; /* NULL: none */
  int64_t stride[4];  /* per [b, h, s, sk] dim; 0 where it broadcasts */
  int64_t off[4];     /* the block's offset per dim */
  bool is_float;
} amask;

static void mask_init(amask *am, const plan_view *m) {
  am->m = m;
  if (!m)
    return;
  am->is_float = plan_dtype_is_float(m->dtype);
  int64_t s = 1;
  for (int d = 3; d >= 0; d--) {
    int md = d - (4 - m->rank);
    am->stride[d] = 0;
    am->off[d] = 0;
    if (md < 0)
      continue;
    if (global_dim(m, md) != 1) {
      am->stride[d] = s;
      am->off[d] = m->offset[md];
    }
    s *= m->dims[md];
  }
}

#define HIDDEN (-1e9)

/* The score t of global (b, h, s, j) with the mask applied: a float mask
 * added, an integer mask's zero replacing it by HIDDEN. */
static double mask_apply(const amask *am, const int64_t *g, double t) {
  if (!am->m)
    return t;
  int64_t i = 0;
  for (int d = 0; d < 4; d++)
    i += am->stride[d] ? (g[d] - am->off[d]) * am->stride[d] : 0;
  if (am->is_float)
    return t + plan_kview_get(am->m, i);
  return ((const int64_t *)am->m->data)[i] ? t : HIDDEN;
}

typedef struct arow {
  const plan_view *q, *k, *v;
  const amask *mask;
  bool causal;
  double scale;
  int64_t g[4];               /* global (b, h, s, -) of the row */
  int64_t qrow, kbase, vbase; /* element offsets of the q row, k and v head */
} arow;

/* The score of key j (local index): scale q . k, then the mask, then the
 * causal cut, in the unfused form's order. */
static double score(const arow *r, int64_t j) {
  int64_t d = r->q->dims[3];
  int64_t gj = r->k->offset[2] + j;
  double t = 0;
  for (int64_t e = 0; e < d; e++)
    t += plan_kview_get(r->q, r->qrow + e) *
         plan_kview_get(r->k, r->kbase + j * d + e);
  int64_t g[4] = {r->g[0], r->g[1], r->g[2], gj};
  t = mask_apply(r->mask, g, r->scale * t);
  return r->causal && gj > r->g[2] ? t + HIDDEN : t;
}

static void one_row(const arow *r, plan_view *out, int64_t orow, int bits) {
  int64_t sk = r->k->dims[2], dv = r->v->dims[3];
  double m = -INFINITY;
  for (int64_t j = 0; j < sk; j++) {
    double t = score(r, j);
    m = t > m ? t : m;
  }
  for (int64_t c0 = 0; c0 < dv; c0 += CHUNK) {
    int64_t n = dv - c0 < CHUNK ? dv - c0 : CHUNK;
    double acc[CHUNK] = {0}, sum = 0;
    for (int64_t j = 0; j < sk; j++) {
      double p = exp(score(r, j) - m);
      sum += p;
      for (int64_t e = 0; e < n; e++)
        acc[e] += p * plan_kview_get(r->v, r->vbase + j * dv + c0 + e);
    }
    for (int64_t e = 0; e < n; e++) {
      double y = sum > 0 ? acc[e] / sum : 0;
      plan_kview_set(out, orow + c0 + e,
                     bits >= 0 ? plan_dyadic_round(y, bits) : y);
    }
  }
}

int plan_kernel_attention(const plan_attr_val *attrs, const plan_view *in,
                          int nin, plan_view *out, int bits) {
  const plan_view *q = &in[0], *k = &in[1], *v = &in[2];
  const plan_attr_spec *spec = plan_op_attrs(PLAN_OP_ATTENTION, NULL);
  arow r = {.q = q, .k = k, .v = v};
  amask am;
  mask_init(&am, nin > 3 ? &in[3] : NULL);
  r.mask = &am;
  r.causal = attrs ? attrs[0].b : spec[0].def_b;
  r.scale = attrs ? attrs[1].f : spec[1].def_f;
  int64_t d = q->dims[3], sk = k->dims[2], dv = v->dims[3];
  if (r.scale == 0)
    r.scale = d > 0 ? 1 / sqrt((double)d) : 1;
  int64_t hk = global_dim(k, 1);
  int64_t grp = hk > 0 ? global_dim(q, 1) / hk : 1;
  for (int64_t b = 0; b < q->dims[0]; b++)
    for (int64_t h = 0; h < q->dims[1]; h++)
      for (int64_t s = 0; s < q->dims[2]; s++) {
        r.g[0] = q->offset[0] + b;
        r.g[1] = q->offset[1] + h;
        r.g[2] = q->offset[2] + s;
        int64_t kb = r.g[0] - k->offset[0];
        int64_t kh = r.g[1] / grp - k->offset[1];
        r.qrow = ((b * q->dims[1] + h) * q->dims[2] + s) * d;
        r.kbase = (kb * k->dims[1] + kh) * sk * d;
        r.vbase = (kb * v->dims[1] + kh) * sk * dv;
        one_row(&r, out, ((b * q->dims[1] + h) * q->dims[2] + s) * dv, bits);
      }
  return PLAN_OK;
}
