/* Drift reports (a plan against an edited program) and semantic diffs of two
 * plans. Both compare meaning, never text: ops and tensors by signature,
 * placements in canonical spelling, sections by canonical encoding. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "base/util.h"
#include "ir/ops.h"
#include "ir/placement.h"
#include "read/plan_read.h"

#define ADD(d, rcp, sev, code, obj, file, pos, ...)                            \
  do {                                                                         \
    int rc_ = plan_diags_add(d, sev, code, obj, file, (pos).line, (pos).col,   \
                             __VA_ARGS__);                                     \
    if (rc_ && !*(rcp))                                                        \
      *(rcp) = rc_;                                                            \
  } while (0)

/* ---- drift
 * ------------------------------------------------------------------- */

static uint64_t op_sig(const plan_program *p, int i) {
  return p->op_sigs ? p->op_sigs[i] : 0;
}
static uint64_t tensor_sig(const plan_program *p, int i) {
  return p->tensor_sigs ? p->tensor_sigs[i] : 0;
}

/* The names and signatures of the program a plan was made for. */
typedef struct sigset {
  int n;
  const char **names;
  const uint64_t *sigs;
  plan_strmap map;
  uint64_t *own; /* storage when taken from a program */
  const char **own_names;
} sigset;

static int sigset_from_program(sigset *s, const plan_program *prog, bool ops) {
  memset(s, 0, sizeof *s);
  plan_program_sigs(prog);
  s->n = ops ? prog->nops : prog->ntensors;
  s->own = malloc(sizeof(uint64_t) * ((size_t)s->n + 1));
  s->own_names = malloc(sizeof(char *) * ((size_t)s->n + 1));
  if (!s->own || !s->own_names)
    return plan_oom();
  for (int i = 0; i < s->n; i++) {
    s->own[i] = ops ? op_sig(prog, i) : tensor_sig(prog, i);
    s->own_names[i] = ops ? prog->ops[i].name : prog->tensors[i].name;
  }
  s->sigs = s->own;
  s->names = s->own_names;
  return PLAN_OK;
}

static int sigset_index(sigset *s) {
  plan_strmap_init(&s->map);
  for (int i = 0; i < s->n; i++)
    if (plan_strmap_put(&s->map, s->names[i], i))
      return plan_oom();
  return PLAN_OK;
}

static void sigset_free(sigset *s) {
  plan_strmap_free(&s->map);
  free(s->own);
  free(s->own_names);
}

static bool strategy_glob_covers(const plan_plan *p, const char *name) {
  for (int i = 0; i < p->nuses; i++)
    if (p->uses[i].is_glob && !strcmp(p->uses[i].section, "strategies") &&
        plan_glob_match(p->uses[i].pattern, name))
      return true;
  return false;
}

/* The plan decides for a tensor when it stores it in a chosen placement,
 * delivers it as an output in one, or names it in training. */
static bool plan_names_tensor(const plan_plan *p, const char *name) {
  const plan_program *prog = p->program;
  int t = plan_strmap_get(&prog->tensor_by_name, name);
  if (t >= 0 && p->has_mesh && p->placements[t].set)
    return true;
  for (int i = 0; t >= 0 && p->has_mesh && i < prog->noutputs; i++)
    if (prog->outputs[i] == t && p->out_pl[i].set)
      return true;
  for (int i = 0; i < p->nuses; i++)
    if (p->uses[i].tensors && !p->uses[i].is_glob &&
        !strcmp(p->uses[i].pattern, name))
      return true;
  return false;
}

/* ---- what changed, in values ---- */

/* Appends printf text to buf (NUL-terminated, truncated to size). */
static void bput(char *buf, size_t size, const char *fmt, ...)
    PLAN_PRINTF(3, 4);
static void bput(char *buf, size_t size, const char *fmt, ...) {
  size_t at = strlen(buf);
  if (at + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + at, size - at, fmt, ap);
  va_end(ap);
}

static void shape_text(char *buf, size_t size, const plan_tensor *t) {
  buf[0] = '\0';
  bput(buf, size, "[");
  for (int d = 0; d < t->rank; d++)
    bput(buf, size, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
  bput(buf, size, "]");
}

/* ", shape [8, 64] -> [8, 128]" and the dtype's and role's changes of a
 * tensor (`label` names it, "" for the tensor itself). */
static void tensor_change(char *buf, size_t size, const char *label,
                          const plan_tensor *a, const plan_tensor *b) {
  char x[160], y[160];
  shape_text(x, sizeof x, a);
  shape_text(y, sizeof y, b);
  if (strcmp(x, y))
    bput(buf, size, "; %sshape %s -> %s", label, x, y);
  if (a->dtype != b->dtype)
    bput(buf, size, "; %sdtype %s -> %s", label, plan_dtype_name(a->dtype),
         plan_dtype_name(b->dtype));
  if (a->role != b->role)
    bput(buf, size, "; %srole %s -> %s", label, plan_role_name(a->role),
         plan_role_name(b->role));
}

static void names_text(char *buf, size_t size, const plan_program *p,
                       const int *ts, int n) {
  buf[0] = '\0';
  bput(buf, size, "[");
  for (int i = 0; i < n; i++)
    bput(buf, size, "%s%s", i ? ", " : "", p->tensors[ts[i]].name);
  bput(buf, size, "]");
}

/* What differs between op ia of pa and op ib of pb, as "; kind a -> b;
 * inputs [...] -> [...]; output 'h' shape ... -> ..." (the leading "; "
 * left for the caller to cut), or "; attributes" when nothing else
 * shows. */
static void op_change(char *buf, size_t size, const plan_program *pa, int ia,
                      const plan_program *pb, int ib) {
  const plan_op *a = &pa->ops[ia], *b = &pb->ops[ib];
  size_t start = strlen(buf);
  if (a->kind != b->kind)
    bput(buf, size, "; kind %s -> %s", plan_op_kind_name(a->kind),
         plan_op_kind_name(b->kind));
  char x[400], y[400];
  names_text(x, sizeof x, pa, a->in, a->nin);
  names_text(y, sizeof y, pb, b->in, b->nin);
  if (strcmp(x, y))
    bput(buf, size, "; inputs %s -> %s", x, y);
  for (int side = 0; side < 2; side++) {
    int n = side ? a->nout : a->nin;
    if (n != (side ? b->nout : b->nin))
      continue;
    for (int j = 0; j < n; j++) {
      const plan_tensor *ta = &pa->tensors[side ? a->out[j] : a->in[j]];
      const plan_tensor *tb = &pb->tensors[side ? b->out[j] : b->in[j]];
      char label[160];
      snprintf(label, sizeof label, "%s '%.60s' ", side ? "output" : "input",
               tb->name);
      tensor_change(buf, size, label, ta, tb);
    }
  }
  if (strlen(buf) == start)
    bput(buf, size, "; attributes");
}

/* The text after "op 'x' changed": its old and new values when the
 * plan's own program still holds the old op or tensor (its signature the
 * recorded one), else what it is now. */
static void change_text(char *buf, size_t size, const plan_plan *p,
                        const sigset *old, int k, const plan_program *edited,
                        int i, bool ops) {
  const plan_program *was = p->program;
  buf[0] = '\0';
  if (was)
    plan_program_sigs(was);
  int w = was ? plan_strmap_get(ops ? &was->op_by_name : &was->tensor_by_name,
                                old->names[k])
              : -1;
  if (w >= 0 && was != edited &&
      (ops ? op_sig(was, w) : tensor_sig(was, w)) == old->sigs[k]) {
    if (ops)
      op_change(buf, size, was, w, edited, i);
    else
      tensor_change(buf, size, "", &was->tensors[w], &edited->tensors[i]);
    if (buf[0]) { /* the leading "; " becomes ": " */
      buf[0] = ':';
      return;
    }
  }
  char sh[160];
  if (ops) {
    const plan_op *o = &edited->ops[i];
    bput(buf, size, " (now %s", plan_op_kind_name(o->kind));
    for (int j = 0; j < o->nout; j++) {
      shape_text(sh, sizeof sh, &edited->tensors[o->out[j]]);
      bput(buf, size, ", output '%.60s' %s", edited->tensors[o->out[j]].name,
           sh);
    }
    bput(buf, size, ")");
  } else {
    const plan_tensor *t = &edited->tensors[i];
    shape_text(sh, sizeof sh, t);
    bput(buf, size, " (now %s %s)", sh, plan_dtype_name(t->dtype));
  }
}

static int drift_kind(plan_diags *d, const plan_plan *p, sigset *old,
                      const plan_program *edited, bool ops) {
  int rc = PLAN_OK;
  const char *pf = p->file, *ef = edited->file;
  plan_pos none = {0, 0};
  plan_program_sigs(edited);
  int n = ops ? edited->nops : edited->ntensors;
  char *seen = calloc((size_t)old->n + 1, 1);
  if (!seen)
    return plan_oom();
  const char *what = ops ? "op" : "tensor";
  for (int i = 0; i < n; i++) {
    const char *name = ops ? edited->ops[i].name : edited->tensors[i].name;
    uint64_t sig = ops ? op_sig(edited, i) : tensor_sig(edited, i);
    plan_pos pos = ops ? edited->ops[i].pos : edited->tensors[i].pos;
    int k = plan_strmap_get(&old->map, name);
    if (k < 0) {
      if (ops && !strategy_glob_covers(p, name))
        ADD(d, &rc, PLAN_SEV_ERROR, "drift.added", name, ef, pos,
            "op '%s' is new in the program and the plan has no strategy for it",
            name);
      else
        ADD(d, &rc, PLAN_SEV_NOTE, "drift.added", name, ef, pos,
            "%s '%s' is new in the program%s", what, name,
            ops ? " (a strategy pattern of the plan covers it)" : "");
      continue;
    }
    seen[k] = 1;
    if (old->sigs[k] != sig) {
      bool named = ops || plan_names_tensor(p, name);
      char change[1024];
      change_text(change, sizeof change, p, old, k, edited, i, ops);
      ADD(d, &rc, named ? PLAN_SEV_ERROR : PLAN_SEV_WARNING, "drift.changed",
          name, ef, pos, "%s '%s' changed%s%s", what, name, change,
          named ? "; the plan decides for it" : "");
    }
  }
  for (int k = 0; k < old->n; k++)
    if (!seen[k])
      ADD(d, &rc, PLAN_SEV_WARNING, "drift.removed", old->names[k], pf, none,
          "%s '%s' is gone from the program; the plan's decisions for it no "
          "longer apply",
          what, old->names[k]);
  free(seen);
  return rc;
}

int plan_drift_into(plan_diags *d, const plan_plan *p,
                    const plan_program *edited) {
  sigset ops, tens;
  int rc;
  const plan_program_ref *r = &p->ref;
  bool recorded = !p->program_inline && (r->nops || r->ntensors);
  memset(&ops, 0, sizeof ops);
  memset(&tens, 0, sizeof tens);
  if (recorded) {
    ops.n = r->nops;
    ops.names = r->op_names;
    ops.sigs = r->op_sigs;
    tens.n = r->ntensors;
    tens.names = r->tensor_names;
    tens.sigs = r->tensor_sigs;
  } else if ((rc = sigset_from_program(&ops, p->program, true)) ||
             (rc = sigset_from_program(&tens, p->program, false))) {
    goto done;
  }
  if ((rc = sigset_index(&ops)) || (rc = sigset_index(&tens)))
    goto done;
  if ((rc = drift_kind(d, p, &ops, edited, true)))
    goto done;
  rc = drift_kind(d, p, &tens, edited, false);
done:
  sigset_free(&ops);
  sigset_free(&tens);
  return rc;
}

int plan_drift(plan_diags **out, const plan_plan *p,
               const plan_program *edited) {
  *out = NULL;
  if (!p || !edited)
    return plan_failf(PLAN_EUSAGE, "plan_drift: NULL argument");
  plan_diags *d;
  int rc = plan_diags_new(&d);
  if (rc)
    return rc;
  if ((rc = plan_drift_into(d, p, edited))) {
    plan_diags_free(d);
    return rc;
  }
  plan_diags_sort(d);
  *out = d;
  return PLAN_OK;
}

/* ---- diff
 * ---------------------------------------------------------------------------
 */

typedef struct dctx {
  plan_diags *d;
  const plan_plan *a, *b;
  int rc;
} dctx;

#define DIFF(c, code, obj, ...)                                                \
  ADD((c)->d, &(c)->rc, PLAN_SEV_NOTE, code, obj, (c)->b->file, nopos,         \
      __VA_ARGS__)

static const plan_pos nopos = {0, 0};

static void diff_program(dctx *c) {
  const plan_program *pa = plan_program_sigs(c->a->program),
                     *pb = plan_program_sigs(c->b->program);
  for (int i = 0; i < pb->nops; i++) {
    int k = plan_strmap_get(&pa->op_by_name, pb->ops[i].name);
    if (k < 0)
      DIFF(c, "diff.op", pb->ops[i].name, "op '%s' added (%s)", pb->ops[i].name,
           plan_op_kind_name(pb->ops[i].kind));
    else if (op_sig(pa, k) != op_sig(pb, i))
      DIFF(c, "diff.op", pb->ops[i].name, "op '%s' changed", pb->ops[i].name);
  }
  for (int i = 0; i < pa->nops; i++)
    if (plan_strmap_get(&pb->op_by_name, pa->ops[i].name) < 0)
      DIFF(c, "diff.op", pa->ops[i].name, "op '%s' removed", pa->ops[i].name);
  for (int i = 0; i < pb->ntensors; i++) {
    int k = plan_strmap_get(&pa->tensor_by_name, pb->tensors[i].name);
    if (k < 0)
      DIFF(c, "diff.tensor", pb->tensors[i].name, "tensor '%s' added",
           pb->tensors[i].name);
    else if (tensor_sig(pa, k) != tensor_sig(pb, i))
      DIFF(c, "diff.tensor", pb->tensors[i].name,
           "tensor '%s' changed (shape, dtype, role or init)",
           pb->tensors[i].name);
  }
  for (int i = 0; i < pa->ntensors; i++)
    if (plan_strmap_get(&pb->tensor_by_name, pa->tensors[i].name) < 0)
      DIFF(c, "diff.tensor", pa->tensors[i].name, "tensor '%s' removed",
           pa->tensors[i].name);
}

static void diff_mesh(dctx *c) {
  const plan_mesh *ma = &c->a->mesh, *mb = &c->b->mesh;
  char sa[256] = "", sb[256] = "";
  size_t ua = 0, ub = 0;
  for (int i = 0; i < ma->naxes && ua < 200; i++)
    ua += (size_t)snprintf(sa + ua, sizeof sa - ua, "%s%s=%lld", i ? "," : "",
                           ma->axis_names[i], (long long)ma->axis_sizes[i]);
  for (int i = 0; i < mb->naxes && ub < 200; i++)
    ub += (size_t)snprintf(sb + ub, sizeof sb - ub, "%s%s=%lld", i ? "," : "",
                           mb->axis_names[i], (long long)mb->axis_sizes[i]);
  if (strcmp(sa, sb)) {
    DIFF(c, "diff.mesh", "mesh", "mesh axes [%s] -> [%s]", sa, sb);
    return;
  }
  bool same_dev = (!ma->devices && !mb->devices) ||
                  (ma->devices && mb->devices &&
                   !memcmp(ma->devices, mb->devices,
                           sizeof(int64_t) * (size_t)ma->ndevices));
  if (!same_dev)
    DIFF(c, "diff.devices", "mesh", "device order differs");
  if (ma->devices_per_host != mb->devices_per_host)
    DIFF(c, "diff.mesh", "mesh", "devices_per_host %lld -> %lld",
         (long long)ma->devices_per_host, (long long)mb->devices_per_host);
  plan_buf ba, bb;
  plan_buf_init(&ba);
  plan_buf_init(&bb);
  int rc = plan_canon_section(&ba, c->a, "mesh");
  if (!rc)
    rc = plan_canon_section(&bb, c->b, "mesh");
  if (rc && !c->rc)
    c->rc = rc;
  bool mesh_differs =
      !rc && (ba.len != bb.len || memcmp(ba.data, bb.data, ba.len));
  plan_buf_free(&ba);
  plan_buf_free(&bb);
  bool said = false;
  /* the format 1.1 parts, each on its own */
  static const char *const parts[] = {"profiles", "topology"};
  for (int k = 0; k < 2 && mesh_differs; k++) {
    plan_buf_init(&ba);
    plan_buf_init(&bb);
    rc = plan_canon_section(&ba, c->a, parts[k]);
    if (!rc)
      rc = plan_canon_section(&bb, c->b, parts[k]);
    if (rc && !c->rc)
      c->rc = rc;
    if (!rc &&
        (ba.len != bb.len || (ba.len && memcmp(ba.data, bb.data, ba.len)))) {
      said = true;
      if (k == 0)
        DIFF(c, "diff.hardware", "mesh", "per-device hardware %s",
             !ba.len   ? "added"
             : !bb.len ? "removed"
                       : "differs");
      else
        DIFF(c, "diff.topology", "mesh", "topology %s",
             !ba.len   ? "added"
             : !bb.len ? "removed"
                       : (ma->topology->kind != mb->topology->kind
                              ? "changes kind (levels / torus)"
                              : "differs"));
    }
    plan_buf_free(&ba);
    plan_buf_free(&bb);
  }
  if (!said && mesh_differs && same_dev &&
      ma->devices_per_host == mb->devices_per_host)
    DIFF(c, "diff.mesh", "mesh", "hardware model or submeshes differ");
}

/* Placements in the canonical compact form, the weights of shard ratios
 * written out from the plan's own sets (set numbers are per-plan
 * interning indices, never compared). */
static void pl_list(const plan_plan *p, const plan_placement *pl, int n,
                    char *buf, size_t sz) {
  size_t u = 0;
  char one[512];
  buf[0] = 0;
  for (int i = 0; i < n && u < sz; i++) {
    plan_placement_format_r(&pl[i], p->mesh.ratios, p->mesh.nratios, one,
                            sizeof one);
    u += (size_t)snprintf(buf + u, sz - u, "%s%s", i ? ", " : "", one);
  }
}

static const plan_ratios *set_of(const plan_plan *p, const plan_axis_pl *e) {
  if (e->kind != PLAN_PL_S || !e->ratio || e->ratio > p->mesh.nratios)
    return NULL;
  return &p->mesh.ratios[e->ratio - 1];
}

/* The weights of a set as "3:1", or "even" for none. */
static void weights_text(char *buf, size_t sz, const plan_ratios *r) {
  buf[0] = 0;
  if (!r) {
    bput(buf, sz, "even");
    return;
  }
  for (int i = 0; i < r->n; i++)
    bput(buf, sz, "%s%lld", i ? ":" : "", (long long)r->w[i]);
}

/* Whether x (of plan a) and y (of plan b) mean the same: the same entries,
 * shard ratios compared by their weights (plan_ratios_same). */
static bool pl_same(const dctx *c, const plan_placement *x,
                    const plan_placement *y) {
  plan_placement u = *x, v = *y;
  for (int i = 0; i < PLAN_MAX_MESH_AXES; i++) {
    const plan_ratios *ra = i < x->naxes ? set_of(c->a, &x->ax[i]) : NULL;
    const plan_ratios *rb = i < y->naxes ? set_of(c->b, &y->ax[i]) : NULL;
    if (!plan_ratios_same(ra, rb))
      return false;
    u.ax[i].ratio = v.ax[i].ratio = 0;
  }
  return plan_placement_equal(&u, &v);
}

static bool pl_list_same(const dctx *c, const plan_placement *x,
                         const plan_placement *y, int n) {
  for (int i = 0; i < n; i++)
    if (!pl_same(c, &x[i], &y[i]))
      return false;
  return true;
}

/* "; shard ratios of WHAT over 'dp': 3:1 -> 1:3" for each entry of x[i]
 * and y[i] (i < n) whose weights alone differ, appended to buf. */
static void ratio_notes(const dctx *c, const plan_placement *x,
                        const plan_placement *y, int n, const char *what,
                        char *buf, size_t sz) {
  for (int i = 0; i < n; i++) {
    plan_placement u = x[i], v = y[i];
    for (int k = 0; k < PLAN_MAX_MESH_AXES; k++)
      u.ax[k].ratio = v.ax[k].ratio = 0;
    if (!plan_placement_equal(&u, &v))
      continue; /* another change: the placements say it */
    for (int k = 0; k < x[i].naxes && k < c->a->mesh.naxes; k++) {
      const plan_ratios *ra = set_of(c->a, &x[i].ax[k]);
      const plan_ratios *rb = set_of(c->b, &y[i].ax[k]);
      if (plan_ratios_same(ra, rb))
        continue;
      char wa[256], wb[256];
      weights_text(wa, sizeof wa, ra);
      weights_text(wb, sizeof wb, rb);
      char idx[32] = "";
      if (n > 1)
        snprintf(idx, sizeof idx, " %d", i);
      bput(buf, sz, "; shard ratios of %s%s over '%s': %s -> %s", what, idx,
           c->a->mesh.axis_names[k], wa, wb);
    }
  }
}

/* One placement of both plans (NULL: not stated, so R), reported with
 * its shard-ratio notes when the two differ. */
static void diff_one_placement(dctx *c, const char *code, const char *what,
                               const char *slot, const char *name,
                               const plan_placement *pa,
                               const plan_placement *pb) {
  plan_placement ra, rb;
  plan_placement_replicated(&ra, c->a->mesh.naxes);
  plan_placement_replicated(&rb, c->b->mesh.naxes);
  const plan_placement *qa = pa ? pa : &ra, *qb = pb ? pb : &rb;
  if (pl_same(c, qa, qb))
    return;
  char x[1024], y[1024], note[1024];
  pl_list(c->a, qa, 1, x, sizeof x);
  pl_list(c->b, qb, 1, y, sizeof y);
  note[0] = 0;
  ratio_notes(c, qa, qb, 1, slot, note, sizeof note);
  DIFF(c, code, name, "%s of '%s': %s -> %s%s", what, name, x, y, note);
}

static void diff_decisions(dctx *c) {
  const plan_program *pa = c->a->program, *pb = c->b->program;
  char x[1024], y[1024], note[1024];
  for (int t = 0; t < pb->ntensors; t++) {
    int k = plan_strmap_get(&pa->tensor_by_name, pb->tensors[t].name);
    if (k < 0)
      continue;
    diff_one_placement(
        c, "diff.placement", "placement", "the placement", pb->tensors[t].name,
        c->a->placements[k].set ? &c->a->placements[k].pl : NULL,
        c->b->placements[t].set ? &c->b->placements[t].pl : NULL);
  }
  for (int i = 0; i < pb->nops; i++) {
    int k = plan_strmap_get(&pa->op_by_name, pb->ops[i].name);
    if (k < 0)
      continue;
    const plan_strategy *sa = &c->a->strategies[k], *sb = &c->b->strategies[i];
    if (!sa->set || !sb->set) {
      if (sa->set != sb->set)
        DIFF(c, "diff.strategy", pb->ops[i].name, "strategy of '%s' %s",
             pb->ops[i].name, sa->set ? "removed" : "added");
      continue;
    }
    if (pa->ops[k].nin != pb->ops[i].nin || pa->ops[k].nout != pb->ops[i].nout)
      continue; /* reported as a changed op */
    if (pl_list_same(c, sa->in, sb->in, pa->ops[k].nin) &&
        pl_list_same(c, sa->out, sb->out, pa->ops[k].nout))
      continue;
    char xo[512], yo[512];
    pl_list(c->a, sa->in, pa->ops[k].nin, x, sizeof x);
    pl_list(c->b, sb->in, pb->ops[i].nin, y, sizeof y);
    pl_list(c->a, sa->out, pa->ops[k].nout, xo, sizeof xo);
    pl_list(c->b, sb->out, pb->ops[i].nout, yo, sizeof yo);
    note[0] = 0;
    ratio_notes(c, sa->in, sb->in, pa->ops[k].nin, "input", note, sizeof note);
    ratio_notes(c, sa->out, sb->out, pa->ops[k].nout, "output", note,
                sizeof note);
    DIFF(c, "diff.strategy", pb->ops[i].name,
         "strategy of '%s': in [%s] out [%s] -> in [%s] out [%s]%s",
         pb->ops[i].name, x, xo, y, yo, note);
  }
  for (int i = 0; i < pb->noutputs; i++)
    for (int k = 0; k < pa->noutputs; k++) {
      if (strcmp(pa->tensors[pa->outputs[k]].name,
                 pb->tensors[pb->outputs[i]].name))
        continue;
      diff_one_placement(c, "diff.output", "output placement", "the output",
                         pb->tensors[pb->outputs[i]].name,
                         c->a->out_pl[k].set ? &c->a->out_pl[k].pl : NULL,
                         c->b->out_pl[i].set ? &c->b->out_pl[i].pl : NULL);
    }
}

static void diff_stages(dctx *c) {
  const plan_pipeline *qa = &c->a->pipeline, *qb = &c->b->pipeline;
  const plan_program *pa = c->a->program, *pb = c->b->program;
  if (qa->present != qb->present) {
    DIFF(c, "diff.pipeline", "pipeline", "pipeline %s",
         qa->present ? "removed" : "added");
    return;
  }
  if (!qa->present)
    return;
  if (qa->nstages != qb->nstages)
    DIFF(c, "diff.pipeline", "pipeline", "%d -> %d stages", qa->nstages,
         qb->nstages);
  if (qa->microbatches != qb->microbatches)
    DIFF(c, "diff.pipeline", "pipeline", "%lld -> %lld microbatches",
         (long long)qa->microbatches, (long long)qb->microbatches);
  if (qa->schedule != qb->schedule)
    DIFF(c, "diff.schedule", "pipeline", "schedule changed");
  for (int i = 0; i < pb->nops; i++) {
    int k = plan_strmap_get(&pa->op_by_name, pb->ops[i].name);
    if (k >= 0 && qa->op_stage[k] != qb->op_stage[i])
      DIFF(c, "diff.stage", pb->ops[i].name,
           "op '%s' moves from stage %d to %d", pb->ops[i].name,
           qa->op_stage[k], qb->op_stage[i]);
  }
}

static void diff_section(dctx *c, const char *which, const char *code) {
  plan_buf ba, bb;
  plan_buf_init(&ba);
  plan_buf_init(&bb);
  int rc = plan_canon_section(&ba, c->a, which);
  if (!rc)
    rc = plan_canon_section(&bb, c->b, which);
  if (rc && !c->rc)
    c->rc = rc;
  if (!rc && (ba.len != bb.len || (ba.len && memcmp(ba.data, bb.data, ba.len))))
    DIFF(c, code, which, "%s settings differ", which);
  plan_buf_free(&ba);
  plan_buf_free(&bb);
}

static const plan_region *region_named(const plan_plan *p, const char *name) {
  for (int i = 0; i < p->nregions; i++)
    if (!strcmp(p->regions[i].name, name))
      return &p->regions[i];
  return NULL;
}

static void patterns_text(char *buf, size_t size, const plan_region *r) {
  buf[0] = '\0';
  bput(buf, size, "[");
  for (int i = 0; i < r->npatterns; i++)
    bput(buf, size, "%s%s", i ? ", " : "", r->patterns[i]);
  bput(buf, size, "]");
}

/* Whether two boundary lists say the same (by tensor name: the programs
 * may differ). */
static bool same_boundaries(const plan_plan *a, const plan_boundary *x, int nx,
                            const plan_plan *b, const plan_boundary *y,
                            int ny) {
  if (nx != ny)
    return false;
  for (int i = 0; i < nx; i++) {
    char px[PLAN_PLACEMENT_STRLEN], py[PLAN_PLACEMENT_STRLEN];
    pl_list(a, &x[i].pl, 1, px, sizeof px);
    pl_list(b, &y[i].pl, 1, py, sizeof py);
    if (strcmp(a->program->tensors[x[i].tensor].name,
               b->program->tensors[y[i].tensor].name) ||
        strcmp(px, py))
      return false;
  }
  return true;
}

/* The regions, by name: added, removed, or what changed in each; the
 * section's text as a whole when they differ only in order. */
static void diff_regions(dctx *c) {
  static const char *const kinds[] = {"pinned", "manual"};
  size_t before = plan_diags_count(c->d);
  for (int i = 0; i < c->b->nregions; i++) {
    const plan_region *rb = &c->b->regions[i];
    const plan_region *ra = region_named(c->a, rb->name);
    if (!ra) {
      DIFF(c, "diff.regions", "regions", "region '%s' added (%s)", rb->name,
           kinds[rb->kind]);
      continue;
    }
    char what[1200] = "", x[400], y[400];
    if (ra->kind != rb->kind)
      bput(what, sizeof what, "; kind %s -> %s", kinds[ra->kind],
           kinds[rb->kind]);
    patterns_text(x, sizeof x, ra);
    patterns_text(y, sizeof y, rb);
    if (strcmp(x, y))
      bput(what, sizeof what, "; ops %s -> %s", x, y);
    if (!same_boundaries(c->a, ra->inputs, ra->ninputs, c->b, rb->inputs,
                         rb->ninputs))
      bput(what, sizeof what, "; inputs");
    if (!same_boundaries(c->a, ra->outputs, ra->noutputs, c->b, rb->outputs,
                         rb->noutputs))
      bput(what, sizeof what, "; outputs");
    if (strcmp(ra->body ? ra->body : "", rb->body ? rb->body : ""))
      bput(what, sizeof what, "; body");
    if (what[0])
      DIFF(c, "diff.regions", "regions", "region '%s' changed:%s", rb->name,
           what + 1);
  }
  for (int i = 0; i < c->a->nregions; i++)
    if (!region_named(c->b, c->a->regions[i].name))
      DIFF(c, "diff.regions", "regions", "region '%s' removed",
           c->a->regions[i].name);
  if (plan_diags_count(c->d) == before)
    diff_section(c, "regions", "diff.regions");
}

int plan_diff(plan_diags **out, const plan_plan *a, const plan_plan *b) {
  *out = NULL;
  if (!a || !b)
    return plan_failf(PLAN_EUSAGE, "plan_diff: NULL argument");
  plan_diags *d;
  int rc = plan_diags_new(&d);
  if (rc)
    return rc;
  dctx c = {d, a, b, 0};
  diff_program(&c);
  if (a->has_mesh != b->has_mesh) {
    DIFF(&c, "diff.mesh", "mesh", "mesh %s", a->has_mesh ? "removed" : "added");
  } else if (a->has_mesh) {
    diff_mesh(&c);
    if (a->mesh.naxes == b->mesh.naxes)
      diff_decisions(&c);
    size_t before = plan_diags_count(d);
    diff_stages(&c);
    /* The rest of the pipeline (axis, submeshes, an explicit grid), only
     * when the stages, microbatches and schedule kind agree: a moved op is
     * reported as that, not also as a changed schedule. */
    if (plan_diags_count(d) == before && a->pipeline.present &&
        b->pipeline.present && a->pipeline.schedule == b->pipeline.schedule)
      diff_section(&c, "pipeline", "diff.schedule");
    diff_section(&c, "training", "diff.training");
    diff_regions(&c);
    diff_section(&c, "overlap", "diff.overlap");
  }
  if (c.rc) {
    plan_diags_free(d);
    return c.rc;
  }
  *out = d;
  return PLAN_OK;
}
