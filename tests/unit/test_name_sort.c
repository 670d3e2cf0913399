/* Unit tests for the name sort of the canonical encoders (canon_json.c):
 * the order every hash is built on must be byte order whatever order the
 * names come in, in O(n log n) and without recursion:
 * - names placed so that the old middle-pivot quicksort picked the smallest
 *   name at every level (n levels of recursion: 120k overflowed the stack);
 * - unpadded numbers (op0 .. op199999), quadratic for the old sort;
 * - names placed so that the median-of-three pivot is the second smallest
 *   of every part until the depth budget runs out (the heapsort fallback);
 * - long shared prefixes (many 8-byte chunks deep), a shuffle, few names.
 * Each result is checked against strcmp: every name once, in byte order. */
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

#include "hash/canon_json.h"

/* A program that holds only what the sort reads: op and tensor names. */
typedef struct names {
  plan_program p;
  char *text; /* the names, each in 64 bytes or more */
} names;

static names *names_new(int n, size_t width) {
  names *s = calloc(1, sizeof *s);
  assert_non_null(s);
  s->p.nops = s->p.ntensors = n;
  s->p.ops = calloc((size_t)n + 1, sizeof(plan_op));
  s->p.tensors = calloc((size_t)n + 1, sizeof(plan_tensor));
  s->text = calloc((size_t)n + 1, width);
  assert_non_null(s->p.ops);
  assert_non_null(s->p.tensors);
  assert_non_null(s->text);
  for (int i = 0; i < n; i++)
    s->p.ops[i].name = s->p.tensors[i].name = s->text + (size_t)i * width;
  return s;
}

static void names_free(names *s) {
  free(s->p.ops);
  free(s->p.tensors);
  free(s->text);
  free(s);
}

/* Sorts through plan_cj_order_make and checks the result. */
static void check_sorted(const names *s) {
  cj_order o;
  assert_int_equal(plan_cj_order_make(&o, &s->p, false), PLAN_OK);
  int n = s->p.nops;
  char *seen = calloc((size_t)n + 1, 1);
  assert_non_null(seen);
  for (int i = 0; i < n; i++) {
    assert_true(o.ops[i].idx >= 0 && o.ops[i].idx < n);
    assert_false(seen[o.ops[i].idx]);
    seen[o.ops[i].idx] = 1;
    assert_ptr_equal(o.ops[i].name, s->p.ops[o.ops[i].idx].name);
    if (i && strcmp(o.ops[i - 1].name, o.ops[i].name) >= 0)
      fail_msg("position %d: '%s' before '%s'", i, o.ops[i - 1].name,
               o.ops[i].name);
    assert_string_equal(o.tens[i].name, o.ops[i].name);
  }
  free(seen);
  plan_cj_order_free(&o);
}

/* Rank r's name: distinct in its first 8 bytes, byte order = rank order. */
static void put_rank(names *s, int pos, int rank) {
  snprintf((char *)s->p.ops[pos].name, 64, "n%07d", rank);
}

/* The old sort swapped the middle entry to the front as the pivot, then a
 * part whose pivot is its smallest name becomes [a2 .. a(n-1), a1]: the
 * ranks that make that happen at every level (a ring buffer, O(n)). */
static void old_killer(names *s, int n) {
  int *buf = malloc(sizeof(int) * (size_t)(2 * n + 1));
  assert_non_null(buf);
  for (int i = 0; i < n; i++)
    buf[i] = i;
  int head = 0, tail = n, rank = 0;
  while (tail - head >= 8) {
    int a = head, b = head + (tail - head) / 2, t = buf[a];
    buf[a] = buf[b];
    buf[b] = t;
    put_rank(s, buf[head++], rank++);
    buf[tail++] = buf[head++];
  }
  for (int i = head; i < tail; i++)
    put_rank(s, buf[i], rank++);
  free(buf);
}

static void test_old_pivot_killer(void **state) {
  (void)state;
  int n = 120000;
  names *s = names_new(n, 64);
  old_killer(s, n);
  check_sorted(s);
  names_free(s);
}

static void test_unpadded_numbers(void **state) {
  (void)state;
  int n = 200000;
  names *s = names_new(n, 64);
  for (int i = 0; i < n; i++)
    snprintf((char *)s->p.ops[i].name, 64, "op%d", i);
  check_sorted(s);
  names_free(s);
}

/* Ranks that make the sort's median of three (at n/4, n/2, n-1-n/4) the
 * second smallest entry of every part along the chain of larger parts, for
 * as many partitions as the depth budget allows: the part left then goes
 * to the heapsort. The partition is simulated on positions with the ranks
 * not yet given counted as larger than any given. */
static void median_killer(names *s, int n) {
  int *v = malloc(sizeof(int) * (size_t)n),
      *rank = malloc(sizeof(int) * (size_t)n);
  assert_non_null(v);
  assert_non_null(rank);
  for (int i = 0; i < n; i++) {
    v[i] = i;
    rank[i] = -1;
  }
  int next = 0, base = 0, len = n, budget = 0;
  for (int m = n; m > 1; m >>= 1)
    budget += 2;
  for (; budget > 0 && len >= 64; budget--) {
    int *w = v + base;
    int i = len / 4, j = len / 2;
    rank[w[i]] = next++;
    rank[w[j]] = next++;
    int t = w[0]; /* the median (j) to the front */
    w[0] = w[j];
    w[j] = t;
    int pivot = rank[w[0]], lt = 0, gt = len, k = 0;
    while (k < gt) {
      int c = rank[w[k]] < 0 ? n : rank[w[k]];
      if (c < pivot) {
        t = w[lt];
        w[lt++] = w[k];
        w[k++] = t;
      } else if (c > pivot) {
        t = w[k];
        w[k] = w[--gt];
        w[gt] = t;
      } else {
        k++;
      }
    }
    base += gt;
    len -= gt;
  }
  for (int i = 0; i < n; i++)
    if (rank[i] < 0)
      rank[i] = next++;
  for (int i = 0; i < n; i++)
    put_rank(s, i, rank[i]);
  free(v);
  free(rank);
}

static void test_median_killer(void **state) {
  (void)state;
  int n = 100000;
  names *s = names_new(n, 64);
  median_killer(s, n);
  check_sorted(s);
  names_free(s);
}

/* 240 shared bytes, then a number: 30 chunks deep before names differ. */
static void test_long_prefixes(void **state) {
  (void)state;
  int n = 20000;
  names *s = names_new(n, 256);
  char prefix[241];
  for (int i = 0; i < 240; i++)
    prefix[i] = (char)('a' + i % 26);
  prefix[240] = 0;
  for (int i = 0; i < n; i++)
    snprintf((char *)s->p.ops[i].name, 256, "%s%d", prefix,
             (int)((i * 7919L) % n));
  check_sorted(s);
  names_free(s);
}

/* A deterministic shuffle of names of mixed lengths, prefixes of others. */
static void test_shuffle(void **state) {
  (void)state;
  int n = 50000;
  names *s = names_new(n, 64);
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    snprintf((char *)s->p.ops[i].name, 64, "layers.%d.%s%d", (int)(x % 97),
             i % 3 ? "attn." : "", i);
  }
  check_sorted(s);
  names_free(s);
}

static void test_small(void **state) {
  (void)state;
  const char *const words[] = {"b",         "a", "ab",   "abcdefgh", "abcdefg",
                               "abcdefghi", "",  "\x7f", "\x80",     "zz"};
  int n = (int)(sizeof words / sizeof *words);
  for (int k = 0; k <= n; k++) {
    names *s = names_new(k, 64);
    for (int i = 0; i < k; i++)
      strcpy((char *)s->p.ops[i].name, words[i]);
    check_sorted(s);
    names_free(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_old_pivot_killer),
      cmocka_unit_test(test_unpadded_numbers),
      cmocka_unit_test(test_median_killer),
      cmocka_unit_test(test_long_prefixes),
      cmocka_unit_test(test_shuffle),
      cmocka_unit_test(test_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
