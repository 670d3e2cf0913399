/* The YAML emitter of the plan writer (emit.h): strings plain where that
 * reads back as the same string and quoted otherwise, numbers in their
 * shortest round-trip spelling, literal blocks for multi-line text, and
 * generic values (provenance, x- keys) in block and flow style. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "write/emit.h"

/* ---- scalars --------------------------------------------------------------
 */

static bool looks_typed(const char *s) {
  int64_t i;
  double d;
  size_t n = strlen(s);
  static const char *const words[] = {
      "",      "~",     "null",  "Null", "NULL", "true", "True", "TRUE",
      "false", "False", "FALSE", "yes",  "no",   "on",   "off",  "Yes",
      "No",    "On",    "Off",   "y",    "n",    "Y",    "N",    NULL};
  for (const char *const *w = words; *w; w++)
    if (!strcmp(s, *w))
      return true;
  return plan_parse_int64(s, n, &i) || plan_parse_double(s, n, &d) ||
         strspn(s, "0123456789+-.eExXoObB_:") == n;
}

static bool plain_safe(const char *s) {
  if (!*s || looks_typed(s))
    return false;
  unsigned char c0 = (unsigned char)s[0];
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') ||
        (c0 >= '0' && c0 <= '9') || c0 == '_' || c0 == '/' || c0 == '.' ||
        c0 == '('))
    return false;
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("_.-/()=+", c);
    if (!ok)
      return false;
  }
  return true;
}

void plan_w_str(plan_buf *b, const char *s) {
  if (plain_safe(s)) {
    plan_buf_puts(b, s);
    return;
  }
  plan_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"':
      plan_buf_puts(b, "\\\"");
      break;
    case '\\':
      plan_buf_puts(b, "\\\\");
      break;
    case '\n':
      plan_buf_puts(b, "\\n");
      break;
    case '\t':
      plan_buf_puts(b, "\\t");
      break;
    case '\r':
      plan_buf_puts(b, "\\r");
      break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        plan_buf_printf(b, "\\x%02x", *p);
      else
        plan_buf_putc(b, (char)*p);
    }
  }
  plan_buf_putc(b, '"');
}

void plan_w_num(plan_buf *b, double v) {
  char buf[40];
  if (v != v)
    plan_buf_puts(b, ".nan");
  else if (v > 1.7976931348623157e308)
    plan_buf_puts(b, ".inf");
  else if (v < -1.7976931348623157e308)
    plan_buf_puts(b, "-.inf");
  else if (v == 0 && signbit(v))
    plan_buf_puts(b, "-0.0"); /* "-0" would read back as the integer 0 */
  else
    plan_buf_puts(b, plan_format_double(v, buf));
}

void plan_w_pl(plan_buf *b, const plan_placement *p, const plan_mesh *m) {
  char buf[PLAN_PLACEMENT_STRLEN];
  if (m && plan_placement_has_ratios(p)) { /* S(0|3:2)R: any length */
    plan_buf t;
    plan_buf_init(&t);
    plan_placement_put(&t, p, m->ratios, m->nratios);
    if (t.failed)
      b->failed = true;
    else
      plan_w_str(b, plan_buf_cstr(&t));
    plan_buf_free(&t);
    return;
  }
  plan_w_str(b, plan_placement_format(p, buf));
}

void plan_w_indent(plan_buf *b, int n) {
  for (int i = 0; i < n; i++)
    plan_buf_putc(b, ' ');
}

/* A literal block scalar keeps Lua bodies readable; only text that the block
 * form reproduces exactly qualifies. */
static bool block_safe(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || s[0] == ' ' || s[0] == '\n')
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c < 0x20 && c != '\n') || c == 0x7f)
      return false;
    if (c == '\n' && i > 0 && s[i - 1] == ' ')
      return false;
  }
  return s[n - 1] != ' ';
}

void plan_w_text(plan_buf *b, const char *s, int ind) {
  if (!block_safe(s)) {
    plan_w_str(b, s);
    plan_buf_putc(b, '\n');
    return;
  }
  size_t n = strlen(s);
  int trailing = 0;
  while (trailing < (int)n && s[n - 1 - (size_t)trailing] == '\n')
    trailing++;
  plan_buf_puts(b, trailing == 0 ? "|-\n" : trailing == 1 ? "|\n" : "|+\n");
  const char *p = s;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      plan_w_indent(b, ind);
      plan_buf_append(b, p, len);
    }
    plan_buf_putc(b, '\n');
    if (!e)
      break;
    p = e + 1;
  }
}

/* Generic values in block style (provenance, x- keys). */
static void w_value(plan_buf *b, const plan_value *v, int ind);

/* A value after "key:" or "-": scalars follow on the same line after
 * `lead` (a space), collections start on the next lines. No trailing
 * spaces. */
void plan_w_value_inline(plan_buf *b, const plan_value *v, int ind,
                         const char *lead) {
  bool nested = (v->kind == PLAN_V_SEQ || v->kind == PLAN_V_MAP) && v->n > 0;
  if (!nested)
    plan_buf_puts(b, lead);
  switch (v->kind) {
  case PLAN_V_NULL:
    plan_buf_puts(b, "null\n");
    return;
  case PLAN_V_BOOL:
    plan_buf_puts(b, v->b ? "true\n" : "false\n");
    return;
  case PLAN_V_INT:
    plan_buf_printf(b, "%lld\n", (long long)v->i);
    return;
  case PLAN_V_FLOAT:
    plan_w_num(b, v->f);
    plan_buf_putc(b, '\n');
    return;
  case PLAN_V_STRING:
    if (v->block || strchr(v->s, '\n'))
      plan_w_text(b, v->s, ind);
    else {
      plan_w_str(b, v->s);
      plan_buf_putc(b, '\n');
    }
    return;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    if (!nested) {
      plan_buf_puts(b, v->kind == PLAN_V_SEQ ? "[]\n" : "{}\n");
      return;
    }
    plan_buf_putc(b, '\n');
    w_value(b, v, ind);
    return;
  }
}

static void w_value(plan_buf *b, const plan_value *v, int ind) {
  for (int i = 0; i < v->n; i++) {
    plan_w_indent(b, ind);
    if (v->kind == PLAN_V_SEQ) {
      plan_buf_putc(b, '-');
      plan_w_value_inline(b, v->items[i], ind + 2, " ");
    } else {
      plan_w_str(b, v->keys[i]);
      plan_buf_putc(b, ':');
      plan_w_value_inline(b, v->items[i], ind + 2, " ");
    }
  }
}

/* Flow style, for x- keys inside the one-line ops and tensors. */
static void w_value_flow(plan_buf *b, const plan_value *v) {
  switch (v->kind) {
  case PLAN_V_NULL:
    plan_buf_puts(b, "null");
    return;
  case PLAN_V_BOOL:
    plan_buf_puts(b, v->b ? "true" : "false");
    return;
  case PLAN_V_INT:
    plan_buf_printf(b, "%lld", (long long)v->i);
    return;
  case PLAN_V_FLOAT:
    plan_w_num(b, v->f);
    return;
  case PLAN_V_STRING:
    plan_w_str(b, v->s); /* quoted whenever not a safe plain scalar */
    return;
  case PLAN_V_SEQ:
  case PLAN_V_MAP:
    plan_buf_putc(b, v->kind == PLAN_V_SEQ ? '[' : '{');
    for (int i = 0; i < v->n; i++) {
      if (i)
        plan_buf_puts(b, ", ");
      if (v->kind == PLAN_V_MAP) {
        plan_w_str(b, v->keys[i]);
        plan_buf_puts(b, ": ");
      }
      w_value_flow(b, v->items[i]);
    }
    plan_buf_putc(b, v->kind == PLAN_V_SEQ ? ']' : '}');
    return;
  }
}

void plan_w_ext_flow(plan_buf *b, const plan_ext *e) {
  for (int i = 0; e && i < e->n; i++) {
    plan_buf_puts(b, ", ");
    plan_w_str(b, e->keys[i]);
    plan_buf_puts(b, ": ");
    w_value_flow(b, e->vals[i]);
  }
}

void plan_w_ext(plan_buf *b, const plan_ext *e, int ind) {
  if (!e)
    return;
  for (int i = 0; i < e->n; i++) {
    plan_w_indent(b, ind);
    plan_w_str(b, e->keys[i]);
    plan_buf_putc(b, ':');
    plan_w_value_inline(b, e->vals[i], ind + 2, " ");
  }
}
