/* The CUDA plugin's communicator for distributed verification
 * (runners/comm.h) on NCCL: the vtable's comm_open (runners/runner.h).
 * docs/gpu.md, "The NCCL communicator". */
#ifndef LIBPLAN_RUNNERS_CUDA_COMM_NCCL_H
#define LIBPLAN_RUNNERS_CUDA_COMM_NCCL_H

#include <stddef.h>

/* comm.h has no C++ guard of its own: its functions (the library's
 * plan_comm_fold_all_reduce) are C. Include this header before anything
 * that includes comm.h (runner.h) in C++. */
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
 * protocol (collectives.h). Rank 0 makes the unique id and publishes it
 * as `<rendezvous>/nccl-id` (the folder made when missing; written
 * atomically); the other ranks wait for that file up to timeout_s
 * seconds; rank 0 removes it once every rank has joined. world 1 needs no
 * rendezvous. The rendezvous folder must be fresh for each run (an id
 * file left from another run would be read as this one's).
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
 * in the split without a communicator. The reduction runs on the device
 * (ncclFloat64; ncclSum, ncclMax, ncclMin; avg is the sum divided by the
 * group's size on the host, as the fold does: NCCL's ncclAvg scales each
 * value by 1 / n before summing, which rounds where sum / n does not).
 * With an NCCL older than 2.18 (no ncclCommSplit) the groups are reduced
 * by plan_comm_fold_all_reduce over exchange, in member order.
 *
 * A collective that is not done within timeout_s seconds, or that NCCL
 * reports failed, aborts every communicator of this process (later calls
 * fail at once). Returns 0 or PLAN_EUSAGE (arguments), PLAN_ENOMEM, or
 * PLAN_EUNSUPPORTED with the reason: NCCL not loadable (dlerror's text),
 * a missing NCCL function, NCCL's or CUDA's error ("ncclAllReduce:
 * <ncclGetErrorString>"), the id file not appearing. Close with
 * plan_comm_close. */
int plan_cuda_comm_open(plan_comm **out, int rank, int world,
                        const char *rendezvous, double timeout_s, char *err,
                        size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
