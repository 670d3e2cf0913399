/* Communicators for distributed verification (docs/gpu.md, "Several GPUs,
 * several hosts"): one process per mesh rank, each running its own rank's
 * share of the lowered program, the plan's collectives going through a
 * plan_comm. Two backends:
 *
 *  - mpi (runners/mpi/comm_mpi.c, the plugin libplan-comm-mpi.so that
 *    runners/comm_mpi_load.c loads): any runner, the processes of one MPI
 *    job (mpirun, srun), on one host or several;
 *  - nccl (the CUDA plugin's, runners/cuda/comm_nccl.cu): the same calls
 *    on NCCL, the collectives run on the GPUs.
 *
 * The contract every backend keeps: every process makes the same calls in
 * the same order (the verifier runs the same steps everywhere), each
 * naming only its own rank's part; a call returns 0 or a libplan status
 * with a one-line reason in err: PLAN_EUNSUPPORTED for a transport
 * failure (a peer gone, a timeout, NCCL's error), PLAN_EUSAGE for
 * arguments that do not match between ranks (a size, a group). Nothing
 * waits forever: a peer that stops answering is an error after the
 * backend's timeout. */
#ifndef LIBPLAN_RUNNERS_COMM_H
#define LIBPLAN_RUNNERS_COMM_H

#include <stddef.h>
#include <stdint.h>

/* The most processes of one distributed verification. */
#define PLAN_COMM_MAX_WORLD 256

typedef struct plan_comm plan_comm;

/* One message of an exchange: `bytes` bytes to or from global rank
 * `peer` (never this rank). */
typedef struct plan_comm_msg {
  int peer;
  void *buf;
  int64_t bytes;
} plan_comm_msg;

typedef struct plan_comm_ops {
  /* Point to point: posts every send and every receive of the call at
   * once and returns when all are done, whatever their order (no
   * deadlock when two ranks send each other large messages). Between two
   * ranks, the k-th send of A to B in a call matches the k-th receive B
   * posts from A in its call; a size that differs is an error (PLAN_EUSAGE
   * on the receiving side), never a hang or an overrun. */
  int (*exchange)(plan_comm *c, const plan_comm_msg *sends, int nsends,
                  const plan_comm_msg *recvs, int nrecvs, char *err,
                  size_t errsz);
  /* All-reduce of the n doubles of buf, in place, over the group
   * members[0..nmembers): global ranks in the group's order, this rank
   * among them. Every member calls it with the same list and n; the
   * groups of one verifier step partition the world, so a backend may
   * make a communicator for a group (collectively) the first time it
   * meets it. reduce: plan_reduce (sum, avg, max, min). The mpi backend
   * folds in member order, ((x0 + x1) + x2) + ..., avg that sum / n, the
   * bits of the single-process verifier; NCCL reduces in its own (pinned)
   * order: the same values in exact mode, within tolerance in float. */
  int (*all_reduce)(plan_comm *c, const int *members, int nmembers, double *buf,
                    int64_t n, int reduce, char *err, size_t errsz);
  /* One line: the backend, rank and world, its transport settings. */
  void (*describe)(const plan_comm *c, char *buf, size_t size);
  /* Frees the communicator (NULL-safe through plan_comm_close). */
  void (*close)(plan_comm *c);
  /* Frees it after a failure of this process, without waiting for the
   * others (NCCL's ncclCommAbort: a clean close may wait in NCCL for
   * peers that are still in a collective); the peers then see this
   * process gone. NULL: close does that already. */
  void (*abort)(plan_comm *c);
} plan_comm_ops;

/* Every backend's communicator starts with this header. */
struct plan_comm {
  const plan_comm_ops *ops;
  int rank, world;
};

/* The MPI backend: this process's rank of MPI_COMM_WORLD, MPI
 * initialized when it is not yet (and finalized at exit, unless a run
 * failed). PLAN_EUSAGE when no MPI launcher started the process
 * (plan_comm_under_mpi). The plugin libplan-comm-mpi.so is dlopen'ed on the
 * first call: PLAN_COMM_MPI_PLUGIN when set, else beside the library, beside
 * the executable or in PREFIX/lib. Every wait is bounded by timeout_s; a peer
 * that stops answering fails the call with the ranks waited for.
 * PLAN_EUNSUPPORTED when the plugin is missing or MPI fails. */
int plan_comm_mpi_open(plan_comm **out, double timeout_s, char *err,
                       size_t errsz);

/* Whether an MPI launcher started this process (mpirun, srun):
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or PMI_RANK set. */
int plan_comm_under_mpi(void);

/* The plugin's entry point: plan_comm_mpi_plugin_open(abi, out, timeout_s,
 * err, errsz), abi PLAN_COMM_MPI_ABI (this header's plan_comm layout). */
#define PLAN_COMM_MPI_ENTRY "plan_comm_mpi_plugin_open"
#define PLAN_COMM_MPI_ABI 1
typedef int (*plan_comm_mpi_entry_fn)(int abi, plan_comm **out,
                                      double timeout_s, char *err,
                                      size_t errsz);

/* An all-reduce on exchange alone: the group's buffers gathered at every
 * member, then folded in member order (the mpi backend's all_reduce, and
 * any backend's when it has no group communicator). */
int plan_comm_fold_all_reduce(plan_comm *c, const int *members, int nmembers,
                              double *buf, int64_t n, int reduce, char *err,
                              size_t errsz);

static inline void plan_comm_close(plan_comm *c) {
  if (c)
    c->ops->close(c);
}

/* After a failure: abort when the backend has it, else close. */
static inline void plan_comm_abort(plan_comm *c) {
  if (c)
    (c->ops->abort ? c->ops->abort : c->ops->close)(c);
}

#endif
