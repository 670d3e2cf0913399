/* The placement search's time: device assignments on a topology (torus
 * curves and level interleavings with every order of the mesh axes), each
 * priced with the cost model (make bench-placement). A ring all-reduce
 * over a 4x4 and an 8x8 wrapped torus, and dp x tp over islands of 8. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"
#include "libplan/plan.h"
#include "search/placement_search.h"

static const char *plan_text(char *buf, size_t size, const char *axes,
                             const char *xpl, const char *wpl, const char *ypl,
                             const char *outpl) {
  snprintf(buf, size,
           "libplan: \"0.1\"\n"
           "program:\n"
           "  tensors:\n"
           "    x: {shape: [1024, 4096], dtype: bf16}\n"
           "    w: {shape: [4096, 4096], dtype: bf16, role: param}\n"
           "  ops:\n"
           "    - {name: fc, op: matmul, in: [x, w], out: y}\n"
           "mesh: {axes: [%s]}\n"
           "placements: {x: %s, w: %s}\n"
           "strategies:\n"
           "  fc: {in: [%s, %s], out: %s}\n"
           "outputs: {y: %s}\n",
           axes, xpl, wpl, xpl, wpl, ypl, outpl);
  return buf;
}

static int run(const char *what, const char *text, plan_topology *topo) {
  plan_plan *p = NULL;
  if (plan_load_buffer(&p, text, strlen(text), what, NULL))
    return 1;
  p->mesh.topology = topo;
  plan_placement_choice ch;
  int reps = 20, rc = 0;
  clock_t t0 = clock();
  for (int i = 0; i < reps && !rc; i++) {
    plan_set_mesh_devices(p, NULL);
    rc = plan_placement_search(&ch, p, "h100");
  }
  double s = (double)(clock() - t0) / CLOCKS_PER_SEC / reps;
  if (!rc)
    printf("%-28s %3d candidates  %8.3f ms  best %-10s %-8s step %.4g s "
           "(default %.4g s, %.2fx)\n",
           what, ch.candidates, s * 1e3, ch.curve, ch.order, ch.step,
           ch.default_step, ch.default_step / ch.step);
  p->mesh.topology = NULL;
  plan_free(p);
  return rc;
}

int main(void) {
  char buf[2048];
  plan_topology torus;
  memset(&torus, 0, sizeof torus);
  torus.kind = PLAN_TOPO_TORUS;
  torus.ndims = 2;
  torus.dims[0] = torus.dims[1] = 4;
  torus.wrap[0] = torus.wrap[1] = true;
  torus.link = (plan_link){45e9, 1e-6};
  int rc =
      run("torus 4x4, sp=16",
          plan_text(buf, sizeof buf, "sp=16", "S(1)", "S(0)", "P(sum)", "R"),
          &torus);
  torus.dims[0] = torus.dims[1] = 8;
  rc |= run("torus 8x8, dp=8 x sp=8",
            plan_text(buf, sizeof buf, "dp=8, sp=8", "S(0)S(1)", "RS(0)",
                      "S(0)P(sum)", "S(0)R"),
            &torus);
  plan_topology lv;
  memset(&lv, 0, sizeof lv);
  lv.kind = PLAN_TOPO_LEVELS;
  lv.nlevels = 2;
  lv.levels[0] = (plan_topo_level){"nvlink", 8, {450e9, 2e-6}};
  lv.levels[1] = (plan_topo_level){"ib", 0, {50e9, 5e-6}};
  rc |= run("levels 2x8, dp=2 x tp=8",
            plan_text(buf, sizeof buf, "dp=2, tp=8", "S(0)S(1)", "RS(0)",
                      "S(0)P(sum)", "S(0)R"),
            &lv);
  return rc;
}
