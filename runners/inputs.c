/* The counter-based verification inputs; see inputs.h. */
#include "inputs.h"

#include <math.h>
#include <string.h>
#include <xxhash.h>

uint64_t plan_input_tensor_key(const char *name) {
  return XXH3_64bits(name, strlen(name));
}

/* SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", 2014) over a counter that mixes seed,
 * tensor and index: stateless, so any element is computed on its own. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

uint64_t plan_input_bits(uint64_t seed, uint64_t tensor_key, int64_t index) {
  uint64_t k = mix64(seed ^ mix64(tensor_key + UINT64_C(0x9E3779B97F4A7C15)));
  return mix64(k + (uint64_t)index * UINT64_C(0x9E3779B97F4A7C15));
}

/* (bits * n) >> 64 without 128-bit types: an unbiased-enough map of 64
 * random bits onto [0, n) for the small n used here. */
static uint64_t below(uint64_t bits, uint64_t n) {
  uint64_t hi = bits >> 32, lo = bits & 0xffffffffu;
  uint64_t nh = n >> 32, nl = n & 0xffffffffu;
  uint64_t t = hi * nl + ((lo * nl) >> 32);
  uint64_t u = lo * nh + (t & 0xffffffffu);
  return hi * nh + (t >> 32) + (u >> 32);
}

double plan_input_value(uint64_t seed, uint64_t tensor_key, int64_t index,
                        const plan_input_spec *spec) {
  uint64_t b = plan_input_bits(seed, tensor_key, index);
  switch (spec->kind) {
  case PLAN_INPUT_EXACT:
    return (double)((int64_t)below(b, 7) - 3);
  case PLAN_INPUT_FLOAT:
    /* 25 random bits: k / 2^24 - 1 with k in [0, 2^25) */
    return ldexp((double)(b >> 39), -24) - 1.0;
  case PLAN_INPUT_INT: {
    uint64_t n = (uint64_t)(spec->hi - spec->lo);
    return (double)(spec->lo + (int64_t)below(b, n ? n : 1));
  }
  }
  return 0.0;
}

void plan_input_fill_block(double *out, uint64_t seed, uint64_t tensor_key,
                           const plan_input_spec *spec, int rank,
                           const int64_t *shape, const int64_t *offset,
                           const int64_t *local) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= local[d];
  if (n <= 0)
    return;
  int64_t idx[8] = {0};
  for (int64_t k = 0; k < n; k++) {
    int64_t g = 0; /* the global row-major index of this element */
    for (int d = 0; d < rank; d++)
      g = g * shape[d] + offset[d] + idx[d];
    out[k] = plan_input_value(seed, tensor_key, g, spec);
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < local[d])
        break;
      idx[d] = 0;
    }
  }
}
