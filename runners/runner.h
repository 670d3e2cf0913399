/* The runner interface: what the verifier needs from a backend that
 * executes lowered programs. Kernels live in runners, never in the core;
 * each runner keeps its own kernel table indexed by plan_op_kind, and
 * every one follows the op contract of runner_op.h.
 *
 * A runner is a vtable with an API version, so a runner built as a plugin
 * (the CUDA runner, loaded with dlopen) can be checked before use. Version
 * 1 runs local ops on rank-local blocks. Version 2 adds a description of
 * where the runner runs and an optional all-reduce over the blocks of a
 * group of simulated ranks (the CUDA runner's virtual-rank mode); a runner
 * without one leaves it NULL and the verifier reduces on the host
 * (verifier/verify_redist.c), in the same order. Version 3 adds the
 * runner's own communicator for distributed verification (runners/comm.h):
 * one process per mesh rank; a runner without one leaves it NULL and the
 * verifier uses the library's MPI communicator. */
#ifndef LIBPLAN_RUNNER_H
#define LIBPLAN_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "runner_op.h"
#include "libplan/common.h"
#include "libplan/ops.h"

/* C linkage: the CUDA runner's plugin (C++) includes this header. */
#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_RUNNER_API_VERSION 3

/* The name of the plugin's entry point (C linkage):
 *   const plan_runner_vtable *plan_runner_plugin_entry(int api_version,
 *                                                      char *err,
 *                                                      size_t errsz);
 * It returns the plugin's vtable for a caller built against `api_version`,
 * or NULL with a one-line reason in err (no device, a version it does not
 * speak). The vtable lives as long as the plugin stays loaded. */
#define PLAN_RUNNER_PLUGIN_ENTRY "plan_runner_plugin_entry"

/* What a plugin and the library that loads it must agree on beyond the
 * API version: the plugin carries its own copy of the core (the op
 * registry, plan_kernel_check), so the release (its op kinds, numbered in
 * one order) and the layouts the vtable passes must be the same. A plugin
 * exports it as
 *   const unsigned long long plan_runner_plugin_abi = PLAN_RUNNER_ABI_KEY;
 * and the loader refuses a plugin without it or with another key. */
#define PLAN_RUNNER_PLUGIN_ABI "plan_runner_plugin_abi"
#define PLAN_RUNNER_ABI_KEY                                                    \
  ((unsigned long long)PLAN_VERSION_NUMBER << 32 |                             \
   (unsigned long long)PLAN_OP_COUNT << 24 |                                   \
   (unsigned long long)sizeof(plan_view) << 12 |                               \
   (unsigned long long)sizeof(plan_attr_val) << 4 |                            \
   (unsigned long long)sizeof(plan_kernel_ctx))

typedef struct plan_runner_vtable {
  int api_version;  /* PLAN_RUNNER_API_VERSION */
  const char *name; /* "cpu", "cuda" */
  /* Whether op `kind` has a kernel for outputs of `dtype`. */
  bool (*supports_op)(int kind, plan_dtype dtype);
  /* One local op on rank-local blocks, with the contract of runner_op.h:
   * checked by plan_kernel_check first, then computed as the op's local
   * semantics say. The statuses: PLAN_OK; PLAN_EINVALID when the shapes,
   * dtypes or attributes do not fit the op (or an index is out of range);
   * PLAN_EUNSUPPORTED for an op or dtype the runner lacks (or a device
   * failure); PLAN_ELIMIT for a size the runner cannot address; PLAN_ENOMEM
   * when out of memory; PLAN_EUSAGE for a bad argument; on failure a
   * one-line reason in err. */
  int (*run_op)(int kind, const plan_attr_val *attrs, const plan_view *in,
                int nin, plan_view *out, int nout, const plan_kernel_ctx *ctx,
                char *err, size_t errsz);
  /* ---- version 2 ---- */
  /* Writes a one-line description of where the runner runs (device,
   * collective settings) into buf; NULL: the name says it all. */
  void (*describe)(char *buf, size_t size);
  /* All-reduce of a group's blocks (the verifier's all-reduces, and its
   * reduce-scatters with each member's values gathered into a block):
   * blocks[0..nmembers) are the members' host blocks of n doubles each,
   * in coordinate order; the reduction
   * (plan_reduce) is written into blocks[0], bit-identical to reducing
   * on the host in member order (sum: ((b0 + b1) + b2) + ...; avg: that
   * sum divided by nmembers; max/min: a > b ? a : b, a < b ? a : b,
   * folded left). Returns PLAN_OK or a status with a reason in err.
   * NULL: the verifier reduces on the host. */
  int (*all_reduce)(double *const *blocks, int nmembers, int64_t n, int reduce,
                    char *err, size_t errsz);
  /* ---- version 3 ---- */
  /* Opens this process's communicator of a distributed verification
   * (rank, world, the folder for NCCL's id when not under MPI, the
   * timeout), on the runner's own transport (NCCL for the CUDA runner;
   * this rank's ops then run on the GPU that LOCAL_RANK names). NULL: the
   * library's MPI communicator (plan_comm_mpi_open). */
  int (*comm_open)(plan_comm **out, int rank, int world, const char *rendezvous,
                   double timeout_s, char *err, size_t errsz);
} plan_runner_vtable;

/* The entry point's type (PLAN_RUNNER_PLUGIN_ENTRY). */
typedef const plan_runner_vtable *(*plan_runner_plugin_entry_fn)(
    int api_version, char *err, size_t errsz);

/* A runner by name (runner_find.c): "cpu" (embedded: OpenBLAS and plain
 * C kernels, runners/cpu), or "cuda", loaded from the plugin
 * libplan-cuda.so: the file named by the environment variable
 * PLAN_CUDA_PLUGIN when it is set, else the first found beside the library
 * (or the executable linking it statically), beside the executable, in
 * the lib folder beside the executable's (../lib), and in the install
 * prefix's lib folder. NULL with the last error set to
 * PLAN_EUNSUPPORTED and the reason (the plugin not found, where it was
 * looked for; a plugin that does not load; no CUDA device) for a runner
 * that is not built or cannot run on this machine, or to PLAN_EUSAGE for
 * an unknown name. The plugin stays loaded (the dynamic loader counts its
 * references); nothing is cached in the library. */
const plan_runner_vtable *plan_runner_find(const char *name);

/* The embedded CPU runner's vtable (runners/cpu/runner.c, in the library):
 * what plan_runner_find("cpu") returns. The entry point the CPU runner
 * provides to this interface, as a plugin's PLAN_RUNNER_PLUGIN_ENTRY is the
 * CUDA runner's: the one way into runners/cpu, whose kernels the runners
 * and the verifier reach only through the vtable (tests/layers/includes.py
 * checks that they reference nothing else of it). */
const plan_runner_vtable *plan_cpu_runner(void);

/* Whether `r` is the embedded CPU runner: it has a kernel for every op,
 * and its PLAN_ENOMEM is the host's memory. */
bool plan_runner_is_cpu(const plan_runner_vtable *r);

#ifdef __cplusplus
}
#endif

#endif
