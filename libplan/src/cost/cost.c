/* The cost model: building a model from a plan and a profile, its
 * parameters, and pricing one op or one redistribution (docs/cost.md).
 *
 * Compute: max(FLOPs / (peak x efficiency), bytes / (bandwidth x
 * efficiency)) + the kernel floor, on the slowest rank's blocks.
 * Collectives (k devices per group, alpha = the link's latency, beta = its
 * bandwidth x efficiency, n = the local tensor's bytes):
 *   all_reduce      min(ring: 2 (k-1) alpha + V / beta,
 *                       tree: 2 ceil(log2 k) alpha + 2 n / beta)
 *   all_gather      (k-1) alpha + V_recv / beta
 *   reduce_scatter  (k-1) alpha + V_send / beta
 *   all_to_all      (k-1) alpha + max(V_send, V_recv) / beta
 * with V the bytes one rank sends or receives (redist.h: 2 (k-1)/k n for a
 * ring all-reduce of an even tensor). A group's link is the slowest it
 * spans: inter_host when any group of the axis has devices on two hosts,
 * else intra_host; the plan's per-axis `links` override both. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"
#include "cost/cost_device.h"
#include "cost/cost_model.h"
#include "ir/placement.h"

const char *const plan_cost_bound_names[COST_BOUND_COUNT] = {
    "compute", "memory", "floor", "view", "calibrated"};
const char *const plan_cost_alg_names[COST_ALG_COUNT] = {
    "ring", "tree", "local", "p2p", "calibrated"};

/* FLOPs per element and class of each op kind, by name, so kinds added to
 * the registry later get a sensible default (pointwise, 1 FLOP) until they
 * are listed here. */
static const struct {
  const char *name;
  uint8_t cls;
  float flops;
} kind_costs[] = {
    {"matmul", COST_CLASS_MATMUL, 0},
    {"linear", COST_CLASS_LINEAR, 0},
    {"add", COST_CLASS_POINTWISE, 1},
    {"sub", COST_CLASS_POINTWISE, 1},
    {"mul", COST_CLASS_POINTWISE, 1},
    {"div", COST_CLASS_POINTWISE, 1},
    {"scale", COST_CLASS_POINTWISE, 1},
    {"relu", COST_CLASS_POINTWISE, 1},
    {"gelu", COST_CLASS_POINTWISE, 1},
    {"silu", COST_CLASS_POINTWISE, 1},
    {"tanh", COST_CLASS_POINTWISE, 1},
    {"exp", COST_CLASS_POINTWISE, 1},
    {"softmax", COST_CLASS_ROWWISE, 5},
    {"layernorm", COST_CLASS_ROWWISE, 5},
    {"rmsnorm", COST_CLASS_ROWWISE, 5},
    {"cross_entropy", COST_CLASS_ROWWISE, 5},
    {"embedding", COST_CLASS_GATHER, 0},
    {"transpose", COST_CLASS_MOVE, 0},
    {"permute", COST_CLASS_MOVE, 0},
    {"reshape", COST_CLASS_VIEW, 0},
    {"reduce_sum", COST_CLASS_REDUCE, 1},
    {"reduce_mean", COST_CLASS_REDUCE, 1},
    {"split", COST_CLASS_MOVE, 0},
    {"concat", COST_CLASS_MOVE, 0},
    {"expand", COST_CLASS_MOVE, 0},
    {"relu_grad", COST_CLASS_POINTWISE, 1},
    {"gelu_grad", COST_CLASS_POINTWISE, 1},
    {"silu_grad", COST_CLASS_POINTWISE, 1},
    {"layernorm_grad", COST_CLASS_ROWWISE, 5},
    {"rmsnorm_grad", COST_CLASS_ROWWISE, 5},
    {"embedding_grad", COST_CLASS_MOVE, 0},
    {"cross_entropy_grad", COST_CLASS_ROWWISE, 5},
    {"where", COST_CLASS_POINTWISE, 1},
    {"repeat_interleave", COST_CLASS_MOVE, 0},
    {"topk", COST_CLASS_ROWWISE, 2},
    {"gather", COST_CLASS_MOVE, 0},
    {"scatter_add", COST_CLASS_POINTWISE, 1},
    {"moe_dispatch", COST_CLASS_MOVE, 0},
    {"moe_combine", COST_CLASS_ROWWISE, 2},
    {"moe_weights_grad", COST_CLASS_ROWWISE, 2},
    {"sigmoid", COST_CLASS_POINTWISE, 1},
    {"rsqrt", COST_CLASS_POINTWISE, 1},
    {"add_scalar", COST_CLASS_POINTWISE, 1},
    /* two products per (query, key) pair: q k^T and p v (see below) */
    {"attention", COST_CLASS_MATMUL, 0},
};

static void classify_kinds(plan_cost_model *m) {
  for (int k = 0; k < PLAN_OP_COUNT; k++) {
    m->kclass[k] = COST_CLASS_POINTWISE;
    m->kflops[k] = 1;
    const char *name = plan_op_kind_name(k);
    for (size_t i = 0; name && i < sizeof kind_costs / sizeof kind_costs[0];
         i++)
      if (!strcmp(name, kind_costs[i].name)) {
        m->kclass[k] = kind_costs[i].cls;
        m->kflops[k] = kind_costs[i].flops;
        break;
      }
  }
}

/* ---- derived figures ----------------------------------------------------- */

double plan_cost_dtype_peak(const cost_hw *hw, int d) {
  if (hw->flops[d] > 0)
    return hw->flops[d];
  if (d == PLAN_BF16 && hw->flops[PLAN_F16] > 0)
    return hw->flops[PLAN_F16];
  if (d == PLAN_F16 && hw->flops[PLAN_BF16] > 0)
    return hw->flops[PLAN_BF16];
  /* no figure for this dtype: the best the device has */
  double best = 0;
  for (int e = 0; e < PLAN_DTYPE_COUNT; e++)
    if (hw->flops[e] > best)
      best = hw->flops[e];
  return best;
}

void plan_cost_model_derive(plan_cost_model *m) {
  const cost_hw *hw = &m->hw;
  for (int d = 0; d < PLAN_DTYPE_COUNT; d++) {
    m->peak_matmul[d] = plan_cost_dtype_peak(hw, d) * m->eff_matmul;
    /* Ops other than matmuls run on the vector units: the f32 rate (or
     * the dtype's own when lower, f64 on some parts). */
    double v = hw->flops[PLAN_F32] > 0 ? hw->flops[PLAN_F32]
                                       : plan_cost_dtype_peak(hw, d);
    if (hw->flops[d] > 0 && hw->flops[d] < v)
      v = hw->flops[d];
    m->peak_other[d] = v * m->eff_other;
  }
  m->mem_bw = hw->memory_bandwidth * m->eff_memory;
  for (int a = 0; a < m->naxes; a++) {
    const plan_link *base =
        m->axis_inter[a] ? &hw->inter_host : &hw->intra_host;
    const plan_link *ov = &m->axis_override[a];
    cost_link *l = &m->link[a];
    l->source = m->axis_inter[a] ? COST_LINK_INTER : COST_LINK_INTRA;
    double bw = base->bandwidth, lat = base->latency;
    if (ov->bandwidth > 0 || ov->latency > 0)
      l->source = COST_LINK_AXIS;
    if (ov->bandwidth > 0)
      bw = ov->bandwidth;
    if (ov->latency > 0)
      lat = ov->latency;
    l->bandwidth = bw * m->eff_link;
    l->latency = lat;
  }
  plan_cost_devices_derive(m);
  plan_cost_topo_derive(m);
}

static int64_t device_of(const plan_mesh *mesh, int64_t rank) {
  return mesh->devices ? mesh->devices[rank] : rank;
}

/* Which axes have a group whose devices sit on two hosts. */
static void topology(plan_cost_model *m, const plan_mesh *mesh) {
  int64_t H = mesh->devices_per_host;
  m->devices_per_host = H;
  m->hosts = 1;
  int64_t maxdev = 0;
  for (int64_t r = 0; r < mesh->ndevices; r++)
    if (device_of(mesh, r) > maxdev)
      maxdev = device_of(mesh, r);
  if (H > 0)
    m->hosts = maxdev / H + 1;
  int64_t stride = 1;
  for (int a = m->naxes - 1; a >= 0; a--) {
    int64_t k = m->axis_sizes[a];
    bool inter = false;
    if (H > 0 && k > 1 && m->hosts > 1)
      for (int64_t r = 0; r < mesh->ndevices && !inter; r++) {
        if ((r / stride) % k != 0)
          continue;
        int64_t h0 = device_of(mesh, r) / H;
        for (int64_t j = 1; j < k && !inter; j++)
          inter = device_of(mesh, r + j * stride) / H != h0;
      }
    m->axis_inter[a] = inter;
    stride *= k;
  }
}

/* ---- the model ----------------------------------------------------------- */

static int copy_mesh(plan_cost_model *m, const plan_mesh *mesh) {
  m->naxes = mesh->naxes;
  m->ndevices = mesh->ndevices;
  for (int a = 0; a < mesh->naxes; a++) {
    m->axis_sizes[a] = mesh->axis_sizes[a];
    snprintf(m->axis_names[a], sizeof m->axis_names[a], "%s",
             mesh->axis_names[a]);
  }
  topology(m, mesh);
  int rc = plan_cost_ranks_setup(m, mesh);
  return rc ? rc : plan_cost_topo_setup(m, mesh);
}

int plan_cost_model_new(plan_cost_model **out, const plan_plan *p,
                        const char *profile) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_new: out is NULL");
  *out = NULL;
  if (!p || !p->has_mesh || !p->program)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_model_new: a plan with a mesh is needed");
  const cost_hw *base = NULL;
  if (profile && !(base = plan_cost_profile_find(profile))) {
    /* the canonical names and their short names (before the '-') */
    const char *names[16];
    char shorts[8][32];
    size_t n = 0;
    for (int i = 0; i < plan_cost_profile_count() && i < 8; i++) {
      const char *name = plan_cost_profile_name(i);
      names[n++] = name;
      snprintf(shorts[i], sizeof shorts[i], "%.*s", (int)strcspn(name, "-"),
               name);
      names[n++] = shorts[i];
    }
    char hint[PLAN_HINT_SIZE];
    plan_hint_names(hint, sizeof hint, profile, names, n);
    return plan_failf(PLAN_ENOTFOUND,
                      "unknown hardware profile '%s'%s (built in: %s)", profile,
                      hint, plan_cost_profile_list());
  }
  plan_cost_model *m = calloc(1, sizeof *m);
  if (!m)
    return plan_oom();
  plan_arena_init(&m->arena);
  m->eff_matmul = 0.7;
  m->eff_other = 0.5;
  m->eff_memory = 0.8;
  m->eff_link = 0.8;
  m->kernel_floor = 4e-6;
  classify_kinds(m);
  int rc = copy_mesh(m, &p->mesh);
  if (rc)
    goto fail;
  const plan_program *prog = p->program;
  m->nops = prog->nops;
  m->ntensors = prog->ntensors;
  m->op_names =
      plan_arena_alloc(&m->arena, sizeof(char *) * ((size_t)prog->nops + 1));
  m->op_kinds = malloc(sizeof(int) * ((size_t)prog->nops + 1));
  m->op_cal = malloc(sizeof(int) * ((size_t)prog->nops + 1));
  if (!m->op_names || !m->op_kinds || !m->op_cal) {
    rc = plan_oom();
    goto fail;
  }
  for (int i = 0; i < prog->nops; i++) {
    if (!(m->op_names[i] = plan_arena_strdup(&m->arena, prog->ops[i].name))) {
      rc = plan_oom();
      goto fail;
    }
    m->op_kinds[i] = prog->ops[i].kind;
    m->op_cal[i] = -1;
  }
  for (int c = 0; c < COST_COLL_COUNT; c++)
    m->coll_cal[c] = -1;
  if (!base && p->mesh.hardware) {
    if ((rc = plan_cost_hw_from_plan(m, p)))
      goto fail;
  } else {
    if (!base)
      base = plan_cost_profile_at(0);
    m->hw = *base;
    snprintf(m->hw_name, sizeof m->hw_name, "%s", base->name);
    m->hw.name = m->hw_name;
  }
  /* per-device hardware, unless a named profile replaces the plan's */
  if (!profile && (rc = plan_cost_devices_setup(m, p)))
    goto fail;
  plan_cost_model_derive(m);
  *out = m;
  return PLAN_OK;
fail:
  plan_cost_model_free(m);
  return rc;
}

void plan_cost_model_free(plan_cost_model *m) {
  if (!m)
    return;
  free(m->op_kinds);
  free(m->op_cal);
  free(m->cals);
  plan_cost_devices_free(m);
  plan_arena_free(&m->arena);
  free(m);
}

const char *plan_cost_model_hardware(const plan_cost_model *m) {
  return m ? m->hw_name : "";
}

int plan_cost_model_update_mesh(plan_cost_model *m, const plan_plan *p) {
  if (!m || !p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_update_mesh: no model or "
                                   "no plan with a mesh");
  if (p->mesh.naxes != m->naxes)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_model_update_mesh: the mesh has "
                      "%d axes, the model %d",
                      p->mesh.naxes, m->naxes);
  for (int a = 0; a < m->naxes; a++)
    if (p->mesh.axis_sizes[a] != m->axis_sizes[a])
      return plan_failf(PLAN_EUSAGE,
                        "plan_cost_model_update_mesh: axis %s has size %lld, "
                        "the model's %lld",
                        p->mesh.axis_names[a], (long long)p->mesh.axis_sizes[a],
                        (long long)m->axis_sizes[a]);
  int rc = copy_mesh(m, &p->mesh);
  if (rc)
    return rc;
  plan_cost_model_derive(m);
  return PLAN_OK;
}

/* ---- parameters by name -------------------------------------------------- */

enum { PV_EFF, PV_POS, PV_NONNEG };

/* The double a parameter name refers to, and how it is checked. */
static double *param_slot(plan_cost_model *m, const char *name, int *check) {
  static const char *const effs[] = {"efficiency.matmul", "efficiency.other",
                                     "efficiency.memory", "efficiency.link"};
  double *eslots[] = {&m->eff_matmul, &m->eff_other, &m->eff_memory,
                      &m->eff_link};
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, effs[i])) {
      *check = PV_EFF;
      return eslots[i];
    }
  *check = PV_NONNEG;
  if (!strcmp(name, "kernel_floor"))
    return &m->kernel_floor;
  if (!strcmp(name, "intra_host.latency"))
    return &m->hw.intra_host.latency;
  if (!strcmp(name, "inter_host.latency"))
    return &m->hw.inter_host.latency;
  *check = PV_POS;
  if (!strcmp(name, "memory"))
    return &m->hw.memory;
  if (!strcmp(name, "memory_bandwidth"))
    return &m->hw.memory_bandwidth;
  if (!strcmp(name, "intra_host.bandwidth"))
    return &m->hw.intra_host.bandwidth;
  if (!strcmp(name, "inter_host.bandwidth"))
    return &m->hw.inter_host.bandwidth;
  if (!strncmp(name, "flops.", 6)) {
    int d = plan_dtype_from_name(name + 6);
    if (d >= 0)
      return &m->hw.flops[d];
  }
  return NULL;
}

int plan_cost_model_set(plan_cost_model *m, const char *name, double value) {
  if (!m || !name)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_set: no model or name");
  int check;
  double *slot = param_slot(m, name, &check);
  if (!slot)
    return plan_failf(PLAN_ENOTFOUND, "unknown cost model parameter '%s'",
                      name);
  bool ok = isfinite(value) && (check == PV_EFF   ? value > 0 && value <= 1
                                : check == PV_POS ? value > 0
                                                  : value >= 0);
  if (!ok)
    return plan_failf(PLAN_EINVALID, "cost model parameter %s = %g: %s", name,
                      value,
                      check == PV_EFF   ? "an efficiency lies in (0, 1]"
                      : check == PV_POS ? "must be finite and > 0"
                                        : "must be finite and >= 0");
  *slot = value;
  plan_cost_model_derive(m);
  return PLAN_OK;
}

int plan_cost_model_get(double *out, const plan_cost_model *m,
                        const char *name) {
  if (!out || !m || !name)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_get: NULL argument");
  int check;
  /* param_slot only computes an address; nothing is written through it */
  double *slot = param_slot((plan_cost_model *)m, name, &check);
  if (!slot)
    return plan_failf(PLAN_ENOTFOUND, "unknown cost model parameter '%s'",
                      name);
  *out = *slot;
  return PLAN_OK;
}

/* ---- local blocks -------------------------------------------------------- */

plan_dtype plan_cost_tensor_dtype(const plan_plan *p, int tensor) {
  const plan_tensor *t = &p->program->tensors[tensor];
  const plan_training *tr = &p->training;
  if (!tr->present || !plan_dtype_is_float(t->dtype))
    return t->dtype;
  if (t->role == PLAN_ROLE_PARAM)
    return tr->param_dtype >= 0 ? (plan_dtype)tr->param_dtype : t->dtype;
  if (t->role == PLAN_ROLE_CONST)
    return t->dtype;
  return tr->compute_dtype >= 0 ? (plan_dtype)tr->compute_dtype : t->dtype;
}

/* Nested torch.chunk: ceil(ceil(n / a) / b) = ceil(n / (a b)), and the first
 * piece of every level is the largest, so the slowest rank holds
 * ceil(n / product of the axes sharding the dim) of every dim at once. */
static inline void shard_divisors(const plan_placement *pl,
                                  const int64_t *mesh_sizes, int rank,
                                  int64_t *div) {
  for (int d = 0; d < rank; d++)
    div[d] = 1;
  for (int a = 0; a < pl->naxes; a++)
    if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim >= 0 &&
        pl->ax[a].dim < rank)
      div[pl->ax[a].dim] *= mesh_sizes[a];
}

static inline double local_len(int64_t n, int64_t div) {
  return (double)(n / div + (n % div != 0));
}

double plan_cost_local_numel(const plan_tensor *t, const plan_placement *pl,
                             const int64_t *mesh_sizes) {
  int64_t div[PLAN_MAX_RANK];
  shard_divisors(pl, mesh_sizes, t->rank, div);
  double n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= local_len(t->dims[d], div[d]);
  return n;
}

static double local_dim(const plan_tensor *t, const plan_placement *pl,
                        const int64_t *mesh_sizes, int dim) {
  if (dim < 0 || dim >= t->rank)
    return 1;
  int64_t div = 1;
  for (int a = 0; a < pl->naxes; a++)
    if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == dim)
      div *= mesh_sizes[a];
  return local_len(t->dims[dim], div);
}

/* A rank's own piece of one dim (at->coord), ratios included. */
static double at_dim(const plan_tensor *t, const plan_placement *pl,
                     const int64_t *mesh_sizes, int dim, const cost_at *at) {
  if (!at || !at->coord)
    return local_dim(t, pl, mesh_sizes, dim);
  if (dim < 0 || dim >= t->rank)
    return 1;
  int64_t off, len;
  plan_placement_dim_range_r(pl, dim, t->dims[dim], mesh_sizes, at->coord,
                             at->sets, at->nsets, &off, &len);
  return (double)len;
}

static double at_numel(const plan_tensor *t, const plan_placement *pl,
                       const int64_t *mesh_sizes, const cost_at *at) {
  if (!at || !at->coord)
    return plan_cost_local_numel(t, pl, mesh_sizes);
  double n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= at_dim(t, pl, mesh_sizes, d, at);
  return n;
}

/* ---- ops ----------------------------------------------------------------- */

double plan_cost_cal_time(const cost_cal *c, double size, double base_floor) {
  (void)base_floor;
  if (c->mode == COST_CAL_FIXED)
    return c->value;
  if (c->mode != COST_CAL_TABLE || c->n < 1)
    return 0;
  const double *x = c->sizes, *y = c->times;
  if (size <= x[0])
    return y[0];
  for (int i = 1; i < c->n; i++)
    if (size <= x[i])
      return y[i - 1] +
             (y[i] - y[i - 1]) * (size - x[i - 1]) / (x[i] - x[i - 1]);
  return y[c->n - 1] * size / x[c->n - 1];
}

/* The vocab-parallel loss's all-reduces inside op o (logits split on the
 * class dim): per axis that splits them, PLAN_OP_CLASS_ALL_REDUCES ring
 * all-reduces of one f32 value a local sample. */
static double class_all_reduces(const plan_cost_model *m, const plan_plan *p,
                                const plan_op *o, const plan_placement *in,
                                double split, const cost_at *at) {
  int li = plan_op_logits_input(o->kind), pa[PLAN_MAX_MESH_AXES];
  if (li < 0)
    return 0;
  const plan_tensor *ts = p->program->tensors;
  int np = plan_op_class_axes(o->kind, ts[o->in[li]].rank, &in[li],
                              p->mesh.naxes, pa);
  double rows =
      np ? at_numel(&ts[o->in[li + 1]], &in[li + 1], p->mesh.axis_sizes, at) /
               split
         : 0;
  double s = 0;
  for (int i = 0; i < np; i++) {
    double k = (double)p->mesh.axis_sizes[pa[i]];
    const cost_link *l = &m->link[pa[i]];
    double inv = l->bandwidth > 0 ? 1 / l->bandwidth : 0;
    if (k > 1)
      s += PLAN_OP_CLASS_ALL_REDUCES(o->kind) *
           (2 * (k - 1) * l->latency + 2 * (k - 1) / k * 4 * rows * inv);
  }
  return s;
}

int plan_cost_op_eval_where(cost_op_eval *out, const plan_cost_model *m,
                            const plan_plan *p, int op,
                            const plan_placement *in,
                            const plan_placement *outs, double split,
                            const cost_at *at) {
  const plan_program *prog = p->program;
  if (op < 0 || op >= prog->nops)
    return plan_failf(PLAN_EUSAGE, "op %d is out of range (0..%d)", op,
                      prog->nops - 1);
  const plan_op *o = &prog->ops[op];
  if (!in || !outs) {
    const plan_strategy *st = &p->strategies[op];
    if (!st->set)
      return plan_failf(PLAN_EUSAGE, "op '%s' has no strategy", o->name);
    if (!in)
      in = st->in;
    if (!outs)
      outs = st->out;
  }
  const int64_t *ms = p->mesh.axis_sizes;
  const plan_tensor *ts = prog->tensors;
  int cls = (unsigned)o->kind < PLAN_OP_COUNT ? m->kclass[o->kind]
                                              : COST_CLASS_POINTWISE;
  if (split < 1)
    split = 1;
  memset(out, 0, sizeof *out);
  if (cls == COST_CLASS_VIEW) {
    out->bound = COST_BOUND_VIEW;
    return PLAN_OK;
  }
  double bytes = 0, in0 = 0, out0 = 0;
  for (int j = 0; j < o->nin; j++) {
    const plan_tensor *t = &ts[o->in[j]];
    double n = at_numel(t, &in[j], ms, at);
    if (j == 0)
      in0 = n;
    if (j == 0 && cls == COST_CLASS_GATHER)
      continue; /* an embedding reads the rows it gathers: counted below */
    double b = n * plan_dtype_size(plan_cost_tensor_dtype(p, o->in[j]));
    bool whole = t->role == PLAN_ROLE_PARAM || t->role == PLAN_ROLE_CONST;
    bytes += whole ? b : b / split;
  }
  for (int k = 0; k < o->nout; k++) {
    double n = at_numel(&ts[o->out[k]], &outs[k], ms, at);
    double b =
        n * plan_dtype_size(plan_cost_tensor_dtype(p, o->out[k])) / split;
    bytes += cls == COST_CLASS_GATHER ? 2 * b : b;
    if (k == 0)
      out0 = n;
  }
  double flops = 0;
  switch (cls) {
  case COST_CLASS_MATMUL: {
    const plan_tensor *a = &ts[o->in[0]];
    if (o->kind == PLAN_OP_ATTENTION) {
      /* q k^T over d for every key, then p v over the keys: the keys are
       * whole on every rank */
      double sk = (double)ts[o->in[1]].dims[2];
      flops = 2 * in0 * sk + 2 * out0 * sk;
      break;
    }
    bool ta = o->attrs && o->attrs[0].b;
    flops = 2 * out0 * at_dim(a, &in[0], ms, a->rank - (ta ? 2 : 1), at);
    break;
  }
  case COST_CLASS_LINEAR: {
    const plan_tensor *a = &ts[o->in[0]];
    flops = 2 * out0 * at_dim(a, &in[0], ms, a->rank - 1, at);
    if (o->nin > 2)
      flops += out0;
    break;
  }
  case COST_CLASS_POINTWISE:
    flops = m->kflops[o->kind] * out0;
    break;
  case COST_CLASS_ROWWISE:
    flops = m->kflops[o->kind] * in0;
    break;
  case COST_CLASS_REDUCE:
    flops = in0;
    break;
  default:
    break;
  }
  flops /= split;
  out->flops = flops;
  out->bytes = bytes;
  double inside = class_all_reduces(m, p, o, in, split, at);
  const int *op_cal = at && at->op_cal ? at->op_cal : m->op_cal;
  double mem_bw = at && at->peak_matmul ? at->mem_bw : m->mem_bw;
  int ci = op < m->nops ? op_cal[op] : -1;
  if (ci >= 0) {
    const cost_cal *c = &m->cals[ci];
    out->bound = COST_BOUND_CALIBRATED;
    if (c->mode == COST_CAL_FIXED)
      out->seconds = c->value / split;
    else if (c->mode == COST_CAL_RATE)
      out->seconds = fmax(flops / c->value, mem_bw > 0 ? bytes / mem_bw : 0) +
                     m->kernel_floor;
    else
      out->seconds = plan_cost_cal_time(c, flops > 0 ? flops : bytes, 0);
    out->seconds += inside;
    return PLAN_OK;
  }
  plan_dtype dt = o->nout > 0 ? plan_cost_tensor_dtype(p, o->out[0]) : PLAN_F32;
  const double *pm = at && at->peak_matmul ? at->peak_matmul : m->peak_matmul;
  const double *po = at && at->peak_matmul ? at->peak_other : m->peak_other;
  double peak =
      (cls == COST_CLASS_MATMUL || cls == COST_CLASS_LINEAR) ? pm[dt] : po[dt];
  double tc = flops > 0 && peak > 0 ? flops / peak : 0;
  double tm = mem_bw > 0 ? bytes / mem_bw : 0;
  double t = tc > tm ? tc : tm;
  out->bound = m->kernel_floor > t ? COST_BOUND_FLOOR
               : tc >= tm          ? COST_BOUND_COMPUTE
                                   : COST_BOUND_MEMORY;
  out->seconds = t + m->kernel_floor + inside;
  return PLAN_OK;
}

int plan_cost_op_eval_at(cost_op_eval *out, const plan_cost_model *m,
                         const plan_plan *p, int op, const plan_placement *in,
                         const plan_placement *outs, double split) {
  if (m->hetero || p->mesh.nratios > 0)
    return plan_cost_op_eval_slowest(out, m, p, op, in, outs, split);
  return plan_cost_op_eval_where(out, m, p, op, in, outs, split, NULL);
}

int plan_cost_op_seconds(double *out, const plan_cost_model *m,
                         const plan_plan *p, int op, const plan_placement *in,
                         const plan_placement *out_pl) {
  cost_op_eval e;
  int rc = plan_cost_op_eval_at(&e, m, p, op, in, out_pl, 1);
  *out = rc ? 0 : e.seconds;
  return rc;
}

/* ---- collectives --------------------------------------------------------- */

static double ceil_log2(int64_t k) {
  double r = 0;
  for (int64_t v = 1; v < k; v *= 2)
    r++;
  return r;
}

/* A measured collective or send (calibration ci, -1 for none): a rate
 * replaces the link's bandwidth in *beta; a measured time is the answer,
 * into *out, and true. */
static bool calibrated(const plan_cost_model *m, int ci, double bytes,
                       double *beta, cost_step_eval *out) {
  if (ci < 0)
    return false;
  const cost_cal *c = &m->cals[ci];
  if (c->mode == COST_CAL_RATE) {
    *beta = c->value;
    return false;
  }
  out->algorithm = COST_ALG_CALIBRATED;
  out->link = -2;
  out->seconds = plan_cost_cal_time(c, bytes, 0);
  return true;
}

void plan_cost_step_eval_at(cost_step_eval *out, const plan_cost_model *m,
                            const plan_tensor *t, int esize,
                            const plan_redist_step *s, double split) {
  if (split < 1)
    split = 1;
  memset(out, 0, sizeof *out);
  out->link = -1;
  out->algorithm = COST_ALG_LOCAL;
  const int64_t *ms = m->axis_sizes;
  switch (s->kind) {
  case PLAN_REDIST_RELABEL:
    return;
  case PLAN_REDIST_SLICE:
  case PLAN_REDIST_ZERO_NON_OWNER: {
    /* a local copy or fill of the block the rank keeps */
    double b = plan_cost_local_numel(t, &s->after, ms) * esize / split;
    out->seconds = (m->mem_bw > 0 ? b / m->mem_bw : 0) + m->kernel_floor;
    return;
  }
  default:
    break;
  }
  double k = (double)ms[s->axis];
  double send = (double)s->send_bytes / split,
         recv = (double)s->recv_bytes / split;
  out->bytes = send;
  if (k <= 1)
    return;
  const cost_link *l = &m->link[s->axis];
  out->link = l->source;
  double alpha = l->latency, beta = l->bandwidth;
  if (calibrated(m, m->coll_cal[s->kind], send, &beta, out))
    return;
  if (l->source == COST_LINK_TOPO) {
    double n = plan_cost_local_numel(t, &s->before, ms) * esize / split;
    out->seconds =
        plan_cost_topo_seconds(s->kind, alpha, beta, &m->taxis[s->axis],
                               (int64_t)k, send, recv, n, &out->algorithm);
    return;
  }
  double inv = beta > 0 ? 1 / beta : 0;
  out->algorithm = COST_ALG_RING;
  switch (s->kind) {
  case PLAN_REDIST_ALL_REDUCE: {
    double ring = 2 * (k - 1) * alpha + send * inv;
    double n = plan_cost_local_numel(t, &s->before, ms) * esize / split;
    double tree = 2 * ceil_log2((int64_t)k) * alpha + 2 * n * inv;
    out->seconds = ring;
    if (tree < ring) {
      out->seconds = tree;
      out->algorithm = COST_ALG_TREE;
    }
    break;
  }
  case PLAN_REDIST_ALL_GATHER:
    out->seconds = (k - 1) * alpha + recv * inv;
    break;
  case PLAN_REDIST_REDUCE_SCATTER:
    out->seconds = (k - 1) * alpha + send * inv;
    break;
  case PLAN_REDIST_ALL_TO_ALL:
    out->seconds = (k - 1) * alpha + (send > recv ? send : recv) * inv;
    break;
  default:
    break;
  }
}

void plan_cost_send_eval(cost_step_eval *out, const plan_cost_model *m,
                         int axis, double bytes) {
  memset(out, 0, sizeof *out);
  out->algorithm = COST_ALG_P2P;
  out->bytes = bytes;
  cost_link l;
  if (axis >= 0 && axis < m->naxes) {
    l = m->link[axis];
  } else {
    const plan_link *b = m->hosts > 1 ? &m->hw.inter_host : &m->hw.intra_host;
    l.bandwidth = b->bandwidth * m->eff_link;
    l.latency = b->latency;
    l.source = m->hosts > 1 ? COST_LINK_INTER : COST_LINK_INTRA;
  }
  out->link = l.source;
  double beta = l.bandwidth;
  if (calibrated(m, m->coll_cal[COST_COLL_SEND], bytes, &beta, out))
    return;
  out->seconds = l.latency + (beta > 0 ? bytes / beta : 0);
}

int plan_cost_redist_seconds(double *out, const plan_cost_model *m,
                             const plan_plan *p, int tensor,
                             const plan_placement *from,
                             const plan_placement *to) {
  *out = 0;
  const plan_program *prog = p->program;
  if (tensor < 0 || tensor >= prog->ntensors)
    return plan_failf(PLAN_EUSAGE, "tensor %d is out of range (0..%d)", tensor,
                      prog->ntensors - 1);
  if (plan_placement_equal(from, to))
    return PLAN_OK;
  const plan_tensor *t = &prog->tensors[tensor];
  int esize = plan_dtype_size(plan_cost_tensor_dtype(p, tensor));
  plan_redist_plan rp;
  char err[200];
  if (plan_redistribute(&rp, t->dims, t->rank, esize, p->mesh.axis_sizes,
                        p->mesh.naxes, from, to, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "tensor '%s': %s", t->name, err);
  double sum = 0;
  for (int i = 0; i < rp.nsteps; i++) {
    cost_step_eval e;
    plan_cost_step_eval_at(&e, m, t, esize, &rp.steps[i], 1);
    sum += e.seconds;
  }
  *out = sum;
  return PLAN_OK;
}

/* ---- string forms (the public API) --------------------------------------- */

static int parse_pl(plan_placement *out, const plan_plan *p, int tensor,
                    const char *text, const char *what) {
  char err[200];
  const plan_tensor *t = &p->program->tensors[tensor];
  if (!text)
    return plan_failf(PLAN_EUSAGE, "%s of tensor '%s': no placement", what,
                      t->name);
  if (plan_placement_parse(out, text, strlen(text), p->mesh.naxes, err,
                           sizeof err, NULL) ||
      plan_placement_normalize(out, t->rank, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "%s of tensor '%s': placement '%s': %s",
                      what, t->name, text, err);
  return PLAN_OK;
}

int plan_cost_op(double *out, const plan_cost_model *m, const plan_plan *p,
                 int op, const char *const *in, const char *const *outs) {
  if (!out || !m || !p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_cost_op: NULL argument or no mesh");
  *out = 0;
  if (op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE, "op %d is out of range", op);
  const plan_op *o = &p->program->ops[op];
  plan_placement ip[PLAN_MAX_OPERANDS], op_[PLAN_MAX_OPERANDS];
  int rc;
  for (int j = 0; in && j < o->nin; j++)
    if ((rc = parse_pl(&ip[j], p, o->in[j], in[j], "input")))
      return rc;
  for (int k = 0; outs && k < o->nout; k++)
    if ((rc = parse_pl(&op_[k], p, o->out[k], outs[k], "output")))
      return rc;
  return plan_cost_op_seconds(out, m, p, op, in ? ip : NULL, outs ? op_ : NULL);
}

int plan_cost_redistribute(double *out, const plan_cost_model *m,
                           const plan_plan *p, int tensor, const char *from,
                           const char *to) {
  if (!out || !m || !p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_redistribute: NULL argument or no mesh");
  *out = 0;
  if (tensor < 0 || tensor >= p->program->ntensors)
    return plan_failf(PLAN_EUSAGE, "tensor %d is out of range", tensor);
  plan_placement a, b;
  int rc;
  if ((rc = parse_pl(&a, p, tensor, from, "from")) ||
      (rc = parse_pl(&b, p, tensor, to, "to")))
    return rc;
  return plan_cost_redist_seconds(out, m, p, tensor, &a, &b);
}
