/* The CUDA runner's collectives (docs/gpu.md), in two families:
 *
 *  - virtual ranks (collectives_virtual.cu): every rank of a group lives on
 *    ONE GPU (NCCL refuses two ranks on one device), each with its own
 *    device buffer; plain kernels combine them in a fixed order, member
 *    0, 1, 2, ..., so a reduction gives the bits of the host loop the
 *    verifier runs for the CPU runner (verifier/verify.c run_all_reduce):
 *    sum ((x0 + x1) + x2) + ..., avg that sum / n, max/min folded left
 *    with a > b ? a : b and a < b ? a : b.
 *  - NCCL (collectives_nccl.cu): one rank per GPU, communicators made by
 *    one process for all its GPUs (ncclCommInitAll) or by one process per
 *    rank (RANK, WORLD_SIZE, LOCAL_RANK from the launcher; the unique id
 *    passed through a file that rank 0 writes atomically).
 *
 * Layouts follow NCCL's: all_gather concatenates the members' `count`
 * elements in rank order; reduce_scatter gives rank r the reduction of
 * elements [r * count, (r + 1) * count); all_to_all sends chunk j of rank
 * i's send buffer to chunk i of rank j's receive buffer.
 *
 * Every function returns 0 or a libplan status (PLAN_EUNSUPPORTED for a
 * CUDA/NCCL failure, PLAN_EUSAGE for bad arguments) with a one-line reason
 * in err. Element types: PLAN_F64 and PLAN_F32. */
#ifndef LIBPLAN_RUNNERS_CUDA_COLLECTIVES_H
#define LIBPLAN_RUNNERS_CUDA_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "runner_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most ranks of one virtual group, and of NCCL ranks in one process. */
#define PLAN_CUDA_MAX_GROUP 64

/* ---- virtual ranks: device buffers on the current device, one stream ---- */

/* reduce: plan_reduce (sum, avg, max, min). buf[r] (count elements) holds
 * rank r's input and takes the result (every member the same bits). */
int plan_cuda_virtual_all_reduce(void *const *buf, int n, int64_t count,
                                 plan_dtype dt, int reduce, void *stream,
                                 char *err, size_t errsz);
/* out[r] (n * count) = in[0] | in[1] | ... | in[n-1] (count each). */
int plan_cuda_virtual_all_gather(const void *const *in, void *const *out, int n,
                                 int64_t count, plan_dtype dt, void *stream,
                                 char *err, size_t errsz);
/* out[r][i] = reduce over m of in[m][r * count + i], in member order. */
int plan_cuda_virtual_reduce_scatter(const void *const *in, void *const *out,
                                     int n, int64_t count, plan_dtype dt,
                                     int reduce, void *stream, char *err,
                                     size_t errsz);
/* out[r][m * count + i] = in[m][r * count + i]. */
int plan_cuda_virtual_all_to_all(const void *const *in, void *const *out, int n,
                                 int64_t count, plan_dtype dt, void *stream,
                                 char *err, size_t errsz);
/* Rank `dst` receives rank `src`'s count elements: out = in. */
int plan_cuda_virtual_send_recv(const void *in, void *out, int64_t count,
                                plan_dtype dt, void *stream, char *err,
                                size_t errsz);

/* The runner vtable's all_reduce (runners/runner.h) on host blocks of
 * doubles: uploaded, reduced by plan_cuda_virtual_all_reduce, the result
 * downloaded into blocks[0]. */
int plan_cuda_host_all_reduce(double *const *blocks, int nmembers, int64_t n,
                              int reduce, char *err, size_t errsz);

/* ---- NCCL ---------------------------------------------------------------- */

/* The settings that make NCCL's reductions repeat bit for bit: NCCL_ALGO
 * Ring, NCCL_PROTO Simple, NCCL_NVLS_ENABLE 0, each set only when the user
 * has not; a line saying which values are in force ("NCCL_ALGO=Ring
 * NCCL_PROTO=LL (user's) ...": a value the user set to something else is
 * marked) is written into desc. Call before any NCCL communicator is made
 * (nccl_setup.cu; it calls neither NCCL nor CUDA). */
void plan_cuda_nccl_determinism(char *desc, size_t size);

/* NCCL's unique id (`n` bytes) passed from rank 0 to the other ranks
 * through a file on a file system every rank sees (nccl_setup.cu): rank 0
 * publishes it, making the folder that holds `path` when missing, and
 * writing atomically (a temporary file beside it, fsync, rename), so a
 * reader never sees part of it; the others wait for it, polling, up to
 * timeout_s seconds. Both return 0 or PLAN_EUNSUPPORTED with the reason
 * (the file and what went wrong). Neither calls NCCL. */
int plan_cuda_nccl_id_publish(const char *path, const void *id, size_t n,
                              char *err, size_t errsz);
int plan_cuda_nccl_id_wait(const char *path, double timeout_s, void *id,
                           size_t n, char *err, size_t errsz);

typedef struct plan_cuda_comms plan_cuda_comms;

/* Mode (a): one process drives `ndev` local GPUs (0 .. ndev-1; ndev <= 0:
 * every visible GPU) with ncclCommInitAll. */
int plan_cuda_comms_init_local(plan_cuda_comms **out, int ndev, char *err,
                               size_t errsz);
/* Mode (b): one process per rank. RANK, WORLD_SIZE and LOCAL_RANK come
 * from the environment (torchrun and mpirun's wrappers set them; OpenMPI's
 * OMPI_COMM_WORLD_* are read when they are absent); the device is
 * LOCAL_RANK. Rank 0 makes the unique id and writes it to id_file
 * atomically (a temporary file, fsync, rename); the other ranks wait for
 * the file up to timeout_s seconds. id_file must be on a file system every
 * rank sees and must not exist before the run (rank 0 removes it once
 * every rank has joined). */
int plan_cuda_comms_init_env(plan_cuda_comms **out, const char *id_file,
                             double timeout_s, char *err, size_t errsz);
void plan_cuda_comms_free(plan_cuda_comms *c);

/* The process's share: how many local ranks, the world size, the global
 * rank and the device of local rank i, and a one-line description (mode,
 * ranks, NCCL version and the determinism settings). */
int plan_cuda_comms_local(const plan_cuda_comms *c);
int plan_cuda_comms_world(const plan_cuda_comms *c);
int plan_cuda_comms_rank(const plan_cuda_comms *c, int i);
int plan_cuda_comms_device(const plan_cuda_comms *c, int i);
const char *plan_cuda_comms_describe(const plan_cuda_comms *c);

/* Collectives over every rank of the world; send[i] / recv[i] are device
 * buffers of local rank i (on its device); one group call for all local
 * ranks; returns when they are done (the streams synchronised). */
int plan_cuda_nccl_all_reduce(plan_cuda_comms *c, const void *const *send,
                              void *const *recv, int64_t count, plan_dtype dt,
                              int reduce, char *err, size_t errsz);
int plan_cuda_nccl_all_gather(plan_cuda_comms *c, const void *const *send,
                              void *const *recv, int64_t count, plan_dtype dt,
                              char *err, size_t errsz);
int plan_cuda_nccl_reduce_scatter(plan_cuda_comms *c, const void *const *send,
                                  void *const *recv, int64_t count,
                                  plan_dtype dt, int reduce, char *err,
                                  size_t errsz);
int plan_cuda_nccl_all_to_all(plan_cuda_comms *c, const void *const *send,
                              void *const *recv, int64_t count, plan_dtype dt,
                              char *err, size_t errsz);
/* A ring shift: every rank sends `count` elements to rank + shift and
 * receives from rank - shift (mod the world size): send/recv pairs. */
int plan_cuda_nccl_shift(plan_cuda_comms *c, const void *const *send,
                         void *const *recv, int64_t count, plan_dtype dt,
                         int shift, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
