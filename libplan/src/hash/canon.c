/* The canonical encoding of programs, meshes, plans and provenance, and the
 * hashes over it (spec/canonical-form.md).
 *
 * The encoding is compact JSON built from the IR, never from the text: keys
 * in byte order, fields equal to their default omitted, name patterns
 * expanded, placements in their canonical compact spelling, numbers in the
 * shortest round-trip spelling. So two files that mean the same thing encode
 * the same bytes whatever their key order, style, comments or spellings.
 *
 * Large encodings are hashed as they are produced (a streaming XXH3 state fed
 * every 64 KiB) so hashing a 100k-op plan needs no second copy of it.
 *
 * This file holds the entry points, the hashes and the op and tensor
 * signatures; each part's encoder is in canon_<part>.c, the JSON writer
 * they share in canon_json.h. */
#include "hash/canon_json.h"

/* ---- signatures
 * ------------------------------------------------------------------- */

void plan_canon_program_sigs(plan_program *p) {
  p->op_sigs = calloc((size_t)p->nops + 1, sizeof(uint64_t));
  p->tensor_sigs = calloc((size_t)p->ntensors + 1, sizeof(uint64_t));
  if (!p->op_sigs || !p->tensor_sigs) {
    /* no memory: every signature reads as 0 (drift then reports changes) */
    free(p->op_sigs);
    free(p->tensor_sigs);
    p->op_sigs = p->tensor_sigs = NULL;
    return;
  }
  plan_buf b;
  plan_buf_init(&b);
  cj c = {.b = &b};
  for (int t = 0; t < p->ntensors; t++) {
    plan_buf_reset(&b);
    cj_str(&c, p->tensors[t].name);
    plan_cj_tensor(&c, &p->tensors[t], true);
    p->tensor_sigs[t] = XXH3_64bits(b.data, b.len);
  }
  for (int i = 0; i < p->nops; i++) {
    const plan_op *op = &p->ops[i];
    plan_buf_reset(&b);
    cj_str(&c, plan_op_kind_name(op->kind));
    plan_cj_attrs(&c, op);
    for (int j = 0; j < op->nin; j++) {
      const plan_tensor *t = &p->tensors[op->in[j]];
      cj_str(&c, t->name);
      plan_cj_tensor(&c, t, true);
    }
    p->op_sigs[i] = XXH3_64bits(b.data, b.len);
  }
  /* On OOM the signatures degrade to hashes of partial text; the buffer
   * records the failure and loads report it through other allocations. */
  plan_buf_free(&b);
}

/* ---- entry points
 * ----------------------------------------------------------------------- */

static int encode_program(cj *c, const plan_program *prog,
                          const cj_order *ord) {
  /* the program's own document version, so a program hashes the same
   * inline, by path or standalone */
  int vmaj, vmin;
  plan_program_format(prog, &vmaj, &vmin);
  plan_buf_printf(c->b, "{\"libplan\":\"%d.%d\",\"program\":", vmaj, vmin);
  int rc = plan_cj_program(c, prog, ord);
  if (rc)
    return rc;
  plan_buf_putc(c->b, '}');
  return PLAN_OK;
}

static int program_hash_ord(plan_hash *out, const plan_program *prog,
                            const cj_order *ord);

/* The plan part records the program's hash: the cached one, or hashed over
 * the same name order. */
static int encode_plan(cj *c, const plan_plan *p, const cj_order *ord) {
  const plan_program *prog = p->program;
  plan_hash ph;
  int rc = prog->hash_cached ? (ph = prog->hash, PLAN_OK)
                             : program_hash_ord(&ph, prog, ord);
  if (rc)
    return rc;
  return plan_cj_plan(c, p, ord, ph);
}

static int encode_mesh(cj *c, const plan_plan *p, int vmaj, int vmin) {
  if (!p->has_mesh)
    return plan_failf(PLAN_ENOTFOUND, "the document has no mesh");
  plan_buf_printf(c->b, "{\"libplan\":\"%d.%d\",\"mesh\":", vmaj, vmin);
  int rc = plan_cj_mesh(c, &p->mesh);
  if (rc)
    return rc;
  plan_buf_putc(c->b, '}');
  return PLAN_OK;
}

static int encode(cj *c, const plan_plan *p, const plan_program *prog,
                  plan_part part) {
  int vmaj, vmin;
  if (p)
    plan_plan_format(p, &vmaj, &vmin);
  else
    plan_program_format(prog, &vmaj, &vmin);
  cj_order ord;
  int rc;
  switch (part) {
  case PLAN_PART_PLAN:
    if (!p->has_mesh)
      return plan_failf(PLAN_ENOTFOUND,
                        "a program-only document has no plan part");
    if ((rc = plan_cj_order_make(&ord, prog, true)))
      return rc;
    rc = encode_plan(c, p, &ord);
    plan_cj_order_free(&ord);
    return rc;
  case PLAN_PART_PROGRAM:
    if ((rc = plan_cj_order_make(&ord, prog, true)))
      return rc;
    rc = encode_program(c, prog, &ord);
    plan_cj_order_free(&ord);
    return rc;
  case PLAN_PART_MESH:
    plan_mesh_format(p, &vmaj, &vmin);
    return encode_mesh(c, p, vmaj, vmin);
  case PLAN_PART_PROVENANCE:
    if (!p->provenance)
      return plan_failf(PLAN_ENOTFOUND, "the plan has no provenance");
    plan_buf_printf(c->b, "{\"libplan\":\"%d.%d\",\"provenance\":", vmaj, vmin);
    if ((rc = plan_cj_value(c, p->provenance)))
      return rc;
    plan_buf_putc(c->b, '}');
    return PLAN_OK;
  }
  return plan_failf(PLAN_EUSAGE, "unknown plan part %d", (int)part);
}

int plan_canon_encode(plan_buf *b, const plan_plan *p, plan_part part) {
  cj c = {.b = b};
  int rc = encode(&c, p, p->program, part);
  if (!rc && b->failed)
    rc = plan_oom();
  return rc;
}

/* Hashes what `enc` writes, streaming it into XXH3-128. */
typedef struct hash_job {
  const plan_plan *p;
  const plan_program *prog;
  plan_part part;
  const cj_order *ord; /* for the program part inside a plan */
} hash_job;

static int hash_run(plan_hash *out, const hash_job *j) {
  plan_buf b;
  plan_buf_init(&b);
  XXH3_state_t *hs = XXH3_createState();
  if (!hs)
    return plan_oom();
  XXH3_128bits_reset(hs);
  cj c = {.b = &b, .hs = hs};
  int rc = j->ord ? encode_program(&c, j->prog, j->ord)
                  : encode(&c, j->p, j->prog, j->part);
  if (!rc && b.failed)
    rc = plan_oom();
  if (!rc) {
    XXH3_128bits_update(hs, b.data, b.len);
    XXH128_hash_t h = XXH3_128bits_digest(hs);
    out->high = h.high64;
    out->low = h.low64;
  }
  XXH3_freeState(hs);
  plan_buf_free(&b);
  return rc;
}

static int program_hash_ord(plan_hash *out, const plan_program *prog,
                            const cj_order *ord) {
  hash_job j = {NULL, prog, PLAN_PART_PROGRAM, ord};
  return hash_run(out, &j);
}

int plan_program_hash(plan_hash *out, const plan_program *prog) {
  if (!out || !prog)
    return plan_failf(PLAN_EUSAGE, "plan_program_hash: NULL argument");
  if (prog->hash_cached) {
    *out = prog->hash;
    return PLAN_OK;
  }
  hash_job j = {NULL, prog, PLAN_PART_PROGRAM, NULL};
  return hash_run(out, &j);
}

int plan_canon_program_prepare(plan_program *p) {
  cj_order o;
  int rc = plan_cj_order_make(&o, p, true);
  if (rc)
    return rc;
  int *ops = malloc(sizeof(int) * ((size_t)p->nops + 1));
  int *tens = malloc(sizeof(int) * ((size_t)p->ntensors + 1));
  if (!ops || !tens) {
    free(ops);
    free(tens);
    plan_cj_order_free(&o);
    return plan_oom();
  }
  for (int i = 0; i < p->nops; i++)
    ops[i] = o.ops[i].idx;
  for (int i = 0; i < p->ntensors; i++)
    tens[i] = o.tens[i].idx;
  if ((rc = program_hash_ord(&p->hash, p, &o))) {
    free(ops);
    free(tens);
    plan_cj_order_free(&o);
    return rc;
  }
  plan_cj_order_free(&o);
  p->ops_by_name = ops;
  p->tensors_by_name = tens;
  p->hash_cached = true;
  return PLAN_OK;
}

int plan_hash_part(plan_hash *out, const plan_plan *p, plan_part part) {
  if (!out || !p)
    return plan_failf(PLAN_EUSAGE, "plan_hash_part: NULL argument");
  hash_job j = {p, p->program, part, NULL};
  return hash_run(out, &j);
}

int plan_canonical(char **out, size_t *len, const plan_plan *p,
                   plan_part part) {
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  int rc = plan_canon_encode(&b, p, part);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, len);
}
