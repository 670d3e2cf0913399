/* The agreement test's per-op cases (agree.h), one dtype at a time:
 * matmul and linear, the elementwise ops and their gradients, the row ops
 * (softmax, the norms), the reductions and cross_entropy, embedding, and
 * the data-movement ops. Each calls agree() on random inputs at several
 * shapes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agree.h"

void matmuls(plan_dtype dt, bool exact) {
  static const struct {
    int ra, rb;
    int64_t a[5], b[5];
  } shapes[] = {
      {2, 2, {3, 4}, {4, 5}},
      {3, 3, {2, 3, 4}, {2, 4, 5}},
      {3, 2, {5, 3, 4}, {4, 2}},                /* B one matrix */
      {2, 3, {3, 4}, {2, 4, 5}},                /* A one matrix */
      {4, 4, {2, 1, 3, 4}, {1, 3, 4, 5}},       /* batches broadcast */
      {5, 5, {2, 3, 1, 3, 4}, {1, 3, 2, 4, 2}}, /* no single stride */
      {4, 3, {2, 2, 3, 4}, {1, 4, 5}},
      {2, 2, {3, 0}, {0, 4}}, /* k = 0: zeros */
      {3, 3, {2, 1, 7}, {2, 7, 1}},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      bool ta = t & 1, tb = t & 2;
      int64_t da[5], db[5];
      int ra = shapes[s].ra, rb = shapes[s].rb;
      memcpy(da, shapes[s].a, sizeof da);
      memcpy(db, shapes[s].b, sizeof db);
      if (ta) { /* the stored A is [.., k, m] */
        int64_t x = da[ra - 1];
        da[ra - 1] = da[ra - 2];
        da[ra - 2] = x;
      }
      if (tb) {
        int64_t x = db[rb - 1];
        db[rb - 1] = db[rb - 2];
        db[rb - 2] = x;
      }
      plan_view in[2] = {rnd(dt, ra, da, -2, 2), rnd(dt, rb, db, -2, 2)};
      plan_attr_val *at = attrs_new(2);
      at[0].b = ta;
      at[1].b = tb;
      char label[64];
      snprintf(label, sizeof label, "matmul shape %zu ta %d tb %d", s, ta, tb);
      agree(label, PLAN_OP_MATMUL, at, in, 2, NULL, 1, exact);
    }
  /* linear with and without bias, on rank 2 and 3 inputs */
  for (int bias = 0; bias < 2; bias++) {
    plan_view in[3] = {RV(dt, 2, 3, 4), RV(dt, 5, 4), RV(dt, 5)};
    agree(bias ? "linear+bias" : "linear", PLAN_OP_LINEAR, NULL, in, 2 + bias,
          NULL, 1, exact);
    plan_view in2[3] = {RV(dt, 6, 3), RV(dt, 2, 3), RV(dt, 2)};
    agree("linear rank 2", PLAN_OP_LINEAR, NULL, in2, 2 + bias, NULL, 1, exact);
  }
}

void elementwise(plan_dtype dt, bool exact) {
  static const int kinds[] = {PLAN_OP_ADD, PLAN_OP_SUB, PLAN_OP_MUL,
                              PLAN_OP_DIV};
  for (size_t k = 0; k < 4; k++) {
    bool div = kinds[k] == PLAN_OP_DIV;
    const char *name = plan_op_kind_name(kinds[k]);
    plan_view in[2] = {RV(dt, 2, 3, 4),
                       div ? divisor(dt, 2, D(3, 1)) : RV(dt, 3, 1)};
    agree(name, kinds[k], NULL, in, 2, NULL, 1, exact);
    plan_view in2[2] = {RV(dt, 4),
                        div ? divisor(dt, 3, D(2, 3, 4)) : RV(dt, 2, 3, 4)};
    agree(name, kinds[k], NULL, in2, 2, NULL, 1, exact);
    plan_view in3[2] = {RV(dt, 5, 1, 3),
                        div ? divisor(dt, 2, D(4, 1)) : RV(dt, 4, 1)};
    agree(name, kinds[k], NULL, in3, 2, NULL, 1, exact);
  }
  static const double factors[] = {0.1, 0.75, -3, 1e-3};
  for (int f = 0; f < 4; f++) {
    plan_attr_val *at = attrs_new(1);
    at[0].f = factors[f];
    plan_view in = RV(dt, 3, 5);
    agree("scale", PLAN_OP_SCALE, at, &in, 1, NULL, 1, exact);
  }
  static const int unary[] = {PLAN_OP_RELU, PLAN_OP_SILU, PLAN_OP_TANH,
                              PLAN_OP_EXP};
  for (int u = 0; u < 4; u++) {
    plan_view in = RV(dt, 2, 3, 7);
    agree(plan_op_kind_name(unary[u]), unary[u], NULL, &in, 1, NULL, 1, exact);
  }
  for (int t = 0; t < 2; t++) {
    plan_attr_val *at = attrs_new(1);
    at[0].s = t ? "tanh" : "none";
    plan_view in = RV(dt, 4, 9);
    agree(t ? "gelu tanh" : "gelu", PLAN_OP_GELU, at, &in, 1, NULL, 1, exact);
    plan_view g[2] = {RV(dt, 4, 9), RV(dt, 4, 9)};
    agree(t ? "gelu_grad tanh" : "gelu_grad", PLAN_OP_GELU_GRAD, at, g, 2, NULL,
          1, exact);
  }
  static const int grads[] = {PLAN_OP_RELU_GRAD, PLAN_OP_SILU_GRAD};
  for (int u = 0; u < 2; u++) {
    plan_view in[2] = {RV(dt, 3, 6), RV(dt, 3, 6)};
    put(&in[1], 0, 0); /* relu_grad at 0 */
    agree(plan_op_kind_name(grads[u]), grads[u], NULL, in, 2, NULL, 1, exact);
  }
}

void rows(plan_dtype dt, bool exact) {
  for (int d = 0; d < 3; d++) {
    plan_attr_val *at = attrs_new(1);
    at[0].i = d;
    plan_view in = RV(dt, 3, 4, 5);
    agree("softmax", PLAN_OP_SOFTMAX, at, &in, 1, NULL, 1, exact);
  }
  for (int bias = 0; bias < 2; bias++) {
    plan_attr_val *at = attrs_new(1);
    at[0].f = 1e-5;
    plan_view in[3] = {RV(dt, 2, 3, 8), RV(dt, 8), RV(dt, 8)};
    agree("layernorm", PLAN_OP_LAYERNORM, at, in, 2 + bias, NULL, 1, exact);
  }
  plan_attr_val *at = attrs_new(1);
  at[0].f = 1e-6;
  plan_view in[2] = {RV(dt, 5, 16), RV(dt, 16)};
  agree("rmsnorm", PLAN_OP_RMSNORM, at, in, 2, NULL, 1, exact);
  for (int k = 0; k < 2; k++) {
    int kind = k ? PLAN_OP_RMSNORM_GRAD : PLAN_OP_LAYERNORM_GRAD;
    plan_attr_val *ae = attrs_new(1);
    ae[0].f = 1e-5;
    plan_view g[3] = {RV(dt, 2, 3, 8), RV(dt, 2, 3, 8), RV(dt, 8)};
    agree(plan_op_kind_name(kind), kind, ae, g, 3, NULL, 1, exact);
  }
}

void reductions(plan_dtype dt, bool exact) {
  static const struct {
    int n;
    int dims[3];
    bool keep;
  } red[] = {{1, {1}, false},
             {2, {0, 2}, false},
             {1, {2}, true},
             {3, {0, 1, 2}, false},
             {2, {1, 2}, true}};
  for (int kind = PLAN_OP_REDUCE_SUM; kind <= PLAN_OP_REDUCE_MEAN; kind++)
    for (size_t r = 0; r < sizeof red / sizeof red[0]; r++) {
      plan_attr_val *at = attrs_new(2);
      set_ints(&at[0], red[r].n, red[r].dims[0], red[r].dims[1],
               red[r].dims[2]);
      at[1].b = red[r].keep;
      plan_view in = RV(dt, 3, 4, 5);
      if (kind == PLAN_OP_REDUCE_MEAN && r % 2) { /* a block of a larger dim */
        in.global_dims[0] = 6;
        in.global_dims[2] = 10;
      }
      agree(plan_op_kind_name(kind), kind, at, &in, 1, NULL, 1, exact);
    }
  /* cross_entropy and its gradient over a block of a [4, 3] batch */
  for (int g = 0; g < 2; g++) {
    plan_view lg = RV(dt, 2, 3, 7);
    plan_view lb = rnd(PLAN_I64, 2, D(2, 3), 0, 7);
    if (g) {
      lb.global_dims[0] = 4;
      lb.global_dims[1] = 3;
    }
    plan_view in[2] = {lg, lb};
    agree("cross_entropy", PLAN_OP_CROSS_ENTROPY, NULL, in, 2, NULL, 1, exact);
    plan_view gin[3] = {rnd(dt, 0, NULL, 0.5, 2), lg, lb};
    agree("cross_entropy_grad", PLAN_OP_CROSS_ENTROPY_GRAD, NULL, gin, 3, NULL,
          1, exact);
  }
}

/* embedding over a table block (rows [3, 9) of 12) and its gradient into
 * such a block, with repeated ids. */
void embeddings(plan_dtype dt, bool exact) {
  for (int blk = 0; blk < 2; blk++) {
    plan_view tab = RV(dt, 6, 4);
    if (blk) {
      tab.offset[0] = 3;
      tab.global_dims[0] = 12;
    }
    plan_view ids = rnd(PLAN_I64, 2, D(2, 5), 0, blk ? 12 : 6);
    ((int64_t *)ids.data)[1] = ((int64_t *)ids.data)[0];
    plan_view in[2] = {tab, ids};
    agree("embedding", PLAN_OP_EMBEDDING, NULL, in, 2, NULL, 1, exact);
    plan_view gin[2] = {RV(dt, 2, 5, 4), ids};
    plan_view shape = mkv(dt, 2, D(6, 4));
    if (blk) {
      shape.offset[0] = 3;
      shape.global_dims[0] = 12;
    }
    plan_attr_val *at = attrs_new(1);
    at[0].i = blk ? 12 : 6;
    at[0].present = true;
    agree("embedding_grad", PLAN_OP_EMBEDDING_GRAD, at, gin, 2, &shape, 1,
          exact);
  }
}

/* The data-movement ops: any dtype, integers included. */
void movement(plan_dtype dt, bool exact) {
  plan_view x = rnd(dt, 3, D(2, 3, 4), -50, 50);
  agree("transpose", PLAN_OP_TRANSPOSE, NULL, &x, 1, NULL, 1, exact);
  plan_attr_val *at = attrs_new(1);
  set_ints(&at[0], 2, 0, 2);
  agree("transpose 0 2", PLAN_OP_TRANSPOSE, at, &x, 1, NULL, 1, exact);
  plan_attr_val *ap = attrs_new(1);
  set_ints(&ap[0], 3, 2, 0, 1);
  agree("permute", PLAN_OP_PERMUTE, ap, &x, 1, NULL, 1, exact);
  plan_view x4 = rnd(dt, 4, D(2, 1, 3, 2), -50, 50);
  plan_attr_val *ap4 = attrs_new(1);
  set_ints(&ap4[0], 4, 3, 1, 0, 2);
  agree("permute rank 4", PLAN_OP_PERMUTE, ap4, &x4, 1, NULL, 1, exact);
  plan_view rs = mkv(dt, 2, D(6, 4));
  agree("reshape", PLAN_OP_RESHAPE, NULL, &x, 1, &rs, 1, exact);
  for (int dim = 0; dim < 3; dim++) {
    plan_attr_val *as = attrs_new(2);
    plan_view parts[3];
    int64_t n = x.dims[dim];
    int64_t sz[3] = {1, n - 1, 0};
    int np = 2;
    for (int i = 0; i < np; i++) {
      int64_t d[3] = {2, 3, 4};
      d[dim] = sz[i];
      parts[i] = mkv(dt, 3, d);
    }
    as[0].i = dim;
    set_ints(&as[1], 2, (int)sz[0], (int)sz[1]);
    agree("split", PLAN_OP_SPLIT, as, &x, 1, parts, np, exact);
    plan_view cin[3];
    for (int i = 0; i < 3; i++) {
      int64_t d[3] = {2, 3, 4};
      d[dim] = i + 1;
      cin[i] = rnd(dt, 3, d, -50, 50);
    }
    plan_attr_val *ac = attrs_new(1);
    ac[0].i = dim;
    agree("concat", PLAN_OP_CONCAT, ac, cin, 3, NULL, 1, exact);
  }
  plan_view small = rnd(dt, 2, D(3, 1), -50, 50);
  plan_view big = mkv(dt, 3, D(2, 3, 4));
  agree("expand", PLAN_OP_EXPAND, NULL, &small, 1, &big, 1, exact);
  plan_view scalar = rnd(dt, 0, NULL, -50, 50);
  agree("expand scalar", PLAN_OP_EXPAND, NULL, &scalar, 1, &big, 1, exact);
  static const plan_dtype conds[] = {PLAN_I64, PLAN_F32, PLAN_F64};
  for (int c = 0; c < 3; c++) {
    plan_view w[3] = {rnd(conds[c], 2, D(3, 1), 0, 2),
                      rnd(dt, 3, D(2, 3, 4), -50, 50),
                      rnd(dt, 1, D(4), -50, 50)};
    agree("where", PLAN_OP_WHERE, NULL, w, 3, NULL, 1, exact);
  }
  for (int dim = 0; dim < 3; dim++) {
    plan_attr_val *ar = attrs_new(2);
    ar[0].i = 3;
    ar[1].i = dim;
    ar[0].present = ar[1].present = true;
    agree("repeat_interleave", PLAN_OP_REPEAT_INTERLEAVE, ar, &x, 1, NULL, 1,
          exact);
  }
}
