/* Unit tests for yamldoc.c: the positioned YAML tree and the hostile-input
 * limits of yamldoc.h. Every error is checked for its code, its 1-based
 * line and column, and the words of its message. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libplan/common.h"
#include "base/util.h"
#include "yaml/yamldoc.h"

/* ---- helpers ------------------------------------------------------------- */

static int parse_n(plan_ydoc *doc, const char *text, size_t len) {
  return plan_ydoc_parse_buffer(doc, text, len, "t.yaml");
}

static int parse(plan_ydoc *doc, const char *text) {
  return parse_n(doc, text, strlen(text));
}

/* Parses text (len bytes) expecting failure with code at line:col and a
 * message containing `words`; the document must come back empty. */
static void expect_error_n(const char *text, size_t len, int code, int line,
                           int col, const char *words) {
  plan_ydoc doc;
  int rc = parse_n(&doc, text, len);
  const plan_error *e = plan_error_last();
  if (rc != code || e->line != line || e->column != col ||
      !strstr(e->message, words))
    print_message("got %d %s:%d:%d: %s\n", rc, e->file, e->line, e->column,
                  e->message);
  assert_int_equal(rc, code);
  assert_int_equal(e->code, code);
  assert_string_equal(e->file, "t.yaml");
  assert_int_equal(e->line, line);
  assert_int_equal(e->column, col);
  assert_non_null(strstr(e->message, words));
  assert_null(doc.root);
  plan_ydoc_free(&doc);
}

static void expect_error(const char *text, int code, int line, int col,
                         const char *words) {
  expect_error_n(text, strlen(text), code, line, col, words);
}

static void assert_scalar(const plan_ynode *n, const char *text, int line,
                          int col) {
  assert_non_null(n);
  assert_int_equal(n->kind, PLAN_Y_SCALAR);
  assert_string_equal(n->u.scalar.text, text);
  assert_int_equal(n->u.scalar.len, strlen(text));
  assert_int_equal(n->line, line);
  assert_int_equal(n->col, col);
}

/* Structural equality, ignoring positions and scalar styles. */
static bool same_tree(const plan_ynode *a, const plan_ynode *b) {
  if (a->kind != b->kind)
    return false;
  switch (a->kind) {
  case PLAN_Y_SCALAR:
    return a->u.scalar.len == b->u.scalar.len &&
           memcmp(a->u.scalar.text, b->u.scalar.text, a->u.scalar.len) == 0;
  case PLAN_Y_SEQ:
    if (a->u.seq.count != b->u.seq.count)
      return false;
    for (size_t i = 0; i < a->u.seq.count; i++)
      if (!same_tree(a->u.seq.items[i], b->u.seq.items[i]))
        return false;
    return true;
  case PLAN_Y_MAP:
    if (a->u.map.count != b->u.map.count)
      return false;
    for (size_t i = 0; i < a->u.map.count; i++)
      if (!same_tree(a->u.map.pairs[i].key, b->u.map.pairs[i].key) ||
          !same_tree(a->u.map.pairs[i].value, b->u.map.pairs[i].value))
        return false;
    return true;
  }
  return false;
}

/* A growable string for generated inputs. */
typedef struct gen {
  char *s;
  size_t len, cap;
} gen;

static void gen_put(gen *g, const char *s, size_t n) {
  if (g->len + n + 1 > g->cap) {
    size_t ncap = g->cap ? g->cap : 1024;
    while (ncap < g->len + n + 1)
      ncap *= 2;
    g->s = realloc(g->s, ncap);
    assert_non_null(g->s);
    g->cap = ncap;
  }
  memcpy(g->s + g->len, s, n);
  g->len += n;
  g->s[g->len] = '\0';
}

static void gen_puts(gen *g, const char *s) {
  gen_put(g, s, strlen(s));
}

static void gen_printf(gen *g, const char *fmt, ...) PLAN_PRINTF(2, 3);
static void gen_printf(gen *g, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof buf);
  gen_put(g, buf, (size_t)n);
}

/* The process's CPU time, scaled down in sanitizer builds: the bounds below
 * catch quadratic work (seconds become minutes), so they must neither
 * count time other processes take on a loaded machine nor the sanitizers'
 * constant factor. */
#if defined(__SANITIZE_ADDRESS__)
#define TIME_SCALE 4.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TIME_SCALE 4.0
#endif
#endif
#ifndef TIME_SCALE
#define TIME_SCALE 1.0
#endif
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9) / TIME_SCALE;
}

/* ---- trees and positions ------------------------------------------------- */

static void test_positions(void **state) {
  (void)state;
  plan_ydoc doc;
  const char *text = "version: 0.1\n"
                     "ops:\n"
                     "  - name: mlp.fc1\n"
                     "    shape: [4, 8]\n"
                     "  - name: \"é.x\"\n"
                     "    attrs: {k: v}\n";
  assert_int_equal(parse(&doc, text), PLAN_OK);
  assert_string_equal(doc.file, "t.yaml");
  const plan_ynode *root = doc.root;
  assert_non_null(root);
  assert_int_equal(root->kind, PLAN_Y_MAP);
  assert_int_equal(root->line, 1);
  assert_int_equal(root->col, 1);
  assert_int_equal(root->u.map.count, 2);
  assert_scalar(root->u.map.pairs[0].key, "version", 1, 1);
  assert_scalar(root->u.map.pairs[0].value, "0.1", 1, 10);
  assert_scalar(root->u.map.pairs[1].key, "ops", 2, 1);

  const plan_ynode *ops = plan_ymap_get(root, "ops");
  assert_non_null(ops);
  assert_int_equal(ops->kind, PLAN_Y_SEQ);
  assert_int_equal(ops->line, 3);
  assert_int_equal(ops->col, 3);
  assert_int_equal(ops->u.seq.count, 2);

  const plan_ynode *op0 = ops->u.seq.items[0];
  assert_int_equal(op0->kind, PLAN_Y_MAP);
  assert_int_equal(op0->line, 3);
  assert_int_equal(op0->col, 5);
  assert_scalar(plan_ymap_get(op0, "name"), "mlp.fc1", 3, 11);
  const plan_ynode *shape = plan_ymap_get(op0, "shape");
  assert_int_equal(shape->kind, PLAN_Y_SEQ);
  assert_int_equal(shape->line, 4);
  assert_int_equal(shape->col, 12);
  assert_scalar(shape->u.seq.items[0], "4", 4, 13);
  assert_scalar(shape->u.seq.items[1], "8", 4, 16);

  /* Columns count characters, not bytes: "é" is one column. */
  const plan_ynode *op1 = ops->u.seq.items[1];
  assert_scalar(plan_ymap_get(op1, "name"), "é.x", 5, 11);
  const plan_ynode *attrs = plan_ymap_get(op1, "attrs");
  assert_int_equal(attrs->kind, PLAN_Y_MAP);
  assert_int_equal(attrs->line, 6);
  assert_int_equal(attrs->col, 12);
  assert_scalar(attrs->u.map.pairs[0].key, "k", 6, 13);
  assert_scalar(attrs->u.map.pairs[0].value, "v", 6, 16);
  assert_null(plan_ymap_get(op1, "missing"));
  assert_null(plan_ymap_get(ops, "name")); /* not a mapping */
  assert_null(plan_ymap_get(NULL, "name"));
  plan_ydoc_free(&doc);
  plan_ydoc_free(&doc); /* freeing twice is harmless */
  plan_ydoc_free(NULL);
}

static void test_root_scalar_and_empty_collections(void **state) {
  (void)state;
  plan_ydoc doc;
  assert_int_equal(parse(&doc, "hello\n"), PLAN_OK);
  assert_scalar(doc.root, "hello", 1, 1);
  plan_ydoc_free(&doc);

  assert_int_equal(parse(&doc, "a: []\nb: {}\n"), PLAN_OK);
  const plan_ynode *a = plan_ymap_get(doc.root, "a");
  const plan_ynode *b = plan_ymap_get(doc.root, "b");
  assert_int_equal(a->kind, PLAN_Y_SEQ);
  assert_int_equal(a->u.seq.count, 0);
  assert_int_equal(b->kind, PLAN_Y_MAP);
  assert_int_equal(b->u.map.count, 0);
  plan_ydoc_free(&doc);

  /* An explicit document with nothing in it has a null root. */
  assert_int_equal(parse(&doc, "---\n"), PLAN_OK);
  assert_true(plan_yscalar_is_null(doc.root));
  plan_ydoc_free(&doc);

  /* A single document with explicit start and end markers is fine. */
  assert_int_equal(parse(&doc, "%YAML 1.1\n---\na: 1\n...\n# trailing\n"),
                   PLAN_OK);
  assert_scalar(plan_ymap_get(doc.root, "a"), "1", 3, 4);
  plan_ydoc_free(&doc);

  /* No name: errors carry only the position, the file is "". */
  assert_int_equal(plan_ydoc_parse_buffer(&doc, "x", 1, NULL), PLAN_OK);
  assert_string_equal(doc.file, "");
  plan_ydoc_free(&doc);
  assert_int_equal(plan_ydoc_parse_buffer(&doc, "[", 1, NULL), PLAN_ESYNTAX);
  assert_string_equal(plan_error_last()->file, "");
  assert_int_equal(plan_ydoc_parse_buffer(NULL, "x", 1, NULL), PLAN_EUSAGE);
  assert_int_equal(plan_ydoc_parse_buffer(&doc, NULL, 3, "t"), PLAN_EUSAGE);
}

static void test_styles(void **state) {
  (void)state;
  plan_ydoc doc;
  const char *text = "p: plain text\n"
                     "s: 'single ''q'''\n"
                     "d: \"double\\tq\\u00e9\"\n"
                     "l: |\n"
                     "  line one\n"
                     "  line two\n"
                     "f: >\n"
                     "  folded\n"
                     "  words\n"
                     "n: 12\n";
  assert_int_equal(parse(&doc, text), PLAN_OK);
  const plan_ynode *r = doc.root;
  const plan_ynode *n;
  n = plan_ymap_get(r, "p");
  assert_scalar(n, "plain text", 1, 4);
  assert_int_equal(n->u.scalar.style, PLAN_Y_PLAIN);
  assert_null(n->u.scalar.tag);
  n = plan_ymap_get(r, "s");
  assert_scalar(n, "single 'q'", 2, 4);
  assert_int_equal(n->u.scalar.style, PLAN_Y_QUOTED);
  n = plan_ymap_get(r, "d");
  assert_scalar(n, "double\tqé", 3, 4);
  assert_int_equal(n->u.scalar.style, PLAN_Y_QUOTED);
  n = plan_ymap_get(r, "l");
  assert_scalar(n, "line one\nline two\n", 4, 4);
  assert_int_equal(n->u.scalar.style, PLAN_Y_BLOCK);
  n = plan_ymap_get(r, "f");
  assert_scalar(n, "folded words\n", 7, 4);
  assert_int_equal(n->u.scalar.style, PLAN_Y_BLOCK);
  n = plan_ymap_get(r, "n");
  assert_true(plan_yscalar_is(n, "12"));
  assert_false(plan_yscalar_is(n, "1"));
  assert_false(plan_yscalar_is(n, "123"));
  assert_false(plan_yscalar_is(r, "12"));
  assert_false(plan_yscalar_is(NULL, "12"));
  plan_ydoc_free(&doc);
}

static void test_flow_equals_block(void **state) {
  (void)state;
  plan_ydoc a, b;
  const char *block = "name: net\n"
                      "layers:\n"
                      "  - op: matmul\n"
                      "    in: [x, w]\n"
                      "    shape:\n"
                      "      - 4\n"
                      "      - 8\n"
                      "  - op: relu\n"
                      "    attrs:\n"
                      "      alpha: 0.5\n"
                      "      tags: []\n"
                      "empty: {}\n";
  const char *flow = "{name: net, layers: [{op: matmul, in: [x, w], "
                     "shape: [4, 8]}, {op: 'relu', attrs: {alpha: \"0.5\", "
                     "tags: []}}], empty: {}}";
  assert_int_equal(parse(&a, block), PLAN_OK);
  assert_int_equal(parse(&b, flow), PLAN_OK);
  assert_true(same_tree(a.root, b.root));
  assert_int_equal(b.root->line, 1);
  assert_int_equal(b.root->col, 1);
  plan_ydoc_free(&a);
  plan_ydoc_free(&b);

  /* And a difference is seen. */
  assert_int_equal(parse(&a, "[1, 2]"), PLAN_OK);
  assert_int_equal(parse(&b, "- 1\n- 3\n"), PLAN_OK);
  assert_false(same_tree(a.root, b.root));
  plan_ydoc_free(&a);
  plan_ydoc_free(&b);
}

static void test_tags(void **state) {
  (void)state;
  plan_ydoc doc;
  const char *text = "a: !!str 1\n"
                     "b: !!int 2\n"
                     "c: !!float 3.5\n"
                     "d: !!bool true\n"
                     "e: !!null ''\n"
                     "f: !!map {x: 1}\n"
                     "g: !!seq [1]\n"
                     "h: !<tag:yaml.org,2002:int> 7\n"
                     "i: !!str null\n"
                     "j: ~\n"
                     "k: 'null'\n"
                     "l:\n"
                     "m: Null\n"
                     "n: NULL\n"
                     "o: nULL\n";
  assert_int_equal(parse(&doc, text), PLAN_OK);
  const plan_ynode *r = doc.root;
  assert_string_equal(plan_ymap_get(r, "a")->u.scalar.tag, "str");
  assert_string_equal(plan_ymap_get(r, "a")->u.scalar.text, "1");
  assert_string_equal(plan_ymap_get(r, "b")->u.scalar.tag, "int");
  assert_string_equal(plan_ymap_get(r, "c")->u.scalar.tag, "float");
  assert_string_equal(plan_ymap_get(r, "d")->u.scalar.tag, "bool");
  assert_string_equal(plan_ymap_get(r, "e")->u.scalar.tag, "null");
  assert_int_equal(plan_ymap_get(r, "f")->kind, PLAN_Y_MAP);
  assert_int_equal(plan_ymap_get(r, "g")->kind, PLAN_Y_SEQ);
  assert_string_equal(plan_ymap_get(r, "h")->u.scalar.tag, "int");
  /* null: plain spellings or the tag; an explicit !!str or quotes win. */
  assert_true(plan_yscalar_is_null(plan_ymap_get(r, "e")));
  assert_false(plan_yscalar_is_null(plan_ymap_get(r, "i")));
  assert_true(plan_yscalar_is_null(plan_ymap_get(r, "j")));
  assert_false(plan_yscalar_is_null(plan_ymap_get(r, "k")));
  assert_true(plan_yscalar_is_null(plan_ymap_get(r, "l")));
  assert_true(plan_yscalar_is_null(plan_ymap_get(r, "m")));
  assert_true(plan_yscalar_is_null(plan_ymap_get(r, "n")));
  assert_false(plan_yscalar_is_null(plan_ymap_get(r, "o")));
  assert_false(plan_yscalar_is_null(plan_ymap_get(r, "a")));
  assert_false(plan_yscalar_is_null(r));
  assert_false(plan_yscalar_is_null(NULL));
  plan_ydoc_free(&doc);

  expect_error("a: !foo x\n", PLAN_ESCHEMA, 1, 4, "unsupported tag '!foo'");
  expect_error("a: !!binary aGk=\n", PLAN_ESCHEMA, 1, 4,
               "unsupported tag '!!binary' on a scalar");
  expect_error("a: ! x\n", PLAN_ESCHEMA, 1, 4, "unsupported tag '!'");
  expect_error("a:\n  - 1\n  - !!set {x}\n", PLAN_ESCHEMA, 3, 5,
               "unsupported tag '!!set' on a mapping");
  expect_error("a: !!seq {x: 1}\n", PLAN_ESCHEMA, 1, 4,
               "unsupported tag '!!seq' on a mapping");
  expect_error("a: !!map [1]\n", PLAN_ESCHEMA, 1, 4,
               "unsupported tag '!!map' on a sequence");
  expect_error("a: !!map x\n", PLAN_ESCHEMA, 1, 4,
               "unsupported tag '!!map' on a scalar");
  expect_error("%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n", PLAN_ESCHEMA,
               3, 4, "unsupported tag 'tag:example.com,2000:x'");
}

/* ---- errors from libyaml ------------------------------------------------- */

static void test_syntax_errors(void **state) {
  (void)state;
  /* A tab used as indentation. */
  expect_error("a:\n\tb: 1\n", PLAN_ESYNTAX, 2, 1,
               "found character that cannot start any token "
               "(while scanning for the next token)");
  expect_error("a: [1, 2\nb: 3\n", PLAN_ESYNTAX, 2, 2,
               "did not find expected ',' or ']' "
               "(while parsing a flow sequence)");
  expect_error("a: 1\n b: 2\n", PLAN_ESYNTAX, 2, 3,
               "mapping values are not allowed in this context");
  expect_error("a: 'open\n", PLAN_ESYNTAX, 2, 1,
               "found unexpected end of stream "
               "(while scanning a quoted scalar)");
  expect_error("key: @x\n", PLAN_ESYNTAX, 1, 6,
               "found character that cannot start any token");
}

static void test_nul_and_control_characters(void **state) {
  (void)state;
  static const char raw_nul[] = "a: 1\nb: x\0y\n";
  expect_error_n(raw_nul, sizeof raw_nul - 1, PLAN_ESYNTAX, 2, 5,
                 "control characters are not allowed (U+0000)");
  static const char only_nul[] = "\0";
  expect_error_n(only_nul, 1, PLAN_ESYNTAX, 1, 1,
                 "control characters are not allowed");
  expect_error("a: \x01\n", PLAN_ESYNTAX, 1, 4,
               "control characters are not allowed (U+0001)");
  /* Escaped NULs in double quotes get past libyaml; we refuse them. */
  expect_error("a: 1\nb: \"x\\0y\"\n", PLAN_ESYNTAX, 2, 4,
               "scalar contains a NUL character");
  expect_error("a: \"\\u0000\"\n", PLAN_ESYNTAX, 1, 4,
               "scalar contains a NUL character");
  expect_error("\"\\x00\": 1\n", PLAN_ESYNTAX, 1, 1,
               "scalar contains a NUL character");
}

static void test_invalid_utf8(void **state) {
  (void)state;
  expect_error("a: 1\nb: \xff\n", PLAN_ESYNTAX, 2, 4,
               "invalid leading UTF-8 octet (byte 0xFF)");
  /* Columns are characters: "é" before the bad byte is one column. */
  expect_error("é: \xff\n", PLAN_ESYNTAX, 1, 4, "invalid leading UTF-8 octet");
  /* CRLF and lone CR end lines as in libyaml. */
  expect_error("a: 1\r\nb: 2\rc: \xfe\n", PLAN_ESYNTAX, 3, 4,
               "invalid leading UTF-8 octet (byte 0xFE)");
  /* libyaml points at the offending byte, the second of the sequence. */
  expect_error("a: \xc3\x28\n", PLAN_ESYNTAX, 1, 5,
               "invalid trailing UTF-8 octet (byte 0x28)");
  expect_error("a: \xe2\x82", PLAN_ESYNTAX, 1, 4,
               "incomplete UTF-8 octet sequence");
  /* An overlong encoding of '/'. */
  expect_error("a: \xc0\xaf\n", PLAN_ESYNTAX, 1, 4,
               "invalid length of a UTF-8 sequence");
  /* A UTF-8 BOM is skipped without shifting columns; UTF-16 is refused. */
  plan_ydoc doc;
  assert_int_equal(parse(&doc, "\xef\xbb\xbf"
                               "a: 1\n"),
                   PLAN_OK);
  assert_scalar(doc.root->u.map.pairs[0].key, "a", 1, 1);
  plan_ydoc_free(&doc);
  expect_error("\xef\xbb\xbf"
               "a: \xff\n",
               PLAN_ESYNTAX, 1, 4, "invalid leading UTF-8 octet");
  expect_error_n("\xff\xfe"
                 "a\0:\0",
                 6, PLAN_ESYNTAX, 1, 1, "UTF-16");
  expect_error_n("\xfe\xff\0a\0:", 6, PLAN_ESYNTAX, 1, 1, "UTF-16");
}

static void test_empty_and_documents(void **state) {
  (void)state;
  expect_error("", PLAN_ESYNTAX, 1, 1, "empty document");
  expect_error("# only a comment\n\n   \n# another\n", PLAN_ESYNTAX, 1, 1,
               "empty document");
  expect_error("\xef\xbb\xbf", PLAN_ESYNTAX, 1, 1, "empty document");
  plan_ydoc doc;
  assert_int_equal(parse_n(&doc, NULL, 0), PLAN_ESYNTAX);
  assert_string_equal(plan_error_last()->message, "empty document");
  expect_error("---\na: 1\n---\nb: 2\n", PLAN_ESYNTAX, 3, 1,
               "more than one document");
  expect_error("a: 1\n...\n---\nb: 2\n", PLAN_ESYNTAX, 3, 1,
               "more than one document");
  /* libyaml wants an explicit "---" after "...": a syntax error first. */
  expect_error("a: 1\n...\nb: 2\n", PLAN_ESYNTAX, 3, 1,
               "did not find expected <document start>");
  expect_error("a: 1\n--- \n", PLAN_ESYNTAX, 2, 1, "more than one document");
}

/* ---- what the schema layer refuses here ---------------------------------- */

static void test_duplicate_keys(void **state) {
  (void)state;
  expect_error("a: 1\nb: 2\na: 3\n", PLAN_ESCHEMA, 3, 1,
               "duplicate key 'a' (first at line 1)");
  /* By text: quoting does not make a key different. */
  expect_error("x: 1\n'x': 2\n", PLAN_ESCHEMA, 2, 1,
               "duplicate key 'x' (first at line 1)");
  expect_error("{a: 1, b: 2, \"a\": 3}", PLAN_ESCHEMA, 1, 14,
               "duplicate key 'a' (first at line 1)");
  expect_error("top:\n  in:\n    k: 1\n    k: 2\n", PLAN_ESCHEMA, 4, 5,
               "duplicate key 'k' (first at line 3)");
  /* Empty keys are keys too (libyaml places them just after the "?"). */
  expect_error("? \n: 1\n? \n: 2\n", PLAN_ESCHEMA, 3, 2,
               "duplicate key '' (first at line 1)");
  /* Hostile key text is escaped and cut in the message. */
  expect_error("\"a\\nb'\": 1\n\"a\\nb'\": 2\n", PLAN_ESCHEMA, 2, 1,
               "duplicate key 'a\\x0ab\\'' (first at line 1)");
  /* Different keys that look alike are not duplicates. */
  plan_ydoc doc;
  assert_int_equal(parse(&doc, "1: a\n01: b\n'1 ': c\nA: d\na: e\n"), PLAN_OK);
  assert_int_equal(doc.root->u.map.count, 5);
  plan_ydoc_free(&doc);
}

/* Large mappings switch to a hash table: duplicates still found at the
 * right key, distinct keys never flagged, and the cost stays linear. */
static void test_duplicate_keys_large(void **state) {
  (void)state;
  for (int n = 15; n <= 2000; n = n < 40 ? n + 1 : n * 3) {
    gen g = {0};
    for (int i = 0; i < n; i++)
      gen_printf(&g, "key%d: %d\n", i, i);
    plan_ydoc doc;
    assert_int_equal(parse_n(&doc, g.s, g.len), PLAN_OK);
    assert_int_equal(doc.root->u.map.count, (size_t)n);
    assert_scalar(plan_ymap_get(doc.root, "key7"), "7", 8, 7);
    plan_ydoc_free(&doc);
    /* a duplicate of an early key, of the last key, inside the table */
    gen_printf(&g, "key%d: dup\n", n / 2);
    expect_error_n(g.s, g.len, PLAN_ESCHEMA, n + 1, 1, "duplicate key 'key");
    g.len -= strlen("key: dup\n") + (size_t)snprintf(NULL, 0, "%d", n / 2);
    gen_printf(&g, "key%d: dup\n", n - 1);
    char want[64];
    snprintf(want, sizeof want, "(first at line %d)", n);
    expect_error_n(g.s, g.len, PLAN_ESCHEMA, n + 1, 1, want);
    free(g.s);
  }

  /* 200k keys (flow, one line) parse in well under a second and a
   * duplicate at the very end is found with its column. */
  gen g = {0};
  gen_puts(&g, "{");
  for (int i = 0; i < 200000; i++)
    gen_printf(&g, "k%d: 1, ", i);
  size_t col = g.len + 1;
  gen_puts(&g, "k123456: 2}");
  double t0 = now_s();
  expect_error_n(g.s, g.len, PLAN_ESCHEMA, 1, (int)col,
                 "duplicate key 'k123456' (first at line 1)");
  assert_true(now_s() - t0 < 2.0);
  free(g.s);

  /* A large mapping left open by an error elsewhere is freed (ASan). */
  g = (gen){0};
  gen_puts(&g, "outer:\n");
  for (int i = 0; i < 100; i++)
    gen_printf(&g, "  k%d: 1\n", i);
  gen_puts(&g, "  inner: [\n");
  expect_error_n(g.s, g.len, PLAN_ESYNTAX, 103, 1, "");
  free(g.s);
}

static void test_non_scalar_keys(void **state) {
  (void)state;
  expect_error("? [a, b]\n: 1\n", PLAN_ESCHEMA, 1, 3,
               "mapping keys must be scalars");
  expect_error("a: 1\n? {b: 1}\n: 2\n", PLAN_ESCHEMA, 2, 3,
               "mapping keys must be scalars");
  expect_error("{[x]: 1}", PLAN_ESCHEMA, 1, 2, "mapping keys must be scalars");
}

static void test_anchors_and_aliases(void **state) {
  (void)state;
  expect_error("a: &x 1\nb: 2\n", PLAN_ESCHEMA, 1, 4,
               "anchors and aliases are not allowed");
  expect_error("a: 1\nb: *x\n", PLAN_ESCHEMA, 2, 4,
               "anchors and aliases are not allowed");
  expect_error("base: &b {x: 1}\n", PLAN_ESCHEMA, 1, 7,
               "anchors and aliases are not allowed");
  expect_error("l: &l [1]\n", PLAN_ESCHEMA, 1, 4,
               "anchors and aliases are not allowed");
  expect_error("&k a: 1\n", PLAN_ESCHEMA, 1, 1,
               "anchors and aliases are not allowed");

  /* Billion laughs: refused at the first anchor, before any expansion. */
  gen g = {0};
  gen_puts(&g, "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\","
               "\"lol\",\"lol\",\"lol\"]\n");
  for (char c = 'b'; c <= 'z'; c++) {
    gen_printf(&g, "%c: &%c [", c, c);
    for (int i = 0; i < 9; i++)
      gen_printf(&g, "%s*%c", i ? "," : "", c - 1);
    gen_puts(&g, "]\n");
  }
  double t0 = now_s();
  expect_error_n(g.s, g.len, PLAN_ESCHEMA, 1, 4,
                 "anchors and aliases are not allowed");
  assert_true(now_s() - t0 < 0.5);
  free(g.s);
}

/* ---- limits ----------------------------------------------------------------
 */

static void nested(gen *g, int depth) {
  for (int i = 0; i < depth; i++)
    gen_puts(g, "[");
  gen_puts(g, "x");
  for (int i = 0; i < depth; i++)
    gen_puts(g, "]");
}

static void test_depth(void **state) {
  (void)state;
  plan_ydoc doc;
  gen g = {0};
  nested(&g, PLAN_YAML_MAX_DEPTH);
  assert_int_equal(parse_n(&doc, g.s, g.len), PLAN_OK);
  const plan_ynode *n = doc.root;
  for (int i = 0; i < PLAN_YAML_MAX_DEPTH; i++) {
    assert_int_equal(n->kind, PLAN_Y_SEQ);
    assert_int_equal(n->col, i + 1);
    n = n->u.seq.items[0];
  }
  assert_scalar(n, "x", 1, PLAN_YAML_MAX_DEPTH + 1);
  plan_ydoc_free(&doc);
  free(g.s);

  g = (gen){0};
  nested(&g, PLAN_YAML_MAX_DEPTH + 1);
  expect_error_n(g.s, g.len, PLAN_ELIMIT, 1, PLAN_YAML_MAX_DEPTH + 1,
                 "nesting deeper than 64 levels");
  free(g.s);

  /* A million brackets are refused at the same place, quickly. */
  g = (gen){0};
  nested(&g, 1000000);
  double t0 = now_s();
  expect_error_n(g.s, g.len, PLAN_ELIMIT, 1, PLAN_YAML_MAX_DEPTH + 1,
                 "nesting deeper");
  assert_true(now_s() - t0 < 0.5);
  free(g.s);

  /* Block nesting counts the same way: 64 mappings deep, then one more. */
  g = (gen){0};
  for (int i = 0; i < PLAN_YAML_MAX_DEPTH; i++) {
    for (int j = 0; j < i; j++)
      gen_puts(&g, " ");
    gen_puts(&g, "k:\n");
  }
  for (int j = 0; j < PLAN_YAML_MAX_DEPTH; j++)
    gen_puts(&g, " ");
  gen_puts(&g, "v\n");
  assert_int_equal(parse_n(&doc, g.s, g.len), PLAN_OK);
  plan_ydoc_free(&doc);
  g.len -= PLAN_YAML_MAX_DEPTH + 2;
  for (int j = 0; j < PLAN_YAML_MAX_DEPTH; j++)
    gen_puts(&g, " ");
  gen_puts(&g, "k: v\n");
  expect_error_n(g.s, g.len, PLAN_ELIMIT, PLAN_YAML_MAX_DEPTH + 1,
                 PLAN_YAML_MAX_DEPTH + 1, "nesting deeper than 64 levels");
  free(g.s);
}

static void test_scalar_size(void **state) {
  (void)state;
  plan_ydoc doc;
  size_t max = PLAN_YAML_MAX_SCALAR;
  char *text = malloc(2 * max + 16);
  assert_non_null(text);

  /* Exactly the limit is accepted. */
  memcpy(text, "a: 1\nb: ", 8);
  memset(text + 8, 'x', max);
  assert_int_equal(parse_n(&doc, text, 8 + max), PLAN_OK);
  const plan_ynode *b = plan_ymap_get(doc.root, "b");
  assert_int_equal(b->u.scalar.len, max);
  assert_int_equal(strlen(b->u.scalar.text), max);
  plan_ydoc_free(&doc);

  /* 2 MiB is refused at the scalar's start. */
  memset(text + 8, 'x', 2 * max);
  expect_error_n(text, 8 + 2 * max, PLAN_ELIMIT, 2, 4,
                 "scalar of 2097152 bytes is longer than the limit");
  /* One byte over, as a quoted key. */
  text[0] = '"';
  memset(text + 1, 'y', max + 1);
  memcpy(text + max + 2, "\": 1\n", 5);
  expect_error_n(text, max + 7, PLAN_ELIMIT, 1, 1, "scalar of 1048577 bytes");
  free(text);
}

/* Scalars of every size up to a few KiB land intact, whichever way the
 * text storage packs them (first scalar long, then mixed sizes). */
static void test_scalar_text_sizes(void **state) {
  (void)state;
  gen g = {0};
  size_t sizes[] = {900, 1, 63, 64, 65, 200, 0, 1023, 1024, 5000, 17000, 3};
  size_t nsizes = sizeof sizes / sizeof *sizes;
  gen_puts(&g, "[");
  for (int round = 0; round < 40; round++)
    for (size_t i = 0; i < nsizes; i++) {
      gen_puts(&g, "'");
      for (size_t j = 0; j < sizes[i]; j++)
        gen_put(&g, &"abcdefghij"[(j + i + (size_t)round) % 10], 1);
      gen_puts(&g, "', ");
    }
  gen_puts(&g, "]");
  plan_ydoc doc;
  assert_int_equal(parse_n(&doc, g.s, g.len), PLAN_OK);
  assert_int_equal(doc.root->u.seq.count, 40 * nsizes);
  for (size_t k = 0; k < 40 * nsizes; k++) {
    const plan_ynode *n = doc.root->u.seq.items[k];
    size_t i = k % nsizes, round = k / nsizes;
    assert_int_equal(n->u.scalar.len, sizes[i]);
    assert_int_equal(strlen(n->u.scalar.text), sizes[i]);
    for (size_t j = 0; j < sizes[i]; j++)
      assert_int_equal(n->u.scalar.text[j], "abcdefghij"[(j + i + round) % 10]);
  }
  plan_ydoc_free(&doc);
  free(g.s);
}

/* The node limit needs 64M nodes (about 4 GiB of memory and tens of
 * seconds) at the real limit; it runs with a small one. */
static void test_node_limit(void **state) {
  (void)state;
  /* the real limit (PLAN_YAML_MAX_NODES) would need gigabytes here; the
   * same code path with a small limit */
  const size_t n = 1000;
  char text[2 * 1000 + 8];
  size_t len = 0;
  text[len++] = '[';
  for (size_t i = 0; i < n; i++) {
    text[len++] = '1';
    text[len++] = ',';
  }
  text[len - 1] = ']';
  text[len] = '\0';
  plan_ydoc doc;
  /* n scalars + the sequence = n + 1 nodes */
  assert_int_equal(
      plan_ydoc_parse_limited(&doc, text, len, "t.yaml", NULL, NULL, NULL, n),
      PLAN_ELIMIT);
  assert_int_equal(plan_error_last()->line, 1);
  assert_int_equal(plan_error_last()->column, (int)(2 * n));
  assert_non_null(strstr(plan_error_last()->message, "more than"));
  assert_int_equal(plan_ydoc_parse_limited(&doc, text, len, "t.yaml", NULL,
                                           NULL, NULL, n + 1),
                   PLAN_OK);
  assert_int_equal(doc.root->u.seq.count, n);
  plan_ydoc_free(&doc);
}

/* ---- streaming ----------------------------------------------------------- */

typedef struct stream_log {
  int items, roots, kept;
  char seen[512];
  size_t used;
} stream_log;

/* consumes items whose value is not "keep"; logs "path:key" */
static int log_item(void *ctx, const plan_yitem *it) {
  stream_log *l = ctx;
  if (l->used < sizeof l->seen) {
    int w = snprintf(l->seen + l->used, sizeof l->seen - l->used, "%s:%s;",
                     it->path, it->key ? it->key->u.scalar.text : "-");
    if (w > 0)
      l->used += (size_t)w;
  }
  if (!it->path[0]) {
    l->roots++;
    return 0;
  }
  l->items++;
  if (it->value->kind == PLAN_Y_SCALAR &&
      !strcmp(it->value->u.scalar.text, "keep")) {
    l->kept++;
    return 0;
  }
  return 1;
}

static void test_stream_items(void **state) {
  (void)state;
  const char *text = "a: 1\n"
                     "s: {x: 1, y: keep, z: {deep: [1, 2]}}\n"
                     "q:\n  r: [p, keep, o]\n";
  static const char *const streams[] = {"s", "q/r", NULL};
  stream_log l;
  memset(&l, 0, sizeof l);
  plan_ydoc doc;
  assert_int_equal(plan_ydoc_parse_stream(&doc, text, strlen(text), "t.yaml",
                                          streams, log_item, &l),
                   PLAN_OK);
  /* items in file order, then each root entry once complete */
  assert_string_equal(l.seen, ":a;s:x;s:y;s:z;:s;q/r:-;q/r:-;q/r:-;:q;");
  assert_int_equal(l.items, 6);
  assert_int_equal(l.roots, 3);
  assert_int_equal(l.kept, 2);
  /* consumed items left the tree, kept ones stayed (copied out of scratch) */
  const plan_ynode *sm = plan_ymap_get(doc.root, "s");
  assert_int_equal(sm->u.map.count, 1);
  assert_string_equal(sm->u.map.pairs[0].key->u.scalar.text, "y");
  const plan_ynode *r = plan_ymap_get(plan_ymap_get(doc.root, "q"), "r");
  assert_int_equal(r->u.seq.count, 1);
  assert_string_equal(r->u.seq.items[0]->u.scalar.text, "keep");
  assert_int_equal(r->u.seq.items[0]->line, 4);
  plan_ydoc_free(&doc);
}

static void test_stream_node_limit(void **state) {
  (void)state;
  /* 300 consumed items of 3 nodes each fit a limit of 50 held nodes */
  char text[8192];
  size_t len = (size_t)snprintf(text, sizeof text, "s:\n");
  for (int i = 0; i < 300; i++)
    len +=
        (size_t)snprintf(text + len, sizeof text - len, "  - [%d, %d]\n", i, i);
  static const char *const streams[] = {"s", NULL};
  stream_log l;
  memset(&l, 0, sizeof l);
  plan_ydoc doc;
  assert_int_equal(plan_ydoc_parse_limited(&doc, text, len, "t.yaml", streams,
                                           log_item, &l, 50),
                   PLAN_OK);
  assert_int_equal(l.items, 300);
  plan_ydoc_free(&doc);
  /* without streaming the same text is over the limit */
  assert_int_equal(
      plan_ydoc_parse_limited(&doc, text, len, "t.yaml", NULL, NULL, NULL, 50),
      PLAN_ELIMIT);
}

/* ---- files --------------------------------------------------------------- */

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void test_files(void **state) {
  (void)state;
  char dir[] = "/tmp/test_yamldoc_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char good[256], bad[256], missing[256];
  snprintf(good, sizeof good, "%s/good.yaml", dir);
  snprintf(bad, sizeof bad, "%s/bad.yaml", dir);
  snprintf(missing, sizeof missing, "%s/missing.yaml", dir);
  write_file(good, "a: [1, 2]\nb: {c: d}\n", 20);
  write_file(bad, "a: 1\nb: \xff\n", 10);

  plan_ydoc doc;
  assert_int_equal(plan_ydoc_parse_file(&doc, good), PLAN_OK);
  assert_string_equal(doc.file, good);
  assert_int_equal(doc.root->u.map.count, 2);
  plan_ydoc_free(&doc);

  assert_int_equal(plan_ydoc_parse_file(&doc, bad), PLAN_ESYNTAX);
  const plan_error *e = plan_error_last();
  assert_string_equal(e->file, bad);
  assert_int_equal(e->line, 2);
  assert_int_equal(e->column, 4);
  assert_null(doc.root);

  assert_int_equal(plan_ydoc_parse_file(&doc, missing), PLAN_EIO);
  e = plan_error_last();
  assert_string_equal(e->file, missing);
  assert_non_null(strstr(e->message, "No such file or directory"));
  assert_non_null(strstr(e->message, missing));
  assert_int_equal(plan_ydoc_parse_file(&doc, dir), PLAN_EIO);
  assert_non_null(strstr(plan_error_last()->message, "Is a directory"));
  assert_int_equal(plan_ydoc_parse_file(&doc, NULL), PLAN_EUSAGE);

  /* Scanning counts libyaml's events: stream, document, mapping start,
   * 4 scalars + seq start/end + 2 scalars + map start/end, and the ends. */
  size_t nev = 99;
  assert_int_equal(plan_ydoc_scan_events(good, &nev), PLAN_OK);
  assert_int_equal(nev, 16);
  assert_int_equal(plan_ydoc_scan_events(bad, &nev), PLAN_ESYNTAX);
  assert_int_equal(nev, 0);
  assert_int_equal(plan_error_last()->line, 2);
  assert_int_equal(plan_ydoc_scan_events(missing, &nev), PLAN_EIO);
  assert_int_equal(plan_ydoc_scan_events(good, NULL), PLAN_OK);

  /* Over the 1 GiB input cap: refused from the size alone (a sparse file,
   * so the test writes nothing). */
  char huge[256];
  snprintf(huge, sizeof huge, "%s/huge.yaml", dir);
  FILE *f = fopen(huge, "wb");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), (off_t)((1 << 30) + 1)), 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(plan_ydoc_parse_file(&doc, huge), PLAN_ELIMIT);
  assert_non_null(strstr(plan_error_last()->message, "1 GiB"));
  assert_int_equal(plan_ydoc_scan_events(huge, &nev), PLAN_ELIMIT);

  remove(huge);
  remove(good);
  remove(bad);
  rmdir(dir);
}

/* The tree stays within a few times the input for a plan-like document.
 * This one is dense (about 7 input bytes per node, flow collections) and
 * comes out near 8.6x; the floor is the 48-byte plan_ynode plus 16 bytes
 * per pair, so the bound is 10x. (A 20 MB block-style plan measures 7.2x.) */
static void test_memory_ratio(void **state) {
  (void)state;
  gen g = {0};
  gen_puts(&g, "version: 0.1\nops:\n");
  for (int i = 0; i < 5000; i++)
    gen_printf(&g,
               "  - name: layers.%d.mlp.fc1\n"
               "    kind: matmul\n"
               "    inputs: [layers.%d.norm, layers.%d.mlp.w1]\n"
               "    shape: [4096, 11008]\n"
               "    placement: {mesh: [dp, tp], spec: [R, S1]}\n",
               i, i, i);
  plan_ydoc doc;
  assert_int_equal(parse_n(&doc, g.s, g.len), PLAN_OK);
  double ratio = (double)doc.arena.used_total / (double)g.len;
  print_message("tree/input = %.2f\n", ratio);
  assert_true(ratio < 10.0);
  plan_ydoc_free(&doc);
  free(g.s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_root_scalar_and_empty_collections),
      cmocka_unit_test(test_styles),
      cmocka_unit_test(test_flow_equals_block),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_nul_and_control_characters),
      cmocka_unit_test(test_invalid_utf8),
      cmocka_unit_test(test_empty_and_documents),
      cmocka_unit_test(test_duplicate_keys),
      cmocka_unit_test(test_duplicate_keys_large),
      cmocka_unit_test(test_non_scalar_keys),
      cmocka_unit_test(test_anchors_and_aliases),
      cmocka_unit_test(test_depth),
      cmocka_unit_test(test_scalar_size),
      cmocka_unit_test(test_scalar_text_sizes),
      cmocka_unit_test(test_node_limit),
      cmocka_unit_test(test_stream_items),
      cmocka_unit_test(test_stream_node_limit),
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_memory_ratio),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
