/* The TCP communicator's rendezvous (comm_tcp_int.h): the folder, each
 * rank's address file, and one connection per pair of ranks (rank i
 * connects to every j < i and accepts every j > i), each checked by a
 * handshake with its own short bound (HANDSHAKE_S; see comm_tcp.c). */
#define _GNU_SOURCE /* accept4 */
#include "comm_tcp_int.h"

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

int plan_tcp_meet(tcp_comm *t, const char *rendezvous, double deadline,
                  char *err, size_t errsz) {
  int rc, rank = t->base.rank;
  if (make_folder(rendezvous) != 0) {
    rc = plan_errc(PLAN_EIO, err, errsz,
                   "tcp: cannot make the rendezvous folder '%s': %s",
                   rendezvous, strerror(errno));
    return rc;
  }
  if ((rc = own_address(t->addr, err, errsz)) != PLAN_OK ||
      (rc = open_listener(t, err, errsz)) != PLAN_OK)
    return rc;
  char line[ADDR_MAX + 32];
  int len = snprintf(line, sizeof line, "%s %d\n", t->addr, t->port);
  char *own = rank_path(rendezvous, rank);
  if (!own) {
    rc = plan_errc(PLAN_ENOMEM, err, errsz, "tcp: out of memory");
    return rc;
  }
  if (plan_write_file_atomic(own, line, (size_t)len) != PLAN_OK) {
    rc = plan_errc(PLAN_EIO, err, errsz, "tcp: rendezvous: %s",
                   plan_error_last()->message);
    free(own);
    return rc;
  }
  t->own = own;
  for (int j = 0; j < rank; j++)
    if ((rc = connect_lower(t, j, deadline, err, errsz)) != PLAN_OK)
      return rc;
  if ((rc = accept_higher(t, deadline, err, errsz)) != PLAN_OK)
    return rc;
  /* every pair is connected: nobody else needs the port */
  close(t->listen_fd);
  t->listen_fd = -1;
  return PLAN_OK;
}
