/* The CUDA kernels' agreement test (test_cuda_emu.c), its shared parts:
 * the harness (agree.c: buffers freed by teardown, random views,
 * attributes, running an op on both runners and comparing) and the cases
 * it runs for one dtype at a time (agree_ops.c: the per-op cases;
 * agree_route.c: the routing ops). Include <cmocka.h> first: the harness
 * fails the running test through it. */
#ifndef TESTS_CUDA_AGREE_H
#define TESTS_CUDA_AGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "ir/ops.h"
#include "base/numeric.h"
#include "ops_cuda.h"

/* Built against the nvcc objects (make check-cuda-gpu), the same test runs
 * on a GPU, where the ops that call the math library agree within
 * tolerance instead of bit for bit. Every file of the test is compiled
 * with the same PLAN_CUDA_DEVICE_TEST (runners/cuda/kernels.mk). */
#ifdef PLAN_CUDA_DEVICE_TEST
#define ON_DEVICE 1
#else
#define ON_DEVICE 0
#endif

/* ---- buffers (agree.c) --------------------------------------------------- */

/* Frees every buffer the harness handed out (a cmocka teardown; state is
 * unused and may be NULL). */
int teardown(void **state);

/* ---- random views (agree.c) ---------------------------------------------- */

size_t esz(plan_dtype t);
int64_t count(const plan_view *v);
/* A view of zeros of the given dims, freed by teardown. */
plan_view mkv(plan_dtype dt, int rank, const int64_t *dims);
void put(plan_view *v, int64_t i, double x);
double get(const plan_view *v, int64_t i);

/* Exact mode's inputs: multiples of 1/16 in [-4, 4], so every product and
 * sum of a few of them is exact. */
extern bool dyadic_inputs;

/* Uniform in [lo, hi) (integers: in [lo, hi) too). */
plan_view rnd(plan_dtype dt, int rank, const int64_t *dims, double lo,
              double hi);
/* A divisor: away from zero, with a random sign. */
plan_view divisor(plan_dtype dt, int rank, const int64_t *dims);
/* Integer indices in [lo, hi) of the given dims. */
plan_view ids_in(int rank, const int64_t *dims, int64_t lo, int64_t hi);

/* ---- attributes (agree.c) ------------------------------------------------ */

plan_attr_val *attrs_new(int n);
/* n ints (passed as int) into a, marked present. */
void set_ints(plan_attr_val *a, int n, ...);
/* One or two int attributes, a0 and a1, marked present. */
plan_attr_val *int_attrs(int n, int64_t a0, int64_t a1);

/* ---- running and comparing (agree.c) ------------------------------------- */

extern int ncompared;
extern int64_t nnonzero; /* nonzero output elements compared */

/* Runs op `kind` on both runners (outputs shaped like `shape`, or from the
 * registry when shape is NULL) and compares them: bit for bit, or within
 * the dtype's tolerance where the two may round apart (test_cuda_emu.c's
 * header says where); fails the running test when they differ. */
void agree(const char *label, int kind, const plan_attr_val *attrs,
           const plan_view *in, int nin, const plan_view *shape, int nout,
           bool exact);

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* A random float view of the given dims in [-2, 2). */
#define RV(dt, ...) rnd(dt, NDIMS(__VA_ARGS__), D(__VA_ARGS__), -2, 2)

extern const plan_dtype float_dtypes[4];

/* ---- the ops, one dtype at a time (agree_ops.c) -------------------------- */

void matmuls(plan_dtype dt, bool exact);
void elementwise(plan_dtype dt, bool exact);
void rows(plan_dtype dt, bool exact);
void reductions(plan_dtype dt, bool exact);
void embeddings(plan_dtype dt, bool exact);
/* The data-movement ops: any dtype, integers included. */
void movement(plan_dtype dt, bool exact);

/* ---- routing ops (agree_route.c) ----------------------------------------- */

/* The mixture-of-experts ops over groups of tokens [g, t, h] routed to
 * `experts` with k choices each, weighted or not, on the whole experts
 * dim and on the block [e0, e0 + ne): capacity cap drops choices when
 * t * k > experts * cap. */
void route_moe_case(plan_dtype dt, bool exact, int64_t g, int64_t t, int64_t k,
                    int64_t h, int64_t experts, int64_t cap, int64_t e0,
                    int64_t ne);
/* topk, gather and scatter_add, and the mixture-of-experts ops; fails when
 * their outputs are nearly all zeros. */
void routing(plan_dtype dt, bool exact);

#endif
