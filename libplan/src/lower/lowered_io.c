/* Lowered programs as files (spec/lowered-format.md): writing, reading with
 * checks, and the content hash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "libplan/plan.h"
#include "lower/lower.h"
#include "lower/lowered_check.h"
#include "lower/lowered_io_pipe.h"
#include "ir/placement.h"
#include "read/plan_read.h"
#include "read/program_read.h"
#include "autodiff/autodiff_build.h"
#include "write/emit.h"

static const char *const coll_names[PLAN_REDIST_COUNT] = {
    "all_gather", "all_reduce",     "reduce_scatter", "all_to_all",
    "slice",      "zero_non_owner", "relabel"};
static const char *const reduce_names[PLAN_RED_COUNT] = {"sum", "avg", "max",
                                                         "min"};

/* "x@0": the tensor's name and the buffer's ordinal among its buffers. */
static char **buffer_names(const plan_lowered *l) {
  const plan_program *prog = l->plan->program;
  char **names = calloc((size_t)l->nbufs + 1, sizeof(char *));
  int *seen = calloc((size_t)prog->ntensors + 1, sizeof(int));
  if (!names || !seen) {
    free(names);
    free(seen);
    return NULL;
  }
  for (int b = 0; b < l->nbufs; b++) {
    const char *t = prog->tensors[l->bufs[b].tensor].name;
    size_t n = strlen(t) + 16;
    if (!(names[b] = malloc(n)))
      break;
    snprintf(names[b], n, "%s@%d", t, seen[l->bufs[b].tensor]++);
  }
  free(seen);
  return names;
}

static void free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++)
    free(names[i]);
  free(names);
}

/* quoted: names hold '@' and any characters a tensor name may */
static void qstr(plan_buf *b, const char *s) {
  plan_buf_putc(b, '"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      plan_buf_putc(b, '\\');
    plan_buf_putc(b, *s);
  }
  plan_buf_putc(b, '"');
}

/* The layouts map, in the order of the buffers it names (the order the
 * buffers are written in), not of the program's tensors: a training
 * program read back from the file numbers its tensors differently from
 * the one autodiff built, and the text (so the hash) must not change. A
 * counting sort by buffer index, stable for tensors sharing a buffer. */
static int write_layouts(plan_buf *b, const plan_lowered *l,
                         const char *const *names) {
  const plan_program *prog = l->plan->program;
  int *start = calloc((size_t)l->nbufs + 1, sizeof *start);
  int *order = malloc(((size_t)prog->ntensors + 1) * sizeof *order);
  if (!start || !order) {
    free(start);
    free(order);
    return -1;
  }
  int n = 0;
  for (int t = 0; t < prog->ntensors; t++)
    if (l->produced[t] >= 0) {
      start[l->produced[t] + 1]++;
      n++;
    }
  for (int k = 0; k < l->nbufs; k++)
    start[k + 1] += start[k];
  for (int t = 0; t < prog->ntensors; t++)
    if (l->produced[t] >= 0)
      order[start[l->produced[t]]++] = t;
  for (int i = 0; i < n; i++) {
    int t = order[i];
    plan_buf_puts(b, i ? ", " : "layouts: {");
    qstr(b, prog->tensors[t].name);
    plan_buf_puts(b, ": ");
    qstr(b, names[l->produced[t]]);
  }
  plan_buf_puts(b, n ? "}\n" : "layouts: {}\n");
  free(start);
  free(order);
  return 0;
}

/* A placement in its canonical compact form, the weights of its shard
 * ratios written out (S(0|3:1)R) from the plan's sets, quoted. */
static void put_pl(plan_buf *b, const plan_lowered *l,
                   const plan_placement *pl) {
  const plan_mesh *m = &l->plan->mesh;
  plan_buf_putc(b, '"');
  plan_placement_put(b, pl, m->ratios, m->nratios);
  plan_buf_putc(b, '"');
}

/* The version a lowered program is written and hashed as: the lowest
 * that holds its plan's content (a plan that gained shard ratios in memory
 * is 1.1 whatever its file said), and 1.1 when a buffer or a required
 * placement is cut by shard ratios: read back, the plan has no decisions
 * left to say so. */
static void lowered_format(const plan_lowered *l, int *vmaj, int *vmin) {
  plan_plan_format(l->ref_plan ? l->ref_plan : l->plan, vmaj, vmin);
  if (*vmaj != 1 || *vmin >= 1)
    return;
  bool ratios = plan_lpipe_needs_1_1(l);
  for (int i = 0; i < l->nbufs && !ratios; i++)
    ratios = plan_placement_has_ratios(&l->bufs[i].pl);
  for (int i = 0; l->required && !ratios && i < l->plan->program->noutputs; i++)
    ratios = plan_placement_has_ratios(&l->required[i]);
  /* streams, waits and chunks (communication overlap) are 1.1's too */
  for (int i = 0; !ratios && i < l->nsteps; i++)
    ratios = l->steps[i].stream > 0 || l->steps[i].chunk_of > 0 ||
             l->steps[i].kind == PLAN_LSTEP_WAIT;
  if (ratios)
    *vmin = 1;
}

/* The placement each output is required in: `"y": "S(0)R"`, a gradient
 * `"grad/w": {placement: "RS(1)", gradient_of: "w"}`; nothing for a file
 * that stated none. */
static void write_required(plan_buf *b, const plan_lowered *l) {
  const plan_program *prog = l->plan->program;
  if (!l->required || !prog->noutputs)
    return;
  plan_buf_puts(b, "required: {");
  for (int k = 0; k < prog->noutputs; k++) {
    if (k)
      plan_buf_puts(b, ", ");
    qstr(b, prog->tensors[prog->outputs[k]].name);
    if (l->grad_of[k] < 0) {
      plan_buf_puts(b, ": ");
      put_pl(b, l, &l->required[k]);
      continue;
    }
    plan_buf_puts(b, ": {placement: ");
    put_pl(b, l, &l->required[k]);
    plan_buf_puts(b, ", gradient_of: ");
    qstr(b, prog->tensors[l->grad_of[k]].name);
    plan_buf_putc(b, '}');
  }
  plan_buf_puts(b, "}\n");
}

/* `groups` of a step whose groups have member orders of their own: the
 * groups in the order of their members with coordinate 0 on the axis
 * (ascending rank), each in its member order. */
static void write_groups(plan_buf *b, const plan_mesh *m, const plan_lstep *s) {
  int a = s->redist.axis;
  int64_t k = m->axis_sizes[a], nranks = 1, stride = 1;
  for (int x = 0; x < m->naxes; x++)
    nranks *= m->axis_sizes[x];
  for (int x = a + 1; x < m->naxes; x++)
    stride *= m->axis_sizes[x];
  plan_buf_puts(b, ", groups: [");
  bool first = true;
  for (int64_t q = 0; q < nranks; q++) {
    if (q / stride % k)
      continue;
    plan_buf_puts(b, first ? "[" : ", [");
    first = false;
    for (int64_t i = 0; i < k; i++)
      plan_buf_printf(b, "%s%lld", i ? ", " : "",
                      (long long)(q + s->rank_order[q * k + i] * stride));
    plan_buf_putc(b, ']');
  }
  plan_buf_putc(b, ']');
}

plan_hash plan_lowered_body_hash(const char *body) {
  XXH128_hash_t h = XXH3_128bits(body, strlen(body));
  plan_hash out = {h.high64, h.low64};
  return out;
}

/* The manual regions: each one's name, body hash, the program ops it
 * replaces and its traced ops, in program op form. */
static void write_regions(plan_buf *b, const plan_lowered *l) {
  const plan_program *prog = l->plan->program;
  if (!l->nregions)
    return;
  plan_buf_puts(b, "regions:\n");
  for (int r = 0; r < l->nregions; r++) {
    const plan_lregion *lr = &l->regions[r];
    char hb[PLAN_HASH_STRLEN];
    plan_hash_format(lr->body_hash, hb);
    plan_buf_puts(b, "  - name: ");
    qstr(b, lr->name);
    plan_buf_printf(b, "\n    body_hash: \"%s\"\n    replaces: [", hb);
    for (int i = 0; i < lr->nreplaces; i++) {
      if (i)
        plan_buf_puts(b, ", ");
      qstr(b, prog->ops[lr->replaces[i]].name);
    }
    plan_buf_puts(b, lr->op_end > lr->op_begin ? "]\n    ops:\n"
                                               : "]\n    ops: []\n");
    for (int i = lr->op_begin; i < lr->op_end; i++) {
      plan_buf_puts(b, "      - ");
      plan_w_op(b, prog, i);
      plan_buf_putc(b, '\n');
    }
  }
}

int plan_lowered_write(char **out, size_t *len, const plan_lowered *l) {
  if (!out || !l) {
    if (out)
      *out = NULL;
    return plan_failf(PLAN_EUSAGE, "plan_lowered_write: NULL argument");
  }
  *out = NULL;
  const plan_plan *p = l->plan;
  const plan_program *prog = p->program;
  char **names = buffer_names(l);
  if (!names)
    return plan_oom();
  plan_buf b;
  plan_buf_init(&b);
  int vmaj, vmin;
  lowered_format(l, &vmaj, &vmin);
  plan_buf_printf(&b, "libplan-lowered: \"%d.%d\"\n", vmaj, vmin);
  plan_write_program_and_mesh(&b, l->ref_plan ? l->ref_plan : p, false);
  write_regions(&b, l);
  if (l->pipe && plan_lpipe_write_section(&b, l)) {
    free_names(names, l->nbufs);
    plan_buf_free(&b);
    return plan_error_last()->code;
  }
  plan_buf_puts(&b, l->nbufs ? "buffers:\n" : "buffers: {}\n");
  for (int i = 0; i < l->nbufs; i++) {
    plan_buf_puts(&b, "  ");
    qstr(&b, names[i]);
    plan_buf_puts(&b, ": {tensor: ");
    qstr(&b, prog->tensors[l->bufs[i].tensor].name);
    plan_buf_puts(&b, ", placement: ");
    put_pl(&b, l, &l->bufs[i].pl);
    plan_buf_puts(&b, "}\n");
  }
  plan_buf_puts(&b, l->nsteps ? "steps:\n" : "steps: []\n");
  for (int i = 0; i < l->nsteps; i++) {
    const plan_lstep *s = &l->steps[i];
    if (s->kind == PLAN_LSTEP_INPUT) {
      plan_buf_puts(&b, "  - {input: ");
      qstr(&b, names[s->out[0]]);
    } else if (s->kind == PLAN_LSTEP_WAIT) {
      plan_buf_puts(&b, "  - {wait: ");
      qstr(&b, names[s->in[0]]);
      plan_buf_printf(&b, ", stream: %d", s->stream);
    } else if (s->kind == PLAN_LSTEP_OP) {
      plan_buf_puts(&b, "  - {op: ");
      qstr(&b, prog->ops[s->op].name);
      plan_buf_puts(&b, ", in: [");
      for (int j = 0; j < s->nin; j++) {
        if (j)
          plan_buf_puts(&b, ", ");
        qstr(&b, names[s->in[j]]);
      }
      plan_buf_puts(&b, "], out: [");
      for (int j = 0; j < s->nout; j++) {
        if (j)
          plan_buf_puts(&b, ", ");
        qstr(&b, names[s->out[j]]);
      }
      plan_buf_putc(&b, ']');
    } else if (s->kind == PLAN_LSTEP_TRANSFER) {
      plan_buf_puts(&b, "  - {transfer: ");
      qstr(&b, names[s->out[0]]);
      plan_buf_puts(&b, ", from: ");
      qstr(&b, names[s->in[0]]);
    } else if (l->bufs[s->in[0]].tensor != l->bufs[s->out[0]].tensor) {
      /* a manual region's output takes its traced value */
      plan_buf_puts(&b, "  - {bind: ");
      qstr(&b, names[s->out[0]]);
      plan_buf_puts(&b, ", from: ");
      qstr(&b, names[s->in[0]]);
    } else {
      const plan_redist_step *r = &s->redist;
      plan_buf_printf(&b, "  - {collective: %s", coll_names[r->kind]);
      if (s->rank_order)
        write_groups(&b, &p->mesh, s);
      else
        plan_buf_printf(&b, ", axis: %s", p->mesh.axis_names[r->axis]);
      if (r->kind == PLAN_REDIST_ALL_REDUCE ||
          r->kind == PLAN_REDIST_REDUCE_SCATTER ||
          r->kind == PLAN_REDIST_RELABEL)
        plan_buf_printf(&b, ", reduce: %s", reduce_names[r->reduce]);
      if (r->kind == PLAN_REDIST_ALL_GATHER ||
          r->kind == PLAN_REDIST_REDUCE_SCATTER ||
          r->kind == PLAN_REDIST_SLICE || r->kind == PLAN_REDIST_ALL_TO_ALL)
        plan_buf_printf(&b, ", dim: %d", r->dim);
      if (r->kind == PLAN_REDIST_ALL_TO_ALL)
        plan_buf_printf(&b, ", to_dim: %d", r->to_dim);
      if (s->group_order) {
        plan_buf_puts(&b, ", order: [");
        for (int64_t m = 0; m < p->mesh.axis_sizes[r->axis]; m++)
          plan_buf_printf(&b, "%s%lld", m ? ", " : "",
                          (long long)s->group_order[m]);
        plan_buf_putc(&b, ']');
      }
      plan_buf_puts(&b, ", in: ");
      qstr(&b, names[s->in[0]]);
      plan_buf_puts(&b, ", out: ");
      qstr(&b, names[s->out[0]]);
      if (s->stream)
        plan_buf_printf(&b, ", stream: %d", s->stream);
      if (s->chunk_of)
        plan_buf_printf(&b,
                        ", chunk: {dim: %d, index: %lld, of: %lld, at: %lld}",
                        s->chunk_dim, (long long)s->chunk_index,
                        (long long)s->chunk_of, (long long)s->chunk_at);
    }
    if (l->pipe)
      plan_lpipe_write_step_fields(&b, l, i);
    plan_buf_puts(&b, "}\n");
  }
  if (write_layouts(&b, l, (const char *const *)names)) {
    free_names(names, l->nbufs);
    plan_buf_free(&b);
    return plan_oom();
  }
  plan_buf_puts(&b, prog->noutputs ? "outputs: {" : "outputs: {}\n");
  for (int k = 0; k < prog->noutputs; k++) {
    if (k)
      plan_buf_puts(&b, ", ");
    qstr(&b, prog->tensors[prog->outputs[k]].name);
    plan_buf_puts(&b, ": ");
    qstr(&b, names[l->delivered[k]]);
  }
  if (prog->noutputs)
    plan_buf_puts(&b, "}\n");
  write_required(&b, l);
  free_names(names, l->nbufs);
  return plan_buf_take(&b, out, len);
}

int plan_lowered_save(const plan_lowered *l, const char *path) {
  if (!l || !path)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_save: NULL argument");
  const plan_plan *p = l->ref_plan ? l->ref_plan : l->plan;
  char *text = NULL, *rebased = NULL;
  size_t len;
  /* as plan_save does: the program path from the new file's folder */
  if (!p->program_inline && p->program && p->program->file &&
      p->program->file[0] &&
      !(rebased = plan_path_from(path, p->program->file)))
    return plan_failf(PLAN_EIO,
                      "%s: cannot write the program's path (%s) "
                      "relative to it: is its folder there?",
                      path, p->program->file);
  int rc;
  if (rebased) {
    plan_plan moved = *p;
    plan_lowered lm = *l;
    moved.ref.path = rebased;
    if (l->ref_plan)
      lm.ref_plan = &moved;
    else
      lm.plan = &moved;
    rc = plan_lowered_write(&text, &len, &lm);
  } else {
    rc = plan_lowered_write(&text, &len, l);
  }
  free(rebased);
  if (!rc)
    rc = plan_write_file_atomic(path, text, len);
  plan_buffer_free(text);
  return rc;
}

/* ---- hash
 * -------------------------------------------------------------------- */

/* The canonical encoding follows the written form's meaning: buffers by
 * name, steps in order, placements canonical (spec/lowered-format.md). The
 * YAML writer's text is canonical already (fixed order, no defaults), so
 * the hash covers the program's hash, the mesh's canonical encoding and the
 * written buffers, steps, layouts and outputs. */
int plan_lowered_hash(plan_hash *out, const plan_lowered *l) {
  if (!out || !l)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_hash: NULL argument");
  plan_hash ph;
  int rc =
      plan_program_hash(&ph, (l->ref_plan ? l->ref_plan : l->plan)->program);
  if (rc)
    return rc;
  char *text, *mesh;
  size_t len, mlen;
  if ((rc = plan_lowered_write(&text, &len, l)))
    return rc;
  if ((rc = plan_canonical(&mesh, &mlen, l->ref_plan ? l->ref_plan : l->plan,
                           PLAN_PART_MESH))) {
    free(text);
    return rc;
  }
  /* skip the program section of the text: it is covered by its hash */
  const char *from = strstr(text, l->nregions ? "\nregions:"
                                  : l->pipe   ? "\npipeline:"
                                              : "\nbuffers:");
  XXH3_state_t *hs = XXH3_createState();
  if (!hs || !from) {
    XXH3_freeState(hs);
    free(text);
    free(mesh);
    return plan_oom();
  }
  char hb[PLAN_HASH_STRLEN];
  plan_hash_format(ph, hb);
  XXH3_128bits_reset(hs);
  XXH3_128bits_update(hs, "libplan-lowered 0.1\n", 20);
  XXH3_128bits_update(hs, hb, strlen(hb));
  XXH3_128bits_update(hs, mesh, mlen);
  XXH3_128bits_update(hs, from, strlen(from));
  XXH128_hash_t h = XXH3_128bits_digest(hs);
  out->high = h.high64;
  out->low = h.low64;
  XXH3_freeState(hs);
  free(text);
  free(mesh);
  return PLAN_OK;
}

/* ---- reading
 * ----------------------------------------------------------------- */

static const char *const lowered_keys[] = {
    "libplan-lowered", "program", "mesh",    "regions",  "pipeline", "buffers",
    "steps",           "layouts", "outputs", "required", NULL};

int plan_is_lowered_text(const char *data, size_t len) {
  if (!data)
    return 0;
  /* the first key, after comments and blank lines */
  size_t i = 0;
  while (i < len) {
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r'))
      i++;
    if (i < len && (data[i] == '#' || data[i] == '\n')) {
      while (i < len && data[i] != '\n')
        i++;
      i++;
      continue;
    }
    break;
  }
  static const char key[] = "libplan-lowered";
  return len - (i < len ? i : len) >= sizeof key - 1 &&
         !memcmp(data + i, key, sizeof key - 1);
}

typedef struct lreader {
  plan_reader rd;
  plan_lowered *l;
  plan_strmap byname;  /* buffer name -> index in file order */
  int *written;        /* per file buffer: the step that writes it, -1 */
  plan_ynode **bnodes; /* per file buffer: its key node (positions) */
  /* per file buffer written by chunked steps: their count of chunks (0:
   * none), and which slices (at) they wrote so far (arena) */
  int64_t *chunk_of, *chunk_done;
  uint8_t **chunk_seen;
} lreader;

/* A placement of the file: shard ratios are interned into the sets of the
 * program's own mesh (the plan the reader made, which the lowered program
 * owns), and need a file of format 1.1. */
static int read_pl(lreader *r, const plan_ynode *n, int rank,
                   plan_placement *out) {
  plan_plan *p = r->l->own_ref ? r->l->own_ref : r->l->own_plan;
  plan_reader rd = r->rd;
  rd.ver_major = p->version_major;
  rd.ver_minor = p->version_minor;
  rd.arena = &p->arena;
  int rc = plan_read_placement_in(&rd, n, &p->mesh, rank, out);
  if (r->l->own_ref) /* a new ratio set: the steps' plan shares the mesh */
    r->l->own_plan->mesh = p->mesh;
  return rc;
}

/* For messages: the weights written out, as the file spells them. */
static const char *fmt_pl(const plan_lowered *l, const plan_placement *pl,
                          char *buf) {
  const plan_mesh *m = &l->plan->mesh;
  plan_placement_format_r(pl, m->ratios, m->nratios, buf,
                          PLAN_PLACEMENT_STRLEN);
  return buf;
}

static int buf_ref(lreader *r, const plan_ynode *n, int *out) {
  int rc = plan_rd_expect_scalar(&r->rd, n, "a buffer name");
  if (rc)
    return rc;
  *out = plan_strmap_get(&r->byname, n->u.scalar.text);
  if (*out < 0)
    return plan_rd_fail(&r->rd, n, PLAN_EINVALID,
                        "no buffer '%.60s' in buffers", n->u.scalar.text);
  return PLAN_OK;
}

/* A step `{KEY: OUT, from: IN}` (a transfer, a bind): its only keys, and
 * the two buffers it names. */
static int read_from_step(lreader *r, const plan_ynode *n, const plan_ynode *v,
                          const char *key, int *in, int *out) {
  const char *const k[] = {key, "from", NULL};
  char what[32];
  snprintf(what, sizeof what, "a %s step", key);
  int rc = plan_rd_check_keys(&r->rd, n, k, what, NULL);
  if (rc)
    return rc;
  const plan_ynode *fn = plan_ymap_get(n, "from");
  if (!fn)
    return plan_rd_fail(&r->rd, n, PLAN_ESCHEMA, "%s needs 'from'", what);
  if ((rc = buf_ref(r, v, out)))
    return rc;
  return buf_ref(r, fn, in);
}

static int read_buffers(lreader *r, const plan_ynode *n) {
  plan_lowered *l = r->l;
  const plan_plan *p = l->plan;
  int rc = plan_rd_expect_map(&r->rd, n, "buffers");
  if (rc)
    return rc;
  l->nbufs = l->cap_bufs = (int)n->u.map.count;
  l->bufs = calloc((size_t)l->nbufs + 1, sizeof(plan_lbuf));
  r->written = malloc(sizeof(int) * ((size_t)l->nbufs + 1));
  r->bnodes = calloc((size_t)l->nbufs + 1, sizeof(plan_ynode *));
  r->chunk_of = calloc((size_t)l->nbufs + 1, sizeof(int64_t));
  r->chunk_done = calloc((size_t)l->nbufs + 1, sizeof(int64_t));
  r->chunk_seen = calloc((size_t)l->nbufs + 1, sizeof(uint8_t *));
  if (!r->chunk_of || !r->chunk_done || !r->chunk_seen)
    return plan_oom();
  if (!l->bufs || !r->written || !r->bnodes)
    return plan_oom();
  static const char *const bkeys[] = {"tensor", "placement", NULL};
  for (int i = 0; i < l->nbufs; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
    r->written[i] = -1;
    r->bnodes[i] = (plan_ynode *)k;
    if (plan_strmap_put(&r->byname, k->u.scalar.text, i))
      return plan_oom();
    if ((rc = plan_rd_expect_map(&r->rd, v, "a buffer")) ||
        (rc = plan_rd_check_keys(&r->rd, v, bkeys, "a buffer", NULL)))
      return rc;
    const plan_ynode *tn = plan_ymap_get(v, "tensor"),
                     *pn = plan_ymap_get(v, "placement");
    if (!tn || !pn)
      return plan_rd_fail(&r->rd, v, PLAN_ESCHEMA,
                          "a buffer needs a 'tensor' and a 'placement'");
    if ((rc = plan_rd_expect_scalar(&r->rd, tn, "tensor")))
      return rc;
    int t = plan_strmap_get(&p->program->tensor_by_name, tn->u.scalar.text);
    if (t < 0)
      return plan_rd_fail(&r->rd, tn, PLAN_EINVALID,
                          "the program has no tensor '%.60s'",
                          tn->u.scalar.text);
    l->bufs[i].tensor = t;
    if ((rc = read_pl(r, pn, p->program->tensors[t].rank, &l->bufs[i].pl)))
      return rc;
  }
  return PLAN_OK;
}

static int enum_of(const plan_reader *rd, const plan_ynode *n, const char *what,
                   const char *const *names, int count, int *out) {
  return plan_rd_enum(rd, n, what, names, count, out);
}

/* A group order needs even pieces (the dim splits evenly over every axis
 * sharding it, in the buffer where the axis shards it), so that a block
 * fits any position. */
static int even_pieces(lreader *r, const plan_ynode *x, const plan_lstep *s,
                       int in_buf, int out_buf, const char *what) {
  plan_lowered *l = r->l;
  const plan_mesh *m = &l->plan->mesh;
  const plan_redist_step *st = &s->redist;
  /* the buffer in which the axis shards the dim: a reduce_scatter's out */
  const plan_lbuf *b = &l->bufs[in_buf];
  if (st->kind == PLAN_REDIST_REDUCE_SCATTER)
    b = &l->bufs[out_buf];
  const plan_tensor *t = &l->plan->program->tensors[b->tensor];
  int64_t split = 1;
  for (int a = 0; a < m->naxes; a++)
    if (b->pl.ax[a].kind == PLAN_PL_S && b->pl.ax[a].dim == st->dim) {
      split *= m->axis_sizes[a];
      if (b->pl.ax[a].ratio)
        return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                            "%s needs even pieces: dim %d of '%s' is cut "
                            "by shard ratios over '%s'",
                            what, st->dim, t->name, m->axis_names[a]);
    }
  if (t->dims[st->dim] % split)
    return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                        "%s needs even pieces: dim %d of '%s' (%lld) does "
                        "not split evenly %lld ways",
                        what, st->dim, t->name, (long long)t->dims[st->dim],
                        (long long)split);
  return PLAN_OK;
}

/* `order` of an all_gather, reduce_scatter or all_to_all: a permutation
 * of the axis's coordinates (spec/lowered-format.md): the gathered piece
 * at position i is member order[i]'s (all_gather, all_to_all along
 * `dim`), or member order[i] keeps piece i (reduce_scatter). Pieces must
 * be the same size (the dim splits evenly over every axis sharding it, in
 * the buffer where the axis shards it), so that a block fits any
 * position. */
static int read_group_order(lreader *r, const plan_ynode *x, plan_lstep *s,
                            int in_buf, int out_buf) {
  plan_lowered *l = r->l;
  const plan_mesh *m = &l->plan->mesh;
  const plan_redist_step *st = &s->redist;
  int64_t k = m->axis_sizes[st->axis], *ord;
  int cnt, rc;
  if (st->kind != PLAN_REDIST_ALL_GATHER &&
      st->kind != PLAN_REDIST_REDUCE_SCATTER &&
      st->kind != PLAN_REDIST_ALL_TO_ALL)
    return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                        "'order' is for an all_gather, reduce_scatter or "
                        "all_to_all only");
  if (k > 64)
    return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                        "'order' is for axes of up to 64 ranks; '%s' has %lld",
                        m->axis_names[st->axis], (long long)k);
  if ((rc = plan_rd_int_list(&r->rd, x, "order", &ord, &cnt, 64)))
    return rc;
  if (cnt != k)
    return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                        "'order' has %d coordinates; axis '%s' has %lld", cnt,
                        m->axis_names[st->axis], (long long)k);
  s->group_order = plan_arena_alloc(&l->arena, sizeof(int64_t) * (size_t)k);
  if (!s->group_order)
    return plan_oom();
  uint64_t seen = 0;
  for (int64_t i = 0; i < k; i++) {
    if (ord[i] < 0 || ord[i] >= k || (seen >> ord[i] & 1))
      return plan_rd_fail(&r->rd, x, PLAN_EINVALID,
                          "'order' must be a permutation of 0..%lld",
                          (long long)k - 1);
    seen |= 1ull << ord[i];
    s->group_order[i] = ord[i];
  }
  return even_pieces(r, x, s, in_buf, out_buf, "'order'");
}

/* `groups` of a collective: every rank of the mesh in exactly one group,
 * the groups of equal size, each the ranks that differ only on one mesh
 * axis (which the step then runs along), in the member order of the
 * collective. rows gets, for every rank r, the coordinates on that axis
 * of the members of r's group, in member order (arena). */
static int read_groups(lreader *r, const plan_ynode *gn, plan_lstep *s,
                       int64_t **rows) {
  plan_lowered *l = r->l;
  const plan_mesh *m = &l->plan->mesh;
  plan_reader *rd = &r->rd;
  int rc = plan_rd_expect_seq(rd, gn, "groups");
  if (rc)
    return rc;
  int64_t nranks = 1;
  for (int a = 0; a < m->naxes; a++)
    nranks *= m->axis_sizes[a];
  size_t ng = gn->u.seq.count;
  if (!ng)
    return plan_rd_fail(rd, gn, PLAN_EINVALID,
                        "groups: every rank of the mesh (%lld) must be in a "
                        "group",
                        (long long)nranks);
  const plan_ynode *g0 = gn->u.seq.items[0];
  if ((rc = plan_rd_expect_seq(rd, g0, "a group")))
    return rc;
  int64_t k = (int64_t)g0->u.seq.count;
  int64_t *rank = plan_arena_alloc(&l->arena, sizeof(int64_t) * (size_t)nranks);
  int64_t *group =
      plan_arena_alloc(&l->arena, sizeof(int64_t) * (size_t)nranks);
  if (!rank || !group)
    return plan_oom();
  for (int64_t q = 0; q < nranks; q++)
    group[q] = -1;
  for (size_t g = 0; g < ng; g++) {
    const plan_ynode *gi = gn->u.seq.items[g];
    if ((rc = plan_rd_expect_seq(rd, gi, "a group")))
      return rc;
    if ((int64_t)gi->u.seq.count != k)
      return plan_rd_fail(rd, gi, PLAN_EINVALID,
                          "groups: group %zu has %zu rank%s, group 0 has "
                          "%lld: a collective's groups are of equal size",
                          g, gi->u.seq.count, gi->u.seq.count == 1 ? "" : "s",
                          (long long)k);
    for (int64_t i = 0; i < k; i++) {
      const plan_ynode *x = gi->u.seq.items[i];
      int64_t q;
      if ((rc = plan_rd_int(rd, x, "a rank", &q)))
        return rc;
      if (q < 0 || q >= nranks)
        return plan_rd_fail(rd, x, PLAN_EINVALID,
                            "groups: rank %lld is not in the mesh (ranks "
                            "0..%lld)",
                            (long long)q, (long long)nranks - 1);
      if (group[q] >= 0)
        return plan_rd_fail(rd, x, PLAN_EINVALID,
                            "groups: rank %lld is in group %lld already (a "
                            "rank is in exactly one group)",
                            (long long)q, (long long)group[q]);
      group[q] = (int64_t)g;
      rank[g * (size_t)k + (size_t)i] = q;
    }
  }
  for (int64_t q = 0; q < nranks; q++)
    if (group[q] < 0)
      return plan_rd_fail(rd, gn, PLAN_EINVALID,
                          "groups: rank %lld is in no group (each of the "
                          "mesh's %lld ranks is in exactly one)",
                          (long long)q, (long long)nranks);
  /* the axis: members differ on it alone (mesh ranks are row-major, the
   * last axis fastest) */
  int axis = -1;
  for (int a = 0; a < m->naxes && axis < 0; a++) {
    if (m->axis_sizes[a] != k)
      continue;
    int64_t stride = 1;
    for (int b = a + 1; b < m->naxes; b++)
      stride *= m->axis_sizes[b];
    bool fits = true;
    for (size_t g = 0; g < ng && fits; g++) {
      int64_t q0 = rank[g * (size_t)k];
      int64_t base = q0 - (q0 / stride % k) * stride; /* coordinate 0 on a */
      for (int64_t i = 0; i < k && fits; i++) {
        int64_t q = rank[g * (size_t)k + (size_t)i];
        fits = q - (q / stride % k) * stride == base;
      }
    }
    if (fits)
      axis = a;
  }
  if (axis < 0)
    return plan_rd_fail(rd, gn, PLAN_EINVALID,
                        "groups: these are not the groups of one mesh axis "
                        "(each group the ranks that differ only on it); a "
                        "sub-group of an axis needs a mesh that has it as an "
                        "axis of its own (dp=4 as dp=2, dq=2)");
  s->redist.axis = axis;
  int64_t stride = 1;
  for (int b = axis + 1; b < m->naxes; b++)
    stride *= m->axis_sizes[b];
  int64_t *row =
      plan_arena_alloc(&l->arena, sizeof(int64_t) * (size_t)(nranks * k + 1));
  if (!row)
    return plan_oom();
  for (int64_t q = 0; q < nranks; q++)
    for (int64_t i = 0; i < k; i++)
      row[q * k + i] = rank[group[q] * k + i] / stride % k;
  *rows = row;
  return PLAN_OK;
}

/* The member orders `groups` gave, once the step is read: none when every
 * group is in coordinate order or the kind's meaning does not depend on
 * it (all_reduce, relabel, slice: the reduction runs in coordinate order,
 * a slice's pieces are its placement's); one order for the step when every
 * group has the same (as `order` says it); else one per group. A
 * zero_non_owner keeps the first member's block, which must be the one
 * with coordinate 0. */
static int apply_groups(lreader *r, const plan_ynode *gn, plan_lstep *s,
                        int64_t *row, int in_buf, int out_buf) {
  plan_lowered *l = r->l;
  const plan_mesh *m = &l->plan->mesh;
  const plan_redist_step *st = &s->redist;
  int64_t k = m->axis_sizes[st->axis], nranks = 1;
  for (int a = 0; a < m->naxes; a++)
    nranks *= m->axis_sizes[a];
  if (st->kind == PLAN_REDIST_ZERO_NON_OWNER) {
    for (int64_t q = 0; q < nranks; q++)
      if (row[q * k] != 0)
        return plan_rd_fail(&r->rd, gn, PLAN_EINVALID,
                            "groups: a zero_non_owner's first member keeps "
                            "its block: it must be the rank with coordinate "
                            "0 on '%s'",
                            m->axis_names[st->axis]);
    return PLAN_OK;
  }
  if (st->kind != PLAN_REDIST_ALL_GATHER &&
      st->kind != PLAN_REDIST_REDUCE_SCATTER &&
      st->kind != PLAN_REDIST_ALL_TO_ALL)
    return PLAN_OK;
  bool identity = true, uniform = true;
  for (int64_t q = 0; q < nranks; q++)
    for (int64_t i = 0; i < k; i++) {
      identity = identity && row[q * k + i] == i;
      uniform = uniform && row[q * k + i] == row[i];
    }
  if (identity)
    return PLAN_OK;
  if (uniform)
    s->group_order = row;
  else
    s->rank_order = row;
  return even_pieces(r, gn, s, in_buf, out_buf,
                     "a group's member order other than coordinate order");
}

/* PLAN_OK when the file's version holds format 1.1 fields (a step's
 * stream, chunk or wait); else a `version` error at n. */
static int need_1_1(lreader *r, const plan_ynode *n, const char *field) {
  const plan_plan *p = r->l->own_ref ? r->l->own_ref : r->l->own_plan;
  plan_reader rd = r->rd;
  rd.ver_major = p->version_major;
  rd.ver_minor = p->version_minor;
  return plan_rd_need_format_1_1(&rd, n, field);
}

/* `stream: N` of a collective or wait step (0, the compute stream, when
 * absent). */
static int read_stream(lreader *r, const plan_ynode *n, plan_lstep *s) {
  const plan_ynode *x = plan_ymap_get(n, "stream");
  int64_t v;
  int rc;
  if (!x)
    return PLAN_OK;
  if ((rc = need_1_1(r, x, "a step's stream")) ||
      (rc = plan_rd_int(&r->rd, x, "stream", &v)))
    return rc;
  if (v < 0 || v > 64)
    return plan_rd_fail(&r->rd, x, PLAN_EINVALID, "stream must be 0 to 64");
  s->stream = (int)v;
  return PLAN_OK;
}

/* `chunk: {dim, index, of, at}` of a collective: the slice it moves. The
 * dim must be one the step leaves, and `of` must divide every block of
 * its buffers along it. */
static int read_chunk(lreader *r, const plan_ynode *n, plan_lstep *s,
                      int in_buf, int out_buf) {
  const plan_ynode *x = plan_ymap_get(n, "chunk");
  static const char *const k[] = {"dim", "index", "of", "at", NULL};
  plan_reader *rd = &r->rd;
  int rc;
  if (!x)
    return PLAN_OK;
  if ((rc = need_1_1(r, x, "a step's chunk")) ||
      (rc = plan_rd_expect_map(rd, x, "chunk")) ||
      (rc = plan_rd_check_keys(rd, x, k, "chunk", NULL)))
    return rc;
  int64_t v[4];
  for (int i = 0; i < 4; i++) {
    const plan_ynode *f = plan_ymap_get(x, k[i]);
    if (!f)
      return plan_rd_fail(rd, x, PLAN_ESCHEMA,
                          "a chunk needs dim, index, of and at");
    if ((rc = plan_rd_int(rd, f, k[i], &v[i])))
      return rc;
  }
  const plan_tensor *t =
      &r->l->plan->program->tensors[r->l->bufs[in_buf].tensor];
  if (v[2] < 1 || v[2] > 4096 || v[1] < 0 || v[1] >= v[2] || v[3] < 0 ||
      v[3] >= v[2])
    return plan_rd_fail(rd, x, PLAN_EINVALID,
                        "a chunk has 'of' 1 to 4096, 'index' and 'at' 0 to "
                        "of - 1");
  if (v[0] < 0 || v[0] >= t->rank || v[0] == s->redist.dim ||
      v[0] == s->redist.to_dim)
    return plan_rd_fail(rd, x, PLAN_EINVALID,
                        "chunk dim %lld is not a dim of '%s' the %s leaves",
                        (long long)v[0], t->name,
                        plan_redist_kind_name(s->redist.kind));
  int bufs[2] = {in_buf, out_buf};
  for (int b = 0; b < 2; b++)
    for (int64_t q = 0; q < r->l->plan->mesh.ndevices; q++) {
      int64_t dims[PLAN_MAX_RANK];
      plan_lowered_buffer_block(dims, NULL, r->l, bufs[b], q);
      if (dims[v[0]] % v[2])
        return plan_rd_fail(rd, x, PLAN_EINVALID,
                            "%lld chunks do not divide dim %lld of '%s' "
                            "(%lld on rank %lld)",
                            (long long)v[2], (long long)v[0], t->name,
                            (long long)dims[v[0]], (long long)q);
    }
  s->chunk_dim = (int)v[0];
  s->chunk_index = v[1];
  s->chunk_of = v[2];
  s->chunk_at = v[3];
  return PLAN_OK;
}

/* A chunked step writes slice `at` of out: the buffer's chunks share one
 * dim and count, and each slice is written once. */
static int chunk_write(lreader *r, const plan_ynode *n, const plan_lstep *s,
                       int out, int idx) {
  plan_reader *rd = &r->rd;
  if (r->written[out] >= 0 && !r->chunk_of[out])
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "buffer '%s' is written twice (steps %d and %d)",
                        r->bnodes[out]->u.scalar.text, r->written[out], idx);
  if (!r->chunk_of[out]) {
    r->chunk_of[out] = s->chunk_of;
    r->chunk_seen[out] = plan_arena_alloc(&r->l->arena, (size_t)s->chunk_of);
    if (!r->chunk_seen[out])
      return plan_oom();
    memset(r->chunk_seen[out], 0, (size_t)s->chunk_of);
    r->written[out] = idx;
  } else if (r->chunk_of[out] != s->chunk_of ||
             r->l->steps[r->written[out]].chunk_dim != s->chunk_dim) {
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "the chunks of buffer '%s' differ in dim or count",
                        r->bnodes[out]->u.scalar.text);
  }
  if (r->chunk_seen[out][s->chunk_at])
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "chunk %lld of buffer '%s' is written twice",
                        (long long)s->chunk_at, r->bnodes[out]->u.scalar.text);
  r->chunk_seen[out][s->chunk_at] = 1;
  r->chunk_done[out]++;
  return PLAN_OK;
}

/* {input: B}: a leaf's blocks made in its storage placement. */
static int read_input_step(lreader *r, const plan_ynode *n, const plan_ynode *v,
                           plan_lstep *s, int *ins, int *outs) {
  plan_lowered *l = r->l;
  const plan_program *prog = l->plan->program;
  plan_reader *rd = &r->rd;
  int rc;
  (void)ins; /* an input step reads nothing */
  static const char *const k[] = {"input", NULL};
  if ((rc = plan_rd_check_keys(rd, n, k, "an input step", NULL)) ||
      (rc = buf_ref(r, v, &outs[0])))
    return rc;
  if (prog->tensors[l->bufs[outs[0]].tensor].producer >= 0)
    return plan_rd_fail(rd, v, PLAN_EINVALID,
                        "input step for '%s', which an op produces",
                        prog->tensors[l->bufs[outs[0]].tensor].name);
  s->kind = PLAN_LSTEP_INPUT;
  s->nout = 1;
  return PLAN_OK;
}

/* {op: NAME, in: [..], out: [..]}: each buffer holds the op's operand. */
static int read_op_step(lreader *r, const plan_ynode *n, const plan_ynode *v,
                        plan_lstep *s, int *ins, int *outs) {
  plan_lowered *l = r->l;
  const plan_program *prog = l->plan->program;
  plan_reader *rd = &r->rd;
  int rc;
  static const char *const k[] = {"op", "in", "out", NULL};
  if ((rc = plan_rd_check_keys(rd, n, k, "an op step", NULL)) ||
      (rc = plan_rd_expect_scalar(rd, v, "op")))
    return rc;
  s->op = plan_strmap_get(&prog->op_by_name, v->u.scalar.text);
  if (s->op < 0)
    return plan_rd_fail(rd, v, PLAN_EINVALID, "the program has no op '%.60s'",
                        v->u.scalar.text);
  const plan_op *op = &prog->ops[s->op];
  s->kind = PLAN_LSTEP_OP;
  s->nin = op->nin;
  s->nout = op->nout;
  for (int side = 0; side < 2; side++) {
    const plan_ynode *lst = plan_ymap_get(n, side ? "out" : "in");
    int want = side ? op->nout : op->nin;
    if (!lst || lst->kind != PLAN_Y_SEQ || (int)lst->u.seq.count != want)
      return plan_rd_fail(rd, lst ? lst : n, PLAN_EINVALID,
                          "op step '%s' needs %s: a list of %d buffer%s",
                          op->name, side ? "out" : "in", want,
                          want == 1 ? "" : "s");
    for (int j = 0; j < want; j++) {
      int *dst = side ? &outs[j] : &ins[j];
      if ((rc = buf_ref(r, lst->u.seq.items[j], dst)))
        return rc;
      int t = side ? op->out[j] : op->in[j];
      if (l->bufs[*dst].tensor != t)
        return plan_rd_fail(rd, lst->u.seq.items[j], PLAN_EINVALID,
                            "buffer '%s' holds '%s', but %s %d of op '%s' is "
                            "'%s'",
                            lst->u.seq.items[j]->u.scalar.text,
                            prog->tensors[l->bufs[*dst].tensor].name,
                            side ? "output" : "input", j, op->name,
                            prog->tensors[t].name);
    }
  }
  return PLAN_OK;
}

/* {collective: KIND, axis | groups, in, out, ...}: the step must turn in's
 * placement into out's. */
static int read_collective_step(lreader *r, const plan_ynode *n,
                                const plan_ynode *v, plan_lstep *s, int *ins,
                                int *outs) {
  plan_lowered *l = r->l;
  plan_reader *rd = &r->rd;
  int rc;
  const plan_plan *p = l->plan;
  static const char *const k[] = {"collective", "axis",   "groups", "reduce",
                                  "dim",        "to_dim", "order",  "in",
                                  "out",        "stream", "chunk",  NULL};
  if ((rc = plan_rd_check_keys(rd, n, k, "a collective step", NULL)))
    return rc;
  int kind, red = PLAN_RED_SUM;
  if ((rc = enum_of(rd, v, "collective", coll_names, PLAN_REDIST_COUNT, &kind)))
    return rc;
  plan_redist_step *st = &s->redist;
  st->kind = (plan_redist_kind)kind;
  st->dim = st->to_dim = -1;
  const plan_ynode *an = plan_ymap_get(n, "axis"),
                   *gn = plan_ymap_get(n, "groups");
  int64_t *rows = NULL;
  if (an && gn)
    return plan_rd_fail(rd, gn, PLAN_ESCHEMA,
                        "a collective names its groups by 'axis' or by "
                        "'groups', not both");
  if (gn) {
    if ((rc = read_groups(r, gn, s, &rows)))
      return rc;
  } else if (!an || (rc = plan_rd_expect_scalar(rd, an, "axis"))) {
    return an ? rc
              : plan_rd_fail(rd, n, PLAN_ESCHEMA,
                             "a collective needs an 'axis' or 'groups'");
  } else if ((st->axis = plan_mesh_axis_find(&p->mesh, an->u.scalar.text)) <
             0) {
    return plan_rd_fail(rd, an, PLAN_EINVALID, "no mesh axis '%.40s'",
                        an->u.scalar.text);
  }
  const plan_ynode *x;
  if ((x = plan_ymap_get(n, "reduce")) &&
      (rc = enum_of(rd, x, "reduce", reduce_names, PLAN_RED_COUNT, &red)))
    return rc;
  st->reduce = (plan_reduce)red;
  int64_t d;
  if ((x = plan_ymap_get(n, "dim"))) {
    if ((rc = plan_rd_int(rd, x, "dim", &d)))
      return rc;
    st->dim = (int)d;
  }
  if ((x = plan_ymap_get(n, "to_dim"))) {
    if ((rc = plan_rd_int(rd, x, "to_dim", &d)))
      return rc;
    st->to_dim = (int)d;
  }
  const plan_ynode *in = plan_ymap_get(n, "in"), *out = plan_ymap_get(n, "out");
  if (!in || !out)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "a collective needs 'in' and 'out'");
  if ((rc = buf_ref(r, in, &ins[0])) || (rc = buf_ref(r, out, &outs[0])))
    return rc;
  if (l->bufs[ins[0]].tensor != l->bufs[outs[0]].tensor)
    return plan_rd_fail(rd, out, PLAN_EINVALID,
                        "a collective's in and out buffers hold one tensor");
  /* the step must turn in's placement into out's */
  plan_placement after = l->bufs[ins[0]].pl;
  char a[PLAN_PLACEMENT_STRLEN], b[PLAN_PLACEMENT_STRLEN];
  st->before = after;
  /* a level the step adds has the pieces out's placement states */
  st->ratio = l->bufs[outs[0]].pl.ax[st->axis].ratio;
  if (!plan_redist_apply(&after, st) ||
      !plan_placement_equal(&after, &l->bufs[outs[0]].pl))
    return plan_rd_fail(
        rd, n, PLAN_EINVALID, "%s over '%s' does not turn %s into %s",
        coll_names[kind], p->mesh.axis_names[st->axis],
        fmt_pl(l, &l->bufs[ins[0]].pl, a), fmt_pl(l, &l->bufs[outs[0]].pl, b));
  st->after = l->bufs[outs[0]].pl;
  if ((x = plan_ymap_get(n, "order")) && gn)
    return plan_rd_fail(rd, x, PLAN_ESCHEMA,
                        "'order' goes with 'axis': with 'groups', each "
                        "group's member order is its order");
  if (x && (rc = read_group_order(r, x, s, ins[0], outs[0])))
    return rc;
  if (gn && (rc = apply_groups(r, gn, s, rows, ins[0], outs[0])))
    return rc;
  if ((rc = read_stream(r, n, s)) ||
      (rc = read_chunk(r, n, s, ins[0], outs[0])))
    return rc;
  s->kind = PLAN_LSTEP_REDIST;
  s->nin = s->nout = 1;
  l->collectives[kind]++;
  return PLAN_OK;
}

/* {bind: B, from: T}: a manual region's output takes a traced tensor's value.
 */
static int read_bind_step(lreader *r, const plan_ynode *n, const plan_ynode *v,
                          plan_lstep *s, int *ins, int *outs) {
  plan_lowered *l = r->l;
  const plan_program *prog = l->plan->program;
  plan_reader *rd = &r->rd;
  int rc;
  /* a manual region's output takes a traced tensor's value */
  if ((rc = read_from_step(r, n, v, "bind", &ins[0], &outs[0])))
    return rc;
  const plan_lbuf *bi = &l->bufs[ins[0]], *bo = &l->bufs[outs[0]];
  const plan_tensor *ti = &prog->tensors[bi->tensor],
                    *to = &prog->tensors[bo->tensor];
  bool replaced = false;
  for (int g = 0; g < l->nregions && !replaced; g++)
    for (int j = 0; j < l->regions[g].nreplaces && !replaced; j++) {
      const plan_op *op = &prog->ops[l->regions[g].replaces[j]];
      for (int q = 0; q < op->nout; q++)
        replaced = replaced || op->out[q] == bo->tensor;
    }
  if (!replaced || bi->tensor < l->norig_tensors)
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "a bind step gives a tensor an op of a region "
                        "replaces ('%s' is not one) a traced tensor's value "
                        "('%s' is not one)",
                        to->name, ti->name);
  if (ti->rank != to->rank ||
      memcmp(ti->dims, to->dims, sizeof(int64_t) * (size_t)ti->rank) ||
      ti->dtype != to->dtype || !plan_placement_equal(&bi->pl, &bo->pl))
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "a bind step's buffers must have one shape, dtype "
                        "and placement ('%s' and '%s' differ)",
                        ti->name, to->name);
  s->kind = PLAN_LSTEP_REDIST;
  s->nin = s->nout = 1;
  memset(&s->redist, 0, sizeof s->redist);
  s->redist.kind = PLAN_REDIST_RELABEL;
  s->redist.dim = s->redist.to_dim = -1;
  s->redist.before = s->redist.after = bi->pl;
  l->collectives[PLAN_REDIST_RELABEL]++;
  return PLAN_OK;
}

/* What every step does with its buffers once its kind is read: each read
 * written before (and whole, but for a wait), each written once and not
 * while in flight; an op step's blocks fit the op. */
static int commit_step_buffers(lreader *r, const plan_ynode *n, plan_lstep *s,
                               const int *ins, const int *outs, int idx) {
  plan_lowered *l = r->l;
  plan_reader *rd = &r->rd;
  int rc;
  s->in = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(s->nin + 1));
  s->out = plan_arena_alloc(&l->arena, sizeof(int) * (size_t)(s->nout + 1));
  if (!s->in || !s->out)
    return plan_oom();
  for (int j = 0; j < s->nin; j++) {
    if (r->written[ins[j]] < 0)
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "step %d reads buffer '%s' before any step writes it",
                          idx, r->bnodes[ins[j]]->u.scalar.text);
    if (r->chunk_of[ins[j]] && r->chunk_done[ins[j]] < r->chunk_of[ins[j]] &&
        s->kind != PLAN_LSTEP_WAIT)
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "step %d reads buffer '%s' when %lld of its %lld "
                          "chunks are written",
                          idx, r->bnodes[ins[j]]->u.scalar.text,
                          (long long)r->chunk_done[ins[j]],
                          (long long)r->chunk_of[ins[j]]);
    s->in[j] = ins[j];
  }
  if (s->chunk_of) { /* one slice of out, which its other chunks share */
    if ((rc = chunk_write(r, n, s, outs[0], idx)))
      return rc;
    s->out[0] = outs[0];
  }
  for (int j = 0; j < s->nout && !s->chunk_of; j++) {
    int st;
    if (r->written[outs[j]] >= 0 && plan_lowered_inflight(l, idx, outs[j], &st))
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "step %d writes buffer '%s' while the collective "
                          "started at step %d is in flight: a buffer reused "
                          "in flight",
                          idx, r->bnodes[outs[j]]->u.scalar.text, st);
    if (r->written[outs[j]] >= 0)
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "buffer '%s' is written twice (steps %d and %d)",
                          r->bnodes[outs[j]]->u.scalar.text,
                          r->written[outs[j]], idx);
    r->written[outs[j]] = idx;
    s->out[j] = outs[j];
  }
  char why[1024];
  if (s->kind == PLAN_LSTEP_OP &&
      plan_lowered_check_op_step(l, s, why, sizeof why))
    return plan_rd_fail(rd, n, PLAN_EINVALID, "%s", why);
  return PLAN_OK;
}

static int read_step(lreader *r, const plan_ynode *n, int idx) {
  plan_lowered *l = r->l;
  plan_reader *rd = &r->rd;
  int rc = plan_rd_expect_map(rd, n, "a step");
  if (rc)
    return rc;
  const plan_ynode *v;
  plan_lstep *s = &l->steps[idx];
  memset(s, 0, sizeof *s);
  s->op = -1;
  int ins[PLAN_MAX_OPERANDS], outs[PLAN_MAX_OPERANDS];
  if ((v = plan_ymap_get(n, "input"))) {
    rc = read_input_step(r, n, v, s, ins, outs);
  } else if ((v = plan_ymap_get(n, "op"))) {
    rc = read_op_step(r, n, v, s, ins, outs);
  } else if ((v = plan_ymap_get(n, "collective"))) {
    rc = read_collective_step(r, n, v, s, ins, outs);
  } else if ((v = plan_ymap_get(n, "transfer")) && l->pipe) {
    /* a buffer another stage wrote, received (lowered_io_pipe.c) */
    if (!(rc = read_from_step(r, n, v, "transfer", &ins[0], &outs[0]))) {
      s->kind = PLAN_LSTEP_TRANSFER;
      s->nin = s->nout = 1;
    }
  } else if ((v = plan_ymap_get(n, "wait"))) {
    static const char *const k[] = {"wait", "stream", NULL};
    if ((rc = need_1_1(r, v, "a wait step")) ||
        (rc = plan_rd_check_keys(rd, n, k, "a wait step", NULL)) ||
        (rc = buf_ref(r, v, &ins[0])) || (rc = read_stream(r, n, s)))
      return rc;
    if (!s->stream)
      return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                          "a wait step names the stream it waits on "
                          "('stream: 1' or more)");
    s->kind = PLAN_LSTEP_WAIT;
    s->nin = 1;
  } else if ((v = plan_ymap_get(n, "bind")) && l->nregions) {
    rc = read_bind_step(r, n, v, s, ins, outs);
  } else {
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "a step is {input: ..}, {op: .., in: .., out: ..}, "
                        "{collective: .., axis: .., in: .., out: ..}, with "
                        "regions {bind: .., from: ..}, in a pipeline "
                        "{transfer: .., from: ..}");
  }
  return rc ? rc : commit_step_buffers(r, n, s, ins, outs, idx);
}

static int read_map_of_buffers(lreader *r, const plan_ynode *n,
                               const char *what, bool outputs) {
  plan_lowered *l = r->l;
  const plan_program *prog = l->plan->program;
  int rc = plan_rd_expect_map(&r->rd, n, what);
  if (rc)
    return rc;
  for (size_t i = 0; i < n->u.map.count; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
    int t = plan_strmap_get(&prog->tensor_by_name, k->u.scalar.text), b;
    if (t < 0)
      return plan_rd_fail(&r->rd, k, PLAN_EINVALID,
                          "the program has no tensor '%.60s'",
                          k->u.scalar.text);
    if ((rc = buf_ref(r, v, &b)))
      return rc;
    if (l->bufs[b].tensor != t)
      return plan_rd_fail(&r->rd, v, PLAN_EINVALID,
                          "buffer '%s' does not hold '%s'", v->u.scalar.text,
                          k->u.scalar.text);
    if (r->written[b] < 0)
      return plan_rd_fail(&r->rd, v, PLAN_EINVALID,
                          "no step writes buffer '%s'", v->u.scalar.text);
    if (!outputs) {
      l->produced[t] = b;
      continue;
    }
    int slot = -1;
    for (int j = 0; j < prog->noutputs; j++)
      if (prog->outputs[j] == t)
        slot = j;
    if (slot < 0)
      return plan_rd_fail(&r->rd, k, PLAN_EINVALID,
                          "'%s' is not a program output", k->u.scalar.text);
    l->delivered[slot] = b;
  }
  return PLAN_OK;
}

/* One entry of `required`: a placement, or {placement, gradient_of}. */
static int read_required_one(lreader *r, const plan_ynode *v, int slot) {
  plan_lowered *l = r->l;
  const plan_plan *p = l->plan;
  const plan_program *prog = p->program;
  const plan_tensor *t = &prog->tensors[prog->outputs[slot]];
  const plan_ynode *pn = v, *gn = NULL;
  int rc;
  if (v->kind == PLAN_Y_MAP) {
    static const char *const k[] = {"placement", "gradient_of", NULL};
    if ((rc = plan_rd_check_keys(&r->rd, v, k, "a required placement", NULL)))
      return rc;
    pn = plan_ymap_get(v, "placement");
    gn = plan_ymap_get(v, "gradient_of");
    if (!pn)
      return plan_rd_fail(&r->rd, v, PLAN_ESCHEMA,
                          "a required placement needs a 'placement'");
  }
  if ((rc = read_pl(r, pn, t->rank, &l->required[slot])))
    return rc;
  if (!gn)
    return PLAN_OK;
  if ((rc = plan_rd_expect_scalar(&r->rd, gn, "gradient_of")))
    return rc;
  int w = plan_strmap_get(&prog->tensor_by_name, gn->u.scalar.text);
  if (w < 0 || prog->tensors[w].role != PLAN_ROLE_PARAM)
    return plan_rd_fail(&r->rd, gn, PLAN_EINVALID,
                        "gradient_of: the program has no param '%.60s'",
                        gn->u.scalar.text);
  l->grad_of[slot] = w;
  return PLAN_OK;
}

/* `required`: the placement the plan requires each output in. Optional
 * (files written before it); when given, every output has an entry. */
static int read_required(lreader *r, const plan_ynode *n) {
  plan_lowered *l = r->l;
  const plan_program *prog = l->plan->program;
  int rc = plan_rd_expect_map(&r->rd, n, "required");
  if (rc)
    return rc;
  size_t no = (size_t)prog->noutputs + 1;
  l->required = calloc(no, sizeof(plan_placement));
  l->grad_of = malloc(no * sizeof(int));
  bool *seen = calloc(no, sizeof(bool));
  if (!l->required || !l->grad_of || !seen) {
    free(seen);
    return plan_oom();
  }
  for (int k = 0; k < prog->noutputs; k++)
    l->grad_of[k] = -1;
  for (size_t i = 0; i < n->u.map.count && !rc; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key;
    int t = plan_strmap_get(&prog->tensor_by_name, k->u.scalar.text), slot = -1;
    for (int j = 0; t >= 0 && j < prog->noutputs; j++)
      if (prog->outputs[j] == t)
        slot = j;
    if (slot < 0)
      rc = plan_rd_fail(&r->rd, k, PLAN_EINVALID,
                        "required: '%.60s' is not a program output",
                        k->u.scalar.text);
    else if (!(rc = read_required_one(r, n->u.map.pairs[i].value, slot)))
      seen[slot] = true;
  }
  for (int k = 0; k < prog->noutputs && !rc; k++)
    if (!seen[k])
      rc = plan_rd_fail(&r->rd, n, PLAN_EINVALID,
                        "output '%s' has no placement in required",
                        prog->tensors[prog->outputs[k]].name);
  free(seen);
  return rc;
}

/* Buffers renumbered in the order steps write them, so names and the order
 * of the buffers mapping do not change the program (nor its hash); every
 * buffer must be written. */
static int renumber(lreader *r) {
  int unwritten;
  int rc = plan_lowered_renumber(r->l, &unwritten);
  if (!rc && unwritten >= 0)
    rc = plan_rd_fail(&r->rd, r->bnodes[unwritten], PLAN_EINVALID,
                      "no step writes buffer '%s'",
                      r->bnodes[unwritten]->u.scalar.text);
  return rc;
}

/* The program the file's steps run: the reference program with every
 * manual region's traced ops appended (ops and tensors from the
 * reference's counts on), read as program ops; and a plan of it, whose
 * mesh is the reference plan's. The file's plan becomes the reference
 * (own_ref). */
static int read_region_ops(lreader *r, plan_program *ext, plan_lregion *lr,
                           const plan_ynode *on) {
  plan_reader rd = r->rd;
  rd.arena = &ext->arena;
  int rc = plan_rd_expect_seq(&rd, on, "a region's ops");
  if (rc)
    return rc;
  lr->op_begin = ext->nops;
  for (size_t i = 0; i < on->u.seq.count; i++) {
    const plan_ynode *n = on->u.seq.items[i];
    if ((rc = plan_program_add_op(&rd, ext, n)))
      return rc;
    if (ext->npending)
      return plan_rd_fail(&rd, n, PLAN_EINVALID,
                          "op '%s' reads '%s', which neither the program nor "
                          "an earlier traced op makes",
                          ext->ops[ext->nops - 1].name, ext->pending[0].name);
  }
  lr->op_end = ext->nops;
  return PLAN_OK;
}

static int read_region(lreader *r, plan_program *ext, const plan_ynode *n,
                       plan_lregion *lr) {
  plan_reader *rd = &r->rd;
  const plan_program *ref = r->l->own_ref->program;
  static const char *const k[] = {"name", "body_hash", "replaces", "ops", NULL};
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "a region")) ||
      (rc = plan_rd_check_keys(rd, n, k, "a region", NULL)))
    return rc;
  const plan_ynode *nn = plan_ymap_get(n, "name"),
                   *hn = plan_ymap_get(n, "body_hash"),
                   *rn = plan_ymap_get(n, "replaces"),
                   *on = plan_ymap_get(n, "ops");
  if (!nn || !hn || !rn || !on)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "a region needs 'name', 'body_hash', 'replaces' and "
                        "'ops'");
  if ((rc = plan_rd_expect_scalar(rd, nn, "a region name")) ||
      (rc = plan_rd_expect_scalar(rd, hn, "body_hash")) ||
      (rc = plan_rd_expect_seq(rd, rn, "replaces")))
    return rc;
  lr->name = plan_arena_strdup(&r->l->arena, nn->u.scalar.text);
  lr->replaces =
      plan_arena_alloc(&r->l->arena, sizeof(int) * (rn->u.seq.count + 1));
  if (!lr->name || !lr->replaces)
    return plan_oom();
  if (plan_hash_parse(&lr->body_hash, hn->u.scalar.text))
    return plan_rd_fail(rd, hn, PLAN_EINVALID,
                        "body_hash: '%.60s' is not a hash (xxh3:<32 hex>)",
                        hn->u.scalar.text);
  for (size_t i = 0; i < rn->u.seq.count; i++) {
    const plan_ynode *x = rn->u.seq.items[i];
    if ((rc = plan_rd_expect_scalar(rd, x, "an op name")))
      return rc;
    int op = plan_strmap_get(&ref->op_by_name, x->u.scalar.text);
    if (op < 0)
      return plan_rd_fail(rd, x, PLAN_EINVALID,
                          "replaces: the program has no op '%.60s'",
                          x->u.scalar.text);
    lr->replaces[lr->nreplaces++] = op;
  }
  return read_region_ops(r, ext, lr, on);
}

static int read_regions(lreader *r, const plan_ynode *n) {
  plan_lowered *l = r->l;
  plan_plan *p = l->own_plan;
  int rc = plan_rd_expect_seq(&r->rd, n, "regions");
  if (rc)
    return rc;
  if (p->pipeline.present || p->program->loss >= 0)
    return plan_rd_fail(&r->rd, n, PLAN_EUNSUPPORTED,
                        "manual regions are lowered for forward programs "
                        "only");
  l->own_ref = p;
  l->ref_plan = p;
  l->own_plan = NULL;
  plan_ad_ctx ad;
  if ((rc = plan_ad_copy_begin(&ad, p->program)))
    return rc;
  plan_program *ext = ad.p;
  ad.p = NULL;
  plan_ad_copy_end(&ad);
  plan_plan *tp = calloc(1, sizeof *tp);
  if (!tp) {
    plan_program_free(ext);
    return plan_oom();
  }
  plan_arena_init(&tp->arena);
  tp->program = ext;
  l->own_plan = tp;
  l->plan = tp;
  ext->outputs_explicit = true;
  for (int t = 0; t < ext->ntensors; t++)
    if (plan_strmap_put(&ext->tensor_by_name, ext->tensors[t].name, t))
      return plan_oom();
  for (int i = 0; i < ext->nops; i++)
    if (plan_strmap_put(&ext->op_by_name, ext->ops[i].name, i))
      return plan_oom();
  l->norig_ops = ext->nops;
  l->norig_tensors = ext->ntensors;
  l->regions =
      plan_arena_alloc(&l->arena, sizeof(plan_lregion) * (n->u.seq.count + 1));
  if (!l->regions)
    return plan_oom();
  for (size_t i = 0; i < n->u.seq.count; i++) {
    plan_lregion *lr = &l->regions[l->nregions++];
    memset(lr, 0, sizeof *lr);
    if ((rc = read_region(r, ext, n->u.seq.items[i], lr)))
      return rc;
  }
  plan_reader rd = r->rd;
  rd.arena = &ext->arena;
  if ((rc = plan_program_finish(&rd, ext)))
    return rc;
  if (ext->nops == l->norig_ops)
    return plan_rd_fail(&r->rd, n, PLAN_EINVALID,
                        "regions: no traced ops (a region's body makes at "
                        "least one op)");
  tp->program_inline = true;
  tp->pipeline.axis = -1;
  tp->file = p->file;
  tp->version_major = p->version_major;
  tp->version_minor = p->version_minor;
  tp->mesh = p->mesh; /* borrowed from own_ref, kept current by read_pl */
  tp->has_mesh = true;
  tp->mesh_pos = p->mesh_pos;
  size_t nt = (size_t)ext->ntensors + 1, no = (size_t)ext->nops + 1;
  tp->placements = plan_arena_alloc(&tp->arena, sizeof(plan_tensor_pl) * nt);
  tp->strategies = plan_arena_alloc(&tp->arena, sizeof(plan_strategy) * no);
  tp->out_pl = plan_arena_alloc(&tp->arena, sizeof(plan_tensor_pl) *
                                                ((size_t)ext->noutputs + 1));
  if (!tp->placements || !tp->strategies || !tp->out_pl)
    return plan_oom();
  memset(tp->placements, 0, sizeof(plan_tensor_pl) * nt);
  memset(tp->strategies, 0, sizeof(plan_strategy) * no);
  memset(tp->out_pl, 0, sizeof(plan_tensor_pl) * ((size_t)ext->noutputs + 1));
  return PLAN_OK;
}

int plan_lowered_load_buffer(plan_lowered **out, const char *data, size_t len,
                             const char *name, const char *base_dir) {
  if (!out)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load_buffer: NULL out");
  *out = NULL;
  plan_error_clear();
  if (!data)
    return plan_failf(PLAN_EUSAGE, "plan_lowered_load_buffer: NULL data");
  if (!name)
    name = "<memory>";
  plan_ydoc doc;
  int rc = plan_ydoc_parse_buffer(&doc, data, len, name);
  if (rc)
    return rc;
  lreader r;
  memset(&r, 0, sizeof r);
  plan_strmap_init(&r.byname);
  plan_lowered *l = calloc(1, sizeof *l);
  plan_ynode root;
  plan_ypair *root_items = NULL;
  plan_ynode key_libplan; /* the version key, renamed for the plan reader */
  if (!l) {
    plan_ydoc_free(&doc);
    return plan_oom();
  }
  plan_arena_init(&l->arena);
  r.l = l;
  r.rd.file = doc.file;
  r.rd.arena = &l->arena;
  const plan_ynode *v, *R = doc.root;
  if ((rc = plan_rd_expect_map(&r.rd, R, "a lowered program")))
    goto done;
  if (!(v = plan_ymap_get(R, "libplan-lowered"))) {
    rc = plan_rd_fail(&r.rd, R, PLAN_ESCHEMA,
                      "not a lowered program: no 'libplan-lowered' version");
    goto done;
  }
  if ((rc = plan_rd_check_keys(&r.rd, R, lowered_keys, "a lowered program",
                               NULL)))
    goto done;
  /* the program and mesh read as a plan would read them */
  root = *R;
  root_items = malloc(sizeof(plan_ypair) * 4);
  if (!root_items) {
    rc = plan_oom();
    goto done;
  }
  {
    plan_ypair *pairs = root_items;
    size_t n = 0;
    memset(&key_libplan, 0, sizeof key_libplan);
    key_libplan.kind = PLAN_Y_SCALAR;
    key_libplan.u.scalar.text = "libplan";
    key_libplan.u.scalar.len = 7;
    key_libplan.line = R->line;
    key_libplan.col = R->col;
    pairs[n].key = &key_libplan;
    pairs[n++].value = (plan_ynode *)v;
    for (size_t i = 0; i < R->u.map.count; i++) {
      const char *k = R->u.map.pairs[i].key->u.scalar.text;
      if (!strcmp(k, "program") || !strcmp(k, "mesh"))
        pairs[n++] = R->u.map.pairs[i];
    }
    root.u.map.pairs = pairs;
    root.u.map.count = n;
  }
  plan_plan *p;
  if ((rc = plan_from_root(&p, &root, doc.file, base_dir)))
    goto done;
  l->own_plan = p;
  l->plan = p;
  if (!p->has_mesh) {
    rc = plan_rd_fail(&r.rd, R, PLAN_ESCHEMA,
                      "a lowered program needs a 'mesh'");
    goto done;
  }
  if ((v = plan_ymap_get(R, "regions")) && (rc = read_regions(&r, v)))
    goto done;
  if ((v = plan_ymap_get(R, "pipeline"))) {
    if (l->nregions) {
      rc = plan_rd_fail(&r.rd, v, PLAN_EUNSUPPORTED,
                        "manual regions are lowered for forward programs "
                        "only, not in a pipeline");
      goto done;
    }
    if ((rc = plan_lpipe_read_section(&r.rd, l, v)))
      goto done;
  }
  const plan_program *prog = l->plan->program;
  l->produced = malloc(sizeof(int) * ((size_t)prog->ntensors + 1));
  l->delivered = malloc(sizeof(int) * ((size_t)prog->noutputs + 1));
  if (!l->produced || !l->delivered) {
    rc = plan_oom();
    goto done;
  }
  for (int t = 0; t < prog->ntensors; t++)
    l->produced[t] = -1;
  for (int k = 0; k < prog->noutputs; k++)
    l->delivered[k] = -1;
  if (!(v = plan_ymap_get(R, "buffers"))) {
    rc = plan_rd_fail(&r.rd, R, PLAN_ESCHEMA,
                      "a lowered program needs 'buffers'");
    goto done;
  }
  if ((rc = read_buffers(&r, v)))
    goto done;
  if (!(v = plan_ymap_get(R, "steps")) ||
      (rc = plan_rd_expect_seq(&r.rd, v, "steps"))) {
    rc = v ? rc
           : plan_rd_fail(&r.rd, R, PLAN_ESCHEMA,
                          "a lowered program needs 'steps'");
    goto done;
  }
  l->nsteps = l->cap_steps = (int)v->u.seq.count;
  if (!(l->steps = calloc((size_t)l->nsteps + 1, sizeof(plan_lstep)))) {
    rc = plan_oom();
    goto done;
  }
  if (l->pipe && (rc = plan_lpipe_alloc_steps(l, l->nsteps)))
    goto done;
  for (int i = 0; i < l->nsteps; i++) {
    const plan_ynode *sn = v->u.seq.items[i];
    plan_ynode bare;
    if (l->pipe && ((rc = plan_lpipe_strip_step(&r.rd, sn, &bare)) ||
                    (rc = read_step(&r, &bare, i)) ||
                    (rc = plan_lpipe_read_step(&r.rd, l, sn, i))))
      goto done;
    if (!l->pipe && (rc = read_step(&r, sn, i)))
      goto done;
  }
  if (l->pipe && (rc = plan_lpipe_check_steps(&r.rd, l, v, r.written)))
    goto done;
  {
    char why[1024];
    int bad;
    if ((rc = plan_lowered_check_streams(l, &bad, why, sizeof why))) {
      rc = rc == PLAN_EINVALID
               ? plan_rd_fail(&r.rd, v->u.seq.items[bad < 0 ? 0 : bad],
                              PLAN_EINVALID, "%s", why)
               : rc;
      goto done;
    }
  }
  if ((v = plan_ymap_get(R, "layouts")) &&
      (rc = read_map_of_buffers(&r, v, "layouts", false)))
    goto done;
  if ((v = plan_ymap_get(R, "outputs")) &&
      (rc = read_map_of_buffers(&r, v, "outputs", true)))
    goto done;
  for (int k = 0; k < prog->noutputs; k++)
    if (l->delivered[k] < 0) {
      rc = plan_rd_fail(&r.rd, v ? v : R, PLAN_EINVALID,
                        "output '%s' has no buffer in outputs",
                        prog->tensors[prog->outputs[k]].name);
      goto done;
    }
  if ((v = plan_ymap_get(R, "required")) && (rc = read_required(&r, v)))
    goto done;
  rc = renumber(&r);
done:
  free(root_items);
  free(r.written);
  free(r.bnodes);
  free(r.chunk_of);
  free(r.chunk_done);
  free(r.chunk_seen);
  plan_strmap_free(&r.byname);
  plan_ydoc_free(&doc);
  if (rc) {
    plan_lowered_free(l);
    return rc;
  }
  *out = l;
  return PLAN_OK;
}
