#define _XOPEN_SOURCE 700 /* realpath */
/* Reading a program by path (`program: {path, hash, signatures}`): the
 * recorded hash and signatures, and the program file itself, read whole,
 * once it is known to lie inside the folder the loader allows. */
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

/* Whether resolved path `f` is `dir` or below it (both from realpath). */
static bool is_inside(const char *f, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return true;
  return !strncmp(f, dir, n) && (f[n] == '/' || f[n] == '\0');
}

/* Whether resolved path `f` lies in folder `dir`; a folder that is not
 * given or cannot be resolved holds nothing. */
static bool inside_folder(const char *f, const char *dir) {
  char *d = dir && dir[0] ? realpath(dir, NULL) : NULL;
  bool in = d && is_inside(f, d);
  free(d);
  return in;
}

/* The program file `full` (as written: `rel`) checked against the folders
 * the plan may reach, once symlinks and '..' are resolved: the plan's own
 * folder tree `base`, and `root` when the loader allows one; so a plan
 * from elsewhere cannot make the loader read any file the user can. Not
 * the plan file itself either. */
static int check_program_path(const plan_reader *rd, const plan_ynode *pathn,
                              const char *rel, const char *full,
                              const char *base, const char *root) {
  char *rf = realpath(full, NULL);
  if (!rf)
    return plan_fail(PLAN_EIO, rd->file, pathn->line, pathn->col,
                     "program '%s': cannot read '%s': %s", rel, full,
                     strerror(errno));
  int rc = PLAN_OK;
  if (!inside_folder(rf, base) && !inside_folder(rf, root))
    rc = plan_fail(PLAN_EINVALID, rd->file, pathn->line, pathn->col,
                   "program path '%s' leads outside the folder '%s'%s%s%s; a "
                   "plan may name only files in its own folder tree unless "
                   "its loader allows another root (plan --program-root DIR)",
                   rel, base, root && root[0] ? " and the program root '" : "",
                   root && root[0] ? root : "", root && root[0] ? "'" : "");
  if (!rc) {
    char *self = rd->file ? realpath(rd->file, NULL) : NULL;
    if (self && !strcmp(self, rf))
      rc = plan_fail(PLAN_EINVALID, rd->file, pathn->line, pathn->col,
                     "program path '%s' names this plan file itself", rel);
    free(self);
  }
  free(rf);
  return rc;
}

int plan_read_program_ref(const plan_reader *rd, const plan_ynode *n,
                          plan_plan *p, const char *base_dir,
                          const char *root) {
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
  if (!root || !root[0])
    root = getenv("PLAN_PROGRAM_ROOT");
  if ((rc = check_program_path(rd, pathn, r->path, full,
                               base_dir && base_dir[0] ? base_dir : ".", root)))
    return rc;
  char *data = NULL;
  size_t len = 0;
  if ((rc = plan_read_file(&data, &len, full, 0)))
    return plan_fail(rc, rd->file, pathn->line, pathn->col, "program '%s': %s",
                     r->path, plan_error_last()->message);
  rc = plan_program_load_buffer(&p->program, data, len, full);
  free(data);
  /* a chain of programs by path is the file's fault, not the machine's */
  if (rc == PLAN_EUNSUPPORTED)
    return plan_fail(PLAN_EINVALID, rd->file, pathn->line, pathn->col,
                     "program '%s' refers to its own program by path; the "
                     "file a plan names must hold its program inline",
                     r->path);
  return rc;
}
