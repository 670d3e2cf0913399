/* The TCP communicator (runners/comm.h): a rendezvous folder where every
 * rank leaves its address, one connection per pair of ranks (rank i
 * connects to every j < i and accepts every j > i), each checked by a
 * handshake, and exchanges over nonblocking sockets driven by poll.
 *
 * The handshake: the connecting rank sends a hello (world, its rank, the
 * rank it wants), the accepting one answers with its own, and the
 * connecting one confirms with an ack; only then does either side keep the
 * connection. Each handshake has its own short bound (HANDSHAKE_S): a
 * connection that says nothing (a stray client on the port, a stale file
 * naming a listener that never answers) is dropped and the rendezvous goes
 * on, the connecting side reading the peer's file again and retrying, the
 * accepting side accepting the next. The ack keeps a connection the
 * connecting side gave up on (and retries) from being taken for the peer.
 *
 * Every message on a connection is framed: magic, its index and the count
 * of the sender's messages to that peer in the call, its size, the number
 * of the sender's exchange call (see tcp_exchange). A receiver that posted
 * another size or count reads (and drops) what the sender sent, so both
 * sides finish the call and the stream stays in step, and reports
 * PLAN_EUSAGE. Every wait is bounded: the rendezvous by timeout_s from the
 * open, an exchange by timeout_s without progress. Every socket is made
 * close-on-exec and nonblocking at once (SOCK_CLOEXEC, accept4), so a fork
 * and exec elsewhere in the process never inherits one. */
#include "comm_tcp_int.h"

static int tcp_exchange(plan_comm *c, const plan_comm_msg *sends, int nsends,
                        const plan_comm_msg *recvs, int nrecvs, char *err,
                        size_t errsz);
static void tcp_describe(const plan_comm *c, char *buf, size_t size);
static void tcp_close(plan_comm *c);

static const plan_comm_ops tcp_ops = {tcp_exchange, plan_comm_fold_all_reduce,
                                      tcp_describe, tcp_close, NULL};

/* ---- open / close / describe --------------------------------------------- */

int plan_comm_tcp_open(plan_comm **out, int rank, int world,
                       const char *rendezvous, double timeout_s, char *err,
                       size_t errsz) {
  if (err && errsz)
    err[0] = 0;
  if (!out)
    return plan_errc(PLAN_EUSAGE, err, errsz, "tcp: NULL out");
  *out = NULL;
  if (world < 1 || world > PLAN_COMM_MAX_WORLD || rank < 0 || rank >= world)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "tcp: rank %d of a world of %d (1 to %d processes)", rank,
                     world, PLAN_COMM_MAX_WORLD);
  if (!(timeout_s > 0) || !isfinite(timeout_s))
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "tcp: timeout %g s is not positive", timeout_s);
  if (world > 1 && (!rendezvous || !*rendezvous))
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "tcp: a world of %d needs a rendezvous folder", world);
  tcp_comm *t = calloc(1, sizeof *t);
  if (!t)
    return plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
  t->base.ops = &tcp_ops;
  t->base.rank = rank;
  t->base.world = world;
  t->listen_fd = -1;
  t->timeout_s = timeout_s;
  t->fds = malloc(sizeof *t->fds * (size_t)world);
  if (!t->fds) {
    free(t);
    return plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
  }
  for (int i = 0; i < world; i++)
    t->fds[i] = -1;
  if (world == 1) {
    *out = &t->base;
    return PLAN_OK;
  }
  double deadline = now_s() + timeout_s;
  int rc;
  t->folder = strdup(rendezvous);
  if (!t->folder) {
    rc = plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
    goto fail;
  }
  if ((rc = plan_tcp_meet(t, rendezvous, deadline, err, errsz)) != PLAN_OK)
    goto fail;
  *out = &t->base;
  return PLAN_OK;
fail:
  tcp_close(&t->base);
  return rc;
}

static void tcp_describe(const plan_comm *c, char *buf, size_t size) {
  const tcp_comm *t = (const tcp_comm *)c;
  if (!buf || !size)
    return;
  if (!t->folder)
    snprintf(buf, size, "tcp, rank %d of %d", c->rank, c->world);
  else
    snprintf(buf, size,
             strchr(t->addr, ':') ? "tcp, rank %d of %d, [%s]:%d, rendezvous %s"
                                  : "tcp, rank %d of %d, %s:%d, rendezvous %s",
             c->rank, c->world, t->addr, t->port, t->folder);
}

static void tcp_close(plan_comm *c) {
  tcp_comm *t = (tcp_comm *)c;
  if (!t)
    return;
  for (int i = 0; t->fds && i < c->world; i++)
    if (t->fds[i] >= 0)
      close(t->fds[i]);
  if (t->listen_fd >= 0)
    close(t->listen_fd);
  if (t->own)
    unlink(t->own);
  free(t->own);
  free(t->folder);
  free(t->fds);
  free(t);
}

/* ---- exchange ------------------------------------------------------------ */

/* One peer's side of an exchange. */
typedef struct xpeer {
  int nsend, sent, si; /* messages to it; finished; index of the current */
  int64_t soff;        /* bytes of the current frame + payload sent */
  unsigned char shdr[FRAME_BYTES];
  int nrecv, got, ri; /* posted from it; finished; index of the current */
  int count;          /* its messages in this call, -1 before the first */
  int64_t roff;       /* bytes of the current frame + payload received */
  int64_t rbytes;     /* the current message's size, from its frame */
  int drop;           /* the current payload is read and dropped */
  int stale;          /* ... and it belongs to an earlier call */
  unsigned char rhdr[FRAME_BYTES];
} xpeer;

static int next_of(const plan_comm_msg *m, int n, int from, int peer) {
  for (int i = from; i < n; i++)
    if (m[i].peer == peer)
      return i;
  return n;
}

static int recv_pending(const xpeer *x) {
  return x->got < (x->count < 0 ? (x->nrecv > 0) : x->count);
}

static int peer_gone(const tcp_comm *t, int peer, int e, char *err,
                     size_t errsz) {
  if (e == EPIPE || e == ECONNRESET || e == 0)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "tcp rank %d: rank %d closed its connection", t->base.rank,
                     peer);
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                   "tcp rank %d: connection to rank %d: %s", t->base.rank, peer,
                   strerror(e));
}

/* Sends what the socket takes. PLAN_OK (possibly with sends left). */
static int pump_send(const tcp_comm *t, int p, xpeer *x,
                     const plan_comm_msg *sends, int nsends, int *progress,
                     char *err, size_t errsz) {
  while (x->sent < x->nsend) {
    const plan_comm_msg *m = &sends[x->si];
    if (x->soff == 0) {
      put32(x->shdr, FRAME_MAGIC);
      put32(x->shdr + 4, (uint32_t)x->sent);
      put32(x->shdr + 8, (uint32_t)x->nsend);
      put64(x->shdr + 12, (uint64_t)m->bytes);
      put64(x->shdr + 20, t->calls);
    }
    struct iovec iov[2];
    int niov = 0;
    if (x->soff < FRAME_BYTES) {
      iov[niov].iov_base = x->shdr + x->soff;
      iov[niov++].iov_len = (size_t)(FRAME_BYTES - x->soff);
    }
    int64_t pdone = x->soff > FRAME_BYTES ? x->soff - FRAME_BYTES : 0;
    size_t pleft = (size_t)(m->bytes - pdone);
    if (pleft > 0) {
      iov[niov].iov_base = (char *)m->buf + pdone;
      iov[niov++].iov_len = pleft < IO_CHUNK ? pleft : IO_CHUNK;
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)niov;
    ssize_t n = sendmsg(t->fds[p], &mh, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return PLAN_OK;
      return peer_gone(t, p, errno, err, errsz);
    }
    *progress = 1;
    x->soff += n;
    if (x->soff == FRAME_BYTES + m->bytes) {
      x->sent++;
      x->soff = 0;
      x->si = next_of(sends, nsends, x->si + 1, p);
    }
  }
  return PLAN_OK;
}

/* Checks a whole frame header against what was posted. PLAN_OK, the first
 * mismatch recorded in *usage (its reason in err); a status when the stream
 * is out of step. A frame of an earlier call is a mismatch, read and
 * dropped; one of a later call, a final error: the sender made a call this
 * rank did not (or posted nothing to it in this one), and its frames cannot
 * be taken now. */
static int take_frame(const tcp_comm *t, int p, xpeer *x,
                      const plan_comm_msg *recvs, int *usage, char *err,
                      size_t errsz) {
  uint32_t idx = get32(x->rhdr + 4), cnt = get32(x->rhdr + 8);
  uint64_t bytes = get64(x->rhdr + 12), call = get64(x->rhdr + 20);
  if (get32(x->rhdr) == FRAME_MAGIC && bytes <= (uint64_t)INT64_MAX &&
      call != t->calls) {
    if (call > t->calls)
      return plan_errc(
          PLAN_EUSAGE, err, errsz,
          "tcp rank %d: rank %d sent a message of its exchange call %llu "
          "while rank %d is in its call %llu: rank %d sent nothing in the "
          "call where rank %d posted a receive from it, or the ranks do not "
          "make the same calls",
          t->base.rank, p, (unsigned long long)call, t->base.rank,
          (unsigned long long)t->calls, p, t->base.rank);
    if (!*usage) {
      *usage = 1;
      plan_errc(PLAN_EUSAGE, err, errsz,
                "rank %d sent message(s) in an exchange where rank %d posted "
                "no receive from it (its call %llu; read and dropped in call "
                "%llu)",
                p, t->base.rank, (unsigned long long)call,
                (unsigned long long)t->calls);
    }
    x->rbytes = (int64_t)bytes;
    x->drop = 1;
    x->stale = 1;
    return PLAN_OK;
  }
  if (get32(x->rhdr) != FRAME_MAGIC || (int64_t)idx != x->got ||
      cnt > (uint32_t)INT_MAX || bytes > (uint64_t)INT64_MAX ||
      (x->count >= 0 && (int)cnt != x->count))
    return plan_errc(
        PLAN_EUNSUPPORTED, err, errsz,
        "tcp rank %d: the stream from rank %d is out of step (a frame "
        "that is not its message %d of this exchange)",
        t->base.rank, p, x->got);
  if (x->count < 0) {
    x->count = (int)cnt;
    if (x->count != x->nrecv && !*usage) {
      *usage = 1;
      plan_errc(PLAN_EUSAGE, err, errsz,
                "rank %d sent %d message(s) to rank %d, %d expected", p,
                x->count, t->base.rank, x->nrecv);
    }
  }
  x->rbytes = (int64_t)bytes;
  x->drop = 1;
  if (x->got < x->nrecv) {
    if (x->rbytes == recvs[x->ri].bytes)
      x->drop = 0;
    else if (!*usage) {
      *usage = 1;
      plan_errc(PLAN_EUSAGE, err, errsz,
                "rank %d sent %lld bytes, %lld expected", p,
                (long long)x->rbytes, (long long)recvs[x->ri].bytes);
    }
  }
  return PLAN_OK;
}

/* Receives what the socket holds. PLAN_OK (possibly with receives left);
 * a mismatch is recorded in *usage and the sender's messages read on (and
 * dropped), so the sender finishes and the stream stays in step. */
static int pump_recv(const tcp_comm *t, int p, xpeer *x,
                     const plan_comm_msg *recvs, int nrecvs, int *usage,
                     int *progress, char *err, size_t errsz) {
  char sink[65536];
  while (recv_pending(x)) {
    int head = x->roff < FRAME_BYTES;
    void *dst;
    size_t want;
    if (head) {
      dst = x->rhdr + x->roff;
      want = (size_t)(FRAME_BYTES - x->roff);
    } else {
      uint64_t left = (uint64_t)(x->rbytes - (x->roff - FRAME_BYTES));
      want = left < IO_CHUNK ? (size_t)left : IO_CHUNK;
      if (x->drop) {
        dst = sink;
        if (want > sizeof sink)
          want = sizeof sink;
      } else {
        dst = (char *)recvs[x->ri].buf + (x->roff - FRAME_BYTES);
      }
    }
    if (want > 0) {
      ssize_t n = recv(t->fds[p], dst, want, 0);
      if (n == 0)
        return peer_gone(t, p, 0, err, errsz);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
          return PLAN_OK;
        return peer_gone(t, p, errno, err, errsz);
      }
      *progress = 1;
      x->roff += n;
    }
    if (head) {
      if (x->roff < FRAME_BYTES)
        continue;
      int rc = take_frame(t, p, x, recvs, usage, err, errsz);
      if (rc)
        return rc;
    }
    if (x->roff - FRAME_BYTES == x->rbytes) {
      x->roff = 0;
      x->rbytes = 0;
      if (x->stale) { /* not one of this call's messages */
        x->stale = 0;
        continue;
      }
      x->got++;
      if (x->got <= x->nrecv)
        x->ri = next_of(recvs, nrecvs, x->ri + 1, p);
    }
  }
  return PLAN_OK;
}

static int check_msgs(const tcp_comm *t, const plan_comm_msg *m, int n,
                      const char *what, char *err, size_t errsz) {
  if (n < 0 || (n > 0 && !m))
    return plan_errc(PLAN_EUSAGE, err, errsz, "exchange: %d %s", n, what);
  for (int i = 0; i < n; i++)
    if (m[i].peer < 0 || m[i].peer >= t->base.world ||
        m[i].peer == t->base.rank || m[i].bytes < 0 ||
        (m[i].bytes > 0 && !m[i].buf))
      return plan_errc(
          PLAN_EUSAGE, err, errsz,
          "exchange: rank %d's %s %d (peer %d, %lld bytes) is not a "
          "message to another rank of the world of %d",
          t->base.rank, what, i, m[i].peer, (long long)m[i].bytes,
          t->base.world);
  return PLAN_OK;
}

/* The peers an exchange still waits for, up to four, into err. */
static int stuck_error(const tcp_comm *t, const struct pollfd *pfds,
                       const int *who, int np, char *err, size_t errsz) {
  char list[256] = "";
  size_t len = 0;
  int shown = np < 4 ? np : 4;
  for (int k = 0; k < shown && len < sizeof list; k++) {
    short ev = pfds[k].events;
    int n = snprintf(list + len, sizeof list - len, "%srank %d did not %s",
                     k ? ", " : "", who[k],
                     (ev & POLLIN) && (ev & POLLOUT) ? "send or receive"
                     : ev & POLLIN                   ? "send"
                                                     : "receive");
    if (n < 0)
      break;
    len += (size_t)n;
  }
  return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                   "tcp rank %d: no progress within %g s: %s%s", t->base.rank,
                   t->timeout_s, list, np > shown ? " (and others)" : "");
}

/* Which call a frame belongs to: every exchange call, on every rank, adds
 * one to the communicator's count, empty calls and failed ones included,
 * and each frame carries its sender's count. The contract (runners/comm.h)
 * has every process make the same calls in the same order, so the frames
 * of a call carry the receiver's own count. A sender's frames in a call
 * where the receiver posted no receive from it stay in the socket; the
 * receiver's next call that reads from that sender finds the older count,
 * drops those frames and reports PLAN_EUSAGE naming the sender, then takes
 * the frames of the current call. (A count per pair of ranks, of the calls
 * where a rank sends to or receives from the other, would not do: when the
 * receiver's call does nothing with the sender, its count for the pair does
 * not move, and the sender's stray frames would carry exactly the count
 * of the receiver's next call with it.) */
static int tcp_exchange(plan_comm *c, const plan_comm_msg *sends, int nsends,
                        const plan_comm_msg *recvs, int nrecvs, char *err,
                        size_t errsz) {
  tcp_comm *t = (tcp_comm *)c;
  if (err && errsz)
    err[0] = 0;
  t->calls++;
  int rc = check_msgs(t, sends, nsends, "sends", err, errsz);
  if (!rc)
    rc = check_msgs(t, recvs, nrecvs, "receives", err, errsz);
  if (rc || (nsends == 0 && nrecvs == 0))
    return rc;
  int world = c->world;
  xpeer *xs = calloc((size_t)world, sizeof *xs);
  struct pollfd *pfds = calloc((size_t)world, sizeof *pfds);
  int *who = calloc((size_t)world, sizeof *who);
  if (!xs || !pfds || !who) {
    free(xs);
    free(pfds);
    free(who);
    return plan_errc(PLAN_ENOMEM, err, errsz, "exchange: out of memory");
  }
  for (int i = 0; i < nsends; i++)
    xs[sends[i].peer].nsend++;
  for (int i = 0; i < nrecvs; i++)
    xs[recvs[i].peer].nrecv++;
  for (int p = 0; p < world; p++) {
    xs[p].count = -1;
    xs[p].si = next_of(sends, nsends, 0, p);
    xs[p].ri = next_of(recvs, nrecvs, 0, p);
  }
  int usage = 0;
  double deadline = now_s() + t->timeout_s;
  for (;;) {
    int np = 0;
    for (int p = 0; p < world; p++) {
      short ev = (short)((xs[p].sent < xs[p].nsend ? POLLOUT : 0) |
                         (recv_pending(&xs[p]) ? POLLIN : 0));
      if (ev) {
        pfds[np] = (struct pollfd){t->fds[p], ev, 0};
        who[np++] = p;
      }
    }
    if (np == 0)
      break;
    int pr = poll(pfds, (nfds_t)np, ms_left(deadline));
    if (pr < 0) {
      if (errno == EINTR)
        continue;
      rc = plan_errc(PLAN_EUNSUPPORTED, err, errsz, "exchange: poll: %s",
                     strerror(errno));
      break;
    }
    if (pr == 0) {
      rc = stuck_error(t, pfds, who, np, err, errsz);
      break;
    }
    int progress = 0;
    for (int k = 0; k < np && !rc; k++) {
      int p = who[k];
      short re = pfds[k].revents;
      if (!re)
        continue;
      if (pfds[k].events & POLLOUT)
        rc = pump_send(t, p, &xs[p], sends, nsends, &progress, err, errsz);
      if (!rc && (pfds[k].events & POLLIN))
        rc = pump_recv(t, p, &xs[p], recvs, nrecvs, &usage, &progress, err,
                       errsz);
    }
    if (rc)
      break;
    if (progress)
      deadline = now_s() + t->timeout_s;
  }
  free(xs);
  free(pfds);
  free(who);
  if (!rc && usage)
    rc = PLAN_EUSAGE; /* err holds the first mismatch */
  return rc;
}
