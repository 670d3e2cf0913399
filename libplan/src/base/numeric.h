/* Rounding shared by the verifier and every runner: exact mode's dyadic
 * grid, and the bf16 / f16 formats that low-precision values are rounded
 * to. Part of the verification contract: the verifier rounds inputs and
 * its own results with these, and each runner rounds its op results the
 * same way, bit for bit. */
#ifndef LIBPLAN_BASE_NUMERIC_H
#define LIBPLAN_BASE_NUMERIC_H

#include <math.h>
#include <stdint.h>

/* C linkage: the CUDA runner's sources (C++) include this header. */
#ifdef __cplusplus
extern "C" {
#endif

/* Rounds x to the nearest bf16 / f16 value (ties to even; NaN stays NaN,
 * f16 overflows to +-infinity beyond 65504 and keeps subnormals). The
 * kernels apply these to every BF16 / F16 result. */
float plan_round_bf16(float x);
float plan_round_f16(float x);
/* The same on each of p[0..n), in place: one call for a kernel's result,
 * the rounding inlined in its loop. */
void plan_round_bf16_n(float *p, int64_t n);
void plan_round_f16_n(float *p, int64_t n);

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
  } up = {(uint64_t)(1023 + bits) << 52},
    down = {(uint64_t)(1023 - bits) << 52},
    lim = {(uint64_t)(1023 + 52 - bits) << 52};
  if (!(x < lim.d && x > -lim.d)) /* large, infinite or NaN */
    return x;
  volatile double big = 0x1p52; /* kept from being folded away */
  double y = x * up.d;
  double r = y >= 0 ? (y + big) - big : -((-y + big) - big);
  return r * down.d;
}

/* Exact mode (bits >= 0; else x as it is): x rounded to a multiple of q =
 * 2^-(bits + e) times count's odd part, 2^e >= that part, so q <= 2^-bits:
 * any sum of such values divided by count is exact, a subset's share
 * included. A power-of-two count: the grid. */
static inline double plan_grid_div(double x, int bits, int64_t count) {
  if (bits < 0 || count <= 0)
    return x;
  int64_t odd = count;
  while (!(odd & 1))
    odd >>= 1;
  int e = 0;
  while (e < 40 && ((int64_t)1 << e) < odd)
    e++;
  if (odd == 1 || ((int64_t)1 << e) < odd || bits + e > 60)
    return plan_dyadic_round(x, bits);
  return plan_dyadic_round(x / (double)odd, bits + e) * (double)odd;
}

/* a / b; in exact mode (bits >= 0) rounded to the grid only when the
 * quotient is inexact (the residual a - q b, exact through fma, is not 0). */
static inline double plan_grid_quot(double a, double b, int bits) {
  double q = a / b;
  if (bits >= 0 && fma(q, b, -a) != 0)
    q = plan_dyadic_round(q, bits);
  return q;
}

#ifdef __cplusplus
}
#endif

#endif
