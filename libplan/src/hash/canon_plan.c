/* The canonical encoding of the plan part (mesh, placements, strategies,
 * outputs, pipeline, training, regions, over the program's hash) and of
 * single sections for diff. */
#include "hash/canon_json.h"

/* A sorted list of the op names flagged in `flags` (per op index). */
static void cj_op_set(cj *c, const plan_program *prog, const named *byname,
                      const bool *flags) {
  bool first = true;
  plan_buf_putc(c->b, '[');
  for (int k = 0; k < prog->nops; k++)
    if (flags[byname[k].idx]) {
      cj_sep(c, &first);
      cj_str(c, byname[k].name);
    }
  plan_buf_putc(c->b, ']');
}

static void cj_optimizer(cj *c, bool *first, const plan_training *tr) {
  if (tr->optimizer == PLAN_OPT_NONE)
    return;
  bool f = true, adam = tr->optimizer == PLAN_OPT_ADAM;
  cj_key(c, first, "optimizer");
  plan_buf_putc(c->b, '{');
  if (adam && tr->beta1 != 0.9) {
    cj_key(c, &f, "beta1");
    cj_num(c, tr->beta1);
  }
  if (adam && tr->beta2 != 0.999) {
    cj_key(c, &f, "beta2");
    cj_num(c, tr->beta2);
  }
  if (adam && tr->eps != 1e-8) {
    cj_key(c, &f, "eps");
    cj_num(c, tr->eps);
  }
  cj_key(c, &f, "kind");
  cj_str(c, adam ? "adam" : "sgd");
  if (tr->lr != (adam ? 1e-3 : 0.01)) {
    cj_key(c, &f, "lr");
    cj_num(c, tr->lr);
  }
  if (!adam && tr->momentum != 0) {
    cj_key(c, &f, "momentum");
    cj_num(c, tr->momentum);
  }
  if (tr->weight_decay != 0) {
    cj_key(c, &f, "weight_decay");
    cj_num(c, tr->weight_decay);
  }
  plan_buf_putc(c->b, '}');
}

static void cj_training(cj *c, const plan_plan *p, const named *ops,
                        const named *tens) {
  const plan_training *tr = &p->training;
  const plan_program *prog = p->program;
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (tr->clip_grad_norm != 0) {
    cj_key(c, &first, "clip_grad_norm");
    cj_num(c, tr->clip_grad_norm);
  }
  int dts[4] = {tr->accum_dtype, tr->compute_dtype, tr->grad_dtype,
                tr->param_dtype};
  static const char *const dkeys[4] = {"accum", "compute", "grad", "param"};
  if (dts[0] >= 0 || dts[1] >= 0 || dts[2] >= 0 || dts[3] >= 0) {
    bool f = true;
    cj_key(c, &first, "dtypes");
    plan_buf_putc(c->b, '{');
    for (int i = 0; i < 4; i++)
      if (dts[i] >= 0) {
        cj_key(c, &f, dkeys[i]);
        cj_str(c, plan_dtype_name((plan_dtype)dts[i]));
      }
    plan_buf_putc(c->b, '}');
  }
  bool anysync = false, anystate = false, anyrec = false;
  for (int t = 0; t < prog->ntensors; t++) {
    anysync |= tr->params[t].sync != PLAN_SYNC_AUTO;
    anystate |= tr->params[t].has_state_pl;
  }
  for (int i = 0; i < prog->nops; i++)
    anyrec |= tr->recompute[i];
  static const char *const sync_names[PLAN_SYNC_COUNT] = {
      "auto", "all_reduce", "reduce_scatter", "none"};
  if (anysync) {
    bool f = true;
    cj_key(c, &first, "grad_sync");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      const plan_param_train *pt = &tr->params[tens[k].idx];
      if (pt->sync != PLAN_SYNC_AUTO) {
        cj_key(c, &f, tens[k].name);
        cj_str(c, sync_names[pt->sync]);
      }
    }
    plan_buf_putc(c->b, '}');
  }
  if (tr->loss_scale != 1.0) {
    cj_key(c, &first, "loss_scale");
    cj_num(c, tr->loss_scale);
  }
  cj_optimizer(c, &first, tr);
  if (anystate) {
    bool f = true;
    cj_key(c, &first, "optimizer_state");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      const plan_param_train *pt = &tr->params[tens[k].idx];
      if (pt->has_state_pl) {
        cj_key(c, &f, tens[k].name);
        cj_pl(c, &pt->state_pl);
      }
    }
    plan_buf_putc(c->b, '}');
  }
  if (anyrec) {
    cj_key(c, &first, "recompute");
    cj_op_set(c, prog, ops, tr->recompute);
  }
  if (tr->steps != 1) {
    cj_key(c, &first, "steps");
    cj_int(c, tr->steps);
  }
  plan_buf_putc(c->b, '}');
}

static int cj_pipeline(cj *c, const plan_plan *p, const named *ops) {
  const plan_pipeline *pp = &p->pipeline;
  const plan_program *prog = p->program;
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (pp->axis >= 0) {
    cj_key(c, &first, "axis");
    cj_str(c, p->mesh.axis_names[pp->axis]);
  }
  if (pp->schedule == PLAN_SCHED_EXPLICIT) {
    cj_key(c, &first, "grid");
    plan_buf_putc(c->b, '[');
    for (int r = 0; r < pp->grid_ranks; r++) {
      if (r)
        plan_buf_putc(c->b, ',');
      plan_buf_putc(c->b, '[');
      for (int i = 0; i < pp->grid_len[r]; i++) {
        const plan_action *a = &pp->grid[r][i];
        char buf[64];
        snprintf(buf, sizeof buf, "%d%s%d", a->stage, plan_action_word(a->kind),
                 a->microbatch);
        if (i)
          plan_buf_putc(c->b, ',');
        cj_str(c, buf);
      }
      plan_buf_putc(c->b, ']');
    }
    plan_buf_putc(c->b, ']');
  }
  if (pp->microbatches != 1) {
    cj_key(c, &first, "microbatches");
    cj_int(c, pp->microbatches);
  }
  if (pp->schedule != PLAN_SCHED_1F1B && pp->schedule != PLAN_SCHED_EXPLICIT) {
    cj_key(c, &first, "schedule");
    cj_str(c, plan_schedule_names[pp->schedule]);
  }
  cj_key(c, &first, "stages");
  plan_buf_putc(c->b, '[');
  bool *member = calloc((size_t)prog->nops + 1, 1);
  if (!member)
    return plan_oom();
  for (int s = 0; s < pp->nstages; s++) {
    if (s)
      plan_buf_putc(c->b, ',');
    for (int i = 0; i < prog->nops; i++)
      member[i] = pp->op_stage[i] == s;
    plan_buf_puts(c->b, "{\"ops\":");
    cj_op_set(c, prog, ops, member);
    if (pp->stages[s].submesh >= 0) {
      plan_buf_puts(c->b, ",\"submesh\":");
      cj_str(c, p->mesh.submeshes[pp->stages[s].submesh].name);
    }
    plan_buf_putc(c->b, '}');
  }
  free(member);
  plan_buf_puts(c->b, "]}");
  return PLAN_OK;
}

static void cj_boundaries(cj *c, const plan_program *prog,
                          const plan_boundary *b, int n) {
  /* few entries: insertion order by name */
  int idx[64], m = n < 64 ? n : 64;
  for (int i = 0; i < m; i++)
    idx[i] = i;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && strcmp(prog->tensors[b[idx[j - 1]].tensor].name,
                                    prog->tensors[b[idx[j]].tensor].name) > 0;
         j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  bool f = true;
  plan_buf_putc(c->b, '{');
  for (int i = 0; i < m; i++) {
    cj_key(c, &f, prog->tensors[b[idx[i]].tensor].name);
    cj_pl(c, &b[idx[i]].pl);
  }
  plan_buf_putc(c->b, '}');
}

/* Every region by name (the names are unique), each with its members. */
static int cj_regions(cj *c, const plan_plan *p, const named *ops) {
  static const char *const kinds[PLAN_REGION_COUNT] = {"pinned", "manual"};
  const plan_program *prog = p->program;
  int n = p->nregions;
  named *idx = malloc(sizeof(named) * ((size_t)n + 1));
  if (!idx)
    return plan_oom();
  for (int i = 0; i < n; i++) {
    idx[i].name = p->regions[i].name;
    idx[i].idx = i;
  }
  qsort(idx, (size_t)n, sizeof(named), named_cmp);
  bool first = true;
  plan_buf_putc(c->b, '{');
  for (int i = 0; i < n; i++) {
    const plan_region *r = &p->regions[idx[i].idx];
    bool f = true;
    cj_key(c, &first, r->name);
    plan_buf_putc(c->b, '{');
    if (r->body) {
      cj_key(c, &f, "body");
      cj_str(c, r->body);
    }
    if (r->ninputs) {
      cj_key(c, &f, "inputs");
      cj_boundaries(c, prog, r->inputs, r->ninputs);
    }
    cj_key(c, &f, "kind");
    cj_str(c, kinds[r->kind]);
    cj_key(c, &f, "ops");
    cj_op_set(c, prog, ops, r->ops);
    if (r->noutputs) {
      cj_key(c, &f, "outputs");
      cj_boundaries(c, prog, r->outputs, r->noutputs);
    }
    plan_buf_putc(c->b, '}');
  }
  plan_buf_putc(c->b, '}');
  free(idx);
  return PLAN_OK;
}

/* The overlap entries in file order (an entry's order among the others
 * decides nothing yet, but two entries may not select one collective, so
 * order is kept as written), each with its keys sorted and defaults
 * omitted. */
static void cj_overlap(cj *c, const plan_plan *p) {
  plan_buf_putc(c->b, '[');
  for (int i = 0; i < p->noverlap; i++) {
    const plan_overlap *e = &p->overlap[i];
    bool f = true;
    char pt[PLAN_MAX_NAME + 16];
    if (i)
      plan_buf_putc(c->b, ',');
    plan_buf_putc(c->b, '{');
    if (e->chunks != 1) {
      cj_key(c, &f, "chunks");
      cj_int(c, e->chunks);
    }
    if (e->dim >= 0) {
      cj_key(c, &f, "dim");
      cj_int(c, e->dim);
    }
    if (e->select == PLAN_OVL_GRAD_SYNC) {
      cj_key(c, &f, "grad_sync");
      cj_str(c, e->pattern);
    }
    if (e->select == PLAN_OVL_INPUT) {
      cj_key(c, &f, "input");
      cj_str(c, e->pattern);
    }
    if (e->operand >= 0) {
      cj_key(c, &f, "operand");
      cj_int(c, e->operand);
    }
    if (e->select == PLAN_OVL_PARAM) {
      cj_key(c, &f, "param");
      cj_str(c, e->pattern);
    }
    if (plan_overlap_point_text(pt, sizeof pt, e->start, e->start_op)) {
      cj_key(c, &f, "start");
      cj_str(c, pt);
    }
    if (e->stream != 1) {
      cj_key(c, &f, "stream");
      cj_int(c, e->stream);
    }
    if (plan_overlap_point_text(pt, sizeof pt, e->wait, e->wait_op)) {
      cj_key(c, &f, "wait");
      cj_str(c, pt);
    }
    plan_buf_putc(c->b, '}');
  }
  plan_buf_putc(c->b, ']');
}

int plan_cj_plan(cj *c, const plan_plan *p, const cj_order *ord, plan_hash ph) {
  const plan_program *prog = p->program;
  int rc = PLAN_OK;
  const named *ops = ord->ops, *tens = ord->tens;
  bool first = true;
  c->mesh = &p->mesh;
  plan_buf_putc(c->b, '{');
  cj_key(c, &first, "libplan");
  int vmaj, vmin;
  plan_plan_format(p, &vmaj, &vmin);
  plan_buf_printf(c->b, "\"%d.%d\"", vmaj, vmin);
  cj_key(c, &first, "mesh");
  if ((rc = plan_cj_mesh(c, &p->mesh)))
    goto done;
  bool anyout = false;
  for (int i = 0; i < prog->noutputs; i++)
    anyout |=
        p->out_pl[i].set && !plan_placement_is_replicated(&p->out_pl[i].pl);
  if (anyout) {
    bool f = true;
    cj_key(c, &first, "outputs");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++)
      for (int i = 0; i < prog->noutputs; i++)
        if (prog->outputs[i] == tens[k].idx && p->out_pl[i].set &&
            !plan_placement_is_replicated(&p->out_pl[i].pl)) {
          cj_key(c, &f, tens[k].name);
          cj_pl(c, &p->out_pl[i].pl);
        }
    plan_buf_putc(c->b, '}');
  }
  if (p->noverlap) {
    cj_key(c, &first, "overlap");
    cj_overlap(c, p);
  }
  if (p->pipeline.present) {
    cj_key(c, &first, "pipeline");
    if ((rc = cj_pipeline(c, p, ops)))
      goto done;
  }
  /* the placements written, decided in memory order: the walk by name
   * then reads only those */
  char *written = malloc((size_t)prog->ntensors + 1);
  if (!written)
    return plan_oom();
  bool anypl = false;
  for (int t = 0; t < prog->ntensors; t++) {
    written[t] = p->placements[t].set &&
                 !plan_placement_is_replicated(&p->placements[t].pl);
    anypl |= written[t];
  }
  if (anypl) {
    bool f = true;
    cj_key(c, &first, "placements");
    plan_buf_putc(c->b, '{');
    for (int k = 0; k < prog->ntensors; k++) {
      if (!written[tens[k].idx])
        continue;
      if (k + CJ_AHEAD < prog->ntensors && written[tens[k + CJ_AHEAD].idx])
        PLAN_PREFETCH(&p->placements[tens[k + CJ_AHEAD].idx]);
      cj_key(c, &f, tens[k].name);
      cj_pl(c, &p->placements[tens[k].idx].pl);
    }
    plan_buf_putc(c->b, '}');
  }
  free(written);
  char hbuf[PLAN_HASH_STRLEN];
  cj_key(c, &first, "program");
  cj_str(c, plan_hash_format(ph, hbuf));
  if (p->nregions) {
    cj_key(c, &first, "regions");
    if ((rc = cj_regions(c, p, ops)))
      goto done;
  }
  cj_key(c, &first, "strategies");
  plan_buf_putc(c->b, '{');
  bool f = true;
  for (int k = 0; k < prog->nops; k++) {
    if (k + CJ_AHEAD < prog->nops) {
      PLAN_PREFETCH(&p->strategies[ops[k + CJ_AHEAD].idx]);
      PLAN_PREFETCH(&prog->ops[ops[k + CJ_AHEAD].idx]);
      PLAN_PREFETCH(ops[k + CJ_AHEAD].name);
    }
    const plan_strategy *s = &p->strategies[ops[k].idx];
    const plan_op *op = &prog->ops[ops[k].idx];
    if (!s->set)
      continue;
    cj_key(c, &f, ops[k].name);
    plan_buf_puts(c->b, "{\"in\":[");
    for (int j = 0; j < op->nin; j++) {
      if (j)
        plan_buf_putc(c->b, ',');
      cj_pl(c, &s->in[j]);
    }
    plan_buf_puts(c->b, "],\"out\":[");
    for (int j = 0; j < op->nout; j++) {
      if (j)
        plan_buf_putc(c->b, ',');
      cj_pl(c, &s->out[j]);
    }
    plan_buf_puts(c->b, "]}");
    cj_flush(c);
  }
  plan_buf_putc(c->b, '}');
  if (p->training.present) {
    cj_key(c, &first, "training");
    cj_training(c, p, ops, tens);
  }
  plan_buf_putc(c->b, '}');
done:
  return rc;
}

/* One section's canonical encoding: "mesh", "training", "pipeline",
 * "regions" (empty when absent). Used by diff to compare sections. */
int plan_canon_section(plan_buf *b, const plan_plan *p, const char *which) {
  cj c = {.b = b, .mesh = &p->mesh};
  const plan_program *prog = p->program;
  int rc = PLAN_OK;
  if (!strcmp(which, "mesh"))
    return p->has_mesh ? plan_cj_mesh(&c, &p->mesh) : PLAN_OK;
  if (!strcmp(which, "profiles"))
    return p->has_mesh && p->mesh.device_profile && p->mesh.nprofiles > 0
               ? plan_cj_profiles(&c, &p->mesh)
               : PLAN_OK;
  if (!strcmp(which, "topology")) {
    if (p->has_mesh && p->mesh.topology)
      plan_cj_topology(&c, &p->mesh);
    return b->failed ? plan_oom() : PLAN_OK;
  }
  cj_order ord; /* sorted here, never the prepared order (the same one) */
  if ((rc = plan_cj_order_make(&ord, prog, false)))
    return rc;
  const named *ops = ord.ops, *tens = ord.tens;
  if (!strcmp(which, "training") && p->training.present)
    cj_training(&c, p, ops, tens);
  else if (!strcmp(which, "pipeline") && p->pipeline.present)
    rc = cj_pipeline(&c, p, ops);
  else if (!strcmp(which, "regions") && p->nregions)
    rc = cj_regions(&c, p, ops);
  else if (!strcmp(which, "overlap") && p->noverlap)
    cj_overlap(&c, p);
  plan_cj_order_free(&ord);
  if (!rc && b->failed)
    rc = plan_oom();
  return rc;
}
