/* Shape reduction's summary (reduce.c): the atoms grouped by what became
 * of them, named after the dims they make up, in one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce_ctx.h"

#define SUMMARY_ITEMS 10

static const char *const keep_text[KEEP_COUNT] = {
    "",
    "split/concat dim, parts with no common size",
    "the number of split/concat parts",
    "no sharding rule describes it",
    "no op uses it",
    "uneven over several axes",
    "merged dim, uneven major part",
    "no smaller size keeps its sharding",
    "an integer range indexes it",
    "the repeats of repeat_interleave",
    "computed indices point into it"};

/* ---- the summary --------------------------------------------------------- */

typedef struct label {
  char text[96];
  bool named;
  int order;
} label;

/* The label with every all-digit path component before its "[" as "*",
 * so the dims of repeated layers (layers.3.mlp.h[2]) make one entry. */
static char *pattern_of(plan_arena *a, const char *text) {
  size_t n = strlen(text);
  char *o = plan_arena_alloc(a, n + 1);
  if (!o)
    return NULL;
  const char *br = strchr(text, '[');
  size_t end = br ? (size_t)(br - text) : n, w = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < end && text[j] >= '0' && text[j] <= '9')
      j++;
    bool whole =
        j > i && (i == 0 || text[i - 1] == '.') && (j == end || text[j] == '.');
    if (whole) {
      o[w++] = '*';
      i = j;
    } else {
      o[w++] = text[i++];
    }
  }
  o[w] = '\0';
  return o;
}

/* Entries of the summary: atoms grouped by kind (reduced or kept), sizes,
 * reason and label pattern, in order of first appearance. */
typedef struct sgroup {
  const char *text, *pattern;
  int atom, count;
  bool kept;
} sgroup;

static int group_atoms(rctx *c, const label *lb, const int *list, int nl,
                       plan_arena *a, sgroup *g, int *ng) {
  plan_strmap seen;
  plan_strmap_init(&seen);
  int rc = PLAN_OK;
  *ng = 0;
  for (int kept = 0; kept < 2 && !rc; kept++)
    for (int i = 0; i < nl && !rc; i++) {
      const rnode *n = &c->n[list[i]];
      if (kept ? !n->keep || n->size <= 2 || n->keep == KEEP_UNUSED
               : n->nsize == n->size)
        continue;
      char *pat = pattern_of(a, lb[list[i]].text);
      char *key = pat ? plan_arena_printf(
                            a, "%d %lld %lld %d %s", kept, (long long)n->size,
                            (long long)n->nsize, (int)n->keep, pat)
                      : NULL;
      int old;
      if (!key || plan_strmap_insert(&seen, key, *ng, &old)) {
        rc = plan_oom();
        break;
      }
      if (old >= 0) {
        g[old].count++;
        continue;
      }
      g[*ng] = (sgroup){lb[list[i]].text, pat, list[i], 1, kept == 1};
      (*ng)++;
    }
  plan_strmap_free(&seen);
  return rc;
}

int plan_rd_summary(rctx *c, char **out) {
  const plan_program *prog = c->prog;
  label *lb = calloc((size_t)c->nn + 1, sizeof *lb);
  int *list = malloc(sizeof(int) * ((size_t)c->nn + 1));
  if (!lb || !list) {
    free(lb);
    free(list);
    return plan_oom();
  }
  for (int x = 0; x < c->nn; x++)
    lb[x].order = -1;
  int seq = 0;
  double before = 0, after = 0;
  /* name each atom after the first dim made of it alone, preferring a
   * named dim; atoms only found inside merged dims as "t[d]/part" */
  for (int pass = 0; pass < 2; pass++)
    for (int t = 0; t < prog->ntensors; t++) {
      const plan_tensor *x = &prog->tensors[t];
      double e0 = 1, e1 = 1;
      for (int d = 0; d < x->rank; d++) {
        int D = c->dimoff[t] + d;
        e0 *= (double)x->dims[d];
        e1 *= (double)plan_rd_new_dim(c, t, d);
        for (int k = 0; k < c->natoms[D]; k++) {
          int a = c->atoms[c->atomoff[D] + k];
          bool alone = c->natoms[D] == 1;
          if (pass == 0 && !alone)
            continue;
          const char *nm = x->dim_names ? x->dim_names[d] : NULL;
          label *L = &lb[a];
          if (L->order < 0) {
            L->order = seq++;
            L->named = alone && nm;
            if (L->named)
              snprintf(L->text, sizeof L->text, "%s", nm);
            else if (alone)
              snprintf(L->text, sizeof L->text, "%s[%d]", x->name, d);
            else
              snprintf(L->text, sizeof L->text, "%s[%d]/%d", x->name, d, k);
          } else if (!L->named && alone && nm) {
            L->named = true;
            snprintf(L->text, sizeof L->text, "%s", nm);
          }
        }
      }
      if (pass == 0) {
        before += e0;
        after += e1;
      }
    }
  /* orders are 0 .. seq-1, one per labelled atom */
  int nl = seq;
  for (int x = 0; x < c->nn; x++)
    if (lb[x].order >= 0)
      list[lb[x].order] = x;
  plan_arena a;
  plan_arena_init(&a);
  sgroup *g = malloc(sizeof *g * ((size_t)nl + 1));
  int ng = 0;
  int rc = g ? group_atoms(c, lb, list, nl, &a, g, &ng) : plan_oom();
  plan_buf b;
  plan_buf_init(&b);
  plan_buf_puts(&b, "reduced: ");
  int shown[2] = {0, 0}, more[2] = {0, 0};
  for (int i = 0; i < ng && !rc; i++) {
    int k = g[i].kept;
    if (shown[k] >= SUMMARY_ITEMS) {
      more[k]++;
      continue;
    }
    if (k && !shown[1]) {
      if (!shown[0])
        plan_buf_puts(&b, "nothing (every dim keeps its size)");
      if (more[0])
        plan_buf_printf(&b, " and %d more", more[0]);
      if (after > 0 && before > after)
        plan_buf_printf(&b, " (%.*fx fewer elements)",
                        before / after < 10 ? 1 : 0, before / after);
      plan_buf_puts(&b, "; kept: ");
    } else if (shown[k]) {
      plan_buf_puts(&b, ", ");
    }
    const rnode *n = &c->n[g[i].atom];
    plan_buf_printf(&b, "%s %lld", g[i].count > 1 ? g[i].pattern : g[i].text,
                    (long long)n->size);
    if (k)
      plan_buf_printf(&b, " (%s)", keep_text[n->keep]);
    else
      plan_buf_printf(&b, "->%lld", (long long)n->nsize);
    if (g[i].count > 1)
      plan_buf_printf(&b, " (x%d)", g[i].count);
    shown[k]++;
  }
  if (!shown[1]) {
    if (!shown[0])
      plan_buf_puts(&b, "nothing (every dim keeps its size)");
    if (more[0])
      plan_buf_printf(&b, " and %d more", more[0]);
    if (after > 0 && before > after)
      plan_buf_printf(&b, " (%.*fx fewer elements)",
                      before / after < 10 ? 1 : 0, before / after);
  } else if (more[1]) {
    plan_buf_printf(&b, " and %d more", more[1]);
  }
  plan_rd_mesh_summary(c, &b);
  free(g);
  plan_arena_free(&a);
  free(lb);
  free(list);
  if (rc) {
    plan_buf_free(&b);
    return rc;
  }
  return plan_buf_take(&b, out, NULL);
}
