/* Shape reduction's context, shared by its steps (reduce.c lists them):
 * the union-find over tensor dims and op factors, the atoms every dim
 * breaks into, and the placements' constraints on them. Internal to
 * libplan/src/reduce/. */
#ifndef LIBPLAN_REDUCE_REDUCE_CTX_H
#define LIBPLAN_REDUCE_REDUCE_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "libplan/plan.h"
#include "ir/ops.h"

/* Why an atom keeps its size (the first reason found). */
typedef enum keep_why {
  KEEP_NO = 0,
  KEEP_FUSED,
  KEEP_PARTS,
  KEEP_RULE,
  KEEP_UNUSED,
  KEEP_NESTED,
  KEEP_COMPOUND,
  KEEP_NOFIT,
  KEEP_RANGE,
  KEEP_REPEATS,
  KEEP_INDEXED,
  KEEP_COUNT
} keep_why;

/* A node of the union-find: a tensor dim, a factor of an op's rule, or a
 * dim that carries several factors (its expansion). */
typedef struct rnode {
  int parent;
  int exp, nexp; /* expansion: nodes exps[exp .. exp + nexp), major first */
  int64_t size;  /* original */
  int64_t nsize; /* chosen (atoms) */
  uint8_t keep;  /* keep_why */
} rnode;

/* A placement shards tensor dim `dim` over k ranks (nested: several axes);
 * or (divisor) the dim must stay a multiple of k, nothing more (a rope
 * table's even dim). */
typedef struct rcons {
  int tensor, dim;
  int64_t k;
  bool nested, divisor;
} rcons;

/* The same, on the atom it constrains (n: the atom's original size). */
typedef struct acons {
  int atom;
  int64_t k, n;
  bool even, divisor;
} acons;

/* The reduction of one plan: its nodes, the atoms of every tensor dim, the
 * constraints on them. */
typedef struct rctx {
  plan_plan *p; /* the copy being reduced */
  const plan_program *prog;
  rnode *n;
  int nn, capn;
  int *exps;
  int nexps, capexps;
  int *stack;
  int nstack, capstack;
  int *dimoff;     /* per tensor: its first dim node; [ntensors]: total */
  bool *described; /* per dim node: some op's rule names it */
  bool *broken;    /* per dim node: its atoms do not make its size */
  int *atomoff;    /* per dim node: first atom in atoms[] */
  uint8_t *natoms; /* per dim node */
  int *atoms;
  rcons *cons;
  int ncons, capcons;
  acons *ac;
  int nac, capac;
  int64_t *range_hi; /* per tensor: the new range end, -1 when unchanged */
  plan_rule *rule;
} rctx;

/* ---- steps 1 and 2 (reduce_ties.c) --------------------------------------- */

/* Ties every tensor dim to the op factors it carries, breaks every dim into
 * its atoms and marks the sizes that must be kept. */
int plan_rd_build(rctx *c);
/* Marks x's class kept; true when that is news. */
bool plan_rd_keep(rctx *c, int x, keep_why why);
/* A kept class with an expansion keeps its parts too. */
void plan_rd_keep_down(rctx *c);

/* ---- step 3 (reduce_sizes.c) --------------------------------------------- */

/* The constraints placement pl of tensor t puts on its dims. */
int plan_rd_add_pl(rctx *c, int t, const plan_placement *pl);
/* The constraints of every placement of the plan. */
int plan_rd_constraints(rctx *c);
/* The atoms' new sizes, every constraint and range checked again on the
 * new dims until nothing changes. */
int plan_rd_solve(rctx *c);
/* Tensor t's new dim d. */
int64_t plan_rd_new_dim(const rctx *c, int t, int d);

/* ---- the summary (reduce_summary.c) -------------------------------------- */

/* The one-line summary of what was reduced and what was kept, and why. */
int plan_rd_summary(rctx *c, char **out);

#endif
