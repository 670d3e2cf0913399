/* Unit tests for util.c and error.c: last error, arena, buffer, string map,
 * number text, overflow helpers, globs, status names and hashes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libplan/common.h"
#include "base/util.h"

/* ---- last error ---------------------------------------------------------- */

static void test_error_fail_sets_fields(void **state) {
  (void)state;
  plan_error_clear();
  const plan_error *e = plan_error_last();
  assert_int_equal(e->code, PLAN_OK);
  assert_string_equal(e->message, "");
  assert_string_equal(e->file, "");
  assert_int_equal(e->line, 0);

  int rc = plan_fail(PLAN_EINVALID, "a.yaml", 3, 7, "bad %s %d", "thing", 42);
  assert_int_equal(rc, PLAN_EINVALID);
  e = plan_error_last();
  assert_int_equal(e->code, PLAN_EINVALID);
  assert_string_equal(e->message, "bad thing 42");
  assert_string_equal(e->file, "a.yaml");
  assert_int_equal(e->line, 3);
  assert_int_equal(e->column, 7);

  rc = plan_failf(PLAN_EIO, "cannot read");
  assert_int_equal(rc, PLAN_EIO);
  e = plan_error_last();
  assert_string_equal(e->file, "");
  assert_int_equal(e->line, 0);
  assert_int_equal(e->column, 0);

  assert_int_equal(plan_oom(), PLAN_ENOMEM);
  assert_int_equal(plan_error_last()->code, PLAN_ENOMEM);
  assert_string_equal(plan_error_last()->message, "out of memory");

  plan_fail(PLAN_ESYNTAX, NULL, 1, 1, "x");
  assert_string_equal(plan_error_last()->file, "");
  plan_error_clear();
  assert_int_equal(plan_error_last()->code, PLAN_OK);
}

static void test_error_wrap_own_message(void **state) {
  (void)state;
  /* Wrapping the current message must not corrupt it (overlapping args). */
  plan_failf(PLAN_EINVALID, "inner");
  plan_fail(PLAN_EINVALID, plan_error_last()->file, 0, 0, "outer: %s",
            plan_error_last()->message);
  assert_string_equal(plan_error_last()->message, "outer: inner");
  plan_fail(PLAN_EIO, "f.yaml", 1, 1, "m");
  plan_fail(PLAN_EIO, plan_error_last()->file, 2, 2, "m2");
  assert_string_equal(plan_error_last()->file, "f.yaml");
}

static void test_error_truncates(void **state) {
  (void)state;
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  plan_fail(PLAN_EINVALID, big, 1, 1, "%s", big);
  const plan_error *e = plan_error_last();
  assert_true(strlen(e->message) < 1024);
  assert_true(strlen(e->message) > 1000);
  assert_true(strlen(e->file) < 512);
  assert_true(strlen(e->file) > 500);
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A new thread starts with no error and its own buffers. */
  int clean = plan_error_last()->code == PLAN_OK &&
              plan_error_last()->message[0] == '\0';
  plan_fail(PLAN_EIO, "thread.yaml", 9, 9, "from the thread");
  return clean ? (void *)plan_error_last()->message : NULL;
}

static void test_error_per_thread(void **state) {
  (void)state;
  plan_fail(PLAN_ESCHEMA, "main.yaml", 1, 2, "from main");
  pthread_t t;
  void *ret = NULL;
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  assert_int_equal(pthread_join(t, &ret), 0);
  assert_non_null(ret); /* the thread saw a clean state */
  assert_ptr_not_equal(ret, plan_error_last()->message);
  assert_int_equal(plan_error_last()->code, PLAN_ESCHEMA);
  assert_string_equal(plan_error_last()->message, "from main");
  assert_string_equal(plan_error_last()->file, "main.yaml");
}

static void test_error_format(void **state) {
  (void)state;
  char buf[256];
  plan_fail(PLAN_EINVALID, "p.yaml", 4, 9, "oops");
  assert_string_equal(plan_error_format(buf, sizeof buf),
                      "p.yaml:4:9: error: oops");
  plan_fail(PLAN_EINVALID, "p.yaml", 4, 0, "oops");
  assert_string_equal(plan_error_format(buf, sizeof buf),
                      "p.yaml:4: error: oops");
  plan_fail(PLAN_EINVALID, "p.yaml", 0, 0, "oops");
  assert_string_equal(plan_error_format(buf, sizeof buf),
                      "p.yaml: error: oops");
  plan_failf(PLAN_EINVALID, "oops");
  assert_string_equal(plan_error_format(buf, sizeof buf), "error: oops");
  plan_fail(PLAN_EINVALID, "", 2, 5, "oops");
  assert_string_equal(plan_error_format(buf, sizeof buf), "2:5: error: oops");
  /* Truncation keeps a terminated prefix. */
  plan_fail(PLAN_EINVALID, "p.yaml", 4, 9, "oops");
  assert_string_equal(plan_error_format(buf, 7), "p.yaml");
  buf[0] = 'Z';
  plan_error_format(buf, 0); /* writes nothing */
  assert_int_equal(buf[0], 'Z');
}

static void test_status_names(void **state) {
  (void)state;
  assert_string_equal(plan_status_name(PLAN_OK), "ok");
  assert_string_equal(plan_status_name(PLAN_ENOMEM), "nomem");
  assert_string_equal(plan_status_name(PLAN_EIO), "io");
  assert_string_equal(plan_status_name(PLAN_ESYNTAX), "syntax");
  assert_string_equal(plan_status_name(PLAN_ESCHEMA), "schema");
  assert_string_equal(plan_status_name(PLAN_EVERSION), "version");
  assert_string_equal(plan_status_name(PLAN_EINVALID), "invalid");
  assert_string_equal(plan_status_name(PLAN_ELIMIT), "limit");
  assert_string_equal(plan_status_name(PLAN_EUSAGE), "usage");
  assert_string_equal(plan_status_name(PLAN_ENOTFOUND), "notfound");
  assert_string_equal(plan_status_name(PLAN_EUNSUPPORTED), "unsupported");
  assert_non_null(plan_status_name(-11));
  assert_non_null(plan_status_name(5));
}

static void test_versions(void **state) {
  (void)state;
  assert_string_equal(plan_version_string(), PLAN_VERSION_STRING);
  assert_int_equal(plan_version_number(), 100);
  assert_int_equal(plan_abi_version(), PLAN_ABI_VERSION);
}

static void test_hash_text(void **state) {
  (void)state;
  char buf[PLAN_HASH_STRLEN];
  plan_hash h = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  assert_string_equal(plan_hash_format(h, buf),
                      "xxh3:0123456789abcdeffedcba9876543210");
  assert_int_equal(strlen(buf), PLAN_HASH_STRLEN - 1);
  plan_hash z = {0, 1};
  assert_string_equal(plan_hash_format(z, buf),
                      "xxh3:00000000000000000000000000000001");

  plan_hash p = {0, 0};
  assert_int_equal(plan_hash_parse(&p, "xxh3:0123456789ABCDEFfedcba9876543210"),
                   PLAN_OK);
  assert_true(plan_hash_equal(p, h));
  assert_false(plan_hash_equal(p, z));

  const char *bad[] = {
      "",
      "xxh3:",
      "xxh3:0123456789abcdeffedcba987654321",   /* 31 digits */
      "xxh3:0123456789abcdeffedcba98765432100", /* 33 digits */
      "xxh64:0123456789abcdeffedcba9876543210",
      "XXH3:0123456789abcdeffedcba9876543210",
      "xxh3:0123456789abcdefgedcba9876543210",
      " xxh3:0123456789abcdeffedcba9876543210",
      "xxh3: 123456789abcdeffedcba9876543210",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    plan_hash q = {7, 7};
    assert_int_equal(plan_hash_parse(&q, bad[i]), PLAN_EINVALID);
    assert_int_equal(q.high, 7); /* untouched on failure */
    assert_int_equal(plan_error_last()->code, PLAN_EINVALID);
  }
  assert_int_equal(plan_hash_parse(&p, NULL), PLAN_EINVALID);
}

/* ---- arena --------------------------------------------------------------- */

static void test_arena(void **state) {
  (void)state;
  plan_arena a;
  plan_arena_init(&a);
  char *prev = NULL;
  for (int i = 0; i < 10000; i++) {
    size_t sz = (size_t)(i % 37) + 1;
    unsigned char *p = plan_arena_alloc(&a, sz);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    for (size_t k = 0; k < sz; k++)
      assert_int_equal(p[k], 0);
    memset(p, 0xAB, sz);
    assert_true((char *)p != prev);
    prev = (char *)p;
  }
  /* Zero-size and large allocations. */
  void *z1 = plan_arena_alloc(&a, 0), *z2 = plan_arena_alloc(&a, 0);
  assert_non_null(z1);
  assert_ptr_not_equal(z1, z2);
  char *small = plan_arena_strdup(&a, "keep");
  unsigned char *big = plan_arena_alloc(&a, 1 << 20);
  assert_non_null(big);
  assert_int_equal(big[(1 << 20) - 1], 0);
  assert_string_equal(small, "keep");
  assert_true(a.used_total >= (1u << 20));

  assert_string_equal(plan_arena_strndup(&a, "abcdef", 3), "abc");
  assert_string_equal(plan_arena_strndup(&a, "", 0), "");
  assert_string_equal(plan_arena_strdup(&a, ""), "");
  assert_string_equal(plan_arena_printf(&a, "%s-%d", "x", 12), "x-12");
  assert_string_equal(plan_arena_printf(&a, "%s", ""), "");
  assert_null(plan_arena_alloc(&a, SIZE_MAX - 3));
  assert_int_equal(plan_error_last()->code, PLAN_ENOMEM);
  plan_arena_free(&a);
  assert_null(a.head);
  plan_arena_free(&a); /* twice is fine */
  plan_arena_free(NULL);
}

/* ---- buffer -------------------------------------------------------------- */

static void test_buf(void **state) {
  (void)state;
  plan_buf b;
  plan_buf_init(&b);
  assert_string_equal(plan_buf_cstr(&b), "");
  plan_buf_puts(&b, "");
  assert_string_equal(plan_buf_cstr(&b), "");
  plan_buf_puts(&b, "ab");
  plan_buf_putc(&b, 'c');
  plan_buf_append(&b, "defgh", 2);
  plan_buf_printf(&b, "[%d|%s]", -5, "x");
  assert_string_equal(plan_buf_cstr(&b), "abcde[-5|x]");
  assert_int_equal(b.len, 11);
  /* Growth past many reallocations, including a long printf. */
  for (int i = 0; i < 5000; i++)
    plan_buf_printf(&b, "%04d", i);
  assert_int_equal(b.len, 11 + 5000 * 4);
  assert_memory_equal(b.data + 11 + 4999 * 4, "4999", 4);
  char longs[3000];
  memset(longs, 'q', sizeof longs - 1);
  longs[sizeof longs - 1] = '\0';
  plan_buf_reset(&b);
  assert_string_equal(plan_buf_cstr(&b), "");
  plan_buf_printf(&b, "<%s>", longs);
  assert_int_equal(b.len, 3001);
  assert_int_equal(b.data[3000], '>');
  assert_int_equal(b.data[3001], '\0');
  /* Embedded NUL bytes are kept. */
  plan_buf_reset(&b);
  plan_buf_append(&b, "a\0b", 3);
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.data, "a\0b", 4);
  /* A failed buffer stays failed and reports NULL. */
  plan_buf_append(&b, "x", SIZE_MAX - 1);
  assert_true(b.failed);
  assert_null(plan_buf_cstr(&b));
  plan_buf_puts(&b, "more");
  assert_int_equal(b.len, 3);
  plan_buf_reset(&b);
  assert_false(b.failed);
  plan_buf_puts(&b, "ok");
  assert_string_equal(plan_buf_cstr(&b), "ok");
  plan_buf_free(&b);
  assert_null(b.data);
  plan_buf_free(NULL);
}

/* ---- string map ---------------------------------------------------------- */

static void test_strmap_basic(void **state) {
  (void)state;
  plan_strmap m;
  plan_strmap_init(&m);
  assert_int_equal(plan_strmap_get(&m, "x"), -1);
  assert_int_equal(plan_strmap_getn(&m, "", 0), -1);
  assert_int_equal(plan_strmap_put(&m, "alpha", 1), PLAN_OK);
  assert_int_equal(plan_strmap_put(&m, "beta", 2), PLAN_OK);
  assert_int_equal(plan_strmap_put(&m, "", 3), PLAN_OK);
  assert_int_equal(plan_strmap_get(&m, "alpha"), 1);
  assert_int_equal(plan_strmap_get(&m, "beta"), 2);
  assert_int_equal(plan_strmap_get(&m, ""), 3);
  assert_int_equal(plan_strmap_get(&m, "alph"), -1);
  assert_int_equal(plan_strmap_get(&m, "alphaa"), -1);
  /* getn looks up a slice of a longer string. */
  assert_int_equal(plan_strmap_getn(&m, "alphabet", 5), 1);
  assert_int_equal(plan_strmap_getn(&m, "betamax", 4), 2);
  assert_int_equal(plan_strmap_getn(&m, "betamax", 3), -1);
  assert_int_equal(plan_strmap_getn(&m, "xyz", 0), 3);
  assert_int_equal(plan_strmap_getn(&m, "al\0ha", 5), -1);
  /* Replacing keeps the count. */
  assert_int_equal(plan_strmap_put(&m, "alpha", 10), PLAN_OK);
  assert_int_equal(plan_strmap_get(&m, "alpha"), 10);
  assert_int_equal(m.count, 3);
  /* Keys are compared by content, not pointer. */
  char key[] = "beta";
  assert_int_equal(plan_strmap_put(&m, key, 20), PLAN_OK);
  assert_int_equal(m.count, 3);
  assert_int_equal(plan_strmap_get(&m, "beta"), 20);
  plan_strmap_free(&m);
  assert_int_equal(m.cap, 0);
  plan_strmap_free(&m);
}

/* Reserved room, and the calls that take the caller's hash, agree with
 * the plain ones. */
static void test_strmap_reserve_hashed(void **state) {
  (void)state;
  enum { N = 5000 };
  static char keys[N][24];
  plan_strmap m;
  plan_strmap_init(&m);
  assert_int_equal(plan_strmap_reserve(&m, N), PLAN_OK);
  size_t cap = m.cap;
  assert_true(cap * 2 >= (size_t)N * 3);
  plan_strmap_prefetch(&m, 12345); /* a hint only, on any hash */
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "layers.%d.w", i);
    size_t len = strlen(keys[i]);
    uint64_t h = plan_strmap_hash(keys[i], len);
    int old = 7;
    assert_int_equal(plan_strmap_insert_h(&m, keys[i], len, h, i, &old),
                     PLAN_OK);
    assert_int_equal(old, -1);
  }
  assert_int_equal(m.cap, cap); /* no growth past the reserve */
  for (int i = 0; i < N; i++) {
    size_t len = strlen(keys[i]);
    uint64_t h = plan_strmap_hash(keys[i], len);
    assert_int_equal(plan_strmap_getn_h(&m, keys[i], len, h), i);
    assert_int_equal(plan_strmap_get(&m, keys[i]), i);
    int old;
    assert_int_equal(plan_strmap_insert_h(&m, keys[i], len, h, -5, &old),
                     PLAN_OK);
    assert_int_equal(old, i); /* there already: unchanged */
  }
  assert_int_equal(
      plan_strmap_getn_h(&m, "layers.1.", 9, plan_strmap_hash("layers.1.", 9)),
      -1);
  /* more keys than reserved: the map grows as before */
  assert_int_equal(plan_strmap_put(&m, "extra", N), PLAN_OK);
  assert_int_equal(plan_strmap_reserve(&m, 2 * N), PLAN_OK);
  assert_true(m.cap > cap);
  assert_int_equal(plan_strmap_get(&m, "extra"), N);
  assert_int_equal(plan_strmap_get(&m, keys[N - 1]), N - 1);
  plan_strmap_free(&m);
}

static void test_strmap_growth(void **state) {
  (void)state;
  enum { N = 100000 };
  plan_arena a;
  plan_arena_init(&a);
  plan_strmap m;
  plan_strmap_init(&m);
  for (int i = 0; i < N; i++) {
    char *k = plan_arena_printf(&a, "layers.%d.weight", i);
    assert_non_null(k);
    assert_int_equal(plan_strmap_put(&m, k, i), PLAN_OK);
  }
  assert_int_equal(m.count, N);
  assert_true(m.cap >= N);
  assert_int_equal(m.cap & (m.cap - 1), 0); /* power of two */
  assert_true(m.count * 4 <= m.cap * 3);
  char k[64];
  for (int i = 0; i < N; i++) {
    snprintf(k, sizeof k, "layers.%d.weight", i);
    if (plan_strmap_get(&m, k) != i)
      fail_msg("key %s lost", k);
  }
  for (int i = N; i < N + 1000; i++) {
    snprintf(k, sizeof k, "layers.%d.weight", i);
    assert_int_equal(plan_strmap_get(&m, k), -1);
  }
  plan_strmap_free(&m);
  plan_arena_free(&a);
}

/* ---- doubles ------------------------------------------------------------- */

static void check_fmt(double v, const char *want) {
  char buf[32];
  plan_format_double(v, buf);
  if (strcmp(buf, want) != 0)
    fail_msg("format %.17g: got %s, want %s", v, buf, want);
}

static void test_format_double(void **state) {
  (void)state;
  check_fmt(0.0, "0");
  check_fmt(-0.0, "-0");
  check_fmt(1.0, "1");
  check_fmt(-2.5, "-2.5");
  check_fmt(0.1, "0.1");
  check_fmt(0.1 + 0.2, "0.30000000000000004");
  check_fmt(1.0 / 3.0, "0.3333333333333333");
  check_fmt(2.0 / 3.0, "0.6666666666666666");
  check_fmt(1e300, "1e+300");
  check_fmt(5e-324, "5e-324");
  check_fmt(1e21, "1e+21");
  check_fmt(123456789.0, "123456789");
  check_fmt(1e-7, "1e-07");
  check_fmt(1.7976931348623157e308, "1.7976931348623157e+308");
  check_fmt(NAN, "nan");
  check_fmt(-NAN, "nan");
  check_fmt(INFINITY, "inf");
  check_fmt(-INFINITY, "-inf");
  /* Round trip over many values, bit for bit. */
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    memcpy(&v, &x, sizeof v);
    if (isnan(v) || isinf(v))
      continue;
    char buf[32];
    plan_format_double(v, buf);
    double back;
    assert_true(plan_parse_double(buf, strlen(buf), &back));
    if (memcmp(&back, &v, sizeof v) != 0)
      fail_msg("%s does not round-trip", buf);
  }
}

static void check_pd(const char *s, double want) {
  double v = -12345;
  if (!plan_parse_double(s, strlen(s), &v))
    fail_msg("parse_double rejected \"%s\"", s);
  if (isnan(want)) {
    assert_true(isnan(v));
    return;
  }
  if (memcmp(&v, &want, sizeof v) != 0)
    fail_msg("parse_double(\"%s\") = %.17g, want %.17g", s, v, want);
}

static void check_pd_bad(const char *s) {
  double v = -12345;
  if (plan_parse_double(s, strlen(s), &v))
    fail_msg("parse_double accepted \"%s\"", s);
  assert_true(v == -12345);
}

static void test_parse_double(void **state) {
  (void)state;
  check_pd("0", 0.0);
  check_pd("-0", -0.0);
  check_pd("-0.0", -0.0);
  check_pd("+1", 1.0);
  check_pd("1.", 1.0);
  check_pd(".5", 0.5);
  check_pd("-.5", -0.5);
  check_pd("0.1", 0.1);
  check_pd("007", 7.0); /* YAML floats allow leading zeros */
  check_pd("1e3", 1000.0);
  check_pd("1E+3", 1000.0);
  check_pd("2.5e-3", 0.0025);
  check_pd("1e300", 1e300);
  check_pd("5e-324", 5e-324);
  check_pd("1e999", INFINITY);
  check_pd("-1e999", -INFINITY);
  check_pd("1e-999", 0.0);
  check_pd(".inf", INFINITY);
  check_pd(".Inf", INFINITY);
  check_pd("+.INF", INFINITY);
  check_pd("-.inf", -INFINITY);
  check_pd(".nan", NAN);
  check_pd(".NaN", NAN);
  check_pd(".NAN", NAN);
  /* A long spelling takes the heap path. */
  char longnum[600];
  memset(longnum, '0', sizeof longnum);
  longnum[0] = '1';
  longnum[1] = '.';
  longnum[sizeof longnum - 1] = '\0';
  check_pd(longnum, 1.0);

  const char *bad[] = {
      "",         "-",    "+",         ".",     "e3",   "1e",    "1e+",
      "1.e",      " 1",   "1 ",        "1,5",   "0x10", "inf",   "nan",
      "-.nan",    ".iNf", ".infinity", "1_000", "--1",  "1.2.3", "1e3.5",
      "Infinity", "NaN",  "+-1",       "1f",    ".e1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    check_pd_bad(bad[i]);
  /* The length bounds the input: trailing text beyond it is ignored. */
  double v;
  assert_true(plan_parse_double("2.5xyz", 3, &v));
  assert_true(v == 2.5);
}

/* ---- integers ------------------------------------------------------------ */

static void check_pi(const char *s, int64_t want) {
  int64_t v = 99;
  if (!plan_parse_int64(s, strlen(s), &v))
    fail_msg("parse_int64 rejected \"%s\"", s);
  assert_int_equal(v, want);
}

static void test_parse_int64(void **state) {
  (void)state;
  check_pi("0", 0);
  check_pi("-0", 0);
  check_pi("+0", 0);
  check_pi("7", 7);
  check_pi("+42", 42);
  check_pi("-42", -42);
  check_pi("9223372036854775807", INT64_MAX);
  check_pi("-9223372036854775808", INT64_MIN);
  const char *bad[] = {"",
                       "-",
                       "+",
                       "007",
                       "00",
                       "-01",
                       " 1",
                       "1 ",
                       "1.0",
                       "1e3",
                       "0x1",
                       "1_0",
                       "--1",
                       "+-1",
                       "a",
                       "9223372036854775808",
                       "-9223372036854775809",
                       "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 99;
    if (plan_parse_int64(bad[i], strlen(bad[i]), &v))
      fail_msg("parse_int64 accepted \"%s\"", bad[i]);
    assert_int_equal(v, 99);
    /* the public face (the tool's flags) is the same parser */
    assert_int_equal(plan_parse_int(&v, bad[i], strlen(bad[i])), PLAN_EINVALID);
    assert_int_equal(v, 99);
  }
  int64_t v;
  assert_int_equal(plan_parse_int(&v, "-42", 3), PLAN_OK);
  assert_int_equal(v, -42);
  assert_int_equal(plan_parse_int(&v, "9223372036854775807", 19), PLAN_OK);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(plan_parse_int(NULL, "1", 1), PLAN_EINVALID);
  assert_int_equal(plan_parse_int(&v, NULL, 1), PLAN_EINVALID);
  assert_true(plan_parse_int64("123abc", 3, &v));
  assert_int_equal(v, 123);
  assert_false(plan_parse_int64("123", 0, &v));
}

/* plan_read_file: regular files only, never blocking, capped. */
static void test_read_file(void **state) {
  (void)state;
  char dir[] = "/tmp/libplan-read-XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/f.yaml", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite("0123456789", 1, 10, f), 10);
  assert_int_equal(fclose(f), 0);
  char *data = (char *)1;
  size_t len = 99;
  assert_int_equal(plan_read_file(&data, &len, path, 0), PLAN_OK);
  assert_int_equal(len, 10);
  assert_string_equal(data, "0123456789");
  plan_buffer_free(data);
  /* exactly at the cap is fine, one byte over is not */
  assert_int_equal(plan_read_file(&data, &len, path, 10), PLAN_OK);
  plan_buffer_free(data);
  assert_int_equal(plan_read_file(&data, &len, path, 9), PLAN_ELIMIT);
  assert_null(data);
  assert_non_null(strstr(plan_error_last()->message, "9 bytes"));
  assert_string_equal(plan_error_last()->file, path);
  /* a FIFO with no writer: refused at once, not waited on */
  char fifo[128];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(plan_read_file(&data, &len, fifo, 0), PLAN_EIO);
  assert_non_null(strstr(plan_error_last()->message, "FIFO"));
  /* devices and folders */
  assert_int_equal(plan_read_file(&data, &len, "/dev/zero", 0), PLAN_EIO);
  assert_non_null(strstr(plan_error_last()->message, "character device"));
  assert_int_equal(plan_read_file(&data, &len, dir, 0), PLAN_EIO);
  assert_non_null(strstr(plan_error_last()->message, "directory"));
  snprintf(path, sizeof path, "%s/none.yaml", dir);
  assert_int_equal(plan_read_file(&data, &len, path, 0), PLAN_EIO);
  assert_int_equal(plan_read_file(NULL, &len, path, 0), PLAN_EUSAGE);
  assert_int_equal(plan_read_file(&data, &len, NULL, 0), PLAN_EUSAGE);
  remove(fifo);
  snprintf(path, sizeof path, "%s/f.yaml", dir);
  remove(path);
  rmdir(dir);
}

static void test_overflow(void **state) {
  (void)state;
  int64_t r;
  assert_true(plan_mul_i64(3, -4, &r));
  assert_int_equal(r, -12);
  assert_true(plan_mul_i64(INT64_MAX, 1, &r));
  assert_true(plan_mul_i64(INT64_MIN, 1, &r));
  assert_false(plan_mul_i64(INT64_MIN, -1, &r));
  assert_false(plan_mul_i64(INT64_MAX / 2 + 1, 2, &r));
  assert_false(plan_mul_i64((int64_t)1 << 32, (int64_t)1 << 31, &r));
  assert_true(plan_mul_i64((int64_t)1 << 31, (int64_t)1 << 31, &r));
  assert_int_equal(r, (int64_t)1 << 62);
  assert_true(plan_mul_i64(0, INT64_MIN, &r));
  assert_int_equal(r, 0);
  assert_true(plan_add_i64(INT64_MAX, 0, &r));
  assert_false(plan_add_i64(INT64_MAX, 1, &r));
  assert_false(plan_add_i64(INT64_MIN, -1, &r));
  assert_true(plan_add_i64(INT64_MIN, INT64_MAX, &r));
  assert_int_equal(r, -1);
}

/* ---- globs --------------------------------------------------------------- */

static void test_glob(void **state) {
  (void)state;
  struct {
    const char *pat, *name;
    bool want;
  } cases[] = {
      {"", "", true},
      {"", "a", false},
      {"*", "", true},
      {"*", "anything.at.all", true},
      {"**", "x", true},
      {"a", "a", true},
      {"a", "b", false},
      {"layers.0.*", "layers.0.attn.q", true},
      {"layers.0.*", "layers.0.", true},
      {"layers.0.*", "layers.0", false},
      {"layers.0.*", "layers.10.attn", false},
      {"layers.*.mlp", "layers.3.mlp", true},
      {"layers.*.mlp", "layers.3.x.mlp", true},
      {"layers.*.mlp", "layers.3.mlp.fc", false},
      {"?", "", false},
      {"?", "a", true},
      {"?", "ab", false},
      {"a?c", "abc", true},
      {"a?c", "a.c", true},
      {"*.fc?", "mlp.fc1", true},
      {"[abc]", "b", true},
      {"[abc]", "d", false},
      {"[a-c]x", "bx", true},
      {"[a-c]x", "dx", false},
      {"[!a-c]x", "dx", true},
      {"[!a-c]x", "ax", false},
      {"[]]", "]", true},
      {"[!]]", "]", false},
      {"[!]]", "a", true},
      {"[a-]", "-", true},
      {"[-a]", "-", true},
      {"[0-9][0-9]", "42", true},
      {"[0-9][0-9]", "4x", false},
      {"[abc", "[abc", true}, /* unclosed: literal '[' */
      {"[abc", "a", false},
      {"a*b*c", "aXbYc", true},
      {"a*b*c", "aXbY", false},
      {"*a", "banana", true},
      {"*x*", "banana", false},
      {"*an*an*", "banana", true},
      {"a*", "a", true},
      {"*?", "", false},
      {"*?", "z", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (plan_glob_match(cases[i].pat, cases[i].name) != cases[i].want)
      fail_msg("glob \"%s\" vs \"%s\": want %d", cases[i].pat, cases[i].name,
               cases[i].want);

  /* Pathological pattern: exponential backtracking would never finish. */
  char name[4001], pat[200];
  memset(name, 'a', 4000);
  name[4000] = '\0';
  size_t k = 0;
  for (int i = 0; i < 60; i++) {
    pat[k++] = 'a';
    pat[k++] = '*';
  }
  pat[k++] = 'b';
  pat[k] = '\0';
  assert_false(plan_glob_match(pat, name));
  pat[k - 1] = 'a';
  assert_true(plan_glob_match(pat, name));

  assert_true(plan_is_glob("a*"));
  assert_true(plan_is_glob("a?"));
  assert_true(plan_is_glob("[ab]"));
  assert_false(plan_is_glob("layers.0.mlp"));
  assert_false(plan_is_glob(""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_fail_sets_fields),
      cmocka_unit_test(test_error_wrap_own_message),
      cmocka_unit_test(test_error_truncates),
      cmocka_unit_test(test_error_per_thread),
      cmocka_unit_test(test_error_format),
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_hash_text),
      cmocka_unit_test(test_arena),
      cmocka_unit_test(test_buf),
      cmocka_unit_test(test_strmap_basic),
      cmocka_unit_test(test_strmap_reserve_hashed),
      cmocka_unit_test(test_strmap_growth),
      cmocka_unit_test(test_format_double),
      cmocka_unit_test(test_parse_double),
      cmocka_unit_test(test_parse_int64),
      cmocka_unit_test(test_read_file),
      cmocka_unit_test(test_overflow),
      cmocka_unit_test(test_glob),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
