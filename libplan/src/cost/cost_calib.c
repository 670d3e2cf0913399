/* Calibration: measured figures that override the cost model for the ops
 * or collectives a pattern names (libplan/cost.h, docs/cost.md). Entries
 * are kept in order; after every change each op's and collective's
 * winning entry is looked up once, so evaluation pays one index. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_model.h"
#include "yaml/reader.h"
#include "yaml/yamldoc.h"

static int coll_kind(const char *name) {
  static const int kinds[] = {PLAN_REDIST_ALL_GATHER, PLAN_REDIST_ALL_REDUCE,
                              PLAN_REDIST_REDUCE_SCATTER,
                              PLAN_REDIST_ALL_TO_ALL};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(name, plan_redist_kind_name((plan_redist_kind)kinds[i])))
      return kinds[i];
  if (!strcmp(name, "send"))
    return COST_COLL_SEND;
  return -1;
}

/* The entry for op `op` among those for profile q (-1: the model's own
 * hardware, entries for every device only): an exact name wins over a
 * glob, a glob over a kind; at the same level an entry for the profile
 * wins over one for every device; among equals the latest. */
static int best_entry(const plan_cost_model *m, int op, int q) {
  int best = -1, rank = 0;
  for (int i = 0; i < m->ncals; i++) {
    const cost_cal *c = &m->cals[i];
    if (c->target == COST_TARGET_COLL || (c->prof != -1 && c->prof != q))
      continue;
    int r = 0;
    if (c->target == COST_TARGET_NAME)
      r = strcmp(c->pattern, m->op_names[op]) ? 0 : 3;
    else if (c->target == COST_TARGET_GLOB)
      r = plan_glob_match(c->pattern, m->op_names[op]) ? 2 : 0;
    else if (c->target == COST_TARGET_KIND)
      r = c->kind == m->op_kinds[op] ? 1 : 0;
    r = r ? 2 * r + (c->prof == q) : 0;
    if (r && r >= rank) {
      best = i;
      rank = r;
    }
  }
  return best;
}

void plan_cost_cal_match(plan_cost_model *m) {
  for (int c = 0; c < COST_COLL_COUNT; c++)
    m->coll_cal[c] = -1;
  for (int i = 0; i < m->ncals; i++)
    if (m->cals[i].target == COST_TARGET_COLL)
      m->coll_cal[m->cals[i].kind] = i;
  for (int op = 0; op < m->nops; op++)
    m->op_cal[op] = best_entry(m, op, -1);
  /* each profile of a mixed mesh: its own entries and every device's */
  for (int q = 0; q < m->nprof; q++) {
    cost_prof *pr = &m->prof[q];
    for (int c = 0; c < COST_COLL_COUNT; c++)
      pr->coll_cal[c] = m->coll_cal[c];
    for (int op = 0; op < m->nops && pr->op_cal; op++)
      pr->op_cal[op] = best_entry(m, op, q);
  }
}

/* Two hardware names for the same profile (aliases resolved). */
static bool same_profile(const char *a, const char *b) {
  const char *ca = plan_cost_profile_resolve(a);
  const char *cb = plan_cost_profile_resolve(b);
  return !strcmp(ca ? ca : a, cb ? cb : b);
}

/* The entry's profile index for hardware `name`: the mesh's profile q of
 * that hardware; -1 (every device) when the model has one hardware and it
 * is that one; -2 (kept, used by no device) for another hardware. */
static int profile_index(const plan_cost_model *m, const char *name) {
  if (!name)
    return -1;
  for (int q = 0; q < m->nprof; q++)
    if (same_profile(m->prof[q].name, name))
      return q;
  if (m->nprof == 0 && same_profile(m->hw_name, name))
    return -1;
  return -2;
}

/* Appends an entry (figures already checked). */
static int add_entry(plan_cost_model *m, int prof, const char *pattern,
                     int mode, double value, const double *sizes,
                     const double *times, int n) {
  if (!pattern || !pattern[0])
    return plan_failf(PLAN_EUSAGE, "calibration: an empty pattern");
  if (m->ncals == m->cap_cals) {
    int cap = m->cap_cals ? 2 * m->cap_cals : 8;
    cost_cal *c = realloc(m->cals, sizeof *c * (size_t)cap);
    if (!c)
      return plan_oom();
    m->cals = c;
    m->cap_cals = cap;
  }
  cost_cal c = {0};
  c.prof = prof;
  if (!(c.pattern = plan_arena_strdup(&m->arena, pattern)))
    return plan_oom();
  c.mode = mode;
  c.value = value;
  int k;
  if ((k = coll_kind(pattern)) >= 0) {
    if (prof != -1)
      return plan_failf(PLAN_EINVALID,
                        "calibration of '%s' for one profile: a collective "
                        "spans the mesh's devices, calibrate it for all",
                        pattern);
    c.target = COST_TARGET_COLL;
    c.kind = k;
  } else if ((k = plan_op_kind_from_name(pattern)) >= 0) {
    c.target = COST_TARGET_KIND;
    c.kind = k;
  } else {
    c.target = plan_is_glob(pattern) ? COST_TARGET_GLOB : COST_TARGET_NAME;
    c.kind = -1;
  }
  if (mode == COST_CAL_TABLE) {
    double *s = plan_arena_alloc(&m->arena, sizeof(double) * (size_t)n);
    double *t = plan_arena_alloc(&m->arena, sizeof(double) * (size_t)n);
    if (!s || !t)
      return plan_oom();
    memcpy(s, sizes, sizeof(double) * (size_t)n);
    memcpy(t, times, sizeof(double) * (size_t)n);
    c.sizes = s;
    c.times = t;
    c.n = n;
  }
  m->cals[m->ncals++] = c;
  plan_cost_cal_match(m);
  return PLAN_OK;
}

int plan_cost_model_calibrate_profile(plan_cost_model *m, const char *profile,
                                      const char *pattern, double seconds,
                                      double rate) {
  if (!m)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_calibrate: no model");
  bool s = seconds != 0, r = rate != 0;
  if (s == r)
    return plan_failf(PLAN_EINVALID,
                      "calibration of '%s': give exactly one of seconds and "
                      "rate",
                      pattern ? pattern : "");
  double v = s ? seconds : rate;
  if (!isfinite(v) || v <= 0)
    return plan_failf(PLAN_EINVALID,
                      "calibration of '%s': %s must be finite and > 0",
                      pattern ? pattern : "", s ? "seconds" : "rate");
  return add_entry(m, profile_index(m, profile), pattern,
                   s ? COST_CAL_FIXED : COST_CAL_RATE, v, NULL, NULL, 0);
}

int plan_cost_model_calibrate(plan_cost_model *m, const char *pattern,
                              double seconds, double rate) {
  return plan_cost_model_calibrate_profile(m, NULL, pattern, seconds, rate);
}

/* Checks table points; on a problem writes the reason and returns the index
 * of the offending point (or -1 for the whole table's), else -2. */
static int table_problem(const double *sizes, const double *seconds, int n,
                         char *why, size_t size) {
  if (n < 1) {
    snprintf(why, size, "a table needs at least one point");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (!isfinite(sizes[i]) || sizes[i] <= 0 || !isfinite(seconds[i]) ||
        seconds[i] <= 0) {
      snprintf(why, size, "point %d: size and seconds must be finite and > 0",
               i + 1);
      return i;
    }
    if (i > 0 && sizes[i] <= sizes[i - 1]) {
      snprintf(why, size, "point %d: sizes must increase strictly", i + 1);
      return i;
    }
  }
  return -2;
}

int plan_cost_model_calibrate_table(plan_cost_model *m, const char *pattern,
                                    const double *sizes, const double *seconds,
                                    int n) {
  if (!m || (n > 0 && (!sizes || !seconds)))
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_calibrate_table: NULL "
                                   "argument");
  char why[160];
  if (table_problem(sizes, seconds, n, why, sizeof why) != -2)
    return plan_failf(PLAN_EINVALID, "calibration of '%s': %s",
                      pattern ? pattern : "", why);
  return add_entry(m, -1, pattern, COST_CAL_TABLE, 0, sizes, seconds, n);
}

/* ---- calibration files --------------------------------------------------- */

static const char *const root_keys[] = {
    "libplan-calibration", "hardware", "parameters", "ops",
    "collectives",         "profiles", NULL};

/* One entry of `ops` or `collectives`: {seconds: X} | {RATE_KEY: X} |
 * {table: [[size, seconds], ...]}. */
static int read_entry(const plan_reader *rd, plan_cost_model *m, int prof,
                      const plan_ynode *key, const plan_ynode *v,
                      const char *rate_key) {
  const char *keys[] = {"seconds", rate_key, "table", NULL};
  int rc = plan_rd_expect_map(rd, v, "a calibration entry");
  if (rc || (rc = plan_rd_check_keys(rd, v, keys, "a calibration entry", NULL)))
    return rc;
  const char *pattern = key->u.scalar.text;
  if (!pattern[0])
    return plan_rd_fail(rd, key, PLAN_EINVALID, "an empty pattern");
  int given = 0;
  for (int i = 0; i < 3; i++)
    given += plan_ymap_get(v, keys[i]) != NULL;
  if (given != 1)
    return plan_rd_fail(
        rd, v, PLAN_EINVALID,
        "calibration of '%s': give exactly one of seconds, %s and "
        "table",
        pattern, rate_key);
  const plan_ynode *n;
  double x;
  if ((n = plan_ymap_get(v, "seconds")) || (n = plan_ymap_get(v, rate_key))) {
    if ((rc = plan_rd_number(
             rd, n, n == plan_ymap_get(v, "seconds") ? "seconds" : rate_key,
             &x)))
      return rc;
    if (x <= 0)
      return plan_rd_fail(rd, n, PLAN_EINVALID,
                          "calibration of '%s': the figure must be > 0",
                          pattern);
    return add_entry(m, prof, pattern,
                     n == plan_ymap_get(v, "seconds") ? COST_CAL_FIXED
                                                      : COST_CAL_RATE,
                     x, NULL, NULL, 0);
  }
  n = plan_ymap_get(v, "table");
  if ((rc = plan_rd_expect_seq(rd, n, "table ([[size, seconds], ...])")))
    return rc;
  size_t cnt = n->u.seq.count;
  if (cnt < 1 || cnt > 4096)
    return plan_rd_fail(rd, n, PLAN_EINVALID,
                        "calibration of '%s': a table holds 1 to 4096 points",
                        pattern);
  double *sizes = malloc(sizeof(double) * cnt);
  double *secs = malloc(sizeof(double) * cnt);
  if (!sizes || !secs) {
    free(sizes);
    free(secs);
    return plan_oom();
  }
  for (size_t i = 0; i < cnt && !rc; i++) {
    const plan_ynode *pt = n->u.seq.items[i];
    if ((rc = plan_rd_expect_seq(rd, pt, "a table point ([size, seconds])")))
      break;
    if (pt->u.seq.count != 2) {
      rc = plan_rd_fail(rd, pt, PLAN_ESCHEMA,
                        "a table point is [size, seconds], not %zu numbers",
                        pt->u.seq.count);
      break;
    }
    if ((rc = plan_rd_number(rd, pt->u.seq.items[0], "a size", &sizes[i])) ||
        (rc = plan_rd_number(rd, pt->u.seq.items[1], "seconds", &secs[i])))
      break;
  }
  if (!rc) {
    char why[160];
    int bad = table_problem(sizes, secs, (int)cnt, why, sizeof why);
    if (bad != -2)
      rc = plan_rd_fail(rd, bad >= 0 ? n->u.seq.items[bad] : n, PLAN_EINVALID,
                        "calibration of '%s': %s", pattern, why);
  }
  if (!rc)
    rc = add_entry(m, prof, pattern, COST_CAL_TABLE, 0, sizes, secs, (int)cnt);
  free(sizes);
  free(secs);
  return rc;
}

/* An `ops` map of calibration entries, for profile index prof. */
static int read_ops(const plan_reader *rd, plan_cost_model *m, int prof,
                    const plan_ynode *v) {
  int rc = plan_rd_expect_map(rd, v, "ops");
  if (rc)
    return rc;
  for (size_t i = 0; i < v->u.map.count; i++) {
    const plan_ynode *k = v->u.map.pairs[i].key;
    if (coll_kind(k->u.scalar.text) >= 0)
      return plan_rd_fail(rd, k, PLAN_EINVALID,
                          "'%s' is a collective: list it under collectives",
                          k->u.scalar.text);
    if ((rc = read_entry(rd, m, prof, k, v->u.map.pairs[i].value,
                         "flops_per_second")))
      return rc;
  }
  return PLAN_OK;
}

static int read_calibration(const plan_reader *rd, plan_cost_model *m,
                            const plan_ynode *root) {
  int rc = plan_rd_expect_map(rd, root, "a calibration file");
  if (rc)
    return rc;
  const plan_ynode *v = plan_ymap_get(root, "libplan-calibration");
  if (!v)
    return plan_rd_fail(rd, root, PLAN_ESCHEMA,
                        "a calibration file starts with libplan-calibration: "
                        "\"0.1\"");
  const char *ver;
  if ((rc = plan_rd_string(rd, v, "libplan-calibration", &ver)))
    return rc;
  if (strncmp(ver, "0.", 2) != 0)
    return plan_rd_fail(rd, v, PLAN_EVERSION,
                        "calibration format '%s': this reader knows 0.x", ver);
  if ((rc =
           plan_rd_check_keys(rd, root, root_keys, "a calibration file", NULL)))
    return rc;
  if ((v = plan_ymap_get(root, "hardware")) &&
      (rc = plan_rd_expect_scalar(rd, v, "hardware")))
    return rc;
  if ((v = plan_ymap_get(root, "parameters"))) {
    if ((rc = plan_rd_expect_map(rd, v, "parameters")))
      return rc;
    for (size_t i = 0; i < v->u.map.count; i++) {
      const plan_ynode *k = v->u.map.pairs[i].key, *x = v->u.map.pairs[i].value;
      double d;
      if ((rc = plan_rd_number(rd, x, k->u.scalar.text, &d)))
        return rc;
      if ((rc = plan_cost_model_set(m, k->u.scalar.text, d))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", plan_error_last()->message);
        return plan_rd_fail(rd, rc == PLAN_ENOTFOUND ? k : x,
                            rc == PLAN_ENOTFOUND ? PLAN_ESCHEMA : rc, "%s",
                            msg);
      }
    }
  }
  if ((v = plan_ymap_get(root, "ops")) && (rc = read_ops(rd, m, -1, v)))
    return rc;
  if ((v = plan_ymap_get(root, "profiles"))) {
    /* profiles: {NAME: {ops: {...}}}: measured on that hardware, for the
     * devices of a mixed mesh that have it */
    if ((rc = plan_rd_expect_map(rd, v, "profiles")))
      return rc;
    static const char *const pkeys[] = {"ops", NULL};
    for (size_t i = 0; i < v->u.map.count; i++) {
      const plan_ynode *k = v->u.map.pairs[i].key, *x = v->u.map.pairs[i].value;
      if ((rc = plan_rd_expect_map(rd, x, "a profile's calibration")) ||
          (rc = plan_rd_check_keys(rd, x, pkeys, "a profile's calibration",
                                   NULL)))
        return rc;
      const plan_ynode *ops = plan_ymap_get(x, "ops");
      if (ops &&
          (rc = read_ops(rd, m, profile_index(m, k->u.scalar.text), ops)))
        return rc;
    }
  }
  if ((v = plan_ymap_get(root, "collectives"))) {
    if ((rc = plan_rd_expect_map(rd, v, "collectives")))
      return rc;
    for (size_t i = 0; i < v->u.map.count; i++) {
      const plan_ynode *k = v->u.map.pairs[i].key;
      if (coll_kind(k->u.scalar.text) < 0)
        return plan_rd_fail(rd, k, PLAN_EINVALID,
                            "unknown collective '%s' (all_gather, all_reduce, "
                            "reduce_scatter, all_to_all, send)",
                            k->u.scalar.text);
      if ((rc = read_entry(rd, m, -1, k, v->u.map.pairs[i].value, "bandwidth")))
        return rc;
    }
  }
  return PLAN_OK;
}

int plan_cost_model_load_calibration_buffer(plan_cost_model *m,
                                            const char *data, size_t len,
                                            const char *name) {
  if (!m || !data)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_load_calibration: NULL "
                                   "argument");
  plan_ydoc doc;
  int rc = plan_ydoc_parse_buffer(&doc, data, len, name ? name : "<buffer>");
  if (rc)
    return rc;
  /* what a failure must restore */
  cost_hw hw = m->hw;
  double eff[5] = {m->eff_matmul, m->eff_other, m->eff_memory, m->eff_link,
                   m->kernel_floor};
  int ncals = m->ncals;
  plan_reader rd = {
      doc.file, PLAN_FORMAT_MAJOR, PLAN_FORMAT_MINOR, &doc.arena, {0, 0}};
  rc = read_calibration(&rd, m, doc.root);
  if (rc) {
    m->hw = hw;
    m->hw.name = m->hw_name;
    m->eff_matmul = eff[0];
    m->eff_other = eff[1];
    m->eff_memory = eff[2];
    m->eff_link = eff[3];
    m->kernel_floor = eff[4];
    m->ncals = ncals;
    plan_cost_cal_match(m);
    plan_cost_model_derive(m);
  }
  plan_ydoc_free(&doc);
  return rc;
}

int plan_cost_model_load_calibration(plan_cost_model *m, const char *path) {
  if (!m || !path)
    return plan_failf(PLAN_EUSAGE, "plan_cost_model_load_calibration: NULL "
                                   "argument");
  /* a regular file only, never waited on, at most 64 MiB */
  char *data = NULL;
  size_t len = 0;
  int rc = plan_read_file(&data, &len, path, (size_t)64 << 20);
  if (rc == PLAN_ELIMIT)
    return plan_fail(rc, path, 0, 0, "a calibration file over 64 MiB");
  if (rc)
    return plan_fail(rc, path, 0, 0, "cannot read the calibration file: %s",
                     plan_error_last()->message);
  rc = plan_cost_model_load_calibration_buffer(m, data, len, path);
  free(data);
  return rc;
}
