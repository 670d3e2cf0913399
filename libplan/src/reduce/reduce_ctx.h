/* Shape reduction's context, shared by its steps (reduce.c lists them):
 * the union-find over tensor dims and op factors, the atoms every dim
 * breaks into, and the placements' constraints on them. Internal to
 * libplan/src/reduce/. */
#ifndef LIBPLAN_REDUCE_REDUCE_CTX_H
#define LIBPLAN_REDUCE_REDUCE_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "libplan/lowered.h"
#include "libplan/plan.h"
#include "base/util.h"
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

/* Why a mesh axis keeps its size in a mesh reduction (the first reason
 * found). */
typedef enum axis_why {
  AXIS_REDUCED = 0,
  AXIS_NOT_ASKED, /* the mesh is not reduced */
  AXIS_PRIME,     /* no divisor between 1 and its size */
  AXIS_PIPELINE,  /* the pipeline's stages are its ranks */
  AXIS_RATIOS,    /* a ratio set has a weight per rank */
  AXIS_SUBMESH,   /* a submesh fixes one of its indices */
  AXIS_GROUPS,    /* a lowered step lists its ranks */
  AXIS_PATTERN,   /* a shard's pattern needs every rank */
  AXIS_COUNT
} axis_why;

/* A placement shards tensor dim `dim` over k ranks: mult times the sizes
 * of the mesh axes in `axes` (a bit per axis; nested: several axes, or a
 * microbatch or chunk count with them); or (divisor) the dim must stay a
 * multiple of k, nothing more (a rope table's even dim). */
typedef struct rcons {
  int tensor, dim;
  int64_t k, mult;
  unsigned axes;
  bool nested, divisor;
  bool mb; /* mult is the pipeline's microbatch count (which may shrink) */
} rcons;

/* The same, on the atom it constrains (n: the atom's original size; k2:
 * the ranks on the reduced mesh, k when no axis of it shrinks). */
typedef struct acons {
  int atom;
  int64_t k, k2, n;
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
  /* mesh reduction: every axis's new size (its own where it is kept) */
  int64_t nk[PLAN_MAX_MESH_AXES];
  uint8_t axis_keep[PLAN_MAX_MESH_AXES]; /* axis_why */
  int64_t nmb; /* the pipeline's new microbatch count (its own if kept) */
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
/* Adds the constraint that dim d of tensor t is split over mult times the
 * sizes of the axes in mask `axes`. */
int plan_rd_add_cons(rctx *c, int t, int d, int64_t mult, unsigned axes,
                     bool nested, bool divisor);
/* The ranks constraint q splits its dim over on the reduced mesh. */
int64_t plan_rd_cons_k2(const rctx *c, const rcons *q);
/* Each axis's first new size (reduce_mesh.c): the smallest divisor above 1
 * unless something ties the axis to its size; with `mesh` false, every
 * axis keeps its size. `l`: the lowered program being reduced, or NULL. */
void plan_rd_mesh_init(rctx *c, bool mesh, const plan_lowered *l);
/* Gives the axes in mask `axes` back their sizes (a shard's pattern needs
 * them), and with `mb` the microbatches their count; true when one was
 * reduced. */
bool plan_rd_mesh_keep(rctx *c, unsigned axes, bool mb);
/* Whether some axis shrinks. */
bool plan_rd_mesh_reduced(const rctx *c);
/* The copy's mesh over the new sizes (after the summary is made). */
void plan_rd_mesh_apply(rctx *c);
/* "; mesh: dp 8->2 (16->4 ranks); mesh kept: pp 4 (why)", onto b. */
void plan_rd_mesh_summary(const rctx *c, plan_buf *b);
/* The atoms' new sizes, every constraint and range checked again on the
 * new dims until nothing changes. */
int plan_rd_solve(rctx *c);
/* Tensor t's new dim d. */
int64_t plan_rd_new_dim(const rctx *c, int t, int d);

/* ---- the summary (reduce_summary.c) -------------------------------------- */

/* The one-line summary of what was reduced and what was kept, and why. */
int plan_rd_summary(rctx *c, char **out);

#endif
