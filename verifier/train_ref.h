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

#include "libplan/program.h"
#include "libplan/verify.h"

/* plan_ref_options and plan_ref_run (the run of one program) are public:
 * libplan/verify.h. */

/* The reference gradients of a training step: fwd's training program
 * (grad/<param> for every float param), run once. */
typedef struct plan_ref_grads {
  plan_program *train; /* the training program (owned) */
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
