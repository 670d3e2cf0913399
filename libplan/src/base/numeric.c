/* The bf16 / f16 rounding of numeric.h: bit operations on the float's
 * representation, so every runner and the verifier round alike. */
#include "base/numeric.h"

#include <math.h>
#include <string.h>

float plan_round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return x;                      /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* ties to even; overflow gives inf */
  u &= 0xffff0000u;
  memcpy(&x, &u, sizeof u);
  return x;
}

float plan_round_f16(float x) {
  uint32_t u, a, s;
  memcpy(&u, &x, sizeof u);
  a = u & 0x7fffffffu;
  s = u & 0x80000000u;
  if (a >= 0x7f800000u)
    return x;             /* inf, NaN */
  if (a >= 0x477ff000u) { /* >= 65520: rounds past 65504 */
    a = 0x7f800000u;
  } else if (a >= 0x38800000u) { /* >= 2^-14: a normal f16, 10 bits */
    a += 0xfffu + ((a >> 13) & 1u);
    a &= ~0x1fffu;
  } else { /* a subnormal f16: a multiple of 2^-24 (exact scalings) */
    float y;
    memcpy(&y, &a, sizeof y);
    y = nearbyintf(y * 0x1p24f) * 0x1p-24f;
    memcpy(&a, &y, sizeof a);
  }
  u = s | a;
  memcpy(&x, &u, sizeof u);
  return x;
}

void plan_round_bf16_n(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    p[i] = plan_round_bf16(p[i]);
}

void plan_round_f16_n(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    p[i] = plan_round_f16(p[i]);
}
