/* What the files of the plan writer share: the YAML emitter (emit.c:
 * scalars quoted only where a plain one would read back as something
 * else, numbers that round-trip, generic values) and the program and mesh
 * sections (write_program.c) that write.c puts in a plan. */
#ifndef LIBPLAN_EMIT_H
#define LIBPLAN_EMIT_H

#include "libplan/plan.h"
#include "ir/ir.h"
#include "ir/placement.h"

/* ---- the emitter (emit.c) ------------------------------------------------ */

/* A string: plain when it reads back as the same string, else quoted. */
void plan_w_str(plan_buf *b, const char *s);
/* A number that reads back as the same double (.nan, .inf, -0.0 too). */
void plan_w_num(plan_buf *b, double v);
/* A placement in its canonical compact spelling. */
/* A placement's canonical form; its shard ratios are m's sets. */
void plan_w_pl(plan_buf *b, const plan_placement *p, const plan_mesh *m);
void plan_w_indent(plan_buf *b, int n);
/* Text as a literal block scalar when that keeps it exact (Lua bodies),
 * else quoted; ends the line. */
void plan_w_text(plan_buf *b, const char *s, int ind);
/* A value after "key:" or "-": scalars follow on the same line after
 * `lead` (a space), collections start on the next lines at `ind`. */
void plan_w_value_inline(plan_buf *b, const plan_value *v, int ind,
                         const char *lead);
/* x- keys: inside a one-line flow mapping (", key: value" each), or as
 * block entries at `ind`. */
void plan_w_ext_flow(plan_buf *b, const plan_ext *e);
void plan_w_ext(plan_buf *b, const plan_ext *e, int ind);

/* ---- program and mesh (write_program.c) ---------------------------------- */

/* The `program:` section inline, or as a reference by path with the
 * program's hash and signatures. */
void plan_w_program(plan_buf *b, const plan_program *p);
/* Op i of p as the program writes it, in flow form ({name: .., op: ..}). */
void plan_w_op(plan_buf *b, const plan_program *p, int i);
void plan_w_program_ref(plan_buf *b, const plan_plan *p);
void plan_w_mesh(plan_buf *b, const plan_mesh *m);

#endif
