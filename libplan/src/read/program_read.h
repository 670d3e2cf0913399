/* Internal entry points of the program module, shared by the plan reader. */
#ifndef LIBPLAN_PROGRAM_READ_H
#define LIBPLAN_PROGRAM_READ_H

#include "ir/ir.h"
#include "ir/ops.h"
#include "yaml/reader.h"

/* A new empty program (arena and maps initialised); NULL on OOM. */
plan_program *plan_program_new(const char *file);
/* Reads the `program:` mapping into p (allocated with plan_program_new; the
 * reader's arena must be &p->arena). */
int plan_program_read(const plan_reader *rd, const plan_ynode *n,
                      plan_program *p);
/* One op / one tensor declaration, for streaming readers (plan_program_read
 * reads whatever they left in the tree). */
int plan_program_add_op(const plan_reader *rd, plan_program *p,
                        const plan_ynode *n);
int plan_program_add_tensor(const plan_reader *rd, plan_program *p,
                            const plan_ynode *key, const plan_ynode *value);
/* Room for `ops` ops and `tensors` tensors before a large program is read,
 * so the arrays are not copied again and again as they grow (once the
 * allocator has freed big blocks it keeps them on its heap, where realloc
 * moves them rather than remapping them). Reserved room that stays unused is
 * never touched: it costs address space, not memory. The name maps get room
 * for `keys` names each (they are touched all over, so this is memory: a
 * smaller estimate). PLAN_OK or the OOM status. */
int plan_program_reserve(plan_program *p, int ops, int tensors, size_t keys);
/* Orders ops topologically, checks roles, infers shapes and dtypes, decides
 * outputs and computes signatures. Errors carry positions. */
int plan_program_finish(const plan_reader *rd, plan_program *p);
int plan_read_shape(const plan_reader *rd, const plan_ynode *n, plan_tensor *t);
int plan_program_fill_attr_defaults(const plan_op_info *info,
                                    plan_attr_val *attrs);
/* Reads the `libplan:` version field of a document into rd. */
int plan_read_version(plan_reader *rd, const plan_ynode *root);

/* Takes the program out of a plan (the plan keeps a NULL program). */
plan_program *plan_take_program(plan_plan *p);

/* Signatures (canon.c). plan_program_sigs computes them on first use: loading
 * a 100k-op plan should not pay for what only drift reports need. The
 * first use mutates the program, so a program shared between threads should
 * have one signature read (plan_program_op_signature) before it is shared. */
void plan_canon_program_sigs(plan_program *p);
/* Computes and keeps the program hash and name order (canon.c). */
int plan_canon_program_prepare(plan_program *p);
const plan_program *plan_program_sigs(const plan_program *p);

#endif
