/* Schema-directed reading of YAML trees; see reader.h. */
#include "yaml/reader.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/suggest.h"

int plan_rd_fail(const plan_reader *rd, const plan_ynode *at, int code,
                 const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return plan_fail(code, rd->file, at ? at->line : 0, at ? at->col : 0, "%s",
                   msg);
}

plan_pos plan_rd_pos(const plan_ynode *n) {
  plan_pos p = {0, 0};
  if (n) {
    p.line = n->line;
    p.col = n->col;
  }
  return p;
}

static const char *kind_word(const plan_ynode *n) {
  switch (n->kind) {
  case PLAN_Y_MAP:
    return "a mapping";
  case PLAN_Y_SEQ:
    return "a sequence";
  default:
    return "a scalar";
  }
}

int plan_rd_expect_map(const plan_reader *rd, const plan_ynode *n,
                       const char *what) {
  if (n->kind != PLAN_Y_MAP)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be a mapping, not %s",
                        what, kind_word(n));
  return PLAN_OK;
}

int plan_rd_expect_seq(const plan_reader *rd, const plan_ynode *n,
                       const char *what) {
  if (n->kind != PLAN_Y_SEQ)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be a sequence, not %s",
                        what, kind_word(n));
  return PLAN_OK;
}

int plan_rd_expect_scalar(const plan_reader *rd, const plan_ynode *n,
                          const char *what) {
  if (n->kind != PLAN_Y_SCALAR)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be a scalar, not %s",
                        what, kind_word(n));
  return PLAN_OK;
}

static int ext_add(const plan_reader *rd, plan_ext **ext, const char *key,
                   const plan_ynode *val) {
  if (!*ext) {
    *ext = plan_arena_alloc(rd->arena, sizeof **ext);
    if (!*ext)
      return plan_oom();
  }
  plan_ext *e = *ext;
  /* Extension keys are rare: grow by reallocating in the arena. */
  const char **keys =
      plan_arena_alloc(rd->arena, sizeof(char *) * (size_t)(e->n + 1));
  plan_value **vals =
      plan_arena_alloc(rd->arena, sizeof(plan_value *) * (size_t)(e->n + 1));
  if (!keys || !vals)
    return plan_oom();
  if (e->n) {
    memcpy(keys, e->keys, sizeof(char *) * (size_t)e->n);
    memcpy(vals, e->vals, sizeof(plan_value *) * (size_t)e->n);
  }
  keys[e->n] = plan_arena_strdup(rd->arena, key);
  if (!keys[e->n])
    return plan_oom();
  int rc = plan_rd_value(rd, val, &vals[e->n]);
  if (rc)
    return rc;
  e->keys = keys;
  e->vals = vals;
  e->n++;
  return PLAN_OK;
}

int plan_rd_check_doc_start(const plan_reader *rd, const plan_ynode *root,
                            const char *const *known) {
  if (!root || root->kind != PLAN_Y_MAP)
    return PLAN_OK;
  for (size_t i = 0; i < root->u.map.count; i++) {
    const plan_ynode *k = root->u.map.pairs[i].key;
    const char *key = k->u.scalar.text;
    if (!strcmp(key, "libplan"))
      return PLAN_OK;
    bool ok = !strncmp(key, "x-", 2);
    for (const char *const *kn = known; *kn && !ok; kn++)
      ok = !strcmp(*kn, key);
    if (!ok)
      return plan_rd_fail(rd, root, PLAN_ESCHEMA,
                          "not a libplan file: it does not start with "
                          "'libplan: \"%s\"' and its keys are not a plan's",
                          PLAN_FORMAT_STRING);
  }
  return PLAN_OK;
}

int plan_rd_check_keys(const plan_reader *rd, const plan_ynode *map,
                       const char *const *known, const char *what,
                       plan_ext **ext) {
  for (size_t i = 0; i < map->u.map.count; i++) {
    const plan_ynode *k = map->u.map.pairs[i].key;
    const char *key = k->u.scalar.text;
    if (strncmp(key, "x-", 2) == 0) {
      if (ext) {
        int rc = ext_add(rd, ext, key, map->u.map.pairs[i].value);
        if (rc)
          return rc;
      }
      continue;
    }
    bool ok = false;
    for (const char *const *kn = known; *kn; kn++)
      if ((*kn)[0] == key[0] && strcmp(*kn, key) == 0) {
        ok = true;
        break;
      }
    if (ok)
      continue;
    if (rd->ver_major == PLAN_FORMAT_MAJOR && rd->ver_minor > PLAN_FORMAT_MINOR)
      return plan_rd_fail(rd, k, PLAN_EVERSION,
                          "unknown field '%s' in %s: the file is format %d.%d, "
                          "this reader knows %s",
                          key, what, rd->ver_major, rd->ver_minor,
                          PLAN_FORMAT_STRING);
    char hint[PLAN_HINT_SIZE];
    plan_hint_names(hint, sizeof hint, key, known, (size_t)-1);
    return plan_rd_fail(rd, k, PLAN_ESCHEMA, "unknown field '%s' in %s%s", key,
                        what, hint);
  }
  return PLAN_OK;
}

int plan_rd_string(const plan_reader *rd, const plan_ynode *n, const char *what,
                   const char **out) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  *out = plan_arena_strndup(rd->arena, n->u.scalar.text, n->u.scalar.len);
  return *out ? PLAN_OK : plan_oom();
}

int plan_rd_name(const plan_reader *rd, const plan_ynode *n, const char *what,
                 const char **out) {
  int rc = plan_rd_check_name(rd, n, what);
  if (rc)
    return rc;
  *out = plan_arena_strndup(rd->arena, n->u.scalar.text, n->u.scalar.len);
  return *out ? PLAN_OK : plan_oom();
}

/* Whether s[0..len) holds a byte below 0x20 or 0x7f, eight bytes a step:
 * every op and tensor name of a document passes through here. */
static bool has_control(const char *s, size_t len) {
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    /* a byte below 0x20, or (w ^ 0x7f..) holding a zero byte; bytes of
     * 0x80 and up set their high bit in w and are masked out by ~w */
    uint64_t lt = (w - ones * 0x20) & ~w & highs;
    uint64_t x = w ^ (ones * 0x7f);
    uint64_t del = (x - ones) & ~x & highs;
    if (lt | del)
      return true;
  }
  for (; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f)
      return true;
  }
  return false;
}

int plan_rd_check_name(const plan_reader *rd, const plan_ynode *n,
                       const char *what) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  size_t len = n->u.scalar.len;
  if (len == 0)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must not be empty", what);
  if (len > PLAN_MAX_NAME)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "%s is longer than %d bytes", what,
                        PLAN_MAX_NAME);
  if (has_control(n->u.scalar.text, len))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s contains a control character",
                        what);
  return PLAN_OK;
}

int plan_rd_int(const plan_reader *rd, const plan_ynode *n, const char *what,
                int64_t *out) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  if (n->u.scalar.tag && strcmp(n->u.scalar.tag, "int") != 0)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be an integer", what);
  if (!plan_parse_int64(n->u.scalar.text, n->u.scalar.len, out))
    return plan_rd_fail(
        rd, n, PLAN_ESCHEMA,
        "%s must be an integer that fits in 64 bits, not '%.40s'", what,
        n->u.scalar.text);
  return PLAN_OK;
}

int plan_rd_number(const plan_reader *rd, const plan_ynode *n, const char *what,
                   double *out) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  if (!plan_parse_double(n->u.scalar.text, n->u.scalar.len, out))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be a number, not '%.40s'",
                        what, n->u.scalar.text);
  if (*out != *out)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be a number, not NaN",
                        what);
  if (isinf(*out))
    return plan_rd_fail(rd, n, PLAN_ESCHEMA, "%s must be finite", what);
  return PLAN_OK;
}

int plan_rd_bool(const plan_reader *rd, const plan_ynode *n, const char *what,
                 bool *out) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  const char *t = n->u.scalar.text;
  if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE"))
    *out = true;
  else if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE"))
    *out = false;
  else
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "%s must be true or false, not '%.40s'", what, t);
  return PLAN_OK;
}

int plan_rd_int_list(const plan_reader *rd, const plan_ynode *n,
                     const char *what, int64_t **out, int *count, int max) {
  int rc = plan_rd_expect_seq(rd, n, what);
  if (rc)
    return rc;
  if (n->u.seq.count > (size_t)max)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "%s has more than %d entries", what,
                        max);
  int64_t *v =
      plan_arena_alloc(rd->arena, sizeof(int64_t) * (n->u.seq.count + 1));
  if (!v)
    return plan_oom();
  for (size_t i = 0; i < n->u.seq.count; i++)
    if ((rc = plan_rd_int(rd, n->u.seq.items[i], what, &v[i])))
      return rc;
  *out = v;
  *count = (int)n->u.seq.count;
  return PLAN_OK;
}

int plan_rd_name_list(const plan_reader *rd, const plan_ynode *n,
                      const char *what, const char ***out, int *count) {
  if (n->kind == PLAN_Y_SCALAR) {
    const char **v = plan_arena_alloc(rd->arena, sizeof(char *));
    if (!v)
      return plan_oom();
    int rc = plan_rd_name(rd, n, what, &v[0]);
    if (rc)
      return rc;
    *out = v;
    *count = 1;
    return PLAN_OK;
  }
  int rc = plan_rd_expect_seq(rd, n, what);
  if (rc)
    return rc;
  if (n->u.seq.count > (size_t)INT32_MAX / 8)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "%s is too long", what);
  const char **v =
      plan_arena_alloc(rd->arena, sizeof(char *) * (n->u.seq.count + 1));
  if (!v)
    return plan_oom();
  for (size_t i = 0; i < n->u.seq.count; i++)
    if ((rc = plan_rd_name(rd, n->u.seq.items[i], what, &v[i])))
      return rc;
  *out = v;
  *count = (int)n->u.seq.count;
  return PLAN_OK;
}

int plan_rd_name_nodes(const plan_reader *rd, const plan_ynode *n,
                       const char *what, const plan_ynode *const **items,
                       int *count) {
  int rc;
  if (n->kind == PLAN_Y_SCALAR) {
    if ((rc = plan_rd_check_name(rd, n, what)))
      return rc;
    *items = NULL; /* the one name is n itself */
    *count = 1;
    return PLAN_OK;
  }
  if ((rc = plan_rd_expect_seq(rd, n, what)))
    return rc;
  if (n->u.seq.count > (size_t)INT32_MAX / 8)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "%s is too long", what);
  for (size_t i = 0; i < n->u.seq.count; i++)
    if ((rc = plan_rd_check_name(rd, n->u.seq.items[i], what)))
      return rc;
  *items = (const plan_ynode *const *)n->u.seq.items;
  *count = (int)n->u.seq.count;
  return PLAN_OK;
}

static bool text_in(const char *t, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(t, *list))
      return true;
  return false;
}

int plan_rd_value(const plan_reader *rd, const plan_ynode *n,
                  plan_value **out) {
  plan_value *v = plan_arena_alloc(rd->arena, sizeof *v);
  if (!v)
    return plan_oom();
  *out = v;
  int rc;
  if (n->kind == PLAN_Y_SCALAR) {
    const char *t = n->u.scalar.text;
    const char *tag = n->u.scalar.tag;
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    bool plain = n->u.scalar.style == PLAN_Y_PLAIN;
    if (tag && !strcmp(tag, "str"))
      plain = false;
    if ((plain || (tag && !strcmp(tag, "null"))) && text_in(t, nulls)) {
      v->kind = PLAN_V_NULL;
      return PLAN_OK;
    }
    if ((plain || (tag && !strcmp(tag, "bool"))) &&
        (text_in(t, trues) || text_in(t, falses))) {
      v->kind = PLAN_V_BOOL;
      v->b = text_in(t, trues);
      return PLAN_OK;
    }
    if ((plain || (tag && !strcmp(tag, "int"))) &&
        plan_parse_int64(t, n->u.scalar.len, &v->i)) {
      v->kind = PLAN_V_INT;
      return PLAN_OK;
    }
    if ((plain || (tag && !strcmp(tag, "float"))) &&
        plan_parse_double(t, n->u.scalar.len, &v->f)) {
      v->kind = PLAN_V_FLOAT;
      return PLAN_OK;
    }
    if (tag && strcmp(tag, "str") != 0)
      return plan_rd_fail(rd, n, PLAN_ESCHEMA, "'%.40s' is not a valid !!%s", t,
                          tag);
    v->kind = PLAN_V_STRING;
    v->block = n->u.scalar.style == PLAN_Y_BLOCK;
    v->s = plan_arena_strndup(rd->arena, t, n->u.scalar.len);
    return v->s ? PLAN_OK : plan_oom();
  }
  if (n->kind == PLAN_Y_SEQ) {
    v->kind = PLAN_V_SEQ;
    v->n = (int)n->u.seq.count;
    v->items =
        plan_arena_alloc(rd->arena, sizeof(plan_value *) * (size_t)(v->n + 1));
    if (!v->items)
      return plan_oom();
    for (int i = 0; i < v->n; i++)
      if ((rc = plan_rd_value(rd, n->u.seq.items[i], &v->items[i])))
        return rc;
    return PLAN_OK;
  }
  v->kind = PLAN_V_MAP;
  v->n = (int)n->u.map.count;
  v->items =
      plan_arena_alloc(rd->arena, sizeof(plan_value *) * (size_t)(v->n + 1));
  v->keys = plan_arena_alloc(rd->arena, sizeof(char *) * (size_t)(v->n + 1));
  if (!v->items || !v->keys)
    return plan_oom();
  for (int i = 0; i < v->n; i++) {
    const plan_ynode *k = n->u.map.pairs[i].key;
    v->keys[i] =
        plan_arena_strndup(rd->arena, k->u.scalar.text, k->u.scalar.len);
    if (!v->keys[i])
      return plan_oom();
    if ((rc = plan_rd_value(rd, n->u.map.pairs[i].value, &v->items[i])))
      return rc;
  }
  return PLAN_OK;
}

int plan_rd_enum(const plan_reader *rd, const plan_ynode *n, const char *what,
                 const char *const *names, int count, int *out) {
  int rc = plan_rd_expect_scalar(rd, n, what);
  if (rc)
    return rc;
  for (int i = 0; i < count; i++)
    if (names[i] && !strcmp(names[i], n->u.scalar.text)) {
      *out = i;
      return PLAN_OK;
    }
  char list[256] = "";
  size_t used = 0;
  for (int i = 0; i < count && used < sizeof list - 32; i++) {
    if (!names[i])
      continue;
    int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                     names[i]);
    if (w > 0)
      used += (size_t)w;
  }
  return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                      "unknown %s '%.60s' (expected one of: %s)", what,
                      n->u.scalar.text, list);
}
