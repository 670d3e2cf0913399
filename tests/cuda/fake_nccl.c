/* A host stand-in for libnccl.so.2, for the test of the CUDA plugin's
 * communicator built for the host (tests/cuda/test_comm_nccl.c): the NCCL
 * functions comm_nccl.cu calls (runners/cuda/nccl_emu.h), for several
 * processes on one machine, loaded through PLAN_NCCL_LIBRARY. "Device"
 * buffers are host buffers (the emulation's).
 *
 * Transport: files. ncclGetUniqueId makes a fresh folder (mkdtemp) and
 * puts its path in the id; a message from rank s to rank d of a
 * communicator is the file "<folder>/<tag>.<s>.<d>.<k>" (k counts the
 * messages from s to d), written under another name and renamed, so a
 * receiver never reads part of one; the receiver waits for it, reads it
 * and removes it. Every communicator has a tag of its own: the world's is
 * "w"; a split's is its parent's, the split's number in the parent and
 * its color, the same on every member because every rank splits in the
 * same order.
 *
 * ncclCommInitRank and ncclCommFinalize wait for every rank (a barrier).
 * When a process lets go of its world communicator (ncclCommDestroy,
 * ncclCommAbort) it leaves "<folder>/gone.<rank>": a rank waiting for a
 * message from it fails at once (ncclRemoteError), as NCCL's peers see an
 * aborted rank's connections close; the last one to go removes the
 * folder.
 * ncclCommSplit gathers every rank's color and key and makes the
 * sub-communicator of its color, ranks ordered by key (then parent rank),
 * remembering the members' world ranks; ncclAllReduce (ncclFloat64)
 * gathers the members' buffers and folds them in rank order (ncclAvg as
 * NCCL's: each value times 1 / n, then summed); ncclSend and
 * ncclRecv between ncclGroupStart and ncclGroupEnd are queued and run at
 * ncclGroupEnd, every send first, so no order of posting deadlocks.
 * Unlike NCCL, a receive whose size differs from its send is an error
 * (ncclInvalidUsage).
 *
 * Non-blocking communicators (ncclCommInitRankConfig, or a split, with
 * a config whose `blocking` is 0): ncclCommInitRankConfig posts this
 * rank's token to every other and returns ncclInProgress; each
 * ncclCommGetAsyncError then takes the tokens that have come, and says
 * ncclInProgress until every rank's is there (for ever when a rank never
 * calls it, as NCCL; ncclRemoteError once a rank is gone). Every other
 * call on a non-blocking communicator (ncclCommSplit, ncclAllReduce,
 * ncclGroupEnd, ncclCommFinalize) does its work, then returns
 * ncclInProgress and has ncclCommGetAsyncError say so three times more
 * before the result, so that the caller must poll.
 *
 * ncclGetUniqueId starts a thread that never ends, as NCCL's does.
 * fake_nccl_calls(name) counts this process's calls of ncclCommSplit,
 * ncclCommFinalize, ncclCommAbort, ncclCommInitRank,
 * ncclCommInitRankConfig and ncclCommGetAsyncError (the test checks
 * which ran).
 *
 * Built with -DFAKE_NCCL_NO_SPLIT it has neither ncclCommSplit nor
 * ncclCommInitRankConfig (an NCCL before 2.14: blocking communicators,
 * groups folded over send/recv). FAKE_NCCL_FAIL=<function name> makes
 * that function fail with ncclSystemError; FAKE_NCCL_EXIT=<function name>
 * makes the process exit (status 0) as it enters that function, a
 * process gone between the ranks' meeting and its call. A wait longer
 * than FAKE_NCCL_TIMEOUT seconds (default 30) fails with
 * ncclRemoteError. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nccl_emu.h"

#define FAKE_MAX_RANKS 256
#define FAKE_MAX_QUEUE 1024

struct ncclComm {
  char dir[NCCL_UNIQUE_ID_BYTES];
  char tag[96];
  int rank, nranks;
  int world_rank[FAKE_MAX_RANKS]; /* the members' ranks in the world */
  int nsplits;
  unsigned long sent[FAKE_MAX_RANKS], received[FAKE_MAX_RANKS];
  int nonblocking;
  int polls;          /* ncclInProgress answers left */
  ncclResult_t async; /* then the last call's result */
  /* a gather under way (a non-blocking init's tokens, a split's colors
   * and keys): one message of gather_bytes from every other rank */
  int joining, gather_bytes;
  char joined[FAKE_MAX_RANKS];
  int gathered[FAKE_MAX_RANKS][2];
  /* a split under way: its number and color, and its communicator (NULL
   * for NCCL_SPLIT_NOCOLOR), whose `parent` is this one until done */
  int splitting, split_index, split_color;
  struct ncclComm *split_child, *parent;
};

/* The queue of one thread's group (NCCL's group state is per thread). */
typedef struct fake_op {
  int is_send;
  void *buf;
  size_t bytes;
  int peer;
  ncclComm_t comm;
} fake_op;
static _Thread_local int group_depth;
static _Thread_local int nqueued;
static _Thread_local fake_op queued[FAKE_MAX_QUEUE];

static int fails(const char *fn) {
  const char *f = getenv("FAKE_NCCL_FAIL");
  const char *x = getenv("FAKE_NCCL_EXIT");
  if (x && !strcmp(x, fn))
    _exit(0);
  return f && !strcmp(f, fn);
}

/* A call on a non-blocking communicator: its result `r` comes through
 * ncclCommGetAsyncError after a few polls; the call says ncclInProgress. */
static ncclResult_t defer(ncclComm_t c, ncclResult_t r) {
  if (!c || !c->nonblocking)
    return r;
  c->async = r;
  c->polls = 3;
  return ncclInProgress;
}

static double timeout_s(void) {
  const char *v = getenv("FAKE_NCCL_TIMEOUT");
  return v && v[0] ? atof(v) : 30.0;
}

static size_t type_size(ncclDataType_t t) {
  switch ((int)t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

static ncclResult_t post(ncclComm_t c, int dst, const void *buf, size_t bytes) {
  char path[512], tmp[520];
  snprintf(path, sizeof path, "%s/%s.%d.%d.%lu", c->dir, c->tag, c->rank, dst,
           c->sent[dst]++);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return ncclSystemError;
  int ok = fwrite(buf, 1, bytes, f) == bytes;
  ok = !fclose(f) && ok;
  if (!ok || rename(tmp, path)) {
    unlink(tmp);
    return ncclSystemError;
  }
  return ncclSuccess;
}

/* The marker of a world rank that has let go of the world. */
static void gone_path(char *path, size_t size, const char *dir, int rank) {
  snprintf(path, size, "%s/gone.%d", dir, rank);
}

static int is_gone(const char *dir, int rank) {
  char path[512];
  struct stat st;
  gone_path(path, sizeof path, dir, rank);
  return stat(path, &st) == 0;
}

static ncclResult_t take(ncclComm_t c, int src, void *buf, size_t bytes) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.%d.%d.%lu", c->dir, c->tag, src, c->rank,
           c->received[src]++);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double limit = timeout_s();
  FILE *f;
  while (!(f = fopen(path, "rb"))) {
    /* gone, and the message not left before it went (looked for again) */
    if (is_gone(c->dir, c->world_rank[src]) && !(f = fopen(path, "rb"))) {
      fprintf(stderr, "fake nccl: rank %d is gone: no message %s\n",
              c->world_rank[src], path);
      return ncclRemoteError;
    }
    if (f)
      break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) +
            1e-9 * (double)(now.tv_nsec - t0.tv_nsec) >
        limit) {
      fprintf(stderr, "fake nccl: no message %s\n", path);
      return ncclRemoteError;
    }
    struct timespec pause = {0, 200 * 1000};
    nanosleep(&pause, NULL);
  }
  size_t got = fread(buf, 1, bytes, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  unlink(path);
  return got == bytes && !extra ? ncclSuccess : ncclInvalidUsage;
}

/* Whether the next message from src has come. */
static int has_come(ncclComm_t c, int src) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s.%d.%d.%lu", c->dir, c->tag, src, c->rank,
           c->received[src]);
  return stat(path, &st) == 0;
}

/* A split's gather done: its communicator's members, those of its
 * color by key then parent rank (insertion sort). */
static void finish_split(ncclComm_t comm) {
  ncclComm_t c = comm->split_child;
  int color = comm->split_color;
  comm->splitting = 0;
  comm->split_child = NULL;
  defer(comm, ncclSuccess);
  if (!c)
    return;
  int order[FAKE_MAX_RANKS], n = 0;
  for (int p = 0; p < comm->nranks; p++) {
    if (comm->gathered[p][0] != color)
      continue;
    int i = n++;
    while (i > 0 && comm->gathered[order[i - 1]][1] > comm->gathered[p][1]) {
      order[i] = order[i - 1];
      i--;
    }
    order[i] = p;
  }
  c->nranks = n;
  for (int i = 0; i < n; i++) {
    c->world_rank[i] = comm->world_rank[order[i]];
    if (order[i] == comm->rank)
      c->rank = i;
  }
  c->parent = NULL;
  defer(c, ncclSuccess);
}

/* Takes what has come of a gather; ncclInProgress until every rank's
 * message is there, ncclRemoteError once a rank that has not sent it is
 * gone. */
static ncclResult_t gather_progress(ncclComm_t comm) {
  if (!comm->joining)
    return ncclSuccess;
  int all = 1;
  for (int p = 0; p < comm->nranks; p++) {
    if (comm->joined[p])
      continue;
    /* gone, and its message not left before it went (looked for again
     * after the marker: it may have come, and the rank gone, since) */
    ncclResult_t r = ncclSuccess;
    if (has_come(comm, p))
      r = take(comm, p, comm->gathered[p], (size_t)comm->gather_bytes);
    else if (is_gone(comm->dir, comm->world_rank[p]) && !has_come(comm, p))
      r = ncclRemoteError;
    else
      r = ncclInProgress;
    comm->joined[p] = r == ncclSuccess;
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclComm_t child = comm->split_child;
      comm->joining = comm->splitting = 0;
      comm->split_child = NULL;
      comm->async = r;
      comm->polls = 0;
      if (child) {
        child->parent = NULL;
        child->async = r;
        child->polls = 0;
      }
      return r;
    }
    all = all && comm->joined[p];
  }
  if (!all)
    return ncclInProgress;
  comm->joining = 0;
  if (comm->splitting)
    finish_split(comm);
  return ncclSuccess;
}

/* Starts a gather: this rank's message posted to every other. */
static ncclResult_t gather_start(ncclComm_t comm, const void *mine, int bytes) {
  ncclResult_t r = ncclSuccess;
  for (int p = 0; r == ncclSuccess && p < comm->nranks; p++)
    if (p != comm->rank)
      r = post(comm, p, mine, (size_t)bytes);
  memset(comm->joined, 0, sizeof comm->joined);
  comm->joined[comm->rank] = 1;
  memcpy(comm->gathered[comm->rank], mine, (size_t)bytes);
  comm->gather_bytes = bytes;
  comm->joining = r == ncclSuccess;
  return r;
}

/* Every rank of comm has reached it. */
static ncclResult_t barrier(ncclComm_t comm) {
  char token = 1;
  ncclResult_t r = ncclSuccess;
  for (int p = 0; r == ncclSuccess && p < comm->nranks; p++)
    if (p != comm->rank)
      r = post(comm, p, &token, 1);
  for (int p = 0; r == ncclSuccess && p < comm->nranks; p++)
    if (p != comm->rank)
      r = take(comm, p, &token, 1);
  return r;
}

ncclResult_t ncclGetVersion(int *version) {
  *version = 21805; /* 2.18.5 */
  return ncclSuccess;
}

/* NCCL's bootstrap root: a thread ncclGetUniqueId starts, which outlives
 * the communicators. Here it only wakes every millisecond, so a library
 * unmapped under it (a dlclose that unloads NCCL) crashes at once. */
static void *bootstrap_root(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec pause = {0, 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (fails("ncclGetUniqueId"))
    return ncclSystemError;
  pthread_t root;
  if (pthread_create(&root, NULL, bootstrap_root, NULL) || pthread_detach(root))
    return ncclSystemError;
  const char *t = getenv("TMPDIR");
  memset(id, 0, sizeof *id);
  int n = snprintf(id->internal, sizeof id->internal, "%s/fake-nccl.XXXXXX",
                   t && t[0] ? t : "/tmp");
  if (n < 0 || (size_t)n >= sizeof id->internal || !mkdtemp(id->internal))
    return ncclSystemError;
  return ncclSuccess;
}

/* How many times this process called ncclCommSplit (the test checks that
 * a group's communicator is made once), ncclCommFinalize, ncclCommAbort,
 * ncclCommInitRank, ncclCommInitRankConfig and ncclCommGetAsyncError;
 * -1 for another name. */
static int nsplit_calls, nfinalize_calls, nabort_calls, ninit_calls,
    ninit_config_calls, nasync_calls;
int fake_nccl_calls(const char *name);
int fake_nccl_calls(const char *name) {
  return !strcmp(name, "ncclCommSplit")            ? nsplit_calls
         : !strcmp(name, "ncclCommFinalize")       ? nfinalize_calls
         : !strcmp(name, "ncclCommAbort")          ? nabort_calls
         : !strcmp(name, "ncclCommInitRank")       ? ninit_calls
         : !strcmp(name, "ncclCommInitRankConfig") ? ninit_config_calls
         : !strcmp(name, "ncclCommGetAsyncError")  ? nasync_calls
                                                   : -1;
}

#ifndef FAKE_NCCL_NO_SPLIT
/* A config as NCCL checks it: its initializer's size, magic and a
 * version from 2.14; -1 when wrong, else whether it asks non-blocking. */
static int config_nonblocking(const ncclConfig_t *config) {
  if (!config)
    return 0;
  if (config->size != sizeof *config || config->magic != 0xcafebeef ||
      config->version < 21400)
    return -1;
  return config->blocking == 0;
}
#endif

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank, int nonblocking) {
  *comm = NULL;
  if (nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks ||
      !memchr(id.internal, 0, sizeof id.internal) || !id.internal[0])
    return ncclInvalidArgument;
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c)
    return ncclSystemError;
  memcpy(c->dir, id.internal, sizeof c->dir);
  snprintf(c->tag, sizeof c->tag, "w");
  c->rank = rank;
  c->nranks = nranks;
  for (int i = 0; i < nranks; i++)
    c->world_rank[i] = i;
  if (nonblocking) {
    /* the tokens posted; ncclCommGetAsyncError takes the others' */
    int token[2] = {1, 0};
    if (gather_start(c, token, 1) != ncclSuccess) {
      free(c);
      return ncclSystemError;
    }
    c->nonblocking = 1;
    *comm = c;
    return ncclInProgress;
  }
  /* as NCCL's, the call returns once every rank has joined */
  ncclResult_t r = barrier(c);
  if (r != ncclSuccess) {
    free(c);
    return r;
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  *comm = NULL;
  ninit_calls++;
  if (fails("ncclCommInitRank"))
    return ncclSystemError;
  return init_rank(comm, nranks, id, rank, 0);
}

#ifndef FAKE_NCCL_NO_SPLIT
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  *comm = NULL;
  ninit_config_calls++;
  if (fails("ncclCommInitRankConfig"))
    return ncclSystemError;
  int nonblocking = config_nonblocking(config);
  if (nonblocking < 0)
    return ncclInvalidArgument;
  return init_rank(comm, nranks, id, rank, nonblocking);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config) {
  *newcomm = NULL;
  nsplit_calls++;
  if (fails("ncclCommSplit"))
    return ncclSystemError;
  int nonblocking = config ? config_nonblocking(config) : comm->nonblocking;
  if (nonblocking < 0 || comm->joining)
    return ncclInvalidArgument;
  ncclComm_t c = NULL;
  if (color != NCCL_SPLIT_NOCOLOR) {
    if (!(c = calloc(1, sizeof *c)))
      return ncclSystemError;
    c->nonblocking = nonblocking;
    memcpy(c->dir, comm->dir, sizeof c->dir);
    snprintf(c->tag, sizeof c->tag, "%.60s.s%dc%d", comm->tag, comm->nsplits,
             color);
    c->parent = comm;
  }
  int mine[2] = {color, key};
  comm->split_index = comm->nsplits++;
  comm->split_color = color;
  comm->split_child = c;
  comm->splitting = 1;
  ncclResult_t r = gather_start(comm, mine, (int)sizeof mine);
  if (r == ncclSuccess && nonblocking) {
    /* the rest at ncclCommGetAsyncError, on either communicator */
    *newcomm = c;
    comm->polls = 0;
    comm->async = ncclSuccess;
    return ncclInProgress;
  }
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (r == ncclSuccess && (r = gather_progress(comm)) == ncclInProgress) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) +
            1e-9 * (double)(now.tv_nsec - t0.tv_nsec) >
        timeout_s())
      r = ncclRemoteError;
    struct timespec pause = {0, 200 * 1000};
    nanosleep(&pause, NULL);
  }
  if (r != ncclSuccess) {
    comm->joining = comm->splitting = 0;
    comm->split_child = NULL;
    free(c);
    return r;
  }
  *newcomm = c;
  return ncclSuccess;
}
#endif

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, plan_nccl_stream_t stream) {
  (void)stream;
  if (fails("ncclAllReduce"))
    return ncclSystemError;
  if (datatype != ncclFloat64 || (int)op < 0 || (int)op > 4 || op == ncclProd ||
      !comm)
    return ncclInvalidArgument;
  size_t bytes = count * sizeof(double);
  double *all = malloc((size_t)comm->nranks * (bytes ? bytes : 1));
  if (!all)
    return ncclSystemError;
  memcpy(all + (size_t)comm->rank * count, sendbuff, bytes);
  ncclResult_t r = ncclSuccess;
  for (int p = 0; r == ncclSuccess && p < comm->nranks; p++)
    if (p != comm->rank)
      r = post(comm, p, sendbuff, bytes);
  for (int p = 0; r == ncclSuccess && p < comm->nranks; p++)
    if (p != comm->rank)
      r = take(comm, p, all + (size_t)p * count, bytes);
  /* ncclAvg as NCCL does it for floating types: each value times 1 / n,
   * then summed */
  double scale = op == ncclAvg ? 1.0 / comm->nranks : 1.0;
  if (r == ncclSuccess) {
    double *out = recvbuff;
    for (size_t i = 0; i < count; i++) {
      double a = all[i] * scale;
      for (int p = 1; p < comm->nranks; p++) {
        double b = all[(size_t)p * count + i] * scale;
        a = op == ncclMax   ? (a > b ? a : b)
            : op == ncclMin ? (a < b ? a : b)
                            : a + b;
      }
      out[i] = a;
    }
  }
  free(all);
  return defer(comm, r);
}

static ncclResult_t run_queue(void) {
  ncclResult_t r = ncclSuccess;
  for (int pass = 1; pass >= 0; pass--)
    for (int i = 0; r == ncclSuccess && i < nqueued; i++)
      if (queued[i].is_send == pass)
        r = pass ? post(queued[i].comm, queued[i].peer, queued[i].buf,
                        queued[i].bytes)
                 : take(queued[i].comm, queued[i].peer, queued[i].buf,
                        queued[i].bytes);
  nqueued = 0;
  return r;
}

static ncclResult_t enqueue(int is_send, void *buf, size_t count,
                            ncclDataType_t datatype, int peer,
                            ncclComm_t comm) {
  size_t size = type_size(datatype);
  if (!size || !comm || peer < 0 || peer >= comm->nranks || peer == comm->rank)
    return ncclInvalidArgument;
  if (nqueued == FAKE_MAX_QUEUE)
    return ncclInternalError;
  fake_op o = {is_send, buf, count * size, peer, comm};
  queued[nqueued++] = o;
  return group_depth ? ncclSuccess : run_queue();
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      plan_nccl_stream_t stream) {
  (void)stream;
  if (fails("ncclSend"))
    return ncclSystemError;
  return enqueue(1, (void *)(uintptr_t)sendbuff, count, datatype, peer, comm);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, plan_nccl_stream_t stream) {
  (void)stream;
  if (fails("ncclRecv"))
    return ncclSystemError;
  return enqueue(0, recvbuff, count, datatype, peer, comm);
}

ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0)
    return ncclInvalidUsage;
  if (--group_depth)
    return ncclSuccess;
  if (fails("ncclGroupEnd")) {
    nqueued = 0;
    return ncclSystemError;
  }
  /* the group's non-blocking communicators report its result */
  ncclComm_t comms[FAKE_MAX_QUEUE];
  int ncomms = 0;
  for (int i = 0; i < nqueued; i++) {
    int seen = 0;
    for (int k = 0; k < ncomms && !seen; k++)
      seen = comms[k] == queued[i].comm;
    if (!seen)
      comms[ncomms++] = queued[i].comm;
  }
  ncclResult_t r = run_queue(), out = r;
  for (int k = 0; k < ncomms; k++)
    if (defer(comms[k], r) == ncclInProgress)
      out = ncclInProgress;
  return out;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  nasync_calls++;
  *asyncError = ncclSuccess;
  if (!comm)
    return ncclInvalidArgument;
  /* a split's communicator is done when its parent's gather is */
  ncclComm_t g = comm->parent ? comm->parent : comm;
  if (g->joining && gather_progress(g) == ncclInProgress) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if (comm->polls > 0) {
    comm->polls--;
    *asyncError = ncclInProgress;
  } else {
    *asyncError = comm->async;
  }
  return ncclSuccess;
}

/* a barrier: after it, no rank waits for another (ncclCommDestroy) */
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  nfinalize_calls++;
  return defer(comm, barrier(comm));
}

/* Lets go of a communicator; for the world's, leaves this rank's marker,
 * and once every rank's is there, removes the folder and what is left in
 * it (messages an aborted rank never took). */
static void let_go(ncclComm_t comm) {
  if (comm && comm->parent && comm->parent->split_child == comm)
    comm->parent->split_child = NULL;
  if (comm && !strcmp(comm->tag, "w")) {
    char path[512];
    gone_path(path, sizeof path, comm->dir, comm->rank);
    FILE *f = fopen(path, "w");
    if (f)
      fclose(f);
    int all = 1;
    for (int p = 0; p < comm->nranks && all; p++)
      all = is_gone(comm->dir, p);
    DIR *d = all ? opendir(comm->dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(path, sizeof path, "%s/%s", comm->dir, e->d_name);
        unlink(path);
      }
    if (d) {
      closedir(d);
      rmdir(comm->dir);
    }
  }
  free(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  let_go(comm);
  return ncclSuccess;
}

/* without waiting for anyone: the peers waiting for this rank see it gone */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  nabort_calls++;
  let_go(comm);
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclSystemError:
    return "unhandled system error (fake)";
  case ncclInvalidArgument:
    return "invalid argument (fake)";
  case ncclInvalidUsage:
    return "invalid usage (fake)";
  case ncclRemoteError:
    return "remote process exited or there was a network error (fake)";
  default:
    return "unknown result code (fake)";
  }
}
