/* Shape reduction (plan_reduce_shapes, plan_reduce_lowered): reduced plans
 * are smaller, keep every sharded dim's divisibility or uneven pattern,
 * load, validate and verify equal; a bug found at full size is found
 * reduced, at the same op with the same diagnosis; reducing again changes
 * nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "libplan/verify.h"
#include "lower/lower.h"
#include "ir/placement.h"
#include "read/plan_read.h"
#include "reduce/reduce.h"
#include "verify_int.h"
#include "verify_mutations.h"

static void show_error(void) {
  char buf[512];
  fprintf(stderr, "%s\n", plan_error_format(buf, sizeof buf));
}

static plan_plan *load_text(const char *text, const char *name) {
  plan_plan *p = NULL;
  if (plan_load_buffer(&p, text, strlen(text), name, "."))
    show_error();
  assert_non_null(p);
  return p;
}

static plan_plan *reduce(const plan_plan *p, char **sum) {
  plan_plan *r = NULL;
  if (plan_reduce_shapes(&r, sum, p))
    show_error();
  assert_non_null(r);
  return r;
}

static plan_plan *reduce_mesh(const plan_plan *p, char **sum) {
  plan_plan *r = NULL;
  if (plan_reduce_plan(&r, sum, p, PLAN_REDUCE_MESH))
    show_error();
  assert_non_null(r);
  return r;
}

static const plan_tensor *tensor(const plan_plan *p, const char *name) {
  int t = plan_strmap_get(&p->program->tensor_by_name, name);
  assert_true(t >= 0);
  return &p->program->tensors[t];
}

static int64_t dim(const plan_plan *p, const char *name, int d) {
  const plan_tensor *t = tensor(p, name);
  assert_true(d < t->rank);
  return t->dims[d];
}

static double elements(const plan_plan *p) {
  double n = 0;
  for (int t = 0; t < p->program->ntensors; t++) {
    double e = 1;
    for (int d = 0; d < p->program->tensors[t].rank; d++)
      e *= (double)p->program->tensors[t].dims[d];
    n += e;
  }
  return n;
}

/* ---- the structure a reduction must keep -------------------------------- */

static int64_t min2(int64_t n) {
  return n < 2 ? n : 2;
}

/* One placement of tensor `name`, sharding dims over the mesh: in the
 * reduced plan every sharded dim keeps its divisibility (with min(n/k, 2)
 * per shard), or its torch.chunk pattern over one axis (the same full,
 * partial and empty pieces; on a reduced axis, the same kinds of piece),
 * or its size. k ranks in o, k2 in r (fewer where the mesh shrank). */
static void check_pl(const plan_plan *o, const plan_plan *r, const char *name,
                     const plan_placement *pl, int *checked) {
  const plan_tensor *to = tensor(o, name), *tr = tensor(r, name);
  assert_int_equal(to->rank, tr->rank);
  for (int d = 0; d < to->rank; d++) {
    int axes[PLAN_MAX_MESH_AXES];
    int na = plan_placement_dim_axes(pl, d, axes);
    if (!na)
      continue;
    int64_t k = 1, k2 = 1;
    for (int a = 0; a < na; a++) {
      k *= o->mesh.axis_sizes[axes[a]];
      k2 *= r->mesh.axis_sizes[axes[a]];
    }
    assert_int_equal(k % k2, 0);
    int64_t n0 = to->dims[d], n1 = tr->dims[d];
    (*checked)++;
    if (n0 % k == 0) {
      assert_int_equal(n1 % k2, 0);
      assert_true(n1 / k2 >= min2(n0 / k));
      continue;
    }
    if (na > 1) {
      assert_int_equal(n1, n0);
      assert_int_equal(k2, k);
      continue;
    }
    int64_t c0 = (n0 + k - 1) / k, c1 = (n1 + k2 - 1) / k2;
    if (k2 == k)
      assert_int_equal(n0 / c0, n1 / c1);         /* full pieces */
    assert_int_equal(n0 % c0 != 0, n1 % c1 != 0); /* a partial one */
    assert_true(c1 >= min2(c0));
    if (n0 % c0)
      assert_true(n1 % c1 >= min2(n0 % c0));
    /* every rank's piece, from the layout code: the kinds of piece it had
     * (on the same ranks: empty where it was) */
    bool had[3] = {false, false, false}, has[3] = {false, false, false};
    for (int64_t i = 0; i < k; i++) {
      int64_t coord[PLAN_MAX_MESH_AXES] = {0}, off, len;
      coord[axes[0]] = i;
      plan_placement_dim_range(pl, d, n0, o->mesh.axis_sizes, coord, &off,
                               &len);
      had[len == 0 ? 0 : len == c0 ? 1 : 2] = true;
      if (k2 == k) {
        int64_t off1, len1;
        plan_placement_dim_range(pl, d, n1, r->mesh.axis_sizes, coord, &off1,
                                 &len1);
        assert_int_equal(len == 0, len1 == 0);
        assert_int_equal(len == c0, len1 == c1);
      }
    }
    for (int64_t i = 0; i < k2; i++) {
      int64_t coord[PLAN_MAX_MESH_AXES] = {0}, off, len;
      coord[axes[0]] = i;
      plan_placement_dim_range(pl, d, n1, r->mesh.axis_sizes, coord, &off,
                               &len);
      has[len == 0 ? 0 : len == c1 ? 1 : 2] = true;
    }
    assert_memory_equal(had, has, sizeof had);
  }
}

/* Every placement of the original plan, on the reduced plan's dims. */
static int check_structure(const plan_plan *o, const plan_plan *r) {
  const plan_program *prog = o->program;
  int checked = 0;
  for (int t = 0; t < prog->ntensors; t++)
    if (o->placements[t].set)
      check_pl(o, r, prog->tensors[t].name, &o->placements[t].pl, &checked);
  for (int i = 0; i < prog->nops; i++) {
    const plan_strategy *s = &o->strategies[i];
    const plan_op *op = &prog->ops[i];
    if (!s->set)
      continue;
    for (int j = 0; j < op->nin; j++)
      check_pl(o, r, prog->tensors[op->in[j]].name, &s->in[j], &checked);
    for (int j = 0; j < op->nout; j++)
      check_pl(o, r, prog->tensors[op->out[j]].name, &s->out[j], &checked);
  }
  for (int k = 0; k < prog->noutputs; k++)
    if (o->out_pl[k].set)
      check_pl(o, r, prog->tensors[prog->outputs[k]].name, &o->out_pl[k].pl,
               &checked);
  return checked;
}

static void check_valid(const plan_plan *p) {
  plan_diags *d;
  assert_int_equal(plan_validate(&d, p), PLAN_OK);
  size_t errors = plan_diags_count_at_least(d, PLAN_SEV_ERROR);
  for (size_t i = 0; errors && i < plan_diags_count(d); i++)
    fprintf(stderr, "%s\n", plan_diags_get(d, i)->message);
  assert_int_equal(errors, 0);
  plan_diags_free(d);
}

static void check_equal(const plan_plan *p) {
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
    o.mode = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    plan_verify_report *r;
    assert_int_equal(plan_verify(&r, p, &o), PLAN_OK);
    if (!plan_verify_report_equal(r))
      fprintf(stderr, "%s", plan_verify_report_text(r));
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
  }
}

/* Reduces p (the mesh too with `mesh`), checks everything a reduction
 * promises, returns it. */
static plan_plan *reduce_checked_as(const plan_plan *p, bool smaller,
                                    bool mesh) {
  char *sum = NULL;
  plan_plan *r = mesh ? reduce_mesh(p, &sum) : reduce(p, &sum);
  assert_non_null(sum);
  assert_non_null(strstr(sum, "reduced: "));
  if (smaller) {
    assert_true(elements(r) < elements(p));
    assert_non_null(strstr(sum, "fewer elements"));
  }
  free(sum);
  check_structure(p, r);
  check_valid(r);
  /* it survives a write and a read, as any plan */
  char *text;
  size_t len;
  assert_int_equal(plan_write_buffer(&text, &len, r, NULL), PLAN_OK);
  plan_plan *again = NULL;
  assert_int_equal(plan_load_buffer(&again, text, len, "again.yaml", NULL),
                   PLAN_OK);
  free(text);
  plan_free(again);
  check_equal(r);
  return r;
}

static plan_plan *reduce_checked(const plan_plan *p, bool smaller) {
  return reduce_checked_as(p, smaller, false);
}

/* ---- plans --------------------------------------------------------------- */

/* A Megatron MLP at a real size: batch 8, seq 512, hidden 1024, ffn 4096 on
 * dp = 2 x tp = 4 (only its reduced form is run). */
static const char megatron_real[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: mlp-real\n"
    "  tensors:\n"
    "    x: {shape: [batch=8, seq=512, hidden=1024], role: input}\n"
    "    w1: {shape: [hidden=1024, ffn=4096], role: param}\n"
    "    w2: {shape: [ffn=4096, hidden=1024], role: param}\n"
    "  ops:\n"
    "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: act, op: gelu, in: [h], out: a}\n"
    "    - {name: fc2, op: matmul, in: [a, w2], out: y}\n"
    "  outputs: [y]\n"
    "mesh: {axes: [dp=2, tp=4]}\n"
    "placements: {x: S(0)R, w1: RS(1), w2: RS(0)}\n"
    "strategies:\n"
    "  fc1: {in: [S(0)R, RS(1)], out: S(0)S(2)}\n"
    "  act: {in: [S(0)S(2)], out: S(0)S(2)}\n"
    "  fc2: {in: [S(0)S(2), RS(0)], out: S(0)P(sum)}\n"
    "outputs: {y: S(0)R}\n";

/* The same MLP small enough to run at full size (batch 8, seq 16, hidden
 * 64, ffn 256), with the batch sharded unevenly over tp as a second
 * level: dp = 2 x tp = 4. */
static const char megatron_mid[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: mlp-mid\n"
    "  tensors:\n"
    "    x: {shape: [batch=8, seq=16, hidden=64], role: input}\n"
    "    w1: {shape: [64, 256], role: param}\n"
    "    w2: {shape: [256, 64], role: param}\n"
    "  ops:\n"
    "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: act, op: gelu, in: [h], out: a}\n"
    "    - {name: fc2, op: matmul, in: [a, w2], out: y}\n"
    "  outputs: [y]\n"
    "mesh: {axes: [dp=2, tp=4]}\n"
    "placements: {x: S(0)R, w1: RS(1), w2: RS(0)}\n"
    "strategies:\n"
    "  fc1: {in: [S(0)R, RS(1)], out: S(0)S(2)}\n"
    "  act: {in: [S(0)S(2)], out: S(0)S(2)}\n"
    "  fc2: {in: [S(0)S(2), RS(0)], out: S(0)P(sum)}\n"
    "outputs: {y: S(0)R}\n";

/* Uneven: a vocabulary of 50257 over tp = 8 (torch.chunk: 7 pieces of
 * 6283 and one of 6276), in a vocab-parallel embedding and a
 * column-parallel head with cross-entropy; ids and labels range over the
 * vocabulary. */
static const char vocab_uneven[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: lm\n"
    "  tensors:\n"
    "    ids: {shape: [batch=8, seq=512], dtype: i64, role: input, range: [0, "
    "50257]}\n"
    "    labels: {shape: [batch=8, seq=512], dtype: i64, role: input, range: "
    "[0, 50257]}\n"
    "    emb: {shape: [vocab=50257, hidden=1024], role: param}\n"
    "    w_out: {shape: [1024, 50257], role: param}\n"
    "  ops:\n"
    "    - {name: embed, op: embedding, in: [emb, ids], out: h}\n"
    "    - {name: head, op: matmul, in: [h, w_out], out: logits}\n"
    "    - {name: loss, op: cross_entropy, in: [logits, labels], out: l}\n"
    "  outputs: [l]\n"
    "mesh: {axes: [dp=2, tp=8]}\n"
    "placements: {ids: S(0)R, labels: S(0)R, emb: RS(0), w_out: RS(1)}\n"
    "strategies:\n"
    "  embed: {in: [RS(0), S(0)R], out: S(0)P(sum)}\n"
    "  head: {in: [S(0)R, RS(1)], out: S(0)S(2)}\n"
    "  loss: {in: [S(0)R, S(0)R], out: P(sum)R}\n";

/* Uneven over one axis (5 rows on tp = 4: 2, 2, 1, 0) and nested over two
 * (5 on dp x tp = 2 x 2 as S(0)S(0): 2, 1, 1, 1): the first keeps its
 * pattern, the second its size; the column dim shrinks. */
static const char uneven_small[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: uneven\n"
    "  tensors:\n"
    "    a: {shape: [5, 40], role: input}\n"
    "    b: {shape: [7, 40], role: input}\n"
    "  ops:\n"
    "    - {name: ra, op: relu, in: [a], out: ya}\n"
    "    - {name: rb, op: relu, in: [b], out: yb}\n"
    "  outputs: [ya, yb]\n"
    "mesh: {axes: [dp=2, tp=4]}\n"
    "placements: {a: RS(0), b: S(0)S(0)}\n"
    "strategies:\n"
    "  ra: {in: [RS(0)], out: RS(0)}\n"
    "  rb: {in: [S(0)S(0)], out: S(0)S(0)}\n"
    "outputs: {ya: RS(0), yb: S(0)S(0)}\n";

/* ---- tests ----------------------------------------------------------------
 */

static void test_examples(void **state) {
  (void)state;
  static const char *const files[] = {
      "examples/mlp-megatron.plan.yaml", "examples/mlp-by-path.plan.yaml",
      "examples/transformer-block.plan.yaml", "examples/moe-experts.plan.yaml"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    plan_plan *p = load(files[i]);
    plan_plan *r = reduce_checked(p, true);
    assert_true(check_structure(p, r) > 0);
    plan_free(r);
    plan_free(p);
  }
  /* the transformer block: batch 4 over dp = 2 already has 2 per shard;
   * seq 8 over tp = 2 keeps 2 per shard; hidden (never sharded) goes to
   * 2; the fused q|k|v dim is split's split dim, three equal parts of 8:
   * each part goes to 2 and the split's sizes follow */
  plan_plan *p = load("examples/transformer-block.plan.yaml");
  plan_plan *r = reduce(p, NULL);
  assert_int_equal(dim(r, "x", 0), 4);
  assert_int_equal(dim(r, "x", 1), 4);
  assert_int_equal(dim(r, "x", 2), 2);
  assert_int_equal(dim(r, "q", 3), 2);
  assert_int_equal(dim(r, "qkvh", 3), 6);
  const plan_op *split =
      &r->program
           ->ops[plan_strmap_get(&r->program->op_by_name, "block.attn.split")];
  assert_int_equal(split->attrs[1].nints, 3);
  for (int j = 0; j < 3; j++)
    assert_int_equal(split->attrs[1].ints[j], 2);
  assert_int_equal(dim(r, "w_fc1", 0), 4);
  /* the reshape's shape follows */
  const plan_op *heads =
      &r->program
           ->ops[plan_strmap_get(&r->program->op_by_name, "block.attn.heads")];
  assert_int_equal(heads->attrs[0].ints[1], 4);
  plan_free(r);
  plan_free(p);
}

static void test_megatron_real_size(void **state) {
  (void)state;
  plan_plan *p = load_text(megatron_real, "mlp-real.plan.yaml");
  char *sum;
  plan_plan *r = reduce(p, &sum);
  assert_non_null(strstr(sum, "batch 8->4"));
  assert_non_null(strstr(sum, "seq 512->2"));
  assert_non_null(strstr(sum, "hidden 1024->2"));
  assert_non_null(strstr(sum, "ffn 4096->8"));
  free(sum);
  assert_int_equal(dim(r, "x", 0), 4); /* dp = 2: 2 per shard */
  assert_int_equal(dim(r, "x", 1), 2); /* not sharded */
  assert_int_equal(dim(r, "x", 2), 2);
  assert_int_equal(dim(r, "w1", 1), 8); /* tp = 4: 2 per shard */
  assert_int_equal(dim(r, "w2", 0), 8);
  assert_int_equal(dim(r, "y", 2), 2);
  plan_free(r);
  r = reduce_checked(p, true);
  assert_true(check_structure(p, r) >= 8);
  plan_free(r);
  plan_free(p);
}

static void test_vocab_uneven(void **state) {
  (void)state;
  plan_plan *p = load_text(vocab_uneven, "lm.plan.yaml");
  plan_plan *r = reduce_checked(p, true);
  /* 50257 over 8: 7 chunks of 6283 and one partial; reduced to 7 chunks
   * of 3 and a partial of 2 (at least 2 in every non-empty piece) */
  assert_int_equal(dim(r, "emb", 0), 23);
  assert_int_equal(dim(r, "w_out", 1), 23);
  assert_int_equal(dim(r, "logits", 2), 23);
  /* the ranges that index the vocabulary follow it */
  assert_int_equal(tensor(r, "ids")->range_hi, 23);
  assert_int_equal(tensor(r, "labels")->range_hi, 23);
  assert_int_equal(dim(r, "ids", 0), 4);
  assert_int_equal(dim(r, "emb", 1), 2);
  plan_free(r);
  plan_free(p);
}

static void test_uneven_patterns(void **state) {
  (void)state;
  plan_plan *p = load_text(uneven_small, "uneven.plan.yaml");
  char *sum;
  plan_plan *r = reduce(p, &sum);
  assert_int_equal(dim(r, "a", 0), 5); /* 2, 2, 1, 0: nothing smaller */
  assert_int_equal(dim(r, "b", 0), 7); /* nested and uneven: kept */
  assert_int_equal(dim(r, "a", 1), 2);
  assert_int_equal(dim(r, "b", 1), 2);
  assert_non_null(strstr(sum, "uneven over several axes"));
  free(sum);
  plan_free(r);
  r = reduce_checked(p, true);
  plan_free(r);
  plan_free(p);
}

/* Reducing a reduced plan changes no dim, and says so. */
static void test_idempotent(void **state) {
  (void)state;
  const char *texts[] = {megatron_real, vocab_uneven, uneven_small};
  for (size_t i = 0; i < 4; i++) {
    plan_plan *p = i < 3 ? load_text(texts[i], "p.plan.yaml")
                         : load("examples/transformer-block.plan.yaml");
    plan_plan *r1 = reduce(p, NULL);
    char *sum;
    plan_plan *r2 = reduce(r1, &sum);
    assert_int_equal(r1->program->ntensors, r2->program->ntensors);
    for (int t = 0; t < r1->program->ntensors; t++) {
      const plan_tensor *a = &r1->program->tensors[t];
      const plan_tensor *b = tensor(r2, a->name);
      assert_int_equal(a->rank, b->rank);
      assert_memory_equal(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
    }
    assert_non_null(strstr(sum, "reduced: nothing"));
    assert_null(strstr(sum, "fewer elements"));
    free(sum);
    check_valid(r2);
    /* the program is the same program: same hash */
    plan_hash h1, h2;
    assert_int_equal(plan_hash_part(&h1, r1, PLAN_PART_PROGRAM), PLAN_OK);
    assert_int_equal(plan_hash_part(&h2, r2, PLAN_PART_PROGRAM), PLAN_OK);
    assert_true(plan_hash_equal(h1, h2));
    plan_free(r2);
    plan_free(r1);
    plan_free(p);
  }
}

/* ---- bugs found at full size and reduced ------------------------------------
 */

static plan_verify_report *run_mutated(const plan_plan *p, mutation m,
                                       plan_verify_mode mode) {
  plan_lowered *l;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  m(l);
  plan_verify_options o = PLAN_VERIFY_OPTIONS_INIT;
  o.mode = mode;
  plan_verify_report *r;
  assert_int_equal(plan_verify_lowered(&r, p, l, &o), PLAN_OK);
  return r;
}

/* The class of a diagnosis: its text up to the first ':' (names and
 * counts after it may differ with the sizes). */
static size_t diag_class(const char *d) {
  const char *c = strchr(d, ':');
  return c ? (size_t)(c - d) : strlen(d);
}

static void same_finding(const plan_verify_report *full,
                         const plan_verify_report *red, const char *op,
                         const char *word) {
  assert_false(plan_verify_report_equal(full));
  assert_false(plan_verify_report_equal(red));
  const char *df = plan_verify_report_diagnosis(full);
  const char *dr = plan_verify_report_diagnosis(red);
  if (strcmp(plan_verify_report_first_op(full),
             plan_verify_report_first_op(red)) ||
      diag_class(df) != diag_class(dr) || strncmp(df, dr, diag_class(df)))
    fprintf(stderr, "full: %s: %s\nreduced: %s: %s\n",
            plan_verify_report_first_op(full), df,
            plan_verify_report_first_op(red), dr);
  assert_string_equal(plan_verify_report_first_op(full),
                      plan_verify_report_first_op(red));
  assert_string_equal(plan_verify_report_first_tensor(full),
                      plan_verify_report_first_tensor(red));
  if (op)
    assert_string_equal(plan_verify_report_first_op(red), op);
  assert_int_equal(diag_class(df), diag_class(dr));
  assert_memory_equal(df, dr, diag_class(df));
  if (word) {
    assert_non_null(strstr(df, word));
    assert_non_null(strstr(dr, word));
  }
}

static void bug_both_sizes(const plan_plan *p, mutation m, const char *op,
                           const char *word) {
  plan_plan *r = reduce(p, NULL);
  assert_true(elements(r) < elements(p));
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_mode vm = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    plan_verify_report *full = run_mutated(p, m, vm);
    plan_verify_report *red = run_mutated(r, m, vm);
    same_finding(full, red, op, word);
    plan_verify_report_free(full);
    plan_verify_report_free(red);
  }
  plan_free(r);
}

/* The bug run at full size and on the reduced mesh and shapes: found at
 * the same op with the same diagnosis. */
static void bug_on_reduced_mesh(const plan_plan *p, mutation m,
                                const char *word) {
  char *sum;
  plan_plan *r = reduce_mesh(p, &sum);
  assert_true(strstr(sum, "; mesh: ") || strstr(sum, "; microbatches "));
  free(sum);
  assert_true(r->mesh.ndevices < p->mesh.ndevices ||
              r->pipeline.microbatches < p->pipeline.microbatches);
  for (int mode = 0; mode < 2; mode++) {
    plan_verify_mode vm = mode ? PLAN_VERIFY_FLOAT : PLAN_VERIFY_EXACT;
    plan_verify_report *full = run_mutated(p, m, vm);
    plan_verify_report *red = run_mutated(r, m, vm);
    same_finding(full, red, NULL, word);
    plan_verify_report_free(full);
    plan_verify_report_free(red);
  }
  plan_free(r);
}

static void test_bug_dropped_all_reduce(void **state) {
  (void)state;
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  bug_both_sizes(p, drop_all_reduce, NULL, "partial sums");
  plan_free(p);
  p = load_text(megatron_mid, "mlp-mid.plan.yaml");
  bug_both_sizes(p, drop_all_reduce, NULL, "partial sums");
  plan_free(p);
}

static void test_bug_wrong_axis(void **state) {
  (void)state;
  plan_plan *p = load("examples/transformer-block.plan.yaml");
  bug_both_sizes(p, wrong_axis, "block.res1", NULL);
  plan_free(p);
}

static void test_bug_gather_left_out(void **state) {
  (void)state;
  plan_plan *p = load("examples/transformer-block.plan.yaml");
  bug_both_sizes(p, skip_gather, "block.attn.qkv", NULL);
  plan_free(p);
}

/* ---- mesh reduction ------------------------------------------------------
 */

static char *substitute(const char *text, const char *from, const char *to) {
  char *s = malloc(strlen(text) + 1);
  assert_non_null(s);
  strcpy(s, text);
  s = replace(s, from, to);
  assert_non_null(s);
  return s;
}

/* A sequence-parallel MLP on dp = 4 x tp = 4, small enough to run at full
 * size: the sequence all-gathered before the column-parallel matmul and
 * reduce-scattered after the row-parallel one. */
static const char megatron_sp[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: mlp-sp\n"
    "  tensors:\n"
    "    x: {shape: [batch=8, seq=16, hidden=32], role: input}\n"
    "    w1: {shape: [32, 64], role: param}\n"
    "    w2: {shape: [64, 32], role: param}\n"
    "  ops:\n"
    "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"
    "    - {name: act, op: gelu, in: [h], out: a}\n"
    "    - {name: fc2, op: matmul, in: [a, w2], out: y}\n"
    "  outputs: [y]\n"
    "mesh: {axes: [dp=4, tp=4]}\n"
    "placements: {x: S(0)S(1), w1: RS(1), w2: RS(0)}\n"
    "strategies:\n"
    "  fc1: {in: [S(0)R, RS(1)], out: S(0)S(2)}\n"
    "  act: {in: [S(0)S(2)], out: S(0)S(2)}\n"
    "  fc2: {in: [S(0)S(2), RS(0)], out: S(0)P(sum)}\n"
    "outputs: {y: S(0)S(1)}\n";

/* Every axis shrinks to its smallest divisor, the dims follow the reduced
 * rank counts, and the plan verifies equal. */
static void test_mesh_even(void **state) {
  (void)state;
  plan_plan *p = load_text(megatron_real, "mlp-real.plan.yaml");
  char *sum;
  plan_plan *r = reduce_mesh(p, &sum);
  assert_non_null(strstr(sum, "; mesh: tp 4->2 (8->4 ranks)"));
  free(sum);
  assert_int_equal(r->mesh.axis_sizes[0], 2);
  assert_int_equal(r->mesh.axis_sizes[1], 2);
  assert_int_equal(dim(r, "w1", 1), 4); /* 2 per shard on 2 ranks */
  assert_int_equal(dim(r, "x", 0), 4);
  plan_free(r);
  r = reduce_checked_as(p, true, true);
  assert_true(check_structure(p, r) >= 8);
  plan_free(r);
  plan_free(p);
  /* a large mesh: 16 x 8 ranks verify through 2 x 2 */
  char *big = substitute(megatron_real, "dp=2, tp=4", "dp=16, tp=8");
  big = replace(big, "batch=8", "batch=64");
  assert_non_null(big);
  p = load_text(big, "mlp-big.plan.yaml");
  r = reduce_mesh(p, &sum);
  assert_non_null(strstr(sum, "; mesh: dp 16->2, tp 8->2 (128->4 ranks)"));
  free(sum);
  assert_int_equal(dim(r, "x", 0), 4);
  assert_int_equal(dim(r, "w1", 1), 4);
  plan_free(r);
  r = reduce_checked_as(p, true, true);
  check_structure(p, r);
  plan_free(r);
  plan_free(p);
  free(big);
}

/* An uneven dim keeps its kinds of piece on the reduced axis; one whose
 * pattern needs every rank (full, partial and empty pieces on 4) keeps
 * the axis; an axis of prime size has nothing to shrink to. */
static void test_mesh_uneven(void **state) {
  (void)state;
  plan_plan *p = load_text(vocab_uneven, "lm.plan.yaml");
  char *sum;
  plan_plan *r = reduce_mesh(p, &sum);
  assert_non_null(strstr(sum, "; mesh: tp 8->2 (16->4 ranks)"));
  free(sum);
  /* 50257 over 8: full pieces and a partial one; over 2: 3 + 2 */
  assert_int_equal(dim(r, "emb", 0), 5);
  assert_int_equal(tensor(r, "ids")->range_hi, 5);
  plan_free(r);
  r = reduce_checked_as(p, true, true);
  plan_free(r);
  plan_free(p);

  p = load_text(uneven_small, "uneven.plan.yaml");
  r = reduce_mesh(p, &sum);
  assert_non_null(strstr(sum, "mesh kept: tp 4 (an uneven shard's pattern)"));
  assert_null(strstr(sum, "; mesh: "));
  free(sum);
  assert_int_equal(r->mesh.axis_sizes[1], 4);
  plan_free(r);
  plan_free(p);

  char *prime = substitute(megatron_real, "dp=2, tp=4", "dp=2, tp=7");
  prime = replace(prime, "ffn=4096", "ffn=4102");
  prime = replace(prime, "ffn=4096", "ffn=4102");
  assert_non_null(prime);
  p = load_text(prime, "mlp-prime.plan.yaml");
  r = reduce_mesh(p, &sum);
  assert_non_null(
      strstr(sum, "mesh kept: tp 7 (no divisor between 1 and its size)"));
  free(sum);
  plan_free(r);
  plan_free(p);
  free(prime);
}

/* Bug: a transfer pairs a microbatch with the next one. */
static void pair_next_microbatch(plan_lowered *l) {
  for (int i = 0; i < l->nsteps; i++)
    if (l->steps[i].kind == PLAN_LSTEP_TRANSFER) {
      l->steps[i].mb_shift = 1;
      return;
    }
  fail_msg("no transfer step");
}

/* Bug: the last all-reduce (a gradient's sync) dropped. */
static void drop_last_all_reduce(plan_lowered *l) {
  for (int i = l->nsteps - 1; i >= 0; i--)
    if (l->steps[i].kind == PLAN_LSTEP_REDIST &&
        l->steps[i].redist.kind == PLAN_REDIST_ALL_REDUCE) {
      l->steps[i].redist.kind = PLAN_REDIST_RELABEL;
      return;
    }
  fail_msg("no all-reduce");
}

/* A pipeline's axis keeps its stages; the other axes shrink, and the
 * microbatches to the fewest that keep every phase of the schedule (1F1B
 * on 4 stages: 4). */
static void test_mesh_pipeline(void **state) {
  (void)state;
  plan_plan *p = load("examples/models/llama-32l.pp.plan.yaml");
  char *sum;
  plan_plan *r = reduce_mesh(p, &sum);
  assert_non_null(strstr(sum, "; mesh: tp 4->2 (32->16 ranks)"));
  assert_non_null(strstr(sum, "; microbatches 8->4"));
  assert_non_null(strstr(sum, "mesh kept: pp 4 (the pipeline's stages)"));
  assert_int_equal(r->pipeline.microbatches, 4);
  free(sum);
  plan_verify_report *rep;
  assert_int_equal(plan_verify(&rep, r, NULL), PLAN_OK);
  assert_true(plan_verify_report_equal(rep));
  plan_verify_report_free(rep);
  plan_free(r);
  plan_free(p);
}

/* Bugs found at full size are found on the reduced mesh alike. */
static void test_mesh_bugs(void **state) {
  (void)state;
  /* fewer microbatches: a transfer off by one microbatch, a dropped
   * gradient all-reduce */
  plan_plan *pipe = load("examples/transformer4-1f1b.plan.yaml");
  bug_on_reduced_mesh(pipe, pair_next_microbatch, NULL);
  bug_on_reduced_mesh(pipe, drop_last_all_reduce, NULL);
  plan_free(pipe);
  plan_plan *p = load_text(megatron_mid, "mlp-mid.plan.yaml");
  bug_on_reduced_mesh(p, drop_all_reduce, "partial sums");
  plan_free(p);
  p = load_text(megatron_sp, "mlp-sp.plan.yaml");
  bug_on_reduced_mesh(p, wrong_axis, NULL);
  bug_on_reduced_mesh(p, skip_gather, NULL);
  plan_free(p);
}

/* A lowered program reduces through its program: equal when it was, and
 * the bug injected into the reduced steps is found as at full size. */
static void test_lowered(void **state) {
  (void)state;
  static const char *const files[] = {"examples/mlp-megatron.plan.yaml",
                                      "examples/transformer-block.plan.yaml",
                                      "examples/moe-experts.plan.yaml"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    plan_plan *p = load(files[i]);
    plan_lowered *l, *rl;
    assert_int_equal(plan_lower(&l, p), PLAN_OK);
    char *sum;
    if (plan_reduce_lowered(&rl, &sum, l))
      show_error();
    assert_non_null(rl);
    assert_non_null(strstr(sum, "fewer elements"));
    free(sum);
    assert_int_equal(rl->nsteps, l->nsteps);
    assert_int_equal(rl->nbufs, l->nbufs);
    plan_lowered_free(l);
    plan_verify_report *r;
    assert_int_equal(plan_verify_lowered(&r, rl->plan, rl, NULL), PLAN_OK);
    assert_true(plan_verify_report_equal(r));
    plan_verify_report_free(r);
    plan_free(p);
  }
  plan_plan *p = load("examples/mlp-megatron.plan.yaml");
  plan_verify_report *full = run_mutated(p, drop_all_reduce, PLAN_VERIFY_EXACT);
  plan_lowered *l, *rl;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  assert_int_equal(plan_reduce_lowered(&rl, NULL, l), PLAN_OK);
  plan_lowered_free(l);
  drop_all_reduce(rl);
  plan_verify_report *red;
  assert_int_equal(plan_verify_lowered(&red, rl->plan, rl, NULL), PLAN_OK);
  same_finding(full, red, NULL, "partial sums");
  plan_verify_report_free(full);
  plan_verify_report_free(red);
  plan_free(p);
}

/* expand's shape follows its output's reduced dims; repeat_interleave's
 * repeats keep their size (its attribute names them). */
static void test_expand_repeat(void **state) {
  (void)state;
  static const char text[] =
      "libplan: \"0.1\"\n"
      "program:\n"
      "  name: rep\n"
      "  tensors:\n"
      "    x: {shape: [8, 2, 16], dtype: f32, role: input}\n"
      "    b: {shape: [1, 16], dtype: f32, role: param}\n"
      "  ops:\n"
      "    - {name: rep, op: repeat_interleave, in: [x], out: y, attrs: "
      "{repeats: 4, dim: 1}}\n"
      "    - {name: sum, op: reduce_sum, in: [y], out: z, attrs: {dims: [1]}}\n"
      "    - {name: bb, op: expand, in: [b], out: be, attrs: {shape: [8, "
      "16]}}\n"
      "    - {name: add, op: add, in: [z, be], out: o}\n"
      "  outputs: [o]\n"
      "mesh:\n"
      "  axes: [dp=2]\n"
      "placements:\n"
      "  x: S(0)\n"
      "strategies:\n"
      "  rep: {in: [S(0)], out: S(0)}\n"
      "  sum: {in: [S(0)], out: S(0)}\n"
      "  bb: {in: [R], out: R}\n"
      "  add: {in: [S(0), S(0)], out: S(0)}\n";
  plan_plan *p = load_text(text, "rep.yaml"), *r = NULL;
  char *sum = NULL;
  assert_int_equal(plan_reduce_shapes(&r, &sum, p), PLAN_OK);
  assert_non_null(strstr(sum, "the repeats of repeat_interleave"));
  plan_verify_report *rep = NULL;
  assert_int_equal(plan_verify(&rep, r, NULL), PLAN_OK);
  assert_true(plan_verify_report_equal(rep));
  plan_verify_report_free(rep);
  free(sum);
  plan_free(r);
  plan_free(p);
}

/* split's and concat's fused dim is a sum of parts: reduced part by part
 * (each part a count of the parts' gcd, the gcd reduced), so rope-style
 * halves and unequal parts with a common size keep their proportions and
 * the program verifies equal; parts with no common size keep theirs. */
static const char split_parts_text[] =
    "libplan: \"0.1\"\n"
    "program:\n"
    "  name: parts\n"
    "  tensors:\n"
    "    x: {shape: [8, 64], dtype: f32, role: input}\n"
    "    u: {shape: [8, 40], dtype: f32, role: input}\n"
    "  ops:\n"
    "    - {name: halves, op: split, in: [x], out: [x1, x2], attrs: {dim: 1, "
    "sizes: [32, 32]}}\n"
    "    - {name: neg, op: scale, in: [x2], out: nx2, attrs: {factor: -1.0}}\n"
    "    - {name: rot, op: concat, in: [nx2, x1], out: r, attrs: {dim: 1}}\n"
    "    - {name: odd, op: split, in: [u], out: [u1, u2], attrs: {dim: 1, "
    "sizes: [%d, %d]}}\n"
    "    - {name: back, op: concat, in: [u2, u1], out: w, attrs: {dim: 1}}\n"
    "  outputs: [r, w]\n"
    "mesh:\n"
    "  axes: [dp=2]\n"
    "placements:\n"
    "  x: S(0)\n"
    "  u: S(0)\n"
    "strategies:\n"
    "  halves: {in: [S(0)], out: [S(0), S(0)]}\n"
    "  neg: {in: [S(0)], out: S(0)}\n"
    "  rot: {in: [S(0), S(0)], out: S(0)}\n"
    "  odd: {in: [S(0)], out: [S(0), S(0)]}\n"
    "  back: {in: [S(0), S(0)], out: S(0)}\n";

static void test_split_parts(void **state) {
  (void)state;
  char text[sizeof split_parts_text + 16];
  snprintf(text, sizeof text, split_parts_text, 24, 16); /* gcd 8 */
  plan_plan *p = load_text(text, "parts.yaml");
  plan_plan *r = reduce_checked(p, true);
  /* 64 = 2 parts of 32, 32 -> 2: 4, and the rotation's concat follows */
  assert_int_equal(dim(r, "x", 1), 4);
  assert_int_equal(dim(r, "x1", 1), 2);
  assert_int_equal(dim(r, "r", 1), 4);
  /* 40 = 24 + 16: parts [3, 2] of 8, 8 -> 2 */
  assert_int_equal(dim(r, "u", 1), 10);
  assert_int_equal(dim(r, "u1", 1), 6);
  assert_int_equal(dim(r, "w", 1), 10);
  plan_free(r);
  plan_free(p);
  snprintf(text, sizeof text, split_parts_text, 23, 17); /* gcd 1 */
  p = load_text(text, "parts.yaml");
  char *sum = NULL;
  r = reduce(p, &sum);
  assert_int_equal(dim(r, "u", 1), 40);
  assert_int_equal(dim(r, "u1", 1), 23);
  assert_non_null(strstr(sum, "split/concat dim"));
  free(sum);
  check_equal(r);
  plan_free(r);
  plan_free(p);
}

/* What cannot be reduced says so; NULL arguments are usage errors. */
static void test_refused(void **state) {
  (void)state;
  plan_plan *p = load("spec/vectors/valid/regions.yaml"); /* manual */
  plan_plan *r = NULL;
  char *sum = (char *)"x";
  assert_int_equal(plan_reduce_shapes(&r, &sum, p), PLAN_EUNSUPPORTED);
  assert_null(r);
  assert_null(sum);
  assert_non_null(strstr(plan_error_last()->message, "manual region"));
  plan_free(p);
  assert_int_equal(plan_reduce_shapes(&r, NULL, NULL), PLAN_EUSAGE);
  p = load("examples/mlp-megatron.plan.yaml");
  assert_int_equal(plan_reduce_shapes(NULL, NULL, p), PLAN_EUSAGE);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples),
      cmocka_unit_test(test_megatron_real_size),
      cmocka_unit_test(test_vocab_uneven),
      cmocka_unit_test(test_uneven_patterns),
      cmocka_unit_test(test_idempotent),
      cmocka_unit_test(test_bug_dropped_all_reduce),
      cmocka_unit_test(test_bug_wrong_axis),
      cmocka_unit_test(test_bug_gather_left_out),
      cmocka_unit_test(test_lowered),
      cmocka_unit_test(test_mesh_even),
      cmocka_unit_test(test_mesh_uneven),
      cmocka_unit_test(test_mesh_pipeline),
      cmocka_unit_test(test_mesh_bugs),
      cmocka_unit_test(test_expand_repeat),
      cmocka_unit_test(test_split_parts),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
