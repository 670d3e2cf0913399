/* Communication overlap in the cost model (docs/cost.md, "Overlap"): a
 * plan's lowered program run on its streams with the model's prices.
 *
 * The compute stream runs the steps in order: an op takes its time, a
 * collective on stream 0 blocks it until done, a collective on stream
 * s > 0 is only issued (it runs beside the compute), a wait blocks until
 * every collective issued on it that writes the buffer is done. A
 * collective starts once issued, once what it reads is written (a chunk
 * waits only for the chunk of the previous step of its chain that writes
 * its slice) and once the collective issued before it on the same stream
 * and link is done: one channel per stream and link, so the chunks of a
 * chain over two links run as a pipeline. Collectives in flight on one
 * link share its bandwidth: each runs at 1/n of its own speed while n
 * are in flight there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"
#include "libplan/lowered.h"
#include "lower/lower.h"

struct plan_cost_sim {
  plan_arena arena;
  plan_cost_sim_step_info *steps;
  int n;
  double makespan, busy;
};

typedef struct task {
  int step;
  int link;    /* link id: tasks on one link share it */
  int channel; /* (stream, link) id */
  int dep;     /* the task whose chunk it reads, -1; or -2: every writer */
  int prev;    /* the task issued before it on its channel, -1 */
  double rem;  /* seconds of work left at full speed */
  bool issued, active, done;
} task;

static const char *dupe(plan_cost_sim *s, const char *t) {
  return plan_arena_strdup(&s->arena, t ? t : "");
}

/* The link a collective uses, as a name (shared by what crosses it). */
static const char *link_name(plan_cost_sim *s, const plan_cost_model *m,
                             const plan_lstep *st, const cost_step_eval *e) {
  if (e->link == -1 || st->redist.axis < 0)
    return "local";
  int a = st->redist.axis;
  switch (e->link) {
  case COST_LINK_INTRA:
    return "intra_host";
  case COST_LINK_INTER:
    return "inter_host";
  case COST_LINK_TOPO:
    return dupe(s, m->taxis[a].label);
  default:
    return plan_arena_printf(&s->arena, "axis:%s", m->axis_names[a]);
  }
}

/* Whether k chunks divide a dim no step first..last acts on, in every
 * rank's block of each buffer they read and write. */
static bool chunks_fit(const plan_lowered *l, int first, int last, int64_t k) {
  const plan_lstep *s0 = &l->steps[first];
  int rank = l->plan->program->tensors[l->bufs[s0->in[0]].tensor].rank;
  int64_t nr = l->plan->mesh.ndevices;
  for (int d = 0; d < rank; d++) {
    bool ok = true;
    for (int j = first; j <= last && ok; j++) {
      const plan_lstep *s = &l->steps[j];
      if (s->redist.dim == d || s->redist.to_dim == d)
        ok = false;
      int bufs[2] = {s->in[0], s->out[0]};
      for (int b = 0; b < 2 && ok; b++)
        for (int64_t r = 0; r < nr && ok; r++) {
          int64_t dims[PLAN_MAX_RANK];
          if (plan_lowered_buffer_block(dims, NULL, l, bufs[b], r) <= d ||
              dims[d] % k)
            ok = false;
        }
    }
    if (ok)
      return true;
  }
  return false;
}

static bool same_origin(const plan_lstep *a, const plan_lstep *b) {
  return a->kind == PLAN_LSTEP_REDIST && b->kind == PLAN_LSTEP_REDIST &&
         a->origin_op == b->origin_op && a->origin_in == b->origin_in &&
         a->origin_out == b->origin_out;
}

/* The steps' static fields and prices. */
static int describe_steps(plan_cost_sim *s, const plan_cost_model *m,
                          const plan_lowered *l, bool serial) {
  const plan_plan *p = l->plan;
  const plan_program *prog = p->program;
  int *writer = malloc(sizeof(int) * ((size_t)l->nbufs + 1));
  if (!writer)
    return plan_oom();
  for (int b = 0; b < l->nbufs; b++)
    writer[b] = -1;
  int rc = PLAN_OK;
  for (int i = 0; i < l->nsteps && !rc; i++) {
    const plan_lstep *st = &l->steps[i];
    plan_cost_sim_step_info *o = &s->steps[i];
    memset(o, 0, sizeof *o);
    o->name = o->collective = o->axis = o->link = "";
    o->origin_op = o->param = o->grad_of = "";
    o->origin_operand = -1;
    o->ready = -1;
    o->reader = l->nsteps;
    o->stream = serial ? 0 : st->stream;
    switch (st->kind) {
    case PLAN_LSTEP_OP: {
      o->kind = PLAN_COST_SIM_OP;
      o->name = prog->ops[st->op].name;
      plan_placement in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
      for (int k = 0; k < st->nin && k < PLAN_MAX_OPERANDS; k++)
        in[k] = l->bufs[st->in[k]].pl;
      for (int k = 0; k < st->nout && k < PLAN_MAX_OPERANDS; k++)
        out[k] = l->bufs[st->out[k]].pl;
      cost_op_eval e;
      if ((rc = plan_cost_op_eval_at(&e, m, p, st->op, in, out, 1)))
        break;
      o->seconds = e.seconds;
      break;
    }
    case PLAN_LSTEP_REDIST: {
      o->kind = PLAN_COST_SIM_COLLECTIVE;
      int t = l->bufs[st->in[0]].tensor;
      const plan_tensor *x = &prog->tensors[t];
      o->name = x->name;
      o->collective = plan_redist_kind_name(st->redist.kind);
      o->axis = st->redist.axis >= 0 && st->redist.axis < m->naxes
                    ? m->axis_names[st->redist.axis]
                    : "";
      int esize = plan_dtype_size(plan_cost_tensor_dtype(p, t));
      cost_step_eval e;
      o->chunk_of = st->chunk_of;
      o->chunk_index = st->chunk_of > 0 ? st->chunk_at : 0;
      plan_cost_step_eval_at(&e, m, x, esize, &st->redist,
                             o->chunk_of > 1 ? (double)o->chunk_of : 1);
      o->seconds = e.seconds;
      for (int c = 0; c < 3; c++) {
        cost_step_eval ec;
        plan_cost_step_eval_at(&ec, m, x, esize, &st->redist, (double)(1 << c));
        o->chunk_seconds[c] = ec.seconds * (1 << c);
      }
      o->link = link_name(s, m, st, &e);
      if (st->origin_op >= 0) {
        o->origin_op = prog->ops[st->origin_op].name;
        o->origin_operand = st->origin_in;
        if (x->role == PLAN_ROLE_PARAM)
          o->param = x->name;
      }
      if (st->origin_out >= 0 && l->grad_of && l->grad_of[st->origin_out] >= 0)
        o->grad_of = prog->tensors[l->grad_of[st->origin_out]].name;
      o->ready = writer[st->in[0]];
      break;
    }
    case PLAN_LSTEP_WAIT:
      o->kind = PLAN_COST_SIM_WAIT;
      o->name = prog->tensors[l->bufs[st->in[0]].tensor].name;
      break;
    default: /* leaves, transfers */
      o->kind = PLAN_COST_SIM_INPUT;
      if (st->nout > 0)
        o->name = prog->tensors[l->bufs[st->out[0]].tensor].name;
      break;
    }
    if (!o->link)
      rc = plan_oom();
    for (int k = 0; k < st->nout; k++)
      writer[st->out[k]] = i;
  }
  free(writer);
  if (rc)
    return rc;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *st = &l->steps[i];
    if (st->kind != PLAN_LSTEP_REDIST)
      continue;
    int last = i;
    while (last + 1 < l->nsteps && same_origin(st, &l->steps[last + 1]))
      last++;
    unsigned mask = 1;
    for (int c = 1; c < 3; c++)
      if (chunks_fit(l, i, last, (int64_t)1 << c))
        mask |= 1u << c;
    for (int j = i; j <= last; j++) {
      s->steps[j].chunkable = mask;
      for (int q = j + 1; q < l->nsteps; q++) {
        if (q <= last)
          continue;
        const plan_lstep *rs = &l->steps[q];
        bool reads = false;
        for (int k = 0; k < rs->nin && !reads; k++)
          reads =
              rs->kind != PLAN_LSTEP_WAIT && rs->in[k] == l->steps[j].out[0];
        if (reads) {
          s->steps[j].reader = q;
          break;
        }
      }
    }
    i = last;
  }
  return PLAN_OK;
}

/* The id of `name` among names[0..*n-1], added when new. */
static int name_id(const char **names, int *n, const char *name) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(names[i], name))
      return i;
  names[*n] = name;
  return (*n)++;
}

typedef struct sim {
  plan_cost_sim *s;
  const plan_lowered *l;
  task *tk;
  int nt;
  int *task_of;  /* [step]: its task, -1 */
  int *pending;  /* [buffer]: collectives issued that write it, not done */
  int *inflight; /* [link]: collectives running on it */
  int *act, nact;
  int block;      /* what the compute waits for: a task, -(buffer + 2), -1 */
  int block_step; /* the step that waits */
} sim;

static bool waiting(const sim *c) {
  if (c->block >= 0)
    return !c->tk[c->block].done;
  if (c->block <= -2)
    return c->pending[-c->block - 2] > 0;
  return false;
}

/* Runs the compute stream as far as it goes at `now`; whether it moved. */
static bool compute(sim *c, int *pc, double now, double *cfree, double *busy,
                    int *chan_last) {
  plan_cost_sim *s = c->s;
  const plan_lowered *l = c->l;
  bool moved = false;
  while (*pc < l->nsteps && *cfree <= now) {
    if (c->block != -1) {
      if (waiting(c))
        break;
      s->steps[c->block_step].end = now;
      c->block = -1;
      moved = true;
    }
    const plan_lstep *st = &l->steps[*pc];
    plan_cost_sim_step_info *o = &s->steps[*pc];
    o->start = o->end = now;
    moved = true;
    if (o->kind == PLAN_COST_SIM_OP) {
      *cfree = now + o->seconds;
      *busy += o->seconds;
      o->end = *cfree;
      (*pc)++;
      break;
    }
    if (o->kind == PLAN_COST_SIM_COLLECTIVE) {
      int q = c->task_of[*pc];
      task *t = &c->tk[q];
      t->issued = true;
      o->issued = now;
      t->prev = chan_last[t->channel];
      chan_last[t->channel] = q;
      c->pending[st->out[0]]++;
      if (o->stream == 0) {
        c->block = q;
        c->block_step = *pc;
      }
    } else if (o->kind == PLAN_COST_SIM_WAIT) {
      c->block = -(st->in[0] + 2);
      c->block_step = *pc;
    }
    (*pc)++;
  }
  if (*pc >= l->nsteps && c->block != -1 && !waiting(c)) {
    s->steps[c->block_step].end = now;
    c->block = -1;
    moved = true;
  }
  return moved;
}

/* Starts what can start at `now` and ends what has no work left. */
static bool collectives(sim *c, double now) {
  const plan_lowered *l = c->l;
  bool moved = false;
  for (int q = 0; q < c->nt; q++) {
    task *t = &c->tk[q];
    if (!t->issued || t->active || t->done)
      continue;
    const plan_lstep *st = &l->steps[t->step];
    if (t->prev >= 0 && !c->tk[t->prev].done)
      continue;
    if (t->dep >= 0 ? !c->tk[t->dep].done : c->pending[st->in[0]] > 0)
      continue;
    t->active = true;
    c->s->steps[t->step].start = now;
    c->inflight[t->link]++;
    c->act[c->nact++] = q;
    moved = true;
  }
  for (int a = 0; a < c->nact; a++) {
    task *t = &c->tk[c->act[a]];
    if (t->rem > 0)
      continue;
    t->active = false;
    t->done = true;
    c->s->steps[t->step].end = now;
    c->pending[l->steps[t->step].out[0]]--;
    c->inflight[t->link]--;
    c->act[a--] = c->act[--c->nact];
    moved = true;
  }
  return moved;
}

/* Runs the steps on their streams (module comment). */
static int run(plan_cost_sim *s, const plan_lowered *l) {
  int n = l->nsteps, rc = PLAN_OK;
  sim c = {.s = s, .l = l, .block = -1, .block_step = -1};
  c.tk = calloc((size_t)n + 1, sizeof *c.tk);
  c.task_of = malloc(sizeof(int) * ((size_t)n + 1));
  c.pending = calloc((size_t)l->nbufs + 1, sizeof(int));
  c.inflight = calloc((size_t)n + 1, sizeof(int));
  c.act = malloc(sizeof(int) * ((size_t)n + 1));
  const char **links = malloc(sizeof(char *) * ((size_t)n + 1));
  int *chans = malloc(sizeof(int) * 2 * ((size_t)n + 1));
  int *chan_last = malloc(sizeof(int) * ((size_t)n + 1));
  if (!c.tk || !c.task_of || !c.pending || !c.inflight || !c.act || !links ||
      !chans || !chan_last) {
    rc = plan_oom();
    goto done;
  }
  int nlinks = 0, nchans = 0;
  /* the tasks, their links, channels and dependencies */
  for (int i = 0; i < n; i++) {
    c.task_of[i] = -1;
    const plan_cost_sim_step_info *o = &s->steps[i];
    if (o->kind != PLAN_COST_SIM_COLLECTIVE)
      continue;
    task *t = &c.tk[c.nt];
    t->step = i;
    /* a local step (a slice) shares nothing */
    if (!strcmp(o->link, "local"))
      links[t->link = nlinks++] = "";
    else
      t->link = name_id(links, &nlinks, o->link);
    t->channel = -1;
    for (int ch = 0; ch < nchans && t->channel < 0; ch++)
      if (chans[2 * ch] == o->stream && chans[2 * ch + 1] == t->link)
        t->channel = ch;
    if (t->channel < 0) {
      chans[2 * nchans] = o->stream;
      chans[2 * nchans + 1] = t->link;
      chan_last[nchans] = -1;
      t->channel = nchans++;
    }
    t->rem = o->seconds;
    t->dep = -2;
    t->prev = -1;
    const plan_lstep *st = &l->steps[i];
    if (o->chunk_of > 0)
      for (int q = i - 1; q >= 0; q--)
        if (c.task_of[q] >= 0 && l->steps[q].out[0] == st->in[0] &&
            l->steps[q].chunk_of == st->chunk_of &&
            l->steps[q].chunk_at == st->chunk_index) {
          t->dep = c.task_of[q];
          break;
        }
    c.task_of[i] = c.nt++;
  }
  double now = 0, busy = 0, cfree = 0;
  int pc = 0;
  for (;;) {
    bool moved = true;
    while (moved) {
      moved = compute(&c, &pc, now, &cfree, &busy, chan_last);
      moved |= collectives(&c, now);
    }
    /* the next event: the op running ends, or a collective does */
    double next = cfree > now ? cfree : INFINITY;
    for (int a = 0; a < c.nact; a++) {
      const task *t = &c.tk[c.act[a]];
      double e = now + t->rem * c.inflight[t->link];
      if (e < next)
        next = e;
    }
    if (next == INFINITY) {
      bool left = pc < n || c.block != -1;
      for (int q = 0; q < c.nt && !left; q++)
        left = !c.tk[q].done;
      if (left)
        rc = plan_failf(PLAN_EINVALID,
                        "the stream simulation stalls at step %d", pc);
      break;
    }
    double dt = next - now;
    for (int a = 0; a < c.nact; a++) {
      task *t = &c.tk[c.act[a]];
      if (now + t->rem * c.inflight[t->link] <= next)
        t->rem = 0; /* the one that ends now, exactly */
      else
        t->rem -= dt / c.inflight[t->link];
    }
    now = next;
  }
  s->makespan = now > cfree ? now : cfree;
  s->busy = busy;
done:
  free(c.tk);
  free(c.task_of);
  free(c.pending);
  free(c.inflight);
  free(c.act);
  free(links);
  free(chans);
  free(chan_last);
  return rc;
}

int plan_cost_simulate(plan_cost_sim **out, const plan_cost_model *m,
                       const plan_plan *p, unsigned flags) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_cost_simulate: out is NULL");
  *out = NULL;
  if (!m || !p)
    return plan_failf(PLAN_EUSAGE, "plan_cost_simulate: no model or no plan");
  if (!p->has_mesh || p->mesh.naxes != m->naxes)
    return plan_failf(PLAN_EUSAGE, "plan_cost_simulate: the model was made "
                                   "for another mesh");
  if (p->pipeline.present)
    return plan_failf(PLAN_EUNSUPPORTED,
                      "plan_cost_simulate: a pipeline is priced by its "
                      "schedule (plan_cost_timeline_write)");
  plan_lowered *l = NULL;
  int rc = flags & PLAN_COST_SIM_PLAIN ? plan_lower_plain(&l, p, NULL, NULL)
                                       : plan_lower(&l, p);
  if (rc)
    return rc;
  if (l->nregions) {
    plan_lowered_free(l);
    return plan_failf(PLAN_EUNSUPPORTED,
                      "plan_cost_simulate: manual regions are not simulated");
  }
  plan_cost_sim *s = calloc(1, sizeof *s);
  if (!s) {
    plan_lowered_free(l);
    return plan_oom();
  }
  plan_arena_init(&s->arena);
  s->n = l->nsteps;
  s->steps = plan_arena_alloc(&s->arena, sizeof *s->steps * ((size_t)s->n + 1));
  if (!s->steps)
    rc = plan_oom();
  if (!rc)
    rc = describe_steps(s, m, l, (flags & PLAN_COST_SIM_SERIAL) != 0);
  /* names are the lowered plan's: copied, the simulation outlives it */
  for (int i = 0; i < s->n && !rc; i++) {
    plan_cost_sim_step_info *o = &s->steps[i];
    const char **f[] = {&o->name,      &o->collective, &o->axis,
                        &o->origin_op, &o->param,      &o->grad_of};
    for (size_t k = 0; k < sizeof f / sizeof f[0] && !rc; k++)
      if (!(*f[k] = dupe(s, *f[k])))
        rc = plan_oom();
  }
  if (!rc)
    rc = run(s, l);
  plan_lowered_free(l);
  if (rc) {
    plan_cost_sim_free(s);
    return rc;
  }
  *out = s;
  return PLAN_OK;
}

void plan_cost_sim_free(plan_cost_sim *s) {
  if (!s)
    return;
  plan_arena_free(&s->arena);
  free(s);
}

double plan_cost_sim_makespan(const plan_cost_sim *s) {
  return s ? s->makespan : 0;
}

double plan_cost_sim_compute_seconds(const plan_cost_sim *s) {
  return s ? s->busy : 0;
}

double plan_cost_sim_exposed_seconds(const plan_cost_sim *s) {
  return s && s->makespan > s->busy ? s->makespan - s->busy : 0;
}

size_t plan_cost_sim_step_count(const plan_cost_sim *s) {
  return s ? (size_t)s->n : 0;
}

int plan_cost_sim_step(plan_cost_sim_step_info *out, const plan_cost_sim *s,
                       size_t i) {
  if (!out || !s)
    return plan_failf(PLAN_EUSAGE, "plan_cost_sim_step_info: NULL argument");
  if (i >= (size_t)s->n)
    return plan_failf(PLAN_ENOTFOUND, "plan_cost_sim_step_info: no step %zu",
                      i);
  *out = s->steps[i];
  return PLAN_OK;
}

/* ---- in the report --------------------------------------------------------
 */

int plan_cost_overlap_price(plan_cost_report *r, const plan_cost_model *m,
                            const plan_plan *p) {
  r->step_plain = r->step;
  r->exposed = r->comm_fwd + r->comm_bwd + r->grad_sync + r->p2p;
  if (!p->noverlap || p->pipeline.present)
    return PLAN_OK;
  for (int i = 0; i < p->nregions; i++)
    if (p->regions[i].kind == PLAN_REGION_MANUAL)
      return PLAN_OK;
  plan_cost_sim *plain = NULL, *ovl = NULL;
  int rc = plan_cost_simulate(&plain, m, p,
                              PLAN_COST_SIM_PLAIN | PLAN_COST_SIM_SERIAL);
  if (!rc)
    rc = plan_cost_simulate(&ovl, m, p, 0);
  if (rc == PLAN_ENOMEM) {
    plan_cost_sim_free(plain);
    return rc;
  }
  if (!rc) {
    /* the lowered program's gain, taken off the report's step: without
     * overlap both are the plain figures */
    double gain = plain->makespan - ovl->makespan;
    double comm_plain = plan_cost_sim_exposed_seconds(plain);
    double hidden = comm_plain - plan_cost_sim_exposed_seconds(ovl);
    r->overlapped = true;
    r->step = r->step_plain - gain;
    r->exposed -= hidden;
    if (r->exposed < 0)
      r->exposed = 0;
  }
  plan_cost_sim_free(plain);
  plan_cost_sim_free(ovl);
  return PLAN_OK; /* a plan whose overlap does not lower keeps its step */
}
