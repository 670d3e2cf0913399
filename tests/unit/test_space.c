/* Unit tests of libplan/space.h through the public headers alone:
 * placements and their compact spelling, an op's strategies, reading and
 * setting decisions in place (read back through plan.h's views), the
 * device order, op kinds, the struct-based pricing; and the public views
 * the Lua module needs besides (provenance values, program.h's operand
 * counts, producers and outputs). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "libplan/libplan.h"

#define MEGATRON "examples/mlp-megatron.plan.yaml"

static plan_plan *load(const char *path) {
  plan_plan *p = NULL;
  assert_int_equal(plan_load(&p, path), PLAN_OK);
  return p;
}

static int op_of(const plan_plan *p, const char *name) {
  int op = plan_program_op_find(plan_get_program(p), name);
  assert_true(op >= 0);
  return op;
}

static int tensor_of(const plan_plan *p, const char *name) {
  int t = plan_program_tensor_find(plan_get_program(p), name);
  assert_true(t >= 0);
  return t;
}

/* The last error's code is `code` and its message holds `part`. */
static void assert_error(int rc, int code, const char *part) {
  assert_int_equal(rc, code);
  assert_int_equal(plan_error_last()->code, code);
  if (!strstr(plan_error_last()->message, part))
    fail_msg("message '%s' lacks '%s'", plan_error_last()->message, part);
}

static void format_is(const plan_placement *pl, const char *want) {
  char buf[PLAN_PLACEMENT_STRLEN];
  assert_int_equal(plan_placement_format_text(buf, sizeof buf, pl), PLAN_OK);
  assert_string_equal(buf, want);
}

/* ---- the compact spelling ------------------------------------------------ */

static void test_round_trips(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int naxes, rank;
    const char *canonical;
  } cases[] = {
      {"RR", 2, 2, "RR"},
      {"S(0)R", 2, 2, "S(0)R"},
      {"R S(1)", 2, 2, "RS(1)"},
      {"S(-1)R", 2, 2, "S(1)R"},
      {"P", 1, 3, "P(sum)"},
      {"P(avg)P(max)P(min)", 3, 1, "P(avg)P(max)P(min)"},
      {"Replicate()Shard(1)", 2, 2, "RS(1)"},
      {"Partial()Shard(0)", 2, 1, "P(sum)S(0)"},
      {"S(0)S(0)", 2, 2, "S(0)S(0)"},
      {"S(0:1)S(0:0)", 2, 2, "S(0:1)S(0:0)"},
      {"", 0, 2, ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    plan_placement pl, again;
    assert_int_equal(
        plan_placement_parse_text(&pl, cases[i].text, cases[i].naxes), PLAN_OK);
    assert_int_equal(pl.naxes, cases[i].naxes);
    assert_int_equal(plan_placement_resolve(&pl, cases[i].rank), PLAN_OK);
    format_is(&pl, cases[i].canonical);
    /* the canonical form reads back as the same placement */
    assert_int_equal(
        plan_placement_parse_text(&again, cases[i].canonical, cases[i].naxes),
        PLAN_OK);
    assert_int_equal(plan_placement_resolve(&again, cases[i].rank), PLAN_OK);
    assert_int_equal(again.naxes, pl.naxes);
    assert_memory_equal(again.ax, pl.ax, sizeof *pl.ax * pl.naxes);
  }
  /* a resolved placement resolves to itself */
  plan_placement pl, copy;
  assert_int_equal(plan_placement_parse_text(&pl, "S(1)P(sum)", 2), PLAN_OK);
  assert_int_equal(plan_placement_resolve(&pl, 2), PLAN_OK);
  copy = pl;
  assert_int_equal(plan_placement_resolve(&copy, 2), PLAN_OK);
  assert_memory_equal(&copy, &pl, sizeof pl);
  /* the layout: a zeroed value with naxes set is all R */
  plan_placement zero;
  memset(&zero, 0, sizeof zero);
  zero.naxes = 3;
  format_is(&zero, "RRR");
  assert_int_equal(sizeof(plan_axis_pl), 5);
  assert_int_equal(sizeof(plan_placement), 1 + 5 * PLAN_MAX_MESH_AXES);
  assert_int_equal(plan_abi_sizeof("plan_placement"), sizeof(plan_placement));
  assert_int_equal(plan_abi_sizeof("plan_axis_pl"), sizeof(plan_axis_pl));
  assert_int_equal(plan_abi_sizeof("plan_op_strategy"),
                   sizeof(plan_op_strategy));
  assert_int_equal(plan_abi_sizeof("plan_provenance_value"),
                   sizeof(plan_provenance_value));
}

static void test_format_limits(void **state) {
  (void)state;
  plan_placement pl;
  assert_int_equal(plan_placement_parse_text(&pl, "S(0)P(sum)", 2), PLAN_OK);
  assert_int_equal(plan_placement_resolve(&pl, 1), PLAN_OK);
  char buf[PLAN_PLACEMENT_STRLEN];
  memset(buf, 'x', sizeof buf);
  assert_error(plan_placement_format_text(buf, 5, &pl), PLAN_ELIMIT, "bytes");
  assert_string_equal(buf, "S(0)"); /* truncated, NUL-terminated */
  assert_int_equal(plan_placement_format_text(buf, 11, &pl), PLAN_OK);
  assert_string_equal(buf, "S(0)P(sum)");
  assert_error(plan_placement_format_text(buf, 0, &pl), PLAN_EUSAGE, "room");
  assert_error(plan_placement_format_text(NULL, 8, &pl), PLAN_EUSAGE, "NULL");
  pl.naxes = PLAN_MAX_MESH_AXES + 1;
  assert_error(plan_placement_format_text(buf, sizeof buf, &pl), PLAN_EUSAGE,
               "axes");
}

/* Equality, a dim's axes and its evenness, on resolved placements. */
static plan_placement resolved(const char *text, int naxes, int rank) {
  plan_placement pl;
  assert_int_equal(plan_placement_parse_text(&pl, text, naxes), PLAN_OK);
  assert_int_equal(plan_placement_resolve(&pl, rank), PLAN_OK);
  return pl;
}

static void test_placement_queries(void **state) {
  (void)state;
  plan_placement a = resolved("S(0)S(0)R", 3, 2);
  plan_placement b = resolved("S(0:0)S(0:1)R", 3, 2); /* the mesh order */
  plan_placement c = resolved("S(0:1)S(0:0)R", 3, 2); /* reversed */
  plan_placement d = resolved("S(0)S(1)R", 3, 2);
  plan_placement e = resolved("P(sum)RR", 3, 2);
  plan_placement f = resolved("P(max)RR", 3, 2);
  assert_true(plan_placement_equal(&a, &b));
  assert_false(plan_placement_equal(&a, &c));
  assert_false(plan_placement_equal(&a, &d));
  assert_false(plan_placement_equal(&e, &f));
  assert_true(plan_placement_equal(&e, &e));
  assert_false(plan_placement_equal(&a, NULL));
  assert_true(plan_placement_equal(NULL, NULL));
  int axes[PLAN_MAX_MESH_AXES];
  assert_int_equal(plan_placement_dim_axes(&a, 0, axes), 2);
  assert_int_equal(axes[0], 0);
  assert_int_equal(axes[1], 1);
  assert_int_equal(plan_placement_dim_axes(&c, 0, axes), 2);
  assert_int_equal(axes[0], 1); /* major first */
  assert_int_equal(axes[1], 0);
  assert_int_equal(plan_placement_dim_axes(&a, 1, axes), 0);
  assert_int_equal(plan_placement_dim_axes(&d, 1, axes), 1);
  assert_int_equal(axes[0], 1);
  assert_int_equal(plan_placement_dim_axes(NULL, 0, axes), 0);
  const int64_t sizes[3] = {2, 3, 5};
  assert_true(plan_placement_dim_even(&a, 0, 12, sizes)); /* 12 / 2 / 3 */
  assert_false(plan_placement_dim_even(&a, 0, 8, sizes)); /* 4 / 3 */
  assert_true(plan_placement_dim_even(&a, 1, 7, sizes));  /* not sharded */
  assert_false(plan_placement_dim_even(&a, 0, 12, NULL));
}

static void test_bad_spellings(void **state) {
  (void)state;
  plan_placement pl, before;
  memset(&pl, 0x5a, sizeof pl);
  before = pl;
  assert_error(plan_placement_parse_text(&pl, "S(", 1), PLAN_EINVALID,
               "placement 'S('");
  assert_memory_equal(&pl, &before, sizeof pl); /* unchanged */
  assert_error(plan_placement_parse_text(&pl, "RRR", 2), PLAN_EINVALID,
               "entries");
  assert_error(plan_placement_parse_text(&pl, "Q", 1), PLAN_EINVALID,
               "placement 'Q'");
  assert_error(plan_placement_parse_text(&pl, "P(prod)", 1), PLAN_EINVALID,
               "placement 'P(prod)'");
  assert_error(plan_placement_parse_text(&pl, "R", PLAN_MAX_MESH_AXES + 1),
               PLAN_EUSAGE, "axes");
  assert_error(plan_placement_parse_text(&pl, "R", -1), PLAN_EUSAGE, "axes");
  assert_error(plan_placement_parse_text(NULL, "R", 1), PLAN_EUSAGE, "NULL");
  assert_error(plan_placement_parse_text(&pl, NULL, 1), PLAN_EUSAGE, "NULL");

  assert_int_equal(plan_placement_parse_text(&pl, "S(2)R", 2), PLAN_OK);
  before = pl;
  assert_error(plan_placement_resolve(&pl, 2), PLAN_EINVALID,
               "S(2) is out of range for a tensor of rank 2");
  assert_memory_equal(&pl, &before, sizeof pl);
  assert_error(plan_placement_resolve(&pl, PLAN_MAX_RANK + 1), PLAN_EINVALID,
               "rank");
  assert_error(plan_placement_resolve(NULL, 2), PLAN_EUSAGE, "NULL");

  plan_plan *p = load(MEGATRON);
  int x = tensor_of(p, "x");
  assert_int_equal(plan_placement_for_tensor(&pl, p, x, "S(-2)R"), PLAN_OK);
  format_is(&pl, "S(0)R");
  assert_error(plan_placement_for_tensor(&pl, p, x, "S(2)R"), PLAN_EINVALID,
               "placement 'S(2)R': ");
  assert_error(plan_placement_for_tensor(&pl, p, x, "R"), PLAN_EINVALID,
               "placement 'R': placement has 1 entry but the mesh has 2 axes");
  assert_error(plan_placement_for_tensor(&pl, p, 999, "RR"), PLAN_EUSAGE,
               "no tensor 999");
  assert_error(plan_placement_for_tensor(&pl, p, x, NULL), PLAN_EUSAGE, "NULL");
  plan_free(p);
}

/* ---- op kinds ------------------------------------------------------------ */

static void test_op_kinds(void **state) {
  (void)state;
  int n = plan_op_kind_count();
  assert_true(n > 10);
  for (int k = 0; k < n; k++) {
    const char *name = plan_op_kind_name(k);
    assert_non_null(name);
    assert_int_equal(plan_op_kind_from_name(name), k);
  }
  assert_string_equal(plan_op_kind_name(-1), "unknown");
  assert_string_equal(plan_op_kind_name(n), "unknown");
  assert_int_equal(plan_op_kind_from_name("no-such-op"), -1);
  assert_int_equal(plan_op_kind_from_name(NULL), -1);
  int min_in = -9, max_in = -9, min_out = -9, max_out = -9;
  assert_int_equal(plan_op_kind_operands(&min_in, &max_in, &min_out, &max_out,
                                         plan_op_kind_from_name("matmul")),
                   PLAN_OK);
  assert_int_equal(min_in, 2);
  assert_int_equal(max_in, 2);
  assert_int_equal(min_out, 1);
  assert_int_equal(max_out, 1);
  assert_int_equal(plan_op_kind_operands(NULL, NULL, &min_out, NULL,
                                         plan_op_kind_from_name("gelu")),
                   PLAN_OK);
  assert_int_equal(min_out, 1);
  min_in = -9;
  assert_error(plan_op_kind_operands(&min_in, NULL, NULL, NULL, n),
               PLAN_ENOTFOUND, "no op kind");
  assert_int_equal(min_in, -9);
  assert_true(PLAN_MAX_OPERANDS >= 3);
}

/* ---- the strategy space -------------------------------------------------- */

static bool all_r(const plan_placement *pl) {
  for (int a = 0; a < pl->naxes; a++)
    if (pl->ax[a].kind != PLAN_PL_R)
      return false;
  return true;
}

static bool same(const plan_placement *a, const plan_placement *b) {
  char x[PLAN_PLACEMENT_STRLEN], y[PLAN_PLACEMENT_STRLEN];
  plan_placement_format_text(x, sizeof x, a);
  plan_placement_format_text(y, sizeof y, b);
  return !strcmp(x, y);
}

static void test_strategies(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  const plan_program *prog = plan_get_program(p);
  int fc1 = op_of(p, "mlp.fc1");
  plan_op_strategy *list = NULL;
  int n = 0;
  assert_int_equal(plan_op_strategies(&list, &n, p, fc1), PLAN_OK);
  assert_non_null(list);
  /* matmul [8,16] x [16,64] on dp=2 x tp=2: each axis R or one of the
   * three factors (m, n, k), and every combination is legal at these
   * sizes: 4 x 4 */
  assert_int_equal(n, 16);
  /* all-R first */
  for (int j = 0; j < 2; j++)
    assert_true(all_r(&list[0].in[j]));
  assert_true(all_r(&list[0].out[0]));
  /* every entry is normalized over the mesh, and the plan's own strategy
   * (column parallel, batch over dp) is one of them */
  plan_op_strategy own;
  assert_int_equal(plan_get_strategy(&own, p, fc1), PLAN_OK);
  int found = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < plan_program_op_input_count(prog, fc1); j++) {
      assert_int_equal(list[i].in[j].naxes, 2);
      plan_placement copy = list[i].in[j];
      assert_int_equal(plan_placement_resolve(&copy, 2), PLAN_OK);
    }
    assert_int_equal(list[i].out[0].naxes, 2);
    found += same(&list[i].in[0], &own.in[0]) &&
             same(&list[i].in[1], &own.in[1]) &&
             same(&list[i].out[0], &own.out[0]);
  }
  assert_int_equal(found, 1);
  plan_buffer_free(list);

  list = (plan_op_strategy *)1;
  n = 7;
  assert_error(plan_op_strategies(&list, &n, p, 99), PLAN_EUSAGE, "no op 99");
  assert_null(list);
  assert_int_equal(n, 0);
  assert_error(plan_op_strategies(NULL, &n, p, fc1), PLAN_EUSAGE, "NULL");
  assert_error(plan_op_strategies(&list, &n, NULL, fc1), PLAN_EUSAGE, "NULL");
  plan_free(p);

  /* a program-only document has no mesh to place on */
  plan_plan *q = load("examples/mlp-program.yaml");
  assert_error(plan_op_strategies(&list, &n, q, 0), PLAN_EUSAGE, "no mesh");
  plan_free(q);
}

/* ---- reading and setting decisions --------------------------------------- */

static void view_is(const plan_plan *p, int op, int output, int slot,
                    const char *want) {
  char buf[128];
  assert_int_equal(plan_op_placement(buf, sizeof buf, p, op, output, slot),
                   PLAN_OK);
  assert_string_equal(buf, want);
}

static void test_set_strategy(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  int fc1 = op_of(p, "mlp.fc1"), fc2 = op_of(p, "mlp.fc2");
  view_is(p, fc1, 0, 1, "RS(1)");
  plan_op_strategy *list;
  int n;
  assert_int_equal(plan_op_strategies(&list, &n, p, fc1), PLAN_OK);
  /* each legal strategy set, then read back through the views */
  for (int i = 0; i < n; i++) {
    assert_int_equal(plan_set_strategy(p, fc1, list[i].in, list[i].out),
                     PLAN_OK);
    char want[PLAN_PLACEMENT_STRLEN];
    for (int j = 0; j < 2; j++) {
      plan_placement_format_text(want, sizeof want, &list[i].in[j]);
      view_is(p, fc1, 0, j, want);
    }
    plan_placement_format_text(want, sizeof want, &list[i].out[0]);
    view_is(p, fc1, 1, 0, want);
    plan_op_strategy got;
    assert_int_equal(plan_get_strategy(&got, p, fc1), PLAN_OK);
    assert_memory_equal(got.in, list[i].in, 2 * sizeof *got.in);
    assert_memory_equal(got.out, list[i].out, sizeof *got.out);
  }
  /* a placement that does not fit changes nothing */
  plan_placement bad[2] = {list[1].in[0], list[1].in[1]};
  bad[0].naxes = 1;
  assert_error(plan_set_strategy(p, fc1, bad, list[1].out), PLAN_EINVALID,
               "input of tensor 'x'");
  bad[0] = list[1].in[0];
  bad[1].ax[0].kind = PLAN_PL_S;
  bad[1].ax[0].dim = 2; /* w1 has rank 2 */
  bad[1].ax[0].level = 0;
  assert_error(plan_set_strategy(p, fc1, bad, list[1].out), PLAN_EINVALID,
               "tensor 'w1'");
  plan_placement odd = list[1].out[0];
  odd.ax[1].kind = 7;
  assert_error(plan_set_strategy(p, fc1, list[1].in, &odd), PLAN_EINVALID,
               "output of tensor 'h'");
  plan_op_strategy got;
  assert_int_equal(plan_get_strategy(&got, p, fc1), PLAN_OK);
  assert_memory_equal(got.in, list[n - 1].in, 2 * sizeof *got.in);
  assert_error(plan_set_strategy(p, 99, list[0].in, list[0].out), PLAN_EUSAGE,
               "no op 99");
  assert_error(plan_set_strategy(p, fc1, NULL, list[0].out), PLAN_EUSAGE,
               "NULL");
  plan_buffer_free(list);

  /* cleared: no strategy to read */
  assert_int_equal(plan_clear_strategy(p, fc2), PLAN_OK);
  assert_error(plan_get_strategy(&got, p, fc2), PLAN_ENOTFOUND,
               "has no strategy");
  char buf[64];
  assert_int_equal(plan_op_placement(buf, sizeof buf, p, fc2, 0, 0),
                   PLAN_ENOTFOUND);
  assert_error(plan_clear_strategy(p, -1), PLAN_EUSAGE, "no op -1");
  assert_error(plan_get_strategy(&got, p, 99), PLAN_EUSAGE, "no op 99");
  assert_error(plan_get_strategy(NULL, p, fc1), PLAN_EUSAGE, "");
  plan_free(p);
}

/* What a plan file states can be set back as it is (a search's undo puts
 * back what it read): every example's strategies and placements. */
static void test_set_back(void **state) {
  (void)state;
  static const char *const files[] = {
      MEGATRON,
      "examples/transformer-block.plan.yaml",
      "examples/transformer-train.plan.yaml",
      "examples/moe-experts.plan.yaml",
      "examples/pipeline-1f1b.plan.yaml",
      "examples/transformer4-interleaved.plan.yaml",
      "examples/models/llama3-8b-layer.recipe.plan.yaml",
  };
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    plan_plan *p = load(files[f]);
    const plan_program *prog = plan_get_program(p);
    int set = 0;
    for (int op = 0; op < plan_program_op_count(prog); op++) {
      plan_op_strategy s;
      if (plan_get_strategy(&s, p, op))
        continue;
      if (plan_set_strategy(p, op, s.in, s.out))
        fail_msg("%s: op %d: %s", files[f], op, plan_error_last()->message);
      set++;
    }
    assert_true(set > 0);
    for (int t = 0; t < plan_program_tensor_count(prog); t++) {
      plan_placement pl;
      if (plan_program_tensor_producer(prog, t) < 0 &&
          !plan_get_placement(&pl, p, t) && plan_set_placement(p, t, &pl))
        fail_msg("%s: tensor %d: %s", files[f], t, plan_error_last()->message);
    }
    plan_free(p);
  }
}

static void test_set_placements(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  int w1 = tensor_of(p, "w1"), h = tensor_of(p, "h"), y = tensor_of(p, "y");
  char buf[128];
  plan_placement pl;
  assert_int_equal(plan_get_placement(&pl, p, w1), PLAN_OK);
  format_is(&pl, "RS(1)");
  assert_int_equal(plan_placement_for_tensor(&pl, p, w1, "S(0)R"), PLAN_OK);
  assert_int_equal(plan_set_placement(p, w1, &pl), PLAN_OK);
  assert_int_equal(plan_tensor_placement(buf, sizeof buf, p, w1), PLAN_OK);
  assert_string_equal(buf, "S(0)R");
  /* cleared: R by default, and no placement stated */
  assert_int_equal(plan_set_placement(p, w1, NULL), PLAN_OK);
  assert_int_equal(plan_tensor_placement(buf, sizeof buf, p, w1), PLAN_OK);
  assert_string_equal(buf, "RR");
  assert_error(plan_get_placement(&pl, p, w1), PLAN_ENOTFOUND, "'w1'");
  /* an activation is no leaf */
  assert_error(plan_set_placement(p, h, &pl), PLAN_EUSAGE, "not a leaf");
  assert_error(plan_get_placement(&pl, p, h), PLAN_EUSAGE, "not a leaf");
  plan_placement wide = pl;
  wide.naxes = 3;
  assert_error(plan_set_placement(p, w1, &wide), PLAN_EINVALID,
               "placement of tensor 'w1'");

  /* the program's output y: delivered S(0)R */
  const plan_program *prog = plan_get_program(p);
  assert_int_equal(plan_program_output_count(prog), 1);
  assert_int_equal(plan_program_output(prog, 0), y);
  assert_int_equal(plan_get_output_placement(&pl, p, 0), PLAN_OK);
  format_is(&pl, "S(0)R");
  assert_int_equal(plan_placement_for_tensor(&pl, p, y, "RR"), PLAN_OK);
  assert_int_equal(plan_set_output_placement(p, 0, &pl), PLAN_OK);
  plan_placement back;
  assert_int_equal(plan_get_output_placement(&back, p, 0), PLAN_OK);
  format_is(&back, "RR");
  assert_int_equal(plan_set_output_placement(p, 0, NULL), PLAN_OK);
  assert_error(plan_get_output_placement(&back, p, 0), PLAN_ENOTFOUND,
               "output 'y'");
  assert_error(plan_set_output_placement(p, 1, &pl), PLAN_EUSAGE,
               "no output 1");
  assert_error(plan_get_output_placement(&back, p, -1), PLAN_EUSAGE,
               "no output -1");

  /* pinned regions */
  assert_int_equal(plan_op_pinned(p, op_of(p, "mlp.act")), 1);
  assert_int_equal(plan_op_pinned(p, op_of(p, "mlp.fc1")), 0);
  assert_int_equal(plan_op_pinned(p, 99), 0);
  assert_int_equal(plan_op_pinned(NULL, 0), 0);
  plan_free(p);
}

static void test_mesh_devices(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  const int64_t order[4] = {3, 1, 2, 0};
  assert_int_equal(plan_set_mesh_devices(p, order), PLAN_OK);
  for (int64_t r = 0; r < 4; r++)
    assert_int_equal(plan_mesh_device(p, r), order[r]);
  const int64_t twice[4] = {0, 0, 1, 2};
  assert_error(plan_set_mesh_devices(p, twice), PLAN_EINVALID,
               "not a permutation");
  assert_int_equal(plan_mesh_device(p, 0), 3); /* unchanged */
  assert_int_equal(plan_set_mesh_devices(p, NULL), PLAN_OK);
  for (int64_t r = 0; r < 4; r++)
    assert_int_equal(plan_mesh_device(p, r), r);
  assert_error(plan_set_mesh_devices(NULL, order), PLAN_EUSAGE, "no mesh");
  plan_free(p);
}

/* ---- pricing ------------------------------------------------------------- */

static void test_pricing(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  plan_cost_model *m;
  assert_int_equal(plan_cost_model_new(&m, p, NULL), PLAN_OK);
  int fc1 = op_of(p, "mlp.fc1"), x = tensor_of(p, "x");
  double own = -1, repl = -1, str = -1;
  assert_int_equal(plan_cost_op_seconds(&own, m, p, fc1, NULL, NULL), PLAN_OK);
  assert_true(own > 0);
  plan_op_strategy *list;
  int n;
  assert_int_equal(plan_op_strategies(&list, &n, p, fc1), PLAN_OK);
  assert_int_equal(
      plan_cost_op_seconds(&repl, m, p, fc1, list[0].in, list[0].out), PLAN_OK);
  assert_true(repl >= own); /* nothing sharded: at least as slow */
  /* the same as the checked string form */
  const char *rin[] = {"RR", "RR"}, *rout[] = {"RR"};
  assert_int_equal(plan_cost_op(&str, m, p, fc1, rin, rout), PLAN_OK);
  assert_true(str == repl);
  plan_buffer_free(list);
  assert_error(plan_cost_op_seconds(&own, m, p, 99, NULL, NULL), PLAN_EUSAGE,
               "out of range");

  plan_placement a, b;
  assert_int_equal(plan_placement_for_tensor(&a, p, x, "S(0)R"), PLAN_OK);
  assert_int_equal(plan_placement_for_tensor(&b, p, x, "RR"), PLAN_OK);
  double s = -1;
  assert_int_equal(plan_cost_redist_seconds(&s, m, p, x, &a, &a), PLAN_OK);
  assert_true(s == 0);
  assert_int_equal(plan_cost_redist_seconds(&s, m, p, x, &a, &b), PLAN_OK);
  assert_true(s > 0); /* an all-gather over dp */
  assert_int_equal(plan_cost_redistribute(&str, m, p, x, "S(0)R", "RR"),
                   PLAN_OK);
  assert_true(str == s);
  assert_error(plan_cost_redist_seconds(&s, m, p, -1, &a, &b), PLAN_EUSAGE,
               "out of range");
  plan_cost_model_free(m);
  plan_free(p);
}

/* ---- provenance and program views ---------------------------------------- */

static void test_provenance(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  plan_provenance_value *v = NULL;
  assert_int_equal(plan_get_provenance(&v, p), PLAN_OK);
  assert_int_equal(v->type, PLAN_VALUE_MAP);
  assert_int_equal(v->count, 2);
  assert_string_equal(v->keys[0], "strategy");
  assert_int_equal(v->items[0].type, PLAN_VALUE_STRING);
  assert_string_equal(v->items[0].string, "megatron");
  assert_string_equal(v->keys[1], "seed");
  assert_int_equal(v->items[1].type, PLAN_VALUE_INT);
  assert_int_equal(v->items[1].integer, 0);
  plan_buffer_free(v);

  plan_hash before, after;
  assert_int_equal(plan_hash_part(&before, p, PLAN_PART_PROVENANCE), PLAN_OK);
  plan_provenance_value list[3] = {{.type = PLAN_VALUE_BOOL, .boolean = 1},
                                   {.type = PLAN_VALUE_FLOAT, .number = 2.5},
                                   {.type = PLAN_VALUE_STRING, .string = "x"}};
  plan_provenance_value items[4] = {
      {.type = PLAN_VALUE_INT, .integer = -7},
      {.type = PLAN_VALUE_SEQ, .count = 3, .items = list},
      {.type = PLAN_VALUE_MAP},
      {.type = PLAN_VALUE_NULL}};
  const char *keys[4] = {"a", "b", "c", "d"};
  plan_provenance_value root = {
      .type = PLAN_VALUE_MAP, .count = 4, .items = items, .keys = keys};
  assert_int_equal(plan_set_provenance(p, &root), PLAN_OK);
  list[2].string = "changed after"; /* the plan holds its own copy */
  assert_int_equal(plan_get_provenance(&v, p), PLAN_OK);
  assert_int_equal(v->count, 4);
  assert_string_equal(v->keys[3], "d");
  assert_int_equal(v->items[0].integer, -7);
  assert_int_equal(v->items[1].type, PLAN_VALUE_SEQ);
  assert_int_equal(v->items[1].count, 3);
  assert_int_equal(v->items[1].items[0].boolean, 1);
  assert_true(v->items[1].items[1].number == 2.5);
  assert_string_equal(v->items[1].items[2].string, "x");
  assert_int_equal(v->items[2].type, PLAN_VALUE_MAP);
  assert_int_equal(v->items[2].count, 0);
  assert_int_equal(v->items[3].type, PLAN_VALUE_NULL);
  plan_buffer_free(v);
  assert_int_equal(plan_hash_part(&after, p, PLAN_PART_PROVENANCE), PLAN_OK);
  assert_false(plan_hash_equal(before, after));
  /* it is written and reads back */
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_write_buffer(&text, &len, p, NULL), PLAN_OK);
  plan_plan *q = NULL;
  assert_int_equal(plan_load_buffer(&q, text, len, "<test>", "examples"),
                   PLAN_OK);
  assert_int_equal(plan_hash_part(&before, q, PLAN_PART_PROVENANCE), PLAN_OK);
  assert_true(plan_hash_equal(before, after));
  plan_free(q);
  plan_buffer_free(text);

  /* refused, the plan unchanged */
  const char *twice[2] = {"a", "a"};
  plan_provenance_value dup = {
      .type = PLAN_VALUE_MAP, .count = 2, .items = items, .keys = twice};
  assert_error(plan_set_provenance(p, &dup), PLAN_EINVALID, "key 'a' twice");
  assert_error(plan_set_provenance(p, &list[0]), PLAN_EINVALID, "is a mapping");
  plan_provenance_value nul = {.type = PLAN_VALUE_STRING};
  plan_provenance_value holder = {
      .type = PLAN_VALUE_MAP, .count = 1, .items = &nul, .keys = keys};
  assert_error(plan_set_provenance(p, &holder), PLAN_EINVALID, "NULL string");
  nul.type = 42;
  assert_error(plan_set_provenance(p, &holder), PLAN_EINVALID, "type 42");
  assert_int_equal(plan_hash_part(&before, p, PLAN_PART_PROVENANCE), PLAN_OK);
  assert_true(plan_hash_equal(before, after));
  /* nested too deep */
  plan_provenance_value deep[70];
  for (int i = 0; i < 70; i++)
    deep[i] = (plan_provenance_value){.type = PLAN_VALUE_SEQ,
                                      .count = i < 69,
                                      .items = i < 69 ? &deep[i + 1] : NULL};
  holder.items = deep;
  assert_error(plan_set_provenance(p, &holder), PLAN_ELIMIT, "deep");

  /* removed */
  assert_int_equal(plan_set_provenance(p, NULL), PLAN_OK);
  v = (plan_provenance_value *)1;
  assert_error(plan_get_provenance(&v, p), PLAN_ENOTFOUND, "no provenance");
  assert_null(v);
  assert_error(plan_set_provenance(NULL, &root), PLAN_EUSAGE, "NULL");
  plan_free(p);
}

static void test_program_views(void **state) {
  (void)state;
  plan_plan *p = load(MEGATRON);
  const plan_program *prog = plan_get_program(p);
  int fc1 = op_of(p, "mlp.fc1"), act = op_of(p, "mlp.act");
  assert_int_equal(plan_program_op_input_count(prog, fc1), 2);
  assert_int_equal(plan_program_op_output_count(prog, fc1), 1);
  assert_int_equal(plan_program_op_input_count(prog, act), 1);
  assert_int_equal(plan_program_op_input_count(prog, 99), -1);
  assert_int_equal(plan_program_op_output_count(prog, -1), -1);
  assert_int_equal(plan_program_tensor_producer(prog, tensor_of(p, "h")), fc1);
  assert_int_equal(plan_program_tensor_producer(prog, tensor_of(p, "x")), -1);
  assert_int_equal(plan_program_tensor_producer(prog, 999), -1);
  assert_int_equal(plan_program_output(prog, 1), -1);
  assert_int_equal(plan_program_output_count(NULL), 0);
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trips),
      cmocka_unit_test(test_format_limits),
      cmocka_unit_test(test_placement_queries),
      cmocka_unit_test(test_bad_spellings),
      cmocka_unit_test(test_op_kinds),
      cmocka_unit_test(test_strategies),
      cmocka_unit_test(test_set_strategy),
      cmocka_unit_test(test_set_back),
      cmocka_unit_test(test_set_placements),
      cmocka_unit_test(test_mesh_devices),
      cmocka_unit_test(test_pricing),
      cmocka_unit_test(test_provenance),
      cmocka_unit_test(test_program_views),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
