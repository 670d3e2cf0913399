/* Unit tests for the canonical form and hashes (canon.c) and the canonical
 * writer (write.c):
 * - texts that mean the same plan (key order, flow or block style,
 *   comments, number and placement spellings, defaults written or left out,
 *   globs or names) hash alike, part by part;
 * - changing one decision changes the hash of the part it belongs to and of
 *   no unrelated part;
 * - a program hashes alike inline, standalone and by path;
 * - write -> load -> write is byte-identical with equal hashes for every
 *   example (plain and self-contained), and x- keys survive it unhashed;
 * - golden canonical encodings and the printed hash format. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "libplan/libplan.h"
#include "read/plan_read.h"

#define NPARTS 4
static const char *const part_names[NPARTS] = {"plan", "program", "mesh",
                                               "provenance"};

typedef struct hashes {
  int rc[NPARTS];
  plan_hash h[NPARTS];
} hashes;

/* ---- helpers ------------------------------------------------------------- */

static plan_plan *load_text(const char *text, const char *base_dir) {
  plan_plan *p = NULL;
  int rc = plan_load_buffer(&p, text, strlen(text), "t.yaml", base_dir);
  if (rc) {
    char buf[1200];
    print_message("load failed: %s\nfor:\n%s\n",
                  plan_error_format(buf, sizeof buf), text);
  }
  assert_int_equal(rc, PLAN_OK);
  return p;
}

static hashes hashes_of(const plan_plan *p) {
  hashes hs;
  for (int k = 0; k < NPARTS; k++) {
    hs.h[k].high = hs.h[k].low = 0;
    hs.rc[k] = plan_hash_part(&hs.h[k], p, (plan_part)k);
  }
  return hs;
}

static hashes hashes_of_text(const char *text) {
  plan_plan *p = load_text(text, NULL);
  hashes hs = hashes_of(p);
  plan_free(p);
  return hs;
}

static void print_canonical_diff(const char *a, const char *b, int part) {
  plan_plan *pa = load_text(a, NULL), *pb = load_text(b, NULL);
  char *ca = NULL, *cb = NULL;
  plan_canonical(&ca, NULL, pa, (plan_part)part);
  plan_canonical(&cb, NULL, pb, (plan_part)part);
  print_message("%s part differs:\n  %s\n  %s\n", part_names[part],
                ca ? ca : "(none)", cb ? cb : "(none)");
  free(ca);
  free(cb);
  plan_free(pa);
  plan_free(pb);
}

/* Every part of `b` hashes as in `a` (both present, or both absent). */
static void assert_same_hashes(const char *a, const char *b) {
  hashes ha = hashes_of_text(a), hb = hashes_of_text(b);
  for (int k = 0; k < NPARTS; k++) {
    bool same =
        ha.rc[k] == hb.rc[k] && (ha.rc[k] || plan_hash_equal(ha.h[k], hb.h[k]));
    if (!same)
      print_canonical_diff(a, b, k);
    assert_int_equal(ha.rc[k], hb.rc[k]);
    if (!ha.rc[k])
      assert_true(plan_hash_equal(ha.h[k], hb.h[k]));
  }
}

/* Replaces the one occurrence of `old` in `base` with `new`; the caller
 * frees the result. */
static char *edit(const char *base, const char *old, const char *new) {
  const char *at = strstr(base, old);
  if (!at)
    print_message("'%s' is not in the text\n", old);
  assert_non_null(at);
  assert_null(strstr(at + 1, old));
  size_t lb = strlen(base), lo = strlen(old), ln = strlen(new);
  char *out = malloc(lb - lo + ln + 1);
  assert_non_null(out);
  memcpy(out, base, (size_t)(at - base));
  memcpy(out + (at - base), new, ln);
  memcpy(out + (at - base) + ln, at + lo, lb - (size_t)(at - base) - lo + 1);
  return out;
}

enum { P_PLAN = 1, P_PROGRAM = 2, P_MESH = 4, P_PROV = 8 };

/* Applies one edit to `base` and checks that exactly the parts in
 * `changed` hash differently. */
static void assert_edit_changes(const char *base, const char *old,
                                const char *new, int changed) {
  char *text = edit(base, old, new);
  hashes ha = hashes_of_text(base), hb = hashes_of_text(text);
  for (int k = 0; k < NPARTS; k++) {
    assert_int_equal(ha.rc[k], hb.rc[k]);
    if (ha.rc[k])
      continue;
    bool differs = !plan_hash_equal(ha.h[k], hb.h[k]);
    bool want = (changed >> k) & 1;
    if (differs != want)
      print_message("edit '%s' -> '%s': %s hash %s\n", old, new, part_names[k],
                    differs ? "changed" : "did not change");
    assert_int_equal(differs, want);
  }
  free(text);
}

/* ---- plans used throughout
 * --------------------------------------------------- */

/* The reference text: block and flow mixed, comments, defaults omitted. */
static const char base_a[] =
    "libplan: \"0.1\"\n"
    "# a small training plan\n"
    "program:\n"
    "  name: net\n"
    "  tensors:\n"
    "    x: {shape: [batch=8, 16]}\n"
    "    w: {shape: [16, 32], role: param}\n"
    "    lab: {shape: [8], dtype: i32, range: [0, 32]}\n"
    "  ops:\n"
    "    - {name: l0.fc, op: matmul, in: [x, w], out: h}\n"
    "    - {name: l0.act, op: gelu, in: [h], out: a}\n"
    "    - {name: l0.act2, op: tanh, in: [a], out: a2}\n"
    "    - {name: l0.sm, op: softmax, in: [a2], out: s}\n"
    "    - {name: l0.ce, op: cross_entropy, in: [s, lab], out: L}\n"
    "  loss: L\n"
    "mesh:\n"
    "  axes: [dp=2, tp=2]\n"
    "placements:\n"
    "  x: S(0)R\n"
    "  w: RS(1)\n"
    "  lab: S(0)R\n"
    "strategies:\n"
    "  l0.fc: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"
    "  l0.act: {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  l0.act2: {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  l0.sm: {in: [S(0)R], out: S(0)R}\n"
    "  l0.ce: {in: [S(0)R, S(0)R], out: P(sum)R}\n"
    "training:\n"
    "  optimizer: {kind: adam, lr: 1e-5}\n"
    "  clip_grad_norm: 1\n"
    "  grad_sync: {w: all_reduce}\n"
    "regions:\n"
    "  - {name: pin, kind: pinned, ops: [l0.act]}\n"
    "provenance: {strategy: hand, seed: 7, cost: 1.5e-3, tags: [a, b]}\n";

/* The same plan: keys reshuffled at every level, ops in another
 * topological order, flow style, other number and placement spellings,
 * defaults written out, globs, an identity device list, inferred tensors
 * declared, x- keys. */
static const char variant_a1[] =
    "provenance: {tags: [a, b], cost: 0.0015, seed: 7, strategy: hand, x-note: "
    "1}\n"
    "regions: [{ops: l0.act, kind: pinned, name: pin}]\n"
    "training: {grad_sync: {\"w*\": all_reduce}, steps: 1, loss_scale: 1.0,"
    " clip_grad_norm: 1.0, optimizer: {lr: 0.00001, kind: adam, beta1: 0.9,"
    " beta2: 0.999, eps: 1.0e-08}}\n"
    "strategies: {l0.ce: {out: Partial() R, in: [Shard(0) Replicate(), "
    "S(-1)R]},"
    " \"l0.act*\": {out: [S(0)S(1)], in: S(0)S(-1)},"
    " l0.sm: {out: S(0)R, in: [{dp: S(0)}]},"
    " l0.fc: {out: {tp: S(1), dp: S(0)}, in: [S(-2)R, R S(1)]}}\n"
    "placements: {lab: {dp: S(-1), tp: R}, w: R Shard(1), x: {dp: S(0)}}\n"
    "mesh: {devices: [[0, 1], [2, 3]], axes: [dp=2, tp=2]}\n"
    "program:\n"
    "  loss: L\n"
    "  outputs: [L]\n"
    "  ops:\n"
    "    - {out: a, in: h, op: gelu, name: l0.act, attrs: {approximate: "
    "none}}\n"
    "    - {out: h, in: [x, w], op: matmul, name: l0.fc, attrs: {transpose_a: "
    "false}}\n"
    "    - {name: l0.act2, op: tanh, in: [a], out: [a2]}\n"
    "    - {name: l0.ce, op: cross_entropy, in: [s, lab], out: L}\n"
    "    - {name: l0.sm, op: softmax, in: [a2], out: s, attrs: {dim: 1}}\n"
    "  tensors:\n"
    "    lab: {range: [0, 32], dtype: i32, shape: [8], role: input}\n"
    "    w: {role: param, dtype: f32, shape: [16, 32]}\n"
    "    x: {role: input, shape: [batch=8, 16], dtype: f32}\n"
    "    h: {shape: [8, 32], dtype: f32}\n"
    "  name: net\n"
    "  x-prog: [1]\n"
    "libplan: 0.1\n"
    "x-top: {anything: [1, 2]}\n";

/* The same plan in block style with comments everywhere, the version first
 * again, and yet other spellings. */
static const char variant_a2[] =
    "# leading comment\n"
    "libplan: '0.1'  # the version\n"
    "\n"
    "program:\n"
    "  name: \"net\"\n"
    "  tensors:\n"
    "    x:\n"
    "      shape:\n"
    "        - batch=8   # named dim\n"
    "        - 16\n"
    "    w:\n"
    "      shape: [16, 32]\n"
    "      role: param\n"
    "    lab:\n"
    "      shape: [8]\n"
    "      dtype: i32\n"
    "      range: [0, 32]\n"
    "  ops:\n"
    "    - name: l0.fc\n"
    "      op: matmul\n"
    "      in: [x, w]\n"
    "      out: h\n"
    "    - name: l0.act\n"
    "      op: gelu\n"
    "      in: [h]\n"
    "      out: a\n"
    "    - {name: l0.act2, op: tanh, in: [a], out: a2}\n"
    "    - name: l0.sm\n"
    "      op: softmax\n"
    "      in: [a2]\n"
    "      out: s\n"
    "      attrs:\n"
    "        dim: -1\n"
    "    - name: l0.ce\n"
    "      op: cross_entropy\n"
    "      in: [s, lab]\n"
    "      out: L\n"
    "  loss: L\n"
    "mesh:\n"
    "  axes:\n"
    "    - dp=2\n"
    "    - tp=2\n"
    "  devices: iota   # the default\n"
    "placements:\n"
    "  x: \"S(0) R\"\n"
    "  w: {dp: R, tp: S(1)}\n"
    "  lab: Shard(0)R\n"
    "strategies:\n"
    "  \"l0.fc\":\n"
    "    in:\n"
    "      - S(0)R\n"
    "      - RS(1)\n"
    "    out: S(0)S(1)\n"
    "  \"l0.act*\": {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  l0.sm: {in: [S(0)R], out: S(0)R}\n"
    "  l0.ce: {in: [S(0)R, S(0)R], out: PR}\n"
    "training:\n"
    "  clip_grad_norm: 1.0e+0\n"
    "  optimizer:\n"
    "    kind: adam\n"
    "    lr: 1E-5\n"
    "  grad_sync:\n"
    "    w: all_reduce\n"
    "regions:\n"
    "  - name: pin\n"
    "    kind: pinned\n"
    "    ops: [\"l0.act\"]\n"
    "provenance:\n"
    "  cost: 1.50e-3\n"
    "  seed: 7\n"
    "  strategy: 'hand'\n"
    "  tags:\n"
    "    - a\n"
    "    - b\n";

/* A pipeline plan and its variants. */
static const char base_b[] = "libplan: \"0.1\"\n"
                             "program:\n"
                             "  tensors:\n"
                             "    x: {shape: [8, 16]}\n"
                             "  ops:\n"
                             "    - {name: s0.a, op: relu, in: [x], out: a}\n"
                             "    - {name: s0.b, op: exp, in: [a], out: b}\n"
                             "    - {name: s1.c, op: tanh, in: [b], out: c}\n"
                             "mesh:\n"
                             "  axes: [pp=2, dp=2]\n"
                             "  submeshes: {first: {pp: 0}, second: {pp: 1}}\n"
                             "strategies:\n"
                             "  s0.a: {in: [RS(0)], out: RS(0)}\n"
                             "  s0.b: {in: [RS(0)], out: RS(0)}\n"
                             "  s1.c: {in: [RS(0)], out: RS(0)}\n"
                             "pipeline:\n"
                             "  axis: pp\n"
                             "  stages:\n"
                             "    - {ops: [s0.a, s0.b]}\n"
                             "    - {ops: [s1.c]}\n";

static const char variant_b1[] =
    "libplan: \"0.1\"\n"
    "pipeline:\n"
    "  stages: [{ops: \"s0.*\"}, {ops: [\"s1.?\"]}]\n"
    "  schedule: 1f1b\n"
    "  microbatches: 1\n"
    "  axis: pp\n"
    "strategies:\n"
    "  \"*\": {in: [R Shard(0)], out: [Replicate() S(-2)]}\n"
    "mesh:\n"
    "  submeshes: {second: {pp: 1}, first: {pp: 0}}\n"
    "  devices: {iota: [4]}\n"
    "  axes: [pp=2, dp=2]\n"
    "program:\n"
    "  ops:\n"
    "    - {name: s1.c, op: tanh, in: [b], out: c}\n"
    "    - {name: s0.b, op: exp, in: [a], out: b}\n"
    "    - {name: s0.a, op: relu, in: [x], out: a}\n"
    "  tensors:\n"
    "    x: {shape: [8, 16], dtype: f32, role: input}\n";

/* ---- (1) invariance
 * ------------------------------------------------------------ */

static void test_invariance_plan_a(void **state) {
  (void)state;
  assert_same_hashes(base_a, variant_a1);
  assert_same_hashes(base_a, variant_a2);
  /* and the parts exist */
  hashes h = hashes_of_text(base_a);
  for (int k = 0; k < NPARTS; k++)
    assert_int_equal(h.rc[k], PLAN_OK);
}

static void test_invariance_numbers(void **state) {
  (void)state;
  static const char *const lrs[] = {"1e-5",   "0.00001", "1.0e-05", "1E-5",
                                    "+1e-05", "10e-6",   "0.1e-4",  "\"1e-5\""};
  char old[] = "lr: 1e-5";
  for (size_t i = 0; i < sizeof lrs / sizeof *lrs; i++) {
    char new[64];
    snprintf(new, sizeof new, "lr: %s", lrs[i]);
    char *t = edit(base_a, old, new);
    assert_same_hashes(base_a, t);
    free(t);
  }
  /* integers where a float is wanted */
  char *t = edit(base_a, "clip_grad_norm: 1\n", "clip_grad_norm: 1.000\n");
  assert_same_hashes(base_a, t);
  free(t);
  /* provenance numbers keep their value whatever the spelling; an integral
   * float is the same number as the integer (the writer prints 7.0 as 7,
   * so anything else would change the hash on a round trip) */
  t = edit(base_a, "cost: 1.5e-3", "cost: 0.00150");
  assert_same_hashes(base_a, t);
  free(t);
  t = edit(base_a, "seed: 7", "seed: 7.0");
  assert_same_hashes(base_a, t);
  free(t);
  /* zero has one spelling whatever its sign */
  char *z0 = edit(base_a, "clip_grad_norm: 1\n", "clip_grad_norm: 0\n");
  char *z1 = edit(base_a, "clip_grad_norm: 1\n", "clip_grad_norm: -0.0\n");
  assert_same_hashes(z0, z1);
  free(z0);
  free(z1);
}

static void test_invariance_placements(void **state) {
  (void)state;
  static const struct {
    const char *old, *new;
  } eq[] = {
      {"  w: RS(1)\n", "  w: RS(-1)\n"},
      {"  w: RS(1)\n", "  w: Replicate()Shard(1)\n"},
      {"  w: RS(1)\n", "  w: \" R  S( 1 ) \"\n"},
      {"  w: RS(1)\n", "  w: {tp: S(1)}\n"},
      {"  w: RS(1)\n", "  w: {tp: S(-1), dp: R}\n"},
      {"  w: RS(1)\n", "  w: RS(1:0)\n"},
      {"out: P(sum)R}", "out: PR}"},
      {"out: P(sum)R}", "out: Partial()R}"},
      {"out: P(sum)R}", "out: Partial(sum) Replicate()}"},
      {"out: P(sum)R}", "out: {dp: P}}"},
      {"  x: S(0)R\n", "  x: Shard(0)R\n"},
      {"  x: S(0)R\n", "  x: S(-2)R\n"},
      {"  x: S(0)R\n", "  x: {dp: S(0), order: {0: [dp]}}\n"},
  };
  for (size_t i = 0; i < sizeof eq / sizeof *eq; i++) {
    char *t = edit(base_a, eq[i].old, eq[i].new);
    assert_same_hashes(base_a, t);
    free(t);
  }
  /* Nesting order spelled as levels or as `order:` */
  char *t1 = edit(base_a, "  w: RS(1)\n", "  w: S(1:1)S(1:0)\n");
  char *t2 = edit(base_a, "  w: RS(1)\n",
                  "  w: {dp: S(1), tp: S(1), order: {1: [tp, dp]}}\n");
  char *t3 = edit(base_a, "  w: RS(1)\n", "  w: S(1)S(1)\n");
  char *t4 = edit(base_a, "  w: RS(1)\n", "  w: S(1:0)S(1:1)\n");
  assert_same_hashes(t1, t2);
  assert_same_hashes(t3, t4);
  /* ... and the order is a decision */
  hashes h1 = hashes_of_text(t1), h3 = hashes_of_text(t3);
  assert_false(plan_hash_equal(h1.h[PLAN_PART_PLAN], h3.h[PLAN_PART_PLAN]));
  free(t2);
  free(t3);
  free(t4);
  /* `order:` names a dim as the tensor's dims are counted, so S(-1) on a
   * rank-2 tensor is dim 1 there too */
  t2 = edit(base_a, "  w: RS(1)\n",
            "  w: {dp: S(1), tp: S(-1), order: {1: [tp, dp]}}\n");
  assert_same_hashes(t1, t2);
  free(t2);
  t2 = edit(base_a, "  w: RS(1)\n",
            "  w: {dp: S(-1), tp: S(-1), order: {-1: [tp, dp]}}\n");
  assert_same_hashes(t1, t2);
  free(t2);
  free(t1);
}

static void test_invariance_defaults(void **state) {
  (void)state;
  static const struct {
    const char *old, *new;
  } eq[] = {
      /* program */
      {"    x: {shape: [batch=8, 16]}\n",
       "    x: {shape: [batch=8, 16], dtype: f32, role: input}\n"},
      {"  loss: L\n", "  loss: L\n  outputs: [L]\n"},
      {"op: gelu, in: [h], out: a}",
       "op: gelu, in: [h], out: a, attrs: {approximate: none}}"},
      {"op: softmax, in: [a2], out: s}",
       "op: softmax, in: [a2], out: s, attrs: {dim: -1}}"},
      {"op: softmax, in: [a2], out: s}",
       "op: softmax, in: [a2], out: s, attrs: {dim: 1}}"},
      {"in: [x, w], out: h}",
       "in: [x, w], out: h, attrs: {transpose_a: false, transpose_b: false}}"},
      {"in: [x, w], out: h}", "in: [x, w], out: [h]}"},
      {"op: tanh, in: [a], out: a2}", "op: tanh, in: a, out: a2}"},
      /* mesh */
      {"  axes: [dp=2, tp=2]\n", "  axes: [dp=2, tp=2]\n  devices: iota\n"},
      {"  axes: [dp=2, tp=2]\n",
       "  axes: [dp=2, tp=2]\n  devices: [0, 1, 2, 3]\n"},
      {"  axes: [dp=2, tp=2]\n",
       "  axes: [dp=2, tp=2]\n  devices: [[0, 1], [2, 3]]\n"},
      {"  axes: [dp=2, tp=2]\n",
       "  axes: [dp=2, tp=2]\n  devices: {iota: [2, 2]}\n"},
      {"  axes: [dp=2, tp=2]\n",
       "  axes: [dp=2, tp=2]\n  devices: {iota: [2, 2], transpose: [0, 1]}\n"},
      /* decisions: all-R placements and output placements say nothing */
      {"regions:\n", "outputs:\n  L: RR\nregions:\n"},
      /* training */
      {"  clip_grad_norm: 1\n",
       "  clip_grad_norm: 1\n  steps: 1\n  loss_scale: 1\n"},
      {"{kind: adam, lr: 1e-5}", "{kind: adam, lr: 1e-5, beta1: 0.9, beta2: "
                                 "0.999, eps: 1e-8, weight_decay: 0}"},
  };
  for (size_t i = 0; i < sizeof eq / sizeof *eq; i++) {
    char *t = edit(base_a, eq[i].old, eq[i].new);
    assert_same_hashes(base_a, t);
    free(t);
  }
  /* an all-R placement of a leaf is the default storage */
  char *t =
      edit(base_b, "strategies:\n", "placements:\n  x: RR\nstrategies:\n");
  assert_same_hashes(base_b, t);
  free(t);
  t = edit(base_b, "strategies:\n", "placements: {x: {pp: R}}\nstrategies:\n");
  assert_same_hashes(base_b, t);
  free(t);
  t = edit(base_b, "strategies:\n",
           "placements: {}\noutputs: {}\nregions: []\nstrategies:\n");
  assert_same_hashes(base_b, t);
  free(t);
}

static void test_invariance_pipeline(void **state) {
  (void)state;
  assert_same_hashes(base_b, variant_b1);
  /* submesh stages: a stage's submesh named, or listed in another order */
  char *t1 = edit(
      base_b,
      "  axis: pp\n  stages:\n    - {ops: [s0.a, s0.b]}\n    - {ops: [s1.c]}\n",
      "  stages:\n    - {ops: [s0.a, s0.b], submesh: first}\n    - {ops: "
      "[s1.c], submesh: second}\n");
  char *t2 = edit(
      base_b,
      "  axis: pp\n  stages:\n    - {ops: [s0.a, s0.b]}\n    - {ops: [s1.c]}\n",
      "  stages:\n    - {submesh: first, ops: [s0.b, s0.a]}\n    - {submesh: "
      "second, ops: \"s1.*\"}\n");
  assert_same_hashes(t1, t2);
  free(t1);
  free(t2);
  /* an explicit grid: rows as strings or lists, schedule: explicit or not */
  const char *grid_old = "  axis: pp\n";
  char *g1 =
      edit(base_b, grid_old,
           "  axis: pp\n  microbatches: 2\n"
           "  grid:\n    - \"0F0 0F1 0B0 0B1\"\n    - \"1F0 1B0 1F1 1B1\"\n");
  char *g2 = edit(base_b, grid_old,
                  "  axis: pp\n  microbatches: 2\n  schedule: explicit\n"
                  "  grid: [[0F0, 0F1, 0B0, 0B1], [1F0, 1B0, 1F1, 1B1]]\n");
  char *g3 = edit(
      base_b, grid_old,
      "  axis: pp\n  microbatches: 2\n"
      "  grid:\n    - \" 0F0  0F1 0B0 0B1 \"\n    - [1F0, 1B0, 1F1, 1B1]\n");
  char *g4 =
      edit(base_b, grid_old,
           "  axis: pp\n  microbatches: 2\n"
           "  grid:\n    - \"0F0 0B0 0F1 0B1\"\n    - \"1F0 1B0 1F1 1B1\"\n");
  assert_same_hashes(g1, g2);
  assert_same_hashes(g1, g3);
  /* the order of actions is a decision */
  hashes h1 = hashes_of_text(g1), h4 = hashes_of_text(g4);
  assert_false(plan_hash_equal(h1.h[PLAN_PART_PLAN], h4.h[PLAN_PART_PLAN]));
  free(g1);
  free(g2);
  free(g3);
  free(g4);
}

/* ---- (2) sensitivity
 * -------------------------------------------------------------- */

static void test_sensitivity(void **state) {
  (void)state;
  const char *b = base_a;
  /* decisions: the plan hash only */
  assert_edit_changes(b, "  w: RS(1)\n", "  w: RR\n", P_PLAN);
  assert_edit_changes(b, "  w: RS(1)\n", "  w: S(1)R\n", P_PLAN);
  assert_edit_changes(b, "  x: S(0)R\n", "  x: S(1)R\n", P_PLAN);
  assert_edit_changes(b, "out: P(sum)R}", "out: P(avg)R}", P_PLAN);
  assert_edit_changes(b, "l0.sm: {in: [S(0)R], out: S(0)R}",
                      "l0.sm: {in: [RR], out: RR}", P_PLAN);
  assert_edit_changes(b, "lr: 1e-5", "lr: 2e-5", P_PLAN);
  assert_edit_changes(b, "{kind: adam, lr: 1e-5}", "{kind: sgd, lr: 1e-5}",
                      P_PLAN);
  assert_edit_changes(b, "  clip_grad_norm: 1\n", "", P_PLAN);
  assert_edit_changes(b, "{w: all_reduce}", "{w: reduce_scatter}", P_PLAN);
  assert_edit_changes(b, "kind: pinned, ops: [l0.act]",
                      "kind: pinned, ops: [l0.act2]", P_PLAN);
  assert_edit_changes(b, "{name: pin,", "{name: pin2,", P_PLAN);
  assert_edit_changes(
      b, "regions:\n  - {name: pin, kind: pinned, ops: [l0.act]}\n", "",
      P_PLAN);
  assert_edit_changes(b, "regions:\n", "outputs:\n  L: RP(sum)\nregions:\n",
                      P_PLAN);
  /* the mesh: mesh and plan */
  assert_edit_changes(b, "axes: [dp=2, tp=2]", "axes: [dp=4, tp=2]",
                      P_MESH | P_PLAN);
  assert_edit_changes(b, "axes: [dp=2, tp=2]", "axes: [data=2, tp=2]",
                      P_MESH | P_PLAN);
  assert_edit_changes(b, "  axes: [dp=2, tp=2]\n",
                      "  axes: [dp=2, tp=2]\n  devices: [1, 0, 2, 3]\n",
                      P_MESH | P_PLAN);
  assert_edit_changes(
      b, "  axes: [dp=2, tp=2]\n",
      "  axes: [dp=2, tp=2]\n  devices: {iota: [2, 2], transpose: [1, 0]}\n",
      P_MESH | P_PLAN);
  assert_edit_changes(b, "  axes: [dp=2, tp=2]\n",
                      "  axes: [dp=2, tp=2]\n  devices_per_host: 2\n",
                      P_MESH | P_PLAN);
  assert_edit_changes(b, "  axes: [dp=2, tp=2]\n",
                      "  axes: [dp=2, tp=2]\n  hardware: {memory: 8e10}\n",
                      P_MESH | P_PLAN);
  assert_edit_changes(b, "  axes: [dp=2, tp=2]\n",
                      "  axes: [dp=2, tp=2]\n  submeshes: {half: {dp: 0}}\n",
                      P_MESH | P_PLAN);
  /* the program: program and plan (the plan covers the program hash) */
  assert_edit_changes(b, "op: gelu, in: [h], out: a}",
                      "op: gelu, in: [h], out: a, attrs: {approximate: tanh}}",
                      P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "batch=8", "b=8", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "batch=8", "8", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "dtype: i32", "dtype: i64", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "range: [0, 32]", "range: [0, 31]",
                      P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "w: {shape: [16, 32], role: param}",
                      "w: {shape: [16, 32], role: const}", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "  name: net\n", "  name: net2\n", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "op: tanh", "op: exp", P_PROGRAM | P_PLAN);
  assert_edit_changes(b, "  loss: L\n", "", P_PROGRAM | P_PLAN);
  /* provenance alone */
  assert_edit_changes(b, "seed: 7", "seed: 8", P_PROV);
  assert_edit_changes(b, "tags: [a, b]", "tags: [b, a]", P_PROV);
  assert_edit_changes(b, "seed: 7", "seed: \"7\"", P_PROV);
  assert_edit_changes(b, "strategy: hand",
                      "strategy: hand, verdict: {ok: true}", P_PROV);
  /* x- keys and comments: nothing */
  assert_edit_changes(b, "mesh:\n", "x-later: 1\nmesh:\n", 0);
  assert_edit_changes(b, "  axes: [dp=2, tp=2]\n",
                      "  axes: [dp=2, tp=2]  # 2 x 2\n  x-note: {a: 1}\n", 0);
  assert_edit_changes(b, "seed: 7", "seed: 7, x-run: 3", 0);
  /* the format version is in every part: a file re-saved as 1.0 (or any
   * other version) has new hashes */
  assert_edit_changes(b, "libplan: \"0.1\"", "libplan: \"1.0\"",
                      P_PLAN | P_PROGRAM | P_MESH | P_PROV);
  assert_edit_changes(b, "libplan: \"0.1\"", "libplan: \"1.1\"",
                      P_PLAN | P_PROGRAM | P_MESH | P_PROV);

  /* pipeline decisions */
  assert_edit_changes(
      base_b, "    - {ops: [s0.a, s0.b]}\n    - {ops: [s1.c]}\n",
      "    - {ops: [s0.a]}\n    - {ops: [s0.b, s1.c]}\n", P_PLAN);
  assert_edit_changes(base_b, "  axis: pp\n", "  axis: pp\n  microbatches: 2\n",
                      P_PLAN);
  assert_edit_changes(base_b, "  axis: pp\n", "  axis: pp\n  schedule: gpipe\n",
                      P_PLAN);
  assert_edit_changes(
      base_b, "  axis: pp\n  stages:\n    - {ops: [s0.a, s0.b]}\n",
      "  stages:\n    - {ops: [s0.a, s0.b], submesh: first}\n", P_PLAN);
}

/* ---- (3) a program inline, standalone and by path
 * ------------------------------------ */

static char tmpdir[64];

static int setup_tmp(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/libplan-canon-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

/* The program section of base_a as a standalone document. */
static char *program_document(void) {
  const char *start = strstr(base_a, "program:\n");
  const char *end = strstr(base_a, "mesh:\n");
  size_t n = (size_t)(end - start);
  static const char hdr[] = "libplan: \"0.1\"\n";
  char *doc = malloc(sizeof hdr + n);
  assert_non_null(doc);
  memcpy(doc, hdr, sizeof hdr - 1);
  memcpy(doc + sizeof hdr - 1, start, n);
  doc[sizeof hdr - 1 + n] = 0;
  return doc;
}

static void test_program_three_ways(void **state) {
  (void)state;
  plan_plan *inline_plan = load_text(base_a, NULL);
  plan_hash h_inline, h_plan_inline;
  assert_int_equal(plan_hash_part(&h_inline, inline_plan, PLAN_PART_PROGRAM),
                   PLAN_OK);
  assert_int_equal(plan_hash_part(&h_plan_inline, inline_plan, PLAN_PART_PLAN),
                   PLAN_OK);
  /* the program's own hash is the part hash */
  plan_hash h_view;
  assert_int_equal(plan_program_hash(&h_view, plan_get_program(inline_plan)),
                   PLAN_OK);
  assert_true(plan_hash_equal(h_inline, h_view));

  /* standalone, through both loaders */
  char *doc = program_document();
  plan_program *g = NULL;
  assert_int_equal(plan_program_load_buffer(&g, doc, strlen(doc), "prog.yaml"),
                   PLAN_OK);
  plan_hash h_standalone;
  assert_int_equal(plan_program_hash(&h_standalone, g), PLAN_OK);
  assert_true(plan_hash_equal(h_inline, h_standalone));
  plan_program_free(g);
  plan_plan *only = load_text(doc, NULL);
  plan_hash h_only;
  assert_int_equal(plan_hash_part(&h_only, only, PLAN_PART_PROGRAM), PLAN_OK);
  assert_true(plan_hash_equal(h_inline, h_only));
  plan_free(only);

  /* by path: the program and the plan hash alike */
  char path[256];
  snprintf(path, sizeof path, "%s/net.yaml", tmpdir);
  write_file(path, doc);
  const char *mesh = strstr(base_a, "mesh:\n");
  size_t need = strlen(mesh) + 256;
  char *by_path = malloc(need);
  assert_non_null(by_path);
  snprintf(by_path, need, "libplan: \"0.1\"\nprogram:\n  path: net.yaml\n%s",
           mesh);
  plan_plan *ref = load_text(by_path, tmpdir);
  assert_false(ref->program_inline);
  hashes hr = hashes_of(ref), hi = hashes_of(inline_plan);
  for (int k = 0; k < NPARTS; k++) {
    assert_int_equal(hr.rc[k], hi.rc[k]);
    assert_true(plan_hash_equal(hr.h[k], hi.h[k]));
  }
  /* the recorded program hash of a written by-path plan is the program's */
  char *text = NULL;
  assert_int_equal(plan_write_buffer(&text, NULL, ref, NULL), PLAN_OK);
  char hb[PLAN_HASH_STRLEN], want[64];
  snprintf(want, sizeof want, "hash: \"%s\"", plan_hash_format(h_inline, hb));
  assert_non_null(strstr(text, want));
  assert_non_null(strstr(text, "path: net.yaml"));
  free(text);
  plan_free(ref);
  free(by_path);
  free(doc);
  plan_free(inline_plan);
}

/* ---- (4) round trips
 * ----------------------------------------------------------------- */

static char *write_plan(const plan_plan *p, int self_contained) {
  plan_write_options o = PLAN_WRITE_OPTIONS_INIT;
  o.self_contained = self_contained;
  char *text = NULL;
  size_t len = 0;
  int rc = plan_write_buffer(&text, &len, p, &o);
  assert_int_equal(rc, PLAN_OK);
  assert_non_null(text);
  assert_int_equal(strlen(text), len);
  return text;
}

static void assert_hashes_equal(const hashes *a, const hashes *b,
                                const char *what) {
  for (int k = 0; k < NPARTS; k++) {
    bool same =
        a->rc[k] == b->rc[k] && (a->rc[k] || plan_hash_equal(a->h[k], b->h[k]));
    if (!same)
      print_message("%s: %s hash differs\n", what, part_names[k]);
    assert_true(same);
  }
}

/* write -> load -> write gives the same bytes and the same hashes. */
static void round_trip(const plan_plan *p, const char *name,
                       const char *base_dir, int self_contained) {
  hashes h0 = hashes_of(p);
  char *w1 = write_plan(p, self_contained);
  plan_plan *q = NULL;
  int rc = plan_load_buffer(&q, w1, strlen(w1), name, base_dir);
  if (rc) {
    char buf[1200];
    print_message("%s: reloading the written plan failed: %s\n%s\n", name,
                  plan_error_format(buf, sizeof buf), w1);
  }
  assert_int_equal(rc, PLAN_OK);
  if (self_contained)
    assert_true(q->program_inline);
  hashes h1 = hashes_of(q);
  assert_hashes_equal(&h0, &h1, name);
  char *w2 = write_plan(q, self_contained);
  if (strcmp(w1, w2))
    print_message("%s: second write differs:\n--- first\n%s\n--- second\n%s\n",
                  name, w1, w2);
  assert_string_equal(w1, w2);
  /* a written plan validates as the original did */
  plan_diags *d1 = NULL, *d2 = NULL;
  assert_int_equal(plan_validate(&d1, p), PLAN_OK);
  assert_int_equal(plan_validate(&d2, q), PLAN_OK);
  assert_int_equal(plan_diags_count_at_least(d1, PLAN_SEV_ERROR),
                   plan_diags_count_at_least(d2, PLAN_SEV_ERROR));
  plan_diags_free(d1);
  plan_diags_free(d2);
  free(w1);
  free(w2);
  plan_free(q);
}

static void test_round_trip_examples(void **state) {
  (void)state;
  glob_t g;
  int grc = glob("examples/*.yaml", 0, NULL, &g);
  if (grc)
    print_message("no examples/*.yaml: run the test from the repo root\n");
  assert_int_equal(grc, 0);
  assert_true(g.gl_pathc >= 1);
  for (size_t i = 0; i < g.gl_pathc; i++) {
    const char *path = g.gl_pathv[i];
    plan_plan *p = NULL;
    int rc = plan_load(&p, path);
    if (rc) {
      char buf[1200];
      print_message("%s: %s\n", path, plan_error_format(buf, sizeof buf));
    }
    assert_int_equal(rc, PLAN_OK);
    round_trip(p, path, "examples", 0);
    round_trip(p, path, "examples", 1);
    /* self-contained output of a by-path plan needs no other file */
    char *sc = write_plan(p, 1);
    plan_plan *q = NULL;
    assert_int_equal(plan_load_buffer(&q, sc, strlen(sc), path, "/nonexistent"),
                     PLAN_OK);
    plan_free(q);
    free(sc);
    plan_free(p);
  }
  print_message("round trip: %zu examples\n", g.gl_pathc);
  globfree(&g);
}

static void test_round_trip_rich(void **state) {
  (void)state;
  /* The texts of this file, and a plan with every section. */
  const char *texts[] = {base_a, variant_a1, variant_a2, base_b, variant_b1};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    plan_plan *p = load_text(texts[i], NULL);
    round_trip(p, "t.yaml", NULL, 0);
    plan_free(p);
  }
  static const char rich[] =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  name: \"odd: name\"\n"
      "  tensors:\n"
      "    ids: {shape: [batch=4, seq=8], dtype: i64, range: [-5, 32]}\n"
      "    emb: {shape: [32, 16], dtype: bf16, role: param}\n"
      "    w: {shape: [16, 48], dtype: bf16, role: param}\n"
      "    mask: {shape: [8, 8], role: const, init: {recipe: causal_mask, "
      "fill: -1e4}}\n"
      "    cs: {shape: [8, 16], role: const, init: {recipe: rope_cos, theta: "
      "5e5}}\n"
      "    z: {shape: [], dtype: f64, role: const, init: zeros}\n"
      "    \"y\": {shape: [2], role: param}\n"
      "  ops:\n"
      "    - {name: embed, op: embedding, in: [emb, ids], out: h0}\n"
      "    - {name: \"sc:1\", op: scale, in: [h0], out: h1, attrs: {factor: "
      "-0.25}}\n"
      "    - {name: qkv, op: matmul, in: [h1, w], out: h2, attrs: "
      "{transpose_b: false}}\n"
      "    - {name: split, op: split, in: [h2], out: [q, k, v], attrs: {sizes: "
      "[16, 16, 16]}}\n"
      "    - {name: kt, op: transpose, in: [k], out: kT}\n"
      "    - {name: s, op: matmul, in: [q, kT], out: s}\n"
      "    - {name: sm, op: softmax, in: [s], out: p}\n"
      "    - {name: pv, op: matmul, in: [p, v], out: o}\n"
      "    - {name: r, op: reshape, in: [o], out: flat, attrs: {shape: [4, "
      "-1]}}\n"
      "    - {name: m, op: reduce_mean, in: [flat], out: mean, attrs: {dims: "
      "[-1], keepdim: true}}\n"
      "  outputs: [mean, q]\n"
      "mesh:\n"
      "  axes: [pp=2, dp=2, tp=2]\n"
      "  devices: [7, 6, 5, 4, 3, 2, 1, 0]\n"
      "  devices_per_host: 4\n"
      "  submeshes: {a: {pp: 0}, b: {pp: 1, tp: 1}}\n"
      "  hardware:\n"
      "    name: H200\n"
      "    flops: {bf16: 9.89e14, f64: 6.7e13}\n"
      "    memory: 1.41e11\n"
      "    intra_host: {bandwidth: 9e11, latency: 1e-6}\n"
      "    links: {dp: {bandwidth: 5e10}}\n"
      "placements:\n"
      "  ids: RS(0)R\n"
      "  emb: {tp: S(0)}\n"
      "  w: RRS(1)\n"
      "  \"y\": {dp: S(0), tp: S(0), order: {0: [tp, dp]}}\n"
      "strategies:\n"
      "  embed: {in: [RRS(0), RS(0)R], out: RS(0)P(sum)}\n"
      "  qkv: {in: [RS(0)R, RRS(1)], out: RS(0)S(2)}\n"
      "  split: {in: [RS(0)R], out: [RS(0)R, RS(0)R, RS(0)R]}\n"
      "  s: {in: [RRR, RRR], out: RRR}\n"
      "  pv: {in: [RRR, RRR], out: RRR}\n"
      "  \"*\": {in: [RRR], out: RRR}\n"
      "outputs:\n"
      "  mean: RS(0)R\n"
      "pipeline:\n"
      "  axis: pp\n"
      "  microbatches: 2\n"
      "  stages:\n"
      "    - {ops: [embed, \"sc:1\", qkv, split, kt]}\n"
      "    - {ops: [s, sm, pv, r, m]}\n"
      "  grid:\n"
      "    - \"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0I1 0W1\"\n"
      "    - [1RECV_F0, 1F0, 1RECV_F1, 1F1, 1B0, 1SEND_B0, 1B1, 1SEND_B1]\n"
      "  x-pp: {note: \"hand made\"}\n"
      "training:\n"
      "  optimizer: {kind: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1e-4}\n"
      "  steps: 3\n"
      "  dtypes: {param: f32, compute: bf16, grad: bf16, accum: f32}\n"
      "  grad_sync: {w: reduce_scatter, \"*\": all_reduce}\n"
      "  optimizer_state: {w: RS(0)R}\n"
      "  recompute: [\"s*\"]\n"
      "  clip_grad_norm: 0.5\n"
      "  loss_scale: 65536\n"
      "regions:\n"
      "  - {name: pinned-one, kind: pinned, ops: [sm]}\n"
      "  - name: by-hand\n"
      "    kind: manual\n"
      "    ops: [pv]\n"
      "    inputs: {p: RRR, v: RRR}\n"
      "    outputs: {o: RRR}\n"
      "    body: |\n"
      "      local x = ...\n"
      "      -- a comment: with a colon\n"
      "      return x\n"
      "provenance:\n"
      "  tool: {name: plan, version: 0.1.0}\n"
      "  numbers: [1, -2, 3.5, 1e300, -0.0, .inf]\n"
      "  strings: [\"1\", \"true\", \"null\", \"\", \"a: b\", \"#c\", \"- d\", "
      "\"x\\ty\", \"multi\\nline\"]\n"
      "  nothing: null\n"
      "  empty_map: {}\n"
      "  empty_seq: []\n"
      "  nested: [[1, [2]], {a: {b: [c]}}]\n"
      "  text: |\n"
      "    line one\n"
      "    line two\n"
      "x-top: [1, {a: b}]\n";
  plan_plan *p = load_text(rich, NULL);
  round_trip(p, "rich.yaml", NULL, 0);
  round_trip(p, "rich.yaml", NULL, 1);
  plan_free(p);
}

static void test_round_trip_odd_values(void **state) {
  (void)state;
  /* Attribute values that a writer can get wrong: a reshape to a scalar
   * (an empty list), floats that need exponents, negative zero. */
  static const char *const texts[] = {
      "libplan: \"0.1\"\nprogram:\n  tensors:\n    x: {shape: [1, 1]}\n"
      "  ops:\n    - {name: r, op: reshape, in: [x], out: y, attrs: {shape: "
      "[]}}\n",
      "libplan: \"0.1\"\nprogram:\n  tensors:\n    x: {shape: [4]}\n"
      "  ops:\n    - {name: s, op: scale, in: [x], out: y, attrs: {factor: "
      "1e-300}}\n"
      "    - {name: t, op: scale, in: [y], out: z, attrs: {factor: "
      "12345678.9}}\n"
      "    - {name: u, op: scale, in: [z], out: v, attrs: {factor: -0.0}}\n",
      /* a permutation of a scalar: another written empty list */
      "libplan: \"0.1\"\nprogram:\n  tensors:\n    x: {shape: []}\n"
      "  ops:\n    - {name: p, op: permute, in: [x], out: y, attrs: {perm: "
      "[]}}\n",
      /* generic values: negative zero stays a float, integral floats and
       * ints hash alike */
      "libplan: \"0.1\"\nprogram: {ops: []}\n"
      "provenance: {z: -0.0, f: 2.0, i: 2, big: 1e300, small: -5e-324}\n",
      /* a training section with every field at its default */
      "libplan: \"0.1\"\nprogram: {ops: []}\nmesh: {axes: [dp=1]}\ntraining: "
      "{}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    plan_plan *p = load_text(texts[i], NULL);
    round_trip(p, "odd.yaml", NULL, 0);
    char *w = write_plan(p, 0);
    if (i == 0)
      assert_non_null(strstr(w, "shape: []"));
    if (i == 2)
      assert_non_null(strstr(w, "perm: []"));
    if (i == 3)
      assert_non_null(strstr(w, "z: -0.0"));
    if (i == 4)
      assert_true(p->training.present);
    free(w);
    plan_free(p);
  }
}

/* ---- (5) x- keys
 * ------------------------------------------------------------------------ */

static const char with_x[] =
    "libplan: \"0.1\"\n"
    "x-top: {a: 1, b: [x, y]}\n"
    "program:\n"
    "  x-prog: \"kept\"\n"
    "  tensors:\n"
    "    x: {shape: [8, 16]}\n"
    "  ops:\n"
    "    - {name: s0.a, op: relu, in: [x], out: a}\n"
    "    - {name: s1.b, op: tanh, in: [a], out: b}\n"
    "mesh:\n"
    "  axes: [pp=2, dp=2]\n"
    "  x-mesh: 2.5\n"
    "strategies:\n"
    "  \"*\": {in: [RS(0)], out: RS(0)}\n"
    "pipeline:\n"
    "  axis: pp\n"
    "  stages: [{ops: [s0.a]}, {ops: [s1.b]}]\n"
    "  x-pipe: [1, 2]\n"
    "training:\n"
    "  x-train: {deep: {deeper: true}}\n"
    "regions:\n"
    "  - {name: r, kind: pinned, ops: [s1.b], x-region: null}\n"
    "provenance:\n"
    "  seed: 1\n"
    "  x-prov: {note: here}\n";

static void test_x_keys_round_trip(void **state) {
  (void)state;
  static const char *const keys[] = {"x-top",   "x-prog",   "x-mesh", "x-pipe",
                                     "x-train", "x-region", "x-prov", "deeper"};
  plan_plan *p = load_text(with_x, NULL);
  char *w1 = write_plan(p, 0);
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    if (!strstr(w1, keys[i]))
      print_message("'%s' was dropped:\n%s\n", keys[i], w1);
    assert_non_null(strstr(w1, keys[i]));
  }
  free(w1);
  round_trip(p, "x.yaml", NULL, 0);
  plan_free(p);

  /* excluded from every hash */
  static const char without_x[] =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  tensors:\n"
      "    x: {shape: [8, 16]}\n"
      "  ops:\n"
      "    - {name: s0.a, op: relu, in: [x], out: a}\n"
      "    - {name: s1.b, op: tanh, in: [a], out: b}\n"
      "mesh:\n"
      "  axes: [pp=2, dp=2]\n"
      "strategies:\n"
      "  \"*\": {in: [RS(0)], out: RS(0)}\n"
      "pipeline:\n"
      "  axis: pp\n"
      "  stages: [{ops: [s0.a]}, {ops: [s1.b]}]\n"
      "training: {}\n"
      "regions:\n"
      "  - {name: r, kind: pinned, ops: [s1.b]}\n"
      "provenance:\n"
      "  seed: 1\n";
  assert_same_hashes(with_x, without_x);
}

static void test_x_keys_in_ops_and_tensors(void **state) {
  (void)state;
  /* spec/plan-format.md: extension keys are kept and round-tripped wherever
   * they are accepted, which includes tensor declarations and ops. */
  static const char text[] =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  tensors:\n"
      "    x: {shape: [8], x-tensor-note: a}\n"
      "  ops:\n"
      "    - {name: a, op: relu, in: [x], out: y, x-op-note: b}\n";
  plan_plan *p = load_text(text, NULL);
  char *w = write_plan(p, 0);
  bool tensor_kept = strstr(w, "x-tensor-note") != NULL;
  bool op_kept = strstr(w, "x-op-note") != NULL;
  if (!tensor_kept || !op_kept)
    print_message("x- keys of a tensor or an op were dropped:\n%s\n", w);
  free(w);
  plan_free(p);
  assert_true(tensor_kept);
  assert_true(op_kept);
}

/* ---- (6) golden encodings and the hash format
 * ----------------------------------------------- */

/* examples/mlp-megatron.plan.yaml as it was when the goldens were made (in
 * format 0.1). */
static const char mlp_text[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: mlp\n"
    "  tensors:\n"
    "    x:  {shape: [batch=8, hidden=16], dtype: f32, role: input}\n"
    "    w1: {shape: [16, 64], dtype: f32, role: param}\n"
    "    w2: {shape: [64, 16], dtype: f32, role: param}\n"
    "  ops:\n"
    "    - {name: mlp.fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: mlp.act, op: gelu,   in: [h],     out: a}\n"
    "    - {name: mlp.fc2, op: matmul, in: [a, w2], out: y}\n"
    "  outputs: [y]\n"
    "mesh:\n"
    "  axes: [dp=2, tp=2]\n"
    "  devices: iota\n"
    "placements:\n"
    "  x: {dp: S(0), tp: R}\n"
    "  w1: RS(1)            # column parallel\n"
    "  w2: RS(0)            # row parallel\n"
    "strategies:\n"
    "  mlp.fc1: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n"
    "  mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}\n"
    "  mlp.fc2: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}\n"
    "outputs:\n"
    "  y: {dp: S(0), tp: R}   # lowering inserts the all-reduce over tp\n"
    "regions:\n"
    "  - {name: act-by-hand, kind: pinned, ops: [mlp.act]}\n"
    "provenance: {strategy: megatron, seed: 0}\n";

/* Regenerate with (the 1.0 goldens; the 0.1 ones are those of mlp_text):
 *   ./build/plan hash --canonical --part all examples/mlp-megatron.plan.yaml
 * (and the hashes with `plan hash --part all`), after checking that the
 * change of encoding is intended: it changes every stored hash. */
static const char golden_program[] =
    "{\"libplan\":\"0.1\",\"program\":{\"name\":\"mlp\",\"ops\":{"
    "\"mlp.act\":{\"attrs\":{},\"in\":[\"h\"],\"op\":\"gelu\",\"out\":[\"a\"]},"
    "\"mlp.fc1\":{\"attrs\":{},\"in\":[\"x\",\"w1\"],\"op\":\"matmul\",\"out\":"
    "[\"h\"]},"
    "\"mlp.fc2\":{\"attrs\":{},\"in\":[\"a\",\"w2\"],\"op\":\"matmul\",\"out\":"
    "[\"y\"]}},"
    "\"tensors\":{\"w1\":{\"role\":\"param\",\"shape\":[16,64]},"
    "\"w2\":{\"role\":\"param\",\"shape\":[64,16]},"
    "\"x\":{\"names\":[\"batch\",\"hidden\"],\"shape\":[8,16]}}}}";
static const char golden_plan[] =
    "{\"libplan\":\"0.1\",\"mesh\":{\"axes\":[\"dp=2\",\"tp=2\"]},"
    "\"outputs\":{\"y\":\"S(0)R\"},"
    "\"placements\":{\"w1\":\"RS(1)\",\"w2\":\"RS(0)\",\"x\":\"S(0)R\"},"
    "\"program\":\"xxh3:fb2804fc461faadca74d690e14a26454\","
    "\"regions\":{\"act-by-hand\":{\"kind\":\"pinned\",\"ops\":[\"mlp.act\"]}},"
    "\"strategies\":{\"mlp.act\":{\"in\":[\"S(0)S(1)\"],\"out\":[\"S(0)S(1)\"]}"
    ","
    "\"mlp.fc1\":{\"in\":[\"S(0)R\",\"RS(1)\"],\"out\":[\"S(0)S(1)\"]},"
    "\"mlp.fc2\":{\"in\":[\"S(0)S(1)\",\"RS(0)\"],\"out\":[\"S(0)P(sum)\"]}}}";
static const char golden_mesh[] =
    "{\"libplan\":\"0.1\",\"mesh\":{\"axes\":[\"dp=2\",\"tp=2\"]}}";
static const char golden_provenance[] =
    "{\"libplan\":\"0.1\",\"provenance\":{\"seed\":0,\"strategy\":\"megatron\"}"
    "}";
static const char *const golden_hashes[NPARTS] = {
    "xxh3:da4210eb148a2c9ddab5bdc179538a04",
    "xxh3:fb2804fc461faadca74d690e14a26454",
    "xxh3:08f8131591c56de72adeb77fea5f5fcd",
    "xxh3:1ffaf313c652831c523f5b651e8c535b"};

/* The same plan as format 1.0 (the example since it was upgraded): the
 * encodings differ only in the version and the program hash it changes. */
static const char golden_program_v1[] =
    "{\"libplan\":\"1.0\",\"program\":{\"name\":\"mlp\",\"ops\":{"
    "\"mlp.act\":{\"attrs\":{},\"in\":[\"h\"],\"op\":\"gelu\",\"out\":[\"a\"]},"
    "\"mlp.fc1\":{\"attrs\":{},\"in\":[\"x\",\"w1\"],\"op\":\"matmul\",\"out\":"
    "[\"h\"]},"
    "\"mlp.fc2\":{\"attrs\":{},\"in\":[\"a\",\"w2\"],\"op\":\"matmul\",\"out\":"
    "[\"y\"]}},"
    "\"tensors\":{\"w1\":{\"role\":\"param\",\"shape\":[16,64]},"
    "\"w2\":{\"role\":\"param\",\"shape\":[64,16]},"
    "\"x\":{\"names\":[\"batch\",\"hidden\"],\"shape\":[8,16]}}}}";
static const char golden_plan_v1[] =
    "{\"libplan\":\"1.0\",\"mesh\":{\"axes\":[\"dp=2\",\"tp=2\"]},"
    "\"outputs\":{\"y\":\"S(0)R\"},"
    "\"placements\":{\"w1\":\"RS(1)\",\"w2\":\"RS(0)\",\"x\":\"S(0)R\"},"
    "\"program\":\"xxh3:48781526da86a7266b26b69000aa7a70\","
    "\"regions\":{\"act-by-hand\":{\"kind\":\"pinned\",\"ops\":[\"mlp.act\"]}},"
    "\"strategies\":{\"mlp.act\":{\"in\":[\"S(0)S(1)\"],\"out\":[\"S(0)S(1)\"]}"
    ","
    "\"mlp.fc1\":{\"in\":[\"S(0)R\",\"RS(1)\"],\"out\":[\"S(0)S(1)\"]},"
    "\"mlp.fc2\":{\"in\":[\"S(0)S(1)\",\"RS(0)\"],\"out\":[\"S(0)P(sum)\"]}}}";
static const char golden_mesh_v1[] =
    "{\"libplan\":\"1.0\",\"mesh\":{\"axes\":[\"dp=2\",\"tp=2\"]}}";
static const char golden_provenance_v1[] =
    "{\"libplan\":\"1.0\",\"provenance\":{\"seed\":0,\"strategy\":\"megatron\"}"
    "}";
static const char *const golden_hashes_v1[NPARTS] = {
    "xxh3:b03ea654dfd32e82fb82bb992d352d70",
    "xxh3:48781526da86a7266b26b69000aa7a70",
    "xxh3:4d2fff9ab51478c6973019ad33c4b1dd",
    "xxh3:84c4fbf2a60594d8498e2f11771e3768"};

/* v1: the 1.0 goldens, else the 0.1 ones. */
static void check_golden(const plan_plan *p, const char *what, bool v1) {
  const char *const golden[NPARTS] = {v1 ? golden_plan_v1 : golden_plan,
                                      v1 ? golden_program_v1 : golden_program,
                                      v1 ? golden_mesh_v1 : golden_mesh,
                                      v1 ? golden_provenance_v1
                                         : golden_provenance};
  const char *const *golden_hash = v1 ? golden_hashes_v1 : golden_hashes;
  for (int k = 0; k < NPARTS; k++) {
    char *c = NULL;
    size_t len = 0;
    assert_int_equal(plan_canonical(&c, &len, p, (plan_part)k), PLAN_OK);
    assert_int_equal(strlen(c), len);
    if (strcmp(c, golden[k]))
      print_message("%s: the canonical %s encoding changed:\n  got  %s\n  want "
                    "%s\nregenerate with: ./build/plan hash --canonical --part "
                    "all examples/mlp-megatron.plan.yaml\n",
                    what, part_names[k], c, golden[k]);
    assert_string_equal(c, golden[k]);
    /* the hash is XXH3-128 of exactly these bytes, printed big-endian */
    XXH128_hash_t x = XXH3_128bits(c, len);
    plan_hash h;
    assert_int_equal(plan_hash_part(&h, p, (plan_part)k), PLAN_OK);
    assert_true(h.high == x.high64);
    assert_true(h.low == x.low64);
    char buf[PLAN_HASH_STRLEN];
    plan_hash_format(h, buf);
    if (strcmp(buf, golden_hash[k]))
      print_message("%s: %s hash %s, golden %s\n", what, part_names[k], buf,
                    golden_hash[k]);
    assert_string_equal(buf, golden_hash[k]);
    free(c);
  }
}

static void test_golden(void **state) {
  (void)state;
  plan_plan *p = load_text(mlp_text, NULL);
  check_golden(p, "embedded mlp", false);
  plan_free(p);
  /* upgraded to 1.0, it has the 1.0 goldens */
  plan_upgrade_info info;
  char *up = NULL;
  assert_int_equal(plan_upgrade_buffer(&up, NULL, &info, mlp_text,
                                       strlen(mlp_text), "mlp.yaml", NULL),
                   PLAN_OK);
  p = load_text(up, NULL);
  check_golden(p, "embedded mlp, upgraded", true);
  plan_free(p);
  free(up);
  /* the example file itself (upgraded to 1.0), while it keeps its meaning */
  if (access("examples/mlp-megatron.plan.yaml", R_OK) == 0) {
    assert_int_equal(plan_load(&p, "examples/mlp-megatron.plan.yaml"), PLAN_OK);
    check_golden(p, "examples/mlp-megatron.plan.yaml", true);
    plan_free(p);
  }
  /* the program hash inside the plan encoding is the program part's hash */
  assert_non_null(strstr(golden_plan, golden_hashes[PLAN_PART_PROGRAM]));
  assert_non_null(strstr(golden_plan_v1, golden_hashes_v1[PLAN_PART_PROGRAM]));
}

static void test_hash_format(void **state) {
  (void)state;
  /* XXH3-128 of "" (xxHash's own test vector), printed big-endian */
  XXH128_hash_t x = XXH3_128bits("", 0);
  plan_hash h = {x.high64, x.low64};
  char buf[PLAN_HASH_STRLEN];
  assert_ptr_equal(plan_hash_format(h, buf), buf);
  assert_string_equal(buf, "xxh3:99aa06d3014798d86001c324468d497f");
  assert_int_equal(strlen(buf), PLAN_HASH_STRLEN - 1);
  /* the printed form is xxHash's canonical (big-endian) byte order */
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, x);
  char hex[40];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", canon.digest[i]);
  assert_string_equal(buf + 5, hex);

  plan_hash a = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  assert_string_equal(plan_hash_format(a, buf),
                      "xxh3:0123456789abcdeffedcba9876543210");
  plan_hash back;
  assert_int_equal(plan_hash_parse(&back, buf), PLAN_OK);
  assert_true(plan_hash_equal(a, back));
  assert_true(back.high == a.high && back.low == a.low);
  plan_hash zero = {0, 0};
  assert_string_equal(plan_hash_format(zero, buf),
                      "xxh3:00000000000000000000000000000000");
  assert_false(plan_hash_equal(a, zero));

  /* every printed hash has exactly 32 hex digits */
  plan_plan *p = load_text(base_a, NULL);
  for (int k = 0; k < NPARTS; k++) {
    plan_hash hk;
    assert_int_equal(plan_hash_part(&hk, p, (plan_part)k), PLAN_OK);
    plan_hash_format(hk, buf);
    assert_int_equal(strlen(buf), 37);
    assert_memory_equal(buf, "xxh3:", 5);
    assert_int_equal(strspn(buf + 5, "0123456789abcdef"), 32);
    assert_int_equal(plan_hash_parse(&back, buf), PLAN_OK);
    assert_true(plan_hash_equal(hk, back));
  }
  plan_free(p);

  /* refused spellings */
  static const char *const bad[] = {
      "",
      "xxh3:",
      "0123456789abcdeffedcba9876543210",
      "xxh3:0123456789abcdeffedcba987654321",
      "xxh3:0123456789abcdeffedcba98765432100",
      "xxh3:0123456789abcdeffedcba987654321g",
      "xxh64:0123456789abcdeffedcba9876543210",
      "xxh3: 0123456789abcdeffedcba987654321",
      "XXH3:0123456789abcdeffedcba9876543210",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (plan_hash_parse(&back, bad[i]) != PLAN_EINVALID)
      print_message("accepted '%s'\n", bad[i]);
    assert_int_equal(plan_hash_parse(&back, bad[i]), PLAN_EINVALID);
  }
}

static void test_canonical_errors(void **state) {
  (void)state;
  plan_plan *p = load_text("libplan: \"0.1\"\nprogram:\n  ops:\n"
                           "    - {name: a, op: relu, in: [x], out: y}\n"
                           "  tensors: {x: {shape: [2]}}\n",
                           NULL);
  char *c = (char *)1;
  assert_int_equal(plan_canonical(&c, NULL, p, PLAN_PART_PLAN), PLAN_ENOTFOUND);
  assert_null(c);
  assert_int_equal(plan_canonical(&c, NULL, p, PLAN_PART_MESH), PLAN_ENOTFOUND);
  assert_int_equal(plan_canonical(&c, NULL, p, PLAN_PART_PROVENANCE),
                   PLAN_ENOTFOUND);
  assert_int_equal(plan_canonical(&c, NULL, p, PLAN_PART_PROGRAM), PLAN_OK);
  assert_non_null(strstr(c, "\"ops\":{\"a\":"));
  free(c);
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, p, (plan_part)9), PLAN_EUSAGE);
  assert_int_equal(plan_hash_part(NULL, p, PLAN_PART_PLAN), PLAN_EUSAGE);
  assert_int_equal(plan_hash_part(&h, NULL, PLAN_PART_PLAN), PLAN_EUSAGE);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_invariance_plan_a),
      cmocka_unit_test(test_invariance_numbers),
      cmocka_unit_test(test_invariance_placements),
      cmocka_unit_test(test_invariance_defaults),
      cmocka_unit_test(test_invariance_pipeline),
      cmocka_unit_test(test_sensitivity),
      cmocka_unit_test_setup_teardown(test_program_three_ways, setup_tmp,
                                      teardown_tmp),
      cmocka_unit_test(test_round_trip_examples),
      cmocka_unit_test(test_round_trip_rich),
      cmocka_unit_test(test_round_trip_odd_values),
      cmocka_unit_test(test_x_keys_round_trip),
      cmocka_unit_test(test_x_keys_in_ops_and_tensors),
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_hash_format),
      cmocka_unit_test(test_canonical_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
