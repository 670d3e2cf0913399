/* A program's tensors and ops read by index as structs
 * (libplan/program.h, "views by index"). */
#include "ir/ir.h"

int plan_program_loss(const plan_program *p) {
  return p ? p->loss : -1;
}

int plan_program_tensor(plan_program_tensor_info *out, const plan_program *p,
                        int tensor) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_program_tensor: NULL argument");
  if (tensor < 0 || tensor >= p->ntensors)
    return plan_failf(PLAN_EUSAGE,
                      "plan_program_tensor: tensor %d is not in 0..%d", tensor,
                      p->ntensors - 1);
  const plan_tensor *t = &p->tensors[tensor];
  out->name = t->name;
  out->rank = t->rank;
  out->dims = t->rank ? t->dims : NULL;
  out->dtype = (int)t->dtype;
  out->role = (int)t->role;
  out->producer = t->producer;
  out->producer_slot = t->producer < 0 ? -1 : t->producer_slot;
  out->has_range = t->has_range;
  out->range_lo = t->range_lo;
  out->range_hi = t->range_hi;
  out->recipe = (int)t->recipe;
  out->recipe_theta = t->recipe_theta;
  out->recipe_fill = t->recipe_fill;
  return PLAN_OK;
}

int plan_program_op(plan_program_op_info *out, const plan_program *p, int op) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_program_op: NULL argument");
  if (op < 0 || op >= p->nops)
    return plan_failf(PLAN_EUSAGE, "plan_program_op: op %d is not in 0..%d", op,
                      p->nops - 1);
  const plan_op *o = &p->ops[op];
  out->name = o->name;
  out->kind = o->kind;
  out->nin = o->nin;
  out->nout = o->nout;
  out->in = o->in;
  out->out = o->out;
  out->attrs = o->attrs;
  return PLAN_OK;
}
