/* `plan upgrade`: a file of an older format version rewritten as the current
 * one, its meaning checked unchanged and the step recorded in the file.
 *
 * Format 0.1 is the pre-release form of 1.0 with the same content, so the
 * migration from it is the identity on content: the version scalar is
 * replaced where it stands and the record added as the root's last key,
 * which keeps comments, layout and line numbers. A file where that edit cannot
 * be made safely (the version not on a line of its own, a flow-style root) is
 * first written in canonical layout. A program by path is another document and
 * is left as it is; when it was upgraded first, the hash the plan records for
 * it is brought along. A later major that changes content adds its migration
 * step here, before the same check. */
#include <stdlib.h>
#include <string.h>

#include "libplan/plan.h"
#include "read/plan_read.h"
#include "yaml/yamldoc.h"

#define RECORD_KEY "x-upgraded-from"

/* A program's hash as if its document were format maj.min. */
static int program_hash_as(plan_hash *out, const plan_program *prog, int maj,
                           int min) {
  plan_program c = *prog;
  c.version_major = maj;
  c.version_minor = min;
  c.hash_cached = false; /* the cached hash encodes its own version */
  return plan_program_hash(out, &c);
}

/* The hashes of every part `p` has, as if its document were format maj.min
 * and its program's document pmaj.pmin (an inline program takes the
 * document's version: pmaj.pmin is used for a program by path only). */
static int hashes_as(plan_hash out[PLAN_UPGRADE_PARTS],
                     int has[PLAN_UPGRADE_PARTS], const plan_plan *p, int maj,
                     int min, int pmaj, int pmin) {
  plan_plan pc = *p;
  plan_program prog = *p->program;
  pc.version_major = maj;
  pc.version_minor = min;
  if (p->program_inline) {
    pmaj = maj;
    pmin = min;
  }
  if (prog.version_major != pmaj || prog.version_minor != pmin) {
    prog.version_major = pmaj;
    prog.version_minor = pmin;
    prog.hash_cached = false; /* the cached hash encodes another version */
  }
  pc.program = &prog;
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++) {
    bool want = k == PLAN_PART_PROGRAM ||
                ((k == PLAN_PART_PLAN || k == PLAN_PART_MESH) && p->has_mesh) ||
                (k == PLAN_PART_PROVENANCE && p->provenance);
    has[k] = want;
    out[k] = (plan_hash){0, 0};
    if (!want)
      continue;
    int rc = plan_hash_part(&out[k], &pc, (plan_part)k);
    if (rc)
      return rc;
  }
  return PLAN_OK;
}

/* Line `line` (1-based) of text: its first byte and the end of its text
 * (the newline or the end); false when the text has fewer lines. */
static bool line_bounds(const char *text, size_t len, int line, size_t *bol,
                        size_t *eol) {
  size_t i = 0;
  for (int l = 1; l < line; l++) {
    const char *nl = memchr(text + i, '\n', len - i);
    if (!nl)
      return false;
    i = (size_t)(nl - text) + 1;
  }
  const char *nl = memchr(text + i, '\n', len - i);
  *bol = i;
  *eol = nl ? (size_t)(nl - text) : len;
  return true;
}

/* The version scalar's token in `text`: [*start, *end) on line `line` (the
 * whole line [*bol, *eol) holds `libplan: TOKEN`, then blanks and an optional
 * comment). false when the text is laid out otherwise. */
static bool find_version_line(const char *text, size_t len, int line,
                              const char *version, size_t *bol, size_t *eol,
                              size_t *start, size_t *end) {
  if (!line_bounds(text, len, line, bol, eol))
    return false;
  size_t i = *bol;
  if (*eol > i && text[*eol - 1] == '\r')
    (*eol)--; /* CRLF: the CR stays with the line break */
  static const char key[] = "libplan";
  char kq = i < *eol && (text[i] == '"' || text[i] == '\'') ? text[i] : 0;
  i += kq != 0; /* the key may be quoted too */
  if (*eol - i < sizeof key || memcmp(text + i, key, sizeof key - 1))
    return false;
  i += sizeof key - 1;
  if (kq && (i >= *eol || text[i++] != kq))
    return false;
  while (i < *eol && text[i] == ' ')
    i++;
  if (i >= *eol || text[i] != ':')
    return false;
  i++;
  while (i < *eol && text[i] == ' ')
    i++;
  size_t vlen = strlen(version);
  *start = i;
  if (i < *eol && (text[i] == '"' || text[i] == '\'')) {
    char q = text[i];
    if (*eol - i < vlen + 2 || memcmp(text + i + 1, version, vlen) ||
        text[i + 1 + vlen] != q)
      return false;
    i += vlen + 2;
  } else {
    if (*eol - i < vlen || memcmp(text + i, version, vlen))
      return false;
    i += vlen;
  }
  *end = i;
  /* the rest of the line: blanks, then nothing or a comment */
  while (i < *eol && text[i] == ' ')
    i++;
  if (i < *eol && (text[i] != '#' || i == *end))
    return false;
  return true;
}

/* Where the first line after `from` that is a document marker (`---`,
 * `...`) starts, or len when none is: the root mapping ends there. */
static size_t marker_after(const char *text, size_t len, size_t from) {
  for (size_t i = from; i < len; i++)
    if ((i == 0 || text[i - 1] == '\n') && len - i >= 3 &&
        (!memcmp(text + i, "---", 3) || !memcmp(text + i, "...", 3)))
      return i;
  return len;
}

/* `text` with the version replaced by the current one and the record
 * appended as the last key of the root (before a document end marker), so
 * that every line keeps its number (positions in earlier findings still
 * hold); false when the layout does not allow the edit. */
static bool edit_text(plan_buf *b, const char *text, size_t len, int line,
                      const char *old_version, const char *record) {
  size_t bol, eol, start, end;
  if (!find_version_line(text, len, line, old_version, &bol, &eol, &start,
                         &end))
    return false;
  size_t stop = marker_after(text, len, eol);
  if (stop < len && text[stop] == '-')
    return false; /* a second document: not a file the reader accepts */
  const char *brk = eol < len && text[eol] == '\r' ? "\r\n" : "\n";
  plan_buf_append(b, text, start);
  plan_buf_puts(b, "\"" PLAN_FORMAT_BASE_STRING "\"");
  plan_buf_append(b, text + end, stop - end);
  if (stop > 0 && text[stop - 1] != '\n')
    plan_buf_puts(b, brk);
  for (const char *r = record; *r; r++) /* its lines end as the file's do */
    if (*r == '\n')
      plan_buf_puts(b, brk);
    else
      plan_buf_putc(b, *r);
  plan_buf_append(b, text + stop, len - stop);
  return true;
}

/* Validation findings per severity, the version note aside: what the
 * canonical layout could change (it drops entries that name nothing in the
 * program) and the upgrade must not. */
static int findings(size_t out[3], const plan_plan *p) {
  plan_diags *d = NULL;
  int rc = plan_validate(&d, p);
  if (rc)
    return rc;
  out[0] = out[1] = out[2] = 0;
  for (size_t i = 0; i < plan_diags_count(d); i++) {
    const plan_diag *g = plan_diags_get(d, i);
    if (strcmp(g->code, "version.old"))
      out[g->severity]++;
  }
  plan_diags_free(d);
  return PLAN_OK;
}

/* `text` with the first `from` on line `line` replaced by `to` (both
 * printed hashes); false when that line does not hold it. */
static bool replace_on_line(plan_buf *b, const char *text, size_t len, int line,
                            const char *from, const char *to) {
  size_t i, eol, n = strlen(from);
  if (!line_bounds(text, len, line, &i, &eol))
    return false;
  for (size_t j = i; j + n <= eol; j++)
    if (!memcmp(text + j, from, n)) {
      plan_buf_append(b, text, j);
      plan_buf_puts(b, to);
      plan_buf_append(b, text + j + n, len - j - n);
      return true;
    }
  return false;
}

/* Where the version scalar and the recorded program hash (0: none) stand,
 * and whether the root already carries a record; the document is parsed
 * again for positions only. */
static int scan_root(const char *data, size_t len, const char *name,
                     int *version_line, int *hash_line, plan_pos *record_at) {
  plan_ydoc doc;
  int rc = plan_ydoc_parse_buffer(&doc, data, len, name);
  if (rc)
    return rc;
  const plan_ynode *v = plan_ymap_get(doc.root, "libplan");
  *version_line = v ? v->line : 0;
  const plan_ynode *pn = plan_ymap_get(doc.root, "program");
  v = pn && pn->kind == PLAN_Y_MAP ? plan_ymap_get(pn, "hash") : NULL;
  *hash_line = v ? v->line : 0;
  *record_at = (plan_pos){0, 0};
  for (size_t i = 0; i < doc.root->u.map.count; i++) {
    const plan_ynode *k = doc.root->u.map.pairs[i].key;
    if (!strcmp(k->u.scalar.text, RECORD_KEY))
      *record_at = (plan_pos){k->line, k->col};
  }
  plan_ydoc_free(&doc);
  return PLAN_OK;
}

static const char *const part_key[PLAN_UPGRADE_PARTS] = {"plan", "program",
                                                         "mesh", "provenance"};

/* What the steps of one upgrade share. */
typedef struct upgrade_job {
  const char *name, *base_dir;
  plan_plan *old; /* the file as read */
  plan_upgrade_info *info;
  /* the program version its old hash is taken at; whether the program's
   * current hash (prog_now) replaces the one the plan recorded */
  int pmaj, pmin;
  bool rerecord;
  plan_hash prog_now;
  char old_version[32];
} upgrade_job;

/* A program by path keeps its own version; but when the program file
 * was upgraded on its own (its hash, with the plan's old version, is the
 * one the plan recorded), the recorded hash is brought along, and the
 * old hashes are those the plan had before either was upgraded. */
static int program_versions(upgrade_job *j) {
  const plan_plan *old = j->old;
  const plan_program *prog = old->program;
  j->pmaj = prog->version_major;
  j->pmin = prog->version_minor;
  j->prog_now = (plan_hash){0, 0};
  j->rerecord = false;
  if (old->program_inline || !old->ref.has_hash ||
      old->version_major >= PLAN_FORMAT_MAJOR)
    return PLAN_OK;
  plan_hash back;
  int rc;
  if ((rc = plan_program_hash(&j->prog_now, prog)) ||
      (rc = program_hash_as(&back, prog, old->version_major,
                            old->version_minor)))
    return rc;
  j->rerecord = !plan_hash_equal(j->prog_now, old->ref.hash) &&
                plan_hash_equal(back, old->ref.hash);
  if (j->rerecord) {
    j->pmaj = old->version_major;
    j->pmin = old->version_minor;
  }
  return PLAN_OK;
}

/* The record: the old version and the old hashes, a block mapping. */
static void record_text(plan_buf *rec, const upgrade_job *j) {
  plan_buf_printf(rec, RECORD_KEY ":\n  libplan: \"%s\"\n", j->old_version);
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++)
    if (j->info->has[k]) {
      char hb[PLAN_HASH_STRLEN];
      plan_buf_printf(rec, "  %s: \"%s\"\n", part_key[k],
                      plan_hash_format(j->info->before[k], hb));
    }
}

/* The edit in the canonical layout, for a file whose own layout allows
 * none: its version line always allows it. */
static int relayout(plan_buf *b, const upgrade_job *j, const char *record) {
  char *canon = NULL;
  size_t clen;
  plan_plan *now = NULL;
  plan_buf_reset(b);
  j->info->layout_kept = 0;
  int rc = plan_write_buffer(&canon, &clen, j->old, NULL);
  if (rc)
    goto done;
  if (!edit_text(b, canon, clen, 1, j->old_version, record)) {
    rc = plan_fail(PLAN_EINVALID, j->name, j->old->version_pos.line,
                   j->old->version_pos.col,
                   "no version line in the canonical layout");
    goto done;
  }
  /* once more through the writer, so the result is exactly what `plan
   * fmt` writes */
  free(canon);
  canon = NULL;
  if (!b->failed &&
      ((rc = plan_load_buffer(&now, b->data, b->len, j->name, j->base_dir)) ||
       (rc = plan_write_buffer(&canon, &clen, now, NULL))))
    goto done;
  plan_buf_reset(b);
  if (canon)
    plan_buf_append(b, canon, clen);
done:
  free(canon);
  plan_free(now);
  return rc;
}

/* The program file's new hash, where the old one was recorded. */
static int rerecord_hash(plan_buf *b, const upgrade_job *j) {
  char from[PLAN_HASH_STRLEN], to[PLAN_HASH_STRLEN];
  plan_hash_format(j->old->ref.hash, from);
  plan_hash_format(j->prog_now, to);
  int rl, hline;
  plan_pos unused;
  int rc = scan_root(b->data, b->len, j->name, &rl, &hline, &unused);
  if (rc)
    return rc;
  plan_buf edited;
  plan_buf_init(&edited);
  if (!replace_on_line(&edited, b->data, b->len, hline, from, to)) {
    plan_buf_free(&edited);
    return plan_fail(PLAN_EINVALID, j->name, j->old->version_pos.line,
                     j->old->version_pos.col,
                     "the recorded program hash is not where it was read");
  }
  plan_buf_free(b);
  *b = edited;
  if (b->failed)
    return plan_oom();
  j->info->program_rehashed = 1;
  return PLAN_OK;
}

/* The check: the result reads as the current version, and with the
 * version string set back its hashes are the old ones, part by part; a
 * result in the canonical layout also keeps every validation finding. */
static int check_result(const plan_buf *b, const upgrade_job *j) {
  const plan_plan *old = j->old;
  plan_upgrade_info *info = j->info;
  const char *name = j->name;
  plan_plan *now = NULL;
  int rc = plan_load_buffer(&now, b->data, b->len, name, j->base_dir);
  if (rc)
    goto done;
  plan_hash same[PLAN_UPGRADE_PARTS];
  int has_now[PLAN_UPGRADE_PARTS];
  if ((rc = hashes_as(same, has_now, now, old->version_major,
                      old->version_minor, j->pmaj, j->pmin)) ||
      (rc = hashes_as(info->after, has_now, now, now->version_major,
                      now->version_minor, now->program->version_major,
                      now->program->version_minor)))
    goto done;
  if (j->rerecord && !plan_hash_equal(now->ref.hash, j->prog_now)) {
    rc =
        plan_fail(PLAN_EINVALID, name, old->version_pos.line,
                  old->version_pos.col, "the program hash was not re-recorded");
    goto done;
  }
  if (now->version_major != PLAN_FORMAT_MAJOR || now->version_minor != 0) {
    rc = plan_fail(PLAN_EINVALID, name, old->version_pos.line,
                   old->version_pos.col,
                   "the upgraded file reads as format %d.%d",
                   now->version_major, now->version_minor);
    goto done;
  }
  for (int k = 0; k < PLAN_UPGRADE_PARTS; k++)
    if (has_now[k] != info->has[k] ||
        (info->has[k] && !plan_hash_equal(same[k], info->before[k]))) {
      rc = plan_fail(PLAN_EINVALID, name, old->version_pos.line,
                     old->version_pos.col,
                     "the upgrade would change the %s (its content hash with "
                     "the version set back differs); nothing written",
                     part_key[k]);
      goto done;
    }
  if (!info->layout_kept) {
    size_t fo[3], fn[3];
    if ((rc = findings(fo, old)) || (rc = findings(fn, now)))
      goto done;
    if (memcmp(fo, fn, sizeof fo)) {
      rc = plan_fail(PLAN_EINVALID, name, old->version_pos.line,
                     old->version_pos.col,
                     "its layout allows no edit in place, and in canonical "
                     "layout it would lose entries (its validation findings "
                     "differ): fix what `plan validate` reports, or put "
                     "`libplan: \"%s\"` on a line of its own; nothing written",
                     j->old_version);
      goto done;
    }
  }
done:
  plan_free(now);
  return rc;
}

/* The steps: read the file, take its hashes, edit the version and append
 * the record (in place or in the canonical layout), bring a program
 * file's new hash along, check the result. */
int plan_upgrade_buffer(char **out, size_t *len, plan_upgrade_info *info,
                        const char *data, size_t size, const char *name,
                        const char *base_dir) {
  if (!out || !info || !data)
    return plan_failf(PLAN_EUSAGE, "plan_upgrade_buffer: NULL argument");
  *out = NULL;
  if (len)
    *len = 0;
  memset(info, 0, sizeof *info);
  if (!name)
    name = "<buffer>";
  upgrade_job j = {.name = name, .base_dir = base_dir, .info = info};
  plan_buf b, rec;
  plan_buf_init(&b);
  plan_buf_init(&rec);
  int rc = plan_load_buffer(&j.old, data, size, name, base_dir);
  if (rc)
    return rc;
  const plan_plan *old = j.old;
  info->from_major = old->version_major;
  info->from_minor = old->version_minor;
  info->program_by_path = !old->program_inline;
  if ((rc = program_versions(&j)) ||
      (rc = hashes_as(info->before, info->has, old, old->version_major,
                      old->version_minor, j.pmaj, j.pmin)))
    goto done;
  if (old->version_major >= PLAN_FORMAT_MAJOR) { /* already current */
    memcpy(info->after, info->before, sizeof info->after);
    goto done;
  }
  int vline, hline;
  plan_pos record_at;
  if ((rc = scan_root(data, size, name, &vline, &hline, &record_at)))
    goto done;
  if (record_at.line) {
    rc = plan_fail(PLAN_EINVALID, name, record_at.line, record_at.col,
                   "the file already has an '%s' key; remove it to upgrade",
                   RECORD_KEY);
    goto done;
  }
  snprintf(j.old_version, sizeof j.old_version, "%d.%d", old->version_major,
           old->version_minor);
  record_text(&rec, &j);
  const char *record = plan_buf_cstr(&rec);
  if (rec.failed) {
    rc = plan_oom();
    goto done;
  }
  info->layout_kept = 1;
  if (!edit_text(&b, data, size, vline, j.old_version, record) &&
      (rc = relayout(&b, &j, record)))
    goto done;
  if (b.failed) {
    rc = plan_oom();
    goto done;
  }
  if (j.rerecord && (rc = rerecord_hash(&b, &j)))
    goto done;
  if ((rc = check_result(&b, &j)))
    goto done;
  info->upgraded = 1;
  rc = plan_buf_take(&b, out, len);
done:
  plan_buf_free(&rec);
  plan_buf_free(&b);
  plan_free(j.old);
  return rc;
}
