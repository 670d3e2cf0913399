/* `plan show`: a readable table of the plan: mesh, tensors with their
 * storage placements, and every op with its shapes, placements and stage.
 * Built only on the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_show[] =
    "usage: plan show FILE\n"
    "\n"
    "Prints the program and mesh at a glance, then one row per tensor that\n"
    "the plan stores (inputs, params, consts: shape, dtype, placement) and "
    "one\n"
    "row per op in topological order (kind, input and output shapes with the\n"
    "placements the strategy gives them, pipeline stage).\n"
    "Exit: 0 printed, 2 unreadable input.\n";

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

int cmd_show(int argc, char **argv) {
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1])
      return cli_usage("show", "unknown option '%s'", argv[i]);
    if (file)
      return cli_usage("show", "one file at a time");
    file = argv[i];
  }
  if (!file)
    return cli_usage("show", "no file given");
  plan_plan *p;
  if (plan_load(&p, file))
    return cli_fail_last();
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
  printf("\n%s%-*s  %-13s %s  ->  %s\n", staged ? "stage " : "", wop, "op",
         "kind", "inputs", "outputs");
  char ins[2048], outs[1024];
  for (int i = 0; i < nops; i++) {
    operands(p, i, 0, ins, sizeof ins);
    operands(p, i, 1, outs, sizeof outs);
    if (staged)
      printf("%5d ", plan_op_stage(p, i));
    printf("%-*s  %-13s %s  ->  %s\n", wop, plan_program_op_name(prog, i),
           plan_program_op_kind(prog, i), ins, outs);
  }
  plan_free(p);
  return EXIT_OK;
}
