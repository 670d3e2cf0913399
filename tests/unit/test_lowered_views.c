/* Unit tests for the public views of a lowered program (libplan/lowered.h)
 * and the public op registry (libplan/ops.h), through the public headers
 * alone: steps, buffers, layouts and outputs of a lowered MLP and of a
 * training step agree with each other, with the counts and with the
 * program; a bad index is PLAN_EUSAGE and leaves the struct as it was. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "libplan/libplan.h"

static const char *const kinds[] = {
    "all_gather", "all_reduce",     "reduce_scatter", "all_to_all",
    "slice",      "zero_non_owner", "relabel"};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static plan_lowered *lower_file(const char *path, plan_plan **plan) {
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, path), PLAN_OK);
  plan_lowered *l = NULL;
  assert_int_equal(plan_lower(&l, p), PLAN_OK);
  *plan = p;
  return l;
}

static int kind_index(const char *kind) {
  for (int k = 0; k < NKINDS; k++)
    if (!strcmp(kinds[k], kind))
      return k;
  return -1;
}

/* Every step: its kind's fields set, the others -1, buffers in range; the
 * steps of each collective kind add up to plan_lowered_collective_count.
 * Returns the number of op steps. */
static int check_steps(const plan_lowered *l) {
  const plan_plan *p = plan_lowered_plan(l);
  const plan_program *prog = plan_get_program(p);
  int nsteps = plan_lowered_step_count(l), nbufs = plan_lowered_buffer_count(l);
  int naxes = plan_mesh_axis_count(p);
  int count[NKINDS] = {0}, ops = 0, inputs = 0;
  assert_true(nsteps > 0);
  for (int i = 0; i < nsteps; i++) {
    plan_lowered_step_info s;
    assert_int_equal(plan_lowered_step(&s, l, i), PLAN_OK);
    assert_non_null(s.kind);
    for (int j = 0; j < s.nin; j++)
      assert_true(s.in[j] >= 0 && s.in[j] < nbufs);
    for (int j = 0; j < s.nout; j++)
      assert_true(s.out[j] >= 0 && s.out[j] < nbufs);
    assert_int_equal(s.stage, -1); /* no pipeline here */
    if (!strcmp(s.kind, "op")) {
      ops++;
      assert_true(s.op >= 0 && s.op < plan_program_op_count(prog));
      assert_int_equal(
          s.op_kind, plan_op_kind_from_name(plan_program_op_kind(prog, s.op)));
      assert_int_equal(s.nin, plan_program_op_input_count(prog, s.op));
      assert_int_equal(s.nout, plan_program_op_output_count(prog, s.op));
      int nattrs = -1;
      plan_op_attrs(s.op_kind, &nattrs);
      assert_true(nattrs > 0 ? s.attrs != NULL : s.attrs == NULL);
      assert_int_equal(s.axis, -1);
      continue;
    }
    assert_int_equal(s.op, -1);
    assert_int_equal(s.op_kind, -1);
    assert_null(s.attrs);
    if (!strcmp(s.kind, "input")) {
      inputs++;
      assert_int_equal(s.nin, 0);
      assert_int_equal(s.nout, 1);
      continue;
    }
    int k = kind_index(s.kind);
    assert_true(k >= 0);
    count[k]++;
    assert_true(s.axis >= 0 && s.axis < naxes);
    assert_int_equal(s.nin, 1);
    assert_int_equal(s.nout, 1);
    bool reduces =
        !strcmp(s.kind, "all_reduce") || !strcmp(s.kind, "reduce_scatter") ||
        !strcmp(s.kind, "relabel") || !strcmp(s.kind, "zero_non_owner");
    assert_true(reduces ? s.reduce >= 0 && s.reduce < PLAN_RED_COUNT
                        : s.reduce == -1);
  }
  for (int k = 0; k < NKINDS; k++)
    assert_int_equal(count[k], plan_lowered_collective_count(l, kinds[k]));
  assert_true(inputs > 0);
  return ops;
}

/* Every buffer: the global shape and dtype of its tensor, a placement that
 * reads back the same; every rank's block inside the tensor, the blocks of
 * an all-R buffer the whole tensor. */
static void check_buffers(const plan_lowered *l) {
  const plan_plan *p = plan_lowered_plan(l);
  const plan_program *prog = plan_get_program(p);
  int nbufs = plan_lowered_buffer_count(l);
  int64_t ranks = plan_mesh_device_count(p);
  assert_true(nbufs > 0);
  for (int b = 0; b < nbufs; b++) {
    plan_lowered_buffer_info info;
    assert_int_equal(plan_lowered_buffer(&info, l, b), PLAN_OK);
    int64_t dims[PLAN_MAX_RANK];
    assert_int_equal(
        plan_program_tensor_shape(prog, info.tensor, dims, PLAN_MAX_RANK),
        info.rank);
    assert_memory_equal(dims, info.dims, sizeof(int64_t) * (size_t)info.rank);
    assert_string_equal(info.tensor_name,
                        plan_program_tensor_name(prog, info.tensor));
    assert_string_equal(plan_dtype_name((plan_dtype)info.dtype),
                        plan_program_tensor_dtype(prog, info.tensor));
    plan_placement back;
    assert_int_equal(
        plan_placement_for_tensor(&back, p, info.tensor, info.placement_text),
        PLAN_OK);
    char text[PLAN_PLACEMENT_STRLEN];
    assert_int_equal(plan_placement_format_text(text, sizeof text, &back),
                     PLAN_OK);
    assert_string_equal(text, info.placement_text);
    bool all_r = true;
    for (int a = 0; a < info.placement.naxes; a++)
      all_r = all_r && info.placement.ax[a].kind == PLAN_PL_R;
    for (int64_t r = 0; r < ranks; r++) {
      int64_t bd[PLAN_MAX_RANK], off[PLAN_MAX_RANK];
      assert_int_equal(plan_lowered_buffer_block(bd, off, l, b, r), info.rank);
      for (int d = 0; d < info.rank; d++) {
        assert_true(off[d] >= 0 && bd[d] >= 0);
        assert_true(off[d] + bd[d] <= info.dims[d]);
        if (all_r)
          assert_true(off[d] == 0 && bd[d] == info.dims[d]);
      }
    }
  }
}

/* Every tensor with a layout names a buffer of its own shape and dtype. */
static int check_layouts(const plan_lowered *l) {
  const plan_plan *p = plan_lowered_plan(l);
  const plan_program *prog = plan_get_program(p);
  int n = plan_program_tensor_count(prog), laid = 0;
  for (int t = 0; t < n; t++) {
    int b = -2;
    assert_int_equal(plan_lowered_layout(&b, l, t), PLAN_OK);
    if (b < 0) {
      assert_int_equal(b, -1);
      continue;
    }
    laid++;
    plan_lowered_buffer_info info;
    assert_int_equal(plan_lowered_buffer(&info, l, b), PLAN_OK);
    int64_t dims[PLAN_MAX_RANK];
    assert_int_equal(plan_program_tensor_shape(prog, t, dims, PLAN_MAX_RANK),
                     info.rank);
    assert_memory_equal(dims, info.dims, sizeof(int64_t) * (size_t)info.rank);
    assert_string_equal(plan_dtype_name((plan_dtype)info.dtype),
                        plan_program_tensor_dtype(prog, t));
  }
  return laid;
}

static void test_mlp(void **state) {
  (void)state;
  plan_plan *p;
  plan_lowered *l = lower_file("examples/mlp-megatron.plan.yaml", &p);
  const plan_program *prog = plan_get_program(plan_lowered_plan(l));
  assert_int_equal(check_steps(l), plan_program_op_count(prog));
  /* fc2's partial sum over tp becomes y's S(0)R: one all-reduce */
  assert_true(plan_lowered_collective_count(l, "all_reduce") >= 1);
  check_buffers(l);
  assert_int_equal(check_layouts(l), plan_program_tensor_count(prog));

  /* w1 is RS(1) on dp=2 x tp=2: rank 1 (dp 0, tp 1) holds columns 32..63 */
  int w1 = plan_program_tensor_find(prog, "w1"), b = -1;
  assert_int_equal(plan_lowered_layout(&b, l, w1), PLAN_OK);
  plan_lowered_buffer_info info;
  assert_int_equal(plan_lowered_buffer(&info, l, b), PLAN_OK);
  assert_string_equal(info.placement_text, "RS(1)");
  assert_int_equal(info.ordinal, 0);
  int64_t bd[PLAN_MAX_RANK], off[PLAN_MAX_RANK];
  assert_int_equal(plan_lowered_buffer_block(bd, off, l, b, 1), 2);
  assert_int_equal(bd[0], 16);
  assert_int_equal(bd[1], 32);
  assert_int_equal(off[0], 0);
  assert_int_equal(off[1], 32);
  assert_int_equal(plan_lowered_buffer_block(bd, NULL, l, b, 2), 2);
  assert_int_equal(bd[1], 32);

  assert_int_equal(plan_lowered_output_count(l), 1);
  plan_lowered_output_info o;
  assert_int_equal(plan_lowered_output(&o, l, 0), PLAN_OK);
  assert_int_equal(o.tensor, plan_program_tensor_find(prog, "y"));
  assert_int_equal(o.has_required, 1);
  assert_string_equal(o.required_text, "S(0)R");
  assert_int_equal(o.gradient_of, -1);
  assert_int_equal(plan_lowered_buffer(&info, l, o.buffer), PLAN_OK);
  assert_int_equal(info.tensor, o.tensor);
  assert_string_equal(info.placement_text, o.required_text);
  plan_lowered_free(l);
  plan_free(p);
}

static void test_training(void **state) {
  (void)state;
  plan_plan *p;
  plan_lowered *l = lower_file("examples/mlp-train.plan.yaml", &p);
  const plan_program *fwd = plan_get_program(p);
  const plan_program *prog = plan_get_program(plan_lowered_plan(l));
  /* the training program: the forward ops, then the backward ones */
  int ops = check_steps(l);
  assert_int_equal(ops, plan_program_op_count(prog));
  assert_true(ops > plan_program_op_count(fwd));
  check_buffers(l);
  assert_true(check_layouts(l) > 0);
  int n = plan_lowered_output_count(l), grads = 0;
  assert_int_equal(n, plan_program_output_count(prog));
  for (int k = 0; k < n; k++) {
    plan_lowered_output_info o;
    assert_int_equal(plan_lowered_output(&o, l, k), PLAN_OK);
    assert_int_equal(o.tensor, plan_program_output(prog, k));
    assert_int_equal(o.has_required, 1);
    plan_lowered_buffer_info info;
    assert_int_equal(plan_lowered_buffer(&info, l, o.buffer), PLAN_OK);
    assert_int_equal(info.tensor, o.tensor);
    if (o.gradient_of < 0)
      continue;
    grads++;
    char name[300];
    snprintf(name, sizeof name, "grad/%s",
             plan_program_tensor_name(prog, o.gradient_of));
    assert_string_equal(plan_program_tensor_name(prog, o.tensor), name);
    assert_string_equal(plan_program_tensor_role(prog, o.gradient_of), "param");
  }
  assert_true(grads > 0);
  plan_lowered_free(l);
  plan_free(p);
}

static void test_bad_indexes(void **state) {
  (void)state;
  plan_plan *p;
  plan_lowered *l = lower_file("examples/mlp-megatron.plan.yaml", &p);
  int nsteps = plan_lowered_step_count(l), nbufs = plan_lowered_buffer_count(l);
  int ntensors = plan_program_tensor_count(plan_get_program(p));
  plan_lowered_step_info s, s0;
  memset(&s, 0x5a, sizeof s);
  s0 = s;
  assert_int_equal(plan_lowered_step(&s, l, -1), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_step(&s, l, nsteps), PLAN_EUSAGE);
  assert_non_null(strstr(plan_error_last()->message, "out of range"));
  assert_memory_equal(&s, &s0, sizeof s);
  assert_int_equal(plan_lowered_step(NULL, l, 0), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_step(&s, NULL, 0), PLAN_EUSAGE);

  plan_lowered_buffer_info b, b0;
  memset(&b, 0x5a, sizeof b);
  b0 = b;
  assert_int_equal(plan_lowered_buffer(&b, l, nbufs), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_buffer(&b, l, -1), PLAN_EUSAGE);
  assert_memory_equal(&b, &b0, sizeof b);
  int64_t dims[PLAN_MAX_RANK];
  assert_int_equal(plan_lowered_buffer_block(dims, NULL, l, nbufs, 0),
                   PLAN_EUSAGE);
  assert_int_equal(plan_lowered_buffer_block(dims, NULL, l, 0, 4), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_buffer_block(dims, NULL, l, 0, -1),
                   PLAN_EUSAGE);
  assert_int_equal(plan_lowered_buffer_block(dims, NULL, NULL, 0, 0),
                   PLAN_EUSAGE);

  int buf = 12345;
  assert_int_equal(plan_lowered_layout(&buf, l, ntensors), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_layout(&buf, l, -1), PLAN_EUSAGE);
  assert_int_equal(buf, 12345);
  assert_int_equal(plan_lowered_layout(NULL, l, 0), PLAN_EUSAGE);

  plan_lowered_output_info o, o0;
  memset(&o, 0x5a, sizeof o);
  o0 = o;
  assert_int_equal(plan_lowered_output(&o, l, 1), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_output(&o, l, -1), PLAN_EUSAGE);
  assert_memory_equal(&o, &o0, sizeof o);

  assert_int_equal(plan_lowered_step_count(NULL), -1);
  assert_int_equal(plan_lowered_buffer_count(NULL), -1);
  assert_int_equal(plan_lowered_output_count(NULL), -1);
  assert_int_equal(plan_lowered_collective_count(l, "gather"), -1);
  assert_null(plan_lowered_plan(NULL));
  plan_lowered_free(l);
  plan_free(p);
}

/* The public registry: schemas, inference, the local check, dtypes. */
static void test_op_registry(void **state) {
  (void)state;
  int n = -2;
  const plan_attr_spec *a = plan_op_attrs(PLAN_OP_SOFTMAX, &n);
  assert_int_equal(n, 1);
  assert_string_equal(a[0].name, "dim");
  assert_int_equal(a[0].type, PLAN_ATTR_INT);
  assert_true(a[0].is_dim);
  assert_null(plan_op_attrs(PLAN_OP_ADD, &n));
  assert_int_equal(n, 0);
  assert_null(plan_op_attrs(-1, &n));
  assert_int_equal(n, -1);
  assert_null(plan_op_attrs(PLAN_OP_COUNT, NULL));
  assert_int_equal(plan_op_kind_count(), PLAN_OP_COUNT);
  assert_int_equal(plan_op_kind_from_name("matmul"), PLAN_OP_MATMUL);

  plan_shape in[2] = {{2, {8, 16}, PLAN_F32}, {2, {16, 64}, PLAN_F32}}, out[1];
  char err[200];
  assert_int_equal(
      plan_op_infer(PLAN_OP_MATMUL, NULL, in, 2, out, 1, err, sizeof err),
      PLAN_OK);
  assert_int_equal(out[0].rank, 2);
  assert_int_equal(out[0].dims[0], 8);
  assert_int_equal(out[0].dims[1], 64);
  assert_int_equal(out[0].dtype, PLAN_F32);
  in[1].dims[0] = 15;
  assert_int_equal(
      plan_op_infer(PLAN_OP_MATMUL, NULL, in, 2, out, 1, err, sizeof err),
      PLAN_EINVALID);
  assert_true(err[0] != '\0');
  assert_int_equal(
      plan_op_infer(PLAN_OP_MATMUL, NULL, in, 1, out, 1, err, sizeof err),
      PLAN_EUSAGE);
  assert_int_equal(plan_op_infer(-1, NULL, in, 2, out, 1, err, sizeof err),
                   PLAN_EUSAGE);
  assert_int_equal(
      plan_op_infer(PLAN_OP_MATMUL, NULL, NULL, 2, out, 1, NULL, 0),
      PLAN_EUSAGE);

  /* a rank's blocks: [8, 16] x [16, 32] -> [8, 32] fits, [8, 64] does not */
  in[1].dims[0] = 16;
  in[1].dims[1] = 32;
  plan_shape blk = {2, {8, 32}, PLAN_F32};
  assert_int_equal(plan_op_check_local(PLAN_OP_MATMUL, NULL, in, 2, &blk, 1,
                                       err, sizeof err),
                   PLAN_OK);
  blk.dims[1] = 64;
  assert_int_equal(plan_op_check_local(PLAN_OP_MATMUL, NULL, in, 2, &blk, 1,
                                       err, sizeof err),
                   PLAN_EINVALID);
  assert_int_equal(
      plan_op_check_local(PLAN_OP_COUNT, NULL, in, 2, &blk, 1, err, sizeof err),
      PLAN_EUSAGE);

  for (int t = 0; t < PLAN_DTYPE_COUNT; t++)
    assert_int_equal(plan_dtype_from_name(plan_dtype_name((plan_dtype)t)), t);
  assert_int_equal(plan_dtype_from_name(NULL), -1);
  assert_int_equal(plan_dtype_from_name("f8"), -1);
  assert_true(plan_dtype_is_float(PLAN_BF16));
  assert_false(plan_dtype_is_float(PLAN_I32));
  assert_int_equal(plan_dtype_size(PLAN_BF16), 2);
  assert_int_equal(plan_dtype_size(PLAN_DTYPE_COUNT), 0);
}

/* A pipelined program's views: its microbatch axis, stages and schedule,
 * and every step's phase, stage and transfer fields, as the file form
 * writes them; a program without a pipeline has none. */
static void test_pipeline(void **state) {
  (void)state;
  plan_plan *p = NULL;
  plan_lowered *l = lower_file("examples/transformer4-zbv.plan.yaml", &p);
  plan_lowered_pipeline_info pi;
  assert_int_equal(plan_lowered_pipeline(&pi, l), PLAN_OK);
  const plan_plan *lp = plan_lowered_plan(l);
  assert_string_equal(plan_mesh_axis_name(lp, pi.axis), "mb");
  assert_int_equal(pi.microbatches, 4);
  assert_int_equal(pi.stages, 4);
  assert_int_equal(plan_schedule_kind_of(pi.schedule), PLAN_SCHEDULE_ZBV);
  assert_int_equal(plan_schedule_ranks(pi.schedule), 2);
  assert_int_equal(plan_schedule_stage_rank(pi.schedule, 3), 0); /* the V */
  assert_int_equal(pi.transfers, 4);
  int recv = 0, pre = 0, post = 0, local = 0;
  for (int i = 0; i < plan_lowered_step_count(l); i++) {
    plan_lowered_step_pipe_info sp;
    plan_lowered_step_info s;
    assert_int_equal(plan_lowered_step_pipe(&sp, l, i), PLAN_OK);
    assert_int_equal(plan_lowered_step(&s, l, i), PLAN_OK);
    assert_int_equal(sp.stage, s.stage);
    assert_int_equal(sp.mb_shift, 0);
    int xfer = !strcmp(s.kind, "transfer");
    assert_int_equal(xfer, sp.from_stage >= 0);
    assert_int_equal(xfer, !strncmp(sp.phase, "RECV_", 5));
    if (xfer) {
      recv++;
      local += plan_schedule_stage_rank(pi.schedule, sp.from_stage) ==
               plan_schedule_stage_rank(pi.schedule, sp.stage);
    }
    pre += !strcmp(sp.phase, "pre");
    post += !strcmp(sp.phase, "post");
    assert_int_equal(sp.stage < 0,
                     !strcmp(sp.phase, "pre") || !strcmp(sp.phase, "post"));
  }
  assert_int_equal(recv, pi.transfers + pi.local_transfers);
  assert_int_equal(local, pi.local_transfers);
  assert_true(local > 0 && pre > 0 && post > 0);
  plan_lowered_step_pipe_info sp;
  assert_int_equal(plan_lowered_step_pipe(&sp, l, -1), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_pipeline(NULL, l), PLAN_EUSAGE);
  plan_lowered_free(l);
  plan_free(p);
  l = lower_file("examples/mlp-megatron.plan.yaml", &p);
  assert_int_equal(plan_lowered_pipeline(&pi, l), PLAN_ENOTFOUND);
  assert_int_equal(plan_lowered_step_pipe(&sp, l, 0), PLAN_ENOTFOUND);
  plan_lowered_free(l);
  plan_free(p);
}

/* The new structs are in the ABI table a binding checks its copies with. */
static void test_abi_sizes(void **state) {
  (void)state;
  assert_int_equal(plan_abi_sizeof("plan_lowered_step_info"),
                   sizeof(plan_lowered_step_info));
  assert_int_equal(plan_abi_sizeof("plan_lowered_buffer_info"),
                   sizeof(plan_lowered_buffer_info));
  assert_int_equal(plan_abi_sizeof("plan_lowered_output_info"),
                   sizeof(plan_lowered_output_info));
  assert_int_equal(plan_abi_sizeof("plan_lowered_pipeline_info"),
                   sizeof(plan_lowered_pipeline_info));
  assert_int_equal(plan_abi_sizeof("plan_lowered_step_pipe_info"),
                   sizeof(plan_lowered_step_pipe_info));
  assert_int_equal(plan_abi_sizeof("plan_attr_val"), sizeof(plan_attr_val));
  assert_int_equal(plan_abi_sizeof("plan_attr_spec"), sizeof(plan_attr_spec));
  assert_int_equal(plan_abi_sizeof("plan_shape"), sizeof(plan_shape));
  assert_int_equal(plan_abi_sizeof("plan_pos"), sizeof(plan_pos));
}

/* A training step's section (the loss, each param's gradient output,
 * master placement and sync) agrees with its outputs; the plan's training
 * options read as the file writes them, on the plan and on the training
 * step's plan; a forward program has no training section. */
static void test_training_views(void **state) {
  (void)state;
  plan_plan *p;
  plan_lowered *l = lower_file("examples/mlp-train.plan.yaml", &p);
  const plan_program *prog = plan_get_program(plan_lowered_plan(l));
  for (int k = 0; k < 2; k++) {
    plan_training_info t;
    assert_int_equal(plan_get_training(&t, k ? plan_lowered_plan(l) : p),
                     PLAN_OK);
    assert_int_equal(t.present, 1);
    assert_int_equal(t.optimizer, PLAN_OPT_SGD);
    assert_true(t.lr == 0.125);
    assert_true(t.momentum == 0.5);
    assert_int_equal(t.steps, 2);
    assert_true(t.loss_scale == 1);
    assert_true(t.clip_grad_norm == 0);
  }
  plan_lowered_training_info tr;
  memset(&tr, 0x5a, sizeof tr);
  assert_int_equal(plan_lowered_training(&tr, l), PLAN_OK);
  assert_int_equal(tr.loss, plan_program_loss(prog));
  assert_int_equal(tr.has_grad_map, 1);
  assert_true(tr.params > 0);
  int grads = 0;
  for (int k = 0; k < plan_lowered_output_count(l); k++) {
    plan_lowered_output_info o;
    assert_int_equal(plan_lowered_output(&o, l, k), PLAN_OK);
    grads += o.gradient_of >= 0;
  }
  assert_int_equal(grads, tr.params);
  for (int i = 0; i < tr.params; i++) {
    plan_lowered_param_info pi;
    assert_int_equal(plan_lowered_param(&pi, l, i), PLAN_OK);
    assert_string_equal(plan_program_tensor_role(prog, pi.tensor), "param");
    assert_int_equal(pi.sync, PLAN_SYNC_ALL_REDUCE);
    plan_lowered_output_info o;
    assert_int_equal(plan_lowered_output(&o, l, pi.grad_output), PLAN_OK);
    assert_int_equal(o.gradient_of, pi.tensor);
    assert_true(plan_placement_equal(&o.required, &pi.master));
  }
  plan_lowered_param_info pi;
  memset(&pi, 0x5a, sizeof pi);
  plan_lowered_param_info before = pi;
  assert_int_equal(plan_lowered_param(&pi, l, tr.params), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_param(&pi, l, -1), PLAN_EUSAGE);
  assert_memory_equal(&pi, &before, sizeof pi);
  assert_int_equal(plan_lowered_training(NULL, l), PLAN_EUSAGE);
  plan_lowered_free(l);
  plan_free(p);

  l = lower_file("examples/mlp-megatron.plan.yaml", &p);
  plan_training_info t;
  assert_int_equal(plan_get_training(&t, p), PLAN_OK);
  assert_int_equal(t.present, 0);
  assert_int_equal(plan_get_training(NULL, p), PLAN_EUSAGE);
  assert_int_equal(plan_lowered_training(&tr, l), PLAN_ENOTFOUND);
  assert_int_equal(plan_lowered_param(&pi, l, 0), PLAN_ENOTFOUND);
  plan_lowered_regions_info rg;
  assert_int_equal(plan_lowered_regions(&rg, l), PLAN_OK);
  assert_int_equal(rg.regions, 0);
  assert_int_equal(rg.orig_ops, 0);
  assert_int_equal(rg.orig_tensors, 0);
  assert_null(rg.reference);
  plan_lowered_region_info ri;
  assert_int_equal(plan_lowered_region(&ri, l, 0), PLAN_EUSAGE);
  /* a lowering has no explicit member orders */
  for (int i = 0; i < plan_lowered_step_count(l); i++) {
    plan_lowered_order_info oi;
    assert_int_equal(plan_lowered_step_order(&oi, l, i), PLAN_OK);
    assert_null(oi.group_order);
    assert_null(oi.rank_order);
    assert_int_equal(oi.length, 0);
  }
  plan_lowered_order_info oi;
  assert_int_equal(plan_lowered_step_order(&oi, l, plan_lowered_step_count(l)),
                   PLAN_EUSAGE);
  plan_lowered_free(l);
  plan_free(p);
}

/* Shard ratios: the plan's sets, and the block of every buffer on every
 * rank as plan_lowered_placement_block gives it from the buffer's
 * placement and the rank's coordinates, which is plan_lowered_buffer_block's
 * (the pieces follow the weights: uneven). */
static void test_ratio_blocks(void **state) {
  (void)state;
  const char *files[] = {"examples/mlp-ratios.plan.yaml",
                         "examples/mlp-megatron.plan.yaml"};
  for (int f = 0; f < 2; f++) {
    plan_plan *p;
    plan_lowered *l = lower_file(files[f], &p);
    const plan_plan *lp = plan_lowered_plan(l);
    int nsets = plan_mesh_ratio_count(lp);
    assert_true(f ? nsets == 0 : nsets > 0);
    for (int k = 0; k < nsets; k++) {
      plan_mesh_ratio_info ri;
      assert_int_equal(plan_mesh_ratio(&ri, lp, k), PLAN_OK);
      assert_true(ri.axis >= 0 && ri.axis < plan_mesh_axis_count(lp));
      assert_int_equal(ri.n, plan_mesh_axis_size(lp, ri.axis));
      bool uneven = false;
      for (int i = 0; i < ri.n; i++) {
        assert_true(ri.weights[i] > 0);
        uneven = uneven || ri.weights[i] != ri.weights[0];
      }
      assert_true(uneven);
    }
    plan_mesh_ratio_info ri;
    assert_int_equal(plan_mesh_ratio(&ri, lp, nsets), PLAN_EUSAGE);
    int naxes = plan_mesh_axis_count(lp);
    int64_t nranks = plan_mesh_device_count(lp), blocks = 0, differ = 0;
    for (int b = 0; b < plan_lowered_buffer_count(l); b++) {
      plan_lowered_buffer_info bi;
      assert_int_equal(plan_lowered_buffer(&bi, l, b), PLAN_OK);
      int64_t first = -1;
      for (int64_t r = 0; r < nranks; r++) {
        int64_t coord[PLAN_MAX_MESH_AXES], x = r;
        for (int a = naxes - 1; a >= 0; a--) {
          coord[a] = x % plan_mesh_axis_size(lp, a);
          x /= plan_mesh_axis_size(lp, a);
        }
        int64_t d0[PLAN_MAX_RANK], o0[PLAN_MAX_RANK], d1[PLAN_MAX_RANK],
            o1[PLAN_MAX_RANK];
        assert_int_equal(plan_lowered_buffer_block(d0, o0, l, b, r), bi.rank);
        assert_int_equal(plan_lowered_placement_block(d1, o1, l, &bi.placement,
                                                      bi.tensor, coord),
                         bi.rank);
        int64_t n = 1;
        for (int d = 0; d < bi.rank; d++) {
          assert_int_equal(d0[d], d1[d]);
          assert_int_equal(o0[d], o1[d]);
          n *= d1[d];
        }
        if (first < 0)
          first = n;
        differ += n != first;
        blocks++;
      }
    }
    assert_true(blocks > 0);
    assert_true(f ? 1 : differ > 0); /* ratios: pieces of unequal sizes */
    plan_lowered_buffer_info bi;
    assert_int_equal(plan_lowered_buffer(&bi, l, 0), PLAN_OK);
    int64_t coord[PLAN_MAX_MESH_AXES] = {0};
    assert_int_equal(
        plan_lowered_placement_block(NULL, NULL, l, &bi.placement, -1, coord),
        PLAN_EUSAGE);
    assert_int_equal(
        plan_lowered_placement_block(NULL, NULL, l, NULL, bi.tensor, coord),
        PLAN_EUSAGE);
    plan_lowered_free(l);
    plan_free(p);
  }
}

/* The vocab-parallel loss (examples/lm-vocab-parallel.plan.yaml, classes
 * split over tp=2): no lowered step gathers the logits; the loss's three
 * all-reduces and its gradient's two are the op steps' own, counted as
 * "op_all_reduce"; the mlp-megatron forward has none. */
static void test_vocab_parallel_counts(void **state) {
  (void)state;
  plan_plan *p;
  plan_lowered *l = lower_file("examples/lm-vocab-parallel.plan.yaml", &p);
  check_steps(l);
  assert_int_equal(plan_lowered_collective_count(l, "op_all_reduce"), 3 + 2);
  assert_int_equal(plan_lowered_collective_count(l, "all_gather"), 0);
  plan_lowered_free(l);
  plan_free(p);
  l = lower_file("examples/mlp-megatron.plan.yaml", &p);
  assert_int_equal(plan_lowered_collective_count(l, "op_all_reduce"), 0);
  plan_lowered_free(l);
  plan_free(p);
  /* the factor kind: cross_entropy's classes, [8, 32] logits */
  plan_shape in[2] = {{.rank = 2, .dims = {8, 32}, .dtype = PLAN_F32},
                      {.rank = 1, .dims = {8}, .dtype = PLAN_I64}};
  plan_shape out[1] = {{.rank = 0, .dtype = PLAN_F32}};
  plan_op_factor f[PLAN_MAX_FACTORS];
  int n = plan_op_factors(f, PLAN_MAX_FACTORS, PLAN_OP_CROSS_ENTROPY, NULL, in,
                          2, out, 1, NULL, 0);
  assert_true(n > 0);
  int collective = 0;
  for (int i = 0; i < n; i++)
    if (f[i].kind == PLAN_FACTOR_COLLECTIVE) {
      collective++;
      assert_int_equal(f[i].size, 32);
      assert_int_equal(f[i].reduce, -1);
    }
  assert_int_equal(collective, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp),
      cmocka_unit_test(test_vocab_parallel_counts),
      cmocka_unit_test(test_training),
      cmocka_unit_test(test_bad_indexes),
      cmocka_unit_test(test_op_registry),
      cmocka_unit_test(test_abi_sizes),
      cmocka_unit_test(test_pipeline),
      cmocka_unit_test(test_training_views),
      cmocka_unit_test(test_ratio_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
