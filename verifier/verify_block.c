/* The blocks of the lowered run: the index maps between a rank's block
 * and its global tensor, and the pool of blocks handed back, reused for
 * later buffers (fresh pages would be faulted in and zeroed again for
 * every buffer). */
#include <stdlib.h>
#include <string.h>

#include "verify_ctx.h"

int64_t plan_vx_count_of(const int64_t *dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  return n;
}

int64_t plan_vx_rank_at(const vx_mesh *m, const int64_t *coord) {
  int64_t r = 0;
  for (int a = 0; a < m->naxes; a++)
    r = r * m->axis_sizes[a] + coord[a];
  return r;
}

int64_t plan_vx_group_size(const vx_mesh *m, const int *pa, int np) {
  int64_t n = 1;
  for (int i = 0; i < np; i++)
    n *= m->axis_sizes[pa[i]];
  return n;
}

int64_t plan_vx_group_member(const vx_mesh *m, const int *pa, int np,
                             const int64_t *coord, int64_t k) {
  int64_t at[PLAN_MAX_MESH_AXES];
  memcpy(at, coord, sizeof at);
  for (int i = np - 1; i >= 0; i--) {
    at[pa[i]] = k % m->axis_sizes[pa[i]];
    k /= m->axis_sizes[pa[i]];
  }
  return plan_vx_rank_at(m, at);
}

int plan_vx_sum_members(const vctx *c, int b, const int *pa, int np, int64_t r,
                        const double **mem, int max) {
  for (int i = 0; i < np; i++)
    if (c->low->bufs[b].pl.ax[pa[i]].reduce != PLAN_RED_SUM)
      return 0;
  int64_t n = plan_vx_group_size(c->m, pa, np);
  if (n > max)
    return 0;
  for (int64_t k = 0; k < n; k++) {
    const block *q =
        &c->bufs[b][plan_vx_group_member(c->m, pa, np, c->coords[r], k)];
    if (!q->data || q->n != c->bufs[b][r].n)
      return 0;
    mem[k] = q->data;
  }
  return (int)n;
}

void plan_vx_layout(const vctx *c, const plan_placement *pl, int tensor,
                    int64_t r, block *b) {
  const vx_tensor *t = &c->prog->tensors[tensor];
  plan_vx_block_of(c->low, pl, tensor, c->coords[r], b->local, b->offset);
  b->n = plan_vx_count_of(b->local, t->rank);
}

/* Global row-major index of local element k of a block. */
int64_t plan_vx_global_index(const vx_tensor *t, const block *b, int64_t k) {
  int64_t idx[PLAN_MAX_RANK] = {0}, g = 0;
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = b->local[d] ? k % b->local[d] : 0;
    k = b->local[d] ? k / b->local[d] : 0;
  }
  for (int d = 0; d < t->rank; d++)
    g = g * t->dims[d] + b->offset[d] + idx[d];
  return g;
}

int64_t plan_vx_local_index(const vx_tensor *t, const block *b, int64_t g) {
  int64_t idx[PLAN_MAX_RANK] = {0};
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = g % t->dims[d];
    g /= t->dims[d];
  }
  int64_t k = 0;
  for (int d = 0; d < t->rank; d++) {
    int64_t i = idx[d] - b->offset[d];
    if (i < 0 || i >= b->local[d])
      return -1;
    k = k * b->local[d] + i;
  }
  return k;
}

int plan_vx_alloc_block(block *b) {
  b->data = calloc((size_t)(b->n > 0 ? b->n : 1), sizeof(double));
  return b->data ? PLAN_OK : plan_oom();
}

/* A block's memory: a pooled one of at least n (and at most about twice
 * n) elements, else a fresh one. Pooled memory is not zeroed: the step that
 * writes a buffer writes every element. */
/* The bucket of a block of n doubles: floor(log2(n)). */
static int bucket_of(int64_t n) {
  int k = 0;
  for (uint64_t x = (uint64_t)n; x > 1 && k < PLAN_VX_POOL_BUCKETS - 1; x >>= 1)
    k++;
  return k;
}

/* Takes entry i of bucket q (the top moves into its place). */
static double *pop_at(plan_vx_bucket *q, int i) {
  double *d = q->data[i];
  q->count--;
  q->data[i] = q->data[q->count];
  q->n[i] = q->n[q->count];
  return d;
}

/* How many of the top entries of n's own bucket a take looks at for one
 * of n or more: blocks of one size come back together. */
#define PLAN_VX_POOL_LOOK 16

/* The smallest block the pool keeps, in doubles (1 MiB). The allocator
 * serves smaller blocks from its heap, where a freed block's memory is
 * reused in place for blocks of any size, its pages already mapped; it
 * maps the larger ones on their own, fresh pages faulted in and zeroed on
 * every allocation, which is what the pool saves. Pooling the small ones
 * too kept each size's own peak: memory no other size could reuse (4 GB
 * for 2.3 GB of blocks in a pipelined 32-layer model). */
#define PLAN_VX_POOL_MIN ((int64_t)1 << 17)

int plan_vx_take_block(vctx *c, block *b) {
  int64_t n = b->n > 0 ? b->n : 1, most = 8 * n + 4096;
  if (n < PLAN_VX_POOL_MIN) {
    b->data = malloc(sizeof(double) * (size_t)n);
    return b->data ? PLAN_OK : plan_oom();
  }
  /* n's bucket may hold blocks smaller than n: a look at its top few;
   * every bucket above holds blocks of n or more, up to the most a block
   * may waste */
  int k = bucket_of(n), top = bucket_of(most);
  plan_vx_bucket *q = &c->pool[k];
  for (int i = q->count - 1; i >= 0 && i >= q->count - PLAN_VX_POOL_LOOK; i--)
    if (q->n[i] >= n && q->n[i] <= most) {
      b->data = pop_at(q, i);
      return PLAN_OK;
    }
  for (int x = k + 1; x <= top; x++) {
    q = &c->pool[x];
    if (q->count && q->n[q->count - 1] <= most) {
      b->data = pop_at(q, q->count - 1);
      return PLAN_OK;
    }
  }
  return plan_vx_alloc_block(b);
}

void plan_vx_give_block(vctx *c, block *b) {
  if (!b->data)
    return;
  int64_t n = b->n > 0 ? b->n : 1;
  if (n < PLAN_VX_POOL_MIN) { /* the allocator reuses it in place */
    free(b->data);
    b->data = NULL;
    return;
  }
  plan_vx_bucket *q = &c->pool[bucket_of(n)];
  if (q->count == q->cap) {
    int cap = q->cap ? 2 * q->cap : 64;
    double **nd = realloc(q->data, sizeof *nd * (size_t)cap);
    if (nd)
      q->data = nd;
    int64_t *nn = nd ? realloc(q->n, sizeof *nn * (size_t)cap) : NULL;
    if (nn)
      q->n = nn;
    if (!nd || !nn) { /* no room to pool it: free it */
      free(b->data);
      b->data = NULL;
      return;
    }
    q->cap = cap;
  }
  q->data[q->count] = b->data;
  q->n[q->count++] = n;
  b->data = NULL;
}

double *plan_vx_take_array(vctx *c, int64_t n, bool zero) {
  block b;
  memset(&b, 0, sizeof b);
  b.n = n > 0 ? n : 1;
  if (plan_vx_take_block(c, &b))
    return NULL;
  if (zero)
    memset(b.data, 0, sizeof(double) * (size_t)b.n);
  return b.data;
}

/* Rank r's block of buffer b back to the pool (a shared copy is only
 * let go: its owner's block is given once). */
void plan_vx_give_rank(vctx *c, int b, int64_t r) {
  if (plan_vx_shared_copy(c, b, r))
    c->bufs[b][r].data = NULL;
  else
    plan_vx_give_block(c, &c->bufs[b][r]);
}

/* The mesh axes along which buffer lb is partial, into pa; their count. */
int plan_vx_partial_axes(const vx_buf *lb, int naxes, int *pa) {
  int np = 0;
  for (int a = 0; a < naxes; a++)
    if (lb->pl.ax[a].kind == PLAN_PL_P) {
      if (pa)
        pa[np] = a;
      np++;
    }
  return np;
}

/* Every block of buffer b allocated (zeros when fresh: a buffer read
 * before any step wrote it, which only a benchmark's stripped program
 * does, reads as zeros). */
int plan_vx_ensure_buffer(vctx *c, int b, bool zero) {
  for (int64_t r = 0; r < c->nranks; r++) {
    block *blk = &c->bufs[b][r];
    if (blk->data)
      continue;
    if (plan_vx_shared_copy(c, b, r)) { /* the owner's block (made first) */
      blk->data = c->bufs[b][plan_vx_mb_first(c, r)].data;
      continue;
    }
    if (!plan_vx_runs(c, r)) /* pipelines: this microbatch's; this process's */
      continue;
    int rc = plan_vx_take_block(c, blk);
    if (rc)
      return rc;
    if (zero) /* pooled memory is not */
      memset(blk->data, 0, sizeof(double) * (size_t)(blk->n > 0 ? blk->n : 1));
  }
  return PLAN_OK;
}
