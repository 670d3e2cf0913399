/* Numerical verification (libplan/verify.h): lower the plan, run it on
 * simulated ranks with the runner's kernels, run the reference program,
 * and compare every tensor from every replica. This file is the driver:
 * the options, the context, the runs of each training step, the report.
 *
 * All values are kept as doubles between steps (f32, bf16 and f16 values and
 * integers up to 2^53 are exact in a double) and converted to the kernel's
 * dtype around each op, so one executor serves both modes. The context is
 * in verify_ctx.h; the blocks and their pool in verify_block.c, one op in
 * verify_op.c, the collectives in verify_redist.c, the two runs in
 * verify_run.c, the comparison in verify_compare.c and its tolerances in
 * verify_tol.c; the diagnoses of a divergence in diagnose.c, a training
 * step's optimizer update in verify_train.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/schedule.h"
#include "libplan/trace.h"
#include "libplan/verify.h"
#include "verify_ctx.h"

/* ---- the context --------------------------------------------------------- */

static char *dup_or_empty(const char *s) {
  size_t n = s ? strlen(s) : 0;
  char *d = malloc(n + 1);
  if (d) {
    if (n)
      memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* What one run (of several training steps) allocates. */
static void free_run(vctx *c) {
  if (c->bufs && c->low)
    for (int b = 0; b < c->low->nbufs; b++) {
      if (!c->bufs[b])
        continue;
      for (int64_t r = 0; r < c->nranks; r++)
        if (!plan_vx_shared_copy(c, b, r))
          free(c->bufs[b][r].data);
      free(c->bufs[b]);
    }
  free(c->bufs);
  free(c->diffs);
  free(c->compared);
  free(c->needs_cmp);
  free(c->extra);
  free(c->writer);
  free(c->last_use);
  free(c->pending);
  free(c->mismatched);
  free(c->readers_left);
  c->readers_left = NULL;
  free(c->written);
  c->written = NULL;
  free(c->shared);
  c->shared = NULL;
  if (c->ref64)
    for (int t = 0; t < c->prog->ntensors; t++)
      free(c->ref64[t]);
  free(c->ref64);
  if (c->ref)
    for (int t = 0; t < c->prog->ntensors; t++)
      free(c->ref[t]);
  free(c->ref);
  free(c->rtol);
  free(c->atol);
  free(c->depth);
  free(c->rms);
  free(c->refmax);
  c->bufs = NULL;
  c->diffs = NULL;
  c->compared = c->needs_cmp = c->mismatched = c->extra = NULL;
  c->writer = NULL;
  c->last_use = c->pending = NULL;
  c->ref64 = c->ref = NULL;
  c->rtol = c->atol = c->depth = c->rms = c->refmax = NULL;
}

/* Per-rank arrays; a pipelined run shares them along the microbatch axis
 * (plan_vx_mb_first owns each). */
static void free_blocks(const vctx *c, double ***b, int n) {
  for (int i = 0; b && i < n; i++) {
    for (int64_t r = 0; b[i] && r < c->nranks; r++)
      if (plan_vx_mb_first(c, r) == r)
        free(b[i][r]);
    free(b[i]);
  }
  free(b);
}

static void free_ctx(vctx *c) {
  free_run(c);
  for (int k = 0; k < PLAN_VX_POOL_BUCKETS; k++) {
    for (int i = 0; i < c->pool[k].count; i++)
      free(c->pool[k].data[i]);
    free(c->pool[k].data);
    free(c->pool[k].n);
  }
  if (c->low && c->low->train) {
    int np = c->low->train->nparams;
    free_blocks(c, c->master, np);
    free_blocks(c, c->mom, np);
    free_blocks(c, c->vel, np);
    free_blocks(c, c->leaf_blk, c->prog->ntensors);
    for (int i = 0; c->ref_mom && i < np; i++)
      free(c->ref_mom[i]);
    for (int i = 0; c->ref_vel && i < np; i++)
      free(c->ref_vel[i]);
    for (int t = 0; c->leaf_ref && t < c->prog->ntensors; t++)
      free(c->leaf_ref[t]);
  }
  free(c->coords); /* after the blocks: a pipeline's owners use them */
  plan_vx_dist_close(c);
  free(c->ref_mom);
  free(c->ref_vel);
  free(c->leaf_ref);
  free(c->keep_ref);
  free(c->keep_buf);
  free(c->master_buf);
  free(c->grid_op);
  free(c->policy);
  for (int i = 0; i < PLAN_MAX_OPERANDS * 2; i++)
    free(c->scratch[i]);
  plan_buf_free(&c->text);
  free(c->recs);
  plan_arena_free(&c->rec_arena);
  plan_vx_lowered_free(c->low);
  plan_lowered_free(c->own);
}

/* ---- the driver ---------------------------------------------------------- */

/* The options in the newest version's struct (an older caller's ends
 * before the newer fields), and the run's --dtype (-1: each tensor's
 * own). */
static int full_options(const plan_verify_options *opts,
                        plan_verify_options *full, int *dtype) {
  plan_verify_options dflt = PLAN_VERIFY_OPTIONS_INIT;
  if (!opts)
    opts = &dflt;
  if (opts->version < 2 || opts->version > PLAN_VERIFY_OPTIONS_VERSION)
    return plan_failf(PLAN_EUSAGE,
                      "plan_verify_options version %u is not 2 to %d",
                      opts->version, PLAN_VERIFY_OPTIONS_VERSION);
  plan_verify_options init = PLAN_VERIFY_OPTIONS_INIT;
  *full = init;
  memcpy(full, opts,
         opts->version == 2   ? offsetof(plan_verify_options, tolerances)
         : opts->version == 3 ? offsetof(plan_verify_options, runner)
         : opts->version == 4 ? offsetof(plan_verify_options, world)
         : opts->version == 5 ? offsetof(plan_verify_options, memory_limit)
                              : sizeof *full);
  *dtype = -1;
  if (full->dtype) {
    *dtype = plan_dtype_from_name(full->dtype);
    if (*dtype < 0 || !plan_dtype_is_float((plan_dtype)*dtype))
      return plan_failf(PLAN_EUSAGE, "dtype '%s' is not f64, f32, bf16 or f16",
                        full->dtype);
  }
  return PLAN_OK;
}

/* The context of verifying `low` (owned by it from here, but freed by the
 * caller when this fails), with the runner the options name. */
static int init_ctx(vctx *c, const plan_plan *p, plan_lowered *low,
                    const plan_verify_options *opts, int dtype,
                    plan_verify_step_hook hook, void *user) {
  memset(c, 0, sizeof *c);
  c->dtype = dtype;
  c->o = opts;
  c->equal = 1;
  c->hook = hook;
  c->hook_user = user;
  c->mb_axis = -1;
  c->mb_now = -1;
  c->runner = plan_runner_find(opts->runner); /* the reason, when NULL */
  if (!c->runner)
    return plan_error_last()->code;
  if (c->runner->api_version != PLAN_RUNNER_API_VERSION)
    return plan_failf(PLAN_EUNSUPPORTED,
                      "runner '%s' has API version %d, not %d", c->runner->name,
                      c->runner->api_version, PLAN_RUNNER_API_VERSION);
  /* what the run reads of low, copied once through the public views */
  int rc = plan_vx_lowered_new(&c->low, low);
  if (rc)
    return rc;
  c->own = low;
  /* a training step runs on its own plan */
  c->p = c->low->plan ? c->low->plan : p;
  c->prog = &c->low->program;
  c->m = &c->low->mesh;
  c->mb_axis = c->low->pipe ? c->low->pipe->axis : -1;
  return PLAN_OK;
}

/* The report's text and records, every rank's mesh coordinates, and the
 * communicator of a distributed verification. */
static int setup_ranks(vctx *c, const plan_plan *p) {
  plan_buf_init(&c->text);
  plan_arena_init(&c->rec_arena);
  int64_t nbufs = c->low->nbufs > 0 ? c->low->nbufs : 1;
  if (c->m->ndevices > PLAN_VERIFY_MAX_RANK_BLOCKS / nbufs)
    return plan_failf(
        PLAN_EUNSUPPORTED,
        "verifying would simulate %lld ranks x %lld buffers, more than the "
        "%lld rank blocks the verifier runs: every rank makes, runs and "
        "compares its block of every buffer, even an empty or replicated "
        "one; verify the plan on a smaller mesh",
        (long long)c->m->ndevices, (long long)nbufs,
        (long long)PLAN_VERIFY_MAX_RANK_BLOCKS);
  c->nranks = c->m->ndevices;
  c->coords = calloc((size_t)c->nranks, sizeof *c->coords);
  if (!c->coords)
    return plan_oom();
  for (int64_t r = 0; r < c->nranks; r++) {
    int64_t x = r;
    for (int a = c->m->naxes - 1; a >= 0; a--) {
      c->coords[r][a] = x % c->m->axis_sizes[a];
      x /= c->m->axis_sizes[a];
    }
  }
  return c->o->world ? plan_vx_dist_open(c, p) : PLAN_OK;
}

/* Both runs and their comparison, once per training step (once for a
 * forward plan), until a step mismatches; the wall seconds of the
 * reference runs, the lowered runs and the comparisons into secs. */
/* The happens-before check of the streams (plan_lowered_check_streams): a
 * program that reads a buffer before its wait, or writes one in flight, is NOT
 * EQUAL before it runs (on a device, such a read sees whatever is there). A
 * lowered file is checked as it is read; this catches a program made in
 * memory. */
static int check_streams(vctx *c, bool *unsafe) {
  char why[900];
  int bad;
  int rc = plan_lowered_check_streams(c->low->pub, &bad, why, sizeof why);
  *unsafe = rc == PLAN_EINVALID;
  if (!*unsafe)
    return rc;
  const vx_step *s = &c->low->steps[bad];
  int b = s->nin ? s->in[0] : s->out[0];
  c->equal = 0;
  c->first_op =
      s->kind == VX_STEP_OP ? c->prog->ops[s->op].name : "the streams";
  c->first_tensor = c->prog->tensors[c->low->bufs[b].tensor].name;
  snprintf(c->diagnosis, sizeof c->diagnosis, "unsafe overlap: %s", why);
  plan_buf_printf(&c->text, "NOT EQUAL: the steps are not ordered safely: %s\n",
                  why);
  return PLAN_OK;
}

static int run_steps(vctx *c, double *secs) {
  c->nsteps = 1;
  bool unsafe = false;
  int rc = check_streams(c, &unsafe);
  if (rc || unsafe)
    return rc;
  rc = plan_vx_setup_grid(c);
  if (!rc && c->low->train) {
    c->nsteps = c->low->training.steps > 1 ? (int)c->low->training.steps : 1;
    rc = plan_vx_setup_train(c);
  }
  for (c->step = 0; !rc && c->step < c->nsteps; c->step++) {
    if (c->step)
      free_run(c);
    double t0 = plan_vx_seconds_now();
    if ((rc = plan_vx_run_reference(c, &c->ref)) ||
        (rc = plan_vx_init_tolerances(c)))
      break;
    /* distributed: the low-precision bound sums every process's errors
     * against the f64 reference, so each needs it */
    if (c->comm && (rc = plan_vx_run_reference64(c)))
      break;
    double t1 = plan_vx_seconds_now();
    if ((rc = plan_vx_run_lowered(c))) /* comparing as it goes */
      break;
    double t2 = plan_vx_seconds_now();
    /* distributed: every process's comparisons first, merged */
    if (c->comm && !(rc = plan_vx_compare_all(c, false)))
      rc = plan_vx_dist_merge_diffs(c);
    if (!rc)
      rc = plan_vx_compare_all(c, true);
    if (!rc)
      plan_vx_local_verdict(c);
    /* exact mode out of a double's range: cannot be exact here (exit 3) */
    if (!rc && !c->equal && c->exact_lost[0])
      rc = plan_failf(PLAN_EUNSUPPORTED, "%s", c->exact_lost);
    if (!rc && c->equal && c->low->train)
      rc = plan_vx_optimizer_step(c);
    secs[0] += t1 - t0;
    secs[1] += t2 - t1;
    secs[2] += plan_vx_seconds_now() - t2;
    if (!c->equal)
      break;
  }
  return rc;
}

/* The report's line on a training step: the optimizer and what was
 * compared. */
static void describe_training(vctx *c) {
  const vx_training *o = &c->low->training;
  int nparams = c->low->train->nparams;
  if (o->optimizer == PLAN_OPT_NONE)
    plan_buf_printf(&c->text,
                    "training: gradients of %d params, no "
                    "optimizer\n",
                    nparams);
  else if (o->optimizer == PLAN_OPT_ADAM)
    plan_buf_printf(&c->text,
                    "training: %d of %d adam steps (lr %g, betas %g %g, "
                    "eps %g, weight decay %g, clip %g, loss scale %g) on "
                    "%d params, compared: loss, every gradient, updated "
                    "params and both moments on every replica\n",
                    c->equal ? c->nsteps : c->step + 1, c->nsteps, o->lr,
                    o->beta1, o->beta2, o->eps, o->weight_decay,
                    o->clip_grad_norm, o->loss_scale, nparams);
  else
    plan_buf_printf(&c->text,
                    "training: %d of %d sgd steps (lr %g, momentum %g, "
                    "weight decay %g, clip %g, loss scale %g) on %d "
                    "params, compared: loss, every gradient, updated "
                    "params on every replica\n",
                    c->equal ? c->nsteps : c->step + 1, c->nsteps, o->lr,
                    o->momentum, o->weight_decay, o->clip_grad_norm,
                    o->loss_scale, nparams);
}

/* The report's verdict line (mode, seed, ranks, pipeline, collectives),
 * the divergence and its diagnosis, the runner and the communicator. */
static void describe_verdict(vctx *c, const plan_plan *p) {
  const vx_lowered *low = c->low;
  plan_buf_printf(&c->text, "%s: %s (%s mode, seed %llu, ", plan_file(p),
                  c->equal ? "EQUAL" : "NOT EQUAL",
                  c->o->mode == PLAN_VERIFY_EXACT ? "exact" : "float",
                  (unsigned long long)c->o->seed);
  if (low->pipe)
    plan_buf_printf(
        &c->text,
        "%lld ranks, %d stages, %lld microbatches, %s, %d "
        "send/recv; ",
        /* the devices: each pipeline rank's sub-mesh (the microbatch
         * mesh's ranks of one microbatch), a plan's or a file's */
        (long long)(c->nranks / low->pipe->microbatches *
                    plan_schedule_ranks(low->pipe->schedule)),
        low->pipe->nstages, (long long)low->pipe->microbatches,
        plan_schedule_kind_name(plan_schedule_kind_of(low->pipe->schedule)),
        low->pipe->transfers);
  else
    plan_buf_printf(&c->text, "%lld ranks; ", (long long)c->nranks);
  bool first = true;
  for (int k = 0; k < VX_REDIST_COUNT; k++)
    if (low->collectives[k] && k != VX_REDIST_SLICE && k != VX_REDIST_RELABEL &&
        k != VX_REDIST_ZERO_NON_OWNER) {
      plan_buf_printf(&c->text, "%s%d %s", first ? "" : ", ",
                      low->collectives[k],
                      plan_vx_redist_kind_name((vx_redist_kind)k));
      first = false;
    }
  int inside = plan_lowered_collective_count(c->own, "op_all_reduce");
  if (inside > 0) {
    plan_buf_printf(&c->text, "%s%d all_reduce inside the vocab-parallel loss",
                    first ? "" : ", ", inside);
    first = false;
  }
  plan_buf_printf(&c->text, "%s)\n", first ? "no collectives" : "");
  if (c->deadlock) {
    plan_buf_printf(&c->text, "the schedule did not finish\n");
    plan_buf_printf(&c->text, "diagnosis: %s\n", c->diagnosis);
  } else if (!c->equal) {
    plan_buf_printf(&c->text, "first divergent op: %s (tensor '%s')\n",
                    c->first_op, c->first_tensor);
    if (c->diagnosis[0])
      plan_buf_printf(&c->text, "diagnosis: %s\n", c->diagnosis);
  }
  if (c->runner->describe) { /* the default runner goes without saying */
    char where[512] = "";
    c->runner->describe(where, sizeof where);
    plan_buf_printf(&c->text, "runner: %s%s%s\n", c->runner->name,
                    where[0] ? ": " : "", where);
  }
  if (c->comm) {
    char how[512] = "";
    c->comm->ops->describe(c->comm, how, sizeof how);
    plan_buf_printf(&c->text,
                    "distributed: %d processes, one rank each, compared "
                    "where they ran; %s\n",
                    c->comm->world, how);
  }
}

/* The report of a finished verification into *out; the context is freed
 * on every path. */
static int make_report(vctx *c, const plan_plan *p, const double *secs,
                       plan_verify_report **out) {
  plan_verify_report *rep = calloc(1, sizeof *rep);
  if (!rep) {
    free_ctx(c);
    return plan_oom();
  }
  rep->equal = c->equal;
  rep->seconds_reference = secs[0];
  rep->seconds_lowered = secs[1] - c->cmp_seconds;
  rep->seconds_compare = secs[2] + c->cmp_seconds;
  memcpy(rep->collectives, c->low->collectives, sizeof rep->collectives);
  rep->mode = c->o->mode;
  rep->seed = c->o->seed;
  rep->runner = dup_or_empty(c->runner->name);
  rep->ranks = c->nranks;
  /* the records move to the report, with their strings */
  rep->recs = c->recs;
  rep->nrecs = c->nrecs;
  rep->arena = c->rec_arena;
  c->recs = NULL;
  c->nrecs = 0;
  plan_arena_init(&c->rec_arena);
  rep->file = dup_or_empty(plan_file(p));
  if (c->low->train)
    describe_training(c);
  describe_verdict(c, p);
  rep->text = dup_or_empty(plan_buf_cstr(&c->text));
  if (!rep->file || !rep->runner) {
    free_ctx(c);
    plan_verify_report_free(rep);
    return plan_oom();
  }
  rep->first_op = dup_or_empty(c->first_op);
  rep->first_tensor = dup_or_empty(c->first_tensor);
  rep->diagnosis = dup_or_empty(c->diagnosis);
  c->dist_done = true; /* every collective made: a clean close */
  free_ctx(c);
  if (!rep->text || !rep->first_op || !rep->first_tensor || !rep->diagnosis) {
    plan_verify_report_free(rep);
    return plan_oom();
  }
  *out = rep;
  return PLAN_OK;
}

/* ---- the entries --------------------------------------------------------- */

/* An allocation failed mid-run: the message names the file and what the
 * run needs (the context freed first, so there is room to say it). */
static int out_of_memory(const plan_plan *p, uint64_t need) {
  char n[32] = "";
  if (need)
    plan_vx_format_bytes(n, sizeof n, need);
  return plan_failf(PLAN_ENOMEM, "out of memory verifying %s%s%s",
                    plan_file(p) ? plan_file(p) : "the plan",
                    need ? ": needs about " : "", n);
}

int plan_verify(plan_verify_report **out, const plan_plan *p,
                const plan_verify_options *opts) {
  return plan_verify_traced(out, p, opts, NULL, NULL); /* no Lua host */
}

int plan_verify_traced(plan_verify_report **out, const plan_plan *p,
                       const plan_verify_options *opts,
                       plan_region_tracer tracer, void *user) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_verify: no place for the report");
  *out = NULL;
  if (!p || !plan_has_mesh(p))
    return plan_failf(PLAN_EUSAGE, "plan_verify: a plan with a mesh is needed");
  plan_lowered *low;
  int rc = plan_lower_traced(&low, p, tracer, user);
  if (rc)
    return rc;
  return plan_verify_lowered(out, p, low, opts);
}

int plan_verify_lowered(plan_verify_report **out, const plan_plan *p,
                        plan_lowered *low, const plan_verify_options *opts) {
  return plan_verify_lowered_hooked(out, p, low, opts, NULL, NULL);
}

int plan_verify_lowered_hooked(plan_verify_report **out, const plan_plan *p,
                               plan_lowered *low,
                               const plan_verify_options *opts,
                               plan_verify_step_hook hook, void *user) {
  if (!out || !p || !low) {
    if (out)
      *out = NULL;
    plan_lowered_free(low); /* owned, on every path */
    return plan_failf(PLAN_EUSAGE, "plan_verify_lowered: NULL argument");
  }
  *out = NULL;
  plan_verify_options full;
  vctx c;
  int dtype = -1, rc = full_options(opts, &full, &dtype);
  if (!rc)
    rc = init_ctx(&c, p, low, &full, dtype, hook, user);
  if (rc) { /* nothing of the context to free yet but the program */
    plan_lowered_free(low);
    return rc;
  }
  double secs[3] = {0, 0, 0};
  uint64_t need = 0;
  /* the preflight after the ranks' limit: it walks every rank's blocks */
  if ((rc = setup_ranks(&c, p)) ||
      (rc = plan_vx_preflight(p, c.low, &full, &need)) ||
      (rc = run_steps(&c, secs))) {
    free_ctx(&c);
    return rc == PLAN_ENOMEM ? out_of_memory(p, need) : rc;
  }
  return make_report(&c, p, secs, out);
}

/* ---- the report ---------------------------------------------------------- */

void plan_verify_report_free(plan_verify_report *r) {
  if (!r)
    return;
  free(r->file);
  free(r->runner);
  free(r->recs);
  plan_arena_free(&r->arena);
  free(r->text);
  free(r->first_op);
  free(r->first_tensor);
  free(r->diagnosis);
  free(r);
}

int plan_verify_report_equal(const plan_verify_report *r) {
  return r->equal;
}
const char *plan_verify_report_runner(const plan_verify_report *r) {
  return r->runner;
}
const char *plan_verify_report_text(const plan_verify_report *r) {
  return r->text;
}
const char *plan_verify_report_first_op(const plan_verify_report *r) {
  return r->equal ? NULL : r->first_op;
}
const char *plan_verify_report_first_tensor(const plan_verify_report *r) {
  return r->equal ? NULL : r->first_tensor;
}
const char *plan_verify_report_diagnosis(const plan_verify_report *r) {
  return r->diagnosis;
}
int plan_verify_report_collectives(const plan_verify_report *r,
                                   const char *kind) {
  for (int k = 0; k < VX_REDIST_COUNT; k++)
    if (!strcmp(plan_vx_redist_kind_name((vx_redist_kind)k), kind))
      return r->collectives[k];
  return 0;
}
