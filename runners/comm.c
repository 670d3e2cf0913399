/* The all-reduce every communicator can fall back on (runners/comm.h):
 * the group's buffers gathered at every member through exchange, then
 * folded in member order, so every member holds the same bits and they
 * are those of the single-process verifier's host loop. */
#include "comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/space.h"
#include "base/util.h"

/* What every member sends first, in an exchange of its own: a description
 * of the call, so members that disagree on the group, the reduction or the
 * length are told so instead of folding different things. */
#define FOLD_MAGIC 0x706c616e666f6c64LL /* "planfold" */
#define FOLD_DESC 5

/* FNV-1a over the member list: equal lists give equal words. */
static int64_t members_key(const int *members, int nmembers) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < nmembers; i++) {
    uint32_t v = (uint32_t)members[i];
    for (int b = 0; b < 4; b++) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 0x100000001b3ULL;
    }
  }
  return (int64_t)(h >> 1);
}

static const char *reduce_name(int reduce) {
  static const char *const names[] = {"sum", "avg", "max", "min"};
  return reduce >= 0 && reduce < PLAN_RED_COUNT ? names[reduce] : "?";
}

int plan_comm_fold_all_reduce(plan_comm *c, const int *members, int nmembers,
                              double *buf, int64_t n, int reduce, char *err,
                              size_t errsz) {
  if (err && errsz)
    err[0] = 0;
  if (!c || !members)
    return plan_errc(PLAN_EUSAGE, err, errsz, "all_reduce: NULL argument");
  if (nmembers < 1 || nmembers > c->world)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: %d members in a world of %d", nmembers,
                     c->world);
  if (reduce < 0 || reduce >= PLAN_RED_COUNT)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: unknown reduction %d", reduce);
  if (n < 0 || (n > 0 && !buf) ||
      (uint64_t)n > (uint64_t)INT64_MAX / sizeof(double) / (uint64_t)nmembers)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: bad buffer (%lld doubles)", (long long)n);
  int me = -1;
  for (int i = 0; i < nmembers; i++) {
    if (members[i] < 0 || members[i] >= c->world)
      return plan_errc(PLAN_EUSAGE, err, errsz,
                       "all_reduce: member %d is not a rank of the world of %d",
                       members[i], c->world);
    for (int j = 0; j < i; j++)
      if (members[j] == members[i])
        return plan_errc(PLAN_EUSAGE, err, errsz,
                         "all_reduce: rank %d is twice in the group",
                         members[i]);
    if (members[i] == c->rank)
      me = i;
  }
  if (me < 0)
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "all_reduce: rank %d is not in the group it reduces over",
                     c->rank);
  if (nmembers == 1) {
    /* a sum of one, an average over one, the value itself; the two calls
     * the other groups make, empty, so a backend that counts calls (mpi)
     * stays in step */
    int rc = c->ops->exchange(c, NULL, 0, NULL, 0, err, errsz);
    return rc ? rc : c->ops->exchange(c, NULL, 0, NULL, 0, err, errsz);
  }

  int nothers = nmembers - 1;
  size_t nd = (size_t)n;
  int64_t mine[FOLD_DESC] = {FOLD_MAGIC, nmembers, reduce, n,
                             members_key(members, nmembers)};
  /* per other member: its description, then its n doubles */
  int64_t *descs = calloc((size_t)nothers * FOLD_DESC, sizeof *descs);
  double *theirs = nd ? malloc(sizeof *theirs * nd * (size_t)nothers) : NULL;
  plan_comm_msg *msgs = malloc(sizeof *msgs * 2 * (size_t)nothers);
  if (!descs || (nd && !theirs) || !msgs) {
    free(descs);
    free(theirs);
    free(msgs);
    return plan_errc(PLAN_ENOMEM, err, errsz, "all_reduce: out of memory");
  }
  /* First the descriptions alone, small and of one size everywhere, so
   * members that disagree (on n too) are told what each reduces, not that
   * a message has another size; then the data. */
  plan_comm_msg *sends = msgs, *recvs = msgs + nothers;
  for (int i = 0, k = 0; i < nmembers; i++) {
    if (i == me)
      continue;
    sends[k] = (plan_comm_msg){members[i], mine, sizeof mine};
    recvs[k] =
        (plan_comm_msg){members[i], descs + (size_t)k * FOLD_DESC, sizeof mine};
    k++;
  }
  int rc = c->ops->exchange(c, sends, nothers, recvs, nothers, err, errsz);
  for (int k = 0; !rc && k < nothers; k++) {
    const int64_t *d = descs + (size_t)k * FOLD_DESC;
    int who = members[k < me ? k : k + 1];
    if (memcmp(d, mine, sizeof mine) != 0)
      rc = plan_errc(
          PLAN_EUSAGE, err, errsz,
          "all_reduce: rank %d reduces %lld doubles (%s) over a "
          "group of %lld%s, rank %d %lld (%s) over a group of %d",
          who, (long long)d[3], reduce_name((int)d[2]), (long long)d[1],
          d[0] == FOLD_MAGIC && d[4] == mine[4] ? "" : " (other ranks)",
          c->rank, (long long)n, reduce_name(reduce), nmembers);
  }
  if (!rc) {
    for (int i = 0, k = 0; i < nmembers; i++) {
      if (i == me)
        continue;
      sends[k] = (plan_comm_msg){members[i], buf, (int64_t)(sizeof *buf * nd)};
      recvs[k] =
          (plan_comm_msg){members[i], theirs ? theirs + (size_t)k * nd : NULL,
                          (int64_t)(sizeof *buf * nd)};
      k++;
    }
    rc = c->ops->exchange(c, sends, nothers, recvs, nothers, err, errsz);
  }
  if (!rc) {
    /* fold in member order: acc = x0; acc = acc op x1; ... */
    for (size_t e = 0; e < nd; e++) {
      double acc = 0;
      for (int i = 0; i < nmembers; i++) {
        double x =
            i == me ? buf[e] : theirs[(size_t)(i < me ? i : i - 1) * nd + e];
        acc = i ? plan_reduce2(reduce, acc, x) : x;
      }
      buf[e] = reduce == PLAN_RED_AVG ? acc / nmembers : acc;
    }
  }
  free(descs);
  free(theirs);
  free(msgs);
  return rc;
}
