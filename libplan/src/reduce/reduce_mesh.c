/* Mesh reduction (reduce.c, docs/verify.md "Mesh reduction"): the ranks
 * along a mesh axis all run the same program on their own data, so an
 * axis of size k verifies as well through fewer of them, its smallest
 * divisor d > 1, where every dim it splits keeps its pattern over d ranks
 * (even, with at least min(n/k, 2) per shard; or uneven with the same
 * kinds of piece: full, partial, empty). Axes whose ranks are named one
 * by one keep their size: the pipeline's (each rank a stage), an axis with
 * a ratio set (a weight per rank), one a submesh fixes, and in a lowered
 * program the axes of a step that lists its ranks. The sizes are chosen
 * with the dims': a dim whose new size does not keep its pattern over the
 * reduced axes gives them their sizes back (plan_rd_mesh_keep), and the
 * sizes are solved again. */
#include <string.h>

#include "base/util.h"
#include "lower/lower.h"
#include "reduce/reduce_ctx.h"

static int64_t smallest_divisor(int64_t k) {
  for (int64_t d = 2; d <= k / d; d++)
    if (k % d == 0)
      return d;
  return k;
}

static void keep_axis(rctx *c, int a, axis_why why) {
  if (c->nk[a] != c->p->mesh.axis_sizes[a] || !c->axis_keep[a]) {
    c->nk[a] = c->p->mesh.axis_sizes[a];
    c->axis_keep[a] = (uint8_t)why;
  }
}

/* A pipeline's microbatches shrink like an axis, to the smallest divisor
 * of their count that keeps every phase of its schedule: at least the
 * pipeline ranks (1F1B's warm-up, steady state and cool-down, GPipe's
 * fill), twice them for the schedules with two chunks a rank or
 * zero-bubble splits; an explicit grid (its actions name microbatches)
 * and a lowered program (its microbatch axis) keep theirs. */
static int64_t fewest_microbatches(const plan_plan *p) {
  const plan_pipeline *pp = &p->pipeline;
  int64_t m = pp->microbatches;
  if (pp->schedule == PLAN_SCHED_EXPLICIT || pp->axis < 0 || m <= 2)
    return m;
  int64_t ranks = p->mesh.axis_sizes[pp->axis];
  int64_t need =
      pp->schedule == PLAN_SCHED_GPIPE || pp->schedule == PLAN_SCHED_1F1B
          ? ranks
          : 2 * ranks;
  for (int64_t d = need < 2 ? 2 : need; d < m; d++)
    if (m % d == 0)
      return d;
  return m;
}

void plan_rd_mesh_init(rctx *c, bool mesh, const plan_lowered *l) {
  const plan_plan *p = c->p;
  const plan_mesh *m = &p->mesh;
  for (int a = 0; a < PLAN_MAX_MESH_AXES; a++) {
    c->nk[a] = a < m->naxes ? m->axis_sizes[a] : 1;
    c->axis_keep[a] = AXIS_NOT_ASKED;
  }
  c->nmb = p->pipeline.present ? p->pipeline.microbatches : 1;
  if (!mesh || !p->has_mesh)
    return;
  if (p->pipeline.present && !l)
    c->nmb = fewest_microbatches(p);
  for (int a = 0; a < m->naxes; a++) {
    int64_t d = smallest_divisor(m->axis_sizes[a]);
    c->nk[a] = d;
    c->axis_keep[a] = d == m->axis_sizes[a] ? AXIS_PRIME : AXIS_REDUCED;
  }
  if (p->pipeline.present && p->pipeline.axis >= 0)
    keep_axis(c, p->pipeline.axis, AXIS_PIPELINE);
  for (int i = 0; i < m->nratios; i++)
    keep_axis(c, m->ratios[i].axis, AXIS_RATIOS);
  for (int i = 0; i < m->nsubmeshes; i++)
    for (int a = 0; a < m->naxes; a++)
      if (m->submeshes[i].index[a] >= 0)
        keep_axis(c, a, AXIS_SUBMESH);
  /* a lowered pipeline: its microbatch axis (a rank per microbatch) */
  if (l && l->pipe && l->pipe->axis >= 0)
    keep_axis(c, l->pipe->axis, AXIS_PIPELINE);
  for (int i = 0; l && i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind != PLAN_LSTEP_REDIST)
      continue;
    if (s->rank_order) /* groups over the whole mesh's ranks */
      for (int a = 0; a < m->naxes; a++)
        keep_axis(c, a, AXIS_GROUPS);
    else if (s->group_order && s->redist.axis >= 0)
      keep_axis(c, s->redist.axis, AXIS_GROUPS);
  }
}

bool plan_rd_mesh_keep(rctx *c, unsigned axes, bool mb) {
  bool changed = false;
  if (mb && c->p->pipeline.present && c->nmb != c->p->pipeline.microbatches) {
    c->nmb = c->p->pipeline.microbatches;
    changed = true;
  }
  for (int a = 0; a < c->p->mesh.naxes; a++)
    if ((axes >> a & 1u) && c->nk[a] != c->p->mesh.axis_sizes[a]) {
      keep_axis(c, a, AXIS_PATTERN);
      changed = true;
    }
  return changed;
}

bool plan_rd_mesh_reduced(const rctx *c) {
  if (c->p->pipeline.present && c->nmb != c->p->pipeline.microbatches)
    return true;
  for (int a = 0; a < c->p->mesh.naxes; a++)
    if (c->nk[a] != c->p->mesh.axis_sizes[a])
      return true;
  return false;
}

/* The copy's mesh over the new sizes. What names physical devices one by
 * one (the device list, per-device hardware, the topology) describes the
 * full cluster, not the reduced one, and prices nothing a verification
 * computes: it is dropped. */
void plan_rd_mesh_apply(rctx *c) {
  plan_mesh *m = &c->p->mesh;
  if (!plan_rd_mesh_reduced(c))
    return;
  if (c->p->pipeline.present)
    c->p->pipeline.microbatches = c->nmb;
  int64_t n = 1;
  for (int a = 0; a < m->naxes; a++) {
    m->axis_sizes[a] = c->nk[a];
    n *= c->nk[a];
  }
  m->ndevices = n;
  m->devices = NULL;
  m->device_profile = NULL;
  m->nprofiles = 0;
  m->profiles = NULL;
  m->topology = NULL;
  if (m->devices_per_host && n % m->devices_per_host)
    m->devices_per_host = 0;
}

static const char *const axis_text[AXIS_COUNT] = {
    "",
    "",
    "no divisor between 1 and its size",
    "the pipeline's stages",
    "a ratio set",
    "a submesh fixes it",
    "a step lists its ranks",
    "an uneven shard's pattern"};

void plan_rd_mesh_summary(const rctx *c, plan_buf *b) {
  const plan_mesh *m = &c->p->mesh;
  if (!c->p->has_mesh || c->axis_keep[0] == AXIS_NOT_ASKED)
    return;
  int64_t before = 1, after = 1;
  int shown = 0;
  for (int a = 0; a < m->naxes; a++) {
    before *= m->axis_sizes[a];
    after *= c->nk[a];
    if (c->nk[a] == m->axis_sizes[a])
      continue;
    plan_buf_printf(b, "%s%s %lld->%lld",
                    shown++ ? ", " : "; mesh: ", m->axis_names[a],
                    (long long)m->axis_sizes[a], (long long)c->nk[a]);
  }
  if (shown)
    plan_buf_printf(b, " (%lld->%lld ranks)", (long long)before,
                    (long long)after);
  const plan_pipeline *pp = &c->p->pipeline;
  if (pp->present && c->nmb != pp->microbatches)
    plan_buf_printf(b, "; microbatches %lld->%lld", (long long)pp->microbatches,
                    (long long)c->nmb);
  shown = 0;
  for (int a = 0; a < m->naxes; a++)
    if (c->nk[a] == m->axis_sizes[a] && m->axis_sizes[a] > 2)
      plan_buf_printf(b, "%s%s %lld (%s)",
                      shown++ ? ", " : "; mesh kept: ", m->axis_names[a],
                      (long long)m->axis_sizes[a], axis_text[c->axis_keep[a]]);
}
