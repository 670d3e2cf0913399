/* Unlike devices (format 1.1, docs/cost.md "Unlike devices"): the model's
 * per-device hardware from the mesh's profiles, each logical rank's device,
 * and an op priced on one rank's own piece at its own device's speed; the
 * slowest rank's time when ranks differ. The API is cost_device.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_device.h"
#include "ir/placement.h"
#include "libplan/space.h"

/* ---- setup --------------------------------------------------------------- */

int plan_cost_ranks_setup(plan_cost_model *m, const plan_mesh *mesh) {
  int64_t n = mesh->ndevices > 0 ? mesh->ndevices : 1;
  int64_t *rd = realloc(m->rank_dev, sizeof(int64_t) * (size_t)n);
  if (!rd)
    return plan_oom();
  m->rank_dev = rd;
  for (int64_t r = 0; r < n; r++)
    rd[r] = mesh->devices ? mesh->devices[r] : r;
  return PLAN_OK;
}

static void slowest_link(plan_link *a, const plan_link *b) {
  if (b->bandwidth > 0 && (a->bandwidth <= 0 || b->bandwidth < a->bandwidth))
    a->bandwidth = b->bandwidth;
  if (b->latency > a->latency)
    a->latency = b->latency;
}

/* The model's own hardware stands for all devices where one figure is
 * needed (the report's hardware, the host links, the optimizer): the
 * first device's profile, with the least memory and the slowest links of
 * any profile in use, named after every profile in use. */
static void summary_hw(plan_cost_model *m, const bool *used) {
  int first = m->dev_prof[m->rank_dev[0]];
  m->hw = m->prof[first].hw;
  m->hw_name[0] = 0;
  size_t len = 0;
  for (int q = 0; q < m->nprof; q++) {
    if (!used[q])
      continue;
    const cost_hw *h = &m->prof[q].hw;
    if (h->memory > 0 && h->memory < m->hw.memory)
      m->hw.memory = h->memory;
    slowest_link(&m->hw.intra_host, &h->intra_host);
    slowest_link(&m->hw.inter_host, &h->inter_host);
    bool seen = false;
    for (int e = 0; e < q && !seen; e++)
      seen = used[e] && !strcmp(m->prof[e].name, m->prof[q].name);
    if (!seen && len + strlen(m->prof[q].name) + 2 < sizeof m->hw_name) {
      snprintf(m->hw_name + len, sizeof m->hw_name - len, "%s%s",
               len ? "+" : "", m->prof[q].name);
      len = strlen(m->hw_name);
    }
  }
  m->hw.name = m->hw_name;
}

int plan_cost_devices_setup(plan_cost_model *m, const plan_plan *p) {
  const plan_mesh *mesh = &p->mesh;
  if (!mesh->device_profile || mesh->nprofiles < 1 || !mesh->profiles)
    return PLAN_OK;
  int64_t n = mesh->ndevices;
  m->prof = calloc((size_t)mesh->nprofiles, sizeof *m->prof);
  m->dev_prof = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  bool *used = calloc((size_t)mesh->nprofiles, sizeof(bool));
  if (!m->prof || !m->dev_prof || !used) {
    free(used);
    return plan_oom();
  }
  m->nprof = mesh->nprofiles;
  int rc = PLAN_OK;
  for (int q = 0; q < m->nprof && !rc; q++) {
    cost_prof *pr = &m->prof[q];
    for (int c = 0; c < COST_COLL_COUNT; c++)
      pr->coll_cal[c] = -1;
    if (!(pr->op_cal = malloc(sizeof(int) * ((size_t)m->nops + 1)))) {
      rc = plan_oom();
      break;
    }
    for (int i = 0; i < m->nops; i++)
      pr->op_cal[i] = -1;
    char what[64];
    snprintf(what, sizeof what, "mesh.hardware profile %d", q + 1);
    /* links: the topology's, or the slowest profile's host links below */
    rc = plan_cost_hw_complete(&pr->hw, pr->name, sizeof pr->name,
                               &mesh->profiles[q], m, p, what, false);
  }
  for (int64_t d = 0; d < n && !rc; d++) {
    int q = mesh->device_profile[d];
    if (q < 0 || q >= m->nprof)
      rc = plan_failf(PLAN_EINVALID, "device %lld names profile %d of %d",
                      (long long)d, q, m->nprof);
    else
      used[q] = true;
    m->dev_prof[d] = q;
  }
  if (!rc) {
    int distinct = 0;
    for (int q = 0; q < m->nprof; q++)
      distinct += used[q];
    m->hetero = distinct > 1;
    summary_hw(m, used);
  }
  free(used);
  return rc;
}

void plan_cost_devices_free(plan_cost_model *m) {
  for (int q = 0; q < m->nprof; q++)
    free(m->prof[q].op_cal);
  free(m->prof);
  free(m->dev_prof);
  free(m->rank_dev);
}

void plan_cost_devices_derive(plan_cost_model *m) {
  for (int q = 0; q < m->nprof; q++) {
    cost_prof *pr = &m->prof[q];
    /* the model's derivation on the profile's figures */
    const cost_hw *hw = &pr->hw;
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++) {
      pr->peak_matmul[d] = plan_cost_dtype_peak(hw, d) * m->eff_matmul;
      double v = hw->flops[PLAN_F32] > 0 ? hw->flops[PLAN_F32]
                                         : plan_cost_dtype_peak(hw, d);
      if (hw->flops[d] > 0 && hw->flops[d] < v)
        v = hw->flops[d];
      pr->peak_other[d] = v * m->eff_other;
    }
    pr->mem_bw = hw->memory_bandwidth * m->eff_memory;
  }
}

/* ---- devices ------------------------------------------------------------- */

int64_t plan_cost_rank_device(const plan_cost_model *m, int64_t rank) {
  if (rank < 0 || rank >= m->ndevices || !m->rank_dev)
    return rank;
  return m->rank_dev[rank];
}

void plan_cost_rank_coord(const plan_cost_model *m, int64_t rank,
                          int64_t *coord) {
  for (int a = m->naxes - 1; a >= 0; a--) {
    int64_t k = m->axis_sizes[a] > 0 ? m->axis_sizes[a] : 1;
    coord[a] = rank % k;
    rank /= k;
  }
}

bool plan_cost_model_hetero(const plan_cost_model *m) {
  return m->hetero;
}

static const cost_prof *device_prof(const plan_cost_model *m, int64_t d) {
  if (m->nprof < 1 || d < 0 || d >= m->ndevices)
    return NULL;
  return &m->prof[m->dev_prof[d]];
}

const cost_hw *plan_cost_device_hw(const plan_cost_model *m, int64_t device) {
  const cost_prof *pr = device_prof(m, device);
  return pr ? &pr->hw : &m->hw;
}

double plan_cost_device_peak(const plan_cost_model *m, int64_t device,
                             plan_dtype dt, bool matmul) {
  if ((unsigned)dt >= PLAN_DTYPE_COUNT)
    return 0;
  const cost_prof *pr = device_prof(m, device);
  if (pr)
    return matmul ? pr->peak_matmul[dt] : pr->peak_other[dt];
  return matmul ? m->peak_matmul[dt] : m->peak_other[dt];
}

double plan_cost_device_mem_bw(const plan_cost_model *m, int64_t device) {
  const cost_prof *pr = device_prof(m, device);
  return pr ? pr->mem_bw : m->mem_bw;
}

double plan_cost_device_memory(const plan_cost_model *m, int64_t device) {
  return plan_cost_device_hw(m, device)->memory;
}

/* ---- one op on one rank -------------------------------------------------- */

static void rank_at(cost_at *at, int64_t *coord, const plan_cost_model *m,
                    const plan_plan *p, int64_t rank) {
  plan_cost_rank_coord(m, rank, coord);
  memset(at, 0, sizeof *at);
  at->coord = coord;
  at->sets = p->mesh.ratios;
  at->nsets = p->mesh.nratios;
  const cost_prof *pr = device_prof(m, plan_cost_rank_device(m, rank));
  if (pr) {
    at->peak_matmul = pr->peak_matmul;
    at->peak_other = pr->peak_other;
    at->mem_bw = pr->mem_bw;
    at->op_cal = pr->op_cal;
  }
}

double plan_cost_rank_numel(const plan_cost_model *m, const plan_plan *p,
                            const plan_tensor *t, const plan_placement *pl,
                            int64_t rank) {
  int64_t coord[PLAN_MAX_MESH_AXES];
  plan_cost_rank_coord(m, rank, coord);
  double n = 1;
  for (int d = 0; d < t->rank; d++) {
    int64_t off, len;
    plan_placement_dim_range_r(pl, d, t->dims[d], m->axis_sizes, coord,
                               p->mesh.ratios, p->mesh.nratios, &off, &len);
    n *= (double)len;
  }
  return n;
}

int plan_cost_op_eval_rank(cost_op_eval *out, const plan_cost_model *m,
                           const plan_plan *p, int op, int64_t rank,
                           const plan_placement *in, const plan_placement *outs,
                           double split) {
  if (rank < 0 || rank >= m->ndevices)
    return plan_failf(PLAN_EUSAGE, "rank %lld is out of range (0..%lld)",
                      (long long)rank, (long long)m->ndevices - 1);
  int64_t coord[PLAN_MAX_MESH_AXES];
  cost_at at;
  rank_at(&at, coord, m, p, rank);
  return plan_cost_op_eval_where(out, m, p, op, in, outs, split, &at);
}

int plan_cost_op_rank_seconds(double *out, const plan_cost_model *m,
                              const plan_plan *p, int op, int64_t rank,
                              const plan_placement *in,
                              const plan_placement *outs) {
  cost_op_eval e;
  int rc = plan_cost_op_eval_rank(&e, m, p, op, rank, in, outs, 1);
  *out = rc ? 0 : e.seconds;
  return rc;
}

int plan_cost_op_seconds_rank(double *out, const plan_cost_model *m,
                              const plan_plan *p, int op, int64_t rank,
                              const plan_placement *in,
                              const plan_placement *out_pl) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_op_seconds_rank: out is NULL");
  *out = 0;
  if (!m || !p || op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_op_seconds_rank: op %d is out "
                      "of range",
                      op);
  if ((!in || !out_pl) && !p->strategies[op].set)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_op_seconds_rank: op '%s' has no strategy",
                      p->program->ops[op].name);
  return plan_cost_op_rank_seconds(out, m, p, op, rank, in, out_pl);
}

bool plan_cost_op_varies(const plan_cost_model *m, const plan_plan *p, int op,
                         const plan_placement *in, const plan_placement *outs) {
  if (m->hetero)
    return true;
  if (p->mesh.nratios < 1 || op < 0 || op >= p->program->nops)
    return false;
  const plan_op *o = &p->program->ops[op];
  const plan_strategy *st = &p->strategies[op];
  if (!in)
    in = st->set ? st->in : NULL;
  if (!outs)
    outs = st->set ? st->out : NULL;
  for (int j = 0; in && j < o->nin; j++)
    if (plan_placement_has_ratios(&in[j]))
      return true;
  for (int k = 0; outs && k < o->nout; k++)
    if (plan_placement_has_ratios(&outs[k]))
      return true;
  return false;
}

int plan_cost_op_eval_slowest(cost_op_eval *out, const plan_cost_model *m,
                              const plan_plan *p, int op,
                              const plan_placement *in,
                              const plan_placement *outs, double split) {
  if (!plan_cost_op_varies(m, p, op, in, outs))
    return plan_cost_op_eval_where(out, m, p, op, in, outs, split, NULL);
  cost_op_eval best = {0};
  for (int64_t r = 0; r < m->ndevices; r++) {
    cost_op_eval e;
    int rc = plan_cost_op_eval_rank(&e, m, p, op, r, in, outs, split);
    if (rc)
      return rc;
    if (r == 0 || e.seconds > best.seconds)
      best = e;
  }
  *out = best;
  return PLAN_OK;
}
