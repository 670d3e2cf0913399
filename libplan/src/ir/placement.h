/* Placements: parsing the compact and map spellings, printing the canonical
 * compact form, normalising nesting levels, and the layout of a sharded
 * tensor on a mesh (torch.chunk semantics, nested across axes as DTensor).
 *
 * Compact form: one entry per mesh axis, in mesh order, concatenated:
 *   R            replicate
 *   S(d)         shard tensor dim d (negative d counts from the end)
 *   S(d:k)       shard dim d at nesting level k (0 = major) when several axes
 *                shard the same dim in an order other than the mesh's
 *   P(sum) P(avg) P(max) P(min)   partial; bare P means P(sum)
 * Long spellings are accepted as well: Replicate(), Shard(d), Partial(op),
 * Partial() = P(sum). Whitespace between entries is allowed.
 *
 * Map form (YAML): {dp: S(0), tp: R} with every entry optional (missing axes
 * are R) and an optional `order: {0: [tp, dp]}` stating the nesting order of
 * the axes that shard a dim. */
#ifndef LIBPLAN_PLACEMENT_H
#define LIBPLAN_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* Parses the compact form of a placement over `naxes` mesh axes. Dims are
 * kept as written (possibly negative); levels given as S(d:k) are kept,
 * others set to -1 (resolved by plan_placement_normalize). On error returns
 * PLAN_EINVALID, writes a reason into err and the 0-based byte offset of the
 * problem into *err_off. */
int plan_placement_parse(plan_placement *out, const char *text, size_t len,
                         int naxes, char *err, size_t errsz, size_t *err_off);

/* Resolves negative dims against `rank`, checks 0 <= dim < rank, fills
 * default nesting levels (mesh order) and checks explicit ones form 0..n-1
 * per dim. Returns PLAN_OK or PLAN_EINVALID with a reason. */
int plan_placement_normalize(plan_placement *p, int rank, char *err,
                             size_t errsz);

/* Canonical compact form: "R", "S(1)", "P(sum)" per axis, concatenated; the
 * level is printed (S(d:k)) only when the levels of that dim differ from the
 * mesh order. buf must hold PLAN_PLACEMENT_STRLEN bytes. */
#define PLAN_PLACEMENT_STRLEN (PLAN_MAX_MESH_AXES * 12 + 1)
char *plan_placement_format(const plan_placement *p, char *buf);

/* True when every axis is R. */
bool plan_placement_is_replicated(const plan_placement *p);
/* Semantic equality (after normalisation); an S entry's ratio set counts
 * (sets are interned per plan: one layout, one index). */
bool plan_placement_equal(const plan_placement *a, const plan_placement *b);
/* All-R placement over naxes axes. */
void plan_placement_replicated(plan_placement *out, int naxes);

/* The mesh axes that shard `dim`, major to minor; returns their count. */
int plan_placement_dim_axes(const plan_placement *p, int dim,
                            int axes[PLAN_MAX_MESH_AXES]);

/* Layout: the half-open range [*offset, *offset + *length) of tensor dim
 * `dim` (global size `size`) held by the rank at mesh coordinates `coord`.
 * Chunking nests major to minor: chunk size ceil(n / k) at each level, so
 * trailing ranks may hold less or nothing (5 on dp=2 x tp=2 as S(0)S(0):
 * 2, 1, 1, 1). */
void plan_placement_dim_range(const plan_placement *p, int dim, int64_t size,
                              const int64_t *mesh_sizes, const int64_t *coord,
                              int64_t *offset, int64_t *length);

/* The same with explicit shard ratios (format 1.1): an entry whose `ratio`
 * is k > 0 splits its level by sets[k - 1]'s weights (plan_ratios: piece i
 * of a length-n parent is [floor(n W_i / W), floor(n W_{i+1} / W))); the
 * function above is this with no sets (every entry equal chunks). */
void plan_placement_dim_range_r(const plan_placement *p, int dim, int64_t size,
                                const int64_t *mesh_sizes, const int64_t *coord,
                                const plan_ratios *sets, int nsets,
                                int64_t *offset, int64_t *length);

/* True when every level of sharding of `dim` divides evenly (never for a
 * level with ratios). */
bool plan_placement_dim_even(const plan_placement *p, int dim, int64_t size,
                             const int64_t *mesh_sizes);

#endif
