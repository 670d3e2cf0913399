/* Writing plans as YAML in the canonical layout (`plan fmt`): fixed section
 * and key order, one line per op and strategy, placements in their compact
 * spelling, patterns expanded, defaults left out. Reading the output back
 * gives the same IR (load, save, load is the identity) and the same hashes.
 *
 * This file writes the plan's own sections; the program and mesh are in
 * write_program.c, the scalars and values in emit.c, the file write in
 * write_file.c. */
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"
#include "write/emit.h"

/* ---- plan sections
 * ------------------------------------------------------------------- */

static void w_op_list(plan_buf *b, const plan_program *prog,
                      const bool *flags) {
  plan_buf_putc(b, '[');
  bool first = true;
  for (int i = 0; i < prog->nops; i++)
    if (flags[i]) {
      if (!first)
        plan_buf_puts(b, ", ");
      first = false;
      plan_w_str(b, prog->ops[i].name);
    }
  plan_buf_putc(b, ']');
}

static int w_pipeline(plan_buf *b, const plan_plan *p) {
  const plan_pipeline *pp = &p->pipeline;
  const plan_program *prog = p->program;
  plan_buf_puts(b, "pipeline:\n");
  if (pp->axis >= 0)
    plan_buf_printf(b, "  axis: %s\n", p->mesh.axis_names[pp->axis]);
  plan_buf_printf(b, "  microbatches: %lld\n", (long long)pp->microbatches);
  plan_buf_printf(b, "  schedule: %s\n", plan_schedule_names[pp->schedule]);
  plan_buf_puts(b, "  stages:\n");
  bool *member = calloc((size_t)prog->nops + 1, 1);
  if (!member)
    return plan_oom();
  for (int s = 0; s < pp->nstages; s++) {
    for (int i = 0; i < prog->nops; i++)
      member[i] = pp->op_stage[i] == s;
    plan_buf_puts(b, "    - {ops: ");
    w_op_list(b, prog, member);
    if (pp->stages[s].submesh >= 0) {
      plan_buf_puts(b, ", submesh: ");
      plan_w_str(b, p->mesh.submeshes[pp->stages[s].submesh].name);
    }
    plan_buf_puts(b, "}\n");
  }
  free(member);
  if (pp->schedule == PLAN_SCHED_EXPLICIT) {
    plan_buf_puts(b, "  grid:\n");
    for (int r = 0; r < pp->grid_ranks; r++) {
      plan_buf_puts(b, "    - \"");
      for (int i = 0; i < pp->grid_len[r]; i++) {
        const plan_action *a = &pp->grid[r][i];
        plan_buf_printf(b, "%s%d%s%d", i ? " " : "", a->stage,
                        plan_action_word(a->kind), a->microbatch);
      }
      plan_buf_puts(b, "\"\n");
    }
  }
  plan_w_ext(b, pp->ext, 2);
  return PLAN_OK;
}

static void w_training(plan_buf *b, const plan_plan *p) {
  const plan_training *tr = &p->training;
  const plan_program *prog = p->program;
  static const char *const sync_names[PLAN_SYNC_COUNT] = {
      "auto", "all_reduce", "reduce_scatter", "none"};
  size_t start = b->len;
  plan_buf_puts(b, "training:\n");
  if (tr->optimizer != PLAN_OPT_NONE) {
    bool adam = tr->optimizer == PLAN_OPT_ADAM;
    plan_buf_printf(b, "  optimizer: {kind: %s, lr: ", adam ? "adam" : "sgd");
    plan_w_num(b, tr->lr);
    if (adam) {
      plan_buf_puts(b, ", beta1: ");
      plan_w_num(b, tr->beta1);
      plan_buf_puts(b, ", beta2: ");
      plan_w_num(b, tr->beta2);
      plan_buf_puts(b, ", eps: ");
      plan_w_num(b, tr->eps);
    } else if (tr->momentum != 0) {
      plan_buf_puts(b, ", momentum: ");
      plan_w_num(b, tr->momentum);
    }
    if (tr->weight_decay != 0) {
      plan_buf_puts(b, ", weight_decay: ");
      plan_w_num(b, tr->weight_decay);
    }
    plan_buf_puts(b, "}\n");
  }
  if (tr->steps != 1)
    plan_buf_printf(b, "  steps: %lld\n", (long long)tr->steps);
  int dts[4] = {tr->param_dtype, tr->compute_dtype, tr->grad_dtype,
                tr->accum_dtype};
  static const char *const dkeys[4] = {"param", "compute", "grad", "accum"};
  bool anyd = false;
  for (int i = 0; i < 4; i++)
    if (dts[i] >= 0) {
      plan_buf_puts(b, anyd ? ", " : "  dtypes: {");
      anyd = true;
      plan_buf_printf(b, "%s: %s", dkeys[i],
                      plan_dtype_name((plan_dtype)dts[i]));
    }
  if (anyd)
    plan_buf_puts(b, "}\n");
  if (tr->clip_grad_norm != 0) {
    plan_buf_puts(b, "  clip_grad_norm: ");
    plan_w_num(b, tr->clip_grad_norm);
    plan_buf_putc(b, '\n');
  }
  if (tr->loss_scale != 1) {
    plan_buf_puts(b, "  loss_scale: ");
    plan_w_num(b, tr->loss_scale);
    plan_buf_putc(b, '\n');
  }
  bool any = false;
  for (int t = 0; t < prog->ntensors; t++)
    if (tr->params[t].sync != PLAN_SYNC_AUTO) {
      if (!any)
        plan_buf_puts(b, "  grad_sync:\n");
      any = true;
      plan_w_indent(b, 4);
      plan_w_str(b, prog->tensors[t].name);
      plan_buf_printf(b, ": %s\n", sync_names[tr->params[t].sync]);
    }
  any = false;
  for (int t = 0; t < prog->ntensors; t++)
    if (tr->params[t].has_state_pl) {
      if (!any)
        plan_buf_puts(b, "  optimizer_state:\n");
      any = true;
      plan_w_indent(b, 4);
      plan_w_str(b, prog->tensors[t].name);
      plan_buf_puts(b, ": ");
      plan_w_pl(b, &tr->params[t].state_pl, &p->mesh);
      plan_buf_putc(b, '\n');
    }
  any = false;
  for (int i = 0; i < prog->nops; i++)
    any |= tr->recompute[i];
  if (any) {
    plan_buf_puts(b, "  recompute: ");
    w_op_list(b, prog, tr->recompute);
    plan_buf_putc(b, '\n');
  }
  plan_w_ext(b, tr->ext, 2);
  if (!b->failed && b->len == start + strlen("training:\n")) {
    /* all defaults: an empty block would read back as null, not as the
     * training mode the section's presence selects */
    b->len = start;
    plan_buf_puts(b, "training: {}\n");
  }
}

static void w_boundaries(plan_buf *b, const char *key, const plan_plan *p,
                         const plan_boundary *bd, int n) {
  const plan_program *prog = p->program;
  if (!n)
    return;
  plan_buf_printf(b, "    %s: {", key);
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_puts(b, ", ");
    plan_w_str(b, prog->tensors[bd[i].tensor].name);
    plan_buf_puts(b, ": ");
    plan_w_pl(b, &bd[i].pl, &p->mesh);
  }
  plan_buf_puts(b, "}\n");
}

static void w_regions(plan_buf *b, const plan_plan *p) {
  static const char *const kinds[PLAN_REGION_COUNT] = {"pinned", "manual"};
  plan_buf_puts(b, "regions:\n");
  for (int i = 0; i < p->nregions; i++) {
    const plan_region *r = &p->regions[i];
    plan_buf_puts(b, "  - name: ");
    plan_w_str(b, r->name);
    plan_buf_printf(b, "\n    kind: %s\n    ops: ", kinds[r->kind]);
    w_op_list(b, p->program, r->ops);
    plan_buf_putc(b, '\n');
    w_boundaries(b, "inputs", p, r->inputs, r->ninputs);
    w_boundaries(b, "outputs", p, r->outputs, r->noutputs);
    if (r->body) {
      plan_buf_puts(b, "    body: ");
      plan_w_text(b, r->body, 6);
    }
    plan_w_ext(b, r->ext, 4);
  }
}

/* The overlap entries in file order, one flow mapping each, keys in the
 * order the spec lists them, defaults omitted. */
static void w_overlap(plan_buf *b, const plan_plan *p) {
  static const char *const sel[PLAN_OVL_SELECT_COUNT] = {"input", "param",
                                                         "grad_sync"};
  plan_buf_puts(b, "overlap:\n");
  for (int i = 0; i < p->noverlap; i++) {
    const plan_overlap *e = &p->overlap[i];
    char pt[PLAN_MAX_NAME + 16];
    plan_buf_printf(b, "  - {%s: ", sel[e->select]);
    plan_w_str(b, e->pattern);
    if (e->operand >= 0)
      plan_buf_printf(b, ", operand: %d", e->operand);
    if (e->chunks != 1)
      plan_buf_printf(b, ", chunks: %lld", (long long)e->chunks);
    if (e->dim >= 0)
      plan_buf_printf(b, ", dim: %d", e->dim);
    if (e->stream != 1)
      plan_buf_printf(b, ", stream: %d", e->stream);
    if (plan_overlap_point_text(pt, sizeof pt, e->start, e->start_op)) {
      plan_buf_puts(b, ", start: ");
      plan_w_str(b, pt);
    }
    if (plan_overlap_point_text(pt, sizeof pt, e->wait, e->wait_op)) {
      plan_buf_puts(b, ", wait: ");
      plan_w_str(b, pt);
    }
    plan_buf_puts(b, "}\n");
  }
}

static int w_plan(plan_buf *b, const plan_plan *p,
                  const plan_write_options *o) {
  const plan_program *prog = p->program;
  int vmaj, vmin;
  plan_plan_format(p, &vmaj, &vmin);
  plan_buf_printf(b, "libplan: \"%d.%d\"\n", vmaj, vmin);
  if (p->program_inline || (o && o->self_contained))
    plan_w_program(b, prog);
  else
    plan_w_program_ref(b, p);
  if (!p->has_mesh)
    goto tail;
  plan_w_mesh(b, &p->mesh);
  bool any = false;
  for (int t = 0; t < prog->ntensors; t++) {
    const plan_tensor_pl *tp = &p->placements[t];
    if (!tp->set || plan_placement_is_replicated(&tp->pl))
      continue;
    if (!any)
      plan_buf_puts(b, "placements:\n");
    any = true;
    plan_w_indent(b, 2);
    plan_w_str(b, prog->tensors[t].name);
    plan_buf_puts(b, ": ");
    plan_w_pl(b, &tp->pl, &p->mesh);
    plan_buf_putc(b, '\n');
  }
  any = false;
  for (int i = 0; i < prog->nops; i++) {
    const plan_strategy *s = &p->strategies[i];
    const plan_op *op = &prog->ops[i];
    if (!s->set)
      continue;
    if (!any)
      plan_buf_puts(b, "strategies:\n");
    any = true;
    plan_w_indent(b, 2);
    plan_w_str(b, op->name);
    plan_buf_puts(b, ": {in: [");
    for (int j = 0; j < op->nin; j++) {
      if (j)
        plan_buf_puts(b, ", ");
      plan_w_pl(b, &s->in[j], &p->mesh);
    }
    plan_buf_puts(b, "], out: ");
    if (op->nout == 1) {
      plan_w_pl(b, &s->out[0], &p->mesh);
    } else {
      plan_buf_putc(b, '[');
      for (int j = 0; j < op->nout; j++) {
        if (j)
          plan_buf_puts(b, ", ");
        plan_w_pl(b, &s->out[j], &p->mesh);
      }
      plan_buf_putc(b, ']');
    }
    plan_buf_puts(b, "}\n");
  }
  any = false;
  for (int i = 0; i < prog->noutputs; i++) {
    const plan_tensor_pl *tp = &p->out_pl[i];
    if (!tp->set || plan_placement_is_replicated(&tp->pl))
      continue;
    if (!any)
      plan_buf_puts(b, "outputs:\n");
    any = true;
    plan_w_indent(b, 2);
    plan_w_str(b, prog->tensors[prog->outputs[i]].name);
    plan_buf_puts(b, ": ");
    plan_w_pl(b, &tp->pl, &p->mesh);
    plan_buf_putc(b, '\n');
  }
  if (p->pipeline.present) {
    int rc = w_pipeline(b, p);
    if (rc)
      return rc;
  }
  if (p->training.present)
    w_training(b, p);
  if (p->nregions)
    w_regions(b, p);
  if (p->noverlap)
    w_overlap(b, p);
tail:
  if (p->provenance) {
    plan_buf_puts(b, "provenance:");
    plan_w_value_inline(b, p->provenance, 2, " ");
  }
  plan_w_ext(b, p->ext, 0);
  return PLAN_OK;
}

int plan_program_write_buffer(char **out, size_t *len, const plan_program *p) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_program_write_buffer: NULL argument");
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  int vmaj, vmin;
  plan_program_format(p, &vmaj, &vmin);
  plan_buf_printf(&b, "libplan: \"%d.%d\"\n", vmaj, vmin);
  plan_w_program(&b, p);
  return plan_buf_take(&b, out, len);
}

int plan_write_buffer(char **out, size_t *len, const plan_plan *p,
                      const plan_write_options *opts) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_write_buffer: NULL argument");
  *out = NULL;
  if (opts && opts->version != PLAN_WRITE_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE, "plan_write_options version %u is not %d",
                      opts->version, PLAN_WRITE_OPTIONS_VERSION);
  plan_buf b;
  plan_buf_init(&b);
  int rc = w_plan(&b, p, opts);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, len);
}
