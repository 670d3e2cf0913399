/* The plugin's NCCL communicator (comm_nccl.h, runners/comm.h).
 *
 * NCCL is reached only through function pointers resolved with dlsym at
 * open and kept in the communicator: the plugin does not link NCCL, so a
 * machine with CUDA and cuBLAS but no NCCL still loads it, and nothing
 * about NCCL lives outside a communicator. The ranks meet over the
 * library's MPI communicator (comm.h), bounded by the timeout, before
 * each NCCL call that waits for every rank (comm_nccl.h).
 *
 * Built with nvcc, this is real NCCL on the device; built with a plain
 * C++ compiler (collectives_emu.h, nccl_emu.h), device buffers are host
 * buffers and the library loaded is whatever PLAN_NCCL_LIBRARY names:
 * tests/cuda/fake_nccl.c in the test. */
#include "comm_nccl.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <nccl.h>
#else
#include "collectives_emu.h"
#include "nccl_emu.h"
#endif

#include "collectives.h"
#include "libplan/common.h"
#include "base/util.h" /* plan_errc */

namespace {

/* The NCCL functions used, resolved from the loaded library. */
struct nccl_api {
  void *lib;
  ncclResult_t (*get_version)(int *);
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  /* NULL before NCCL 2.14: communicators made blocking */
  ncclResult_t (*comm_init_rank_config)(ncclComm_t *, int, ncclUniqueId, int,
                                        ncclConfig_t *);
  /* NULL before NCCL 2.18: all-reduces fold over exchange */
  ncclResult_t (*comm_split)(ncclComm_t, int, int, ncclComm_t *,
                             ncclConfig_t *);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t,
                             ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*comm_finalize)(ncclComm_t); /* optional (NCCL 2.14) */
  ncclResult_t (*comm_destroy)(ncclComm_t);
  ncclResult_t (*comm_abort)(ncclComm_t);
  const char *(*get_error_string)(ncclResult_t);
};

/* The communicator of one all-reduce group, keyed by its member list. */
struct group_comm {
  int n;
  int *members;
  ncclComm_t comm; /* NULL: this rank alone in its group */
};

struct comm_nccl {
  plan_comm base; /* first: every backend's header (comm.h) */
  nccl_api api;
  ncclComm_t world_comm;
  cudaStream_t stream;
  int device, version;
  double timeout_s;
  /* made non-blocking (ncclCommInitRankConfig found): NCCL's calls may
   * return ncclInProgress, the communicators polled until done */
  bool nonblocking;
  bool aborted; /* a collective failed or timed out: every comm aborted */
  /* under MPI, the library's MPI communicator: the ranks meet over it
   * before every NCCL call that waits for all of them; NULL otherwise */
  plan_comm *host;
  /* not under MPI (torchrun): NCCL's id passed in the file id_path that
   * rank 0 writes; no meeting before the splits */
  bool by_file;
  char id_path[4096];
  uint32_t meetings; /* meetings so far, the same count on every rank */
  group_comm *groups;
  int ngroups, cap_groups;
  void *dbuf; /* the device staging buffer, grown to the largest call */
  size_t dcap;
  char device_name[256];
  char det[200];
  char met[320]; /* how the ranks met (world > 1) */
};

int nccl_fail(const comm_nccl *c, char *err, size_t errsz, const char *what,
              ncclResult_t r) {
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "%s: %s", what,
                   c->api.get_error_string(r));
}

int cuda_fail(char *err, size_t errsz, const char *what, cudaError_t e) {
  return plan_errc(e == cudaErrorMemoryAllocation ? PLAN_ENOMEM
                                                  : PLAN_EUNSUPPORTED,
                   err, errsz, "%s: %s", what, cudaGetErrorString(e));
}

template <typename F> bool resolve(void *lib, const char *name, F *out) {
  void *p = dlsym(lib, name);
  *out = reinterpret_cast<F>(p);
  return p != NULL;
}

/* Loads NCCL and resolves what the communicator calls. */
int load(nccl_api *a, char *err, size_t errsz) {
  const char *name = getenv("PLAN_NCCL_LIBRARY");
  if (!name || !name[0])
    name = "libnccl.so.2";
  /* NODELETE: NCCL leaves threads running (the bootstrap root that
   * ncclGetUniqueId starts, proxies) that outlive its communicators, so
   * its code must stay mapped after the last dlclose */
  a->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!a->lib) {
    const char *why = dlerror();
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "cannot load NCCL (PLAN_NCCL_LIBRARY, else libnccl.so.2 "
                     "on the loader's path): %s",
                     why ? why : name);
  }
  const char *missing = NULL;
#define PLAN_NCCL_NEED(field, sym)                                             \
  if (!missing && !resolve(a->lib, #sym, &a->field))                           \
  missing = #sym
  PLAN_NCCL_NEED(get_version, ncclGetVersion);
  PLAN_NCCL_NEED(get_unique_id, ncclGetUniqueId);
  PLAN_NCCL_NEED(comm_init_rank, ncclCommInitRank);
  PLAN_NCCL_NEED(all_reduce, ncclAllReduce);
  PLAN_NCCL_NEED(send, ncclSend);
  PLAN_NCCL_NEED(recv, ncclRecv);
  PLAN_NCCL_NEED(group_start, ncclGroupStart);
  PLAN_NCCL_NEED(group_end, ncclGroupEnd);
  PLAN_NCCL_NEED(comm_get_async_error, ncclCommGetAsyncError);
  PLAN_NCCL_NEED(comm_destroy, ncclCommDestroy);
  PLAN_NCCL_NEED(comm_abort, ncclCommAbort);
  PLAN_NCCL_NEED(get_error_string, ncclGetErrorString);
#undef PLAN_NCCL_NEED
  if (missing) {
    dlclose(a->lib);
    a->lib = NULL;
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "the NCCL library %s has no %s (NCCL 2.10 or newer is "
                     "needed)",
                     name, missing);
  }
  resolve(a->lib, "ncclCommSplit", &a->comm_split);
  resolve(a->lib, "ncclCommFinalize", &a->comm_finalize);
  resolve(a->lib, "ncclCommInitRankConfig", &a->comm_init_rank_config);
  return 0;
}

comm_nccl *self(plan_comm *pc) {
  return reinterpret_cast<comm_nccl *>(pc);
}
const comm_nccl *self(const plan_comm *pc) {
  return reinterpret_cast<const comm_nccl *>(pc);
}

double seconds_since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) +
         1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

/* After a failure the communicators' state is unknown: abort them all
 * (ncclCommAbort does not wait for peers), so close cannot hang either,
 * and close the MPI communicator, so a peer meeting this rank sees it
 * gone at once. */
void abort_all(comm_nccl *c) {
  for (int i = 0; i < c->ngroups; i++)
    if (c->groups[i].comm) {
      c->api.comm_abort(c->groups[i].comm);
      c->groups[i].comm = NULL;
    }
  if (c->world_comm) {
    c->api.comm_abort(c->world_comm);
    c->world_comm = NULL;
  }
  plan_comm_close(c->host);
  c->host = NULL;
  c->aborted = true;
}

/* A failure of this process in a collective (CUDA's, a buffer): its peers
 * may be in the NCCL call already, waiting for this rank; aborted, they
 * see it gone instead of waiting out their timeout. */
int local_fail(comm_nccl *c, int rc) {
  abort_all(c);
  return rc;
}

int check_live(const comm_nccl *c, char *err, size_t errsz) {
  if (!c->aborted)
    return 0;
  return plan_errc(
      PLAN_EUNSUPPORTED, err, errsz,
      "the NCCL communicator was aborted after an earlier failure");
}

/* A call's result that is not a failure: ncclSuccess, or on a
 * non-blocking communicator ncclInProgress (the call runs on in NCCL,
 * polled with ncclCommGetAsyncError). */
bool posted(const comm_nccl *c, ncclResult_t r) {
  return r == ncclSuccess || (c->nonblocking && r == ncclInProgress);
}

/* NCCL's state of `comm`: ncclSuccess, ncclInProgress, or its error. */
ncclResult_t async_state(const comm_nccl *c, ncclComm_t comm) {
  ncclResult_t ar = ncclSuccess;
  ncclResult_t r = c->api.comm_get_async_error(comm, &ar);
  return r != ncclSuccess ? r : ar;
}

/* After a call that makes communicators (ncclCommInitRankConfig,
 * ncclCommSplit, ncclCommFinalize) on a non-blocking communicator: polls
 * comms[0..n) (NULL ones skipped) until none is in progress, from t0 up
 * to the timeout. 0 when all are done; else NCCL's error, or the
 * timeout (a rank that never made its call: NCCL would wait for it
 * forever), with the reason; the caller aborts. */
int settle(const comm_nccl *c, const ncclComm_t *comms, int n,
           const struct timespec *t0, const char *what, char *err,
           size_t errsz) {
  if (!c->nonblocking)
    return 0;
  for (long spins = 0;; spins++) {
    bool busy = false;
    for (int i = 0; i < n; i++) {
      if (!comms[i])
        continue;
      ncclResult_t r = async_state(c, comms[i]);
      if (r == ncclInProgress)
        busy = true;
      else if (r != ncclSuccess)
        return nccl_fail(c, err, errsz, what, r);
    }
    if (!busy)
      return 0;
    if (seconds_since(t0) > c->timeout_s)
      return plan_errc(
          PLAN_EUNSUPPORTED, err, errsz,
          "%s: no answer from every rank within %g s (a rank gone "
          "after the ranks met?); the NCCL communicator is aborted",
          what, c->timeout_s);
    if (spins > 100)
      usleep(200);
  }
}

/* Waits for the work queued on the stream, up to the timeout, watching
 * NCCL's asynchronous errors on `comm` (a peer gone shows there); on a
 * non-blocking communicator, first until NCCL no longer reports the call
 * in progress (it may not have queued all of it yet). */
int wait_done(comm_nccl *c, ncclComm_t comm, const char *what, char *err,
              size_t errsz) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long spins = 0;; spins++) {
    ncclResult_t r = async_state(c, comm);
    if (r != ncclSuccess && r != ncclInProgress) {
      int rc = nccl_fail(c, err, errsz, what, r);
      abort_all(c);
      return rc;
    }
    if (r == ncclSuccess) {
      cudaError_t e = cudaStreamQuery(c->stream);
      if (e == cudaSuccess)
        return 0;
      if (e != cudaErrorNotReady) {
        abort_all(c);
        return cuda_fail(err, errsz, what, e);
      }
    }
    if (seconds_since(&t0) > c->timeout_s) {
      abort_all(c);
      return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "%s: not done within %g s (a rank gone or stuck?); the "
                       "NCCL communicator is aborted",
                       what, c->timeout_s);
    }
    if (spins > 1000)
      usleep(100);
  }
}

/* The staging buffer holds at least `bytes`. */
int stage(comm_nccl *c, size_t bytes, char *err, size_t errsz) {
  if (bytes <= c->dcap)
    return 0;
  if (c->dbuf)
    cudaFree(c->dbuf);
  c->dbuf = NULL;
  c->dcap = 0;
  cudaError_t e = cudaMalloc(&c->dbuf, bytes);
  if (e != cudaSuccess) {
    c->dbuf = NULL;
    return cuda_fail(err, errsz, "cudaMalloc (the communicator's buffer)", e);
  }
  c->dcap = bytes;
  return 0;
}

const size_t align = 256;

size_t padded(int64_t bytes) {
  return ((size_t)bytes + align - 1) / align * align;
}

int check_msgs(const comm_nccl *c, const char *kind, const plan_comm_msg *m,
               int n, size_t *total, char *err, size_t errsz) {
  if (n < 0 || (n && !m))
    return plan_errc(PLAN_EUSAGE, err, errsz, "exchange: %d %ss", n, kind);
  for (int i = 0; i < n; i++) {
    if (m[i].peer < 0 || m[i].peer >= c->base.world ||
        m[i].peer == c->base.rank)
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "exchange: %s %d names peer %d (rank %d of %d)", kind, i,
                       m[i].peer, c->base.rank, c->base.world);
    if (m[i].bytes < 0 || (m[i].bytes && !m[i].buf))
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "exchange: %s %d has %lld bytes at %p", kind, i,
                       (long long)m[i].bytes, m[i].buf);
    if ((uint64_t)m[i].bytes > (uint64_t)(SIZE_MAX / 2) - *total)
      return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: %s",
                       "the messages' sizes overflow");
    *total += padded(m[i].bytes);
  }
  return 0;
}

int exchange(plan_comm *pc, const plan_comm_msg *sends, int nsends,
             const plan_comm_msg *recvs, int nrecvs, char *err, size_t errsz) {
  comm_nccl *c = self(pc);
  size_t total = 0;
  int rc = check_msgs(c, "send", sends, nsends, &total, err, errsz);
  if (!rc)
    rc = check_msgs(c, "receive", recvs, nrecvs, &total, err, errsz);
  if (!rc)
    rc = check_live(c, err, errsz);
  if (rc || total == 0)
    return rc;
  cudaError_t e = cudaSetDevice(c->device);
  if (e != cudaSuccess)
    return local_fail(c, cuda_fail(err, errsz, "exchange: cudaSetDevice", e));
  if ((rc = stage(c, total, err, errsz)))
    return local_fail(c, rc);
  char *d = (char *)c->dbuf;
  size_t off = 0;
  for (int i = 0; i < nsends; i++) {
    e = cudaMemcpyAsync(d + off, sends[i].buf, (size_t)sends[i].bytes,
                        cudaMemcpyHostToDevice, c->stream);
    if (e != cudaSuccess)
      return local_fail(c,
                        cuda_fail(err, errsz, "exchange: cudaMemcpyAsync", e));
    off += padded(sends[i].bytes);
  }
  /* every send and receive in one group: NCCL posts them together, so two
   * ranks sending each other large messages do not wait on each other */
  const char *what = "ncclGroupStart";
  ncclResult_t r = c->api.group_start();
  if (!posted(c, r))
    return local_fail(c, nccl_fail(c, err, errsz, what, r));
  r = ncclSuccess;
  off = 0;
  for (int i = 0; i < nsends; i++) {
    if (posted(c, r) && sends[i].bytes) {
      what = "ncclSend";
      r = c->api.send(d + off, (size_t)sends[i].bytes, ncclUint8, sends[i].peer,
                      c->world_comm, c->stream);
    }
    off += padded(sends[i].bytes);
  }
  size_t recv0 = off;
  for (int i = 0; i < nrecvs; i++) {
    if (posted(c, r) && recvs[i].bytes) {
      what = "ncclRecv";
      r = c->api.recv(d + off, (size_t)recvs[i].bytes, ncclUint8, recvs[i].peer,
                      c->world_comm, c->stream);
    }
    off += padded(recvs[i].bytes);
  }
  ncclResult_t r2 = c->api.group_end();
  if (posted(c, r) && !posted(c, r2)) {
    r = r2;
    what = "ncclGroupEnd";
  }
  if (!posted(c, r)) {
    rc = nccl_fail(c, err, errsz, what, r);
    abort_all(c); /* some of the group may have been posted */
    return rc;
  }
  if ((rc = wait_done(c, c->world_comm, "exchange (ncclSend/ncclRecv)", err,
                      errsz)))
    return rc;
  off = recv0;
  for (int i = 0; i < nrecvs; i++) {
    e = cudaMemcpyAsync(recvs[i].buf, d + off, (size_t)recvs[i].bytes,
                        cudaMemcpyDeviceToHost, c->stream);
    if (e != cudaSuccess)
      return local_fail(c,
                        cuda_fail(err, errsz, "exchange: cudaMemcpyAsync", e));
    off += padded(recvs[i].bytes);
  }
  e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess)
    return local_fail(c, cuda_fail(err, errsz, "exchange: download", e));
  return 0;
}

/* What each rank tells every other over the MPI communicator before an
 * NCCL call that returns only once every rank has made it
 * (ncclCommInitRank, ncclCommSplit): that it is a rank of this NCCL
 * communicator at the same meeting, and ready, or why not. Rank 0's
 * carries NCCL's unique id at open. */
struct meet_msg {
  uint32_t magic, meeting;
  int32_t world, status;
  char reason[256];
  ncclUniqueId id;
};

const uint32_t meet_magic = 0x504c4e49u; /* "PLNI" */

/* Not under MPI: rank 0 writes NCCL's id into the shared folder (mode
 * 0600, a temporary file renamed), the others wait for it up to the
 * timeout. */
int meet_by_file(comm_nccl *c, ncclUniqueId *id, char *err, size_t errsz) {
  if (c->base.rank == 0)
    return plan_cuda_nccl_id_publish(c->id_path, id, sizeof *id, err, errsz);
  return plan_cuda_nccl_id_wait(c->id_path, c->timeout_s, id, sizeof *id, err,
                                errsz);
}

/* Every rank meets every other over the MPI communicator (an all-to-all
 * of meet_msg, bounded by its timeout): 0 when all are there and ready,
 * so that none enters the NCCL call `what` for a rank that never comes.
 * `local`: this rank's own failure before it (0: ready), `why` the
 * reason; `id`: rank 0's to send, filled on the others. Else this rank's
 * failure, the first other rank's, or the meeting's (a rank gone, a
 * process that is not one of this communicator's ranks). */
int meet(comm_nccl *c, const char *what, int local, const char *why,
         ncclUniqueId *id, char *err, size_t errsz) {
  int world = c->base.world, me = c->base.rank;
  uint32_t meeting = c->meetings++;
  if (local && (world == 1 || !c->host))
    return plan_errc(local, err, errsz, "%s", why);
  if (world == 1)
    return 0;
  if (c->by_file) /* the id through a file, no meeting before a split */
    return id ? meet_by_file(c, id, err, errsz) : 0;
  if (!c->host)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "%s: the NCCL communicator was aborted after an earlier "
                     "failure",
                     what);
  meet_msg *all = (meet_msg *)calloc((size_t)world, sizeof *all);
  plan_comm_msg *m =
      (plan_comm_msg *)calloc(2 * (size_t)world, sizeof(plan_comm_msg));
  if (!all || !m) {
    free(all);
    free(m);
    return local ? plan_errc(local, err, errsz, "%s", why)
                 : plan_errc(PLAN_ENOMEM, err, errsz, "%s: %s", what,
                             "out of memory");
  }
  meet_msg *mine = &all[me];
  mine->magic = meet_magic;
  mine->meeting = meeting;
  mine->world = world;
  mine->status = local;
  snprintf(mine->reason, sizeof mine->reason, "%s", local ? why : "");
  if (me == 0 && id)
    mine->id = *id;
  int n = 0;
  for (int p = 0; p < world; p++)
    if (p != me) {
      m[n] = plan_comm_msg{p, mine, (int64_t)sizeof *mine};
      m[world + n] = plan_comm_msg{p, &all[p], (int64_t)sizeof *all};
      n++;
    }
  char terr[512] = "";
  int rc =
      c->host->ops->exchange(c->host, m, n, m + world, n, terr, sizeof terr);
  if (local)
    rc = plan_errc(local, err, errsz, "%s", why);
  else if (rc)
    rc = plan_errc(rc, err, errsz,
                   "%s: the ranks' meeting over mpi before it failed: %s", what,
                   terr);
  for (int p = 0; p < world && !rc; p++) {
    const meet_msg *q = &all[p];
    if (p == me)
      continue;
    if (q->magic != meet_magic || q->meeting != meeting || q->world != world)
      rc = plan_errc(PLAN_EUSAGE, err, errsz,
                     "%s: rank %d is not at the same step of an NCCL "
                     "communicator of %d ranks (another communicator's "
                     "process, or another run's?)",
                     what, p, world);
    else if (q->status)
      rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz, "%s: rank %d failed: %.*s",
                     what, p, (int)sizeof q->reason - 1, q->reason);
  }
  if (!rc && me != 0 && id)
    *id = all[0].id;
  free(all);
  free(m);
  return rc;
}

/* The group's communicator: the cached one, or a new one split from the
 * world (collectively: every rank of the world misses at the same step,
 * comm.h's contract, so every rank calls ncclCommSplit). The ranks meet
 * over MPI first: ncclCommSplit waits for every rank, so none enters it
 * when one failed before, and none after an abort. */
int group_for(comm_nccl *c, const int *members, int n, int pos,
              group_comm **out, char *err, size_t errsz) {
  for (int i = 0; i < c->ngroups; i++)
    if (c->groups[i].n == n &&
        !memcmp(c->groups[i].members, members, (size_t)n * sizeof *members)) {
      *out = &c->groups[i];
      return 0;
    }
  if (int rc = check_live(c, err, errsz))
    return rc;
  int local = 0;
  const char *why = "";
  if (c->ngroups == c->cap_groups) {
    int cap = c->cap_groups ? 2 * c->cap_groups : 8;
    group_comm *g =
        (group_comm *)realloc(c->groups, (size_t)cap * sizeof *c->groups);
    if (g) {
      c->groups = g;
      c->cap_groups = cap;
    } else {
      local = PLAN_ENOMEM;
    }
  }
  int *copy = local ? NULL : (int *)malloc((size_t)n * sizeof *copy);
  if (!copy) {
    local = PLAN_ENOMEM;
    why = "ncclCommSplit: out of memory";
  } else {
    memcpy(copy, members, (size_t)n * sizeof *copy);
  }
  if (int rc = meet(c, "ncclCommSplit", local, why, NULL, err, errsz)) {
    free(copy);
    return local_fail(c, rc);
  }
  /* non-blocking like the world: the split returns ncclInProgress, then
   * the new communicator (and the world, which carries a split without
   * one) is polled, so a rank that never splits is an error after the
   * timeout instead of a hang */
  ncclComm_t sub = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r =
      c->api.comm_split(c->world_comm, n == 1 ? NCCL_SPLIT_NOCOLOR : members[0],
                        pos, &sub, c->nonblocking ? &config : NULL);
  int rc = 0;
  if (!posted(c, r)) {
    rc = nccl_fail(c, err, errsz, "ncclCommSplit", r);
  } else {
    ncclComm_t both[2] = {sub, c->world_comm};
    rc = settle(c, both, 2, &t0, "ncclCommSplit", err, errsz);
  }
  if (!rc && n > 1 && !sub)
    rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                   "ncclCommSplit: no communicator for the group of rank %d",
                   members[0]);
  if (rc) {
    if (sub)
      c->api.comm_abort(sub);
    free(copy);
    return local_fail(c, rc);
  }
  group_comm *g = &c->groups[c->ngroups++];
  g->n = n;
  g->members = copy;
  g->comm = sub;
  *out = g;
  return 0;
}

int all_reduce(plan_comm *pc, const int *members, int nmembers, double *buf,
               int64_t n, int reduce, char *err, size_t errsz) {
  comm_nccl *c = self(pc);
  /* avg is a sum divided on the host: NCCL's ncclAvg of floating types
   * multiplies each value by 1 / n first, which rounds where the fold's
   * sum / n (comm.h) does not, in exact mode too */
  static const ncclRedOp_t ops[4] = {ncclSum, ncclSum, ncclMax, ncclMin};
  if (nmembers < 1 || nmembers > c->base.world || !members)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: %d members in a world of %d", nmembers,
                     c->base.world);
  if (reduce < 0 || reduce > 3 || n < 0 || (n && !buf) ||
      (uint64_t)n > SIZE_MAX / 2 / sizeof *buf)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: reduce %d over %lld values", reduce,
                     (long long)n);
  unsigned char seen[PLAN_COMM_MAX_WORLD] = {0};
  int pos = -1;
  for (int i = 0; i < nmembers; i++) {
    int m = members[i];
    if (m < 0 || m >= c->base.world || seen[m])
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "all_reduce: member %d is rank %d (a world of %d, each "
                       "rank once)",
                       i, m, c->base.world);
    seen[m] = 1;
    if (m == c->base.rank)
      pos = i;
  }
  if (pos < 0)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: rank %d is not in the group", c->base.rank);
  if (int rc = check_live(c, err, errsz))
    return rc;
  if (!c->api.comm_split)
    return plan_comm_fold_all_reduce(pc, members, nmembers, buf, n, reduce, err,
                                     errsz);
  cudaError_t e = cudaSetDevice(c->device);
  if (e != cudaSuccess)
    return local_fail(c, cuda_fail(err, errsz, "all_reduce: cudaSetDevice", e));
  group_comm *g = NULL;
  if (int rc = group_for(c, members, nmembers, pos, &g, err, errsz))
    return rc;
  if (nmembers == 1 || n == 0)
    return 0;
  size_t bytes = (size_t)n * sizeof *buf;
  if (int rc = stage(c, bytes, err, errsz))
    return local_fail(c, rc);
  e = cudaMemcpyAsync(c->dbuf, buf, bytes, cudaMemcpyHostToDevice, c->stream);
  if (e != cudaSuccess)
    return local_fail(c,
                      cuda_fail(err, errsz, "all_reduce: cudaMemcpyAsync", e));
  ncclResult_t r = c->api.all_reduce(c->dbuf, c->dbuf, (size_t)n, ncclFloat64,
                                     ops[reduce], g->comm, c->stream);
  if (!posted(c, r)) {
    int rc = nccl_fail(c, err, errsz, "ncclAllReduce", r);
    abort_all(c);
    return rc;
  }
  if (int rc = wait_done(c, g->comm, "ncclAllReduce", err, errsz))
    return rc;
  e = cudaMemcpyAsync(buf, c->dbuf, bytes, cudaMemcpyDeviceToHost, c->stream);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess)
    return local_fail(c, cuda_fail(err, errsz, "all_reduce: download", e));
  if (reduce == 1) /* PLAN_RED_AVG */
    for (int64_t i = 0; i < n; i++)
      buf[i] /= nmembers;
  return 0;
}

void describe(const plan_comm *pc, char *buf, size_t size) {
  const comm_nccl *c = self(pc);
  if (!size)
    return;
  int v = c->version;
  /* NCCL_VERSION: X * 1000 + Y * 100 + Z up to 2.8, X * 10000 + Y * 100 +
   * Z from 2.9 */
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  snprintf(buf, size,
           "nccl %d.%d.%d, rank %d of %d, device %d (%s), %s%s%s%s%s", major,
           minor, v % 100, c->base.rank, c->base.world, c->device,
           c->device_name, c->det, c->met[0] ? "; ranks met " : "", c->met, "",
           c->api.comm_split ? ""
                             : "; no ncclCommSplit (NCCL before 2.18): "
                               "all-reduces folded over send/recv in "
                               "member order");
}

/* Frees everything; finalizes first unless the communicators were
 * aborted. Each process finalizes its communicators in one group (one by
 * one, a finalize can wait on a peer's next one). */
void destroy(comm_nccl *c) {
  nccl_api *a = &c->api;
  if (a->lib && !c->aborted && a->comm_finalize) {
    a->group_start();
    for (int i = 0; i < c->ngroups; i++)
      if (c->groups[i].comm)
        a->comm_finalize(c->groups[i].comm);
    if (c->world_comm)
      a->comm_finalize(c->world_comm);
    a->group_end();
    /* non-blocking, the finalizes run on: each communicator polled, up to
     * the timeout in all, and aborted when not done (a peer gone) */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char why[256];
    for (int i = 0; i < c->ngroups; i++)
      if (c->groups[i].comm && settle(c, &c->groups[i].comm, 1, &t0,
                                      "ncclCommFinalize", why, sizeof why)) {
        a->comm_abort(c->groups[i].comm);
        c->groups[i].comm = NULL;
      }
    if (c->world_comm && settle(c, &c->world_comm, 1, &t0, "ncclCommFinalize",
                                why, sizeof why)) {
      a->comm_abort(c->world_comm);
      c->world_comm = NULL;
    }
  }
  for (int i = 0; i < c->ngroups; i++) {
    if (c->groups[i].comm)
      a->comm_destroy(c->groups[i].comm);
    free(c->groups[i].members);
  }
  free(c->groups);
  if (c->world_comm)
    a->comm_destroy(c->world_comm);
  plan_comm_close(c->host);
  if (c->dbuf)
    cudaFree(c->dbuf);
  if (c->stream)
    cudaStreamDestroy(c->stream);
  if (a->lib)
    dlclose(a->lib);
  free(c);
}

void close_comm(plan_comm *pc) {
  comm_nccl *c = self(pc);
  cudaSetDevice(c->device);
  destroy(c);
}

/* comm.h's abort, after a failure of this process: every NCCL
 * communicator aborted (no finalize, which waits for the peers), the MPI
 * communicator closed (a peer meeting this rank sees it gone), the
 * buffers freed; NCCL stays mapped (load). */
void abort_comm(plan_comm *pc) {
  comm_nccl *c = self(pc);
  cudaSetDevice(c->device);
  abort_all(c);
  destroy(c);
}

const plan_comm_ops nccl_ops = {exchange, all_reduce, describe, close_comm,
                                abort_comm};

/* How the ranks meet: over MPI (rank 0 sending NCCL's id), or through
 * the id file in the shared folder (torchrun). Under MPI, MPI's rank and
 * world must be the ones asked for. */
int open_host(comm_nccl *c, int rank, int world, const char *rendezvous,
              char *err, size_t errsz) {
  if (world == 1)
    return 0;
  if (!plan_comm_under_mpi()) {
    if (!rendezvous || !rendezvous[0])
      return plan_errc(PLAN_EUSAGE, err, errsz, "comm_open: %s",
                       "not under MPI: a world of several ranks needs a "
                       "shared folder for NCCL's id (--distributed=DIR)");
    int n = snprintf(c->id_path, sizeof c->id_path, "%s/nccl-id", rendezvous);
    if (n < 0 || (size_t)n >= sizeof c->id_path)
      return plan_errc(PLAN_EUSAGE, err, errsz, "comm_open: %s",
                       "the folder's path is too long");
    c->by_file = true;
    int w = snprintf(c->met, sizeof c->met, "through the id file %.290s",
                     c->id_path);
    (void)w; /* a long path's end cut from the description */
    return 0;
  }
  int rc = plan_comm_mpi_open(&c->host, c->timeout_s, err, errsz);
  if (rc) {
    c->host = NULL;
    return rc;
  }
  if (c->host->rank != rank || c->host->world != world)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "comm_open: rank %d of %d asked for, MPI's rank %d of %d",
                     rank, world, c->host->rank, c->host->world);
  char line[sizeof c->met];
  c->host->ops->describe(c->host, line, sizeof line);
  int w = snprintf(c->met, sizeof c->met, "over %.300s", line);
  (void)w;
  return 0;
}

/* What this rank does alone before the ranks meet: NCCL loaded, the
 * determinism settings, the device and its stream, and on rank 0 the
 * unique id. */
int prepare(comm_nccl *c, ncclUniqueId *id, char *err, size_t errsz) {
  int rc = load(&c->api, err, errsz);
  if (rc)
    return rc;
  /* before NCCL reads its environment, in the first communicator */
  plan_cuda_nccl_determinism(c->det, sizeof c->det);
  ncclResult_t r = c->api.get_version(&c->version);
  if (r != ncclSuccess)
    return nccl_fail(c, err, errsz, "ncclGetVersion", r);
  cudaDeviceProp p;
  cudaError_t e = cudaGetDevice(&c->device);
  if (e == cudaSuccess)
    e = cudaGetDeviceProperties(&p, c->device);
  if (e != cudaSuccess)
    return cuda_fail(err, errsz, "cudaGetDevice", e);
  snprintf(c->device_name, sizeof c->device_name, "%s", p.name);
  e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    c->stream = NULL;
    return cuda_fail(err, errsz, "cudaStreamCreate", e);
  }
  if (c->base.rank == 0) {
    r = c->api.get_unique_id(id);
    if (r != ncclSuccess)
      return nccl_fail(c, err, errsz, "ncclGetUniqueId", r);
  }
  return 0;
}

} // namespace

extern "C" int plan_cuda_comm_open(plan_comm **out, int rank, int world,
                                   const char *rendezvous, double timeout_s,
                                   char *err, size_t errsz) {
  if (!out)
    return plan_errc(PLAN_EUSAGE, err, errsz, "comm_open: %s", "NULL out");
  *out = NULL;
  if (world < 1 || world > PLAN_COMM_MAX_WORLD || rank < 0 || rank >= world)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "comm_open: rank %d of %d (a world of 1 to %d)", rank,
                     world, PLAN_COMM_MAX_WORLD);
  if (!(timeout_s > 0) || isinf(timeout_s))
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "comm_open: a timeout of %g s (a positive number needed)",
                     timeout_s);
  comm_nccl *c = (comm_nccl *)calloc(1, sizeof *c);
  if (!c)
    return plan_errc(PLAN_ENOMEM, err, errsz, "comm_open: %s", "out of memory");
  c->base.ops = &nccl_ops;
  c->base.rank = rank;
  c->base.world = world;
  c->timeout_s = timeout_s;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  char why[512] = "";
  int local = prepare(c, &id, why, sizeof why);
  /* ncclCommInitRank returns only once every rank has called it: under
   * MPI the ranks meet over it first, bounded by the timeout, so that
   * none enters it for a rank that failed or never came (a rank that
   * failed alone still comes, to tell the others why); otherwise the id
   * goes through the folder and the non-blocking init bounds the wait. */
  char terr[512] = "";
  int rc = open_host(c, rank, world, rendezvous, terr, sizeof terr);
  if (rc)
    rc = local ? plan_errc(local, err, errsz, "%s", why)
               : plan_errc(rc, err, errsz, "%s", terr);
  else
    rc = meet(c, "ncclCommInitRank", local, why, &id, err, errsz);
  if (!rc) {
    /* non-blocking where NCCL can (2.14): the call returns at once and
     * the communicator is polled up to the timeout, so a rank that dies
     * after the meeting, before its own call, fails the others with the
     * reason instead of leaving them in NCCL */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    c->nonblocking = c->api.comm_init_rank_config != NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t r =
        c->nonblocking ? c->api.comm_init_rank_config(&c->world_comm, world, id,
                                                      rank, &config)
                       : c->api.comm_init_rank(&c->world_comm, world, id, rank);
    if (!posted(c, r)) {
      if (c->world_comm)
        c->api.comm_abort(c->world_comm);
      c->world_comm = NULL;
      rc = nccl_fail(c, err, errsz, "ncclCommInitRank", r);
    } else if ((rc = settle(c, &c->world_comm, 1, &t0, "ncclCommInitRank", err,
                            errsz))) {
      abort_all(c);
    } else if (c->by_file && rank == 0) {
      unlink(c->id_path); /* every rank has read it: the init is done */
    }
  }
  if (rc) {
    destroy(c);
    return rc;
  }
  *out = &c->base;
  return 0;
}
