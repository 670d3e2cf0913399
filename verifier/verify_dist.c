/* Distributed verification (libplan/verify.h, options version 5): one
 * process per mesh rank. Each process runs the single-device program and
 * its own rank's share of the lowered one: its blocks only (plan_vx_owned), the
 * local ops on its runner, and the collectives through a communicator
 * (runners/comm.h: the runner's own, NCCL for cuda, else the library's
 * MPI one):
 *
 *  - an all-reduce is the communicator's, over the rank's group along the
 *    step's axis (NCCL reduces on the GPUs);
 *  - a reduce-scatter packs, for every member of the group, the values of
 *    that member's new block this rank holds (the reduction's identity
 *    where it holds none), all-reduces the packed buffer, and keeps its
 *    own piece;
 *  - a redistribution that copies (all_gather, all_to_all, a slice) sends
 *    each member the values it reads from this rank (plan_vx_redist_source:
 *    the member the single-process verifier would read) in one exchange.
 *
 * Comparisons are made where the blocks are: a replica by its rank, a
 * partial group by its leader once the members' blocks are brought to it;
 * then every process's comparisons are merged in rank order, so each
 * process reports the same verdict and first divergent op. The
 * diagnoses, which read every rank's blocks, are left to a run in one
 * process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "verify_ctx.h"

#define ERRSZ 512

static int comm_fail(int rc, const char *what, const char *err) {
  return plan_failf(rc, "distributed verification: %s: %s", what, err);
}

/* What every process must agree on: the plan, the program it runs (a
 * lowered file's steps are not in its plan) and the way it is checked. */
typedef struct dist_key {
  plan_hash plan, lowered;
  uint64_t seed, tolerances;
  double rtol, atol;
  int32_t mode, dtype, world, nranks;
} dist_key;

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static void fill_key(const vctx *c, const plan_plan *p, dist_key *k) {
  memset(k, 0, sizeof *k);
  plan_hash_part(&k->plan, p, PLAN_PART_PLAN); /* zeros without one */
  plan_lowered_hash(&k->lowered, c->low->pub); /* zeros where it fails */
  const plan_verify_options *o = c->o;
  k->seed = o->seed;
  k->rtol = o->rtol;
  k->atol = o->atol;
  k->tolerances = 0xcbf29ce484222325ULL;
  for (int i = 0; i < o->ntolerances && o->tolerances; i++) {
    const plan_verify_tolerance *t = &o->tolerances[i];
    k->tolerances = fnv(k->tolerances, t->tensor, strlen(t->tensor) + 1);
    k->tolerances = fnv(k->tolerances, &t->rtol, sizeof t->rtol);
    k->tolerances = fnv(k->tolerances, &t->atol, sizeof t->atol);
  }
  k->mode = (int32_t)o->mode;
  k->dtype = c->dtype;
  k->world = o->world;
  k->nranks = (int32_t)c->nranks;
}

/* The global ranks of rank r's group along axis a, in coordinate order. */
static void group_of(const vctx *c, int64_t r, int a, int *members) {
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) {
    coord[a] = m;
    members[m] = (int)plan_vx_rank_at(c->m, coord);
  }
}

static int all_reduce(vctx *c, const int *members, int k, double *buf,
                      int64_t n, int reduce, const char *what) {
  char err[ERRSZ] = "";
  int rc = c->comm->ops->all_reduce(c->comm, members, k, buf, n, reduce, err,
                                    sizeof err);
  return rc ? comm_fail(rc, what, err) : PLAN_OK;
}

int plan_vx_dist_reduce(vctx *c, const int *members, int k, double *buf,
                        int64_t n, int reduce, const char *what) {
  return all_reduce(c, members, k, buf, n, reduce, what);
}

int plan_vx_dist_all_gather(vctx *c, const void *mine, size_t bytes, void *all,
                            const char *what) {
  int world = c->comm->world, me = c->comm->rank, n = 0;
  plan_comm_msg *msg = calloc((size_t)world * 2, sizeof *msg);
  if (!msg)
    return plan_oom();
  for (int q = 0; q < world; q++)
    if (q != me) {
      msg[n] = (plan_comm_msg){q, (void *)(uintptr_t)mine, (int64_t)bytes};
      msg[world + n++] =
          (plan_comm_msg){q, (char *)all + bytes * (size_t)q, (int64_t)bytes};
    }
  memmove((char *)all + bytes * (size_t)me, mine, bytes);
  char err[ERRSZ] = "";
  int rc =
      c->comm->ops->exchange(c->comm, msg, n, msg + world, n, err, sizeof err);
  free(msg);
  return rc ? comm_fail(rc, what, err) : PLAN_OK;
}

bool plan_vx_dist_all(vctx *c, bool ok) {
  if (!c->comm)
    return ok;
  int world = c->comm->world, members[PLAN_COMM_MAX_WORLD];
  for (int q = 0; q < world; q++)
    members[q] = q;
  double v = ok ? 1 : 0;
  int rc =
      all_reduce(c, members, world, &v, 1, PLAN_RED_MIN, "agreeing on a bound");
  if (rc && !c->dist_rc)
    c->dist_rc = rc;
  return !rc && v == 1;
}

/* Every process's key, compared with this one's: a process started on
 * another plan, seed or mode would make the collectives of another
 * program. */
static int check_same_run(vctx *c, const plan_plan *p) {
  int world = c->comm->world, me = c->comm->rank;
  dist_key mine, *all = calloc((size_t)world, sizeof *all);
  if (!all)
    return plan_oom();
  fill_key(c, p, &mine);
  int rc = plan_vx_dist_all_gather(c, &mine, sizeof mine, all,
                                   "meeting the other processes");
  for (int q = 0; q < world && !rc; q++)
    if (q != me && memcmp(&all[q], &mine, sizeof mine))
      rc = plan_failf(PLAN_EUSAGE,
                      "distributed verification: process %d verifies "
                      "another plan or with other options (plan, lowered "
                      "program, mode, seed, dtype, tolerances or world "
                      "size differ) than process %d",
                      q, me);
  free(all);
  return rc;
}

/* One small all-reduce over every group along every mesh axis, now, while
 * every process is known to be here: a backend that makes a communicator
 * per group (NCCL's split, which waits for every rank) makes them all at
 * the start, not at a step a failed process never reaches. */
static int meet_groups(vctx *c) {
  int rc = PLAN_OK, members[PLAN_COMM_MAX_WORLD];
  for (int a = 0; a < c->m->naxes && !rc; a++) {
    if (c->m->axis_sizes[a] < 2)
      continue;
    group_of(c, c->me, a, members);
    double one = 1;
    rc = all_reduce(c, members, (int)c->m->axis_sizes[a], &one, 1, PLAN_RED_SUM,
                    "meeting each group");
    if (!rc && one != (double)c->m->axis_sizes[a])
      rc = plan_failf(PLAN_EUNSUPPORTED,
                      "distributed verification: a group along mesh axis "
                      "'%s' counts %g processes, not %lld",
                      c->m->axis_names[a], one, (long long)c->m->axis_sizes[a]);
  }
  return rc;
}

int plan_vx_dist_open(vctx *c, const plan_plan *p) {
  const plan_verify_options *o = c->o;
  if (c->low->pipe)
    return plan_failf(PLAN_EUNSUPPORTED,
                      "distributed verification runs programs without a "
                      "pipeline so far; verify this one in one process (its "
                      "ranks simulated, or virtual on one GPU)");
  if (o->world != c->nranks)
    return plan_failf(PLAN_EUSAGE,
                      "distributed verification runs one process per mesh "
                      "rank: the mesh has %lld ranks, the world %d",
                      (long long)c->nranks, o->world);
  if (o->rank < 0 || o->rank >= o->world)
    return plan_failf(PLAN_EUSAGE, "rank %d is not in 0..%d", o->rank,
                      o->world - 1);
  if (o->world > PLAN_COMM_MAX_WORLD)
    return plan_failf(PLAN_EUSAGE,
                      "distributed verification takes at most %d processes",
                      PLAN_COMM_MAX_WORLD);
  if (o->comm && strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl"))
    return plan_failf(PLAN_EUSAGE, "no communicator named '%s' (mpi, nccl)",
                      o->comm);
  bool own = o->comm ? !strcmp(o->comm, "nccl") : c->runner->comm_open != NULL;
  if (own && !c->runner->comm_open)
    return plan_failf(PLAN_EUSAGE,
                      "runner '%s' has no communicator of its own: the "
                      "nccl one goes with the cuda runner",
                      c->runner->name);
  double timeout = o->timeout_s > 0 ? o->timeout_s : 300;
  char err[ERRSZ] = "";
  int rc = own ? c->runner->comm_open(&c->comm, o->rank, o->world,
                                      o->rendezvous, timeout, err, sizeof err)
               : plan_comm_mpi_open(&c->comm, timeout, err, sizeof err);
  if (rc) {
    c->comm = NULL;
    return comm_fail(rc, "opening the communicator", err);
  }
  if (c->comm->rank != o->rank || c->comm->world != o->world)
    return plan_failf(PLAN_EUSAGE,
                      "distributed verification: this process is rank %d of "
                      "%d to its communicator (%s), rank %d of %d to the "
                      "options; start one process per mesh rank under "
                      "mpirun or srun",
                      c->comm->rank, c->comm->world, own ? "nccl" : "mpi",
                      o->rank, o->world);
  c->me = o->rank;
  int rc2 = check_same_run(c, p);
  return rc2 ? rc2 : meet_groups(c);
}

void plan_vx_dist_close(vctx *c) {
  if (c->dist_done)
    plan_comm_close(c->comm);
  else
    plan_comm_abort(c->comm);
  c->comm = NULL;
}

int plan_vx_dist_all_reduce(vctx *c, const vx_step *s, int64_t k) {
  const block *sb = &c->bufs[s->in[0]][c->me];
  block *d = &c->bufs[s->out[0]][c->me];
  if (sb->n != d->n) /* every member's: the layouts are the same */
    return plan_failf(PLAN_EINVALID,
                      "all_reduce: the group's blocks differ in size");
  if (d->data != sb->data)
    memcpy(d->data, sb->data, sizeof(double) * (size_t)d->n);
  int members[PLAN_COMM_MAX_WORLD];
  group_of(c, c->me, s->redist.axis, members);
  return all_reduce(c, members, (int)k, d->data, d->n, s->redist.reduce,
                    "all_reduce");
}

/* The value that leaves a reduction unchanged. */
static double identity(int reduce) {
  return reduce == PLAN_RED_MAX   ? -INFINITY
         : reduce == PLAN_RED_MIN ? INFINITY
                                  : 0.0;
}

int plan_vx_dist_reduce_scatter(vctx *c, const vx_step *s, int64_t k) {
  const vx_redist_step *st = &s->redist;
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  int a = st->axis, members[PLAN_COMM_MAX_WORLD];
  group_of(c, c->me, a, members);
  /* member j's slot holds piece piece[j]: with an order, member order[i]
   * keeps piece i (spec/lowered-format.md) */
  int64_t piece[PLAN_COMM_MAX_WORLD];
  for (int64_t j = 0; j < k; j++)
    piece[j] = j;
  const int64_t *ord = plan_vx_group_order(c, s, c->me);
  for (int64_t i = 0; ord && i < k; i++)
    piece[ord[i]] = i;
  const block *mine = &src[c->me];
  int64_t total = 0, at = 0;
  for (int64_t j = 0; j < k; j++) {
    if (dst[members[piece[j]]].n != dst[members[j]].n)
      return plan_failf(PLAN_EINVALID,
                        "reduce_scatter of '%s': its order needs even pieces",
                        t->name);
    total += dst[members[j]].n;
  }
  double *pack = plan_vx_take_array(c, total, false);
  if (!pack)
    return plan_oom();
  for (int64_t j = 0; j < k; j++) { /* member j's new block */
    const block *d = &dst[members[piece[j]]];
    for (int64_t e = 0; e < d->n; e++) {
      int64_t li = plan_vx_local_index(t, mine, plan_vx_global_index(t, d, e));
      pack[at++] =
          li >= 0 && li < mine->n ? mine->data[li] : identity(st->reduce);
    }
  }
  int rc =
      all_reduce(c, members, (int)k, pack, total, st->reduce, "reduce_scatter");
  if (!rc) {
    at = 0;
    for (int64_t j = 0; members[j] != c->me; j++)
      at += dst[members[j]].n;
    block *d = &dst[c->me];
    memcpy(d->data, pack + at, sizeof(double) * (size_t)d->n);
  }
  free(pack);
  return rc;
}

/* The values member d reads from this rank in step s, in d's element
 * order, into out (room for d's block); their count. */
static int64_t pack_for(const vctx *c, const vx_step *s, int64_t d,
                        double *out) {
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  const block *b = &c->bufs[s->out[0]][d], *mine = &c->bufs[s->in[0]][c->me];
  int64_t n = 0;
  for (int64_t e = 0; e < b->n; e++) {
    int64_t li;
    if (plan_vx_redist_source(c, s, d, plan_vx_global_index(t, b, e), &li) ==
        c->me)
      out[n++] = mine->data[li];
  }
  return n;
}

/* Where each value of this rank's new block comes from (one pass: the
 * rank, or the value itself when it is this rank's own), then the
 * exchange: every member gets the values it reads from this rank, and the
 * values read from each member land where they belong, in order. */
int plan_vx_dist_redist(vctx *c, const vx_step *s) {
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  const block *mine = &c->bufs[s->in[0]][c->me];
  block *d = &c->bufs[s->out[0]][c->me];
  int k = (int)c->m->axis_sizes[s->redist.axis];
  int members[PLAN_COMM_MAX_WORLD];
  group_of(c, c->me, s->redist.axis, members);
  int64_t *from = malloc(sizeof *from * (size_t)(d->n > 0 ? d->n : 1));
  if (!from)
    return plan_oom();
  int64_t count[PLAN_COMM_MAX_WORLD] = {0}; /* values read, by member */
  int rc = PLAN_OK;
  for (int64_t e = 0; e < d->n && !rc; e++) {
    int64_t li, q = plan_vx_redist_source(c, s, c->me,
                                          plan_vx_global_index(t, d, e), &li);
    from[e] = q;
    if (q == -2)
      rc = plan_failf(PLAN_EINVALID,
                      "all_gather of '%s': its order needs even pieces",
                      t->name);
    else if (q < 0)
      rc = plan_failf(PLAN_EINVALID,
                      "%s of '%s': no rank of the group holds an element",
                      plan_vx_redist_kind_name(s->redist.kind), t->name);
    else if (q == c->me)
      d->data[e] = mine->data[li];
    else
      count[c->coords[q][s->redist.axis]]++;
  }
  plan_comm_msg sends[PLAN_COMM_MAX_WORLD], recvs[PLAN_COMM_MAX_WORLD];
  int ns = 0, nr = 0;
  for (int j = 0; j < k && !rc; j++) {
    int q = members[j];
    if (q == c->me)
      continue;
    double *v = plan_vx_take_array(c, c->bufs[s->out[0]][q].n, false);
    if (!v) {
      rc = plan_oom();
      break;
    }
    int64_t to = pack_for(c, s, q, v); /* what member q reads from here */
    if (to)
      sends[ns++] = (plan_comm_msg){q, v, to * (int64_t)sizeof(double)};
    else
      free(v);
    if (!count[j])
      continue;
    if (!(v = plan_vx_take_array(c, count[j], false))) {
      rc = plan_oom();
      break;
    }
    recvs[nr++] = (plan_comm_msg){q, v, count[j] * (int64_t)sizeof(double)};
  }
  char err[ERRSZ] = "";
  if (!rc && (rc = c->comm->ops->exchange(c->comm, sends, ns, recvs, nr, err,
                                          sizeof err)))
    rc = comm_fail(rc, plan_vx_redist_kind_name(s->redist.kind), err);
  int64_t next[PLAN_COMM_MAX_WORLD] = {0};
  for (int64_t e = 0; e < d->n && !rc; e++) /* in order, message by message */
    for (int i = 0; i < nr && from[e] != c->me; i++)
      if (recvs[i].peer == from[e]) {
        d->data[e] = ((double *)recvs[i].buf)[next[i]++];
        break;
      }
  for (int i = 0; i < ns; i++)
    free(sends[i].buf);
  for (int i = 0; i < nr; i++)
    free(recvs[i].buf);
  free(from);
  return rc;
}

/* The members of buf's partial group led by this rank's group leader. */
static int partial_group(const vctx *c, int buf, int *members) {
  const vx_buf *lb = &c->low->bufs[buf];
  int pa[PLAN_MAX_MESH_AXES], np = plan_vx_partial_axes(lb, c->m->naxes, pa);
  if (!np)
    return 0;
  int64_t coord[PLAN_MAX_MESH_AXES], n = 1;
  memcpy(coord, c->coords[c->me], sizeof coord);
  for (int i = 0; i < np; i++)
    n *= c->m->axis_sizes[pa[i]];
  for (int64_t x = 0; x < n; x++) { /* the leader (all zeros) first */
    int64_t y = x;
    for (int i = np - 1; i >= 0; i--) {
      coord[pa[i]] = y % c->m->axis_sizes[pa[i]];
      y /= c->m->axis_sizes[pa[i]];
    }
    members[x] = (int)plan_vx_rank_at(c->m, coord);
  }
  return (int)n;
}

int plan_vx_dist_gather_partial(vctx *c, int buf) {
  int members[PLAN_COMM_MAX_WORLD], n = partial_group(c, buf, members);
  if (n < 2)
    return PLAN_OK;
  block *b = c->bufs[buf];
  plan_comm_msg msg[PLAN_COMM_MAX_WORLD];
  int nm = 0, rc = PLAN_OK;
  bool leader = members[0] == c->me;
  for (int i = 1; i < n && leader; i++) { /* ghost blocks of the others */
    block *g = &b[members[i]];
    if (!(g->data = plan_vx_take_array(c, g->n, false)))
      return plan_oom();
    msg[nm++] =
        (plan_comm_msg){members[i], g->data, g->n * (int64_t)sizeof(double)};
  }
  if (!leader)
    msg[nm++] = (plan_comm_msg){members[0], b[c->me].data,
                                b[c->me].n * (int64_t)sizeof(double)};
  char err[ERRSZ] = "";
  rc = c->comm->ops->exchange(c->comm, leader ? NULL : msg, leader ? 0 : nm,
                              leader ? msg : NULL, leader ? nm : 0, err,
                              sizeof err);
  return rc ? comm_fail(rc, "gathering a partial group to compare", err)
            : PLAN_OK;
}

void plan_vx_dist_drop_partial(vctx *c, int buf) {
  for (int64_t r = 0; r < c->nranks; r++)
    if (r != c->me && c->bufs[buf][r].data) {
      free(c->bufs[buf][r].data);
      c->bufs[buf][r].data = NULL;
    }
}

int plan_vx_dist_merge_diffs(vctx *c) {
  int world = c->comm->world;
  size_t nb = (size_t)c->low->nbufs;
  diff *all = calloc(nb * (size_t)world + 1, sizeof *all);
  if (!all)
    return plan_oom();
  int rc = plan_vx_dist_all_gather(c, c->diffs, nb * sizeof *all, all,
                                   "merging the comparisons");
  for (size_t b = 0; b < nb && !rc; b++) { /* in rank order: everywhere alike */
    diff sum;
    memset(&sum, 0, sizeof sum);
    for (int q = 0; q < world; q++)
      plan_vx_merge_diff(&sum, &all[nb * (size_t)q + b]);
    c->diffs[b] = sum;
  }
  free(all);
  return rc;
}

int plan_vx_dist_merge_one(vctx *c, diff *df) {
  int world = c->comm->world;
  diff *all = calloc((size_t)world, sizeof *all);
  if (!all)
    return plan_oom();
  int rc =
      plan_vx_dist_all_gather(c, df, sizeof *df, all, "merging a comparison");
  if (!rc) {
    memset(df, 0, sizeof *df);
    for (int q = 0; q < world; q++)
      plan_vx_merge_diff(df, &all[q]);
  }
  free(all);
  return rc;
}

/* Every process's blocks of buffer b (n doubles each at rank r, from
 * blocks[r] for this process's rank) into global, by global index: the
 * param gathered from the master blocks. */
int plan_vx_dist_gather_global(vctx *c, const vx_tensor *t, int b,
                               double *const *blocks, double *global) {
  int world = c->comm->world, me = c->comm->rank, n = 0;
  plan_comm_msg *msg = calloc((size_t)world * 2, sizeof *msg);
  double **got = calloc((size_t)world, sizeof *got);
  int rc = msg && got ? PLAN_OK : plan_oom();
  for (int q = 0; q < world && !rc; q++) {
    if (q == me)
      continue;
    const block *bq = &c->bufs[b][q];
    if (!(got[q] = plan_vx_take_array(c, bq->n, false))) {
      rc = plan_oom();
      break;
    }
    msg[n] = (plan_comm_msg){q, blocks[me],
                             c->bufs[b][me].n * (int64_t)sizeof(double)};
    msg[world + n++] =
        (plan_comm_msg){q, got[q], bq->n * (int64_t)sizeof(double)};
  }
  char err[ERRSZ] = "";
  if (!rc && (rc = c->comm->ops->exchange(c->comm, msg, n, msg + world, n, err,
                                          sizeof err)))
    rc = comm_fail(rc, "gathering a param", err);
  for (int q = world - 1; q >= 0 && !rc; q--) { /* as in one process */
    const block *bq = &c->bufs[b][q];
    const double *v = q == me ? blocks[me] : got[q];
    for (int64_t e = 0; e < bq->n; e++)
      global[plan_vx_global_index(t, bq, e)] = v[e];
  }
  for (int q = 0; got && q < world; q++)
    free(got[q]);
  free(got);
  free(msg);
  return rc;
}
