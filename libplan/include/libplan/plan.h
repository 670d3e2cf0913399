/* libplan: plans: loading, saving, hashing, validation, diff and drift.
 *
 * A plan is the set of parallelization decisions for one program: the mesh,
 * placements of inputs and parameters, a strategy per op, pipeline, training
 * and regions, plus provenance (spec/plan-format.md). */
#ifndef LIBPLAN_PLAN_H
#define LIBPLAN_PLAN_H

#include "common.h"
#include "diag.h"
#include "program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_plan plan_plan;

/* ---- load and save ------------------------------------------------------- */

/* Reads a plan file. A program given by path is resolved relative to the plan
 * file's folder and read too (it must lie in that folder's tree: see
 * plan_load_root). On failure returns a negative status (see
 * common.h) with the last error naming file, line and column; *out = NULL.
 * Only well-formedness is checked here (structure, names, shapes, placement
 * spellings); plan_validate judges the decisions. */
PLAN_API int plan_load(plan_plan **out, const char *path);
/* Same from memory. `name` is used in messages; a program path is resolved
 * relative to `base_dir` (NULL: the current directory). */
PLAN_API int plan_load_buffer(plan_plan **out, const char *data, size_t len,
                              const char *name, const char *base_dir);

/* Options for loading. Initialise with PLAN_LOAD_OPTIONS_INIT.
 * threads: 0 lets the library read documents of 1 MiB or more with two
 * helper threads (one runs the readers while libyaml parses, one hashes the
 * program once it is complete); both are joined before the call returns
 * and the result is the same as on one thread. 1 keeps all work on the
 * calling thread. */
typedef struct plan_load_options {
  unsigned int version; /* PLAN_LOAD_OPTIONS_VERSION */
  int threads;
} plan_load_options;
#define PLAN_LOAD_OPTIONS_VERSION 1
#define PLAN_LOAD_OPTIONS_INIT                                                 \
  { PLAN_LOAD_OPTIONS_VERSION, 0 }
/* Fills *opts with the defaults of options version `version` (what
 * PLAN_LOAD_OPTIONS_INIT gives), for a caller that cannot use the macro (a
 * binding). PLAN_EUSAGE, opts unchanged, for a NULL opts or a version
 * other than 1. */
PLAN_API int plan_load_options_init(plan_load_options *opts,
                                    unsigned int version);

/* plan_load / plan_load_buffer with options (NULL: the defaults). */
PLAN_API int plan_load_ext(plan_plan **out, const char *path,
                           const plan_load_options *opts);
PLAN_API int plan_load_buffer_ext(plan_plan **out, const char *data, size_t len,
                                  const char *name, const char *base_dir,
                                  const plan_load_options *opts);
/* plan_load_ext with another folder for a program by path. A plan may name
 * a program file only inside its own folder tree (symlinks and '..'
 * resolved), so that a plan from elsewhere cannot read any file the caller
 * can; program_root names a folder the program may lie in as well (NULL:
 * the environment variable PLAN_PROGRAM_ROOT when set, else none; the
 * same default holds for every other load function). A path outside both
 * is PLAN_EINVALID, naming the plan file's position. */
PLAN_API int plan_load_root(plan_plan **out, const char *path,
                            const char *program_root,
                            const plan_load_options *opts);
/* The same from memory: a program path is resolved relative to base_dir
 * (NULL: the current directory) and must lie in its tree or program_root's
 * (for text the caller wrote itself, "/" allows any path). */
PLAN_API int plan_load_buffer_root(plan_plan **out, const char *data,
                                   size_t len, const char *name,
                                   const char *base_dir,
                                   const char *program_root,
                                   const plan_load_options *opts);
PLAN_API void plan_free(plan_plan *p);

/* Options for writing. Initialise with PLAN_WRITE_OPTIONS_INIT. */
typedef struct plan_write_options {
  unsigned int version; /* PLAN_WRITE_OPTIONS_VERSION */
  int self_contained;   /* embed the program (and everything replay needs) */
} plan_write_options;
#define PLAN_WRITE_OPTIONS_VERSION 1
#define PLAN_WRITE_OPTIONS_INIT                                                \
  { PLAN_WRITE_OPTIONS_VERSION, 0 }
/* Fills *opts as PLAN_WRITE_OPTIONS_INIT does. PLAN_EUSAGE, opts
 * unchanged, for a NULL opts or a version other than 1. */
PLAN_API int plan_write_options_init(plan_write_options *opts,
                                     unsigned int version);

/* Writes the plan in canonical layout (the `plan fmt` output) into a newly
 * allocated NUL-terminated buffer; the caller frees *out with
 * plan_buffer_free. */
PLAN_API int plan_write_buffer(char **out, size_t *len, const plan_plan *p,
                               const plan_write_options *opts);
/* Writes to `path` atomically, as plan_write_file_atomic does (the same
 * targets refused). Nothing is changed when it fails. */
PLAN_API int plan_save(const plan_plan *p, const char *path,
                       const plan_write_options *opts);

/* Writes `len` bytes atomically to `path`: a temporary file
 * ".NAME.tmp.XXXXXX" beside it (created exclusively), fsync, rename. Only
 * a regular file or a new name is replaced: a symlink is followed to its
 * regular file (the link stays), the file's mode (and owner, where
 * allowed) is kept; a device, FIFO, socket, folder, dangling symlink or a
 * file with other hard links is refused (PLAN_EIO, nothing touched).
 * While the temporary file exists the calling thread holds back SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT, so such a signal never leaves it behind;
 * no handler is installed. A signal sent to the process lands on any
 * thread that does not hold it back: a program with other threads
 * (OpenBLAS starts some) passes these signals to the writing thread, as
 * the plan tool does (its cli/signals.c), or blocks them in all of them. */
PLAN_API int plan_write_file_atomic(const char *path, const void *data,
                                    size_t len);

/* ---- hashes -------------------------------------------------------------- */

typedef enum plan_part {
  PLAN_PART_PLAN = 0, /* decisions + mesh + program hash */
  PLAN_PART_PROGRAM = 1,
  PLAN_PART_MESH = 2,
  PLAN_PART_PROVENANCE = 3
} plan_part;

/* Content hash of one part. PLAN_ENOTFOUND for a part the plan lacks
 * (provenance, or a mesh in a program-only document). */
PLAN_API int plan_hash_part(plan_hash *out, const plan_plan *p, plan_part part);
/* The canonical encoding that is hashed (spec/canonical-form.md), newly
 * allocated; free it with plan_buffer_free. */
PLAN_API int plan_canonical(char **out, size_t *len, const plan_plan *p,
                            plan_part part);

/* ---- upgrade ------------------------------------------------------------- */

#define PLAN_UPGRADE_PARTS 4 /* one entry per plan_part */

/* What plan_upgrade_buffer did. Hashes are indexed by plan_part and valid
 * where has[part] is 1 (the parts the file has). */
typedef struct plan_upgrade_info {
  int from_major, from_minor; /* the file's format version */
  int upgraded;    /* 1: the result is format PLAN_FORMAT_BASE_STRING; 0: the
                      file's major is already current, nothing to write */
  int layout_kept; /* 1: only the version line changed and the record was
                      added (comments and layout kept); 0: the result is
                      in canonical layout */
  int program_by_path;  /* 1: the program is another file, left as it is */
  int program_rehashed; /* 1: that file had been upgraded on its own; the
                           hash the plan records was brought along */
  int has[PLAN_UPGRADE_PARTS];
  plan_hash before[PLAN_UPGRADE_PARTS]; /* the file's hashes */
  plan_hash after[PLAN_UPGRADE_PARTS];  /* the result's hashes */
} plan_upgrade_info;

/* Rewrites a plan or program file of an older format version (0.1, the
 * pre-release form of 1.0) as the current version, into a newly allocated
 * NUL-terminated buffer (*out, *len bytes; the caller frees it with
 * plan_buffer_free).
 * The result records the step in a top-level `x-upgraded-from` key (the old
 * version and the old hash of every part), which no hash covers. Before it
 * returns, the result is read back and checked: with its version string set
 * back to the old one, every part hashes as the file did. A program given by
 * path is another document and keeps its own version (and hash, which the
 * plan records); it is resolved relative to `base_dir`, as plan_load_buffer
 * does. When that program file was itself upgraded first (its hash with
 * the plan's old version is the recorded one), the recorded hash is
 * replaced by its new one and the old hashes are those from before both
 * upgrades. A file already of the current major gives PLAN_OK with *out = NULL
 * and info->upgraded = 0. Fails, with *out = NULL and the last error naming
 * file, line and column, on anything plan_load_buffer refuses (a newer major
 * is PLAN_EVERSION), and with PLAN_EINVALID when the file already has an
 * `x-upgraded-from` key, or when its layout allows no edit in place and the
 * canonical layout would drop entries that name nothing in its program (its
 * validation findings would differ). */
PLAN_API int plan_upgrade_buffer(char **out, size_t *len,
                                 plan_upgrade_info *info, const char *data,
                                 size_t size, const char *name,
                                 const char *base_dir);

/* ---- views --------------------------------------------------------------- */

/* Borrowed: valid while the plan lives. */
PLAN_API const plan_program *plan_get_program(const plan_plan *p);
/* 1 when the file holds a mesh (a plan), 0 for a program-only document. */
PLAN_API int plan_has_mesh(const plan_plan *p);
PLAN_API const char *plan_file(const plan_plan *p);

/* Communication overlap (format 1.1, spec/plan-format.md §4.8): the
 * plan's `overlap` entries in file order. Layout (part of the ABI) as
 * declared; the strings are borrowed from p. */
typedef struct plan_overlap_info {
  const char *select;  /* "input", "param" or "grad_sync" */
  const char *pattern; /* the op (input) or param name or glob */
  int operand;         /* input: the operand, -1 = every one */
  int dim;             /* the dim chunks split, -1 = the first free one */
  int64_t chunks;      /* 1: not decomposed */
  int stream;          /* the communication stream, >= 1 */
  /* "in_place" (start: where lowering puts it; wait: before its first
   * reader), "ready", "after", "before", "end" */
  const char *start, *wait;
  const char *start_op, *wait_op; /* after / before: the op, else NULL */
} plan_overlap_info;

/* The number of overlap entries (0 without the section, or for NULL). */
PLAN_API int plan_overlap_count(const plan_plan *p);
/* Entry i into *out: PLAN_OK, or PLAN_EUSAGE for a NULL argument or an
 * index out of range. */
PLAN_API int plan_overlap_entry(plan_overlap_info *out, const plan_plan *p,
                                int i);

/* Mesh: axes in order (major to minor), sizes, and the physical device of
 * each logical rank (ranks row-major over the axes). -1 / NULL when out of
 * range or the document has no mesh. */
PLAN_API int plan_mesh_axis_count(const plan_plan *p);
PLAN_API const char *plan_mesh_axis_name(const plan_plan *p, int axis);
PLAN_API int64_t plan_mesh_axis_size(const plan_plan *p, int axis);
PLAN_API int64_t plan_mesh_device_count(const plan_plan *p);
PLAN_API int64_t plan_mesh_device(const plan_plan *p, int64_t rank);
/* The hardware profile's name of physical device `device` when the mesh
 * gives each device its own (format 1.1 per-device hardware); NULL without
 * per-device profiles, out of range, or for a profile without a name. */
PLAN_API const char *plan_mesh_device_hardware(const plan_plan *p,
                                               int64_t device);

/* Shard ratio sets (format 1.1, spec/plan-format.md): a placement level
 * whose `ratio` is k > 0 (plan_axis_pl, space.h) cuts its dim into pieces
 * in the proportions of the plan's set k - 1, one weight per index of the
 * set's mesh axis. Layout (part of the ABI) as declared; the weights are
 * borrowed from p. */
typedef struct plan_mesh_ratio_info {
  int axis;               /* the mesh axis the set is for */
  int n;                  /* its weights: the axis size */
  const int64_t *weights; /* n positive weights */
} plan_mesh_ratio_info;

/* The number of ratio sets (0 without any, or for a NULL p). */
PLAN_API int plan_mesh_ratio_count(const plan_plan *p);
/* Set k (0 .. plan_mesh_ratio_count - 1) into *out: PLAN_OK, or
 * PLAN_EUSAGE (*out unchanged) for a NULL argument or k out of range. */
PLAN_API int plan_mesh_ratio(plan_mesh_ratio_info *out, const plan_plan *p,
                             int k);

/* Placements in canonical compact form ("S(0)R", ...), written into buf
 * (NUL-terminated, truncated to size; 128 bytes always suffice).
 * plan_tensor_placement: how an input, param or const is stored (all R when
 * the plan says nothing). plan_op_placement: how op `op` consumes input
 * `slot` (output = 0) or produces output `slot` (output = 1) under its
 * strategy. PLAN_ENOTFOUND when the op has no strategy or an index is out of
 * range. */
PLAN_API int plan_tensor_placement(char *buf, size_t size, const plan_plan *p,
                                   int tensor);
PLAN_API int plan_op_placement(char *buf, size_t size, const plan_plan *p,
                               int op, int output, int slot);

/* An SVG picture of how p lays out the tensor named `tensor` over its
 * mesh: one cell per rank (the mesh's axes 0, 2, ... down, 1, 3, ...
 * across), each drawing the tensor's outline (two of its dims: the sharded
 * ones first) with the block that rank holds filled in and written out as
 * index ranges; ranks holding the same block (replicas) share a colour, and
 * a partial value is hatched. The placement drawn is how the plan stores
 * the tensor (an input, param or const) or how its producing op's strategy
 * gives it (an activation or output). *text (NUL-terminated) is freed with
 * plan_buffer_free; *len unless NULL. What `plan show --svg` writes.
 * PLAN_ENOTFOUND: no such tensor; PLAN_EUSAGE: a NULL argument or a plan
 * without a mesh; PLAN_ELIMIT: a mesh of over 1024 ranks. */
PLAN_API int plan_sharding_svg(char **text, size_t *len, const plan_plan *p,
                               const char *tensor);
/* Pipeline stage of an op; -1 when the plan has no pipeline or the op is in
 * no stage. Number of stages (0 without a pipeline). */
PLAN_API int plan_op_stage(const plan_plan *p, int op);
PLAN_API int plan_stage_count(const plan_plan *p);

/* ---- training --------------------------------------------------------------
 * The `training` section (spec/plan-format.md, "training"): the optimizer
 * a training step runs and its hyperparameters, the steps a verification
 * runs and the dtype policy. */

/* The optimizer, numbered in this order (part of the ABI). */
typedef enum plan_optimizer {
  PLAN_OPT_NONE, /* gradients only */
  PLAN_OPT_SGD,  /* SGD with momentum and weight decay */
  PLAN_OPT_ADAM, /* Adam (AdamW: decoupled weight decay) */
  PLAN_OPT_COUNT
} plan_optimizer;

/* A param's gradient sync (training.grad_sync), numbered in this order
 * (part of the ABI). */
typedef enum plan_grad_sync {
  PLAN_SYNC_AUTO, /* all-reduce where the gradient is partial */
  PLAN_SYNC_ALL_REDUCE,
  PLAN_SYNC_REDUCE_SCATTER, /* ZeRO / FSDP: sharded gradient and state */
  PLAN_SYNC_NONE,           /* user asserts no sync is needed */
  PLAN_SYNC_COUNT
} plan_grad_sync;

/* A plan's training options. Layout (part of the ABI) as declared. */
typedef struct plan_training_info {
  int present;   /* 1: the plan has a `training` section; else 0 and the
                    rest as a plan without one reads (the defaults) */
  int optimizer; /* plan_optimizer */
  double lr, momentum, beta1, beta2, eps, weight_decay;
  int64_t steps; /* optimizer steps a verification runs (default 1) */
  /* the dtype policy: a plan_dtype (ops.h), or -1 for the tensor's own */
  int param_dtype, compute_dtype, grad_dtype, accum_dtype;
  double clip_grad_norm; /* by global norm; 0: off */
  double loss_scale;     /* 1: off */
} plan_training_info;

/* p's training options into *out: PLAN_OK, or PLAN_EUSAGE (*out
 * unchanged) for a NULL argument. A lowered training step's plan
 * (plan_lowered_plan) carries the options of the plan lowered. */
PLAN_API int plan_get_training(plan_training_info *out, const plan_plan *p);

/* ---- provenance ------------------------------------------------------------
 * How the plan was made (spec/plan-format.md, "provenance"): a free
 * mapping, hashed apart from the plan (PLAN_PART_PROVENANCE). Its values
 * travel as trees of plan_provenance_value, a fixed layout that a caller
 * builds in its own memory to set them and gets in one block to read
 * them. */

enum {
  PLAN_VALUE_NULL = 0,
  PLAN_VALUE_BOOL = 1,
  PLAN_VALUE_INT = 2,
  PLAN_VALUE_FLOAT = 3,
  PLAN_VALUE_STRING = 4,
  PLAN_VALUE_SEQ = 5,
  PLAN_VALUE_MAP = 6
};

typedef struct plan_provenance_value {
  int type;           /* PLAN_VALUE_* */
  int boolean;        /* BOOL: 0 or 1 */
  int64_t integer;    /* INT */
  double number;      /* FLOAT */
  const char *string; /* STRING: NUL-terminated */
  int count;          /* SEQ: items; MAP: entries */
  /* SEQ and MAP: count values; MAP: count keys, in order, distinct */
  const struct plan_provenance_value *items;
  const char *const *keys;
} plan_provenance_value;

/* The plan's provenance mapping, copied into *out: one block (the values,
 * keys and strings together) that the caller frees with plan_buffer_free.
 * PLAN_ENOTFOUND (*out NULL) when the plan has none; PLAN_EUSAGE for a
 * NULL argument; PLAN_ENOMEM. */
PLAN_API int plan_get_provenance(plan_provenance_value **out,
                                 const plan_plan *p);
/* Replaces the plan's provenance with a copy of v, a MAP (NULL removes
 * it); the caller's tree is not kept. Map keys are kept in the order
 * given. PLAN_EINVALID for a v that is not a MAP, a type out of range, a
 * negative count, a NULL string or key, or a key twice in one map;
 * PLAN_ELIMIT for values nested over 64 deep; PLAN_EUSAGE for a NULL plan;
 * PLAN_ENOMEM. The plan is unchanged on failure. */
PLAN_API int plan_set_provenance(plan_plan *p, const plan_provenance_value *v);

/* ---- name patterns ------------------------------------------------------- */

/* 1 when `name` matches the glob `pattern` as the plan format's name
 * patterns do (strategies, regions, stages: spec/plan-format.md): '*' any
 * run of characters, dots included; '?' one character; '[abc]', '[a-z]',
 * '[!a]' one character of (or not of) a set; an unclosed '[' is itself.
 * Linear in the lengths times the pattern's stars at worst. 0 otherwise,
 * and for a NULL argument. */
PLAN_API int plan_name_match(const char *pattern, const char *name);
/* 1 when `s` is a pattern (holds '*', '?' or '['), else 0 (also NULL). */
PLAN_API int plan_name_is_pattern(const char *s);

/* ---- validation, diff, drift --------------------------------------------- */

/* Static validation (no numerics): strategies legal under each op's factor
 * rule, shapes and divisibility, partials into non-linear ops, mesh and
 * device order, pipeline stages and schedules, regions, training fields.
 * Always returns PLAN_OK with findings in *out unless an allocation fails;
 * a negative verdict is any finding of severity PLAN_SEV_ERROR. */
PLAN_API int plan_validate(plan_diags **out, const plan_plan *p);

/* Drift report: compares the program the plan was made for (its inline
 * program, or the signatures it recorded) with `edited`. Findings name every
 * op and tensor that changed, appeared or vanished; errors where the plan no
 * longer applies (a named op changed, an op lacks a strategy). */
PLAN_API int plan_drift(plan_diags **out, const plan_plan *p,
                        const plan_program *edited);

/* Semantic diff: ops, tensors, placements, strategies, mesh axes, devices,
 * stages, schedule, training and regions that differ between a and b. No
 * findings means the plans are equal in content (provenance aside). */
PLAN_API int plan_diff(plan_diags **out, const plan_plan *a,
                       const plan_plan *b);

#ifdef __cplusplus
}
#endif
#endif
