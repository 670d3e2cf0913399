/* Verifier inputs: a counter-based generator keyed by (seed, tensor,
 * global index), so a rank makes its own shard of an input without making
 * the whole tensor, and every runner (CPU, CUDA) sees identical data; and
 * the dyadic rounding of exact mode.
 *
 * The formulas are part of the verification contract (a CUDA runner must
 * reproduce them bit for bit), so they use only 64-bit integer arithmetic
 * and exactly representable conversions; see docs/verify.md. */
#ifndef LIBPLAN_VERIFIER_INPUTS_H
#define LIBPLAN_VERIFIER_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum plan_input_kind {
  /* exact mode: small integers in [-3, 3], so products and sums in f64
   * stay exact whatever the reduction order */
  PLAN_INPUT_EXACT,
  /* float mode: uniform in [-1, 1) on a 2^-24 grid (exact in f32 and f64) */
  PLAN_INPUT_FLOAT,
  /* integer tensors: uniform in [lo, hi) */
  PLAN_INPUT_INT
} plan_input_kind;

typedef struct plan_input_spec {
  plan_input_kind kind;
  int64_t lo, hi; /* PLAN_INPUT_INT */
} plan_input_spec;

/* The key of a tensor: a 64-bit hash of its name (XXH3-64, seed 0). */
uint64_t plan_input_tensor_key(const char *name);

/* The 64 random bits of element `index` (row-major global index). */
uint64_t plan_input_bits(uint64_t seed, uint64_t tensor_key, int64_t index);

/* The value of element `index` under `spec`. */
double plan_input_value(uint64_t seed, uint64_t tensor_key, int64_t index,
                        const plan_input_spec *spec);

/* Fills `out` with the elements of a rank's local block: the global tensor
 * has `rank` dims `shape`; the block starts at `offset` and has extent
 * `local` (row-major). Writes local[0]*...*local[rank-1] doubles. */
void plan_input_fill_block(double *out, uint64_t seed, uint64_t tensor_key,
                           const plan_input_spec *spec, int rank,
                           const int64_t *shape, const int64_t *offset,
                           const int64_t *local);

/* Exact mode: rounds x to the grid 2^-bits (round half to even), so results
 * of ops that are not exactly representable stay small dyadic numbers and
 * every later sum is exact. Infinities and NaN pass through; bits in
 * [1, 60]. Inline: exact mode rounds every element of most results.
 *
 * A value of magnitude 2^(52 - bits) or more is on the grid already (its
 * last bit is worth at least 2^-bits). Below, x 2^bits and the division
 * back are exact (powers of two), and adding and subtracting 2^52 rounds
 * to an integer in the current rounding mode, half to even by default. */
static inline double plan_dyadic_round(double x, int bits) {
  union {
    uint64_t u;
    double d;
  } up = {(uint64_t)(1023 + bits) << 52}, down = {(uint64_t)(1023 - bits) << 52},
    lim = {(uint64_t)(1023 + 52 - bits) << 52};
  if (!(x < lim.d && x > -lim.d)) /* large, infinite or NaN */
    return x;
  volatile double big = 0x1p52; /* kept from being folded away */
  double y = x * up.d;
  double r = y >= 0 ? (y + big) - big : -((-y + big) - big);
  return r * down.d;
}

#endif
