/* The op registry: one table with every op kind's name, arity, attribute
 * schema, shape/dtype inference and factor-based sharding rule (Shardy
 * style). Kernels are not here: each
 * runner keeps its own table indexed by plan_op_kind.
 *
 * Adding an op: add the enum value before PLAN_OP_COUNT (libplan/ops.h, the
 * public registry), add its row to the
 * table in ops.c (a static_assert there fails until every table is filled),
 * write its infer and rule functions, and add it to tests/unit/test_ops.c. */
#ifndef LIBPLAN_IR_OPS_H
#define LIBPLAN_IR_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

/* C linkage: the CUDA runner's sources (C++) include this header. */
#ifdef __cplusplus
extern "C" {
#endif

/* plan_op_kind, PLAN_MAX_ATTRS, the attribute schemas (plan_attr_spec),
 * plan_shape, plan_op_infer and plan_op_check_local are public:
 * libplan/ops.h. */

#define PLAN_MAX_OPERANDS 16 /* inputs + outputs of one op */

/* The shape of tensor t (its rank, dims and dtype). */
static inline void plan_shape_of(const plan_tensor *t, plan_shape *s) {
  s->rank = t->rank;
  for (int d = 0; d < t->rank; d++)
    s->dims[d] = t->dims[d];
  s->dtype = t->dtype;
}

/* How partial (P) inputs pass through an op, per mesh axis. */
typedef enum plan_partial_rule {
  PLAN_PARTIAL_NONE,  /* not linear: any P input is illegal (relu, softmax..) */
  PLAN_PARTIAL_PASS,  /* data movement (transpose, reshape, split..): any P
                         passes through unchanged */
  PLAN_PARTIAL_UNARY, /* linear unary (scale, reduce_*): P(sum|avg) passes;
                         scale also passes P(max|min) when factor >= 0 */
  PLAN_PARTIAL_ADDITIVE, /* add, sub, concat: all inputs P with the same
                            sum|avg, or none */
  PLAN_PARTIAL_PRODUCT,  /* matmul, mul: exactly one of inputs 0/1 P(sum|avg),
                            the other R */
  PLAN_PARTIAL_DIVIDEND, /* div: input 0 may be P(sum|avg), input 1 must be R */
  PLAN_PARTIAL_LINEAR,   /* linear: one of x/w P(sum|avg) and the other R;
                            then the bias (if any) must be P of the same kind */
  PLAN_PARTIAL_TABLE,    /* embedding: the table may be P(sum|avg), ids R */
  PLAN_PARTIAL_FIRST,    /* gradient ops: linear in input 0 (the output
                            gradient), which may be P(sum|avg); every other
                            input R */
  PLAN_PARTIAL_SELECT    /* where (cond, a, b): a and b both P of one kind
                            (any: each element is taken from a or from b
                            on every rank alike, so a sum, mean, max or min
                            over ranks commutes with the selection), or
                            neither; cond never P */
} plan_partial_rule;

typedef struct plan_op_info {
  const char *name;
  int min_in, max_in;   /* max -1: up to PLAN_MAX_OPERANDS - 1 */
  int min_out, max_out; /* max -1: decided by attributes (split) */
  const plan_attr_spec *attrs;
  int nattrs;
  plan_partial_rule partial;
  /* Validates attributes against input shapes and fills outputs.
   * nout is the number of outputs the op declares. On a problem writes a
   * one-line reason into err (size errsz) and returns PLAN_EINVALID. */
  int (*infer)(const plan_shape *in, int nin, const plan_attr_val *attrs,
               plan_shape *out, int nout, char *err, size_t errsz);
} plan_op_info;

/* The registry row of a kind; NULL when out of range. */
const plan_op_info *plan_op_info_get(int kind);

/* The vocab-parallel loss: the mesh axes along which op kind `kind`'s
 * logits (input `plan_op_logits_input`, of rank `rank`, in placement pl)
 * are split on the class dim into pa (naxes entries suffice); their count,
 * 0 for an op without logits. Such an op runs all-reduces inside it along
 * each of those axes: PLAN_OP_CLASS_ALL_REDUCES of them. */
int plan_op_logits_input(int kind);
int plan_op_class_axes(int kind, int rank, const plan_placement *pl, int naxes,
                       int *pa);
/* The all-reduces a class-split op runs along each axis that splits the
 * classes: the max, the sum of exponentials and (forward) the label's
 * logit. */
#define PLAN_OP_CLASS_ALL_REDUCES(kind)                                        \
  ((kind) == PLAN_OP_CROSS_ENTROPY        ? 3                                  \
   : (kind) == PLAN_OP_CROSS_ENTROPY_GRAD ? 2                                  \
                                          : 0)
/* Kind from name ("matmul"), -1 when unknown. */
int plan_op_kind_from_name(const char *name);
const char *plan_op_kind_name(int kind);

/* ---- factor-based sharding rules ------------------------------------------
 */

/* plan_factor_kind is public: libplan/ops.h (plan_op_factors). */

#define PLAN_RULE_MAX_FACTORS 32 /* == PLAN_MAX_FACTORS (asserted in ops.c) */
#define PLAN_RULE_MAX_COMPOUND 4

typedef struct plan_factor {
  int64_t size;
  uint8_t kind;   /* plan_factor_kind */
  uint8_t reduce; /* plan_reduce of the result for REDUCTION / MASKED */
  /* A reduction whose result may also be stated as P(avg) when the factor is
   * evenly sharded (reduce_mean). */
  bool avg_if_even;
  /* Short name for messages ("m", "k", "b0", "v"); NUL-terminated. */
  char name[8];
} plan_factor;

typedef struct plan_rule_operand {
  int rank;
  /* Factors of each dim, major to minor. nf[d] == 0: the dim carries no
   * factor (a broadcast size-1 dim); it may not be sharded. A merged dim
   * (reshape) carries several factors; sharding it shards its major factor. */
  int8_t nf[PLAN_MAX_RANK];
  int8_t f[PLAN_MAX_RANK][PLAN_RULE_MAX_COMPOUND];
  /* An input that lacks a reduction factor but is added after the reduction
   * (linear's bias): it must be P along axes that shard that factor. */
  bool additive;
} plan_rule_operand;

typedef struct plan_rule {
  int nfactors;
  plan_factor factors[PLAN_RULE_MAX_FACTORS];
  int nin, nout;
  plan_rule_operand operand[PLAN_MAX_OPERANDS]; /* inputs then outputs */
} plan_rule;

/* Builds the sharding rule of an op instance from its (inferred) shapes.
 * Returns PLAN_OK, or PLAN_EINVALID with a reason in err. */
int plan_op_rule(plan_rule *out, int kind, const plan_shape *in, int nin,
                 const plan_shape *outs, int nout, const plan_attr_val *attrs,
                 char *err, size_t errsz);

/* Given the placements of an op's inputs on a mesh, derives the placements
 * of its outputs under the rule (free factors carry their sharding, sharded
 * reductions give P, partial inputs pass by the kind's partial rule).
 * mesh_sizes[a] is the size of mesh axis a (needed for compound-dim
 * divisibility and even-shard checks). Returns PLAN_OK, or PLAN_EINVALID with
 * the first reason the inputs are illegal, e.g.
 * "input 1 shards dim 0 (factor k) along tp but input 0 does not". */
int plan_rule_infer_out(const plan_rule *rule, int kind,
                        const plan_attr_val *attrs, const plan_placement *in,
                        const int64_t *mesh_sizes,
                        const char *const *axis_names, plan_placement *out,
                        char *err, size_t errsz);

/* Checks a whole strategy: inputs legal and outputs equal to what the rule
 * derives (P(avg) accepted for P(sum) where the factor allows it).
 * Returns PLAN_OK or PLAN_EINVALID with a reason. */
int plan_rule_check(const plan_rule *rule, int kind, const plan_attr_val *attrs,
                    const plan_placement *in, const plan_placement *out,
                    const int64_t *mesh_sizes, const char *const *axis_names,
                    char *err, size_t errsz);

/* The two above with the plan's shard ratio sets (plan_mesh.ratios; NULL
 * for none): an output sharded by a factor takes the ratio set of the
 * inputs sharding it, inputs that shard one factor along one axis with
 * different sets (or one with and one without) are an error ("ratios
 * differ along dp (factor m): input 0 is S(0|3:2), input 1 is S(0)"), a
 * compound dim with ratio pieces must be cut at whole elements of its major
 * factor, and P(avg) of a reduction sharded with ratios is refused (the
 * mean of unequal pieces is not the mean). Without sets, ratio entries are
 * named by index and a compound dim with ratios is refused. */
int plan_rule_infer_out_r(const plan_rule *rule, int kind,
                          const plan_attr_val *attrs, const plan_placement *in,
                          const int64_t *mesh_sizes,
                          const char *const *axis_names,
                          const plan_ratios *sets, int nsets,
                          plan_placement *out, char *err, size_t errsz);
int plan_rule_check_r(const plan_rule *rule, int kind,
                      const plan_attr_val *attrs, const plan_placement *in,
                      const plan_placement *out, const int64_t *mesh_sizes,
                      const char *const *axis_names, const plan_ratios *sets,
                      int nsets, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
