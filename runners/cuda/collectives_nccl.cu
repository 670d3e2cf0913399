/* NCCL communicators and collectives (collectives.h): mode (a), one
 * process driving its local GPUs, and mode (b), one process per rank with
 * the unique id passed through a file (nccl_setup.cu, shared with the
 * plugin's communicator). */
#include "collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libplan/common.h"

struct plan_cuda_comms {
  int nlocal, world;
  int rank[PLAN_CUDA_MAX_GROUP], device[PLAN_CUDA_MAX_GROUP];
  ncclComm_t comm[PLAN_CUDA_MAX_GROUP];
  cudaStream_t stream[PLAN_CUDA_MAX_GROUP];
  char id_file[1024]; /* mode (b), rank 0: removed once everyone joined */
  char desc[512];
};

namespace {

int fail(char *err, size_t errsz, const char *fmt, const char *a,
         const char *b) {
  if (err && errsz)
    snprintf(err, errsz, fmt, a, b);
  return PLAN_EUNSUPPORTED;
}

int nccl_fail(char *err, size_t errsz, const char *what, ncclResult_t r) {
  return fail(err, errsz, "%s: %s", what, ncclGetErrorString(r));
}

int cuda_fail(char *err, size_t errsz, const char *what, cudaError_t e) {
  return fail(err, errsz, "%s: %s", what, cudaGetErrorString(e));
}

bool nccl_type(plan_dtype dt, ncclDataType_t *t) {
  if (dt == PLAN_F64)
    *t = ncclFloat64;
  else if (dt == PLAN_F32)
    *t = ncclFloat32;
  else
    return false;
  return true;
}

bool nccl_op(int reduce, ncclRedOp_t *op) {
  switch (reduce) {
  case 0:
    *op = ncclSum;
    return true;
  case 1:
    *op = ncclAvg;
    return true;
  case 2:
    *op = ncclMax;
    return true;
  case 3:
    *op = ncclMin;
    return true;
  default:
    return false;
  }
}

size_t elem_size(plan_dtype dt) { return dt == PLAN_F64 ? 8 : 4; }

/* Reads an integer from the first of two environment variables set. */
bool env_int(const char *a, const char *b, int *out) {
  const char *v = getenv(a);
  if (!v || !v[0])
    v = b ? getenv(b) : NULL;
  if (!v || !v[0])
    return false;
  char *e;
  long x = strtol(v, &e, 10);
  if (*e || x < 0 || x > 1 << 20)
    return false;
  *out = (int)x;
  return true;
}

int sync_all(plan_cuda_comms *c, const char *what, char *err, size_t errsz) {
  for (int i = 0; i < c->nlocal; i++) {
    cudaSetDevice(c->device[i]);
    cudaError_t e = cudaStreamSynchronize(c->stream[i]);
    if (e != cudaSuccess)
      return cuda_fail(err, errsz, what, e);
  }
  return 0;
}

int make_streams(plan_cuda_comms *c, char *err, size_t errsz) {
  for (int i = 0; i < c->nlocal; i++) {
    cudaError_t e = cudaSetDevice(c->device[i]);
    if (e == cudaSuccess)
      e = cudaStreamCreateWithFlags(&c->stream[i], cudaStreamNonBlocking);
    if (e != cudaSuccess)
      return cuda_fail(err, errsz, "cudaStreamCreate", e);
  }
  return 0;
}

void describe(plan_cuda_comms *c, const char *mode) {
  int v = 0;
  ncclGetVersion(&v);
  char det[256];
  plan_cuda_nccl_determinism(det, sizeof det);
  snprintf(c->desc, sizeof c->desc,
           "NCCL %d.%d.%d, %s, %d of %d ranks in this process, %s", v / 10000,
           (v / 100) % 100, v % 100, mode, c->nlocal, c->world, det);
}

} // namespace

extern "C" int plan_cuda_comms_init_local(plan_cuda_comms **out, int ndev,
                                          char *err, size_t errsz) {
  *out = NULL;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return cuda_fail(err, errsz, "cudaGetDeviceCount", e);
  if (ndev <= 0)
    ndev = count;
  if (ndev > count || ndev > PLAN_CUDA_MAX_GROUP) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%d", ndev);
    snprintf(b, sizeof b, "%d", count);
    return fail(err, errsz, "%s GPUs asked for, %s visible", a, b);
  }
  plan_cuda_comms *c = (plan_cuda_comms *)calloc(1, sizeof *c);
  if (!c)
    return fail(err, errsz, "%s%s", "out of memory", "");
  c->nlocal = c->world = ndev;
  for (int i = 0; i < ndev; i++)
    c->rank[i] = c->device[i] = i;
  describe(c, "one process, ncclCommInitAll"); /* before NCCL starts */
  ncclResult_t r = ncclCommInitAll(c->comm, ndev, c->device);
  if (r != ncclSuccess) {
    free(c);
    return nccl_fail(err, errsz, "ncclCommInitAll", r);
  }
  int rc = make_streams(c, err, errsz);
  if (rc) {
    plan_cuda_comms_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

extern "C" int plan_cuda_comms_init_env(plan_cuda_comms **out,
                                        const char *id_file, double timeout_s,
                                        char *err, size_t errsz) {
  *out = NULL;
  int rank, world, local;
  if (!env_int("RANK", "OMPI_COMM_WORLD_RANK", &rank) ||
      !env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", &world) ||
      !env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", &local))
    return fail(err, errsz, "%s%s",
                "RANK, WORLD_SIZE and LOCAL_RANK must be set (torchrun and "
                "mpirun set them) to non-negative integers",
                "");
  if (rank >= world)
    return fail(err, errsz, "%s%s", "RANK must be below WORLD_SIZE", "");
  if (!id_file || !id_file[0] || strlen(id_file) >= 1024)
    return fail(err, errsz, "%s%s", "no NCCL id file given", "");
  plan_cuda_comms *c = (plan_cuda_comms *)calloc(1, sizeof *c);
  if (!c)
    return fail(err, errsz, "%s%s", "out of memory", "");
  c->nlocal = 1;
  c->world = world;
  c->rank[0] = rank;
  c->device[0] = local;
  describe(c, "one process per rank, ncclCommInitRank");
  /* the id first: a rank that cannot use its device must not leave the
   * others waiting for a file that never comes */
  ncclUniqueId id;
  int rc = 0;
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    rc = r != ncclSuccess
             ? nccl_fail(err, errsz, "ncclGetUniqueId", r)
             : plan_cuda_nccl_id_publish(id_file, &id, sizeof id, err, errsz);
    if (!rc)
      snprintf(c->id_file, sizeof c->id_file, "%s", id_file);
  } else {
    rc = plan_cuda_nccl_id_wait(id_file, timeout_s, &id, sizeof id, err,
                                errsz);
  }
  if (rc) {
    free(c);
    return rc;
  }
  cudaError_t e = cudaSetDevice(local);
  if (e != cudaSuccess) {
    if (c->id_file[0])
      unlink(c->id_file);
    free(c);
    return cuda_fail(err, errsz, "cudaSetDevice(LOCAL_RANK)", e);
  }
  ncclResult_t r = ncclCommInitRank(&c->comm[0], world, id, rank);
  if (r != ncclSuccess) {
    if (c->id_file[0])
      unlink(c->id_file);
    free(c);
    return nccl_fail(err, errsz, "ncclCommInitRank", r);
  }
  if (c->id_file[0]) /* every rank has joined: the id is spent */
    unlink(c->id_file);
  if ((rc = make_streams(c, err, errsz))) {
    plan_cuda_comms_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

extern "C" void plan_cuda_comms_free(plan_cuda_comms *c) {
  if (!c)
    return;
  /* communicators driven from one thread are finalized together (one
   * group), then destroyed: finalizing them one by one can wait forever */
  ncclGroupStart();
  for (int i = 0; i < c->nlocal; i++)
    if (c->comm[i])
      ncclCommFinalize(c->comm[i]);
  ncclGroupEnd();
  for (int i = 0; i < c->nlocal; i++) {
    if (c->comm[i])
      ncclCommDestroy(c->comm[i]);
    if (c->stream[i]) {
      cudaSetDevice(c->device[i]);
      cudaStreamDestroy(c->stream[i]);
    }
  }
  free(c);
}

extern "C" int plan_cuda_comms_local(const plan_cuda_comms *c) {
  return c->nlocal;
}
extern "C" int plan_cuda_comms_world(const plan_cuda_comms *c) {
  return c->world;
}
extern "C" int plan_cuda_comms_rank(const plan_cuda_comms *c, int i) {
  return c->rank[i];
}
extern "C" int plan_cuda_comms_device(const plan_cuda_comms *c, int i) {
  return c->device[i];
}
extern "C" const char *plan_cuda_comms_describe(const plan_cuda_comms *c) {
  return c->desc;
}

namespace {

/* The shared frame of a collective: argument checks, one group over the
 * local ranks, a wait for the streams. `call` issues rank i's part. */
template <typename F>
int group(plan_cuda_comms *c, plan_dtype dt, int reduce, const char *what,
          char *err, size_t errsz, F call) {
  ncclDataType_t t;
  ncclRedOp_t op = ncclSum;
  if (!nccl_type(dt, &t))
    return fail(err, errsz, "%s: %s", what, "element types are f64 and f32");
  if (reduce >= 0 && !nccl_op(reduce, &op))
    return fail(err, errsz, "%s: %s", what, "unknown reduction");
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; r == ncclSuccess && i < c->nlocal; i++) {
    cudaSetDevice(c->device[i]);
    r = call(i, t, op);
  }
  ncclResult_t r2 = ncclGroupEnd();
  if (r == ncclSuccess)
    r = r2;
  if (r != ncclSuccess)
    return nccl_fail(err, errsz, what, r);
  return sync_all(c, what, err, errsz);
}

} // namespace

extern "C" int plan_cuda_nccl_all_reduce(plan_cuda_comms *c,
                                         const void *const *send,
                                         void *const *recv, int64_t count,
                                         plan_dtype dt, int reduce, char *err,
                                         size_t errsz) {
  return group(c, dt, reduce, "ncclAllReduce", err, errsz,
               [&](int i, ncclDataType_t t, ncclRedOp_t op) {
                 return ncclAllReduce(send[i], recv[i], (size_t)count, t, op,
                                      c->comm[i], c->stream[i]);
               });
}

extern "C" int plan_cuda_nccl_all_gather(plan_cuda_comms *c,
                                         const void *const *send,
                                         void *const *recv, int64_t count,
                                         plan_dtype dt, char *err,
                                         size_t errsz) {
  return group(c, dt, -1, "ncclAllGather", err, errsz,
               [&](int i, ncclDataType_t t, ncclRedOp_t) {
                 return ncclAllGather(send[i], recv[i], (size_t)count, t,
                                      c->comm[i], c->stream[i]);
               });
}

extern "C" int plan_cuda_nccl_reduce_scatter(plan_cuda_comms *c,
                                             const void *const *send,
                                             void *const *recv, int64_t count,
                                             plan_dtype dt, int reduce,
                                             char *err, size_t errsz) {
  return group(c, dt, reduce, "ncclReduceScatter", err, errsz,
               [&](int i, ncclDataType_t t, ncclRedOp_t op) {
                 return ncclReduceScatter(send[i], recv[i], (size_t)count, t,
                                          op, c->comm[i], c->stream[i]);
               });
}

extern "C" int plan_cuda_nccl_all_to_all(plan_cuda_comms *c,
                                         const void *const *send,
                                         void *const *recv, int64_t count,
                                         plan_dtype dt, char *err,
                                         size_t errsz) {
  size_t chunk = (size_t)count * elem_size(dt);
  return group(c, dt, -1, "all_to_all (ncclSend/ncclRecv)", err, errsz,
               [&](int i, ncclDataType_t t, ncclRedOp_t) {
                 ncclResult_t r = ncclSuccess;
                 for (int p = 0; r == ncclSuccess && p < c->world; p++) {
                   r = ncclSend((const char *)send[i] + chunk * (size_t)p,
                                (size_t)count, t, p, c->comm[i],
                                c->stream[i]);
                   if (r == ncclSuccess)
                     r = ncclRecv((char *)recv[i] + chunk * (size_t)p,
                                  (size_t)count, t, p, c->comm[i],
                                  c->stream[i]);
                 }
                 return r;
               });
}

extern "C" int plan_cuda_nccl_shift(plan_cuda_comms *c,
                                    const void *const *send,
                                    void *const *recv, int64_t count,
                                    plan_dtype dt, int shift, char *err,
                                    size_t errsz) {
  return group(c, dt, -1, "ncclSend/ncclRecv", err, errsz,
               [&](int i, ncclDataType_t t, ncclRedOp_t) {
                 int w = c->world, r0 = c->rank[i];
                 int to = ((r0 + shift) % w + w) % w;
                 int from = ((r0 - shift) % w + w) % w;
                 ncclResult_t r = ncclSend(send[i], (size_t)count, t, to,
                                           c->comm[i], c->stream[i]);
                 if (r == ncclSuccess)
                   r = ncclRecv(recv[i], (size_t)count, t, from, c->comm[i],
                                c->stream[i]);
                 return r;
               });
}
