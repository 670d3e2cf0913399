/* Inference of the normalisations, embedding and cross-entropy, forward and
 * gradient (a gradient op checks its operands as its forward does). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ops_infer_checks.h"

/* ---- normalisation ------------------------------------------------------- */

static int infer_norm(int kind, const plan_attr_spec *spec, PLAN_INFER_ARGS) {
  const char *op = plan_op_kind_name(kind);
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, (1u << nin) - 1, &dt, err,
                                    errsz)))
    return rc;
  const plan_shape *x = &in[0];
  if (x->rank < 1)
    return plan_errf(err, errsz, "%s: x must have rank >= 1 ([.., d])", op);
  int64_t d = x->dims[x->rank - 1];
  for (int i = 1; i < nin; i++)
    if (in[i].rank != 1 || in[i].dims[0] != d) {
      char s[SHAPE_STRLEN];
      return plan_errf(err, errsz, "%s: %s must be [%lld], not %s", op,
                       i == 1 ? "weight" : "bias", (long long)d,
                       fmt_dims(in[i].dims, in[i].rank, s));
    }
  double eps = attr_float(attrs, spec, 0);
  if (!isfinite(eps) || eps < 0)
    return plan_errf(err, errsz, "%s: eps must be a finite number >= 0", op);
  copy_shape(out, x);
  return PLAN_OK;
}

int plan_infer_layernorm(PLAN_INFER_ARGS) {
  return infer_norm(PLAN_OP_LAYERNORM, SPEC(PLAN_OP_LAYERNORM), in, nin, attrs,
                    out, nout, err, errsz);
}
int plan_infer_rmsnorm(PLAN_INFER_ARGS) {
  return infer_norm(PLAN_OP_RMSNORM, SPEC(PLAN_OP_RMSNORM), in, nin, attrs, out,
                    nout, err, errsz);
}

/* ---- embedding ----------------------------------------------------------- */

int plan_infer_embedding(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc =
      plan_infer_prelude(PLAN_OP_EMBEDDING, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_EMBEDDING, in, nin, 1u, &dt, err,
                                    errsz)) ||
      (rc = plan_infer_int_input(PLAN_OP_EMBEDDING, in, 1, "ids", err, errsz)))
    return rc;
  const plan_shape *t = &in[0], *ids = &in[1];
  if (t->rank != 2)
    return plan_errf(err, errsz, "embedding: table must be [v, d], not rank %d",
                     t->rank);
  if (ids->rank + 1 > PLAN_MAX_RANK)
    return plan_errf(err, errsz,
                     "embedding: ids of rank %d give a result of rank "
                     "%d (at most %d)",
                     ids->rank, ids->rank + 1, PLAN_MAX_RANK);
  copy_shape(out, ids);
  out->dims[ids->rank] = t->dims[1];
  out->rank = ids->rank + 1;
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_EMBEDDING, out, nout, err, errsz);
}

/* ---- loss ---------------------------------------------------------------- */

int plan_infer_cross_entropy(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(PLAN_OP_CROSS_ENTROPY, in, nin, out, nout, 1, err,
                              errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_CROSS_ENTROPY, in, nin, 1u, &dt,
                                    err, errsz)) ||
      (rc = plan_infer_int_input(PLAN_OP_CROSS_ENTROPY, in, 1, "labels", err,
                                 errsz)))
    return rc;
  const plan_shape *lg = &in[0], *lb = &in[1];
  if (lg->rank < 1)
    return plan_errf(err, errsz,
                     "cross_entropy: logits must have rank >= 1 "
                     "([.., c])");
  bool same = lb->rank == lg->rank - 1;
  for (int d = 0; same && d < lb->rank; d++)
    same = lb->dims[d] == lg->dims[d];
  if (!same) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "cross_entropy: labels must be %s (logits "
                     "without the class dim), not %s",
                     fmt_dims(lg->dims, lg->rank - 1, sa),
                     fmt_dims(lb->dims, lb->rank, sb));
  }
  out->rank = 0;
  out->dtype = dt;
  return PLAN_OK;
}

/* ---- gradients ----------------------------------------------------------- */

/* layernorm_grad, rmsnorm_grad: (dy, x, w) -> dx; the norm's own checks on
 * (x, w) and dy shaped like x. */
static int infer_norm_grad(int kind, int fwd, PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(kind, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(kind, in, nin, 7u, &dt, err, errsz)) ||
      (rc = plan_infer_same_dims(kind, in, 0, 1, err, errsz)))
    return rc;
  /* (x, w) as the forward norm sees them */
  if ((rc = infer_norm(fwd, SPEC(kind), in + 1, 2, attrs, out, nout, err,
                       errsz))) {
    /* the forward names itself and counts x as input 0: say it again */
    char why[200];
    snprintf(why, sizeof why, "%s", err ? err : "");
    const char *tail = strchr(why, ':');
    return plan_errf(err, errsz, "%s%s", plan_op_kind_name(kind),
                     tail ? tail : ": bad x or weight");
  }
  return PLAN_OK;
}

int plan_infer_layernorm_grad(PLAN_INFER_ARGS) {
  return infer_norm_grad(PLAN_OP_LAYERNORM_GRAD, PLAN_OP_LAYERNORM, in, nin,
                         attrs, out, nout, err, errsz);
}
int plan_infer_rmsnorm_grad(PLAN_INFER_ARGS) {
  return infer_norm_grad(PLAN_OP_RMSNORM_GRAD, PLAN_OP_RMSNORM, in, nin, attrs,
                         out, nout, err, errsz);
}

/* embedding_grad: (dy [b.., d], ids [b..]) -> [rows, d], the rows of dy
 * summed into the rows their ids name. */
int plan_infer_embedding_grad(PLAN_INFER_ARGS) {
  int rc = plan_infer_prelude(PLAN_OP_EMBEDDING_GRAD, in, nin, out, nout, 1,
                              err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_EMBEDDING_GRAD, in, nin, 1u, &dt,
                                    err, errsz)) ||
      (rc = plan_infer_int_input(PLAN_OP_EMBEDDING_GRAD, in, 1, "ids", err,
                                 errsz)))
    return rc;
  const plan_shape *dy = &in[0], *ids = &in[1];
  bool same = dy->rank == ids->rank + 1;
  for (int d = 0; same && d < ids->rank; d++)
    same = dy->dims[d] == ids->dims[d];
  if (!same) {
    char sa[SHAPE_STRLEN], sb[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "embedding_grad: dy must be the ids' shape %s plus the "
                     "embedding dim, not %s",
                     fmt_dims(ids->dims, ids->rank, sb),
                     fmt_dims(dy->dims, dy->rank, sa));
  }
  int64_t rows = attr_int(attrs, SPEC(PLAN_OP_EMBEDDING_GRAD), 0);
  if (rows < 0)
    return plan_errf(err, errsz, "embedding_grad: rows must be >= 0, not %lld",
                     (long long)rows);
  out->rank = 2;
  out->dims[0] = rows;
  out->dims[1] = dy->dims[dy->rank - 1];
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_EMBEDDING_GRAD, out, nout, err, errsz);
}

/* cross_entropy_grad: (dy [], logits [b.., c], labels [b..]) -> [b.., c]:
 * dy (softmax(logits) - onehot(labels)) / count(b..). */
int plan_infer_cross_entropy_grad(PLAN_INFER_ARGS) {
  (void)attrs;
  int rc = plan_infer_prelude(PLAN_OP_CROSS_ENTROPY_GRAD, in, nin, out, nout, 1,
                              err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_CROSS_ENTROPY_GRAD, in, nin, 3u,
                                    &dt, err, errsz)) ||
      (rc = plan_infer_int_input(PLAN_OP_CROSS_ENTROPY_GRAD, in, 2, "labels",
                                 err, errsz)))
    return rc;
  if (in[0].rank != 0) {
    char s[SHAPE_STRLEN];
    return plan_errf(err, errsz,
                     "cross_entropy_grad: dy (input 0) must be a scalar [], "
                     "not %s",
                     fmt_dims(in[0].dims, in[0].rank, s));
  }
  /* (logits, labels) as cross_entropy sees them */
  plan_shape loss;
  if ((rc = plan_infer_cross_entropy(in + 1, 2, NULL, &loss, 1, err, errsz))) {
    char why[200];
    snprintf(why, sizeof why, "%s", err ? err : "");
    const char *tail = strchr(why, ':');
    return plan_errf(err, errsz, "cross_entropy_grad%s",
                     tail ? tail : ": bad logits or labels");
  }
  copy_shape(out, &in[1]);
  return PLAN_OK;
}

/* ---- attention ----------------------------------------------------------- */

/* attention: q [b, h, s, d], k [b, hk, sk, d], v [b, hk, sk, dv] [, mask]
 * -> [b, h, s, dv]. Query head i reads key/value head i / (h / hk), as
 * repeat_interleave of k and v would give (grouped-query attention). The
 * mask broadcasts to [b, h, s, sk] (each of its dims, right-aligned, is 1
 * or the full size): a float mask of q's dtype is added to the scores, an
 * integer one keeps the keys where it is nonzero. */
int plan_infer_attention(PLAN_INFER_ARGS) {
  int rc =
      plan_infer_prelude(PLAN_OP_ATTENTION, in, nin, out, nout, 1, err, errsz);
  if (rc)
    return rc;
  plan_dtype dt;
  if ((rc = plan_infer_float_inputs(PLAN_OP_ATTENTION, in, nin, 7u, &dt, err,
                                    errsz)))
    return rc;
  static const char *const names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++)
    if (in[i].rank != 4)
      return plan_errf(err, errsz,
                       "attention: %s (input %d) must be [b, heads, seq, "
                       "dim], not rank %d",
                       names[i], i, in[i].rank);
  const plan_shape *q = &in[0], *k = &in[1], *v = &in[2];
  char a[SHAPE_STRLEN], b[SHAPE_STRLEN], c[SHAPE_STRLEN];
  if (k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0] ||
      v->dims[1] != k->dims[1] || v->dims[2] != k->dims[2] ||
      k->dims[3] != q->dims[3])
    return plan_errf(err, errsz,
                     "attention: q %s, k %s and v %s do not fit [b, h, s, d], "
                     "[b, hk, sk, d], [b, hk, sk, dv]",
                     fmt_dims(q->dims, 4, a), fmt_dims(k->dims, 4, b),
                     fmt_dims(v->dims, 4, c));
  if (k->dims[1] == 0 ? q->dims[1] != 0 : q->dims[1] % k->dims[1] != 0)
    return plan_errf(err, errsz,
                     "attention: q's %lld heads are not a multiple of k's %lld",
                     (long long)q->dims[1], (long long)k->dims[1]);
  if (nin == 4) {
    const plan_shape *m = &in[3];
    int64_t full[4] = {q->dims[0], q->dims[1], q->dims[2], k->dims[2]};
    bool ok = m->rank <= 4;
    for (int d = 0; ok && d < m->rank; d++) {
      int64_t want = full[4 - m->rank + d];
      ok = m->dims[d] == want || m->dims[d] == 1;
    }
    if (!ok)
      return plan_errf(err, errsz,
                       "attention: the mask %s does not broadcast to %s",
                       fmt_dims(m->dims, m->rank, a), fmt_dims(full, 4, b));
    if (plan_dtype_is_float(m->dtype) && m->dtype != dt)
      return plan_errf(err, errsz,
                       "attention: a float mask must have q's dtype %s, not %s",
                       plan_dtype_name(dt), plan_dtype_name(m->dtype));
  }
  double scale = attr_float(attrs, SPEC(PLAN_OP_ATTENTION), 1);
  if (!isfinite(scale))
    return plan_errf(err, errsz, "attention: scale must be a finite number");
  copy_shape(out, q);
  out->dims[3] = v->dims[3];
  out->dtype = dt;
  return plan_infer_finish(PLAN_OP_ATTENTION, out, nout, err, errsz);
}
