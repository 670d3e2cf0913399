/* Unit tests for the sharding picture (plan_sharding_svg, `plan show
 * --svg`): the picture is read back, and every rank's block is the one
 * torch.chunk's layout gives (equal and uneven pieces, nested shards,
 * shard ratios), ranks share a colour exactly when they hold the same
 * block, a partial value is hatched, each block is drawn in proportion
 * inside its tensor's outline, and bad requests fail with the documented
 * codes. */
/* cmocka needs these four headers before it, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/libplan.h"

typedef struct drawn {
  int rank, colour;
  char block[96];
  double x, y, w, h;
} drawn;

/* The value of attribute `name` of the element at e (up to its '>'). */
static bool attr(const char *e, const char *name, char *out, size_t size) {
  const char *end = strchr(e, '>');
  char key[40];
  snprintf(key, sizeof key, " %s=\"", name);
  const char *a = strstr(e, key);
  if (!a || (end && a > end))
    return false;
  a += strlen(key);
  const char *q = strchr(a, '"');
  if (!q || (size_t)(q - a) >= size)
    return false;
  memcpy(out, a, (size_t)(q - a));
  out[q - a] = 0;
  return true;
}

static double num(const char *e, const char *name) {
  char v[64];
  assert_true(attr(e, name, v, sizeof v));
  return strtod(v, NULL);
}

/* Every block rect of the picture, in rank order (each rank once). */
static int read_blocks(const char *svg, drawn *out, int cap) {
  int n = 0;
  for (const char *e = strstr(svg, "<rect class=\"block\""); e;
       e = strstr(e + 1, "<rect class=\"block\"")) {
    assert_true(n < cap);
    drawn *d = &out[n++];
    d->rank = (int)num(e, "data-rank");
    d->colour = (int)num(e, "data-colour");
    assert_true(attr(e, "data-block", d->block, sizeof d->block));
    d->x = num(e, "x"), d->y = num(e, "y");
    d->w = num(e, "width"), d->h = num(e, "height");
    assert_int_equal(d->rank, n - 1);
  }
  return n;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *e = strstr(s, what); e; e = strstr(e + 1, what))
    n++;
  return n;
}

/* torch.chunk: piece i of n cut into k (ceil-sized pieces, the tail short
 * or empty). */
static void chunk(int64_t n, int64_t k, int64_t i, int64_t *off, int64_t *len) {
  int64_t c = (n + k - 1) / k, a = i * c < n ? i * c : n;
  *off = a;
  *len = (a + c < n ? a + c : n) - a;
}

static char *svg_of(const char *plan_text, const char *tensor) {
  plan_plan *p;
  assert_int_equal(
      plan_load_buffer(&p, plan_text, strlen(plan_text), "t.yaml", NULL),
      PLAN_OK);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_sharding_svg(&text, &len, p, tensor), PLAN_OK);
  assert_int_equal(strlen(text), len);
  plan_free(p);
  return text;
}

/* A [10, 6] tensor on a 2 x 4 mesh: dim 0 cut by both axes (nested, a over
 * b) or by one, uneven pieces included. */
static const char *plan_fmt =
    "libplan: \"1.0\"\n"
    "program:\n"
    "  name: t\n"
    "  tensors:\n"
    "    w: {shape: [10, 6], dtype: f32, role: param}\n"
    "  ops:\n"
    "    - {name: o, op: relu, in: [w], out: y}\n"
    "mesh:\n"
    "  axes: [a=2, b=4]\n"
    "placements:\n"
    "  w: %s\n"
    "strategies:\n"
    "  o: {in: [%s], out: %s}\n";

static char *svg_placed(const char *pl, const char *tensor) {
  char text[1024];
  snprintf(text, sizeof text, plan_fmt, pl, pl, pl);
  return svg_of(text, tensor);
}

static void check_layout(const char *pl, bool nested, bool dim1) {
  char *svg = svg_placed(pl, "w");
  drawn d[8];
  assert_int_equal(read_blocks(svg, d, 8), 8);
  for (int r = 0; r < 8; r++) {
    int64_t a = r / 4, b = r % 4, off[2] = {0, 0}, len[2] = {10, 6};
    int dim = dim1 ? 1 : 0;
    if (nested) { /* S(0)S(0): a major, then b inside a's piece */
      int64_t o1, l1, o2, l2;
      chunk(10, 2, a, &o1, &l1);
      chunk(l1, 4, b, &o2, &l2);
      off[0] = o1 + o2, len[0] = l2;
    } else {
      chunk(len[dim], 4, b, &off[dim], &len[dim]);
    }
    char want[96];
    snprintf(want, sizeof want, "[%lld:%lld, %lld:%lld]", (long long)off[0],
             (long long)(off[0] + len[0]), (long long)off[1],
             (long long)(off[1] + len[1]));
    assert_string_equal(d[r].block, want);
    /* drawn in proportion: dim 0 down (56 px), dim 1 across (112 px) */
    assert_true(fabs(d[r].h - 56.0 * (double)len[0] / 10) < 0.11);
    assert_true(fabs(d[r].w - 112.0 * (double)len[1] / 6) < 0.11);
    for (int q = 0; q < r; q++)
      assert_int_equal(d[q].colour == d[r].colour,
                       !strcmp(d[q].block, d[r].block));
  }
  assert_int_equal(count(svg, "url(#partial)\"/>"), 0);
  plan_buffer_free(svg);
}

static void test_even_and_uneven(void **state) {
  (void)state;
  check_layout("RS(0)", false, false); /* 10 rows in 4: 3, 3, 3, 1 */
  check_layout("RS(1)", false, true);  /* 6 columns in 4: 2, 2, 2, 0 */
  check_layout("S(0)S(0)", true, false);
}

static void test_partial_is_hatched(void **state) {
  (void)state;
  char *svg = svg_placed("P(sum)S(1)", "w");
  drawn d[8];
  assert_int_equal(read_blocks(svg, d, 8), 8);
  /* every rank's block is hatched, and the legend names the axis */
  assert_int_equal(count(svg, "fill=\"url(#partial)\"/>"), 8);
  assert_non_null(strstr(svg, "summed over 'a'"));
  /* addends over a share a block (and so a colour): 4 distinct blocks */
  assert_non_null(strstr(svg, "4 distinct blocks"));
  assert_int_equal(d[0].colour, d[4].colour);
  plan_buffer_free(svg);
}

/* An activation is drawn in its producer's output placement. */
static void test_activation_placement(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, plan_fmt, "RR", "RS(0)", "RS(0)");
  char *svg = svg_of(text, "y");
  drawn d[8];
  assert_int_equal(read_blocks(svg, d, 8), 8);
  assert_string_equal(d[3].block, "[9:10, 0:6]");
  assert_non_null(strstr(svg, "placed RS(0)"));
  plan_buffer_free(svg);
  svg = svg_of(text, "w"); /* the param as stored: whole everywhere */
  assert_int_equal(read_blocks(svg, d, 8), 8);
  assert_string_equal(d[5].block, "[0:10, 0:6]");
  assert_non_null(strstr(svg, "1 distinct block,"));
  plan_buffer_free(svg);
}

/* Shard ratios (format 1.1): the 3:1 split of the example. */
static void test_ratios(void **state) {
  (void)state;
  plan_plan *p;
  assert_int_equal(plan_load(&p, "examples/mlp-ratios.plan.yaml"), PLAN_OK);
  char *svg = NULL;
  assert_int_equal(plan_sharding_svg(&svg, NULL, p, "x"), PLAN_OK);
  drawn d[4];
  assert_int_equal(read_blocks(svg, d, 4), 4);
  assert_string_equal(d[0].block, "[0:6, 0:16]");
  assert_string_equal(d[1].block, "[0:6, 0:16]");
  assert_string_equal(d[2].block, "[6:8, 0:16]");
  assert_int_equal(d[0].colour, d[1].colour);
  assert_true(d[0].colour != d[2].colour);
  plan_buffer_free(svg);
  plan_free(p);
}

static void test_errors(void **state) {
  (void)state;
  plan_plan *p;
  assert_int_equal(plan_load(&p, "examples/mlp-megatron.plan.yaml"), PLAN_OK);
  char *svg = NULL;
  assert_int_equal(plan_sharding_svg(&svg, NULL, p, "W1"), PLAN_ENOTFOUND);
  assert_null(svg);
  assert_non_null(strstr(plan_error_last()->message, "did you mean 'w1'"));
  assert_int_equal(plan_sharding_svg(NULL, NULL, p, "w1"), PLAN_EUSAGE);
  assert_int_equal(plan_sharding_svg(&svg, NULL, p, NULL), PLAN_EUSAGE);
  plan_free(p);
  /* more ranks than the picture draws */
  const char *big = "libplan: \"1.0\"\n"
                    "program:\n"
                    "  name: t\n"
                    "  tensors:\n"
                    "    w: {shape: [8], dtype: f32, role: param}\n"
                    "  ops:\n"
                    "    - {name: o, op: relu, in: [w], out: y}\n"
                    "mesh:\n"
                    "  axes: [a=64, b=32]\n";
  assert_int_equal(plan_load_buffer(&p, big, strlen(big), "big.yaml", NULL),
                   PLAN_OK);
  assert_int_equal(plan_sharding_svg(&svg, NULL, p, "w"), PLAN_ELIMIT);
  assert_non_null(strstr(plan_error_last()->message, "2048 ranks"));
  plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_even_and_uneven),
      cmocka_unit_test(test_partial_is_hatched),
      cmocka_unit_test(test_activation_placement),
      cmocka_unit_test(test_ratios),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
