/* The agreement test's routing-op cases (agree.h), one dtype at a time:
 * topk with ties, NaN and infinities; gather and scatter_add on the whole
 * last dim and on a block of it; the mixture-of-experts ops on the whole
 * experts dim and on blocks of it, with choices dropped past the
 * capacity. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "agree.h"

/* topk at several shapes and k, on distinct values and on few values
 * (ties to the lower index), with NaN and infinities in float mode. */
static void route_topk(plan_dtype dt, bool exact) {
  static const struct {
    int rank;
    int64_t dims[3], k;
  } shapes[] = {
      {1, {9}, 4},    {2, {3, 7}, 1},    {2, {3, 7}, 3},
      {2, {4, 7}, 7}, {3, {2, 3, 5}, 2}, {2, {0, 5}, 2},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ties = 0; ties < 2; ties++) {
      plan_view x = rnd(dt, shapes[s].rank, shapes[s].dims, -2, 2);
      for (int64_t i = 0; ties && i < count(&x); i++)
        put(&x, i, floor(get(&x, i))); /* -2 .. 1: many ties */
      if (!exact && dt != PLAN_BF16 && dt != PLAN_F16 && count(&x) > 4) {
        put(&x, 1, NAN);
        put(&x, 2, INFINITY);
        put(&x, 3, -INFINITY);
      }
      char label[64];
      snprintf(label, sizeof label, "topk shape %zu ties %d", s, ties);
      agree(label, PLAN_OP_TOPK, int_attrs(1, shapes[s].k, 0), &x, 1, NULL, 2,
            exact);
    }
}

/* gather and scatter_add on the whole last dim and on a block of it
 * ([4, 9) of 12), with repeated indices (scatter_add's sums). */
static void route_gather_scatter(plan_dtype dt, bool exact) {
  for (int blk = 0; blk < 2; blk++) {
    int64_t lo = blk ? 4 : 0, n = blk ? 5 : 6, g = blk ? 12 : 6;
    plan_view x = RV(dt, 3, n);
    if (blk) {
      x.offset[1] = lo;
      x.global_dims[1] = g;
    }
    plan_view in[2] = {x, ids_in(2, D(3, 9), 0, g)};
    agree(blk ? "gather block" : "gather", PLAN_OP_GATHER, NULL, in, 2, NULL, 1,
          exact);
    plan_view x3 = RV(dt, 2, 2, n);
    if (blk) {
      x3.offset[2] = lo;
      x3.global_dims[2] = g;
    }
    plan_view in3[2] = {x3, ids_in(3, D(2, 2, 4), 0, g)};
    agree("gather rank 3", PLAN_OP_GATHER, NULL, in3, 2, NULL, 1, exact);
    plan_view x1 = RV(dt, n);
    if (blk) {
      x1.offset[0] = lo;
      x1.global_dims[0] = g;
    }
    plan_view in1[2] = {x1, ids_in(1, D(7), 0, g)};
    agree("gather rank 1", PLAN_OP_GATHER, NULL, in1, 2, NULL, 1, exact);
    for (int64_t k = 1; k <= 20; k += 19) {
      plan_view src[2] = {RV(dt, 3, k), ids_in(2, D(3, k), 0, g)};
      plan_view shape = mkv(dt, 2, D(3, n));
      if (blk) {
        shape.offset[1] = lo;
        shape.global_dims[1] = g;
      }
      agree(blk ? "scatter_add block" : "scatter_add", PLAN_OP_SCATTER_ADD,
            int_attrs(1, g, 0), src, 2, &shape, 1, exact);
    }
    plan_view src3[2] = {RV(dt, 2, 2, 9), ids_in(3, D(2, 2, 9), 0, g)};
    plan_view shape3 = mkv(dt, 3, D(2, 2, n));
    if (blk) {
      shape3.offset[2] = lo;
      shape3.global_dims[2] = g;
    }
    agree("scatter_add rank 3", PLAN_OP_SCATTER_ADD, int_attrs(1, g, 0), src3,
          2, &shape3, 1, exact);
  }
  /* many sources into each element: the running sum's rounding shows */
  plan_view hot[2] = {RV(dt, 3, 64), ids_in(2, D(3, 64), 0, 4)};
  plan_view hot_out = mkv(dt, 2, D(3, 2));
  hot_out.offset[1] = 1;
  hot_out.global_dims[1] = 4;
  agree("scatter_add collisions", PLAN_OP_SCATTER_ADD, int_attrs(1, 4, 0), hot,
        2, &hot_out, 1, exact);
}

void route_moe_case(plan_dtype dt, bool exact, int64_t g, int64_t t, int64_t k,
                    int64_t h, int64_t experts, int64_t cap, int64_t e0,
                    int64_t ne) {
  plan_view x = rnd(dt, 3, D(g, t, h), -2, 2);
  plan_view idx = ids_in(3, D(g, t, k), 0, experts);
  if (k > 1 && t > 0) /* a token choosing one expert twice */
    ((int64_t *)idx.data)[1] = ((int64_t *)idx.data)[0];
  plan_view w = rnd(dt, 3, D(g, t, k), -2, 2);
  bool blk = e0 > 0 || ne < experts;
  char label[96];
  for (int wt = 0; wt < 2; wt++) {
    snprintf(label, sizeof label,
             "moe g %lld t %lld k %lld h %lld e %lld cap %lld block [%lld, "
             "%lld)%s",
             (long long)g, (long long)t, (long long)k, (long long)h,
             (long long)experts, (long long)cap, (long long)e0,
             (long long)(e0 + ne), wt ? " weighted" : "");
    plan_view din[3] = {x, idx, w};
    plan_view slots = mkv(dt, 4, D(ne, g, cap, h));
    if (blk) {
      slots.offset[0] = e0;
      slots.global_dims[0] = experts;
    }
    agree(label, PLAN_OP_MOE_DISPATCH, int_attrs(2, experts, cap), din, 2 + wt,
          &slots, 1, exact);
    plan_view y = rnd(dt, 4, D(ne, g, cap, h), -2, 2);
    y.offset[0] = slots.offset[0];
    y.global_dims[0] = slots.global_dims[0];
    plan_view cin[3] = {y, idx, w};
    agree(label, PLAN_OP_MOE_COMBINE, NULL, cin, 2 + wt, NULL, 1, exact);
  }
  plan_view b = rnd(dt, 4, D(ne, g, cap, h), -2, 2);
  if (blk) {
    b.offset[0] = e0;
    b.global_dims[0] = experts;
  }
  plan_view gin[3] = {x, b, idx};
  agree(label, PLAN_OP_MOE_WEIGHTS_GRAD, NULL, gin, 3, NULL, 1, exact);
}

static void route_moe(plan_dtype dt, bool exact) {
  /* 12 choices a group over 4 experts: capacity 2 keeps at most 8 */
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 2, 0, 4);
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 2, 1, 2);
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 12, 0, 4); /* no drops */
  route_moe_case(dt, exact, 2, 6, 2, 3, 4, 12, 3, 1);
  route_moe_case(dt, exact, 3, 5, 1, 4, 3, 1, 2, 1);
  route_moe_case(dt, exact, 1, 8, 3, 2, 8, 2, 4, 4);
}

void routing(plan_dtype dt, bool exact) {
  int64_t before = nnonzero;
  route_topk(dt, exact);
  route_gather_scatter(dt, exact);
  route_moe(dt, exact);
  assert_true(nnonzero - before > 800); /* about 970: not all zeros */
}
