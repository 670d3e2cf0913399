/* Single-device reference runs: a program run whole on one device with the
 * CPU runner's kernels (through the runner vtable) and the verifier's
 * inputs, and the reference gradients of a training step built on it: the
 * training program of plan_program_grad run the same way, every param's
 * gradient read off it.
 *
 * Inputs are the verifier's (inputs.h), keyed by tensor name, so a run of a
 * program and a run of its training program see the same leaves, and the
 * verifier's reference run of the same program gets the same values. */
#ifndef LIBPLAN_VERIFIER_TRAIN_REF_H
#define LIBPLAN_VERIFIER_TRAIN_REF_H

#include <stdint.h>

#include "autodiff.h"
#include "libplan/verify.h"

typedef struct plan_ref_options {
  plan_verify_mode mode; /* exact: f64 with dyadic rounding; float */
  uint64_t seed;
  /* float mode: -1 runs each tensor in its own dtype; a float plan_dtype
   * runs every float tensor in it (PLAN_F64 for finite differences) */
  int dtype;
} plan_ref_options;

#define PLAN_REF_OPTIONS_INIT                                                  \
  { PLAN_VERIFY_FLOAT, 0, -1 }

/* One run of a program: a value for every tensor, as doubles (row-major,
 * the tensor's element count; integers hold their integer values). */
typedef struct plan_ref_run plan_ref_run;

/* Allocates every tensor of p and fills the leaves (inputs, params,
 * consts) as the verifier does. p must outlive the run. Returns PLAN_OK,
 * PLAN_ENOMEM or PLAN_EUSAGE (a NULL argument, an unknown dtype). */
int plan_ref_run_new(plan_ref_run **out, const plan_program *p,
                     const plan_ref_options *opts);
void plan_ref_run_free(plan_ref_run *r);

/* The values of a tensor (NULL for a bad index); a leaf's may be changed
 * before plan_ref_run_exec (a finite difference perturbs a param). */
double *plan_ref_run_values(plan_ref_run *r, int tensor);
int64_t plan_ref_run_count(const plan_ref_run *r, int tensor);

/* Runs every op in program order, writing every produced tensor. Returns
 * PLAN_OK, or the kernel's failure (the message names the op). */
int plan_ref_run_exec(plan_ref_run *r);

/* The reference gradients of a training step: fwd's training program
 * (grad/<param> for every float param), run once. */
typedef struct plan_ref_grads {
  plan_program *train; /* the training program (owned) */
  plan_grad_map *map;  /* how it relates to fwd (owned) */
  plan_ref_run *run;   /* its values, every tensor (owned) */
  double loss;
  int nparams;
  int *param; /* [nparams]: fwd's tensor index of each float param */
  int *grad;  /* [nparams]: the train tensor of its gradient */
} plan_ref_grads;

/* Builds fwd's training program and runs it. Returns PLAN_OK, or the
 * failure of plan_program_grad (a program without loss: PLAN_EINVALID), of
 * the run, or PLAN_ENOMEM. */
int plan_ref_grads_compute(plan_ref_grads **out, const plan_program *fwd,
                           const plan_ref_options *opts);
/* The gradient of param i (of nparams), param i's element count long. */
const double *plan_ref_grads_values(const plan_ref_grads *g, int i);
void plan_ref_grads_free(plan_ref_grads *g);

#endif
