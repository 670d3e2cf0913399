/* Hardware for the cost model: the built-in profiles with their sources,
 * and a plan's own `mesh.hardware` completed and checked.
 *
 * Figures are per GPU. FLOP/s are dense (NVIDIA's datasheets print the
 * tensor-core figures "with sparsity", twice the dense rate; the dense
 * figure is half of it). f64 uses the FP64 tensor-core rate, f32 the
 * non-tensor FP32 rate (PyTorch does not use TF32 for matmuls by default),
 * bf16 and f16 the tensor-core rates. Memory sizes are the datasheets'
 * "80GB" / "141GB" taken as decimal gigabytes. Link bandwidths are per GPU
 * and direction: NVLink's total (both directions) is halved; the network is
 * one InfiniBand adapter per GPU, as in the DGX systems.
 *
 * Latencies are not datasheet figures: they are assumed per-step costs of a
 * collective (launch, synchronisation, the wire), a few microseconds as
 * NCCL measures on such systems. Calibrate them (docs/cost.md). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cost/cost_model.h"

static const cost_hw profiles[] = {
    /* NVIDIA H100 SXM5 80GB.
     * Source: NVIDIA H100 Tensor Core GPU datasheet (2023), column "H100
     * SXM": FP64 34 TFLOPS, FP64 Tensor Core 67 TFLOPS, FP32 67 TFLOPS,
     * BF16 / FP16 Tensor Core 1,979 TFLOPS with sparsity (989.4 dense),
     * GPU memory 80GB, memory bandwidth 3.35TB/s, NVLink 900GB/s.
     * Network: NVIDIA DGX H100 datasheet: 8x single-port ConnectX-7,
     * 400Gb/s InfiniBand NDR per GPU = 50 GB/s per direction. */
    {.name = "h100-sxm",
     .flops = {[PLAN_F64] = 67e12,
               [PLAN_F32] = 67e12,
               [PLAN_BF16] = 989.4e12,
               [PLAN_F16] = 989.4e12},
     .memory = 80e9,
     .memory_bandwidth = 3.35e12,
     .intra_host = {450e9, 2e-6},
     .inter_host = {50e9, 5e-6}},
    /* NVIDIA H200 SXM 141GB.
     * Source: NVIDIA H200 Tensor Core GPU datasheet (2024), column "H200
     * SXM": FP64 34 TFLOPS, FP64 Tensor Core 67 TFLOPS, FP32 67 TFLOPS,
     * BF16 / FP16 Tensor Core 1,979 TFLOPS with sparsity (989.4 dense),
     * GPU memory 141GB, memory bandwidth 4.8TB/s, NVLink 900GB/s.
     * Network: NVIDIA DGX H200 datasheet: 8x single-port ConnectX-7,
     * 400Gb/s InfiniBand NDR per GPU = 50 GB/s per direction. */
    {.name = "h200-sxm",
     .flops = {[PLAN_F64] = 67e12,
               [PLAN_F32] = 67e12,
               [PLAN_BF16] = 989.4e12,
               [PLAN_F16] = 989.4e12},
     .memory = 141e9,
     .memory_bandwidth = 4.8e12,
     .intra_host = {450e9, 2e-6},
     .inter_host = {50e9, 5e-6}},
    /* NVIDIA A100 SXM4 80GB.
     * Source: NVIDIA A100 Tensor Core GPU datasheet (2021), column "A100
     * 80GB SXM": FP64 9.7 TFLOPS, FP64 Tensor Core 19.5 TFLOPS, FP32 19.5
     * TFLOPS, BF16 / FP16 Tensor Core 312 TFLOPS (624 with sparsity), GPU
     * memory 80GB HBM2e, memory bandwidth 2,039GB/s, NVLink 600GB/s.
     * Network: NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6,
     * 200Gb/s InfiniBand HDR per GPU = 25 GB/s per direction. */
    {.name = "a100-80gb",
     .flops = {[PLAN_F64] = 19.5e12,
               [PLAN_F32] = 19.5e12,
               [PLAN_BF16] = 312e12,
               [PLAN_F16] = 312e12},
     .memory = 80e9,
     .memory_bandwidth = 2.039e12,
     .intra_host = {300e9, 2e-6},
     .inter_host = {25e9, 5e-6}},
};

enum { NPROFILES = (int)(sizeof profiles / sizeof profiles[0]) };

/* Other spellings users write; each maps to a profile index. */
static const struct {
  const char *alias;
  int profile;
} aliases[] = {
    {"h100", 0},          {"h100-sxm5", 0},      {"h100-80gb", 0},
    {"h100-sxm-80gb", 0}, {"h200", 1},           {"h200-141gb", 1},
    {"a100", 2},          {"a100-sxm", 2},       {"a100-sxm4", 2},
    {"a100-80gb-sxm", 2}, {"a100-sxm4-80gb", 2},
};

int plan_cost_profiles_total(void) {
  return NPROFILES;
}

const cost_hw *plan_cost_profile_at(int i) {
  return i >= 0 && i < NPROFILES ? &profiles[i] : NULL;
}

static bool same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = (char)tolower((unsigned char)*a),
         y = (char)tolower((unsigned char)*b);
    if (x == '_')
      x = '-';
    if (y == '_')
      y = '-';
    if (x != y)
      return false;
  }
  return *a == *b;
}

const cost_hw *plan_cost_profile_find(const char *name) {
  if (!name)
    return NULL;
  for (int i = 0; i < NPROFILES; i++)
    if (same_name(name, profiles[i].name))
      return &profiles[i];
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (same_name(name, aliases[i].alias))
      return &profiles[aliases[i].profile];
  return NULL;
}

const char *plan_cost_profile_list(void) {
  return "h100-sxm (h100), h200-sxm (h200), a100-80gb (a100)";
}

int plan_cost_profile_count(void) {
  return NPROFILES;
}

const char *plan_cost_profile_name(int i) {
  return i >= 0 && i < NPROFILES ? profiles[i].name : NULL;
}

const char *plan_cost_profile_resolve(const char *name) {
  const cost_hw *h = plan_cost_profile_find(name);
  return h ? h->name : NULL;
}

/* ---- a plan's own hardware ----------------------------------------------- */

static void fill(double *v, double base) {
  if (*v == 0)
    *v = base;
}

static void fill_link(plan_link *l, const plan_link *base) {
  fill(&l->bandwidth, base->bandwidth);
  fill(&l->latency, base->latency);
}

static void add_missing(char *buf, size_t size, const char *what) {
  size_t n = strlen(buf);
  if (n + strlen(what) + 3 < size)
    snprintf(buf + n, size - n, "%s%s", n ? ", " : "", what);
}

int plan_cost_hw_from_plan(plan_cost_model *m, const plan_plan *p) {
  const plan_hardware *h = p->mesh.hardware;
  for (int a = 0; a < m->naxes; a++)
    m->axis_override[a] = h->axis_link[a];
  return plan_cost_hw_complete(&m->hw, m->hw_name, sizeof m->hw_name, h, m, p,
                               "mesh.hardware", true);
}

int plan_cost_hw_complete(cost_hw *hw, char *name, size_t namesz,
                          const plan_hardware *h, const plan_cost_model *m,
                          const plan_plan *p, const char *what, bool links) {
  const cost_hw *base = plan_cost_profile_find(h->name);
  memset(hw, 0, sizeof *hw);
  for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
    hw->flops[d] = h->flops[d];
  hw->memory = h->memory;
  hw->memory_bandwidth = h->memory_bandwidth;
  hw->intra_host = h->intra_host;
  hw->inter_host = h->inter_host;
  snprintf(name, namesz, "%s", h->name ? h->name : "custom");
  hw->name = name;
  if (base) {
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
      fill(&hw->flops[d], base->flops[d]);
    fill(&hw->memory, base->memory);
    fill(&hw->memory_bandwidth, base->memory_bandwidth);
    fill_link(&hw->intra_host, &base->intra_host);
    fill_link(&hw->inter_host, &base->inter_host);
    return PLAN_OK;
  }
  /* bf16 and f16 run at the same tensor-core rate on every GPU in view */
  fill(&hw->flops[PLAN_BF16], h->flops[PLAN_F16]);
  fill(&hw->flops[PLAN_F16], h->flops[PLAN_BF16]);

  /* What this plan needs: the float dtypes its matmuls run in, some rate
   * for the other ops, memory figures, and the links its axes use. */
  char missing[512] = "";
  const plan_program *prog = p->program;
  bool need[PLAN_DTYPE_COUNT] = {false};
  bool any_float = false;
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    if (op->nout < 1)
      continue;
    plan_dtype dt = plan_cost_tensor_dtype(p, op->out[0]);
    if (!plan_dtype_is_float(dt))
      continue;
    any_float = true;
    int c = m->kclass[op->kind];
    if (c == COST_CLASS_MATMUL || c == COST_CLASS_LINEAR)
      need[dt] = true;
  }
  bool named = false;
  for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
    if (need[d] && hw->flops[d] <= 0) {
      char fig[32];
      named = true;
      snprintf(fig, sizeof fig, "flops.%s", plan_dtype_name((plan_dtype)d));
      add_missing(missing, sizeof missing, fig);
    }
  if (any_float && !named) {
    bool some = false;
    for (int d = 0; d < PLAN_DTYPE_COUNT; d++)
      some |= hw->flops[d] > 0;
    if (!some)
      add_missing(missing, sizeof missing, "flops");
  }
  if (hw->memory <= 0)
    add_missing(missing, sizeof missing, "memory");
  if (hw->memory_bandwidth <= 0)
    add_missing(missing, sizeof missing, "memory_bandwidth");
  bool need_intra = false, need_inter = false;
  for (int a = 0; a < m->naxes && links; a++) {
    if (m->axis_sizes[a] < 2 || m->axis_override[a].bandwidth > 0)
      continue;
    if (m->axis_inter[a])
      need_inter = true;
    else
      need_intra = true;
  }
  if (need_intra && hw->intra_host.bandwidth <= 0)
    add_missing(missing, sizeof missing, "intra_host.bandwidth");
  if (need_inter && hw->inter_host.bandwidth <= 0)
    add_missing(missing, sizeof missing, "inter_host.bandwidth");
  if (missing[0])
    return plan_fail(PLAN_EINVALID, p->file, h->pos.line, h->pos.col,
                     "%s lacks figures this plan needs: %s (give "
                     "them, or set `name` to a built-in profile to take them "
                     "from: %s)",
                     what, missing, plan_cost_profile_list());
  return PLAN_OK;
}
