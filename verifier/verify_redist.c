/* The collectives of the lowered run, executed by global index: a
 * rank's new block takes each element from the group member whose old
 * block holds it, or reduces over the members, in coordinate order (a
 * fixed order: runs repeat bit for bit); on the runner's own all-reduce
 * when it has one, through the communicator when distributed. */
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

/* The runner's all-reduce (a device-side one) of the group of rank r, the
 * group's first member: member 0's block is copied into r's result block,
 * which then takes the reduction; the runner reduces in member order, so
 * the bits are those of the host loop below. */
static int runner_all_reduce(vctx *c, const vx_step *s, int64_t k, int64_t r) {
  const vx_redist_step *st = &s->redist;
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  block *d = &dst[r];
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  double **blocks = malloc(sizeof *blocks * (size_t)k);
  if (!blocks)
    return plan_oom();
  for (int64_t m = 0; m < k; m++) {
    coord[st->axis] = m;
    const block *sb = &src[plan_vx_rank_at(c->m, coord)];
    if (sb->n != d->n || dst[plan_vx_rank_at(c->m, coord)].n != d->n) {
      free(blocks);
      return plan_failf(PLAN_EINVALID,
                        "all_reduce: the group's blocks differ in size");
    }
    blocks[m] = m ? sb->data : d->data;
    if (!m && d->data != sb->data)
      memcpy(d->data, sb->data, sizeof(double) * (size_t)d->n);
  }
  char err[256] = "";
  int rc =
      c->runner->all_reduce(blocks, (int)k, d->n, st->reduce, err, sizeof err);
  free(blocks);
  if (rc)
    return plan_failf(rc, "runner '%s': all_reduce: %s", c->runner->name, err);
  return PLAN_OK;
}

/* An all-reduce turns P into R along one axis: the group's blocks and the
 * result have one layout, so element e of every member reduces into
 * element e, in coordinate order (bit-for-bit as the general path). */
static int run_all_reduce(vctx *c, const vx_step *s, int64_t k) {
  const vx_redist_step *st = &s->redist;
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  int a = st->axis;
  if (c->comm)
    return plan_vx_dist_all_reduce(c, s, k);
  /* the group's first member reduces in coordinate order; the others copy
   * its result (every member would compute the same bits) */
  for (int64_t r = 0; r < c->nranks; r++) {
    if (c->coords[r][a] != 0 || !plan_vx_in_mb(c, r))
      continue;
    block *d = &dst[r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    if (c->runner->all_reduce) {
      int rc = runner_all_reduce(c, s, k, r);
      if (rc)
        return rc;
    }
    for (int64_t m = 0; m < k && !c->runner->all_reduce; m++) {
      coord[a] = m;
      const block *sb = &src[plan_vx_rank_at(c->m, coord)];
      if (sb->n != d->n || dst[plan_vx_rank_at(c->m, coord)].n != d->n)
        return plan_failf(PLAN_EINVALID,
                          "all_reduce: the group's blocks differ in size");
      double *x = d->data;
      const double *y = sb->data;
      if (!m)
        memcpy(x, y, sizeof(double) * (size_t)d->n);
      else if (st->reduce == PLAN_RED_SUM || st->reduce == PLAN_RED_AVG)
        for (int64_t e = 0; e < d->n; e++)
          x[e] += y[e];
      else
        for (int64_t e = 0; e < d->n; e++)
          x[e] = plan_reduce2(st->reduce, x[e], y[e]);
    }
    if (st->reduce == PLAN_RED_AVG && !c->runner->all_reduce)
      for (int64_t e = 0; e < d->n; e++)
        d->data[e] /= (double)k;
    for (int64_t m = 1; m < k; m++) {
      coord[a] = m;
      double *q = dst[plan_vx_rank_at(c->m, coord)].data;
      if (q != d->data) /* a shared copy is the result already */
        memcpy(q, d->data, sizeof(double) * (size_t)d->n);
    }
  }
  return PLAN_OK;
}

const int64_t *plan_vx_group_order(const vctx *c, const vx_step *s, int64_t r) {
  if (s->rank_order)
    return s->rank_order + r * c->m->axis_sizes[s->redist.axis];
  return s->group_order;
}

/* The block whose layout rank r's new block of a reduce_scatter follows:
 * with an order, member order[i] keeps piece i, the piece member i keeps
 * without one (spec/lowered-format.md); else r's own. */
static const block *scatter_layout(const vctx *c, const vx_step *s, int64_t r) {
  const block *dst = c->bufs[s->out[0]];
  const int64_t *ord = plan_vx_group_order(c, s, r);
  if (!ord)
    return &dst[r];
  int a = s->redist.axis;
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[r], sizeof coord);
  for (int64_t i = 0; i < c->m->axis_sizes[a]; i++)
    if (ord[i] == c->coords[r][a])
      coord[a] = i;
  return &dst[plan_vx_rank_at(c->m, coord)];
}

/* A reduce-scatter on the runner's all-reduce (see runner_all_reduce):
 * each member's values of the elements of rank r's new block are gathered
 * in the order the host loop below reads them, then folded by the runner
 * in member order, into r's block. *done is false when some member lacks
 * an element: the host loop then writes the whole block itself (or
 * reports the gap). */
static int runner_reduce_scatter(vctx *c, const vx_step *s, int64_t k,
                                 int64_t r, bool *done) {
  const vx_redist_step *st = &s->redist;
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  block *src = c->bufs[s->in[0]], *d = &c->bufs[s->out[0]][r];
  const block *lay = scatter_layout(c, s, r);
  int a = st->axis;
  *done = false;
  double **blocks = calloc((size_t)k, sizeof *blocks);
  if (!blocks)
    return plan_oom();
  int rc = PLAN_OK;
  bool whole = true;
  for (int64_t m = 0; m < k && !rc && whole; m++) {
    blocks[m] =
        m ? malloc(sizeof(double) * (size_t)(d->n > 0 ? d->n : 1)) : d->data;
    if (!blocks[m]) {
      rc = plan_oom();
      break;
    }
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    coord[a] = m;
    const block *sb = &src[plan_vx_rank_at(c->m, coord)];
    for (int64_t e = 0; e < d->n && whole; e++) {
      int64_t li = plan_vx_local_index(t, sb, plan_vx_global_index(t, lay, e));
      whole = li >= 0 && li < sb->n;
      if (whole)
        blocks[m][e] = sb->data[li];
    }
  }
  if (!rc && whole) {
    char err[256] = "";
    rc = c->runner->all_reduce(blocks, (int)k, d->n, st->reduce, err,
                               sizeof err);
    if (rc)
      rc = plan_failf(rc, "runner '%s': reduce_scatter: %s", c->runner->name,
                      err);
    else
      *done = true;
  }
  for (int64_t m = 1; m < k; m++)
    free(blocks[m]);
  free(blocks);
  return rc;
}

int64_t plan_vx_redist_source(const vctx *c, const vx_step *s, int64_t d,
                              int64_t g, int64_t *li) {
  const vx_redist_step *st = &s->redist;
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[s->out[0]].tensor];
  const block *src = c->bufs[s->in[0]];
  int a = st->axis;
  const int64_t *ord = plan_vx_group_order(c, s, d);
  int64_t coord[PLAN_MAX_MESH_AXES];
  memcpy(coord, c->coords[d], sizeof coord);
  for (int64_t m = 0; m < c->m->axis_sizes[a]; m++) { /* coordinate order */
    coord[a] = m;
    *li = plan_vx_local_index(t, &src[plan_vx_rank_at(c->m, coord)], g);
    if (*li < 0)
      continue;
    if (ord) /* position m holds the block of order[m] */
      coord[a] = ord[m];
    int64_t q = plan_vx_rank_at(c->m, coord);
    return *li < src[q].n ? q : -2; /* the reader allows even pieces only */
  }
  return -1;
}

static int run_redist_whole(vctx *c, const vx_step *s) {
  const vx_redist_step *st = &s->redist;
  const vx_buf *ob = &c->low->bufs[s->out[0]];
  const vx_tensor *t = &c->prog->tensors[ob->tensor];
  block *src = c->bufs[s->in[0]], *dst = c->bufs[s->out[0]];
  int a = st->axis;
  int64_t k = c->m->axis_sizes[a];
  if (st->kind == VX_REDIST_ALL_REDUCE)
    return run_all_reduce(c, s, k);
  bool local =
      st->kind == VX_REDIST_ZERO_NON_OWNER || st->kind == VX_REDIST_RELABEL;
  if (c->comm && st->kind == VX_REDIST_REDUCE_SCATTER)
    return plan_vx_dist_reduce_scatter(c, s, k);
  if (c->comm && !local)
    return plan_vx_dist_redist(c, s);
  for (int64_t r = 0; r < c->nranks; r++) {
    if (!plan_vx_runs(c, r))
      continue;
    if (st->kind == VX_REDIST_REDUCE_SCATTER && c->runner->all_reduce) {
      bool done;
      int rc = runner_reduce_scatter(c, s, k, r, &done);
      if (rc)
        return rc;
      if (done)
        continue;
    }
    block *d = &dst[r];
    int64_t coord[PLAN_MAX_MESH_AXES];
    memcpy(coord, c->coords[r], sizeof coord);
    bool reduce = st->kind == VX_REDIST_ALL_REDUCE ||
                  st->kind == VX_REDIST_REDUCE_SCATTER;
    /* a reduce_scatter's piece: the one its order gives r */
    const block *lay = reduce ? scatter_layout(c, s, r) : d;
    if (lay->n != d->n)
      return plan_failf(PLAN_EINVALID,
                        "reduce_scatter of '%s': its order needs even pieces",
                        t->name);
    for (int64_t e = 0; e < d->n; e++) {
      int64_t g = plan_vx_global_index(t, lay, e);
      if (st->kind == VX_REDIST_ZERO_NON_OWNER && c->coords[r][a] != 0) {
        d->data[e] = 0;
        continue;
      }
      if (local) {
        int64_t li = plan_vx_local_index(t, &src[r], g);
        d->data[e] = li >= 0 ? src[r].data[li] : 0;
        continue;
      }
      if (!reduce) {
        int64_t li, q = plan_vx_redist_source(c, s, r, g, &li);
        if (q == -2)
          return plan_failf(PLAN_EINVALID,
                            "%s of '%s': its order needs even pieces",
                            plan_vx_redist_kind_name(st->kind), t->name);
        if (q < 0)
          return plan_failf(PLAN_EINVALID,
                            "%s of '%s': no rank of the group holds an "
                            "element",
                            plan_vx_redist_kind_name(st->kind), t->name);
        d->data[e] = src[q].data[li];
        continue;
      }
      double acc = 0;
      bool have = false;
      for (int64_t m = 0; m < k; m++) { /* the group, in coordinate order */
        coord[a] = m;
        const block *sb = &src[plan_vx_rank_at(c->m, coord)];
        int64_t li = plan_vx_local_index(t, sb, g);
        if (li < 0)
          continue;
        acc = have ? plan_reduce2(st->reduce, acc, sb->data[li]) : sb->data[li];
        have = true;
      }
      if (reduce && st->reduce == PLAN_RED_AVG)
        acc /= (double)k;
      if (!have)
        return plan_failf(PLAN_EINVALID,
                          "%s of '%s': no rank of the group holds an element",
                          plan_vx_redist_kind_name(st->kind), t->name);
      d->data[e] = acc;
    }
  }
  return PLAN_OK;
}

/* A chunked collective (communication overlap): the whole collective
 * into scratch blocks laid out as out's, then slice chunk_index along
 * chunk_dim of each rank's scratch block into slice chunk_at of its
 * block (the reader checked that chunk_of divides every block). */
static int run_chunked(vctx *c, const vx_step *s) {
  int ob = s->out[0];
  block *dst = c->bufs[ob];
  const vx_tensor *t = &c->prog->tensors[c->low->bufs[ob].tensor];
  block *tmp = calloc((size_t)c->nranks + 1, sizeof(block));
  if (!tmp)
    return plan_oom();
  int rc = PLAN_OK;
  for (int64_t r = 0; r < c->nranks && !rc; r++) {
    tmp[r] = dst[r];
    tmp[r].data = NULL;
    if (!dst[r].data)
      continue;
    tmp[r].data =
        malloc(sizeof(double) * (size_t)(dst[r].n > 0 ? dst[r].n : 1));
    if (!tmp[r].data)
      rc = plan_oom();
    else
      memcpy(tmp[r].data, dst[r].data, sizeof(double) * (size_t)dst[r].n);
  }
  if (!rc) {
    c->bufs[ob] = tmp;
    rc = run_redist_whole(c, s);
    c->bufs[ob] = dst;
  }
  int d = s->chunk_dim;
  for (int64_t r = 0; r < c->nranks && !rc; r++) {
    if (!dst[r].data || !tmp[r].data || !plan_vx_runs(c, r))
      continue;
    int64_t outer = 1, inner = 1, len = dst[r].local[d];
    for (int q = 0; q < d; q++)
      outer *= dst[r].local[q];
    for (int q = d + 1; q < t->rank; q++)
      inner *= dst[r].local[q];
    int64_t cs = len / s->chunk_of;
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst[r].data + (o * len + s->chunk_at * cs) * inner,
             tmp[r].data + (o * len + s->chunk_index * cs) * inner,
             sizeof(double) * (size_t)(cs * inner));
  }
  for (int64_t r = 0; r < c->nranks; r++)
    free(tmp[r].data);
  free(tmp);
  return rc;
}

int plan_vx_run_redist(vctx *c, const vx_step *s) {
  return s->chunk_of > 0 ? run_chunked(c, s) : run_redist_whole(c, s);
}
