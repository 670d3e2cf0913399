/* libplan: lowered programs.
 *
 * A plan lowers to an explicit SPMD program over rank-local buffers: every
 * rank runs the same steps, each a local op on local blocks or one
 * collective along one mesh axis (all_gather, all_reduce, reduce_scatter,
 * all_to_all, and the local slice / zero_non_owner / relabel steps), and a
 * layout map says which buffer holds every tensor of the single-device
 * program, in which placement. The file form (spec/lowered-format.md) is a
 * YAML document whose first key is `libplan-lowered`; `plan verify` runs
 * one as it is (docs/verify.md). */
#ifndef LIBPLAN_LOWERED_H
#define LIBPLAN_LOWERED_H

#include "common.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_lowered plan_lowered;

/* Lowers `p`, which should validate without errors (plan_validate): a
 * plan with a `training` section lowers its training step (forward, then
 * backward ops, the gradient sync), a pipelined plan its step over the
 * microbatch mesh. `p` must outlive *out; free *out with
 * plan_lowered_free. Returns PLAN_OK; PLAN_EUNSUPPORTED for what is not
 * lowered here (a manual region, whose body needs a tracer: plan_verify
 * runs it; training features the lowering refuses); PLAN_EINVALID when a
 * redistribution cannot be planned or a gradient cannot be synced as the
 * plan says; PLAN_EUSAGE for a NULL plan or one without a mesh;
 * PLAN_ENOMEM. */
PLAN_API int plan_lower(plan_lowered **out, const plan_plan *p);
/* Frees a lowered program; accepts NULL. */
PLAN_API void plan_lowered_free(plan_lowered *l);

/* The text form (spec/lowered-format.md) into a newly allocated,
 * NUL-terminated buffer of *len bytes; free *out with plan_buffer_free.
 * PLAN_EUNSUPPORTED for a pipelined program (no file form yet),
 * PLAN_ENOMEM, PLAN_EUSAGE for a NULL argument; *out = NULL on failure. */
PLAN_API int plan_lowered_write(char **out, size_t *len, const plan_lowered *l);
/* Writes the text form to `path` atomically (as plan_write_file_atomic
 * does). A program given by path is written relative to the new file's
 * folder, so the file finds it wherever it is written. PLAN_EIO naming
 * the path, and the statuses of plan_lowered_write. */
PLAN_API int plan_lowered_save(const plan_lowered *l, const char *path);

/* Reads a lowered program file. The program given by path is resolved
 * relative to the file's folder. Every collective step must fit its
 * buffers' placements. On failure returns a negative status (PLAN_EIO,
 * PLAN_ESYNTAX, PLAN_ESCHEMA, PLAN_EVERSION, PLAN_EINVALID, PLAN_ENOMEM;
 * PLAN_EUSAGE for a NULL argument) with the last error naming file, line
 * and column, as plan_load does; *out = NULL. */
PLAN_API int plan_lowered_load(plan_lowered **out, const char *path);
/* The same from memory: `name` is used in messages, a program path is
 * resolved relative to `base_dir` (NULL: the current folder). */
PLAN_API int plan_lowered_load_buffer(plan_lowered **out, const char *data,
                                      size_t len, const char *name,
                                      const char *base_dir);

/* Content hash of the lowered program's canonical encoding: the program's
 * hash, the mesh, and the buffers, steps, layouts and outputs as written.
 * A lowered program and the file it writes, read back, hash the same (a
 * training step's too). PLAN_EUNSUPPORTED for a pipelined program;
 * PLAN_ENOMEM; PLAN_EUSAGE for a NULL argument. */
PLAN_API int plan_lowered_hash(plan_hash *out, const plan_lowered *l);

/* 1 when `data` (len bytes) starts as a lowered program (its first key,
 * after comments and blank lines, is `libplan-lowered`), else 0 (also for
 * a NULL data); nothing
 * is parsed, so a caller can choose between plan_lowered_load_buffer and
 * plan_load_buffer. */
PLAN_API int plan_is_lowered_text(const char *data, size_t len);

/* ---- views (borrowed from l) ------------------------------------------ */

/* The plan whose program and mesh the steps run on (never NULL for a valid
 * l): the plan lowered, its training step's plan for a training plan, or
 * the program and mesh a lowered file carries. Borrowed: valid while l
 * lives. NULL for a NULL l. */
PLAN_API const plan_plan *plan_lowered_plan(const plan_lowered *l);
/* The number of steps; -1 for a NULL l. */
PLAN_API int plan_lowered_step_count(const plan_lowered *l);
/* The number of steps of one collective kind ("all_gather", "all_reduce",
 * "reduce_scatter", "all_to_all", "slice", "zero_non_owner", "relabel");
 * -1 for an unknown kind or a NULL argument. */
PLAN_API int plan_lowered_collective_count(const plan_lowered *l,
                                           const char *kind);

#ifdef __cplusplus
}
#endif
#endif
