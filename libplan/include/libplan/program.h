/* libplan: programs, the single-device computation a plan distributes.
 *
 * A program is a DAG of named ops over named tensors (spec/plan-format.md,
 * "program"). It can be read from a standalone program file, or taken from a
 * plan. Programs are immutable once loaded. */
#ifndef LIBPLAN_PROGRAM_H
#define LIBPLAN_PROGRAM_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plan_program plan_program;

/* Loads a standalone program file (`libplan: "0.1"` and `program:`) or the
 * program of a plan file. On failure returns a negative status and sets the
 * last error with file, line and column; *out is set to NULL. */
PLAN_API int plan_program_load(plan_program **out, const char *path);
/* Same, from memory; `name` is used in error messages. */
PLAN_API int plan_program_load_buffer(plan_program **out, const char *data,
                                      size_t len, const char *name);
PLAN_API void plan_program_free(plan_program *p);

/* Content hash of the program's canonical form. */
PLAN_API int plan_program_hash(plan_hash *out, const plan_program *p);

/* Read-only views. Index arguments out of range give NULL / -1. Strings are
 * borrowed from the program. Ops are in topological order. */
PLAN_API const char *plan_program_name(const plan_program *p);
PLAN_API int plan_program_op_count(const plan_program *p);
PLAN_API int plan_program_tensor_count(const plan_program *p);
PLAN_API const char *plan_program_op_name(const plan_program *p, int op);
PLAN_API const char *plan_program_op_kind(const plan_program *p, int op);
/* Tensor index of input / output `slot` of an op; -1 when out of range. */
PLAN_API int plan_program_op_input(const plan_program *p, int op, int slot);
PLAN_API int plan_program_op_output(const plan_program *p, int op, int slot);
/* Number of inputs / outputs of an op; -1 when out of range. */
PLAN_API int plan_program_op_input_count(const plan_program *p, int op);
PLAN_API int plan_program_op_output_count(const plan_program *p, int op);
PLAN_API int plan_program_op_find(const plan_program *p, const char *name);
PLAN_API const char *plan_program_tensor_name(const plan_program *p,
                                              int tensor);
PLAN_API int plan_program_tensor_find(const plan_program *p, const char *name);
/* The op that produces a tensor; -1 for a leaf (input, param, const) or
 * an index out of range. */
PLAN_API int plan_program_tensor_producer(const plan_program *p, int tensor);
/* The program's outputs, in order: their count, and the tensor index of
 * output k (-1 when out of range). */
PLAN_API int plan_program_output_count(const plan_program *p);
PLAN_API int plan_program_output(const plan_program *p, int k);
/* Rank of a tensor; dims written into dims[0..rank) when dims != NULL and
 * max >= rank. Returns -1 for a bad index. */
PLAN_API int plan_program_tensor_shape(const plan_program *p, int tensor,
                                       int64_t *dims, int max);
/* "f32", "bf16", ...; "input", "param", "const", "activation", "output". */
PLAN_API const char *plan_program_tensor_dtype(const plan_program *p,
                                               int tensor);
PLAN_API const char *plan_program_tensor_role(const plan_program *p,
                                              int tensor);
/* The loss tensor (program.loss), or -1 when the program has none (also
 * for a NULL p). */
PLAN_API int plan_program_loss(const plan_program *p);

/* ---- views by index ----------------------------------------------------
 * One tensor or op of a program, read as a struct: what a runner or the
 * verifier reads of every element of a run, fetched once. Pointers in the
 * structs (names, dims, operand indices, attribute values) are borrowed
 * from the program and valid while it lives; the structs are plain data
 * the caller owns. Each returns PLAN_OK, or PLAN_EUSAGE (the last error
 * says why, *out unchanged) for a NULL argument or an index out of range. */

/* A tensor's role (spec/plan-format.md, "tensors"), numbered in this order
 * (part of the ABI); the names are those of plan_program_tensor_role. */
typedef enum plan_role {
  PLAN_ROLE_INPUT,
  PLAN_ROLE_PARAM,
  PLAN_ROLE_CONST,
  PLAN_ROLE_ACTIVATION,
  PLAN_ROLE_OUTPUT,
  PLAN_ROLE_COUNT
} plan_role;

/* How a role:const tensor is generated (spec/plan-format.md, "Constant
 * recipes"), numbered in this order (part of the ABI). */
typedef enum plan_recipe {
  PLAN_RECIPE_NONE, /* a const without recipe is generated like an input */
  PLAN_RECIPE_ZEROS,
  PLAN_RECIPE_ONES,
  PLAN_RECIPE_CAUSAL_MASK, /* [.., s, t]: 0 where t <= s, `fill` elsewhere */
  PLAN_RECIPE_ROPE_COS,    /* [s, e]: cos(s * theta^(-2i/E)), i = e mod E/2 */
  PLAN_RECIPE_ROPE_SIN,
  PLAN_RECIPE_COUNT
} plan_recipe;

/* One tensor. Layout (part of the ABI) as declared. */
typedef struct plan_program_tensor_info {
  const char *name;
  int rank;
  const int64_t *dims; /* rank entries (NULL for rank 0) */
  int dtype;           /* plan_dtype (ops.h) */
  int role;            /* plan_role */
  int producer;        /* the op that writes it; -1 for a leaf */
  int producer_slot;   /* which output of that op; -1 for a leaf */
  /* integer inputs: 1 when their values are drawn from
   * [range_lo, range_hi) (x-range), else 0 */
  int has_range;
  int64_t range_lo, range_hi;
  int recipe;          /* plan_recipe; PLAN_RECIPE_NONE but for consts */
  double recipe_theta; /* rope tables: the base (default 10000) */
  double recipe_fill;  /* causal_mask: the masked value (default -1e9) */
} plan_program_tensor_info;

PLAN_API int plan_program_tensor(plan_program_tensor_info *out,
                                 const plan_program *p, int tensor);

struct plan_attr_val;

/* One op. Layout (part of the ABI) as declared. */
typedef struct plan_program_op_info {
  const char *name;
  int kind;       /* plan_op_kind (ops.h) */
  int nin, nout;  /* operands */
  const int *in;  /* nin tensor indices */
  const int *out; /* nout tensor indices */
  /* its attribute values in its kind's schema order (plan_op_attrs, ops.h;
   * defaults filled in); may be NULL for a kind without attributes */
  const struct plan_attr_val *attrs;
} plan_program_op_info;

PLAN_API int plan_program_op(plan_program_op_info *out, const plan_program *p,
                             int op);

/* The dim of tensor `tensor` that a pipeline's microbatches split when it
 * is a leaf (docs/training-and-pipelines.md): its dim named `batch`, else
 * dim 0 of an input. -1 for a param, a scalar, a const without a batch
 * dim, an index out of range or a NULL p. */
PLAN_API int plan_program_tensor_batch_dim(const plan_program *p, int tensor);

/* 64-bit signature hash of an op or tensor (kind/shape/dtype/attributes/
 * input names), as recorded by plans for drift reports. */
PLAN_API uint64_t plan_program_op_signature(const plan_program *p, int op);
PLAN_API uint64_t plan_program_tensor_signature(const plan_program *p,
                                                int tensor);

/* Writes the program as a standalone program document (`libplan:` and
 * `program:`, the layout of `plan fmt`) under the format version of the
 * document it was read from (so it reads back with the same hash; a
 * training program has its forward program's) into a newly allocated,
 * NUL-terminated buffer (*len bytes, unless len is NULL); free it with
 * plan_buffer_free. Returns PLAN_OK, PLAN_ENOMEM or PLAN_EUSAGE. */
PLAN_API int plan_program_write_buffer(char **out, size_t *len,
                                       const plan_program *p);

/* ---- training programs (autodiff) ------------------------------------------
 *
 * plan_program_grad builds the training program of a program with a loss:
 * its ops, then the backward ops (ordinary ops of the registry) that compute
 * the gradient of the loss with respect to every param, named grad/<param>
 * (docs/training-and-pipelines.md, "Autodiff", has the naming scheme and the
 * rule of every op). The forward ops and tensors keep their indices; the
 * outputs are the program's outputs, the loss and the gradients; the loss
 * stays the loss. The seed of the backward pass is a const of ones named
 * grad/<loss>. */

typedef struct plan_grad_options {
  unsigned int version; /* PLAN_GRAD_OPTIONS_VERSION */
  /* nonzero: also the gradients of float inputs (grad/<input>) */
  int inputs;
} plan_grad_options;

#define PLAN_GRAD_OPTIONS_VERSION 1
#define PLAN_GRAD_OPTIONS_INIT                                                 \
  { PLAN_GRAD_OPTIONS_VERSION, 0 }
/* Fills *opts as PLAN_GRAD_OPTIONS_INIT does. PLAN_EUSAGE, opts
 * unchanged, for a NULL opts or a version other than 1. */
PLAN_API int plan_grad_options_init(plan_grad_options *opts,
                                    unsigned int version);

/* The training program of `p` into *out (the caller frees it with
 * plan_program_free); opts NULL: the defaults. Fails with PLAN_EINVALID when
 * p has no loss, when a name the training program needs is taken by p, or
 * when the loss depends on the point at which a gradient op is taken (a
 * second derivative), with the op or tensor's position; PLAN_ENOMEM;
 * PLAN_EUSAGE for a NULL argument or an unknown options version. */
PLAN_API int plan_program_grad(plan_program **out, const plan_program *p,
                               const plan_grad_options *opts);

/* In a training program `train` (plan_program_grad's), the tensor that
 * holds the gradient of its tensor `tensor`: the one named
 * grad/<tensor's name>. Every float param has one, so has every float
 * input when the options asked, and the loss's is the seed of the backward
 * pass; an activation has one when its gradient is a tensor of its own
 * (not one passed through unchanged). The forward tensors keep their
 * indices, so `tensor` may be read off the forward program. Returns the
 * tensor index, or -1 when there is none, for a NULL train or an index out
 * of range; nothing is allocated, no error is set. */
PLAN_API int plan_program_grad_tensor(const plan_program *train, int tensor);

#ifdef __cplusplus
}
#endif
#endif
