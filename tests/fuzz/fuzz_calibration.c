/* libFuzzer target for calibration files (docs/cost.md): any bytes either
 * load into a cost model, or fail with a positioned error and leave the
 * model as it was; a model that loads prices a plan without crashing, and
 * every figure it gives is finite and >= 0. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "libplan/cost.h"
#include "libplan/libplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x))                                                                  \
      __builtin_trap();                                                        \
  } while (0)

static const char plan_text[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: mlp\n"
    "  tensors:\n"
    "    x:  {shape: [8, 16], dtype: bf16, role: input}\n"
    "    w1: {shape: [16, 64], dtype: bf16, role: param}\n"
    "    w2: {shape: [64, 16], dtype: bf16, role: param}\n"
    "  ops:\n"
    "    - {name: layers.0.fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: layers.0.act, op: gelu, in: [h], out: a}\n"
    "    - {name: layers.0.fc2, op: matmul, in: [a, w2], out: y}\n"
    "mesh: {axes: [dp=2, tp=2]}\n"
    "placements: {x: S(0)R, w1: RS(1), w2: RS(0)}\n"
    "strategies:\n"
    "  layers.0.fc1: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"
    "  layers.0.act: {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  layers.0.fc2: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}\n"
    "outputs: {y: S(0)R}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan_plan *p = NULL;
  CHECK(plan_load_buffer(&p, plan_text, sizeof plan_text - 1, "mlp.yaml",
                         "/nonexistent") == PLAN_OK);
  plan_cost_model *m = NULL;
  CHECK(plan_cost_model_new(&m, p, "h100") == PLAN_OK);
  plan_cost_report *before = NULL;
  CHECK(plan_cost_plan(&before, m, p) == PLAN_OK);
  double t0 = plan_cost_report_step_seconds(before);
  int rc = plan_cost_model_load_calibration_buffer(m, (const char *)data, size,
                                                   "cal.yaml");
  plan_cost_report *r = NULL;
  CHECK(plan_cost_plan(&r, m, p) == PLAN_OK);
  double t = plan_cost_report_step_seconds(r);
  CHECK(isfinite(t) && t >= 0);
  CHECK(isfinite(plan_cost_report_memory_peak(r)));
  if (rc != PLAN_OK) {
    /* refused: positioned, and the model unchanged */
    const plan_error *e = plan_error_last();
    CHECK(e && e->line >= 0);
    CHECK(t == t0);
  }
  plan_cost_report_free(r);
  plan_cost_report_free(before);
  plan_cost_model_free(m);
  plan_free(p);
  return 0;
}
