/* `plan show`: a readable table of the plan: mesh, tensors with their
 * storage placements, and every op with its shapes, placements and stage.
 * Built only on the public API. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"
#include "libplan/cost.h"

const char usage_show[] =
    "usage: plan show [--cost] [--hardware NAME] [--svg OUT --tensor NAME] "
    "FILE\n"
    "\n"
    "Prints the program and mesh at a glance, then one row per tensor that\n"
    "the plan stores (inputs, params, consts: shape, dtype, placement) and "
    "one\n"
    "row per op in topological order (kind, input and output shapes with the\n"
    "placements the strategy gives them, pipeline stage).\n"
    "  --cost           also the modeled time of each op, the collectives\n"
    "                   lowering inserts, and the step (docs/cost.md)\n"
    "  --hardware NAME  the profile to price on (implies --cost; default the\n"
    "                   plan's own hardware, else h100)\n"
    "  --svg OUT        instead, write a picture of how the plan lays out one\n"
    "                   tensor over the mesh (which rank holds which block;\n"
    "                   replicas share a colour, partial values hatched)\n"
    "  --tensor NAME    the tensor --svg draws (an input, param, activation\n"
    "                   or output)\n"
    "Exit: 0 printed, 2 unreadable input (or a plan the cost model refuses,\n"
    "or a tensor the plan does not have).\n";

/* `plan show --svg OUT --tensor NAME`: the sharding picture, written
 * atomically. */
static int write_sharding(const plan_plan *p, const char *tensor,
                          const char *out) {
  if (!plan_has_mesh(p))
    return cli_usage("show", "--svg needs a plan with a mesh");
  char *text;
  size_t len;
  if (plan_sharding_svg(&text, &len, p, tensor))
    return cli_fail_last();
  int rc = cli_write_output(out, text, len);
  plan_buffer_free(text);
  return rc;
}

static void shape_of(const plan_program *prog, int t, char *buf, size_t sz) {
  int64_t dims[16];
  int r = plan_program_tensor_shape(prog, t, dims, 16);
  size_t u = (size_t)snprintf(buf, sz, "[");
  for (int d = 0; d < r && u < sz; d++)
    u += (size_t)snprintf(buf + u, sz - u, "%s%lld", d ? "," : "",
                          (long long)dims[d]);
  if (u < sz)
    snprintf(buf + u, sz - u, "]");
}

/* "name[8,16]:S(0)R" for each operand */
static void operands(const plan_plan *p, int op, int output, char *buf,
                     size_t sz) {
  const plan_program *prog = plan_get_program(p);
  size_t u = 0;
  buf[0] = 0;
  int count = 0;
  char pl[128], shape[96];
  for (int slot = 0;; slot++) {
    int t = output ? plan_program_op_output(prog, op, slot)
                   : plan_program_op_input(prog, op, slot);
    if (t < 0)
      break;
    if (plan_op_placement(pl, sizeof pl, p, op, output, slot) != PLAN_OK)
      pl[0] = 0;
    shape_of(prog, t, shape, sizeof shape);
    u += (size_t)snprintf(buf + u, u < sz ? sz - u : 0, "%s%s%s%s%s",
                          count ? ", " : "", plan_program_tensor_name(prog, t),
                          shape, pl[0] ? " " : "", pl);
    count++;
    if (u >= sz)
      break;
  }
}

/* A duration in the unit that reads best. */
static void print_seconds(double s) {
  if (s >= 1)
    printf("%9.3f s ", s);
  else if (s >= 1e-3)
    printf("%9.3f ms", s * 1e3);
  else
    printf("%9.3f us", s * 1e6);
}

int cmd_show(int argc, char **argv) {
  const char *file = NULL, *hardware = NULL, *svg = NULL, *tensor = NULL;
  bool cost = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--svg") && i + 1 < argc) {
      svg = argv[++i];
      continue;
    }
    if (!strcmp(argv[i], "--tensor") && i + 1 < argc) {
      tensor = argv[++i];
      continue;
    }
    if (!strcmp(argv[i], "--cost")) {
      cost = true;
      continue;
    }
    if (!strcmp(argv[i], "--hardware") && i + 1 < argc) {
      hardware = argv[++i];
      cost = true;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1])
      return cli_unknown_option("show", argv[i]);
    if (file)
      return cli_usage("show", "one file at a time");
    file = argv[i];
  }
  if (!file)
    return cli_usage("show", "no file given");
  if (!svg != !tensor)
    return cli_usage("show", "--svg and --tensor go together");
  if (svg && cost)
    return cli_usage("show", "--svg draws a picture; --cost prints a table");
  plan_plan *p;
  if (plan_load(&p, file))
    return cli_fail_last();
  if (svg) {
    int rc = write_sharding(p, tensor, svg);
    plan_free(p);
    return rc;
  }
  plan_cost_model *model = NULL;
  plan_cost_report *report = NULL;
  if (cost && (!plan_has_mesh(p) || plan_cost_model_new(&model, p, hardware) ||
               plan_cost_plan(&report, model, p))) {
    if (!plan_has_mesh(p))
      cli_usage("show", "--cost needs a plan with a mesh");
    int rc = plan_has_mesh(p) ? cli_fail_last() : EXIT_BAD_INPUT;
    plan_cost_model_free(model);
    plan_free(p);
    return rc;
  }
  const plan_program *prog = plan_get_program(p);
  plan_hash h;
  char hb[PLAN_HASH_STRLEN];
  int nops = plan_program_op_count(prog), nt = plan_program_tensor_count(prog);
  plan_program_hash(&h, prog);
  printf("program  %s: %d ops, %d tensors, %s\n",
         plan_program_name(prog)[0] ? plan_program_name(prog) : "(unnamed)",
         nops, nt, plan_hash_format(h, hb));
  if (plan_has_mesh(p)) {
    printf("mesh     [");
    for (int a = 0; a < plan_mesh_axis_count(p); a++)
      printf("%s%s=%lld", a ? ", " : "", plan_mesh_axis_name(p, a),
             (long long)plan_mesh_axis_size(p, a));
    printf("], %lld devices", (long long)plan_mesh_device_count(p));
    bool ident = true;
    for (int64_t r = 0; r < plan_mesh_device_count(p) && ident; r++)
      ident = plan_mesh_device(p, r) == r;
    printf("%s\n", ident ? "" : " (custom device order)");
    if (plan_stage_count(p))
      printf("pipeline %d stages\n", plan_stage_count(p));
    plan_hash_part(&h, p, PLAN_PART_PLAN);
    printf("plan     %s\n", plan_hash_format(h, hb));
  }
  /* tensors stored by the plan */
  int wname = 6;
  for (int t = 0; t < nt; t++) {
    const char *role = plan_program_tensor_role(prog, t);
    int l = (int)strlen(plan_program_tensor_name(prog, t));
    if (strcmp(role, "activation") && strcmp(role, "output") && l > wname)
      wname = l;
  }
  printf("\n%-*s  %-18s %-6s %-7s %s\n", wname, "tensor", "shape", "dtype",
         "role", "placement");
  for (int t = 0; t < nt; t++) {
    const char *role = plan_program_tensor_role(prog, t);
    if (!strcmp(role, "activation") || !strcmp(role, "output"))
      continue;
    char shape[96], pl[128] = "-";
    shape_of(prog, t, shape, sizeof shape);
    if (plan_has_mesh(p))
      plan_tensor_placement(pl, sizeof pl, p, t);
    printf("%-*s  %-18s %-6s %-7s %s\n", wname,
           plan_program_tensor_name(prog, t), shape,
           plan_program_tensor_dtype(prog, t), role, pl);
  }
  int wop = 2;
  for (int i = 0; i < nops; i++) {
    int l = (int)strlen(plan_program_op_name(prog, i));
    if (l > wop)
      wop = l;
  }
  bool staged = plan_stage_count(p) > 0;
  bool timed = report && plan_cost_report_op_count(report) == (size_t)nops;
  printf("\n%s%s%-*s  %-13s %s  ->  %s\n", staged ? "stage " : "",
         timed ? "     modeled  " : "", wop, "op", "kind", "inputs", "outputs");
  char ins[2048], outs[1024];
  for (int i = 0; i < nops; i++) {
    operands(p, i, 0, ins, sizeof ins);
    operands(p, i, 1, outs, sizeof outs);
    if (staged)
      printf("%5d ", plan_op_stage(p, i));
    plan_cost_op_info oi;
    if (timed && !plan_cost_report_op(&oi, report, (size_t)i)) {
      print_seconds(oi.seconds);
      printf("  ");
    }
    printf("%-*s  %-13s %s  ->  %s\n", wop, plan_program_op_name(prog, i),
           plan_program_op_kind(prog, i), ins, outs);
  }
  if (report) {
    size_t nc = plan_cost_report_collective_count(report);
    printf("\n     modeled  collective (%zu)\n", nc);
    for (size_t k = 0; k < nc; k++) {
      plan_cost_collective_info ci;
      if (plan_cost_report_collective(&ci, report, k))
        continue;
      print_seconds(ci.seconds);
      printf("  %-14s %-4s %s %s -> %s (%s)\n", ci.kind, ci.axis, ci.tensor,
             ci.from, ci.to, ci.phase);
    }
    printf("\nstep ");
    print_seconds(plan_cost_report_step_seconds(report));
    char mem[32];
    printf(" modeled on %s; peak memory %s per device%s\n",
           plan_cost_model_hardware(model),
           plan_format_bytes(mem, sizeof mem,
                             plan_cost_report_memory_peak(report)),
           plan_cost_report_fits(report) ? "" : " (does not fit)");
  }
  plan_cost_report_free(report);
  plan_cost_model_free(model);
  plan_free(p);
  return EXIT_OK;
}
