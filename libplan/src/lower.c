/* Lowering a plan to SPMD steps; see lower.h. Each tensor lives in the
 * buffers of the placements it is needed in; where an op's strategy needs
 * an input in a placement no buffer has yet, the redistribution planner's
 * steps make one (from the placement the tensor was produced in). */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "placement.h"
#include "program_int.h"

static int grow(void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap)
    return PLAN_OK;
  int ncap = *cap ? *cap * 2 : 64;
  while (ncap < need)
    ncap *= 2;
  void *n = realloc(*arr, elem * (size_t)ncap);
  if (!n)
    return plan_oom();
  *arr = n;
  *cap = ncap;
  return PLAN_OK;
}

static int new_buf(plan_lowered *l, int tensor, const plan_placement *pl) {
  if (grow((void **)&l->bufs, &l->cap_bufs, l->nbufs + 1, sizeof(plan_lbuf)))
    return -1;
  l->bufs[l->nbufs].tensor = tensor;
  l->bufs[l->nbufs].pl = *pl;
  return l->nbufs++;
}

static plan_lstep *new_step(plan_lowered *l, plan_lstep_kind kind, int nin,
                            int nout) {
  if (grow((void **)&l->steps, &l->cap_steps, l->nsteps + 1,
           sizeof(plan_lstep)))
    return NULL;
  plan_lstep *s = &l->steps[l->nsteps];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->op = -1;
  s->nin = nin;
  s->nout = nout;
  s->in = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(nin + 1));
  s->out = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(nout + 1));
  if (!s->in || !s->out) {
    plan_oom();
    return NULL;
  }
  l->nsteps++;
  return s;
}

/* The buffers that hold each tensor, newest last (a short list: a tensor is
 * rarely needed in more than a few placements). */
typedef struct holders {
  int *first; /* per tensor: head of its list in next[], -1 */
  int *next;  /* per buffer */
  int cap;
} holders;

static int find_holder(const plan_lowered *l, const holders *h, int tensor,
                       const plan_placement *pl) {
  for (int b = h->first[tensor]; b >= 0; b = h->next[b])
    if (plan_placement_equal(&l->bufs[b].pl, pl))
      return b;
  return -1;
}

static int add_holder(plan_lowered *l, holders *h, int tensor,
                      const plan_placement *pl) {
  int b = new_buf(l, tensor, pl);
  if (b < 0)
    return -1;
  if (grow((void **)&h->next, &h->cap, b + 1, sizeof(int)))
    return -1;
  h->next[b] = h->first[tensor];
  h->first[tensor] = b;
  return b;
}

/* A buffer of `tensor` in placement `want`: an existing one, or one made by
 * redistributing from `from` (the buffer the tensor was produced in). */
static int buffer_in(plan_lowered *l, holders *h, int tensor, int from,
                     const plan_placement *want) {
  int b = find_holder(l, h, tensor, want);
  if (b >= 0)
    return b;
  const plan_plan *p = l->plan;
  const plan_tensor *t = &p->program->tensors[tensor];
  plan_redist_plan rp;
  char err[256];
  if (plan_redistribute(&rp, t->dims, t->rank, plan_dtype_size(t->dtype),
                        p->mesh.axis_sizes, p->mesh.naxes, &l->bufs[from].pl,
                        want, err, sizeof err))
    return plan_failf(PLAN_EINVALID, "tensor '%s': %s", t->name, err), -1;
  int cur = from;
  for (int i = 0; i < rp.nsteps; i++) {
    /* every intermediate placement gets a buffer (reused when it exists) */
    int next = find_holder(l, h, tensor, &rp.steps[i].after);
    if (next < 0 && (next = add_holder(l, h, tensor, &rp.steps[i].after)) < 0)
      return -1;
    plan_lstep *s = new_step(l, PLAN_LSTEP_REDIST, 1, 1);
    if (!s)
      return -1;
    s->in[0] = cur;
    s->out[0] = next;
    s->redist = rp.steps[i];
    l->collectives[rp.steps[i].kind]++;
    cur = next;
  }
  return cur;
}

/* The steps of l->plan (forward ops, or a training program as one): its
 * leaves in their storage placements, its ops in program order with the
 * redistributions their strategies need, its outputs as the plan delivers
 * them. */
int plan_lower_steps(plan_lowered *l) {
  const plan_plan *p = l->plan;
  const plan_program *prog = p->program;
  holders h = {NULL, NULL, 0};
  int rc = PLAN_OK;
  l->produced = calloc((size_t)prog->ntensors + 1, sizeof(int));
  l->delivered = calloc((size_t)prog->noutputs + 1, sizeof(int));
  h.first = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  if (!l->produced || !l->delivered || !h.first) {
    rc = plan_oom();
    goto done;
  }
  for (int t = 0; t < prog->ntensors; t++) {
    l->produced[t] = -1;
    h.first[t] = -1;
  }
  /* leaves: one INPUT step each, in their storage placement */
  for (int t = 0; t < prog->ntensors; t++) {
    if (prog->tensors[t].producer >= 0)
      continue;
    plan_placement pl;
    if (p->placements[t].set)
      pl = p->placements[t].pl;
    else
      plan_placement_replicated(&pl, p->mesh.naxes);
    int b = add_holder(l, &h, t, &pl);
    plan_lstep *s = b < 0 ? NULL : new_step(l, PLAN_LSTEP_INPUT, 0, 1);
    if (!s) {
      rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
      goto done;
    }
    s->out[0] = b;
    l->produced[t] = b;
  }
  /* ops in topological order */
  for (int i = 0; i < prog->nops; i++) {
    const plan_op *op = &prog->ops[i];
    const plan_strategy *st = &p->strategies[i];
    int ins[PLAN_MAX_OPERANDS];
    for (int j = 0; j < op->nin; j++) {
      int t = op->in[j];
      if ((ins[j] = buffer_in(l, &h, t, l->produced[t], &st->in[j])) < 0) {
        rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
        goto done;
      }
    }
    plan_lstep *s = new_step(l, PLAN_LSTEP_OP, op->nin, op->nout);
    if (!s) {
      rc = plan_oom();
      goto done;
    }
    s->op = i;
    memcpy(s->in, ins, sizeof(int) * (size_t)op->nin);
    for (int k = 0; k < op->nout; k++) {
      int b = add_holder(l, &h, op->out[k], &st->out[k]);
      if (b < 0) {
        rc = plan_oom();
        goto done;
      }
      l->steps[l->nsteps - 1].out[k] = b;
      l->produced[op->out[k]] = b;
    }
  }
  /* outputs in the placement the plan delivers them in */
  for (int k = 0; k < prog->noutputs; k++) {
    int t = prog->outputs[k];
    plan_placement pl;
    if (p->out_pl[k].set)
      pl = p->out_pl[k].pl;
    else
      plan_placement_replicated(&pl, p->mesh.naxes);
    if ((l->delivered[k] = buffer_in(l, &h, t, l->produced[t], &pl)) < 0) {
      rc = plan_error_last()->code ? plan_error_last()->code : plan_oom();
      goto done;
    }
  }
done:
  free(h.first);
  free(h.next);
  return rc;
}

int plan_lower(plan_lowered **out, const plan_plan *p) {
  *out = NULL;
  if (!p || !p->has_mesh)
    return plan_failf(PLAN_EUSAGE, "plan_lower: a plan with a mesh is needed");
  for (int r = 0; r < p->nregions; r++)
    if (p->regions[r].kind == PLAN_REGION_MANUAL)
      return plan_failf(PLAN_EUNSUPPORTED,
                        "manual region '%s': lowering manual regions is not "
                        "available yet",
                        p->regions[r].name);
  const plan_program *prog = p->program;
  for (int i = 0; i < prog->nops; i++)
    if (!p->strategies[i].set)
      return plan_failf(PLAN_EINVALID, "op '%s' has no strategy",
                        prog->ops[i].name);
  if (p->pipeline.present)
    return plan_lower_pipeline(out, p);
  if (p->training.present)
    return plan_lower_train(out, p);
  plan_lowered *l = calloc(1, sizeof *l);
  if (!l)
    return plan_oom();
  l->plan = p;
  plan_arena_init(&l->arena);
  int rc = plan_lower_steps(l);
  if (rc) {
    plan_lowered_free(l);
    return rc;
  }
  *out = l;
  return PLAN_OK;
}

void plan_lowered_free(plan_lowered *l) {
  if (!l)
    return;
  plan_free(l->own_plan);
  plan_ltrain_free(l->train);
  plan_lpipe_free(l->pipe); /* after own_plan: its mesh is the pipe's */
  free(l->bufs);
  free(l->steps);
  free(l->produced);
  free(l->delivered);
  plan_arena_free(&l->arena);
  free(l);
}
