/* The canonical encoding of the program part: ops and tensors by name,
 * attributes in key order and without their defaults, the tensors that
 * inference cannot give, outputs when they are not the default. */
#include "hash/canon_json.h"

void plan_cj_attrs(cj *c, const plan_op *op) {
  const plan_op_info *info = plan_op_info_get(op->kind);
  bool first = true;
  plan_buf_putc(c->b, '{');
  /* schema order is fixed; emit in key order */
  int order[PLAN_MAX_ATTRS + 4];
  int n = info->nattrs;
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(info->attrs[order[j - 1]].name,
                                    info->attrs[order[j]].name) > 0;
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int k = 0; k < n; k++) {
    const plan_attr_spec *s = &info->attrs[order[k]];
    const plan_attr_val *a = &op->attrs[order[k]];
    switch (s->type) {
    case PLAN_ATTR_INT:
      if (a->i != s->def_i) {
        cj_key(c, &first, s->name);
        cj_int(c, a->i);
      }
      break;
    case PLAN_ATTR_FLOAT:
      if (a->f != s->def_f) {
        cj_key(c, &first, s->name);
        cj_num(c, a->f);
      }
      break;
    case PLAN_ATTR_BOOL:
      if (a->b != s->def_b) {
        cj_key(c, &first, s->name);
        plan_buf_puts(c->b, a->b ? "true" : "false");
      }
      break;
    case PLAN_ATTR_STRING:
      if (a->s && (!s->def_s || strcmp(a->s, s->def_s))) {
        cj_key(c, &first, s->name);
        cj_str(c, a->s);
      }
      break;
    case PLAN_ATTR_INTS:
      if (a->present || a->nints > 0) { /* `shape: []` is written */
        cj_key(c, &first, s->name);
        plan_buf_putc(c->b, '[');
        for (int i = 0; i < a->nints; i++) {
          if (i)
            plan_buf_putc(c->b, ',');
          cj_int(c, a->ints[i]);
        }
        plan_buf_putc(c->b, ']');
      }
      break;
    }
  }
  plan_buf_putc(c->b, '}');
}

static void cj_names(cj *c, const plan_program *prog, const int *t, int n) {
  plan_buf_putc(c->b, '[');
  for (int i = 0; i < n; i++) {
    if (i)
      plan_buf_putc(c->b, ',');
    cj_str(c, prog->tensors[t[i]].name);
  }
  plan_buf_putc(c->b, ']');
}

static bool has_dim_names(const plan_tensor *t) {
  for (int d = 0; d < t->rank; d++)
    if (t->dim_names && t->dim_names[d])
      return true;
  return false;
}

/* The fields of a tensor. `full` adds shape and dtype for produced tensors
 * (signatures); the program encoding leaves them to inference. */
void plan_cj_tensor(cj *c, const plan_tensor *t, bool full) {
  bool first = true, leaf = t->producer < 0;
  plan_buf_putc(c->b, '{');
  if ((leaf || full) && t->dtype != PLAN_F32) {
    cj_key(c, &first, "dtype");
    cj_str(c, plan_dtype_name(t->dtype));
  }
  if (t->recipe != PLAN_RECIPE_NONE) {
    bool f2 = true;
    cj_key(c, &first, "init");
    plan_buf_putc(c->b, '{');
    if (t->recipe_fill != -1e9) {
      cj_key(c, &f2, "fill");
      cj_num(c, t->recipe_fill);
    }
    cj_key(c, &f2, "recipe");
    cj_str(c, plan_recipe_name(t->recipe));
    if (t->recipe_theta != 10000.0) {
      cj_key(c, &f2, "theta");
      cj_num(c, t->recipe_theta);
    }
    plan_buf_putc(c->b, '}');
  }
  if (has_dim_names(t)) {
    cj_key(c, &first, "names");
    plan_buf_putc(c->b, '[');
    for (int d = 0; d < t->rank; d++) {
      if (d)
        plan_buf_putc(c->b, ',');
      cj_str(c, t->dim_names[d] ? t->dim_names[d] : "");
    }
    plan_buf_putc(c->b, ']');
  }
  if (t->has_range) {
    cj_key(c, &first, "range");
    plan_buf_putc(c->b, '[');
    cj_int(c, t->range_lo);
    plan_buf_putc(c->b, ',');
    cj_int(c, t->range_hi);
    plan_buf_putc(c->b, ']');
  }
  if (leaf && t->role != PLAN_ROLE_INPUT) {
    cj_key(c, &first, "role");
    cj_str(c, plan_role_name(t->role));
  }
  if (leaf || full) {
    cj_key(c, &first, "shape");
    plan_buf_putc(c->b, '[');
    for (int d = 0; d < t->rank; d++) {
      if (d)
        plan_buf_putc(c->b, ',');
      cj_int(c, t->dims[d]);
    }
    plan_buf_putc(c->b, ']');
  }
  plan_buf_putc(c->b, '}');
}

/* Outputs are a set: omitted when they are the default (every produced
 * tensor nothing consumes). */
static bool outputs_are_default(const plan_program *p, char *consumed) {
  for (int i = 0; i < p->nops; i++)
    for (int j = 0; j < p->ops[i].nin; j++)
      consumed[p->ops[i].in[j]] = 1;
  int ndef = 0;
  for (int t = 0; t < p->ntensors; t++)
    if (p->tensors[t].producer >= 0 && !consumed[t])
      ndef++;
  if (ndef != p->noutputs)
    return false;
  for (int i = 0; i < p->noutputs; i++)
    if (consumed[p->outputs[i]])
      return false;
  return true;
}

int plan_cj_program(cj *c, const plan_program *p, const cj_order *ord) {
  const named *ops = ord->ops, *tens = ord->tens;
  char *consumed = calloc((size_t)p->ntensors + 1, 1);
  if (!consumed)
    return plan_oom();
  bool first = true;
  plan_buf_putc(c->b, '{');
  if (p->loss >= 0) {
    cj_key(c, &first, "loss");
    cj_str(c, p->tensors[p->loss].name);
  }
  if (p->name && p->name[0]) {
    cj_key(c, &first, "name");
    cj_str(c, p->name);
  }
  cj_key(c, &first, "ops");
  plan_buf_putc(c->b, '{');
  for (int k = 0; k < p->nops; k++) {
    cj_prefetch_ops(p, ops, k);
    const plan_op *op = &p->ops[ops[k].idx];
    if (k)
      plan_buf_putc(c->b, ',');
    cj_str(c, op->name);
    plan_buf_puts(c->b, ":{\"attrs\":");
    plan_cj_attrs(c, op);
    plan_buf_puts(c->b, ",\"in\":");
    cj_names(c, p, op->in, op->nin);
    plan_buf_puts(c->b, ",\"op\":");
    cj_str(c, plan_op_kind_name(op->kind));
    plan_buf_puts(c->b, ",\"out\":");
    cj_names(c, p, op->out, op->nout);
    plan_buf_putc(c->b, '}');
    cj_flush(c);
  }
  plan_buf_putc(c->b, '}');
  if (!outputs_are_default(p, consumed)) {
    cj_key(c, &first, "outputs");
    plan_buf_putc(c->b, '[');
    bool f2 = true;
    char *is_out = consumed; /* reuse as a flag array */
    memset(is_out, 0, (size_t)p->ntensors + 1);
    for (int i = 0; i < p->noutputs; i++)
      is_out[p->outputs[i]] = 1;
    for (int k = 0; k < p->ntensors; k++)
      if (is_out[tens[k].idx]) {
        cj_sep(c, &f2);
        cj_str(c, tens[k].name);
      }
    plan_buf_putc(c->b, ']');
  }
  cj_key(c, &first, "tensors");
  plan_buf_putc(c->b, '{');
  bool f3 = true;
  /* which tensors are written, decided in memory order: the walk by name
   * below then touches only those (most are produced and fully inferred) */
  char *written = consumed; /* free again */
  for (int t = 0; t < p->ntensors; t++)
    written[t] =
        p->tensors[t].producer < 0 || has_dim_names(&p->tensors[t]) ? 1 : 0;
  for (int k = 0; k < p->ntensors; k++) {
    if (!written[tens[k].idx])
      continue; /* fully inferred */
    if (k + CJ_AHEAD < p->ntensors && written[tens[k + CJ_AHEAD].idx])
      cj_prefetch_tensors(p, tens, k);
    const plan_tensor *t = &p->tensors[tens[k].idx];
    cj_key(c, &f3, t->name);
    plan_cj_tensor(c, t, false);
    cj_flush(c);
  }
  plan_buf_puts(c->b, "}}");
  free(consumed);
  return PLAN_OK;
}
