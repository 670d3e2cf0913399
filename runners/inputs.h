/* Verification inputs: a counter-based generator keyed by (seed, tensor,
 * global index), so a rank makes its own shard of an input without making
 * the whole tensor, and every runner (CPU, CUDA) sees identical data.
 *
 * The formulas are part of the verification contract between the verifier
 * and the runners (a runner that makes inputs on its device must reproduce
 * them bit for bit), so they sit beside the runner interface, where a
 * runner reaches them without depending on the verifier. They use only
 * 64-bit integer arithmetic and exactly representable conversions; see
 * docs/verify.md. */
#ifndef LIBPLAN_RUNNERS_INPUTS_H
#define LIBPLAN_RUNNERS_INPUTS_H

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

#endif
