/* The pricing of libplan/space.h: the cost model's struct-based
 * evaluations (cost/cost_model.h) behind the checks a public call owes its
 * caller. Nothing here allocates; the checks are a few compares per
 * operand, so a search pays what the core's own callers pay. */
#include "base/util.h"
#include "cost/cost_model.h"
#include "libplan/space.h"
#include "search/space_check.h"

/* PLAN_OK when m, p and out are there and m was made for p's shape. */
static int check_model(const plan_cost_model *m, const plan_plan *p,
                       const char *fn) {
  if (!m || !p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "%s: NULL argument or no mesh", fn);
  if (m->nops != p->program->nops || m->ntensors != p->program->ntensors ||
      m->naxes != p->mesh.naxes)
    return plan_failf(PLAN_EUSAGE,
                      "%s: the model was made for another program or mesh "
                      "shape",
                      fn);
  return PLAN_OK;
}

int plan_cost_op_placed(double *out, const plan_cost_model *m,
                        const plan_plan *p, int op, const plan_placement *in,
                        const plan_placement *outs) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_op_placed: NULL out");
  *out = 0;
  int rc;
  if ((rc = check_model(m, p, "plan_cost_op_placed")))
    return rc;
  if (op < 0 || op >= p->program->nops)
    return plan_failf(PLAN_EUSAGE, "op %d is out of range (0..%d)", op,
                      p->program->nops - 1);
  if ((in || outs) && (rc = plan_space_check_operands(p, op, in, outs)))
    return rc;
  return plan_cost_op_seconds(out, m, p, op, in, outs);
}

int plan_cost_redistribute_placed(double *out, const plan_cost_model *m,
                                  const plan_plan *p, int tensor,
                                  const plan_placement *from,
                                  const plan_placement *to) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_redistribute_placed: NULL out");
  *out = 0;
  int rc;
  if ((rc = check_model(m, p, "plan_cost_redistribute_placed")))
    return rc;
  if (!from || !to)
    return plan_failf(PLAN_EUSAGE,
                      "plan_cost_redistribute_placed: NULL placement");
  if (tensor < 0 || tensor >= p->program->ntensors)
    return plan_failf(PLAN_EUSAGE, "tensor %d is out of range (0..%d)", tensor,
                      p->program->ntensors - 1);
  int rank = p->program->tensors[tensor].rank, naxes = p->mesh.naxes;
  if (!plan_space_fits(from, naxes, rank) &&
      (rc = plan_space_check_placement(p, tensor, from, "from")))
    return rc;
  if (!plan_space_fits(to, naxes, rank) &&
      (rc = plan_space_check_placement(p, tensor, to, "to")))
    return rc;
  return plan_cost_redist_seconds(out, m, p, tensor, from, to);
}
