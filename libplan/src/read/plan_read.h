/* Internal entry points of the plan module: section readers, name
 * resolution, canonical encoding. */
#ifndef LIBPLAN_PLAN_READ_H
#define LIBPLAN_PLAN_READ_H

#include "ir/ir.h"
#include "ir/placement.h"
#include "read/program_read.h"
#include "yaml/reader.h"

/* How plan_load_buffer reads: pipelined on a second thread for documents
 * of PLAN_PIPE_MIN_BYTES or more (AUTO), or forced either way (tests). */
enum { PLAN_LOAD_AUTO = 0, PLAN_LOAD_SEQUENTIAL = 1, PLAN_LOAD_PIPED = 2 };
#define PLAN_PIPE_MIN_BYTES ((size_t)1 << 20)
int plan_load_buffer_mode(plan_plan **out, const char *data, size_t len,
                          const char *name, const char *base_dir, int mode);
/* The same with the folder a program by path may lie in (NULL: the
 * default, plan_read_program_ref). */
int plan_load_buffer_in(plan_plan **out, const char *data, size_t len,
                        const char *name, const char *base_dir, int mode,
                        const char *program_root);

/* A plan from an already parsed root mapping (no streaming): the lowered
 * program reader uses it for its `program` and `mesh`. */
int plan_from_root(plan_plan **out, const plan_ynode *root, const char *file,
                   const char *base_dir);

int plan_mesh_read(const plan_reader *rd, const plan_ynode *n, plan_mesh *m);
/* The fields of one hardware map (the single `hardware:` form, or a full
 * per-device profile) into h (mesh_read.c). */
int plan_mesh_read_hw(const plan_reader *rd, const plan_ynode *n,
                      const plan_mesh *m, plan_hardware *h);
/* Format 1.1 (mesh_hetero.c): `hardware: {profiles: .., devices: ..}`
 * (hw is the hardware map), and `topology:` (its value in the mesh map). */
int plan_mesh_read_profiles(const plan_reader *rd, const plan_ynode *hw,
                            plan_mesh *m);
int plan_mesh_read_topology(const plan_reader *rd, const plan_ynode *mesh,
                            const plan_ynode *v, plan_mesh *m);
int plan_mesh_axis_find(const plan_mesh *m, const char *name);

/* Reads a placement (compact string or map form) for a tensor of `rank`
 * dims over the plan's mesh, normalised. */
int plan_read_placement(const plan_reader *rd, const plan_ynode *n,
                        const plan_mesh *m, int rank, plan_placement *out);
/* The same interning shard ratios into m's sets as they are read (the
 * placement's `ratio` names one); plan_read_placement, with a read-only
 * mesh, only finds the sets m already holds. */
int plan_read_placement_in(const plan_reader *rd, const plan_ynode *n,
                           plan_mesh *m, int rank, plan_placement *out);

/* PLAN_OK when the file's version holds format 1.1 fields; else a
 * `version` error at `at` naming `field` (mesh_read.c). */
int plan_rd_need_format_1_1(const plan_reader *rd, const plan_ynode *at,
                            const char *field);

/* A `schedule:` name into *k (plan_schedule_kind); the kinds beyond
 * format 1.0's need a 1.1 file (plan_sections.c). */
int plan_rd_schedule_name(const plan_reader *rd, const plan_ynode *v, int *k);

/* Records a name/pattern use; returns its index or a negative status. */
int plan_record_use(plan_plan *p, const char *pattern, const char *section,
                    bool tensors, plan_pos pos);

/* Calls fn(op, ctx) for every op `pattern` names (an exact name or a glob);
 * records the use and returns the number of matches, or a negative status
 * when fn fails. */
typedef int (*plan_op_fn)(int op, void *ctx);
#define PLAN_GLOB_WORK_MAX ((uint64_t)1 << 27)
int plan_for_ops(plan_plan *p, const char *pattern, const char *section,
                 plan_pos pos, plan_op_fn fn, void *ctx);

/* Pipeline actions: "0F1", "2B0", "1SEND_F3" (plan_sections.c). */
const char *plan_action_word(int kind);
/* Every schedule kind's name, indexed by plan_schedule_kind (schedule.c);
 * a format 1.0 plan file names the first PLAN_SCHED_FILE_COUNT_1_0, 1.1
 * every one. */
extern const char *const plan_schedule_names[PLAN_SCHED_COUNT];
int plan_action_parse(plan_action *a, const char *s, size_t len);
/* Reads the `overlap` section (plan_overlap.c). */
int plan_overlap_read(const plan_reader *rd, const plan_ynode *n, plan_plan *p);
/* Reads training, pipeline, regions and provenance. */
int plan_sections_read(const plan_reader *rd, const plan_ynode *root,
                       plan_plan *p);

/* The `program:` (inline or by reference) and `mesh:` sections of a plan,
 * as plan_write_buffer writes them (write_program.c). */
void plan_write_program_and_mesh(plan_buf *b, const plan_plan *p,
                                 bool self_contained);
/* The path of file `target` relative to the folder of file `from` (both
 * as the process sees them), newly allocated: how a file saved at `from`
 * refers to its program (write_file.c). NULL when either cannot be
 * resolved or memory is short. */
char *plan_path_from(const char *from, const char *target);

/* Canonical encodings (canon.c). */
int plan_canon_encode(plan_buf *b, const plan_plan *p, plan_part part);
int plan_canon_section(plan_buf *b, const plan_plan *p, const char *which);

/* Drift findings of `edited` against the program p was made for (diff.c). */
int plan_drift_into(plan_diags *d, const plan_plan *p,
                    const plan_program *edited);

#endif
