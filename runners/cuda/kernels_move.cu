/* The CUDA runner's data-movement ops (kernels.cuh): transpose, permute,
 * reshape, split, concat, expand, where, repeat_interleave and embedding,
 * in any dtype, as copies of the elements' bits through an unsigned type
 * of the element's device size. */
#include "kernels.cuh"

template <class E> static int run_move(plan_cu *cu, const plan_cu_call *c) {
  int kind = c->kind;
  const plan_view *in = c->in;
  plan_view *out = c->out;
  int64_t total = plan_cu_count(out);
  switch (kind) {
  case PLAN_OP_TRANSPOSE:
  case PLAN_OP_PERMUTE:
  case PLAN_OP_EXPAND:
  case PLAN_OP_RESHAPE: {
    plan_k_gather<E> k;
    k.in = (const E *)c->din[0];
    k.o = (E *)c->dout[0];
    memset(&k.bc, 0, sizeof k.bc);
    if (kind == PLAN_OP_RESHAPE) {
      k.bc.rank = 1;
      k.bc.dims[0] = total;
      k.bc.st[0][0] = 1;
    } else if (kind == PLAN_OP_EXPAND) {
      k.bc = plan_cu_bcast(out, in, 1);
    } else {
      int r = in->rank, perm[PLAN_MAX_RANK];
      const int64_t *v;
      int n;
      for (int j = 0; j < r; j++)
        perm[j] = j;
      if (kind == PLAN_OP_TRANSPOSE) {
        int d0 = r - 2, d1 = r - 1;
        if (plan_cu_attr_ints(c->attrs, 0, &v, &n)) {
          d0 = plan_cu_norm_dim(v[0], r);
          d1 = plan_cu_norm_dim(v[1], r);
        }
        perm[d0] = d1;
        perm[d1] = d0;
      } else {
        plan_cu_attr_ints(c->attrs, 0, &v, &n);
        for (int j = 0; j < r; j++)
          perm[j] = plan_cu_norm_dim(v[j], r);
      }
      int64_t istr[PLAN_MAX_RANK] = {0}, s = 1;
      for (int d = r - 1; d >= 0; d--) {
        istr[d] = s;
        s *= in->dims[d];
      }
      k.bc.rank = r;
      for (int j = 0; j < r; j++) {
        k.bc.dims[j] = in->dims[perm[j]];
        k.bc.st[0][j] = istr[perm[j]];
      }
    }
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_SPLIT:
  case PLAN_OP_CONCAT: {
    bool to_whole = kind == PLAN_OP_CONCAT;
    const plan_view *whole = to_whole ? out : in;
    const plan_view *parts = to_whole ? in : out;
    int nparts = to_whole ? c->nin : c->nout;
    int dim =
        plan_cu_norm_dim(plan_cu_attr_int(c->attrs, kind, 0), whole->rank);
    int64_t outer = plan_cu_prod(whole->dims, 0, dim);
    int64_t inner = plan_cu_prod(whole->dims, dim + 1, whole->rank);
    int64_t at = 0;
    for (int i = 0; i < nparts; i++) {
      plan_k_part<E> k;
      k.whole = (E *)(to_whole ? c->dout[0] : c->din[0]);
      k.part = (E *)(to_whole ? c->din[i] : c->dout[i]);
      k.prow = parts[i].dims[dim] * inner;
      k.wrow = whole->dims[dim] * inner;
      k.at = at;
      k.to_whole = to_whole;
      at += k.prow;
      if (k.prow == 0)
        continue;
      int rc = plan_cu_launch(cu, outer * k.prow, k);
      if (rc)
        return rc;
    }
    return PLAN_OK;
  }
  case PLAN_OP_WHERE: {
    plan_k_where<E> k;
    k.mask = (const unsigned char *)c->din[0];
    k.a = (const E *)c->din[1];
    k.b = (const E *)c->din[2];
    k.o = (E *)c->dout[0];
    k.bc = plan_cu_bcast(out, in, 3);
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_REPEAT_INTERLEAVE: {
    int dim = plan_cu_norm_dim(
        plan_cu_attr_int(c->attrs, PLAN_OP_REPEAT_INTERLEAVE, 1), in->rank);
    plan_k_repeat<E> k;
    k.in = (const E *)c->din[0];
    k.o = (E *)c->dout[0];
    k.n = in->dims[dim];
    k.rep = plan_cu_attr_int(c->attrs, PLAN_OP_REPEAT_INTERLEAVE, 0);
    k.inner = plan_cu_prod(in->dims, dim + 1, in->rank);
    return plan_cu_launch(cu, total, k);
  }
  case PLAN_OP_EMBEDDING: {
    const plan_view *tab = &in[0], *ids = &in[1];
    plan_k_embedding<E> k;
    k.rows = tab->dims[0];
    k.d = tab->dims[1];
    k.lo = tab->offset[0];
    int64_t vocab = plan_cu_global_dim(tab, 0), n = plan_cu_count(ids);
    if (k.lo < 0 || k.lo + k.rows > vocab)
      return plan_cu_fail(cu, PLAN_EINVALID,
                          "embedding: table block rows [%lld, %lld) outside "
                          "the vocabulary of %lld",
                          (long long)k.lo, (long long)(k.lo + k.rows),
                          (long long)vocab);
    int rc = plan_cu_check_ids(cu, (const int64_t *)ids->data, n, vocab,
                               "embedding", "the vocabulary");
    if (rc)
      return rc;
    k.tab = (const E *)c->din[0];
    k.ids = (const int64_t *)c->din[1];
    k.o = (E *)c->dout[0];
    if (k.d == 0)
      return PLAN_OK;
    return plan_cu_launch(cu, n * k.d, k);
  }
  default:
    return plan_cu_fail(cu, PLAN_EUNSUPPORTED, "%s: no CUDA kernel",
                        plan_op_kind_name(kind));
  }
}

bool plan_cu_is_move(int kind) {
  switch (kind) {
  case PLAN_OP_TRANSPOSE:
  case PLAN_OP_PERMUTE:
  case PLAN_OP_RESHAPE:
  case PLAN_OP_SPLIT:
  case PLAN_OP_CONCAT:
  case PLAN_OP_EXPAND:
  case PLAN_OP_WHERE:
  case PLAN_OP_REPEAT_INTERLEAVE:
  case PLAN_OP_EMBEDDING:
    return true;
  default:
    return false;
  }
}

int plan_cu_run_move(plan_cu *cu, const plan_cu_call *c) {
  switch (plan_cu_dev_esz(c->out[0].dtype)) {
  case 2:
    return run_move<uint16_t>(cu, c);
  case 4:
    return run_move<uint32_t>(cu, c);
  default:
    return run_move<uint64_t>(cu, c);
  }
}
