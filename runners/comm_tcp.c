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
#define _GNU_SOURCE /* accept4 */
#include "comm.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "util.h"

#define HELLO_MAGIC 0x504c4e43u /* "PLNC" */
#define HELLO_VERSION 2u
#define HELLO_BYTES 20
#define ACK_MAGIC 0x504c4e41u /* "PLNA" */
#define ACK_BYTES 8
/* Seconds one handshake may take, connect included (less when the
 * rendezvous has less left). */
#define HANDSHAKE_S 2.0
#define FRAME_MAGIC 0x504c4e4du /* "PLNM" */
#define FRAME_BYTES 28
#define ADDR_MAX 256
/* One send or recv call moves at most this much. */
#define IO_CHUNK ((size_t)1 << 30)

typedef struct tcp_comm {
  plan_comm base;
  int *fds; /* per global rank; -1 for this rank */
  int listen_fd;
  int port;
  double timeout_s;
  uint64_t calls; /* exchange calls made, this one included */
  char *folder;   /* NULL when world is 1 */
  char *own;      /* this rank's rendezvous file */
  char addr[ADDR_MAX];
} tcp_comm;

static int tcp_exchange(plan_comm *c, const plan_comm_msg *sends, int nsends,
                        const plan_comm_msg *recvs, int nrecvs, char *err,
                        size_t errsz);
static void tcp_describe(const plan_comm *c, char *buf, size_t size);
static void tcp_close(plan_comm *c);

static const plan_comm_ops tcp_ops = {tcp_exchange, plan_comm_fold_all_reduce,
                                      tcp_describe, tcp_close, NULL};

/* ---- small helpers ------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds left until the deadline, for poll (0 when past it). */
static int ms_left(double deadline) {
  double left = (deadline - now_s()) * 1e3;
  if (left <= 0)
    return 0;
  if (left > (double)INT_MAX)
    return INT_MAX;
  return (int)ceil(left);
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)(v >> 32));
  put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const unsigned char *p) {
  return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* The deadline of one handshake: HANDSHAKE_S from now, or the
 * rendezvous's when that comes first. */
static double handshake_deadline(double deadline) {
  double d = now_s() + HANDSHAKE_S;
  return d < deadline ? d : deadline;
}

static void set_nodelay(int fd) {
  int one = 1;
  /* latency only: a socket without it still works */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Sends or receives exactly len bytes on a nonblocking socket before the
 * deadline. 0; -1 with errno (ETIMEDOUT past the deadline, EPIPE when the
 * peer closed). */
static int io_all(int fd, void *buf, size_t len, int out, double deadline) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) {
      errno = EPIPE;
      return -1;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return -1;
    struct pollfd pfd = {fd, out ? POLLOUT : POLLIN, 0};
    int ms = ms_left(deadline);
    if (ms == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
      return -1;
  }
  return 0;
}

/* ---- rendezvous ---------------------------------------------------------- */

/* mkdir -p. 0, or -1 with errno. */
static int make_folder(const char *path) {
  char *p = strdup(path);
  if (!p) {
    errno = ENOMEM;
    return -1;
  }
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/')
    p[--n] = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s)
      continue;
    char was = *s;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      int e = errno;
      free(p);
      errno = e;
      return -1;
    }
    *s = was;
    if (!was)
      break;
  }
  struct stat st;
  int rc = stat(p, &st);
  int e = errno;
  free(p);
  if (rc != 0) {
    errno = e;
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

static char *rank_path(const char *folder, int rank) {
  size_t n = strlen(folder) + 32;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/rank-%d", folder, rank);
  return p;
}

/* Reads "address port" from a rank's file. 1 when read; 0 when missing, -1
 * when not (yet) well formed, with a reason in why. */
static int read_rank_file(const char *path, char *addr, int *port, char *why,
                          size_t whysz) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(why, whysz, "no file %s (%s)", path, strerror(errno));
    return 0;
  }
  char line[ADDR_MAX + 32];
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  char a[ADDR_MAX];
  int pt = 0;
  if (!ok || sscanf(line, "%255s %d", a, &pt) != 2 || pt <= 0 || pt > 65535) {
    snprintf(why, whysz, "%s does not hold \"address port\"", path);
    return -1;
  }
  memcpy(addr, a, sizeof a);
  *port = pt;
  return 1;
}

/* This host's address as the others reach it. */
static int own_address(char *addr, char *err, size_t errsz) {
  const char *env = getenv("PLAN_COMM_ADDR");
  if (env && *env) {
    if (strlen(env) >= ADDR_MAX || strpbrk(env, " \t\r\n"))
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "PLAN_COMM_ADDR '%.64s' is not an address", env);
    strcpy(addr, env);
    return PLAN_OK;
  }
  strcpy(addr, "127.0.0.1");
  char host[256];
  if (gethostname(host, sizeof host) != 0)
    return PLAN_OK;
  host[sizeof host - 1] = 0;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &res) != 0)
    return PLAN_OK;
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET &&
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ai->ai_addr)->sin_addr,
                  addr, ADDR_MAX))
      break;
  freeaddrinfo(res);
  return PLAN_OK;
}

/* A listening socket on an ephemeral port of every interface: IPv6 with
 * IPv4 mapped when the host has it, else IPv4. */
static int open_listener(tcp_comm *t, char *err, size_t errsz) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0) {
    int zero = 0;
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) != 0 ||
        bind(fd, (struct sockaddr *)&a6, sizeof a6) != 0) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a4;
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a4, sizeof a4) != 0) {
      close(fd);
      fd = -1;
    }
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  /* room for connections given up on (and retried) while this rank was
   * still connecting to the ranks below it */
  if (fd < 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "tcp rank %d: cannot listen on a TCP port: %s",
                     t->base.rank, strerror(e));
  }
  t->listen_fd = fd;
  t->port = ss.ss_family == AF_INET6
                ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return PLAN_OK;
}

static void hello_pack(unsigned char *h, int world, int from, int to) {
  put32(h, HELLO_MAGIC);
  put32(h + 4, HELLO_VERSION);
  put32(h + 8, (uint32_t)world);
  put32(h + 12, (uint32_t)from);
  put32(h + 16, (uint32_t)to);
}

/* Why attempts to connect failed, least to most telling: across retries
 * connect_lower keeps the most telling reason met (the latest of equals),
 * so a peer that failed during the handshake and removed its file is
 * reported as such, not as a file that is missing. */
enum {
  WHY_NONE,
  WHY_NO_FILE,
  WHY_BAD_FILE,
  WHY_UNRESOLVED,
  WHY_UNREACHABLE,
  WHY_HANDSHAKE
};

typedef struct why_kept {
  char text[512];
  int level;
} why_kept;

static void note_why(why_kept *w, int level, const char *fmt, ...)
    PLAN_PRINTF(3, 4);

static void note_why(why_kept *w, int level, const char *fmt, ...) {
  if (level < w->level)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->text, sizeof w->text, fmt, ap);
  va_end(ap);
  w->level = level;
}

/* A nonblocking close-on-exec connection to one of res's addresses
 * before the deadline: the socket, or -1 with errno. */
static int connect_to(const struct addrinfo *res, double deadline) {
  int s = -1, e = 0;
  for (const struct addrinfo *ai = res; ai && s < 0; ai = ai->ai_next) {
    s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
               ai->ai_protocol);
    if (s < 0) {
      e = errno;
      continue;
    }
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
      e = errno;
      if (e == EINPROGRESS || e == EINTR) {
        struct pollfd pfd = {s, POLLOUT, 0};
        int pr;
        while ((pr = poll(&pfd, 1, ms_left(deadline))) < 0 && errno == EINTR)
          ;
        socklen_t el = sizeof e;
        if (pr <= 0)
          e = ETIMEDOUT;
        else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
          e = errno;
      }
      if (e) {
        close(s);
        s = -1;
      }
    }
  }
  if (s < 0)
    errno = e;
  return s;
}

/* One attempt to connect to the address in peer's file and to shake hands,
 * within HANDSHAKE_S. PLAN_OK with *fd set; 1 to try again (why says what
 * went wrong: no file, refused, no answer, another process on that port);
 * a status for a final error. */
static int try_connect(tcp_comm *t, int peer, double deadline, int *fd,
                       why_kept *why, char *err, size_t errsz) {
  char *path = rank_path(t->folder, peer);
  if (!path)
    return plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
  char addr[ADDR_MAX], r[ADDR_MAX + 600];
  int port = 0, got = read_rank_file(path, addr, &port, r, sizeof r);
  if (got != 1) {
    note_why(why, got == 0 ? WHY_NO_FILE : WHY_BAD_FILE, "%s", r);
    free(path);
    return 1;
  }
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(addr, service, &hints, &res);
  if (gai != 0) {
    note_why(why, WHY_UNRESOLVED, "cannot resolve %s (from %s): %s", addr, path,
             gai_strerror(gai));
    free(path);
    return 1;
  }
  double hs = handshake_deadline(deadline);
  int s = connect_to(res, hs);
  int e = errno;
  freeaddrinfo(res);
  if (s < 0) {
    note_why(why, WHY_UNREACHABLE,
             "cannot reach rank %d at %s:%d (from %s): %s", peer, addr, port,
             path, strerror(e));
    free(path);
    return 1;
  }
  set_nodelay(s);
  unsigned char h[HELLO_BYTES], ack[ACK_BYTES];
  hello_pack(h, t->base.world, t->base.rank, peer);
  put32(ack, ACK_MAGIC);
  put32(ack + 4, (uint32_t)t->base.rank);
  hs = handshake_deadline(deadline);
  int rc = 1;
  if (io_all(s, h, sizeof h, 1, hs) != 0 ||
      io_all(s, h, sizeof h, 0, hs) != 0) {
    int e2 = errno;
    note_why(why, WHY_HANDSHAKE,
             "no handshake from rank %d at %s:%d (from %s): %s", peer, addr,
             port, path,
             e2 == EPIPE || e2 == ECONNRESET ? "it closed the connection"
                                             : strerror(e2));
  } else if (get32(h) != HELLO_MAGIC || get32(h + 4) != HELLO_VERSION ||
             (int)get32(h + 12) != peer) {
    /* a port reused by another process since the file was written */
    note_why(why, WHY_HANDSHAKE,
             "%s:%d (from %s) is not rank %d of this communicator", addr, port,
             path, peer);
  } else if ((int)get32(h + 8) != t->base.world) {
    rc = plan_errc(
        PLAN_EUSAGE, err, errsz,
        "tcp: rank %d runs in a world of %u, rank %d in a world of %d", peer,
        get32(h + 8), t->base.rank, t->base.world);
  } else if (io_all(s, ack, sizeof ack, 1, hs) != 0) {
    note_why(why, WHY_HANDSHAKE,
             "rank %d at %s:%d (from %s) left during the handshake: %s", peer,
             addr, port, path, strerror(errno));
  } else {
    *fd = s;
    s = -1;
    rc = PLAN_OK;
  }
  if (s >= 0)
    close(s);
  free(path);
  return rc;
}

static int connect_lower(tcp_comm *t, int peer, double deadline, char *err,
                         size_t errsz) {
  why_kept why = {"", WHY_NONE};
  for (;;) {
    int fd = -1;
    int rc = try_connect(t, peer, deadline, &fd, &why, err, errsz);
    if (rc == PLAN_OK) {
      t->fds[peer] = fd;
      return PLAN_OK;
    }
    if (rc != 1)
      return rc;
    if (ms_left(deadline) == 0)
      return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "tcp rank %d: no connection to rank %d within %g s: %s "
                       "(not started, or a file left by an earlier run)",
                       t->base.rank, peer, t->timeout_s, why.text);
    nap_ms(10);
  }
}

/* Accepts the ranks above this one, in whatever order they come. A
 * connection that does not complete its handshake within HANDSHAKE_S is
 * dropped: its rank, if it is one, tries again. */
static int accept_higher(tcp_comm *t, double deadline, char *err,
                         size_t errsz) {
  int rank = t->base.rank, world = t->base.world;
  int missing = world - 1 - rank;
  while (missing > 0) {
    struct pollfd pfd = {t->listen_fd, POLLIN, 0};
    int ms = ms_left(deadline);
    int pr = ms ? poll(&pfd, 1, ms) : 0;
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0) {
      int first = -1;
      for (int j = world - 1; j > rank; j--)
        if (t->fds[j] < 0)
          first = j;
      return plan_errc(
          PLAN_EUNSUPPORTED, err, errsz,
          "tcp rank %d: %d rank(s) did not connect within %g s (rank "
          "%d first; rendezvous %s)",
          rank, missing, t->timeout_s, first, t->folder);
    }
    int s = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (s < 0)
      continue; /* EAGAIN, a connection reset before we took it, EINTR */
    set_nodelay(s);
    double hs = handshake_deadline(deadline);
    unsigned char h[HELLO_BYTES];
    if (io_all(s, h, sizeof h, 0, hs) != 0 || get32(h) != HELLO_MAGIC ||
        get32(h + 4) != HELLO_VERSION) {
      close(s); /* not one of ours, or silent */
      continue;
    }
    int from = (int)get32(h + 12), to = (int)get32(h + 16);
    unsigned hw = get32(h + 8);
    unsigned char r[HELLO_BYTES], ack[ACK_BYTES];
    hello_pack(r, world, rank, from);
    /* the reply tells the caller who answered, also when it is refused */
    int sent = io_all(s, r, sizeof r, 1, hs) == 0;
    if (to != rank || !sent) {
      close(s); /* meant for a rank that was on this port before, or gone */
      continue;
    }
    if ((int)hw != world) {
      close(s);
      return plan_errc(
          PLAN_EUSAGE, err, errsz,
          "tcp: rank %d runs in a world of %u, rank %d in a world of %d", from,
          hw, rank, world);
    }
    if (io_all(s, ack, sizeof ack, 0, hs) != 0 || get32(ack) != ACK_MAGIC ||
        (int)get32(ack + 4) != from) {
      close(s); /* it gave this connection up: it tries again */
      continue;
    }
    if (from <= rank || from >= world || t->fds[from] >= 0) {
      close(s);
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "tcp rank %d: a second process claims rank %d", rank,
                       from);
    }
    t->fds[from] = s;
    missing--;
  }
  return PLAN_OK;
}

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
  if (make_folder(rendezvous) != 0) {
    rc = plan_errc(PLAN_EIO, err, errsz,
                   "tcp: cannot make the rendezvous folder '%s': %s",
                   rendezvous, strerror(errno));
    goto fail;
  }
  if ((rc = own_address(t->addr, err, errsz)) != PLAN_OK ||
      (rc = open_listener(t, err, errsz)) != PLAN_OK)
    goto fail;
  char line[ADDR_MAX + 32];
  int len = snprintf(line, sizeof line, "%s %d\n", t->addr, t->port);
  char *own = rank_path(rendezvous, rank);
  if (!own) {
    rc = plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
    goto fail;
  }
  if (plan_write_file_atomic(own, line, (size_t)len) != PLAN_OK) {
    rc = plan_errc(PLAN_EIO, err, errsz, "tcp: rendezvous: %s",
                   plan_error_last()->message);
    free(own);
    goto fail;
  }
  t->own = own;
  for (int j = 0; j < rank; j++)
    if ((rc = connect_lower(t, j, deadline, err, errsz)) != PLAN_OK)
      goto fail;
  if ((rc = accept_higher(t, deadline, err, errsz)) != PLAN_OK)
    goto fail;
  /* every pair is connected: nobody else needs the port */
  close(t->listen_fd);
  t->listen_fd = -1;
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
