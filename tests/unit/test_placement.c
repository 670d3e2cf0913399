/* Unit tests for placement.c: spellings, error offsets, nesting levels,
 * canonical text, equality and the nested torch.chunk layout. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ir/placement.h"

/* Parses and normalises `text`, failing the test on any error. */
static plan_placement pl(const char *text, int naxes, int rank) {
  plan_placement p;
  char err[200] = "";
  size_t off = 0;
  int rc = plan_placement_parse(&p, text, strlen(text), naxes, err, sizeof err,
                                &off);
  if (rc != PLAN_OK)
    fail_msg("parse \"%s\": %s at %zu", text, err, off);
  rc = plan_placement_normalize(&p, rank, err, sizeof err);
  if (rc != PLAN_OK)
    fail_msg("normalize \"%s\": %s", text, err);
  return p;
}

static const char *fmt(const plan_placement *p) {
  static char buf[PLAN_PLACEMENT_STRLEN];
  return plan_placement_format(p, buf);
}

/* ---- parsing ------------------------------------------------------------- */

static void test_parse_spellings(void **state) {
  (void)state;
  struct {
    const char *in;
    int naxes, rank;
    const char *canon;
  } cases[] = {
      {"R", 1, 1, "R"},
      {"S(0)R", 2, 2, "S(0)R"},
      {"RS(1)", 2, 2, "RS(1)"},
      {"P(sum)R", 2, 2, "P(sum)R"},
      {"PR", 2, 2, "P(sum)R"},
      {"PP", 2, 2, "P(sum)P(sum)"},
      {"P(avg)P(max)P(min)", 3, 1, "P(avg)P(max)P(min)"},
      {"S(-1)", 1, 3, "S(2)"},
      {"S(-3)R", 2, 3, "S(0)R"},
      {"Replicate()Shard(1)", 2, 2, "RS(1)"},
      {"Partial()Partial(max)", 2, 1, "P(sum)P(max)"},
      {"Replicate( )Shard( -1 )", 2, 4, "RS(3)"},
      {"  S( 0 : 1 )\tS(0:0)\n", 2, 1, "S(0:1)S(0:0)"},
      {"S(0) S(1)", 2, 2, "S(0)S(1)"},
      {"S(0)P( avg )", 2, 1, "S(0)P(avg)"},
      {"Shard(0:1)Shard(0:0)", 2, 1, "S(0:1)S(0:0)"},
      {"S(0:0)S(0:1)", 2, 1, "S(0)S(0)"}, /* mesh order: levels not shown */
      {"S(0)S(0)", 2, 1, "S(0)S(0)"},
      {"S(1:1)S(0)S(1:0)", 3, 2, "S(1:1)S(0)S(1:0)"},
      {"S(1)S(0)S(1)", 3, 2, "S(1)S(0)S(1)"},
      {"S(7)S(7)S(7)S(7)S(7)S(7)S(7)S(7)", 8, 8,
       "S(7)S(7)S(7)S(7)S(7)S(7)S(7)S(7)"},
      {"S(-8)", 1, 8, "S(0)"},
      {"RRRRRRRR", 8, 1, "RRRRRRRR"},
      {"", 0, 1, ""},
      {"   ", 0, 1, ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    plan_placement p = pl(cases[i].in, cases[i].naxes, cases[i].rank);
    assert_int_equal(p.naxes, cases[i].naxes);
    if (strcmp(fmt(&p), cases[i].canon) != 0)
      fail_msg("\"%s\" formats as \"%s\", want \"%s\"", cases[i].in, fmt(&p),
               cases[i].canon);
    /* The canonical text reads back to an equal placement. */
    plan_placement q = pl(cases[i].canon, cases[i].naxes, cases[i].rank);
    assert_true(plan_placement_equal(&p, &q));
  }
}

static void test_parse_keeps_raw(void **state) {
  (void)state;
  plan_placement p;
  assert_int_equal(
      plan_placement_parse(&p, "S(-1)S(0:1)RP(max)", 18, 4, NULL, 0, NULL),
      PLAN_OK);
  assert_int_equal(p.naxes, 4);
  assert_int_equal(p.ax[0].kind, PLAN_PL_S);
  assert_int_equal(p.ax[0].dim, -1);
  assert_int_equal(p.ax[0].level, -1);
  assert_int_equal(p.ax[1].dim, 0);
  assert_int_equal(p.ax[1].level, 1);
  assert_int_equal(p.ax[2].kind, PLAN_PL_R);
  assert_int_equal(p.ax[3].kind, PLAN_PL_P);
  assert_int_equal(p.ax[3].reduce, PLAN_RED_MAX);
  /* The length bounds the text. */
  assert_int_equal(plan_placement_parse(&p, "RRjunk", 2, 2, NULL, 0, NULL),
                   PLAN_OK);
}

static void check_bad(const char *text, int naxes, size_t want_off,
                      const char *want_msg_part) {
  plan_placement p;
  plan_placement_replicated(&p, 3);
  p.ax[0].kind = PLAN_PL_P; /* sentinel: must survive a failed parse */
  char err[200] = "";
  size_t off = 999;
  int rc = plan_placement_parse(&p, text, strlen(text), naxes, err, sizeof err,
                                &off);
  if (rc != PLAN_EINVALID)
    fail_msg("\"%s\" parsed (rc %d)", text, rc);
  if (off != want_off)
    fail_msg("\"%s\": offset %zu, want %zu (%s)", text, off, want_off, err);
  if (!strstr(err, want_msg_part))
    fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err, want_msg_part);
  assert_int_equal(p.ax[0].kind, PLAN_PL_P);
  assert_int_equal(p.naxes, 3);
}

static void test_parse_errors(void **state) {
  (void)state;
  check_bad("S(0)", 2, 4, "placement has 1 entry but the mesh has 2 axes");
  check_bad("RRR", 2, 2, "placement has 3 entries but the mesh has 2 axes");
  check_bad("", 1, 0, "placement has 0 entries but the mesh has 1 axis");
  check_bad("R R  S(0)", 1, 2, "3 entries");
  check_bad("RX", 2, 1, "unknown placement entry \"X\"");
  check_bad("S(0)S(x)", 2, 4, "decimal integer");
  check_bad("S0", 1, 0, "S(d)");
  check_bad("S (0)", 1, 0, "S(d)");
  check_bad("S(0", 1, 0, "')'");
  check_bad("RS(0 1)", 2, 1, "')'");
  check_bad("S()", 1, 0, "decimal integer");
  check_bad("S(01)", 1, 0, "decimal integer");
  check_bad("S(+1)", 1, 0, "decimal integer");
  check_bad("S(8)", 1, 0, "out of range");
  check_bad("S(-9)", 1, 0, "out of range");
  check_bad("S(99999999999999999999)", 1, 0, "decimal integer");
  check_bad("S(0:8)", 1, 0, "level 8 is out of range");
  check_bad("S(0:-1)", 1, 0, "nesting level");
  check_bad("S(0:)", 1, 0, "nesting level");
  check_bad("RP(prod)", 2, 1, "unknown reduce op 'prod'");
  check_bad("P(SUM)", 1, 0, "reduce op");
  check_bad("P()", 1, 0, "needs a reduce op");
  check_bad("P(sum", 1, 0, "')'");
  check_bad("Partial", 1, 0, "Partial()");
  check_bad("Replicate", 1, 0, "Replicate()");
  check_bad("Replicate(x)", 1, 0, "Replicate()");
  check_bad("Rep", 1, 1, "unknown placement entry");
  check_bad("r", 1, 0, "unknown placement entry");
  check_bad("R()", 1, 1, "unknown placement entry \"()\"");
  check_bad("R,S(0)", 2, 1, "unknown placement entry");
  check_bad("RRRRRRRRR", 9, 0, "0..8 axes");
  check_bad("R", -1, 0, "axes");
  /* A bad entry beyond the mesh is reported as bad, not as a count. */
  check_bad("RRQ", 1, 2, "unknown placement entry");
}

/* ---- normalisation ------------------------------------------------------- */

static void check_norm_bad(const char *text, int naxes, int rank,
                           const char *want) {
  plan_placement p;
  char err[200] = "";
  assert_int_equal(plan_placement_parse(&p, text, strlen(text), naxes, err,
                                        sizeof err, NULL),
                   PLAN_OK);
  plan_placement before = p;
  if (plan_placement_normalize(&p, rank, err, sizeof err) != PLAN_EINVALID)
    fail_msg("\"%s\" normalised at rank %d", text, rank);
  if (!strstr(err, want))
    fail_msg("\"%s\": \"%s\" lacks \"%s\"", text, err, want);
  assert_memory_equal(&p, &before, sizeof p); /* untouched on failure */
}

static void test_normalize(void **state) {
  (void)state;
  plan_placement p = pl("S(0)S(0)", 2, 1);
  assert_int_equal(p.ax[0].level, 0);
  assert_int_equal(p.ax[1].level, 1);
  p = pl("S(0:1)S(0:0)", 2, 1);
  assert_int_equal(p.ax[0].level, 1);
  assert_int_equal(p.ax[1].level, 0);
  p = pl("S(1)RS(-2)S(1)", 4, 2);
  assert_int_equal(p.ax[0].dim, 1);
  assert_int_equal(p.ax[0].level, 0);
  assert_int_equal(p.ax[2].dim, 0);
  assert_int_equal(p.ax[2].level, 0);
  assert_int_equal(p.ax[3].level, 1);
  assert_int_equal(p.ax[1].level, -1);
  /* Idempotent. */
  plan_placement q = p;
  assert_int_equal(plan_placement_normalize(&q, 2, NULL, 0), PLAN_OK);
  assert_memory_equal(&p, &q, sizeof p);

  check_norm_bad("S(3)", 1, 3, "S(3) is out of range for a tensor of rank 3");
  check_norm_bad("RS(-4)", 2, 3, "S(-4) is out of range");
  check_norm_bad("S(0)", 1, 0, "out of range");
  check_norm_bad("S(0:0)S(0)", 2, 1, "on every axis that shards it");
  check_norm_bad("S(0:0)S(0:0)", 2, 1, "levels must be 0..1");
  check_norm_bad("S(0:2)S(0:0)", 2, 1, "levels must be 0..1");
  check_norm_bad("S(0:1)S(1)", 2, 2, "levels must be 0..0");
  check_norm_bad("S(0)S(-1:0)S(1:0)", 3, 2, "levels must be 0..1");
  check_norm_bad("R", 1, 9, "rank 9");
}

/* ---- equality and helpers ------------------------------------------------ */

static void test_equal(void **state) {
  (void)state;
  plan_placement a = pl("S(0)S(0)", 2, 2), b = pl("S(0:0)S(0:1)", 2, 2),
                 c = pl("S(0:1)S(0:0)", 2, 2), d = pl("S(-2)S(0)", 2, 2),
                 e = pl("S(0)S(1)", 2, 2);
  assert_true(plan_placement_equal(&a, &b));
  assert_true(plan_placement_equal(&a, &d));
  assert_false(plan_placement_equal(&a, &c));
  assert_false(plan_placement_equal(&a, &e));
  plan_placement p1 = pl("P(sum)R", 2, 1), p2 = pl("PReplicate()", 2, 1),
                 p3 = pl("P(avg)R", 2, 1), r2 = pl("RR", 2, 1),
                 r3 = pl("RRR", 3, 1);
  assert_true(plan_placement_equal(&p1, &p2));
  assert_false(plan_placement_equal(&p1, &p3));
  assert_false(plan_placement_equal(&p1, &r2));
  assert_false(plan_placement_equal(&r2, &r3));

  plan_placement r;
  plan_placement_replicated(&r, 2);
  assert_true(plan_placement_equal(&r, &r2));
  assert_true(plan_placement_is_replicated(&r));
  assert_string_equal(fmt(&r), "RR");
  assert_false(plan_placement_is_replicated(&p1));
  assert_false(plan_placement_is_replicated(&a));
  plan_placement_replicated(&r, 0);
  assert_true(plan_placement_is_replicated(&r));
  assert_string_equal(fmt(&r), "");
}

static void test_dim_axes(void **state) {
  (void)state;
  int axes[PLAN_MAX_MESH_AXES];
  plan_placement p = pl("S(0:1)RS(0:0)S(1)", 4, 2);
  assert_int_equal(plan_placement_dim_axes(&p, 0, axes), 2);
  assert_int_equal(axes[0], 2);
  assert_int_equal(axes[1], 0);
  assert_int_equal(plan_placement_dim_axes(&p, 1, axes), 1);
  assert_int_equal(axes[0], 3);
  p = pl("S(0)RS(0)", 3, 1);
  assert_int_equal(plan_placement_dim_axes(&p, 0, axes), 2);
  assert_int_equal(axes[0], 0);
  assert_int_equal(axes[1], 2);
  p = pl("RP", 2, 3);
  assert_int_equal(plan_placement_dim_axes(&p, 0, axes), 0);
}

/* ---- layout -------------------------------------------------------------- */

/* Expected [offset, length) for each rank of a 2-axis mesh, dp-major. */
static void check_2d(const char *text, int64_t size, int64_t d0, int64_t d1,
                     const int64_t *want_off, const int64_t *want_len) {
  plan_placement p = pl(text, 2, 1);
  int64_t mesh[2] = {d0, d1};
  int r = 0;
  for (int64_t i = 0; i < d0; i++)
    for (int64_t j = 0; j < d1; j++, r++) {
      int64_t coord[2] = {i, j}, off = -1, len = -1;
      plan_placement_dim_range(&p, 0, size, mesh, coord, &off, &len);
      if (off != want_off[r] || len != want_len[r])
        fail_msg("%s size %lld rank %d: [%lld +%lld], want [%lld +%lld]", text,
                 (long long)size, r, (long long)off, (long long)len,
                 (long long)want_off[r], (long long)want_len[r]);
    }
}

static void test_dim_range_examples(void **state) {
  (void)state;
  /* 5 on one axis of 4: torch.chunk gives 2, 2, 1, 0. */
  plan_placement p = pl("S(0)", 1, 1);
  int64_t mesh4[1] = {4};
  int64_t want_len[4] = {2, 2, 1, 0}, want_off[4] = {0, 2, 4, 5};
  for (int64_t c = 0; c < 4; c++) {
    int64_t coord[1] = {c}, off, len;
    plan_placement_dim_range(&p, 0, 5, mesh4, coord, &off, &len);
    assert_int_equal(len, want_len[c]);
    assert_int_equal(off, want_off[c]);
  }
  assert_false(plan_placement_dim_even(&p, 0, 5, mesh4));
  assert_true(plan_placement_dim_even(&p, 0, 8, mesh4));

  /* 5 on dp=2 x tp=2, nested dp major: 2, 1, 1, 1 (not 2, 2, 1, 0). */
  check_2d("S(0)S(0)", 5, 2, 2, (const int64_t[]){0, 2, 3, 4},
           (const int64_t[]){2, 1, 1, 1});
  /* Same with tp major: tp splits 3 | 2 first, then dp splits each. */
  check_2d("S(0:1)S(0:0)", 5, 2, 2, (const int64_t[]){0, 3, 2, 4},
           (const int64_t[]){2, 1, 1, 1});
  /* Even case. */
  check_2d("S(0)S(0)", 8, 2, 2, (const int64_t[]){0, 2, 4, 6},
           (const int64_t[]){2, 2, 2, 2});
  check_2d("S(0:1)S(0:0)", 8, 2, 2, (const int64_t[]){0, 4, 2, 6},
           (const int64_t[]){2, 2, 2, 2});
  /* Tiny and empty tensors: trailing ranks hold nothing. */
  check_2d("S(0)S(0)", 1, 2, 2, (const int64_t[]){0, 1, 1, 1},
           (const int64_t[]){1, 0, 0, 0});
  check_2d("S(0)S(0)", 0, 2, 2, (const int64_t[]){0, 0, 0, 0},
           (const int64_t[]){0, 0, 0, 0});
  /* Only one axis shards the dim; the other replicates. */
  check_2d("RS(0)", 7, 2, 3, (const int64_t[]){0, 3, 6, 0, 3, 6},
           (const int64_t[]){3, 3, 1, 3, 3, 1});
  /* Unsharded dim: the whole range everywhere. */
  check_2d("RR", 7, 2, 2, (const int64_t[]){0, 0, 0, 0},
           (const int64_t[]){7, 7, 7, 7});
  check_2d("S(0)R", 3, 2, 2, (const int64_t[]){0, 0, 2, 2},
           (const int64_t[]){2, 2, 1, 1});
}

static void test_dim_range_partitions(void **state) {
  (void)state;
  /* Over many sizes, meshes and nesting orders, the pieces of the ranks
   * that differ only along sharding axes tile [0, n) exactly. */
  const char *specs[] = {"S(0)S(0)S(0)",       "S(0:2)S(0:0)S(0:1)",
                         "S(0:1)S(0:2)S(0:0)", "S(0)RS(0)",
                         "S(0:1)S(1)S(0:0)",   "S(0:2)S(0:1)S(0:0)"};
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
    plan_placement p = pl(specs[s], 3, 2);
    for (int64_t a = 1; a <= 4; a++)
      for (int64_t b = 1; b <= 3; b++)
        for (int64_t c = 1; c <= 3; c++)
          for (int64_t n = 0; n <= 40; n++) {
            int64_t mesh[3] = {a, b, c};
            int cover[41] = {0};
            for (int64_t i = 0; i < a; i++)
              for (int64_t j = 0; j < b; j++)
                for (int64_t k = 0; k < c; k++) {
                  int64_t coord[3] = {i, j, k}, off, len;
                  plan_placement_dim_range(&p, 0, n, mesh, coord, &off, &len);
                  assert_true(off >= 0 && len >= 0 && off + len <= n);
                  for (int64_t x = off; x < off + len; x++)
                    cover[x]++;
                }
            /* Each element is held by (replicating ranks) copies. */
            int64_t copies = 1;
            for (int ax = 0; ax < 3; ax++)
              if (p.ax[ax].kind != PLAN_PL_S || p.ax[ax].dim != 0)
                copies *= mesh[ax];
            for (int64_t x = 0; x < n; x++)
              if (cover[x] != copies)
                fail_msg("%s mesh %lldx%lldx%lld n=%lld: elem %lld held %d "
                         "times, want %lld",
                         specs[s], (long long)a, (long long)b, (long long)c,
                         (long long)n, (long long)x, cover[x],
                         (long long)copies);
          }
  }
}

static void test_dim_range_contiguous_nesting(void **state) {
  (void)state;
  /* With nesting, the major axis owns a contiguous block that the minor
   * axis splits further: for dp major, dp's ranks hold [0, 6) and [6, 12)
   * of 12, whatever tp does. */
  plan_placement p = pl("S(0)S(0)", 2, 1);
  int64_t mesh[2] = {2, 3};
  int64_t coord[2] = {1, 2}, off, len;
  plan_placement_dim_range(&p, 0, 12, mesh, coord, &off, &len);
  assert_int_equal(off, 10);
  assert_int_equal(len, 2);
  p = pl("S(0:1)S(0:0)", 2, 1);
  plan_placement_dim_range(&p, 0, 12, mesh, coord, &off, &len);
  /* tp major: tp=2 holds [8, 12); dp=1 takes its second half. */
  assert_int_equal(off, 10);
  assert_int_equal(len, 2);
  coord[0] = 1;
  coord[1] = 0;
  plan_placement_dim_range(&p, 0, 12, mesh, coord, &off, &len);
  assert_int_equal(off, 2);
  assert_int_equal(len, 2);
  /* Huge sizes do not overflow. */
  int64_t big = INT64_MAX - 1;
  plan_placement_dim_range(&p, 0, big, mesh, coord, &off, &len);
  assert_true(off > 0 && len > 0);
}

static void test_dim_even(void **state) {
  (void)state;
  plan_placement p = pl("S(0)S(0)", 2, 2);
  int64_t mesh[2] = {2, 2};
  assert_true(plan_placement_dim_even(&p, 0, 8, mesh));
  assert_true(plan_placement_dim_even(&p, 0, 4, mesh));
  assert_true(plan_placement_dim_even(&p, 0, 0, mesh));
  assert_false(plan_placement_dim_even(&p, 0, 6, mesh)); /* 6 -> 3 -> 1.5 */
  assert_false(plan_placement_dim_even(&p, 0, 5, mesh));
  assert_true(plan_placement_dim_even(&p, 1, 5, mesh)); /* dim 1 unsharded */
  int64_t mesh43[2] = {4, 3};
  p = pl("S(0:1)S(0:0)", 2, 1);
  assert_true(plan_placement_dim_even(&p, 0, 12, mesh43));
  assert_false(plan_placement_dim_even(&p, 0, 6, mesh43)); /* 6/3=2, 2%4 */
  p = pl("S(0)S(0)", 2, 1);
  assert_false(plan_placement_dim_even(&p, 0, 6, mesh43)); /* 6%4 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_spellings),
      cmocka_unit_test(test_parse_keeps_raw),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_normalize),
      cmocka_unit_test(test_equal),
      cmocka_unit_test(test_dim_axes),
      cmocka_unit_test(test_dim_range_examples),
      cmocka_unit_test(test_dim_range_partitions),
      cmocka_unit_test(test_dim_range_contiguous_nesting),
      cmocka_unit_test(test_dim_even),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
