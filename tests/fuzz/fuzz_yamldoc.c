/* libFuzzer target for yamldoc.c: any bytes either parse into a tree that
 * keeps the documented invariants or fail with a positioned error, without
 * crashes, leaks or undefined behaviour (built with ASan and UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/common.h"
#include "yaml/yamldoc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborting is how a fuzz target reports a broken invariant. */
static void check(int ok) {
  if (!ok)
    abort();
}

static void walk(const plan_ynode *n, int depth) {
  check(n != NULL && n->line >= 1 && n->col >= 1);
  check(depth <= PLAN_YAML_MAX_DEPTH);
  switch (n->kind) {
  case PLAN_Y_SCALAR:
    check(n->u.scalar.text != NULL);
    check(strlen(n->u.scalar.text) == n->u.scalar.len);
    check(n->u.scalar.len <= PLAN_YAML_MAX_SCALAR);
    (void)plan_yscalar_is_null(n);
    break;
  case PLAN_Y_SEQ:
    for (size_t i = 0; i < n->u.seq.count; i++)
      walk(n->u.seq.items[i], depth + 1);
    break;
  case PLAN_Y_MAP:
    for (size_t i = 0; i < n->u.map.count; i++) {
      const plan_ynode *k = n->u.map.pairs[i].key;
      check(k->kind == PLAN_Y_SCALAR);
      /* Keys are unique, so looking one up finds its own value; only in
       * small mappings, as the lookup is linear. */
      if (n->u.map.count <= 64)
        check(plan_ymap_get(n, k->u.scalar.text) == n->u.map.pairs[i].value);
      walk(k, depth + 1);
      walk(n->u.map.pairs[i].value, depth + 1);
    }
    break;
  default:
    check(0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  plan_ydoc doc;
  int rc = plan_ydoc_parse_buffer(&doc, (const char *)data, size, "fuzz");
  if (rc == PLAN_OK) {
    check(doc.root != NULL);
    walk(doc.root, 0);
  } else {
    const plan_error *e = plan_error_last();
    check(rc == PLAN_ESYNTAX || rc == PLAN_ESCHEMA || rc == PLAN_ELIMIT ||
          rc == PLAN_ENOMEM);
    check(e->code == rc && e->message[0] != '\0');
    if (rc != PLAN_ENOMEM) /* every input error has a position */
      check(e->line >= 1 && e->column >= 1);
    check(doc.root == NULL);
  }
  plan_ydoc_free(&doc);
  return 0;
}
