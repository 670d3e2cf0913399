/* The file form of a pipelined lowered program (spec/lowered-format.md,
 * "Pipelines"): the `pipeline:` section (the microbatch axis and count,
 * the stages, the schedule's action order on every pipeline rank), each
 * step's stage and phase, and the checks a pipelined file gets when it is
 * read. lowered_io.c writes and reads the rest of the file and calls
 * these. */
#ifndef LIBPLAN_LOWERED_IO_PIPE_H
#define LIBPLAN_LOWERED_IO_PIPE_H

#include "base/util.h"
#include "lower/lower.h"
#include "yaml/reader.h"

/* "pre", "F", "I", "W", "RECV_F", "RECV_B", "post" by plan_lphase. */
const char *plan_lphase_name(int phase);

/* The `pipeline:` section of l (which has one), ending in a newline. */
int plan_lpipe_write_section(plan_buf *b, const plan_lowered *l);
/* Step i's pipeline fields, each led by ", ": `stage: S, phase: F`, a
 * TRANSFER's `from_stage`, and `mb_shift` when it is not 0. */
void plan_lpipe_write_step_fields(plan_buf *b, const plan_lowered *l, int i);
/* The format version the schedule needs: 1.1 for the kinds a 1.0 plan
 * file cannot name. */
bool plan_lpipe_needs_1_1(const plan_lowered *l);

/* Reads the `pipeline:` section into l->pipe, over l->plan's mesh (the
 * microbatch mesh the file states): its axis, count, stages and schedule
 * (every action in range, on the rank the schedule's placement gives its
 * stage, each stage's F and backward once per microbatch). */
int plan_lpipe_read_section(const plan_reader *rd, plan_lowered *l,
                            const plan_ynode *n);
/* The per-step arrays of l->pipe for nsteps steps. */
int plan_lpipe_alloc_steps(plan_lowered *l, int nsteps);
/* A copy of step node n without its pipeline fields (stage, phase,
 * from_stage, mb_shift), for the step readers' key checks (arena). */
int plan_lpipe_strip_step(const plan_reader *rd, const plan_ynode *n,
                          plan_ynode *out);
/* Step idx's pipeline fields from its node n (read after the step). */
int plan_lpipe_read_step(const plan_reader *rd, plan_lowered *l,
                         const plan_ynode *n, int idx);
/* Once every step is read: each step reads only what its stage holds when
 * it runs (a leaf made before the schedule, a step of its own stage and a
 * phase that runs before its own, or a TRANSFER into its stage from the
 * stage that wrote it); the steps after the schedule read anything. steps
 * is the `steps` node (positions), written[b] the step writing buffer b. */
int plan_lpipe_check_steps(const plan_reader *rd, plan_lowered *l,
                           const plan_ynode *steps, const int *written);

#endif
