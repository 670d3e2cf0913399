/* The CUDA plugin's communicator for distributed verification
 * (runners/comm.h) on NCCL: the vtable's comm_open (runners/runner.h).
 * docs/gpu.md, "The NCCL communicator". */
#ifndef LIBPLAN_RUNNERS_CUDA_COMM_NCCL_H
#define LIBPLAN_RUNNERS_CUDA_COMM_NCCL_H

#include <stddef.h>

/* comm.h has no C++ guard of its own: its functions (the library's
 * plan_comm_mpi_open, plan_comm_fold_all_reduce) are C. Include this header
 * before anything that includes comm.h (runner.h) in C++. */
#ifdef __cplusplus
extern "C" {
#endif

#include "comm.h"

/* Opens this process's NCCL communicator: rank `rank` of `world`, on the
 * current CUDA device (the plugin's comm_open selects the rank's device
 * first: PLAN_CUDA_DEVICE, else LOCAL_RANK) with one stream of its own.
 *
 * NCCL is loaded here, with dlopen, not linked: the file named by
 * PLAN_NCCL_LIBRARY when it is set, else "libnccl.so.2" as the dynamic
 * loader finds it; the library stays loaded until close. Before the first
 * communicator, plan_cuda_nccl_determinism pins NCCL's algorithm and
 * protocol (collectives.h).
 *
 * The ranks meet before entering NCCL, whose ncclCommInitRank returns
 * only once every rank has called it: each rank first does what it does
 * alone (NCCL loaded, the device and its stream; on rank 0 the unique
 * id). Under MPI (plan_comm_under_mpi) it then opens the library's MPI
 * communicator (plan_comm_mpi_open) with the same timeout, MPI's rank and
 * world the ones asked for. Over it every rank tells every other that it is
 * ready or why it failed, rank 0 sending the unique id; only when all are ready
 * do they call ncclCommInitRank. So a rank that fails before (no NCCL, no
 * device), never comes, or runs another communicator fails every rank
 * within the timeout with the reason, and none waits in NCCL for it.
 * Where NCCL has ncclCommInitRankConfig (2.14), the communicators are
 * non-blocking (a config with blocking 0, for the world and each split):
 * every call that returns ncclInProgress is followed by polling
 * ncclCommGetAsyncError up to the timeout, so a process that dies
 * between the meeting and its own init or split fails the others with
 * "ncclCommInitRank: no answer from every rank within N s" (or
 * ncclCommSplit's), aborted; with an older NCCL it still leaves them in
 * NCCL's blocking call. The
 * MPI communicator stays open with the NCCL one (closed at close or
 * abort). Not under MPI (torchrun), rank 0 writes the id into
 * `rendezvous`/nccl-id (mode 0600, renamed into place) and removes it once
 * the init is done; the others wait for it up to the timeout; there is no
 * meeting before the splits (the non-blocking calls bound the waits).
 * world 1 needs no rendezvous.
 *
 * exchange: each message staged in one device buffer, every send and
 * receive posted in one NCCL group (bytes as ncclUint8), then the
 * receives downloaded. NCCL cannot tell a receive whose size differs
 * from its send: the verifier never makes one (every rank computes both
 * sides' sizes from the same lowered program).
 *
 * all_reduce: a communicator per group, made with ncclCommSplit over the
 * world (color: the group's first member; key: the rank's position in
 * the group, so the group's ranks are numbered in its order) the first
 * time the group is seen, then kept; a rank alone in its group takes part
 * in the split without a communicator. Every rank meets every other over
 * MPI (when under it) before the split, as before ncclCommInitRank, and never
 * splits after an abort. The reduction runs on the device (ncclFloat64;
 * ncclSum, ncclMax, ncclMin; avg is the sum divided by the group's size on the
 * host, as the fold does: NCCL's ncclAvg scales each value by 1 / n before
 * summing, which rounds where sum / n does not). With an NCCL older than 2.18
 * (no ncclCommSplit) the groups are reduced by plan_comm_fold_all_reduce over
 * exchange, in member order.
 *
 * A collective that is not done within timeout_s seconds, that NCCL
 * reports failed, or that fails in this process (a CUDA call, the staging
 * buffer) aborts every communicator of this process, the MPI one closed
 * (later calls fail at once; peers waiting for this rank see it gone
 * where NCCL or the MPI communicator tells them, else at their timeout). The
 * abort op (comm.h) does the same after a failure outside the communicator:
 * ncclCommAbort on the world and every split, no finalize, then everything
 * freed. Returns 0 or PLAN_EUSAGE (arguments, or a process at the rendezvous
 * that is not one of this communicator's ranks), PLAN_ENOMEM, or
 * PLAN_EUNSUPPORTED with the reason: NCCL not loadable (dlerror's text), a
 * missing NCCL function, NCCL's or CUDA's error ("ncclAllReduce:
 * <ncclGetErrorString>"), the rendezvous's timeout, another rank's failure
 * ("ncclCommInitRank: rank 1 failed: ..."). Close with plan_comm_close, or
 * plan_comm_abort after a failure. */
int plan_cuda_comm_open(plan_comm **out, int rank, int world,
                        const char *rendezvous, double timeout_s, char *err,
                        size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
