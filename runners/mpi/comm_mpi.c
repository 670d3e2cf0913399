/* The MPI communicator (runners/comm.h), built as the plugin
 * libplan-comm-mpi.so so that only a distributed run loads libmpi
 * (runners/comm_mpi_load.c dlopens it). Rank and world are MPI's
 * (MPI_COMM_WORLD); every open works on a duplicate of it (MPI_Comm_idup)
 * whose errors come back as codes (MPI_ERRORS_RETURN).
 *
 * Every wait is a nonblocking call polled against a deadline: an exchange
 * that makes no progress within timeout_s seconds fails with the ranks it
 * waited for, so a dead or stuck peer never holds the others (MPI itself
 * may not notice a dead peer on shared memory). After such a failure the
 * communicator is broken (later calls fail at once) and MPI is not
 * finalized at exit: MPI_Finalize would wait for the dead peer (nor
 * after any failed run: the abort op). MPI's launcher then reports the
 * job failed, as it is.
 *
 * An exchange sends, per peer it sends to, one header message (the call's
 * number, its count of messages to that peer and their sizes) and then
 * the payloads, each cut into pieces of at most PIECE bytes. The receiver
 * takes the header first, so a message of another size or count is read
 * into a scratch buffer and dropped (PLAN_EUSAGE), never an overrun or a
 * hang; a header of an earlier call (a peer that sent where this rank
 * posted no receive) is drained and reported the same way. */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "libplan/plan.h"
#include "base/util.h"

#define TAG_HDR 7101
#define TAG_DATA 7102
#define HDR_MAGIC 0x706c616e6d706931LL /* "planmpi1" */
#define HDR_FIXED 3                    /* magic, call, count */
/* One MPI message moves at most this much (MPI counts are ints). */
#define PIECE ((int64_t)1 << 30)

/* Process-wide, as MPI's own state is: whether this plugin initialized
 * MPI (and so finalizes it at exit), and whether a peer failed (then it
 * does not: MPI_Finalize would wait for that peer). */
static atomic_bool mpi_ours;
static atomic_bool mpi_broken;

typedef struct mpi_comm {
  plan_comm base;
  MPI_Comm comm;
  double timeout_s;
  int64_t calls; /* exchange calls made, this one included */
  bool broken;
  int64_t die_call; /* test hook: this rank raises SIGKILL at that call */
  char lib[96];
} mpi_comm;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec ts = {0, 200000}; /* 0.2 ms between polls */
  nanosleep(&ts, NULL);
}

static int mpi_err(mpi_comm *m, int e, const char *what, char *err,
                   size_t errsz) {
  char s[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(e, s, &len);
  m->broken = true;
  atomic_store(&mpi_broken, true);
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "mpi rank %d: %s: %s",
                   m->base.rank, what, s);
}

static void finalize_at_exit(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done && atomic_load(&mpi_ours) && !atomic_load(&mpi_broken))
    MPI_Finalize();
}

/* ---- one peer's side of an exchange -------------------------------------- */

typedef struct xpeer {
  /* sending: the header and every piece, posted at once */
  int64_t *shdr;
  MPI_Request *sreq;
  int nsreq;
  /* receiving, one message at a time: its header, then its pieces */
  int nrecv, got, ri; /* posted from it; taken; index of the next posted */
  int64_t *rhdr;      /* the header being followed, NULL before one */
  bool stale;         /* ... of an earlier call: drained, then the next */
  int count, mi;      /* its messages; the current one */
  int64_t moff;       /* bytes of the current message taken */
  bool active;        /* a piece is in flight into dst */
  MPI_Request rreq;
  void *sink;  /* a piece read and dropped */
  bool wanted; /* the header has been seen for this call */
} xpeer;

static int next_of(const plan_comm_msg *m, int n, int from, int peer) {
  for (int i = from; i < n; i++)
    if (m[i].peer == peer)
      return i;
  return n;
}

static int check_msgs(const mpi_comm *m, const plan_comm_msg *msg, int n,
                      const char *what, char *err, size_t errsz) {
  if (n < 0 || (n > 0 && !msg))
    return plan_errc(PLAN_EUSAGE, err, errsz, "exchange: %d %s", n, what);
  for (int i = 0; i < n; i++)
    if (msg[i].peer < 0 || msg[i].peer >= m->base.world ||
        msg[i].peer == m->base.rank || msg[i].bytes < 0 ||
        (msg[i].bytes > 0 && !msg[i].buf))
      return plan_errc(
          PLAN_EUSAGE, err, errsz,
          "exchange: rank %d's %s %d (peer %d, %lld bytes) is not a "
          "message to another rank of the world of %d",
          m->base.rank, what, i, msg[i].peer, (long long)msg[i].bytes,
          m->base.world);
  return PLAN_OK;
}

static int64_t pieces_of(int64_t bytes) {
  return bytes == 0 ? 1 : (bytes + PIECE - 1) / PIECE;
}

/* Posts the header and every piece of this call's messages to peer p. */
static int post_sends(mpi_comm *m, int p, xpeer *x, const plan_comm_msg *sends,
                      int nsends, int count, char *err, size_t errsz) {
  int64_t npieces = 0;
  for (int i = next_of(sends, nsends, 0, p); i < nsends;
       i = next_of(sends, nsends, i + 1, p))
    npieces += pieces_of(sends[i].bytes);
  x->shdr = malloc(sizeof *x->shdr * (size_t)(HDR_FIXED + count));
  x->sreq = malloc(sizeof *x->sreq * (size_t)(1 + npieces));
  if (!x->shdr || !x->sreq)
    return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: out of memory");
  x->shdr[0] = HDR_MAGIC;
  x->shdr[1] = m->calls;
  x->shdr[2] = count;
  int k = 0;
  for (int i = next_of(sends, nsends, 0, p); i < nsends;
       i = next_of(sends, nsends, i + 1, p))
    x->shdr[HDR_FIXED + k++] = sends[i].bytes;
  int e = MPI_Isend(x->shdr, HDR_FIXED + count, MPI_INT64_T, p, TAG_HDR,
                    m->comm, &x->sreq[x->nsreq]);
  if (e != MPI_SUCCESS)
    return mpi_err(m, e, "MPI_Isend", err, errsz);
  x->nsreq++;
  for (int i = next_of(sends, nsends, 0, p); i < nsends;
       i = next_of(sends, nsends, i + 1, p))
    for (int64_t off = 0; off < sends[i].bytes || off == 0; off += PIECE) {
      int64_t left = sends[i].bytes - off;
      int n = (int)(left < PIECE ? left : PIECE);
      e = MPI_Isend(n ? (char *)sends[i].buf + off : NULL, n, MPI_BYTE, p,
                    TAG_DATA, m->comm, &x->sreq[x->nsreq]);
      if (e != MPI_SUCCESS)
        return mpi_err(m, e, "MPI_Isend", err, errsz);
      x->nsreq++;
      if (sends[i].bytes == 0)
        break;
    }
  return PLAN_OK;
}

static bool recv_pending(const xpeer *x) {
  return x->rhdr || x->got < x->nrecv;
}

/* A header from peer p: checked against what this rank posted. PLAN_OK,
 * a mismatch recorded in *usage (its reason in err), or a final error. */
static int take_header(mpi_comm *m, int p, xpeer *x, const plan_comm_msg *recvs,
                       int nrecvs, int words, int *usage, char *err,
                       size_t errsz) {
  int64_t *h = x->rhdr;
  bool sizes_ok = true;
  for (int k = HDR_FIXED; k < words; k++)
    sizes_ok = sizes_ok && h[k] >= 0;
  if (words < HDR_FIXED || h[0] != HDR_MAGIC || h[2] != words - HDR_FIXED ||
      !sizes_ok)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi rank %d: rank %d sent a header that is not one of "
                     "this communicator's",
                     m->base.rank, p);
  x->count = (int)h[2];
  x->mi = 0;
  x->moff = 0;
  if (h[1] > m->calls)
    return plan_errc(
        PLAN_EUSAGE, err, errsz,
        "mpi rank %d: rank %d sent a message of its exchange call %lld "
        "while rank %d is in its call %lld: rank %d sent nothing in the "
        "call where rank %d posted a receive from it, or the ranks do not "
        "make the same calls",
        m->base.rank, p, (long long)h[1], m->base.rank, (long long)m->calls, p,
        m->base.rank);
  x->stale = h[1] < m->calls;
  if (x->stale) {
    if (!*usage) {
      *usage = 1;
      plan_errc(PLAN_EUSAGE, err, errsz,
                "rank %d sent message(s) in an exchange where rank %d posted "
                "no receive from it (its call %lld; read and dropped in call "
                "%lld)",
                p, m->base.rank, (long long)h[1], (long long)m->calls);
    }
    return PLAN_OK;
  }
  x->wanted = true;
  if (x->count != x->nrecv && !*usage) {
    *usage = 1;
    plan_errc(PLAN_EUSAGE, err, errsz,
              "rank %d sent %d message(s) to rank %d, %d expected", p, x->count,
              m->base.rank, x->nrecv);
  }
  for (int k = 0, i = next_of(recvs, nrecvs, 0, p); k < x->count && !*usage;
       k++, i = next_of(recvs, nrecvs, i + 1, p))
    if (i < nrecvs && h[HDR_FIXED + k] != recvs[i].bytes) {
      *usage = 1;
      plan_errc(PLAN_EUSAGE, err, errsz,
                "rank %d sent %lld bytes, %lld expected", p,
                (long long)h[HDR_FIXED + k], (long long)recvs[i].bytes);
    }
  return PLAN_OK;
}

/* Moves peer p's receive side on as far as it goes without waiting. */
static int pump_recv(mpi_comm *m, int p, xpeer *x, const plan_comm_msg *recvs,
                     int nrecvs, int *usage, bool *progress, char *err,
                     size_t errsz) {
  for (;;) {
    if (x->active) {
      int done = 0, e = MPI_Test(&x->rreq, &done, MPI_STATUS_IGNORE);
      if (e != MPI_SUCCESS)
        return mpi_err(m, e, "MPI_Test", err, errsz);
      if (!done)
        return PLAN_OK;
      x->active = false;
      free(x->sink);
      x->sink = NULL;
      *progress = true;
    }
    if (!x->rhdr) {
      if (x->wanted || x->got >= x->nrecv)
        return PLAN_OK; /* this call's header taken, its messages too */
      int flag = 0, words = 0;
      MPI_Message msg;
      MPI_Status st;
      int e = MPI_Improbe(p, TAG_HDR, m->comm, &flag, &msg, &st);
      if (e != MPI_SUCCESS)
        return mpi_err(m, e, "MPI_Improbe", err, errsz);
      if (!flag)
        return PLAN_OK;
      MPI_Get_count(&st, MPI_INT64_T, &words);
      x->rhdr = malloc(sizeof *x->rhdr * (size_t)(words > 0 ? words : 1));
      if (!x->rhdr)
        return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: out of memory");
      e = MPI_Mrecv(x->rhdr, words, MPI_INT64_T, &msg, MPI_STATUS_IGNORE);
      if (e != MPI_SUCCESS)
        return mpi_err(m, e, "MPI_Mrecv", err, errsz);
      *progress = true;
      int rc = take_header(m, p, x, recvs, nrecvs, words, usage, err, errsz);
      if (rc)
        return rc;
    }
    if (x->mi >= x->count) { /* every message of that header taken */
      free(x->rhdr);
      x->rhdr = NULL;
      if (!x->stale)
        x->got = x->nrecv;
      continue;
    }
    int64_t bytes = x->rhdr[HDR_FIXED + x->mi];
    int64_t left = bytes - x->moff;
    int n = (int)(left < PIECE ? left : PIECE);
    bool keep = !x->stale && !*usage && x->ri < nrecvs;
    void *dst = NULL;
    if (keep && n)
      dst = (char *)recvs[x->ri].buf + x->moff;
    else if (n && !(dst = x->sink = malloc((size_t)n)))
      return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: out of memory");
    int e = MPI_Irecv(dst, n, MPI_BYTE, p, TAG_DATA, m->comm, &x->rreq);
    if (e != MPI_SUCCESS)
      return mpi_err(m, e, "MPI_Irecv", err, errsz);
    x->active = true;
    x->moff += n;
    if (x->moff >= bytes) {
      x->mi++;
      x->moff = 0;
      if (!x->stale)
        x->ri = next_of(recvs, nrecvs, x->ri + 1, p);
    }
  }
}

/* The peers an exchange still waits for, up to four, into err. */
static int stuck_error(mpi_comm *m, const xpeer *xs, char *err, size_t errsz) {
  char list[256] = "";
  size_t len = 0;
  int shown = 0, more = 0;
  for (int p = 0; p < m->base.world; p++) {
    bool in = recv_pending(&xs[p]) || xs[p].active, out = xs[p].nsreq > 0;
    if (!in && !out)
      continue;
    if (shown == 4) {
      more = 1;
      break;
    }
    int n = snprintf(list + len, sizeof list - len, "%srank %d did not %s",
                     shown ? ", " : "", p,
                     in && out ? "send or receive"
                     : in      ? "send"
                               : "receive");
    if (n < 0 || (size_t)n >= sizeof list - len)
      break;
    len += (size_t)n;
    shown++;
  }
  m->broken = true;
  atomic_store(&mpi_broken, true);
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                   "mpi rank %d: no progress within %g s: %s%s", m->base.rank,
                   m->timeout_s, list, more ? " (and others)" : "");
}

/* Frees one peer's state; requests still in flight (after a failure) are
 * cancelled where MPI can and left to MPI otherwise. */
static void drop_peer(xpeer *x, bool failed) {
  if (failed) {
    if (x->active) {
      MPI_Cancel(&x->rreq);
      MPI_Request_free(&x->rreq);
    }
    for (int i = 0; i < x->nsreq; i++)
      MPI_Request_free(&x->sreq[i]);
    /* the buffers may still be read by MPI: kept */
    return;
  }
  free(x->shdr);
  free(x->sreq);
  free(x->rhdr);
  free(x->sink);
}

static int mpi_exchange(plan_comm *c, const plan_comm_msg *sends, int nsends,
                        const plan_comm_msg *recvs, int nrecvs, char *err,
                        size_t errsz) {
  mpi_comm *m = (mpi_comm *)c;
  if (err && errsz)
    err[0] = 0;
  m->calls++;
  if (m->calls == m->die_call)
    raise(SIGKILL);
  if (m->broken)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi rank %d: the communicator failed earlier", c->rank);
  int rc = check_msgs(m, sends, nsends, "sends", err, errsz);
  if (!rc)
    rc = check_msgs(m, recvs, nrecvs, "receives", err, errsz);
  if (rc || (nsends == 0 && nrecvs == 0))
    return rc;
  int world = c->world;
  xpeer *xs = calloc((size_t)world, sizeof *xs);
  int *nsend = calloc((size_t)world, sizeof *nsend);
  if (!xs || !nsend) {
    free(xs);
    free(nsend);
    return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: out of memory");
  }
  for (int i = 0; i < nsends; i++)
    nsend[sends[i].peer]++;
  for (int i = 0; i < nrecvs; i++)
    xs[recvs[i].peer].nrecv++;
  for (int p = 0; p < world && !rc; p++) {
    xs[p].ri = next_of(recvs, nrecvs, 0, p);
    if (nsend[p])
      rc = post_sends(m, p, &xs[p], sends, nsends, nsend[p], err, errsz);
  }
  int usage = 0;
  double deadline = now_s() + m->timeout_s;
  while (!rc) {
    bool progress = false, pending = false;
    for (int p = 0; p < world && !rc; p++) {
      xpeer *x = &xs[p];
      if (x->nsreq) {
        int done = 0,
            e = MPI_Testall(x->nsreq, x->sreq, &done, MPI_STATUSES_IGNORE);
        if (e != MPI_SUCCESS)
          rc = mpi_err(m, e, "MPI_Testall", err, errsz);
        else if (done) {
          x->nsreq = 0;
          progress = true;
        }
      }
      if (!rc)
        rc = pump_recv(m, p, x, recvs, nrecvs, &usage, &progress, err, errsz);
      pending = pending || x->nsreq || recv_pending(x) || x->active;
    }
    if (rc || !pending)
      break;
    if (progress)
      deadline = now_s() + m->timeout_s;
    else if (now_s() > deadline)
      rc = stuck_error(m, xs, err, errsz);
    else
      nap();
  }
  bool failed = rc && m->broken;
  for (int p = 0; p < world; p++)
    drop_peer(&xs[p], failed);
  if (!failed)
    free(xs);
  free(nsend);
  if (!rc && usage)
    rc = PLAN_EUSAGE; /* err holds the first mismatch */
  return rc;
}

/* ---- open / describe / close --------------------------------------------- */

static void mpi_describe(const plan_comm *c, char *buf, size_t size) {
  const mpi_comm *m = (const mpi_comm *)c;
  if (buf && size)
    snprintf(buf, size, "mpi (%s), rank %d of %d, timeout %g s", m->lib,
             c->rank, c->world, m->timeout_s);
}

static void mpi_close(plan_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  if (!m)
    return;
  /* freeing a communicator is local; after a failure it is left to MPI
   * (requests may still name it) */
  if (!m->broken && m->comm != MPI_COMM_NULL)
    MPI_Comm_free(&m->comm);
  free(m);
}

/* After a failure of this process (comm.h's abort): no finalize at exit
 * either, since a peer may still wait in a call this process never
 * makes, and MPI_Finalize would wait for that peer in turn. */
static void mpi_abort(plan_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  if (!m)
    return;
  m->broken = true;
  atomic_store(&mpi_broken, true);
  mpi_close(c);
}

static const plan_comm_ops mpi_ops = {mpi_exchange, plan_comm_fold_all_reduce,
                                      mpi_describe, mpi_close, mpi_abort};

/* MPI initialized (by this plugin when nobody has), errors returned. */
static int init_mpi(char *err, size_t errsz) {
  int inited = 0, fin = 0;
  MPI_Finalized(&fin);
  if (fin)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi: MPI was finalized in this process already");
  MPI_Initialized(&inited);
  if (inited)
    return PLAN_OK;
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) !=
      MPI_SUCCESS)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz, "mpi: MPI_Init failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  atomic_store(&mpi_ours, true);
  atexit(finalize_at_exit);
  return PLAN_OK;
}

/* PLAN_TEST_MPI_DIE=R:K: rank R raises SIGKILL at its K-th exchange call
 * (the tests' dead peer); 0 otherwise. */
static int64_t die_call(int rank) {
  const char *v = getenv("PLAN_TEST_MPI_DIE");
  long r = -1;
  long long k = 0;
  if (!v || sscanf(v, "%ld:%lld", &r, &k) != 2 || r != rank || k < 1)
    return 0;
  return (int64_t)k;
}

/* The plugin's entry point (runners/comm.h, PLAN_COMM_MPI_ENTRY). */
__attribute__((visibility("default"))) int
plan_comm_mpi_plugin_open(int abi, plan_comm **out, double timeout_s, char *err,
                          size_t errsz);

int plan_comm_mpi_plugin_open(int abi, plan_comm **out, double timeout_s,
                              char *err, size_t errsz) {
  if (err && errsz)
    err[0] = 0;
  if (abi != PLAN_COMM_MPI_ABI)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi: the plugin speaks communicator ABI %d, the library "
                     "%d; rebuild it with `make`",
                     PLAN_COMM_MPI_ABI, abi);
  if (!out)
    return plan_errc(PLAN_EUSAGE, err, errsz, "mpi: NULL out");
  *out = NULL;
  if (!(timeout_s > 0) || !isfinite(timeout_s))
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "mpi: timeout %g s is not positive", timeout_s);
  int rc = init_mpi(err, errsz);
  if (rc)
    return rc;
  mpi_comm *m = calloc(1, sizeof *m);
  if (!m)
    return plan_errc(PLAN_ENOMEM, err, errsz, "mpi: out of memory");
  m->base.ops = &mpi_ops;
  m->timeout_s = timeout_s;
  m->comm = MPI_COMM_NULL;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(lib, &len);
  lib[strcspn(lib, ",\n")] = 0; /* "Open MPI v4.1.4" */
  snprintf(m->lib, sizeof m->lib, "%.90s", lib);
  MPI_Comm_rank(MPI_COMM_WORLD, &m->base.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->base.world);
  if (m->base.world > PLAN_COMM_MAX_WORLD) {
    rc = plan_errc(PLAN_EUSAGE, err, errsz,
                   "mpi: a world of %d processes (at most %d)", m->base.world,
                   PLAN_COMM_MAX_WORLD);
    free(m);
    return rc;
  }
  /* the duplicate is made collectively: polled, so a rank that never
   * comes fails the others at the timeout */
  MPI_Request req;
  int e = MPI_Comm_idup(MPI_COMM_WORLD, &m->comm, &req);
  double deadline = now_s() + timeout_s;
  for (int done = 0; e == MPI_SUCCESS && !done;) {
    e = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (e == MPI_SUCCESS && !done) {
      if (now_s() > deadline) {
        m->broken = true;
        atomic_store(&mpi_broken, true);
        rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "mpi rank %d: not every one of the %d ranks came "
                       "within %g s (MPI_Comm_idup)",
                       m->base.rank, m->base.world, timeout_s);
        free(m);
        return rc;
      }
      nap();
    }
  }
  if (e != MPI_SUCCESS) {
    rc = mpi_err(m, e, "MPI_Comm_idup", err, errsz);
    free(m);
    return rc;
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  m->die_call = die_call(m->base.rank);
  *out = &m->base;
  return PLAN_OK;
}
