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

/* Shard ratios (format 1.1): S(d|w0:w1:...) and S(d:k|w0:w1:...) give the
 * ranks along the entry's mesh axis pieces in the proportions of the
 * weights (positive integers, each at most PLAN_RATIO_WEIGHT_MAX). A parse
 * hands each weight list to a sink, which interns it and returns the
 * entry's `ratio` (1..PLAN_MAX_RATIO_SETS), or 0 with a reason in err. */
#define PLAN_RATIO_WEIGHT_MAX ((int64_t)1 << 20)
#define PLAN_RATIO_COUNT_MAX (1 << 20) /* weights in one list, parsed */
typedef struct plan_ratio_sink {
  int (*intern)(void *ctx, int axis, const int64_t *w, int n, char *err,
                size_t errsz);
  void *ctx;
  int axis; /* the mesh axis of the first entry parsed */
} plan_ratio_sink;

/* plan_placement_parse with shard ratios: entry j is mesh axis
 * sink->axis + j. Without a sink (NULL, as plan_placement_parse) a weight
 * list is an error. */
int plan_placement_parse_r(plan_placement *out, const char *text, size_t len,
                           int naxes, const plan_ratio_sink *sink, char *err,
                           size_t errsz, size_t *err_off);

/* The interning the reader uses (placement_ratios.c): weights divided by
 * their gcd; the same axis and the same reduced weights are the same set
 * of m->ratios, a new one is appended (in arena a). Checks the count
 * against the axis size and the sum against the layout's bound; returns
 * the set's number (index + 1) or 0 with a reason in err (an allocation
 * failure also sets the library's last error). */
int plan_ratios_intern(plan_mesh *m, plan_arena *a, int axis, const int64_t *w,
                       int n, char *err, size_t errsz);
/* The number of the set of m that holds these weights (reduced) for axis,
 * or 0 when there is none. */
int plan_ratios_find(const plan_mesh *m, int axis, const int64_t *w, int n);
/* True when two sets give the same layout (same axis, same reduced
 * weights); NULL is the equal-chunk layout, equal only to NULL. */
bool plan_ratios_same(const plan_ratios *a, const plan_ratios *b);

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

/* The canonical form with the weights of shard ratios, S(0|3:2)R (the sets
 * reduced by their gcd, as interned): `sets` are the plan's
 * (plan_mesh.ratios). plan_placement_format, which has no sets, writes an
 * entry with ratios as S(d|#k), k its set's number: for messages only. The
 * text is appended to b (placement_ratios.c). */
void plan_placement_put(plan_buf *b, const plan_placement *p,
                        const plan_ratios *sets, int nsets);
/* The same into buf (NUL-terminated, truncated to size); returns the
 * length the whole text needs, NUL excluded (as snprintf). */
size_t plan_placement_format_r(const plan_placement *p, const plan_ratios *sets,
                               int nsets, char *buf, size_t size);

/* Entry a's text without what follows an S's dim and level: "R", "P(sum)"
 * whole, or "S(d" / "S(d:k)" left open (returns true) for the caller to add
 * its ratio part and ')'. buf must hold PLAN_PLACEMENT_STRLEN bytes. */
bool plan_placement_entry_head(const plan_placement *p, int a, char *buf);

/* True when some S entry of p names a ratio set (a format 1.1 field). */
bool plan_placement_has_ratios(const plan_placement *p);

/* True when every axis is R. */
bool plan_placement_is_replicated(const plan_placement *p);
/* plan_placement_equal, plan_placement_dim_axes and plan_placement_dim_even
 * are public: libplan/space.h. */
/* All-R placement over naxes axes. */
void plan_placement_replicated(plan_placement *out, int naxes);

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

#endif
