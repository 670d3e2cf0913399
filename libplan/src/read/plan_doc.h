/* What the plan document reader (plan_read.c) calls in the other files of
 * read/: the decisions (plan_decisions.c: placements, strategies, output
 * placements) and the program reference (plan_program_ref.c). Each returns
 * PLAN_OK or a negative status with the last error set. */
#ifndef LIBPLAN_PLAN_DOC_H
#define LIBPLAN_PLAN_DOC_H

#include <stddef.h>

#include "read/plan_read.h"

/* ---- decisions (plan_decisions.c) ---------------------------------------- */

/* The placements a load has parsed from text, by their text and the rank
 * of the operand they place: a 100k-op plan spells a few dozen placements
 * hundreds of thousands of times in its strategies and placements. The
 * slots hold short texts only; placements with shard ratios (which intern
 * into the mesh) are never kept. Zeroed: empty. */
#define PLAN_PL_CACHE_SLOTS 64
#define PLAN_PL_CACHE_TEXT 23
typedef struct plan_pl_cache_slot {
  char text[PLAN_PL_CACHE_TEXT];
  uint8_t len; /* 0: empty */
  int rank;
  plan_placement pl;
} plan_pl_cache_slot;
struct plan_pl_cache {
  plan_pl_cache_slot slots[PLAN_PL_CACHE_SLOTS];
};

/* One entry of `placements` (a tensor name: a placement). */
int plan_read_placement_entry(const plan_reader *rd, plan_plan *p,
                              const plan_ynode *k, const plan_ynode *v);
/* A whole `placements` mapping left in the tree. */
int plan_read_tensor_placements(const plan_reader *rd, const plan_ynode *n,
                                plan_plan *p);
/* One entry of `strategies`: an op name or a glob. */
int plan_read_strategy_entry(const plan_reader *rd, plan_plan *p,
                             const plan_ynode *k, const plan_ynode *v);
/* A whole `strategies` mapping left in the tree: exact names first, then
 * patterns. */
int plan_read_strategies(const plan_reader *rd, const plan_ynode *n,
                         plan_plan *p);
/* The `outputs` mapping: output placements. */
int plan_read_output_placements(const plan_reader *rd, const plan_ynode *n,
                                plan_plan *p);

/* ---- the program by path (plan_program_ref.c) ---------------------------- */

/* The `program:` reference (path, hash, signatures) and the program it
 * names, loaded into p->program; a relative path is from base_dir. The
 * file must lie inside base_dir's tree or the folder `root` (NULL:
 * $PLAN_PROGRAM_ROOT when set, else none), symlinks and '..' resolved,
 * and be another file than the plan itself (spec/plan-format.md,
 * "Program by path"). */
int plan_read_program_ref(const plan_reader *rd, const plan_ynode *n,
                          plan_plan *p, const char *base_dir, const char *root);
#endif
