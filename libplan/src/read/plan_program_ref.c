/* Reading a program by path (`program: {path, hash, signatures}`): the
 * recorded hash and signatures, and the program file itself, read whole. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "libplan/plan.h"
#include "read/plan_doc.h"

static const char *const ref_keys[] = {"path", "hash", "signatures", NULL};
static const char *const sig_keys[] = {"ops", "tensors", NULL};

static int read_sig_map(const plan_reader *rd, const plan_ynode *n,
                        const char ***names, uint64_t **sigs, int *count) {
  int rc = plan_rd_expect_map(rd, n, "signatures");
  if (rc)
    return rc;
  *count = (int)n->u.map.count;
  *names = plan_arena_alloc(rd->arena, sizeof(char *) * (n->u.map.count + 1));
  *sigs = plan_arena_alloc(rd->arena, sizeof(uint64_t) * (n->u.map.count + 1));
  if (!*names || !*sigs)
    return plan_oom();
  for (size_t i = 0; i < n->u.map.count; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key, *v = n->u.map.pairs[i].value;
    if ((rc = plan_rd_name(rd, k, "a name", &(*names)[i])) ||
        (rc = plan_rd_expect_scalar(rd, v, "a signature")))
      return rc;
    const char *t = v->u.scalar.text;
    uint64_t s = 0;
    if (v->u.scalar.len != 16)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "a signature is 16 hex digits");
    for (int j = 0; j < 16; j++) {
      char c = t[j];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return plan_rd_fail(rd, v, PLAN_EINVALID,
                            "a signature is 16 hex digits");
      s = s << 4 | (uint64_t)d;
    }
    (*sigs)[i] = s;
  }
  return PLAN_OK;
}

int plan_read_file_all(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return plan_failf(PLAN_EIO, "cannot read '%s': %s", path, strerror(errno));
  plan_buf b;
  plan_buf_init(&b);
  /* one read of the whole file when its size is known (the usual case) */
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size < ((off_t)1 << 30)) {
    size_t want = (size_t)st.st_size;
    char *buf = malloc(want + 1);
    if (!buf) {
      fclose(f);
      return plan_oom();
    }
    size_t got = fread(buf, 1, want, f);
    int c = got == want ? fgetc(f) : EOF;
    if (got == want && c == EOF && !ferror(f)) {
      fclose(f);
      buf[want] = '\0';
      *data = buf;
      *len = want;
      return PLAN_OK;
    }
    free(buf);
    rewind(f); /* the file changed under us: read it the slow way */
  }
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    plan_buf_append(&b, chunk, n);
    if (b.len > (1u << 30)) {
      fclose(f);
      plan_buf_free(&b);
      return plan_failf(PLAN_ELIMIT, "'%s' is larger than 1 GiB", path);
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err || b.failed) {
    plan_buf_free(&b);
    return err ? plan_failf(PLAN_EIO, "cannot read '%s'", path) : plan_oom();
  }
  *len = b.len;
  *data = b.data ? b.data : calloc(1, 1);
  return *data ? PLAN_OK : plan_oom();
}

int plan_read_program_ref(const plan_reader *rd, const plan_ynode *n,
                          plan_plan *p, const char *base_dir) {
  int rc = plan_rd_check_keys(rd, n, ref_keys, "program", NULL);
  if (rc)
    return rc;
  plan_program_ref *r = &p->ref;
  r->pos = plan_rd_pos(n);
  const plan_ynode *pathn = plan_ymap_get(n, "path"), *v;
  if ((rc = plan_rd_name(rd, pathn, "program path", &r->path)))
    return rc;
  if ((v = plan_ymap_get(n, "hash"))) {
    if ((rc = plan_rd_expect_scalar(rd, v, "program hash")))
      return rc;
    if (plan_hash_parse(&r->hash, v->u.scalar.text))
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "program hash must be xxh3:<32 hex digits>");
    r->has_hash = true;
  }
  if ((v = plan_ymap_get(n, "signatures"))) {
    if ((rc = plan_rd_expect_map(rd, v, "signatures")) ||
        (rc = plan_rd_check_keys(rd, v, sig_keys, "signatures", NULL)))
      return rc;
    const plan_ynode *s;
    if ((s = plan_ymap_get(v, "ops")) &&
        (rc = read_sig_map(rd, s, &r->op_names, &r->op_sigs, &r->nops)))
      return rc;
    if ((s = plan_ymap_get(v, "tensors")) &&
        (rc = read_sig_map(rd, s, &r->tensor_names, &r->tensor_sigs,
                           &r->ntensors)))
      return rc;
  }
  char *full = r->path[0] == '/' || !base_dir || !base_dir[0]
                   ? plan_arena_strdup(rd->arena, r->path)
                   : plan_arena_printf(rd->arena, "%s/%s", base_dir, r->path);
  if (!full)
    return plan_oom();
  char *data = NULL;
  size_t len = 0;
  if ((rc = plan_read_file_all(full, &data, &len)))
    return plan_fail(rc, rd->file, pathn->line, pathn->col, "program '%s': %s",
                     r->path, plan_error_last()->message);
  rc = plan_program_load_buffer(&p->program, data, len, full);
  free(data);
  return rc;
}
