/* The runner interface (DESIGN §4): what the verifier needs from a backend
 * that executes lowered programs. Kernels live in runners, never in the
 * core; each runner keeps its own kernel table indexed by plan_op_kind.
 *
 * A runner is a vtable with an API version, so a runner built as a plugin
 * (the CUDA runner, loaded with dlopen) can be checked before use. Version
 * 1 runs local ops on rank-local blocks; collectives over simulated ranks
 * are still executed by the verifier itself (verifier/verify.c), and move
 * here when the CUDA runner brings device-side collectives. */
#ifndef LIBPLAN_RUNNER_H
#define LIBPLAN_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels.h"

#define PLAN_RUNNER_API_VERSION 1

typedef struct plan_runner_vtable {
  int api_version; /* PLAN_RUNNER_API_VERSION */
  const char *name; /* "cpu", "cuda" */
  /* Whether op `kind` has a kernel for outputs of `dtype`. */
  bool (*supports_op)(int kind, plan_dtype dtype);
  /* One local op on rank-local blocks: the contract of plan_cpu_kernel
   * (runners/cpu/kernels.h) for every runner. */
  int (*run_op)(int kind, const plan_attr_val *attrs, const plan_view *in,
                int nin, plan_view *out, int nout, const plan_kernel_ctx *ctx,
                char *err, size_t errsz);
} plan_runner_vtable;

/* The CPU runner: OpenBLAS and plain C kernels, embedded in the library. */
const plan_runner_vtable *plan_cpu_runner(void);

/* A runner by name: "cpu" here; NULL with the last error set to
 * PLAN_EUNSUPPORTED (and why) for a runner that is not built or cannot
 * run on this machine. */
const plan_runner_vtable *plan_runner_find(const char *name);

#endif
