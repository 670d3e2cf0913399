/* Views of a program's graph (libplan/program.h): an op's operand counts,
 * a tensor's producer and the program's outputs. The other views are in
 * program.c. */
#include "ir/ir.h"
#include "libplan/program.h"

int plan_program_op_input_count(const plan_program *p, int op) {
  return p && op >= 0 && op < p->nops ? p->ops[op].nin : -1;
}

int plan_program_op_output_count(const plan_program *p, int op) {
  return p && op >= 0 && op < p->nops ? p->ops[op].nout : -1;
}

int plan_program_tensor_producer(const plan_program *p, int tensor) {
  return p && tensor >= 0 && tensor < p->ntensors ? p->tensors[tensor].producer
                                                  : -1;
}

int plan_program_output_count(const plan_program *p) {
  return p ? p->noutputs : 0;
}

int plan_program_output(const plan_program *p, int k) {
  return p && k >= 0 && k < p->noutputs ? p->outputs[k] : -1;
}
