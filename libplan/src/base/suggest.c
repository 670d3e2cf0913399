/* Did-you-mean: the nearest one or two names of a list to a word that
 * names none of them (an unknown verb, flag, key, op kind, tensor, op,
 * strategy or hardware profile), by edit distance, for the messages of the
 * core, the tool, the Lua module and the Python binding (plan_suggest,
 * diag.h). */
#include <stdio.h>
#include <string.h>

#include "base/suggest.h"
#include "libplan/diag.h"

enum { MAX_LEN = 64 };

/* Optimal string alignment distance (insertions, deletions, substitutions
 * and transpositions of neighbours, each 1); -1 past MAX_LEN. */
static int distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > MAX_LEN || m > MAX_LEN)
    return -1;
  int rows[3][MAX_LEN + 1];
  int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++)
    prev[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] != b[j - 1];
      int d = prev[j] + 1;
      if (cur[j - 1] + 1 < d)
        d = cur[j - 1] + 1;
      if (prev[j - 1] + cost < d)
        d = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          prev2[j - 2] + 1 < d)
        d = prev2[j - 2] + 1;
      cur[j] = d;
    }
    int *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[m];
}

/* The most edits a suggestion may be away: a third of the word, at least
 * one, so that "gleu" finds "gelu" but "x" does not find "y". */
static int threshold(const char *word) {
  int t = (int)strlen(word) / 3;
  return t < 1 ? 1 : t;
}

int plan_suggest(char *buf, size_t size, const char *word,
                 const char *const *names, size_t count) {
  if (buf && size)
    buf[0] = '\0';
  if (!word || !names)
    return 0;
  int limit = threshold(word), best = limit + 1;
  const char *pick[2] = {NULL, NULL};
  for (size_t i = 0; i < count && names[i]; i++) {
    if (!names[i][0] || !strcmp(names[i], word))
      continue;
    int d = distance(word, names[i]);
    if (d < 0 || d > limit || d > best)
      continue;
    if (d < best) {
      best = d;
      pick[0] = names[i];
      pick[1] = NULL;
    } else if (!pick[1] && strcmp(pick[0], names[i])) {
      pick[1] = names[i]; /* a tie: the second name of that distance */
    }
  }
  int n = pick[0] ? (pick[1] ? 2 : 1) : 0;
  if (!buf || !size || !n)
    return n;
  size_t left = size - 1, at = 0;
  const char *parts[5] = {"did you mean '", pick[0], "'", NULL, NULL};
  if (n == 2) {
    parts[3] = " or '";
    parts[4] = pick[1];
  }
  for (int k = 0; k < 5; k++) {
    if (!parts[k])
      continue;
    size_t l = strlen(parts[k]);
    if (l > left - at)
      l = left - at;
    memcpy(buf + at, parts[k], l);
    at += l;
  }
  const char *tail = n == 2 ? "'?" : "?";
  size_t l = strlen(tail);
  if (l > left - at)
    l = left - at;
  memcpy(buf + at, tail, l);
  at += l;
  buf[at] = '\0';
  return n;
}

void plan_hint_names(char *hint, size_t size, const char *word,
                     const char *const *names, size_t count) {
  char buf[PLAN_HINT_SIZE];
  if (!size)
    return;
  hint[0] = '\0';
  if (plan_suggest(buf, sizeof buf, word, names, count))
    snprintf(hint, size, "; %s", buf);
}

void plan_hint_field(char *hint, size_t size, const char *word,
                     const void *base, size_t count, size_t stride,
                     size_t offset) {
  if (!size)
    return;
  hint[0] = '\0';
  /* in chunks, so that no allocation is needed: the nearest of each chunk
   * competes again with the next chunk's names */
  enum { CHUNK = 64 };
  const char *names[CHUNK + 2];
  size_t kept = 0;
  for (size_t i = 0; i < count;) {
    size_t n = kept;
    for (; n < CHUNK + kept && i < count; i++) {
      const char *s =
          *(const char *const *)((const char *)base + i * stride + offset);
      if (s)
        names[n++] = s;
    }
    char buf[PLAN_HINT_SIZE];
    kept = 0;
    if (plan_suggest(buf, sizeof buf, word, names, n)) {
      /* keep the picks for the next chunk: parse them back from buf */
      const char *q = buf;
      while ((q = strchr(q, '\'')) != NULL && kept < 2) {
        const char *e = strchr(q + 1, '\'');
        if (!e)
          break;
        for (size_t k = 0; k < n; k++)
          if (strlen(names[k]) == (size_t)(e - q - 1) &&
              !strncmp(names[k], q + 1, (size_t)(e - q - 1))) {
            names[kept++] = names[k];
            break;
          }
        q = e + 1;
      }
    }
  }
  plan_hint_names(hint, size, word, names, kept);
}
