/* The CUDA plugin's NCCL communicator (runners/cuda/comm_nccl.cu): the
 * plugin is dlopen'ed, its vtable taken from plan_runner_plugin_entry, and
 * its comm_open run by several processes.
 *
 * On the host (make check-cuda-emu-nccl): the plugin built for the host
 * (BUILD/libplan-cuda-emu.so) over tests/cuda/fake_nccl.c, the host
 * stand-in for libnccl.so.2 named by PLAN_NCCL_LIBRARY:
 *
 *   split      4 ranks on the fake with ncclCommSplit: exchanges (a ring,
 *              several messages to one peer, empty ones), all-reduces
 *              (sum, avg, max, min) on two splits of the world, the world,
 *              3 + 1, groups met again (one split each, counted by the
 *              fake); the determinism settings in force and described, a
 *              clean close finalizing; no file left in the rendezvous
 *              folder (NCCL's id file: these processes are not under MPI);
 *              then 2 and 3 ranks
 *   fold       4 ranks on a fake without ncclCommSplit (an NCCL before
 *              2.18): the all-reduces folded over exchange
 *   failures   PLAN_NCCL_LIBRARY naming a missing file; NCCL failing in
 *              ncclAllReduce, ncclCommSplit, ncclGetUniqueId; a rank that
 *              never comes, whose NCCL does not load: NCCL's id file or
 *              init ends within the timeout with the reason on every
 *              rank; the abort entry (no
 *              finalize, the peers see the rank gone at once, no split
 *              after it); a failing cudaMemcpyAsync aborting at once; bad
 *              arguments
 *
 * On GPUs (--device, tests/gpu/run.sh): the real plugin and NCCL, one
 * process per GPU (PLAN_CUDA_DEVICE and LOCAL_RANK = the rank), the same
 * exchanges and all-reduces on as many GPUs as given (on 1, a world of
 * one); exit 3 when the plugin finds no device.
 *
 * usage: test_comm_nccl PLUGIN FAKE FAKE_NOSPLIT
 *        test_comm_nccl --device PLUGIN NGPUS
 * Prints a line per check and "comm-nccl: N passed, M failed"; exits 1
 * when any failed. */
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "libplan/common.h"
#include "runner.h"

/* The most ranks of a run: 4 emulated, a process per GPU on a device. */
#define MAX_RANKS 8

static plan_runner_plugin_entry_fn entry;
static const plan_runner_vtable *vt;
static char tmpdir[256];
static int passed, failed;
static int device_mode; /* --device: the real plugin and NCCL, on GPUs */
static int world = 4;

/* ---- in a rank's process: a failure ends it with a reason ------------- */

static int rank_failures;
static int me = -1;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "      rank %d: ", me);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  rank_failures++;
}

#define EXPECT_OK(call, what)                                                  \
  do {                                                                         \
    err[0] = 0;                                                                \
    int rc_ = (call);                                                          \
    if (rc_ != 0)                                                              \
      bad("%s: status %d: %s", what, rc_, err);                                \
  } while (0)

/* How many times this process called `name` (ncclCommSplit,
 * ncclCommFinalize, ncclCommAbort) of the fake NCCL, loaded by comm_open
 * (NCCL stays loaded after close); -1 when the fake is not there. */
static int fake_calls(const char *name) {
  const char *path = getenv("PLAN_NCCL_LIBRARY");
  void *fake = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  void *sym = fake ? dlsym(fake, "fake_nccl_calls") : NULL;
  int (*calls)(const char *);
  memcpy(&calls, &sym, sizeof calls);
  int n = sym ? calls(name) : -1;
  if (fake)
    dlclose(fake);
  return n;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned char byte_of(int from, int to, int msg, size_t i) {
  return (unsigned char)(from * 37 + to * 11 + msg * 5 + (int)(i % 251));
}

/* Rank r's value i of an all-reduce round. Round 9's integers: their
 * average over 3 ranks as sum / 3 differs from the sum of each times 1 /
 * 3 (NCCL's ncclAvg, and the fake's) at some i. */
static double value_of(int r, int round, int64_t i) {
  if (round == 9)
    return (double)(12 + 2 * r + 3 * i);
  return (double)(r * 100 + round * 10) + (double)i + 0.25 * r;
}

static double expected(const int *m, int n, int round, int64_t i, int red) {
  double a = value_of(m[0], round, i);
  for (int k = 1; k < n; k++) {
    double b = value_of(m[k], round, i);
    a = red == PLAN_RED_MAX   ? (a > b ? a : b)
        : red == PLAN_RED_MIN ? (a < b ? a : b)
                              : a + b;
  }
  return red == PLAN_RED_AVG ? a / n : a;
}

static void check_reduce(plan_comm *c, const int *m, int n, int round, int red,
                         const char *what) {
  char err[512];
  double buf[7];
  for (int64_t i = 0; i < 7; i++)
    buf[i] = value_of(me, round, i);
  EXPECT_OK(c->ops->all_reduce(c, m, n, buf, 7, red, err, sizeof err), what);
  for (int64_t i = 0; i < 7; i++)
    if (buf[i] != expected(m, n, round, i, red)) {
      bad("%s: value %lld is %.17g, not %.17g", what, (long long)i, buf[i],
          expected(m, n, round, i, red));
      return;
    }
}

static void check_exchange(plan_comm *c, int round) {
  char err[512];
  if (world < 2)
    return;
  int next = (me + 1) % world, prev = (me + world - 1) % world;
  int opp_to = (me + world / 2) % world,
      opp_from = (me + world - world / 2) % world;
  /* to the next rank one message; to the opposite one three, in order,
   * the middle one empty; the same from the previous and the opposite
   * (with fewer than 4 ranks the next one is the opposite one) */
  size_t sizes[4] = {1000, 17, 0, 100000};
  int to[4] = {next, opp_to, opp_to, opp_to};
  int from[4] = {prev, opp_from, opp_from, opp_from};
  unsigned char *out[4], *in[4];
  plan_comm_msg s[4], r[4];
  for (int k = 0; k < 4; k++) {
    out[k] = malloc(sizes[k] + 1);
    in[k] = calloc(1, sizes[k] + 1);
    if (!out[k] || !in[k]) {
      bad("out of memory");
      exit(1);
    }
    for (size_t i = 0; i < sizes[k]; i++)
      out[k][i] = byte_of(me, to[k], k + round, i);
    s[k] = (plan_comm_msg){to[k], out[k], (int64_t)sizes[k]};
    r[k] = (plan_comm_msg){from[k], in[k], (int64_t)sizes[k]};
  }
  /* receives posted in another order than the sends: only each peer's
   * own order counts */
  plan_comm_msg rr[4] = {r[1], r[0], r[2], r[3]};
  if (next == opp_to)
    memcpy(rr, r, sizeof rr);
  EXPECT_OK(c->ops->exchange(c, s, 4, rr, 4, err, sizeof err), "exchange");
  for (int k = 0; k < 4; k++)
    for (size_t i = 0; i < sizes[k]; i++)
      if (in[k][i] != byte_of(from[k], me, k + round, i)) {
        bad("exchange round %d: message %d from rank %d, byte %zu is %d", round,
            k, from[k], i, in[k][i]);
        break;
      }
  for (int k = 0; k < 4; k++) {
    free(out[k]);
    free(in[k]);
  }
}

/* The plugin's vtable: taken in each rank's process on a device (CUDA
 * must not start before the fork), once before the forks emulated. */
static int take_vtable(void) {
  char err[512] = "";
  vt = entry(PLAN_RUNNER_API_VERSION, err, sizeof err);
  if (!vt || !vt->comm_open) {
    fprintf(stderr, "test_comm_nccl: no comm_open from the plugin: %s\n", err);
    return 0;
  }
  return 1;
}

static void rank_main(int rank, const char *rv, int with_split) {
  char err[512], d[512], want[512];
  me = rank;
  alarm(60);
  if (device_mode) {
    /* one GPU per process, as a launcher's LOCAL_RANK gives */
    char dev[16];
    snprintf(dev, sizeof dev, "%d", rank);
    setenv("PLAN_CUDA_DEVICE", dev, 1);
    setenv("LOCAL_RANK", dev, 1);
    if (!take_vtable())
      exit(3);
  }
  plan_comm *c = NULL;
  EXPECT_OK(vt->comm_open(&c, rank, world, rv, 30.0, err, sizeof err),
            "comm_open");
  if (!c)
    exit(1);
  c->ops->describe(c, d, sizeof d);
  if (device_mode)
    snprintf(want, sizeof want, ", rank %d of %d, device %d (", rank, world,
             rank);
  else
    snprintf(want, sizeof want,
             "nccl 2.18.5, rank %d of %d, device 0 (host emulation), "
             "NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0",
             rank, world);
  if (strncmp(d, "nccl ", 5) || !strstr(d, want) ||
      !strstr(d, "NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_NVLS_ENABLE=0") ||
      (strstr(d, "no ncclCommSplit") == NULL) != with_split)
    bad("describe: '%s'", d);
  if (rank == 0)
    printf("      %s\n", d);
  /* non-blocking where the NCCL has ncclCommInitRankConfig (the fake
   * with ncclCommSplit), its init polled; blocking where it has not */
  if (!device_mode && (fake_calls("ncclCommInitRankConfig") != with_split ||
                       fake_calls("ncclCommInitRank") != !with_split ||
                       (fake_calls("ncclCommGetAsyncError") > 0) != with_split))
    bad("comm_open: %d ncclCommInitRankConfig, %d ncclCommInitRank, %d "
        "ncclCommGetAsyncError",
        fake_calls("ncclCommInitRankConfig"), fake_calls("ncclCommInitRank"),
        fake_calls("ncclCommGetAsyncError"));
  const char *algo = getenv("NCCL_ALGO");
  if (!algo || strcmp(algo, "Ring"))
    bad("NCCL_ALGO is %s after comm_open", algo ? algo : "unset");

  /* groups that partition the world, each step's new to every rank at
   * once (comm.h): pairs {0,1} {2,3} ..., crossed pairs {0,2} {3,1} on 4
   * ranks, the world, then 3 + 1 on 4 ranks */
  int all[MAX_RANKS], alone[1] = {rank};
  for (int i = 0; i < world; i++)
    all[i] = i;
  int pair[2] = {rank & ~1, rank | 1};
  int cross[2] = {rank % 2 ? 3 : 0, rank % 2 ? 1 : 2}; /* {0,2} {3,1} */
  int three[3] = {0, 1, 2};
  int pairs = world % 2 == 0, four = world == 4;
  int nsplits = 0, splits0 = device_mode ? 0 : fake_calls("ncclCommSplit");
  check_exchange(c, 0);
  if (pairs) {
    check_reduce(c, pair, 2, 1, PLAN_RED_SUM, "all_reduce sum, pairs");
    nsplits++;
  }
  if (four) {
    check_reduce(c, cross, 2, 2, PLAN_RED_MAX, "all_reduce max, crossed pairs");
    check_reduce(c, cross, 2, 3, PLAN_RED_MIN, "all_reduce min, crossed pairs");
    nsplits++;
  }
  check_reduce(c, all, world, 4, PLAN_RED_SUM, "all_reduce sum, the world");
  if (world != 2) /* on 2 ranks the world is the pair met before */
    nsplits++;
  if (pairs)
    check_reduce(c, pair, 2, 6, PLAN_RED_AVG, "all_reduce avg, pairs again");
  check_exchange(c, 7);
  check_reduce(c, all, world, 8, PLAN_RED_AVG, "all_reduce avg, the world");
  check_reduce(c, all, world, 8, PLAN_RED_MAX, "all_reduce max, the world");
  if (four) {
    check_reduce(c, cross, 2, 8, PLAN_RED_AVG, "all_reduce avg, crossed again");
    /* 3 + 1: rank 3 alone, the average over 3 of values whose sum / 3
     * differs from NCCL's ncclAvg (each times 1 / 3, summed) */
    check_reduce(c, rank < 3 ? three : alone, rank < 3 ? 3 : 1, 9, PLAN_RED_AVG,
                 "all_reduce avg, 3 + 1");
    check_reduce(c, rank < 3 ? three : alone, rank < 3 ? 3 : 1, 5, PLAN_RED_MAX,
                 "all_reduce max, 3 + 1 again");
    nsplits++;
  }
  if (!device_mode) {
    /* one split per step that meets new groups, none for the groups met
     * again: the fake counts them */
    int splits = fake_calls("ncclCommSplit") - splits0;
    if (splits != (with_split ? nsplits : 0))
      bad("%d calls of ncclCommSplit, not %d", splits,
          with_split ? nsplits : 0);
  }

  /* arguments that are wrong here, whatever the other ranks do */
  plan_comm_msg m = {rank, d, 4};
  if (c->ops->exchange(c, &m, 1, NULL, 0, err, sizeof err) != PLAN_EUSAGE)
    bad("exchange with itself: not PLAN_EUSAGE");
  m.peer = world;
  if (c->ops->exchange(c, NULL, 0, &m, 1, err, sizeof err) != PLAN_EUSAGE)
    bad("exchange with rank %d of %d: not PLAN_EUSAGE", world, world);
  m.peer = (rank + 1) % world;
  m.bytes = -1;
  if (c->ops->exchange(c, &m, 1, NULL, 0, err, sizeof err) != PLAN_EUSAGE)
    bad("exchange of -1 bytes: not PLAN_EUSAGE");
  int other[1] = {(rank + 1) % world};
  double x = 1;
  if (world > 1 && (c->ops->all_reduce(c, other, 1, &x, 1, PLAN_RED_SUM, err,
                                       sizeof err) != PLAN_EUSAGE ||
                    !strstr(err, "not in the group")))
    bad("all_reduce of a group without this rank: '%s'", err);
  int twice[2] = {rank, rank};
  if (c->ops->all_reduce(c, twice, 2, &x, 1, PLAN_RED_SUM, err, sizeof err) !=
      PLAN_EUSAGE)
    bad("all_reduce of a group naming a rank twice: not PLAN_EUSAGE");
  int fin0 = fake_calls("ncclCommFinalize"), ab0 = fake_calls("ncclCommAbort");
  plan_comm_close(c);
  /* a clean close finalizes (the world and every split), never aborts */
  int ncomms = with_split ? nsplits - (four && rank == 3) : 0; /* 3 alone */
  if (!device_mode && (fake_calls("ncclCommFinalize") - fin0 != 1 + ncomms ||
                       fake_calls("ncclCommAbort") != ab0))
    bad("close: %d finalized, %d aborted",
        fake_calls("ncclCommFinalize") - fin0,
        fake_calls("ncclCommAbort") - ab0);
  exit(rank_failures ? 1 : 0);
}

/* ---- in the test's process ---------------------------------------------- */

static void result(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void result(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf(ok ? "ok    " : "FAIL  ");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  if (ok)
    passed++;
  else
    failed++;
}

typedef void (*rank_fn)(int rank, const char *rv, int arg);

/* Runs fn in `n` processes (rank 0 .. n-1); true when every one exits 0. */
static int run_ranks(int n, rank_fn fn, const char *rv, int arg) {
  pid_t pid[MAX_RANKS];
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; r++) {
    pid[r] = fork();
    if (pid[r] < 0) {
      perror("fork");
      return 0;
    }
    if (pid[r] == 0)
      fn(r, rv, arg);
  }
  int ok = 1;
  for (int r = 0; r < n; r++) {
    int st;
    if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (WIFSIGNALED(st))
        fprintf(stderr, "      rank %d: killed by signal %d%s\n", r,
                WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (timed out)" : "");
      ok = 0;
    }
  }
  return ok;
}

/* Writes `text` to the file `name` in the folder rv (made first). */
static int put_file(const char *rv, const char *name, const char *text) {
  char path[600];
  mkdir(rv, 0777);
  snprintf(path, sizeof path, "%s/%s", rv, name);
  FILE *f = fopen(path, "w");
  if (!f)
    return 0;
  int ok = fputs(text, f) >= 0;
  return !fclose(f) && ok;
}

/* The names in folder rv, space-separated, in `list`. */
static void folder_list(const char *rv, char *list, size_t size) {
  char cmd[600];
  list[0] = 0;
  snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null", rv);
  FILE *p = popen(cmd, "r");
  size_t used = 0;
  char line[256];
  while (p && fgets(line, sizeof line, p) && used + strlen(line) + 1 < size) {
    line[strcspn(line, "\n")] = 0;
    used += (size_t)snprintf(list + used, size - used, "%s%s", used ? " " : "",
                             line);
  }
  if (p)
    pclose(p);
}

/* stale: the folder holds the files of a run killed before (an id file,
 * rank 0's address on a port nobody listens on); this run must not read
 * them as its own. */
static void world_run(const char *name, const char *lib, int with_split,
                      int stale) {
  char rv[512], left[512];
  snprintf(rv, sizeof rv, "%s/%s/rendezvous", tmpdir, name);
  if (lib)
    setenv("PLAN_NCCL_LIBRARY", lib, 1);
  if (stale) {
    char parent[512];
    snprintf(parent, sizeof parent, "%s/%s", tmpdir, name);
    mkdir(parent, 0777);
    if (!put_file(rv, "nccl-id", "not an id") ||
        !put_file(rv, "rank-0", "127.0.0.1 1\n")) {
      result(0, "%s: stale files written", name);
      return;
    }
  }
  int ok = run_ranks(world, rank_main, rv, with_split);
  result(ok, "%s: %d ranks%s: exchanges and all-reduces", name, world,
         stale ? ", a stale id file and address in the folder" : "");
  struct stat st;
  folder_list(rv, left, sizeof left);
  if (world > 1) /* a world of one needs no rendezvous */
    result(stat(rv, &st) == 0 && S_ISDIR(st.st_mode) &&
               !strcmp(left, stale ? "nccl-id" : ""),
           "%s: the rendezvous folder made, no file of this run left in it "
           "(left: '%s')",
           name, left);
}

static void fail_rank(int rank, const char *rv, int arg) {
  char err[512];
  (void)arg;
  me = rank;
  alarm(60);
  plan_comm *c = NULL;
  EXPECT_OK(vt->comm_open(&c, rank, 2, rv, 20.0, err, sizeof err), "comm_open");
  if (!c)
    exit(1);
  int all[2] = {0, 1};
  double x[3] = {1, 2, 3};
  int rc = c->ops->all_reduce(c, all, 2, x, 3, PLAN_RED_SUM, err, sizeof err);
  if (rc != PLAN_EUNSUPPORTED ||
      strcmp(err, "ncclAllReduce: unhandled system error (fake)"))
    bad("a failing ncclAllReduce: status %d, '%s'", rc, err);
  plan_comm_msg m = {1 - rank, x, 8};
  rc = c->ops->exchange(c, &m, 1, NULL, 0, err, sizeof err);
  if (rc != PLAN_EUNSUPPORTED || !strstr(err, "aborted"))
    bad("a call after the failure: status %d, '%s'", rc, err);
  plan_comm_close(c);
  exit(rank_failures ? 1 : 0);
}

/* Failures of one rank, each run by 2 ranks (3 for S_TCP_PEER), the
 * communicator's timeout 20 s, the fake's 10 s: "at once" is within 5 s,
 * which neither timeout allows. */
enum {
  S_RANK_GONE,     /* rank 1 never opens: rank 0's open ends at the timeout */
  S_NO_NCCL,       /* rank 1's NCCL does not load */
  S_NO_ID,         /* rank 0's ncclGetUniqueId fails */
  S_ABORT_XCHG,    /* rank 1 aborts; rank 0 waits for it in an exchange */
  S_ABORT_SPLIT,   /* rank 1 aborts; rank 0 meets a new group (a split) */
  S_MEMCPY_XCHG,   /* rank 1's cudaMemcpyAsync fails in an exchange */
  S_MEMCPY_REDUCE, /* the same in an all-reduce */
  S_SPLIT_FAILS,   /* ncclCommSplit fails on every rank */
  S_GONE_AT_INIT,  /* rank 1 exits after the meeting, before its init */
  S_GONE_AT_SPLIT, /* rank 1 exits after the meeting, before its split */
  S_COUNT
};

#define PEER_GONE "remote process exited or there was a network error (fake)"

static const char *const scenario_name[S_COUNT] = {
    "a rank that never comes: the non-blocking init ends at the timeout "
    "with the reason",
    "a rank whose NCCL does not load: it fails at once, the other at the "
    "timeout, saying so",
    "ncclGetUniqueId failing on rank 0: it fails at once, the other at the "
    "timeout waiting for the id file",
    "abort: no finalize, every communicator aborted, the peer's exchange "
    "fails at once",
    "abort before a split: the peer's all-reduce fails at once in "
    "ncclCommSplit",
    "cudaMemcpyAsync failing in an exchange: aborted, the peer fails at once",
    "cudaMemcpyAsync failing in an all-reduce: aborted, the peer fails at "
    "once",
    "ncclCommSplit failing: its error, then no split after the abort",
    "a rank gone between the meeting and its NCCL init: the others' "
    "non-blocking init ends at the timeout with the reason, aborted",
    "a rank gone between the meeting and its ncclCommSplit: the others' "
    "non-blocking split ends at the timeout with the reason, aborted",
};

static void expect_fail(int rc, const char *err, double took, const char *what,
                        const char *want) {
  if (rc == 0 || !strstr(err, want))
    bad("%s: status %d, '%s' (wanted '%s')", what, rc, err, want);
  else if (took > 5.0)
    bad("%s: failed after %.1f s, not at once: '%s'", what, took, err);
}

/* A call after the communicator's abort fails at once, saying so. */
static void expect_refused(plan_comm *c) {
  char err[512] = "";
  double x = 1;
  int alone[1] = {me};
  int rc =
      c->ops->all_reduce(c, alone, 1, &x, 1, PLAN_RED_SUM, err, sizeof err);
  if (rc != PLAN_EUNSUPPORTED || !strstr(err, "aborted"))
    bad("a call after the abort: status %d, '%s'", rc, err);
}

/* One exchange of 8 bytes each way with `peer`. */
static int swap8(plan_comm *c, int peer, char *err, size_t errsz,
                 double *took) {
  double out = me, in = -1, t0 = now_s();
  plan_comm_msg s = {peer, &out, 8}, r = {peer, &in, 8};
  int rc = c->ops->exchange(c, &s, 1, &r, 1, err, errsz);
  *took = now_s() - t0;
  if (!rc && in != peer)
    bad("exchange: %g from rank %d", in, peer);
  return rc;
}

static void scenario_rank(int rank, const char *rv, int sc) {
  char err[512] = "";
  int n = 2, all[3] = {0, 1, 2};
  double x[2] = {1, 2}, took, t0;
  me = rank;
  alarm(60);
  if (sc == S_RANK_GONE && rank == 1)
    exit(0); /* a process that failed before its comm_open */
  if (sc == S_NO_NCCL && rank == 1)
    setenv("PLAN_NCCL_LIBRARY", "/nonexistent/folder/libnccl.so.2", 1);
  if (sc == S_NO_ID)
    setenv("FAKE_NCCL_FAIL", "ncclGetUniqueId", 1);
  if (sc == S_SPLIT_FAILS)
    setenv("FAKE_NCCL_FAIL", "ncclCommSplit", 1);
  if (sc == S_GONE_AT_INIT && rank == 1)
    setenv("FAKE_NCCL_EXIT", "ncclCommInitRankConfig", 1);
  plan_comm *c = NULL;
  t0 = now_s();
  double limit = sc == S_RANK_GONE || sc == S_GONE_AT_INIT || sc == S_NO_NCCL ||
                         sc == S_NO_ID
                     ? 1.0
                 : sc == S_GONE_AT_SPLIT ? 2.0
                                         : 20.0;
  int rc = vt->comm_open(&c, rank, n, rv, limit, err, sizeof err);
  took = now_s() - t0;
  switch (sc) {
  case S_RANK_GONE:
    expect_fail(rc, err, took, "comm_open",
                "ncclCommInitRank: no answer from every rank within 1 s");
    break;
  case S_NO_NCCL:
    expect_fail(rc, err, took, "comm_open",
                rank
                    ? "cannot load NCCL"
                    : "ncclCommInitRank: no answer from every rank within 1 s");
    break;
  case S_NO_ID:
    expect_fail(rc, err, took, "comm_open",
                rank ? "did not appear within 1 s"
                     : "ncclGetUniqueId: unhandled system error (fake)");
    break;
  case S_GONE_AT_INIT: /* rank 1 never comes back from its init */
    expect_fail(rc, err, took, "comm_open",
                "ncclCommInitRank: no answer from every rank within 1 s");
    if (took < 1.0)
      bad("comm_open failed after %.2f s, before the timeout", took);
    if (fake_calls("ncclCommAbort") != 1 ||
        fake_calls("ncclCommFinalize") != 0 ||
        fake_calls("ncclCommGetAsyncError") < 2)
      bad("the init not polled, then aborted: %d polls, %d aborted, %d "
          "finalized",
          fake_calls("ncclCommGetAsyncError"), fake_calls("ncclCommAbort"),
          fake_calls("ncclCommFinalize"));
    break;
  default:
    if (rc)
      bad("comm_open: status %d, '%s'", rc, err);
  }
  if (!c)
    exit(rank_failures ? 1 : 0);
  if (rc)
    bad("comm_open failed, yet made a communicator");
  int ab0 = fake_calls("ncclCommAbort"), fin0 = fake_calls("ncclCommFinalize");
  int sp0 = fake_calls("ncclCommSplit");
  if (sc == S_ABORT_XCHG || sc == S_MEMCPY_REDUCE)
    EXPECT_OK(
        c->ops->all_reduce(c, all, 2, x, 2, PLAN_RED_SUM, err, sizeof err),
        "all_reduce (a split made)");
  int comms = 1 + (sc == S_ABORT_XCHG || sc == S_MEMCPY_REDUCE);
  if (rank == 1 && (sc == S_ABORT_XCHG || sc == S_ABORT_SPLIT)) {
    t0 = now_s();
    plan_comm_abort(c);
    took = now_s() - t0;
    if (took > 2.0)
      bad("abort took %.1f s", took);
    if (fake_calls("ncclCommAbort") - ab0 != comms ||
        fake_calls("ncclCommFinalize") != fin0)
      bad("abort: %d communicators aborted (not %d), %d finalized",
          fake_calls("ncclCommAbort") - ab0, comms,
          fake_calls("ncclCommFinalize") - fin0);
    exit(rank_failures ? 1 : 0);
  }
  if (rank == 1 && (sc == S_MEMCPY_XCHG || sc == S_MEMCPY_REDUCE))
    setenv("PLAN_CUDA_EMU_FAIL", "cudaMemcpyAsync", 1);
  if (rank == 1 && sc == S_GONE_AT_SPLIT)
    setenv("FAKE_NCCL_EXIT", "ncclCommSplit", 1);
  const char *peer_gone = PEER_GONE;
  switch (sc) {
  case S_ABORT_XCHG:
    rc = swap8(c, 1, err, sizeof err, &took);
    expect_fail(rc, err, took, "an exchange with an aborted rank", peer_gone);
    break;
  case S_ABORT_SPLIT:
    t0 = now_s();
    rc = c->ops->all_reduce(c, all, 2, x, 2, PLAN_RED_SUM, err, sizeof err);
    /* not under MPI, no meeting before the split: NCCL's own error,
     * at once, the split's communicator aborted with the world's */
    expect_fail(rc, err, now_s() - t0, "an all-reduce with an aborted rank",
                "ncclCommSplit: " PEER_GONE);
    comms = 2;
    break;
  case S_MEMCPY_XCHG:
    rc = swap8(c, 1 - rank, err, sizeof err, &took);
    expect_fail(rc, err, took, "the exchange",
                rank ? "exchange: cudaMemcpyAsync: invalid argument (emulated)"
                     : peer_gone);
    break;
  case S_MEMCPY_REDUCE:
    t0 = now_s();
    rc = c->ops->all_reduce(c, all, 2, x, 2, PLAN_RED_SUM, err, sizeof err);
    expect_fail(rc, err, now_s() - t0, "the all-reduce",
                rank ? "all_reduce: cudaMemcpyAsync: invalid argument "
                       "(emulated)"
                     : peer_gone);
    break;
  case S_GONE_AT_SPLIT: /* rank 1 never comes back from its split */
    t0 = now_s();
    rc = c->ops->all_reduce(c, all, 2, x, 2, PLAN_RED_SUM, err, sizeof err);
    took = now_s() - t0;
    expect_fail(rc, err, took, "the all-reduce",
                "ncclCommSplit: no answer from every rank within 2 s");
    if (took < 2.0)
      bad("the all-reduce failed after %.2f s, before the timeout", took);
    comms = 2; /* the world, and the split's communicator, aborted */
    break;
  case S_SPLIT_FAILS:
    t0 = now_s();
    rc = c->ops->all_reduce(c, all, 2, x, 2, PLAN_RED_SUM, err, sizeof err);
    expect_fail(rc, err, now_s() - t0, "the all-reduce",
                "ncclCommSplit: unhandled system error (fake)");
    break;
  }
  /* the failure aborted every communicator: no finalize at close, and
   * a new group makes no split */
  expect_refused(c);
  if (fake_calls("ncclCommAbort") - ab0 != comms)
    bad("%d communicators aborted after the failure, not %d",
        fake_calls("ncclCommAbort") - ab0, comms);
  if (fake_calls("ncclCommSplit") - sp0 != (sc == S_SPLIT_FAILS) + comms - 1)
    bad("%d calls of ncclCommSplit", fake_calls("ncclCommSplit") - sp0);
  plan_comm_close(c);
  if (fake_calls("ncclCommFinalize") != fin0)
    bad("a close after the abort finalized");
  exit(rank_failures ? 1 : 0);
}

static void failures(const char *fake) {
  char err[512], rv[512], d[256];
  plan_comm *c = (plan_comm *)&err; /* must come back NULL */

  setenv("PLAN_NCCL_LIBRARY", "/nonexistent/folder/libnccl.so.2", 1);
  int rc = vt->comm_open(&c, 0, 1, NULL, 5.0, err, sizeof err);
  result(rc == PLAN_EUNSUPPORTED && !c &&
             strstr(err, "/nonexistent/folder/libnccl.so.2") &&
             strstr(err, "cannot load NCCL"),
         "a missing NCCL library: status %d, '%s'", rc, err);

  setenv("PLAN_NCCL_LIBRARY", fake, 1);
  setenv("FAKE_NCCL_FAIL", "ncclAllReduce", 1);
  snprintf(rv, sizeof rv, "%s/fail/rendezvous", tmpdir);
  result(run_ranks(2, fail_rank, rv, 0),
         "ncclAllReduce failing: its error, then the communicator refuses");
  unsetenv("FAKE_NCCL_FAIL");

  for (int sc = 0; sc < S_COUNT; sc++) {
    snprintf(rv, sizeof rv, "%s/scenario-%d/rendezvous", tmpdir, sc);
    result(run_ranks(2, scenario_rank, rv, sc), "%s", scenario_name[sc]);
  }

  snprintf(rv, sizeof rv, "%s/nobody", tmpdir);
  rc = vt->comm_open(&c, 1, 2, rv, 0.3, err, sizeof err);
  result(rc == PLAN_EUNSUPPORTED && !c && strstr(err, "nccl-id") &&
             strstr(err, "did not appear within 0.3 s"),
         "no rank 0: the id file's wait times out with the reason: status "
         "%d, '%s'",
         rc, err);

  rc = vt->comm_open(&c, 2, 2, rv, 5.0, err, sizeof err);
  int rc2 = vt->comm_open(&c, 0, 2, NULL, 5.0, err, sizeof err);
  int rc3 = vt->comm_open(&c, 0, 1, NULL, 0.0, err, sizeof err);
  result(rc == PLAN_EUSAGE && rc2 == PLAN_EUSAGE && rc3 == PLAN_EUSAGE && !c,
         "comm_open's arguments: rank 2 of 2, no rendezvous, no timeout");

  setenv("NCCL_PROTO", "LL", 1); /* the user's, kept and marked */
  rc = vt->comm_open(&c, 0, 1, NULL, 5.0, err, sizeof err);
  d[0] = 0;
  if (c) {
    int one[1] = {0};
    double x = 3;
    c->ops->describe(c, d, sizeof d);
    rc = c->ops->all_reduce(c, one, 1, &x, 1, PLAN_RED_AVG, err, sizeof err);
    rc = rc ? rc : (x == 3 ? 0 : -100);
    plan_comm_close(c);
  }
  result(rc == 0 && strstr(d, "rank 0 of 1") &&
             strstr(d, "NCCL_ALGO=Ring NCCL_PROTO=LL (user's) "),
         "a world of one: '%s'", d);
  unsetenv("NCCL_PROTO");
}

/* Whether the plugin's entry point finds a device, asked in a process of
 * its own (CUDA must not start in this one before the forks). */
static int device_present(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0)
    _exit(take_vtable() ? 0 : 3);
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
         WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv) {
  device_mode = argc >= 2 && !strcmp(argv[1], "--device");
  if (argc != 4) {
    fprintf(stderr, "usage: test_comm_nccl PLUGIN FAKE FAKE_NOSPLIT\n"
                    "       test_comm_nccl --device PLUGIN NGPUS\n");
    return 2;
  }
  const char *plugin = argv[device_mode ? 2 : 1];
  if (device_mode) {
    world = atoi(argv[3]);
    if (world < 1 || world > MAX_RANKS) {
      fprintf(stderr, "test_comm_nccl: 1 to %d GPUs\n", MAX_RANKS);
      return 2;
    }
  }
  void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "test_comm_nccl: %s\n", dlerror());
    return device_mode ? 3 : 2;
  }
  void *sym = dlsym(lib, PLAN_RUNNER_PLUGIN_ENTRY);
  memcpy(&entry, &sym, sizeof entry);
  if (!sym) {
    fprintf(stderr, "test_comm_nccl: %s: no entry point\n", plugin);
    return 2;
  }
  if (!device_mode && !take_vtable())
    return 2;
  if (device_mode && !device_present()) {
    printf("comm-nccl: skipped: no usable CUDA device\n");
    return 3;
  }
  const char *t = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/libplan-comm-nccl.XXXXXX",
           t && t[0] ? t : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 2;
  }
  /* the settings comm_open pins, and the fake's own, start unset */
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_NVLS_ENABLE");
  unsetenv("FAKE_NCCL_FAIL");
  setenv("FAKE_NCCL_TIMEOUT", "10", 1);
  unsetenv("PLAN_CUDA_EMU_FAIL");
  /* the fake's folders (ncclGetUniqueId's) go with the test's */
  if (!device_mode)
    setenv("TMPDIR", tmpdir, 1);

  if (device_mode) {
    /* NCCL as the loader finds it (the bundle's env.sh) */
    unsetenv("PLAN_NCCL_LIBRARY");
    world_run("device", NULL, 0, 0);
  } else {
    world_run("split", argv[2], 1, 0);
    world_run("fold", argv[3], 0, 0);
    world = 2;
    world_run("split-2", argv[2], 1, 0);
    world = 3;
    world_run("split-3", argv[2], 1, 0);
    failures(argv[2]);
  }

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "test_comm_nccl: could not remove %s\n", tmpdir);
  printf("comm-nccl: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
