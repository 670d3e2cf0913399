/* The TCP communicator (runners/comm_tcp.c) and the fold all-reduce
 * (runners/comm.c): processes forked per rank over a fresh rendezvous
 * folder exchange messages (ring, all-to-all with a size per pair, several
 * to one peer, empty, 64 MiB both ways at once), all-reduce in member order
 * bit for bit, in disjoint groups at once; sizes, worlds and groups that
 * do not match are errors, a rank that never comes or leaves is an error
 * after the timeout, never a hang; a silent connection does not hold up
 * the rendezvous; messages left over from an earlier exchange are
 * reported, never taken as the current one's; every socket is
 * close-on-exec from its creation. Each child reports through its exit
 * status (0: as expected); the parent asserts. */
#define _DEFAULT_SOURCE /* syscall, for the socket and fcntl wrappers */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "ir/ir.h"
#include "libplan/common.h"

#define TIMEOUT 5.0 /* the ranks' timeout where none is under test */

/* The library's socket and fcntl calls come here (the test links it
 * statically): a socket made without SOCK_CLOEXEC, or flags set on a
 * descriptor after it was made, leave a moment in which a fork and exec in
 * another thread of the process inherits the descriptor. Counted per
 * process, so per rank. */
static int sockets_without_cloexec, flags_set_late;

int socket(int domain, int type, int protocol) {
  if ((domain == AF_INET || domain == AF_INET6) && !(type & SOCK_CLOEXEC))
    sockets_without_cloexec++;
  return (int)syscall(SYS_socket, domain, type, protocol);
}

int fcntl(int fd, int cmd, ...) {
  long arg = 0;
  if (cmd != F_GETFD && cmd != F_GETFL) {
    va_list ap;
    va_start(ap, cmd);
    arg = cmd == F_SETFD || cmd == F_SETFL || cmd == F_DUPFD ||
                  cmd == F_DUPFD_CLOEXEC
              ? (long)va_arg(ap, int)
              : (long)(intptr_t)va_arg(ap, void *);
    va_end(ap);
  }
  struct stat st;
  if ((cmd == F_SETFD || cmd == F_SETFL) && fstat(fd, &st) == 0 &&
      S_ISSOCK(st.st_mode))
    flags_set_late++;
  return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

typedef int (*rank_fn)(int rank, int world, const char *dir, void *arg);

static void nap(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A child's failure: what went wrong on which rank, and exit code. */
static int bad(int rank, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d: ", rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return code;
}

static char *fresh_dir(void) {
  const char *tmp = getenv("TMPDIR");
  char *d = malloc(512);
  assert_non_null(d);
  snprintf(d, 512, "%s/plan-comm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(d));
  return d;
}

/* Removes the folder, which must be empty: every rank removed its file. */
static void drop_dir(char *d) {
  assert_int_equal(rmdir(d), 0);
  free(d);
}

/* Forks one child per entry of ranks[0..n) (rank ranks[i] of a world of
 * worlds[i]), runs fn in each, and returns when all have exited, killing
 * them after 30 s. Asserts every exit status is 0. */
static void run_ranks_as(int n, const int *ranks, const int *worlds,
                         const char *dir, rank_fn fn, void *arg) {
  pid_t pids[16];
  assert_true(n <= 16);
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      int code = fn(ranks[i], worlds[i], dir, arg);
      fflush(stderr);
      _exit(code);
    }
  }
  int status[16], left = n;
  for (int i = 0; i < n; i++)
    status[i] = -1;
  double end = now_s() + 30;
  while (left > 0 && now_s() < end) {
    for (int i = 0; i < n; i++) {
      if (status[i] != -1)
        continue;
      int st;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        left--;
      }
    }
    if (left)
      nap(2000);
  }
  for (int i = 0; i < n; i++)
    if (status[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
      fprintf(stderr, "rank %d hung: killed\n", ranks[i]);
    }
  for (int i = 0; i < n; i++) {
    if (status[i])
      fprintf(stderr, "rank %d of %d exited with %d\n", ranks[i], worlds[i],
              status[i]);
    assert_int_equal(status[i], 0);
  }
}

static void run_ranks(int world, const char *dir, rank_fn fn, void *arg) {
  int ranks[16], worlds[16];
  for (int i = 0; i < world; i++) {
    ranks[i] = i;
    worlds[i] = world;
  }
  run_ranks_as(world, ranks, worlds, dir, fn, arg);
}

/* run_ranks in a fresh rendezvous folder, removed after. */
static void in_fresh_dir(int world, rank_fn fn, void *arg) {
  char *dir = fresh_dir();
  run_ranks(world, dir, fn, arg);
  drop_dir(dir);
}

static plan_comm *open_or_die(int rank, int world, const char *dir) {
  plan_comm *c = NULL;
  char err[512];
  int rc = plan_comm_tcp_open(&c, rank, world, dir, TIMEOUT, err, sizeof err);
  if (rc) {
    bad(rank, 0, "open: %d %s", rc, err);
    fflush(stderr);
    _exit(90);
  }
  return c;
}

/* ---- exchange ------------------------------------------------------------ */

static unsigned char pattern(int from, int to, int64_t k) {
  return (unsigned char)(from * 31 + to * 7 + k * 13 + (k >> 8));
}

static int check_pattern(const unsigned char *b, int64_t n, int from, int to) {
  for (int64_t k = 0; k < n; k++)
    if (b[k] != pattern(from, to, k))
      return 0;
  return 1;
}

static void fill_pattern(unsigned char *b, int64_t n, int from, int to) {
  for (int64_t k = 0; k < n; k++)
    b[k] = pattern(from, to, k);
}

static int ring_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  char err[512];
  int code = 0;
  for (int round = 0; round < 3 && !code; round++) {
    unsigned char out[1000], in[1000];
    fill_pattern(out, sizeof out, rank, next + round);
    memset(in, 0, sizeof in);
    plan_comm_msg s = {next, out, sizeof out}, r = {prev, in, sizeof in};
    int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
    if (rc)
      code = bad(rank, 1, "ring: %d %s", rc, err);
    else if (!check_pattern(in, sizeof in, prev, rank + round))
      code = bad(rank, 2, "ring: wrong bytes from rank %d", prev);
  }
  char d[512];
  c->ops->describe(c, d, sizeof d);
  char want[512];
  snprintf(want, sizeof want, "tcp, rank %d of %d, ", rank, world);
  if (!code && (strncmp(d, want, strlen(want)) || !strstr(d, dir)))
    code = bad(rank, 3, "describe: '%s'", d);
  plan_comm_close(c);
  return code;
}

static void test_ring(void **state) {
  (void)state;
  for (int world = 2; world <= 4; world++) {
    char *dir = fresh_dir();
    run_ranks(world, dir, ring_rank, NULL);
    drop_dir(dir);
  }
}

/* A folder that does not exist yet, two levels down, and no
 * PLAN_COMM_ADDR: the host name's address. */
static void test_ring_made_folder(void **state) {
  (void)state;
  char *dir = fresh_dir();
  char sub[600];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  unsetenv("PLAN_COMM_ADDR");
  run_ranks(3, sub, ring_rank, NULL);
  setenv("PLAN_COMM_ADDR", "127.0.0.1", 1);
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  assert_int_equal(rmdir(sub), 0);
  snprintf(sub, sizeof sub, "%s/a", dir);
  assert_int_equal(rmdir(sub), 0);
  drop_dir(dir);
}

/* Bytes from rank i to rank j: distinct per ordered pair, some empty. */
static int64_t pair_bytes(int i, int j) {
  return (i + 2 * j) % 5 == 0 ? 0 : 97 * (1 + i) + 1031 * j;
}

static int all_to_all_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  plan_comm_msg s[16], r[16];
  int ns = 0, nr = 0, code = 0;
  /* posted in different orders on purpose: the order within a call is
   * free except between the same two ranks */
  for (int k = 0; k < world; k++) {
    int j = (rank + k) % world, i = (rank + world - k) % world;
    if (j != rank) {
      int64_t b = pair_bytes(rank, j);
      s[ns] = (plan_comm_msg){j, b ? malloc((size_t)b) : NULL, b};
      if (b)
        fill_pattern(s[ns].buf, b, rank, j);
      ns++;
    }
    if (i != rank) {
      int64_t b = pair_bytes(i, rank);
      r[nr++] = (plan_comm_msg){i, b ? calloc(1, (size_t)b) : NULL, b};
    }
  }
  char err[512];
  int rc = c->ops->exchange(c, s, ns, r, nr, err, sizeof err);
  if (rc)
    code = bad(rank, 1, "all-to-all: %d %s", rc, err);
  for (int k = 0; k < nr && !code; k++)
    if (!check_pattern(r[k].buf, r[k].bytes, r[k].peer, rank))
      code = bad(rank, 2, "all-to-all: wrong bytes from rank %d", r[k].peer);
  for (int k = 0; k < ns; k++)
    free(s[k].buf);
  for (int k = 0; k < nr; k++)
    free(r[k].buf);
  /* an exchange with nothing in it */
  if (!code && (rc = c->ops->exchange(c, NULL, 0, NULL, 0, err, sizeof err)))
    code = bad(rank, 3, "empty exchange: %d %s", rc, err);
  plan_comm_close(c);
  return code;
}

static void test_all_to_all(void **state) {
  (void)state;
  for (int world = 2; world <= 4; world++) {
    char *dir = fresh_dir();
    run_ranks(world, dir, all_to_all_rank, NULL);
    drop_dir(dir);
  }
}

/* Rank 0 and rank 1 send each other four messages (one empty) in one
 * call; they arrive in posting order. */
static int order_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  int peer = 1 - rank, code = 0;
  static const int64_t sizes[4] = {24, 0, 4096, 8};
  unsigned char out[4][4096], in[4][4096];
  plan_comm_msg s[4], r[4];
  for (int k = 0; k < 4; k++) {
    memset(out[k], 0x10 * rank + k + 1, sizeof out[k]);
    memset(in[k], 0, sizeof in[k]);
    s[k] = (plan_comm_msg){peer, out[k], sizes[k]};
    r[k] = (plan_comm_msg){peer, in[k], sizes[k]};
  }
  char err[512];
  int rc = c->ops->exchange(c, s, 4, r, 4, err, sizeof err);
  if (rc)
    code = bad(rank, 1, "order: %d %s", rc, err);
  for (int k = 0; k < 4 && !code; k++)
    for (int64_t b = 0; b < sizes[k]; b++)
      if (in[k][b] != 0x10 * peer + k + 1) {
        code = bad(rank, 2, "order: message %d holds another's bytes", k);
        break;
      }
  /* only sends on one side, only receives on the other */
  if (!code) {
    memset(out[0], 0x7e, sizeof out[0]);
    rc = rank ? c->ops->exchange(c, NULL, 0, r, 2, err, sizeof err)
              : c->ops->exchange(c, s, 2, NULL, 0, err, sizeof err);
    if (rc)
      code = bad(rank, 3, "one way: %d %s", rc, err);
    else if (rank && (in[0][0] != 0x7e || in[0][23] != 0x7e || in[0][24]))
      code = bad(rank, 4, "one way: wrong bytes");
  }
  plan_comm_close(c);
  return code;
}

static void test_order(void **state) {
  (void)state;
  in_fresh_dir(2, order_rank, NULL);
}

#define BIG ((int64_t)64 << 20)

/* 64 MiB each way at once: neither side may wait for the other's
 * receive before sending. */
static int big_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  int peer = 1 - rank, code = 0;
  uint64_t *out = malloc((size_t)BIG), *in = calloc(1, (size_t)BIG);
  if (!out || !in)
    return bad(rank, 5, "out of memory");
  int64_t n = BIG / 8;
  for (int64_t k = 0; k < n; k++)
    out[k] = (uint64_t)k * 2654435761u ^ (uint64_t)rank << 60;
  plan_comm_msg s = {peer, out, BIG}, r = {peer, in, BIG};
  char err[512];
  double t0 = now_s();
  int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
  double dt = now_s() - t0;
  if (rc)
    code = bad(rank, 1, "64 MiB: %d %s", rc, err);
  for (int64_t k = 0; k < n && !code; k++)
    if (in[k] != ((uint64_t)k * 2654435761u ^ (uint64_t)peer << 60))
      code = bad(rank, 2, "64 MiB: word %lld differs", (long long)k);
  if (!code && rank == 0)
    fprintf(stderr, "comm: %lld MiB each way in %.3f s\n",
            (long long)(BIG >> 20), dt);
  free(out);
  free(in);
  plan_comm_close(c);
  return code;
}

static void test_big(void **state) {
  (void)state;
  in_fresh_dir(2, big_rank, NULL);
}

/* ---- all-reduce ---------------------------------------------------------- */

#define NV 12

/* Member m's value at e: big values that cancel, ones that vanish beside
 * them, signed zeros and a NaN, so another order gives other bits. */
static double value(int m, int e, int round) {
  static const double v[6] = {1e16, 1, -1e16, 0.0, -0.0, 3.5};
  if (e == NV - 1)
    return m == 1 ? NAN : (double)m;
  return v[(m * 5 + e + round) % 6] * (e % 3 == 2 ? -1 : 1) + (e == 7 ? m : 0);
}

static void local_fold(const int *members, int nmembers, int reduce, int round,
                       double *out) {
  for (int e = 0; e < NV; e++) {
    double acc = value(members[0], e, round);
    for (int i = 1; i < nmembers; i++) {
      double x = value(members[i], e, round);
      if (reduce == PLAN_RED_MAX)
        acc = acc > x ? acc : x;
      else if (reduce == PLAN_RED_MIN)
        acc = acc < x ? acc : x;
      else
        acc = acc + x;
    }
    out[e] = reduce == PLAN_RED_AVG ? acc / nmembers : acc;
  }
}

typedef struct groups {
  int ngroups, size;
  int members[4][4];
} groups;

static int reduce_rank(int rank, int world, const char *dir, void *arg) {
  const groups *g = arg;
  const int *members = NULL;
  for (int k = 0; k < g->ngroups; k++)
    for (int i = 0; i < g->size; i++)
      if (g->members[k][i] == rank)
        members = g->members[k];
  if (!members)
    return bad(rank, 9, "in no group");
  plan_comm *c = open_or_die(rank, world, dir);
  char err[512];
  int code = 0;
  for (int round = 0; round < 2 && !code; round++)
    for (int red = 0; red < PLAN_RED_COUNT && !code; red++) {
      double buf[NV], want[NV];
      for (int e = 0; e < NV; e++)
        buf[e] = value(rank, e, round);
      local_fold(members, g->size, red, round, want);
      int rc = c->ops->all_reduce(c, members, g->size, buf, NV, red, err,
                                  sizeof err);
      if (rc)
        code = bad(rank, 1, "all_reduce %d: %d %s", red, rc, err);
      else if (memcmp(buf, want, sizeof buf) != 0)
        code = bad(rank, 2, "all_reduce %d: not the member-order fold", red);
    }
  plan_comm_close(c);
  return code;
}

static void test_all_reduce(void **state) {
  (void)state;
  /* member order differs from rank order */
  static const groups g2 = {1, 2, {{1, 0}}};
  static const groups g3 = {1, 3, {{2, 0, 1}}};
  static const groups g4 = {1, 4, {{0, 3, 1, 2}}};
  const groups *gs[3] = {&g2, &g3, &g4};
  for (int w = 2; w <= 4; w++) {
    char *dir = fresh_dir();
    run_ranks(w, dir, reduce_rank, (void *)gs[w - 2]);
    drop_dir(dir);
  }
  /* the values do tell orders apart: the fold over another order differs */
  double a[NV], b[NV];
  static const int fwd[3] = {0, 1, 2}, rev[3] = {2, 1, 0};
  for (int red = 0; red < PLAN_RED_COUNT; red++) {
    local_fold(fwd, 3, red, 0, a);
    local_fold(rev, 3, red, 0, b);
    assert_memory_not_equal(a, b, sizeof a);
  }
}

/* Two disjoint groups of 2 in a world of 4, reducing at the same time. */
static void test_subgroups(void **state) {
  (void)state;
  static const groups g = {2, 2, {{0, 2}, {3, 1}}};
  char *dir = fresh_dir();
  run_ranks(4, dir, reduce_rank, (void *)&g);
  drop_dir(dir);
}

/* Ranks that disagree on the reduction: PLAN_EUSAGE on both. */
static int reduce_mismatch_rank(int rank, int world, const char *dir,
                                void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  static const int members[2] = {0, 1};
  double buf[4] = {1, 2, 3, 4};
  char err[512];
  int rc =
      c->ops->all_reduce(c, members, 2, buf, 4,
                         rank ? PLAN_RED_MAX : PLAN_RED_SUM, err, sizeof err);
  int code = 0;
  if (rc != PLAN_EUSAGE || !strstr(err, "max") || !strstr(err, "sum"))
    code = bad(rank, 1, "reduction mismatch: %d '%s'", rc, err);
  plan_comm_close(c);
  return code;
}

static void test_all_reduce_mismatch(void **state) {
  (void)state;
  in_fresh_dir(2, reduce_mismatch_rank, NULL);
}

/* Ranks that disagree on the length: the fold's description of both
 * calls, not a message size. */
static int reduce_length_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  static const int members[2] = {0, 1};
  double buf[4] = {1, 2, 3, 4};
  char err[512];
  int rc = c->ops->all_reduce(c, members, 2, buf, rank ? 3 : 4, PLAN_RED_SUM,
                              err, sizeof err);
  char want[80];
  snprintf(want, sizeof want, "rank %d reduces %d doubles (sum) over a group",
           1 - rank, rank ? 4 : 3);
  int code = 0;
  if (rc != PLAN_EUSAGE || !strstr(err, want))
    code = bad(rank, 1, "length mismatch: %d '%s'", rc, err);
  plan_comm_close(c);
  return code;
}

static void test_all_reduce_length(void **state) {
  (void)state;
  in_fresh_dir(2, reduce_length_rank, NULL);
}

/* Groups of different sizes in one step, a group of one among them: the
 * ranks' exchanges stay in step after it. */
static int mixed_groups_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  static const int alone[1] = {0}, pair[2] = {2, 1};
  const int *members = rank ? pair : alone;
  int n = rank ? 2 : 1;
  plan_comm *c = open_or_die(rank, world, dir);
  char err[512];
  double buf[NV], want[NV];
  for (int e = 0; e < NV; e++)
    buf[e] = value(rank, e, 0);
  local_fold(members, n, PLAN_RED_SUM, 0, want);
  int rc =
      c->ops->all_reduce(c, members, n, buf, NV, PLAN_RED_SUM, err, sizeof err);
  int code = 0;
  if (rc)
    code = bad(rank, 1, "all_reduce: %d %s", rc, err);
  else if (memcmp(buf, want, sizeof buf) != 0)
    code = bad(rank, 2, "all_reduce: not the member-order fold");
  /* then a ring over the world */
  int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  unsigned char out[100], in[100];
  fill_pattern(out, sizeof out, rank, next);
  plan_comm_msg s = {next, out, sizeof out}, r = {prev, in, sizeof in};
  if (!code && (rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err)))
    code = bad(rank, 3, "ring after the all_reduce: %d %s", rc, err);
  else if (!code && !check_pattern(in, sizeof in, prev, rank))
    code = bad(rank, 4, "ring after the all_reduce: wrong bytes");
  plan_comm_close(c);
  return code;
}

static void test_mixed_groups(void **state) {
  (void)state;
  in_fresh_dir(3, mixed_groups_rank, NULL);
}

/* ---- errors -------------------------------------------------------------- */

/* Rank 1 expects 640 bytes where rank 0 sends 800, then 640 where rank 0
 * sends 8 MiB: PLAN_EUSAGE on rank 1 each time, rank 0 finishes, and the
 * next exchange is in step again. */
static int mismatch_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  int code = 0;
  char err[512];
  size_t big = (size_t)8 << 20;
  unsigned char *buf = calloc(1, big);
  if (!buf)
    return bad(rank, 5, "out of memory");
  static const int64_t sent[2] = {800, (int64_t)8 << 20};
  for (int k = 0; k < 2 && !code; k++) {
    int rc;
    if (rank == 0) {
      plan_comm_msg s = {1, buf, sent[k]};
      rc = c->ops->exchange(c, &s, 1, NULL, 0, err, sizeof err);
      if (rc)
        code = bad(rank, 1, "sender: %d %s", rc, err);
    } else {
      plan_comm_msg r = {0, buf, 640};
      rc = c->ops->exchange(c, NULL, 0, &r, 1, err, sizeof err);
      char want[80];
      snprintf(want, sizeof want, "rank 0 sent %lld bytes, 640 expected",
               (long long)sent[k]);
      if (rc != PLAN_EUSAGE || !strstr(err, want))
        code = bad(rank, 2, "receiver: %d '%s'", rc, err);
    }
  }
  /* two messages sent, one expected */
  if (!code) {
    plan_comm_msg m[2] = {{1 - rank, buf, 16}, {1 - rank, buf + 16, 16}};
    int rc = rank == 0 ? c->ops->exchange(c, m, 2, NULL, 0, err, sizeof err)
                       : c->ops->exchange(c, NULL, 0, m, 1, err, sizeof err);
    if (rank == 0 && rc)
      code = bad(rank, 3, "sender: %d %s", rc, err);
    if (rank == 1 && (rc != PLAN_EUSAGE || !strstr(err, "2 message")))
      code = bad(rank, 4, "receiver: %d '%s'", rc, err);
  }
  /* in step again */
  if (!code) {
    memset(buf, 0x5a + rank, 64);
    plan_comm_msg s = {1 - rank, buf, 32}, r = {1 - rank, buf + 32, 32};
    int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
    if (rc || buf[40] != 0x5a + (1 - rank))
      code = bad(rank, 6, "after the mismatch: %d %s", rc, err);
  }
  free(buf);
  plan_comm_close(c);
  return code;
}

static void test_size_mismatch(void **state) {
  (void)state;
  char *dir = fresh_dir();
  double t0 = now_s();
  run_ranks(2, dir, mismatch_rank, NULL);
  assert_true(now_s() - t0 < TIMEOUT); /* nobody waited for a timeout */
  drop_dir(dir);
}

/* World 3, rank 2 never comes: both others fail after their 1 s. */
static int absent_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = NULL;
  char err[512];
  double t0 = now_s();
  int rc = plan_comm_tcp_open(&c, rank, world, dir, 1.0, err, sizeof err);
  double dt = now_s() - t0;
  if (rc != PLAN_EUNSUPPORTED || c || !strstr(err, "rank 2") || dt < 0.9 ||
      dt > 4)
    return bad(rank, 1, "absent rank: %d after %.2f s '%s'", rc, dt, err);
  return 0;
}

static void test_absent_rank(void **state) {
  (void)state;
  char *dir = fresh_dir();
  int ranks[2] = {0, 1}, worlds[2] = {3, 3};
  run_ranks_as(2, ranks, worlds, dir, absent_rank, NULL);
  drop_dir(dir);
}

/* Rank 1 of a world of 3 meets rank 0 of a world of 2. */
static int world_mismatch_rank(int rank, int world, const char *dir,
                               void *arg) {
  (void)arg;
  plan_comm *c = NULL;
  char err[512];
  int rc = plan_comm_tcp_open(&c, rank, world, dir, TIMEOUT, err, sizeof err);
  if (rc != PLAN_EUSAGE || c || !strstr(err, "world of 3") ||
      !strstr(err, "world of 2"))
    return bad(rank, 1, "world mismatch: %d '%s'", rc, err);
  return 0;
}

static void test_world_mismatch(void **state) {
  (void)state;
  char *dir = fresh_dir();
  int ranks[2] = {0, 1}, worlds[2] = {2, 3};
  double t0 = now_s();
  run_ranks_as(2, ranks, worlds, dir, world_mismatch_rank, NULL);
  assert_true(now_s() - t0 < TIMEOUT);
  drop_dir(dir);
}

/* Rank 1 leaves without a word: rank 0's exchange names it. */
static int gone_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  if (rank == 1) {
    plan_comm_close(c);
    return 0;
  }
  double x[1024] = {0}, y[1024];
  plan_comm_msg s = {1, x, sizeof x}, r = {1, y, sizeof y};
  char err[512];
  int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
  plan_comm_close(c);
  if (rc != PLAN_EUNSUPPORTED || !strstr(err, "rank 1"))
    return bad(rank, 1, "peer gone: %d '%s'", rc, err);
  return 0;
}

static void test_peer_gone(void **state) {
  (void)state;
  char *dir = fresh_dir();
  double t0 = now_s();
  run_ranks(2, dir, gone_rank, NULL);
  assert_true(now_s() - t0 < TIMEOUT);
  drop_dir(dir);
}

/* A file left by an earlier run, pointing to a port nobody listens on:
 * rank 1 alone fails after its timeout saying so; with rank 0 coming late
 * and writing a fresh file, both connect. */
static int stale_rank(int rank, int world, const char *dir, void *arg) {
  int late = *(const int *)arg;
  if (rank == 0 && late)
    nap(300000);
  plan_comm *c = NULL;
  char err[512];
  int rc = plan_comm_tcp_open(&c, rank, world, dir, late ? TIMEOUT : 1.0, err,
                              sizeof err);
  if (late) {
    if (rc)
      return bad(rank, 1, "late rank 0: %d %s", rc, err);
    plan_comm_close(c);
    return 0;
  }
  if (rc != PLAN_EUNSUPPORTED || !strstr(err, "rank 0") ||
      !strstr(err, "earlier run"))
    return bad(rank, 2, "stale file: %d '%s'", rc, err);
  return 0;
}

static void write_stale(const char *dir) {
  /* a port that was free a moment ago */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t al = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &al), 0);
  close(s);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-0", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "127.0.0.1 %d\n", ntohs(a.sin_port));
  fclose(f);
}

static void test_stale_file(void **state) {
  (void)state;
  char *dir = fresh_dir();
  write_stale(dir);
  int one = 1, zero = 0, r1 = 1, w2 = 2;
  run_ranks_as(1, &r1, &w2, dir, stale_rank, &zero);
  run_ranks(2, dir, stale_rank, &one);
  drop_dir(dir); /* rank 0's fresh file replaced the stale one, then went */
}

static void test_bad_folder(void **state) {
  (void)state;
  char *dir = fresh_dir();
  char file[600], sub[700];
  snprintf(file, sizeof file, "%s/file", dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(sub, sizeof sub, "%s/rendezvous", file);
  plan_comm *c = NULL;
  char err[1024];
  int rc = plan_comm_tcp_open(&c, 0, 2, sub, 1.0, err, sizeof err);
  assert_int_equal(rc, PLAN_EIO);
  assert_null(c);
  assert_non_null(strstr(err, sub));
  assert_int_equal(unlink(file), 0);
  drop_dir(dir);
}

/* World 1: no folder, no peers; arguments checked. */
static void test_world_one(void **state) {
  (void)state;
  plan_comm *c = NULL;
  char err[512];
  assert_int_equal(plan_comm_tcp_open(&c, 0, 1, NULL, 1.0, err, sizeof err),
                   PLAN_OK);
  assert_non_null(c);
  assert_int_equal(c->ops->exchange(c, NULL, 0, NULL, 0, err, sizeof err), 0);
  double buf[3] = {1, -0.0, 7};
  static const int me = 0;
  for (int red = 0; red < PLAN_RED_COUNT; red++) {
    assert_int_equal(
        c->ops->all_reduce(c, &me, 1, buf, 3, red, err, sizeof err), 0);
    assert_true(buf[0] == 1 && signbit(buf[1]) && buf[2] == 7);
  }
  char d[128];
  c->ops->describe(c, d, sizeof d);
  assert_string_equal(d, "tcp, rank 0 of 1");
  /* a message to itself, a group without it, twice the same rank, none */
  plan_comm_msg m = {0, buf, 8};
  assert_int_equal(c->ops->exchange(c, &m, 1, NULL, 0, err, sizeof err),
                   PLAN_EUSAGE);
  static const int other = 1, twice[2] = {0, 0};
  assert_int_equal(c->ops->all_reduce(c, &other, 1, buf, 3, 0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(c->ops->all_reduce(c, twice, 2, buf, 3, 0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(c->ops->all_reduce(c, &me, 0, buf, 3, 0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(c->ops->all_reduce(c, &me, 1, buf, 3, 9, err, sizeof err),
                   PLAN_EUSAGE);
  plan_comm_close(c);
  plan_comm_close(NULL);
  /* bad opens */
  c = (plan_comm *)&c;
  assert_int_equal(plan_comm_tcp_open(&c, 2, 2, "x", 1.0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_null(c);
  assert_int_equal(plan_comm_tcp_open(&c, 0, 2, NULL, 1.0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(plan_comm_tcp_open(&c, 0, 1, NULL, 0.0, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(plan_comm_tcp_open(&c, 0, PLAN_COMM_MAX_WORLD + 1, "x", 1.0,
                                      err, sizeof err),
                   PLAN_EUSAGE);
}

/* ---- rendezvous that goes on past a silent connection -------------------- */

/* Waits up to s seconds for path to exist (present 1) or to be gone
 * (present 0). 1 when it did. */
static int wait_path(const char *path, int present, double s) {
  double end = now_s() + s;
  for (;;) {
    int there = access(path, F_OK) == 0;
    if (there == present)
      return 1;
    if (now_s() > end)
      return 0;
    nap(10000);
  }
}

/* A blocking TCP connection to the address in dir's rank-r file, once it
 * is there; -1 when it does not come. */
static int connect_to_rank_file(const char *dir, int r) {
  char path[600];
  snprintf(path, sizeof path, "%s/rank-%d", dir, r);
  if (!wait_path(path, 1, 5))
    return -1;
  char addr[64];
  int port = 0;
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int ok = fscanf(f, "%63s %d", addr, &port) == 2;
  fclose(f);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  int s = ok ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  if (s >= 0 && (inet_pton(AF_INET, addr, &a.sin_addr) != 1 ||
                 connect(s, (struct sockaddr *)&a, sizeof a) != 0)) {
    close(s);
    s = -1;
  }
  return s;
}

/* One exchange of 64 bytes each way between ranks 0 and 1: 0 when the
 * bytes came. */
static int pair_ok(plan_comm *c, int rank) {
  unsigned char out[64], in[64];
  fill_pattern(out, sizeof out, rank, 1 - rank);
  memset(in, 0, sizeof in);
  plan_comm_msg s = {1 - rank, out, sizeof out}, r = {1 - rank, in, sizeof in};
  char err[512];
  int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
  if (rc)
    return bad(rank, 1, "exchange: %d %s", rc, err);
  if (!check_pattern(in, sizeof in, 1 - rank, rank))
    return bad(rank, 2, "exchange: wrong bytes");
  return 0;
}

/* Opens with a timeout of 8 s, which the rendezvous must not need. */
static int open_quickly(int rank, int world, const char *dir,
                        const char *what) {
  plan_comm *c = NULL;
  char err[512];
  double t0 = now_s();
  int rc = plan_comm_tcp_open(&c, rank, world, dir, 8.0, err, sizeof err);
  double dt = now_s() - t0;
  if (rc)
    return bad(rank, 10, "%s: open: %d after %.2f s '%s'", what, rc, dt, err);
  int code = pair_ok(c, rank);
  plan_comm_close(c);
  if (!code && dt > 5.5)
    code = bad(rank, 11, "%s: the rendezvous took %.2f s", what, dt);
  return code;
}

/* Rank -1 connects to rank 0's port, says nothing and holds the connection
 * until rank 0 is gone; rank 1 comes only after it. */
static int idle_client_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  char marker[600], own0[600];
  snprintf(marker, sizeof marker, "%s/idle", dir);
  snprintf(own0, sizeof own0, "%s/rank-0", dir);
  if (rank < 0) {
    int s = connect_to_rank_file(dir, 0);
    if (s < 0)
      return bad(rank, 20, "idle client: no connection to rank 0");
    FILE *f = fopen(marker, "w");
    if (f)
      fclose(f);
    wait_path(own0, 0, 12);
    close(s);
    return f ? 0 : bad(rank, 21, "cannot write %s", marker);
  }
  if (rank == 1 && !wait_path(marker, 1, 5))
    return bad(rank, 22, "the idle client did not connect");
  return open_quickly(rank, world, dir, "idle client");
}

static void test_idle_client(void **state) {
  (void)state;
  char *dir = fresh_dir();
  int ranks[3] = {0, 1, -1}, worlds[3] = {2, 2, 2};
  run_ranks_as(3, ranks, worlds, dir, idle_client_rank, NULL);
  char marker[600];
  snprintf(marker, sizeof marker, "%s/idle", dir);
  assert_int_equal(unlink(marker), 0);
  drop_dir(dir);
}

/* A listener on 127.0.0.1 that never accepts; its port in *port. */
static int silent_listener(int *port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(s >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(s, 4), 0);
  socklen_t al = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &al), 0);
  *port = ntohs(a.sin_port);
  return s;
}

static int late_zero_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  if (rank == 0)
    nap(300000);
  return open_quickly(rank, world, dir, "silent listener");
}

/* A stale rank-0 file points at a listener that takes connections and
 * never answers: rank 1 gives that handshake up, reads the file again and
 * meets rank 0, which came late and wrote a fresh one. */
static void test_silent_listener(void **state) {
  (void)state;
  char *dir = fresh_dir();
  int port, ls = silent_listener(&port);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-0", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "127.0.0.1 %d\n", port);
  fclose(f);
  run_ranks(2, dir, late_zero_rank, NULL);
  close(ls);
  drop_dir(dir);
}

/* Rank 0 is a process that takes rank 1's connection, closes it and
 * removes its file, as a rank that fails during the handshake does: rank
 * 1's error says what happened, not that the file is gone. */
static int failing_zero_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  if (rank == 0) {
    int port, ls = silent_listener(&port);
    char path[600], tmp[620];
    snprintf(path, sizeof path, "%s/rank-0", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
      return bad(rank, 30, "cannot write %s", tmp);
    fprintf(f, "127.0.0.1 %d\n", port);
    fclose(f);
    if (rename(tmp, path) != 0)
      return bad(rank, 31, "cannot rename %s", tmp);
    int s = accept(ls, NULL, NULL);
    unsigned char h[20];
    int code = s < 0 || recv(s, h, sizeof h, MSG_WAITALL) != (ssize_t)sizeof h
                   ? bad(rank, 32, "no hello from rank 1")
                   : 0;
    if (s >= 0)
      close(s);
    unlink(path);
    close(ls);
    return code;
  }
  plan_comm *c = NULL;
  char err[512];
  int rc = plan_comm_tcp_open(&c, rank, world, dir, 1.5, err, sizeof err);
  if (rc != PLAN_EUNSUPPORTED || c || !strstr(err, "handshake from rank 0") ||
      strstr(err, "no file"))
    return bad(rank, 33, "failed rank 0: %d '%s'", rc, err);
  return 0;
}

static void test_reason_kept(void **state) {
  (void)state;
  in_fresh_dir(2, failing_zero_rank, NULL);
}

/* ---- messages of an earlier exchange ------------------------------------- */

/* One exchange between ranks 0 and 1, each side's messages given by
 * flags: rank 0 sends, rank 0 receives, rank 1 sends, rank 1 receives;
 * NOBYTES: rank 1 receives nothing whatever rc. tag marks the bytes of
 * this call. rc and the received bytes checked: want1 is rank 1's
 * status, where "expect" names what its err says. */
enum { S0 = 1, R0 = 2, S1 = 4, R1 = 8, NOBYTES = 16 };

static int step(plan_comm *c, int rank, int flags, int tag, int want1,
                const char *expect) {
  unsigned char out[32], in[32];
  memset(out, tag + 16 * rank, sizeof out);
  memset(in, 0, sizeof in);
  int peer = 1 - rank;
  plan_comm_msg s = {peer, out, sizeof out}, r = {peer, in, sizeof in};
  int sends = flags & (rank ? S1 : S0), recvs = flags & (rank ? R1 : R0);
  char err[512] = "";
  int rc = c->ops->exchange(c, sends ? &s : NULL, sends ? 1 : 0,
                            recvs ? &r : NULL, recvs ? 1 : 0, err, sizeof err);
  int want = rank ? want1 : PLAN_OK;
  if (rc != want || (rc && !strstr(err, expect)))
    return bad(rank, 40 + tag, "call %d: %d '%s', %d expected", tag, rc, err,
               want);
  if (recvs && !(rank && (flags & NOBYTES)) && in[0] != tag + 16 * peer)
    return bad(rank, 60 + tag, "call %d: bytes of call %d", tag,
               in[0] - 16 * peer);
  return 0;
}

static int stale_frames_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = open_or_die(rank, world, dir);
  const char *why = "rank 0 sent";
  int all = S0 | R0 | S1 | R1, code = 0;
  /* rank 1 posts nothing in call 1: rank 0's message waits, and call 2
   * says so and takes call 2's */
  if (!code)
    code = step(c, rank, S0, 1, PLAN_OK, "");
  if (!code)
    code = step(c, rank, all, 2, PLAN_EUSAGE, why);
  if (!code)
    code = step(c, rank, all, 3, PLAN_OK, "");
  /* rank 1 sends in call 4 but posts no receive */
  if (!code)
    code = step(c, rank, all & ~R1, 4, PLAN_OK, "");
  if (!code)
    code = step(c, rank, all, 5, PLAN_EUSAGE, why);
  if (!code)
    code = step(c, rank, all, 6, PLAN_OK, "");
  /* rank 0 sends nothing in call 7 where rank 1 waits for a message: rank
   * 1 is told at once, by the frame of call 8 (its stream is then out of
   * step: the last call) */
  if (!code)
    code = step(c, rank, R1 | NOBYTES, 7, PLAN_EUSAGE,
                "rank 0 sent a message of its exchange call 8 while rank 1 "
                "is in its call 7");
  if (!code)
    code = step(c, rank, S0, 8, PLAN_OK, "");
  plan_comm_close(c);
  return code;
}

static void test_stale_frames(void **state) {
  (void)state;
  char *dir = fresh_dir();
  double t0 = now_s();
  run_ranks(2, dir, stale_frames_rank, NULL);
  assert_true(now_s() - t0 < TIMEOUT); /* nobody waited for a timeout */
  drop_dir(dir);
}

/* ---- close-on-exec --------------------------------------------------------
 */

/* Marks in had[] the sockets the process holds (fds below 1024); their
 * number, -1 without /proc. */
static int held_sockets(char *had) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (e->d_name[0] == '.' || fd == dirfd(d) || fd >= 1024 ||
        fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
      continue;
    had[fd] = 1;
    n++;
  }
  closedir(d);
  return n;
}

/* Every socket the communicator holds is close-on-exec and nonblocking,
 * and was so from its creation. */
static int cloexec_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  char before[1024] = {0}, after[1024] = {0};
  int code = 0, proc = held_sockets(before) >= 0;
  sockets_without_cloexec = flags_set_late = 0;
  plan_comm *c = open_or_die(rank, world, dir);
  if (proc) {
    held_sockets(after);
    int n = 0;
    for (int fd = 0; fd < 1024 && !code; fd++) {
      if (!after[fd] || before[fd])
        continue;
      n++;
      if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC) ||
          !(fcntl(fd, F_GETFL) & O_NONBLOCK))
        code =
            bad(rank, 71, "socket %d is not close-on-exec and nonblocking", fd);
    }
    if (!code && n != world - 1)
      code = bad(rank, 72, "%d sockets for %d peers", n, world - 1);
  }
  if (!code && (sockets_without_cloexec || flags_set_late))
    code = bad(rank, 70,
               "%d socket(s) made without SOCK_CLOEXEC, %d set flags later",
               sockets_without_cloexec, flags_set_late);
  plan_comm_close(c);
  return code;
}

static void test_cloexec(void **state) {
  (void)state;
  in_fresh_dir(3, cloexec_rank, NULL);
}

/* ---- an exchange timeout names every rank it waits for ----------------- */

/* Rank 0 sends 32 MiB to rank 1, which never reads them, and waits for 8
 * bytes from rank 2, which never sends: the timeout names both. */
static int timeout_rank(int rank, int world, const char *dir, void *arg) {
  (void)arg;
  plan_comm *c = NULL;
  char err[512];
  int rc = plan_comm_tcp_open(&c, rank, world, dir, rank ? TIMEOUT : 1.5, err,
                              sizeof err);
  if (rc)
    return bad(rank, 80, "open: %d %s", rc, err);
  int code = 0;
  if (rank == 0) {
    int64_t big = (int64_t)32 << 20;
    unsigned char *out = calloc(1, (size_t)big), in[8];
    if (!out)
      return bad(rank, 81, "out of memory");
    plan_comm_msg s = {1, out, big}, r = {2, in, sizeof in};
    rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
    if (rc != PLAN_EUNSUPPORTED || !strstr(err, "rank 1 did not receive") ||
        !strstr(err, "rank 2 did not send"))
      code = bad(rank, 82, "timeout: %d '%s'", rc, err);
    free(out);
  } else {
    char own0[600];
    snprintf(own0, sizeof own0, "%s/rank-0", dir);
    if (!wait_path(own0, 0, 10))
      code = bad(rank, 83, "rank 0 did not finish");
  }
  plan_comm_close(c);
  return code;
}

static void test_timeout_names(void **state) {
  (void)state;
  in_fresh_dir(3, timeout_rank, NULL);
}

int main(void) {
  setenv("PLAN_COMM_ADDR", "127.0.0.1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_world_one),
      cmocka_unit_test(test_ring),
      cmocka_unit_test(test_ring_made_folder),
      cmocka_unit_test(test_all_to_all),
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_big),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_subgroups),
      cmocka_unit_test(test_all_reduce_mismatch),
      cmocka_unit_test(test_size_mismatch),
      cmocka_unit_test(test_absent_rank),
      cmocka_unit_test(test_world_mismatch),
      cmocka_unit_test(test_peer_gone),
      cmocka_unit_test(test_stale_file),
      cmocka_unit_test(test_bad_folder),
      cmocka_unit_test(test_idle_client),
      cmocka_unit_test(test_silent_listener),
      cmocka_unit_test(test_reason_kept),
      cmocka_unit_test(test_stale_frames),
      cmocka_unit_test(test_cloexec),
      cmocka_unit_test(test_timeout_names),
      cmocka_unit_test(test_all_reduce_length),
      cmocka_unit_test(test_mixed_groups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
