/* Lowering: a plan becomes an explicit SPMD program over rank-local buffers
 * (DESIGN §2, "Lowered program"). Every rank runs the same steps; a step is
 * a local op on local blocks or one redistribution step (redist.h) along
 * one mesh axis. The layout map says, for every tensor of the reference
 * program, which buffer holds it and in which placement, so a verifier can
 * reassemble the global tensor from the ranks' blocks.
 *
 * This is the in-memory form; forward programs only (training and pipeline
 * schedules come with issue 4). */
#ifndef LIBPLAN_LOWER_H
#define LIBPLAN_LOWER_H

#include "ir.h"
#include "redist.h"

/* A distributed buffer: one global tensor in one placement. */
typedef struct plan_lbuf {
  int tensor; /* index into the program's tensors */
  plan_placement pl;
} plan_lbuf;

typedef enum plan_lstep_kind {
  PLAN_LSTEP_INPUT,  /* materialise a leaf tensor's blocks (inputs, params,
                        consts) in its storage placement */
  PLAN_LSTEP_OP,     /* a program op on local blocks */
  PLAN_LSTEP_REDIST, /* one redistribution step: in[0] -> out[0] */
  PLAN_LSTEP_COUNT
} plan_lstep_kind;

typedef struct plan_lstep {
  plan_lstep_kind kind;
  int op;      /* OP: program op index; else -1 */
  int nin, nout;
  int *in;     /* buffer indices */
  int *out;
  plan_redist_step redist; /* REDIST */
  int64_t *group_order; /* ALL_GATHER from a lowered file: the coordinate
                           whose block lands at each position of the
                           concatenation; NULL: coordinate order */
} plan_lstep;

typedef struct plan_lowered {
  const plan_plan *plan;
  plan_plan *own_plan; /* a lowered file's program and mesh (else NULL) */
  plan_arena arena;
  plan_lbuf *bufs;
  int nbufs, cap_bufs;
  plan_lstep *steps;
  int nsteps, cap_steps;
  int *produced; /* per program tensor: the buffer its producer (or its
                    INPUT step) writes, -1 when none */
  int *delivered; /* per program output slot: the buffer in the output
                     placement */
  int collectives[PLAN_REDIST_COUNT]; /* steps of each kind */
} plan_lowered;

/* Lowers a validated plan. Returns PLAN_OK, PLAN_EUNSUPPORTED for what is
 * not lowered yet (training, pipelines, manual regions), PLAN_EINVALID when
 * a redistribution cannot be planned, PLAN_ENOMEM. */
int plan_lower(plan_lowered **out, const plan_plan *p);
void plan_lowered_free(plan_lowered *l);

/* The lowered program as YAML (spec/lowered-format.md); newly allocated. */
int plan_lowered_write(char **out, size_t *len, const plan_lowered *l);
/* Reads a lowered program (a document whose first key is
 * `libplan-lowered`). Collective steps must fit their buffers' placements;
 * errors carry file, line and column. */
int plan_lowered_load_buffer(plan_lowered **out, const char *data, size_t len,
                             const char *name, const char *base_dir);
/* Content hash of the lowered program's canonical encoding. */
int plan_lowered_hash(plan_hash *out, const plan_lowered *l);
/* Whether a document starts as a lowered program (its first key). */
bool plan_is_lowered_text(const char *data, size_t len);

#endif
