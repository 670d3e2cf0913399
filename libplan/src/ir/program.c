/* Programs: finishing a read program (topological order, roles, shape
 * inference, outputs, signatures), loading standalone program files, and the
 * public read-only views. */
#include <stdlib.h>
#include <string.h>

#include "libplan/program.h"
#include "read/program_read.h"

/* ---- name tables --------------------------------------------------------- */

_Static_assert(PLAN_OP_COUNT <= 48, "plan_program.default_attrs is sized 48");

static const char *const dtype_names[] = {"f64", "f32", "bf16",
                                          "f16", "i64", "i32"};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == PLAN_DTYPE_COUNT,
               "dtype name table");
static const int dtype_sizes[] = {8, 4, 2, 2, 8, 4};
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == PLAN_DTYPE_COUNT,
               "dtype size table");
static const char *const role_names[] = {"input", "param", "const",
                                         "activation", "output"};
_Static_assert(sizeof role_names / sizeof *role_names == PLAN_ROLE_COUNT,
               "role name table");
static const char *const recipe_names[] = {
    "none", "zeros", "ones", "causal_mask", "rope_cos", "rope_sin"};
_Static_assert(sizeof recipe_names / sizeof *recipe_names == PLAN_RECIPE_COUNT,
               "recipe name table");

static int lookup(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], s))
      return i;
  return -1;
}

const char *plan_dtype_name(plan_dtype t) {
  return (unsigned)t < PLAN_DTYPE_COUNT ? dtype_names[t] : "?";
}
const char *plan_role_name(plan_role r) {
  return (unsigned)r < PLAN_ROLE_COUNT ? role_names[r] : "?";
}
const char *plan_recipe_name(plan_recipe r) {
  return (unsigned)r < PLAN_RECIPE_COUNT ? recipe_names[r] : "?";
}
int plan_dtype_from_name(const char *s) {
  if (!s)
    return -1;
  return lookup(dtype_names, PLAN_DTYPE_COUNT, s);
}
int plan_role_from_name(const char *s) {
  return lookup(role_names, PLAN_ROLE_COUNT, s);
}
int plan_recipe_from_name(const char *s) {
  return lookup(recipe_names, PLAN_RECIPE_COUNT, s);
}
bool plan_dtype_is_float(plan_dtype t) {
  return (unsigned)t <= PLAN_F16;
}
int plan_dtype_size(plan_dtype t) {
  return (unsigned)t < PLAN_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

/* ---- construction ----------------------------------------------------------
 */

plan_program *plan_program_new(const char *file) {
  plan_program *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  plan_arena_init(&p->arena);
  plan_strmap_init(&p->tensor_by_name);
  plan_strmap_init(&p->op_by_name);
  p->loss = -1;
  p->file = plan_arena_strdup(&p->arena, file ? file : "");
  if (!p->file) {
    plan_program_free(p);
    return NULL;
  }
  return p;
}

void plan_program_free(plan_program *p) {
  if (!p)
    return;
  free(p->tensors);
  free(p->ops);
  free(p->pending);
  free(p->ops_by_name);
  free(p->tensors_by_name);
  free(p->op_sigs);
  free(p->tensor_sigs);
  plan_strmap_free(&p->tensor_by_name);
  plan_strmap_free(&p->op_by_name);
  plan_arena_free(&p->arena);
  free(p);
}

/* ---- topological order -----------------------------------------------------
 */

/* Min-heap of op indices, so among ready ops the earliest in the file comes
 * first: a file already in topological order keeps its order exactly. */
typedef struct heap {
  int *v;
  int n;
} heap;

static void heap_push(heap *h, int x) {
  int i = h->n++;
  h->v[i] = x;
  while (i > 0 && h->v[(i - 1) / 2] > h->v[i]) {
    int par = (i - 1) / 2, t = h->v[par];
    h->v[par] = h->v[i];
    h->v[i] = t;
    i = par;
  }
}

static int heap_pop(heap *h) {
  int top = h->v[0];
  h->v[0] = h->v[--h->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && h->v[l] < h->v[m])
      m = l;
    if (r < h->n && h->v[r] < h->v[m])
      m = r;
    if (m == i)
      break;
    int t = h->v[m];
    h->v[m] = h->v[i];
    h->v[i] = t;
    i = m;
  }
  return top;
}

/* True when every op comes after the producers of its inputs, the order
 * programs are written and generated in. The smallest-index-first order
 * topo_sort computes is then the order the ops already have. */
static bool in_topo_order(const plan_program *p) {
  for (int i = 0; i < p->nops; i++)
    for (int j = 0; j < p->ops[i].nin; j++)
      if (p->tensors[p->ops[i].in[j]].producer >= i)
        return false;
  return true;
}

static int topo_sort(const plan_reader *rd, plan_program *p) {
  if (in_topo_order(p))
    return PLAN_OK;
  int n = p->nops, rc = PLAN_OK;
  int *indeg = calloc((size_t)n + 1, sizeof(int));
  int *cstart = calloc((size_t)p->ntensors + 2, sizeof(int));
  int *order = malloc(sizeof(int) * ((size_t)n + 1));
  int *heapv = malloc(sizeof(int) * ((size_t)n + 1));
  int *cons = NULL;
  plan_op *sorted = NULL;
  size_t nedges = 0;
  if (!indeg || !cstart || !order || !heapv) {
    rc = plan_oom();
    goto done;
  }
  /* consumers of each tensor in CSR form */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p->ops[i].nin; j++) {
      cstart[p->ops[i].in[j] + 1]++;
      nedges++;
      if (p->tensors[p->ops[i].in[j]].producer >= 0)
        indeg[i]++;
    }
  for (int t = 0; t < p->ntensors; t++)
    cstart[t + 1] += cstart[t];
  cons = malloc(sizeof(int) * (nedges + 1));
  int *fill = calloc((size_t)p->ntensors + 1, sizeof(int));
  if (!cons || !fill) {
    free(fill);
    rc = plan_oom();
    goto done;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p->ops[i].nin; j++) {
      int t = p->ops[i].in[j];
      cons[cstart[t] + fill[t]++] = i;
    }
  free(fill);
  heap h = {heapv, 0};
  for (int i = 0; i < n; i++)
    if (indeg[i] == 0)
      heap_push(&h, i);
  int done_n = 0;
  while (h.n > 0) {
    int i = heap_pop(&h);
    order[done_n++] = i;
    for (int k = 0; k < p->ops[i].nout; k++) {
      int t = p->ops[i].out[k];
      for (int c = cstart[t]; c < cstart[t + 1]; c++)
        if (--indeg[cons[c]] == 0)
          heap_push(&h, cons[c]);
    }
  }
  if (done_n < n) {
    /* Walk producers from a stuck op until an op repeats: that is a cycle. */
    int start = -1;
    for (int i = 0; i < n && start < 0; i++)
      if (indeg[i] > 0)
        start = i;
    int cur = start;
    for (int steps = 0; steps < n; steps++) {
      int next = -1;
      for (int j = 0; j < p->ops[cur].nin && next < 0; j++) {
        int pr = p->tensors[p->ops[cur].in[j]].producer;
        if (pr >= 0 && indeg[pr] > 0)
          next = pr;
      }
      if (next < 0)
        break;
      cur = next;
    }
    plan_op *op = &p->ops[cur];
    rc = plan_fail(PLAN_EINVALID, rd->file, op->pos.line, op->pos.col,
                   "ops form a cycle: op '%s' depends on its own output",
                   op->name);
    goto done;
  }
  sorted = malloc(sizeof(plan_op) * ((size_t)n + 1));
  if (!sorted) {
    rc = plan_oom();
    goto done;
  }
  /* old index -> new index, reusing indeg as scratch */
  for (int k = 0; k < n; k++) {
    sorted[k] = p->ops[order[k]];
    indeg[order[k]] = k;
  }
  for (int t = 0; t < p->ntensors; t++)
    if (p->tensors[t].producer >= 0)
      p->tensors[t].producer = indeg[p->tensors[t].producer];
  for (int k = 0; k < n; k++)
    if (order[k] != k && plan_strmap_put(&p->op_by_name, sorted[k].name, k)) {
      rc = plan_oom(); /* only ops that moved need their index updated */
      goto done;
    }
  free(p->ops);
  p->ops = sorted;
  sorted = NULL;
done:
  free(indeg);
  free(cstart);
  free(order);
  free(heapv);
  free(cons);
  free(sorted);
  return rc;
}

/* ---- shapes
 * ------------------------------------------------------------------ */

/* Rewrites dim attributes to their non-negative form (transpose's absent
 * dims become the last two), so equivalent spellings are one program. */
static int normalize_dim_attrs(plan_program *p, plan_op *op, int rank) {
  const plan_op_info *info = plan_op_info_get(op->kind);
  for (int k = 0; k < info->nattrs; k++) {
    if (!info->attrs[k].is_dim)
      continue;
    if (op->attrs == p->default_attrs[op->kind]) {
      /* shared defaults: give the op its own copy before changing it */
      plan_attr_val *own = plan_arena_alloc(
          &p->arena, sizeof(plan_attr_val) * (size_t)info->nattrs);
      if (!own)
        return plan_oom();
      memcpy(own, op->attrs, sizeof(plan_attr_val) * (size_t)info->nattrs);
      op->attrs = own;
    }
    plan_attr_val *a = &op->attrs[k];
    if (info->attrs[k].type == PLAN_ATTR_INT) {
      if (a->i < 0)
        a->i += rank;
      continue;
    }
    if (a->nints == 0 && op->kind == PLAN_OP_TRANSPOSE && rank >= 2) {
      a->ints = plan_arena_alloc(&p->arena, 2 * sizeof(int64_t));
      if (!a->ints)
        return plan_oom();
      a->ints[0] = rank - 2;
      a->ints[1] = rank - 1;
      a->nints = 2;
      continue;
    }
    for (int i = 0; i < a->nints; i++)
      if (a->ints[i] < 0)
        a->ints[i] += rank;
    /* a swap of two dims is symmetric: [1, 0] is [0, 1] */
    if (op->kind == PLAN_OP_TRANSPOSE && a->nints == 2 &&
        a->ints[0] > a->ints[1]) {
      int64_t t = a->ints[0];
      a->ints[0] = a->ints[1];
      a->ints[1] = t;
    }
  }
  return PLAN_OK;
}

static int infer_shapes(const plan_reader *rd, plan_program *p) {
  plan_shape in[PLAN_MAX_OPERANDS], out[PLAN_MAX_OPERANDS];
  char err[256];
  for (int i = 0; i < p->nops; i++) {
    plan_op *op = &p->ops[i];
    const plan_op_info *info = plan_op_info_get(op->kind);
    for (int j = 0; j < op->nin; j++) {
      const plan_tensor *t = &p->tensors[op->in[j]];
      in[j].rank = t->rank;
      memcpy(in[j].dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
      in[j].dtype = t->dtype;
    }
    memset(out, 0, sizeof out);
    err[0] = 0;
    if (info->infer(in, op->nin, op->attrs, out, op->nout, err, sizeof err))
      return plan_fail(PLAN_EINVALID, rd->file, op->pos.line, op->pos.col,
                       "op '%s' (%s): %s", op->name, info->name, err);
    if (op->nin && normalize_dim_attrs(p, op, in[0].rank))
      return plan_oom();
    for (int k = 0; k < op->nout; k++) {
      plan_tensor *t = &p->tensors[op->out[k]];
      if (t->declared) {
        bool same =
            t->rank == out[k].rank && t->dtype == out[k].dtype &&
            !memcmp(t->dims, out[k].dims, sizeof(int64_t) * (size_t)t->rank);
        if (!same) {
          char a[PLAN_DIMS_STRLEN], b[PLAN_DIMS_STRLEN];
          plan_format_dims(t->dims, t->rank, a);
          plan_format_dims(out[k].dims, out[k].rank, b);
          return plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                           "tensor '%s' is declared %s %s but op '%s' makes "
                           "it %s %s",
                           t->name, plan_dtype_name(t->dtype), a, op->name,
                           plan_dtype_name(out[k].dtype), b);
        }
      } else {
        t->rank = out[k].rank;
        t->dims = plan_arena_alloc_align(
            &p->arena, sizeof(int64_t) * (size_t)(t->rank + 1), 8);
        if (!t->dims)
          return plan_oom();
        memcpy(t->dims, out[k].dims, sizeof(int64_t) * (size_t)t->rank);
        t->dtype = out[k].dtype;
      }
    }
  }
  return PLAN_OK;
}

/* ---- roles, outputs, loss
 * ------------------------------------------------------ */

static int check_recipe(const plan_reader *rd, const plan_tensor *t) {
  if (t->recipe == PLAN_RECIPE_NONE)
    return PLAN_OK;
  if (t->role != PLAN_ROLE_CONST)
    return plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                     "tensor '%s' has an init recipe but role %s (recipes are "
                     "for role: const)",
                     t->name, plan_role_name(t->role));
  if (!plan_dtype_is_float(t->dtype))
    return plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                     "recipe %s needs a float dtype",
                     plan_recipe_name(t->recipe));
  if (t->recipe == PLAN_RECIPE_CAUSAL_MASK && t->rank < 2)
    return plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                     "causal_mask needs rank >= 2 ([.., s, t])");
  if ((t->recipe == PLAN_RECIPE_ROPE_COS ||
       t->recipe == PLAN_RECIPE_ROPE_SIN) &&
      (t->rank != 2 || t->dims[1] % 2 != 0))
    return plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                     "%s needs shape [seq, dim] with an even dim",
                     plan_recipe_name(t->recipe));
  return PLAN_OK;
}

static int decide_roles(const plan_reader *rd, plan_program *p) {
  char *consumed = calloc((size_t)p->ntensors + 1, 1);
  char *is_out = calloc((size_t)p->ntensors + 1, 1);
  int rc = PLAN_OK;
  if (!consumed || !is_out) {
    rc = plan_oom();
    goto done;
  }
  for (int i = 0; i < p->nops; i++)
    for (int j = 0; j < p->ops[i].nin; j++)
      consumed[p->ops[i].in[j]] = 1;
  if (p->outputs_explicit) {
    for (int i = 0; i < p->noutputs; i++)
      is_out[p->outputs[i]] = 1;
  } else {
    /* Default outputs: produced tensors nothing consumes, and tensors
     * declared with role: output. */
    int cnt = 0;
    for (int t = 0; t < p->ntensors; t++)
      if (p->tensors[t].producer >= 0 &&
          (!consumed[t] || p->tensors[t].role == PLAN_ROLE_OUTPUT))
        cnt++;
    p->outputs = plan_arena_alloc(&p->arena, sizeof(int) * (size_t)(cnt + 1));
    if (!p->outputs) {
      rc = plan_oom();
      goto done;
    }
    p->noutputs = 0;
    /* in topological order of their producers */
    for (int i = 0; i < p->nops; i++)
      for (int k = 0; k < p->ops[i].nout; k++) {
        int t = p->ops[i].out[k];
        if (!consumed[t] || p->tensors[t].role == PLAN_ROLE_OUTPUT) {
          p->outputs[p->noutputs++] = t;
          is_out[t] = 1;
        }
      }
  }
  for (int ti = 0; ti < p->ntensors; ti++) {
    plan_tensor *t = &p->tensors[ti];
    if (t->producer < 0) {
      if (t->role == PLAN_ROLE_COUNT)
        t->role = PLAN_ROLE_INPUT;
      if (t->role == PLAN_ROLE_ACTIVATION || t->role == PLAN_ROLE_OUTPUT) {
        rc = plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                       "tensor '%s' has role %s but no op produces it", t->name,
                       plan_role_name(t->role));
        goto done;
      }
    } else {
      if (t->role == PLAN_ROLE_INPUT || t->role == PLAN_ROLE_PARAM ||
          t->role == PLAN_ROLE_CONST) {
        rc = plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                       "tensor '%s' is declared as %s but op '%s' produces it",
                       t->name, plan_role_name(t->role),
                       p->ops[t->producer].name);
        goto done;
      }
      if (t->role == PLAN_ROLE_OUTPUT && !is_out[ti]) {
        rc = plan_fail(PLAN_EINVALID, rd->file, t->pos.line, t->pos.col,
                       "tensor '%s' has role output but is not listed in "
                       "outputs",
                       t->name);
        goto done;
      }
      t->role = is_out[ti] ? PLAN_ROLE_OUTPUT : PLAN_ROLE_ACTIVATION;
    }
    if ((rc = check_recipe(rd, t)))
      goto done;
  }
  for (int i = 0; i < p->noutputs; i++) {
    plan_tensor *t = &p->tensors[p->outputs[i]];
    if (t->producer < 0) {
      rc = plan_fail(PLAN_EINVALID, rd->file, p->outputs_pos.line,
                     p->outputs_pos.col,
                     "output '%s' is a %s, not produced by an op", t->name,
                     plan_role_name(t->role));
      goto done;
    }
  }
  if (p->loss >= 0) {
    plan_tensor *t = &p->tensors[p->loss];
    if (t->producer < 0 || t->rank != 0 || !plan_dtype_is_float(t->dtype)) {
      rc = plan_fail(PLAN_EINVALID, rd->file, p->loss_pos.line, p->loss_pos.col,
                     "loss '%s' must be a scalar (shape []) float tensor "
                     "produced by an op",
                     t->name);
      goto done;
    }
  }
done:
  free(consumed);
  free(is_out);
  return rc;
}

int plan_program_finish(const plan_reader *rd, plan_program *p) {
  int rc;
  if (p->ntensors < p->cap_tensors) { /* give the growth slack back */
    plan_tensor *t =
        realloc(p->tensors, sizeof(plan_tensor) * (size_t)(p->ntensors + 1));
    if (t) {
      p->tensors = t;
      p->cap_tensors = p->ntensors + 1;
    }
  }
  if (p->nops < p->cap_ops) {
    plan_op *o = realloc(p->ops, sizeof(plan_op) * (size_t)(p->nops + 1));
    if (o) {
      p->ops = o;
      p->cap_ops = p->nops + 1;
    }
  }
  if ((rc = topo_sort(rd, p)))
    return rc;
  if ((rc = infer_shapes(rd, p)))
    return rc;
  if ((rc = decide_roles(rd, p)))
    return rc;
  return PLAN_OK;
}

/* ---- documents
 * --------------------------------------------------------------- */

int plan_read_version(plan_reader *rd, const plan_ynode *root) {
  int rc = plan_rd_expect_map(rd, root, "the document");
  if (rc)
    return rc;
  const plan_ynode *v = plan_ymap_get(root, "libplan");
  if (!v)
    return plan_rd_fail(
        rd, root, PLAN_ESCHEMA,
        "not a libplan file: the first key must be 'libplan: \"%s\"'",
        PLAN_FORMAT_STRING);
  if ((rc = plan_rd_expect_scalar(rd, v, "libplan version")))
    return rc;
  const char *t = v->u.scalar.text;
  const char *dot = strchr(t, '.');
  int64_t maj, min;
  if (!dot || !plan_parse_int64(t, (size_t)(dot - t), &maj) ||
      !plan_parse_int64(dot + 1, strlen(dot + 1), &min) || maj < 0 || min < 0 ||
      maj > 1000 || min > 1000)
    return plan_rd_fail(rd, v, PLAN_EVERSION,
                        "format version '%.40s' is not MAJOR.MINOR", t);
  rd->ver_major = (int)maj;
  rd->ver_minor = (int)min;
  rd->ver_pos = plan_rd_pos(v);
  /* major 0 is the pre-release form of 1.0: its last minor is read as it
   * is (the reader keeps its version, so its hashes stay); 0.x minors that
   * were never published are refused, as is every other major */
  if (maj == 0 && min <= PLAN_FORMAT_PRERELEASE_MINOR)
    return PLAN_OK;
  if (maj == 0)
    return plan_rd_fail(
        rd, v, PLAN_EVERSION,
        "format version %d.%d does not exist: the pre-release "
        "formats end with 0.%d, which this reader (format %s) reads",
        (int)maj, (int)min, PLAN_FORMAT_PRERELEASE_MINOR, PLAN_FORMAT_STRING);
  if (maj != PLAN_FORMAT_MAJOR)
    return plan_rd_fail(rd, v, PLAN_EVERSION,
                        "format version %d.%d is not readable by this reader "
                        "(format %s)%s",
                        (int)maj, (int)min, PLAN_FORMAT_STRING,
                        maj < PLAN_FORMAT_MAJOR ? "; run 'plan upgrade'" : "");
  return PLAN_OK;
}

int plan_program_load_buffer(plan_program **out, const char *data, size_t len,
                             const char *name) {
  *out = NULL;
  plan_error_clear();
  plan_ydoc doc;
  int rc = plan_ydoc_parse_buffer(&doc, data, len, name);
  if (rc)
    return rc;
  plan_program *p = plan_program_new(name);
  if (!p) {
    plan_ydoc_free(&doc);
    return plan_oom();
  }
  plan_reader rd = {p->file, 0, 0, &p->arena, {0, 0}};
  static const char *const top_keys[] = {
      "libplan",  "program",  "mesh",    "placements", "strategies", "outputs",
      "pipeline", "training", "regions", "provenance", NULL};
  const plan_ynode *pn;
  if ((rc = plan_read_version(&rd, doc.root)))
    goto fail;
  if ((rc = plan_rd_check_doc_start(&rd, doc.root, top_keys)) ||
      (rc = plan_rd_check_keys(&rd, doc.root, top_keys, "the document", NULL)))
    goto fail;
  if (!(pn = plan_ymap_get(doc.root, "program"))) {
    rc = plan_rd_fail(&rd, doc.root, PLAN_ESCHEMA,
                      "the document has no 'program'");
    goto fail;
  }
  if (pn->kind == PLAN_Y_MAP && plan_ymap_get(pn, "path")) {
    rc = plan_rd_fail(&rd, pn, PLAN_EUNSUPPORTED,
                      "this plan refers to its program by path; load the plan "
                      "instead");
    goto fail;
  }
  if ((rc = plan_program_read(&rd, pn, p)) ||
      (rc = plan_program_finish(&rd, p)))
    goto fail;
  plan_ydoc_free(&doc);
  *out = p;
  return PLAN_OK;
fail:
  plan_ydoc_free(&doc);
  plan_program_free(p);
  return rc;
}

int plan_program_load(plan_program **out, const char *path) {
  *out = NULL;
  /* Read through the plan loader so a plan file's program (inline or by
   * path) is found the same way. */
  plan_plan *pl = NULL;
  int rc = plan_load(&pl, path);
  if (rc)
    return rc;
  *out = plan_take_program(pl);
  plan_free(pl);
  return *out ? PLAN_OK : plan_oom();
}

/* ---- views
 * --------------------------------------------------------------------- */

const char *plan_program_name(const plan_program *p) {
  return p->name;
}
int plan_program_op_count(const plan_program *p) {
  return p->nops;
}
int plan_program_tensor_count(const plan_program *p) {
  return p->ntensors;
}

const char *plan_program_op_name(const plan_program *p, int op) {
  return op >= 0 && op < p->nops ? p->ops[op].name : NULL;
}
const char *plan_program_op_kind(const plan_program *p, int op) {
  return op >= 0 && op < p->nops ? plan_op_kind_name(p->ops[op].kind) : NULL;
}
int plan_program_op_input(const plan_program *p, int op, int slot) {
  if (op < 0 || op >= p->nops || slot < 0 || slot >= p->ops[op].nin)
    return -1;
  return p->ops[op].in[slot];
}
int plan_program_op_output(const plan_program *p, int op, int slot) {
  if (op < 0 || op >= p->nops || slot < 0 || slot >= p->ops[op].nout)
    return -1;
  return p->ops[op].out[slot];
}
int plan_program_op_find(const plan_program *p, const char *name) {
  return plan_strmap_get(&p->op_by_name, name);
}
const char *plan_program_tensor_name(const plan_program *p, int t) {
  return t >= 0 && t < p->ntensors ? p->tensors[t].name : NULL;
}
int plan_program_tensor_find(const plan_program *p, const char *name) {
  return plan_strmap_get(&p->tensor_by_name, name);
}
int plan_program_tensor_shape(const plan_program *p, int t, int64_t *dims,
                              int max) {
  if (t < 0 || t >= p->ntensors)
    return -1;
  const plan_tensor *x = &p->tensors[t];
  if (dims && max >= x->rank)
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  return x->rank;
}
const char *plan_program_tensor_dtype(const plan_program *p, int t) {
  return t >= 0 && t < p->ntensors ? plan_dtype_name(p->tensors[t].dtype)
                                   : NULL;
}
const char *plan_program_tensor_role(const plan_program *p, int t) {
  return t >= 0 && t < p->ntensors ? plan_role_name(p->tensors[t].role) : NULL;
}
const plan_program *plan_program_sigs(const plan_program *p) {
  if (p && !p->sigs_done) {
    plan_program *m = (plan_program *)p; /* a cache, see program_read.h */
    plan_canon_program_sigs(m);
    m->sigs_done = true;
  }
  return p;
}

uint64_t plan_program_op_signature(const plan_program *p, int op) {
  plan_program_sigs(p);
  return op >= 0 && op < p->nops && p->op_sigs ? p->op_sigs[op] : 0;
}
uint64_t plan_program_tensor_signature(const plan_program *p, int t) {
  plan_program_sigs(p);
  return t >= 0 && t < p->ntensors && p->tensor_sigs ? p->tensor_sigs[t] : 0;
}
