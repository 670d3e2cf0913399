/* Helpers the lowered-file unit tests share: a checked call, a plan's
 * lowered program as file text with its hash, and a text read back.
 * Included by one test file each (static functions, cmocka included). */
#ifndef LIBPLAN_TESTS_LOWERED_TEXT_H
#define LIBPLAN_TESTS_LOWERED_TEXT_H

static void ok(int rc) {
  if (rc != PLAN_OK) {
    char buf[1200];
    print_message("unexpected failure: %s\n",
                  plan_error_format(buf, sizeof buf));
  }
  assert_int_equal(rc, PLAN_OK);
}

/* The file text of path's lowered program and its hash in *hout; the plan
 * in *pout (the caller frees it), or freed when pout is NULL. */
static char *lowered_text(const char *path, plan_plan **pout, plan_hash *hout) {
  plan_plan *p = NULL;
  plan_lowered *l = NULL;
  char *text = NULL;
  size_t len;
  ok(plan_load(&p, path));
  ok(plan_lower(&l, p));
  ok(plan_lowered_write(&text, &len, l));
  ok(plan_lowered_hash(hout, l));
  plan_lowered_free(l);
  if (pout)
    *pout = p;
  else
    plan_free(p);
  return text;
}

static plan_lowered *read_text(const char *text) {
  plan_lowered *l = NULL;
  ok(plan_lowered_load_buffer(&l, text, strlen(text), "x.yaml", NULL));
  return l;
}

#endif
