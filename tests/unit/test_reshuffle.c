/* The acceptance test for hash invariance: every example (the .yaml files of
 * examples/, and the valid conformance vectors in spec/vectors/valid/ when
 * present) is parsed with libyaml into an event tree, rewritten several ways
 * that keep its meaning, emitted with libyaml's emitter, loaded again, and must
 * give the same hash for every part as the original file. The rewrites:
 * - the key order of every mapping reversed, or rotated;
 * - every collection in block style, or in flow style, or alternating;
 * - strings re-quoted (only scalars that are not numbers, booleans or null:
 *   quoting a number would make it a string in generic provenance values);
 * - floats respelled ("1e-5" as "1.0000000000000001e-05"), non-negative
 *   integers with a plus sign;
 * - comments on every line, blank lines, another indentation.
 * The test runs from the repository root. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "libplan/libplan.h"
#include "base/util.h"

/* ---- an event tree ----------------------------------------------------------
 */

typedef enum { N_SCALAR, N_SEQ, N_MAP } nkind;

typedef struct node {
  nkind kind;
  char *tag; /* explicit tag or NULL */
  char *value;
  size_t len;
  yaml_scalar_style_t style;
  struct node **kids; /* SEQ: items; MAP: key, value, key, value, ... */
  size_t n, cap;
} node;

static node *node_new(nkind kind) {
  node *n = calloc(1, sizeof *n);
  assert_non_null(n);
  n->kind = kind;
  return n;
}

static void node_add(node *parent, node *kid) {
  if (parent->n == parent->cap) {
    parent->cap = parent->cap ? parent->cap * 2 : 8;
    parent->kids = realloc(parent->kids, parent->cap * sizeof *parent->kids);
    assert_non_null(parent->kids);
  }
  parent->kids[parent->n++] = kid;
}

static void node_free(node *n) {
  if (!n)
    return;
  for (size_t i = 0; i < n->n; i++)
    node_free(n->kids[i]);
  free(n->kids);
  free(n->tag);
  free(n->value);
  free(n);
}

static char *dup_tag(const yaml_char_t *tag) {
  return tag ? strdup((const char *)tag) : NULL;
}

/* Reads the next node from the parser (after its first event `ev`). */
static node *read_node(yaml_parser_t *p, yaml_event_t *ev) {
  node *n;
  switch (ev->type) {
  case YAML_SCALAR_EVENT:
    n = node_new(N_SCALAR);
    n->tag = dup_tag(ev->data.scalar.tag);
    n->len = ev->data.scalar.length;
    n->value = malloc(n->len + 1);
    assert_non_null(n->value);
    memcpy(n->value, ev->data.scalar.value, n->len);
    n->value[n->len] = 0;
    n->style = ev->data.scalar.style;
    yaml_event_delete(ev);
    return n;
  case YAML_SEQUENCE_START_EVENT:
  case YAML_MAPPING_START_EVENT: {
    bool map = ev->type == YAML_MAPPING_START_EVENT;
    n = node_new(map ? N_MAP : N_SEQ);
    n->tag =
        dup_tag(map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag);
    yaml_event_delete(ev);
    for (;;) {
      yaml_event_t kid;
      assert_true(yaml_parser_parse(p, &kid));
      if (kid.type == YAML_SEQUENCE_END_EVENT ||
          kid.type == YAML_MAPPING_END_EVENT) {
        yaml_event_delete(&kid);
        return n;
      }
      node_add(n, read_node(p, &kid));
    }
  }
  default:
    fail_msg("unexpected YAML event %d (anchors are not used in plans)",
             (int)ev->type);
    return NULL;
  }
}

static node *parse_text(const char *text, size_t len) {
  yaml_parser_t p;
  yaml_event_t ev;
  assert_true(yaml_parser_initialize(&p));
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  node *root = NULL;
  for (;;) {
    if (!yaml_parser_parse(&p, &ev))
      fail_msg("libyaml cannot parse the file: %s", p.problem);
    if (ev.type == YAML_STREAM_END_EVENT) {
      yaml_event_delete(&ev);
      break;
    }
    if (ev.type == YAML_SEQUENCE_START_EVENT ||
        ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SCALAR_EVENT) {
      assert_null(root); /* one document */
      root = read_node(&p, &ev);
      continue;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  assert_non_null(root);
  return root;
}

/* ---- rewrites
 * --------------------------------------------------------------------- */

typedef enum {
  KEYS_KEEP,
  KEYS_REVERSE,
  KEYS_ROTATE,
  KEYS_ROTATE_HALF
} keys_mode;
typedef enum {
  STYLE_KEEP,
  STYLE_BLOCK,
  STYLE_FLOW,
  STYLE_ALTERNATE
} style_mode;

typedef struct variant {
  const char *name;
  keys_mode keys;
  style_mode style;
  bool requote;  /* strings double-quoted */
  bool respell;  /* floats and integers spelled otherwise */
  bool comments; /* a comment on every line, blank lines */
  int indent;
} variant;

static const variant variants[] = {
    {"reversed keys, block, quoted, respelled, comments", KEYS_REVERSE,
     STYLE_BLOCK, true, true, true, 4},
    {"rotated keys, flow", KEYS_ROTATE, STYLE_FLOW, false, false, true, 2},
    {"reversed keys, alternating styles, quoted", KEYS_REVERSE, STYLE_ALTERNATE,
     true, false, false, 3},
    {"keys rotated by half, original styles, respelled", KEYS_ROTATE_HALF,
     STYLE_KEEP, false, true, false, 2},
    {"rotated keys, flow, quoted, respelled", KEYS_ROTATE, STYLE_FLOW, true,
     true, false, 2},
};

static void swap_pair(node *m, size_t i, size_t j) {
  node *k = m->kids[2 * i], *v = m->kids[2 * i + 1];
  m->kids[2 * i] = m->kids[2 * j];
  m->kids[2 * i + 1] = m->kids[2 * j + 1];
  m->kids[2 * j] = k;
  m->kids[2 * j + 1] = v;
}

static void reverse_pairs(node *m, size_t from, size_t to) { /* [from, to) */
  while (from + 1 < to) {
    swap_pair(m, from, to - 1);
    from++;
    to--;
  }
}

/* Rotates the pairs left by r. */
static void rotate_pairs(node *m, size_t r) {
  size_t np = m->n / 2;
  if (np < 2)
    return;
  r %= np;
  reverse_pairs(m, 0, r);
  reverse_pairs(m, r, np);
  reverse_pairs(m, 0, np);
}

/* Does libplan's reader type this plain scalar (null, bool, int, float)? */
static bool is_typed(const char *s, size_t len) {
  static const char *const words[] = {"",      "~",     "null",  "Null",
                                      "NULL",  "true",  "True",  "TRUE",
                                      "false", "False", "FALSE", NULL};
  for (const char *const *w = words; *w; w++)
    if (!strcmp(s, *w))
      return true;
  int64_t i;
  double d;
  return plan_parse_int64(s, len, &i) || plan_parse_double(s, len, &d);
}

static void set_value(node *n, const char *text) {
  free(n->value);
  n->value = strdup(text);
  assert_non_null(n->value);
  n->len = strlen(text);
}

/* Respells a number, or double-quotes a string; `keep_text` (keys and the
 * format version) allows quoting only. Typed plain scalars (numbers,
 * booleans, null) are never quoted. */
static void rewrite_scalar(node *n, const variant *v, bool keep_text) {
  bool plain = !n->tag && n->style == YAML_PLAIN_SCALAR_STYLE;
  int64_t i;
  double d;
  if (plain && !keep_text && v->respell) {
    if (plan_parse_int64(n->value, n->len, &i)) {
      if (i >= 0 && n->value[0] != '+') {
        char buf[32];
        snprintf(buf, sizeof buf, "+%lld", (long long)i);
        set_value(n, buf);
      }
      return;
    }
    if (plan_parse_double(n->value, n->len, &d)) {
      if (d == d && d - d == 0) { /* finite */
        char buf[48];
        snprintf(buf, sizeof buf, "%.17g", d);
        if (!strpbrk(buf, ".e"))
          strcat(buf, ".0"); /* keep it a float */
        assert_true(strtod(buf, NULL) == d);
        set_value(n, buf);
      }
      return;
    }
  }
  if (!v->requote || n->tag || (plain && is_typed(n->value, n->len)))
    return;
  n->style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

static void rewrite(node *n, const variant *v, bool is_root) {
  if (n->kind == N_SCALAR)
    return;
  if (n->kind == N_MAP) {
    switch (v->keys) {
    case KEYS_REVERSE:
      reverse_pairs(n, 0, n->n / 2);
      break;
    case KEYS_ROTATE:
      rotate_pairs(n, 1);
      break;
    case KEYS_ROTATE_HALF:
      rotate_pairs(n, n->n / 4 + 1);
      break;
    case KEYS_KEEP:
      break;
    }
    for (size_t i = 0; i < n->n; i += 2) {
      node *k = n->kids[i], *val = n->kids[i + 1];
      bool version =
          is_root && k->kind == N_SCALAR && !strcmp(k->value, "libplan");
      if (k->kind == N_SCALAR)
        rewrite_scalar(k, v, true); /* keys are quoted, never respelled */
      if (val->kind == N_SCALAR)
        rewrite_scalar(val, v, version);
      else
        rewrite(val, v, false);
    }
    return;
  }
  for (size_t i = 0; i < n->n; i++) {
    if (n->kids[i]->kind == N_SCALAR)
      rewrite_scalar(n->kids[i], v, false);
    else
      rewrite(n->kids[i], v, false);
  }
}

/* ---- emitting
 * ------------------------------------------------------------------------ */

typedef struct outbuf {
  char *data;
  size_t len, cap;
} outbuf;

static int out_write(void *ctx, unsigned char *buf, size_t size) {
  outbuf *o = ctx;
  if (o->len + size + 1 > o->cap) {
    o->cap = (o->len + size + 1) * 2;
    o->data = realloc(o->data, o->cap);
    if (!o->data)
      return 0;
  }
  memcpy(o->data + o->len, buf, size);
  o->len += size;
  o->data[o->len] = 0;
  return 1;
}

static void emit(yaml_emitter_t *e, yaml_event_t *ev) {
  if (!yaml_emitter_emit(e, ev))
    fail_msg("libyaml cannot emit: %s", e->problem ? e->problem : "?");
}

static void emit_node(yaml_emitter_t *e, const node *n, const variant *v,
                      int depth) {
  yaml_event_t ev;
  if (n->kind == N_SCALAR) {
    /* an untagged scalar stays untagged whatever style the emitter picks */
    int implicit = n->tag == NULL;
    assert_true(yaml_scalar_event_initialize(
        &ev, NULL, (yaml_char_t *)n->tag, (yaml_char_t *)n->value, (int)n->len,
        implicit, implicit, n->style));
    emit(e, &ev);
    return;
  }
  bool flow;
  switch (v->style) {
  case STYLE_FLOW:
    flow = true;
    break;
  case STYLE_ALTERNATE:
    flow = depth % 2 == 1;
    break;
  default:
    flow = false;
  }
  if (n->kind == N_MAP)
    assert_true(yaml_mapping_start_event_initialize(
        &ev, NULL, (yaml_char_t *)n->tag, n->tag == NULL,
        v->style == STYLE_KEEP ? YAML_ANY_MAPPING_STYLE
        : flow                 ? YAML_FLOW_MAPPING_STYLE
                               : YAML_BLOCK_MAPPING_STYLE));
  else
    assert_true(yaml_sequence_start_event_initialize(
        &ev, NULL, (yaml_char_t *)n->tag, n->tag == NULL,
        v->style == STYLE_KEEP ? YAML_ANY_SEQUENCE_STYLE
        : flow                 ? YAML_FLOW_SEQUENCE_STYLE
                               : YAML_BLOCK_SEQUENCE_STYLE));
  emit(e, &ev);
  for (size_t i = 0; i < n->n; i++)
    emit_node(e, n->kids[i], v, depth + 1);
  if (n->kind == N_MAP)
    assert_true(yaml_mapping_end_event_initialize(&ev));
  else
    assert_true(yaml_sequence_end_event_initialize(&ev));
  emit(e, &ev);
}

static char *emit_text(const node *root, const variant *v) {
  yaml_emitter_t e;
  yaml_event_t ev;
  outbuf o = {NULL, 0, 0};
  assert_true(yaml_emitter_initialize(&e));
  yaml_emitter_set_output(&e, out_write, &o);
  yaml_emitter_set_unicode(&e, 1);
  yaml_emitter_set_width(&e, -1); /* no folding: one line per scalar */
  yaml_emitter_set_indent(&e, v->indent);
  assert_true(yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
  emit(&e, &ev);
  assert_true(yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
  emit(&e, &ev);
  emit_node(&e, root, v, 0);
  assert_true(yaml_document_end_event_initialize(&ev, 1));
  emit(&e, &ev);
  assert_true(yaml_stream_end_event_initialize(&ev));
  emit(&e, &ev);
  yaml_emitter_delete(&e);
  assert_non_null(o.data);
  return o.data;
}

/* A comment after every line and blank lines between. Only safe when no
 * scalar spans lines (block scalars were re-quoted, width is unlimited). */
static char *add_comments(const char *text) {
  size_t n = strlen(text), lines = 1;
  for (size_t i = 0; i < n; i++)
    lines += text[i] == '\n';
  char *out = malloc(n + lines * 24 + 64);
  assert_non_null(out);
  char *o = out;
  o += sprintf(o, "# reshuffled\n\n");
  const char *s = text;
  int k = 0;
  while (*s) {
    const char *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    memcpy(o, s, len);
    o += len;
    if (len)
      o += sprintf(o, "  # c%d", k++);
    *o++ = '\n';
    if (k % 3 == 0)
      *o++ = '\n';
    if (!eol)
      break;
    s = eol + 1;
  }
  o += sprintf(o, "# the end\n");
  *o = 0;
  return out;
}

static bool has_multiline_scalar(const node *n) {
  if (n->kind == N_SCALAR)
    return (n->style == YAML_LITERAL_SCALAR_STYLE ||
            n->style == YAML_FOLDED_SCALAR_STYLE ||
            n->style == YAML_PLAIN_SCALAR_STYLE) &&
           memchr(n->value, '\n', n->len);
  for (size_t i = 0; i < n->n; i++)
    if (has_multiline_scalar(n->kids[i]))
      return true;
  return false;
}

/* ---- the test
 * ------------------------------------------------------------------------ */

typedef struct hashes {
  int rc[4];
  plan_hash h[4];
} hashes;

static hashes hashes_of(const plan_plan *p) {
  hashes hs;
  for (int k = 0; k < 4; k++) {
    hs.h[k].high = hs.h[k].low = 0;
    hs.rc[k] = plan_hash_part(&hs.h[k], p, (plan_part)k);
  }
  return hs;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void dir_of(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n >= size)
    n = size - 1;
  memcpy(dir, path, n);
  dir[n] = 0;
  if (!n)
    strcpy(dir, ".");
}

static int check_file(const char *path) {
  static const char *const parts[] = {"plan", "program", "mesh", "provenance"};
  plan_plan *p = NULL;
  int rc = plan_load(&p, path);
  if (rc) {
    char buf[1200];
    print_message("%s does not load: %s\n", path,
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
  hashes h0 = hashes_of(p);
  plan_free(p);

  char dir[512];
  dir_of(path, dir, sizeof dir);
  size_t len;
  char *orig = read_all(path, &len);
  int nvariants = 0;
  for (size_t vi = 0; vi < sizeof variants / sizeof *variants; vi++) {
    const variant *v = &variants[vi];
    node *root = parse_text(orig, len);
    rewrite(root, v, true);
    char *text = emit_text(root, v);
    if (v->comments && (v->requote || v->style == STYLE_FLOW) &&
        !has_multiline_scalar(root)) {
      char *c = add_comments(text);
      free(text);
      text = c;
    }
    node_free(root);
    assert_true(strcmp(text, orig) != 0);
    if (getenv("RESHUFFLE_DUMP")) /* to look at what the rewrites make */
      print_message("--- %s (%s):\n%s\n", path, v->name, text);

    plan_plan *q = NULL;
    rc = plan_load_buffer(&q, text, strlen(text), path, dir);
    if (rc) {
      char buf[1200];
      print_message("%s (%s) does not load: %s\n--- text:\n%s\n", path, v->name,
                    plan_error_format(buf, sizeof buf), text);
    }
    assert_int_equal(rc, PLAN_OK);
    hashes h1 = hashes_of(q);
    for (int k = 0; k < 4; k++) {
      bool same = h0.rc[k] == h1.rc[k] &&
                  (h0.rc[k] || plan_hash_equal(h0.h[k], h1.h[k]));
      if (!same) {
        char *c0 = NULL, *c1 = NULL;
        plan_plan *p0 = NULL;
        plan_load(&p0, path);
        plan_canonical(&c0, NULL, p0, (plan_part)k);
        plan_canonical(&c1, NULL, q, (plan_part)k);
        print_message("%s (%s): the %s hash changed\n  was %s\n  now %s\n"
                      "--- text:\n%s\n",
                      path, v->name, parts[k], c0 ? c0 : "-", c1 ? c1 : "-",
                      text);
        free(c0);
        free(c1);
        plan_free(p0);
      }
      assert_int_equal(h0.rc[k], h1.rc[k]);
      if (!h0.rc[k])
        assert_true(plan_hash_equal(h0.h[k], h1.h[k]));
    }
    plan_free(q);
    free(text);
    nvariants++;
  }
  free(orig);
  return nvariants;
}

static int check_glob(const char *pattern, bool required) {
  glob_t g;
  int grc = glob(pattern, 0, NULL, &g);
  if (grc) {
    if (required)
      print_message("no %s: run the test from the repository root\n", pattern);
    assert_false(required);
    return 0;
  }
  int n = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    check_file(g.gl_pathv[i]);
    n++;
  }
  globfree(&g);
  return n;
}

static void test_examples(void **state) {
  (void)state;
  int n = check_glob("examples/*.yaml", true);
  assert_true(n >= 1);
  print_message("reshuffle: %d examples x %zu variants\n", n,
                sizeof variants / sizeof *variants);
}

static void test_conformance_vectors(void **state) {
  (void)state;
  int n = check_glob("spec/vectors/valid/*.yaml", false);
  print_message("reshuffle: %d conformance vectors\n", n);
}

/* The rewrites themselves: reversing keys really reorders, quoting leaves
 * numbers alone, respelling keeps values. */
static void test_rewrites(void **state) {
  (void)state;
  static const char text[] =
      "a: 1\nb: [x, 2.5, true, null, \"q\"]\nc: {d: 1e-5, e: S(0)R}\n";
  node *root = parse_text(text, strlen(text));
  rewrite(root, &variants[0], true);
  char *out = emit_text(root, &variants[0]);
  /* reversed: c first */
  assert_true(strstr(out, "\"c\"") < strstr(out, "\"a\""));
  assert_non_null(strstr(out, "\"x\""));
  assert_non_null(strstr(out, "\"S(0)R\""));
  assert_non_null(strstr(out, "+1"));
  assert_non_null(strstr(out, "1.0000000000000001e-05"));
  assert_non_null(strstr(out, "true"));
  assert_null(strstr(out, "\"true\""));
  assert_null(strstr(out, "\"2.5\""));
  free(out);
  node_free(root);

  root = parse_text(text, strlen(text));
  rewrite(root, &variants[1], true);
  out = emit_text(root, &variants[1]);
  assert_int_equal(out[0], '{');
  assert_true(strstr(out, "b:") < strstr(out, "a:")); /* rotated by one */
  free(out);
  node_free(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rewrites),
      cmocka_unit_test(test_examples),
      cmocka_unit_test(test_conformance_vectors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
