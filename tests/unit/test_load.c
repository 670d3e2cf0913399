/* Unit tests for loading plans and programs from buffers (program_read.c,
 * program.c, mesh_read.c, plan_read.c, plan_sections.c): every section reads
 * into the IR it describes, and every kind of bad input fails with the right
 * status code at the right line and column (1-based) with a message that
 * names the problem. */
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
#include <sys/stat.h>
#include <unistd.h>

#include "libplan/libplan.h"
#include "ir/ops.h"
#include "read/plan_read.h"

/* ---- helpers ------------------------------------------------------------- */

#define HDR "libplan: \"" PLAN_FORMAT_STRING "\"\n"
/* A two-op program, lines 2..8 of a document that starts with HDR. */
#define PROG                                                                   \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "    w: {shape: [16, 4], role: param}\n"                                     \
  "  ops:\n"                                                                   \
  "    - {name: mm, op: matmul, in: [x, w], out: y}\n"                         \
  "    - {name: act, op: relu, in: [y], out: z}\n"
/* Lines 9..10. */
#define MESH22 "mesh:\n  axes: [dp=2, tp=2]\n"

static int load_n(plan_plan **p, const char *text, size_t len) {
  return plan_load_buffer(p, text, len, "t.yaml", NULL);
}

static plan_plan *load_ok(const char *text) {
  plan_plan *p = NULL;
  int rc = load_n(&p, text, strlen(text));
  if (rc != PLAN_OK) {
    char buf[1200];
    print_message("unexpected failure: %s\n",
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  assert_non_null(p);
  return p;
}

/* Loading `text` fails with `code` at line:col in `file` and a message
 * containing `words` (NULL: not checked). */
static void expect_fail_in(const char *text, int code, const char *file,
                           int line, int col, const char *words) {
  plan_plan *p = (plan_plan *)(uintptr_t)1;
  int rc = load_n(&p, text, strlen(text));
  const plan_error *e = plan_error_last();
  bool nulled = p == NULL;
  if (rc == PLAN_OK)
    plan_free(p); /* wrong, and reported below; no leak */
  if (rc != code || e->line != line || e->column != col ||
      (words && !strstr(e->message, words)) || strcmp(e->file, file))
    print_message("for:\n%s\ngot %s (%d) %s:%d:%d: %s\n", text,
                  plan_status_name(rc), rc, e->file, e->line, e->column,
                  e->message);
  assert_int_equal(rc, code);
  assert_true(nulled);
  assert_int_equal(e->code, code);
  assert_string_equal(e->file, file);
  assert_int_equal(e->line, line);
  assert_int_equal(e->column, col);
  if (words)
    assert_non_null(strstr(e->message, words));
}

static void expect_fail(const char *text, int code, int line, int col,
                        const char *words) {
  expect_fail_in(text, code, "t.yaml", line, col, words);
}

static int tensor(const plan_plan *p, const char *name) {
  int t = plan_program_tensor_find(plan_get_program(p), name);
  if (t < 0)
    print_message("no tensor '%s'\n", name);
  assert_true(t >= 0);
  return t;
}

static int op(const plan_plan *p, const char *name) {
  int o = plan_program_op_find(plan_get_program(p), name);
  if (o < 0)
    print_message("no op '%s'\n", name);
  assert_true(o >= 0);
  return o;
}

static void assert_tensor_pl(const plan_plan *p, const char *name,
                             const char *want) {
  char buf[128];
  assert_int_equal(plan_tensor_placement(buf, sizeof buf, p, tensor(p, name)),
                   PLAN_OK);
  assert_string_equal(buf, want);
}

static void assert_op_pl(const plan_plan *p, const char *name, int output,
                         int slot, const char *want) {
  char buf[128];
  assert_int_equal(
      plan_op_placement(buf, sizeof buf, p, op(p, name), output, slot),
      PLAN_OK);
  assert_string_equal(buf, want);
}

static const plan_value *map_get(const plan_value *v, const char *key) {
  assert_int_equal(v->kind, PLAN_V_MAP);
  for (int i = 0; i < v->n; i++)
    if (!strcmp(v->keys[i], key))
      return v->items[i];
  return NULL;
}

static const plan_value *ext_get(const plan_ext *e, const char *key) {
  if (!e)
    return NULL;
  for (int i = 0; i < e->n; i++)
    if (!strcmp(e->keys[i], key))
      return e->vals[i];
  return NULL;
}

/* ---- program ------------------------------------------------------------- */

static const char program_text[] = HDR
    "program:\n"
    "  name: tiny\n"
    "  tensors:\n"
    "    ids: {shape: [batch=4, seq=8], dtype: i64, role: input, range: [0, "
    "32]}\n"
    "    labels: {shape: [4], dtype: i32, range: [-1, 16]}\n"
    "    emb: {shape: [32, 16], dtype: bf16, role: param}\n"
    "    w: {shape: [16, 48], dtype: bf16, role: param}\n"
    "    mask: {shape: [8, 8], role: const, init: {recipe: causal_mask, fill: "
    "-1e4}}\n"
    "    cs: {shape: [8, 16], role: const, init: {recipe: rope_cos, theta: "
    "5e5}}\n"
    "    sn: {shape: [8, 16], role: const, init: rope_sin}\n"
    "    one: {shape: [], dtype: f64, role: const, init: ones}\n"
    "    h3: {shape: [4, 32], dtype: bf16}\n"
    "  ops:\n"
    /* consumers listed before producers: loading sorts them */
    "    - {name: loss, op: cross_entropy, in: [logits, labels], out: L}\n"
    "    - {name: embed, op: embedding, in: [emb, ids], out: h0}\n"
    "    - {name: cast, op: scale, in: [h0], out: h1, attrs: {factor: 0.5}}\n"
    "    - {name: qkv, op: matmul, in: [h1, w], out: h2, attrs: {transpose_b: "
    "false}}\n"
    "    - {name: split, op: split, in: [h2], out: [q, k, v], attrs: {dim: -1, "
    "sizes: [16, 16, 16]}}\n"
    "    - {name: kt, op: transpose, in: [k], out: kT, attrs: {dims: [-2, "
    "-1]}}\n"
    "    - {name: sc, op: matmul, in: [q, kT], out: s}\n"
    "    - {name: sm, op: softmax, in: [s], out: p, attrs: {dim: -1}}\n"
    "    - {name: pv, op: matmul, in: [p, v], out: o}\n"
    "    - {name: cat, op: concat, in: [o, q], out: oq, attrs: {dim: 2}}\n"
    "    - {name: red, op: reduce_sum, in: [oq], out: h3, attrs: {dims: [1], "
    "keepdim: false}}\n"
    "    - {name: act, op: gelu, in: [h3], out: logits, attrs: {approximate: "
    "tanh}}\n"
    "    - {name: flat, op: reshape, in: [logits], out: flat, attrs: {shape: "
    "[-1]}}\n"
    "  outputs: [L, flat]\n"
    "  loss: L\n";

static void test_program_sections(void **state) {
  (void)state;
  plan_plan *p = load_ok(program_text);
  const plan_program *g = plan_get_program(p);
  assert_int_equal(plan_has_mesh(p), 0);
  assert_string_equal(plan_file(p), "t.yaml");
  assert_string_equal(plan_program_name(g), "tiny");
  assert_int_equal(plan_program_op_count(g), 13);

  /* shapes, dtypes, roles, dim names, ranges */
  int64_t dims[8];
  int ids = tensor(p, "ids");
  assert_int_equal(plan_program_tensor_shape(g, ids, dims, 8), 2);
  assert_int_equal(dims[0], 4);
  assert_int_equal(dims[1], 8);
  assert_string_equal(plan_program_tensor_dtype(g, ids), "i64");
  assert_string_equal(plan_program_tensor_role(g, ids), "input");
  assert_non_null(g->tensors[ids].dim_names);
  assert_string_equal(g->tensors[ids].dim_names[0], "batch");
  assert_string_equal(g->tensors[ids].dim_names[1], "seq");
  assert_true(g->tensors[ids].has_range);
  assert_int_equal(g->tensors[ids].range_lo, 0);
  assert_int_equal(g->tensors[ids].range_hi, 32);
  int labels = tensor(p, "labels");
  assert_string_equal(plan_program_tensor_role(g, labels), "input");
  assert_string_equal(plan_program_tensor_dtype(g, labels), "i32");
  assert_null(g->tensors[labels].dim_names); /* no named dim */
  assert_int_equal(g->tensors[labels].range_lo, -1);
  assert_string_equal(plan_program_tensor_dtype(g, tensor(p, "emb")), "bf16");
  assert_string_equal(plan_program_tensor_role(g, tensor(p, "emb")), "param");
  assert_string_equal(plan_program_tensor_dtype(g, tensor(p, "mask")), "f32");

  /* init recipes */
  const plan_tensor *mask = &g->tensors[tensor(p, "mask")];
  assert_int_equal(mask->recipe, PLAN_RECIPE_CAUSAL_MASK);
  assert_true(mask->recipe_fill == -1e4);
  assert_true(mask->recipe_theta == 10000.0);
  const plan_tensor *cs = &g->tensors[tensor(p, "cs")];
  assert_int_equal(cs->recipe, PLAN_RECIPE_ROPE_COS);
  assert_true(cs->recipe_theta == 5e5);
  assert_true(cs->recipe_fill == -1e9);
  assert_int_equal(g->tensors[tensor(p, "sn")].recipe, PLAN_RECIPE_ROPE_SIN);
  const plan_tensor *one = &g->tensors[tensor(p, "one")];
  assert_int_equal(one->recipe, PLAN_RECIPE_ONES);
  assert_int_equal(one->rank, 0);
  assert_string_equal(plan_program_tensor_role(g, tensor(p, "one")), "const");

  /* inferred shapes of produced tensors, including a declared one */
  int64_t d2[8];
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "h0"), d2, 8), 3);
  assert_int_equal(d2[2], 16);
  assert_string_equal(plan_program_tensor_dtype(g, tensor(p, "h0")), "bf16");
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "kT"), d2, 8), 3);
  assert_int_equal(d2[1], 16);
  assert_int_equal(d2[2], 8);
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "oq"), d2, 8), 3);
  assert_int_equal(d2[2], 32);
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "h3"), d2, 8), 2);
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "flat"), d2, 8), 1);
  assert_int_equal(d2[0], 4 * 32);
  assert_int_equal(plan_program_tensor_shape(g, tensor(p, "L"), NULL, 0), 0);
  assert_string_equal(plan_program_tensor_role(g, tensor(p, "h3")),
                      "activation");
  assert_string_equal(plan_program_tensor_role(g, tensor(p, "L")), "output");
  assert_string_equal(plan_program_tensor_role(g, tensor(p, "flat")), "output");

  /* ops: kinds, attributes, operands, multi-output split */
  int sp = op(p, "split");
  assert_string_equal(plan_program_op_kind(g, sp), "split");
  assert_int_equal(plan_program_op_output(g, sp, 0), tensor(p, "q"));
  assert_int_equal(plan_program_op_output(g, sp, 2), tensor(p, "v"));
  assert_int_equal(plan_program_op_output(g, sp, 3), -1);
  /* dim attributes are stored normalised: -1 on rank 3 is 2 */
  assert_int_equal(g->ops[sp].attrs[0].i, 2);
  assert_int_equal(g->ops[sp].attrs[1].nints, 3);
  assert_true(g->ops[sp].attrs[1].present);
  assert_true(g->ops[op(p, "cast")].attrs[0].f == 0.5);
  assert_string_equal(g->ops[op(p, "act")].attrs[0].s, "tanh");
  assert_int_equal(g->ops[op(p, "cat")].attrs[0].i, 2);
  assert_int_equal(g->ops[op(p, "red")].attrs[0].ints[0], 1);
  assert_false(g->ops[op(p, "qkv")].attrs[1].b);
  assert_true(g->ops[op(p, "qkv")].attrs[1].present);
  assert_false(g->ops[op(p, "qkv")].attrs[0].present);
  assert_int_equal(plan_program_op_input(g, op(p, "loss"), 0),
                   tensor(p, "logits"));
  assert_int_equal(plan_program_op_input(g, op(p, "loss"), 2), -1);
  assert_null(plan_program_op_name(g, 99));
  assert_null(plan_program_op_kind(g, -1));

  /* ops come out in topological order, earliest in the file first */
  assert_int_equal(op(p, "embed"), 0);
  assert_int_equal(op(p, "flat"), 12);
  assert_true(op(p, "loss") > op(p, "act"));
  for (int i = 0; i < g->nops; i++)
    for (int j = 0; j < g->ops[i].nin; j++) {
      int pr = g->tensors[g->ops[i].in[j]].producer;
      assert_true(pr < i);
    }

  /* outputs and loss */
  assert_int_equal(g->noutputs, 2);
  assert_true(g->outputs_explicit);
  assert_int_equal(g->outputs[0], tensor(p, "L"));
  assert_int_equal(g->outputs[1], tensor(p, "flat"));
  assert_int_equal(g->loss, tensor(p, "L"));
  assert_int_equal(g->loss_pos.line, 29);
  assert_int_equal(g->loss_pos.col, 9);

  /* positions of declarations and ops */
  assert_int_equal(g->tensors[ids].pos.line, 5);
  assert_int_equal(g->tensors[ids].pos.col, 5);
  assert_int_equal(g->ops[op(p, "loss")].pos.line, 15);
  assert_int_equal(g->ops[op(p, "loss")].pos.col, 7);

  /* signatures exist and differ between ops */
  assert_true(plan_program_op_signature(g, 0) != 0);
  assert_true(plan_program_op_signature(g, 0) !=
              plan_program_op_signature(g, 1));
  plan_free(p);
}

static void test_program_only_document(void **state) {
  (void)state;
  plan_plan *p = load_ok(program_text);
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, p, PLAN_PART_PROGRAM), PLAN_OK);
  assert_int_equal(plan_hash_part(&h, p, PLAN_PART_PLAN), PLAN_ENOTFOUND);
  assert_int_equal(plan_hash_part(&h, p, PLAN_PART_MESH), PLAN_ENOTFOUND);
  assert_int_equal(plan_hash_part(&h, p, PLAN_PART_PROVENANCE), PLAN_ENOTFOUND);
  assert_int_equal(plan_mesh_axis_count(p), 0);
  assert_int_equal(plan_mesh_device_count(p), 0);
  assert_int_equal(plan_stage_count(p), 0);
  char buf[64];
  assert_int_equal(plan_tensor_placement(buf, sizeof buf, p, 0),
                   PLAN_ENOTFOUND);

  /* The same text through the program loader. */
  plan_program *g = NULL;
  assert_int_equal(plan_program_load_buffer(&g, program_text,
                                            strlen(program_text), "prog.yaml"),
                   PLAN_OK);
  assert_int_equal(plan_program_op_count(g), 13);
  plan_hash hp;
  assert_int_equal(plan_program_hash(&hp, g), PLAN_OK);
  assert_true(plan_hash_equal(h, hp));
  plan_program_free(g);
  plan_program_free(NULL);
  plan_free(p);
  plan_free(NULL);

  /* A program-only document may not carry plan sections. */
  expect_fail(HDR PROG "strategies: {}\n", PLAN_ESCHEMA, 1, 1,
              "'strategies' needs a 'mesh'");
  /* The program loader refuses a plan whose program is a path. */
  const char *ref = HDR "program: {path: p.yaml}\n";
  assert_int_equal(plan_program_load_buffer(&g, ref, strlen(ref), "r.yaml"),
                   PLAN_EUNSUPPORTED);
  assert_null(g);
  assert_int_equal(plan_error_last()->line, 2);
  assert_int_equal(plan_error_last()->column, 10);
}

static void test_default_outputs(void **state) {
  (void)state;
  /* No `outputs:`: every produced tensor nothing consumes, in topological
   * order of the producers; role: output keeps a consumed one. */
  plan_plan *p = load_ok(HDR "program:\n"
                             "  tensors:\n"
                             "    x: {shape: [4]}\n"
                             "    b: {shape: [4], role: output}\n"
                             "  ops:\n"
                             "    - {name: o2, op: relu, in: [b], out: c}\n"
                             "    - {name: o1, op: exp, in: [x], out: b}\n"
                             "    - {name: o3, op: tanh, in: [x], out: d}\n");
  const plan_program *g = plan_get_program(p);
  assert_false(g->outputs_explicit);
  assert_int_equal(g->noutputs, 3);
  assert_int_equal(g->outputs[0], tensor(p, "b"));
  assert_int_equal(g->outputs[1], tensor(p, "c"));
  assert_int_equal(g->outputs[2], tensor(p, "d"));
  assert_int_equal(g->loss, -1);
  plan_free(p);
}

/* ---- mesh ------------------------------------------------------------------
 */

static plan_plan *load_mesh(const char *mesh_body) {
  char text[4096];
  snprintf(text, sizeof text, HDR PROG "mesh:\n%s", mesh_body);
  return load_ok(text);
}

static void assert_devices(const plan_plan *p, const int64_t *want, int n) {
  assert_int_equal(plan_mesh_device_count(p), n);
  for (int i = 0; i < n; i++)
    assert_int_equal(plan_mesh_device(p, i), want[i]);
  assert_int_equal(plan_mesh_device(p, n), -1);
  assert_int_equal(plan_mesh_device(p, -1), -1);
}

static void test_mesh_devices(void **state) {
  (void)state;
  static const int64_t ident[] = {0, 1, 2, 3, 4, 5};
  plan_plan *p = load_mesh("  axes: [dp=2, tp=3]\n  devices: iota\n");
  assert_int_equal(plan_mesh_axis_count(p), 2);
  assert_string_equal(plan_mesh_axis_name(p, 0), "dp");
  assert_string_equal(plan_mesh_axis_name(p, 1), "tp");
  assert_null(plan_mesh_axis_name(p, 2));
  assert_int_equal(plan_mesh_axis_size(p, 0), 2);
  assert_int_equal(plan_mesh_axis_size(p, 1), 3);
  assert_int_equal(plan_mesh_axis_size(p, 2), -1);
  assert_devices(p, ident, 6);
  assert_null(p->mesh.devices);
  assert_int_equal(p->mesh_pos.line, 10);
  plan_free(p);

  /* devices omitted: iota */
  p = load_mesh("  axes: [dp=2, tp=3]\n");
  assert_devices(p, ident, 6);
  plan_free(p);

  /* explicit flat list */
  static const int64_t flat[] = {5, 4, 3, 2, 1, 0};
  p = load_mesh("  axes: [dp=2, tp=3]\n  devices: [5, 4, 3, 2, 1, 0]\n");
  assert_devices(p, flat, 6);
  plan_free(p);

  /* nested list, row-major */
  static const int64_t nested[] = {0, 2, 4, 1, 3, 5};
  p = load_mesh("  axes: [dp=2, tp=3]\n  devices: [[0, 2, 4], [1, 3, 5]]\n");
  assert_devices(p, nested, 6);
  plan_free(p);

  /* {iota, transpose}: arange(6).reshape(3, 2).T.flatten() */
  p = load_mesh("  axes: [dp=2, tp=3]\n"
                "  devices: {iota: [3, 2], transpose: [1, 0]}\n");
  assert_devices(p, nested, 6);
  plan_free(p);

  /* 3-d iota with a permutation: arange(8).reshape(2,2,2).transpose(2,0,1) */
  static const int64_t perm3[] = {0, 2, 4, 6, 1, 3, 5, 7};
  p = load_mesh("  axes: [a=2, b=4]\n"
                "  devices: {iota: [2, 2, 2], transpose: [2, 0, 1]}\n");
  assert_devices(p, perm3, 8);
  plan_free(p);

  /* an explicit identity is the default: stored as iota */
  p = load_mesh("  axes: [dp=2, tp=3]\n  devices: [[0, 1, 2], [3, 4, 5]]\n");
  assert_null(p->mesh.devices);
  plan_free(p);
  p = load_mesh("  axes: [dp=2, tp=3]\n  devices: {iota: [6]}\n");
  assert_null(p->mesh.devices);
  plan_free(p);

  /* hosts, submeshes, hardware */
  p = load_mesh("  axes: [pp=2, tp=2]\n"
                "  devices_per_host: 2\n"
                "  submeshes: {s0: {pp: 0}, s1: {pp: 1}, row: {tp: 1}}\n"
                "  hardware:\n"
                "    name: H100\n"
                "    flops: {bf16: 9.89e14, f32: 6.7e13}\n"
                "    memory: 8.0e10\n"
                "    memory_bandwidth: 3.35e12\n"
                "    intra_host: {bandwidth: 4.5e11, latency: 1e-6}\n"
                "    inter_host: {bandwidth: 5e10}\n"
                "    links: {tp: {bandwidth: 9e11, latency: 0.000001}}\n");
  const plan_mesh *m = &p->mesh;
  assert_int_equal(m->devices_per_host, 2);
  assert_int_equal(m->nsubmeshes, 3);
  assert_string_equal(m->submeshes[0].name, "s0");
  assert_int_equal(m->submeshes[0].index[0], 0);
  assert_int_equal(m->submeshes[0].index[1], -1);
  assert_int_equal(m->submeshes[1].index[0], 1);
  assert_int_equal(m->submeshes[2].index[0], -1);
  assert_int_equal(m->submeshes[2].index[1], 1);
  assert_non_null(m->hardware);
  assert_string_equal(m->hardware->name, "H100");
  assert_true(m->hardware->flops[PLAN_BF16] == 9.89e14);
  assert_true(m->hardware->flops[PLAN_F32] == 6.7e13);
  assert_true(m->hardware->flops[PLAN_F16] == 0);
  assert_true(m->hardware->memory == 8e10);
  assert_true(m->hardware->memory_bandwidth == 3.35e12);
  assert_true(m->hardware->intra_host.bandwidth == 4.5e11);
  assert_true(m->hardware->intra_host.latency == 1e-6);
  assert_true(m->hardware->inter_host.bandwidth == 5e10);
  assert_true(m->hardware->inter_host.latency == 0);
  assert_true(m->hardware->axis_link[1].bandwidth == 9e11);
  assert_true(m->hardware->axis_link[1].latency == 1e-6);
  assert_true(m->hardware->axis_link[0].bandwidth == 0);
  plan_free(p);
}

static void test_mesh_errors(void **state) {
  (void)state;
  expect_fail(HDR PROG "mesh:\n  axes: {dp: 2}\n", PLAN_ESCHEMA, 10, 9,
              "must be a sequence");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp]\n", PLAN_ESCHEMA, 10, 16,
              "NAME=SIZE");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=0]\n", PLAN_EINVALID, 10, 10,
              "size >= 1");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, dp=2]\n", PLAN_EINVALID, 10, 16,
              "named twice");
  expect_fail(HDR PROG "mesh:\n  axes: []\n", PLAN_ELIMIT, 10, 9,
              "1 to 8 axes");
  expect_fail(HDR PROG "mesh:\n  devices: iota\n", PLAN_ESCHEMA, 10, 3,
              "mesh needs 'axes");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n  devices: [0, 1, 2]\n",
              PLAN_EINVALID, 11, 12, "lists 3 ids but the mesh has 4");
  expect_fail(HDR PROG
              "mesh:\n  axes: [dp=2, tp=2]\n  devices: [0, 1, 2, 3, 4]\n",
              PLAN_EINVALID, 11, 25, "more device ids");
  expect_fail(HDR PROG
              "mesh:\n  axes: [dp=2, tp=2]\n  devices: [0, -1, 2, 3]\n",
              PLAN_EINVALID, 11, 16, "negative");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n  devices: [0, x, 2, 3]\n",
              PLAN_ESCHEMA, 11, 16, "integer");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, order=2]\n", PLAN_EINVALID, 10,
              16, "reserved");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n  devices: ring\n",
              PLAN_ESCHEMA, 11, 12, "devices must be 'iota'");
  expect_fail(HDR PROG
              "mesh:\n  axes: [dp=2, tp=2]\n  devices: {iota: [2, 3]}\n",
              PLAN_EINVALID, 11, 19, "hold 6 devices but the mesh has 4");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n"
                       "  devices: {iota: [2, 2], transpose: [0, 0]}\n",
              PLAN_EINVALID, 11, 38, "permutation");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n"
                       "  devices: {iota: [2, 2], order: [1, 0]}\n",
              PLAN_ESCHEMA, 11, 27, "unknown field 'order'");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n  devices_per_host: 0\n",
              PLAN_EINVALID, 11, 21, ">= 1");
  expect_fail(HDR PROG
              "mesh:\n  axes: [dp=2, tp=2]\n  submeshes: {a: {pp: 0}}\n",
              PLAN_EINVALID, 11, 19, "no mesh axis 'pp'");
  expect_fail(HDR PROG
              "mesh:\n  axes: [dp=2, tp=2]\n  submeshes: {a: {dp: 2}}\n",
              PLAN_EINVALID, 11, 23, "outside axis dp");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n"
                       "  hardware: {flops: {f8: 1}}\n",
              PLAN_ESCHEMA, 11, 22, "unknown dtype 'f8'");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n"
                       "  hardware: {memory: -1}\n",
              PLAN_EINVALID, 11, 13, ">= 0");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2, tp=2]\n"
                       "  hardware: {links: {pp: {bandwidth: 1}}}\n",
              PLAN_EINVALID, 11, 22, "no mesh axis 'pp'");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=4096, tp=4096, ep=4096]\n",
              PLAN_ELIMIT, 10, 19, "more than");
}

/* ---- placements
 * -------------------------------------------------------------- */

static void test_placements(void **state) {
  (void)state;
  plan_plan *p = load_ok(HDR PROG MESH22 "placements:\n"
                                         "  x: {dp: S(0), tp: R}\n"
                                         "  w: Replicate() Shard(-1)\n");
  assert_tensor_pl(p, "x", "S(0)R");
  assert_tensor_pl(p, "w", "RS(1)");
  assert_int_equal(p->placements[tensor(p, "x")].pos.line, 12);
  assert_int_equal(p->placements[tensor(p, "x")].pos.col, 3);
  plan_free(p);

  /* Map form: missing axes are R; `order:` states the nesting. */
  p = load_ok(HDR PROG MESH22
              "placements:\n"
              "  x: {tp: S(0), dp: S(0), order: {0: [tp, dp]}}\n"
              "  w: {tp: P(max)}\n");
  assert_tensor_pl(p, "x", "S(0:1)S(0:0)");
  const plan_placement *pl = &p->placements[tensor(p, "x")].pl;
  assert_int_equal(pl->ax[0].level, 1);
  assert_int_equal(pl->ax[1].level, 0);
  assert_tensor_pl(p, "w", "RP(max)");
  plan_free(p);

  /* The same nesting in compact form; mesh order needs no level. */
  p = load_ok(HDR PROG MESH22 "placements:\n"
                              "  x: S(0:1)S(0:0)\n"
                              "  w: S(-2)S(0)\n");
  assert_tensor_pl(p, "x", "S(0:1)S(0:0)");
  assert_tensor_pl(p, "w", "S(0)S(0)");
  plan_free(p);

  /* A tensor the plan says nothing about is stored replicated. */
  p = load_ok(HDR PROG MESH22);
  assert_tensor_pl(p, "w", "RR");
  assert_false(p->placements[tensor(p, "w")].set);
  plan_free(p);
}

static void test_placement_errors(void **state) {
  (void)state;
  /* The column points into the string at the offending entry. */
  expect_fail(HDR PROG MESH22 "placements:\n  x: RS(x)\n", PLAN_EINVALID, 12, 7,
              "decimal integer");
  /* quoted: one more for the quote */
  expect_fail(HDR PROG MESH22 "placements:\n  x: \"R Q\"\n", PLAN_EINVALID, 12,
              9, "unknown placement entry");
  expect_fail(HDR PROG MESH22 "placements:\n  x: RP(prod)\n", PLAN_EINVALID, 12,
              7, "unknown reduce op 'prod'");
  /* wrong number of axes: at the first extra entry, or the end */
  expect_fail(HDR PROG MESH22 "placements:\n  x: RRS(0)\n", PLAN_EINVALID, 12,
              8, "3 entries but the mesh has 2 axes");
  expect_fail(HDR PROG MESH22 "placements:\n  x: S(0)\n", PLAN_EINVALID, 12, 10,
              "1 entry but the mesh has 2 axes");
  /* dims are checked against the tensor's rank */
  expect_fail(HDR PROG MESH22 "placements:\n  x: S(2)R\n", PLAN_EINVALID, 12, 6,
              "S(2) is out of range for a tensor of rank 2");
  expect_fail(HDR PROG MESH22 "placements:\n  x: S(0:0)S(0)\n", PLAN_EINVALID,
              12, 6, "nesting level");
  /* map form */
  expect_fail(HDR PROG MESH22 "placements:\n  x: {dp: Q}\n", PLAN_EINVALID, 12,
              11, "unknown placement entry");
  expect_fail(HDR PROG MESH22 "placements:\n  x: {pp: R}\n", PLAN_EINVALID, 12,
              7, "no mesh axis 'pp'");
  expect_fail(HDR PROG MESH22 "placements:\n  x: {dp: [R]}\n", PLAN_ESCHEMA, 12,
              11, "must be a scalar");
  expect_fail(HDR PROG MESH22
              "placements:\n  x: {dp: S(0), tp: R, order: {0: [tp, dp]}}\n",
              PLAN_EINVALID, 12, 35, "tp does not shard dim 0");
  expect_fail(HDR PROG MESH22 "placements:\n  x: [R, R]\n", PLAN_ESCHEMA, 12, 6,
              "a placement is a string");
  /* placements are for leaves; an op output's comes from its strategy */
  expect_fail(HDR PROG MESH22 "placements:\n  y: RR\n", PLAN_EINVALID, 12, 3,
              "produced by op 'mm'");
}

/* ---- strategies -----------------------------------------------------------
 */

#define LAYERS                                                                 \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "  ops:\n"                                                                   \
  "    - {name: l0.a, op: relu, in: [x], out: a0}\n"                           \
  "    - {name: l0.b, op: tanh, in: [a0], out: b0}\n"                          \
  "    - {name: l1.a, op: relu, in: [b0], out: a1}\n"                          \
  "    - {name: l1.b, op: tanh, in: [a1], out: b1}\n"

static void test_strategies(void **state) {
  (void)state;
  /* exact names, a single-output `out` given bare or as a list */
  plan_plan *p =
      load_ok(HDR PROG MESH22 "strategies:\n"
                              "  mm: {in: [S(0)R, RS(1)], out: [S(0)S(1)]}\n"
                              "  act: {in: S(0)S(1), out: S(0)S(1)}\n");
  assert_op_pl(p, "mm", 0, 0, "S(0)R");
  assert_op_pl(p, "mm", 0, 1, "RS(1)");
  assert_op_pl(p, "mm", 1, 0, "S(0)S(1)");
  assert_op_pl(p, "act", 0, 0, "S(0)S(1)");
  char buf[64];
  assert_int_equal(plan_op_placement(buf, sizeof buf, p, op(p, "mm"), 0, 2),
                   PLAN_ENOTFOUND);
  assert_int_equal(p->strategies[op(p, "mm")].pos.line, 12);
  assert_null(p->strategies[op(p, "mm")].pattern);
  plan_free(p);

  /* A glob covers every op it matches; exact names win over globs wherever
   * they are written. */
  p = load_ok(HDR LAYERS "mesh:\n  axes: [dp=2]\n"
                         "strategies:\n"
                         "  l1.b: {in: [R], out: R}\n"
                         "  \"l*\": {in: [S(0)], out: S(0)}\n"
                         "  l0.a: {in: [S(1)], out: S(1)}\n");
  assert_op_pl(p, "l0.a", 1, 0, "S(1)");
  assert_op_pl(p, "l0.b", 1, 0, "S(0)");
  assert_op_pl(p, "l1.a", 1, 0, "S(0)");
  assert_op_pl(p, "l1.b", 1, 0, "R");
  assert_string_equal(p->strategies[op(p, "l0.b")].pattern, "l*");
  assert_null(p->strategies[op(p, "l1.b")].pattern);
  plan_free(p);

  /* Globs that do not overlap; ?, [] and * */
  p = load_ok(HDR LAYERS "mesh:\n  axes: [dp=2]\n"
                         "strategies:\n"
                         "  \"l?.a\": {in: [S(0)], out: S(0)}\n"
                         "  \"l[01].b\": {in: [S(1)], out: S(1)}\n"
                         "  \"nothing.*\": {in: [R], out: R}\n");
  assert_op_pl(p, "l0.a", 1, 0, "S(0)");
  assert_op_pl(p, "l1.a", 1, 0, "S(0)");
  assert_op_pl(p, "l0.b", 1, 0, "S(1)");
  assert_op_pl(p, "l1.b", 1, 0, "S(1)");
  plan_free(p);

  /* An exact name wins over a glob written before it, also when the glob's
   * placements would not fit that op (it has another number of inputs). */
  p = load_ok(HDR PROG MESH22 "strategies:\n"
                              "  \"*\": {in: [S(0)R], out: S(0)R}\n"
                              "  mm: {in: [S(0)R, RS(1)], out: S(0)S(1)}\n");
  assert_op_pl(p, "mm", 0, 1, "RS(1)");
  assert_op_pl(p, "act", 1, 0, "S(0)R");
  plan_free(p);

  /* A strategy-less op: the view says so. */
  p = load_ok(HDR PROG MESH22 "strategies:\n  mm: {in: [RR, RR], out: RR}\n");
  assert_int_equal(plan_op_placement(buf, sizeof buf, p, op(p, "act"), 1, 0),
                   PLAN_ENOTFOUND);
  plan_free(p);
}

static void test_strategy_errors(void **state) {
  (void)state;
  /* Two globs claiming one op without an exact entry: an error at the
   * second, naming both patterns and the op. */
  expect_fail(HDR LAYERS "mesh:\n  axes: [dp=2]\n"
                         "strategies:\n"
                         "  \"l0.*\": {in: [R], out: R}\n"
                         "  \"*.a\": {in: [R], out: R}\n",
              PLAN_EINVALID, 14, 3, "op 'l0.a' matches both 'l0.*' and '*.a'");
  /* ... unless an exact entry settles it */
  plan_plan *p = load_ok(HDR LAYERS "mesh:\n  axes: [dp=2]\n"
                                    "strategies:\n"
                                    "  \"l0.*\": {in: [R], out: R}\n"
                                    "  \"*.a\": {in: [S(0)], out: S(0)}\n"
                                    "  l0.a: {in: [S(1)], out: S(1)}\n");
  assert_op_pl(p, "l0.a", 1, 0, "S(1)");
  assert_op_pl(p, "l0.b", 1, 0, "R");
  assert_op_pl(p, "l1.a", 1, 0, "S(0)");
  plan_free(p);

  expect_fail(HDR PROG MESH22 "strategies:\n  mm: {in: [RR], out: RR}\n",
              PLAN_EINVALID, 12, 12, "in lists 1 placement, the op has 2");
  expect_fail(HDR PROG MESH22 "strategies:\n  mm: {in: [RR, RR]}\n",
              PLAN_ESCHEMA, 12, 7, "needs 'in' and 'out'");
  expect_fail(HDR PROG MESH22
              "strategies:\n  mm: {in: [RR, RR], out: RR, cost: 1}\n",
              PLAN_ESCHEMA, 12, 31, "unknown field 'cost'");
  expect_fail(HDR PROG MESH22 "strategies:\n  mm: [RR, RR]\n", PLAN_ESCHEMA, 12,
              7, "a strategy");
  /* a bad spelling inside a strategy names the op and points into the
   * string */
  expect_fail(HDR PROG MESH22 "strategies:\n  act: {in: [S(0)X], out: RR}\n",
              PLAN_EINVALID, 12, 18, "strategy of op 'act'");
}

/* ---- outputs
 * -------------------------------------------------------------------- */

static void test_output_placements(void **state) {
  (void)state;
  plan_plan *p = load_ok(HDR PROG MESH22 "outputs:\n"
                                         "  z: {dp: S(0)}\n"
                                         "  nothing: RR\n");
  assert_true(p->out_pl[0].set);
  char buf[64];
  assert_string_equal(plan_placement_format(&p->out_pl[0].pl, buf), "S(0)R");
  /* an unknown output name is recorded for validation, not an error */
  bool found = false;
  for (int i = 0; i < p->nuses; i++)
    if (!strcmp(p->uses[i].pattern, "nothing")) {
      found = true;
      assert_int_equal(p->uses[i].matches, 0);
      assert_string_equal(p->uses[i].section, "outputs");
    }
  assert_true(found);
  plan_free(p);
  expect_fail(HDR PROG MESH22 "outputs:\n  z: S(3)R\n", PLAN_EINVALID, 12, 6,
              "out of range");
}

/* ---- training
 * --------------------------------------------------------------------- */

#define TRAIN_PROG                                                             \
  "program:\n"                                                                 \
  "  tensors:\n"                                                               \
  "    x: {shape: [8, 16]}\n"                                                  \
  "    lab: {shape: [8], dtype: i32, range: [0, 4]}\n"                         \
  "    w1: {shape: [16, 16], role: param}\n"                                   \
  "    w2: {shape: [16, 4], role: param}\n"                                    \
  "  ops:\n"                                                                   \
  "    - {name: fc1, op: matmul, in: [x, w1], out: h}\n"                       \
  "    - {name: fc2, op: matmul, in: [h, w2], out: lg}\n"                      \
  "    - {name: ce, op: cross_entropy, in: [lg, lab], out: L}\n"               \
  "  loss: L\n"

static void test_training(void **state) {
  (void)state;
  plan_plan *p = load_ok(
      HDR TRAIN_PROG MESH22
      "training:\n"
      "  optimizer: {kind: adam, lr: 3e-4, beta2: 0.95, weight_decay: 0.1}\n"
      "  steps: 3\n"
      "  dtypes: {param: f32, compute: bf16, grad: f32, accum: f64}\n"
      "  grad_sync: {\"w*\": reduce_scatter, w2: all_reduce}\n"
      "  optimizer_state: {\"w*\": S(0)R}\n"
      "  recompute: [\"fc*\"]\n"
      "  clip_grad_norm: 1.0\n"
      "  loss_scale: 1024\n");
  const plan_training *tr = &p->training;
  assert_true(tr->present);
  assert_int_equal(tr->pos.line, 16);
  assert_int_equal(tr->optimizer, PLAN_OPT_ADAM);
  assert_true(tr->lr == 3e-4);
  assert_true(tr->beta1 == 0.9);
  assert_true(tr->beta2 == 0.95);
  assert_true(tr->eps == 1e-8);
  assert_true(tr->weight_decay == 0.1);
  assert_int_equal(tr->steps, 3);
  assert_int_equal(tr->param_dtype, PLAN_F32);
  assert_int_equal(tr->compute_dtype, PLAN_BF16);
  assert_int_equal(tr->grad_dtype, PLAN_F32);
  assert_int_equal(tr->accum_dtype, PLAN_F64);
  assert_true(tr->clip_grad_norm == 1.0);
  assert_true(tr->loss_scale == 1024);
  /* exact names win over globs */
  assert_int_equal(tr->params[tensor(p, "w1")].sync, PLAN_SYNC_REDUCE_SCATTER);
  assert_int_equal(tr->params[tensor(p, "w2")].sync, PLAN_SYNC_ALL_REDUCE);
  /* globs in training name params only */
  assert_int_equal(tr->params[tensor(p, "x")].sync, PLAN_SYNC_AUTO);
  assert_true(tr->params[tensor(p, "w1")].has_state_pl);
  assert_false(tr->params[tensor(p, "x")].has_state_pl);
  char buf[64];
  assert_string_equal(
      plan_placement_format(&tr->params[tensor(p, "w2")].state_pl, buf),
      "S(0)R");
  assert_true(tr->recompute[op(p, "fc1")]);
  assert_true(tr->recompute[op(p, "fc2")]);
  assert_false(tr->recompute[op(p, "ce")]);
  plan_free(p);

  /* defaults: sgd lr 0.01, one step, no dtype policy */
  p = load_ok(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, momentum: 0.9}\n");
  assert_int_equal(p->training.optimizer, PLAN_OPT_SGD);
  assert_true(p->training.lr == 0.01);
  assert_true(p->training.momentum == 0.9);
  assert_int_equal(p->training.steps, 1);
  assert_int_equal(p->training.param_dtype, -1);
  assert_true(p->training.loss_scale == 1.0);
  plan_free(p);

  /* absent */
  p = load_ok(HDR TRAIN_PROG MESH22);
  assert_false(p->training.present);
  plan_free(p);
}

static void test_training_errors(void **state) {
  (void)state;
  /* NaN and infinities are not numbers */
  expect_fail(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, lr: .nan}\n",
              PLAN_ESCHEMA, 16, 30, "NaN");
  expect_fail(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, lr: -.inf}\n",
              PLAN_ESCHEMA, 16, 30, "finite");
  expect_fail(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, lr: fast}\n",
              PLAN_ESCHEMA, 16, 30, "must be a number");
  expect_fail(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, lr: -1}\n",
              PLAN_EINVALID, 16, 30, ">= 0");
  expect_fail(HDR TRAIN_PROG MESH22
              "training:\n  optimizer: {kind: sgd, beta1: 0.9}\n",
              PLAN_ESCHEMA, 16, 33, "sgd has no 'beta1'");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  optimizer: {kind: lamb}\n",
              PLAN_ESCHEMA, 16, 21, "unknown optimizer 'lamb'");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  optimizer: {lr: 1}\n",
              PLAN_ESCHEMA, 16, 14, "needs a 'kind'");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  steps: two\n", PLAN_ESCHEMA,
              16, 10, "integer");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  steps: 0\n", PLAN_EINVALID,
              16, 10, "1 to 1000000");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  dtypes: {param: i32}\n",
              PLAN_ESCHEMA, 16, 19, "param dtype");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  grad_sync: {w1: sometimes}\n",
              PLAN_ESCHEMA, 16, 19, "unknown grad_sync kind");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  loss_scale: 0\n",
              PLAN_EINVALID, 16, 15, "> 0");
  expect_fail(HDR TRAIN_PROG MESH22 "training:\n  clip: 1\n", PLAN_ESCHEMA, 16,
              3, "unknown field 'clip' in training");
}

/* ---- pipeline
 * ----------------------------------------------------------------------- */

#define PP_MESH "mesh:\n  axes: [pp=2, dp=1]\n"

static void test_pipeline_named(void **state) {
  (void)state;
  static const char *const names[] = {"gpipe", "1f1b", "interleaved-1f1b",
                                      "zb-h1"};
  for (int k = 0; k < 4; k++) {
    char text[2048];
    snprintf(text, sizeof text,
             HDR LAYERS PP_MESH "pipeline:\n"
                                "  axis: pp\n"
                                "  microbatches: 4\n"
                                "  schedule: %s\n"
                                "  stages:\n"
                                "    - {ops: [\"l0.*\"]}\n"
                                "    - {ops: \"l1.*\"}\n",
             names[k]);
    plan_plan *p = load_ok(text);
    assert_int_equal(p->pipeline.schedule, k);
    assert_int_equal(p->pipeline.axis, 0);
    assert_int_equal(p->pipeline.microbatches, 4);
    assert_int_equal(plan_stage_count(p), 2);
    assert_int_equal(plan_op_stage(p, op(p, "l0.a")), 0);
    assert_int_equal(plan_op_stage(p, op(p, "l0.b")), 0);
    assert_int_equal(plan_op_stage(p, op(p, "l1.a")), 1);
    assert_int_equal(plan_op_stage(p, op(p, "l1.b")), 1);
    assert_int_equal(p->pipeline.stages[1].pos.line, 18);
    plan_free(p);
  }

  /* defaults: 1f1b, one microbatch; stages on submeshes, no axis */
  plan_plan *p =
      load_ok(HDR LAYERS
              "mesh:\n  axes: [pp=2]\n  submeshes: {a: {pp: 0}, b: {pp: 1}}\n"
              "pipeline:\n"
              "  stages:\n"
              "    - {ops: [l0.a, l0.b], submesh: a}\n"
              "    - {ops: [l1.a, l1.b], submesh: b}\n");
  assert_int_equal(p->pipeline.schedule, PLAN_SCHED_1F1B);
  assert_int_equal(p->pipeline.microbatches, 1);
  assert_int_equal(p->pipeline.axis, -1);
  assert_int_equal(p->pipeline.stages[0].submesh, 0);
  assert_int_equal(p->pipeline.stages[1].submesh, 1);
  plan_free(p);

  /* no pipeline */
  p = load_ok(HDR LAYERS PP_MESH);
  assert_int_equal(plan_stage_count(p), 0);
  assert_int_equal(plan_op_stage(p, 0), -1);
  plan_free(p);
}

static void assert_action(const plan_action *a, int kind, int stage, int mb,
                          int line, int col) {
  assert_int_equal(a->kind, kind);
  assert_int_equal(a->stage, stage);
  assert_int_equal(a->microbatch, mb);
  assert_int_equal(a->pos.line, line);
  assert_int_equal(a->pos.col, col);
}

static void test_pipeline_grid(void **state) {
  (void)state;
  /* rows as strings (positions point into the string) and as lists */
  plan_plan *p = load_ok(HDR LAYERS PP_MESH
                         "pipeline:\n"
                         "  axis: pp\n"
                         "  microbatches: 2\n"
                         "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n"
                         "  grid:\n"
                         "    - \"0F0 0F1  0SEND_F0 0B0 0B1\"\n"
                         "    - [1RECV_F0, 1F0, 1I0, 1W0, 1F1, 1B1]\n");
  const plan_pipeline *pp = &p->pipeline;
  assert_int_equal(pp->schedule, PLAN_SCHED_EXPLICIT);
  assert_int_equal(pp->grid_ranks, 2);
  assert_int_equal(pp->grid_len[0], 5);
  assert_int_equal(pp->grid_len[1], 6);
  assert_action(&pp->grid[0][0], PLAN_ACT_F, 0, 0, 17, 8);
  assert_action(&pp->grid[0][1], PLAN_ACT_F, 0, 1, 17, 12);
  assert_action(&pp->grid[0][2], PLAN_ACT_SEND_F, 0, 0, 17, 17);
  assert_action(&pp->grid[0][4], PLAN_ACT_B, 0, 1, 17, 30);
  assert_action(&pp->grid[1][0], PLAN_ACT_RECV_F, 1, 0, 18, 8);
  assert_action(&pp->grid[1][2], PLAN_ACT_I, 1, 0, 18, 23);
  assert_action(&pp->grid[1][3], PLAN_ACT_W, 1, 0, 18, 28);
  plan_free(p);

  /* schedule: explicit with a grid is the same thing; multi-digit numbers */
  p = load_ok(HDR LAYERS PP_MESH
              "pipeline:\n"
              "  axis: pp\n"
              "  microbatches: 12\n"
              "  schedule: explicit\n"
              "  stages: [{ops: [\"l0.*\"]}, {ops: [\"l1.*\"]}]\n"
              "  grid: [\"0F11\", [1SEND_B10]]\n");
  assert_int_equal(p->pipeline.schedule, PLAN_SCHED_EXPLICIT);
  assert_action(&p->pipeline.grid[0][0], PLAN_ACT_F, 0, 11, 17, 11);
  assert_action(&p->pipeline.grid[1][0], PLAN_ACT_SEND_B, 1, 10, 17, 19);
  plan_free(p);
}

static void test_pipeline_errors(void **state) {
  (void)state;
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  axis: pp\n  stages: [{ops: [l0.a]}]\n"
              "  grid: [\"0F0 0X0\"]\n",
              PLAN_EINVALID, 15, 15, "action '0X0'");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  axis: pp\n  stages: [{ops: [l0.a]}]\n"
              "  grid: [[0F0, F0]]\n",
              PLAN_EINVALID, 15, 16, "action 'F0'");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  schedule: gpipe\n  stages: [{ops: [l0.a]}]\n"
              "  grid: [\"0F0\"]\n",
              PLAN_EINVALID, 13, 13, "explicit goes with a 'grid'");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  schedule: explicit\n  stages: [{ops: [l0.a]}]\n",
              PLAN_EINVALID, 13, 13, "explicit goes with a 'grid'");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  schedule: 2f2b\n  stages: [{ops: [l0.a]}]\n",
              PLAN_ESCHEMA, 13, 13, "unknown schedule '2f2b'");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  axis: tp\n  stages: [{ops: [l0.a]}]\n",
              PLAN_EINVALID, 13, 9, "not a mesh axis");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  microbatches: 1.5\n  stages: [{ops: [l0.a]}]\n",
              PLAN_ESCHEMA, 13, 17, "integer");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  microbatches: 0\n  stages: [{ops: [l0.a]}]\n",
              PLAN_EINVALID, 13, 17, "1 to 1000000");
  expect_fail(HDR LAYERS PP_MESH "pipeline:\n  axis: pp\n", PLAN_ESCHEMA, 13, 3,
              "needs 'stages'");
  expect_fail(HDR LAYERS PP_MESH "pipeline:\n  stages: []\n", PLAN_EINVALID, 13,
              11, "1 to 65536 stages");
  expect_fail(HDR LAYERS PP_MESH
              "pipeline:\n  stages: [{ops: [l0.a], submesh: s}]\n",
              PLAN_EINVALID, 13, 35, "no submesh 's'");
  expect_fail(HDR LAYERS PP_MESH "pipeline:\n  stages: [{op: [l0.a]}]\n",
              PLAN_ESCHEMA, 13, 13, "unknown field 'op' in a stage");
}

/* ---- regions
 * ------------------------------------------------------------------------- */

static void test_regions(void **state) {
  (void)state;
  plan_plan *p =
      load_ok(HDR LAYERS "mesh:\n  axes: [tp=2]\n"
                         "regions:\n"
                         "  - {name: pin, kind: pinned, ops: [\"l0.*\"]}\n"
                         "  - name: hand\n"
                         "    kind: manual\n"
                         "    ops: l1.a\n"
                         "    inputs: {b0: S(0)}\n"
                         "    outputs: {a1: S(0)}\n"
                         "    body: |\n"
                         "      return function(x) return x end\n");
  assert_int_equal(p->nregions, 2);
  const plan_region *r = &p->regions[0];
  assert_string_equal(r->name, "pin");
  assert_int_equal(r->kind, PLAN_REGION_PINNED);
  assert_true(r->ops[op(p, "l0.a")]);
  assert_true(r->ops[op(p, "l0.b")]);
  assert_false(r->ops[op(p, "l1.a")]);
  assert_null(r->body);
  assert_int_equal(r->pos.line, 13);
  r = &p->regions[1];
  assert_string_equal(r->name, "hand");
  assert_int_equal(r->kind, PLAN_REGION_MANUAL);
  assert_true(r->ops[op(p, "l1.a")]);
  assert_false(r->ops[op(p, "l1.b")]);
  assert_int_equal(r->ninputs, 1);
  assert_int_equal(r->inputs[0].tensor, tensor(p, "b0"));
  char buf[64];
  assert_string_equal(plan_placement_format(&r->inputs[0].pl, buf), "S(0)");
  assert_int_equal(r->noutputs, 1);
  assert_int_equal(r->outputs[0].tensor, tensor(p, "a1"));
  assert_string_equal(r->body, "return function(x) return x end\n");
  plan_free(p);
}

static void test_region_errors(void **state) {
  (void)state;
  expect_fail(HDR LAYERS "mesh:\n  axes: [tp=2]\n"
                         "regions:\n  - {name: a, kind: pinned, ops: [l0.a]}\n"
                         "  - {name: a, kind: pinned, ops: [l0.b]}\n",
              PLAN_EINVALID, 14, 12, "defined twice");
  expect_fail(HDR LAYERS
              "mesh:\n  axes: [tp=2]\n"
              "regions:\n  - {name: a, kind: pinned, ops: [l0.a], body: x}\n",
              PLAN_ESCHEMA, 13, 48, "for manual regions");
  expect_fail(HDR LAYERS "mesh:\n  axes: [tp=2]\n"
                         "regions:\n  - {name: a, kind: manual, ops: [l0.a]}\n",
              PLAN_ESCHEMA, 13, 5, "needs a Lua 'body'");
  expect_fail(HDR LAYERS "mesh:\n  axes: [tp=2]\n"
                         "regions:\n  - {name: a, kind: auto, ops: [l0.a]}\n",
              PLAN_ESCHEMA, 13, 21, "unknown region kind 'auto'");
  expect_fail(HDR LAYERS
              "mesh:\n  axes: [tp=2]\n"
              "regions:\n  - {name: a, kind: manual, ops: [l0.a], body: x,"
              " inputs: {nope: R}}\n",
              PLAN_EINVALID, 13, 60, "no tensor 'nope'");
  expect_fail(HDR LAYERS "mesh:\n  axes: [tp=2]\n"
                         "regions:\n  - {kind: pinned, ops: [l0.a]}\n",
              PLAN_ESCHEMA, 13, 5, "needs a 'name'");
}

/* ---- provenance and x- keys
 * ------------------------------------------------------------- */

static void test_provenance(void **state) {
  (void)state;
  plan_plan *p =
      load_ok(HDR PROG MESH22 "provenance:\n"
                              "  tool: {name: plan, version: 0.1.0}\n"
                              "  seed: 7\n"
                              "  cost: 1.5e-3\n"
                              "  quoted: \"7\"\n"
                              "  ok: true\n"
                              "  none: ~\n"
                              "  tags: [a, 2, 2.5]\n"
                              "  typed: !!str 12\n"
                              "  script: |\n"
                              "    print(1)\n");
  const plan_value *v = p->provenance;
  assert_non_null(v);
  assert_int_equal(v->kind, PLAN_V_MAP);
  assert_int_equal(v->n, 9);
  assert_string_equal(v->keys[0], "tool"); /* file order is kept */
  const plan_value *t = map_get(v, "tool");
  assert_string_equal(map_get(t, "version")->s, "0.1.0");
  assert_int_equal(map_get(v, "seed")->kind, PLAN_V_INT);
  assert_int_equal(map_get(v, "seed")->i, 7);
  assert_int_equal(map_get(v, "cost")->kind, PLAN_V_FLOAT);
  assert_true(map_get(v, "cost")->f == 1.5e-3);
  assert_int_equal(map_get(v, "quoted")->kind, PLAN_V_STRING);
  assert_string_equal(map_get(v, "quoted")->s, "7");
  assert_int_equal(map_get(v, "ok")->kind, PLAN_V_BOOL);
  assert_true(map_get(v, "ok")->b);
  assert_int_equal(map_get(v, "none")->kind, PLAN_V_NULL);
  const plan_value *tags = map_get(v, "tags");
  assert_int_equal(tags->kind, PLAN_V_SEQ);
  assert_int_equal(tags->n, 3);
  assert_int_equal(tags->items[0]->kind, PLAN_V_STRING);
  assert_int_equal(tags->items[1]->kind, PLAN_V_INT);
  assert_int_equal(tags->items[2]->kind, PLAN_V_FLOAT);
  assert_int_equal(map_get(v, "typed")->kind, PLAN_V_STRING);
  assert_string_equal(map_get(v, "typed")->s, "12");
  assert_true(map_get(v, "script")->block);
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, p, PLAN_PART_PROVENANCE), PLAN_OK);
  plan_free(p);

  expect_fail(HDR PROG MESH22 "provenance: [a]\n", PLAN_ESCHEMA, 11, 13,
              "must be a mapping");
  expect_fail(HDR PROG MESH22 "provenance: {seed: !!int seven}\n", PLAN_ESCHEMA,
              11, 20, "not a valid !!int");
}

static void test_x_keys(void **state) {
  (void)state;
  /* x- keys are accepted in every schema mapping; those of the top level,
   * program, mesh, pipeline, training and regions are kept. */
  plan_plan *p = load_ok(
      HDR
      "x-top: {a: 1}\n"
      "program:\n"
      "  x-prog: note\n"
      "  tensors:\n"
      "    x: {shape: [8, 16], x-t: 1}\n"
      "    c: {shape: [2], role: const, init: {recipe: ones, x-i: 1}}\n"
      "  ops:\n"
      "    - {name: l0.a, op: relu, in: [x], out: a0, x-o: 2, attrs: {x-a: "
      "1}}\n"
      "    - {name: l1.a, op: relu, in: [a0], out: a1}\n"
      "mesh:\n"
      "  axes: [pp=2]\n"
      "  x-mesh: [1, 2]\n"
      "  hardware: {memory: 1, x-h: 3, links: {pp: {bandwidth: 1, x-l: 1}}}\n"
      "placements:\n"
      "  x: {pp: R, x-p: 1}\n"
      "strategies:\n"
      "  \"l*\": {in: [R], out: R, x-s: 1}\n"
      "pipeline:\n"
      "  axis: pp\n"
      "  stages: [{ops: [l0.a], x-st: 1}, {ops: [l1.a]}]\n"
      "  x-pipe: true\n"
      "training:\n"
      "  x-train: 3\n"
      "  optimizer: {kind: sgd, x-opt: 1}\n"
      "  dtypes: {param: f32, x-d: 1}\n"
      "regions:\n"
      "  - {name: r, kind: pinned, ops: [l0.a], x-r: 4}\n"
      "provenance: {seed: 1, x-prov: 5}\n");
  assert_int_equal(ext_get(p->ext, "x-top")->kind, PLAN_V_MAP);
  assert_string_equal(ext_get(p->program->ext, "x-prog")->s, "note");
  assert_int_equal(ext_get(p->mesh.ext, "x-mesh")->n, 2);
  assert_true(ext_get(p->pipeline.ext, "x-pipe")->b);
  assert_int_equal(ext_get(p->training.ext, "x-train")->i, 3);
  assert_int_equal(ext_get(p->regions[0].ext, "x-r")->i, 4);
  assert_non_null(map_get(p->provenance, "x-prov"));
  assert_op_pl(p, "l0.a", 1, 0, "R");
  assert_true(p->mesh.hardware->memory == 1);
  assert_true(p->mesh.hardware->axis_link[0].bandwidth == 1);
  assert_tensor_pl(p, "x", "R");
  assert_int_equal(p->program->tensors[tensor(p, "c")].recipe,
                   PLAN_RECIPE_ONES);
  plan_free(p);
}

/* ---- versions and unknown fields
 * --------------------------------------------------------- */

static void test_versions(void **state) {
  (void)state;
  /* unknown fields: schema errors at the key */
  expect_fail(HDR PROG MESH22 "strategy: {}\n", PLAN_ESCHEMA, 11, 1,
              "unknown field 'strategy' in the document");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], layout: nchw}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 21,
              "unknown field 'layout' in a tensor declaration");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y, device: 0}]\n",
              PLAN_ESCHEMA, 5, 44, "unknown field 'device' in an op");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n"
                  "  inputs: [x]\n",
              PLAN_ESCHEMA, 6, 3, "unknown field 'inputs' in program");
  expect_fail(HDR PROG "mesh:\n  axes: [dp=2]\n  fabric: ring\n", PLAN_ESCHEMA,
              11, 3, "unknown field 'fabric' in mesh");
  /* a format 1.1 field in a 1.0 file: a version error naming it */
  expect_fail("libplan: \"1.0\"\n" PROG "mesh:\n  axes: [dp=2]\n  topology: "
              "{torus: {dims: [2]}}\n",
              PLAN_EVERSION, 11, 3, "mesh.topology is a format 1.1 field");

  /* a newer minor version: readable when every field is known ... */
  plan_plan *p = load_ok("libplan: \"1.9\"\n" PROG MESH22);
  assert_int_equal(p->version_major, 1);
  assert_int_equal(p->version_minor, 9);
  plan_free(p);
  /* ... and an unknown field is a version error naming it and both
   * versions */
  expect_fail("libplan: \"1.9\"\n" PROG MESH22 "schedule_hints: {}\n",
              PLAN_EVERSION, 11, 1, "unknown field 'schedule_hints'");
  const char *msg = plan_error_last()->message;
  assert_non_null(strstr(msg, "1.9"));
  assert_non_null(strstr(msg, PLAN_FORMAT_STRING));
  expect_fail("libplan: \"1.9\"\n" PROG "mesh:\n  axes: [dp=2]\n  fabric: x\n",
              PLAN_EVERSION, 11, 3, "unknown field 'fabric' in mesh");
  /* "1.10" is minor 10, not 1.1 */
  expect_fail("libplan: \"1.10\"\n" PROG MESH22 "zz: 1\n", PLAN_EVERSION, 11, 1,
              "1.10");
  /* the current version, and 0.1, its pre-release form, read with their
   * own version */
  p = load_ok("libplan: \"1.0\"\n" PROG MESH22);
  assert_int_equal(p->version_major, 1);
  assert_int_equal(p->version_minor, 0);
  plan_free(p);
  p = load_ok("libplan: \"0.1\"\n" PROG MESH22);
  assert_int_equal(p->version_major, 0);
  assert_int_equal(p->version_minor, 1);
  plan_free(p);
  /* an unknown field in 0.1 is a schema error: 0.1 is older, not newer */
  expect_fail("libplan: \"0.1\"\n" PROG MESH22 "zz: 1\n", PLAN_ESCHEMA, 11, 1,
              "unknown field 'zz'");
  /* 0.x minors after 0.1 were never published */
  expect_fail("libplan: \"0.2\"\n" PROG MESH22, PLAN_EVERSION, 1, 10,
              "format version 0.2 does not exist");

  /* another major version */
  expect_fail("libplan: \"2.0\"\n" PROG MESH22, PLAN_EVERSION, 1, 10,
              "format version 2.0 is not readable");
  expect_fail("libplan: \"7.3\"\n" PROG MESH22, PLAN_EVERSION, 1, 10, "7.3");
  /* not a version */
  expect_fail("libplan: \"one\"\n" PROG, PLAN_EVERSION, 1, 10, "MAJOR.MINOR");
  expect_fail("libplan: \"0.1.2\"\n" PROG, PLAN_EVERSION, 1, 10, "MAJOR.MINOR");
  expect_fail("libplan: [0, 1]\n" PROG, PLAN_ESCHEMA, 1, 10,
              "must be a scalar");
  /* an unquoted version still reads as text */
  p = load_ok("libplan: 0.1\n" PROG);
  assert_int_equal(p->version_minor, 1);
  plan_free(p);
  /* not a libplan file */
  expect_fail(PROG, PLAN_ESCHEMA, 1, 1, "not a libplan file");
  expect_fail("- a\n- b\n", PLAN_ESCHEMA, 1, 1, "must be a mapping");
  expect_fail(HDR, PLAN_ESCHEMA, 1, 1, "no 'program'");
}

/* ---- program errors
 * ------------------------------------------------------------------------ */

static void test_program_errors(void **state) {
  (void)state;
  /* unknown op kind: at the kind */
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n    - {name: a, op: frobnicate, in: [x], out: y}\n",
              PLAN_EINVALID, 6, 21, "unknown op kind 'frobnicate'");
  /* dangling reference: at the name */
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n    - {name: a, op: add, in: [x, ghost], out: y}\n",
              PLAN_EINVALID, 6, 34, "reads 'ghost', which is neither declared");
  /* a cycle: at an op on it */
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n"
                  "    - {name: a, op: add, in: [x, c], out: b}\n"
                  "    - {name: b, op: relu, in: [b], out: c}\n",
              PLAN_EINVALID, 6, 7, "cycle");
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n"
                  "    - {name: a, op: relu, in: [x], out: y}\n"
                  "    - {name: self, op: relu, in: [z], out: z}\n",
              PLAN_EINVALID, 7, 7, "op 'self' depends on its own output");
  /* duplicate op names: at the second name */
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n"
                  "    - {name: a, op: relu, in: [x], out: y}\n"
                  "    - {name: a, op: relu, in: [y], out: z}\n",
              PLAN_EINVALID, 7, 14, "op name 'a' is used twice");
  /* a tensor produced twice: at the second producer's output */
  expect_fail(HDR "program:\n"
                  "  tensors:\n    x: {shape: [8]}\n"
                  "  ops:\n"
                  "    - {name: a, op: relu, in: [x], out: y}\n"
                  "    - {name: b, op: tanh, in: [x], out: y}\n",
              PLAN_EINVALID, 7, 41,
              "tensor 'y' is produced twice (also by op 'a')");
  expect_fail(
      HDR "program:\n"
          "  tensors:\n    x: {shape: [8], role: input}\n    w: {shape: [8]}\n"
          "  ops:\n"
          "    - {name: a, op: relu, in: [w], out: x}\n",
      PLAN_EINVALID, 4, 5, "declared as input but op 'a' produces it");
  /* negative dim: at the entry */
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8, -3]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 20, "negative dimension -3");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [batch=-3]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 17, "negative dimension");
  /* element-count overflow: at the dim that overflows */
  expect_fail(HDR "program:\n  tensors:\n"
                  "    x: {shape: [4294967296, 4294967296]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 29, "overflows int64");
  expect_fail(HDR "program:\n  tensors:\n"
                  "    x: {shape: [99999999999999999999]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 17, "integer SIZE");
  expect_fail(
      HDR "program:\n  tensors:\n    x: {shape: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n"
          "  ops: [{name: a, op: relu, in: x, out: y}]\n",
      PLAN_ELIMIT, 4, 16, "rank 9");
  /* wrong types */
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: 8}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 16, "shape must be a sequence");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8.5]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 17, "integer SIZE");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], dtype: f128}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 28, "unknown dtype 'f128'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], role: weight}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 27, "unknown role 'weight'");
  expect_fail(HDR "program:\n  tensors:\n    x: [8]\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 8, "must be a mapping");
  expect_fail(HDR "program:\n  tensors: {}\n", PLAN_ESCHEMA, 3, 3,
              "program needs 'ops'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: matmul, in: x, out: y, attrs: "
                  "{transpose_b: yes}}]\n",
              PLAN_ESCHEMA, 5, 67, "true or false");
  expect_fail(
      HDR
      "program:\n  tensors:\n    x: {shape: [8]}\n"
      "  ops: [{name: a, op: softmax, in: x, out: y, attrs: {dim: last}}]\n",
      PLAN_ESCHEMA, 5, 60, "integer");
  expect_fail(
      HDR
      "program:\n  tensors:\n    x: {shape: [8]}\n"
      "  ops: [{name: a, op: scale, in: x, out: y, attrs: {factor: .nan}}]\n",
      PLAN_ESCHEMA, 5, 61, "NaN");
  expect_fail(
      HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
          "  ops: [{name: a, op: relu, in: x, out: y, attrs: {alpha: 1}}]\n",
      PLAN_ESCHEMA, 5, 52, "relu has no attribute 'alpha'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: reshape, in: x, out: y}]\n",
              PLAN_ESCHEMA, 5, 9, "needs the attribute 'shape'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: [x, x], out: y}]\n",
              PLAN_EINVALID, 5, 33, "relu takes 1 input, not 2");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 5, 9, "needs a 'name'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x}]\n",
              PLAN_ESCHEMA, 5, 9, "needs 'out'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: \"\", op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 5, 16, "must not be empty");
  /* a control character anywhere in a name, whichever 8-byte step of the
   * check it falls in; bytes of UTF-8 (0x80 and up) are no control */
  static const char *const bad[] = {
      "\\tabcdefghijklmnop",    "abcdefg\\t",
      "abcdefgh\\x7f",          "abcdefghijklmno\\x1f",
      "layers.12.attn.q.\\x01", "a\\x7f",
      "abc\\x7fdefghij"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[512];
    snprintf(text, sizeof text,
             HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                 "  ops: [{name: \"%s\", op: relu, in: x, out: y}]\n",
             bad[i]);
    expect_fail(text, PLAN_ESCHEMA, 5, 16, "contains a control character");
  }
  plan_plan *u = load_ok(
      HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
          "  ops: [{name: \"couche.\\u00e9t\\u00e9.\\u00ff~ \", op: relu, "
          "in: x, out: y}]\n");
  assert_true(op(u, "couche.\xc3\xa9t\xc3\xa9.\xc3\xbf~ ") == 0);
  plan_free(u);
  /* shape and dtype inference failures are at the op */
  expect_fail(
      HDR
      "program:\n  tensors:\n    x: {shape: [8, 4]}\n    w: {shape: [5, 2]}\n"
      "  ops: [{name: a, op: matmul, in: [x, w], out: y}]\n",
      PLAN_EINVALID, 6, 9, "op 'a' (matmul)");
  expect_fail(
      HDR "program:\n  tensors:\n    x: {shape: [8]}\n    y: {shape: [9]}\n"
          "  ops: [{name: a, op: relu, in: x, out: y}]\n",
      PLAN_EINVALID, 5, 5, "declared f32 [9] but op 'a' makes it f32 [8]");
  /* ranges, recipes, roles */
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], range: [0, 4]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 28, "range is for integer tensors");
  expect_fail(
      HDR
      "program:\n  tensors:\n    x: {shape: [8], dtype: i32, range: [4, 4]}\n"
      "  ops: [{name: a, op: relu, in: x, out: y}]\n",
      PLAN_EINVALID, 4, 40, "LOW < HIGH");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], init: zeros}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 5, "recipes are for role: const");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8], role: const, "
                  "init: {recipe: noise}}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_ESCHEMA, 4, 49, "unknown init recipe 'noise'");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8, 3], role: const, "
                  "init: rope_cos}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n",
              PLAN_EINVALID, 4, 5, "even dim");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n"
                  "  outputs: [y, nope]\n",
              PLAN_EINVALID, 6, 16, "output 'nope' is not a tensor");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n"
                  "  outputs: [x]\n",
              PLAN_EINVALID, 6, 12, "output 'x' is a input");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n"
                  "  loss: y\n",
              PLAN_EINVALID, 6, 9, "must be a scalar");
  expect_fail(HDR "program:\n  tensors:\n    x: {shape: [8]}\n"
                  "  ops: [{name: a, op: relu, in: x, out: y}]\n"
                  "  loss: q\n",
              PLAN_EINVALID, 6, 9, "loss 'q' is not a tensor");
}

/* ---- YAML-level errors through the plan loader
 * ---------------------------------------------- */

static void test_yaml_errors(void **state) {
  (void)state;
  expect_fail("", PLAN_ESYNTAX, 1, 1, "empty");
  expect_fail(HDR "---\n" HDR, PLAN_ESYNTAX, 2, 1, "more than one document");
  expect_fail(HDR HDR, PLAN_ESCHEMA, 2, 1, "duplicate key 'libplan'");
  expect_fail(HDR "program: &p {a: 1}\n", PLAN_ESCHEMA, 2, 10, "anchors");
  expect_fail(HDR "program:\n\tops: []\n", PLAN_ESYNTAX, 3, 1, NULL);
  const char nul[] = "libplan: \"0.1\"\nprogram: {\0}\n";
  plan_plan *p = NULL;
  assert_int_equal(load_n(&p, nul, sizeof nul - 1), PLAN_ESYNTAX);
  assert_null(p);
  assert_int_equal(plan_error_last()->line, 2);
  /* a NULL buffer with a length is a usage error */
  assert_int_equal(plan_load_buffer(&p, NULL, 5, "t.yaml", NULL), PLAN_EUSAGE);
  assert_null(p);
}

/* ---- big sections: wrong shapes and duplicate keys
 * --------------------------------------------- */

/* Loading `text` fails with ESCHEMA or EINVALID at line:col (the second of
 * two equal keys: either a duplicate-key error or a "given twice" one). */
static void expect_dup(const char *text, int line, int col) {
  plan_plan *p = NULL;
  int rc = load_n(&p, text, strlen(text));
  const plan_error *e = plan_error_last();
  bool nulled = p == NULL;
  if (rc == PLAN_OK)
    plan_free(p);
  if ((rc != PLAN_ESCHEMA && rc != PLAN_EINVALID) || e->line != line ||
      e->column != col)
    print_message("for:\n%s\ngot %s %d:%d: %s\n", text, plan_status_name(rc),
                  e->line, e->column, e->message);
  assert_true(rc == PLAN_ESCHEMA || rc == PLAN_EINVALID);
  assert_true(nulled);
  assert_int_equal(e->line, line);
  assert_int_equal(e->column, col);
}

static void test_section_shapes(void **state) {
  (void)state;
  /* Name-keyed sections must be mappings and `ops` a sequence, wherever
   * they sit in the document. */
  expect_fail(HDR PROG MESH22 "strategies: [mm]\n", PLAN_ESCHEMA, 11, 13,
              "must be a mapping");
  expect_fail(HDR PROG MESH22 "placements: [x, w]\n", PLAN_ESCHEMA, 11, 13,
              "must be a mapping");
  expect_fail(HDR PROG MESH22 "outputs: [z]\n", PLAN_ESCHEMA, 11, 10,
              "must be a mapping");
  expect_fail(HDR "strategies: [mm]\n" PROG MESH22, PLAN_ESCHEMA, 2, 13,
              "must be a mapping");
  expect_fail(HDR "program:\n  tensors: [x]\n  ops: []\n", PLAN_ESCHEMA, 3, 12,
              "tensors must be a mapping");
  expect_fail(HDR "program:\n  ops: {a: {op: relu}}\n", PLAN_ESCHEMA, 3, 8,
              "ops must be a sequence");
}

static void test_duplicate_keys(void **state) {
  (void)state;
  /* Duplicate keys are refused at the second key, also in the big
   * sections and also when the name matches nothing. */
  expect_dup(HDR PROG MESH22 "strategies: {mm: {in: [RR, RR], out: RR}, mm: "
                             "{in: [RR, RR], out: RR}}\n",
             11, 43);
  expect_dup(
      HDR PROG MESH22
      "strategies: {nope: {in: [RR], out: RR}, nope: {in: [RR], out: RR}}\n",
      11, 41);
  expect_dup(HDR PROG MESH22 "strategies: {\"m*\": {in: [RR, RR], out: RR}, "
                             "\"m*\": {in: [RR, RR], out: RR}}\n",
             11, 45);
  expect_dup(HDR PROG MESH22 "placements: {x: RR, x: RR}\n", 11, 21);
  expect_dup(HDR PROG MESH22 "placements: {q: RR, q: RR}\n", 11, 21);
  expect_dup(HDR PROG MESH22 "outputs: {z: RR, z: RR}\n", 11, 18);
  expect_dup(HDR
             "program:\n  tensors:\n    x: {shape: [8]}\n    x: {shape: [8]}\n"
             "  ops: [{name: a, op: relu, in: x, out: y}]\n",
             5, 5);
  /* before the program and mesh, too */
  expect_dup(HDR "placements: {x: RR, x: RR}\n" PROG MESH22, 2, 21);
}

/* ---- program by path
 * -------------------------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

static int setup_tmp(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/libplan-load-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_program_by_path(void **state) {
  (void)state;
  char path[256], sub[256];
  snprintf(sub, sizeof sub, "%s/models", tmpdir);
  assert_int_equal(mkdir(sub, 0755), 0);
  snprintf(path, sizeof path, "%s/models/mlp.yaml", tmpdir);
  write_file(path, HDR PROG);

  /* relative to base_dir */
  const char *text = HDR "program:\n  path: models/mlp.yaml\n" MESH22
                         "strategies: {act: {in: [RR], out: RR}}\n";
  plan_plan *p = NULL;
  assert_int_equal(plan_load_buffer(&p, text, strlen(text), "t.yaml", tmpdir),
                   PLAN_OK);
  assert_false(p->program_inline);
  assert_string_equal(p->ref.path, "models/mlp.yaml");
  assert_false(p->ref.has_hash);
  assert_int_equal(plan_program_op_count(plan_get_program(p)), 2);
  assert_op_pl(p, "act", 1, 0, "RR");
  plan_hash h1, h2;
  assert_int_equal(plan_hash_part(&h1, p, PLAN_PART_PROGRAM), PLAN_OK);
  plan_free(p);

  /* an absolute path ignores base_dir; a recorded hash and signatures are
   * read */
  plan_program *g = NULL;
  assert_int_equal(
      plan_program_load_buffer(&g, HDR PROG, strlen(HDR PROG), "g"), PLAN_OK);
  assert_int_equal(plan_program_hash(&h2, g), PLAN_OK);
  assert_true(plan_hash_equal(h1, h2));
  char hb[PLAN_HASH_STRLEN], text2[1024];
  snprintf(text2, sizeof text2,
           HDR "program:\n  path: %s\n  hash: \"%s\"\n"
               "  signatures:\n    ops: {mm: \"%016llx\"}\n"
               "    tensors: {x: \"00000000000000ff\"}\n" MESH22,
           path, plan_hash_format(h2, hb),
           (unsigned long long)plan_program_op_signature(g, 0));
  /* outside the plan's folder tree (base_dir) it is refused at the path;
   * a root that holds it (PLAN_PROGRAM_ROOT here) lets it through */
  char other[200];
  snprintf(other, sizeof other, "%s/other", tmpdir);
  assert_int_equal(mkdir(other, 0755), 0);
  assert_int_equal(plan_load_buffer(&p, text2, strlen(text2), "t.yaml", other),
                   PLAN_EINVALID);
  assert_null(p);
  assert_non_null(strstr(plan_error_last()->message, "leads outside"));
  assert_int_equal(plan_error_last()->line, 3);
  assert_int_equal(setenv("PLAN_PROGRAM_ROOT", tmpdir, 1), 0);
  assert_int_equal(
      plan_load_buffer(&p, text2, strlen(text2), "t.yaml", "/nonexistent"),
      PLAN_OK);
  assert_true(p->ref.has_hash);
  assert_true(plan_hash_equal(p->ref.hash, h2));
  assert_int_equal(p->ref.nops, 1);
  assert_int_equal(p->ref.op_sigs[0], plan_program_op_signature(g, 0));
  assert_int_equal(p->ref.ntensors, 1);
  assert_int_equal(p->ref.tensor_sigs[0], 0xff);
  plan_free(p);
  plan_program_free(g);

  /* plan_load resolves against the plan file's folder */
  char plan_path[256];
  snprintf(plan_path, sizeof plan_path, "%s/plan.yaml", tmpdir);
  write_file(plan_path, text);
  assert_int_equal(plan_load(&p, plan_path), PLAN_OK);
  assert_string_equal(plan_file(p), plan_path);
  plan_free(p);
  assert_int_equal(plan_program_load(&g, plan_path), PLAN_OK);
  assert_int_equal(plan_program_op_count(g), 2);
  plan_program_free(g);

  /* a missing program file: an I/O error at the path node */
  expect_fail(HDR "program:\n  path: models/none.yaml\n" MESH22, PLAN_EIO, 3, 9,
              "models/none.yaml");
  /* an error inside the program file names that file */
  char bad[256];
  snprintf(bad, sizeof bad, "%s/models/bad.yaml", tmpdir);
  write_file(bad, HDR
             "program:\n  ops:\n    - {name: a, op: nope, in: [], out: y}\n");
  char text3[512];
  snprintf(text3, sizeof text3, HDR "program:\n  path: %s\n" MESH22, bad);
  expect_fail_in(text3, PLAN_EINVALID, bad, 4, 21, "unknown op kind 'nope'");
  /* a bad recorded hash or signature */
  snprintf(text3, sizeof text3,
           HDR "program:\n  path: %s\n  hash: \"xxh3:12\"\n" MESH22, path);
  expect_fail(text3, PLAN_EINVALID, 4, 9, "xxh3:<32 hex digits>");
  snprintf(text3, sizeof text3,
           HDR
           "program:\n  path: %s\n  signatures: {ops: {mm: \"zz\"}}\n" MESH22,
           path);
  expect_fail(text3, PLAN_EINVALID, 4, 26, "16 hex digits");
  snprintf(text3, sizeof text3,
           HDR "program:\n  path: %s\n  digest: x\n" MESH22, path);
  expect_fail(text3, PLAN_ESCHEMA, 4, 3, "unknown field 'digest'");
  /* plan_load of a missing file */
  snprintf(plan_path, sizeof plan_path, "%s/missing.yaml", tmpdir);
  assert_int_equal(plan_load(&p, plan_path), PLAN_EIO);
  assert_null(p);
  assert_string_equal(plan_error_last()->file, plan_path);
  assert_int_equal(unsetenv("PLAN_PROGRAM_ROOT"), 0);

  /* plan_load_root: the root given by the caller */
  snprintf(plan_path, sizeof plan_path, "%s/abs.yaml", other);
  write_file(plan_path, text2);
  assert_int_equal(plan_load(&p, plan_path), PLAN_EINVALID);
  assert_null(p);
  assert_int_equal(plan_load_root(&p, plan_path, tmpdir, NULL), PLAN_OK);
  plan_free(p);
  assert_int_equal(plan_load_root(&p, plan_path, other, NULL), PLAN_EINVALID);
  assert_null(p);
  /* a program path that names the plan itself is the file's error */
  snprintf(text3, sizeof text3, HDR "program:\n  path: self.yaml\n" MESH22);
  snprintf(plan_path, sizeof plan_path, "%s/self.yaml", tmpdir);
  write_file(plan_path, text3);
  assert_int_equal(plan_load(&p, plan_path), PLAN_EINVALID);
  assert_non_null(strstr(plan_error_last()->message, "itself"));
}

/* ---- the bad-input corpus
 * ------------------------------------------------------------ */

/* tests/corpus/run.sh checks exit codes and positions through the tool;
 * here the status code of each file is checked too. */
static void test_corpus_codes(void **state) {
  (void)state;
  glob_t g;
  int grc = glob("tests/corpus/bad/*.yaml", 0, NULL, &g);
  if (grc)
    print_message("no tests/corpus/bad: run from the repository root\n");
  assert_int_equal(grc, 0);
  int bad = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    const char *path = g.gl_pathv[i];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char first[256] = "", code[32] = "";
    int line = 0, col = 0;
    if (!fgets(first, sizeof first, f) ||
        sscanf(first, "# expect: %31s %d %d", code, &line, &col) != 3)
      fail_msg("%s: the first line is not '# expect: CODE LINE COL'", path);
    fclose(f);
    plan_plan *p = NULL;
    int rc = plan_load(&p, path);
    const plan_error *e = plan_error_last();
    if (rc == PLAN_OK) { /* accepted: wrong, and reported below */
      plan_free(p);
      p = NULL;
    }
    if (strcmp(plan_status_name(rc), code) || e->line != line ||
        e->column != col || strcmp(e->file, path)) {
      print_message("%s: wanted %s %d:%d, got %s %s:%d:%d: %s\n", path, code,
                    line, col, plan_status_name(rc), e->file, e->line,
                    e->column, e->message);
      bad++;
    }
    assert_null(p);
  }
  assert_true(g.gl_pathc >= 20);
  globfree(&g);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_program_sections),
      cmocka_unit_test(test_program_only_document),
      cmocka_unit_test(test_default_outputs),
      cmocka_unit_test(test_mesh_devices),
      cmocka_unit_test(test_mesh_errors),
      cmocka_unit_test(test_placements),
      cmocka_unit_test(test_placement_errors),
      cmocka_unit_test(test_strategies),
      cmocka_unit_test(test_strategy_errors),
      cmocka_unit_test(test_output_placements),
      cmocka_unit_test(test_training),
      cmocka_unit_test(test_training_errors),
      cmocka_unit_test(test_pipeline_named),
      cmocka_unit_test(test_pipeline_grid),
      cmocka_unit_test(test_pipeline_errors),
      cmocka_unit_test(test_regions),
      cmocka_unit_test(test_region_errors),
      cmocka_unit_test(test_provenance),
      cmocka_unit_test(test_x_keys),
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_program_errors),
      cmocka_unit_test(test_yaml_errors),
      cmocka_unit_test(test_section_shapes),
      cmocka_unit_test(test_duplicate_keys),
      cmocka_unit_test(test_corpus_codes),
      cmocka_unit_test_setup_teardown(test_program_by_path, setup_tmp,
                                      teardown_tmp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
