/* The MPI communicator (runners/mpi/comm_mpi.c, through
 * runners/comm_mpi_load.c) and the fold all-reduce (runners/comm.c).
 * In one process: the launcher's detection, a missing plugin's reason,
 * a process no launcher started refused. Then this binary runs itself
 * under `mpirun -np 1` (a world of one) and `mpirun -np 4` (localhost,
 * shared memory only), where every rank
 * exchanges messages (a ring, sizes per pair, several and empty messages
 * to one peer, 8 MiB), all-reduces in member order bit for bit in
 * disjoint groups, and sees a size that does not match, and messages left
 * over from an earlier exchange, reported as PLAN_EUSAGE with the
 * communicator still in step after them. Each rank reports through its
 * exit status; the parent asserts mpirun's. (A killed rank: check-dist.) */
#define _DEFAULT_SOURCE /* realpath */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "ir/ir.h"
#include "libplan/common.h"
#include "base/util.h"

#define WORLD 4
#define BIG ((int64_t)8 << 20)

static int failures;

static void fail_at(int rank, const char *what, int rc, const char *err) {
  fprintf(stderr, "rank %d: %s (status %d: %s)\n", rank, what, rc, err);
  failures++;
}

static unsigned char byte_of(int from, int to, int64_t i) {
  return (unsigned char)(from * 31 + to * 7 + i);
}

/* A ring, then sizes per pair with two messages and an empty one. */
static void rank_exchange(plan_comm *c) {
  int me = c->rank, w = c->world, next = (me + 1) % w, prev = (me + w - 1) % w;
  char err[512] = "";
  unsigned char out[1000], in[1000];
  for (int i = 0; i < 1000; i++)
    out[i] = byte_of(me, next, i);
  plan_comm_msg s = {next, out, sizeof out}, r = {prev, in, sizeof in};
  int rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
  if (rc)
    fail_at(me, "ring", rc, err);
  for (int i = 0; !rc && i < 1000; i++)
    if (in[i] != byte_of(prev, me, i)) {
      fail_at(me, "ring: wrong bytes", 0, "");
      break;
    }
  /* to every peer: 8 * (1 + me + 2 * peer) bytes, then an empty message */
  plan_comm_msg sends[2 * WORLD], recvs[2 * WORLD];
  unsigned char *bo[WORLD] = {0}, *bi[WORLD] = {0};
  int ns = 0;
  for (int p = 0; p < w; p++) {
    if (p == me)
      continue;
    int64_t so = 8 * (1 + me + 2 * p), si = 8 * (1 + p + 2 * me);
    bo[p] = malloc((size_t)so);
    bi[p] = malloc((size_t)si);
    if (!bo[p] || !bi[p])
      return;
    for (int64_t i = 0; i < so; i++)
      bo[p][i] = byte_of(me, p, i);
    sends[ns] = (plan_comm_msg){p, bo[p], so};
    recvs[ns++] = (plan_comm_msg){p, bi[p], si};
    sends[ns] = (plan_comm_msg){p, NULL, 0};
    recvs[ns++] = (plan_comm_msg){p, NULL, 0};
  }
  rc = c->ops->exchange(c, sends, ns, recvs, ns, err, sizeof err);
  if (rc)
    fail_at(me, "sizes per pair", rc, err);
  for (int p = 0; p < w && !rc; p++)
    for (int64_t i = 0; p != me && i < 8 * (1 + p + 2 * me); i++)
      if (bi[p][i] != byte_of(p, me, i)) {
        fail_at(me, "sizes per pair: wrong bytes", 0, "");
        break;
      }
  for (int p = 0; p < w; p++) {
    free(bo[p]);
    free(bi[p]);
  }
  /* 8 MiB both ways between pairs 0-1 and 2-3 */
  unsigned char *big = malloc((size_t)BIG), *got = malloc((size_t)BIG);
  if (!big || !got)
    return;
  for (int64_t i = 0; i < BIG; i++)
    big[i] = byte_of(me, me ^ 1, i);
  s = (plan_comm_msg){me ^ 1, big, BIG};
  r = (plan_comm_msg){me ^ 1, got, BIG};
  rc = c->ops->exchange(c, &s, 1, &r, 1, err, sizeof err);
  if (rc)
    fail_at(me, "8 MiB", rc, err);
  for (int64_t i = 0; !rc && i < BIG; i++)
    if (got[i] != byte_of(me ^ 1, me, i)) {
      fail_at(me, "8 MiB: wrong bytes", 0, "");
      break;
    }
  free(big);
  free(got);
}

/* Sizes and calls that do not match: PLAN_EUSAGE with the reason, and
 * the next exchange works. */
static void rank_mismatch(plan_comm *c) {
  int me = c->rank;
  char err[512] = "";
  double a[2] = {1, 2}, b[1] = {0};
  int rc = 0;
  if (me == 0) {
    plan_comm_msg s = {1, a, sizeof a};
    rc = c->ops->exchange(c, &s, 1, NULL, 0, err, sizeof err);
    if (rc)
      fail_at(me, "mismatch: the sender fails", rc, err);
  } else if (me == 1) {
    plan_comm_msg r = {0, b, sizeof b};
    rc = c->ops->exchange(c, NULL, 0, &r, 1, err, sizeof err);
    if (rc != PLAN_EUSAGE || !strstr(err, "sent 16 bytes, 8 expected"))
      fail_at(me, "mismatch: not reported", rc, err);
  } else {
    c->ops->exchange(c, NULL, 0, NULL, 0, err, sizeof err);
  }
  /* rank 2 sends to 3, which posts nothing: reported in 3's next call
   * that reads from 2, whose own message is then taken */
  double x = 5, y = 0;
  if (me == 2) {
    plan_comm_msg s = {3, &x, sizeof x};
    if ((rc = c->ops->exchange(c, &s, 1, NULL, 0, err, sizeof err)))
      fail_at(me, "stale: the sender fails", rc, err);
  } else {
    c->ops->exchange(c, NULL, 0, NULL, 0, err, sizeof err);
  }
  x = 6;
  plan_comm_msg s = {3, &x, sizeof x}, r = {2, &y, sizeof y};
  if (me == 2 && (rc = c->ops->exchange(c, &s, 1, NULL, 0, err, sizeof err)))
    fail_at(me, "stale: the second send fails", rc, err);
  if (me == 3) {
    rc = c->ops->exchange(c, NULL, 0, &r, 1, err, sizeof err);
    if (rc != PLAN_EUSAGE || !strstr(err, "posted no receive"))
      fail_at(me, "stale: not reported", rc, err);
  }
  if (me < 2)
    c->ops->exchange(c, NULL, 0, NULL, 0, err, sizeof err);
  /* in step again: a ring */
  rank_exchange(c);
}

/* Disjoint groups {0, 1, 2} and {3}, then the world: the bits of the fold
 * in member order. */
static void rank_all_reduce(plan_comm *c) {
  int me = c->rank;
  char err[512] = "";
  int three[3] = {2, 0, 1}, alone[1] = {3}, world[WORLD] = {0, 1, 2, 3};
  double v[WORLD][3];
  for (int q = 0; q < WORLD; q++)
    for (int e = 0; e < 3; e++)
      v[q][e] = (q == 1 ? 1e16 : 1.0) * (e + 1) + q * 0.1 - (q == 2) * 1e16;
  for (int reduce = 0; reduce < PLAN_RED_COUNT; reduce++) {
    double buf[3];
    memcpy(buf, v[me], sizeof buf);
    const int *g = me == 3 ? alone : three;
    int n = me == 3 ? 1 : 3;
    int rc = c->ops->all_reduce(c, g, n, buf, 3, reduce, err, sizeof err);
    if (rc) {
      fail_at(me, "all_reduce in groups", rc, err);
      continue;
    }
    for (int e = 0; e < 3; e++) {
      double acc = v[g[0]][e];
      for (int i = 1; i < n; i++)
        acc = plan_reduce2(reduce, acc, v[g[i]][e]);
      if (reduce == PLAN_RED_AVG)
        acc /= n;
      if (memcmp(&acc, &buf[e], sizeof acc))
        fail_at(me, "all_reduce: not the fold's bits", reduce, "");
    }
    memcpy(buf, v[me], sizeof buf);
    rc = c->ops->all_reduce(c, world, WORLD, buf, 3, reduce, err, sizeof err);
    if (rc)
      fail_at(me, "all_reduce over the world", rc, err);
  }
  /* a member that reduces another length: every member told */
  double buf[4] = {0};
  int rc = c->ops->all_reduce(c, world, WORLD, buf, me == 3 ? 4 : 3,
                              PLAN_RED_SUM, err, sizeof err);
  if (rc != PLAN_EUSAGE || !strstr(err, "doubles"))
    fail_at(me, "all_reduce of other lengths: not reported", rc, err);
}

/* Under mpirun: every rank's part; the exit status says how it went. */
static int rank_main(void) {
  plan_comm *c = NULL;
  char err[512] = "";
  int rc = plan_comm_mpi_open(&c, 10.0, err, sizeof err);
  if (rc) {
    fprintf(stderr, "plan_comm_mpi_open: status %d: %s\n", rc, err);
    return 1;
  }
  if (c->world != WORLD) {
    fprintf(stderr, "a world of %d, %d expected\n", c->world, WORLD);
    plan_comm_close(c);
    return 1;
  }
  rank_exchange(c);
  rank_mismatch(c);
  rank_all_reduce(c);
  char line[256] = "";
  c->ops->describe(c, line, sizeof line);
  if (!strstr(line, "mpi (") || !strstr(line, "of 4"))
    fail_at(c->rank, "describe", 0, line);
  plan_comm_close(c);
  return failures ? 1 : 0;
}

static char self_path[4096];

static void use_plugin(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", self_path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  char plugin[4200];
  snprintf(plugin, sizeof plugin, "%s/../libplan-comm-mpi.so", dir);
  setenv("PLAN_COMM_MPI_PLUGIN", plugin, 1);
}

static void test_under_mpi(void **state) {
  (void)state;
  unsetenv("PMI_SIZE");
  unsetenv("PMIX_RANK");
  unsetenv("PMI_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  assert_false(plan_comm_under_mpi());
  setenv("PMI_SIZE", "2", 1);
  assert_true(plan_comm_under_mpi());
  unsetenv("PMI_SIZE");
  setenv("OMPI_COMM_WORLD_SIZE", "", 1);
  assert_false(plan_comm_under_mpi());
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

static void test_missing_plugin(void **state) {
  (void)state;
  setenv("PLAN_COMM_MPI_PLUGIN", "/nonexistent/libplan-comm-mpi.so", 1);
  setenv("PMI_SIZE", "1", 1); /* as if launched: the plugin is looked for */
  plan_comm *c = (plan_comm *)1;
  char err[512] = "";
  int rc = plan_comm_mpi_open(&c, 1.0, err, sizeof err);
  unsetenv("PMI_SIZE");
  assert_int_equal(rc, PLAN_EUNSUPPORTED);
  assert_null(c);
  assert_non_null(strstr(err, "/nonexistent/libplan-comm-mpi.so"));
  use_plugin();
}

static int mpirun_self(int n);

/* The four ranks' part under mpirun: its exit status is theirs. */
static void test_four_ranks(void **state) {
  (void)state;
  use_plugin();
  assert_int_equal(mpirun_self(WORLD), 0);
}

/* Not under a launcher: refused with the reason, MPI never loaded. */
static void test_no_launcher(void **state) {
  (void)state;
  use_plugin();
  plan_comm *c = (plan_comm *)1;
  char err[512] = "";
  assert_int_equal(plan_comm_mpi_open(&c, 5.0, err, sizeof err), PLAN_EUSAGE);
  assert_null(c);
  assert_non_null(strstr(err, "not started by an MPI launcher"));
}

/* A world of one under mpirun -np 1: its arguments checked, a group of
 * one left as it is. */
static int world_one(void) {
  plan_comm *c = NULL;
  char err[512] = "";
  if (plan_comm_mpi_open(&c, 0, err, sizeof err) != PLAN_EUSAGE || c)
    fail_at(0, "a timeout of 0 accepted", 0, err);
  int rc = plan_comm_mpi_open(&c, 5.0, err, sizeof err);
  if (rc || !c || c->world != 1 || c->rank != 0) {
    fail_at(0, "world of one: open", rc, err);
    return 1;
  }
  double x = 0.1;
  int g[1] = {0};
  rc = c->ops->all_reduce(c, g, 1, &x, 1, PLAN_RED_AVG, err, sizeof err);
  if (rc || x != 0.1)
    fail_at(0, "world of one: all_reduce", rc, err);
  plan_comm_msg m = {0, &x, sizeof x};
  rc = c->ops->exchange(c, &m, 1, NULL, 0, err, sizeof err);
  if (rc != PLAN_EUSAGE || !strstr(err, "not a message to another rank"))
    fail_at(0, "world of one: a message to itself", rc, err);
  plan_comm_close(c);
  return failures ? 1 : 0;
}

/* mpirun -np N on this binary; its exit status. The ranks' leaks are not
 * checked under the sanitizers: Open MPI's finalize unloads its
 * components, whose allocations then show as unnamed leaks. */
/* Runs this program on n ranks under mpirun; its exit status. What the
 * launcher and the ranks print goes to a file, shown when the run fails.
 * A launch that fails before any rank reported (no "rank " line: the
 * launcher itself, e.g. its shared-memory setup on a loaded machine) is
 * tried once more, saying so; a rank's own failure is never retried. */
static int mpirun_self(int n) {
  char out[64], cmd[8600];
  snprintf(out, sizeof out, "/tmp/test_comm.%d.out", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
           "LSAN_OPTIONS=detect_leaks=0 timeout 60 mpirun --oversubscribe "
           "--mca btl self,vader -np %d '%s' >%s 2>&1",
           n, self_path, out);
  int rc = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    rc = system(cmd);
    if (rc == 0)
      break;
    char line[512];
    bool ranks_failed = false;
    FILE *f = fopen(out, "r");
    fprintf(stderr, "mpirun -np %d exited with status %d; its output:\n", n,
            rc);
    while (f && fgets(line, sizeof line, f)) {
      fputs(line, stderr);
      ranks_failed = ranks_failed || !strncmp(line, "rank ", 5);
    }
    if (f)
      fclose(f);
    if (ranks_failed)
      break;
    if (attempt == 0)
      fprintf(stderr, "no rank reported a failure: launching again\n");
  }
  remove(out);
  return rc;
}

static void test_world_one(void **state) {
  (void)state;
  use_plugin();
  assert_int_equal(mpirun_self(1), 0);
}

int main(int argc, char **argv) {
  (void)argc;
  if (!realpath(argv[0], self_path))
    snprintf(self_path, sizeof self_path, "%s", argv[0]);
  if (plan_comm_under_mpi()) {
    use_plugin();
    const char *w = getenv("OMPI_COMM_WORLD_SIZE");
    return w && !strcmp(w, "1") ? world_one() : rank_main();
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_under_mpi),   cmocka_unit_test(test_missing_plugin),
      cmocka_unit_test(test_no_launcher), cmocka_unit_test(test_four_ranks),
      cmocka_unit_test(test_world_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
