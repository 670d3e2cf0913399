/* Static checks of a lowered file's op steps, made when it is read
 * (lowered_io.c): on every rank, the blocks of an op step's buffers (their
 * local shapes follow from the buffers' placements) must fit the op by
 * the same rules every runner checks before it runs one
 * (plan_op_check_local, ir/ops.h). A step that does not fit is an error at
 * its position, before anything runs, rather than a kernel's failure
 * without one at run time. */
#include <stdio.h>
#include <string.h>

#include "ir/ops.h"
#include "lower/lowered_check.h"

/* The local shape of buffer b on the rank at coord. */
static void local_shape(const plan_lowered *l, int b, const int64_t *coord,
                        plan_shape *s) {
  const plan_tensor *t = &l->plan->program->tensors[l->bufs[b].tensor];
  memset(s, 0, sizeof *s);
  s->rank = t->rank;
  s->dtype = t->dtype;
  plan_redist_local_layout_r(&l->bufs[b].pl, t->dims, t->rank,
                             l->plan->mesh.axis_sizes, l->plan->mesh.ratios,
                             l->plan->mesh.nratios, coord, s->dims, NULL);
}

/* The mesh axes (bit a for axis a) whose coordinate can change a block's
 * shape in step s: those sharding a dim of an operand that does not split
 * evenly over every axis sharding it. None: every rank's blocks alike. */
static unsigned uneven_axes(const plan_lowered *l, const plan_lstep *s) {
  const plan_mesh *m = &l->plan->mesh;
  unsigned axes = 0;
  for (int j = 0; j < s->nin + s->nout; j++) {
    int b = j < s->nin ? s->in[j] : s->out[j - s->nin];
    const plan_placement *pl = &l->bufs[b].pl;
    const plan_tensor *t = &l->plan->program->tensors[l->bufs[b].tensor];
    for (int d = 0; d < t->rank; d++) {
      int64_t split = 1;
      unsigned on = 0;
      for (int a = 0; a < m->naxes; a++)
        if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == d) {
          split *= m->axis_sizes[a];
          on |= 1u << a;
        }
      if (on && t->dims[d] % split)
        axes |= on;
    }
  }
  return axes;
}

/* Step s on the rank at coord; its one-line reason into err. */
static int check_at(const plan_lowered *l, const plan_lstep *s,
                    const int64_t *coord, char *err, size_t errsz) {
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  for (int j = 0; j < s->nin; j++)
    local_shape(l, s->in[j], coord, &in[j]);
  for (int k = 0; k < s->nout; k++)
    local_shape(l, s->out[k], coord, &out[k]);
  const plan_op *op = &l->plan->program->ops[s->op];
  return plan_op_check_local(op->kind, op->attrs, in, s->nin, out, s->nout, err,
                             errsz);
}

int plan_lowered_check_op_step(const plan_lowered *l, const plan_lstep *s,
                               char *err, size_t errsz) {
  const plan_mesh *m = &l->plan->mesh;
  unsigned axes = uneven_axes(l, s);
  int64_t coord[PLAN_MAX_MESH_AXES] = {0};
  char why[512];
  /* every combination of coordinates on the axes that matter, the others
   * at 0: one rank when every shard is even */
  for (;;) {
    if (check_at(l, s, coord, why, sizeof why)) {
      char at[128];
      size_t n = 0;
      at[0] = 0;
      for (int a = 0; a < m->naxes && n < sizeof at; a++)
        if (axes >> a & 1) {
          int w = snprintf(at + n, sizeof at - n, "%s%s=%lld", n ? ", " : "",
                           m->axis_names[a], (long long)coord[a]);
          n += w > 0 ? (size_t)w : 0;
        }
      return plan_errf(err, errsz,
                       "the blocks of op step '%s'%s%s%s do not fit "
                       "the op: %s",
                       l->plan->program->ops[s->op].name,
                       axes ? " on rank (" : "", at, axes ? ")" : "", why);
    }
    int a = m->naxes - 1;
    for (; a >= 0; a--) {
      if (!(axes >> a & 1))
        continue;
      if (++coord[a] < m->axis_sizes[a])
        break;
      coord[a] = 0;
    }
    if (a < 0)
      return PLAN_OK;
  }
}
