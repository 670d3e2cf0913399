/* Autodiff: the training program of a forward program with a scalar loss
 * (docs/training-and-pipelines.md, "Autodiff"). The public entry is
 * plan_program_grad (libplan/program.h); this header adds what the training
 * lowering and the reference run need: which forward op each backward op
 * comes from, and whether it computes input or weight gradients (the I and
 * W halves of a zero-bubble schedule). */
#ifndef LIBPLAN_AUTODIFF_H
#define LIBPLAN_AUTODIFF_H

#include <stdint.h>

#include "ir/ir.h"

typedef enum plan_grad_part {
  PLAN_GRAD_FORWARD, /* an op of the forward program */
  /* a backward op some gradient of an activation or an input depends on:
   * what a pipeline stage must compute before it sends the gradient on */
  PLAN_GRAD_INPUT,
  /* a backward op that only feeds gradients of params (weight gradients,
   * their accumulation): may run later (zero-bubble W) */
  PLAN_GRAD_WEIGHT
} plan_grad_part;

/* How a training program relates to its forward program. The forward ops
 * and tensors keep their indices: ops [0, nfwd_ops) and tensors
 * [0, nfwd_tensors) of the training program are the forward program's. */
typedef struct plan_grad_map {
  int nfwd_ops, nfwd_tensors;
  int nops; /* ops of the training program */
  /* [nfwd_tensors]: the tensor holding the gradient of each forward tensor,
   * -1 where none flows (integers, consts, tensors the loss does not depend
   * on or that depend on no param). Every param (and every float input when
   * asked) has one, named grad/<name>; an activation's may be another
   * tensor's (an add passes its output gradient through unchanged). */
  int *grad;
  /* [nops]: the forward op an op belongs to: itself for a forward op, the op
   * it differentiates for a backward op, -1 for an op that sums (or copies)
   * the gradient of a tensor, which is then accum_of[op] (else -1). */
  int *origin;
  int *accum_of;
  uint8_t *part; /* [nops]: plan_grad_part */
  int seed;      /* the tensor grad/<loss>: a const of ones, shape [] */
} plan_grad_map;

/* Builds the training program of `fwd` (see plan_program_grad) and, when
 * map is not NULL, its map (free with plan_grad_map_free). On failure
 * returns a negative status with the last error set (positioned at the op
 * or tensor concerned) and sets *out (and *map) to NULL. */
int plan_autodiff(plan_program **out, plan_grad_map **map,
                  const plan_program *fwd, const plan_grad_options *opts);
void plan_grad_map_free(plan_grad_map *m);

#endif
