/* Communication overlap at lowering (spec/plan-format.md §4.8): each
 * `overlap` entry selects collectives of the lowered program by what made
 * them (an op's input, a param's redistributions, a gradient's sync: the
 * origin lower.c tags each REDIST step with), and each selected chain of
 * steps (one redistribution, one or more steps) is started on the entry's
 * stream where the entry says, waited where it says (one WAIT per buffer
 * the chain writes), and, with `chunks: k`, decomposed into k steps over
 * slices of a dim no step of the chain acts on. The steps are reordered
 * once, at the end: every position is a slot of the original order (2j:
 * before step j, 2j + 1: step j itself, 2j + 2: after it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/diag.h"
#include "libplan/lowered.h"
#include "lower/lower.h"

typedef struct group {
  int entry;
  int first, last;     /* original steps first..last (consecutive) */
  int64_t start, wait; /* slots */
  bool moved;          /* started elsewhere than in place */
  int dim;             /* chunk dim; -1 when not chunked */
  int64_t chunks;
  int stream;
} group;

typedef struct octx {
  plan_lowered *l;
  const plan_plan *p;
  plan_diags *d;
  int *writer;  /* [buffer]: the original step that writes it */
  int *op_step; /* [op]: its OP step, -1 */
  int *owner;   /* [step]: the group that holds it, -1 */
  group *groups;
  int ngroups, cap_groups;
} octx;

/* One problem of entry e: a finding (then 1: the entry is left out) or
 * the error (negative). */
static int problem(octx *c, const plan_overlap *e, const char *code,
                   plan_pos pos, const char *fmt, ...) PLAN_PRINTF(5, 6);
static int problem(octx *c, const plan_overlap *e, const char *code,
                   plan_pos pos, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->d) {
    int rc = plan_diags_add(c->d, PLAN_SEV_ERROR, code, e->pattern, c->p->file,
                            pos.line, pos.col, "overlap: %s", msg);
    return rc ? rc : 1;
  }
  return plan_fail(PLAN_EINVALID, c->p->file, pos.line, pos.col,
                   "overlap: %s [%s]", msg, code);
}

static bool name_match(const char *pattern, const char *name) {
  return plan_is_glob(pattern) ? plan_glob_match(pattern, name)
                               : !strcmp(pattern, name);
}

/* Whether step s is one entry e selects. */
static bool selects(const octx *c, const plan_overlap *e, const plan_lstep *s) {
  const plan_lowered *l = c->l;
  const plan_program *prog = l->plan->program;
  if (s->kind != PLAN_LSTEP_REDIST)
    return false;
  switch (e->select) {
  case PLAN_OVL_INPUT:
    return s->origin_op >= 0 &&
           (e->operand < 0 || e->operand == s->origin_in) &&
           name_match(e->pattern, prog->ops[s->origin_op].name);
  case PLAN_OVL_PARAM: {
    const plan_tensor *t = &prog->tensors[l->bufs[s->in[0]].tensor];
    return s->origin_op >= 0 && t->role == PLAN_ROLE_PARAM &&
           name_match(e->pattern, t->name);
  }
  case PLAN_OVL_GRAD_SYNC:
    return s->origin_out >= 0 && l->grad_of && l->grad_of[s->origin_out] >= 0 &&
           name_match(e->pattern,
                      prog->tensors[l->grad_of[s->origin_out]].name);
  default:
    return false;
  }
}

static bool same_origin(const plan_lstep *a, const plan_lstep *b) {
  return a->origin_op == b->origin_op && a->origin_in == b->origin_in &&
         a->origin_out == b->origin_out;
}

/* The slot of op `name`'s step (before: 2j; after: 2j + 2), or a problem. */
static int op_slot(octx *c, const plan_overlap *e, const char *name, bool after,
                   plan_pos pos, int64_t *slot) {
  int op = plan_strmap_get(&c->l->plan->program->op_by_name, name);
  if (op < 0 || c->op_step[op] < 0)
    return problem(c, e, "overlap.name", pos,
                   "the lowered program has no op '%s' (a backward op is "
                   "named grad/OP/PART)",
                   name);
  *slot = 2 * (int64_t)c->op_step[op] + (after ? 2 : 0);
  return PLAN_OK;
}

/* The step of slot `slot` (an op step's or a leaf's), for messages. */
static const char *slot_what(const octx *c, int64_t slot, char *buf,
                             size_t size) {
  const plan_lowered *l = c->l;
  int j = (int)(slot / 2);
  if (j >= l->nsteps)
    return "the end";
  const plan_lstep *s = &l->steps[j < 0 ? 0 : j];
  if (s->kind == PLAN_LSTEP_OP)
    snprintf(buf, size, "op '%s'", l->plan->program->ops[s->op].name);
  else
    snprintf(buf, size, "step %d", j);
  return buf;
}

/* Whether k chunks divide dim d of every rank's block of every buffer
 * group g's steps read or write; the first that does not into *bad_*. */
static bool chunks_divide(const plan_lowered *l, const group *g, int d,
                          int64_t k, int64_t *bad_n, int64_t *bad_r,
                          int *bad_out) {
  for (int j = g->first; j <= g->last; j++) {
    int bufs[2] = {l->steps[j].in[0], l->steps[j].out[0]};
    for (int b = 0; b < 2; b++)
      for (int64_t r = 0; r < l->plan->mesh.ndevices; r++) {
        int64_t dims[PLAN_MAX_RANK];
        plan_lowered_buffer_block(dims, NULL, l, bufs[b], r);
        if (dims[d] % k) {
          *bad_n = dims[d];
          *bad_r = r;
          *bad_out = b;
          return false;
        }
      }
  }
  return true;
}

static bool acts_on(const plan_lowered *l, const group *g, int d) {
  for (int j = g->first; j <= g->last; j++)
    if (l->steps[j].redist.dim == d || l->steps[j].redist.to_dim == d)
      return true;
  return false;
}

/* The chunk dim of group g: entry e's, or the first dim no step of the
 * chain acts on that the chunks divide in every block of its buffers. */
static int chunk_dim(octx *c, const plan_overlap *e, group *g) {
  const plan_lowered *l = c->l;
  const plan_lstep *s0 = &l->steps[g->first];
  const plan_tensor *t = &l->plan->program->tensors[l->bufs[s0->in[0]].tensor];
  int64_t n = 0, r = 0;
  int out = 0, d = e->dim, first_free = -1;
  for (int cand = 0; d < 0 && cand < t->rank; cand++) {
    if (acts_on(l, g, cand))
      continue;
    int64_t n1, r1;
    int o1;
    if (chunks_divide(l, g, cand, e->chunks, &n1, &r1, &o1))
      d = cand;
    else if (first_free < 0) {
      first_free = cand;
      n = n1;
      r = r1;
      out = o1;
    }
  }
  if (d < 0 && first_free >= 0)
    return problem(c, e, "overlap.chunks", e->chunks_pos,
                   "%lld chunks divide no dim of '%s' its collective leaves "
                   "(dim %d: %lld on rank %lld in %s)",
                   (long long)e->chunks, t->name, first_free, (long long)n,
                   (long long)r, out ? "the result" : "the input");
  if (d < 0 || d >= t->rank)
    return problem(c, e, "overlap.chunks", e->chunks_pos,
                   "tensor '%s' has no dim %s to split into chunks", t->name,
                   e->dim >= 0 ? "of that number" : "its collective leaves");
  if (acts_on(l, g, d))
    return problem(c, e, "overlap.chunks", e->chunks_pos,
                   "the collective of '%s' acts on dim %d: chunks split a "
                   "dim the collective leaves",
                   t->name, d);
  if (!chunks_divide(l, g, d, e->chunks, &n, &r, &out))
    return problem(c, e, "overlap.chunks", e->chunks_pos,
                   "%lld chunks do not divide dim %d of '%s' (%lld on rank "
                   "%lld in %s)",
                   (long long)e->chunks, d, t->name, (long long)n, (long long)r,
                   out ? "the result" : "the input");
  g->dim = d;
  g->chunks = e->chunks;
  return PLAN_OK;
}

/* The groups of entry ei: its chains, with their slots checked. */
static int apply_entry(octx *c, int ei) {
  plan_lowered *l = c->l;
  const plan_overlap *e = &c->p->overlap[ei];
  int found = 0, rc;
  for (int j = 0; j < l->nsteps; j++) {
    const plan_lstep *s = &l->steps[j];
    if (!selects(c, e, s))
      continue;
    if (c->owner[j] >= 0)
      return problem(c, e, "overlap.duplicate", e->pos,
                     "it selects a collective of '%s' that entry %d already "
                     "selects",
                     l->plan->program->tensors[l->bufs[s->in[0]].tensor].name,
                     c->groups[c->owner[j]].entry);
    int last = j;
    while (last + 1 < l->nsteps && selects(c, e, &l->steps[last + 1]) &&
           same_origin(s, &l->steps[last + 1]))
      last++;
    if (plan_grow((void **)&c->groups, &c->cap_groups, c->ngroups + 1,
                  sizeof(group)))
      return plan_oom();
    group g = {ei, j, last, 0, 0, false, -1, 1, e->stream};
    /* start */
    int64_t ready = 2 * (int64_t)c->writer[s->in[0]] + 2;
    g.start = 2 * (int64_t)j + 1;
    if (e->start == PLAN_OVL_READY) {
      g.start = ready;
      g.moved = true;
    } else if (e->start == PLAN_OVL_AFTER || e->start == PLAN_OVL_BEFORE) {
      if ((rc = op_slot(c, e, e->start_op, e->start == PLAN_OVL_AFTER,
                        e->start_pos, &g.start)))
        return rc;
      g.moved = true;
    }
    char wa[PLAN_MAX_NAME + 16], wb[PLAN_MAX_NAME + 16];
    const char *tn = l->plan->program->tensors[l->bufs[s->in[0]].tensor].name;
    if (g.start < ready)
      return problem(c, e, "overlap.order", e->start_pos,
                     "the collective of '%s' would start before its input "
                     "is made (by %s)",
                     tn, slot_what(c, ready - 1, wa, sizeof wa));
    /* the first reader of what the chain writes, outside it */
    int64_t reader = 2 * (int64_t)l->nsteps;
    for (int q = 0; q < l->nsteps && reader == 2 * (int64_t)l->nsteps; q++) {
      if (q >= j && q <= last)
        continue;
      for (int x = 0; x < l->steps[q].nin; x++)
        for (int y = j; y <= last; y++)
          if (l->steps[q].in[x] == l->steps[y].out[0] &&
              reader == 2 * (int64_t)l->nsteps)
            reader = 2 * (int64_t)q;
    }
    g.wait = reader;
    if (e->wait == PLAN_OVL_END)
      g.wait = 2 * (int64_t)l->nsteps;
    else if (e->wait == PLAN_OVL_BEFORE &&
             (rc = op_slot(c, e, e->wait_op, false, e->wait_pos, &g.wait)))
      return rc;
    if (g.wait < g.start)
      return problem(
          c, e, "overlap.order", e->wait_pos,
          "the wait (before %s) comes before the start (%s %s)",
          slot_what(c, g.wait, wa, sizeof wa), g.start % 2 ? "at" : "after",
          slot_what(c, g.start % 2 ? g.start : g.start - 2, wb, sizeof wb));
    if (g.wait > reader)
      return problem(c, e, "overlap.order", e->wait_pos,
                     "%s reads the result of the collective of '%s' before "
                     "its wait",
                     slot_what(c, reader, wa, sizeof wa), tn);
    if (e->chunks > 1 && (rc = chunk_dim(c, e, &g)))
      return rc;
    for (int q = j; q <= last; q++)
      c->owner[q] = c->ngroups;
    c->groups[c->ngroups++] = g;
    found++;
    j = last;
  }
  if (!found)
    return problem(c, e, "overlap.unmatched", e->pos,
                   "%s '%s' selects no collective of the lowered program%s",
                   e->select == PLAN_OVL_INPUT   ? "input"
                   : e->select == PLAN_OVL_PARAM ? "param"
                                                 : "grad_sync",
                   e->pattern,
                   e->select == PLAN_OVL_GRAD_SYNC && !l->train
                       ? " (a gradient sync needs training)"
                       : "");
  return PLAN_OK;
}

/* Appends group g's steps (chunked, on its stream) to out. */
static int emit_group(octx *c, const group *g, plan_lstep *out, int *n) {
  plan_lowered *l = c->l;
  for (int j = g->first; j <= g->last; j++)
    for (int64_t k = 0; k < g->chunks; k++) {
      plan_lstep s = l->steps[j];
      s.stream = g->stream;
      if (g->chunks > 1) {
        s.chunk_dim = g->dim;
        s.chunk_of = g->chunks;
        s.chunk_index = s.chunk_at = k;
        if (k)
          l->collectives[s.redist.kind]++;
      }
      out[(*n)++] = s;
    }
  return PLAN_OK;
}

static int emit_waits(octx *c, const group *g, plan_lstep *out, int *n) {
  plan_lowered *l = c->l;
  for (int j = g->first; j <= g->last; j++) {
    plan_lstep s;
    memset(&s, 0, sizeof s);
    s.kind = PLAN_LSTEP_WAIT;
    s.op = s.origin_op = s.origin_in = s.origin_out = -1;
    s.nin = 1;
    s.stream = g->stream;
    s.in = plan_arena_alloc(&l->arena, sizeof(int) * 2);
    s.out = plan_arena_alloc(&l->arena, sizeof(int));
    if (!s.in || !s.out)
      return plan_oom();
    s.in[0] = l->steps[j].out[0];
    out[(*n)++] = s;
  }
  return PLAN_OK;
}

/* Everything placed at slot `slot`: the starts of the groups moved there,
 * then the waits there. */
static int emit_slot(octx *c, int64_t slot, plan_lstep *out, int *n) {
  int rc = PLAN_OK;
  for (int g = 0; g < c->ngroups && !rc; g++)
    if (c->groups[g].moved && c->groups[g].start == slot)
      rc = emit_group(c, &c->groups[g], out, n);
  for (int g = 0; g < c->ngroups && !rc; g++)
    if (c->groups[g].wait == slot)
      rc = emit_waits(c, &c->groups[g], out, n);
  return rc;
}

static int reorder(octx *c) {
  plan_lowered *l = c->l;
  size_t cap = (size_t)l->nsteps + 1;
  for (int g = 0; g < c->ngroups; g++)
    cap += (size_t)(c->groups[g].last - c->groups[g].first + 1) *
           ((size_t)c->groups[g].chunks + 1);
  plan_lstep *out = malloc(sizeof(plan_lstep) * cap);
  if (!out)
    return plan_oom();
  int n = 0, rc = PLAN_OK;
  for (int j = 0; j < l->nsteps && !rc; j++) {
    rc = emit_slot(c, 2 * (int64_t)j, out, &n);
    int g = c->owner[j];
    if (!rc && g < 0)
      out[n++] = l->steps[j];
    else if (!rc && !c->groups[g].moved && j == c->groups[g].first)
      rc = emit_group(c, &c->groups[g], out, &n);
  }
  /* the end: what waits there (slot 2n, after the last step) */
  if (!rc)
    rc = emit_slot(c, 2 * (int64_t)l->nsteps, out, &n);
  if (rc) {
    free(out);
    return rc;
  }
  free(l->steps);
  l->steps = out;
  l->nsteps = n;
  l->cap_steps = (int)cap;
  return PLAN_OK;
}

int plan_lower_overlap(plan_lowered *l, const plan_plan *p, plan_diags *d) {
  if (!p->noverlap)
    return PLAN_OK;
  octx c = {l, p, d, NULL, NULL, NULL, NULL, 0, 0};
  if (l->pipe || l->nregions) {
    const char *what = l->pipe ? "a pipeline" : "manual regions";
    if (!d)
      return plan_fail(PLAN_EUNSUPPORTED, p->file, p->overlap[0].pos.line,
                       p->overlap[0].pos.col,
                       "overlap is not lowered for %s yet", what);
    int rc =
        problem(&c, &p->overlap[0], "overlap.unsupported", p->overlap[0].pos,
                "overlap is not lowered for %s yet", what);
    return rc < 0 ? rc : PLAN_OK;
  }
  const plan_program *prog = l->plan->program;
  c.writer = malloc(sizeof(int) * ((size_t)l->nbufs + 1));
  c.op_step = malloc(sizeof(int) * ((size_t)prog->nops + 1));
  c.owner = malloc(sizeof(int) * ((size_t)l->nsteps + 1));
  int rc = PLAN_OK;
  if (!c.writer || !c.op_step || !c.owner) {
    rc = plan_oom();
    goto done;
  }
  for (int b = 0; b < l->nbufs; b++)
    c.writer[b] = -1;
  for (int i = 0; i < prog->nops; i++)
    c.op_step[i] = -1;
  for (int j = 0; j < l->nsteps; j++) {
    const plan_lstep *s = &l->steps[j];
    c.owner[j] = -1;
    for (int k = 0; k < s->nout; k++)
      c.writer[s->out[k]] = j;
    if (s->kind == PLAN_LSTEP_OP && s->op >= 0)
      c.op_step[s->op] = j;
  }
  for (int i = 0; i < p->noverlap && !rc; i++) {
    int before = c.ngroups;
    rc = apply_entry(&c, i);
    if (rc > 0) { /* a finding: the entry is left out */
      for (int j = 0; j < l->nsteps; j++)
        if (c.owner[j] >= before)
          c.owner[j] = -1;
      c.ngroups = before;
      rc = PLAN_OK;
    }
  }
  if (!rc)
    rc = reorder(&c);
  if (!rc)
    rc = plan_lowered_renumber(l, NULL);
  if (!rc) { /* what lowering made must pass the check files get */
    char why[1024];
    int bad;
    if ((rc = plan_lowered_check_streams(l, &bad, why, sizeof why)) ==
        PLAN_EINVALID)
      rc = plan_failf(PLAN_EINVALID, "overlap: %s", why);
  }
done:
  free(c.writer);
  free(c.op_step);
  free(c.owner);
  free(c.groups);
  return rc;
}

int plan_overlap_validate(const plan_plan *p, plan_diags *d) {
  if (!p->noverlap)
    return PLAN_OK;
  bool manual = false;
  for (int r = 0; r < p->nregions; r++)
    manual |= p->regions[r].kind == PLAN_REGION_MANUAL;
  if (p->pipeline.present || manual)
    return plan_diags_add(d, PLAN_SEV_ERROR, "overlap.unsupported", "overlap",
                          p->file, p->overlap[0].pos.line,
                          p->overlap[0].pos.col,
                          "overlap: overlap is not lowered for %s yet",
                          manual ? "manual regions" : "a pipeline");
  plan_lowered *l = NULL;
  /* a plan that does not lower is reported by what lowering needs (its
   * strategies, its gradient sync): the entries are judged on one that
   * does */
  int rc = plan_lower_plain(&l, p, NULL, NULL);
  if (rc == PLAN_ENOMEM)
    return rc;
  if (rc)
    return PLAN_OK;
  rc = plan_lower_overlap(l, p, d);
  plan_lowered_free(l);
  return rc == PLAN_ENOMEM ? rc : PLAN_OK;
}
